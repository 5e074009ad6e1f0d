"""DeepSeek sparse attention: DeepSeek-V3.2 (``DeepseekV32Config``) and GLM-5
(``GlmMoeDsaConfig``). DeepSeek-V3's MLA + MoE layout; each layer adds a lightweight
indexer (``index_n_heads`` heads of ``index_head_dim``: ``wq_b`` from the query latent,
``wk`` with a LayerNorm, ``weights_proj``) that caches one key per token, scores every key
and lets the query attend the ``index_topk`` best."""

from mlacalc.models.architecture import Arch
from mlacalc.models.hf._layer_types import read_mlp_layer_types
from mlacalc.models.hf._rules import (
    MLA_IGNORED,
    MLA_MOE_REQUIRED,
    class_group_defaults,
    kv_heads_equal_heads,
)
from mlacalc.models.patterns import shared_indexer_layers
from mlacalc.models.registry import Default, Family, register


def _translate(data, raw, derived, problems) -> None:
    read_mlp_layer_types(data, raw, derived, problems)
    if data.get("model_type") != "glm_moe_dsa":
        return
    shared = shared_indexer_layers(data)
    if shared is None:
        problems.append(
            (
                "indexer_types",
                "must list 'full' or 'shared' per layer (or index_topk_pattern / "
                "index_topk_freq / index_skip_topk_offset state the schedule)",
                None,
            )
        )
        return
    if shared and shared[0] == 1:
        problems.append(
            ("indexer_types", "the first layer cannot be shared: no earlier top-k to reuse", None)
        )
    elif shared:
        raw["shared_indexer_layers"] = shared
        derived.append(
            f"shared_indexer_layers: {len(shared)} of the layers reuse the previous layer's "
            "top-k (no indexer weights, no indexer key cached)"
        )


def _class(name: str, **values) -> dict[str, Default]:
    return {k: Default(f"{name} default", value=v) for k, v in values.items()}


FAMILY = register(
    Family(
        name="dsa",
        model_types=("deepseek_v32", "glm_moe_dsa"),
        layout="deepseek",
        hf_class="transformers DeepseekV32Config / GlmMoeDsaConfig",
        stray=("moe_layer_offset",),
        alias_wins={
            "deepseek_v32": ("num_local_experts",),
            "glm_moe_dsa": ("num_local_experts",),
        },  # the classes' attribute_map
        renames={
            "num_mtp_layers": "num_nextn_predict_layers",
            "num_local_experts": "n_routed_experts",
        },
        defaults={
            "num_key_value_heads": kv_heads_equal_heads("MLA repeats num_attention_heads here"),
            "tie_word_embeddings": Default(
                "DeepseekV32Config / GlmMoeDsaConfig default", value=False
            ),
            "moe_layer_freq": Default(
                "every layer after the dense ones is MoE", value=1, warn=False
            ),
            "topk_method": Default(
                "DSA routers carry e_score_correction_bias", value="noaux_tc", warn=False
            ),
            "num_nextn_predict_layers": Default("absent: no MTP module", value=0, warn=False),
        },
        defaults_by_type={
            "deepseek_v32": _class(
                "DeepseekV32Config",
                q_lora_rank=1536,
                n_shared_experts=1,
                first_k_dense_replace=3,
                index_n_heads=64,
                index_head_dim=128,
                index_topk=2048,
            )
            | class_group_defaults("DeepseekV32Config"),
            "glm_moe_dsa": _class(
                "GlmMoeDsaConfig",
                q_lora_rank=2048,
                n_shared_experts=1,
                first_k_dense_replace=3,
                index_n_heads=32,
                index_head_dim=128,
                index_topk=2048,
            ),
        },
        required=MLA_MOE_REQUIRED,
        ignored=MLA_IGNORED,
        reads=(
            "mlp_layer_types",
            "indexer_types",
            "index_topk_pattern",
            "index_topk_freq",
            "index_skip_topk_offset",
        ),
        translate=_translate,
        moe=True,
        mtp=True,
        mla=True,
        archs={
            "deepseek_v32": Arch(correction_bias=True, indexer=True),
            "glm_moe_dsa": Arch(correction_bias=True, indexer=True),
        },
    )
)
