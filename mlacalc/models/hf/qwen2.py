"""Qwen2 and Qwen2.5 (``Qwen2Config``): the Llama layout with q, k and v biases."""

from mlacalc.models.hf._rules import head_dim_from_width
from mlacalc.models.registry import Default, Family, HFInput, register

FAMILY = register(
    Family(
        name="qwen2",
        model_types=("qwen2",),
        layout="llama",
        hf_class="transformers Qwen2Config",
        defaults={
            "head_dim": head_dim_from_width("Qwen2: head_dim = hidden_size / num_attention_heads"),
            "num_key_value_heads": Default("Qwen2Config default", value=32),
            "tie_word_embeddings": Default("Qwen2Config default", value=False),
            "qkv_bias": Default("Qwen2 attention has q, k, v biases", value=True, warn=False),
        },
        inputs={
            "use_sliding_window": HFInput(
                "boolean",
                "Qwen2: sliding windows on the upper layers",
                refuse_when=True,
                refuse_why="per-layer sliding windows (use_sliding_window: true) are not modelled",
                refuse_fix="set use_sliding_window: false to count every layer with full "
                "attention (its cache then an upper bound of the windowed one)",
            ),
        },
        ignored={"sliding_window": "Qwen2 reads it only with use_sliding_window: true"},
        irrelevant={
            "max_window_layers": "read only with use_sliding_window: true, which is refused"
        },
    )
)
