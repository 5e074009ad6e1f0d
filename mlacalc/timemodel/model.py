"""The physical terms of the kernel time model, vectorised over a :class:`KernelBatch`.

A kernel's time on a device is

    fixed + combine(compute, memory) + extra work a roofline has no term for

per kind (each function below states its mechanisms and the measured rows that show them):

- ``compute`` = FLOPs at ``eff_compute`` of the dense tensor rate of its dtype, in whole waves
  of work units (output tiles, attention units) over the SMs;
- ``memory`` = HBM bytes at ``eff_memory`` of the datasheet bandwidth, limited when a kernel
  has too few work units to draw the whole bandwidth (one SM draws ``sm_bandwidth`` times its
  share); operands under ``l2_share`` of the L2 that a warm replay keeps resident are read at
  ``l2_speedup`` times the HBM bandwidth;
- ``combine`` is the p-norm ``(c^p + m^p)^(1/p)`` with ``p = overlap``: a large ``p`` is the
  roofline's ``max``, ``p = 1`` no overlap at all;
- :func:`_gemm`: the library's tile list per dtype (the fastest tile is taken), split-K rules
  per kernel (none for block-scaled fp8 and SmoothQuant int8), GEMV kernels at a few rows, a
  cost per wave of tiles (``tile_s``) and the unhidden share of the output write
  (``epilogue_share``); fp8 GEMMs add the quantization of their bf16 input (``quant_fixed_s``,
  ``quant_bytes``), block-scaled fp8 the CUDA-core rescale of each K block
  (``promote_cycles``), weight-only GEMMs the conversion of each weight (``dequant_s``);
- :func:`_attention_prefill`: 128 x 128 tiles, the softmax's exponentials on the SFUs
  (``eff_exp``, ``sfu_overlap``), the fp8 V transpose through shared memory, banded windows
  (``mask_s``), and a call's and a unit's waits in seconds (``call_latency_s``,
  ``unit_latency_s``), not cycles;
- :func:`_attention_decode`: (sequence, KV-head group) units with key splits, per-unit work as
  SM throughput (``seq_s``, ``grouped_unit``, ``qhead_unit``), the block walk (``block_s``),
  further kernels of a call (``launch_s``), fp8 cache conversion (``dequant_s``) and
  per-head cache re-reads beyond 32 query heads per KV head (``fallback_reads``);
- :func:`_mla_decode`: latent units of 64 heads, the key-splitting kernel against the one that
  walks a whole cache on one SM;
- :func:`_moe`: two grouped GEMMs with per-expert row tiles, the touched experts' weights, a
  cost per wave of tiles, the routing of every pair (``route_s``) and the streaming passes
  around the GEMMs (``act_passes``);
- :func:`_collective`: ``fixed + steps x latency_steps x link latency`` plus the algorithm bytes
  the faster of two ways: flagged stores at half of ``link_eff x link bandwidth``, or bulk
  copies at the full rate behind ``proto_s`` per step; ring (2(n-1)/n of the message for an
  all-reduce) against one-shot (every peer's message read directly; not in NCCL), and where
  the switch reduces in the fabric (``link_multicast``: NVLink SHARP) the switch-reduced
  all-reduce (the message once each way at ``switch_eff`` of the link), whichever is faster;
  a ring rank also copies its own 1/n share through HBM at ``eff_memory``; DeepEP kernels pay
  SM work per token (``token_copies``);
- a kernel timed outside a CUDA graph (``plugin = 1``) adds :data:`UNGRAPHED_LAUNCH_S`.

Every parameter is a fraction or multiple of a datasheet figure, or a time of work on the SMs
stated at a reference clock (cycles, scaled by the device's clock; of a collective, its fixed
cost and per-step synchronisation), or, for the waits both measured devices show equal
whatever their clocks, seconds; so a profile fitted on measured devices transfers.
"""

from __future__ import annotations

import numpy as np

from ..dtypes import DTYPE_BITS
from ..kernels import KernelBatch
from .device import DeviceFigures

__all__ = [
    "COMM_KINDS",
    "DEFAULTS",
    "FIT_PARAMS",
    "PARAMS",
    "borrowed_params",
    "class_key",
    "kernel_terms",
    "scale_params",
]

COMM_KINDS = (
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "all_to_all",
    "p2p",
    "dispatch",
    "combine",
)
ATTENTION_KINDS = ("attention_prefill", "attention_decode", "mla_prefill", "mla_decode")

#: Times of work done on the SMs (fixed costs, per-unit and per-block work, the fixed cost of
#: quantizing) are stated at this clock and scale with ``REFERENCE_CLOCK_HZ / clock`` of the
#: device: they are cycles. A collective's fixed cost (its kernel's launch, the flag handshakes
#: of its protocol) is SM work too and scales the same way; its per-step link latency does not.
REFERENCE_CLOCK_HZ = 1.83e9
CLOCKED = (
    "fixed_s",
    "block_s",
    "seq_s",
    "quant_fixed_s",
    "mask_s",
    "dequant_s",
    "tile_s",
    "route_s",
    "launch_s",
)
COMM_CLOCKED = ("fixed_s", "proto_s")

#: Launch latency of a kernel timed outside a CUDA graph (a TensorRT plugin layer timed by the
#: engine's profiler, ``plugin = 1``): the host launch a graph replay removes and the fitted
#: fixed costs, all taken from graph replays, leave out. The same 5 us per launch the unfused
#: mode assumes without a measured figure (``mlacalc.roofline.DEFAULT_LAUNCH_S``).
UNGRAPHED_LAUNCH_S = 5e-6

#: Every parameter: (lower bound, upper bound, what it is).
PARAMS: dict[str, tuple[float, float, str]] = {
    "eff_compute": (0.02, 1.0, "fraction of the dense tensor rate at full occupancy"),
    "eff_memory": (0.05, 1.0, "fraction of the HBM bandwidth a streaming kernel reaches"),
    "fixed_s": (1e-7, 2e-4, "fixed cost per call, seconds at the reference clock"),
    "overlap": (1.0, 16.0, "p of the p-norm combining compute and memory time (16 ~ max)"),
    "l2_share": (0.01, 1.0, "share of the L2 whose operands stay resident between warm calls"),
    "l2_speedup": (1.0, 12.0, "L2 read bandwidth in multiples of the HBM bandwidth"),
    "sm_bandwidth": (0.5, 16.0, "bandwidth one busy SM draws, in multiples of HBM / SMs"),
    "block_s": (0.0, 2e-5, "seconds per KV block a work unit walks (attention)"),
    "seq_s": (0.0, 5e-5, "seconds per work unit: a sequence and head (group) (attention)"),
    "mask_s": (0.0, 2e-5, "seconds per masked KV block a prefill tile walks (band edges)"),
    "grouped_unit": (0.2, 10.0, "cost of a grouped-query unit relative to one MHA head"),
    "fallback_reads": (0.01, 1.0, "share of repeated per-head cache reads that miss the L2"),
    "act_passes": (0.0, 20.0, "bf16 passes over each MoE (token, expert) row around the GEMMs"),
    "quant_fixed_s": (0.0, 5e-5, "fixed cost of one quantization pass over a GEMM's input, s"),
    "quant_bytes": (0.0, 8.0, "cost of one quantization pass over the input, in HBM passes"),
    "link_eff": (0.02, 1.0, "fraction of the scale-up link bandwidth a collective reaches"),
    "latency_steps": (0.0, 20.0, "link latencies per algorithm step"),
    "proto_s": (0.0, 5e-5, "synchronisation per step of a bulk-copy collective, seconds"),
    "eff_exp": (0.05, 1.0, "fraction of the SFU exponential rate (16 a clock per SM) reached"),
    "sfu_overlap": (1.0, 16.0, "p of the p-norm combining tensor-core and exponential time"),
    "dequant_s": (0.0, 1e-9, "seconds one SM takes to convert one element on its CUDA cores"),
    "tile_s": (0.0, 2e-5, "seconds per wave of GEMM/MoE output tiles beside their main loop"),
    "route_s": (0.0, 1e-5, "seconds one SM spends routing one (token, top-k) pair of a MoE"),
    "promote_cycles": (0.0, 0.25, "SM cycles per output element and K block rescaling fp8 blocks"),
    "launch_s": (0.0, 2e-5, "fixed cost of each further kernel of a decode call, s (ref. clock)"),
    "qhead_unit": (0.0, 10.0, "decode work per query head of a unit and 128 of head dim, in seq_s"),
    "switch_eff": (0.5, 1.0, "link efficiency of an in-switch (NVLS) all-reduce, x link_eff"),
    "unit_latency_s": (0.0, 2e-5, "seconds a prefill work unit waits on memory, not clocked"),
    "call_latency_s": (1e-7, 2e-4, "seconds of a prefill call's launches and waits, not clocked"),
    "epilogue_share": (0.0, 1.0, "share of a GEMM's output write no tile's mainloop hides"),
    "token_copies": (0.0, 20.0, "SM work per token of a DeepEP normal kernel, in copies"),
}

