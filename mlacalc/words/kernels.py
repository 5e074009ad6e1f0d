"""The kernel vocabulary of the time model.

A step of a model, and every row of a measured set, is described as kernels: a kernel class
(``kind``), the dtype it computes in, its exact FLOPs and minimal HBM bytes, the number of
kernel calls it stands for, and the shape fields its class needs. Kernels of one class are
held column-wise in a :class:`KernelBatch` so that a time model predicts thousands of rows
with one numpy expression; a single :class:`Kernel` is a batch of one.

The classes and the shape fields each one carries:

=====================  ==============================================================
kind                   shape fields
=====================  ==============================================================
``gemm``               ``m``, ``n``, ``k`` (one ``[m, k] @ [k, n]`` product), ``groups``
                       (independent products of that shape in one call: a batched GEMM)
``attention_prefill``  ``batch``, ``q_len``, ``kv_len``, ``n_heads``, ``n_kv``,
                       ``head_dim_qk``, ``head_dim_v``, ``window`` (0 = full), ``causal``
``attention_decode``   as ``attention_prefill`` (``q_len`` = new tokens per sequence)
``mla_prefill``        as ``attention_prefill``: expanded MLA heads, or latent ones
                       (``n_kv`` = 1, 576 / 512) where a kernel runs a prompt absorbed
``mla_decode``         as ``attention_prefill``, latent heads (``n_kv`` = 1,
                       ``head_dim_qk`` = ``d_c + d_rope``, ``head_dim_v`` = ``d_c``)
``moe``                ``tokens``, ``hidden``, ``inter`` (per expert, local), ``experts``
                       (local), ``topk``, ``active_experts`` (experts the batch touches
                       on the rank), ``max_tokens_per_expert``, ``gated`` (1/0)
``elementwise``        ``elements``
``quantize``           ``elements``
``all_reduce``,        ``message_bytes`` (per rank), ``n_gpus``
``all_gather``,
``reduce_scatter``,
``all_to_all``,
``p2p``
``dispatch``,          ``tokens`` (per rank), ``hidden``, ``topk``, ``n_gpus``,
``combine``            ``message_bytes``
=====================  ==============================================================

Optional fields a class may carry (a time model uses a default where one is absent; the
measured-set mapping, :mod:`mlacalc.measured.mapping`, sets them as the row was measured):

- ``gemm``: ``warm_l2`` (1 = operands stay in L2 between calls), ``weight_copies`` (distinct
  weight copies cycled per graph), ``quantize_input`` (1 = an fp8 GEMM that also quantizes
  its bf16 input), ``quant_group`` (0 = per tensor, 128 = 1x128 blocks), ``quant_passes``
  (passes over the input), ``quant_permute`` (1 = the quantize also permutes),
  ``quant_launches`` (the quantization's graph nodes; default one a pass), ``quant_atomics``
  (atomics by which a per-tensor amax folds its blocks, one a token, into its one scale),
  ``quant_sm_bound`` (1 = the quantize moves its bytes per SM and clock: vLLM's),
  ``cutlass_dispatch`` (1 = CUTLASS's ``scaled_mm``, whose tile the row count picks: SGLang's
  and vLLM's per-tensor fp8 GEMM), ``cutlass_sm100`` (1 = its Blackwell kernel takes its own
  tiles, ``gemm_time.CUTLASS_SM100_FP8_TILES``: SGLang's);
- attention classes: ``kv_bytes`` (bytes per cached element), ``page_size``, ``sinks``,
  ``preprocess_bytes`` (RoPE and cache-append traffic inside ``bytes``), ``rope_elements``,
  ``kv_reads`` (cache passes from HBM: 2 = K and V, 1 = K alone), ``head_pack`` (the most
  query heads per KV head one unit carries, 0 = every one; default 32 for ``attention_decode``,
  TensorRT-LLM's XQA, and 1 for ``attention_prefill``, a tile a query head; FlashAttention-3
  packs every one in both, FlashInfer and the Triton decode kernels in decode);
  ``attention_prefill`` / ``mla_prefill`` also ``tile_rows`` and ``tile_keys`` (a unit's
  query rows and key block, default 128 x 128); ``mla_decode`` also ``kv_split`` (0 = keys
  are not split across SMs), ``step_kernel`` (1 = a model step's kernel, chosen by the
  device's rule, which an engine's rule may refine); ``mla_prefill`` and ``mla_decode`` also
  ``cache_convert`` (1 = an fp8 cache converted to bf16 by a kernel of its own before a bf16
  attention: SGLang's Hopper kernels); ``mla_decode`` also ``wrapper_row_head_s`` (the engine's
  seconds a query row and head beyond the kernel: vLLM's FlashInfer MLA on B200) and
  ``absorbed_chain`` (1 = the call runs between the absorption BMMs, as a module row or a
  served step runs it) and ``pre_kernels`` (the kernels of the RoPE + latent-append step
  before the attention, where the engine's own count differs from the class's default: one,
  and one more for an fp8 cache's q);
- ``moe``: ``assignments`` ((token, expert) pairs on the rank), ``alpha`` (power-law routing
  exponent, 0 = balanced), ``experts_total``, ``ep``, ``tp``;
- ``quantize``: ``group``, ``passes``, ``write`` (0 = computes the scale only);
- ``dispatch``/``combine``: ``copies`` (token copies sent), ``low_latency`` (1/0), ``sms``.

A batch may also name a *variant* of its class: another kernel implementation of the same
kind whose fit is kept apart. ``"bmm"``: a batched GEMM (``groups > 1``, such as MLA's
per-head absorption products), one launch over every group with a layout and tile choice of
its own; a profile without a ``bmm`` fit times it with the plain GEMM class. ``"amax"``: a
quantize that computes the scale only (``write = 0``: the absolute-maximum reduction of a
dynamic quantization, a kernel with a reduction and a launch of its own).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # numpy is imported where kernels are batched, not for a single Kernel
    import numpy as np

__all__ = [
    "ATTENTION_KINDS",
    "COMM_KINDS",
    "DSA_TOPK_CODE",
    "KERNEL_KINDS",
    "KERNEL_SET_SHAPE",
    "LINEAR_VARIANTS",
    "MIN_LATENCY_MOE",
    "OWN_DECODE_TOPK_CODE",
    "ROW_PROMPT_SHORT_CODE",
    "ROW_PROMPT_TOPK_CODE",
    "ROW_PROMPT_WIDE_CODE",
    "TOPK_KERNEL_VARIANTS",
    "TRTLLM_GEN_MOE",
    "V4_POOL_DECODE",
    "V4_TOPK_VARIANTS",
    "Kernel",
    "KernelBatch",
    "batches_of",
    "dsa_logits_shape",
    "indexer_score_shape",
    "linear_code",
    "roofline_bound",
    "variant_of",
]


#: The shape fields a row of a kernel set (``mlacalc bench --preset calibrate``) gives: the
#: sweep writes them (``mlacalc.bench.kernel_sweep.KERNEL_FIELDS``), calibrate and validate
#: read them (``mlacalc.measured.observations``).
KERNEL_SET_SHAPE = (
    "m", "n", "k", "groups", "batch", "q_len", "kv_len", "n_heads", "n_kv", "head_dim_qk",
    "head_dim_v", "window", "causal", "elements", "warm_l2",
)  # fmt: skip


def indexer_score_shape(batch: int, q_len: int, kv_len: int, heads: int, width: int,
                        causal: bool) -> dict[str, int]:  # fmt: skip
    """The shape of an indexer's score kernel (DSA's lightning indexer, MiniMax-M3's block
    indexer): ``heads`` query heads of ``width`` over one shared key per token, no values, no
    RoPE pre-kernel (the indexer's RoPE is timed with its projections: ``rope_kernel`` 0, as
    the step's attention core, with which it shared a batch)."""
    return {
        "batch": batch,
        "q_len": q_len,
        "kv_len": kv_len,
        "n_heads": heads,
        "n_kv": 1,
        "head_dim_qk": width,
        "head_dim_v": 0,
        "window": 0,
        "causal": int(causal),
        "rope_kernel": 0,
    }


def dsa_logits_shape(batch: Any, q_len: Any, keys: Any, heads: Any, width: Any,
                     decode: bool, batch_keys: Any = None) -> dict[str, Any]:  # fmt: skip
    """The shape of a DSA indexer's fp8 logits kernel (DeepGEMM's MQA logits), as the DSA module
    tables' mapping and a served DeepSeek-V3.2 / GLM-5 step both give it (variant
    ``indexer``, dtype fp8): in decode the paged logits (``mla_decode``: ``q_len`` next
    tokens of each of ``batch`` sequences, ``heads`` indexer heads of ``width`` sharing one
    fp8 key per cached token, ``keys`` of them; the keys split over the SMs, no value
    product, no RoPE pre-kernel); in a prompt the logits of a 128-row tile of (query, head)
    rows (``attention_prefill``: ``q_len x heads`` rows of one head over ``keys``, the mean
    keys a query attends; ``rows_per_query`` and ``pooled_ratio`` 1 let a served plan's step
    recount them per chunk as DeepSeek-V4's prompt indexer, uncompressed). ``batch_keys``: a
    prompt's keys of all its sequences where the engine scores the batch as one ragged run
    (SGLang: the width of its logits matrix, ``attention_time.logits_row_slowdown``); None
    where it does not. Arguments may be arrays (the mapping's rows)."""
    base = {"n_kv": 1, "head_dim_qk": width, "head_dim_v": 0, "window": 0, "kv_bytes": 1,
            "rope_kernel": 0, "preprocess_bytes": 0, "indexer": 1, "causal": 0}  # fmt: skip
    if decode:
        return {**base, "batch": batch, "q_len": q_len, "kv_len": keys, "n_heads": heads,
                "page_size": 64, "kv_split": 1, "operand_reads": 1}  # fmt: skip
    out = {**base, "batch": batch, "q_len": q_len * heads, "kv_len": keys, "n_heads": 1,
           "rows_per_query": heads, "pooled_ratio": 1}  # fmt: skip
    if batch_keys is not None:
        out["batch_keys"] = batch_keys
    return out


#: The attention kernels: prefill and decode, per-head (MHA/GQA/MQA) or MLA.
ATTENTION_KINDS = ("attention_prefill", "attention_decode", "mla_prefill", "mla_decode")
#: The collectives and transfers between GPUs.
COMM_KINDS = (
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "all_to_all",
    "p2p",
    "dispatch",
    "combine",
)
#: Every kind of kernel the time model knows.
KERNEL_KINDS = ("gemm", *ATTENTION_KINDS, "moe", "elementwise", "quantize", *COMM_KINDS)


def roofline_bound(flops: float, nbytes: float, ridge: float, kind: str = "") -> str:
    """What bounds a kernel, by the one rule every front end shows: ``"compute"`` when its
    arithmetic intensity (FLOPs per byte moved) reaches the device's ridge point for the
    kernel's own dtype (peak FLOP/s over memory bandwidth), else ``"memory"``; a collective
    (``kind`` in :data:`COMM_KINDS`) is ``"link"``.

    >>> roofline_bound(2.0e6, 1.0e6, 295.4), roofline_bound(2.4e8, 1.0e6, 206.2)
    ('memory', 'compute')
    """
    if kind in COMM_KINDS:
        return "link"
    if flops <= 0:
        return "memory"
    return "compute" if nbytes <= 0 or flops >= ridge * nbytes else "memory"


#: How many times its plain roofline bound (datasheet peak and bandwidth, no fixed cost) a
#: kernel's modelled time must exceed for its compute term to be read as latency rather than
#: compute: past it the kernel has too little work to fill the device (a few units walking
#: their keys or tiles in turn on a few SMs) and its time stays flat as its work grows, as a
#: fixed cost does (DeepSeek-V3.2's sparse decode core under TensorRT-LLM on H200: 570 MFLOP in
#: 174 us, 167x its bound, the same time from 2k to 128k keys and from batch 1 to 64). Chosen
#: by hand, not fitted: the small GEMMs of a batch-1 step read 2-8x (left compute-limited,
#: docs/time-model.md), the under-filled cores 25-270x
UNDERFILLED_RATIO = 10.0


def limiter(
    kind: str,
    compute_s: float,
    memory_s: float,
    fixed_s: float,
    other_s: float,
    seconds: float,
    roofline_s: float,
    tie: str = "memory",
) -> str:
    """The time model's largest term of a kernel, the ``limited by`` label: ``"link"`` or
    ``"latency"`` for a collective (its link time against its fixed cost); else
    ``"latency"`` where the fixed cost per call outweighs the rest (``other_s``: any other
    term) or where a compute term binds at more than :data:`UNDERFILLED_RATIO` times the
    plain roofline bound ``roofline_s`` (too little work to fill the device), ``"compute"``
    or ``"memory"`` otherwise (``tie``: which when the two are equal). Terms and ``seconds`` are
    of the same calls.

    >>> limiter("gemm", 155e-6, 1e-6, 0.0, 19e-6, 174e-6, 1.04e-6)
    'latency'
    >>> limiter("gemm", 155e-6, 1e-6, 0.0, 19e-6, 174e-6, 37e-6)
    'compute'
    """
    if kind in COMM_KINDS:
        return "link" if memory_s > fixed_s else "latency"
    if fixed_s > max(compute_s, memory_s, other_s):
        return "latency"
    if compute_s > memory_s or (compute_s == memory_s and tie == "compute"):
        underfilled = roofline_s > 0 and seconds > UNDERFILLED_RATIO * roofline_s
        return "latency" if underfilled else "compute"
    return "memory"


@dataclass(frozen=True)
class Kernel:
    """One kernel call (or ``calls`` identical calls) with exact FLOPs and bytes."""

    name: str
    kind: str
    dtype: str
    flops: int
    bytes: int
    calls: int = 1
    shape: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "dtype": self.dtype,
            "flops": self.flops,
            "bytes": self.bytes,
            "calls": self.calls,
            "shape": dict(self.shape),
        }


