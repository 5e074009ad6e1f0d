"""Vectorised sweeps: numpy arrays of lengths, batches or dimensions in, arrays out.

The same generated functions as the exact scalar path are evaluated on float64
arrays, so a sweep agrees with :func:`mlacalc.kv_cache_bytes` and
:func:`mlacalc.attention_flops` wherever float64 is exact (below 2**53).

>>> import numpy as np
>>> from mlacalc import sweep
>>> sweep("deepseek-v3", "kv_cache_bytes", seq_len=np.array([1, 1024])).tolist()
[70272.0, 71958528.0]
>>> heads = np.array([1, 8, 32])
>>> sweep("llama-3-8b", "kv_cache_bytes", seq_len=1, num_key_value_heads=heads).tolist()
[16384.0, 131072.0, 524288.0]
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import _generated as gen
from .config import ModelConfig, load_model
from .dtypes import KVLayout, dtype_bits, resolve_kv_layout
from .engine import evaluate, model_dims, model_layer_key, resolve_impl
from .errors import InvalidArgumentError
from .vocab import FIELD_SYMBOLS, SWEEP_QUANTITIES

__all__ = ["SWEEP_DIMENSIONS", "SWEEP_QUANTITIES", "sweep"]

#: config field -> symbol it sets
SWEEP_DIMENSIONS = FIELD_SYMBOLS


def _pairs(q, S, window, causal):
    keys = S if window is None else np.minimum(S, window)
    if not causal:
        return q * keys
    lo, hi = S - q + 1, S

    def tri(a, c):
        return np.where(c >= a, (a + c) * (c - a + 1) / 2, 0.0)

    if window is None:
        return tri(lo, hi)
    return np.where(
        hi <= window,
        tri(lo, hi),
        np.where(lo >= window, q * window, tri(lo, window) + (hi - window) * window),
    )


def sweep(
    model: ModelConfig | str,
    quantity: str,
    *,
    seq_len: Any = 1,
    batch: Any = 1,
    phase: str = "decode",
    q_len: Any = None,
    impl: str | None = None,
    causal: bool = False,
    kv_dtype: str | int | KVLayout = "bf16",
    weight_dtype: str | None = None,
    act_dtype: str = "bf16",
    **dimensions: Any,
) -> np.ndarray:
    """Evaluate a quantity over arrays of ``seq_len``, ``batch``, ``q_len`` or model dimensions.

    Arrays broadcast against each other (numpy rules). ``dimensions`` override
    config fields by their schema names (``num_key_value_heads``, ``kv_lora_rank``,
    ... see :data:`SWEEP_DIMENSIONS`). Returns float64.
    """
    m = model if isinstance(model, ModelConfig) else load_model(model)
    if quantity not in SWEEP_QUANTITIES:
        raise InvalidArgumentError(
            "quantity",
            f"unknown sweep quantity {quantity!r}; use one of " + ", ".join(SWEEP_QUANTITIES),
        )
    unknown = [k for k in dimensions if k not in SWEEP_DIMENSIONS]
    if unknown:
        raise InvalidArgumentError(
            unknown[0], "cannot be swept; use one of " + ", ".join(SWEEP_DIMENSIONS)
        )
    impl_name = resolve_impl(m, impl, None if quantity == "kv_cache_bytes" else phase)
    values: dict[str, Any] = {k: np.asarray(v, dtype=np.float64) for k, v in model_dims(m).items()}
    layers = np.asarray(m.num_hidden_layers, dtype=np.float64)
    for name, value in dimensions.items():
        arr = np.asarray(value, dtype=np.float64)
        if np.any(arr <= 0):
            raise InvalidArgumentError(name, "dimensions must be positive")
        if SWEEP_DIMENSIONS[name] == "L":
            layers = arr
        else:
            values[SWEEP_DIMENSIONS[name]] = arr
    S = np.asarray(seq_len, dtype=np.float64)
    B = np.asarray(batch, dtype=np.float64)
    if np.any(S <= 0) or np.any(B <= 0):
        raise InvalidArgumentError("seq_len" if np.any(S <= 0) else "batch", "must be positive")
    window = m.sliding_window
    keys = S if window is None else np.minimum(S, window)
    layout = resolve_kv_layout(kv_dtype)
    fns = gen.LAYERS[model_layer_key(m, impl_name)]
    row = evaluate(fns.kv_row_elements, values)

    def layout_bytes(main, rope):
        rope_bits = layout.bits if layout.rope_bits is None else layout.rope_bits
        out = np.ceil(main * layout.bits / 8) + np.ceil(rope * rope_bits / 8)
        if layout.scale_group:
            out = out + np.ceil(main / layout.scale_group) * layout.scale_bytes
        return out

    # bytes of one cached row of the ops' layout, and of the cache the model keeps
    # (MLA's serving default runs expanded ops in prefill but keeps the latent)
    latent_cache = m.is_mla and (impl_name != "naive" or impl is None)
    ops_row_bytes = (
        layout_bytes(values["d_c"], values["d_rope"])
        if (m.is_mla and impl_name != "naive")
        else layout_bytes(row, 0.0)
    )
    row_bytes = layout_bytes(values["d_c"], values["d_rope"]) if latent_cache else ops_row_bytes
    if quantity == "kv_cache_bytes":
        return np.asarray(layers * B * keys * row_bytes, dtype=np.float64)

    if phase == "prefill":
        q = S
    elif phase == "decode":
        q = np.ones_like(S)
    elif phase == "chunk":
        if q_len is None:
            raise InvalidArgumentError("q_len", "phase='chunk' needs q_len")
        q = np.asarray(q_len, dtype=np.float64)
        if np.any(q > S) or np.any(q <= 0):
            raise InvalidArgumentError("q_len", "must be between 1 and seq_len")
    else:
        raise InvalidArgumentError("phase", f"unknown phase {phase!r}")
    values.update(
        B=B,
        q=q,
        S=keys,
        P=_pairs(q, S, window, causal),
        b=ops_row_bytes / row,
        b_w=dtype_bits(weight_dtype or m.weights_dtype) / 8,
        b_a=dtype_bits(act_dtype) / 8,
    )
    if quantity == "attention_flops":
        return np.asarray(layers * evaluate(fns.matmul_flops, values), dtype=np.float64)
    ops = evaluate(fns.ops, values)
    if quantity == "unfused_bytes":
        total = sum(
            op.act_read + op.weight_read + op.cache_read + op.act_write + op.cache_write
            for op in ops
        )
    else:
        weights = sum(op.weight_read for op in ops)
        total = (
            weights
            + 2 * B * q * values["d"] * values["b_a"]
            + B * keys * row_bytes
            + B * q * row_bytes
        )
    return np.asarray(layers * total, dtype=np.float64)
