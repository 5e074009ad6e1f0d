"""Parameters view: total and active counts, the breakdown, attention projections."""

from __future__ import annotations

import plotly.graph_objects as go
import streamlit as st

from mlacalc.words.units import human_si

from .common import Scenario, download, show_table

TITLE = "Parameters"


def render(sc: Scenario) -> None:
    p = sc.doc["parameters"]
    c1, c2, c3 = st.columns(3)
    c1.metric("total (main model)", human_si(p["total"]))
    c2.metric("active per token", human_si(p["active"]))
    c3.metric("MTP modules (apart)", human_si(p["mtp"]) if p["mtp"] else "none")
    st.markdown(f"Total parameters: **{p['total']:,}**; active: **{p['active']:,}**")
    st.markdown(f"Layer pattern: **{sc.doc['layers']['summary']}**")
    w = sc.doc["weights"]
    st.markdown(f"Weights: **{w['total_bytes']:,} bytes**, {w['summary']}")
    parts = {k: v for k, v in p["breakdown"].items() if v}
    fig = go.Figure(go.Bar(x=list(parts.values()), y=list(parts.keys()), orientation="h"))
    fig.update_layout(
        title="Parameters of the whole model (main model, MTP apart)",
        xaxis_title="parameters",
        height=320,
        margin=dict(t=50, b=40),
    )
    fig.update_xaxes(type="log", exponentformat="SI")
    st.plotly_chart(fig, width="stretch", key="params_chart")
    show_table(
        [
            {"projection (one layer)": k, "parameters": v}
            for k, v in p["attention_breakdown"].items()
        ],
        scope="Per attention layer: the projections of one layer.",
    )
    download(p, f"{sc.model.name}-parameters", "dl_params")
