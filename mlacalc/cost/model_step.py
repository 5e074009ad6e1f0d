"""The cost of one model step as a list of kernels (exact FLOPs and bytes, no time).

A step (prefill, decode or a chunk) of a model runs, per decoder layer, its attention block and
its FFN (dense or mixture of experts), then the final norm and the output head. This module
lists the kernels a serving engine runs for it as :class:`mlacalc.words.kernels.Kernel` records, the
vocabulary the time layers (:mod:`mlacalc.timemodel.predict`, :mod:`mlacalc.timemodel`) turn into
seconds; nothing here knows a device.

Kernels, per layer kind (``calls`` = the layers of that kind, FLOPs and bytes per call):

- attention block: one ``gemm`` per projection (query, key/value down- and up-projections,
  the absorbed ``W_UK`` / ``W_UV`` products, output projection; ``m``, ``n``, ``k``,
  ``groups`` from the engine's op shapes), the attention core as one flash-style kernel
  (``attention_prefill`` / ``attention_decode`` for MHA/GQA/MQA, ``mla_prefill`` for MLA with
  expanded heads, ``mla_decode`` for MLA in latent space, whatever the phase), and its norms and
  RoPE as ``elementwise`` kernels; a DSA layer (DeepSeek sparse attention) runs its lightning
  indexer before the core (:func:`indexer_kernels`) and its core attends the top-k keys only;
- linear-attention layer (Gated DeltaNet, Kimi Delta Attention): its projections as GEMMs of
  exact shape, its short convolution and Gated DeltaNet's delta rule as the engines' streaming
  kernels of the measured classes (Kimi's rule as GEMMs of exact shape), its gated norm as an
  ``elementwise`` kernel (:func:`mlacalc.cost.linear.linear_kernels`), the fixed state per
  sequence read and written as memory;
- FFN: a dense FFN as an up (gate and up together) ``gemm``, the activation (``elementwise``)
  and a down ``gemm``; a MoE layer as its router (``gemm``), the routed experts as one ``moe``
  kernel and the shared experts like a dense FFN;
- the layer's two norms, the embedding lookup, the final norm (``elementwise``) and the output
  head (``gemm`` on one token per sequence, the token that is sampled).

Bytes of a kernel: what it reads and writes once (weights, its input and output activations,
the cache rows it reads or writes). The new cache rows are written by the key/value
down-projection that produces them (MLA's latent rows, where its query and latent projections
are one GEMM, by its RoPE pre-kernel, as the engines do); the attention core reads the cached
rows of the attended keys once (MLA's latent rows once for scores and values) and never
writes the score matrix.

Two byte totals, and which one is "fused": :attr:`mlacalc.AttentionCost.fused_bytes` is the
*ideal fused lower bound* of an attention layer (each weight once, the layer's input and output
once, the attended cache rows once, the new rows once): the one figure mlacalc calls fused
bytes (``docs/conventions.md``). The kernels here move more: each kernel also reads and writes
the activations it hands to the next one (the query, the absorbed query, the core's output).
For DeepSeek-V3 decode at 4,096 keys, batch 1, bf16 weights, one layer: 378,963,072 fused
bytes; the attention GEMMs and core move 379,653,248 bytes (695,424 bytes of activations handed
between kernels more, less the 4,096 bytes of norm weights the element-wise kernels read and
the 1,152-byte new cache row, which MLA's RoPE pre-kernel writes), and the two latent norms and
RoPE 46,464 bytes more, the new row's included (``handoff_bytes`` 694,272: it counts the
row with the element-wise kernels). :func:`attention_traffic_bytes` gives these
figures for any model and step.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

from mlacalc.cost.attention import (
    attended_pairs,
    indexer_row_bytes,
    op_weight_bits,
    packed_bytes,
)
from mlacalc.cost.block_sparse import (
    BLOCK_SPARSE_KERNELS,
    block_indexer_kernels,
    block_sparse_core,
)
from mlacalc.cost.compressed import (
    COMPRESSED_KERNELS,
    RAGGED_LOGITS_ENGINES,
    compressed_kernels,
    dsa_ragged_logits_bytes,
    dsa_topk,
    walked_logit_keys,
)
from mlacalc.cost.engine import AttentionCost, OpCost, as_model, attention_cost, cost_of
from mlacalc.cost.linear import linear_kernels
from mlacalc.cost.mamba import MAMBA_KERNELS, mamba_kernels
from mlacalc.cost.mamba1 import MAMBA1_KERNELS, mamba1_kernels
from mlacalc.cost.params import (
    FFNShape,
    expert_shape,
    ffn_shape,
    layer_norms,
    router_params,
    shared_experts_shape,
)
from mlacalc.cost.quant import (
    Tensor,
    checkpoint_tensors,
    format_bits,
    format_class,
    kept_head_format,
    tensor_bytes,
    tensor_format,
)
from mlacalc.models.architecture import Arch, arch_of, kind_model, layer_pattern
from mlacalc.models.loading import ModelConfig
from mlacalc.models.patterns import LayerKind
from mlacalc.words import arguments as args
from mlacalc.words.dtypes import (
    canonical_dtype,
    dtype_bits,
    gemm_class,
    resolve_kv_layout,
)
from mlacalc.words.errors import InvalidArgumentError
from mlacalc.words.kernels import Kernel, dsa_logits_shape
from mlacalc.words.vocab import (
    ABSORBED_IMPLS,
    NORM_FLOPS_PER_ELEMENT,
    SCOPES,
    Impl,
    Phase,
    Scope,
)
from mlacalc.words.workload import Workload

__all__ = [
    "FFN_ACTIVATION_FLOPS_PER_ELEMENT",
    "KERNEL_STAGES",
    "as_stored",
    "attention_kernels",
    "attention_traffic_bytes",
    "checkpoint_stored",
    "indexer_kernels",
    "k_assemble_bytes",
    "kernel_stage",
    "moe_active_experts",
    "step_kernels",
    "stored_attention_cost",
    "stored_dtype",
    "stored_experts",
]

#: Nominal FLOPs per element of the FFN activation: SiLU (or GELU) and, gated, the product.
FFN_ACTIVATION_FLOPS_PER_ELEMENT = 5

#: Kernel name -> the stage of the breakdown it belongs to (attention stages as the engine's).
KERNEL_STAGES: dict[str, str] = {
    "q_proj": "q_proj",
    "q_a_proj": "q_proj",
    "q_b_proj": "q_proj",
    "kv_proj": "kv_proj",
    "kv_a_proj": "kv_proj",
    "qkv_a_proj": "kv_proj",
    "kv_b_proj": "kv_up",
    "k_assemble": "layout",
    "prefix_gather": "layout",
    "q_absorb": "absorb",
    "o_absorb": "absorb",
    "attention": "core",
    "o_proj": "o_proj",
    "indexer_q_proj": "q_proj",
    "indexer_weights_proj": "q_proj",
    "indexer_k_proj": "kv_proj",
    "indexer_scores": "core",
    "indexer_topk": "core",
    "indexer_ragged_logits": "core",
    "q_a_layernorm": "norm",
    "kv_a_layernorm": "norm",
    "rope": "rope",
    "embedding": "embedding",
    "input_norm": "norm",
    "post_attention_norm": "norm",
    "final_norm": "norm",
    "dense_ffn_up": "ffn",
    "dense_ffn_act": "ffn",
    "dense_ffn_down": "ffn",
    "router": "ffn",
    "routed_experts": "ffn",
    "shared_experts_up": "ffn",
    "shared_experts_act": "ffn",
    "shared_experts_down": "ffn",
    "lm_head": "head",
    # linear-attention layers (mlacalc.cost.linear) and Qwen3-Next's query gate
    "q_gate_proj": "q_proj",
    "linear_in_proj": "kv_proj",
    "linear_gate_proj": "kv_proj",
    "linear_conv": "core",
    "linear_core": "core",
    "linear_core_qk": "core",
    "linear_core_inverse": "core",
    "linear_core_apply": "core",
    "linear_core_state": "core",
    "linear_core_pv": "core",
    "linear_norm": "norm",
    "linear_o_proj": "o_proj",
    # Mamba-2 layers (mlacalc.cost.mamba) and Nemotron-H's latent MoE projections
    **{
        name: {"mamba_in_proj": "kv_proj", "mamba_norm": "norm", "mamba_out_proj": "o_proj"}.get(
            name, "core"
        )
        for name in MAMBA_KERNELS
    },
    **{  # Jamba's Mamba-1 layers (mlacalc.cost.mamba1)
        name: {
            "mamba1_in_proj": "kv_proj",
            "mamba1_x_proj": "kv_proj",
            "mamba1_dt_proj": "kv_proj",
            "mamba1_dt_norms": "norm",
            "mamba1_out_proj": "o_proj",
        }.get(name, "core")
        for name in MAMBA1_KERNELS
    },
    "moe_latent_in": "ffn",
    "moe_latent_out": "ffn",
    **COMPRESSED_KERNELS,  # DeepSeek-V4's layers (mlacalc.cost.compressed)
    **BLOCK_SPARSE_KERNELS,  # MiniMax-M3's block-sparse indexer (mlacalc.cost.block_sparse)
    "mhc_pre": "hyper",  # DeepSeek-V4's hyper-connections (hyper_kernels)
    "mhc_post": "hyper",
    "hc_head": "hyper",
}

#: Attention ops whose work a serving kernel does inside a neighbour (their bytes are counted
#: there): the cache write (in the key/value projection), the score product, softmax and value
#: product (in the attention core), the absorbed query's layout copy (in the engines' RoPE
#: pre-kernel); the expanded keys' assembly is the kernel after kv_b_proj (:func:`_k_assemble`),
#: whatever implementation's op sequence lists it or not.
_FUSED_AWAY = ("cache_write", "scores", "softmax", "pv", "q_assemble", "k_assemble")


def k_assemble_bytes(keys, heads, nope: int, rope: int, bits: int = 16):
    """Bytes of an expanded MLA prompt's key assembly over ``keys`` keys of ``heads`` heads:
    each head's ``nope``-wide key part (a strided view of kv_b's output) read, the key's one
    ``rope``-wide RoPE part (the latent projection's output) read once and broadcast, and one
    ``nope + rope``-wide key a head written, every element of ``bits`` bits. A copy kernel of
    its own in every engine's MLA prompt (from recall of their sources: TensorRT-LLM's
    ``forward_context_default``, vLLM's ``torch.cat`` in ``_forward_prefill``, SGLang's
    ``forward_normal``). The one definition a served step (:func:`attention_kernels`) and the
    module tables' mapping (:mod:`mlacalc.measured.mapping`) count; ``keys`` and ``heads`` may
    be numpy arrays. The op's formula reads the RoPE part from the cache (its ``b``); the
    engines read it from the projection's output, as here (the same bytes with a bf16 cache)."""
    return keys * (heads * (nope + nope + rope) + rope) * bits // 8


