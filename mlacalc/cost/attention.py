"""The attention cost of one kind of layer: exact FLOPs by stage and bytes by op for one step.

Every number here comes from the functions generated out of the symbolic formulas
(:mod:`mlacalc.cost._generated`), evaluated with Python integers (and
:class:`fractions.Fraction` for sub-byte element sizes), so results are exact at any size.
:func:`uniform_cost` costs a model whose attention layers are all alike; a model whose layers
differ is costed kind by kind in :mod:`mlacalc.cost.families`, and :mod:`mlacalc.cost.engine`
is the public face of both. A DSA layer's lightning indexer and a chunked layer's keys are
here too, as parts of one layer's cost.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from mlacalc.cost import _generated as gen
from mlacalc.cost.block_sparse import block_indexer_cost, block_sparse_keys_and_pairs
from mlacalc.models.loading import ModelConfig, model_argument
from mlacalc.words import arguments as args
from mlacalc.words.dtypes import KVLayout, check_kv_layout, dtype_bits, resolve_kv_layout
from mlacalc.words.errors import FormulaBindingError, InvalidArgumentError
from mlacalc.words.vocab import (
    MHA_FIELD_SYMBOLS,
    MLA_FIELD_SYMBOLS,
    MLA_IMPLEMENTATIONS,
    PHASES,
    STAGES,
    STANDARD_IMPL,
    cache_kind,
    caches_latent,
    layer_key,
    serving_impl,
)
from mlacalc.words.workload import Workload

__all__ = [
    "AttentionCost",
    "OpCost",
    "as_model",
    "attended_pairs",
    "checked_workload",
    "chunked_keys_and_pairs",
    "evaluate",
    "indexer_cost",
    "indexer_row_bytes",
    "kv_row",
    "model_dims",
    "model_layer_key",
    "op_cost",
    "op_weight_bits",
    "packed_bytes",
    "phase_lengths",
    "positive_count",
    "resolve_impl",
    "state_layer_cost",
]


def as_model(model: ModelConfig | str) -> ModelConfig:
    """The model a call means: a :class:`ModelConfig` as is, a name or a path loaded."""
    return model_argument(model)


def positive_count(name: str, value: Any, hi: int = args.MAX_TOKENS) -> int:
    """A whole count of at least 1 and at most ``hi``, or an error naming ``name``."""
    return args.count(name, value, hi)


def resolve_impl(model: ModelConfig, impl: str | None, phase: str | None = None) -> str:
    """The implementation a call means.

    MHA/GQA/MQA have one (``"standard"``). For MLA, ``impl=None`` means what
    serving engines run (:func:`~mlacalc.words.vocab.serving_impl`), the cache the latent in
    every case (see :func:`kv_cache_bytes`): a prompt's K/V expanded from its own tokens'
    latent (``"naive"`` FLOPs), a chunk's from the cached prefix's latent as well
    (``"compressed"``), ``"absorbed"`` in decode. A DSA layer's chunk (DeepSeek-V3.2: its core
    attends the top-k keys each query picks, not one prefix) keeps ``"naive"``.
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
        if phase == "chunk" and model.index_topk is not None:
            return "naive"  # a DSA chunk: no one prefix to expand (its own paths: dsa_time)
        return serving_impl(phase)
    if impl not in MLA_IMPLEMENTATIONS:
        raise InvalidArgumentError(
            "impl",
            f"unknown MLA implementation {impl!r}; use one of " + ", ".join(MLA_IMPLEMENTATIONS),
        )
    return impl


def phase_lengths(phase: str, seq_len: int, q_len: int | None) -> int:
    """New tokens per sequence of a step: ``seq_len`` in prefill, 1 in decode, ``q_len`` in a
    chunk (checked against the phase)."""
    args.choice("phase", phase, PHASES)
    if q_len is not None:
        q_len = positive_count("q_len", q_len)
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
    q_len = positive_count("q_len", q_len)
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
    seq_len = positive_count("seq_len", seq_len)
    q = positive_count("q", q)
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


def model_layer_key(model: ModelConfig, impl: str) -> str:
    """Name of the generated evaluators of a model's attention layer for ``impl``."""
    return layer_key(model.is_mla, impl, bool(model.q_lora_rank))


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
    dims["rho"] = int(model.rope)  # no RoPE: GPT-2's learned positions, Falcon's ALiBi
    dims["d_v"] = model.v_head_dim or model.head_dim  # value heads of their own (MiMo-V2-Flash)
    return dims


