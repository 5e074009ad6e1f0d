"""Serving / capacity planner view: what fits per GPU, the largest batch, decode tokens/s."""

from __future__ import annotations

import plotly.graph_objects as go
import streamlit as st

import mlacalc
from mlacalc import defaults as D

from .common import Scenario, download, show_notices

TITLE = "Capacity planner"


def render(sc: Scenario) -> None:
    model, seq_len, batch = sc.model, sc.seq_len, sc.batch
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
    reserve = st.slider(
        "memory reserve (activations, workspace)",
        0.0,
        0.5,
        D.MEMORY_RESERVE,
        0.01,
        key="plan_reserve",
    )
    show_notices(sc.url, seen)
    st.query_params.update({"gpus": str(gpus), "tp": str(tp)})
    try:
        if gpus % tp:
            raise mlacalc.InvalidArgumentError(
                "tp", f"tensor parallel {tp} must divide the {gpus} GPUs"
            )
        result = mlacalc.plan(
            model,
            sc.hardware,
            int(gpus),
            tp=int(tp),
            ep=int(ep),
            weight_dtype=sc.weight_dtype,
            kv_dtype=sc.kv_dtype,
            page_size=int(page),
            memory_reserve=float(reserve),
            seq_len=seq_len,
            batch=batch,
        )
    except mlacalc.MlacalcError as exc:
        st.error(str(exc))
        return
    st.caption(
        f"Per GPU: {result.gpus} x {result.hardware} (tp {result.tp}, dp {result.dp}, "
        f"ep {result.ep}); throughput is a roofline upper bound for the whole deployment."
    )
    c1, c2, c3, c4 = st.columns(4)
    c1.metric(f"largest batch at {seq_len:,} tokens", f"{result.max_batch:,}")
    c2.metric(
        f"longest context at batch {batch:,}",
        f"{result.max_context:,}" if result.max_context else "-",
    )
    c3.metric(
        f"decode tokens/s at batch {result.decode_batch or 0:,} (bound)",
        f"{result.decode_tokens_per_s:,.0f}" if result.decode_tokens_per_s else "nothing fits",
    )
    c4.metric("binding", result.binding)
    st.markdown(
        f"Largest batch: **{result.max_batch:,}** sequences; weights per GPU: "
        f"**{result.weights_per_gpu_bytes:,} bytes**; KV per token per GPU: "
        f"**{result.kv_bytes_per_token_per_gpu:,} bytes**"
    )
    kv_used = min(
        result.kv_budget_per_gpu_bytes,
        result.kv_bytes_per_token_per_gpu * seq_len * -(-batch // result.dp),
    )
    fill = {
        "weights": result.weights_per_gpu_bytes,
        f"KV ({batch} x {seq_len:,})": kv_used,
        "reserve": result.memory_per_gpu_bytes - result.usable_per_gpu_bytes,
        "free": max(0, result.usable_per_gpu_bytes - result.weights_per_gpu_bytes - kv_used),
    }
    fig = go.Figure(
        [go.Bar(name=k, x=[v / 2**30], y=["one GPU"], orientation="h") for k, v in fill.items()]
    )
    fig.update_layout(
        title="Memory of one GPU",
        barmode="stack",
        xaxis_title="GiB",
        height=230,
        margin=dict(t=50, b=40),
    )
    st.plotly_chart(fig, width="stretch", key="plan_chart")
    download(result.to_dict(), f"{model.name}-plan", "dl_plan")
