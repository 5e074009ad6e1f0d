"""What the kernel classes of the time model share: the reference clock, the per-clock rates of
an SM, and the numeric helpers every class evaluates its terms with.

- ``col``: a shape column of a :class:`KernelBatch`, or a default for every row;
- ``combine``: the p-norm ``(c^p + m^p)^(1/p)`` of compute and memory time (a large ``p`` is
  the roofline's ``max``, ``p = 1`` no overlap);
- ``memory_share``: the share of the HBM bandwidth a kernel with few work units draws (each
  busy SM ``sm_bandwidth`` times its share);
- ``tile_rate`` / ``tile_arrays`` / ``operand_reuse``: the share of an SM's tensor rate an output
  tile reaches (and the reuse a device's rate per SM asks of it), and
  candidate tiles as arrays of (tile, row).
"""

from __future__ import annotations

import numpy as np

from mlacalc.timemodel.device import DeviceFigures
from mlacalc.words.dtypes import DTYPE_BITS
from mlacalc.words.kernels import KernelBatch

__all__ = [
    "CONVERT_PER_CLOCK",
    "REFERENCE_CLOCK_HZ",
    "REFERENCE_LINK_LATENCY_S",
    "SCALE_BLOCK_K",
    "SFU_EXP_PER_CLOCK",
    "SMEM_BYTES_PER_CLOCK",
    "col",
    "combine",
    "elem_bytes",
    "l2_resident_share",
    "memory_share",
    "mma_rows",
    "operand_reuse",
    "smem_per_sm",
    "tile_arrays",
    "tile_rate",
]

#: Times of work done on the SMs (fixed costs, per-unit and per-block work, the fixed cost of
#: quantizing) are stated at this clock and scale with ``REFERENCE_CLOCK_HZ / clock`` of the
#: device: they are cycles (:func:`mlacalc.timemodel.terms.scale_params`).
REFERENCE_CLOCK_HZ = 1.83e9

#: A collective's fixed cost and per-step synchronisation are flag round trips between GPUs:
#: they are stated at this scale-up link latency (NVLink 4's, the DeepSeek-V3 ISCA 2025 paper's
#: H800 measurement, Table 5: the H100-SXM catalogue figure) and scale with ``link latency /
#: REFERENCE_LINK_LATENCY_S`` of the device, as well as with its clock
#: (:func:`mlacalc.timemodel.terms.scale_params`).
REFERENCE_LINK_LATENCY_S = 3.33e-6

#: Conversion instructions (FP32 to a narrower type) one SM issues per clock (16 on Ampere and
#: Hopper; CUDA C Programming Guide, arithmetic instruction throughput table)
CONVERT_PER_CLOCK = 16.0

#: Exponentials one SM's special-function units issue per clock (MUFU.EX2: 16 a clock per SM
#: on Ampere and Hopper; CUDA C Programming Guide, arithmetic instruction throughput table)
SFU_EXP_PER_CLOCK = 16.0

#: Bytes one SM's shared memory reads or writes a clock (32 banks of 4 bytes; Ampere and Hopper
#: tuning guides)
SMEM_BYTES_PER_CLOCK = 128.0

#: The K depth of one scale block of a block-scaled fp8 GEMM (1x128 activation, 128x128 weight
#: blocks): every tile rescales its partial product once per block.
SCALE_BLOCK_K = 128

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


def col(batch: KernelBatch, name: str, default: float) -> np.ndarray:
    """The shape column ``name`` of ``batch`` as floats, or ``default`` on every row."""
    value = batch.shape.get(name)
    if value is None:
        return np.full(len(batch), float(default))
    return np.asarray(value, dtype=np.float64)


def elem_bytes(dtype: str) -> float:
    """Bytes of one element of a kernel dtype (``fp8_block`` as fp8; unknown: 2)."""
    base = dtype.split("_")[0] if dtype not in DTYPE_BITS else dtype
    return DTYPE_BITS.get(base, 16) / 8


def combine(c: np.ndarray, m: np.ndarray, p: float) -> np.ndarray:
    """The p-norm of two times: how far a kernel overlaps them."""
    hi = np.maximum(np.maximum(c, m), 1e-30)
    return hi * ((c / hi) ** p + (m / hi) ** p) ** (1.0 / p)


def l2_resident_share(footprint, fig: DeviceFigures, prm: dict[str, float]) -> np.ndarray:
    """Share of a warm replay's ``footprint`` bytes found in the L2: all of them while they fit
    in ``l2_share`` of the L2 (what a kernel's operands keep there), none from twice that,
    linear between (the one rule of the GEMM, quantize, recurrent-state and decode-cache
    kernels)."""
    return np.clip(2.0 - footprint / (prm["l2_share"] * fig.l2_bytes), 0.0, 1.0)


def memory_share(units: np.ndarray, fig: DeviceFigures, prm: dict[str, float]) -> np.ndarray:
    """Share of the HBM bandwidth a kernel with ``units`` concurrent work units can draw."""
    return np.minimum(1.0, units * prm["sm_bandwidth"] / fig.sm_count)


def tile_rate(tm, tn, reuse: float = 1.0):
    """Share of the SM's tensor rate an output tile reaches: operand reuse falls with the
    tile's intensity ``tm tn / (tm + tn)`` (64 for 128x128 on Hopper), as its square root
    below that. ``reuse`` multiplies the intensity a tile needs (:func:`operand_reuse`)."""
    return np.minimum(1.0, np.sqrt(tm * tn / (tm + tn) / (64.0 * reuse)))


