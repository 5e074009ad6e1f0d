"""The streaming classes of the time model: ``elementwise`` and ``quantize`` kernels (and any
kind without a class of its own).

Terms: the bytes at ``eff_memory`` of the HBM bandwidth, drawn by one work unit per 64 KB (a
small kernel leaves SMs idle: ``sm_bandwidth``); a warm replay's quantize input read from the
L2 at ``l2_speedup``; the FLOPs at the CUDA-core rate; the fixed cost of each further graph
node of the call (``launches``).
"""

from __future__ import annotations

import numpy as np

from mlacalc.timemodel.device import DeviceFigures
from mlacalc.timemodel.shared import col, memory_share
from mlacalc.words.kernels import KernelBatch

__all__ = ["streaming_terms"]


def streaming_terms(
    batch: KernelBatch, fig: DeviceFigures, prm: dict[str, float]
) -> dict[str, np.ndarray]:
    units = np.maximum(np.ceil(batch.bytes / 65536.0), 1.0)
    bw = prm["eff_memory"] * fig.hbm_bytes_per_s * memory_share(units, fig, prm)
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
    memory = (batch.bytes - resident) / bw + resident / (prm["l2_speedup"] * fig.hbm_bytes_per_s)
    compute = batch.flops / (
        prm["eff_compute"] * fig.peak("fp32" if "fp32" in fig.peaks else "bf16")
    )
    # a call of several graph nodes (``launches``: the amax reduction is a memset of its scale
    # and the reduction kernel) pays the fixed cost of each
    extra = (np.maximum(col(batch, "launches", 1), 1.0) - 1.0) * prm["fixed_s"]
    return {"compute_s": compute, "memory_s": memory, "extra_s": extra}


#: Bytes a peer up to which NCCL sends point-to-point (all-to-all) data with its LL protocol
