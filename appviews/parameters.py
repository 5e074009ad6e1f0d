"""Parameters view: total and active counts, the breakdown, attention projections."""

from __future__ import annotations

import plotly.graph_objects as go
import streamlit as st

from mlacalc.words.units import human_bytes, human_si

from .common import Scenario, download, show_table

TITLE = "Parameters"


def shares_figure(breakdown: dict[str, int]) -> go.Figure:
    """The parts of the model as shares of its parameters, on a linear axis (a share on a log
    axis makes a 2% part look like half the model), each bar labelled with its count."""
    parts = {k: v for k, v in breakdown.items() if v}
    total = sum(parts.values())
    fig = go.Figure(
        go.Bar(
            x=[100 * v / total for v in parts.values()],
            y=list(parts.keys()),
            orientation="h",
            text=[f"{human_si(v)} ({100 * v / total:.1f}%)" for v in parts.values()],
            # a thin bar (norms, 0.0%) has no room inside: its label goes beside it
            textposition=["inside" if 100 * v / total > 40 else "outside" for v in parts.values()],
            cliponaxis=False,
        )
    )
    fig.update_layout(
        title="Parameters of the whole model by part (main model, MTP apart)",
        xaxis_title="share of the parameters (%)",
        height=320,
        margin=dict(t=50, b=40),
    )
    fig.update_xaxes(type="linear", range=[0, 100])
    return fig


def render(sc: Scenario) -> None:
    p = sc.doc["parameters"]
    c1, c2, c3 = st.columns(3)
    c1.metric("total (main model)", human_si(p["total"]))
    c2.metric("active per token", human_si(p["active"]))
    c3.metric("MTP modules (apart)", human_si(p["mtp"]) if p["mtp"] else "none")
    st.markdown(f"Total parameters: **{p['total']:,}**; active: **{p['active']:,}**")
    st.markdown(f"Layer pattern: **{sc.doc['layers']['summary']}**")
    w = sc.doc["weights"]
    st.markdown(
        f"Weights: **{human_bytes(w['total_bytes'])}** ({w['total_bytes']:,} bytes), {w['summary']}"
    )
    st.plotly_chart(shares_figure(p["breakdown"]), width="stretch", key="params_chart")
    by_kind = p.get("attention_by_kind") or []
    if by_kind:  # a hybrid's kinds of layer hold different attention: each kind's
        show_table(
            [
                {
                    "kind of layer": f"{r['kind']} ({r['layers']} layers)",
                    "projection": k,
                    "parameters": v,
                }
                for r in by_kind
                for k, v in r["projections"].items()
            ],
            scope="Per kind of layer: the projections of one layer of each kind.",
        )
    else:
        show_table(
            [
                {"projection (one layer)": k, "parameters": v}
                for k, v in p["attention_breakdown"].items()
            ],
            scope="Per attention layer: the projections of one layer.",
        )
    download(p, f"{sc.model.name}-parameters", "dl_params")
