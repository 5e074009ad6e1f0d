"""DeepSeek sparse attention (DSA: DeepSeek-V3.2, GLM-5): the sparse MLA kernel each engine runs
on each kernel generation, and what it walks.

One rule, shared by the measured module tables' mapping (:mod:`mlacalc.measured.mapping`,
which kernel a ``dsa_{context,generation}_module_perf`` row timed) and a served model step
(:func:`engine_dsa_kernel`, applied by :func:`mlacalc.timemodel.kernel_time.engine_batch` on
every path that times a step: ``predict_time``, ``plan``, ``search``). Where a rule of
:data:`SPARSE_WALK` holds, the kernel walks every one of a query's ``index_topk`` slots whatever
the cache holds (the slots past the cache padded), :data:`WALK_HEADS` query heads a pass (fewer
heads padded to it, 128 heads two passes), each pass gathering its query's slots as the cache
stores them; elsewhere it attends the ``min(keys, index_topk)`` keys the indexer picked, at the
heads it has. The evidence of each rule is beside it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from mlacalc.timemodel.device import DeviceFigures, mla_decode_kernel
from mlacalc.timemodel.mla_time import GEN_SPARSE_VARIANT, GEN_SPARSE_WIDE_VARIANT, WALK_VARIANT
from mlacalc.timemodel.shared import col
from mlacalc.words.dtypes import KV_LAYOUTS
from mlacalc.words.kernels import KernelBatch

__all__ = [
    "DECODE_SPARSE_VARIANT",
    "DENSE_PROMPT",
    "DSA_DECODE_CHAIN",
    "DSA_DECODE_PRE_KERNELS",
    "EVERY_SLOT_PROMPT",
    "FLASHINFER_WIDE_PICKS",
    "FLASHINFER_WIDE_TOKENS",
    "FP8_SPARSE_PROMPT",
    "KV_CACHE_WALK",
    "ONE_SPARSE_KERNEL",
    "SPARSE_WALK",
    "WALK_HEADS",
    "absorbed_prompt_core",
    "causal_picks",
    "dsa_decode_chain",
    "dsa_decode_pre_kernels",
    "engine_dsa_kernel",
    "gen_sparse_variant",
    "kv_cache_walk",
    "sparse_small_units",
    "sparse_unit_heads",
    "walk_heads",
    "walked_core",
    "walked_row_bytes",
]

#: Query heads one pass of a walking sparse MLA kernel takes (a Hopper warp group's 64 rows).
WALK_HEADS = 64

#: The sparse MLA kernels that walk every top-k slot of a query, ``WALK_HEADS`` heads a pass:
#: ``(kernel generation, engine, phase, KV cache dtype, most heads)``, the phase ``context``,
#: ``decode`` or ``any``, the dtype ``""`` for any cache (the module tables' figures:
#: docs/time-model.md, "Host floor of a module launched eagerly").
#:
#: - TensorRT-LLM on Hopper, both phases: its H100 prompt rows time the same per token at any
#:   prompt length (8 heads, 256 sequences: 1.42-1.43 us a token from 16 to 512 tokens a
#:   sequence, where a query's keys grow 32-fold) and head count up to 64 (1.35 us a token at
#:   1 head, 1.79 at 64 with the projections), twice that at 128 (3.4 us): one 64-head pass
#:   over 2,048 slots a query, two at 128; its decode rows alike (1.5 us a sequence at any
#:   cached length under 512, heads up to 64; 3.0 at 128). Predicted as FlashMLA's 64-head
#:   passes the per-token figures were 3.3x too fast (the slots' bytes read once); with each
#:   pass's gather read as a decode kernel reads its cache, 6-16% too fast.
#: - vLLM's H100 prompt rows with an fp8 cache and at most 16 heads: 0.94-1.00 us a token at
#:   every prompt length (bf16 cache, or 32 heads and more: 0.23-0.65, growing with the keys).
#: - vLLM's H100 decode rows with an fp8 cache (FlashMLA's fp8 sparse decode kernel): with the
#:   other kernels' predictions taken out, the attention takes the same time at 2 cached keys
#:   as at 2,048 (1,024 sequences, 128 heads: 1.94-1.97 ms from 2 to 2,048 keys; 1,024 keys,
#:   1,024 sequences: 1.11-1.18 ms at 1 to 64 heads, 1.97 at 128), where a bf16 cache's rows
#:   grow with the keys (0.59 -> 1.55 ms).
#: - SGLang's H100 rows with an fp8 cache (``kernel_source`` ``..._flashmla_kv``: FlashMLA's
#:   fp8 sparse decode kernel, prompt and decode alike; :data:`KV_CACHE_WALK`): its decode rows
#:   take the same time from 1 to 128 cached keys (256 sequences, 16 heads: 298-306 us, where
#:   the bf16 cache's FlashAttention-3 path takes 139-156), 0.9 us more a sequence than that
#:   path from 128 to 256 sequences; its prompt rows 0.70-0.78 us a token at 8-64 heads.
#:
#: SGLang otherwise (its bf16 cache; every device) and every engine on Blackwell walk the slots
#: the keys fill, at their heads (B200's rows grow with the keys at every head count).
SPARSE_WALK = (
    ("sm90", "trtllm", "any", "", 128),
    ("sm90", "vllm", "context", "fp8", 16),
    ("sm90", "vllm", "decode", "fp8", 128),
    ("sm90", "sglang", "any", "fp8", 128),
)

#: ``(engine, kernel generation)`` whose walk over an fp8 cache is FlashMLA's fp8 sparse decode
#: kernel timed by that kernel's own class: ``mla_decode`` ``fp8`` ``sparse``, fitted on
#: DeepSeek-V4's FlashMLA sparse cores (vLLM's ``dsv4_hca_attn_module_perf``, which SGLang's fit
#: takes in too), the cache's fp8 rows gathered (:func:`walked_row_bytes`), a few queries' slots
#: split over the SMs as FlashMLA's decode kernels split them (the decode kernel's
#: ``kv_split``), in both phases. SGLang's H100 ``..._flashmla_kv`` rows name that kernel and
#: follow that class: its decode rows at 16 heads 2-7% off from 1 to 256 sequences (they were
#: 2% over to 59% short as the plain class over the keys they hold; walking on one SM a query,
#: 25-88% over at 1-16 sequences), its prompt rows -20% / -30% at the median (indexer /
#: skip-indexer paths) -> -3% / -7%. vLLM's H100 fp8 rows are not so timed: under that class
#: they come out 19-32% short (decode, 0.25-0.3 us a sequence more than SGLang's rows of the
#: same shape) and 11-14% (prompt), where the prompt's walking kernel (bf16 products by the plain
#: class, no split) leaves them 8-10% and 7-9% short; part of what vLLM's rows add is outside the
#: attention (its bf16 cache's rows, which do not walk, are 10-15% short too), and what it is
#: these tables do not say.
KV_CACHE_WALK = frozenset({("sglang", "sm90")})

#: A walking kernel is one kernel in both phases: a query (a prompt token, or a decode step's
#: token) over its 2,048 slots, the prompt's sparse kernel (variant ``sparse``, bf16 products,
#: no key split on Hopper), but where :data:`KV_CACHE_WALK` times it by its own class. vLLM's
#: fp8 cache runs FlashMLA's fp8 sparse decode kernel for every query, prompt or decode (from
#: recall: vLLM's FLASHMLA_SPARSE backend sends an ``fp8_ds_mla``
#: cache's prompt and decode tokens alike to ``flash_mla_with_kvcache`` with their indices),
#: and its H100 rows time it alike: 0.94-1.00 us a prompt token at up to 16 heads, projections
#: included; a decode row 1.03-1.16 us more a sequence at 1 to 16 heads (the slope over 128 to
#: 1,024 sequences at up to 1,024 cached keys, projections included). Its decode rows were
#: timed before as the plain decode class's key-splitting kernel (``WALK_DECODE_KERNEL``), which
#: gave the walk 0.52 us a sequence: those rows -18% to -20% at the median (-8% to -10% as the
#: prompt's kernel, with :func:`walked_row_bytes`).

#: Engines whose decode runs the prompt's sparse kernel where no walk rule holds: a decode
#: step's query is one more query of the absorbed sparse kernel over the slots its keys fill
#: (:func:`absorbed_prompt_core` with one new token; bf16 products, FlashInfer's 64-head
#: unit or FlashMLA's MMA rows, the prompt's key split), not the plain MLA decode class
#: (fitted on the engine's dense MLA decode). vLLM: from recall, its FLASHMLA_SPARSE backend
#: with a bf16 cache sends prompt and decode tokens alike to ``flash_mla_sparse_prefill``, and
#: its FLASHINFER_MLA_SPARSE backend every token to TensorRT-LLM-gen's sparse MLA, the kernels
#: its prompt rows are mapped to. Its decode module rows so mapped (``bench_timemodel.py
#: --engines --engine vllm``, median / p90 |error|): H100 11.9% / 22.1% (14.2% / 25.3% as the
#: plain class; its bf16 cache's rows -13.2% -> -5.3% signed, better at every head count and
#: batch; its fp8 cache walks), B200 19.7% / 36.4% (21.9% / 37.9%); each from the other
#: device's fit 10.9% (14.1%) and 23.2% (25.4%). What B200's rows still lack is outside the
#: attention (docs/time-model.md, "Host floor of a module launched eagerly").
ONE_SPARSE_KERNEL = frozenset({"vllm"})

#: ``(engine, kernel generation)`` whose DSA decode core, where it runs the plain latent decode
#: class (no walk, not :data:`ONE_SPARSE_KERNEL`: TensorRT-LLM-gen's MLA decode kernel that
#: SGLang's ``trtllm_mla`` backend calls on Blackwell), runs between the absorption BMMs as
#: the dense core does and takes less than its stand-alone-fitted class by the dense chain's
#: saving (``absorbed_chain``, :data:`~mlacalc.timemodel.mla_time.CHAIN_SAVING_S`: two kernel
#: boundaries of 2 us each on Blackwell). Evidence, SGLang's B200 ``dsa_generation_module_perf``
#: rows (``bench_timemodel.py --engines --engine sglang --only dsa_generation``, fitted,
#: median / p90 |error|): 8.2% / 22.3% -> 7.4% / 18.4%, signed +1.8% -> -1.8%; its graphed rows
#: (up to 512 sequences) read 5-17 us over at 8 and 16 heads and up to 64 sequences, where the
#: module's kernels, the attention call's 10-13 us among them, are each a stand-alone table's
#: time. TensorRT-LLM's B200 rows of the same kernel do not read it (5.5% / 17.8% -> 6.1% /
#: 15.4%, signed +0.4% -> -1.7%: its bf16-GEMM rows -4.9% -> -7.6%), so it is SGLang's alone
#: (why the two engines' modules differ there the tables do not say); see docs/time-model.md
#: ("The absorbed decode chain on Blackwell").
DSA_DECODE_CHAIN = frozenset({("sglang", "tcgen05")})

#: ``(engine, kernel generation)`` -> the kernels before a DSA decode call's attention (RoPE and
#: the latent row's cache write, with an fp8 cache the query's quantization) by the cache's
#: dtype, where the engine's count is not the MLA decode class's default (one, and one more
#: for an fp8 cache's q: TensorRT-LLM's ``mla_rope_generation`` and its q quantization).
#: SGLang on Blackwell, from recall: with an fp8 cache it runs RoPE, the q quantization and
#: the latent write as one FlashInfer kernel (``mla_rope_quantize_fp8``) before
#: TensorRT-LLM-gen's MLA kernel; with a bf16 cache the RoPE, the concatenation of the query's
#: latent and RoPE parts and the cache write (``set_kv_buffer``) are three kernels. Evidence,
#: SGLang's B200 ``dsa_generation_module_perf`` rows, the bf16 cache's time less the fp8
#: cache's at the same shape (median over cached lengths, 1 to 64 sequences): 4-13 us at
#: every head count (8 heads: 4.3 us at one sequence, 6.5-9.7 at 2-64; the indexer path
#: 8.0-10.7), even at one cached key, where the classes gave 0.5-1.6 us (the fp8 cache's one
#: more kernel against its fewer bytes); TensorRT-LLM's own B200 rows of the same kernel
#: differ by -2 to +3 us up to 64 sequences, as the classes give. A served step times RoPE
#: and the append as kernels of its own (``rope_kernel`` 0), so this is the module rows'
#: alone.
DSA_DECODE_PRE_KERNELS = {("sglang", "tcgen05"): {"fp8": 1.0, "bf16": 3.0}}


def dsa_decode_pre_kernels(engine: str, generation: str, fp8: np.ndarray) -> np.ndarray:
    """Per row the kernels before ``engine``'s DSA decode attention on a ``generation``
    device (:data:`DSA_DECODE_PRE_KERNELS`), ``fp8`` the rows with an fp8 cache; 0 where the
    class's default count holds."""
    own = DSA_DECODE_PRE_KERNELS.get((engine, generation))
    if own is None:
        return np.zeros(np.shape(fp8))
    return np.where(fp8, own["fp8"], own["bf16"])


