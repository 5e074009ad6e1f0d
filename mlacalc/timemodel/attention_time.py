"""The attention classes of the time model: ``attention_prefill`` (and the MLA prefill,
``mla_prefill``, expanded or absorbed) and ``attention_decode``; :func:`attention_time` also
serves ``mla_decode``.

Prefill (:func:`prefill_terms`): 128 x 128 tiles over queries and keys (or the tiles a kernel
names: ``tile_rows``, ``tile_keys``), the softmax's
exponentials on the SFUs (``eff_exp``, ``sfu_overlap``; on Blackwell some on the FMA pipes),
the K/V operands each MMA reads from shared memory (64 rows a read on Hopper, 16 before), the
tiles an SM's shared memory holds at once, the fp8 V transpose and probability conversion,
fp8 head dims padded to powers of two, banded windows (``mask_s``), a call's and a unit's
waits in seconds (``call_latency_s``, ``unit_latency_s``), the RoPE pre-kernel
(``pre_latency_s`` and a streaming pass), an fp8 cache's conversion by a kernel of its own
(``cache_convert``) and a causal prompt's longest tile after its balanced time
(:func:`_causal_tail_s`).

Decode (:func:`decode_terms`): (sequence, KV-head group) units with key splits, per-unit work
as SM throughput (``seq_s``, ``grouped_unit``, ``qhead_unit``), the block walk (``block_s``;
both at the SM's tensor width for the packing kernels: :func:`_tensor_work_scale`; at the
rate of Hopper's XQA MMA for TensorRT-LLM's own: :func:`_xqa_work_scale`), further kernels of
a call (``launch_s``; TensorRT-LLM's Blackwell dispatch one more:
:data:`TRTLLM_GEN_DISPATCH_KERNELS`), the in-kernel merge of Hopper's fp8 XQA key splits
(``merge_s``), fp8 cache conversion (``dequant_s``), FlashAttention-3's fp8 wait on a unit's
first V block transpose on Hopper (:data:`FA3_FP8_FIRST_V_CLOCKS`), the units of the query heads
beyond 32 a KV head in clocks (:data:`MMHA_FALLBACK_CLOCKS`) and waves of resident units
(``wave_s``). The figures behind each rule are in docs/decisions.md ("Time model").
"""

from __future__ import annotations

import dataclasses

import numpy as np

from mlacalc.cost.compressed import RAGGED_CORE
from mlacalc.timemodel.device import DeviceFigures
from mlacalc.timemodel.shared import (
    CONVERT_PER_CLOCK,
    REFERENCE_CLOCK_HZ,
    SFU_EXP_PER_CLOCK,
    SMEM_BYTES_PER_CLOCK,
    col,
    combine,
    elem_bytes,
    hbm_per_sm_ratio,
    l2_resident_share,
    memory_share,
    mma_rows,
    smem_per_sm,
    tensor_per_sm_ratio,
)
from mlacalc.words.kernels import KernelBatch

__all__ = [
    "ALWAYS_COMBINE_DECODE",
    "ALWAYS_COMBINE_S",
    "BF16_CACHE_WRITE_HBM",
    "CACHE_WRITE_BLOCK_THREADS",
    "CACHE_WRITE_REFERENCE_THREADS",
    "FA3_COMBINE_SEQ_S",
    "FA3_DYNAMIC_SPLIT_MAX_BATCH",
    "FA3_FP8_FIRST_V_CLOCKS",
    "FA3_FP8_PROMPT_BUILDS",
    "FA3_MAX_SPLITS",
    "FA3_ONE_WG_HEAD_DIM",
    "FA3_ONE_WG_ROWS",
    "FA3_PARTIAL_BYTES",
    "FA3_QUERY_CAST_KERNELS",
    "FA3_SPLIT_EFFICIENCY",
    "FA3_SPLIT_FILL",
    "FA3_SPLIT_SLACK",
    "FIXED_STAGE_VARIANTS",
    "FLASH_ENCODER_TCGEN05_EXP",
    "FLASH_ENCODER_TCGEN05_RATE",
    "FLASH_HEAD_DIMS",
    "FP8_CACHE_WRITE_CLOCKS",
    "FP8_CACHE_WRITE_OVERLAP",
    "FP8_PROMPT_TCGEN05_EXP",
    "FP8_PROMPT_TCGEN05_RATE",
    "GATHER_DECODE_VARIANTS",
    "HD192_SIDE_CALL_S",
    "KV_UPCAST_PREFILL",
    "KV_UPCAST_PROMPT_SLOW",
    "KV_UPCAST_STREAM_HEAD_DIM",
    "MMHA_BLOCK_SLOTS",
    "MMHA_FALLBACK_CLOCKS",
    "MMHA_FALLBACK_UNIT_CLOCKS",
    "MMHA_NARROW_FACTORS",
    "MMHA_SPLIT_UNITS_PER_SM",
    "PACKING_DECODE",
    "PACKING_PREFILL",
    "QUERY_CAST_BYTES",
    "QUERY_CONVERT_BYTES",
    "QUERY_CONVERT_KERNELS",
    "ROW_PADDED_VARIANTS",
    "ROW_TILE_DECODE",
    "SEQUENCE_PASS_CLOCKS",
    "SEQUENCE_PASS_VARIANTS",
    "SEQUENCE_PASS_WIDTH",
    "SM_RESIDENT_BLOCKS",
    "SM_RESIDENT_THREADS",
    "TENSOR_WALK_VARIANTS",
    "TRITON_MAX_KV_SPLITS",
    "TRITON_SPLIT_HEAD_BLOCK",
    "TRITON_SPLIT_MIN_KEYS",
    "TRITON_SPLIT_VARIANTS",
    "TRTLLM_FURTHER_KERNEL_S",
    "TRTLLM_GEN_DISPATCH_KERNELS",
    "UNFUSED_PREFILL_VARIANTS",
    "UNFUSED_SCORE_BYTES",
    "UNIFIED_TRITON_PROMPT_KEYS",
    "UNIT_LATENCY_DECODE",
    "WIDE_GROUP_HEADS",
    "WIDE_GROUP_TILE_COST_ROWS",
    "WIDE_GROUP_TILE_ROWS",
    "WIDE_GROUP_UNITS",
    "WINDOW_WALK_VARIANTS",
    "XQA_HEAD_PACK",
    "attention_shape",
    "attention_time",
    "cache_write_block_weight",
    "call_fixed_s",
    "decode_splits",
    "decode_terms",
    "encoder_kernel_shape",
    "engine_attention_kernel",
    "fa3_dynamic_split",
    "fa3_hd_wait_s",
    "fa3_one_warpgroup",
    "fa3_prompt_splits",
    "hd192_side_call_s",
    "paired_tile_waves",
    "prefill_terms",
    "query_convert_s",
    "sequence_pass_s",
    "triton_kv_splits",
]

#: (engine, tensor-core generation) whose prompt attention kernel packs the query heads of a KV
#: head into a tile's rows (``head_pack`` 0): FlashAttention-3, which SGLang and vLLM run on
#: Hopper; on Blackwell they run FlashInfer / TensorRT-LLM-gen, a tile a query head
PACKING_PREFILL = frozenset({("sglang", "sm90"), ("vllm", "sm90")})

#: Blackwell's fp8 prompt kernel (TensorRT-LLM-gen's, which TensorRT-LLM, vLLM's FlashInfer
#: backend and SGLang's ``trtllm_mha`` run on B200: ``attention_prefill`` of no variant) reaches
#: this share of what Hopper's fp8 kernels reach of their fp8 peak, on the products. Read from
#: TensorRT-LLM's tables, not fitted: at 2,048 tokens and more (no window) an fp8 prompt takes
#: 0.761 / 0.697 of the bf16 prompt's time on H100 (head dim 128 / 256, medians over shapes)
#: and 0.867 / 0.788 on B200, 0.88 of Hopper's gain at both; at head dim 64, where the
#: exponentials take as long as the products, 0.98. The fits before the rule said the same
#: (``eff_compute`` fp8 over bf16: H100 0.91, B200 0.78). The mechanism is not settled (the
#: fp8 MMAs' draw against B200's power cap is a candidate the tables cannot show)
FP8_PROMPT_TCGEN05_RATE = 0.88

#: The fewest query rows (and keys) a Blackwell prompt kernel's tile is cut to where its
#: 128 x 128 tile does not fit the SM's shared memory (:func:`_wide_head_tiles`)
WIDE_HEAD_TILE_ROWS = 64.0

#: Head dim past which SGLang's Triton prompt kernel on Hopper runs query tiles of
#: :data:`WIDE_HEAD_TILE_ROWS` rows (:func:`_wide_head_tiles`). Read from its H100 rows at head
#: dim 512 (1-16 query heads on 1-2 KV heads, no window; the tables' only head dim past 256),
#: not from the kernel's source (its block sizes by head dim not checked against a stored
#: copy): a call of fewer 64-row tiles than SMs took +47% to +104% (bf16) and +30% to +80%
#: (fp8) longer predicted with 128-row tiles, one sequence of one head 0.072 us a token where
#: they gave 0.166 (its last tile's causal walk), while the calls of more tiles than SMs were
#: on it (-2% to -14%); at 256 (a 1,024-key window) the same cut read the full waves +24% to
#: +26%, so 256 keeps its 128 rows. Hopper only (``kernel_generation`` ``sm90``): the evidence
#: is H100's rows alone, so A100, AMD and compute capability 12 parts keep the tile as given
#: (their Triton block sizes by head dim are not read from any table)
TRITON_WIDE_HEAD_DIM = 256.0

#: That kernel's exponentials run at this multiple of the SFUs' rate (``eff_exp`` then at most
#: 1 on every device, a share of its own exponential rate). Its bf16 build does not: the B200
#: fits put fp8 ``eff_exp`` at 1.52, 1.57 and 1.58 (TensorRT-LLM, SGLang, vLLM) and bf16 at
#: 0.82, 0.97 and 1.01; 1.55 is the fp8 fits' middle. An H100 fit cannot tell its own
#: ``eff_exp`` above 1 (Hopper takes every exponential on the SFUs), so it carried arbitrary
#: values to B200 (TensorRT-LLM 1.05, vLLM 1.77) where the kernel's rate is a device figure
FP8_PROMPT_TCGEN05_EXP = 1.55

#: FlashAttention-4's encoder kernel (SGLang's and vLLM's non-causal bf16 attention on data-centre
#: Blackwell: ``attention_prefill`` of the ``encoder`` variant at a built head dim, set by
#: :func:`encoder_kernel_shape`) takes its exponentials at this multiple of the class's
#: ``eff_exp`` and its products at this share of the tensor peak (``..._RATE``), against
#: FlashAttention-3's on Hopper. Read from the tables, not fitted: the rows of a millisecond and
#: more at 4,096 tokens an image and more (395-500 at head dim 64, 856-1,069 at 72 and 80, built
#: 96; each engine and device) take a median 0.122-0.123 / 0.149-0.158 SM clocks a score on H100
#: (head dim 64 / 96) and 0.080-0.082 / 0.103-0.106 on B200. Solved for a share of the tensor
#: peak and of the SFUs' exponential rate under the class's own form (the two taken together by
#: the p-norm at 16, the fits' ``sfu_overlap``, plus the shared-memory operand reads), H100's
#: rows give 0.85 / 0.93 of the peak and 0.68 / 0.69 of the SFUs (SGLang / vLLM), B200's 0.57 /
#: 0.59 and 0.94 / 0.98: B200 over H100 0.67 / 0.63 of the products' share and 1.38 / 1.41 of
#: the exponentials' (FlashAttention-4 computes some exponentials as a polynomial on the FMA
#: pipes; why its products reach less of B200's peak is not settled). Without them each device's
#: fit took its kernel's rates into other terms (B200's a 0.43 us walk a key block, ``block_s``,
#: and ``eff_exp`` 1.80-1.87; H100's none and 0.73-0.78), which did not carry: the rows from the
#: other device read +10-15% signed both ways, +12-23% at a millisecond and more
FLASH_ENCODER_TCGEN05_EXP = 1.4
FLASH_ENCODER_TCGEN05_RATE = 0.65

#: SM clocks a K/V element takes in vLLM's quantizing write of a prompt's new K/V rows into an
#: fp8 cache (``cache_quant_elements``: its measured prompt rows time it before the attention
#: kernel, in place of the bytes of those rows in the pre-kernel's stream). Read from the
#: tables, not fitted: a least-squares split of vLLM's fp8 rows at head dim 128, 256-1,024
#: tokens, into a fixed time, query bytes, K/V bytes and products gives 1.40 ms per GB of bf16
#: K/V on H100 and 1.24 on B200, 0.68 clocks an element per SM on both (132 SMs at 1,830 MHz,
#: 148 at 1,856), where HBM would take 0.45 and 0.19 ms for the K/V read and fp8 write; the
#: bf16 cache's rows take 1.07 and 0.62 ms (0.52 and 0.36 clocks), SGLang's and TensorRT-LLM's
#: fp8 rows 0.09-0.44 ms
FP8_CACHE_WRITE_CLOCKS = 0.68

#: The p-norm that joins vLLM's quantizing fp8 cache write's clocked elements
#: (:data:`FP8_CACHE_WRITE_CLOCKS`) and its blocks' fixed work (``token_rows`` x
#: ``token_row_s``, :func:`_pre_kernel_s`): a block's later elements are converted while its
#: first loads and its slot lookup are waited on, so the two overlap in part, not one after the
#: other. Read from the tables, not fitted: vLLM's H100 fp8 prompts of 128 sequences of 512
#: tokens, one KV head a query head, head dim 128 (0.3 ns a token and head taken off for the
#: attention kernel) take 2.1 / 4.1 / 10.3 / 11.5 / 16.7 / 25.0 / 46.1 ns a token at 1 / 2 / 4
#: / 8 / 16 / 32 / 64 heads: the few-head rows a block's time, the many-head rows the elements at
#: 0.68 clocks (46.1 ns at 64 heads against 46.1 from the clocks alone), and summed the two read
#: 4.5% (median) where the 2-norm reads 3.2%, the block's time chosen for each (at 32 sequences
#: 6.1% and 4.3%, at 1,024 tokens and 64 sequences 16.6% and 9.7%; at 256 tokens the sum reads
#: better, 2.2% against 9.6%). A bf16 cache's write
#: keeps the sum: joined so, its fits on the two devices put the block at 1.32e-7 s (H100) and
#: 9.9e-8 (B200), from 6.5e-8 on both, and B200's bf16 prompts from H100 read 7.64% -> 9.14%
FP8_CACHE_WRITE_OVERLAP = 2.0

#: vLLM's cache write (``reshape_and_cache_flash``) launches a thread block a token of
#: ``min(K elements a token, 512)`` threads (K elements: KV heads x head dim; as recalled of
#: vLLM's launcher, csrc/cache_kernels.cu, not checked against a stored copy); an SM holds at
#: most :data:`SM_RESIDENT_THREADS` threads and :data:`SM_RESIDENT_BLOCKS` blocks at once, so
#: the blocks it runs together fall from 16 (128 threads) to 4 (512 and more) as the KV heads
#: grow, and a block's fixed time (its slot lookup and dependent loads: ``token_row_s``,
#: fitted, for a 128-thread block) is shared by fewer (:func:`cache_write_block_weight`)
CACHE_WRITE_BLOCK_THREADS = 512.0
SM_RESIDENT_THREADS = 2048.0
SM_RESIDENT_BLOCKS = 32.0
#: The block size ``token_row_s`` is fitted for (its weight 1)
CACHE_WRITE_REFERENCE_THREADS = 128.0


def cache_write_block_weight(elements: np.ndarray) -> np.ndarray:
    """The share of an SM's time a token's block of vLLM's cache write holds, per a
    128-thread block's (:data:`CACHE_WRITE_BLOCK_THREADS`): the SM's resident blocks at 128
    threads over those at the block's ``min(elements, 512)`` threads (0.5 at 64 elements,
    1 at 128, 2 at 256, 4 from 512)."""
    threads = np.clip(np.asarray(elements, dtype=np.float64), 1.0, CACHE_WRITE_BLOCK_THREADS)

    def resident(t: np.ndarray | float) -> np.ndarray:
        return np.minimum(SM_RESIDENT_BLOCKS, np.floor(SM_RESIDENT_THREADS / t))

    return resident(CACHE_WRITE_REFERENCE_THREADS) / resident(threads)


#: Share of the HBM's bandwidth vLLM's write of a prompt's new K/V rows into a bf16 cache
#: (``cache_write_elements``: 2 bytes read and 2 written an element) draws, in place of the
#: pre-kernel's stream. Read from the tables, not fitted: the least-squares split above gives
#: 1.07 ms per GB of bf16 K/V on H100 and 0.62 on B200, 0.56 and 0.42 of their HBM, 0.48 their
#: geometric middle (in SM clocks 0.52 and 0.36 an element: the write follows the HBM more than
#: the clocks, B200 1.7x H100's rate against 2.3x the HBM and 1.14x the SMs' clocks). The
#: fitted prompt residuals of vLLM's rows grew with the K/V elements before (+2.6 us per
#: million on H100, +1.5 on B200; SGLang's +0.65), and with them the query heads a KV head
#: carries: -5 to -11% at 1-3, +3 to +14% at 16-64 (bf16, both devices)
BF16_CACHE_WRITE_HBM = 0.48

#: (engine, kernel generation) whose prompt kernel with an fp8 cache keeps a bf16 query and
#: multiplies in bf16 (``kv_upcast`` 1): its products at the bf16 peak, its operands read from
#: shared memory in bf16, no fp8 V transpose and no probability conversion; the fp8 cache is
#: still what it reads from HBM. vLLM on Hopper (its FlashAttention-3 build; a model step's vLLM
#: prompt on ``sm90`` with an fp8 cache the same). Read from the tables, not fitted:
#: vLLM's H100 fit of the fp8 prompt class put its products at 0.509 of the fp8 peak, 1.02 of
#: the bf16 peak (its bf16 class 1.0), where SGLang's fp8 FlashAttention-3 (which casts its
#: query to fp8 first) reaches 1.0 of the fp8 peak, its fp8 prompts 0.75-0.89 of its bf16 ones
#: where vLLM's take 1.02-1.22 (0.1 ms to over 3 ms, the same shapes); vLLM's H100 fp8 decode
#: shows no query cast (its fp8 floors 0.7-1.5 us over bf16, SGLang's 3.2-3.5 us: a kernel);
#: its fp8 prompts take 1.06 / 1.21 / 1.25 / 1.39 times the bf16 rows of the same shape at head
#: dims 64 / 128 / 192 / 256 (medians over every shape), where B200's (TensorRT-LLM-gen, fp8
#: products) take 1.04 / 1.10 / 1.07: the products' share, which grows with the head dim,
#: slowed, not sped up. The
#: conversion of the K/V blocks itself is not counted: at the datasheet conversion rate on the
#: products' path (a packed instruction per two elements of every block a tile walks) the rows
#: read far too slow (H100 from B200 17.9%, +7% signed, against 14.0% without it)
KV_UPCAST_PREFILL = frozenset({("vllm", "sm90")})

#: Head dim from which a decode kernel that upcasts its fp8 cache (``kv_upcast`` 1: vLLM's
#: FlashAttention-3 on Hopper, :data:`KV_UPCAST_PREFILL`, whose decode keeps a bf16 query too)
#: streams the cache in the time of a bf16 cache, 2 bytes an element where it reads 1. Read
#: from vLLM's H100 rows, not fitted: over 200 MB of cache (no window) its fp8 decode takes
#: 0.112 / 0.092 / 0.135 / 0.177 SM clocks an element at head dims 64 / 128 / 192 / 256
#: (medians over 8-128 sequences; its bf16 rows 0.166-0.175 at every head dim), flat in the
#: query heads a KV head carries (1-16: 0.50-0.51 of the bf16 rows' bandwidth at 256, 0.85-0.91
#: at 128) and in the sequences: at 256 the fp8 rows take as long as the bf16 rows, at 128 and
#: below they stream near the fp8 bytes' rate. SGLang's FlashAttention-3 (an fp8 query, fp8
#: products) takes 0.097 at 256, and B200's kernel 0.84-0.96 of its bf16 bandwidth at every
#: head dim. The mechanism is not settled: the kernel's K/V blocks converted to bf16 in shared
#: memory at 256 (2 bytes an element, the bf16 kernel's stages) is a candidate the tables
#: cannot show; the same kernel's fp8 prompts are slowest against bf16 at 256 too (1.39x). A
#: per-element conversion cost on the CUDA cores (:data:`CONVERT_PER_CLOCK`) would slow every
#: head dim alike, which the rows do not show. Without it the H100 fit read the slow rows as an HBM
#: share of 0.76 (bf16 0.92), which B200's rows from H100's fit carried (their long rows +13
#: to +29% signed)
KV_UPCAST_STREAM_HEAD_DIM = 256.0

#: Time an upcasting prompt kernel's products (``kv_upcast``, :data:`KV_UPCAST_PREFILL`) take
#: from :data:`KV_UPCAST_STREAM_HEAD_DIM` on, against the bf16 peak the rule gives every head
#: dim: at 256 they slow, where the decode streams its cache as bf16. Read from the tables, not
#: fitted: vLLM's H100 fp8 prompts take 1.54 / 1.58 / 1.60 times the bf16 rows of the same shape
#: at head dim 256 (bf16 rows of 0.1-0.3 ms / 0.3-1 ms / over 1 ms: 333 / 315 / 361 shapes)
#: where at 128 they take 1.26 / 1.19 / 1.10 (1,905 / 1,790 / 1,927 shapes): 1.45 their middle
#: ratio over a millisecond, where the products are most of the time; under 0.1 ms, where they
#: are not, 1.24 at 256 and 1.23 at 128. The mechanism is not settled: the K/V blocks held in
#: bf16 in shared memory at 256 (the decode rule's candidate), which would leave the kernel
#: fewer pipeline stages beside a 256-wide output, is one the tables cannot show
KV_UPCAST_PROMPT_SLOW = 1.45

#: engines whose decode kernels pack every query head of a KV head into one unit (FlashAttention
#: -3, FlashInfer / TensorRT-LLM-gen, Triton); TensorRT-LLM's own XQA packs up to
#: :data:`XQA_HEAD_PACK`
PACKING_DECODE = frozenset({"sglang", "vllm"})

#: The most query heads a KV head TensorRT-LLM's grouped decode kernel (XQA) packs into a unit
#: (``head_pack`` of its measured decode rows, :mod:`mlacalc.measured.mapping`; from recall of
#: its source); beyond them each query head runs a unit of its own (the masked MHA kernel)
XQA_HEAD_PACK = 32

#: TensorRT-LLM's choice between its grouped decode kernel (XQA) and the masked MHA kernel
#: (MMHA, a unit a query head) for a bf16 cache: XQA only where its blocks, ``batch x KV heads
#: x max(1, floor(cached keys / XQA_HISTORY_TOKENS))``, times ``XQA_MIN_BLOCK_FACTOR`` reach
#: the SM count (132 on H100: 33 blocks), as recalled of its XQA runner's ``shouldUse``
#: heuristic (``kMinHistoryTokensPerBlock`` 128, ``kEnableMinBlockFactor`` 4; not checked
#: against a stored copy of the source). H100's bf16 rows switch there: one KV head, head dim
#: 128, 2-16 query heads, 512 cached keys, 8 sequences (32 blocks) take 15.3-15.8 us (25.4 at
#: 12 and 16 heads, as MMHA's units a query head fill the SMs) and 16 sequences (64) 11.9-12.4
#: at every head count; 2,048 keys, 2 sequences 16.1-16.5 (27.3 at 16 heads), 4 sequences
#: 13.2-13.9; 128 keys, 32 sequences 11.0-19.2 by head count, 64 sequences 9.6-10.1. Hopper's
#: fp8-cache XQA kernel runs at every shape (the fp8 rows show no switch: 512 keys, 8 and 16
#: sequences 7.6-8.3 us alike), and the TensorRT-LLM-gen kernel on data-centre Blackwell is
#: another dispatch.
XQA_MIN_BLOCK_FACTOR = 4.0
XQA_HISTORY_TOKENS = 128.0

