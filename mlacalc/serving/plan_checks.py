"""The arguments of :func:`mlacalc.plan`, checked and normalised into one record.

:func:`check_request` refuses every argument that is out of range, of the wrong kind, or
that does not apply beside the others (an :class:`~mlacalc.words.errors.InvalidArgumentError`
naming the argument), before any work is done; what it returns, a :class:`PlanRequest`, is
the request with its defaults filled in: the model and device loaded, the decode pool's
layout and, disaggregated, the prefill pool's, the dtypes resolved, the calibration profile
loaded. It needs no numpy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from mlacalc.cost.engine import as_model
from mlacalc.cost.model_step import checkpoint_stored, stored_experts
from mlacalc.cost.params import KeptPart, kept_parts
from mlacalc.cost.quant import checkpoint_kv_note, component_precision, stored_weight_dtype
from mlacalc.hardware.catalogue import HardwareSpec, load_hardware, lookup_peak
from mlacalc.models.architecture import layer_pattern
from mlacalc.models.loading import ModelConfig
from mlacalc.models.patterns import STATE_KINDS
from mlacalc.models.quantization import external_quantization, format_dtype
from mlacalc.serving.gpu_step import routed_experts_class
from mlacalc.serving.launch import attention_groups_over_gpus
from mlacalc.serving.layout import Layout, make_layout
from mlacalc.serving.precision import (
    check_components,
    engine_kv_layout,
    format_class,
    kept_components,
)
from mlacalc.serving.provenance import engine_profile_of
from mlacalc.serving.ranks import ROUTINGS
from mlacalc.serving.scheduler import Scheduler, model_page_size
from mlacalc.serving.speculative import acceptance_length
from mlacalc.timemodel.device import device_figures
from mlacalc.timemodel.kernel_time import run_dtype
from mlacalc.timemodel.mla_geometry import mla_geometry_note
from mlacalc.timemodel.mla_time import sglang_chunk_note
from mlacalc.timemodel.moe_backend import check_moe_backend
from mlacalc.timemodel.profile import load_profile
from mlacalc.words import arguments, defaults
from mlacalc.words.arguments import whole
from mlacalc.words.dtypes import KVLayout, canonical_dtype, resolve_kv_layout, with_state_dtype
from mlacalc.words.engines import ENGINE_LABELS, check_engine
from mlacalc.words.errors import InvalidArgumentError
from mlacalc.words.units import counted
from mlacalc.words.vocab import SERVING_MODES

__all__ = [
    "OVERLAPS",
    "PREFILL_PASSES",
    "PlanRequest",
    "check_balanced",
    "check_int",
    "check_number",
    "check_request",
    "check_routing_args",
    "check_shared_prefix",
    "decode_layout",
    "engine_runs_kv",
    "format_warnings",
    "largest_ep",
    "prefill_layout",
    "prefix_cached_tokens",
    "refuse_without_ranks",
    "shared_prefix_tokens",
    "trtllm_attention_tp",
]

OVERLAPS = ("none", "tbo")
#: How in-flight batching runs a step's prompts: in the decode batch's forward pass (weights
#: read once), or in a pass of their own before it.
PREFILL_PASSES = ("fused", "separate")
#: The arguments that describe the prefill pool of ``mode="disaggregated"``.
PREFILL_POOL_ARGUMENTS = (
    "prefill_gpus",
    "prefill_tp",
    "prefill_ep",
    "prefill_dp_attention",
    "prefill_redundant_experts",
)


@dataclass(frozen=True)
class PlanRequest:
    """One call of :func:`mlacalc.plan`, checked: every argument as the planner uses it."""

    m: ModelConfig
    hw: HardwareSpec
    gpus: int
    #: the decode pool's layout (the whole deployment's, aggregated)
    lay: Layout
    #: the dtype the weights are named by (the model's own when none was given) and the one
    #: they are sized as (None: the checkpoint's own bytes)
    w_dtype: str
    sized: str | None
    kv: KVLayout
    page_size: int
    memory_reserve: float
    seq_len: int
    batch: int | None
    include_mtp: bool
    isl: int | None
    osl: int | None
    concurrency: float | None
    request_rate: float | None
    mode: str
    chunked_prefill: int | None
    overlap: str
    mtp_tokens: int
    acceptance: float
    imbalance: float
    output_lag_steps: int
    prefill_pass: str
    profile: Any
    #: the serving engine whose kernels are timed, and what stood in for it (words)
    engine: str = "trtllm"
    engine_note: str = ""
    #: the prefill pool (disaggregated; 0 GPUs and the decode pool's layout otherwise)
    p_gpus: int = 0
    p_lay: Layout | None = None
    warnings: tuple[str, ...] = ()
    #: how a step's copies spread over the expert ranks (mlacalc.serving.ranks): ``random``
    #: or ``balanced``, the experts' Zipf-like popularity exponent, and whether the placement
    #: is rebalanced (None: when redundant experts are placed)
    routing: str = "random"
    expert_skew: float = 0.0
    rebalance: bool | None = None
    #: what the engine admits: requests running per attention group, tokens per step (None:
    #: no cap beyond memory and the prefill pass's); its host work (mlacalc.serving.scheduler)
    max_running: int | None = None
    max_tokens: int | None = None
    scheduler: Scheduler = field(default_factory=Scheduler)
    #: tokens a step yields per sequence (1 + the accepted drafts; mlacalc.serving.speculative)
    tau: float = 1.0
    #: weight formats of named components over the base (mlacalc.serving.precision)
    components: dict[str, str] = field(default_factory=dict)
    #: the share of each prompt's tokens whose KV is found cached (prefix caching, in [0, 1))
    prefix_cache_hit: float = 0.0
    #: the tokens every prompt begins with alike (a shared system prompt or document set:
    #: ``shared_prefix``, < isl; 0: none), their KV held once per attention group
    shared_prefix: int = 0
    #: the engine's own memory setting, (engine, share) (None: ``memory_reserve``'s rule;
    #: :data:`mlacalc.serving.capacity.ENGINE_MEMORY`)
    engine_memory: tuple[str, float] | None = None
    #: TensorRT-LLM's MoE backend chosen (None: the engine's default;
    #: :mod:`mlacalc.timemodel.moe_backend`)
    moe_backend: str | None = None

    def step_model_args(self) -> dict[str, Any]:
        """The routing and scheduler arguments of the request's step models."""
        return {
            "routing_imbalance": self.imbalance,
            "routing": self.routing,
            "expert_skew": self.expert_skew,
            "rebalance": self.rebalance,
            "scheduler": self.scheduler,
            "component_dtypes": self.components,
            "engine": self.engine,
            "moe_backend": self.moe_backend,
        }

    @property
    def context(self) -> int:
        """The context each sequence is sized at: ``isl + osl`` under a request mix."""
        return (self.isl + self.osl) if self.isl is not None else self.seq_len

    @property
    def disaggregated(self) -> bool:
        return self.mode == "disaggregated"

    @property
    def cached_tokens(self) -> int:
        """A prompt's tokens found cached (:func:`prefix_cached_tokens`): ``floor(prefix_cache_hit
        x isl)``, at most ``isl - 1``, rounded down to whole pages of ``page_size`` tokens."""
        return prefix_cached_tokens(
            self.prefix_cache_hit, self.isl, self.page_size, self.shared_prefix
        )

    @property
    def shared_tokens(self) -> int:
        """The shared prefix's tokens held once per attention group: ``shared_prefix`` rounded
        down to whole pages (:func:`shared_prefix_tokens`)."""
        return shared_prefix_tokens(self.shared_prefix, self.page_size)

    @property
    def computed_tokens(self) -> int:
        """A prompt's tokens its prefill computes: the ``isl`` less those found cached, which
        its attention reads as a chunk of a chunked prefill reads the chunks before it."""
        return self.isl - self.cached_tokens


def shared_prefix_tokens(shared: int, page_size: int = 1) -> int:
    """A shared prefix of ``shared`` tokens (the first tokens of every prompt, alike) as the
    engines keep it: whole pages of ``page_size`` tokens, rounded down (a page the prefix only
    partly fills holds each request's own tokens too, so it is each request's own)."""
    return shared // page_size * page_size


def prefix_cached_tokens(hit: float, isl: int | None, page_size: int = 1, shared: int = 0) -> int:
    """A prompt of ``isl`` tokens' tokens found cached at prefix cache hit ``hit``:
    ``floor(hit x isl)``, the hit read as the decimal written (0.29 of 100 tokens is 29), at
    most ``isl - 1`` (the last token is always computed), rounded down to whole pages of
    ``page_size`` tokens (an engine finds cached whole pages only: vLLM's blocks, SGLang's radix
    cache at its page size, TensorRT-LLM's reused blocks; from recall of their prefix
    matching); 0 without a request mix. A shared prefix of ``shared`` tokens (< isl) is found
    cached by every request after the first: the larger of the two, in whole pages. Plan's and
    search's (:class:`mlacalc.serving.search_space.SearchRequest`) one rule."""
    if not isl:
        return 0
    tokens = min(int(Fraction(repr(hit)) * isl), isl - 1)
    return max(
        tokens // page_size * page_size, shared_prefix_tokens(min(shared, isl - 1), page_size)
    )


def check_int(name: str, value: Any, allow_none: bool = True, minimum: int = 1) -> int | None:
    """``value`` as an int of at least ``minimum`` (None passes where ``allow_none``)."""
    if value is None and allow_none:
        return None
    number = whole(value)
    if number is None or number < minimum:
        raise InvalidArgumentError(name, f"must be an integer >= {minimum}, got {value!r}")
    return number


def check_number(
    name: str,
    value: Any,
    lo: float,
    hi: float | None = None,
    allow_none: bool = True,
    closed_hi: bool = False,
) -> float | None:
    """``value`` as a finite float in ``[lo, hi)`` (``[lo, hi]`` where ``closed_hi``)."""
    if value is None and allow_none:
        return None
    number = arguments.real(value)  # numpy numbers too (np.int64(4), np.float32(0.1))
    if (
        number is None
        or not math.isfinite(number)
        or number < lo
        or (hi is not None and (number > hi if closed_hi else number >= hi))
    ):
        span = f"in [{lo}, {hi}{']' if closed_hi else ')'}" if hi is not None else f">= {lo}"
        raise InvalidArgumentError(name, f"must be a number {span}, got {value!r}")
    return number


def check_engine_memory(args: dict[str, Any], hw: Any = None) -> None:
    """``engine_memory``: the engine's own memory setting, a share in (0, 1], read by the
    meaning of ``engine`` (the default engine on ``hw`` where none is given: SGLang's rule
    on AMD, where TensorRT-LLM does not run), put in ``args`` as ``(engine, share)``; refused
    beside a ``memory_reserve`` (two rules for one memory). Without it, ``memory_reserve`` is
    :data:`defaults.MEMORY_RESERVE` where not given."""
    share = args.get("engine_memory")
    if share is None:
        if args["memory_reserve"] is None:
            args["memory_reserve"] = defaults.MEMORY_RESERVE
        return
    if args["memory_reserve"] is not None:
        raise InvalidArgumentError(
            "engine_memory",
            "is the engine's own memory setting and memory_reserve the planner's: give one "
            "(--engine-memory or --memory-reserve), not both",
        )
    number = arguments.real(share)  # numpy numbers too
    if number is None or not math.isfinite(number) or not 0 < number <= 1:
        raise InvalidArgumentError(
            "engine_memory", f"must be the engine's share, a number in (0, 1], got {share!r}"
        )
    args["engine_memory"] = (check_engine(args.get("engine"), hw=hw), number)
    args["memory_reserve"] = 0.0  # unused: the engine's rule sizes the memory