def dsa_decode_chain(engine: str, generation: str) -> bool:
    """Whether ``engine``'s DSA decode core on a ``generation`` device, run by the plain latent
    decode class, takes the absorbed chain's saving (:data:`DSA_DECODE_CHAIN`)."""
    return (engine, generation) in DSA_DECODE_CHAIN


#: ``(engine, kernel generation)`` whose sparse prompt kernel reads an fp8 cache as it stores
#: it and multiplies fp8 (``mla_decode`` ``fp8`` ``sparse``; bf16 elsewhere): TensorRT-LLM's
#: B200 prompt rows with an fp8 cache take 0.65-0.67 of the bf16 cache's time a token at every
#: head count from 8 to 128 (8,192 tokens and more, no cache, the row less its other kernels'
#: predictions: 194 / 293 ns a token at 8 heads, 353 / 526 at 128), where the bf16 kernel over
#: the fp8 rows predicted one time for both.
FP8_SPARSE_PROMPT = frozenset({("trtllm", "tcgen05")})

#: Engines whose prompt runs the dense MHA of the expanded heads while a sequence's keys are at
#: most ``index_topk`` (every key is picked, so there is nothing to skip): SGLang's module rows
#: up to 2,048 keys name FlashAttention-3 (H100) or TensorRT-LLM's ragged kernel (B200), its
#: rows past them the sparse kernels. Every other prompt the walk rule leaves alone runs the
#: absorbed sparse kernel over the slots its keys fill (:func:`absorbed_prompt_core`).
DENSE_PROMPT = frozenset({"sglang"})


