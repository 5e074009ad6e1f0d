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
#: Metric values scale with the window and wrap instead of being cut with "...": a trial read
#: the planner's TPOT as "153.95 ..." at 1400 px and its TTFT as "9..." at 800 px, the KV
#: view's per-token and total bytes both as "320.00 ..."
METRIC_CSS = (
    "<style>"
    '[data-testid="stMetricValue"]{font-size:clamp(1.15rem,2.1vw,2.25rem);}'
    '[data-testid="stMetricValue"] *,[data-testid="stMetricLabel"] *'
    "{white-space:normal;overflow:visible;text-overflow:clip;}"
    "</style>"
)
st.markdown(METRIC_CSS, unsafe_allow_html=True)

import mlacalc
from appviews import convert, flops, kv_cache, measured, parameters, planner, roofline, training
from appviews.common import (
    MAX_UPLOAD_BYTES,
    Scenario,
    load_shipped,
    load_uploaded,
    report_for,
    show_notices,
)
from appviews.urlstate import UrlState
from mlacalc.hardware.catalogue import (
    ALIASES,
    MEASURED_SYSTEMS,
    measured_sets,
    shipped_hardware,
)
from mlacalc.models.architecture import count_warnings, layer_pattern
from mlacalc.models.loading import ModelConfig, shipped_aliases
from mlacalc.words import defaults as D
from mlacalc.words.dtypes import DTYPE_BITS, KV_LAYOUTS, STATE_DTYPES
from mlacalc.words.engines import DEFAULT_ENGINE, ENGINES, default_engine, default_engine_words
from mlacalc.words.errors import MlacalcError
from mlacalc.words.vocab import FIELD_SYMBOLS

#: The tabs, in order; adding a view is one line here.
VIEWS = [kv_cache, parameters, flops, roofline, planner, measured, convert, training]

#: The dtypes mlacalc knows (weights), and the KV layouts on top (KV cache).
W_DTYPES = list(DTYPE_BITS)
#: Weight formats with scales (``mlacalc plan --expert-dtype``), not a weight dtype of their own
STORAGE_FORMATS = ("nvfp4", "mxfp4", "mxfp4_mxfp8")
KV_DTYPES = W_DTYPES + list(KV_LAYOUTS)
#: The weight-dtype entry of a quantized checkpoint sized as stored (until a dtype is picked).
CHECKPOINT = "checkpoint"


def kv_dtypes_for(m: ModelConfig) -> list[str]:
    """The KV dtypes and layouts that apply to a model (latent layouts only to MLA)."""
    return W_DTYPES + [k for k, lay in KV_LAYOUTS.items() if m.is_mla or lay.rope_bits is None]


#: The uploaders' limit in Streamlit's MB (2^20 bytes): what parse_upload accepts, so that
#: the uploader's label says the app's limit (its default said 200MB)
UPLOAD_MB = MAX_UPLOAD_BYTES >> 20

