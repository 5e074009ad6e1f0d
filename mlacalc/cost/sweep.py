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

import warnings
from typing import Any

import numpy as np

from mlacalc.cost import _generated as gen
from mlacalc.cost.attention import op_weight_bits
from mlacalc.cost.engine import evaluate, model_dims, model_layer_key, resolve_impl
from mlacalc.models.architecture import arch_of
from mlacalc.models.loading import ModelConfig, model_argument
from mlacalc.models.schema import BOUNDS
from mlacalc.words import arguments as args
from mlacalc.words.dtypes import KVLayout, dtype_bits
from mlacalc.words.errors import ConfigError, InvalidArgumentError, MlacalcWarning
from mlacalc.words.vocab import FIELD_SYMBOLS, PHASES, SWEEP_QUANTITIES, Impl, Phase

__all__ = ["SWEEP_DIMENSIONS", "SWEEP_QUANTITIES", "sweep"]

#: config field -> symbol it sets
SWEEP_DIMENSIONS = FIELD_SYMBOLS


def _counts(name: str, value: Any, hi: int) -> np.ndarray:
    """A number or array of whole numbers in ``1 .. hi``, as float64 (exact below 2^53)."""
    if isinstance(value, (bool, np.bool_, str, bytes)) or value is None:
        raise InvalidArgumentError(
            name, f"must be a positive integer or an array of them, got {value!r}"
        )
    if isinstance(value, (list, tuple)) and _holds_bool(value):  # [True, 512]: not 1
        raise InvalidArgumentError(
            name, "must hold positive integers, not True or False (a bool is not a count)"
        )
    try:
        arr = np.asarray(value)
    except (TypeError, ValueError, OverflowError):
        raise InvalidArgumentError(name, "must be a positive integer or an array of them") from None
    if arr.dtype.kind not in "iuf" or arr.size == 0:
        raise InvalidArgumentError(
            name, f"must hold positive integers, got an array of {arr.dtype} with {arr.size} values"
        )
    arr = arr.astype(np.float64)
    if not np.all(np.isfinite(arr)) or np.any(arr <= 0) or np.any(arr != np.floor(arr)):
        raise InvalidArgumentError(name, "must hold whole numbers of at least 1")
    if np.any(arr > hi):
        raise InvalidArgumentError(name, f"holds a value above the bound of {hi:,}")
    return arr


def _holds_bool(value: Any) -> bool:
    """Whether a (nested) list or tuple holds a bool anywhere."""
    return any(
        isinstance(v, (bool, np.bool_)) or (isinstance(v, (list, tuple)) and _holds_bool(v))
        for v in value
    )


#: Up to this many distinct combinations of the swept values are each checked as loading
#: checks them; past it, the representative ones (:func:`_representatives`)
EACH_UP_TO = 256


def _representatives(flat: np.ndarray) -> np.ndarray:
    """The rows of ``flat`` (one column a swept field) that hold, in some column, that field's
    smallest or largest value, or its smallest or largest of each parity: what loading's
    rules on one value (its bounds, a RoPE width's evenness) turn on, checked on a few
    models, not one per value (``kv_lora_rank`` 1 .. 10,000: 0.01 s, not 5.65 s). Head counts
    swept together are checked for divisibility by :func:`_check_head_groups`."""
    rows: set[int] = set()
    for col in flat.T:
        for part in (col % 2 == 0, col % 2 == 1):
            idx = np.flatnonzero(part)
            if idx.size:
                rows.update((int(idx[np.argmin(col[idx])]), int(idx[np.argmax(col[idx])])))
    return np.array(sorted(rows), dtype=np.int64)


