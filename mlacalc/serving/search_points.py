"""The points of a search, from its timed candidates: each layout's prefill pools (the Pareto
set per GPU count, dtypes and overlap), then per candidate and overlap one aggregated point
per batch and one disaggregated point per batch and prefill pool that keeps up, each timed as
:func:`mlacalc.plan` times its deployment.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mlacalc.serving.comm import kv_transfer
from mlacalc.serving.disaggregated import pool_wait, prefill_pool_seconds
from mlacalc.serving.figures import chunk_hold, chunked_figures, in_progress, others_share
from mlacalc.serving.gpu_step import StepModel, StepTimes
from mlacalc.serving.layout import Layout, kv_bytes_per_sequence_per_gpu
from mlacalc.serving.ranks import synced_prompts
from mlacalc.serving.search_space import Candidate, SearchRequest, pool_passes
from mlacalc.words import defaults

__all__ = ["SETTLES", "Points", "PrefillPool", "evaluate", "prefill_pools", "settles"]

PoolKey = tuple[int, str, str, str]

#: The reason of a disaggregated batch that plan's closed loop does not reach
SETTLES = "disaggregated: its requests in flight settle at a smaller batch"


@dataclass(frozen=True, eq=False)
class PrefillPool:
    """A layout as a prefill pool: the prompts/s it finishes (passes of its most prompts),
    ``t_pf[k]`` a pass of ``k`` prompts, and its step model (its layout)."""

    rate: float
    t_pf: np.ndarray
    sm: StepModel
    #: its weights a GPU and one prompt's cache there (what its launch lines' memory setting
    #: is converted by: TensorRT-LLM's share is of what each pool's weights leave)
    weights: int = 0
    prompt_bytes: int = 0
    #: a token's cache on one of its GPUs
    per_token: int = 0

    def fields(self) -> dict[str, Any]:
        """The pool's layout as a point reports it (so that plan reproduces it), and its
        weights and one prompt's cache a GPU."""
        lay = self.sm.lay
        return {
            "prefill_layout": lay.describe(),
            "prefill_tp": lay.tp,
            "prefill_ep": lay.ep,
            "prefill_dp_attention": lay.dp_attention,
            "prefill_redundant_experts": lay.redundant_experts,
            "prefill_weights_per_gpu_bytes": self.weights,
            "prefill_kv_per_prompt_bytes": self.prompt_bytes,
            "prefill_kv_per_token_bytes": self.per_token,
        }


@dataclass
class Points:
    """The points found so far, each with the step models that time it (its decode pool's and
    the one that runs its prompts), the layouts timed and the reasons of the batches that
    make no point."""

    points: list[dict[str, Any]]
    models: list[tuple[StepModel, StepModel]]
    layouts: int
    reasons: Counter[str]
    #: per disaggregated point (by id), what checks it against the whole batches below it:
    #: its decode candidate, overlap, prefill pool and KV transfer (:func:`settles`)
    pending: dict[int, tuple] = field(default_factory=dict)

    def add(self, point: dict[str, Any], dec_sm: StepModel, pf_sm: StepModel) -> None:
        self.models.append((dec_sm, pf_sm))
        self.points.append(point)

    def drop(self, gone: list[dict[str, Any]]) -> None:
        """Remove ``gone`` (points plan settles elsewhere, :func:`settles`), counted in the
        reasons."""
        ids = {id(p) for p in gone}
        kept = [(p, m) for p, m in zip(self.points, self.models) if id(p) not in ids]
        self.points[:] = [p for p, _ in kept]
        self.models[:] = [m for _, m in kept]
        for p in gone:
            self.pending.pop(id(p), None)
        self.reasons[SETTLES] += len(gone)


def composed(req: SearchRequest, c: Candidate, t: Any, ov: str, what: str) -> StepTimes:
    """The steps of the candidate's rows ``what`` under overlap ``ov``, summed from its
    kernels' times ``t``; candidates sharing their kernels (replicas, see
    :func:`mlacalc.serving.search_space.candidate`) share them (their times are the
    same: :func:`mlacalc.serving.search_space.time_candidates`)."""
    sl = c.slices[(ov, what)]
    key = ("composed", id(c.specs), ov)
    if key not in req.step_cache:  # every row at once (each row's sum is its own)
        req.step_cache[key] = c.sm.compose(c.specs, t, ov, slice(None), breakdown=False)
    whole = req.step_cache[key]
    return StepTimes(
        whole.seconds[sl], whole.stage_seconds[sl], whole.compute_s[sl], whole.comm_s[sl], []
    )


