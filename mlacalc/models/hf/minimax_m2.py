"""MiniMax-M2 (``MiniMaxM2Config``): GQA with RMSNorm over the whole query and key
projections, every FFN a MoE of ``num_local_experts`` experts of ``intermediate_size``,
routers with a correction bias. The checkpoint's MTP modules (``num_mtp_modules``) are not
in the Hugging Face implementation and are not counted."""

from mlacalc.models.architecture import Arch
from mlacalc.models.registry import DEEPSEEK_MOE_WIDTH_FIELDS, Default, Family, register


def _translate(data, raw, derived, problems) -> None:
    if data.get("use_qk_norm") is False or data.get("qk_norm_type") not in (None, "per_layer"):
        problems.append(
            (
                "qk_norm_type",
                "MiniMax-M2 is modelled with per_layer query/key norms (use_qk_norm: true)",
                "use qk_norm_type: per_layer",
            )
        )
    if data.get("shared_intermediate_size"):
        problems.append(
            ("shared_intermediate_size", "shared experts are not modelled for MiniMax-M2", None)
        )
    elif "shared_intermediate_size" in raw:  # 0: no shared expert (not the schema's width)
        del raw["shared_intermediate_size"]
    if data.get("num_mtp_modules"):
        derived.append(
            f"MTP modules ({data['num_mtp_modules']}) not counted: the Hugging Face "
            "implementation has none"
        )


FAMILY = register(
    Family(
        name="minimax_m2",
        model_types=("minimax_m2",),
        layout="llama",
        hf_class="transformers MiniMaxM2Config",
        stray=DEEPSEEK_MOE_WIDTH_FIELDS,
        alias_wins={"minimax_m2": ("num_experts",)},  # the classes' attribute_map
        renames={"num_local_experts": "n_routed_experts", "num_experts": "n_routed_experts"},
        defaults={
            "head_dim": Default("MiniMaxM2Config default", value=128),
            "num_key_value_heads": Default("MiniMaxM2Config default", value=8),
            "tie_word_embeddings": Default("MiniMaxM2Config default", value=False),
            "num_experts_per_tok": Default("MiniMaxM2Config default", value=8),
            "moe_intermediate_size": Default(
                "MiniMax-M2 experts use intermediate_size",
                rule=lambda v: v["intermediate_size"],
                needs=("intermediate_size",),
            ),
            "topk_method": Default(
                "MiniMax-M2 routers carry e_score_correction_bias", value="noaux_tc", warn=False
            ),
        },
        reads=("use_qk_norm", "qk_norm_type", "shared_intermediate_size", "num_mtp_modules"),
        translate=_translate,
        moe=True,
        requires_experts=True,
        archs={
            "minimax_m2": Arch(qk_norm="full", correction_bias=True),
        },
    )
)
