"""Every row of a measured table as the kernels it timed.

Each table is mapped exactly as its collector measured it (the reference's TABLES.md says what
one row holds). A row becomes one kernel of :mod:`mlacalc.words.kernels`, or for the MLA module
tables the list of kernels the module runs (a composite), each with exact matmul FLOPs, the
minimal HBM bytes of one call (every operand read once, every result written once) and its
shape fields; every kernel carries ``warm_l2 = 1`` (the collectors replay the same inputs
without flushing the L2). The measured seconds stay aligned with the rows: a row's
prediction is the sum of the times of its kernels. Work that the measured call fuses into
its main kernel stays in that kernel, as a time model sees it: an fp8 GEMM carries its input
quantization, an attention call its RoPE and cache append.

What each table becomes:

* ``gemm_perf``: one GEMM ``[m,k] @ [k,n]``, bf16 out. ``fp8``: the GEMM carries the dynamic
  per-tensor quantization of its bf16 input (``quantize_input = 1``, ``quant_group = 0``,
  ``quant_passes = 2``: an amax pass, then the scaling pass). ``fp8_block``: the 1x128
  quantize (``quant_group = 128``, one pass) and the block-scaled GEMM, whose bytes include
  the fp32 scales (one per 1x128 of ``x``, one per 128x128 of the weight). The collector's L2
  rule: ``c = clamp(ceil(L2 / W), 1, 5)`` copies of the ``W``-byte weight run per graph
  (A100: always 5), sharing one ``x``, and the latency is divided by ``c``; the kernel carries
  ``weight_copies = c`` and ``warm_l2 = 1`` (no L2 flush between replays). A100
  ``int8_wo``/``int4_wo``/``sq`` rows are TensorRT plugin GEMMs timed by the engine's
  profiler in one inference after other GEMMs: ``w8a16`` / ``w4a16`` (int8 / int4 weights with
  per-channel scales, fp16 activations) and ``int8`` (SmoothQuant W8A8) GEMMs with
  ``warm_l2 = 0`` and ``plugin = 1``.
* ``context_attention_perf`` / ``generation_attention_perf``: one attention kernel
  (``attention_prefill``: causal, ``q_len = kv_len = isl``; ``attention_decode``: ``q_len = 1``,
  ``kv_len = step + 1``) whose bytes include the QKV preprocessing (fused QKV read, RoPE,
  Q written, the new K/V rows appended to the 64-token paged cache; ``preprocess_bytes``).
  No projections. FLOPs count the (query, key) pairs a causal kernel computes, a window
  capping the keys of each query at ``window``. Head-dim 64 rows carry ``sinks = 1``; fp8 KV
  halves the cache bytes (``kv_bytes``); decode rows with fp8 KV write fp8 output and their
  kernel is of dtype fp8 (it multiplies at the fp8 tensor rate where the device has one).
* ``context_mla_perf`` / ``generation_mla_perf``: DeepSeek-V3 geometry (latent 512, RoPE 64,
  nope 128, v 128). Context: ``mla_prefill``, causal attention with 192-wide Q/K and 128-wide
  V per head, plus RoPE and the latent-cache write. Generation: ``mla_decode`` over
  ``step + 1`` latent tokens (576-wide keys, 512-wide values, one latent head) plus
  ``mla_rope_generation`` (RoPE, latent append; with an fp8 cache q quantized to fp8 in a
  pass of its own). No
  projections or absorption BMMs. A100 kernels carry ``kv_split = 0`` and ``operand_reads =
  4`` (four mma.sync warps per 64-head tile read each cache row), and A100 rows labelled
  fp8 KV are the bf16-KV kernels they ran (see the quirks).
* ``mla_context_module_perf`` / ``mla_generation_module_perf``: a composite of every kernel
  ``self_attn.forward`` runs: fused q_a+kv_a projection (7168 -> 2112), two RMSNorms, q_b, then
  kv_b and the MLA context kernel, or the pre-BMM, MLA decode kernel and post-BMM, and o_proj.
  With ``fp8_block`` projections q_a+kv_a, q_b and o_proj are fp8 GEMMs with their quantize;
  kv_b and the absorption BMMs stay bf16. SGLang's and vLLM's tables: each attention backend
  (``kernel_source``) a variant of the MLA class, the prompt kernel in the row's ``mla_dtype``.
* ``mla_bmm_perf``: a batched GEMM with ``groups = num_heads``: pre ``[T,128] @ [128,512]``,
  post ``[T,512] @ [512,128]``; fp8 is 1x128 block-scaled with its permute-and-quantize
  (``quant_permute = 1``), except TensorRT-LLM's on B200 (``*_dequant_bf16``: bf16 BMMs of
  weights dequantized when loaded) and SGLang's (``sglang_sgl_kernel_bmm_fp8``: the per-tensor
  ``bmm_fp8``, its quantize two kernels of a CTA a (token, head), ``quant_ctas``: the
  ``bmm_fp8`` variant of the per-tensor class); the batched kernel is the ``bmm`` variant of
  the GEMM class (so are the module tables' absorption BMMs).
* ``moe_perf``: one ``moe`` kernel for the measured rank: ``E/ep`` local experts, local
  intermediate ``inter/tp``, all ``num_tokens`` entering, loads from
  :mod:`mlacalc.measured.moe_routing` (balanced, or the power-law straggler rank; the
  TensorRT-LLM 1.0 table's power-law calls of tokens x top-k at most E/16: every assignment
  on the measured rank; a later table's calls whose power-law draws all round to zero: the
  round-robin loads). The Triton mxfp4 rows carry their row tile (``row_tile``).
* ``custom_allreduce_perf``: an all-reduce of ``message_size`` bf16 elements per GPU; from
  :data:`TRTLLM_NCCL_FROM_ELEMENTS` (:data:`SGLANG_NCCL_FROM_ELEMENTS`) of the table's
  TensorRT-LLM (SGLang) version up, NCCL's (``fp16``
  class, no one-shot).
* ``nccl_perf``: all_reduce / all_gather / reduce_scatter / all_to_all of ``message_size``
  elements (``half`` 2 bytes, ``int8`` 1) per rank: the full per-rank buffer.
* ``wideep_deepep_ll_perf`` / ``wideep_deepep_normal_perf``: a dispatch and a combine on 8
  GPUs per row (two measurements, ``measure`` says which). LL dispatch moves
  ``tokens * topk`` copies of ``hidden + hidden/32 + 16`` bytes (fp8 payload, an fp32 scale
  per 128, a 16-byte header; the table's bandwidth column matches this exactly), LL combine
  ``tokens * topk * hidden * 2``. Normal mode sends a token once per destination rank:
  ``tokens * r`` copies, ``r`` the expected distinct ranks among its top-k experts.
* ``dsa_context_module_perf`` / ``dsa_generation_module_perf``: DeepSeek-V3.2's and GLM-5's
  sparse-attention module, a composite of its projections, indexer, top-k and sparse (or
  SGLang's dense) MLA, under the engine's host floor (``MappedTable.host_s``, a row predicted
  as the larger of its kernels' sum and the floor; :mod:`mlacalc.timemodel.host_floor`).
* ``dsv4_{csa,hca}_{context,generation}_module_perf``: one DeepSeek-V4 attention layer of that
  kind as a model step's kernel list (:mod:`mlacalc.measured.dsv4_modules`).
* ``msa_{context,generation}_module_perf``: one MiniMax-M3 block-sparse (``msa``) layer's
  attention block as a model step's kernel list (:mod:`mlacalc.measured.msa_modules`).
* ``scale_matrix_perf``: a static per-tensor quantize of bf16 ``[m,k]`` (one pass, fp8 out);
  ``computescale_perf``: the amax/scale part alone (one pass, nothing written).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from mlacalc.cost.compressed import (
    NEAR_TOPK_GEMMS,
    RAGGED_LOGITS_ENGINES,
    dsa_ragged_logits_bytes,
    dsa_topk,
    engine_topk,
    near_topk_rows,
    walked_logit_keys,
)
from mlacalc.cost.linear import LINEAR_CHUNK, delta_rule_flops, gdn_kernel_bytes, linear_chunks
from mlacalc.cost.model_step import k_assemble_bytes
from mlacalc.hardware.catalogue import load_hardware
from mlacalc.measured.dsv4_modules import LONG_TOPK, PROMPT_LONG_TOPK, dsv4_module_parts
from mlacalc.measured.mapped import (
    NOT_MODELLED,
    SIZE_COLUMNS,
    KernelPart,
    MappedTable,
    canon_dtypes,
)
from mlacalc.measured.moe_routing import (
    GROUPED_ROUTING,
    ROW_TILES,
    grouped_rank_loads,
    rank_loads,
)
from mlacalc.measured.msa_modules import msa_module_parts
from mlacalc.measured.quirks import apply_quirks
from mlacalc.measured.tables import SYSTEM_L2_BYTES, MeasuredSet, MeasuredTable, load_measured
from mlacalc.timemodel.attention_time import (
    FA3_QUERY_CAST_KERNELS,
    HD192_SIDE_CALL_ENGINES,
    OPERAND_ASYNC_BF16_ONLY,
    QUERY_CONVERT_KERNELS,
    UNIT_LATENCY_DECODE,
    XQA_HEAD_PACK,
    cache_write_block_weight,
    encoder_kernel_shape,
)
from mlacalc.timemodel.comm_time import (
    PEER_WAIT_ENGINES,
    SGLANG_NCCL_FROM_BYTES,
    VLLM_SYMM_VARIANT,
    vllm_path,
)
from mlacalc.timemodel.device import device_figures, mla_decode_kernel
from mlacalc.timemodel.dsa_time import (
    DECODE_SPARSE_VARIANT,
    EVERY_SLOT_PROMPT,
    FLASHINFER_WIDE_PICKS,
    FP8_SPARSE_PROMPT,
    ONE_SPARSE_KERNEL,
    WALK_HEADS,
    absorbed_prompt_core,
    causal_picks,
    dsa_decode_chain,
    dsa_decode_pre_kernels,
    gen_sparse_variant,
    kv_cache_walk,
    sparse_small_units,
    sparse_unit_heads,
    walk_heads,
    walked_core,
)
from mlacalc.timemodel.elementwise_time import (
    AMAX_BLOCK_ELEMENTS,
    AMAX_GRID_BLOCKS,
    per_sequence_conv,
    token_block_conv,
)
from mlacalc.timemodel.fit import Observations
from mlacalc.timemodel.gemm_time import (
    CUTLASS_SM100_ENGINES,
    CUTLASS_SM100_FIELD,
    FP4_QUANT_GRID_ENGINES,
    FP4_QUANT_GRID_FIELD,
    GROUP_QUANT_CTA_ENGINES,
    GROUP_QUANT_CTA_FIELD,
    MLA_QUANT_CTAS,
    PER_TENSOR_BMM,
    QUANT_ROW_CTA_ENGINES,
    QUANT_ROW_CTA_FIELD,
    QUANT_SM_BOUND_ENGINES,
    SHARED_INPUT_ENGINES,
    SHARED_INPUT_FIELD,
    WIDE_FP4_TILE_ENGINES,
    WIDE_FP4_TILE_FIELD,
    step_block_fp8,
)
from mlacalc.timemodel.host_floor import floor_sources, host_floor_seconds
from mlacalc.timemodel.mla_time import (
    GEN_SPARSE_VARIANT,
    GEN_SPARSE_WIDE_VARIANT,
    OPERANDS_UNDER_PRODUCTS,
    WALK_VARIANT,
    decode_path_tokens,
    wrapper_row_head_s,
)
from mlacalc.timemodel.moe_time import (
    FLASHINFER_HOPPER_TILE,
    MARLIN_COLS,
    PAIR_STREAM_DTYPES,
    ROW_TILES_COL,
    ROWS_SPREAD,
    TRTLLM_GEN_FP4,
    TRTLLM_GEN_MAX_TILE,
    flashinfer_cutlass_moe,
    flashinfer_gen_tile,
    flashinfer_hopper_tiled,
    gen_pads,
    marlin_experts,
    marlin_row_tile,
    triton_fused_moe,
    triton_moe_default_tile,
    triton_moe_row_tile,
    triton_moe_tuned,
    trtllm_gen_row_tile,
    vllm_expert_map,
)
from mlacalc.words.dtypes import WEIGHT_ELEMENT_BYTES, WEIGHT_SCALE_BYTES
from mlacalc.words.engines import engine_of_framework
from mlacalc.words.errors import ConfigError
from mlacalc.words.kernels import (
    DSA_TOPK_CODE,
    MIN_LATENCY_MOE,
    TOPK_KERNEL_VARIANTS,
    KernelBatch,
    dsa_logits_shape,
)

__all__ = [
    "DECODE_PATH_ATTENTION_SOURCES",
    "DECODE_PATH_ONE_TOKEN_SOURCES",
    "DECODE_PATH_SOURCES",
    "DSV3",
    "MQA_TILE_ROWS",
    "NATIVE_NORM_BYTES",
    "NATIVE_NORM_KERNELS",
    "NOT_MODELLED",
    "NO_KERNEL",
    "UNMAPPED",
    "KernelPart",
    "MappedTable",
    "decode_path_prompts",
    "map_table",
    "mapped_tables",
    "mqa_logits_tiles",
    "native_norm_chain",
    "not_predicted",
    "observations",
    "single_kernel_rows",
]

#: The reason of a row whose shape runs no kernel (the engine makes no call, or the measured
#: difference has nothing to time) and whose measured time is 0: the time model predicts it
#: exactly, 0 s. Such a row counts as predicted (:func:`not_predicted`) and stays outside the
#: relative-error statistics (0 / 0 has no relative error) and every fit.
NO_KERNEL = "no_kernel"
#: The reason of a row the mapping runs no kernel for whose measured time is positive: the
#: prediction (0 s) misses it, counted as not predicted.
NO_KERNEL_TIMED = "no_kernel_timed"


def not_predicted(reason: np.ndarray) -> np.ndarray:
    """Rows not predicted: a reason other than ``""`` and :data:`NO_KERNEL` (a row predicted
    exactly as no kernel, 0 s)."""
    return (reason != "") & (reason != NO_KERNEL)


#: ``kernel_source`` of the per-tensor fp8 GEMM rows that run CUTLASS's ``scaled_mm``.
CUTLASS_FP8_SOURCES = ("sglang_sgl_kernel_fp8_scaled_mm", "CutlassFP8ScaledMMLinearKernel")

#: ``kernel_source`` of the block-scaled fp8 GEMM rows whose call hands DeepGEMM fp32 block
#: scales, which DeepGEMM converts per call where the MMA reads packed UE8M0 ones
#: (``scale_convert = 1``: gemm_time._scale_conversion, on ``tcgen05`` devices only).
FP32_SCALE_DEEPGEMM_SOURCES = ("sglang_deepgemm_gemm_nt_f8f8bf16",)

#: ``kernel_source`` of the block-scaled fp8 GEMM rows timed through vLLM's Python wrapper of
#: DeepGEMM, whose host work per call grows where the activation's scales are not TMA-aligned
#: (``scale_unaligned = 1`` at m not a multiple of 4, 16 bytes of fp32 scales a K block:
#: gemm_time._host_floor). Its CUTLASS and FlashInfer wrappers show no such step, nor
#: SGLang's and TensorRT-LLM's DeepGEMM rows (a CUDA graph).
UNALIGNED_SCALE_SOURCES = ("DeepGemmFp8BlockScaledMMKernel",)

#: vLLM's ``gemm_perf`` nvfp4 rows' kernel_source, a class variant of their own in vLLM's
#: profiles (``gemm:nvfp4:FlashInferCuteDslNvFp4LinearKernel``, the fit of those rows): they
#: time FlashInfer's CuTe DSL nvfp4 linear through vLLM's wrapper one eager call at a time
#: (10.8-11.2 us flat from n 32 to 4,096 at m 1, k 6,144; 1.8 us over SGLang's graph replays
#: of the same kernel at the median of 8,778 shapes up to m 64), where vLLM's module rows and a
#: served step run it inside the module's graph: the plain ``gemm:nvfp4`` of vLLM's B200 fit
#: is SGLang's fit of the same kernel, a stand-in (docs/time-model.md, "vLLM's B200 nvfp4
#: projections take SGLang's fit of the kernel").
VLLM_NVFP4_TABLE_VARIANT = "FlashInferCuteDslNvFp4LinearKernel"

#: Engines whose per-tensor fp8 quantize kernels (``computescale_perf``'s amax,
#: ``scale_matrix_perf``'s scaling) give each token one CTA (``units`` = tokens).
TOKEN_CTA_QUANTIZE_ENGINES = ("vllm",)

#: Rows of fp32 scales TMA takes whole: its 16-byte alignment of the M stride (4 fp32).
TMA_SCALE_ROWS = 4

#: DeepSeek-V3 attention geometry of the MLA tables.
DSV3 = {"hidden": 7168, "q_lora": 1536, "kv_lora": 512, "nope": 128, "rope": 64, "v": 128}
_BLOCK = 128  # fp8 block-scaling group
_PAGE = 64  # paged-cache block, tokens
_ROTARY = 128  # rotary dim hard-coded in the attention collector


class _Builder:
    """Collects kernel parts for a table; every array argument is indexed like ``rows``."""

    def __init__(self, n: int, engine: str = ""):
        self.n = n
        self.engine = engine  # the table's engine: whose kernel its GEMMs are
        self.parts: list[KernelPart] = []
        self.host_s: np.ndarray | None = None  # a host floor per row (NaN: none), or none
        self.host_groups: tuple | None = None  # the labels it was looked up by

    def host_floor(
        self, t: MeasuredTable, sources, gemm_types=None, kv_dtypes=None, sequences=None
    ) -> None:
        """The rows' host floors under the table's own device's floors, by their labels and
        sequences (kept, to look them up under another device's: ``MappedTable.host_floor_for``)."""
        self.host_groups = (sources, gemm_types, kv_dtypes, sequences)
        self.host_s = host_floor_seconds(t.system, t.engine, t.table, *self.host_groups)

    def add(
        self,
        name: str,
        kind: str,
        dtype: str,
        rows: np.ndarray,
        flops,
        nbytes,
        calls=1,
        variant: str = "",
        **shape,
    ) -> None:
        rows = np.asarray(rows, dtype=np.int64)
        if rows.size == 0:
            return
        shape.setdefault("warm_l2", 1)  # the collectors never flush the L2 between calls
        m = rows.shape[0]

        def arr(v):
            a = np.asarray(v, dtype=np.float64)
            return np.broadcast_to(a, (m,)).copy() if a.ndim == 0 else a

        self.parts.append(
            KernelPart(
                name,
                rows,
                KernelBatch(
                    kind=kind,
                    dtype=dtype,
                    flops=arr(flops),
                    bytes=arr(nbytes),
                    calls=arr(calls),
                    shape={k: arr(v) for k, v in shape.items()},
                    variant=variant,
                ),
            )
        )

    def add_collective(
        self,
        name: str,
        kind: str,
        dtype: str,
        rows: np.ndarray,
        message,
        n_gpus,
        **shape,
    ) -> None:
        """Add a collective: no FLOPs, its bytes the message each rank moves."""
        self.add(
            name, kind, dtype, rows, 0.0, message, message_bytes=message, n_gpus=n_gpus, **shape
        )

    def add_by_dtype(
        self,
        name: str,
        kind: str,
        dtypes: np.ndarray,
        rows: np.ndarray,
        flops,
        nbytes,
        calls=1,
        variant: str | np.ndarray = "",
        **shape,
    ) -> None:
        """Add one batch per distinct dtype among ``rows`` (and per distinct variant, when
        ``variant`` is an array indexed like ``rows``)."""
        variants = np.broadcast_to(np.asarray(variant, dtype=str), np.shape(dtypes))
        for dt, var in sorted(set(zip(np.asarray(dtypes).tolist(), variants.tolist()))):
            sel = (dtypes == dt) & (variants == var)

            def pick(v, sel=sel):
                a = np.asarray(v)
                return a[sel] if a.ndim else a

            self.add(
                name,
                kind,
                str(dt),
                rows[sel],
                pick(flops),
                pick(nbytes),
                pick(calls),
                variant=str(var),
                **{k: pick(v) for k, v in shape.items()},
            )


def _f(a: np.ndarray) -> np.ndarray:
    return a.astype(np.float64)


def _elem(dt: np.ndarray) -> np.ndarray:
    """Bytes per element of a kernel dtype column
    (:data:`~mlacalc.words.dtypes.WEIGHT_ELEMENT_BYTES`, other dtypes 2)."""
    sizes = sorted(set(WEIGHT_ELEMENT_BYTES.values()))
    return np.select(
        [np.isin(dt, [d for d, b in WEIGHT_ELEMENT_BYTES.items() if b == v]) for v in sizes],
        sizes,
        2.0,
    )


_NVFP4_GROUP = 16  # nvfp4 block: 16 elements share one fp8 scale


def _source_variants(t: MeasuredTable, dt: np.ndarray) -> np.ndarray:
    """Each row's class variant from its ``kernel_source``: of the kernels a table times for one
    dtype, the one with the most rows is the class itself (``""``), every other one a variant
    named after it (fitted apart). A ``_nongated`` kernel is its gated kernel's (``gated``
    says which); a table without the column, or with one kernel per dtype, has no variants."""
    out = np.full(len(t), "", dtype=object)
    if "kernel_source" not in t.columns:
        return out.astype(str)
    src = t.columns["kernel_source"].astype(str)
    nongated = np.char.endswith(src, "_nongated")
    for d in np.unique(dt):
        sel = (dt == d) & ~nongated
        if not sel.any():
            continue
        names, counts = np.unique(src[sel], return_counts=True)
        if len(names) < 2:
            continue
        main = names[np.argmax(counts)]
        for name in names:
            if name != main:
                out[sel & (src == name)] = str(name).replace(":", "_")
    return out.astype(str)


def _quantize(
    b: _Builder,
    name: str,
    rows,
    elements,
    group: int,
    passes: int,
    write: int = 1,
    units=0,
    amax_blocks=0,
) -> None:
    """A quantize kernel over bf16 ``elements``: ``passes`` reads of the input, fp8 output
    (when ``write``) and fp32 scales (one per ``group`` elements; 0 = one per tensor). The
    scale alone (``write = 0``: the absolute-maximum reduction of a dynamic quantization, what
    ``computescale_perf`` keeps of dynamic minus static) is two graph nodes, ``launches = 2``:
    the scale's reset to zero (a memset) and the reduction kernel, whose blocks each fold
    their maximum into that one scale. ``units``: the CTAs of a kernel that gives each token
    one (vLLM's, :data:`TOKEN_CTA_QUANTIZE_ENGINES`), which draw the bandwidth by their count;
    0 where the kernel's blocks tile the elements. ``amax_blocks``: the blocks of a fixed-grid
    amax that hold elements and fold their maximum into the scale one after another
    (TensorRT-LLM's, ``elementwise_time.AMAX_GRID_BLOCKS``)."""
    e = _f(np.asarray(elements))
    scales = np.ceil(e / group) * 4 if group else np.full_like(e, 4.0)
    nbytes = passes * 2 * e + write * (e + scales)
    b.add(
        name,
        "quantize",
        "fp8",
        rows,
        0.0,
        nbytes,
        variant="" if write else "amax",
        elements=e,
        group=group,
        passes=passes,
        write=write,
        launches=1 if write else 2,
        units=units,
        amax_blocks=amax_blocks,
    )


def _gemm_kernels(
    b: _Builder,
    name: str,
    rows,
    dtype: str,
    m,
    n,
    k,
    groups=1,
    *,
    warm_l2=1,
    weight_copies=1,
    out_elem=2.0,
    permute=0,
    variant="",
    amax_atomics=0.0,
    quant_sm_bound=0.0,
    quant_ctas=0.0,
    quant_row_ctas=0.0,
    cutlass_dispatch=0.0,
    cutlass_sm100=0.0,
    scale_convert=0.0,
    scale_unaligned=0.0,
    host_wrapper=0.0,
    shared_input=0.0,
    group_quant_ctas=0.0,
) -> None:
    """One (batched) GEMM. An fp8 GEMM carries the quantization of its bf16 input
    (``quantize_input = 1``): per-tensor (``quant_group = 0``, two passes: amax, then scaling;
    ``amax_atomics = 1`` where the amax kernel's blocks, one a token, each fold their maximum
    into the scale with an atomic: ``quant_atomics`` = tokens; ``quant_sm_bound = 1`` where its
    passes move at a rate per SM and clock (``gemm_time.QUANT_SM_BOUND_ENGINES``);
    ``quant_ctas`` small CTAs a row
    and group, SGLang's MLA BMM's, :data:`~mlacalc.timemodel.gemm_time.MLA_QUANT_CTAS`;
    ``cutlass_dispatch = 1`` where
    the GEMM is CUTLASS's ``scaled_mm``, whose tile the row count picks; ``cutlass_sm100 = 1``
    where its Blackwell kernel takes ``gemm_time.CUTLASS_SM100_FP8_TILES``) or 1x128 blocks
    (``quant_group = 128``, one pass; ``quant_permute = 1`` when the quantize also permutes
    heads and tokens, as the fp8 MLA BMMs do; ``scale_convert = 1`` where the call hands
    DeepGEMM fp32 scales: :data:`FP32_SCALE_DEEPGEMM_SOURCES`; ``scale_unaligned = 1`` where a
    wrapper's host work aligns the activation's scales: :data:`UNALIGNED_SCALE_SOURCES`;
    ``host_wrapper = 1`` where the call is timed eagerly through a wrapper whose host work
    floors it: vLLM's table; ``shared_input = 1`` where the caller's weight copies share one
    input, ``gemm_time.SHARED_INPUT_FIELD``).
    ``variant="bmm"``: the batched
    GEMM kernel, fitted apart from the plain GEMMs."""
    m, n, k, g = _f(np.asarray(m)), _f(np.asarray(n)), _f(np.asarray(k)), _f(np.asarray(groups))
    e = {"bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "fp8_block": 1.0, "nvfp4": 0.5}[dtype]
    nbytes = g * (m * k * e + k * n * e + m * n * out_elem)
    quant = {"quantize_input": 0, "quant_group": 0, "quant_passes": 0, "quant_permute": 0}
    if dtype == "fp8":
        nbytes = nbytes + 8.0  # the two per-tensor scales
        # three graph nodes: the amax reduction's memset and kernel (computescale_perf), then
        # the scaling pass (scale_matrix_perf)
        quant = {
            "quantize_input": 1,
            "quant_group": 0,
            "quant_passes": 2,
            "quant_permute": 0,
            "quant_launches": 3,
            "quant_atomics": amax_atomics * g * m,
            # its passes at a rate per SM and clock (gemm_time.QUANT_SM_BOUND_ENGINES)
            "quant_sm_bound": quant_sm_bound * np.ones_like(m),
            "quant_ctas": quant_ctas * g * m,
            # a quantize of a CTA a token (gemm_time.QUANT_ROW_CTA_ENGINES)
            QUANT_ROW_CTA_FIELD: quant_row_ctas * np.ones_like(m),
            "cutlass_dispatch": cutlass_dispatch * np.ones_like(m),
            CUTLASS_SM100_FIELD: cutlass_sm100 * np.ones_like(m),
        }
    elif dtype == "fp8_block":
        nbytes = nbytes + 4.0 * g * (
            m * np.ceil(k / _BLOCK) + np.ceil(n / _BLOCK) * np.ceil(k / _BLOCK)
        )
        quant = {
            "quantize_input": 1,
            "quant_group": _BLOCK,
            "quant_passes": 1,
            "quant_permute": permute,
            "scale_convert": scale_convert * np.ones_like(m),
            "scale_unaligned": scale_unaligned * np.ones_like(m),
            "host_wrapper": host_wrapper * np.ones_like(m),
            # a quantize of a CTA per packed 1x128 groups (gemm_time.GROUP_QUANT_CTA_ENGINES)
            GROUP_QUANT_CTA_FIELD: group_quant_ctas * np.ones_like(m),
        }
    elif dtype == "nvfp4":
        # both operands' fp8 scales (one per 16 elements along K); the bf16 input is quantized
        # to nvfp4 by a kernel of its own, one pass writing the 4-bit copy and its scales;
        # TensorRT-LLM's kernel runs one output tile (gemm_time.WIDE_FP4_TILE)
        nbytes = nbytes + g * (m + n) * np.ceil(k / _NVFP4_GROUP)
        wide = float(b.engine in WIDE_FP4_TILE_ENGINES)
        quant = {
            "quantize_input": 1,
            "quant_group": _NVFP4_GROUP,
            "quant_passes": 1,
            "quant_permute": 0,
            WIDE_FP4_TILE_FIELD: wide * np.ones_like(m),
            # its quantize's grid of CTAs (gemm_time.FP4_QUANT_GRID_ENGINES)
            FP4_QUANT_GRID_FIELD: float(b.engine in FP4_QUANT_GRID_ENGINES) * np.ones_like(m),
        }
    b.add(
        name,
        "gemm",
        dtype,
        rows,
        2.0 * g * m * n * k,
        nbytes,
        m=m,
        n=n,
        k=k,
        groups=g,
        warm_l2=warm_l2,
        weight_copies=weight_copies,
        variant=variant,
        **quant,
        **{SHARED_INPUT_FIELD: shared_input * np.ones_like(m)},
    )


# ---------------------------------------------------------------- per table


def _gemm_table(t: MeasuredTable, b: _Builder, reason: np.ndarray) -> None:
    dt = canon_dtypes(t.column("gemm_dtype"))
    m, n, k = _f(t.column("m")), _f(t.column("n")), _f(t.column("k"))
    rows = np.arange(len(t))
    weight = n * k * _elem(dt)
    l2 = SYSTEM_L2_BYTES.get(t.system)
    if t.system == "a100_sxm" or l2 is None:
        copies = np.full(len(t), 5.0)
    else:
        copies = np.clip(np.ceil(l2 / weight), 1, 5)
    variants = _source_variants(t, dt)
    # vLLM's dynamic per-tensor fp8 quantization (``scaled_fp8_quant``): its amax kernel runs
    # a block per token, each folding its maximum into the one scale with an atomic
    atomics = 1.0 if t.engine == "vllm" else 0.0
    # SGLang's and vLLM's per-tensor fp8 GEMM is CUTLASS's scaled_mm, its tile picked by the
    # row count (gemm_time.CUTLASS_SM90_FP8_TILES), not cuBLAS's
    source = t.columns.get("kernel_source")
    cutlass, convert = np.zeros(len(t)), np.zeros(len(t))
    unaligned, wrapper = np.zeros(len(t)), np.zeros(len(t))
    if source is not None:
        cutlass = np.isin(source.astype(str), CUTLASS_FP8_SOURCES).astype(np.float64)
        convert = np.isin(source.astype(str), FP32_SCALE_DEEPGEMM_SOURCES).astype(np.float64)
    if t.engine == "vllm" and "kernel_source" in t.columns:
        # quirk of vLLM's table (mapping rule): its fp8_block rows time a floor of 57-93 us on
        # H100 and 175-275 us on B200 at every m up to 4,096 (n = 3,072, k = 1,536), where the
        # same GEMM takes 6-8 us in SGLang's and TensorRT-LLM's tables and vLLM's whole MLA
        # decode module with three such GEMMs takes 87 us (B200, batch 1): not the kernel a
        # served step runs. Every kernel_source of them is a variant of its own, fitted apart,
        # and no plain fp8_block class is fitted from them (a step's block-scaled GEMM then
        # takes TensorRT-LLM's fit as a stand-in; the profile alone, vLLM's bf16 GEMM fit at
        # the fp8 rate)
        blk = dt == "fp8_block"
        src = t.columns["kernel_source"].astype(str)
        variants = np.where(blk, np.char.replace(src, ":", "_"), variants)
        # the floor is the wrapper's host work, the call the longer of it and the kernels
        # (gemm_time._host_floor); its DeepGEMM wrapper's steps up where the activation's fp32
        # scales are not TMA-aligned (m % 4): H100 86 -> 94 us, B200 176 -> 235 us (medians)
        wrapper = blk.astype(np.float64)
        unaligned = (
            blk & np.isin(src, UNALIGNED_SCALE_SOURCES) & (np.mod(m, TMA_SCALE_ROWS) != 0)
        ).astype(np.float64)
        # its nvfp4 rows time FlashInfer's CuTe DSL linear through vLLM's wrapper, eagerly: a
        # variant of their own (VLLM_NVFP4_TABLE_VARIANT), not the class a served step and the
        # module rows take
        fp4 = dt == "nvfp4"
        variants = np.where(fp4 & (src == VLLM_NVFP4_TABLE_VARIANT), src, variants)
    for d in ("bf16", "fp16", "fp8", "fp8_block", "nvfp4"):
        for var in np.unique(variants[dt == d]):
            sel = (dt == d) & (variants == var)
            _gemm_kernels(
                b,
                "gemm",
                rows[sel],
                d,
                m[sel],
                n[sel],
                k[sel],
                weight_copies=copies[sel],
                variant=str(var),
                amax_atomics=atomics,
                quant_sm_bound=float(t.engine in QUANT_SM_BOUND_ENGINES),
                quant_row_ctas=float(t.engine in QUANT_ROW_CTA_ENGINES),
                cutlass_dispatch=cutlass[sel],
                cutlass_sm100=cutlass[sel] * float(t.engine in CUTLASS_SM100_ENGINES),
                scale_convert=convert[sel],
                scale_unaligned=unaligned[sel],
                host_wrapper=wrapper[sel],
                # the collector's copies share one x (gemm_time.SHARED_INPUT_ENGINES)
                shared_input=float(t.engine in SHARED_INPUT_ENGINES),
                group_quant_ctas=float(t.engine in GROUP_QUANT_CTA_ENGINES),
            )
    # TensorRT plugin GEMMs (A100): one inference timed by the engine's profiler after other
    # GEMMs, so no warm weights; weight-only int8/int4 with per-channel scales (fp16
    # activations, the WeightOnlyQuantMatmul plugin) and SmoothQuant W8A8
    for label, d, w_elem, x_elem in (
        ("int8_wo", "w8a16", 1.0, 2.0),
        ("int4_wo", "w4a16", 0.5, 2.0),
        ("sq", "int8", 1.0, 1.0),
    ):
        sel = t.column("gemm_dtype") == label
        if not sel.any():
            continue
        mm, nn, kk = m[sel], n[sel], k[sel]
        # per-channel weight scales (fp16); SmoothQuant adds per-token and per-channel fp32
        scales = 4.0 * (mm + nn) if d == "int8" else 2.0 * nn
        nbytes = mm * kk * x_elem + nn * kk * w_elem + mm * nn * 2.0 + scales
        b.add(
            "gemm",
            "gemm",
            d,
            rows[sel],
            2.0 * mm * nn * kk,
            nbytes,
            m=mm,
            n=nn,
            k=kk,
            groups=1,
            warm_l2=0,
            weight_copies=1,
            quantize_input=0,
            plugin=1,
        )
    known = ["bf16", "fp16", "fp8", "fp8_block", "nvfp4"]
    other = ~np.isin(dt, known) & ~np.isin(t.column("gemm_dtype"), ["int8_wo", "int4_wo", "sq"])
    reason[other] = "unknown_dtype"


def _encoder_attention_table(t: MeasuredTable, b: _Builder, reason: np.ndarray) -> None:
    """A vision encoder's attention (``encoder_attention_perf``): bidirectional (non-causal)
    multi-head attention over ``isl`` tokens per image, as many K/V heads as query heads, no
    paged cache and no RoPE inside the call (the row has no KV-dtype or rotary columns): q, k
    and v read once, the output written once. The kernel (FlashAttention-4 under SGLang and
    vLLM on B200, TensorRT-LLM's own FMHA) is the ``encoder`` variant of the prefill class,
    fitted apart from the causal paged-cache kernels."""
    bs, hq, hd, s = (_f(t.column(c)) for c in ("batch_size", "num_heads", "head_dim", "isl"))
    dt = canon_dtypes(t.column("attn_dtype"))
    rows = np.arange(len(t))
    tok = bs * s
    elem = _elem(dt)
    flops = 2.0 * hq * bs * s * s * (hd + hd)
    nbytes = tok * hq * hd * elem * 4.0
    ok = ~np.char.startswith(dt, "?")
    # mapping rule (another kernel): TensorRT-LLM's encoder rows at a head dim that is not a
    # multiple of 16 (72: SigLIP's) run another, slower kernel than at 64 and 80 (B200, 16
    # heads, one image of 32,768 tokens: 27.4 ms at 72, 5.7 ms at 64 and 6.5 ms at 80), where
    # SGLang's and vLLM's kernels take 6.2-6.7 ms. A bf16 MMA reads 16 elements of its K
    # dimension (the head dim of the scores' product) at a time; the kernel without a build for
    # the head dim is the ``encoder_fallback`` variant, fitted apart
    variant = np.full(len(t), "encoder", dtype=object)
    if t.engine == "trtllm":
        variant[hd % 16 != 0] = "encoder_fallback"
    fig = device_figures(load_hardware(t.system))
    kernel = encoder_kernel_shape(t.engine, fig, hd[ok])
    b.add_by_dtype(
        "encoder_attention",
        "attention_prefill",
        dt[ok],
        rows[ok],
        flops[ok],
        nbytes[ok],
        variant=variant[ok].astype(str),
        batch=bs[ok],
        q_len=s[ok],
        kv_len=s[ok],
        n_heads=hq[ok],
        n_kv=hq[ok],
        head_dim_qk=hd[ok],
        head_dim_v=hd[ok],
        window=0.0,
        causal=0,
        kv_bytes=elem[ok],
        rope_kernel=0.0,  # no RoPE + cache-write pre-kernel (docs/time-model.md)
        **kernel,
    )
    reason[~ok] = "unknown_dtype"


def _conv1d(
    b: _Builder, rows, src, tokens, seqs, channels, d_conv, prefix: str = "", per_seq: bool = False
) -> None:
    """Causal depthwise conv1d rows (``causal_conv1d_fn`` over ``tokens``, or
    ``causal_conv1d_update`` one token a sequence): bf16 in and out over ``channels``, the
    ``d_conv``-tap filters, and the ``d_conv - 1`` rows of state each sequence keeps (written
    by the prompt kernel, read and written by the update); ``2 x d_conv`` FLOPs an element.
    ``elementwise`` kernels (streaming work on the CUDA cores), variants ``conv1d`` and
    ``conv1d_update`` (``prefix`` another model's kernels: ``mamba2_``), fitted apart.
    ``per_seq``: TensorRT-LLM's prompt kernel, in channel blocks a sequence
    (:func:`~mlacalc.timemodel.elementwise_time.per_sequence_conv`): its rows grow with the
    sequences at any length (B200, Qwen3.5-27B: 6.6 us for one sequence of 4,096 tokens'
    neighbours, 21 us for 8 of one token, 101 us for 64 of 8), where SGLang's and vLLM's do
    not (2.5 us for 8 of one token, 3.5 us for 64 of 4): theirs walk a block of a sequence's
    tokens (:func:`~mlacalc.timemodel.elementwise_time.token_block_conv`)."""
    for name, variant, state_passes in (
        ("causal_conv1d_fn", "conv1d", 1.0),
        ("causal_conv1d_update", "conv1d_update", 2.0),
    ):
        s = src == name
        if not s.any():
            continue
        e = tokens[s] * channels[s]
        state = state_passes * seqs[s] * channels[s] * (d_conv[s] - 1.0) * 2.0
        b.add(
            name,
            "elementwise",
            "bf16",
            rows[s],
            2.0 * d_conv[s] * e,
            4.0 * e + 2.0 * channels[s] * d_conv[s] + state,
            variant=prefix + variant,
            elements=e,
            **(
                per_sequence_conv(prefix + variant, seqs[s], channels[s], tokens[s])
                if per_seq
                else token_block_conv(prefix + variant, seqs[s], tokens[s])
            ),
        )


#: The engines whose ``gdn_perf`` recurrent decode rows find their state in the L2 while it
#: fits (a warm replay, ``warm_l2``, on one state: ``state_bytes``): SGLang's and vLLM's rows
#: step where the states outgrow it (H100, 16 value heads: 10.0 / 19.0 / 50.0 / 94.4 us at 16
#: / 32 / 64 / 128 sequences, 37 ns a (sequence, head) up to 512 of them, 32 MB of fp32 state,
#: then 46-49 ns). TensorRT-LLM's rows show no such step (9.5 / 21.4 / 38.8 / 73.3 us: 36-42 ns
#: throughout; why is not identified) and carry no ``state_bytes``.
WARM_STATE_ENGINES = ("sglang", "vllm")

#: The engines whose decode attention rows find their cache in the L2 while it fits (a warm
#: replay on one cache, ``warm_l2``: ``cache_bytes``, the K/V bytes a row reads,
#: :func:`~mlacalc.timemodel.attention_time.decode_terms`). Their rows step where the cache
#: outgrows H100's 50 MB L2: vLLM's bf16 rows at 32 query heads on 8 KV heads, head dim 128,
#: take 20 us at one sequence of 8,192 keys (33.5 MB) and 41 us at 16,384 (67 MB), where HBM
#: alone would take 10 and 20 us beside the call's 12 us floor (4.2 TB/s at 8,192 keys, above
#: H100's 3.35); the same step on the diagonal batch x keys = 8,192 at every batch from 1 to
#: 16. The fitted residuals by the cache's megabytes before the rule (medians): H100, SGLang
#: and vLLM, +4 to +9% at 16-48 MB, -10 to -12% at 48-64 MB (bf16); B200 +9 to +19% at 64-96
#: MB, -5 to -7% at 128-256 MB (its L2 126 MB). TensorRT-LLM's decode rows likewise (its
#: fitted residuals before: B200 +7 to +10% at 64-96 MB, -5 to -6% at 128-256 MB; H100 -9% at
#: 48-64 MB; from the other device H100 -16 to -30% at 48-256 MB, B200 +27 to +74% fp8 at
#: 64-256 MB, the two L2s' sizes apart: docs/time-model.md).
WARM_CACHE_ENGINES = ("sglang", "vllm", "trtllm")


def _gdn_table(t: MeasuredTable, b: _Builder, reason: np.ndarray) -> None:
    """``gdn_perf``: one kernel of a Gated DeltaNet layer a row (Qwen3.5 geometries, heads as
    the row gives them). The conv1d kernels over the q, k and v channels (``2 Hk dk + Hv dv``);
    the gated delta rule over ``num_tokens``: chunked for a prompt (``chunk_gated_delta_rule``)
    or recurrent one token a sequence (``fused_recurrent``), the FLOPs of each form as a model
    step counts them (:func:`mlacalc.cost.linear.delta_rule_flops`). Bytes
    (:func:`mlacalc.cost.linear.gdn_kernel_bytes`): q, k, v, the output in bf16, the gate and
    beta in fp32, the fp32 state (written by the prompt kernel, read and written by the
    recurrent one); flash-linear-attention's chunked form (SGLang's and TensorRT-LLM's) moves
    its intermediates through HBM between its kernels, an estimate of that traffic replacing
    q, k, v and the output (FlashInfer's fused kernel, vLLM's, does not), and its kernels work
    on whole (sequence, chunk, value head) tiles (``tiles``; the fused kernel's tile is a
    (sequence, value head) unit). The chunks a (sequence, value head) walks one after another:
    ``chunks``, over ``seq_heads``. A recurrent row of :data:`WARM_STATE_ENGINES` finds its
    state in the L2 while it fits (a warm replay on one state: ``state_bytes``).
    ``elementwise`` variants ``gdn_chunk`` and ``gdn_recurrent``, fitted apart."""
    src = np.char.replace(t.column("kernel_source").astype(str), "_packed_decode", "")
    # FlashInfer's chunked kernel (vLLM's) is one fused kernel: no pass of its own over
    # intermediates in HBM (flash-linear-attention's, the other engines', writes and reads them)
    fused = src == "chunk_gated_delta_rule_flashinfer"
    src = np.char.replace(src, "chunk_gated_delta_rule_flashinfer", "chunk_gated_delta_rule")
    rows = np.arange(len(t))
    hk, dk = _f(t.column("num_k_heads")), _f(t.column("head_k_dim"))
    hv, dv = _f(t.column("num_v_heads")), _f(t.column("head_v_dim"))
    tokens, seqs = _f(t.column("num_tokens")), _f(t.column("batch_size"))
    channels = 2 * hk * dk + hv * dv
    per_seq = t.engine == "trtllm"
    # mapping rule (TensorRT-LLM's table): its conv rows do not change with the value heads
    # (B200, 8 sequences of 4,096 tokens: 82.3, 82.6, 82.2, 82.5 us at 16, 32, 48, 64 value
    # heads; the one-token update alike), and at the q, k, v width they would stream 2-4.6x
    # H100's HBM bandwidth (6.6-16.8 TB/s). They convolve num_k_heads x head_k_dim channels:
    # at that width the long prompts stream at 82% of H100's bandwidth and 46% of B200's.
    # Which channels the collector passed is not recorded
    conv_channels = hk * dk if per_seq else channels
    _conv1d(b, rows, src, tokens, seqs, conv_channels, _f(t.column("d_conv")), "", per_seq)
    # the traffic and the FLOPs a model step's kernel carries (mlacalc.cost.linear)
    io, passes, state = gdn_kernel_bytes(tokens, seqs, hk, dk, hv, dv)
    # the chunked kernel's passes over its sequence's chunks, one after another for each
    # (sequence, value head): the inter-chunk state recurrence; the recurrent kernel's one step
    q = tokens / seqs
    chunks = np.where(src == "chunk_gated_delta_rule", linear_chunks(q), 1.0)
    for name, variant, flops, nbytes in (
        (
            "chunk_gated_delta_rule",
            "gdn_chunk",
            seqs * delta_rule_flops("gated_deltanet", q, hv, dk, dv, recurrent=False),
            np.where(fused, io, np.maximum(io, passes)) + state,
        ),
        (
            "fused_recurrent_gated_delta_rule",
            "gdn_recurrent",
            seqs * delta_rule_flops("gated_deltanet", q, hv, dk, dv, recurrent=True),
            io + 2 * state,
        ),
    ):
        s = src == name
        if s.any():
            b.add(name, "elementwise", "bf16", rows[s], flops[s], nbytes[s], variant=variant,
                  elements=tokens[s] * hv[s] * dv[s], chunks=chunks[s],
                  seq_heads=seqs[s] * hv[s], fused=fused[s] * 1.0,
                  tiles=np.where(variant != "gdn_chunk", 0.0,
                                 seqs[s] * np.where(fused[s], 1.0, chunks[s]) * hv[s]),
                  chunk_tokens=np.where((variant != "gdn_chunk") | fused[s], 0.0,
                                        np.minimum(q[s], LINEAR_CHUNK)),
                  **({"state_bytes": state[s]}
                     if variant == "gdn_recurrent" and t.engine in WARM_STATE_ENGINES
                     else {}))  # fmt: skip
    known = ["causal_conv1d_fn", "causal_conv1d_update", "chunk_gated_delta_rule",
             "chunk_gated_delta_rule_flashinfer", "fused_recurrent_gated_delta_rule"]  # fmt: skip
    reason[~np.isin(src, known)] = "unknown_dtype"


def _mamba2_table(t: MeasuredTable, b: _Builder, reason: np.ndarray) -> None:
    """``mamba2_perf``: the causal conv1d kernels of a Mamba-2 mixer (over ``x``, ``B`` and
    ``C``: ``nheads x head_dim + 2 x n_groups x d_state`` channels; variants ``mamba2_conv1d``
    and ``mamba2_conv1d_update``: TensorRT-LLM's Mamba-2 conv kernels time unlike its GDN ones);
    the table has no scan rows."""
    src = t.column("kernel_source").astype(str)
    channels = _f(t.column("nheads")) * _f(t.column("head_dim")) + 2 * _f(
        t.column("n_groups")
    ) * _f(t.column("d_state"))
    _conv1d(b, np.arange(len(t)), src, _f(t.column("num_tokens")), _f(t.column("batch_size")),
            channels, _f(t.column("d_conv")), "mamba2_", t.engine == "trtllm")  # fmt: skip
    reason[~np.isin(src, ["causal_conv1d_fn", "causal_conv1d_update"])] = "unknown_dtype"


def _pairs(q_len: np.ndarray, window: np.ndarray) -> np.ndarray:
    """(query, key) pairs of a causal prompt of ``q_len`` tokens per sequence, window-capped:
    query ``i`` (1-based) attends ``min(i, w)`` keys."""
    s = q_len
    full = s * (s + 1) / 2
    w = np.where(window > 0, np.minimum(window, s), s)
    capped = w * (w + 1) / 2 + (s - w) * w
    return np.where(window > 0, capped, full)


#: The prompt kernels that pack the query heads of a KV head into one tile's rows
#: (FlashAttention-3's ``pack_gqa`` over a paged cache): SGLang's and vLLM's on H100.
_PACKING_PREFILL = ("fa3", "vllm_flash_attn_fa3", "vllm_triton_attn")


def _head_pack(t: MeasuredTable, *, context: bool) -> np.ndarray:
    """The most query heads per KV head one unit of a row's kernel carries (``head_pack``; 0:
    every one). Decode: TensorRT-LLM's own kernels (XQA; kernel source ``torch_flow`` or none
    recorded) 32, beyond which every query head runs a unit of its own (the MMHA kernel); the
    other engines' kernels (FlashAttention-3, FlashInfer with TensorRT-LLM-gen, Triton) pack
    every one (B200, 2,048 sequences, 64 query heads on one KV head, one cached key:
    TensorRT-LLM 1,355 us, SGLang 47 us, vLLM 38 us). Prompt: FlashAttention-3 packs every one
    (:data:`_PACKING_PREFILL`; H100, 128 prompts of 16 tokens, 64 query heads: 57 us on one KV head,
    247 us on 64), the other kernels none (1: a tile a query head; TensorRT-LLM 216 and 259 us)."""
    n = len(t)
    source = t.columns.get("kernel_source")
    src = source.astype(str) if source is not None else np.full(n, "", dtype=object)
    if context:
        return np.where(np.isin(src, _PACKING_PREFILL), 0.0, 1.0)
    if t.engine in ("trtllm", "") or source is None:
        own = (src == "torch_flow") | (src == "") if t.engine == "trtllm" else np.ones(n, bool)
        return np.where(own, float(XQA_HEAD_PACK), 0.0)
    return np.zeros(n)


#: The prompt kernels whose CTA carries two 128-query tiles of a head (``paired_tiles``,
#: :func:`~mlacalc.timemodel.attention_time.paired_tile_waves`): the TensorRT-LLM-gen prompt
#: kernel FlashInfer calls, SGLang's (``trtllm_mha``) and vLLM's on B200
_PAIRED_PREFILL = ("trtllm_mha", "vllm_flashinfer_trtllmprefill")


#: The prompt kernels whose shared-memory operand reads run under their products
#: (``operand_async``, :data:`~mlacalc.timemodel.attention_time.OPERAND_ASYNC_PREFILL`):
#: FlashAttention-3 on H100 (SGLang's ``fa3``, vLLM's ``vllm_flash_attn_fa3``) and
#: TensorRT-LLM-gen through FlashInfer on B200 (``trtllm_mha``,
#: ``vllm_flashinfer_trtllmprefill``). vLLM's rows over an fp8 cache keep their reads
#: (:data:`~mlacalc.timemodel.attention_time.OPERAND_ASYNC_BF16_ONLY`)
_OPERAND_ASYNC_PREFILL = (
    "fa3",
    "trtllm_mha",
    "vllm_flash_attn_fa3",
    "vllm_flashinfer_trtllmprefill",
)


def _operand_async(t: MeasuredTable, fmha_dt: np.ndarray, *, context: bool) -> np.ndarray:
    """1 where a prompt row runs one of :data:`_OPERAND_ASYNC_PREFILL` (SGLang's, and vLLM's of
    a bf16 cache), else 0."""
    source = t.columns.get("kernel_source")
    if not context or source is None or t.engine not in ("sglang", "vllm"):
        return np.zeros(len(t))
    on = np.isin(source.astype(str), _OPERAND_ASYNC_PREFILL)
    if t.engine in OPERAND_ASYNC_BF16_ONLY:
        on = on & ~np.char.startswith(fmha_dt.astype(str), "fp8")
    return on.astype(np.float64)


def _paired_tiles(t: MeasuredTable, fmha_dt: np.ndarray, *, context: bool) -> np.ndarray:
    """Query tiles of a head one CTA of a prompt row's kernel carries (:data:`_PAIRED_PREFILL`:
    2; elsewhere 1; SGLang's fp8 prompt, whose query is converted to fp8 first, 1:
    :data:`~mlacalc.timemodel.attention_time.PAIRED_TILE_PREFILL`)."""
    source = t.columns.get("kernel_source")
    if not context or source is None:
        return np.ones(len(t))
    paired = np.isin(source.astype(str), _PAIRED_PREFILL)
    if t.engine == "sglang":
        paired = paired & ~np.char.startswith(fmha_dt.astype(str), "fp8")
    return np.where(paired, 2.0, 1.0)


def _fp8_cache_write(t: MeasuredTable, kvd: np.ndarray, context: bool) -> np.ndarray:
    """1 where a prompt row's engine quantizes its new K/V rows into an fp8 cache by a kernel
    bound by the SMs' clocks (:data:`~mlacalc.timemodel.attention_time.FP8_CACHE_WRITE_CLOCKS`):
    vLLM's, on either device; 0 elsewhere."""
    on = context and t.engine == "vllm"
    return np.where(on & (kvd == "fp8"), 1.0, 0.0)


def _bf16_cache_write(t: MeasuredTable, kvd: np.ndarray, context: bool) -> np.ndarray:
    """1 where a prompt row's engine writes its new K/V rows into a bf16 cache by a kernel
    that draws a share of the HBM of its own
    (:data:`~mlacalc.timemodel.attention_time.BF16_CACHE_WRITE_HBM`): vLLM's, on either
    device; 0 elsewhere."""
    on = context and t.engine == "vllm"
    return np.where(on & (kvd == "bf16"), 1.0, 0.0)


def _token_rows(
    t: MeasuredTable, tok: np.ndarray, context: bool, q_convert: np.ndarray
) -> np.ndarray:
    """The tokens of a prompt row whose engine runs a kernel of one thread block a token
    before its attention kernel, each block's fixed SM work beside its elements
    (``token_rows``, the class's fitted ``token_row_s`` a token:
    :func:`~mlacalc.timemodel.attention_time._pre_kernel_s`): vLLM's K/V cache write, on
    either device, with either cache, and SGLang's query conversion to fp8 (``q_convert``,
    its TensorRT-LLM-gen backend on B200); 0 elsewhere."""
    if not context:
        return np.zeros(len(t))
    if t.engine == "vllm":
        # a block of min(K elements, 512) threads a token: fewer resident on an SM as the KV
        # heads and head dim grow (attention_time.cache_write_block_weight)
        hkv, hd = _f(t.column("num_key_value_heads")), _f(t.column("head_dim"))
        return tok * cache_write_block_weight(hkv * hd)
    return np.where((t.engine == "sglang") & (q_convert > 0), tok, 0.0)


def _kv_upcast(t: MeasuredTable, kvd: np.ndarray) -> np.ndarray:
    """1 where a prompt or decode row's kernel keeps a bf16 query over an fp8 cache, the K/V
    blocks converted to bf16 in the kernel (``kv_upcast``,
    :data:`~mlacalc.timemodel.attention_time.KV_UPCAST_PREFILL`, the decode's
    :data:`~mlacalc.timemodel.attention_time.KV_UPCAST_STREAM_HEAD_DIM`): vLLM's
    FlashAttention-3 on H100 (kernel source ``vllm_flash_attn_fa3``); 0 elsewhere."""
    source = t.columns.get("kernel_source")
    if source is None or t.engine != "vllm":
        return np.zeros(len(t))
    return ((source.astype(str) == "vllm_flash_attn_fa3") & (kvd == "fp8")).astype(np.float64)


def _query_convert(t: MeasuredTable, fmha_dt: np.ndarray, context: bool) -> np.ndarray:
    """Elementwise kernels that convert a row's query to fp8 before its attention kernel
    (``q_convert``, :data:`~mlacalc.timemodel.attention_time.QUERY_CONVERT_KERNELS`): SGLang's
    TensorRT-LLM-gen backend (kernel source ``trtllm_mha``, B200) with an fp8 kernel; one
    (:data:`~mlacalc.timemodel.attention_time.FA3_QUERY_CAST_KERNELS`) in SGLang's
    FlashAttention-3 decode (``fa3``, H100) with an fp8 cache; none elsewhere."""
    source = t.columns.get("kernel_source")
    if source is None or t.engine != "sglang":
        return np.zeros(len(t))
    fp8 = fmha_dt == "fp8"
    on = (source.astype(str) == "trtllm_mha") & fp8
    cast = (source.astype(str) == "fa3") & fp8 & (not context)
    return np.where(on, QUERY_CONVERT_KERNELS, np.where(cast, FA3_QUERY_CAST_KERNELS, 0.0))


def _hd192_side_call(t: MeasuredTable, hd: np.ndarray) -> np.ndarray:
    """1 where a row is SGLang's call at head dim 192 (kernel source ``fa3`` on H100,
    ``triton`` on B200: :data:`_HD192_SIDE_CALL_SOURCES`), which takes a fixed wait more than
    its kernel (``hd192_side_call``,
    :data:`~mlacalc.timemodel.attention_time.HD192_SIDE_CALL_S`); 0 elsewhere."""
    source = t.columns.get("kernel_source")
    kernel = _HD192_SIDE_CALL_SOURCES.get(t.system)
    gen = "sm90" if t.system == "h100_sxm" else "tcgen05"
    if source is None or kernel is None or (t.engine, gen) not in HD192_SIDE_CALL_ENGINES:
        return np.zeros(len(t))
    return ((source.astype(str) == kernel) & (hd == 192.0)).astype(np.float64)


#: SGLang's Triton prompt kernel over an fp8 cache with a bf16 query (``attn_dtype`` bf16,
#: ``kv_cache_dtype`` fp8): a kernel of its own, the ``triton_upcast`` variant, where the
#: quirk rule of TensorRT-LLM's FMHA (a bf16 query over an fp8 cache runs the fp8 kernel) would
#: put it in the fp8 Triton class with the fp8-query rows. Triton compiles a kernel for each
#: dtype of its operands, and this one converts the fp8 K/V blocks it loads to the query's
#: bf16 (as recalled of SGLang's ``extend_attention.py``, not checked against a stored copy).
#: The tables show two kernels: at one shape (no window) the bf16-query rows take 1.07 / 1.15
#: times the bf16-cache rows at head dims 192 / 256 on B200 and 1.6-1.7 at 512 on H100, flat in
#: the prompt's length, where the fp8-query rows take 0.79-0.90 and 0.94-1.01; one class for
#: both had read the first 16% / 9% fast and the second 11% / 5% slow (signed medians, B200 /
#: H100)
TRITON_UPCAST_PROMPT = {"triton": "triton_upcast"}


def _upcast_prompt_variants(
    t: MeasuredTable, variant: np.ndarray, attn: np.ndarray, kvd: np.ndarray, context: bool
) -> np.ndarray:
    """``variant`` with SGLang's Triton prompt rows of a bf16 query over an fp8 cache renamed
    to their own kernel's (:data:`TRITON_UPCAST_PROMPT`); every other row as it is."""
    if not context or t.engine != "sglang":
        return variant
    out = np.asarray(variant, dtype=object).copy()
    upcast = (attn == "bf16") & (kvd == "fp8")
    for name, own in TRITON_UPCAST_PROMPT.items():
        out[upcast & (out == name)] = own
    return out.astype(str)


#: The kernel (``kernel_source``) of SGLang's head dim 192 rows per system: FlashAttention-3 on
#: H100, Triton on B200
_HD192_SIDE_CALL_SOURCES = {"h100_sxm": "fa3", "b200_sxm": "triton"}


def _unit_latency(t: MeasuredTable) -> np.ndarray:
    """1 where a decode row's kernel takes a unit's own per-unit work whatever the units
    (``unit_latency``, :data:`~mlacalc.timemodel.attention_time.UNIT_LATENCY_DECODE`): SGLang's
    B200 rows of its TensorRT-LLM-gen backend (kernel source ``trtllm_mha``); 0 elsewhere."""
    source = t.columns.get("kernel_source")
    gen = "tcgen05" if t.system == "b200_sxm" else "sm90"
    if source is None or (t.engine, gen) not in UNIT_LATENCY_DECODE:
        return np.zeros(len(t))
    return (source.astype(str) == "trtllm_mha").astype(np.float64)


def _combine_kernel(t: MeasuredTable, context: bool) -> np.ndarray:
    """1 where a decode row's FlashAttention-3 call runs its split-combine kernel whatever the
    splits (``combine_kernel``,
    :data:`~mlacalc.timemodel.attention_time.ALWAYS_COMBINE_DECODE`): vLLM's H100 rows
    (kernel source ``vllm_flash_attn_fa3``); 0 elsewhere."""
    source = t.columns.get("kernel_source")
    if context or source is None or t.engine != "vllm":
        return np.zeros(len(t))
    return (source.astype(str) == "vllm_flash_attn_fa3").astype(np.float64)


def _local_window(t: MeasuredTable, context: bool, win: np.ndarray, kv: np.ndarray) -> np.ndarray:
    """1 where a decode row's FlashAttention-3 call runs its local (sliding-window) kernel
    (``local_window``, :data:`~mlacalc.timemodel.attention_time.LOCAL_WINDOW_DECODE`): vLLM's
    H100 rows (kernel source ``vllm_flash_attn_fa3``) whose cache is longer than the window;
    0 elsewhere."""
    source = t.columns.get("kernel_source")
    if context or source is None or t.engine != "vllm":
        return np.zeros(len(t))
    fa3 = source.astype(str) == "vllm_flash_attn_fa3"
    return (fa3 & (win > 0) & (kv > win)).astype(np.float64)


#: ``kernel_source`` of a prompt row that the engine ran through its decode kernel: vLLM's
#: FlashInfer backend on B200 sends a prompt of one token (its batch-reorder threshold) down
#: its decode path, and its prompt table names the generation table's kernel for exactly those
#: rows (``isl`` 1; 16 tokens and more ``vllm_flashinfer_trtllmprefill``).
DECODE_PATH_ATTENTION_SOURCES = frozenset({"vllm_flashinfer_trtllmdecode"})
#: Prompt kernels whose one-token prompt rows are the decode call (one query over the cache):
#: vLLM's FlashAttention-3 on H100, whose prompt rows of one token take the time of its decode
#: rows of the same batch and heads (0.99-1.00x at every batch, 1,690-1,734 shape pairs a dtype)
DECODE_PATH_ONE_TOKEN_SOURCES = frozenset({"vllm_flash_attn_fa3"})


def _attention_table(t: MeasuredTable, b: _Builder, reason: np.ndarray, *, context: bool) -> None:
    """A prompt or decode attention table; a prompt table's rows that name a decode kernel
    (:data:`DECODE_PATH_ATTENTION_SOURCES`), or are one token of a kernel whose decode is the same
    call (:data:`DECODE_PATH_ONE_TOKEN_SOURCES`), are that kernel's call of one query over the
    prompt's keys, the decode class of the row's dtype (the generation table's kernel)."""
    source = t.columns.get("kernel_source")
    latent = np.zeros(len(t), bool)
    if context and source is not None:
        latent = np.isin(source.astype(str), sorted(DECODE_PATH_ATTENTION_SOURCES))
        one = np.isin(source.astype(str), sorted(DECODE_PATH_ONE_TOKEN_SOURCES))
        latent = latent | (one & (_f(t.column("isl")) == 1.0))
    if not latent.any():
        _attention_rows(t, b, reason, context=context)
        return
    for sel, ctx in ((~latent, True), (latent, False)):
        idx = np.flatnonzero(sel)
        sub = dataclasses.replace(
            t, columns={k: v[idx] for k, v in t.columns.items()}, seconds=t.seconds[idx]
        )
        part_b, part_r = _Builder(len(idx), t.engine), reason[idx]
        _attention_rows(sub, part_b, part_r, context=ctx, prompt_keys=not ctx)
        b.parts.extend(KernelPart(p.name, idx[p.rows], p.batch) for p in part_b.parts)
        reason[idx] = part_r


def _attention_rows(
    t: MeasuredTable,
    b: _Builder,
    reason: np.ndarray,
    *,
    context: bool,
    prompt_keys: bool = False,
) -> None:
    """The rows of an attention table as prompt (``context``) or decode kernels; a decode row
    of a prompt table (``prompt_keys``) attends the prompt's ``isl`` keys, the decode class of
    its dtype (the variant of the generation table's main kernel: none)."""
    bs, hq, hkv = (
        _f(t.column("batch_size")),
        _f(t.column("num_heads")),
        _f(t.column("num_key_value_heads")),
    )
    hd, win = _f(t.column("head_dim")), _f(t.column("window_size"))
    attn, kvd = canon_dtypes(t.column("attn_dtype")), canon_dtypes(t.column("kv_cache_dtype"))
    rows = np.arange(len(t))
    kvb = _elem(kvd)
    if context:
        q = _f(t.column("isl"))
        kv = q.copy()
        # quirk rule: context rows labelled bf16 attention + fp8 KV run the fp8 FMHA (their
        # latencies match the fp8/fp8 rows), so their FMHA dtype is fp8
        fmha_dt = np.where((attn == "fp8") | (kvd == "fp8"), "fp8", "bf16")
    else:
        q = np.ones(len(t))
        kv = _f(t.column("isl")) if prompt_keys else _f(t.column("step")) + 1.0
        # with an fp8 cache the decode kernel multiplies in fp8 (on a device with fp8 tensor
        # cores): at large batch and short context the bf16-cache rows take 2.2x the time of
        # the fp8-cache rows, more than the halved cache bytes explain
        fmha_dt = np.where(kvd == "fp8", "fp8", attn)
    # a kernel that upcasts an fp8 cache keeps a bf16 query (``kv_upcast``)
    upcast = _kv_upcast(t, kvd)
    qb = _elem(fmha_dt if context else attn)  # decode queries stay in the attention dtype
    qb = np.where(upcast > 0, 2.0, qb)
    tok = bs * q
    kv_eff = np.where(win > 0, np.minimum(kv, win), kv)
    rot = np.minimum(hd, _ROTARY)
    # QKV preprocessing: fused QKV read, Q written for the attention kernel, K/V rows appended
    pre_bytes = tok * (hq + 2 * hkv) * hd * 2 + tok * hq * hd * qb + tok * 2 * hkv * hd * kvb
    # vLLM's prompt rows with an fp8 cache quantize the new K/V rows into it at SM clocks
    # (``cache_quant_elements``, attention_time.FP8_CACHE_WRITE_CLOCKS), not at a stream's bytes
    quant = _fp8_cache_write(t, kvd, context) * tok * 2 * hkv * hd
    # and their bf16 cache's write at a share of the HBM of its own (``cache_write_elements``,
    # attention_time.BF16_CACHE_WRITE_HBM)
    write = _bf16_cache_write(t, kvd, context) * tok * 2 * hkv * hd
    pre_bytes = pre_bytes - quant * (2.0 + kvb) - write * (2.0 + kvb)
    out_b = np.where(kvd == "fp8", 1.0, 2.0) if not context else 2.0
    kv_reads = np.full(len(t), 2.0)  # cache passes from HBM: K and V
    if context:
        pairs = bs * _pairs(q, win)
        kv_read = tok * 2 * hkv * hd * kvb
        kind = "attention_prefill"
    else:
        pairs = bs * kv_eff
        kv_read = bs * 2 * hkv * kv_eff * hd * kvb
        if t.system == "a100_sxm":
            # mapping rule (K-only cache): the A100 collector allocated the cache as SELFKONLY
            # (TABLES.md, which calls it a suspected cause, not a proven one) and its
            # grouped-query rows reach 1.65x the K+V bytes at the datasheet HBM bandwidth,
            # 0.83x of K alone. The hypothesis taken: the V of a block is read from the L2 right
            # after its K (the XQA kernel walks a block's K then its V), so they move K's bytes.
            # MMHA rows (one head a unit, or more than 32 query heads per KV head) read V in a
            # second pass, after K has left the L2 at long caches, and keep K + V
            xqa = (hq > hkv) & (hq <= 32 * hkv)
            # (the MMHA second pass finds K in the L2 too where the K rows of the units
            # resident at once, four on each of the A100's 108 SMs, fit in its 40 MB: with
            # K + V the fitted model put the MHA rows at 128 and 256 cached keys and batch
            # >= 16 23-35% too slow, at 512 and more 3-4%; fitted A100 7.7% -> 7.3%, p90
            # 25.5% -> 24.5%, and the 53 rows the faster-than-HBM rule excluded now fit HBM)
            resident = np.minimum(bs * hq, 4.0 * 108.0) * kv_eff * hd * kvb
            in_l2 = resident <= SYSTEM_L2_BYTES[t.system]
            kv_reads = np.where(xqa | in_l2, 1.0, kv_reads)
            kv_read = kv_read * kv_reads / 2.0
        kind = "attention_decode"
    flops = 2.0 * hq * pairs * (hd + hd)
    head_pack = _head_pack(t, context=context)
    # the cache a decode row's warm replay reads again (``cache_bytes``, :data:`WARM_CACHE_ENGINES`)
    warm_cache = kv_read if (not context and t.engine in WARM_CACHE_ENGINES) else np.zeros(len(t))
    nbytes = pre_bytes + tok * hq * hd * qb + kv_read + tok * hq * hd * out_b
    b.add_by_dtype(
        "attention" if context else "attention_decode",
        kind,
        fmha_dt,
        rows,
        flops,
        nbytes,
        variant=""
        if prompt_keys
        else _upcast_prompt_variants(t, _source_variants(t, fmha_dt), attn, kvd, context),
        batch=bs,
        q_len=q,
        kv_len=kv,
        n_heads=hq,
        n_kv=hkv,
        head_dim_qk=hd,
        head_dim_v=hd,
        window=win,
        causal=1,
        sinks=(hd == 64).astype(np.float64),
        page_size=_PAGE,
        kv_bytes=kvb,
        head_pack=head_pack,
        paired_tiles=_paired_tiles(t, fmha_dt, context=context),
        operand_async=_operand_async(t, fmha_dt, context=context),
        q_convert=_query_convert(t, fmha_dt, context),
        combine_kernel=_combine_kernel(t, context),
        unit_latency=_unit_latency(t),
        local_window=_local_window(t, context, win, kv),
        hd192_side_call=_hd192_side_call(t, hd),
        cache_bytes=warm_cache,
        preprocess_bytes=pre_bytes,
        cache_quant_elements=quant,
        cache_write_elements=write,
        kv_upcast=upcast,
        rope_elements=tok * (hq + hkv) * rot,
        kv_reads=kv_reads,
        token_rows=_token_rows(t, tok, context, _query_convert(t, fmha_dt, context)),
    )
    bad = np.char.startswith(fmha_dt.astype(str), "?") | np.char.startswith(kvd, "?")
    reason[bad] = "unknown_dtype"


#: ``kernel_source`` of the stand-alone MLA prompt rows (``context_mla_perf``) whose kernel runs
#: the prompt absorbed (latent queries over the shared latent rows), not expanded: SGLang's
#: FlashAttention-3 backend (its H100 rows), whose MLA ``forward_extend`` takes the latent path
#: (``flash_attn_with_kvcache`` with ``qv``) unless the model's dispatch has set up its
#: multi-head path; read as expanded they draw 18% of H100's bf16 peak at every head count,
#: absorbed 60-66% (docs/measured-sets.md). A model step's prompt under SGLang stays expanded:
#: the dispatch runs a prompt with no cached prefix multi-head (the module rows' dense path).
ABSORBED_PROMPT_SOURCES = frozenset({"flash_attention"})
#: FlashAttention-3's tile (query rows and keys) for the absorbed prompt: a 64-wide q/k head
#: with 512-wide values (``qv``) takes 64 x 64.
ABSORBED_PROMPT_TILE = 64.0


def _mla_core(
    b: _Builder,
    rows,
    bs,
    h,
    q,
    kv,
    kvd,
    *,
    context: bool,
    a100: bool = False,
    prefix: str = "",
    variant="",
    attn_fp8=None,
    operand_under=(),
    convert=None,
    absorbed=None,
    flashmla=False,
    wrapper=0.0,
    chain=False,
) -> None:
    """The MLA attention call of the MLA tables, one kernel with its RoPE and cache write.
    ``variant``: the class variant per row (the engine's attention backend, from
    ``kernel_source``); ``attn_fp8``: per row whether the prompt kernel is an fp8 FMHA (default:
    with an fp8 cache, TensorRT-LLM's rule); ``convert``: per row whether the kernel has its fp8
    cache converted to bf16 by a kernel of its own (``cache_convert``; default none);
    ``absorbed``: per row whether the prompt kernel runs in latent space (default none:
    :data:`ABSORBED_PROMPT_SOURCES`); ``wrapper``: per decode row the engine's seconds a query
    row and head beyond the kernel (:func:`~mlacalc.timemodel.mla_time.wrapper_row_head_s`);
    ``chain``: whether the decode call runs between the absorption BMMs of a module row
    (``absorbed_chain``, :data:`~mlacalc.timemodel.mla_time.CHAIN_SAVING_S`)."""
    g = DSV3
    kvb = _elem(kvd)
    tok = bs * q
    qk, v, lat = g["nope"] + g["rope"], g["v"], g["kv_lora"] + g["rope"]
    # a converted cache (``cache_convert``) is attended in bf16: q is not quantized
    convert = np.zeros(len(rows), bool) if convert is None else np.asarray(convert, bool)
    if context:
        # RoPE on the rope parts of q and k (read and written), latent read and cache write
        pre = 2 * 2 * tok * h * g["rope"] * 2 + tok * lat * (2 + kvb)
        pairs = bs * _pairs(q, np.zeros_like(q))
        lat_ = np.zeros(len(rows), bool) if absorbed is None else np.asarray(absorbed, bool)
        # expanded: 192-wide q/k and 128-wide v a head; absorbed: each query head's 576-wide
        # latent query against the one shared latent key row (512-wide values), a converted
        # cache's rows read in bf16
        d_qk, d_v = np.where(lat_, lat, qk), np.where(lat_, g["kv_lora"], v)
        flops = 2.0 * h * pairs * (d_qk + d_v)
        # with an fp8 cache the expanded attention is an fp8 FMHA: q, k and v are quantized
        # (read in bf16, written in fp8) and read by the kernel in fp8; the output stays bf16
        fp8 = kvb < 2 if attn_fp8 is None else np.asarray(attn_fp8, dtype=bool)
        fp8 = fp8 & ~lat_
        qkv = np.where(lat_, tok * h * lat + bs * q * lat, tok * h * (qk + qk + v))
        nbytes = pre + np.where(fp8, qkv * 3.0 + qkv, qkv * 2.0) + tok * h * d_v * 2.0
        # the quantization of q, k and v is a pass before the attention kernel, with the RoPE
        # and the cache write: its bytes stream beside no products (``preprocess_bytes``)
        pre = pre + np.where(fp8, qkv * 3.0, 0.0)
        extra = {}
        if lat_.any():
            # FlashAttention-3's latent prompt (``flash_attn_with_kvcache`` with ``qv``): every
            # query head of the one latent KV head packed into a tile's rows (``pack_gqa``),
            # 64 query rows x 64 keys a tile (its tile for a 64-wide q/k head with 512-wide
            # values)
            extra = {
                "head_pack": np.where(lat_, 0.0, 1.0),
                "tile_rows": np.where(lat_, ABSORBED_PROMPT_TILE, 128.0),
                "tile_keys": np.where(lat_, ABSORBED_PROMPT_TILE, 128.0),
                "cache_convert": (lat_ & convert).astype(np.float64),
            }
        if operand_under:
            # (:data:`~mlacalc.timemodel.mla_time.OPERANDS_UNDER_PRODUCTS`: the dtypes given)
            dt = np.where(fp8, "fp8", "bf16")
            extra["operand_under"] = np.isin(dt, list(operand_under)).astype(np.float64)
        b.add_by_dtype(
            prefix + "mla_context",
            "mla_prefill",
            np.where(fp8, "fp8", "bf16"),
            rows,
            flops,
            nbytes,
            variant=variant,
            batch=bs,
            q_len=q,
            kv_len=q,
            n_heads=h,
            n_kv=np.where(lat_, 1.0, h),
            head_dim_qk=d_qk,
            head_dim_v=d_v,
            window=0,
            causal=1,
            kv_bytes=kvb,
            preprocess_bytes=pre,
            rope_elements=tok * (h + 1) * g["rope"],
            **extra,
        )
    else:
        qb = np.where((kvd == "fp8") & ~convert, 1.0, 2.0)
        # mla_rope_generation: q read and written in bf16, latent appended; with an fp8 cache
        # q is then quantized to fp8 in a pass of its own (bf16 read, fp8 written): the H100
        # fp8 rows at step 1 take more time than the bf16 ones (b = 1024, 128 heads: 311 against
        # 238 us, about 3 bytes more per q element), not less as a fused fp8 write would
        quant_q = np.where(qb < 2, tok * h * lat * 3.0, 0.0)
        pre = tok * h * lat * 4.0 + tok * lat * (2 + kvb) + quant_q
        # the q new tokens of a sequence are its last: token i of q attends kv - q + i keys
        pairs = q * kv - q * (q - 1.0) / 2.0
        flops = 2.0 * h * bs * pairs * (lat + g["kv_lora"])
        nbytes = pre + bs * kv * lat * kvb + tok * h * lat * qb + tok * h * g["kv_lora"] * 2

        b.add_by_dtype(
            prefix + "mla_decode",
            "mla_decode",
            np.where(kvd == "fp8", "fp8", "bf16"),
            rows,
            flops,
            nbytes,
            variant=variant,
            batch=bs,
            q_len=q,
            kv_len=kv,
            n_heads=h,
            n_kv=1,
            head_dim_qk=lat,
            head_dim_v=g["kv_lora"],
            window=0,
            causal=1,
            page_size=_PAGE,
            kv_bytes=kvb,
            # the kernel the measured device ran (kv_split, operand_reads): the A100 rows
            # TensorRT-LLM 1.0's SM80 kernel, which never splits a sequence's keys (mma.sync,
            # four 16-row warps per 64-head tile, each reading every key and value row from
            # shared memory), the H100 rows FlashMLA; the operand reads by the rule a model
            # step's kernel follows
            **mla_decode_kernel(
                load_hardware("a100_sxm" if a100 else "h100_sxm"), non_splitting=a100
            ),
            cache_convert=convert.astype(np.float64),
            combine_always=np.broadcast_to(np.asarray(flashmla, np.float64), (len(rows),)),
            wrapper_row_head_s=np.broadcast_to(np.asarray(wrapper, np.float64), (len(rows),)),
            absorbed_chain=np.full(len(rows), float(chain)),
            preprocess_bytes=pre,
            rope_elements=tok * (h + 1) * g["rope"],
        )


def flashmla_rows(t: MeasuredTable) -> np.ndarray:
    """Per row whether a table's MLA decode kernel is FlashMLA, which launches its combine
    kernel on every call (``combine_always``): TensorRT-LLM's H100 tables (TABLES.md: "FlashMLA,
    64 tokens/block on SM90") and vLLM's H100 rows of its FLASHMLA backend (``kernel_source``)."""
    if t.system != "h100_sxm":
        return np.zeros(len(t), bool)
    if t.engine == "trtllm":
        return np.ones(len(t), bool)
    if t.engine == "vllm" and "kernel_source" in t.columns:
        return t.columns["kernel_source"].astype(str) == "FLASHMLA"
    return np.zeros(len(t), bool)


def _mla_table(t: MeasuredTable, b: _Builder, reason: np.ndarray, *, context: bool) -> None:
    bs, h = _f(t.column("batch_size")), _f(t.column("num_heads"))
    kvd = canon_dtypes(t.column("kv_cache_dtype"))
    rows = np.arange(len(t))
    a100 = t.system == "a100_sxm"
    if a100:
        # mapping rule (fp8_label_is_bf16): A100 has no fp8 tensor cores; its MLA rows
        # labelled fp8 KV time as the bf16 rows, so they ran the bf16-KV kernels
        kvd = np.where(kvd == "fp8", "bf16", kvd)
    if context:
        q, kv = _f(t.column("isl")), _f(t.column("isl"))
    else:
        q, kv = np.ones(len(t)), _f(t.column("step")) + 1.0
    # SGLang's FlashAttention-3 backend (``kernel_source`` flash_attention, its H100 rows) does
    # not read an fp8 latent cache: a kernel of its own converts it to bf16 first
    # (``cache_convert``; :func:`~mlacalc.timemodel.mla_time.mla_decode_terms`), and its
    # prompt rows run absorbed (:data:`ABSORBED_PROMPT_SOURCES`)
    convert = absorbed = None
    if "kernel_source" in t.columns:
        src = t.columns["kernel_source"].astype(str)
        convert = (src == "flash_attention") & (kvd == "fp8")
        absorbed = np.isin(src, sorted(ABSORBED_PROMPT_SOURCES)) & context
    _mla_core(
        b,
        rows,
        bs,
        h,
        q,
        kv,
        kvd,
        context=context,
        a100=a100,
        convert=convert,
        absorbed=absorbed,
        flashmla=flashmla_rows(t),
    )


#: vLLM's RMSNorm run as PyTorch's native chain (``RMSNorm.forward_native``: the input cast to
#: fp32, squared, averaged over the row, the epsilon added, its reciprocal square root, the
#: product, the cast back to bf16 and the weight's product): eight kernels, whose passes over
#: the row move 36 bytes an element (2 + 4 read and written by the cast, 4 + 4 by the square,
#: 4 by the mean, 4 + 4 by the product, 4 + 2 by the cast back, 2 + 2 by the weight's product;
#: the row-sized steps nothing), where vLLM's fused kernel moves 4.
NATIVE_NORM_KERNELS = 8.0
NATIVE_NORM_BYTES = 36.0


def native_norm_chain(t: MeasuredTable) -> bool:
    """Whether a vLLM module table's RMSNorms ran as PyTorch's native chain of ops
    (:data:`NATIVE_NORM_KERNELS`), not vLLM's fused kernel: a table whose collection metadata
    records no ``norm_dispatch``. The B200 tables were collected again with the collector's
    fused-op fix and record ``norm_dispatch: vllm_c_eager_surrogate`` (their metadata: "the
    previous rows ran the never-in-serving native chain (+34%)"); the H100 tables record none,
    collected before that fix. Other engines run their own fused norms."""
    return t.engine == "vllm" and "norm_dispatch" not in (t.meta.get("status") or {})


def _module_norms(t: MeasuredTable, b: _Builder, rows, tok, q_width, kv_width) -> None:
    """The module's q_a and kv_a RMSNorms over ``tok`` tokens: each one fused kernel (2 bytes
    read and 2 written an element), or vLLM's native chain of PyTorch ops where the table's
    collector ran it (:func:`native_norm_chain`)."""
    native = native_norm_chain(t)
    per_elem = NATIVE_NORM_BYTES if native else 4.0
    shape = {"launches": NATIVE_NORM_KERNELS} if native else {}
    for name, width in (("q_a_norm", q_width), ("kv_a_norm", kv_width)):
        b.add(
            name,
            "elementwise",
            "bf16",
            rows,
            0.0,
            tok * width * per_elem + width * 2,
            elements=tok * width,
            **shape,
        )


def _mla_module_table(t: MeasuredTable, b: _Builder, reason: np.ndarray, *, context: bool) -> None:
    g = DSV3
    bs, h = _f(t.column("batch_size")), _f(t.column("num_heads"))
    kvd, gt = canon_dtypes(t.column("kv_cache_dtype")), canon_dtypes(t.column("gemm_type"))
    rows = np.arange(len(t))
    if context:
        q, kv = _f(t.column("isl")), _f(t.column("isl"))
    else:
        q, kv = np.ones(len(t)), _f(t.column("step")) + 1.0
    tok = bs * q
    lat = g["kv_lora"] + g["rope"]
    # a prompt the engine sends down its decode path (:func:`decode_path_prompts`) runs the
    # absorption BMMs and the latent decode kernel, not the kv_b expansion and the prompt kernel
    latent = decode_path_prompts(t) if context else np.ones(len(t), bool)
    one = np.ones(len(t))
    proj = {  # (n, k) of each projection
        "q_a+kv_a": ((g["q_lora"] + lat) * one, g["hidden"] * one),
        "q_b": (h * (g["nope"] + g["rope"]), g["q_lora"] * one),
        "o_proj": (g["hidden"] * one, h * g["v"]),
    }
    elem = np.select([gt == "fp8_block", gt == "nvfp4"], [1.0, 0.5], 2.0)
    # the bytes one replay of the module cycles through the L2 (:func:`module_l2_bytes`): each
    # GEMM's weight stays resident only as one of them (``weight_copies``, the collector's rule
    # for the GEMM tables' copies)
    kv_up = h * (g["nope"] + g["v"]) * g["kv_lora"] * 2.0  # kv_b, or the two BMMs' weights
    cycled = module_l2_bytes(
        sum(n * k for n, k in proj.values()) * elem + kv_up, bs * kv * lat * _elem(kvd)
    )
    for d in ("bf16", "fp8_block", "nvfp4"):
        s = gt == d
        if not s.any():
            continue
        r, tk = rows[s], tok[s]
        for name, (n, k) in proj.items():
            copies = cycled[s] / (n[s] * k[s] * elem[s])
            _gemm_kernels(b, name, r, d, tk, n[s], k[s], weight_copies=copies)
    _module_norms(t, b, rows, tok, g["q_lora"], g["kv_lora"])
    r, copies = rows[~latent], cycled[~latent] / kv_up[~latent]
    kv_n = h[~latent] * (g["nope"] + g["v"])
    _gemm_kernels(b, "kv_b", r, "bf16", tok[~latent], kv_n, g["kv_lora"], weight_copies=copies)
    if context:
        _k_assemble(b, r, tok[~latent], h[~latent])
    r, tk, hh = rows[latent], tok[latent], h[latent]
    # each BMM's weight is half of kv_b's
    copies = 2.0 * cycled[latent] / kv_up[latent]
    for name, n, k in (("bmm_pre", g["kv_lora"], g["nope"]), ("bmm_post", g["v"], g["kv_lora"])):
        _gemm_kernels(b, name, r, "bf16", tk, n, k, hh, variant="bmm", weight_copies=copies)
    # SGLang's and vLLM's module tables time several attention backends (``kernel_source``:
    # vLLM's FLASH_ATTN, FLASH_ATTN_MLA, FLASHMLA on H100, FLASH_ATTN, FLASHINFER_MLA,
    # TRTLLM_RAGGED on B200), each a variant of the MLA class; their prompt kernel runs in the
    # ``mla_dtype`` the row names (vLLM's FLASH_ATTN prefill stays bf16 over an fp8 cache),
    # where TensorRT-LLM's runs an fp8 FMHA over an fp8 cache
    attn_fp8 = None
    if t.engine != "trtllm" and "mla_dtype" in t.columns:
        attn_fp8 = canon_dtypes(t.column("mla_dtype")) == "fp8"
    core_dt = np.where(
        (kvd == "fp8") if attn_fp8 is None or not context else attn_fp8, "fp8", "bf16"
    )
    wrap = wrapper_rows(t, kvd)
    if not context:
        variant = _source_variants(t, core_dt) if t.engine != "trtllm" else ""
        _mla_core(
            b,
            rows,
            bs,
            h,
            q,
            kv,
            kvd,
            context=False,
            variant=variant,
            flashmla=flashmla_rows(t),
            wrapper=wrap,
            chain=True,
        )
    else:
        # the prompts on the decode path take the decode class of their cache's dtype (the
        # generation table's kernel, the same backend); the others the prompt kernel's, a
        # variant per backend
        p = ~latent
        variant = (
            _source_variants(t, np.where(p, core_dt, "latent")) if t.engine != "trtllm" else ""
        )
        v = variant[p] if isinstance(variant, np.ndarray) else variant
        fp8 = None if attn_fp8 is None else attn_fp8[p]
        # the prompt kernels that issue their operand reads under their products
        gen = device_figures(load_hardware(t.system)).kernel_generation
        under = {d for e, g_, d in OPERANDS_UNDER_PRODUCTS if (e, g_) == (t.engine, gen)}
        _mla_core(
            b,
            rows[p],
            bs[p],
            h[p],
            q[p],
            kv[p],
            kvd[p],
            context=True,
            variant=v,
            attn_fp8=fp8,
            operand_under=under,
        )
        d = latent
        _mla_core(
            b,
            rows[d],
            bs[d],
            h[d],
            q[d],
            kv[d],
            kvd[d],
            context=False,
            flashmla=flashmla_rows(t)[d],
            wrapper=wrap[d],
            chain=True,
        )
    reason[np.char.startswith(gt, "?")] = "unknown_dtype"


def wrapper_rows(t: MeasuredTable, kvd: np.ndarray) -> np.ndarray:
    """Per row of an MLA module table the seconds a query row and head its engine's MLA decode
    call spends beyond the kernel on the table's device, by the row's cache dtype
    (:func:`~mlacalc.timemodel.mla_time.wrapper_row_head_s`: vLLM's FLASHINFER_MLA on B200);
    the rule a model step follows (:func:`~mlacalc.timemodel.mla_time.engine_mla_kernel`)."""
    fig = device_figures(load_hardware(t.system))
    each = {d: wrapper_row_head_s(t.engine, fig, d) for d in ("bf16", "fp8")}
    return np.where(kvd == "fp8", each["fp8"], each["bf16"])


def module_l2_bytes(weights, cache) -> np.ndarray:
    """Bytes one replay of a module row moves through the L2 that the next replay would find
    there: every weight of its GEMMs and BMMs (``weights``) and the cached rows its attention
    reads (``cache``). A GEMM's weight is resident at the next replay only where all of them fit
    (the GEMM class's ``weight_copies``, as the GEMM tables' collector cycles ``c`` copies of
    one weight), not where it alone fits: TensorRT-LLM's H100 decode module at 16-64 heads and
    up to 16 sequences (q_b and o_proj 9-117 MB together with the 30 MB fused q_a+kv_a weight)
    read 5-12% short with each weight taken alone."""
    return np.asarray(weights, dtype=np.float64) + np.asarray(cache, dtype=np.float64)


def _k_assemble(b: _Builder, rows, tok, h) -> None:
    """The expanded prompt's keys put together before its attention kernel, a copy kernel of
    its own in every engine (:func:`mlacalc.cost.model_step.k_assemble_bytes`, the one
    definition a served step counts too): the prompt kernel classes are fitted on stand-alone
    rows that hand it whole keys (TensorRT-LLM's ``context_mla_perf``) or on these rows'
    residuals with the copy timed here (vLLM's). Evidence: TensorRT-LLM's H100 module rows of
    4,096 prompt tokens and more fall short by 0.25 ns a token and head with bf16 projections
    (0.15 fp8_block), where the copy's 640 bytes at 0.8 of the HBM take 0.24 ns
    (docs/time-model.md, "MLA module rows")."""
    g = DSV3
    b.add(
        "k_assemble",
        "elementwise",
        "bf16",
        rows,
        0.0,
        k_assemble_bytes(tok, h, g["nope"], g["rope"]),
        elements=tok * h * (g["nope"] + g["rope"]),
    )


#: vLLM's MLA decode backends, each of which runs a prompt of up to its batch-reorder threshold
#: of tokens down its decode path (absorbed q, the latent decode kernel over the sequence's
#: cached rows, q tokens a sequence), the ``kernel_source`` vLLM's prompt module rows name for
#: exactly those lengths: FLASH_ATTN_MLA up to 512 tokens and FLASHMLA up to 128 (H100; longer
#: prompts FLASH_ATTN's prompt kernel), FLASHINFER_MLA at one (B200; 16 and more FLASH_ATTN or
#: TRTLLM_RAGGED).
DECODE_PATH_SOURCES = frozenset({"FLASH_ATTN_MLA", "FLASHMLA", "FLASHINFER_MLA"})


def decode_path_prompts(t: MeasuredTable) -> np.ndarray:
    """Per row of a prompt module table whether the engine ran it down its MLA decode path:
    a prompt of up to :func:`~mlacalc.timemodel.mla_time.decode_path_tokens` tokens on the
    table's device with the row's cache dtype, the rule a served step follows too (vLLM's
    rows that name a decode backend, :data:`DECODE_PATH_SOURCES`, are exactly those)."""
    if "isl" not in t.columns:
        return np.zeros(len(t), bool)
    fig = device_figures(load_hardware(t.system))
    kvd = canon_dtypes(t.column("kv_cache_dtype"))
    limit = np.array([decode_path_tokens(t.engine, fig, str(d)) for d in kvd], dtype=np.float64)
    return _f(t.column("isl")) <= limit


#: SGLang's fp8 MLA BMM (``kernel_source``): the per-tensor ``bmm_fp8``
#: (:data:`~mlacalc.timemodel.gemm_time.PER_TENSOR_BMM_ENGINES`)
SGLANG_BMM_FP8_SOURCE = "sglang_sgl_kernel_bmm_fp8"


def _mla_bmm_table(t: MeasuredTable, b: _Builder, reason: np.ndarray) -> None:
    op = t.column("op_name")
    dt = canon_dtypes(t.column("bmm_dtype"))
    dt = np.where(dt == "fp8", "fp8_block", dt)  # fp8 BMMs are 1x128 block-scaled
    # except TensorRT-LLM's on Blackwell (``kernel_source`` ``trtllm_bmm_out_dequant_bf16``):
    # its fp8 weights are dequantized to bf16 when loaded and the BMM runs in bf16 on bf16
    # activations, nothing quantized per call (B200: the same time as the bf16 rows, 4.4-92.6
    # us against 4.4-92.5 us at every shape)
    # and SGLang's (``sglang_sgl_kernel_bmm_fp8``, both devices): the per-tensor ``bmm_fp8`` on
    # an input quantized by small CTAs, one a (token, head) in each of two kernels
    # (gemm_time.PER_TENSOR_BMM_ENGINES)
    if "kernel_source" in t.columns:
        src = t.column("kernel_source").astype(str)
        dt = np.where(np.char.endswith(src, "_dequant_bf16"), "bf16", dt)
        dt = np.where(src == SGLANG_BMM_FP8_SOURCE, "fp8", dt)
    T, h = _f(t.column("num_tokens")), _f(t.column("num_heads"))
    rows = np.arange(len(t))
    pre = op == "mla_gen_pre"
    n = np.where(pre, DSV3["kv_lora"], DSV3["nope"])
    k = np.where(pre, DSV3["nope"], DSV3["kv_lora"])
    for d in ("bf16", "fp8_block", "fp8"):
        s = (dt == d) & np.isin(op, ["mla_gen_pre", "mla_gen_post"])
        if s.any():
            ctas, var = (MLA_QUANT_CTAS, PER_TENSOR_BMM) if d == "fp8" else (0.0, "bmm")
            _gemm_kernels(b, "bmm", rows[s], d, T[s], n[s], k[s], h[s], permute=1,
                          variant=var, quant_ctas=ctas)  # fmt: skip
    reason[~np.isin(dt, ["bf16", "fp8_block", "fp8"])] = "unknown_dtype"


def _version_key(version: str) -> tuple[int, ...] | None:
    """(major, minor) of a TensorRT-LLM ``version`` ("1.0.0", "1.3.0rc20"), or None where it
    does not start with two numbers."""
    try:
        return tuple(int(v) for v in version.split(".")[:2])
    except ValueError:
        return None


def _moe_pre_1_0(framework: str, version: str) -> bool:
    """Whether a ``moe_perf`` table came from TensorRT-LLM's collector used up to its 1.0
    (``collect_moe_pre_1_0.py``). The version is TensorRT-LLM's only: SGLang's 0.5 and vLLM's
    0.24 tables are of the later collector (their power-law rows of one or two tokens take the
    balanced row's time, docs/time-model.md, "SGLang's and vLLM's power-law rows of few
    tokens")."""
    key = _version_key(version)
    return framework == "trtllm" and key is not None and key <= (1, 0)


def _draws_round_to_zero(pairs: np.ndarray, experts: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    """Whether every power-law draw of a ``moe_perf`` call of ``pairs`` (token, expert)
    assignments over ``experts`` rounds to zero: the draws of a call of at most ``experts``
    pairs lie in [0.01, 2] (:func:`~mlacalc.measured.moe_routing.power_law_draws`) and are
    scaled to sum to ``pairs``, about ``experts`` times the bounded power law's mean; the
    largest, 2, scaled stays below 1/2."""
    lo, hi = 0.01, 2.0
    a = np.asarray(alpha, dtype=np.float64)
    a = np.where(np.abs(a - 1.0) < 1e-6, 1.0 + 1e-6, a)  # the limits at 1 and 2 are finite
    a = np.where(np.abs(a - 2.0) < 1e-6, 2.0 + 1e-6, a)
    mean = (hi ** (2 - a) - lo ** (2 - a)) / (2 - a) * (1 - a) / (hi ** (1 - a) - lo ** (1 - a))
    return (pairs <= experts) & (hi * pairs < 0.5 * experts * mean)


#: (hidden, inter_size, experts, top-k) of the MoE shapes whose experts have no gate
#: (Nemotron-H's squared-ReLU experts, two matrices): TensorRT-LLM's tables time exactly these
#: shapes with their ``_nongated`` kernels; SGLang's and vLLM's tables time them without the
#: label, and read as gated (three matrices) 649 of vLLM's 4,455 H100 rows of them, 906 of
#: 3,321 B200 rows and 3,399 of SGLang's 22,032 B200 rows would beat the HBM roofline (vLLM
#: H100, bf16, one token, top-22 of 512: 334 us where 22 gated experts' weights need 413 us at
#: the datasheet bandwidth); read as two matrices 20, 25 and 135 do, about the rate of the
#: other shapes' rows (the L2's doing)
_NONGATED_SHAPES = (
    (2688, 1856, 128, 6),
    (1024, 2688, 512, 22),
    (4096, 2688, 512, 22),
    (2048, 5120, 512, 22),
    (8192, 5120, 512, 22),
)


def _nongated_shape(hidden, inter, experts, topk) -> np.ndarray:
    """Rows of a :data:`_NONGATED_SHAPES` shape."""
    out = np.zeros(len(hidden), dtype=bool)
    for h, i, e, k in _NONGATED_SHAPES:
        out |= (hidden == h) & (inter == i) & (experts == e) & (topk == k)
    return out


#: ``kernel_source`` of TensorRT-LLM's own grouped-GEMM MoE rows (its CUTLASS MoE, gated or
#: not, and its DeepGEMM block-scaled fp8 MoE; not TensorRT-LLM-gen's min-latency and fp4 rows
#: nor the Triton MXFP4 MoE, ``moe_torch_flow``)
TRTLLM_OWN_MOE_SOURCES = ("moe_torch_flow_cutlass", "moe_torch_flow_nongated", "deepgemm")


def _trtllm_own_moe(t: MeasuredTable, source: np.ndarray) -> np.ndarray:
    """Per row 1.0 where a TensorRT-LLM table's MoE row runs TensorRT-LLM's own grouped GEMMs
    (:data:`TRTLLM_OWN_MOE_SOURCES`), which on ``tcgen05`` take the SM pair's tile
    (:data:`~mlacalc.timemodel.moe_time.PAIR_TILE_MOE`); else 0.0."""
    own = np.isin(source, TRTLLM_OWN_MOE_SOURCES) & (t.engine == "trtllm")
    return own.astype(np.float64)


def _flashinfer_cutlass_rows(source: np.ndarray) -> np.ndarray:
    """Per row 1.0 where its ``kernel_source`` is FlashInfer's CUTLASS MoE
    (:func:`~mlacalc.timemodel.moe_time.flashinfer_cutlass_moe`: vLLM's and SGLang's rows of
    TensorRT-LLM's MoE wrapped), which pays TensorRT-LLM's costs per row of the rank and per
    token (:data:`~mlacalc.timemodel.moe_time.CUTLASS_ROWS_MOE`); else 0.0."""
    return np.array([flashinfer_cutlass_moe(str(x)) for x in source], dtype=np.float64)


def _flashinfer_hopper_tiled(t: MeasuredTable, source: np.ndarray, dt: np.ndarray) -> np.ndarray:
    """Per row whether it runs the Hopper build of a FlashInfer CUTLASS MoE that runs 128-row
    tiles whatever the load (:func:`~mlacalc.timemodel.moe_time.flashinfer_hopper_tiled`:
    vLLM's H100 fp8 rows; not SGLang's H100 bf16 variant, whose rows step alike but which the
    rule keeps out); not its Blackwell build."""
    out = flashinfer_hopper_tiled(source, dt)
    if out.any() and device_figures(load_hardware(t.system)).tcgen05:
        out[:] = False
    return out


def _moe_rank_loads(
    t: MeasuredTable,
    T: np.ndarray,
    topk: np.ndarray,
    E: np.ndarray,
    ep: np.ndarray,
    alpha: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The measured rank's assignments, touched experts, most-loaded expert's assignments,
    (power-law rows) row tiles of a ``moe_perf`` table's rows, by its collector's routing,
    which rows' loads are whole rows spread as round-robin routing spreads them (balanced rows
    and the power-law rows spread as balanced ones: ``moe_time.ROWS_SPREAD`` 2), and the EP
    each row's rank ran at (``ep``, but 1 where the collector put the whole call on it)."""
    loads = rank_loads(T, topk, E, ep, alpha)
    whole = alpha == 0
    assigned, active_e, most = loads.assignments, loads.active_experts, loads.max_per_expert
    # the power-law rows' row tiles, each expert's rows padded on its own
    # (moe_time.ROW_TILES_COL)
    row_tiles = loads.row_tiles.copy()
    if _moe_pre_1_0(t.framework, t.version):
        # the collector of TensorRT-LLM 1.0 (collect_moe_pre_1_0.py; the A100 table) puts a
        # power-law call of very few tokens (tokens x top-k at most E/16) wholly on the
        # measured rank: it computes every assignment, on min(tokens x top-k, E/ep) experts.
        # At one token the rows stream the weights of that many experts at one rate for every
        # ep (E = 128, 160, 256 at tp = 1: 1.46-1.59, 1.40-1.46, 1.36-1.39 TB/s for ep = 1 to
        # 32; with the straggler loads 0.3-1.5 TB/s), and so do the two-token rows of E = 256
        # and 384 (fitted errors -9% to -24% at every ep and tp). Above E/16 the rows are
        # mixed: at E = 160 with two tokens and E = 384 with four, 22 rows would beat the
        # roofline with every assignment on the rank (none of the E/16 rows does), so those
        # keep the straggler rank's loads, as every larger call does
        few = (alpha > 0) & (T * topk * 16 <= E)
        pairs = T * topk
        local = np.maximum(E // ep, 1)
        assigned = np.where(few, pairs, assigned)
        active_e = np.where(few, np.minimum(pairs, local), active_e)
        most = np.where(few, np.ceil(pairs / local), most)
        row_tiles[few] = 0.0  # the loads above, not the draws'
        whole = whole | few
    else:
        # the later collector (the H100 table) spreads a power-law call whose draws all round
        # to zero over the ranks as round-robin routing does. Its draws of a call of tokens x
        # top-k at most E lie in [0.01, 2], scaled to sum to tokens x top-k; rounded to the
        # nearest integer (as recalled: no copy of the collector ships with the tables), none
        # reaches 1 while the largest, 2, scales below 1/2 (:func:`_draws_round_to_zero`), and
        # the assignments are then handed out one an expert. Such rows take the time of the
        # balanced row of the same call and split: median ratio 0.98-1.00 (quartiles
        # 0.93-1.03) at every tokens x top-k / E up to 1/16 in both exponents, and up to 0.094
        # at alpha 1.01 (its bound 0.092); alpha 1.2 (bound 0.065) is 5-13% slower from 0.078
        # up, alpha 1.01 from 0.1 up, as the straggler rank's loads expect. With the draws'
        # straggler rank (more experts touched) the fitted bf16 and fp8 medians of these rows
        # were 11-13% too slow, and 95 of the 100 H100 MoE rows that beat the roofline were
        # among them (none does with these loads)
        few = (alpha > 0) & _draws_round_to_zero(T * topk, E, alpha)
        if few.any():
            spread = rank_loads(T[few], topk[few], E[few], ep[few], np.zeros(int(few.sum())))
            assigned, active_e, most = assigned.copy(), active_e.copy(), most.copy()
            assigned[few] = spread.assignments
            active_e[few] = spread.active_experts
            most[few] = spread.max_per_expert
            row_tiles[few] = 0.0  # spread as balanced rows are
            whole = whole | few
    # TensorRT-LLM's min-latency rows of a few experts: every token on the same top-k experts,
    # all on the measured rank, at every EP (:func:`_same_experts_loads`)
    same = _same_experts_loads(t, T, topk, E, assigned, active_e, most)
    row_tiles[same] = 0.0
    return assigned, active_e, most, row_tiles, whole | same, np.where(same, 1, ep)


#: Engines whose ``moe_perf`` collectors route a :data:`~mlacalc.measured.moe_routing.
#: GROUPED_ROUTING` shape with its model's group-limited top-k (TensorRT-LLM's collector
#: renormalizes a plain top-k: its tables' rows of DeepSeek-V3's shape halve at EP 2)
GROUPED_ROUTING_ENGINES = ("sglang", "vllm")

#: ``kernel_source`` of the ``moe_perf`` rows whose kernel routes inside itself with
#: group-limited top-k at a top-k of 8 over experts in 8 groups, with (groups, groups kept):
#: TensorRT-LLM-gen's min-latency MoE in TensorRT-LLM's tables (its balanced top-8 rows take at
#: EP 2 the time of EP 1 at every shape, 128, 160 and 256 experts, then DeepSeek-V3's grouped
#: fractions of it). Balanced rows only: the power-law rows fitted better with the equal share
#: (docs/time-model.md, "TensorRT-LLM-gen's min-latency MoE routes by groups")
GROUPED_ROUTING_KERNELS = {MIN_LATENCY_MOE: (8, 4)}
GROUPED_ROUTING_KERNEL_TOPK = 8


def _grouped_routing(
    t: MeasuredTable,
    hidden: np.ndarray,
    inter: np.ndarray,
    experts: np.ndarray,
    topk: np.ndarray,
    alpha: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row whether its collector routes it with group-limited top-k
    (:data:`GROUPED_ROUTING_ENGINES`, :data:`~mlacalc.measured.moe_routing.GROUPED_ROUTING`;
    the balanced rows of a :data:`GROUPED_ROUTING_KERNELS` kernel, ``alpha`` 0), and its groups
    and groups kept (0 elsewhere)."""
    n = len(hidden)
    on, groups, kept = np.zeros(n, dtype=bool), np.zeros(n), np.zeros(n)
    source = t.columns.get("kernel_source")
    if source is not None:
        src = source.astype(str)
        for name, (g, gk) in GROUPED_ROUTING_KERNELS.items():
            sel = (src == name) & (topk == GROUPED_ROUTING_KERNEL_TOPK) & (experts % g == 0)
            sel &= alpha == 0  # balanced rows (the power-law ones keep the equal share)
            on |= sel
            groups[sel], kept[sel] = g, gk
    if t.engine not in GROUPED_ROUTING_ENGINES:
        return on, groups, kept
    for (h, i, n_e, k), (g, gk) in GROUPED_ROUTING.items():
        sel = (hidden == h) & (inter == i) & (experts == n_e) & (topk == k)
        on |= sel
        groups[sel], kept[sel] = g, gk
    return on, groups, kept


#: TensorRT-LLM's ``moe_perf`` rows of its min-latency kernel (:data:`MIN_LATENCY_MOE`) over at
#: most this many experts (Mixtral's shapes, hidden 4,096 / intermediate 14,336 and 6,144 /
#: 16,384, top-2 of 8): the B200 table's rows take one time at EP 1, 2, 4 and 8 under every
#: distribution (4,096 / 14,336, TP 1, 8,192 tokens, balanced: 1,047 / 1,049 / 1,048 / 1,044 us)
#: and at two to four tokens no more than one token's two experts' (31-32 us at TP 1, where
#: round-robin's eight experts, 700 MB of nvfp4 weights, need 91 us at the HBM rate): every
#: token routed to the same top-k experts, all on the measured rank, whatever the EP. The
#: collector's, not the kernel's (TensorRT-LLM's CUTLASS rows of the same calls halve at EP 2):
#: docs/time-model.md, "TensorRT-LLM-gen's min-latency rows of eight experts"
MIN_LATENCY_SAME_EXPERTS = 8


def _same_experts_loads(
    t: MeasuredTable,
    tokens: np.ndarray,
    topk: np.ndarray,
    experts: np.ndarray,
    assigned: np.ndarray,
    active: np.ndarray,
    most: np.ndarray,
) -> np.ndarray:
    """Which rows of ``t`` are TensorRT-LLM's min-latency rows of
    :data:`MIN_LATENCY_SAME_EXPERTS` experts or fewer, whose loads it sets in place: every
    token's top-k pairs on the rank (``assigned``), on ``topk`` experts (``active``), each with
    every token (``most``)."""
    source = t.columns.get("kernel_source", np.full(len(t), "")).astype(str)
    same = (source == MIN_LATENCY_MOE) & (experts <= MIN_LATENCY_SAME_EXPERTS)
    pairs = tokens * topk
    assigned[same] = pairs[same]
    active[same] = np.minimum(topk, pairs)[same]
    most[same] = tokens[same]
    return same


def _moe_weight_bytes(
    dt: np.ndarray, mats: np.ndarray, hidden: np.ndarray, inter: np.ndarray
) -> np.ndarray:
    """The bytes of ``mats`` weight matrices of ``hidden`` x ``inter`` (every touched expert's,
    on one rank) in each row's dtype: the elements, a block-scaled fp8 matrix's fp32 scale a
    128 x 128 block, and the per-element scale bytes of the formats that carry them
    (``WEIGHT_SCALE_BYTES``)."""
    elems = mats * hidden * inter
    blocks = mats * 4 * np.ceil(hidden / _BLOCK) * np.ceil(inter / _BLOCK)
    scale = np.array([WEIGHT_SCALE_BYTES.get(str(d), 0.0) for d in dt]) if len(dt) else np.zeros(0)
    return elems * _elem(dt) + np.where(dt == "fp8_block", blocks, 0.0) + elems * scale


def _moe_table(t: MeasuredTable, b: _Builder, reason: np.ndarray) -> None:
    dt = canon_dtypes(t.column("moe_dtype"))
    T = _f(t.column("num_tokens"))
    hidden, inter = _f(t.column("hidden_size")), _f(t.column("inter_size"))
    topk, E = t.column("topk").astype(np.int64), t.column("num_experts").astype(np.int64)
    tp, ep = _f(t.column("moe_tp_size")), t.column("moe_ep_size").astype(np.int64)
    dist = t.column("distribution")
    alpha = np.zeros(len(t))
    for label in np.unique(dist):
        if label == "balanced":
            continue
        if not str(label).startswith("power_law_"):
            reason[dist == label] = "unknown_dtype"
            continue
        alpha[dist == label] = float(str(label)[len("power_law_") :])
    assigned, active_e, most, row_tiles, whole, ep = _moe_rank_loads(t, T, topk, E, ep, alpha)
    # a balanced row of a shape its collector routes with the model's group-limited top-k: the
    # round-robin logits' ties put most of the call on the lowest experts, rank 0's
    # (moe_routing.grouped_rank_loads); each expert's rows padded on its own, as a power-law
    # row's (docs/time-model.md, "A balanced row under DeepSeek-V3's grouped routing")
    grouped, groups, kept = _grouped_routing(t, hidden, inter, E, topk, alpha)
    if grouped.any():
        # (power-law rows spread as balanced ones take the balanced logits)
        law = np.where(whole, 0.0, alpha)
        g = grouped_rank_loads(
            T[grouped],
            topk[grouped],
            E[grouped],
            ep[grouped],
            groups[grouped],
            kept[grouped],
            law[grouped],
        )
        assigned, active_e, most = assigned.copy(), active_e.copy(), most.copy()
        assigned[grouped], active_e[grouped], most[grouped] = (
            g.assignments,
            g.active_experts,
            g.max_per_expert,
        )
        row_tiles[grouped] = g.row_tiles
        whole = whole & ~grouped
    source = t.columns.get("kernel_source", np.full(len(t), ""))
    gated = (~np.char.endswith(source.astype(str), "nongated")).astype(np.float64)
    gated[_nongated_shape(hidden, inter, E, topk)] = 0.0
    mats = np.where(gated > 0, 3.0, 2.0)
    inter_l = inter / tp
    flops = 2.0 * assigned * hidden * inter_l * mats
    nbytes = _moe_weight_bytes(dt, active_e * mats, hidden, inter_l) + T * hidden * 2 * 2
    # the Triton MoE (GPT-OSS mxfp4 on H100, ``kernel_source`` moe_torch_flow; the A100 table's
    # CUDA rows carry the same label) fixes its row tile from the call (:func:`~mlacalc.
    # timemodel.moe_time.triton_moe_row_tile`, the rule a model step's MXFP4 experts follow too)
    triton = (dt == "w4a16_mxfp4") & (source.astype(str) == "moe_torch_flow")
    # and vLLM's triton_kernels MXFP4 MoE (``..._oaitriton...``), the same kernel, whose served
    # steps on Hopper take that tile too (docs/time-model.md, "The triton_kernels MXFP4 MoE
    # behind the expert map")
    triton |= (dt == "w4a16_mxfp4") & (np.char.find(source.astype(str), "oaitriton") >= 0)
    tile = triton_moe_row_tile(T.astype(float), topk.astype(float), (E // ep).astype(float))
    row_tile = np.where(triton, tile, 0.0)
    # SGLang's Triton fused MoE (bf16, MXFP4) with its default config: a 16 x 32 tile while
    # the tokens are no more than the rank's experts, else 64 x 64
    # (:func:`~mlacalc.timemodel.moe_time.triton_moe_default_tile`)
    sg = (source.astype(str) == "sglang_fused_moe_triton") & (dt != "fp8_block")
    sg_rows, sg_cols = triton_moe_default_tile(T.astype(float), (E // ep).astype(float))
    # where its bf16 calls run a tuned config (moe_time.TRITON_TUNED_MOE; a device without a
    # list takes its generation's, as a step does), the fastest tile at the tuned rate
    gen = device_figures(load_hardware(t.system)).kernel_generation if sg.any() else ""
    tuned = sg & (dt == "bf16") & triton_moe_tuned(t.device, E // ep, inter_l, gen)
    sg = sg & ~tuned
    row_tile = np.where(sg, sg_rows, row_tile)
    # TensorRT-LLM-gen's MoE kernels (TensorRT-LLM's B200 w4a8 and min-latency nvfp4 rows,
    # FlashInfer's TensorRT-LLM MoE under SGLang and vLLM, its fp4, weight-only and block-scaled
    # fp8 kernels)
    # size their row tile by the mean load, from 8 rows up to the dtype's largest tile
    # (:func:`~mlacalc.timemodel.moe_time.trtllm_gen_row_tile`, ``TRTLLM_GEN_MAX_TILE``)
    srcs = source.astype(str)
    trt_gen = np.isin(srcs, ["moe_torch_flow", "moe_torch_flow_min_latency"])
    gen = trt_gen & np.isin(dt, TRTLLM_GEN_FP4)
    flashinfer = np.char.find(srcs, "flashinfer_trtllm") >= 0
    gen = gen | (flashinfer & np.isin(dt, list(TRTLLM_GEN_MAX_TILE)))
    cap = np.array([TRTLLM_GEN_MAX_TILE.get(str(d), 256.0) for d in dt]) if len(dt) else 256.0
    tile_args = (T.astype(float), topk.astype(float), (E // ep).astype(float), cap)
    # FlashInfer's build runs some of its tiles one size up (moe_time.FLASHINFER_TILE_UP)
    gen_tile = flashinfer_gen_tile(trtllm_gen_row_tile(*tile_args), np.where(flashinfer, dt, ""))
    row_tile = np.where(gen, gen_tile, row_tile)
    # TensorRT-LLM-gen's kernels (those above, FlashInfer's TensorRT-LLM MoE of every dtype)
    # keep the equal share's row tiles on power-law rows: their power-law rows were already as
    # slow in the model as their balanced ones or slower, and the drawn tiles made them slower
    # still (docs/time-model.md, "A power-law row's experts padded one by one")
    # (not the rows of a grouped routing, whose loads above are exact)
    row_tiles[(gen | flashinfer) & ~grouped] = 0.0
    col_tile = np.where(sg, sg_cols, 0.0)
    # Marlin's MoE (SGLang's and vLLM's int4 and MXFP4 weight-only kernels): its block of rows
    # by the mean load (:func:`~mlacalc.timemodel.moe_time.marlin_row_tile`) over the rank's
    # experts or the call's (:func:`~mlacalc.timemodel.moe_time.marlin_experts`)
    marlin = np.char.find(source.astype(str), "marlin") >= 0
    m_rows = marlin_row_tile(T.astype(float), topk.astype(float), marlin_experts(srcs, E, ep))
    row_tile = np.where(marlin, m_rows, row_tile)
    col_tile = np.where(marlin, MARLIN_COLS, col_tile)
    hopper_tiled = _flashinfer_hopper_tiled(t, srcs, dt)  # 128-row tiles whatever the load
    rows = np.arange(len(t))
    ok = ~np.char.startswith(dt, "?")
    variants = _source_variants(t, dt)
    b.add_by_dtype(
        "moe",
        "moe",
        dt[ok],
        rows[ok],
        flops[ok],
        nbytes[ok],
        variant=variants[ok],
        tokens=T[ok],
        hidden=hidden[ok],
        inter=inter_l[ok],
        experts=(E // ep)[ok],
        topk=topk[ok],
        active_experts=active_e[ok],
        max_tokens_per_expert=most[ok],
        gated=gated[ok],
        assignments=assigned[ok],
        alpha=alpha[ok],
        experts_total=E[ok],
        ep=ep[ok],
        tp=tp[ok],
        row_tile=np.where(hopper_tiled, FLASHINFER_HOPPER_TILE, row_tile)[ok],
        col_tile=col_tile[ok],
        **{f"{ROW_TILES_COL}{tm}": row_tiles[ok, i] for i, tm in enumerate(ROW_TILES)},
        # round-robin loads: whole rows, as a balanced model step's (moe_time.whole_row_tiles)
        **{ROWS_SPREAD: np.where(whole, 2.0, 0.0)[ok]},
        # Marlin multiplies with warp-level mma.sync (moe_time.MMA_SYNC_MOE)
        mma_sync=marlin[ok].astype(np.float64),
        # the Triton fused MoE streams every routed pair's rows (moe_time.ALL_PAIRS_MOE)
        all_pairs=triton_fused_moe(srcs)[ok].astype(np.float64),
        # vLLM's expert map outside its Triton MoE, over more than one rank (moe_time.EP_MAP_MOE)
        ep_map=(vllm_expert_map(srcs) & (ep > 1))[ok].astype(np.float64),
        # TensorRT-LLM-gen's block-scaled fp8 MoE: the bf16 rate, every routed pair streamed
        # (moe_time.BF16_RATE_MOE, PAIR_STREAM_MOE); its bf16, fp8 ones' 8-row tile (GEN_ROWS8_MOE;
        # the block-scaled one's row tile is the mean load's, above)
        bf16_rate=(flashinfer & (dt == "fp8_block"))[ok].astype(np.float64),
        gen_rows8=(flashinfer & np.isin(dt, ["bf16", "fp8"]))[ok].astype(np.float64),
        gen_tokens=flashinfer[ok].astype(np.float64),  # its pair cost (moe_time.GEN_TOKENS_MOE)
        # TensorRT-LLM-gen's padded intermediate and hidden sizes (moe_time.gen_pads)
        **{k: v[ok] for k, v in zip(("inter_pad", "hidden_pad"), gen_pads(dt, flashinfer, gen))},
        pair_stream=(flashinfer & np.isin(dt, PAIR_STREAM_DTYPES))[ok].astype(np.float64),
        # SGLang's Triton fused MoE with a tuned config (moe_time.TUNED_MOE)
        tuned_config=tuned[ok].astype(np.float64),
        pair_tile=_trtllm_own_moe(t, srcs)[ok],
        # FlashInfer's CUTLASS MoE, TensorRT-LLM's wrapped: its row costs (CUTLASS_ROWS_MOE)
        cutlass_rows=_flashinfer_cutlass_rows(srcs)[ok],
    )
    reason[~ok] = "unknown_dtype"


#: TensorRT-LLM versions (major, minor) whose AUTO all-reduce hands a call of at least this many
#: elements to NCCL instead of its own kernels: the measured TensorRT-LLM 1.0 table's rows from
#: 2^20 elements (2 MB of bf16) equal the same system's NCCL all-reduce at 2, 4 and 8 GPUs (27
#: sizes of 2^20-2^28 all within 8%, 23 within 2%; 48/48, 48/46, 54/54 us at 2^20), while below
#: it the rows run its own kernels, faster than NCCL (2^19 elements: 12 against 41 us at 2 GPUs,
#: 23 against 30 at 4; TABLES.md: "latency equals NCCL" from about there upward). The later
#: version measured (1.3.0rc20, H100) has no such fixed threshold and keeps the one class.
TRTLLM_NCCL_FROM_ELEMENTS = {(1, 0): 2**20}

#: SGLang versions (major, minor) whose custom all-reduce hands a call of at least this many
#: bf16 elements to NCCL (:data:`~mlacalc.timemodel.comm_time.SGLANG_NCCL_FROM_BYTES`, with its
#: evidence: the 0.5 tables' rows from 2^24 elements equal NCCL's). The eager rows switch at
#: the same size (they then run NCCL's ring, not the one-shot).
SGLANG_NCCL_FROM_ELEMENTS = {(0, 5): SGLANG_NCCL_FROM_BYTES / 2}


def _nccl_from(engine: str, version: str) -> float:
    """The element count from which an engine ``version``'s all-reduce is NCCL's (inf: never
    measured to switch)."""
    table = {"trtllm": TRTLLM_NCCL_FROM_ELEMENTS, "sglang": SGLANG_NCCL_FROM_ELEMENTS}
    return float(table.get(engine, {}).get(_version_key(version), np.inf))


def _allreduce_table(t: MeasuredTable, b: _Builder, reason: np.ndarray) -> None:
    elems = _f(t.column("message_size"))
    msg = elems * 2.0  # bf16 (A100: fp16) elements per GPU
    n = _f(t.column("num_gpus"))
    rows = np.arange(len(t))
    nccl = elems >= _nccl_from(engine_of_framework(t.framework) or "", t.version)
    # the calls TensorRT-LLM hands to NCCL run NCCL's ring all-reduce of 2-byte elements (its
    # fp16 and bf16 kernels move the same bytes the same way: the nccl_perf ``half`` class)
    # SGLang's and vLLM's tables time their custom all-reduce twice (``backend`` *_graph: in a
    # CUDA graph, as served; *_eager: launched from Python, each call paying the host's
    # launch and its input copy into the registered buffer): the eager rows are the ``eager``
    # variant of the class, fitted apart, and a step predicts the graph kernel
    backend = t.columns.get("backend", np.full(len(t), "")).astype(str)
    eager = np.char.endswith(backend, "_eager")
    # vLLM's all-reduce takes its custom kernel below a size of its own by device and GPU count
    # (the one-shot below another, comm_time.VLLM_ONE_SHOT_BELOW_BYTES, its two-shot from
    # there), PyTorch's symmetric-memory one above it (the switch's multimem reduction or a
    # two-shot), NCCL's past both (comm_time.vllm_path); the others' the faster of the two
    engine = engine_of_framework(t.framework) or ""
    one_shot, fields, symm = np.ones(len(t)), {}, np.zeros(len(t), dtype=bool)
    if engine == "vllm":
        path = vllm_path(msg, n, load_hardware(t.device).compute_capability)
        nccl = nccl | (path["nccl"] > 0)
        one_shot = path["one_shot"]
        fields = {"multimem": path["multimem"]}
        # its graph calls to the symmetric-memory kernel: a class of their own (the eager ones
        # stay in the eager class, host launch and all)
        symm = (path["symm"] > 0) & ~eager
    # SGLang's and vLLM's one-shot waits a round trip a peer (comm_time.PEER_WAIT_ENGINES)
    wait = float(engine in PEER_WAIT_ENGINES)
    graph, eager_own = ~nccl & ~eager & ~symm, ~nccl & eager
    sels = (("g", graph), ("e", eager_own), ("s", symm))
    own = {k: {key: v[sel] for key, v in fields.items()} for k, sel in sels}
    # an eager row handed to NCCL (SGLang's from 32 MB, vLLM's past its own kernels) is NCCL's
    # ring (the 2-byte class, as the graph rows) plus a copy of the message through HBM (read
    # and written: an elementwise kernel of the profile), the host's launch (20-30 us) hidden
    # behind a call of 150 us and more: the eager rows of 2^24-2^29 elements are 1.04-1.23x the
    # graph rows, the extra one message's read and write at 6.5-7.0 TB/s on B200 and 3.0-3.1
    # TB/s on H100 (2^29 elements, every GPU count, SGLang's and vLLM's tables)
    for name, dtype, sel, extra in (
        (
            "custom_allreduce",
            "bf16",
            graph,
            {"one_shot": one_shot[graph], "peer_wait": wait, **own["g"]},
        ),
        (
            "custom_allreduce_eager",
            "bf16",
            eager_own,
            {"variant": "eager", "one_shot": one_shot[eager_own], "peer_wait": wait, **own["e"]},
        ),
        (
            "custom_allreduce_symm",
            "bf16",
            symm,
            {"variant": VLLM_SYMM_VARIANT, "one_shot": 0, "peer_wait": wait, **own["s"]},
        ),
        ("custom_allreduce_eager_nccl", "fp16", nccl & eager, {"one_shot": 0}),
        ("custom_allreduce_nccl", "fp16", nccl & ~eager, {"one_shot": 0}),
    ):
        b.add_collective(name, "all_reduce", dtype, rows[sel], msg[sel], n[sel], **extra)
    handed = nccl & eager
    b.add(
        "custom_allreduce_eager_copy",
        "elementwise",
        "bf16",
        rows[handed],
        0.0,
        2.0 * msg[handed],
        elements=elems[handed],
    )


_NCCL_KIND = {
    "all_reduce": "all_reduce",
    "all_gather": "all_gather",
    "reduce_scatter": "reduce_scatter",
    "alltoall": "all_to_all",
}


def _nccl_table(t: MeasuredTable, b: _Builder, reason: np.ndarray) -> None:
    op, dt = t.column("op_name"), t.column("nccl_dtype")
    elem = np.where(dt == "int8", 1.0, 2.0)
    msg = _f(t.column("message_size")) * elem
    n = _f(t.column("num_gpus"))
    rows = np.arange(len(t))
    for name, kind in _NCCL_KIND.items():
        for d, kd in (("half", "fp16"), ("int8", "int8")):
            s = (op == name) & (dt == d)
            b.add_collective(f"nccl_{name}", kind, kd, rows[s], msg[s], n[s], one_shot=0)
    reason[~np.isin(op, list(_NCCL_KIND)) | ~np.isin(dt, ["half", "int8"])] = "unknown_dtype"


def _expected_ranks(experts: np.ndarray, topk: np.ndarray, ranks: int) -> np.ndarray:
    """Expected distinct ranks among a token's top-k of ``experts`` spread over ``ranks``:
    ``ranks * (1 - C(E - E/r, k) / C(E, k))`` for uniformly random distinct experts."""
    out = np.empty(experts.shape[0])
    for i, (e, k) in enumerate(zip(experts.tolist(), topk.tolist())):
        miss, other = 1.0, e - e // ranks
        for j in range(int(k)):
            miss *= max(other - j, 0) / (e - j)
        out[i] = ranks * (1.0 - miss)
    return out


def _deepep_table(t: MeasuredTable, b: _Builder, reason: np.ndarray, *, low_latency: bool) -> None:
    gpus = 8.0  # one node, EP = 8 (not a column)
    T, h = _f(t.column("num_token")), _f(t.column("hidden_size"))
    k, E = t.column("num_topk").astype(np.int64), t.column("num_experts").astype(np.int64)
    measure = t.column("measure")
    rows = np.arange(len(t))
    if low_latency:
        copies = T * k
        disp = copies * (h + h / 32 + 16)
        comb = copies * h * 2
        sms = np.zeros(len(t))
    else:
        keys, inv = np.unique(np.stack([E, k]), axis=1, return_inverse=True)
        copies = T * _expected_ranks(keys[0], keys[1], int(gpus))[inv.ravel()]
        disp = copies * (h + h / 32)
        comb = copies * h * 2
        sms = np.where(
            measure == "dispatch", _f(t.column("dispatch_sms")), _f(t.column("combine_sms"))
        )
    mode = 1.0 if low_latency else 0.0
    for name, msg, dtype in (("dispatch", disp, "fp8"), ("combine", comb, "bf16")):
        s = measure == name
        b.add_collective(
            f"deepep_{name}",
            name,
            dtype,
            rows[s],
            msg[s],
            gpus,
            tokens=T[s],
            hidden=h[s],
            topk=k[s],
            copies=copies[s],
            low_latency=mode,
            sms=sms[s],
            experts=E[s].astype(np.float64),
        )


def _quantize_table(t: MeasuredTable, b: _Builder, reason: np.ndarray, *, scale_only: bool) -> None:
    e = _f(t.column("m")) * _f(t.column("k"))
    rows = np.arange(len(t))
    # vLLM's per-tensor quantize kernels give each token a CTA of its own, which walks the
    # token's row: few tokens draw the bandwidth of as many CTAs (its amax at one token takes
    # 0.7 / 1.1 / 1.6 / 7.9 us at k = 4,096 / 7,168 / 12,288 / 65,536 on H100, 7.8 us at
    # 65,536 on B200, the same up to 225 tokens)
    units = _f(t.column("m")) if t.engine in TOKEN_CTA_QUANTIZE_ENGINES else 0
    if scale_only:
        # a kernel whose blocks tile the elements (TensorRT-LLM's): a fixed grid, each block
        # holding elements folds its maximum into the scale (elementwise_time.AMAX_GRID_BLOCKS);
        # TensorRT-LLM's alone: SGLang's rows are all zero (below), no grid of theirs is known
        tiled = t.engine == "trtllm"
        blocks = np.minimum(AMAX_GRID_BLOCKS, np.ceil(e / AMAX_BLOCK_ELEMENTS)) * tiled
        _quantize(b, "compute_scale", rows, e, 0, 1, write=0, units=units, amax_blocks=blocks)
        zero = t.seconds <= 0
        # the table is a difference floored at zero (dynamic minus static quantization): where
        # most rows are zero (SGLang's: 1,625 and 1,627 of 1,628), the engine's dynamic scale
        # costs nothing measurable and the few positive rows (under 0.5 us) are noise of the
        # difference, not a kernel's time: every row is zero_time
        reason[np.full(len(t), zero.mean() >= 0.5) | zero] = "zero_time"
    else:
        _quantize(b, "scale_matrix", rows, e, 0, 1, units=units)


#: The lightning indexer of the sparse-attention models the tables name (``model`` column):
#: indexer heads, indexer head dim, top-k keys (their config.json, vendored under
#: model_configs/: glm-5.1.yaml, which equals GLM-5's key for key, and deepseek-v3.2.yaml).
INDEXERS = {
    "zai-org/GLM-5": (32, 128, 2048),
    "zai-org/GLM-5-FP8": (32, 128, 2048),
    "zai-org/GLM-5.2": (32, 128, 2048),
    "zai-org/GLM-5.2-FP8": (32, 128, 2048),
    "nvidia/GLM-5.2-NVFP4": (32, 128, 2048),
    "deepseek-ai/DeepSeek-V3.2": (64, 128, 2048),
    # DeepSeek-V4-Flash (mlacalc.models.deepseek_v4's defaults, its config.json)
    "sgl-project/DeepSeek-V4-Flash-FP8": (64, 128, 512),
    # DeepSeek-V4-Pro (the shipped mlacalc/data/models/deepseek-v4-pro.yaml)
    "sgl-project/DeepSeek-V4-Pro-FP8": (64, 128, 1024),
    "deepseek-ai/DeepSeek-V4-Pro": (64, 128, 1024),
}
# (GLM-5.2 and its FP8 / NVFP4 checkpoints: GLM-5's indexer, an assumption: the same
# architecture class, GlmMoeDsaForCausalLM, and no GLM-5.2 config vendored)
_MMA_ROWS = 128  # DeepGEMM's MQA-logits tile: 128 (query, indexer head) rows a CTA


def _indexer_geometry(t: MeasuredTable, reason: np.ndarray):
    """(indexer heads, head dim, top-k) per row from the ``model`` column; rows of a model not
    in :data:`INDEXERS` are marked ``unknown_model``."""
    models = t.column("model").astype(str)
    known = np.isin(models, list(INDEXERS))
    reason[~known] = "unknown_model"
    geo = np.array([INDEXERS.get(m, (0, 0, 0)) for m in models], dtype=np.float64).reshape(-1, 3)
    return geo[:, 0], geo[:, 1], geo[:, 2], known


def _mqa_logits_table(t: MeasuredTable, b: _Builder, reason: np.ndarray) -> None:
    """``glm5_mqa_logits_module_perf``: DeepGEMM's ``fp8_mqa_logits``, the indexer's scores of a
    prompt: ``batch_size`` sequences of ``isl`` new tokens after ``step`` cached ones, each query
    scoring its causal range of keys on every indexer head (fp8 q and k, a ReLU, the heads
    summed with per-head weights) into one fp32 logit per (query, key). The kernel tiles 128
    (query, head) rows a CTA with all of a query's heads, so the mapped unit is that tile:
    ``q_len = isl x heads`` rows of one head of ``index_head_dim`` (``n_heads = 1``),
    ``kv_len`` the mean keys a query attends (``step + (isl + 1) / 2``), no value product
    (``head_dim_v = 0``: no softmax, no RoPE kernel). ``attention_prefill`` variant
    ``indexer``, fp8, fitted apart."""
    heads, dim, _, known = _indexer_geometry(t, reason)
    bs, isl, step = _f(t.column("batch_size")), _f(t.column("isl")), _f(t.column("step"))
    pairs = bs * (isl * step + isl * (isl + 1) / 2)
    tok = bs * isl
    nbytes = tok * heads * (dim + 4) + bs * (step + isl) * (dim + 4) + pairs * 4
    # the kernel tiles the batch's queries as one ragged run (MQA_TILE_ROWS): a tile shorter
    # than a sequence's queries takes them alone, a longer one several sequences' keys
    tiles, per_tile, keys, flops = mqa_logits_tiles(bs, isl, step, np.maximum(heads, 1.0), dim)
    rows = np.arange(len(t))[known]
    k = known
    # the keys of all the batch's sequences, the width of the call's fp32 logits matrix
    # (attention_time.logits_row_slowdown)
    b.add("mqa_logits", "attention_prefill", "fp8", rows, flops[k],
          nbytes[k], variant="indexer", batch=tiles[k], q_len=(per_tile * heads)[k],
          kv_len=keys[k], n_heads=1, n_kv=1, head_dim_qk=dim[k],
          head_dim_v=0, window=0, causal=0, kv_bytes=1, rope_kernel=0,
          preprocess_bytes=0, batch_keys=(bs * (step + isl))[k])  # fmt: skip


#: The (query, head) rows of one tile of DeepGEMM's prompt logits kernel (``fp8_mqa_logits``):
#: ``MQA_TILE_ROWS / heads`` consecutive queries of the batch's ragged run of queries, each
#: with all its heads.
MQA_TILE_ROWS = 128


def mqa_logits_tiles(bs, isl, step, heads, dim):
    """The tiles of DeepGEMM's prompt logits kernel over ``bs`` sequences of ``isl`` new tokens
    after ``step`` cached ones (``heads`` indexer heads of ``dim``): (tiles, queries a tile,
    keys a tile walks, FLOPs). The kernel takes the batch's queries as one ragged run, each
    query with its range of keys (its sequence's first key to its own), and a tile of
    ``MQA_TILE_ROWS / heads`` consecutive queries scores every key from its first query's first
    to its last query's last. Where a sequence holds at least a tile's queries, a tile holds
    one sequence's (as many tiles a sequence as its queries fill, the mean keys a query
    walks: its causal keys in whole blocks, :func:`~mlacalc.cost.compressed.walked_logit_keys`);
    where it holds fewer (one new token a sequence, as a decode step's), a tile holds
    ``tile / isl`` sequences and walks all their keys, so its work grows with the sequences
    up to a tile's and then with the tiles. FLOPs are the real pairs' in the first case (the
    masked part of a block is the walk's, ``keys``), every walked pair's in the second (the
    kernel scores the whole range)."""
    per = np.maximum(np.floor(MQA_TILE_ROWS / heads), 1.0)
    short = isl < per
    seqs = np.minimum(bs, per / np.maximum(isl, 1.0))  # sequences a short tile holds
    per_tile = np.where(short, np.minimum(per, bs * isl), isl)
    tiles = np.where(short, np.ceil(bs * isl / per), bs)
    keys = np.where(short, seqs * (step + isl), walked_logit_keys(step, np.maximum(isl, 1.0)))
    pairs = bs * (isl * step + isl * (isl + 1) / 2)
    flops = 2.0 * heads * dim * np.where(short, tiles * per_tile * keys, pairs)
    return tiles, per_tile, keys, flops


#: vLLM's paged indexer logits (``kernel_source`` ``...fp8_fp4_paged_mqa_logits``) timed as one
#: sequence of all the batch's new tokens: ``batch_size x isl`` queries over ``step`` cached
#: tokens, query ``i`` of them seeing ``(step + i) / ratio`` keys. The evidence is the
#: measured rows, on H100 and B200 alike: at every cached length the row's time is that of
#: its new tokens in all, however split over sequences (H100 at 0 cached: 253 us for 8,192
#: new tokens from 1 x 8,192 to 1,024 x 8, 75 us for 4,096, 23.5 us for 2,048; at 4,096 cached
#: 333-344 us for 8,192 at every split; B200 211-216 us), growing as the square of that count
#: (one sequence's causal pairs), where a sequence's own keys (the per-sequence pairs) fall
#: about 900-fold from 1 x 8,192 to 1,024 x 8. SGLang's ``fp8_paged_mqa_logits`` rows follow
#: each sequence's own keys (76 us at 1,024 x 8, 252 at 1 x 8,192, H100) and keep the
#: per-sequence form. Which part of vLLM's call lays the batch out so (its wrapper or the
#: collector's inputs) the rows do not say; a served step's indexer is left per sequence. Rows
#: of one new token a sequence keep the per-sequence form: the class's per-sequence terms,
#: which vLLM's DSA decode rows (one query a sequence) need, are fitted on them
#: (docs/time-model.md has the figures of flattening them too).
_VLLM_FLAT_QUERIES = "fp8_fp4_paged_mqa_logits"


def _paged_mqa_logits_table(t: MeasuredTable, b: _Builder, reason: np.ndarray) -> None:
    """``dsv4_paged_mqa_logits_module_perf``: DeepGEMM's ``fp8_paged_mqa_logits`` (vLLM:
    ``fp8_fp4_paged_mqa_logits``), DeepSeek-V4's indexer scoring ``isl`` next tokens of each of
    ``batch_size`` sequences against the compressed keys of its paged cache: ``step + isl``
    tokens pooled ``compress_ratio`` (4) to one key, query ``i`` seeing ``(step + i) / ratio``
    of them (one row of 1,048,576 cached tokens at batch 1 reads its 262,144 fp8 keys in
    10 us: the HBM time of the compressed keys, not of the tokens). The decode form of the
    indexer, as a model step's: ``mla_decode``, fp8, variant ``indexer``, every indexer head
    sharing one key, no value product, the keys split over the SMs; bytes the fp8 q with its
    head weights, the compressed keys with their scales and one fp32 logit per pair."""
    heads, dim, _, known = _indexer_geometry(t, reason)
    bs, isl, step = _f(t.column("batch_size")), _f(t.column("isl")), _f(t.column("step"))
    ratio = np.maximum(_f(t.column("compress_ratio")), 1.0)
    flat = np.array([_VLLM_FLAT_QUERIES in str(s) for s in t.column("kernel_source")]) & (isl > 1)
    isl, bs = np.where(flat, bs * isl, isl), np.where(flat, 1.0, bs)
    keys = np.floor((step + isl) / ratio)
    pairs = bs * isl * (step + (isl + 1) / 2) / ratio
    nbytes = bs * isl * heads * (dim + 4) + bs * keys * (dim + 4) + pairs * 4
    rows = np.arange(len(t))
    k = known
    b.add("paged_mqa_logits", "mla_decode", "fp8", rows[k], (2 * heads * dim * pairs)[k],
          nbytes[k], variant="indexer", batch=bs[k], q_len=isl[k], kv_len=np.maximum(keys, 1)[k],
          n_heads=heads[k], n_kv=1, head_dim_qk=dim[k], head_dim_v=0, window=0, causal=1,
          page_size=_PAGE, kv_bytes=1, kv_split=1, operand_reads=1, rope_kernel=0,
          preprocess_bytes=0)  # fmt: skip


def _mhc_table(t: MeasuredTable, b: _Builder, reason: np.ndarray) -> None:
    """``mhc_module_perf``: DeepSeek-V4's manifold hyper-connections around one layer, for
    ``num_tokens`` tokens of ``hc_mult`` (n = 4) residual streams of ``hidden_size`` (d):
    ``pre`` (one fused kernel: the n d streams to (2 + n) n mixing weights, their
    ``sinkhorn_iters`` Sinkhorn normalisation, the streams mixed into the layer's input) and
    ``post`` (the layer's output and the streams mixed back into n streams). Streaming
    ``elementwise`` kernels, variants ``mhc_pre`` and ``mhc_post`` (another kernel of the same
    op, ``kernel_source``, a variant of its own: TensorRT-LLM's three ``pre`` kernels). The
    streams are fp32: with them every op moves its bytes at one share of HBM on both devices
    (``post`` at 4,096 tokens of 4,096: 570 MB in 209 us on H100, 97 us on B200, 81% and 73% of
    the datasheet bandwidth; in bf16 its B200 rows would reach 39%, H100's 43%). Bytes: ``pre``
    the streams read once and the bf16 input written; ``post`` the streams read and written and
    the bf16 output read. ``num_sites`` (2 in every row) is not a factor: one value cannot tell
    it from the fitted rate."""
    T, d = _f(t.column("num_tokens")), _f(t.column("hidden_size"))
    n, iters = _f(t.column("hc_mult")), _f(t.column("sinkhorn_iters"))
    op = t.column("op_name").astype(str)
    rows = np.arange(len(t))
    pre = op == "pre"
    flops = np.where(
        pre,
        T * (2 * n * d * (2 + n) * n + iters * 4 * n * n + 2 * n * d),
        T * (2 * n * n * d + 2 * n * d),
    )
    nbytes = np.where(pre, T * (n * d * 4 + d * 2), T * (2 * n * d * 4 + d * 2))
    src = _source_variants(t, op)
    variant = np.array(
        [f"mhc_{o}" + (f"_{v}" if v else "") for o, v in zip(op.tolist(), src.tolist())]
    )
    ok = np.isin(op, ["pre", "post"])
    for v in np.unique(variant[ok]):
        sel = ok & (variant == v)
        b.add("mhc", "elementwise", "bf16", rows[sel], flops[sel], nbytes[sel], variant=str(v),
              elements=(T * n * d)[sel])  # fmt: skip
    reason[~ok] = "unknown_dtype"


def _topk_table(t: MeasuredTable, b: _Builder, reason: np.ndarray) -> None:
    """``glm5_topk_module_perf``: SGLang's ``fast_topk_transform_fused``, the ``index_topk``
    best keys of each query's fp32 logits (``batch_size x isl`` queries over ``step + isl``
    keys), per ``score_mode`` (``flat``, ``top_last``: the logits' distribution, which sets the
    selection's passes) a variant of its own: an ``elementwise`` kernel of one CTA a query
    (``ctas``; ``units``: the queries with more than ``index_topk`` causal keys, which
    select), the logits of each selecting query's causal keys read once and every query's
    int32 indices written, and a wait per wave of selecting rows (``unit_latency_s``).
    Where no query has more keys than ``index_topk`` every key is selected and no kernel
    runs: the row is predicted as 0 s (:data:`NO_KERNEL`; the tables time exactly these rows
    0).

    ``dsv4_csa_topk_calib_perf`` (SGLang's calibration sweep of DeepSeek-V4's top-k transform,
    ``topk_transform_v1`` / ``_v2``, score modes ``v1_flat`` ...) is the same kernel over
    DeepSeek-V4's compressed keys: query ``i`` sees ``floor((step + i) / compress_ratio)``
    pooled keys, and the row is 0 where none has more than the model's ``index_topk``; the
    v1 transform over flat logits past ``LONG_ROW`` pooled keys a row is its other path
    (``topk_v1_flat_long``, :data:`mlacalc.measured.dsv4_modules.PROMPT_LONG_TOPK`), and so is
    the v2 transform's past it whatever the logits (``topk_v2_long``,
    :data:`mlacalc.measured.dsv4_modules.LONG_TOPK`), as the module rows and a served step
    time them."""
    _, _, topk, known = _indexer_geometry(t, reason)
    bs, isl, step = _f(t.column("batch_size")), _f(t.column("isl")), _f(t.column("step"))
    ratio = _f(t.column("compress_ratio")) if "compress_ratio" in t.columns else np.ones(len(t))
    ratio = np.maximum(ratio, 1.0)
    # query i (1-based) of a sequence ranks its causal keys, floor((step + i) / ratio) of them;
    # a query with no more than index_topk keys takes them all without a selection: the
    # counts a served step's top-k takes too (cost.compressed.engine_topk, one definition)
    shape, nbytes = engine_topk(bs, isl, step, ratio, topk, False)
    pairs, selecting = shape["elements"], shape["units"]
    mode = t.column("score_mode").astype(str)
    rows = np.arange(len(t))
    none = known & (selecting <= 0)
    reason[none] = NO_KERNEL
    # past LONG_ROW pooled keys a row each transform takes its other path, a class of its own:
    # the v1 one over flat logits (dsv4_modules.PROMPT_LONG_TOPK), the v2 one whatever the
    # logits (dsv4_modules.LONG_TOPK), as a served step and the module rows time them
    long = shape["topk_kernel"] == 4
    variant = np.char.add("topk_", mode)
    variant = np.where(long & (mode == "v1_flat"), PROMPT_LONG_TOPK, variant)
    variant = np.where(long & np.char.startswith(mode, "v2_"), LONG_TOPK, variant)
    for v in np.unique(variant[known]):
        s = known & (variant == v) & ~none
        b.add("topk", "elementwise", "bf16", rows[s], 0.0, nbytes[s], variant=str(v),
              elements=pairs[s], units=selecting[s], ctas=shape["ctas"][s],
              long_elements=shape["long_elements"][s],
              index_topk=shape["index_topk"][s])  # fmt: skip


def _sparse_mla_table(t: MeasuredTable, b: _Builder, reason: np.ndarray) -> None:
    """``glm5_dsa_attn_module_perf``: FlashMLA's ``flash_mla_sparse_fwd``, the sparse MLA of a
    prompt in the absorbed (latent) form: each of the ``batch_size x isl`` tokens attends the
    ``index_topk`` keys its indexer picked (the kernel multiplies every top-k slot whatever the
    cache holds, and gathers the slots the keys fill: ``filled_keys``, a token's mean causal
    picks, the blocks its walk counts), ``num_heads`` query heads sharing one
    576-wide latent key (512-wide values), bf16 operands. One token is one unit of the
    ``mla_decode`` model (``batch`` = tokens, ``q_len = 1``; on H100 no key splitting: the
    kernel's CTA takes a token's 64 heads and walks its keys), variant ``sparse``; bytes: q,
    the gathered latent rows (each cached row once: a sequence's tokens pick among the same
    ``step + isl`` rows, which the L2 serves to the others), the output."""
    _, _, topk, known = _indexer_geometry(t, reason)
    bs, isl, h = _f(t.column("batch_size")), _f(t.column("isl")), _f(t.column("num_heads"))
    tok = bs * isl
    g = DSV3
    lat = g["kv_lora"] + g["rope"]
    flops = 2.0 * h * tok * topk * (lat + g["kv_lora"])
    step = _f(t.column("step"))
    cached = bs * np.minimum(step + isl, np.maximum(topk, 1) * np.maximum(isl, 1))
    nbytes = tok * h * lat * 2 + cached * lat * 2 + tok * h * g["kv_lora"] * 2
    rows = np.arange(len(t))
    k = known
    # H100's kernel walks a token's keys on one SM (a row of few tokens takes the time of one
    # token's walk: 62-72 us from 1 to 64 tokens at batch 1); B200's splits them, as the decode
    # kernels do (28-39 us at 4 tokens, where one walk a token predicted 70% more)
    split = 0.0 if t.system == "h100_sxm" else 1.0
    # the slots a token's keys fill (the rest masked): the blocks its gather walks
    filled = causal_picks(isl, step + isl, topk)
    b.add("sparse_mla", "mla_decode", "bf16", rows[k], flops[k], nbytes[k], variant="sparse",
          batch=tok[k], q_len=1, kv_len=topk[k], n_heads=h[k], n_kv=1, head_dim_qk=lat,
          head_dim_v=g["kv_lora"], window=0, causal=1, page_size=_PAGE, kv_bytes=2,
          kv_split=split, operand_reads=1, preprocess_bytes=0, rope_elements=0,
          filled_keys=filled[k])  # fmt: skip


#: The MLA geometry of the sparse-attention models the DSA module tables name: hidden, q and kv
#: LoRA ranks, the nope, RoPE and value head dims (their config.json, vendored under
#: mlacalc/data/models/: deepseek-v3.2.yaml, glm-5.1.yaml, which equals GLM-5's; GLM-5.2 taken
#: as GLM-5's, as in :data:`INDEXERS`).
_GLM5 = {"hidden": 6144, "q_lora": 2048, "kv_lora": 512, "nope": 192, "rope": 64, "v": 256}
DSA_GEOMETRY = {
    "deepseek-ai/DeepSeek-V3.2": DSV3,
    **{m: _GLM5 for m in INDEXERS if "GLM-5" in m},
}


def _dsa_geometry(t: MeasuredTable, reason: np.ndarray) -> dict[str, np.ndarray]:
    """Per-row MLA geometry (:data:`DSA_GEOMETRY`); a model not listed is ``unknown_model``."""
    models = t.column("model").astype(str)
    reason[~np.isin(models, list(DSA_GEOMETRY))] = "unknown_model"
    names, inverse = np.unique(models, return_inverse=True)  # each model looked up once
    inverse = inverse.reshape(-1)
    return {
        key: np.array([DSA_GEOMETRY.get(m, DSV3)[key] for m in names.tolist()],
                      dtype=np.float64)[inverse]
        for key in DSV3
    }  # fmt: skip


def _kv_cache_walk(t: MeasuredTable, kvd: np.ndarray) -> np.ndarray:
    """Per row whether a walk over its cache is FlashMLA's fp8 sparse decode kernel, timed by
    that kernel's own class (:data:`~mlacalc.timemodel.dsa_time.KV_CACHE_WALK`)."""
    gen = device_figures(load_hardware(t.system)).kernel_generation
    return kv_cache_walk(t.engine, gen, kvd == "fp8")


def _sparse_walk(t: MeasuredTable, kvd: np.ndarray, heads: np.ndarray, context: bool):
    """Per row the heads a pass of the table's sparse MLA kernel takes where it walks every
    top-k slot of a query, 0 where it walks the slots the keys fill at the row's heads: the
    rule a served step's DSA core runs by too (:func:`mlacalc.timemodel.dsa_time.walk_heads`,
    keyed by the device's kernel generation; the evidence is beside
    :data:`~mlacalc.timemodel.dsa_time.SPARSE_WALK`)."""
    gen = device_figures(load_hardware(t.system)).kernel_generation
    return walk_heads(t.engine, gen, context, kvd == "fp8", heads)


def _dsa_small_kernels(b: _Builder, rows, indexer, tok, h, ih, idim, g, kvb, sparse_prompt) -> None:
    """The DSA module's small kernels besides its two RMSNorms, each a streaming
    ``elementwise`` kernel of its bytes (``tok`` tokens, ``h`` heads, ``ih`` indexer heads of
    ``idim``): where the indexer runs, its key LayerNorm, its RoPE of the query heads and the
    key, the fp8 quantization of its query (a scale per 128 elements) and of its key with the
    write into the indexer's cache; on a prompt's sparse path (``sparse_prompt``) the MLA's
    RoPE of the query heads and the latent key and the latent row's write into the cache (a
    decode row's and SGLang's dense path's are the attention kernel's preprocessing,
    ``rope_elements`` and ``preprocess_bytes``). On TensorRT-LLM's one-token B200 decode rows
    (eager, 112 us at the median) the mapped kernels take 0.97 of the time with these four
    indexer kernels (8 us), 0.89 without."""
    rope, lat = g["rope"], g["kv_lora"] + g["rope"]
    rope_x = tok * (ih + 1) * rope
    index = (
        ("index_k_norm", tok * idim * 4.0, tok * idim),
        ("index_rope", rope_x * 4.0, rope_x),
        ("index_q_quant", tok * ih * (idim * 3.0 + 4.0), tok * ih * idim),
        ("index_k_cache", tok * (idim * 3.0 + 4.0), tok * idim),
    )
    for name, nbytes, elements in index:
        b.add(name, "elementwise", "bf16", rows[indexer], 0.0, nbytes[indexer],
              elements=elements[indexer])  # fmt: skip
    mla_x = tok * (h + 1) * rope
    for name, nbytes, elements in (
        ("mla_rope", mla_x * 4.0, mla_x),
        ("kv_cache_write", tok * lat * (2.0 + kvb), tok * lat),
    ):
        b.add(name, "elementwise", "bf16", rows[sparse_prompt], 0.0, nbytes[sparse_prompt],
              elements=elements[sparse_prompt])  # fmt: skip


def _one_kernel_decode(b: _Builder, system: str, one, bs, keys, h, topk, g, unit, small) -> None:
    """The decode rows ``one`` whose query is one more query of the prompt's absorbed sparse
    kernel (:data:`~mlacalc.timemodel.dsa_time.ONE_SPARSE_KERNEL`; the context rows'
    ``sparse_mla``): ``bs`` sequences of one new token over ``min(keys, topk)`` latent rows,
    bf16 products, the prompt rows' key split (none on Hopper) and unit (``unit``:
    :func:`~mlacalc.timemodel.dsa_time.sparse_unit_heads`)."""
    if not one.any():
        return
    rows, bs, keys, h, topk, unit, small = (np.flatnonzero(one), bs[one], keys[one], h[one],
                                            topk[one], unit[one], small[one])  # fmt: skip
    g = {k: v[one] for k, v in g.items()}
    lat = g["kv_lora"] + g["rope"]
    a = absorbed_prompt_core(bs, 1.0, keys, h, topk, lat, g["kv_lora"], 2.0)
    # FlashMLA's sparse class for both kernels: TensorRT-LLM-gen's (vLLM's FlashInfer), fitted
    # on its prompt rows, is no decode row's (dsa_time.DECODE_SPARSE_VARIANT)
    b.add_by_dtype("mla_decode", "mla_decode", np.full(len(rows), "bf16"), rows, a["flops"],
                   a["bytes"], variant=DECODE_SPARSE_VARIANT, batch=bs, q_len=1,
                   kv_len=a["kv_len"], n_heads=h, n_kv=1, head_dim_qk=lat,
                   head_dim_v=g["kv_lora"], window=0, causal=1,
                   page_size=_PAGE, kv_bytes=2.0, kv_split=0.0 if system == "h100_sxm" else 1.0,
                   operand_reads=1, preprocess_bytes=0, rope_elements=0,
                   unit_heads=unit, small_units=small)  # fmt: skip


def _core_variant(
    walks: np.ndarray, own: np.ndarray, sparse, gen=False, gen_variant=GEN_SPARSE_VARIANT
) -> np.ndarray:
    """Per row the class variant of a DSA module row's attention core: a walk of the prompt's
    sparse kernel its own (:data:`~mlacalc.timemodel.mla_time.WALK_VARIANT`), FlashMLA's fp8
    walk and the rows ``sparse`` names (a prompt's sparse kernel) ``sparse``, those of them
    ``gen`` names (TensorRT-LLM-gen's sparse kernel) its own
    (:data:`~mlacalc.timemodel.mla_time.GEN_SPARSE_VARIANT`), any other core the plain class's
    (``""``: a decode core that does not walk, SGLang's B200 prompt of TensorRT-LLM-gen's
    decode kernel)."""
    prompt = np.where(~walks & gen, gen_variant, "sparse")
    return np.where(walks & ~own, WALK_VARIANT, np.where(walks | sparse, prompt, ""))


def _prompt_core_in_cache_dtype(
    t: MeasuredTable, src: np.ndarray, kvb: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Per row of a DSA prompt module table, whether its sparse core runs in the cache's dtype:
    SGLang's TensorRT-LLM-gen path on B200 (``kernel_source`` ``..._trtllm``) runs the MLA
    decode kernel of its generation_mla_perf rows (``trtllm_mla``), a prompt token a query over
    its top-k slots, in the cache's dtype, which that table's plain class times (an fp8 cache:
    fp8 q and latent rows at the fp8 rate; as FlashMLA's bf16 prompt kernel, 2.3-3.4x its
    time: 0.37-0.96 us a token where the rows take 0.12-0.31) (first); an engine of
    :data:`~mlacalc.timemodel.dsa_time.FP8_SPARSE_PROMPT` reads an fp8 cache and multiplies it
    as stored, its sparse kernel's variant kept (second)."""
    gen = (t.system == "b200_sxm") & np.char.endswith(src, "_trtllm")
    generation = device_figures(load_hardware(t.system)).kernel_generation
    f8 = (kvb <= 1.0) & ((t.engine, generation) in FP8_SPARSE_PROMPT)
    return gen, f8


def _dsa_dense_prompt(b: _Builder, rows: np.ndarray, g: dict, bs, isl, keys, h, pairs) -> None:
    """A DSA prompt module's dense path (SGLang's ``..._dense_mha_...`` rows, up to 2,048 keys;
    every argument, the geometry ``g`` too, already those rows'): the kv_b GEMM over every key
    and an ``mla_prefill`` of the new tokens over them all (:func:`_dsa_module_table`)."""
    tok, lat, qk = bs * isl, g["kv_lora"] + g["rope"], g["nope"] + g["rope"]
    _gemm_kernels(b, "kv_b", rows, "bf16", bs * keys, h * (g["nope"] + g["v"]), g["kv_lora"])
    qkv = tok * h * qk * 2 + bs * keys * h * (qk + g["v"]) * 2
    b.add("mla_context", "mla_prefill", "bf16", rows,
          2.0 * h * pairs * (qk + g["v"]), qkv + tok * h * g["v"] * 2,
          batch=bs, q_len=isl, kv_len=keys, n_heads=h, n_kv=h,
          head_dim_qk=qk, head_dim_v=g["v"], window=0, causal=1, kv_bytes=2,
          preprocess_bytes=tok * lat * 4,
          rope_elements=tok * (h + 1) * g["rope"])  # fmt: skip


def _dsa_module_table(t: MeasuredTable, b: _Builder, reason: np.ndarray, *, context: bool) -> None:
    """``dsa_context_module_perf`` / ``dsa_generation_module_perf``: DeepSeek-V3.2's and GLM-5's
    sparse-attention module for ``batch_size`` sequences of ``isl`` new tokens (one in the
    generation table) after ``step`` cached ones, as a composite of the kernels it runs, under
    a host floor (:mod:`mlacalc.timemodel.host_floor`): the rows time the engine's eager
    launch sequence, so a row's prediction is the larger of its kernels' sum and the engine's
    fitted dispatch time of the module (``MappedTable.host_s``).

    Kernels (``T`` tokens): the fused q_a + kv_a projection, q_b and o_proj GEMMs in the row's
    ``gemm_type``, the two RMSNorms; the indexer (unless ``op_name`` says it was skipped): its
    wq_b and wk GEMMs (``gemm_type``) and head-weights GEMM (bf16), the logits (a prompt:
    ``attention_prefill`` fp8 ``indexer`` over each query's causal keys, as
    ``glm5_mqa_logits_module_perf``; decode: ``mla_decode`` fp8 ``indexer`` over the cache, as
    ``dsv4_paged_mqa_logits_module_perf`` uncompressed) and the top-k (``elementwise``
    ``topk_flat``, as ``glm5_topk_module_perf``; none where no query has more keys than the
    top-k, as that table's zero rows show); then the attention. SGLang's dense path
    (``kernel_source`` ``..._dense_mha_fa3`` on H100, ``..._dense_mha_trtllm_ragged`` on
    B200: up to 2,048 keys) is the kv_b GEMM and an
    ``mla_prefill`` of the new tokens over every key; every other prompt row the absorbed
    sparse path: the pre-BMM, the sparse MLA of each token over ``min(top-k, keys)`` latent
    rows (``mla_decode`` ``sparse``, as ``glm5_dsa_attn_module_perf``), the post-BMM; a decode
    row the BMMs around ``mla_decode`` over ``min(top-k, step + 1)`` rows. The projections run
    in ``gemm_type`` (``nvfp4`` too: TensorRT-LLM's and vLLM's B200 rows); the indexer's and
    the prompt's RoPE, quantization and cache writes are kernels of their own
    (:func:`_dsa_small_kernels`). Which projections an engine fuses is not recorded."""
    g = _dsa_geometry(t, reason)
    ih, idim, topk, _ = _indexer_geometry(t, reason)
    bs, h = _f(t.column("batch_size")), _f(t.column("num_heads"))
    isl = _f(t.column("isl")) if context else np.ones(len(t))
    step = _f(t.column("step"))
    keys = step + isl
    kvd, gt = canon_dtypes(t.column("kv_cache_dtype")), canon_dtypes(t.column("gemm_type"))
    op = t.column("op_name").astype(str)
    src = t.column("kernel_source").astype(str)
    indexer = ~np.char.endswith(op, "skip_indexer")
    dense = np.char.find(src, "_dense_mha_") >= 0  # FlashAttention-3 (H100), TRT-LLM ragged (B200)
    rows = np.arange(len(t))
    tok = bs * isl
    lat = g["kv_lora"] + g["rope"]
    first = len(b.parts)
    for d in ("bf16", "fp8_block", "nvfp4"):
        s = gt == d
        if not s.any():
            continue
        r, tk = rows[s], tok[s]
        _gemm_kernels(b, "q_a+kv_a", r, d, tk, (g["q_lora"] + lat)[s], g["hidden"][s])
        _gemm_kernels(b, "q_b", r, d, tk, (h * (g["nope"] + g["rope"]))[s], g["q_lora"][s])
        _gemm_kernels(b, "o_proj", r, d, tk, g["hidden"][s], (h * g["v"])[s])
        x = s & indexer
        if x.any():
            _gemm_kernels(b, "wq_b", rows[x], d, tok[x], (ih * idim)[x], g["q_lora"][x])
            _gemm_kernels(b, "wk", rows[x], d, tok[x], idim[x], g["hidden"][x])
    # the projections are a model step's GEMMs: a block-scaled one runs as the engine runs it
    # in a served step (SGLang: the per-tensor class, gemm_time.step_block_fp8)
    b.parts[first:] = [
        KernelPart(p.name, p.rows, step_block_fp8(p.batch, t.engine)) for p in b.parts[first:]
    ]
    x = indexer
    _gemm_kernels(b, "weights_proj", rows[x], "bf16", tok[x], ih[x], g["hidden"][x])
    _module_norms(t, b, rows, tok, g["q_lora"], g["kv_lora"])  # vLLM's: no norm_dispatch
    walk = _sparse_walk(t, kvd, h, context)
    # decode rows of the prompt's sparse kernel, their RoPE and cache write apart as a prompt's
    one = (walk == 0) & (not context and t.engine in ONE_SPARSE_KERNEL)
    _dsa_small_kernels(b, rows, indexer, tok, h, ih, idim, g, _elem(kvd), (context & ~dense) | one)
    pairs = bs * (isl * step + isl * (isl + 1) / 2)
    _dsa_indexer_kernels(t, b, rows, indexer, bs, isl, step, pairs, ih, idim, topk, gt, context)
    kvb = _elem(kvd)
    d_ = dense & context
    if d_.any():
        sub = {k: v[d_] for k, v in g.items()}
        _dsa_dense_prompt(b, rows[d_], sub, *(v[d_] for v in (bs, isl, keys, h, pairs)))
    sp = ~d_
    r = rows[sp]
    _gemm_kernels(b, "bmm_pre", r, "bf16", tok[sp], g["kv_lora"][sp], g["nope"][sp], h[sp],
                  variant="bmm")  # fmt: skip
    _gemm_kernels(b, "bmm_post", r, "bf16", tok[sp], g["v"][sp], g["kv_lora"][sp], h[sp],
                  variant="bmm")  # fmt: skip
    kv = np.minimum(keys, np.maximum(topk, 1))
    cached = bs * np.minimum(keys, kv * isl)  # a sequence's tokens pick among its rows
    # the kernels that walk every top-k slot of a query with its heads padded, as a served
    # step's DSA core runs them (mlacalc.timemodel.dsa_time: the rule and its work, shared)
    walks = walk > 0
    own = walks & _kv_cache_walk(t, kvd)  # FlashMLA's fp8 sparse decode kernel, its own class
    kern = mla_decode_kernel(device_figures(load_hardware(t.system)))
    w = walked_core(tok, h, topk, lat, g["kv_lora"], kvb, np.where(walks, walk, WALK_HEADS))
    own_unit, small = sparse_unit_heads(t.engine, src), sparse_small_units(t.engine, src)  # units
    # TensorRT-LLM-gen's sparse kernel attends a prompt token's causal picks (dsa_time.causal_picks)
    gen_sparse = own_unit > 0
    gen_variant = gen_sparse_variant(t.engine, src, tok)
    wide = gen_sparse & (gen_variant == GEN_SPARSE_WIDE_VARIANT)  # FLASHINFER_WIDE_PICKS a token
    top = np.where(wide, np.minimum(topk, FLASHINFER_WIDE_PICKS), topk)
    kv = np.where(gen_sparse, causal_picks(isl, keys, top), kv)
    kv, hk = np.where(walks, w["kv_len"], kv), np.where(walks, w["n_heads"], h)
    flops = np.where(walks, w["flops"], 2.0 * h * tok * kv * (lat + g["kv_lora"]))
    if context:
        split = np.where(own, kern["kv_split"], 0.0 if t.system == "h100_sxm" else 1.0)
        gen, f8 = _prompt_core_in_cache_dtype(t, src, kvb)
        eb = np.where(gen | f8, kvb, 2.0)
        # FlashMLA's sparse prompt multiplies every top-k slot, gathers the filled ones
        kgen = device_figures(load_hardware(t.system)).kernel_generation
        flashmla = ~walks & ~gen & ~f8 & ~gen_sparse & EVERY_SLOT_PROMPT.get(kgen, False)
        a = absorbed_prompt_core(bs, isl, keys, h, topk, lat, g["kv_lora"], eb, gen_sparse, wide,
                                 flashmla)  # fmt: skip
        flops, nbytes = (np.where(walks, w[k], a[k]) for k in ("flops", "bytes"))
        kv = np.where(flashmla, a["kv_len"], kv)
        b.add_by_dtype("sparse_mla", "mla_decode", np.where(gen | own | f8, kvd, "bf16")[sp], r,
                       flops[sp], nbytes[sp],
                       variant=_core_variant(walks, own, ~gen, gen_sparse, gen_variant)[sp],
                       batch=tok[sp], q_len=1, kv_len=kv[sp], n_heads=hk[sp], n_kv=1,
                       head_dim_qk=lat[sp], head_dim_v=g["kv_lora"][sp], window=0, causal=1,
                       page_size=_PAGE, kv_bytes=np.where(gen | own | f8, kvb, 2.0)[sp],
                       kv_split=split[sp], operand_reads=1, preprocess_bytes=0, rope_elements=0,
                       unit_heads=own_unit[sp], small_units=small[sp],
                       filled_keys=a["filled_keys"][sp])  # fmt: skip
    else:
        _one_kernel_decode(b, t.system, one, bs, keys, h, topk, g, own_unit, small)
        sp, r = sp & ~one, rows[sp & ~one]
        pre = tok * h * lat * 4.0 + tok * lat * (2 + kvb)
        core = cached * lat * kvb + tok * h * lat * 2 + tok * h * g["kv_lora"] * 2
        nbytes = pre + np.where(walks, w["bytes"], core)
        # a walking query: the prompt's sparse kernel (bf16 products, SPARSE_WALK's note), or
        # FlashMLA's fp8 decode kernel splitting the keys (dsa_time.KV_CACHE_WALK)
        split = np.where(walks & ~own, 0.0 if t.system == "h100_sxm" else 1.0, kern["kv_split"])
        dt = np.where((walks & ~own) | (kvd != "fp8"), "bf16", "fp8")
        # the plain class's call between the absorption BMMs (dsa_time.DSA_DECODE_CHAIN)
        kgen = device_figures(load_hardware(t.system)).kernel_generation
        chain = float(dsa_decode_chain(t.engine, kgen))
        # the engine's own kernels before the call (dsa_time.DSA_DECODE_PRE_KERNELS)
        pre_k = dsa_decode_pre_kernels(t.engine, kgen, kvd == "fp8")
        b.add_by_dtype("mla_decode", "mla_decode", dt[sp], r,
                       flops[sp], nbytes[sp], variant=_core_variant(walks, own, False)[sp],
                       batch=bs[sp], q_len=1, kv_len=kv[sp], n_heads=hk[sp], n_kv=1,
                       head_dim_qk=lat[sp], head_dim_v=g["kv_lora"][sp], window=0, causal=1,
                       page_size=_PAGE, kv_bytes=kvb[sp], kv_split=split[sp],
                       operand_reads=kern["operand_reads"], preprocess_bytes=pre[sp],
                       rope_elements=(tok * (h + 1) * g["rope"])[sp],
                       unit_heads=np.where(walks, own_unit, 0.0)[sp],
                       absorbed_chain=chain, pre_kernels=pre_k[sp])  # fmt: skip
    reason[np.char.startswith(gt, "?")] = "unknown_dtype"
    # eager past a CUDA graph; a prompt past LONG_CACHE_TOKENS its long-context group
    labels = floor_sources(t.system, t.engine, t.table, src, bs, t.column("step"),
                           t.column("gemm_type"), t.column("model"))  # fmt: skip
    b.host_floor(t, labels, t.column("gemm_type"), t.column("kv_cache_dtype"), bs)


def _dsa_indexer_kernels(
    t: MeasuredTable,
    b: _Builder,
    rows: np.ndarray,
    indexer: np.ndarray,
    bs: np.ndarray,
    isl: np.ndarray,
    step: np.ndarray,
    pairs: np.ndarray,
    ih: np.ndarray,
    idim: np.ndarray,
    topk: np.ndarray,
    gt: np.ndarray,
    context: bool,
) -> None:
    """A DSA module row's indexer past its GEMMs (:func:`_dsa_module_table`): the logits over
    each query's keys, the engine's top-k and SGLang's pass over a prompt batch's ragged
    logits, on the rows whose ``indexer`` ran."""
    x = indexer
    keys = step + isl
    tok = bs * isl
    # the logits' shape a served step gives them too (words.kernels.dsa_logits_shape): a
    # prompt query's keys in whole blocks (cost.compressed.walked_logit_keys)
    mean_keys = walked_logit_keys(step, np.maximum(isl, 1.0)) if context else keys
    # SGLang scores a prompt batch as one ragged run, a logits row as wide as all its keys
    ragged = context and t.engine in RAGGED_LOGITS_ENGINES
    wide = (bs * (step + isl))[x] if ragged else None
    shape = dsa_logits_shape(bs[x], isl[x], mean_keys[x], ih[x], idim[x], not context, wide)
    for served in ("indexer", "rows_per_query", "pooled_ratio"):  # a served step's fields
        shape.pop(served, None)
    nb = tok * ih * (idim + 4) + bs * keys * (idim + 4) + pairs * 4
    b.add("mqa_logits" if context else "paged_mqa_logits",
          "attention_prefill" if context else "mla_decode", "fp8", rows[x],
          (2 * ih * idim * pairs)[x], nb[x], variant="indexer", **shape)  # fmt: skip
    # the engine's top-k kernel (glm5_topk_module_perf's, or its own), as a served step runs it
    sel, sel_bytes = dsa_topk(bs, isl, step, topk, not context, t.engine)
    x = indexer & (sel["units"] > 0)  # no query with more keys than top-k: no selection runs
    # TensorRT-LLM's decode rows near the top-k in the runs that show the slower path
    near = near_topk_rows(bs, isl, step, topk, not context, t.engine)
    near = np.where(np.isin(gt, list(NEAR_TOPK_GEMMS)), near, 0.0)
    b.add("topk", "elementwise", "bf16", rows[x], 0.0, sel_bytes[x], elements=sel["elements"][x],
          variant=TOPK_KERNEL_VARIANTS[max(int(sel["topk_kernel"].max()), DSA_TOPK_CODE) - 1],
          units=sel["units"][x], ctas=sel["ctas"][x], near_rows=near[x],
          long_elements=sel["long_elements"][x])  # fmt: skip
    # SGLang's pass over the prompt batch's whole ragged logits matrix (cost.compressed)
    rag = dsa_ragged_logits_bytes(bs, isl, step, topk, not context, t.engine)
    x = indexer & (rag > 0)
    b.add("ragged_logits", "elementwise", "bf16", rows[x], 0.0, rag[x])


def _dsv4_module_table(t: MeasuredTable, b: _Builder, reason: np.ndarray) -> None:
    """``dsv4_{csa,hca}_{context,generation}_module_perf``: one DeepSeek-V4 attention layer of
    that kind as a model step's kernels (:mod:`mlacalc.measured.dsv4_modules`), under the
    engine's host floor where it has one (:mod:`mlacalc.timemodel.host_floor`)."""
    b.parts.extend(dsv4_module_parts(t, reason))
    b.host_floor(t, t.column("kernel_source"))


def _msa_module_table(t: MeasuredTable, b: _Builder, reason: np.ndarray) -> None:
    """``msa_{context,generation}_module_perf``: one MiniMax-M3 block-sparse layer's attention
    block as a model step's kernels (:mod:`mlacalc.measured.msa_modules`), under the engine's
    host floor where it has one (none is listed for these tables: their kernels' time)."""
    b.parts.extend(msa_module_parts(t, reason))
    b.host_floor(t, t.column("kernel_source"))


_MAPPERS = {
    "glm5_mqa_logits_module_perf": _mqa_logits_table,
    "dsv4_paged_mqa_logits_module_perf": _paged_mqa_logits_table,
    "mhc_module_perf": _mhc_table,
    "glm5_topk_module_perf": _topk_table,
    "dsv4_csa_topk_calib_perf": _topk_table,
    "glm5_dsa_attn_module_perf": _sparse_mla_table,
    "dsa_context_module_perf": lambda t, b, r: _dsa_module_table(t, b, r, context=True),
    "dsa_generation_module_perf": lambda t, b, r: _dsa_module_table(t, b, r, context=False),
    "dsv4_csa_context_module_perf": _dsv4_module_table,
    "dsv4_csa_generation_module_perf": _dsv4_module_table,
    "dsv4_hca_context_module_perf": _dsv4_module_table,
    "dsv4_hca_generation_module_perf": _dsv4_module_table,
    "dsv4_hca_attn_module_perf": _dsv4_module_table,
    "msa_context_module_perf": _msa_module_table,
    "msa_generation_module_perf": _msa_module_table,
    "gemm_perf": _gemm_table,
    "context_attention_perf": lambda t, b, r: _attention_table(t, b, r, context=True),
    "encoder_attention_perf": _encoder_attention_table,
    "gdn_perf": _gdn_table,
    "mamba2_perf": _mamba2_table,
    "generation_attention_perf": lambda t, b, r: _attention_table(t, b, r, context=False),
    "context_mla_perf": lambda t, b, r: _mla_table(t, b, r, context=True),
    "generation_mla_perf": lambda t, b, r: _mla_table(t, b, r, context=False),
    "mla_context_module_perf": lambda t, b, r: _mla_module_table(t, b, r, context=True),
    "mla_generation_module_perf": lambda t, b, r: _mla_module_table(t, b, r, context=False),
    "mla_bmm_perf": _mla_bmm_table,
    "moe_perf": _moe_table,
    "custom_allreduce_perf": _allreduce_table,
    "nccl_perf": _nccl_table,
    "wideep_deepep_ll_perf": lambda t, b, r: _deepep_table(t, b, r, low_latency=True),
    "wideep_deepep_normal_perf": lambda t, b, r: _deepep_table(t, b, r, low_latency=False),
    "scale_matrix_perf": lambda t, b, r: _quantize_table(t, b, r, scale_only=False),
    "computescale_perf": lambda t, b, r: _quantize_table(t, b, r, scale_only=True),
}


#: Tables read but not mapped onto kernels, each with the reason. Their rows are counted as not
#: predicted (reason ``not_mapped``) by :func:`map_table`, never dropped; docs/measured-sets.md
#: says what one row of each measures, as far as the columns and meta files tell.
UNMAPPED: dict[str, str] = {}


def mapped_tables() -> list[str]:
    """Names of the tables :func:`map_table` maps onto kernels."""
    return sorted(_MAPPERS)


def size_faults(table: MeasuredTable) -> np.ndarray:
    """Per row, ``<column>_not_positive`` for the first size column
    (:data:`~mlacalc.measured.mapped.SIZE_COLUMNS`: ``m``, ``batch_size`` ...) whose value is
    0, negative or missing, else "": a kernel of such a size has no time (the time model
    divided by it, numpy warning, and the row was counted as ``no_time_model``)."""
    out = np.full(len(table), "", dtype=object)
    for name in SIZE_COLUMNS:
        col = table.columns.get(name)
        if col is None or col.dtype.kind not in "iuf":
            continue
        with np.errstate(invalid="ignore"):
            bad = ~(np.asarray(col, dtype=np.float64) > 0)
        out[bad & (out == "")] = f"{name}_not_positive"
    return out


def map_table(table: MeasuredTable, *, quirks: bool = True) -> MappedTable:
    """The kernels of every row of ``table``, and the rows left out by reason.

    With ``quirks`` (the default) the quirk rules of :mod:`mlacalc.measured.quirks` mark the
    rows they exclude; kernels are still built for those rows, so a caller can look at them.
    """
    mapper = _MAPPERS.get(table.table)
    if mapper is None and table.table in UNMAPPED:
        reason = np.full(len(table), "not_mapped", dtype=object)
        mapped = MappedTable(table=table, parts=[], reason=reason)
        mapped.rules.append(f"not_mapped: {UNMAPPED[table.table]}")
        return mapped
    if mapper is None:
        raise ConfigError(
            f"is a table mlacalc cannot map onto kernels (known: {', '.join(sorted(_MAPPERS))})",
            source=table.source,
            field=table.table,
        )
    reason = np.full(len(table), "", dtype=object)
    sized = size_faults(table)
    b = _Builder(len(table), table.engine)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        mapper(table, b, reason)  # a row of a size of 0 divides by it: left out below
    parts = b.parts
    if (sized != "").any():  # its kernels never reach the time model (numpy warned there)
        reason[sized != ""] = sized[sized != ""]
        keep = sized == ""
        parts = []
        for p in b.parts:
            idx = np.flatnonzero(keep[p.rows])
            if idx.size:
                parts.append(dataclasses.replace(p, rows=p.rows[idx], batch=p.batch.take(idx)))
    mapped = MappedTable(
        table=table, parts=parts, reason=reason, host_s=b.host_s, host_groups=b.host_groups
    )
    bad_time = ~np.isfinite(table.seconds) | (table.seconds <= 0)
    timed = (reason == NO_KERNEL) & ~bad_time  # no kernel said, a time measured: a miss
    mapped.reason[timed] = NO_KERNEL_TIMED
    mapped.exclude(bad_time, "zero_time")
    if quirks:
        apply_quirks(mapped)
    return mapped


def single_kernel_rows(mapped: MappedTable) -> list[tuple[KernelPart, np.ndarray]]:
    """For each part, the positions of its kernels that are the whole of a predicted row
    (rows of one kernel, not excluded): what a per-class fit can use directly."""
    n = len(mapped.table)
    count = np.zeros(n, dtype=np.int64)
    for p in mapped.parts:
        count += np.bincount(p.rows, minlength=n)
    usable = (count == 1) & (mapped.reason == "")
    return [(p, np.nonzero(usable[p.rows])[0]) for p in mapped.parts]


def observations(measured) -> list:
    """Measured sets as the time model's fit input (:class:`mlacalc.timemodel.fit.Observations`):
    one per kernel class and table, single-kernel rows only, quirk-excluded rows left out.

    ``measured`` is a :class:`~mlacalc.measured.tables.MeasuredSet`, a path or a list of paths.
    Composite rows (the MLA module tables) and microbenchmark tables are not fit input.
    """
    mset = measured if isinstance(measured, MeasuredSet) else load_measured(measured)
    out = []
    for table in mset.tables:
        if table.table not in _MAPPERS:
            continue
        mapped = map_table(table)
        for part, pos in single_kernel_rows(mapped):
            if pos.size == 0:
                continue
            b = part.batch
            sub = b.take(pos)
            out.append(
                Observations(
                    device=table.device,
                    table=table.table,
                    batch=sub,
                    seconds=table.seconds[part.rows[pos]],
                    source=table.source,
                )
            )
    return out
