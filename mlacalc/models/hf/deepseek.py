"""DeepSeek-V2, DeepSeek-V3 and Kimi-K2 (``DeepseekV2Config``, ``DeepseekV3Config``): MLA + MoE.

Kimi-K2's ``config.json`` names DeepSeek-V3's configuration class, so it takes V3's defaults;
Kimi-K2.5 (``kimi_k25``) wraps the same language model in ``text_config``.
"""

from mlacalc.models.hf._layer_types import lift_text_config
from mlacalc.models.hf._rules import (
    MLA_IGNORED,
    MLA_MOE_REQUIRED,
    class_group_defaults,
    kv_heads_equal_heads,
)
from mlacalc.models.registry import Default, Family, register


def _translate(data, raw, derived, problems) -> None:
    if isinstance(data.get("text_config"), dict):  # Kimi-K2.5: the language model is text_config
        lift_text_config(data, raw, {"num_mtp_layers": "num_nextn_predict_layers"})
        derived.append("read text_config (the language model of the multimodal checkpoint)")
    if raw.get("q_lora_rank") == 0:
        raw["q_lora_rank"] = None
        derived.append("q_lora_rank = None (0 means no query compression)")
    if "n_routed_experts" in raw and raw["n_routed_experts"] is None:
        raw["n_routed_experts"] = 0
        derived.append("n_routed_experts = 0 (null means every FFN is dense)")


_V3 = {
    "n_shared_experts": Default("DeepseekV3Config default", value=1),
    "first_k_dense_replace": Default("DeepseekV3Config default", value=3),
    "topk_method": Default(
        "DeepseekV3 routers always carry e_score_correction_bias", value="noaux_tc", warn=False
    ),
    "num_nextn_predict_layers": Default("DeepseekV3Config num_mtp_layers default", value=1),
    # group-limited routing: the class's 8 groups, a token's experts from 4 (at most n_group
    # where a config states fewer groups: the router's top-k of groups needs as many)
    **class_group_defaults("DeepseekV3Config"),
}

FAMILY = register(
    Family(
        name="deepseek",
        model_types=("deepseek_v2", "deepseek_v3", "kimi_k2"),
        aliases={"kimi_k25": "kimi_k2"},
        layout="deepseek",
        hf_class="transformers DeepseekV2Config / DeepseekV3Config",
        stray=("moe_layer_offset",),
        renames={
            "num_mtp_layers": "num_nextn_predict_layers",
            "num_local_experts": "n_routed_experts",
            "num_experts": "n_routed_experts",
        },
        alias_wins={  # DeepseekV2Config / DeepseekV3Config.attribute_map
            "deepseek_v2": ("num_experts",),
            "deepseek_v3": ("num_local_experts", "num_mtp_layers"),
            "kimi_k2": ("num_local_experts", "num_mtp_layers"),
        },
        irrelevant={
            "seq_aux": "Kimi-K2: a sequence-level auxiliary loss (training)",
            "projection_hidden_size": "Kimi-K2.5: the vision projector (reported apart)",
            "projection_layer_norm_eps": "Kimi-K2.5: the vision projector (reported apart)",
        },
        defaults={
            "num_key_value_heads": kv_heads_equal_heads("MLA repeats num_attention_heads here"),
            "tie_word_embeddings": Default("DeepseekV2/V3Config default", value=False),
            "q_lora_rank": Default("DeepseekV2/V3Config default", value=1536),
            "moe_layer_freq": Default(
                "every layer after the dense ones is MoE", value=1, warn=False
            ),
        },
        defaults_by_type={
            "deepseek_v2": {
                "n_shared_experts": Default("DeepseekV2Config default", value=2),
                "first_k_dense_replace": Default("DeepseekV2Config default", value=0),
                "topk_method": Default("DeepseekV2Config default", value="greedy"),
                "num_nextn_predict_layers": Default(
                    "DeepseekV2Config has no MTP module", value=0, warn=False
                ),
            },
            "deepseek_v3": _V3,
            "kimi_k2": _V3,
        },
        required=MLA_MOE_REQUIRED,
        ignored=MLA_IGNORED,
        translate=_translate,
        moe=True,
        mtp=True,
        mla=True,
    )
)
