"""Gemma (``GemmaConfig``): the Llama layout with 256-wide heads and a tied output head."""

from mlacalc.models.registry import Default, Family, register

FAMILY = register(
    Family(
        name="gemma",
        model_types=("gemma",),
        layout="llama",
        hf_class="transformers GemmaConfig",
        defaults={
            "head_dim": Default("GemmaConfig default", value=256),
            "num_key_value_heads": Default("GemmaConfig default", value=16),
            "tie_word_embeddings": Default("Gemma ties its output head by default", value=True),
        },
    )
)
