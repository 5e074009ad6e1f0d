"""The ``gemm`` class of the time model: a dense (or batched) GEMM of one library kernel.

Terms: every candidate output tile of the dtype's library (the fastest is run) and split-K
count, in waves over the SMs; the tensor time at ``eff_compute`` of the dtype's rate per SM (a
small tile reaches less of it, :func:`~mlacalc.timemodel.shared.tile_rate`); the operand stream
at the bandwidth the busy SMs draw, weights a warm replay keeps in the L2 (and the input its
weight copies share, ``SHARED_INPUT_FIELD``) read at ``l2_speedup``; a cost per wave of tiles
(``tile_s``); the output write at its own rate (``write_share``) and its unhidden share
(``epilogue_share``); split-K's fp32 partial sums through HBM and its reduce kernel. GEMV
kernels take the few-row calls where a library has them. fp8 GEMMs add the quantization of
their bf16 input (``quant_fixed_s``, ``quant_bytes``; nvfp4's and SGLang's fp8 a CTA a row too,
``quant_row_cycles``), block-scaled fp8 the CUDA-core rescale of each K block
(``promote_cycles``), weight-only GEMMs the conversion of each weight (``dequant_s``). The
figures behind each rule are in docs/decisions.md ("Time model").
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mlacalc.timemodel.device import DeviceFigures
from mlacalc.timemodel.shared import (
    SCALE_BLOCK_K,
    col,
    combine,
    elem_bytes,
    l2_resident_share,
    memory_share,
    operand_reuse,
    tile_arrays,
    tile_rate,
)
from mlacalc.words.kernels import KernelBatch

__all__ = [
    "BALANCED_WAVES",
    "BLOCK_STAND_IN",
    "CONVERT_KERNELS",
    "CUTLASS_FP8_ENGINES",
    "CUTLASS_SM100_ENGINES",
    "CUTLASS_SM100_FIELD",
    "CUTLASS_SM100_FP8_TILES",
    "CUTLASS_SM100_KBLOCK",
    "CUTLASS_SM100_KBLOCK_CYCLES",
    "FP4_QUANT_GRID_ENGINES",
    "FP4_QUANT_GRID_FIELD",
    "GEMM_TILES",
    "GROUP_QUANT_CTA_CYCLES",
    "GROUP_QUANT_CTA_ENGINES",
    "GROUP_QUANT_CTA_FIELD",
    "GROUP_QUANT_MOST_GROUPS",
    "MLA_QUANT_CTAS",
    "MLA_QUANT_CTA_CYCLES",
    "NO_SPLIT_K",
    "PAD_CONVERT_KERNELS",
    "PAIRED_MMA_DTYPES",
    "PERSISTENT_DTYPES",
    "PER_TENSOR_BMM",
    "PER_TENSOR_BMM_ENGINES",
    "POWER_LIMITED_DTYPES",
    "QUANT_ROW_CTA_ENGINES",
    "QUANT_ROW_CTA_FIELD",
    "QUANT_ROW_STRIDE",
    "QUANT_SM_BOUND_ENGINES",
    "QUANT_SM_BYTES_PER_CLOCK",
    "SHARED_INPUT_DTYPES",
    "SHARED_INPUT_ENGINES",
    "SHARED_INPUT_FIELD",
    "SMEM_FED_INTENSITY",
    "STEP_BLOCK_FP8_ENGINES",
    "STREAM_K_DTYPES",
    "TRTLLM_BLOCK_FP8_GEMM",
    "WIDE_FP4_TILE",
    "WIDE_FP4_TILE_ENGINES",
    "WIDE_FP4_TILE_FIELD",
    "engine_gemm_kernel",
    "fed_rate",
    "gemm_terms",
    "group_quant_ctas",
    "per_tensor_bmm",
    "step_block_fp8",
]

#: Output tiles a GEMM library chooses between, with the share of the SM's tensor rate each
#: reaches (:func:`~mlacalc.timemodel.shared.tile_rate`). The tile giving the shortest time is
#: taken.
GEMM_TILES = tuple(
    (tm, tn, tile_rate(tm, tn))
    for tm, tn in ((64, 64), (64, 128), (128, 64), (128, 128), (128, 256), (256, 128))
)

#: The tiles of the kernels of a dtype whose library has its own list (others: GEMM_TILES).
#: Weight-only GEMMs (TensorRT-LLM's fpA_intB CUTLASS kernels on SM80) have row tiles down to
#: 16 (CtaShape16x128x64, 32x128, 64x128, 128x128): at m <= 16 a tile pads the rows to 16, not
#: 64. SmoothQuant int8 GEMMs (its CUTLASS int8 runner): 32x128, 64x128, 128x64, 64x64,
#: 128x256 and 256x128. Both lists are the candidate tiles of TensorRT-LLM's CUTLASS heuristic
#: (cutlass_heuristic.cpp) as recalled, not checked against its source; the measured A100 rows
#: support the 16-row weight-only tile.
_WEIGHT_ONLY_TILES = tuple(
    (tm, tn, tile_rate(tm, tn)) for tm, tn in ((16, 128), (32, 128), (64, 128), (128, 128))
)
TILES_BY_DTYPE = {
    "w4a16": _WEIGHT_ONLY_TILES,
    "w8a16": _WEIGHT_ONLY_TILES,
    "int8": tuple(
        (tm, tn, tile_rate(tm, tn))
        for tm, tn in ((32, 128), (64, 128), (128, 64), (64, 64), (128, 256), (256, 128))
    ),
}

#: Tiles of a swapped-operand kernel for few-row calls of cuBLAS's plain and per-tensor fp8
#: GEMMs (:data:`SWAP_AB_DTYPES`): a framework's ``y = x W^T`` reaches cuBLAS, which is
#: column-major, with the weight as the MMA's M side and the tokens as its N side, and a warp
#: group's MMA takes N in steps of 8 (``wgmma``'s m64nNk16, N = 8 ... 256), so a call of a few
#: rows can pad them to 8, 16 or 32 instead of a 64-row tile. (rows, columns) in this module's
#: orientation (rows are the tokens); from recall of cuBLAS's layout and the PTX ISA's MMA
#: shapes, not read from a library's kernel list. Taken, as cuBLAS's GEMV is
#: (:data:`CUDA_CORE_GEMV_MAX_M`), only where the chosen tile's padded tensor-core work
#: outlasts its reads of the operands (:func:`_swapped_operands`): the measured H100, A100
#: and B200 rows have no such few-row call (a padded 64-row tile's work stays under the
#: weights' read wherever the tensor rate per byte of HBM is theirs), so no fitted figure
#: moves; it is the rule where that rate is cut (H20: 148 dense bf16 TFLOPS on 4.0 TB/s, whose
#: 64-row tile had made a two-token decode step of Llama-3.1-8B 2.1 times a one-token one).
SWAP_AB_TILES = ((8.0, 128.0), (16.0, 128.0), (32.0, 128.0))
SWAP_AB_DTYPES = ("bf16", "fp16", "fp8")

#: GEMM dtypes whose kernels never split K across SMs: a block-scaled fp8 GEMM multiplies each
#: 128-wide K block's partial product by its two scales into the tile's fp32 accumulator, so one
#: tile walks the whole of K; the SmoothQuant int8 GEMM has no split-K either, nor the nvfp4
#: GEMMs (TensorRT-LLM's, FlashInfer's CuTe DSL kernel under SGLang and vLLM): B200's rows at
#: one row and up to 4,096 columns grow with k alone (TensorRT-LLM 8.4 -> 127 us from k = 1,024
#: to 65,536 at every n from 128 to 4,096), one tile walking all of K (docs/time-model.md).
NO_SPLIT_K = ("fp8_block", "int8", "nvfp4")

#: GEMM dtypes whose kernels multiply with ``tcgen05``'s block-scaled MMA on data-centre
#: Blackwell (``kind::mxf4nvf4`` for nvfp4, ``kind::mxf8f6f4`` with UE8M0 scales for DeepGEMM's
#: 1x128 / 128x128 fp8), and the least rows of its tile there. The block-scaled kinds take M =
#: 128 on one SM (256 on an SM pair), where ``kind::f16`` and ``kind::f8f6f4`` also take M = 64
#: (the PTX ISA's shapes of ``tcgen05.mma``, as recalled, not checked against a stored copy),
#: so a call of up to 128 rows pads them to one 128-row tile and walks K at its time. Every
#: engine's B200 nvfp4 rows take one time from 1 to 128 rows (the median of 128 rows over 1,
#: k >= 8,192: 1.00 TensorRT-LLM, 1.01 SGLang and vLLM; bf16's, whose kernels have 64-row
#: tiles, 1.11-1.13). On Hopper (``wgmma``, M = 64) the rule does not apply.
BLOCK_SCALED_MMA = ("nvfp4", "fp8_block")
BLOCK_SCALED_MMA_ROWS = 128.0

#: The one output tile (rows, columns) of TensorRT-LLM's nvfp4 GEMM on data-centre Blackwell
#: (its CUTLASS ``tcgen05`` kernel, the ``nvfp4`` rows of its ``gemm_perf`` and module tables:
#: shape field :data:`WIDE_FP4_TILE_FIELD`, set by the mapping for :data:`WIDE_FP4_TILE_ENGINES`
#: and by :func:`engine_gemm_kernel` for a served step). Read from the wave steps of B200's
#: rows, not from the kernel's source: at n = 16,384 the time steps at 257 rows (k = 16,384:
#: 47.3 -> 75.2 us; 128 x 256 tiles: 64 columns of tiles, 192 > 148 SMs) and not at 129
#: (44.2 -> 45.7 us, where 128 x 128 tiles would make 256), at n = 10,240 at 512 rows (4 x 40
#: = 160 tiles) and not at 257, at n = 8,192 at 513 (5 x 32 = 160) and not at 257: every step
#: where a 128 x 256 tile fills the SMs, none where a narrower one would. Its rows of up to
#: 256 rows walk K at 1.83-1.98 ns a K element at every n from 128 to 8,192 (one tile an SM):
#: 128 x 256 multiply-adds a K element at 0.57-0.59 of the SM's fp4 rate, where a 128 x 64
#: tile the model had chosen walks in a quarter of the work. SGLang's and vLLM's nvfp4 kernel
#: (FlashInfer's CuTe DSL) steps at 129 rows and keeps the candidate tiles. Its reach: every
#: ``tcgen05`` device (B300, GB200 and GB300 too) on B200's rows alone; and the module tables'
#: few-token nvfp4 projections (DSA, MLA) read 6-7% slower under it than measured (their
#: quantize is likely fused upstream), which docs/time-model.md gives with its figures.
WIDE_FP4_TILE = (128.0, 256.0)
WIDE_FP4_TILE_FIELD = "wide_fp4_tile"
WIDE_FP4_TILE_ENGINES = frozenset({"trtllm"})

#: GEMM dtypes whose kernel on data-centre Blackwell multiplies with the two-SM MMA
#: (``tcgen05.mma.cta_group::2``): a pair of SMs computes a 256-row tile, each SM holding its
#: 128 rows of A and half of the tile's B columns in shared memory, so each SM's 128 x N share
#: is fed at the intensity of the pair's 256 x N tile (256 x 256: 128, the full rate at
#: B200's :func:`~mlacalc.timemodel.shared.operand_reuse` of 2; a one-SM 128 x 256 tile 0.82
#: of it). The block-scaled fp8 GEMM: DeepGEMM's sm100 kernel (TensorRT-LLM's and SGLang's
#: B200 rows; vLLM's block-scaled rows, floored by its wrapper's host work, likewise), its
#: two-SM MMA from recall of DeepGEMM's sm100 kernels, not read from a source here. The rows:
#: B200's rows of over 1,024 rows reach the share of the fp8 peak H100's reach (TensorRT-LLM
#: medians 0.58 and 0.55 at m >= 8,192, n, k >= 4,096), which the one-SM tile's 0.82 had
#: read slow from H100's fit (signed median over 1,024 rows +20% TensorRT-LLM, +10-17%
#: SGLang), and B200's own fit had held ``eff_compute`` at its bound (1.0). Not the batched
#: GEMM (SGLang's B200 BMM rows are cuBLASLt's per-tensor ``bmm_fp8``), nor bf16 and
#: per-tensor fp8 (their B200 rows from H100 at the largest sizes read -4% to -22% signed,
#: TensorRT-LLM's fp8 +2%: no sign of the pair's feed).
PAIRED_MMA_DTYPES = ("fp8_block",)

#: Shared-memory bytes per operand element of a block-scaled MMA on ``tcgen05``, over the bytes
#: of the element alone: nvfp4 carries an fp8 (E4M3) scale per 16 elements along K, which the
#: kernel stages in shared memory and copies into tensor memory (``tcgen05.cp``) for the MMA
#: that reads it, so every 8 bytes of 4-bit operand bring 1 byte of scale through the SM's
#: 128 bytes a clock: (0.5 + 1/16) / 0.5. A tile then needs that much more reuse to keep the
#: tensor cores busy (:func:`~mlacalc.timemodel.shared.operand_reuse`). DeepGEMM's UE8M0
#: scales (one per 128 elements) add under 1% and are left out.
SCALE_OPERAND_BYTES = {"nvfp4": (0.5 + 1.0 / 16) / 0.5}

#: The split-K rule of a dtype whose kernels have their own (others: SPLIT_K_CHOICES): (least K
#: a split walks, most splits). Weight-only GEMMs split K in 2 at most, each split walking at
#: least 4,096.
SPLIT_K_BY_DTYPE = {"w4a16": (4096.0, 2.0), "w8a16": (4096.0, 2.0)}

#: GEMM dtypes whose kernel is chosen by TensorRT-LLM's plugin profiler: it times every
#: candidate (tile, split) at power-of-two row counts and a call of m rows runs the one chosen
#: for the next power of two at or above m.
PROFILED_POW2_M = ("w4a16", "w8a16", "int8")

#: Calls of at most this many rows that a dtype's library runs as a GEMV kernel on the CUDA
#: cores instead of its tiled GEMM (TensorRT-LLM's plugins take their CUDA-core kernel below
#: 5 rows), and whether its blocks split K across SMs: the SmoothQuant int8 GEMV does, the
#: weight-only batched GEMV does not (a block walks all of K for its columns).
GEMV_MAX_M = {"int8": 4, "w4a16": 4, "w8a16": 4}
GEMV_SPLITS_K = {"int8": True, "w4a16": False, "w8a16": False}

#: Calls of at most this many rows that a dtype's library runs as a CUDA-core GEMV (cuBLAS
#: dispatches a GEMM with a vector operand to its gemv kernels) where its tiled kernel would be
#: bound by its padded tensor-core work rather than its operand reads. The GEMV pads no rows to
#: a tensor-core tile and its blocks (a warp per output column) cover every SM, so it is
#: memory-bound; a 64-row tile walking K on a few SMs is not where the tensor rate per SM is low
#: (Ada GeForce: 512 dense bf16 FLOP a clock an SM, A100 2048, H100 about 4096). Not at m >= 2
#: and not for fp8 (cuBLASLt's fp8 matmuls are tensor-core kernels).
CUDA_CORE_GEMV_MAX_M = {"bf16": 1, "fp16": 1}

#: CUDA-core instructions a GEMV issues per SM and clock: the 64 FP32 lanes of an A100 SM (H100
#: and Ada have 128; the smaller figure, so the GEMV never looks faster than the hardware). It
#: spends ``m`` fused multiply-adds and one bf16 -> fp32 conversion (a shift) on each weight.
GEMV_LANES_PER_CLOCK = 64.0

#: The least K a split walks in a kernel with neither a rule of its own (SPLIT_K_BY_DTYPE) nor
#: the cuBLAS choice (SPLIT_K_CHOICES), as the SmoothQuant int8 GEMV: a library splits K only
#: while each split's partial product outweighs the reduction of the partial sums.
SPLIT_K_CHUNK = 1024

#: The split counts a GEMM library without its own split-K rule (cuBLAS(Lt): bf16, fp16,
#: per-tensor fp8) chooses between, each capped by the idle SMs (``inf``: as many splits as
#: they allow) and by SPLIT_K_LEAST_K, the least K a split walks (two 64-deep K stages of a
#: bf16 mainloop, one 128-deep stage of fp8). The library's heuristic runs the fastest: a split
#: fills idle SMs (each busy SM draws its share of the bandwidth, ``sm_bandwidth``) and shortens
#: the walk, and pays its partial sums (SPLIT_K_PARTIAL_BYTES) and SPLIT_K_REDUCE_NODES more
#: kernels, the reduction of the partial sums (cuBLAS's split-K reduce kernel), each a fixed
#: cost of the class (``fixed_s``).
SPLIT_K_CHOICES = (1.0, 2.0, 4.0, 8.0, 16.0, np.inf)
SPLIT_K_LEAST_K = 128
SPLIT_K_REDUCE_NODES = 1.0

#: Bytes of HBM traffic per output element and split of a split-K GEMM's reduction: the split
#: writes its fp32 partial sum (4) and the reduction reads it back (4).
SPLIT_K_PARTIAL_BYTES = 8.0

#: Output tiles one SM runs at once, for a library whose kernels do (others: one at a time).
#: TensorRT-LLM's weight-only CUTLASS kernels (fpA_intB) are four-warp CTAs whose register use
#: leaves room for two on an SM (65,536 registers an SM / (128 threads x 255 registers), the
#: per-thread cap; their heuristic counts waves with this occupancy, as recalled, not checked
#: against its source). An SM holding two tiles issues one's MMAs while the other waits on its
#: loads (:func:`_tile_seconds`).
RESIDENT_TILES_BY_DTYPE = {"w4a16": 2.0, "w8a16": 2.0}

#: The tile CUTLASS's Hopper fp8 ``scaled_mm`` takes by the row count alone (SGLang's
#: ``sgl_kernel.fp8_scaled_mm``, vLLM's ``cutlass_scaled_mm``; the mapping's
#: ``cutlass_dispatch``): (most rows, tile rows, tile columns), the first that holds m; it never
#: splits K. The measured H100 rows step where the tile changes: n = 128, k = 65,536 take
#: 47-54 us at m <= 64, 67-101 us at 65-128 and 167-197 us at 129-257 (cuBLAS's fp8, which
#: splits K: 18-64 us), one tile walking all of K on each of two SMs. Blackwell's kernels take
#: their own list (:data:`CUTLASS_SM100_FP8_TILES`), which this one had stood in for (it fit
#: B200's rows better than cuBLAS's rule: SGLang 9.4% -> 8.7% median; H100 from B200's fit:
#: SGLang 18.4% -> 11.4%, vLLM 17.5% -> 12.1%).
CUTLASS_SM90_FP8_TILES = ((64.0, 64.0, 64.0), (128.0, 64.0, 128.0), (np.inf, 128.0, 128.0))

#: The same list for sgl-kernel's ``fp8_scaled_mm`` on data-centre Blackwell (``tcgen05``;
#: the rows of :data:`CUTLASS_SM100_ENGINES`, shape field :data:`CUTLASS_SM100_FIELD`): a call
#: of 65-128 rows runs one 128-row tile of 64 columns (the MMA's M = 128 shape) where Hopper's
#: runs two 64-row tiles of 128 columns, and above 128 rows 128 x 128 tiles in pairs along M
#: (:data:`CUTLASS_SM90_CLUSTER_M`, as on Hopper). Read from the rows, not from the kernel's
#: source (its sm100 dispatch was not read): at k >= 4,096 SGLang's B200 rows take one time
#: across each 256-row step above 128 rows (n = k = 16,384: 71-76 us at 129-256 rows, 113-122
#: at 257-512, 167-173 at 513-768), and medians over n and k step at every 256 j + 1 rows
#: (t(257) / t(256) 1.39, t(513) / t(512) 1.20, t(769) / t(768) 1.13; t(257) / t(512) 0.93,
#: predicted 0.87 before and 0.92 with the pairs). vLLM's B200 CUTLASS rows step at 257 rows
#: (1.30) but not at 513 or 769 (1.02): no pairs above 256 rows, another kernel; they keep
#: Hopper's list unpaired (the pairs there: vLLM's B200 fitted 7.1% -> 7.0% but from H100
#: 8.2% -> 8.5%). Tried and not kept: a 128-row tile at every row count (SGLang's B200
#: fitted median 8.6% -> 10.3%: its few-row rows walk K as a 64 x 64 tile does), a 128 x 64
#: tile from 129 to 256 rows (fitted 8.3%, but H100 from B200's fit 10.8% -> 11.5%), and
#: Hopper's list in pairs (H100 from B200's fit 10.6%, where this list gives 8.8%):
#: docs/time-model.md. Since round 26 the 128 x 64 tile holds up to 256 rows (two row tiles,
#: paired as above 128 rows: a 256 x 64 tile over two SMs, each SM's tile fed at the pair's
#: intensity), with the K walk's floor (:data:`CUTLASS_SM100_KBLOCK_CYCLES`): the 129-256-row
#: rows walk 1,024 of K in 0.92-0.93 us where one tile an SM holds them, under the 1.10 us a
#: 128 x 128 tile takes at B200's fp8 peak, and they step by a wave where 64-column tiles pass
#: the SMs (n = 4,096 -> 5,120: +36% per K element, the rows of up to 128 rows +5% to +7%), not
#: where 128-column pairs would.
CUTLASS_SM100_FP8_TILES = ((64.0, 64.0, 64.0), (256.0, 128.0, 64.0), (np.inf, 128.0, 128.0))
CUTLASS_SM100_FIELD = "cutlass_sm100"
CUTLASS_SM100_ENGINES = frozenset({"sglang"})

#: Tiles along M a cluster of CUTLASS's fp8 ``scaled_mm`` holds above ``CUTLASS_CLUSTER_FROM_M``
#: rows (its 128 x 128 tile, :data:`CUTLASS_SM90_FP8_TILES`, :data:`CUTLASS_SM100_FP8_TILES`):
#: the kernel's grid of tiles along M is rounded up to whole clusters, so a call of
#: ``256 j + 1`` rows runs as many 128-row tiles as one of ``256 (j + 1)``, the padded tile
#: walking K on zero-filled rows (no more HBM bytes). The cluster of two CTAs along M sharing
#: each weight tile's TMA load (multicast) and the grid's rounding up to whole clusters are
#: from recall of sgl-kernel's sm90 ``fp8_scaled_mm`` configs and CUTLASS 3's sm90 tile
#: scheduler, not read from a source here; the rows show it: at k >= 4,096, SGLang's and
#: vLLM's H100 rows take 1.31 / 1.37 times as long at 257 rows as at 256 and 1.15 / 1.11
#: times at 257 as at 512 (medians over n; 513 / 768: 1.17 / 1.12), where cuBLAS's fp8 and
#: bf16 (TensorRT-LLM's, 0.74 of t(512) at 257 rows) count 128 rows a tile, and every odd
#: count within a tile (49, 81, 97, 113, 161, 225 rows) costs nothing. SGLang's B200 kernel
#: pairs its 128-row tiles too (on ``tcgen05`` likely the two-SM MMA, ``cta_group::2``, a
#: 256-row tile over a pair of SMs; from recall): its rows' times are flat across each 256-row
#: step (:data:`CUTLASS_SM100_FP8_TILES`); vLLM's B200 rows are not (Hopper only there).
CUTLASS_SM90_CLUSTER_M = 2.0

#: The operand rows of a stage of CUTLASS's Hopper ``scaled_mm`` 128 x 128 tile (tm + tn): a
#: wave's pipeline fill (``tile_s``, fitted at that tile) loads its stages of tm + tn rows of K,
#: so the 64 x 64 tile's takes half and the 64 x 128 tile's three quarters. The rows: SGLang's
#: H100 fp8 calls of n, k <= 512 (one wave) take 4.6-4.9 us at 1-16 rows, 5.0 at 17-64, 5.5-5.8
#: at 65-128 (the 64 x 128 tile) and 6.5-6.9 at 129-512 (paired 128 x 128), vLLM's 5.2, 6.0-6.1
#: and 6.6-7.4 us, where one ``tile_s`` a wave gave SGLang 5.58-5.95 us (+11% to +22% at up to 64
#: rows, -8% to -15% at 129-512).
CUTLASS_SM90_STAGE_ROWS = 256.0

#: The fewest SM cycles sgl-kernel's Blackwell ``fp8_scaled_mm`` (:data:`CUTLASS_SM100_FP8_TILES`,
#: ``tcgen05`` only) spends on a K block of :data:`CUTLASS_SM100_KBLOCK` in each wave, whatever
#: its tile's work: up to 256 rows SGLang's B200 rows walk K in one time for the 64 x 64, 128 x 64
#: and two-SM 256 x 64 tiles (n = 512, k = 16,384: 15.5 / 16.8 / 17.8 / 20.3 us at 16 / 64 / 128 /
#: 256 rows), 0.66 us per 1,024 of K (medians) with one or two tiles busy and 0.8-0.95 us from 8
#: tiles on, where the fed 64 x 64 tile's MMAs take 0.55 us: a latency-bound mainloop (or
#: ``tcgen05``'s M = 64 MMA at the time of M = 128; sgl-kernel's sm100 configurations were not
#: read). 150 cycles (0.65 us per 1,024 of K at 1,856 MHz) is the one- and two-tile rows' walk,
#: read from the rows' medians, not fitted; 200 (their 0.85-0.9 us from 8 tiles) read worse
#: (docs/time-model.md, round 26).
CUTLASS_SM100_KBLOCK_CYCLES = 150.0
CUTLASS_SM100_KBLOCK = 128.0
CUTLASS_CLUSTER_FROM_M = 128.0

#: GEMM dtypes whose tensor rate follows the clock the chip's power allows: the
#: fitted ``eff_compute`` is the share of the peak a call reaches with every SM busy, and a
#: call that keeps a share ``b`` of the SMs busy reaches ``1 - (1 - eff_compute) b`` of it
#: (the peak with one SM): an SXM board holds its power limit (H100 700 W) by lowering the
#: clock of a chip whose every SM multiplies, where a few SMs run at the boost clock the peak
#: is quoted at. Linear in the busy SMs (power drawn in proportion to them) is an assumption.
#: The per-tensor fp8 rows show both ends: SGLang's and vLLM's H100 CUTLASS rows of one row
#: walk 1,024 of K on a 64 x 64 tile in 0.53-0.60 us (0.56 at the SM's fp8 peak), while the
#: largest rows reach 0.65 of the peak (TensorRT-LLM's cuBLAS rows: 1,286 of 1,979 TFLOPS);
#: one ``eff_compute`` for both had been a compromise (SGLang's H100 fit 0.84: its rows of
#: 16K+ rows and 50K+ of K 20-40% fast, its few-row small-n rows 15-30% slow). With it the
#: CUTLASS fits give ``eff_compute`` 0.66-0.72 on H100 and 0.68-0.86 on B200 (before 0.82-1.0;
#: TensorRT-LLM's cuBLAS, which splits K over every SM, 0.82 and 0.95 as before:
#: docs/time-model.md). Only fp8 so far: the other dtypes' classes were not refitted with it.
POWER_LIMITED_DTYPES = ("fp8",)

#: Plain (not batched) GEMM dtypes whose library kernels on a TMA device (``sm90_or_later``:
#: Hopper, data-centre Blackwell) pay the cost of a wave of tiles (``tile_s``, their pipeline's
#: fill and last epilogue) once a call, not once a wave: cuBLAS's bf16 and fp16 GEMMs there
#: are warp-specialized persistent kernels, one CTA an SM walking its tiles with the next
#: tile's TMA loads issued under the last one's epilogue; on ``sm80`` (A100) each wave of a
#: non-persistent grid fills its ``cp.async`` pipeline and writes its epilogue alone (the
#: schedules as recalled of cuBLAS's kernel names and CUTLASS 3's persistent TMA schedules,
#: not read from a source here). Read from the fits: every engine's own H100 and B200 fit of
#: ``gemm:bf16`` put ``tile_s`` a wave at its lower bound (0.02-0.04 ns; TensorRT-LLM, SGLang,
#: vLLM), A100's at 0.89 us, so the fit pooling A100 and H100 took 0.44 us a wave to B200;
#: with the rule, H100 from A100's fit 6.5% -> 6.0% (p90 25.7% -> 19.9%), B200 from the pooled
#: fit 12.0% -> 11.6% (docs/time-model.md, "The bf16 GEMM's wave cost across generations").
#: cuBLAS's per-tensor fp8 GEMM (TensorRT-LLM's; not CUTLASS's ``scaled_mm``, whose fits hold
#: 0.53-1.02 us a wave but for vLLM's H100 one, at its bound, :func:`_persistent`) likewise: its
#: H100 and B200 fits put ``tile_s`` at its lower bound, and H100 from A100's int8 fit (0.79 us
#: a wave) 13.5% -> 12.6%. A ``tile_s`` at its bound does not by itself tell a persistent kernel
#: (vLLM's H100 block-scaled fits, DeepGEMM's included, sit there too): the schedules above do.
PERSISTENT_DTYPES = ("bf16", "fp16", "fp8")

#: Plain GEMM dtypes whose persistent kernels (:data:`PERSISTENT_DTYPES`, on a TMA device) spread
#: the tiles of a last partial wave over every SM, so a call of ``w`` waves of output tiles
#: (``w`` > 1, not whole) takes ``w`` tiles' time an SM, not ``ceil(w)``: cuBLAS's Hopper and
#: Blackwell GEMMs schedule their work units dynamically and split the K walk of the last
#: wave's tiles among the SMs the whole waves leave idle (a stream-K tail; the schedule as
#: recalled of cuBLAS's and CUTLASS 3's persistent stream-K schedulers, not read from a source
#: here). Read from the rows: cuBLAS's bf16 rows (m >= 512, over 30 us), every engine on H100
#: and B200, whose 128 x 128 tiles' last wave is 50-80% full were predicted 17-40% slow
#: (signed median; SGLang B200 +37% / +21% / +19% at 50-60 / 60-70 / 70-80% full) and those
#: of full waves 3-6% fast; SGLang's B200 rows at n = k = 4,096 take 21.5-23.6 ns a row from
#: 2,048 to 4,352 rows, no step where a wave fills. TensorRT-LLM's cuBLAS fp8 rows show the
#: same at +7-10% (its quantize passes dilute it). Not A100's non-persistent grids, nor the
#: batched GEMM, nor CUTLASS's ``scaled_mm`` or a block-scaled kernel (DeepGEMM's B200 rows
#: +11-15% at 50-60% full: it picks its tile by the waves it fills, not modelled here).
#: Figures in docs/time-model.md ("cuBLAS's persistent GEMMs balance their last wave").
BALANCED_WAVES = PERSISTENT_DTYPES

#: Plain GEMM dtypes whose persistent kernel on ``tcgen05`` (:data:`BALANCED_WAVES`) can split
#: the K walk of fewer tiles than SMs over every SM (a stream-K schedule, as recalled of
#: cuBLAS's and CUTLASS 3's schedulers, not read from a source here): among the split counts a
#: library chooses (:data:`SPLIT_K_CHOICES`) the most splits is the SMs over the tiles, a
#: fraction, with the partial sums of the splits (:data:`SPLIT_K_PARTIAL_BYTES`) and a fix-up
#: at a reduce node's cost (:data:`SPLIT_K_REDUCE_NODES`; without it the rows of under a tenth
#: of a wave read -27% to -30%). docs/time-model.md, "cuBLAS's stream-K on Blackwell".
STREAM_K_DTYPES = ("bf16", "fp16")

#: The shape field of a GEMM whose caller runs its weight copies (``weight_copies``) on one
#: shared input ``x`` (the GEMM tables' collector: TensorRT-LLM's TABLES.md, "x is shared by
#: all copies"; set by the mapping for :data:`SHARED_INPUT_ENGINES`): in a warm replay ``x``
#: stays in the L2 with the weights while the two fit in its share (``l2_share``), and is
#: read at ``l2_speedup``. Only the plain bf16 / fp16 GEMM (:data:`SHARED_INPUT_DTYPES`),
#: whose operand is the caller's ``x`` itself; a quantized GEMM reads the copy its quantize
#: kernel writes each call. The rows: TensorRT-LLM's and vLLM's bf16 rows of n <= 128 and
#: 1,024+ rows read x faster than the HBM's datasheet rate (TABLES.md: "57 bf16 rows with n
#: <= 64 exceed HBM bandwidth") while x fits the L2, and were predicted up to +50-95% slow
#: there (docs/time-model.md, "The shared input resident in the L2").
SHARED_INPUT_FIELD = "shared_input"
SHARED_INPUT_DTYPES = ("bf16", "fp16")
SHARED_INPUT_ENGINES = frozenset({"trtllm", "vllm"})


#: The intensity ``tm tn / (tm + tn)`` at which a CUTLASS ``scaled_mm`` tile
#: (:data:`CUTLASS_SM90_FP8_TILES`) keeps a Hopper SM's tensor cores fed from shared memory:
#: ``wgmma`` reads both fp8 operands from shared memory, 128 bytes a clock, and the SM's 4,096
#: fp8 multiply-adds a clock take ``4,096 (1 / tm + 1 / tn)`` bytes a clock, 128 at 32 (a
#: 64 x 64 tile: one ``m64n64k32`` instruction's 4 KB of operands every 32 clocks). Below it a
#: tile runs at ``intensity / 32`` of the rate, and a device with more tensor work per SM and
#: clock needs ``operand_reuse`` times more (B200: 64). The general rule
#: (:func:`~mlacalc.timemodel.shared.tile_rate`, a square root fitted at 64 on the cuBLAS
#: libraries' tile lists) put the 64 x 64 tile at 0.71 of the rate, where SGLang's H100 rows
#: of one row walk K at 0.53-0.60 us per 1,024 (n = 32 to 1,024, k up to 65,536): 8.4 MFLOP
#: a 64 x 64 tile, 0.56 us at an H100 SM's fp8 peak (1,979 TFLOPS over 132 SMs), so the tile
#: runs at the full rate (with the power-limited clock, :data:`POWER_LIMITED_DTYPES`, which
#: lets a few busy SMs reach the peak). Every Hopper tile of the list is then fed whole;
#: B200's 64 x 64 at 0.50, 64 x 128 at 0.67, 128 x 128 at 1. The figures of the two rules
#: together are in docs/time-model.md ("Per-tensor fp8 GEMMs: the shared-memory feed and the
#: power-limited clock").
SMEM_FED_INTENSITY = 32.0


#: The shape field that marks a block-scaled fp8 GEMM timed by the per-tensor fp8 class on
#: cuBLAS-style tiles: SGLang's in a model step (:func:`step_block_fp8`) and every engine's in
#: DeepSeek-V4's and MiniMax-M3's module tables (``measured.mapped.KernelSlots``), DeepGEMM's
#: kernel in both engines. Two rules of that kernel apply to it, the class's parameters
#: otherwise unchanged: (1) its candidate tiles are fed from shared memory (:func:`fed_rate`),
#: as the tiles the class's ``eff_compute`` was fitted with (CUTLASS's ``scaled_mm``, whose
#: fitted efficiency is of fed tiles with every SM busy, :data:`POWER_LIMITED_DTYPES`): the
#: square-root rule (:func:`~mlacalc.timemodel.shared.tile_rate`) on top of it counted the
#: feed's loss twice (B200's 128 x 256 tile at 0.82 of a rate already fitted as fed); (2) its
#: output write is hidden (``epilogue_share`` 0): DeepGEMM's persistent CTAs store a tile's
#: output through shared memory by TMA, asynchronously, while the next tile's operands load
#: (from recall of DeepGEMM's kernels, not read from a source here), where the per-tensor
#: class's share is fitted on CUTLASS's rows (1.0 in both engines' B200 fits, about 0 in their
#: H100 fits, so (2) moves B200 alone). The module rows' figures are in docs/time-model.md
#: ("The block-scaled GEMMs the per-tensor class stands in for").
BLOCK_STAND_IN = "block_stand_in"


def fed_rate(tm, tn, reuse: float = 1.0):
    """Share of the SM's tensor rate a CUTLASS ``scaled_mm`` tile reaches, fed from shared
    memory (:data:`SMEM_FED_INTENSITY`): linear in its intensity below the feed's."""
    return np.minimum(1.0, tm * tn / (tm + tn) / (SMEM_FED_INTENSITY * reuse))


