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
    prefill shares the GPUs (aggregated), the prefill work the other requests' prompts bring
    in (``(batch - 1) / (s + (osl - 1) / tokens-per-step)`` prompts per step in a closed
    loop, ``s`` the prompt's steps, 1 or its chunks: a request's own prompt is before its
    first token), divided by the tokens one step yields
    per sequence (``1 + a + a^2 ...`` with MTP at acceptance rate ``a``); None at ``osl=1``
    (no gap); throughput counts every prompt's work;
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
    ``chunked_prefill=N``: a prompt takes ``s = ceil(isl / N)`` consecutive steps, the
    ``j``-th carrying ``min(N, isl - j N)`` of its tokens (after the ``j N`` before, causal)
    beside the decode batch, the other steps decode only; the mean step counts those chunk
    steps as the whole-prompt model counts its prompt's step, a request spending ``s + osl
    - 1`` steps on the group (a budget of the prompt or more gives its figures), every step
    carrying the prompt tokens the load brings only past one chunk a step
    (:func:`~mlacalc.serving.figures.chunked_figures`). TTFT is the wait for
    the step in progress, or for the rest of another prompt's chunks, then the sum of the
    prompt's own steps (``prefill_chunks_s``). A closed loop runs at most the requests whose
    prompts bring a step no more tokens than the chunk (``P = n isl``; an engine's step
    carries a chunk at most): the others wait in the engine's queue, TTFT growing by their
    number over the requests/s (Little's law; binding ``"chunked prefill"``; a concurrency
    not given is that many, or what fits if fewer). Disaggregated serving runs the prompt on a
    separate prefill pool, whose every GPU holds its weights and the cache of one prompt at
    least (a pool that does not is ``fits=False``, binding ``"prefill pool: ..."``); a pass
    batches ``k_max = 16384 // isl`` prompts, or the fewer whose cache fits: with ``d``
    prompts/s on a prefill group and ``t_pf[k]`` a pass of ``k`` prompts, the group runs
    passes of the ``k`` that, of those with ``k / t_pf[k] >= d``, gives a prompt the
    shortest wait and pass together (``k_max`` when none keeps up: throughput is then
    prefill-bound); a prompt waits for the pass in progress, ``rho t_pf[k] / 2`` with ``rho =
    d t_pf[k] / k`` the share of the time a pass runs (the M/D/1 wait ``rho t_pf[k] / (2 (1 -
    rho))`` under an arrival rate instead), then its own pass ``t_pf[k]``, then the KV
    transfer over the network; its decode step has no prefill in it. The requests in flight
    are counted by phase: in a closed loop of ``N`` requests each cycles through the prefill
    pool (wait and pass), the KV transfer and ``osl`` decode steps; the decode batch ``D`` is
    the requests in their decode phase, serving ``X(D) = D / (osl x TPOT)`` requests/s (the
    prompt rate: ``d = X / groups``), and ``N = D + X (wait + t_pf[k] + transfer)`` is
    solved for ``D``. ``D`` is capped by the KV cache and by the prefill pool's rate; the
    requests beyond the cap queue, TTFT growing by ``N_extra / X`` (Little's law), so
    throughput is ``N / (TTFT + osl x TPOT) x osl``. Under an arrival rate ``R`` the decode
    batch is ``R x osl x TPOT`` (the prompts still in prefill are not decoding), and one pass
    size, chosen so from ``R / groups``, gives the pass and its M/D/1 wait, the prompts
    queued for the prefill pool ``R x wait`` (Little's law);
  - ``output_tokens_per_s`` for all requests, per GPU (all GPUs of both pools) and per user:
    aggregated in a closed loop, each of the ``N`` requests in flight makes its ``osl``
    tokens in its latency, ``N osl / (TTFT + (osl - 1) x TPOT)`` (Little's law: its first
    token ends its TTFT, then ``osl - 1`` gaps; the steps carry the prompts of requests that
    spend their prompt's step, or chunk steps, and ``(osl - 1) / tokens-per-step`` decode
    steps on the group, and with fewer requests than attention groups only those requests'
    prompts, :func:`~mlacalc.serving.figures.set_load`); under an arrival rate ``R``, ``R x
    osl``, the requests in flight ``R x (TTFT + (osl - 1) x TPOT)``; disaggregated, the
    running requests over the mean step.

Prefix caching (``prefix_cache_hit=h``, in ``[0, 1)``): ``c = floor(h isl)`` of each prompt's
tokens, rounded down to whole ``page_size`` pages, are found cached, and every prompt above (a
step's, a chunk's, a prefill pool's pass) computes the other ``isl - c``, attending the ``c``
cached keys as a chunk of a chunked prefill attends the chunks before it
(:func:`~mlacalc.serving.figures.prompt_args`); a pass batches ``16384 // (isl - c)`` prompts.
The decode step, the KV memory (each running request holds its whole prompt's KV, an upper bound
on the running requests' KV that counts no prefix kept for requests not running:
:data:`PREFIX_CACHE_MEMORY`) and the KV transfer (the whole prompt's) are as without.
A shared prefix (``shared_prefix=S`` tokens, ``0 <= S < isl``: the first ``S`` tokens of every
prompt alike, a system prompt or document set) is found cached by every request after the
first (``c`` the larger of ``S`` and the hit's tokens, in whole pages), and its pages (``S``
rounded down to whole pages) are held once per attention group (each DP-attention rank, each
tensor-parallel group, its share on each GPU of the group), as the engines' radix cache and
prefix caching keep one copy per cache pool: a GPU holds them once, each running request the
rest of its context (:func:`~mlacalc.serving.capacity.shared_prefix_bytes`), so the largest
batch is ``(budget - shared) // (sequence - shared)`` a group (:data:`SHARED_PREFIX_MEMORY`).

Pipeline parallelism splits the running batch into ``pp`` micro-batches in flight: a token
takes ``pp`` slowest-stage times. An unchunked prompt rides whole in one micro-batch and crosses
the stages one after another (its step is at least its own pass,
:func:`~mlacalc.serving.figures.micro_batch_prompts`); a chunked one pipelines by chunk.
``overlap="tbo"`` (two-batch overlap, as DeepSeek and SGLang
run it) splits each step into two micro-batches whose communication hides behind the other's
computation (a decode step's MoE layers in DeepSeek's five stages,
:func:`~mlacalc.serving.gpu_step.five_stage_layer`; every other part behind its own compute);
``"none"`` adds them.

The planner's parts, each a module of its own: :mod:`~mlacalc.serving.plan_checks` (every
argument checked and normalised into a request record), :mod:`~mlacalc.serving.capacity`
(what fits on a GPU), :mod:`~mlacalc.serving.figures` (step times and the serving figures of
an aggregated deployment), :mod:`~mlacalc.serving.disaggregated` (the steady state of
separate prefill and decode pools), :mod:`~mlacalc.serving.step_report` (a step's roof, links
and kernel rows) and :mod:`~mlacalc.serving.provenance` (the profile behind the times);
:func:`plan` composes them into a :class:`Plan`.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mlacalc.cost.families import recurrent_state_dtype
from mlacalc.hardware.catalogue import HardwareSpec
from mlacalc.models.loading import ModelConfig
from mlacalc.serving.capacity import (
    PREFILL_TOKENS,
    Capacity,
    PrefillRoom,
    capacity,
    memory_setting,
    prefill_overflow,
    prefill_room,
)
from mlacalc.serving.comm import group_routing_words, placed_groups
from mlacalc.serving.disaggregated import disaggregated_load
from mlacalc.serving.figures import (
    chunk_capacity,
    closed_loop,
    decode_step,
    draft_seconds,
    mix_timing,
    open_loop,
    prompt_args,
)
from mlacalc.serving.gpu_step import StepModel, routed_experts_class
from mlacalc.serving.layout import Layout
from mlacalc.serving.plan_checks import (
    OVERLAPS,
    PREFILL_PASSES,
    PlanRequest,
    check_request,
    indexer_words,
    latent_copies,
    prefix_cached_tokens,
    trtllm_attention_tp,
)
from mlacalc.serving.price import Price, price_of
from mlacalc.serving.provenance import (
    calibration_of,
    prediction_route,
    route_warning,
    stand_in_parts,
    stand_in_warnings,
    with_stand_ins,
)
from mlacalc.serving.ranks import rebalanced, synced_groups
from mlacalc.serving.scheduler import (
    overlap_idle_note,
    unnamed_engine_note,
    with_engine_defaults,
)
from mlacalc.serving.step_report import kernel_rows, kernels_scope, links_seconds, step_bound
from mlacalc.timemodel.attention_time import PACKING_DECODE, XQA_HEAD_PACK
from mlacalc.timemodel.device import device_figures
from mlacalc.timemodel.moe_backend import moe_kernel_label, runs_trtllm_gen
from mlacalc.timemodel.profile import load_profile, other_cpu_warning
from mlacalc.words.dtypes import KVLayout, resolve_kv_layout
from mlacalc.words.engines import ENGINE_LABELS
from mlacalc.words.errors import DoesNotFitError
from mlacalc.words.units import human_bytes, request_count
from mlacalc.words.vocab import SERVING_MODES, stamped

if TYPE_CHECKING:
    from mlacalc.serving.figures import Load, MixTiming
    from mlacalc.serving.gpu_step import StepModel

__all__ = [
    "OVERLAPS",
    "PREFILL_PASSES",
    "PREFILL_TOKENS",
    "SERVING_MODES",
    "TPOT_PARTS_SAID",
    "DoesNotFitError",
    "Plan",
    "calibration_of",
    "plan",
]

#: TPOT's parts (:meth:`Plan.tpot_parts`) are said where other requests' prompts make at least
#: this share of it
TPOT_PARTS_SAID = 0.05
#: the name tests/test_cli_plan.py reads the step's roof by (step_report.step_bound)
_bound = step_bound


def duration_text(seconds: float) -> str:
    """A duration as people read it: ms below 10 s, s below 10 minutes, else minutes
    (``7,479.1 ms``, ``52.3 s``, ``50.1 min``)."""
    if seconds < 10:
        return f"{seconds * 1e3:,.1f} ms"
    if seconds < 600:
        return f"{seconds:,.1f} s"
    return f"{seconds / 60:,.1f} min"


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
    #: the running sequences the decode step was timed at (all groups): ``batch`` where it
    #: fits, else the largest batch that fits (a request mix: its mean running batch, rounded);
    #: :attr:`timed_batch` is the same number by a name a plot cannot misread
    decode_batch: int | None
    #: the decode step's time at ``decode_batch``, NOT at ``batch`` when ``batch`` does not fit
    #: (``fits`` false): ``plan(..., batch=64)`` on a deployment that holds 15 times 15; a
    #: plot of ``decode_step_s`` against the batch asked goes flat past ``max_batch``, so plot
    #: it against ``timed_batch`` or keep the points with ``fits``
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
    #: how the KV transfer goes: its link and each rank's share in parallel (None: aggregated)
    kv_transfer_link: str | None = None
    #: the most bytes one rank sends or receives in the KV transfer
    kv_transfer_rank_bytes: int | None = None
    step_compute_s: float | None = None
    step_comm_s: float | None = None
    #: every pool keeps up with the offered load: no request waits in a queue for a place in
    #: the batch or for the prefill pool (false where some wait, in a closed loop too, and
    #: where requests arrive faster than the deployment serves them)
    sustainable: bool = True
    kernels: tuple[dict[str, Any], ...] = ()
    #: what ``kernels`` covers, in words, where it is not the whole step of one GPU: one of
    #: the two micro-batches of a two-batch-overlap step, or one pipeline micro-batch through
    #: every layer (the stages together); None for the whole step of one GPU, and where no
    #: step was timed
    kernels_scope: str | None = None
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
    #: the prefill pool's layout (disaggregated serving; None aggregated, as the prefill_*
    #: figures below)
    prefill_layout: str | None = None
    prefill_tp: int | None = None
    prefill_ep: int | None = None
    prefill_dp_attention: bool | None = None
    prefill_redundant_experts: int | None = None
    #: the prefill pool's weights a GPU, and the KV bytes a token and one prompt take there
    #: (its own layout's; what its launch lines' memory setting is converted by)
    prefill_weights_per_gpu_bytes: int | None = None
    prefill_kv_bytes_per_token_per_gpu: int | None = None
    prefill_kv_bytes_per_prompt_per_gpu: int | None = None
    #: disaggregated: the prompts (requests) per second the prefill pool finishes (passes of
    #: its most prompts), and the requests per second the decode pool serves at its largest
    #: batch; the lower of the two caps the throughput (None aggregated, or where the prefill
    #: pool holds no prompt)
    prefill_pool_requests_per_s: float | None = None
    decode_pool_requests_per_s: float | None = None
    #: the calibration profile that timed the kernels, and how this device was predicted with
    #: it ("calibrated on H100-SXM", "H200 by datasheet ratios from H100-SXM (...)")
    profile: str = ""
    calibration: str = ""
    #: how the device and the engine were predicted, as fields
    #: (:func:`~mlacalc.serving.provenance.prediction_route`): ``device_route`` ("fitted",
    #: "same_generation", "nearest_architecture", "pooled", ...), ``device_fit`` (the fitted
    #: device whose fit timed it), ``engine_route`` ("own", "stand_in", or "partly_stand_in"
    #: where another engine's fits time a share of the decode step: ``stand_ins`` and
    #: ``stand_in_share`` say which and how much, :func:`~mlacalc.serving.provenance.
    #: with_stand_ins`) and
    #: ``engine_profile``, ``expected_error`` (the benchmark's median, and p90 where measured,
    #: |error| for that route, ``of`` fitted (in-sample, with ``held_out`` beside it) or
    #: held_out (the leave-one-device-out figures of the fit it is timed from), None where the
    #: project measured none) with
    #: ``expected_error_source`` (the README row, or why none), ``assumed`` (the device figures
    #: the time model assumes), ``clock_note`` (what an assumed clock does to its fixed costs)
    #: and ``geometry_note`` (an MLA geometry no measured row has: the expected error is not its)
    prediction: dict[str, Any] = field(default_factory=dict)
    #: the serving engine whose kernels were timed (trtllm, sglang, vllm)
    engine: str = "trtllm"
    #: where no engine was named and no engine's defaults taken (``engine`` left out,
    #: ``engine_defaults`` left out or ``"none"``, as the CLI without --engine): that ``engine``
    #: is the default, whose kernels are timed but whose scheduler defaults are not applied,
    #: and what naming it would fill (:func:`default_engine_note`); "" where one was named
    default_engine_note: str = ""
    #: what caps ``max_batch``: "kv capacity" (memory) or "engine max_running" (the batch the
    #: engine admits, ``max_running`` per attention group)
    admission: str = "kv capacity"
    #: chunked prefill: the prompt's own chunk steps (how many, of how many prompt tokens a
    #: step: the chunk, or the whole prompt when the chunk holds it; their time together
    #: beside the decode batch: TTFT is the wait for the step in progress plus these;
    #: ``prefill_s`` is one pass of the whole prompt alone, which the kernel model can price
    #: a few percent above or below the chunks' sum)
    prefill_chunks: int | None = None
    prefill_chunk_tokens: int | None = None
    prefill_chunks_s: float | None = None
    #: disaggregated: the pass a prompt runs in on the prefill pool, its prompts a group and
    #: its time, at the load (TTFT is the wait for the pool, this pass and the KV transfer)
    prefill_pool_pass_prompts: int | None = None
    prefill_pool_pass_s: float | None = None
    #: the pass ``prefill_s`` times, in words: alone, with the other synced attention groups
    #: idle (aggregated), or with each synced group on a prompt of its own (disaggregated, and
    #: the capacity view: ``t_pf[1]``), :func:`prefill_pass_words`
    prefill_what: str = "one pass alone"
    #: the hottest expert rank's routed copies over the even share at the decode step (the
    #: routing's sample spread and the experts' placement, or ``routing_imbalance``; None without
    #: experts shared over ranks): the load the timed kernels apply, at the tokens one pass of
    #: the MoE layer carries (under two-batch overlap one micro-batch's, half the step's, a
    #: wider spread; one pipeline micro-batch's)
    expert_rank_load: float | None = None
    #: the engine whose scheduler defaults filled the arguments left out (None: none), and
    #: each argument it filled with its value (:func:`~mlacalc.serving.scheduler.
    #: with_engine_defaults`)
    scheduler_defaults: str | None = None
    scheduler_defaults_applied: dict[str, Any] = field(default_factory=dict)
    #: prefix caching: the share of each prompt's tokens whose KV is found cached (0: none),
    #: the tokens of a prompt that makes (``floor(hit x isl)``, the last one always computed),
    #: and what the KV memory assumes of them (:data:`PREFIX_CACHE_MEMORY`; None at 0)
    prefix_cache_hit: float = 0.0
    prefix_cached_tokens: int = 0
    prefix_cache_memory: str | None = None
    #: a shared prefix: the tokens every prompt begins with alike (``shared_prefix``, 0:
    #: none), those held once per attention group (whole pages) and their cache bytes on a
    #: GPU of the (decode) pool, counted once in the KV budget (:data:`SHARED_PREFIX_MEMORY`)
    shared_prefix: int = 0
    shared_prefix_tokens: int = 0
    kv_bytes_shared_prefix_per_gpu: int = 0
    #: the memory rule, in words: the planner's ``memory_reserve`` or the engine's own setting
    #: (``engine_memory``, its share as given; None: not given) and the reserve it came to
    memory_setting: str = ""
    engine_memory: float | None = None
    #: TensorRT-LLM's MoE backend asked (``moe_backend``; None: the engine's default) and the
    #: MoE kernel the routed experts were timed as, with its class (None: no routed experts;
    #: :mod:`mlacalc.timemodel.moe_backend`)
    moe_backend: str | None = None
    moe_kernel: str | None = None
    #: the expert layout's assumptions (None, or 0, without routed experts shared over
    #: ranks): the replicas of busy experts placed (EPLB), how a step's routed copies spread
    #: over the ranks (``routing``: random, the sampling spread, or balanced), the experts'
    #: popularity (``expert_skew``, a Zipf exponent), ``routing_imbalance`` (the user's
    #: busiest-expert factor), whether the placement is rebalanced (EPLB; the default: with
    #: redundant experts), and :attr:`expert_rank_load`'s origin in words
    redundant_experts: int = 0
    routing: str | None = None
    expert_skew: float | None = None
    routing_imbalance: float | None = None
    rebalance: bool | None = None
    expert_rank_load_from: str | None = None
    #: the kernels the routed experts' dispatch and combine are timed as, in words, and for
    #: which engine they stand in (None: no expert-parallel exchange, :func:`ep_exchange_words`)
    ep_exchange: str | None = None
    #: the dtype a linear or Mamba layer's recurrent state is kept in (``fp32``, or ``bf16``
    #: with ``state_dtype``); None: the model keeps none (:attr:`kv_layout`: the cache's rows)
    state_dtype: str | None = None

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

    @property
    def tpot_others_prompts_s(self) -> float | None:
        """What other requests' prompts add to TPOT, aggregated: the gap between two tokens
        of a request less the decode step a token (``decode_step_s / tokens_per_step``): the
        steps that carry a prompt on the group, or on any synced attention group, last as the
        prompt's pass (GLM-5.1 on 72 GB200, DP-attention, 8,192 in flight: TPOT 287 ms of a
        26.6 ms decode step). None where it has no meaning (disaggregated: the decode pool
        carries no prompts; no TPOT)."""
        if self.mode != "aggregated" or self.tpot_s is None or self.decode_step_s is None:
            return None
        return max(self.tpot_s - self.decode_step_s / self.tokens_per_step, 0.0)

    def tpot_parts(self) -> list[tuple[str, float]]:
        """TPOT's parts in words and seconds, where other requests' prompts make a visible
        share of it (:data:`TPOT_PARTS_SAID`; aggregated): the decode step a token, and the
        rest, the steps that carry a prompt. The words ``plan`` prints and the app shows."""
        extra = self.tpot_others_prompts_s
        if extra is None or extra < TPOT_PARTS_SAID * self.tpot_s:
            return []
        step = "of which the decode step" + (" a token" if self.tokens_per_step != 1 else "")
        return [
            (step, self.decode_step_s / self.tokens_per_step),
            ("of which other requests' prompts in the steps", extra),
        ]

    def step_parts(self) -> list[tuple[str, float]]:
        """A decode step's time by component, seconds each, in the order a reader adds them:
        attention (every kernel of the attention core and its own kernels: not a GEMM, the
        routed experts or an elementwise op), the dense GEMMs (projections, shared experts,
        router, head), the routed experts, elementwise ops (norms, activations, quantize),
        the expert dispatch and combine links and the other communication (exposed: the
        share the step waits for, split between the two by their kernel time under two-batch
        overlap), then the host, launches and the rest of the step (MTP drafts, a pipeline's
        stages) and, aggregated, the other requests' prompts a step carries (TPOT's share a
        token, times the tokens a step yields). The kernel rows are one micro-batch's under
        two-batch overlap (:attr:`kernels_scope`): its compute counts twice, as the step runs
        both. Empty where no step was timed, or under pipeline parallelism (the rows are one
        micro-batch through every stage). :meth:`step_parts_note` says how they add up."""
        if self.decode_step_s is None or not self.kernels or self.pp > 1:
            return []
        twice = 2.0 if self.overlap == "tbo" else 1.0
        compute = {"gemm": "dense GEMMs", "moe": "routed experts", "elementwise": "elementwise"}
        sums = dict.fromkeys(["attention", *compute.values()], 0.0)
        exchange, other = "dispatch / combine (exposed links)", "other communication (exposed)"
        links = {exchange: 0.0, other: 0.0}
        for k in self.kernels:
            t = float(k["seconds"])
            if k["communication"]:
                links[exchange if k["kind"] in ("dispatch", "combine") else other] += t
            else:
                sums[compute.get(k["kind"], "attention")] += twice * t
        total = sum(links.values())
        for key, t in links.items():  # what the step waits for, split by their kernel time
            sums[key] = (self.step_comm_s or 0.0) * t / total if total else 0.0
        # a link the overlap hides whole stays, at 0 exposed
        out = [(name, v) for name, v in sums.items() if v > 0 or links.get(name)]
        rest = self.decode_step_s - sum(v for _, v in out)
        if rest > 1e-12:
            out.append(("host, launches and the rest of the step", rest))
        prompts = self.tpot_others_prompts_s
        if prompts:
            out.append(("other requests' prompts in the step", prompts * self.tokens_per_step))
        return out

    def step_parts_shares(self) -> tuple[list[tuple[str, float, float]], str | None]:
        """:meth:`step_parts` each with its share of what they add to, and the caption the
        CLI's and the app's tables give them (their sum, :meth:`step_parts_note`); ``([],
        None)`` where no part was timed."""
        parts = self.step_parts()
        if not parts:
            return [], None
        total = sum(t for _, t in parts)
        caption = f"The parts sum to {total * 1e3:,.2f} ms; {self.step_parts_note()}."
        return [(name, t, t / total) for name, t in parts], caption

    def step_parts_note(self) -> str | None:
        """How :meth:`step_parts` makes the step, in words (None where it is empty)."""
        if not self.step_parts():
            return None
        tbo = (
            "the kernel table below is one of the two micro-batches of a two-batch-overlap "
            "step; the step runs both, so each compute part here is twice its rows, and the "
            "links are what each micro-batch leaves exposed past the other's compute"
            if self.overlap == "tbo"
            else "the kernel table below is the whole step of one GPU"
        )
        prompts = (
            "; the prompts' row is what other requests' prompts add to a step on average "
            "(aggregated), not part of the decode step's time"
            if self.tpot_others_prompts_s
            else ""
        )
        return f"{tbo}{prompts}"

    def prefix_cache_text(self) -> str | None:
        """The prefix cache's hit in words (None without one): the share and the tokens of a
        prompt found cached, and what the prompt computes."""
        if not (self.prefix_cache_hit or self.shared_prefix) or self.isl is None:
            return None
        c, isl = self.prefix_cached_tokens, self.isl
        tokens = f"{isl:,} token{'' if isl == 1 else 's'}"
        if self.shared_prefix and c == self.shared_prefix_tokens:  # the shared prefix's pages
            pages = (
                f" (its {self.shared_prefix:,} rounded down to whole {self.page_size}-token pages)"
                if self.shared_prefix != c
                else ""
            )
            hit = (
                f"; the hit {self.prefix_cache_hit:.4g} finds no more"
                if self.prefix_cache_hit
                else ""
            )
            return (
                f"the shared prefix: {c:,} of {tokens} found cached{pages}, {isl - c:,} computed"
                + (hit or "")
            )
        # an engine finds whole pages cached (prefix_cached_tokens): said where the pages
        # dropped tokens the hit alone would find cached
        dropped = prefix_cached_tokens(self.prefix_cache_hit, isl) != c
        pages = f" (rounded down to whole {self.page_size}-token pages)" if dropped else ""
        if not c:  # the hit caches nothing (not one token, or not one whole page)
            nothing = f"no whole {self.page_size}-token page" if dropped else "no token"
            return (
                f"{self.prefix_cache_hit:.4g} of each prompt rounds to {nothing} found cached "
                f"(of {tokens}): all computed"
            )
        return (
            f"{self.prefix_cache_hit:.4g} of each prompt: {c:,} of {tokens} found cached{pages}, "
            f"{isl - c:,} computed"
        )

    def ttft_parts(self) -> list[tuple[str, float]]:
        """TTFT's parts in words and seconds. Under chunked prefill: the prompt's own chunk
        steps beside the decode batch, which TTFT adds to the wait for the step in progress
        (one pass of the whole prompt alone is the plan's prefill row). Disaggregated: the
        wait for the prefill pool (the pass in progress, and the prompts before it), then the
        prompt's own pass there (with the others of its pass), then the KV transfer. The words
        ``plan`` prints and the app shows."""
        k, pass_s = self.prefill_pool_pass_prompts, self.prefill_pool_pass_s
        if k and pass_s is not None and self.ttft_s is not None and math.isfinite(self.ttft_s):
            wait = max(self.ttft_s - pass_s - (self.kv_transfer_s or 0.0), 0.0)
            prompts = f"{k:,} prompt{'' if k == 1 else 's'}"
            return [
                ("of which the wait for the prefill pool", wait),
                (f"of which its pass there ({prompts} a group)", pass_s),
                ("of which the KV transfer", self.kv_transfer_s or 0.0),
            ]
        if not self.prefill_chunks:
            return []
        label = (
            f"of which the prompt's {self.prefill_chunks:,} chunk "
            f"step{'' if self.prefill_chunks == 1 else 's'} of "
            f"{self.prefill_chunk_tokens:,} tokens (beside the decode batch)"
        )
        return [(label, self.prefill_chunks_s)]

    def disaggregated_parts(self) -> list[tuple[str, str]]:
        """A disaggregated plan's own figures in words (none aggregated): one request's KV
        cache handed from the prefill pool to the decode pool (its time; the link it crosses
        and the most bytes a rank sends or receives) and the two pools' rates, the lower of
        which caps the rest. The words ``plan`` prints (the link's row under the transfer's,
        labelled "link") and the app shows."""
        out: list[tuple[str, str]] = []
        if self.kv_transfer_s is not None:  # the whole prompt's KV, its cached rows too
            whole = " (the whole prompt's KV, cached rows too)" if self.prefix_cached_tokens else ""
            out.append((f"KV transfer per request{whole}", f"{self.kv_transfer_s * 1e3:,.2f} ms"))
            if self.kv_transfer_link:
                share = human_bytes(self.kv_transfer_rank_bytes or 0)
                out.append(("link", f"{self.kv_transfer_link}, at most {share} a rank"))
        if self.prefill_pool_requests_per_s is not None:
            out.append(
                ("prefill pool's rate", f"{self.prefill_pool_requests_per_s:,.1f} prompts/s")
            )
            out.append(
                (
                    "decode pool's rate at its largest batch",
                    f"{self.decode_pool_requests_per_s:,.1f} requests/s",
                )
            )
        return out

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
        """The time to first token in ms (below 10 s), s (below 10 minutes) or minutes, or
        "unbounded" when the queue grows without bound."""
        if self.ttft_s is None:
            return "-"
        if not math.isfinite(self.ttft_s):
            return "unbounded (the queue grows without bound)"
        return duration_text(self.ttft_s)

    def longest_context_text(self) -> str:
        """The longest context at the batch, in words: the model's position limit when memory
        allows more ("131,072 tokens (the model's max_position_embeddings; memory allows
        1,731,104)")."""
        if self.max_context is None:
            return "-"
        limit = self.max_position_embeddings
        if limit and self.context > limit and self.max_context_memory is not None:
            # one rule: a plan asked past the model's positions counts every figure as if the
            # model were trained for them (its warning says so once), the longest context too
            return (
                f"{self.max_context_memory:,} tokens (memory's, counted past the model's "
                f"max_position_embeddings, {limit:,}, as the rest of the plan)"
            )
        text = f"{self.max_context:,} tokens"
        if self.max_context_memory is not None and self.max_context_memory > self.max_context:
            # the cap is the model's position limit, not an attention window (a model with
            # sliding layers has windows far below it)
            text += (
                f" (the model's max_position_embeddings; memory allows {self.max_context_memory:,})"
            )
        return text

    def price(self, gpu_hour_usd: float) -> Price | None:
        """The plan's tokens at ``gpu_hour_usd`` US dollars a GPU-hour (the user's price; none
        is shipped): dollars a million output tokens, a million tokens and a request, and each
        pool's, disaggregated (:func:`mlacalc.serving.price.price_of`); None where nothing was
        timed. ``gpu_hour_usd`` must be a finite positive number.

        >>> p = plan("llama-3-8b", "H100-SXM", 1, isl=1000, osl=200, concurrency=8)
        >>> pr = p.price(2.0)
        >>> round(pr.usd_per_million_output_tokens * pr.output_tokens_per_s * 3600 / 1e6, 6)
        2.0
        """
        return price_of(self, gpu_hour_usd)

    @property
    def total_gpus(self) -> int:
        """Every GPU of the deployment: ``gpus`` (the decode pool's, disaggregated) and the
        prefill pool's."""
        return self.gpus + self.prefill_gpus

    @property
    def timed_batch(self) -> int | None:
        """The batch the decode figures (``decode_step_s``, ``decode_tokens_per_s``, the
        kernels) are for: ``decode_batch``, which is the largest batch that fits, not
        ``batch``, when ``batch`` does not (``fits`` false); None where nothing was timed.
        Always ``decode_batch`` (a name a plot cannot misread): the JSON carries it once, as
        ``decode_batch``."""
        return self.decode_batch

    def to_dict(self) -> dict[str, Any]:
        """Every field, JSON-safe: an unbounded figure (TTFT and the queue when requests
        arrive faster than the deployment serves them) is ``None``, with ``sustainable``
        false; ``total_gpus`` adds the prefill pool's GPUs to the decode pool's ``gpus``;
        ``decode_batch`` is the batch the decode figures are for (:attr:`timed_batch` is not
        repeated: one key, one meaning);
        ``schema`` :data:`SCHEMA` first (as report's and search's JSON carry theirs)."""
        out = {"schema": SCHEMA}
        out.update(
            (k, None if isinstance(v, float) and not math.isfinite(v) else v)
            for k, v in self.__dict__.items()
        )
        out["total_gpus"] = self.total_gpus
        out["tpot_others_prompts_s"] = self.tpot_others_prompts_s
        # the decode step by component, and how they make it (Plan.step_parts)
        out["step_parts"] = [{"component": c, "seconds": s} for c, s in self.step_parts()]
        out["step_parts_note"] = self.step_parts_note()
        out["memory"] = dict(self.memory)
        out["warnings"] = list(self.warnings)
        out["kernels"] = [dict(k) for k in self.kernels]
        # the tool's version after the schema, and the digest of the profile that timed it
        return stamped(out, (self.prediction.get("profile") or {}).get("digest"))


#: The schema of :meth:`Plan.to_dict` (and ``mlacalc plan --format json``)
SCHEMA = "mlacalc.plan/1"

#: What a plan with a prefix-cache hit assumes of the KV memory (``Plan.prefix_cache_memory``)
PREFIX_CACHE_MEMORY = (
    "each running request's whole prompt is counted, shared prefixes not deduplicated (an "
    "upper bound on the running requests' KV, the largest batch as without prefix caching); "
    "prefixes kept for requests not running (other turns of a conversation, a prefill pool's "
    "radix cache) are not counted"
)

#: What a plan with a shared prefix assumes of the KV memory (``Plan.prefix_cache_memory``)
SHARED_PREFIX_MEMORY = (
    "the shared prefix's pages held once per attention group (per DP-attention rank or "
    "tensor-parallel group, its share on each GPU of the group), each running request's "
    "other tokens its own; one prefix for all requests, never evicted; the prefill pool's "
    "pass and the KV transfer count each prompt whole"
)


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
    component_dtypes: dict[str, str] | None = None,
    kv_dtype: str | KVLayout = "bf16",
    page_size: int | None = None,
    memory_reserve: float | None = None,
    engine_memory: float | None = None,
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
    mtp_acceptance_length: float | None = None,
    routing_imbalance: float = 1.0,
    routing: str = "random",
    expert_skew: float = 0.0,
    rebalance: bool | None = None,
    max_running: int | None = None,
    max_tokens: int | None = None,
    host_step_s: float = 0.0,
    host_per_sequence_s: float = 0.0,
    overlap_schedule: bool | None = None,
    cuda_graph_max_batch: int | None = None,
    launch_s: float = 0.0,
    redundant_experts: int = 0,
    output_lag_steps: int = 0,
    prefill_pass: str = "fused",
    prefix_cache_hit: float = 0.0,
    shared_prefix: int = 0,
    profile: Any = None,
    engine: str | None = None,
    engine_defaults: str | None = None,
    moe_backend: str | None = None,
    state_dtype: str | None = None,
) -> Plan:
    """Fit a model on ``gpus`` devices in a layout; the decode step and, for a request mix, the
    serving figures (see the module docstring). With ``mode="disaggregated"``, ``gpus`` is
    the decode pool and ``prefill_gpus`` (by default as many) the prefill pool beside it:
    ``Plan.total_gpus`` GPUs in all. With an ``engine``, its scheduler defaults fill the
    scheduler arguments left out (``max_running``, ``max_tokens``, ``chunked_prefill``,
    ``overlap_schedule``, ``cuda_graph_max_batch``), as ``mlacalc plan --engine`` does;
    ``engine_defaults`` names another engine's, or ``"none"`` (``Plan.scheduler_defaults``
    and ``scheduler_defaults_applied`` say what was taken). ``memory_reserve``: the share of
    each GPU kept from the weights and the KV cache (None: :data:`defaults.MEMORY_RESERVE`);
    or ``engine_memory``, the engine's own memory setting read by ``engine``'s meaning
    (:data:`mlacalc.serving.capacity.ENGINE_MEMORY`; refused beside a ``memory_reserve``);
    ``Plan.memory_setting`` says which ran. ``moe_backend`` (TensorRT-LLM's
    ``moe_config.backend``; None: its default, ``"cutlass"``): ``"trtllm-gen"`` times nvfp4
    routed experts on data-centre Blackwell with TensorRT-LLM-gen's MoE, its B200 table's
    min-latency class (:mod:`mlacalc.timemodel.moe_backend`); refused where it does not apply.
    ``Plan.moe_kernel`` says which kernel the experts were timed as. ``state_dtype``
    (``"bf16"``; None: float32) keeps a linear or Mamba layer's recurrent state in
    that dtype, in the memory sized and the bytes each step moves (``Plan.state_dtype``).

    Examples
    --------
    >>> p = plan("deepseek-v3", "H200", 8, kv_dtype="bf16", seq_len=131072)
    >>> p.max_batch, p.binding, p.fits
    (5, 'kv capacity', True)
    >>> plan("deepseek-v3", "H100-SXM", 1).fits
    False
    """
    # every argument, checked and normalised (locals() here: exactly the arguments)
    args = with_engine_defaults(locals())
    req = check_request(**args)
    cap = admitted(req, capacity(req, fewest=True))
    common = plan_fields(req, cap)
    common["warnings"] += latent_copies(req.m, req.lay, req.p_lay, _cache_figures(req))
    common["warnings"] += trtllm_attention_tp(req.engine, req.lay, req.p_lay)
    # a CPU profile fitted on another CPU (a Xeon's planning an EPYC), or other threads
    common["warnings"] += tuple(filter(None, [other_cpu_warning(req.profile, req.hw)]))
    common["scheduler_defaults"] = args["scheduler_defaults"]
    common["scheduler_defaults_applied"] = args["scheduler_defaults_applied"]
    if engine is None and args["scheduler_defaults"] is None:  # no engine named, none's taken
        common["default_engine_note"] = default_engine_note(req, args)
    common["warnings"] += overlap_idle_note(overlap_schedule, req.scheduler)
    if not cap.fits and cap.max_batch < 1:
        unfit = unfitted_plan(common, cap, "weights" if cap.budget <= 0 else "kv capacity")
        return with_tp_network_warning(req, unfit)
    # the step model needs numpy; capacity figures alone do not

    sm = StepModel(req.m, req.lay, req.sized, req.kv, req.hw, req.profile, **req.step_model_args())
    common["warnings"] += (
        kv_kernel_warnings(req, cap, sm)
        + fp4_kernel_warnings(req, cap, sm)
        + fp8_kernel_warnings(req, cap, sm)
        + mmha_warnings(req, sm)
        + indexer_tp_warnings(req, cap, sm)
    )
    if req.isl is None:
        return with_tp_network_warning(req, with_tbo_warning(capacity_plan(req, cap, common, sm)))
    served = with_prompt_interference(req, serving_plan(req, cap, common, sm))
    return with_tp_network_warning(req, with_tbo_warning(served))


#: The binding of an aggregated plan whose TPOT is mostly other requests' prompts in the steps
PROMPT_INTERFERENCE = "prompts in the decode steps"


def with_prompt_interference(req: PlanRequest, p: Plan) -> Plan:
    """An aggregated plan whose TPOT is mostly other requests' prompts run inside the decode
    steps (their share over the decode step's, :meth:`Plan.tpot_parts`) is bound by them, not
    by the decode step's roof: its binding says so (:data:`PROMPT_INTERFERENCE`, and the
    synchronised attention groups where several meet at every MoE layer: a step any of them
    runs a prompt in lasts as the prompt's pass on all), and a warning points to
    disaggregated serving, which keeps prompts out of the decode steps, with the commands (a
    trial: DeepSeek-V3 on 64 H200, EP64 DP-attention, 364 of a 420 ms TPOT prompts, read
    "binding resource: memory bandwidth" and no hint). Only where the binding is the step's
    roof: a queue, a prefill pool or chunked prefill binding says its own."""
    extra = p.tpot_others_prompts_s
    roof = roof_words(p.decode_bound) if p.decode_bound else p.decode_bound
    if extra is None or p.binding != roof or extra <= p.decode_step_s / p.tokens_per_step:
        return p
    groups = synced_groups(req.m, req.lay)
    on = f"any of the {groups:,} synchronised attention groups" if groups > 1 else "its group"
    binding = PROMPT_INTERFERENCE + (
        f" ({groups:,} synchronised attention groups)" if groups > 1 else ""
    )
    step = p.decode_step_s / p.tokens_per_step
    said = (
        f"other requests' prompts make {extra * 1e3:,.1f} of the {p.tpot_s * 1e3:,.1f} ms "
        f"TPOT ({extra / p.tpot_s:.0%}; the decode step a token {step * 1e3:,.1f} ms): every "
        f"step that carries a prompt on {on} lasts as the prompt's "
        "pass. Disaggregated serving runs the prompts on a prefill pool of their own, out of "
        f"the decode steps: mlacalc plan {req.m.name} -H {req.hw.name} --gpus {req.gpus} ... "
        f"--mode disaggregated {prefill_gpus_hint(req, p)}; or let search weigh both: "
        f"mlacalc search {req.m.name} -H {req.hw.name} --gpus {req.gpus} --isl {req.isl} "
        f"--osl {req.osl} --tpot TARGET"
    )
    return dataclasses.replace(p, binding=binding, warnings=(*p.warnings, said))


def prefill_gpus_hint(req: PlanRequest, p: Plan) -> str:
    """``--prefill-gpus N`` with a number, for the prompt-interference warning: the GPUs a
    prefill pool of the plan's attention groups needs to keep up with the requests the decode
    steps serve without prompts (``decode_batch x tokens_per_step / decode_step_s / osl``
    a second), one prompt's pass alone (``prefill_s``) on an attention group's ``tp x pp``
    GPUs a request, rounded up to whole scale-up domains (a node's 8 GPUs), under expert
    parallelism to whole multiples of the decode pool's expert group too (the prefill pool's
    default ep follows the decode pool's: DeepSeek-V3 at EP16 on 16 H200 with 8k prompts said
    24, whose default EP8 splits each expert 3 ways and is refused; now 32), and to as many as
    hold the weights at the plan's share a GPU. An estimate from the plan's own figures (the
    groups of a busy pool meet at each MoE layer, which this leaves out): search sizes the
    pool by timing it."""
    lay = req.lay
    if not (p.decode_batch and p.decode_step_s and p.prefill_s and req.osl):
        return "--prefill-gpus N"
    rate = p.decode_batch * p.tokens_per_step / p.decode_step_s / req.osl
    group = lay.tp * lay.pp
    node = req.hw.scale_up_gpus or 8
    step = math.lcm(node, lay.moe_group) if req.m.n_routed_experts and lay.ep > 1 else node
    weights = p.weights_per_gpu_bytes * lay.moe_group * lay.pp
    hold = -(-weights // max(p.usable_per_gpu_bytes, 1))
    need = max(rate * p.prefill_s * group, hold, group)
    n = -(-math.ceil(need - 1e-9) // step) * step
    whole = (
        f"in whole {node}-GPU domains"
        if step == node
        else f"in whole multiples of the {lay.moe_group}-GPU expert group and {node}-GPU domains"
    )
    return (
        f"--prefill-gpus {n} (about: {rate:,.2f} requests/s the decode steps serve without "
        f"prompts, each prompt's {p.prefill_s:,.3g} s pass on an attention group of {group} "
        f"GPU{'s' if group > 1 else ''}, {whole}; search times it)"
    )


def _cache_figures(req: PlanRequest) -> Any:
    """A layout's :data:`~mlacalc.serving.plan_checks.CacheFigures` as plan sizes them: the
    request's (decode) pool on that layout, the largest batch the cache holds (before an
    engine's admission limit)."""

    def figures(lay: Layout) -> tuple[int, int, int]:
        cap = capacity(dataclasses.replace(req, lay=lay))
        return cap.per_token, cap.tokens_per_gpu, cap.max_batch

    return figures


def default_engine_note(req: PlanRequest, args: dict[str, Any]) -> str:
    """A plan of no engine named times the default engine's kernels but takes no engine's
    scheduler defaults: said, with what naming it (``--engine``, ``engine=``) fills of the
    options left out, the page size among them (a model-architect trial's plan gave max_batch
    1,328 at 16-token pages, and 1,312 at TensorRT-LLM's 32 once ``--engine trtllm`` was typed,
    both saying "engine trtllm"). The words are :func:`~mlacalc.serving.scheduler.
    unnamed_engine_note`'s, which ``search`` says too."""
    chunked = req.isl is not None and req.mode != "disaggregated"
    stand_in = req.profile.engine if req.engine_note else None  # another engine's kernels
    return unnamed_engine_note(req.engine, args, req.m, req.hw, req.page_size, chunked, stand_in)


def with_tp_network_warning(req: PlanRequest, p: Plan) -> Plan:
    """The plan with a warning for each pool whose tensor-parallel group spans more GPUs than
    one scale-up domain (a node, an NVL72 rack) holds: every layer's all-reduces cross the
    network (a new-user trial: TP16 over two H100 nodes, 27 ms of communication in a 71 ms
    step, no word), with the decode step's link time where it was timed."""
    node = req.hw.scale_up_gpus
    said = []
    for pool, lay in (("", req.lay), ("the prefill pool's ", req.p_lay)):
        if lay is None or node is None or lay.tp <= node:
            continue
        links = ""
        if not pool and p.step_links_s is not None and p.decode_step_s:
            links = (
                f" ({p.step_links_s * 1e3:,.1f} ms of links in the "
                f"{p.decode_step_s * 1e3:,.1f} ms decode step)"
            )
        said.append(
            f"{pool}tp {lay.tp} spans {-(-lay.tp // node)} scale-up domains (a node's or rack's "
            f"GPU fabric) of {node} {req.hw.name} GPUs: every layer's tensor-parallel "
            f"all-reduce crosses the network{links}; engines keep TP within one: tp at most "
            f"{node}, with pipeline, data or expert parallelism across them"
        )
    said += _moe_tp_network_words(req, node)
    said += _ep_network_words(req, node, p)
    return dataclasses.replace(p, warnings=(*p.warnings, *said)) if said else p


def _moe_tp_network_words(req: PlanRequest, node: int | None) -> list[str]:
    """A warning for each pool whose routed experts are split (MoE tensor parallelism, the MoE
    group over ep) across more GPUs than one scale-up domain holds, where the attention's
    tensor parallelism is within one (that one :func:`with_tp_network_warning` says): every
    MoE layer's reduction crosses the network (a capacity planner's trial: DeepSeek-V3 on 64
    H200 at TP1 DP-attention, MoE-TP64, 1,151.8 ms TPOT and 7 tok/s/GPU, no word). The fix
    is expert parallelism: ``--ep`` of the largest degree that splits the experts whole (or,
    where none does, at most a domain each)."""
    out: list[str] = []
    experts = req.m.n_routed_experts or 0
    for pool, lay, flag in (("", req.lay, "--ep"), ("the prefill pool's ", req.p_lay,
                                                    "--prefill-ep")):  # fmt: skip
        if lay is None or node is None or not experts or lay.moe_tp <= node or lay.tp > node:
            continue
        group = lay.moe_group
        fits = [e for e in range(1, group + 1) if group % e == 0 and group // e <= node]
        whole = [e for e in fits if (experts + lay.redundant_experts) % e == 0]
        ep = max(whole or fits)
        out.append(
            f"{pool}routed experts split {lay.moe_tp} ways (MoE-TP{lay.moe_tp}) span "
            f"{-(-lay.moe_tp // node)} scale-up domains (a node's or rack's GPU fabric) of "
            f"{node} {req.hw.name} GPUs: every MoE layer's tensor-parallel reduction crosses "
            f"the network; expert parallelism keeps each expert whole on a GPU: {flag} {ep}"
            + ("" if whole else " (with --redundant-experts to make it divide the experts)")
        )
    return out


#: The share of the decode step its exposed network links (``step_comm_s``) must reach for the
#: expert group's domain warning (:func:`_ep_network_words`): below it the plan's exchange line
#: (:func:`ep_exchange_words`, which names the domains) says it once
LINKS_MATTER = 0.2


def _ep_network_words(req: PlanRequest, node: int | None, p: Plan) -> list[str]:
    """A warning where a pool's expert group (the MoE group: every GPU of a stage under
    DP-attention) spans more GPUs than one scale-up domain holds, its experts whole or split
    within a domain (a wider split :func:`_moe_tp_network_words` says, a wider TP
    :func:`with_tp_network_warning`): every MoE layer's dispatch and combine cross the
    network, with the decode step's link time where it was timed (a trial: GB200 x144 at
    EP72 over two NVL72 racks, 17.3 ms of links in a 34.8 ms step against 4.3 in one rack's,
    no word). The layout inside one domain: a replica of a domain's GPUs, as many replicas.

    Said once and where it matters (a trial, round 28, read it on every H200 plan of EP16 or
    more): the decode pool's only where its exposed links are :data:`LINKS_MATTER` of the
    step or more (DeepSeek-V3 EP16-64 on H200 under SGLang's two-batch overlap: 8-9 ms of
    35-36 exposed in a 55-68 ms step, quiet; without the overlap 34-35 of 69-75 ms, said),
    the prefill pool's in the same warning where both span domains, alone only where the
    decode pool's group fits one domain."""
    if node is None or not req.m.n_routed_experts:
        return []
    spans = {}
    for pool, lay, flag in (("", req.lay, "--gpus"), ("the prefill pool's ", req.p_lay,
                                                      "--prefill-gpus")):  # fmt: skip
        if lay is None or lay.moe_group <= node or lay.moe_tp > node or lay.tp > node:
            continue
        group = f"EP{lay.ep}" + (f" over DP-attention{lay.dp}" if lay.dp_attention else "")
        inside = (
            f"replicas of {node} GPUs ({flag} {node}, its --ep within it), "
            f"{lay.gpus // node} of them"
            if lay.gpus % node == 0
            else f"replicas of at most {node} GPUs ({flag} {node} or fewer)"
        )
        spans[pool] = (
            f"{pool}expert group of {lay.moe_group} GPUs ({group}) spans "
            f"{-(-lay.moe_group // node)} NVLink domains (a node's or rack's GPU fabric) of "
            f"{node} {req.hw.name} GPUs",
            inside,
        )
    if "" not in spans:
        return [
            f"{where}: every MoE layer's dispatch and combine cross the network; a layout "
            f"inside one domain: {inside}"
            for where, inside in spans.values()
        ]
    links = ""
    if p.step_links_s is not None and p.decode_step_s:
        exposed = p.step_comm_s if p.step_comm_s is not None else p.step_links_s
        if exposed < LINKS_MATTER * p.decode_step_s:
            return []
        hidden = f", {exposed * 1e3:,.1f} exposed" if exposed < p.step_links_s * (1 - 1e-9) else ""
        links = (
            f" ({p.step_links_s * 1e3:,.1f} ms of links in the "
            f"{p.decode_step_s * 1e3:,.1f} ms decode step{hidden})"
        )
    where, inside = spans[""]
    said = (
        f"{where}: every MoE layer's dispatch and combine cross the network{links}; a layout "
        f"inside one domain: {inside}"
    )
    if "the prefill pool's " in spans:
        where, inside = spans["the prefill pool's "]
        said += f"; {where} too (inside one: {inside})"
    return [said]


def with_tbo_warning(p: Plan) -> Plan:
    """The plan with a warning where two-batch overlap times one sequence or fewer per
    attention group as two micro-batches (a new-user trial: GLM-5.1 on 72 GB200 at one
    sequence a rank, 16.28 -> 26.17 ms a step, half a sequence a micro-batch): a batch that
    small does not split, and SGLang runs it without the overlap (from recall: its two-batch
    overlap splits a decode batch by sequences and falls back to one batch when a half would
    be empty)."""
    per_group = p.running_batch_per_group
    if p.overlap != "tbo" or per_group is None or per_group > 1:
        return p
    said = (
        f"two-batch overlap with {per_group:,.2g} running per attention group: a decode batch "
        "of one sequence or fewer does not split into two micro-batches (SGLang, whose "
        "two-batch overlap this models, runs such a batch without it, from recall), yet these "
        "figures time half of it a micro-batch; overlap none (--overlap none) times it as one "
        "batch"
    )
    return dataclasses.replace(p, warnings=(*p.warnings, said))


#: How much slower than a bf16 cache's an fp8 cache's decode step must be to be said
FP8_CACHE_SLOWER = 1.2

#: How much slower than fp8 weights' fp4 weights' decode step must be to be said
FP4_WEIGHTS_SLOWER = 1.1

#: How much slower than bf16 weights' fp8 weights' decode step must be to be said (as an fp8
#: cache's, :data:`FP8_CACHE_SLOWER`)
FP8_WEIGHTS_SLOWER = 1.2


def _engine_label(req: PlanRequest) -> str:
    """The engine's name as the words say it (vLLM, SGLang, TensorRT-LLM), not its option."""
    return ENGINE_LABELS.get(req.engine, req.engine)


def _compared_batch(req: PlanRequest, cap: Capacity) -> tuple[int | None, int, int]:
    """The batch a dtype warning compares two decode steps at: the batch or concurrency asked
    (None when neither is), and the sequences a group and their context, the asked batch or
    else the most the cache holds."""
    asked = req.batch or (math.ceil(req.concurrency) if req.concurrency else None)
    B = math.ceil(min(asked or cap.max_batch, cap.max_batch) / req.lay.dp)
    return asked, B, cap.context


def _context_note(req: PlanRequest) -> str:
    """What a dtype warning of a serving plan (``isl`` given) adds: its two steps are timed at
    the whole context, where the plan's ``decode_step_s`` is at the mean one (a review read
    44.18 ms in the warning against the plan's 40.18 ms step); nothing for a capacity plan."""
    if req.isl is None:
        return ""
    return " (both steps at the whole context; the plan's decode_step_s is at the mean context)"


def _both_steps(
    req: PlanRequest, sm: StepModel, other: tuple[str | None, KVLayout], B: int, S: int
) -> tuple[float, float]:
    """The decode step of ``B`` sequences of ``S`` tokens a group as planned (``sm``) and with
    the weights and cache of ``other`` (``(sized, kv)``), seconds each."""
    alt = StepModel(req.m, req.lay, *other, req.hw, req.profile, **req.step_model_args())
    return tuple(
        float(model.step(overlap=req.overlap, dec_B=B, dec_S=S).seconds[0]) for model in (sm, alt)
    )


def fp4_kernel_warnings(req: PlanRequest, cap: Capacity, sm: StepModel) -> tuple[str, ...]:
    """fp4 weights (``weight_dtype`` fp4) on a device with fp4 tensor cores whose decode step
    the engine's measured kernels run slower than fp8 weights' (TensorRT-LLM's B200 nvfp4
    GEMMs at 64 tokens or fewer take about twice its fp8 ones: 19.4 against 10.8 us at
    n 1,536, k 7,168), said with both steps at the plan's decode batch a group: fp4 holds the
    weights in half the memory, fp8 may still be the faster step. Only a ``weight_dtype`` of
    fp4 is compared: an NVFP4 checkpoint as stored, or nvfp4 components, have no fp8 plan the
    user named to compare with (DeepSeek-V3.1 NVFP4 on 8 B200 under TensorRT-LLM, 8K + 256 at
    8: TPOT 19.94 ms against 19.93 with fp8 weights, where ``--weight-dtype fp4`` gives 22.51)."""
    if req.sized != "fp4" or "fp4" not in device_figures(req.hw).peaks or not cap.max_batch:
        return ()
    _, B, S = _compared_batch(req, cap)
    fp4_s, fp8_s = _both_steps(req, sm, ("fp8", req.kv), B, S)
    if fp4_s < FP4_WEIGHTS_SLOWER * fp8_s:
        return ()
    return (
        f"fp4 weights' kernels under {_engine_label(req)} on {req.hw.name} are slower than fp8 "
        f"weights' at this batch (the measured kernels): a decode step of {B:,} sequences of "
        f"{S:,} tokens a group takes {fp4_s * 1e3:,.2f} ms, {fp8_s * 1e3:,.2f} ms with "
        "weight_dtype fp8 (--weight-dtype fp8), which holds twice the weight bytes"
        + _context_note(req),
    )


def fp8_kernel_warnings(req: PlanRequest, cap: Capacity, sm: StepModel) -> tuple[str, ...]:
    """fp8 weights (``weight_dtype`` fp8) whose decode step the engine's measured kernels run
    slower than bf16 weights' on the device, said with both steps at the plan's decode batch a
    group (as :func:`kv_kernel_warnings` says an fp8 cache's): vLLM's per-tensor fp8 MoE on
    Hopper (its measured H100 table, ``vllm_modeloptfp8moe_flashinfer_cutlass``: 3.77 ms a
    layer at 256 tokens, 5x its weight-read floor) made Qwen3.5-122B-A10B on 2 H200 at 128
    running a 106 ms step against bf16's 42 ms, with no word."""
    if not (req.sized or "").startswith("fp8") or not cap.max_batch:  # fp8_e4m3 too
        return ()
    asked, B, S = _compared_batch(req, cap)
    fp8_s, bf16_s = _both_steps(req, sm, ("bf16", req.kv), B, S)
    if fp8_s < FP8_WEIGHTS_SLOWER * bf16_s:
        return ()
    which = "at the batch asked" if asked else "at the most the cache holds"
    # bf16 weights offered only where they leave the cache these sequences (a new review:
    # DeepSeek-V3 on 8 H200 was pointed to 1.3 TB of bf16 weights)
    bf16 = capacity(dataclasses.replace(req, sized="bf16"))
    holds = bf16.fits and bf16.max_batch >= B * req.lay.dp
    return (
        f"fp8 weights' kernels under {_engine_label(req)} on {req.hw.name} are slower than bf16 "
        f"weights' (the measured kernels): a decode step of {B:,} sequences of {S:,} tokens a "
        f"group ({which}) takes {fp8_s * 1e3:,.2f} ms, {bf16_s * 1e3:,.2f} ms with "
        + (
            "weight_dtype bf16 (--weight-dtype bf16), which holds twice the weight bytes"
            if holds
            else "bf16 weights, which do not fit these sequences on these GPUs (add GPUs, or "
            "keep fp8)"
        )
        + _context_note(req),
    )


def _indexer_share(kernels: list[dict[str, Any]]) -> tuple[float, float]:
    """The seconds of a timed step's DSA indexer kernels (``indexer_*``, every call) and of all
    its kernels, first row."""
    total = sum(float(k["seconds"][0]) for k in kernels)
    index = sum(float(k["seconds"][0]) for k in kernels if k["name"].startswith("indexer"))
    return index, total


def indexer_tp_warnings(req: PlanRequest, cap: Capacity, sm: StepModel) -> tuple[str, ...]:
    """A DSA model's attention split over ``tp > 1`` ranks: each layer's indexer (its
    projections, scores over every cached key and top-k) is whole on every rank, not split
    by tensor parallelism (docs/serving.md), said with its share of the decode step and of
    one ``seq_len`` prompt's prefill on a rank (a new-user trial read DeepSeek-V3.2's prefill
    of a 131,072-token prompt on 8 H200 at TP8, 25.6 s against DeepSeek-V3's 14.7 s, with
    no word why). DP-attention runs it on each rank's own sequences."""
    m, lay = req.m, req.lay
    if m.index_topk is None or lay.tp <= 1 or m.every_indexer_shared or not cap.max_batch:
        return ()
    _, B, S = _compared_batch(req, cap)
    dec_i, dec_t = _indexer_share(sm.step(overlap=req.overlap, dec_B=B, dec_S=S).kernels)
    pf_i, pf_t = _indexer_share(sm.step(overlap=req.overlap, pf_N=1, pf_q=S).kernels)
    if not dec_t or not pf_t:
        return ()
    return (
        f"{indexer_words(m)} is whole on every tensor-parallel rank (TP{lay.tp}), not "
        f"split by heads as the attention is: on each GPU it takes {pf_i:.2f} s of the "
        f"{pf_t:.2f} s of kernels of one {S:,}-token prompt's prefill ({pf_i / pf_t:.0%}) and "
        f"{dec_i * 1e3:.2f} of the {dec_t * 1e3:.2f} ms of kernels of a decode step of "
        f"{B:,} sequence{'s' if B != 1 else ''} ({dec_i / dec_t:.0%}); DP-attention "
        "(--tp 1 --dp-attention) runs it on each GPU's own sequences only",
    )


def mmha_warnings(req: PlanRequest, sm: StepModel) -> tuple[str, ...]:
    """A dense decode core whose rank holds more query heads a KV head than TensorRT-LLM's XQA
    kernel packs: timed as its masked MHA kernel, a unit a query head (attention_time's
    ``MMHA_FALLBACK_*``, read from its measured rows at 48-128 query heads a KV head), said
    (a new-user trial's Qwen3-Coder with 1 KV head read 51x its roofline bound with no word,
    MQA the slowest design). SGLang's and vLLM's decode kernels pack every query head."""
    if req.engine in PACKING_DECODE:
        return ()
    groups = {
        c[-1]["n_heads"] // max(c[-1]["n_kv"], 1)
        for t, c in zip(sm.templates, sm.sharded)
        if t.kind == "attention_decode" and not {"sparse", "pooled_ratio"} & set(c[-1])
    }
    over = sorted(g for g in groups if g > XQA_HEAD_PACK)
    if not over:
        return ()
    return (
        f"decode attention with {over[-1]} query heads a KV head on a GPU: {_engine_label(req)}'s "
        f"grouped decode kernel (XQA) packs at most {XQA_HEAD_PACK}, so it is timed as the "
        "masked MHA kernel (MMHA), a unit a query head, which re-reads the KV head's cache "
        "for each; SGLang's and vLLM's kernels pack every query head (--engine sglang)",
    )


def kv_kernel_warnings(req: PlanRequest, cap: Capacity, sm: StepModel) -> tuple[str, ...]:
    """An fp8 cache whose decode kernels the engine runs slower than a bf16 cache's on the
    device (SGLang's measured fp8 MLA decode on Hopper: DeepSeek-V3 on 8 H200, 7x the bf16
    kernel's time a call), said with both decode steps at the plan's batch a group (the batch
    or concurrency asked, else the largest a group holds): the fp8 cache holds more tokens,
    the bf16 one may still be the faster step. (It had always taken the largest batch, which
    a new-user trial read as a batch it had not asked for.) A cache narrower than fp8 (fp4,
    nvfp4, int8) is timed by the fp8 cache's kernels and said alike: SGLang's fp4 cache on
    Hopper took fp8's step, 1.9x bf16's, with no word (a capacity planner's trial)."""
    if req.kv.bits >= 16 or not cap.max_batch or req.m.num_attention_heads == 0:
        return ()  # (a narrower cache than fp8 runs the fp8 cache's kernels: _kv_warnings)
    asked, B, S = _compared_batch(req, cap)
    fp8_s, bf16_s = _both_steps(req, sm, (req.sized, resolve_kv_layout("bf16")), B, S)
    if fp8_s < FP8_CACHE_SLOWER * bf16_s:
        return ()
    which = "at the batch asked" if asked else "at the most the cache holds"
    return (
        f"the {req.kv.name} cache's decode kernels under {_engine_label(req)} on {req.hw.name} are "
        f"slower than a bf16 cache's ({_measured_words(req.kv.name)}): a decode step of {B:,} "
        f"sequences of {S:,} tokens a group ({which}) takes {fp8_s * 1e3:,.2f} ms, "
        f"{bf16_s * 1e3:,.2f} ms with kv_dtype bf16 (--kv-dtype bf16), which holds "
        f"{_SHARE_WORDS.get(req.kv.bits, f'{req.kv.bits:g}/16 of the')} tokens"
        + _context_note(req),
    )


def _measured_words(kv: str) -> str:
    """Whose measured kernels time a narrow cache's decode: its own (fp8), or fp8's standing
    in (a narrower cache, :func:`~mlacalc.serving.plan_checks._kv_warnings`)."""
    return "the measured kernels" if kv.startswith("fp8") else "the fp8 cache's measured kernels"


#: What a bf16 cache holds of a narrower one's tokens, by the narrower one's bits a value
_SHARE_WORDS = {8: "half the", 4: "a quarter of the"}


def admitted(req: PlanRequest, cap: Capacity) -> Capacity:
    """The capacity with the batch the engine admits: at most ``max_running`` requests per
    attention group (the plan's ``admission`` says whether memory or the engine binds)."""
    if req.max_running is None:
        return cap
    engine = req.max_running * req.lay.dp
    if engine >= cap.max_batch:
        return cap
    return dataclasses.replace(cap, max_batch=engine, admission="engine max_running")


def _moe_kernel(req: PlanRequest) -> str | None:
    """The MoE kernel a plan's routed experts are timed as (``Plan.moe_kernel``)."""
    dtype = routed_experts_class(req.m, req.sized, req.components)
    if dtype is None or req.hw.kind != "gpu":
        return None
    gen = runs_trtllm_gen(req.moe_backend, req.engine, req.hw, dtype)
    return moe_kernel_label(req.engine, req.hw, dtype, gen, load_profile(req.profile))


def plan_fields(req: PlanRequest, cap: Capacity) -> dict[str, Any]:
    """The fields of a :class:`Plan` that its request and capacity give, whatever is timed."""
    lay = req.lay
    return dict(
        model=req.m.name,
        hardware=req.hw.name,
        gpus=req.gpus,
        tp=lay.tp,
        dp=lay.dp,
        ep=lay.ep,
        weight_dtype=req.w_dtype,
        weight_format=cap.weight_format,
        kv_layout=req.kv.name,
        state_dtype=recurrent_state_dtype(req.m, req.kv),
        page_size=req.page_size,
        memory_per_gpu_bytes=cap.memory,
        usable_per_gpu_bytes=cap.usable,
        memory_setting=memory_setting(req, cap.usable),
        engine_memory=req.engine_memory and req.engine_memory[1],
        weights_per_gpu_bytes=cap.weights,
        # what the weights leave for the cache: none (0) when they do not fit, never negative
        kv_budget_per_gpu_bytes=max(cap.budget, 0),
        kv_bytes_per_token_per_gpu=cap.per_token,
        kv_bytes_per_sequence_per_gpu=cap.seq_bytes,
        kv_bytes_per_token_full_layers_per_gpu=cap.per_token_full,
        kv_bytes_fixed_per_sequence_per_gpu=cap.fixed,
        kv_tokens_per_gpu=cap.tokens_per_gpu,
        # the context each sequence was sized at: isl + osl under a request mix
        seq_len=cap.context,
        batch=req.batch,
        engine=req.engine,
        moe_backend=req.moe_backend,
        moe_kernel=_moe_kernel(req),
        max_batch=cap.max_batch,
        max_context=cap.max_context,
        max_context_memory=cap.max_context_memory,
        max_position_embeddings=req.m.max_position_embeddings,
        pp=lay.pp,
        dp_attention=lay.dp_attention,
        layout=lay.describe(),
        **expert_fields(req),
        mode=req.mode,
        overlap=req.overlap,
        prefill_pass=req.prefill_pass,
        output_lag_steps=req.output_lag_steps,
        prefix_cache_hit=req.prefix_cache_hit,
        prefix_cached_tokens=req.cached_tokens,
        prefix_cache_memory=(
            SHARED_PREFIX_MEMORY
            if req.shared_prefix
            else PREFIX_CACHE_MEMORY
            if req.prefix_cache_hit
            else None
        ),
        shared_prefix=req.shared_prefix,
        shared_prefix_tokens=cap.shared_tokens,
        kv_bytes_shared_prefix_per_gpu=cap.shared_bytes,
        isl=req.isl,
        osl=req.osl,
        concurrency=req.concurrency,
        request_rate=req.request_rate,
        warnings=req.warnings + cap.warnings,
        admission=cap.admission,
        prediction=prediction_route(req.profile, req.hw, req.engine, req.engine_note, req.m),
    )


def _shares_experts(req: PlanRequest) -> bool:
    """Whether the decode pool shares its routed experts over expert-parallel ranks."""
    return bool(req.m.num_moe_layers) and req.lay.ep > 1


def expert_fields(req: PlanRequest) -> dict[str, Any]:
    """The :class:`Plan` fields of the expert layout's assumptions (a trial: a plan at
    ``--redundant-experts 32`` kept no record of them, nor of the routing behind its hottest
    rank's 1.054x, nor of the exchange's kernels): none without experts over ranks."""
    if not _shares_experts(req):
        return {"redundant_experts": req.lay.redundant_experts}
    lay = req.lay
    rebalance = rebalanced(lay.redundant_experts, req.rebalance)
    return dict(
        redundant_experts=lay.redundant_experts,
        routing=req.routing,
        expert_skew=req.expert_skew,
        routing_imbalance=req.imbalance,
        rebalance=rebalance,
        ep_exchange=ep_exchange_words(req),
    )


#: What each engine runs for its expert-parallel exchange, and whether DeepEP's kernels (the
#: only exchange the shared tables measure) are its own or stand in (from recall of the
#: engines' options, not a stored copy)
_EP_EXCHANGE_ENGINE = {
    "sglang": "SGLang's own (--moe-a2a-backend deepep, --deepep-mode auto)",
    "vllm": "vLLM's own (its deepep_low_latency / deepep_high_throughput all-to-all backends)",
    "trtllm": "standing in for TensorRT-LLM's own wide-EP all-to-all, which no shared table "
    "measures",
}


def ep_exchange_words(req: PlanRequest) -> str | None:
    """The kernels the routed experts' dispatch and combine are timed as, in words: DeepEP's
    low-latency kernels in decode steps and its normal kernels in steps with prompt tokens,
    by the kernel model's fit of the measured one-node DeepEP tables within a scale-up domain
    or by the link model across domains; and whether they are the engine's own or stand in
    (:data:`_EP_EXCHANGE_ENGINE`). None where the experts are exchanged by no all-to-all
    (a TP group's all-reduce)."""
    lay = req.lay
    if not _shares_experts(req) or lay.moe_group == lay.tp:
        return None
    node = req.hw.scale_up_gpus or lay.moe_group
    how = (
        "the kernel model's fit of the measured one-node DeepEP tables (wideep_deepep_*), "
        "over the scale-up link"
        if lay.moe_group <= node
        else f"the link model across the network ({-(-lay.moe_group // node)} domains: "
        "low-latency sends every routed copy over RDMA, normal one copy a remote node)"
    )
    engine = _EP_EXCHANGE_ENGINE.get(req.engine, f"standing in for {req.engine}'s own")
    groups = placed_groups(
        req.m.routing_groups, lay.moe_group, node, rebalanced(lay.redundant_experts, req.rebalance)
    )
    k = req.m.num_experts_per_tok
    routed = group_routing_words(req.m.n_routed_experts, lay.moe_group, node, k, groups)
    if routed is None and req.m.routing_groups is not None and lay.moe_group > node:
        n_group, topk_group = req.m.routing_groups
        routed = (
            f"group-limited routing (n_group {n_group}, topk_group {topk_group}) not counted: "
            f"the rebalanced placement's global policy scatters the groups over the "
            f"{-(-lay.moe_group // node)} domains, which do not divide n_group"
        )
    return (
        f"DeepEP's kernels: low-latency in decode steps, normal in steps with prompt tokens; "
        f"timed by {how}; {engine}" + (f"; {routed}" if routed else "")
    )


def expert_load_fields(sm: StepModel, tokens: float) -> dict[str, Any]:
    """The :class:`Plan` fields of the hottest expert rank's factor when ``tokens`` per
    attention group enter a MoE layer: ``expert_rank_load``
    (:meth:`~mlacalc.serving.gpu_step.StepModel.expert_rank_load`) and where it comes from
    (:func:`expert_load_words`)."""
    load = sm.expert_rank_load(tokens)
    return {"expert_rank_load": load, "expert_rank_load_from": expert_load_words(sm, load)}


def expert_load_words(sm: StepModel, load: float | None) -> str | None:
    """Where the hottest expert rank's factor (:attr:`Plan.expert_rank_load`) comes from, in
    words: the user's measured ``routing_imbalance`` where given (it replaces the model:
    :meth:`~mlacalc.serving.gpu_step.StepModel.expert_rank_load`), else the routing's spread
    of a step's copies over the ranks and the placement's factor (the experts' popularity,
    rebalanced or not, their replicas)."""
    if load is None:
        return None
    if sm.imbalance != 1.0:
        return (
            f"routing_imbalance {sm.imbalance:g} as given (a measured busiest expert GPU over "
            "the mean: the routing's model not applied)"
        )
    spread = (
        "random routing (the sampling spread of a step's routed copies over the ranks)"
        if sm.routing == "random"
        else "balanced routing (an even share of copies a rank)"
    )
    placed = "rebalanced (EPLB)" if sm.rebalance else "not rebalanced"
    red = sm.lay.redundant_experts
    return (
        f"{spread}, times the placement's {sm.placement:.3f}x (expert_skew {sm.expert_skew:g}, "
        f"{placed}, {red} redundant expert{'' if red == 1 else 's'})"
    )


def timed_tokens(tokens: float, overlap: str) -> float:
    """The tokens per attention group one pass of a MoE layer carries when a decode step of
    ``tokens`` is timed: half under two-batch overlap (each micro-batch routes its own)."""
    return tokens / 2 if overlap == "tbo" else tokens


def prefill_pass_words(groups: int, others_idle: bool) -> str:
    """What a pass of one prompt (``Plan.prefill_s``) is where ``groups`` attention groups meet
    at every MoE layer: alone (one group), with the others idle (``others_idle``: aggregated
    serving's prompt, :attr:`MixTiming.prefill_alone`), or with each on a prompt of its own (a
    new-user trial read the same words for both: 0.297 s aggregated, 0.368 s disaggregated)."""
    if groups <= 1:
        return "one pass alone"
    if others_idle:
        return f"one pass, the other {groups - 1:,} synced attention groups idle"
    return f"one pass, each of the {groups:,} synced attention groups on a prompt of its own"


def unfitted_plan(
    common: dict[str, Any],
    cap: Capacity,
    binding: str,
    overflow: str | None = None,
    **extra: Any,
) -> Plan:
    """The plan of a deployment that does not fit: no step is timed. ``overflow`` says what
    overflows (by default what the capacity says)."""
    return Plan(
        **common,
        decode_batch=None,
        decode_step_s=None,
        decode_tokens_per_s=None,
        decode_bound=None,
        prefill_s=None,
        binding=binding,
        fits=False,
        overflow=cap.overflow if overflow is None else overflow,
        memory=cap.mem,
        sustainable=False,
        **extra,
    )


def capacity_plan(req: PlanRequest, cap: Capacity, common: dict[str, Any], sm: StepModel) -> Plan:
    """The capacity answer without a request mix: the decode step at ``seq_len`` for the batch
    asked (or the largest that fits), and the prefill of one ``seq_len`` prompt. A batch asked
    beyond the largest that fits is an answer: ``fits`` false, ``overflow`` says so, and the
    times are those of the largest batch that fits (``decode_batch``)."""
    lay, overlap, batch, max_batch = req.lay, req.overlap, req.batch, cap.max_batch
    run_batch = max_batch if batch is None else min(batch, max_batch)
    B = math.ceil(run_batch / lay.dp)
    micro = B / min(lay.pp, max(B, 1))
    # with MTP a step verifies 1 + drafts tokens per sequence and drafts them first
    q = 1 + req.mtp_tokens
    dec = sm.step(overlap=overlap, dec_B=micro, dec_q=q, dec_S=req.seq_len)
    step = lay.pp * float(dec.stage_seconds[0]) + draft_seconds(
        sm, req.mtp_tokens, micro, req.seq_len
    )
    compute, comm = float(dec.compute_s[0]), float(dec.comm_s[0])
    links = links_seconds(dec.kernels, comm, overlap)
    bound = step_bound(req.hw, dec.kernels, compute, comm, overlap, links)
    prefill_s = float(sm.step(overlap=overlap, pf_N=1, pf_q=req.seq_len).seconds[0])
    binding = cap.admission if batch is None or batch > max_batch else roof_words(bound)
    name, how = calibration_of(req.profile, req.hw, dec.kernels)
    parts = stand_in_parts(req.profile, req.hw, dec.kernels)
    route = with_stand_ins(common["prediction"], parts)
    common = {
        **common,
        "prediction": route,
        "warnings": (
            common["warnings"] + route_warnings(route) + stand_in_warnings(req.engine, parts)
        ),
    }
    return Plan(
        **common,
        decode_batch=run_batch,
        decode_running=float(run_batch),
        decode_step_s=step,
        decode_tokens_per_s=run_batch * req.tau / step,
        tokens_per_step=req.tau,
        **expert_load_fields(sm, timed_tokens(micro * q, overlap)),
        decode_bound=bound,
        prefill_s=prefill_s,
        prefill_what=prefill_pass_words(synced_groups(req.m, lay), False),
        binding=binding,
        fits=cap.fits,
        overflow=cap.overflow,
        memory=cap.mem,
        running_batch_per_group=float(B),
        step_compute_s=compute,
        step_comm_s=comm,
        step_links_s=links,
        kernels=kernel_rows(dec.kernels),
        kernels_scope=kernels_scope(sm, overlap, micro),
        profile=name,
        calibration=how + req.engine_note,
    )


def serving_plan(req: PlanRequest, cap: Capacity, common: dict[str, Any], sm: StepModel) -> Plan:
    """The serving figures of ``req``'s request mix: the steady state of its requests in
    flight (or arriving at a rate) on the decode pool and, disaggregated, the prefill pool."""
    concurrency = req.concurrency
    if req.request_rate is None and concurrency is None:  # as many as run at once
        concurrency = float(cap.max_batch)
    room = None
    if req.disaggregated:
        room = prefill_room(req, cap.usable)
        if room.prompts < 1:
            return unfitted_prefill_pool(req, cap, common, room)
        p_sm = StepModel(
            req.m, req.p_lay, req.sized, req.kv, req.hw, req.profile, **req.step_model_args()
        )
        mix = mix_timing(req, sm, p_sm, room.prompts)
        load = disaggregated_load(mix, cap.max_batch, concurrency, req.request_rate)
    else:
        mix = mix_timing(req, sm, sm)
        if req.request_rate is None:
            if req.concurrency is None:  # and whose prompts a chunk a step keeps up with
                concurrency = min(concurrency, chunk_capacity(mix) * req.lay.dp)
            load = closed_loop(mix, cap.max_batch, concurrency)
        else:
            load = open_loop(mix, cap.max_batch, req.request_rate)
    return serving_record(req, cap, common, mix, load, room)


def unfitted_prefill_pool(
    req: PlanRequest, cap: Capacity, common: dict[str, Any], room: PrefillRoom
) -> Plan:
    """The plan of a disaggregated deployment whose prefill pool holds no prompt: its every
    GPU holds its weights and the cache of one prompt at least."""
    p_lay = req.p_lay
    assert p_lay is not None
    return unfitted_plan(
        common,
        cap,
        "prefill pool: " + ("weights" if room.weights > room.usable else "kv capacity"),
        prefill_overflow(req, room, cap.weight_format),
        prefill_gpus=req.p_gpus,
        prefill_layout=p_lay.describe(),
        prefill_tp=p_lay.tp,
        prefill_ep=p_lay.ep,
        prefill_dp_attention=p_lay.dp_attention,
        prefill_redundant_experts=p_lay.redundant_experts,
    )


def route_warnings(route: dict[str, Any]) -> tuple[str, ...]:
    """The line saying how a timed plan's device and engine were predicted where either was
    not fitted (:func:`~mlacalc.serving.provenance.route_warning`), or none."""
    said = route_warning(route) if route else ""
    return (said,) if said else ()


def serving_warnings(req: PlanRequest, mix: MixTiming, load: Load) -> tuple[str, ...]:
    """What the steady state says beyond its figures: a queue that grows (for a place in the
    batch, the prefill pool, or the chunk a step under chunked prefill), a prefill pool that
    caps the throughput."""
    warnings = list(load.warnings)
    if load.queued and math.isfinite(load.queued) and load.concurrency is not None:
        held = load.concurrency - load.queued
        warnings.append(
            (
                # the decode batch is capped at the prefill pool's rate, not at what it holds
                f"{request_count(load.concurrency)} requests in flight exceed the "
                f"{request_count(held)} the prefill pool's rate keeps served: "
                f"{request_count(load.queued)} wait for the prefill pool on average"
                if load.prefill_bound
                else f"{request_count(load.concurrency)} requests in flight exceed the "
                f"{request_count(held)} whose prompts chunked prefill keeps up with (their "
                f"prompts would need {load.chunk_bound[0]:,.0f} tokens a step, more than the "
                f"{load.chunk_bound[1]:,}-token chunk a step carries): "
                f"{request_count(load.queued)} wait for prefill in the engine's queue"
                if load.chunk_bound
                else f"{request_count(load.concurrency)} requests in flight exceed the "
                f"{request_count(held)} the deployment holds at once: "
                f"{request_count(load.queued)} wait in the queue"
            )
            + f" (TTFT includes their wait, {load.queue * 1e3:,.1f} ms)"
            + (
                "; fewer requests in flight or a larger chunk (--chunked-prefill, --max-tokens) "
                "serve them"
                if load.chunk_bound
                else ""
            )
        )
    if load.prefill_bound:
        warnings.append(
            f"the prefill pool finishes {mix.pf_capacity:.3g} prompts/s, fewer than the decode "
            f"pool serves ({load.decode_max:.3g}/s): throughput is prefill-bound"
            + (
                "; a faster decode pool would only bring requests back to the prefill pool "
                "sooner, to wait there: TTFT rises, throughput stays"
                if load.queued and math.isfinite(load.queued) and load.concurrency is not None
                else ""
            )
        )
    return tuple(warnings)


#: the share of its time a disaggregated prefill pool may be busy unsaid: from this on, a
#: warning (the steady state's wait is a mean; a burst of arrivals queues there)
PREFILL_BUSY_WARN = 0.9


def prefill_busy_warning(
    req: PlanRequest, mix: MixTiming, load: Load, served: float
) -> tuple[str, ...]:
    """A disaggregated prefill pool busy :data:`PREFILL_BUSY_WARN` of its time or more at the
    ``served`` requests/s, short of binding (a trial's search best ran its pool at 99.97%
    with no figure saying so: TTFT met its target only while arrivals stay even)."""
    if not req.disaggregated or load.prefill_bound or not mix.pf_capacity:
        return ()
    busy = served / float(mix.pf_capacity)
    if busy < PREFILL_BUSY_WARN:
        return ()
    return (prefill_busy_words(served, float(mix.pf_capacity)),)


def prefill_busy_words(served: float, capacity: float) -> str:
    """A prefill pool that finishes ``capacity`` prompts/s, busy at ``served``, in words (plan's
    :func:`prefill_busy_warning`, and search's of its best point)."""
    return (
        f"the prefill pool is busy {min(served / capacity, 1.0):.2%} of the time ({served:,.4g} "
        f"of the {capacity:,.4g} prompts/s it finishes): TTFT holds the steady state's mean "
        "wait, and a burst of arrivals queues there; more prefill GPUs give headroom"
    )


def queued_requests(req: PlanRequest, load: Load) -> float:
    """The requests queued: beyond what the deployment holds (a closed loop, or an arrival
    rate it does not keep up with), or under an arrival rate it keeps up with, those waiting
    for the prefill pool or a chunk, the rate times their wait (Little's law)."""
    if req.request_rate is not None and not load.queued and math.isfinite(load.queue):
        return req.request_rate * load.queue
    return load.queued


def serving_binding(load: Load, max_batch: int, bound: str, admission: str) -> str:
    """The resource that binds a request mix: the KV cache when requests queue for it (or
    arrive faster than the batch it holds serves them), the prefill pool when its rate caps
    the requests served, chunked prefill when requests queue for its chunk a step, else the
    decode step's roof (``bound``); chunked prefill first where it saturates an open loop
    before the KV cache fills (:func:`~mlacalc.serving.figures.open_loop`), and the prompt
    passes where whole prompts arrive faster than their passes alone finish them."""
    queued = load.queued
    if load.chunk_bound and not load.sustainable:
        return "chunked prefill"
    if load.prompt_bound:  # whole prompts' passes saturate an open loop, whatever the cache
        return "prompt passes"
    if (queued and math.isfinite(queued) and not (load.prefill_bound or load.chunk_bound)) or (
        not load.sustainable and load.conc > max_batch
    ):
        return admission
    if load.prefill_bound:
        return "prefill pool"
    if load.chunk_bound:
        return "chunked prefill"
    return roof_words(bound)


def roof_words(bound: str) -> str:
    """A decode step's roof (:func:`step_bound`'s word) as a plan's binding says it."""
    return {"memory": "memory bandwidth"}.get(bound, bound)


def serving_record(
    req: PlanRequest,
    cap: Capacity,
    common: dict[str, Any],
    mix: MixTiming,
    load: Load,
    room: PrefillRoom | None,
) -> Plan:
    """The :class:`Plan` of a request mix in its steady state ``load`` (``room``: the
    disaggregated prefill pool's memory, None aggregated)."""
    lay, p_lay, f, osl = req.lay, req.p_lay, load.f, req.osl
    rate = f["rate"]
    if req.request_rate is not None and load.sustainable:
        rate = req.request_rate * osl  # every request that arrives is served
    elif req.request_rate is not None:  # saturated: what the full batch serves, at most R
        rate = min(rate, req.request_rate * osl)
    if req.disaggregated:
        rate = min(rate, mix.pf_capacity * osl)
    B_run = max(load.running / lay.dp, 1.0)
    micro = B_run / min(lay.pp, B_run)
    dec = decode_step(mix, micro)  # the load's own step, timed once
    links = links_seconds(dec.kernels, f["comm"], req.overlap)
    bound = step_bound(req.hw, dec.kernels, f["compute"], f["comm"], req.overlap, links)
    # the decode step's kernels and the prompt's prefill (TTFT depends on both), on the GPUs
    # that run each (the prefill pool's, disaggregated; the same GPUs, aggregated)
    prompt = mix.p_sm.step(pf_N=1, **prompt_args(req)).kernels
    name, how = calibration_of(req.profile, req.hw, [*dec.kernels, *prompt])
    parts = stand_in_parts(req.profile, req.hw, dec.kernels)
    route = with_stand_ins(common["prediction"], parts)
    warnings = (
        common["warnings"]
        + route_warnings(route)
        + serving_warnings(req, mix, load)
        + prefill_busy_warning(req, mix, load, rate / osl)
        + stand_in_warnings(req.engine, parts)
    )
    chunks = f.get("chunks")
    return Plan(
        **{**common, "prediction": route, "warnings": warnings, "concurrency": load.concurrency},
        # the step is timed at B_run per group (at least one: a group holding a request runs
        # it alone), so the batch it was timed at is never 0
        decode_batch=max(round(load.running), 1),
        decode_running=f["running"],
        profile=name,
        calibration=how + req.engine_note,
        prefill_layout=p_lay.describe() if p_lay else None,
        prefill_tp=p_lay.tp if p_lay else None,
        prefill_ep=p_lay.ep if p_lay else None,
        prefill_dp_attention=p_lay.dp_attention if p_lay else None,
        prefill_redundant_experts=p_lay.redundant_experts if p_lay else None,
        prefill_weights_per_gpu_bytes=room.weights if room else None,
        prefill_kv_bytes_per_token_per_gpu=room.per_token if room else None,
        prefill_kv_bytes_per_prompt_per_gpu=room.prompt_bytes if room else None,
        prefill_pool_requests_per_s=float(mix.pf_capacity) if p_lay else None,
        decode_pool_requests_per_s=float(load.decode_max) if p_lay else None,
        decode_step_s=f["t_dec"],
        decode_tokens_per_s=f["running"] * mix.tau / f["t_dec"],
        **expert_load_fields(mix.sm, timed_tokens(micro * mix.q, req.overlap)),
        decode_bound=bound,
        prefill_s=mix.prefill_alone,
        prefill_what=prefill_pass_words(
            synced_groups(req.m, mix.p_lay if req.disaggregated else lay), not req.disaggregated
        ),
        binding=serving_binding(load, cap.max_batch, bound, cap.admission),
        fits=True,
        memory=cap.mem,
        running_batch_per_group=f["running"] / lay.dp,
        queued=queued_requests(req, load),
        ttft_s=f["ttft"] + load.queue + (mix.transfer or 0.0),
        # one output token has no gap after it: no TPOT (None), no decode speed per user
        tpot_s=f["tpot"] if osl > 1 else None,
        output_tokens_per_s=rate,
        output_tokens_per_s_per_gpu=rate / (req.gpus + req.p_gpus),
        output_tokens_per_s_per_user=1.0 / f["tpot"] if osl > 1 else None,
        tokens_per_step=mix.tau,
        prefill_gpus=req.p_gpus,
        kv_transfer_s=mix.transfer,
        kv_transfer_link=mix.handoff.describe() if mix.handoff else None,
        kv_transfer_rank_bytes=mix.handoff.rank_bytes if mix.handoff else None,
        prefill_chunks=chunks[0] if chunks else None,
        prefill_chunk_tokens=chunks[1] if chunks else None,
        prefill_chunks_s=chunks[2] if chunks else None,
        prefill_pool_pass_prompts=f["pool_pass"][0] if "pool_pass" in f else None,
        prefill_pool_pass_s=f["pool_pass"][1] if "pool_pass" in f else None,
        step_compute_s=f["compute"],
        step_comm_s=f["comm"],
        step_links_s=links,
        # a request waiting for a pool (the batch's places or the prefill pool's rate) is
        # offered load the deployment does not keep up with, bounded queue or not
        sustainable=load.sustainable and not load.queued,
        kernels=kernel_rows(dec.kernels),
        kernels_scope=kernels_scope(mix.sm, req.overlap, micro),
    )