#: Head dims at which TensorRT-LLM's own bf16-cache decode kernels (MMHA, mma.sync XQA) take a
#: fitted ``narrow_head_s`` less a call (:func:`_narrow_head_call`) than at 128 and 256. Read
#: from H100's bf16 rows, MHA and grouped alike: at 1-4 sequences and up to 16 cached keys the
#: call takes 7.8 / 8.8 / 8.1 / 9.0 us at head dims 64 / 128 / 192 / 256 (medians), where its
#: fp8-cache MHA rows (MMHA) take 9.2 / 9.0 / 9.1 / 9.2 and B200's (TensorRT-LLM-gen)
#: 10.9-11.1 at every head dim; at one sequence and one head hd 64 runs 0.8-2.4 us under
#: hd 128 out to 256 cached keys and hd 192 0.7-3 us under hd 256 out to 16,384. Which kernel
#: or launch configuration makes the step is not in the shared READMEs (a head dim of 192 is
#: padded to 256 in the kernels' walk, yet it starts at 64's floor: not a per-element cost);
#: it is the tables' step, not a recalled rule. A100's rows (head dim 128 only) cannot show it.
NARROW_HEAD_DIMS = (64.0, 192.0)

#: TensorRT-LLM's masked MHA decode (MMHA: a unit a query head) sizes its thread block by its
#: units: ``256 x f`` threads, ``f = min(floor(MMHA_BLOCK_SLOTS x SMs / (batch x query heads)),
#: 4)`` (recalled of its launcher's tuning of the block size by batch x heads for occupancy,
#: four 256-thread blocks an SM; not checked against a stored copy of the source): a call
#: whose factor is in :data:`MMHA_NARROW_FACTORS` takes at least a fitted ``mmha_block_s`` of
#: SM work (:func:`mmha_narrow_block`), and at every factor the call's own latency hides
#: ``mmha_hidden_s`` of its units' work. Read from the tables, not recalled: at up to 8 cached keys
#: the MHA rows take a time set by batch x query heads alone (every split of it, head dim and
#: cache dtype), H100 (132 SMs) 8.6-9.3 us at 64-128 and 192-256 (f 4, 2) but 14.5-14.8 at
#: 160 (f 3) and 12.7-14.5 at 320-1,024 (f 1); A100 (108 SMs) 10.6-11.3 us at 64-96 and
#: 160-192 (f 4, 2) but 19.1 at 128 (f 3) and 16.2-18.1 at 256-768 (f 1). No other count of
#: blocks an SM (1-8, floor or ceiling) sorts both devices' rows so; a factor of 3 (768
#: threads) timing as 1 suggests a build of 256, 512 and 1,024 threads alone (inferred).
MMHA_BLOCK_SLOTS = 4.0
MMHA_NARROW_FACTORS = (1.0, 3.0)

#: Elementwise kernels SGLang runs over the query before its TensorRT-LLM-gen attention kernel
#: (``trtllm_mha``, Blackwell) with an fp8 cache, which takes an fp8 query: read from SGLang's
#: B200 rows, not from its source. Its fp8 rows take 6.4 us more than its bf16 rows of the same
#: shape at the floor of a prompt and 6.2 us of a decode (two launches; H100's FlashAttention-3
#: rows 0.3 us more in a prompt), and a prompt 1.08 us more per million query elements beyond
#: (residual median 2.4 us over 14,600 shape pairs under 0.3 ms): 7 bytes an element at 0.81 of
#: B200's HBM, a bf16 pass (2 bytes read, 2 written) and the fp8 cast (2 read, 1 written).
#: vLLM's FlashInfer path on B200, which takes a bf16 query, shows none (0.1 us). Each
#: conversion kernel's launch and wait is a further kernel's of a call,
#: :data:`TRTLLM_FURTHER_KERNEL_S` (3.0 us at H100's clock, read from TensorRT-LLM's H100
#: floors; 2 x 2.96 us at B200's clock against the 6.2 us above), not the class's fitted
#: ``launch_s`` / ``pre_latency_s``: every fp8 row of SGLang's B200 kernel runs both, so its fit
#: could not tell them from the call's fixed cost and put them there (decode ``launch_s`` 0.02
#: us, ``fixed_s`` 16.0 us against bf16's 9.1), which H100's FlashAttention-3 rows, converting
#: nothing, then read +36% at their floor (from B200)
QUERY_CONVERT_KERNELS = 2.0
QUERY_CONVERT_BYTES = 7.0

#: Kernels SGLang's FlashAttention-3 decode on Hopper (kernel source ``fa3``) runs over the
#: query before the attention kernel with an fp8 cache: one, the cast of the bf16 query to the
#: cache's fp8 type (FlashAttention-3's fp8 kernel takes q, k and v in fp8; as recalled of
#: SGLang's ``flashattention_backend.py``, ``q.to(self.kv_cache_dtype)``, not checked against
#: a stored copy), :data:`QUERY_CAST_BYTES` an element (2 read, 1 written) and a further
#: kernel's launch and wait (:data:`TRTLLM_FURTHER_KERNEL_S`). Read from SGLang's H100 decode
#: rows: at up to 8 sequences under 15 us, no window, its fp8 rows take 3.24 / 3.45 us more
#: than its bf16 rows of the same shape at head dims 64 / 128 (343 / 2,180 shape pairs, means),
#: the same at both head dims (a kernel, not the first V block's transpose, which doubles
#: with the head dim: :data:`FA3_FP8_FIRST_V_CLOCKS`), 4.49 at 256; vLLM's H100 rows, the same
#: kernel without the cast, 0.66 / 1.50 us. Its prompt rows do not show it (0.09-0.51 us): not
#: settled. Without it the fit of SGLang's H100 fp8 decode held the cast in its fixed cost
#: and SGLang's B200 fp8 rows from it read +22% at their floor
FA3_QUERY_CAST_KERNELS = 1.0
QUERY_CAST_BYTES = 3.0


#: (engine, kernel generation) whose packing decode (FlashAttention-3) runs its split-combine
#: kernel after the attention kernel at every call, one split or many (``combine_kernel`` 1):
#: vLLM on Hopper. As recalled of vLLM's FlashAttention backend (v1/attention/backends/
#: flash_attn.py, not checked against a stored copy): it passes FlashAttention-3 a fixed
#: ``num_splits`` ceiling (for CUDA graphs) and its scheduler metadata picks the splits per
#: sequence, so the combine kernel is launched whatever they come to. Read from the tables: at
#: one or two sequences and up to 64 cached keys (no split) vLLM's H100 bf16 rows take 1.45 /
#: 2.57 / 3.23 us more than its B200 rows (FlashInfer's TensorRT-LLM-gen kernel, which merges
#: its splits in the kernel) at head dims 64 / 128 / 256; SGLang's H100 rows, the same
#: FlashAttention-3 kernel with the heuristic's splits, 1.8 us less than vLLM's (bf16; fp8 the
#: same: not every figure fits). ``ALWAYS_COMBINE_S``: the kernel's time at H100's clock
#: (clocked as ``launch_s``), 2.5 us, the head dim 128 gap rounded, not fitted (every one of
#: vLLM's H100 rows runs it, so its fit cannot tell it from the call's fixed cost); chosen with
#: the rows from the other device in view (their signed errors balance at 2.2-2.3 us;
#: TensorRT-LLM's 3.0 us a further kernel, :data:`TRTLLM_FURTHER_KERNEL_S`, overshot). Only up
#: to :data:`FA3_DYNAMIC_SPLIT_MAX_BATCH` sequences (:func:`fa3_dynamic_split`).
ALWAYS_COMBINE_DECODE = frozenset({("vllm", "sm90")})
ALWAYS_COMBINE_S = 2.5e-6

#: Most sequences a call of :data:`ALWAYS_COMBINE_DECODE`'s FlashAttention-3 decode takes its
#: dynamic-split path at: up to them a one-CTA kernel picks every sequence's splits (31 a warp,
#: 32 warps) and the attention kernel writes its outputs as fp32 partials (and their
#: log-sum-exps) that the combine kernel reads back and writes out; past them the splits are
#: the static heuristic's (one at these batches), no combine kernel, the output written once.
#: As recalled of FlashAttention-3's ``mha_fwd`` ("dynamic split for batch size <= 992") and
#: of vLLM's FlashAttention backend, which refuses CUDA-graph capture sizes over 992 "from
#: FA3's internal heuristic" (neither checked against a stored copy). Read from vLLM's H100
#: rows at up to 63 cached keys, no window: 32 query heads on 8, head dim 128, bf16, 126.5 us
#: at 512 sequences and 214.9 at 1,024 (2 x 512 would be 253); one head of 64, 28.8 and 37.8
#: us; SGLang's FlashAttention-3 rows step by no such amount (0.095 / 0.086 us a sequence).
FA3_DYNAMIC_SPLIT_MAX_BATCH = 992.0

#: Bytes a query head's output element costs the dynamic-split path over a direct write, a
#: split each (:data:`FA3_DYNAMIC_SPLIT_MAX_BATCH`): the fp32 partial written (4) and read back
#: by the combine kernel (4); the combine's bf16 write replaces the kernel's own
FA3_PARTIAL_BYTES = 8.0

#: Seconds (at H100's clock, clocked) the dynamic-split path costs a sequence past the SM count
#: besides its partials' bytes (:data:`FA3_DYNAMIC_SPLIT_MAX_BATCH`; the combine kernel's
#: blocks, a block a sequence, past one wave; as recalled, not checked), the combine's time the
#: longer of that stream and ``ALWAYS_COMBINE_S``. Read from vLLM's H100 rows at up to 31 cached
#: keys, no window, not fitted: a sequence's time from 256 to 512 sequences less its time from
#: 1,024 to 2,048, at one query head (where the partials' bytes are few) 13.1 / 13.0 ns bf16 and
#: 12.5 / 10.4 ns fp8 at head dims 64 / 128 (17-20 ns at 192 and 256), growing with the query
#: heads x head dim by 4-8 ps an element (64 heads of 128: 44 ns), which FA3_PARTIAL_BYTES gives
#: at the HBM's rate
FA3_COMBINE_SEQ_S = 12.0e-9

#: (engine, kernel generation) whose packing decode (FlashAttention-3) runs its local
#: (sliding-window) kernel only once the cache is longer than the window (``local_window`` 1)
#: and the non-local one inside it: vLLM on Hopper. As recalled of FlashAttention's
#: ``mha_fwd`` (flash_api.cpp, not checked against a stored copy): a left window at least the
#: keys less one is reset to -1, no window, so the call inside the window is the non-local
#: kernel. Read from vLLM's H100 rows (every window, 128 / 1,024 / 8,192, head dims 64-256):
#: a windowed row inside its window takes its unwindowed twin's time (-0.04 to +0.03 us,
#: medians over 240-3,108 pairs a window, head dim and cache dtype); past it the same time at
#: every cache from twice the window to 131,072 keys, more than at the window: the local
#: kernel's own cost, not its keys' work (a block's work grows with the head dim; this falls).
#: Timed as ``local_unit_s`` (the class's, fitted: the rows past the window tell it from the
#: rest of the call) a unit an SM runs in turn (``max(units / SMs, 1)``). Per unit in turn the
#: rows give (bf16, window 128) at up to one unit an SM 3.9-5.6 us at head dim 64, 1.0-3.2 at
#: 128, 0.6-1.2 at 192; past one unit an SM 2.2-3.1 / 0.5-0.9 / 0.7-0.9 (fp8 2.0-2.7 / 1.4-2.6 /
#: 1.6): a call's part besides, and a head-dim dependence, neither settled (a call's part
#: fitted beside it, ``local_call_s``, took H100's call floor down and B200's rows from H100 read
#: worse: docs/time-model.md). SGLang's FlashAttention-3 rows run the local kernel inside the
#: window too (+0.5 to +2.0 us over their unwindowed twins at windows 128 / 8,192) and take no
#: more past it: the model gives them nothing, the window's keys either way. vLLM's B200 rows
#: (TensorRT-LLM-gen) 1.0-1.1x past the window, not given it
LOCAL_WINDOW_DECODE = frozenset({("vllm", "sm90")})

#: Seconds SGLang's FlashAttention-3 calls at head dim 192 (H100, kernel source ``fa3``; the
#: ``hd192_side_call`` column) take beyond the attention kernel's own time, prompt and decode,
#: either cache dtype. Read from the tables, not fitted; its mechanism is not identified (a
#: kernel or host work the table does not name: FlashAttention-3 has a head dim 192 build). At
#: up to 64 tokens or cached keys, no window, a row at 192 takes this much more than the mean
#: of the same shape at 128 and 256, net of the model's own head-dim terms, at every batch
#: (1-2,048) and head count (1-64): median 8.0 us over 1,502 shape triples (quartiles 7.0-8.8;
#: prompts bf16 / fp8 7.3 / 8.0 us, decode 7.9 / 8.5 us). vLLM's H100 rows (its own
#: FlashAttention-3 build, ``vllm_flash_attn_fa3``) show none (-0.6 us over 1,288). SGLang's
#: B200 rows at 192 (its Triton kernels, kernel source ``triton``) take it too: at up to 64
#: tokens or cached keys, no window, up to 32 sequences, 6.2-8.2 us more than its Triton rows
#: of the same shape at 256 (decode, 432 shape pairs; prompts 7.8-8.2 us, 720), where the model
#: has 192 no slower than 256: an SGLang call's, not the kernel's. A wait, seconds on every
#: device
HD192_SIDE_CALL_S = 8.0e-6
#: (engine, kernel generation) whose dense attention calls at head dim 192 take it: SGLang's on
#: Hopper (FlashAttention-3) and data-centre Blackwell (Triton) (a model step under it too,
#: :func:`engine_attention_kernel`)
HD192_SIDE_CALL_ENGINES = frozenset({("sglang", "sm90"), ("sglang", "tcgen05")})

#: (engine, kernel generation) whose packing decode kernel takes a unit's per-unit work (its
#: query rows' load, softmax normalisation and output write: ``seq_s`` x (``grouped_unit`` +
#: ``qhead_unit`` x query rows x head dim / 128)) at least once whatever the units, the time
#: of one unit on its SM (``unit_latency`` 1: ``max(units / SMs, 1)`` of it), where the other
#: packing kernels' fits share it over the SMs as throughput (``units / SMs``): SGLang on
#: data-centre Blackwell (its ``trtllm_mha`` backend, the TensorRT-LLM-gen kernel). Read from
#: SGLang's B200 rows at up to 63 cached keys, no window: one KV head takes 10.4 / 12.4 / 14.6 /
#: 18.6 / 20.7 us at 1-16 / 32 / 64 / 96 / 128 query heads (head dim 128) and 10.5 / 12.5 /
#: 14.6 / 20.7 / 24.8 / 28.9 us at 1-8 / 16 / 32 / 64 / 96 / 128 (head dim 256), the same at
#: every batch from 1 to 64 (a unit's own time, not a share of the SMs): 0.08 / 0.145 us a
#: query head, in proportion to the head dim. vLLM's B200 rows (the same kernel through
#: FlashInfer) do not show it (8.7-11.1 us at 64 query heads a KV head and one sequence), nor
#: Hopper's FlashAttention-3 rows (9.3 -> 10.9 us at 1 -> 128, head dim 128): refitted under the
#: rule their fits read worse (vLLM B200 bf16 4.8% -> 5.8% median, SGLang H100 bf16 6.5% ->
#: 7.1%). Why SGLang's call differs is not settled (its launch parameters, from recall, are not
#: known here); at 128 units and more (batch x KV heads) the same shapes drop back to 10.5-12.5
#: us, another kernel choice (:data:`WIDE_GROUP_UNITS`)
UNIT_LATENCY_DECODE = frozenset({("sglang", "tcgen05")})

#: Those calls (``unit_latency`` 1) switch kernel from this many units (batch x KV heads) where
#: a KV head carries more than :data:`WIDE_GROUP_HEADS` query heads: the per-unit work is then
#: shared over the SMs as throughput (not a unit alone) and counts the query rows in tiles of
#: :data:`WIDE_GROUP_TILE_ROWS`, each the work of :data:`WIDE_GROUP_TILE_COST_ROWS` rows of
#: the other kernel. Read from SGLang's B200 rows (up to 127 cached keys, no window, bf16): at
#: 48-128 query heads a KV head the time is flat to 64 units and drops at 128 (head dim 128,
#: one KV head: 64 heads 16.6-18.7 us at 1-64 sequences, 10.5 at 128; two KV heads of 48 or 64
#: heads 15.6-18.6 at 1-32 sequences, 10.5 at 64, 128 units), and from 128 units on 48 and 64
#: heads take the time of 32 (2,048 units: 48.8-50.0 us against 51.9), 96 and 128 1.3-1.4x it
#: (68.6 / 73.1 us), where 8 and 16 take 29.9 / 35.1: two 64-row tiles at 96-128 heads, one at
#: 48-64, each costing 32 rows'. Which kernel FlashInfer picks there is not recalled; the
#: threshold and the tile are the tables' (docs/time-model.md, "SGLang's B200 decode of many
#: query heads a KV head switches kernel at 128 units")
WIDE_GROUP_UNITS = 128.0
WIDE_GROUP_HEADS = 32.0
WIDE_GROUP_TILE_ROWS = 64.0
WIDE_GROUP_TILE_COST_ROWS = 32.0


#: Head sizes FlashAttention-3 and -4 are built for (the encoders SGLang and vLLM run on H100
#: and B200): a head dim between them runs padded to the next (as recalled of FlashAttention-3's
#: ``round_up_headdim``, hopper/flash_api.cpp, not checked against a stored copy of its source).
#: The tables show it: at one shape the encoder rows at head dim 80 take as long as at 72 or less
#: (median ratio 0.95-0.99 over 880-1,000 shapes above 200 us, on both devices under both
#: engines), where the FLOPs of 80 are 11% more.
FLASH_HEAD_DIMS = (64.0, 96.0, 128.0, 192.0, 256.0)


def encoder_kernel_shape(engine: str, fig: DeviceFigures, head_dim: np.ndarray) -> dict:
    """Shape columns of an ``engine``'s encoder (non-causal, bf16) attention kernel on ``fig``
    where it differs from the 128 x 128 tiles at the head dim as it is: SGLang's and vLLM's
    FlashAttention kernels run the head dim padded (``head_dim_built``,
    :data:`FLASH_HEAD_DIMS`) in tiles of their own (``tile_rows`` x ``tile_keys``). On Hopper
    FlashAttention-3's non-causal tiles are 192 x 192 at head dim 64 and 192 x 144 at 96 (as
    recalled of its ``tile_size_fwd_sm90``, hopper/tile_size.h); on Blackwell a
    FlashAttention-4 CTA carries two 128-query tiles over 128-key blocks (256 x 128; recalled
    of flash_attn/cute's SM100 forward, ``q_stage`` 2). The tables show the tile quantization:
    vLLM's H100 rows at 192 and 576 tokens a sequence read 20-48% high and at 256 and 1,024
    18-11% low under 128 x 128 tiles (one 192-row tile against two 128-row ones; 6 against 8),
    B200's at 192, 256 and 512 tokens 13-21% high and at 576 and 1,296 0-3%. The encoder
    tables hold head dims 64, 72 and 80 only: Hopper's tiles past a built 96 and other
    generations' kernels are left at the 128 x 128 tiles and the head dim as it is, no table
    showing them. TensorRT-LLM's own FMHA: none (its builds cover every multiple of 8 it
    serves)."""
    hd = np.asarray(head_dim, dtype=np.float64)
    if engine not in ("sglang", "vllm"):
        return {}
    sizes = np.asarray(FLASH_HEAD_DIMS)
    built = np.where(hd <= sizes[-1], sizes[np.minimum(np.searchsorted(sizes, hd), 4)], hd)
    if fig.tcgen05:
        rows, keys = np.full(hd.shape, 256.0), np.full(hd.shape, 128.0)
    elif fig.kernel_generation == "sm90":
        rows = np.where(built <= 96.0, 192.0, 128.0)
        keys = np.select([built <= 64.0, built <= 96.0], [192.0, 144.0], 128.0)
    else:
        return {}
    return {"head_dim_built": built, "tile_rows": rows, "tile_keys": keys}


def engine_attention_kernel(batch: KernelBatch, engine: str, fig: DeviceFigures) -> KernelBatch:
    """``batch`` with the ``head_pack`` of its engine's dense attention kernel on ``fig`` where
    the batch names none (a model step's; a measured attention row carries its kernel's): a step
    is timed with the packing its class was fitted on (the mapping's rule,
    ``mlacalc.measured.mapping``). SGLang and vLLM pack every query head of a KV head into a
    decode unit on every device, and into a prompt tile on Hopper (FlashAttention-3); SGLang on
    Blackwell converts an fp8 kernel's query first (:data:`QUERY_CONVERT_KERNELS`); vLLM on
    Hopper multiplies an fp8 cache's prompt in bf16 (:data:`KV_UPCAST_PREFILL`)."""
    if batch.kind not in ("attention_decode", "attention_prefill") or "head_pack" in batch.shape:
        return batch
    batch = fp8_cache_prompt(batch, engine, fig)
    if batch.variant or "pooled_ratio" in batch.shape:
        # a kernel of its own (an encoder's, a sparse or indexer variant) or DeepSeek-V4's
        # compressed attention, which runs V4's own kernels, not the engine's dense backend
        # (its module rows: packing them the FlashAttention-3 way reads 2-4 points worse)
        return batch
    if batch.kind == "attention_decode":
        packs = engine in PACKING_DECODE
    else:
        packs = (engine, fig.kernel_generation) in PACKING_PREFILL
    cols: dict[str, np.ndarray] = {}
    if packs:
        cols["head_pack"] = np.zeros(len(batch))
    if (
        batch.kind == "attention_decode"
        and (engine, fig.kernel_generation) in ALWAYS_COMBINE_DECODE
    ):
        cols["combine_kernel"] = np.ones(len(batch))
    if batch.kind == "attention_decode" and (engine, fig.kernel_generation) in LOCAL_WINDOW_DECODE:
        # its FlashAttention-3 decode runs the local kernel past the window only
        a = attention_shape(batch)
        local = (a["window"] > 0) & (a["kv"] > a["window"])
        cols["local_window"] = local.astype(np.float64)
    if batch.kind == "attention_decode" and (engine, fig.kernel_generation) in UNIT_LATENCY_DECODE:
        # SGLang's TensorRT-LLM-gen decode takes a unit's own work at least once
        cols["unit_latency"] = np.ones(len(batch))
    if (
        batch.kind == "attention_decode"
        and (engine, fig.kernel_generation) in ROW_TILE_DECODE
        and not batch.variant
    ):
        # vLLM's TensorRT-LLM-gen decode counts its rows in SGLang's row tiles (_unit_cost)
        cols["row_tile"] = np.ones(len(batch))
    if (
        batch.kind == "attention_prefill"
        and (engine, fig.kernel_generation) in PAIRED_TILE_PREFILL
        and not (engine == "sglang" and batch.dtype.startswith("fp8"))
    ):
        # FlashInfer's TensorRT-LLM-gen prompt kernel: two query tiles a CTA
        cols["paired_tiles"] = np.full(len(batch), 2.0)
    if (
        batch.kind == "attention_prefill"
        and (engine, fig.kernel_generation) in OPERAND_ASYNC_PREFILL
        and not (engine in OPERAND_ASYNC_BF16_ONLY and batch.dtype.startswith("fp8"))
    ):
        # FlashAttention-3 / TensorRT-LLM-gen: operand reads under the products
        cols["operand_async"] = np.ones(len(batch))
    if (engine, fig.kernel_generation) in HD192_SIDE_CALL_ENGINES:
        # SGLang's FlashAttention-3 calls at head dim 192 take a fixed wait more
        cols["hd192_side_call"] = (col(batch, "head_dim_qk", 128) == 192.0).astype(np.float64)
    if (engine, fig.kernel_generation) in KV_UPCAST_PREFILL and batch.dtype.startswith("fp8"):
        # its FlashAttention-3 prompt and decode keep a bf16 query and upcast the fp8 cache
        # (the decode's stream from head dim 256: KV_UPCAST_STREAM_HEAD_DIM)
        cols["kv_upcast"] = np.ones(len(batch))
    if engine == "sglang" and fig.tcgen05 and batch.dtype.startswith("fp8"):
        # SGLang's TensorRT-LLM-gen backend converts the query to fp8 first
        cols["q_convert"] = np.full(len(batch), QUERY_CONVERT_KERNELS)
    elif (
        engine == "sglang"
        and fig.kernel_generation == "sm90"
        and batch.kind == "attention_decode"
        and batch.dtype.startswith("fp8")
    ):
        # its FlashAttention-3 decode casts the query to fp8 first
        cols["q_convert"] = np.full(len(batch), FA3_QUERY_CAST_KERNELS)
    if not cols:
        return batch
    return dataclasses.replace(batch, shape={**batch.shape, **cols})


