"""Fit the host floors of the module tables timed eagerly (:mod:`mlacalc.timemodel.host_floor`).

For each group of a table's rows (device, engine, table, ``kernel_source``, ``gemm_type``,
``kv_cache_dtype``: the ops the forward dispatches) the floor is the median measured time of
its rows of the fewest tokens (``batch_size x isl``: one token in every group but SGLang's
prompt paths, whose smallest rows are four tokens), across every model, head count and cached
length of the group. The
records say what each floor was fitted on, its residuals, the median share of those rows'
time the kernels (the mapped composite, without a floor) take by the given profile, and check
the form past the floor: on the rows whose kernels are predicted above the floor, the median
error of ``max(kernels, floor)`` against ``kernels + floor``. A group whose fewest-token rows
are the kernels' own time (:data:`HOST_BOUND_SHARE`) has no floor.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mlacalc.hardware.catalogue import load_hardware
from mlacalc.measured.mapped import MappedTable
from mlacalc.timemodel.host_floor import (
    LONG,
    WIDE_BATCH_SEQUENCES,
    floor_sources,
    floor_structure,
    graphed,
    host_floor_seconds,
)
from mlacalc.timemodel.kernel_time import predict_batch
from mlacalc.timemodel.profile import Profile

__all__ = [
    "HOST_BOUND_SHARE",
    "HOST_SEQUENCE_PATH",
    "fit_doubling_s",
    "fit_host_floors",
    "fit_long_sequence_s",
    "fit_wide_batch_s",
    "kernel_seconds",
]

#: A group has a host floor only where the kernels of its fewest-token rows take at most this
#: share of their measured time (median): above it those rows are the kernels' own time (a
#: CUDA-graphed decode module: SGLang's at one token, 0.91-1.08 of it on H100 and 1.03-1.22 on
#: B200 (0.95-1.08 and 1.03-1.97 with its fp8 block GEMMs at the stand-alone GEMM table's
#: class, before gemm_time.step_block_fp8); vLLM's H100 decode with an fp8 cache 0.92-0.96
#: (its attention walking every top-k slot); TensorRT-LLM's B200 modules, 0.94-1.05 decode
#: and 1.06-1.21 prompt, their kernels longer than the dispatch), not a dispatch. The eagerly
#: launched groups' shares reached 0.76 (TensorRT-LLM's H100 prompt module with fp8 block
#: GEMMs, its sparse MLA walking every top-k slot: mlacalc.timemodel.dsa_time.SPARSE_WALK;
#: vLLM's H100 decode with a bf16 cache 0.73-0.75), and 0.85 lay in the gap. Since vLLM's
#: decode runs its prompt's sparse kernel (dsa_time.ONE_SPARSE_KERNEL) its groups reach 0.91
#: (H100 FLASHMLA_SPARSE, bf16 cache) with their floors still needed (without them vLLM's H100
#: DSA decode module 12.0% -> 13.6%, B200 18.7% -> 21.3%), and the gap is gone: the graphed
#: groups start at 0.89 (SGLang's H100 skip-indexer FlashMLA, fp8 cache), which a graphed
#: group takes no floor at whatever share (host_floor.graphed: SGLang's decode up to its graph
#: size). 0.92 keeps every floor vLLM's rows need and floors one more vLLM group at its
#: fewest-token median (B200 FlashInfer, nvfp4 projections, fp8 cache: share 0.91; vLLM B200
#: DSA decode module 19.6% -> 18.9%, from the other device 22.6% -> 20.8%:
#: bench_timemodel.py --engines --only dsa_generation). (It was 0.5, then 0.75,
#: which gave TensorRT-LLM's B200 decode module a floor while its nvfp4 rows had no projections
#: and its indexer's small kernels were not mapped: share 0.66 then, 0.94-1.05 with them.)
HOST_BOUND_SHARE = 0.92

#: The module structure (:func:`mlacalc.timemodel.host_floor.floor_structure`) whose long
#: prompt rows :func:`fit_long_sequence_s` reads the host's time per sequence on: SGLang's
#: skip-indexer paths, whose predicted kernels are 6-10% of such a row (median, four new
#: tokens, 2 to 128 sequences) and hidden under its floor (their four-token rows of at most
#: 65,536 cached tokens add 0.2 us a further sequence on H100 and 0.1 on B200, median, where
#: their predicted kernels take 11.1 and 5.8 us a sequence), so their rows' growth is the
#: host's. The indexer
#: paths' rows (kernels 10-49%) follow it from 8 to 32 sequences (H100 34.7-36.3 us a
#: further sequence, B200 33.4-35.0, against the skip paths' 33.0-35.1 and 31.0-33.9) but
#: grow 2-5x faster at 64 and 128 (H100 114 / 171 us, B200 61 / 84, while their predicted
#: kernels' share falls to 0.10-0.15: GPU work the mapped indexer kernels do not give, not
#: the host's), and at 2-4 sequences H100's take less (39-41 us) and B200's more (48-52).
HOST_SEQUENCE_PATH = "sglang_dsa_skip_indexer_"


def kernel_seconds(mapped: MappedTable, profile: Profile) -> np.ndarray:
    """Per-row sum of the predicted seconds of a mapped table's kernels, without a floor."""
    hw = load_hardware(mapped.table.device)
    n = len(mapped.table)
    total = np.zeros(n)
    for part in mapped.parts:
        t = predict_batch(part.batch, hw, profile)
        total += np.bincount(part.rows, weights=t, minlength=n)
    return total