_TILES = {d: tile_arrays(t) for d, t in TILES_BY_DTYPE.items()}
_TILES[""] = tile_arrays(GEMM_TILES)

#: Engines whose per-tensor fp8 GEMM is CUTLASS's ``scaled_mm`` (:data:`CUTLASS_SM90_FP8_TILES`;
#: SGLang's ``sgl_kernel.fp8_scaled_mm``, vLLM's ``cutlass_scaled_mm``), the kernel their
#: ``gemm:fp8`` classes were fitted on; TensorRT-LLM's is cuBLAS's, which splits K.
CUTLASS_FP8_ENGINES = frozenset({"sglang", "vllm"})


#: Engines whose block-scaled fp8 GEMM inside a model step (a served step's, a module table
#: row's) runs at the per-tensor fp8 class with cuBLAS-style tiles (:func:`step_block_fp8`),
#: not at the class its stand-alone GEMM table fits: SGLang. Its stand-alone DeepGEMM rows on
#: B200 take 13-24 us a call at one row, 4-14 us more than TensorRT-LLM's DeepGEMM rows and
#: than its own H100 rows (the per-call work of the benchmark's call, likely the block scales'
#: conversion to Blackwell's packed UE8M0 layout, which a served model does once when it loads
#: its weights: docs/time-model.md), and the class fitted on them holds a fixed cost of 15 us;
#: inside its modules the GEMMs take about the per-tensor class's time. DeepSeek-V3.2's DSA
#: decode module on B200 (fp8_block projections): 56-65% over measured by the block-scaled
#: class, 9-12% by this rule (fitted median); DeepSeek-V4's and MiniMax-M3's module tables
#: read their block-scaled GEMMs so for every engine (measured.mapped.KernelSlots).
STEP_BLOCK_FP8_ENGINES = frozenset({"sglang"})

