"""Hunyuan MoE V1 (``HunYuanMoEV1Config``, Hunyuan-A13B): per-head q/k RMSNorm
(``query_layernorm``, ``key_layernorm``), and in every layer a MoE of ``num_experts`` experts
of ``intermediate_size`` beside one shared MLP of the same width (``shared_mlp``), a router
without bias. ``moe_topk`` may list one value per layer: one value for every layer is read,
different ones are refused. The transformers class reads no per-layer expert width: keys such
as ``moe_intermediate_size`` lists in published configs are not read by the reference either."""

from mlacalc.models.architecture import Arch
from mlacalc.models.hf._rules import head_dim_from_width
from mlacalc.models.registry import DEEPSEEK_MOE_WIDTH_FIELDS, Default, Family, register

_RENAMES = {"num_experts": "n_routed_experts", "num_local_experts": "n_routed_experts"}


def _translate(data, raw, derived, problems) -> None:
    topk = data.get("moe_topk", 1)
    if isinstance(topk, list):
        if not topk or len(set(map(repr, topk))) != 1:
            problems.append(
                ("moe_topk", "different experts per token by layer are not modelled", None)
            )
            return
        topk = topk[0]
        derived.append(f"num_experts_per_tok = {topk!r} (moe_topk, the same in every layer)")
    raw["num_experts_per_tok"] = topk
    if isinstance(raw.get("intermediate_size"), int):
        raw["moe_intermediate_size"] = raw["intermediate_size"]
        raw["n_shared_experts"] = 1
        derived.append("moe_intermediate_size = intermediate_size; one shared MLP of that width")


FAMILY = register(
    Family(
        name="hunyuan_v1_moe",
        model_types=("hunyuan_v1_moe",),
        layout="llama",
        hf_class="transformers HunYuanMoEV1Config",
        stray=DEEPSEEK_MOE_WIDTH_FIELDS,
        alias_wins={"hunyuan_v1_moe": ("num_local_experts",)},  # the classes' attribute_map
        renames=_RENAMES,
        defaults={
            "head_dim": head_dim_from_width("HunYuanMoEV1: hidden_size / num_attention_heads"),
            "num_key_value_heads": Default(
                "HunYuanMoEV1Config: absent means multi-head",
                rule=lambda v: v["num_attention_heads"],
                needs=("num_attention_heads",),
            ),
            "tie_word_embeddings": Default("HunYuanMoEV1Config default", value=False),
            "n_routed_experts": Default("HunYuanMoEV1Config num_experts default", value=1),
        },
        reads=("moe_topk",),
        irrelevant={"eod_token_id": "a token id of the tokenizer"},
        translate=_translate,
        moe=True,
        archs={"hunyuan_v1_moe": Arch(qk_norm="head")},
    )
)
