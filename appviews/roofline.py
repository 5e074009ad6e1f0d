"""Roofline view: the device's roofline with the attention layer's points, decode and prefill."""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go
import streamlit as st

import mlacalc
from mlacalc.models.loading import ModelConfig
from mlacalc.render import human_si
from mlacalc.timemodel.mla_geometry import mla_geometry_note
from mlacalc.timemodel.predict import MMHA_RUNS_AS, MMHA_WORDS
from mlacalc.words.kernels import roofline_bound
from mlacalc.words.units import counted, human_seconds
from mlacalc.words.vocab import MLA_IMPLEMENTATIONS

from .common import (
    Scenario,
    decade_ticks,
    engine_words,
    show_context_warning,
    show_table,
    validation,
)

#: A kernel the engine runs in place of the counted one, in words where its class name is not
RUNS_AS = {MMHA_RUNS_AS: MMHA_WORDS}

TITLE = "Roofline"

MLA_IMPLS = list(MLA_IMPLEMENTATIONS)

#: The prefill pairs the tab offers, and the caption's words for each (all pairs first: the
#: default, as `mlacalc roofline` and predict_time have it, the contract's causal=False)
CAUSAL = "causal"
PAIRS = {
    "all pairs": "all (query, key) pairs (not causal; 'prefill pairs: causal' for a causal kernel)",
    CAUSAL: "causal: each query attends the keys before it, as decoders run",
}


@st.cache_data(show_spinner=False)
def roofline_points(
    model: ModelConfig,
    hardware: str,
    seq_len: int,
    batch: int,
    dtype: str,
    weight_dtype: str | None,
    kv_dtype: str,
    engine: str = "trtllm",
    causal: bool = False,
) -> list[dict]:
    """Each attention layer's decode and prefill point per implementation; ``causal``: the
    prefill's kernel skips the masked half, as decoders run (False: every (query, key) pair,
    the FLOP counts' default and `mlacalc roofline`'s without --causal)."""
    impls = MLA_IMPLS if model.is_mla else [None]
    points = []
    for phase, b in (("decode", batch), ("prefill", 1)):
        for impl in impls:
            for kind, one in layer_kinds(model):
                args = (hardware, phase, seq_len, b, impl, dtype, weight_dtype, kv_dtype)
                points.append(_point(one, kind, *args, engine, causal and phase != "decode"))
    return points


def layer_kinds(model: ModelConfig) -> list[tuple[str, ModelConfig]]:
    """The model's attention layers, one (kind, model of that kind) per kind of layer.

    A model whose layers are alike has one entry (kind ""); linear-attention layers are
    left out (no attention kernel to place on a roofline).
    """
    from mlacalc.models.architecture import kind_model, layer_pattern

    kinds = {k.label: k for k in layer_pattern(model).layers}
    if len(kinds) < 2:
        return [("", model)]
    return [(label, kind_model(model, k)) for label, k in kinds.items() if label != "linear"]


def _point(
    model: ModelConfig,
    kind: str,
    hardware: str,
    phase: str,
    seq_len: int,
    batch: int,
    impl: str | None,
    dtype: str,
    weight_dtype: str | None,
    kv_dtype: str,
    engine: str = "trtllm",
    causal: bool = False,
) -> dict:
    p = mlacalc.predict_time(
        model,
        hardware,
        phase,
        seq_len,
        batch,
        impl=impl,
        mode="fused",
        dtype=dtype,
        weight_dtype=weight_dtype,
        kv_dtype=kv_dtype,
        engine=engine,
        causal=causal,
    )
    flops, nbytes, ridge = own_work(p)
    return {
        "phase": phase,
        "impl": p.impl,
        "kind": kind,
        "intensity": flops / nbytes if nbytes else math.inf,
        "flops_per_s": flops / p.seconds,
        "seconds": p.seconds,
        "ridge": ridge,
        "bound": roofline_bound(flops, nbytes, ridge),
        "calibration": p.calibration,
        "engine": p.engine,
        "profile": p.profile,
        # kernels the engine runs as another (a DSA core as its sparse kernel): the point
        # places that kernel's work, which the time is of
        "runs_as": [(o.name, o.runs_as, o.run_flops) for o in p.ops if o.runs_as],
    }


def own_work(p) -> tuple[int, int, float]:
    """The FLOPs, bytes and ridge of the work a prediction's time is of: each kernel's own,
    but a kernel the engine runs as another (a DSA core as its sparse kernel) counts that
    kernel's FLOPs and bytes. ``Prediction.flops`` counts the implementation named (GLM-5.1's
    naive decode: the dense core over every key), which over the sparse kernel's time put
    the point 3x above the memory roof."""
    flops = nbytes = 0
    heavy = (-1, 0.0)  # the ridge of the dtype doing the most FLOPs (Prediction.ridge's rule)
    for o in p.ops:
        f, b = (o.run_flops, o.run_bytes) if o.runs_as else (o.flops, o.bytes)
        nbytes += b
        flops += f if o.kind == "matmul" else 0
        heavy = max(heavy, (f, o.ridge))
    return flops, nbytes, heavy[1]