#: (engine, kernel generation) where the engine's stand-alone block-scaled fp8 GEMM (its
#: ``gemm_perf`` rows, the ``gemm:fp8_block`` class) is DeepGEMM's ``fp8_gemm_nt``, the kernel
#: TensorRT-LLM's block-scaled class times on that generation: SGLang's tables name
#: ``sglang_deepgemm_gemm_nt_f8f8bf16`` on H100 and B200, TensorRT-LLM's B200 table
#: ``deepgemm``, and its H100 rows are SGLang's within about 1 us at m <= 16. On Blackwell
#: SGLang's call also converts the fp32 block scales it is given into the layout ``tcgen05``'s
#: block-scaled MMA reads (packed UE8M0, DeepGEMM's sm90 kernel reads fp32 scales), 4-14 us a
#: call and up to 0.6 us per 1,000 weight rows more than TensorRT-LLM's rows of the same
#: shapes, which SGLang's own B200 fit holds in its fixed cost. So an engine profile fitted on
#: one of these generations predicts the other with TensorRT-LLM's block-scaled class fitted on
#: its own generation, the kernel without the conversion
#: (``engine_profiles.with_generation_kernels``; docs/time-model.md).
TRTLLM_BLOCK_FP8_GEMM = frozenset({("sglang", "sm90"), ("sglang", "tcgen05")})

