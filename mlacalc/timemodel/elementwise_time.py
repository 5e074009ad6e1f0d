"""The streaming classes of the time model: ``elementwise`` and ``quantize`` kernels (and any
kind without a class of its own).

Terms: the bytes at ``eff_memory`` of the HBM bandwidth, drawn by one work unit per 64 KB, or
per row where the kernel gives each row a CTA (``units``; a small kernel leaves SMs idle:
``sm_bandwidth``); a warm replay's quantize input read from the
L2 at ``l2_speedup``; the FLOPs at the CUDA-core rate; the fixed cost of each further graph
node of the call (``launches``). The linear-attention kernels of :data:`SM_BOUND_VARIANTS` draw
bytes at a rate per SM and clock, capped by the HBM; a chunked kernel's units walk their chunks
one after another (``chunks``, ``seq_heads``), ``unit_latency_s`` a chunk; TensorRT-LLM's
prompt conv's CTAs wait ``unit_latency_s`` each, overlapped with its traffic
(:data:`CTA_WALK_VARIANTS`).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from mlacalc.timemodel.device import DeviceFigures
from mlacalc.timemodel.shared import (
    REFERENCE_CLOCK_HZ,
    col,
    combine,
    hbm_per_sm_ratio,
    l2_resident_share,
    memory_share,
    mma_rows,
)
from mlacalc.words.kernels import KernelBatch

__all__ = [
    "AMAX_BLOCK_ELEMENTS",
    "AMAX_GRID_BLOCKS",
    "CONV_BLOCK_TOKENS",
    "CONV_CTA_CHANNELS",
    "CTA_WALK_NORM",
    "CTA_WALK_VARIANTS",
    "FUSED_WALK_NORM",
    "HOPPER_DRAW_VARIANTS",
    "L2_PER_SM_KINDS",
    "OWN_CONV",
    "SLOT_DRAW_VARIANTS",
    "SM_BOUND_VARIANTS",
    "SM_BYTES_PER_CLOCK",
    "TOKEN_BLOCK_ENGINES",
    "TOPK_VARIANTS",
    "VECTOR_TOKENS",
    "engine_linear_kernel",
    "per_sequence_conv",
    "streaming_terms",
    "token_block_conv",
]

#: Channels one CTA of TensorRT-LLM's Mamba-2 prompt conv1d kernel takes (``units``: its CTAs
#: over the sequences), inferred from its rows, not from its source; its waits are linear in
#: these CTAs (:data:`CTA_WALK_VARIANTS`): the block size only scales the fitted wait.
CONV_CTA_CHANNELS = 32

#: The top-k selections of the sparse-attention indexers (SGLang's ``fast_topk_transform_fused``
#: per score mode, DeepSeek-V4's ``topk_transform_v1`` / ``_v2``): one CTA walks a row's logits.
TOPK_VARIANTS = (
    *(f"topk_{v}{m}" for v in ("", "v1_", "v2_") for m in ("flat", "top_last")),
    "topk_v1_flat_long",  # the v1 transform's path past 16,384 keys a row (flat logits)
    "topk_v2_long",  # the v2 transform's path past 16,384 keys a row (any logits)
    "topk_trtllm_decode",  # TensorRT-LLM's decode top-k of a DSA layer (cost.compressed)
    "topk_vllm_prompt",  # vLLM's DeepSeek-V4 CSA prompt top-k (cost.compressed.ROW_TOPK_PROMPT)
    "topk_vllm_prompt_short",  # its path for a call of rows up to 1,024 keys (ROW_TOPK_SHORT_KEYS)
    "topk_vllm_prompt_wide",  # its path for a call of a row past 4,096 keys (ROW_TOPK_WIDE_KEYS)
)

#: SGLang's DeepSeek-V4 prompt top-k (``topk_transform_v1``, the classes named here) scales
#: with its top-k (shape ``index_topk``: 512 for DeepSeek-V4-Flash, 1,024 for -Pro) both ways:
#: a selecting row's CTA draws bandwidth ``(index_topk / SLOT_REF) ** slot_draw`` times a
#: 512-slot one's (more slots, more threads with loads in flight), and waits its passes
#: ``(index_topk / SLOT_REF) ** slot_wait`` times as long a wave (the final passes write and
#: transform each slot), both exponents fitted. ``dsv4_csa_topk_calib_perf`` times the same
#: shapes for both models: at up to 128 queries past 65,536 cached tokens Pro's rows take
#: 0.52-0.62x Flash's on H100 (B200 0.52-0.77x: a long row's walk), at 512 queries and more
#: over 1,025-4,096 pooled keys 1.12-1.35x on H100 and 1.28-1.53x on B200 (top-last logits:
#: the selections' waves), where one class gave them the same time: Flash's long rows of up to
#: 128 queries 18-29% short and Pro's 21-23% over at the median (docs/time-model.md, "SGLang's
#: v1 top-k by its top-k").
SLOT_REF = 512.0
SLOT_DRAW_VARIANTS = ("topk_v1_flat", "topk_v1_top_last", "topk_v1_flat_long")

#: The top-k kernels timed on their own tables (SGLang's, warm replays of one input) whose
#: logits a call finds in the L2 while they fit: ``dsv4_csa_topk_calib_perf``'s rows of more
#: than 128 queries over long rows flip from 10-20% fast to 15-40% slow where the logits they
#: read pass 33.5 -> 67 MB on H100 (50 MB of L2) and 67 -> 134 MB on B200 (126 MB), at every
#: row length (pooled keys x queries a constant). The residual-fitted variants keep none.
WARM_TOPK_VARIANTS = tuple(
    v for v in TOPK_VARIANTS if v != "topk_trtllm_decode" and not v.startswith("topk_vllm_prompt")
)

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

#: Streaming kernels whose work units (64 KB pieces) each draw Hopper's HBM bytes a clock per SM
#: (``sm_bandwidth`` in multiples of H100's HBM over its SMs, on any device), not a share of the
#: device's own HBM over its SMs: DeepSeek-V4's hyper-connection kernels (variants ``mhc_pre``
#: and ``mhc_post``, every engine's main kernel of each op). Their small calls take the same
#: time on B200 as on H100 (vLLM's ``post`` at 1-96 tokens of 4,096: 6.2-7.1 us on H100, 6.6-8.6
#: on B200; ``pre`` at 1-8 tokens of 7,168: 20.8-21.2 and 22.9-23.0 us), where a unit's share of
#: the HBM over the SMs draws 2x on B200 (:func:`~mlacalc.timemodel.shared.hbm_per_sm_ratio`):
#: a unit draws the loads its threads keep in flight (Little's law), bytes a clock. B200's fits
#: of the share pinned ``sm_bandwidth`` at its lower bound (0.5), and each device's fit timed
#: the other's calls under 1,024 tokens 17-56% off at the median (docs/time-model.md); the
#: large ``post`` calls reach the same 0.81-0.84 of either HBM.
#: On H100 (ratio 1) nothing changes. Not TensorRT-LLM's other ``pre`` kernels
#: (``mhc_pre_trtllm_*``: a split-K GEMM and a CUDA-core FMA kernel, measured on B200 alone; the
#: FMA kernel's fit, far from any HBM rate at 0.08 of it, went 3.6% -> 13.2% off with this draw).
HOPPER_DRAW_VARIANTS = ("mhc_pre", "mhc_post")

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

#: Kinds whose warm replays read their resident input from the L2 at a rate that follows the SMs and
#: clock (``l2_speedup`` times :data:`SM_BYTES_PER_CLOCK` a SM and clock), not the HBM: the quantize
#: kernels. Fitted with the L2 in multiples of the HBM, H100's tables found resident reads at 2.15x
#: (TensorRT-LLM's static quantize) and 3.3x (vLLM's) its HBM, B200's none (``l2_speedup`` 1.0,
#: ``l2_share`` 0.01-0.03: the fit switched the L2 off), and each device's fit predicted the other's
#: rows of 2-60 MB 28-89% slow (H100) or 25-51% fast (B200). B200's 148 SMs at 1,856 MHz draw 1.14x
#: H100's bytes a clock from their L2 where its HBM is 2.3x: H100's 7.2 TB/s of resident reads,
#: carried to B200's SMs and clock (8.2 TB/s), is 1.06x B200's HBM, about the nothing B200's fit
#: found. With this rule B200's TensorRT-LLM fits find an L2 again (``l2_share`` 0.38 and 0.36
#: against H100's 0.53 and 0.37) and leaving the device out improves: docs/time-model.md, "The
#: quantize kernels' L2 and floors". Not the recurrent decode state's resident reads
#: (:func:`_resident_state`): their fits agree in multiples of the HBM (SGLang 1.73 / 1.45, vLLM
#: 1.78 / 1.55 on H100 / B200).
L2_PER_SM_KINDS = ("quantize",)

#: Elements of its row a token's CTA of vLLM's per-tensor quantize kernels
#: (``mapping.TOKEN_CTA_QUANTIZE_ENGINES``) takes a pass: it walks the row in whole blocks of
#: them, a row's last block costing a whole one. Inferred from the tables, not the source: its
#: dynamic-less-static difference (``computescale_perf``) at 1-16 tokens takes 0.6-0.7 us at
#: every k up to 4,096, 1.1-1.2 at 5,120-8,192, 1.6-1.7 at 10,240-12,288, 2.1 at 16,384, 6.4 at
#: 51,200 (13 blocks), 7.9 at 65,536 (16), on H100 and B200 alike (0.45-0.48 us a block); its
#: static call (``scale_matrix_perf``) steps at the same k (H100 one token: 1.9-2.1, 2.3-2.4,
#: 2.8, 3.2 us). (From recall, vLLM's per-token kernels launch min(k, 1,024) threads a token,
#: csrc/quantization/fp8/common.cu: 4,096 is 1,024 threads of 4 elements; not checked.)
QUANT_CTA_ELEMENTS = 4096

#: TensorRT-LLM's stand-alone per-tensor amax (its ``computescale_perf`` rows: the scale's reset,
#: then ``computeFP8QuantizeScale``): a fixed grid of AMAX_GRID_BLOCKS blocks of
#: AMAX_BLOCK_ELEMENTS threads striding over the elements, each block folding its maximum into
#: the one fp32 scale (the grid and block as recalled of TensorRT-LLM's quantization kernels,
#: not read from a source here). The blocks that hold elements, min(AMAX_GRID_BLOCKS,
#: elements / AMAX_BLOCK_ELEMENTS), each add ``amax_block_s``, one after another (their folds
#: on one address; the rows do not tell that from their launches). Read from B200's rows: the
#: call takes 8.7-8.8 us up to 0.36 M elements, rises to 10.4 at 1 M and 11.5 at 2 M, then stays
#: at 11.5-12.5 us to 6 M (the HBM's share only past it), where the bandwidth terms alone rose
#: 9.1 -> 9.9 us; H100's rise 7.7 -> 8.8 us over the same sizes. Least squares over the shipped
#: predictions with a per-block cost and a shift of the floor: 1,024 elements a block fits best
#: (B200 median 6.8% -> 3.3%; 2,048: 4.0%, 4,096: 4.3%), 2.0 ns a block on B200 and 0.5 on H100.
AMAX_BLOCK_ELEMENTS = 1024
AMAX_GRID_BLOCKS = 1024

#: CTAs of vLLM's per-token quantize kernels an SM holds at once (a wave: 1,056 on H100), inferred
#: from its amax table's steps of about 1 us each 1,056 tokens on H100 at k >= 256 (1,280, 2,304,
#: 3,328, 4,352 tokens), not from the source. Its dynamic call (the amax table,
#: ``computescale_perf``: ``dynamic_per_token_scaled_fp8_quant`` less the static call) reads a
#: token's row a second time while the L2 still holds it: the rows of a wave, read and written (3
#: bytes an element), against the share of the L2 a kernel's operands keep (``l2_resident_share``).
#: H100's rows: at 1,025-4,352 tokens the difference is flat in the tokens at k = 10,240-12,288 (a
#: wave's rows 32-39 MB: the L2, the fits' share of it 35 MB) and grows 6 us a 1,000 tokens at
#: 16,384 (52 MB: about half from the HBM), and past 50 MB of input the dynamic call moves its 3
#: bytes an element at the static call's 2.8-3.0 TB/s up to k = 8,192, at 2.6, 2.3, 1.9 TB/s at
#: 12,288, 16,384, 65,536 (1.8 TB/s: the HBM's rate for 5 bytes an element).
QUANT_WAVE_CTAS_PER_SM = 8

#: Threads of a token's CTA in vLLM's per-token quantize kernels: min(k, TOKEN_CTA_THREADS). The
#: 1,056-token wave of its amax table on H100 (8 CTAs an SM, :data:`QUANT_WAVE_CTAS_PER_SM`) is
#: 2,048 threads an SM over 256 a CTA; a CTA of 1,024 would give waves of 264. Read from the rows,
#: not the source.
TOKEN_CTA_THREADS = 256
#: Threads of one warp: a CTA of one warp reduces its token's maximum by the warp's shuffles.
WARP_THREADS = 32

#: The p of the p-norm over which each of vLLM's two per-token quantize calls (the amax table's
#: dynamic and static ones) overlaps its CTAs' waits (``unit_latency_s`` each CTA an SM runs in
#: turn, and the dynamic call's reductions, :func:`token_reduce_share`) with its traffic: a
#: CTA waiting on its barrier while the SM's other CTAs stream. The table is the difference of
#: the two overlapped calls, so the dynamic call's reductions hide where the static call is
#: bound by its traffic: H100's difference at 16,384 tokens falls with k as the static call's
#: bytes grow (14.1, 8.5, 5.7, 2.3 us at k = 1,024, 2,048, 3,072, 4,096, against 19, 36, 52,
#: 68 us of static call), where the waits added after the traffic read 13-17 us (to +1,086%).
#: The dynamic call fits a 2-norm (16,384 tokens: a wait of about 27 us and the static call's
#: traffic, 17-68 us, give 32, 43, 58, 73 us against 33, 44, 57.5, 70.6 measured). Chosen, not
#: fitted: the class refitted at p = 1.5 / 2 / 3 reads H100 6.8% / 6.7% / 9.9% median (p90
#: 27.0 / 27.6 / 52.8%), B200 7.1 / 6.5 / 6.5% (48.0 / 48.7 / 49.6%); the waits added after
#: the traffic (before) 7.7% / 29.2% and 7.6% / 50.3%.
AMAX_WAIT_NORM = 2.0

#: The share of a full CTA's reduction wait (:func:`token_reduce_share`) that a CTA of 2-7
#: warps (vLLM's per-token quantize at 32 < k < 256) waits: the measured shares, H100 / B200,
#: are 0.5 / 0.3 at k = 64 and 0.25 / 0.3 at k = 128, not growing with the CTA's threads (the
#: rule before, t / 256: 0.25 and 0.5, ran against H100's fall and B200's flat pair). Read
#: from B200's two points and H100's k = 128, not fitted: the class refitted with 0.3 / 0.4
#: reads H100 6.6% / 6.5% median (p90 25.4% / 24.6%), B200 6.4% / 6.6% (47.1% / 48.7%), against
#: 6.7% / 27.6% and 6.5% / 48.7% at t / 256.
PART_CTA_REDUCE_SHARE = 0.3


def token_reduce_share(row: np.ndarray) -> np.ndarray:
    """The share of a full CTA's wait that the dynamic per-token call adds for each CTA an SM
    past its first (vLLM's amax table: the dynamic call less the static one; ``unit_latency_s``
    is a CTA of :data:`TOKEN_CTA_THREADS` threads). A CTA of min(k, 256) threads reduces its
    token's maximum across its warps (a block-wide barrier, the warps' partials folded) before
    it scales, and that wait hides behind the other CTAs the SM holds. A full CTA (k >= 256)
    waits it whole; a CTA of 2-7 warps (32 < k < 256) :data:`PART_CTA_REDUCE_SHARE` of it; a
    CTA of one warp (k <= 32) reduces by its own shuffles: nothing past the static call's
    wait. Measured (the difference at 16,384 and 32,768 tokens over the CTAs an SM, k <= 1,024,
    where the bytes are few; H100 / B200): k = 32 0-1 / 0 ns a CTA, k = 64 61 / 57-59, k = 128
    30-32 / 56-61, k = 256-1,024 107-125 / 181-216: shares 0, 0.5 / 0.3, 0.25 / 0.3, 1."""
    part = np.where(row < TOKEN_CTA_THREADS, PART_CTA_REDUCE_SHARE, 1.0)
    return np.where(row <= WARP_THREADS, 0.0, part)


#: Streaming kernels whose CTAs' waits overlap their traffic (not added after it): TensorRT-LLM's
#: prompt conv1d, one kernel for Mamba-2's and Gated DeltaNet's convs (their fits agree: a
#: CTA's wait 3.6 us and ``scalar_load`` 1.29-1.31 on both devices; a row without ``units``,
#: another engine's, has no such wait). Mamba-2's time per sequence is flat from 8 to 512
#: tokens (H100, 6,144 channels: 8.6-9.6 us for one sequence, 5.5-6.4 us each of eight) and
#: grows with the tokens
#: from 1,024 on (11.7, 20.2, 39.7, 75.8 us each of eight at 1K-8K tokens: 64-79% of the HBM),
#: the corner of a wait and a stream overlapped; and the wait is linear in its CTAs, not in
#: whole waves of them (one-token rows of one sequence: 5.2, 10.3, 15.0, 23.9, 26.4 us at 48,
#: 192, 320, 576, 640 CTAs of 32 channels, 3.5 us plus 0.036 us a CTA; 576 and 640 CTAs are
#: both five waves of 132), as a kernel whose CTAs are many to an SM waits.
CTA_WALK_VARIANTS = ("mamba2_conv1d", "conv1d")

#: The p of the p-norm of :data:`CTA_WALK_VARIANTS`' waits and traffic. Chosen, not fitted:
#: TensorRT-LLM's ``mamba2_perf`` prompt rows (592 H100, 619 B200), the class refitted at each
#: p (with ``scalar_load``): see docs/time-model.md.
CTA_WALK_NORM = 2.0

#: Tokens of a sequence one CTA of SGLang's and vLLM's prompt conv1d walks one after another
#: (:func:`token_block_conv`), inferred from their rows, not from the source: at one sequence
#: their time grows with its tokens up to 8-16 and is flat from there until its traffic counts
#: (H100, 512-12,288 channels: 2.2, 2.4, 2.6, 3.5, 3.9, 3.9 us at 1, 2, 4, 8, 16, 32 tokens;
#: vLLM's 2.2-2.3, 2.4-2.5, 2.6-2.7, 3.6-3.8, 4.0-4.1); before, one to four tokens were 30-50%
#: slow and eight to 64 at small batches 10-25% fast. 8 is chosen over 16 on their p90
#: (docs/time-model.md).
CONV_BLOCK_TOKENS = 8

#: The engines whose prompt conv1d walks :data:`CONV_BLOCK_TOKENS` (their ``gdn_perf`` rows).
TOKEN_BLOCK_ENGINES = ("sglang", "vllm")

#: The class a Mamba-2 conv of :data:`TOKEN_BLOCK_ENGINES` is timed by: the same kernels as
#: their Gated DeltaNet convs (``mamba2_perf``, TensorRT-LLM's table, times another kernel).
OWN_CONV = {"mamba2_conv1d": "conv1d", "mamba2_conv1d_update": "conv1d_update"}

#: Tokens one thread of TensorRT-LLM's conv1d loads at once (16 bytes of bf16): a sequence of
#: a multiple of them takes the vectorised loads, any other the slower path (``scalar_load``):
#: one to four tokens a sequence take 1.3x the time of eight to 512 on both devices (H100,
#: 6,144 channels, eight sequences: 7.2-7.3 us each against 5.5-6.4; B200 6.7 against 5.2-5.6).
VECTOR_TOKENS = 8


def engine_linear_kernel(batch: KernelBatch, engine: str, fig: DeviceFigures) -> KernelBatch:
    """A model step's linear-attention kernels (:data:`~mlacalc.words.kernels.LINEAR_VARIANTS`)
    as ``engine`` runs them, as its ``gdn_perf`` and ``mamba2_perf`` rows time them: vLLM's
    chunked delta rule is FlashInfer's fused kernel (``fused``: its chunks' walk overlapped
    with its traffic, which is the step's bytes), the other engines' flash-linear-attention's
    kernels, which also pass their intermediates through HBM (the step's ``fla_bytes``);
    TensorRT-LLM's prompt conv1d kernel runs :data:`CONV_CTA_CHANNELS`-channel CTAs a sequence
    (:func:`per_sequence_conv`), SGLang's and
    vLLM's walk up to :data:`CONV_BLOCK_TOKENS` tokens a sequence (:func:`token_block_conv`). A
    measured row, which names its kernel, has neither field nor ``seqs`` and is left as it
    is. ``fig`` is unused: no rule here depends on the device."""
    del fig
    shape = batch.shape
    if batch.variant == "gdn_chunk" and "fla_bytes" in shape:
        if engine == "vllm":  # a tile a (sequence, head): its unit
            fused = dict(shape, fused=np.ones(len(batch)), tiles=col(batch, "seq_heads", 0))
            fused["chunk_tokens"] = np.zeros(len(batch))  # no walk of a chunk's tokens
            return dataclasses.replace(batch, shape=fused)
        tiles = col(batch, "seq_heads", 0) * col(batch, "chunks", 0)
        return dataclasses.replace(
            batch, bytes=batch.bytes + shape["fla_bytes"], shape=dict(shape, tiles=tiles)
        )
    if "seqs" not in shape or "channels" not in shape:
        return batch
    channels = shape["channels"]
    tokens = col(batch, "elements", 0) / np.maximum(channels, 1)  # its output: tokens x channels
    if engine == "trtllm":
        fields = per_sequence_conv(batch.variant, shape["seqs"], channels, tokens)
    elif engine in TOKEN_BLOCK_ENGINES:
        # their Mamba-2 conv is their Gated DeltaNet conv's kernel (the mamba ops'
        # causal_conv1d_fn and its update), timed by its classes: mamba2_perf is TensorRT-LLM's
        own = OWN_CONV.get(batch.variant, batch.variant)
        batch = dataclasses.replace(batch, variant=own)
        fields = token_block_conv(own, shape["seqs"], tokens)
    else:
        return batch
    return dataclasses.replace(batch, shape={**shape, **fields}) if fields else batch


def per_sequence_conv(
    variant: str,
    seqs: np.ndarray,
    channels: np.ndarray | None,
    tokens: np.ndarray | None = None,
) -> dict:
    """The shape fields of TensorRT-LLM's prompt conv1d kernel (``variant`` ``conv1d`` or
    ``mamba2_conv1d``; ``{}`` for any other): :data:`CONV_CTA_CHANNELS`-channel CTAs a
    sequence (``units``: a wait of ``unit_latency_s`` a CTA's share of the SMs,
    :data:`CTA_WALK_VARIANTS`; ``scalar_load`` where the ``tokens`` a sequence are not a
    multiple of :data:`VECTOR_TOKENS`). The one rule for a measured row
    (``mlacalc.measured.mapping``) and a model step (:func:`engine_linear_kernel`)."""
    if variant not in CTA_WALK_VARIANTS:
        return {}
    out = {"units": seqs * np.ceil(channels / CONV_CTA_CHANNELS)}
    if tokens is not None:
        out["scalar_load"] = (np.round(tokens / seqs) % VECTOR_TOKENS != 0) * 1.0
    return out


def token_block_conv(variant: str, seqs: np.ndarray, tokens: np.ndarray) -> dict:
    """The shape fields of SGLang's and vLLM's prompt conv1d kernel (``variant`` ``conv1d``;
    ``{}`` for any other): each CTA walks its block's tokens one after another, at most
    :data:`CONV_BLOCK_TOKENS` of a sequence (``chunks``, one unit: ``unit_latency_s`` a
    token). The one rule for a measured row (``mlacalc.measured.mapping``) and a model step
    (:func:`engine_linear_kernel`)."""
    if variant != "conv1d":
        return {}
    q = np.round(np.asarray(tokens, dtype=np.float64) / np.maximum(seqs, 1))
    return {"chunks": np.minimum(q, CONV_BLOCK_TOKENS), "seq_heads": np.ones(len(q))}


def _resident_state(batch: KernelBatch, fig: DeviceFigures, prm: dict[str, float]) -> np.ndarray:
    """The bytes of a recurrent decode kernel's state (``state_bytes``, read and written in
    place) that a warm replay (``warm_l2``) finds in the L2: all of it while the state fits in
    the share of the L2 a kernel's operands keep, none from twice that (the quantize rule)."""
    state = col(batch, "state_bytes", 0)
    share = l2_resident_share(state, fig, prm)
    return np.where(col(batch, "warm_l2", 0) > 0, share * np.minimum(2.0 * state, batch.bytes), 0.0)


