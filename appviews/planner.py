"""Serving / capacity planner view: what fits per GPU and what fills it, the per-GPU step with
its communication, serving figures for a request mix, and a search's Pareto frontier."""

from __future__ import annotations

import html
from dataclasses import dataclass

import plotly.graph_objects as go
import streamlit as st

import mlacalc
from mlacalc.words import defaults as D

from .common import Scenario, download, show_notices, show_table

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
):
    from mlacalc.serving.search import search

    r = search(
        model,
        hardware,
        list(gpus),
        isl=isl,
        osl=osl,
        ttft=ttft,
        tpot=tpot,
        prefill_pass=prefill_pass,
        output_lag_steps=output_lag_steps,
    )
    return r.points, r.frontier, r.best, (r.point_reasons, r.ruled_out, r.missing_both), r.seconds


def gpus_text(p: dict) -> str:
    """A deployment's GPUs: ``2+1`` (decode + prefill) for a disaggregated one."""
    if p.get("mode") == "disaggregated" and p.get("prefill_gpus"):
        return f"{p['decode_gpus']}+{p['prefill_gpus']}"
    return str(p["gpus"])


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
    conc: int
    prefill_pass: str
    lag: int


def render(sc: Scenario) -> None:
    inputs = _read_inputs(sc)
    result = _plan(sc, inputs)
    if result is None:
        return
    context = (inputs.isl + inputs.osl) if inputs.isl else sc.seq_len
    _show_provenance(result)
    _show_fit_notes(result, inputs.isl, sc.batch, sc.seq_len)
    _show_metrics(result, inputs.isl, sc.batch, context)
    _show_memory(result, context)
    _show_kernels(result)
    download(result.to_dict(), f"{sc.model.name}-plan", "dl_plan")
    if inputs.isl and st.checkbox(
        "search deployments (GPUs / 2, GPUs, GPUs x 2)", False, key="plan_search"
    ):
        _show_search(sc, inputs)


def _read_inputs(sc: Scenario) -> PlanInputs:
    """Draw the planner's widgets (deployment, memory, request mix) and read them; the GPU and
    tensor-parallel counts go back into the URL."""
    seen = len(sc.url.notices)
    c1, c2, c3, c4 = st.columns(4)
    gpus = c1.number_input(
        "GPUs", 1, 4096, sc.url.integer("gpus", D.GPUS, 1, 4096), key="plan_gpus"
    )
    tp = c2.number_input(
        "tensor parallel",
        1,
        4096,
        min(int(gpus), sc.url.integer("tp", int(gpus), 1, 4096)),
        key="plan_tp",
    )
    ep = c3.number_input("expert parallel", 1, 4096, D.EP, key="plan_ep")
    page = c4.number_input("page size (tokens)", 1, 4096, D.PAGE_SIZE, key="plan_page")
    c1, c2, c3, c4 = st.columns(4)
    pp = c1.number_input("pipeline stages", 1, 64, 1, key="plan_pp")
    dp_attention = c2.checkbox(
        "DP-attention",
        False,
        key="plan_dpa",
        help="Data-parallel attention (each attention replica serves its own sequences); "
        "the experts are shared by the stage.",
    )
    overlap = c3.selectbox("overlap", ["none", "tbo"], key="plan_overlap")
    mode = c4.selectbox("prefill / decode", ["aggregated", "disaggregated"], key="plan_mode")
    reserve = st.slider(
        "memory reserve (activations, workspace)",
        0.0,
        0.5,
        D.MEMORY_RESERVE,
        0.01,
        key="plan_reserve",
    )
    c1, c2, c3 = st.columns(3)
    isl = c1.number_input(
        "input tokens per request (0: capacity only)", 0, 1 << 20, 0, key="plan_isl"
    )
    osl = c2.number_input("output tokens per request", 1, 1 << 20, 500, key="plan_osl")
    conc = c3.number_input("requests in flight (0: as many as fit)", 0, 1 << 22, 0, key="plan_conc")
    c1, c2 = st.columns(2)
    prefill_pass = c1.selectbox(
        "prompts' forward pass (aggregated)",
        ["fused", "separate"],
        key="plan_prefill_pass",
        help="fused: new prompts run in the decode batch's pass; separate: in a pass of their "
        "own before the decode pass (the first token leaves with the step).",
        disabled=mode != "aggregated",
    )
    lag = c2.number_input(
        "output lag (steps, aggregated)",
        0,
        1024,
        0,
        key="plan_output_lag",
        help="Steps between computing a token and the client getting it: TTFT grows by as many.",
        disabled=mode != "aggregated",
    )
    show_notices(sc.url, seen)
    st.query_params.update({"gpus": str(gpus), "tp": str(tp)})
    return PlanInputs(
        gpus=gpus,
        tp=tp,
        ep=ep,
        page=page,
        pp=pp,
        dp_attention=dp_attention,
        overlap=overlap,
        mode=mode,
        reserve=reserve,
        isl=isl,
        osl=osl,
        conc=conc,
        prefill_pass=prefill_pass,
        lag=lag,
    )