def prefill_pools(
    req: SearchRequest, cands: list[Candidate], secs: list[Any]
) -> dict[PoolKey, list[PrefillPool]]:
    """Per GPU count, weight and KV dtype and overlap, every layout that no other beats on
    both prompts/s and a one-prompt pass ``t_pf[1]`` (the Pareto set: the most prompts/s
    keeps up with the most decode, a short pass gives the shortest TTFT), most prompts/s
    first."""
    rated: dict[PoolKey, list[PrefillPool]] = {}
    for c, t in zip(cands, secs):
        for ov in req.overlaps:
            sl = c.slices.get((ov, "prefill"))
            if sl is None:
                continue
            passes = composed(req, c, t, ov, "prefill").seconds
            ks = np.arange(1.0, c.k_fit + 1)
            t_pf = np.concatenate([[0.0], np.interp(ks, pool_passes(c.k_fit), passes)])
            rate = c.lay.dp * c.k_fit / t_pf[c.k_fit]  # k_fit: plan's k_max
            key = (c.gpus, c.weight, c.kv, ov)
            prompt = kv_bytes_per_sequence_per_gpu(
                req.m, c.kv_layout, c.lay, req.isl, req.page_size
            )
            pool = PrefillPool(float(rate), t_pf, c.sm, c.weights, prompt, c.per_token)
            rated.setdefault(key, []).append(pool)
    pools: dict[PoolKey, list[PrefillPool]] = {}
    for key, rivals in rated.items():
        best_t1 = math.inf
        # most prompts/s first (the shorter pass first among equals): a layout joins the set
        # when its one-prompt pass is shorter than every faster layout's
        for pool in sorted(rivals, key=lambda p: (-p.rate, p.t_pf[1])):
            if pool.t_pf[1] < best_t1:
                pools.setdefault(key, []).append(pool)
                best_t1 = pool.t_pf[1]
    if req.budget is not None:
        _across_counts(pools)
    return pools


def _across_counts(pools: dict[PoolKey, list[PrefillPool]]) -> None:
    """Under a budget, drop a pool that one of no more GPUs (same dtypes and overlap) beats
    on both prompts/s and the one-prompt pass: it takes more of the budget for no gain."""
    kept: dict[tuple[str, str, str], list[PrefillPool]] = {}
    for key in sorted(pools):
        mine = kept.setdefault(key[1:], [])
        fewer = list(mine)  # pools of fewer GPUs
        pools[key] = [
            p
            for p in pools[key]
            if not any(q.rate >= p.rate and q.t_pf[1] <= p.t_pf[1] for q in fewer)
        ]
        mine.extend(pools[key])


def evaluate(
    req: SearchRequest,
    cands: list[Candidate],
    secs: list[Any],
    pools: dict[PoolKey, list[PrefillPool]],
    reasons: Counter[str],
) -> Points:
    """Every point of the timed candidates (``secs``: their rows' times), in order."""
    found = Points([], [], 0, reasons)
    for c, t in zip(cands, secs):
        if not len(c.Bf):
            continue
        context_bytes = (c.Bf * c.per_seq + c.shared).astype(np.int64)
        for ov in c.overlaps:
            found.layouts += 1
            dec = composed(req, c, t, ov, "dec")
            t_step = c.lay.pp * dec.stage_seconds
            base = _base(c, ov)
            if "aggregated" in req.modes and (ov, "mix") in c.slices:
                _aggregated(found, req, c, t, ov, t_step, base, context_bytes)
            if "disaggregated" in req.modes:
                _disaggregated(found, req, c, pools, ov, t_step, base, context_bytes)
    return found


def _base(c: Candidate, ov: str) -> dict[str, Any]:
    """The fields a candidate's points share under overlap ``ov``."""
    lay = c.lay
    return {
        "layout": lay.describe(),
        "tp": lay.tp,
        "dp": lay.dp,
        "pp": lay.pp,
        "ep": lay.ep,
        "redundant_experts": lay.redundant_experts,
        "dp_attention": lay.dp_attention,
        "overlap": ov,
        "weight_dtype": c.weight_dtype,
        "weight_format": c.label,
        "component_dtypes": dict(c.components),
        "kv_dtype": c.kv,
        "chunked_prefill": None,
        "weights_per_gpu_bytes": c.weights,
        "kv_per_token_bytes": c.per_token,
        "fits": True,
    }


