"""Llama (``LlamaConfig``): RMSNorm, rotary embeddings, gated MLP, GQA."""

from mlacalc.models.hf._rules import head_dim_from_width, kv_heads_equal_heads
from mlacalc.models.registry import Default, Family, register

FAMILY = register(
    Family(
        name="llama",
        model_types=("llama",),
        layout="llama",
        hf_class="transformers LlamaConfig",
        defaults={
            "head_dim": head_dim_from_width(
                "LlamaConfig: head_dim = hidden_size / num_attention_heads"
            ),
            "num_key_value_heads": kv_heads_equal_heads("LlamaConfig: absent means MHA"),
            "tie_word_embeddings": Default("LlamaConfig default", value=False),
        },
    )
)
