"""Qwen3-Next (``Qwen3NextConfig``): three Gated DeltaNet linear-attention layers for every
full one (``full_attention_interval``), gated full attention (``q_proj`` also yields an output
gate, per-head q/k RMSNorm), every FFN a MoE of ``num_experts`` plus a gated shared expert.
A linear layer keeps a fixed state per sequence (its convolution window and a key x value
matrix per value head), no per-token cache. Parameters and cache bytes are modelled; FLOPs
of the linear layers are not, and are refused by name."""

from mlacalc.models.architecture import Arch
from mlacalc.models.hf._layer_types import check_every_layer_moe, read_layer_types
from mlacalc.models.registry import DEEPSEEK_MOE_FIELDS, Default, Family, HFInput, register


def _translate(data, raw, derived, problems) -> None:
    check_every_layer_moe(data, problems, "decoder_sparse_step", 1)
    check_every_layer_moe(data, problems, "mlp_only_layers", [])
    types = data.get("layer_types")
    if types is not None:
        read_layer_types(
            {
                **data,
                "layer_types": [
                    "sliding_attention" if t == "linear_attention" else t for t in types
                ]
                if isinstance(types, list)
                else types,
            },
            raw,
            derived,
            problems,
            off="sliding_attention",
            default_interval=4,
        )
        raw.pop("sliding_window", None)
    shared = data.get("shared_expert_intermediate_size", 512)
    width = raw.get("moe_intermediate_size", 512)
    if isinstance(shared, int) and isinstance(width, int) and width > 0:
        if shared % width:
            problems.append(
                (
                    "shared_expert_intermediate_size",
                    f"{shared} is not a multiple of moe_intermediate_size {width}",
                    "the shared expert is modelled as n_shared_experts experts of that width",
                )
            )
        else:
            raw["n_shared_experts"] = shared // width
            stated = "shared_expert_intermediate_size" in data
            derived.append(
                f"n_shared_experts = {shared // width} (the shared expert of "
                f"shared_expert_intermediate_size {shared}"
                + ("" if stated else ", the Qwen3NextConfig default")
                + f", as experts of moe_intermediate_size {width})"
            )


FAMILY = register(
    Family(
        name="qwen3_next",
        model_types=("qwen3_next",),
        layout="llama",
        hf_class="transformers Qwen3NextConfig",
        stray=DEEPSEEK_MOE_FIELDS,
        renames={"num_experts": "n_routed_experts"},
        defaults={
            "head_dim": Default("Qwen3NextConfig default", value=256),
            "num_key_value_heads": Default("Qwen3NextConfig default", value=2),
            "tie_word_embeddings": Default("Qwen3NextConfig default", value=False),
            "n_routed_experts": Default("Qwen3NextConfig num_experts default", value=512),
            "num_experts_per_tok": Default("Qwen3NextConfig default", value=10),
            "moe_intermediate_size": Default("Qwen3NextConfig default", value=512),
            "full_attention_interval": Default("Qwen3NextConfig default", value=4),
            "linear_num_key_heads": Default("Qwen3NextConfig default", value=16),
            "linear_num_value_heads": Default("Qwen3NextConfig default", value=32),
            "linear_key_head_dim": Default("Qwen3NextConfig default", value=128),
            "linear_value_head_dim": Default("Qwen3NextConfig default", value=128),
            "linear_conv_kernel_dim": Default("Qwen3NextConfig default", value=4),
        },
        inputs={
            "use_sliding_window": HFInput(
                "boolean",
                "Qwen3-Next: sliding windows",
                refuse_when=True,
                refuse_why="use_sliding_window: true is not modelled for Qwen3-Next",
            ),
        },
        ignored={"sliding_window": "Qwen3-Next reads it only with use_sliding_window: true"},
        reads=(
            "decoder_sparse_step",
            "mlp_only_layers",
            "layer_types",
            "shared_expert_intermediate_size",
        ),
        translate=_translate,
        moe=True,
        requires_experts=True,
        linear=True,
        archs={
            "qwen3_next": Arch(
                qk_norm="head", shared_gate=True, gated_query=True, off_pattern="linear"
            ),
        },
    )
)
