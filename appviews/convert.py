"""Convert-to-MLA view: the sidebar's model converted (TransMLA or MHA2MLA) at a chosen rank,
source beside result, and cache, parameters and decode time against the rank."""

from __future__ import annotations

import plotly.graph_objects as go
import streamlit as st

from mlacalc.cost.convert_cost import (
    CONVERTED_IMPLS,
    conversion_cost,
    flops_by_phase,
    reading_notes,
)
from mlacalc.cost.params import param_counts
from mlacalc.models.convert import (
    CONVERSION_METHODS,
    ROPE_STRATEGIES,
    SVD_MODES,
    conversion_refusal,
    convert,
)
from mlacalc.models.loading import ModelConfig
from mlacalc.serving.convert_sweep import fit_warning, rank_sweep, step_route, step_warnings
from mlacalc.words.engines import ENGINE_LABELS
from mlacalc.words.errors import MlacalcError
from mlacalc.words.units import human_bytes, human_si

from .common import Scenario, download, engine_words, show_table
from .planner import prediction_line

TITLE = "Convert to MLA"


@st.cache_data(show_spinner=False)
def _sweep(
    model: ModelConfig,
    ranks: tuple[int, ...],
    hardware: str,
    method: str,
    svd: str,
    rope: int,
    seq_len: int,
    batch: int,
    kv_dtype: str,
    engine: str,
) -> list[dict]:
    """The rank sweep's rows (:func:`rank_sweep`), the cache in the sidebar's KV dtype, the
    steps timed as its engine's kernels (trial: the chart read 90 KiB at d_c 512 beside a
    metric of 45 KiB under fp8, and one decode time under every engine)."""
    rows = rank_sweep(
        model, ranks, hardware, method, svd, rope, seq_len, batch, "absorbed", kv_dtype, engine
    )
    return [r.to_dict() for r in rows]


@st.cache_data(show_spinner=False)
def _route(
    model: ModelConfig, hardware: str, seq_len: int, batch: int, kv_dtype: str, engine: str
) -> tuple[dict, str, str]:
    """How the converted model's decode step is predicted: `mlacalc plan`'s route, profile
    and calibration words (:func:`step_route`)."""
    return step_route(model, hardware, seq_len, batch, "absorbed", kv_dtype, engine)


@st.cache_data(show_spinner=False)
def _step_warnings(
    source: ModelConfig,
    converted: ModelConfig,
    hardware: str,
    seq_len: int,
    batch: int,
    kv_dtype: str,
    engine: str | None,
) -> list[str]:
    """:func:`~mlacalc.serving.convert_sweep.step_warnings` of the source and the converted
    model, decode absorbed (the table's), cached by the sidebar's choices."""
    both = {"source": source, "converted": converted}
    return step_warnings(both, hardware, seq_len, batch, "absorbed", kv_dtype, engine)


def _ranks(top: int, svd: str, published: int | None = None) -> tuple[int, ...]:
    """Powers of two from 64 up to ``top`` (the slider's end: the same-cache rank, or the full
    rank where that is above it), ``top`` itself, and MHA2MLA's published same-cache rank where
    it lies below (its line meets the source's there)."""
    out, r = [], 64
    while r < top:
        out.append(r)
        r *= 2
    out.append(top - (top % 2 if svd == "split" else 0))
    if published is not None and published < top:
        out.append(published - (published % 2 if svd == "split" else 0))
    return tuple(sorted(set(out)))


#: The three small charts side by side have no toolbar: on a third of the page its icons sat
#: over their titles ("cache per tok[camera]en")
SMALL_CHART = {"displayModeBar": False}


def _figure(rows: list[dict], key: str, title: str, unit: str, scale: float) -> go.Figure:
    """One quantity against the rank, the source's as a dashed line; the cache of an MHA2MLA
    conversion in both forms (as published: every KV head's RoPE part; the shared-RoPE form)."""
    src, conv = rows[0], rows[1:]
    x = [r["rank"] for r in conv]
    both = key == "cache_bytes_per_token" and conv[0].get("published_" + key) is not None
    fig = go.Figure(
        go.Scatter(
            x=x,
            y=[r[key] / scale for r in conv],
            mode="lines+markers",
            name="converted, shared-RoPE form" if both else "converted",
        )
    )
    if both:
        fig.add_trace(
            go.Scatter(
                x=x,
                y=[r["published_" + key] / scale for r in conv],
                mode="lines+markers",
                name="converted, MHA2MLA as published",
            )
        )
    fig.add_hline(y=src[key] / scale, line_dash="dash", annotation_text="source")
    fig.update_layout(
        title=title,
        xaxis_title="latent rank d_c",
        yaxis_title=unit,
        height=300,
        margin=dict(t=50, b=40),
    )
    if both:  # the legend under the axis: a third of the page has no room beside it
        fig.update_layout(legend=dict(orientation="h", y=-0.35), height=340, margin=dict(b=80))
    fig.update_xaxes(type="log")
    return fig