#: Starting values, and the values a kernel class without a calibration uses.
DEFAULTS: dict[str, float] = {
    "eff_compute": 0.7,
    "eff_memory": 0.85,
    "fixed_s": 3e-6,
    "overlap": 4.0,
    "l2_share": 0.2,
    "l2_speedup": 3.0,
    "sm_bandwidth": 3.0,
    "block_s": 1e-7,
    "seq_s": 1e-6,
    "mask_s": 0.0,
    "grouped_unit": 1.0,
    "fallback_reads": 0.5,
    "act_passes": 2.0,
    "quant_fixed_s": 0.0,
    "quant_bytes": 1.0,
    "link_eff": 0.7,
    "latency_steps": 1.0,
    "proto_s": 0.0,
    "eff_exp": 0.8,
    "sfu_overlap": 16.0,
    "dequant_s": 0.0,
    "tile_s": 0.0,
    "route_s": 0.0,
    # one fused multiply-add per output element and block, on the 128 FP32 lanes of an SM
    "promote_cycles": 1.0 / 128.0,
    "launch_s": 2e-6,
    "qhead_unit": 0.1,
    "switch_eff": 1.0,
    "unit_latency_s": 0.0,
    "call_latency_s": 0.0,
    # a tile's epilogue writes its output after its mainloop, unhidden
    "epilogue_share": 1.0,
    "token_copies": 0.0,
}

_KIND_DEFAULTS: dict[str, dict[str, float]] = {
    "attention_prefill": {"fixed_s": 0.0, "eff_compute": 0.55, "seq_s": 0.0},
    "attention_decode": {"fixed_s": 8e-6},
    "mla_prefill": {"fixed_s": 0.0, "eff_compute": 0.55, "seq_s": 0.0},
    "mla_decode": {"fixed_s": 0.0, "eff_compute": 0.6, "seq_s": 0.0},
    "moe": {"fixed_s": 2e-5, "eff_compute": 0.5},
    "elementwise": {"fixed_s": 2e-6},
    # a quantize kernel without a fit: one graph node costs about 1 us (launch to completion of
    # a kernel whose blocks make one memory round trip and one store: an assumed figure, under
    # the smallest GEMM node both measured devices show, 2.5 us at m = n = k = 32, which also
    # stages its operands and runs its epilogue); the operands of a warm replay stay in half
    # the L2 (A100 and H100 keep a line read by every SM in each of their two L2 partitions:
    # NVIDIA A100 whitepaper, "L2 cache")
    "quantize": {"fixed_s": 1e-6, "l2_share": 0.5},
}

_COMM_FIT = ("fixed_s", "link_eff", "latency_steps", "proto_s", "eff_memory")

#: The parameters a fit adjusts, by kind (the others keep their defaults).
FIT_PARAMS: dict[str, tuple[str, ...]] = {
    "gemm": (
        "eff_compute",
        "eff_memory",
        "fixed_s",
        "overlap",
        "l2_share",
        "l2_speedup",
        "sm_bandwidth",
        "epilogue_share",
        "tile_s",
    ),
    "attention_prefill": (
        "eff_compute",
        "eff_memory",
        "call_latency_s",
        "overlap",
        "unit_latency_s",
        "block_s",
        "mask_s",
        "eff_exp",
        "sfu_overlap",
    ),
    "mla_prefill": (
        "eff_compute",
        "eff_memory",
        "call_latency_s",
        "overlap",
        "unit_latency_s",
    ),
    "attention_decode": (
        "eff_compute",
        "eff_memory",
        "fixed_s",
        "overlap",
        "sm_bandwidth",
        "block_s",
        "seq_s",
        "grouped_unit",
        "fallback_reads",
        "launch_s",
        "qhead_unit",
    ),
    "mla_decode": (
        "eff_compute",
        "eff_memory",
        "call_latency_s",
        "overlap",
        "block_s",
        "unit_latency_s",
    ),
    "moe": (
        "eff_compute",
        "eff_memory",
        "fixed_s",
        "overlap",
        "sm_bandwidth",
        "act_passes",
        "tile_s",
        "route_s",
    ),
    "elementwise": ("eff_memory", "fixed_s", "sm_bandwidth"),
    "quantize": ("eff_memory", "fixed_s", "sm_bandwidth", "l2_share", "l2_speedup"),
    **{k: _COMM_FIT for k in COMM_KINDS},
    "all_reduce": (*_COMM_FIT, "switch_eff"),
    "dispatch": ("fixed_s", "link_eff", "latency_steps", "sm_bandwidth", "token_copies"),
    "combine": ("fixed_s", "link_eff", "latency_steps", "sm_bandwidth", "token_copies"),
}
_FP8_QUANT = ("quant_fixed_s", "quant_bytes")


def fit_params(kind: str, dtype: str) -> tuple[str, ...]:
    """The parameters a fit adjusts for one kernel class."""
    names = FIT_PARAMS.get(kind, ("eff_compute", "eff_memory", "fixed_s"))
    if kind == "gemm" and dtype.startswith("fp8"):
        names = names + _FP8_QUANT
    if kind == "gemm" and dtype == "fp8_block":
        names = (*names, "promote_cycles")
    if kind == "gemm" and dtype in ("w4a16", "w8a16"):
        names = (*names, "dequant_s")
    if kind == "attention_decode" and dtype.startswith("fp8"):
        names = (*names, "dequant_s")  # MMHA converts each fp8 cache element
    return names


def borrowed_params(
    kind: str, dtype: str, params: dict[str, float], fitted: dict[str, float]
) -> dict[str, float]:
    """``params`` of a ``kind``/``dtype`` class whose fit (``fitted``) came from another dtype
    (a profile fitted on a device without fp8 units has no fp8 class): the terms that fit
    never saw get their physical reading instead of the uncalibrated defaults. The compute
    rate and the bytes already follow the dtype (its datasheet peak, its element size); each
    graph node of an fp8 GEMM's input quantization (``quant_launches``: three for a dynamic
    per-tensor one) is one more kernel of the class, so it costs the class's fixed cost, and
    the quantization's bytes (its reads of the bf16 input and its fp8 write) move at the
    class's bandwidth (``quant_bytes = 1``)."""
    if kind == "gemm" and dtype.startswith("fp8") and "quant_fixed_s" not in fitted:
        params["quant_fixed_s"] = params["fixed_s"]
        params["quant_bytes"] = 1.0
    if kind == "attention_decode" and dtype.startswith("fp8") and "dequant_s" not in fitted:
        # a grouped-query unit of a bf16 fit is the bf16 XQA kernel's; an fp8 cache on a device
        # with fp8 tensor cores runs another kernel (Hopper's fp8 XQA) that fit never saw: its
        # unit keeps the uncalibrated cost of one MHA head
        params["grouped_unit"] = DEFAULTS["grouped_unit"]
    return params


