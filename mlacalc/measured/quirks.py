"""The stated rules for the known quirks of the measured tables.

Quirks are handled, never fitted: each rule either excludes rows (they are counted as not
predicted, by reason) or flags them for the time model. In the order applied:

1. **Duplicated keys** (flag ``duplicate_key``): the A100 MLA tables repeat one local-head key
   for several ``tp_size`` labels (``tp_size`` is a label only). The repeats are real
   measurements of the same kernel, so they are kept and predicted; each counts once more as a
   row. Of the rows with equal columns apart from ``tp_size`` and the time, every row but the one
   with the smallest ``tp_size`` is flagged.
2. **NCCL duplicate sweeps** (flag ``duplicate_sweep``): the H100 ``nccl_perf`` holds two full
   sweeps of every key (op, dtype, GPUs, message size), one after the other in the file. They
   are repeat measurements of the same kernel (median ratio of the second sweep to the first
   1.001, 52% of keys slower the second time, median 0.65% apart, 0.15% at 100 MB and up;
   31 of 504 keys more than 10% apart), so both are kept and predicted, as the repeated A100
   MLA keys are; the slower row of each key is flagged (exact duplicates flag the second).
3. **A100 "fp8" MLA** (mapping rule, flag ``fp8_label_is_bf16``): A100 has no fp8 tensor cores
   and its MLA rows labelled fp8 KV time the same as the bf16 rows (median ratio 1.000): they
   ran the bf16-KV kernels and are mapped as such (bf16 cache, bf16 queries), and predicted.
4. **Faster than HBM** (``faster_than_hbm``): a decode-attention row (``generation_attention``)
   whose K/V read is larger than the L2 and whose time is shorter than that read at the
   datasheet HBM bandwidth cannot have read the cache the mapping says it reads; it is
   excluded. The read is the one the mapping records (``kv_reads``): K and V, except the A100
   rows the mapping's K-only rule reads as K alone (the collector's K-only cache: V is K's
   buffer, read from the L2; the grouped-query rows, and the one-head rows whose resident
   units' K fits the L2). Rows whose cache fits in the L2 may legitimately beat HBM. On the
   shipped sets the rule now excludes no row.
5. **Spikes** (``spike``): along each table's sweep axis (tokens, sequence length, message
   size), with every other column fixed, a row more than :data:`SPIKE_FACTOR` times *both* of
   its sweep neighbours is an isolated spike and is excluded. End points of a sweep have one
   neighbour and are never called spikes.
6. **A100 MLA decode without key splitting** (flag ``non_split_kv``): the A100 generation MLA
   kernel does not split keys across SMs, so at small batch it leaves SMs idle; its kernels
   carry ``kv_split = 0`` and the rows are flagged for the time model, not excluded.
7. **MoE slower than more work** (``slower_than_more_work``): a ``moe_perf`` row whose GPU does
   at most what another row of the same call (dtype, tokens, hidden, intermediate, top-k,
   experts, kernel) and the same kernel path (:func:`moe_kernel_paths`: a row of another tuned
   config or fixed tile runs other kernels) does on its GPU, yet takes more than
   :data:`MORE_WORK_FACTOR` times as long, did not time the same kernels (the collector allows
   an eager fallback and does not record it), or, for a power-law row, its single replay after
   one warm-up (balanced rows: 6 after 3) timed more than the kernels' steady state, which is
   what the product predicts; it is excluded. The rows that do at least a row's work: those of
   the same routing with ``moe_tp_size`` and ``moe_ep_size`` both no larger (a wider slice of
   the same experts' columns; a rank holding a contiguous block of ``E/ep`` experts: the straggler's
   block at a larger ``ep`` lies inside a block of the smaller ``ep``, which carries no more
   than the straggler there), and the balanced row at ``moe_ep_size`` 1 with ``moe_tp_size``
   no larger (its one rank computes every assignment of the call, spread over the most
   experts any routing touches). The rows it excludes (4,652 H100, none A100) take a median
   of 4.0x (quartiles 3.3x and 4.7x) the time the fitted model gives their kernels, often over
   whole stretches of a token sweep, while the rows doing more work match it. Which
   configurations run slow recurs across dtypes and devices but follows no column
   (docs/measured-sets.md, rule 8): they stay excluded.
"""

from __future__ import annotations

from itertools import pairwise

import numpy as np

from mlacalc.hardware.catalogue import load_hardware
from mlacalc.measured.mapped import MappedTable, canon_dtypes
from mlacalc.measured.tables import SYSTEM_L2_BYTES

