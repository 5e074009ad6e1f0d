"""mlacalc in the browser: what an attention design costs.

    streamlit run app.py

Layout: this file builds the page, the sidebar (model, what-if dimensions, workload,
device) and the URL state, then hands a :class:`appviews.common.Scenario` to one module of
the ``appviews`` package per tab (listed in ``VIEWS``). Every number shown comes from the
mlacalc API; the scenario lives in the URL so a link reproduces it.
"""

from __future__ import annotations

import streamlit as st

st.set_page_config(page_title="mlacalc: what attention costs", page_icon="🧮", layout="wide")

import mlacalc
from appviews import flops, kv_cache, measured, parameters, planner, roofline
from appviews.common import (
    Scenario,
    load_shipped,
    load_uploaded,
    report_for,
    show_notices,
)
from appviews.urlstate import UrlState
from mlacalc import defaults as D
from mlacalc.hardware import measured_sets, shipped_hardware

#: The tabs, in order; adding a view is one line here.
VIEWS = [kv_cache, parameters, flops, roofline, planner, measured]

KV_DTYPES = ["bf16", "fp16", "fp8", "fp32", "int8", "int4", "fp8_ds_mla"]
W_DTYPES = ["bf16", "fp16", "fp8", "fp32", "int8", "int4"]

url = UrlState(st.query_params)
known_models = mlacalc.shipped_models()
known_hardware = shipped_hardware() + [f"measured:{s}" for s in measured_sets()]

st.title("mlacalc")
st.caption(
    "What an attention design costs: KV cache, parameters, FLOPs, roofline time and capacity, "
    "exact and from formulas you can read. Bytes in binary units (GiB = 2^30 B)."
)

with st.sidebar:
    st.header("Model")
    source = st.radio("Source", ["Shipped model", "Upload a config"], key="source", horizontal=True)
    shipped_name = st.selectbox(
        "Shipped model",
        known_models,
        key="model",
        index=known_models.index(url.choice("model", known_models, D.MODEL, "model")),
    )
    model = load_shipped(shipped_name)
    if source == "Upload a config":
        upload = st.file_uploader(
            "YAML model file or Hugging Face config.json",
            type=["yaml", "yml", "json"],
            key="upload",
        )
        if upload is not None:
            try:
                model = load_uploaded(upload.getvalue(), upload.name)
            except mlacalc.MlacalcError as exc:
                st.error(f"{exc}. Showing {model.label}.")

    with st.expander("What-if dimensions", expanded=False):
        whatif = st.checkbox("Edit dimensions", key="whatif")
        changes: dict = {}
        if whatif:
            changes["num_hidden_layers"] = st.number_input(
                "layers (L)", 1, 512, model.num_hidden_layers, key="w_layers"
            )
            changes["num_attention_heads"] = st.number_input(
                "heads (n_h)", 1, 1024, model.num_attention_heads, key="w_heads"
            )
            if model.is_mla:
                changes["num_key_value_heads"] = changes["num_attention_heads"]
                changes["kv_lora_rank"] = st.slider(
                    "latent width d_c (kv_lora_rank)",
                    16,
                    4096,
                    model.kv_lora_rank,
                    step=16,
                    key="w_dc",
                )
                changes["qk_rope_head_dim"] = st.slider(
                    "RoPE width d_rope", 2, 512, model.qk_rope_head_dim, step=2, key="w_rope"
                )
                q_lora = st.number_input(
                    "query latent d_cq (0 = plain W_Q)",
                    0,
                    16384,
                    model.q_lora_rank or 0,
                    key="w_dcq",
                )
                changes["q_lora_rank"] = q_lora or None
            else:
                changes["num_key_value_heads"] = st.number_input(
                    "KV heads (n_kv)", 1, 1024, model.num_key_value_heads, key="w_kv"
                )
                changes["head_dim"] = st.number_input(
                    "head width d_h", 1, 1024, model.head_dim, key="w_dh"
                )
            try:
                model = model.with_changes(
                    name=f"{model.name}-what-if",
                    display_name=f"{model.label} (what-if)",
                    **changes,
                )
            except mlacalc.MlacalcError as exc:
                st.error(str(exc).split(": ", 1)[-1])

    st.header("Workload")
    seq_len = st.number_input(
        "context length (tokens)",
        1,
        16 * 2**20,
        url.integer("seq_len", D.SEQ_LEN, 1, 16 * 2**20),
        step=1024,
        key="seq_len",
    )
    batch = st.number_input(
        "batch (sequences)", 1, 1 << 20, url.integer("batch", D.APP_BATCH, 1, 1 << 20), key="batch"
    )
    kv_dtype = st.selectbox(
        "KV dtype / layout",
        KV_DTYPES,
        key="kv_dtype",
        index=KV_DTYPES.index(url.choice("kv", KV_DTYPES, D.KV_DTYPE, "KV dtype")),
    )
    model_w = model.weights_dtype if model.weights_dtype in W_DTYPES else "bf16"
    weight_dtype = st.selectbox(
        "weight dtype",
        W_DTYPES,
        key="weight_dtype",
        index=W_DTYPES.index(url.choice("w", W_DTYPES, model_w, "weight dtype")),
    )
    hardware = st.selectbox(
        "device",
        known_hardware,
        key="hardware",
        index=known_hardware.index(url.choice("hw", known_hardware, D.HARDWARE, "device")),
    )

show_notices(url)
st.query_params.update(
    {
        "model": shipped_name,
        "seq_len": str(seq_len),
        "batch": str(batch),
        "kv": kv_dtype,
        "w": weight_dtype,
        "hw": hardware,
    }
)

scenario = Scenario(
    model=model,
    shipped_name=shipped_name,
    seq_len=int(seq_len),
    batch=int(batch),
    kv_dtype=kv_dtype,
    weight_dtype=weight_dtype,
    hardware=hardware,
    device=mlacalc.load_hardware(hardware),
    doc=report_for(model, int(seq_len), int(batch), kv_dtype, weight_dtype),
    url=url,
)

st.subheader(
    f"{model.label}: {model.variant.upper()}, {model.num_hidden_layers} layers, "
    f"d = {model.hidden_size}"
)
if model.derived:
    st.caption("Derived: " + "; ".join(model.derived))

for view, tab in zip(VIEWS, st.tabs([v.TITLE for v in VIEWS])):
    with tab:
        view.render(scenario)
