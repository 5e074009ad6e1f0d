"""The ``moe`` class of the time model: the fused routed-expert layer of one rank.

Terms: two grouped GEMMs (FC1: hidden -> (gate and) up, FC2: intermediate -> hidden) with
per-expert row tiles (the library's fastest, or the one the call fixes: ``row_tile``, the
Triton MoE), each over the touched experts' weights at the bandwidth its tiles draw; a cost
per wave of tiles (``tile_s``); the main loops of each GEMM's first wave beyond one
(``first_wave``); block-scaled fp8's rescale of each K block (``promote_cycles``); the routing
of every (token, expert) pair (``route_s``); the selection rounds of a top-k above the fused
routing's limit (``select_s``); a cost per expert of the rank
(``expert_s``) and the streaming passes around the GEMMs (``act_passes``). The figures behind
each rule are in docs/decisions.md ("Time model").
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from mlacalc.timemodel.device import DeviceFigures
from mlacalc.timemodel.gemm_time import BLOCK_SCALED_MMA, BLOCK_SCALED_MMA_ROWS
from mlacalc.timemodel.shared import (
    SCALE_BLOCK_K,
    col,
    hbm_per_sm_ratio,
    memory_share,
    operand_reuse,
    tensor_per_sm_ratio,
    tile_arrays,
    tile_rate,
)
from mlacalc.words.dtypes import WEIGHT_ELEMENT_BYTES, WEIGHT_SCALE_BYTES
from mlacalc.words.kernels import MIN_LATENCY_MOE, TRTLLM_GEN_MOE, KernelBatch

__all__ = [
    "ALL_PAIRS_MOE",
    "BF16_RATE_MOE",
    "CUTLASS_ROWS_MOE",
    "DEEPEP_GROUPED_GEMM",
    "DEEPEP_KERNEL",
    "DEEPEP_RECEIVED",
    "DEEPEP_ROUTED",
    "DEEPEP_STEP",
    "DEEPGEMM_MOE",
    "ENGINE_MOE_KERNEL",
    "EP_MAP_MOE",
    "EP_ROW_MOE",
    "FLASHINFER_HOPPER_TILE",
    "FLASHINFER_MXFP4_DTYPES",
    "FLASHINFER_MXFP4_PAD",
    "FLASHINFER_TILED_KERNELS",
    "FLASHINFER_TILE_UP",
    "FUSED_SORT_TOKENS",
    "FUSED_SORT_TOPK",
    "FUSED_TOPK_MAX",
    "GEN_INTER_PAD",
    "GEN_ROWS8_MOE",
    "GEN_TOKENS_MOE",
    "GEN_TOKEN_KNEE",
    "HIDDEN_PAD_MOE",
    "INTER_PAD_MOE",
    "MARLIN_CALL_EXPERTS",
    "MARLIN_COLS",
    "MARLIN_TILE",
    "MMA_SYNC_MOE",
    "MOE_WEIGHT_BYTES",
    "PAIR_STREAM_DTYPES",
    "PAIR_STREAM_MOE",
    "PAIR_TILE_MOE",
    "RATE_DTYPE",
    "REREAD_COLS",
    "ROWS_SPREAD",
    "ROW_TILES_COL",
    "SIBLING_MOE_BUILDS",
    "TRITON_DEFAULT_TILE",
    "TRITON_MOE_KERNELS",
    "TRITON_TUNED_MOE",
    "TRTLLM_CUTLASS_MOE",
    "TRTLLM_GEN_FP4",
    "TRTLLM_GEN_MAX_TILE",
    "TRTLLM_GEN_MIN_TILE",
    "TRTLLM_GEN_TILE",
    "TRTLLM_MOE",
    "TRTLLM_OWN_MOE",
    "TUNED_MOE",
    "TUNED_STAND_IN",
    "UNALIGNED_K_MOE",
    "WARP_LOADED_MOE",
    "WEIGHTS_HELD",
    "engine_moe_tiles",
    "flashinfer_cutlass_moe",
    "flashinfer_gen_tile",
    "flashinfer_hopper_tiled",
    "gen_pads",
    "marlin_experts",
    "marlin_row_tile",
    "moe_terms",
    "reread_bytes",
    "spread_row_tiles",
    "triton_fused_moe",
    "triton_moe_default_tile",
    "triton_moe_row_tile",
    "triton_moe_tuned",
    "trtllm_gen_row_tile",
    "vllm_expert_map",
    "wave_drawn",
    "whole_row_tiles",
]

#: The tensor rate a MoE dtype multiplies at where it is not its own name: mxfp4 weights with
#: mxfp8 activations run Blackwell's mixed-format MMA (``kind::f8f6f4``), whose rate is the fp8
#: rate whatever the narrower operand (only both operands in fp4 doubles it).
RATE_DTYPE = {"w4a8_mxfp4": "fp8"}

#: The shape column of a MoE that multiplies at no more than the device's bf16 rate whatever its
#: operands (:func:`moe_terms`): TensorRT-LLM-gen's block-scaled fp8 MoE (FlashInfer's
#: ``trtllm_fp8_block_scale_moe``, SGLang's and vLLM's B200 class of that dtype,
#: :data:`TRTLLM_MOE`). Its weights carry one fp32 scale per 128 x 128 block (DeepSeek's
#: format), which ``tcgen05``'s block-scaled MMA cannot take (its scales are 8-bit, one per 16 or
#: 32 elements), so each 128-deep K block's product is rescaled into the accumulator off the
#: MMA (as recalled: no copy of the kernels at hand). The measured B200 rows run at the bf16 MoE's
#: rate: at 8,192 tokens and more, EP and TP 1, balanced, SGLang's 806 TFLOPS and vLLM's 804-821
#: against the same kernels' bf16 at 969 and 850 and vLLM's per-tensor fp8 at 1,570 (DeepGEMM's
#: block-scaled fp8 under TensorRT-LLM, whose scales are 8-bit powers of two: 1,684); fitted at
#: the fp8 rate these classes held 0.20-0.21 of it, the same engines' bf16 classes 0.49-0.66
#: (docs/time-model.md, "TensorRT-LLM-gen's block-scaled fp8 MoE at the bf16 rate").
BF16_RATE_MOE = "bf16_rate"

#: The shape column of a MoE that streams ``pair_passes`` bf16 passes over every routed (token,
#: top-k) pair entering the rank, local or not (:func:`moe_terms`): the same kernel as
#: :data:`BF16_RATE_MOE`, FlashInfer's TensorRT-LLM block-scaled fp8 MoE (SGLang's and vLLM's
#: B200 ``fp8_block`` class and the ``flashinfer_trtllm`` variants of it). Only its rows keep a
#: floor per routed pair at high EP: at 16,384 tokens of top-8 over 256 experts, TP 1, EP 256
#: (one local expert), balanced, they take 0.94-1.24 ps a pair and unit of hidden +
#: intermediate (SGLang and vLLM, five shapes), within 11% of their EP 64 time, where every
#: other kernel's rows of those calls take 0.14-0.44 (TensorRT-LLM's own bf16, fp8, block-scaled
#: and nvfp4 on H100 and B200; FlashInfer's TensorRT-LLM bf16 and nvfp4 on B200) or 0.38-0.73
#: (FlashInfer's CUTLASS MoE on H100), still falling with EP; the Triton fused MoE's 1.8-2.5
#: are its passes over every pair (:data:`ALL_PAIRS_MOE`). A class whose rows lack the column
#: does not fit ``pair_passes`` (no row responds: ``fit._informed``) and keeps the default 0
#: (docs/time-model.md, "Every routed pair of TensorRT-LLM-gen's block-scaled fp8 MoE"). The
#: library's nvfp4 kernel carries it too, at 0.41-0.45 passes (:data:`PAIR_STREAM_DTYPES`).
#: The block-scaled kernel's rows (those with :data:`BF16_RATE_MOE` as well) also take
#: ``pair_fc1_passes`` bf16 passes over FC1's output row ((gate and) up, the rank's padded
#: intermediate) of every routed pair: their cost a routed pair grows with the rank's
#: intermediate six to seven times as fast as with the hidden size (SGLang's B200 rows at EP
#: 32-256, 16,384 tokens: 2.6-3.5 ps a pair and element of intermediate, 0.43-0.47 of hidden;
#: the nvfp4 kernel's rows none), its activation kernel apart from the GEMMs over every routed
#: pair's row as recalled (docs/time-model.md, "FC1's row of every routed pair in
#: TensorRT-LLM-gen's block-scaled fp8 MoE").
PAIR_STREAM_MOE = "pair_stream"

#: The dtypes of FlashInfer's TensorRT-LLM-gen MoE whose rows and steps carry
#: :data:`PAIR_STREAM_MOE`: the block-scaled fp8 kernel (above) and the nvfp4 one, whose SGLang
#: rows at 4,096 tokens and more went from +5% at EP 1 to -18% at EP 256 (signed median; vLLM's
#: -9%) without it (docs/time-model.md, "Every routed pair of TensorRT-LLM-gen's nvfp4 MoE").
PAIR_STREAM_DTYPES = ("fp8_block", "nvfp4")

#: The shape column of a MoE whose grouped GEMMs are TensorRT-LLM's own (its CUTLASS MoE, its
#: DeepGEMM block-scaled fp8 MoE; set by the mapping on those rows and by
#: :func:`engine_moe_tiles` on a TensorRT-LLM step), which on ``tcgen05`` pick their tile from a
#: list holding the SM pair's 256 x 256 tile, all at the operand reuse of the device's rate per
#: SM (:data:`_MOE_PAIR`). Not FlashInfer's TensorRT-LLM-gen nor its CUTLASS MoE under SGLang and
#: vLLM: refitted with the rule, vLLM's B200 classes of those kernels got worse (bf16 7.0% ->
#: 7.2%, fp8 7.5% -> 7.7%, block-scaled fp8 8.2% -> 8.8% median; docs/time-model.md, "The SM
#: pair's 256 x 256 tile of TensorRT-LLM's grouped GEMMs"). On every generation the same
#: column carries ``token_s``: one SM's work on each hidden element of every token entering the
#: rank, local experts or not (its per-token kernels, the finalize writing every token's output
#: row, as recalled: no copy of the source at hand). A step of the Hopper classes TensorRT-LLM
#: times on its own kernels (:data:`TRTLLM_OWN_MOE`) takes it too. The H100 and B200 fits, in
#: HBM passes, differed by the devices' bandwidth (1.7 and 3.6 bf16 passes) and agreed in time
#: (1.06 and 1.00 ps per token and hidden element): work on the SMs, not a stream
#: (docs/time-model.md, "Every token's hidden row in TensorRT-LLM's own MoE"). It carries
#: ``row_s`` too: one SM's work on each (token, expert) row of the rank whatever the row's width
#: (its permutation, activation and finalize kernels' CTA a row, as recalled), fitted in the
#: per-tensor fp8 and B200 nvfp4 classes (docs/time-model.md, "A cost per row of the rank in
#: TensorRT-LLM's own MoE").
PAIR_TILE_MOE = "pair_tile"

#: Shape column of a MoE batch (1.0) whose kernel is FlashInfer's CUTLASS MoE
#: (:func:`flashinfer_cutlass_moe`: TensorRT-LLM's MoE wrapped, its permutation, activation and
#: finalize kernels with it, as recalled), so its rows pay TensorRT-LLM's cost per (token,
#: expert) row of the rank (``row_s``) and per token's hidden row (``token_s``) as
#: :data:`PAIR_TILE_MOE` rows do, without the SM pair's tile. Its own classes (SGLang's,
#: vLLM's) keep both 0; the terms count where TensorRT-LLM's class stands in for it
#: (``engine_profiles.with_generation_kernels``: vLLM's Hopper block-scaled fp8 from B200;
#: docs/time-model.md, "FlashInfer's CUTLASS MoE pays TensorRT-LLM's costs per row and per
#: token").
CUTLASS_ROWS_MOE = "cutlass_rows"

#: Output tiles of the grouped GEMMs: the GEMM tiles and two short ones for experts with few
#: rows (16 and 32 rows by 128 columns), each at the share of the tensor rate its intensity
#: reaches (:func:`~mlacalc.timemodel.shared.tile_rate`), as arrays of (tile, row).
_MOE_TILES = tuple(
    (tm, tn, tile_rate(tm, tn))
    for tm, tn in (
        (16, 128),
        (32, 128),
        (64, 64),
        (64, 128),
        (128, 64),
        (128, 128),
        (128, 256),
        (256, 128),
        # tiles taken only where a call fixes them: the Triton MoE's small default tile (16 x
        # 32), Marlin's 8- and 48-row blocks
        (16, 32),
        (8, 128),
        (48, 128),
        # ``tcgen05``'s two-SM tile (:data:`_MOE_PAIR`)
        (256, 256),
    )
)
_MOE_TM, _MOE_TN, _MOE_RATE = tile_arrays(_MOE_TILES)
#: the tiles a library picks from when the call fixes none (all but the Triton MoE's own and
#: the two-SM tile)
_MOE_FREE = (np.arange(len(_MOE_TILES)) < len(_MOE_TILES) - 4)[:, None]
#: The 256 x 256 tile of an SM pair (``tcgen05.mma.cta_group::2``): the pair's MMA takes 256
#: rows and each SM stages half of the B operand, so each SM's 128 x 256 share of the output
#: reuses its operand bytes as a 256 x 256 tile would (intensity 128), the full rate of a
#: device whose tensor rate per SM is twice Hopper's
#: (:func:`~mlacalc.timemodel.shared.operand_reuse`). A library grouped GEMM free to pick its
#: tile on ``tcgen05`` takes it, with that operand reuse on every tile (:func:`moe_terms`).
_MOE_PAIR = (np.arange(len(_MOE_TILES)) == len(_MOE_TILES) - 1)[:, None]
#: the 8 x 128 tile, taken where a call fixes 8 rows (Marlin's block with its columns,
#: TensorRT-LLM-gen's smallest row tile without: :data:`TRTLLM_GEN_MIN_TILE`)
_MOE_8 = (_MOE_TM == 8) & (_MOE_TN == 128)
_MOE_GEMMS = np.arange(2)[:, None]


#: How the rows of the experts other than the busiest spread, a shape column: 1 where the
#: routing is a random sample (a model step's ``routing="random"``, ``serving.gpu_step``: each
#: expert's rows spread about their mean, :func:`spread_row_tiles`), 2 where it is balanced
#: (whole rows, :func:`whole_row_tiles`: of a mean of 16.25, a quarter of the experts get 17
#: rows and the rest 16), set by a model step of balanced routing and by the mapping on a
#: measured balanced row (round-robin loads: each expert ``floor`` or ``ceil`` of the mean,
#: :mod:`mlacalc.measured.moe_routing`), so the two count the same tiles. A row without it
#: (a power-law row of TensorRT-LLM-gen's kernels, which routes from the collector's logits)
#: gives every expert the mean, padded to whole tiles
ROWS_SPREAD = "rows_spread"

#: The prefix of a measured power-law row's shape columns ``row_tiles_<tm>``: the expected
#: row tiles of ``tm`` rows over the rank's experts, each expert's rows padded to whole tiles
#: on its own (the mapping's routing draws, :func:`~mlacalc.measured.moe_routing.rank_loads`).
#: :func:`moe_terms` takes them in place of its own count, which gives every expert but the
#: busiest the same share of the rest: a power law's loads spread from one row to most of the
#: tokens, so that count misses the padding of most experts' last tile.
ROW_TILES_COL = "row_tiles_"

#: A spread of rows this many tiles wide (standard deviations over the tile's rows) or more
#: leaves the rows' remainder over a tile uniform to within 1% (its departure falls as
#: ``exp(-2 pi^2 (sd / tm)^2)``): the expected tiles are then ``E[R] / tm + (tm - 1) / (2 tm)``
#: without a sum over the distribution
_UNIFORM_SPREAD = 0.5

#: Expected tiles (sums over a distribution, :func:`spread_row_tiles`) carry rounding of a
#: few parts in 10^16 that depends on the rows evaluated beside them (a matrix product's or a
#: pairwise sum's order); a count of waves within this many waves over a whole one is that
#: whole one, so a row's time does not depend on its neighbours (a step timed alone and in a
#: search's array once differed by a wave: 132 expected tiles of 1.0000000000002 on 132 SMs)
_WAVE_NOISE = 1e-9


#: Up to this mean less one the rows' distribution is summed term by term (Poisson); past it,
#: where its skew is under 1/16, by the normal with a continuity correction
_POISSON_SUMMED = 256.0


def _normal_above(z: np.ndarray) -> np.ndarray:
    """``P(Z > z)`` of a standard normal (Abramowitz and Stegun's 7.1.26 for erfc, within
    1.5e-7)."""
    x = np.abs(z) / np.sqrt(2.0)
    t = 1.0 / (1.0 + 0.3275911 * x)
    poly = t * (
        0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429)))
    )
    half = 0.5 * poly * np.exp(-x * x)
    return np.where(z >= 0, half, 1.0 - half)


def spread_row_tiles(tm: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Expected tiles of ``tm`` rows (arrays of (tile, 1)) of a touched expert whose rows are
    a random sample of mean ``rows`` (one array of rows), each at least one: ``R = 1 +
    Poisson(rows - 1)`` rows, so ``E[ceil(R / tm)] = sum over j >= 0 of P(R > j tm)``, as an
    array of (tile, row). Unlike ``ceil(rows / tm)`` it rises smoothly with the mean: at a
    mean of 16.25 rows about half the experts have more than 16 (two 16-row tiles), where the
    equal share gave every expert 17 rows and two tiles, twice the tiles of 16.0 rows. Summed
    term by term up to :data:`_POISSON_SUMMED`, over the normal's window past it, and in
    closed form where the spread is :data:`_UNIFORM_SPREAD` tiles or wider."""
    rows = np.asarray(rows, dtype=np.float64)
    tm = np.asarray(tm, dtype=np.float64).reshape(-1)
    lam = np.maximum(rows - 1.0, 0.0)
    mu, sd = 1.0 + lam, np.sqrt(lam)
    out = mu[None, :] / tm[:, None] + ((tm - 1.0) / (2.0 * tm))[:, None]
    small = lam < _POISSON_SUMMED
    if small.any():
        n = np.arange(int(_POISSON_SUMMED + 10.0 * np.sqrt(_POISSON_SUMMED) + 12.0))
        log_fact = np.concatenate(([0.0], np.cumsum(np.log(np.arange(1.0, len(n))))))
        l_row = lam[small][:, None]
        with np.errstate(divide="ignore", invalid="ignore"):
            pmf = np.exp(n * np.log(l_row) - l_row - log_fact[n])
        pmf = np.where(l_row > 0, pmf, (n == 0).astype(np.float64))
        ceil_n = np.ceil((1.0 + n)[None, :] / tm[:, None])  # (tile, n)
        # (row, n) @ (n, tile), transposed: the same sums as ceil_n @ pmf.T, bit for bit, at a
        # tenth of the time (a search's thousands of rows took ~14 ms a call the other way)
        out[:, small] = ((pmf / pmf.sum(axis=1, keepdims=True)) @ ceil_n.T).T
    for t_i, t in enumerate(tm):
        narrow = np.nonzero(~small & (sd < _UNIFORM_SPREAD * t))[0]
        if not narrow.size:
            continue
        m, s = mu[narrow][:, None], sd[narrow][:, None]
        # P(R > j t) is 1 below ten deviations under the mean (``below`` such j past j = 0)
        below = np.maximum(np.floor((m - 10.0 * s - 0.5) / t), 0.0)
        j = below + 1.0 + np.arange(int(np.ceil(20.0 * s.max() / t)) + 2)[None, :]
        above = _normal_above((j * t + 0.5 - m) / s)
        out[t_i, narrow] = 1.0 + below[:, 0] + above.sum(axis=1)
    return out


