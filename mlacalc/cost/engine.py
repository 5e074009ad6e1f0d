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

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from mlacalc.cost import _generated as gen
from mlacalc.models.loading import ModelConfig
from mlacalc.words import arguments as args
from mlacalc.words.dtypes import KVLayout, check_kv_layout, dtype_bits
from mlacalc.words.errors import FormulaBindingError, InvalidArgumentError
from mlacalc.words.vocab import (
    MHA_FIELD_SYMBOLS,
    MLA_FIELD_SYMBOLS,
    MLA_IMPLEMENTATIONS,
    PHASES,
    STAGES,
    STANDARD_IMPL,
    Impl,
    Phase,
    layer_key,
    serving_impl,
)

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
    "evaluate",
    "kv_cache",
    "kv_cache_bytes",
    "model_dims",
    "model_layer_key",
    "resolve_impl",
]


# ----------------------------------------------------------------------------------
# argument checking


def as_model(model: ModelConfig | str) -> ModelConfig:
    """The model a call means: a :class:`ModelConfig` as is, a name or a path loaded."""
    return args.model(model)


_model = as_model  # the former private name, kept while other modules move to as_model


def _positive_int(name: str, value: Any, hi: int = args.MAX_TOKENS) -> int:
    return args.count(name, value, hi)


def resolve_impl(model: ModelConfig, impl: str | None, phase: str | None = None) -> str:
    """The implementation a call means.

    MHA/GQA/MQA have one (``"standard"``). For MLA, ``impl=None`` means what
    serving engines run: K/V expanded from the latent for the new tokens in
    prefill and chunk (``"naive"`` FLOPs) and ``"absorbed"`` in decode; the cache
    is the compressed latent in every case (see :func:`kv_cache_bytes`).
    """
    if impl is not None and not isinstance(impl, str):
        raise InvalidArgumentError("impl", f"must be an implementation name or None, got {impl!r}")
    if not model.is_mla:
        if impl not in (None, STANDARD_IMPL):
            raise InvalidArgumentError(
                "impl",
                f"{model.label} uses {model.variant.upper()}, which has one "
                f"implementation ('standard'); got {impl!r}",
            )
        return STANDARD_IMPL
    if impl is None:
        return serving_impl(phase)
    if impl not in MLA_IMPLEMENTATIONS:
        raise InvalidArgumentError(
            "impl",
            f"unknown MLA implementation {impl!r}; use one of " + ", ".join(MLA_IMPLEMENTATIONS),
        )
    return impl


def _phase_lengths(phase: str, seq_len: int, q_len: int | None) -> int:
    args.choice("phase", phase, PHASES)
    if q_len is not None:
        q_len = _positive_int("q_len", q_len)
    if phase == "prefill":
        if q_len not in (None, seq_len):
            raise InvalidArgumentError(
                "q_len",
                f"prefill processes all {seq_len} tokens; leave q_len unset or use phase='chunk'",
            )
        return seq_len
    if phase == "decode":
        if q_len not in (None, 1):
            raise InvalidArgumentError("q_len", "decode adds one token; use phase='chunk' for more")
        return 1
    if q_len is None:
        raise InvalidArgumentError(
            "q_len", "phase='chunk' needs q_len, the new tokens per sequence"
        )
    q_len = _positive_int("q_len", q_len)
    if q_len > seq_len:
        raise InvalidArgumentError("q_len", f"{q_len} new tokens cannot exceed seq_len {seq_len}")
    return q_len


def attended_pairs(q: int, seq_len: int, window: int | None = None, causal: bool = False) -> int:
    """(query, key) pairs per sequence and head for ``q`` new tokens, the last at key ``seq_len``.

    Non-causal: ``q * min(S, W)`` (every pair a dense kernel computes). Causal: the
    query at 1-based position ``j`` (``j = S-q+1 .. S``) attends ``min(j, W)`` keys,
    summed exactly; without a window that is ``q (2S - q + 1) / 2``.

    Examples
    --------
    >>> attended_pairs(4, 4), attended_pairs(4, 4, causal=True), attended_pairs(1, 10, causal=True)
    (16, 10, 10)
    """
    seq_len = _positive_int("seq_len", seq_len)
    q = _positive_int("q", q)
    window = args.optional_count("window", window, args.MAX_TOKENS)
    causal = args.flag("causal", causal)
    if q > seq_len:
        raise InvalidArgumentError("q", f"{q} new tokens cannot exceed seq_len {seq_len}")
    keys = seq_len if window is None else min(seq_len, window)
    if not causal:
        return q * keys
    lo, hi = seq_len - q + 1, seq_len  # 1-based positions of the new tokens

    def tri(a: int, c: int) -> int:  # sum of j for j in [a, c]
        return (a + c) * (c - a + 1) // 2 if c >= a else 0

    if window is None or hi <= window:
        return tri(lo, hi)
    if lo >= window:
        return q * window
    return tri(lo, window) + (hi - window) * window


