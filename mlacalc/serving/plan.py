"""Capacity planning and serving figures for one deployment.

``plan`` answers, for a model on ``gpus`` devices in a parallel layout (tensor, data,
pipeline and expert parallelism, DP-attention; see :mod:`mlacalc.serving.layout`):

- **what fits**: the weights each GPU holds, the KV cache left for the sequences (pages of
  ``page_size`` tokens), the largest batch at a context and the longest context at a batch,
  and what fills each GPU's memory. A deployment that does not fit is an answer
  (``fits=False`` and ``overflow`` says what overflows), not an error;
- **how fast**: the decode step of one GPU from its kernel list under the layout,
  communication included (:mod:`mlacalc.serving.gpu_step`), timed by the calibrated kernel model;
- **serving figures** when a request mix is given (``isl``, ``osl`` and ``concurrency`` or
  ``request_rate``), in steady-state continuous batching:

  - ``tpot_s`` (time per output token, the inter-token latency): the decode step at the
    running batch with the average context of the output (``isl + osl / 2``), plus, when
    prefill shares the GPUs (aggregated), the prefill work the step rate brings in
    (``batch x tokens-per-step / osl`` prompts per step), divided by the tokens one step
    yields per sequence (``1 + a + a^2 ...`` with MTP at acceptance rate ``a``);
  - ``ttft_s``: the wait for the running step (half a step on average), then the step that
    runs the causal prefill of the prompt (batched with the prompts arriving with it) beside
    the running decode batch, and queueing: with more concurrent requests than fit,
    the extra wait their turn (Little's law). With an arrival rate (random arrivals), each
    step carries the prompts that arrived during the one before
    (:mod:`mlacalc.serving.arrivals`): a request waits for the step in progress (arrivals
    fall in long steps more often), then for its own step, as long as the prompts batched
    with it make it; a group that idles between requests (fewer than one on it on average)
    starts a prompt at once as often as it is idle. ``output_lag_steps=n``: each token
    reaches the client ``n`` steps after the step that computes it (an engine that launches
    the next step before reading this one's tokens back: TTFT grows by ``n`` steps, ITL does
    not change). ``prefill_pass="separate"``: a step runs its prompts in a forward pass of
    their own, then the decode pass of the running batch (the new requests with it), and
    the first token leaves with the step; ``"fused"`` (default) runs them in one pass.
    ``chunked_prefill=N`` mixes up to ``N`` prompt tokens into every step (the cycle
    carries the prompt tokens the load brings, ``batch x tokens-per-step x isl / osl``);
    the prompt then takes ``ceil(isl / N)`` steps, the ``j``-th carrying ``min(N, isl - j N)``
    of its tokens (after the ``j N`` before, causal) beside the decode batch: TTFT is the
    wait for the step in progress (half a cycle), then the sum of those steps, never below
    about one prefill pass of the prompt. Disaggregated serving runs the prompt on a
    separate prefill pool, whose every GPU holds its weights and the cache of one prompt at
    least (a pool that does not is ``fits=False``, binding ``"prefill pool: ..."``); a pass
    batches ``k_max = 16384 // isl`` prompts, or the fewer whose cache fits: with ``d``
    prompts/s on a prefill group and ``t_pf[k]`` a pass of ``k`` prompts, the group runs
    passes of the smallest ``k`` with ``k / t_pf[k] >= d`` (``k_max`` when none keeps up:
    throughput is then prefill-bound), and a prompt waits for the pass in progress,
    ``rho t_pf[k] / 2`` with ``rho = d t_pf[k] / k`` the share of the time a pass runs (an
    M/D/1 wait under an arrival rate instead), then its own pass ``t_pf[k]``, then the KV
    transfer over the network; its decode step has no prefill in it. The requests in flight
    are counted by phase: in a closed loop of ``N`` requests each cycles through the prefill
    pool (wait and pass), the KV transfer and ``osl`` decode steps; the decode batch ``D`` is
    the requests in their decode phase, serving ``X(D) = D / (osl x TPOT)`` requests/s (the
    prompt rate: ``d = X / groups``), and ``N = D + X (wait + t_pf[k] + transfer)`` is
    solved for ``D``. ``D`` is capped by the KV cache and by the prefill pool's rate; the
    requests beyond the cap queue, TTFT growing by ``N_extra / X`` (Little's law), so
    throughput is ``N / (TTFT + osl x TPOT) x osl``. Under an arrival rate ``R`` the decode
    batch is ``R x osl x TPOT`` (the prompts still in prefill are not decoding), and one pass
    size, the smallest that keeps up with ``R / groups``, gives the pass and its M/D/1 wait;
  - ``output_tokens_per_s`` for all requests, per GPU (all GPUs of both pools) and per user:
    the running requests over the TPOT (with fewer requests than attention groups, only the
    groups holding one make tokens).

Pipeline parallelism splits the running batch into ``pp`` micro-batches in flight: a token
takes ``pp`` slowest-stage times. ``overlap="tbo"`` (two-batch overlap, as DeepSeek and SGLang
run it) splits each step into two micro-batches whose communication hides behind the other's
computation; ``"none"`` adds them.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mlacalc.cost.engine import as_model as _model
from mlacalc.cost.engine import kv_cache
from mlacalc.data import PROFILES
from mlacalc.hardware.catalogue import HardwareSpec, load_hardware
from mlacalc.models.loading import ModelConfig, beyond_positions
from mlacalc.serving.layout import (
    Layout,
    kv_bytes_per_sequence_per_gpu,
    kv_bytes_per_token_per_gpu,
    make_layout,
    weight_bytes_by_part,
    weight_format,
    weights_per_gpu,
)
from mlacalc.words import defaults
from mlacalc.words.dtypes import KVLayout, canonical_dtype, resolve_kv_layout
from mlacalc.words.errors import DoesNotFitError, InvalidArgumentError
from mlacalc.words.units import human_bytes

if TYPE_CHECKING:
    from mlacalc.serving.gpu_step import StepModel

__all__ = ["MODES", "OVERLAPS", "PREFILL_PASSES", "DoesNotFitError", "Plan", "plan"]

OVERLAPS = ("none", "tbo")
#: How in-flight batching runs a step's prompts: in the decode batch's forward pass (weights
#: read once), or in a pass of their own before it.
PREFILL_PASSES = ("fused", "separate")
MODES = ("aggregated", "disaggregated")
#: Prompt tokens a prefill pass batches on one attention group (SGLang's and DeepSeek's
#: prefill runs use 16K tokens per GPU).
PREFILL_TOKENS = 16384


@dataclass(frozen=True)
class Plan:
    """One deployment: what fits, the decode step, and the serving figures of a request mix."""

    model: str
    hardware: str
    gpus: int
    tp: int
    dp: int
    ep: int
    weight_dtype: str
    kv_layout: str
    page_size: int
    memory_per_gpu_bytes: int
    usable_per_gpu_bytes: int
    weights_per_gpu_bytes: int
    kv_budget_per_gpu_bytes: int
    kv_bytes_per_token_per_gpu: int
    kv_tokens_per_gpu: int
    #: bytes one sequence of the planned context holds on a GPU, every layer kind as it keeps it
    kv_bytes_per_sequence_per_gpu: int
    #: the context each sequence was sized at: ``seq_len`` as given, or ``isl + osl`` under a
    #: request mix (the ``seq_len`` argument does not apply there)
    seq_len: int
    batch: int | None
    max_batch: int
    #: the longest context at ``batch``: what memory allows, capped at the model's position
    #: limit (``max_position_embeddings``); ``max_context_memory`` keeps memory's own figure
    max_context: int | None
    max_position_embeddings: int | None
    decode_batch: int | None
    decode_step_s: float | None
    decode_tokens_per_s: float | None
    decode_bound: str | None
    prefill_s: float | None
    binding: str
    fits: bool = True
    overflow: str | None = None
    pp: int = 1
    dp_attention: bool = False
    layout: str = ""
    memory: dict[str, int] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    mode: str = "aggregated"
    overlap: str = "none"
    isl: int | None = None
    osl: int | None = None
    concurrency: float | None = None
    request_rate: float | None = None
    running_batch_per_group: float | None = None
    queued: float | None = None
    ttft_s: float | None = None
    tpot_s: float | None = None
    output_tokens_per_s: float | None = None
    output_tokens_per_s_per_gpu: float | None = None
    output_tokens_per_s_per_user: float | None = None
    tokens_per_step: float = 1.0
    prefill_gpus: int = 0
    kv_transfer_s: float | None = None
    step_compute_s: float | None = None
    step_comm_s: float | None = None
    sustainable: bool = True
    kernels: tuple[dict[str, Any], ...] = ()
    #: what ``kernels`` covers, in words, where it is not the whole step of one GPU: one of
    #: the two micro-batches of a two-batch-overlap step, or one pipeline micro-batch through
    #: every layer (the stages together); "" for the whole step of one GPU
    kernels_scope: str = ""
    #: the step's link time, exposed or not: ``step_comm_s`` but, under two-batch overlap,
    #: both micro-batches' links, of which ``step_comm_s`` is what the overlap leaves exposed
    step_links_s: float | None = None
    #: how the weights are sized: the checkpoint's scheme ("checkpoint fp8 block 128x128")
    #: when no weight dtype was chosen and the model declares one, else the weight dtype
    weight_format: str = ""
    #: how a step runs its prompts beside the decode batch ("fused" or "separate")
    prefill_pass: str = "fused"
    #: steps between computing a token and the client getting it (aggregated serving)
    output_lag_steps: int = 0
    #: the longest context at ``batch`` that memory allows, before the window's cap
    max_context_memory: int | None = None
    #: bytes a token adds on a GPU in the layers that keep every token (full, MLA, DSA with
    #: its indexer key); a sequence is this times its paged context plus the fixed part
    kv_bytes_per_token_full_layers_per_gpu: int = 0
    #: bytes a sequence of the planned context holds on a GPU beyond that: its sliding and
    #: chunked layers' windows and its linear layers' states
    kv_bytes_fixed_per_sequence_per_gpu: int = 0
    #: the running sequences (all groups) the decode step was timed at: the batch of a
    #: capacity plan (the largest that fits when the batch asked does not), the mean running
    #: batch of a request mix (a mean, so not always whole; ``decode_batch`` rounds it, at
    #: least 1: below one per group the step is timed at one per group, as a group holding a
    #: request runs it)
    decode_running: float | None = None
    #: the prefill pool's layout (disaggregated serving)
    prefill_layout: str = ""
    prefill_tp: int | None = None
    prefill_ep: int | None = None
    prefill_dp_attention: bool | None = None
    prefill_redundant_experts: int | None = None
    #: the calibration profile that timed the kernels, and how this device was predicted with
    #: it ("calibrated on H100-SXM", "H200 by datasheet ratios from H100-SXM (...)")
    profile: str = ""
    calibration: str = ""

    @property
    def context(self) -> int:
        """The context one sequence of the plan holds (prompt + output, or ``seq_len``)."""
        return self.isl + self.osl if self.isl is not None else self.seq_len

    @property
    def kv_every_token(self) -> bool:
        """Whether every layer keeps every token at the per-token rate, so that a sequence
        is the per-token bytes times its (paged) context; false when sliding or chunked
        layers keep a window, linear layers a fixed state, or DSA layers indexer keys."""
        return (
            self.kv_bytes_fixed_per_sequence_per_gpu == 0
            and self.kv_bytes_per_token_full_layers_per_gpu == self.kv_bytes_per_token_per_gpu
        )

    def queue_text(self) -> str:
        """Requests in flight and queued, in words ("unbounded" when the queue grows)."""
        if self.concurrency is None:
            return "-"
        queued = (
            "unbounded"
            if self.queued is not None and not math.isfinite(self.queued)
            else f"{self.queued or 0:,.0f}"
        )
        return f"{self.concurrency:,.1f} (queued {queued})"

    def ttft_text(self) -> str:
        """The time to first token in ms, or "unbounded" when the queue grows without bound."""
        if self.ttft_s is None:
            return "-"
        if not math.isfinite(self.ttft_s):
            return "unbounded (the queue grows without bound)"
        return f"{self.ttft_s * 1e3:,.1f} ms"

    def longest_context_text(self) -> str:
        """The longest context at the batch, in words: the model's position limit when memory
        allows more ("131,072 tokens (the model's max_position_embeddings; memory allows
        1,731,104)")."""
        if self.max_context is None:
            return "-"
        text = f"{self.max_context:,} tokens"
        if self.max_context_memory is not None and self.max_context_memory > self.max_context:
            # the cap is the model's position limit, not an attention window (a model with
            # sliding layers has windows far below it)
            text += (
                f" (the model's max_position_embeddings; memory allows {self.max_context_memory:,})"
            )
        return text

    @property
    def total_gpus(self) -> int:
        """Every GPU of the deployment: ``gpus`` (the decode pool's, disaggregated) and the
        prefill pool's."""
        return self.gpus + self.prefill_gpus

    def to_dict(self) -> dict[str, Any]:
        """Every field, JSON-safe: an unbounded figure (TTFT and the queue when requests
        arrive faster than the deployment serves them) is ``None``, with ``sustainable``
        false; ``total_gpus`` adds the prefill pool's GPUs to the decode pool's ``gpus``."""
        out = {
            k: (None if isinstance(v, float) and not math.isfinite(v) else v)
            for k, v in self.__dict__.items()
        }
        out["total_gpus"] = self.total_gpus
        out["memory"] = dict(self.memory)
        out["warnings"] = list(self.warnings)
        out["kernels"] = [dict(k) for k in self.kernels]
        return out