def _serving_args(inputs: PlanInputs) -> dict:
    """The request mix's arguments to :func:`mlacalc.plan` (none without input tokens)."""
    if not inputs.isl:
        return {}
    serving = dict(
        isl=int(inputs.isl),
        osl=int(inputs.osl),
        concurrency=float(inputs.conc) if inputs.conc else None,
        mode=inputs.mode,
    )
    if inputs.mode == "aggregated":
        serving.update(prefill_pass=inputs.prefill_pass, output_lag_steps=int(inputs.lag))
    return serving


def _plan(sc: Scenario, inputs: PlanInputs):
    """The plan of the scenario on the widgets' deployment, or None (the error is shown)."""
    serving = _serving_args(inputs)
    gpus, tp, pp = inputs.gpus, inputs.tp, inputs.pp
    try:
        if gpus % (tp * pp):
            raise mlacalc.InvalidArgumentError(
                "tp", f"tensor parallel {tp} x pipeline stages {pp} must divide the {gpus} GPUs"
            )
        return mlacalc.plan(
            sc.model,
            sc.hardware,
            int(gpus),
            tp=int(tp),
            ep=int(inputs.ep),
            pp=int(pp),
            dp_attention=bool(inputs.dp_attention),
            overlap=inputs.overlap,
            weight_dtype=sc.sized_weight_dtype,
            kv_dtype=sc.kv_dtype,
            page_size=int(inputs.page),
            memory_reserve=float(inputs.reserve),
            # a request mix sizes each request at isl + osl (plan refuses a seq_len beside it)
            seq_len=None if serving.get("isl") is not None else sc.seq_len,
            batch=sc.batch,
            **serving,
        )
    except mlacalc.MlacalcError as exc:
        st.error(str(exc))
        return None


def _show_provenance(result) -> None:
    """One caption: the deployment per GPU and where the times come from."""
    # the times' provenance only when a step was timed (a deployment that does not fit has
    # neither times nor a profile)
    timed = result.decode_step_s is not None
    how = (
        f"profile '{result.profile}': {result.calibration}"
        if result.profile
        else result.calibration
    )
    st.caption(
        f"Per GPU: {result.gpus} x {result.hardware} ({result.layout})"
        + (
            "; times are the calibrated kernel model's, communication included"
            + (f" ({how})" if how else "")
            if timed
            else "; nothing fits, so no step is timed"
        )
        + "."
    )


def _show_fit_notes(result, isl: int, batch: int, seq_len: int) -> None:
    """The plan's warnings and what does not fit, as info boxes (an answer, not an error)."""
    for w in result.warnings:
        st.info(w)
    if not isl and 0 < result.max_batch < batch:  # the plan's overflow, in the app's words
        st.info(
            f"A batch of {batch:,} at {seq_len:,} tokens does not fit: {result.max_batch:,} do. "
            f"The figures below are for {result.max_batch:,}."
        )
    elif not result.fits:
        st.info(f"Does not fit: {result.overflow}")