# ----------------------------------------------------------------------------------
# symbol values for a model


def model_layer_key(model: ModelConfig, impl: str) -> str:
    """Name of the generated evaluators of a model's attention layer for ``impl``."""
    return layer_key(model.is_mla, impl, bool(model.q_lora_rank))


_layer_key = model_layer_key  # the former private name, kept while other modules move


def model_dims(model: ModelConfig) -> dict[str, int]:
    """Values of the formula symbols a model fixes (dimensions and 0/1 switches)."""
    return _model_dims(model)


def _model_dims(model: ModelConfig) -> dict[str, int]:
    fields = MLA_FIELD_SYMBOLS if model.is_mla else MHA_FIELD_SYMBOLS
    dims = {sym: getattr(model, name) or 0 for name, sym in fields.items() if sym != "L"}
    if model.is_mla:  # attention_bias on q_a_proj / kv_a_proj_with_mqa and on o_proj
        dims["beta_qkv"] = dims["beta_o"] = int(model.attention_bias)
        return dims
    dims["beta_qkv"] = int(model.attention_bias or model.qkv_bias or model.bias)
    dims["beta_o"] = int(model.attention_bias or model.bias)
    dims["rho"] = 0 if model.family == "gpt2" else 1
    return dims


def evaluate(evaluator: gen.Evaluator, values: Mapping[str, Any]) -> Any:
    """Call a generated evaluator with the symbol values it takes, named in ``values``.

    A symbol the evaluator needs and ``values`` lacks is an error (never a silent 0).
    """
    try:
        return evaluator.fn(*[values[name] for name in evaluator.args])
    except KeyError as missing:
        raise FormulaBindingError(str(missing.args[0]), evaluator.fn.__name__) from None


def attention_params(model: ModelConfig | str) -> dict[str, int]:
    """Parameters of each attention projection of one layer (reference-implementation names)."""
    model = _model(model)
    fns = gen.LAYERS[_layer_key(model, "absorbed")]
    out = evaluate(fns.params, _model_dims(model))
    if model.is_mla:
        return out
    if model.family == "falcon":  # one fused query_key_value matrix
        out = {
            "query_key_value": out["q_proj"] + out["k_proj"] + out["v_proj"],
            "dense": out["o_proj"],
        }
    elif model.family == "gpt2":  # Conv1D c_attn (q, k, v fused) and c_proj
        out = {"c_attn": out["q_proj"] + out["k_proj"] + out["v_proj"], "c_proj": out["o_proj"]}
    return out


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

    @property
    def elements_per_token(self) -> int:
        """Elements of one token's row in every layer (``row_elements x layers``); what a
        token adds to the cache of a model with sliding, chunked, linear or DSA layers is
        ``bytes_per_token``."""
        return self.row_elements * self.layers

    def to_dict(self) -> dict[str, Any]:
        return {
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
        } | (
            {
                "by_kind": [
                    {"kind": k, "layers": n, "tokens_per_layer": t, "bytes": b}
                    for k, n, t, b in self.by_kind
                ]
            }
            if self.by_kind
            else {}
        )


def _row(model: ModelConfig, impl: str, layout: KVLayout) -> tuple[int, int]:
    dims = _model_dims(model)
    fns = gen.LAYERS[_layer_key(model, impl)]
    elements = evaluate(fns.kv_row_elements, dims)
    if model.is_mla and impl != "naive":
        return elements, layout.row_bytes(model.kv_lora_rank, model.qk_rope_head_dim)
    return elements, layout.row_bytes(elements)


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
    model = _model(model)
    seq_len = _positive_int("seq_len", seq_len)
    batch = _positive_int("batch", batch, args.MAX_BATCH)
    include_mtp = args.flag("include_mtp", include_mtp)
    impl = resolve_impl(model, impl, None)
    layout = args.kv_layout("kv_dtype", kv_dtype)
    check_kv_layout(layout, model.is_mla, model.name)
    elements, row_bytes = _row(model, impl, layout)
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
        or bool(model.full_attention_layers)
    )
    if layered or model.index_topk is not None:
        from mlacalc.cost.families import kv_by_kind  # layers of different kinds; DSA indexer keys

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
    )


