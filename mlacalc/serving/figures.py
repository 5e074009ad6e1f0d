"""The serving figures of a request mix on a deployment: its step times, TTFT, TPOT and
tokens per second, and how the mix loads an aggregated deployment in steady state (a closed
loop of requests in flight, or random arrivals at a rate). The model behind each figure is
in :mod:`mlacalc.serving.plan`'s docstring; :mod:`mlacalc.serving.disaggregated` solves the
load of a disaggregated one from the same step figures.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mlacalc.serving.arrivals import sample_states, step_chain
from mlacalc.serving.capacity import prompts_per_pass
from mlacalc.serving.comm import KVTransfer, kv_transfer
from mlacalc.serving.gpu_step import StepModel, StepTimes
from mlacalc.serving.layout import Layout
from mlacalc.serving.plan_checks import PlanRequest
from mlacalc.serving.ranks import synced_groups, synced_prompts

__all__ = [
    "Load",
    "MixTiming",
    "chunk_capacity",
    "chunk_fluid",
    "chunk_hold",
    "chunk_load",
    "chunked_figures",
    "closed_loop",
    "decode_step",
    "draft_seconds",
    "in_progress",
    "micro_batch_prompts",
    "mix_timing",
    "open_loop",
    "others_share",
    "prompt_args",
    "prompts",
    "request_steps",
    "set_load",
    "step_figures",
]


@dataclass(frozen=True, eq=False)
class MixTiming:
    """A request mix on a deployment, ready to time: the decode pool's step model and the one
    of the GPUs that run the prompts (the same, aggregated), and the prefill passes."""

    req: PlanRequest
    sm: StepModel
    p_sm: StepModel
    #: the layout of the GPUs that run the prompts (the decode pool's, aggregated)
    p_lay: Layout
    #: tokens a decode step computes per sequence (1 + the draft tokens)
    q: int
    #: tokens one step yields per sequence (``1 + a + a^2 ...`` at acceptance rate ``a``)
    tau: float
    #: the average context of the output, ``isl + osl / 2``
    S_avg: float
    #: the most prompts one prefill pass batches
    k_max: int
    #: ``t_pf[k]``: a prefill pass of ``k`` prompts (``t_pf[0] = 0``)
    t_pf: np.ndarray
    #: prompts per second the prefill servers finish (passes of ``k_max``)
    pf_capacity: float
    #: the KV transfer of one prompt to the decode pool (disaggregated; None otherwise)
    transfer: float | None = None
    #: the same, with the link and the bytes a rank moves (None: aggregated)
    handoff: KVTransfer | None = None
    #: attention groups of the decode pool that meet at every MoE layer's exchange (1: each
    #: runs on its own; :mod:`mlacalc.serving.ranks`)
    groups: int = 1
    #: a pass of one prompt with nothing else on the GPUs that run it: aggregated, the other
    #: synced groups idle (their experts see this prompt alone, where ``t_pf[1]`` has every
    #: group pass a prompt); disaggregated, ``t_pf[1]``
    prefill_alone: float = 0.0
    #: the decode steps timed so far, by sequences a micro-batch (:func:`decode_step`): a plan
    #: asks the same step again (its load's solver, then its record)
    decode_steps: dict[float, StepTimes] = field(default_factory=dict, repr=False)


@dataclass(frozen=True)
class Load:
    """How a request mix loads the deployment in steady state."""

    #: the step figures at the running batch (:func:`step_figures`); ``ttft`` there is the
    #: prompt's own time, before the queue and the KV transfer
    f: dict[str, Any]
    #: the running sequences (all groups), and the requests in flight
    running: float
    concurrency: float | None
    #: the wait in the queue, and the requests queued
    queue: float = 0.0
    queued: float = 0.0
    #: the requests in flight an open loop settles at (0 in a closed loop)
    conc: float = 0.0
    sustainable: bool = True
    #: whether the prefill pool's rate caps the requests served, and the decode pool's rate
    #: at its largest batch (disaggregated)
    prefill_bound: bool = False
    decode_max: float | None = None
    warnings: tuple[str, ...] = ()
    #: chunked prefill: the prompt tokens the requests in flight would bring a step and the
    #: chunk a step carries, where they are more and the others queue for prefill (else None)
    chunk_bound: tuple[float, int] | None = None
    #: whole prompts (no chunked prefill, aggregated) under an arrival rate at or past what
    #: the prompts' passes alone finish (``pf_capacity``): the passes bind, not the KV cache
    prompt_bound: bool = False


def mix_timing(
    req: PlanRequest, sm: StepModel, p_sm: StepModel, fit: int | None = None
) -> MixTiming:
    """``req``'s mix on the decode pool's step model ``sm`` with its prompts run by ``p_sm``;
    ``fit``: the prompts whose cache fits on a prefill pool's GPU (caps a pass)."""
    isl, osl, p_lay = req.isl, req.osl, p_sm.lay
    # a prompt computes its tokens not found cached (prefix caching), after the cached ones
    # (prompt_args): a pass's token budget counts those it computes
    new = req.computed_tokens
    k_max = prompts_per_pass(new, fit)
    if req.max_tokens is not None:  # the engine's tokens per step: whole prompts that fit
        k_max = min(k_max, max(1, req.max_tokens // new))
    # a pass of k prompts, k = 1 .. k_max: timed at every k or, for short prompts (thousands
    # of k), at the arrivals model's sample of them and interpolated between
    ks = np.arange(1, k_max + 1, dtype=np.float64)
    timed = sample_states(k_max + 1)[1:].astype(np.float64)
    seconds = p_sm.step(overlap=req.overlap, pf_N=timed, **prompt_args(req)).seconds
    t_pf = np.concatenate([[0.0], np.interp(ks, timed, seconds)])
    groups = synced_groups(req.m, req.lay)
    alone = float(t_pf[1])
    if not req.disaggregated and groups > 1:
        one = p_sm.step(overlap=req.overlap, pf_N=1.0, pf_moe=1.0 / groups, **prompt_args(req))
        alone = float(one.seconds[0])
    transfer = handoff = None
    if req.disaggregated:  # the whole prompt's cache, the rows found cached too
        handoff = kv_transfer(req.hw, req.m, req.kv, p_lay, req.lay, isl)
        transfer = handoff.seconds
    return MixTiming(
        req=req,
        sm=sm,
        p_sm=p_sm,
        p_lay=p_lay,
        q=1 + req.mtp_tokens,
        tau=req.tau,
        S_avg=isl + osl / 2,
        k_max=k_max,
        t_pf=t_pf,
        pf_capacity=p_lay.dp * k_max / t_pf[k_max],
        transfer=transfer,
        handoff=handoff,
        groups=groups,
        prefill_alone=alone,
    )


def prompt_args(req: Any) -> dict[str, int]:
    """The step arguments of one prompt of ``req`` (a plan's :class:`PlanRequest` or a
    search's ``SearchRequest``, each with ``computed_tokens`` and ``cached_tokens``): its
    tokens not found cached (prefix caching, ``prefix_cache_hit``), attending the cached ones
    before them as a chunk of a chunked prefill attends the chunks before it (``pf_pre``);
    the whole prompt without."""
    return dict(pf_q=req.computed_tokens, pf_pre=req.cached_tokens)


def micro_batch_prompts(slow: Any, mean: Any, mb: Any) -> tuple[Any, Any]:
    """The prompts the slowest of ``mb`` micro-batches carries, and the experts' load beside
    them, when the slowest group's step carries ``slow`` whole prompts (unchunked) and the
    synced set's mean per group is ``mean``: a prompt is not split over the micro-batches
    pipeline parallelism keeps in flight, so one micro-batch holds ``ceil(slow / mb)`` of
    them and the step's ``pp`` stage times each pass that micro-batch with its prompts whole
    (a prompt crosses the stages one after another: its step is at least its own pass); the
    experts see the mean in the same proportion to the slowest group's. Without pipeline
    parallelism (``mb`` 1) this is ``slow`` and ``mean``. Before, every micro-batch held
    ``slow / mb`` of a prompt, and one prompt's step took a ``1 / pp`` share of its pass
    (llama-3.1-70b TP1 PP4, 32K prompts: TTFT 4,252.8 ms against an 8,040.8 ms pass)."""
    slow = np.asarray(slow, dtype=np.float64)
    per = np.ceil(slow / np.asarray(mb, dtype=np.float64) - 1e-9)
    scale = np.divide(per, slow, out=np.ones_like(per), where=slow > 0)
    return per, np.asarray(mean, dtype=np.float64) * scale


def prompts(mix: MixTiming, n: float) -> int:
    """Prompts one prefill pass batches when ``n`` arrive together."""
    return int(min(max(math.ceil(n - 1e-9), 1), mix.k_max))


def step_figures(
    mix: MixTiming, B: float, rate: float | None = None, closed: bool = True
) -> dict[str, Any]:
    """The step, TTFT and cycle at a running batch of ``B`` per group; ``rate``: the arrival
    rate per group (random arrivals batched into steps), None: a closed loop, or, with
    ``closed`` false, random arrivals timed as the steady state of ``B`` (chunked
    prefill)."""
    req, lay = mix.req, mix.req.lay
    in_system = B  # mean requests on the group (below 1: it idles between them)
    B = max(B, 1.0)
    mb = min(lay.pp, B)  # micro-batches in flight; fewer than pp leave pipeline bubbles
    dec, t_step = _decode_step(mix, B, mb)
    gap = None  # the step a request waits per token, where it differs from the mean step
    out: dict[str, Any] = {
        "B": B,
        "t_dec": t_step,
        "compute": float(dec.compute_s[0]),
        "comm": float(dec.comm_s[0]),
    }
    if req.mode == "disaggregated":
        # the decode step has no prefill in it; the prefill pool's pass and wait follow from
        # the request rate, which the caller solves for (closed and open loop)
        cycle, ttft = t_step, 0.0
    elif req.chunked_prefill:
        cycle, ttft, gap, out["chunks"] = _chunked_cycle(mix, B, mb, dec, t_step, in_system, closed)
    elif rate is not None:
        cycle, ttft = _arrivals_cycle(mix, B, mb, dec, t_step, rate, in_system)
    else:
        cycle, ttft, gap = _in_flight_cycle(mix, B, mb, t_step, in_system)
    if req.mode == "aggregated":
        ttft += req.output_lag_steps * cycle  # the token is read back steps later
    out["t_pf"] = mix.t_pf[prompts(mix, B * mix.tau / req.osl)]
    # only the requests running make tokens: below one per group, the groups holding one
    running = lay.dp * in_system
    tpot = (cycle if gap is None else gap) / mix.tau
    tokens_per_s = running * mix.tau / cycle
    if req.mode == "aggregated" and rate is None and closed:
        # a closed loop: each of the requests in flight makes its osl tokens in its latency,
        # the wait and its prompt's steps to the first token, then osl - 1 gaps (Little's
        # law, N = X (TTFT + (osl - 1) TPOT)), not in osl mean steps
        tokens_per_s = running * req.osl / (ttft + (req.osl - 1) * tpot)
    out.update(cycle=cycle, ttft=ttft, tpot=tpot, rate=tokens_per_s, running=running)
    return out


def request_steps(first: Any, osl: int, tau: float) -> Any:
    """The steps a running request spends on its group: ``first`` to its first token (its
    prompt's step, or its chunk steps), then ``(osl - 1) / tau`` decode steps (``tau``
    tokens a step); the prompts a group starts per step are its requests over this."""
    return first + (osl - 1) / tau


def _decode_step(mix: MixTiming, B: float, mb: float) -> tuple[StepTimes, float]:
    """The decode step at ``B`` per group in ``mb`` micro-batches, and its time with the MTP
    module's drafts (one layer per draft token)."""
    req, sm, lay = mix.req, mix.sm, mix.req.lay
    dec = decode_step(mix, B / mb)
    t_step = lay.pp * float(dec.stage_seconds[0])
    return dec, t_step + draft_seconds(sm, req.mtp_tokens, B / mb, mix.S_avg)


def decode_step(mix: MixTiming, micro: float) -> StepTimes:
    """The decode pool's step of ``micro`` sequences a micro-batch at the mix's mean context,
    timed once a mix (the same figures each time it is asked; read, never changed)."""
    key = float(micro)
    dec = mix.decode_steps.get(key)
    if dec is None:
        dec = mix.sm.step(overlap=mix.req.overlap, dec_B=micro, dec_q=mix.q, dec_S=mix.S_avg)
        mix.decode_steps[key] = dec
    return dec


def draft_seconds(sm: StepModel, drafts: int, B: float, S: float) -> float:
    """The MTP module's drafts in a step: ``drafts`` times one layer and the head at ``B``
    sequences of ``S`` keys (0 without drafts)."""
    if not drafts:
        return 0.0
    draft = sm.step(dec_B=B, dec_q=1, dec_S=S)
    ffn = "moe_ffn" if sm.m.num_moe_layers else "dense_ffn"
    one_layer = sum(
        float(k["seconds_per_call"][0])
        for k in draft.kernels
        if k["part"] in ("layer", ffn, "embed", "head")
    )
    return drafts * one_layer


def _chunked_cycle(
    mix: MixTiming,
    B: float,
    mb: float,
    dec: StepTimes,
    t_step: float,
    in_system: float,
    closed: bool = True,
) -> tuple[float, float, float, tuple[int, int, float, float]]:
    """Chunked prefill: the cycle, the TTFT, the step between two tokens of one request (the
    others' chunks only, :func:`others_share`), and the prompt's chunks (how many, of how
    many tokens, their steps' time, the prompts a step's chunk holds at once). Past the prompt
    tokens a chunk a step carries (``P`` above the chunk) a closed loop runs fewer requests
    and queues the others (:func:`chunk_capacity`); the steps here are timed with ``P``.
    A prompt runs in ``s = ceil(isl / N)`` consecutive steps, the ``j``-th carrying ``min(N,
    isl - j N)`` of its tokens after the ``j N`` before (causal) beside the decode batch, as
    the engines run a chunked prompt; the other steps decode only (:func:`chunked_figures`
    composes the two)."""
    req, sm, lay = mix.req, mix.sm, mix.req.lay
    # the prompt's chunks are its tokens not found cached, after the cached ones (prefix
    # caching: cached 0 without); ``isl`` here is the tokens the chunks compute
    isl, cached = req.computed_tokens, req.cached_tokens
    decode = dict(overlap=req.overlap, dec_B=B / mb, dec_q=mix.q, dec_S=mix.S_avg)
    # prompts a group starts per step: a closed loop's from the requests on the synced set
    # (set_load); random arrivals timed at the steady state of B (the others' share below)
    load = float(set_load(in_system, mix.groups)) if closed else B
    chunk, steps, n, P = chunk_load(mix, B, load)
    draft_s = t_step - lay.pp * float(dec.stage_seconds[0])  # MTP's drafts, if any
    # synced groups (mlacalc.serving.ranks): a group with a prompt's chunk holds the others
    # up; the chunks the set brings a step, dealt over the g groups, make a share of the
    # steps as slow as a chunk's, the experts seeing the set's mean (one group: share n s)
    _, share, _, mean = (float(x) for x in synced_prompts(n * steps, mix.groups, 1))
    # the steps at full load (more than one chunk a step: every step carries the prompt
    # tokens the load brings, whole prompts of them past one prompt a step)
    fluid = sm.step(**decode, **chunk_fluid(P, isl, mb, cached))
    t_fluid = lay.pp * float(fluid.stage_seconds[0]) + draft_s
    starts = np.arange(0, isl, chunk, dtype=np.float64)
    # a long prompt in small chunks (131,072 steps at a chunk of one token; every one timed
    # took 30 s and 3 GB at 100,000): at most _MOST_CHUNKS steps are timed, evenly spread with
    # the last two (a full and the partial chunk), and the others interpolated between (a
    # step grows linearly with the keys before its chunk)
    timed = starts
    if len(starts) > _MOST_CHUNKS:
        pick = np.linspace(0, len(starts) - 3, _MOST_CHUNKS - 2).round().astype(np.int64)
        timed = starts[np.unique(np.concatenate([pick, [len(starts) - 2, len(starts) - 1]]))]
    own = sm.step(
        **decode,
        pf_N=np.full(len(timed), 1 / mb),
        pf_q=np.minimum(float(chunk), isl - timed),
        pf_pre=cached + timed,
        pf_moe=mean / mb,
    )
    chunk_steps = lay.pp * np.interp(starts, timed, own.stage_seconds) + draft_s
    S = float(chunk_steps.sum())
    hold = float(chunk_hold(chunk, isl))
    cycle, _ = chunked_figures(n, steps, share, t_step, t_fluid, S, hold)
    # what one request sees: the others' chunks between its tokens and before its own steps
    ratio, busy = (float(x) for x in others_share(in_system, mix.groups, load, closed))
    _, share_o, _, _ = (float(x) for x in synced_prompts(n * ratio * steps, mix.groups, 1))
    gap, ttft = chunked_figures(n * ratio, steps, share_o, t_step, t_fluid, S, hold)
    ttft = busy * (ttft - S) + S
    return float(cycle), float(ttft), float(gap), (steps, min(chunk, isl), S, hold)


def chunk_load(mix: MixTiming, B: float, load: float) -> tuple[int, int, float, float]:
    """Chunked prefill at ``B`` running per group (at least 1) with ``load`` requests per
    group on the synced set: the chunk (what the decode tokens leave of ``max_tokens``), a
    prompt's chunk steps, the prompts a group starts per step and the prompt tokens they bring
    a step (``P = n isl``, ``isl`` the tokens a prompt computes)."""
    req = mix.req
    chunk, steps, n, P = chunk_rule(
        req.computed_tokens, req.osl, req.chunked_prefill, req.max_tokens, B, load, mix.q, mix.tau
    )
    return int(chunk), int(steps), float(n), float(P)


def chunk_rule(
    isl: int,
    osl: int,
    chunked_prefill: int,
    max_tokens: int | None,
    B: Any,
    load: Any,
    q: float = 1.0,
    tau: float = 1.0,
) -> tuple[Any, Any, Any, Any]:
    """Chunked prefill's keep-up rule, on scalars or arrays of ``B`` and ``load``: the chunk
    (``chunked_prefill``, or what ``B`` running a group's ``q`` decode tokens each leave of
    ``max_tokens``, at least 1), a prompt's chunk steps (``isl``: the tokens it computes), the
    prompts a group starts per step (``load`` requests over a request's steps, ``tau`` tokens
    a decode step) and the prompt tokens they bring a step: the prompts keep up while these
    are at most the chunk. The plan's (:func:`chunk_load`) and the search's chunked points
    (``search_space._chunk_rows``) are this one rule."""
    chunk: Any = chunked_prefill
    if max_tokens is not None:  # a chunk is what the decode tokens leave of the budget
        chunk = np.maximum(1.0, np.minimum(float(chunked_prefill), max_tokens - np.ceil(B * q)))
    steps = np.ceil(isl / chunk)
    n = load / request_steps(steps, osl, tau)
    return chunk, steps, n, n * isl


def chunk_capacity(mix: MixTiming) -> float:
    """The most requests per group a closed loop runs whose prompts' chunks the steps keep up
    with: the prompt tokens they bring a step (:func:`chunk_load`'s ``P``) at most the chunk a
    step carries (infinite: whole prompts, or disaggregated). Past it an engine's steps carry
    a chunk each and the other prompts wait in its queue (:func:`closed_loop`); a search's
    chunked points are these batches (``search_space``'s ``chunk >= P``)."""
    req = mix.req
    if req.mode != "aggregated" or not req.chunked_prefill:
        return math.inf

    def over(b: float) -> bool:
        chunk, _, _, P = chunk_load(mix, max(b, 1.0), float(set_load(b, mix.groups)))
        return chunk < P

    lo, hi = 0.0, 1.0
    while not over(hi):
        lo, hi = hi, 2.0 * hi
        if hi > 2.0**50:
            return math.inf
    for _ in range(200):  # P rises and the chunk falls with the batch: one crossing
        mid = 0.5 * (lo + hi)
        if not lo < mid < hi:
            break
        lo, hi = (lo, mid) if over(mid) else (mid, hi)
    return lo


def chunk_fluid(P: Any, isl: int, mb: Any, cached: int = 0) -> dict[str, Any]:
    """The step arguments of a group carrying ``P`` prompt tokens every step (chunked prefill
    at full load): a share of one prompt attending the half of it before (so that a prompt's
    steps attend its ``isl^2 / 2`` pairs), or ``P / isl`` whole prompts; ``isl`` the tokens a
    prompt computes, after ``cached`` found cached (prefix caching), which they attend too."""
    P = np.maximum(np.asarray(P, dtype=np.float64), 1.0)
    N = np.maximum(P / isl, 1.0)
    pre = cached + np.maximum(isl - P, 0.0) / 2
    return dict(pf_N=N / mb, pf_q=np.minimum(P, isl), pf_pre=pre)


def chunked_figures(
    n: Any, steps: Any, share: Any, t_step: Any, t_fluid: Any, S: Any, hold: Any = 1.0
) -> tuple[Any, Any]:
    """Chunked prefill's cycle and TTFT from its steps (numpy arrays or floats): ``n`` prompts
    a group starts per step, each in ``steps`` chunk steps taking ``S`` together; ``share``
    of the steps carry a chunk (one group: ``n x steps``); ``t_step`` a decode step,
    ``t_fluid`` a step carrying the prompt tokens the load brings.

    While a group's chunk steps are at most one a step (``x = n steps <= 1``) the cycle is
    ``(1 - share) t_step + share S / steps``: for one group the decode step plus ``n`` times
    what the prompt's chunk steps add, the work a whole prompt in one step adds in the
    in-flight model, so both count a prompt's prefill in TPOT alike. A request then waits for
    the step in progress or, when its group is running another prompt's chunks, for the
    rest of them (``E[T^2] / 2 E[T]`` over the decode steps and the prompts' runs of chunk
    steps: a budget beyond the prompt gives the in-flight model's wait), then its own steps.
    Beyond one chunk a step every step carries ``t_fluid`` and the wait is the runs' term,
    ``n S^2 / (2 cycle)``, at least half a step (continuous at ``x = 1``: it was half a step
    alone, and a closed loop's TTFT fell as the load rose past it). ``hold``: the prompts one
    step's chunk carries at once (``chunk / isl`` for prompts shorter than the chunk, else 1;
    :func:`chunk_hold`): the engines fill a step's token budget with every prompt waiting, so
    the runs ahead of a new prompt share the steps ``hold`` at a time (the wait's runs term
    over ``hold``: 100-token prompts under an 8,192-token chunk were held one a step, a
    deployment serving 368 requests a second in a closed loop refused 150 a second)."""
    x = np.asarray(n * steps, dtype=np.float64)
    discrete = x <= 1.0 + 1e-12
    cycle = np.where(discrete, (1 - share) * t_step + share * S / steps, t_fluid)
    rest = np.maximum(1.0 - x, 0.0)  # the share of the steps outside the group's runs
    other = np.maximum(cycle - n * S, 0.0)  # their time a step
    other2 = np.divide(other**2, rest, out=np.zeros_like(x), where=rest > 1e-12)
    # beyond one chunk a step the runs in progress still hold a new prompt up: rate x S^2 / 2
    # (n S^2 / 2 cycle, the discrete wait's own term, where the other steps have no share
    # left), at least half a step; at x = 1 the two agree (a closed loop's TTFT fell 24% there)
    wait = np.where(
        discrete,
        (other2 + n * S**2) / (2 * cycle),
        np.maximum(n * S**2 / (2 * cycle * hold), cycle / 2),
    )
    return cycle, wait + S


def chunk_hold(chunk: Any, isl: Any) -> Any:
    """Prompts one step's chunk carries at once: ``chunk / isl`` for prompts shorter than the
    chunk (the step's token budget filled with the prompts waiting), else 1."""
    return np.maximum(np.asarray(chunk, dtype=np.float64) / isl, 1.0)


#: Most chunk steps of one prompt timed one by one (chunked prefill); the others interpolated.
_MOST_CHUNKS = 512


def _arrivals_cycle(
    mix: MixTiming,
    B: float,
    mb: float,
    dec: StepTimes,
    t_step: float,
    rate: float,
    in_system: float,
) -> tuple[float, float]:
    """In-flight batching under random arrivals at ``rate`` per group: each step carries the
    prompts that arrived during the one before (:mod:`mlacalc.serving.arrivals`) at the
    ``g`` synced groups together (the slowest group sets the step,
    :mod:`mlacalc.serving.ranks`); the mean step and the TTFT."""
    req, lay, t_pf, k_max, g = mix.req, mix.req.lay, mix.t_pf, mix.k_max, mix.groups
    separate = req.prefill_pass == "separate"
    # t[J]: a step carrying J prompts over the g synced groups (one group: its own prompts),
    # the slowest group prefilling ceil(J / g) of them, the experts J / g per group; timed at
    # every J or, past the arrivals model's exact states (short prompts: thousands of J), at
    # the first J of each of its bins and interpolated between (bounded in time and memory)
    states = np.arange(g * k_max + 1, dtype=np.float64)
    J = sample_states(len(states)).astype(np.float64)
    slow = np.ceil(J / g - 1e-9)
    per, moe = micro_batch_prompts(slow, J / g, mb)  # whole prompts in one micro-batch
    mixed = mix.sm.step(
        overlap=req.overlap,
        dec_B=B / mb,
        dec_q=mix.q,
        dec_S=mix.S_avg,
        pf_N=per,
        pf_moe=moe,
        **prompt_args(req),
    )
    stages = np.interp(states, J, mixed.stage_seconds)
    t = lay.pp * stages + (t_step - lay.pp * float(dec.stage_seconds[0]))
    if separate:  # the prompts' own pass, then the decode pass
        t = t_step + t_pf[np.ceil(states / g - 1e-9).astype(int)]
    chain = step_chain(t, rate * g)
    # the set is busy while a request is on it: with requests on it as random as their
    # arrivals, a share 1 - exp(-L) of the time; an idle set runs the prompt at once (its
    # own pass then the decode pass, when they are separate)
    busy = 1.0 - math.exp(-in_system * g)
    alone = mix.prefill_alone + (t_step if separate else 0.0)
    return chain.mean_step_s, busy * chain.ttft_s + (1.0 - busy) * alone


def set_load(in_system: Any, groups: int) -> Any:
    """Requests per group on a synced set of ``groups`` that holds a request (at least one on
    the set; one group: at least one on it), from ``in_system`` per group on average. A closed
    loop's steps are timed with these requests' prompts: fewer requests than groups bring the
    set only their own (one request alone: its prompt once in ``osl`` steps, not a prompt
    from every group), so that throughput, TTFT and TPOT keep Little's law."""
    return np.maximum(np.asarray(in_system, dtype=np.float64) * groups, 1.0) / groups


def others_share(in_system: Any, groups: int, B: Any, closed: bool = True) -> tuple[Any, Any]:
    """What one request sees of the others: the share of the prompts the steps are timed
    with (``B`` per group, at least 1) that are other requests' (its own prompt runs before
    its first token, so it is in its TTFT, never between two of its tokens), and the chance
    another request is on the synced set (none: the GPUs idle until it comes, and its prompt
    runs at once). ``in_system``: requests per group (mean, below 1 where a group idles
    between them). A closed loop of ``N`` in flight: the other ``N - 1``, another always on
    the set from 2 in flight. Random arrivals (``closed`` false): the others arrive at the
    rate whatever the request does, ``in_system`` per group, on the set a share ``1 -
    exp(-L)`` of the time (``L`` requests on it on average)."""
    L = groups * np.asarray(in_system, dtype=np.float64)
    B = groups * np.asarray(B, dtype=np.float64)
    if not closed:
        return L / B, 1.0 - np.exp(-L)
    others = np.maximum(L - 1.0, 0.0)
    return others / B, np.minimum(others, 1.0)


def _in_flight_cycle(
    mix: MixTiming, B: float, mb: float, t_step: float, in_system: float
) -> tuple[float, float, float]:
    """In-flight batching in a closed loop: ``n`` prompts arrive per group per step in steady
    state; each group's ``k = ceil(n)`` in a share ``p = n / k`` of its steps, independently
    over the ``g`` synced groups (:mod:`mlacalc.serving.ranks`): a share ``1 - (1 - p)^g`` of
    the steps carry prompts, the slowest group prefilling ``k`` and the experts seeing the
    set's ``g n`` over that share, per group;
    the mean step, the TTFT and the step between two tokens of one request: the decode step
    plus the others' prompts' share of what the prompts add (:func:`others_share`: one
    request alone decodes at the decode step, its prompt in its TTFT)."""
    req, lay, t_pf, k_max = mix.req, mix.req.lay, mix.t_pf, mix.k_max
    load = float(set_load(in_system, mix.groups))
    n = load / request_steps(1, req.osl, mix.tau)
    _, share, slow, mean = (float(x) for x in synced_prompts(n, mix.groups, k_max))
    per, moe = (float(x) for x in micro_batch_prompts(slow, mean, mb))
    mixed = mix.sm.step(
        overlap=req.overlap,
        dec_B=B / mb,
        dec_q=mix.q,
        dec_S=mix.S_avg,
        pf_N=per,
        pf_moe=moe,
        **prompt_args(req),
    )
    t_mix = lay.pp * float(mixed.stage_seconds[0])
    if req.prefill_pass == "separate":
        t_mix = t_step + float(t_pf[int(slow)])
    cycle = (1 - share) * t_step + share * t_mix
    if n > mean:  # more prompts than one step batches
        cycle += (n - mean) * t_pf[k_max] / k_max
    ratio, busy = (float(x) for x in others_share(in_system, mix.groups, load))
    gap = t_step + (cycle - t_step) * ratio
    # the prompt waits for the step in progress, then its own: half a step on average, a
    # prompt step's half as often as the steps carry the others' prompts (the residual of a
    # random arrival, E[T^2] / 2 E[T], over the decode and prompt steps); with no other
    # request on the set, its prompt runs at once, alone
    alone = mix.prefill_alone + (t_step if req.prefill_pass == "separate" else 0.0)
    busy_ttft = in_progress(t_step, t_mix, share * ratio) + t_mix
    return cycle, busy * busy_ttft + (1.0 - busy) * alone, gap


def in_progress(t_step: Any, t_mix: Any, share: Any) -> Any:
    """The mean wait of a request arriving at random for the step in progress, when a share
    ``share`` of the steps take ``t_mix`` and the others ``t_step``: ``E[T^2] / (2 E[T])``."""
    mean = (1 - share) * t_step + share * t_mix
    return ((1 - share) * t_step**2 + share * t_mix**2) / (2 * mean)


def closed_loop(mix: MixTiming, max_batch: int, concurrency: float) -> Load:
    """An aggregated deployment with ``concurrency`` requests in flight: as many run as fit,
    and, under chunked prefill, as many as a chunk a step keeps up with
    (:func:`chunk_capacity`); the others wait their turn (Little's law). Past that many, steps
    timed with the prompt tokens the load brings beyond the chunk ran prompts faster than an
    engine's chunk lets it, and TTFT fell as the requests rose (DeepSeek-V3 DP-attention 8 on
    8 H200, chunk 512, 2,000 + 2: 604.1 ms at 11 in flight, 594.1 ms at 12)."""
    lay, osl = mix.req.lay, mix.req.osl
    running = min(concurrency, float(max_batch))
    chunk_bound = None
    held = chunk_capacity(mix) * lay.dp
    if running > held:  # the prompt tokens the requests would bring a step, and the chunk
        b = running / lay.dp
        chunk, _, _, P = chunk_load(mix, max(b, 1.0), float(set_load(b, mix.groups)))
        running, chunk_bound = held, (float(P), chunk)
    f = step_figures(mix, running / lay.dp)
    queued = max(concurrency - running, 0.0)
    requests_per_s = f["rate"] / osl
    queue = queued / requests_per_s if queued else 0.0
    return Load(
        f=f,
        running=running,
        concurrency=concurrency,
        queue=queue,
        queued=queued,
        chunk_bound=chunk_bound,
    )


def open_loop(mix: MixTiming, max_batch: int, request_rate: float) -> Load:
    """An aggregated deployment under random arrivals at ``request_rate``: the running batch
    is the arrival rate times the time a request stays (a fixed point), the queue unbounded
    where the deployment does not keep up."""
    req, lay, osl = mix.req, mix.req.lay, mix.req.osl
    conc = 1.0
    in_flight = req.mode == "aggregated" and not req.chunked_prefill
    group_rate = request_rate / lay.dp if in_flight else None
    # what the full batch serves (a closed loop there): a rate at or past it never settles
    # (under chunked prefill at most the batch whose prompts a chunk a step keeps up with)
    held = chunk_capacity(mix) * lay.dp
    capacity = step_figures(mix, min(float(max_batch), held) / lay.dp)["rate"] / osl
    if request_rate >= capacity:  # the requests in flight grow without bound
        chunk = chunk_load(mix, max(held / lay.dp, 1.0), 0.0)[0] if held < max_batch else None
        return _overloaded(mix, max_batch, request_rate, math.inf, chunk=chunk)

    def settle(conc: float) -> tuple[dict[str, Any], float, float]:
        # Little's law: the requests in flight are the rate times a request's latency, its
        # wait, TTFT and the osl - 1 gaps after its first token
        f = step_figures(mix, min(conc, float(max_batch)) / lay.dp, group_rate, closed=False)
        queue = 0.0 if in_flight else _chunked_queue(mix, f, request_rate / mix.p_lay.dp)
        return f, queue, request_rate * (queue + f["ttft"] + (osl - 1) * f["tpot"])

    lo, hi = 0.0, math.inf  # requests in flight below / above the fixed point
    for _ in range(100):
        f, queue, new = settle(conc)
        if math.isinf(queue):  # the chunk steps saturate before the requests in flight settle
            return _overloaded(mix, max_batch, request_rate, math.inf, chunk=f["chunks"][1])
        if abs(new - conc) <= 1e-5 * conc:
            break
        lo, hi = (max(lo, conc), hi) if new > conc else (lo, min(hi, conc))
        # the whole step to Little's law's requests in flight where they stay inside the
        # bracket, halfway else: where the latency rises with the requests in flight, ``new``
        # from below the fixed point is below it too (above: above it), so the iteration
        # still rises (falls) to the fixed point nearest the start, as the half steps did;
        # the latency barely moves with the requests in flight, and the half steps alone
        # took about 20 settles (each a set of kernel predictions) to 1e-5, the whole 2-8
        conc = new if lo < new < hi else 0.5 * conc + 0.5 * new
    else:
        # no fixed point: the latency jumps down across it (a step faster at a slightly larger
        # batch), and the iteration cycles about the jump; bisect to it and take the side
        # nearer to Little's law
        while lo < hi < math.inf and hi - lo > 1e-6 * hi:
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if settle(mid)[2] > mid else (lo, mid)
        ends = [(abs(out[2] / c - 1.0), c, out) for c in (lo, hi) if c > 0 for out in [settle(c)]]
        _, conc, (f, queue, _) = min(ends, key=lambda e: e[0])
    running = min(conc, float(max_batch))
    if conc > max_batch or not math.isfinite(conc):
        return _overloaded(mix, max_batch, request_rate, conc)
    return Load(f, running, running, queue, 0.0, conc)


def _chunked_queue(mix: MixTiming, f: dict[str, Any], rate: float) -> float:
    """Chunked prefill under random arrivals at ``rate`` per group: the wait beyond the
    closed loop's for the group's prefill, one prompt's run of chunk steps at a time (in-flight
    batching's waits are in its step chain). Its M/D/1 wait is ``rho S / (2 (1 - rho))``
    with ``rho = rate x S`` (``S`` the run); the closed loop's TTFT holds ``rho S / 2`` of it
    already (the rest of a run in progress), so the queue adds ``rho^2 S / (2 (1 - rho))``.
    ``rho`` is at least the share of the steps that carry a chunk (``n x steps``); at ``rho
    >= 1`` (past one chunk step a step, the prompts need more tokens a step than the chunk
    carries) the runs cannot keep up and the queue grows without bound (infinite): the wait
    rises to it continuously (it used to change to passes of whole prompts batched
    as they arrive there, ``t_pf[k]``, and TTFT fell tenfold as the rate rose past the
    seam: a new-user trial's Llama-3.3-70B at chunk 2,048, 2.813 s at 8.0/s, 0.295 s at
    8.05/s)."""
    steps, _, S, hold = f["chunks"]
    n = rate * f["cycle"]  # prompts a group starts per step
    # the share of the time a run holds the group, at least the share of the steps that
    # carry a chunk (a step's place for a chunk is the server: past one a step, none is left),
    # over the prompts a step's chunk carries at once (chunk_hold: short prompts share a step)
    rho = max(rate * S, n * steps) / hold
    if rho >= 1.0:
        return math.inf
    return rho * rho / (2 * (1 - rho)) * S


def _overloaded(
    mix: MixTiming, max_batch: int, request_rate: float, conc: float, chunk: int | None = None
) -> Load:
    """Requests arriving faster than the deployment serves them: the batch fills, the queue
    and TTFT grow without bound, and the server runs saturated, every request that finishes
    replaced by one from the queue (a closed loop at the largest batch), so what it serves is
    its capacity there, not what the arrival rate's prompts per step would leave of it.
    ``chunk``: chunked prefill's runs of chunk steps saturate first (that chunk, tokens); the
    batch is then the closed loop's whose prompts a chunk a step keeps up with, at most
    (:func:`chunk_capacity`: timed at the largest batch, its steps carried the prompt tokens
    of that batch beyond the chunk), and ``chunk_bound`` says so (the prompt tokens the
    arrivals bring a step, the chunk): chunked prefill binds, not the KV cache (the binding
    named ``kv capacity`` where the cache held more than twice the requests running).
    Whole prompts (no chunk) arriving at or past what their passes alone finish
    (``mix.pf_capacity``: passes of the most prompts one batches, the decode left out) set
    ``prompt_bound`` where the full batch serves more than half their rate (their passes
    take most of its time): no larger cache serves more than their rate (Llama-3.1-8B H100
    TensorRT-LLM 2000+20 at 30/s served 23.4/s at 228 running and, fp8's 456, 24.3/s; its
    passes finish 24.1/s)."""
    lay, osl = mix.req.lay, mix.req.osl
    running = min(float(max_batch), chunk_capacity(mix) * lay.dp)
    f = step_figures(mix, running / lay.dp)
    capacity = f["rate"] / osl
    chunk_bound = None
    whole = chunk is None and mix.req.mode == "aggregated" and not mix.req.chunked_prefill
    # and the passes take most of the time at the full batch (what it serves over what they
    # finish alone, the share of the time its prompts' passes would take batched k_max a
    # pass, past one half): else the batch binds, a larger one serving more (32 running
    # serving 5.15/s where the passes finish 24.4/s)
    prompt_bound = whole and request_rate >= mix.pf_capacity and capacity > mix.pf_capacity / 2
    if chunk is not None:  # the prompt tokens the arrivals bring a group's step, and the chunk
        brought = request_rate / lay.dp * f["cycle"] * mix.req.computed_tokens
        chunk_bound = (float(brought), chunk)
        warning = (
            f"request rate {request_rate:g}/s exceeds what chunked prefill sustains: the "
            f"prompts' runs of {chunk:,}-token chunk steps take the whole time of a group "
            "before the requests in flight settle, and the queue grows without bound; a larger "
            "chunk (--chunked-prefill, --max-tokens) or more GPUs serve more"
        )
    elif prompt_bound:
        warning = (
            f"request rate {request_rate:g}/s exceeds what the prompts' passes sustain: passes "
            f"of {mix.k_max} prompt{'s' * (mix.k_max != 1)} alone finish "
            f"{mix.pf_capacity:.3g}/s, so the queue grows without bound whatever the batch (at "
            f"its largest batch ({max_batch:,} running) it serves {capacity:.3g}/s); more GPUs "
            "serve more"
        )
    elif request_rate >= capacity:
        warning = (
            f"request rate {request_rate:g}/s exceeds what the deployment sustains: at its "
            f"largest batch ({max_batch:,} running) it serves {capacity:.3g}/s and the queue "
            "grows without bound"
        )
    else:
        warning = (
            f"random arrivals at {request_rate:g}/s need more requests in flight than the "
            f"largest batch ({max_batch:,}) holds: the queue grows without bound in this "
            f"model, while the full batch serves {capacity:.3g}/s (at the limit)"
        )
    return Load(
        f,
        running,
        running,
        math.inf,
        math.inf,
        conc,
        False,
        warnings=(warning,),
        chunk_bound=chunk_bound,
        prompt_bound=prompt_bound,
    )