def _k_assemble(model: ModelConfig, keys: int, act_dtype: str, calls: int) -> Kernel:
    """The expanded prompt's key assembly (:func:`k_assemble_bytes`) over the ``keys`` keys
    kv_b_proj expanded, an ``elementwise`` kernel of ``act_dtype``."""
    heads = model.num_attention_heads
    nope, rope = model.qk_nope_head_dim, model.qk_rope_head_dim
    nbytes = k_assemble_bytes(keys, heads, nope, rope, dtype_bits(act_dtype))
    return _elementwise("k_assemble", act_dtype, 0, nbytes, keys * heads * (nope + rope), calls)


def kernel_stage(name: str) -> str:
    """The breakdown stage of a kernel of :func:`step_kernels` (``"core"``, ``"ffn"``, ...)."""
    try:
        return KERNEL_STAGES[name]
    except KeyError:
        raise InvalidArgumentError("name", f"no step kernel is called {name!r}") from None


def _gemm(
    name: str, dtype: str, flops: int, nbytes: int, shape: tuple[int, ...], calls: int, **extra: int
) -> Kernel:
    groups, m, n, k = shape
    return Kernel(
        name=name,
        kind="gemm",
        dtype=dtype,
        flops=flops,
        bytes=nbytes,
        calls=calls,
        shape={"m": m, "n": n, "k": k, "groups": groups, **extra},
    )


def _elementwise(
    name: str, dtype: str, flops: int, nbytes: int, elements: int, calls: int
) -> Kernel:
    return Kernel(
        name=name,
        kind="elementwise",
        dtype=dtype,
        flops=flops,
        bytes=nbytes,
        calls=calls,
        shape={"elements": elements},
    )


def _core_kind(model: ModelConfig, impl: str, phase: str) -> str:
    if model.is_mla:
        return "mla_decode" if impl in ("absorbed", "absorbed_merged") else "mla_prefill"
    return "attention_decode" if phase == "decode" else "attention_prefill"


def _core_kernel(
    model: ModelConfig,
    cost: AttentionCost,
    ops: dict[str, OpCost],
    act_dtype: str,
    calls: int,
    window: int | None,
    kv_dtype: Any = "bf16",
) -> Kernel:
    """Scores, softmax and values as one flash-style kernel: the query and the attended cache
    rows read once (MLA's latent once for both products), the output written once, the score
    matrix never materialised."""
    scores, pv, softmax = ops["scores"], ops["pv"], ops["softmax"]
    act_read = (scores.bytes_read - scores.cache_bytes_read) + (
        pv.bytes_read - pv.cache_bytes_read - softmax.bytes_written
    )
    latent = model.is_mla and cost.impl in ABSORBED_IMPLS
    cache_read = (
        max(scores.cache_bytes_read, pv.cache_bytes_read)
        if latent
        else scores.cache_bytes_read + pv.cache_bytes_read
    )
    if _expands_latent(model, cost):
        # every key's expanded K/V (the new tokens' and a cached prefix's) at the activations'
        # width, as kv_b_proj wrote them: no op quantizes them, and the prompt core is the
        # bf16 class (mla_prefill) whatever the cache (:func:`_prefix_gather`). They were read
        # at the cache's width for the new tokens (naive's cached rows), 1 byte with fp8
        # (the compressed op sequence counts them all as activations already)
        act_w = dtype_bits(act_dtype) / 8
        keys = cost.batch * cost.seq_len
        cache_read = 0 if cost.impl == "compressed" else _expanded_kv(model, keys, act_w)
    if model.is_mla and latent:
        n_kv, d_qk, d_v = 1, model.kv_lora_rank + model.qk_rope_head_dim, model.kv_lora_rank
    elif model.is_mla:
        n_kv = model.num_attention_heads
        d_qk, d_v = model.qk_nope_head_dim + model.qk_rope_head_dim, model.v_head_dim
    else:
        n_kv, d_qk = model.num_key_value_heads, model.head_dim
        d_v = model.v_head_dim or model.head_dim  # MiMo-V2-Flash: values narrower than keys
    shape = {
        "batch": cost.batch,
        "q_len": cost.q_len,
        "kv_len": cost.seq_len,
        "n_heads": model.num_attention_heads,
        "n_kv": n_kv,
        "head_dim_qk": d_qk,
        "head_dim_v": d_v,
        "window": window or 0,
        "causal": int(cost.causal),
    }
    kind = _core_kind(model, cost.impl, cost.phase)
    dtype = act_dtype
    # the decode kernel follows its cache, as the measured classes do: an fp8 cache runs
    # the fp8 decode kernels (GQA and MLA alike); a narrower or integer cache (int8, int4,
    # fp4, nvfp4), which no measured table times, the fp8 kernel too (the nearest measured: a
    # cache dequantized in the kernel) over its own bytes, as the plan's warning says
    # (mlacalc.serving.plan_checks._kv_warnings)
    decode = kind in ("attention_decode", "mla_decode")
    layout = resolve_kv_layout(kv_dtype)
    fp8_cache = layout.name.startswith("fp8")
    if decode and (fp8_cache or layout.bits < 16):
        dtype = "fp8"
        if not fp8_cache:
            shape["kv_bytes"] = layout.bits / 8  # what a converting kernel reads a cached element
    if kind == "attention_prefill" and fp8_cache:
        # a prompt over an fp8 cache: an engine whose measured prompts with an fp8 cache ran
        # the fp8 kernel times it so (engine_attention_kernel: SGLang on Blackwell)
        shape["fp8_cache"] = 1
    if model.is_mla and model.index_topk is not None:
        # a DSA core: which sparse kernel runs it, and what it walks, is the engine's and the
        # device's (mlacalc.timemodel.dsa_time.engine_dsa_kernel): its cache's bytes an
        # element and the latent widths the absorbed sparse kernel multiplies
        shape["dsa_kv_bytes"] = 1 if fp8_cache else 2
        shape["latent_qk"] = model.kv_lora_rank + model.qk_rope_head_dim
        shape["latent_v"] = model.kv_lora_rank
    if kind == "mla_decode" and _absorbed_chain(model, cost, ops):
        # the dense latent decode between the absorption BMMs, as a module row runs it
        # (mlacalc.timemodel.mla_time.CHAIN_SAVING_S)
        shape["absorbed_chain"] = 1
    if kind == "attention_decode":
        # attention sinks keep the RoPE pre-kernel a kernel of its own

        arch = arch_of(model) or Arch()
        shape["sinks"] = int(arch.sinks or (arch.sliding_sinks and window is not None))
    if kind in ("attention_decode", "attention_prefill", "mla_prefill", "mla_decode"):
        # the step times RoPE and the cache append as kernels of their own (``rope``), so the
        # attention kernel (decode or prefill) does not count the RoPE + append pre-kernel the
        # measured rows include
        rope = ops.get("rope")
        shape["rope_kernel"] = 0 if rope is not None and rope.bytes else 1
    return Kernel(
        name="attention",
        kind=kind,
        dtype=dtype,
        flops=scores.flops + pv.flops,
        bytes=act_read + cache_read + pv.bytes_written,
        calls=calls,
        shape=shape,
    )


