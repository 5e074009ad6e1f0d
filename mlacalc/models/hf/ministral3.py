"""Ministral 3 (``Ministral3Config``, in ``text_config`` of the multimodal checkpoint): the
Llama layout (RMSNorm, GQA, gated MLP)."""

from mlacalc.models.hf._layer_types import lift_text_config
from mlacalc.models.registry import Default, Family, register


def _translate(data, raw, derived, problems) -> None:
    if isinstance(data.get("text_config"), dict):
        lift_text_config(data, raw, {})
        derived.append("read text_config (the language model of the multimodal checkpoint)")


FAMILY = register(
    Family(
        name="ministral3",
        model_types=("ministral3",),
        layout="llama",
        hf_class="transformers Ministral3Config",
        defaults={
            "head_dim": Default("Ministral3Config default", value=128),
            "num_key_value_heads": Default("Ministral3Config default", value=8),
            "tie_word_embeddings": Default("Ministral3Config default", value=False),
        },
        translate=_translate,
    )
)
