"""DeepSeek Sparse Attention (DSA, DeepSeek-V3.2): an MLA layer whose core attends only the
``k`` keys a lightning indexer picks for each query.

The layer is :mod:`.mla`'s, in any implementation, with two changes, as
:func:`mlacalc.cost.attention.uniform_cost` and :func:`mlacalc.cost.attention.indexer_cost`
count them:

- the core (and every op of the MLA layer that reads the ``S`` cached keys) sees
  ``min(S, k)`` keys and ``P_k`` (query, key) pairs a head, the pairs of a window of ``k``
  keys (decode: ``min(S, k)``);
- an indexer beside it, of ``n_i`` heads ``d_i`` wide (``index_n_heads``,
  ``index_head_dim``): ``wq_b`` (``d_cq -> n_i d_i``) and ``weights_proj`` (``d -> n_i``) on
  the new tokens (stage ``q_proj``), ``wk`` (``d -> d_i``) with a LayerNorm of weight and bias
  (stage ``kv_proj``), and ``2 n_i d_i`` FLOPs for each (query, key) pair over all ``S`` keys
  (stage ``core``, ``P`` pairs: the indexer scores every key to pick ``k``).

The cache holds the MLA latent row (``d_c + d_rope`` elements of ``b`` bytes) and one indexer
key a token (``d_i`` elements of ``b_i`` bytes: fp8 with a float32 scale a 128 values,
``b_i = 33/32``, whatever the latent's dtype; ``attention.INDEXER_KEY_LAYOUT``).
The indexer's ops are counted in FLOPs and in the fused bound (its weights once, at ``b_w``
a weight and its LayerNorm at 2 bytes, its keys of the ``S`` tokens read and of the ``q`` new
ones written); report's unfused op sequence has no op of its own for it, and nor has this.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import sympy as sp

from mlacalc.cost.formulas.ops import Layer, Op
from mlacalc.cost.symbols import B, P, P_k, S, b_i, b_w, d, d_cq, d_i, k, n_i, q

__all__ = ["KEYS", "KEYS_ATTENDED", "indexer_params", "layer"]

#: keys the core of a DSA layer attends for its last query, ``min(S, k)``: a placeholder the
#: formula keeps while it factors, then replaces by :data:`KEYS_ATTENDED`
KEYS = sp.Symbol("K", positive=True, integer=True)
KEYS_ATTENDED = sp.Min(S, k)
_ZERO = sp.Integer(0)


def indexer_params(q_lora: bool) -> dict[str, sp.Expr]:
    """The indexer's weights as the Hugging Face DeepSeek-V3.2 attention holds them (its
    query from the query latent ``d_cq``, or from ``d`` without one)."""
    source = d_cq if q_lora else d
    return {
        "indexer.wq_b": source * n_i * d_i,
        "indexer.wk": d * d_i,
        "indexer.k_norm": d_i,
        "indexer.k_norm.bias": d_i,
        "indexer.weights_proj": d * n_i,
    }


def _indexer_flops(q_lora: bool) -> dict[str, sp.Expr]:
    source = d_cq if q_lora else d
    tokens = B * q
    return {
        "q_proj": 2 * tokens * (source * n_i * d_i + d * n_i),
        "kv_proj": 2 * tokens * d * d_i,
        "core": 2 * B * n_i * d_i * P,
    }


@dataclass(frozen=True)
class DsaLayer(Layer):
    """An MLA layer restricted to the ``k`` picked keys, with the indexer beside it."""

    indexer_flops: dict[str, sp.Expr] = field(default_factory=dict)
    indexer_weight_bytes: sp.Expr = _ZERO
    latent_row_bytes: sp.Expr = _ZERO

    def matmul_flops(self, stage: str | None = None) -> sp.Expr:
        extra = sp.Add(*[f for s, f in self.indexer_flops.items() if stage is None or s == stage])
        return super().matmul_flops(stage) + extra

    def fused_bytes(self) -> sp.Expr:
        """The MLA layer's fused bound over ``min(S, k)`` keys, and the indexer's weights
        once and its keys of the ``S`` tokens read and of the ``q`` new ones written."""
        plain = replace_rows(self, self.latent_row_bytes)
        return (
            Layer.fused_bytes(plain).subs(S, KEYS)
            + self.indexer_weight_bytes
            + B * (S + q) * d_i * b_i
        )


def replace_rows(layer: Layer, row_bytes: sp.Expr) -> Layer:
    """A plain :class:`Layer` of ``layer``'s ops with a cache row of ``row_bytes``."""
    return Layer(
        key=layer.key,
        ops=layer.ops,
        kv_row_elements=layer.kv_row_elements,
        kv_row_bytes=row_bytes,
        params=layer.params,
    )


def _restricted(op: Op) -> Op:
    """An MLA op over the ``min(S, k)`` picked keys and their ``P_k`` pairs."""
    subs = {S: KEYS, P: P_k}

    def over(x):
        return x.subs(subs) if isinstance(x, sp.Basic) else x

    return Op(
        op.name,
        op.stage,
        op.kind,
        over(op.flops),
        act_read=over(op.act_read),
        weight_read=over(op.weight_read),
        cache_read=over(op.cache_read),
        act_write=over(op.act_write),
        cache_write=over(op.cache_write),
        shape=tuple(over(x) for x in op.shape) if op.shape else None,
    )


def layer(base: Layer, q_lora: bool) -> DsaLayer:
    """The DSA layer over an MLA layer ``base`` (any implementation; its cache row is the
    latent's, as report's DSA cache is)."""
    idx = indexer_params(q_lora)
    weights = idx["indexer.wq_b"] + idx["indexer.wk"] + idx["indexer.weights_proj"]
    norm = idx["indexer.k_norm"] + idx["indexer.k_norm.bias"]
    return DsaLayer(
        key="dsa_" + base.key,
        ops=tuple(_restricted(o) for o in base.ops),
        kv_row_elements=base.kv_row_elements + d_i,
        kv_row_bytes=base.kv_row_bytes + d_i * b_i,
        params={**base.params, **idx},
        indexer_flops=_indexer_flops(q_lora),
        indexer_weight_bytes=weights * b_w + 2 * norm,  # its LayerNorm kept in bf16
        latent_row_bytes=base.kv_row_bytes,
    )
