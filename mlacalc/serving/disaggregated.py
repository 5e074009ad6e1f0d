"""The steady state of disaggregated serving: prompts on a prefill pool, the KV cache sent
over the network, the decode batch on a pool of its own.

A request cycles through the prefill pool (the wait for the pass in progress, its own pass),
the KV transfer and ``osl`` decode steps. The decode batch is the requests in their decode
phase, ``D``, and the decode pool serves ``X(D) = D / (osl x TPOT)`` requests/s (Little's
law); the prompt rate on each prefill group is ``X`` over its groups. A closed loop of ``N``
requests solves ``N = D + X (wait + pass + transfer)`` for ``D``; an open loop at ``R``
requests/s solves ``X(D) = R``. Both are capped by the KV cache and the prefill pool's rate.
See :mod:`mlacalc.serving.plan` for the whole model.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import Any

import numpy as np

from mlacalc.serving.figures import Load, MixTiming, step_figures
from mlacalc.words import defaults

__all__ = [
    "crossing",
    "disaggregated_load",
    "first_whole",
    "in_flight",
    "pool_wait",
    "prefill_pool_pass",
    "prefill_pool_seconds",
    "whole_batches",
]


def prefill_pool_pass(t_pf: Any, demand: Any, arrivals: bool = False) -> tuple[Any, Any]:
    """A prefill group's pass size and wait at ``demand`` prompts/s on it (a number or an
    array), ``t_pf[k]`` being a pass of ``k`` prompts (``t_pf[0] = 0``): of the passes that
    keep up (``k / t_pf[k] >= demand``), the one whose prompt spends the least time in the
    group, its wait and its own pass (the smallest of those that tie; the largest when none
    keeps up: the pool is prefill-bound). ``rho = demand t_pf[k] / k`` (at most 1) is the
    share of the time a pass runs; a prompt waits for the pass in progress, ``rho t_pf[k] /
    2`` in a closed loop, and under random arrivals (``arrivals``) the M/D/1 wait ``rho
    t_pf[k] / (2 (1 - rho))`` (``rho`` at most 0.999). A larger pass than the smallest that
    keeps up runs less of the time, so its wait can be shorter by more than its pass is
    longer (DeepSeek-V3 on 8 H200 at 32 prompts/s, 2,000 tokens each: 6 prompts, 1.50 s
    and a wait of about 750 s; 8 prompts, 1.99 s and 186 s). Arrays of the demand's length;
    :func:`mlacalc.plan` and :func:`mlacalc.serving.search.search` both time prefill pools
    by it."""
    t_pf = np.asarray(t_pf, dtype=np.float64)
    k_max = len(t_pf) - 1
    d = np.atleast_1d(np.asarray(demand, dtype=np.float64))
    ks = np.arange(1.0, k_max + 1)
    rho = np.minimum(d[:, None] * t_pf[None, 1:] / ks[None, :], 1.0)
    wait = pool_wait(rho, t_pf[None, 1:], arrivals)
    up = (ks / t_pf[1:])[None, :] >= d[:, None]
    spent = np.where(up, t_pf[None, 1:] + wait, np.inf)
    k = np.where(up.any(axis=1), spent.argmin(axis=1) + 1, k_max)
    return k, np.take_along_axis(wait, (k - 1)[:, None], axis=1)[:, 0]


def pool_wait(rho: Any, t_k: Any, arrivals: bool) -> Any:
    """A prompt's wait in a prefill group whose passes take ``t_k`` and run ``rho`` of the
    time: the rest of the pass in progress, ``rho t_k / 2`` (a closed loop), or the M/D/1
    wait ``rho t_k / (2 (1 - rho))`` under random arrivals (``rho`` at most 0.999)."""
    if not arrivals:
        return rho * t_k / 2
    rho = np.minimum(rho, 0.999)
    return rho / (2 * (1 - rho)) * t_k


def prefill_pool_seconds(t_pf: Any, demand: Any) -> Any:
    """A prompt's time in a prefill group at ``demand`` prompts/s on it (a number or an
    array): the wait for the pass in progress, then its own pass (:func:`prefill_pool_pass`),
    the TTFT before the KV transfer in :func:`mlacalc.plan`'s closed loop and
    :func:`mlacalc.serving.search.search`'s points."""
    k, wait = prefill_pool_pass(t_pf, demand)
    return t_pf[k] + wait


