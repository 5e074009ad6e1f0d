"""ERNIE 4.5 dense (``Ernie4_5Config``): the Llama layout with biases on every attention and
MLP projection when ``use_bias``, 128-wide heads, a tied head by default."""

from mlacalc.models.registry import Default, Family, HFInput, register


def _translate(data, raw, derived, problems) -> None:
    if data.get("use_bias") is True:
        raw["attention_bias"] = raw["mlp_bias"] = True
        derived.append("attention_bias = mlp_bias = True (use_bias)")


FAMILY = register(
    Family(
        name="ernie4_5",
        model_types=("ernie4_5",),
        layout="llama",
        hf_class="transformers Ernie4_5Config",
        defaults={
            "head_dim": Default("Ernie4_5Config default", value=128),
            "num_key_value_heads": Default("Ernie4_5Config default", value=2),
            "tie_word_embeddings": Default("Ernie4_5Config default", value=True),
        },
        inputs={"use_bias": HFInput("boolean", "biases on every attention and MLP projection")},
        translate=_translate,
    )
)
