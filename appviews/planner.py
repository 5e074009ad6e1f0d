"""Serving / capacity planner view, the answer first: whether a request mix fits the deployment,
at what load, with TTFT, TPOT, tokens/s per GPU and per user and what binds; the inputs below
it; then capacity at the sidebar's workload, what fills a GPU, the step's kernels, and a
search's Pareto frontier coloured by GPU count with the targets drawn."""

from __future__ import annotations

import html
import math
import re
from dataclasses import dataclass
from typing import Any

import plotly.graph_objects as go
import streamlit as st

import mlacalc
from mlacalc.cost.engine import attention_cost
from mlacalc.report import attention_kind_labels
from mlacalc.serving.capacity import ENGINE_MEMORY
from mlacalc.serving.plan import duration_text
from mlacalc.serving.price import money
from mlacalc.serving.provenance import serving_error_words, unmeasured_named
from mlacalc.serving.scheduler import defaults_words, model_page_size
from mlacalc.serving.search import search, target_edge_warnings, throughput_gpus
from mlacalc.timemodel.device import device_figures
from mlacalc.words import defaults as D
from mlacalc.words.engines import ENGINE_LABELS
from mlacalc.words.errors import InvalidArgumentError
from mlacalc.words.units import counted, human_bytes

from .common import Scenario, context_text, download, engine_words, show_notices, show_table

TITLE = "Capacity planner"

#: A fixed colour per part of the memory bar, so a part keeps its colour from model to model
#: (plotly's cycle colours by position, which shifts with the parts a model has).
PART_COLOURS = {
    "attention": "#1f77b4",
    "norms": "#aec7e8",
    "dense ffn": "#d62728",
    "shared experts": "#ff9896",
    "router": "#8c564b",
    "routed experts": "#98df8a",
    "embedding head": "#9467bd",
    "embedding": "#c5b0d5",
    "lm head": "#c49c94",
    "position embedding": "#f7b6d2",
    "mtp": "#e377c2",
    "KV": "#ff7f0e",
    "reserve": "#7f7f7f",
    "free": "#e8e8e8",
}
#: Colours for a part not named above (cycled).
_SPARE_COLOURS = ("#17becf", "#bcbd22", "#2ca02c", "#dbdb8d", "#9edae5")


def part_colour(part: str, spare: int = 0) -> str:
    """The memory bar's colour of a part (``KV (4 x 131,072)`` reads as ``KV``)."""
    key = "KV" if part.startswith("KV") else part
    return PART_COLOURS.get(key, _SPARE_COLOURS[spare % len(_SPARE_COLOURS)])


@st.cache_data(show_spinner=False)
def _search(
    model,
    hardware: str,
    gpus: tuple[int, ...],
    isl: int,
    osl: int,
    ttft: float,
    tpot: float,
    prefill_pass: str = "fused",
    output_lag_steps: int = 0,
    engine: str = "trtllm",
    limits: tuple[tuple[str, Any], ...] = (),
    prefix_cache_hit: float = 0.0,
    page_size: int | None = None,
    memory: tuple[tuple[str, Any], ...] = (),
    moe_backend: str | None = None,
    state_dtype: str | None = None,
    shared_prefix: int = 0,
):
    """search()'s points, frontier, best, reasons, seconds, the warnings the CLI's search
    prints and how the best was timed (cached: a rerun that keeps the
    request mix and targets draws the chart again without searching), with the engine's
    scheduler defaults as ``mlacalc search --engine`` takes them (its running cap, token budget
    and overlap scheduling; chunked prefill it searches): search(engine=) fills them.
    ``limits``: search()'s layout limits (:func:`layout_limits`), none by default;
    ``prefix_cache_hit``: the plan form's (every point's prompts timed at it); ``page_size``:
    the plan form's page (None: the engine's, as search takes it); ``memory``: the plan
    form's memory rule (:func:`memory_args`; none: search()'s default reserve);
    ``moe_backend``: the plan form's TensorRT-LLM MoE backend, for the points whose experts
    take it (none of the searched weights' experts taking it: searched without, and said)."""
    ask = dict(
        isl=isl,
        osl=osl,
        ttft=ttft,
        tpot=tpot,
        prefill_pass=prefill_pass,
        output_lag_steps=output_lag_steps,
        engine=engine,
        prefix_cache_hit=prefix_cache_hit,
        shared_prefix=shared_prefix,
        page_size=page_size,
        state_dtype=None if state_dtype == "fp32" else state_dtype,
        **dict(limits),
        **dict(memory),
    )
    without = ""
    try:
        r = search(model, hardware, list(gpus), moe_backend=moe_backend, **ask)
    except InvalidArgumentError as exc:
        if moe_backend is None or exc.argument != "moe_backend":
            raise
        r = search(model, hardware, list(gpus), **ask)
        without = f"; the MoE backend {moe_backend} not taken ({exc.message})"
    # how the best's kernels were timed, as the CLI's search says it (stand-ins included)
    how = engine_words(r.engine, r.profile, r.best_calibration or r.calibration) + without
    reasons = (r.point_reasons, r.ruled_out, r.missing_both)
    # what the CLI's search warns of (the stand-in engine is in ``how`` already)
    said = tuple(w for w in r.warnings if w not in r.calibration)
    return r.points, r.frontier, r.best, reasons, r.seconds, said, how


def gpus_text(p: dict) -> str:
    """A deployment's GPUs: ``2+1`` (decode + prefill) for a disaggregated one."""
    if p.get("mode") == "disaggregated" and p.get("prefill_gpus"):
        return f"{p['decode_gpus']}+{p['prefill_gpus']}"
    return str(p["gpus"])


def layout_text(p: dict, pool: str = "") -> str:
    """A searched deployment's layout (``pool="prefill_"``: its prefill pool's) with its
    redundant experts, as ``mlacalc search`` writes it."""
    layout, extra = p[f"{pool}layout"], p.get(f"{pool}redundant_experts")
    if not extra or layout.endswith(("redundant experts)", "redundant expert)")):
        return layout  # Layout.describe() says them
    return f"{layout} ({extra} redundant expert{'s' if extra > 1 else ''})"


def gib(n: float) -> str:
    """Bytes as a person reads them on this page: ``79.29 GiB`` (GiB = 2^30 B)."""
    return f"{n / 2**30:,.2f} GiB"


@dataclass(frozen=True)
class PlanInputs:
    """The planner's widgets, as read on this run (numbers as the widgets return them)."""

    gpus: int
    tp: int
    ep: int
    page: int
    pp: int
    dp_attention: bool
    overlap: str
    mode: str
    reserve: float
    isl: int
    osl: int
    #: requests in flight; 0: the most that meet both targets
    conc: int
    prefill_pass: str
    lag: int
    ttft: float = D.TTFT_TARGET_S
    tpot: float = D.TPOT_TARGET_S
    #: expert slots beyond the routed experts, spread over the EP ranks (EPLB's replicas)
    redundant_experts: int = 0
    #: a disaggregated plan's prefill pool (``mlacalc plan --prefill-gpus --prefill-tp
    #: --prefill-ep --prefill-dp-attention``); None: plan()'s default, derived from the decode
    #: pool's
    prefill_gpus: int | None = None
    prefill_tp: int | None = None
    prefill_ep: int | None = None
    prefill_dp_attention: bool | None = None
    #: the share of each prompt's tokens found cached (``mlacalc plan --prefix-cache-hit``)
    prefix_cache_hit: float = 0.0
    #: the tokens every prompt begins with alike (``mlacalc plan --shared-prefix``)
    shared_prefix: int = 0
    #: the engine's own memory setting in place of ``reserve`` (``mlacalc plan
    #: --engine-memory``); None: the reserve
    engine_memory: float | None = None
    #: TensorRT-LLM's MoE backend (``mlacalc plan --moe-backend``); None: its default
    moe_backend: str | None = None
    #: the routed experts' weight format (``mlacalc plan --expert-dtype``, scales counted);
    #: None: as the other weights
    expert_dtype: str | None = None
    #: US dollars a GPU-hour (``mlacalc plan --gpu-hour-price``); None: no price (none assumed)
    gpu_hour_price: float | None = None


#: the request mix's and targets' URL parameters: (key, default, low, high); TPOT's in ms as
#: its box takes it; conc and price have no default (an empty box)
MIX_URL = (
    ("isl", D.ISL, 1, 1 << 20),
    ("osl", D.OSL, 1, 1 << 20),
    ("conc", None, 1, 1 << 22),
    ("ttft", D.TTFT_TARGET_S, 0.0, 600.0),
    ("tpot", D.TPOT_TARGET_S * 1e3, 0.0, 10_000.0),
    ("price", None, 0.0, 10_000.0),
    ("hit", 0.0, 0.0, 0.999),
    ("shared", 0, 0, (1 << 20) - 1),
)