#: (engine, tensor-core generation) whose dense prompt kernel issues its shared-memory operand
#: reads under its products (``operand_async``, :func:`prefill_terms`): SGLang's and vLLM's
#: FlashAttention-3 on Hopper and the TensorRT-LLM-gen kernel FlashInfer calls for them on
#: data-centre Blackwell (vLLM's over a bf16 cache alone: :data:`OPERAND_ASYNC_BF16_ONLY`;
#: docs/time-model.md, "Asynchronous operand reads")
OPERAND_ASYNC_PREFILL = frozenset(
    {("sglang", "sm90"), ("sglang", "tcgen05"), ("vllm", "sm90"), ("vllm", "tcgen05")}
)

#: Engines of :data:`OPERAND_ASYNC_PREFILL` whose prompts over an fp8 cache keep their operand
#: reads: vLLM, whose Hopper kernel converts the fp8 K/V to bf16 in shared memory before its
#: MMAs read them (:data:`KV_UPCAST_PREFILL`), and whose ``attention_prefill:fp8`` class, one
#: form on both devices, also times the DeepGEMM indexer of its DeepSeek-V3.2 / V4 prompt
#: modules (docs/time-model.md, "Asynchronous operand reads")
OPERAND_ASYNC_BF16_ONLY = frozenset({"vllm"})


#: (engine, tensor-core generation) whose prompt over an fp8 cache runs the fp8 prompt kernel,
#: its query converted to fp8 first: SGLang's TensorRT-LLM-gen backend on Blackwell (its
#: measured prompt rows with an fp8 cache, which the mapping times as fp8, unpaired)
FP8_CACHE_PROMPT = frozenset({("sglang", "tcgen05")})


def fp8_cache_prompt(batch: KernelBatch, engine: str, fig: DeviceFigures) -> KernelBatch:
    """A model step's prompt over an fp8 cache (``fp8_cache`` 1, every row) as an engine of
    :data:`FP8_CACHE_PROMPT` runs it: the fp8 class, so that a served step and a measured row
    of the same kernel take one path (the query conversion and no paired tiles follow from
    the dtype); elsewhere as it is (the activations' dtype)."""
    if batch.kind != "attention_prefill" or (engine, fig.kernel_generation) not in (
        FP8_CACHE_PROMPT
    ):
        return batch
    if batch.dtype.startswith("fp8") or not np.all(col(batch, "fp8_cache", 0) > 0):
        return batch
    return dataclasses.replace(batch, dtype="fp8")


def attention_shape(batch: KernelBatch) -> dict[str, np.ndarray]:
    """The shape columns every attention class reads."""
    kv = col(batch, "kv_len", 1)
    heads = col(batch, "n_heads", 1)
    n_kv = np.maximum(col(batch, "n_kv", 1), 1.0)
    window = col(batch, "window", 0)
    return {
        "b": col(batch, "batch", 1),
        "q": col(batch, "q_len", 1),
        "kv": kv,
        "heads": heads,
        "n_kv": n_kv,
        "window": window,
        "kv_eff": np.where(window > 0, np.minimum(kv, window), kv),
        "group": heads / n_kv,
    }


def attention_time(
    batch: KernelBatch,
    fig: DeviceFigures,
    prm: dict[str, float],
    *,
    units: np.ndarray,
    unit_blocks: np.ndarray,
    unit_cost: np.ndarray,
    masked: np.ndarray | float = 0.0,
    serial: np.ndarray | None = None,
    flops: np.ndarray | None = None,
    nbytes: np.ndarray | None = None,
    sfu: np.ndarray | None = None,
    latency: float | None = None,
    call: float | None = None,
    local: np.ndarray | float = 0.0,
    compute_units: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """Compute and memory terms of an attention kernel from its work units: ``units`` spread
    over the SMs in waves, each walking ``unit_blocks`` KV blocks (``masked`` of them on the
    masking path) and paying ``unit_cost`` times the per-unit work once. ``serial``: the units
    one SM works through in turn (default: its waves). ``local``: seconds of a local
    (sliding-window) kernel beside them (:data:`LOCAL_WINDOW_DECODE`). ``compute_units``: the
    CTAs the products spread over where they are not the units (:func:`_token_units`)."""
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
    occ = occupancy  # the SMs the products fill: the units', or the CTAs' that carry them
    if compute_units is not None and fig.kind != "cpu":
        # NaN: a row whose products spread as its units do
        spread = compute_units / (np.ceil(compute_units / sms) * sms)
        occ = np.where(np.isnan(compute_units), occupancy, spread)
    compute = flops / (prm["eff_compute"] * fig.peak(batch.dtype) * occ)
    if sfu is not None:
        # the softmax's exponentials on the special-function units, beside the tensor cores
        compute = combine(compute, sfu / occ, prm["sfu_overlap"])
    compute = compute + work + local
    memory = nbytes / (prm["eff_memory"] * fig.hbm_bytes_per_s * memory_share(units, fig, prm))
    # a fixed time per call that is a wait, seconds whatever the SM clock
    extra = np.full(len(batch), call if call is not None else 0.0)
    return {"compute_s": compute, "memory_s": memory, "extra_s": extra}


#: Prompt variants of vLLM's Triton unified attention (its B200 rows at head dim 192, kernel
#: source ``vllm_triton_attn``) and the keys of a tile's K/V blocks: 32, its query tile 16 rows
#: of (query position, query head) packed from one KV head's heads, or the next power of two of
#: the query heads a KV head carries where they are more (as recalled of vLLM's
#: ``triton_unified_attention.py``, BLOCK_M and TILE_SIZE_PREFILL, not checked against a stored
#: copy). A 128-key window's band then spans ``ceil((128 + queries a tile - 1) / 32)`` blocks
#: of 32 keys, 1.1-1.5 times the window's keys where 128 x 128 tiles compute twice them; the
#: rows showed the tiles: with 128 x 128 ones the fitted class read the windowed rows +24% to
#: +27% and the unwindowed -13% to -16% (signed medians from 512 tokens), and 8 query heads a
#: KV head +24% to +26% against -13% to -16% at 16
UNIFIED_TRITON_PROMPT_KEYS = {"vllm_triton_attn": 32.0}

#: Fewest query rows of a unified Triton prompt tile (:data:`UNIFIED_TRITON_PROMPT_KEYS`)
UNIFIED_TRITON_PROMPT_ROWS = 16.0

#: Prompt kernels that walk a sliding window's causal blocks rather than only the band's
#: (SGLang's Triton extend kernel, the ``triton`` variant).
WINDOW_WALK_VARIANTS = frozenset({"triton", "triton_upcast"})


def _token_units(batch: KernelBatch, b: np.ndarray, q: np.ndarray, heads: np.ndarray):
    """The CTAs whose products a DeepSeek-V4 prompt core of FlashMLA's sparse prefill as vLLM
    runs it (the ``sparse`` variant with the ``token_units`` column, which
    :func:`~mlacalc.cost.compressed.compressed_kernels` writes for an engine of
    :data:`~mlacalc.cost.compressed.TOKEN_UNIT_CORE`, vLLM, and so on vLLM's module tables
    whichever profile times them) spreads over the SMs: one a query token and 64 of its heads,
    the heads the tile's rows, each walking that token's keys on its SM; NaN on a row without
    the column and ``None`` where no row has it (its products spread as its units do: another
    engine's served V4 core, TensorRT-LLM's, keeps them; SGLang's is its ragged class).
    ``dsv4_hca_attn_module_perf`` shows it: one sequence after 524,288 cached tokens takes
    124.0 us at 4 new tokens and 129.6 at 128 on H100 (B200 81.6 and 85.5), two of 128 after
    262,144 twice one (142.0 against 73.9), where 64 units of a 128-query tile each would run
    8.5 TFLOP/s an SM, over H100's bf16 peak an SM. The per-unit waits keep the class's units
    (a sequence's 64 heads), which carry the per-sequence cost the rows show beside it (about
    1.3 us a sequence at 4-128 new tokens)."""
    if batch.variant not in TOKEN_UNIT_PROMPT_VARIANTS or "token_units" not in batch.shape:
        return None
    on = col(batch, "token_units", 0.0) > 0
    if not on.any():
        return None
    return np.where(on, b * q * np.ceil(heads / TOKEN_UNIT_HEADS), np.nan)


def _token_operand_reads_s(
    batch: KernelBatch,
    fig: DeviceFigures,
    operand: np.ndarray,
    tokens: np.ndarray | None,
    units: np.ndarray,
    kv_eff: np.ndarray,
    width: np.ndarray,
) -> np.ndarray:
    """A unit's operand reads (:func:`_operand_reads_s`) where the core's CTAs are its query
    tokens (:func:`_token_units`): each token's CTA reads its own keys' K/V operands once
    for its :data:`TOKEN_UNIT_HEADS` rows (in :data:`TOKEN_UNIT_KEY_BLOCK`-key blocks), in
    waves of token CTAs; returned per wave of the class's units, which the unit's waits are
    counted over. Unchanged where no row has token units."""
    if tokens is None:
        return operand
    on = ~np.isnan(tokens)
    sms = fig.sm_count
    keys = np.ceil(kv_eff / TOKEN_UNIT_KEY_BLOCK) * TOKEN_UNIT_KEY_BLOCK
    rows = np.full(len(batch), TOKEN_UNIT_HEADS)
    own = _operand_reads_s(batch, fig, rows, keys, rows, width, np.zeros(len(batch), bool))
    waves = np.ceil(np.where(on, tokens, 1.0) / sms) / np.maximum(np.ceil(units / sms), 1.0)
    return np.where(on, own * waves, operand)


def _split_token_ctas(
    batch: KernelBatch,
    fig: DeviceFigures,
    b: np.ndarray,
    q: np.ndarray,
    heads: np.ndarray,
    kv_eff: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """SGLang's ragged DeepSeek-V4 prompt core (shape field ``split_tokens``, which
    :func:`~mlacalc.cost.compressed.ragged_core_shape` writes): its CTAs each take one MMA's
    rows of (query token, head) pairs, a token's :data:`TOKEN_UNIT_HEADS` padded heads (two
    tokens on a 128-row ``tcgen05`` MMA, one on Hopper's 64), and where they are fewer than
    the SMs each CTA's keys run in ``min(SMs // CTAs, blocks)`` parts of
    :data:`TOKEN_UNIT_KEY_BLOCK`-key blocks, one a CTA. Returns the rows it holds, the CTAs
    (its products' occupancy), their rows and the keys each walks (its operand reads); the
    class's units (a 128-query tile of each padded head) keep the per-unit waits and the HBM
    share. ``dsv4_hca_context_module_perf`` (SGLang, one sequence, the row less its other
    kernels' predictions) shows it: after 1,000,000 cached tokens (7,940 keys a query) the core
    takes 33, 35, 51, 75, 123, 219, 404 us at 4, 8, 16, 32, 64, 128, 256 new tokens on B200,
    about 27 us and 1.46 us a token, the rate of the longest chunks (1.46-1.49 us a token
    from 256 to 10,240), where a 128-query tile of each of 64 heads walking every key gave
    103, 112, 130, 166, 238, 383, 388 us (H100 45, 54, 77, 123, 222, 413 us at 4-128 tokens
    against 105-714); after 65,536 (640 keys) 20-39 us at 4-128 tokens against 30-58. ``None``
    where no row has the field."""
    if batch.variant != RAGGED_CORE or "split_tokens" not in batch.shape:
        return None
    on = col(batch, "split_tokens", 0.0) > 0
    if not on.any():
        return None
    rows = np.full(len(batch), max(TOKEN_UNIT_HEADS, float(mma_rows(fig))))
    ctas = np.ceil(b * q * np.ceil(heads / TOKEN_UNIT_HEADS) * TOKEN_UNIT_HEADS / rows)
    blocks = np.maximum(np.ceil(kv_eff / TOKEN_UNIT_KEY_BLOCK), 1.0)
    parts = np.clip(np.floor(fig.sm_count / np.maximum(ctas, 1.0)), 1.0, blocks)
    keys = np.ceil(blocks / parts) * TOKEN_UNIT_KEY_BLOCK
    return on, ctas * parts, rows, keys


def _cta_reads_s(
    batch: KernelBatch,
    fig: DeviceFigures,
    operand: np.ndarray,
    units: np.ndarray,
    b: np.ndarray,
    q: np.ndarray,
    heads: np.ndarray,
    kv_eff: np.ndarray,
    width: np.ndarray,
) -> tuple[np.ndarray, np.ndarray | None]:
    """A unit's operand reads and the CTAs a prompt core's products spread over (``None``:
    its units) where its CTAs are its query tokens (:func:`_token_units`,
    :func:`_token_operand_reads_s`) or split their tokens' keys (:func:`_split_token_ctas`:
    each CTA's reads of its own keys for its rows, in waves of CTAs, per wave of the class's
    units); unchanged elsewhere."""
    tokens = _token_units(batch, b, q, heads)
    operand = _token_operand_reads_s(batch, fig, operand, tokens, units, kv_eff, width)
    split = _split_token_ctas(batch, fig, b, q, heads, kv_eff)
    if split is None:
        return operand, tokens
    on, ctas, rows, keys = split
    own = _operand_reads_s(batch, fig, rows, keys, rows, width, np.zeros(len(batch), bool))
    waves = np.ceil(ctas / fig.sm_count) / np.maximum(np.ceil(units / fig.sm_count), 1.0)
    return np.where(on, own * waves, operand), np.where(
        on, ctas, np.nan if tokens is None else tokens
    )


#: Keys a block of a token CTA's walk (:func:`_token_operand_reads_s`)
TOKEN_UNIT_KEY_BLOCK = 64.0

#: Prompt variants whose products run a CTA a query token (:func:`_token_units`)
TOKEN_UNIT_PROMPT_VARIANTS = frozenset({"sparse"})

#: Query heads a token's CTA of :data:`TOKEN_UNIT_PROMPT_VARIANTS` takes as its rows
TOKEN_UNIT_HEADS = 64.0


def prefill_terms(
    batch: KernelBatch, fig: DeviceFigures, prm: dict[str, float]
) -> dict[str, np.ndarray]:
    """``attention_prefill`` and ``mla_prefill``: tiled over queries and keys."""
    a = attention_shape(batch)
    b, q, kv, heads, window, kv_eff = a["b"], a["q"], a["kv"], a["heads"], a["window"], a["kv_eff"]
    # one unit per (sequence, head, 128-query tile), each over its keys in 128-key blocks
    # (a causal tile sees half the keys on average). A kernel that packs the query heads of a
    # KV head into a tile's rows (``head_pack`` 0: FlashAttention-3's ``pack_gqa``; 1, the
    # default: a tile a query head) has a unit per (sequence, KV head, 128 of its query
    # positions x query heads): a short prompt's tile is full where it had ``q`` rows
    # A kernel of other tiles names them (``tile_rows`` query rows x ``tile_keys`` keys:
    # FlashAttention-3's absorbed MLA, a 64-wide q/k head with 512-wide values, 64 x 64)
    pack = col(batch, "head_pack", 1)
    tile_q, tile_k = col(batch, "tile_rows", 128), col(batch, "tile_keys", 128)
    tile_q, tile_k = _wide_head_tiles(batch, fig, tile_q, tile_k)
    unified = batch.variant in UNIFIED_TRITON_PROMPT_KEYS
    if unified:
        # vLLM's unified Triton kernel: 16 rows of packed query heads (more where a KV head
        # carries more) over 32-key blocks (:data:`UNIFIED_TRITON_PROMPT_KEYS`)
        heads_pow2 = 2.0 ** np.ceil(np.log2(np.maximum(a["group"], 1.0)))
        tile_q = np.maximum(UNIFIED_TRITON_PROMPT_ROWS, heads_pow2) * np.ones(len(batch))
        tile_k = UNIFIED_TRITON_PROMPT_KEYS[batch.variant] * np.ones(len(batch))
    per_unit = np.where(pack <= 0, a["group"], np.clip(pack, 1.0, a["group"]))
    units = b * heads / per_unit * np.ceil(q * per_unit / tile_q)
    rows = np.minimum(q * per_unit, tile_q)
    unit_blocks = np.ceil(kv_eff / tile_k)
    units, unit_blocks = _split_keys(batch, fig, units, unit_blocks)
    unit_blocks = np.where(col(batch, "causal", 1) > 0, (unit_blocks + 1) / 2, unit_blocks)
    banded, band_blocks, padded, unit_blocks = _band_blocks(
        batch, unit_blocks, tile_q, tile_k, per_unit, unified
    )
    # the band's two edge blocks are masked (the window's lower edge and the diagonal cut
    # through them) and take the kernel's masking path, every block of a 128-key window;
    # the blocks between them are whole (a causal tile masks only its diagonal block, which
    # the per-unit work covers)
    masked = np.where(banded, np.minimum(band_blocks, 2.0), 0.0)
    # a kernel that walks a window's causal blocks (:data:`WINDOW_WALK_VARIANTS`) visits every
    # block up to the diagonal, computes the band's and skips the others, each block of a
    # windowed call testing the window's mask first (``mask_s`` a block walked, clocked)
    walked, tested = unit_blocks, np.zeros(len(batch))
    if batch.variant in WINDOW_WALK_VARIANTS:
        blocks = np.ceil(kv / tile_k)
        blocks = np.where(col(batch, "causal", 1) > 0, (blocks + 1) / 2, blocks)
        walked = np.where(banded, np.maximum(blocks, band_blocks), unit_blocks)
        tested = np.where(window > 0, walked, 0.0)
        masked = np.zeros(len(batch))
    if batch.dtype.startswith("fp8"):
        # an fp8 band's masked blocks wait on HBM: ``mask_s`` is their time at Hopper's HBM
        # bytes per SM and clock, less on a device that draws more (B200 0.50, H100 1).
        # TensorRT-LLM's fp8 rows of a 128-key window (head dim 64, 1,024-16,384 tokens, 16-96
        # heads, 1,722 shapes on both devices) take 0.86 ns a token and head on H100 and 0.38
        # on B200: 2.9 KB a token and head at either device's datasheet HBM, ratio 2.23
        # (deciles 2.11-2.34) against HBM's 2.30; 13x the band's exponentials and 26x its
        # products at the fp8 peak. mask_s in seconds had B200 from H100 +52% on those rows
        masked = masked / hbm_per_sm_ratio(fig)
    # one exponential per computed score (query, key pair), on the SFUs, not the tensor cores:
    # ``SFU_EXP_PER_CLOCK`` a clock per SM at ``eff_exp`` of that rate (1: the datasheet rate),
    # combined with the tensor time by the p-norm ``sfu_overlap`` (FlashAttention-3 overlaps
    # the two in part). With fp8 or head_dim 64 on H100 the exponentials take as long as the
    # products at full rate. A kernel with no value product (an indexer's ReLU logits) has no
    # softmax. Blackwell's kernels (``tcgen05``: FlashAttention-4, TensorRT-LLM-gen) compute
    # some of the exponentials on the FMA pipes, a polynomial exp2 beside the SFUs, so their
    # rate is above the SFUs' (``eff_exp`` over 1; fitted on B200's fp8 prompts: 1.52, 1.57 and
    # 1.58 under TensorRT-LLM, SGLang and vLLM); Hopper's and Ampere's kernels take every one
    # on the SFUs (at most their rate, whatever the fit that predicts them)
    d_qk, d_v = col(batch, "head_dim_qk", 128), col(batch, "head_dim_v", 128)
    # FlashAttention-3's causal tiles compute their walked blocks whole (:func:`fa3_causal_walk`)
    padded = padded * fa3_causal_walk(batch, fig, pack, banded)
    scores = np.where(d_v > 0, batch.flops * padded / (2.0 * (d_qk + d_v)), 0.0)
    eff_exp, rate = _kernel_rates(batch, fig, prm)
    side = side_work_rate(batch, fig)
    sfu = scores / (eff_exp * side * SFU_EXP_PER_CLOCK * fig.sm_count * fig.clock_hz)
    # the call's fixed time and each unit's fixed work are waits on memory and launches, not
    # cycles: seconds on every device (``call_latency_s``, ``unit_latency_s``; the clocked
    # ``fixed_s`` and ``seq_s`` stay at 0 for the prefill kinds). The MLA prefill rows have one
    # head shape, which cannot tell the exponentials from the products: ``mla_prefill`` keeps
    # the default ``sfu_overlap``
    # an fp8 kernel's V transposes and probability conversions (_fp8_side_work); one that
    # upcasts its fp8 K/V multiplies in bf16 (``kv_upcast``: :data:`KV_UPCAST_PREFILL`)
    fp8 = batch.dtype.startswith("fp8")
    upcast = fp8 & (not fig.tcgen05) & (col(batch, "kv_upcast", 0) > 0)
    transpose, convert = _fp8_side_work(batch, fig, unit_blocks, d_v, scores / side, upcast)
    flops = batch.flops * padded
    if batch.variant == "indexer":
        # DeepGEMM's prompt logits compute whole blocks of keys: the products of the keys a
        # query walks (``kv_len``: mlacalc.cost.compressed.walked_logit_keys), its own and the
        # masked rest of its last block (``batch.flops`` counts its own alone)
        flops = np.maximum(flops, 2.0 * b * q * heads * kv * d_qk)
    flops, d_qk, d_v, unit_scale = _built_head_dims(batch, flops, d_qk, d_v)
    if fp8:
        # the fp8 kernels are built for power-of-two head sizes: a head dim of 192 runs padded
        # to 256 (the bf16 kernel has a 192 of its own); FlashAttention-3's fp8 builds on
        # Hopper (the packing prompt kernel) have a 192 too (:data:`FA3_FP8_PROMPT_BUILDS`)
        pad_qk, pad_v = _fp8_prompt_head_dims(batch, fig, pack, d_qk, d_v)
        flops = flops * (pad_qk + pad_v) / np.maximum(d_qk + d_v, 1.0)
    flops = flops / rate  # a Blackwell kernel's products reaching less of their peak
    # an upcasting kernel's products at the bf16 peak (counted against the fp8 peak the class
    # divides by)
    flops = np.where(upcast, flops * fig.peak(batch.dtype) / fig.peak("bf16"), flops)
    if np.any(upcast):
        # slower from head dim 256 (:data:`KV_UPCAST_PROMPT_SLOW`)
        wide = upcast & (pad_qk >= KV_UPCAST_STREAM_HEAD_DIM)
        flops = np.where(wide, flops * KV_UPCAST_PROMPT_SLOW, flops)
    # the tensor-core operands the MMAs read from shared memory (:func:`_operand_reads_s`)
    keys = unit_blocks * np.minimum(kv_eff, tile_k)
    operand = _operand_reads_s(batch, fig, rows, keys, tile_q, d_qk + d_v, upcast)
    operand, tokens = _cta_reads_s(batch, fig, operand, units, b, q, heads, kv_eff, d_qk + d_v)
    pre_bytes = col(batch, "preprocess_bytes", 0)
    # a unit's wait is shared by the tiles resident on an SM together (``_resident_waves``)
    resident = _resident_waves(units, fig, d_qk, d_v, elem_bytes(batch.dtype))
    # Blackwell's prompt CTA carries two query tiles of a head (:func:`paired_tile_waves`)
    resident = resident * np.where(
        banded, 1.0, paired_tile_waves(batch, fig, units, q, per_unit, tile_q)
    )
    out = attention_time(
        batch,
        fig,
        prm,
        units=units,
        unit_blocks=_softmax_blocks(batch, walked),
        unit_cost=np.ones(len(batch)),
        masked=masked + tested,
        flops=flops,
        nbytes=batch.bytes - pre_bytes + _unfused_score_bytes(batch, scores),
        # (an unfused attention's exponentials are its softmax pass's, under its bytes)
        sfu=None if batch.variant in UNFUSED_PREFILL_VARIANTS else sfu,
        latency=prm["unit_latency_s"] * resident * unit_scale + transpose + operand,
        call=_prefill_call_s(batch, fig, prm, pack),
        compute_units=tokens,
    )
    occupancy = np.maximum(units / (np.ceil(units / fig.sm_count) * fig.sm_count), 1e-9)
    out["compute_s"] = out["compute_s"] + _causal_tail_s(
        batch, fig, prm, flops, sfu, units, occupancy, unit_blocks, banded, pack
    )
    # a lone tile's walk: its key blocks one after another, each a block step's latency
    # (:func:`lone_tile_chain_s`), the longest tile's chain the least the products can take
    out["compute_s"] = np.maximum(
        out["compute_s"], lone_tile_chain_s(batch, fig, kv_eff, tile_k, banded, band_blocks)
    )
    out["compute_s"] = out["compute_s"] + convert / occupancy
    # DeepGEMM's prompt logits past the first wave slow with the batch's keys
    # (:func:`logits_row_slowdown`)
    out["compute_s"] = out["compute_s"] * logits_row_slowdown(batch, fig, units)
    out["extra_s"] = out["extra_s"] + _prefill_side_kernels_s(
        batch, fig, prm, pre_bytes, d_qk, d_v, b, kv
    )
    return out


def _split_keys(
    batch: KernelBatch, fig: DeviceFigures, units: np.ndarray, blocks: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``units`` and the key ``blocks`` each walks where a kernel splits its keys over idle SMs
    (shape field ``split_keys``: :data:`~mlacalc.cost.compressed.SPLIT_KEY_LOGITS_ENGINES`):
    a call of fewer units than SMs runs each unit's blocks in ``min(SMs // units, blocks)``
    parts, one a unit; unchanged elsewhere."""
    on = col(batch, "split_keys", 0.0) > 0
    if not np.any(on):
        return units, blocks
    parts = np.where(
        on & (units < fig.sm_count),
        np.clip(np.floor(fig.sm_count / np.maximum(units, 1.0)), 1.0, np.maximum(blocks, 1.0)),
        1.0,
    )
    return units * parts, np.ceil(blocks / parts)


#: Bytes of one logit of DeepGEMM's prompt MQA logits kernel (``fp8_mqa_logits``): fp32, one
#: per (query, key of the batch) in a matrix as wide as all the batch's keys
#: (:func:`logits_row_slowdown`).
MQA_LOGIT_BYTES = 4.0


def logits_row_slowdown(batch: KernelBatch, fig: DeviceFigures, units: np.ndarray) -> np.ndarray:
    """The factor on the products of DeepGEMM's prompt MQA logits (``attention_prefill``,
    variant ``indexer``) whose call gives ``batch_keys``, the keys of all its sequences (the
    width of its fp32 logits matrix, a row a query): ``1 + (waves - 1) / waves x
    MQA_LOGIT_BYTES x batch_keys / L2 bytes``. Evidence, SGLang's ``glm5_mqa_logits_module_perf``
    (the rows of 16 new tokens a sequence and more, time over the prediction of a class fitted
    without it): on both devices the ratio follows the batch's keys, alike at every count of
    queries from 1,024 to 131,072 and every sequence count, and stays 1 where the tiles are one
    wave: H100 1.0 to 2^19 keys, 1.1, 1.2, 1.3, 1.6, 2.8, 4.4 at 2^20 to 2^25 (a logits row of
    4 MB to 128 MB against its 50 MB L2); B200 1.05, 1.2, 1.27, 1.4, 1.6, 2.3 at 2^20 to 2^25
    (126 MB); at 2^23-2^24 keys and four waves or more, B200 1.24-1.82, two waves 1.06-1.42,
    one wave 0.87 (as below 2^19). The scale is the L2's, no fitted constant: a row of logits
    the size of the L2 doubles the products' time. Which part of the kernel pays it (the
    strided fp32 stores of a tile's queries, a logits row apart, or the L2's hold on them)
    the tables cannot tell. ``batch_keys`` is given by the ``glm5_mqa_logits_module_perf``
    rows (``measured.mapping``) and, under an engine of
    :data:`~mlacalc.cost.compressed.RAGGED_LOGITS_ENGINES` (SGLang), by two prompt logits
    kernels: a DSA layer's (DeepSeek-V3.2, GLM-5: the DSA module rows' mapping,
    ``cost.model_step``'s step kernels and the plan's step, through
    ``words.kernels.dsa_logits_shape``) and DeepSeek-V4's CSA prompt indexer, its pooled keys
    (``cost.compressed.compressed_kernels``: the V4 module rows' mapping and the plan's
    step). No other kernel gives it."""
    keys = col(batch, "batch_keys", 0.0)
    if batch.variant != "indexer" or not np.any(keys > 0) or not fig.l2_bytes:
        return np.ones(len(batch))
    waves = np.maximum(np.ceil(units / fig.sm_count), 1.0)
    return 1.0 + (waves - 1.0) / waves * MQA_LOGIT_BYTES * keys / fig.l2_bytes


#: FlashAttention-3's prompt on Hopper runs a tile of one MMA warpgroup (64 query rows, where
#: its usual tile has two) when the call's packed query rows, the prompt's tokens times the
#: query heads a KV head carries, are at most :data:`FA3_ONE_WG_ROWS` and its head dim at most
#: :data:`FA3_ONE_WG_HEAD_DIM` (recalled of its ``use_one_mma_wg`` dispatch, not checked
#: against a stored copy; :func:`fa3_one_warpgroup`). The tables show the step at those two
#: limits on SGLang's and vLLM's H100 rows alike (docs/time-model.md, "FlashAttention-3's prompt
#: of at most 64 packed rows runs one warpgroup")
FA3_ONE_WG_ROWS = 64.0
FA3_ONE_WG_HEAD_DIM = 128.0


def fa3_one_warpgroup(batch: KernelBatch, fig: DeviceFigures, pack: np.ndarray) -> np.ndarray:
    """Rows of ``batch`` whose FlashAttention-3 prompt tile is one MMA warpgroup's: the packing
    prompt kernel of no variant on Hopper (``head_pack`` 0, ``kernel_generation`` ``sm90``) at a
    head dim of at most :data:`FA3_ONE_WG_HEAD_DIM` whose packed rows (tokens x query heads a
    KV head) are at most :data:`FA3_ONE_WG_ROWS`. Such a call waits ``one_wg_s`` less than the
    class's ``call_latency_s`` (:func:`prefill_terms`; 0 where a class has no fit of it)."""
    if batch.kind != "attention_prefill" or batch.variant:
        return np.zeros(len(batch), dtype=bool)
    if fig.kernel_generation != "sm90" or fig.tcgen05:
        return np.zeros(len(batch), dtype=bool)
    a = attention_shape(batch)
    hd = np.maximum(col(batch, "head_dim_qk", 128), col(batch, "head_dim_v", 128))
    rows = a["q"] * a["group"]
    return (np.asarray(pack) <= 0) & (hd <= FA3_ONE_WG_HEAD_DIM) & (rows <= FA3_ONE_WG_ROWS)