def _aggregated(
    found: Points,
    req: SearchRequest,
    c: Candidate,
    t: Any,
    ov: str,
    t_step: np.ndarray,
    base: dict[str, Any],
    context_bytes: np.ndarray,
) -> None:
    """One aggregated point per batch: a share of the steps carries prompts beside the
    decode batch (``k`` on the slowest synced group), a prompt waits half a step, then its
    own."""
    lay = c.lay
    mix = composed(req, c, t, ov, "mix")
    t_mix = lay.pp * mix.stage_seconds
    if req.prefill_pass == "separate":  # the prompts' pass, then the decode pass
        t_mix = t_step + mix.seconds
    share = c.share  # of the steps that carry prompts (the synced groups' together)
    cycle = (1 - share) * t_step + share * t_mix
    # one request's view, as plan's (mlacalc.serving.figures.others_share): the others'
    # prompts between its tokens and before its own step; alone, its prompt at once
    ratio, busy = others_share(c.Bf, c.groups, c.Bf)
    gap = t_step + (cycle - t_step) * ratio
    busy_ttft = in_progress(t_step, t_mix, share * ratio) + t_mix
    alone = float(composed(req, c, t, ov, "alone").seconds[0])
    alone = alone + (t_step if req.prefill_pass == "separate" else 0.0)
    ttft_s = busy * busy_ttft + (1 - busy) * alone + req.output_lag_steps * cycle
    for i in range(len(c.Bf)):
        point = (float(cycle[i]), float(gap[i]), float(ttft_s[i]))
        _aggregated_point(found, c, base, i, *point, context_bytes, req.osl)
    for i, (cycle_c, gap_c, ttft_c, n) in _chunked(req, c, t, ov, t_step):
        point = _aggregated_point(found, c, base, i, cycle_c, gap_c, ttft_c, context_bytes, req.osl)
        point["chunked_prefill"] = n


def _aggregated_point(
    found: Points,
    c: Candidate,
    base: dict[str, Any],
    i: int,
    cycle: float,
    gap: float,
    ttft_s: float,
    context_bytes: np.ndarray,
    osl: int,
) -> dict[str, Any]:
    """The aggregated point of batch ``i`` with its cycle (the mean step), the step between
    two tokens of a request (TPOT) and TTFT."""
    lay, g, b = c.lay, c.gpus, c.Bf[i]
    # a closed loop of the batch's requests, each making osl tokens in its latency, TTFT and
    # osl - 1 gaps (Little's law, as plan's: mlacalc.serving.figures.step_figures)
    total = float(lay.dp * b * osl / (ttft_s + (osl - 1) * gap))
    point = {
        **base,
        "gpus": g,
        "mode": "aggregated",
        "decode_gpus": g,
        "prefill_gpus": 0,
        "prefill_layout": None,  # no prefill pool: every point has the same keys
        "prefill_tp": None,
        "prefill_ep": None,
        "prefill_dp_attention": None,
        "prefill_redundant_experts": None,
        "prefill_weights_per_gpu_bytes": None,
        "prefill_kv_per_prompt_bytes": None,
        "prefill_kv_per_token_bytes": None,
        "batch_per_group": int(b),
        "concurrency": float(b * lay.dp),  # one type: disaggregated counts are fractional
        "ttft_s": ttft_s,
        "tpot_s": gap,
        "output_tokens_per_s": total,
        "output_tokens_per_s_per_gpu": total / g,
        "output_tokens_per_s_per_user": 1.0 / gap,
        "kv_per_gpu_bytes": int(context_bytes[i]),
        # a shared prefix's pages, held once per group (a key only with one)
        **({"kv_shared_prefix_bytes": c.shared} if c.shared else {}),
    }
    found.add(point, c.sm, c.sm)
    return point


