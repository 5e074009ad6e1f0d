"""Qwen3 and Qwen3-MoE (``Qwen3Config``, ``Qwen3MoeConfig``): the Llama layout with per-head
RMSNorm on queries and keys; Qwen3-MoE makes every FFN a mixture of ``num_experts``."""

from mlacalc.models.architecture import Arch
from mlacalc.models.hf._layer_types import check_every_layer_moe
from mlacalc.models.hf._rules import head_dim_from_width
from mlacalc.models.registry import DEEPSEEK_MOE_FIELDS, Default, Family, HFInput, register

_SLIDING = HFInput(
    "boolean",
    "Qwen3: sliding windows on the upper layers",
    refuse_when=True,
    refuse_why="per-layer sliding windows (use_sliding_window: true) are not modelled for Qwen3",
)


def _translate(data, raw, derived, problems) -> None:
    if data.get("model_type") == "qwen3_moe":
        check_every_layer_moe(data, problems, "decoder_sparse_step", 1)
        check_every_layer_moe(data, problems, "mlp_only_layers", [])


FAMILY = register(
    Family(
        name="qwen3",
        model_types=("qwen3", "qwen3_moe"),
        layout="llama",
        hf_class="transformers Qwen3Config / Qwen3MoeConfig",
        stray=DEEPSEEK_MOE_FIELDS,
        stray_by_type={
            "qwen3": ("moe_intermediate_size", "num_experts_per_tok", "num_experts"),
        },
        alias_wins={"qwen3_moe": ("num_experts",)},  # the classes' attribute_map
        renames={"num_experts": "n_routed_experts"},
        defaults_by_type={  # each note names the file's own class
            "qwen3": {
                "head_dim": Default("Qwen3Config default", value=128),
                "tie_word_embeddings": Default("Qwen3Config default", value=False),
                "num_key_value_heads": Default("Qwen3Config default", value=32),
            },
            "qwen3_moe": {
                "head_dim": head_dim_from_width(  # the class has no head_dim field
                    "Qwen3MoeConfig: head_dim = hidden_size / num_attention_heads"
                ),
                "tie_word_embeddings": Default("Qwen3MoeConfig default", value=False),
                "num_key_value_heads": Default("Qwen3MoeConfig default", value=4),
                "n_routed_experts": Default("Qwen3MoeConfig num_experts default", value=128),
                "num_experts_per_tok": Default("Qwen3MoeConfig default", value=8),
                "moe_intermediate_size": Default("Qwen3MoeConfig default", value=768),
            },
        },
        inputs={"use_sliding_window": _SLIDING},
        reads=("decoder_sparse_step", "mlp_only_layers"),
        ignored={"sliding_window": "Qwen3 reads it only with use_sliding_window: true"},
        irrelevant={
            "max_window_layers": "read only with use_sliding_window: true, which is refused"
        },
        translate=_translate,
        moe=True,
        archs={
            "qwen3": Arch(qk_norm="head"),
            "qwen3_moe": Arch(qk_norm="head"),
        },
    )
)