#: What-if widgets: (widget key, config field, label, smallest, largest, step), MLA and others.
WHATIF_MLA = [
    ("w_layers", "num_hidden_layers", "layers (L)", 1, 512, 1),
    ("w_heads", "num_attention_heads", "heads (n_h)", 1, 1024, 1),
    ("w_dc", "kv_lora_rank", "latent width d_c (kv_lora_rank)", 16, 4096, 16),
    ("w_rope", "qk_rope_head_dim", "RoPE width d_rope", 2, 512, 2),
    ("w_dcq", "q_lora_rank", "query latent d_cq (0 = plain W_Q)", 0, 16384, 1),
    ("w_dnope", "qk_nope_head_dim", "no-RoPE query/key width d_nope", 1, 1024, 1),
    ("w_dv", "v_head_dim", "value head width d_v", 1, 1024, 1),
    ("w_hidden", "hidden_size", "hidden width d", 1, 65536, 64),
]
#: What a what-if widget's bounds mean, where a bound is the model's rule (trial10: a URL's
#: d_rope=0 clamped to 2 with no word why)
WHATIF_HELP = {
    "w_rope": "MLA needs a decoupled RoPE key: an even width of at least 2 (mlacalc models "
    "no MLA without RoPE); a smaller value, from a URL too, is clamped to 2",
}
WHATIF_MHA = [
    ("w_layers", "num_hidden_layers", "layers (L)", 1, 512, 1),
    ("w_heads", "num_attention_heads", "heads (n_h)", 1, 1024, 1),
    ("w_kv", "num_key_value_heads", "KV heads (n_kv)", 1, 1024, 1),
    ("w_dh", "head_dim", "head width d_h", 1, 1024, 1),
    ("w_hidden", "hidden_size", "hidden width d", 1, 65536, 64),
]
#: URL parameters the planner view reads.
PLANNER_URL_KEYS = {"gpus", "tp", "ep", "dpa", "redundant_experts", "experts"} | {
    "isl",
    "osl",
    "conc",
    "ttft",
    "tpot",
    "price",
    "hit",
    "shared",
}
#: URL parameter of the open tab (its title; the first tab when absent).
VIEW_KEY = "view"
#: the recurrent state's dtypes the sidebar offers
STATE_CHOICES = list(STATE_DTYPES)
#: URL parameters the sidebar writes (the planner adds its own).
URL_KEYS = {"model", "seq_len", "batch", "kv", "state", "w", "hw", "engine", "whatif"} | {
    FIELD_SYMBOLS[field] for _k, field, *_ in WHATIF_MLA + WHATIF_MHA
}

state = st.session_state
url = UrlState(st.query_params)
first_run = "model" not in state
known_models = mlacalc.shipped_models()
known_hardware = shipped_hardware() + [f"measured:{s}" for s in measured_sets()]


def _mark_weight_dtype() -> None:
    """The user picked a weight dtype: it no longer follows the model."""
    state["w_user"] = state["weight_dtype"] != state.get("w_model_default")


def _mark_engine() -> None:
    """The user picked an engine: it no longer follows the device."""
    state["engine_user"] = True


def _device_engine(name: str) -> str:
    """The engine a device defaults to (SGLang on AMD: TensorRT-LLM runs on NVIDIA GPUs only),
    as plan and search take it where none is named."""
    try:
        return default_engine(mlacalc.load_hardware(name))
    except MlacalcError:  # a device the catalogue cannot load: the usual default
        return DEFAULT_ENGINE


def _whatif_fields(m: ModelConfig) -> list[tuple[str, str, str, int, int, int]]:
    return WHATIF_MLA if m.is_mla else WHATIF_MHA


def _field_value(m: ModelConfig, field: str) -> int:
    return int(getattr(m, field) or 0)