def whole_row_tiles(tm: np.ndarray, rest: np.ndarray) -> np.ndarray:
    """Expected tiles of ``tm`` rows (arrays of (tile, 1)) of a touched expert of a balanced
    routing whose experts share ``rest`` rows a piece on average in whole rows (arrays of rows):
    a share ``frac`` of them ``floor(rest) + 1`` rows, the others ``floor(rest)``, each padded
    to whole tiles on its own; at least one row (a touched expert has one). The round-robin
    loads of a measured balanced row are these exactly (expert ``e`` of ``E`` takes assignment
    ``j`` where ``j mod E = e``), and a model step of balanced routing takes them too
    (:data:`ROWS_SPREAD` 2)."""
    rest = np.maximum(rest, 1.0)
    low, frac = np.floor(rest), rest - np.floor(rest)
    return (1.0 - frac) * np.ceil(low / tm) + frac * np.ceil((low + 1.0) / tm)


def _moe_m_tiles(
    tm: np.ndarray,
    active: np.ndarray,
    pairs: np.ndarray,
    top: np.ndarray,
    spread: np.ndarray | None = None,
) -> np.ndarray:
    """Row tiles of ``tm`` rows a grouped GEMM runs over the rank's experts: the most-loaded
    expert's ``top`` rows, the other ``active - 1`` experts sharing the rest equally (each
    expert's rows padded to whole tiles); by a row's :data:`ROWS_SPREAD` (``spread``), each
    a random sample of that mean (:func:`spread_row_tiles`) or whole rows
    (:func:`whole_row_tiles`)."""
    rest = np.maximum(pairs - top, 0.0) / np.maximum(active - 1.0, 1.0)
    per = np.ceil(rest / tm)
    if spread is None:
        return np.ceil(top / tm) + (active - 1.0) * per
    whole = spread == 2
    if whole.any():  # balanced: whole rows, a share of the experts one more than the rest
        per = np.where(whole, whole_row_tiles(tm, rest), per)
    sampled = spread == 1
    if sampled.any():
        per = np.array(np.broadcast_to(per, (len(tm), len(rest))))
        per[:, sampled] = spread_row_tiles(tm, np.maximum(rest[sampled], 1.0))
    return np.ceil(top / tm) + (active - 1.0) * per


def triton_moe_row_tile(tokens: np.ndarray, topk: np.ndarray, experts: np.ndarray) -> np.ndarray:
    """The row tile the Triton MoE kernel (GPT-OSS's MXFP4 experts) fixes from the call, not
    from the rows an expert gets: as if every (token, top-k) pair were spread over the rank's
    ``experts`` (block_m = the next power of 2 of ``tokens x topk / experts``, kept in
    16..128: the rule of triton_kernels' opt_flags as recalled, no copy of its source at
    hand). The measured H100 rows step up where that ratio passes 16 and 64, at the same
    ratio for every expert count and EP size."""
    per_expert = np.maximum(np.floor(tokens * topk / np.maximum(experts, 1.0)), 1.0)
    return np.clip(2.0 ** np.ceil(np.log2(per_expert)), 16.0, 128.0)


#: The MoE dtypes whose TensorRT-LLM-gen kernels (Blackwell) size their row tile by the mean
#: load, :func:`trtllm_gen_row_tile`: 4-bit weights with fp4 or mxfp8 activations
TRTLLM_GEN_FP4 = ("nvfp4", "w4a8_mxfp4")

#: The largest row tile of TensorRT-LLM-gen's MoE kernels by dtype (:func:`trtllm_gen_row_tile`),
#: read from the B200 tables (FlashInfer's TensorRT-LLM MoE under SGLang and vLLM; TensorRT-LLM's
#: own w4a8 and min-latency nvfp4 rows), each the cap that fits its rows best, refitted on the
#: same rows (median / p90): the fp4 kernels 256 rows (SGLang nvfp4 14.1% / 38.3% with no fixed
#: tile -> 8.6% / 27.5%); the weight-only kernels (bf16 activations, 4-bit weights) 32 (SGLang
#: int4 7.8% / 25.4% -> 6.3% / 21.9%, MXFP4 7.3% / 23.0% -> 7.1% / 22.4%, vLLM's MXFP4 8.1% /
#: 19.8% -> 6.4% / 21.9%; with 16 alone 7.0%, 7.1%, 7.3%; with 64 6.4%, 9.0%, 7.9%; with 128
#: 9.1%, 9.5%, 10.8%; with 256 12.5%, 11.9%, 13.3%). The kernels' own lists are not at hand.
#: The block-scaled fp8 kernel (SGLang's and vLLM's B200 class of that dtype) 64 rows, the
#: range its callers clamp ``tile_tokens_dim`` to for it (8-64, as recalled: no copy of their
#: source at hand) and the cap that fits both engines' rows best (the table kind's median / p90,
#: SGLang then vLLM: the library's tile 10.0% / 28.8% and 7.9% / 27.4%; with 32 rows 9.8% /
#: 27.7% and 7.5% / 25.9%; with 64 9.7% / 26.5% and 7.4% / 25.5%; with 128 9.3% / 25.9% and
#: 7.8% / 27.8%): the rows of
#: ranks that compute almost nothing grow with the tokens entering the rank as a tile sized by
#: every routed pair grows (docs/time-model.md, "FlashInfer's block-scaled fp8 MoE sizes its row
#: tile by the mean load"). Its bf16 and per-tensor fp8 kernels fit better with a cap of 128
#: too but are left with the fastest tile: their classes from H100's fit do worse
#: (docs/time-model.md, "Where it is still off").
TRTLLM_GEN_MAX_TILE = {
    "nvfp4": 256.0,
    "w4a8_mxfp4": 256.0,
    "w4a16": 32.0,
    "w4a16_mxfp4": 32.0,
    "fp8_block": 64.0,
}

#: The row tiles FlashInfer's TensorRT-LLM-gen MoE of a dtype runs one size up (its SGLang and
#: vLLM B200 rows): the nvfp4 kernel's rows whose mean load (:func:`trtllm_gen_row_tile`) asks
#: for 128 rows take the 256-row tile's time. Read from the tables (SGLang's and vLLM's nvfp4
#: rows of that band were -12% and -11% signed with 128, +1% with 256, every other band within
#: 5%); TensorRT-LLM's own min-latency nvfp4 rows of that band follow 128 (+0.7%), so it is the
#: library's build, not the kernel family (docs/time-model.md, "FlashInfer's nvfp4 MoE runs no
#: 128-row tile").
FLASHINFER_TILE_UP = {"nvfp4": {128.0: 256.0}}


def flashinfer_gen_tile(rows: np.ndarray, dtype: Any) -> np.ndarray:
    """``rows`` (a :func:`trtllm_gen_row_tile`) of FlashInfer's TensorRT-LLM-gen MoE of
    ``dtype`` (one, or one a row: ``""`` for a row of another kernel), its tiles one size up
    where :data:`FLASHINFER_TILE_UP` says so."""
    out = np.asarray(rows, dtype=np.float64)
    dtypes = np.broadcast_to(np.asarray(dtype, dtype=str), out.shape)
    for name, ups in FLASHINFER_TILE_UP.items():
        for tile, up in ups.items():
            out = np.where((dtypes == name) & (out == tile), up, out)
    return out


#: The smallest row tile of TensorRT-LLM-gen's MoE kernels (:func:`trtllm_gen_row_tile`): 8
#: rows (``tile_tokens_dim`` clamped to 8 at least, as recalled: no copy of the source at hand;
#: the kernels put the experts' weights on the MMA's 128 rows and the tokens on its N, which
#: ``tcgen05`` takes down to 8), timed as the 8 x 128 tile (:data:`_MOE_TILES`). Below 8 pairs
#: an expert the measured B200 rows of the fp4 classes of those kernels (TensorRT-LLM, SGLang,
#: vLLM; nvfp4, w4a8 MXFP4) were predicted slow with a floor of 16 rows: signed median -1% to
#: +13% by class and load (0-1, 1-2, 2-4, 4-8 pairs), the most at one pair and less; with 8 rows
#: and the classes refitted +0% to +12%, every bin under 4 pairs nearer 0
#: (docs/time-model.md, "TensorRT-LLM-gen's 8-row tile").
TRTLLM_GEN_MIN_TILE = 8.0