def usable_of(memory: int, weights: int, reserve: float, engine_memory: Any = None) -> int:
    """The bytes of a GPU of ``memory`` bytes holding ``weights`` bytes of weights that the
    weights and the KV cache may take: the memory less ``reserve`` of it, or by the engine's
    own setting ``engine_memory`` (``(engine, share)``;
    :data:`mlacalc.serving.capacity.ENGINE_MEMORY`): TensorRT-LLM's the weights and that
    share of what they leave (the planner keeps no activations apart beside it), vLLM's and
    SGLang's that share of the GPU."""
    if engine_memory is None:
        return int(memory * (1 - reserve))
    engine, share = engine_memory
    if engine != "trtllm":
        return int(memory * share)
    if weights >= memory:  # nothing left: the weights overflow the GPU
        return memory
    return weights + int(share * (memory - weights))


def check_request(
    model: ModelConfig | str, hardware: HardwareSpec | str, gpus: int, **args: Any
) -> PlanRequest:
    """Every argument of :func:`mlacalc.plan` (``args``: its keyword arguments, all of them)
    checked in turn, then the layouts made; the first wrong one is refused, naming it."""
    m = as_model(model)
    hw = load_hardware(hardware)
    gpus = arguments.plain_int(gpus)  # the plan keeps it (np.int64 is not JSON)
    seq_len, isl, osl = _check_sizes(args, hw)
    if args["page_size"] is None:  # the page of the engine whose defaults were taken
        args["page_size"] = model_page_size(args.get("scheduler_defaults"), m, hw)
    concurrency, request_rate = _check_load(args["concurrency"], args["request_rate"])
    prefix_cache_hit = arguments.prefix_hit("prefix_cache_hit", args["prefix_cache_hit"])
    shared_prefix = check_shared_prefix(args.get("shared_prefix"), isl)
    mode = args["mode"]
    chunked_prefill = _check_modes(args, isl, concurrency, request_rate)
    mtp_tokens = check_int("mtp_tokens", args["mtp_tokens"], allow_none=False, minimum=0)
    output_lag_steps = check_int("output_lag_steps", args["output_lag_steps"], False, minimum=0)
    _check_engine(args["prefill_pass"], output_lag_steps, mode, chunked_prefill)
    acceptance, tau, mtp_note = _check_mtp(
        m, mtp_tokens, args["mtp_acceptance"], args["mtp_acceptance_length"]
    )
    imbalance, routing, expert_skew, rebalance = check_routing_args(m, args)
    _check_moe_layout(m, args)
    max_running, max_tokens, scheduler = _check_scheduler(args)

    # a bad name or file is refused before any work; none: the engine's profile for the device
    profile, engine, engine_note = engine_profile_of(args["profile"], args["engine"], hw)
    lay = decode_layout(m, gpus, args)
    _check_tp_network(hw, lay, given=args["tp"] is not None)
    p_gpus, p_lay = 0, None
    if mode == "disaggregated":  # the prefill pool's layout, checked before anything is sized
        p_gpus = check_int("prefill_gpus", args["prefill_gpus"]) or gpus
        p_lay = prefill_layout(
            m,
            lay,
            p_gpus,
            check_int("prefill_tp", args["prefill_tp"]),
            check_int("prefill_ep", args["prefill_ep"]),
            _prefill_dp_attention(lay, args),
            check_int("prefill_redundant_experts", args["prefill_redundant_experts"], minimum=0),
        )
    _check_expert_ranks(m, lay, p_lay, imbalance, routing, expert_skew, rebalance)
    include_mtp = args["include_mtp"] or bool(mtp_tokens)  # drafting needs the MTP weights
    components = check_components(args["component_dtypes"], m)
    stored = _stored_formats(m, args["weight_dtype"])  # the checkpoint's own, sized as stored
    weight_dtype = args["weight_dtype"]
    # the dtype the plan names its weights by: asked, else the checkpoint's stored (gpt-oss's
    # fp4 experts, as the CLI's JSON says), else the model's
    w_dtype = (
        arguments.dtype("weight_dtype", weight_dtype)  # an unknown one names its argument
        if weight_dtype is not None
        else stored_weight_dtype(m) or m.weights_dtype
    )
    kv, kv_note = engine_kv_layout(m, arguments.kv_layout("kv_dtype", args["kv_dtype"]), engine)
    kv = with_state_dtype(kv, args.get("state_dtype"))  # a recurrent state's, carried by the layout
    experts = routed_experts_class(m, None if weight_dtype is None else w_dtype, components)
    moe_backend = check_moe_backend(args.get("moe_backend"), engine, hw, experts)
    return PlanRequest(
        m=m,
        hw=hw,
        gpus=gpus,
        lay=lay,
        w_dtype=w_dtype,
        # no dtype chosen: the checkpoint's own bytes (its quantization's, scales included)
        sized=None if weight_dtype is None else w_dtype,
        kv=kv,
        page_size=args["page_size"],
        memory_reserve=args["memory_reserve"],
        seq_len=seq_len,
        batch=args["batch"],
        include_mtp=include_mtp,
        isl=isl,
        osl=osl,
        concurrency=concurrency,
        request_rate=request_rate,
        mode=mode,
        chunked_prefill=chunked_prefill,
        overlap=args["overlap"],
        mtp_tokens=mtp_tokens,
        acceptance=acceptance,
        imbalance=imbalance,
        output_lag_steps=output_lag_steps,
        prefill_pass=args["prefill_pass"],
        profile=profile,
        engine=engine,
        engine_note=engine_note,
        p_gpus=p_gpus,
        p_lay=p_lay,
        moe_backend=moe_backend,
        warnings=_request_warnings(m, hw, weight_dtype, include_mtp)
        + _kv_warnings(m, kv, engine)
        + _engine_kv_warnings(m, kv, engine, hw)
        + ((kv_note,) if kv_note else ())
        + _format_warnings(components, hw)
        + _stored_format_warnings(hw, stored, components, m)
        + _engine_kernel_warnings(m, hw, engine, weight_dtype, components, moe_backend)
        + _block_sparse_warnings(m, engine)
        + _dispatch_warnings(m, lay, weight_dtype, components)
        + kv_head_copies(m, lay, p_lay)
        + _implied_dp_attention(lay, p_lay, args)
        + _lowered_prefill_ep(m, lay, p_lay, args)
        + _split_experts(m, p_lay, args)
        + _vendor_warnings(hw, engine, {**stored, **components})
        + _sglang_chunks(
            m, engine, chunked_prefill, isl, prefix_cache_hit, args["page_size"], shared_prefix
        )
        + _recurrent_prefix(m, isl, prefix_cache_hit, args["page_size"], shared_prefix)
        + ((mtp_note,) if mtp_note else ()),
        routing=routing,
        expert_skew=expert_skew,
        rebalance=rebalance,
        max_running=max_running,
        max_tokens=max_tokens,
        scheduler=scheduler,
        tau=tau,
        # a dtype asked quantizes the layers' linear weights: the embedding and head kept
        components=kept_components(m, weight_dtype and w_dtype, components),
        prefix_cache_hit=prefix_cache_hit,
        shared_prefix=shared_prefix,
        engine_memory=args["engine_memory"],
    )


def check_shared_prefix(value: Any, isl: int | None) -> int:
    """``shared_prefix``: the tokens every prompt begins with alike, a whole number in
    ``[0, isl)`` (None is 0), only with a request mix. Each refusal names the argument and
    the fix (plan's and search's one check)."""
    if value is None:
        return 0
    number = whole(value)
    if number is None or number < 0:
        raise InvalidArgumentError(
            "shared_prefix",
            "must be a whole number of tokens >= 0, the first tokens of every prompt alike "
            f"(100000, or 0 for none); got {value!r}",
        )
    if number and isl is None:
        raise InvalidArgumentError(
            "shared_prefix",
            "applies to serving a request mix: give isl and osl (--isl, --osl) with it",
        )
    if number and number >= isl:
        raise InvalidArgumentError(
            "shared_prefix",
            f"must be fewer tokens than isl ({isl:,}): a prompt's last token is always its "
            f"own; got {number:,}",
        )
    return number


def _check_scheduler(args: dict[str, Any]) -> tuple[int | None, int | None, Scheduler]:
    """The engine's admission limits and host work: whole numbers >= 1 (None: no cap),
    finite seconds >= 0 (at most 1 s a step: beyond, the figure is not a host's), a bool."""
    max_running = check_int("max_running", args["max_running"])
    max_tokens = check_int("max_tokens", args["max_tokens"])
    seconds = {
        name: check_number(name, args[name], 0.0, 1.0, allow_none=False, closed_hi=True)
        for name in ("host_step_s", "host_per_sequence_s", "launch_s")
    }
    overlap = args["overlap_schedule"]
    if not isinstance(overlap, bool):
        raise InvalidArgumentError("overlap_schedule", f"must be True or False, got {overlap!r}")
    graph = check_int("cuda_graph_max_batch", args["cuda_graph_max_batch"])
    scheduler = Scheduler(
        host_step_s=seconds["host_step_s"] or 0.0,
        host_per_sequence_s=seconds["host_per_sequence_s"] or 0.0,
        overlap=overlap,
        cuda_graph_max_batch=graph,
        launch_s=seconds["launch_s"] or 0.0,
    )
    return max_running, max_tokens, scheduler


def check_routing_args(m: ModelConfig, args: dict[str, Any]) -> tuple[float, str, float, Any]:
    """How the routing loads ``m``'s routed experts, :func:`mlacalc.plan`'s and
    :func:`mlacalc.search`'s (``args``: ``routing_imbalance``, ``routing``, ``expert_skew``,
    ``rebalance``): each checked, and refused on a model without routed experts; returns
    them in that order. The layouts' expert ranks are :func:`refuse_without_ranks`'."""
    imbalance = check_number("routing_imbalance", args["routing_imbalance"], 1.0, allow_none=False)
    _check_imbalance(m, imbalance)
    routing, expert_skew, rebalance = _check_routing(args)
    _check_moe_only(m, args)
    return imbalance, routing, expert_skew, rebalance


def _check_routing(args: dict[str, Any]) -> tuple[str, float, bool | None]:
    """How the routing loads the experts: ``routing`` one of :data:`ROUTINGS`, ``expert_skew``
    a finite exponent >= 0 (at most 4: beyond, one expert takes nearly every copy),
    ``rebalance`` None or a bool."""
    routing = args["routing"]
    if routing not in ROUTINGS:
        raise InvalidArgumentError(
            "routing", f"must be one of {', '.join(ROUTINGS)}, got {routing!r}"
        )
    skew = check_number("expert_skew", args["expert_skew"], 0.0, 4.0, False, closed_hi=True)
    rebalance = args["rebalance"]
    if rebalance is not None and not isinstance(rebalance, bool):
        raise InvalidArgumentError("rebalance", f"must be True, False or None, got {rebalance!r}")
    return routing, float(skew or 0.0), rebalance