def _check_int(name: str, value: Any, allow_none: bool = True, minimum: int = 1) -> int | None:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise InvalidArgumentError(name, f"must be an integer >= {minimum}, got {value!r}")
    return int(value)


def _check_number(
    name: str,
    value: Any,
    lo: float,
    hi: float | None = None,
    allow_none: bool = True,
    closed_hi: bool = False,
) -> float | None:
    if value is None and allow_none:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value < lo
        or (hi is not None and (value > hi if closed_hi else value >= hi))
    ):
        span = f"[{lo}, {hi}{']' if closed_hi else ')'}" if hi is not None else f">= {lo}"
        raise InvalidArgumentError(name, f"must be a number in {span}, got {value!r}")
    return float(value)


def _max_context(
    m: ModelConfig, layout: KVLayout, lay: Layout, page_size: int, include_mtp: bool, room: int
) -> int:
    """The longest context (a multiple of ``page_size``) whose sequence fits in ``room`` bytes
    on a GPU; a bisection, since the bytes of a sequence grow with its context, by layer kind.
    A model whose every layer stops growing (sliding, linear) is capped at 2^40 tokens."""

    def fits(pages: int) -> bool:
        return (
            kv_bytes_per_sequence_per_gpu(m, layout, lay, pages * page_size, page_size, include_mtp)
            <= room
        )

    if not fits(1):
        return 0
    lo, hi = 1, 2
    while fits(hi) and hi < (1 << 40) // page_size:
        lo, hi = hi, hi * 2
    if fits(hi):
        return hi * page_size
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo * page_size


def _bound(
    hw: HardwareSpec,
    st_kernels: list[dict[str, Any]],
    compute_s: float,
    comm_s: float,
    overlap: str = "none",
    links_s: float | None = None,
) -> str:
    """Which roof the step is nearest: communication when the links take longer than the
    kernels, else compute or memory by the step's summed FLOPs and bytes at the datasheet
    rates. Under two-batch overlap ``comm_s`` is the link time the overlap leaves exposed and
    ``links_s`` all of it (both micro-batches'): the step is communication-bound when the
    links take longer than the kernels, not whenever some link time is exposed (30 ms of a
    111 ms step whose links take 61 ms against 81 ms of kernels is compute-bound, its links
    partly exposed)."""
    links = comm_s if links_s is None else links_s
    if links > compute_s:
        return "communication"
    flops = sum(float(k["flops"][0]) * k["calls"] for k in st_kernels if not k["communication"])
    nbytes = sum(float(k["bytes"][0]) * k["calls"] for k in st_kernels if not k["communication"])
    return (
        "compute"
        if flops / hw.peak("bf16") > nbytes / hw.memory_bandwidth_bytes_per_s
        else "memory"
    )