def evaluate(evaluator: gen.Evaluator, values: Mapping[str, Any]) -> Any:
    """Call a generated evaluator with the symbol values it takes, named in ``values``.

    A symbol the evaluator needs and ``values`` lacks is an error (never a silent 0).
    """
    try:
        return evaluator.fn(*[values[name] for name in evaluator.args])
    except KeyError as missing:
        raise FormulaBindingError(str(missing.args[0]), evaluator.fn.__name__) from None


def kv_row(model: ModelConfig, impl: str, layout: KVLayout) -> tuple[int, int]:
    dims = _model_dims(model)
    fns = gen.LAYERS[model_layer_key(model, impl)]
    elements = evaluate(fns.kv_row_elements, dims)
    if caches_latent(model.is_mla, impl):
        return elements, layout.row_bytes(model.kv_lora_rank, model.qk_rope_head_dim)
    return elements, layout.row_bytes(elements)


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
    #: what the cache holds (:func:`~mlacalc.words.vocab.cache_kind`): ``"latent"``,
    #: ``"expanded"`` (MLA's ``impl="naive"`` named) or ``"kv"``; ``impl`` names the op
    #: sequence, which is ``naive`` for the serving default's prompt over the latent too
    cache: str = ""

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
            "cache": self.cache,
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


def checked_workload(w: Workload, model: ModelConfig | None = None) -> Workload:
    """``w`` with every field checked, in the order the public functions report errors:
    ``seq_len``, ``batch``, ``causal``, the phase and ``q_len`` (resolved to the new tokens
    per sequence), ``kv_dtype`` (resolved to its layout, which must suit ``model``'s cache
    when one is given), ``weight_dtype``, ``act_dtype``, ``impl``."""
    seq_len = positive_count("seq_len", w.seq_len)
    batch = positive_count("batch", w.batch, args.MAX_BATCH)
    causal = args.flag("causal", w.causal)
    q = phase_lengths(w.phase, seq_len, w.q_len)
    layout = args.kv_layout("kv_dtype", w.kv_dtype)
    if model is not None:
        check_kv_layout(layout, model.is_mla, model.name)
    weight_dtype = args.dtype("weight_dtype", w.weight_dtype, allow_none=True)
    act_dtype = args.dtype("act_dtype", w.act_dtype)
    if w.impl is not None and not isinstance(w.impl, str):
        raise InvalidArgumentError(
            "impl", f"must be an implementation name or None, got {w.impl!r}"
        )
    return Workload(w.phase, seq_len, batch, q, w.impl, causal, layout, weight_dtype, act_dtype)


def op_weight_bits(stage: str, w_bits: int) -> int:
    """The bits an op of ``stage`` reads a weight at under ``w_bits`` weights: a norm's keep
    16 under a narrower dtype (as memory sizes them: mlacalc.serving.layout.KEPT_PARTS,
    cost.quant's never-quantized list); every other op's are ``w_bits``. One rule for report's
    cost, the sweep, a checkpoint's stored reads and the formula's comparison with them."""
    return max(w_bits, 16) if stage == "norm" else w_bits