def _token_amax(batch, fig, prm, rows, bw, l2_bw) -> np.ndarray:
    """vLLM's amax table (``computescale_perf``: its dynamic per-token call less its static one) as
    the difference of two calls' memory times, not one more pass: the static call moves 3 bytes
    an element (the bf16 read, the fp8 write), the dynamic one the same and a second read of
    each token's row from the L2 (from the HBM by the share of a wave's rows the L2 no longer
    holds, :data:`QUANT_WAVE_CTAS_PER_SM`). All of a call's bytes pass the L2, at ``l2_speedup``
    times Hopper's HBM bytes a SM and clock (:data:`L2_PER_SM_KINDS`), its HBM bytes at ``bw``,
    and a call takes the longer (each resource streams while the other does). So where the HBM
    binds the static call, the second read hides in it (H100 past 50 MB: 3-4 us of 100-300 us),
    and where the L2 binds (B200, whose L2 per SM and clock is H100's where its HBM is 2.3x) it
    costs its share of the L2's time. ``bw`` / ``l2_bw``: the rates of :func:`streaming_terms`,
    capped by the CTAs' walk (few tokens: the second read at the walk's rate, as before)."""
    e = col(batch, "elements", 0)
    warm = col(batch, "warm_l2", 0) > 0
    share = np.where(warm, l2_resident_share(3.0 * e, fig, prm), 0.0)
    hbm = (3.0 * e - share * 2.0 * e) / bw  # the static call's HBM bytes (its resident reads not)
    # the share of the second read the L2 no longer holds: the footprint of the rows a wave of
    # CTAs holds (:data:`QUANT_WAVE_CTAS_PER_SM` an SM; a row's bf16 read and fp8 write, 3
    # bytes an element, as a warm replay's footprint) against the L2, the one rule of a
    # kernel's operands in the L2 (``l2_resident_share``)
    wave = np.minimum(rows, QUANT_WAVE_CTAS_PER_SM * fig.sm_count) * 3.0 * e / np.maximum(rows, 1.0)
    missed = 1.0 - l2_resident_share(wave, fig, prm)
    static = np.maximum(hbm + share * 2.0 * e / l2_bw, 3.0 * e / l2_bw)
    reread = missed * 2.0 * e * ((1.0 - share) / bw + share / l2_bw)
    dynamic = np.maximum(hbm + share * 2.0 * e / l2_bw + reread, 5.0 * e / l2_bw)
    return static, dynamic


