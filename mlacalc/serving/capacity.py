"""What fits on a GPU of a deployment: its weights, the KV cache left for the sequences, the
largest batch at a context, the longest context at a batch, and what overflows when a part
does not fit; and the same for the prefill pool of disaggregated serving (its weights beside
the cache of the prompts one pass batches). No numpy: capacity alone is sized in integers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from mlacalc.cost.quant import format_bits
from mlacalc.models.loading import ModelConfig, beyond_positions
from mlacalc.serving.layout import (
    Layout,
    kv_bytes_per_sequence_per_gpu,
    kv_bytes_per_token_per_gpu,
    make_layout,
    tp_splits_heads,
    weight_bytes_by_part,
    weight_format,
    weights_per_gpu,
)
from mlacalc.serving.plan_checks import PlanRequest, usable_of
from mlacalc.serving.precision import component_weight_bytes
from mlacalc.words.dtypes import KVLayout
from mlacalc.words.engines import ENGINE_LABELS, check_engine
from mlacalc.words.errors import MlacalcError
from mlacalc.words.units import human_bytes

__all__ = [
    "ENGINE_MEMORY",
    "PREFILL_TOKENS",
    "Capacity",
    "PrefillRoom",
    "capacity",
    "engine_share",
    "launch_share",
    "longest_context",
    "memory_setting",
    "pool_launch_share",
    "prefill_overflow",
    "prefill_room",
    "prompts_per_pass",
    "reserve_share",
    "round_trip_share",
    "shared_prefix_bytes",
    "usable_bytes",
    "usable_share",
]

#: Prompt tokens a prefill pass batches on one attention group (SGLang's and DeepSeek's
#: prefill runs use 16K tokens per GPU).
PREFILL_TOKENS = 16384

#: Each engine's own memory setting (``engine_memory``, ``--engine-memory``): its option and
#: what it is a share of, from recall of each engine's documentation (not checked against a
#: release). TensorRT-LLM's ``kv_cache_config.free_gpu_memory_fraction`` (the benchmark's
#: ``kv_cache_free_gpu_mem_fraction``, default 0.9): a share of the memory free once the
#: weights (and the activations of a warm-up pass) are loaded, all of it for the KV cache;
#: vLLM's ``gpu_memory_utilization`` (default 0.9): a share of the whole device for weights,
#: activations and the KV cache; SGLang's ``mem_fraction_static``: a share of the device for
#: the weights and the KV pool (its default set by the GPU's memory and the parallel layout).
ENGINE_MEMORY = {
    "trtllm": ("kv_cache_free_gpu_mem_fraction", "of what the weights leave, for the KV cache"),
    "vllm": ("gpu_memory_utilization", "of the GPU for the weights and the KV cache"),
    "sglang": ("mem_fraction_static", "of the GPU for the weights and the KV pool"),
}


@dataclass(frozen=True)
class Capacity:
    """What one GPU of the (decode) pool holds, in bytes, and what that leaves room for."""

    memory: int
    usable: int
    weights: int
    weight_format: str
    #: bytes left for the KV cache after the weights (negative when they do not fit)
    budget: int
    per_token: int
    tokens_per_gpu: int
    context: int
    #: one sequence of ``context`` tokens, every layer kind as it keeps it, in pages
    seq_bytes: int
    #: what a token adds in the layers keeping every token, and what a sequence holds beyond
    per_token_full: int
    fixed: int
    per_group_seqs: int
    max_batch: int
    overflow: str | None
    max_context: int | None
    max_context_memory: int | None
    #: the memory figures of :attr:`mlacalc.Plan.memory`
    mem: dict[str, int]
    #: the warnings of the context (beyond the model's positions)
    warnings: tuple[str, ...]
    #: what caps ``max_batch``: the KV cache, or the engine's admission limit
    #: (:func:`mlacalc.serving.plan.admitted`)
    admission: str = "kv capacity"
    #: the shared prefix's cache on a GPU, held once per attention group (0: none;
    #: :func:`shared_prefix_bytes`), and its tokens in whole pages
    shared_bytes: int = 0
    shared_tokens: int = 0

    @property
    def fits(self) -> bool:
        return self.overflow is None


@dataclass(frozen=True)
class PrefillRoom:
    """A prefill pool's GPU: its weights, one prompt's cache, and the prompts whose cache
    fits beside the weights (0: the pool cannot hold one); ``usable``: the bytes its weights
    and cache may take (the decode pool's under the reserve; TensorRT-LLM's share follows the
    pool's own weights)."""

    weights: int
    prompt_bytes: int
    prompts: int
    usable: int
    #: bytes a token adds to the pool's KV cache on a GPU (its own layout's split)
    per_token: int = 0


def prompts_per_pass(isl: int, fit: int | None = None) -> int:
    """The prompts of ``isl`` tokens one prefill pass batches (``k_max``): those of
    :data:`PREFILL_TOKENS`, at least one, and no more than ``fit`` whose cache fits."""
    k_max = max(1, PREFILL_TOKENS // isl)
    return k_max if fit is None else min(k_max, fit)


def usable_bytes(req: PlanRequest, weights: int) -> int:
    """The bytes a GPU of ``req`` holding ``weights`` bytes of weights gives the weights and
    the KV cache (:func:`~mlacalc.serving.plan_checks.usable_of`)."""
    return usable_of(req.hw.memory_bytes, weights, req.memory_reserve, req.engine_memory)


def memory_setting(req: PlanRequest, usable: int) -> str:
    """The memory rule a plan ran, in words: the engine's own setting and the planner's
    reserve it came to, or the planner's reserve."""
    reserve = 1 - usable / req.hw.memory_bytes
    if req.engine_memory is None:
        return f"memory_reserve {req.memory_reserve:.4g} (of each GPU, kept for activations)"
    engine, share = req.engine_memory
    option, what = ENGINE_MEMORY[engine]
    return (
        f"{ENGINE_LABELS[engine]}'s {option} {share:.4g} ({what}; from recall): "
        f"{reserve:.2%} of each GPU kept (the planner's memory_reserve {reserve:.4g})"
    )


def engine_share(
    engine_memory: Any, engine: str, memory: int, weights: int, units: tuple[int, ...] = ()
) -> float:
    """The setting ``engine``'s launch lines give a GPU of ``memory`` bytes holding
    ``weights`` bytes sized by ``engine_memory`` (``(engine, share)``): the share itself
    under the engine whose meaning it was read by, else the same bytes in ``engine``'s
    meaning (:data:`ENGINE_MEMORY`), to the fewest decimals (:func:`round_trip_share`) that
    read back under ``engine`` hold as many of each of ``units`` (bytes: a token's KV, a
    sequence's) in what the weights leave as the plan's own figure."""
    own, share = engine_memory
    if engine == own:
        return share
    return usable_share(
        engine, memory, weights, usable_of(memory, weights, 0.0, engine_memory), units
    )


def usable_share(
    engine: str, memory: int, weights: int, usable: int, units: tuple[int, ...] = ()
) -> float:
    """``engine``'s memory setting (:data:`ENGINE_MEMORY`) that gives a GPU of ``memory``
    bytes holding ``weights`` bytes of weights ``usable`` bytes for the weights and the KV
    cache: TensorRT-LLM's a share of what the weights leave, vLLM's and SGLang's a share of
    the GPU, to the fewest decimals that read back hold as many ``units``
    (:func:`round_trip_share`)."""
    free = max(memory - weights, 1)
    exact = (usable - weights) / free if engine == "trtllm" else usable / memory
    return round_trip_share(exact, engine, memory, weights, usable, units)


#: the most decimals a converted share is given to (a byte of 10^12 is below any GPU's
#: granularity here, and well within a float's 15-16 significant digits)
SHARE_DECIMALS = 12


def round_trip_share(
    exact: float, engine: str, memory: int, weights: int, usable: int, units: tuple[int, ...]
) -> float:
    """``exact`` (``engine``'s share giving ``usable`` bytes) to the fewest decimals, from
    2, whose read-back by ``engine``'s meaning (:func:`usable_of`) leaves as many whole
    ``units`` for the KV cache as ``usable`` does (whole MiB when no unit is given);
    nearest first, then down, then up; ``exact`` to :data:`SHARE_DECIMALS` decimals when
    none does sooner."""
    units = tuple(u for u in units if u > 0) or (1 << 20,)

    def counts(u_bytes: int) -> tuple[int, ...]:
        return tuple(max(u_bytes - weights, 0) // u for u in units)

    want = counts(usable)
    for d in range(2, SHARE_DECIMALS + 1):
        scale = 10**d
        for s in (
            round(exact, d),
            round(math.floor(exact * scale) / scale, d),
            round(math.ceil(exact * scale) / scale, d),
        ):
            if 0 < s <= 1 and counts(usable_of(memory, weights, 0.0, (engine, s))) == want:
                return s
    return round(exact, SHARE_DECIMALS)


def pool_launch_share(
    engine: str,
    memory: int,
    weights: int,
    units: tuple[int, ...],
    engine_memory: tuple[str, float] | None,
    usable: int,
) -> float | None:
    """The memory setting ``engine``'s launch line gives one pool's GPU of ``memory`` bytes
    holding ``weights`` bytes of weights, whose KV cache was sized in ``units`` (its bytes a
    token and a sequence or prompt; read back by ``engine``'s meaning, :data:`ENGINE_MEMORY`,
    the setting holds as many of each): by the engine's own setting ``engine_memory``
    (``(engine, share)``) converted by :func:`engine_share`, else by the planner's reserve,
    which left ``usable`` bytes for the weights and the cache, by :func:`reserve_share` (None
    under vLLM and SGLang: the launch's ``1 - memory_reserve``). The one route of a plan's
    launch lines (:func:`launch_share`) and a search point's
    (:meth:`mlacalc.serving.search.SearchResult.launch_share`)."""
    if engine_memory is None:
        return reserve_share(engine, memory, weights, usable, units)
    return engine_share(
        (check_engine(engine_memory[0]), engine_memory[1]), engine, memory, weights, units
    )


def launch_share(plan: Any, engine: str, pool: str = "decode") -> float | None:
    """The memory setting ``engine``'s launch lines give a plan's ``pool`` (``"decode"``: the
    decode pool, the only one aggregated; ``"prefill"``: a disaggregated plan's prefill pool,
    by its own weights, tokens and prompts a GPU): read back by ``engine``'s meaning
    (:data:`ENGINE_MEMORY`), it gives the pool's KV tokens and sequences per GPU
    (:func:`pool_launch_share`). A plan run by an engine's own setting
    (``plan.engine_memory``, read by ``plan.engine``'s meaning) converts it by
    :func:`engine_share`; a plan run by the planner's reserve (``1 - memory_reserve`` of each
    GPU for the weights and the KV cache) gives None under vLLM and SGLang, whose setting is
    that share of the GPU (the launch's ``1 - memory_reserve``), and converts the plan's
    usable bytes under TensorRT-LLM, whose setting is a share of what the weights leave
    (:func:`reserve_share`)."""
    units = (plan.kv_bytes_per_token_per_gpu, plan.kv_bytes_per_sequence_per_gpu)
    weights = plan.weights_per_gpu_bytes
    if pool == "prefill":  # its own weights (TensorRT-LLM's share is of what they leave)
        units = (plan.prefill_kv_bytes_per_token_per_gpu, plan.prefill_kv_bytes_per_prompt_per_gpu)
        weights = plan.prefill_weights_per_gpu_bytes
    em = None if plan.engine_memory is None else (plan.engine, plan.engine_memory)
    # the reserve's usable bytes are the GPU's less the reserve, whatever the weights
    return pool_launch_share(
        engine, plan.memory_per_gpu_bytes, weights, units, em, plan.usable_per_gpu_bytes
    )


def reserve_share(
    engine: str, memory: int, weights: int, usable: int, units: tuple[int, ...] = ()
) -> float | None:
    """The memory setting that gives ``engine`` the ``usable`` bytes the planner's reserve
    left: None (the launch's own ``1 - memory_reserve``) where the engine's setting is a
    share of the GPU as the reserve's is (vLLM, SGLang), else :func:`usable_share`
    (TensorRT-LLM's ``free_gpu_memory_fraction``, a share of what the weights leave: 0.9 of
    it would give the KV cache more than the plan sized)."""
    engine = check_engine(engine)
    if engine != "trtllm":
        return None
    return usable_share(engine, memory, weights, usable, units)


def capacity(req: PlanRequest, fewest: bool = False) -> Capacity:
    """The capacity of one GPU of ``req``'s (decode) pool at its context; ``fewest``: where it
    does not fit, its "add GPUs" says how many (:func:`fewest_gpus`; the plan's own pool, not
    the layouts a plan weighs beside it)."""
    m, lay, kv, include_mtp = req.m, req.lay, req.kv, req.include_mtp
    memory = req.hw.memory_bytes
    part_bytes = weight_bytes_by_part(m, lay, req.sized, include_mtp)
    weights = weights_per_gpu(m, lay, req.sized, include_mtp)
    w_format = weight_format(m, req.sized)
    if req.components:  # named components in formats of their own (serving.precision)
        part_bytes = component_weight_bytes(m, lay, req.sized, req.components, include_mtp)
        weights = sum(part_bytes.values())
        w_format += "".join(f", {c} {f}" for c, f in req.components.items())
    usable = usable_bytes(req, weights)
    budget = usable - weights
    per_token = kv_bytes_per_token_per_gpu(m, kv, lay, include_mtp)
    context = req.context
    beyond = beyond_positions(m, context)
    seq_bytes, per_token_full, fixed = sequence_bytes(
        m, kv, lay, context, req.page_size, include_mtp
    )
    # a shared prefix: its pages held once per attention group, each sequence its own rest
    shared = shared_prefix_bytes(per_token_full, req.shared_tokens)
    per_group_seqs = max(budget - shared, 0) // (seq_bytes - shared)
    max_batch = per_group_seqs * lay.dp
    max_context = max_context_memory = None
    # the longest context at the batch does not hang on the context asked: a context too long
    # for one sequence still has one (trial 8: 16M tokens at batch 1 showed none)
    if req.batch is not None and budget > 0:
        per_group = math.ceil(req.batch / lay.dp)
        max_context_memory = longest_context(
            m, kv, lay, req.page_size, include_mtp, budget // per_group
        )
        max_context = max_context_memory
        if m.max_position_embeddings:
            max_context = min(max_context, m.max_position_embeddings)
    return Capacity(
        memory=memory,
        usable=usable,
        weights=weights,
        weight_format=w_format,
        budget=budget,
        per_token=per_token,
        # a model whose layers keep no per-token cache (linear only) is not sized by tokens
        tokens_per_gpu=max(budget, 0) // per_token if per_token else 0,
        context=context,
        seq_bytes=seq_bytes,
        per_token_full=per_token_full,
        fixed=fixed,
        per_group_seqs=per_group_seqs,
        max_batch=max_batch,
        overflow=_overflow(
            req, usable, weights, w_format, budget, seq_bytes, per_group_seqs, fewest
        ),
        max_context=max_context,
        max_context_memory=max_context_memory,
        mem={
            "weights": weights,
            "kv_budget": max(budget, 0),
            "reserve": memory - usable,
            "memory": memory,
            **{f"weights_{k}": v for k, v in part_bytes.items() if v},
            # the shared prefix's pages, once per attention group (none: not a key)
            **({"kv_shared_prefix": shared} if shared else {}),
        },
        warnings=(beyond,) if beyond else (),
        shared_bytes=shared,
        shared_tokens=req.shared_tokens if shared else 0,
    )


def shared_prefix_bytes(per_token_full: int, shared_tokens: int) -> int:
    """The cache bytes on a GPU of a shared prefix of ``shared_tokens`` tokens (whole pages),
    held once per attention group as SGLang's radix cache and vLLM's and TensorRT-LLM's
    prefix caching keep one copy of a prefix's pages per cache pool (from recall of their
    designs): the pages of the layers that keep every token (``per_token_full`` a token,
    :func:`sequence_bytes`). A sliding-window or chunked layer's window and a linear layer's
    state stay each sequence's own (its window lies past the prefix once the prompt is
    longer than the window): counted in each sequence, an upper bound."""
    return per_token_full * shared_tokens


def sequence_bytes(
    m: ModelConfig, kv: KVLayout, lay: Layout, context: int, page_size: int, include_mtp: bool
) -> tuple[int, int, int]:
    """One sequence of ``context`` tokens on a GPU (every layer keeps what its kind keeps:
    window, indexer keys, linear state, in pages), what a token adds to it in the layers that
    keep every token (a page's growth once the context is past every window), and the fixed
    part beside those tokens."""
    seq_bytes = kv_bytes_per_sequence_per_gpu(m, kv, lay, context, page_size, include_mtp)
    # DeepSeek-V4: a pooled key per ratio tokens, so the growth over the ratios' period
    step = math.lcm(page_size, *(r for r in m.compress_ratios if r))
    far = step << 32
    growth = kv_bytes_per_sequence_per_gpu(
        m, kv, lay, far + step, page_size, include_mtp
    ) - kv_bytes_per_sequence_per_gpu(m, kv, lay, far, page_size, include_mtp)
    per_token_full = growth // step
    fixed = seq_bytes - per_token_full * (-(-context // page_size) * page_size)
    return seq_bytes, per_token_full, fixed


def _weight_levers(req: PlanRequest, fewest: bool = False) -> str:
    """What can shrink the weights per GPU of ``req``'s layout, in words: more GPUs always;
    a higher tp where one splits the heads over a stage's GPUs (its attention, or all of it,
    copied per group), a higher ep where the routed experts are shared by fewer GPUs than a
    stage holds, a smaller weight dtype where the weights are wider than 4 bits. A capacity
    planner's trial: DeepSeek-V3 on 8 H100 at TP8 EP8 was told to raise tp/ep, at their most."""
    lay, m = req.lay, req.m
    stage = lay.stage_gpus
    raise_tp = any(stage % t == 0 and tp_splits_heads(m, t) for t in range(lay.tp + 1, stage + 1))
    raise_ep = bool(m.n_routed_experts) and lay.moe_group < stage
    which = "/".join(w for w, on in (("tp", raise_tp), ("ep", raise_ep)) if on)
    try:
        wide = format_bits(req.w_dtype) > 4.5
    except MlacalcError:  # a name the table does not hold: not ruled out
        wide = True
    more = f"add GPUs ({_fewest_words(req)})" if fewest else "add GPUs"
    levers = [more] + [f"raise {which}"] * bool(which)
    levers += ["use a smaller weight dtype"] * wide
    return ", ".join(levers[:-1]) + (" or " if len(levers) > 1 else "") + levers[-1]


#: The most GPUs :func:`fewest_gpus` tries: this many, or this many times the plan's
FEWEST_GPUS_MAX = 4096
FEWEST_GPUS_TIMES = 64


def scaled_layout(m: ModelConfig, lay: Layout, gpus: int) -> Layout | None:
    """``lay``'s kind of layout on ``gpus`` GPUs (None where the model refuses it): its stages
    kept; a stage's tensor parallelism grown with it where it spans the stage (TP8 -> TP16),
    its DP-attention groups multiplied at the same ``tp``, its replicas (``dp`` without
    DP-attention, each holding all the weights) kept and each widened; expert
    parallelism over the stage where it spans it, else kept; the fewest redundant experts
    that split over the new ``ep`` where the layout had some."""
    if gpus % lay.pp:
        return None
    stage = gpus // lay.pp
    if lay.tp == lay.stage_gpus:
        tp = stage
    elif lay.dp_attention:
        tp = lay.tp
    elif stage % lay.dp:  # replicas of a TP group: more GPUs widen each group, not their count
        return None
    else:
        tp = stage // lay.dp
    if stage % tp:
        return None
    ep = stage if lay.ep == lay.stage_gpus and lay.ep > 1 else lay.ep
    red = (-m.n_routed_experts) % ep if lay.redundant_experts and m.n_routed_experts else 0
    try:
        return make_layout(m, gpus, tp=tp, dp=stage // tp, pp=lay.pp, ep=ep,
                           dp_attention=lay.dp_attention, redundant_experts=red)  # fmt: skip
    except MlacalcError:
        return None


def fewest_gpus(req: PlanRequest) -> tuple[int, Layout] | None:
    """The fewest GPUs, above the plan's, whose layout of the same kind
    (:func:`scaled_layout`) holds the weights per GPU and one sequence's cache at the asked
    context (the weights in the plan's formats, the cache in its KV format, the usable bytes
    by the plan's memory rule), with that layout; None where none up to
    :data:`FEWEST_GPUS_MAX` does. A trial's DeepSeek-V3 in bf16 on 8 H200 was told "add GPUs"
    with no count."""
    m = req.m
    for gpus in range(req.gpus + 1, min(FEWEST_GPUS_MAX, FEWEST_GPUS_TIMES * req.gpus) + 1):
        lay = scaled_layout(m, req.lay, gpus)
        if lay is None:
            continue
        if req.components:
            parts = component_weight_bytes(m, lay, req.sized, req.components, req.include_mtp)
            weights = sum(parts.values())
        else:
            weights = weights_per_gpu(m, lay, req.sized, req.include_mtp)
        usable = usable_bytes(req, weights)
        if usable - weights <= 0:
            continue
        seq = sequence_bytes(m, req.kv, lay, req.context, req.page_size, req.include_mtp)[0]
        if usable - weights >= seq:
            return gpus, lay
    return None


def _fewest_words(req: PlanRequest) -> str:
    """:func:`fewest_gpus` in words ("16 at TP16, --gpus 16: the fewest of this layout's kind
    that hold the weights and one sequence's cache of 32,768 tokens"), or that none up to
    the most tried does."""
    found = fewest_gpus(req)
    if found is None:
        most = min(FEWEST_GPUS_MAX, FEWEST_GPUS_TIMES * req.gpus)
        return f"no layout of this kind up to {most:,} GPUs holds them"  # weights, or the cache
    gpus, lay = found
    return (
        f"{gpus:,} at {lay.describe()}, --gpus {gpus}: the fewest of this layout's kind that "
        f"hold the weights and one sequence's cache of {req.context:,} tokens"
    )


def _sequence_levers(req: PlanRequest) -> str:
    """What holds one sequence's cache that does not fit: more GPUs (how many), or, where no
    layout of this kind up to the most tried holds it, a shorter context or a narrower cache
    (a 100M-token DeepSeek-V3 plan on 8 H200 was told "add GPUs (no layout ... holds them)")."""
    words = _fewest_words(req)
    if not words.startswith("no layout"):
        return f"; add GPUs ({words})"
    return f"; {words}: use a shorter context or a narrower --kv-dtype"


def _overflow(
    req: PlanRequest,
    usable: int,
    weights: int,
    w_format: str,
    budget: int,
    seq_bytes: int,
    per_group_seqs: int,
    fewest: bool = False,
) -> str | None:
    """What overflows a GPU, in words (None when everything fits): the weights, one
    sequence's cache (``per_group_seqs``: the sequences an attention group holds), or the
    batch asked of a capacity plan."""
    lay, context, batch = req.lay, req.context, req.batch
    max_batch = per_group_seqs * lay.dp
    if budget <= 0:
        return (
            f"weights: {human_bytes(weights)} per GPU in {w_format} ({lay.describe()}) exceed "
            f"the {human_bytes(usable)} usable on {req.hw.name}; {_weight_levers(req, fewest)}"
        )
    if per_group_seqs < 1:
        return (
            f"kv cache: one sequence of {context:,} tokens needs "
            f"{human_bytes(seq_bytes)} per GPU and "
            f"{human_bytes(budget)} are left after the weights"
            + (_sequence_levers(req) if fewest else "")
        )
    if batch is not None and req.isl is None and batch > max_batch:
        # an answer, as the weights' and one sequence's overflow: the batch asked does not fit;
        # the step is timed at the largest batch that does (``decode_batch`` says which)
        return (
            f"kv cache: a batch of {batch:,} at {context:,} tokens does not fit: "
            f"{max_batch:,} do ({human_bytes(math.ceil(batch / lay.dp) * seq_bytes)} of cache "
            f"per GPU against the {human_bytes(budget)} left after the weights); the times are "
            f"for a batch of {max_batch:,}"
        )
    return None


def longest_context(
    m: ModelConfig, kv: KVLayout, lay: Layout, page_size: int, include_mtp: bool, room: int
) -> int:
    """The longest context (a multiple of ``page_size``) whose sequence fits in ``room`` bytes
    on a GPU; a bisection, since the bytes of a sequence grow with its context, by layer kind.
    A model whose every layer stops growing (sliding, linear) is capped at 2^40 tokens."""
    sequence = (m, kv, lay, page_size, include_mtp, room)
    if not _pages_fit(*sequence, 1):
        return 0
    lo, hi = 1, 2
    while _pages_fit(*sequence, hi) and hi < (1 << 40) // page_size:
        lo, hi = hi, hi * 2
    if _pages_fit(*sequence, hi):
        return hi * page_size
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if _pages_fit(*sequence, mid) else (lo, mid)
    return lo * page_size


def _pages_fit(
    m: ModelConfig,
    kv: KVLayout,
    lay: Layout,
    page_size: int,
    include_mtp: bool,
    room: int,
    pages: int,
) -> bool:
    """Whether a sequence of ``pages`` pages fits in ``room`` bytes on a GPU."""
    seq = kv_bytes_per_sequence_per_gpu(m, kv, lay, pages * page_size, page_size, include_mtp)
    return seq <= room


def prefill_room(req: PlanRequest, usable: int) -> PrefillRoom:
    """A GPU of ``req``'s prefill pool: it holds its weights and the cache of one prompt at
    least; a pass batches at most the prompts whose cache fits beside the weights."""
    assert req.p_lay is not None
    weights = weights_per_gpu(req.m, req.p_lay, req.sized, req.include_mtp)
    if req.components:
        parts = component_weight_bytes(req.m, req.p_lay, req.sized, req.components, req.include_mtp)
        weights = sum(parts.values())
    prompt = kv_bytes_per_sequence_per_gpu(
        req.m, req.kv, req.p_lay, req.isl, req.page_size, req.include_mtp
    )
    if req.engine_memory is not None:  # TensorRT-LLM's share follows the pool's own weights
        usable = usable_bytes(req, weights)
    per_token = kv_bytes_per_token_per_gpu(req.m, req.kv, req.p_lay, req.include_mtp)
    return PrefillRoom(weights, prompt, max(usable - weights, 0) // prompt, usable, per_token)


def prefill_overflow(req: PlanRequest, room: PrefillRoom, w_format: str) -> str:
    """Why a prefill pool without room for one prompt does not fit, in words: its own usable
    bytes (``room.usable``; the decode pool's were quoted, which differ under TensorRT-LLM's
    share of what each pool's weights leave)."""
    p_lay, p_gpus = req.p_lay, req.p_gpus
    assert p_lay is not None
    return (
        f"prefill pool: {human_bytes(room.weights)} of weights per GPU in {w_format} "
        f"({p_lay.describe()} on {p_gpus} GPU{'s' if p_gpus > 1 else ''}) and the "
        f"KV cache of one prompt of "
        f"{req.isl:,} tokens ({human_bytes(room.prompt_bytes)} per GPU) exceed the "
        f"{human_bytes(room.usable)} usable on {req.hw.name}; add prefill GPUs or raise "
        "the prefill pool's tp/ep"
    )