def class_key(kind: str, dtype: str, variant: str = "") -> str:
    """The name of a kernel class in a profile: ``"gemm:fp8_block"``, or with a variant (another
    kernel of the same kind, see :mod:`mlacalc.kernels`) ``"gemm:fp8_block:bmm"``."""
    return f"{kind}:{dtype}:{variant}" if variant else f"{kind}:{dtype}"


def default_params(kind: str) -> dict[str, float]:
    """The uncalibrated starting point of a kernel class."""
    out = dict(DEFAULTS)
    out.update(_KIND_DEFAULTS.get(kind, {}))
    return out


def _col(batch: KernelBatch, name: str, default: float) -> np.ndarray:
    value = batch.shape.get(name)
    if value is None:
        return np.full(len(batch), float(default))
    return np.asarray(value, dtype=np.float64)


def _elem_bytes(dtype: str) -> float:
    base = dtype.split("_")[0] if dtype not in DTYPE_BITS else dtype
    return DTYPE_BITS.get(base, 16) / 8


def _combine(c: np.ndarray, m: np.ndarray, p: float) -> np.ndarray:
    hi = np.maximum(np.maximum(c, m), 1e-30)
    return hi * ((c / hi) ** p + (m / hi) ** p) ** (1.0 / p)


def _memory_share(units: np.ndarray, fig: DeviceFigures, prm: dict[str, float]) -> np.ndarray:
    """Share of the HBM bandwidth a kernel with ``units`` concurrent work units can draw."""
    return np.minimum(1.0, units * prm["sm_bandwidth"] / fig.sm_count)


def _tile_rate(tm: int, tn: int) -> float:
    """Share of the SM's tensor rate an output tile reaches: operand reuse falls with the
    tile's intensity ``tm tn / (tm + tn)`` (64 for 128x128), as its square root below that."""
    return min(1.0, (tm * tn / (tm + tn) / 64.0) ** 0.5)


#: Output tiles a GEMM library chooses between, with the share of the SM's tensor rate each
#: reaches (:func:`_tile_rate`). The tile giving the shortest time is taken.
GEMM_TILES = tuple(
    (tm, tn, _tile_rate(tm, tn))
    for tm, tn in ((64, 64), (64, 128), (128, 64), (128, 128), (128, 256), (256, 128))
)

#: The tiles of the kernels of a dtype whose library has its own list (others: GEMM_TILES).
#: Weight-only GEMMs (TensorRT-LLM's fpA_intB CUTLASS kernels on SM80) have row tiles down to
#: 16 (CtaShape16x128x64, 32x128, 64x128, 128x128): at m <= 16 a tile pads the rows to 16, not
#: 64 (the measured A100 rows: m = 1 to 16 take the same time, and a 64-row tile made m = 1 with
#: n, k = 16384 2x slower than measured). SmoothQuant int8 GEMMs (its CUTLASS int8 runner):
#: 32x128, 64x128, 128x64, 64x64, 128x256 and 256x128 (with these, the A100 int8 median error
#: 7.3%, with GEMM_TILES 8.8%). Both lists are the candidate tiles of TensorRT-LLM's CUTLASS
#: heuristic (cutlass_heuristic.cpp) as recalled, not checked against its source (no copy in
#: the shared reference): the measured rows support the 16-row weight-only tile.
_WEIGHT_ONLY_TILES = tuple(
    (tm, tn, _tile_rate(tm, tn)) for tm, tn in ((16, 128), (32, 128), (64, 128), (128, 128))
)
TILES_BY_DTYPE = {
    "w4a16": _WEIGHT_ONLY_TILES,
    "w8a16": _WEIGHT_ONLY_TILES,
    "int8": tuple(
        (tm, tn, _tile_rate(tm, tn))
        for tm, tn in ((32, 128), (64, 128), (128, 64), (64, 64), (128, 256), (256, 128))
    ),
}

#: GEMM dtypes whose kernels never split K across SMs: a block-scaled fp8 GEMM multiplies each
#: 128-wide K block's partial product by its two scales into the tile's fp32 accumulator, so one
#: tile walks the whole of K (the measured H100 rows: at m = 1, n = 1024, eight tiles, the time
#: grows with k as one tile's walk; bf16 and per-tensor fp8 GEMMs split K). The SmoothQuant int8
#: GEMM has no split-K either (the measured A100 rows at m = 64: k = 65536 takes 150 us for any
#: n up to 2560, one 64x128 tile's walk of all of K at the int8 rate).
NO_SPLIT_K = ("fp8_block", "int8")

#: The split-K rule of a dtype whose kernels have their own (others: SPLIT_K_CHUNK, as many
#: splits as the idle SMs allow): (least K a split walks, most splits). Weight-only GEMMs split
#: K in 2 at most, each split walking at least 4,096 (the measured A100 rows at m = 1 to 16 and
#: k = 16384: the same time for any n from 128 to 5120, a 16x128 tile's walk of half of K; at
#: k = 2048 to 5120 no split. w4a16 median / p90 error with at most 2, 4 and 7 splits of
#: 1,024: 10.0/29, 12.9/36, 14.1/41%; of 4,096: 8.9/28, 9.5/31, 9.6/33%; of 8,192: 8.9/30%).
SPLIT_K_BY_DTYPE = {"w4a16": (4096.0, 2.0), "w8a16": (4096.0, 2.0)}

#: Calls of at most this many rows that a dtype's library runs as a GEMV kernel on the CUDA
#: cores instead of its tiled GEMM (TensorRT-LLM's plugins take their CUDA-core kernel below
#: 5 rows), and whether its blocks split K across SMs. The SmoothQuant int8 GEMV does (the
#: measured A100 rows: m = 1 to 4 at n = 128 and k = 65536 take 20 us, m = 8 to 64 the 150 us
#: of a tile walking all of K). The weight-only batched GEMV does not: a block walks all of K
#: for its columns (m = 1 to 4 at k = 16384: about 45 us for any n from 128 to 5120; with
#: the GEMV rows w4a16 fitted median / p90 8.9/27.7% -> 8.1/24.9%, splitting K 8.4/26.9%).
GEMV_MAX_M = {"int8": 4, "w4a16": 4, "w8a16": 4}
GEMV_SPLITS_K = {"int8": True, "w4a16": False, "w8a16": False}

#: The least K a split of a split-K GEMM walks: a library splits K only while each split's
#: partial product outweighs the reduction of the partial sums (the measured H100 rows at m = 8,
#: n = 32, a single output tile: the time grows with k up to about 2,500 and stays flat beyond
#: it; with splits of 512 the bf16 p90 error was 26% on both devices, with 1,024 23% and 25%).
SPLIT_K_CHUNK = 1024

#: The K depth of one scale block of a block-scaled fp8 GEMM (1x128 activation, 128x128 weight
#: blocks): every tile rescales its partial product once per block.
SCALE_BLOCK_K = 128


def _tile_arrays(tiles: tuple) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return (
        np.array([t[0] for t in tiles], dtype=np.float64)[:, None],
        np.array([t[1] for t in tiles], dtype=np.float64)[:, None],
        np.array([t[2] for t in tiles])[:, None],
    )


_TILES = {d: _tile_arrays(t) for d, t in TILES_BY_DTYPE.items()}
_TILES[""] = _tile_arrays(GEMM_TILES)


