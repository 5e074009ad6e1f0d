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
  per kernel (none for block-scaled fp8 and SmoothQuant int8) and the split-K reduction's
  fp32 partials through HBM, GEMV kernels at a few rows, a
  cost per wave of tiles (``tile_s``) and the unhidden share of the output write
  (``epilogue_share``); fp8 GEMMs add the quantization of their bf16 input (``quant_fixed_s``,
  ``quant_bytes``), block-scaled fp8 the CUDA-core rescale of each K block
  (``promote_cycles``), weight-only GEMMs the conversion of each weight (``dequant_s``);
- :func:`_attention_prefill`: 128 x 128 tiles, the softmax's exponentials on the SFUs
  (``eff_exp``, ``sfu_overlap``), the K/V operands each MMA instruction reads from shared
  memory (64 rows a read on Hopper, 16 before), the tiles an SM's shared memory holds at
  once (one on Hopper's persistent kernels), the fp8 V transpose and probability
  conversion, fp8 head dims padded to powers of two, banded windows (``mask_s``), a call's
  and a unit's waits in seconds (``call_latency_s``, ``unit_latency_s``), not cycles, and
  the RoPE pre-kernel (``pre_latency_s`` and a streaming pass; ``rope_kernel``);
- :func:`_attention_decode`: (sequence, KV-head group) units with key splits, per-unit work as
  SM throughput (``seq_s``, ``grouped_unit``, ``qhead_unit``), the block walk (``block_s``),
  further kernels of a call (``launch_s``), the in-kernel merge of Hopper's fp8 XQA key
  splits (``merge_s``), fp8 cache conversion (``dequant_s``) and per-head cache re-reads
  beyond 32 query heads per KV head (``fallback_reads``);
- :func:`_mla_decode`: latent units of 64 heads, the key-splitting kernel (its combine kernel
  and partial results) against the one that walks a whole cache on one SM (its own overlap,
  ``walk_overlap``), the shared-memory traffic of a key, and the RoPE pre-kernel
  (``rope_kernel``);
- :func:`_moe`: two grouped GEMMs with per-expert row tiles (the library's fastest, or the
  one the call fixes: ``row_tile``, the Triton MoE), the touched experts' weights, a
  cost per wave of tiles, the routing of every pair (``route_s``), the selection rounds of a
  top-k above the fused routing's limit (``select_s``) and the streaming passes around the
  GEMMs (``act_passes``);
- :func:`_collective`: ``fixed + steps x latency_steps x link latency`` plus the algorithm bytes
  the faster of two ways: flagged stores at half of ``link_eff x link bandwidth``, or bulk
  copies at the full rate behind ``proto_s`` per step; ring (2(n-1)/n of the message for an
  all-reduce) against one-shot (every peer's message read directly; not in NCCL), and where
  the switch reduces in the fabric (``link_multicast``: NVLink SHARP) the switch-reduced
  all-reduce (the message once each way at ``switch_eff`` of the link), whichever is faster;
  a ring rank also copies its own 1/n share through HBM at ``eff_memory``; NCCL's all-to-all
  sends flagged up to 16 KB a peer and in bulk above, all peers at once behind one
  synchronisation; DeepEP kernels pay SM work per token (``token_copies``);
- a kernel timed outside a CUDA graph (``plugin = 1``) adds :data:`UNGRAPHED_LAUNCH_S`.

Every parameter is a fraction or multiple of a datasheet figure, or a time of work on the SMs
stated at a reference clock (cycles, scaled by the device's clock; of a collective, its fixed
cost, per-step synchronisation and per-step wait), or, for the waits both measured devices
show equal whatever their clocks, seconds; so a profile fitted on measured devices transfers.
"""

from __future__ import annotations

import numpy as np

from mlacalc.timemodel.device import DeviceFigures
from mlacalc.words.dtypes import DTYPE_BITS
from mlacalc.words.kernels import KernelBatch

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
#: of its protocol) is SM work too and scales the same way, and so is its per-step wait (see
#: :data:`COMM_CLOCKED`).
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
    "select_s",
    "launch_s",
    "merge_s",
    "wave_s",
)
#: The clocked terms of a collective: its fixed cost, its bulk copies' synchronisation per step
#: and its per-step wait (``latency_steps`` link latencies). A step ends when the SMs polling a
#: flag see a peer's write land: the datasheet link latency (one figure for NVLink 3 and 4,
#: measured at a Hopper clock) stated in cycles of the SMs that poll and answer it. The measured
#: NCCL calls of 2-4 KB at 2, 4 and 8 GPUs add 0.77-0.84 us a step on H100 and 0.96-1.03 us on
#: A100 (x1.15-1.25; the clocks differ x1.30). Unclocked, each device's fit predicted the
#: other's NCCL calls 16-19% off (A100 too fast, H100 too slow); clocked, 13-14%, the rest at
#: small messages, where the eager calls' host launch (no datasheet figure) differs.
COMM_CLOCKED = ("fixed_s", "proto_s", "latency_steps")

#: Launch latency of a kernel timed outside a CUDA graph (a TensorRT plugin layer timed by the
#: engine's profiler, ``plugin = 1``): the host launch a graph replay removes and the fitted
#: fixed costs, all taken from graph replays, leave out. The same 5 us per launch the unfused
#: mode assumes without a measured figure (``mlacalc.timemodel.predict.DEFAULT_LAUNCH_S``).
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
    "latency_steps": (0.0, 20.0, "link latencies per algorithm step, at the reference clock"),
    "proto_s": (0.0, 5e-5, "synchronisation per step of a bulk-copy collective, seconds"),
    "eff_exp": (0.05, 1.0, "fraction of the SFU exponential rate (16 a clock per SM) reached"),
    "sfu_overlap": (1.0, 16.0, "p of the p-norm combining tensor-core and exponential time"),
    "dequant_s": (0.0, 1e-9, "seconds one SM takes to convert one element on its CUDA cores"),
    "tile_s": (0.0, 2e-5, "seconds per wave of GEMM/MoE output tiles beside their main loop"),
    "route_s": (0.0, 1e-5, "seconds one SM spends routing one (token, top-k) pair of a MoE"),
    "select_s": (0.0, 1e-5, "seconds of one round of a MoE's generic top-k (ref. clock)"),
    "promote_cycles": (0.0, 0.25, "SM cycles per output element and K block rescaling fp8 blocks"),
    "launch_s": (0.0, 2e-5, "fixed cost of each further kernel of a decode call, s (ref. clock)"),
    "qhead_unit": (0.0, 10.0, "decode work per query head of a unit and 128 of head dim, in seq_s"),
    "switch_eff": (0.5, 1.0, "link efficiency of an in-switch (NVLS) all-reduce, x link_eff"),
    "unit_latency_s": (0.0, 2e-5, "seconds a prefill work unit waits on memory, not clocked"),
    "call_latency_s": (1e-7, 2e-4, "seconds of a prefill call's launches and waits, not clocked"),
    "pre_latency_s": (0.0, 2e-5, "seconds of a prefill call's RoPE pre-kernel, not clocked"),
    "epilogue_share": (0.0, 1.0, "share of a GEMM's output write no tile's mainloop hides"),
    "token_copies": (0.0, 20.0, "SM work per token of a DeepEP normal kernel, in copies"),
    "walk_overlap": (1.0, 16.0, "p of the p-norm of a decode kernel walking a cache on one SM"),
    "merge_s": (0.0, 2e-7, "seconds merging one key split per 128 of head dim (ref. clock)"),
    "wave_s": (0.0, 1e-4, "seconds per further wave of a decode kernel's resident units"),
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
    "select_s": 0.0,
    # one fused multiply-add per output element and block, on the 128 FP32 lanes of an SM
    "promote_cycles": 1.0 / 128.0,
    "launch_s": 2e-6,
    "qhead_unit": 0.1,
    "switch_eff": 1.0,
    "unit_latency_s": 0.0,
    "call_latency_s": 0.0,
    "pre_latency_s": 0.0,
    # a tile's epilogue writes its output after its mainloop, unhidden
    "epilogue_share": 1.0,
    "token_copies": 0.0,
    "merge_s": 0.0,
    # a further wave of resident decode units costs 1 us per 8 query rows and 1024 of head
    # dim (between the fitted bf16 XQA figures, 0.4-0.5 us on H100 and A100, and Hopper's
    # fp8 XQA, 2.7 us)
    "wave_s": 1e-6,
    # no overlap: a kernel that walks a cache on one SM without a producer warp waits for each
    # block's loads before its products
    "walk_overlap": 1.0,
}

#: the starting point of both prefill kinds (FlashAttention-style and MLA's expanded prefill)
_PREFILL_DEFAULTS: dict[str, float] = {
    "fixed_s": 0.0,
    "eff_exp": 1.0,
    "sfu_overlap": 2.0,
    "eff_compute": 0.55,
    "seq_s": 0.0,
    "pre_latency_s": 3e-6,
    "call_latency_s": 1e-5,
    "unit_latency_s": 3e-6,
}

_KIND_DEFAULTS: dict[str, dict[str, float]] = {
    # DeepEP's normal kernels without a fit of their own (a profile fitted where no DeepEP was
    # measured): their SMs draw the link with 24 of a 132-SM part (``sm_bandwidth`` = 132 /
    # 24, in link / SMs). DeepEP 1.0.0 (README; tests/test_intranode.py runs 24 SMs, the
    # README's example ``Buffer.set_num_sms(24)``) reaches 153 GB/s dispatching and 158 GB/s
    # combining of the "~160 GB/s NVLink maximum" of an H800 (132 SMs; the figures also in
    # shared/reference/serving-figures.md, 2.4). At the shared default (3) an A100-only
    # profile predicted the measured H100 normal rows of 1k-128k tokens 50-150% too slow.
    "dispatch": {"sm_bandwidth": 5.5},
    "combine": {"sm_bandwidth": 5.5},
    # (prefill ``pre_latency_s``: the RoPE + cache-write pre-kernel's launch and wait, not
    # fitted: every measured prefill row has the pre-kernel, so the call's latency would hold
    # the same time; the 2.9-3.2 us the fitted H100 decode classes give the same pre-kernel.
    # The waits start where the measured rows put them, 10 us a call and 3 us a unit (isl 16
    # on both devices): started at 0, the A100 MLA fit stops at a unit wait of 0, fitted p90
    # 24% against 18%). The exponentials run at the SFUs' datasheet rate (``eff_exp`` 1, not
    # fitted); how much of them the MMAs hide is ``sfu_overlap``, started at 2 (a Euclidean
    # p-norm: FlashAttention-3's two warp-groups overlap one's softmax with the other's MMAs,
    # in part). A device with one head dim (the A100 rows) barely tells the two apart; fitted
    # with ``eff_exp`` the H100 and A100 ``eff_compute`` came out 0.86 and 0.94, with it fixed
    # 0.94 and 0.94 (leave-one-device-out H100 -> A100 7.1% -> 5.7%)
    "attention_prefill": _PREFILL_DEFAULTS,
    "attention_decode": {"fixed_s": 8e-6},
    "mla_prefill": _PREFILL_DEFAULTS,
    "mla_decode": {"fixed_s": 0.0, "eff_compute": 0.6, "seq_s": 0.0},
    "moe": {"fixed_s": 2e-5, "eff_compute": 0.5},
    "elementwise": {"fixed_s": 2e-6},
    # a weight-only GEMM's conversion of each weight to bf16 (``dequant_s``) where no fit saw
    # one (a profile fitted on a device without weight-only rows): about 1.5 instructions an
    # element (the interleaved int4/int8 -> bf16 conversion, about one a weight, and the
    # per-channel scale's multiply, one per two) on the 128 lanes an SM issues each clock
    # (four schedulers of 32). Fitted on the A100 rows: 2.4e-12 (int4) and 3.6e-12 (int8);
    # at 0 an H100-only profile predicted the A100 w4a16 rows 8% too fast (signed median)
    "gemm": {"dequant_s": 1.5 / 128.0 / REFERENCE_CLOCK_HZ},
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
        "wave_s",
    ),
    "mla_decode": (
        "eff_compute",
        "eff_memory",
        "call_latency_s",
        "overlap",
        "block_s",
        "unit_latency_s",
        "walk_overlap",
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
        "select_s",
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
        names = (*names, "merge_s")  # Hopper's fp8 XQA merges its key splits itself
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
    kernel of the same kind, see :mod:`mlacalc.words.kernels`) ``"gemm:fp8_block:bmm"``."""
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

#: GEMM dtypes whose kernel is chosen by TensorRT-LLM's plugin profiler: it times every
#: candidate (tile, split) at power-of-two row counts and a call of m rows runs the one chosen
#: for the next power of two at or above m. The measured A100 plugin rows: m = 80 and 96 take
#: the time of m = 128 (median ratio over n, k >= 2048: w4a16 0.99 and 0.99), m = 160 and 192
#: the same (1.25, 1.26), where a tile chosen for m itself pads less (predicted 0.81, 0.94,
#: 1.09); SmoothQuant int8 the same (m = 384 at 1.98 of m = 128 and m = 512 at 2.22). Fitted
#: median / p90 error: w4a16 7.6/25.3% -> 7.2/24.5%, w8a16 6.4/23.3% -> 5.6/23.1%, int8
#: 5.2/19.0% -> 4.9/17.4%. (Tried and dropped: the fpA_intB kernels' serial split-K, 1 to 7
#: splits at the profiler's choice, each further split one more epilogue in turn (``tile_s``):
#: w4a16 8.0/25.4%, and from the H100 fit, whose ``tile_s`` is about 0, p90 45%.)
PROFILED_POW2_M = ("w4a16", "w8a16", "int8")

#: Calls of at most this many rows that a dtype's library runs as a GEMV kernel on the CUDA
#: cores instead of its tiled GEMM (TensorRT-LLM's plugins take their CUDA-core kernel below
#: 5 rows), and whether its blocks split K across SMs. The SmoothQuant int8 GEMV does (the
#: measured A100 rows: m = 1 to 4 at n = 128 and k = 65536 take 20 us, m = 8 to 64 the 150 us
#: of a tile walking all of K). The weight-only batched GEMV does not: a block walks all of K
#: for its columns (m = 1 to 4 at k = 16384: about 45 us for any n from 128 to 5120; with
#: the GEMV rows w4a16 fitted median / p90 8.9/27.7% -> 8.1/24.9%, splitting K 8.4/26.9%).
GEMV_MAX_M = {"int8": 4, "w4a16": 4, "w8a16": 4}
GEMV_SPLITS_K = {"int8": True, "w4a16": False, "w8a16": False}

#: Calls of at most this many rows that a dtype's library runs as a CUDA-core GEMV (cuBLAS
#: dispatches a GEMM with a vector operand to its gemv kernels) where its tiled kernel would be
#: bound by its padded tensor-core work rather than its operand reads. The GEMV pads no rows to
#: a tensor-core tile and its blocks (a warp per output column) cover every SM, so it is
#: memory-bound; a 64-row tile walking K on a few SMs is not where the tensor rate per SM is low
#: (Ada GeForce: 512 dense bf16 FLOP a clock an SM, A100 2048, H100 about 4096). The measured
#: A100 bf16 rows show it at m = 1 only: 3.1-5.2 us at k = 1024, n = 128 to 1024 against 7.5 us
#: at m = 2 (the median m = 1 / m = 2 time 0.84 under 2 MB of weights, 0.90 at 2-8 MB, 1.00
#: beyond, where both are memory-bound); the H100 rows take the same time at m = 1 and 2 in
#: every size (their tiles, at 4x the A100's rate per SM, are mostly memory-bound: the fitted
#: H100 m = 1 median error stays 5.3%, the signed +3.3% -> +2.2% at n, k <= 1024). With it the A100
#: m = 1 rows with n, k <= 1024: signed median +36% -> +0% (fitted), +39% -> +9% (H100 fit);
#: a GEMV at every m = 1 call instead (also where the tile is memory-bound) left the A100 m = 1
#: rows of 2-32 MB 18-21% too fast and the A100 fit's H100 bf16 error at 9.6% (8.9% without).
#: Not at m >= 2 (the A100 m = 2 rows are the tiled kernel's) and not for fp8 (cuBLASLt's fp8
#: matmuls are tensor-core kernels; the H100 fp8 rows: the same time at m = 1 and 2).
CUDA_CORE_GEMV_MAX_M = {"bf16": 1, "fp16": 1}

#: CUDA-core instructions a GEMV issues per SM and clock: the 64 FP32 lanes of an A100 SM (H100
#: and Ada have 128; the smaller figure, so the GEMV never looks faster than the hardware). It
#: spends ``m`` fused multiply-adds and one bf16 -> fp32 conversion (a shift) on each weight.
GEMV_LANES_PER_CLOCK = 64.0

#: The least K a split of a split-K GEMM walks: a library splits K only while each split's
#: partial product outweighs the reduction of the partial sums (the measured H100 rows at m = 8,
#: n = 32, a single output tile: the time grows with k up to about 2,500 and stays flat beyond
#: it; with splits of 512 the bf16 p90 error was 26% on both devices, with 1,024 23% and 25%).
SPLIT_K_CHUNK = 1024

#: The split counts a GEMM library without its own split-K rule (cuBLAS(Lt): bf16, fp16,
#: per-tensor fp8) chooses between, each capped by the idle SMs (``inf``: as many splits as
#: they allow) and by SPLIT_K_LEAST_K, the least K a split walks (two 64-deep K stages of a
#: bf16 mainloop, one 128-deep stage of fp8). The library's heuristic runs the fastest: a split
#: fills idle SMs (each busy SM draws its share of the bandwidth, ``sm_bandwidth``) and shortens
#: the walk, and pays its partial sums (SPLIT_K_PARTIAL_BYTES) and SPLIT_K_REDUCE_NODES more
#: kernels, the reduction of the partial sums (cuBLAS's split-K reduce kernel), each a fixed
#: cost of the class (``fixed_s``). The fixed rule before (as many splits as the idle SMs
#: allow, each at least 1,024 deep) made a split free wherever allowed and barred it below
#: k = 2,048: the H100 rows at m <= 64 and k = 1,536 were predicted 20-55% too slow, and a
#: GEMM of 64 rows 40% slower than one of 65 (n = 128, k = 1,536: 8.4 against 6.0 us with the
#: shipped profile; measured 4.8 and 4.6; now 5.3 and 5.3). Fitted median / p90 error: H100
#: bf16 5.2/20.3% -> 5.1/16.3%, fp8 3.5/12.0% -> 3.3/11.4%, A100 bf16 6.7/20.5% -> 6.2/18.8%;
#: without the reduce kernel's fixed cost H100 bf16 5.7/23.9%; a least K of 256 or 512 fits
#: the same, but leaves the calls of k <= 512 too few splits to match the units a second row
#: tile brings (L40S fp8 from the H100 fit, n = 128, k = 512: m = 64 11% slower than m = 65
#: at 256, 7% at 128). The reduce kernel also tells a per-tensor fp8 GEMM's own fixed cost
#: from its input quantization's three graph nodes (every measured fp8 row has both): the H100
#: fit's ``fixed_s`` 12.2 us -> 1.8 us and ``quant_fixed_s`` 0 -> 3.5 us a node.
SPLIT_K_CHOICES = (1.0, 2.0, 4.0, 8.0, 16.0, np.inf)
SPLIT_K_LEAST_K = 128
SPLIT_K_REDUCE_NODES = 1.0

#: Bytes of HBM traffic per output element and split of a split-K GEMM's reduction: the split
#: writes its fp32 partial sum (4) and the reduction reads it back (4).
SPLIT_K_PARTIAL_BYTES = 8.0

#: The K depth of one scale block of a block-scaled fp8 GEMM (1x128 activation, 128x128 weight
#: blocks): every tile rescales its partial product once per block.
SCALE_BLOCK_K = 128


def _tile_arrays(tiles: tuple) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return (
        np.array([t[0] for t in tiles], dtype=np.float64)[:, None],
        np.array([t[1] for t in tiles], dtype=np.float64)[:, None],
        np.array([t[2] for t in tiles])[:, None],
    )


#: Output tiles one SM runs at once, for a library whose kernels do (others: one at a time).
#: TensorRT-LLM's weight-only CUTLASS kernels (fpA_intB) are four-warp CTAs whose register use
#: leaves room for two on an SM (65,536 registers an SM / (128 threads x 255 registers), the
#: per-thread cap; their heuristic counts waves with this occupancy, as recalled, not checked
#: against its source). An SM holding two tiles issues one's MMAs while the other waits on its
#: loads: see :func:`_gemm`.
RESIDENT_TILES_BY_DTYPE = {"w4a16": 2.0, "w8a16": 2.0}

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
    chunk, cap = SPLIT_K_BY_DTYPE.get(batch.dtype, (SPLIT_K_CHUNK, np.inf))
    # the split count a library chooses (SPLIT_K_CHOICES): every tile once per choice
    # (``can_split`` is one flag here: a dtype with a GEMV kernel has one per row)
    choose_split = not gemv_rows and batch.dtype not in SPLIT_K_BY_DTYPE and bool(can_split)
    if choose_split:
        chunk = SPLIT_K_LEAST_K
        count = len(tm)
        tm, tn, rate = (np.repeat(a, len(SPLIT_K_CHOICES), axis=0) for a in (tm, tn, rate))
        choice = np.tile(np.asarray(SPLIT_K_CHOICES, dtype=np.float64), count)[:, None]
    most = np.minimum(np.maximum(1.0, np.floor(k / chunk)), cap)
    weight = groups * n * k * _elem_bytes(batch.dtype)
    # a warm replay keeps the weights resident when all the copies the caller cycles through
    # (``weight_copies``) fit in the share of the L2 a kernel's operands can hold
    warm = _col(batch, "warm_l2", 0) > 0
    footprint = weight * np.maximum(_col(batch, "weight_copies", 1), 1.0)
    resident_share = np.clip(2.0 - footprint / (prm["l2_share"] * fig.l2_bytes), 0.0, 1.0)
    epi = prm["epilogue_share"]

    def streams(units, nbytes, out, resident) -> tuple[np.ndarray, np.ndarray]:
        # the HBM time of the operands and the unhidden epilogue write, at the bandwidth
        # ``units`` concurrent work units draw
        bw = prm["eff_memory"] * fig.hbm_bytes_per_s * _memory_share(units, fig, prm)
        memory = (nbytes - resident - epi * out) / bw + resident / (
            prm["l2_speedup"] * fig.hbm_bytes_per_s
        )
        return memory, epi * out / bw

    def candidates_at(rows: np.ndarray, nbytes: np.ndarray) -> dict[str, np.ndarray]:
        # every candidate (tile, split) of a call of ``rows`` rows moving ``nbytes``
        tiles = groups * np.ceil(rows / tm) * np.ceil(n / tn)
        fill = np.clip(np.floor(sms / tiles), 1.0, most)
        if choose_split:
            fill = np.minimum(fill, choice)
        splits = np.where((tiles < sms) & (groups <= 1) & can_split, fill, 1.0)
        waves = np.ceil(tiles * splits / sms)
        walk = np.ceil(k / splits)
        # each wave of tiles also pays ``tile_s`` beside its MMAs: the pipeline's fill (the
        # first K stages loaded at the memory latency) and the epilogue's fixed part (fitted
        # 0.3-1.6 us; about 0 on H100 bf16, whose persistent kernels overlap a tile's start
        # with the previous)
        # tiles resident on an SM at once (``RESIDENT_TILES_BY_DTYPE``): the busiest SM runs
        # ``waves`` tiles, ``resident`` at a time, and a group of j tiles reaches
        # min(1, j x rate) of the SM's tensor rate (a small tile alone leaves the tensor cores
        # idle while it waits on its loads; two fill them). The measured A100 weight-only rows
        # at m = 8 to 64 and k >= 16384 with 7168 to 16384 columns (56-128 column tiles, split
        # in two below 108: two tiles on some of the 108 SMs) took 1.2-1.6x one tile's time,
        # not 2x (fitted w4a16 error +30 to +86% as two waves; median/p90 8.1/24.9% ->
        # 7.6/25.3%, w8a16 7.1/24.3 -> 6.5/23.3%; the GEMV's blocks at m <= 4 count the same:
        # with one at a time, 7.7% and 6.4%)
        resident = np.maximum(np.minimum(waves, RESIDENT_TILES_BY_DTYPE.get(batch.dtype, 1.0)), 1.0)
        full, rest = np.floor(waves / resident), np.mod(waves, resident)
        slots = full * resident / np.minimum(1.0, resident * rate) + rest / np.minimum(
            1.0, rest * rate + (rest == 0)
        )
        cand = slots * 2.0 * tm * tn * walk / per_sm + waves * prm["tile_s"]
        if batch.dtype in ("fp8_block",):
            # block scaling: after each 128-deep K block a tile multiplies its partial product
            # by the two scales and adds it to its fp32 accumulator on the CUDA cores (the
            # tensor cores' fp8 accumulation is not kept across blocks): ``promote_cycles`` per
            # output element and block on one SM, beside the MMAs of the next block
            cand = cand + waves * tm * tn * np.ceil(walk / SCALE_BLOCK_K) * (
                prm["promote_cycles"] / fig.clock_hz
            )
        if batch.dtype in ("w4a16", "w8a16"):
            # weight-only: every tile converts the weights of its columns to bf16 on the CUDA
            # cores as it walks K (``dequant_s`` per element on one SM), once per row tile
            cand = cand + waves * tn * walk * prm["dequant_s"]
        # split-K's reduction: every split writes its fp32 partial tile and the reduction
        # reads them all back (SPLIT_K_PARTIAL_BYTES a padded output element and split) at the
        # HBM rate of the class, after the splits' mainloops; the tile and split count are
        # chosen with it (a library weighs the reduction against the idle SMs a split fills).
        # Without it the model split K wherever SMs were idle and predicted the measured bf16
        # rows at m = 64 to 512, n = 512 to 2048 and k = 2560 to 6144 too fast on both
        # devices (signed median A100 -18%, H100 -26%; with it -8% and -19%); fitted bf16
        # median / p90 error A100 8.3/22.3% -> 6.8/20.5%, H100 6.1/22.7% -> 5.9/20.9%;
        # leave-one-device-out 9.3% -> 8.0% and 9.7% -> 8.9%. Booked as memory time (HBM
        # traffic, combined with the mainloops by the class's overlap), not compute: H100 bf16
        # 5.9% -> 5.2%, fp8 3.7% -> 3.5%; from A100 9.3% -> 8.3%, from H100 8.0% -> 8.5%
        partials = np.where(splits > 1, splits * tiles * tm * tn * SPLIT_K_PARTIAL_BYTES, 0.0)
        partial_s = np.broadcast_to(
            partials / (prm["eff_memory"] * fig.hbm_bytes_per_s), cand.shape
        )
        resident_b = np.where(warm, resident_share * np.minimum(weight, nbytes), 0.0)
        # the output tiles' epilogue: a tile writes its output after its mainloop, so the
        # write is not hidden behind that tile's MMAs; the share ``epilogue_share`` of it is
        # not hidden behind other tiles' mainloops either and adds to the time (the measured
        # rows with large m and k of 64 to 1024, near the ridge: 15-35% slower than the
        # compute and memory times combined, on both devices)
        out = groups * rows * n * _col(batch, "out_elem", 2.0)
        out = np.minimum(out, np.maximum(nbytes - resident_b, 0.0))
        # the library's profiler runs the fastest kernel: the tile and split whose whole time
        # (compute, memory at the bandwidth its units draw, the partial sums, the epilogue) is
        # least, not the least compute (which chose, on H100, tiles too few to draw the
        # bandwidth: a GEMM predicted slower at m = 64 than at m = 80)
        units_all = np.broadcast_to(tiles * splits, cand.shape)
        memory_all, extra_all = streams(units_all, nbytes, out, resident_b)
        # the reduction's own kernels where a chosen split count splits (SPLIT_K_CHOICES)
        reduce = np.broadcast_to(
            np.where(choose_split & (splits > 1), SPLIT_K_REDUCE_NODES * prm["fixed_s"], 0.0),
            cand.shape,
        )
        total = _combine(cand, memory_all + partial_s, prm["overlap"]) + extra_all + reduce
        return {
            "reduce": reduce,
            "compute": cand,
            "units": units_all,
            "partial": partial_s,
            "total": total,
            "out": out,
            "resident": resident_b,
        }

    at = candidates_at(m, batch.bytes)
    best = np.argmin(at["total"], axis=0)
    if batch.dtype in PROFILED_POW2_M:
        # TensorRT-LLM's plugin profiler times the candidates at power-of-two row counts and a
        # call runs the kernel chosen for the next power of two at or above its rows
        profiled = np.exp2(np.ceil(np.log2(np.maximum(m, 1.0))))
        row_bytes = k * (1.0 if batch.dtype == "int8" else 2.0) + n * _col(batch, "out_elem", 2.0)
        moved = batch.bytes + groups * (profiled - m) * row_bytes
        best = np.argmin(candidates_at(profiled, moved)["total"], axis=0)
    cols = np.arange(len(batch))
    compute = at["compute"][best, cols]
    units = at["units"][best, cols]
    partial = at["partial"][best, cols]
    out = at["out"]
    resident = at["resident"]
    reduce_s = at["reduce"][best, cols]
    cuda_gemv_rows = CUDA_CORE_GEMV_MAX_M.get(batch.dtype, 0)
    if cuda_gemv_rows:
        # the CUDA-core GEMV (CUDA_CORE_GEMV_MAX_M) where the tiled kernel's padded tensor-core
        # work outlasts its reads of the operands: (m + 1) instructions per weight element on
        # GEMV_LANES_PER_CLOCK lanes of every SM, its blocks on all SMs. The tiled kernel's
        # work is that of its most split candidate (the least compute; the split count run
        # weighs its reduce kernel too, and an unsplit walk would call for the GEMV on H100,
        # whose m = 1 rows take the m = 2 time: fitted m = 1, n, k <= 2048, signed -19%)
        least = np.argmin(at["compute"], axis=0)
        share = _memory_share(at["units"][least, cols], fig, prm)
        stream = batch.bytes / (prm["eff_memory"] * fig.hbm_bytes_per_s * share)
        tiled = at["compute"][least, cols]
        gemv = (m <= cuda_gemv_rows) & (groups <= 1) & (tiled > stream)
        lanes = GEMV_LANES_PER_CLOCK * fig.clock_hz * sms
        compute = np.where(gemv, (m + 1.0) * n * k / lanes, compute)
        units = np.where(gemv, float(sms), units)
        partial = np.where(gemv, 0.0, partial)
        reduce_s = np.where(gemv, 0.0, reduce_s)
    if fig.kind == "cpu":
        # a CPU has no output tiles to quantize: its cores share the whole product
        compute = batch.flops / (prm["eff_compute"] * fig.peak(batch.dtype))
        units = np.full(len(batch), np.inf)
        partial = reduce_s = np.zeros(len(batch))
    memory, extra = streams(units, batch.bytes, out, resident)
    extra = extra + reduce_s
    # the split-K partial sums are HBM traffic: memory time, not compute
    memory = memory + partial
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
    # the band's two edge blocks are masked (the window's lower edge and the diagonal cut
    # through them) and take the kernel's masking path, every block of a 128-key window;
    # the blocks between them are whole (a causal tile masks only its diagonal block, which
    # the per-unit work covers). Counting every block of an 8192-key band as masked put the
    # measured H100 rows with window 8192 at isl > 8192 60-280% too slow
    masked = np.where(banded, np.minimum(band_blocks, 2.0), 0.0)
    # one exponential per computed score (query, key pair), on the SFUs, not the tensor cores:
    # ``SFU_EXP_PER_CLOCK`` a clock per SM at ``eff_exp`` of that rate (1: the datasheet rate),
    # combined with the tensor time by the p-norm ``sfu_overlap`` (FlashAttention-3 overlaps
    # the two in part; the H100 bf16 rows fit 1.6, near a sum). With fp8
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
    # default ``sfu_overlap``
    # an fp8 kernel transposes each 128-key V block in shared memory before its MMA (the fp8
    # tensor-core MMA takes its B operand K-major only; FlashAttention-3, section 3.3): the
    # block's bytes read and written once through the SM's shared memory, part of the unit's
    # serial work. It is a quarter of an fp8 block's MMA time at full rate whatever the head
    # dim; with the conversion of the probabilities below it brings an fp8 class borrowed
    # from a bf16 fit (a device without fp8) close to the measured fp8 rows
    fp8 = batch.dtype.startswith("fp8")
    transpose = 0.0
    if fp8:
        transpose = unit_blocks * 2.0 * 128.0 * d_v / (SMEM_BYTES_PER_CLOCK * fig.clock_hz)
    flops = batch.flops * padded
    if fp8:
        # the fp8 kernels are built for power-of-two head sizes: a head dim of 192 runs padded
        # to 256 (the measured H100 fp8 rows at isl 16384 take 1.13 ps per score and head at
        # 192 as at 256; the bf16 kernel has a 192 of its own, 0.81 of its 256 time)
        pad_qk = 2.0 ** np.ceil(np.log2(np.maximum(d_qk, 1.0)))
        pad_v = np.where(d_v > 0, 2.0 ** np.ceil(np.log2(np.maximum(d_v, 1.0))), 0.0)
        flops = flops * (pad_qk + pad_v) / np.maximum(d_qk + d_v, 1.0)
    # the tensor-core operands the MMAs read from shared memory: every K and V block a tile
    # walks, once per group of query rows one MMA instruction covers (``_mma_rows``: a
    # Hopper warp-group MMA takes 64 rows, an Ampere/Ada mma.sync warp 16), at the SM's
    # shared-memory bandwidth; a 128-query tile reads each block 2 times on Hopper, 8 on
    # Ampere: as long as the A100 tile's MMAs at full rate, half the H100 tile's. It is why
    # the FlashAttention kernels reach 0.48 of the bf16 rate on A100 and 0.57 on H100 (head
    # dim 128, isl 16384) with the same ``eff_compute`` (0.94 fitted on either device);
    # leave-one-device-out H100 -> A100 context attention 15.8% -> 7%, MLA 13.7% -> 8%
    # (the rows of a short prompt's tile and the keys of its blocks, not whole 128 x 128 tiles)
    reads = np.ceil(np.minimum(q, 128.0) / _mma_rows(fig))
    keys = unit_blocks * np.minimum(kv_eff, 128.0)
    operand = (
        keys
        * reads
        * (d_qk + d_v)
        * _elem_bytes(batch.dtype)
        / (SMEM_BYTES_PER_CLOCK * fig.clock_hz)
    )
    # an fp8 kernel converts each score's probability to fp8 and permutes it into the fp8
    # MMA's register layout before the value product (FlashAttention-3, section 3.3): one
    # instruction per two scores at the conversion rate, on the path between the softmax and
    # the product, not hidden behind the MMAs. The measured H100 rows at isl 16384 spend
    # 0.041 SM cycles a score beside the MMAs in bf16 and 0.067-0.081 in fp8 (a fit of time
    # per score against head dim 64-256); this is the 1/32 of a cycle between them
    pre_bytes = _col(batch, "preprocess_bytes", 0)
    # a unit's wait is shared by the tiles resident on an SM together (``_resident_waves``)
    resident = _resident_waves(units, fig, d_qk, d_v, _elem_bytes(batch.dtype))
    convert = 0.0
    if fp8:
        convert = scores * 0.5 / (CONVERT_PER_CLOCK * fig.sm_count * fig.clock_hz)
    out = _attention_time(
        batch,
        fig,
        prm,
        units=units,
        unit_blocks=unit_blocks,
        unit_cost=np.ones(len(batch)),
        masked=masked,
        flops=flops,
        nbytes=batch.bytes - pre_bytes,
        sfu=sfu,
        latency=prm["unit_latency_s"] * resident + transpose + operand,
        call=prm["call_latency_s"],
    )
    occupancy = np.maximum(units / (np.ceil(units / fig.sm_count) * fig.sm_count), 1e-9)
    out["compute_s"] = out["compute_s"] + convert / occupancy
    # the RoPE + cache-write pre-kernel the measured rows time before the attention kernel
    # (TensorRT-LLM's QKV preprocessing): a kernel of its own, its launch and wait
    # (``pre_latency_s``, seconds as the call's) and one streaming pass over its bytes
    # (``preprocess_bytes``: the fused QKV read, Q written, the new K/V rows appended; MLA's
    # fp8 quantization of q, k and v) after the attention kernel's own time. ``rope_kernel``
    # 0: the caller times RoPE and the append as a kernel of its own, as a model step does (the
    # measured rows include it, the default); a kernel without a value product (an indexer's
    # logits) has none
    pre = (_col(batch, "rope_kernel", 1) > 0) & (d_v > 0)
    stream = pre_bytes / (prm["eff_memory"] * fig.hbm_bytes_per_s)
    out["extra_s"] = out["extra_s"] + np.where(pre, prm["pre_latency_s"] + stream, 0.0)
    return out


def _resident_waves(
    units: np.ndarray, fig: DeviceFigures, d_qk: np.ndarray, d_v: np.ndarray, elem: float
) -> np.ndarray:
    """Waves of a prefill's units with as many tiles resident on an SM as its shared memory
    holds, per wave of one tile an SM. Hopper's warp-specialized kernels (compute capability
    9 and later; FlashAttention-3) are persistent, one tile an SM; an Ampere/Ada kernel
    (FlashAttention-2: a 128-query tile and one 64-key K and V stage) fits
    ``smem // ((128 d_qk + 64 (d_qk + d_v)) x element bytes)`` tiles on an SM: two at head
    dim 128 on A100 (64 of 164 KB), one for MLA's 192/128 (88 KB). The measured A100 rows at
    isl 16 step every 216 units (2 x 108 SMs), the H100 rows every 132."""
    if fig.tensor_core_generation != "sm80":
        return np.ones(len(units))
    one = np.maximum(np.ceil(units / fig.sm_count), 1.0)
    smem = _smem_per_sm(fig)
    tile = (128.0 * d_qk + 64.0 * (d_qk + d_v)) * elem
    resident = np.maximum(np.floor(smem / np.maximum(tile, 1.0)), 1.0)
    return np.ceil(units / (fig.sm_count * resident)) / one


#: Shared memory an SM offers its blocks, bytes, by compute capability (CUDA C Programming
#: Guide, technical specifications per compute capability: 164 KB on 8.0 and 8.7, 100 KB on
#: 8.6, 8.9 and 12.0, 228 KB on 9.0 and 10.0)
_SMEM_PER_SM = {
    8.0: 164.0 * 1024,
    8.6: 100.0 * 1024,
    8.7: 164.0 * 1024,
    8.9: 100.0 * 1024,
    9.0: 228.0 * 1024,
    10.0: 228.0 * 1024,
    12.0: 100.0 * 1024,
}


def _smem_per_sm(fig: DeviceFigures) -> float:
    """Shared memory of one SM (:data:`_SMEM_PER_SM`); a capability the table lacks takes
    Hopper's 228 KB from 9.0 on, else the smallest figure (also any device without one)."""
    cc = fig.compute_capability
    return _SMEM_PER_SM.get(cc, 228.0 * 1024 if cc >= 9.0 else min(_SMEM_PER_SM.values()))


def _mma_rows(fig: DeviceFigures) -> float:
    """Query rows one tensor-core MMA instruction covers, sharing the K/V operand it reads from
    shared memory: 64 for the warp-group MMA of compute capability 9 and later (``wgmma``,
    m64nNk16; PTX ISA), 16 for the per-warp ``mma.sync`` (m16n8k16) of NVIDIA devices before
    (Ampere, Ada; :attr:`~mlacalc.timemodel.device.DeviceFigures.tensor_core_generation`
    ``"sm80"``). Other devices (not NVIDIA, or without a capability) take 64."""
    return 16.0 if fig.tensor_core_generation == "sm80" else 64.0


#: Conversion instructions (FP32 to a narrower type) one SM issues per clock (16 on Ampere and
#: Hopper; CUDA C Programming Guide, arithmetic instruction throughput table)
CONVERT_PER_CLOCK = 16.0


#: Exponentials one SM's special-function units issue per clock (MUFU.EX2: 16 a clock per SM
#: on Ampere and Hopper; CUDA C Programming Guide, arithmetic instruction throughput table)
SFU_EXP_PER_CLOCK = 16.0

#: Bytes one SM's shared memory reads or writes a clock (32 banks of 4 bytes; Ampere and Hopper
#: tuning guides)
SMEM_BYTES_PER_CLOCK = 128.0


def _decode_splits(
    batch: KernelBatch,
    heads_units: np.ndarray,
    keys: np.ndarray,
    slots: float,
    part_keys: float = 256.0,
) -> np.ndarray:
    """Key splits of a decode unit (flash-decoding): where the kernel can split
    (``kv_split``) and its units leave some of the ``slots`` resident units idle, a unit's
    ``keys`` split into parts of at least ``part_keys`` (:data:`DECODE_SPLIT_KEYS`,
    :data:`MLA_SPLIT_KEYS`), as many as fill them."""
    can_split = (_col(batch, "kv_split", 1) > 0) & (heads_units < slots)
    return np.where(
        can_split,
        np.clip(np.floor(slots / heads_units), 1.0, np.maximum(1.0, np.ceil(keys / part_keys))),
        1.0,
    )


#: Decode kernels (TRT-LLM XQA and MMHA multi-block mode) split a unit's keys across SMs up to
#: this many resident units per SM, every split at least :data:`DECODE_SPLIT_KEYS` keys. Four
#: units a SM fit the measured H100/A100 rows better than one (fitted p90 31% against 35%, the
#: leave-one-device-out medians 9-10% against 12%); MLA decode splits up to one unit a SM
#: (:func:`_decode_splits`).
DECODE_SPLIT_UNITS_PER_SM = 4.0
DECODE_SPLIT_KEYS = 256.0
#: FlashMLA splits a unit's keys into parts of two 64-token blocks and more: parts of 256
#: keys put the measured H100 MLA rows at batch <= 8 and 256-2048 cached keys 25-45% too slow
#: (fitted H100 bf16 p90 25.7% -> 20.9%; fitted on A100, predicting H100 bf16 12.5% -> 10.5%;
#: parts of one block: 5.6%, p90 20.2%, against 5.2%, 20.9%)
MLA_SPLIT_KEYS = 128.0


#: Bytes a grouped decode unit holds on its SM per query row and head-dim element beside its
#: K/V stage: two FP32 copies of its output tile (the running accumulator and the rescaled
#: partial result it exchanges through shared memory). An assumed figure: 0, 1, 2, 4 and 8
#: bytes put the fitted H100 fp8 rows at 8.0, 8.0, 8.0, 7.9 and 7.8% (bf16 7.9, 7.8, 7.9,
#: 7.9, 8.0%)
DECODE_ROW_BYTES = 8.0


def _decode_unit_bytes(batch: KernelBatch, hd: np.ndarray, qrows: np.ndarray) -> np.ndarray:
    """Bytes a grouped decode unit holds on its SM: one 64-token K and V stage of the cache
    (its element size: 1 for an fp8 cache, else 2) and :data:`DECODE_ROW_BYTES` per query row
    and head-dim element."""
    elem = 1.0 if batch.dtype.startswith("fp8") else 2.0
    return 64.0 * hd * 2.0 * elem + DECODE_ROW_BYTES * qrows * hd


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
    # (Hopper's fp8-cache XQA kernel, ``sm90``: an fp8 cache on compute capability 9.0 and
    # later, splits the keys of the window; MMHA and the other XQA kernels the whole cache,
    # their splits before the window finding no keys: the measured H100 bf16 rows with a
    # 128-token window grow with the cache length up to 3x, the fp8 grouped ones stay flat)
    sm90 = batch.dtype.startswith("fp8") & grouped & fig.sm90_or_later  # CC >= 9.0 (Hopper on)
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
    # carries adds ``qhead_unit`` per 128 of head dim; Hopper's warp-group MMA computes its
    # query heads in whole multiples of 8 (its N dimension), padded ones included (fitted H100
    # fp8 8.4% -> 8.3%; padding the mma.sync kernel's 16-row tiles too put the H100 -> A100
    # leave-one-device-out at 9.0% against 8.3%)
    qrows = np.where(sm90, np.ceil(rows / 8.0) * 8.0, rows)
    unit_cost = np.where(grouped, prm["grouped_unit"], 1.0) + prm["qhead_unit"] * qrows * hd / 128
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
    # path), and the reduction of the key splits (a kernel of its own but in Hopper's fp8 XQA)
    # (``rope_kernel`` 0: the caller times RoPE and the append as a kernel of its own, as a
    # model step does; the measured rows include it, the default)
    fused = sm90 & (_col(batch, "sinks", 0) <= 0)
    pre = (~fused) & (_col(batch, "rope_kernel", 1) > 0)
    kernels = pre.astype(np.float64) + ((splits > 1) & ~sm90)
    out["extra_s"] = out["extra_s"] + prm["launch_s"] * kernels
    # Hopper's fp8 XQA kernel merges a unit's key splits itself, no reduction kernel (the
    # measured H100 fp8 GQA rows at batch 1 grow 7.6 -> 8.1 us from 256 to 512 cached keys,
    # where the keys first split; the bf16 rows 11 -> 15 us): the last part of a unit to
    # finish reads every part's partial result in turn, on one SM after the walk
    # (``merge_s`` per part and 128 of head dim; the fp8 rows at batch 1 and 8-128k keys take
    # 3-10 us more than the stream of their cache). Fitted H100 fp8 8.7% -> 8.4%, p90 25.3%
    # -> 24.5%
    merged = np.where(sm90 & (splits > 1), splits * hd / 128.0, 0.0)
    out["extra_s"] = out["extra_s"] + prm["merge_s"] * merged
    # resident units: a grouped (XQA) unit holds one 64-token K and V stage of the cache
    # (64 x head dim x 2 x element bytes) and its query rows' partial output on the SM
    # (DECODE_ROW_BYTES per query row and head-dim element), so the shared memory of an SM
    # (228 KB on compute capability 9.0, 164 KB on 8.0) holds a few of them; a unit beyond
    # them (every part, holding keys or not, takes a slot) waits for one, and every further
    # wave of resident units pays a unit's latency, ``wave_s`` per 8 query rows and 1024 of
    # head dim (its row tiles' work). The measured
    # H100 fp8 GQA rows at <= 63 cached keys stay near flat up to the units the SMs hold and
    # step 2.2-2.7x at the next doubling: at head dim 256 between 512 and 1,024 units (8 and 16
    # query heads a KV head, 12.7 -> 29 us and 24 -> 65 us), at 128 between 1,024 and 2,048
    # (fitted H100 fp8 8.3% -> 7.8%, p90 24.2% -> 22.4%; fitted on A100, predicting H100 fp8
    # p90 45.6% -> 39.2%; counting only the parts holding keys: bf16 8.0% against 7.9%)
    resident = np.maximum(np.floor(_smem_per_sm(fig) / _decode_unit_bytes(batch, hd, qrows)), 1.0)
    waves = np.ceil(units / (sms * resident))
    out["compute_s"] = out["compute_s"] + np.where(
        grouped, prm["wave_s"] * qrows * hd / 1024.0 * np.maximum(waves - 1.0, 0.0), 0.0
    )
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
    splits = _decode_splits(batch, heads_units, kv_eff, fig.sm_count, MLA_SPLIT_KEYS)
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
    # besides the operand reads, each key costs the shared memory its latent row's fill (the
    # copy from the cache, in the cache's bytes) and the 64-row query tile's re-read per
    # 64-key block (the tile, 64 x 576, does not stay in registers beside the 64 x 512 fp32
    # output accumulator: ``d_qk`` query bytes a key): leave-one-device-out H100 -> A100
    # 18.6% -> 13.0%, the fitted H100 rows 5.8% -> 6.2% (bf16)
    d_qk = _col(batch, "head_dim_qk", 576)
    wgmma = _col(batch, "operand_reads", 1) <= 1.0
    q_bytes = 1.0 if batch.dtype.startswith("fp8") else 2.0
    fill_bytes = d_qk * (_col(batch, "kv_bytes", 2) + q_bytes)
    smem = (
        unit_blocks
        * 64.0
        * (row_bytes * _col(batch, "operand_reads", 1) + fill_bytes)
        / (SMEM_BYTES_PER_CLOCK * fig.clock_hz)
    )
    # the RoPE + latent-append pre-kernel (``mla_rope_generation``) and, with an fp8 cache, the
    # quantization of q to fp8 in a pass of its own are kernels of the call before the
    # attention: ``launch_s`` each and their bytes (``preprocess_bytes``) streamed at the
    # class's bandwidth, not hidden behind the attention's work. ``rope_kernel`` 0: the caller
    # times RoPE and the append as kernels of its own, as a model step does (the measured
    # rows include them, the default). Fitted H100 bf16 6.6% -> 5.8%, fp8 7.5% -> 6.7%, A100
    # 7.5% -> 6.8% against the bytes hidden in the attention's stream
    pre_bytes = _col(batch, "preprocess_bytes", 0)
    rope = _col(batch, "rope_kernel", 1) > 0
    pre_kernels = 1.0 + float(batch.dtype.startswith("fp8"))
    pre = np.where(
        rope,
        prm["launch_s"] * pre_kernels + pre_bytes / (prm["eff_memory"] * fig.hbm_bytes_per_s),
        0.0,
    )
    # a key-splitting kernel (FlashMLA) merges the splits' partial results in a combine
    # kernel of its own: one more launch where the keys split (fitted H100 bf16 6.2% -> 6.0%,
    # leave-one-device-out H100 -> A100 13.0% -> 12.4%), and every part writes the fp32
    # partial output of its real query rows (at most its 64-row tile: 128 KB at d_v 512),
    # which the combine kernel reads back: at small batch the parts fill the SMs and move
    # megabytes (fitted H100 bf16 6.0% -> 5.2%, fp8 6.4% -> 4.9%, the module 6.8% -> 5.2%;
    # fitted on A100, predicting H100 bf16 15.8% -> 12.5%). Counting whole 64-row tiles for
    # units of 1-16 heads made MLA decode faster from batch 64 to 128 (keys stop splitting)
    # where the measured H100 rows get slower (17 such pairs)
    rows = np.minimum(heads * q / tiles, 64.0)
    partial = np.where(splits > 1, units * rows * _col(batch, "head_dim_v", 512) * 4.0, 0.0)
    combine = prm["launch_s"] + partial / (prm["eff_memory"] * fig.hbm_bytes_per_s)
    pre = pre + np.where(splits > 1, combine, 0.0)
    # the units one SM works through in turn: a splitting kernel's SMs take the short units as
    # they free up; the non-splitting kernel's units each walk a whole cache, in whole waves
    # over the SMs (A100 fitted 8.6% -> 7.5%, p90 22% -> 20%)
    serial = np.where(
        splits_allowed, np.maximum(units / fig.sm_count, 1.0), np.ceil(units / fig.sm_count)
    )
    out = _attention_time(
        batch,
        fig,
        prm,
        units=units,
        unit_blocks=unit_blocks,
        unit_cost=np.full(len(batch), prm["grouped_unit"]),
        masked=np.zeros(len(batch)),
        serial=serial,
        flops=batch.flops * np.where(splits_allowed, 1.0, padded),
        nbytes=np.maximum(batch.bytes - pre_bytes, 0.0) + partial,
        latency=np.where(wgmma, smem / np.maximum(unit_blocks, 1.0), smem) + prm["unit_latency_s"],
        call=prm["call_latency_s"],
    )
    # a warp-group MMA takes its operands from shared memory as it multiplies, and the copy
    # engine fills the next blocks beside it: there the shared-memory traffic bounds the
    # products' pace rather than adding to it, but for a unit's first block, which must land
    # before its first product (the latency above). Added whole, the H100 bf16 rows at 128
    # heads, 4K+ keys and batch 64+ (compute-bound at 0.67 of the bf16 peak) were predicted
    # 40% slow (fp8: 5%), 1.65x the 64-head time where they take 1.13x; bounding: 3.7%. Fitted
    # on H100 (with the module rows): bf16 5.7% -> 5.3% (p90 17.2% -> 14.7%), fp8 5.8% ->
    # 5.7%, the module 6.3% -> 6.1%; A100 (``mma.sync``, four reads) keeps the sum, and
    # predicted from its fit the H100 rows read 15.1% -> 17.5% (bf16), 8.5% -> 12.2% (fp8),
    # the module 6.4% -> 8.3%: an A100 fit has no Hopper overlap to learn from
    out["compute_s"] = np.where(
        wgmma, np.maximum(out["compute_s"], serial * smem), out["compute_s"]
    )
    out["extra_s"] = out["extra_s"] + pre
    # the two kernels overlap their loads with their products differently: FlashMLA's
    # producer warps load the next blocks while its consumers multiply (``overlap``, fitted on
    # the H100 rows: p ~ 2-3); the non-splitting kernel barely does (``walk_overlap``, on the
    # A100 rows p ~ 1.3). Its own p keeps either kernel's fit from setting the other's
    # (leave-one-device-out H100 -> A100 12.4% -> 11.4%, A100 -> H100 bf16 18.8% -> 15.8%,
    # fp8 11.8% -> 9.3%, the module 9.5% -> 7.6%)
    walk = ~splits_allowed
    both = _combine(out["compute_s"], out["memory_s"], prm["walk_overlap"])
    out["compute_s"] = np.where(walk, both, out["compute_s"])
    out["memory_s"] = np.where(walk, 0.0, out["memory_s"])
    return out


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


def triton_moe_row_tile(tokens: np.ndarray, topk: np.ndarray, experts: np.ndarray) -> np.ndarray:
    """The row tile the Triton MoE kernel (GPT-OSS's MXFP4 experts) fixes from the call, not
    from the rows an expert gets: as if every (token, top-k) pair were spread over the rank's
    ``experts`` (block_m = the next power of 2 of ``tokens x topk / experts``, kept in
    16..128: the rule of triton_kernels' opt_flags as recalled, no copy of its source in the
    shared reference). The measured H100 rows step up where that ratio passes 16 and 64, at
    the same ratio for every expert count and EP size (E = 128, ep = 128: 79 -> 94 us at 8
    tokens, 96 -> 136 us at 32; ep = 4: 252 -> 317 us at 160 tokens, 327 -> 612 us at 768);
    with it the fitted median / p90 error went 10.2% / 26.1% -> 5.1% / 13.1%."""
    per_expert = np.maximum(np.floor(tokens * topk / np.maximum(experts, 1.0)), 1.0)
    return np.clip(2.0 ** np.ceil(np.log2(per_expert)), 16.0, 128.0)


#: The most experts a token the fused MoE routing kernel selects; more take a generic top-k
#: (:func:`_moe`, ``select_s``). TensorRT-LLM's fused routing kernels keep at most 8 experts a
#: token as recalled (no copy of their source in the shared reference); the measured H100
#: rows agree: top-1 to top-8 share one fixed cost, top-10 and top-22 pay more
FUSED_TOPK_MAX = 8


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
    # a kernel whose row tile is fixed by the call (``row_tile``, set by the mapping) takes
    # only the tiles of that many rows
    # (a model step's MXFP4 experts run the Triton kernel the measured rows time, by the same
    # rule, :func:`triton_moe_row_tile`)
    if "row_tile" in batch.shape or batch.dtype != "w4a16_mxfp4":
        row_tile = _col(batch, "row_tile", 0)
    else:
        row_tile = triton_moe_row_tile(
            _col(batch, "tokens", 1), _col(batch, "topk", 1), _col(batch, "experts", 1)
        )
    candidates = np.where((row_tile > 0) & (row_tile != _MOE_TM), np.inf, candidates)
    if batch.dtype == "fp8_block":
        # block scaling, as in the GEMM: after each 128-deep K block a tile rescales its
        # partial product into its fp32 accumulator on the CUDA cores, ``promote_cycles`` per
        # output element and block. Not fitted: the physical default (one FMA on the 128
        # lanes of an SM; the block-scaled GEMM fit gives 0.0081 against 1/128 = 0.0078).
        # Fitted on H100 the MoE class then reaches 0.94 of the fp8 rate, not 0.77 (errors
        # unchanged), and predicted from an A100 fit (no fp8: the bf16 class) its median
        # error is 11.8% / signed -8.2%, against 12.7% / -9.4% without the term
        candidates = candidates + waves * _MOE_TM * _MOE_TN * np.ceil(k / SCALE_BLOCK_K) * (
            prm["promote_cycles"] / fig.clock_hz
        )
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
    # routing each token to more than ``FUSED_TOPK_MAX`` experts leaves the fused top-k
    # kernel for a generic top-k whose ``topk`` selection rounds each end in a reduction over
    # the token's logits: ``select_s`` a round, once a call (its tokens run side by side, so
    # not per token). The measured H100 rows of top-10 and top-22 (E = 512; hidden 2048 and
    # 8192, ``_nongated``) took one fixed cost more than every other call: at one token their
    # floors are 33, 41 and 57 us against 20-36 us for top-1 to top-8 over 8-384 experts of
    # the same hidden sizes (E = 384 against 256 at top-8 costs nothing more, so the number of
    # logits is not it), and without the term the fit left them 3-30% too fast there. Fitted
    # per class on H100 a round takes 0.55-0.86 us (fp8_block, fp8, bf16); fitted median /
    # p90 bf16 6.4/27.4% -> 5.6/25.5%, fp8 7.3/26.3% -> 6.5/23.1%. The A100 table has no
    # top-k above 8, so an A100 fit has no ``select_s`` and its class keeps the default 0
    topk = _col(batch, "topk", 1)
    extra = extra + prm["select_s"] * np.where(topk > FUSED_TOPK_MAX, topk, 0.0)
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


#: Bytes a peer up to which NCCL sends point-to-point (all-to-all) data with its LL protocol
#: (flagged stores), and in bulk above: NCCL's documented NCCL_P2P_LL_THRESHOLD default, 16384.
P2P_FLAGGED_BYTES = 16384.0


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
    elif kind == "all_to_all":
        # NCCL's all-to-all is n - 1 point-to-point sends and receives, whose protocol is not
        # tuned per call: LL up to NCCL_P2P_LL_THRESHOLD bytes a peer, bulk (Simple) above
        # (:data:`P2P_FLAGGED_BYTES`; the measured H100 calls jump 3 us where a peer's share
        # passes 16 KB: at 2^15, 2^16, 2^17 elements at 2, 4, 8 GPUs). The sends run at once in
        # one grouped kernel: a bulk exchange synchronises once, whatever n (the measured H100
        # bulk calls of 64 KB-1 MB a rank take 13-17 us at 2, 4 and 8 GPUs alike), and
        # the rank's send to itself is one of them, beside the others, not after them
        steps, volume = n - 1, (n - 1) / n * msg
        flagged = steps * lat + 2.0 * volume / (link * issue)
        bulk = lat + proto + volume / link
        comm = np.maximum(np.where(msg / n <= P2P_FLAGGED_BYTES, flagged, bulk), own)
    elif kind in ("all_gather", "reduce_scatter"):
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