def _prefill_call_s(
    batch: KernelBatch, fig: DeviceFigures, prm: dict[str, float], pack: np.ndarray
) -> np.ndarray:
    """A prompt call's fixed wait (``call_latency_s``), ``one_wg_s`` less where its tiles are
    FlashAttention-3's of one MMA warpgroup (:func:`fa3_one_warpgroup`), never below 0."""
    save = np.where(fa3_one_warpgroup(batch, fig, pack), prm.get("one_wg_s", 0.0), 0.0)
    return np.maximum(prm["call_latency_s"] - save, 0.0)


#: FlashAttention-3's causal forward tiles on Hopper, (query rows, keys), by the head dim it is
#: built for (as recalled of ``tile_size_fwd_sm90``, hopper/tile_size.h,
#: causal, no window, TMA paged or unpaged K/V; not checked against a stored copy): bf16 192 x
#: 128 at 64, 128 x 128 at 128, 128 x 112 at 192, 128 x 80 at 256 (head dim, rows, keys). The
#: e4m3 build's (192 x 160, 128 x 224, 128 x 160, 128 x 128, as recalled) are not taken: SGLang's
#: fp8 rows read worse under them (docs/time-model.md)
FA3_CAUSAL_TILES = (
    (64.0, 192.0, 128.0),
    (128.0, 128.0, 128.0),
    (192.0, 128.0, 112.0),
    (256.0, 128.0, 80.0),
)


def _causal_walk_sum(q: np.ndarray, group: np.ndarray, rows: np.ndarray, keys: np.ndarray):
    """Key blocks a causal prompt's tiles walk, summed over one KV head's tiles, per query head:
    ``rows`` packed (query position, query head) rows over ``group`` query heads a KV head, each
    tile walking ``ceil(last position / keys)`` blocks. The sum of ``ceil(j a / b)`` over the
    tiles is taken in closed form: the linear part plus the mean rounding of a full period,
    ``(p - 1) / (2 p)`` for ``a / b`` reduced to ``p`` in its denominator (exact for a whole
    number of periods; the last tile walks every block)."""
    g = np.maximum(np.round(group), 1.0)
    per = rows / g  # query positions a tile
    tiles = np.ceil(q / per)
    a, b = rows.astype(np.int64), (g * keys).astype(np.int64)
    p = b / np.gcd(a, b)
    linear = (per / keys) * tiles * (tiles - 1.0) / 2.0
    rounding = (p - 1.0) / (2.0 * p) * (tiles - 1.0)
    return (linear + rounding + np.ceil(q / keys)) * rows * keys / g


def fa3_causal_walk(
    batch: KernelBatch, fig: DeviceFigures, pack: np.ndarray, banded: np.ndarray
) -> np.ndarray:
    """The products (and exponentials) of FlashAttention-3's causal prompt tiles over those of
    128 x 128 tiles a query head: a causal tile computes every key block it walks whole (the
    diagonal masked inside it), so its work is its tiles' walked blocks, not the causal half
    the FLOPs count. The classes are fitted on those FLOPs, so a 128 x 128 unpacked tile's walk
    is what their ``eff_compute`` already carries; this is the ratio of FlashAttention-3's walk
    (:data:`FA3_CAUSAL_TILES`, its query heads a KV head packed into a tile's rows) to that one.
    1 elsewhere: Hopper's packing prompt kernel (``head_pack`` 0, no variant, SGLang's and
    vLLM's) of a bf16 prompt alone, a causal prompt of its own keys (no window band, no cached
    prefix)."""
    one = np.ones(len(batch))
    if batch.kind != "attention_prefill" or batch.variant or fig.tcgen05:
        return one
    if fig.kernel_generation != "sm90" or batch.dtype.startswith("fp8"):
        return one
    a = attention_shape(batch)
    q, kv = a["q"], a["kv_eff"]
    own = (pack <= 0) & (col(batch, "causal", 1) > 0) & ~banded & (kv <= q) & (q > 0)
    own &= col(batch, "head_dim_v", 128) > 0  # (a score kernel of no values is not its forward)
    if not np.any(own):
        return one
    hd = np.maximum(col(batch, "head_dim_qk", 128), col(batch, "head_dim_v", 128))
    rows, keys = np.full(len(batch), 128.0), np.full(len(batch), 128.0)
    for built, r, k in reversed(FA3_CAUSAL_TILES):
        rows = np.where(hd <= built, r, rows)
        keys = np.where(hd <= built, k, keys)
    wider = hd > FA3_CAUSAL_TILES[-1][0]  # no build: the 128 x 128 tiles
    rows, keys = np.where(wider, 128.0, rows), np.where(wider, 128.0, keys)
    qq = np.where(own, q, 1.0)
    ratio = _causal_walk_sum(qq, a["group"], rows, keys) / _causal_walk_sum(
        qq, np.ones(len(batch)), np.full(len(batch), 128.0), np.full(len(batch), 128.0)
    )
    return np.where(own, ratio, 1.0)


def _softmax_blocks(batch: KernelBatch, walked: np.ndarray) -> np.ndarray:
    """Key blocks a unit pays the class's block walk (``block_s``) for: every block it walks,
    none for a score kernel of no value product borrowing the dense prompt class (MiniMax-M3's
    block indexer, ``head_dim_v`` 0, no variant): no online softmax's rescale nor P.V stage."""
    if batch.variant:
        return walked
    return np.where(col(batch, "head_dim_v", 128) > 0, walked, 0.0)


def _operand_reads_s(
    batch: KernelBatch,
    fig: DeviceFigures,
    rows: np.ndarray,
    keys: np.ndarray,
    tile_q: np.ndarray,
    width: np.ndarray,
    upcast: np.ndarray,
) -> np.ndarray:
    """Seconds a prompt tile's MMAs take reading their K/V operands from shared memory beside
    their products (of :func:`prefill_terms`): every K and V block a tile walks (``keys``, of
    ``width`` = q/k + v head dims), once per group of query rows one MMA instruction covers
    (``mma_rows``: a Hopper warp-group MMA takes 64 rows, an Ampere/Ada mma.sync warp 16), at
    the SM's shared-memory bandwidth; a 128-query tile reads each block 2 times on Hopper, 8
    on Ampere: as long as the A100 tile's MMAs at full rate, half the H100 tile's (the rows of
    a short prompt's tile and the keys of its blocks, not whole 128 x 128 tiles)."""
    reads = np.ceil(rows / mma_rows(fig))
    elem = np.where(upcast, 2.0, elem_bytes(batch.dtype))
    operand = keys * reads * width * elem / (SMEM_BYTES_PER_CLOCK * fig.clock_hz)
    # a kernel that issues them under its products pays none beside them (``operand_under``:
    # :data:`~mlacalc.timemodel.mla_time.OPERANDS_UNDER_PRODUCTS`)
    operand = np.where(col(batch, "operand_under", 0) > 0, 0.0, operand)
    if not batch.variant:
        # FlashAttention-3's and TensorRT-LLM-gen's asynchronous MMAs read their operands under
        # the products (``operand_async``: :data:`OPERAND_ASYNC_PREFILL`) where the tile's rows
        # fill the MMA; a tile cut below them (Blackwell's bf16 at head dim 512, 64 rows) keeps
        # the reads
        full = np.asarray(tile_q) >= mma_rows(fig)
        operand = np.where((col(batch, "operand_async", 0) > 0) & full, 0.0, operand)
    return operand


#: (engine, tensor-core generation) whose prompt kernel's CTA carries two 128-query tiles of a
#: head (``paired_tiles`` 2, :func:`paired_tile_waves`): the TensorRT-LLM-gen prompt kernel
#: FlashInfer calls for SGLang (``trtllm_mha``) and vLLM on data-centre Blackwell. TensorRT-LLM's
#: own B200 prompt rows do not show it (a tile a CTA)
PAIRED_TILE_PREFILL = frozenset({("sglang", "tcgen05"), ("vllm", "tcgen05")})


def paired_tile_waves(
    batch: KernelBatch,
    fig: DeviceFigures,
    units: np.ndarray,
    q: np.ndarray,
    per_unit: np.ndarray,
    tile_q: np.ndarray,
) -> np.ndarray:
    """Waves of a prompt's CTAs over the waves of its query tiles, where a CTA carries
    ``paired_tiles`` consecutive query tiles of one head (:data:`PAIRED_TILE_PREFILL`;
    data-centre Blackwell's ``attention_prefill`` of no variant): the fixed work a unit pays
    (``unit_latency_s``: its Q tiles and first K/V blocks loaded, its output stored) is a CTA's,
    once for both tiles. A prompt of one tile a head pays it as before; 256 tokens pay what 128
    do. 1 elsewhere (a tile a CTA)."""
    paired = col(batch, "paired_tiles", 1)
    if not fig.tcgen05 or batch.kind != "attention_prefill" or batch.variant:
        return np.ones(len(batch))
    tiles = np.ceil(q * per_unit / tile_q)
    ctas = units / np.maximum(tiles, 1.0) * np.ceil(tiles / np.maximum(paired, 1.0))
    sms = float(fig.sm_count)
    return np.ceil(ctas / sms) / np.maximum(np.ceil(units / sms), 1.0)


#: Seconds one 128-key block of a prompt tile takes on Blackwell's TensorRT-LLM-gen attention
#: kernel when the tile walks alone (its QK product, softmax and PV product waiting on each
#: other, with no other tile on its SM to interleave), by the kernel class and dtype: read from
#: the tables, not fitted (:func:`lone_tile_chain_s`). Every engine's B200 rows of one sequence,
#: one head and 4,096-16,384 tokens (TensorRT-LLM, SGLang and vLLM run the same kernel there)
#: take, the row less its other terms over the last tile's blocks: 1.47-1.54 us bf16 at head dim
#: 64, 1.49-1.59 at 128; fp8 1.30-1.35 and 1.33-1.49 (the lower taken); the MLA prompt
#: (192 / 128) 1.62-1.68 bf16, 1.41-1.55 fp8; within 3% across the engines, and near the same
#: at head dims 64 and 128, where the products at the SM's rate differ twice (0.77 / 0.86 us bf16
#: at 4,096): a latency, not the SM's throughput. Head dim 256 (1.0-1.2 us, a kernel the class
#: already times longer) and 512 keep their products.
LONE_TILE_BLOCK_S = {
    ("attention_prefill", "bf16"): 1.50e-6,
    ("attention_prefill", "fp8"): 1.30e-6,
    ("mla_prefill", "bf16"): 1.64e-6,
    ("mla_prefill", "fp8"): 1.46e-6,
}
#: The most key blocks a lone tile's walk is counted for (:func:`lone_tile_chain_s`), by the
#: kernel class: the B200 tables' longest prompt, 16,384 tokens (128 blocks of 128 keys) in the
#: context attention tables, 32,768 (256) in the MLA prompt and module tables. No table
#: measures a longer walk; a longer prompt's walk is counted as that one's.
LONE_TILE_MAX_BLOCKS = {"attention_prefill": 128.0, "mla_prefill": 256.0}


def lone_tile_chain_s(
    batch: KernelBatch,
    fig: DeviceFigures,
    kv_eff: np.ndarray,
    tile_k: np.ndarray,
    banded: np.ndarray,
    band_blocks: np.ndarray,
) -> np.ndarray:
    """The longest tile's serial walk over its key blocks, seconds: ``ceil(keys / tile_keys)``
    blocks (a band's ``band_blocks``; at most the tables' longest, :data:`LONE_TILE_MAX_BLOCKS`)
    at :data:`LONE_TILE_BLOCK_S` each, on data-centre Blackwell's TensorRT-LLM-gen prompt kernel
    (no variant, operands not under the products, a value product) over a prompt of its own
    keys; 0 elsewhere. A chunk after a cached prefix (more keys than queries), which no table
    measures, takes no walk: a few queries over many keys is the kernel's split-keys case, its
    key blocks spread over the SMs, not one tile walking them all."""
    key = (batch.kind, "fp8" if batch.dtype.startswith("fp8") else batch.dtype)
    step = LONE_TILE_BLOCK_S.get(key, 0.0)
    if not fig.tcgen05 or batch.variant or step <= 0.0:
        return np.zeros(len(batch))
    blocks = np.where(banded, band_blocks, np.ceil(kv_eff / tile_k))
    blocks = np.minimum(blocks, LONE_TILE_MAX_BLOCKS[batch.kind])
    # (a kernel without a value product, an indexer's logits, has no softmax between products)
    other = (col(batch, "operand_under", 0) > 0) | (col(batch, "head_dim_v", 128) <= 0)
    prefix = col(batch, "kv_len", 1) > col(batch, "q_len", 1)  # a chunk after cached keys
    return np.where(other | prefix, 0.0, blocks * step)