def _chunked(
    req: SearchRequest, c: Candidate, t: Any, ov: str, t_step: np.ndarray
) -> list[tuple[int, tuple[float, float, float, int]]]:
    """The candidate's chunked-prefill points (batch, cycle, TPOT, TTFT, token budget), as plan
    times them (:func:`mlacalc.serving.figures.chunked_figures`: the decode steps and the
    prompts' chunk steps, or every step at full load; TTFT, the wait and the prompt's own
    chunk steps). Per batch, only the budgets no other beats on TPOT and TTFT together
    (tokens/s follows from them, Little's law)."""
    lay = c.lay
    per_batch: dict[int, list[tuple[float, float, int]]] = {}
    if not c.chunked:
        return []
    stage = lay.pp * composed(req, c, t, ov, "chunked").stage_seconds
    for n, ch in c.chunked.items():
        own = np.bincount(ch.owner, weights=stage[ch.own : ch.end], minlength=len(ch.batches))
        fluid = stage[ch.first : ch.own]
        steps = t_step[ch.batches]
        hold = chunk_hold(ch.chunk, req.computed_tokens)  # plan's: the chunks' tokens
        cycle, _ = chunked_figures(ch.n, ch.steps, ch.share, steps, fluid, own, hold)
        # one request's view (others_share), as plan's
        B = c.Bf[ch.batches]
        ratio, busy = others_share(B, c.groups, B)
        share_o = synced_prompts(ch.n * ratio * ch.steps, c.groups, 1)[1]
        gap, ttft = chunked_figures(ch.n * ratio, ch.steps, share_o, steps, fluid, own, hold)
        ttft = busy * (ttft - own) + own + req.output_lag_steps * cycle
        for j, i in enumerate(ch.batches.tolist()):
            figures = (float(cycle[j]), float(gap[j]), float(ttft[j]), n)
            per_batch.setdefault(i, []).append(figures)
    out = []
    for i, options in sorted(per_batch.items()):
        for o in options:
            beaten = any(
                all(a <= b for a, b in zip(x[1:3], o[1:3]))
                and (x[1:3] != o[1:3] or k < options.index(o))
                for k, x in enumerate(options)
                if x is not o
            )
            if not beaten:
                out.append((i, o))
    return out


def _pool_stack(
    req: SearchRequest, g: int, key: tuple[str, str, str], pools: dict[PoolKey, list[PrefillPool]]
) -> tuple[list[tuple[int, PrefillPool]], np.ndarray, ...]:
    """The prefill pools a decode pool of ``g`` GPUs pairs with (dtypes and overlap ``key``;
    of the GPU counts given, within the largest), in order, with their passes stacked: one
    row per pool of ``t_pf`` (padded with infinite passes), its prompts per second at each
    pass size, its largest pass, its groups and its prompt rate. Every decode pool of ``g``
    GPUs and those dtypes pairs with the same (kept per search)."""
    cache_key = ("pools", g, key)
    if cache_key in req.step_cache:
        return req.step_cache[cache_key]
    largest = max(req.gpus)
    order = [
        (pg, pool)
        for pg in sorted(req.gpus)
        if g + pg <= largest
        for pool in pools.get((pg, *key), ())
    ]
    width = max((len(pool.t_pf) for _, pool in order), default=1)
    t_pf = np.full((len(order), width), np.inf)
    for row, (_, pool) in enumerate(order):
        t_pf[row, : len(pool.t_pf)] = pool.t_pf
    per_s = np.arange(1.0, width) / t_pf[:, 1:]  # a pass of k prompts: k / t_pf[k] (inf: 0)
    k_max = np.array([len(pool.t_pf) - 1 for _, pool in order], dtype=np.int64)
    groups = np.array([pool.sm.lay.dp for _, pool in order], dtype=np.float64)
    rate = np.array([pool.rate for _, pool in order], dtype=np.float64)
    out = (order, t_pf, per_s, k_max, groups, rate)
    req.step_cache[cache_key] = out
    return out