def uniform_cost(model: ModelConfig, w: Workload) -> AttentionCost:
    """The attention cost of a model whose attention layers are all alike, for a checked
    workload (:func:`checked_workload`; :func:`mlacalc.cost.engine.cost_of` checks it)."""
    phase, seq_len, batch, q, impl, causal = w.phase, w.seq_len, w.batch, w.q_len, w.impl, w.causal
    layout, weight_dtype, act_dtype = w.kv_dtype, w.weight_dtype, w.act_dtype
    # The serving default (impl=None) runs the expanded op sequence in prefill (compressed
    # in a chunk) but always keeps the latent cache; the fused bound counts the cache it keeps.
    cache_impl = "absorbed" if (model.is_mla and impl is None) else None
    cache = cache_kind(model.is_mla, impl)
    impl = resolve_impl(model, impl, phase)
    elements, row_bytes = kv_row(model, impl, layout)
    cache_row_bytes = kv_row(model, cache_impl or impl, layout)[1]
    w_bits = dtype_bits(weight_dtype or model.weights_dtype)
    a_bits = dtype_bits(act_dtype)
    window = model.sliding_window
    if window is None and model.index_topk is not None:
        window = model.index_topk  # DSA: the core attends the top-k keys the indexer picks
    keys = seq_len if window is None else min(seq_len, window)
    pairs = attended_pairs(q, seq_len, window, causal)
    if model.attention_chunk_size is not None:
        keys, pairs = chunked_keys_and_pairs(q, seq_len, model.attention_chunk_size, causal)
    sparse = model.sparse_block_size is not None  # MiniMax-M3: the blocks its indexer picks
    if sparse:
        block, topk = model.sparse_block_size, model.sparse_topk_blocks
        keys, pairs = block_sparse_keys_and_pairs(q, seq_len, block, topk, causal)
    values = dict(
        model_dims(model),
        B=batch,
        q=q,
        S=keys,
        P=pairs,
        b=_exact(row_bytes, elements),
        b_w=_exact(w_bits, 8),
        b_a=_exact(a_bits, 8),
    )
    fns = gen.LAYERS[model_layer_key(model, impl)]
    terms = [
        t._replace(weight_read=t.weight_read * Fraction(op_weight_bits(t.stage, w_bits), w_bits))
        if op_weight_bits(t.stage, w_bits) != w_bits
        else t
        for t in evaluate(fns.ops, values)
    ]
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
        for t in terms
    ]
    layers = model.num_hidden_layers
    stage_flops = dict.fromkeys(STAGES, 0)
    for op in ops:
        if op.kind == "matmul":
            stage_flops[op.stage] += layers * op.flops
    weights = sum(o.weight_bytes for o in ops)
    io = 2 * batch * q * model.hidden_size * a_bits // 8
    fused = weights + io + batch * keys * cache_row_bytes + batch * q * cache_row_bytes
    if model.index_topk is not None and not model.every_indexer_shared:
        # DSA: the indexer scores every key (a shared layer reuses the previous one's top-k)
        extra, extra_bytes = indexer_cost(model, q, seq_len, batch, causal, w_bits)
        for stage, flops in extra.items():
            stage_flops[stage] += layers * flops
        fused += extra_bytes
    if sparse:  # the block-sparse indexer scores every key
        extra, extra_bytes = block_indexer_cost(model, q, seq_len, batch, causal, layout, w_bits)
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
        cache=cache,
    )


#: The cache layout of a DSA layer's indexer keys, whatever the latent cache's: fp8 (e4m3) with
#: one float32 scale a 128 values (132 B for ``index_head_dim`` 128). DeepSeek's released
#: inference code for V3.2 keeps them so (DeepSeek-V3.2-Exp ``inference/model.py``, class
#: ``Indexer``: ``k_cache`` float8_e4m3fn and ``k_scale_cache``; its
#: latent cache beside them in bf16, from recall); the DSA module tables' engines quantize
#: the indexer's query and key to fp8 and score them with DeepGEMM's fp8 MQA logits
#: (``mlacalc.measured.mapping``: ``index_k_cache``, ``mqa_logits`` at ``dim + 4`` bytes a
#: key); from recall, SGLang's NSA pool (``index_k_with_scale_buffer``), vLLM's
#: ``DeepseekV32IndexerCache`` and TensorRT-LLM's DSA cache manager hold the same 132 B
#: whatever ``--kv-dtype`` says.
INDEXER_KEY_LAYOUT = "fp8_ds_mla"


def indexer_row_bytes(model: ModelConfig) -> int:
    """Bytes of one token's indexer key in one DSA layer: fp8 with a float32 scale a 128
    values (:data:`INDEXER_KEY_LAYOUT`), in every cache layout: what the KV sizing, the model
    step's indexer kernels and their fp8 class all assume."""
    return resolve_kv_layout(INDEXER_KEY_LAYOUT).row_bytes(model.index_head_dim)