#: The arguments that describe how a router loads routed experts, with the value that leaves
#: them out: on a model without routed experts any other value would change nothing, so it is
#: refused, as ``ep`` and ``redundant_experts`` are (the layout has no experts to place)
_MOE_ONLY_ARGUMENTS = {
    "routing": ("random", "how a step's tokens spread over the expert ranks"),
    "expert_skew": (0.0, "the experts' popularity"),
    "rebalance": (None, "where the experts are placed"),
    "routing_imbalance": (1.0, "the busiest expert's load over the mean"),
}


def _check_moe_only(m: ModelConfig, args: dict[str, Any]) -> None:
    """Refuse an argument of :data:`_MOE_ONLY_ARGUMENTS` given on a model without routed
    experts (``args``: the arguments by name; those absent are not checked), naming it."""
    if m.is_moe:
        return
    for name, (unset, what) in _MOE_ONLY_ARGUMENTS.items():
        if name in args and args[name] != unset:
            raise InvalidArgumentError(
                name,
                f"{m.label} has no routed experts: {name} sets {what}, which changes nothing "
                f"here; leave it out",
            )


def _check_moe_layout(m: ModelConfig, args: dict[str, Any]) -> None:
    """Refuse two-batch overlap and DP-attention on a model without routed experts, naming
    the argument: the engines run them for MoE models (SGLang's two-batch overlap and vLLM's
    dual-batch overlap hide the experts' all-to-all behind the other micro-batch; SGLang's
    DP-attention shares the experts over attention replicas): :func:`dense_dp_attention`."""
    if m.is_moe:
        return
    if args.get("overlap") == "tbo":
        raise InvalidArgumentError(
            "overlap",
            f"{m.label} has no routed experts: two-batch overlap hides the experts' all-to-all "
            "behind the other micro-batch, which the engines run for MoE models only; use "
            "overlap='none'",
        )
    for name in ("dp_attention", "prefill_dp_attention"):
        if args.get(name):
            instead = (  # the library's argument, then the command line's option
                "tp (--tp), or dp replicas (dp, --dp) where the whole model fits one GPU"
                if name == "dp_attention"
                else "prefill_tp (--prefill-tp)"
            )
            raise InvalidArgumentError(name, dense_dp_attention(m, f"give {instead}"))


def dense_dp_attention(m: ModelConfig, fix: str) -> str:
    """Why DP-attention is refused on a model without routed experts, and ``fix``: the engines
    run it only with MoE layers (from recall, not the shared tables: SGLang's
    ``--enable-dp-attention``, TensorRT-LLM's ``enable_attention_dp`` and vLLM's data-parallel
    attention serve MoE models, a DeepSeek-style model's dense layers keeping their MLP
    sharded across the attention group). A dense model has nothing for the attention replicas
    to share, and plain ``dp`` replicas each hold the whole model, which need not fit where
    the sharded MLP would (a converted Llama-3.1-70B at tp 1, dp 8)."""
    return (
        f"{m.label} has no routed experts: the engines run DP-attention only for models with "
        "MoE layers (SGLang, TensorRT-LLM and vLLM, from recall; a DeepSeek-style model's dense "
        f"layers keep their MLP sharded across the attention group); {fix}"
    )


def _check_expert_ranks(
    m: ModelConfig,
    lay: Layout,
    p_lay: Layout | None,
    imbalance: float,
    routing: str,
    skew: float,
    rebalance: bool | None,
) -> None:
    """Refuse the routing arguments that load expert-parallel ranks where no pool has any
    (``ep`` 1: every GPU holds every expert, or a slice of each), and a measured imbalance
    beside ``routing="balanced"`` (which gives every rank exactly its share): a new-user trial
    (trial 9) read ``--routing-imbalance 3`` under pure TP8 raise DeepSeek-V3's step 43.64 ->
    50.55 ms with no busiest expert GPU, ``--expert-skew 1.5`` change nothing, and ``--routing
    balanced --routing-imbalance 2`` give a load of 2. ``routing`` itself stays: it also sets
    how a GPU's tokens spread over its own experts (the busiest expert's rows)."""
    if not m.is_moe:
        return  # refused by _check_moe_only
    check_balanced(routing, imbalance, skew, rebalance)
    ranks = lay.ep > 1 or (p_lay is not None and p_lay.ep > 1)
    refuse_without_ranks(ranks, f"ep is 1 ({lay.describe()})", imbalance, skew, rebalance)


def check_balanced(routing: str, imbalance: float, skew: float, rebalance: bool | None) -> None:
    """Refuse the routing arguments that contradict each other: a measured imbalance (the
    busiest expert GPU's load over the mean, as a run measures it: the experts' popularity,
    their placement and the step's sample all in it) beside ``routing="balanced"`` (every rank
    exactly its share) or beside the popularity or placement it already holds
    (``expert_skew``, ``rebalance``); and a popularity or placement beside balanced routing. A
    new-user trial read ``--routing-imbalance 1.3`` give a load of 1.383 (1.3 x the sample's
    1.064) and ``--routing balanced --expert-skew 0.5`` give 1.353 under 'balanced'."""
    given = {"expert_skew": skew != 0.0, "rebalance": rebalance is not None}
    if routing == "balanced" and imbalance != 1.0:
        raise InvalidArgumentError(
            "routing_imbalance",
            f"{imbalance:g} with routing 'balanced' (--routing balanced), which gives every "
            "expert rank exactly its share (load 1): give routing 'random' (--routing random) "
            "with a measured imbalance, or leave routing_imbalance (--routing-imbalance) out",
        )
    for name, asked in given.items():
        if not asked:
            continue
        flag = "--" + name.replace("_", "-") + (" / --no-rebalance" if name == "rebalance" else "")
        value = f"{skew:g}" if name == "expert_skew" else f"{rebalance}"
        if routing == "balanced":
            raise InvalidArgumentError(
                name,
                f"{value} with routing 'balanced' (--routing balanced), which gives every "
                f"expert rank exactly its share whatever the experts' popularity or placement: "
                f"give routing 'random' (--routing random), or leave {name} ({flag}) out",
            )
        if imbalance != 1.0:
            raise InvalidArgumentError(
                name,
                f"{value} beside routing_imbalance {imbalance:g} (--routing-imbalance), a "
                "measured load of the busiest expert GPU that already holds the experts' "
                f"popularity, their placement and the step's sample: leave {name} ({flag}) "
                "out, or routing_imbalance out to model the load from them",
            )


def refuse_without_ranks(
    ranks: bool, where: str, imbalance: float, skew: float, rebalance: bool | None
) -> None:
    """Refuse a routing argument that loads expert-parallel ranks where there are none
    (``ranks`` False; ``where`` says why, ``ep is 1 (TP8)``), naming it and its flag."""
    if ranks:
        return
    given = {
        "routing_imbalance": (imbalance != 1.0, f"{imbalance:g}", "the busiest expert GPU's load"),
        "expert_skew": (skew != 0.0, f"{skew:g}", "the experts' popularity over expert ranks"),
        "rebalance": (rebalance is not None, f"{rebalance}", "where experts are placed on ranks"),
    }
    for name, (asked, value, what) in given.items():
        if asked:
            flag = (
                "--" + name.replace("_", "-") + (" / --no-rebalance" if name == "rebalance" else "")
            )
            raise InvalidArgumentError(
                name,
                f"{value} sets {what}, but {where}: every GPU holds every "
                f"expert (or a slice of each), so there are no expert ranks to load; give an ep "
                f"above 1 (--ep) or leave {name} ({flag}) out",
            )


def _check_imbalance(m: ModelConfig, imbalance: float) -> None:
    """The busiest expert's load over the mean: at most every token's top-k on one expert,
    ``n_routed_experts / num_experts_per_tok`` (1e300 overflowed the step's arithmetic)."""
    if m.is_moe and m.num_experts_per_tok:
        most = m.n_routed_experts / m.num_experts_per_tok
        if imbalance > most:
            raise InvalidArgumentError(
                "routing_imbalance",
                f"{imbalance:g} is past the most {m.label} allows, {most:g} (every token "
                f"routed to one same expert: {m.n_routed_experts} experts / "
                f"{m.num_experts_per_tok} per token); give the busiest expert's load over the mean",
            )


def _check_sizes(args: dict[str, Any], hw: Any = None) -> tuple[int, int | None, int | None]:
    """The page, context, batch and memory arguments and the request mix's lengths: the
    context each sequence is sized at (``seq_len``, by default :data:`defaults.SEQ_LEN`),
    ``isl`` and ``osl``."""
    # each back in ``args`` as a Python number (a numpy number given is taken as one)
    args["page_size"] = check_int("page_size", args.get("page_size"))
    seq_len = check_int("seq_len", args["seq_len"])
    args["batch"] = check_int("batch", args["batch"])
    check_engine_memory(args, hw)
    reserve = check_number("memory_reserve", args["memory_reserve"], 0.0, 1.0, allow_none=False)
    args["memory_reserve"] = reserve
    isl = check_int("isl", args["isl"])
    osl = check_int("osl", args["osl"])
    if seq_len is not None and isl is not None:
        # a request mix sizes each sequence at isl + osl: a context given beside it would be
        # dropped without a word
        raise InvalidArgumentError(
            "seq_len",
            "does not apply with isl/osl (--isl/--osl): a request's context is isl + osl; "
            "leave seq_len out",
        )
    if seq_len is None:
        seq_len = defaults.SEQ_LEN
    if (isl is None) != (osl is None):
        raise InvalidArgumentError(
            "osl" if osl is None else "isl", "give both isl and osl for serving figures"
        )
    return seq_len, isl, osl


def _check_load(concurrency: Any, request_rate: Any) -> tuple[float | None, float | None]:
    """The requests in flight or their arrival rate (one of them at most)."""
    concurrency = check_number("concurrency", concurrency, 1.0)
    request_rate = arguments.rate("request_rate", request_rate)
    if concurrency is not None and request_rate is not None:
        raise InvalidArgumentError(
            "request_rate", "give either concurrency or request_rate, not both"
        )
    return concurrency, request_rate