def _pairings(
    req: SearchRequest,
    c: Candidate,
    pools: dict[PoolKey, list[PrefillPool]],
    ov: str,
    demand: np.ndarray,
    base: dict[str, Any],
) -> tuple[list[tuple], np.ndarray]:
    """The candidate's decode pool with every prefill pool (of the GPU counts given, each of
    its Pareto set of layouts) that keeps up with ``demand`` prompts/s at some batch, timed
    as plan times it (see :mod:`mlacalc.serving.plan`): of the passes that keep up with the
    prompts on a prefill group, the one with the shortest wait for the pass in progress (rho
    t_pf / 2) and pass together, as
    :func:`mlacalc.serving.disaggregated.prefill_pool_pass` has them, for all pools at once.
    Also the batches only a smaller one holds (no steady state of a closed loop)."""
    g, lay = c.gpus, c.lay
    order, t_pf, per_s, k_max, groups, rate = _pool_stack(req, g, (c.weight, c.kv, ov), pools)
    settled = np.zeros(len(c.Bf), dtype=bool)
    if not order:
        return [], settled
    keeps = rate[:, None] >= demand[None, :]  # pools x batches
    d = demand[None, :] / groups[:, None]  # prompts/s on one prefill group
    up = per_s[:, None, :] >= d[:, :, None]
    # of the passes that keep up, the one with the shortest wait and pass together
    ks = np.arange(1.0, t_pf.shape[1])
    with np.errstate(invalid="ignore"):  # padded passes: inf / inf
        rho_k = np.minimum(d[:, :, None] * t_pf[:, None, 1:] / ks, 1.0)
        spent = t_pf[:, None, 1:] + pool_wait(rho_k, t_pf[:, None, 1:], False)
    spent = np.where(up, spent, np.inf)
    k = np.where(up.any(axis=2), spent.argmin(axis=2) + 1, k_max[:, None])
    t_k = np.take_along_axis(t_pf, k, axis=1)
    rho = np.minimum(d * t_k / k, 1.0)
    # a prompt's cache sent to the decode pool: the ranks' shares in parallel, over the link
    # the two pools share (mlacalc.serving.comm.kv_transfer)
    transfer = np.array([_transfer(req, c, pool.sm.lay) for _, pool in order])[:, None]
    ttft = t_k + pool_wait(rho, t_k, False) + transfer
    # the requests in flight: the decode batch and, at the request rate, those in the
    # prefill pool and the KV transfer (Little's law), as plan's closed loop counts them
    in_flight = lay.dp * c.Bf[None, :] + demand[None, :] * ttft
    # a batch whose requests in flight a smaller batch already reaches is no steady state
    # of the closed loop: with that many users it settles at the smaller batch, as plan
    # solves it (near a larger pass, the shorter wait can hold fewer requests in flight at
    # a larger batch)
    before = np.maximum.accumulate(in_flight, axis=1)[:, :-1]
    record = in_flight > np.concatenate([np.full((len(order), 1), -np.inf), before], axis=1)
    live = keeps.any(axis=1)
    settled = (keeps & ~record & live[:, None]).any(axis=0)
    keeps &= record
    pairs = []
    for row in np.flatnonzero(live).tolist():
        pg, pool = order[row]
        head = {
            **base,
            "mode": "disaggregated",
            "gpus": g + pg,
            "decode_gpus": g,
            "prefill_gpus": pg,
            **pool.fields(),
        }
        pairs.append(
            (
                g + pg,
                keeps[row].tolist(),
                ttft[row].tolist(),
                pool,
                head,
                in_flight[row],
                float(transfer[row, 0]),
            )
        )
    return pairs, settled


def _transfer(req: SearchRequest, c: Candidate, p_lay: Layout) -> float:
    """Seconds of one prompt's KV transfer from a prefill pool of ``p_lay`` to ``c``'s decode
    pool (cached per pair of layouts)."""
    key = ("transfer", c.kv, p_lay, c.lay)
    if key not in req.step_cache:
        req.step_cache[key] = kv_transfer(req.hw, req.m, c.kv_layout, p_lay, c.lay, req.isl).seconds
    return req.step_cache[key]


def _disaggregated(
    found: Points,
    req: SearchRequest,
    c: Candidate,
    pools: dict[PoolKey, list[PrefillPool]],
    ov: str,
    t_step: np.ndarray,
    base: dict[str, Any],
    context_bytes: np.ndarray,
) -> None:
    """Per batch, one disaggregated point per prefill pool that keeps up; a batch with none
    is counted in the reasons."""
    total = c.lay.dp * c.Bf / t_step
    demand = total / req.osl  # prompts per second
    pairs, settled = _pairings(req, c, pools, ov, demand, base)
    # a count given that a prefill pool could have beside this decode pool (within the largest);
    # under a budget any pool size is tried, so the reason below is the pairing's
    listed = req.budget is not None or any(c.gpus + pg <= max(req.gpus) for pg in req.gpus)
    # per batch size: its figures as Python numbers, then one point per pool
    tps, tots = t_step.tolist(), total.tolist()
    kvs = context_bytes.tolist()
    for i, b in enumerate(c.Bf.tolist()):
        paired = False
        for gpus_used, keeps, ttft_s, pool, head, in_flight, transfer in _budget_front(
            req, pairs, i
        ):
            if not keeps[i]:
                continue
            paired = True
            point = {
                **head,
                "batch_per_group": int(b),
                "concurrency": float(in_flight[i]),
                "ttft_s": ttft_s[i],
                "tpot_s": tps[i],
                "output_tokens_per_s": tots[i],
                "output_tokens_per_s_per_gpu": tots[i] / gpus_used,
                "output_tokens_per_s_per_user": 1.0 / tps[i],
                "kv_per_gpu_bytes": kvs[i],
                **({"kv_shared_prefix_bytes": c.shared} if c.shared else {}),
            }
            found.add(point, c.sm, pool.sm)
            found.pending[id(point)] = (c, ov, pool, transfer)
        if not paired and settled[i]:
            found.reasons[SETTLES] += 1
        elif not paired and not listed:
            found.reasons["disaggregated: no listed GPU count fits beside the decode pool"] += 1
        elif not paired:
            found.reasons["disaggregated: no prefill pool keeps up within the GPUs"] += 1