def _links_s(kernels: list[dict[str, Any]], comm_s: float, overlap: str) -> float:
    """The step's link time, exposed or not: ``comm_s`` without overlap; under two-batch
    overlap, both micro-batches' links (``kernels`` are one micro-batch's)."""
    if overlap != "tbo":
        return comm_s
    return 2.0 * sum(float(k["seconds"][0]) for k in kernels if k["communication"])


def _kernels_scope(sm: StepModel, overlap: str, dec_B: float) -> str:
    """What the kernel rows of a step cover, in words, where it is not the whole step of one
    GPU (""): ``dec_B`` is the sequences per attention group of one pipeline micro-batch."""
    lay, layers = sm.lay, sm.m.num_hidden_layers
    per = " per attention group" if lay.dp > 1 else ""
    hidden = "links hidden behind the other's kernels as far as they go"
    if lay.pp == 1:
        if overlap != "tbo":
            return ""
        return (
            f"one of the two micro-batches of a two-batch-overlap step ({dec_B / 2:,.4g} "
            f"sequences{per}): the step runs every kernel twice, each micro-batch's {hidden}"
        )
    stage = max(nd + nm for nd, nm in sm.stage_counts)
    if overlap == "tbo":
        text = (
            f"one two-batch-overlap half ({dec_B / 2:,.4g} sequences{per}) of one pipeline "
            f"micro-batch ({dec_B:,.4g})"
        )
        runs = f"twice (the two halves, each one's {hidden}) for each of the {lay.pp}"
    else:
        text = f"one pipeline micro-batch ({dec_B:,.4g} sequences{per})"
        runs = f"for each of the {lay.pp}"
    return (
        f"{text} through all {layers} layers: the {lay.pp} pipeline stages together, so the "
        f"calls are the whole model's; a GPU holds its stage's layers (at most {stage}) and "
        f"runs them {runs} micro-batches in flight"
    )


def _kernel_rows(kernels: list[dict[str, Any]], i: int = 0) -> tuple[dict[str, Any], ...]:
    rows = []
    for k in kernels:
        if not float(k["seconds"][i]):
            continue  # a kernel this step does not run
        rows.append(
            {
                "name": k["name"],
                "kind": k["kind"],
                "dtype": k["dtype"],
                "part": k["part"],
                "calls": k["calls"],
                "flops_per_call": float(k["flops"][i]),
                "bytes_per_call": float(k["bytes"][i]),
                "seconds": float(k["seconds"][i]),
                "communication": k["communication"],
            }
        )
    return tuple(rows)