def served(mix: MixTiming, D: float) -> tuple[dict[str, Any], float]:
    """The step figures at a decode batch of ``D`` (all groups) and the requests/s it serves."""
    fd = step_figures(mix, D / mix.req.lay.dp)
    return fd, fd["rate"] / mix.req.osl


def pool_ttft(mix: MixTiming, X: float) -> float:
    """The prompt's wait for the pass in progress and its pass (closed loop), at ``X``
    requests/s on the pool."""
    return float(prefill_pool_seconds(mix.t_pf, X / mix.p_lay.dp)[0])


def in_flight(mix: MixTiming, D: float) -> float:
    """The requests in flight of the closed loop whose decode batch is ``D``: the batch and,
    at its request rate (at most the prefill pool's), those in the pool and the transfer."""
    X = min(served(mix, D)[1], mix.pf_capacity)
    return D + X * (pool_ttft(mix, X) + mix.transfer)


def whole_batches(mix: MixTiming, b: int, b_end: int) -> tuple[Any, Any]:
    """Whole batches per group ``b .. b_end``: the decode pool's requests/s at each and the
    requests in flight of the closed loop (one vectorised step, as search times them;
    :func:`served` and :func:`in_flight` of one)."""
    req, lay = mix.req, mix.req.lay
    B = np.arange(float(b), float(b_end) + 1.0)
    mb = np.minimum(lay.pp, B)
    dec = mix.sm.step(overlap=req.overlap, dec_B=B / mb, dec_q=mix.q, dec_S=mix.S_avg)
    rate = lay.dp * B * mix.tau / (lay.pp * dec.stage_seconds) / req.osl
    X = np.minimum(rate, mix.pf_capacity)
    seconds = prefill_pool_seconds(mix.t_pf, X / mix.p_lay.dp)
    return rate, lay.dp * B + X * (seconds + mix.transfer)


def first_whole(
    mix: MixTiming, hi: float, reaches: Callable[[Any, Any], Any], start: int
) -> tuple[float, float]:
    """The bracket ``(hi, lo)`` of the first whole batch per group from ``start`` whose
    figures ``reaches`` (of :func:`whole_batches`) says reach the target, and the one below:
    the decode rate and the requests in flight rise only on the whole (a step's time jumps
    with its tiles, the pass size with the rate), so the pool settles at the first crossing,
    which bisection over the whole range can step past. In blocks of 256 batches from
    ``start``; with MTP drafts (timed per call, not vectorised) the whole range for
    :func:`crossing`."""
    dp = mix.req.lay.dp
    b_cap = math.floor(hi / dp)
    if mix.req.mtp_tokens or b_cap < 1:
        return hi, 0.0
    b = max(1, start)
    while b <= b_cap:
        end = min(b + 255, b_cap)
        hit = np.nonzero(reaches(*whole_batches(mix, b, end)))[0]
        if hit.size:
            first = b + int(hit[0])
            return first * dp, (first - 1) * dp
        b = end + 1
    return hi, b_cap * dp


def rate_start(mix: MixTiming, target: float) -> int:
    """A whole batch per group below which the decode pool serves under ``target``
    requests/s: the rate at batch 1 times the batch, halved for a step that gets shorter
    with more rows (a tile or split switch, a few percent)."""
    one = float(whole_batches(mix, 1, 1)[0][0])
    return max(1, math.floor(0.5 * target / one)) if one > 0 else 1


class _Cached:
    """A function of one number whose values are kept (each point is evaluated once)."""

    def __init__(self, fn: Callable[[float], float]):
        self.fn, self.seen = fn, {}

    def __call__(self, x: float) -> float:
        if x not in self.seen:
            self.seen[x] = self.fn(x)
        return self.seen[x]


def crossing(g_raw: Callable[[float], float], dp: int, hi: float, lo: float = 0.0) -> float:
    """The decode batch in ``[lo, hi]`` where ``g`` crosses 0 (``g(lo) < 0 <= g(hi)``): first
    the whole batches per group (``dp`` groups; a step's time has jumps, so ``g`` is
    increasing only on the whole), the smallest that reaches 0; then the crossing between it
    and the one below, unless it lands on 0 (as a search point's concurrency does)."""
    g = _Cached(g_raw)
    lo_b, hi_b = math.ceil(lo / dp), math.floor(hi / dp)
    if lo_b < hi_b and g(hi_b * dp) >= 0:
        lo_b -= 1
        while hi_b - lo_b > 1:
            mid_b = (lo_b + hi_b) // 2
            if g(mid_b * dp) >= 0:
                hi_b = mid_b
            else:
                lo_b = mid_b
        if abs(g(hi_b * dp)) <= 1e-9 * max(hi_b * dp, 1.0):
            return float(hi_b * dp)
        lo, hi = max(lo, lo_b * dp), float(hi_b * dp)
    return _regula_falsi(g, lo, hi)