if first_run:  # the URL seeds the widgets once; afterwards the widgets are the state
    state["model"] = url.choice("model", known_models, D.MODEL, "model", aliases=shipped_aliases())
    state["seq_len"] = url.integer("seq_len", D.SEQ_LEN, 1, 16 * 2**20)
    state["batch"] = url.integer("batch", D.APP_BATCH, 1, 1 << 20)
    state["kv_dtype"] = url.choice("kv", KV_DTYPES, D.KV_DTYPE, "KV dtype")
    state["state_dtype"] = url.choice("state", STATE_CHOICES, "fp32", "recurrent state dtype")
    state["hardware"] = url.choice(
        "hw", known_hardware, D.HARDWARE, "device", aliases=ALIASES | MEASURED_SYSTEMS
    )
    # an engine in the URL is the user's; without one it follows the device (SGLang on AMD)
    state["engine_user"] = "engine" in st.query_params
    state["engine"] = url.choice(
        "engine", list(ENGINES), _device_engine(state["hardware"]), "serving engine"
    )
    raw_w = str(st.query_params.get("w", "")).strip().lower()
    if raw_w in STORAGE_FORMATS:  # a format with scales: the planner's experts take it
        url.notices.append(
            f"URL parameter 'w={raw_w[:16]}' is a storage format (scales counted), which the "
            f"Capacity planner takes for the routed experts: experts={raw_w}; weights sized "
            "as the model ships them."
        )
        url_weight = None
    else:
        url_weight = url.choice("w", W_DTYPES, None, "weight dtype")
    if url_weight is not None:
        state["weight_dtype"], state["w_user"] = url_weight, True
    whatif_symbols = {FIELD_SYMBOLS[field] for _k, field, *_ in WHATIF_MLA + WHATIF_MHA}
    state["whatif"] = url.flag("whatif", default=any(k in st.query_params for k in whatif_symbols))
    titles = [v.TITLE for v in VIEWS]
    if VIEW_KEY in st.query_params and st.query_params[VIEW_KEY] not in titles:  # as written
        url.notices.append(
            f"URL parameter {url.describe(VIEW_KEY)} is not a known view ({', '.join(titles)}); "
            f"showing {titles[0]}."
        )
    for key in st.query_params:
        if key not in URL_KEYS | PLANNER_URL_KEYS | {VIEW_KEY}:
            shown = ", ".join(sorted(URL_KEYS | PLANNER_URL_KEYS | {VIEW_KEY}))
            url.notices.append(f"Unknown URL parameter '{key[:64]}' ignored (known: {shown}).")

st.title("mlacalc")
st.caption(
    "What an attention design costs: KV cache, parameters, FLOPs, roofline time and capacity, "
    "exact and from formulas you can read. Bytes in binary units (GiB = 2^30 B)."
)