def _band_blocks(
    batch: KernelBatch,
    unit_blocks: np.ndarray,
    tile_q: np.ndarray,
    tile_k: np.ndarray,
    per_unit: np.ndarray,
    unified: bool,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A prompt's sliding-window band (:func:`prefill_terms`): which rows are banded, the band's
    blocks a tile past the window, the FLOPs' padding to whole blocks and the mean blocks a
    tile computes (``unit_blocks`` where no band)."""
    a = attention_shape(batch)
    kv, window = a["kv"], a["window"]
    # a sliding window shorter than the keys is a band: a 128-query tile meets the
    # ceil((window + 127) / 128) key blocks the band crosses and computes them whole (the
    # band's edges masked inside), not the ``window`` keys per query the FLOPs count
    banded = (window > 0) & (kv > window)
    band_blocks = np.ceil((window + 127.0) / 128.0)
    queries, band_keys = np.full(len(batch), 128.0), np.full(len(batch), 128.0)
    if unified:
        # its tile's queries (rows over the packed heads) and the band's 32-key blocks
        queries = np.maximum(tile_q / np.maximum(per_unit, 1.0), 1.0)
        band_blocks = np.ceil((window + queries - 1.0) / tile_k)
        band_keys = tile_k * np.ones(len(batch))
    # a causal band's first tiles are a causal triangle's: the tile of queries up to ``p``
    # meets ``min(ceil(p / keys), band_blocks)`` blocks (:func:`band_tile_blocks`), the band's
    # whole width only past the window
    band_mean = band_blocks * np.ones(len(batch))
    if np.any(banded):
        ramp = np.where(col(batch, "causal", 1) > 0, 1.0, 0.0)
        band_mean[banded] = band_tile_blocks(
            a["q"][banded],
            kv[banded],
            band_mean[banded],
            queries[banded],
            band_keys[banded],
            ramp[banded],
        )
    padded = np.where(
        banded, band_mean * band_keys / _window_keys_per_query(a["q"], kv, window), 1.0
    )
    unit_blocks = np.where(banded, band_mean, unit_blocks)
    return banded, band_blocks, padded, unit_blocks


def band_tile_blocks(
    q: np.ndarray,
    kv: np.ndarray,
    band_blocks: np.ndarray,
    queries: np.ndarray,
    keys: np.ndarray,
    causal: np.ndarray,
) -> np.ndarray:
    """The mean key blocks a tile of a banded (sliding-window) prompt computes: each tile of
    ``queries`` query positions meets the blocks of ``keys`` keys from its window's lower edge
    to its last query, ``band_blocks`` past the window; a causal prompt's first tiles, whose
    queries sit within a window of the sequence's start, meet only the ``ceil(p / keys)``
    blocks up to their last query ``p`` (after the ``kv - q`` cached keys). A tile of 128
    queries of a 10,240-token prompt under an 8,192-key window meets 39 blocks on average, not
    the band's 65. Non-causal rows (``causal`` 0) take the band's width."""
    q, kv = np.asarray(q, dtype=np.float64), np.asarray(kv, dtype=np.float64)
    shape = np.broadcast(q, kv, band_blocks, queries, keys, causal).shape
    args = [
        np.broadcast_to(np.asarray(x, dtype=np.float64), shape).ravel()
        for x in (q, kv, band_blocks, queries, keys, causal)
    ]
    key = np.stack(args, axis=1)
    uniq, inverse = np.unique(key, axis=0, return_inverse=True)
    means = np.empty(len(uniq))
    for j, (qq, kk, bb, qt, kt, cz) in enumerate(uniq):
        tiles = max(int(np.ceil(qq / max(qt, 1.0))), 1)
        if cz <= 0:
            means[j] = bb
            continue
        last = np.minimum(np.arange(1, tiles + 1) * qt, qq) + max(kk - qq, 0.0)
        means[j] = float(np.mean(np.minimum(np.ceil(last / max(kt, 1.0)), bb)))
    return means[np.ravel(inverse)].reshape(shape)


def _window_keys_per_query(q: np.ndarray, kv: np.ndarray, window: np.ndarray) -> np.ndarray:
    """Keys a query of a windowed causal prompt attends on average (the FLOPs' count: query
    ``i`` of the sequence, after ``kv - q`` cached keys, attends ``min(kv - q + i, window)``)."""
    q = np.maximum(np.asarray(q, dtype=np.float64), 1.0)
    w = np.maximum(np.asarray(window, dtype=np.float64), 1.0)
    first = np.maximum(np.asarray(kv, dtype=np.float64) - q, 0.0)  # the first query's keys - 1
    # queries whose keys grow (first + i < w) and those capped at the window
    growing = np.clip(w - first, 0.0, q)
    grown = growing * first + growing * (growing + 1.0) / 2.0
    return (grown + (q - growing) * w) / q


def _wide_head_tiles(
    batch: KernelBatch, fig: DeviceFigures, tile_q: np.ndarray, tile_k: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The query rows of Blackwell's prompt kernel's tile (TensorRT-LLM-gen's: data-centre
    Blackwell's ``attention_prefill`` of no variant, no tile named by the mapping): halved, down to
    :data:`WIDE_HEAD_TILE_ROWS`, while the tile's queries and one K and one V block of its
    keys, at the dtype's element bytes, exceed the SM's shared memory. Only bf16 at head dim
    512 is cut (128 x 512 x 2 bytes of queries and 2 x 128 x 512 x 2 of K and V: 384 KB of
    B200's 228): fp8 at 512 and bf16 at 256 hold 192 KB. SGLang's Triton prompt kernel on
    Hopper (:data:`WINDOW_WALK_VARIANTS`, ``kernel_generation`` ``sm90``: the evidence is H100's
    rows) cuts its query tile to :data:`WIDE_HEAD_TILE_ROWS` rows past
    :data:`TRITON_WIDE_HEAD_DIM` of head dim, either dtype. Elsewhere (Hopper's other kernels,
    the other variants: FlashInfer's own kernel, FlashMLA's sparse cores; the Triton kernel on
    A100, AMD and compute capability 12 parts, unmeasured) the tile as given."""
    if batch.kind != "attention_prefill":
        return tile_q, tile_k
    if batch.variant in WINDOW_WALK_VARIANTS and fig.kernel_generation == "sm90":
        d = col(batch, "head_dim_qk", 128)
        rows = np.asarray(tile_q, dtype=float) * np.ones(len(batch))
        return np.where(
            d > TRITON_WIDE_HEAD_DIM, np.minimum(rows, WIDE_HEAD_TILE_ROWS), rows
        ), tile_k
    if not fig.tcgen05 or batch.variant:
        return tile_q, tile_k
    if "tile_rows" in batch.shape:
        return tile_q, tile_k
    d_qk, d_v = col(batch, "head_dim_qk", 128), col(batch, "head_dim_v", 128)
    elem, smem = elem_bytes(batch.dtype), smem_per_sm(fig)
    rows = np.asarray(tile_q, dtype=float) * np.ones(len(batch))
    for _ in range(2):
        over = (rows * d_qk + tile_k * (d_qk + d_v)) * elem > smem
        rows = np.where(over, np.maximum(rows / 2.0, WIDE_HEAD_TILE_ROWS), rows)
    return rows, tile_k


def _prefill_side_kernels_s(
    batch: KernelBatch,
    fig: DeviceFigures,
    prm: dict[str, float],
    pre_bytes: np.ndarray,
    d_qk: np.ndarray,
    d_v: np.ndarray,
    b: np.ndarray,
    kv: np.ndarray,
) -> np.ndarray:
    """The kernels a prompt's measured row times beside its attention kernel, in seconds:
    the RoPE + cache-write pre-kernel, the query's fp8 conversion, head dim 192's side call and
    an fp8 cache's conversion to bf16 (of :func:`prefill_terms`), and FlashAttention-3's wait
    by its head dim (:func:`fa3_hd_wait_s`)."""
    # the RoPE + cache-write pre-kernel the measured rows time before the attention kernel
    # (TensorRT-LLM's QKV preprocessing): a kernel of its own, its launch and wait
    # (``pre_latency_s``, seconds as the call's) and one streaming pass over its bytes
    # (``preprocess_bytes``: the fused QKV read, Q written, the new K/V rows appended; MLA's
    # fp8 quantization of q, k and v) after the attention kernel's own time. ``rope_kernel``
    # 0: the caller times RoPE and the append as a kernel of its own, as a model step does (the
    # measured rows include it, the default); a kernel without a value product (an indexer's
    # logits) has none
    pre = (col(batch, "rope_kernel", 1) > 0) & (d_v > 0)
    stream = _pre_kernel_s(batch, fig, prm, pre_bytes)
    extra = np.where(pre, prm["pre_latency_s"] + stream, 0.0)
    # the query's conversion to fp8 before the kernel (SGLang's TensorRT-LLM-gen path), each
    # kernel's launch and wait a further kernel's (:data:`TRTLLM_FURTHER_KERNEL_S`)
    extra = extra + query_convert_s(batch, fig, prm) + hd192_side_call_s(batch)
    # an fp8 cache the kernel cannot read (``cache_convert`` 1: SGLang's FlashAttention-3
    # absorbed MLA on Hopper, which takes ``get_key_buffer(...).to(bf16)``) converted by a
    # kernel of its own first: a call's launch and wait (``call_latency_s``, as the attention's
    # own, as in decode: :func:`~mlacalc.timemodel.mla_time.mla_decode_terms`) and the call's
    # cached latent rows read in fp8 and written in bf16, streamed; the attention then reads
    # bf16. SGLang's H100 rows: 5-7 us more than bf16 at up to 64 tokens
    convert = col(batch, "cache_convert", 0) > 0
    cached = b * kv * d_qk * (col(batch, "kv_bytes", 2) + 2.0)
    conv_s = prm["call_latency_s"] + cached / (prm["eff_memory"] * fig.hbm_bytes_per_s)
    # FlashAttention-3's prompt call waits by its head dim as its decode call does
    # (:func:`fa3_hd_wait_s`)
    extra = extra + fa3_hd_wait_s(batch, fig, prm, col(batch, "head_pack", 1))
    return extra + np.where(convert, conv_s, 0.0)


def _fp8_side_work(
    batch: KernelBatch,
    fig: DeviceFigures,
    unit_blocks: np.ndarray,
    d_v: np.ndarray,
    scores: np.ndarray,
    upcast: np.ndarray,
) -> tuple[np.ndarray | float, np.ndarray | float]:
    """An fp8 prompt kernel's side work beside its products, seconds: the V transpose (a
    unit's serial work) and the probability conversion (``scores``: at the side work's rate).
    An fp8 kernel transposes each 128-key V block in shared memory before its MMA (the fp8
    tensor-core MMA takes its B operand K-major only; FlashAttention-3, section 3.3): the
    block's bytes read and written once through the SM's shared memory (a quarter of an fp8
    block's MMA time at full rate whatever the head dim); Blackwell's MMA reads an MN-major fp8
    operand as it is. It converts each score's probability to fp8 and permutes it into the
    fp8 MMA's register layout before the value product (the same section): one instruction
    per two scores at the conversion rate, on the path between the softmax and the product,
    not hidden behind the MMAs. A kernel that upcasts its fp8 K/V (``upcast``) does neither."""
    if not batch.dtype.startswith("fp8"):
        return 0.0, 0.0
    transpose = 0.0
    if not fig.tcgen05:
        transpose = unit_blocks * 2.0 * 128.0 * d_v / (SMEM_BYTES_PER_CLOCK * fig.clock_hz)
    convert = scores * 0.5 / (CONVERT_PER_CLOCK * fig.sm_count * fig.clock_hz)
    return np.where(upcast, 0.0, transpose), np.where(upcast, 0.0, convert)


def _causal_tail_s(
    batch: KernelBatch,
    fig: DeviceFigures,
    prm: dict[str, float],
    flops: np.ndarray,
    sfu: np.ndarray,
    units: np.ndarray,
    occupancy: np.ndarray,
    unit_blocks: np.ndarray,
    banded: np.ndarray,
    pack: np.ndarray,
) -> np.ndarray:
    """Seconds a causal prompt's longest tile adds to the time of its tiles spread over the SMs
    in whole waves (the class's products and exponentials at ``occupancy``). A causal tile walks
    the keys up to its last query: the last tile of a sequence all ``ceil(kv / tile_keys)``
    blocks, near twice the mean the FLOPs count. The SMs take the tiles in launch order, each
    the next as it finishes one, so the last to start can be a longest one: the kernel ends
    about one longest tile after the SMs' balanced time (the list-scheduling bound),
    ``balanced + longest`` in place of ``ceil(waves) x mean tile``. FlashAttention-3 on Hopper
    (the packing kernel, ``head_pack`` 0) launches the longest tiles first (as recalled of its
    causal tile scheduler, hopper/tile_scheduler.hpp, not checked against a stored copy): its
    tail is a longest tile only where that takes longer than its waves. Non-causal and banded
    tiles (all the same length) and the variants' kernels keep the waves."""
    if batch.kind != "attention_prefill" or batch.variant or fig.kind == "cpu":
        return np.zeros(len(batch))
    causal = (col(batch, "causal", 1) > 0) & ~banded
    # the products and exponentials at occupancy 1: the SMs' balanced time
    thr = combine(flops / (prm["eff_compute"] * fig.peak(batch.dtype)), sfu, prm["sfu_overlap"])
    waves = thr / occupancy  # as attention_time counts them
    a = attention_shape(batch)
    tile_k = col(batch, "tile_keys", 128)
    blocks = np.ceil(a["kv_eff"] / tile_k)
    # a tile's mean blocks: a prompt's own (as ``unit_blocks``) after the cached prefix, which
    # every tile walks whole (a chunk of a long prompt: its tiles near one length)
    prefix = np.maximum(a["kv_eff"] - a["q"], 0.0)
    mean = prefix / tile_k + (np.ceil(np.minimum(a["q"], a["kv_eff"]) / tile_k) + 1.0) / 2.0
    mean = np.where(prefix > 0, mean, unit_blocks)
    longest = thr * fig.sm_count / np.maximum(units, 1.0) * blocks / np.maximum(mean, 1e-9)
    first = (pack <= 0) & fig.sm90_or_later & (not fig.tcgen05)
    tail = np.where(first, np.maximum(waves, longest), thr + longest)
    if np.any(first):
        # FlashAttention-3 splits the keys of a call of few tiles (:func:`fa3_prompt_splits`):
        # its longest tile's blocks over the splits, the split tiles over the SMs, a combine
        # kernel after
        splits = np.where(first & causal, fa3_prompt_splits(batch, fig), 1.0)
        parts = units * splits
        occ = parts / (np.ceil(parts / fig.sm_count) * fig.sm_count)
        split_tail = np.maximum(thr / occ, longest / splits)
        split_tail = split_tail + ALWAYS_COMBINE_S * REFERENCE_CLOCK_HZ / fig.clock_hz
        tail = np.where(splits > 1, split_tail, tail)
    return np.where(causal, tail - waves, 0.0)


#: FlashAttention-3's key-split heuristic on Hopper (as recalled of ``num_splits_heuristic``,
#: hopper/heuristics.h, and the varlen scheduler's dynamic split, flash_prepare_scheduler.cu; not
#: checked against a stored copy): no split where the tiles of one sequence fill
#: ``FA3_SPLIT_FILL`` of the SMs or a tile walks at most 4 key blocks; else the fewest splits
#: (up to ``FA3_MAX_SPLITS`` and the key blocks) whose wave efficiency is within
#: ``FA3_SPLIT_EFFICIENCY`` of the best; the varlen call then takes
#: ``ceil(key blocks / ceil(FA3_SPLIT_SLACK x all tiles' blocks / SMs))`` of them at most
FA3_SPLIT_FILL = 0.8
FA3_SPLIT_EFFICIENCY = 0.85
FA3_SPLIT_SLACK = 1.1
FA3_MAX_SPLITS = 128


def fa3_prompt_splits(batch: KernelBatch, fig: DeviceFigures) -> np.ndarray:
    """Key splits FlashAttention-3's prompt kernel takes per row (:data:`FA3_SPLIT_FILL`): its
    query tiles pack a KV head's query heads (128 rows of query position x head), the static
    count from one sequence's tiles, the varlen call's from every sequence's blocks."""
    a = attention_shape(batch)
    sms = float(fig.sm_count)
    packed = np.ceil(a["q"] * a["group"] / 128.0)
    tiles = a["n_kv"] * packed  # one sequence's (the static bound's batch of one)
    blocks = np.ceil(a["kv_eff"] / 128.0)
    top = np.minimum(np.minimum(FA3_MAX_SPLITS, sms), blocks)
    s = np.arange(1.0, FA3_MAX_SPLITS + 1.0)[:, None]  # every count at once: a row each
    w = tiles * s / sms
    eff = np.where(s <= top, w / np.ceil(np.maximum(w, 1e-9)), 0.0)
    best = eff.max(axis=0)
    first_ok = np.argmax(eff >= FA3_SPLIT_EFFICIENCY * best, axis=0) + 1.0
    static = np.where((tiles >= FA3_SPLIT_FILL * sms) | (blocks <= 4), 1.0, first_ok)
    per_sm = np.ceil(FA3_SPLIT_SLACK * a["b"] * packed * blocks * a["n_kv"] / sms)
    return np.clip(np.ceil(blocks / np.maximum(per_sm, 1.0)), 1.0, static)


#: Head sizes FlashAttention-3's fp8 prompt kernel is built for on Hopper (SGLang's and vLLM's,
#: the packing prompt kernel, ``head_pack`` 0): 192 among them, where TensorRT-LLM's fp8 prompt
#: kernel runs 192 padded to 256 (as recalled of FlashAttention-3's ``hdim192_e4m3``
#: instantiations, hopper/instantiations/, not checked against a stored copy). Read from the
#: tables: at 8,192 tokens and more, no window, over 2 ms, the fp8 rows at head dim 192 reach
#: 997 / 548 TFLOP/s on the head dim as it is (SGLang / vLLM, H100 medians), at 256 912 / 429:
#: counted padded to 256, 192 would reach 1,329 / 731, 1.5-1.7x the rate of the 256 build;
#: TensorRT-LLM's 631 at 192 is 841 padded, its 256 build's 813.
FA3_FP8_PROMPT_BUILDS = (64.0, 96.0, 128.0, 192.0, 256.0)


def _fp8_prompt_head_dims(
    batch: KernelBatch, fig: DeviceFigures, pack: np.ndarray, d_qk: np.ndarray, d_v: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The head dims an fp8 prompt kernel runs (q/k, v): the next power of two, but the next of
    :data:`FA3_FP8_PROMPT_BUILDS` for FlashAttention-3 on Hopper (``head_pack`` 0, no
    variant, not ``tcgen05``); a v head dim of 0 stays 0."""
    pow2_qk = 2.0 ** np.ceil(np.log2(np.maximum(d_qk, 1.0)))
    pow2_v = np.where(d_v > 0, 2.0 ** np.ceil(np.log2(np.maximum(d_v, 1.0))), 0.0)
    fa3 = (pack <= 0) & (not batch.variant) & fig.sm90_or_later & (not fig.tcgen05)
    if not np.any(fa3):
        return pow2_qk, pow2_v
    sizes = np.asarray(FA3_FP8_PROMPT_BUILDS)

    def built(d: np.ndarray) -> np.ndarray:
        return np.where(d <= sizes[-1], sizes[np.minimum(np.searchsorted(sizes, d), 4)], d)

    pad_qk = np.where(fa3, built(d_qk), pow2_qk)
    pad_v = np.where(fa3 & (d_v > 0), built(d_v), pow2_v)
    return pad_qk, pad_v


def _pre_kernel_s(
    batch: KernelBatch, fig: DeviceFigures, prm: dict[str, float], pre_bytes: np.ndarray | float
) -> np.ndarray:
    """Seconds of the pre-kernel's work beside its launch: its bytes streamed, vLLM's fp8
    cache write at SM clocks (``cache_quant_elements``, :data:`FP8_CACHE_WRITE_CLOCKS`), its
    bf16 cache write at its share of the HBM (``cache_write_elements``,
    :data:`BF16_CACHE_WRITE_HBM`) and that write's fixed SM work a token (``token_rows`` x
    ``token_row_s``: a kernel of one thread block a token, spread over the SMs)."""
    stream = pre_bytes / (prm["eff_memory"] * fig.hbm_bytes_per_s)
    quant = col(batch, "cache_quant_elements", 0) * FP8_CACHE_WRITE_CLOCKS
    write = col(batch, "cache_write_elements", 0) * 4.0  # bf16: 2 bytes read, 2 written
    write_s = write / (BF16_CACHE_WRITE_HBM * fig.hbm_bytes_per_s)
    rows_s = col(batch, "token_rows", 0) * prm["token_row_s"] / fig.sm_count
    # an fp8 cache's clocked elements and the blocks' fixed work overlap in part
    # (:data:`FP8_CACHE_WRITE_OVERLAP`); a bf16 cache's bytes and a query conversion's blocks
    # (SGLang's B200) add to them
    quant_s = quant / (fig.sm_count * fig.clock_hz)
    return stream + combine(quant_s, rows_s, FP8_CACHE_WRITE_OVERLAP) + write_s


def _tcgen05_fp8_prompt(batch: KernelBatch, fig: DeviceFigures) -> bool:
    """Whether ``batch`` is an fp8 ``attention_prefill`` of no variant on a ``tcgen05`` device
    (:data:`FP8_PROMPT_TCGEN05_RATE`, :data:`FP8_PROMPT_TCGEN05_EXP`)."""
    fp8 = batch.dtype.startswith("fp8")
    return bool(fig.tcgen05 and fp8 and batch.kind == "attention_prefill" and not batch.variant)


def _kernel_rates(
    batch: KernelBatch, fig: DeviceFigures, prm: dict[str, float]
) -> tuple[float, float]:
    """A prompt kernel's exponential rate (in the SFUs' rates: ``eff_exp``, at most 1 before
    Blackwell) and the share of the tensor peak its products reach against Hopper's kernel's
    (1 but for Blackwell's fp8 prompt kernel, :data:`FP8_PROMPT_TCGEN05_RATE`, and
    FlashAttention-4's encoder, :data:`FLASH_ENCODER_TCGEN05_RATE`, each with its own
    exponential rate)."""
    if _tcgen05_fp8_prompt(batch, fig):
        return min(prm["eff_exp"], 1.0) * FP8_PROMPT_TCGEN05_EXP, FP8_PROMPT_TCGEN05_RATE
    if _flash_encoder_tcgen05(batch, fig):
        return prm["eff_exp"] * FLASH_ENCODER_TCGEN05_EXP, FLASH_ENCODER_TCGEN05_RATE
    return (prm["eff_exp"] if fig.tcgen05 else min(prm["eff_exp"], 1.0)), 1.0


def _flash_encoder_tcgen05(batch: KernelBatch, fig: DeviceFigures) -> bool:
    """Whether ``batch`` is FlashAttention-4's encoder on a ``tcgen05`` device: the ``encoder``
    variant at a built head dim (``head_dim_built``, SGLang's and vLLM's FlashAttention kernels,
    :func:`encoder_kernel_shape`; not TensorRT-LLM's FMHA) (:data:`FLASH_ENCODER_TCGEN05_EXP`,
    :data:`FLASH_ENCODER_TCGEN05_RATE`)."""
    return bool(fig.tcgen05 and batch.variant == "encoder" and "head_dim_built" in batch.shape)


def side_work_rate(batch: KernelBatch, fig: DeviceFigures) -> float:
    """The rate, in the SMs' datasheet rates, of an MLA prompt kernel's side work beside its
    products on a ``tcgen05`` device (the softmax's exponentials, fp8's probability
    conversion): its tensor rate per SM and clock over Hopper's (B200: 2), where the kernels
    (TensorRT-LLM-gen's, FlashAttention-4) compute exponentials as a polynomial exp2 on the FMA
    pipes beside the SFUs; 1 elsewhere and for the other prefill kinds. Every engine's MLA
    prompt reaches the same share of its device's tensor peak on H100 and B200 (TensorRT-LLM's
    rows at 16-32K tokens and 128 heads: 57-59% bf16, 42-44% fp8 of the FLOPs padded to the
    fp8 kernel's head dims; SGLang's 59-63% bf16), which side work at the SFUs' own rate (1.14x
    H100's on B200, against 2.27x for the products) would not let it: B200's long prompts read
    12% (bf16) and 39% (fp8) too slow with it, each engine's ``mla_prefill`` class at
    ``eff_compute`` 1.0, the bound (docs/time-model.md, "What carries from Hopper to
    Blackwell"). One head shape cannot tell the rate from ``eff_exp`` (which the MLA prompt
    classes do not fit), so the rate is set, not fitted."""
    if batch.kind != "mla_prefill" or not fig.tcgen05:
        return 1.0
    return max(1.0, tensor_per_sm_ratio(fig))


def _built_head_dims(
    batch: KernelBatch, flops: np.ndarray, d_qk: np.ndarray, d_v: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A kernel built for a few head sizes (``head_dim_built``, set by the mapping:
    :func:`encoder_kernel_shape`) runs a head dim between them padded to the next: the FLOPs
    and shared-memory operand reads of the padded dim, the exponentials and HBM bytes of the
    real one. Its tile's fixed work (its Q tile and first K/V blocks loaded, its output
    stored) grows with the built dim, in 128ths: at under 30 us the encoder rows at 72 and 80
    (built 96) take 1.21-1.40x those at 64. Returns the FLOPs, the two head dims and the
    factor on a unit's wait (1 where no ``head_dim_built``)."""
    built = col(batch, "head_dim_built", 0)
    if not np.any(built > 0):
        return flops, d_qk, d_v, np.ones(len(batch))
    flops = flops * np.where(built > 0, 2.0 * built / np.maximum(d_qk + d_v, 1.0), 1.0)
    d_qk = np.where(built > 0, np.maximum(built, d_qk), d_qk)
    d_v = np.where(built > 0, np.maximum(built, d_v), d_v)
    return flops, d_qk, d_v, np.where(built > 0, built / 128.0, 1.0)


#: Bytes per (query, key) score that an unfused attention moves through HBM (the variants of
#: :data:`UNFUSED_PREFILL_VARIANTS`): the scores' product written in fp32 and read by the
#: softmax (4 + 4), the probabilities written in bf16 and read by the value product (2 + 2).
#: TensorRT-LLM's encoder rows at head dim 72 (``encoder_fallback``: no fused kernel built for
#: it on B200) take 1.60-1.68 ps a score from 1 ms on (median 1.63, at every length from 1,024
#: to 65,536 tokens), 177 TFLOP/s where its fused kernel reaches 750-820 at head dims 64 and
#: 80: 12.5 bytes a score at B200's 7.7 TB/s, the score matrix's round trips through HBM.
UNFUSED_SCORE_BYTES = 12.0

#: Prefill variants that run the attention unfused (two batched GEMMs around a softmax pass):
#: TensorRT-LLM's encoder at a head dim its fused kernels have no build for.
UNFUSED_PREFILL_VARIANTS = frozenset({"encoder_fallback"})


def _unfused_score_bytes(batch: KernelBatch, scores: np.ndarray) -> np.ndarray | float:
    """HBM bytes an unfused attention's score matrix adds (:data:`UNFUSED_SCORE_BYTES` a
    score); 0 for the fused kernels."""
    if batch.variant not in UNFUSED_PREFILL_VARIANTS:
        return 0.0
    return scores * UNFUSED_SCORE_BYTES


def _resident_waves(
    units: np.ndarray, fig: DeviceFigures, d_qk: np.ndarray, d_v: np.ndarray, elem: float
) -> np.ndarray:
    """Waves of a prefill's units with as many tiles resident on an SM as its shared memory
    holds, per wave of one tile an SM. Hopper's warp-specialized kernels (compute capability
    9 and later; FlashAttention-3) are persistent, one tile an SM; an Ampere/Ada kernel
    (FlashAttention-2: a 128-query tile and one 64-key K and V stage) fits
    ``smem // ((128 d_qk + 64 (d_qk + d_v)) x element bytes)`` tiles on an SM: two at head
    dim 128 on A100 (64 of 164 KB), one for MLA's 192/128 (88 KB)."""
    if fig.tensor_core_generation != "sm80":
        return np.ones(len(units))
    one = np.maximum(np.ceil(units / fig.sm_count), 1.0)
    smem = smem_per_sm(fig)
    tile = (128.0 * d_qk + 64.0 * (d_qk + d_v)) * elem
    resident = np.maximum(np.floor(smem / np.maximum(tile, 1.0)), 1.0)
    return np.ceil(units / (fig.sm_count * resident)) / one


def decode_splits(
    batch: KernelBatch,
    heads_units: np.ndarray,
    keys: np.ndarray,
    slots: float,
    part_keys: np.ndarray | float = 256.0,
) -> np.ndarray:
    """Key splits of a decode unit (flash-decoding): where the kernel can split
    (``kv_split``) and its units leave some of the ``slots`` resident units idle, a unit's
    ``keys`` split into parts of at least ``part_keys`` (:data:`DECODE_SPLIT_KEYS`,
    :data:`~mlacalc.timemodel.mla_time.MLA_SPLIT_KEYS`), as many as fill them."""
    can_split = (col(batch, "kv_split", 1) > 0) & (heads_units < slots)
    return np.where(
        can_split,
        np.clip(np.floor(slots / heads_units), 1.0, np.maximum(1.0, np.ceil(keys / part_keys))),
        1.0,
    )


#: Decode kernels (TRT-LLM XQA and MMHA multi-block mode) split a unit's keys across SMs up to
#: this many resident units per SM, every split at least :data:`DECODE_SPLIT_KEYS` keys (MLA
#: decode splits up to one unit a SM: :mod:`~mlacalc.timemodel.mla_time`).
DECODE_SPLIT_UNITS_PER_SM = 4.0
DECODE_SPLIT_KEYS = 256.0

#: TensorRT-LLM's masked MHA decode (MMHA: a unit a query head, its MHA rows, the grouped bf16
#: rows it does not run as XQA, :func:`xqa_dispatched`, and the query heads beyond
#: ``head_pack``) splits a unit's keys into at most this many parts an SM over its units,
#: ``ceil(SMs x MMHA_SPLIT_UNITS_PER_SM / units)``, where the other decode kernels fill up to
#: :data:`DECODE_SPLIT_UNITS_PER_SM` resident units an SM: its launcher sizes the split buffer
#: for one (large) block an SM per sequence and head (as recalled of TensorRT-LLM's
#: ``getMaxNumSeqLenTile`` and the MMHA grid setup, which clamps the balanced split count
#: there; not checked against a stored copy of the source). Read from H100's MHA rows: at 16
#: to 64 query heads over all sequences and 2,048-16,384 cached keys the four-an-SM splits put
#: them 19.9% / 26.1% fast (bf16 / fp8 medians), one an SM (the class refitted) 8.8% / 18.3%
#: (docs/time-model.md, "TensorRT-LLM's MMHA splits its keys one part an SM").
MMHA_SPLIT_UNITS_PER_SM = 1.0