#: Bytes a clock one SM draws from HBM at H100 SXM's full bandwidth (3.35 TB/s over 132 SMs
#: at 1,830 MHz): what a kernel whose warps issue their own loads (no copy engine) draws at
#: most per SM on any device (:func:`hbm_per_sm_ratio`).
HOPPER_HBM_BYTES_PER_SM_CLOCK = 3.35e12 / (132 * 1.83e9)


def hbm_per_sm_ratio(fig: DeviceFigures) -> float:
    """The device's HBM bytes per SM and clock over Hopper's
    (:data:`HOPPER_HBM_BYTES_PER_SM_CLOCK`): B200 (7.7 TB/s over 148 SMs at 1,856 MHz) 2.02,
    H200 1.43, H100 1; 1 where the catalogue has no SM count or clock."""
    if fig.sm_count <= 0 or fig.clock_hz <= 0:
        return 1.0
    return fig.hbm_bytes_per_s / (fig.sm_count * fig.clock_hz) / HOPPER_HBM_BYTES_PER_SM_CLOCK


#: Dense bf16 FLOP per clock of one Hopper SM: the tensor rate per SM at which
#: :func:`tile_rate`'s reference intensity (64) was fitted (H100 SXM: 989.5 TFLOPS / (132 SMs x
#: 1,830 MHz) = 4,096).
HOPPER_BF16_PER_CLOCK = 4096.0


def tensor_per_sm_ratio(fig: DeviceFigures) -> float:
    """The device's dense bf16 FLOP per clock and SM over Hopper's
    (:data:`HOPPER_BF16_PER_CLOCK`): B200 2, H100 1, H20 about 0.25; 1 where the catalogue has
    no SM count or clock."""
    if fig.sm_count <= 0 or fig.clock_hz <= 0:
        return 1.0
    return fig.peak("bf16") / (fig.sm_count * fig.clock_hz) / HOPPER_BF16_PER_CLOCK


def operand_reuse(fig: DeviceFigures) -> float:
    """How many times Hopper's operand reuse an output tile needs to keep the device's tensor
    cores busy: its dense bf16 FLOP per clock per SM over Hopper's, where that is above 1 on
    a device of Hopper's tile rules (``tensor_core_generation`` ``"sm90"``), else 1.

    A tile's operands come from shared memory at a rate per SM and clock that Blackwell did not
    double (128 bytes a clock, as Hopper's), while its fifth-generation tensor cores do twice
    the FLOPs per clock per SM (B200: 2,250 TFLOPS / (148 x 1,856 MHz) = 8,192, Hopper's
    4,096): a tile must reuse each operand byte twice as often, so the intensity at which it
    reaches the full rate doubles (128: a 256 x 256 tile, the two-SM MMA pair's), and the
    128 x 256 tile the libraries' lists top out at reaches sqrt(85.3 / 128) = 0.82 of it.
    The same holds for fp8 and fp4 (twice and four times the FLOPs on half and a quarter of
    the bytes). Below Hopper's rate (H20's cut tensor cores: 0.25) a tile needs that much less
    reuse, the same 128 bytes a clock feeding a quarter of the FLOPs: the large tiles reach the
    full rate either way, the few-row ones (:data:`~mlacalc.timemodel.gemm_time.SWAP_AB_TILES`)
    a larger share of it. ``sm80`` devices (``mma.sync`` from registers) keep theirs."""
    if fig.tensor_core_generation != "sm90":
        return 1.0
    return round(tensor_per_sm_ratio(fig), 2)


def tile_arrays(tiles: tuple) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows, columns and rates of ``(tm, tn, rate)`` tiles, as column arrays of (tile, 1)."""
    return (
        np.array([t[0] for t in tiles], dtype=np.float64)[:, None],
        np.array([t[1] for t in tiles], dtype=np.float64)[:, None],
        np.array([t[2] for t in tiles])[:, None],
    )


def smem_per_sm(fig: DeviceFigures) -> float:
    """Shared memory of one SM (:data:`_SMEM_PER_SM`); a capability the table lacks takes
    Hopper's 228 KB from 9.0 on, else the smallest figure (also any device without one)."""
    cc = fig.compute_capability
    return _SMEM_PER_SM.get(cc, 228.0 * 1024 if cc >= 9.0 else min(_SMEM_PER_SM.values()))


def mma_rows(fig: DeviceFigures) -> float:
    """Query rows one tensor-core MMA instruction covers, sharing the K/V operand it reads from
    shared memory: 64 for the warp-group MMA of compute capability 9 and later (``wgmma``,
    m64nNk16; PTX ISA), 16 for the per-warp ``mma.sync`` (m16n8k16) of NVIDIA devices before
    (Ampere, Ada; :attr:`~mlacalc.timemodel.device.DeviceFigures.tensor_core_generation`
    ``"sm80"``), 128 for data-centre Blackwell's ``tcgen05.mma`` (one MMA of 128 rows an SM,
    :attr:`~mlacalc.timemodel.device.DeviceFigures.tcgen05`: a 128-query tile reads each K/V
    block once). Other devices (not NVIDIA, or without a capability) take 64."""
    if fig.tcgen05:
        return 128.0
    return 16.0 if fig.tensor_core_generation == "sm80" else 64.0