@dataclass(frozen=True)
class KernelBatch:
    """Kernels of one ``kind`` and ``dtype``, column-wise (numpy arrays of equal length)."""

    kind: str
    dtype: str
    flops: np.ndarray
    bytes: np.ndarray
    calls: np.ndarray
    shape: dict[str, np.ndarray]
    variant: str = ""

    def __len__(self) -> int:
        return int(self.flops.shape[0])

    def take(self, idx: Any) -> KernelBatch:
        """The kernels at ``idx`` (an index array or a boolean mask), as a batch of their own."""
        return KernelBatch(
            self.kind,
            self.dtype,
            self.flops[idx],
            self.bytes[idx],
            self.calls[idx],
            {k: v[idx] for k, v in self.shape.items()},
            self.variant,
        )


#: The measured classes of the linear-attention kernels a step runs (``elementwise``, shape
#: ``linear`` = position + 1): the causal conv1d kernels (a prompt's and the one-token update;
#: Mamba-2's apart), Gated DeltaNet's chunked and recurrent delta rule, each fitted on its
#: engine's ``gdn_perf`` / ``mamba2_perf`` rows.
LINEAR_VARIANTS = (
    "conv1d",
    "conv1d_update",
    "gdn_chunk",
    "gdn_recurrent",
    "mamba2_conv1d",
    "mamba2_conv1d_update",
)