def roofs(device, dtype: str, points: list[dict]) -> list[tuple[str, float]]:
    """The roofs to draw: the compute dtype's, and that of each point whose FLOPs run mostly
    in another (DeepSeek-V3's fp8 GEMMs: a prefill point above the bf16 roof sits under the
    fp8 one), each named by its dtype. A point is checked against its own ``ridge``."""
    bw = device.memory_bandwidth_bytes_per_s
    out = {device.peak(dtype): f"{device.name} ({dtype})"}
    for ridge in sorted({pt["ridge"] for pt in points if pt["ridge"]}):
        peak = ridge * bw
        if not any(math.isclose(peak, p, rel_tol=1e-6) for p in out):
            names = [d for d, v in device.peak_flops_per_s.items() if math.isclose(v, peak)]
            out[peak] = f"{device.name} ({names[0] if names else f'ridge {ridge:,.0f}'})"
    return [(name, peak) for peak, name in sorted(out.items())]


def render(sc: Scenario) -> None:
    device, hardware = sc.device, sc.hardware
    show_context_warning(sc)
    dtype = "fp32" if device.kind == "cpu" else "bf16"
    pairs = st.selectbox(
        "prefill pairs",
        list(PAIRS),
        key="roof_pairs",
        help="Which (query, key) pairs the prefill kernel computes: all of them (the default, "
        "as `mlacalc roofline` without --causal and predict_time have it), or causal, as "
        "decoders run (each query attends the keys before it; `mlacalc roofline --causal`).",
    )
    causal = pairs == CAUSAL
    points = roofline_points(
        sc.model,
        hardware,
        sc.seq_len,
        sc.batch,
        dtype,
        sc.sized_weight_dtype,
        sc.cache_layout,  # the recurrent state's dtype too, where the model keeps one
        sc.engine,
        causal,
    )
    kinds = sorted({pt["kind"] for pt in points if pt["kind"]})
    which = (
        f"One attention layer of each kind ({', '.join(kinds)})"
        + (
            ", linear-attention layers left out"
            if "linear" in sc.doc["layers"]["attention"]
            else ""
        )
        if kinds
        else "One attention layer"
    )
    quant = sc.model.quantization
    weights = (
        f"as the checkpoint stores them ({quant.describe()})"
        if quant is not None and not sc.weight_chosen
        else f"in {sc.weight_dtype}"
    )
    scope = (
        f"{which} (fused kernels): decode of {counted(sc.batch, 'sequence')} at "
        f"{sc.seq_len:,} tokens, prefill of one sequence of {sc.seq_len:,} tokens "
        f"({PAIRS[pairs]}); compute in {dtype}, weights {weights}, KV in {sc.kv_dtype}."
    )
    if points and points[0]["profile"] != "roofline":
        scope += (
            " Times: the kernel time model, "
            + engine_words(points[0]["engine"], points[0]["profile"], points[0]["calibration"])
            + "."
        )
        if mla_geometry_note(sc.model):
            scope += f" {mla_geometry_note(sc.model)}."
    elif points:
        scope += f" Times: {points[0]['calibration']}."
    peak, bw = device.peak(dtype), device.memory_bandwidth_bytes_per_s
    top = max([1e5] + [10 * pt["intensity"] for pt in points])
    xs = np.geomspace(0.1, top, 200)
    fig = go.Figure()
    drawn = roofs(device, dtype, points)
    for name, roof in drawn:
        fig.add_trace(
            go.Scatter(x=xs, y=np.minimum(roof, xs * bw), mode="lines", name=f"{name} roofline")
        )
    for pt in points:
        fig.add_trace(
            go.Scatter(
                x=[pt["intensity"]],
                y=[pt["flops_per_s"]],
                mode="markers",
                name=" ".join(x for x in (pt["phase"], pt["impl"], pt["kind"]) if x),
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
    # one dtype named only where one roof is drawn (an fp8 roof beside bf16's: the legend's)
    y_title = f"attained FLOP/s ({dtype})" if len(drawn) == 1 else "attained FLOP/s"
    fig.update_yaxes(type="log", title=y_title, **decade_ticks())
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
                **({"layer kind": pt["kind"]} if kinds else {}),
                "FLOP/byte": round(pt["intensity"], 1),
                "ridge": round(pt["ridge"], 1),
                "bound": pt["bound"],
                "attained FLOP/s": human_si(pt["flops_per_s"], "FLOP/s"),
                "time": human_seconds(pt["seconds"]),
            }
            for pt in points
        ],
        scope=scope,
    )
    st.markdown(f"Ridge point of {device.name} ({dtype}): **{peak / bw:,.1f} FLOP/byte**")
    st.caption(
        "bound: a layer's FLOPs per byte against the ridge of the dtype doing most of its FLOPs "
        "(the ridge column; an fp8 GEMM's is twice bf16's), as `mlacalc roofline` labels it."
    )
    other = sorted({(pt["phase"], name, how) for pt in points for name, how, _ in pt["runs_as"]})
    if other:
        st.caption(
            "; ".join(
                f"{phase}: the engine runs {name} as {RUNS_AS.get(how, how)}"
                for phase, name, how in other
            )
            + ": its time is of that kernel's work, and so are the point's FLOPs and FLOP/byte "
            "(its own work over its own time); `mlacalc roofline`'s rows count the "
            "implementation named and give that kernel's FLOPs and bytes beside them."
        )