#: The class variant of a decode step's query under :data:`ONE_SPARSE_KERNEL` (vLLM), FlashMLA's
#: sparse class whichever sparse kernel runs it: vLLM's FlashInfer decode rows (B200) taken by
#: TensorRT-LLM-gen's sparse class fitted on its prompt rows' residuals
#: (``GEN_SPARSE_VARIANT``) read 75% off at the median (its prompt and decode rows fitted
#: together, the prompt rows 9.7% and the decode rows' p90 15.6% -> 17.5%), where FlashMLA's
#: class (a stand-in from SGLang's fit) times them 6.3%: the one kernel (from recall) is not
#: one class's time in both phases, and the decode rows keep the class they had.
DECODE_SPARSE_VARIANT = "sparse"

#: Prompt tokens in one call from which vLLM's FlashInfer sparse MLA (``FLASHINFER_MLA_SPARSE``,
#: TensorRT-LLM-gen's kernel under FlashInfer's wrapper) runs another path, 2^16: its B200
#: prompt module rows, the batch doubled at one prompt length, double their time from
#: 12,288-24,576 to 24,576-49,152 tokens (1,428 pairs, 1.81-2.14x, median 1.98x, every head
#: count, cache and model) and take a median 1.45x from 32,768-49,152 to 65,536-98,304 (1,092
#: pairs, 88% under 1.75x; a bf16 cache at 8 and 16 heads 0.8-1.2x), where FlashMLA's rows of
#: the same shapes double (median 1.99x, 467 of 468 over 1.75x) and TensorRT-LLM's own B200
#: rows of the kernel show no step. The
#: table holds no row between 49,152 and 65,536 tokens; why the path changes there is not in
#: the tables (2^16 is a CUDA grid dimension's limit past 65,535: a guess, not checked).
FLASHINFER_WIDE_TOKENS = 65536