#: Most parts SGLang's Triton decode kernel (the ``triton`` variant, its ``kernel_source``)
#: splits a sequence's keys into: 8, as recalled of SGLang's ``triton_attention_num_kv_splits``
#: server argument (default 8; its backend picks a number per sequence up to it), not checked
#: against a stored copy. The tables show the cap: at one sequence of one KV head (16 query
#: heads, bf16 cache) B200's rows at head dim 256 take 47, 84, 160 and 314 us at 4,096, 8,192,
#: 16,384 and 32,768 cached keys and H100's at head dim 512 63, 118, 283 and 630 us (twice the
#: time for twice the keys: a few parts walking them in turn), where parts of 256 keys filling
#: the SMs put B200's at 27-31 us. With the cap (the Triton classes refitted) the kernel's
#: decode rows, median / p90 |error| bf16 and fp8: B200 19.0% / 77.0% -> 17.9% / 61.3% and
#: 16.9% / 64.7% -> 16.7% / 49.9%, H100 8.8% / 38.8% -> 7.0% / 34.1% and 6.9% / 35.9% ->
#: 7.4% / 29.3%; from the other device's fit (median) H100 44.9% -> 28.8%, 49.2% -> 20.1%,
#: B200 30.5% -> 25.9%, 25.2% -> 22.7%
TRITON_MAX_KV_SPLITS = 8.0
#: The decode variants that cap their splits at :data:`TRITON_MAX_KV_SPLITS`: SGLang's Triton
#: decode (vLLM's Triton attention on B200, ``vllm_triton_attn``, is another kernel)
TRITON_SPLIT_VARIANTS = frozenset({"triton"})


#: TensorRT-LLM's key splits of its mma.sync XQA decode (grouped queries, a bf16 cache on
#: Hopper and Ampere), as recalled of its dispatcher's multi-block count (a least number of
#: history tokens a CTA, a square-root cap so the final reduction does not dominate, a target
#: of CTAs a wave; not checked against a stored copy of the source): a part per
#: XQA_SPLIT_KEYS cached keys of the whole cache (a window's or not), at most
#: round(sqrt(XQA_SPLIT_SQRT x that)) parts, and no more than XQA_SPLIT_WAVES x SMs CTAs over
#: its units (batch x KV heads). The
#: tables show each bound (H100, bf16, head dim 64): 512 units take 23.0 us at 128 cached keys
#: and 43.8 at 256 (two parts: 1,024 CTAs, as 1,024 units of 128 keys take, 40.5), 1,024 units
#: 40.5 and 46.9 (one); under a 128-key window the time grows with the whole cache until the
#: count stops, at 256 keys for 512 units, 512 for 256, 1,024 for 128, 4,096 for 64 (16 parts:
#: the CTAs) and 16,384-32,768 for 32 (32-33 parts: the square root, then the CTAs).
XQA_SPLIT_KEYS = 128.0
XQA_SPLIT_SQRT = 8.0
XQA_SPLIT_WAVES = 8.0
#: Share of the L2 from which the bytes a call of Hopper's fp8 XQA reads make it wait
#: ``spill_s`` (:func:`_spill_share`: in full from twice it, the whole L2). H100's grouped fp8
#: rows of 32-512 units lie, from about 64 MB of cache, on 14 us + bytes / 3.12 TB/s at every
#: unit count, 8-13 us over the floor plus the stream, which they are not to 8 MB; at head dim
#: 256 the wait appears between 32 and 64 MB. The onset is the L2's size, not fitted (why the
#: kernel waits is not identified; docs/time-model.md, "Hopper's fp8 XQA waits once its cache
#: outgrows the L2")
XQA_SPILL_FROM = 0.5

#: Whether the mma.sync XQA merges its key splits in the kernel (the last CTA of a unit reads
#: the others' partial results, ``merge_s`` a part, as Hopper's fp8 XQA does) rather than in a
#: reduction kernel of its own: from recall of its semaphores and scratch buffer, not checked
#: against a stored copy. A reduction kernel read the B200 rows from H100 + A100's fit worse
#: (bf16 median 8.4% -> 9.6%: the fit took the kernel's launch out of ``fixed_s``).
XQA_MERGES_IN_KERNEL = True


def xqa_splits(kv: np.ndarray, heads_units: np.ndarray, fig: DeviceFigures) -> np.ndarray:
    """Parts TensorRT-LLM's mma.sync XQA decode splits a unit's ``kv`` cached keys into (the
    whole cache's, a window's or not): ``c = floor(kv / XQA_SPLIT_KEYS)``, at most
    ``round(sqrt(XQA_SPLIT_SQRT x c))`` and ``floor(XQA_SPLIT_WAVES x SMs / units)``, at
    least one."""
    c = np.maximum(np.floor(np.asarray(kv, dtype=np.float64) / XQA_SPLIT_KEYS), 1.0)
    n = np.minimum(c, np.round(np.sqrt(XQA_SPLIT_SQRT * c)))
    cap = np.floor(XQA_SPLIT_WAVES * fig.sm_count / np.maximum(heads_units, 1.0))
    return np.maximum(np.minimum(n, cap), 1.0)


#: SGLang's Triton decode sizes its key splits by the call's CTAs and the cache's length (as
#: recalled of its Triton backend's ``get_num_kv_splits``, not checked against a stored copy of
#: the source): ``min(ceil(SMs x max(log2(keys / 64), 1) / grid), 8)`` splits, ``grid`` the
#: sequences x query-head groups (a KV head's query heads, 16 at most, a group; MHA a head
#: each), and each split rounded up to whole :data:`TRITON_SPLIT_MIN_KEYS` keys, so a
#: short cache fills fewer parts than the count. The parts hold no least number of keys
#: beyond that: at one sequence of one KV head B200's bf16 rows at head dim 256 grow from 511
#: keys on (16.5, 22.7, 39.2, 68.0 us at 511-4,095), as 8 parts of 64-512 keys do, where
#: parts of at least 256 keys (the other decode kernels') stayed flat to 2,047
#: (docs/time-model.md, "SGLang's Triton decode splits every cache eight ways").
TRITON_SPLIT_MIN_KEYS = 32.0
TRITON_SPLIT_HEAD_BLOCK = 16.0


def triton_kv_splits(
    batch: KernelBatch, fig: DeviceFigures, a: dict[str, np.ndarray], keys: np.ndarray
) -> np.ndarray:
    """Parts holding keys of SGLang's Triton decode (:data:`TRITON_SPLIT_MIN_KEYS`): its
    split count over ``keys`` (the window's, where one), each part whole 32-key blocks."""
    b, heads, group = a["b"], a["heads"], np.maximum(a["group"], 1.0)
    groups = np.ceil(heads / np.minimum(TRITON_SPLIT_HEAD_BLOCK, group))
    grid = b * np.where(group > 1, groups, heads)
    keys = np.maximum(np.asarray(keys, dtype=np.float64), 1.0)
    cores = np.floor(fig.sm_count * np.maximum(np.log2(keys / 64.0), 1.0))
    count = np.clip(np.ceil(cores / np.maximum(grid, 1.0)), 1.0, TRITON_MAX_KV_SPLITS)
    count = np.ceil(keys / np.ceil(keys / count))
    part = np.ceil(np.ceil(keys / count) / TRITON_SPLIT_MIN_KEYS) * TRITON_SPLIT_MIN_KEYS
    return np.ceil(keys / part)


def _max_splits(batch: KernelBatch) -> float:
    """Most parts a decode kernel splits a unit's keys into: :data:`TRITON_MAX_KV_SPLITS` for
    the variants of :data:`TRITON_SPLIT_VARIANTS` (SGLang's Triton decode), else no cap."""
    return TRITON_MAX_KV_SPLITS if batch.variant in TRITON_SPLIT_VARIANTS else np.inf


def _split_part_keys(batch: KernelBatch, fig: DeviceFigures) -> np.ndarray | float:
    """Fewest keys a part of a split decode unit holds: :data:`DECODE_SPLIT_KEYS`, but for
    TensorRT-LLM's own decode kernels (``head_pack`` > 0) off data-centre Blackwell (MMHA and
    XQA, not TensorRT-LLM-gen: :func:`_trtllm_gen_decode`) ``DECODE_SPLIT_KEYS`` x 128 / head
    dim (the head dim padded to a power of two): a part holds a fixed number of key elements,
    32,768. H100's rows (batch 1, one KV head, either cache dtype, MHA and grouped) step up by
    a reduction kernel's time (about +5 us) first at 1,024 / 512 / 256 keys for head dims
    64 / 128 / 256 (and a padded 192 with an fp8 cache); B200's kernel shows no such step."""
    if _trtllm_gen_decode(batch, fig):
        return DECODE_SPLIT_KEYS
    hd = 2.0 ** np.ceil(np.log2(np.maximum(col(batch, "head_dim_qk", 128), 1.0)))
    own = col(batch, "head_pack", XQA_HEAD_PACK) > 0
    return np.where(own, DECODE_SPLIT_KEYS * 128.0 / hd, DECODE_SPLIT_KEYS)


#: Bytes a grouped decode unit holds on its SM per query row and head-dim element beside its
#: K/V stage: two FP32 copies of its output tile (the running accumulator and the rescaled
#: partial result it exchanges through shared memory). An assumed figure, which the fit barely
#: feels.
DECODE_ROW_BYTES = 8.0


#: Class variants of an engine's own kernel whose unit's fitted work is tensor-core MMAs over
#: each key block it walks, as the packing decode kernels' is (:func:`_tensor_work_scale`):
#: MiniMax-M3's block-sparse prompt core (``msa_prefill``, fitted on vLLM's msa module rows'
#: residuals; a query token's rows a unit over its chosen 64-key blocks). vLLM runs Triton's
#: kernel on H100 and its MSA kernel on B200, but each multiplies a token's query rows
#: against every chosen block on the tensor cores: one prompt of 32,768 tokens at 64 heads
#: (2,048 chosen keys a token) leaves the core 558 ns a token on H100 and 132 on B200 (4.2x,
#: where the clocks and SM counts give 1.14 and the tensor rate per SM and clock 2 more).
#: With the factor B200's prompt rows from H100's fit go 54.3% / 298% -> 44.6% / 130%
#: (median / p90 |error|; signed +42% -> +2%); B200's fitted rows 8.2% -> 7.7%. The decode
#: core (``msa``) is left out: its rows from the other device read worse with it (8.4% ->
#: 10.9%).
TENSOR_WALK_VARIANTS = frozenset({"msa_prefill"})

#: Class variants whose kernel vLLM picks by device (MiniMax-M3's block-sparse prompt core,
#: ``msa_prefill``): on Hopper its Triton kernel (``MiniMaxM3SparseTritonImpl``) multiplies a
#: token's query heads of a KV head as one tile of at least 16 rows (Triton's ``tl.dot`` takes
#: no operand dimension under 16, as recalled of Triton, not checked against a stored copy):
#: its FLOPs are the padded tile's, ``max(16, rows) / rows`` of the counted ones; on data-centre
#: Blackwell its MSA kernel (``MiniMaxM3SparseMSAImpl``) pads no rows: its walk of a block is
#: the query rows' share of a 16-row tile (:func:`_walk_tiles`, :func:`_padded_flops`). Read
#: from the msa prompt module rows less their other kernels (bf16 GEMMs and cache, no cached
#: tokens): at one sequence of 32,768 tokens H100's core takes 3.5, 3.4, 3.5, 3.6 and 3.7 ms
#: at 1, 2, 4, 8 and 16 query heads (one KV head) and 8.7, 18.3 and 37.4 ms at 32, 64 and
#: 128; B200's at 16,384 tokens 83, 116, 150, 252, 472 us at 1-16 heads and 1.0, 2.3, 4.7 ms
#: at 32-128 (about 40 us of it a fixed cost of its own). Both devices' figures
#: (docs/time-model.md, "MiniMax-M3's block-sparse prompt core by device").
ROW_PADDED_VARIANTS = frozenset({"msa_prefill"})


def _walk_tiles(
    batch: KernelBatch, fig: DeviceFigures, grouped, rows, row_tile, pack
) -> np.ndarray:
    """Row tiles a decode unit walks each block in (:func:`_row_tiles` for a grouped unit, else
    one); a block-sparse prompt core's (:data:`ROW_PADDED_VARIANTS`) as the device's kernel
    pads its query rows: on data-centre Blackwell (vLLM's MSA kernel) the rows' share of a
    16-row tile, elsewhere (Hopper's Triton kernel) whole 16-row tiles."""
    if batch.variant in ROW_PADDED_VARIANTS:
        rows = np.where(grouped, rows, 1.0)
        return rows / 16.0 if fig.tcgen05 else np.ceil(rows / 16.0)
    return np.where(grouped, _row_tiles(batch, fig, rows, row_tile, pack), 1.0)


def _padded_flops(batch: KernelBatch, fig: DeviceFigures, grouped, rows) -> np.ndarray:
    """FLOPs of a decode kernel: the counted ones, but a block-sparse prompt core's
    (:data:`ROW_PADDED_VARIANTS`) off data-centre Blackwell (Hopper's Triton kernel) those of
    its query rows padded to a 16-row tile, ``max(16, rows) / rows`` of them."""
    if batch.variant not in ROW_PADDED_VARIANTS or fig.tcgen05:
        return batch.flops
    rows = np.where(grouped, rows, 1.0)
    return batch.flops * np.maximum(rows, 16.0) / rows


#: Class variants of the block-sparse kernels vLLM picks by device whose class ``fixed_s`` is
#: the fixed stage of Blackwell's MSA kernel (``MiniMaxM3SparseMSAImpl``), which Hopper's Triton
#: kernel (``MiniMaxM3SparseTritonImpl``) has not (:func:`call_fixed_s`): MiniMax-M3's prompt
#: core (``msa_prefill``, about 40 us a call) and its decode core (``msa``). The decode core's
#: stage, read as the msa decode module rows less their other kernels' predictions at 1-8
#: query heads, up to 8 sequences and up to 127 cached tokens (112 rows a slice): B200 5.2,
#: 6.7, 8.2 and 9.9 us (bf16 GEMMs and a bf16 / fp8 cache, fp8 block GEMMs and a bf16 / fp8
#: cache), H100 -1.7, 0.0, 3.6 and 5.2 us; B200's fit holds it in ``fixed_s`` (9.3 / 9.5 us),
#: H100's had 0.4 / 0.1 us (docs/time-model.md, "The Blackwell MSA kernel's fixed stage").
FIXED_STAGE_VARIANTS = frozenset({"msa_prefill", "msa"})


#: Class variants of the block-sparse kernels vLLM picks by device whose Blackwell kernel
#: (``MiniMaxM3SparseMSAImpl``) pays a pass over the call's sequences for every query token
#: and head, :data:`SEQUENCE_PASS_WIDTH` sequences a pass, past the first
#: (:func:`sequence_pass_s`): MiniMax-M3's prompt core (``msa_prefill``).
SEQUENCE_PASS_VARIANTS = frozenset({"msa_prefill"})
#: Sequences one pass of :func:`sequence_pass_s` takes (a warp's 32 lanes, one offset each)
SEQUENCE_PASS_WIDTH = 32.0
#: SM clocks a further pass costs a query token and head, the SMs sharing it as throughput.
#: Measured, not fitted by the class: vLLM's B200 msa prompt module rows
#: (``msa_context_module_perf``) of the same tokens, heads, dtypes and cache, a row of 2s
#: sequences less the row of s (each less its other kernels and the class's own change, the
#: core's keys shrinking with the prompt), over the tokens x heads x the passes added: 68.8,
#: 97.8 and 101.1 clocks at s = 32, 64 and 128 (864, 672 and 576 pairs; 88-105 at 8-128 heads,
#: 152-212 at one head), 93.5 over the 2,112 pairs; at s = 8 and 16 the pairs add about none
#: (docs/time-model.md, "MiniMax-M3's B200 prompt core passes over its sequences").
SEQUENCE_PASS_CLOCKS = 93.5


def sequence_pass_s(batch: KernelBatch, fig: DeviceFigures) -> np.ndarray:
    """Seconds a block-sparse prompt core of :data:`SEQUENCE_PASS_VARIANTS` on data-centre
    Blackwell spends finding each query token's sequence: one pass of
    :data:`SEQUENCE_PASS_WIDTH` sequences for every query token (``batch``) and head past the
    first pass, :data:`SEQUENCE_PASS_CLOCKS` of an SM each, over the SMs (``seqs``: the call's
    sequences; a kernel without the field pays none). Hopper's Triton kernel
    (``MiniMaxM3SparseTritonImpl``) shows no such cost (its rows of 2s sequences less those of
    s: 0.1-1.1 x 10^-12 s a token, head and sequence added, against B200's 1.1 x 10^-11)."""
    if batch.variant not in SEQUENCE_PASS_VARIANTS or not fig.tcgen05:
        return np.zeros(len(batch))
    passes = np.maximum(np.ceil(col(batch, "seqs", 0) / SEQUENCE_PASS_WIDTH) - 1.0, 0.0)
    a = attention_shape(batch)
    clocks = SEQUENCE_PASS_CLOCKS * a["b"] * a["heads"] * passes
    return clocks / (fig.sm_count * fig.clock_hz)


def call_fixed_s(batch: KernelBatch, fig: DeviceFigures, prm: dict[str, float]) -> float:
    """Fixed seconds of a decode call: the class's ``fixed_s``, but a block-sparse core's
    (:data:`FIXED_STAGE_VARIANTS`) off data-centre Blackwell one launch (``launch_s``): the
    fixed stage its ``fixed_s`` holds is the Blackwell MSA kernel's own (the prompt core's
    about 40 us: B200's prompt rows of 16 tokens take 28-48 us more than its one-token rows,
    which run the decode path, at every head count and one to eight sequences; H100's Triton
    kernel's rows 0-4 us less; the decode core's 5-10 us), which Hopper's Triton kernel has
    not."""
    if batch.variant in FIXED_STAGE_VARIANTS and not fig.tcgen05:
        return prm["launch_s"]
    return prm["fixed_s"]


def _tensor_work_scale(batch: KernelBatch, fig: DeviceFigures) -> float:
    """Factor on a decode unit's fitted work (``seq_s``, ``block_s``, ``wave_s``: clocked
    seconds, on an SM of Hopper's dense bf16 FLOP per clock, :func:`tensor_per_sm_ratio`) on
    ``fig``: Hopper's FLOP per clock and SM over ``fig``'s, for the packing kernels an engine
    runs as its own decode backend (``head_pack`` 0, no ``variant``: FlashAttention-3 on
    Hopper, TensorRT-LLM-gen on data-centre Blackwell), whose unit's work is its padded query
    tile's warp-group (``wgmma``) or ``tcgen05`` MMAs over each block at the SM's full tensor
    rate: B200's SM does twice Hopper's FLOPs a clock (2,250 TFLOPS / (148 x 1,856 MHz) =
    8,192), 0.5 (the ratio to two places; H20's cut tensor cores 4). Devices of other tile
    rules (``tensor_core_generation`` not ``sm90``: Ampere, Ada, AMD) run other decode kernels
    (``mma.sync`` ones), unmeasured under these engines: 1. SGLang's and vLLM's rows
    of one shape at 129 and more sequences and up to 256 cached keys, where that work
    dominates, take 1.9-2.3 times as long on H100 as on B200, where the clocks and SM counts
    give 1.14. The same for the variants of :data:`TENSOR_WALK_VARIANTS`. 1 for every other
    kernel: TensorRT-LLM's XQA (``head_pack`` 32) runs
    ``mma.sync`` on 16-row tiles (bf16) and its fp8 kernel 8-row ones, whose fitted work
    carried to B200's kernel this way reads worse for fp8 (its own rule:
    :func:`_xqa_work_scale`), and the variants (Triton, FlashInfer's own) run other code."""
    if fig.tensor_core_generation != "sm90" or batch.variant not in ("", *TENSOR_WALK_VARIANTS):
        return 1.0
    ratio = round(tensor_per_sm_ratio(fig), 2)
    return 1.0 / ratio if ratio > 0 else 1.0


#: Decode kernels (their class variants, from the tables' ``kernel_source``) that gather the
#: paged cache with per-token pointer loads: SGLang's Triton decode (``decode_attention``, a
#: token's slot from ``req_to_token``), where FlashAttention-3 and TensorRT-LLM-gen copy whole
#: pages with TMA (:func:`_gather_bytes`). vLLM's Triton attention gathers too, but its only
#: rows (B200) take H100's FlashAttention-3 class when B200 is left out, a copy engine's draw:
#: not listed (its left-out rows 20.7% with the factor left off, 22.9% with it).
GATHER_DECODE_VARIANTS = frozenset({"triton"})


def _gather_bytes(batch: KernelBatch, fig: DeviceFigures) -> float:
    """Factor on a gathering decode kernel's bytes (:data:`GATHER_DECODE_VARIANTS`): its loads in
    flight per SM are what its warps issue, not a copy engine's, so an SM draws at most Hopper's
    bytes a clock (:func:`~mlacalc.timemodel.shared.hbm_per_sm_ratio`) and a device with more
    HBM per SM and clock streams its cache no faster per SM: B200 (7.7 TB/s over 148 SMs at
    1,856 MHz, 28.0 bytes a clock) 2.02, H100 1. SGLang's Triton decode fits draw 0.82 and 0.41
    of H100's HBM (bf16 / fp8 cache) and 0.46 and 0.20 of B200's, 0.56 and 0.49 of the H100
    figures, where TensorRT-LLM-gen's B200 fits draw 0.88-0.93; refitted with the factor, B200's
    draw 0.92 and 0.40 of its capped rate. 1 for every other kernel."""
    if batch.variant not in GATHER_DECODE_VARIANTS:
        return 1.0
    return max(1.0, round(hbm_per_sm_ratio(fig), 2))


def _decode_unit_bytes(batch: KernelBatch, hd: np.ndarray, qrows: np.ndarray) -> np.ndarray:
    """Bytes a grouped decode unit holds on its SM: one 64-token K and V stage of the cache
    (its element size: 1 for an fp8 cache, else 2) and :data:`DECODE_ROW_BYTES` per query row
    and head-dim element."""
    elem = 1.0 if batch.dtype.startswith("fp8") else 2.0
    return 64.0 * hd * 2.0 * elem + DECODE_ROW_BYTES * qrows * hd


def _trtllm_gen_decode(batch: KernelBatch, fig: DeviceFigures) -> bool:
    """Whether the decode kernel is the TensorRT-LLM-gen one that every engine runs on
    data-centre Blackwell (``tcgen05``; TensorRT-LLM's own, SGLang's ``trtllm_mha``, vLLM's
    FlashInfer TensorRT-LLM decode), one kernel for either cache dtype: the CTAs of a unit
    merge their key splits in the kernel (no reduction kernel after it) and the RoPE + cache
    append runs before it as a kernel of its own for an fp8 cache too (Hopper's fp8 XQA fuses
    it). TensorRT-LLM's B200 rows at one or two sequences and up to 64 cached keys take 11.0 us
    with either cache and any grouping, where H100's grouped fp8 rows take 1.4 us less than its
    bf16 ones (7.4 against 8.8 us); the B200 fits put the launch of a further kernel at 0-0.5 us
    where H100's are 2.6-3.4 us. Not a kernel the table names as another (a ``variant``:
    FlashInfer's own, Triton's), which keeps Hopper's rules."""
    return bool(fig.tcgen05) and not batch.variant


#: Kernels TensorRT-LLM's own attention op runs on data-centre Blackwell before the
#: preprocessing (RoPE + cache append) and the TensorRT-LLM-gen decode kernel: one, the build of
#: the decoder's sequence offsets and lengths its dispatcher launches for that kernel (as
#: recalled of TensorRT-LLM's XQA dispatcher, not checked against a stored copy of its source).
#: Read from both devices' floors (one or two sequences, up to 255 cached keys, head dim 128):
#: B200 takes 10.9 us with either cache and any grouping, where H100's fp8 XQA, one fused
#: kernel, takes 5.7-5.9 us and its bf16 XQA after the preprocessing kernel 8.5-8.8 us: 2.6-3.1
#: us a further kernel, and B200's floor is the fused kernel's and two more. Counted, B200 from
#: H100's fit predicts the floor at 11.2-11.9 us where it had 7.8-8.8, and the fp8 rows from
#: the other device 19.0% -> 15.3% (docs/time-model.md). SGLang and vLLM call the kernel
#: through FlashInfer (``head_pack`` 0), without it.
TRTLLM_GEN_DISPATCH_KERNELS = 1.0


