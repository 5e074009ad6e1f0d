"""Roofline view: the device's roofline with the attention layer's points, decode and prefill."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import streamlit as st

import mlacalc
from mlacalc.config import ModelConfig
from mlacalc.render import human_seconds, human_si
from mlacalc.vocab import MLA_IMPLEMENTATIONS

from .common import Scenario, show_table, validation

TITLE = "Roofline"

MLA_IMPLS = list(MLA_IMPLEMENTATIONS)


@st.cache_data(show_spinner=False)
def roofline_points(
    model: ModelConfig,
    hardware: str,
    seq_len: int,
    batch: int,
    dtype: str,
    weight_dtype: str,
    kv_dtype: str,
) -> list[dict]:
    impls = MLA_IMPLS if model.is_mla else [None]
    points = []
    for phase, b in (("decode", batch), ("prefill", 1)):
        for impl in impls:
            p = mlacalc.predict_time(
                model,
                hardware,
                phase,
                seq_len,
                b,
                impl=impl,
                mode="fused",
                dtype=dtype,
                weight_dtype=weight_dtype,
                kv_dtype=kv_dtype,
            )
            points.append(
                {
                    "phase": phase,
                    "impl": p.impl,
                    "intensity": p.arithmetic_intensity,
                    "flops_per_s": p.flops / p.seconds,
                    "seconds": p.seconds,
                    "bound": p.bound,
                }
            )
    return points


def render(sc: Scenario) -> None:
    device, hardware = sc.device, sc.hardware
    dtype = "fp32" if device.kind == "cpu" else "bf16"
    points = roofline_points(
        sc.model, hardware, sc.seq_len, sc.batch, dtype, sc.weight_dtype, sc.kv_dtype
    )
    scope = (
        f"One attention layer (fused kernels): decode of {sc.batch:,} sequences at "
        f"{sc.seq_len:,} tokens, prefill of one sequence of {sc.seq_len:,} tokens; compute in "
        f"{dtype}, weights in {sc.weight_dtype}, KV in {sc.kv_dtype}."
    )
    peak, bw = device.peak(dtype), device.memory_bandwidth_bytes_per_s
    top = max([1e5] + [10 * pt["intensity"] for pt in points])
    xs = np.geomspace(0.1, top, 200)
    fig = go.Figure(
        go.Scatter(x=xs, y=np.minimum(peak, xs * bw), mode="lines", name=f"{device.name} roofline")
    )
    for pt in points:
        fig.add_trace(
            go.Scatter(
                x=[pt["intensity"]],
                y=[pt["flops_per_s"]],
                mode="markers",
                name=f"{pt['phase']} {pt['impl']}",
                marker=dict(size=10),
            )
        )
    if device.measured:
        # the committed measurements of this device: attained FLOP/s at the op sequence's intensity
        rows_here = [
            r for v in validation() if f"measured:{v['name']}" == hardware for r in v["rows"]
        ]
        fig.add_trace(
            go.Scatter(
                x=[r["flops"] / r["bytes"] for r in rows_here],
                y=[r["flops"] / r["measured_s"] for r in rows_here],
                mode="markers",
                name="measured (microbenchmark)",
                marker=dict(symbol="x", size=7, color="gray"),
                text=[
                    f"{r['model']} {r['impl']} {r['phase']} B={r['batch']} S={r['seq_len']}"
                    for r in rows_here
                ],
            )
        )
    else:
        st.caption(
            "Pick a measured device (measured:...) to see the microbenchmark's points on its "
            "roofline."
        )
    fig.update_xaxes(type="log", title="arithmetic intensity (FLOP/byte)")
    fig.update_yaxes(type="log", title=f"attained FLOP/s ({dtype})", exponentformat="SI")
    fig.update_layout(
        title=f"Roofline of one {device.name} and one attention layer's kernels",
        height=420,
        margin=dict(t=50),
    )
    st.plotly_chart(fig, width="stretch", key="roof_chart")
    show_table(
        [
            {
                "phase": pt["phase"],
                "impl": pt["impl"],
                "FLOP/byte": round(pt["intensity"], 1),
                "attained FLOP/s": human_si(pt["flops_per_s"], "FLOP/s"),
                "time": human_seconds(pt["seconds"]),
                "seconds": pt["seconds"],
                "bound": pt["bound"],
            }
            for pt in points
        ],
        scope=scope,
    )
    st.markdown(f"Ridge point of {device.name} ({dtype}): **{peak / bw:,.1f} FLOP/byte**")