#: Key slots a prompt token's query attends on vLLM's FlashInfer sparse path past
#: :data:`FLASHINFER_WIDE_TOKENS` (:func:`absorbed_prompt_core`'s ``wide``), whatever its causal
#: picks: there a token's core takes the same time at every prompt length. Evidence, vLLM's B200
#: ``dsa_context_module_perf`` FlashInfer rows, each less its other kernels' predictions, ns a
#: token at 65,536 and 131,072 tokens: 8 heads, bf16 cache 113-131 from 256 to 16,384 tokens a
#: sequence (a token's mean picks 128 -> 2,048), fp8 cache 145-164 (16 heads 207-226, 32 heads
#: 277-349, 128 heads 256-289), where under the switch the same rows grow 3.2x with the prompt
#: (8 heads, bf16, 32,768 tokens: 160 ns at 128 tokens a sequence, 515 at 32,768) and a token's
#: wide time is below the narrow path's at its fewest picks (160 ns at 64). So the wide path's
#: time does not follow the picks; which work it does per token the tables do not say (a guess:
#: the top-k indices past 2^16 rows are not the ones the narrow path reads). The class
#: (``sparse_gen_wide``) is fitted on those rows with each token at this many slots.
FLASHINFER_WIDE_PICKS = 1


#: Kernel generations on which a DSA module's or a served step's FlashMLA sparse prompt core
#: (variant ``sparse``) multiplies every one of a token's top-k slots and gathers the ones its
#: keys fill (:func:`absorbed_prompt_core`'s ``every_slot``), the form the class is fitted in on
#: ``glm5_dsa_attn_module_perf``. Evidence, SGLang's B200 FlashMLA prompt module rows (GLM-5.2,
#: bf16 cache, no floor), the core a token (the row less its other kernels), ns at 8 / 64 heads:
#: 382 / 466 at 128 keys, 404 / 492 at 1,024, 416-460 / 524-578 past 2,048, where the form over
#: the filled slots alone gave 169 at 128 keys and 499 past 2,048 (those rows 33-50% short at
#: 128-512 keys). Not on Hopper: vLLM's H100 module rows, whose sparse class is fitted on their
#: own residuals, go 5.0% / 13.2% -> 6.2% / 39.5% under it, refitted 11.4% / 30.7% -> 11.9% /
#: 44.1% on the class's rows (docs/time-model.md, "FlashMLA's Blackwell sparse prompt
#: multiplies every slot in the module rows too").
EVERY_SLOT_PROMPT = {"tcgen05": True}


def gen_sparse_variant(engine: str, kernel_source: Any, tokens: Any) -> np.ndarray:
    """Per call the class variant of TensorRT-LLM-gen's sparse MLA kernel: vLLM's FlashInfer
    path at :data:`FLASHINFER_WIDE_TOKENS` prompt tokens and more its own
    (:data:`~mlacalc.timemodel.mla_time.GEN_SPARSE_WIDE_VARIANT`), every other call
    :data:`~mlacalc.timemodel.mla_time.GEN_SPARSE_VARIANT`. ``tokens``: the call's query
    tokens (a decode call's are its sequences, far fewer)."""
    src = np.char.upper(np.asarray(kernel_source, dtype=str))
    tokens = np.asarray(tokens, dtype=np.float64)
    wide = (engine == "vllm") & (np.char.find(src, "FLASHINFER") >= 0)
    wide = wide & (tokens >= FLASHINFER_WIDE_TOKENS)
    return np.where(wide, GEN_SPARSE_WIDE_VARIANT, GEN_SPARSE_VARIANT)


