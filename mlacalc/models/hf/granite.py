"""Granite (``GraniteConfig``): the Llama layout; its embedding, attention, residual and
logit multipliers scale activations and change no count."""

from mlacalc.models.hf._rules import head_dim_from_width, kv_heads_equal_heads
from mlacalc.models.registry import Default, Family, register

FAMILY = register(
    Family(
        name="granite",
        model_types=("granite",),
        layout="llama",
        hf_class="transformers GraniteConfig",
        defaults={
            "head_dim": head_dim_from_width("GraniteConfig: hidden_size / num_attention_heads"),
            "num_key_value_heads": kv_heads_equal_heads("GraniteConfig: absent means MHA"),
            "tie_word_embeddings": Default("GraniteConfig default", value=False),
        },
    )
)