__all__ = [
    "MOE_PATH_COLUMNS",
    "MORE_WORK_FACTOR",
    "SPIKE_FACTOR",
    "SWEEPS",
    "apply_quirks",
    "moe_kernel_paths",
    "slower_than_more_work",
]

#: A row more than this many times both sweep neighbours is a spike.
SPIKE_FACTOR = 3.0

#: A MoE row more than this many times a row whose GPU does all of its work and more is excluded.
MORE_WORK_FACTOR = 2.0

#: The columns that fix one MoE call apart from its parallel split and routing.
_MOE_CALL = (
    "moe_dtype",
    "num_tokens",
    "hidden_size",
    "inter_size",
    "topk",
    "num_experts",
    "kernel_source",
)

#: Table -> (sweep column, columns that stay fixed along a sweep).
SWEEPS: dict[str, tuple[str, tuple[str, ...]]] = {
    "gemm_perf": ("m", ("gemm_dtype", "kernel_source", "n", "k")),
    "context_attention_perf": (
        "isl",
        (
            "batch_size",
            "num_heads",
            "num_key_value_heads",
            "head_dim",
            "window_size",
            "attn_dtype",
            "kv_cache_dtype",
            "kernel_source",
        ),
    ),
    "generation_attention_perf": (
        "step",
        (
            "batch_size",
            "num_heads",
            "num_key_value_heads",
            "head_dim",
            "window_size",
            "attn_dtype",
            "kv_cache_dtype",
            "kernel_source",
        ),
    ),
    "context_mla_perf": ("isl", ("kv_cache_dtype", "num_heads", "batch_size", "tp_size")),
    "generation_mla_perf": ("step", ("kv_cache_dtype", "num_heads", "batch_size", "tp_size")),
    "mla_context_module_perf": (
        "isl",
        ("kv_cache_dtype", "gemm_type", "mla_dtype", "kernel_source", "num_heads", "batch_size"),
    ),
    "mla_generation_module_perf": (
        "step",
        ("kv_cache_dtype", "gemm_type", "num_heads", "batch_size"),
    ),
    "mla_bmm_perf": ("num_tokens", ("op_name", "bmm_dtype", "kernel_source", "num_heads")),
    "moe_perf": (
        "num_tokens",
        (
            "moe_dtype",
            "kernel_source",
            "hidden_size",
            "inter_size",
            "topk",
            "num_experts",
            "moe_tp_size",
            "moe_ep_size",
            "distribution",
        ),
    ),
    "custom_allreduce_perf": ("message_size", ("num_gpus", "backend")),
    "nccl_perf": ("message_size", ("op_name", "nccl_dtype", "num_gpus")),
    "wideep_deepep_ll_perf": ("num_token", ("measure", "hidden_size", "num_topk", "num_experts")),
    "wideep_deepep_normal_perf": (
        "num_token",
        ("measure", "hidden_size", "num_topk", "num_experts", "dispatch_sms", "combine_sms"),
    ),
    "scale_matrix_perf": ("m", ("k",)),
    "computescale_perf": ("m", ("k",)),
}


def _group_ids(columns: dict[str, np.ndarray], names: tuple[str, ...], n: int) -> np.ndarray:
    """One integer per row, equal for rows equal in every column of ``names`` (the groups
    alone carry meaning, not the order of their numbers)."""
    key = np.zeros(n, dtype=np.int64)
    for c in names:
        if c not in columns:
            continue
        codes, count = _codes(columns[c])
        key = key * count + codes
        if count > 1 and key.max() > 2**40:  # keep the mixed-radix key small
            key = np.unique(key, return_inverse=True)[1].ravel()
    return np.unique(key, return_inverse=True)[1].ravel()


def _codes(col: np.ndarray) -> tuple[np.ndarray, int]:
    """Per row a code of its value in ``col``, equal for equal values (in no particular
    order), and how many codes there are: a column of one value costs one comparison, a
    column of text one pass (a sort of strings, ``np.unique``, took most of
    :func:`_group_ids`)."""
    if col.size and bool((col == col[0]).all()):
        return np.zeros(col.size, dtype=np.int64), 1
    if col.dtype.kind in "US":
        seen: dict = {}
        codes = np.fromiter((seen.setdefault(v, len(seen)) for v in col.tolist()), np.int64)
        return codes, len(seen)
    values, codes = np.unique(col, return_inverse=True)
    return codes.ravel(), len(values)


def _first_by(group: np.ndarray, order_key: np.ndarray, candidates: np.ndarray) -> np.ndarray:
    """Mask of the rows that come first in their group by ``order_key`` (ties: lowest index)."""
    idx = np.nonzero(candidates)[0]
    keep = np.zeros(candidates.shape[0], dtype=bool)
    if idx.size == 0:
        return keep
    order = idx[np.lexsort((idx, order_key[idx], group[idx]))]
    g = group[order]
    first = np.ones(order.size, dtype=bool)
    first[1:] = g[1:] != g[:-1]
    keep[order[first]] = True
    return keep