#: Kernels DeepGEMM's ``fp8_gemm_nt`` launches per call on ``tcgen05`` devices to convert the
#: fp32 block scales it is handed (``transform_sf_into_required_layout``): for the weight's
#: 128 x 128 block scales an ``arange(n)``, its ``floor_divide_(128)`` and the ``index_select``
#: that broadcasts them to one a row, then the packing of four UE8M0 exponents to an int32
#: (``get_mn_major_tma_aligned_packed_ue8m0_tensor``); for the activation's 1 x 128 scales the
#: packing alone. Counted from DeepGEMM's conversion as recalled, not read from a source in
#: this repository; SGLang's B200 rows take 6.4-7.4 us more than TensorRT-LLM's DeepGEMM rows
#: of the same shapes at m <= 16, n <= 1,024 and k <= 10,240 (H100: 0.3-1.1 us less), five
#: nodes at TensorRT-LLM's H100 quantize node (1.37 us) making 6.9 us.
CONVERT_KERNELS = 5

#: Kernels more the conversion runs where the K blocks do not pack whole (k / 128 not a
#: multiple of 4: SGLang's B200 rows of k = 128, 256 and 768): exponents that do not fill whole
#: int32 words are padded through PyTorch ops (a zero fill, a copy into it, the transposing
#: copy; from recall of DeepGEMM's layout helper, not read from a source here) in place of the
#: packing pass per weight row (``convert_row_cycles``). Read from SGLang's B200 rows over
#: TensorRT-LLM's DeepGEMM rows of the same shapes (m <= 16, k <= 2,048, medians): 9.3-9.7 us
#: more at n = 1,024-8,192 where k / 128 is 1, 2 or 6, 6.8-7.5 us where it is 4-16; from n =
#: 8,192 to 65,536 0.05 us more per 1,000 weight rows where the aligned ones take 0.55. These
#: rows part ``node_s`` from the fixed cost: SGLang's B200 fit reads 1.27 us a node and a fixed
#: cost of 4.68 us, TensorRT-LLM's own fits of the pieces 1.37 us (its H100 quantize node) and
#: 4.80 us (its B200 DeepGEMM call); with 2 nodes the fit is as good but parts them 1.91 / 1.49.
PAD_CONVERT_KERNELS = 3


#: Engines whose fp8 MLA absorption BMM is a per-tensor fp8 batched GEMM, whatever the model's
#: GEMM dtype: SGLang's ``bmm_fp8`` (sgl-kernel's, cuBLASLt; ``kernel_source``
#: ``sglang_sgl_kernel_bmm_fp8`` on H100 and B200) on an input quantized by
#: ``per_tensor_quant_mla_fp8`` (from recall of SGLang's ``deepseek_v2.py`` and
#: ``fp8_kernel.py``, not read from a source here): a zeroed fp32 scale, then two Triton kernels
#: of one CTA a (token, head), the first folding its row's amax into the scale by an atomic, the
#: second writing the row's fp8 copy. The rows: fp8 over bf16 grows by about 1.5 ns a (token,
#: head) on H100 and 1.2 ns on B200 at 128 and 512 of K alike (not with the bytes); 360 and 335
#: SM cycles a (token, head) over all the SMs, where the atomic chain's figure differs more
#: (2.7 and 2.3 cycles a (token, head); vLLM's amax atomics take 11 cycles each, so the chain
#: does not bound it). So the quantize costs :data:`MLA_QUANT_CTAS` CTAs a (token, head) at
#: :data:`MLA_QUANT_CTA_CYCLES` SM cycles each, the block-scaled class not borrowed. The cycles
#: are read from a least-squares split of the fp8 rows' time over the bf16 rows' at 65,536+
#: (token, head)s (a fixed part, one per (token, head), one per element), 182 a CTA from H100's
#: rows alone, 168 from B200's, their mean taken; not fitted: a fit of the class on B200's rows
#: put the quantize's time into the GEMM's own operand stream (``eff_memory`` 0.12, the
#: quantize at 0 cycles), which predicts H100 32% slow (docs/time-model.md).
#: Its class is a variant of its own (:data:`PER_TENSOR_BMM`, ``gemm:fp8:bmm_fp8``), not the
#: ``bmm`` variant of the per-tensor class that DeepSeek-V4's module rows time their grouped
#: block-scaled projection with (DeepGEMM's kernel, :data:`BLOCK_STAND_IN`).
PER_TENSOR_BMM_ENGINES = frozenset({"sglang"})
PER_TENSOR_BMM = "bmm_fp8"
MLA_QUANT_CTAS = 2.0
MLA_QUANT_CTA_CYCLES = 175.0

#: vLLM's dynamic per-tensor fp8 quantize (``scaled_fp8_quant``: the amax, then the scaling
#: pass; ``quant_sm_bound`` rows) moves its bytes at a rate per SM and clock, not at the HBM's:
#: its call at n <= 64 (the GEMM a sliver, the input's passes the rest) takes 1.25-1.36 times as
#: long an input element on H100 as on B200 at every size from 2^20 to 2^32 elements, where
#: SGLang's and TensorRT-LLM's per-tensor quantize of the same calls take 2.1-2.4 times as long
#: from 2^26 elements on (the HBM ratio, 3.35 against 7.7 TB/s) and the SMs times the clock
#: differ by 1.1 times. The passes' bytes are timed against ``QUANT_SM_BYTES_PER_CLOCK`` bytes
#: a clock on every SM (a unit: the class's fitted ``quant_sm_bytes`` is the pass's cost in it:
#: 1.69 on H100, 1.81 on B200 a walked element (QUANT_ROW_STRIDE), where in HBM passes the
#: two fits had read 1.12 and 2.38), so a
#: fit on one device carries to the other by its SMs and clock.
QUANT_SM_BYTES_PER_CLOCK = 16.0
#: The engines whose quantize kernels move their bytes so: vLLM's, its per-tensor fp8 GEMM's
#: (the ``gemm_perf`` rows, a model step's) and the block-scaled GEMMs of its DeepSeek-V4 and
#: MiniMax-M3 module rows (:data:`BLOCK_STAND_IN`, ``measured.mapped.KernelSlots``), whose fit
#: on B200 had held the class's B200 reading (with the HBM at 1 pass instead, B200's fitted
#: HCA prompts 4.7% -> 8.8%). Not its nvfp4 GEMM's quantize: B200's own nvfp4 fit moves it at
#: 0.95 of an HBM pass, about the HBM's rate.
QUANT_SM_BOUND_ENGINES = frozenset({"vllm"})

#: Elements of a token's row one step of vLLM's per-tensor fp8 quantize covers: each pass (the
#: amax, then the scaling) gives a token's row one CTA, which walks it in steps of this many
#: elements, and a step costs the same however much of it the row fills. Its ``gemm_perf`` fp8
#: rows show the stair on both devices: at n = 32 (the GEMM a sliver) and 16,384 tokens the
#: call takes 122-135 us on H100 from k = 32 to 2,048, 201-214 us from 2,560 to 4,096, 283-290
#: at 5,120-6,144 and 360-362 at 7,168-8,192 (B200: 110-115, 173-178, 238, 303-308 us), a
#: stair of 2,048, not 1,024 (H100 1,024 / 1,536 / 2,048: 127 / 132 / 135 us); SGLang's and
#: TensorRT-LLM's quantize of the same rows grow smoothly with k. The passes' SM time counts
#: ``ceil(k / QUANT_ROW_STRIDE)`` whole steps (their HBM time, the bytes the row holds). The
#: CTA's width is from the rows, not read from vLLM's source (from recall: 256 threads of
#: 16-byte loads, 2,048 bf16). Not the 1x128 block quantize of its module rows'
#: block-scaled GEMMs (:data:`BLOCK_STAND_IN`), another kernel.
QUANT_ROW_STRIDE = 2048.0

#: Engines whose per-tensor fp8 GEMM quantizes its input with a small CTA a token (SGLang's
#: ``gemm_perf`` fp8 rows and a served step's per-tensor fp8 GEMM; shape field
#: :data:`QUANT_ROW_CTA_FIELD`): each input row costs ``quant_row_cycles`` SM cycles over all
#: the SMs beside the bytes its passes move, as the nvfp4 quantize's CTA a row does. The kernel
#: is from recall (SGLang's dynamic fp8 quantize, ``sgl_per_token_quant_fp8``: a block a
#: token), not read from a source here; the rows show the cost: at k <= 128 and n <= 256 (the
#: GEMM a sliver, the input's bytes a few hundred a row) SGLang's H100 and B200 fp8 rows run
#: 4-5 us over the per-tensor model at 16,384 rows and 10-11 us at 32,768 on both devices
#: (about 0.3 ns a row, 80-95 SM cycles), flat in n, where the bf16 rows of the same shapes
#: are within 1 us.
QUANT_ROW_CTA_ENGINES = frozenset({"sglang"})
QUANT_ROW_CTA_FIELD = "quant_row_ctas"

#: Engines whose block-scaled fp8 GEMM rows quantize their input with a CTA per
#: ``groups_per_block`` 1x128 groups (shape field :data:`GROUP_QUANT_CTA_FIELD`, set by the
#: mapping for SGLang's ``gemm_perf`` rows): sgl-kernel's ``per_token_group_quant_8bit``, which
#: packs :data:`GROUP_QUANT_MOST_GROUPS` groups into a CTA where the call's group count (m x
#: ceil(k / 128)) allows and otherwise the largest power of two below it that divides the count
#: (from recall of its launcher, not read from a source here). Each CTA costs
#: :data:`GROUP_QUANT_CTA_CYCLES` SM cycles over all the SMs beside the bytes the pass moves
#: (:func:`group_quant_ctas`). Every aligned row count of the tables is a multiple of 16 (16 a
#: CTA); at an odd m the packing is the power of two that divides ceil(k / 128): 1 at k = 128,
#: 2 at 256 and 768, 4 at 512, 1,536, 2,560 and 3,584, 8 at 1,024, 3,072, 5,120 and 7,168, 16 at
#: 2,048, 4,096, 6,144 and 8,192 up. The rows show it: SGLang's H100 rows at n <= 512 and m =
#: 4,097 take t(m) - t(m - 1) = 22.0 us at k = 3,584, 15.8 at 2,560, 11.6 at 768, 9.3 at 1,536,
#: 5.2 at 128 and 0.0-0.4 us at 2,048, 4,096 and 8,192, growing with m (k = 3,584: 2.1 us at
#: 257, 5.5 at 1,025, 11.3 at 2,049), where the GEMM itself is the same (docs/time-model.md).
GROUP_QUANT_CTA_ENGINES = frozenset({"sglang"})
GROUP_QUANT_CTA_FIELD = "group_quant_ctas"
GROUP_QUANT_MOST_GROUPS = 16

#: SM cycles one CTA of the 1x128 group quantize costs (:data:`GROUP_QUANT_CTA_ENGINES`), read
#: from SGLang's rows at n <= 512 and odd m above 16 over the row one fewer, not fitted: the
#: extra time over the extra CTAs, median 247 cycles on H100 and 259 on B200 (384 pairs each
#: with over 2,000 more CTAs; a least-squares line through the origin 229 and 279), at every k
#: 150-274 on H100 and 147-271 on B200. Of the order of the MLA BMM quantize's CTA
#: (:data:`MLA_QUANT_CTA_CYCLES`).
GROUP_QUANT_CTA_CYCLES = 250.0


