"""The streaming classes of the time model: ``elementwise`` and ``quantize`` kernels (and any
kind without a class of its own).

Terms: the bytes at ``eff_memory`` of the HBM bandwidth, drawn by one work unit per 64 KB, or
per row where the kernel gives each row a CTA (``units``; a small kernel leaves SMs idle:
``sm_bandwidth``); a warm replay's quantize input read from the
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
    # a kernel that gives each row one CTA (a top-k selection walks its row's logits on one
    # SM: ``units`` = rows) draws bandwidth by its rows, not by 64 KB pieces
    rows = col(batch, "units", 0)
    units = np.where(rows > 0, np.maximum(rows, 1.0), units)
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
    # a row's CTA also waits on its own passes' synchronisations (a top-k selection's radix
    # passes over its row: about 8 us a row on H100 whatever its length, 10 us for one row of
    # 2,048 keys, 124 us for 2,048 rows): ``unit_latency_s`` per wave of rows over the SMs
    extra = extra + np.where(rows > 0, np.ceil(rows / fig.sm_count), 0.0) * prm.get(
        "unit_latency_s", 0.0
    )
    return {"compute_s": compute, "memory_s": memory, "extra_s": extra}


#: Bytes a peer up to which NCCL sends point-to-point (all-to-all) data with its LL protocol