def kv_cache_bytes(
    model: ModelConfig | str,
    seq_len: int,
    batch: int = 1,
    kv_dtype: str | int | KVLayout = "bf16",
    impl: Impl | None = None,
    include_mtp: bool = False,
) -> int:
    """Exact bytes of the KV cache of all layers holding ``seq_len`` tokens per sequence.

    Examples
    --------
    >>> kv_cache_bytes("deepseek-v3", seq_len=1)          # (512 + 64) x 2 B x 61 layers
    70272
    >>> kv_cache_bytes("deepseek-v3", seq_len=1, kv_dtype="fp8_ds_mla")   # 656 B x 61
    40016
    """
    return kv_cache(model, seq_len, batch, kv_dtype, impl, include_mtp).total_bytes


# ----------------------------------------------------------------------------------
# FLOPs and bytes


@dataclass(frozen=True)
class OpCost:
    """One kernel of one attention layer: FLOPs and the bytes it reads and writes."""

    name: str
    stage: str
    kind: str
    flops: int
    bytes_read: int
    bytes_written: int
    weight_bytes: int
    cache_bytes_read: int
    cache_bytes_written: int
    #: (G, M, N, K): G products of [M x K] @ [K x N] (matmul ops only)
    shape: tuple[int, int, int, int] | None = None

    @property
    def bytes(self) -> int:
        return self.bytes_read + self.bytes_written

    @property
    def arithmetic_intensity(self) -> float:
        return self.flops / self.bytes if self.bytes else math.inf

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "stage": self.stage,
            "kind": self.kind,
            "flops": self.flops,
            "bytes_read": self.bytes_read,
            "bytes_written": self.bytes_written,
            "weight_bytes": self.weight_bytes,
            "cache_bytes_read": self.cache_bytes_read,
            "cache_bytes_written": self.cache_bytes_written,
            "shape": list(self.shape) if self.shape else None,
        }


@dataclass(frozen=True)
class AttentionCost:
    """Cost of the attention blocks of a model for one step.

    Whole-model figures (``flops``, ``stage_flops``, ``elementwise_flops``,
    ``unfused_bytes``, ``fused_bytes``) cover all ``layers``; ``ops`` lists one
    layer's kernels in the unfused order the microbenchmark runs them. A model whose
    layers differ (sliding or chunked layers between full ones) has one cost per kind
    of layer in ``groups`` (full layers first); the whole-model figures sum them, and
    ``ops`` and ``pairs_per_head`` are those of the first group.
    """

    model: str
    variant: str
    impl: str
    phase: str
    seq_len: int
    q_len: int
    batch: int
    causal: bool
    layers: int
    pairs_per_head: int
    ops: tuple[OpCost, ...]
    stage_flops: dict[str, int] = field(default_factory=dict)

    @property
    def flops(self) -> int:
        """Matmul FLOPs of all layers (projections + core + output projection)."""
        return sum(self.stage_flops.values())

    @property
    def layer_flops(self) -> int:
        return self.flops // self.layers

    @property
    def elementwise_flops(self) -> int:
        """Nominal element-wise FLOPs (softmax, RoPE, norms), all layers, reported apart."""
        if self.groups:
            return sum(g.elementwise_flops for g in self.groups)
        return self.layers * sum(o.flops for o in self.ops if o.kind != "matmul")

    @property
    def unfused_bytes(self) -> int:
        """Bytes moved by the op-by-op sequence, all layers."""
        if self.groups:
            return sum(g.unfused_bytes for g in self.groups)
        return self.layers * sum(o.bytes for o in self.ops)

    @property
    def weight_bytes(self) -> int:
        if self.groups:
            return sum(g.weight_bytes for g in self.groups)
        return self.layers * sum(o.weight_bytes for o in self.ops)

    fused_layer_bytes: int = 0
    groups: tuple[AttentionCost, ...] = ()
    group_labels: tuple[str, ...] = ()

    @property
    def fused_bytes(self) -> int:
        """Ideal fused lower bound, all layers: weights, input and output once, the
        cache rows of the attended keys read once and the new rows written once."""
        if self.groups:
            return sum(g.fused_bytes for g in self.groups)
        return self.layers * self.fused_layer_bytes

    @property
    def arithmetic_intensity(self) -> float:
        """Matmul FLOPs per byte of the fused lower bound."""
        return self.flops / self.fused_bytes

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "variant": self.variant,
            "impl": self.impl,
            "phase": self.phase,
            "seq_len": self.seq_len,
            "q_len": self.q_len,
            "batch": self.batch,
            "causal": self.causal,
            "layers": self.layers,
            "pairs_per_head": self.pairs_per_head,
            "flops": self.flops,
            "stage_flops": dict(self.stage_flops),
            "elementwise_flops": self.elementwise_flops,
            "unfused_bytes": self.unfused_bytes,
            "fused_bytes": self.fused_bytes,
            "weight_bytes": self.weight_bytes,
            "arithmetic_intensity_flops_per_byte": self.arithmetic_intensity,
            "ops_per_layer": [o.to_dict() for o in self.ops],
        } | (
            {
                "by_kind": [
                    {
                        "kind": label,
                        "layers": g.layers,
                        "pairs_per_head": g.pairs_per_head,
                        "flops": g.flops,
                        "fused_bytes": g.fused_bytes,
                    }
                    for label, g in zip(self.group_labels, self.groups)
                ]
            }
            if self.groups
            else {}
        )