def sparse_unit_heads(engine: str, kernel_source: Any = "") -> np.ndarray:
    """Query heads a unit of the sparse MLA kernel carries where it is TensorRT-LLM-gen's
    (TensorRT-LLM's own; vLLM's FlashInfer backend, ``kernel_source`` ``FLASHINFER...``, which
    calls it): 64, or the MMA's rows where they are more (128 on Blackwell, one unit at 128
    heads: :func:`mlacalc.timemodel.mla_time.mla_tile_rows`); 0 where it is FlashMLA's
    (SGLang, vLLM's FLASHMLA_SPARSE), whose unit is the tensor core's MMA rows, 128 on Blackwell
    (:func:`mlacalc.timemodel.mla_time.mla_tile_rows`). The B200 prompt rows at 4,096 tokens
    and more, a token with its projections: TensorRT-LLM 405 -> 611 ns from 64 to 128 heads
    (the core alone, the row less its other kernels, 1.17-1.36x),
    vLLM's FlashInfer path 350 / 405 / 564 ns at 8 / 16 / 32 heads (each head count its own
    work), where FlashMLA's take 816 and 912 ns at 64 and 128 heads under SGLang (one
    128-row unit)."""
    src = np.char.upper(np.asarray(kernel_source, dtype=str))
    gen = (np.char.find(src, "FLASHINFER") >= 0) | (engine == "trtllm")
    return np.where(gen, float(WALK_HEADS), 0.0)


def sparse_small_units(engine: str, kernel_source: Any = "") -> np.ndarray:
    """Per call 1 where TensorRT-LLM-gen's sparse MLA runs 16-row units up to 32 query rows
    (:func:`mlacalc.timemodel.mla_time.mla_unit_rows`, the plain kernel's rule): vLLM's
    FlashInfer backend (``kernel_source`` ``FLASHINFER...``); 0 elsewhere (TensorRT-LLM's own
    B200 prompt rows take no more a token at 32 heads than at 16 or 64)."""
    src = np.char.upper(np.asarray(kernel_source, dtype=str))
    return np.where((engine == "vllm") & (np.char.find(src, "FLASHINFER") >= 0), 1.0, 0.0)


def walk_heads(
    engine: str, generation: str, context: bool, fp8_cache: Any, heads: Any
) -> np.ndarray:
    """Per row the heads a pass of the sparse MLA kernel takes where it walks every top-k slot
    (:data:`SPARSE_WALK`: :data:`WALK_HEADS`), 0 where it walks the slots the keys fill at the
    row's heads. ``fp8_cache``: per row whether the cache is fp8; ``heads``: the query heads
    the kernel is asked to run (a rank's, under tensor parallelism)."""
    heads = np.asarray(heads, dtype=np.float64)
    fp8 = np.broadcast_to(np.asarray(fp8_cache, dtype=bool), heads.shape)
    out = np.zeros(heads.shape)
    phase = "context" if context else "decode"
    for gen, eng, when, dtype, most in SPARSE_WALK:
        if (gen, eng) != (generation, engine) or when not in ("any", phase):
            continue
        hit = (heads <= most) & (fp8 if dtype == "fp8" else True)
        out[hit] = WALK_HEADS
    return out


def kv_cache_walk(engine: str, generation: str, fp8_cache: Any) -> np.ndarray:
    """Per row whether a walk is FlashMLA's fp8 sparse decode kernel timed by its own class
    (:data:`KV_CACHE_WALK`: the cache's fp8 dtype, the decode kernel's key split)."""
    fp8 = np.asarray(fp8_cache, dtype=bool)
    return fp8 & ((engine, generation) in KV_CACHE_WALK)


def walked_row_bytes(latent_qk: Any, latent_v: Any, kv_bytes: Any) -> np.ndarray:
    """Bytes a walking kernel gathers for one slot: the latent row as its cache stores it. An
    fp8 cache (``kv_bytes`` 1) is FlashMLA's sparse fp8 layout (``fp8_ds_mla``,
    :data:`mlacalc.words.dtypes.KV_LAYOUTS`): the ``latent_v`` values in fp8 with a float32
    scale per 128, the RoPE part (``latent_qk - latent_v``) in bf16, 656 bytes for
    DeepSeek-V3.2's 512 + 64 (576 counted as fp8 before); any other cache ``latent_qk`` values
    of ``kv_bytes``. The walking kernels are FlashMLA's family on Hopper: vLLM's fp8 cache is
    that layout (from recall, as its ``fp8_ds_mla`` names it); TensorRT-LLM's H100 tables hold
    only a bf16 cache, and its fp8 one is taken to be the same layout."""
    lqk, lv = np.asarray(latent_qk, np.float64), np.asarray(latent_v, np.float64)
    kvb = np.asarray(kv_bytes, np.float64)
    ds = KV_LAYOUTS["fp8_ds_mla"]
    fp8 = lv * ds.bits / 8 + np.ceil(lv / ds.scale_group) * ds.scale_bytes
    fp8 = fp8 + (lqk - lv) * ds.rope_bits / 8
    return np.where(kvb <= 1.0, fp8, lqk * kvb)