def _url_mix(sc: Scenario) -> dict[str, Any]:
    """The URL's request mix, targets and GPU-hour price (each box's default where absent; a
    value out of its box's range clamped, a non-number refused, both said in a notice)."""
    return {
        key: (sc.url.integer if isinstance(lo, int) else sc.url.number)(key, default, lo, hi)
        for key, default, lo, hi in MIX_URL
    }


def url_number(value: float | int) -> str:
    """A box's value as the URL carries it: ``%g``'s short form where it reads back the same
    (``2.5``, ``10``), else every digit (``%g`` alone wrote a price of 1234.5678 as
    ``1234.57``: the shared link reopened at another price).

    >>> url_number(2.5), url_number(10.0), url_number(1234.5678), url_number(4)
    ('2.5', '10', '1234.5678', '4')
    """
    if not isinstance(value, float):
        return str(value)
    short = f"{value:g}"
    return short if float(short) == value else repr(value)


def _mix_to_url(values: dict[str, Any]) -> None:
    """The request mix, targets and price into the URL where they are not the boxes'
    defaults (a scenario is shared by its link), out of it where they are."""
    for key, default, _lo, _hi in MIX_URL:
        value = values[key]
        if value is not None and value != default and not (key == "price" and value == 0):
            st.query_params[key] = url_number(value)
        elif key in st.query_params:
            del st.query_params[key]


@dataclass(frozen=True)
class Load:
    """The requests in flight the answer is given at, and why that many."""

    concurrency: int
    #: "asked" (typed in), "targets" (the most meeting both targets), "memory" (as many as fit
    #: already meet them), "none" (not even one request meets them: shown at one)
    why: str


def render(sc: Scenario) -> None:
    answer = st.container()  # the answer first; the inputs below it are read before it is filled
    conc_slot, inputs = _read_inputs(sc)
    with answer:
        result, load = _serving_plan(sc, inputs)
        if result is None:
            return
        if load is not None and load.why != "asked":
            conc_slot.caption(f"auto: {load.concurrency:,}")
        show_answer(result, load, inputs, sc.model.label)
        st.caption(scheduler_caption(sc.engine, inputs.mode))
    _show_capacity(sc, inputs)
    _show_memory(
        result,
        result.context,
        bool(sc.model.compress_ratios),
        bool(sc.model.is_mla and result.tp > 1),
    )
    _show_kernels(result, sc.model)
    download(result.to_dict(), f"{sc.model.name}-plan", "dl_plan")
    search_section(sc, inputs)


@st.fragment
def search_section(sc: Scenario, inputs: PlanInputs) -> None:
    """The search, a fragment of the page: ticking it re-runs only this part (the answer and
    the tables above are not computed or sent again), as fast as the command line's search."""
    if st.checkbox("search deployments (GPUs / 2, GPUs, GPUs x 2)", False, key="plan_search"):
        limited = st.checkbox(
            "only the layout above (its TP, PP, EP, DP-attention and redundant experts; "
            "disaggregated, its prefill pool's TP, EP and DP-attention)",
            False,
            key="plan_search_limited",
            help="The layouts `mlacalc search --tp --pp --ep --dp-attention "
            "--redundant-experts` allows, of both pools of a disaggregated point.",
        )
        try:
            _show_search(sc, inputs, layout_limits(inputs) if limited else ())
        except mlacalc.MlacalcError as exc:  # limits that leave nothing: the reasons, counted
            st.error(str(exc))


def layout_limits(inputs: PlanInputs) -> tuple[tuple[str, Any], ...]:
    """search()'s layout limits of the deployment above: its TP, PP, EP (none at 1),
    DP-attention and, with EP, its redundant experts; a disaggregated plan's prefill pool's
    TP, EP and DP-attention where set (else the decode pool's)."""
    ep = int(inputs.ep)
    out: tuple[tuple[str, Any], ...] = (
        ("tp", (int(inputs.tp),)),
        ("pp", (int(inputs.pp),)),
        ("ep", (ep,) if ep > 1 else "none"),
        ("dp_attention", "on" if inputs.dp_attention else "off"),
        ("redundant_experts", int(inputs.redundant_experts) if ep > 1 else None),
    )
    if inputs.mode == "disaggregated":
        if inputs.prefill_tp is not None:
            out += (("prefill_tp", (int(inputs.prefill_tp),)),)
        if inputs.prefill_ep is not None:
            pep = int(inputs.prefill_ep)
            out += (("prefill_ep", (pep,) if pep > 1 else "none"),)
        if inputs.prefill_dp_attention is not None:
            out += (("prefill_dp_attention", "on" if inputs.prefill_dp_attention else "off"),)
    return out


def _url_layout(sc: Scenario) -> tuple[int, int, int, bool, int]:
    """The URL's GPUs, tensor-parallel degree (at most the GPUs, said in a notice where it was
    above), expert-parallel degree, DP-attention flag and redundant experts."""
    url_gpus = sc.url.integer("gpus", D.GPUS, 1, 4096)
    url_tp = sc.url.integer("tp", url_gpus, 1, 4096)
    if url_tp > url_gpus:
        sc.url.notices.append(
            f"URL parameter 'tp={url_tp}' is above 'gpus={url_gpus}': tensor parallelism "
            f"cannot span more GPUs than there are; using tp={url_gpus}."
        )
        url_tp = url_gpus
    url_ep = sc.url.integer("ep", D.EP, 1, 4096)
    url_dpa = sc.url.flag("dpa", False)
    url_redundant = sc.url.integer("redundant_experts", 0, 0, 4096)
    return url_gpus, url_tp, url_ep, url_dpa, url_redundant


def _layout_to_url(
    moe: bool, ep: int, dp_attention: bool, redundant: int, expert_dtype: str | None
) -> None:
    """The expert layout into the URL where it is not the default (a dense model: none)."""
    layout = {
        "ep": (ep, D.EP),
        "dpa": (int(dp_attention), 0),
        "redundant_experts": (redundant, 0),
        "experts": (expert_dtype or "", ""),
    }
    for key, (value, default) in layout.items():
        if moe and value != default:
            st.query_params[key] = str(value)
        elif key in st.query_params:
            del st.query_params[key]