def _check_modes(
    args: dict[str, Any], isl: int | None, concurrency: Any, request_rate: Any
) -> int | None:
    """The choices (prefill pass, mode, overlap) and the arguments that apply to one mode
    only; returns ``chunked_prefill`` checked."""
    prefill_pass, mode, overlap = args["prefill_pass"], args["mode"], args["overlap"]
    for name, value, allowed in (
        ("prefill_pass", prefill_pass, PREFILL_PASSES),
        ("mode", mode, SERVING_MODES),
        ("overlap", overlap, OVERLAPS),
    ):
        if value not in allowed:
            raise InvalidArgumentError(name, f"must be one of {', '.join(allowed)}, got {value!r}")
    chunked_prefill = check_int("chunked_prefill", args["chunked_prefill"])
    for name in PREFILL_POOL_ARGUMENTS:
        if args[name] is not None and mode != "disaggregated":
            raise InvalidArgumentError(
                name, "describes the prefill pool of mode='disaggregated' (--mode disaggregated)"
            )
    if chunked_prefill is not None and mode == "disaggregated":
        raise InvalidArgumentError(
            "chunked_prefill", "mixes prompts into decode steps: aggregated mode only"
        )
    if isl is None and (
        concurrency is not None or request_rate is not None or mode != "aggregated"
    ):
        raise InvalidArgumentError("isl", "serving figures need the request mix: give isl and osl")
    # no prompt is run: how prompts and tokens would be handled changes nothing (an engine's
    # chunked_prefill, which plan(**engine_settings(name)) passes, is left to its front end)
    for name, unset in (
        ("output_lag_steps", 0),
        ("prefill_pass", "fused"),
        ("prefix_cache_hit", 0),
    ):
        if isl is None and args[name] != unset:
            raise InvalidArgumentError(
                name, "applies to serving a request mix: give isl and osl (--isl, --osl) with it"
            )
    return chunked_prefill


def _check_engine(
    prefill_pass: str, output_lag_steps: int, mode: str, chunked_prefill: int | None
) -> None:
    """How an aggregated step runs its prompts and hands its tokens out: both describe
    aggregated steps without chunks."""
    if prefill_pass != "fused" and (mode == "disaggregated" or chunked_prefill is not None):
        raise InvalidArgumentError(
            "prefill_pass",
            "describes aggregated steps that run whole prompts: leave it 'fused' with "
            + (
                "mode='disaggregated' (--mode disaggregated)"
                if mode == "disaggregated"
                else "chunked_prefill (--chunked-prefill)"
            ),
        )
    if output_lag_steps and mode == "disaggregated":
        raise InvalidArgumentError(
            "output_lag_steps",
            "applies to aggregated serving: leave it 0 with mode='disaggregated' "
            "(--mode disaggregated)",
        )


def _no_mtp(m: ModelConfig) -> str:
    """Why ``m`` has no MTP module to hold or draft with: layers its Hugging Face class does
    not build, which are not counted, where its notes say so (Step-3.7, Qwen3.5, Nemotron 3,
    MiniMax-M3); else none in its config."""
    if "mtp" in (m.notes or "").lower():
        return (
            "its MTP layers are not counted: its Hugging Face class builds none, as its notes say"
        )
    return "num_nextn_predict_layers is 0: none is counted"


def _check_mtp(
    m: ModelConfig, mtp_tokens: int, mtp_acceptance: Any, length: Any
) -> tuple[float, float, str]:
    """The draft tokens' acceptance rate (0 without drafts or where only a length is given),
    the acceptance length (tokens a step yields per sequence; a published default where
    neither is given, :mod:`mlacalc.serving.speculative`) and its note: drafts need the
    model's MTP module, a rate or length needs drafts."""
    if mtp_tokens and m.compress_ratios:
        raise InvalidArgumentError(
            "mtp_tokens",
            f"{m.label}'s MTP module is not modelled (DeepSeek-V4's is not built by the "
            "transformers reference, so no layer of it is counted or timed); leave mtp_tokens 0",
        )
    if mtp_tokens and not m.num_nextn_predict_layers:
        # the drafts run the model's MTP module (its weights held, its layer timed per draft
        # token): a model without one would get the speed-up at no cost
        raise InvalidArgumentError(
            "mtp_tokens",
            f"{m.label} has no MTP module modelled to draft tokens with ({_no_mtp(m)}); "
            "leave mtp_tokens 0",
        )
    rate = check_number("mtp_acceptance", mtp_acceptance, 0.0, 1.0, closed_hi=True)
    length = check_number("mtp_acceptance_length", length, 1.0)
    tau, note = acceptance_length(m.label, True, mtp_tokens, rate, length)
    return rate or 0.0, tau, note


def _format_warnings(components: dict[str, str], hw: HardwareSpec) -> tuple[str, ...]:
    """A component in a format whose tensor cores the device lacks (nvfp4 experts on H200):
    sized in that format, timed as the dequantizing kernel the device runs instead."""
    out = (
        _weight_only(component, fmt, component == "experts", hw)
        for component, fmt in components.items()
    )
    return tuple(w for w in out if w)


def _stored_format_warnings(
    hw: HardwareSpec,
    stored: dict[str, str],
    components: dict[str, str],
    m: ModelConfig | None = None,
) -> tuple[str, ...]:
    """:func:`_format_warnings` for the checkpoint's own formats (``stored``:
    :func:`_stored_formats`) where no component format is given in their place: an NVFP4
    checkpoint's experts on a Hopper part are timed as the weight-only kernel, as
    ``--expert-dtype nvfp4`` there says (a new-user trial's Kimi-K2.6 NVFP4 on H20 said
    nothing). The experts are compared with the class the checkpoint's experts run where the
    tensor cores hold its format (:func:`stored_experts`): DeepSeek-V4-Pro's MXFP4 experts run
    MXFP4 x MXFP8 (w4a8_mxfp4) on Blackwell, the weight-only w4a16_mxfp4 on H200 (that said
    nothing, where Kimi-K2.6 NVFP4's did)."""
    native = stored_experts(m)[1] if "experts" in stored and m is not None else None
    out = (
        _weight_only(
            f"the checkpoint's {component}",
            fmt,
            component == "experts",
            hw,
            native if component == "experts" else None,
        )
        for component, fmt in stored.items()
        if component not in components
    )
    return tuple(w for w in out if w)


def _stored_formats(m: ModelConfig, weight_dtype: str | None) -> dict[str, str]:
    """Each component's format as the checkpoint stores it, where the weights are sized as
    stored (no ``weight_dtype``; else none)."""
    if weight_dtype is not None or not checkpoint_stored(m):
        return {}
    # read once a model (a sweep of plans asks it each time), each call its own dict; the
    # model kept beside its formats so that its id is not reused while the entry lives
    kept = _STORED.get(id(m))
    if kept is None or kept[0] is not m:
        stored = component_precision(m)
        formats = {c: f for c in stored.weights if (f := stored.format_of(c)) is not None}
        if len(_STORED) >= _STORED_KEPT:
            _STORED.pop(next(iter(_STORED), None), None)
        kept = _STORED[id(m)] = (m, formats)
    return dict(kept[1])


#: :func:`_stored_formats`' memory: id(model) -> (model, formats), its last 64 models
_STORED: dict[int, tuple] = {}
_STORED_KEPT = 64


def _vendor_warnings(hw: HardwareSpec, engine: str, components: dict[str, str]) -> tuple[str, ...]:
    """What an engine or format named for NVIDIA GPUs means on another vendor's (a new-user
    trial's MI355X plans read as TensorRT-LLM's without a word): TensorRT-LLM runs on NVIDIA
    GPUs only, so its kernels' times there are a stand-in; NVFP4 is NVIDIA's fp4 format (an
    fp8 scale a 16 weights), where AMD's fp4 tensor cores take MXFP4 (a power-of-two scale a
    32)."""
    if hw.kind != "gpu" or hw.vendor in ("", "nvidia"):
        return ()
    # deferred: provenance reads the profiles
    from mlacalc.serving.provenance import engine_vendor_warning

    out = [w for w in (engine_vendor_warning(hw, engine),) if w]
    # only where the device has fp4 tensor cores (MI355X; not MI300X or MI325X, whose nvfp4 is
    # timed as the weight-only kernel, said by :func:`_weight_only`: trial12 read both)
    fp4 = lookup_peak(hw.peak_flops_per_s, "fp4") is not None
    for component, fmt in components.items():  # given, or as the checkpoint stores them
        if fp4 and fmt.endswith("nvfp4"):
            out.append(
                f"{component} in {fmt}: NVFP4 is NVIDIA's fp4 format; {hw.name}'s fp4 tensor "
                "cores take MXFP4 (a power-of-two scale a 32 weights), so it is sized in "
                f"{fmt} and timed as fp4 where the device would run MXFP4"
            )
    return tuple(out)


#: The engines whose shipped tables of a device without fp4 tensor cores (H100) time a
#: weight-only MoE over MXFP4 weights, and its kernels (``kernel_source``): TensorRT-LLM's
#: Triton MoE (``moe_torch_flow``, GPT-OSS), SGLang's Triton and Marlin MoE, vLLM's OpenAI
#: Triton MoE (GPT-OSS) and Marlin's (a compressed-tensors W4A4 MXFP4 checkpoint, run weight-only).
#: None of them times an NVFP4 MoE or a weight-only fp4 GEMM there.
HOPPER_MXFP4_MOE = "TensorRT-LLM (Triton), SGLang (Triton, Marlin), vLLM (Triton, Marlin)"


def _weight_only_path(fmt: str, moe: bool, runs: str) -> str:
    """What a format on a device without its tensor cores is timed as, in words (fp8 ones too:
    fp8 / fp8_block weights on A100 run w8a16):
    MXFP4 experts as the weight-only MXFP4 MoE every engine's H100 table times (the kernel the
    engines run instead); NVFP4 experts and fp4 GEMMs as a stand-in, no shipped table showing
    an engine run them there (a trial read "the kernel it runs instead" of NVFP4 experts on
    H200 as a claim that TensorRT-LLM loads an NVFP4 checkpoint on Hopper)."""
    if moe and runs == "w4a16_mxfp4" and format_dtype(fmt) == "fp4" and "mxfp4" in fmt:
        return (
            f"the weight-only MXFP4 MoE the engines run instead ({runs}: the shipped H100 "
            f"tables time it under {HOPPER_MXFP4_MOE})"
        )
    cores = format_dtype(fmt)  # fp4, or fp8 (fp8 / fp8_block weights on A100: w8a16)
    if moe:
        kind = "MXFP4 MoE" if runs == "w4a16_mxfp4" else "MoE"
        nearest = (
            " (the H100 tables time a weight-only MXFP4 MoE only; vLLM's runs a W4A4 MXFP4 "
            "checkpoint on Marlin's, the nearest path)"
            if cores == "fp4"
            else ""
        )
        return (
            f"a stand-in, the weight-only {kind} ({runs}): no shipped table shows an engine "
            f"running {fmt} experts without {cores} tensor cores{nearest}"
        )
    return (
        f"a stand-in, the weight-only GEMM ({runs}): no shipped table shows an engine running "
        f"{fmt} GEMMs without {cores} tensor cores"
    )


def _weight_only(
    what: str, fmt: str, moe: bool, hw: HardwareSpec, native: str | None = None
) -> str:
    """The warning of weights in ``fmt`` (a GEMM's, or ``moe`` the grouped MoE's) on a device
    whose tensor cores lack the format's dtype, timed as the weight-only kernel it runs ("" where
    it has them); ``native``: the class they run where it has them, if not the format's own."""
    runs_as = native or format_class(fmt, moe)
    runs = run_dtype("moe" if moe else "gemm", runs_as, hw)
    if runs == runs_as:
        return ""
    return (
        f"{what} in {fmt}: {hw.name} has no {format_dtype(fmt)} tensor cores, so they are sized "
        f"in {fmt} and timed as {_weight_only_path(fmt, moe, runs)}"
    )


