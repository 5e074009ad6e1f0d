"""Default rules several family units share (each unit still lists the ones it uses)."""

from __future__ import annotations

from ._registry import Default

__all__ = ["head_dim_from_width", "kv_heads_equal_heads", "mlp_four_times_width"]


def head_dim_from_width(why: str) -> Default:
    """``head_dim = hidden_size // num_attention_heads`` (the usual Hugging Face rule)."""
    return Default(
        why,
        rule=lambda v: v["hidden_size"] // v["num_attention_heads"],
        needs=("hidden_size", "num_attention_heads"),
    )


def kv_heads_equal_heads(why: str) -> Default:
    """``num_key_value_heads = num_attention_heads`` (multi-head attention)."""
    return Default(why, rule=lambda v: v["num_attention_heads"], needs=("num_attention_heads",))


def mlp_four_times_width(why: str) -> Default:
    """``intermediate_size = 4 * hidden_size`` (GPT-2 and Falcon MLPs)."""
    return Default(why, rule=lambda v: 4 * v["hidden_size"], needs=("hidden_size",))