def _check_broadcast(arrays: dict[str, np.ndarray]) -> None:
    """Arrays that numpy cannot broadcast together are refused, naming them and their shapes."""
    shapes = {k: np.shape(v) for k, v in arrays.items() if np.ndim(v)}
    try:
        np.broadcast_shapes(*shapes.values())
    except ValueError:
        seen: dict[str, tuple] = {}
        for k, shape in shapes.items():
            for j, other in seen.items():
                try:
                    np.broadcast_shapes(shape, other)
                except ValueError:
                    raise InvalidArgumentError(
                        k,
                        f"has shape {shape}, which does not broadcast against {j} of shape "
                        f"{other}; give arrays of one length, or shape them to broadcast "
                        f"(e.g. {j}[:, None] for a grid)",
                    ) from None
            seen[k] = shape


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
    phase: Phase = "decode",
    q_len: Any = None,
    impl: Impl | None = None,
    causal: bool = False,
    kv_dtype: str | int | KVLayout = "bf16",
    weight_dtype: str | None = None,
    act_dtype: str = "bf16",
    **dimensions: Any,
) -> np.ndarray:
    """Evaluate a quantity over arrays of ``seq_len``, ``batch``, ``q_len`` or model dimensions.

    Arrays broadcast against each other (numpy rules). ``dimensions`` override
    config fields by their schema names (``num_key_value_heads``, ``kv_lora_rank``,
    ... see :data:`SWEEP_DIMENSIONS`), each value (each combination of several) checked
    as loading checks it (:meth:`ModelConfig.with_changes`): a value it refuses is an
    :class:`InvalidArgumentError` naming the field, the value and its index. Returns float64.
    """
    m = model_argument(model)
    args.choice("quantity", quantity, SWEEP_QUANTITIES)
    args.choice("phase", phase, PHASES)
    causal = args.flag("causal", causal)
    layout = args.kv_layout("kv_dtype", kv_dtype)
    weight_dtype = args.dtype("weight_dtype", weight_dtype, allow_none=True)
    act_dtype = args.dtype("act_dtype", act_dtype)
    _check_sweepable(m, dimensions)
    impl_name = resolve_impl(m, impl, None if quantity == "kv_cache_bytes" else phase)
    _check_model_dimensions(m, dimensions)
    values, layers = _dimension_values(m, dimensions)
    S = _counts("seq_len", seq_len, args.MAX_TOKENS)
    B = _counts("batch", batch, args.MAX_BATCH)
    named = {"seq_len": S, "batch": B}
    for k in dimensions:
        named[k] = layers if SWEEP_DIMENSIONS[k] == "L" else values[SWEEP_DIMENSIONS[k]]
    _check_head_groups(m, values, named)
    _check_each_value(m, {k: named[k] for k in dimensions})
    if q_len is not None and phase == "chunk":
        named["q_len"] = _counts("q_len", q_len, args.MAX_TOKENS)
    _check_broadcast(named)
    window = m.sliding_window
    keys = S if window is None else np.minimum(S, window)
    fns = gen.LAYERS[model_layer_key(m, impl_name)]
    row = evaluate(fns.kv_row_elements, values)
    ops_row_bytes, row_bytes = _row_bytes(m, impl, impl_name, layout, values, row)
    if quantity == "kv_cache_bytes":
        return np.asarray(layers * B * keys * row_bytes, dtype=np.float64)
    q = _query_tokens(phase, S, q_len)
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
    w_bits = dtype_bits(weight_dtype or m.weights_dtype)
    ops = [  # a norm's weights keep 16 bits, as mlacalc.cost.attention reads them
        op._replace(weight_read=op.weight_read * op_weight_bits(op.stage, w_bits) / w_bits)
        if op_weight_bits(op.stage, w_bits) != w_bits
        else op
        for op in ops
    ]
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


