"""Seed-OSS (``SeedOssConfig``): the Llama layout with biases on the q, k and v projections
(``attention_bias``, default true), on ``o_proj`` only with ``attention_out_bias`` and on the
gated MLP with ``mlp_bias``. An output bias without q/k/v biases is refused (not modelled)."""

from mlacalc.models.registry import Default, Family, HFInput, register


def _translate(data, raw, derived, problems) -> None:
    qkv = data.get("attention_bias", True)
    out = data.get("attention_out_bias", False)
    raw.pop("attention_bias", None)
    if out and not qkv:
        problems.append(
            (
                "attention_out_bias",
                "an o_proj bias without q/k/v biases is not modelled",
                "attention_out_bias: false",
            )
        )
        return
    if qkv and out:
        raw["attention_bias"] = True
        derived.append("attention_bias = True (q/k/v and o_proj biases)")
    elif qkv:
        raw["qkv_bias"] = True
        derived.append("qkv_bias = True (SeedOssConfig attention_bias: q/k/v biases)")


FAMILY = register(
    Family(
        name="seed_oss",
        model_types=("seed_oss",),
        layout="llama",
        hf_class="transformers SeedOssConfig",
        defaults={
            "head_dim": Default("SeedOssConfig default", value=128),
            "num_key_value_heads": Default("SeedOssConfig default", value=8),
            "tie_word_embeddings": Default("SeedOssConfig default", value=False),
        },
        inputs={
            "attention_out_bias": HFInput("boolean", "a bias on o_proj"),
        },
        reads=("attention_out_bias",),
        translate=_translate,
    )
)