#: The top-k kernels an engine runs for a DeepSeek-V4 CSA layer's indexer in place of the
#: step's (``elementwise``, shape ``topk_kernel`` = position + 1): SGLang's ``topk_transform_v2``
#: over flat logits in decode, that kernel's other path past
#: :data:`mlacalc.cost.compressed.LONG_ROW` pooled keys a row (``topk_v2_long``, whatever the
#: logits), its ``topk_transform_v1`` in a prompt, and the v1 kernel's other path past
#: ``LONG_ROW`` (:func:`mlacalc.cost.compressed.engine_topk`).
V4_TOPK_VARIANTS = ("topk_v2_flat", "topk_v2_long", "topk_v1_flat", "topk_v1_flat_long")
#: Every top-k kernel an engine runs for an indexer (shape ``topk_kernel`` = position + 1):
#: DeepSeek-V4's (:data:`V4_TOPK_VARIANTS`), then a DSA layer's (DeepSeek-V3.2, GLM-5):
#: SGLang's ``fast_topk_transform_fused`` over flat logits, in both phases, as the DSA module
#: rows are mapped (:func:`mlacalc.cost.compressed.dsa_topk`); TensorRT-LLM's own decode top-k
#: (``topk_trtllm_decode``: :data:`mlacalc.cost.compressed.OWN_DECODE_TOPK`); vLLM's
#: DeepSeek-V4 CSA prompt top-k (``topk_vllm_prompt``:
#: :data:`mlacalc.cost.compressed.ROW_TOPK_PROMPT`) and its two other paths by the call's longest
#: row (``topk_vllm_prompt_short``, ``topk_vllm_prompt_wide``:
#: :data:`mlacalc.cost.compressed.ROW_TOPK_SHORT_KEYS`, ``ROW_TOPK_WIDE_KEYS``).
TOPK_KERNEL_VARIANTS = (
    *V4_TOPK_VARIANTS,
    "topk_flat",
    "topk_trtllm_decode",
    "topk_vllm_prompt",
    "topk_vllm_prompt_short",
    "topk_vllm_prompt_wide",
)