with st.sidebar:
    st.header("Model")
    source = st.radio("Source", ["Shipped model", "Upload a config"], key="source", horizontal=True)
    uploaded = ""  # the uploaded file's name, once it loads
    upload_error = ""  # why the uploaded file did not load (the shipped model is shown)
    if source == "Shipped model":
        shipped_name = st.selectbox("Shipped model", known_models, key="model")
    else:  # hidden while a file is the model: kept (with the URL's choice) for the way back
        state["model"] = state["model"]
        shipped_name = state["model"]
    model = load_shipped(shipped_name)
    if source == "Upload a config":
        upload = st.file_uploader(
            "YAML model file or Hugging Face config.json",
            type=["yaml", "yml", "json"],
            key="upload",
            max_upload_size=UPLOAD_MB,
        )
        st.caption(
            "An uploaded file stays in this browser session: a shared link carries the shipped "
            "model, the workload and what-if edits, not the upload."
        )
        quant = st.file_uploader(
            "Its hf_quant_config.json (optional: a ModelOpt NVFP4 / FP8 export's scheme)",
            type=["json"],
            key="upload_quant",
            max_upload_size=UPLOAD_MB,
        )
        if upload is not None:
            try:
                model = load_uploaded(
                    upload.getvalue(), upload.name, quant.getvalue() if quant else None
                )
                uploaded = upload.name
            except mlacalc.MlacalcError as exc:
                upload_error = f"{upload.name} did not load: {str(exc).rstrip('.')}"
                st.error(f"{upload_error}. Showing the shipped {model.label}.")
        else:
            st.caption(f"No file yet: showing the shipped {model.label}.")

    with st.expander("What-if dimensions", expanded=bool(state.get("whatif"))):
        whatif = st.checkbox("Edit dimensions", key="whatif")
        base_key = f"{model.name}:{model.variant}"
        if state.get("whatif_base") != base_key:  # a new model: its own dimensions
            for key, field, _label, lo, hi, _step in _whatif_fields(model):
                value = _field_value(model, field)
                if first_run:
                    symbol = FIELD_SYMBOLS[field]
                    value = url.integer(symbol, value, lo, hi)
                state[key] = min(hi, max(lo, value))
            if first_run:
                used = {FIELD_SYMBOLS[field] for _k, field, *_ in _whatif_fields(model)}
                for _k, field, *_ in WHATIF_MLA + WHATIF_MHA:
                    symbol = FIELD_SYMBOLS[field]
                    if symbol in st.query_params and symbol not in used:
                        url.notices.append(
                            f"URL parameter {url.describe(symbol)} does not "
                            f"apply to {model.label} "
                            f"({model.variant.upper()}); ignored."
                        )
                        used.add(symbol)
            state["whatif_base"] = base_key
        changes: dict = {}
        invalid_edit = ""  # why the what-if edits were refused (the figures are then unedited)
        if whatif:
            for key, field, label, lo, hi, step in _whatif_fields(model):
                if key in ("w_dc", "w_rope"):
                    changes[field] = st.slider(
                        label, lo, hi, step=step, key=key, help=WHATIF_HELP.get(key)
                    )
                else:
                    changes[field] = st.number_input(label, lo, hi, step=step, key=key)
            derived_dh = any(str(n).startswith("head_dim = ") for n in model.derived)
            if changes.get("head_dim") == model.head_dim and derived_dh:
                # a head width the file derived and left as it was is not stated: a changed
                # hidden width or heads then keeps it with the CLI's word (count_warnings)
                del changes["head_dim"]
            if model.is_mla:
                changes["num_key_value_heads"] = changes["num_attention_heads"]
                changes["q_lora_rank"] = changes["q_lora_rank"] or None
            try:
                model = model.with_changes(
                    name=f"{model.name}-what-if",
                    display_name=f"{model.label} (what-if)",
                    **changes,
                )
            except mlacalc.MlacalcError as exc:
                invalid_edit = str(exc).split(": ", 1)[-1].rstrip(".")
                st.error(f"{invalid_edit}. Showing the unedited {model.label}.")

    st.header("Workload")
    seq_len = st.number_input("context length (tokens)", 1, 16 * 2**20, step=1024, key="seq_len")
    batch = st.number_input("batch (sequences)", 1, 1 << 20, key="batch")
    kv_options = kv_dtypes_for(model)
    if state.get("kv_dtype") not in kv_options:  # a latent layout kept from an MLA model
        st.caption(
            f"KV layout {state.get('kv_dtype')} is for an MLA latent cache; {model.label} "
            f"caches per-head keys and values: KV sized in {D.KV_DTYPE}."
        )
        state["kv_dtype"] = D.KV_DTYPE
    kv_dtype = st.selectbox("KV dtype / layout", kv_options, key="kv_dtype")
    state_dtype = None  # a model with no linear or Mamba layer keeps no recurrent state
    if layer_pattern(model).keeps_state:
        state_dtype = st.selectbox(
            "recurrent state dtype",
            STATE_CHOICES,
            key="state_dtype",
            help="The dtype a linear-attention or Mamba layer's recurrent state is kept in: "
            "float32 as the reference keeps it, or bf16 as an engine may (half the state's "
            "memory and bytes a step). Its convolution window is in the KV dtype.",
        )
    model_weight = model.weights_dtype if model.weights_dtype in W_DTYPES else D.DTYPE
    w_options = W_DTYPES if model.quantization is None else [CHECKPOINT, *W_DTYPES]
    w_default = model_weight if model.quantization is None else CHECKPOINT
    state["w_model_default"] = w_default
    if not state.get("w_user") or state.get("weight_dtype") not in w_options:
        state["weight_dtype"], state["w_user"] = w_default, False  # follows the model
    picked = st.selectbox(
        "weight dtype",
        w_options,
        key="weight_dtype",
        on_change=_mark_weight_dtype,
        format_func=lambda o: (
            f"checkpoint ({model.quantization.describe()})" if o == CHECKPOINT else o
        ),
    )
    weight_dtype = model_weight if picked == CHECKPOINT else picked
    if picked == CHECKPOINT:
        st.caption(
            f"{model.label} weights sized as its checkpoint stores them: "
            f"{model.quantization.describe()}, scales included (pick a dtype to override)."
        )
    elif weight_dtype != model_weight:
        st.caption(f"{model.label} ships {model_weight} weights; sized here in {weight_dtype}.")
    hardware = st.selectbox("device", known_hardware, key="hardware")
    if not state.get("engine_user"):  # not picked: the device's default engine
        state["engine"] = _device_engine(hardware)
    engine = st.selectbox(
        "serving engine",
        list(ENGINES),
        key="engine",
        on_change=_mark_engine,
        help="Whose kernels are timed (attention backends, GEMM libraries, fused MoE, "
        "all-reduce): each engine's profile fitted on its own measured tables; where an engine "
        "has none for the device, TensorRT-LLM's stands in and the times say so.",
    )
    if not state.get("engine_user") and engine != DEFAULT_ENGINE:
        st.caption(f"engine: {engine} ({default_engine_words(mlacalc.load_hardware(hardware))})")