def _gemm(batch: KernelBatch, fig: DeviceFigures, prm: dict[str, float]) -> dict[str, np.ndarray]:
    m, n, k = _col(batch, "m", 1), _col(batch, "n", 1), _col(batch, "k", 1)
    groups = _col(batch, "groups", 1)
    sms = fig.sm_count
    per_sm = prm["eff_compute"] * fig.peak(batch.dtype) / sms
    # every candidate tile at once: arrays of (tile, row)
    tm, tn, rate = _TILES.get(batch.dtype, _TILES[""])
    can_split = batch.dtype not in NO_SPLIT_K
    gemv_rows = GEMV_MAX_M.get(batch.dtype, 0)
    if gemv_rows:
        # a GEMV kernel for the few-row calls: its blocks take all the rows (a row tile of
        # ``gemv_rows``) and a slice of the columns, and split K among them or not
        gemv = m <= gemv_rows
        tm = np.where(gemv, float(gemv_rows), tm)
        rate = np.where(gemv, _tile_rate(gemv_rows, 128), rate)
        can_split = (can_split | gemv) if GEMV_SPLITS_K[batch.dtype] else (can_split & ~gemv)
    tiles = groups * np.ceil(m / tm) * np.ceil(n / tn)
    chunk, cap = SPLIT_K_BY_DTYPE.get(batch.dtype, (SPLIT_K_CHUNK, np.inf))
    most = np.minimum(np.maximum(1.0, np.floor(k / chunk)), cap)
    splits = np.where(
        (tiles < sms) & (groups <= 1) & can_split,
        np.clip(np.floor(sms / tiles), 1.0, most),
        1.0,
    )
    waves = np.ceil(tiles * splits / sms)
    walk = np.ceil(k / splits)
    # each wave of tiles also pays ``tile_s`` beside its MMAs: the pipeline's fill (the first
    # K stages loaded at the memory latency) and the epilogue's fixed part (fitted 0.3-1.6 us;
    # about 0 on H100 bf16, whose persistent kernels overlap a tile's start with the previous)
    candidates = waves * (2.0 * tm * tn * walk / (per_sm * rate) + prm["tile_s"])
    if batch.dtype in ("fp8_block",):
        # block scaling: after each 128-deep K block a tile multiplies its partial product by
        # the two scales and adds it to its fp32 accumulator on the CUDA cores (the tensor
        # cores' fp8 accumulation is not kept across blocks): ``promote_cycles`` per output
        # element and block on one SM, beside the MMAs of the next block
        candidates = candidates + waves * tm * tn * np.ceil(walk / SCALE_BLOCK_K) * (
            prm["promote_cycles"] / fig.clock_hz
        )
    if batch.dtype in ("w4a16", "w8a16"):
        # weight-only: every tile converts the weights of its columns to bf16 on the CUDA
        # cores as it walks K (``dequant_s`` per element on one SM), once per row tile
        candidates = candidates + waves * tn * walk * prm["dequant_s"]
    best = np.argmin(candidates, axis=0)
    cols = np.arange(len(batch))
    compute = candidates[best, cols]
    units = (tiles * splits)[best, cols]
    if fig.kind == "cpu":
        # a CPU has no output tiles to quantize: its cores share the whole product
        compute = batch.flops / (prm["eff_compute"] * fig.peak(batch.dtype))
        units = np.full(len(batch), np.inf)
    bw = prm["eff_memory"] * fig.hbm_bytes_per_s * _memory_share(units, fig, prm)
    weight = groups * n * k * _elem_bytes(batch.dtype)
    # a warm replay keeps the weights resident when all the copies the caller cycles through
    # (``weight_copies``) fit in the share of the L2 a kernel's operands can hold
    warm = _col(batch, "warm_l2", 0) > 0
    footprint = weight * np.maximum(_col(batch, "weight_copies", 1), 1.0)
    resident_share = np.clip(2.0 - footprint / (prm["l2_share"] * fig.l2_bytes), 0.0, 1.0)
    resident = np.where(warm, resident_share * np.minimum(weight, batch.bytes), 0.0)
    # the output tiles' epilogue: a tile writes its output after its mainloop, so the write
    # is not hidden behind that tile's MMAs; the share ``epilogue_share`` of it is not hidden
    # behind other tiles' mainloops either and adds to the time (the measured rows with large
    # m and k of 64 to 1024, near the ridge: 15-35% slower than the compute and memory times
    # combined, on both devices)
    out = groups * m * n * _col(batch, "out_elem", 2.0)
    out = np.minimum(out, np.maximum(batch.bytes - resident, 0.0))
    epi = prm["epilogue_share"]
    memory = (batch.bytes - resident - epi * out) / bw + resident / (
        prm["l2_speedup"] * fig.hbm_bytes_per_s
    )
    extra = epi * out / bw
    if batch.dtype.startswith("fp8"):
        # the quantization of the bf16 input: ``quant_passes`` reads of it (amax, scaling)
        # and the write of its fp8 copy, which the GEMM then reads (its bytes count only that
        # read)
        quantized = _col(batch, "quantize_input", 1) > 0
        passes = _col(batch, "quant_passes", 1)
        qbytes = groups * m * k * (2.0 * passes + 1.0)
        # a fixed cost per graph node of the quantization (``quant_launches``; one per pass
        # where not given): a dynamic per-tensor quantization is three (the amax reduction's
        # memset and kernel, then the scaling pass)
        launches = np.asarray(batch.shape.get("quant_launches", passes), dtype=np.float64)
        extra = extra + np.where(
            quantized,
            prm["quant_fixed_s"] * launches
            + prm["quant_bytes"] * qbytes / (prm["eff_memory"] * fig.hbm_bytes_per_s),
            0.0,
        )
    return {"compute_s": compute, "memory_s": memory, "extra_s": extra}


def _attention_shape(batch: KernelBatch) -> dict[str, np.ndarray]:
    """The shape columns every attention class reads."""
    kv = _col(batch, "kv_len", 1)
    heads = _col(batch, "n_heads", 1)
    n_kv = np.maximum(_col(batch, "n_kv", 1), 1.0)
    window = _col(batch, "window", 0)
    return {
        "b": _col(batch, "batch", 1),
        "q": _col(batch, "q_len", 1),
        "kv": kv,
        "heads": heads,
        "n_kv": n_kv,
        "window": window,
        "kv_eff": np.where(window > 0, np.minimum(kv, window), kv),
        "group": heads / n_kv,
    }


def _attention_time(
    batch: KernelBatch,
    fig: DeviceFigures,
    prm: dict[str, float],
    *,
    units: np.ndarray,
    unit_blocks: np.ndarray,
    unit_cost: np.ndarray,
    masked: np.ndarray,
    serial: np.ndarray | None = None,
    flops: np.ndarray | None = None,
    nbytes: np.ndarray | None = None,
    sfu: np.ndarray | None = None,
    latency: float | None = None,
    call: float | None = None,
) -> dict[str, np.ndarray]:
    """Compute and memory terms of an attention kernel from its work units: ``units`` spread
    over the SMs in waves, each walking ``unit_blocks`` KV blocks (``masked`` of them on the
    masking path) and paying ``unit_cost`` times the per-unit work once. ``serial``: the units
    one SM works through in turn (default: its waves)."""
    sms = fig.sm_count
    waves = np.ceil(units / sms)
    occupancy = units / (waves * sms)
    if fig.kind == "cpu":
        occupancy = np.ones(len(batch))  # no SM waves on a CPU
    if serial is None:
        serial = waves
    # every wave of units pays its per-unit work (loading queries, the final reduction) and
    # walks its blocks (page lookups, softmax rescaling) beside the math, overlapping the
    # streaming of the cache
    work = serial * (
        prm["block_s"] * unit_blocks + prm["mask_s"] * masked + prm["seq_s"] * unit_cost
    )
    if latency is not None:
        # a wait on memory per unit, seconds whatever the SM clock
        work = work + serial * latency
    flops = batch.flops if flops is None else flops
    nbytes = batch.bytes if nbytes is None else nbytes
    compute = flops / (prm["eff_compute"] * fig.peak(batch.dtype) * occupancy)
    if sfu is not None:
        # the softmax's exponentials on the special-function units, beside the tensor cores
        compute = _combine(compute, sfu / occupancy, prm["sfu_overlap"])
    compute = compute + work
    memory = nbytes / (prm["eff_memory"] * fig.hbm_bytes_per_s * _memory_share(units, fig, prm))
    # a fixed time per call that is a wait, seconds whatever the SM clock
    extra = np.full(len(batch), call if call is not None else 0.0)
    return {"compute_s": compute, "memory_s": memory, "extra_s": extra}