def _absorbed_chain(model: ModelConfig, cost: AttentionCost, ops: dict[str, OpCost]) -> bool:
    """Whether a step's latent MLA core runs between its absorption BMMs (``q_absorb`` before,
    ``o_absorb`` after: the ``absorbed`` path; ``absorbed_merged`` folds them into the
    projections), on the dense kernel (not DSA's or DeepSeek-V4's sparse cores)."""
    plain = model.index_topk is None and not model.compress_ratios
    bmms = all(ops.get(n) is not None and ops[n].flops > 0 for n in ("q_absorb", "o_absorb"))
    return plain and cost.impl == "absorbed" and bmms


def _expanded_kv(model: ModelConfig, keys: int, width: Any) -> int:
    """Bytes of ``keys`` keys' expanded MLA K and V (``n_h (d_nope + d_rope + d_v)`` values a
    key), ``width`` bytes a value or a cache layout's row (naive's cached row)."""
    n = model.num_attention_heads * (
        model.qk_nope_head_dim + model.qk_rope_head_dim + model.v_head_dim
    )
    if isinstance(width, (int, float)):
        return round(keys * n * width)
    return keys * resolve_kv_layout(width).row_bytes(n)


def _expands_latent(model: ModelConfig, cost: AttentionCost) -> bool:
    """Whether a prompt of an MLA layer expands the latent cache's rows through kv_b_proj and
    attends the expanded K/V (the default prompt and the ``compressed`` chunk; not a named
    ``naive`` cache of expanded rows, nor the absorbed paths, nor DSA's sparse core)."""
    return (
        model.is_mla
        and cost.impl not in ABSORBED_IMPLS
        and cost.cache == "latent"
        and model.index_topk is None
        and cost.phase != "decode"
    )


def _prefix_latent_read(op: OpCost, model: ModelConfig, act_dtype: str) -> int:
    """A chunk's kv_b_proj (``compressed``) bytes as the engines run it: every key's latent
    at the activations' width, the new tokens' from the projection's output and the cached
    prefix's from the gathered, dequantized rows (:func:`_prefix_gather`); the op reads every
    key's from the cache."""
    keys = op.shape[1]
    act = model.kv_lora_rank * dtype_bits(act_dtype) // 8
    return op.bytes - op.cache_bytes_read + keys * act