def spikes(
    columns: dict[str, np.ndarray],
    seconds: np.ndarray,
    sweep: str,
    fixed: tuple[str, ...],
    candidates: np.ndarray,
    factor: float = SPIKE_FACTOR,
) -> np.ndarray:
    """Rows more than ``factor`` times both sweep neighbours (among ``candidates``)."""
    n = seconds.shape[0]
    out = np.zeros(n, dtype=bool)
    idx = np.nonzero(candidates)[0]
    if idx.size < 3 or sweep not in columns:
        return out
    group = _group_ids(columns, fixed, n)
    order = idx[np.lexsort((columns[sweep][idx], group[idx]))]
    g, t = group[order], seconds[order]
    mid = np.arange(1, order.size - 1)
    same = (g[mid - 1] == g[mid]) & (g[mid + 1] == g[mid])
    hit = same & (t[mid] > factor * t[mid - 1]) & (t[mid] > factor * t[mid + 1])
    out[order[mid[hit]]] = True
    return out


def slower_than_more_work(
    columns: dict[str, np.ndarray],
    seconds: np.ndarray,
    candidates: np.ndarray,
    factor: float = MORE_WORK_FACTOR,
    path: np.ndarray | None = None,
) -> np.ndarray:
    """MoE rows more than ``factor`` times the fastest row (among ``candidates``) of the same
    call whose GPU does at least the same work: same routing with ``moe_tp_size`` and
    ``moe_ep_size`` both no larger, or balanced at ``moe_ep_size`` 1 with ``moe_tp_size`` no
    larger. With ``path`` (one integer a row: the kernel path the mapping fixes from the row's
    columns, :func:`moe_kernel_paths`) only rows of one path are compared."""
    n = seconds.shape[0]
    out = np.zeros(n, dtype=bool)
    if "moe_tp_size" not in columns or "moe_ep_size" not in columns:
        return out
    idx = np.nonzero(candidates)[0]
    group = _group_ids(columns, _MOE_CALL, n)
    if path is not None:  # the rows of one group and one path (a mixed-radix key of the two)
        path = np.asarray(path, dtype=np.int64)
        group = np.unique(group * (int(path.max(initial=0)) + 1) + path, return_inverse=True)[1]
        group = group.ravel()
    order = idx[np.argsort(group[idx], kind="stable")]
    g = group[order]
    bounds = np.flatnonzero(np.r_[True, g[1:] != g[:-1], True])
    tp, ep = columns["moe_tp_size"], columns["moe_ep_size"]
    dist = columns.get("distribution", np.full(n, "balanced"))
    routing = np.unique(dist, return_inverse=True)[1].ravel()
    whole = (dist == "balanced") & (ep == 1)  # one rank computing every assignment
    for a, b in pairwise(bounds):
        rows = order[a:b]
        if rows.size < 2:
            continue
        more = (tp[rows][None, :] <= tp[rows][:, None]) & (
            (
                (ep[rows][None, :] <= ep[rows][:, None])
                & (routing[rows][None, :] == routing[rows][:, None])
            )
            | whole[rows][None, :]
        )
        np.fill_diagonal(more, False)
        fastest = np.where(more, seconds[rows][None, :], np.inf).min(axis=1)
        out[rows] = seconds[rows] > factor * fastest
    return out


#: The shape columns by which the mapping fixes a MoE row's kernel path from its columns
#: (:func:`moe_kernel_paths`): SGLang's Triton fused MoE runs a tuned config or its default one
#: by the rank's experts and intermediate size (``tuned_config``), the default config's tile by
#: the tokens over the rank's experts (``col_tile``), and the fixed row tiles (``row_tile``) of
#: the Triton MXFP4, TensorRT-LLM-gen and Marlin MoE kernels by the mean load.
MOE_PATH_COLUMNS = ("tuned_config", "row_tile", "col_tile")


def moe_kernel_paths(mapped: MappedTable) -> np.ndarray:
    """One integer a row of a mapped ``moe_perf`` table, equal for rows whose kernel path, as
    the mapping fixes it from the row's columns (:data:`MOE_PATH_COLUMNS`), is the same: a row
    of another path runs other kernels, which may take longer on less work."""
    n = len(mapped.table)
    values = np.zeros((len(MOE_PATH_COLUMNS), n))
    for p in mapped.parts:
        for i, c in enumerate(MOE_PATH_COLUMNS):
            if c in p.batch.shape:
                values[i, p.rows] = p.batch.shape[c]
    return _group_ids(dict(zip(MOE_PATH_COLUMNS, values)), MOE_PATH_COLUMNS, n)