def walked_core(
    tokens: Any, heads: Any, topk: Any, latent_qk: Any, latent_v: Any, kv_bytes: Any, walk: Any
) -> dict[str, np.ndarray]:
    """The walking kernel's work for ``tokens`` queries of ``heads`` heads (``walk`` > 0 on
    every row): its heads padded to whole passes of ``walk``, every one of the ``topk`` slots
    a key (``kv_len``), the FLOPs of the padded heads' score and value products over them, and
    its bytes: the bf16 query of the padded heads, each pass's gather of its query's ``topk``
    latent rows as the cache stores them (:func:`walked_row_bytes`: a decode kernel's read of
    its cache, once a pass), the bf16 output."""
    tokens, heads = np.asarray(tokens, np.float64), np.asarray(heads, np.float64)
    walk = np.maximum(np.asarray(walk, np.float64), 1.0)
    passes = np.ceil(heads / walk)
    hk = passes * walk
    kv = np.maximum(np.asarray(topk, np.float64), 1.0)
    gather = tokens * kv * passes  # latent rows read, one gather a pass
    row = walked_row_bytes(latent_qk, latent_v, kv_bytes)
    nbytes = tokens * hk * latent_qk * 2.0 + gather * row
    return {
        "kv_len": kv * np.ones_like(tokens),
        "n_heads": hk,
        "flops": 2.0 * hk * tokens * kv * (latent_qk + latent_v),
        "bytes": nbytes + tokens * hk * latent_v * 2.0,
    }


def causal_picks(new: Any, keys: Any, topk: Any) -> np.ndarray:
    """Keys a prompt token's query attends on average: ``new`` tokens whose sequence ends at
    ``keys`` keys, the token at key position ``p`` (1-based) picking ``min(p, topk)`` (every key
    of its causal prefix while it has at most ``topk``)."""
    new, keys = np.asarray(new, np.float64), np.asarray(keys, np.float64)
    top = np.maximum(np.asarray(topk, np.float64), 1.0)
    step = keys - new
    under = np.clip(top - step, 0.0, new)  # the tokens with at most top-k keys
    first = step + 1.0
    total = under * (first + step + under) / 2.0 + (new - under) * top
    return np.where(new > 0, total / np.maximum(new, 1.0), np.minimum(keys, top))


def absorbed_prompt_core(
    seqs: Any,
    new: Any,
    keys: Any,
    heads: Any,
    topk: Any,
    latent_qk: Any,
    latent_v: Any,
    elem_bytes: Any,
    causal: Any = False,
    wide: Any = False,
    every_slot: Any = False,
) -> dict[str, np.ndarray]:
    """The absorbed sparse prompt kernel's work where it walks the slots the keys fill:
    ``seqs`` sequences of ``new`` tokens with ``keys`` keys each (the new ones included), every
    token one query of ``heads`` heads over ``min(keys, topk)`` latent rows (``kv_len``); FLOPs
    of the score and value products over them; bytes: the query and the sequence's latent rows
    the queries pick among (each read once, at most its keys) in ``elem_bytes``, the bf16
    output. ``wide``: vLLM's FlashInfer path past :data:`FLASHINFER_WIDE_TOKENS`, each token at
    :data:`FLASHINFER_WIDE_PICKS` slots whatever its picks. ``every_slot``: FlashMLA's sparse
    prompt kernel, which multiplies every one of a token's ``topk`` slots (``kv_len``, the
    FLOPs) and gathers the ones its keys fill (``filled_keys``: a token's mean causal picks; 0
    elsewhere), as ``glm5_dsa_attn_module_perf``'s rows are mapped (docs/time-model.md,
    "FlashMLA's sparse prompt kernel gathers the filled slots"). The module tables' prompt
    rows are mapped with it (:mod:`mlacalc.measured.mapping`)."""
    seqs, new, keys = (np.asarray(a, np.float64) for a in (seqs, new, keys))
    heads = np.asarray(heads, np.float64)
    tokens = seqs * new
    top = np.maximum(np.asarray(topk, np.float64), 1.0)
    top = np.where(wide, np.minimum(top, FLASHINFER_WIDE_PICKS), top)
    kv = np.minimum(keys, top)
    rows = seqs * np.minimum(keys, kv * new)  # a sequence's tokens pick among its rows
    kv = np.where(causal, causal_picks(new, keys, top), kv)
    filled = np.where(every_slot, causal_picks(new, keys, top), 0.0)
    kv = np.where(every_slot, top, kv)
    return {
        "kv_len": kv,
        "filled_keys": filled,
        "flops": 2.0 * heads * tokens * kv * (latent_qk + latent_v),
        "bytes": (tokens * heads + rows) * latent_qk * elem_bytes + tokens * heads * latent_v * 2.0,
    }


