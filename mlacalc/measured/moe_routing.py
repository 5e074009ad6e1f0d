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
* ``power_law_<alpha>``: per routing draw, every expert's load is a sample of a power law with
  exponent ``alpha`` bounded to ``[1, 0.8 * tokens]`` (``[0.01, 2]`` when
  ``tokens * k <= E``), the samples scaled to sum to ``A``, each capped at ``tokens`` (a
  token picks an expert once) with the excess spread over the others, and rounded to
  integers by largest remainders. Experts sit on ranks in contiguous blocks of
  ``E/ep``; the measured rank is the most-loaded one (the collector swaps it to rank 0). The
  loads of a row are the mean over :data:`DRAWS` draws, seeded by the row's routing key, of
  that rank's assignments, its most-loaded expert and its experts with any token. They are
  expectations, so FLOPs of these rows are not integers. With this rule the reference's MoE
  rows respect the plain roofline (the reference notes that no row beats the bandwidth or
  FLOP bounds) except 5 H100 and 40 A100 power-law rows at 16 tokens or fewer, whose
  straggler rank touches fewer experts than the rule expects (100 H100 rows before the
  mapping gave the later collector's calls whose draws all round to zero the round-robin
  loads: :mod:`mlacalc.measured.mapping`); a Zipf popularity ``i^-alpha``
  over experts would put every token on the heaviest expert at ``ep >= 64`` and make about
  1,400 H100 rows beat the roofline.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

__all__ = ["DRAWS", "ROW_TILES", "RankLoad", "power_law_draws", "rank_loads"]

#: Routing draws averaged per power-law row (the collector averages five per measurement).
DRAWS = 32

#: The row tiles (rows of an expert a grouped GEMM's output tile covers) whose expected count on
#: the measured rank :func:`rank_loads` reports for a power-law row: every row tile the MoE time
#: model takes (``moe_time._MOE_TILES``).
ROW_TILES = (8, 16, 32, 48, 64, 128, 256)


@dataclass(frozen=True)
class RankLoad:
    """Loads of the measured rank, one entry per row."""

    assignments: np.ndarray  # (token, expert) pairs the rank computes
    max_per_expert: np.ndarray  # assignments of its most-loaded expert
    active_experts: np.ndarray  # experts of the rank with at least one assignment
    #: power-law rows: the rank's row tiles of each of :data:`ROW_TILES` rows, every expert's
    #: rows padded to whole tiles (the mean over the draws of the sum over its experts of
    #: ``ceil(load / tile)``), shape (row, tile); 0 on balanced rows (their loads are whole)
    row_tiles: np.ndarray


def power_law_draws(
    tokens: int, topk: int, experts: int, alpha: float, draws: int = DRAWS
) -> np.ndarray:
    """Per-expert loads of ``draws`` power-law routing draws, shape ``(draws, experts)``:
    integers, each row summing to ``tokens * topk``, every load at most ``tokens``."""
    a = float(alpha)
    total = tokens * topk
    lo, hi = (1.0, 0.8 * tokens) if total > experts else (0.01, 2.0)
    hi = max(hi, lo * (1 + 1e-9))
    seed = [tokens, topk, experts, round(a * 1e6)]
    u = np.random.default_rng(seed).random((draws, experts))
    if abs(a - 1.0) < 1e-9:
        x = lo * (hi / lo) ** u
    else:
        x = ((hi ** (1 - a) - lo ** (1 - a)) * u + lo ** (1 - a)) ** (1 / (1 - a))
    loads = x / x.sum(axis=1, keepdims=True) * total
    for _ in range(experts):  # cap at `tokens`, the excess spread over the others
        over = np.maximum(loads - tokens, 0.0).sum(axis=1, keepdims=True)
        if not over.any():
            break
        loads = np.minimum(loads, tokens)
        room = np.where(loads < tokens, loads, 0.0)
        loads = loads + over * room / np.maximum(room.sum(axis=1, keepdims=True), 1e-300)
    # integers by largest remainders: each row sums to tokens * topk exactly
    base = np.floor(loads + 1e-9)
    short = (total - base.sum(axis=1)).astype(np.int64)
    order = np.argsort(base - loads, axis=1)
    rank = np.empty_like(order)
    np.put_along_axis(rank, order, np.arange(experts)[None, :].repeat(draws, 0), axis=1)
    return np.minimum(base + (rank < short[:, None]), tokens)


def rank_loads(
    tokens: np.ndarray, topk: np.ndarray, experts: np.ndarray, ep: np.ndarray, alpha: np.ndarray
) -> RankLoad:
    """Loads of the measured rank; ``alpha`` = 0 marks balanced (round-robin) rows."""
    tokens = tokens.astype(np.float64)
    n = tokens.shape[0]
    local = experts // ep
    out_a, out_max, out_act = np.zeros(n), np.zeros(n), np.zeros(n)
    out_tiles = np.zeros((n, len(ROW_TILES)))
    row_tile = np.array(ROW_TILES, dtype=np.float64)

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
        idx = np.nonzero(law)[0]
        a6 = np.rint(alpha[idx] * 1e6).astype(np.int64)
        t_i, k_i, e_i, p_i = (
            tokens[idx].astype(np.int64),
            topk[idx].astype(np.int64),
            experts[idx].astype(np.int64),
            ep[idx].astype(np.int64),
        )
        order = np.lexsort((p_i, a6, e_i, k_i, t_i))
        cols = np.stack([t_i, k_i, e_i, a6, p_i], axis=1)[order]
        change = np.any(cols[1:] != cols[:-1], axis=1)
        starts = np.concatenate([[0], np.nonzero(change)[0] + 1, [order.size]])
        draws_key, loads = None, None
        for s0, s1 in itertools.pairwise(starts):
            t, k, e, a_, p = (int(v) for v in cols[s0])
            if draws_key != (t, k, e, a_):
                draws_key, loads = (t, k, e, a_), power_law_draws(t, k, e, a_ / 1e6)
            per_rank = loads.reshape(loads.shape[0], p, e // p)
            top = per_rank[np.arange(loads.shape[0]), per_rank.sum(axis=2).argmax(axis=1)]
            sel = idx[order[s0:s1]]
            out_a[sel] = top.sum(axis=1).mean()
            out_max[sel] = top.max(axis=1).mean()
            out_act[sel] = (top > 0).sum(axis=1).mean()
            out_tiles[sel] = np.ceil(top[:, :, None] / row_tile).sum(axis=1).mean(axis=0)
    return RankLoad(out_a, out_max, out_act, out_tiles)