#: Seconds of each further kernel of a call of TensorRT-LLM's own decode (``head_pack`` 32; the
#: RoPE + cache-append pre-kernel, the split reduction, Blackwell's dispatch kernel) at H100's
#: clock (the reference; scaled by it as the fitted ``launch_s`` is), on every device, in place
#: of the class's ``launch_s``. B200's rows cannot tell it from the call's fixed cost (every row
#: runs the same three kernels), so its fits split the 10.9 us floor at will (bf16 6.9 + 2 x
#: 1.9 us, then 10.6 + 2 x 0; fp8 10.8 + 2 x 0), and H100's fused fp8 XQA (no further kernel)
#: read 52-57% slow at its floor from them. Read, not fitted: H100's fits put a further kernel
#: at 3.1 / 3.4 us (fp8 / bf16), its floors (one or two sequences, up to 127 keys, 1,148 shapes)
#: take 2.5 us more with a bf16 cache (one kernel more) than with fp8 (median; 2.9 at head dim
#: 128, 2.8 at 256), and SGLang's two query conversions on B200 3.1 us each
#: (:data:`QUERY_CONVERT_KERNELS`). Held on Hopper and later only (a variant tried), an
#: H100-only fit left ``launch_s`` to its start and A100 from it read 10.7% (7.9% before), so it
#: holds on A100 too: clocked, A100 (1,410 MHz) takes 3.9 us a kernel where its own fit had 5.4.
TRTLLM_FURTHER_KERNEL_S = 3.0e-6


def _resident_cache(
    batch: KernelBatch, fig: DeviceFigures, prm: dict[str, float], nbytes: np.ndarray
) -> np.ndarray:
    """The bytes of a decode call's cache (``cache_bytes``) a warm replay (``warm_l2``) finds in
    the L2: all of them while the cache fits in ``l2_share`` of the L2, none from twice that."""
    cache = col(batch, "cache_bytes", 0)
    if not np.any(cache > 0):
        return np.zeros(len(batch))
    share = l2_resident_share(cache, fig, prm)
    warm = col(batch, "warm_l2", 0) > 0
    return np.where(warm, share * np.minimum(cache, nbytes), 0.0)


def _row_tiles(
    batch: KernelBatch, fig: DeviceFigures, rows: np.ndarray, row_tile: np.ndarray, pack
) -> np.ndarray:
    """The tensor-core row tiles a grouped decode unit walks each block in: ``rows`` query rows
    in tiles of ``row_tile`` (Hopper's fp8 XQA 8, 16 otherwise), but one in TensorRT-LLM's own
    decode on data-centre Blackwell (TensorRT-LLM-gen's kernel, :func:`_trtllm_gen_decode`),
    whose MMA takes every query head it packs (up to 32) at once. Read from the tables: at 64
    sequences of 8,192 keys (head dim 128, one KV head) B200's rows take 32.1-35.1 us (fp8) and
    49.8-52.2 us (bf16) at every group from 1 to 32, where H100's fp8 rows go 56.7 -> 58.1 ->
    64.1 -> 89.1 us at groups 2, 8, 12 and 32 (one, one, two and four 8-row tiles). With a tile
    per 8 query heads on B200 too, its fp8 fit had put the walk at 0 (``block_s`` 1e-9) and H100
    from it lost that growth (its fp8 rows of 9-32 query heads -22% signed)."""
    tiles = np.ceil(rows / row_tile)
    return np.where(_trtllm_gen_decode(batch, fig) & (pack > 0), 1.0, tiles)


def _further_kernel_s(
    batch: KernelBatch, fig: DeviceFigures, prm: dict[str, float], pack: np.ndarray
) -> np.ndarray:
    """Seconds of each further kernel of a decode call: :data:`TRTLLM_FURTHER_KERNEL_S` for
    TensorRT-LLM's own kernels (``head_pack`` over 0, no variant) on every device (A100's
    too, by its clock), the class's ``launch_s`` otherwise."""
    own = (pack > 0) & (not batch.variant)
    clocked = TRTLLM_FURTHER_KERNEL_S * REFERENCE_CLOCK_HZ / fig.clock_hz
    return np.where(own, clocked, prm["launch_s"])


def _xqa_work_scale(batch: KernelBatch, fig: DeviceFigures) -> float:
    """Factor on the fitted unit work (``seq_s``, ``block_s``, ``wave_s``) of TensorRT-LLM's own
    decode (``head_pack`` 32), stated in clocked seconds of Hopper's XQA kernels: 1 but on
    data-centre Blackwell (:func:`_trtllm_gen_decode`), whose TensorRT-LLM-gen kernel
    multiplies a unit's query rows on ``tcgen05`` at the device's dense bf16 FLOP per clock and
    SM (B200 8,192: 2,250 TFLOPS / (148 x 1,856 MHz)) with either cache, where Hopper's bf16
    XQA multiplies bf16 at no more than Hopper's 4,096 and its fp8 XQA (warp-group MMA on fp8
    operands) at twice that, 8,192: the factor is Hopper's rate for the cache's XQA over the
    device's, B200 0.5 for a bf16 cache and 1 for fp8. The tables show it where the unit work
    dominates (rows of one shape at 129 and more sequences over 256 or fewer keys): H100's
    bf16 rows take 1.91 times B200's and its fp8 rows 1.09 times, 1.68 and 0.96 per SM and
    clock (B200's SMs and clock give it 1.14). With it the bf16 rows from the other device go
    24.7% -> 12.7% (B200 from H100) and 23.3% -> 16.4% (H100 from B200; docs/time-model.md);
    the packing kernels' factor (:func:`_tensor_work_scale`) for both caches had read fp8
    worse (H100 from B200 25.6% -> 39.0%)."""
    if not _trtllm_gen_decode(batch, fig):
        return 1.0
    hopper_rate = 2.0 if batch.dtype.startswith("fp8") else 1.0  # Hopper's XQA MMA, bf16 = 1
    return hopper_rate * _tensor_work_scale(batch, fig)


def _xqa_walk_scale(batch: KernelBatch, fig: DeviceFigures) -> float:
    """Factor on the fitted block walk (``block_s``) of TensorRT-LLM's own decode (``head_pack``
    32): 1 but on data-centre Blackwell (:func:`_trtllm_gen_decode`), where it is the SM's
    tensor width over Hopper's (:func:`_tensor_work_scale`, B200 0.5) for either cache: an fp8
    cache's blocks run through ``tcgen05``'s fp8 MMA at twice Hopper's fp8 XQA rate a clock and
    SM (16,384 against 8,192 FLOP: 4,500 TFLOPS over 148 SMs at 1,856 MHz, 1,979 over 132 at
    1,830), as a bf16 cache's through its bf16 MMA, where a unit's query rows (the unit work,
    :func:`_xqa_work_scale`) take the bf16 rate with either. Read from the tables, not fitted:
    at 4,096 cached keys and more and 64 sequences and more TensorRT-LLM's fp8 rows take 2.0-2.6
    times as long on H100 as on B200 (median by group, 1-32 query heads a KV head; bf16 2.2-2.5),
    HBM's ratio (2.30), where the walk of H100's fp8 fit (``block_s`` 0.45 us a 64-key block)
    carried at 1 put B200's rows 30-42% slow (MHA 100%). B200's own fits walk at their bound
    (``block_s`` 2e-11), so the rule changes only the rows predicted from Hopper's fit."""
    if not _trtllm_gen_decode(batch, fig):
        return 1.0
    return _tensor_work_scale(batch, fig)


#: TensorRT-LLM's decode where a KV head has more query heads than its grouped kernel packs
#: (``head_pack``, 32) runs a unit a query head (the MMHA path), each streaming its KV head's
#: cache through the SM's CUDA cores, on H100 and B200 alike: clocks of an SM per such unit
#: (``MMHA_FALLBACK_UNIT_CLOCKS``, over the SMs) and per cached element (K and V, each head dim
#: element) and query head (``MMHA_FALLBACK_CLOCKS``, over the SMs the parts holding keys keep
#: busy), beside the class's fixed cost and launches, in place of its fitted unit work and
#: walk. Read from both devices' rows at 48-128 query heads per KV head, not fitted with the
#: class: a least-squares fit (soft-L1 on the relative error) of fixed + unit + element clocks
#: on either device and cache dtype alone gives 2,140-2,800 clocks a unit and 0.067-0.072 an
#: element (fixed 7.2-9.0 us), on the 7,823 rows of both devices together 2,250 and 0.069
#: (fixed 8.0 us): median 9.1% / 11.3% (H100 / B200), signed +2.6% / -8.7%. The fp8 rows take
#: as long as the bf16 ones (16 sequences of 2,048 keys at head dim 128 and 64 query heads:
#: H100 171 / 172 us, B200 156 / 150 us) and H100 about as long as B200 (2,048 sequences of 2
#: keys: 1,924 against 2,556 us), where H100's HBM is 0.44 of B200's: not a stream of the cache
#: from HBM once a query head, which the fits had read it as on B200 (``fallback_reads`` 0.78 /
#: 1.0 of the repeated reads missing the L2, bf16 / fp8) and not on H100 (0.01, its block walk
#: instead), reading the other device's fallback rows -44% and +93% (bf16 medians).
#: The element clocks run on the SMs of the parts' waves (:func:`_mmha_fallback_s`), not on
#: every SM once the parts outnumber them: at one or two sequences (MMHA splits a head's keys
#: up to one part an SM over its heads) 64 query heads in 192 parts take 230 us at 32,768
#: cached keys on H100 (fp8), 88 SMs' worth at 0.069 clocks an element, 96 heads in 192 parts
#: and 128 in 256 take 178 us at 16,384 (86 and 114 SMs), where two waves of 132 SMs give 96,
#: 96 and 128; the element clocks re-read with the waves (0.066: a grid over 0.062-0.075 and
#: 1,500-2,500 unit clocks on the fallback rows of both devices and dtypes, the figure whose
#: four table medians fell most).
MMHA_FALLBACK_UNIT_CLOCKS = 2250.0
MMHA_FALLBACK_CLOCKS = 0.066


#: Clocks an SM spends per element of a decode unit's first 64-key V block before
#: FlashAttention-3's fp8 decode on Hopper (the packing kernel, ``head_pack`` 0, no variant:
#: SGLang's and vLLM's) can multiply it: Hopper's fp8 warp-group MMA takes its B operand
#: K-major only, so the kernel transposes each V block in shared memory (FlashAttention-3,
#: section 3.3, as recalled), and the first block's transpose is on the unit's critical path,
#: the later ones overlapping the loads. Read from vLLM's H100 rows, not fitted: at one or two
#: sequences and up to 64 cached keys its fp8 rows take 0.66, 1.50 and 3.25 us more than its
#: bf16 rows of the same shape at head dims 64, 128 and 256 (1,000-3,000 shape pairs each;
#: 0.29, 0.33 and 0.37 clocks per element of a 64-key block at 1,830 MHz; 192, padded to 256,
#: 1.53 us: 0.17), where B200's TensorRT-LLM-gen rows take 0.1-0.2 us more (Blackwell's MMA
#: reads an MN-major fp8 operand as it is). SGLang's build shows it where an SM runs many units
#: (its fp8 rows over 4,096 units 21.3% -> 9.2% fitted), not at its floor (3.3 us more at head
#: dims 64 and 128 alike: a cost of its own, in its fixed cost).
FA3_FP8_FIRST_V_CLOCKS = 0.33


def _mmha_fallback_s(
    units: np.ndarray, elements: np.ndarray, busy: np.ndarray, fig: DeviceFigures
) -> np.ndarray:
    """Seconds of the units of query heads beyond ``head_pack`` a KV head, either cache dtype:
    :data:`MMHA_FALLBACK_UNIT_CLOCKS` a unit over the SMs and :data:`MMHA_FALLBACK_CLOCKS` an
    element over the SMs the parts holding keys keep busy, a wave's worth: ``busy`` parts over
    ``ceil(busy / SMs)`` waves (192 parts on 132 SMs: 96)."""
    sms = fig.sm_count
    clocks = MMHA_FALLBACK_UNIT_CLOCKS * units / sms
    per_wave = busy / np.ceil(np.maximum(busy, 1.0) / sms)
    clocks = clocks + MMHA_FALLBACK_CLOCKS * elements / per_wave
    return clocks / fig.clock_hz


#: Query rows of the tile FlashAttention-3's decode (SGLang's and vLLM's Hopper backend, packing
#: every query head of a KV head into a unit's rows, ``head_pack`` 0) computes each key block
#: in: one warp group's MMA rows (``wgmma`` takes 64 rows; which tile FlashAttention-3's
#: heuristics pick for a decode is not checked against a stored copy of its source, the
#: figure is the tables'). At one shape (batch x KV heads up to 64, cached keys, head dim,
#: window) SGLang's and vLLM's H100 rows take 1.00-1.06 times the time of 1-8 query heads a KV
#: head at every group up to 64, either cache dtype, and 1.07-1.23 at 96 and 128 (two tiles),
#: where tiles of 16 (bf16) or 8 (fp8) rows grew their walk fourfold or eightfold by 64.
FA3_DECODE_ROW_TILE = 64.0


def _fa3_packing_decode(batch: KernelBatch, fig: DeviceFigures, pack: np.ndarray) -> np.ndarray:
    """Rows of ``batch`` that FlashAttention-3's decode runs: a packing decode (``head_pack``
    0) of no variant on Hopper (``kernel_generation`` ``sm90``: not data-centre Blackwell,
    whose engines run TensorRT-LLM-gen's decode)."""
    on = fig.kernel_generation == "sm90" and not batch.variant
    return (np.asarray(pack) <= 0) & on


def _fa3_fp8_decode(batch: KernelBatch, fig: DeviceFigures) -> bool:
    """Whether ``batch`` is an fp8-cache decode on Hopper's kernels (not Blackwell's) of no
    variant: FlashAttention-3's where it packs (``head_pack`` 0, :data:`FA3_FP8_FIRST_V_CLOCKS`)."""
    return (
        batch.dtype.startswith("fp8")
        and fig.sm90_or_later
        and not fig.tcgen05
        and not batch.variant
    )


def _upcast_stream_bytes(batch: KernelBatch, fig: DeviceFigures, a: dict) -> np.ndarray:
    """Bytes an fp8 decode that upcasts its cache (``kv_upcast``, Hopper) reads beyond the
    fp8 cache's from head dim :data:`KV_UPCAST_STREAM_HEAD_DIM`: one an element of K and V."""
    hd = col(batch, "head_dim_qk", 128)
    upcast = (col(batch, "kv_upcast", 0) > 0) & (hd >= KV_UPCAST_STREAM_HEAD_DIM)
    if not (_fa3_fp8_decode(batch, fig) and np.any(upcast)):
        return np.zeros(len(batch))
    return np.where(upcast, a["b"] * a["n_kv"] * a["kv_eff"] * hd * 2.0, 0.0)


def query_convert_s(batch: KernelBatch, fig: DeviceFigures, prm: dict[str, float]) -> np.ndarray:
    """Seconds of the kernels that convert a call's query to fp8 before its attention kernel
    (``q_convert`` of them, :data:`QUERY_CONVERT_KERNELS`): a further kernel's launch and
    wait each (:data:`TRTLLM_FURTHER_KERNEL_S`, clocked) and :data:`QUERY_CONVERT_BYTES` per
    query element streamed at the class's share of HBM."""
    kernels = col(batch, "q_convert", 0)
    launch = TRTLLM_FURTHER_KERNEL_S * REFERENCE_CLOCK_HZ / fig.clock_hz
    elements = col(batch, "batch", 1) * col(batch, "q_len", 1) * col(batch, "n_heads", 1)
    elements = elements * col(batch, "head_dim_qk", 128)
    per = np.where(kernels > 1, QUERY_CONVERT_BYTES, QUERY_CAST_BYTES)  # a cast alone: 3
    stream = elements * per / (prm["eff_memory"] * fig.hbm_bytes_per_s)
    return np.where(kernels > 0, kernels * launch + stream, 0.0)


def hd192_side_call_s(batch: KernelBatch) -> np.ndarray:
    """Seconds a call marked ``hd192_side_call`` takes beyond its kernels
    (:data:`HD192_SIDE_CALL_S`: SGLang's FlashAttention-3 at head dim 192); 0 elsewhere."""
    return np.where(col(batch, "hd192_side_call", 0) > 0, HD192_SIDE_CALL_S, 0.0)


def _call_kernels_s(
    batch: KernelBatch,
    fig: DeviceFigures,
    prm: dict[str, float],
    pack: np.ndarray,
    splits: np.ndarray,
    xqa_fp8: np.ndarray,
    merges: np.ndarray | None = None,
) -> np.ndarray:
    """Seconds of a decode call's kernels beside the attention kernel (``xqa_fp8``: Hopper's
    fp8-cache XQA, TensorRT-LLM's own)."""
    # further kernels of the call, ``launch_s`` each: the RoPE + cache-append pre-kernel, which
    # Hopper's fp8-cache XQA kernel (TensorRT-LLM's: grouped queries, no attention sinks, not a
    # packing kernel) does itself, and the reduction of the key splits (a kernel of its own
    # but in TensorRT-LLM's XQA kernels, ``merges``, and Blackwell's TensorRT-LLM-gen kernel;
    # FlashAttention-3, the
    # packing kernel on Hopper, runs its combine kernel after it and the engine's cache append
    # before it, either cache dtype: vLLM's and SGLang's H100 fp8 rows take no less than their
    # bf16 rows at the floor, 13.0 against 11.5 us and 13.0 against 9.5 us)
    # (``rope_kernel`` 0: the caller times RoPE and the append as a kernel of its own, as a
    # model step does; the measured rows include it, the default)
    gen = _trtllm_gen_decode(batch, fig)
    fused = xqa_fp8 & (col(batch, "sinks", 0) <= 0)
    pre = (~fused) & (col(batch, "rope_kernel", 1) > 0)
    # (vLLM's FlashAttention-3 on Hopper runs its combine kernel at every call, one split or
    # many, ``ALWAYS_COMBINE_S``: :data:`ALWAYS_COMBINE_DECODE`)
    always = fa3_dynamic_split(batch)
    merges = xqa_fp8 if merges is None else merges
    kernels = pre.astype(np.float64) + ((splits > 1) & ~merges & (not gen) & ~always)
    # TensorRT-LLM's own dispatch of the Blackwell kernel (not the packing engines', which call
    # it through FlashInfer) runs a kernel of its own before the preprocessing
    # (:data:`TRTLLM_GEN_DISPATCH_KERNELS`)
    kernels = kernels + TRTLLM_GEN_DISPATCH_KERNELS * (gen & (pack > 0))
    combine_s = ALWAYS_COMBINE_S * REFERENCE_CLOCK_HZ / fig.clock_hz
    # (or, where longer, its partial outputs' round trip through the HBM, FA3_PARTIAL_BYTES an
    # element, and its blocks past one wave, FA3_COMBINE_SEQ_S a sequence past the SM count)
    a = attention_shape(batch)
    d_v = col(batch, "head_dim_v", 0)
    d_v = np.where(d_v > 0, d_v, col(batch, "head_dim_qk", 128))
    partials = FA3_PARTIAL_BYTES * splits * a["b"] * a["heads"] * a["q"] * d_v
    past = np.maximum(a["b"] - fig.sm_count, 0.0)
    stream = partials / (prm["eff_memory"] * fig.hbm_bytes_per_s)
    combine_s = np.maximum(
        combine_s, stream + FA3_COMBINE_SEQ_S * past * REFERENCE_CLOCK_HZ / fig.clock_hz
    )
    return _further_kernel_s(batch, fig, prm, pack) * kernels + np.where(always, combine_s, 0.0)


def fa3_dynamic_split(batch: KernelBatch) -> np.ndarray:
    """Where a decode call runs FlashAttention-3's dynamic-split path, its combine kernel
    whatever the splits (:data:`ALWAYS_COMBINE_DECODE`'s ``combine_kernel`` rows, up to
    :data:`FA3_DYNAMIC_SPLIT_MAX_BATCH` sequences)."""
    b = attention_shape(batch)["b"]
    return (col(batch, "combine_kernel", 0) > 0) & (b <= FA3_DYNAMIC_SPLIT_MAX_BATCH)


def _local_window_s(batch: KernelBatch, prm: dict[str, float], share: np.ndarray) -> np.ndarray:
    """Seconds a decode of a local (sliding-window) kernel adds (``local_window``, vLLM's
    FlashAttention-3 on Hopper past its window: :data:`LOCAL_WINDOW_DECODE`): ``local_unit_s``
    a unit an SM runs in turn."""
    return col(batch, "local_window", 0) * prm["local_unit_s"] * np.maximum(share, 1.0)


def _trtllm_own_decode(batch: KernelBatch, fig: DeviceFigures, pack: np.ndarray) -> np.ndarray:
    """Rows of TensorRT-LLM's own XQA / MMHA decode kernels (``head_pack`` over 0, no variant,
    not the TensorRT-LLM-gen kernel of data-centre Blackwell)."""
    return (pack > 0) & (not batch.variant) & (not _trtllm_gen_decode(batch, fig))


def _narrow_head_call(batch: KernelBatch, fig: DeviceFigures, pack: np.ndarray) -> np.ndarray:
    """Rows of TensorRT-LLM's own bf16-cache decode kernels (MMHA or mma.sync XQA; not
    data-centre Blackwell's TensorRT-LLM-gen kernel) at a head dim of :data:`NARROW_HEAD_DIMS`."""
    if batch.dtype.startswith("fp8"):
        return np.zeros(len(batch), dtype=bool)
    narrow = np.isin(col(batch, "head_dim_qk", 128), NARROW_HEAD_DIMS)
    return narrow & _trtllm_own_decode(batch, fig, pack)


def mmha_narrow_block(heads_units: np.ndarray, fig: DeviceFigures) -> np.ndarray:
    """Per row: whether TensorRT-LLM's MMHA call over ``heads_units`` units (batch x query
    heads) launches a block of :data:`MMHA_NARROW_FACTORS` (the caller keeps its MMHA rows)."""
    factor = np.clip(np.floor(MMHA_BLOCK_SLOTS * fig.sm_count / np.maximum(heads_units, 1.0)), 1, 4)
    return np.isin(factor, MMHA_NARROW_FACTORS)


def xqa_dispatched(batch: KernelBatch, fig: DeviceFigures) -> np.ndarray:
    """Per row of a decode batch: whether TensorRT-LLM would run its grouped XQA kernel by
    its block count (:data:`XQA_MIN_BLOCK_FACTOR`); True for every other kernel."""
    a = attention_shape(batch)
    pack = col(batch, "head_pack", XQA_HEAD_PACK)
    blocks = a["b"] * a["n_kv"] * np.maximum(1.0, np.floor(a["kv"] / XQA_HISTORY_TOKENS))
    enough = blocks * XQA_MIN_BLOCK_FACTOR >= fig.sm_count
    return ~_trtllm_own_decode(batch, fig, pack) | enough