def _attention_prefill(
    batch: KernelBatch, fig: DeviceFigures, prm: dict[str, float]
) -> dict[str, np.ndarray]:
    """``attention_prefill`` and ``mla_prefill``: tiled over queries and keys."""
    a = _attention_shape(batch)
    b, q, kv, heads, window, kv_eff = a["b"], a["q"], a["kv"], a["heads"], a["window"], a["kv_eff"]
    # one unit per (sequence, head, 128-query tile), each over its keys in 128-key blocks
    # (a causal tile sees half the keys on average)
    units = b * heads * np.ceil(q / 128.0)
    unit_blocks = np.ceil(kv_eff / 128.0)
    unit_blocks = np.where(_col(batch, "causal", 1) > 0, (unit_blocks + 1) / 2, unit_blocks)
    # a sliding window shorter than the keys is a band: a 128-query tile meets the
    # ceil((window + 127) / 128) key blocks the band crosses and computes them whole (the
    # band's edges masked inside), not the ``window`` keys per query the FLOPs count
    banded = (window > 0) & (kv > window)
    band_blocks = np.ceil((window + 127.0) / 128.0)
    unit_blocks = np.where(banded, band_blocks, unit_blocks)
    padded = np.where(banded, band_blocks * 128.0 / np.maximum(window, 1.0), 1.0)
    # every block of a band is masked (its edges cut through the block) and takes the
    # kernel's masking path; a causal tile masks only its diagonal block, which the
    # per-unit work covers
    masked = np.where(banded, band_blocks, 0.0)
    # one exponential per computed score (query, key pair), on the SFUs, not the tensor cores:
    # ``SFU_EXP_PER_CLOCK`` a clock per SM at ``eff_exp`` of that rate, combined with the
    # tensor time by the p-norm ``sfu_overlap`` (FlashAttention-3 overlaps the two). With fp8
    # or head_dim 64 on H100 the exponentials take as long as the products at full rate: the
    # H100 rows at isl >= 4096 reach 39% of the bf16 tensor rate at head_dim 64 against 48%
    # at 128 and 51% at 256, and the fp8 rows 23% / 32% / 39% of the fp8 rate. A kernel with
    # no value product (an indexer's ReLU logits) has no softmax
    d_qk, d_v = _col(batch, "head_dim_qk", 128), _col(batch, "head_dim_v", 128)
    scores = np.where(d_v > 0, batch.flops * padded / (2.0 * (d_qk + d_v)), 0.0)
    sfu = scores / (prm["eff_exp"] * SFU_EXP_PER_CLOCK * fig.sm_count * fig.clock_hz)
    # the call's fixed time and each unit's fixed work are waits on memory and launches, not
    # cycles: at isl 16 the H100 and A100 rows take the same 13-14 us a call and 3.5 us per
    # unit on an SM (4.3 / 4.7 us at isl 32) although the SM clocks differ by 1.3x; they are
    # seconds on every device (``call_latency_s``, ``unit_latency_s``; the clocked ``fixed_s``
    # and ``seq_s`` stay at 0 for the prefill kinds). The MLA prefill rows have one head shape,
    # which cannot tell the exponentials from the products: ``mla_prefill`` keeps the
    # default ``eff_exp`` and ``sfu_overlap``
    # an fp8 kernel transposes each 128-key V block in shared memory before its MMA (the fp8
    # tensor-core MMA takes its B operand K-major only; FlashAttention-3, section 3.3): the
    # block's bytes read and written once through the SM's shared memory, part of the unit's
    # serial work. It is a quarter of an fp8 block's MMA time at full rate whatever the head
    # dim, the gap between the fitted H100 fp8 and bf16 efficiencies (0.48 and 0.60); it
    # brings an fp8 class borrowed from a bf16 fit (a device without fp8) that much closer
    transpose = 0.0
    if batch.dtype.startswith("fp8"):
        transpose = unit_blocks * 2.0 * 128.0 * d_v / (SMEM_BYTES_PER_CLOCK * fig.clock_hz)
    return _attention_time(
        batch,
        fig,
        prm,
        units=units,
        unit_blocks=unit_blocks,
        unit_cost=np.ones(len(batch)),
        masked=masked,
        flops=batch.flops * padded,
        sfu=sfu,
        latency=prm["unit_latency_s"] + transpose,
        call=prm["call_latency_s"],
    )


#: Exponentials one SM's special-function units issue per clock (MUFU.EX2: 16 a clock per SM
#: on Ampere and Hopper; CUDA C Programming Guide, arithmetic instruction throughput table)
SFU_EXP_PER_CLOCK = 16.0

#: Bytes one SM's shared memory reads or writes a clock (32 banks of 4 bytes; Ampere and Hopper
#: tuning guides)
SMEM_BYTES_PER_CLOCK = 128.0


def _decode_splits(
    batch: KernelBatch, heads_units: np.ndarray, keys: np.ndarray, slots: float
) -> np.ndarray:
    """Key splits of a decode unit (flash-decoding): where the kernel can split
    (``kv_split``) and its units leave some of the ``slots`` resident units idle, a unit's
    ``keys`` split into parts of at least :data:`DECODE_SPLIT_KEYS`, as many as fill them."""
    can_split = (_col(batch, "kv_split", 1) > 0) & (heads_units < slots)
    return np.where(
        can_split,
        np.clip(
            np.floor(slots / heads_units), 1.0, np.maximum(1.0, np.ceil(keys / DECODE_SPLIT_KEYS))
        ),
        1.0,
    )


#: Decode kernels (TRT-LLM XQA and MMHA multi-block mode) split a unit's keys across SMs up to
#: this many resident units per SM, every split at least :data:`DECODE_SPLIT_KEYS` keys. Four
#: units a SM fit the measured H100/A100 rows better than one (fitted p90 31% against 35%, the
#: leave-one-device-out medians 9-10% against 12%); MLA decode splits up to one unit a SM
#: (:func:`_decode_splits`).
DECODE_SPLIT_UNITS_PER_SM = 4.0
DECODE_SPLIT_KEYS = 256.0


