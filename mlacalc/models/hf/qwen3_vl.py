"""Qwen3-VL and Qwen3-VL-MoE (``Qwen3VLConfig``, ``Qwen3VLMoeConfig``; the language model in
``text_config``, model_type ``qwen3_vl_text`` / ``qwen3_vl_moe_text``).

The language model is Qwen3's (``Qwen3VLTextDecoderLayer``): per-head q/k RMSNorm, separate
q/k/v/o projections, a gated MLP of ``intermediate_size`` (``qwen3_vl``) or a MoE of
``num_experts`` in every layer (``qwen3_vl_moe``, as Qwen3-MoE). Its interleaved multimodal
RoPE (``rope_parameters.mrope_section``) and the DeepStack visual features added to the first
layers' hidden states change no parameter, cache byte or matrix product of the text model.

The vision tower (``vision_config``: the ViT, its patch merger and DeepStack mergers) is
reported apart: the counts here are the language model's, and the import notes the tower's
depth and width. The output head is tied as the wrapper's ``tie_word_embeddings`` says
(``Qwen3VLConfig`` default: false).
"""

from mlacalc.models.architecture import Arch
from mlacalc.models.hf._layer_types import check_every_layer_moe, lift_text_config
from mlacalc.models.registry import DEEPSEEK_MOE_FIELDS, ClassDefault, Default, Family, register

_RENAMES = {"num_experts": "n_routed_experts"}


def _translate(data, raw, derived, problems) -> None:
    text = lift_text_config(data, raw, _RENAMES)
    vision = data.get("vision_config")
    if "text_config" in data:
        tower = ""
        if isinstance(vision, dict):
            tower = (
                f" (depth {vision.get('depth', '?')}, hidden_size {vision.get('hidden_size', '?')})"
            )
        derived.append(
            f"read text_config (the language model); the vision tower{tower} is reported apart"
        )
    if isinstance(data.get("text_config"), dict) and "tie_word_embeddings" not in raw:
        raw["tie_word_embeddings"] = False
        derived.append(
            ClassDefault("tie_word_embeddings = False (the Qwen3VLConfig wrapper's default)")
        )
    if raw.get("model_type") == "qwen3_vl_moe_text":
        check_every_layer_moe(text, problems, "decoder_sparse_step", 1)
        check_every_layer_moe(text, problems, "mlp_only_layers", [])


FAMILY = register(
    Family(
        name="qwen3_vl",
        model_types=("qwen3_vl_text", "qwen3_vl_moe_text"),
        aliases={"qwen3_vl": "qwen3_vl_text", "qwen3_vl_moe": "qwen3_vl_moe_text"},
        layout="llama",
        hf_class="transformers Qwen3VLTextConfig / Qwen3VLMoeTextConfig (text_config)",
        stray=DEEPSEEK_MOE_FIELDS,
        stray_by_type={
            "qwen3_vl_text": ("moe_intermediate_size", "num_experts_per_tok", "num_experts"),
        },
        alias_wins={"qwen3_vl_moe_text": ("num_experts",)},  # the classes' attribute_map
        renames=_RENAMES,
        defaults={
            "head_dim": Default("Qwen3VLTextConfig default", value=128),
            "tie_word_embeddings": Default("Qwen3VLConfig default", value=False),
        },
        defaults_by_type={
            "qwen3_vl_text": {
                "num_key_value_heads": Default("Qwen3VLTextConfig default", value=32),
                "intermediate_size": Default("Qwen3VLTextConfig default", value=22016),
            },
            "qwen3_vl_moe_text": {
                "tie_word_embeddings": Default(
                    "Qwen3VLMoeTextConfig default (a Qwen3VLMoeConfig wrapper's is false)",
                    value=True,
                ),
                "num_key_value_heads": Default("Qwen3VLMoeTextConfig default", value=16),
                "n_routed_experts": Default("Qwen3VLMoeTextConfig num_experts", value=60),
                "num_experts_per_tok": Default("Qwen3VLMoeTextConfig default", value=4),
                "moe_intermediate_size": Default("Qwen3VLMoeTextConfig default", value=1408),
            },
        },
        reads=("decoder_sparse_step", "mlp_only_layers"),
        translate=_translate,
        moe=True,
        archs={
            "qwen3_vl_text": Arch(qk_norm="head"),
            "qwen3_vl_moe_text": Arch(qk_norm="head"),
        },
    )
)