def _decode_calls_s(
    batch: KernelBatch,
    fig: DeviceFigures,
    prm: dict[str, float],
    pack: np.ndarray,
    splits: np.ndarray,
    sm90: np.ndarray,
    grouped: np.ndarray,
    hd: np.ndarray,
) -> np.ndarray:
    """The seconds a decode call spends beside its kernel's walk (:func:`decode_terms`): the
    further kernels of its call, the query's conversion, head dim 192's side call, the MMHA
    call's own cost and the in-kernel merge of key splits."""
    gen = _trtllm_gen_decode(batch, fig)
    xqa_fp8 = sm90 & (pack > 0) & (not gen)
    # (the mma.sync XQA merges them in the kernel too: XQA_MERGES_IN_KERNEL)
    mma_sync_xqa = grouped & ~sm90 & _trtllm_own_decode(batch, fig, pack)
    merges = xqa_fp8 | (XQA_MERGES_IN_KERNEL & mma_sync_xqa)
    extra = _call_kernels_s(batch, fig, prm, pack, splits, xqa_fp8, merges)
    extra = extra + query_convert_s(batch, fig, prm)
    extra = extra + hd192_side_call_s(batch)
    # TensorRT-LLM's MMHA call (MHA, or grouped queries it does not run as XQA) takes
    # ``mmha_s`` more than its XQA call
    mmha = ~grouped & _trtllm_own_decode(batch, fig, pack)
    extra = extra + np.where(mmha, prm["mmha_s"], 0.0)
    # its own bf16 decode at head dims 64 and 192 takes ``narrow_head_s`` less a call
    narrow = _narrow_head_call(batch, fig, pack)
    extra = extra - np.where(narrow, prm.get("narrow_head_s", 0.0), 0.0)
    # Hopper's fp8 XQA kernel, the mma.sync XQA (XQA_MERGES_IN_KERNEL) and Blackwell's (an
    # fp8 cache) merge a unit's key splits themselves, no reduction kernel: the last part of a
    # unit to finish reads every part's partial result in turn, on one SM after the walk,
    # ``merge_s`` a part at every head dim (inferred, not recalled of the source: its threads
    # span a part's head dim at once, a wait a part, not a stream of its elements). The
    # tables: at one or two sequences of one KV head (2-16 query heads) the rows at head dims
    # 64-256 take within 1.17x of each other at one cache length (medians; H100 4,095-32,767
    # cached keys, 10.5-21.6 us; B200 to 65,535, 11.2-27.5 us), where a merge in proportion to
    # the head dim gave 256 four times 64's wait (docs/time-model.md, "The fp8 decode's
    # in-kernel merge waits a part")
    merged = np.where((merges | (sm90 & gen)) & (splits > 1), splits, 0.0)
    extra = extra + prm["merge_s"] * merged
    # FlashAttention-3's decode call waits ``fa3_hd_wait_s`` more for each 128 of head dim past
    # 128 (less below it), at its built head dim (64, 96, 128, 192, 256; 80 runs 96's): the
    # one CTA of a call of few units loads its query, its first K/V stage and stores its output
    # at one SM's draw, bytes in proportion to the head dim (:func:`fa3_hd_wait_s`)
    extra = extra + fa3_hd_wait_s(batch, fig, prm, pack)
    # Hopper's fp8 XQA waits ``spill_s`` more a call whose cache outgrows the L2 (_spill_share)
    return extra + np.where(xqa_fp8, prm.get("spill_s", 0.0) * _spill_share(batch, fig), 0.0)


def fa3_hd_wait_s(
    batch: KernelBatch, fig: DeviceFigures, prm: dict[str, float], pack: np.ndarray
) -> np.ndarray:
    """Seconds FlashAttention-3's decode or prompt call (:func:`_fa3_packing_decode`: the
    packing kernel of no variant on Hopper) waits beyond the class's fixed cost by its head dim:
    ``fa3_hd_wait_s x (head dim - 128) / 128``, 0 at 128 (where the fixed cost was fitted) and
    elsewhere (0 where a class has no fit of it; MLA's prompt kind takes none). Read
    from vLLM's and SGLang's H100 rows at their floor (up to 64 cached keys and 32 units, no
    window): vLLM's bf16 10.5 / 11.8 / 12.2 / 12.5 us at head dims 64 / 128 / 192 / 256, fp8
    11.2 / 13.3 / 13.8 / 15.8, where the model's fixed cost had 11.2-11.6 (bf16) at every head
    dim (docs/time-model.md, "FlashAttention-3's decode call waits by its head dim"). The head
    dim is the one the kernel is built for (:data:`FLASH_HEAD_DIMS`: 80 runs the 96 build,
    112 the 128 one, so never a negative wait past 64's); above 256, which no build serves and
    no table times, it is held at 256 rather than extrapolated."""
    wait = prm.get("fa3_hd_wait_s", 0.0)
    if wait == 0.0 or batch.kind not in ("attention_decode", "attention_prefill"):
        return np.zeros(len(batch))
    hd = col(batch, "head_dim_qk", 128)
    sizes = np.asarray(FLASH_HEAD_DIMS)
    built = sizes[np.minimum(np.searchsorted(sizes, hd), len(sizes) - 1)]
    return np.where(_fa3_packing_decode(batch, fig, pack), wait * (built - 128.0) / 128.0, 0.0)


def _spill_share(batch: KernelBatch, fig: DeviceFigures) -> np.ndarray:
    """Share of Hopper's fp8 XQA's ``spill_s`` wait a decode call pays: none while the bytes
    it reads fit in :data:`XQA_SPILL_FROM` of the L2, all of it from twice that, linear
    between."""
    return np.clip(batch.bytes / (XQA_SPILL_FROM * fig.l2_bytes) - 1.0, 0.0, 1.0)


def decode_terms(
    batch: KernelBatch, fig: DeviceFigures, prm: dict[str, float]
) -> dict[str, np.ndarray]:
    """``attention_decode``: paged GQA/MHA/MQA decode (XQA for grouped queries, MMHA per head),
    after the RoPE + cache-append pre-kernel, with a reduction kernel when the keys split."""
    a = attention_shape(batch)
    b, q, n_kv, heads = a["b"], a["q"], a["n_kv"], a["heads"]
    group, kv_eff = a["group"], a["kv_eff"]
    hd = col(batch, "head_dim_qk", 128)
    # grouped-query kernels give one unit to a KV head and all its query heads, up to
    # ``head_pack`` of them (TensorRT-LLM's XQA: 32, the default; beyond them the query heads
    # run one unit each, the MMHA kernel); FlashAttention-3, FlashInfer and the Triton decode
    # kernels pack every query head of a KV head into the unit's rows (``head_pack`` 0); MHA
    # one unit per head
    pack = col(batch, "head_pack", XQA_HEAD_PACK)
    within = (pack <= 0) | (group <= pack)
    grouped = (group > 1) & within
    sm90 = batch.dtype.startswith("fp8") & grouped & fig.sm90_or_later  # CC >= 9.0 (Hopper on)
    # TensorRT-LLM runs its bf16 grouped decode as MMHA, a unit a query head, where XQA would
    # have too few blocks (xqa_dispatched; Hopper's fp8 XQA runs at every shape): those rows
    # take the units beyond ``head_pack`` take (_mmha_fallback_s)
    within = within & (sm90 | xqa_dispatched(batch, fig))
    grouped = (group > 1) & within
    heads_units = np.where(grouped, b * n_kv, b * heads)
    # multi-block mode: while the units leave the SMs' resident slots idle, each unit's keys
    # are split into parts of at least DECODE_SPLIT_KEYS keys; a reduction kernel merges them
    # (Hopper's fp8-cache XQA kernel, ``sm90``: an fp8 cache on compute capability 9.0 and
    # later, splits the keys of the window; MMHA and the other XQA kernels the whole cache,
    # their splits before the window finding no keys; the packing kernels, ``head_pack`` 0,
    # find the window's key blocks first and split those: FlashAttention-3's windowed decode
    # takes as long at 131,072 cached keys as at 128)
    window_split = sm90 | (pack <= 0)
    sms = fig.sm_count
    splits = _decode_unit_splits(batch, fig, a, heads_units, window_split, grouped, sm90, pack)
    units = heads_units * splits
    # each part walks its 64-token cache blocks in turn; a block's work (its dot products and
    # softmax rescaling over the head dimension) grows with the head dim. A grouped unit
    # multiplies its query rows against each whole block in tensor-core row tiles: more rows
    # per KV head than a tile walk each block twice. MMHA walks the keys one by one (a key to
    # a thread group), its walk the keys' share of a block.
    # The kernels are built for power-of-two head sizes: a head dim of 192 runs padded to 256.
    # Row tiles: 16 query rows for the mma.sync XQA kernel, 8 for Hopper's, whose warp-group
    # MMA takes the query heads as its N dimension (multiples of 8)
    hd = 2.0 ** np.ceil(np.log2(np.maximum(hd, 1.0)))
    row_tile = np.where(sm90, 8.0, 16.0)
    # (FlashAttention-3's decode on Hopper: 64-row tiles, FA3_DECODE_ROW_TILE)
    fa3 = _fa3_packing_decode(batch, fig, pack)
    row_tile = np.where(fa3, FA3_DECODE_ROW_TILE, row_tile)
    rows = np.where(grouped, group * q, 1.0)
    # the keys a part walks: its share of the window (Hopper's fp8 XQA, the packing kernels,
    # or no window); where the splits partition the whole cache, the window's keys fall in the
    # last parts, each holding at most ``kv / splits`` of them, so a longer cache never
    # shortens the walk
    partitioned = ~window_split & (kv_eff < a["kv"])
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
    unit_blocks = walked * (hd / 128.0) * _walk_tiles(batch, fig, grouped, rows, row_tile, pack)
    # per-unit work (loading the queries, the final softmax normalisation and output write):
    # a grouped (XQA) unit's fixed part is ``grouped_unit`` MMHA heads; each query head it
    # carries adds ``qhead_unit`` per 128 of head dim; Hopper's warp-group MMA computes its
    # query heads in whole multiples of 8 (its N dimension), padded ones included
    qrows = np.where(sm90, np.ceil(rows / 8.0) * 8.0, rows)
    # (SGLang's Blackwell decode: a unit alone, or from 128 units another kernel, _wide_group)
    unit_rows, alone = _wide_group(batch, rows, qrows, grouped, heads_units)
    unit_cost = _unit_cost(batch, prm, grouped, unit_rows, hd)
    # the per-unit work is issue throughput the units resident on an SM share: it costs
    # units / SMs of it (one unit alone on an SM takes no more than its latency, which the
    # fixed cost holds); the walk of a unit's blocks is a chain of dependent loads, at least
    # one unit's walk
    share = units / sms
    # the packing kernels' work in the time of the device's SM (_tensor_work_scale)
    # (TensorRT-LLM's own decode: at the rate of Hopper's XQA MMA, _xqa_work_scale)
    walk = (pack <= 0) | (batch.variant in TENSOR_WALK_VARIANTS)
    tensor = np.where(walk, _tensor_work_scale(batch, fig), _xqa_work_scale(batch, fig))
    # (the walk of TensorRT-LLM's own decode on Blackwell at the SM's tensor width for either
    # cache: _xqa_walk_scale)
    walk_scale = np.where(walk, tensor, _xqa_walk_scale(batch, fig))
    nbytes = (batch.bytes + _upcast_stream_bytes(batch, fig, a)) * _gather_bytes(batch, fig)
    # a warm replay on one cache (``warm_l2``, ``cache_bytes``: SGLang's and vLLM's decode
    # rows, mapping.WARM_CACHE_ENGINES) finds it in the L2 while it fits in the share of the L2
    # a kernel's operands keep (the GEMM's and quantize kernels' rule): those bytes come at
    # ``l2_speedup`` times the rate of the HBM's (a served step's cache is not warm)
    nbytes = nbytes - _resident_cache(batch, fig, prm, nbytes) * (1.0 - 1.0 / prm["l2_speedup"])
    # beyond ``head_pack`` query heads a KV head, a unit a query head re-reads the cache from
    # the L2 (its bytes once) in clocks (_mmha_fallback_s) in place of the fitted work
    fallback = (group > 1) & ~within
    # SGLang's TensorRT-LLM-gen decode: a unit alone on an SM still takes its own per-unit
    # work (UNIT_LATENCY_DECODE, ``unit_latency``; ``alone`` above); elsewhere units share it
    # as throughput
    unit_blocks = np.where(fallback, 0.0, unit_blocks)
    unit_cost = np.where(fallback, 0.0, unit_cost)
    # (every part pays its per-unit work, a part holding no key ``empty_part`` of it; only the
    # parts holding keys walk their blocks, stream the cache and keep tensor cores busy)
    paid = (busy + prm.get("empty_part", 1.0) * (units - busy)) / sms
    out = attention_time(
        batch,
        fig,
        prm,
        units=busy,
        unit_blocks=unit_blocks * np.maximum(busy / sms, 1.0) * walk_scale,
        unit_cost=unit_cost * np.where(alone, np.maximum(share, 1.0), paid) * tensor,
        local=_local_window_s(batch, prm, share),
        serial=np.ones(len(batch)),
        flops=_padded_flops(batch, fig, grouped, rows),
        nbytes=nbytes,
    )
    elements = b * heads * kv_eff * hd * 2.0
    out["compute_s"] = out["compute_s"] + _decode_kernel_paths_s(
        batch, fig, prm, elements, hd, sm90, fallback, busy, heads_units, pack, share
    )
    out["extra_s"] = out["extra_s"] + _decode_calls_s(
        batch, fig, prm, pack, splits, sm90, grouped, hd
    )
    out["extra_s"] = out["extra_s"] + sequence_pass_s(batch, fig)
    # resident units: a grouped (XQA) unit holds one 64-token K and V stage of the cache
    # (64 x head dim x 2 x element bytes) and its query rows' partial output on the SM
    # (DECODE_ROW_BYTES per query row and head-dim element), so the shared memory of an SM
    # (228 KB on compute capability 9.0, 164 KB on 8.0) holds a few of them; a unit beyond
    # them (every part, holding keys or not, takes a slot) waits for one, and every further
    # wave of resident units pays a unit's latency, ``wave_s`` per 8 query rows and 1024 of
    # head dim (its row tiles' work)
    resident = np.maximum(np.floor(smem_per_sm(fig) / _decode_unit_bytes(batch, hd, qrows)), 1.0)
    waves = np.ceil(units / (sms * resident))
    out["compute_s"] = out["compute_s"] + np.where(
        grouped, prm["wave_s"] * tensor * qrows * hd / 1024.0 * np.maximum(waves - 1.0, 0.0), 0.0
    )
    # TensorRT-LLM's MMHA call: the call's own latency hides ``mmha_hidden_s`` of its SM work,
    # and where its launcher sizes the thread block at 256 or 768 threads a unit's latency of
    # ``mmha_block_s`` hides the rest up to it (MMHA_BLOCK_SLOTS, mmha_narrow_block)
    own = _trtllm_own_decode(batch, fig, pack)
    latency = np.where(mmha_narrow_block(heads_units, fig), prm.get("mmha_block_s", 0.0), 0.0)
    net = np.maximum(out["compute_s"] - prm.get("mmha_hidden_s", 0.0), latency)
    out["compute_s"] = np.where(~grouped & own, net, out["compute_s"])
    # (TensorRT-LLM's MMHA and mma.sync XQA overlap their stream more, the more units an SM
    # runs in turn: turn_overlap)
    out["overlap_p"] = turn_overlap(batch, prm, own & ~sm90, share)
    return out


def _unit_cost(
    batch: KernelBatch,
    prm: dict[str, float],
    grouped: np.ndarray,
    unit_rows: np.ndarray,
    hd: np.ndarray,
) -> np.ndarray:
    """A decode unit's per-unit work in units of ``seq_s``: a grouped unit's fixed part is
    ``grouped_unit`` (an MHA unit's 1), ``unit_hd`` of it growing with the head dim (its K/V
    tile's and output's width; 0 where no fit saw it), and each query row it counts adds
    ``qhead_unit`` per 128 of head dim. SGLang's Blackwell decode (``unit_latency``) runs an
    MHA head as a unit of one query row of the same kernel (:func:`_wide_group` pads its rows
    to :data:`UNIT_LATENCY_TILE_ROWS`): its MHA rows take the time of 2-8 query heads a KV
    head (bf16, head dim 128, 8,192 units over up to 16 keys: 94.6 us at 1 and 94.4-94.8 at
    2-8). ``unit_hd`` is taken at most 1 (its fit's bound), so the factor, ``1 - unit_hd +
    unit_hd x hd / 128``, stays above 0 at a head dim of 64 or 32 whatever a profile holds."""
    packed = grouped | _row_tiled(batch)
    fixed = np.where(packed, prm["grouped_unit"], 1.0)
    share = min(max(prm.get("unit_hd", 0.0), 0.0), 1.0)
    widened = 1.0 + share * (hd / 128.0 - 1.0)
    return fixed * widened + prm["qhead_unit"] * unit_rows * hd / 128


def _wide_group(
    batch: KernelBatch,
    rows: np.ndarray,
    qrows: np.ndarray,
    grouped: np.ndarray,
    heads_units: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """The query rows a decode unit's per-unit work counts and whether a unit takes it alone
    (``unit_latency``: :data:`UNIT_LATENCY_DECODE`): SGLang's Blackwell decode over more than
    :data:`WIDE_GROUP_HEADS` query heads a KV head from :data:`WIDE_GROUP_UNITS` units runs
    another kernel, its rows in tiles of :data:`WIDE_GROUP_TILE_ROWS` of
    :data:`WIDE_GROUP_TILE_COST_ROWS` rows' work each, shared over the SMs."""
    alone = col(batch, "unit_latency", 0) > 0
    wide = alone & grouped & (rows > WIDE_GROUP_HEADS) & (heads_units >= WIDE_GROUP_UNITS)
    tiled = np.ceil(rows / WIDE_GROUP_TILE_ROWS) * WIDE_GROUP_TILE_COST_ROWS
    padded = np.where(_row_tiled(batch), _unit_latency_rows(np.where(grouped, rows, 1.0)), qrows)
    return np.where(wide, tiled, padded), alone & ~wide


#: SGLang's Blackwell decode (``unit_latency``) counts a unit's query rows in a power-of-two
#: tile of at least this many rows: its rows of many units over up to 16 cached keys take one
#: time at 1-8 query heads a KV head (MHA too), another at 12 and 16, another at 24 and 32
#: (bf16, head dim 128, 8,192 units: 94.4-94.8 / 114.5-115.5 / 185.1-187.1 us; head dim 256:
#: 146.0-148.3 / 203.0-203.2 / 254.0-261.0 us). Read from the tables, not from the kernel's
#: source (docs/time-model.md, "SGLang's Blackwell decode unit by head dim and row tile")
UNIT_LATENCY_TILE_ROWS = 8.0

#: Engines whose Blackwell decode (TensorRT-LLM-gen through FlashInfer) takes those row tiles
#: and MHA units without SGLang's ``unit_latency`` (``row_tile`` 1): vLLM's B200 rows over up
#: to 16 keys at 8,192 units take 82.8-83.3 / 101.6-103.1 us at 1-8 query heads a KV head
#: (head dim 64 / 128), 91.2-92.2 / 121.7-123.4 at 10-16
ROW_TILE_DECODE = frozenset({("vllm", "tcgen05")})


def _row_tiled(batch: KernelBatch) -> np.ndarray:
    """Decode rows whose units count their query rows in :data:`UNIT_LATENCY_TILE_ROWS` tiles."""
    return (col(batch, "unit_latency", 0) > 0) | (col(batch, "row_tile", 0) > 0)


def _unit_latency_rows(rows: np.ndarray) -> np.ndarray:
    """A unit's query rows in :data:`UNIT_LATENCY_TILE_ROWS`-or-wider power-of-two tiles."""
    least = np.maximum(rows, UNIT_LATENCY_TILE_ROWS)
    return 2.0 ** np.ceil(np.log2(least))


def _decode_unit_splits(
    batch: KernelBatch,
    fig: DeviceFigures,
    a: dict[str, np.ndarray],
    heads_units: np.ndarray,
    window_split: np.ndarray,
    grouped: np.ndarray,
    sm90: np.ndarray,
    pack: np.ndarray,
) -> np.ndarray:
    """The parts :func:`decode_terms` splits each unit's keys into: the multi-block count over
    the window's keys (``window_split``) or the whole cache's (:func:`decode_splits`; SGLang's
    Triton decode its own count, :func:`triton_kv_splits`), TensorRT-LLM's mma.sync XQA its own
    count over the whole cache (:func:`xqa_splits`; Hopper's fp8 XQA keeps the model's: its
    count tried, not kept), its MMHA units (a query head each) up to one part an SM over them."""
    sms = fig.sm_count
    split_keys = np.where(window_split, a["kv_eff"], a["kv"])
    splits = decode_splits(
        batch,
        heads_units,
        split_keys,
        sms * DECODE_SPLIT_UNITS_PER_SM,
        _split_part_keys(batch, fig),
    )
    splits = np.minimum(splits, _max_splits(batch))
    if batch.variant in TRITON_SPLIT_VARIANTS:  # SGLang's Triton decode: its own count
        splits = triton_kv_splits(batch, fig, a, split_keys)
    xqa = grouped & _trtllm_own_decode(batch, fig, pack) & ~sm90
    splits = np.where(xqa, xqa_splits(a["kv"], heads_units, fig), splits)
    mmha_cap = np.maximum(1.0, np.ceil(sms * MMHA_SPLIT_UNITS_PER_SM / heads_units))
    mmha_units = ~grouped & _trtllm_own_decode(batch, fig, pack)
    return np.where(mmha_units, np.minimum(splits, mmha_cap), splits)


#: Most p of the p-norm an MMHA / mma.sync XQA decode's overlap grows to
#: (:func:`turn_overlap`): the bound of the fitted ``overlap``.
TURN_OVERLAP_MAX = 16.0


def turn_overlap(
    batch: KernelBatch, prm: dict[str, float], mma_sync: np.ndarray, share
) -> np.ndarray:
    """p of the p-norm of a decode call's compute and memory: the class's ``overlap``, but for
    TensorRT-LLM's MMHA and mma.sync XQA units (``mma_sync``: its own decode kernels but
    Hopper's fp8 XQA, whose producer warps load the cache beside the MMAs, and Blackwell's
    TensorRT-LLM-gen kernel) ``turn_overlap x turns ** overlap_turns``, ``turns`` the units an
    SM runs in turn (``share``, at least 1), at most :data:`TURN_OVERLAP_MAX`: a unit of these
    kernels issues its loads and its math from the same warps, so alone on an SM it waits on
    its blocks; with more units an SM works through, another's loads are in flight while one
    computes. A class without ``turn_overlap`` (below 1) keeps ``overlap`` everywhere."""
    base = np.full(len(batch), prm["overlap"])
    if prm.get("turn_overlap", 0.0) < 1.0:
        return base
    turns = np.maximum(np.asarray(share, dtype=np.float64), 1.0)
    grown = prm["turn_overlap"] * turns ** prm.get("overlap_turns", 0.0)
    return np.where(mma_sync, np.minimum(grown, TURN_OVERLAP_MAX), base)


def _decode_kernel_paths_s(
    batch: KernelBatch,
    fig: DeviceFigures,
    prm: dict[str, float],
    elements: np.ndarray,
    hd: np.ndarray,
    sm90: np.ndarray,
    fallback: np.ndarray,
    busy: np.ndarray,
    heads_units: np.ndarray,
    pack: np.ndarray,
    share: np.ndarray,
) -> np.ndarray:
    """The compute seconds a decode call's kernel path adds to the tiled work of
    :func:`decode_terms`: MMHA's fp8 dequantisation, the MMHA fallback of a grouped call and
    FlashAttention-3's fp8 first-V wait and its work a sequence (``seq_unit``)."""
    # MMHA reads an fp8 cache and converts every element on the CUDA cores before its FP32
    # dot products (Hopper's fp8 XQA multiplies fp8 on the tensor cores): ``dequant_s`` of an
    # SM per element, spread over the SMs its parts holding keys keep busy
    mmha_fp8 = batch.dtype.startswith("fp8") & ~sm90 & ~fallback
    out = np.where(mmha_fp8, elements * prm["dequant_s"] / np.minimum(busy, fig.sm_count), 0.0)
    out = out + np.where(fallback, _mmha_fallback_s(heads_units, elements, busy, fig), 0.0)
    # FlashAttention-3's fp8 decode on Hopper waits on its first V block's transpose, once
    # a unit, the units an SM runs in turn (:data:`FA3_FP8_FIRST_V_CLOCKS`)
    out = out + np.where(
        _fa3_fp8_decode(batch, fig) & (pack <= 0),
        FA3_FP8_FIRST_V_CLOCKS * 64.0 * hd * np.maximum(share, 1.0) / fig.clock_hz,
        0.0,
    )
    # FlashAttention-3's decode pays work a sequence besides its units': ``seq_unit`` of a
    # unit's (``seq_s``), throughput the SMs share as they share the units'. Read from SGLang's
    # H100 rows over up to 127 cached keys past one wave: at one key, head dim 128, one query
    # head a KV head and 2,048 units, 2,048 sequences x 1 KV head take 69.9 us and 32 x 64
    # 47.4 us; a least-squares fit of time on units and sequences by head dim and grouping
    # gives 9-12 ns a sequence (bf16 and fp8 alike) beside 19-23 ns a unit at head dim 128
    # (docs/time-model.md, "FlashAttention-3's decode pays work a sequence")
    seqs = attention_shape(batch)["b"] / fig.sm_count
    per_seq = prm.get("seq_unit", 0.0) * prm["seq_s"] * _tensor_work_scale(batch, fig) * seqs
    return out + np.where(_fa3_packing_decode(batch, fig, pack), per_seq, 0.0)