def _overlapped_amax(batch, fig, rows, lat, static_mem, dynamic_mem) -> np.ndarray:
    """vLLM's amax table as the difference of its two calls, each its traffic (``static_mem``,
    ``dynamic_mem``: :func:`_token_amax`) and its CTAs' waits overlapped
    (:data:`AMAX_WAIT_NORM`): the static call's CTAs an SM, ``lat`` each, one after another; the
    dynamic call's those and its reductions, an SM's first CTA's whole and each later one its
    CTA's share (:func:`token_reduce_share`; none for one warp). The reductions hide where the
    static call streams, not added after the traffic."""
    row = col(batch, "elements", 0) / np.maximum(rows, 1.0)
    per_sm = np.maximum(np.ceil(rows / fig.sm_count), 1.0)
    reductions = (1.0 + (per_sm - 1.0) * token_reduce_share(row)) * lat
    static_wait = per_sm * lat
    dynamic = combine(dynamic_mem, static_wait + reductions, AMAX_WAIT_NORM)
    return dynamic - combine(static_mem, static_wait, AMAX_WAIT_NORM)


def streaming_terms(
    batch: KernelBatch, fig: DeviceFigures, prm: dict[str, float]
) -> dict[str, np.ndarray]:
    units = np.maximum(np.ceil(batch.bytes / 65536.0), 1.0)
    # a kernel that gives each row one CTA (a top-k selection walks its row's logits on one
    # SM: ``units`` = rows) draws bandwidth by its rows, not by 64 KB pieces
    rows = col(batch, "units", 0)
    units = np.where(rows > 0, np.maximum(rows, 1.0), units)
    # a top-k kernel's CTAs (``ctas``: one a query, a query that takes its keys whole too)
    # draw the bandwidth; only the selecting rows (``units``) wait their passes
    ctas = col(batch, "ctas", 0)
    units = np.where(ctas > 0, np.maximum(ctas, units), units)
    reach = fig.hbm_bytes_per_s
    if batch.variant in SM_BOUND_VARIANTS:
        reach = min(reach, SM_BYTES_PER_CLOCK * fig.sm_count * fig.clock_hz)
    drawing = units
    # SGLang's v1 DeepSeek-V4 top-k: a CTA's draw and its passes' wait by its slots
    # (:data:`SLOT_DRAW_VARIANTS`); 1 for any other kernel
    slots = col(batch, "index_topk", 0)
    per_cta = np.where((slots > 0) & (batch.variant in SLOT_DRAW_VARIANTS), slots / SLOT_REF, 1.0)
    drawing = drawing * per_cta ** prm.get("slot_draw", 0.0)
    if batch.variant in HOPPER_DRAW_VARIANTS:
        drawing = units / hbm_per_sm_ratio(fig)  # a unit's bytes a clock: Hopper's
    bw = prm["eff_memory"] * reach * memory_share(drawing, fig, prm)
    resident = np.zeros(len(batch))
    if batch.kind == "quantize" and "elements" in batch.shape:
        # a warm replay on the same input (``warm_l2``: calls on one input, no L2 flush)
        # finds the bf16 input in the L2 when it and the output fit in the share of the L2 a
        # kernel's operands keep (the GEMM's rule): its reads come at ``l2_speedup`` times
        # the HBM rate
        e = col(batch, "elements", 0)
        reads = 2.0 * e * col(batch, "passes", 1)
        footprint = 2.0 * e + col(batch, "write", 1) * e
        share = l2_resident_share(footprint, fig, prm)
        warm = col(batch, "warm_l2", 0) > 0
        resident = np.where(warm, share * np.minimum(reads, batch.bytes), 0.0)
    if "state_bytes" in batch.shape:
        resident = resident + _resident_state(batch, fig, prm)
    # a warm quantize's resident reads: ``l2_speedup`` times the bytes the SMs draw at
    # Hopper's HBM rate per SM and clock (:data:`L2_PER_SM_KINDS`), else times the HBM
    l2_rate = fig.hbm_bytes_per_s
    if batch.kind in L2_PER_SM_KINDS:
        l2_rate = SM_BYTES_PER_CLOCK * fig.sm_count * fig.clock_hz
    l2_bw = np.full(len(batch), prm["l2_speedup"] * l2_rate)
    if batch.kind == "quantize" and (rows > 0).any():
        # a quantize kernel that gives each token a CTA (vLLM's): each walks its row with the
        # loads its threads keep in flight, Hopper's bytes a clock per SM at ``sm_bandwidth``
        # (its rows of one token take 7.9 / 7.8 us for a 65,536-wide amax on H100 / B200, where
        # the HBM per SM differs 2x), from the HBM or the L2, capped by what the call can draw;
        # it walks its row in whole blocks of QUANT_CTA_ELEMENTS (``pad``: the share of its
        # passes' lanes that load)
        row = col(batch, "elements", 0) / np.maximum(rows, 1.0)
        pad = np.ceil(row / QUANT_CTA_ELEMENTS) * QUANT_CTA_ELEMENTS / np.maximum(row, 1.0)
        cta = np.where(
            rows > 0, units * prm["sm_bandwidth"] * SM_BYTES_PER_CLOCK * fig.clock_hz / pad, np.inf
        )
        bw = np.where(rows > 0, np.minimum(prm["eff_memory"] * reach, cta), bw)
        l2_bw = np.minimum(l2_bw, cta)
    memory = (batch.bytes - resident) / bw + resident / l2_bw
    if batch.kind == "quantize" and batch.variant == "amax" and (rows > 0).any():
        static_mem, dynamic_mem = _token_amax(batch, fig, prm, rows, bw, l2_bw)
        memory = np.where(rows > 0, dynamic_mem - static_mem, memory)
    if batch.variant in WARM_TOPK_VARIANTS:
        # a warm top-k call finds its logits (and indices) in the L2 while they fit in the
        # share of it a kernel's operands keep (the quantize rule), read ``l2_speedup`` times
        # as fast as the rate its CTAs draw from the HBM
        share = l2_resident_share(batch.bytes, fig, prm)
        memory = memory * (1.0 - share + share / prm["l2_speedup"])
    # a top-k row of more keys than an SM's L1 holds (``long_elements``: those rows' keys,
    # cost.compressed.STAGED_ROW_KEYS) re-reads its logits from the L2 / HBM on its later
    # passes: ``long_read`` times its reads
    longs = col(batch, "long_elements", 0)
    memory = memory + (prm.get("long_read", 1.0) - 1.0) * 4.0 * longs / bw  # fp32 logits
    compute = batch.flops / (
        prm["eff_compute"] * fig.peak("fp32" if "fp32" in fig.peaks else "bf16")
    )
    # a call of several graph nodes (``launches``: the amax reduction is a memset of its scale
    # and the reduction kernel) pays the fixed cost of each
    extra = (np.maximum(col(batch, "launches", 1), 1.0) - 1.0) * prm["fixed_s"]
    # TensorRT-LLM's per-tensor amax: its blocks that hold elements, one after another
    # (``amax_blocks``, AMAX_GRID_BLOCKS)
    extra = extra + col(batch, "amax_blocks", 0) * prm.get("amax_block_s", 0.0)
    # a row's CTA also waits on its own passes' synchronisations (a top-k selection's radix
    # passes over its row: about 8 us a row on H100 whatever its length, 10 us for one row of
    # 2,048 keys, 124 us for 2,048 rows): ``unit_latency_s`` per wave of rows over the SMs;
    # a token-CTA quantize kernel's SMs each launch their share of its CTAs one after another
    # (vLLM's static quantize at k = 32, 64 bytes a token: 2.1 us at 256 tokens, 6.9 at 8,192,
    # 21.7 at 32,768 on H100, 21.4 on B200: 0.6 ns a token, 79 / 84 ns a CTA an SM)
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
    if batch.variant in CTA_WALK_VARIANTS:
        # TensorRT-LLM's prompt conv: its CTAs' waits (``unit_latency_s`` a CTA's
        # share of the SMs, many CTAs resident on each: no whole waves) overlap its traffic
        # (:data:`CTA_WALK_NORM`); a CTA on the unvectorised path waits ``scalar_load`` times
        # as long (``scalar_load``: sequences not a multiple of :data:`VECTOR_TOKENS` tokens)
        scalar = np.where(col(batch, "scalar_load", 0) > 0, prm.get("scalar_load", 1.0), 1.0)
        memory = combine(memory, rows / fig.sm_count * lat * scalar, CTA_WALK_NORM)
        rows = np.zeros(len(batch))
    wait = per_cta ** prm.get("slot_wait", 0.0)
    if batch.kind == "quantize" and batch.variant == "amax" and (rows > 0).any():
        # vLLM's amax table is the dynamic per-token call less the static one: the static
        # call's CTAs wait as the dynamic one's do, which adds the reduction of each token's
        # maximum across its CTA's warps; each call's waits overlap its traffic, so the row
        # is the difference of the two overlapped calls (no wait added after it)
        both = _overlapped_amax(batch, fig, rows, lat, static_mem, dynamic_mem)
        memory = np.where(rows > 0, both, memory)
        wait = np.where(rows > 0, 0.0, wait)
    extra = extra + np.where(rows > 0, np.ceil(rows / fig.sm_count), 0.0) * lat * wait
    # TensorRT-LLM's decode top-k rows of a few keys past the top-k (``near_rows``,
    # cost.compressed.NEAR_TOPK_KEYS): ``near_topk_s`` a wave of them over the SMs
    near = col(batch, "near_rows", 0)
    extra = extra + np.ceil(near / fig.sm_count) * prm.get("near_topk_s", 0.0)
    extra = extra + np.where(fused, 0.0, walk)
    # a chunked delta rule's tiles (``tiles``), ``tile_s`` a wave of them over the SMs, whatever
    # the tokens in a chunk: flash-linear-attention's kernels work on whole (sequence, chunk,
    # head) tiles, FlashInfer's fused kernel on a (sequence, head) unit that loads and stores
    # its state (docs/time-model.md, "Linear attention")
    waves = np.ceil(col(batch, "tiles", 0) / fig.sm_count)
    extra = extra + waves * prm.get("tile_s", 0.0)
    extra = extra + col(batch, "chunk_tokens", 0) * prm.get("chunk_token_s", 0.0)
    # SGLang's DeepSeek-V4 decode compressors (``pool_switch`` of them in the layer) each take
    # ``pool_switch_s`` more once the step's sequences (``pool_rows``) pass one MMA tile of
    # rows (64 on Hopper, 128 on data-centre Blackwell: mma_rows; cost.compressed.POOL_SWITCH),
    # a fixed cost a call (``call_fixed_s``: kernel_terms adds it to ``fixed_s``, so a kernel
    # it dominates reads "latency", not the memory its bytes are far from)
    over = col(batch, "pool_rows", 0) > mma_rows(fig)
    switches = np.where(over, col(batch, "pool_switch", 0), 0.0)
    fixed = switches * prm.get("pool_switch_s", 0.0)
    return {"compute_s": compute, "memory_s": memory, "extra_s": extra, "call_fixed_s": fixed}


#: Bytes a peer up to which NCCL sends point-to-point (all-to-all) data with its LL protocol