def _flag_repeats(
    mapped: MappedTable, flag: str, group: np.ndarray, order_key: np.ndarray, what: str
) -> None:
    """Flag every row of a ``group`` but the first by ``order_key``: repeat measurements of one
    kernel, kept and predicted."""
    repeat = ~_first_by(group, order_key, np.ones(group.shape[0], dtype=bool))
    count = int(repeat.sum())
    if count:
        mapped.flags[flag] = repeat
        mapped.rules.append(f"{flag}: {count} {what}")


def apply_quirks(mapped: MappedTable) -> None:
    """Apply the rules above to ``mapped`` in place (reasons, flags and the rules used)."""
    t = mapped.table
    cols, n = t.columns, len(t)
    a100 = t.system == "a100_sxm"

    if "tp_size" in cols:
        fixed = tuple(c for c in cols if c not in ("tp_size", "latency"))
        group = _group_ids(cols, fixed, n)
        _flag_repeats(
            mapped,
            "duplicate_key",
            group,
            cols["tp_size"],
            "rows repeat a local-head key under another tp_size label; they are measurements "
            "of the same kernel, kept and predicted",
        )

    if t.table == "nccl_perf":
        group = _group_ids(cols, ("op_name", "nccl_dtype", "num_gpus", "message_size"), n)
        _flag_repeats(
            mapped,
            "duplicate_sweep",
            group,
            t.seconds,
            "rows are the slower of two sweeps of one key; repeat measurements of the same "
            "kernel, kept and predicted",
        )

    if a100 and t.table in ("context_mla_perf", "generation_mla_perf") and "kv_cache_dtype" in cols:
        relabelled = canon_dtypes(cols["kv_cache_dtype"]) == "fp8"
        mapped.flags["fp8_label_is_bf16"] = relabelled
        mapped.rules.append(
            f"fp8_label_is_bf16: {int(relabelled.sum())} A100 rows labelled fp8 KV time as the "
            "bf16 rows; they are mapped as the bf16-KV kernels they ran"
        )

    if t.table == "generation_attention_perf":
        bw = load_hardware(t.device).memory_bandwidth_bytes_per_s
        l2 = SYSTEM_L2_BYTES.get(t.system, 0)
        kv_read = np.zeros(n)
        for p in mapped.parts:
            if p.batch.kind == "attention_decode":
                # the cache passes the mapping reads from HBM: K and V, or K alone where its
                # K-only rule reads V from the L2 (A100 grouped-query rows)
                kv = (
                    p.batch.shape["batch"]
                    * p.batch.shape.get("kv_reads", 2.0)
                    * p.batch.shape["n_kv"]
                    * p.batch.shape["head_dim_qk"]
                    * p.batch.shape["kv_bytes"]
                    * np.where(
                        p.batch.shape["window"] > 0,
                        np.minimum(p.batch.shape["kv_len"], p.batch.shape["window"]),
                        p.batch.shape["kv_len"],
                    )
                )
                kv_read[p.rows] = kv
        fast = (kv_read > l2) & (t.seconds < kv_read / bw)
        count = mapped.exclude(fast, "faster_than_hbm")
        mapped.rules.append(
            f"faster_than_hbm: {count} rows read a K/V cache larger than L2 faster "
            "than the datasheet HBM bandwidth allows"
        )

    if t.table in SWEEPS:
        sweep, fixed = SWEEPS[t.table]
        hit = spikes(cols, t.seconds, sweep, fixed, mapped.reason == "")
        count = mapped.exclude(hit, "spike")
        mapped.rules.append(
            f"spike: {count} rows more than {SPIKE_FACTOR:g}x both {sweep} neighbours"
        )

    if t.table == "moe_perf":
        paths = moe_kernel_paths(mapped)
        hit = slower_than_more_work(cols, t.seconds, mapped.reason == "", path=paths)
        count = mapped.exclude(hit, "slower_than_more_work")
        mapped.rules.append(
            f"slower_than_more_work: {count} rows more than {MORE_WORK_FACTOR:g}x a row of the "
            "same call whose GPU does at least the same work (an unrecorded eager fallback)"
        )

    if a100 and t.table == "generation_mla_perf":
        mapped.flags["non_split_kv"] = np.ones(n, dtype=bool)
        mapped.rules.append(
            "non_split_kv: the A100 MLA decode kernel does not split keys across SMs "
            "(kernels carry kv_split = 0)"
        )
