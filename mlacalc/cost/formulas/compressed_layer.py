"""DeepSeek-V4's attention layers as formulas: compressed sparse (``csa``), heavily compressed
(``hca``) and the window alone (``swa``).

Every layer keeps one shared K = V head ``d_h`` wide (the config's ``head_dim``, ``D`` in
docs/deepseek-v4.md) for the last ``W`` tokens (``sliding_window``: a ring of ``W`` rows, as
the engines keep it), ``n_h`` query heads of the same width from a query latent ``d_cq``, and a
grouped low-rank output (``g`` groups of ``n_h d_h / g`` into ``d_o`` each, then
``g d_o -> d``). A compressed layer adds one pooled key per ``m`` tokens (its compression
rate: ``compress_rate_csa`` or ``compress_rate_hca``) from a compressor of ``d -> 2 d_h``
(hca) or ``d -> 4 d_h`` (csa: two series), and keeps the projections of the tokens of an
unfinished window (``S mod m`` of them) until it pools them. A ``csa`` layer's indexer of
``n_i`` heads ``d_i`` wide scores every pooled key (``2 n_i d_i`` FLOPs a query and key, its
pooled indexer keys cached beside them) and the core attends at most ``k`` (``index_topk``)
pooled keys a query.

The cache of one layer after ``S`` tokens, in ``b`` bytes an element (every part in the
cache's dtype, as :func:`mlacalc.cost.compressed.compressed_layer_bytes` sizes it):

- ``swa``: ``min(S, W) d_h``;
- ``hca``: ``min(S, W) d_h + floor(S / m) d_h + 2 (S mod m) d_h``;
- ``csa``: ``min(S, W) d_h + floor(S / m) (d_h + d_i) + 4 (S mod m) (d_h + d_i)``, and
  ``2 m (d_h + d_i)`` once a window has been pooled (its first series, carried for the next
  window's overlap).

FLOPs (2 a multiply-add), by stage as ``report`` groups them, for the ``q`` new tokens of a
step ending at position ``S`` (prefill ``q = S``; decode ``q = 1``): ``q_proj`` the query's two
projections (and a ``csa`` indexer's query and weights), ``kv_proj`` the window's key (and the
compressor, and a ``csa`` indexer's compressor), ``core`` the attention of a kernel that skips
masked keys (the query at 1-based position ``j`` sees ``min(j, W)`` window keys and
``floor(j / m)`` pooled ones, at most ``k`` in a ``csa`` layer; ``4 n_h d_h`` FLOPs a key:
K = V, scores and values) and a ``csa`` indexer's scores, ``o_proj`` the grouped output.
These are :func:`mlacalc.cost.compressed.attention_flops`' counts, regrouped.
"""

from __future__ import annotations

import sympy as sp

from mlacalc.cost.symbols import (
    B,
    L,
    S,
    W,
    b,
    d,
    d_cq,
    d_h,
    d_i,
    d_o,
    g,
    k,
    m_r,
    n_h,
    n_i,
)

__all__ = ["KINDS", "STAGES", "attention_flops", "kv_cache_bytes"]

#: the layer kinds: DeepSeek-V4's compressed sparse, heavily compressed and window-only layers
KINDS = ("csa", "hca", "swa")
#: the stages of a layer's FLOPs (report's grouping)
STAGES = ("q_proj", "kv_proj", "core", "o_proj")


def _pooled(n: sp.Expr) -> sp.Expr:
    return sp.floor(n / m_r)


def kv_cache_bytes(kind: str) -> sp.Expr:
    """Bytes ``L`` layers of ``kind`` cache for ``B`` sequences of ``S`` tokens."""
    window = sp.Min(S, W) * d_h
    if kind == "swa":
        rows = window
    elif kind == "hca":
        rows = window + _pooled(S) * d_h + 2 * sp.Mod(S, m_r) * d_h
    else:
        width = d_h + d_i
        overlap = sp.Piecewise((2 * m_r * width, m_r <= S), (0, True))
        rows = window + _pooled(S) * width + 4 * sp.Mod(S, m_r) * width + overlap
    return L * B * b * rows


def _floor_sum(n: sp.Expr) -> sp.Expr:
    """``sum(floor(j / m) for j in 1..n)``, closed: ``m Q (Q - 1) / 2 + Q (n - Q m + 1)`` with
    ``Q = floor(n / m)``."""
    big_q = _pooled(n)
    return m_r * big_q * (big_q - 1) / 2 + big_q * (n - big_q * m_r + 1)


def _keys(kind: str, phase: str) -> sp.Expr:
    """Keys the step's queries attend together (a kernel that skips masked keys)."""
    if phase == "decode":  # the query at position S
        window = sp.Min(S, W)
        pooled = {"swa": 0, "hca": _pooled(S), "csa": sp.Min(_pooled(S), k)}[kind]
        return window + pooled
    full = sp.Min(S, W)  # the queries at positions 1 .. S
    window = full * (full + 1) / 2 + W * sp.Max(0, S - W)
    if kind == "swa":
        return window
    if kind == "hca":
        return window + _floor_sum(S)
    below = sp.Min(S, k * m_r - 1)  # floor(j / m) reaches k at j = k m
    return window + _floor_sum(below) + k * sp.Max(0, S - below)


def attention_flops(kind: str, phase: str, stage: str | None = None) -> sp.Expr:
    """FLOPs of ``L`` layers of ``kind`` for one step of ``B`` sequences (``phase``
    ``prefill``: ``S`` new tokens; ``decode``: one after ``S - 1``), or of one ``stage``."""
    tokens = B * (S if phase == "prefill" else 1)
    parts = {
        "q_proj": 2 * tokens * (d * d_cq + d_cq * n_h * d_h),
        "kv_proj": 2 * tokens * d * d_h,
        "core": 4 * n_h * d_h * B * _keys(kind, phase),
        "o_proj": 2 * tokens * (n_h * d_h * d_o + g * d_o * d),
    }
    if kind == "hca":
        parts["kv_proj"] += 2 * tokens * d * 2 * d_h
    elif kind == "csa":
        parts["q_proj"] += 2 * tokens * (d_cq * n_i * d_i + d * n_i)
        parts["kv_proj"] += 2 * tokens * d * (4 * d_h + 4 * d_i)
        parts["core"] += 2 * n_i * d_i * tokens * _pooled(S)
    # the core as built (the window's keys, then the pooled ones: factoring scrambles them)
    tidy = {name: v if name == "core" else sp.factor(v) for name, v in parts.items()}
    if stage is not None:
        return L * tidy[stage]
    return L * sp.Add(*tidy.values())