def _read_inputs(sc: Scenario) -> tuple[Any, PlanInputs]:
    """Draw the planner's widgets (the deployment and request mix in one row, the rest in an
    expander) and read them, with the slot below the requests-in-flight box that says the
    count an empty box ("auto") resolved to; the GPU and tensor-parallel counts go back into
    the URL."""
    seen = len(sc.url.notices)
    url_gpus, url_tp, url_ep, url_dpa, url_redundant = _url_layout(sc)
    mix = _url_mix(sc)
    st.markdown("**Deployment and request mix**")
    c = st.columns(7)
    # the boxes take any number and the plan refuses what it cannot use, in the answer's
    # place: a box's own minimum kept the last value used behind a red "!" (GPUs 0 showed
    # while the figures were 4 GPUs'; a TTFT target of 0.001 s while the answer said 2 s)
    gpus = c[0].number_input("GPUs", 0, 4096, url_gpus, key="plan_gpus")
    tp = c[1].number_input(
        "tensor parallel", 1, 4096, max(1, min(int(gpus), url_tp)), key="plan_tp"
    )
    isl = c[2].number_input("input tokens", 1, 1 << 20, mix["isl"], key="plan_isl")
    osl = c[3].number_input("output tokens", 1, 1 << 20, mix["osl"], key="plan_osl")
    conc = c[4].number_input(
        "requests in flight",
        1,
        1 << 22,
        mix["conc"],
        key="plan_conc",
        placeholder="auto",
        help="Empty (auto): the most that meet both latency targets (not as many as fit), "
        "shown below the box once found.",
    )
    conc_slot = c[4].empty()  # auto: the count the answer found, written once it is
    ttft = c[5].number_input(
        "TTFT target (s)", 0.0, 600.0, mix["ttft"], key="plan_ttft", format="%g"
    )
    tpot_ms = c[6].number_input(
        "TPOT target (ms)", 0.0, 10_000.0, mix["tpot"], key="plan_tpot", format="%g"
    )
    with st.expander("Layout, memory and engine"):
        c1, c2, c3, c4 = st.columns(4)
        ep = c1.number_input(
            "expert parallel",
            1,
            4096,
            url_ep,
            key="plan_ep",
            disabled=not sc.model.is_moe,  # no routed experts to spread: plan refuses ep > 1
            help=None if sc.model.is_moe else f"{sc.model.label} has no routed experts.",
        )
        pp = c2.number_input("pipeline stages", 1, 64, 1, key="plan_pp")
        page = _page_input(c3, sc)
        moe = sc.model.is_moe  # plan refuses DP-attention and two-batch overlap without experts
        dp_attention = c4.checkbox(
            "DP-attention",
            url_dpa,
            key="plan_dpa",
            disabled=not moe,
            help="Data-parallel attention (each attention replica serves its own sequences); "
            "the experts are shared by the stage."
            if moe
            else f"{sc.model.label} has no routed experts: DP-attention would be plain data "
            "parallelism.",
        )
        c1, c2, c3, c4 = st.columns(4)
        if not moe and st.session_state.get("plan_overlap") == "tbo":  # kept from a MoE model
            st.session_state["plan_overlap"] = "none"
        overlap = c1.selectbox(
            "overlap",
            ["none", "tbo"] if moe else ["none"],
            key="plan_overlap",
            help=None
            if moe
            else f"{sc.model.label} has no routed experts: two-batch overlap is for MoE models.",
        )
        mode = c2.selectbox("prefill / decode", ["aggregated", "disaggregated"], key="plan_mode")
        prefill_pass = c3.selectbox(
            "prompts' forward pass (aggregated)",
            ["fused", "separate"],
            key="plan_prefill_pass",
            help="fused: new prompts run in the decode batch's pass; separate: in a pass of "
            "their own before the decode pass (the first token leaves with the step).",
            disabled=mode != "aggregated",
        )
        lag = c4.number_input(
            "output lag (steps, aggregated)",
            0,
            1024,
            0,
            key="plan_output_lag",
            help="Steps between computing a token and the client getting it: TTFT grows by "
            "as many.",
            disabled=mode != "aggregated",
        )
        redundant = c1.number_input(
            "redundant experts",
            0,
            4096,
            url_redundant,
            key="plan_redundant",
            disabled=not moe,
            help="Expert slots beyond the routed experts, spread over the expert-parallel "
            "ranks (EPLB's replicas), so that the slots divide evenly: 32 for EP72 with 256 "
            "experts (--redundant-experts)."
            if moe
            else f"{sc.model.label} has no routed experts.",
        )
        # the prefill pool's inputs and, below the mode, the prefix cache's hit
        pool = _read_prefill_pool(sc, mode) | _prefix_inputs(c2, int(isl), mix)
        price = _price_input(c3, mix["price"])
        reserve, engine_memory = _memory_inputs(sc)
        moe_backend = _moe_backend_input(sc)
        expert_dtype = _expert_dtype_input(sc) if moe else None
    show_notices(sc.url, seen)
    tp_used = _dp_attention_tp(int(gpus), int(tp), int(pp), bool(dp_attention) and moe)
    st.query_params.update({"gpus": str(gpus), "tp": str(tp)})
    _layout_to_url(moe, int(ep), bool(dp_attention), int(redundant), expert_dtype)
    _mix_to_url(
        dict(isl=isl, osl=osl, conc=conc, ttft=ttft, tpot=tpot_ms, price=price)
        | dict(hit=pool["prefix_cache_hit"], shared=pool["shared_prefix"])
    )
    return conc_slot, PlanInputs(
        gpus=int(gpus),
        tp=tp_used,
        ep=int(ep) if sc.model.is_moe else 1,  # a disabled box keeps its old value
        page=int(page),
        pp=int(pp),
        dp_attention=bool(dp_attention) and moe,  # a disabled box keeps its old value
        overlap=overlap if moe else "none",
        mode=mode,
        reserve=float(reserve),
        engine_memory=engine_memory,
        isl=int(isl),
        osl=int(osl),
        conc=int(conc or 0),
        prefill_pass=prefill_pass,
        lag=int(lag),
        ttft=float(ttft),
        tpot=float(tpot_ms) / 1e3,
        redundant_experts=int(redundant) if moe else 0,
        moe_backend=moe_backend,
        expert_dtype=expert_dtype,
        gpu_hour_price=float(price) if price else None,  # empty or 0: no price
        **pool,
    )


def _dp_attention_tp(gpus: int, tp: int, pp: int, dp_attention: bool) -> int:
    """The tensor-parallel degree the plan runs: ``tp``, or 1 where DP-attention is ticked
    and ``tp`` takes every GPU of a stage (one attention group, which plan refuses). SGLang
    users type exactly this (``--tp 8 --dp 8 --enable-dp-attention``: the attention's own
    tensor parallelism is tp / dp, from recall), so it is planned as TP1 DP-attention over
    the stage's GPUs, said in one line under the inputs."""
    if not dp_attention or tp == 1 or tp * pp != gpus:
        return tp
    st.caption(
        f"DP-attention with tensor parallel {tp} on {gpus} GPUs is one attention group: "
        f"planned as TP1 DP-attention{tp} (SGLang's --tp {tp} --dp {tp} "
        "--enable-dp-attention); set tensor parallel below it for wider attention groups."
    )
    return 1


def _page_input(column: Any, sc: Scenario) -> int:
    """The page size box: the engine's own page for the model and device (``plan --engine``'s
    default, SGLang 1 (64 for DSA, and for MLA on datacenter Blackwell), vLLM 16 or 64 for MLA,
    TensorRT-LLM 32), one box per engine, device and default page so that choosing another
    engine or device, or a model whose attention (MLA, DSA) gives another page, resets it
    (keyed by engine and device only, DeepSeek-V3 -> DeepSeek-V3.2 under SGLang kept page 1
    where the plan takes 64)."""
    own = model_page_size(sc.engine, sc.model, sc.device)
    key = f"plan_page_{sc.engine}_{sc.hardware}_{own}"
    return column.number_input("page size (tokens)", 1, 4096, own, key=key)


def _price_input(column: Any, url_price: float | None) -> float | None:
    """The GPU-hour price box (``mlacalc plan --gpu-hour-price``), empty by default: no price
    is assumed; ``url_price``: the URL's ``price``."""
    return column.number_input(
        "GPU-hour price ($)",
        0.0,
        10_000.0,
        url_price,
        key="plan_price",
        placeholder="none",
        format="%g",
        help="US dollars one GPU costs an hour (yours: none is assumed): the answer adds "
        "what a million output tokens cost at it (--gpu-hour-price). Empty or 0: none.",
    )


def _prefix_hit_input(column: Any, url_hit: float = 0.0) -> float:
    """The share of each prompt's tokens found cached (``mlacalc plan --prefix-cache-hit``):
    up to 0.999, shown to 3 decimals (the CLI takes anything below 1; the box stopped at 0.99);
    ``url_hit``: the URL's ``hit``, its first value."""
    return column.number_input(
        "prefix cache hit (share of a prompt)",
        0.0,
        0.999,
        url_hit,
        0.05,
        format="%.3f",
        key="plan_prefix_hit",
        help="Share of each prompt's tokens whose KV is found cached (SGLang's radix cache, "
        "vLLM's prefix caching): the prefill computes the rest, attending the cached tokens; "
        "the cache is still sized for whole prompts (--prefix-cache-hit). The search below "
        "times its prompts at the same hit.",
    )


def _prefix_inputs(column: Any, isl: int, mix: dict[str, Any]) -> dict[str, Any]:
    """The prefix cache's hit and the shared prefix, one box under the other; their first
    values the URL's ``hit`` and ``shared`` (:func:`_url_mix`)."""
    return {
        "prefix_cache_hit": _prefix_hit_input(column, float(mix["hit"])),
        "shared_prefix": _shared_prefix_input(column, isl, int(mix["shared"])),
    }


def _shared_prefix_input(column: Any, isl: int, url_shared: int = 0) -> int:
    """The tokens every prompt begins with alike (``mlacalc plan --shared-prefix``), below
    the input tokens (a box past them is held at ``isl - 1``; a URL's past them too)."""
    if st.session_state.get("plan_shared_prefix", 0) > max(isl - 1, 0):
        st.session_state["plan_shared_prefix"] = max(isl - 1, 0)
    return int(
        column.number_input(
            "shared prefix (tokens)",
            0,
            max(isl - 1, 0),
            min(url_shared, max(isl - 1, 0)),
            1024,
            key="plan_shared_prefix",
            help="Tokens every prompt begins with alike (a shared system prompt or document "
            "set): their KV is held once per attention group and found cached by every "
            "request after the first, so more requests fit (--shared-prefix).",
        )
    )


#: the CLI's bounds of a prefill pool's counts (``--prefill-gpus``, ``--prefill-tp``,
#: ``--prefill-ep``: mlacalc.cli.common.COUNT)
_POOL_MAX = 1 << 20