show_notices(url)
query = {
    "model": shipped_name,
    "seq_len": str(seq_len),
    "batch": str(batch),
    "kv": kv_dtype,
    "hw": hardware,
    "engine": engine,
}
if state.get("w_user"):
    query["w"] = weight_dtype
if state_dtype not in (None, "fp32"):
    query["state"] = state_dtype
if whatif:
    query["whatif"] = "1"
    for key, field, *_ in _whatif_fields(model):  # the edits as typed, valid or not
        query[FIELD_SYMBOLS[field]] = str(state[key])
stale = [k for k in st.query_params if k not in query and k in URL_KEYS]
for key in stale:
    del st.query_params[key]
st.query_params.update(query)

scenario = Scenario(
    model=model,
    shipped_name=shipped_name,
    seq_len=int(seq_len),
    batch=int(batch),
    kv_dtype=kv_dtype,
    weight_dtype=weight_dtype,
    hardware=hardware,
    device=mlacalc.load_hardware(hardware),
    doc=report_for(
        model,
        int(seq_len),
        int(batch),
        kv_dtype,
        weight_dtype if state.get("w_user") else None,
        state_dtype,
    ),
    url=url,
    weight_chosen=bool(state.get("w_user")),
    engine=engine,
    state_dtype=state_dtype,
)

st.subheader(
    f"{model.label}"
    # a bare config.json names no model: its model_type stands in, and the file is said
    + (f" (uploaded {uploaded})" if uploaded and model.name not in uploaded.lower() else "")
    + f": {model.variant.upper()}, {model.num_hidden_layers} layers, d = {model.hidden_size}"
)
if upload_error:  # the sidebar's box is easy to miss: said where the figures are
    st.error(
        f"{upload_error}. Every figure below is the shipped {model.label}'s, not the file's: "
        "fix the file and upload it again, or pick a shipped model.",
        icon=":material/error:",
    )
if model.derived:
    st.caption("Derived: " + "; ".join(model.derived))
for sentence in count_warnings(model):  # valid but likely not meant: report's warning lines
    st.warning(sentence, icon=":material/warning:")
if invalid_edit:  # every tab shows the unedited model: said where the figures are
    st.warning(
        f"The what-if dimensions are not valid ({invalid_edit}): every figure below is the "
        f"unedited {model.label}'s. Fix the edits in the sidebar or untick Edit dimensions.",
        icon=":material/warning:",
    )

# Only the open tab runs (the tab is bound to the URL as ?view=...): a first load computes one
# view, so the server answers the browser's requests for the widgets' scripts at once (while
# every tab ran, the sidebar's widgets stayed grey placeholders until the whole page was done).
tabs = st.tabs([v.TITLE for v in VIEWS], key=VIEW_KEY, bind="query-params")
for view, tab in zip(VIEWS, tabs):
    if tab.open:
        with tab:
            view.render(scenario)