#: The shape column of a model step's routed experts that TensorRT-LLM runs on
#: TensorRT-LLM-gen's MoE kernels (``moe_backend="trtllm-gen"``, its ``moe_config.backend``
#: ``TRTLLM``; :mod:`mlacalc.timemodel.moe_backend`): 1 where chosen.
TRTLLM_GEN_MOE = "trtllm_gen_moe"
#: The measured class of those experts: the B200 TensorRT-LLM MoE table's nvfp4 rows of
#: ``kernel_source`` ``moe_torch_flow_min_latency`` (TensorRT-LLM-gen's MoE), a variant beside
#: its CUTLASS rows (the plain class).
MIN_LATENCY_MOE = "moe_torch_flow_min_latency"
#: The ``topk_kernel`` code of a DSA layer's top-k (``topk_flat``).
DSA_TOPK_CODE = len(V4_TOPK_VARIANTS) + 1
#: The ``topk_kernel`` code of TensorRT-LLM's decode top-k of a DSA layer (``topk_trtllm_decode``).
OWN_DECODE_TOPK_CODE = DSA_TOPK_CODE + 1
#: The ``topk_kernel`` code of vLLM's DeepSeek-V4 CSA prompt top-k (``topk_vllm_prompt``).
ROW_PROMPT_TOPK_CODE = OWN_DECODE_TOPK_CODE + 1
#: The ``topk_kernel`` codes of that top-k's paths for a call whose longest row holds at most
#: ``ROW_TOPK_SHORT_KEYS`` pooled keys (``topk_vllm_prompt_short``) and more than
#: ``ROW_TOPK_WIDE_KEYS`` (``topk_vllm_prompt_wide``): :func:`mlacalc.cost.compressed.v4_topk`.
ROW_PROMPT_SHORT_CODE = ROW_PROMPT_TOPK_CODE + 1
ROW_PROMPT_WIDE_CODE = ROW_PROMPT_TOPK_CODE + 2