def _regula_falsi(g: Callable[[float], float], lo: float, hi: float) -> float:
    """The crossing of ``g`` between ``lo`` and ``hi``: regula falsi (Illinois: the value of
    an end kept twice is halved), which brings ``g``'s smooth stretches there in a few steps;
    where four steps have not halved the bracket (a jump of ``g`` in it), a bisection, so a
    jump is closed in about as fast as by bisection alone. Returns the end below 0 (at a jump
    of ``g``, the side below 0)."""
    g_lo, g_hi = g(lo), g(hi)
    usable = g_lo < 0 <= g_hi
    kept, steps, checkpoint = 0, 0, hi - lo
    for _ in range(400):
        width = hi - lo
        if width <= 1e-13 * max(hi, 1.0):
            break
        steps += 1
        bisect = not usable or g_hi - g_lo <= 0
        if steps == 4:
            bisect = bisect or width > 0.5 * checkpoint
            steps, checkpoint = 0, width
        mid = 0.5 * (lo + hi) if bisect else hi - g_hi * width / (g_hi - g_lo)
        # an estimate at (or within the tolerance of) an end tries just inside it
        tol = 0.4e-13 * max(hi, 1.0)
        mid = min(max(mid, lo + tol), hi - tol)
        g_mid = g(mid)
        if g_mid < 0:
            lo, g_lo = mid, g_mid
            kept = max(kept, 0) + 1
            if kept > 1:
                g_hi *= 0.5
        else:
            hi, g_hi = mid, g_mid
            kept = min(kept, 0) - 1
            if kept < -1:
                g_lo *= 0.5
    return lo


def _rate_gap(mix: MixTiming, target: float, D: float) -> float:
    return served(mix, D)[1] - target


def _in_flight_gap(mix: MixTiming, target: float, D: float) -> float:
    return in_flight(mix, D) - target


def _rate_reaches(target: float, rate: Any, in_flight: Any) -> Any:
    return rate >= target * (1 - 1e-12)


def _in_flight_reaches(target: float, rate: Any, in_flight: Any) -> Any:
    return in_flight >= target * (1 - 1e-12)


def _solve_rate(mix: MixTiming, target: float, hi: float) -> float:
    """The decode batch (up to ``hi``) at which the decode pool serves ``target`` requests/s."""
    bracket = first_whole(mix, hi, partial(_rate_reaches, target), rate_start(mix, target))
    return crossing(partial(_rate_gap, mix, target), mix.req.lay.dp, *bracket)


def disaggregated_load(
    mix: MixTiming, max_batch: int, concurrency: float | None, request_rate: float | None
) -> Load:
    """The steady state of ``concurrency`` requests in flight (closed loop) or of random
    arrivals at ``request_rate`` (open loop), the decode batch capped at ``max_batch`` and
    at the prefill pool's rate."""
    decode_max = served(mix, float(max_batch))[1]  # requests/s at the largest decode batch
    D_cap, prefill_bound = float(max_batch), False
    if decode_max > mix.pf_capacity:  # the prefill pool caps the request rate
        prefill_bound = True
        D_cap = _solve_rate(mix, mix.pf_capacity, D_cap)
    if request_rate is None:
        load = _closed_loop(mix, D_cap, concurrency, prefill_bound)
    else:
        load = _open_loop(mix, max_batch, D_cap, request_rate, decode_max, prefill_bound)
    return replace(load, decode_max=decode_max)


#: A concurrency within this fraction of a whole decode batch's requests in flight is read as
#: that batch's: the concurrency of a search point (a whole batch's in-flight count, a float
#: such as 517.9548047710623) printed rounded to within a quarter of it gives the point's
#: figures exactly (``mlacalc search`` prints ``--concurrency 517.95``)
SNAP = defaults.CONCURRENCY_SNAP


