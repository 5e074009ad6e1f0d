"""Expected per-expert loads of the MoE rows of a measured set.

A ``moe_perf`` row times one rank: ``tokens`` tokens enter it, each routed top-``k`` over all
``E`` experts, and the rank holds ``E / ep`` of them. What the rank computes depends on how
many (token, expert) assignments land on its experts and how they are spread:

* ``balanced``: round-robin routing over the ranks. Assignment ``j`` (of ``A = tokens * k``)
  goes to expert ``j mod E`` and expert ``e`` lives on rank ``e mod ep``, so the measured rank
  computes ``ceil(A / ep)`` assignments on ``min(E/ep, ceil(A / ep))`` experts, at most
  ``ceil(A / E)`` on one expert. These loads are exact integers. (The measured latencies
  confirm the interleaving: at one token a rank with 10 local experts reads one expert's
  weights, not eight.)
* ``power_law_<alpha>``: routing drawn from a power law, the most-loaded rank measured. The
  expected share of expert ``i`` (1-based, heaviest first) is ``k * i^-alpha / sum_j j^-alpha``,
  capped at 1 (a token picks an expert at most once) with the excess spread over the uncapped
  experts in proportion to their shares until none exceeds 1. The shares do not depend on the
  token count. The straggler rank holds the heaviest expert and ``E/ep - 1`` experts of the
  average share of the others, ``(k - s_1) / (E - 1)``. A rank's expected number of touched
  experts counts each expert with probability ``1 - (1 - share)^tokens``. These are expected
  values, so FLOPs of power-law rows are expectations, not integers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["RankLoad", "power_law_shares", "rank_loads"]


@dataclass(frozen=True)
class RankLoad:
    """Loads of the measured rank, one entry per row."""

    assignments: np.ndarray  # (token, expert) pairs the rank computes
    max_per_expert: np.ndarray  # assignments of its most-loaded expert
    active_experts: np.ndarray  # experts of the rank with at least one assignment


def power_law_shares(experts: int, topk: int, alpha: float) -> np.ndarray:
    """Expected per-token share of every expert, heaviest first; sums to ``topk``, each <= 1."""
    w = np.arange(1, experts + 1, dtype=np.float64) ** -alpha
    share = topk * w / w.sum()
    for _ in range(experts):
        over = share > 1.0
        if not over.any():
            break
        excess = float((share[over] - 1.0).sum())
        share[over] = 1.0
        free = share < 1.0
        if not free.any():
            break
        share[free] += excess * share[free] / share[free].sum()
    return share


def rank_loads(
    tokens: np.ndarray, topk: np.ndarray, experts: np.ndarray, ep: np.ndarray, alpha: np.ndarray
) -> RankLoad:
    """Loads of the measured rank; ``alpha`` = 0 marks balanced (round-robin) rows."""
    tokens = tokens.astype(np.float64)
    n = tokens.shape[0]
    local = experts // ep
    out_a, out_max, out_act = np.zeros(n), np.zeros(n), np.zeros(n)

    bal = alpha == 0
    if bal.any():
        a = tokens[bal] * topk[bal]
        e_tot, e_loc = experts[bal].astype(np.float64), local[bal].astype(np.float64)
        mine = np.ceil(a / ep[bal])  # assignments j < A with j mod ep == 0
        out_a[bal] = mine
        out_max[bal] = np.ceil(a / e_tot)
        out_act[bal] = np.minimum(e_loc, mine)

    law = ~bal
    if law.any():
        keys = np.stack([experts[law], topk[law], alpha[law]], axis=1)
        uniq, inv = np.unique(keys, axis=0, return_inverse=True)
        s1 = np.empty(len(uniq))
        for i, (e, k, al) in enumerate(uniq):
            s1[i] = power_law_shares(int(e), int(k), float(al))[0]
        first = s1[inv.ravel()]
        t = tokens[law]
        e_tot = experts[law].astype(np.float64)
        e_loc = local[law].astype(np.float64)
        k = topk[law].astype(np.float64)
        other = np.where(e_tot > 1, (k - first) / np.maximum(e_tot - 1, 1), 0.0)
        out_a[law] = t * (first + (e_loc - 1) * other)
        out_max[law] = t * first
        out_act[law] = (1 - (1 - first) ** t) + (e_loc - 1) * (1 - (1 - other) ** t)
    return RankLoad(out_a, out_max, out_act)
