"""Mixtral (``MixtralConfig``): the Mistral layout with every FFN a mixture of experts."""

from mlacalc.models.hf._rules import head_dim_from_width
from mlacalc.models.registry import DEEPSEEK_MOE_WIDTH_FIELDS, Default, Family, register

FAMILY = register(
    Family(
        name="mixtral",
        model_types=("mixtral",),
        layout="llama",
        hf_class="transformers MixtralConfig",
        stray=DEEPSEEK_MOE_WIDTH_FIELDS,
        renames={"num_local_experts": "n_routed_experts", "num_experts": "n_routed_experts"},
        alias_wins={"mixtral": ("num_experts",)},  # MixtralConfig.attribute_map
        defaults={
            "head_dim": head_dim_from_width(
                "MixtralConfig: head_dim = hidden_size / num_attention_heads"
            ),
            "num_key_value_heads": Default("MixtralConfig default", value=8),
            "tie_word_embeddings": Default("MixtralConfig default", value=False),
            "n_routed_experts": Default("MixtralConfig num_local_experts default", value=8),
            "num_experts_per_tok": Default("MixtralConfig default", value=2),
            "moe_intermediate_size": Default(
                "Mixtral experts use intermediate_size",
                rule=lambda v: v["intermediate_size"],
                needs=("intermediate_size",),
            ),
        },
        moe=True,
        requires_experts=True,
    )
)