#: The shape column of a MoE of TensorRT-LLM-gen's kernels whose tile the model leaves to the
#: library's list (not :data:`TRTLLM_GEN_TILE`'s): FlashInfer's TensorRT-LLM MoE of bf16 and
#: per-tensor fp8 (SGLang's and vLLM's B200 classes of those dtypes, :data:`TRTLLM_MOE`; set by
#: the mapping on those rows and by :func:`engine_moe_tiles` on a step; its block-scaled fp8
#: kernel had it too until it took the mean-load tile, :data:`TRTLLM_GEN_MAX_TILE`). The same
#: kernels' smallest row tile, 8 rows (:data:`TRTLLM_GEN_MIN_TILE`), is among their tiles
#: (:func:`moe_terms`). Their rows of one token were predicted 15-30% slow (signed
#: median: vLLM bf16 +15.3%, SGLang block-scaled fp8 +29.4%); with the tile and the classes
#: refitted they move up to 2.5 points (SGLang bf16's 0.3 away: the fixed cost rose), those of
#: 2-16 tokens 0.7-1.8 points toward 0; the classes' fitted medians fall 0.1-0.5 points,
#: leaving the device out is mixed (docs/time-model.md, "TensorRT-LLM-gen's 8-row tile").
GEN_ROWS8_MOE = "gen_rows8"

#: shape column marking FlashInfer's TensorRT-LLM-gen MoE (SGLang's and vLLM's B200 rows): its
#: few-token calls grow by about 100 ns a token up to :data:`GEN_TOKEN_KNEE` tokens whatever the
#: experts' bytes, then stay (``sort_pair_s`` a routed pair up to the knee)
GEN_TOKENS_MOE = "gen_tokens"
GEN_TOKEN_KNEE = 64.0

#: The shape column of a MoE of TensorRT-LLM-gen's kernels (TensorRT-LLM's B200 w4a8 MXFP4 and
#: min-latency nvfp4 rows, FlashInfer's TensorRT-LLM MoE of every dtype under SGLang and vLLM;
#: set by the mapping on those rows and by :func:`engine_moe_tiles` on a step of those classes):
#: the rows its GEMMs pad a rank's intermediate size up to a multiple of, in FC1's columns and
#: FC2's K (:func:`moe_terms`; 0 where none). Their B200 rows at 16,384 tokens, EP 1, balanced,
#: take one time at every intermediate a rank of 128 or less (SGLang's block-scaled fp8 at hidden
#: 2,048: 596-603 us at 16 to 128; bf16 438-461 us; TensorRT-LLM's min-latency nvfp4 at hidden
#: 4,096: 436 and 431 us at 64 and 128) and step by 128 past it (block-scaled fp8 at hidden 2,048:
#: 900 and 905 us at 192 and 256, 1,203 at 384; at hidden 6,144, 2,073 and 2,068 at 160 and 256,
#: 2,703 at 320 against 2,707 for 384 by the steps): docs/time-model.md, "TensorRT-LLM-gen's
#: MoE pads a rank's intermediate to a multiple of 128"
INTER_PAD_MOE = "inter_pad"
GEN_INTER_PAD = 128.0

#: FlashInfer's TensorRT-LLM-gen MoE of MXFP4 weights (the dtypes of
#: :data:`FLASHINFER_MXFP4_DTYPES`; SGLang's and vLLM's B200 rows and steps): the engines hand it
#: each expert's weights padded to a multiple of :data:`FLASHINFER_MXFP4_PAD` in the rank's
#: intermediate (its :data:`INTER_PAD_MOE`) and in the hidden size (:data:`HIDDEN_PAD_MOE`: FC1's
#: K, FC2's columns, and the padding's weight bytes, :func:`_padded_weight_bytes`), as recalled
#: (the engines' MXFP4 weight loaders round both up to 256 for these kernels; no copy of their
#: source at hand). Their rows at gpt-oss's hidden 2,880 take one time at 90 and 180 a rank and
#: 1.38-1.47x that at 360, and the hidden 2,880 shapes were 8-12% fast against the 3,584 one:
#: docs/time-model.md, "FlashInfer's MXFP4 MoE pads hidden and intermediate to 256"
FLASHINFER_MXFP4_PAD = 256.0
FLASHINFER_MXFP4_DTYPES = ("w4a16_mxfp4", "w4a8_mxfp4")
HIDDEN_PAD_MOE = "hidden_pad"


def gen_pads(dtype: Any, flashinfer: Any, gen: Any = True) -> tuple[np.ndarray, np.ndarray]:
    """The (intermediate, hidden) pads (:data:`INTER_PAD_MOE`, :data:`HIDDEN_PAD_MOE`) of a MoE
    of ``dtype`` (one, or one a row) on TensorRT-LLM-gen's kernels, where ``gen`` (TensorRT-LLM's
    own) or ``flashinfer`` (FlashInfer's build): :data:`GEN_INTER_PAD` and no hidden pad, but
    :data:`FLASHINFER_MXFP4_PAD` in both for FlashInfer's MXFP4 kernels
    (:data:`FLASHINFER_MXFP4_DTYPES`); 0 and 0 on other kernels."""
    fi = np.asarray(flashinfer, dtype=bool)
    dtypes = np.broadcast_to(np.asarray(dtype, dtype=str), fi.shape)
    mx = fi & np.isin(dtypes, FLASHINFER_MXFP4_DTYPES)
    inter_pad = np.where(mx, FLASHINFER_MXFP4_PAD, GEN_INTER_PAD)
    return np.where(fi | gen, inter_pad, 0.0), np.where(mx, FLASHINFER_MXFP4_PAD, 0.0)


#: The share of the device's L2 that keeps one GEMM's expert weights between its row tiles in
#: FlashInfer's TensorRT-LLM-gen MoE (:func:`_weights_again_s`): half, one of the L2's two
#: halves (B200's two dies, as recalled), not fitted
WEIGHTS_HELD = 0.5

#: Bytes of a MoE weight element by dtype with its block scales (:func:`_weights_again_s`):
#: :data:`~mlacalc.words.dtypes.WEIGHT_ELEMENT_BYTES` plus
#: :data:`~mlacalc.words.dtypes.WEIGHT_SCALE_BYTES` (the table the measured rows' mapping
#: counts them with); other dtypes 2 (bf16)
MOE_WEIGHT_BYTES = {d: b + WEIGHT_SCALE_BYTES.get(d, 0.0) for d, b in WEIGHT_ELEMENT_BYTES.items()}


def trtllm_gen_row_tile(
    tokens: np.ndarray, topk: np.ndarray, experts: np.ndarray, most: Any = 256.0
) -> np.ndarray:
    """The row tile (``tile_tokens_dim``) of TensorRT-LLM-gen's MoE kernels: the next power
    of two of the mean (token, expert) pairs of the rank's ``experts``, ``tokens x topk /
    experts``, kept in :data:`TRTLLM_GEN_MIN_TILE` (8)..``most`` (the dtype's
    :data:`TRTLLM_GEN_MAX_TILE`; the floor of 8 as recalled, no copy of their source at hand).
    The measured B200 rows of the fp4 kernels step up by 1.2-1.8x where that mean passes 16,
    64 and 128, at every expert count, under TensorRT-LLM (w4a8 MXFP4, min-latency nvfp4),
    SGLang and vLLM (FlashInfer's TensorRT-LLM MoE, nvfp4 and w4a8 MXFP4) alike; the engines'
    weight-only kernels follow it up to 32 rows, their block-scaled fp8 kernel up to 64. Their
    bf16 and per-tensor fp8 kernels keep the fastest tile (with the fp4 kernels' 256 vLLM's bf16
    and block-scaled fp8 fits got worse, 7.0% -> 9.6% and 9.9% -> 12.6% median; with 128 they
    fit better, but their H100 stand-ins worse)."""
    per_expert = np.maximum(np.floor(tokens * topk / np.maximum(experts, 1.0)), 1.0)
    return np.clip(2.0 ** np.ceil(np.log2(per_expert)), TRTLLM_GEN_MIN_TILE, most)


#: The columns of Marlin's MoE tile (its thread block's 128 output columns)
MARLIN_COLS = 128.0


def _warp_loads(fig: DeviceFigures) -> float:
    """Factor on the weight stream of Marlin's MoE (:data:`MMA_SYNC_MOE`), which its warps load
    with ``cp.async`` rather than a copy engine's TMA: the bytes in flight per SM are what its
    warps issue, so an SM draws at most Hopper's bytes a clock
    (:data:`~mlacalc.timemodel.shared.HOPPER_HBM_BYTES_PER_SM_CLOCK`, as SGLang's
    gathering Triton decode does) and a device with more HBM per SM and clock streams no faster
    per SM (B200 2.02, H100 and A100 1). vLLM's int4 fits drew 0.81 of H100's HBM and 0.51 of
    B200's; refitted with the factor, B200's 1.0 of its capped rate."""
    return max(1.0, round(hbm_per_sm_ratio(fig), 2))


#: Marlin's MoE (a row's ``mma_sync`` shape column: the mapping's rows of a Marlin
#: ``kernel_source``, a model step's class that :data:`MARLIN_TILE` names) dequantizes its
#: 4-bit weights in registers and multiplies with the warp-level ``mma.sync`` (m16n8k16) on
#: every generation: no Hopper warp-group MMA, no Blackwell ``tcgen05``. Its rate per SM and
#: clock is then no more than Hopper's dense bf16 one (:func:`tensor_per_sm_ratio`), where
#: B200's tensor rate per SM is twice that. Read from both devices' fits of vLLM's Marlin
#: rows: at the device's peak they hold 0.39 of H100's and 0.18 of B200's rate, 0.36 of
#: Hopper's per SM and clock on B200 (refitted with the cap: 0.37). Its weight stream is its
#: warps' loads (:func:`_warp_loads`). Leaving the device out, vLLM's int4 MoE went from 67.6%
#: (H100 from B200) and 33.9% (B200 from H100) to 9.5% and 9.4% median error
#: (docs/time-model.md, "Marlin's MoE on Blackwell").
MMA_SYNC_MOE = "mma_sync"


def marlin_row_tile(tokens: np.ndarray, topk: np.ndarray, experts: np.ndarray) -> np.ndarray:
    """The block of rows of Marlin's MoE kernel (``fused_marlin_moe``, SGLang's and vLLM's int4
    and MXFP4 weight-only experts): the first of 8, 16, 32 and 48 rows that the mean (token,
    expert) pairs of the rank's ``experts`` fill to less than 0.9, else 64 (as recalled, no
    copy of its source at hand), each by :data:`MARLIN_COLS` columns. With it, refitted on the
    same rows: SGLang's H100 int4 MoE 15.6% / 33.5% -> 7.0% / 20.5% (median / p90), vLLM's
    9.7% / 31.7% -> 5.4% / 18.1% (H100) and 15.3% / 34.5% -> 6.4% / 18.5% (B200), vLLM's H100
    MXFP4 Marlin 11.6% / 34.2% -> 5.1% / 20.5%; its B200 MXFP4 Marlin rows got worse, 7.0% /
    26.8% -> 9.5% / 37.4%, until their ``experts`` were the call's, not the rank's
    (:data:`MARLIN_CALL_EXPERTS`: 8.2% / 30.8% -> 3.2% / 10.2%)."""
    mean = tokens * topk / np.maximum(experts, 1.0)
    out = np.full(np.shape(mean), 64.0)
    for size in (48.0, 32.0, 16.0, 8.0):
        out = np.where(mean / size < 0.9, size, out)
    return out


#: Marlin MoE kernels (``kernel_source``) whose block of rows (:func:`marlin_row_tile`) follows
#: the mean load over the call's experts, not the rank's: vLLM's B200 compressed-tensors MXFP4
#: Marlin experts. Its rows at EP 2-128 step where tokens x top-k over every expert crosses a
#: block and stay level where the rank's share steps (896 experts, top-16, EP 8, balanced:
#: 684-763 us from 64 to 384 tokens, where H100's ``..._situ_as_silu`` build of the same call
#: steps 852 -> 1,158 -> 1,461 -> 1,842 us at 64 / 128 / 256 / 320 tokens, the rank's blocks of
#: 16 / 32 / 48 / 64 rows), while the EP 1 rows of both step alike; vLLM's int4 Marlin rows on
#: either device follow the rank's (with the call's experts they got worse: B200 EP > 1 4.7% /
#: 11.2% -> 7.6% / 44.5%): docs/time-model.md, "Marlin's MXFP4 MoE on B200 sizes its block by
#: the call's experts"
MARLIN_CALL_EXPERTS = frozenset({"vllm_compressedtensorsw4a4mxfp4moe_marlin_marlinexperts"})