#: The class variant of SGLang's DeepSeek-V4 decode compressor pooling (shape ``pool_switch``:
#: the layer's compressors, ``pool_rows``: the step's sequences;
#: :data:`mlacalc.cost.compressed.POOL_SWITCH`), timed with its switch past one MMA tile of rows.
V4_POOL_DECODE = "v4_pool_decode"


def linear_code(variant: str) -> int:
    """The ``linear`` shape field that names ``variant`` (:data:`LINEAR_VARIANTS`).

    >>> linear_code("gdn_chunk"), variant_of("elementwise", {"linear": 3})
    (3, 'gdn_chunk')
    """
    return LINEAR_VARIANTS.index(variant) + 1


def variant_of(kind: str, shape: dict[str, Any]) -> str:
    """The class variant of a single kernel: ``"bmm"`` for a GEMM of several groups,
    ``"amax"`` for a quantize that writes nothing (the scale alone), ``"mhc_pre"`` /
    ``"mhc_post"`` for DeepSeek-V4's hyper-connection kernels (shape ``mhc`` 1 / 2), an
    engine's top-k kernel of its indexer (shape ``topk_kernel``: :data:`TOPK_KERNEL_VARIANTS`),
    :data:`V4_POOL_DECODE` for SGLang's DeepSeek-V4 decode compressor pooling (shape
    ``pool_switch``),
    ``"indexer"`` for an indexer's fp8 score kernel (shape ``indexer`` 1: DeepGEMM's MQA
    logits, as the indexer tables time it), ``"sparse"`` for a decode or prompt core over rows
    picked by index (shape ``sparse`` 1: FlashMLA's sparse kernels), a linear-attention
    kernel's measured class (shape ``linear``: :data:`LINEAR_VARIANTS`), ``"dsa"`` for a model
    step's DSA core (shape ``dsa_kv_bytes``: a batch of its own, which the time model runs as the
    engine's sparse MLA kernel, :mod:`mlacalc.timemodel.dsa_time`), ``"deepep"`` for a model
    step's routed experts behind DeepEP's exchange (shape ``deepep`` 1: a batch of its own, which
    the time model runs as the engine's kernel there,
    :func:`mlacalc.timemodel.moe_time.engine_moe_tiles`), :data:`MIN_LATENCY_MOE` for a model
    step's experts TensorRT-LLM runs on TensorRT-LLM-gen's MoE (shape :data:`TRTLLM_GEN_MOE` 1:
    :mod:`mlacalc.timemodel.moe_backend`), else ``""``."""
    if kind == "gemm" and float(shape.get("groups", 1) or 1) > 1:
        return "bmm"
    if kind == "quantize" and float(shape.get("write", 1)) == 0:
        return "amax"
    if kind == "elementwise" and shape.get("linear"):  # a linear-attention kernel's class
        return LINEAR_VARIANTS[int(shape["linear"]) - 1]
    if kind == "elementwise" and shape.get("topk_kernel"):  # an engine's indexer top-k
        return TOPK_KERNEL_VARIANTS[int(shape["topk_kernel"]) - 1]
    if kind == "elementwise" and shape.get("pool_switch"):  # SGLang's V4 decode compressors
        return V4_POOL_DECODE
    if kind == "elementwise" and shape.get("mhc"):  # DeepSeek-V4's hyper-connections
        return "mhc_pre" if float(shape["mhc"]) == 1 else "mhc_post"
    if kind in ("mla_decode", "attention_prefill") and shape.get("indexer"):
        return "indexer"  # DeepGEMM's fp8 MQA logits (DeepSeek-V4's indexer scores)
    if kind in ("mla_decode", "attention_prefill") and shape.get("sparse"):
        return "sparse"  # FlashMLA's sparse kernels over picked rows (DeepSeek-V4's core)
    if kind in ("mla_decode", "mla_prefill") and shape.get("dsa_kv_bytes"):
        return "dsa"  # a DSA core: the engine's sparse MLA kernel, chosen by the time model
    if kind == "moe" and shape.get("deepep"):
        return "deepep"  # experts behind DeepEP's exchange: the engine's kernel, by the time model
    if kind == "moe" and shape.get(TRTLLM_GEN_MOE):
        return MIN_LATENCY_MOE  # TensorRT-LLM's experts on TensorRT-LLM-gen's MoE (chosen)
    return ""


def batches_of(kernels: list[Kernel]) -> list[tuple[list[int], KernelBatch]]:
    """Group single kernels by (kind, dtype, variant) into batches; each with the indices it
    came from."""
    # deferred: a single Kernel needs no numpy, so the numeric path stays without it
    import numpy as np

    groups: dict[tuple[str, str, str], list[int]] = {}
    for i, k in enumerate(kernels):
        groups.setdefault((k.kind, k.dtype, variant_of(k.kind, k.shape)), []).append(i)
    out = []
    for (kind, dtype, variant), idx in groups.items():
        ks = [kernels[i] for i in idx]
        names = sorted({n for k in ks for n in k.shape})
        shape = {n: np.array([k.shape.get(n, 0) for k in ks], dtype=np.float64) for n in names}
        out.append(
            (
                idx,
                KernelBatch(
                    kind,
                    dtype,
                    np.array([k.flops for k in ks], dtype=np.float64),
                    np.array([k.bytes for k in ks], dtype=np.float64),
                    np.array([k.calls for k in ks], dtype=np.float64),
                    shape,
                    variant,
                ),
            )
        )
    return out