def _kv_warnings(m: ModelConfig, kv: KVLayout, engine: str | None = None) -> tuple[str, ...]:
    """A checkpoint calibrated for an fp8 or NVFP4 KV cache (``kv_cache_quant_algo: FP8`` or
    ``NVFP4``, NVIDIA's ModelOpt exports) planned with a wider one: sized as asked, said (the
    words report and roofline say too: :func:`mlacalc.cost.quant.checkpoint_kv_note`); a
    cache narrower than 8 bits or in integers, timed by the fp8-cache decode kernel as a
    stand-in."""
    note = checkpoint_kv_note(m, kv.name, kv.bits, engine)
    out = (note,) if note else ()
    if kv.bits < 16 and not kv.name.startswith("fp8"):
        out += (
            f"KV cache in {kv.name}: no measured table times a decode kernel over one, so its "
            "decode attention is timed as the fp8-cache kernel (a cache dequantized in the "
            f"kernel) reading its {kv.bits}-bit rows"
            + (f" and their scales (one a {kv.scale_group})" if kv.scale_group else ""),
        )
    return out


def format_warnings(
    m: ModelConfig,
    hw: HardwareSpec,
    engine: str,
    kv_name: str,
    weight_dtype: str | None = None,
    components: dict[str, str] | None = None,
) -> tuple[str, ...]:
    """What a plan says of a deployment's formats: its KV cache (a narrow one's stand-in
    kernel, one the engine does not offer: :func:`engine_runs_kv`), a weight dtype chosen
    (``None``: as stored) its device has no tensor cores for, and each component's format
    (``search`` says these of the points it reports, as plan of each says them)."""
    kv = resolve_kv_layout(kv_name)
    out = _kv_warnings(m, kv, engine) + _engine_kv_warnings(m, kv, engine, hw)
    if weight_dtype is not None:  # the dtype's own words (fp4's scales, fp8 per tensor, ...)
        said = _request_warnings(m, hw, weight_dtype, False)
        out += tuple(w for w in said if w.startswith("weights in "))
    return out + _format_warnings(dict(components or {}), hw)


def engine_runs_kv(
    m: ModelConfig, kv_name: str, engine: str, hw: HardwareSpec | None = None
) -> bool:
    """Whether ``engine`` offers ``kv_name``'s cache for ``m``'s attention (on ``hw``, where
    given; from recall of its docs, :data:`_ENGINE_KV`; a format it does not offer is sized
    and timed, and said)."""
    return not _engine_kv_warnings(m, resolve_kv_layout(kv_name), engine, hw)


def kv_head_copies(m: ModelConfig, lay: Layout, p_lay: Layout | None) -> tuple[str, ...]:
    """Fewer K/V heads than the attention's tensor-parallel degree: each rank keeps a copy of
    one head (``ceil(n_kv / tp)``), so the cache per GPU is what ``tp`` heads would give, said
    (convert's view says it; plan gave the same figure for 2 heads as for 8 at TP8 silently)."""
    n_kv = m.num_key_value_heads
    if m.is_mla or not n_kv or m.compress_ratios:  # one latent by design (MLA, DeepSeek-V4)
        return ()
    tps = sorted({la.tp for la in (lay, p_lay) if la is not None and la.tp > n_kv})
    if not tps:
        return ()
    pools = " and ".join(f"TP{t}" for t in tps)
    return (
        f"{m.label} has {n_kv} KV head{'s' * (n_kv > 1)}, fewer than the tensor-parallel degree "
        f"({pools}): each head is copied onto {tps[0] // n_kv}"
        + "".join(f"/{t // n_kv}" for t in tps[1:])
        + " GPUs and every GPU caches one head, the bytes per GPU that "
        f"{tps[0]} KV heads would give (KV heads fewer than tp save no cache memory per GPU"
        + ("; DP-attention splits the attention by sequences instead" if m.is_moe else "")
        + ")",
    )


#: A cache figure of one layout: bytes a token adds on a GPU, KV tokens a GPU holds, and the
#: largest batch (every attention group's sequences) the cache holds at the context
CacheFigures = tuple[int, int, int]

#: DP-attention in each engine's words (launch lines' options; from recall of their docs,
#: not checked against a stored copy). vLLM's is its data parallelism of the attention; its
#: MoE layers then run over the DP x TP ranks, split by tensor parallelism, or by experts
#: with --enable-expert-parallel (:func:`_dp_attention_flags`)
DP_ATTENTION_FLAGS = (
    "SGLang's --enable-dp-attention, TensorRT-LLM's enable_attention_dp, vLLM's "
    "--data-parallel-size"
)


def _dp_attention_flags(ep: int) -> str:
    """:data:`DP_ATTENTION_FLAGS` with the words of vLLM's flags that give a layout of ``ep``
    expert-parallel ranks (1: its MoE split by tensor parallelism over the DP x TP ranks,
    the layout whose figures are printed; recalled, as the flags are)."""
    moe = (
        "with --enable-expert-parallel (its experts over the DP x TP ranks)"
        if ep > 1
        else "(its MoE split by tensor parallelism over the DP x TP ranks)"
    )
    return f"{DP_ATTENTION_FLAGS} {moe}"


def trtllm_attention_tp(engine: str, lay: Layout, p_lay: Layout | None) -> tuple[str, ...]:
    """Under TensorRT-LLM, a DP-attention layout whose attention groups span ``tp > 1`` GPUs:
    its ``enable_attention_dp`` runs attention on one GPU per group (attention TP1 over
    ``--tp_size`` ranks, from recall), so its launch starts TP1 DP-attention over every GPU,
    not the layout timed (a trial's TP1, TP2 and TP4 DP-attention plans of DeepSeek-V3 on 16
    H200 printed one launch command between them: 186.89, 136.49, 116.53 ms TPOT)."""
    if engine != "trtllm":
        return ()
    out = []
    for pool, la in (("", lay), ("the prefill pool's ", p_lay)):
        if la is None or not attention_groups_over_gpus(la):
            continue
        out.append(
            f"{pool}TP{la.tp} DP-attention{la.dp} is timed as SGLang (--tp {la.tp * la.dp} "
            f"--dp {la.dp} --enable-dp-attention) and vLLM (--tensor-parallel-size {la.tp} "
            f"--data-parallel-size {la.dp}) run it; TensorRT-LLM's enable_attention_dp runs "
            "attention on one GPU per group (from recall), so its launch starts "
            f"TP1 DP-attention{la.tp * la.dp}: time that with --tp 1 --dp-attention, or name "
            "--engine sglang or vllm"
        )
    return tuple(out)


def indexer_words(m: ModelConfig) -> str:
    """A DSA model's indexer named with what it does, as plan's and search's warnings of it
    under tensor parallelism say it."""
    return (
        f"{m.label}'s DSA indexer (its q / k / weights projections, scores over every cached "
        f"key and top-{m.index_topk:,})"
    )


def indexer_copies(m: ModelConfig, lay: Layout, p_lay: Layout | None) -> tuple[str, ...]:
    """A DSA model's attention split over ``tp > 1`` ranks: each layer's indexer (its
    projections, scores over every cached key and top-k) is whole on every rank, not split by
    heads; said of a search's best point, as plan says it with its share of the step
    (:func:`mlacalc.serving.plan.indexer_tp_warnings`; a review: the search chose TP8 for
    DeepSeek-V3.2 and said only that its latent was copied)."""
    if m.index_topk is None or m.every_indexer_shared:
        return ()
    out = []
    for pool, la in (("", lay), ("the prefill pool's ", p_lay)):
        if la is None or la.tp <= 1:
            continue
        out.append(
            f"{pool}TP{la.tp}: {indexer_words(m)} is whole on every "
            "tensor-parallel rank, not split by heads as the attention is (plan of the point "
            "says its share of the step); DP-attention (--tp 1 --dp-attention) runs it on each "
            "GPU's own sequences only"
        )
    return tuple(out)


def latent_copies(
    m: ModelConfig,
    lay: Layout,
    p_lay: Layout | None,
    figures_of: Any,
) -> tuple[str, ...]:
    """An MLA model's attention split over ``tp > 1`` ranks: its latent and rope key are one
    head for every query head, so each rank caches all of it (the cache per GPU is one GPU's
    alone), said with what that costs here against DP-attention's split by sequences (a
    model architect's trial: 46,080 B a token on each of 8 H200 at TP8, 2.25x the GQA-8
    design's, TPOT 21.0 against 15.6 ms, and no word, where GQA with 4 KV heads at TP8 got
    one). ``figures_of(layout)``: its :data:`CacheFigures`, plan's capacity or search's."""
    if not m.is_mla or lay.tp <= 1:
        return ()
    per_token, tokens, batch = figures_of(lay)
    rope = f" and {m.qk_rope_head_dim}-wide rope key" if m.qk_rope_head_dim else ""
    every = f"{tokens * lay.dp:,} in all, largest batch {batch:,}"
    words = (
        f"{m.label}'s MLA cache (its {m.kv_lora_rank}-wide latent{rope}) is one head for every "
        f"query head, copied on every tensor-parallel rank (TP{lay.tp}): each GPU caches all "
        f"of it, {per_token:,} B a token, and holds {tokens:,} KV tokens, the same ones as the "
        f"other {counted(lay.tp - 1, 'rank')} of its group ({every})"
    )
    if p_lay is not None and p_lay.tp > 1:
        words += f"; the prefill pool's TP{p_lay.tp} copies it likewise"
    if not m.is_moe:  # the engines run DP-attention for MoE models only (recalled)
        return (
            words + "; the engines run DP-attention only with MoE layers (recalled from their "
            "docs): fewer tensor-parallel ranks (dp replicas where the weights fit) cache more "
            "sequences",
        )
    try:
        alt = make_layout(
            m, lay.gpus, pp=lay.pp, ep=lay.ep, dp_attention=True,
            redundant_experts=lay.redundant_experts,
        )  # fmt: skip
    except InvalidArgumentError:
        alt = None
    if alt is None:
        return (words + "; DP-attention (--dp-attention) splits the attention by sequences",)
    a_token, a_tokens, a_batch = figures_of(alt)
    if a_batch >= 1:
        held = (
            f"each GPU caches its own sequences' {a_token:,} B a token: {a_tokens:,} KV tokens "
            f"a GPU, {a_tokens * alt.dp:,} in all, largest batch {a_batch:,}"
        )
    elif a_tokens >= 1:  # room for a cache, not for one sequence of the context (trial r29)
        held = (
            f"but one sequence is whole on one GPU there too ({a_token:,} B a token), and the "
            f"{a_tokens:,} KV tokens a GPU has room for hold no sequence of this context"
        )
    else:  # the weights a GPU holds leave no cache at all
        held = "but the weights each GPU holds under it leave no room for a KV cache" + (
            f", as under TP{lay.tp}" if tokens < 1 else ""
        )
    return (
        words + f"; DP-attention splits the attention by sequences instead ({alt.describe()}: "
        f"--tp 1 --dp-attention; {_dp_attention_flags(alt.ep)}): {held}",
    )


