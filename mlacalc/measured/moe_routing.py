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
from functools import cache

import numpy as np

__all__ = [
    "DRAWS",
    "GROUPED_ROUTING",
    "ROW_TILES",
    "RankLoad",
    "grouped_balanced_loads",
    "grouped_rank_loads",
    "power_law_draws",
    "rank_loads",
]

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
    integers, each row summing to ``tokens * topk``, every load at most ``tokens``. Kept per
    call for the process (a copy returned): every expert-parallel split of a call, and its
    straggler and grouped routing, draw the same loads."""
    return _draws(int(tokens), int(topk), int(experts), float(alpha), int(draws)).copy()


@cache
def _draws(tokens: int, topk: int, experts: int, alpha: float, draws: int) -> np.ndarray:
    """:func:`power_law_draws` of one call, computed once."""
    a = alpha
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
    out = np.minimum(base + (rank < short[:, None]), tokens)
    out.flags.writeable = False
    return out


def rank_loads(
    tokens: np.ndarray, topk: np.ndarray, experts: np.ndarray, ep: np.ndarray, alpha: np.ndarray
) -> RankLoad:
    """Loads of the measured rank; ``alpha`` = 0 marks balanced (round-robin) rows."""
    tokens = tokens.astype(np.float64)
    n = tokens.shape[0]
    local = experts // ep
    out_a, out_max, out_act = np.zeros(n), np.zeros(n), np.zeros(n)
    out_tiles = np.zeros((n, len(ROW_TILES)))

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
        keys = [tuple(c) for c in cols[starts[:-1]].tolist()]
        _straggler_batch([k for k in keys if k not in _STRAGGLER])
        for (s0, s1), key in zip(itertools.pairwise(starts), keys, strict=True):
            sel = idx[order[s0:s1]]
            a_, m_, act_, tiles_ = _STRAGGLER[key]
            out_a[sel], out_max[sel], out_act[sel], out_tiles[sel] = a_, m_, act_, tiles_
    return RankLoad(out_a, out_max, out_act, out_tiles)


#: :func:`_straggler_loads` of every call met so far, kept for the process: the same calls
#: recur in every table of the collector's sweep (each engine's, each device's)
_STRAGGLER: dict[tuple[int, int, int, int, int], tuple] = {}
#: elements of the row-tile array one batch of :func:`_straggler_batch` may hold
_BATCH_ELEMENTS = 1 << 21


def _straggler_batch(keys: list[tuple[int, int, int, int, int]]) -> None:
    """:func:`_straggler_loads` of each of ``keys`` into :data:`_STRAGGLER`, the calls of one
    expert count and EP at once (speed only, the same figures: every load is a whole number,
    so each sum below is exact in any order, as the mean of :func:`_mean_loads` is)."""
    by_split: dict[tuple[int, int], list] = {}
    for key in keys:
        by_split.setdefault((key[2], key[4]), []).append(key)
    for (e, p), group in by_split.items():
        local = e // p
        step = max(1, _BATCH_ELEMENTS // (DRAWS * e))
        for i in range(0, len(group), step):
            chunk = group[i : i + step]
            loads = np.stack([_draws(t, k, e, a6 / 1e6, DRAWS) for t, k, _, a6, _ in chunk])
            per_rank = loads.reshape(len(chunk), DRAWS, p, local)
            top = per_rank.sum(axis=3).argmax(axis=2)
            mine = np.take_along_axis(per_rank, top[:, :, None, None], axis=2)[:, :, 0, :]
            # one row tile at a time through one buffer (a (call, draw, expert, tile) array
            # took six times as long)
            tiles, part = np.empty((len(chunk), len(ROW_TILES))), np.empty(mine.shape)
            for col, tile in enumerate(ROW_TILES):
                np.ceil(np.divide(mine, float(tile), out=part), out=part)
                tiles[:, col] = part.sum(axis=2).sum(axis=1)
            tiles /= DRAWS
            assigned = mine.sum(axis=2).sum(axis=1) / DRAWS
            most = mine.max(axis=2).sum(axis=1) / DRAWS
            active = (mine > 0).sum(axis=2).sum(axis=1) / DRAWS
            for j, key in enumerate(chunk):
                row = tiles[j].copy()
                row.flags.writeable = False
                _STRAGGLER[key] = (float(assigned[j]), float(most[j]), float(active[j]), row)


@cache
def _straggler_loads(t: int, k: int, e: int, a6: int, p: int) -> tuple:
    """The most-loaded rank's mean assignments, most-loaded expert's assignments, experts with
    any token and row tiles of each of :data:`ROW_TILES` over the :data:`DRAWS` power-law
    draws of a call (``a6``: the exponent times 10^6), call by call: :func:`rank_loads` takes
    the same figures from :func:`_straggler_batch`, many calls at once."""
    loads = power_law_draws(t, k, e, a6 / 1e6)
    per_rank = loads.reshape(loads.shape[0], p, e // p)
    top = per_rank[np.arange(loads.shape[0]), per_rank.sum(axis=2).argmax(axis=1)]
    return _mean_loads(top)


def _mean_loads(mine: np.ndarray) -> tuple:
    """Of a rank's per-draw expert loads ``mine`` (shape ``(draws, local experts)``): the mean
    over the draws of its assignments, of its most-loaded expert's, of its experts with any,
    and of its row tiles of each of :data:`ROW_TILES` (every expert padded on its own)."""
    # sums over the draws divided by their count: the same figures as ``mean`` (numpy's mean
    # is that sum and division), without its per-call overhead
    draws = mine.shape[0]
    tiles = np.ceil(mine[:, :, None] / _ROW_TILE).sum(axis=1).sum(axis=0) / draws
    tiles.flags.writeable = False
    return (
        float(mine.sum(axis=1).sum() / draws),
        float(mine.max(axis=1).sum() / draws),
        float((mine > 0).sum(axis=1).sum() / draws),
        tiles,
    )


_ROW_TILE = np.array(ROW_TILES, dtype=np.float64)


#: (hidden, intermediate, experts, top-k) of the MoE shapes whose SGLang and vLLM ``moe_perf``
#: rows route with group-limited top-k, with (groups, groups kept): DeepSeek-V3's (its router
#: keeps the top 4 of 8 groups of 32 experts, each scored by its two best experts, then the
#: top-8 experts of those groups). Read from the tables, not a collector's source: their
#: balanced rows of this shape alone take at EP 2 the time of EP 1 (docs/time-model.md, "A
#: balanced row under DeepSeek-V3's grouped routing")
GROUPED_ROUTING = {(7168, 2048, 256, 8): (8, 4)}


def _balanced_picks(tokens: int, topk: int, experts: int) -> np.ndarray:
    """The experts the collector's balanced logits single out for each token, shape
    ``(tokens, topk)``: a stride of ``ceil(E / k)`` between a token's experts, token ``t``
    starting at ``t`` (or at ``floor(t * stride / tokens)`` while the tokens are fewer than the
    stride), as recalled of the collector (no copy of it ships with the tables)."""
    stride = -(-experts // topk)
    t = np.arange(tokens, dtype=np.int64)[:, None]
    i = np.arange(topk, dtype=np.int64)[None, :]
    start = t if tokens >= stride else (t * stride) // tokens
    return (start + i * stride) % experts


def _power_law_picks(loads: np.ndarray, topk: int, ep: int) -> tuple[np.ndarray, np.ndarray]:
    """The experts the collector's power-law logits single out for each token, shape
    ``(tokens, topk)``, from one draw's per-expert ``loads``: the most-loaded rank's block of
    experts swapped with rank 0's, every expert listed ``load`` times from the most loaded
    down, the list read as ``topk`` rows of ``tokens`` (token ``t``'s ``i``-th expert at ``i x
    tokens + t``), as recalled of the collector (no copy of it ships with the tables); with
    the count of tokens of each row of picks."""
    experts = loads.shape[0]
    blocks = loads.reshape(ep, experts // ep).copy()
    top = int(blocks.sum(axis=1).argmax())
    blocks[[0, top]] = blocks[[top, 0]]
    loads = blocks.reshape(experts).astype(np.int64)
    order = np.argsort(-loads, kind="stable")
    ends = np.cumsum(loads[order])  # the list's position after each expert's run
    tokens = int(ends[-1]) // topk
    # tokens between two changes of the list in any of its rows share their picks: one row of
    # picks for each run of tokens, with the run's length
    starts = np.unique(np.concatenate([[0], ends[:-1] % tokens]))
    at = np.arange(topk)[None, :] * tokens + starts[:, None]
    picks = order[np.searchsorted(ends, at, side="right")]
    return picks, np.diff(np.append(starts, tokens))


def _power_law_picks_of_draws(
    loads: np.ndarray, topk: int, ep: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_power_law_picks` of every draw of ``loads`` (shape ``(draws, experts)``) at
    once (speed only, the same picks): the rows of picks of draw 0, then draw 1 ..., their
    token counts, and each row's draw."""
    draws, experts = loads.shape
    drawn = loads
    blocks = loads.reshape(draws, ep, experts // ep).copy()
    line = np.arange(draws)
    top = blocks.sum(axis=2).argmax(axis=1)
    first = blocks[line, 0].copy()
    blocks[line, 0] = blocks[line, top]
    blocks[line, top] = first
    loads = blocks.reshape(draws, experts).astype(np.int64)
    order = np.argsort(-loads, axis=1, kind="stable")
    ends = np.cumsum(np.take_along_axis(loads, order, axis=1), axis=1)
    total = int(ends[0, -1])
    tokens = total // topk
    if tokens <= 0 or (ends[:, -1] != total).any():  # draws of other sums: one by one
        picked = [_power_law_picks(d, topk, ep) for d in drawn]
        draw = np.repeat(np.arange(draws), [len(c) for _, c in picked])
        return (np.concatenate([q for q, _ in picked]), np.concatenate([c for _, c in picked]),
                draw)  # fmt: skip
    starts = np.concatenate([np.zeros((draws, 1), dtype=np.int64), ends[:, :-1] % tokens], axis=1)
    # each draw's distinct starts, draw by draw: one sort of (draw, start)
    keys = np.sort((line[:, None] * tokens + starts).ravel())
    keys = keys[np.append(True, keys[1:] != keys[:-1])]
    draw, starts = keys // tokens, keys % tokens
    at = np.arange(topk)[None, :] * tokens + starts[:, None]
    # every draw's list end to end, each shifted past the one before (its values at most
    # ``total``): one search finds each draw's positions within its own list
    shift = total + 1
    pos = np.searchsorted((ends + (line * shift)[:, None]).ravel(),
                          at + (draw * shift)[:, None], side="right")  # fmt: skip
    picks = order.ravel()[pos]
    nxt = np.append(starts[1:], tokens)
    nxt[np.append(draw[1:] != draw[:-1], True)] = tokens
    return picks, nxt - starts, draw


def _grouped_routed(
    picks: np.ndarray, count: np.ndarray, experts: int, groups: int, kept: int,
    draw: np.ndarray | None = None, draws: int = 1,
) -> np.ndarray:  # fmt: skip
    """Every expert's assignments when logits singling out ``picks`` (the picked experts score
    high, every other expert the same low score) go through group-limited top-k: each group
    scored by its two best experts, the ``kept`` best groups taken (ties to the lower index),
    then the ``topk`` best experts of those groups: the picked ones there, the rest filled by
    the lowest-index experts of those groups (ties to the lower index); ``count`` tokens have
    each row of picks. Shape ``(experts,)``; with ``draw`` (each row's draw, below ``draws``)
    the rows of several draws are routed at once, shape ``(draws, experts)``."""
    tokens, topk = picks.shape
    size = experts // groups
    srt = np.sort(picks, axis=1)
    if size >= 2 * topk and not (srt[:, 1:] == srt[:, :-1]).any():
        return _grouped_routed_sparse(picks, count, experts, groups, kept, draw, draws)
    hot = np.zeros((tokens, experts), dtype=bool)
    np.put_along_axis(hot, picks, True, axis=1)
    # a group's score: its two best experts, picked ones first (a stable sort keeps the lower
    # group first among equals)
    score = np.minimum(hot.reshape(tokens, groups, size).sum(axis=2), 2)
    order = np.argsort(-score, axis=1, kind="stable")[:, :kept]
    allowed = np.zeros((tokens, groups), dtype=bool)
    np.put_along_axis(allowed, order, True, axis=1)
    allowed = np.repeat(allowed, size, axis=1)
    # the best experts of the kept groups: picked before unpicked, lower index first. The keys
    # of the kept groups' experts are distinct and at least ``topk`` of them lie below every
    # other group's, so the ``topk`` smallest are one set, whatever order a partition leaves
    index = np.arange(experts, dtype=np.int32)[None, :]
    key = np.where(allowed, np.where(hot, index, index + experts), np.int32(2 * experts))
    chosen = np.argpartition(key, topk - 1, axis=1)[:, :topk]
    weights = np.repeat(count, topk).astype(np.float64)
    if draw is None:
        return np.bincount(chosen.ravel(), weights=weights, minlength=experts)
    at = (chosen + (draw * experts)[:, None]).ravel()
    return np.bincount(at, weights=weights, minlength=draws * experts).reshape(draws, experts)


def _grouped_routed_sparse(
    picks: np.ndarray, count: np.ndarray, experts: int, groups: int, kept: int,
    draw: np.ndarray | None, draws: int,
) -> np.ndarray:  # fmt: skip
    """:func:`_grouped_routed` of rows of distinct picks in groups of at least twice ``topk``
    experts, without a row of every expert (speed only, the same loads): every picked expert of
    a kept group is chosen (a row has ``topk`` picks), and the rest are the lowest-index unpicked
    experts of the lowest kept group, which has more unpicked experts among its first ``2 x
    topk`` than any row needs. The weights are whole counts, so their sums are exact in any
    order."""
    rows, topk = picks.shape
    size = experts // groups
    group = picks // size
    line = np.arange(rows)[:, None]
    score = np.bincount((line * groups + group).ravel(), minlength=rows * groups)
    order = np.argsort(-np.minimum(score.reshape(rows, groups), 2), axis=1, kind="stable")
    allowed = np.zeros((rows, groups), dtype=bool)
    np.put_along_axis(allowed, order[:, :kept], True, axis=1)
    mine = np.take_along_axis(allowed, group, axis=1)  # picks of a kept group
    need = topk - mine.sum(axis=1)
    first = allowed.argmax(axis=1)[:, None] * size
    fill = first + np.arange(2 * topk)[None, :]
    # the picks among those candidates: not free
    rel = picks - first
    near = (rel >= 0) & (rel < 2 * topk)
    free = np.ones((rows, 2 * topk), dtype=bool)
    free[np.broadcast_to(line, rel.shape)[near], rel[near]] = False
    take = free & (np.cumsum(free, axis=1) <= need[:, None])
    off = np.zeros(rows, dtype=np.int64) if draw is None else draw * experts
    at = np.concatenate([(picks + off[:, None])[mine], (fill + off[:, None])[take]])
    weights = np.concatenate(
        [np.broadcast_to(count[:, None], mine.shape)[mine],
         np.broadcast_to(count[:, None], take.shape)[take]]
    ).astype(np.float64)  # fmt: skip
    n = 1 if draw is None else draws
    out = np.bincount(at, weights=weights, minlength=n * experts)
    return out if draw is None else out.reshape(draws, experts)


def grouped_balanced_loads(
    tokens: int, topk: int, experts: int, groups: int, kept: int
) -> np.ndarray:
    """Every expert's assignments when the balanced logits (:func:`_balanced_picks`) go through
    group-limited top-k (:func:`_grouped_routed`). Shape ``(experts,)``, summing to ``tokens x
    topk``."""
    return _grouped_balanced(int(tokens), int(topk), int(experts), int(groups), int(kept)).copy()


@cache
def _grouped_balanced(tokens: int, topk: int, experts: int, groups: int, kept: int) -> np.ndarray:
    """:func:`grouped_balanced_loads` of one call, kept for the process (every
    expert-parallel split of a call routes the same logits)."""
    picks, count = np.unique(_balanced_picks(tokens, topk, experts), axis=0, return_counts=True)
    out = _grouped_routed(picks, count, experts, groups, kept)
    out.flags.writeable = False
    return out


def grouped_rank_loads(
    tokens: np.ndarray,
    topk: np.ndarray,
    experts: np.ndarray,
    ep: np.ndarray,
    groups: np.ndarray,
    kept: np.ndarray,
    alpha: np.ndarray,
) -> RankLoad:
    """The measured rank's loads under group-limited top-k: balanced rows (``alpha`` 0) from
    the balanced logits (:func:`grouped_balanced_loads`), power-law rows the mean over the
    :data:`DRAWS` draws of :func:`power_law_draws` of each draw's logits
    (:func:`_power_law_picks`) routed (:func:`_grouped_routed`). The rank holds the first ``E /
    ep`` experts (rank 0's block, where the collector swapped the most-loaded rank of the
    draws before routing). Row tiles are the count of each of :data:`ROW_TILES`, every
    expert's rows padded on its own."""
    n = len(tokens)
    out_a, out_max, out_act = np.zeros(n), np.zeros(n), np.zeros(n)
    out_tiles = np.zeros((n, len(ROW_TILES)))
    columns = [np.asarray(c).astype(np.int64).tolist() for c in (tokens, topk, experts, groups)]
    columns += [np.asarray(kept).astype(np.int64).tolist(), np.asarray(alpha, float).tolist()]
    columns.append(np.asarray(ep).astype(np.int64).tolist())
    rows_of: dict[tuple, list[int]] = {}
    for r, key in enumerate(zip(*columns, strict=True)):
        rows_of.setdefault(key, []).append(r)
    for key, rows in rows_of.items():
        out_a[rows], out_max[rows], out_act[rows], out_tiles[rows] = _grouped_rank_key(*key)
    return RankLoad(out_a, out_max, out_act, out_tiles)


@cache
def _grouped_rank_key(t: int, k: int, e: int, g: int, gk: int, a: float, p: int) -> tuple:
    """:func:`grouped_rank_loads` of one call (rank 0's block of ``e / p`` experts), as
    :func:`_mean_loads` gives them; kept per call for the process (the same calls recur in
    each engine's and each device's tables)."""
    if a > 0:
        loads = power_law_draws(t, k, e, a)
        picks, count, draw = _power_law_picks_of_draws(loads, k, p)
        routed = _grouped_routed(picks, count, e, g, gk, draw, loads.shape[0])
    else:
        routed = grouped_balanced_loads(t, k, e, g, gk)[None, :]
    return _mean_loads(routed[:, : e // p])