def indexer_cost(
    model: ModelConfig,
    q: int,
    seq_len: int,
    batch: int,
    causal: bool,
    weight_bits: int,
) -> tuple[dict[str, int], int]:
    """Matmul FLOPs by stage and fused bytes of one DSA layer's indexer for one step.

    ``q`` new tokens project an indexer query per head from the query latent
    (``wq_b``, stage ``q_proj``) and head weights from the hidden state
    (``weights_proj``, ``q_proj``), a key from the hidden state (``wk``, ``kv_proj``),
    and score every cached key on every indexer head (``core``: ``2 n_i d_i`` per
    (query, key) pair, all keys, causal or not as asked). Bytes: its weights once, the
    indexer keys of the ``seq_len`` tokens read and of the new tokens written, in fp8 with
    their scales whatever the cache's layout (:func:`indexer_row_bytes`).
    """
    d, heads, width = model.hidden_size, model.index_n_heads, model.index_head_dim
    source = model.q_lora_rank or d
    tokens = batch * q
    flops = {
        "q_proj": 2 * tokens * (source * heads * width + d * heads),
        "kv_proj": 2 * tokens * d * width,
        "core": 2 * batch * heads * width * attended_pairs(q, seq_len, None, causal),
    }
    weights = (source * heads * width + d * width + d * heads) * weight_bits // 8 + 2 * width * 2
    row = indexer_row_bytes(model)
    return flops, weights + batch * (seq_len + q) * row


def chunked_keys_and_pairs(q: int, seq_len: int, chunk: int, causal: bool) -> tuple[int, int]:
    """Keys read and (query, key) pairs per sequence and head of a chunked layer.

    The new tokens are positions ``S-q+1 .. S`` (1-based); position ``j`` attends the
    keys of its own chunk up to itself, ``(j - 1) % C + 1`` of them. Non-causal, each
    chunk the new tokens touch is a dense block: its new tokens times its keys up to
    the last new one. Keys read are those of the chunks touched.

    Examples
    --------
    >>> chunked_keys_and_pairs(1, 10, 4, False), chunked_keys_and_pairs(10, 10, 4, True)
    ((2, 2), (10, 23))
    """
    lo = seq_len - q + 1
    keys = seq_len - (lo - 1) // chunk * chunk
    pairs = 0
    start = (lo - 1) // chunk * chunk  # keys before the first touched chunk
    while start < seq_len:
        a, b = max(lo, start + 1), min(seq_len, start + chunk)
        if causal:
            pairs += (a - start + b - start) * (b - a + 1) // 2
        else:
            pairs += (b - a + 1) * (b - start)
        start += chunk
    return keys, pairs


def packed_bytes(elements: int, bits: int) -> int:
    """Bytes of ``elements`` values of ``bits`` each, packed and rounded up to a whole byte."""
    return -(-elements * bits // 8)


def op_cost(
    name: str,
    stage: str,
    kind: str,
    flops: int,
    read: int,
    written: int,
    weights: int = 0,
    c_read: int = 0,
    c_write: int = 0,
    shape: tuple[int, ...] | None = None,
) -> OpCost:
    """One operation of a layer: its activations read and written, plus the weights it reads
    and the cache or state it reads and writes (counted in its bytes and apart)."""
    return OpCost(
        name=name,
        stage=stage,
        kind=kind,
        flops=flops,
        bytes_read=read + weights + c_read,
        bytes_written=written + c_write,
        weight_bytes=weights,
        cache_bytes_read=c_read,
        cache_bytes_written=c_write,
        shape=shape,
    )


def state_layer_cost(
    model: ModelConfig,
    layers: int,
    work: Workload,
    ops: list[OpCost],
    *,
    variant: str,
    impl: str,
    io_bytes: int,
    state_bytes: int,
) -> AttentionCost:
    """The cost record of ``layers`` layers that keep a fixed state per sequence (linear
    attention, Mamba-2, Mamba-1) from one layer's ``ops``: the stages' matmul FLOPs over the
    layers, and the fused lower bound of one layer's bytes: its weights, the block's input and
    output (``io_bytes``), the state read when tokens came before this step and written back."""
    stage = dict.fromkeys(STAGES, 0)
    for o in ops:
        if o.kind == "matmul":
            stage[o.stage] += layers * o.flops
    prior = work.seq_len > work.q_len
    weights = sum(o.weight_bytes for o in ops)
    fused = weights + io_bytes + (state_bytes if prior else 0) + state_bytes
    return AttentionCost(
        model=model.name,
        variant=variant,
        impl=impl,
        phase=work.phase,
        seq_len=work.seq_len,
        q_len=work.q_len,
        batch=work.batch,
        causal=work.causal,
        layers=layers,
        pairs_per_head=0,
        ops=tuple(ops),
        stage_flops=stage,
        fused_layer_bytes=fused,
    )