def _read_prefill_pool(sc: Scenario, mode: str) -> dict[str, Any]:
    """The prefill pool's widgets (one row beside the mode, on under ``disaggregated`` only)
    and their :class:`PlanInputs` fields: an empty box is plan()'s default (as many GPUs as
    the decode pool, the layout derived from it), as the CLI's flag left out."""
    off = mode != "disaggregated"
    moe = sc.model.is_moe
    c1, c2, c3, c4 = st.columns(4)
    counts = {}
    for col, key, label, default in (
        (c1, "gpus", "prefill GPUs", "as many as decode"),
        (c2, "tp", "prefill tensor parallel", "the decode pool's"),
        (c3, "ep", "prefill expert parallel", "from the decode pool's"),
    ):
        counts[key] = col.number_input(
            f"{label} (disaggregated)",
            1,
            _POOL_MAX,
            None,
            key=f"plan_prefill_{key}",
            placeholder=default,
            disabled=off or (key == "ep" and not moe),
            help=f"--prefill-{key}; empty: {default}.",
        )
    dpa = c4.selectbox(
        "prefill DP-attention (disaggregated)",
        ["as decode", "on", "off"],
        key="plan_prefill_dpa",
        disabled=off or not moe,
        help="--prefill-dp-attention / --no-prefill-dp-attention; as decode: the decode pool's.",
    )
    if off:  # a disabled box keeps its old value: the aggregated plan has no prefill pool
        return {}
    return {
        "prefill_gpus": None if counts["gpus"] is None else int(counts["gpus"]),
        "prefill_tp": None if counts["tp"] is None else int(counts["tp"]),
        "prefill_ep": None if counts["ep"] is None or not moe else int(counts["ep"]),
        "prefill_dp_attention": {"on": True, "off": False}.get(dpa) if moe else None,
    }


def _layout_args(sc: Scenario, inputs: PlanInputs) -> dict:
    """The deployment's arguments to :func:`mlacalc.plan` (no workload)."""
    if inputs.gpus % (inputs.tp * inputs.pp):
        raise mlacalc.InvalidArgumentError(
            "tp",
            f"tensor parallel {inputs.tp} x pipeline stages {inputs.pp} must divide the "
            f"{inputs.gpus} GPUs",
        )
    return dict(
        tp=inputs.tp,
        ep=inputs.ep,
        redundant_experts=inputs.redundant_experts,
        pp=inputs.pp,
        dp_attention=inputs.dp_attention,
        overlap=inputs.overlap,
        weight_dtype=sc.sized_weight_dtype,
        kv_dtype=sc.kv_dtype,
        page_size=inputs.page,
        state_dtype=sc.state_dtype,  # None: the model keeps no recurrent state
        **memory_args(inputs),
        **({"moe_backend": inputs.moe_backend} if inputs.moe_backend else {}),
        **({"component_dtypes": {"experts": inputs.expert_dtype}} if inputs.expert_dtype else {}),
    )


#: The routed experts' formats the planner offers (``mlacalc plan --expert-dtype``): the
#: storage formats with their scales, and the plain dtypes; "" keeps the other weights'.
EXPERT_DTYPES = ("", "nvfp4", "mxfp4", "mxfp4_mxfp8", "fp8", "bf16", "int4", "fp4")
#: What each 4-bit choice stores, said beside the box (the sidebar's "fp4" is the last).
FP4_WORDS = (
    "nvfp4: 4-bit values, an fp8 scale per 16 (4.5 bits a weight); mxfp4: an 8-bit scale "
    "per 32 (4.25 bits); fp4 (as the sidebar's weight dtype): 4 bits every weight, no scales."
)


def _expert_dtype_input(sc: Scenario) -> str | None:
    """The routed experts' weight format (``mlacalc plan --expert-dtype``; URL ``experts``),
    None to keep the other weights' (the sidebar's weight dtype, or the checkpoint's)."""
    # a bad URL value's notice reads "using the other weights' format" (was "using as the
    # weights", a trial found it garbled)
    same = "the other weights' format"
    url = sc.url.choice("experts", list(EXPERT_DTYPES[1:]), same, "expert dtype")
    url = "" if url == same else url
    if "plan_expert_dtype" not in st.session_state:
        st.session_state["plan_expert_dtype"] = url
    picked = st.selectbox(
        "routed experts' weights",
        EXPERT_DTYPES,
        key="plan_expert_dtype",
        format_func=lambda o: o or "as the weights",
        help="--expert-dtype: the routed experts' format, scales counted; the other weights "
        "keep the sidebar's weight dtype. " + FP4_WORDS,
    )
    if picked:
        st.caption(FP4_WORDS)
    return picked or None


def memory_words(sc: Scenario, inputs: PlanInputs) -> str:
    """The plan form's memory rule in the CLI's words (``--engine-memory`` by its option)."""
    if inputs.engine_memory is None:
        return f"memory_reserve {inputs.reserve:.4g} of each GPU"
    option, what = ENGINE_MEMORY[sc.engine]
    return f"{ENGINE_LABELS[sc.engine]}'s {option} {inputs.engine_memory:.4g} ({what})"


def memory_args(inputs: PlanInputs) -> dict:
    """The plan form's memory rule as :func:`mlacalc.plan` and :func:`search` both take it
    (``mlacalc plan`` / ``mlacalc search --memory-reserve`` or ``--engine-memory``): the
    engine's own setting where ticked, in place of the reserve (both refuse the two), else
    the reserve's slider."""
    if inputs.engine_memory is not None:
        return {"memory_reserve": None, "engine_memory": inputs.engine_memory}
    return {"memory_reserve": inputs.reserve, "engine_memory": None}


#: The MoE backend box's choices and what each passes (``plan(moe_backend=)``)
MOE_BACKEND_CHOICES = {"CUTLASS (default)": None, "TensorRT-LLM-gen (trtllm-gen)": "trtllm-gen"}


def _moe_backend_input(sc: Scenario) -> str | None:
    """TensorRT-LLM's MoE backend (``mlacalc plan --moe-backend``), a box shown for a MoE model
    under TensorRT-LLM on data-centre Blackwell only (elsewhere plan refuses it): None, its
    default CUTLASS MoE, or ``trtllm-gen`` (nvfp4 experts timed as TensorRT-LLM-gen's)."""
    if sc.engine != "trtllm" or not sc.model.is_moe or not device_figures(sc.device).tcgen05:
        return None
    label = st.selectbox(
        "TensorRT-LLM MoE backend",
        list(MOE_BACKEND_CHOICES),
        key="plan_moe_backend",
        help="moe_config.backend (from recall): TensorRT-LLM-gen's MoE times nvfp4 experts "
        "(fp4 weights) with the B200 table's min-latency rows, 0.47-0.72x the CUTLASS MoE's "
        "time; other experts are refused (--moe-backend trtllm-gen).",
    )
    return MOE_BACKEND_CHOICES[label]


def _memory_inputs(sc: Scenario) -> tuple[float, float | None]:
    """The memory reserve's slider and the engine's own setting, where ticked."""
    reserve = st.slider(
        "memory reserve (activations, workspace)",
        0.0,
        0.5,
        D.MEMORY_RESERVE,
        0.01,
        key="plan_reserve",
    )
    return reserve, _engine_memory_input(sc)


def _engine_memory_input(sc: Scenario) -> float | None:
    """The engine's own memory setting, where ticked (``mlacalc plan --engine-memory``, read
    by the engine's meaning; :data:`mlacalc.serving.capacity.ENGINE_MEMORY`), else None."""
    option, what = ENGINE_MEMORY[sc.engine]
    own = st.checkbox(
        f"size the memory by the engine's {option} instead",
        False,
        key="plan_engine_memory_on",
        help=f"The engine's own setting, a share {what} (from recall); in place of the reserve.",
    )
    if not own:
        return None
    # one box per engine: a share typed under one engine's meaning is not another's
    key = f"plan_engine_memory_{sc.engine}"
    share = st.number_input(option, 0.01, 1.0, 0.9, 0.01, format="%.4f", key=key)
    return float(share)


def _serving_args(inputs: PlanInputs) -> dict:
    """The request mix's arguments to :func:`mlacalc.plan` (without the concurrency and the
    engine): plan(engine=) takes the engine's scheduler defaults itself, as ``mlacalc plan
    --engine`` does (its chunked prefill in the aggregated mode only). Passing them here too
    would read as asked: plan says overlap scheduling asked with no host time changes nothing."""
    serving = dict(isl=inputs.isl, osl=inputs.osl, mode=inputs.mode)
    if inputs.prefix_cache_hit:
        serving["prefix_cache_hit"] = inputs.prefix_cache_hit
    if inputs.shared_prefix:
        serving["shared_prefix"] = inputs.shared_prefix
    if inputs.mode == "aggregated":
        serving.update(prefill_pass=inputs.prefill_pass, output_lag_steps=inputs.lag)
    else:
        serving.update(  # the prefill pool as set (None: plan()'s default, as the CLI's)
            prefill_gpus=inputs.prefill_gpus,
            prefill_tp=inputs.prefill_tp,
            prefill_ep=inputs.prefill_ep,
            prefill_dp_attention=inputs.prefill_dp_attention,
        )
    return serving