#: The nvfp4 input quantize's launch in the engines whose rows show it
#: (FP4_QUANT_GRID_ENGINES; from recall of TensorRT-LLM's ``invokeFP4Quantization``, not read
#: from a source here): a thread converts FP4_QUANT_THREAD_ELEMENTS elements of a row, a CTA
#: is a row's threads up to FP4_QUANT_CTA_THREADS, and the grid is at most the CTAs that fill
#: every SM's FP4_QUANT_SM_THREADS threads; past that a CTA walks several rows in a loop. So a
#: call launches min(m, SMs x (2,048 // threads)) CTAs: every row its own at k <= 512 and m up
#: to 4,736 on B200, fewer as k grows (592 at k >= 4,096). SGLang's alone: vLLM's rows keep a
#: cost a row past that grid (its own quantize kernel), and TensorRT-LLM's, whose rows show the
#: grid too, lost with it leaving the device out (a rule tried and not kept). docs/time-model.md,
#: "SGLang's nvfp4 quantize: its CTAs are its grid's, not its rows".
FP4_QUANT_THREAD_ELEMENTS = 8.0
FP4_QUANT_CTA_THREADS = 512.0
FP4_QUANT_SM_THREADS = 2048.0
FP4_QUANT_GRID_ENGINES = frozenset({"sglang"})
#: The shape field of an nvfp4 GEMM whose input quantize launches that grid (set by the
#: mapping on those engines' rows and by :func:`engine_gemm_kernel` on their steps' GEMMs)
FP4_QUANT_GRID_FIELD = "fp4_quant_grid"


def fp4_quant_ctas(m: np.ndarray, k: np.ndarray, sms: int) -> np.ndarray:
    """CTAs the nvfp4 input quantize of an (m x k) input launches (FP4_QUANT_CTA_THREADS)."""
    threads = np.clip(np.ceil(k / FP4_QUANT_THREAD_ELEMENTS), 1.0, FP4_QUANT_CTA_THREADS)
    per_sm = np.maximum(1.0, np.floor(FP4_QUANT_SM_THREADS / threads))
    return np.minimum(m, sms * per_sm)


def group_quant_ctas(m: np.ndarray, k: np.ndarray) -> np.ndarray:
    """CTAs of the 1x128 group quantize of an ``m`` x ``k`` input
    (:data:`GROUP_QUANT_CTA_ENGINES`): one per ``g`` groups, ``g`` the largest power of two up to
    :data:`GROUP_QUANT_MOST_GROUPS` that divides the group count m x ceil(k / 128)."""
    groups = np.round(m) * np.ceil(k / SCALE_BLOCK_K)
    per_cta = np.ones_like(groups)
    g = 2.0
    while g <= GROUP_QUANT_MOST_GROUPS:
        per_cta = np.where(np.mod(groups, g) == 0, g, per_cta)
        g *= 2.0
    return groups / per_cta


def per_tensor_bmm(batch: KernelBatch, engine: str) -> KernelBatch:
    """``batch`` as ``engine`` runs a model step's fp8 MLA absorption BMM
    (:data:`PER_TENSOR_BMM_ENGINES`): the per-tensor fp8 batched GEMM with its quantize of
    :data:`MLA_QUANT_CTAS` CTAs a (token, head) (``quant_ctas``), its class's variant
    (:data:`PER_TENSOR_BMM`), the FLOPs and bytes unchanged. Any other batch, or another
    engine's, is returned as it is."""
    if batch.kind != "gemm" or batch.dtype != "fp8_block" or batch.variant != "bmm":
        return batch
    if engine not in PER_TENSOR_BMM_ENGINES:
        return batch
    ones = np.ones(len(batch))
    groups, m = col(batch, "groups", 1), col(batch, "m", 1)
    shape = {
        **batch.shape,
        "quantize_input": ones,
        "quant_group": 0 * ones,
        "quant_passes": 2 * ones,
        "quant_permute": 0 * ones,
        "quant_launches": 3 * ones,
        "quant_ctas": MLA_QUANT_CTAS * groups * m,
    }
    return dataclasses.replace(batch, dtype="fp8", shape=shape, variant=PER_TENSOR_BMM)


def step_block_fp8(batch: KernelBatch, engine: str) -> KernelBatch:
    """``batch`` as ``engine`` runs a model step's block-scaled fp8 GEMM
    (:data:`STEP_BLOCK_FP8_ENGINES`): the per-tensor fp8 class (``fp8``) with its input's 1x128
    quantization (one pass, one launch) and cuBLAS-style tiles (``cutlass_dispatch = 0``) as
    DeepGEMM's (:data:`BLOCK_STAND_IN`), the GEMM's FLOPs and bytes unchanged. A batched GEMM
    (a ``bmm`` variant) and any other batch, or another engine's, is returned as it is. The
    one rule for the module tables' rows (:mod:`mlacalc.measured.mapping`) and a served step
    (:func:`engine_gemm_kernel`)."""
    if batch.kind != "gemm" or batch.dtype != "fp8_block" or batch.variant:
        return batch
    if engine not in STEP_BLOCK_FP8_ENGINES:
        return batch
    ones = np.ones(len(batch))
    shape = {
        **batch.shape,
        "quantize_input": ones,
        "quant_passes": ones,
        "quant_launches": ones,
        "cutlass_dispatch": np.zeros(len(batch)),
        "block_stand_in": ones,
        # its 1x128 group quantize's CTAs at a row count the packing does not fill
        GROUP_QUANT_CTA_FIELD: float(engine in GROUP_QUANT_CTA_ENGINES) * ones,
    }
    return dataclasses.replace(batch, dtype="fp8", shape=shape)


def engine_gemm_kernel(batch: KernelBatch, engine: str, fig: DeviceFigures) -> KernelBatch:
    """``batch`` as ``engine`` runs it where the batch names no kernel (a model step's; a
    measured row states its input's quantization, ``quantize_input``, and keeps its kernel): a
    block-scaled fp8 GEMM by :func:`step_block_fp8`; a per-tensor fp8 GEMM with
    ``cutlass_dispatch`` where its engine's is CUTLASS's ``scaled_mm``
    (:data:`CUTLASS_FP8_ENGINES`): the step is timed with the tiles its class was fitted on."""
    if batch.kind == "gemm" and batch.dtype == "nvfp4" and WIDE_FP4_TILE_FIELD not in batch.shape:
        # the engine's nvfp4 kernel: TensorRT-LLM's its one wide tile (WIDE_FP4_TILE); its
        # quantize's grid (FP4_QUANT_GRID_ENGINES)
        wide = float(engine in WIDE_FP4_TILE_ENGINES) * np.ones(len(batch))
        grid = float(engine in FP4_QUANT_GRID_ENGINES) * np.ones(len(batch))
        shape = {**batch.shape, WIDE_FP4_TILE_FIELD: wide, FP4_QUANT_GRID_FIELD: grid}
        return dataclasses.replace(batch, shape=shape)
    if "quantize_input" not in batch.shape:
        batch = per_tensor_bmm(step_block_fp8(batch, engine), engine)
    if batch.kind != "gemm" or batch.dtype != "fp8" or batch.variant:
        return batch
    if "cutlass_dispatch" in batch.shape or engine not in CUTLASS_FP8_ENGINES:
        return batch
    shape = {**batch.shape, "cutlass_dispatch": np.ones(len(batch))}
    # its kernel's Blackwell tiles where the engine's differ from Hopper's (CUTLASS_SM100_FP8_TILES)
    shape[CUTLASS_SM100_FIELD] = float(engine in CUTLASS_SM100_ENGINES) * np.ones(len(batch))
    if engine in QUANT_SM_BOUND_ENGINES:  # its quantize's passes per SM and clock
        shape["quant_sm_bound"] = np.ones(len(batch))
    if engine in QUANT_ROW_CTA_ENGINES:  # its quantize's CTA a token
        shape[QUANT_ROW_CTA_FIELD] = np.ones(len(batch))
    return dataclasses.replace(batch, shape=shape)


@dataclass
class _Call:
    """A batch of GEMM calls and its candidate kernels: shape columns (one per row) and the
    candidate tiles (and split counts) as arrays of (candidate, 1)."""

    batch: KernelBatch
    fig: DeviceFigures
    prm: dict[str, float]
    m: np.ndarray
    n: np.ndarray
    k: np.ndarray
    groups: np.ndarray
    per_sm: float
    tm: np.ndarray
    tn: np.ndarray
    rate: np.ndarray
    can_split: bool | np.ndarray
    #: a cuBLAS-style class: the split count is chosen among SPLIT_K_CHOICES (``choice``)
    choose_split: bool
    choice: np.ndarray | None
    #: the most splits each row's K allows
    most: np.ndarray
    #: the tiles along M a cluster holds (the kernel's M tiles rounded up to whole clusters)
    cluster_m: np.ndarray | float
    weight: np.ndarray
    warm: np.ndarray
    resident_share: np.ndarray | None
    #: the weight copies' bytes a warm replay cycles through (``resident_share`` is its
    #: share found in the L2, which depends on the parameters)
    footprint: np.ndarray | float = 0.0
    #: the candidates' parameter-free arrays (:func:`_geometry`) by the rows they were taken
    #: at, kept for the next prediction of the same rows (:func:`kept_shapes`); None: not kept
    memo: dict[str, dict[str, Any]] | None = field(default=None, repr=False, compare=False)