#: the KV cache formats below 16 bits each engine offers, from recall of its docs and flags
#: (not checked against a stored copy): vLLM's --kv-cache-dtype (fp8, fp8_e4m3, fp8_e5m2),
#: SGLang's (fp8_e4m3, fp8_e5m2, fp4_e2m1), TensorRT-LLM's kv_cache_quant_algo (FP8, INT8,
#: NVFP4; its MLA kernels read FP8 only); ``fp8`` is each one's fp8 name, and ``fp8_ds_mla``
#: (FlashMLA's sparse layout, which each takes for a DSA model's fp8 cache) is offered to DSA
#: models only
_ENGINE_KV = {
    "vllm": ("fp8", "fp8_e4m3", "fp8_e5m2", "fp8_ds_mla"),
    "sglang": ("fp8", "fp8_e4m3", "fp8_e5m2", "fp8_ds_mla", "fp4"),
    "trtllm": ("fp8", "fp8_e4m3", "int8", "nvfp4", "fp8_ds_mla"),
}
_ENGINE_KV_MLA = {"trtllm": ("fp8", "fp8_e4m3", "fp8_ds_mla")}


#: the fp8 layout each engine stores a DSA model's latent cache in, whichever fp8 is asked,
#: then the other names of it (from recall, as
#: :data:`~mlacalc.serving.precision.DSA_FP8_LAYOUT_ENGINES` says): vLLM's
#: DeepSeek-V3.2 hook turns every ``--kv-cache-dtype fp8*`` into ``fp8_ds_mla``, the only fp8
#: its FlashMLA-sparse path reads; TensorRT-LLM's MLA cache holds plain fp8 (one scale per
#: tensor), never FlashMLA's layout
_DSA_FP8_STORED = {"vllm": ("fp8_ds_mla", "fp8"), "trtllm": ("fp8", "fp8_e4m3")}


def _dsa_fp8_warning(m: ModelConfig, kv: KVLayout, engine: str) -> tuple[str, ...]:
    """An fp8 cache of a DSA model in a layout the engine does not store it in (trial round
    29: ``fp8_e5m2`` under vLLM and ``fp8_ds_mla`` under TensorRT-LLM were sized with no
    word): sized as asked, and the layout the engine stores named with its bytes."""
    names = _DSA_FP8_STORED.get(engine, ())
    if not names or kv.name in names or not kv.name.startswith("fp8"):
        return ()
    stored = names[0]
    rank, rope = m.kv_lora_rank or 0, m.qk_rope_head_dim or 0
    asked, kept = (resolve_kv_layout(x).row_bytes(rank, rope) for x in (kv.name, stored))
    what = "plain fp8 (e4m3, one scale per tensor)" if stored == "fp8" else stored
    return (
        f"--kv-dtype {kv.name} under --engine {engine}: {ENGINE_LABELS.get(engine, engine)} "
        f"stores {m.label}'s (DSA) fp8 latent cache as {what}, {kept:,} B a layer's latent "
        f"row (from recall of its code), not {kv.name} ({asked:,} B): the figures are for a "
        f"cache it does not store; --kv-dtype {stored} counts the one it does",
    )


#: the KV cache formats an engine offers only on a device with the named tensor cores (from
#: recall of its docs' support matrix, as :data:`_ENGINE_KV`): TensorRT-LLM's NVFP4 cache is
#: Blackwell's (a trial's H200 plan of an nvfp4 cache under TensorRT-LLM said nothing), its FP8
#: cache Ada's, Hopper's and Blackwell's (Ampere: INT8 only; an A100 plan of an fp8 cache said
#: nothing and an nvfp4 one named fp8 among the formats there)
_ENGINE_KV_CORES = {
    "trtllm": {"nvfp4": "fp4", "fp8": "fp8", "fp8_e4m3": "fp8", "fp8_ds_mla": "fp8"},
}
#: the devices that hold each kind of tensor cores, in a warning's words
_CORES_WORDS = {"fp4": "Blackwell", "fp8": "Ada, Hopper or Blackwell"}


def _one_of(formats: list[str]) -> str:
    """``"one of those, or "`` / ``"int8, or "`` / nothing: the formats a warning offers."""
    if not formats:
        return ""
    return ("one of those" if len(formats) > 1 else formats[0]) + ", or "


def _engine_kv_warnings(
    m: ModelConfig, kv: KVLayout, engine: str, hw: HardwareSpec | None = None
) -> tuple[str, ...]:
    """A KV cache format the engine named does not offer (for this attention, or on ``hw``:
    :data:`_ENGINE_KV_CORES`): sized and timed as asked, but said, naming both options
    (int4 under vLLM, fp4/nvfp4 under TensorRT-LLM for MLA were taken with a timing caveat
    only); a DSA model's fp8 in a layout the engine does not store (:func:`_dsa_fp8_warning`)."""
    if kv.bits >= 16 or engine not in _ENGINE_KV:
        return ()
    if m.index_topk and m.is_mla:
        said = _dsa_fp8_warning(m, kv, engine)
        if said:
            return said
    mla = m.is_mla and engine in _ENGINE_KV_MLA
    offered = _ENGINE_KV_MLA[engine] if mla else _ENGINE_KV[engine]
    if not m.index_topk:  # FlashMLA's sparse layout is for DSA models only
        if kv.name == "fp8_ds_mla":
            return ()  # said once, by the layout's own DSA-only warning
        offered = tuple(f for f in offered if f != "fp8_ds_mla")
    needs = _ENGINE_KV_CORES.get(engine, {})
    lacks = (
        set() if hw is None else {f for f, c in needs.items() if c not in hw.peak_flops_per_s}
    )  # the formats the engine offers but does not run on this device
    if kv.name in offered and kv.name in lacks:
        core = needs[kv.name]
        runs = [f for f in offered if f not in lacks]
        there = f"there: {', '.join(runs)}" if runs else "none there"
        return (
            f"--kv-dtype {kv.name} under --engine {engine}: {ENGINE_LABELS.get(engine, engine)}"
            f"'s {kv.name} KV cache needs {core} tensor cores ({_CORES_WORDS[core]}), which "
            f"{hw.name} has not (from recall of its docs; {there}); the figures are for a cache "
            f"it cannot run on this device: use {_one_of(runs)}a device with {core} tensor cores",
        )
    if kv.name in offered:
        return ()
    offered = tuple(f for f in offered if f not in lacks)  # the formats it runs on this device
    return (
        f"--kv-dtype {kv.name} under --engine {engine}: {ENGINE_LABELS.get(engine, engine)} "
        f"offers no {kv.name} KV cache{' for MLA' if mla else ''} (its formats below 16 bits: "
        f"{', '.join(offered)}; from recall of its docs); the figures are for a cache it "
        "cannot run: use one of those, or another --engine",
    )


def _dispatch_warnings(
    m: ModelConfig, lay: Layout, weight_dtype: str | None, components: dict
) -> tuple[str, ...]:
    """The EP dispatch's format where no reference backs it: the step model sends fp8 (one
    float32 scale per 128, DeepEP's low-latency setting in its README's DeepSeek-V3 rows,
    shared reference serving-figures.md) for fp8 weights and bf16 otherwise, so 4-bit experts
    (an NVFP4 checkpoint, ``--expert-dtype nvfp4``) dispatch bf16; what the engines send with
    them is in no shared reference, so the plan says which format it assumed."""
    if lay.ep <= 1 or not m.num_moe_layers:
        return ()
    w = canonical_dtype(weight_dtype or m.weights_dtype)
    if w.startswith("fp8"):
        return ()
    experts = components.get("experts")
    if experts is None:
        stored = weight_dtype is None and checkpoint_stored(m)
        experts = stored_experts(m)[1] if stored else w
    if "fp4" not in experts:
        return ()
    return (
        f"EP dispatch sized in bf16 (2 B a value) beside 4-bit experts ({experts}): no shared "
        "reference says what an engine sends with them (DeepEP's low-latency dispatch sends "
        "fp8 in its published DeepSeek-V3 rows, 0.52x the bytes; TensorRT-LLM's wide-EP "
        "quantizing to nvfp4 before the exchange, 0.28x, is recall)",
    )


#: The component choice that runs a checkpoint's own MXFP4 experts under MXFP8 activations
OWN_W4A8 = (("experts", "mxfp4_mxfp8"),)


def own_block_scaled(m: ModelConfig, hw: HardwareSpec, profile: Any) -> bool:
    """Whether a search tries the checkpoint's own MXFP4 experts run under the device's
    block-scaled activations (:data:`OWN_W4A8`, ``experts: mxfp4_mxfp8``: the ``w4a8_mxfp4``
    MoE over the same bytes, no re-quantization): where the checkpoint stores its routed
    experts in MXFP4 (GPT-OSS), the device has fp4 tensor cores of data-centre Blackwell
    (``tcgen05``) and the engine's profile holds that MoE class. The shipped B200 tables time
    it for all three engines (``w4a8_mxfp4_mxfp8`` rows: TensorRT-LLM 5,346, ``moe_torch_flow``;
    SGLang 14,013, FlashInfer's TensorRT-LLM MoE; vLLM 2,187, FlashInfer's TensorRT-LLM MXFP4 x
    MXFP8 experts). A trial's gpt-oss-120b search on B200 weighed only the weight-only
    ``w4a16_mxfp4`` MoE against a re-quantized fp8 and chose fp8. A plan's default stays the
    weight-only kernel (docs/serving.md, "GPT-OSS's MXFP4 experts on Blackwell")."""
    if not m.num_moe_layers or not checkpoint_stored(m):
        return False
    if stored_experts(m)[1] != "w4a16_mxfp4" or "fp4" not in hw.peak_flops_per_s:
        return False
    if device_figures(hw).kernel_generation != "tcgen05":
        return False
    return "moe:w4a8_mxfp4" in load_profile(profile).classes


def with_own_w4a8(
    m: ModelConfig, hw: HardwareSpec, profile: Any, components: tuple[tuple, ...]
) -> tuple[tuple, ...]:
    """A search's component choices with :data:`OWN_W4A8` added where
    :func:`own_block_scaled` says (the checkpoint's bytes, the device's MXFP8 activations)."""
    if OWN_W4A8 in components or not own_block_scaled(m, hw, profile):
        return components
    return (*components, OWN_W4A8)


def requantized_words(m: ModelConfig, weight_dtype: str | None, components: dict) -> str:
    """What a searched point whose weights are not a quantized checkpoint's own format says:
    that it re-quantizes the checkpoint (a trial's gpt-oss-120b search on B200 chose per-tensor
    fp8 for an MXFP4 release and did not say so); "" for the checkpoint's own bytes (its MXFP4
    experts run as ``mxfp4_mxfp8`` included) or a model sized from no quantized checkpoint."""
    if m.quantization is None or not checkpoint_stored(m):
        return ""
    # a dense checkpoint has no routed experts to keep (Gemma-4-31B NVFP4 raised a KeyError)
    stored = "mxfp4" if m.is_moe and stored_experts(m)[1] == "w4a16_mxfp4" else None
    own = ("mxfp4", "mxfp4_mxfp8") if stored else ()
    changed = {c: f for c, f in components.items() if not (c == "experts" and f in own)}
    if weight_dtype is None and not changed:
        return ""
    asked = ", ".join(
        ([f"weights {weight_dtype}"] if weight_dtype else [])
        + [f"{c} {f}" for c, f in sorted(changed.items())]
    )
    kept = [f"experts {f} (the checkpoint's own bytes)" for c, f in components.items()
            if c == "experts" and f in own]  # fmt: skip
    return (
        f"re-quantizes {m.label}'s checkpoint ({m.quantization.describe()}) to {asked}"
        + (f", {kept[0]}" if kept else "")
        + ": served from a checkpoint quantized so, not the released one"
    )


