"""The host floor of a module timed as the engine launches it, eagerly.

Some measured module tables time one call of a module's Python forward as the engine runs it
outside a CUDA graph: the host dispatches every op (argument checks, allocation, the launch) while
the GPU works through its queue, and the call costs the larger of the two totals
(:func:`mlacalc.timemodel.eager_time.dispatch_queue`). Where the module's kernels are short the
host's dispatch of the module is the time: DeepSeek-V3.2's sparse-attention module at one
sequence of a few tokens takes 0.30 ms under TensorRT-LLM, 0.79-0.97 ms under SGLang, 1.4 ms
under vLLM on H100 at any cached length, against about 64 us of weight reads.

The dispatch time of a module is the engine's, not the row's shape: the ops its forward runs and
each op's host cost. Which ops run is what the row's labels name: the attention path
(``kernel_source``), the GEMM dtype (an fp8 block GEMM dispatches its input's quantization and
DeepGEMM's launch: SGLang's H100 dense prompt path at four tokens 0.52 ms with bf16 GEMMs, 0.85
with fp8 block ones, at every head count and model) and the cache dtype (an fp8 cache's
quantizing write: 0.64 and 0.97 ms). A decode module the collector ran under a CUDA graph has
no dispatch but past the graph's largest batch, where it ran eagerly (:data:`GRAPH_MAX_BATCH`:
its rows a group of their own, :func:`floor_sources`). :data:`HOST_FLOOR_S` holds it per device,
engine, table and those three labels, each the median measured time of that group's rows of the
fewest tokens
(:func:`mlacalc.measured.host_floors.fit_host_floors` refits them; docs/measured-sets.md gives
the rows, medians and residuals). A row's prediction is then
``max(kernels, floor)``: the form the rows follow where the kernels pass the floor (see
docs/time-model.md, "host floor").

The floor is the host's work, not the GPU's: where both devices ran a group its floors agree
within 16%, five of the six within 8% (SGLang's sparse prompt module 1.079 / 1.095 ms on H100 /
B200, its skip-indexer one 0.361 / 0.359, vLLM's FlashMLA one 1.306 / 1.214; with fp8 block
GEMMs 1.509 / 1.741). A device predicted from a fit that never saw
it (leave one device out) therefore takes the fitted device's floors, never its own
(``floors_of``): the group's own where that device ran it, else the median of that device's
floors of the same module structure (:func:`floor_structure`: the attention library's wrapper
aside) and the same GEMM and cache dtypes, else those of the GEMM dtype that stands in for one
that device cannot run (:data:`GEMM_FLOOR_STAND_IN`), else none.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "EAGER",
    "GEMM_FLOOR_STAND_IN",
    "GRAPH_MAX_BATCH",
    "HOST_FLOOR_S",
    "LONG",
    "LONG_CACHE_TOKENS",
    "LONG_SEQUENCE_S",
    "MODEL_FLOOR_GROUPS",
    "SEQUENCE_DOUBLING_S",
    "WIDE_BATCH_S",
    "WIDE_BATCH_SEQUENCES",
    "call_seconds",
    "floor_sources",
    "floor_structure",
    "floors_measured",
    "graphed",
    "host_floor_seconds",
]

_CTX, _GEN = "dsa_context_module_perf", "dsa_generation_module_perf"
_H100, _B200 = "h100_sxm", "b200_sxm"
_BF16, _FP8B, _FP8, _NVFP4 = "bfloat16", "fp8_block", "fp8", "nvfp4"
_SG = "sglang_dsa_"

#: ``(system, engine) ->`` the most sequences a decode module table's collector ran under a CUDA
#: graph; a generation row of more ran eagerly, its module under the host's dispatch as a prompt
#: row's is. Read from the rows, where the time steps up to a flat 0.3-1.5 ms: SGLang's H100
#: decode module takes 0.08-0.53 ms at 1 to 256 sequences and 1.29-1.89 ms at 512 and 1,024
#: (kernels 0.17-0.79 ms there), its B200 module 0.07-0.27 ms up to 512 and 1.31-1.34 ms at
#: 1,024 (fp8 block GEMMs, 16-128 heads, DeepSeek-V3.2). SGLang's default graph size grows
#: with the GPU's memory (from recall: ``--cuda-graph-max-bs``), which 256 on H100 and 512 on
#: B200 agree with. The eager floors are near SGLang's eager prompt floors of the same path
#: (H100 FlashMLA with an fp8 cache, fp8 block GEMMs: 1.46 ms decode, 1.56 ms prompt).
GRAPH_MAX_BATCH: dict[tuple[str, str], int] = {(_H100, "sglang"): 256, (_B200, "sglang"): 512}

#: The suffix :func:`floor_sources` gives a row's ``kernel_source`` where it ran eagerly past
#: :data:`GRAPH_MAX_BATCH`: its floor is a group of its own in :data:`HOST_FLOOR_S`.
EAGER = "+eager"

#: ``engine ->`` the most cached tokens a prompt row of its eagerly launched DSA module
#: (``dsa_context_module_perf``) can hold before the host dispatches more: a row of more is its
#: path's long-context group (:data:`LONG` appended, :func:`floor_sources`), a floor of its own.
#: Read from the rows: every SGLang prompt path, on both devices, at both GEMM dtypes, takes a
#: flat 0.30-1.56 ms at up to 65,536 cached tokens and 0.43-0.52 ms more from 131,072 on (no
#: row lies between): B200 skip-indexer TensorRT-LLM-gen path, bf16 GEMMs, 0.30 -> 0.74 ms, its
#: indexer path 1.06 -> 1.49 ms; H100 skip-indexer FlashMLA 0.35 -> 0.81 ms, its indexer path
#: 1.08 -> 1.56 ms; flat again from 131,072 to 1,048,572 cached tokens and from 4 to 512 new
#: ones, so a fixed cost, not the GPU's work on the keys. The host's: SGLang's decode rows of
#: the same cached lengths, replayed from a CUDA graph, show no step (their median errors at
#: 65,536 and 131,072 cached tokens within 4 points of each other). Which op it is the tables
#: do not say. The threshold is where the rows jump and nothing more: no row lies between
#: 65,536 and 131,072 cached tokens, 2^16 is the last flat one, and no SGLang setting at that
#: length is known to us from recall, so a prompt of 65,537-131,071 cached tokens takes the
#: long group's floor on no row's evidence. TensorRT-LLM's and vLLM's prompt tables hold no
#: row past 128 cached tokens.
LONG_CACHE_TOKENS: dict[str, int] = {"sglang": 65_536}

#: The suffix :func:`floor_sources` gives a prompt row's ``kernel_source`` past
#: :data:`LONG_CACHE_TOKENS`: its floor is a group of its own in :data:`HOST_FLOOR_S`.
LONG = "+long"

#: ``(system, engine, table, gemm_type) -> {model: suffix}``: the models whose rows of that GEMM
#: dtype are a floor group of their own (the suffix appended to their ``kernel_source`` label,
#: :func:`floor_sources`), where the rows show a model's module dispatching more than another's
#: on the same path. vLLM's B200 DSA prompt module with fp8 block GEMMs: GLM-5's rows sit at
#: 2.06-2.27 ms, DeepSeek-V3.2's at 1.43-1.69 ms, at every head count (8-128), path (FlashInfer,
#: FlashMLA), cache dtype and sequence count up to 64 (their kernels 0.1 of the rows), where the
#: two models' floors differ by 40-110 us with bf16 or nvfp4 GEMMs, by 50-70 us on H100 with fp8
#: block GEMMs, and not at all in the decode module (its rows of one sequence 11-23 us apart).
#: About 600 us of host work that GLM-5's prompt forward dispatches with block-scaled fp8
#: projections on B200 alone; which op the tables do not say (vLLM's B200 GEMM table times its
#: DeepGEMM and CUTLASS block-scaled wrappers at 177 and 164 us a call, too near to be the
#: choice between them).
MODEL_FLOOR_GROUPS: dict[tuple[str, str, str, str], dict[str, str]] = {
    (_B200, "vllm", _CTX, _FP8B): {"zai-org/GLM-5": "+GLM-5"},
}

#: ``(system, engine) ->`` the host's time per sequence, past the first, of a prompt row past
#: :data:`LONG_CACHE_TOKENS` (seconds): such a row's floor is its long-context group's (fitted
#: on its one-sequence rows) and this for each further sequence. The rows show it on both
#: devices, in every path: at four new tokens a sequence the long rows take 30-45 us more a
#: sequence from 2 to 128 sequences (SGLang's skip-indexer paths, whose kernels are 6-10% of
#: such a row; the indexer paths the same from 8 to 32 sequences, their indexer's work on top
#: past that), flat in the cached length from 131,072 to 1,048,572 tokens, where the rows of up
#: to 65,536 cached tokens show none (within 6 us a row from 1 to 16 sequences). Each the
#: median over the long skip-indexer groups' four-token rows of 2 to 128 sequences of (time -
#: floor) / (sequences - 1) (:func:`mlacalc.measured.host_floors.fit_long_sequence_s`, which
#: says why those paths alone: 574 rows on H100, 667 on B200; pooled with the indexer paths'
#: rows it was 37.3 and 33.2 us).
LONG_SEQUENCE_S: dict[tuple[str, str], float] = {
    (_H100, "sglang"): 3.510e-05,
    (_B200, "sglang"): 3.166e-05,
}

#: ``(system, engine, table) ->`` the seconds an eagerly launched module's call takes beyond its
#: kernels for each doubling of its sequences (``log2(sequences)`` times this; nothing at one
#: sequence): a row's prediction is ``max(kernels + this, floor)`` (:func:`call_seconds`). The
#: rows show it in vLLM's DSA decode module (``dsa_generation_module_perf``): at up to 64 cached
#: tokens its time grows by 10, 15, 25 and 40 us from one sequence to 2, 4, 8 and 16, on H100 and
#: B200 alike (within 4 us), at every head count (1-128), GEMM and cache dtype, model and
#: attention backend (FlashMLA's, FlashInfer's), flat in the cached length up to 1,024 tokens,
#: where its kernels (projections, indexer, top-k, sparse MLA) grow by 2 us; past 16 sequences
#: by 5-20 us a doubling more. The same module under TensorRT-LLM (B200) and SGLang grows by
#: 7-17 us from 1 to 16 sequences, and vLLM's dense MLA decode module (46 us) not at all. Which
#: op of vLLM's eager call it is the tables do not say (none times its decode top-k or the
#: indexer's metadata alone); a cost a doubling fits every slice, a cost a sequence does not
#: (2.7 us each from the first 16 would give 170 us at 64, where the rows grow by 55 on B200).
#: Fitted by :func:`mlacalc.measured.host_floors.fit_doubling_s` (the median over the rows of two
#: sequences or more of (time - kernels) / log2(sequences), the kernels under the device's
#: shipped profile). Fitted against a device's own classes, it is that device's, and a device
#: predicted from another's fit takes none (``MappedTable.call_for``; docs/time-model.md says
#: what carrying it was tried at). H100's figure is chosen with its two sparse classes
#: (``mla_decode:bf16:sparse``, ``sparse_walk``), which are fitted on these rows' residuals
#: and had carried the growth in their call latencies (its figure 0.7 us under them): each of
#: 4, 6, 8 and 11.7 us with the two classes refitted under it, the summed median |error| of
#: H100's DSA decode and prompt module rows is 10.59, 10.18, 10.17 and 11.14 points (0 us:
#: 11.85); 6 us is taken, within 0.01 point of the least (8 us): the sum is flat from 6 to 8 us
#: and does not choose between them, and the smaller was taken. A served step (vLLM's decode
#: under its CUDA graph) takes none, as it takes no host floor.
SEQUENCE_DOUBLING_S: dict[tuple[str, str, str], float] = {
    # 11.92 -> 11.73 us refitted when the top-k's rows past an SM's L1 re-read their logits
    # and a warm call's logits came from the L2 (elementwise_time.WARM_TOPK_VARIANTS); 11.73 ->
    # 11.69 us when TensorRT-LLM-gen's sparse MLA took 128 heads in one unit on Blackwell and
    # vLLM's FlashInfer path its 16-row units up to 32 heads (mla_time.mla_tile_rows); 11.69
    # -> 11.63 us when vLLM's indexer logits class was refitted on its V4 rows of more than one
    # new token a sequence timed as one sequence (mapping._VLLM_FLAT_QUERIES); 11.63 -> 11.66 us
    # when vLLM's B200 bf16 GEMM class was refitted with its output write at a rate of its own
    # (gemm_time._streams, ``write_share``); 11.66 -> 11.22 us when vLLM's B200 block-scaled
    # projections took vLLM's DeepGEMM rate without its wrapper's floor (fit-b200-sxm-vllm's
    # gemm:fp8_block stand-in); 11.22 -> 11.61 us when vLLM's B200 nvfp4 projections took
    # SGLang's B200 fit of FlashInfer's CuTe DSL linear (fit-b200-sxm-vllm's gemm:nvfp4
    # stand-in, 50c7eb16)
    (_B200, "vllm", _GEN): 1.161e-05,
    # H100: chosen with its sparse classes refitted under it (above), not fit_doubling_s's
    # median over them (which falls as the classes give the growth back: 11.7 -> 7.6 -> 5.5 us)
    (_H100, "vllm", _GEN): 6.0e-06,
}

#: The most sequences a TensorRT-LLM DSA decode module call takes without its wide-batch stage
#: (:data:`WIDE_BATCH_S`): the rows step up between 16 and 32 sequences (no row lies between).
WIDE_BATCH_SEQUENCES = 16

#: ``(system, engine, table) ->`` the seconds a module's call takes beyond its kernels once it
#: holds more than :data:`WIDE_BATCH_SEQUENCES` sequences (:func:`call_seconds`). The rows show
#: it in TensorRT-LLM's DSA decode module (``dsa_generation_module_perf``): from 16 to 32
#: sequences its time steps up by 10.5-15.6 us on B200 and 6-10 us on H100 (median over each
#: model and GEMM dtype, up to 1,024 cached tokens) where its kernels grow by 1-2 us, and by
#: 1-3 us (B200) and 4-5 us (H100) from 8 to 16 and 4-8 us from 32 to 64; at every head count
#: (8-128), model (DeepSeek-V3.2, GLM-5), GEMM dtype (bf16, fp8 block, nvfp4) and cache dtype,
#: flat in the cached length from 2 to 8,192 tokens on B200 (9.8-12.4 us a length; 2-7 us past
#: it, where the kernels' own errors are larger than it) and to 1,024 on H100 (4.6-6.9 us).
#: SGLang's and vLLM's DSA decode rows show no such step (SGLang B200's indexer part grows by
#: 1.7 us from 16 to 32 sequences). A fixed stage, not work on the keys or the heads; which
#: op of TensorRT-LLM's call switches past 16 sequences the tables do not say (none times its
#: decode indexer's top-k or metadata alone), so a served step takes none, as it takes no
#: :data:`SEQUENCE_DOUBLING_S`. Fitted by :func:`mlacalc.measured.host_floors.fit_wide_batch_s`
#: (the median, over the rows of 32 sequences of up to 1,024 cached tokens, of their step over
#: the same shape's 16-sequence row less the kernels' step, under the device's shipped
#: profile: 10.16 us over 600 row pairs on B200 since its MLA decode class took a cost a CTA,
#: ``mla_time.TCGEN05_CTA_COST``, 10.29 before; 6.16 us over 320 on H100); a device predicted
#: from another's fit takes none (``MappedTable.call_for``).
WIDE_BATCH_S: dict[tuple[str, str, str], float] = {
    (_B200, "trtllm", _GEN): 1.016e-05,
    (_H100, "trtllm", _GEN): 6.16e-06,
}

#: (system, engine, table, kernel_source, gemm_type, kv_cache_dtype) -> the module's host
#: dispatch time, seconds: the ops the forward dispatches are the attention path's and those
#: its GEMM and cache dtypes add (fitted by mlacalc.measured.host_floors.fit_host_floors with
#: each engine's shipped profile; the groups not listed are kernel-bound at their fewest
#: tokens: no floor)
HOST_FLOOR_S: dict[tuple[str, str, str, str, str, str], float] = {
    # (TensorRT-LLM's H100 modules have none since its walking kernel's class was fitted on
    # the module rows' residuals, mla_time.WALK_VARIANT: their one-token kernels 1.07-1.16 of
    # their time; the floors were 0.24-0.28 ms)
    (_H100, "sglang", _CTX, _SG + "dense_mha_fa3", _BF16, _BF16): 0.0005171,
    (_H100, "sglang", _CTX, _SG + "dense_mha_fa3", _BF16, _FP8): 0.0006398,
    (_H100, "sglang", _CTX, _SG + "dense_mha_fa3", _FP8B, _BF16): 0.0008519,
    (_H100, "sglang", _CTX, _SG + "dense_mha_fa3", _FP8B, _FP8): 0.000974,
    (_H100, "sglang", _CTX, _SG + "indexer_flashmla_kv", _BF16, _FP8): 0.001153,
    (_H100, "sglang", _CTX, _SG + "indexer_flashmla_kv", _FP8B, _FP8): 0.001549,
    (_H100, "sglang", _CTX, _SG + "indexer_flashmla_sparse", _BF16, _BF16): 0.001072,
    (_H100, "sglang", _CTX, _SG + "indexer_flashmla_sparse", _FP8B, _BF16): 0.001476,
    (_H100, "sglang", _CTX, _SG + "skip_indexer_flashmla_kv", _BF16, _FP8): 0.0004523,
    (_H100, "sglang", _CTX, _SG + "skip_indexer_flashmla_kv", _FP8B, _FP8): 0.0006756,
    (_H100, "sglang", _CTX, _SG + "skip_indexer_flashmla_sparse", _BF16, _BF16): 0.0003445,
    (_H100, "sglang", _CTX, _SG + "skip_indexer_flashmla_sparse", _FP8B, _BF16): 0.0005948,
    (_B200, "sglang", _CTX, _SG + "dense_mha_trtllm_ragged", _BF16, _BF16): 0.0005116,
    (_B200, "sglang", _CTX, _SG + "dense_mha_trtllm_ragged", _BF16, _FP8): 0.0005403,
    (_B200, "sglang", _CTX, _SG + "dense_mha_trtllm_ragged", _FP8B, _BF16): 0.0008257,
    (_B200, "sglang", _CTX, _SG + "dense_mha_trtllm_ragged", _FP8B, _FP8): 0.0008514,
    (_B200, "sglang", _CTX, _SG + "indexer_flashmla_sparse", _BF16, _BF16): 0.001061,
    (_B200, "sglang", _CTX, _SG + "indexer_flashmla_sparse", _FP8B, _BF16): 0.001432,
    (_B200, "sglang", _CTX, _SG + "indexer_trtllm", _BF16, _FP8): 0.00104,
    (_B200, "sglang", _CTX, _SG + "indexer_trtllm", _FP8B, _FP8): 0.001401,
    (_B200, "sglang", _CTX, _SG + "skip_indexer_flashmla_sparse", _BF16, _BF16): 0.0003492,
    (_B200, "sglang", _CTX, _SG + "skip_indexer_flashmla_sparse", _FP8B, _BF16): 0.0005702,
    (_B200, "sglang", _CTX, _SG + "skip_indexer_trtllm", _BF16, _FP8): 0.0003037,
    (_B200, "sglang", _CTX, _SG + "skip_indexer_trtllm", _FP8B, _FP8): 0.0005227,
    # SGLang's prompt modules past LONG_CACHE_TOKENS cached tokens (floor_sources)
    (_H100, "sglang", _CTX, _SG + "indexer_flashmla_kv" + LONG, _BF16, _FP8): 0.0016596,
    (_H100, "sglang", _CTX, _SG + "indexer_flashmla_kv" + LONG, _FP8B, _FP8): 0.0020427,
    (_H100, "sglang", _CTX, _SG + "indexer_flashmla_sparse" + LONG, _BF16, _BF16): 0.0015667,
    (_H100, "sglang", _CTX, _SG + "indexer_flashmla_sparse" + LONG, _FP8B, _BF16): 0.0019576,
    (_H100, "sglang", _CTX, _SG + "skip_indexer_flashmla_kv" + LONG, _BF16, _FP8): 0.00096925,
    (_H100, "sglang", _CTX, _SG + "skip_indexer_flashmla_kv" + LONG, _FP8B, _FP8): 0.0011882,
    (_H100, "sglang", _CTX, _SG + "skip_indexer_flashmla_sparse" + LONG, _BF16, _BF16): 0.0008043,
    (_H100, "sglang", _CTX, _SG + "skip_indexer_flashmla_sparse" + LONG, _FP8B, _BF16): 0.0010908,
    (_B200, "sglang", _CTX, _SG + "indexer_flashmla_sparse" + LONG, _BF16, _BF16): 0.0015969,
    (_B200, "sglang", _CTX, _SG + "indexer_flashmla_sparse" + LONG, _FP8B, _BF16): 0.001868,
    (_B200, "sglang", _CTX, _SG + "indexer_trtllm" + LONG, _BF16, _FP8): 0.0015494,
    (_B200, "sglang", _CTX, _SG + "indexer_trtllm" + LONG, _FP8B, _FP8): 0.0018317,
    (_B200, "sglang", _CTX, _SG + "skip_indexer_flashmla_sparse" + LONG, _BF16, _BF16): 0.00078045,
    (_B200, "sglang", _CTX, _SG + "skip_indexer_flashmla_sparse" + LONG, _FP8B, _BF16): 0.0010272,
    (_B200, "sglang", _CTX, _SG + "skip_indexer_trtllm" + LONG, _BF16, _FP8): 0.00074425,
    (_B200, "sglang", _CTX, _SG + "skip_indexer_trtllm" + LONG, _FP8B, _FP8): 0.00098965,
    # SGLang's decode modules past their CUDA graph (GRAPH_MAX_BATCH: floor_sources), eager
    (_H100, "sglang", _GEN, _SG + "indexer_fa3" + EAGER, _BF16, _BF16): 0.0009319,
    (_H100, "sglang", _GEN, _SG + "indexer_fa3" + EAGER, _FP8B, _BF16): 0.00134,
    (_H100, "sglang", _GEN, _SG + "indexer_flashmla_kv" + EAGER, _BF16, _FP8): 0.001087,
    (_H100, "sglang", _GEN, _SG + "indexer_flashmla_kv" + EAGER, _FP8B, _FP8): 0.001462,
    (_H100, "sglang", _GEN, _SG + "skip_indexer_fa3" + EAGER, _BF16, _BF16): 0.0003123,
    (_H100, "sglang", _GEN, _SG + "skip_indexer_fa3" + EAGER, _FP8B, _BF16): 0.0005628,
    (_H100, "sglang", _GEN, _SG + "skip_indexer_flashmla_kv" + EAGER, _FP8B, _FP8): 0.0006861,
    (_B200, "sglang", _GEN, _SG + "indexer_trtllm" + EAGER, _BF16, _BF16): 0.0009507,
    (_B200, "sglang", _GEN, _SG + "indexer_trtllm" + EAGER, _BF16, _FP8): 0.0009434,
    (_B200, "sglang", _GEN, _SG + "indexer_trtllm" + EAGER, _FP8B, _BF16): 0.001312,
    (_B200, "sglang", _GEN, _SG + "indexer_trtllm" + EAGER, _FP8B, _FP8): 0.001317,
    (_B200, "sglang", _GEN, _SG + "skip_indexer_trtllm" + EAGER, _BF16, _BF16): 0.0002871,
    (_B200, "sglang", _GEN, _SG + "skip_indexer_trtllm" + EAGER, _BF16, _FP8): 0.0002719,
    (_B200, "sglang", _GEN, _SG + "skip_indexer_trtllm" + EAGER, _FP8B, _BF16): 0.0005003,
    (_B200, "sglang", _GEN, _SG + "skip_indexer_trtllm" + EAGER, _FP8B, _FP8): 0.0004745,
    (_H100, "vllm", _CTX, "FLASHMLA_SPARSE", _BF16, _BF16): 0.001306,
    (_H100, "vllm", _CTX, "FLASHMLA_SPARSE", _BF16, _FP8): 0.001343,
    (_H100, "vllm", _CTX, "FLASHMLA_SPARSE", _FP8B, _BF16): 0.001509,
    (_H100, "vllm", _CTX, "FLASHMLA_SPARSE", _FP8B, _FP8): 0.001544,
    # (vLLM's H100 decode groups of a bf16 cache have none since its sparse kernel's class was
    # fitted on the module rows' residuals: their one-token kernels 1.10-1.12 of their time)
    (_B200, "vllm", _CTX, "FLASHINFER_MLA_SPARSE", _BF16, _BF16): 0.001235,
    (_B200, "vllm", _CTX, "FLASHINFER_MLA_SPARSE", _BF16, _FP8): 0.001433,
    # fp8 block GEMMs: DeepSeek-V3.2's rows (GLM-5's a group of their own, MODEL_FLOOR_GROUPS;
    # 1.922 / 1.924 ms over both models before)
    (_B200, "vllm", _CTX, "FLASHINFER_MLA_SPARSE", _FP8B, _BF16): 0.0014955,
    (_B200, "vllm", _CTX, "FLASHINFER_MLA_SPARSE", _FP8B, _FP8): 0.001677,
    (_B200, "vllm", _CTX, "FLASHINFER_MLA_SPARSE+GLM-5", _FP8B, _BF16): 0.0022553,
    (_B200, "vllm", _CTX, "FLASHINFER_MLA_SPARSE+GLM-5", _FP8B, _FP8): 0.0023819,
    (_B200, "vllm", _CTX, "FLASHINFER_MLA_SPARSE", _NVFP4, _BF16): 0.002093,
    (_B200, "vllm", _CTX, "FLASHINFER_MLA_SPARSE", _NVFP4, _FP8): 0.002322,
    (_B200, "vllm", _CTX, "FLASHMLA_SPARSE", _BF16, _BF16): 0.001214,
    (_B200, "vllm", _CTX, "FLASHMLA_SPARSE", _FP8B, _BF16): 0.0014374,  # 1.741 ms both models
    (_B200, "vllm", _CTX, "FLASHMLA_SPARSE+GLM-5", _FP8B, _BF16): 0.002126,
    (_B200, "vllm", _CTX, "FLASHMLA_SPARSE", _NVFP4, _BF16): 0.002112,
    # its bf16-cache bf16-GEMM group: none from cuBLAS's balanced last wave
    # (gemm_time.BALANCED_WAVES: its one-token kernels 0.9202 of its time, over
    # HOST_BOUND_SHARE) until round 27's output write (gemm_time write_share, vLLM's B200
    # gemm:bf16 refitted: 0.9154), the same 0.1525 ms as before
    (_B200, "vllm", _GEN, "FLASHINFER_MLA_SPARSE", _BF16, _BF16): 0.0001525,
    (_B200, "vllm", _GEN, "FLASHINFER_MLA_SPARSE", _BF16, _FP8): 0.0001729,
    # (none for FlashInfer's group of fp8 block GEMMs and an fp8 cache, 0.179 ms, since those
    # GEMMs take TensorRT-LLM's block-scaled fit, not vLLM's bf16 one: its one-token kernels
    # 0.928 of its time; docs/time-model.md, "vLLM's block-scaled projections take
    # TensorRT-LLM's fit")
    (_B200, "vllm", _GEN, "FLASHMLA_SPARSE", _BF16, _BF16): 0.0001949,
    # (none for FlashMLA's group of fp8 block GEMMs and a bf16 cache, 0.1925 ms before vLLM's
    # B200 fp8 block projections took vLLM's own DeepGEMM rate, 64b87a4d: its one-token
    # kernels 0.929 of its time since, over HOST_BOUND_SHARE)
    # (FlashInfer's with fp8 block GEMMs and a bf16 cache, 0.152 ms, has none since the decode
    # top-k runs on every row, cost.compressed.EVERY_DECODE_TOPK: its one-token kernels 0.97
    # of its time.) FlashMLA's with nvfp4 GEMMs and a bf16 cache had none from then (0.95)
    # until vLLM's B200 nvfp4 projections took SGLang's fit of the kernel (round 30,
    # fit-b200-sxm-vllm's gemm:nvfp4 stand-in): its one-token kernels 0.908 of its time since
    (_B200, "vllm", _GEN, "FLASHMLA_SPARSE", _NVFP4, _BF16): 0.0001754,
}


#: GEMM dtype -> the dtype whose floors a device that never ran it lends (leave one device out:
#: Hopper has no FP4, so H100's floors hold no ``nvfp4`` group). An nvfp4 projection dispatches
#: what a block-scaled fp8 one does: its input's quantization (a scale per 16 elements, per 128)
#: and a block-scaled GEMM's launch. B200's own floors put the nvfp4 paths at 1.09-1.21x the
#: fp8 block ones (vLLM's prompt module: FlashInfer 2.093 / 1.922 ms with a bf16 cache, 2.322 /
#: 1.924 fp8; FlashMLA 2.112 / 1.741), where no floor at all left those rows at their kernels
#: (a one-token prompt row about 0.1 of its time).
GEMM_FLOOR_STAND_IN = {_NVFP4: _FP8B}


def floor_sources(
    system: str, engine: str, table: str, sources, batch, cached=None, gemm_types=None,
    models=None,
) -> np.ndarray:  # fmt: skip
    """The rows' ``kernel_source`` labels as :data:`HOST_FLOOR_S` groups them: a decode row of
    more sequences (``batch``) than the engine's graph ran (:data:`GRAPH_MAX_BATCH`) is its
    path run eagerly (``EAGER`` appended), a prompt row of more ``cached`` tokens than
    :data:`LONG_CACHE_TOKENS` its path's long-context group (``LONG`` appended), a row of a
    model whose module dispatches more with its GEMM dtype (``gemm_types``, ``models``:
    :data:`MODEL_FLOOR_GROUPS`) that model's group (its suffix appended, before ``EAGER`` or
    ``LONG``: :func:`floor_structure` takes them off in that order); every other row its label
    as it is."""
    src = np.asarray(sources).astype(str)
    if gemm_types is not None and models is not None:
        gemm = np.asarray(gemm_types).astype(str)
        model = np.asarray(models).astype(str)
        for (sys_, eng, tab, dt), suffixes in MODEL_FLOOR_GROUPS.items():
            if (sys_, eng, tab) != (system, engine, table):
                continue
            for name, suffix in suffixes.items():
                src = np.where((gemm == dt) & (model == name), np.char.add(src, suffix), src)
    longest = LONG_CACHE_TOKENS.get(engine)
    if table == _CTX and longest is not None and cached is not None:
        long = np.asarray(cached, dtype=np.float64) > longest
        return np.where(long, np.char.add(src, LONG), src)
    most = GRAPH_MAX_BATCH.get((system, engine))
    if table != _GEN or most is None:
        return src
    eager = np.asarray(batch, dtype=np.float64) > most
    return np.where(eager, np.char.add(src, EAGER), src)


def graphed(system: str, engine: str, table: str, source: str) -> bool:
    """Whether a group of rows (its :func:`floor_sources` label) ran in the engine's CUDA
    graph (SGLang's decode modules up to :data:`GRAPH_MAX_BATCH`): its time is its kernels'
    alone, whatever their predicted share, so it takes no host floor."""
    return table == _GEN and (system, engine) in GRAPH_MAX_BATCH and not source.endswith(EAGER)


def _split(source: str) -> tuple[str, str, str]:
    """A :func:`floor_sources` label as (path, model suffix, eager or long suffix): the label is
    the path, then any :data:`MODEL_FLOOR_GROUPS` suffix, then :data:`EAGER` or :data:`LONG`
    (each "" if none), so those are taken off the end first."""
    suffix = next((x for x in (EAGER, LONG) if source.endswith(x)), "")
    source = source[: len(source) - len(suffix)]
    ends = {x for groups in MODEL_FLOOR_GROUPS.values() for x in groups.values()}
    model = next((x for x in ends if source.endswith(x)), "")
    return source[: len(source) - len(model)], model, suffix


def floor_structure(engine: str, source: str) -> str:
    """A :func:`floor_sources` label with its attention library's name dropped: the ops a
    module's forward dispatches but that library's wrapper. SGLang's DSA paths are dense,
    indexer or skip-indexer whatever kernel they end in (``sglang_dsa_indexer_trtllm`` and
    ``sglang_dsa_indexer_flashmla_kv`` dispatch the same indexer, GEMMs and cache write:
    1.058 and 1.160 ms with bf16 GEMMs and an fp8 cache); vLLM's sparse module is one
    structure under FlashMLA or FlashInfer; the eager, long-context or model suffix stays
    (:data:`MODEL_FLOOR_GROUPS`)."""
    path, model, suffix = _split(source)
    if engine == "sglang":
        for prefix in (_SG + "skip_indexer_", _SG + "indexer_", _SG + "dense_mha_"):
            if path.startswith(prefix):
                path = prefix
                break
    elif engine == "vllm":
        path = "sparse_module"
    return path + model + suffix


def floors_measured(system: str, engine: str, table: str) -> bool:
    """Whether :data:`HOST_FLOOR_S` holds any floor of ``engine``'s ``table`` on ``system``."""
    return any(k[:3] == (system, engine, table) for k in HOST_FLOOR_S)


def _floor_of(system: str, engine: str, table: str, source: str, gemm: str, kv: str,
              own: bool) -> float | None:  # fmt: skip
    """One group's floor under ``system``'s floors: its own key, else (``own`` false: another
    device's floors) the median of that device's floors of the same structure and dtypes, else
    of the GEMM dtype standing in for the group's (:data:`GEMM_FLOOR_STAND_IN`)."""
    floor = HOST_FLOOR_S.get((system, engine, table, source, gemm, kv))
    if floor is not None or own:
        return floor
    want = floor_structure(engine, source)
    # a model's own group (MODEL_FLOOR_GROUPS) takes that model's floors of the structure where
    # the other device has them, else the structure's (its eager or long suffix kept)
    path, _, suffix = _split(source)
    wants = (want, floor_structure(engine, path + suffix))
    for g_ in (gemm, GEMM_FLOOR_STAND_IN.get(gemm)):
        for w in dict.fromkeys(wants):
            like = [
                v
                for (s, e, t, src, g, k), v in HOST_FLOOR_S.items()
                if (s, e, t, g, k) == (system, engine, table, g_, kv)
                and floor_structure(e, src) == w
            ]
            if like:
                return float(np.median(like))
    return None


def host_floor_seconds(
    system: str, engine: str, table: str, sources, gemm_types=None, kv_dtypes=None,
    sequences=None, floors_of: str | None = None,
) -> np.ndarray:  # fmt: skip
    """Per-row host floor (seconds) of a table's rows by their ``kernel_source``,
    ``gemm_type`` and ``kv_cache_dtype`` labels (``None``: a table without the column); NaN
    where :data:`HOST_FLOOR_S` has no floor for the group (its rows are predicted by their
    kernels alone). A long-context row (its label ending in :data:`LONG`) adds
    :data:`LONG_SEQUENCE_S` for each of its ``sequences`` past the first (``None``: one).
    ``floors_of``: the measured system whose floors apply (default ``system``, the table's
    own); another's for a device predicted from a fit that never saw it, a group it never ran
    taking its floors of the same structure (module docstring)."""
    src = np.asarray(sources).astype(str)
    n = src.shape[0]
    gemm = np.full(n, "") if gemm_types is None else np.asarray(gemm_types).astype(str)
    kv = np.full(n, "") if kv_dtypes is None else np.asarray(kv_dtypes).astype(str)
    under = floors_of or system
    # each distinct (label, GEMM dtype, cache dtype) looked up once, scattered to its rows
    index: dict[tuple[str, str, str], int] = {}
    inverse = np.fromiter(
        (index.setdefault(k, len(index)) for k in zip(src.tolist(), gemm.tolist(), kv.tolist())),
        dtype=np.int64,
        count=n,
    )
    floors = [_floor_of(under, engine, table, *key, own=under == system) for key in index]
    out = np.array([np.nan if f is None else f for f in floors], dtype=np.float64)[inverse]
    per = LONG_SEQUENCE_S.get((under, engine), 0.0)
    if sequences is not None and per > 0:
        more = np.maximum(np.asarray(sequences, dtype=np.float64) - 1.0, 0.0)
        out = out + np.where(np.char.endswith(src, LONG), per * more, 0.0)
    return out


def call_seconds(system: str, engine: str, table: str, sequences) -> np.ndarray | None:
    """Per-row seconds of a module's call beyond its kernels on ``system``:
    :data:`SEQUENCE_DOUBLING_S` for each doubling of its ``sequences`` and :data:`WIDE_BATCH_S`
    past :data:`WIDE_BATCH_SEQUENCES` of them (None where the table has no such cost there or
    no sequences column)."""
    per = SEQUENCE_DOUBLING_S.get((system, engine, table))
    wide = WIDE_BATCH_S.get((system, engine, table))
    if (per is None and wide is None) or sequences is None:
        return None
    n = np.maximum(np.asarray(sequences, dtype=np.float64), 1.0)
    out = np.zeros(n.shape)
    if per is not None:
        out = out + per * np.log2(n)
    if wide is not None:
        out = out + np.where(n > WIDE_BATCH_SEQUENCES, wide, 0.0)
    return out