def render(sc: Scenario) -> None:
    m = sc.model
    st.caption(
        "A post-training conversion's costs before any fine-tuning: TransMLA (GQA: keys "
        "replicated to the query heads, then factored) or MHA2MLA (partial RoPE and an SVD of "
        "the position-free keys and values), into DeepSeek's MLA form."
    )
    why = conversion_refusal(m)
    if why:
        st.info(f"{m.label} cannot be converted to MLA: {why}.", icon=":material/block:")
        return
    c1, c2, c3, c4 = st.columns(4)
    method = c1.radio("method", CONVERSION_METHODS, key="cv_method", horizontal=True)
    svd = c2.radio("SVD", SVD_MODES, key="cv_svd", horizontal=True)
    rope = c3.number_input(
        "RoPE dims per head",
        min_value=2,
        max_value=max(2, m.head_dim - 2),
        step=2,
        value=min(64, m.head_dim // 2 - (m.head_dim // 2) % 2),
        key="cv_rope",
    )
    strategy = None
    if method == "mha2mla":
        strategy = c4.selectbox("partial RoPE", ROPE_STRATEGIES, index=3, key="cv_strategy")
    try:
        base = convert(m, method=method, rope_dim=int(rope))
        eq, top = base.equivalence_rank, min(base.equivalence_rank, base.full_rank)
        rank = st.slider(
            "latent rank d_c",
            min_value=16,
            max_value=int(max(top, 17)),
            value=min(512, int(top)),
            step=16 if svd == "split" else 1,
            key="cv_rank",
        )
        c = convert(
            m,
            method=method,
            kv_lora_rank=int(rank),
            rope_dim=int(rope),
            svd=svd,
            rope_strategy=strategy,
        )
        cc = conversion_cost(c, "decode", sc.seq_len, sc.batch, kv_dtype=sc.kv_dtype)
    except MlacalcError as exc:
        st.error(str(exc))
        return
    if eq > top:  # an MHA source: the same-cache latent is wider than what it can hold
        st.caption(
            f"The slider stops at the full rank {top:,} of the position-free key and value "
            f"projections: a wider latent holds nothing more (the rank with the source's "
            f"cache in the shared-RoPE form, {eq:,}, is above it)."
        )
    _cost_summary(m, c, cc, sc)
    show_table(
        [
            {"phase": r["phase"], "source": r["source"]}
            | {f"converted, {i}": r[i] for i in CONVERTED_IMPLS}
            for r in flops_by_phase(c, sc.seq_len, sc.batch, sc.kv_dtype)
        ],
        scope=f"Attention FLOPs of all layers: a causal prefill of {sc.seq_len:,} tokens and a "
        f"decode step at {sc.seq_len:,} keys, batch {sc.batch}, in each MLA implementation.",
    )
    show_table([{"field": f, "before": str(b), "after": str(a)} for f, b, a in c.changes])
    for note in (*reading_notes(cc)[1:], *c.notes):  # [0]: before fine-tuning, said above
        st.caption(note)
    with st.spinner("Timing each rank"):
        rows = _sweep(
            m,
            _ranks(int(top), svd, c.published_equivalence_rank),
            sc.hardware,
            method,
            svd,
            int(rope),
            sc.seq_len,
            sc.batch,
            sc.kv_dtype,
            sc.engine,
        )
        route, profile, how = _route(
            c.model, sc.hardware, sc.seq_len, sc.batch, sc.kv_dtype, sc.engine
        )
    # a device of measured ceilings (step_route): the plain bound, no engine's kernels
    bound = profile == "roofline"
    st.markdown(
        f"Against the rank, on one **{sc.device.name}** holding the model, decode at "
        f"{sc.seq_len:,} keys x batch {sc.batch} (MLA absorbed, KV {sc.kv_dtype})"
        + ("" if bound else f" as **{ENGINE_LABELS.get(sc.engine, sc.engine)}**'s kernels")
        + ":"
    )
    # where the times come from and how far off they may be, as the planner says it; the
    # bound's own words (what the times are and that bound's error), not the kernel model's
    if bound:
        st.caption(route["note"])
    else:
        st.caption(f"Times: the kernel time model, {engine_words(sc.engine, profile, how)}.")
        st.caption(prediction_line(route))
    fit = fit_warning(
        {"source": m, f"converted model at d_c {c.kv_lora_rank:,}": c.model},
        sc.hardware,
        sc.seq_len,
        sc.batch,
        sc.kv_dtype,
        deploy="the Capacity planner tab sizes a deployment of the source over several, and "
        "`mlacalc convert --save` writes the converted model for `mlacalc plan`",
    )
    if fit:
        st.warning(fit[0].upper() + fit[1:] + ".", icon=":material/warning:")
    # what `mlacalc convert --hardware` warns of the device, the engine and the cache (a
    # review: an fp8 cache slower than bf16's, a device timed by ratios, TensorRT-LLM on
    # another vendor's GPU were said by the command line and not here), as the planner says
    # its plan's warnings
    for w in _step_warnings(m, c.model, sc.hardware, sc.seq_len, sc.batch, sc.kv_dtype, sc.engine):
        st.info(w[0].upper() + w[1:])
    g1, g2, g3 = st.columns(3)
    g1.plotly_chart(
        _figure(rows, "cache_bytes_per_token", "cache per token", "KiB", 1024),
        key="cv_cache_chart",
        width="stretch",
        config=SMALL_CHART,
    )
    g2.plotly_chart(
        _figure(rows, "params", "parameters", "billions", 1e9),
        key="cv_params_chart",
        width="stretch",
        config=SMALL_CHART,
    )
    g3.plotly_chart(
        _figure(rows, "decode_s", "decode step", "ms", 1e-3),
        key="cv_time_chart",
        width="stretch",
        config=SMALL_CHART,
    )
    download(rows, f"{m.name}-{method}-ranks", "dl_convert")


def _cost_summary(m, c, cc, sc: Scenario) -> None:
    """The conversion's cache, parameters and equivalence rank as metrics, and the table of
    what it costs beside the source (MHA2MLA: its published cache first, as `mlacalc
    convert` leads)."""
    published = cc.published_cache_bytes_per_token
    k1, k2, k3 = st.columns(3)
    # MHA2MLA's own cache first (every KV head's RoPE part), as `mlacalc convert` leads
    lead = cc.cache_bytes_per_token if published is None else published
    k1.metric(
        "cache per token" + ("" if published is None else " (MHA2MLA as published)"),
        human_bytes(lead),
        f"{lead / cc.source_cache_bytes_per_token - 1:+.1%}",
        delta_color="inverse",
    )
    k2.metric(
        "parameters",
        human_si(cc.served_params),
        f"{cc.served_params / cc.source_params - 1:+.2%}",
        delta_color="off",
    )
    if c.published_equivalence_rank is None:
        k3.metric("rank with the source's cache", f"{c.equivalence_rank:,}")
    else:  # each form its own: MHA2MLA's per-head RoPE parts, or one shared RoPE key
        k3.metric(
            "rank with the source's cache (as published)", f"{c.published_equivalence_rank:,}"
        )
        st.caption(f"In the shared-RoPE form: {c.equivalence_rank:,}.")
    form = "" if published is None else " (shared-RoPE form)"
    cache_rows = [
        {
            "quantity": f"cache elements / token / layer{form}",
            "source": cc.source_cache_elements,
            "converted": cc.cache_elements,
        },
        {
            "quantity": f"cache bytes / token{form}",
            "source": cc.source_cache_bytes_per_token,
            "converted": cc.cache_bytes_per_token,
        },
    ]
    if published is not None:
        cache_rows[:0] = [
            {
                "quantity": "cache elements / token / layer (MHA2MLA as published)",
                "source": cc.source_cache_elements,
                "converted": c.published_cache_elements,
            },
            {
                "quantity": "cache bytes / token (as published)",
                "source": cc.source_cache_bytes_per_token,
                "converted": published,
            },
        ]
    show_table(
        [
            *cache_rows,
            {
                "quantity": "attention parameters / layer",
                "source": param_counts(m).attention_per_layer,
                "converted": param_counts(c.model).attention_per_layer,
            },
            {"quantity": "parameters", "source": cc.source_params, "converted": cc.served_params},
            {
                "quantity": f"attention FLOPs, decode at {sc.seq_len:,} x {sc.batch} (absorbed)",
                "source": cc.source_flops,
                "converted": cc.flops,
            },
        ],
        scope=f"{m.label} -> {c.model.label}; KV {sc.kv_dtype}.",
    )