def _attention_decode(
    batch: KernelBatch, fig: DeviceFigures, prm: dict[str, float]
) -> dict[str, np.ndarray]:
    """``attention_decode``: paged GQA/MHA/MQA decode (XQA for grouped queries, MMHA per head),
    after the RoPE + cache-append pre-kernel, with a reduction kernel when the keys split."""
    a = _attention_shape(batch)
    b, q, n_kv, heads = a["b"], a["q"], a["n_kv"], a["heads"]
    group, kv_eff = a["group"], a["kv_eff"]
    hd = _col(batch, "head_dim_qk", 128)
    # grouped-query kernels give one unit to a KV head and all its query heads (up to 32,
    # beyond which the query heads run one unit each); MHA one unit per head
    grouped = (group > 1) & (group <= 32)
    heads_units = np.where(grouped, b * n_kv, b * heads)
    # multi-block mode: while the units leave the SMs' resident slots idle, each unit's keys
    # are split into parts of at least DECODE_SPLIT_KEYS keys; a reduction kernel merges them
    # (Hopper's fp8-cache XQA kernel, ``sm90``: an fp8 cache on a device with fp8 tensor
    # cores, splits the keys of the window; MMHA and the other XQA kernels the whole cache,
    # their splits before the window finding no keys: the measured H100 bf16 rows with a
    # 128-token window grow with the cache length up to 3x, the fp8 grouped ones stay flat)
    sm90 = batch.dtype.startswith("fp8") & grouped & fig.sm90  # CC 9.x (H100/H200/H800) only
    sms = fig.sm_count
    split_keys = np.where(sm90, kv_eff, a["kv"])
    splits = _decode_splits(batch, heads_units, split_keys, sms * DECODE_SPLIT_UNITS_PER_SM)
    units = heads_units * splits
    # each part walks its 64-token cache blocks in turn; a block's work (its dot products and
    # softmax rescaling over the head dimension) grows with the head dim. A grouped unit
    # multiplies its query rows against each whole block in tensor-core row tiles: more rows
    # per KV head than a tile walk each block twice. MMHA walks the keys one by one (a key to
    # a thread group), its walk the keys' share of a block (the measured H100 MHA rows at
    # batch 2,048 take 46% longer at 64 cached keys than at 2)
    # The kernels are built for power-of-two head sizes: a head dim of 192 runs padded to 256
    # (the measured H100 per-unit cost at 192 equals that at 256 on both XQA kernels).
    # Row tiles: 16 query rows for the mma.sync XQA kernel, 8 for Hopper's, whose warp-group
    # MMA takes the query heads as its N dimension (multiples of 8; its measured per-unit cost
    # steps between 8 and 12 query heads a KV head, the bf16 kernel's between 16 and 24)
    hd = 2.0 ** np.ceil(np.log2(np.maximum(hd, 1.0)))
    row_tile = np.where(sm90, 8.0, 16.0)
    rows = np.where(grouped, group * q, 1.0)
    # the keys a part walks: its share of the window (Hopper's fp8 XQA, or no window); where
    # the splits partition the whole cache, the window's keys fall in the last parts, each
    # holding at most ``kv / splits`` of them, so a longer cache never shortens the walk
    partitioned = ~sm90 & (kv_eff < a["kv"])
    part_keys = np.minimum(kv_eff, np.ceil(a["kv"] / splits))
    walked = np.where(
        partitioned,
        np.where(grouped, np.ceil(part_keys / 64.0), part_keys / 64.0),
        np.where(grouped, np.ceil(np.ceil(kv_eff / 64.0) / splits), kv_eff / 64.0 / splits),
    )
    # the parts that hold keys (all of them without a window)
    busy = heads_units * np.where(
        partitioned, np.minimum(splits, np.ceil(kv_eff / np.maximum(part_keys, 1.0))), splits
    )
    unit_blocks = walked * (hd / 128.0)
    unit_blocks = unit_blocks * np.where(grouped, np.ceil(rows / row_tile), 1.0)
    # per-unit work (loading the queries, the final softmax normalisation and output write):
    # a grouped (XQA) unit's fixed part is ``grouped_unit`` MMHA heads; each query head it
    # carries adds ``qhead_unit`` per 128 of head dim
    unit_cost = np.where(grouped, prm["grouped_unit"], 1.0) + prm["qhead_unit"] * rows * hd / 128
    # the per-unit work is issue throughput the units resident on an SM share: it costs
    # units / SMs of it (one unit alone on an SM takes no more than its latency, which the
    # fixed cost holds); the walk of a unit's blocks is a chain of dependent loads, at least
    # one unit's walk
    share = units / sms
    # beyond 32 query heads per KV head every decode query head streams the cache itself;
    # the share ``fallback_reads`` of those repeated reads misses the L2 (a prefill tile
    # loads each K/V block once for its 128 queries, whatever the grouping)
    nbytes = batch.bytes * np.where(group > 32, 1.0 + prm["fallback_reads"] * (group - 1.0), 1.0)
    # (every part pays its per-unit work, empty or not; only the parts holding keys stream
    # the cache and keep tensor cores busy)
    out = _attention_time(
        batch,
        fig,
        prm,
        units=busy,
        unit_blocks=unit_blocks * np.maximum(share, 1.0),
        unit_cost=unit_cost * share,
        masked=np.zeros(len(batch)),
        serial=np.ones(len(batch)),
        nbytes=nbytes,
    )
    # MMHA reads an fp8 cache and converts every element on the CUDA cores before its FP32
    # dot products (Hopper's fp8 XQA multiplies fp8 on the tensor cores): ``dequant_s`` of an
    # SM per element, spread over the SMs its parts holding keys keep busy (the measured H100
    # MHA rows with an fp8 cache take 0.6-0.75 of the bf16 time where the halved cache bytes
    # alone give 0.5)
    mmha_fp8 = batch.dtype.startswith("fp8") & ~sm90
    elements = b * heads * kv_eff * hd * 2.0
    out["compute_s"] = out["compute_s"] + np.where(
        mmha_fp8, elements * prm["dequant_s"] / np.minimum(busy, sms), 0.0
    )
    # further kernels of the call, ``launch_s`` each: the RoPE + cache-append pre-kernel, which
    # Hopper's fp8-cache XQA kernel (grouped queries, no attention sinks) does itself (the
    # measured H100 fp8 GQA rows at batch 1 take 5.5-6.5 us against 8.5-9 us of every other
    # path), and the reduction of the key splits
    # (``rope_kernel`` 0: the caller times RoPE and the append as a kernel of its own, as a
    # model step does; the measured rows include it, the default)
    fused = sm90 & (_col(batch, "sinks", 0) <= 0)
    pre = (~fused) & (_col(batch, "rope_kernel", 1) > 0)
    kernels = pre.astype(np.float64) + (splits > 1)
    out["extra_s"] = out["extra_s"] + prm["launch_s"] * kernels
    return out


def _mla_decode(
    batch: KernelBatch, fig: DeviceFigures, prm: dict[str, float]
) -> dict[str, np.ndarray]:
    """``mla_decode``: latent (absorbed) MLA decode."""
    a = _attention_shape(batch)
    b, q, heads, kv_eff = a["b"], a["q"], a["heads"], a["kv_eff"]
    # latent heads: one work unit per sequence and 64 query heads (every head shares the
    # latent cache), all of them reading the same cache blocks
    tiles = np.ceil(heads * q / 64.0)
    heads_units = b * tiles
    # (one unit a SM: the latent kernels' units fill the SMs by themselves)
    splits = _decode_splits(batch, heads_units, kv_eff, fig.sm_count)
    units = heads_units * splits
    # a kernel that cannot split the keys (``kv_split = 0``, the A100 rows) walks all of a
    # sequence's keys on one SM, multiplying a whole 64-row tile of query heads against each
    # latent key at that SM's tensor rate: the A100 rows take the same time for 1 to 64 heads
    # at every batch up to 32 and every length (128 heads: two tiles, two units). A splitting
    # kernel (FlashMLA) is bound by the cache stream below 64 heads; its fit is worse with
    # the padded tile (H100 fp8 8.1% -> 10.9%), so only its real products are counted
    padded = tiles * 64.0 / np.maximum(heads * q, 1.0)
    splits_allowed = _col(batch, "kv_split", 1) > 0
    # the latent key and value rows of every 64-token block the unit walks pass through the
    # SM's shared memory once per reader (bf16 operands, 128 bytes a clock): a Hopper
    # warp-group MMA reads them once for its 64-row tile (FlashMLA, ``operand_reads = 1``);
    # Ampere's mma.sync kernel has four warps of 16 rows each read every row themselves
    # (``operand_reads = 4``, set by the mapping for the A100 kernel). With the tile's products
    # at one SM's tensor rate this is 68 + 68 of the 171 cycles an A100 unit takes per key
    # alone on its SM (the products at full rate alone: 68); fitted on either device it
    # predicts the other within 20-23% (39% and 27% without it)
    row_bytes = (_col(batch, "head_dim_qk", 576) + _col(batch, "head_dim_v", 512)) * 2.0
    # the call's fixed time and each unit's fixed work (its query tile in, its output or
    # partial result out) are waits in seconds, as in prefill (``call_latency_s``,
    # ``unit_latency_s``): the floors are 13 us (H100) and 15 us (A100), not 1.3x apart, and
    # a unit's work beyond its first block takes 5.4 and 4.5 us on an SM at b = 1024, step 1;
    # leave-one-device-out 20-22% -> 17-18%
    unit_blocks = np.ceil(np.ceil(kv_eff / 64.0) / splits)  # whole 64-token blocks a unit walks
    smem = (
        unit_blocks
        * 64.0
        * row_bytes
        * _col(batch, "operand_reads", 1)
        / (SMEM_BYTES_PER_CLOCK * fig.clock_hz)
    )
    return _attention_time(
        batch,
        fig,
        prm,
        units=units,
        unit_blocks=unit_blocks,
        unit_cost=np.full(len(batch), prm["grouped_unit"]),
        masked=np.zeros(len(batch)),
        # a splitting kernel's SMs take the short units as they free up; the non-splitting
        # kernel's units each walk a whole cache, in whole waves over the SMs (A100 fitted
        # 8.6% -> 7.5%, p90 22% -> 20%)
        serial=np.where(
            splits_allowed, np.maximum(units / fig.sm_count, 1.0), np.ceil(units / fig.sm_count)
        ),
        flops=batch.flops * np.where(splits_allowed, 1.0, padded),
        latency=smem + prm["unit_latency_s"],
        call=prm["call_latency_s"],
    )