def _show_metrics(result, isl: int, batch: int, context: int) -> None:
    """The headline metrics: capacity, decode speed, binding, and the serving figures of a
    request mix."""
    c1, c2, c3, c4 = st.columns(4)
    c1.metric(f"largest batch at {context:,} tokens", f"{result.max_batch:,}")
    # the longest context is the plan's at the sidebar batch; with a request mix the serving
    # figures run the plan's own batch, so the label says whose batch this is
    c2.metric(
        f"longest context at sidebar batch {batch:,}"
        if isl
        else f"longest context at batch {batch:,}",
        f"{result.max_context:,}" if result.max_context else "-",
        help=(
            (result.longest_context_text() if result.max_context else "")
            + (
                f" At the sidebar's batch of {batch:,}; the serving figures below run "
                f"{result.decode_batch:,} sequences."
                if isl and result.decode_batch
                else ""
            )
        ).strip()
        or None,
    )
    if result.max_context_memory and result.max_context_memory > (result.max_context or 0):
        # the library's words (as the command line prints them)
        c2.caption(result.longest_context_text())
    c3.metric(
        f"decode tokens/s at batch {result.decode_batch:,}"
        if result.decode_batch
        else "decode tokens/s",
        f"{result.decode_tokens_per_s:,.0f}" if result.decode_tokens_per_s else "nothing fits",
        help="Steps that only decode, all GPUs; the serving figures below include the "
        "prompts' passes.",
    )
    # a metric's value truncates at a quarter of the page ("memory band..."): label and value
    # as text that wraps
    c4.markdown(
        '<div style="font-size:0.875rem">binding</div>'
        f'<div style="font-size:1.75rem;line-height:1.25">{html.escape(result.binding)}</div>',
        unsafe_allow_html=True,
        help="What limits the decode step's time.",
    )
    if result.ttft_s is not None:
        c1, c2, c3, c4 = st.columns(4)
        c1.metric("TTFT", result.ttft_text().split(" (")[0])
        c2.metric("TPOT", f"{result.tpot_s * 1e3:,.2f} ms")
        c3.metric(
            "output tokens/s per GPU",
            f"{result.output_tokens_per_s_per_gpu:,.1f}",
            help="Prompts' passes included (the decode figure above is decode-only steps).",
        )
        c4.metric("output tokens/s per user", f"{result.output_tokens_per_s_per_user:,.1f}")


def _show_memory(result, context: int) -> None:
    """What fills one GPU: a line of bytes, then the stacked bar of its parts."""
    st.markdown(
        f"Largest batch: **{result.max_batch:,}** sequences; weights per GPU: "
        f"**{result.weights_per_gpu_bytes:,} bytes** ({result.weight_format}); KV per token "
        "per GPU"
        + (
            f": **{result.kv_bytes_per_token_per_gpu:,} bytes**"
            if result.kv_every_token
            else f" in the layers keeping every token: "
            f"**{result.kv_bytes_per_token_full_layers_per_gpu:,} bytes**, plus "
            f"**{result.kv_bytes_fixed_per_sequence_per_gpu:,} bytes** per sequence "
            "(windows, linear states)"
        )
        + "; one sequence of "
        f"{context:,} tokens, every layer kind: "
        f"**{result.kv_bytes_per_sequence_per_gpu:,} bytes**"
    )
    st.plotly_chart(memory_figure(memory_parts(result, context)), width="stretch", key="plan_chart")