def _check_sweepable(m: ModelConfig, dimensions: dict[str, Any]) -> None:
    """Refuse a dimension sweep cannot set, and a model whose layers differ or that has a
    lightning indexer (sweep evaluates one kind of layer, no indexer)."""
    unknown = [k for k in dimensions if k not in SWEEP_DIMENSIONS]
    if unknown:
        raise InvalidArgumentError(
            unknown[0], "cannot be swept; use one of " + ", ".join(SWEEP_DIMENSIONS)
        )
    if (
        m.full_attention_interval is not None
        or m.attention_chunk_size is not None
        or m.full_attention_layers
        or m.block_types
        or m.mamba_num_heads is not None
        or m.mamba_dt_rank is not None
        or m.sliding_key_value_heads is not None  # MiMo-V2-Flash: sliding layers' own KV heads
    ):
        raise InvalidArgumentError(
            "model",
            f"{m.label} has layers of different kinds; sweep evaluates models whose layers "
            "are alike: use kv_cache_bytes / attention_cost per value (exact)",
        )
    if m.compress_ratios:
        raise InvalidArgumentError(
            "model",
            f"{m.label} has DeepSeek-V4's compressed attention (compress_ratios); sweep's "
            "formulas do not hold its pooled keys or compressors: use kv_cache_bytes / "
            "attention_cost per value (exact)",
        )
    if m.sparse_block_size is not None:
        raise InvalidArgumentError(
            "model",
            f"{m.label} has block-sparse attention with an indexer (sparse_block_size); sweep "
            "does not model its indexer keys, indexer FLOPs or chosen blocks: use "
            "kv_cache_bytes / attention_cost per value (exact)",
        )
    if m.index_topk is not None:
        raise InvalidArgumentError(
            "model",
            f"{m.label} uses sparse attention with a lightning indexer (index_topk); sweep "
            "does not model its indexer keys, indexer FLOPs or top-k window: use "
            "kv_cache_bytes / attention_cost per value (exact)",
        )
    if getattr(arch_of(m), "head_gate", False):
        raise InvalidArgumentError(
            "model",
            f"{m.label} has a per-head output gate (g_proj) that sweep's formulas do not hold: "
            "use kv_cache_bytes / attention_cost per value (exact)",
        )


def _check_model_dimensions(m: ModelConfig, dimensions: dict[str, Any]) -> None:
    """Refuse a field the model's formulas do not use (it would be ignored), naming those
    that can be swept on this model."""
    own = model_dims(m)
    for name in dimensions:
        sym = SWEEP_DIMENSIONS[name]
        if sym != "L" and (sym not in own or (sym == "d_cq" and not m.q_lora_rank)):
            kind = "MLA" if m.is_mla else "MHA/GQA/MQA"
            fix = (
                "sweep it on a model with query compression (q_lora_rank set)"
                if sym == "d_cq"
                else "sweep one of "
                + ", ".join(
                    f
                    for f, v in SWEEP_DIMENSIONS.items()
                    if v == "L" or (v in own and (v != "d_cq" or m.q_lora_rank))
                )
            )
            raise InvalidArgumentError(
                name, f"is not a dimension of {m.label} ({kind} attention); {fix}"
            )


def _dimension_values(
    m: ModelConfig, dimensions: dict[str, Any]
) -> tuple[dict[str, Any], np.ndarray]:
    """The formulas' symbol values as float64 (the model's, with the swept ones in their
    place) and the layer count (the model's, or the swept ``num_hidden_layers``)."""
    values: dict[str, Any] = {k: np.asarray(v, dtype=np.float64) for k, v in model_dims(m).items()}
    layers = np.asarray(m.num_hidden_layers, dtype=np.float64)
    for name, value in dimensions.items():
        arr = _counts(name, value, BOUNDS.get(name, args.MAX_TOKENS))
        if SWEEP_DIMENSIONS[name] == "L":
            layers = arr
        else:
            values[SWEEP_DIMENSIONS[name]] = arr
    return values, layers