def _absorbed_prompt(
    batch: KernelBatch, engine: str, fig: DeviceFigures, kvb: np.ndarray, heads: np.ndarray
) -> KernelBatch:
    """A prompt's DSA core the walk rule leaves alone, as the engine runs it past
    :data:`DENSE_PROMPT`'s dense path: the absorbed sparse kernel (``mla_decode``, a token one
    query, variant ``sparse``, bf16 query and latent rows) over the slots its keys fill, at its
    heads, the key split of the module tables' prompt rows (none on Hopper, one elsewhere).
    SGLang on Blackwell with an fp8 cache runs TensorRT-LLM-gen's MLA decode kernel instead,
    in the cache's dtype (its module rows' ``..._trtllm`` source: the plain class); vLLM on
    Blackwell FlashInfer's sparse kernel, whose unit is 64 heads (:func:`sparse_unit_heads`),
    with an fp8 cache or at most 16 heads (the backend its B200 rows name there; FlashMLA's at
    32 heads and more with a bf16 cache)."""
    blackwell = fig.kernel_generation == "tcgen05"
    fp8 = bool(kvb[0] <= 1.0)
    gen = engine == "sglang" and blackwell and fp8
    f8 = fp8 and (engine, fig.kernel_generation) in FP8_SPARSE_PROMPT
    flashinfer = engine == "vllm" and blackwell and (fp8 or heads[0] <= 16)
    source = "FLASHINFER_MLA_SPARSE" if flashinfer else ""
    eb = kvb if gen or f8 else np.full(len(batch), 2.0)
    lqk, lv = col(batch, "latent_qk", 576), col(batch, "latent_v", 512)
    b, q, keys = col(batch, "batch", 1), col(batch, "q_len", 1), col(batch, "kv_len", 1)
    unit = float(sparse_unit_heads(engine, source))
    small = float(sparse_small_units(engine, source))
    window = col(batch, "window", 0)
    variant = "" if gen else _absorbed_variant(batch, engine, source, b * q, unit)
    wide = variant == GEN_SPARSE_WIDE_VARIANT
    # FlashMLA's sparse prompt on Blackwell (variant ``sparse``; a decode query keeps the slots
    # it fills): :data:`EVERY_SLOT_PROMPT`
    flashmla = EVERY_SLOT_PROMPT.get(fig.kernel_generation, False)
    flashmla = flashmla and not gen and unit <= 0 and batch.kind == "mla_prefill"
    core = absorbed_prompt_core(b, q, keys, heads, window, lqk, lv, eb, unit > 0, wide, flashmla)
    n, ones = len(batch), np.ones(len(batch))
    shape = dict(batch.shape)
    shape.update(
        batch=b * q, q_len=ones, kv_len=core["kv_len"], n_heads=heads, n_kv=ones,
        head_dim_qk=lqk, head_dim_v=lv, window=np.zeros(n), causal=ones, kv_bytes=eb,
        preprocess_bytes=np.zeros(n), rope_elements=np.zeros(n), page_size=np.full(n, 64.0),
        operand_reads=ones, kv_split=np.full(n, 1.0 if blackwell else 0.0),
        unit_heads=np.full(n, unit), small_units=np.full(n, small),
        filled_keys=core["filled_keys"],
    )  # fmt: skip
    return dataclasses.replace(
        batch,
        kind="mla_decode",
        dtype="fp8" if gen or f8 else "bf16",
        flops=core["flops"],
        bytes=core["bytes"],
        shape=shape,
        variant=variant,
    )


def _absorbed_variant(
    batch: KernelBatch, engine: str, source: str, tokens: np.ndarray, unit: float
) -> str:
    """The class variant of :func:`_absorbed_prompt`'s kernel: FlashMLA's ``sparse`` (and every
    decode query's, :data:`DECODE_SPARSE_VARIANT`), TensorRT-LLM-gen's prompt its own
    (:func:`_gen_variant`)."""
    if unit <= 0 or batch.kind != "mla_prefill":
        return "sparse" if unit <= 0 else DECODE_SPARSE_VARIANT
    return _gen_variant(engine, source, tokens)


def _gen_variant(engine: str, source: str, tokens: np.ndarray) -> str:
    """One batch's TensorRT-LLM-gen sparse variant (:func:`gen_sparse_variant`): a batch is one
    variant, so a served prompt batch of calls that straddle the switch takes the one most of
    its tokens run (a step's batch holds one call)."""
    v = gen_sparse_variant(engine, source, tokens)
    wide = float(np.sum(np.where(v == GEN_SPARSE_WIDE_VARIANT, tokens, 0.0)))
    return GEN_SPARSE_WIDE_VARIANT if wide > float(np.sum(tokens)) / 2.0 else GEN_SPARSE_VARIANT