def scheduler_caption(engine: str, mode: str) -> str:
    """What the answer says of the scheduler defaults it took, in the CLI's words."""
    chunked = None if mode == "aggregated" else "none (disaggregated)"
    return (
        f"Scheduler: {engine}'s defaults {defaults_words(engine, chunked)}, as "
        f"`mlacalc plan --engine {engine}` takes them."
    )


def meets(p, ttft: float, tpot: float) -> bool:
    """Whether a plan meets both latency targets (a growing queue meets none)."""
    return (
        p.fits
        and p.ttft_s is not None
        and math.isfinite(p.ttft_s)
        # one output token a request has no TPOT (None): no gap to miss the target
        and (p.tpot_s is None or p.tpot_s <= tpot)
        and p.ttft_s <= ttft
    )


def missed_targets(p, ttft: float, tpot: float) -> list[str]:
    """The targets a plan that fits misses, each with the plan's figure (a growing queue misses
    TTFT; no time at all misses the target it has no figure for); empty when it meets both."""
    out = []
    if p.ttft_s is None:
        out.append(f"TTFT <= {ttft:g} s")
    elif not math.isfinite(p.ttft_s):
        out.append(f"TTFT <= {ttft:g} s (the queue grows)")
    elif p.ttft_s > ttft:
        out.append(f"TTFT <= {ttft:g} s ({p.ttft_s:,.2f} s)")
    if p.tpot_s is None:
        if p.ttft_s is None:  # one output token (a TTFT, no TPOT) has no gap to miss
            out.append(f"TPOT <= {tpot * 1e3:g} ms")
    elif p.tpot_s > tpot:
        out.append(f"TPOT <= {tpot * 1e3:g} ms ({p.tpot_s * 1e3:,.2f} ms)")
    return out


@st.cache_data(show_spinner=False, max_entries=512)
def most_meeting_targets(
    model, hardware: str, gpus: int, args: tuple, ttft: float, tpot: float
) -> Load | None:
    """The most requests in flight whose plan meets both targets: TTFT and TPOT grow with the
    requests in flight, so a bisection between one and as many as fit finds it (a dozen plans
    of ~15 ms, cached). None when the deployment does not fit."""
    kwargs = dict(args)
    full = mlacalc.plan(model, hardware, gpus, **kwargs)
    if not full.fits or not full.concurrency:
        return None
    hi = max(1, int(full.concurrency))
    if meets(mlacalc.plan(model, hardware, gpus, **kwargs, concurrency=float(hi)), ttft, tpot):
        return Load(hi, "memory")
    if not meets(mlacalc.plan(model, hardware, gpus, **kwargs, concurrency=1.0), ttft, tpot):
        return Load(1, "none")
    lo = 1  # lo meets the targets, hi does not
    while hi - lo > 1:
        mid = (lo + hi) // 2
        p = mlacalc.plan(model, hardware, gpus, **kwargs, concurrency=float(mid))
        lo, hi = (mid, hi) if meets(p, ttft, tpot) else (lo, mid)
    return Load(lo, "targets")


def _serving_plan(sc: Scenario, inputs: PlanInputs):
    """The plan of the request mix on the widgets' deployment at the requests in flight asked
    (or the most meeting the targets) and that load; (None, None) after showing the error."""
    try:
        args = {**_layout_args(sc, inputs), **_serving_args(inputs), "engine": sc.engine}
        load = Load(inputs.conc, "asked") if inputs.conc else None
        if load is None:
            load = most_meeting_targets(
                sc.model,
                sc.hardware,
                inputs.gpus,
                tuple(sorted(args.items())),
                inputs.ttft,
                inputs.tpot,
            )
        conc = float(load.concurrency) if load else None
        return mlacalc.plan(sc.model, sc.hardware, inputs.gpus, **args, concurrency=conc), load
    except mlacalc.MlacalcError as exc:
        st.error(app_error_text(exc))
        return None, None


#: The plan's arguments whose boxes sit in the collapsed "Layout, memory and engine"
#: section, by their box: an error naming one says where it is set (a trial met "ep: expert
#: parallel degree 7 does not divide the 8 GPUs" with no ep box in sight)
SECTION_BOXES = {
    "ep": "expert parallel",
    "pp": "pipeline stages",
    "page_size": "page size (tokens)",
    "dp_attention": "DP-attention",
    "redundant_experts": "redundant experts",
    "overlap": "overlap",
    "memory_reserve": "memory reserve (activations, workspace)",
    "engine_memory": "the engine's memory setting",
    "moe_backend": "TensorRT-LLM MoE backend",
    "component_dtypes": "routed experts' weights",
    "prefix_cache_hit": "prefix cache hit (share of a prompt)",
    "shared_prefix": "shared prefix (tokens)",
    "output_lag_steps": "output lag (steps, aggregated)",
}


#: A fix an error gives as an argument and its CLI flag: ``redundant_experts=48
#: (--redundant-experts 48)``
_GIVEN_FIX = re.compile(r"(\w+)=(\S+?) \(--[\w-]+ [^)]*\)")


def app_error_text(exc: Exception) -> str:
    """An error as the page says it: a fix given as an argument and its CLI flag
    (``redundant_experts=48 (--redundant-experts 48)``) as the value in its box, where the
    page has one, and the box of the argument the fix sets pointed to (else the one the error
    names): a trial's Kimi-K2 at ep 72 was sent to the 'expert parallel' box with the CLI's
    ``--redundant-experts 48``."""
    text, fixed = str(exc), None

    def box_value(match: re.Match) -> str:
        nonlocal fixed
        box = SECTION_BOXES.get(match.group(1))
        if box is None:
            return match.group(0)
        fixed = fixed or match.group(1)
        return f"{match.group(2)} in the {box!r} box"

    text = _GIVEN_FIX.sub(box_value, text)
    return text + _section_of(fixed or getattr(exc, "argument", ""))


def _section_of(argument: str) -> str:
    """Where the box of an argument an error names sits, where it is not in sight."""
    box = SECTION_BOXES.get(argument)
    return f" (the {box!r} box, in 'Layout, memory and engine' below)" if box else ""


def answer_line(result, load: Load | None, inputs: PlanInputs, label: str) -> str:
    """The answer in one line: fits or not, the deployment, and at what load."""
    where = f"{label} on {result.total_gpus} x {result.hardware}"
    if result.mode == "disaggregated":
        where += f" ({result.gpus} decode + {result.prefill_gpus} prefill)"
    deployment = f"{where}, {result.layout}, weights {result.weight_format}, KV {result.kv_layout}"
    if not result.fits:
        return f"**Does not fit**: {deployment}. {result.overflow}"
    mix = f"{inputs.isl:,} in / {inputs.osl:,} out"
    targets = f"TTFT <= {inputs.ttft:g} s and TPOT <= {inputs.tpot * 1e3:g} ms"
    n = f"{result.concurrency:,.0f}"
    why = {
        None: "",
        "asked": f"{n} requests in flight (as asked)",
        "targets": f"{n} requests in flight: the most that meet {targets}",
        "memory": f"{n} requests in flight: as many as fit, and they meet {targets}",
        "none": f"1 request in flight: not even one meets {targets}",
    }[load.why if load else None]
    missed = missed_targets(result, inputs.ttft, inputs.tpot)
    meet = (
        ""
        if load and load.why != "asked"
        else (" Misses " + " and ".join(missed) + "." if missed else " Meets the targets.")
    )
    fits = "**Fits**"
    if kv_unrunnable(result):  # a trial read a green "Fits" over a cache the engine lacks
        fits = f"**Fits, in a KV cache ({result.kv_layout}) the engine cannot run here**"
    return f"{fits}: {deployment}; {mix} tokens per request, {why}.{meet}"


def kv_unrunnable(result) -> bool:
    """Whether plan warned that its engine cannot run the KV cache asked (on this device, or
    for this attention: ``plan_checks._engine_kv_warnings``): the answer is then no plain yes."""
    return any(
        w.startswith("--kv-dtype ") and "the figures are for a cache it cannot run" in w
        for w in result.warnings
    )


#: The start of plan's warning of TPOT set by other requests' prompts (plan's
#: ``with_prompt_interference``)
PROMPTS_WARNING = "other requests' prompts make "


def _show_price(column: Any, price: Any) -> None:
    """What a million output tokens cost at the user's GPU-hour price, with a million tokens
    and a request (and each pool's, disaggregated) under it, in ``mlacalc plan``'s words."""
    column.metric(
        "$ per million output tokens",
        money(price.usd_per_million_output_tokens),
        help="The GPUs' hour at your price over the output tokens they serve an hour, the "
        "prompts' passes included (docs/serving.md, 'Cost at your GPU-hour price').",
    )
    rows = price.rows()[2:]  # after the price given and the figure above
    column.caption("  \n".join(f"{k.strip()}: {v}" for k, v in rows))