def _check_head_groups(m: ModelConfig, values: dict[str, Any], named: dict[str, Any]) -> None:
    """With swept heads (MHA/GQA/MQA), every KV head count must divide its query heads."""
    if m.is_mla or not ("num_key_value_heads" in named or "num_attention_heads" in named):
        return
    n_h, n_kv = values["n_h"], values["n_kv"]
    try:
        h, kv = np.broadcast_arrays(n_h, n_kv)
        bad = bool(np.any(h % kv))
    except ValueError:
        bad = False  # reported by _check_broadcast, naming the arrays
    if bad:
        swept = "num_key_value_heads" if "num_key_value_heads" in named else "num_attention_heads"
        raise InvalidArgumentError(
            swept,
            "num_key_value_heads must divide num_attention_heads (each KV head serves a "
            f"whole group of query heads), got {n_kv.astype(np.int64).tolist()} KV heads "
            f"for {n_h.astype(np.int64).tolist()} heads",
        )


def _check_each_value(m: ModelConfig, swept: dict[str, np.ndarray]) -> None:
    """Each swept value (each combination, several dimensions swept together) through the
    validation loading runs (:meth:`ModelConfig.with_changes`, the same function, not a copy
    of its rules): a value loading refuses (an odd ``qk_rope_head_dim``) is refused here too,
    named with its position. Warnings loading would give are not repeated per value. Past
    :data:`EACH_UP_TO` combinations, the representative ones (:func:`_representatives`:
    each field's range and parity classes), one model each."""
    if not swept:
        return
    names = list(swept)
    try:
        arrays = np.broadcast_arrays(*(np.asarray(swept[n]) for n in names))
    except ValueError:
        return  # reported by _check_broadcast, naming the arrays
    flat = np.stack([a.ravel() for a in arrays], axis=1)
    combos, first = np.unique(flat, axis=0, return_index=True)
    if len(combos) > EACH_UP_TO:
        first = _representatives(flat)
        combos = flat[first]
    for combo, at in sorted(zip(combos.tolist(), first.tolist()), key=lambda c: c[1]):
        change = {n: int(v) for n, v in zip(names, combo)}
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", MlacalcWarning)
                m.with_changes(**change)
        except ConfigError as err:
            field = err.field if err.field in names else names[0]
            where = tuple(int(i) for i in np.unravel_index(at, arrays[0].shape))
            index = f" at index {where[0] if len(where) == 1 else tuple(where)}" if where else ""
            others = ", ".join(f"{k}={v}" for k, v in change.items() if k != field)
            why = err.message + (f" ({err.fix})" if err.fix and err.fix not in err.message else "")
            raise InvalidArgumentError(
                field,
                f"holds {change[field]}{index}"
                + (f" (with {others})" if others else "")
                + f", which loading refuses: {why}",
            ) from None


def _row_bytes(m: ModelConfig, impl: Impl | None, impl_name: str, layout: KVLayout, values, row):
    """Bytes of one cached row of the ops' layout, and of the cache the model keeps (MLA's
    serving default runs expanded ops in prefill but keeps the latent)."""
    latent_cache = m.is_mla and (impl_name != "naive" or impl is None)
    ops_row_bytes = (
        layout.row_bytes(values["d_c"], values["d_rope"])
        if (m.is_mla and impl_name != "naive")
        else layout.row_bytes(row, 0.0)
    )
    row_bytes = layout.row_bytes(values["d_c"], values["d_rope"]) if latent_cache else ops_row_bytes
    return ops_row_bytes, row_bytes


def _query_tokens(phase: Phase, S: np.ndarray, q_len: Any) -> np.ndarray:
    """New tokens per sequence: the whole prompt, one, or a chunk of ``q_len`` (at most S)."""
    if phase == "prefill":
        return S
    if phase == "decode":
        return np.ones_like(S)
    if q_len is None:
        raise InvalidArgumentError("q_len", "phase='chunk' needs q_len")
    q = _counts("q_len", q_len, args.MAX_TOKENS)
    if np.any(q > S):
        raise InvalidArgumentError("q_len", "must be between 1 and seq_len")
    return q
