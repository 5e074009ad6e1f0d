"""Mistral (``MistralConfig``): the Llama layout; 8 KV heads and a 4096-token window by default."""

from mlacalc.models.hf._rules import head_dim_from_width
from mlacalc.models.registry import Default, Family, register

FAMILY = register(
    Family(
        name="mistral",
        model_types=("mistral",),
        layout="llama",
        hf_class="transformers MistralConfig",
        defaults={
            "head_dim": head_dim_from_width(
                "MistralConfig: head_dim = hidden_size / num_attention_heads"
            ),
            "num_key_value_heads": Default("MistralConfig default", value=8),
            "tie_word_embeddings": Default("MistralConfig default", value=False),
            "sliding_window": Default("MistralConfig default", value=4096),
        },
    )
)
