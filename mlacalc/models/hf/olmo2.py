"""OLMo 2 and OLMoE (``Olmo2Config``, ``OlmoeConfig``): the Llama layout with RMSNorm over the
whole query and key projections (``q_norm`` of ``n_h d_h``, ``k_norm`` of ``n_kv d_h``). OLMo 2
normalizes after attention and after the MLP (two norms per layer, none before); OLMoE before
them, and makes every FFN a mixture of ``num_experts`` experts of ``intermediate_size`` with a
router without bias. ``clip_qkv`` clamps activations (no count)."""

from mlacalc.models.architecture import Arch
from mlacalc.models.hf._rules import head_dim_from_width
from mlacalc.models.registry import DEEPSEEK_MOE_WIDTH_FIELDS, Default, Family, register


def _translate(data, raw, derived, problems) -> None:
    if raw.get("model_type") == "olmoe" and "intermediate_size" in raw:
        raw.setdefault("moe_intermediate_size", raw["intermediate_size"])
        derived.append("moe_intermediate_size = intermediate_size (OLMoE experts)")


FAMILY = register(
    Family(
        name="olmo2",
        model_types=("olmo2", "olmoe"),
        layout="llama",
        hf_class="transformers Olmo2Config / OlmoeConfig",
        stray=DEEPSEEK_MOE_WIDTH_FIELDS,
        stray_by_type={
            "olmo2": ("num_experts_per_tok", "num_experts", "num_local_experts"),
        },
        alias_wins={"olmoe": ("num_local_experts",)},  # the classes' attribute_map
        renames={"num_experts": "n_routed_experts", "num_local_experts": "n_routed_experts"},
        defaults={
            "head_dim": head_dim_from_width("OLMo: hidden_size / num_attention_heads"),
            "tie_word_embeddings": Default("Olmo2Config / OlmoeConfig default", value=False),
        },
        defaults_by_type={
            "olmo2": {"num_key_value_heads": Default("Olmo2Config default", value=32)},
            "olmoe": {
                "num_key_value_heads": Default("OlmoeConfig default", value=16),
                "n_routed_experts": Default("OlmoeConfig num_experts default", value=64),
                "num_experts_per_tok": Default("OlmoeConfig default", value=8),
                "moe_intermediate_size": Default(
                    "OLMoE experts use intermediate_size",
                    rule=lambda v: v["intermediate_size"],
                    needs=("intermediate_size",),
                ),
            },
        },
        irrelevant={"clip_qkv": "clamps q, k and v activations (element-wise)"},
        translate=_translate,
        moe=True,
        archs={
            "olmo2": Arch(qk_norm="full"),
            "olmoe": Arch(qk_norm="full"),
        },
    )
)
