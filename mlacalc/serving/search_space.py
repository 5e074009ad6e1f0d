"""The candidates a search times: for each GPU count and weight dtype the layouts worth trying,
and for each layout and KV dtype the batches that fit, as the rows of one vectorised step
call (the decode steps, the steps that mix prompts in, and the layout's passes as a prefill
pool). What is ruled out before timing is counted by reason.
"""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mlacalc.cost.quant import stored_weight_dtype
from mlacalc.hardware.catalogue import HardwareSpec
from mlacalc.models.loading import ModelConfig
from mlacalc.serving.arrivals import sample_states
from mlacalc.serving.capacity import prompts_per_pass, sequence_bytes, shared_prefix_bytes
from mlacalc.serving.figures import (
    chunk_fluid,
    chunk_rule,
    micro_batch_prompts,
    prompt_args,
    request_steps,
)
from mlacalc.serving.gpu_step import Spec, StepModel, time_jobs
from mlacalc.serving.layout import (
    KV_HEAD_FIELDS,
    Layout,
    kv_bytes_per_sequence_per_gpu,
    kv_bytes_per_token_per_gpu,
    kv_heads_unsplit,
    make_layout,
    tp_splits_heads,
    weight_format,
    weights_per_gpu,
)
from mlacalc.serving.plan_checks import prefix_cached_tokens, shared_prefix_tokens, usable_of
from mlacalc.serving.precision import component_weight_bytes, engine_kv_layout, kept_components
from mlacalc.serving.ranks import synced_groups, synced_prompts
from mlacalc.serving.scheduler import Scheduler
from mlacalc.words.arguments import divisors
from mlacalc.words.dtypes import resolve_kv_layout, with_state_dtype
from mlacalc.words.errors import MlacalcError

__all__ = [
    "NO_LIMITS",
    "Candidate",
    "LayoutLimits",
    "SearchRequest",
    "StepRows",
    "candidate_layouts",
    "candidates",
    "needs_network",
    "per_sequence_bytes",
    "pool_passes",
    "time_candidates",
]


@dataclass(frozen=True)
class LayoutLimits:
    """The layouts a search may try (``mlacalc search --tp/--pp/--ep/--dp-attention/
    --redundant-experts``), of the decode pool and of a disaggregated prefill pool alike (the
    pools are drawn from the same layouts): ``tp`` and ``pp`` the degrees allowed (None: the
    search's own choice); ``ep`` ``"any"`` (the search's own: none, the tensor group, every GPU
    of the stage), ``"none"`` (no expert parallelism) or the degrees allowed; ``dp_attention``
    ``"both"``, ``"on"`` (more than one attention group sharing the experts) or ``"off"``;
    ``redundant_experts`` the replicas every expert-parallel layout places (None: the fewest
    that make ``ep`` divide the expert slots, the search's own)."""

    tp: tuple[int, ...] | None = None
    pp: tuple[int, ...] | None = None
    ep: str | tuple[int, ...] = "any"
    dp_attention: str = "both"
    redundant_experts: int | None = None
    #: ``ep`` as the user gave it where it reads otherwise (``--ep 1``: ``"none"``), so that
    #: the messages and the constraints' words say what was typed (None: as ``ep``)
    ep_words: str | None = field(default=None, compare=False)

    @property
    def given(self) -> bool:
        """Whether any limit narrows (or, for explicit degrees, widens) the search's own
        layouts."""
        return self != NO_LIMITS

    def options(self) -> dict[str, str]:
        """The limits given, as the CLI writes them (``{"--tp": "8", "--ep": "none"}``)."""
        out = {}
        for name, value, unset in (
            ("--tp", self.tp, None),
            ("--pp", self.pp, None),
            ("--ep", self.ep_words or self.ep, "any"),
            ("--dp-attention", self.dp_attention, "both"),
            ("--redundant-experts", self.redundant_experts, None),
        ):
            if value != unset:
                out[name] = ",".join(map(str, value)) if isinstance(value, tuple) else str(value)
        return out

    def to_dict(self) -> dict[str, Any]:
        """The limits as JSON data, every key always present (None and the words ``any`` and
        ``both``: not limited)."""
        return {
            "tp": list(self.tp) if self.tp else None,
            "pp": list(self.pp) if self.pp else None,
            "ep": list(self.ep) if isinstance(self.ep, tuple) else self.ep,
            "dp_attention": self.dp_attention,
            "redundant_experts": self.redundant_experts,
        }

    def breaks(self, lay: Layout, m: ModelConfig) -> str | None:
        """The reason (the first limit, in the order tp, pp, ep, DP-attention, redundant
        experts) that rules ``lay`` of ``m`` out; None: it is allowed. DP-attention is on where
        attention groups (``dp`` > 1) share the experts; one attention group is plain TP (as
        plan's command line has it)."""
        shown = {"--redundant-experts": "auto", **self.options()}
        dpa = lay.dp_attention and lay.dp > 1
        ep_ok = (
            self.ep == "any"
            or (self.ep == "none" and lay.ep == 1)
            or (isinstance(self.ep, tuple) and lay.ep in self.ep)
        )
        for flag, ok in (
            ("--tp", self.tp is None or lay.tp in self.tp),
            ("--pp", self.pp is None or lay.pp in self.pp),
            ("--ep", ep_ok),
            ("--dp-attention", self.dp_attention == "both" or dpa == (self.dp_attention == "on")),
            ("--redundant-experts", lay.redundant_experts == self.redundant(m, lay.ep)),
        ):
            if not ok:
                return f"ruled out by {flag} {shown[flag]}"
        return None

    def redundant(self, m: ModelConfig, ep: int) -> int:
        """The redundant experts a layout of expert-parallel degree ``ep`` places."""
        if ep == 1:
            return 0
        if self.redundant_experts is not None:
            return self.redundant_experts
        return (-m.n_routed_experts) % ep


