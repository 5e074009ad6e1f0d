"""Measured sets view: the time model's predictions against the committed measurements."""

from __future__ import annotations

import plotly.graph_objects as go
import streamlit as st

from .common import Scenario, download, validation

TITLE = "Measured sets"


def render(sc: Scenario) -> None:
    st.markdown(
        "**Predicted vs measured** (the unfused roofline on the committed microbenchmark sets)"
    )
    for v in validation():
        st.markdown(
            f"{v['name']} ({v['device']}): median |error| **{100 * v['median_abs_error']:.1f}%**, "
            f"worst {100 * v['worst_abs_error']:.1f}% over {v['rows_validated']} rows"
        )
        fig = go.Figure()
        groups = sorted({r["impl"] if r["variant"] == "mla" else r["variant"] for r in v["rows"]})
        for group in groups:
            sel = [
                r
                for r in v["rows"]
                if (r["impl"] if r["variant"] == "mla" else r["variant"]) == group
            ]
            fig.add_trace(
                go.Scatter(
                    x=[r["measured_s"] for r in sel],
                    y=[r["predicted_s"] for r in sel],
                    mode="markers",
                    name=group,
                )
            )
        lo = min(r["measured_s"] for r in v["rows"])
        hi = max(r["measured_s"] for r in v["rows"])
        fig.add_trace(
            go.Scatter(
                x=[lo, hi],
                y=[lo, hi],
                mode="lines",
                name="predicted = measured",
                line=dict(dash="dash"),
            )
        )
        fig.update_xaxes(type="log", title="measured (s)")
        fig.update_yaxes(type="log", title="predicted (s)")
        fig.update_layout(height=380, margin=dict(t=20))
        st.plotly_chart(fig, width="stretch", key=f"val_{v['name']}")
        st.dataframe(v["rows"], hide_index=True, width="stretch")
        download(v["rows"], f"validation-{v['name']}", f"dl_val_{v['name']}")