def snapped(mix: MixTiming, D_cap: float, concurrency: float, start: int) -> float:
    """``concurrency``, or the requests in flight of the first whole decode batch whose count
    lies within :data:`SNAP` of it (see there)."""
    if mix.req.mtp_tokens:  # no vectorised whole batches with MTP drafts
        return concurrency
    dp = mix.req.lay.dp
    reaches = partial(_in_flight_reaches, concurrency * (1 - SNAP))
    hi, _ = first_whole(mix, D_cap, reaches, max(1, start - 1))
    if hi % dp or hi > D_cap:
        return concurrency
    count = in_flight(mix, hi)
    return count if abs(count - concurrency) <= SNAP * concurrency else concurrency


def _closed_loop(mix: MixTiming, D_cap: float, concurrency: float, prefill_bound: bool) -> Load:
    """A closed loop of ``concurrency`` requests: ``N = D + X(D) (pool wait + pass +
    transfer)``, solved for ``D``; beyond the decode batch cap (the prefill pool's rate or
    the KV cache) the extra requests queue, their wait ``N_extra / X`` (Little's law)."""
    dp = mix.req.lay.dp
    # no batch below N less the most the prefill pool and the transfer can hold (its rate
    # times a pass of k_max and the wait for one in progress) reaches N
    held = mix.pf_capacity * (1.5 * float(mix.t_pf[-1]) + mix.transfer)
    start = math.floor((concurrency - held) / dp)
    concurrency = snapped(mix, D_cap, concurrency, start)
    n_cap = in_flight(mix, D_cap)
    queued = 0.0
    if concurrency >= n_cap:
        running = D_cap
        queued = concurrency - n_cap
    else:
        reaches = partial(_in_flight_reaches, concurrency)
        bracket = first_whole(mix, D_cap, reaches, start)
        running = crossing(partial(_in_flight_gap, mix, concurrency), dp, *bracket)
        prefill_bound = False
    f, X = served(mix, running)
    X = min(X, mix.pf_capacity)
    # the prompt's wait and its own pass (pool_ttft's sum), the pass kept as TTFT's part
    k_arr, wait = prefill_pool_pass(mix.t_pf, X / mix.p_lay.dp)
    k = int(k_arr[0])
    f["ttft"] = float(mix.t_pf[k] + wait[0])
    f["pool_pass"] = (k, float(mix.t_pf[k]))
    # the requests beyond those the cycle at D holds wait their turn: the queued ones, or
    # where in_flight jumps past N (a larger pass), the few between
    queue = max(concurrency - in_flight(mix, running), 0.0) / X
    return Load(f, running, concurrency, queue, queued, prefill_bound=prefill_bound)


def _open_loop(
    mix: MixTiming,
    max_batch: int,
    D_cap: float,
    r_in: float,
    decode_max: float,
    prefill_bound: bool,
) -> Load:
    """Random arrivals at ``r_in`` requests/s: the decode batch is ``R x osl x TPOT`` (the
    requests decoding, not those in prefill or transfer), and one pass size from ``R``: of
    those that keep up, the one with the shortest pass and M/D/1 wait together
    (:func:`prefill_pool_pass`)."""
    t_pf, dp, osl = mix.t_pf, mix.p_lay.dp, mix.req.osl
    if r_in >= min(decode_max, mix.pf_capacity):
        warning = (
            f"request rate {r_in:g}/s exceeds what the deployment sustains "
            f"({min(decode_max, mix.pf_capacity):.3g}/s): the queue grows without bound"
        )
        f = served(mix, D_cap)[0]
        f["ttft"] = float(t_pf[mix.k_max])
        conc = math.inf if decode_max <= mix.pf_capacity else D_cap
        return Load(
            f, D_cap, D_cap, math.inf, math.inf, conc, False, prefill_bound, warnings=(warning,)
        )
    running = _solve_rate(mix, r_in, float(max_batch))
    f = served(mix, running)[0]
    k_arr, wait = prefill_pool_pass(t_pf, r_in / dp, arrivals=True)
    k, queue = int(k_arr[0]), float(wait[0])
    f["ttft"] = float(t_pf[k])
    f["pool_pass"] = (k, float(t_pf[k]))
    concurrency = r_in * (f["ttft"] + queue + mix.transfer + osl * f["tpot"])
    return Load(f, running, concurrency, queue, 0.0, running)