#: Output tiles of the grouped GEMMs: the GEMM tiles and two short ones for experts with few
#: rows (16 and 32 rows by 128 columns), each at the share of the tensor rate its intensity
#: reaches (:func:`_tile_rate`), as arrays of (tile, row).
_MOE_TILES = tuple(
    (tm, tn, _tile_rate(tm, tn))
    for tm, tn in (
        (16, 128),
        (32, 128),
        (64, 64),
        (64, 128),
        (128, 64),
        (128, 128),
        (128, 256),
        (256, 128),
    )
)
_MOE_TM, _MOE_TN, _MOE_RATE = _tile_arrays(_MOE_TILES)
_MOE_GEMMS = np.arange(2)[:, None]


def _moe_m_tiles(
    tm: np.ndarray, active: np.ndarray, pairs: np.ndarray, top: np.ndarray
) -> np.ndarray:
    """Row tiles of ``tm`` rows a grouped GEMM runs over the rank's experts: the most-loaded
    expert's ``top`` rows, the other ``active - 1`` experts sharing the rest equally (each
    expert's rows padded to whole tiles)."""
    rest = np.maximum(pairs - top, 0.0) / np.maximum(active - 1.0, 1.0)
    return np.ceil(top / tm) + (active - 1.0) * np.ceil(rest / tm)


def _moe(batch: KernelBatch, fig: DeviceFigures, prm: dict[str, float]) -> dict[str, np.ndarray]:
    """``moe``: the fused routed-expert layer of one rank, two grouped GEMMs (FC1: hidden ->
    (gate and) up, FC2: intermediate -> hidden) over the experts the batch touches, and the
    kernels around them (routing, permute with the activation quantization, the gated
    activation, the weighted finalize)."""
    hidden = _col(batch, "hidden", 1)
    inter = _col(batch, "inter", 1)
    gated = _col(batch, "gated", 1)
    active = np.maximum(_col(batch, "active_experts", 1), 1.0)
    mats = np.where(gated > 0, 3.0, 2.0)
    pairs = np.maximum(batch.flops / (2.0 * hidden * inter * mats), 1.0)
    # rows of the most-loaded expert: at least the mean, at most every assignment
    top = _col(batch, "max_tokens_per_expert", 0)
    top = np.clip(np.where(top > 0, top, pairs / active), pairs / active, pairs)
    sms = fig.sm_count
    per_sm = prm["eff_compute"] * fig.peak(batch.dtype) / sms
    # the two GEMMs run one after the other, each with its own waves of output tiles: FC1
    # (N = (mats - 1) x inter, K = hidden) and FC2 (N = hidden, K = inter); each reads its
    # share of the touched experts' weights, drawing HBM with the SMs its tiles keep busy
    # (the library's profiler picks each GEMM's fastest tile: the shortest time is taken).
    # Arrays of (GEMM, tile, row).
    n = np.array([inter * (mats - 1.0), hidden])[:, None, :]
    k = np.array([hidden, inter])[:, None, :]
    tiles = _moe_m_tiles(_MOE_TM, active, pairs, top) * np.ceil(n / _MOE_TN)
    waves = np.ceil(tiles / sms)
    # each wave of tiles also pays ``tile_s`` beside its main loop: filling the operand
    # pipeline, the epilogue's stores, the scheduler's switch to the next expert's problem
    candidates = waves * (2.0 * _MOE_TM * _MOE_TN * k / (per_sm * _MOE_RATE) + prm["tile_s"])
    best = np.argmin(candidates, axis=1)
    compute = candidates.min(axis=1).sum(axis=0)
    units = tiles[_MOE_GEMMS, best, np.arange(len(batch))]
    bw = prm["eff_memory"] * fig.hbm_bytes_per_s
    share = _memory_share(units, fig, prm)
    memory = batch.bytes / bw * ((mats - 1.0) / share[0] + 1.0 / share[1]) / mats
    # the kernels around the grouped GEMMs (permute, activation, quantize, finalize) stream
    # every (token, expert) row: ``act_passes`` bf16 passes over hidden + intermediate
    assignments = _col(batch, "assignments", 0)
    assignments = np.where(assignments > 0, assignments, pairs)
    extra = prm["act_passes"] * assignments * (hidden + inter) * 2.0 / bw
    # routing every token entering the rank: top-k selection and the gather/scatter indices
    # of all its (token, expert) pairs, local or not, ``route_s`` of one SM's work per pair
    tokens = _col(batch, "tokens", 0)
    routed = np.where(tokens > 0, tokens * _col(batch, "topk", 1), assignments)
    extra = extra + prm["route_s"] * routed / sms
    return {"compute_s": compute, "memory_s": memory, "extra_s": extra}


def _streaming(
    batch: KernelBatch, fig: DeviceFigures, prm: dict[str, float]
) -> dict[str, np.ndarray]:
    units = np.maximum(np.ceil(batch.bytes / 65536.0), 1.0)
    bw = prm["eff_memory"] * fig.hbm_bytes_per_s * _memory_share(units, fig, prm)
    resident = np.zeros(len(batch))
    if batch.kind == "quantize" and "elements" in batch.shape:
        # a warm replay on the same input (the measured quantize rows: five calls on one x, no
        # L2 flush) finds the bf16 input in the L2 when it and the output fit in the share of
        # the L2 a kernel's operands keep (the GEMM's rule): its reads come at ``l2_speedup``
        # times the HBM rate (the measured H100 static quantize at 12-48 MB moves 3.7 TB/s,
        # above the 3.35 TB/s of HBM; at 60 MB and more 3.05 TB/s)
        e = _col(batch, "elements", 0)
        reads = 2.0 * e * _col(batch, "passes", 1)
        footprint = 2.0 * e + _col(batch, "write", 1) * e
        share = np.clip(2.0 - footprint / (prm["l2_share"] * fig.l2_bytes), 0.0, 1.0)
        warm = _col(batch, "warm_l2", 0) > 0
        resident = np.where(warm, share * np.minimum(reads, batch.bytes), 0.0)
    memory = (batch.bytes - resident) / bw + resident / (prm["l2_speedup"] * fig.hbm_bytes_per_s)
    compute = batch.flops / (
        prm["eff_compute"] * fig.peak("fp32" if "fp32" in fig.peaks else "bf16")
    )
    # a call of several graph nodes (``launches``: the amax reduction is a memset of its scale
    # and the reduction kernel) pays the fixed cost of each
    extra = (np.maximum(_col(batch, "launches", 1), 1.0) - 1.0) * prm["fixed_s"]
    return {"compute_s": compute, "memory_s": memory, "extra_s": extra}


