"""Exact numeric evaluation of the attention formulas (no sympy import).

Every number here comes from the functions generated out of the symbolic
formulas (:mod:`mlacalc.cost._generated`), evaluated with Python integers (and
:class:`fractions.Fraction` for sub-byte element sizes), so results are exact at
any size. Conventions (``docs/conventions.md``):

- ``seq_len = S`` is the number of keys the last query attends, new tokens included.
  ``prefill`` has ``q = S`` new tokens, ``decode`` ``q = 1``, ``chunk`` ``q = q_len``.
- FLOPs are matmul FLOPs, ``2*m*n*k``; by default every (query, key) pair a dense
  kernel computes is counted (``q * S`` per head); ``causal=True`` counts only the
  pairs a causal kernel needs.
- A sliding window ``W`` caps the keys each query attends at ``W`` (its own token
  included) and the tokens each layer's cache keeps at ``min(S, W)``.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

from mlacalc.cost import _generated as gen
from mlacalc.cost.attention import (
    AttentionCost,
    OpCost,
    as_model,
    attended_pairs,
    checked_workload,
    evaluate,
    kv_row,
    model_dims,
    model_layer_key,
    positive_count,
    resolve_impl,
    uniform_cost,
)
from mlacalc.cost.families import kv_by_kind, pattern_cost
from mlacalc.models.architecture import arch_of
from mlacalc.models.loading import ModelConfig, beyond_positions
from mlacalc.words import arguments as args
from mlacalc.words.dtypes import KVLayout, check_kv_layout
from mlacalc.words.errors import MlacalcWarning
from mlacalc.words.vocab import MLA_IMPLEMENTATIONS, PHASES, Impl, Phase
from mlacalc.words.workload import Workload

__all__ = [
    "MLA_IMPLEMENTATIONS",
    "PHASES",
    "AttentionCost",
    "KVCache",
    "OpCost",
    "as_model",
    "attended_pairs",
    "attention_cost",
    "attention_flops",
    "cost_of",
    "evaluate",
    "kv_cache",
    "kv_cache_bytes",
    "model_dims",
    "model_layer_key",
    "resolve_impl",
]


def attention_params(model: ModelConfig | str) -> dict[str, int]:
    """Parameters of each attention projection of one layer (reference-implementation names)."""
    model = as_model(model)
    fns = gen.LAYERS[model_layer_key(model, "absorbed")]
    out = evaluate(fns.params, model_dims(model))
    if model.is_mla:
        return out
    if model.fused_qkv and model.family == "falcon":  # one query_key_value matrix
        out = {
            "query_key_value": out["q_proj"] + out["k_proj"] + out["v_proj"],
            "dense": out["o_proj"],
        }
    elif model.fused_qkv:  # GPT-2's Conv1D c_attn (q, k, v fused) and c_proj
        out = {"c_attn": out["q_proj"] + out["k_proj"] + out["v_proj"], "c_proj": out["o_proj"]}
    return out


def kv_projection_params(model: ModelConfig | str) -> int:
    """Parameters (weights and biases) of one layer's K and V projections, the K/V rows of a
    fused QKV projection included (GPT-2's ``c_attn``, Falcon's ``query_key_value``): what a
    tensor-parallel rank holds by whole K/V heads; 0 for MLA (its latent projections)."""
    model = as_model(model)
    if model.is_mla:
        return 0
    out = evaluate(gen.LAYERS[model_layer_key(model, "absorbed")].params, model_dims(model))
    return out["k_proj"] + out["v_proj"]


# ----------------------------------------------------------------------------------
# KV cache


@dataclass(frozen=True)
class KVCache:
    """KV-cache size of a whole model, with its breakdown.

    ``row_bytes`` is one token of one layer; ``tokens_per_layer`` the tokens each
    layer keeps (``min(seq_len, sliding_window)``); ``total_bytes`` =
    ``layers * batch * tokens_per_layer * row_bytes``. A model whose layers differ
    (``full_attention_interval``: sliding or chunked layers between full ones) lists
    ``by_kind`` = ``(label, layers, tokens kept per layer, bytes)`` per kind of layer;
    ``total_bytes`` is their sum and ``tokens_per_layer`` what a full layer keeps.
    ``bytes_per_token`` is what one more token of one sequence adds to the cache at
    this ``seq_len``, summed over the layers: a full layer adds its row (a DSA layer's
    row with its indexer key), a sliding or chunked layer that already keeps its window
    adds nothing, and neither does a linear-attention layer (its state is fixed).
    """

    model: str
    variant: str
    impl: str
    layout: str
    row_elements: int
    row_bytes: int
    layers: int
    batch: int
    seq_len: int
    tokens_per_layer: int
    total_bytes: int
    by_kind: tuple[tuple[str, int, int, int], ...] = ()
    bytes_per_token: int = 0
    #: what the figures hold but the model may not: a ``seq_len`` beyond its
    #: ``max_position_embeddings`` (the rule and words of :class:`~mlacalc.serving.plan.Plan`)
    warnings: tuple[str, ...] = ()

    @property
    def elements_per_token(self) -> int:
        """Elements of one token's row in every layer (``row_elements x layers``); what a
        token adds to the cache of a model with sliding, chunked, linear or DSA layers is
        ``bytes_per_token``."""
        return self.row_elements * self.layers

    def to_dict(self) -> dict[str, Any]:
        return (
            {
                "model": self.model,
                "variant": self.variant,
                "impl": self.impl,
                "kv_layout": self.layout,
                "elements_per_token_per_layer": self.row_elements,
                "bytes_per_token_per_layer": self.row_bytes,
                "bytes_per_token": self.bytes_per_token,
                "layers": self.layers,
                "batch": self.batch,
                "seq_len": self.seq_len,
                "tokens_per_layer": self.tokens_per_layer,
                "total_bytes": self.total_bytes,
            }
            | (
                {
                    "by_kind": [
                        {"kind": k, "layers": n, "tokens_per_layer": t, "bytes": b}
                        for k, n, t, b in self.by_kind
                    ]
                }
                if self.by_kind
                else {}
            )
            | ({"warnings": list(self.warnings)} if self.warnings else {})
        )


def kv_cache(
    model: ModelConfig | str,
    seq_len: int,
    batch: int = 1,
    kv_dtype: str | int | KVLayout = "bf16",
    impl: Impl | None = None,
    include_mtp: bool = False,
) -> KVCache:
    """The KV cache holding ``seq_len`` tokens for ``batch`` sequences, all layers.

    ``impl`` only matters for MLA: ``"naive"`` caches the expanded per-head K and V;
    every other implementation (and ``None``) caches the latent ``c_kv`` plus the
    shared RoPE key. ``include_mtp`` adds the MTP modules' layers (DeepSeek-V3: 62
    cache layers instead of 61).
    """
    model = as_model(model)
    seq_len = positive_count("seq_len", seq_len)
    batch = positive_count("batch", batch, args.MAX_BATCH)
    include_mtp = args.flag("include_mtp", include_mtp)
    impl = resolve_impl(model, impl, None)
    layout = args.kv_layout("kv_dtype", kv_dtype)
    check_kv_layout(layout, model.is_mla, model.name)
    elements, row_bytes = kv_row(model, impl, layout)
    layers = model.num_hidden_layers + (model.num_nextn_predict_layers if include_mtp else 0)
    tokens = seq_len if model.sliding_window is None else min(seq_len, model.sliding_window)
    total = layers * batch * tokens * row_bytes
    # one more token of one sequence: a row per layer unless the window is full
    window = model.sliding_window
    per_token = layers * row_bytes if window is None or seq_len < window else 0
    by_kind: tuple[tuple[str, int, int, int], ...] = ()
    layered = (
        model.full_attention_interval is not None
        or model.attention_chunk_size is not None
        or model.global_head_dim is not None
        or model.sliding_key_value_heads is not None  # MiMo-V2-Flash's own sliding KV heads
        or bool(model.full_attention_layers)
        or bool(model.block_types)
        or model.mamba_num_heads is not None
        or model.mamba_dt_rank is not None
        or bool(model.compress_ratios)  # DeepSeek-V4 (mlacalc.cost.compressed)
    )
    sparse = model.sparse_block_size is not None  # MiniMax-M3: K, V and the indexer key
    if layered or sparse or model.index_topk is not None:
        by_kind = kv_by_kind(model, seq_len, batch, row_bytes, layers, layout)
        total = sum(b for *_, b in by_kind)
        tokens = max(t for _, _, t, _ in by_kind)
        now, after = (
            sum(b for *_, b in kv_by_kind(model, s, 1, row_bytes, layers, layout))
            for s in (seq_len, seq_len + 1)
        )
        per_token = after - now
    return KVCache(
        model=model.name,
        variant=model.variant,
        impl=impl,
        layout=layout.name,
        row_elements=elements,
        row_bytes=row_bytes,
        layers=layers,
        batch=batch,
        seq_len=seq_len,
        tokens_per_layer=tokens,
        total_bytes=total,
        by_kind=by_kind,
        bytes_per_token=per_token,
        warnings=tuple(filter(None, [beyond_positions(model, seq_len)])),
    )


def kv_cache_bytes(
    model: ModelConfig | str,
    seq_len: int,
    batch: int = 1,
    kv_dtype: str | int | KVLayout = "bf16",
    impl: Impl | None = None,
    include_mtp: bool = False,
) -> int:
    """Exact bytes of the KV cache of all layers holding ``seq_len`` tokens per sequence
    (a ``seq_len`` beyond the model's ``max_position_embeddings`` is counted, and warned as a
    :class:`~mlacalc.words.errors.MlacalcWarning`, as :func:`mlacalc.plan` warns it).

    Examples
    --------
    >>> kv_cache_bytes("deepseek-v3", seq_len=1)          # (512 + 64) x 2 B x 61 layers
    70272
    >>> kv_cache_bytes("deepseek-v3", seq_len=1, kv_dtype="fp8_ds_mla")   # 656 B x 61
    40016
    """
    cache = kv_cache(model, seq_len, batch, kv_dtype, impl, include_mtp)
    for sentence in cache.warnings:  # a bare number has no other place to say it
        warnings.warn(sentence, MlacalcWarning, stacklevel=2)
    return cache.total_bytes


# ----------------------------------------------------------------------------------
# FLOPs and bytes


def attention_cost(
    model: ModelConfig | str,
    phase: Phase,
    seq_len: int,
    batch: int = 1,
    q_len: int | None = None,
    impl: Impl | None = None,
    causal: bool = False,
    kv_dtype: str | int | KVLayout = "bf16",
    weight_dtype: str | None = None,
    act_dtype: str = "bf16",
) -> AttentionCost:
    """FLOPs by stage and bytes by op of the attention blocks of all layers for one step.

    Parameters
    ----------
    phase
        ``"prefill"`` (``seq_len`` new tokens), ``"decode"`` (one new token attending
        ``seq_len`` keys) or ``"chunk"`` (``q_len`` new tokens, the last attending
        ``seq_len`` keys).
    impl
        MLA implementation; see :func:`resolve_impl` for ``None``.
    causal
        Count only the (query, key) pairs a causal kernel needs.
    kv_dtype, weight_dtype, act_dtype
        Element sizes for the byte counts (``weight_dtype`` defaults to the model's).
    """
    model = as_model(model)
    asked = Workload(phase, seq_len, batch, q_len, impl, causal, kv_dtype, weight_dtype, act_dtype)
    return cost_of(model, asked)


def cost_of(model: ModelConfig, w: Workload) -> AttentionCost:
    """The attention cost of all layers for a workload: a model whose layers differ kind by
    kind (:func:`mlacalc.cost.families.pattern_cost`), any other as one kind. This is where a
    workload is checked (:func:`~mlacalc.cost.attention.checked_workload`; a checked one passes
    unchanged); the functions it calls take the checked record."""
    w = checked_workload(w, model)
    if (
        model.full_attention_interval is not None
        or model.global_head_dim is not None
        or model.sliding_key_value_heads is not None  # MiMo-V2-Flash's own sliding KV heads
        or model.full_attention_layers
        or model.block_types
        or model.mamba_num_heads is not None
        or model.mamba_dt_rank is not None
        or model.compress_ratios  # DeepSeek-V4 (mlacalc.cost.compressed)
        or (model.shared_indexer_layers and not model.every_indexer_shared)
        or bool(model.sparse_attention_layers)  # MiniMax-M3: full and block-sparse layers
        or getattr(arch_of(model), "head_gate", False)  # Step-3.7's g_proj (families)
    ):
        return pattern_cost(model, w)
    return uniform_cost(model, w)


def attention_flops(
    model: ModelConfig | str,
    phase: Phase,
    seq_len: int,
    batch: int = 1,
    q_len: int | None = None,
    impl: Impl | None = None,
    causal: bool = False,
) -> int:
    """Exact matmul FLOPs of the attention blocks of all layers for one step.

    Examples
    --------
    >>> attention_flops("llama-2-7b", "decode", seq_len=1)   # 32 x (4 x 2 x 4096^2 + 4 x 32 x 128)
    4295491584
    """
    return attention_cost(model, phase, seq_len, batch, q_len, impl, causal).flops
