"""The streaming classes of the time model: ``elementwise`` and ``quantize`` kernels (and any
kind without a class of its own).

Terms: the bytes at ``eff_memory`` of the HBM bandwidth, drawn by one work unit per 64 KB, or
per row where the kernel gives each row a CTA (``units``; a small kernel leaves SMs idle:
``sm_bandwidth``); a warm replay's quantize input read from the
L2 at ``l2_speedup``; the FLOPs at the CUDA-core rate; the fixed cost of each further graph
node of the call (``launches``). The linear-attention kernels of :data:`SM_BOUND_VARIANTS` draw
bytes at a rate per SM and clock, capped by the HBM; a chunked kernel's units walk their chunks
one after another (``chunks``, ``seq_heads``), ``unit_latency_s`` a chunk.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from mlacalc.timemodel.device import DeviceFigures
from mlacalc.timemodel.shared import REFERENCE_CLOCK_HZ, col, combine, memory_share
from mlacalc.words.kernels import KernelBatch

__all__ = [
    "CONV_CTA_CHANNELS",
    "FUSED_WALK_NORM",
    "SM_BOUND_VARIANTS",
    "SM_BYTES_PER_CLOCK",
    "TOPK_VARIANTS",
    "engine_linear_kernel",
    "per_sequence_conv",
    "streaming_terms",
]

#: Channels one CTA of TensorRT-LLM's Mamba-2 prompt conv1d kernel takes (it runs in waves of
#: such CTAs, a sequence's after another: ``units``), inferred from its rows, not from its
#: source: its one-token rows step by about 5.3 us (H100) for every wave of 32-channel CTAs a
#: sequence adds over the SMs (6,144 / 10,240 / 18,432 channels: 10.3 / 15.0 / 26.4 us for one
#: sequence, 2 / 3 / 5 waves; 17.1 / 26.2 / 49.4 us for two, 3 / 5 / 9 waves).
CONV_CTA_CHANNELS = 32

#: The top-k selections of the sparse-attention indexers (SGLang's ``fast_topk_transform_fused``
#: per score mode, DeepSeek-V4's ``topk_transform_v1`` / ``_v2``): one CTA walks a row's logits.
TOPK_VARIANTS = tuple(f"topk_{v}{m}" for v in ("", "v1_", "v2_") for m in ("flat", "top_last"))

#: Streaming kernels whose bandwidth follows the SMs, not the HBM: the causal conv1d kernels
#: and flash-linear-attention's (and FlashInfer's) chunked gated delta rule keep a fixed number
#: of loads in flight per SM (their tiles and warps are fixed in their source), so by Little's
#: law they move bytes at a rate per SM and clock. On the published tables their largest calls
#: take 0.80-0.82x (conv1d) and 0.62-0.79x (chunked rule) of H100's time on B200, where the SMs
#: x clock give 0.88x and the HBM 0.44x; B200's fits reached 0.38-0.50 of its HBM where H100's
#: reached 0.69-0.86 of its own. The recurrent decode kernel is not one of them: it streams
#: its fp32 state at HBM rate on both (0.50-0.72x). The sparse-attention top-k selections
#: (:data:`TOPK_VARIANTS`: one CTA walks a row's logits) too: SGLang's GLM-5 and DeepSeek-V4
#: top-k rows take the same time on B200 as on H100 up to 512 rows (0.96-0.99x) and 0.78-0.83x
#: beyond (0.69x over 16K keys: a long row's one CTA draws more on B200), where the HBM would
#: give 0.44x.
SM_BOUND_VARIANTS = (
    "conv1d",
    "conv1d_update",
    "gdn_chunk",
    "mamba2_conv1d",
    "mamba2_conv1d_update",
    *TOPK_VARIANTS,
)

#: The p of the p-norm by which a fused chunked linear-attention kernel (``fused``: FlashInfer's
#: chunked gated delta rule, vLLM's) overlaps its traffic with its chunks' walk. Chosen, not
#: fitted: picked on vLLM's H100 ``gdn_perf`` chunked rows (4,141), the ``gdn_chunk`` class
#: refitted at each p: median / p90 |error| 10.2% / 38% at p = 1, 6.1% / 35% at 2, 4.4% / 33%
#: at 4, 3.8% / 31% at 8, 3.6% / 31% at 12; from 16 (and at the max, the roofline's rule) the
#: fit drops the walk, 18.9% / 73%. 4 sits well below that edge; B200's rows (4,144) give
#: 3.9% / 46% at 4 (3.5-3.6% from 6 to 16, 23.5% at 32).
FUSED_WALK_NORM = 4.0

#: The bytes a clock one SM of :data:`SM_BOUND_VARIANTS` draws at full efficiency: H100-SXM's
#: HBM bandwidth per SM and clock (3.35 TB/s over 132 SMs at 1,830 MHz: 13.9 bytes), the
#: device their loads in flight were tuned on; capped by the device's HBM bandwidth.
SM_BYTES_PER_CLOCK = 3.35e12 / 132 / REFERENCE_CLOCK_HZ


def engine_linear_kernel(batch: KernelBatch, engine: str, fig: DeviceFigures) -> KernelBatch:
    """A model step's linear-attention kernels (:data:`~mlacalc.words.kernels.LINEAR_VARIANTS`)
    as ``engine`` runs them, as its ``gdn_perf`` and ``mamba2_perf`` rows time them: vLLM's
    chunked delta rule is FlashInfer's fused kernel (``fused``: its chunks' walk overlapped
    with its traffic, which is the step's bytes), the other engines' flash-linear-attention's
    kernels, which also pass their intermediates through HBM (the step's ``fla_bytes``);
    TensorRT-LLM's prompt conv1d kernels run a sequence at a time (Gated DeltaNet's a launch a
    sequence, Mamba-2's in waves of :data:`CONV_CTA_CHANNELS`-channel CTAs a sequence). A
    measured row, which names its kernel, has neither field nor ``seqs`` and is left as it
    is. ``fig`` is unused: no rule here depends on the device."""
    del fig
    shape = batch.shape
    if batch.variant == "gdn_chunk" and "fla_bytes" in shape:
        if engine == "vllm":
            return dataclasses.replace(batch, shape=dict(shape, fused=np.ones(len(batch))))
        return dataclasses.replace(batch, bytes=batch.bytes + shape["fla_bytes"])
    if engine != "trtllm" or "seqs" not in shape:
        return batch
    fields = per_sequence_conv(batch.variant, shape["seqs"], shape.get("channels"))
    return dataclasses.replace(batch, shape={**shape, **fields}) if fields else batch


def per_sequence_conv(variant: str, seqs: np.ndarray, channels: np.ndarray | None) -> dict:
    """The shape fields of TensorRT-LLM's prompt conv1d kernels (``variant`` ``conv1d`` or
    ``mamba2_conv1d``; ``{}`` for any other), which run once a sequence: Mamba-2's in waves of
    :data:`CONV_CTA_CHANNELS`-channel CTAs a sequence (``units``: a wait of
    ``unit_latency_s`` a wave), Gated DeltaNet's a launch a sequence (``launches``: its rows
    step by about 1.4 us a sequence whatever its channels). The one rule for a measured row
    (``mlacalc.measured.mapping``) and a model step (:func:`engine_linear_kernel`)."""
    if variant == "mamba2_conv1d":
        return {"units": seqs * np.ceil(channels / CONV_CTA_CHANNELS)}
    if variant == "conv1d":
        return {"launches": seqs}
    return {}


def streaming_terms(
    batch: KernelBatch, fig: DeviceFigures, prm: dict[str, float]
) -> dict[str, np.ndarray]:
    units = np.maximum(np.ceil(batch.bytes / 65536.0), 1.0)
    # a kernel that gives each row one CTA (a top-k selection walks its row's logits on one
    # SM: ``units`` = rows) draws bandwidth by its rows, not by 64 KB pieces
    rows = col(batch, "units", 0)
    units = np.where(rows > 0, np.maximum(rows, 1.0), units)
    reach = fig.hbm_bytes_per_s
    if batch.variant in SM_BOUND_VARIANTS:
        reach = min(reach, SM_BYTES_PER_CLOCK * fig.sm_count * fig.clock_hz)
    bw = prm["eff_memory"] * reach * memory_share(units, fig, prm)
    resident = np.zeros(len(batch))
    if batch.kind == "quantize" and "elements" in batch.shape:
        # a warm replay on the same input (``warm_l2``: calls on one input, no L2 flush)
        # finds the bf16 input in the L2 when it and the output fit in the share of the L2 a
        # kernel's operands keep (the GEMM's rule): its reads come at ``l2_speedup`` times
        # the HBM rate
        e = col(batch, "elements", 0)
        reads = 2.0 * e * col(batch, "passes", 1)
        footprint = 2.0 * e + col(batch, "write", 1) * e
        share = np.clip(2.0 - footprint / (prm["l2_share"] * fig.l2_bytes), 0.0, 1.0)
        warm = col(batch, "warm_l2", 0) > 0
        resident = np.where(warm, share * np.minimum(reads, batch.bytes), 0.0)
    l2_bw = np.full(len(batch), prm["l2_speedup"] * fig.hbm_bytes_per_s)
    if batch.kind == "quantize" and (rows > 0).any():
        # a quantize kernel that gives each token a CTA (vLLM's): each walks its row with the
        # loads its threads keep in flight, Hopper's bytes a clock per SM at ``sm_bandwidth``
        # (its rows of one token take 7.9 / 7.8 us for a 65,536-wide amax on H100 / B200, where
        # the HBM per SM differs 2x), from the HBM or the L2, capped by what the call can draw
        cta = np.where(
            rows > 0, units * prm["sm_bandwidth"] * SM_BYTES_PER_CLOCK * fig.clock_hz, np.inf
        )
        bw = np.where(rows > 0, np.minimum(prm["eff_memory"] * reach, cta), bw)
        l2_bw = np.minimum(l2_bw, cta)
    memory = (batch.bytes - resident) / bw + resident / l2_bw
    compute = batch.flops / (
        prm["eff_compute"] * fig.peak("fp32" if "fp32" in fig.peaks else "bf16")
    )
    # a call of several graph nodes (``launches``: the amax reduction is a memset of its scale
    # and the reduction kernel) pays the fixed cost of each
    extra = (np.maximum(col(batch, "launches", 1), 1.0) - 1.0) * prm["fixed_s"]
    # a row's CTA also waits on its own passes' synchronisations (a top-k selection's radix
    # passes over its row: about 8 us a row on H100 whatever its length, 10 us for one row of
    # 2,048 keys, 124 us for 2,048 rows): ``unit_latency_s`` per wave of rows over the SMs
    # a chunked linear-attention kernel's state recurrence: each (sequence, head) walks its
    # sequence's chunks one after another (``chunks`` a unit, ``seq_heads`` units), a wait of
    # ``unit_latency_s`` a chunk, in waves of units over the SMs (TensorRT-LLM's H100 rows: one
    # sequence of 32K tokens at 16 heads takes 1.5x four of 8K, the same work, about 1.4 us
    # more a chunk; vLLM's fused kernel takes the same 1.5 ms at 6 and 32 heads, 1 and 2
    # sequences: its chunks' walk alone). A kernel of several kernels (flash-linear-attention's)
    # walks after its other passes; a fused one (``fused``: FlashInfer's) streams while it
    # walks, the two overlapped as a kernel's compute and memory are (a p-norm: p chosen,
    # :data:`FUSED_WALK_NORM`)
    lat = prm.get("unit_latency_s", 0.0)
    walk = col(batch, "chunks", 0) * np.ceil(col(batch, "seq_heads", 0) / fig.sm_count) * lat
    fused = col(batch, "fused", 0) > 0
    memory = np.where(fused, combine(memory, walk, FUSED_WALK_NORM), memory)
    extra = extra + np.where(rows > 0, np.ceil(rows / fig.sm_count), 0.0) * lat
    extra = extra + np.where(fused, 0.0, walk)
    return {"compute_s": compute, "memory_s": memory, "extra_s": extra}


#: Bytes a peer up to which NCCL sends point-to-point (all-to-all) data with its LL protocol