def _collective(
    batch: KernelBatch, fig: DeviceFigures, prm: dict[str, float]
) -> dict[str, np.ndarray]:
    msg = np.asarray(batch.shape.get("message_bytes", batch.bytes), dtype=np.float64)
    n = np.maximum(_col(batch, "n_gpus", 2), 1.0)
    link = prm["link_eff"] * fig.link_bytes_per_s
    lat = prm["latency_steps"] * fig.link_latency_s
    kind = batch.kind
    proto = prm["proto_s"]

    # flagged stores are issued one by one by the SMs of the library's channels, whose count
    # follows the links (25 GB/s each way a link on NVLink 3 and 4): their rate is the link
    # bandwidth's share at the reference clock, scaled with the clock (the measured flagged
    # regime, 10-400 KB: A100 1.6-1.9x slower than H100, where the links alone give 1.5x).
    # Issue can slow a transfer below the link's rate, never speed it beyond: a device clocked
    # above the reference moves its stores at the link's rate
    issue = min(1.0, fig.clock_hz / REFERENCE_CLOCK_HZ)

    def stepped(steps: np.ndarray, volume: np.ndarray) -> np.ndarray:
        # the faster of the two ways a library moves a step's data: flagged 8-byte stores that
        # carry 4 bytes each (half the link bandwidth, no synchronisation: NCCL's LL), or bulk
        # copies at the full link bandwidth behind a synchronisation per step
        flagged = steps * lat + 2.0 * volume / (link * issue)
        bulk = steps * (lat + proto) + volume / link
        return np.minimum(flagged, bulk)

    # a ring rank also copies its own 1/n share between its buffers (out-of-place: input to
    # output, or the reduced share to the output), read and written in HBM by the
    # collective's own few SMs at ``eff_memory`` of the bandwidth, in series with the ring
    # (the measured rings are 20-30% slower per link byte at 2 GPUs than at 8, on both
    # devices); the ideal collective (no ``eff_memory``) has no such copy
    own = 2.0 * msg / n / (prm.get("eff_memory", np.inf) * fig.hbm_bytes_per_s)
    if kind == "all_reduce":
        ring = stepped(2 * (n - 1), 2 * (n - 1) / n * msg) + own
        # one-shot: every peer's message read directly, by loads and stores the SMs issue
        # one by one, at the clock-scaled rate of the flagged steps above. NCCL has no
        # one-shot (``one_shot = 0``); custom all-reduces take it
        one_shot = lat + (n - 1) * msg / (link * issue)
        comm = np.where(_col(batch, "one_shot", 1) > 0, np.minimum(ring, one_shot), ring)
        if fig.link_multicast > 0:
            # a switch that reduces in the fabric (NVLink SHARP, NCCL's NVLS): every rank
            # sends its message to the switch once and receives the sum once, at ``switch_eff``
            # times the ring's link efficiency (the measured H100 8-GPU rows: 1.4x the ring's
            # bus bandwidth), in bulk; each of its two phases (reduce, multicast) ends when
            # every rank has heard from the n - 1 others, the ring's 2(n - 1) synchronised
            # steps. Taken where it is faster, as NCCL's tuner does. ``switch_eff`` is kept
            # between 0.5 and 1: below 4/7 the switch would never beat the ring at 8 GPUs or
            # fewer, which the flag (and NCCL's use of it at 8 GPUs) contradicts
            nvls = 2 * (n - 1) * (lat + proto) + msg / (prm.get("switch_eff", 1.0) * link)
            comm = np.minimum(comm, nvls)
    elif kind in ("dispatch", "combine"):
        # expert-parallel token exchange: the low-latency kernels send every copy straight to
        # its rank in one step; normal mode goes through n - 1 steps and moves data with the
        # SMs it is given (``sms``; 0 = all), each drawing ``sm_bandwidth`` x link / SMs, at
        # the slower of the link and those SMs. The SMs also work on every token whatever its
        # copies (the senders of every rank scan each token's routing; the combine reduces and
        # writes each token once): ``token_copies`` copies' worth of work a token (the measured
        # H100 rows at 4 SMs: top-1 tokens move 3.3x fewer bytes a second than top-8 ones)
        low = _col(batch, "low_latency", 0) > 0
        sms = _col(batch, "sms", 0)
        share = np.where(sms > 0, sms * prm["sm_bandwidth"] / fig.sm_count, np.inf)
        tokens = _col(batch, "tokens", 0)
        copies = np.maximum(_col(batch, "copies", 1), 1e-9)
        work = 1.0 + prm.get("token_copies", 0.0) * tokens / copies
        link_t = (n - 1) / n * msg / link
        sm_t = link_t * work / share
        comm = np.where(low, lat + msg / link, (n - 1) * lat + np.maximum(link_t, sm_t))
    elif kind in ("all_gather", "reduce_scatter", "all_to_all"):
        comm = stepped(n - 1, (n - 1) / n * msg) + own
    else:  # p2p
        comm = lat + msg / link
    comm = np.where(n <= 1, 0.0, comm)
    zeros = np.zeros(len(batch))
    return {"compute_s": zeros, "memory_s": comm, "extra_s": zeros}


def scale_params(kind: str, prm: dict[str, float], fig: DeviceFigures) -> dict[str, float]:
    """``prm`` with the times of work on the SMs (cycles, stated at the reference clock) scaled
    to the device's clock; of a collective only its fixed cost and synchronisation."""
    scale = REFERENCE_CLOCK_HZ / fig.clock_hz
    out = dict(prm)
    for name in COMM_CLOCKED if kind in COMM_KINDS else CLOCKED:
        out[name] = prm[name] * scale
    return out


def kernel_terms(
    batch: KernelBatch, fig: DeviceFigures, prm: dict[str, float], *, scaled: bool = False
) -> dict[str, np.ndarray]:
    """The time terms of every kernel of ``batch`` on ``fig`` with parameters ``prm``:
    ``compute_s``, ``memory_s`` (link time for collectives), ``fixed_s``, ``extra_s`` and
    ``seconds`` per call (times ``calls``). ``scaled``: ``prm`` is already clock-scaled
    (:func:`scale_params`)."""
    kind = batch.kind
    if not scaled:
        prm = scale_params(kind, prm, fig)
    if kind == "gemm":
        terms = _gemm(batch, fig, prm)
    elif kind in ("attention_prefill", "mla_prefill"):
        terms = _attention_prefill(batch, fig, prm)
    elif kind == "attention_decode":
        terms = _attention_decode(batch, fig, prm)
    elif kind == "mla_decode":
        terms = _mla_decode(batch, fig, prm)
    elif kind == "moe":
        terms = _moe(batch, fig, prm)
    elif kind in COMM_KINDS:
        terms = _collective(batch, fig, prm)
    else:
        terms = _streaming(batch, fig, prm)
    if kind in COMM_KINDS:
        body = terms["memory_s"]
    else:
        body = _combine(terms["compute_s"], terms["memory_s"], prm["overlap"])
    calls = np.asarray(batch.calls, dtype=np.float64)
    fixed = np.full(len(batch), prm["fixed_s"])
    if "plugin" in batch.shape:
        fixed = fixed + UNGRAPHED_LAUNCH_S * (_col(batch, "plugin", 0) > 0)
    terms["fixed_s"] = fixed
    terms["seconds"] = (fixed + body + terms["extra_s"]) * calls
    return terms