def _budget_front(req: SearchRequest, pairs: list[tuple], i: int) -> list[tuple]:
    """The pairings of batch ``i`` worth a point. Under a budget, of the pairings that keep
    up and give the same replicas (so the same output tokens/s within the budget, and the
    same TPOT), those no other beats on both GPUs (tokens/s per GPU) and TTFT: the best and
    the frontier are the same without the rest."""
    if req.budget is None:
        return pairs
    live = sorted((p for p in pairs if p[1][i]), key=lambda p: (p[0], p[2][i]))
    front: dict[int, float] = {}
    out = []
    for p in live:
        r = req.budget // p[0]
        if p[2][i] < front.get(r, math.inf):
            front[r] = p[2][i]
            out.append(p)
    return out


def settles(req: SearchRequest, found: Points, point: dict[str, Any]) -> bool:
    """Whether plan's closed loop at a point's requests in flight settles at its batch, seen
    through every whole batch per group below it, as plan steps them one by one
    (:func:`mlacalc.serving.disaggregated.first_whole`; the search's batches are a grid):
    no smaller whole batch already holds that many requests in flight (within plan's snap,
    :data:`mlacalc.words.defaults.CONCURRENCY_SNAP`), and where the prefill pool caps the
    decode pool's rate at its largest batch, none already serves the pool's prompt rate (plan
    caps the decode batch at the first that does:
    :func:`mlacalc.serving.disaggregated.disaggregated_load`). A step's time jumps with its
    tiles, so a batch between two searched ones can serve more than both (a new-user trial's
    qwen3-32b on H200: batch 784 searched, plan capped near 622 and queued the rest). An
    aggregated point settles at its own batch (its concurrency is the batch)."""
    check = found.pending.get(id(point))
    b = int(point["batch_per_group"])
    if check is None or b < 2:
        return True
    c, ov, pool, transfer = check
    lay = c.lay
    cap = max(req.room(c.weights) - c.shared, 0) // c.per_seq  # the largest batch plan admits
    if req.max_running is not None:
        cap = min(cap, req.max_running)
    key = ("whole", id(c), ov)
    held_c, top, rate = req.step_cache.get(key, (None, 0, None))
    if held_c is not c or top < b - 1:  # (an id is reused once its candidate is gone)
        top = top if held_c is c else 0
        top = max(b - 1, min(2 * top, int(c.Bf.max())))
        B = np.append(np.arange(1.0, top + 1.0), float(max(cap, 1)))
        dec = c.sm.step(overlap=ov, dec_B=B / np.minimum(lay.pp, B), dec_q=1, dec_S=req.S_avg)
        rate = lay.dp * B / (lay.pp * dec.stage_seconds) / req.osl
        req.step_cache[key] = (c, top, rate)
    whole, decode_max = rate[: b - 1], rate[-1]
    P = pool.rate
    X = np.minimum(whole, P)
    seconds = prefill_pool_seconds(pool.t_pf, X / pool.sm.lay.dp)
    held = lay.dp * np.arange(1.0, b) + X * (seconds + transfer)
    if held.max() >= point["concurrency"] * (1 - defaults.CONCURRENCY_SNAP):
        return False
    if decode_max > P and whole[0] > 0:  # plan's first crossing, from its rate_start
        start = max(1, math.floor(0.5 * P / whole[0]))
        return not (whole[start - 1 :] >= P * (1 - 1e-12)).any()
    return True