def _engine_kernel_warnings(
    m: ModelConfig,
    hw: HardwareSpec,
    engine: str,
    weight_dtype: str | None,
    components: dict,
    moe_backend: str | None = None,
) -> tuple[str, ...]:
    """A measured kernel of the engine far slower than another it runs for the same weights:
    MXFP4 experts (GPT-OSS's checkpoint, or ``--expert-dtype mxfp4``) under TensorRT-LLM on
    Blackwell run its measured weight-only MXFP4 MoE (``w4a16_mxfp4``: B200, 128 experts,
    top-4, 2,880 x 2,880, 0.89 ms at 64 tokens, 2.0 ms at 1,024), where its MXFP4 x MXFP8 MoE
    (``w4a8_mxfp4``) takes 0.21 and 0.39 ms (3-7x less from 1 to 4,096 tokens); SGLang's and
    vLLM's B200 weight-only MXFP4 MoE is FlashInfer's, 0.38 and 0.68 ms. NVFP4 experts timed
    as its CUTLASS MoE (``moe_backend`` None or ``"cutlass"``) are said with the option that
    times TensorRT-LLM-gen's (``moe_backend="trtllm-gen"``, which says nothing)."""
    if engine != "trtllm" or not m.num_moe_layers:
        return ()
    if "experts" in components:
        experts = components["experts"]
    elif weight_dtype is not None:
        experts = weight_dtype
    else:
        experts = stored_experts(m)[1] if checkpoint_stored(m) else "bf16"
    if device_figures(hw).kernel_generation != "tcgen05":
        return ()
    if experts in ("mxfp4", "w4a16_mxfp4"):
        return (
            f"{m.label}'s MXFP4 experts run TensorRT-LLM's measured weight-only MXFP4 MoE "
            f"(w4a16_mxfp4), which on Blackwell takes 3-7x its MXFP4 x MXFP8 MoE (w4a8_mxfp4) "
            "over the same bytes; kept as the default, as no shipped source says which of the "
            "two TensorRT-LLM serves the checkpoint with (docs/serving.md, 'GPT-OSS's MXFP4 "
            "experts on Blackwell'); the planner's 'routed experts' weights' box set to "
            "mxfp4_mxfp8, or --expert-dtype mxfp4_mxfp8 (component_dtypes={'experts': "
            "'mxfp4_mxfp8'}), times that one, and search tries it",
        )
    if experts in ("fp4", "nvfp4") and moe_backend != "trtllm-gen":
        which = (
            "its CUTLASS MoE backend as asked (--moe-backend cutlass)"
            if moe_backend == "cutlass"
            else "its default MoE backend (moe_config backend CUTLASS)"
        )
        return (
            f"{m.label}'s NVFP4 experts are timed as TensorRT-LLM's CUTLASS NVFP4 MoE, the "
            f"kernel of {which}; its TensorRT-LLM-gen "
            "MoE (backend TRTLLM) takes 0.47-0.72x that time in the shipped B200 table (the "
            "median by token count over 36,045 calls timed both ways, 1-16,384 tokens): "
            "--moe-backend trtllm-gen (moe_backend='trtllm-gen') times it",
        )
    return ()


def _block_sparse_warnings(m: ModelConfig, engine: str) -> tuple[str, ...]:
    """What times a block-sparse (msa) layer's attention core (MiniMax-M3): the engine's plain
    attention fit over the keys each query chooses (``cost.block_sparse.block_sparse_core``:
    a paged decode over ``T x B`` keys, a band of that width in a prompt), a stand-in under
    every engine. Only vLLM's msa module tables time the block-sparse kernels (its
    ``attention_decode:*:msa`` classes, fitted on those rows' residuals), and a plan's step
    does not run them; SGLang and TensorRT-LLM have no such table."""
    if not m.sparse_attention_layers or not m.sparse_block_size or not m.sparse_topk_blocks:
        return ()
    keys = m.sparse_topk_blocks * m.sparse_block_size
    label = ENGINE_LABELS.get(engine, engine)
    why = (
        "vLLM's msa module tables time its block-sparse kernels (the attention_decode:*:msa "
        "classes, fitted on those rows), which a plan's step does not run"
        if engine == "vllm"
        else f"no {label} table times a block-sparse kernel (only vLLM's msa module tables do)"
    )
    return (
        f"{m.label}'s block-sparse (msa) attention is timed as {label}'s plain attention over "
        f"the {m.sparse_topk_blocks} x {m.sparse_block_size} = {keys:,} keys each query "
        f"chooses (a paged decode; a band of that width in a prompt), by its attention "
        f"fit, standing in for the block-sparse kernel: {why}",
    )


def _kept_words(kept: list[KeptPart]) -> str:
    """What a chosen dtype leaves at its own bits (:func:`mlacalc.cost.params.kept_parts`),
    the parts of one width together: " (keeping the norms and MoE routers, the embedding and
    the output head at 16 bits)" ("" where it leaves nothing)."""
    by_bits: dict[float, list[str]] = {}
    for k in kept:
        by_bits.setdefault(k.bits, []).append(f"the {k.what}")
    groups = []
    for bits, parts in by_bits.items():
        said = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
        groups.append(f"{said} at {bits:g} bits")
    return f" (keeping {', '.join(groups)})" if groups else ""


def _request_warnings(
    m: ModelConfig, hw: HardwareSpec, weight_dtype: str | None, include_mtp: bool
) -> tuple[str, ...]:
    """What the request leaves to a reading worth saying: the device alias, weights whose
    quantization config.json does not give, MTP weights asked of a model without them."""
    warnings: list[str] = [f"hardware {hw.alias_note}"] if hw.alias_note else []
    if mla_geometry_note(m):  # an MLA latent rank or head widths no measured kernel has
        warnings.append(mla_geometry_note(m))
    # a ModelOpt export: its stored bytes are not in config.json
    if weight_dtype is None and external_quantization(m):
        warnings.append(
            f"weights sized as {m.weights_dtype}: {m.label}'s checkpoint keeps its "
            "quantization in a separate hf_quant_config.json (NVIDIA ModelOpt export), "
            "which config.json does not give; give weight_dtype (--weight-dtype fp4 for "
            "NVFP4) to size it"
        )
    if weight_dtype is not None:
        chosen = canonical_dtype(weight_dtype)
        if chosen == "fp4":  # a plain dtype: no scales; what it leaves is kept_parts'
            warnings.append(
                "weights in fp4 are sized as the layers' linear weights at 4 bits, no block "
                f"scales{_kept_words(kept_parts(m, chosen, include_mtp))}: an NVFP4 checkpoint "
                "stores 4.5 bits a weight (an fp8 scale a 16), which formats per component "
                "size (--expert-dtype nvfp4 --attention-dtype nvfp4 --dense-ffn-dtype nvfp4; "
                "component_dtypes)"
            )
        scheme = m.quantization
        if chosen.startswith("fp8") and scheme is not None and scheme.method == "fp8":
            # the dtype names no scales: per-tensor fp8, where the checkpoint has blocks
            warnings.append(
                f"weights in {chosen} are timed as per-tensor fp8 GEMMs and MoE (one scale a "
                f"tensor); {m.label}'s checkpoint is {scheme.describe()}, which leaving "
                "weight_dtype out (no --weight-dtype) times as stored"
            )
        said = _weight_only("weights", chosen, False, hw)
        warnings += [said] if said else []
    if include_mtp and m.compress_ratios:
        warnings.append(f"{m.label}'s MTP module is not modelled: include_mtp holds nothing more")
    elif include_mtp and not m.num_nextn_predict_layers:
        warnings.append(
            f"{m.label} has no MTP module modelled ({_no_mtp(m)}): include_mtp holds nothing more"
        )
    return tuple(warnings)


def _sglang_chunks(
    m: ModelConfig,
    engine: str,
    chunk: int | None,
    isl: int | None,
    hit: float,
    page_size: int,
    shared: int = 0,
) -> tuple[str, ...]:
    """SGLang's MLA chunks after a short prefix (the first chunk after a cached prefix, or a
    chunked prompt's second): priced expanded where SGLang runs them absorbed, said
    (:func:`~mlacalc.timemodel.mla_time.sglang_chunk_note`)."""
    if not isl:
        return ()
    cached = prefix_cached_tokens(hit, isl, page_size, shared)
    first = cached or (chunk if chunk and chunk < isl else 0)
    note = sglang_chunk_note(m, engine, first)
    return (note,) if note else ()


def _recurrent_prefix(
    m: ModelConfig, isl: int | None, hit: float, page: int, shared: int = 0
) -> tuple[str, ...]:
    """A prefix hit on a model with linear-attention or Mamba layers (review10 F8): the plan
    takes the cached tokens in every layer, but those layers' caches are one state a sequence
    that an engine snapshots only at some boundaries, and the snapshots' memory is not counted:
    said where some token is found cached."""
    cached = prefix_cached_tokens(hit, isl, page, shared) if isl else 0
    layers = layer_pattern(m).layers
    alone = [k.attention for k in layers if k.attention in STATE_KINDS]
    beside = sum(k.mamba and k.attention not in STATE_KINDS for k in layers)
    if not cached or not (alone or beside):
        return ()
    said = []
    if alone:  # the layer's only cache: its state
        kinds = sorted({"a linear-attention" if a == "linear" else "a Mamba" for a in alone})
        said.append(
            f"{len(alone)} of {len(layers)} layers keep {' or '.join(kinds)} state, "
            "not every token's keys"
        )
    if beside:  # a parallel hybrid (Falcon-H1): attention's keys and a Mamba mixer's state
        said.append(
            f"{beside} of {len(layers)} layers keep a Mamba state beside their attention's keys"
        )
    return (
        f"{m.label}'s {' and '.join(said)}: the plan takes the {cached:,} cached tokens of "
        "each prompt as found in those layers' states too, but engines keep such a state only "
        "at some boundaries "
        "(from recall, not checked against a release: vLLM's hybrid prefix caching saves it "
        "at the edges of its enlarged attention blocks, SGLang's Mamba radix cache at cached "
        "radix nodes, TensorRT-LLM reuses no blocks for such models in most releases), so a "
        "hit may recompute more than the plan says; the memory of the cached states (each such "
        "layer's state, a snapshot per cached prefix) is not counted in the KV memory",
    )


