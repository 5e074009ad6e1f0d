"""MiniCPM (``minicpm``: MiniCPM-1B/2B, published modeling code, no transformers class).

The rule, read from its published configuration: the Llama layout. Each of the
``num_hidden_layers`` layers holds an RMSNorm before attention and one before the MLP,
rotary attention with separate q, k, v (``n_h d_h``, ``n_kv d_h``, ``n_kv d_h`` rows of
``d``) and o (``d x n_h d_h``) projections without biases, and a gated SiLU MLP of
``intermediate_size``; then a final RMSNorm and the output head. ``scale_emb`` (multiplies
the embeddings), ``dim_model_base`` (divides the hidden state before the head) and
``scale_depth`` (scales each residual branch by ``scale_depth / sqrt(L)``) scale
activations and change no count, so they are read as nothing.

The head is tied to the input embedding exactly when ``tie_word_embeddings`` is true; an
absent key takes the configuration class default, true (MiniCPM's 2B checkpoints share
the table, which is what the card's 2.7B counts). A config that states ``false`` (the
MiniCPM-2B config.json shipped with the 128K checkpoint) has its own head of ``V x d``.
"""

from mlacalc.models.hf._rules import head_dim_from_width, kv_heads_equal_heads
from mlacalc.models.registry import Default, Family, register


def _translate(data, raw, derived, problems) -> None:
    """Say what an untied head adds: MiniCPM's cards count the tied model."""
    vocab, width = raw.get("vocab_size"), raw.get("hidden_size")
    if raw.get("tie_word_embeddings") is False and all(
        isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in (vocab, width)
    ):
        derived.append(
            f"tie_word_embeddings is false as stated: the output head is its own "
            f"vocab_size x hidden_size table ({vocab * width:,} parameters); MiniCPM's cards "
            "count the model with the head tied to the embedding"
        )


FAMILY = register(
    Family(
        name="minicpm",
        model_types=("minicpm",),
        layout="llama",
        hf_class="published modeling code (MiniCPMConfig; no transformers class)",
        defaults={
            "head_dim": head_dim_from_width("MiniCPM: hidden_size / num_attention_heads"),
            "num_key_value_heads": kv_heads_equal_heads("MiniCPMConfig: absent means MHA"),
            "tie_word_embeddings": Default(
                "MiniCPMConfig default: the head shares the embedding", value=True
            ),
        },
        translate=_translate,
    )
)
