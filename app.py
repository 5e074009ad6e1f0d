"""mlacalc in the browser: what an attention design costs.

    streamlit run app.py

Layout: page config, cached loaders, widgets (each with a key, defaults from the URL),
one call into mlacalc per view, rendering. Every number shown comes from the mlacalc API;
the scenario lives in the URL so a link reproduces it.
"""

from __future__ import annotations

import json

import streamlit as st

st.set_page_config(page_title="mlacalc: what attention costs", page_icon="🧮", layout="wide")

import numpy as np  # noqa: E402
import plotly.graph_objects as go  # noqa: E402

import mlacalc  # noqa: E402
from mlacalc.config import ModelConfig, parse_upload  # noqa: E402
from mlacalc.hardware import measured_sets, shipped_hardware  # noqa: E402
from mlacalc.insight import absorption_crossover  # noqa: E402
from mlacalc.report import compare_rows, model_report  # noqa: E402
from mlacalc.units import human_bytes, human_si  # noqa: E402
from mlacalc.variants import as_variant  # noqa: E402

MAX_UPLOAD_BYTES = 1 << 20
KV_DTYPES = ["bf16", "fp16", "fp8", "fp32", "int8", "int4", "fp8_ds_mla"]
W_DTYPES = ["bf16", "fp16", "fp8", "fp32", "int8", "int4"]
MLA_IMPLS = ["naive", "compressed", "absorbed", "absorbed_merged"]


# ---------------------------------------------------------------------------- cached loaders

@st.cache_data(show_spinner=False)
def load_shipped(name: str) -> ModelConfig:
    return mlacalc.load_model(name)


@st.cache_data(show_spinner=False)
def load_uploaded(raw: bytes, filename: str) -> ModelConfig:
    return parse_upload(raw, filename, MAX_UPLOAD_BYTES)


@st.cache_data(show_spinner=False)
def report_for(model: ModelConfig, seq_len: int, batch: int, kv_dtype: str, weight_dtype: str) -> dict:
    return model_report(model, seq_len=seq_len, batch=batch, kv_dtype=kv_dtype, weight_dtype=weight_dtype)


@st.cache_data(show_spinner=False)
def kv_curves(model: ModelConfig, batch: int, kv_dtype: str, lengths: tuple) -> dict:
    impls = ["naive", None] if model.is_mla else [None]
    xs = np.array(lengths)
    return {str(impl or "latent" if model.is_mla else model.variant): mlacalc.sweep(
        model, "kv_cache_bytes", seq_len=xs, batch=batch, kv_dtype=kv_dtype, impl=impl).tolist() for impl in impls}


@st.cache_data(show_spinner=False)
def equivalents(model: ModelConfig, seq_len: int, batch: int, kv_dtype: str, kv_heads: int | None) -> list[dict]:
    variants = [as_variant(model, v, num_key_value_heads=kv_heads) for v in ("mha", "gqa", "mqa", "mla")]
    return compare_rows(variants, seq_len=seq_len, batch=batch, kv_dtype=kv_dtype)


@st.cache_data(show_spinner=False)
def roofline_points(model: ModelConfig, hardware: str, seq_len: int, batch: int, dtype: str) -> list[dict]:
    impls = MLA_IMPLS if model.is_mla else [None]
    points = []
    for phase, b in (("decode", batch), ("prefill", 1)):
        for impl in impls:
            p = mlacalc.predict_time(model, hardware, phase, seq_len, b, impl=impl, mode="fused", dtype=dtype)
            points.append({"phase": phase, "impl": p.impl, "intensity": p.arithmetic_intensity,
                           "flops_per_s": p.flops / p.seconds, "seconds": p.seconds, "bound": p.bound})
    return points


@st.cache_data(show_spinner=False)
def validation() -> list[dict]:
    return [v.to_dict() for v in mlacalc.validate()]