def _median_abs(err: np.ndarray) -> float | None:
    return float(np.median(np.abs(err))) if err.size else None


def _labels(t, name: str) -> np.ndarray:
    return t.column(name).astype(str) if name in t.columns else np.full(len(t), "")


def fit_host_floors(mapped: MappedTable, profile: Profile) -> list[dict[str, Any]]:
    """One record per group of a host-floored table's rows (``kernel_source``, ``gemm_type``,
    ``kv_cache_dtype``: the ops the module's forward dispatches): its key, the floor (seconds;
    None where no row is host-bound), the rows it was fitted on, their median and p90 |error|
    against the floor, and past the floor the rows and the median |error| of the max and the
    sum forms."""
    t = mapped.table
    kern = kernel_seconds(mapped, profile)
    meas = t.seconds
    ok = mapped.modelled & np.isfinite(kern) & (meas > 0)
    src, gemm, kv = (_labels(t, c) for c in ("kernel_source", "gemm_type", "kv_cache_dtype"))
    cached = t.column("step") if "step" in t.columns else None
    model = t.column("model") if "model" in t.columns else None
    src = floor_sources(
        t.system, t.engine, t.table, src, t.column("batch_size"), cached, gemm, model
    )
    group = np.char.add(np.char.add(np.char.add(src, "|"), np.char.add(gemm, "|")), kv)
    tokens_of = t.column("batch_size").astype(np.float64) * t.column("isl").astype(np.float64)
    out = []
    for name in np.unique(group):
        g = ok & (group == name)
        tokens = tokens_of[g].min() if g.any() else 0.0
        bound = g & (tokens_of == tokens)
        share = float(np.median(kern[bound] / meas[bound])) if bound.any() else np.inf
        rec: dict[str, Any] = {
            "key": (t.system, t.engine, t.table, *str(name).split("|")),
            "rows": int(g.sum()),
            "fitted_on": int(bound.sum()),
            "tokens": float(tokens),
            "floor_s": None,
            "kernel_share": share,
        }
        if share <= HOST_BOUND_SHARE and not graphed(
            t.system, t.engine, t.table, str(name).split("|")[0]
        ):
            floor = float(np.median(meas[bound]))
            err = floor / meas[bound] - 1
            rec.update(floor_s=floor, median=_median_abs(err),
                       p90=float(np.percentile(np.abs(err), 90)))  # fmt: skip
            past = g & (kern > floor)
            rec["past_rows"] = int(past.sum())
            rec["past_max"] = _median_abs(np.maximum(kern[past], floor) / meas[past] - 1)
            rec["past_sum"] = _median_abs((kern[past] + floor) / meas[past] - 1)
        out.append(rec)
    return out