def show_answer(result, load: Load | None, inputs: PlanInputs, label: str) -> None:
    """The answer at the top: one line, then TTFT, TPOT, tokens/s per GPU and per user and
    what binds; below them, the plan's warnings and where the times come from."""
    text = answer_line(result, load, inputs, label)
    plain = result.fits and meets(result, inputs.ttft, inputs.tpot) and not kv_unrunnable(result)
    (st.success if plain else st.warning)(text)
    if not result.fits or result.ttft_s is None:
        return
    if result.prediction:
        st.caption(prediction_line(result.prediction))
    # two rows of three, not five in one: at 800 px a fifth of the page cut every value
    top, rates = st.columns(3), st.columns(3)
    c = [top[0], top[1], rates[0], rates[1], top[2]]  # TTFT, TPOT, binding; the rates below
    c[0].metric("TTFT", result.ttft_text().split(" (")[0])
    # chunked prefill: the prompt's own steps, as `mlacalc plan` says them (Plan.ttft_parts)
    for label, s in result.ttft_parts():
        c[0].caption(f"{label}: {duration_text(s)}")
    if result.prefix_cache_text():  # the hit, as `mlacalc plan` says it
        c[0].caption(f"prefix cache hit: {result.prefix_cache_text()}")
    for label, text in pool_figures(result):
        c[0].caption(f"{label}: {text}")
    none = "n/a (1 token)"
    c[1].metric("TPOT", none if result.tpot_s is None else f"{result.tpot_s * 1e3:,.2f} ms")
    parts = result.tpot_parts()  # the words and figures `mlacalc plan` prints under TPOT
    if parts:
        c[1].caption("  \n".join(f"{label}: {s * 1e3:,.2f} ms" for label, s in parts))
    c[2].metric(
        "output tokens/s per GPU",
        f"{result.output_tokens_per_s_per_gpu:,.1f}",
        help="Output tokens per second of one GPU, the prompts' passes included.",
    )
    c[3].metric(
        "output tokens/s per user",
        none
        if result.output_tokens_per_s_per_user is None
        else f"{result.output_tokens_per_s_per_user:,.1f}",
        help="Output tokens per second one request receives.",
    )
    price = result.price(inputs.gpu_hour_price) if inputs.gpu_hour_price else None
    if price is not None:  # the user's price (none assumed), as plan --gpu-hour-price
        _show_price(rates[2], price)
    # a metric's value truncates ("memory band..."): label and value as text that wraps
    c[4].markdown(
        '<div style="font-size:0.875rem">binding</div>'
        f'<div style="font-size:1.5rem;line-height:1.25">{html.escape(result.binding)}</div>',
        unsafe_allow_html=True,
        help="What limits the decode step's time.",
    )
    for w in result.warnings:
        if w.startswith(PROMPTS_WARNING):  # the page's own boxes beside the commands
            w += (
                ". On this page: 'disaggregated' in the 'prefill / decode' box (in 'Layout, "
                "memory and engine' below), or 'search deployments' below"
            )
        st.info(w)
    # an answer inside a target only by the served figures' measured median bias, said as
    # search says it of its best point (a fleet engineer's trial: TPOT 50.00 ms for 50 ms)
    if meets(result, inputs.ttft, inputs.tpot):
        best = {"tpot_s": result.tpot_s, "ttft_s": result.ttft_s}
        fix = "set the {name} target to {held} to leave that margin"
        for w in target_edge_warnings(best, inputs.ttft, inputs.tpot, fix, "the answer's"):
            st.info(w[0].upper() + w[1:])
    if result.engine_memory is not None:  # the engine's own setting, and what it came to
        st.caption(f"Memory: {result.memory_setting}.")
    if result.prefix_cache_memory:  # what the memory assumes of the cached prefixes
        st.caption(f"KV memory with prefix caching: {result.prefix_cache_memory}.")
    _show_provenance(result)


#: How a device is timed where no one fitted device's fit is the source (``device_fit`` None)
_UNNAMED_FIT_WORDS = {
    "pooled": "by datasheet ratios from the pooled fit",
    "nearest_architecture": "by datasheet ratios from the pooled fit",
    "not_fitted": "by uncalibrated datasheet defaults",
    "measured_ceilings": "by the ratios of its measured ceilings",
}


def prediction_line(route: dict) -> str:
    """How far the times may be off, in one line: the route the device and the engine were
    predicted by (``Plan.prediction``) and the benchmark's median (and p90) |error| for it,
    or that none was measured."""
    engine = ENGINE_LABELS.get(route.get("engine", ""), route.get("engine", ""))
    device, fit = route.get("device", ""), route.get("device_fit")
    how = route.get("device_route", "")
    # a route with no one fitted device (pooled, uncalibrated, measured ceilings) names none
    words = f"{engine} on {device}, " + (
        "fitted"
        if how == "fitted"
        else f"from the {fit} fit ({how.replace('_', ' ')})"
        if fit
        else _UNNAMED_FIT_WORDS.get(how, how.replace("_", " "))
    )
    if route.get("nearest_architecture"):  # the pooled fit, the architecture it runs named
        words += f", nearest fitted architecture {route['nearest_architecture']}"
    if route.get("engine_route") == "stand_in":
        words += f", {route.get('engine_profile')}'s kernels standing in"
    elif route.get("engine_route") == "partly_stand_in":
        # the error is the engine's own kernels'; another engine's fits time the rest
        words += (
            f"; {route['stand_in_share']:.0%} of the decode step timed by another engine's "
            "fits, not measured on this one"
        )
    names = unmeasured_named(route)
    if names is not None:
        # a state update timed as a GEMM (no table measures it): outside the error said
        words += (
            f"; not the {route['unmeasured_share']:.0%} of the decode step no shared table "
            f"measures ({names}, timed by another kind of kernel's fit)"
        )
    e = route.get("expected_error")
    shape = f" But {route['geometry_note']}." if route.get("geometry_note") else ""
    # the kernel tables' error is each kernel's; the served figures' is beside it
    # the devices they were measured on, and none on this one, as the CLI says them
    served = (
        f" Not TTFT's or TPOT's: {serving_error_words(route.get('device', ''))}." if route else ""
    )
    if not e:
        return (
            f"Expected error of these times: not measured for this route ({words}).{served}{shape}"
        )
    p90 = f", p90 {e['p90']:.0%}" if e.get("p90") is not None else ""
    if e.get("of") == "own_residuals":  # a user's profile: its own fit's residuals
        return (
            f"Expected error of these times: median {e['median']:.1%}{p90} |error|, the "
            f"profile's own residuals on the rows it was fitted on ({words}; not README's "
            f"figures, which are the shipped profiles').{served}{shape}"
        )
    if e.get("of") == "floor":  # no table of its generation: the engine's transfer, a floor
        return (
            f"Expected error of these times: not measured for this route ({words}); at least "
            f"median {e['median']:.1%}{p90} |error|, a floor: the engine's leave-one-device-out "
            f"figures (README's 'How accurate the times are').{served}{shape}"
        )
    return (
        f"Expected error of these times: median {e['median']:.1%}{p90} |error| of the kernel "
        f"tables' rows ({words}; README's 'How accurate the times are').{served}{shape}"
    )


def pool_figures(result) -> list[tuple[str, str]]:
    """The prompt's own figures `mlacalc plan` prints beside TTFT: one prompt's pass (with its
    cached tokens), and a disaggregated plan's KV transfer and the two pools' rates."""
    out = []
    if result.prefill_s is not None:
        cached = result.prefix_cached_tokens
        words = f", {cached:,} found cached" if cached else ""
        out.append(
            (
                f"prefill of one {result.isl or result.seq_len:,}-token prompt{words}",
                duration_text(result.prefill_s),
            )
        )
    # a disaggregated plan's KV transfer, its link and the pools' rates: plan's own words
    out += [("KV transfer " + k if k == "link" else k, v) for k, v in result.disaggregated_parts()]
    return out


def _show_provenance(result) -> None:
    """One caption: the deployment per GPU and where the times come from."""
    how = engine_words(result.engine, result.profile, result.calibration)
    pools = f"{result.gpus} x {result.hardware} ({result.layout})"
    if result.prefill_gpus:  # disaggregated: both pools, as `mlacalc plan` says them
        pools = (
            f"{result.gpus} x {result.hardware} decode ({result.layout}) + "
            f"{result.prefill_gpus} prefill ({result.prefill_layout})"
        )
    # "calibrated" only where a fit vouches for the device (trial12: "the calibrated kernel
    # model's" one sentence before "MI300X ... unvalidated")
    vouched = "unvalidated" not in (result.calibration or "") and "uncalibrated" not in (
        result.calibration or ""
    )
    model = "calibrated kernel model's" if vouched else "kernel model's"
    st.caption(
        f"Per GPU: {pools}; times are the {model}, communication included"
        + (f" ({how})" if how else "")
        + f"; {_links_words(result)}."
    )


