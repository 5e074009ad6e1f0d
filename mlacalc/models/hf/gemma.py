"""Gemma (``GemmaConfig``): the Llama layout with 256-wide heads and a tied output head."""

from mlacalc.models.registry import Default, Family, HFInput, register

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
        inputs={
            "use_bidirectional_attention": HFInput(
                "boolean",
                "text tokens attend both ways (an embedding model, not a causal LM)",
                refuse_when=True,
                refuse_why="bidirectional attention (an encoder) is not modelled: causal LMs only",
            )
        },
    )
)