def _split_experts(m: ModelConfig, p_lay: Layout | None, args: dict[str, Any]) -> tuple[str, ...]:
    """A prefill pool whose MoE group is wider than its expert-parallel degree: each expert
    split over ``moe_tp`` GPUs, said (a new-user trial: 4,096 prefill GPUs at prefill ep 32
    built 'EP32 MoE-TP128' without a word, one 2,000-token prompt 9.1 s)."""
    if p_lay is None or p_lay.ep <= 1 or p_lay.moe_tp <= 1:
        return ()
    given = args.get("prefill_ep") is not None
    src = (
        "prefill_ep (--prefill-ep)" if given else "the decode pool's, as --prefill-ep is not given"
    )
    return (
        f"the prefill pool's {p_lay.moe_group:,} GPUs share each MoE layer's experts over ep "
        f"{p_lay.ep} ({src}): each expert is split {p_lay.moe_tp} ways (MoE-TP{p_lay.moe_tp}) "
        f"rather than held whole; give a larger --prefill-ep (it divides the pool's GPUs and the "
        f"{m.n_routed_experts} + redundant expert slots) or fewer --prefill-gpus",
    )


def _prefill_dp_attention(lay: Layout, args: dict[str, Any]) -> bool | None:
    """The prefill pool's DP-attention as asked: ``prefill_dp_attention``, else the decode
    pool's (None: inherited) where it was asked; DP-attention the decode pool's ep made
    (:func:`make_layout`) is not inherited (False): the pool's own ep makes its own."""
    asked = args["prefill_dp_attention"]
    if asked is None and lay.dp_attention and not args["dp_attention"]:
        return False
    return asked


def _implied_dp_attention(
    lay: Layout, p_lay: Layout | None, args: dict[str, Any]
) -> tuple[str, ...]:
    """A pool whose ``ep`` above its ``tp`` made it DP-attention (:func:`make_layout`) where
    DP-attention was not asked: said, so that what is timed, reported and launched is read as
    one layout (a new-user trial: SGLang ``--tp 1 --dp 8 --ep 8`` timed as DP-attention, JSON
    ``dp_attention`` false, launched without ``--enable-dp-attention``)."""
    out = []
    # the prefill pool's None: the decode pool's DP-attention, asked, inherited
    asked = {"": bool(args.get("dp_attention")), "prefill": _prefill_dp_attention(lay, args)}
    for pool, layout in (("", lay), ("prefill", p_lay)):
        if layout is None or not layout.dp_attention or asked[pool] is not False:
            continue
        flag = "--prefill-dp-attention" if pool else "--dp-attention"
        whose = "the prefill pool's ep" if pool else "ep"
        its = "its tp" if pool else "tp"
        out.append(
            f"{whose} {layout.ep} is above {its} {layout.tp}: each MoE layer's experts are "
            f"shared by {layout.dp} attention groups, which is DP-attention ({flag}), so it is "
            f"timed, reported (dp_attention true, {layout.describe()}) and launched as such "
            "(SGLang --enable-dp-attention, TensorRT-LLM enable_attention_dp); for "
            f"{layout.dp} independent replicas give an ep at most tp"
        )
    return tuple(out)


def _lowered_prefill_ep(
    m: ModelConfig, lay: Layout, p_lay: Layout | None, args: dict[str, Any]
) -> tuple[str, ...]:
    """A prefill pool's expert-parallel degree derived below the decode pool's (no
    ``prefill_ep`` given: :func:`largest_ep`): said, with why and how to set it, since only the
    layout row showed it (DeepSeek-V3 decode ep 32 on 16 prefill GPUs ran the pool at ep 16)."""
    if p_lay is None or args["prefill_ep"] is not None or p_lay.ep >= lay.ep:
        return ()
    slots = m.n_routed_experts + p_lay.redundant_experts
    return (
        f"the prefill pool runs at ep {p_lay.ep}, not the decode pool's {lay.ep}: the largest "
        f"expert-parallel degree up to it that divides the pool's {p_lay.gpus} GPUs and its "
        f"{slots} expert slots (prefill_ep not given); set it with --prefill-ep (prefill_ep)",
    )


def decode_layout(m: ModelConfig, gpus: int, args: dict[str, Any]) -> Layout:
    """The decode pool's layout (``args``: plan's ``tp``, ``dp``, ``pp``, ``ep``,
    ``dp_attention``, ``redundant_experts``). A tensor-parallel degree that was not given
    follows from the GPUs (and dp, pp), so its error names what was given."""
    tp, dp, pp = args["tp"], args["dp"], args["pp"]
    try:
        lay = make_layout(
            m, gpus, tp, dp, pp, args["ep"], args["dp_attention"], args["redundant_experts"]
        )
    except InvalidArgumentError as exc:
        if exc.argument == "ep" and "redundant experts" in exc.message:
            raise _redundant_hint(m, exc, args["ep"], args["redundant_experts"]) from None
        if exc.argument != "tp" or tp is not None:
            raise
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
    if args["dp_attention"] and lay.tp > 1 and lay.dp == 1:
        raise _one_decode_group_error(lay, gpus)
    return lay


def _check_tp_network(hw: Any, lay: Layout, given: bool) -> None:
    """Refuse a tensor-parallel group wider than one scale-up domain of a device whose file gives
    no scale-out network to time its all-reduces by, naming the fix: a ``tp`` within a domain
    (the other GPUs then run dp replicas), or ``search``. With no ``tp`` given it is every GPU of
    a stage (docs/serving.md, "Layouts"): 16 L40S came to TP16 across two 8-GPU nodes and failed
    with "L40S has no scale_out_gb_per_s for a group of 16 GPUs" alone (a trial). A device
    with a network figure is planned, with plan's warning that TP crosses the network."""
    within = getattr(hw, "scale_up_gpus", None)
    if not within or lay.tp <= within or getattr(hw, "scale_out_bytes_per_s", None) is not None:
        return
    tp = max(t for t in range(1, within + 1) if lay.tp % t == 0)
    said = "tp" if given else f"with no tp given, tp is every GPU of a stage ({lay.tp}); it"
    raise InvalidArgumentError(
        "tp",
        f"{said} spans {-(-lay.tp // within)} scale-up domains of {within} {hw.name} GPUs, and "
        f"{hw.name} has no scale_out_gb_per_s to time its all-reduce across them: give tp={tp} "
        f"(--tp {tp}) within a domain, the other GPUs running dp replicas, or run search over "
        "the GPUs (mlacalc search), or add scale_out_gb_per_s to a hardware file "
        "(docs/hardware.md)",
    )


def _one_decode_group_error(lay: Layout, gpus: int) -> InvalidArgumentError:
    """DP-attention asked of a decode pool whose tensor-parallel group takes every GPU of a
    stage: one attention group, plain TP under a DP-attention label (plan had returned
    ``dp_attention=True`` with the TP figures; the command line refused it alone)."""
    where = f"{lay.tp} GPUs of each of the {lay.pp} stages" if lay.pp > 1 else f"{gpus} GPUs"
    return InvalidArgumentError(
        "dp_attention",
        f"needs more than one attention group, but tp {lay.tp} takes all {where}: give a "
        "smaller tp (--tp; tp 1 for one attention group a GPU, as SGLang's --tp "
        f"{lay.tp} --dp {lay.tp} --enable-dp-attention), or leave dp_attention off "
        "(drop --dp-attention)",
    )


def _redundant_hint(
    m: ModelConfig, exc: InvalidArgumentError, ep: int, redundant: int, name: str = ""
) -> InvalidArgumentError:
    """An expert-parallel degree that does not divide the expert slots, with the redundant
    experts that round them up, as the argument (and flag) that sets them."""
    arg = f"{name}redundant_experts"
    more = redundant + (-(m.n_routed_experts + redundant)) % ep
    return InvalidArgumentError(
        exc.argument,
        f"{exc.message}: give {arg}={more} (--{arg.replace('_', '-')} {more}) for "
        f"{m.n_routed_experts + more} slots, {(m.n_routed_experts + more) // ep} per rank",
    )


def largest_ep(m: ModelConfig, gpus: int, lay: Layout, redundant: int | None = None) -> int:
    """The prefill pool's expert-parallel degree when none is given: the decode pool's, or the
    largest below it that divides the pool and the expert slots (``redundant`` extra ones:
    the pool's, by default the decode pool's)."""
    slots = m.n_routed_experts + (lay.redundant_experts if redundant is None else redundant)
    return max(
        e for e in range(1, min(lay.ep, gpus) + 1) if gpus % e == 0 and (slots % e == 0 or e == 1)
    )


def prefill_layout(
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
    p_tp, tp_from = _prefill_tp(lay, gpus, tp, dp_att)
    if ep is not None:
        p_ep, ep_from = ep, ""
    else:
        p_ep = largest_ep(m, gpus, lay, red)
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
    if redundant is None and p_ep == 1:
        red = 0  # the decode pool's replicas: nothing to replicate without expert ranks
    if dp_att and p_tp == gpus and gpus > 1:
        raise _one_group_error(p_tp, tp_from, gpus, dp_attention is True)
    try:
        return make_layout(m, gpus, p_tp, None, 1, p_ep, dp_att, red)
    except InvalidArgumentError as exc:
        if exc.argument == "ep" and "redundant experts" in exc.message and not ep_from:
            exc = _redundant_hint(m, exc, p_ep, red, "prefill_")
        raise _prefill_error(exc, gpus, tp_from, ep_from, redundant) from None


def _prefill_tp(lay: Layout, gpus: int, tp: int | None, dp_att: bool) -> tuple[int, str]:
    """The prefill pool's tensor-parallel degree and, when derived, where it came from."""
    if tp is not None:
        return tp, ""
    if dp_att and not lay.dp_attention:
        # DP-attention asked of the pool alone: one GPU per attention group
        return 1, "1 (DP-attention was asked of the pool)"
    if gpus % lay.tp == 0:
        return lay.tp, f"{lay.tp}, the decode pool's (tp)"
    p_tp = 1 if dp_att else gpus
    return p_tp, (
        f"{p_tp}, from the pool's {gpus} GPUs since the decode pool's tp {lay.tp} does "
        "not divide them"
    )


def _one_group_error(p_tp: int, tp_from: str, gpus: int, given_dpa: bool) -> InvalidArgumentError:
    """DP-attention with one attention group would be plain TP under a DP-attention label:
    refused whether the tp and the DP-attention were given or derived."""
    return InvalidArgumentError(
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


def _prefill_error(
    exc: InvalidArgumentError, gpus: int, tp_from: str, ep_from: str, redundant: int | None
) -> InvalidArgumentError:
    """A layout error of the prefill pool, naming the ``prefill_*`` argument it comes from
    (or, for a derived degree, where the degree came from)."""
    derived = {"tp": (tp_from, "prefill_tp"), "ep": (ep_from, "prefill_ep")}
    if exc.argument in derived and derived[exc.argument][0]:
        src, arg = derived[exc.argument]
        return InvalidArgumentError(
            arg,
            f"the prefill pool's default {exc.argument} is {src}: {exc.message}; give "
            f"{arg} (--{arg.replace('_', '-')}) to set it",
        )
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
    message = exc.message
    if exc.argument == "ep" and "(MoE-TP" in message:  # the degrees that work: the pool's flags
        message = message.replace("--ep ", "--prefill-ep ").replace(
            "--redundant-experts ", "--prefill-redundant-experts "
        )
    return InvalidArgumentError(renamed, f"{gpus}-GPU prefill pool: {message}")
