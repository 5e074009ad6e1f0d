"""GLM-4.7-Flash (``Glm4MoeLiteConfig``): DeepSeek-V3's layout in a GLM family: MLA attention
(``kv_lora_rank``, ``q_lora_rank``), one dense FFN layer then MoE layers with a shared expert
and a router correction bias. The dense/MoE split comes from ``mlp_layer_types`` (default:
the first layer dense) or ``first_k_dense_replace``."""

from mlacalc.models.hf._layer_types import read_mlp_layer_types
from mlacalc.models.hf._rules import MLA_IGNORED, MLA_MOE_REQUIRED, kv_heads_equal_heads
from mlacalc.models.registry import Default, Family, register

FAMILY = register(
    Family(
        name="glm4_moe_lite",
        model_types=("glm4_moe_lite",),
        layout="deepseek",
        hf_class="transformers Glm4MoeLiteConfig",
        stray=("moe_layer_freq", "moe_layer_offset", "topk_method"),
        alias_wins={"glm4_moe_lite": ("num_local_experts",)},  # the classes' attribute_map
        renames={"num_local_experts": "n_routed_experts"},
        defaults={
            "num_key_value_heads": kv_heads_equal_heads("MLA repeats num_attention_heads here"),
            "tie_word_embeddings": Default("Glm4MoeLiteConfig default", value=False),
            "q_lora_rank": Default("Glm4MoeLiteConfig default", value=768),
            "n_shared_experts": Default("Glm4MoeLiteConfig default", value=1),
            "first_k_dense_replace": Default(
                "Glm4MoeLiteConfig mlp_layer_types default: the first layer dense", value=1
            ),
            "moe_layer_freq": Default(
                "every layer after the dense ones is MoE", value=1, warn=False
            ),
            "topk_method": Default(
                "Glm4MoeLite routers carry e_score_correction_bias", value="noaux_tc", warn=False
            ),
            "num_nextn_predict_layers": Default("absent: no MTP module", value=0, warn=False),
        },
        required=MLA_MOE_REQUIRED,
        ignored=MLA_IGNORED,
        reads=("mlp_layer_types",),
        translate=read_mlp_layer_types,
        moe=True,
        mtp=True,
        mla=True,
    )
)
