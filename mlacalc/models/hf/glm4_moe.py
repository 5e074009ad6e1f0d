"""GLM-4.5 / GLM-4.7 (``Glm4MoeConfig``): GQA with q/k/v biases when ``attention_bias``,
``first_k_dense_replace`` dense layers, then MoE layers with shared experts and a router
correction bias; ``num_nextn_predict_layers`` MTP modules (reported apart)."""

from mlacalc.models.architecture import Arch
from mlacalc.models.hf._rules import head_dim_from_width
from mlacalc.models.registry import Default, Family, HFInput, register


def _translate(data, raw, derived, problems) -> None:
    if data.get("attention_bias"):
        raw["qkv_bias"] = True
        derived.append("qkv_bias = True (GLM-4.5 attention_bias: biases on q, k and v, not o)")
    raw.pop("attention_bias", None)


FAMILY = register(
    Family(
        name="glm4_moe",
        model_types=("glm4_moe",),
        layout="llama",
        hf_class="transformers Glm4MoeConfig",
        stray=("moe_layer_freq", "moe_layer_offset", "topk_method"),
        alias_wins={
            "glm4_moe": ("num_local_experts", "num_mtp_layers")
        },  # the classes' attribute_map
        renames={
            "num_mtp_layers": "num_nextn_predict_layers",
            "num_local_experts": "n_routed_experts",
        },
        defaults={
            "head_dim": head_dim_from_width("Glm4MoeConfig: hidden_size / num_attention_heads"),
            "num_key_value_heads": Default("Glm4MoeConfig default", value=8),
            "tie_word_embeddings": Default("Glm4MoeConfig default", value=False),
            "n_routed_experts": Default("Glm4MoeConfig default", value=128),
            "n_shared_experts": Default("Glm4MoeConfig default", value=1),
            "num_experts_per_tok": Default("Glm4MoeConfig default", value=8),
            "moe_intermediate_size": Default("Glm4MoeConfig default", value=1408),
            "first_k_dense_replace": Default("Glm4MoeConfig default", value=1),
            "topk_method": Default(
                "Glm4Moe routers always carry e_score_correction_bias", value="noaux_tc", warn=False
            ),
            "num_nextn_predict_layers": Default("Glm4MoeConfig default", value=1),
        },
        inputs={
            "use_qk_norm": HFInput(
                "boolean",
                "GLM-4.5: RMSNorm on queries and keys",
                refuse_when=True,
                refuse_why="query/key norms (use_qk_norm: true) are not modelled for glm4_moe",
                refuse_fix="set use_qk_norm: false to count the model without them (their "
                "weights are head_dim-wide vectors, a rounding error of the parameters)",
            ),
        },
        translate=_translate,
        moe=True,
        mtp=True,
        archs={
            "glm4_moe": Arch(correction_bias=True),
        },
    )
)