def _exact(n: int, d: int):
    return n // d if n % d == 0 else Fraction(n, d)


def _ceil(x) -> int:
    return x if isinstance(x, int) else math.ceil(x)


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
    model = _model(model)
    seq_len = _positive_int("seq_len", seq_len)
    batch = _positive_int("batch", batch, args.MAX_BATCH)
    causal = args.flag("causal", causal)
    q = _phase_lengths(phase, seq_len, q_len)
    layout = args.kv_layout("kv_dtype", kv_dtype)
    check_kv_layout(layout, model.is_mla, model.name)
    weight_dtype = args.dtype("weight_dtype", weight_dtype, allow_none=True)
    act_dtype = args.dtype("act_dtype", act_dtype)
    if impl is not None and not isinstance(impl, str):
        raise InvalidArgumentError("impl", f"must be an implementation name or None, got {impl!r}")
    if (
        model.full_attention_interval is not None
        or model.global_head_dim is not None
        or model.full_attention_layers
    ):
        from mlacalc.cost.families import pattern_cost  # layers of different kinds, summed by kind

        return pattern_cost(
            model, phase, seq_len, batch, q_len, impl, causal, kv_dtype, weight_dtype, act_dtype
        )
    # The serving default (impl=None) runs the expanded op sequence in prefill and chunk
    # but always keeps the latent cache; the fused bound counts the cache it keeps.
    cache_impl = "absorbed" if (model.is_mla and impl is None) else None
    impl = resolve_impl(model, impl, phase)
    elements, row_bytes = _row(model, impl, layout)
    cache_row_bytes = _row(model, cache_impl or impl, layout)[1]
    w_bits = dtype_bits(weight_dtype or model.weights_dtype)
    a_bits = dtype_bits(act_dtype)
    window = model.sliding_window
    if window is None and model.index_topk is not None:
        window = model.index_topk  # DSA: the core attends the top-k keys the indexer picks
    keys = seq_len if window is None else min(seq_len, window)
    pairs = attended_pairs(q, seq_len, window, causal)
    if model.attention_chunk_size is not None:
        from mlacalc.cost.families import chunked_keys_and_pairs

        keys, pairs = chunked_keys_and_pairs(q, seq_len, model.attention_chunk_size, causal)
    values = dict(
        _model_dims(model),
        B=batch,
        q=q,
        S=keys,
        P=pairs,
        b=_exact(row_bytes, elements),
        b_w=_exact(w_bits, 8),
        b_a=_exact(a_bits, 8),
    )
    fns = gen.LAYERS[_layer_key(model, impl)]
    ops = [
        OpCost(
            name=t.name,
            stage=t.stage,
            kind=t.kind,
            flops=_ceil(t.flops),
            bytes_read=_ceil(t.act_read + t.weight_read + t.cache_read),
            bytes_written=_ceil(t.act_write + t.cache_write),
            weight_bytes=_ceil(t.weight_read),
            cache_bytes_read=_ceil(t.cache_read),
            cache_bytes_written=_ceil(t.cache_write),
            shape=tuple(round(x) for x in t.shape) if t.shape else None,
        )
        for t in evaluate(fns.ops, values)
    ]
    layers = model.num_hidden_layers
    stage_flops = dict.fromkeys(STAGES, 0)
    for op in ops:
        if op.kind == "matmul":
            stage_flops[op.stage] += layers * op.flops
    weights = sum(o.weight_bytes for o in ops)
    io = 2 * batch * q * model.hidden_size * a_bits // 8
    fused = weights + io + batch * keys * cache_row_bytes + batch * q * cache_row_bytes
    if model.index_topk is not None:
        from mlacalc.cost.families import indexer_cost  # DSA: the indexer scores every key

        extra, extra_bytes = indexer_cost(model, q, seq_len, batch, causal, layout, w_bits)
        for stage, flops in extra.items():
            stage_flops[stage] += layers * flops
        fused += extra_bytes
    return AttentionCost(
        model=model.name,
        variant=model.variant,
        impl=impl,
        phase=phase,
        seq_len=seq_len,
        q_len=q,
        batch=batch,
        causal=causal,
        layers=layers,
        pairs_per_head=values["P"],
        ops=tuple(ops),
        stage_flops=stage_flops,
        fused_layer_bytes=fused,
    )


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