def _links_words(result) -> str:
    """The links' words of the plan's footer (:func:`mlacalc.serving.comm.network_words`):
    a node's, or GB200's NVLink domain of 72 GPUs and whether the deployment fits one."""
    from mlacalc.hardware.catalogue import load_hardware
    from mlacalc.serving.comm import network_words

    try:
        hw = load_hardware(result.hardware)
    except (mlacalc.MlacalcError, OSError):
        hw = None
    return network_words(hw, result.gpus + (result.prefill_gpus or 0))


def _show_capacity(sc: Scenario, inputs: PlanInputs) -> None:
    """Capacity at the sidebar's context and batch: the largest batch at that context and the
    longest context at that batch, under one rule for a context past the model's
    ``max_position_embeddings`` (counted as if the model were trained for it, said once)."""
    try:
        cap = mlacalc.plan(
            sc.model,
            sc.hardware,
            inputs.gpus,
            **_layout_args(sc, inputs),
            seq_len=sc.seq_len,
            batch=sc.batch,
            engine=sc.engine,
        )
    except mlacalc.MlacalcError as exc:
        st.error(str(exc))
        return
    st.markdown(
        f"**Capacity at the sidebar's workload** ({sc.seq_len:,} tokens, batch {sc.batch:,})"
    )
    beyond = context_text(sc.model, sc.seq_len)
    if beyond:
        st.info(f"{beyond}.", icon=":material/warning:")
    c1, c2, c3 = st.columns(3)
    c1.metric(f"largest batch at {sc.seq_len:,} tokens", f"{cap.max_batch:,}")
    # past the limit every figure is counted as if the model were trained for it: the longest
    # context is then memory's own; within it, the limit caps it and memory's figure is named
    longest = cap.max_context_memory if beyond else cap.max_context
    c2.metric(f"longest context at batch {sc.batch:,}", f"{longest:,}" if longest else "-")
    if not beyond and cap.max_context_memory and cap.max_context_memory > (cap.max_context or 0):
        c2.caption(cap.longest_context_text())
    c3.metric(
        f"decode tokens/s at batch {cap.decode_batch:,}" if cap.decode_batch else "decode tokens/s",
        f"{cap.decode_tokens_per_s:,.0f}" if cap.decode_tokens_per_s else "nothing fits",
        help="Steps that only decode, all GPUs.",
    )
    if 0 < cap.max_batch < sc.batch:
        st.info(
            f"A batch of {sc.batch:,} at {sc.seq_len:,} tokens does not fit: {cap.max_batch:,} do."
        )
    elif not cap.fits and cap.binding != "weights":  # the weights: the answer above says it
        st.info(f"Does not fit: {cap.overflow}")


def _show_memory(result, context: int, compressed: bool = False, copied: bool = False) -> None:
    """What fills one GPU: a line in GiB (KV per token in its own unit), then the stacked bar
    of its parts. ``compressed`` (DeepSeek-V4): no layer keeps every token; a token adds its
    share of the pooled keys. ``copied``: an MLA latent every tensor-parallel rank keeps
    whole, said in the line as the CLI's row says it (the plan's warning says what it costs)."""
    per_token = (
        f": **{human_bytes(result.kv_bytes_per_token_per_gpu)}**"
        if result.kv_every_token
        else (
            ", pooled keys averaged over the compress ratios: "
            if compressed
            else " in the layers keeping every token: "
        )
        + f"**{human_bytes(result.kv_bytes_per_token_full_layers_per_gpu)}**, plus "
        f"**{human_bytes(result.kv_bytes_fixed_per_sequence_per_gpu)}** per sequence "
        + (
            f"(windows, linear states: the recurrent state in {result.state_dtype})"
            if result.state_dtype
            else "(windows, linear states)"
        )
    )
    st.markdown(
        f"**At the request mix** ({context:,} tokens a sequence, input and output): largest "
        f"batch **{counted(result.max_batch, 'sequence')}**; weights per "
        f"GPU: **{gib(result.weights_per_gpu_bytes)}** ({result.weight_format}); KV budget per "
        f"GPU: **{gib(max(result.kv_budget_per_gpu_bytes, 0))}**; KV per token per GPU"
        + (" (latent copied on every TP rank)" if copied else "")
        + per_token
        + f"; one sequence of {context:,} tokens, every layer kind: "
        f"**{human_bytes(result.kv_bytes_per_sequence_per_gpu)}**"
    )
    st.plotly_chart(memory_figure(memory_parts(result, context)), width="stretch", key="plan_chart")


def memory_parts(result, context: int) -> dict[str, int]:
    """Bytes of one GPU by part: the weights' parts, the running batch's KV (a shared
    prefix's once, each sequence the rest of its context), reserve, free."""
    running = result.running_batch_per_group or 0
    shared = result.kv_bytes_shared_prefix_per_gpu if running else 0
    kv_used = min(
        max(result.kv_budget_per_gpu_bytes, 0),
        int(shared + (result.kv_bytes_per_sequence_per_gpu - shared) * running),
    )
    fill = {
        k[8:].replace("_", " "): v for k, v in result.memory.items() if k.startswith("weights_")
    }
    fill[f"KV ({running:,.0f} x {context:,})"] = kv_used
    fill["reserve"] = result.memory_per_gpu_bytes - result.usable_per_gpu_bytes
    fill["free"] = max(0, result.usable_per_gpu_bytes - result.weights_per_gpu_bytes - kv_used)
    return fill


def memory_figure(fill: dict[str, int]) -> go.Figure:
    """One horizontal bar of GiB, stacked by part, each part in its fixed colour."""
    spare = iter(range(len(fill)))
    fig = go.Figure(
        [
            go.Bar(
                name=k,
                x=[v / 2**30],
                y=["one GPU"],
                orientation="h",
                marker_color=part_colour(k, next(spare)),
            )
            for k, v in fill.items()
        ]
    )
    fig.update_layout(
        title="Memory of one GPU",
        barmode="stack",
        xaxis_title="GiB",
        height=340,
        margin=dict(t=50, b=110),
        # below the axis title, in the bar's order, wrapping: a side legend scrolls past ~8 parts
        legend=dict(orientation="h", yanchor="top", y=-0.55, x=0, traceorder="normal"),
    )
    return fig


def _show_kernels(result, model) -> None:
    """The decode step's kernels, slowest first, each attention kernel with the kind of layer
    it runs in (a model of full and sliding layers has an ``attention`` of each; nothing when
    no step was timed)."""
    if not result.kernels:
        return
    kinds = attention_kind_labels(
        [k["name"] for k in result.kernels],
        [k["calls"] for k in result.kernels],
        attention_cost(model, "decode", result.context, 1).group_labels,
    )
    parts, caption = result.step_parts_shares()  # as `mlacalc plan` prints them
    if parts:
        st.markdown("**Decode step by component**")
        show_table(
            [
                {"component": name, "ms a step": f"{t * 1e3:,.2f}", "share": f"{share:.1%}"}
                for name, t, share in parts
            ],
            right=("ms a step", "share"),
        )
        st.caption(caption)
    if result.overlap == "tbo" and result.kernels_scope:  # the rows are one micro-batch's
        st.markdown(f"**Decode step by kernel**: {result.kernels_scope}")
    else:
        st.markdown("**Decode step of one GPU, by kernel** (all calls of the step)")
    show_table(
        [
            {
                "kernel": k["name"],
                **({"layer kind": kinds[i]} if kinds else {}),
                "kind": k["kind"],
                "calls": k["calls"],
                # as text in `mlacalc plan`'s digits: a number column rounds to the browser's
                # locale (0.6995 read "0.7" where the CLI prints 0.699)
                "ms": f"{k['seconds'] * 1e3:,.3f}",
                "link": k["communication"],
            }
            for i, k in sorted(enumerate(result.kernels), key=lambda ik: -ik[1]["seconds"])
        ],
        right=("ms",),
    )