def _dispatched(listed, m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The (rows, columns) of the tile a CUTLASS dispatch list (most rows, tile rows, tile
    columns) gives each row count: the first entry that holds it."""
    pick = np.searchsorted(np.asarray([t[0] for t in listed]), m, side="left")
    return np.asarray([t[1] for t in listed])[pick], np.asarray([t[2] for t in listed])[pick]


def _call(batch: KernelBatch, fig: DeviceFigures, prm: dict[str, float]) -> _Call:
    """The candidate kernels of a batch (:func:`_call_shape`) at the parameters ``prm``."""
    return _priced(_call_shape(batch, fig), prm)


def _priced(shape: _Call, prm: dict[str, float]) -> _Call:
    """``shape`` (:func:`_call_shape`, no parameters read) at the parameters ``prm``: the
    tensor rate per SM and the share of the weights a warm replay finds in the L2."""
    batch, fig = shape.batch, shape.fig
    per_sm = prm["eff_compute"] * fig.peak(batch.dtype) / fig.sm_count
    resident_share = l2_resident_share(shape.footprint, fig, prm)
    return dataclasses.replace(shape, prm=prm, per_sm=per_sm, resident_share=resident_share)


def _call_shape(batch: KernelBatch, fig: DeviceFigures) -> _Call:
    """The candidate kernels of a batch: the dtype's tiles, its GEMV for few-row calls, and
    the split-K rule of its library. Reads no fit parameter (:func:`_priced` adds them), so
    a fit's every prediction of the same rows shares it (:func:`_shapes`)."""
    m, n, k = col(batch, "m", 1), col(batch, "n", 1), col(batch, "k", 1)
    groups = col(batch, "groups", 1)
    # every candidate tile at once: arrays of (tile, row)
    tm, tn, rate = _TILES.get(batch.dtype, _TILES[""])
    if fig.tcgen05 and batch.dtype in BLOCK_SCALED_MMA and batch.variant != "bmm":
        # tcgen05's block-scaled MMA has no 64-row shape: a CTA's tile is 128 rows at least
        # (not the batched GEMM: the only fp8 BMM rows on Blackwell, SGLang's, are cuBLASLt's
        # per-tensor ``bmm_fp8``)
        tm = np.maximum(tm, BLOCK_SCALED_MMA_ROWS)
        rate = tile_rate(tm, tn)
    if fig.tcgen05 and batch.dtype == "nvfp4" and (col(batch, WIDE_FP4_TILE_FIELD, 0) > 0).any():
        # TensorRT-LLM's nvfp4 kernel runs its one tile (WIDE_FP4_TILE); a batch of one
        # engine's rows holds the field alike in every row
        tm, tn = np.full_like(tm, WIDE_FP4_TILE[0]), np.full_like(tn, WIDE_FP4_TILE[1])
        rate = tile_rate(tm, tn)
    reuse = operand_reuse(fig)
    if fig.tcgen05:  # the block scales pass through shared memory with the operands
        reuse = reuse * SCALE_OPERAND_BYTES.get(batch.dtype, 1.0)
    if reuse != 1.0:  # a tensor rate per SM off Hopper's asks more or less reuse of a tile
        rate = tile_rate(tm, tn, reuse)
        if fig.tcgen05 and batch.dtype in PAIRED_MMA_DTYPES and batch.variant != "bmm":
            # the two-SM MMA: each SM's tile fed at its pair's intensity (PAIRED_MMA_DTYPES)
            rate = tile_rate(2.0 * tm, tn, reuse)
    can_split = batch.dtype not in NO_SPLIT_K
    gemv_rows = GEMV_MAX_M.get(batch.dtype, 0)
    if gemv_rows:
        # a GEMV kernel for the few-row calls: its blocks take all the rows (a row tile of
        # ``gemv_rows``) and a slice of the columns, and split K among them or not
        gemv = m <= gemv_rows
        tm = np.where(gemv, float(gemv_rows), tm)
        rate = np.where(gemv, tile_rate(gemv_rows, 128), rate)
        can_split = (can_split | gemv) if GEMV_SPLITS_K[batch.dtype] else (can_split & ~gemv)
    chunk, cap = SPLIT_K_BY_DTYPE.get(batch.dtype, (SPLIT_K_CHUNK, np.inf))
    # the split count a library chooses (SPLIT_K_CHOICES): every tile once per choice
    # (``can_split`` is one flag here: a dtype with a GEMV kernel has one per row)
    choose_split = not gemv_rows and batch.dtype not in SPLIT_K_BY_DTYPE and bool(can_split)
    choice = None
    if choose_split:
        chunk = SPLIT_K_LEAST_K
        count = len(tm)
        tm, tn, rate = (np.repeat(a, len(SPLIT_K_CHOICES), axis=0) for a in (tm, tn, rate))
        choice = np.tile(np.asarray(SPLIT_K_CHOICES, dtype=np.float64), count)[:, None]
    cluster_m: np.ndarray | float = 1.0
    stand_in = col(batch, "block_stand_in", 0) > 0
    if stand_in.any():
        # a block-scaled GEMM the per-tensor class stands in for (BLOCK_STAND_IN): its tiles
        # fed from shared memory, as the class's eff_compute was fitted (fed_rate)
        rate = np.where(stand_in, fed_rate(tm, tn, reuse), rate)
    disp = col(batch, "cutlass_dispatch", 0) > 0
    if disp.any():
        # a kernel whose tile the row count picks (CUTLASS_SM90_FP8_TILES; SGLang's on
        # tcgen05 CUTLASS_SM100_FP8_TILES): that tile for every candidate, K never split
        sm100 = (col(batch, CUTLASS_SM100_FIELD, 0) > 0) & fig.tcgen05
        dm, dn = _dispatched(CUTLASS_SM90_FP8_TILES, m)
        if sm100.any():
            dm100, dn100 = _dispatched(CUTLASS_SM100_FP8_TILES, m)
            dm, dn = np.where(sm100, dm100, dm), np.where(sm100, dn100, dn)
        tm, tn = np.where(disp, dm, tm), np.where(disp, dn, tn)
        rate = np.where(disp, fed_rate(dm, dn, reuse), rate)
        can_split = can_split & ~disp
        # Hopper's kernel (and SGLang's on tcgen05) above 128 rows: its 128-row tiles in
        # clusters along M (CUTLASS_SM90_CLUSTER_M)
        paired = disp & (m > CUTLASS_CLUSTER_FROM_M) & (sm100 | (not fig.tcgen05))
        cluster_m = np.where(paired, CUTLASS_SM90_CLUSTER_M, 1.0)
        # on tcgen05 a pair is the two-SM MMA: each SM's tile fed at its pair's intensity, half
        # of the weight tile loaded on each SM (as PAIRED_MMA_DTYPES)
        rate = np.where(paired & sm100, fed_rate(2.0 * dm, dn, reuse), rate)
    most = np.minimum(np.maximum(1.0, np.floor(k / chunk)), cap)
    weight = groups * n * k * elem_bytes(batch.dtype)
    # a warm replay keeps the weights resident when all the copies the caller cycles through
    # (``weight_copies``) fit in the share of the L2 a kernel's operands can hold; where the
    # copies share one input (SHARED_INPUT_FIELD) it stays resident with them
    warm = col(batch, "warm_l2", 0) > 0
    shared = (col(batch, SHARED_INPUT_FIELD, 0) > 0) & (batch.dtype in SHARED_INPUT_DTYPES)
    x = np.where(shared, groups * m * k * elem_bytes(batch.dtype), 0.0)
    footprint = weight * np.maximum(col(batch, "weight_copies", 1), 1.0) + x
    # the bytes a warm call can find in the L2: its weight and a shared input
    weight = weight + x
    return _Call(
        batch=batch,
        fig=fig,
        prm={},
        m=m,
        n=n,
        k=k,
        groups=groups,
        per_sm=0.0,
        tm=tm,
        tn=tn,
        rate=rate,
        can_split=can_split,
        choose_split=choose_split,
        choice=choice,
        most=most,
        cluster_m=cluster_m,
        weight=weight,
        warm=warm,
        resident_share=None,
        footprint=footprint,
    )


def _streams(
    c: _Call, units: np.ndarray, nbytes: np.ndarray, out: np.ndarray, resident: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The HBM time of the operands (those resident in the L2 at ``l2_speedup``) and of the
    unhidden epilogue write, at the bandwidth ``units`` concurrent work units draw; the output
    write at ``write_share`` of that rate (a kernel's epilogue stores slower than its loads
    read: docs/time-model.md, "A GEMM's output write at a rate of its own")."""
    prm, fig = c.prm, c.fig
    # a block-scaled stand-in (BLOCK_STAND_IN) hides its output write
    epi = np.where(col(c.batch, "block_stand_in", 0) > 0, 0.0, prm["epilogue_share"])
    bw = prm["eff_memory"] * fig.hbm_bytes_per_s * memory_share(units, fig, prm)
    # the output write at ``write_share`` of the operands' rate (1 where no fit saw it)
    write = out / (bw * prm.get("write_share", 1.0))
    memory = (
        (nbytes - resident - out) / bw
        + (1.0 - epi) * write
        + resident / (prm["l2_speedup"] * fig.hbm_bytes_per_s)
    )
    return memory, epi * write


def _persistent(c: _Call) -> np.ndarray | bool:
    """Rows whose kernel is persistent (:data:`PERSISTENT_DTYPES`): cuBLAS's plain bf16 / fp16
    GEMM, and its per-tensor fp8 GEMM (not CUTLASS's ``scaled_mm``, ``cutlass_dispatch``, nor
    a block-scaled GEMM standing in, :data:`BLOCK_STAND_IN`), on a TMA device."""
    if c.batch.variant or not c.fig.sm90_or_later:
        return False
    if c.batch.dtype == "fp8":
        cutlass = col(c.batch, "cutlass_dispatch", 0) > 0
        return ~cutlass & ~(col(c.batch, BLOCK_STAND_IN, 0) > 0)
    return c.batch.dtype in PERSISTENT_DTYPES


def _tile_work(c: _Call, waves: np.ndarray, walk: np.ndarray) -> dict[str, Any]:
    """The parameter-free part of :func:`_tile_seconds`: ``waves`` tiles walking ``walk`` of
    K each. ``work``: the busiest SM's tensor work in FLOPs at a full SM's rate (the tile's
    share of the rate, below); ``floor``: the least time of the waves' K blocks (None: none);
    ``stage_waves`` and ``stage``: the pipeline fills ``tile_s`` is paid for; ``promote`` and
    ``dequant``: the dtype's CUDA-core work, in the units of its parameter (None: none).

    Tiles resident on an SM at once (RESIDENT_TILES_BY_DTYPE) run ``resident`` at a time, and a
    group of j tiles reaches min(1, j x rate) of the SM's tensor rate: a small tile alone
    leaves the tensor cores idle while it waits on its loads; two fill them."""
    dtype = c.batch.dtype
    resident = np.maximum(np.minimum(waves, RESIDENT_TILES_BY_DTYPE.get(dtype, 1.0)), 1.0)
    full, rest = np.floor(waves / resident), np.mod(waves, resident)
    slots = full * resident / np.minimum(1.0, resident * c.rate) + rest / np.minimum(
        1.0, rest * c.rate + (rest == 0)
    )
    if RESIDENT_TILES_BY_DTYPE.get(dtype, 1.0) == 1.0:
        # one tile an SM at a time: a wave's tiles take the tile's time at its rate, and a
        # balanced kernel's fraction of a wave (BALANCED_WAVES) its fraction of that time
        slots = waves / np.minimum(1.0, c.rate)
    out: dict[str, Any] = {"work": slots * 2.0 * c.tm * c.tn * walk, "floor": None}
    # sgl-kernel's Blackwell scaled_mm walks each K block of a wave in at least
    # CUTLASS_SM100_KBLOCK_CYCLES, whatever its tile
    sm100 = (col(c.batch, "cutlass_dispatch", 0) > 0) & (col(c.batch, CUTLASS_SM100_FIELD, 0) > 0)
    if c.fig.tcgen05 and np.any(sm100):
        out["sm100"] = sm100
        out["floor"] = (
            waves
            * np.ceil(walk / CUTLASS_SM100_KBLOCK)
            * (CUTLASS_SM100_KBLOCK_CYCLES / c.fig.clock_hz)
        )
    # a persistent kernel fills its pipeline and drains its epilogue once (PERSISTENT_DTYPES)
    # Hopper's CUTLASS scaled_mm fills each wave's pipeline with its tile's operands: the
    # fill by the bytes of a stage, (tm + tn) rows of K, a 128 x 128 tile's ``tile_s``
    # (CUTLASS_SM90_STAGE_ROWS)
    disp = (col(c.batch, "cutlass_dispatch", 0) > 0) & (not c.fig.tcgen05)
    out["stage"] = np.where(disp, (c.tm + c.tn) / CUTLASS_SM90_STAGE_ROWS, 1.0)
    out["stage_waves"] = np.where(_persistent(c), 1.0, waves)
    out["promote"] = out["dequant"] = None
    if dtype in ("fp8_block",) and not c.fig.tcgen05:
        # block scaling: after each 128-deep K block a tile multiplies its partial product
        # by the two scales and adds it to its fp32 accumulator on the CUDA cores (the
        # tensor cores' fp8 accumulation is not kept across blocks): ``promote_cycles`` per
        # output element and block on one SM, beside the MMAs of the next block. Not where the
        # MMA applies the scales itself (``tcgen05``: B200's own fit drove the term to about
        # 0, 2.5e-7 cycles against H100's 0.0081)
        out["promote"] = waves * c.tm * c.tn * np.ceil(walk / SCALE_BLOCK_K)
    if dtype in ("w4a16", "w8a16"):
        # weight-only: every tile converts the weights of its columns to bf16 on the CUDA
        # cores as it walks K (``dequant_s`` per element on one SM), once per row tile
        out["dequant"] = waves * c.tn * walk
    return out


def _tile_seconds(c: _Call, w: dict[str, Any], busy: np.ndarray | None = None) -> np.ndarray:
    """The busiest SM's time on its tiles (their :func:`_tile_work` ``w``): the work at the
    tile's share of the SM's tensor rate, ``tile_s`` a wave (the pipeline's fill and the
    epilogue's fixed part; once a call for a persistent kernel, :data:`PERSISTENT_DTYPES`),
    and the dtype's CUDA-core work beside the MMAs; with ``busy``, the
    share of the SMs the call keeps busy, at the clock the chip's power allows them
    (:data:`POWER_LIMITED_DTYPES`)."""
    prm = c.prm
    mma = w["work"] / c.per_sm
    if busy is not None:
        # the clock the chip's power allows (POWER_LIMITED_DTYPES): ``eff_compute`` of the
        # peak with every SM busy, the peak with one
        eff = prm["eff_compute"]
        mma = mma * eff / (1.0 - (1.0 - eff) * busy)
    if w["floor"] is not None:  # sgl-kernel's Blackwell K blocks' least time (_tile_work)
        mma = np.where(w["sm100"], np.maximum(mma, w["floor"]), mma)
    cand = mma + w["stage_waves"] * prm["tile_s"] * w["stage"]
    if w["promote"] is not None:  # block scaling's rescale on the CUDA cores (_tile_work)
        cand = cand + w["promote"] * (prm["promote_cycles"] / c.fig.clock_hz)
    if w["dequant"] is not None:  # weight-only's conversion of the weights (_tile_work)
        cand = cand + w["dequant"] * prm["dequant_s"]
    return cand


def _geometry(c: _Call, rows: np.ndarray) -> dict[str, Any]:
    """The parameter-free part of :func:`_candidates` for calls of ``rows`` rows: each
    candidate's tiles, splits, waves and the K each walks, the SMs it keeps busy, its split-K
    partial sums' bytes, its output's bytes and its tiles' work (:func:`_tile_work`). Reads no
    fit parameter: a fit's predictions of the same rows take it once (``_Call.memo``)."""
    fig, groups = c.fig, c.groups
    sms = fig.sm_count
    row_tiles = np.ceil(np.ceil(rows / c.tm) / c.cluster_m) * c.cluster_m
    tiles = groups * row_tiles * np.ceil(c.n / c.tn)
    fill = np.clip(np.floor(sms / tiles), 1.0, c.most)
    if c.choose_split:
        fill = np.minimum(fill, c.choice)
        # a stream-K kernel (STREAM_K_DTYPES) splits its tiles' K walk over every SM: the
        # candidate of the most splits takes the SMs over the tiles, a fraction
        spread = (
            np.isinf(c.choice) & _persistent(c) & fig.tcgen05 & (tiles < sms)
            & (c.batch.dtype in STREAM_K_DTYPES)
        )  # fmt: skip
        fill = np.where(spread, np.minimum(sms / tiles, c.most), fill)
    splits = np.where((tiles < sms) & (groups <= 1) & c.can_split, fill, 1.0)
    work = tiles * splits / sms
    # a persistent kernel spreads a last partial wave's tiles over every SM (BALANCED_WAVES)
    balanced = _persistent(c) & (work > 1.0) & (c.batch.dtype in BALANCED_WAVES)
    waves = np.where(balanced, work, np.ceil(work))
    walk = np.ceil(c.k / splits)
    power_limited = c.batch.dtype in POWER_LIMITED_DTYPES
    busy = np.minimum(1.0, tiles * splits / sms) if power_limited else None
    w = _tile_work(c, waves, walk)
    shape = np.broadcast_shapes(*(np.shape(x) for x in [*_work_arrays(w), busy] if x is not None))
    return {
        "tile_work": w,
        "busy": busy,
        "shape": shape,
        # every split writes its fp32 partial tile and the reduction reads them all back
        "partials": np.where(splits > 1, splits * tiles * c.tm * c.tn * SPLIT_K_PARTIAL_BYTES, 0.0),
        "out": groups * rows * c.n * col(c.batch, "out_elem", 2.0),
        "units": np.broadcast_to(tiles * splits, shape),
        "reduced": c.choose_split & (splits > 1),
    }


def _work_arrays(w: dict[str, Any]) -> list[Any]:
    """The arrays of a :func:`_tile_work` (those it holds)."""
    names = ("work", "floor", "stage", "stage_waves", "promote", "dequant", "sm100")
    return [w[n] for n in names if w.get(n) is not None]


def _candidates(
    c: _Call, rows: np.ndarray, nbytes: np.ndarray, at: str | None = None
) -> dict[str, np.ndarray]:
    """Every candidate (tile, split) of a call of ``rows`` rows moving ``nbytes``: its compute,
    the units drawing the bandwidth, its partial sums' time, its reduce kernel and its whole
    time (what the library's profiler picks by). ``at``: the name ``rows`` are kept by in
    ``c.memo`` (their :func:`_geometry`; None: not kept)."""
    prm, fig = c.prm, c.fig
    keep = at is not None and c.memo is not None
    g = c.memo.get(at) if keep else None
    if g is None:
        g = _geometry(c, rows)
        if keep:
            c.memo[at] = g
    cand = _tile_seconds(c, g["tile_work"], g["busy"])
    # split-K's reduction: every split writes its fp32 partial tile and the reduction reads
    # them all back (SPLIT_K_PARTIAL_BYTES a padded output element and split) at the class's
    # HBM rate, after the splits' mainloops: memory time (HBM traffic, combined with the
    # mainloops by the class's overlap), weighed by the library against the idle SMs a split
    # fills
    partial_s = np.broadcast_to(
        g["partials"] / (prm["eff_memory"] * fig.hbm_bytes_per_s), cand.shape
    )
    resident_b = np.where(c.warm, c.resident_share * np.minimum(c.weight, nbytes), 0.0)
    # the output tiles' epilogue: a tile writes its output after its mainloop, so the write is
    # not hidden behind that tile's MMAs; the share ``epilogue_share`` of it is not hidden
    # behind other tiles' mainloops either and adds to the time
    out = np.minimum(g["out"], np.maximum(nbytes - resident_b, 0.0))
    # the library's profiler runs the fastest kernel: the tile and split whose whole time
    # (compute, memory at the bandwidth its units draw, the partial sums, the epilogue) is
    # least, not the least compute
    units_all = g["units"]
    memory_all, extra_all = _streams(c, units_all, nbytes, out, resident_b)
    # the reduction's own kernels where a chosen split count splits (SPLIT_K_CHOICES)
    reduce = np.broadcast_to(
        np.where(g["reduced"], SPLIT_K_REDUCE_NODES * prm["fixed_s"], 0.0), cand.shape
    )
    total = _totals(c, cand, memory_all + partial_s, extra_all, reduce)
    return {
        "reduce": reduce,
        "compute": cand,
        "units": units_all,
        "partial": partial_s,
        "total": total,
        "out": out,
        "resident": resident_b,
    }


def _totals(
    c: _Call, cand: np.ndarray, memory: np.ndarray, extra: np.ndarray, reduce: np.ndarray
) -> np.ndarray:
    """Each candidate's whole time, ``combine(cand, memory) + extra + reduce``, what the
    library's profiler picks by (:func:`_best`). Of a class that chooses its split count
    (``choose_split``), a candidate equal in all four to the one before it in its row (a split
    count the row's tiles cannot use, SPLIT_K_CHOICES: the split of the count before) is not
    evaluated and reads +inf: the first of equal candidates is the one an argmin takes, and
    only the chosen candidates' totals are read. Speed only (a fit of SGLang's B200 bf16 or fp8
    rows evaluates about half of its candidates); every chosen candidate and figure the same."""
    p = c.prm["overlap"]
    if not c.choose_split or np.ndim(cand) != 2 or np.shape(cand)[0] < 2:
        return combine(cand, memory, p) + extra + reduce
    cand, memory, extra, reduce = np.broadcast_arrays(cand, memory, extra, reduce)
    same = np.zeros(cand.shape, dtype=bool)
    same[1:] = (
        (cand[1:] == cand[:-1])
        & (memory[1:] == memory[:-1])
        & (extra[1:] == extra[:-1])
        & (reduce[1:] == reduce[:-1])
    )
    keep = ~same
    total = np.full(cand.shape, np.inf)
    total[keep] = combine(cand[keep], memory[keep], p) + extra[keep] + reduce[keep]
    return total


def _best(c: _Call, at: dict[str, np.ndarray]) -> np.ndarray:
    """The candidate each row runs: the fastest, or for a profiled plugin (PROFILED_POW2_M)
    the fastest at the next power of two of its rows, the count the profiler timed."""
    best = np.argmin(at["total"], axis=0)
    if c.batch.dtype in PROFILED_POW2_M:
        m, n, k = c.m, c.n, c.k
        profiled = np.exp2(np.ceil(np.log2(np.maximum(m, 1.0))))
        in_elem = 1.0 if c.batch.dtype == "int8" else 2.0
        row_bytes = k * in_elem + n * col(c.batch, "out_elem", 2.0)
        moved = c.batch.bytes + c.groups * (profiled - m) * row_bytes
        best = np.argmin(_candidates(c, profiled, moved, "profiled")["total"], axis=0)
    return best


def _cuda_core_gemv(
    c: _Call, at: dict[str, np.ndarray], chosen: dict[str, np.ndarray]
) -> dict[str, np.ndarray]:
    """``chosen`` with the CUDA-core GEMV (CUDA_CORE_GEMV_MAX_M) where the tiled kernel's
    padded tensor-core work outlasts its reads of the operands: (m + 1) instructions per
    weight element on GEMV_LANES_PER_CLOCK lanes of every SM, its blocks on all SMs. The
    tiled kernel's work is that of its most split candidate (the least compute)."""
    fig, prm, m = c.fig, c.prm, c.m
    sms = fig.sm_count
    cols = np.arange(len(c.batch))
    least = np.argmin(at["compute"], axis=0)
    share = memory_share(at["units"][least, cols], fig, prm)
    stream = c.batch.bytes / (prm["eff_memory"] * fig.hbm_bytes_per_s * share)
    tiled = at["compute"][least, cols]
    gemv = (m <= CUDA_CORE_GEMV_MAX_M[c.batch.dtype]) & (c.groups <= 1) & (tiled > stream)
    lanes = GEMV_LANES_PER_CLOCK * fig.clock_hz * sms
    return {
        "compute": np.where(gemv, (m + 1.0) * c.n * c.k / lanes, chosen["compute"]),
        "units": np.where(gemv, float(sms), chosen["units"]),
        "partial": np.where(gemv, 0.0, chosen["partial"]),
        "reduce": np.where(gemv, 0.0, chosen["reduce"]),
    }


def _swapped_operands(
    c: _Call, at: dict[str, np.ndarray], best: np.ndarray, chosen: dict[str, np.ndarray]
) -> dict[str, np.ndarray]:
    """``chosen`` with the swapped-operand kernel (:data:`SWAP_AB_TILES`) for a call of at most
    32 rows whose chosen tile's padded rows, multiplied at the chip's tensor rate, outlast the
    read of its operands from HBM (a device whose tensor rate per byte of HBM is under the
    padded tile's intensity), where the swapped kernel is faster: its tiles of the fewest
    rows that hold the call's. ``best``: each row's candidate in ``at`` (:func:`_best`)."""
    if c.batch.dtype not in SWAP_AB_DTYPES or c.batch.variant:
        return chosen
    custom = (col(c.batch, "cutlass_dispatch", 0) > 0) | (col(c.batch, BLOCK_STAND_IN, 0) > 0)
    # (not the rows cuBLAS's GEMV takes where it binds, CUDA_CORE_GEMV_MAX_M)
    gemv = c.m <= CUDA_CORE_GEMV_MAX_M.get(c.batch.dtype, 0)
    few = (c.m <= SWAP_AB_TILES[-1][0]) & (c.groups <= 1) & ~custom & ~gemv
    if not few.any():
        return chosen
    cols = np.arange(len(c.batch))
    tile_rows = np.broadcast_to(c.tm, at["total"].shape)[best, cols]
    rows = np.ceil(c.m / tile_rows) * tile_rows
    # the padded rows' tensor-core work on the whole chip outlasts the operands' read from HBM
    # (a tensor rate per byte of HBM under the padded tile's intensity)
    padded = 2.0 * rows * c.n * c.k * c.groups / (c.prm["eff_compute"] * c.fig.peak(c.batch.dtype))
    bound = few & (padded > c.batch.bytes / (c.prm["eff_memory"] * c.fig.hbm_bytes_per_s))
    if not bound.any():
        return chosen
    reuse = operand_reuse(c.fig)
    tm, tn = (np.asarray([t[i] for t in SWAP_AB_TILES])[:, None] for i in (0, 1))
    # each row's tile: the first that holds its rows
    pick = np.searchsorted(tm[:, 0], c.m, side="left").clip(0, len(tm) - 1)
    swap = dataclasses.replace(
        c, tm=tm[pick][None, :, 0], tn=tn[pick][None, :, 0],
        rate=tile_rate(tm[pick], tn[pick], reuse)[None, :, 0],
        choose_split=False, choice=None, cluster_m=1.0, memo=None,
    )  # fmt: skip
    alt = _candidates(swap, c.m, c.batch.bytes)
    faster = bound & (alt["total"][0] < at["total"][best, cols])
    return {
        name: np.where(faster, alt[name][0], chosen[name])
        for name in ("compute", "units", "partial", "reduce")
    }


def _input_quantization(c: _Call) -> np.ndarray:
    """Seconds of an fp8 GEMM's quantization of its bf16 input: ``quant_passes`` reads of it
    (amax, scaling) and the write of its fp8 copy, which the GEMM then reads (its bytes count
    only that read), and a fixed cost per graph node (``quant_launches``; one per pass where
    not given: a dynamic per-tensor quantization is three, the amax reduction's memset and
    kernel, then the scaling pass); an amax folded into its scale by atomics lasts at least
    their chain (``quant_atomics``)."""
    batch, prm = c.batch, c.prm
    quantized = col(batch, "quantize_input", 1) > 0
    passes = col(batch, "quant_passes", 1)
    # the quantized copy: one byte an element (fp8), half a byte and an fp8 scale per 16
    # (nvfp4)
    written = 0.5 + 1.0 / 16 if batch.dtype == "nvfp4" else 1.0
    qbytes = c.groups * c.m * c.k * (2.0 * passes + written)
    launches = np.asarray(batch.shape.get("quant_launches", passes), dtype=np.float64)
    # seconds a byte of the passes: the class's share of the HBM at ``quant_bytes``, or for
    # vLLM's per-tensor quantize a rate per SM and clock at ``quant_sm_bytes``
    # (QUANT_SM_BYTES_PER_CLOCK), never faster than the HBM's datasheet rate moves the bytes (a
    # device of few bytes a clock and SM, a GDDR card, is bound by its memory: the rule was read
    # on H100 and B200, where the SMs bind)
    sm_bound = col(batch, "quant_sm_bound", 0) > 0
    hbm = c.fig.hbm_bytes_per_s
    sm_rate = c.fig.sm_count * c.fig.clock_hz * QUANT_SM_BYTES_PER_CLOCK
    # vLLM's per-tensor quantize walks each token's row in whole steps of QUANT_ROW_STRIDE
    # elements: its SM time counts the steps' elements, its HBM time the row's (a byte of the
    # row costs the longer of the two, spread over the row's bytes)
    stepped = sm_bound & (col(batch, BLOCK_STAND_IN, 0) == 0)
    walked = np.where(stepped, np.ceil(c.k / QUANT_ROW_STRIDE) * QUANT_ROW_STRIDE, c.k)
    per_byte = np.where(
        sm_bound,
        np.maximum(walked / c.k * prm.get("quant_sm_bytes", 1.0) / sm_rate, 1.0 / hbm),
        prm["quant_bytes"] / (prm["eff_memory"] * hbm),
    )
    # a per-tensor amax whose blocks (one a token: ``quant_atomics``) each fold their maximum
    # into the one fp32 scale with an atomic: the atomics on one address are served one after
    # another at the L2 (``atomic_cycles`` each), so the reduction lasts at least that chain,
    # whatever its read of the input (vLLM: +7 us a thousand tokens at n = k = 128 on H100
    # and B200 alike)
    atomics = col(batch, "quant_atomics", 0) * prm.get("atomic_cycles", 0.0) / c.fig.clock_hz
    # a quantize of small CTAs (``quant_ctas``: SGLang's MLA BMM, PER_TENSOR_BMM_ENGINES),
    # MLA_QUANT_CTA_CYCLES SM cycles each, over all the SMs
    fig = c.fig
    ctas = col(batch, "quant_ctas", 0) * MLA_QUANT_CTA_CYCLES / (fig.clock_hz * fig.sm_count)
    amax_read = c.groups * c.m * c.k * 2.0 * per_byte
    # a two-pass per-tensor quantize (amax, then scaling) on a device without ``tcgen05`` (read
    # on Hopper; an Ada or AMD device timed from such a class takes it too, by its own L2,
    # unvalidated): the scaling pass finds the share of the bf16 input the amax pass left in
    # the L2 (``quant_l2_share`` of the L2 holds it whole, twice that none:
    # ``l2_resident_share``'s ramp) and reads it at ``l2_speedup``,
    # where its bytes had counted at the HBM's rate. Its own share, not the class's
    # ``l2_share`` (the GEMM's warm operands): a class without it (0, every profile not
    # refitted with it) keeps the HBM reads. Read from the H100 rows of few columns (the
    # quantize most of the call): TensorRT-LLM's read +13% / +23% / +32% (signed median) at an
    # input of 4 / 8 / 16 MB, +2% at 32 MB and -6% to -8% above; not on ``tcgen05`` (B200's
    # rows of 4-32 MB read -3% to -10%: no such gain), nor vLLM's SM-bound passes
    # (QUANT_SM_BOUND_ENGINES). docs/time-model.md, "The per-tensor quantize's second read of
    # its input from the L2".
    share = prm.get("quant_l2_share", 0.0)
    reread = (passes >= 2) & ~sm_bound & (not fig.tcgen05) & (share > 0.0)
    l2_s: np.ndarray | float = 0.0
    if np.any(reread):
        x = c.groups * c.m * c.k * 2.0
        hit = np.where(reread, l2_resident_share(x, fig, {"l2_share": share}) * x, 0.0)
        qbytes = qbytes - hit
        l2_s = hit / (prm["l2_speedup"] * hbm)
    # the nvfp4 quantize gives each input row its own small CTA (a thread a 16-element
    # block), as SGLang's fp8 quantize does (QUANT_ROW_CTA_ENGINES): each row costs its CTA's
    # life, ``quant_row_cycles`` SM cycles over all the SMs, beside the bytes it moves
    row_ctas = (col(batch, QUANT_ROW_CTA_FIELD, 0) > 0) | (batch.dtype == "nvfp4")
    # the nvfp4 quantize's CTAs are its grid's where its engine caps it (FP4_QUANT_GRID_ENGINES)
    grid = (col(batch, FP4_QUANT_GRID_FIELD, 0) > 0) & (batch.dtype == "nvfp4")
    row_units = np.where(grid, fp4_quant_ctas(c.m, c.k, fig.sm_count), c.m)
    rows_s = c.groups * row_units * prm.get("quant_row_cycles", 0.0) / (fig.clock_hz * fig.sm_count)
    passes_s = qbytes * per_byte + l2_s + np.where(row_ctas, rows_s, 0.0)
    # SGLang's 1x128 group quantize: a CTA per packed groups, GROUP_QUANT_CTA_CYCLES each
    grouped = col(batch, GROUP_QUANT_CTA_FIELD, 0) > 0
    if grouped.any():
        full = c.m * np.ceil(c.k / SCALE_BLOCK_K) / GROUP_QUANT_MOST_GROUPS
        packed = c.groups * (group_quant_ctas(c.m, c.k) - full)
        cta_s = packed * GROUP_QUANT_CTA_CYCLES / (fig.clock_hz * fig.sm_count)
        passes_s = passes_s + np.where(grouped, cta_s, 0.0)
    return np.where(
        quantized,
        prm["quant_fixed_s"] * launches + passes_s + np.maximum(atomics - amax_read, 0.0) + ctas,
        0.0,
    )


def _scale_conversion(c: _Call) -> np.ndarray:
    """Seconds of the per-call conversion of a block-scaled GEMM's fp32 scales into the layout
    ``tcgen05``'s block-scaled MMA reads (``scale_convert`` rows: DeepGEMM's ``fp8_gemm_nt``
    handed fp32 scales, as SGLang's stand-alone call is; :data:`TRTLLM_BLOCK_FP8_GEMM`):
    DeepGEMM broadcasts the weight's 128 x 128 block scales to one a row
    (``index_select`` of ``arange(n) // 128``) and packs four UE8M0 exponents to an int32,
    MN-major (``get_mn_major_tma_aligned_packed_ue8m0_tensor``), the work SGLang's served path
    does once at load (``transform_scale_ue8m0``). Each of its :data:`CONVERT_KERNELS` kernels
    is one more small node of the call's graph (``node_s``); the packing pass costs
    ``convert_row_cycles`` SM cycles a weight row over all the SMs where the K blocks pack
    whole (``k / 128`` a multiple of 4), and where they do not the padding's
    :data:`PAD_CONVERT_KERNELS` more nodes take its place (SGLang's B200 rows of k = 128, 256
    and 768; their small per-row part, about a tenth of the pass's, left out). Those rows part
    ``node_s`` from the call's fixed cost, so a fit on SGLang's B200 rows reads it. Not on
    Hopper: DeepGEMM's sm90 kernel reads fp32 scales."""
    convert = (col(c.batch, "scale_convert", 0) > 0) & c.fig.tcgen05
    whole = np.mod(np.ceil(c.k / SCALE_BLOCK_K), 4) == 0
    cycles = c.prm.get("convert_row_cycles", 0.0) * c.groups * c.n
    packing = np.where(convert & whole, cycles / (c.fig.clock_hz * c.fig.sm_count), 0.0)
    # its kernels: more nodes of the call's graph, ``node_s`` each, and where the K blocks do
    # not pack whole the padding's (PAD_CONVERT_KERNELS)
    nodes = CONVERT_KERNELS + np.where(whole, 0.0, PAD_CONVERT_KERNELS)
    return packing + np.where(convert, nodes * c.prm.get("node_s", 0.0), 0.0)


def _host_floor(c: _Call) -> np.ndarray:
    """Seconds of a wrapper's host work per call where the call is timed eagerly through it
    (``host_wrapper`` rows: vLLM's block-scaled fp8 GEMM table, every kernel_source): the
    wrapper's Python and dispatch (``host_s`` a call, host seconds, not clocked), and
    ``align_s`` more where the activation's fp32 block scales are not TMA-aligned
    (``scale_unaligned``: vLLM's DeepGEMM wrapper at m not a multiple of 4, 86 -> 94 us on
    H100 and 176 -> 235 us on B200 at the median, where its CUTLASS wrapper and SGLang's and
    TensorRT-LLM's DeepGEMM rows, graph replays, show no step). The host issues while the GPU
    drains its queue, so a call lasts the longer of the two (:func:`gemm_terms`): the rows sit
    flat at the floor (H100 DeepGEMM 83-90 us from n = k = 128 to n = 16,384, k = 4,096 at
    m <= 2,048) until the kernel passes it. 0 on every other row."""
    wrapped = col(c.batch, "host_wrapper", 0) > 0
    unaligned = col(c.batch, "scale_unaligned", 0) > 0
    host = c.prm.get("host_s", 0.0) + np.where(unaligned, c.prm.get("align_s", 0.0), 0.0)
    return np.where(wrapped, host, 0.0)


#: Rows :func:`gemm_terms` times at a time: every candidate of a cuBLAS-style class is a
#: row of its arrays (tiles x split counts, x rows), which past about a thousand rows no longer
#: fit in a core's cache. Speed only: every row's terms are its own (a fit of 12,000 bf16 or
#: fp8 rows took 100-140 ms a prediction whole, 50-55 ms in slices of 1,024 rows; the
#: block-scaled and fp4 classes, of a few candidates, 9-13 ms either way).
SLICE_ROWS = 1024

#: The candidate kernels of the batches :func:`gemm_terms` is given inside
#: :func:`kept_shapes` (a fit's search, which predicts the same rows at every step and only
#: its parameters change): by the batch's id, the batch held with its figures and its slices'
#: :func:`_call_shape` and :func:`_geometry`. Speed only: the same arrays and the same
#: arithmetic in the same order, every figure bit-identical. None outside :func:`kept_shapes`
#: (every other prediction times its batch once).
_KEPT: contextvars.ContextVar[dict[int, tuple[Any, DeviceFigures, list[_Call]]] | None] = (
    contextvars.ContextVar("gemm_kept_shapes", default=None)
)


@contextlib.contextmanager
def kept_shapes() -> Iterator[None]:
    """Keep the candidate kernels of every batch :func:`gemm_terms` times inside the block and
    time each batch again from them (a fit's search: :func:`mlacalc.timemodel.fit.fit_class`);
    dropped at the block's end. The batches are not to change inside it, nor this module's
    tables."""
    token = _KEPT.set({})
    try:
        yield
    finally:
        _KEPT.reset(token)


def _shapes(batch: KernelBatch, fig: DeviceFigures) -> list[_Call]:
    """The :func:`_call_shape` of each slice of :data:`SLICE_ROWS` rows of ``batch`` on ``fig``,
    inside :func:`kept_shapes` the ones kept for it (with a ``memo`` for their geometry)."""
    kept = _KEPT.get()
    held = kept.get(id(batch)) if kept is not None else None
    if held is not None and held[0] is batch and held[1] is fig:
        return held[2]
    n = len(batch)
    pieces = [batch] if n <= SLICE_ROWS else [
        batch.take(slice(i, i + SLICE_ROWS)) for i in range(0, n, SLICE_ROWS)
    ]  # fmt: skip
    shapes = [_call_shape(piece, fig) for piece in pieces]
    if kept is not None:
        shapes = [dataclasses.replace(c, memo={}) for c in shapes]
        kept[id(batch)] = (batch, fig, shapes)  # (the batch held: its id stays its own)
    return shapes


def gemm_terms(
    batch: KernelBatch, fig: DeviceFigures, prm: dict[str, float]
) -> dict[str, np.ndarray]:
    """``compute_s``, ``memory_s`` and ``extra_s`` of a batch of GEMMs: the kernel the
    library runs (its tile, split and GEMV rules), then its streams and extra work
    (:data:`SLICE_ROWS` rows at a time; inside :func:`kept_shapes`, a batch timed again from
    its kept candidates)."""
    shapes = _shapes(batch, fig)
    if len(shapes) == 1:
        return _gemm_terms(_priced(shapes[0], prm))
    sliced = [_gemm_terms(_priced(shape, prm)) for shape in shapes]
    return {name: np.concatenate([s[name] for s in sliced]) for name in sliced[0]}


def _gemm_terms(c: _Call) -> dict[str, np.ndarray]:
    """:func:`gemm_terms` of one slice of rows (its :func:`_priced` candidates ``c``)."""
    batch, fig, prm = c.batch, c.fig, c.prm
    at = _candidates(c, c.m, batch.bytes, "rows")
    best = _best(c, at)
    cols = np.arange(len(batch))
    chosen = {name: at[name][best, cols] for name in ("compute", "units", "partial", "reduce")}
    if CUDA_CORE_GEMV_MAX_M.get(batch.dtype, 0):
        chosen = _cuda_core_gemv(c, at, chosen)
    chosen = _swapped_operands(c, at, best, chosen)
    if fig.kind == "cpu":
        # a CPU has no output tiles to quantize: its cores share the whole product
        zeros = np.zeros(len(batch))
        chosen = {
            "compute": batch.flops / (prm["eff_compute"] * fig.peak(batch.dtype)),
            "units": np.full(len(batch), np.inf),
            "partial": zeros,
            "reduce": zeros,
        }
    memory, extra = _streams(c, chosen["units"], batch.bytes, at["out"], at["resident"])
    extra = extra + chosen["reduce"]
    # the split-K partial sums are HBM traffic: memory time, not compute
    memory = memory + chosen["partial"]
    if batch.dtype.startswith("fp8") or batch.dtype == "nvfp4":
        extra = extra + _input_quantization(c)
    if batch.dtype == "fp8_block":
        extra = extra + _scale_conversion(c)
        host = _host_floor(c)
        if host.any():
            # the host's work and the kernels' run side by side: the call lasts the longer
            gpu = prm["fixed_s"] + combine(chosen["compute"], memory, prm["overlap"]) + extra
            extra = extra + np.maximum(host - gpu, 0.0)
    return {"compute_s": chosen["compute"], "memory_s": memory, "extra_s": extra}