def fit_long_sequence_s(mapped: MappedTable) -> tuple[float | None, int]:
    """The host's time per further sequence of a table's long-context prompt rows
    (:data:`mlacalc.timemodel.host_floor.LONG_SEQUENCE_S`): the median, over the long
    skip-indexer groups' rows (:data:`HOST_SEQUENCE_PATH`) of the table's fewest new tokens a
    sequence and two sequences or more, of (time - the group's one-sequence floor) /
    (sequences - 1); and how many rows it is over (None, 0 where the table has none)."""
    t = mapped.table
    src, gemm, kv = (_labels(t, c) for c in ("kernel_source", "gemm_type", "kv_cache_dtype"))
    bs = t.column("batch_size").astype(np.float64)
    cached = t.column("step") if "step" in t.columns else None
    src = floor_sources(t.system, t.engine, t.table, src, bs, cached)
    floor = host_floor_seconds(t.system, t.engine, t.table, src, gemm, kv)  # one sequence
    isl = t.column("isl").astype(np.float64)
    path = np.array([floor_structure(t.engine, s) for s in src])
    long = (path == HOST_SEQUENCE_PATH + LONG) & mapped.modelled & np.isfinite(floor)
    rows = long & (bs >= 2) & (isl == isl[long].min()) if long.any() else long
    if not rows.any():
        return None, 0
    per = (t.seconds[rows] - floor[rows]) / (bs[rows] - 1.0)
    return float(np.median(per)), int(rows.sum())


def fit_doubling_s(mapped: MappedTable, profile: Profile) -> tuple[float | None, int]:
    """The seconds an eagerly launched module's call takes beyond its kernels for each doubling
    of its sequences (:data:`mlacalc.timemodel.host_floor.SEQUENCE_DOUBLING_S`): the median,
    over the table's rows of two sequences or more, of (time - kernels) / log2(sequences), the
    kernels by ``profile`` without a floor (:func:`kernel_seconds`); and how many rows it is
    over (None, 0 where the table has no such row)."""
    t = mapped.table
    bs = t.column("batch_size").astype(np.float64)
    kern = kernel_seconds(mapped, profile)
    rows = mapped.modelled & (bs >= 2) & np.isfinite(kern) & (t.seconds > 0)
    if not rows.any():
        return None, 0
    per = (t.seconds[rows] - kern[rows]) / np.log2(bs[rows])
    return float(np.median(per)), int(rows.sum())


def fit_wide_batch_s(
    mapped: MappedTable, profile: Profile, max_cached: int = 1024
) -> tuple[float | None, int]:
    """The seconds a module's call takes beyond its kernels past
    :data:`~mlacalc.timemodel.host_floor.WIDE_BATCH_SEQUENCES` sequences
    (:data:`mlacalc.timemodel.host_floor.WIDE_BATCH_S`): the median, over the table's rows of
    twice that many sequences and at most ``max_cached`` cached tokens that have a row of the
    same labels, heads and cached tokens at that many, of the measured step between the two
    less the kernels' step (``profile``, no floor: :func:`kernel_seconds`); and how many row
    pairs it is over (None, 0 where the table has none)."""
    t = mapped.table
    n = WIDE_BATCH_SEQUENCES
    bs = t.column("batch_size")
    kern = kernel_seconds(mapped, profile)
    ok = mapped.modelled & np.isfinite(kern) & (t.column("step") <= max_cached)
    labels = [c for c in ("model", "gemm_type", "kv_cache_dtype", "num_heads", "step", "tp_size")
              if c in t.columns]  # fmt: skip
    key = np.array(["|".join(str(t.column(c)[i]) for c in labels) for i in range(len(t))])
    narrow = {k: i for i, k in enumerate(key) if ok[i] and bs[i] == n}
    steps = [
        (t.seconds[i] - t.seconds[narrow[k]]) - (kern[i] - kern[narrow[k]])
        for i, k in enumerate(key)
        if ok[i] and bs[i] == 2 * n and k in narrow
    ]
    if not steps:
        return None, 0
    return float(np.median(steps)), len(steps)