def _show_search(
    sc: Scenario, inputs: PlanInputs, limits: tuple[tuple[str, Any], ...] = ()
) -> None:
    """Search deployments at half, the same and twice the GPUs against the targets above
    (within ``limits``, :func:`layout_limits`): the frontier chart, the chosen point in words,
    why the others lose, the frontier's download."""
    gpus = int(inputs.gpus)
    counts = tuple(sorted({max(1, gpus // 2), gpus, gpus * 2}))
    # the aggregated points run the engine chosen above (prompts' pass, output lag)
    points, frontier, best, reasons, secs, said, how = _search(
        sc.model,
        sc.hardware,
        counts,
        inputs.isl,
        inputs.osl,
        inputs.ttft,
        inputs.tpot,
        inputs.prefill_pass,
        inputs.lag,
        sc.engine,
        limits,
        inputs.prefix_cache_hit,
        inputs.page,
        tuple(memory_args(inputs).items()),  # the plan form's reserve or engine's setting
        inputs.moe_backend,  # the plan form's MoE backend, where the points' experts take it
        sc.state_dtype,
        inputs.shared_prefix,
    )
    fig = frontier_figure(points, frontier, best, secs, inputs.tpot, inputs.ttft)
    st.plotly_chart(fig, width="stretch", key="plan_frontier")
    st.markdown(best_text(best, points, inputs.ttft, inputs.tpot))
    for w in said:  # a format the engine or device cannot run as asked, as the CLI says it
        st.info(w)
    if best:
        st.caption(f"The chosen deployment's times: {how}.")
        _show_throughput_target(points, best, int(inputs.isl), int(inputs.osl))
    st.caption(f"Every deployment sized by the plan form's memory: {memory_words(sc, inputs)}.")
    if best and best.get("prefill_layout"):
        st.caption(
            f"The chosen prefill pool ({best['prefill_gpus']} GPUs "
            f"{layout_text(best, 'prefill_')}) is the planner's to time: set its prefill GPUs, "
            "tensor and expert parallel and DP-attention above (disaggregated), as `mlacalc "
            "plan --prefill-gpus --prefill-tp --prefill-ep --prefill-dp-attention` takes them."
        )
    _show_reasons(len(points), *reasons)
    download(frontier, f"{sc.model.name}-frontier", "dl_frontier")


def _show_throughput_target(points: list[dict], best: dict, isl: int, osl: int) -> None:
    """A throughput target (0: none) and the GPUs it needs, in whole replicas of the point
    meeting the targets that needs the fewest, as `mlacalc search --throughput
    --throughput-of` and ``SearchResult.gpus_for`` give them."""
    c1, c2 = st.columns(2)
    target = c1.number_input(
        "throughput target (tokens/s, 0 = none)", 0.0, 1e12, 0.0, 1000.0, key="plan_throughput"
    )
    of = c2.selectbox("counting", ("output", "total"), key="plan_throughput_of",
                      help="output tokens, or prompt and output tokens (total)")  # fmt: skip
    if not target:
        return
    t = throughput_gpus(points, best, isl, osl, float(target), of=of)
    what = "output tokens/s" if of == "output" else "tokens/s (prompt + output)"
    st.markdown(
        f"**{t['gpus']:,} GPUs for {target:,.0f} {what}**: {t['replicas']:,} replica(s) of "
        f"{t['layout']} ({t['mode']}, {t['replica_gpus']} GPUs, "
        f"{t['replica_tokens_per_s']:,.0f} {what} each), {t['tokens_per_s']:,.0f} in all"
        + (
            ""
            if t["point"] is best
            else "; not the chosen deployment: whole replicas of it come to more GPUs"
        )
        + "."
    )


#: Marker colours by GPU count (the total of a disaggregated deployment), in count order.
GPU_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b")


def total_gpus(p: dict) -> int:
    """Every GPU of a searched deployment (a disaggregated one's decode and prefill pools)."""
    return int(p["gpus"])


def frontier_figure(
    points: list[dict],
    frontier: list[dict],
    best: dict | None,
    secs: float,
    tpot: float | None = None,
    ttft: float | None = None,
):
    """Per-GPU against per-user output speed: the deployments, one colour per GPU count (one
    trace per count, not per point), the Pareto frontier, the TPOT target as the per-user
    speed it implies (1 / TPOT: points right of it meet it), the TTFT target as a cross on the
    points that miss it, the chosen one (a star)."""
    fig = go.Figure()
    counts = sorted({total_gpus(p) for p in points})
    for i, n in enumerate(counts):
        mine = [p for p in points if total_gpus(p) == n]
        fig.add_scattergl(  # WebGL: thousands of points draw in a fraction of SVG's time
            x=[p["output_tokens_per_s_per_user"] for p in mine],
            y=[p["output_tokens_per_s_per_gpu"] for p in mine],
            mode="markers",
            name=f"{n} GPUs",
            marker=dict(size=5, opacity=0.45, color=GPU_COLOURS[i % len(GPU_COLOURS)]),
        )
    late = [p for p in points if ttft and not (p["ttft_s"] is not None and p["ttft_s"] <= ttft)]
    if late:
        fig.add_scattergl(
            x=[p["output_tokens_per_s_per_user"] for p in late],
            y=[p["output_tokens_per_s_per_gpu"] for p in late],
            mode="markers",
            name=f"misses TTFT {ttft:g} s",
            marker=dict(size=7, symbol="x", color="#7f7f7f"),
        )
    fig.add_scatter(
        x=[p["output_tokens_per_s_per_user"] for p in frontier],
        y=[p["output_tokens_per_s_per_gpu"] for p in frontier],
        mode="lines+markers",
        name="Pareto frontier",
        line=dict(color="#333333"),
    )
    if tpot:
        fig.add_vline(
            x=1 / tpot,
            line_dash="dash",
            line_color="#d62728",
            annotation_text=f"TPOT target {tpot * 1e3:g} ms",
            annotation_position="top right",
        )
    if best:
        fig.add_scatter(
            x=[best["output_tokens_per_s_per_user"]],
            y=[best["output_tokens_per_s_per_gpu"]],
            mode="markers",
            name="chosen: best meeting the targets",
            marker=dict(size=16, symbol="star", color="#ffbf00", line=dict(color="black", width=1)),
        )
    fig.update_layout(
        title=f"{len(points):,} deployments searched in {secs:.2f} s",
        xaxis_title="output tokens/s per user",
        yaxis_title="output tokens/s per GPU",
        height=440,
    )
    return fig


def best_text(best: dict | None, points: list[dict], ttft: float, tpot: float) -> str:
    """The chosen deployment and why, in words (or that none meets the targets)."""
    targets = f"TTFT <= {ttft:g} s and TPOT <= {tpot * 1e3:g} ms"
    meeting = [p for p in points if p["meets_targets"]]
    if not best:
        return f"**No deployment meets {targets}** ({len(points):,} searched)."
    runner = max(
        (p for p in meeting if total_gpus(p) != total_gpus(best)),
        key=lambda p: p["output_tokens_per_s_per_gpu"],
        default=None,
    )
    text = (
        f"**Chosen: {gpus_text(best)} GPUs, {best['mode']}"
        + (f" with chunked prefill of {n:,} tokens" if (n := best.get("chunked_prefill")) else "")
        + f", {layout_text(best)}"
        + (f" + prefill {layout_text(best, 'prefill_')}" if best.get("prefill_layout") else "")
        + ", "
        f"{best['weight_format']} weights, {best['kv_dtype']} cache, batch "
        f"{best['batch_per_group']} per group**: of the {len(meeting):,} deployments meeting "
        f"{targets}, it gives the most output tokens/s per GPU, "
        f"{best['output_tokens_per_s_per_gpu']:,.0f} (TTFT {best['ttft_s'] * 1e3:,.0f} ms, "
        f"TPOT {best['tpot_s'] * 1e3:,.1f} ms, {best['output_tokens_per_s_per_user']:,.1f} "
        "tokens/s per user)."
    )
    if runner:
        text += (
            f" The best on another GPU count, {gpus_text(runner)} GPUs, gives "
            f"{runner['output_tokens_per_s_per_gpu']:,.0f} per GPU."
        )
    return text


def _show_reasons(
    timed: int, by_point: dict[str, int], ruled_out: dict[str, int], both: int
) -> None:
    """Why the other deployments lose: the timed ones by first reason, then those ruled out
    before timing."""
    st.markdown(
        f"**Why the others lose**: the {timed:,} deployments timed, each counted once "
        "under its first reason (misses TTFT, misses TPOT, then on the frontier or beaten); "
        f"a point can fail several ways ({both:,} miss both targets)."
    )
    show_table(
        [{"reason": k, "points": v} for k, v in sorted(by_point.items(), key=lambda kv: -kv[1])]
    )
    if ruled_out:
        st.markdown(
            f"**Ruled out before timing** ({sum(ruled_out.values()):,} candidates); "
            "disaggregated GPUs read decode+prefill."
        )
        show_table(
            [
                {"reason": k, "candidates": v}
                for k, v in sorted(ruled_out.items(), key=lambda kv: -kv[1])
            ]
        )