def plan(
    model: ModelConfig | str,
    hardware: HardwareSpec | str,
    gpus: int = 8,
    *,
    tp: int | None = None,
    dp: int | None = None,
    ep: int = 1,
    pp: int = 1,
    dp_attention: bool = False,
    weight_dtype: str | None = None,
    kv_dtype: str | KVLayout = "bf16",
    page_size: int = defaults.PAGE_SIZE,
    memory_reserve: float = defaults.MEMORY_RESERVE,
    seq_len: int | None = None,
    batch: int | None = None,
    include_mtp: bool = False,
    isl: int | None = None,
    osl: int | None = None,
    concurrency: float | None = None,
    request_rate: float | None = None,
    mode: str = "aggregated",
    prefill_gpus: int | None = None,
    prefill_tp: int | None = None,
    prefill_ep: int | None = None,
    prefill_dp_attention: bool | None = None,
    prefill_redundant_experts: int | None = None,
    chunked_prefill: int | None = None,
    overlap: str = "none",
    mtp_tokens: int = 0,
    mtp_acceptance: float | None = None,
    routing_imbalance: float = 1.0,
    redundant_experts: int = 0,
    output_lag_steps: int = 0,
    prefill_pass: str = "fused",
    profile: Any = None,
) -> Plan:
    """Fit a model on ``gpus`` devices in a layout; the decode step and, for a request mix, the
    serving figures (see the module docstring). With ``mode="disaggregated"``, ``gpus`` is
    the decode pool and ``prefill_gpus`` (by default as many) the prefill pool beside it:
    ``Plan.total_gpus`` GPUs in all.

    Examples
    --------
    >>> p = plan("deepseek-v3", "H200", 8, kv_dtype="bf16", seq_len=131072)
    >>> p.max_batch, p.binding, p.fits
    (4, 'kv capacity', True)
    >>> plan("deepseek-v3", "H100-SXM", 1).fits
    False
    """
    m = _model(model)
    hw = load_hardware(hardware)
    _check_int("page_size", page_size, allow_none=False)
    _check_int("seq_len", seq_len)
    _check_int("batch", batch)
    _check_number("memory_reserve", memory_reserve, 0.0, 1.0, allow_none=False)
    isl = _check_int("isl", isl)
    osl = _check_int("osl", osl)
    if seq_len is not None and isl is not None:
        # a request mix sizes each sequence at isl + osl: a context given beside it would be
        # dropped without a word
        raise InvalidArgumentError(
            "seq_len",
            "does not apply with isl/osl: a request's context is isl + osl; leave seq_len out",
        )
    if seq_len is None:
        seq_len = defaults.SEQ_LEN
    if (isl is None) != (osl is None):
        raise InvalidArgumentError(
            "osl" if osl is None else "isl", "give both isl and osl for serving figures"
        )
    concurrency = _check_number("concurrency", concurrency, 1.0)
    request_rate = _check_number("request_rate", request_rate, 0.0)
    if request_rate is not None and request_rate <= 0:
        raise InvalidArgumentError("request_rate", f"must be positive, got {request_rate!r}")
    if concurrency is not None and request_rate is not None:
        raise InvalidArgumentError(
            "request_rate", "give either concurrency or request_rate, not both"
        )
    if prefill_pass not in PREFILL_PASSES:
        raise InvalidArgumentError(
            "prefill_pass",
            f"must be one of {', '.join(PREFILL_PASSES)}, got {prefill_pass!r}",
        )
    if mode not in MODES:
        raise InvalidArgumentError("mode", f"must be one of {', '.join(MODES)}, got {mode!r}")
    if overlap not in OVERLAPS:
        raise InvalidArgumentError(
            "overlap", f"must be one of {', '.join(OVERLAPS)}, got {overlap!r}"
        )
    chunked_prefill = _check_int("chunked_prefill", chunked_prefill)
    for name, value in (
        ("prefill_gpus", prefill_gpus),
        ("prefill_tp", prefill_tp),
        ("prefill_ep", prefill_ep),
        ("prefill_dp_attention", prefill_dp_attention),
        ("prefill_redundant_experts", prefill_redundant_experts),
    ):
        if value is not None and mode != "disaggregated":
            raise InvalidArgumentError(name, "describes the prefill pool of mode='disaggregated'")
    if chunked_prefill is not None and mode == "disaggregated":
        raise InvalidArgumentError(
            "chunked_prefill", "mixes prompts into decode steps: aggregated mode only"
        )
    if isl is None and (
        concurrency is not None or request_rate is not None or mode != "aggregated"
    ):
        raise InvalidArgumentError("isl", "serving figures need the request mix: give isl and osl")
    mtp_tokens = _check_int("mtp_tokens", mtp_tokens, allow_none=False, minimum=0)
    output_lag_steps = _check_int("output_lag_steps", output_lag_steps, False, minimum=0)
    # both describe how an aggregated step without chunks runs its prompts and hands tokens out
    if prefill_pass != "fused" and (mode == "disaggregated" or chunked_prefill is not None):
        raise InvalidArgumentError(
            "prefill_pass",
            "describes aggregated steps that run whole prompts: leave it 'fused' with "
            + ("mode='disaggregated'" if mode == "disaggregated" else "chunked_prefill"),
        )
    if output_lag_steps and mode == "disaggregated":
        raise InvalidArgumentError(
            "output_lag_steps", "applies to aggregated serving: leave it 0 with disaggregated"
        )
    if mtp_tokens and not m.num_nextn_predict_layers:
        # the drafts run the model's MTP module (its weights held, its layer timed per draft
        # token): a model without one would get the speed-up at no cost
        raise InvalidArgumentError(
            "mtp_tokens",
            f"{m.label} has no MTP module (num_nextn_predict_layers is 0) to draft tokens "
            "with; leave mtp_tokens 0",
        )
    if mtp_tokens and mtp_acceptance is None:
        raise InvalidArgumentError(
            "mtp_acceptance", "give the draft tokens' acceptance rate with mtp_tokens"
        )
    if mtp_acceptance is not None and not mtp_tokens:
        # without draft tokens the rate would be dropped without a word
        raise InvalidArgumentError(
            "mtp_acceptance", "applies to draft tokens: give mtp_tokens (--mtp-tokens) with it"
        )
    acceptance = _check_number("mtp_acceptance", mtp_acceptance, 0.0, 1.0, closed_hi=True) or 0.0
    imbalance = _check_number("routing_imbalance", routing_imbalance, 1.0, allow_none=False)
    profile = _load_profile(profile)  # a bad name or file is refused before any work
    try:
        lay = make_layout(m, gpus, tp, dp, pp, ep, dp_attention, redundant_experts)
    except InvalidArgumentError as exc:
        if exc.argument != "tp" or tp is not None:
            raise
        # the tensor-parallel degree was not given: it follows from the GPUs (and dp, pp),
        # so the error names what was given
        arg = "gpus" if dp is None else "dp"
        src = "every GPU of a stage" if dp is None else "the GPUs of a stage over dp"
        raise InvalidArgumentError(
            arg,
            f"with no tp given, the tensor-parallel degree is {src} (gpus={gpus}"
            + (f", pp={pp}" if pp != 1 else "")
            + (f", dp={dp}" if dp is not None else "")
            + f"): {exc.message}; give tp (--tp)"
            + (
                ", or split the GPUs with dp (--dp) or dp_attention (--dp-attention)"
                if dp is None
                else " or another dp"
            ),
        ) from None
    if mode == "disaggregated":  # the prefill pool's layout, checked before anything is sized
        p_gpus = _check_int("prefill_gpus", prefill_gpus) or gpus
        p_lay = _prefill_layout(
            m,
            lay,
            p_gpus,
            _check_int("prefill_tp", prefill_tp),
            _check_int("prefill_ep", prefill_ep),
            prefill_dp_attention,
            _check_int("prefill_redundant_experts", prefill_redundant_experts, minimum=0),
        )
    include_mtp = include_mtp or bool(mtp_tokens)  # drafting needs the MTP modules' weights
    w_dtype = canonical_dtype(weight_dtype) if weight_dtype is not None else m.weights_dtype
    layout = resolve_kv_layout(kv_dtype)
    warnings: list[str] = [f"hardware {hw.alias_note}"] if hw.alias_note else []
    if weight_dtype is None:
        from mlacalc.cost.quant import external_quantization

        if external_quantization(m):
            # a ModelOpt export: its stored bytes are not in config.json
            warnings.append(
                f"weights sized as {m.weights_dtype}: {m.label}'s checkpoint keeps its "
                "quantization in a separate hf_quant_config.json (NVIDIA ModelOpt export), "
                "which config.json does not give; give weight_dtype (--weight-dtype fp4 for "
                "NVFP4) to size it"
            )
    if include_mtp and not m.num_nextn_predict_layers:
        warnings.append(f"{m.label} has no MTP module: include_mtp holds nothing more")

    memory = hw.memory_bytes
    usable = int(memory * (1 - memory_reserve))
    # no dtype chosen: the checkpoint's own bytes (its quantization's, scales included)
    sized = None if weight_dtype is None else w_dtype
    part_bytes = weight_bytes_by_part(m, lay, sized, include_mtp)
    weights = weights_per_gpu(m, lay, sized, include_mtp)
    w_format = weight_format(m, sized)
    budget = usable - weights
    per_token = kv_bytes_per_token_per_gpu(m, layout, lay, include_mtp)
    tokens_per_gpu = max(budget, 0) // per_token
    context = (isl + osl) if isl is not None else seq_len
    beyond = beyond_positions(m, context)
    if beyond:
        warnings.append(beyond)
    # every layer keeps what its kind keeps (window, indexer keys, linear state), in pages
    seq_bytes = kv_bytes_per_sequence_per_gpu(m, layout, lay, context, page_size, include_mtp)
    # what a page adds once the context is past every window: the layers keeping every token
    far = page_size << 32
    growth = kv_bytes_per_sequence_per_gpu(
        m, layout, lay, far + page_size, page_size, include_mtp
    ) - kv_bytes_per_sequence_per_gpu(m, layout, lay, far, page_size, include_mtp)
    per_token_full = growth // page_size
    fixed = seq_bytes - per_token_full * (-(-context // page_size) * page_size)
    per_group_seqs = max(budget, 0) // seq_bytes
    max_batch = per_group_seqs * lay.dp
    overflow = None
    if budget <= 0:
        overflow = (
            f"weights: {human_bytes(weights)} per GPU in {w_format} ({lay.describe()}) exceed "
            f"the {human_bytes(usable)} usable on {hw.name}; add GPUs, raise tp/ep or use a "
            "smaller weight dtype"
        )
    elif per_group_seqs < 1:
        overflow = (
            f"kv cache: one sequence of {context:,} tokens needs "
            f"{human_bytes(seq_bytes)} per GPU and "
            f"{human_bytes(budget)} are left after the weights"
        )
    elif batch is not None and isl is None and batch > max_batch:
        # an answer, as the weights' and one sequence's overflow: the batch asked does not fit;
        # the step is timed at the largest batch that does (``decode_batch`` says which)
        overflow = (
            f"kv cache: a batch of {batch:,} at {context:,} tokens does not fit: "
            f"{max_batch:,} do ({human_bytes(math.ceil(batch / lay.dp) * seq_bytes)} of cache "
            f"per GPU against the {human_bytes(budget)} left after the weights); the times are "
            f"for a batch of {max_batch:,}"
        )
    fits = overflow is None
    max_context = max_context_memory = None
    if batch is not None and max_batch >= 1:  # fits, or only the batch asked does not
        per_group = math.ceil(batch / lay.dp)
        max_context_memory = _max_context(
            m, layout, lay, page_size, include_mtp, budget // per_group
        )
        max_context = max_context_memory
        if m.max_position_embeddings:
            max_context = min(max_context, m.max_position_embeddings)
    mem = {
        "weights": weights,
        "kv_budget": max(budget, 0),
        "reserve": memory - usable,
        "memory": memory,
        **{f"weights_{k}": v for k, v in part_bytes.items() if v},
    }
    common = dict(
        model=m.name,
        hardware=hw.name,
        gpus=gpus,
        tp=lay.tp,
        dp=lay.dp,
        ep=lay.ep,
        weight_dtype=w_dtype,
        weight_format=w_format,
        kv_layout=layout.name,
        page_size=page_size,
        memory_per_gpu_bytes=memory,
        usable_per_gpu_bytes=usable,
        weights_per_gpu_bytes=weights,
        kv_budget_per_gpu_bytes=budget,
        kv_bytes_per_token_per_gpu=per_token,
        kv_bytes_per_sequence_per_gpu=seq_bytes,
        kv_bytes_per_token_full_layers_per_gpu=per_token_full,
        kv_bytes_fixed_per_sequence_per_gpu=fixed,
        kv_tokens_per_gpu=tokens_per_gpu,
        # the context each sequence was sized at: isl + osl under a request mix
        seq_len=context,
        batch=batch,
        max_batch=max_batch,
        max_context=max_context,
        max_context_memory=max_context_memory,
        max_position_embeddings=m.max_position_embeddings,
        pp=lay.pp,
        dp_attention=lay.dp_attention,
        layout=lay.describe(),
        mode=mode,
        overlap=overlap,
        prefill_pass=prefill_pass,
        output_lag_steps=output_lag_steps,
        isl=isl,
        osl=osl,
        concurrency=concurrency,
        request_rate=request_rate,
        warnings=tuple(warnings),
    )

    def no_fit(binding: str, overflow: str | None, **extra: Any) -> Plan:
        """The plan of a deployment that does not fit: no step is timed."""
        return Plan(
            **common,
            decode_batch=None,
            decode_step_s=None,
            decode_tokens_per_s=None,
            decode_bound=None,
            prefill_s=None,
            binding=binding,
            fits=False,
            overflow=overflow,
            memory=mem,
            sustainable=False,
            **extra,
        )

    if not fits and max_batch < 1:
        return no_fit("weights" if budget <= 0 else "kv capacity", overflow)

    import numpy as np  # the step model needs numpy; capacity figures alone do not

    from mlacalc.serving.arrivals import step_chain
    from mlacalc.serving.comm import kv_transfer_seconds
    from mlacalc.serving.gpu_step import StepModel

    sm = StepModel(m, lay, sized, layout, hw, profile, imbalance)
    if isl is None:
        return _capacity_plan(
            common, sm, hw, lay, batch, max_batch, seq_len, overlap, mem, overflow, profile
        )

    # ---------------------------------------------------------------- serving figures
    q = 1 + mtp_tokens
    tau = 1.0 + sum(acceptance**i for i in range(1, mtp_tokens + 1))
    S_avg = isl + osl / 2
    if request_rate is None and concurrency is None:
        concurrency = float(max_batch)
    if mode == "disaggregated":
        # every prefill GPU holds its weights and the cache of one prompt at least; a pass
        # batches at most the prompts whose cache fits beside the weights (p_k_fit caps k_max)
        p_weights = weights_per_gpu(m, p_lay, sized, include_mtp)
        p_kv = kv_bytes_per_sequence_per_gpu(m, layout, p_lay, isl, page_size, include_mtp)
        p_k_fit = max(usable - p_weights, 0) // p_kv
        if p_k_fit < 1:
            return no_fit(
                "prefill pool: " + ("weights" if p_weights > usable else "kv capacity"),
                (
                    f"prefill pool: {human_bytes(p_weights)} of weights per GPU in {w_format} "
                    f"({p_lay.describe()} on {p_gpus} GPU{'s' if p_gpus > 1 else ''}) and the "
                    f"KV cache of one prompt of "
                    f"{isl:,} tokens ({human_bytes(p_kv)} per GPU) exceed the "
                    f"{human_bytes(usable)} usable on {hw.name}; add prefill GPUs or raise "
                    "the prefill pool's tp/ep"
                ),
                prefill_gpus=p_gpus,
                prefill_layout=p_lay.describe(),
                prefill_tp=p_lay.tp,
                prefill_ep=p_lay.ep,
                prefill_dp_attention=p_lay.dp_attention,
                prefill_redundant_experts=p_lay.redundant_experts,
            )
        p_sm = StepModel(m, p_lay, sized, layout, hw, profile, imbalance)
    else:
        p_gpus, p_lay, p_sm = 0, lay, sm
    k_max = max(1, PREFILL_TOKENS // isl)
    if mode == "disaggregated":  # a prefill pass holds no more prompts than its cache fits
        k_max = min(k_max, p_k_fit)
    ks = np.arange(1, k_max + 1, dtype=np.float64)
    t_pf = np.concatenate(
        [[0.0], p_sm.step(overlap=overlap, pf_N=ks, pf_q=isl).seconds]
    )  # t_pf[k]: k prompts
    pf_capacity = p_lay.dp * k_max / t_pf[k_max]  # prompts per second the prefill servers finish

    def prompts(n: float) -> int:
        """Prompts one prefill pass batches when ``n`` arrive together."""
        return int(min(max(math.ceil(n - 1e-9), 1), k_max))

    def figures(B: float, rate: float | None = None) -> dict[str, float]:
        """The step, TTFT and cycle at a running batch of ``B`` per group; ``rate``: the
        arrival rate per group (random arrivals batched into steps), None: a closed loop."""
        in_system = B  # mean requests on the group (below 1: it idles between them)
        B = max(B, 1.0)
        mb = min(lay.pp, B)  # micro-batches in flight; fewer than pp leave pipeline bubbles
        dec = sm.step(overlap=overlap, dec_B=B / mb, dec_q=q, dec_S=S_avg)
        t_step = lay.pp * float(dec.stage_seconds[0])
        if mtp_tokens:
            draft = sm.step(dec_B=B / mb, dec_q=1, dec_S=S_avg)
            one_layer = sum(
                float(k["seconds_per_call"][0])
                for k in draft.kernels
                if k["part"]
                in ("layer", "moe_ffn" if m.num_moe_layers else "dense_ffn", "embed", "head")
            )
            t_step += mtp_tokens * one_layer
        out = {
            "B": B,
            "t_dec": t_step,
            "compute": float(dec.compute_s[0]),
            "comm": float(dec.comm_s[0]),
        }
        if mode == "disaggregated":
            # the decode step has no prefill in it; the prefill pool's pass and wait follow
            # from the request rate, which the caller solves for (closed and open loop)
            cycle = t_step
            ttft = 0.0
        elif chunked_prefill:
            P = B * tau * isl / osl  # prompt tokens each step must carry
            mix = sm.step(
                overlap=overlap,
                dec_B=B / mb,
                dec_q=q,
                dec_S=S_avg,
                pf_N=1 / mb,
                pf_q=max(P, 1.0),
                pf_pre=max(isl - P, 0.0) / 2,
            )
            draft_s = t_step - lay.pp * float(dec.stage_seconds[0])  # MTP's drafts, if any
            cycle = lay.pp * float(mix.stage_seconds[0]) + draft_s
            # the prompt's own steps: step j carries its j-th chunk, min(N, what is left) of
            # its tokens after the j N before (causal), beside the decode batch; TTFT is the
            # wait for the step in progress (half a cycle) and the sum of those steps, so
            # never below about one prefill pass of the prompt
            starts = np.arange(0, isl, chunked_prefill, dtype=np.float64)
            own = sm.step(
                overlap=overlap,
                dec_B=B / mb,
                dec_q=q,
                dec_S=S_avg,
                pf_N=np.full(len(starts), 1 / mb),
                pf_q=np.minimum(float(chunked_prefill), isl - starts),
                pf_pre=starts,
            )
            chunk_steps = lay.pp * own.stage_seconds + draft_s
            ttft = cycle / 2 + float(np.sum(chunk_steps))
            out["prefill_overloaded"] = chunked_prefill < P
        elif rate is not None:
            # in-flight batching under random arrivals: each step carries the prompts that
            # arrived during the one before (serving.arrivals); t[n]: a step with n prompts
            ns = np.arange(k_max + 1, dtype=np.float64)
            mix = sm.step(
                overlap=overlap, dec_B=B / mb, dec_q=q, dec_S=S_avg, pf_N=ns / mb, pf_q=isl
            )
            t = lay.pp * mix.stage_seconds + (t_step - lay.pp * float(dec.stage_seconds[0]))
            if prefill_pass == "separate":  # the prompts' own pass, then the decode pass
                t = t_step + t_pf[: k_max + 1]
            chain = step_chain(t, rate)
            # the group is busy while a request is on it: with requests on it as random as
            # their arrivals, a share 1 - exp(-L) of the time; an idle group runs the
            # prompt at once (its own pass then the decode pass, when they are separate)
            busy = 1.0 - math.exp(-in_system)
            cycle = chain.mean_step_s
            alone = float(t_pf[1]) + (t_step if prefill_pass == "separate" else 0.0)
            ttft = busy * chain.ttft_s + (1.0 - busy) * alone
        else:
            # in-flight batching: k prompts join a step of the running decode batch; a share
            # n / k of the steps carries them (n prompts arrive per step in steady state)
            n = B * tau / osl
            k = prompts(n)
            mix = sm.step(
                overlap=overlap, dec_B=B / mb, dec_q=q, dec_S=S_avg, pf_N=k / mb, pf_q=isl
            )
            t_mix = lay.pp * float(mix.stage_seconds[0])
            if prefill_pass == "separate":
                t_mix = t_step + float(t_pf[k])
            share = min(n / k, 1.0)
            cycle = (1 - share) * t_step + share * t_mix
            if n > k:  # more prompts than one step batches
                cycle += (n - k) * t_pf[k_max] / k_max
            # the prompt waits for the running step (half of one on average), then its step
            ttft = t_step / 2 + t_mix
        if mode == "aggregated":
            ttft += output_lag_steps * cycle  # the token is read back steps later
        out["t_pf"] = t_pf[prompts(B * tau / osl)]
        # only the requests running make tokens: below one per group, the groups holding one
        running = lay.dp * in_system
        out.update(
            cycle=cycle, ttft=ttft, tpot=cycle / tau, rate=running * tau / cycle, running=running
        )
        return out

    kv_transfer = None
    if mode == "disaggregated":
        row = kv_cache(m, isl, 1, layout, None, False).total_bytes
        kv_transfer = kv_transfer_seconds(hw, row)

    queue = 0.0
    queued = 0.0
    conc = 0.0
    sustainable = True
    prefill_bound = False
    if mode == "disaggregated":
        # a request cycles through the prefill pool (the wait, its pass), the KV transfer and
        # osl decode steps: the decode batch is the requests in their decode phase, D, and
        # the decode pool serves X(D) = D / (osl x TPOT) requests/s (Little's law); the
        # prompt rate on each prefill group is X / its groups
        def served(D: float) -> tuple[dict[str, float], float]:
            fd = figures(D / lay.dp)
            return fd, fd["rate"] / osl

        def pool_ttft(X: float) -> float:
            """The prompt's wait for the pass in progress and its pass (closed loop)."""
            return float(prefill_pool_seconds(t_pf, X / p_lay.dp)[0])

        def solve(g_raw: Any, hi: float, lo: float = 0.0) -> float:
            """The decode batch in [lo, hi] where ``g`` crosses 0 (g(lo) < 0 <= g(hi)): first
            the whole batches per group (a step's time has jumps, so ``g`` is increasing only
            on the whole), the smallest that reaches 0; then the crossing between it and the
            one below, unless it lands on 0 (as a search point's concurrency does)."""
            seen: dict[float, float] = {}

            def g(x: float) -> float:
                if x not in seen:
                    seen[x] = g_raw(x)
                return seen[x]

            lo_b, hi_b = math.ceil(lo / lay.dp), math.floor(hi / lay.dp)
            if lo_b < hi_b and g(hi_b * lay.dp) >= 0:
                lo_b -= 1
                while hi_b - lo_b > 1:
                    mid_b = (lo_b + hi_b) // 2
                    if g(mid_b * lay.dp) >= 0:
                        hi_b = mid_b
                    else:
                        lo_b = mid_b
                if abs(g(hi_b * lay.dp)) <= 1e-9 * max(hi_b * lay.dp, 1.0):
                    return float(hi_b * lay.dp)
                lo, hi = max(lo, lo_b * lay.dp), float(hi_b * lay.dp)
            # the crossing between them: regula falsi (Illinois: the value of an end kept
            # twice is halved), which brings ``g``'s smooth stretches there in a few steps;
            # where four steps have not halved the bracket (a jump of ``g`` in it), a
            # bisection, so a jump is closed in about as fast as by bisection alone
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
            return lo  # g(lo) < 0 (at a jump of g, the side below 0)

        assert kv_transfer is not None
        transfer = kv_transfer

        def whole_batches(b: int, b_end: int) -> tuple[Any, Any]:
            """Whole batches per group ``b .. b_end``: the decode pool's requests/s at each
            and the requests in flight of the closed loop (one vectorised step, as search
            times them; ``served`` and ``in_flight`` of one)."""
            B = np.arange(float(b), float(b_end) + 1.0)
            mb = np.minimum(lay.pp, B)
            dec = sm.step(overlap=overlap, dec_B=B / mb, dec_q=q, dec_S=S_avg)
            rate = lay.dp * B * tau / (lay.pp * dec.stage_seconds) / osl
            X = np.minimum(rate, pf_capacity)
            return rate, lay.dp * B + X * (prefill_pool_seconds(t_pf, X / p_lay.dp) + transfer)

        def first_whole(hi: float, reaches: Any, start: int) -> tuple[float, float]:
            """The bracket [lo, hi] of the first whole batch per group from ``start`` whose
            figures ``reaches`` (of ``whole_batches``) says reach the target, and the one
            below: the decode rate and the requests in flight rise only on the whole (a
            step's time jumps with its tiles, the pass size with the rate), so the pool
            settles at the first crossing, which bisection over the whole range can step
            past. In blocks of 256 batches from ``start``; with MTP drafts (timed per call,
            not vectorised) the whole range for :func:`solve`."""
            b_cap = math.floor(hi / lay.dp)
            if mtp_tokens or b_cap < 1:
                return hi, 0.0
            b = max(1, start)
            while b <= b_cap:
                end = min(b + 255, b_cap)
                hit = np.nonzero(reaches(*whole_batches(b, end)))[0]
                if hit.size:
                    first = b + int(hit[0])
                    return first * lay.dp, (first - 1) * lay.dp
                b = end + 1
            return hi, b_cap * lay.dp

        def rate_start(target: float) -> int:
            """A whole batch per group below which the decode pool serves under ``target``
            requests/s: the rate at batch 1 times the batch, halved for a step that gets
            shorter with more rows (a tile or split switch, a few percent)."""
            one = float(whole_batches(1, 1)[0][0])
            return max(1, math.floor(0.5 * target / one)) if one > 0 else 1

        decode_max = served(float(max_batch))[1]  # requests/s at the largest decode batch
        D_cap = float(max_batch)
        if decode_max > pf_capacity:  # the prefill pool caps the request rate
            prefill_bound = True
            D_cap = solve(
                lambda D: served(D)[1] - pf_capacity,
                *first_whole(
                    D_cap, lambda r, n: r >= pf_capacity * (1 - 1e-12), rate_start(pf_capacity)
                ),
            )
        if request_rate is None:
            # closed loop of N requests: N = D + X(D) (pool wait + pass + transfer), solved
            # for D; beyond the decode batch cap (the prefill pool's rate or the KV cache)
            # the extra requests queue, their wait N_extra / X (Little's law)
            def in_flight(D: float) -> float:
                X = min(served(D)[1], pf_capacity)
                return D + X * (pool_ttft(X) + transfer)

            # no batch below N less the most the prefill pool and the transfer can hold (its
            # rate times a pass of k_max and the wait for one in progress) reaches N
            held = pf_capacity * (1.5 * float(t_pf[-1]) + transfer)
            start = math.floor((concurrency - held) / lay.dp)

            n_cap = in_flight(D_cap)
            if concurrency >= n_cap:
                running = D_cap
                queued = concurrency - n_cap
            else:
                running = solve(
                    lambda D: in_flight(D) - concurrency,
                    *first_whole(D_cap, lambda r, n: n >= concurrency * (1 - 1e-12), start),
                )
                prefill_bound = False
            f, X = served(running)
            X = min(X, pf_capacity)
            f["ttft"] = pool_ttft(X)
            # the requests beyond those the cycle at D holds wait their turn: the queued
            # ones, or where in_flight jumps past N (a larger pass), the few between
            queue = max(concurrency - in_flight(running), 0.0) / X
        else:
            # open loop at R requests/s: the decode batch is R x osl x TPOT (the requests
            # decoding, not those in prefill or transfer), and one pass size from R: the
            # smallest that keeps up, its M/D/1 wait
            r_in = request_rate
            if r_in >= min(decode_max, pf_capacity):
                sustainable = False
                conc = math.inf if decode_max <= pf_capacity else D_cap
                running = D_cap
                warnings.append(
                    f"request rate {r_in:g}/s exceeds what the deployment sustains "
                    f"({min(decode_max, pf_capacity):.3g}/s): the queue grows without bound"
                )
                queue = queued = math.inf
                f = served(running)[0]
                f["ttft"] = float(t_pf[k_max])
            else:
                prefill_bound = False
                running = conc = solve(
                    lambda D: served(D)[1] - r_in,
                    *first_whole(
                        float(max_batch), lambda r, n: r >= r_in * (1 - 1e-12), rate_start(r_in)
                    ),
                )
                f = served(running)[0]
                k = int(prefill_pool_pass(t_pf, r_in / p_lay.dp)[0][0])
                rho = min(r_in * float(t_pf[k]) / k / p_lay.dp, 0.999)
                queue = rho / (2 * (1 - rho)) * float(t_pf[k])
                f["ttft"] = float(t_pf[k])
            concurrency = (
                r_in * (f["ttft"] + queue + transfer + osl * f["tpot"]) if sustainable else running
            )
    elif request_rate is None:
        running = min(concurrency, float(max_batch))
        f = figures(running / lay.dp)
        queued = max(concurrency - max_batch, 0.0)
        requests_per_s = f["rate"] / osl
        if queued:
            queue = queued / requests_per_s
    else:
        # open loop: the running batch is the arrival rate times the time a request stays
        conc = 1.0
        in_flight = mode == "aggregated" and not chunked_prefill
        group_rate = request_rate / lay.dp if in_flight else None
        for _ in range(40):
            f = figures(min(conc, max_batch) / lay.dp, group_rate)
            latency = f["ttft"] + osl * f["tpot"]
            new = request_rate * latency
            if abs(new - conc) < 1e-3 * max(conc, 1.0):
                break
            conc = 0.5 * conc + 0.5 * new
        running = min(conc, float(max_batch))
        f = figures(running / lay.dp, group_rate)
        capacity = f["rate"] / osl
        if conc > max_batch or request_rate >= capacity:
            sustainable = False
            warnings.append(
                f"request rate {request_rate:g}/s exceeds what the deployment sustains "
                f"({capacity:.3g}/s): the queue grows without bound"
            )
            queue = queued = math.inf  # both grow without bound
        elif group_rate is None:
            # M/D/1 wait for the prefill server of each attention group (chunks; the prefill
            # pool's is above); in-flight batching's waits are in its step chain
            k = prompts(request_rate / p_lay.dp * t_pf[1])
            service = t_pf[k] / k  # per prompt, batched as they arrive
            rho = min(request_rate * service / p_lay.dp, 0.999)
            queue = rho / (2 * (1 - rho)) * t_pf[k]
        concurrency = running
    if f.get("prefill_overloaded"):
        warnings.append(
            f"the prompts need more than {chunked_prefill} tokens per step: "
            "requests queue for prefill"
        )
    if prefill_bound:
        warnings.append(
            f"the prefill pool finishes {pf_capacity:.3g} prompts/s, fewer than the decode pool "
            f"serves ({decode_max:.3g}/s): throughput is prefill-bound"
        )
    rate = f["rate"]
    if request_rate is not None and sustainable:
        rate = request_rate * osl  # every request that arrives is served
    if mode == "disaggregated":
        rate = min(rate, pf_capacity * osl)
    ttft = f["ttft"] + queue + (kv_transfer or 0.0)
    total_gpus = gpus + p_gpus
    B_run = max(running / lay.dp, 1.0)
    micro = B_run / min(lay.pp, B_run)
    dec = sm.step(overlap=overlap, dec_B=micro, dec_q=q, dec_S=S_avg)
    links = _links_s(dec.kernels, f["comm"], overlap)
    # the decode step's kernels and the prompt's prefill (TTFT depends on both), on the GPUs
    # that run each (the prefill pool's, disaggregated; the same GPUs, aggregated)
    name, how = calibration_of(profile, hw, [*dec.kernels, *p_sm.step(pf_N=1, pf_q=isl).kernels])
    return Plan(
        **{**common, "warnings": tuple(warnings), "concurrency": concurrency},
        # the step is timed at B_run per group (at least one: a group holding a request runs
        # it alone), so the batch it was timed at is never 0
        decode_batch=max(round(running), 1),
        decode_running=f["running"],
        profile=name,
        calibration=how,
        prefill_layout=p_lay.describe() if p_gpus else "",
        prefill_tp=p_lay.tp if p_gpus else None,
        prefill_ep=p_lay.ep if p_gpus else None,
        prefill_dp_attention=p_lay.dp_attention if p_gpus else None,
        prefill_redundant_experts=p_lay.redundant_experts if p_gpus else None,
        decode_step_s=f["t_dec"],
        decode_tokens_per_s=f["running"] * tau / f["t_dec"],
        decode_bound=_bound(hw, dec.kernels, f["compute"], f["comm"], overlap, links),
        prefill_s=float(t_pf[1]),
        binding="kv capacity"
        if (queued and math.isfinite(queued) and not prefill_bound)
        or (not sustainable and conc > max_batch)
        else "prefill pool"
        if prefill_bound  # the prefill pool's rate caps the requests served
        else {"memory": "memory bandwidth"}.get(
            b := _bound(hw, dec.kernels, f["compute"], f["comm"], overlap, links), b
        ),
        fits=True,
        memory=mem,
        running_batch_per_group=f["running"] / lay.dp,
        queued=queued,
        ttft_s=ttft,
        tpot_s=f["tpot"],
        output_tokens_per_s=rate,
        output_tokens_per_s_per_gpu=rate / total_gpus,
        output_tokens_per_s_per_user=1.0 / f["tpot"],
        tokens_per_step=tau,
        prefill_gpus=p_gpus,
        kv_transfer_s=kv_transfer,
        step_compute_s=f["compute"],
        step_comm_s=f["comm"],
        step_links_s=links,
        sustainable=sustainable,
        kernels=_kernel_rows(dec.kernels),
        kernels_scope=_kernels_scope(sm, overlap, micro),
    )


def prefill_pool_pass(t_pf: Any, demand: Any) -> tuple[Any, Any]:
    """A prefill group's pass size and wait at ``demand`` prompts/s on it (a number or an
    array), ``t_pf[k]`` being a pass of ``k`` prompts (``t_pf[0] = 0``): the smallest ``k``
    whose pass keeps up (``k / t_pf[k] >= demand``; the largest when none does: the pool is
    prefill-bound), and the mean wait for the pass in progress when a prompt arrives,
    ``rho t_pf[k] / 2`` with ``rho = demand t_pf[k] / k`` (at most 1) the share of the time a
    pass runs. Arrays of the demand's length; :func:`plan` and
    :func:`mlacalc.serving.search.search` both time prefill pools by it."""
    import numpy as np

    t_pf = np.asarray(t_pf, dtype=np.float64)
    k_max = len(t_pf) - 1
    d = np.atleast_1d(np.asarray(demand, dtype=np.float64))
    up = (np.arange(1.0, k_max + 1) / t_pf[1:])[None, :] >= d[:, None]
    k = np.where(up.any(axis=1), up.argmax(axis=1) + 1, k_max)
    t_k = t_pf[k]
    rho = np.minimum(d * t_k / k, 1.0)
    return k, rho * t_k / 2


def prefill_pool_seconds(t_pf: Any, demand: Any) -> Any:
    """A prompt's time in a prefill group at ``demand`` prompts/s on it (a number or an
    array): the wait for the pass in progress, then its own pass (:func:`prefill_pool_pass`),
    the TTFT before the KV transfer in :func:`plan`'s closed loop and
    :func:`mlacalc.serving.search.search`'s points."""
    k, wait = prefill_pool_pass(t_pf, demand)
    return t_pf[k] + wait


def _largest_ep(m: ModelConfig, gpus: int, lay: Layout, redundant: int | None = None) -> int:
    """The prefill pool's expert-parallel degree when none is given: the decode pool's, or the
    largest below it that divides the pool and the expert slots (``redundant`` extra ones:
    the pool's, by default the decode pool's)."""
    slots = m.n_routed_experts + (lay.redundant_experts if redundant is None else redundant)
    return max(
        e for e in range(1, min(lay.ep, gpus) + 1) if gpus % e == 0 and (slots % e == 0 or e == 1)
    )


def _prefill_layout(
    m: ModelConfig,
    lay: Layout,
    gpus: int,
    tp: int | None,
    ep: int | None,
    dp_attention: bool | None,
    redundant: int | None,
) -> Layout:
    """The prefill pool's layout on ``gpus`` GPUs: each degree as given, else derived from the
    decode pool's (``lay``). An error names the ``prefill_*`` argument it comes from, or, for
    a derived degree, says where it came from and which argument sets it."""
    dp_att = lay.dp_attention if dp_attention is None else dp_attention
    red = lay.redundant_experts if redundant is None else redundant
    if tp is not None:
        p_tp, tp_from = tp, ""
    elif dp_att and not lay.dp_attention:
        # DP-attention asked of the pool alone: one GPU per attention group
        p_tp, tp_from = 1, "1 (DP-attention was asked of the pool)"
    elif gpus % lay.tp == 0:
        p_tp, tp_from = lay.tp, f"{lay.tp}, the decode pool's (tp)"
    else:
        p_tp = 1 if dp_att else gpus
        tp_from = (
            f"{p_tp}, from the pool's {gpus} GPUs since the decode pool's tp {lay.tp} does "
            "not divide them"
        )
    if ep is not None:
        p_ep, ep_from = ep, ""
    else:
        p_ep = _largest_ep(m, gpus, lay, red)
        ep_from = f"{p_ep}, from the decode pool's ep {lay.ep}"
        if redundant is not None and redundant and lay.ep > 1 and p_ep == 1:
            raise InvalidArgumentError(
                "prefill_redundant_experts",
                f"{redundant}: the {m.n_routed_experts + redundant} expert slots divide no "
                f"expert-parallel degree above 1 of the {gpus}-GPU prefill pool up to the "
                f"decode pool's ep {lay.ep}, so the pool would fall back to ep 1; give "
                "prefill_ep (--prefill-ep), or redundant experts that round the slots up to "
                "a multiple of it",
            )
    if dp_att and p_tp == gpus and gpus > 1:
        # DP-attention with one attention group would be plain TP under a DP-attention label:
        # refused whether the tp and the DP-attention were given or derived
        given_dpa = dp_attention is True
        raise InvalidArgumentError(
            "prefill_dp_attention" if given_dpa else "prefill_tp",
            (
                ""
                if given_dpa
                else "DP-attention (the decode pool's, as prefill_dp_attention is not given) "
            )
            + f"needs more than one attention group, but the prefill pool's tp is {p_tp}"
            + (f" ({tp_from})" if tp_from else " (prefill_tp, --prefill-tp)")
            + f" on its {gpus} GPUs: one group; give a smaller prefill_tp (--prefill-tp) or "
            "leave DP-attention off the pool (prefill_dp_attention=False, "
            "--no-prefill-dp-attention)",
        )
    try:
        return make_layout(m, gpus, p_tp, None, 1, p_ep, dp_att, red)
    except InvalidArgumentError as exc:
        derived = {"tp": (tp_from, "prefill_tp"), "ep": (ep_from, "prefill_ep")}
        if exc.argument in derived and derived[exc.argument][0]:
            src, arg = derived[exc.argument]
            raise InvalidArgumentError(
                arg,
                f"the prefill pool's default {exc.argument} is {src}: {exc.message}; give "
                f"{arg} (--{arg.replace('_', '-')}) to set it",
            ) from None
        renamed = {
            "tp": "prefill_tp",
            "ep": "prefill_ep",
            "dp": "prefill_tp",
            "gpus": "prefill_gpus",
            "dp_attention": "prefill_dp_attention",
            "redundant_experts": "prefill_redundant_experts"
            if redundant is not None
            else "redundant_experts",
        }.get(exc.argument, exc.argument)
        raise InvalidArgumentError(renamed, f"{gpus}-GPU prefill pool: {exc.message}") from None


def _capacity_plan(
    common: dict[str, Any],
    sm: StepModel,
    hw: HardwareSpec,
    lay: Layout,
    batch: int | None,
    max_batch: int,
    seq_len: int,
    overlap: str,
    mem: dict[str, int],
    overflow: str | None = None,
    profile: Any = None,
) -> Plan:
    """The capacity answer without a request mix: the decode step at ``seq_len`` for the batch
    asked (or the largest that fits), and the prefill of one ``seq_len`` prompt. A batch asked
    beyond the largest that fits is an answer: ``fits`` false, ``overflow`` says so, and the
    times are those of the largest batch that fits (``decode_batch``)."""
    run_batch = max_batch if batch is None else min(batch, max_batch)
    B = math.ceil(run_batch / lay.dp)
    micro = B / min(lay.pp, max(B, 1))
    dec = sm.step(overlap=overlap, dec_B=micro, dec_S=seq_len)
    step = lay.pp * float(dec.stage_seconds[0])
    links = _links_s(dec.kernels, float(dec.comm_s[0]), overlap)
    bound = _bound(hw, dec.kernels, float(dec.compute_s[0]), float(dec.comm_s[0]), overlap, links)
    prefill_s = float(sm.step(overlap=overlap, pf_N=1, pf_q=seq_len).seconds[0])
    binding = (
        "kv capacity"
        if batch is None or batch > max_batch
        else {"memory": "memory bandwidth"}.get(bound, bound)
    )
    name, how = calibration_of(profile, hw, dec.kernels)
    return Plan(
        **common,
        decode_batch=run_batch,
        decode_running=float(run_batch),
        decode_step_s=step,
        decode_tokens_per_s=run_batch / step,
        decode_bound=bound,
        prefill_s=prefill_s,
        binding=binding,
        fits=overflow is None,
        overflow=overflow,
        memory=mem,
        running_batch_per_group=float(B),
        step_compute_s=float(dec.compute_s[0]),
        step_comm_s=float(dec.comm_s[0]),
        step_links_s=links,
        kernels=_kernel_rows(dec.kernels),
        kernels_scope=_kernels_scope(sm, overlap, micro),
        profile=name,
        calibration=how,
    )


def _load_profile(profile: Any) -> Any:
    """The calibration profile (a shipped name, a JSON path or a profile; None: the shipped
    default), loaded once."""
    from mlacalc.timemodel.profile import load_profile

    return load_profile(profile)


def calibration_of(
    profile: Any, hw: HardwareSpec, kernels: Iterable[dict[str, Any] | tuple[str, str]]
) -> tuple[str, str]:
    """The profile's name (its file beside it when it is not a shipped one) and, in words, how
    the kernels on ``hw`` were predicted with it: the device as ``roofline`` says it
    (:meth:`~mlacalc.timemodel.profile.Profile.describe`: "calibrated on A100-SXM-80GB,
    H100-SXM; H200 by datasheet ratios from H100-SXM (same tensor-core generation)", the
    pooled fit's "unvalidated"), then only the kernel classes (``kind``, ``dtype``) whose
    parameters :meth:`~mlacalc.timemodel.profile.Profile.params` obtains otherwise. A measured
    device (``measured:<set>``) is timed by its measured ceilings, not datasheet figures."""
    from collections import Counter
    from pathlib import Path

    import numpy as np

    from mlacalc.timemodel.kernel_time import device_batch
    from mlacalc.timemodel.profile import load_profile
    from mlacalc.words.kernels import KernelBatch

    prof = load_profile(profile)
    name = prof.name
    shipped = PROFILES
    if prof.origin and Path(prof.origin).resolve().parent != shipped:
        name = f"{prof.name} ({prof.origin})"
    classes = {
        (k["kind"], k["dtype"]) if isinstance(k, dict) else (k[0], k[1])
        for k in kernels
        if not isinstance(k, dict) or "seconds" not in k or _takes_time(k["seconds"])
    }
    lead = prof.describe(hw.name, hw)
    # what params says of a class predicted as the lead says the device is
    expected = prof.fitted_how(hw.name, hw)
    hows: Counter[str] = Counter()
    for kind, dtype in sorted(classes):
        # the class the device runs (fp8 weights without fp8 tensor cores: weight-only)
        one = KernelBatch(kind, dtype, np.zeros(1), np.zeros(1), np.ones(1), {})
        run = device_batch(one, hw)
        hows[prof.params(hw.name, run.kind, run.dtype, hw, run.variant)[1]] += 1
    rest = sorted(h for h in hows if h != expected)
    text = lead
    if rest:
        others = sum(hows[h] for h in rest)
        text += (
            f"; {others} of {sum(hows.values())} kernel classes otherwise: "
            + "; ".join(rest[:3])
            + (f"; and {len(rest) - 3} more" if len(rest) > 3 else "")
        )
    if getattr(hw, "measured", False):
        # its peaks and bandwidth are what mlacalc bench measured on it: the ratios are theirs
        text = text.replace(
            "by datasheet ratios", "by the ratios of its measured ceilings (mlacalc bench)"
        )
    return name, text


def _takes_time(x: Any) -> bool:
    """Whether any of a kernel's rows takes time (a number or an array)."""
    try:
        return bool(float(max(x)) > 0) if hasattr(x, "__len__") else float(x) > 0
    except ValueError:  # an empty array
        return False