def _prefix_gather(
    model: ModelConfig, cost: AttentionCost, act_dtype: str, kv_dtype: Any, calls: int
) -> Kernel:
    """A chunk's cached prefix gathered out of the paged latent cache into a contiguous
    buffer at the activations' width (dequantized where the cache is narrower), before
    kv_b_proj expands its latent and the key assembly takes its RoPE part: each prefix row
    (latent and RoPE key) read at the cache's width and written at ``act_dtype``'s. From
    recall of the engines' sources: vLLM's ``gather_and_maybe_dequant_cache`` in
    ``MLACommonImpl._compute_prefill_context``, SGLang's prefix-chunk fetch of its MLA pool
    cast to the query's dtype (``MHA_CHUNKED_KV``), TensorRT-LLM's
    ``load_chunked_kv_cache_for_mla`` in ``forward_context_with_chunked_prefill``. A prompt
    without a prefix gathers nothing (0 bytes: no kernel runs)."""
    rows = cost.batch * (cost.seq_len - cost.q_len) if cost.impl == "compressed" else 0
    lat, rope = model.kv_lora_rank, model.qk_rope_head_dim
    cached = resolve_kv_layout(kv_dtype).row_bytes(lat, rope)
    nbytes = rows * (cached + (lat + rope) * dtype_bits(act_dtype) // 8)
    return _elementwise("prefix_gather", act_dtype, 0, nbytes, rows * (lat + rope), calls)


#: Bytes of one indexer logit (float32) and of one selected key's index (int32).
_LOGIT_BYTES = 4
_INDEX_BYTES = 4


def indexer_kernels(
    cost: AttentionCost,
    model: ModelConfig,
    act_dtype: str,
    weight_dtype: str,
    calls: int = 1,
    kv_dtype: Any = "bf16",
    engine: str = "",
) -> list[Kernel]:
    """The lightning indexer of one DSA layer: what picks the ``index_topk`` keys the core
    attends. Empty for a model without one.

    - ``indexer_q_proj`` (``gemm``): an indexer query of ``index_head_dim`` values per indexer
      head from the query latent (``q_lora_rank`` wide; the hidden state without one);
    - ``indexer_weights_proj`` (``gemm``): one weight per indexer head from the hidden state;
    - ``indexer_k_proj`` (``gemm``): one indexer key per new token from the hidden state, its
      LayerNorm's weights read and the new keys written to the indexer cache here;
    - ``indexer_scores`` (``mla_decode`` in decode, every query head sharing one key as in
      latent decode; ``attention_prefill`` otherwise): ``2 n_i d_i`` FLOPs per (query, key)
      pair over every key (causal or not as asked), the indexer keys of all ``seq_len``
      tokens read once, one float32 logit per (query, key) written;
    - ``indexer_topk`` (``elementwise``, no FLOPs: comparisons): the logits read, ``index_topk``
      int32 key indices per query written; under an ``engine``, the top-k kernel the engines
      run (:func:`~mlacalc.cost.compressed.dsa_topk`, ``topk_flat``, as the DSA module rows
      are mapped: the selecting queries' logits, one CTA a query), no bytes where no query
      has more keys than ``index_topk`` (no kernel runs);
    - ``indexer_ragged_logits`` (``elementwise``, under SGLang alone): its prompt's pass over
      the batch's whole ragged logits matrix
      (:func:`~mlacalc.cost.compressed.dsa_ragged_logits_bytes`), no bytes in decode or where
      no query selects.

    Matmul FLOPs are the engine's (:func:`mlacalc.attention_cost` adds them to ``q_proj``,
    ``kv_proj`` and ``core``); the indexer's norm and RoPE run inside its projections and
    carry no FLOPs here, as the engine's element-wise figure has none for them.
    """
    if model.index_topk is None or model.every_indexer_shared:
        return []  # not DSA, or a layer that reuses the previous one's top-k

    d, heads, width = model.hidden_size, model.index_n_heads, model.index_head_dim
    source = model.q_lora_rank or d
    b, q, S = cost.batch, cost.q_len, cost.seq_len
    tokens = b * q
    a_bits, w_bits = dtype_bits(act_dtype), dtype_bits(weight_dtype)
    gemm_dtype = gemm_class(act_dtype, weight_dtype, True)
    row = indexer_row_bytes(model)
    norm_weights = packed_bytes(2 * width, 16)  # the key LayerNorm's weight and bias, bf16
    pairs = attended_pairs(q, S, None, cost.causal)
    logits = b * q * S * _LOGIT_BYTES
    decode = cost.phase == "decode"
    ragged_keys = None if decode or engine not in RAGGED_LOGITS_ENGINES else b * S
    # a prompt query's keys in whole blocks (every key where the chunk is not causal)
    walked = walked_logit_keys(S - q, q) if cost.causal else walked_logit_keys(S - 1, 1)
    return [
        _gemm(
            "indexer_q_proj",
            gemm_dtype,
            2 * tokens * source * heads * width,
            packed_bytes(source * heads * width, w_bits)
            + packed_bytes(tokens * (source + heads * width), a_bits),
            (1, tokens, heads * width, source),
            calls,
        ),
        _gemm(
            "indexer_weights_proj",
            gemm_dtype,
            2 * tokens * d * heads,
            packed_bytes(d * heads, w_bits) + packed_bytes(tokens * (d + heads), a_bits),
            (1, tokens, heads, d),
            calls,
        ),
        _gemm(
            "indexer_k_proj",
            gemm_dtype,
            2 * tokens * d * width,
            packed_bytes(d * width, w_bits)
            + norm_weights
            + packed_bytes(tokens * d, a_bits)
            + tokens * row,
            (1, tokens, width, d),
            calls,
        ),
        Kernel(
            name="indexer_scores",
            kind="mla_decode" if decode else "attention_prefill",
            dtype="fp8",
            flops=2 * b * heads * width * pairs,
            bytes=packed_bytes(tokens * heads * (width + 1), a_bits) + b * S * row + logits,
            calls=calls,
            # DeepGEMM's fp8 logits, as the DSA module tables' mapping times them
            # (SGLang's prompt logits a row as wide as the batch's keys: RAGGED_LOGITS_ENGINES)
            shape=dsa_logits_shape(
                b, q, S if decode else walked, heads, width, decode, ragged_keys
            ),
        ),
        _engine_dsa_topk(cost, model.index_topk, act_dtype, calls, engine)
        if engine
        else _elementwise(
            "indexer_topk",
            act_dtype,
            0,
            logits + tokens * min(model.index_topk, S) * _INDEX_BYTES,
            b * q * S,
            calls,
        ),
        *_engine_dsa_ragged_logits(cost, model.index_topk, calls, engine),
    ]


def _engine_dsa_ragged_logits(
    cost: AttentionCost, topk: int, calls: int, engine: str
) -> list[Kernel]:
    """``engine``'s pass over a DSA prompt batch's whole ragged logits matrix, as the DSA
    prompt module rows are mapped (:func:`~mlacalc.cost.compressed.dsa_ragged_logits_bytes`):
    a kernel of every step under an engine of
    :data:`~mlacalc.cost.compressed.RAGGED_LOGITS_ENGINES` (a served step's kernels do not
    change with its size), no bytes in decode or where no query selects (it then runs none);
    none under other engines."""
    if engine not in RAGGED_LOGITS_ENGINES:
        return []
    q = cost.q_len
    decode = cost.phase == "decode"
    nbytes = float(dsa_ragged_logits_bytes(cost.batch, q, cost.seq_len - q, topk, decode, engine))
    return [_elementwise("indexer_ragged_logits", "bf16", 0, int(nbytes), 0, calls)]


def _engine_dsa_topk(
    cost: AttentionCost, topk: int, act_dtype: str, calls: int, engine: str
) -> Kernel:
    """A DSA layer's ``indexer_topk`` as ``engine`` runs it
    (:func:`~mlacalc.cost.compressed.dsa_topk`): where no query selects, its fields all there
    and nothing moved."""
    q = cost.q_len
    decode = cost.phase == "decode"
    shape, nbytes = dsa_topk(cost.batch, q, cost.seq_len - q, topk, decode, engine)
    sh = {f: int(v) for f, v in shape.items()}
    return Kernel("indexer_topk", "elementwise", act_dtype, 0, int(nbytes) if sh["units"] else 0,
                  calls=calls, shape=sh)  # fmt: skip


#: Bytes of one value of DeepSeek-V4's residual streams (float32, as the engines hold them).
_STREAM_BYTES = 4
#: the attention variants of DeepSeek-V4's layers
COMPRESSED_KERNEL_VARIANTS = ("csa", "hca", "swa")


def hyper_weight_flops(hc_mult: int, elements: int) -> int:
    """The weights' product in one ``mhc_pre`` (:func:`hyper_kernels`) over ``elements`` stream
    values (tokens x ``n d``): the streams times the mixer's ``(2 + n) n`` x ``n d`` weights
    (``hc_fn``). The rest of ``mhc_pre`` and all of ``mhc_post`` mix by weights computed from
    the streams, not by parameters."""
    return 2 * elements * (2 + hc_mult) * hc_mult


def hyper_kernels(m: ModelConfig, tokens: int, dt: _Dtypes) -> list[Kernel]:
    """DeepSeek-V4's hyper-connections (``hc_mult`` = ``n`` residual streams of ``d``, float32
    as the engines hold them), as the engines run them (the measured ``mhc`` tables): around
    the attention and around the MoE of each layer, ``mhc_pre`` (one fused streaming kernel: the
    ``n d`` streams to ``(2 + n) n`` mixing weights, their Sinkhorn normalisation, the streams
    mixed into the sublayer's bf16 input) and ``mhc_post`` (the sublayer's output and the
    streams mixed back into ``n`` streams); before the head one GEMM of ``n d`` to ``n``
    (``hc_head``). Bytes as the measured rows count them (the streams read, and written by
    ``post``; the bf16 input or output); FLOPs the reference's products
    (:mod:`mlacalc.cost.compressed`'s ``forward_flops``' ``hyper``) plus the ``n d``
    multiply-adds of each mix into or out of the streams. Empty without hyper-connections."""
    n, d, L = m.hc_mult, m.hidden_size, m.num_hidden_layers
    if not n:
        return []
    width = n * d
    streams = tokens * width * _STREAM_BYTES
    one = packed_bytes(tokens * d, dt.a_bits)  # the sublayer's input or output
    small = 16  # the head mixer's weights, bias and scale: bf16 in the checkpoint
    return [
        Kernel(
            "mhc_pre",
            "elementwise",
            dt.act,
            hyper_weight_flops(n, tokens * width) + tokens * 2 * width,
            streams + one,
            calls=2 * L,
            shape={"elements": tokens * width, "mhc": 1},
        ),
        Kernel(
            "mhc_post",
            "elementwise",
            dt.act,
            tokens * (2 * n * width + 2 * width),
            2 * streams + one,
            calls=2 * L,
            shape={"elements": tokens * width, "mhc": 2},
        ),
        _gemm(
            "hc_head",
            dt.act,
            2 * tokens * width * n,
            packed_bytes(n * width + n + 1, small) + streams + packed_bytes(tokens * n, dt.a_bits),
            (1, tokens, n, width),
            1,
        ),
    ]


def attention_kernels(
    cost: AttentionCost,
    model: ModelConfig,
    act_dtype: str,
    weight_dtype: str,
    calls: int = 1,
    window: int | None = -1,
    kv_dtype: Any = "bf16",
    engine: str = "",
) -> list[Kernel]:
    """The serving kernels of one attention layer, from the engine's op costs of that layer.

    ``cost`` is an :func:`mlacalc.attention_cost` of ``model`` (its ``ops`` are one layer's).
    The order is the order the layer runs them. ``window``: the sliding window of these
    layers (default: the model's ``sliding_window``; a DSA layer's core attends
    ``index_topk`` keys). ``kv_dtype``: the cache layout (a DSA layer's indexer keys).
    ``engine``: the serving engine, where it runs other kernels for the layer (DeepSeek-V4's:
    :func:`mlacalc.cost.compressed.engine_v4_kernels`).
    """
    if cost.variant == "linear":  # a linear-attention layer (mlacalc.cost.linear)
        return linear_kernels(cost, model, act_dtype, weight_dtype, calls)
    if cost.variant == "mamba":  # a Mamba-2 layer (mlacalc.cost.mamba)
        return mamba_kernels(cost, model, act_dtype, weight_dtype, calls)
    if cost.variant == "mamba1":  # a Mamba-1 layer (mlacalc.cost.mamba1)
        return mamba1_kernels(cost, model, act_dtype, weight_dtype, calls)
    if cost.variant == "none":  # no sequence mixer (Nemotron-H's FFN blocks)
        return []
    if cost.variant in COMPRESSED_KERNEL_VARIANTS:  # DeepSeek-V4 (mlacalc.cost.compressed)
        return compressed_kernels(cost, model, act_dtype, weight_dtype, calls, kv_dtype, engine)
    if window == -1:
        window = model.sliding_window if model.index_topk is None else model.index_topk
    ops = {o.name: o for o in cost.ops}
    cache_writes = sum(o.cache_bytes_written for o in cost.ops)
    out: list[Kernel] = []
    first_kv = True
    core_done = False
    fused_a = _fused_a(ops)
    if model.is_mla:  # the engines cache the latent row whatever path the prompt takes
        row = resolve_kv_layout(kv_dtype).row_bytes(model.kv_lora_rank, model.qk_rope_head_dim)
        cache_writes = cost.batch * cost.q_len * row
    rope_rows = 0
    if fused_a is not None and "rope" in ops and ops["rope"].bytes:
        # with the query and latent projections one GEMM, the latent rows are written by the
        # RoPE pre-kernel, as the module tables' rows are mapped (the attention call's)
        rope_rows, first_kv = cache_writes, False
    for op in cost.ops:
        if fused_a is not None and op.name in ("q_a_proj", "kv_a_proj"):
            if op.name == "q_a_proj":  # the one GEMM of both, where the query's stood
                q, kv = fused_a
                nbytes = q.bytes + kv.bytes - (kv.bytes_read - kv.weight_bytes)
                if first_kv:
                    nbytes += cache_writes
                    first_kv = False
                g, m, n, k = q.shape
                out.append(
                    _gemm(
                        "qkv_a_proj",
                        gemm_class(act_dtype, weight_dtype, True),
                        q.flops + kv.flops,
                        nbytes,
                        (g, m, n + kv.shape[2], k),
                        calls,
                    )
                )
            continue
        if op.name in _FUSED_AWAY:
            if op.name in ("scores",) and not core_done:
                out += indexer_kernels(
                    cost, model, act_dtype, weight_dtype, calls, kv_dtype, engine
                )
                out += block_indexer_kernels(cost, model, act_dtype, weight_dtype, calls, kv_dtype)
                out.append(_core_kernel(model, cost, ops, act_dtype, calls, window, kv_dtype))
                core_done = True
            continue
        if op.kind != "matmul":
            if op.bytes:  # (RoPE of a model without it moves nothing)
                elements = op.bytes_written * 8 // dtype_bits(act_dtype)
                nbytes = op.bytes + (rope_rows if op.name == "rope" else 0)
                out.append(_elementwise(op.name, act_dtype, op.flops, nbytes, elements, calls))
            continue
        nbytes = op.bytes
        if op.name == "kv_b_proj" and _expands_latent(model, cost):
            out.append(_prefix_gather(model, cost, act_dtype, kv_dtype, calls))
            if cost.impl == "compressed":
                nbytes = _prefix_latent_read(op, model, act_dtype)
        if op.stage == "kv_proj" and first_kv:
            nbytes += cache_writes  # the new cache rows, written once by the kernel making them
            first_kv = False
        has_weight = op.weight_bytes > 0
        out.append(
            _gemm(
                op.name,
                gemm_class(act_dtype, weight_dtype, has_weight),
                op.flops,
                nbytes,
                op.shape,
                calls,
            )
        )
        if op.name == "kv_b_proj" and model.is_mla:  # the expanded keys put together
            out.append(_k_assemble(model, op.shape[1], act_dtype, calls))
    return out


def _fused_a(ops: dict[str, OpCost]) -> tuple[OpCost, OpCost] | None:
    """MLA's query and latent-KV down-projections, which read the same hidden state, as the
    serving engines run them: one GEMM of their weights side by side (TensorRT-LLM's
    ``fused_a``, SGLang's ``fused_qkv_a_proj_with_mqa``, vLLM's ``fused_qkv_a_proj``; the
    names from recall of their DeepSeek modules), the hidden state read once. The module
    tables' rows are mapped so (:mod:`mlacalc.measured.mapping`'s ``q_a+kv_a``); a model
    without a query LoRA (DeepSeek-V2-Lite) keeps its q_proj and kv_a_proj apart."""
    q, kv = ops.get("q_a_proj"), ops.get("kv_a_proj")
    if q is None or kv is None or q.kind != "matmul" or kv.kind != "matmul":
        return None
    if q.shape[0] != 1 or kv.shape[0] != 1 or q.shape[1::2] != kv.shape[1::2]:
        return None  # not one input of the same tokens and width
    return q, kv


def attention_traffic_bytes(
    model: ModelConfig | str, phase: str, seq_len: int, batch: int = 1, **kwargs: Any
) -> dict[str, int]:
    """One attention layer's bytes two ways, and what separates them.

    ``fused_bytes``: the ideal fused lower bound (:attr:`mlacalc.AttentionCost.fused_bytes`
    per layer); ``kernel_bytes``: what the serving kernels of :func:`attention_kernels` move
    (GEMMs and core; ``norm_rope_bytes`` the element-wise kernels apart); ``handoff_bytes``:
    the activations kernels hand to each other (``kernel_bytes + norm weights - fused_bytes``).
    """
    m = as_model(model)
    cost = attention_cost(one_layer(m), phase, seq_len, batch, **kwargs)
    w = canonical_dtype(kwargs.get("weight_dtype") or m.weights_dtype)
    a = canonical_dtype(kwargs.get("act_dtype") or "bf16")
    kernels = attention_kernels(cost, m, a, w, kv_dtype=kwargs.get("kv_dtype", "bf16"))
    big = sum(k.bytes for k in kernels if k.kind != "elementwise")
    small = sum(k.bytes for k in kernels if k.kind == "elementwise")
    norm_weights = sum(o.weight_bytes for o in cost.ops if o.kind != "matmul")
    return {
        "fused_bytes": cost.fused_layer_bytes,
        "kernel_bytes": big,
        "norm_rope_bytes": small,
        "handoff_bytes": big + norm_weights - cost.fused_layer_bytes,
    }


# ------------------------------------------------------------------------------ FFN and head


def moe_active_experts(experts: int, topk: int, tokens: int) -> int:
    """Experts a batch of ``tokens`` touches on average under uniform routing, in whole experts.

    Each token picks ``topk`` of ``experts``; the expected number of distinct experts picked is
    ``E (1 - (1 - k/E)^T)``, rounded up, and never more than ``min(E, T k)``.
    """
    expected = experts * (1.0 - (1.0 - topk / experts) ** tokens)
    return max(1, min(experts, tokens * topk, math.ceil(expected - 1e-9)))


@dataclass(frozen=True)
class _Dtypes:
    act: str
    weight: str
    a_bits: int
    w_bits: int


def _kept(dt: _Dtypes) -> _Dtypes:
    """The dtypes of a tensor kept at 16 bits under a narrower weight dtype (a MoE router, a
    norm: :data:`mlacalc.serving.layout.KEPT_PARTS`, :data:`mlacalc.cost.quant._NEVER`): its
    weights in bf16 where the weight dtype is narrower, else the weight dtype itself, so the
    kernel is timed in the format memory sizes it in."""
    if dt.w_bits >= 16:
        return dt
    return _Dtypes(dt.act, "bf16", dt.a_bits, 16)


def _ffn_block(prefix: str, f: FFNShape, tokens: int, dt: _Dtypes, calls: int) -> list[Kernel]:
    """A dense feed-forward block: up (gate and up together), activation, down."""
    d, up = f.hidden, f.up_width
    bias = f.bias
    up_w = d * up + (up if bias else 0)
    down_w = f.inter * d + (d if bias else 0)
    dtype = gemm_class(dt.act, dt.weight, True)
    act_in = up
    return [
        _gemm(
            f"{prefix}_up",
            dtype,
            2 * tokens * d * up,
            packed_bytes(up_w, dt.w_bits) + packed_bytes(tokens * (d + up), dt.a_bits),
            (1, tokens, up, d),
            calls,
        ),
        _elementwise(
            f"{prefix}_act",
            dt.act,
            FFN_ACTIVATION_FLOPS_PER_ELEMENT * tokens * f.inter,
            packed_bytes(tokens * (act_in + f.inter), dt.a_bits),
            tokens * f.inter,
            calls,
        ),
        _gemm(
            f"{prefix}_down",
            dtype,
            2 * tokens * f.inter * d,
            packed_bytes(down_w, dt.w_bits) + packed_bytes(tokens * (f.inter + d), dt.a_bits),
            (1, tokens, d, f.inter),
            calls,
        ),
    ]


def _moe_kernels(m: ModelConfig, tokens: int, dt: _Dtypes, calls: int) -> list[Kernel]:
    E, k, d = m.n_routed_experts, m.num_experts_per_tok, m.hidden_size
    router = router_params(m)
    expert = expert_shape(m)
    kept = _kept(dt)  # the router keeps 16 bits, as memory sizes it
    out = [
        _gemm(
            "router",
            gemm_class(kept.act, kept.weight, True),
            2 * tokens * d * E,
            packed_bytes(router, kept.w_bits) + packed_bytes(tokens * (d + E), dt.a_bits),
            (1, tokens, E, d),
            calls,
        )
    ]
    active = moe_active_experts(E, k, tokens)
    latent = expert.hidden
    if m.moe_latent_size:  # Nemotron-H: the experts work in a latent width
        out.append(_latent_proj("moe_latent_in", d, latent, m.mlp_bias, tokens, dt, calls))
    out.append(
        Kernel(
            name="routed_experts",
            kind="moe",
            dtype=gemm_class(dt.act, dt.weight, True),
            flops=2 * tokens * k * expert.weights,
            bytes=packed_bytes(active * expert.params, dt.w_bits)
            + packed_bytes(2 * tokens * k * latent, dt.a_bits),
            calls=calls,
            shape={
                "tokens": tokens,
                "hidden": latent,
                "inter": expert.inter,
                "experts": E,
                "topk": k,
                "active_experts": active,
                "max_tokens_per_expert": -(-tokens * k // active),
                "gated": int(expert.gated),
            },
        )
    )
    if m.moe_latent_size:
        out.append(_latent_proj("moe_latent_out", latent, d, m.mlp_bias, tokens, dt, calls))
    if m.n_shared_experts:
        out += _ffn_block("shared_experts", shared_experts_shape(m), tokens, dt, calls)
    return out


def _latent_proj(
    name: str, n_in: int, n_out: int, bias: bool, tokens: int, dt: _Dtypes, calls: int
) -> Kernel:
    """A projection into or out of the experts' latent width (Nemotron-H)."""
    weights = n_in * n_out + (n_out if bias else 0)
    return _gemm(
        name,
        gemm_class(dt.act, dt.weight, True),
        2 * tokens * n_in * n_out,
        packed_bytes(weights, dt.w_bits) + packed_bytes(tokens * (n_in + n_out), dt.a_bits),
        (1, tokens, n_out, n_in),
        calls,
    )


def _norm(name: str, tokens: int, weights: int, d: int, dt: _Dtypes, calls: int) -> Kernel:
    nbytes = packed_bytes(2 * tokens * d, dt.a_bits) + packed_bytes(weights, _kept(dt).w_bits)
    return _elementwise(
        name, dt.act, NORM_FLOPS_PER_ELEMENT * tokens * d, nbytes, tokens * d, calls
    )


# ------------------------------------------------------------------------------ checkpoint reads

#: Step kernel -> the checkpoint tensors of one layer it reads as its weights (names after
#: ``model.layers.<i>.``; ``lm_head`` at the top level). ``q_absorb`` and ``o_absorb`` read
#: the key and value rows of ``kv_b_proj`` (``W_UK`` and ``W_UV``).
_READS: dict[str, tuple[str, ...]] = {
    "q_proj": (r"self_attn\.q_proj\.(weight|bias)",),
    "q_a_proj": (r"self_attn\.q_a_proj\.weight",),
    "q_b_proj": (r"self_attn\.q_b_proj\.weight",),
    "kv_proj": (r"self_attn\.([kv]|kv)_proj\.(weight|bias)",),  # DeepSeek-V4: one K = V
    "kv_a_proj": (r"self_attn\.kv_a_proj_with_mqa\.weight",),
    "qkv_a_proj": (r"self_attn\.q_a_proj\.weight", r"self_attn\.kv_a_proj_with_mqa\.weight"),
    "kv_b_proj": (r"self_attn\.kv_b_proj\.weight",),
    "o_proj": (r"self_attn\.o_proj\.(weight|bias)",),
    "indexer_q_proj": (
        r"self_attn\.indexer\.wq_b\.weight",
        r"self_attn\.compressor\.indexer\.q_b_proj\.weight",
    ),
    "indexer_k_proj": (r"self_attn\.indexer\.wk\.weight",),
    "indexer_weights_proj": (
        r"self_attn\.indexer\.weights_proj\.weight",
        r"self_attn\.compressor\.indexer\.scorer\.weights_proj\.weight",
    ),
    # DeepSeek-V4: the grouped output projection, the compressors (the pooled keys' and the
    # indexer's, each a kv and a gate projection: one kernel each)
    "o_a_proj": (r"self_attn\.o_a_proj\.weight",),
    "o_b_proj": (r"self_attn\.o_b_proj\.weight",),
    "compressor": (r"self_attn\.compressor\.(kv|gate)_proj\.weight",),
    "indexer_compressor": (r"self_attn\.compressor\.indexer\.(kv|gate)_proj\.weight",),
    "dense_ffn_up": (r"mlp\.(gate|up|gate_up)_proj\.(weight|bias)",),
    "dense_ffn_down": (r"mlp\.down_proj\.(weight|bias)",),
    "shared_experts_up": (r"mlp\.shared_experts?\.(gate|up|gate_up)_proj\.(weight|bias)",),
    "shared_experts_down": (r"mlp\.shared_experts?\.down_proj\.(weight|bias)",),
    "router": (r"mlp\.(gate|router)\.(weight|e_score_correction_bias)",),
    "routed_experts": (r"mlp\.experts\.(gate|up|gate_up|down)_proj",),
    # the linear-attention and Mamba mixers' projections (Qwen3-Next's fused input projection
    # or Qwen3.5's four; Nemotron-H's and Falcon-H1's Mamba-2 in and out projections)
    "linear_in_proj": (r"linear_attn\.in_proj_(qkvz|ba|qkv|z|b|a)\.weight",),
    "linear_o_proj": (r"linear_attn\.out_proj\.weight",),
    "mamba_in_proj": (r"mamba\.in_proj\.(weight|bias)",),
    "mamba_out_proj": (r"mamba\.out_proj\.(weight|bias)",),
    "input_norm": (r"input_layernorm\.weight",),
    "post_attention_norm": (r"post_attention_layernorm\.weight",),
    "q_a_layernorm": (r"self_attn\.q_a_layernorm\.weight",),
    "kv_a_layernorm": (r"self_attn\.kv_a_layernorm\.weight",),
}


@dataclass(frozen=True)
class _Stored:
    """How one kernel's weights are stored in the checkpoint: their logical parameters, the
    bytes they occupy (values and scales; kept tensors in bf16), and whether any of them is
    quantized. For the routed experts, figures of one expert."""

    params: int
    bytes: int
    quantized: bool
    #: the storage format of its quantized tensors (:func:`mlacalc.cost.quant.tensor_format`;
    #: None when all are kept): a mixed checkpoint's kernels run each in its own
    fmt: str | None = None


@lru_cache(maxsize=32)
def _checkpoint_reads(m: ModelConfig) -> dict[str, _Stored]:
    """Kernel name -> how the checkpoint stores the weights that kernel reads in one layer of
    its kind (every layer of a kind holds the same tensors), with their format (the class
    :func:`stored_dtype` gives; the scheme is parsed once per model here, not on every
    step)."""
    scheme = m.quantization
    all_tensors = checkpoint_tensors(m)
    dense = next((i for i in range(m.num_hidden_layers) if not m.is_moe_layer(i)), None)
    moe = next((i for i in range(m.num_hidden_layers) if m.is_moe_layer(i)), None)
    layer_of = {
        "dense_ffn_up": dense,
        "dense_ffn_down": dense,
        "shared_experts_up": moe,
        "shared_experts_down": moe,
        "router": moe,
        "routed_experts": moe,
    }
    # each layer's tensors under their name within the layer (what _READS matches), the tensor
    # itself keeping its whole name: a checkpoint's exclusions name whole modules
    # (``model.layers.0.self_attn.q_a_proj``), so what is kept is asked of the whole name
    by_layer: dict[int, list[tuple[str, Tensor]]] = {}
    for t in all_tensors:
        hit = re.match(r"model\.layers\.(\d+)\.(.*)", t.name)
        if hit:
            by_layer.setdefault(int(hit[1]), []).append((hit[2], t))
    out: dict[str, _Stored] = {}

    def stored(ts: list[Tensor], experts: int = 1) -> _Stored:
        params = nbytes = 0
        fmt = None
        for t in ts:
            payload, scales = tensor_bytes(t, scheme)
            params += t.numel
            nbytes += payload + scales
            fmt = fmt or tensor_format(t, scheme)
        return _Stored(params // experts, nbytes // experts, fmt is not None, fmt)

    for name, patterns in _READS.items():
        rx = re.compile("|".join(patterns))
        if name in layer_of:
            i = layer_of[name]
            if i is None:
                continue
            ts = [t for name, t in by_layer.get(i, []) if rx.fullmatch(name)]
        else:  # the first layer that holds them (DeepSeek-V4's indexer: csa layers only)
            ts = next(
                (
                    hit
                    for j in sorted(by_layer)
                    if (hit := [t for name, t in by_layer[j] if rx.fullmatch(name)])
                ),
                [],
            )
        if not ts:
            continue
        out[name] = stored(ts, m.n_routed_experts if name == "routed_experts" else 1)
    if (arch_of(m) or Arch()).gated_query and "q_proj" in out:
        # Qwen3-Next's q_proj holds the query and its output gate, which the step runs as two
        # products of equal width (q_proj, q_gate_proj: mlacalc.cost.linear.gated_query_cost)
        q = out["q_proj"]
        out["q_proj"] = out["q_gate_proj"] = _Stored(
            q.params // 2, q.bytes // 2, q.quantized, q.fmt
        )
    kv_b = [t for name, t in by_layer.get(0, []) if name == "self_attn.kv_b_proj.weight"]
    if kv_b and m.is_mla:
        (t,) = kv_b
        heads = m.num_attention_heads
        uk = Tensor(t.name, (heads * m.qk_nope_head_dim, t.shape[1]), t.role)
        whole, part = out["kv_b_proj"], stored([uk])
        out["q_absorb"] = part
        out["o_absorb"] = _Stored(
            whole.params - part.params, whole.bytes - part.bytes, whole.quantized, whole.fmt
        )
    final = [t for t in all_tensors if t.name == "model.norm.weight"]
    if final:
        out["final_norm"] = stored(final)
    head = [t for t in all_tensors if t.name == "lm_head.weight"] or [
        t for t in all_tensors if t.name == "model.embed_tokens.weight"
    ]
    if head:
        out["lm_head"] = stored(head)
    return out


@lru_cache(maxsize=64)
def one_layer(m: ModelConfig) -> ModelConfig:
    """``m`` cut to one layer (the unit attention costs are counted on), validated once per
    model rather than on every call; a model of one mixer per layer, its attention block)."""
    if m.block_types:
        return m.replaced(num_hidden_layers=1, block_types=("attention",), block_widths=())
    if m.compress_ratios:  # DeepSeek-V4: its first layer's kind
        hashed = tuple(i for i in m.hash_moe_layers if i == 1)
        return m.replaced(
            num_hidden_layers=1, compress_ratios=m.compress_ratios[:1], hash_moe_layers=hashed
        )
    if m.sparse_attention_layers:  # MiniMax-M3: its first layer's kind (full or block-sparse)
        return kind_model(m, layer_pattern(m).layers[0]).replaced(num_hidden_layers=1)
    return m.replaced(num_hidden_layers=1)


def stored_dtype(scheme: Any, fmt: str | None = None) -> str:
    """The kernel class a kernel whose weights are stored in ``fmt`` under ``scheme`` (the
    scheme's own format when None) runs as: block-scaled fp8 as ``fp8_block``, per-tensor fp8
    (ModelOpt's FP8, an input scale per matrix) as ``fp8``; NVFP4 with quantized activations
    as the fp4 GEMMs and MoE (``fp4``), NVFP4 weights under bf16 activations (W4A16_NVFP4) as
    the weight-only ``w4a16``; MXFP4 experts as the weight-only ``w4a16_mxfp4`` MoE (4-bit
    values dequantized to bf16 in the kernel, bf16 tensor rate; an fp8 checkpoint's fp4
    experts (``expert_format``) as :func:`_experts_class` says); integer groups as weight-only
    ``w4a16`` / ``w8a16`` (a time-model profile without that class times it by its bf16
    class, reading the quantized bytes). A device without the format's tensor cores runs the
    weight-only kernel (:func:`mlacalc.timemodel.kernel_time.run_dtype`)."""
    fmt = fmt or scheme.method
    if fmt == "fp8":
        return "fp8_block"
    if fmt == "fp8_tensor":
        return "fp8"
    if fmt == "mxfp4":
        return "w4a16_mxfp4"
    if fmt == "nvfp4":
        return "fp4" if scheme.input_scale or scheme.method == "mixed" else "w4a16"
    if fmt == "w4a16_nvfp4":
        return "w4a16"
    return f"w{scheme.bits}a16"


#: the step's GEMMs whose weights keep 16 bits under a narrower weight dtype (:func:`_kept`)
KEPT_GEMMS = ("router",)

#: the step's state-update products (Mamba-2's decode update, Kimi Delta Attention's
#: recurrent core): a GEMM of no weights whose bytes are the state streamed in and out, kept in
#: their own (the state's) dtype under any weight dtype
STATE_GEMMS = ("mamba_state_update", "linear_core")

#: the step's norms, their weights built at 16 bits under a narrower dtype (:func:`_norm`,
#: the attention's latent norms in mlacalc.cost.attention and cost.compressed)
_KEPT_NORMS = ("input_norm", "post_attention_norm", "final_norm", "q_a_layernorm", "kv_a_layernorm")


def _as_stored(kernels: list[Kernel], m: ModelConfig, dt: _Dtypes) -> list[Kernel]:
    """The kernels with each weight read as the checkpoint stores it: the weights' bytes at
    ``weights_dtype`` replaced by their checkpoint bytes (values and scales; kept tensors in
    bf16), the class by the storage (:func:`stored_dtype`; a kernel whose weights are all
    kept computes in the activation dtype). FLOPs, shapes and activation bytes unchanged."""
    reads = _checkpoint_reads(m)
    scheme = None  # the model's scheme, parsed once for the list (not once a kernel)
    out = []
    for k in kernels:
        s = reads.get(k.name)
        if s is None:
            out.append(k)
            continue
        copies = k.shape["active_experts"] if k.kind == "moe" else 1
        # the weights as the kernel was built: a router's and a norm's kept at 16 bits
        built = _kept(dt) if k.name in KEPT_GEMMS + _KEPT_NORMS else dt
        logical = packed_bytes(copies * s.params, built.w_bits)
        # a norm's weights are kept: the kernel keeps its class
        kept = k.dtype if k.kind == "elementwise" else dt.act
        scheme = m.quantization if scheme is None else scheme
        quantized_class = stored_dtype(scheme, s.fmt)
        dtype = quantized_class if s.quantized and k.kind != "elementwise" else kept
        if s.quantized and k.kind == "moe":
            dtype = _experts_class(m, quantized_class)
        out.append(
            Kernel(
                name=k.name,
                kind=k.kind,
                dtype=dtype,
                flops=k.flops,
                bytes=k.bytes - logical + copies * s.bytes,
                calls=k.calls,
                shape=k.shape,
            )
        )
    return out


def as_stored(
    kernels: list[Kernel], model: ModelConfig | str, act_dtype: str = "bf16"
) -> list[Kernel]:
    """``kernels`` of ``model`` built with its ``weights_dtype`` (the step's, or the eager
    op-by-op sequence's, named as the step names them), with each weight read as the
    checkpoint stores it (see :func:`step_kernels`); unchanged for a model without a
    ``quantization_config``."""
    m = as_model(model)
    if not checkpoint_stored(m):
        return list(kernels)
    w, a = m.weights_dtype, canonical_dtype(act_dtype)
    return _as_stored(list(kernels), m, _Dtypes(a, w, dtype_bits(a), dtype_bits(w)))


def stored_attention_cost(cost: AttentionCost, model: ModelConfig | str) -> AttentionCost:
    """``cost`` (counted at the model's ``weights_dtype``) with each op's weights read as the
    checkpoint stores them, values and scales, kept tensors in bf16 (the bytes a served step's
    kernel of that name reads: :func:`_checkpoint_reads`), the fused bound moved with them;
    FLOPs unchanged. A model not read as stored (:func:`checkpoint_stored`) as it is; an op
    no checkpoint tensor stands for (a convolution's taps, a gate's vectors) as counted.
    DeepSeek-V3.1 NVFP4, one decode step at 32K: its q_a, q_b, kv_a and kv_b projections stay
    bf16, its o_proj 4.5 bits a weight (every attention weight had counted two bytes)."""
    m = as_model(model)
    if not checkpoint_stored(m):
        return cost
    if cost.groups:
        return replace(cost, groups=tuple(stored_attention_cost(g, m) for g in cost.groups))
    reads, w_bits = _checkpoint_reads(m), dtype_bits(m.weights_dtype)
    ops, moved = [], 0
    for op in cost.ops:
        s = reads.get(op.name) if op.weight_bytes else None
        if s is None or not s.params:
            ops.append(op)
            continue
        # the stored bytes of the first layer holding that name, in proportion to this op's own
        # weights: exact where the op is that tensor, and a group of other shapes (Gemma 4's
        # global layers beside its sliding ones) keeps its own size at the stored format's rate
        # the bits the op was counted at (a norm's 16 under a narrower dtype)
        logical = packed_bytes(s.params, op_weight_bits(op.stage, w_bits))
        delta = op.weight_bytes * s.bytes // logical - op.weight_bytes
        moved += delta
        ops.append(
            replace(op, weight_bytes=op.weight_bytes + delta, bytes_read=op.bytes_read + delta)
        )
    return replace(cost, ops=tuple(ops), fused_layer_bytes=cost.fused_layer_bytes + moved)


def stored_experts(model: ModelConfig | str) -> tuple[int, str]:
    """Checkpoint bytes of one routed expert's matrices (values and scales) and the class
    its MoE kernel runs as, for a model :func:`checkpoint_stored` reads as stored (what the
    ``routed_experts`` kernel reads per expert it touches)."""
    m = as_model(model)
    s = _checkpoint_reads(m)["routed_experts"]
    if not s.quantized:
        return s.bytes, "bf16"
    return s.bytes, _experts_class(m, stored_dtype(m.quantization, s.fmt))


def _experts_class(m: ModelConfig, quantized_class: str) -> str:
    """The class the routed experts' MoE runs as: the checkpoint's, or, for experts in a
    format of their own (DeepSeek-V4's MXFP4 experts in an fp8 checkpoint), the MXFP4 x MXFP8
    MoE (``w4a8_mxfp4``, as ``--expert-dtype mxfp4_mxfp8`` times them) where the device has fp4
    tensor cores, else the weight-only ``w4a16_mxfp4`` MoE
    (:func:`mlacalc.timemodel.kernel_time.run_dtype`). The B200 tables of all three engines
    time DeepSeek-V4's expert shapes (7,168 x 3,072, 384 experts, top-6; 4,096 x 2,048, 256,
    top-6) in that format (``w4a8_mxfp4_mxfp8``), and in no fp4 one."""
    if getattr(m.quantization, "expert_format", None) == "mxfp4":
        return "w4a8_mxfp4"
    return quantized_class


def checkpoint_stored(model: ModelConfig | str) -> bool:
    """Whether :func:`step_kernels` without a ``weight_dtype`` reads ``model``'s weights as its
    checkpoint stores them (a model that declares a ``quantization_config`` sized from
    ``config.json``)."""
    # (a model's quantization_config always parses to a scheme sized from config.json)
    return getattr(as_model(model), "quantization_config", None) is not None


# ------------------------------------------------------------------------------ the step


def _attention_layers(
    m: ModelConfig, one: AttentionCost, work: Workload, kv_dtype: Any, engine: str = ""
) -> list[Kernel]:
    """The attention kernels of every layer: one set per kind of layer (``calls`` = its
    layers) when the layers differ (sliding or chunked layers between full ones)."""
    a, w = work.act_dtype, work.weight_dtype
    uniform = m.full_attention_interval is None and m.global_head_dim is None
    uniform = uniform and m.sliding_key_value_heads is None  # MiMo-V2-Flash: per-kind KV heads
    mamba = m.mamba_num_heads is not None or m.mamba_dt_rank is not None
    shared = bool(m.shared_indexer_layers) and not m.every_indexer_shared  # DSA: some reuse
    v4 = bool(m.compress_ratios)  # DeepSeek-V4's kinds (mlacalc.cost.compressed)
    plain = not m.full_attention_layers and not m.block_types and not mamba and not shared
    plain = plain and not m.sparse_attention_layers  # MiniMax-M3: full and block-sparse
    if uniform and plain and not v4:
        layers = m.num_hidden_layers
        return attention_kernels(one, m, a, w, layers, kv_dtype=kv_dtype, engine=engine)
    cost = cost_of(m, work)
    kinds = {k.label: k for k in layer_pattern(m).layers}
    for k in list(kinds.values()):
        if k.mamba:  # attention and Mamba-2 side by side (Falcon-H1): each group its kernels
            kinds.setdefault(replace(k, mamba=False).label, replace(k, mamba=False))
            kinds.setdefault("mamba", LayerKind("mamba"))
    out: list[Kernel] = []
    for label, group in zip(cost.group_labels, cost.groups):
        kind = kinds[label]
        sub = kind_model(m, kind)
        window = kind.window if kind.attention == "sliding" else None
        if window is None and sub.index_topk and not v4:
            # a DSA layer's core attends its index_topk selected keys, whether the layer runs
            # its own indexer or reuses another's top-k (GLM's shared indexers), as the
            # uniform path's default window has it
            window = sub.index_topk
        if kind.attention == "msa":  # the core attends at most T blocks of B keys
            window = m.sparse_topk_blocks * m.sparse_block_size
            kernels = attention_kernels(group, sub, a, w, group.layers, window, kv_dtype)
            out += block_sparse_core(kernels, sub)
            continue
        out += attention_kernels(group, sub, a, w, group.layers, window, kv_dtype, engine)
    return out


def step_kernels(
    model: ModelConfig | str,
    phase: Phase,
    seq_len: int,
    batch: int = 1,
    q_len: int | None = None,
    impl: Impl | None = None,
    causal: bool = False,
    weight_dtype: str | None = None,
    kv_dtype: Any = "bf16",
    act_dtype: str = "bf16",
    scope: Scope = "model",
    engine: str = "",
) -> list[Kernel]:
    """The kernels of one step of a model, in the order a layer runs them.

    ``scope="model"``: the embedding lookup, every decoder layer (attention block with its
    norms, dense FFN or MoE; ``calls`` = the layers of each kind), the final norm and the
    output head. ``scope="attention_layer"``: one attention block alone (what the
    microbenchmark times). Arguments as :func:`mlacalc.attention_cost`; ``engine``: the
    serving engine, where it runs other kernels for a layer (:func:`attention_kernels`).

    ``weight_dtype`` None: a model that declares its checkpoint's ``quantization_config``
    reads each weight as the checkpoint stores it. Every GEMM and MoE kernel reads the
    checkpoint bytes of the tensors it multiplies by (values and scales, from
    :func:`mlacalc.cost.quant.tensor_bytes`; tensors the checkpoint keeps in bf16 at two bytes; the
    absorbed ``q_absorb`` / ``o_absorb`` the key and value rows of ``kv_b_proj``; the routed
    experts each touched expert's stored bytes) and runs as the class of that storage
    (:func:`stored_dtype`; kept tensors in the activation dtype); the norms read their bf16
    weights. FLOPs, shapes and activation bytes are as with the model's ``weights_dtype``.
    Any other model, or a chosen ``weight_dtype``, reads every weight in that dtype.

    Examples
    --------
    >>> ks = step_kernels("llama-3-8b", "decode", 4096, scope="attention_layer")
    >>> [(k.name, k.kind) for k in ks]  # doctest: +NORMALIZE_WHITESPACE
    [('q_proj', 'gemm'), ('kv_proj', 'gemm'), ('rope', 'elementwise'),
     ('attention', 'attention_decode'), ('o_proj', 'gemm')]
    >>> ks[3].bytes == 2 * (4096 + 4096 * 2 * 1024 + 4096)   # q in, K and V of 4096 keys, out
    True
    """
    args.choice("scope", scope, SCOPES)
    m = as_model(model)
    chosen = args.dtype("weight_dtype", weight_dtype, allow_none=True)
    w = chosen or m.weights_dtype
    a = args.dtype("act_dtype", act_dtype)
    dt = _Dtypes(a, w, dtype_bits(a), dtype_bits(w))
    stored = chosen is None and checkpoint_stored(m)
    one = one_layer(m)
    work = Workload(phase, seq_len, batch, q_len, impl, causal, kv_dtype, w, a)
    cost = cost_of(one, work)
    if scope == "attention_layer":
        layer = attention_kernels(cost, one, a, w, 1, kv_dtype=kv_dtype, engine=engine)
        return _as_stored(layer, m, dt) if stored else layer

    L, d = m.num_hidden_layers, m.hidden_size
    tokens = batch * cost.q_len
    n_norms, norm_w = layer_norms(m)
    out = [_elementwise("embedding", a, 0, packed_bytes(2 * tokens * d, dt.a_bits), tokens * d, 1)]
    out.append(_norm("input_norm", tokens, norm_w, d, dt, L))
    out += _attention_layers(m, cost, work, kv_dtype, engine)
    if n_norms > 1:
        out.append(_norm("post_attention_norm", tokens, norm_w, d, dt, L))
    moe_layers = m.num_moe_layers
    dense_layers = m.block_types.count("mlp") if m.block_types else L - moe_layers
    if dense_layers and m.block_widths:  # blocks of their own widths (Nemotron-NAS)
        for width, n in sorted(Counter(m.block_widths).items(), reverse=True):
            out += _ffn_block("dense_ffn", ffn_shape(m, width), tokens, dt, n)
    elif dense_layers:
        out += _ffn_block("dense_ffn", ffn_shape(m), tokens, dt, dense_layers)
    if moe_layers:
        out += _moe_kernels(m, tokens, dt, moe_layers)
    out += hyper_kernels(m, tokens, dt)
    final_w = 2 * d if m.layer_norm else d
    out.append(_norm("final_norm", tokens, final_w, d, dt, 1))
    out.append(_lm_head(m, batch, dt, kept_head_format(m, chosen)))
    return _as_stored(out, m, dt) if stored else out


def _lm_head(m: ModelConfig, batch: int, dt: _Dtypes, kept: str | None) -> Kernel:
    """The output head on one token per sequence; its weights in ``kept`` where a weight
    dtype asked leaves the head as the checkpoint stores it (:func:`kept_head_format`), else
    in the step's weight dtype."""
    d, V = m.hidden_size, m.vocab_size
    weights = packed_bytes(V * d, dt.w_bits)
    cls = gemm_class(dt.act, dt.weight, True)
    if kept is not None:
        weights, cls = math.ceil(V * d * format_bits(kept) / 8), format_class(kept)
    acts = packed_bytes(batch * (d + V), dt.a_bits)
    return _gemm("lm_head", cls, 2 * batch * d * V, weights + acts, (1, batch, V, d), 1)
