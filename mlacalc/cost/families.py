"""The cost rules of layers of different kinds, summed by kind.

A model whose layers differ (sliding or chunked layers between full ones, linear-attention
layers, DSA layers with their indexer, Gemma 4's full layers with their own head width) is
costed one kind at a time (:func:`pattern_cost`), its cache kind by kind (:func:`kv_by_kind`),
Which families add what is
:mod:`mlacalc.models.architecture`.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from mlacalc.cost.attention import AttentionCost, indexer_row_bytes, uniform_cost
from mlacalc.cost.block_sparse import block_indexer_row_bytes
from mlacalc.cost.compressed import compressed_cost, compressed_layer_bytes
from mlacalc.cost.linear import gated_query_cost, linear_cost
from mlacalc.cost.mamba import mamba_cost, mamba_state_bytes
from mlacalc.cost.mamba1 import mamba1_cost, mamba1_state_bytes
from mlacalc.models.architecture import Arch, arch_of, kind_model, layer_pattern
from mlacalc.models.patterns import COMPRESSED_KINDS, LayerKind
from mlacalc.words.dtypes import resolve_kv_layout, state_dtype_name, state_layout
from mlacalc.words.vocab import STAGES
from mlacalc.words.workload import Workload

if TYPE_CHECKING:
    from mlacalc.models.schema import ModelConfig

__all__ = ["kv_by_kind", "linear_state_bytes", "recurrent_state_dtype"]


def _k_eq_v(cost: Any) -> Any:
    """A layer cost whose key projection also serves as the value (``attention_k_eq_v``):
    the ``kv_proj`` GEMM makes K only (half its FLOPs, weights and output); the cache
    still receives K and V."""
    ops, saved = [], 0
    for op in cost.ops:
        if op.name == "kv_proj":
            written = op.bytes_written - op.cache_bytes_written
            saved = op.weight_bytes - op.weight_bytes // 2
            g, m, n, k = op.shape
            op = replace(
                op,
                flops=op.flops // 2,
                bytes_read=op.bytes_read - saved,
                bytes_written=op.bytes_written - written // 2,
                weight_bytes=op.weight_bytes - saved,
                shape=(g, m, n // 2, k),
            )
        ops.append(op)
    stage = dict(cost.stage_flops)
    stage["kv_proj"] = sum(cost.layers * o.flops for o in ops if o.stage == "kv_proj")
    return replace(
        cost, ops=tuple(ops), stage_flops=stage, fused_layer_bytes=cost.fused_layer_bytes - saved
    )


def linear_state_bytes(model: ModelConfig, kv_bytes: int, state_bytes: int = 4) -> int:
    """Bytes one linear-attention layer keeps per sequence: the convolution window of
    ``linear_conv_kernel_dim`` columns over q, k and v (``kv_bytes`` each, as the Hugging
    Face cache holds it) and one ``key x value`` recurrent state per value head
    (``state_bytes`` each: float32 by default)."""
    m = model
    conv = (
        2 * m.linear_num_key_heads * m.linear_key_head_dim
        + m.linear_num_value_heads * m.linear_value_head_dim
    ) * m.linear_conv_kernel_dim
    state = m.linear_num_value_heads * m.linear_key_head_dim * m.linear_value_head_dim
    return conv * kv_bytes + state * state_bytes


def recurrent_state_dtype(model: ModelConfig, layout: Any) -> str | None:
    """The dtype ``model``'s linear or Mamba layers keep their recurrent state in under the
    cache ``layout`` (``fp32``, or ``bf16`` with ``--state-dtype``), None for a model that keeps
    none: what report, roofline and plan name."""
    if not layer_pattern(model).keeps_state:
        return None
    return state_dtype_name(resolve_kv_layout(layout))


def kv_by_kind(
    model: ModelConfig,
    seq_len: int,
    batch: int,
    row_bytes: int,
    layers: int,
    layout: Any = None,
) -> tuple[tuple[str, int, int, int], ...]:
    """``(label, layers, tokens kept per layer, bytes)`` per kind of layer, the product's
    convention (a sliding or chunked layer keeps ``min(S, W)``); MTP layers beyond the
    main model are like the main model's full layers. A DSA layer's row adds the
    indexer key in the cache layout (``index_head_dim`` values; an 8-bit layout adds a
    float32 scale per 128 values, as DeepSeek's indexer cache keeps it). A Gemma 4 full
    layer's row is its own: K and V of ``num_global_key_value_heads`` heads of
    ``global_head_dim`` (two tensors even with ``attention_k_eq_v``); a MiMo-V2-Flash sliding
    layer's too: K (``head_dim``) and V (``v_head_dim``) of ``sliding_key_value_heads``."""
    out: dict[str, list[int]] = {}
    full_row = row_bytes
    if (model.global_head_dim is not None or model.attention_k_eq_v) and not model.is_mla:
        sub = kind_model(model, LayerKind("full"))
        elements = 2 * sub.num_key_value_heads * sub.head_dim
        full_row = resolve_kv_layout("bf16" if layout is None else layout).row_bytes(elements)
    pattern = layer_pattern(model)
    kinds = [(k.label, k.tokens_kept(seq_len)) for k in pattern.layers]
    full = next((k.label for k in pattern.layers if k.window is None), "full")
    kinds += [(full, seq_len)] * (layers - len(kinds))
    own_row = {k.label: full_row for k in pattern.layers if k.attention == "full"}
    if model.sparse_block_size is not None:  # MiniMax-M3: K, V and the indexer key
        own_row["msa"] = row_bytes + block_indexer_row_bytes(model, layout)
    if model.sliding_key_value_heads is not None:  # MiMo-V2-Flash: sliding layers' own KV heads
        kv_layout = resolve_kv_layout("bf16" if layout is None else layout)
        for k in pattern.layers:
            if k.attention == "sliding":
                sub = kind_model(model, k)
                width = sub.head_dim + (sub.v_head_dim or sub.head_dim)  # K and V
                own_row[k.label] = kv_layout.row_bytes(sub.num_key_value_heads * width)
    for label, tokens in kinds:
        entry = out.setdefault(label, [0, tokens])
        entry[0] += 1
    dsa_row = row_bytes + (indexer_row_bytes(model) if model.index_topk else 0)
    held = state_layout("bf16" if layout is None else layout)
    element, word = held.row_bytes(1), held.state_bytes  # the window's, the state's
    beside = {k.label for k in pattern.layers if k.mamba}  # Falcon-H1: Mamba-2 beside attention
    fixed = {
        "linear": linear_state_bytes(model, element, word) if "linear" in out else 0,
        "mamba": mamba_state_bytes(model, element, word) if "mamba" in out or beside else 0,
        "mamba1": mamba1_state_bytes(model, element, word) if "mamba1" in out else 0,
        "none": 0,
    }
    v4 = {k.label: k for k in pattern.layers if k.attention in COMPRESSED_KINDS}
    fixed.update(  # DeepSeek-V4: the window, pooled keys and compressor state per sequence
        (label, compressed_layer_bytes(model, kind, seq_len, layout)) for label, kind in v4.items()
    )
    return tuple(
        (label, n, t, n * batch * fixed[label])
        if label in fixed
        else (
            label,
            n,
            t,
            n * batch * t * (dsa_row if label == "dsa" else own_row.get(label, row_bytes))
            + (n * batch * fixed["mamba"] if label in beside else 0),
        )
        for label, (n, t) in out.items()
    )


def pattern_cost(model: ModelConfig, w: Workload) -> AttentionCost:
    """The attention cost of a model whose layers differ, for a checked workload: one cost
    per kind of layer, summed (reached through :func:`mlacalc.cost.engine.cost_of`, which
    checks the workload)."""
    groups: dict[str, tuple[LayerKind, int]] = {}
    for k in layer_pattern(model).layers:
        kind, n = groups.get(k.label, (k, 0))
        groups[k.label] = (kind, n + 1)
    order = sorted(
        groups.items(),
        key=lambda item: (
            item[1][0].attention == "none",
            item[1][0].window is not None,
            item[1][0].attention in ("linear", "mamba", "mamba1"),
        ),
    )
    costs, labels = [], []
    for label, (kind, n) in order:
        if kind.mamba:  # attention and Mamba-2 side by side (Falcon-H1): costed apart
            plain = replace(kind, mamba=False)
            costs += [_kind_cost(model, plain, n, w), mamba_cost(model, n, w)]
            labels += [plain.label, "mamba"]
            continue
        costs.append(_kind_cost(model, kind, n, w))
        labels.append(label)
    stage = {s: sum(c.stage_flops.get(s, 0) for c in costs) for s in STAGES}
    return replace(
        costs[0],
        model=model.name,
        layers=model.num_hidden_layers,
        stage_flops=stage,
        groups=tuple(costs),
        group_labels=tuple(labels),
    )


def _no_mixer(model: ModelConfig, n: int, w: Workload) -> AttentionCost:
    """The attention cost of ``n`` layers without a sequence mixer: nothing."""
    return AttentionCost(
        model=model.name,
        variant="none",
        impl="none",
        phase=w.phase,
        seq_len=w.seq_len,
        q_len=w.q_len,
        batch=w.batch,
        causal=w.causal,
        layers=n,
        pairs_per_head=0,
        ops=(),
        stage_flops=dict.fromkeys(STAGES, 0),
        fused_layer_bytes=0,
    )


def _kind_cost(model: ModelConfig, kind: LayerKind, n: int, w: Workload) -> AttentionCost:
    """The attention cost of the ``n`` layers of one kind."""
    if kind.attention == "linear":  # a fixed state per sequence (mlacalc.cost.linear)
        return linear_cost(model, n, w)
    if kind.attention == "mamba":  # a fixed state per sequence (mlacalc.cost.mamba)
        return mamba_cost(model, n, w)
    if kind.attention == "mamba1":  # Jamba's Mamba-1 (mlacalc.cost.mamba1)
        return mamba1_cost(model, n, w)
    if kind.attention == "none":  # no sequence mixer (Nemotron-H's MoE and MLP blocks)
        return _no_mixer(model, n, w)
    if kind.attention in COMPRESSED_KINDS:  # DeepSeek-V4 (mlacalc.cost.compressed)
        return compressed_cost(model, kind, n, w)
    sub = kind_model(model, kind).replaced(num_hidden_layers=n)
    k_eq_v = sub.attention_k_eq_v
    if k_eq_v:
        sub = sub.replaced(attention_k_eq_v=False)
    cost = uniform_cost(sub, w)
    if not kind.rope:  # a layer without rotary embedding runs no RoPE kernel
        cost = replace(cost, ops=tuple(o for o in cost.ops if o.name != "rope"))
    arch = arch_of(model) or Arch()
    if (arch.gated_query or arch.head_gate) and not sub.is_mla:
        width = sub.num_attention_heads if arch.head_gate else None  # one gate a head
        cost = gated_query_cost(cost, sub, w.weight_dtype, w.act_dtype, width)
    return _k_eq_v(cost) if k_eq_v else cost