def marlin_experts(source: Any, experts: Any, ep: Any) -> np.ndarray:
    """The experts over which a Marlin row's mean load sizes its block (:func:`marlin_row_tile`)
    by ``kernel_source``: the call's ``experts`` where the kernel counts them
    (:data:`MARLIN_CALL_EXPERTS`), else the rank's, ``experts // ep``."""
    experts, ep = np.asarray(experts), np.asarray(ep)
    call = np.isin(np.asarray(source).astype(str), list(MARLIN_CALL_EXPERTS))
    return np.where(call, experts, experts // ep).astype(np.float64)


#: Pairs of MoE class variants that are one kernel built apart on each device (their
#: ``kernel_source`` names differ by a build suffix), each the other's stand-in where a profile
#: fitted on the other device lacks it (:func:`~mlacalc.timemodel.engine_profiles.
#: left_out_composed`): vLLM's compressed-tensors MXFP4 Marlin experts, ``..._situ_as_silu`` on
#: H100. Without it a left-out device's Marlin rows took the dtype's plain class, another
#: kernel (B200's from H100's triton_kernels MXFP4 fit: 23.2% / -19.4% median / signed);
#: docs/time-model.md, "Marlin's MXFP4 MoE on B200 sizes its block by the call's experts"
SIBLING_MOE_BUILDS = (
    (
        "moe:w4a16_mxfp4:vllm_compressedtensorsw4a4mxfp4moe_marlin_marlinexperts",
        "moe:w4a16_mxfp4:vllm_compressedtensorsw4a4mxfp4moe_marlin_marlinexperts_situ_as_silu",
    ),
)


def triton_moe_default_tile(
    tokens: np.ndarray, experts: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The (rows, columns) output tile of SGLang's Triton fused MoE where no tuned config
    file holds the call's shape: ``get_default_config`` (as recalled, no copy of its source at
    hand) takes BLOCK_SIZE_M 16 by BLOCK_SIZE_N 32 while the call's tokens are no more than the
    rank's ``experts``, else 64 by 64. SGLang's measured bf16 and MXFP4 Triton rows step up by
    1.2-1.5x (median 1.35 on H100, over the model's 1.03 with the fastest tile) exactly between
    the last token count at or under the rank's experts and the next, on H100 and B200, at
    every expert count from 1 to 512 and both routings; the block-scaled fp8 rows (a fixed 64
    by 128 block there) do not."""
    small = tokens <= experts
    return np.where(small, 16.0, 64.0), np.where(small, 32.0, 64.0)


#: The calls of SGLang's bf16 Triton fused MoE that run a tuned config, not the default one
#: (:func:`triton_moe_default_tile`), by device: (the rank's experts, the intermediate size per
#: rank). SGLang looks its configs up by the local experts ``E``, the sharded intermediate size
#: ``N`` and the device name (``E=..,N=..,device_name=...json`` files shipped with its Triton
#: MoE, as recalled: no copy of them at hand), and falls back to the default config where no
#: file holds the shape. The list is read from the tables, not from those files: the (E, N)
#: whose rows of 1,024 tokens and more run 1.3x or more faster than the default tile's
#: prediction (median ratio, rows of tokens above E), the same (E, N) of every model that
#: shares it (H100, hidden 2,048-6,144: E 64 N 768 1.77 / 1.96 / 1.66, E 128 N 384 1.69 / 1.79
#: / 1.59, E 16 N 1,024 1.37-1.77, E 8 N 2,048 1.41-2.07) where the shapes next to them keep
#: the default's 0.9-1.1; the rows of B200's Triton variant have their own, shorter list.
#: These calls take the fastest tile of the library's list at ``tuned_rate`` times the class's
#: tensor rate (:data:`TUNED_MOE`; docs/time-model.md, "The Triton fused MoE's tuned configs");
#: a served Hopper device not listed takes H100's (:data:`TUNED_STAND_IN`).
TRITON_TUNED_MOE = {
    "H100-SXM": frozenset(
        {
            (1, 3072),
            (8, 1792),
            (8, 2048),
            (8, 3584),
            (8, 4096),
            (8, 7168),
            (16, 1024),
            (16, 2048),
            (64, 192),
            (64, 384),
            (64, 768),
            (64, 1536),
            (128, 192),
            (128, 352),
            (128, 384),
            (128, 704),
            (128, 768),
        }
    ),
    "B200": frozenset(
        {
            (16, 1024),
            (16, 2048),
            (64, 192),
            (64, 384),
            (64, 768),
            (64, 1536),
            (128, 352),
            (128, 704),
            (256, 256),
            (256, 512),
        }
    ),
}


#: The shape column of a MoE call that runs a tuned config (:data:`TRITON_TUNED_MOE`): its
#: fastest tile at ``tuned_rate`` times the class's tensor rate (the default config's, whose
#: rows fit ``eff_compute``); a class whose rows lack the column keeps ``tuned_rate`` 1
TUNED_MOE = "tuned_config"


#: The measured device whose tuned shapes (:data:`TRITON_TUNED_MOE`) a device of its kernel
#: generation without a list of its own takes: SGLang ships its tuned configs per device name
#: and the tables list only H100's and B200's, so an H200 (the same die) or an H20 takes H100's,
#: a stand-in (an H200 had run every shape at the default config, slower than H100 at the same
#: step: Qwen3-30B-A3B under SGLang, a 2,048-token prompt at 8, 229 ms on H100 against 375).
#: Hopper only: a served Blackwell step runs FlashInfer's MoE, not the Triton one
#: (:data:`TRITON_DEFAULT_TILE`), so B200's list serves its measured rows alone.
TUNED_STAND_IN = {"sm90": "H100-SXM"}


def triton_moe_tuned(device: str, experts: Any, inter: Any, generation: str = "") -> np.ndarray:
    """Per call whether SGLang's bf16 Triton fused MoE runs a tuned config on ``device``
    (:data:`TRITON_TUNED_MOE`; a device without a list of its own, the list of its kernel
    ``generation``'s measured device, :data:`TUNED_STAND_IN`): the rank's ``experts`` and
    intermediate size ``inter``."""
    stand_in = TRITON_TUNED_MOE.get(TUNED_STAND_IN.get(generation, ""), frozenset())
    tuned = TRITON_TUNED_MOE.get(device, stand_in)
    e = np.atleast_1d(np.asarray(experts, dtype=np.float64))
    n = np.atleast_1d(np.asarray(inter, dtype=np.float64))
    return np.array([(round(a), round(b)) in tuned for a, b in zip(e, n, strict=True)], bool)


#: The MoE classes an engine's model step runs through its Triton fused MoE with the default
#: config's tile (:func:`triton_moe_default_tile`), by tensor-core generation: SGLang's measured
#: H100 bf16 and MXFP4 rows are its Triton kernel (the tables' ``kernel_source``); on B200
#: (``tcgen05``) its bf16 class is FlashInfer's TensorRT-LLM MoE and the Triton one a variant
TRITON_DEFAULT_TILE = {("sglang", "sm90"): ("bf16", "w4a16_mxfp4")}

#: The MoE classes an engine's model step runs through TensorRT-LLM-gen's kernels with their
#: row tile by the mean load (:func:`trtllm_gen_row_tile`, up to the dtype's
#: :data:`TRTLLM_GEN_MAX_TILE`), on data-centre Blackwell: the classes whose measured rows are
#: those kernels (TensorRT-LLM's nvfp4 class is its CUTLASS kernel, the min-latency one a
#: variant; SGLang's and vLLM's fp4 and weight-only FlashInfer classes; vLLM's int4 is Marlin's)
#: The MoE classes an engine's model step runs through Marlin's MoE (:func:`marlin_row_tile`):
#: the int4 weight-only class of SGLang on Hopper and of vLLM on Hopper and Blackwell
MARLIN_TILE = {
    ("sglang", "sm90"): ("w4a16",),
    ("vllm", "sm90"): ("w4a16",),
    ("vllm", "tcgen05"): ("w4a16",),
}

TRTLLM_GEN_TILE = {
    ("trtllm", "tcgen05"): ("w4a8_mxfp4",),
    ("sglang", "tcgen05"): (*TRTLLM_GEN_FP4, "w4a16", "w4a16_mxfp4", "fp8_block"),
    ("vllm", "tcgen05"): (*TRTLLM_GEN_FP4, "w4a16_mxfp4", "fp8_block"),
}


#: The MoE classes an engine runs through TensorRT-LLM's own MoE kernels on a kernel
#: generation: FlashInfer's ``trtllm`` MoE backend (it wraps TensorRT-LLM-gen's kernels), which
#: SGLang and vLLM take on data-centre Blackwell for these dtypes (in their B200 tables every
#: such class's most rows have a ``kernel_source`` naming ``flashinfer_trtllm``; vLLM's int4
#: experts are Marlin's). A profile of the engine fitted on another generation has not timed
#: them (:func:`mlacalc.timemodel.engine_profiles.with_generation_kernels`). TensorRT-LLM-gen's
#: routing kernel selects every token's top-k itself, top-22 as top-8, where TensorRT-LLM's
#: Hopper CUTLASS MoE (the class that stands in) runs a generic top-k above
#: :data:`FUSED_TOPK_MAX` (``select_s``, 0.88 us a round in its H100 fit, 19 us at top-22):
#: SGLang's B200 nvfp4 rows of top-22 over 512 experts at one token take 17-25 us (hidden
#: 1,024-4,096, EP 4 and more), its top-4 and top-8 rows 14-21 us, so the stand-in is taken
#: without those rounds (docs/time-model.md, "The engines' MoE on Blackwell").
TRTLLM_MOE = {
    ("sglang", "tcgen05"): ("bf16", "fp8_block", "nvfp4", "w4a16", "w4a16_mxfp4", "w4a8_mxfp4"),
    ("vllm", "tcgen05"): ("bf16", "fp8", "fp8_block", "nvfp4", "w4a16_mxfp4", "w4a8_mxfp4"),
}

#: The MoE classes TensorRT-LLM's own tables time on its own kernels on a generation (the
#: CUTLASS MoE on Hopper; its Hopper MXFP4 class is the Triton MoE, ``moe_torch_flow``).
TRTLLM_OWN_MOE = {"sm90": ("bf16", "fp8", "fp8_block")}

#: The MoE classes TensorRT-LLM's tables time on its CUTLASS MoE on a generation (``kernel_source``
#: ``moe_torch_flow_cutlass``; on Blackwell its block-scaled fp8 class is DeepGEMM's kernel,
#: ``deepgemm``, and its w4a8 MXFP4 one TensorRT-LLM-gen's): the kernels FlashInfer's CUTLASS
#: MoE wraps (:func:`flashinfer_cutlass_moe`; ``engine_profiles.with_generation_kernels``).
TRTLLM_CUTLASS_MOE = {"sm90": ("bf16", "fp8", "fp8_block"), "tcgen05": ("bf16", "fp8", "nvfp4")}

#: The kernel an engine's plain MoE class of a dtype was fitted on, by generation (the
#: ``kernel_source`` of the class's rows in its tables), for the classes TRTLLM_MOE moves: the
#: name under which a table of another generation, where the engine runs TensorRT-LLM's kernel
#: for the dtype, holds that kernel's rows as a variant (SGLang's Triton MoE on B200).
ENGINE_MOE_KERNEL = {
    ("sglang", "sm90"): {
        "bf16": "sglang_fused_moe_triton",
        "fp8_block": "sglang_fused_moe_triton",
        "w4a16_mxfp4": "sglang_fused_moe_triton",
        "w4a16": "sglang_marlin_moe",
    },
    ("vllm", "sm90"): {
        "bf16": "vllm_unquantizedfusedmoe_triton_tritonexperts",
        "fp8": "vllm_modeloptfp8moe_flashinfer_cutlass_flashinferexperts",
        "fp8_block": "vllm_fp8moe_flashinfer_cutlass_flashinferexperts",
        "w4a16_mxfp4": "vllm_gptossmxfp4moe_triton_oaitritonmxfp4expertsmonolithic",
    },
}


def flashinfer_cutlass_moe(kernel: str) -> bool:
    """Whether ``kernel`` (an :data:`ENGINE_MOE_KERNEL` name) is FlashInfer's CUTLASS MoE, which
    wraps TensorRT-LLM's MoE (its routing, permutation, CUTLASS grouped GEMMs and finalize):
    vLLM's Hopper per-tensor and block-scaled fp8 classes. Leaving Hopper out, where the fitted
    generation's table times no variant of that kernel, TensorRT-LLM's class of the dtype
    stands in (:func:`~mlacalc.timemodel.engine_profiles.with_generation_kernels`): its rows
    pay a cost per expert of the rank as TensorRT-LLM's block-scaled MoE does (vLLM's H100
    block-scaled fit 130 ns an expert, TensorRT-LLM's 223-260 ns), where FlashInfer's
    TensorRT-LLM-gen MoE, vLLM's B200 class, pays none (docs/time-model.md, "Every routed pair
    of TensorRT-LLM-gen's block-scaled fp8 MoE")."""
    return "_flashinfer_cutlass_" in kernel


#: ``kernel_source`` (and dtype) of FlashInfer's CUTLASS MoE rows whose Hopper build runs
#: 128-row tiles whatever the load (:func:`flashinfer_hopper_tiled`): vLLM's per-tensor fp8
#: experts (its H100 fp8 class; a variant of its B200 table). Not FlashInfer's block-scaled fp8
#: CUTLASS MoE (vLLM's H100 ``fp8_block`` class), whose rows grow with the load and stream the
#: weights at 0.9 of HBM, nor (kept out) SGLang's H100 bf16 variant of FlashInfer's CUTLASS MoE:
#: its rows step at 128 rows too, but refitted with the tile its fit got worse (7.3% / 26.8% ->
#: 8.4% / 30.4% median / p90; from B200 71% -> 65%)
FLASHINFER_TILED_KERNELS = {"vllm_modeloptfp8moe_flashinfer_cutlass_flashinferexperts": "fp8"}

#: The row tile of :data:`FLASHINFER_TILED_KERNELS` on Hopper, whatever the load: read from the
#: tables, not from the kernel's source (not at hand). vLLM's H100 fp8 rows step up where an
#: expert's rows pass a multiple of 128 and stay level below: hidden 2,816, intermediate 704,
#: 128 experts, top-8, EP 1 take 1.03 ms at 2,048 tokens (128 rows an expert), 2.38 at 3,072
#: (192), 2.01 at 4,096 (256), then 3.06 / 4.00 / 6.02 / 8.11 at 3 / 4 / 6 / 8 tiles of 128
#: rows, and 1.2-1.5 ms at 16-1,536 tokens (1-96 rows an expert); every shape at EP 1 takes
#: 1.9-2.9x its time of 128 rows an expert at the next count above (192-256 rows). SGLang's
#: H100 bf16 rows of the same library step alike (hidden 2,048, intermediate 5,120, 512
#: experts, top-22, EP 1: 28-33 ms at 32-2,048 tokens, 1-88 rows an expert; 57-61 at 2 tiles,
#: 89-93 at 3, 166 at 5, 211 at 6) and take 1.8-2.2x vLLM's fp8 rows of the same calls at every
#: load. B200's rows of vLLM's kernel (its Blackwell build) grow 1.44x from 128 to 192 rows,
#: with the load, and keep the library's tiles.
FLASHINFER_HOPPER_TILE = 128.0


def flashinfer_hopper_tiled(source: Any, dtype: Any) -> np.ndarray:
    """Per row (``kernel_source``, dtype) whether it names a FlashInfer CUTLASS MoE whose Hopper
    build runs 128-row tiles whatever the load (:data:`FLASHINFER_TILED_KERNELS`,
    :data:`FLASHINFER_HOPPER_TILE`). That build is slow for its device: at the one call both
    vLLM tables hold (2,816 / 704, EP 1, balanced) TensorRT-LLM's own CUTLASS fp8 MoE, the code
    FlashInfer wraps, takes 2.1-5.6x less time than FlashInfer's H100 fp8 rows but 0.72-1.01x
    FlashInfer's B200 rows; on the padded tiles the H100 fp8 rows reach 0.08-0.16 of the fp8
    rate at 128 rows an expert. Why (a tactic without the warp-group MMA, the weights streamed
    again for each tile of rows) the tables do not say (docs/time-model.md, "FlashInfer's CUTLASS
    MoE on Hopper: 128-row tiles")."""
    src = np.asarray(source).astype(str)
    want = np.array([FLASHINFER_TILED_KERNELS.get(x, "?") for x in src.ravel()], dtype=str)
    return want.reshape(src.shape) == np.asarray(dtype).astype(str)


#: The kernel variants (``kernel_source``) of the Triton fused MoE, timed by two rules of their
#: own on a device whose tensor rate per SM is above Hopper's (B200; on Hopper the engines' plain
#: classes of these kernels are timed as any Hopper MoE): its tiles are its config's (16-128
#: rows, one CTA's; not the libraries' 256-row SM-pair tiles), so they take the operand reuse
#: of the device's rate per SM as a dense GEMM's do
#: (:func:`~mlacalc.timemodel.shared.operand_reuse`; B200's Triton bf16 fit 0.23 of the rate
#: without it, H100's own 0.31, the 64 x 64 tile's share on B200 0.71 of Hopper's); and its
#: block-scaled fp8 path multiplies each 128-deep K block's product by its activation and
#: weight scales on the CUDA cores before adding it to the accumulator (``tl.dot(a, b) *
#: a_scale * b_scale`` in SGLang's and vLLM's ``fused_moe_kernel``), not in a block-scaled
#: ``tcgen05`` MMA, so the rescale of :func:`moe_terms` (``promote_cycles``) is paid there too
#: (docs/time-model.md, "The Triton fused MoE on both generations").
TRITON_MOE_KERNELS = frozenset({"sglang_fused_moe_triton", "vllm_fp8moe_triton_tritonexperts"})


#: The shape column of a MoE whose streaming passes around its GEMMs run over every routed
#: (token, top-k) pair of the call, local to the rank or not (:func:`moe_terms`): SGLang's and
#: vLLM's Triton fused MoE (:func:`triton_fused_moe`). Its intermediate caches hold a row for
#: every pair (``topk_ids`` of all the tokens entering the rank), its grid covers every pair's
#: block, and a block of an expert on another rank (``expert_ids`` -1 under an ``expert_map``)
#: writes zeros to its rows of the GEMM's output (``write_zeros_to_output`` in
#: ``fused_moe_kernel``, as recalled: no copy of the source at hand); the gated activation and
#: the final sum over the top-k then stream every row. The measured H100 rows show it: SGLang's
#: bf16 Triton MoE, hidden 4,096, intermediate 2,048, 256 experts, top-8, at EP 256 (one local
#: expert, 512 of the 131,072 pairs of 16,384 tokens) takes 1,528 us, 801 at 8,192 tokens, 453
#: at 4,096, where its expert's FLOPs and weights take under 30 us: about 6 bytes a pair and
#: unit of hidden + intermediate at H100's HBM rate (36 KB a pair of that shape: two writes and a
#: read of the FC1 output, the activation's write, FC2's write and the sum's read, 1.4 ms).
#: Timed over the local assignments, the fits of these kernels were too fast by a margin growing
#: with the EP size (H100, median signed error at EP 1 / 16 / 256: SGLang bf16 +5.5% / -1.5% /
#: -20.8%, block-scaled fp8 +6.3% / -4.5% / -10.8%, vLLM bf16 +3.3% / -6.3% / -16.7%); refitted,
#: they hold 2.7-3.6 bf16 passes (``act_passes``). B200's rows of the same calls take about
#: H100's time (1,985 and 1,411 us, bf16 and block-scaled fp8, against 1,528 and 1,727), not
#: 0.43 of it: the passes stream at no more than Hopper's bytes per SM and clock
#: (:func:`_warp_loads`: the zero stores and the small kernels' loads are the warps' own), else
#: B200's fits held 4.5-8.2 passes and predicted H100 35-37% too slow (docs/decisions.md, "MoE").
#: A pair of another rank's expert now moves the bytes of its rows (:func:`_remote_pair_bytes`,
#: not fitted) and ``act_passes`` is the rank's own rows', so a class of another kernel standing
#: in keeps them (docs/time-model.md, "The Triton fused MoE's rows of other ranks' experts").
ALL_PAIRS_MOE = "all_pairs"

#: The dtypes whose Triton fused MoE (:data:`ALL_PAIRS_MOE`) streams its weights at no more than
#: Hopper's bytes a clock per SM on ``tcgen05`` devices (:func:`_warp_loads`, as Marlin's warps
#: and the Triton MoE's own passes do): its block-scaled fp8 path, whose K loop loads the
#: operands and each 128-deep block's activation and weight scales through pointers, its warps'
#: loads (``tl.load`` in SGLang's ``fused_moe_kernel``, as recalled: no copy of the source at
#: hand). Only where B200's rows show it: no table of a Hopper device with more HBM per SM than
#: H100's (H200: 1.43x) times the kernel, which such a device keeps at its HBM. The same kernel
#: on both devices: at equal calls (SGLang's rows, kernel ``sglang_fused_moe_triton``), B200's
#: time over the call's one-token time is 0.60-0.81 of H100's at every EP and token count
#: (median by EP 1 to 256: 0.67, 0.70, 0.74, 0.75, 0.76, 0.77, 0.79, 0.80, 0.81), where its HBM
#: and tensor rate are 2.3x H100's; its B200 fit drew 0.81 of the HBM. Not bf16: its rows go
#: from 0.54 of H100's time at EP 1 to 1.0-1.1 at EP 128-256, which no draw per SM follows (with
#: the factor, B200 from H100 EP 1 +40%, EP 64-256 -15% to -24%; docs/time-model.md, "The
#: Triton fused MoE's block-scaled weights at Hopper's draw per SM").
WARP_LOADED_MOE = frozenset({"fp8_block"})


def wave_drawn(batch: KernelBatch, col_tile: np.ndarray) -> np.ndarray:
    """Per row whether the Triton fused MoE runs its default config (:data:`ALL_PAIRS_MOE` with
    the config's fixed columns, ``col_tile``): its weights stream at ``wave_draw`` of the HBM
    per wave of CTAs (:func:`moe_terms`)."""
    return (col(batch, ALL_PAIRS_MOE, 0) > 0) & (np.asarray(col_tile, dtype=np.float64) > 0)


def reread_bytes(batch: KernelBatch, col_tile: np.ndarray, mats: np.ndarray) -> np.ndarray:
    """Bytes the Triton fused MoE at its default config (:func:`wave_drawn`) loads of the rank's
    routed pairs' activation rows, each CTA of a row tile's column strip loading its rows again
    (the A operand gathered by the sorted pair ids, its padded rows masked: as recalled of
    ``fused_moe_kernel``, no copy at hand): per pair, FC1's hidden row once for each column
    strip of its ``(mats - 1) x inter`` columns and FC2's intermediate row once for each strip
    of its ``hidden``, bf16. SGLang's H100 rows at TP 1-2, EP 1 and 64-column tiles grow with
    the pairs inside one row tile (where the padded tiles' compute is level) at these bytes over
    6.2-11.9 TB/s (most 6.6-8.9), sweep by sweep; its 16 x 32 config's rows grow 0.6-1.2 times as
    fast a pair, not twice, so the strips are counted at 64 columns at least (``col_tile`` or
    64): docs/time-model.md, "A routed pair's activations read for every column tile"."""
    hidden = col(batch, "hidden", 1)
    inter = col(batch, "inter", 1)
    tile = np.maximum(np.asarray(col_tile, dtype=np.float64), REREAD_COLS)
    per_pair = hidden * np.ceil((mats - 1.0) * inter / tile) + inter * np.ceil(hidden / tile)
    assignments = col(batch, "assignments", 0)
    pairs = np.maximum(batch.flops / (2.0 * hidden * inter * mats), 1.0)
    assignments = np.where(assignments > 0, assignments, pairs)
    return 2.0 * assignments * per_pair


#: The fewest columns a strip of :func:`reread_bytes` counts: the Triton MoE default config's
#: 64-column tile, whose rows' cost a pair the 32-column config's rows show as well (0.6-1.2 times
#: it, not twice), read from SGLang's H100 tables
REREAD_COLS = 64.0


#: The Triton fused MoE (:data:`ALL_PAIRS_MOE`) on a rank whose intermediate size is not a
#: multiple of this many elements: Triton specializes an integer argument (a stride, a size) by
#: its divisibility by 16 and vectorizes a load only where it can prove the alignment, so FC2
#: (K = the rank's intermediate, contiguous in both its operands: the activated rows and the
#: down-projection weights, whose row stride is that size) loads its operands element by
#: element, as recalled of Triton's specialization (no copy of the kernels at hand). vLLM's
#: H100 bf16 Triton rows at those sizes (22, 24, 44, 58, 88, 116, 232: hidden 2,816 /
#: intermediate 704 and 2,688 / 1,856 at TP 8-32, 2,048 / 768 at TP 32) take about twice the
#: model's time, and more than the same shape at half the TP (2,816 / 704, 16,384 tokens,
#: balanced: 1,637 us at TP 4, 3,172 at TP 8, 2,511 at TP 32), where every aligned size fits
#: within its kind's median. The excess over the fitted model is a cost per weight row a row
#: tile, nearly whatever the intermediate: 0.2-0.3 ns of the device per (row tile of the default
#: config's rows, :func:`triton_moe_default_tile`, x hidden row) at 22-88 elements, 0.3-0.5 ns
#: at 116-232. ``unaligned_row_s`` that (default 0; bf16 alone: SGLang's MXFP4 rows at 90-360
#: show no such cost); docs/time-model.md, "The Triton MoE at an unaligned intermediate size".
UNALIGNED_K_MOE = 16.0

#: The tiles of :func:`triton_moe_default_tile`'s rows in :data:`_MOE_TILES` (16 x 128, 64 x 128)
_DEFAULT_ROW_TILES = {16.0: 0, 64.0: 3}


def _unaligned_rows_s(batch: KernelBatch, m_tiles: np.ndarray, prm: dict[str, float]) -> np.ndarray:
    """``unaligned_row_s`` a (row tile x FC2 weight row) of the Triton fused MoE's bf16 calls
    whose rank's intermediate is off :data:`UNALIGNED_K_MOE`; ``m_tiles`` (tile, row) the row
    tiles of each of :data:`_MOE_TILES`' row counts over the rank's experts."""
    inter = col(batch, "inter", 1)
    off = (col(batch, ALL_PAIRS_MOE, 0) > 0) & (np.mod(inter, UNALIGNED_K_MOE) > 0)
    if batch.dtype != "bf16" or prm.get("unaligned_row_s", 0.0) <= 0 or not off.any():
        return np.zeros(len(batch))
    rows, _ = triton_moe_default_tile(col(batch, "tokens", 1), col(batch, "experts", 1))
    at = np.where(rows <= 16.0, _DEFAULT_ROW_TILES[16.0], _DEFAULT_ROW_TILES[64.0])
    tiles = m_tiles[at, np.arange(len(batch))]
    return np.where(off, prm["unaligned_row_s"] * tiles * col(batch, "hidden", 1), 0.0)


def triton_fused_moe(source: Any) -> np.ndarray:
    """Per ``kernel_source`` whether it names SGLang's or vLLM's Triton fused MoE
    (``fused_moe_kernel``: ``sglang_fused_moe_triton``, vLLM's ``..._triton_tritonexperts``),
    whose passes run over every routed pair (:data:`ALL_PAIRS_MOE`); not the triton_kernels MXFP4
    MoE (vLLM's ``..._oaitriton...``, TensorRT-LLM's ``moe_torch_flow``), which gathers and
    scatters only its local rows."""
    src = np.asarray(source).astype(str)
    return (np.char.find(src, "fused_moe_triton") >= 0) | np.char.endswith(
        src, "_triton_tritonexperts"
    )


#: The column (1 or 0) of a call of vLLM's Triton MoE (its fused MoE, ``..._triton_tritonexperts``,
#: or the triton_kernels MXFP4 MoE, ``..._oaitriton...``) with experts over more than one rank:
#: vLLM maps the routed expert ids to the rank's through its expert map outside the kernel, which
#: its FlashInfer MoE and SGLang's Triton MoE take inside (as recalled; ``ep_map_s`` once a call;
#: default 0). The measured H100 rows show it at one token, where the touched weights are a few MB
#: either way: one ``fixed_s`` for both left vLLM's bf16 Triton rows predicted 6-8 us too slow at
#: EP 8-256 and 15-16 us at TP 2-32, its MXFP4 rows up to 6 us and 14-18 us, where its FlashInfer
#: fp8 rows and SGLang's Triton rows show no such gap: docs/time-model.md, "vLLM's expert map"
EP_MAP_MOE = "ep_map"


#: The dtypes whose vLLM Triton MoE behind the expert map (:data:`EP_MAP_MOE`) pays ``ep_row_s``
#: a row of its row tile once a call: the triton_kernels MXFP4 MoE (``..._oaitriton...``), whose
#: row tile the call fixes (:func:`triton_moe_row_tile`). Its measured H100 rows at EP 2-128
#: step where that tile doubles and stay level between (2,880 / 2,880, 128 experts, top-4, EP
#: 128: 68 us at 1-4 tokens with a 16-row tile, 74 at 32 rows, 85 at 64, 110-115 us at 128 rows
#: from 32 to 1,024 tokens; EP 64 the same steps one token count later), 0.38 us a tile row at
#: one or two local experts, where the fitted model ran level; its TP rows at the same tiles
#: show no such cost: docs/time-model.md, "vLLM's expert map"
EP_ROW_MOE = ("w4a16_mxfp4",)


def vllm_expert_map(source: Any) -> np.ndarray:
    """Per ``kernel_source`` whether it names one of vLLM's Triton MoE kernels, which take the
    expert map outside the kernel (:data:`EP_MAP_MOE`)."""
    src = np.asarray(source).astype(str)
    vllm = np.char.startswith(src, "vllm_")
    triton = np.char.endswith(src, "_triton_tritonexperts") | (np.char.find(src, "oaitriton") >= 0)
    return vllm & triton


#: The class variant of a model step's routed experts behind DeepEP's dispatch and combine
#: (:func:`~mlacalc.words.kernels.variant_of`: shape ``deepep``; EP over more ranks than TP's
#: group): a batch of its own, which :func:`engine_moe_tiles` runs as the engine's kernel there
DEEPEP_STEP = "deepep"

#: The variant class of DeepGEMM's grouped GEMM MoE (``kernel_source`` ``deepgemm``: the
#: TensorRT-LLM B200 table's block-scaled fp8 MoE rows, its plain class there)
DEEPGEMM_MOE = "deepgemm"

#: The MoE classes an engine runs through DeepGEMM's grouped GEMMs when its experts sit behind
#: DeepEP's exchange (:data:`DEEPEP_STEP`), on every generation: SGLang's ``DeepEPMoE`` with
#: block-scaled fp8 weights (``--moe-a2a-backend deepep``) takes DeepGEMM's masked grouped
#: GEMM on the low-latency layout (each local expert's rows of the dispatch, the blocks past an
#: expert's row count skipped) and its contiguous grouped GEMM on the normal layout (each
#: expert's rows aligned to 128), a masked SiLU-and-quantize between (as recalled, no copy of
#: SGLang's source at hand), not its Triton fused MoE, whose passes over every routed pair
#: (:data:`ALL_PAIRS_MOE`) its plain class was fitted with. vLLM's modular MoE behind DeepEP's
#: low-latency kernels runs its batched experts, DeepGEMM's masked grouped GEMM for
#: block-scaled fp8 (as recalled: Triton's batched kernel for the other dtypes, which keep
#: their plain classes over the copies received, :data:`DEEPEP_RECEIVED`; FlashInfer's CUTLASS
#: MoE for nvfp4 on Blackwell, :data:`DEEPEP_KERNEL`), not FlashInfer's TensorRT-LLM-gen MoE
#: (its B200 class, with passes over every routed pair, :data:`PAIR_STREAM_MOE`) nor its Hopper
#: CUTLASS one. No
#: SGLang or vLLM table times that kernel: the class :data:`DEEPGEMM_MOE`, composed from
#: TensorRT-LLM's profile of the device
#: (:func:`~mlacalc.timemodel.engine_profiles.with_deepep_moe`), stands in (docs/time-model.md,
#: "SGLang's experts behind DeepEP", "Every engine's experts behind DeepEP").
DEEPEP_GROUPED_GEMM = {"sglang": ("fp8_block",), "vllm": ("fp8_block",)}

#: The shape column of a model step's experts behind DeepEP (:data:`DEEPEP_STEP`): the routed
#: (token, expert) copies the rank receives from the dispatch, the rows its experts' kernel
#: runs over. Under every engine and dtype the kernel there sees only those (DeepEP's
#: low-latency layout: each local expert's received rows; its normal layout: the received
#: tokens), not every token entering the MoE group, so :func:`engine_moe_tiles` gives the
#: batch these copies as its tokens (over the top-k): no class's passes over every routed pair
#: (:data:`ALL_PAIRS_MOE`, :data:`PAIR_STREAM_MOE`) run over tokens the rank never receives
DEEPEP_RECEIVED = "received_copies"

#: The shape column of a model step's experts behind DeepEP (:data:`DEEPEP_STEP`): the tokens
#: the rank routes, its own (those it sends), whose top-k selection runs on the attention rank
#: before the dispatch (:func:`moe_terms`' ``route_s``), once, not over every token entering
#: the MoE group on each expert rank
DEEPEP_ROUTED = "routed_tokens"


#: The measured variant class of the kernel an engine runs for a dtype's experts behind DeepEP
#: (:data:`DEEPEP_STEP`) on a kernel generation, where its table times that kernel as a
#: variant: vLLM's nvfp4 experts on Blackwell behind DeepEP's low-latency kernels take
#: FlashInfer's CUTLASS MoE (as recalled, no copy of vLLM's source at hand), whose rows its
#: B200 table holds beside its plain class (FlashInfer's TensorRT-LLM-gen MoE)
DEEPEP_KERNEL = {
    ("vllm", "tcgen05"): {
        "nvfp4": "vllm_compressedtensorsw4a4nvfp4moe_flashinfer_cutlass_flashinferexperts"
    }
}


def engine_moe_tiles(batch: KernelBatch, engine: str, fig: DeviceFigures) -> KernelBatch:
    """``batch`` with the tile its engine's Triton fused MoE fixes (``row_tile``,
    ``col_tile``) where the class is that kernel (:data:`TRITON_DEFAULT_TILE`) and the batch
    names no tile of its own (a model step's; a measured row carries its own): the step is timed
    with the tiles its class was fitted on; where the class is SGLang's or vLLM's Triton fused
    MoE (:data:`ENGINE_MOE_KERNEL`), with its passes over every routed pair
    (:data:`ALL_PAIRS_MOE`); where it is TensorRT-LLM-gen's block-scaled fp8 MoE
    (:data:`TRTLLM_MOE`), at the bf16 rate (:data:`BF16_RATE_MOE`) with its passes over every
    routed pair (:data:`PAIR_STREAM_MOE`); where it is TensorRT-LLM's own grouped GEMM on
    ``tcgen05``, with the SM pair's tile (:data:`PAIR_TILE_MOE`). A step's experts behind
    DeepEP's exchange (:data:`DEEPEP_STEP`) run DeepGEMM's grouped GEMM where the engine takes
    it (:data:`DEEPEP_GROUPED_GEMM`: the :data:`DEEPGEMM_MOE` class, with TensorRT-LLM's tiles,
    whose class stands in), else the engine's plain class as any other step's; either over
    the copies the rank receives (:data:`DEEPEP_RECEIVED`) as its tokens."""
    if batch.kind == "moe" and batch.variant == DEEPEP_STEP:
        # the copies the rank receives are the kernel's tokens (:data:`DEEPEP_RECEIVED`)
        received = col(batch, DEEPEP_RECEIVED, 0) / col(batch, "topk", 1)
        shape = {**batch.shape, "tokens": np.where(received > 0, received, col(batch, "tokens", 0))}
        # TensorRT-LLM-gen's MoE where chosen (words.kernels.TRTLLM_GEN_MOE), else the plain class
        chosen = MIN_LATENCY_MOE if col(batch, TRTLLM_GEN_MOE, 0).any() else ""
        plain = dataclasses.replace(batch, variant=chosen, shape=shape)
        kernel = DEEPEP_KERNEL.get((engine, fig.kernel_generation), {}).get(batch.dtype)
        if kernel:
            return dataclasses.replace(plain, variant=kernel)
        if batch.dtype not in DEEPEP_GROUPED_GEMM.get(engine, ()):
            return engine_moe_tiles(plain, engine, fig)
        return dataclasses.replace(engine_moe_tiles(plain, "trtllm", fig), variant=DEEPGEMM_MOE)
    if batch.kind == "moe" and batch.variant == MIN_LATENCY_MOE and "row_tile" not in batch.shape:
        # a step's experts on TensorRT-LLM-gen's MoE (moe_backend "trtllm-gen"): the row tile
        # its min-latency rows were mapped with (measured.mapping), no power-law tiles
        rows = trtllm_gen_row_tile(
            col(batch, "tokens", 1), col(batch, "topk", 1), col(batch, "experts", 1),
            TRTLLM_GEN_MAX_TILE["nvfp4"],
        )  # fmt: skip
        shape = {**batch.shape, "row_tile": rows, "col_tile": np.zeros(len(batch))}
        # its intermediate padded as its rows' (:data:`INTER_PAD_MOE`)
        shape[INTER_PAD_MOE] = np.full(len(batch), GEN_INTER_PAD)
        return dataclasses.replace(batch, shape=shape)
    if batch.kind != "moe" or batch.variant or "row_tile" in batch.shape:
        return batch
    gen = fig.kernel_generation
    if batch.dtype in PAIR_STREAM_DTYPES and batch.dtype in TRTLLM_MOE.get((engine, gen), ()):
        # TensorRT-LLM-gen's block-scaled fp8 and nvfp4 MoE: their passes over every routed
        # pair (:data:`PAIR_STREAM_MOE`); the block-scaled one at the bf16 rate
        # (:data:`BF16_RATE_MOE`)
        ones = np.ones(len(batch))
        extra = {PAIR_STREAM_MOE: ones}
        if batch.dtype == "fp8_block":
            extra[BF16_RATE_MOE] = ones
        batch = dataclasses.replace(batch, shape={**batch.shape, **extra})
    gen_tiled = batch.dtype in TRTLLM_GEN_TILE.get((engine, gen), ())
    flashinfer_gen = batch.dtype in TRTLLM_MOE.get((engine, gen), ())
    ones, extra = np.ones(len(batch)), {}
    if flashinfer_gen and not gen_tiled:
        # TensorRT-LLM-gen's 8-row tile beside the library's list (:data:`GEN_ROWS8_MOE`)
        extra[GEN_ROWS8_MOE] = ones
    if flashinfer_gen:
        # FlashInfer's TensorRT-LLM-gen MoE: its cost a routed pair up to a knee
        # (:data:`GEN_TOKENS_MOE`), as its measured rows were mapped
        extra[GEN_TOKENS_MOE] = ones
    if flashinfer_gen or gen_tiled:
        # TensorRT-LLM-gen's kernels (FlashInfer's under SGLang and vLLM, TensorRT-LLM's own
        # w4a8 MXFP4 one): the rank's intermediate padded as their rows' (:data:`INTER_PAD_MOE`),
        # FlashInfer's MXFP4 kernels' hidden size too (:data:`HIDDEN_PAD_MOE`)
        inter_pad, hidden_pad = gen_pads(batch.dtype, flashinfer_gen)
        extra[INTER_PAD_MOE] = ones * inter_pad
        if hidden_pad > 0:
            extra[HIDDEN_PAD_MOE] = ones * hidden_pad
    if extra:
        batch = dataclasses.replace(batch, shape={**batch.shape, **extra})
    own = (
        batch.dtype not in TRTLLM_GEN_TILE.get((engine, gen), ())
        if fig.tcgen05
        else batch.dtype in TRTLLM_OWN_MOE.get(gen, ())
    )
    if engine == "trtllm" and own:
        # TensorRT-LLM's own grouped GEMMs (CUTLASS, DeepGEMM; on Hopper its CUTLASS MoE):
        # their SM pair's tile on ``tcgen05`` and their work on every token's hidden row
        # (:data:`PAIR_TILE_MOE`)
        batch = dataclasses.replace(
            batch, shape={**batch.shape, PAIR_TILE_MOE: np.ones(len(batch))}
        )
    kernel = ENGINE_MOE_KERNEL.get((engine, gen), {}).get(batch.dtype, "")
    if flashinfer_cutlass_moe(kernel):
        # FlashInfer's CUTLASS MoE: TensorRT-LLM's costs per row and token (CUTLASS_ROWS_MOE)
        batch = dataclasses.replace(
            batch, shape={**batch.shape, CUTLASS_ROWS_MOE: np.ones(len(batch))}
        )
    if not fig.tcgen05 and flashinfer_hopper_tiled([kernel], [batch.dtype])[0]:
        # the Hopper build of FlashInfer's CUTLASS MoE: its 128-row tile
        # (:func:`flashinfer_hopper_tiled`)
        n = len(batch)
        shape = {"row_tile": np.full(n, FLASHINFER_HOPPER_TILE), "col_tile": np.zeros(n)}
        return dataclasses.replace(batch, shape={**batch.shape, **shape})
    if triton_fused_moe([kernel])[0]:
        batch = dataclasses.replace(
            batch, shape={**batch.shape, ALL_PAIRS_MOE: np.ones(len(batch))}
        )
    if vllm_expert_map([kernel])[0]:
        # vLLM's expert map outside its Triton MoE, over more than one rank (EP_MAP_MOE)
        mapped = (col(batch, "ep", 1) > 1).astype(np.float64)
        batch = dataclasses.replace(batch, shape={**batch.shape, EP_MAP_MOE: mapped})
    return _engine_tiles(batch, engine, fig)


def _engine_tiles(batch: KernelBatch, engine: str, fig: DeviceFigures) -> KernelBatch:
    """:func:`engine_moe_tiles`' tiles of a model step's MoE batch."""
    gen = fig.kernel_generation
    tokens, experts = col(batch, "tokens", 1), col(batch, "experts", 1)
    if batch.dtype in TRITON_DEFAULT_TILE.get((engine, gen), ()):
        rows, cols = triton_moe_default_tile(tokens, experts)
        if batch.dtype == "bf16":  # a tuned config: the fastest tile at its own rate
            tuned = triton_moe_tuned(fig.name, experts, col(batch, "inter", 1), gen)
            rows, cols = np.where(tuned, 0.0, rows), np.where(tuned, 0.0, cols)
            batch = dataclasses.replace(
                batch, shape={**batch.shape, TUNED_MOE: tuned.astype(np.float64)}
            )
    elif batch.dtype in MARLIN_TILE.get((engine, gen), ()):
        rows = marlin_row_tile(tokens, col(batch, "topk", 1), experts)
        cols = np.full(len(batch), MARLIN_COLS)
        shape = {
            **batch.shape,
            "row_tile": rows,
            "col_tile": cols,
            MMA_SYNC_MOE: np.ones(len(batch)),
        }
        return dataclasses.replace(batch, shape=shape)
    elif batch.dtype in TRTLLM_GEN_TILE.get((engine, gen), ()):
        most = TRTLLM_GEN_MAX_TILE[batch.dtype]
        rows = trtllm_gen_row_tile(tokens, col(batch, "topk", 1), experts, most)
        if batch.dtype in TRTLLM_MOE.get((engine, gen), ()):  # FlashInfer's build
            rows = flashinfer_gen_tile(rows, batch.dtype)
        cols = np.zeros(len(batch))
    else:
        return batch
    return dataclasses.replace(batch, shape={**batch.shape, "row_tile": rows, "col_tile": cols})


def _remote_pair_bytes(hidden: np.ndarray, inter: np.ndarray, mats: np.ndarray) -> np.ndarray:
    """Bytes the Triton fused MoE (:data:`ALL_PAIRS_MOE`) moves for a routed pair whose expert is
    on another rank, from the kernel's passes as recalled (vLLM's ``fused_experts``, SGLang's
    copy; no copy of either at hand): FC1's block writes zeros to the pair's row of its output
    (``(mats - 1) x inter`` bf16), the activation reads that row and writes ``inter``, FC2's
    block writes zeros to the pair's ``hidden`` row and the sum over the top-k reads it. At
    hidden 4,096, intermediate 2,048 (gated) 36 KB, 3.0 bf16 passes over hidden +
    intermediate: SGLang's H100 bf16 rows of that shape at EP 256 (one local expert, 16,384
    tokens of top-8) take 1,528 us, the passes 1.4 ms at H100's HBM rate (docs/time-model.md,
    "The Triton fused MoE's rows of other ranks' experts")."""
    fc1 = (mats - 1.0) * inter
    return 2.0 * (2.0 * fc1 + inter + 2.0 * hidden)


#: The most experts a token the fused MoE routing kernel selects; more take a generic top-k
#: (:func:`moe_terms`, ``select_s``). TensorRT-LLM's fused routing kernels keep at most 8
#: experts a token as recalled (no copy of their source at hand); the measured H100 rows agree:
#: top-1 to top-8 share one fixed cost, top-10 and top-22 pay more
FUSED_TOPK_MAX = 8

#: The most tokens TensorRT-LLM's CUTLASS MoE sorts its (token, expert) pairs by expert in one
#: thread block (``sort_pair_s`` a pair, on one SM); a larger call sorts them in more kernels
#: over the SMs (a block's prefix sums, their global sum, the merge), ``sort_s`` a call
#: (:func:`moe_terms`). The kernel is templated on the block
#: size and the top-k, so only some top-k have the one-block path (:data:`FUSED_SORT_TOPK`).
#: Both from recall (no copy of the source at hand); the step is in the tables: from 256 to 320
#: tokens every sweep of TensorRT-LLM's own MoE (CUTLASS, its non-gated path, DeepGEMM) takes
#: 1.5-5 us more than its trend, on H100 and B200, every dtype, EP, TP and routing alike
#: (docs/time-model.md, "The sort of TensorRT-LLM's MoE past 256 tokens")
FUSED_SORT_TOKENS = 256
#: The top-k whose rows show the one-block sort's step (1, 2, 4, 6, 8 and 22); the top-10 rows
#: (one shape, 512 experts) show none at any EP, TP, dtype or device: their sort takes the
#: kernels of a larger call at every token count
FUSED_SORT_TOPK = (1, 2, 4, 6, 8, 22)


def _drawn_per_sm(batch: KernelBatch, fig: DeviceFigures, sync: np.ndarray) -> np.ndarray:
    """Factor on the weight stream of a MoE whose warps load its weights (Marlin's,
    :data:`MMA_SYNC_MOE`; on ``tcgen05`` the Triton fused MoE's block-scaled path,
    :data:`WARP_LOADED_MOE`): :func:`_warp_loads` of the device; else 1."""
    triton = fig.tcgen05 and batch.dtype in WARP_LOADED_MOE
    drawn = sync | ((col(batch, ALL_PAIRS_MOE, 0) > 0) & triton)
    return np.where(drawn, _warp_loads(fig), 1.0)


def _around_gemms_s(
    batch: KernelBatch,
    fig: DeviceFigures,
    prm: dict[str, float],
    pairs: np.ndarray,
    mats: np.ndarray,
    bw: float,
) -> np.ndarray:
    """:func:`moe_terms`' time beside its two grouped GEMMs: the kernels around them (permute,
    activation, quantize, finalize), the routing, the generic top-k's rounds and the cost per
    expert of the rank, each as the comments below say."""
    hidden = col(batch, "hidden", 1)
    inter = col(batch, "inter", 1)
    sms = fig.sm_count
    # the kernels around the grouped GEMMs (permute, activation, quantize, finalize) stream
    # every (token, expert) row: ``act_passes`` bf16 passes over hidden + intermediate; the
    # rank's rows, or every routed pair's where the kernel keeps a row for each
    # (:data:`ALL_PAIRS_MOE`, the Triton fused MoE)
    assignments = col(batch, "assignments", 0)
    assignments = np.where(assignments > 0, assignments, pairs)
    tokens = col(batch, "tokens", 0)
    routed = np.where(tokens > 0, tokens * col(batch, "topk", 1), assignments)
    every = col(batch, ALL_PAIRS_MOE, 0) > 0
    # (warp-issued loads and stores there: at most Hopper's bytes a clock per SM, _warp_loads)
    warp = np.where(every, _warp_loads(fig), 1.0)
    extra = prm["act_passes"] * assignments * warp * (hidden + inter) * 2.0 / bw
    # the pairs of other ranks' experts, where the kernel keeps a row for each (ALL_PAIRS_MOE):
    # the bytes of its passes over such a row, not fitted (:func:`_remote_pair_bytes`)
    remote = np.where(every, np.maximum(routed - assignments, 0.0), 0.0)
    extra = extra + remote * warp * _remote_pair_bytes(hidden, inter, mats) / bw
    # ``pair_passes`` bf16 passes over every routed pair at the HBM rate, beside those: a
    # kernel's work on the rows of every token entering the rank, local or not, where the
    # kernel has it (:data:`PAIR_STREAM_MOE`: FlashInfer's TensorRT-LLM block-scaled fp8 MoE;
    # default 0): docs/time-model.md, "Every routed pair of TensorRT-LLM-gen's block-scaled fp8
    # MoE"
    streamed = col(batch, PAIR_STREAM_MOE, 0) > 0
    stream = np.where(streamed, prm["pair_passes"], 0.0) * (hidden + inter)
    # and, in the block-scaled fp8 kernel (:data:`BF16_RATE_MOE`), ``pair_fc1_passes`` bf16
    # passes over FC1's output row (gate and up, the rank's intermediate as the kernel pads it,
    # :data:`INTER_PAD_MOE`) of every routed pair, local or not (default 0): its activation
    # kernel apart from the GEMMs, over every routed pair's row, as recalled: docs/time-model.md,
    # "FC1's row of every routed pair in TensorRT-LLM-gen's block-scaled fp8 MoE"
    pad = col(batch, INTER_PAD_MOE, 0)
    padded = np.where(pad > 0, np.ceil(inter / np.maximum(pad, 1.0)) * pad, inter)
    fc1 = streamed & (col(batch, BF16_RATE_MOE, 0) > 0)
    stream = stream + np.where(fc1, prm["pair_fc1_passes"], 0.0) * (mats - 1.0) * padded
    extra = extra + stream * np.maximum(routed, assignments) * 2.0 / bw
    # ``token_s`` of one SM's work on each hidden element of every token entering the rank,
    # local experts or not, in TensorRT-LLM's own MoE (:data:`PAIR_TILE_MOE`) and in
    # FlashInfer's CUTLASS MoE, which wraps it (:data:`CUTLASS_ROWS_MOE`; default 0)
    trt_own = col(batch, PAIR_TILE_MOE, 0) > 0
    trt_rows = trt_own | (col(batch, CUTLASS_ROWS_MOE, 0) > 0)
    extra = extra + np.where(trt_rows, prm["token_s"], 0.0) * tokens * hidden / sms
    # ``row_s`` of one SM's work on each (token, expert) row of the rank, whatever its width,
    # in the same kernels (:data:`PAIR_TILE_MOE`, :data:`CUTLASS_ROWS_MOE`; default 0)
    extra = extra + np.where(trt_rows, prm["row_s"], 0.0) * assignments / sms
    # the sort of the call's (token, expert) pairs by expert in the same kernels: up to
    # :data:`FUSED_SORT_TOKENS` tokens (for the top-k of :data:`FUSED_SORT_TOPK`) one thread
    # block's, ``sort_pair_s`` a pair on its one SM; past them the sort's further kernels, which
    # spread the pairs over the SMs, ``sort_s`` once a call (both default 0)
    sortable = trt_rows & np.isin(col(batch, "topk", 1), FUSED_SORT_TOPK) & (tokens > 0)
    one_block = sortable & (tokens <= FUSED_SORT_TOKENS)
    extra = extra + np.where(one_block, prm["sort_pair_s"] * tokens * col(batch, "topk", 1), 0.0)
    extra = extra + np.where(sortable & ~one_block, prm["sort_s"], 0.0)
    # FlashInfer's TensorRT-LLM-gen MoE: ``sort_pair_s`` a routed pair up to
    # :data:`GEN_TOKEN_KNEE` tokens (:data:`GEN_TOKENS_MOE`)
    gen_tok = np.minimum(tokens, GEN_TOKEN_KNEE) * col(batch, "topk", 1)
    extra = extra + np.where(col(batch, GEN_TOKENS_MOE, 0) > 0, prm["sort_pair_s"] * gen_tok, 0.0)
    # routing every token entering the rank: top-k selection and the gather/scatter indices
    # of all its (token, expert) pairs, local or not, ``route_s`` of one SM's work per pair;
    # behind DeepEP the rank's own tokens, routed before the dispatch (:data:`DEEPEP_ROUTED`)
    own = col(batch, DEEPEP_ROUTED, -1.0)
    routed = np.where(own >= 0, own * col(batch, "topk", 1), routed)
    extra = extra + prm["route_s"] * routed / sms
    # routing each token to more than ``FUSED_TOPK_MAX`` experts leaves the fused top-k
    # kernel for a generic top-k whose ``topk`` selection rounds each end in a reduction over
    # the token's logits: ``select_s`` a round, once a call (its tokens run side by side, so
    # not per token). A fit on a table without a top-k above 8 keeps the default 0
    topk = col(batch, "topk", 1)
    extra = extra + prm["select_s"] * np.where(topk > FUSED_TOPK_MAX, topk, 0.0)
    # a cost per expert of the rank, touched or not (``expert_s``): TensorRT-LLM's block-scaled
    # fp8 MoE takes about 250 ns an expert at one token on H100 and B200 alike (fitted 223 and
    # 260 ns), its bf16 and fp8 19-32 ns, FlashInfer's TensorRT-LLM MoE none (its classes' stand-
    # ins take none: engine_profiles.with_generation_kernels); docs/time-model.md, "A cost per
    # expert of the rank"
    extra = extra + prm["expert_s"] * col(batch, "experts", 0)
    # ``ep_map_s`` once a call of vLLM's Triton MoE with its experts over ranks: the expert
    # map's kernels outside the GEMMs (:data:`EP_MAP_MOE`; default 0)
    extra = extra + np.where(col(batch, EP_MAP_MOE, 0) > 0, prm["ep_map_s"], 0.0)
    # ``hidden_s`` a hidden element, once a call: the latency of one hidden row in the kernels
    # around the GEMMs that give a CTA a row (the permutation with its quantization, the
    # finalize), whose time at a few tokens is one CTA's loop over the row, not the SMs'
    # throughput. Every MoE row and step carries it; fitted in MoE classes of every engine's
    # H100 and B200 profiles (TensorRT-LLM's bf16, fp8 and nvfp4, SGLang's and vLLM's bf16 and
    # fp8 among them; 0.1-7.9 ns, most 0.4-2.2; default 0): docs/time-model.md, "One hidden
    # row's latency in TensorRT-LLM's MoE" and "... in the engines' MoE"
    extra = extra + prm["hidden_s"] * hidden
    return extra


def moe_terms(
    batch: KernelBatch, fig: DeviceFigures, prm: dict[str, float]
) -> dict[str, np.ndarray]:
    """``moe``: the fused routed-expert layer of one rank, two grouped GEMMs (FC1: hidden ->
    (gate and) up, FC2: intermediate -> hidden) over the experts the batch touches, and the
    kernels around them (routing, permute with the activation quantization, the gated
    activation, the weighted finalize)."""
    hidden = col(batch, "hidden", 1)
    inter = col(batch, "inter", 1)
    gated = col(batch, "gated", 1)
    active = np.maximum(col(batch, "active_experts", 1), 1.0)
    mats = np.where(gated > 0, 3.0, 2.0)
    pairs = np.maximum(batch.flops / (2.0 * hidden * inter * mats), 1.0)
    # rows of the most-loaded expert: at least the mean, at most every assignment
    top = col(batch, "max_tokens_per_expert", 0)
    top = np.clip(np.where(top > 0, top, pairs / active), pairs / active, pairs)
    sms = fig.sm_count
    peak = fig.peak(RATE_DTYPE.get(batch.dtype, batch.dtype))
    # a kernel that rescales its blocks off the MMA multiplies at no more than the bf16 rate
    # (:data:`BF16_RATE_MOE`)
    peak = np.where(col(batch, BF16_RATE_MOE, 0) > 0, min(peak, fig.peak("bf16")), peak)
    # a kernel of warp-level mma.sync (Marlin's, ``mma_sync``) multiplies at no more than
    # Hopper's rate per SM and clock (:data:`MMA_SYNC_MOE`)
    sync_peak = peak / max(1.0, round(tensor_per_sm_ratio(fig), 2))
    sync = col(batch, MMA_SYNC_MOE, 0) > 0
    per_sm = prm["eff_compute"] * np.where(sync, sync_peak, peak) / sms
    # a call of a tuned config multiplies ``tuned_rate`` times faster (:data:`TUNED_MOE`)
    per_sm = per_sm * np.where(col(batch, TUNED_MOE, 0) > 0, prm["tuned_rate"], 1.0)
    # the two GEMMs run one after the other, each with its own waves of output tiles: FC1
    # (N = (mats - 1) x inter, K = hidden) and FC2 (N = hidden, K = inter); each reads its
    # share of the touched experts' weights, drawing HBM with the SMs its tiles keep busy
    # (the library's profiler picks each GEMM's fastest tile: the shortest time is taken).
    # Arrays of (GEMM, tile, row).
    # (TensorRT-LLM-gen's kernels pad the rank's intermediate size to a multiple of their
    # :data:`INTER_PAD_MOE` rows in both GEMMs)
    pad = col(batch, INTER_PAD_MOE, 0)
    padded = np.where(pad > 0, np.ceil(inter / np.maximum(pad, 1.0)) * pad, inter)
    # (FlashInfer's MXFP4 kernels the hidden size as well, :data:`HIDDEN_PAD_MOE`)
    h_pad = col(batch, HIDDEN_PAD_MOE, 0)
    hidden_p = np.where(h_pad > 0, np.ceil(hidden / np.maximum(h_pad, 1.0)) * h_pad, hidden)
    n = np.array([padded * (mats - 1.0), hidden_p])[:, None, :]
    k = np.array([hidden_p, padded])[:, None, :]
    spread = col(batch, ROWS_SPREAD, 0)
    m_tiles = _moe_m_tiles(_MOE_TM, active, pairs, top, spread)
    for t_i, tm in enumerate(_MOE_TM[:, 0]):  # a power-law row's own count (ROW_TILES_COL)
        drawn = col(batch, f"{ROW_TILES_COL}{int(tm)}", 0)
        m_tiles[t_i] = np.where(drawn > 0, drawn, m_tiles[t_i])
    tiles = m_tiles * np.ceil(n / _MOE_TN)
    waves = np.ceil(tiles / sms - _WAVE_NOISE)
    # a kernel whose row tile is fixed by the call (``row_tile``, set by the mapping) takes
    # only the tiles of that many rows
    # (a model step's MXFP4 experts run the Triton kernel the measured rows time, by the same
    # rule, :func:`triton_moe_row_tile`)
    if "row_tile" in batch.shape or batch.dtype != "w4a16_mxfp4":
        row_tile = col(batch, "row_tile", 0)
    else:
        row_tile = triton_moe_row_tile(
            col(batch, "tokens", 1), col(batch, "topk", 1), col(batch, "experts", 1)
        )
    # each wave of tiles also pays ``tile_s`` beside its main loop: filling the operand
    # pipeline, the epilogue's stores, the scheduler's switch to the next expert's problem.
    # The Triton fused MoE's tiles (its config's, one CTA's) need the operand reuse of a
    # device's tensor rate per SM, as a dense GEMM's do (:data:`TRITON_MOE_KERNELS`); so do
    # TensorRT-LLM's own grouped GEMMs on ``tcgen05`` (:data:`PAIR_TILE_MOE`) where the call
    # fixes no row tile, which also have the SM pair's 256 x 256 tile, at the full rate
    # (:data:`_MOE_PAIR`)
    paired = fig.tcgen05 & (row_tile <= 0) & (col(batch, PAIR_TILE_MOE, 0) > 0)
    rate = _MOE_RATE
    if batch.variant in TRITON_MOE_KERNELS or paired.any():
        reused = tile_rate(_MOE_TM, _MOE_TN, operand_reuse(fig))
        rate = reused if batch.variant in TRITON_MOE_KERNELS else np.where(paired, reused, rate)
    # each GEMM's first wave also pays ``first_wave`` main loops more: a tile alone on its SM
    # waits on its own operand pipeline, which later waves' tiles overlap (fitted in
    # TensorRT-LLM's B200 w4a8 MXFP4 and min-latency nvfp4 classes, TensorRT-LLM-gen's kernel:
    # its one-wave w4a8 rows ran at 0.20-0.27 of the fp8 rate per SM, its many-wave rows at
    # 0.49; docs/time-model.md, "The first wave of TensorRT-LLM-gen's w4a8 MoE tiles"; 0 in
    # every other class)
    main_loop = 2.0 * _MOE_TM * _MOE_TN * k / (per_sm * rate)
    candidates = waves * (main_loop + prm["tile_s"]) + prm.get("first_wave", 0.0) * main_loop
    # a call that fixes its tile's columns too (``col_tile``, the Triton MoE's default config)
    # takes that one tile; else the row tile's, or any tile of the library's list
    col_tile = col(batch, "col_tile", 0)
    # (TensorRT-LLM-gen's 8-row tile is the 8 x 128 one, :data:`TRTLLM_GEN_MIN_TILE`)
    allowed = np.where(
        row_tile > 0,
        (row_tile == _MOE_TM) & np.where(col_tile > 0, col_tile == _MOE_TN, _MOE_FREE | _MOE_8),
        _MOE_FREE,
    )
    if fig.tcgen05 and batch.dtype in BLOCK_SCALED_MMA and batch.variant not in TRITON_MOE_KERNELS:
        # tcgen05's block-scaled MMA has no shape under 128 rows (the GEMM's rule,
        # :data:`~mlacalc.timemodel.gemm_time.BLOCK_SCALED_MMA_ROWS`): a grouped GEMM free to
        # pick its tile pads each expert's rows to 128 at least (not a kernel that fixes its
        # row tile by the tokens, TensorRT-LLM-gen's, nor one that rescales off the MMA,
        # :data:`BF16_RATE_MOE`)
        free = (row_tile <= 0) & (col(batch, BF16_RATE_MOE, 0) <= 0)
        allowed = allowed & ~(free & (_MOE_TM < BLOCK_SCALED_MMA_ROWS))
    # TensorRT-LLM-gen's 8-row tile beside the list where the model leaves its tile free
    # (:data:`GEN_ROWS8_MOE`)
    allowed = allowed | ((row_tile <= 0) & (col(batch, GEN_ROWS8_MOE, 0) > 0) & _MOE_8)
    allowed = np.where(_MOE_PAIR, paired, allowed)
    candidates = np.where(allowed, candidates, np.inf)
    if batch.dtype == "fp8_block" and (not fig.tcgen05 or batch.variant in TRITON_MOE_KERNELS):
        # block scaling, as in the GEMM (none where the MMA applies the scales, ``tcgen05``,
        # except in the Triton fused MoE, which scales each K block's product itself on every
        # generation, :data:`TRITON_MOE_KERNELS`): after each 128-deep K block a tile rescales
        # its partial product into its fp32 accumulator on the CUDA cores, ``promote_cycles``
        # per output element and block. Not fitted: the physical default (one FMA on the 128
        # lanes of an SM)
        candidates = candidates + waves * _MOE_TM * _MOE_TN * np.ceil(k / SCALE_BLOCK_K) * (
            prm["promote_cycles"] / fig.clock_hz
        )
    best = np.argmin(candidates, axis=1)
    compute = candidates.min(axis=1).sum(axis=0)
    units = tiles[_MOE_GEMMS, best, np.arange(len(batch))]
    bw = prm["eff_memory"] * fig.hbm_bytes_per_s
    share = memory_share(units, fig, prm)
    # the Triton fused MoE at its default config: a wave of its CTAs draws ``wave_draw`` of the
    # HBM whatever their count, each further wave's worth of CTAs as much again
    # (:func:`wave_drawn`)
    drawn_waves = np.minimum(
        1.0, prm["wave_draw"] * np.maximum(units, sms) / sms / _warp_loads(fig)
    )
    share = np.where(wave_drawn(batch, col_tile), drawn_waves, share)
    # (with FlashInfer's TensorRT-LLM-gen MoE's padded weights, :func:`_padded_weight_bytes`)
    streamed = batch.bytes + _padded_weight_bytes(batch, active, mats, padded, hidden_p)
    memory = streamed / bw * ((mats - 1.0) / share[0] + 1.0 / share[1]) / mats
    memory = memory * _drawn_per_sm(batch, fig, sync)  # the warps' loads (Marlin's, Triton's)
    extra = _around_gemms_s(batch, fig, prm, pairs, mats, bw)
    # the Triton fused MoE at its default config: every CTA of a row tile's column strip loads
    # its rows' activations again (gathered by the sorted pair ids; the padded rows masked, so
    # only the rank's routed pairs), so each pair's bf16 activation row is read once a column
    # tile of each GEMM (of 64 columns at least, :data:`REREAD_COLS`): ``reread_passes``
    # (default 0) of those bytes at the HBM rate (:func:`reread_bytes`)
    if prm["reread_passes"] > 0:
        reread = reread_bytes(batch, col_tile, mats)
        extra = extra + np.where(wave_drawn(batch, col_tile), prm["reread_passes"], 0.0) * (
            reread / bw
        )
    # ``ep_row_s`` a row of the row tile (block_m: ``row_tile`` above, the call's or
    # :func:`triton_moe_row_tile`'s) once a call of the triton_kernels MXFP4 MoE behind vLLM's
    # expert map (:data:`EP_MAP_MOE`; default 0): its EP rows step with the tile, not the
    # tokens (:data:`EP_ROW_MOE`)
    if batch.dtype in EP_ROW_MOE and (col(batch, EP_MAP_MOE, 0) > 0).any():
        extra = extra + np.where(col(batch, EP_MAP_MOE, 0) > 0, prm["ep_row_s"] * row_tile, 0.0)
    rows_tiles = m_tiles[best, np.arange(len(batch))]
    extra = extra + _weights_again_s(batch, fig, rows_tiles, active, mats, bw)
    # FC2 of the Triton fused MoE at an intermediate size off Triton's alignment
    # (:data:`UNALIGNED_K_MOE`)
    extra = extra + _unaligned_rows_s(batch, m_tiles, prm)
    return {"compute_s": compute, "memory_s": memory, "extra_s": extra}


def _padded_weight_bytes(
    batch: KernelBatch,
    active: np.ndarray,
    mats: np.ndarray,
    padded: np.ndarray,
    hidden_p: np.ndarray,
) -> np.ndarray:
    """Bytes FlashInfer's TensorRT-LLM-gen MoE (:data:`GEN_TOKENS_MOE`, SGLang's and vLLM's B200
    rows and steps) streams beyond its row's weights: it holds each expert's FC1 and FC2 padded
    as its GEMMs take them (:data:`INTER_PAD_MOE`, the rank's intermediate to ``padded``; its
    MXFP4 kernels' hidden size to ``hidden_p``, :data:`HIDDEN_PAD_MOE`), so the ``active``
    experts' padding streams with them. 0 elsewhere (TensorRT-LLM's own TensorRT-LLM-gen rows
    keep their bytes): docs/time-model.md, "FlashInfer's TensorRT-LLM-gen MoE streams its padded
    weights"."""
    held = (col(batch, GEN_TOKENS_MOE, 0) > 0) & (col(batch, INTER_PAD_MOE, 0) > 0)
    beyond = np.maximum(hidden_p * padded - col(batch, "hidden", 1) * col(batch, "inter", 1), 0.0)
    per_element = MOE_WEIGHT_BYTES.get(batch.dtype, 2.0)
    return np.where(held, active * mats * beyond * per_element, 0.0)


def _weights_again_s(
    batch: KernelBatch,
    fig: DeviceFigures,
    rows_tiles: np.ndarray,
    active: np.ndarray,
    mats: np.ndarray,
    bw: float,
) -> np.ndarray:
    """FlashInfer's TensorRT-LLM-gen MoE (:data:`GEN_TOKENS_MOE`) reads an expert's weights
    again for each of its row tiles after the first, less what stays in the L2 between them
    (half the device's L2 a GEMM): ``rows_tiles`` (GEMM, row) the row tiles each GEMM runs
    over the rank's ``active`` experts; an expert's weights at :data:`MOE_WEIGHT_BYTES`.
    Additive (the GEMM waits on them): docs/time-model.md, "TensorRT-LLM-gen's MoE
    reads a large expert's weights again for each row tile"."""
    gen = (col(batch, GEN_TOKENS_MOE, 0) > 0) & (col(batch, BF16_RATE_MOE, 0) <= 0)
    if not gen.any():
        return np.zeros(len(batch))
    # FC1's and FC2's weights of an expert
    expert = (
        col(batch, "hidden", 1) * col(batch, "inter", 1) * MOE_WEIGHT_BYTES.get(batch.dtype, 2.0)
    )
    gemm = expert * np.array([mats - 1.0, np.ones_like(mats)])
    missed = np.maximum(gemm - WEIGHTS_HELD * fig.l2_bytes, 0.0)
    again = np.maximum(rows_tiles - active, 0.0)  # row tiles past each expert's first
    return np.where(gen, (again * missed).sum(axis=0) / bw, 0.0)