@st.cache_data(show_spinner=False)
def formulas_latex(q_lora: bool, variant: str) -> dict:
    import sympy as sp

    out = {"KV cache elements per token per layer": mlacalc.formula("kv_cache_elements", variant)}
    if variant == "mla":
        out["decode core FLOPs, absorbed"] = mlacalc.formula("attention_flops", "mla", "absorbed", phase="decode",
                                                             stage="core", q_lora=q_lora)
        out["decode core FLOPs, expanded (naive)"] = mlacalc.formula("attention_flops", "mla", "naive",
                                                                     phase="decode", stage="core", q_lora=q_lora)
        out["decode FLOPs, absorbed (all stages)"] = mlacalc.formula("attention_flops", "mla", "absorbed",
                                                                     phase="decode", q_lora=q_lora)
    else:
        out["decode FLOPs"] = mlacalc.formula("attention_flops", variant, phase="decode")
        out["prefill FLOPs, causal"] = mlacalc.formula("attention_flops", variant, phase="prefill", causal=True)
    return {k: sp.latex(v) for k, v in out.items()}


def download(rows, name: str, key: str):
    """CSV and JSON download buttons for a table (exact integers)."""
    import csv
    import io

    data = rows if isinstance(rows, list) else [rows]
    buffer = io.StringIO()
    columns = list(dict.fromkeys(k for r in data for k in r))
    writer = csv.DictWriter(buffer, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    for r in data:
        writer.writerow({k: json.dumps(v) if isinstance(v, (dict, list)) else v for k, v in r.items()})
    c1, c2 = st.columns(2)
    c1.download_button("CSV", buffer.getvalue(), f"{name}.csv", "text/csv", key=f"{key}_csv")
    c2.download_button("JSON", json.dumps(rows, indent=2), f"{name}.json", "application/json", key=f"{key}_json")


# ---------------------------------------------------------------------------- widgets

params = st.query_params
known_models = mlacalc.shipped_models()
known_hardware = shipped_hardware() + [f"measured:{s}" for s in measured_sets()]


def _url_int(name: str, default: int) -> int:
    try:
        value = int(params.get(name, default))
        return value if value > 0 else default
    except (TypeError, ValueError):
        return default


def _url_choice(name: str, choices: list, default):
    value = params.get(name, default)
    return value if value in choices else default


st.title("mlacalc")
st.caption("What an attention design costs: KV cache, parameters, FLOPs, roofline time and capacity, "
           "exact and from formulas you can read. Bytes in binary units (GiB = 2^30 B).")

with st.sidebar:
    st.header("Model")
    source = st.radio("Source", ["Shipped model", "Upload a config"], key="source", horizontal=True)
    shipped_name = st.selectbox("Shipped model", known_models, key="model",
                                index=known_models.index(_url_choice("model", known_models, "deepseek-v3")))
    model = load_shipped(shipped_name)
    if source == "Upload a config":
        upload = st.file_uploader("YAML model file or Hugging Face config.json", type=["yaml", "yml", "json"],
                                  key="upload")
        if upload is not None:
            try:
                model = load_uploaded(upload.getvalue(), upload.name)
            except mlacalc.MlacalcError as exc:
                st.error(f"{exc}. Showing {model.label}.")

    with st.expander("What-if dimensions", expanded=False):
        whatif = st.checkbox("Edit dimensions", key="whatif")
        changes: dict = {}
        if whatif:
            changes["num_hidden_layers"] = st.number_input("layers (L)", 1, 512, model.num_hidden_layers, key="w_layers")
            changes["num_attention_heads"] = st.number_input("heads (n_h)", 1, 1024, model.num_attention_heads,
                                                             key="w_heads")
            if model.is_mla:
                changes["num_key_value_heads"] = changes["num_attention_heads"]
                changes["kv_lora_rank"] = st.slider("latent width d_c (kv_lora_rank)", 16, 4096, model.kv_lora_rank,
                                                    step=16, key="w_dc")
                changes["qk_rope_head_dim"] = st.slider("RoPE width d_rope", 2, 512, model.qk_rope_head_dim, step=2,
                                                        key="w_rope")
                q_lora = st.number_input("query latent d_cq (0 = plain W_Q)", 0, 16384, model.q_lora_rank or 0,
                                         key="w_dcq")
                changes["q_lora_rank"] = q_lora or None
            else:
                changes["num_key_value_heads"] = st.number_input("KV heads (n_kv)", 1, 1024, model.num_key_value_heads,
                                                                 key="w_kv")
                changes["head_dim"] = st.number_input("head width d_h", 1, 1024, model.head_dim, key="w_dh")
            try:
                model = model.with_changes(name=f"{model.name}-what-if", display_name=f"{model.label} (what-if)",
                                           **changes)
            except mlacalc.MlacalcError as exc:
                st.error(str(exc).split(": ", 1)[-1])

    st.header("Workload")
    seq_len = st.number_input("context length (tokens)", 1, 16 * 2**20, _url_int("seq_len", 131072), step=1024,
                              key="seq_len")
    batch = st.number_input("batch (sequences)", 1, 1 << 20, _url_int("batch", 8), key="batch")
    kv_dtype = st.selectbox("KV dtype / layout", KV_DTYPES, key="kv_dtype",
                            index=KV_DTYPES.index(_url_choice("kv", KV_DTYPES, "bf16")))
    weight_dtype = st.selectbox("weight dtype", W_DTYPES, key="weight_dtype",
                                index=W_DTYPES.index(_url_choice("w", W_DTYPES, model.weights_dtype
                                                                  if model.weights_dtype in W_DTYPES else "bf16")))
    hardware = st.selectbox("device", known_hardware, key="hardware",
                            index=known_hardware.index(_url_choice("hw", known_hardware, "H200")))

st.query_params.update({"model": shipped_name, "seq_len": str(seq_len), "batch": str(batch), "kv": kv_dtype,
                        "w": weight_dtype, "hw": hardware})

# ---------------------------------------------------------------------------- one call per view

doc = report_for(model, int(seq_len), int(batch), kv_dtype, weight_dtype)
device = mlacalc.load_hardware(hardware)

st.subheader(f"{model.label}: {model.variant.upper()}, {model.num_hidden_layers} layers, d = {model.hidden_size}")
if model.derived:
    st.caption("Derived: " + "; ".join(model.derived))

kv_tab, params_tab, flops_tab, roof_tab, plan_tab = st.tabs(["KV cache", "Parameters", "FLOPs", "Roofline",
                                                             "Capacity planner"])

with kv_tab:
    rows = doc["kv_cache"]
    smallest = next(r for r in rows if r["impl"] in ("absorbed", "standard"))   # the cache a server keeps
    c1, c2, c3 = st.columns(3)
    c1.metric("per token, all layers", human_bytes(smallest["bytes_per_token"]))
    c2.metric(f"{seq_len:,} tokens x {batch:,}", human_bytes(smallest["total_bytes"]))
    c3.metric(f"of one {device.name}'s memory", f"{100 * smallest['total_bytes'] / device.memory_bytes:,.1f}%")
    label = "latent, as served" if model.is_mla else model.variant.upper()
    st.markdown(f"KV cache total ({label}): **{smallest['total_bytes']:,} bytes**")
    st.dataframe([{"implementation": r["impl"], "elements/token/layer": r["elements_per_token_per_layer"],
                   "bytes/token (all layers)": r["bytes_per_token"], "total bytes": r["total_bytes"],
                   "total": human_bytes(r["total_bytes"]), "x smallest": round(r["ratio_to_smallest"], 2)}
                  for r in rows], hide_index=True, width="stretch")
    download(rows, f"{model.name}-kv-cache", "dl_kv")
    log_axes = st.checkbox("log axes", value=True, key="kv_log")
    lengths = tuple(int(x) for x in np.unique(np.geomspace(1024, max(2**20, int(seq_len)), 48).astype(int)))
    curves = kv_curves(model, int(batch), kv_dtype, lengths)
    fig = go.Figure()
    for label, ys in curves.items():
        fig.add_trace(go.Scatter(x=lengths, y=[y / 2**30 for y in ys], mode="lines",
                                 name=f"{model.variant.upper()} {label}"))
    fig.add_trace(go.Scatter(x=[lengths[0], lengths[-1]], y=[device.memory_bytes / 2**30] * 2, mode="lines",
                             name=f"{device.name} memory", line=dict(dash="dash", color="black")))
    fig.update_layout(xaxis_title="context length (tokens)", yaxis_title=f"KV cache, GiB (batch {batch})",
                      height=380, margin=dict(t=30, b=40))
    fig.update_yaxes(exponentformat="power")
    if log_axes:
        fig.update_xaxes(type="log")
        fig.update_yaxes(type="log")
    st.plotly_chart(fig, width="stretch", key="kv_chart")
    st.markdown("**The same model as MHA, GQA, MQA and MLA** (everything but the attention kept)")
    kv_heads = None if model.num_attention_heads % 8 else 8
    try:
        eq = equivalents(model, int(seq_len), int(batch), kv_dtype, kv_heads)
        st.dataframe([{"design": r["display_name"], "KV bytes / token": r["kv_bytes_per_token"],
                       "KV total": human_bytes(r["kv_total_bytes"]), "total params": human_si(r["total_params"]),
                       "decode FLOPs": human_si(r["decode_flops"])} for r in eq],
                     hide_index=True, width="stretch")
        download(eq, f"{model.name}-equivalents", "dl_eq")
    except mlacalc.MlacalcError as exc:
        st.info(f"No equivalents: {exc}")

with params_tab:
    p = doc["parameters"]
    c1, c2, c3 = st.columns(3)
    c1.metric("total (main model)", human_si(p["total"]))
    c2.metric("active per token", human_si(p["active"]))
    c3.metric("MTP modules (apart)", human_si(p["mtp"]) if p["mtp"] else "none")
    st.markdown(f"Total parameters: **{p['total']:,}**; active: **{p['active']:,}**")
    parts = {k: v for k, v in p["breakdown"].items() if v}
    fig = go.Figure(go.Bar(x=list(parts.values()), y=list(parts.keys()), orientation="h"))
    fig.update_layout(xaxis_title="parameters", height=320, margin=dict(t=20, b=40))
    fig.update_xaxes(type="log", exponentformat="SI")
    st.plotly_chart(fig, width="stretch", key="params_chart")
    st.dataframe([{"projection (one layer)": k, "parameters": v} for k, v in p["attention_breakdown"].items()],
                 hide_index=True, width="stretch")
    download(p, f"{model.name}-parameters", "dl_params")

with flops_tab:
    rows = doc["attention"]
    phase = st.radio("phase", ["decode", "prefill"], horizontal=True, key="flops_phase")
    shown = [r for r in rows if r["phase"] == phase]
    st.dataframe([{"impl": r["impl"] + (" (default)" if r["default"] else ""), **{k: v for k, v in
                   r["stage_flops"].items()}, "total FLOPs": r["flops"], "elementwise": r["elementwise_flops"],
                   "fused bytes": r["fused_bytes"], "FLOP/byte": round(r["arithmetic_intensity_flops_per_byte"], 1)}
                  for r in shown], hide_index=True, width="stretch")
    download(shown, f"{model.name}-{phase}-flops", "dl_flops")
    fig = go.Figure()
    for stage in ("q_proj", "kv_proj", "kv_up", "absorb", "core", "o_proj"):
        fig.add_trace(go.Bar(name=stage, x=[r["impl"] + ("*" if r["default"] else "") for r in shown],
                             y=[r["stage_flops"][stage] for r in shown]))
    flops_log = st.checkbox("log scale (stages side by side)", key="flops_log")
    fig.update_layout(barmode="group" if flops_log else "stack", yaxis_title=f"{phase} FLOPs, all layers",
                      height=360, margin=dict(t=20))
    fig.update_yaxes(type="log" if flops_log else "linear", exponentformat="SI")
    st.plotly_chart(fig, width="stretch", key="flops_chart")
    if model.is_mla:
        by_impl = {r["impl"]: r for r in shown if not r["default"]}
        ratio = by_impl["absorbed"]["stage_flops"]["core"] / by_impl["naive"]["stage_flops"]["core"]
        cross = absorption_crossover(model, int(seq_len))
        c1, c2 = st.columns(2)
        c1.metric("absorbed / naive attention-core FLOPs", f"{ratio:.2f}x")
        c2.metric("absorption stops paying above", f"{cross.value:,.1f} query tokens")
    st.markdown("**Formulas** (sympy; symbols as in the docs: B batch, S keys, L layers, ...)")
    for label, tex in formulas_latex(model.q_lora_rank is not None, model.variant).items():
        st.caption(label)
        st.latex(tex)

with roof_tab:
    dtype = "fp32" if device.kind == "cpu" else "bf16"
    points = roofline_points(model, hardware, int(seq_len), int(batch), dtype)
    peak, bw = device.peak(dtype), device.memory_bandwidth_bytes_per_s
    xs = np.geomspace(0.1, 1e5, 200)
    fig = go.Figure(go.Scatter(x=xs, y=np.minimum(peak, xs * bw), mode="lines", name=f"{device.name} roofline"))
    for pt in points:
        fig.add_trace(go.Scatter(x=[pt["intensity"]], y=[pt["flops_per_s"]], mode="markers",
                                 name=f"{pt['phase']} {pt['impl']}", marker=dict(size=10)))
    if device.measured:
        # the committed measurements of this device: attained FLOP/s at the op sequence's intensity
        rows_here = [r for v in validation() if f"measured:{v['name']}" == hardware for r in v["rows"]]
        fig.add_trace(go.Scatter(x=[r["flops"] / r["bytes"] for r in rows_here],
                                 y=[r["flops"] / r["measured_s"] for r in rows_here], mode="markers",
                                 name="measured (microbenchmark)", marker=dict(symbol="x", size=7, color="gray"),
                                 text=[f"{r['model']} {r['impl']} {r['phase']} B={r['batch']} S={r['seq_len']}"
                                       for r in rows_here]))
    else:
        st.caption("Pick a measured device (measured:...) to see the microbenchmark's points on its roofline.")
    fig.update_xaxes(type="log", title="arithmetic intensity (FLOP/byte)")
    fig.update_yaxes(type="log", title=f"attained FLOP/s ({dtype})", exponentformat="SI")
    fig.update_layout(height=420, margin=dict(t=20))
    st.plotly_chart(fig, width="stretch", key="roof_chart")
    st.dataframe([{**pt, "seconds": pt["seconds"]} for pt in points], hide_index=True, width="stretch")
    st.markdown(f"Ridge point of {device.name} ({dtype}): **{peak / bw:,.1f} FLOP/byte**")
    st.markdown("**Predicted vs measured** (the unfused roofline on the committed microbenchmark sets)")
    for v in validation():
        st.markdown(f"{v['name']} ({v['device']}): median |error| **{100 * v['median_abs_error']:.1f}%**, "
                    f"worst {100 * v['worst_abs_error']:.1f}% over {v['rows_validated']} rows")
        fig = go.Figure()
        for variant in sorted({r["impl"] if r["variant"] == "mla" else r["variant"] for r in v["rows"]}):
            sel = [r for r in v["rows"] if (r["impl"] if r["variant"] == "mla" else r["variant"]) == variant]
            fig.add_trace(go.Scatter(x=[r["measured_s"] for r in sel], y=[r["predicted_s"] for r in sel],
                                     mode="markers", name=variant))
        lo = min(r["measured_s"] for r in v["rows"])
        hi = max(r["measured_s"] for r in v["rows"])
        fig.add_trace(go.Scatter(x=[lo, hi], y=[lo, hi], mode="lines", name="predicted = measured",
                                 line=dict(dash="dash")))
        fig.update_xaxes(type="log", title="measured (s)")
        fig.update_yaxes(type="log", title="predicted (s)")
        fig.update_layout(height=380, margin=dict(t=20))
        st.plotly_chart(fig, width="stretch", key=f"val_{v['name']}")
        st.dataframe(v["rows"], hide_index=True, width="stretch")
        download(v["rows"], f"validation-{v['name']}", f"dl_val_{v['name']}")

with plan_tab:
    c1, c2, c3, c4 = st.columns(4)
    gpus = c1.number_input("GPUs", 1, 4096, _url_int("gpus", 8), key="plan_gpus")
    tp = c2.number_input("tensor parallel", 1, 4096, min(int(gpus), _url_int("tp", int(gpus))), key="plan_tp")
    ep = c3.number_input("expert parallel", 1, 4096, 1, key="plan_ep")
    page = c4.number_input("page size (tokens)", 1, 4096, 16, key="plan_page")
    reserve = st.slider("memory reserve (activations, workspace)", 0.0, 0.5, 0.1, 0.01, key="plan_reserve")
    st.query_params.update({"gpus": str(gpus), "tp": str(tp)})
    try:
        if gpus % tp:
            raise mlacalc.InvalidArgumentError("tp", f"tensor parallel {tp} must divide the {gpus} GPUs")
        result = mlacalc.plan(model, hardware, int(gpus), tp=int(tp), ep=int(ep), weight_dtype=weight_dtype,
                              kv_dtype=kv_dtype, page_size=int(page), memory_reserve=float(reserve),
                              seq_len=int(seq_len), batch=int(batch))
    except mlacalc.MlacalcError as exc:
        st.error(str(exc))
    else:
        c1, c2, c3, c4 = st.columns(4)
        c1.metric(f"largest batch at {seq_len:,} tokens", f"{result.max_batch:,}")
        c2.metric(f"longest context at batch {batch:,}", f"{result.max_context:,}" if result.max_context else "-")
        c3.metric(f"decode tokens/s at batch {result.decode_batch or 0:,} (bound)",
                  f"{result.decode_tokens_per_s:,.0f}" if result.decode_tokens_per_s else "nothing fits")
        c4.metric("binding", result.binding)
        st.markdown(f"Largest batch: **{result.max_batch:,}** sequences; weights per GPU: "
                    f"**{result.weights_per_gpu_bytes:,} bytes**; KV per token per GPU: "
                    f"**{result.kv_bytes_per_token_per_gpu:,} bytes**")
        kv_used = min(result.kv_budget_per_gpu_bytes,
                      result.kv_bytes_per_token_per_gpu * int(seq_len) * -(-int(batch) // result.dp))
        fill = {"weights": result.weights_per_gpu_bytes, f"KV ({batch} x {seq_len:,})": kv_used,
                "reserve": result.memory_per_gpu_bytes - result.usable_per_gpu_bytes,
                "free": max(0, result.usable_per_gpu_bytes - result.weights_per_gpu_bytes - kv_used)}
        fig = go.Figure([go.Bar(name=k, x=[v / 2**30], y=["one GPU"], orientation="h") for k, v in fill.items()])
        fig.update_layout(barmode="stack", xaxis_title="GiB", height=200, margin=dict(t=20, b=40))
        st.plotly_chart(fig, width="stretch", key="plan_chart")
        download(result.to_dict(), f"{model.name}-plan", "dl_plan")