def memory_parts(result, context: int) -> dict[str, int]:
    """Bytes of one GPU by part: the weights' parts, the running batch's KV, reserve, free."""
    running = result.running_batch_per_group or 0
    kv_used = min(
        max(result.kv_budget_per_gpu_bytes, 0),
        int(result.kv_bytes_per_sequence_per_gpu * running),
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


def _show_kernels(result) -> None:
    """The decode step's kernels, slowest first (nothing when no step was timed)."""
    if not result.kernels:
        return
    st.markdown("**Decode step of one GPU, by kernel** (all calls of the step)")
    show_table(
        [
            {
                "kernel": k["name"],
                "kind": k["kind"],
                "calls": k["calls"],
                "ms": round(k["seconds"] * 1e3, 4),
                "link": k["communication"],
            }
            for k in sorted(result.kernels, key=lambda k: -k["seconds"])
        ]
    )


def _show_search(sc: Scenario, inputs: PlanInputs) -> None:
    """Search deployments at half, the same and twice the GPUs against TTFT / TPOT targets:
    the frontier chart, the best point, why the others lose, and the frontier's download."""
    c1, c2 = st.columns(2)
    ttft = c1.number_input("TTFT target (s)", 0.01, 600.0, 2.0, key="plan_ttft")
    tpot = c2.number_input("TPOT target (ms)", 1.0, 10_000.0, 50.0, key="plan_tpot") / 1e3
    gpus = int(inputs.gpus)
    counts = tuple(sorted({max(1, gpus // 2), gpus, gpus * 2}))
    # the aggregated points run the engine chosen above (prompts' pass, output lag)
    points, frontier, best, reasons, secs = _search(
        sc.model,
        sc.hardware,
        counts,
        int(inputs.isl),
        int(inputs.osl),
        float(ttft),
        float(tpot),
        inputs.prefill_pass,
        int(inputs.lag),
    )
    fig = frontier_figure(points, frontier, best, secs)
    st.plotly_chart(fig, width="stretch", key="plan_frontier")
    _show_best(best)
    _show_reasons(len(points), *reasons)
    download(frontier, f"{sc.model.name}-frontier", "dl_frontier")


def frontier_figure(points: list[dict], frontier: list[dict], best: dict | None, secs: float):
    """Per-GPU against per-user output speed: every deployment, the Pareto frontier, the best
    one meeting the targets (a star)."""
    fig = go.Figure()
    fig.add_scatter(
        x=[p["output_tokens_per_s_per_user"] for p in points],
        y=[p["output_tokens_per_s_per_gpu"] for p in points],
        mode="markers",
        name="deployments",
        marker=dict(size=4, opacity=0.35),
    )
    fig.add_scatter(
        x=[p["output_tokens_per_s_per_user"] for p in frontier],
        y=[p["output_tokens_per_s_per_gpu"] for p in frontier],
        mode="lines+markers",
        name="Pareto frontier",
    )
    if best:
        fig.add_scatter(
            x=[best["output_tokens_per_s_per_user"]],
            y=[best["output_tokens_per_s_per_gpu"]],
            mode="markers",
            name="best meeting the targets",
            marker=dict(size=14, symbol="star"),
        )
    fig.update_layout(
        title=f"{len(points):,} deployments searched in {secs:.2f} s",
        xaxis_title="output tokens/s per user",
        yaxis_title="output tokens/s per GPU",
        height=420,
    )
    return fig


def _show_best(best: dict | None) -> None:
    """The best deployment meeting the targets, in a sentence (or that none does)."""
    if not best:
        st.info("No deployment meets the targets.")
        return
    st.markdown(
        f"Best meeting the targets: **{gpus_text(best)} GPUs, {best['mode']}, "
        f"{best['layout']}, {best['weight_dtype']} weights, {best['kv_dtype']} cache, "
        f"batch {best['batch_per_group']}** "
        f"per group: {best['output_tokens_per_s_per_gpu']:,.0f} tokens/s per GPU, "
        f"TTFT {best['ttft_s'] * 1e3:,.0f} ms, TPOT {best['tpot_s'] * 1e3:,.1f} ms"
    )


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
