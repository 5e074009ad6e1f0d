"""The ``mla_decode`` class of the time model: latent (absorbed) MLA decode.

Terms: units of one sequence and 64 query heads (128 on ``tcgen05`` devices, whose engines'
kernel takes 16 at 32 heads or fewer) over the shared latent cache, its rows a byte wide in an
fp8 kernel (converted to bf16 in shared memory on Hopper, multiplied at the bf16 rate); an fp8
cache converted to bf16 by a kernel of its own (``cache_convert``, ``dequant_s``) where the
kernel cannot read it; the key-splitting
kernel (FlashMLA: its combine kernel and the parts' fp32 partial results) against the one that
walks a whole cache on one SM (its own overlap, ``walk_overlap``); the latent rows' and the
query tile's shared-memory traffic (a bound on a warp-group MMA's pace, a cost added to an
``mma.sync`` kernel's); a call's and a unit's waits in seconds (``call_latency_s``,
``unit_latency_s``); the RoPE pre-kernel and the fp8 query quantization (``launch_s`` each and
their bytes). The figures behind each rule are in docs/decisions.md ("Time model").
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from mlacalc.timemodel.attention_time import attention_shape, attention_time, decode_splits
from mlacalc.timemodel.device import DeviceFigures
from mlacalc.timemodel.shared import SMEM_BYTES_PER_CLOCK, col, combine, mma_rows
from mlacalc.words.dtypes import resolve_kv_layout
from mlacalc.words.kernels import KernelBatch

__all__ = [
    "CHAIN_SAVING_S",
    "CONVERTING_KERNELS",
    "FLASHMLA_DECODE",
    "GEN_SPARSE_VARIANT",
    "GEN_SPARSE_WIDE_VARIANT",
    "HOPPER_FP8_MLA_BYTES",
    "MLA_SPLIT_KEYS",
    "SGLANG_EXPANDED_PREFIX",
    "SPLIT_WAIT_GENERATIONS",
    "TCGEN05_CTA_COST",
    "TCGEN05_LOW_LATENCY_PART_KEYS",
    "TCGEN05_MLA_MAX_SPLITS",
    "TCGEN05_MLA_SPLIT_KEYS",
    "TRTLLM_MLA_DECODE",
    "VLLM_DECODE_PATH_TOKENS",
    "WRAPPER_ROW_HEAD_S",
    "chain_saving_s",
    "cta_cost_s",
    "decode_path_tokens",
    "engine_mla_kernel",
    "low_latency_units",
    "mla_decode_terms",
    "mla_max_splits",
    "mla_split_keys",
    "mla_tile_rows",
    "mla_unit_count",
    "mla_unit_rows",
    "sglang_chunk_note",
    "step_decode_path_tokens",
    "wrapper_row_head_s",
]

#: FlashMLA splits a unit's keys into parts of two 64-token blocks and more.
MLA_SPLIT_KEYS = 128.0

#: Fewest keys a part of TensorRT-LLM-gen's MLA decode kernel holds (the plain latent kernel on
#: ``tcgen05`` devices, which SGLang's ``trtllm_mla`` and vLLM's FLASHINFER_MLA call too): it
#: first splits a sequence's keys at 512 (two parts of 256), where FlashMLA splits at 128. Read
#: from B200's rows, not recalled: every engine's, bf16 and fp8 caches, take one time from 2 to
#: 256 cached keys and a step of about 2 us (the combine kernel) at 512 (TensorRT-LLM fp8, one
#: sequence of 16 heads: 9.05 / 9.01 / 11.07 us at 128 / 256 / 512 keys; bf16 10.7 / 9.7 /
#: 11.7), where a part of 128 keys had the step at 256 (predicted 12.0 us, 33% over). See
#: docs/time-model.md ("MLA decode's first split on Blackwell").
TCGEN05_MLA_SPLIT_KEYS = 256.0

#: Whether TensorRT-LLM-gen's plain latent MLA decode kernel on ``tcgen05`` devices pays a time
#: per CTA of its grid (``cta_s``, fitted; :func:`mla_decode_terms`): B200's short-cache rows
#: (up to 255 keys, one part a sequence) grow with the kernel's 16-row CTAs long before they
#: fill the 148 SMs, about at the slope the rows past one wave take (SGLang bf16, one head:
#: 10.4 / 12.5 / 12.5 / 14.5 / 20.7 us at 16 / 32 / 64 / 128 / 256 sequences; 5.2 us a wave
#: of 148 CTAs from 256 to 1,024), where a count of waves is flat below one. Hopper's FlashMLA
#: rows are flat to 128 sequences (TensorRT-LLM H100, one head: 13.0-14.6 us): the term is
#: the ``tcgen05`` kernel's alone, and a class fitted with it reads it there per wave (``cta_s x
#: SMs`` a unit an SM runs in turn). See docs/time-model.md ("TensorRT-LLM-gen's cost a CTA").
TCGEN05_CTA_COST = True

#: Kernel generations whose latent decode kernels split a sequence's keys over the SMs
#: (FlashMLA and FlashAttention-3 on Hopper, TensorRT-LLM-gen's on data-centre Blackwell): each
#: unit an SM runs in turn waits ``split_wait_s`` (fitted) beside the stream of its blocks, a
#: time added to the call's rather than hidden in the p-norm with the cache's stream as
#: ``unit_latency_s`` is. The tables show such a wait between the short rows' floor and the
#: long rows' stream: TensorRT-LLM's H100 fp8 rows take 13.3 us at one to 64 keys, and from a
#: few 64-key blocks an SM on they take about 20 us plus the blocks at 0.88 of the HBM's rate
#: (64 sequences of 131K keys at one head: 1,662 us, 995 blocks an SM at 1.65 us), where one
#: p-norm of the stream and a hidden wait had to read those long rows 8% slow (0.84 of the
#: HBM) to bring the middle ones (2-32 blocks an SM) within 6-8% fast. A kernel that walks a
#: whole cache on one SM (A100's) keeps its wait in its p-norm. See docs/time-model.md ("A
#: split unit's wait beside its stream").
SPLIT_WAIT_GENERATIONS = frozenset({"sm90", "tcgen05"})


#: Most parts TensorRT-LLM-gen's MLA decode kernel (the plain latent kernel on ``tcgen05``
#: devices) splits a sequence's keys into, where one part an SM would give a lone sequence 148
#: on B200. Read from B200's rows, not recalled of the kernel's launcher: one sequence of 128
#: heads takes 31.6 / 31.6 / 35.7 / 54.5 us at 16,384 / 32,768 / 65,536 / 131,072 keys
#: (TensorRT-LLM, bf16), which parts filling the SMs read 27-46% fast (SGLang's ``trtllm_mla``
#: rows 26-39%, either cache); of caps 16, 32 and none (``mla_decode`` refitted in the B200
#: profiles) 32 reads every engine's B200 rows best. See docs/time-model.md ("TensorRT-LLM-gen's
#: MLA decode splits a sequence into at most 32 parts").
TCGEN05_MLA_MAX_SPLITS = 32.0


def mla_max_splits(batch: KernelBatch, fig: DeviceFigures) -> float:
    """Most parts a latent decode unit's keys split into on ``fig``'s device:
    :data:`TCGEN05_MLA_MAX_SPLITS` for the plain kernel on ``tcgen05`` devices, else no cap."""
    if fig.tcgen05 and not batch.variant:
        return TCGEN05_MLA_MAX_SPLITS
    return np.inf


def mla_split_keys(batch: KernelBatch, fig: DeviceFigures) -> float:
    """Fewest keys a part of a split latent decode unit holds on ``fig``'s device:
    :data:`TCGEN05_MLA_SPLIT_KEYS` for the plain kernel on ``tcgen05`` devices (TensorRT-LLM-gen's),
    else :data:`MLA_SPLIT_KEYS` (FlashMLA's; the sparse and indexer variants keep it)."""
    if fig.tcgen05 and not batch.variant:
        return TCGEN05_MLA_SPLIT_KEYS
    return MLA_SPLIT_KEYS


#: Shared-memory bytes per latent element of a cached token that Hopper's fp8 MLA decode kernel
#: (FlashMLA's fp8 path; TensorRT-LLM's H100 rows) moves converting the block's fp8 rows to
#: bf16 before its bf16 warp-group MMA: the fp8 read and the bf16 write. The H100 rows of 64
#: sequences of 131K keys at 128 heads (two 64-row units) take 3,027 us with an fp8 cache: 1.52
#: us a 64-key block per SM, 1.28x a bf16 MMA's time for the block (64 x 64 x 1,088 x 2 FLOP at
#: 7.5 TFLOP/s an SM) and 2.6x an fp8 MMA's, where a bf16 cache's 3,574 us is 1.18x it; at 64
#: heads 1,694 us (the fp8 cache at 0.85 of the HBM). With the bf16 rate and these bytes,
#: refitted, B200's fp8 rows from H100 went 30.5% -> 15.0% and H100's from B200 15.2% -> 12.5%
#: (docs/time-model.md).
HOPPER_FP8_MLA_BYTES = 3.0

#: The fp8 indexer's logits kernel (``mla_decode`` variant ``indexer``: DeepGEMM's
#: ``fp8_paged_mqa_logits``, which DeepSeek-V3.2's and V4's indexers call; from recall, its
#: fp8 q and keys go to the fp8 tensor-core MMA as they are, Hopper's warp-group MMA and
#: Blackwell's ``tcgen05`` alike) moves its keys through shared memory a byte an element, not
#: as bf16 operands. With the bf16 width the shared-memory pace capped B200's logits at 4,096
#: FLOP a clock and SM, 1,125 TFLOP/s, where SGLang's ``dsv4_paged_mqa_logits_module_perf``
#: rows reach 1,365-1,413 and vLLM's 1,470-1,575 at 3.4e7 (query, key) pairs and more: every
#: such row over-predicted by the cap's ratio (+22% SGLang, +25% to +42% vLLM), which no
#: fitted parameter could take back (docs/time-model.md, "The fp8 indexer's keys a byte an
#: element")
FP8_INDEXER_MMA = True


#: (engine, tensor-core generation) whose MLA decode kernel cannot read an fp8 cache, so a
#: kernel of its own converts it first (``cache_convert``): SGLang's FlashAttention-3 backend,
#: which its H100 tables time with an fp8 cache (``kernel_source`` flash_attention); on B200
#: it runs TensorRT-LLM-gen's MLA kernel, which reads fp8.
CONVERTING_KERNELS = frozenset({("sglang", "sm90")})

#: (engine, kernel generation) whose MLA decode kernel is FlashMLA's, which launches its
#: combine kernel on every call (``combine_always``; the kernel returns at once for a sequence
#: whose keys did not split: from recall of FlashMLA's ``run_flash_splitkv_mla_kernel``):
#: TensorRT-LLM on Hopper (its H100 tables, TABLES.md: "FlashMLA, 64 tokens/block on SM90"),
#: and vLLM's FLASHMLA backend, its Hopper kernel for an fp8 cache
#: (:data:`VLLM_DECODE_PATH_TOKENS`).
#: The H100 rows of one to 64 cached keys take 13.3 us at batch 1 (bf16 and fp8 alike), B200's
#: (TensorRT-LLM-gen's kernel, no such launch) 9.0 us; see docs/time-model.md ("MLA decode").
#: (engine, kernel generation, cache dtype)
FLASHMLA_DECODE = frozenset(
    {("trtllm", "sm90", "bf16"), ("trtllm", "sm90", "fp8"), ("vllm", "sm90", "fp8")}
)


#: (engine, kernel generation) whose MLA decode kernel is TensorRT-LLM's own: on data-centre
#: Blackwell SGLang's ``trtllm_mla`` and vLLM's FLASHINFER_MLA backends call TensorRT-LLM-gen's
#: MLA decode kernel (the B200 tables' ``kernel_source``), where on Hopper they run
#: FlashAttention-3's and FlashMLA's. An engine profile fitted on Hopper alone predicts them
#: with TensorRT-LLM's classes (:func:`~mlacalc.timemodel.engine_profiles.with_generation_kernels`).
TRTLLM_MLA_DECODE = frozenset({("sglang", "tcgen05"), ("vllm", "tcgen05")})


#: (engine, kernel generation) -> cache dtype -> seconds per query row and head that the
#: engine's MLA decode call spends beyond TensorRT-LLM's own call of the same kernel
#: (``wrapper_row_heads``): vLLM's FLASHINFER_MLA backend on data-centre Blackwell, which calls
#: TensorRT-LLM-gen's MLA decode kernel (:data:`TRTLLM_MLA_DECODE`). Measured, not fitted: vLLM's
#: B200 generation module rows minus TensorRT-LLM's on the same shapes (same GEMM dtype, cache
#: dtype, heads, batch and cache length; 1-8,192 keys) fall on a line in sequences x heads,
#: 2.93-3.01 ns a (sequence, head) with a bf16 cache and 2.69-2.79 ns with an fp8 one in each
#: GEMM dtype, least squares with a constant and a per-sequence term (both near zero), 1-3 us
#: median residual; flat in the cache length up to 8,192 keys. Which of vLLM's kernels spends it
#: is not identified: nothing of the call's q or output bytes comes near (3 ns is 23 KB at the
#: HBM's rate a row and head). vLLM's H100 backends show no such line (its rows minus
#: TensorRT-LLM's: a 30-90 us offset, at most 0.3 ns a row and head); see docs/time-model.md
#: ("vLLM's FlashInfer MLA on B200").
WRAPPER_ROW_HEAD_S = {("vllm", "tcgen05"): {"bf16": 2.96e-9, "fp8": 2.75e-9}}


def wrapper_row_head_s(engine: str, fig: DeviceFigures, kv_dtype: str) -> float:
    """Seconds per query row and head ``engine``'s MLA decode call over a ``kv_dtype`` cache
    ("bf16" or "fp8") spends on ``fig``'s device beyond the kernel's own time
    (:data:`WRAPPER_ROW_HEAD_S`; 0 elsewhere)."""
    return WRAPPER_ROW_HEAD_S.get((engine, fig.kernel_generation), {}).get(kv_dtype, 0.0)


#: kernel generation -> seconds an MLA decode call takes less between the absorption BMMs
#: (``absorbed_chain``: the pre-BMM, the call, the post-BMM back to back, as a module row and a
#: served step run them) than the three kernels measure stand-alone, two kernel boundaries of
#: 2 us each. Evidence, the B200 module rows (``mla_generation_module_perf``) less their
#: predicted GEMMs and norms: the chain is left 12-13 us at up to 16 sequences and heads in
#: TensorRT-LLM's and vLLM's rows, where the stand-alone-fitted classes (``generation_mla_perf``,
#: ``mla_bmm_perf``) put 18-20; TensorRT-LLM's rows read +8% to +12% at 1-16 heads and up to 64
#: sequences (signed median), none from 256 sequences or 64 heads. Which part of the boundary
#: the chain hides (a launch overlapped with the previous kernel's tail, from recall of
#: TensorRT-LLM-gen's programmatic dependent launch, or a floor of the stand-alone timing) the
#: tables cannot tell. Hopper's rows do not show it as clearly (TensorRT-LLM's H100 generation
#: module, signed +1.5%, reads worse with it: 4.04% -> 4.59%), so it is Blackwell's alone; see
#: docs/time-model.md ("The absorbed decode chain on Blackwell").
CHAIN_SAVING_S = {"tcgen05": 4.0e-6}


def chain_saving_s(fig: DeviceFigures) -> float:
    """Seconds an MLA decode call between the absorption BMMs takes less on ``fig``'s device
    than stand-alone (:data:`CHAIN_SAVING_S`; 0 elsewhere)."""
    return CHAIN_SAVING_S.get(fig.kernel_generation, 0.0)


#: (kernel generation, cache dtype) -> the new tokens a sequence up to which vLLM runs an MLA
#: prompt down its decode path: its MLA decode backend's batch-reorder threshold, below which
#: a request of that many query tokens is a decode (the query absorbed, the latent decode
#: kernel over the sequence's cached rows, no kv_b expansion). The backend is the one vLLM's
#: tables run for the cache's dtype: on Hopper FLASH_ATTN_MLA with a bf16 cache (its prompt
#: module rows name it at 1-512 tokens, FLASH_ATTN's prompt kernel from 1,024) and FLASHMLA
#: with an fp8 one (1-128 tokens, FLASH_ATTN from 256); on data-centre Blackwell
#: FLASHINFER_MLA (one token, FLASH_ATTN or TRTLLM_RAGGED from 16). The tables bound each
#: threshold (512-1,023, 128-255, 1-15); the lower bound is taken (512 for FLASH_ATTN_MLA is
#: its ``reorder_batch_threshold`` as recalled from vLLM's source). Devices of other
#: generations: no tables, no decode path (0).
VLLM_DECODE_PATH_TOKENS = {
    ("sm90", "bf16"): 512,
    ("sm90", "fp8"): 128,
    ("tcgen05", "bf16"): 1,
    ("tcgen05", "fp8"): 1,
}


def decode_path_tokens(engine: str, fig: DeviceFigures, kv_dtype: str) -> int:
    """The new tokens a sequence up to which ``engine`` runs an MLA prompt over a
    ``kv_dtype`` cache ("bf16" or "fp8") down its decode path on ``fig``'s device
    (:data:`VLLM_DECODE_PATH_TOKENS`; 0: never, every engine but vLLM). One rule for the
    measured prompt module rows (:func:`mlacalc.measured.mapping.decode_path_prompts`), a
    predicted step (:func:`mlacalc.timemodel.predict.predict_time`) and a served one
    (:class:`mlacalc.serving.gpu_step.StepModel`)."""
    if engine != "vllm":
        return 0
    return VLLM_DECODE_PATH_TOKENS.get((fig.kernel_generation, kv_dtype), 0)


def step_decode_path_tokens(model: Any, engine: str, fig: DeviceFigures, kv_dtype: Any) -> int:
    """:func:`decode_path_tokens` for a model's step: its prompt's new tokens a sequence up to
    which the engine runs them absorbed over the latent cache (``kv_dtype``, a dtype or
    :class:`~mlacalc.words.dtypes.KVLayout`: an fp8 layout is the fp8 cache); 0 for a model
    without plain MLA layers (GQA; DeepSeek-V3.2's and V4's sparse cores, which take paths of
    their own)."""
    if not model.is_mla or model.index_topk is not None or model.compress_ratios:
        return 0
    # a cache narrower than 16 bits runs the fp8-cache decode kernel (int8, fp4, nvfp4 as a
    # stand-in: mlacalc.cost.model_step), so its prompts take that kernel's threshold too
    narrow = resolve_kv_layout(kv_dtype).bits < 16
    return decode_path_tokens(engine, fig, "fp8" if narrow else "bf16")


#: The cached tokens from which SGLang expands an MLA chunk's prefix through kv_b_proj (its
#: MHA_CHUNKED_KV path; from recall: the chunked prefix cache's threshold in SGLang's
#: DeepseekV2AttentionMLA, 8,192 by default); after fewer it runs the chunk absorbed over the
#: latent, which no measured row times for a prompt. Every chunk here is priced
#: ``compressed`` (:func:`mlacalc.words.vocab.serving_impl`): said, not modelled.
SGLANG_EXPANDED_PREFIX = 8192


def sglang_chunk_note(model: Any, engine: str, cached: int) -> str:
    """What an SGLang MLA chunk after ``cached`` tokens (fewer than
    :data:`SGLANG_EXPANDED_PREFIX`, more than none) is priced as against what SGLang runs;
    empty elsewhere (another engine, a model without plain MLA layers, no prefix, a long
    one)."""
    plain = model.is_mla and model.index_topk is None and not model.compress_ratios
    if engine != "sglang" or not plain or not 0 < cached < SGLANG_EXPANDED_PREFIX:
        return ""
    return (
        f"a chunk after {cached:,} cached tokens is priced expanding the prefix's latent "
        "through kv_b_proj (compressed), while SGLang (from recall) runs a chunk after fewer "
        f"than {SGLANG_EXPANDED_PREFIX:,} cached tokens absorbed over the latent, which no "
        "measured row times: the figure is the expanded path's"
    )


#: (engine, tensor-core generation, dtype) of the expanded MLA prompt kernels that issue their
#: shared-memory operand reads under their products (``operand_under``: no K/V read a block
#: beside the MMAs, :func:`~mlacalc.timemodel.attention_time.prefill_terms`): vLLM's bf16
#: prompt on B200 (its ``FLASH_ATTN`` backend, ``mla_dtype`` bf16). Read from its module rows:
#: at 16,384-32,768 tokens and 128 heads the prompt kernel (the row less its other kernels)
#: reaches 1.71-1.86 PFLOP/s, 0.76-0.83 of B200's bf16 peak, where the products plus a K/V
#: read a block at 128 bytes a clock cap the class at about 1.27 (0.56), the rate TensorRT-LLM's
#: B200 bf16 prompt (TensorRT-LLM-gen's FMHA) reaches (1.25-1.30); vLLM's fp8 prompt there is
#: TensorRT-LLM-gen's own (``TRTLLM_RAGGED``) and keeps the reads. That its kernel's reads
#: overlap its asynchronous MMAs is an inference from the rate, not read from its source
OPERANDS_UNDER_PRODUCTS = frozenset({("vllm", "tcgen05", "bf16")})


def engine_mla_kernel(batch: KernelBatch, engine: str, fig: DeviceFigures) -> KernelBatch:
    """``batch`` with ``combine_always`` where its engine's MLA decode kernel on ``fig`` is
    FlashMLA (:data:`FLASHMLA_DECODE`), ``wrapper_row_head_s`` where its engine's call costs
    a time per query row and head beyond the kernel's (:func:`wrapper_row_head_s`), and
    ``cache_convert`` (and an fp8 cache's ``kv_bytes``) where it converts an fp8 cache
    (:data:`CONVERTING_KERNELS`), if the batch is
    a step's, whose kernel the device rule chose (``step_kernel``, set by
    :func:`~mlacalc.timemodel.kernel_time.device_batch`; a measured row names the kernel it
    timed): a step is timed with the kernel its class was fitted on."""
    if batch.kind == "mla_prefill":
        if (engine, fig.kernel_generation, batch.dtype) not in OPERANDS_UNDER_PRODUCTS:
            return batch
        if "operand_under" in batch.shape:
            return batch
        shape = {**batch.shape, "operand_under": np.ones(len(batch))}
        return dataclasses.replace(batch, shape=shape)
    if batch.kind != "mla_decode" or batch.variant or "step_kernel" not in batch.shape:
        return batch
    gen = fig.kernel_generation
    wrap = wrapper_row_head_s(engine, fig, "fp8" if batch.dtype == "fp8" else "bf16")
    if wrap > 0 and "wrapper_row_head_s" not in batch.shape:
        batch = dataclasses.replace(
            batch, shape={**batch.shape, "wrapper_row_head_s": np.full(len(batch), wrap)}
        )
    if (engine, gen, batch.dtype) in FLASHMLA_DECODE and "combine_always" not in batch.shape:
        batch = dataclasses.replace(
            batch, shape={**batch.shape, "combine_always": np.ones(len(batch))}
        )
    if batch.dtype != "fp8":
        return batch
    if "cache_convert" in batch.shape or (engine, gen) not in CONVERTING_KERNELS:
        return batch
    shape = {**batch.shape, "cache_convert": np.ones(len(batch))}
    shape.setdefault("kv_bytes", np.ones(len(batch)))
    return dataclasses.replace(batch, shape=shape)


def mla_tile_rows(batch: KernelBatch, fig: DeviceFigures) -> np.ndarray:
    """Query heads one latent decode unit carries: 64 (a Hopper warp group's MMA rows, the
    A100 kernel's four 16-row warps), 128 where ``tcgen05`` MMAs cover 128 rows
    (:func:`~mlacalc.timemodel.shared.mma_rows`): the measured B200 rows take no longer at 128
    heads than at 64 (TensorRT-LLM, 64 sequences of 131K keys: 1,733 against 1,699 us bf16,
    847 against 933 us fp8), where two 64-head units would each stream the cache. The indexer
    variant keeps 64 (DeepGEMM's logits are not the dense latent kernel); the sparse variant
    (FlashMLA's sparse kernels) takes the MMA's rows too, and multiplies its padded rows
    (:data:`PADDED_PRODUCTS`), unless the row names its kernel's own unit (``unit_heads``:
    TensorRT-LLM-gen's sparse MLA, 64 heads, its real products), which it takes where the MMA's
    rows are not more: on ``tcgen05`` that kernel's 128 heads are one 128-row unit too (its B200
    prompt rows less their other kernels take 1.17-1.36x the 64-head time a token at 128 heads,
    TensorRT-LLM's own and vLLM's FlashInfer path alike, where two units gave 2x)."""
    if batch.variant == "indexer":
        return np.full(len(batch), 64.0)
    own = col(batch, "unit_heads", 0) if batch.variant in SPARSE_VARIANTS else np.zeros(len(batch))
    return np.where(own > 0, np.maximum(own, mma_rows(fig)), max(64.0, mma_rows(fig)))


#: Whether the dense latent decode kernels multiply their whole query tile, padded rows too,
#: when they split the keys (the plain variant; the sparse ones: :data:`PADDED_PRODUCTS`).
#: Every engine's MLA decode kernel packs a sequence's (query token, head) rows into the M
#: side of its MMA and runs whole tiles (from recall: FlashMLA's ``kBlockM`` 64 over ``s_q x
#: h_q`` rows, TensorRT-LLM's H100 kernel and vLLM's FLASHMLA; FlashAttention-3's ``pack_gqa``
#: 64-row tile for the 512-wide latent values, SGLang's and vLLM's FLASH_ATTN_MLA on Hopper;
#: TensorRT-LLM-gen's 128-row ``tcgen05`` tile, or its 16-row unit up to 32 rows, on B200).
#: FlashMLA's published H20 rows (148 TFLOP/s bf16, 4 TB/s: a ridge of 37 FLOP a byte) take
#: one time at 16 to 64 rows and about twice it at 80 (issue #30: 128 sequences of 4,096 keys,
#: 16 heads, 1 / 2 / 4 / 5 query tokens: 0.601 / 0.606 / 0.614 / 1.168 ms), which only whole
#: 64-row tiles of products explain; on H100 (ridge about 295) the same rows stay bound by the
#: cache stream. docs/time-model.md ("MLA decode's padded query tile")
PAD_SPLIT_TILES = True


#: (kernel generation, cache dtype) -> the most products a second per SM and clock any MLA
#: decode kernel of the generation is measured or published to reach, counted as the class
#: counts them (whole query tiles; an fp8 cache's on Hopper at the bf16 rate, on ``tcgen05``
#: at the fp8 rate). The tables time one query token, so a longer query (MTP's 2 tokens, whose
#: 128-head products are 484 FLOP a cached byte) is compute-bound past every measured row, and
#: the fits leave ``eff_compute`` at its bound (1.0): H800's 2-token decode had read 783 TFLOP/s
#: (128 sequences of 8,192 keys). The bound, from the tables: TensorRT-LLM's H100 bf16 row of
#: 128 sequences of 131K keys at 128 heads, 7.00 ms, 668 TFLOP/s, 2,765 FLOP a clock and SM
#: (FlashMLA's published best on H800, its README: 660 TFLOP/s); its fp8 row of the same shape
#: 5.91 ms, 791 TFLOP/s at the bf16 rate (3,275); TensorRT-LLM's B200 rows of 512 sequences of
#: 32K keys at 128 heads, bf16 3.20 ms, 1,460 TFLOP/s (5,315), fp8 1.60 ms, 2,925 TFLOP/s
#: (10,648). A bound per SM and clock, not a share of the datasheet rate: a part whose tensor
#: rate is an export cap far below its SMs' (H20: 148 TFLOP/s, 1,037 FLOP a clock and SM at
#: H100's clock) is bounded by its datasheet rate first, and FlashMLA's H20 rows reach 82-87% of
#: it. Devices of other generations: no bound beyond the fitted one.
MLA_DECODE_RATE_CAP = {
    ("sm90", "bf16"): 2765.0,
    ("sm90", "fp8"): 3275.0,
    ("tcgen05", "bf16"): 5315.0,
    ("tcgen05", "fp8"): 10648.0,
}


def products_floor_s(batch: KernelBatch, fig: DeviceFigures, flops: np.ndarray) -> np.ndarray:
    """Seconds the plain latent decode kernel's products (``flops``, its whole tiles') take at
    :data:`MLA_DECODE_RATE_CAP` on ``fig``'s device: a floor under the call's compute and
    memory time (0 where no bound is known, and for the sparse and indexer variants)."""
    dtype = "fp8" if batch.dtype.startswith("fp8") else "bf16"
    cap = MLA_DECODE_RATE_CAP.get((fig.kernel_generation, dtype))
    if cap is None or batch.variant:
        return np.zeros(len(batch))
    return flops / (cap * fig.sm_count * fig.clock_hz)


def padded_rows(batch: KernelBatch, splits_allowed: np.ndarray) -> np.ndarray:
    """Per row whether the kernel's products are of its whole query tiles: a kernel that walks
    a sequence on one SM (no key split), the sparse kernels (:func:`padded_products`), and the
    plain latent decode kernels (:data:`PAD_SPLIT_TILES`); not DeepGEMM's indexer logits."""
    plain = PAD_SPLIT_TILES and not batch.variant
    return ~splits_allowed | padded_products(batch) | plain


def padded_products(batch: KernelBatch) -> np.ndarray:
    """Per row whether the kernel multiplies its padded query rows whether or not it splits
    the keys (:data:`PADDED_PRODUCTS`; not a kernel named by its own unit, ``unit_heads``)."""
    return (batch.variant in PADDED_PRODUCTS) & (col(batch, "unit_heads", 0) <= 0)


#: The variants whose kernel multiplies every row of its query tile, padded rows too, whether
#: or not it splits the keys: FlashMLA's sparse kernels, compute-bound over each token's 2,048
#: slots. On B200 their 128-row ``tcgen05`` tile takes 64 heads as 128: the SGLang B200 prompt
#: rows of the FlashMLA sparse path take 816 ns a token at 64 heads and 912 at 128 (4,096
#: tokens and more, projections included), and ``glm5_dsa_attn_module_perf``'s 64 heads take
#: the same time a token on B200 as on H100 (497 against 483 ns: 590 TFLOP/s of real products,
#: 60% of H100's dense bf16 rate, 26% of B200's), where B200's rate is 2.3x H100's.
PADDED_PRODUCTS = ("sparse", "sparse_walk", "sparse_gen", "sparse_gen_wide")

#: The variant of a sparse MLA kernel that walks every top-k slot of a query in passes of
#: padded heads (:data:`mlacalc.timemodel.dsa_time.SPARSE_WALK`, TensorRT-LLM's Hopper kernel
#: and vLLM's H100 fp8-cache path): a kernel of the ``sparse`` family (its unit, padding and
#: operand width) fitted apart, on the DSA module rows' residuals, where a profile has rows of
#: it (:data:`mlacalc.measured.observations.RESIDUAL_VARIANTS`); a profile without it times
#: it by its ``sparse`` class (FlashMLA's), else the plain one (``profile._PARENT_VARIANTS``)
WALK_VARIANT = "sparse_walk"

#: The variant of TensorRT-LLM-gen's sparse MLA kernel (TensorRT-LLM's own on Blackwell, vLLM's
#: ``FLASHINFER_MLA_SPARSE``: :func:`mlacalc.timemodel.dsa_time.sparse_unit_heads` > 0), a
#: class apart from FlashMLA's ``sparse`` (fitted on TensorRT-LLM's B200 prompt rows'
#: residuals, and vLLM's on its FlashInfer prompt rows'); a profile without it times it by its
#: ``sparse`` class, else the plain one
GEN_SPARSE_VARIANT = "sparse_gen"

#: The variant of vLLM's FlashInfer sparse MLA prompt past
#: :data:`mlacalc.timemodel.dsa_time.FLASHINFER_WIDE_TOKENS` tokens in one call, a path its
#: B200 rows time at 0.3-0.6 of the per-token core time below it
#: (:func:`mlacalc.timemodel.dsa_time.gen_sparse_variant`): a class of its own, fitted on
#: those rows' residuals; a profile without it times it as :data:`GEN_SPARSE_VARIANT`
GEN_SPARSE_WIDE_VARIANT = "sparse_gen_wide"

#: The sparse MLA kernels' variants: FlashMLA's and TensorRT-LLM's sparse cores
SPARSE_VARIANTS = ("sparse", WALK_VARIANT, GEN_SPARSE_VARIANT, GEN_SPARSE_WIDE_VARIANT)


#: Query rows (heads x query tokens) up to which the Blackwell MLA decode kernel the engines run
#: (TensorRT-LLM-gen's, which SGLang's ``trtllm_mla`` and vLLM's FLASHINFER_MLA call too) takes
#: a 16-row unit (:func:`mla_unit_rows`).
SMALL_UNIT_ROWS = 16.0


#: Keys a part (a CTA's share of a sequence's keys) of TensorRT-LLM-gen's MLA decode holds up to
#: which the kernel's launcher keeps its low-latency 16-row kernel for more than 32 query rows
#: (:func:`low_latency_units`). From recall of TensorRT-LLM-gen's MLA generation kernel
#: selection (not vendored here, not checked against a stored copy): the low-latency kernel
#: (the MMA's operands swapped, 16 query rows a CTA) where the query heads are 32 or fewer, or
#: where a sequence's 16-row CTAs over all sequences fit in the SMs and each CTA's part of the
#: keys is at most 1,024; the high-throughput kernel (the 128-row ``tcgen05`` tile) otherwise.
#: The B200 rows bear both conditions out (TensorRT-LLM bf16, 128 heads): one sequence, 8 CTAs,
#: takes 10.3-10.9 us at 63-255 keys where one 128-row unit was predicted 12.3-16.0 us (+15% to
#: +55%), and the rows past either bound take the 128-row
#: time (16 sequences of 2,047 keys, 128 CTAs of 2,047 keys: 21.2 us, which 16-row units put
#: at 2.2x). See docs/time-model.md ("TensorRT-LLM-gen's low-latency MLA decode").
TCGEN05_LOW_LATENCY_PART_KEYS = 1024.0


def low_latency_units(batch: KernelBatch, fig: DeviceFigures, rows: np.ndarray) -> np.ndarray:
    """Per row whether TensorRT-LLM-gen's MLA decode (the plain latent kernel on ``tcgen05``
    devices) runs its 16-row low-latency kernel at ``rows`` (heads x query tokens) more than 32:
    a sequence's 16-row CTAs over all sequences fit in the SMs and each CTA's part of the keys
    (the parts :func:`mla_decode_terms` would split them into) holds at most
    :data:`TCGEN05_LOW_LATENCY_PART_KEYS`. False on other devices and for the sparse and
    indexer variants."""
    if not fig.tcgen05 or batch.variant:
        return np.zeros(len(batch), bool)
    a = attention_shape(batch)
    ctas = a["b"] * np.ceil(rows / SMALL_UNIT_ROWS)
    parts = decode_splits(batch, ctas, a["kv_eff"], fig.sm_count, mla_split_keys(batch, fig))
    parts = np.minimum(parts, mla_max_splits(batch, fig))
    return (ctas <= fig.sm_count) & (a["kv_eff"] / parts <= TCGEN05_LOW_LATENCY_PART_KEYS)


def mla_unit_rows(batch: KernelBatch, fig: DeviceFigures) -> np.ndarray:
    """Query rows a latent decode unit carries, per kernel: :func:`mla_tile_rows`, except on
    ``tcgen05`` devices at 32 query rows or fewer, where the engines' Blackwell kernel runs
    units of 16 rows: up to 16 heads one unit, 17-32 two, each streaming the sequence's latent
    rows through its shared memory; the plain kernel takes 16-row units at more rows too where
    its launcher picks the low-latency kernel (:func:`low_latency_units`). Every engine's B200
    rows show it (TensorRT-LLM, SGLang, vLLM's module rows; bf16 and fp8): 32 heads take
    1.5-1.6x the time of 16 or of 64 heads (TensorRT-LLM bf16, 128 sequences of 131K keys:
    3,389 / 5,147 / 3,375 us at 16 / 32 / 64 heads), while 1-16 heads take one time. A
    kernel-selection fact read from B200's own rows, not from H100's: see docs/time-model.md
    ("MLA decode"). The sparse kernels keep their unit, but TensorRT-LLM-gen's sparse MLA
    where the row says it runs the small units (``small_units``: vLLM's FlashInfer path,
    :func:`mlacalc.timemodel.dsa_time.sparse_small_units`)."""
    tile = mla_tile_rows(batch, fig)
    rows = attention_shape(batch)["heads"] * col(batch, "q_len", 1)
    small = bool(fig.tcgen05) & (
        (batch.variant not in (*SPARSE_VARIANTS, "indexer")) | (col(batch, "small_units", 0) > 0)
    )
    fits = (rows <= 2.0 * SMALL_UNIT_ROWS) | low_latency_units(batch, fig, rows)
    return np.where(small & fits, SMALL_UNIT_ROWS, tile)


#: The share of a unit's time the second 16-row unit of a token adds where TensorRT-LLM-gen's
#: sparse MLA runs its small units on a prompt (``small_units``: vLLM's FlashInfer path, 17-32
#: heads). Evidence, vLLM's B200 FlashInfer fp8 prompt rows less their other kernels, a token's
#: core at 10,240-49,152 tokens: 312 / 376 / 518 / 380 ns at 8 / 16 / 32 / 64 heads, 32 heads
#: 1.38x the time of 16, where two whole units gave 2x (+18% to +34% signed). Why the second
#: unit costs less the tables do not say (a guess: both units gather the same top-k latent
#: rows, the second from the L2 the first filled). Fitted on those rows with the class
#: refitted (docs/time-model.md, "second small unit"): the table's median |error| is flat from
#: 0.35 to 0.45 and grows past it. Decode keeps whole units (its class, FlashMLA's, already
#: reads its 32-head rows short).
SECOND_UNIT_SHARE = 0.45


def mla_unit_count(batch: KernelBatch, tiles: np.ndarray) -> np.ndarray:
    """Units of a token's (or a sequence's) query rows, ``tiles`` of :func:`mla_unit_rows`;
    where a sparse kernel runs the small units (``small_units``), each unit past the first
    counts :data:`SECOND_UNIT_SHARE` of one."""
    prompt = batch.variant in (GEN_SPARSE_VARIANT, GEN_SPARSE_WIDE_VARIANT)
    shared = prompt & (col(batch, "small_units", 0) > 0)
    return np.where(shared, 1.0 + SECOND_UNIT_SHARE * np.maximum(tiles - 1.0, 0.0), tiles)


def _latent_row_bytes(batch: KernelBatch, fig: DeviceFigures) -> tuple[np.ndarray, np.ndarray]:
    """Shared-memory bytes a latent decode unit's MMAs move per cached token (its K and V rows),
    and whether the kernel converts an fp8 cache to bf16 in shared memory (Hopper's)."""
    # An fp8 kernel that reads the cache itself: on ``tcgen05`` devices it multiplies fp8
    # operands as they are (its q quantized to fp8), a byte an element; Hopper's
    # (``dequant_mma``: FlashMLA's fp8 path, which TensorRT-LLM's H100 rows time) converts each
    # block's fp8 latent rows to bf16 in shared memory and multiplies bf16, its products at the
    # bf16 rate (below) and its shared-memory traffic the conversion's read and write (1 + 2
    # bytes an element of the ``d_qk``-wide row) besides the bf16 operands' reads
    # (:data:`HOPPER_FP8_MLA_BYTES`). Devices without fp8 tensor cores (``sm80``, ``other``)
    # convert the rows to bf16 operands; the sparse variants keep the bf16 width (their
    # kernels are not the dense latent one). The fp8 indexer's logits (DeepGEMM's paged MQA
    # logits) multiply its fp8 keys as they are on both generations, a byte an element, with no
    # conversion (:data:`FP8_INDEXER_MMA`)
    d_v = col(batch, "head_dim_v", 512)
    d_qk = col(batch, "head_dim_qk", 576)
    fp8_mma = (
        batch.dtype.startswith("fp8")
        & (col(batch, "cache_convert", 0) <= 0)
        & (batch.variant not in SPARSE_VARIANTS)
        & ((batch.variant != "indexer") | FP8_INDEXER_MMA)
        & (fig.kernel_generation in ("sm90", "tcgen05"))
    )
    dequant_mma = fp8_mma & (not fig.tcgen05) & (batch.variant != "indexer")
    row_bytes = np.where(
        dequant_mma,
        (d_qk + d_v) * 2.0 + d_qk * HOPPER_FP8_MLA_BYTES,
        np.where(fp8_mma, d_qk + d_v, (d_qk + d_v) * 2.0),
    )
    return row_bytes, dequant_mma


def mla_decode_terms(
    batch: KernelBatch, fig: DeviceFigures, prm: dict[str, float]
) -> dict[str, np.ndarray]:
    """``mla_decode``: latent (absorbed) MLA decode."""
    a = attention_shape(batch)
    b, q, heads, kv_eff = a["b"], a["q"], a["heads"], a["kv_eff"]
    # latent heads: one work unit per sequence and tile of query heads (every head shares the
    # latent cache), all of them reading the same cache blocks: 64 heads a tile, 128 on
    # data-centre Blackwell, whose ``tcgen05`` MMA covers 128 rows (``mla_tile_rows``)
    # (16 rows a unit up to 32 heads on ``tcgen05``: ``mla_unit_rows``)
    tile_rows = mla_unit_rows(batch, fig)
    tiles = np.ceil(heads * q / tile_rows)
    heads_units = b * mla_unit_count(batch, tiles)
    # (one unit a SM: the latent kernels' units fill the SMs by themselves)
    splits = decode_splits(batch, heads_units, kv_eff, fig.sm_count, mla_split_keys(batch, fig))
    splits = np.minimum(splits, mla_max_splits(batch, fig))  # TensorRT-LLM-gen's cap
    units = heads_units * splits
    # a kernel multiplies a whole tile of (query token, head) rows against each latent key at
    # its SM's tensor rate, padded rows too (128 heads: two 64-row tiles, two units): the
    # kernel that walks a sequence on one SM (``kv_split = 0``, the A100 rows) and the
    # splitting ones alike (:data:`PAD_SPLIT_TILES`); DeepGEMM's indexer logits count their
    # real products
    padded = tiles * tile_rows / np.maximum(heads * q, 1.0)
    splits_allowed = col(batch, "kv_split", 1) > 0
    # the latent key and value rows of every 64-token block the unit walks pass through the
    # SM's shared memory once per reader (bf16 operands, 128 bytes a clock): a Hopper
    # warp-group MMA reads them once for its 64-row tile (FlashMLA, ``operand_reads = 1``);
    # Ampere's mma.sync kernel has four warps of 16 rows each read every row themselves
    # (``operand_reads = 4``, set by the mapping for the A100 kernel)
    d_qk = col(batch, "head_dim_qk", 576)
    row_bytes, dequant_mma = _latent_row_bytes(batch, fig)
    # the call's fixed time and each unit's fixed work (its query tile in, its output or
    # partial result out) are waits in seconds, as in prefill (``call_latency_s``,
    # ``unit_latency_s``)
    unit_blocks = np.ceil(np.ceil(kv_eff / 64.0) / splits)  # whole 64-token blocks a unit walks
    # FlashMLA's sparse prompt kernel multiplies every one of a query's top-k slots but gathers
    # only the slots its keys fill (``filled_keys``, set by the mapping of SGLang's
    # ``glm5_dsa_attn_module_perf``): the block walk (``block_s``) counts the filled 64-slot
    # blocks, the products every slot (docs/time-model.md, "FlashMLA's sparse prompt kernel
    # gathers the filled slots")
    filled = col(batch, "filled_keys", 0)
    walked = np.where(
        filled > 0, np.ceil(np.ceil(np.minimum(filled, kv_eff) / 64.0) / splits), unit_blocks
    )
    # besides the operand reads, each key costs the shared memory its latent row's fill (the
    # copy from the cache, in the cache's bytes) and the 64-row query tile's re-read per
    # 64-key block (the tile, 64 x 576, does not stay in registers beside the 64 x 512 fp32
    # output accumulator: ``d_qk`` query bytes a key)
    wgmma = col(batch, "operand_reads", 1) <= 1.0
    q_bytes = 1.0 if batch.dtype.startswith("fp8") else 2.0
    fill_bytes = d_qk * (col(batch, "kv_bytes", 2) + q_bytes)
    # a kernel that cannot read an fp8 cache (``cache_convert`` 1: SGLang's FlashAttention-3
    # backend on Hopper, set by the mapping from the row's ``kernel_source``) has every cached
    # latent row of the call's sequences converted to bf16 in a kernel of its own before a
    # bf16 attention: a call's launch and wait (``call_latency_s``, as the attention's own), the
    # conversion on the CUDA cores (``dequant_s`` an element and SM) against its bytes (fp8
    # read, bf16 written) at the class's bandwidth, and the attention then reads bf16 rows at
    # the bf16 rate, its q not quantized. The H100 rows show each term: fp8 takes 2.06 ns a
    # cached token at any head count from 1 to 64 (bf16 0.38 ns: not the units' work, which
    # grows with the 64-head tiles), and 5.5 us more than bf16 at one key
    convert = col(batch, "cache_convert", 0) > 0
    cached = b * kv_eff * d_qk
    kvb = col(batch, "kv_bytes", 2)
    conv_s = np.maximum(
        cached * prm["dequant_s"] / fig.sm_count,
        cached * (kvb + 2.0) / (prm["eff_memory"] * fig.hbm_bytes_per_s),
    )
    conv = np.where(convert, prm["call_latency_s"] + conv_s, 0.0)
    # the converted rows' products at the bf16 rate (the class's own dtype's, fp8, is twice it),
    # a kernel of their own's or Hopper's fp8 kernel's, which converts them in shared memory
    rate = np.where(convert | dequant_mma, fig.peak(batch.dtype) / fig.peak("bf16"), 1.0)
    fill_bytes = np.where(convert, d_qk * 4.0, fill_bytes)
    smem = (
        unit_blocks
        * 64.0
        * (row_bytes * col(batch, "operand_reads", 1) + fill_bytes)
        / (SMEM_BYTES_PER_CLOCK * fig.clock_hz)
    )
    pre, pre_bytes, partial = _mla_decode_side_kernels(
        batch, fig, prm, convert, heads * q / tiles, tile_rows, splits, units
    )
    # the units one SM works through in turn: a splitting kernel's SMs take the short units as
    # they free up; the non-splitting kernel's units each walk a whole cache, in whole waves
    # over the SMs
    serial = np.where(
        splits_allowed, np.maximum(units / fig.sm_count, 1.0), np.ceil(units / fig.sm_count)
    )
    flops = batch.flops * np.where(padded_rows(batch, splits_allowed), padded, 1.0) * rate
    out = attention_time(
        batch,
        fig,
        prm,
        units=units,
        unit_blocks=walked,
        unit_cost=np.full(len(batch), prm["grouped_unit"]),
        masked=np.zeros(len(batch)),
        serial=serial,
        flops=flops,
        nbytes=np.maximum(batch.bytes - pre_bytes, 0.0)
        + partial
        + np.where(convert, cached * (2.0 - kvb), 0.0),
        latency=np.where(wgmma, smem / np.maximum(unit_blocks, 1.0), smem) + prm["unit_latency_s"],
        call=prm["call_latency_s"],
    )
    # a warp-group MMA takes its operands from shared memory as it multiplies, and the copy
    # engine fills the next blocks beside it: there the shared-memory traffic bounds the
    # products' pace rather than adding to it, but for a unit's first block, which must land
    # before its first product (the latency above). An ``mma.sync`` kernel (four reads) adds
    # the traffic whole
    out["compute_s"] = np.where(
        wgmma, np.maximum(out["compute_s"], serial * smem), out["compute_s"]
    )
    # the key-splitting kernels (FlashMLA and FlashAttention-3 on Hopper, TensorRT-LLM-gen's on
    # Blackwell): each unit an SM runs in turn waits ``split_wait_s`` that its stream does not
    # hide (SPLIT_WAIT_GENERATIONS; 0 in a class fitted without it, the sparse ones')
    if fig.kernel_generation in SPLIT_WAIT_GENERATIONS:
        waits = np.where(splits_allowed, serial * prm["split_wait_s"], 0.0)
        out["extra_s"] = out["extra_s"] + waits
    # TensorRT-LLM-gen's cost a CTA (:func:`cta_cost_s`)
    out["extra_s"] = out["extra_s"] + cta_cost_s(batch, fig, prm, units, serial, splits_allowed)
    # the engine's own time per query row and head around the kernel (``wrapper_row_head_s``,
    # set from :data:`WRAPPER_ROW_HEAD_S`: vLLM's FLASHINFER_MLA on B200)
    wrap = col(batch, "wrapper_row_head_s", 0) * b * q * heads
    out["extra_s"] = out["extra_s"] + pre + conv + wrap
    # the two kernels overlap their loads with their products differently: FlashMLA's
    # producer warps load the next blocks while its consumers multiply (``overlap``); the
    # non-splitting kernel barely does (``walk_overlap``): its own p keeps either kernel's fit
    # from setting the other's
    walk = ~splits_allowed
    both = combine(out["compute_s"], out["memory_s"], prm["walk_overlap"])
    out["compute_s"] = np.where(walk, both, out["compute_s"])
    out["memory_s"] = np.where(walk, 0.0, out["memory_s"])
    # no call faster than its products at the best rate any measured row of the kernel's
    # generation reaches (MLA_DECODE_RATE_CAP; the fits, of one query token, leave
    # ``eff_compute`` at its bound): where the floor binds it is the call's body, as one term
    # (its real and padded products, not in units of the class dtype's rate)
    floor = products_floor_s(batch, fig, flops / rate)
    body = combine(out["compute_s"], out["memory_s"], prm["overlap"])
    low = floor > body
    out["compute_s"] = np.where(low, floor, out["compute_s"])
    out["memory_s"] = np.where(low, 0.0, out["memory_s"])
    # the dense kernel's call between the absorption BMMs (``absorbed_chain``) takes less than
    # stand-alone (:data:`CHAIN_SAVING_S`), at most half of what the call takes
    if not batch.variant:
        chain = col(batch, "absorbed_chain", 0) > 0
        total = prm.get("fixed_s", 0.0) + np.maximum(floor, body) + out["extra_s"]
        save = np.where(chain, np.minimum(chain_saving_s(fig), 0.5 * total), 0.0)
        out["extra_s"] = out["extra_s"] - save
    return out


def cta_cost_s(
    batch: KernelBatch,
    fig: DeviceFigures,
    prm: dict[str, float],
    units: np.ndarray,
    serial: np.ndarray,
    splits_allowed: np.ndarray,
) -> np.ndarray:
    """Seconds the CTAs of a latent decode call's grid add (of :func:`mla_decode_terms`):
    TensorRT-LLM-gen's plain kernel on ``tcgen05`` devices pays ``cta_s`` a CTA (``units``, a
    16-row or 128-row unit's part each), below one wave as past it (:data:`TCGEN05_CTA_COST`;
    0 in a class fitted without it). A class fitted with it timing a kernel that pays no CTA
    below a wave (Hopper's key-splitting kernels, whose rows are flat there) reads it per wave:
    ``cta_s x SMs`` a unit an SM runs in turn (``serial``), the wait past one wave the two
    kernels share (``split_wait_s``, which B200's fit with ``cta_s`` leaves at 0)."""
    cta_s = prm.get("cta_s", 0.0) if TCGEN05_CTA_COST and not batch.variant else 0.0
    if not cta_s:
        return np.zeros(len(batch))
    if fig.tcgen05:
        return cta_s * units
    if fig.kernel_generation in SPLIT_WAIT_GENERATIONS:
        return np.where(splits_allowed, cta_s * fig.sm_count * serial, 0.0)
    return np.zeros(len(batch))


def _mla_decode_side_kernels(
    batch: KernelBatch,
    fig: DeviceFigures,
    prm: dict[str, float],
    convert: np.ndarray,
    unit_rows: np.ndarray,
    tile_rows: np.ndarray,
    splits: np.ndarray,
    units: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The kernels of an MLA decode call beside its attention kernel (of
    :func:`mla_decode_terms`): their seconds, the pre-kernel's bytes (``preprocess_bytes``) and
    the split parts' partial outputs in bytes. ``unit_rows``: the query rows (heads x tokens)
    a unit's tiles hold."""
    # the RoPE + latent-append pre-kernel (``mla_rope_generation``) and, with an fp8 cache, the
    # quantization of q to fp8 in a pass of its own are kernels of the call before the
    # attention: ``launch_s`` each and their bytes (``preprocess_bytes``) streamed at the
    # class's bandwidth, not hidden behind the attention's work. ``rope_kernel`` 0: the caller
    # times RoPE and the append as kernels of its own, as a model step does (the measured
    # rows include them, the default). ``pre_kernels``: the engine's own count of them, where
    # a row gives one (SGLang's Blackwell DSA decode: dsa_time.DSA_DECODE_PRE_KERNELS)
    pre_bytes = col(batch, "preprocess_bytes", 0)
    rope = col(batch, "rope_kernel", 1) > 0
    pre_kernels = np.where(convert, 1.0, 1.0 + float(batch.dtype.startswith("fp8")))
    given = col(batch, "pre_kernels", 0)
    pre_kernels = np.where(given > 0, given, pre_kernels)
    pre = np.where(
        rope,
        prm["launch_s"] * pre_kernels + pre_bytes / (prm["eff_memory"] * fig.hbm_bytes_per_s),
        0.0,
    )
    # a key-splitting kernel (FlashMLA) merges the splits' partial results in a combine
    # kernel of its own: one more launch where the keys split, and every part writes the fp32
    # partial output of its real query rows (at most its 64-row tile: 128 KB at d_v 512),
    # which the combine kernel reads back: at small batch the parts fill the SMs and move
    # megabytes
    rows = np.minimum(unit_rows, tile_rows)
    partial = np.where(splits > 1, units * rows * col(batch, "head_dim_v", 512) * 4.0, 0.0)
    merge = prm["launch_s"] + partial / (prm["eff_memory"] * fig.hbm_bytes_per_s)
    # a kernel without a value product (an indexer's logits: ``head_dim_v`` 0) writes each
    # (query, key) logit whole from the part that scored it: nothing to combine
    # Hopper's FlashMLA (``combine_always``: TensorRT-LLM's H100 kernel) launches its combine
    # kernel on every call, which returns at once for a sequence whose keys did not split
    always = col(batch, "combine_always", 0) > 0
    combines = ((splits > 1) | always) & (col(batch, "head_dim_v", 512) > 0)
    pre = pre + np.where(combines, merge, 0.0)
    return pre, pre_bytes, partial