def engine_dsa_kernel(batch: KernelBatch, engine: str, fig: DeviceFigures) -> KernelBatch:
    """A model step's DSA core (variant ``dsa``, shape ``dsa_kv_bytes``: the cache's bytes an
    element, set by :mod:`mlacalc.cost.model_step`; a batch of its own) as ``engine`` runs it
    on ``fig``, by the rule the module tables' mapping reads them with (:func:`walk_heads`).
    Where the kernel walks every slot, the core becomes that kernel: a decode core
    (``mla_decode``) keeps its sequences and query tokens over ``index_topk`` slots at the
    padded heads; a prompt core (``mla_prefill`` of the expanded heads, as the step counts a
    prompt) runs as the engines' absorbed sparse prompt kernel: each token one query
    (``mla_decode``, ``q_len`` 1) of the padded heads over the latent rows (the step's
    ``kv_b_proj`` of the new tokens stands for the absorbed BMMs: the same FLOPs). The kernel
    is the prompt's sparse one in both phases (variant ``sparse``, bf16 products, a query's
    walk on one SM: no key split on Hopper; :data:`SPARSE_WALK`'s note on the phases). FLOPs
    and bytes are :func:`walked_core`'s; FlashMLA's fp8 sparse decode kernel, splitting the
    keys, where :data:`KV_CACHE_WALK` times it by its own class. SGLang's dense prompt (every
    row's keys at most ``index_topk``) comes before any walk, as its rows show. A batch is
    one model's core: its rows walk together (the rule of its first walking row applies to
    every row). Where no rule holds, a decode core is the plain class's kernel (variant ``""``)
    as it is, but under :data:`ONE_SPARSE_KERNEL` the prompt's absorbed sparse kernel
    (:func:`_absorbed_prompt`, its token one query); a prompt core the dense MHA it counts
    under :data:`DENSE_PROMPT` where every row's keys are at most ``index_topk``, else the
    absorbed sparse kernel over the slots its keys fill (:func:`_absorbed_prompt`), as the
    module tables' prompt rows run it: whatever the order of its rows (a prompt's chunks are
    one batch: a 32K prompt in chunks of 2,048 runs every chunk sparse, its first one too, not
    every chunk dense)."""
    s = batch.shape
    if batch.variant != "dsa":
        return batch
    context = batch.kind == "mla_prefill"
    kvb = col(batch, "dsa_kv_bytes", 2)
    heads = col(batch, "n_heads", 1)
    topk, keys = col(batch, "window", 0), col(batch, "kv_len", 1)
    # dense only where every row's keys are picked whole: a prompt's chunks are one batch,
    # and past top-k its later chunks run the sparse kernel (the first chunk with them)
    dense = context and engine in DENSE_PROMPT and bool((keys <= topk).all())
    walk = walk_heads(engine, fig.kernel_generation, context, kvb <= 1.0, heads)
    if dense or not (walk > 0).any():  # the dense MHA, or the slots its keys fill
        if not dense and (context or engine in ONE_SPARSE_KERNEL):
            return _absorbed_prompt(batch, engine, fig, kvb, heads)
        if not context and dsa_decode_chain(engine, fig.kernel_generation):
            # between the absorption BMMs, as the module rows run it (DSA_DECODE_CHAIN)
            shape = dict(s)
            shape["absorbed_chain"] = np.ones(len(batch))
            return dataclasses.replace(batch, variant="", shape=shape)
        return dataclasses.replace(batch, variant="")
    walk = np.full(len(batch), walk[walk > 0][0])
    lqk, lv = col(batch, "latent_qk", 576), col(batch, "latent_v", 512)
    b, q = col(batch, "batch", 1), col(batch, "q_len", 1)
    tokens = b * q
    core = walked_core(tokens, heads, topk, lqk, lv, kvb, walk)  # gathered as stored
    own = bool(kv_cache_walk(engine, fig.kernel_generation, kvb[:1] <= 1.0)[0])
    shape = dict(s)
    shape.update(
        kv_len=core["kv_len"], n_heads=core["n_heads"], n_kv=np.ones(len(batch)),
        head_dim_qk=lqk, head_dim_v=lv, window=np.zeros(len(batch)),
    )  # fmt: skip
    if context:
        shape.update(
            batch=tokens, q_len=np.ones(len(batch)), causal=np.ones(len(batch)),
            kv_bytes=kvb if own else np.full(len(batch), 2.0),
            preprocess_bytes=np.zeros(len(batch)), rope_elements=np.zeros(len(batch)),
            page_size=np.full(len(batch), 64.0), operand_reads=np.ones(len(batch)),
        )  # fmt: skip
    else:
        shape["kv_bytes"] = kvb
    # a query's walk on one SM (Hopper's rule), or FlashMLA's fp8 decode kernel's key split
    split = mla_decode_kernel(fig)["kv_split"] if own else 0.0
    shape["kv_split"] = np.full(len(batch), split)
    # the sparse kernel's unit: the engine's own, or the MMA's rows
    shape["unit_heads"] = np.full(len(batch), float(sparse_unit_heads(engine)))
    return dataclasses.replace(
        batch,
        kind="mla_decode",
        dtype="fp8" if own else "bf16",
        flops=core["flops"],
        bytes=core["bytes"],
        shape=shape,
        variant="sparse" if own else WALK_VARIANT,
    )