#: No limits: the search's own layouts
NO_LIMITS = LayoutLimits()


@dataclass(frozen=True)
class SearchRequest:
    """One call of :func:`mlacalc.serving.search.search`, checked: every option as a tuple,
    the dtypes resolved, the calibration profile loaded."""

    m: ModelConfig
    hw: HardwareSpec
    gpus: tuple[int, ...]
    isl: int
    osl: int
    ttft: float | None
    tpot: float | None
    #: the weight dtypes tried; ``own``: none was given, so the model's own is sized as its
    #: checkpoint stores it
    weight_dtypes: tuple[str, ...]
    own: bool
    kv_dtypes: tuple[str, ...]
    modes: tuple[str, ...]
    overlaps: tuple[str, ...]
    batches: tuple[int, ...]
    memory_reserve: float
    page_size: int
    prefill_pass: str
    output_lag_steps: int
    profile: Any
    #: the GPU budget (``gpus`` then holds the pool sizes it is split into); None: the GPU
    #: counts were given one by one
    budget: int | None = None
    #: what the engine admits (running requests per attention group, tokens per step) and
    #: its host work (:mod:`mlacalc.serving.scheduler`)
    max_running: int | None = None
    max_tokens: int | None = None
    scheduler: Scheduler | None = None
    #: the engine whose scheduler defaults filled those left out, and what each took
    #: (:func:`mlacalc.serving.search.scheduler_of`)
    scheduler_record: dict = field(default_factory=dict, compare=False)
    #: the per-component weight formats tried over each weight dtype (``()``: none; each a
    #: sorted tuple of (component, format), :mod:`mlacalc.serving.precision`)
    components: tuple[tuple[tuple[str, str], ...], ...] = ((),)
    #: the serving engine whose kernels are timed, and what stood in for it (words)
    engine: str = "trtllm"
    engine_note: str = ""
    #: the engine and the profile as named (None: not named), for the best point's plan command
    named: tuple[Any, Any] = field(default=(None, None), compare=False)
    #: the model as plan's command line takes it back (``search_command.model_replay``):
    #: its argument and its ``--set`` words; None where no command names it
    replay: tuple[str, str] | None = field(default=None, compare=False)
    #: the chunked-prefill token budgets aggregated points are also timed at (``()``: none)
    chunks: tuple[int, ...] = ()
    #: under a budget, the GPU counts run aggregated; the others of ``gpus`` are decode and
    #: prefill pools only (None: every count)
    whole_gpus: tuple[int, ...] | None = None
    #: each layout's weight bytes per GPU, counted once per search (layout_weights)
    weight_cache: dict = field(default_factory=dict, compare=False, repr=False)
    #: one search's step models and their kernels by what they depend on, and sequences'
    #: cache bytes per GPU (:func:`candidate`)
    step_cache: dict = field(default_factory=dict, compare=False, repr=False)
    #: the layouts allowed (:class:`LayoutLimits`): of the decode pool (and aggregated), and
    #: of a disaggregated prefill pool (None: the same)
    limits: LayoutLimits = NO_LIMITS
    prefill_limits: LayoutLimits | None = None
    #: how a step's tokens load the routed experts, as plan's step models take it
    #: (``routing``, ``expert_skew``, ``rebalance``, ``routing_imbalance``;
    #: :meth:`mlacalc.serving.plan_checks.PlanRequest.step_model_args`)
    routing: tuple[tuple[str, Any], ...] = ()
    #: prefix caching: the share of each prompt's tokens found cached, as plan's
    #: ``prefix_cache_hit`` (every prompt a point times computes :attr:`computed_tokens`
    #: after :attr:`cached_tokens`, :func:`mlacalc.serving.figures.prompt_args`)
    prefix_cache_hit: float = 0.0
    #: a shared prefix: the tokens every prompt begins with alike, as plan's ``shared_prefix``
    #: (its pages held once per attention group; 0: none)
    shared_prefix: int = 0
    #: the engine's own memory setting, ``(engine, share)``, as plan's ``engine_memory``
    #: (None: ``memory_reserve``'s rule)
    engine_memory: tuple[str, float] | None = None
    #: the dtype a linear or Mamba layer's recurrent state is kept in, as plan's
    #: ``state_dtype`` (None: float32)
    state_dtype: str | None = None

    def room(self, weights: int) -> int:
        """Bytes a GPU holding ``weights`` bytes of weights leaves the KV cache, by plan's
        rule (:func:`~mlacalc.serving.plan_checks.usable_of`)."""
        memory = self.hw.memory_bytes
        return usable_of(memory, weights, self.memory_reserve, self.engine_memory) - weights

    @property
    def cached_tokens(self) -> int:
        """A prompt's tokens found cached (plan's rule: :func:`prefix_cached_tokens`)."""
        return prefix_cached_tokens(
            self.prefix_cache_hit, self.isl, self.page_size, self.shared_prefix
        )

    @property
    def computed_tokens(self) -> int:
        """A prompt's tokens its prefill computes: ``isl`` less those found cached."""
        return self.isl - self.cached_tokens

    @property
    def limited(self) -> bool:
        """Whether the layouts are limited (:class:`LayoutLimits`)."""
        return self.limits.given or self.prefill_limits is not None

    def roles(self, lay: Layout) -> tuple[bool, bool]:
        """Whether ``lay`` may run a decode pool (or aggregated) and a prefill pool."""
        if not self.limited:
            return True, True
        decode = self.limits.breaks(lay, self.m) is None
        prefill = self.prefill_limits or self.limits
        return decode, prefill.breaks(lay, self.m) is None

    @property
    def usable(self) -> int:
        """Bytes of a GPU's memory the weights may take (:func:`fit_usable`)."""
        return fit_usable(self.hw.memory_bytes, self.memory_reserve, self.engine_memory)

    def layouts(
        self,
        g: int,
        sized: str | None,
        comps: tuple[tuple[str, str], ...],
        removed: Counter[str] | None = None,
    ) -> list[Layout]:
        """:func:`candidate_layouts` of ``g`` GPUs under this request's memory, weight cache
        and layout limits (those of a disaggregated prefill pool too)."""
        return candidate_layouts(
            self.m,
            self.hw,
            g,
            sized,
            self.usable,
            comps,
            self.weight_cache,
            self.limits,
            removed,
            self.prefill_limits,
        )

    @property
    def context(self) -> int:
        return self.isl + self.osl

    @property
    def S_avg(self) -> float:
        """The average context of the output."""
        return self.isl + self.osl / 2

    @property
    def k_max(self) -> int:
        """The most prompts one prefill pass batches (within the engine's tokens per step),
        counted by the tokens a prompt computes (prefix caching), as plan's ``mix_timing``."""
        new = self.computed_tokens
        k_max = prompts_per_pass(new)
        if self.max_tokens is not None:
            k_max = min(k_max, max(1, self.max_tokens // new))
        return k_max


@dataclass(frozen=True, eq=False)
class Chunked:
    """A candidate's steps under chunked prefill of ``N`` tokens a step, as
    :func:`mlacalc.plan` times them (``mlacalc.serving.figures``): per batch (those in
    ``batches``, the indices into the candidate's) the chunk, the prompts a group starts a
    step, the chunk steps of a prompt, the share of the steps that carry a chunk, and the
    prompt's own chunk steps (``owner``: the batch of each)."""

    batches: np.ndarray
    chunk: np.ndarray
    n: np.ndarray
    steps: np.ndarray
    share: np.ndarray
    owner: np.ndarray
    #: the rows of its steps at full load (``first:own``, every step carrying the prompt
    #: tokens the load brings) and of the prompt's own steps (``own:end``) in the
    #: candidate's ``(overlap, "chunked")`` block
    first: int
    own: int
    end: int


@dataclass(frozen=True, eq=False)
class Candidate:
    """One layout with one weight and KV dtype: the batches per group that fit and the rows of
    its step model's call (``slices`` names them: ``(overlap, "dec")`` the decode steps,
    ``(overlap, "mix")`` the steps with prompts, ``(overlap, "alone")`` one prompt's pass with
    nothing else, ``(overlap, "prefill")`` the layout's passes
    as a prefill pool of ``1 .. k_fit`` prompts)."""

    gpus: int
    #: the weight choice as the search keys it (dtype and components); the format the
    #: weights are sized in (the checkpoint's scheme or the dtype, then each component's),
    #: as plan's ``weight_format``; the dtype, as plan's ``weight_dtype``
    weight: str
    label: str
    lay: Layout
    kv: str
    kv_layout: Any
    weights: int
    #: one sequence's cache on a GPU at the request's context (less the shared prefix's)
    per_seq: int
    #: the batches per group that fit, the prompts a step brings in at each and the prompts
    #: the slowest synced group prefills in a step that carries any (one group: its own),
    #: with the share of the steps that carry them (:mod:`mlacalc.serving.ranks`)
    Bf: np.ndarray
    n: np.ndarray
    k: np.ndarray
    share: np.ndarray
    overlaps: tuple[str, ...]
    slices: dict[tuple[str, str], slice]
    k_fit: int
    sm: StepModel
    specs: list[Spec]
    #: the named components' weight formats (mlacalc.serving.precision)
    components: tuple[tuple[str, str], ...] = ()
    weight_dtype: str = ""
    #: a token's cache on a GPU (what a launch line's memory setting must hold as many of)
    per_token: int = 0
    #: per chunked-prefill token budget, its :class:`Chunked` rows (aggregated points)
    chunked: dict[int, Chunked] = field(default_factory=dict)
    #: the attention groups that meet at every MoE layer's exchange (mlacalc.serving.ranks)
    groups: int = 1
    #: the rows its kernels were built at (``dec_B``, ``pf_N``, ``pf_q``, ``pf_moe``,
    #: ``pf_pre`` of :meth:`~mlacalc.serving.gpu_step.StepModel.specs`, ``dec_S`` the
    #: request's average context)
    rows: tuple[np.ndarray, ...] = ()
    #: a shared prefix's cache on a GPU, held once per attention group (0: none)
    shared: int = 0


class StepRows:
    """The rows of one step model's vectorised call, each named block of them a slice."""

    def __init__(self) -> None:
        self.dec_B: list[np.ndarray] = []
        self.pf_N: list[np.ndarray] = []
        self.pf_q: list[np.ndarray] = []
        self.pf_moe: list[np.ndarray] = []
        self.pf_pre: list[np.ndarray] = []
        self.slices: dict[tuple[str, str], slice] = {}
        self.pos = 0

    def add(
        self,
        key: tuple[str, str],
        dec_B: Any,
        pf_N: Any,
        pf_q: Any,
        pf_moe: Any = None,
        pf_pre: Any = None,
    ) -> None:
        self.dec_B.append(dec_B)
        self.pf_N.append(pf_N)
        self.pf_q.append(pf_q)
        self.pf_moe.append(pf_N if pf_moe is None else pf_moe)
        self.pf_pre.append(0 * dec_B if pf_pre is None else pf_pre)
        self.slices[key] = slice(self.pos, self.pos + len(dec_B))
        self.pos += len(dec_B)


def fit_usable(memory: int, reserve: float, engine_memory: Any = None) -> int:
    """The bytes of a GPU's memory the weights and the cache may take, which the weights must
    stay below: the memory less ``reserve`` of it, the engine's share of it (vLLM, SGLang), or
    all of it under TensorRT-LLM's share of what the weights leave (``engine_memory``)."""
    if engine_memory is not None and engine_memory[0] == "trtllm":
        return memory
    return usable_of(memory, 0, reserve, engine_memory)


def candidate_layouts(
    m: ModelConfig,
    hw: HardwareSpec,
    gpus: int,
    weight_dtype: str | None,
    usable: int,
    components: tuple[tuple[str, str], ...] = (),
    cache: dict | None = None,
    limits: LayoutLimits = NO_LIMITS,
    removed: Counter[str] | None = None,
    prefill: LayoutLimits | None = None,
) -> list[Layout]:
    """The layouts worth trying on ``gpus`` GPUs (see :mod:`mlacalc.serving.search`) within
    ``limits`` or (a prefill pool's) ``prefill`` whose weights (``components`` in formats of
    their own) fit in ``usable`` bytes per GPU (``cache``: see :func:`layout_weights`); the
    layouts the limits rule out are counted in ``removed`` by the decode pool's limit."""
    node = hw.scale_up_gpus or gpus  # TP within one scale-up fabric (an NVL72 rack: 72)
    out: list[Layout] = []
    seen: set[tuple] = set()
    # the layouts the given redundant experts do not fit (their slots over the ep), by key
    refused: dict[tuple, str] = {}
    tps = [t for t in divisors(gpus) if t <= node and tp_splits_heads(m, t)]
    if removed is not None:  # degrees the query heads allow but the KV heads do not: said
        for t in divisors(gpus):
            n_kv = kv_heads_unsplit(m, t) if t <= node else None
            if n_kv and m.num_attention_heads % t == 0:
                reason = f"TP{t}: splits the {n_kv} KV heads unevenly (num_key_value_heads)"
                removed[reason] += _unsplit_layouts(m, gpus, t, limits)
    for tp in tps:
        _add_tp_layouts(out, seen, m, gpus, tp, limits, refused)
    for pp in (2, 4, 8):
        if gpus % pp == 0 and gpus // pp >= 1:
            stage = gpus // pp
            tp = max(t for t in divisors(stage) if t <= node and tp_splits_heads(m, t))
            _add_layout(out, seen, m, gpus, tp=tp, pp=pp)
    # then, for MoE models, what an ep/DP-attention limit reaches on the search's own stages
    # (one stage: every tensor degree; 2, 4, 8 stages: the widest tensor degree a stage
    # holds): expert parallel none, the tensor group's or the stage's, DP-attention off and
    # on, so that pipeline stages with expert parallelism inside each are tried too (every
    # tensor degree of a pipeline stage and every stage count the layers allow: about 3x the
    # search's time on 8-64 H200, not tried)
    for pp in (1, 2, 4, 8) if m.is_moe else ():
        if gpus % pp or pp > m.num_hidden_layers:
            continue
        stage = [t for t in divisors(gpus // pp) if t <= node and tp_splits_heads(m, t)]
        own = LayoutLimits(
            tp=None if pp == 1 else tuple(stage[-1:]),
            pp=(pp,),
            redundant_experts=limits.redundant_experts,
        )
        _limited_layouts(out, seen, m, gpus, node, own, refused)
    limited = limits.given or prefill is not None
    if limited:
        for each in (limits, prefill) if prefill is not None else (limits,):
            _limited_layouts(out, seen, m, gpus, node, each, refused)
        if removed is not None:  # those no limit's redundant experts fit, under the limit's
            have = {(lay.tp, lay.dp, lay.pp, lay.ep, lay.dp_attention) for lay in out}
            for key, reason in refused.items():
                if key not in have:
                    removed[reason] += 1
        kept = []
        for lay in out:
            reason = limits.breaks(lay, m)
            if reason is None or (prefill is not None and prefill.breaks(lay, m) is None):
                kept.append(lay)
            elif removed is not None:
                removed[reason] += 1
        out = kept
    fit = [lay for lay in out if layout_weights(m, lay, weight_dtype, components, cache) < usable]
    if limited and removed is not None and len(fit) < len(out):
        removed["does not fit: weights"] += len(out) - len(fit)
    return fit


def _add_tp_layouts(
    out: list[Layout],
    seen: set[tuple],
    m: ModelConfig,
    gpus: int,
    tp: int,
    limits: LayoutLimits,
    refused: dict[tuple, str] | None,
) -> None:
    """The search's own one-stage layouts of tensor degree ``tp``: plain TP, and for MoE
    models expert parallel over the tensor group or every GPU, DP-attention off and on."""
    _add_layout(out, seen, m, gpus, tp=tp)
    if m.is_moe:
        if tp > 1:
            red = limits.redundant(m, tp) if limits.redundant_experts is not None else 0
            _add_layout(out, seen, m, gpus, refused, tp=tp, ep=tp, redundant_experts=red)
        for ep in (gpus,):
            extra = limits.redundant(m, ep)
            for dpa in (True, False):
                kw = dict(tp=tp, ep=ep, dp_attention=dpa, redundant_experts=extra)
                _add_layout(out, seen, m, gpus, refused, **kw)
        _add_layout(out, seen, m, gpus, tp=tp, dp_attention=True)


def _unsplit_layouts(m: ModelConfig, gpus: int, tp: int, limits: LayoutLimits) -> int:
    """How many of the search's own layouts of degree ``tp`` its K/V heads rule out: those
    :func:`_add_tp_layouts` builds for ``m`` with as many K/V heads as query heads (at least
    one: the degree is still counted where another check also refuses it)."""
    whole = {f: m.num_attention_heads for f in KV_HEAD_FIELDS if getattr(m, f, None)}
    out: list[Layout] = []
    _add_tp_layouts(out, set(), m.replaced(**whole), gpus, tp, limits, None)
    return max(len(out), 1)


def _limited_layouts(
    out: list[Layout],
    seen: set[tuple],
    m: ModelConfig,
    gpus: int,
    node: int,
    limits: LayoutLimits,
    refused: dict[tuple, str] | None = None,
) -> None:
    """Add to ``out`` the layouts ``limits`` name beyond the search's own: every stage count,
    tensor and expert degree given (the search's own choices where not) with DP-attention off
    and on, as :func:`mlacalc.serving.layout.make_layout` accepts them (a degree beyond a
    node's GPUs included: the user asked for it)."""
    for pp in limits.pp or (1,):
        if gpus % pp:
            continue
        stage = gpus // pp
        own = [t for t in divisors(stage) if t <= node and tp_splits_heads(m, t)]
        for tp in limits.tp or own:
            if stage % tp:
                continue
            if isinstance(limits.ep, tuple):
                eps: tuple[int, ...] = limits.ep
            else:
                eps = (1,) if limits.ep == "none" or not m.is_moe else (1, tp, stage)
            for ep in eps:
                for dpa in (False, True) if m.is_moe else (False,):
                    red = limits.redundant(m, ep)
                    kw = dict(tp=tp, pp=pp, ep=ep, dp_attention=dpa, redundant_experts=red)
                    _add_layout(out, seen, m, gpus, refused, **kw)


def layout_weights(
    m: ModelConfig,
    lay: Layout,
    sized: str | None,
    components: tuple[tuple[str, str], ...],
    cache: dict | None = None,
) -> int:
    """Bytes of weights on a layout's fullest GPU, named components in their formats
    (``cache``: a dict kept for one model, each split's bytes counted once in it: a GPU's
    weights depend on the tensor and pipeline split, the GPUs sharing the routed experts and
    their redundant copies, not on replicas)."""
    key = (lay.tp, lay.pp, lay.moe_group, lay.redundant_experts, sized, components)
    if cache is not None and key in cache:
        return cache[key]
    every = kept_components(m, sized, dict(components))  # the embedding and head kept
    if not every:
        out = weights_per_gpu(m, lay, sized)
    else:
        out = sum(component_weight_bytes(m, lay, sized, every).values())
    if cache is not None:
        cache[key] = out
    return out


def weight_key(w: str, components: tuple[tuple[str, str], ...]) -> str:
    """A weight choice as one string: the dtype and its components' formats."""
    return w + "".join(f"+{c}:{f}" for c, f in components)


def _add_layout(
    out: list[Layout],
    seen: set[tuple],
    m: ModelConfig,
    gpus: int,
    refused: dict[tuple, str] | None = None,
    **kw: Any,
) -> None:
    """Add the layout ``kw`` describes to ``out``, unless the model refuses it or it is there;
    ``refused``: where the redundant experts a limit gives are all it lacks (the slots do not
    split over its ``ep``, the fewest would), its key, to be counted under that limit."""
    try:
        lay = make_layout(m, gpus, **kw)
    except MlacalcError:
        ep, red = kw.get("ep", 1), kw.get("redundant_experts", 0)
        if refused is not None and ep > 1 and red:
            try:
                fewest = make_layout(
                    m, gpus, **{**kw, "redundant_experts": (-m.n_routed_experts) % ep}
                )
            except MlacalcError:
                return
            dpa = fewest.dp_attention and fewest.dp > 1  # one group a stage: plain TP, below
            key = (fewest.tp, fewest.dp, fewest.pp, fewest.ep, dpa)
            refused.setdefault(key, f"ruled out by --redundant-experts {red}")
        return
    if lay.dp_attention and lay.dp == 1:
        # one attention group a stage is plain TP (LayoutLimits.breaks reads it so): the same
        # layout and figures as DP-attention off, timed once (a review: TP4 PP2 EP4 twice)
        lay = make_layout(m, gpus, **{**kw, "dp_attention": False})
    key = (lay.tp, lay.dp, lay.pp, lay.ep, lay.dp_attention, lay.redundant_experts)
    if key not in seen:
        seen.add(key)
        out.append(lay)


def needs_network(lay: Layout, hw: HardwareSpec) -> bool:
    """Whether some collective or stage hand-over of the layout crosses nodes."""
    node = hw.scale_up_gpus
    if node is None or lay.gpus <= node:
        return False
    return lay.tp > node or lay.moe_group > node or (lay.pp > 1 and lay.stage_gpus >= node)


def candidates(
    req: SearchRequest,
    reasons: Counter[str],
    keep: Callable[[int, str, Layout, str], bool] | None = None,
) -> list[Candidate]:
    """Every candidate of the search, in order (GPU count, weight dtype, layout, KV dtype);
    what is ruled out before timing is counted in ``reasons``. ``keep(gpus, weight dtype,
    layout, KV dtype)``: only the candidates it accepts (a refinement's)."""
    out = []
    for g in req.gpus:
        for w0 in req.weight_dtypes:
            # the model's own weights are sized as its checkpoint stores them (None)
            sized = None if req.own and w0 == req.m.weights_dtype else w0
            for comps in req.components:
                w = weight_key(w0, comps)
                for lay in _fitting_layouts(req, g, sized, reasons, comps):
                    weights = layout_weights(req.m, lay, sized, comps, req.weight_cache)
                    for kv in req.kv_dtypes:
                        if keep is not None and not keep(g, w, lay, kv):
                            continue
                        c = candidate(req, g, w, sized, lay, weights, kv, reasons, comps)
                        if c is not None:
                            out.append(c)
    return out


def _fitting_layouts(
    req: SearchRequest,
    g: int,
    sized: str | None,
    reasons: Counter[str],
    comps: tuple[tuple[str, str], ...] = (),
) -> list[Layout]:
    """The layouts of ``g`` GPUs whose weights fit and whose links have figures."""
    per_layout = len(req.kv_dtypes) * len(req.batches) * len(req.modes)
    removed: Counter[str] = Counter()
    lays = req.layouts(g, sized, comps, removed)
    for reason, n in removed.items():
        reasons[reason] += n * per_layout
    if not lays:
        if not req.limited:  # (limited: each layout counted above)
            reasons["does not fit: weights"] += per_layout
        return []
    if not req.hw.scale_out_bytes_per_s:
        crossing = [lay for lay in lays if needs_network(lay, req.hw)]
        if crossing:
            reasons[f"{req.hw.name} has no network figures (scale_out_gb_per_s)"] += (
                len(crossing) * per_layout
            )
            lays = [lay for lay in lays if not needs_network(lay, req.hw)]
    return lays


def candidate(
    req: SearchRequest,
    g: int,
    w: str,
    sized: str | None,
    lay: Layout,
    weights: int,
    kv: str,
    reasons: Counter[str],
    comps: tuple[tuple[str, str], ...] = (),
) -> Candidate | None:
    """The candidate of one layout and KV dtype: the batches that fit (the others counted in
    ``reasons``) and its rows; None when nothing is left to time."""
    m, isl = req.m, req.isl
    # the layout the engine stores (a DSA model's fp8 under vLLM and SGLang: fp8_ds_mla)
    layout = engine_kv_layout(m, resolve_kv_layout(kv), req.engine)[0]
    layout = with_state_dtype(layout, req.state_dtype)  # a recurrent state's, as plan's
    # one sequence's cache on a GPU, every layer kind as it keeps it, in pages; a shared
    # prefix's pages held once per group, as plan's (mlacalc.serving.capacity.capacity)
    shared = shared_bytes(req, layout, lay)
    per_seq = per_sequence_bytes(req, layout, lay, req.context) - shared
    per_group = max(req.room(weights) - shared, 0) // per_seq
    decode, prefill = req.roles(lay)  # the pools the limits let it run
    B = np.asarray(req.batches if decode else (), dtype=np.float64)
    fit = per_group >= B
    reasons["does not fit: kv cache"] += int((~fit).sum()) * len(req.modes)
    if req.max_running is not None:
        admitted = req.max_running >= B
        reasons["beyond the engine's max_running"] += int((fit & ~admitted).sum()) * len(req.modes)
        fit &= admitted
    Bf = B[fit]
    comm = lay.tp > 1 or lay.ep > 1 or lay.moe_group > lay.tp or lay.pp > 1
    ovs = tuple(o for o in req.overlaps if comm or o == "none")
    n = Bf / req.osl
    _, share, k, mean = synced_prompts(n, synced_groups(m, lay), req.k_max)
    rows = StepRows()
    # a count a budget does not run aggregated (mlacalc.serving.search.tight_counts): no
    # steps with prompts
    mixed = decode and (req.whole_gpus is None or g in req.whole_gpus)
    _batch_rows(rows, req, lay, ovs, Bf, k, mean, mixed, synced_groups(m, lay))
    chunked = {}
    if mixed and req.prefill_pass == "fused" and "aggregated" in req.modes:
        chunked = _chunk_rows(rows, req, lay, ovs, Bf, synced_groups(m, lay))
    # a prefill pool holds the weights and the cache of one prompt of isl tokens per GPU at
    # least, and a pass batches at most the prompts whose cache fits beside the weights
    # (k_fit <= k_max), as plan checks it
    k_fit = 0
    # under a budget, a pool of more GPUs than the budget leaves beside the smallest decode
    # pool never pairs
    pairs = req.budget is None or g + min(req.gpus) <= req.budget
    if lay.pp == 1 and "disaggregated" in req.modes and pairs and prefill:
        one = per_sequence_bytes(req, layout, lay, isl)
        k_fit = int(min(req.k_max, max(req.room(weights), 0) // one))
    if k_fit >= 1:
        _pool_rows(rows, req, k_fit)
    if not rows.pos:
        return None  # no batch fits and no prefill pool to rate: nothing to time
    sm, specs, arrays = _step(req, lay, sized, layout, comps, rows)
    return Candidate(
        gpus=g,
        weight=w,
        label=weight_format(m, sized)
        + "".join(f", {c} {f}" for c, f in kept_components(m, sized, dict(comps)).items()),
        components=comps,
        # as plan names them: a checkpoint's stored dtype (gpt-oss's fp4 experts)
        weight_dtype=sized or stored_weight_dtype(m) or m.weights_dtype,
        lay=lay,
        kv=layout.name,
        kv_layout=layout,
        weights=weights,
        per_seq=per_seq,
        shared=shared,
        per_token=kv_bytes_per_token_per_gpu(m, layout, lay),
        Bf=Bf,
        n=n,
        k=k,
        share=share,
        overlaps=ovs,
        slices=rows.slices,
        k_fit=k_fit,
        sm=sm,
        specs=specs,
        chunked=chunked,
        groups=synced_groups(m, lay),
        rows=arrays,
    )


def shared_bytes(req: SearchRequest, layout: Any, lay: Layout) -> int:
    """A shared prefix's cache bytes on a GPU of ``lay``, held once per attention group
    (plan's :func:`~mlacalc.serving.capacity.shared_prefix_bytes`; 0: none)."""
    tokens = shared_prefix_tokens(req.shared_prefix, req.page_size)
    if not tokens:
        return 0
    per_token_full = sequence_bytes(req.m, layout, lay, req.context, req.page_size, False)[1]
    return shared_prefix_bytes(per_token_full, tokens)


def per_sequence_bytes(req: SearchRequest, layout: Any, lay: Layout, context: int) -> int:
    """One sequence's cache bytes on a GPU of ``lay`` (as
    :func:`mlacalc.serving.layout.kv_bytes_per_sequence_per_gpu` counts them), once per
    tensor and pipeline split: the cache splits by attention heads and by stages, never by
    experts or replicas."""
    key = ("per_sequence", layout.name, lay.tp, lay.pp, context)
    if key not in req.step_cache:
        req.step_cache[key] = kv_bytes_per_sequence_per_gpu(
            req.m, layout, lay, context, req.page_size
        )
    return req.step_cache[key]


def _step(
    req: SearchRequest,
    lay: Layout,
    sized: str | None,
    layout: Any,
    comps: tuple[tuple[str, str], ...],
    rows: StepRows,
) -> tuple[StepModel, list[Spec], list[np.ndarray]]:
    """The step model of ``lay``, its kernels over ``rows`` and the rows' arrays. A step
    model reads of its layout only the tensor, pipeline and expert splits (and the GPUs a
    stage hand-over spans): replicas of a layout on more GPUs, and DP-attention layouts
    that differ only in their GPU count where the experts are split alike, share the step
    model's kernels (a copy of the step model holds each layout) and, at the same rows,
    the kernels' figures."""
    p2p = (lay.gpus, lay.stage_gpus) if lay.pp > 1 else None
    sig = (lay.tp, lay.pp, lay.ep, lay.moe_group, lay.moe_tp, lay.redundant_experts, p2p)
    sig += (sized, layout.name, comps)
    arrays = [
        np.concatenate(a) for a in (rows.dec_B, rows.pf_N, rows.pf_q, rows.pf_moe, rows.pf_pre)
    ]
    key = ("specs", sig, *(a.tobytes() for a in arrays))
    model = req.step_cache.get(("model", sig))
    if model is None:
        model = StepModel(
            req.m,
            lay,
            sized,
            layout,
            req.hw,
            req.profile,
            scheduler=req.scheduler,
            component_dtypes=dict(comps),
            engine=req.engine,
            **dict(req.routing),
        )
        req.step_cache[("model", sig)] = model
    sm = copy.copy(model)
    sm.lay = lay
    if key not in req.step_cache:
        dec_B, pf_N, pf_q, pf_moe, pf_pre = arrays
        req.step_cache[key] = sm.specs(
            dec_B=dec_B, dec_S=req.S_avg, pf_N=pf_N, pf_q=pf_q, pf_moe=pf_moe, pf_pre=pf_pre
        )
    return sm, req.step_cache[key], arrays


def _batch_rows(
    rows: StepRows,
    req: SearchRequest,
    lay: Layout,
    ovs: tuple[str, ...],
    Bf: np.ndarray,
    k: np.ndarray,
    mean: np.ndarray,
    mixed: bool = True,
    groups: int = 1,
) -> None:
    """Under each overlap, the decode steps of the batches ``Bf`` and (``mixed``) the steps
    that carry ``k`` prompts beside them on the slowest group, the experts seeing ``mean``
    per group (or, separate, the prompts' own pass), and the pass of one prompt alone on the
    ``groups`` synced groups."""
    prompt = prompt_args(req)  # a prompt's tokens computed after those found cached
    q, pre = float(prompt["pf_q"]), float(prompt["pf_pre"])
    for ov in ovs:
        f = 0.5 if ov == "tbo" else 1.0
        blocks = [("dec", Bf, 0 * Bf, 0 * Bf), ("mix", Bf, k, mean)]
        if req.prefill_pass == "separate":  # the prompts' own pass
            blocks[1] = ("mix", 0 * Bf, k, k)
        if not mixed:
            blocks = blocks[:1]
        for what, db, pn, pm in blocks:
            mb = np.minimum(lay.pp, np.maximum(db, 1))  # micro-batches
            full = np.full(len(Bf), 1.0)
            # whole prompts in one micro-batch (the plan's figures.micro_batch_prompts)
            pn, pm = micro_batch_prompts(pn, pm, mb)
            rows.add((ov, what), db / mb * f, pn * f, full * q, pm * f, full * pre)
        if mixed:  # one prompt alone, the other synced groups idle (plan's prefill_alone)
            one = np.ones(1)
            rows.add((ov, "alone"), 0 * one, one * f, one * q, one / groups * f, one * pre)


def _chunk_rows(
    rows: StepRows,
    req: SearchRequest,
    lay: Layout,
    ovs: tuple[str, ...],
    Bf: np.ndarray,
    groups: int,
) -> dict[int, Chunked]:
    """Under each overlap, one block of rows (``(overlap, "chunked")``): for each
    chunked-prefill budget ``N`` of ``req.chunks`` the rows plan times a chunked step by
    (``mlacalc.serving.figures``): at each batch ``B`` the step at full load, carrying the
    prompt tokens the load brings, ``P = B isl / osl`` (:func:`chunk_fluid`); then the
    prompt's own steps, its ``j``-th chunk after the ``j N`` tokens before, the experts seeing
    the synced set's mean (:func:`mlacalc.serving.figures.chunked_figures` composes them).
    The chunk is what the decode
    tokens leave of ``max_tokens``. A batch whose prompts need more than a chunk a step (plan
    warns: they queue) or more than :data:`MOST_CHUNK_STEPS` steps a prompt has no chunked
    point; budgets of the whole prompt or more run the same steps (a chunk holds one
    prompt), so only the largest of them (the most batches it keeps up with) is timed."""
    out: dict[int, Chunked] = {}
    # the chunks cover a prompt's tokens not found cached, after the cached ones (prefix
    # caching), as plan's: ``isl`` here is the tokens they compute
    isl, cached = req.computed_tokens, req.cached_tokens
    mb = np.minimum(lay.pp, np.maximum(Bf, 1))
    chunks = req.chunks
    if req.max_tokens is None:
        whole = [n for n in chunks if n >= isl]
        chunks = tuple(n for n in chunks if n < isl) + tuple(whole[-1:])
    parts: list[tuple] = []  # per budget: dec_B, pf_N, pf_q, pf_moe, pf_pre (unscaled)
    pos = 0
    for N in chunks:
        # the plan's keep-up rule (figures.chunk_rule): the chunk, a prompt's chunk steps and
        # the prompt tokens a group's requests bring a step (no MTP drafts in a search)
        chunk, steps, _, P = chunk_rule(isl, req.osl, N, req.max_tokens, Bf, Bf)
        chunk = np.broadcast_to(np.asarray(chunk, dtype=np.float64), Bf.shape)
        steps = np.broadcast_to(np.asarray(steps, dtype=np.float64), Bf.shape)
        ok = np.flatnonzero((chunk >= P) & (steps <= MOST_CHUNK_STEPS))
        if not len(ok):
            continue
        B, m, c, p, s = Bf[ok], mb[ok], chunk[ok], P[ok], steps[ok]
        n = B / request_steps(s, req.osl, 1.0)
        _, share, _, mean = synced_prompts(n * s, groups, 1)
        fluid = chunk_fluid(p, isl, m, cached)
        owner = np.repeat(np.arange(len(ok)), s.astype(np.int64))
        starts = np.concatenate([np.arange(0.0, isl, x) for x in c])
        parts.append((B / m, fluid["pf_N"], fluid["pf_q"], fluid["pf_N"], fluid["pf_pre"]))
        own = np.minimum(c[owner], isl - starts)
        parts.append(((B / m)[owner], (1 / m)[owner], own, (mean / m)[owner], cached + starts))
        out[N] = Chunked(ok, c, n, s, share, owner, pos, pos + len(ok), pos + len(ok) + len(owner))
        pos += len(ok) + len(owner)
    if parts:
        dec_B, pf_N, pf_q, pf_moe, pf_pre = (np.concatenate(a) for a in zip(*parts))
        for ov in ovs:
            f = 0.5 if ov == "tbo" else 1.0
            rows.add((ov, "chunked"), dec_B * f, pf_N * f, pf_q, pf_moe * f, pf_pre)
    return out


#: Most chunk steps of one prompt a search times (more: no chunked point at that budget).
MOST_CHUNK_STEPS = 64


def pool_passes(k_fit: int) -> np.ndarray:
    """The passes a prefill pool is timed at: of every ``1 .. k_fit`` prompts or, for short
    prompts (thousands), of the arrivals model's sample of them, interpolated between."""
    return sample_states(k_fit + 1)[1:].astype(np.float64)


def _pool_rows(rows: StepRows, req: SearchRequest, k_fit: int) -> None:
    """The layout as a prefill pool: its passes of ``1 .. k_fit`` prompts (its prompt rate: a
    pass of ``k_fit``; :func:`pool_passes`), under each overlap (a pool runs its decode pool's,
    as plan times it)."""
    ks = pool_passes(k_fit)
    prompt = prompt_args(req)  # a prompt's tokens computed after those found cached
    full = np.ones(len(ks))
    for ov in req.overlaps:
        f = 0.5 if ov == "tbo" else 1.0
        q, pre = full * prompt["pf_q"], full * prompt["pf_pre"]
        rows.add((ov, "prefill"), np.zeros(len(ks)), ks * f, q, None, pre)


def _spec_key(sm: StepModel, sp: Spec) -> tuple:
    """What a kernel's time per call depends on: its class, its rows' FLOPs, bytes and shape
    figures and, for a collective, its group (a stage hand-over's link: the layout's GPUs and
    stage size). Equal keys are timed once (one search's candidates share one device and
    profile)."""
    shape = tuple((k, np.asarray(v).tobytes()) for k, v in sorted(sp.shape.items()))
    key = (sp.kind, sp.dtype, sp.comm, sp.n_gpus, sp.network, sp.flops.tobytes())
    key += (sp.bytes.tobytes(), shape)
    if sp.kind == "p2p":
        key += (sm.lay.gpus, sm.lay.stage_gpus)
    return key


def time_candidates(cands: list[Candidate], profile: Any) -> list[list[np.ndarray]]:
    """Seconds of every candidate's specs, as :func:`mlacalc.serving.gpu_step.time_jobs`
    gives them, each distinct kernel timed once: replicas of a layout (data parallel beyond
    it) and layouts that differ only in their experts run the same attention kernels at the
    same batches, and most rows of a search repeat (DeepSeek-V3 on 64 H200: 350,726 rows,
    6,532 distinct)."""
    jobs: list[tuple[StepModel, list[Spec]]] = []
    job_of: dict[int, int] = {}  # a step model's job
    seen: dict[tuple, tuple[int, int]] = {}
    where = []
    listed: dict[int, list[tuple[int, int]]] = {}  # a kernel list shared by candidates
    for c in cands:
        if id(c.specs) in listed:
            where.append(listed[id(c.specs)])
            continue
        refs = listed[id(c.specs)] = []
        for sp in c.specs:
            key = _spec_key(c.sm, sp)
            if key not in seen:
                j = job_of.setdefault(id(c.sm), len(jobs))
                if j == len(jobs):
                    jobs.append((c.sm, []))
                seen[key] = (j, len(jobs[j][1]))
                jobs[j][1].append(sp)
            refs.append(seen[key])
        where.append(refs)
    secs = time_jobs(jobs, profile)
    return [[secs[j][i] for j, i in refs] for refs in where]
