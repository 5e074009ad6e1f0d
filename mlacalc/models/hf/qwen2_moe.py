"""Qwen1.5-MoE / Qwen2-MoE (``Qwen2MoeConfig``): Qwen2 attention (q, k, v biases), every FFN
a MoE of ``num_experts`` plus one shared expert of ``shared_expert_intermediate_size``
behind a sigmoid gate (``shared_expert_gate``: one weight row)."""

from mlacalc.models.architecture import Arch
from mlacalc.models.hf._layer_types import check_every_layer_moe
from mlacalc.models.hf._rules import head_dim_from_width
from mlacalc.models.registry import DEEPSEEK_MOE_FIELDS, Default, Family, HFInput, register


def _translate(data, raw, derived, problems) -> None:
    check_every_layer_moe(data, problems, "decoder_sparse_step", 1)
    check_every_layer_moe(data, problems, "mlp_only_layers", [])
    shared, width = (
        data.get("shared_expert_intermediate_size", 5632),
        raw.get("moe_intermediate_size", 1408),
    )
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
            derived.append(
                f"n_shared_experts = {shared // width} (shared_expert_intermediate_size / "
                "moe_intermediate_size: one gated shared expert of that width)"
            )


FAMILY = register(
    Family(
        name="qwen2_moe",
        model_types=("qwen2_moe",),
        layout="llama",
        hf_class="transformers Qwen2MoeConfig",
        stray=DEEPSEEK_MOE_FIELDS,
        renames={"num_experts": "n_routed_experts"},
        defaults={
            "head_dim": head_dim_from_width("Qwen2MoeConfig: hidden_size / num_attention_heads"),
            "num_key_value_heads": Default("Qwen2MoeConfig default", value=16),
            "tie_word_embeddings": Default("Qwen2MoeConfig default", value=False),
            "qkv_bias": Default("Qwen2 attention has q, k, v biases", value=True, warn=False),
            "n_routed_experts": Default("Qwen2MoeConfig num_experts default", value=60),
            "num_experts_per_tok": Default("Qwen2MoeConfig default", value=4),
            "moe_intermediate_size": Default("Qwen2MoeConfig default", value=1408),
        },
        inputs={
            "use_sliding_window": HFInput(
                "boolean",
                "Qwen2-MoE: sliding windows on the upper layers",
                refuse_when=True,
                refuse_why="per-layer sliding windows (use_sliding_window: true) are not modelled",
            ),
        },
        ignored={"sliding_window": "Qwen2-MoE reads it only with use_sliding_window: true"},
        irrelevant={
            "max_window_layers": "read only with use_sliding_window: true, which is refused"
        },
        reads=(
            "decoder_sparse_step",
            "mlp_only_layers",
            "shared_expert_intermediate_size",
        ),
        translate=_translate,
        moe=True,
        requires_experts=True,
        archs={
            "qwen2_moe": Arch(shared_gate=True),
        },
    )
)
