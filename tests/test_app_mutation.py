"""The app under mutated input: URL parameters and uploads never end in an exception element.

Every URL parameter the app reads gets wrong types, extreme values and junk; every case must
render all views (no exception element), and a rejected value must be named in a notice.
Uploads get malformed, oversized, hostile and wrong-typed files; each must show an error
naming the problem (or load) and leave the page working on the shipped model.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("streamlit")
pytest.importorskip("plotly")
from _helpers import app_test
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from streamlit.testing.v1 import AppTest

import mlacalc

DEFAULT_KV = f"({mlacalc.kv_cache_bytes('deepseek-v3', 131072, 8):,} bytes)"

JUNK = [
    "",
    " ",
    "abc",
    "-1",
    "0",
    "1e9",
    "3.5",
    "NaN",
    "inf",
    "None",
    "[]",
    "{}",
    "💥",
    "x" * 5000,
    str(10**30),
    str(-(10**30)),
    "0x10",
    "1_000",
    "١٢٣",
]
KEYS = [
    "model",
    "seq_len",
    "batch",
    "kv",
    "state",
    "w",
    "hw",
    "whatif",
    "L",
    "n_h",
    "d_c",
    "d_rope",
    "d_cq",
    "n_kv",
    "d_h",
    "gpus",
    "tp",
    "ep",
    "dpa",
    "redundant_experts",
    "view",
]
#: The planner's tab (the only one reading ``gpus``, ``tp``, ``ep``, ``dpa`` and
#: ``redundant_experts``).
PLANNER = "Capacity planner"


def run(
    query: dict[str, str],
    upload: tuple[str, bytes] | None = None,
    quant: tuple[str, bytes] | None = None,
) -> AppTest:
    at = app_test()
    for key, value in query.items():
        at.query_params[key] = value
    at.run()
    if upload is not None:
        at.radio(key="source").set_value("Upload a config").run()
        if quant is not None:
            at.file_uploader(key="upload_quant").set_value((quant[0], quant[1], "text/plain"))
        at.file_uploader(key="upload").set_value((upload[0], upload[1], "text/plain")).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def notices(at: AppTest) -> str:
    return "\n".join(w.value for w in at.warning)


@pytest.mark.parametrize("value", ["abc", "0", "💥", "x" * 5000, str(10**30), "-7", "2.5"])
def test_every_url_parameter_with_junk(value):
    """Every parameter at once with one bad value: all named in notices, the first view renders;
    the planner's parameters with the planner open."""
    at = run(dict.fromkeys(KEYS, value))
    text = "\n".join(m.value for m in at.markdown)
    assert "KV cache total" in text and len(at.tabs) >= 6
    shown = notices(at)
    planner = run({**dict.fromkeys(KEYS, value), "view": PLANNER})
    assert "Deployment and request mix" in "\n".join(m.value for m in planner.markdown)
    shown += "\n" + notices(planner)
    for key in KEYS:
        # valid: no what-if, plain W_Q, no DP-attention, no redundant experts
        valid = (("whatif", "0"), ("d_cq", "0"), ("dpa", "0"), ("redundant_experts", "0"))
        if (key, value) in valid:
            continue
        named = f"'{key}'" if len(value) > 64 else f"'{key}={value}'"
        assert named in shown, (key, value, shown)


@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(
    st.dictionaries(
        st.sampled_from(KEYS),
        st.one_of(
            st.sampled_from(JUNK), st.text(max_size=20), st.integers(-(10**40), 10**40).map(str)
        ),
        max_size=6,
    )
)
def test_random_url_mutations(query):
    at = run(query)
    assert "KV cache total" in "\n".join(m.value for m in at.markdown)


def test_every_url_parameter_repeated_is_named():
    """A key given twice is read as its last value, with a notice naming both values."""
    twice = {
        "model": ["llama-3-8b", "gpt2"],
        "seq_len": ["4096", "8192"],
        "batch": ["2", "3"],
        "kv": ["fp8", "bf16"],
        "hw": ["H100-SXM", "H200"],
        "gpus": ["4", "2"],
        "tp": ["2", "1"],
        "ep": ["4", "2"],
        "dpa": ["0", "1"],
        "redundant_experts": ["8", "0"],
    }
    at = run({**twice, "view": PLANNER})
    shown = notices(at)
    for key, (a, b) in twice.items():
        assert f"URL parameter '{key}' is given 2 times ({a}, {b}); using the last, {b}." in shown
    assert at.number_input(key="plan_gpus").value == 2 and at.selectbox(key="model").value == "gpt2"


def _shipped(name: str) -> bytes:
    return (Path(mlacalc.__file__).parent / "data" / "models" / f"{name}.yaml").read_bytes()


HF_V3 = {
    "model_type": "deepseek_v3",
    "hidden_size": 7168,
    "num_hidden_layers": 61,
    "num_attention_heads": 128,
    "kv_lora_rank": 512,
    "q_lora_rank": 1536,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "v_head_dim": 128,
    "vocab_size": 129280,
    "intermediate_size": 18432,
}


def _hf(**changes) -> bytes:
    return json.dumps({**HF_V3, **changes}).encode()


UPLOADS = [
    ("empty.yaml", b""),
    ("list.yaml", b"- 1\n- 2\n"),
    ("bad.yaml", b"name: x\nhidden_size: [\n"),
    (
        "laughs.yaml",
        b"a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a]\n"
        b"c: &c [*b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c]\n"
        b"e: [*d, *d, *d, *d, *d, *d, *d, *d, *d]\n",
    ),
    ("deep.json", b"[" * 100_000 + b"]" * 100_000),
    (
        "bigint.json",
        _hf(hidden_size=0).replace(b'"hidden_size": 0', b'"hidden_size": ' + b"9" * 5000),
    ),
    ("layers.json", _hf(num_hidden_layers=10**30)),
    ("experts.json", _hf(n_routed_experts=10**30, num_experts_per_tok=8)),
    ("string.json", _hf(hidden_size="abc")),
    ("null.json", _hf(hidden_size=None)),
    ("typelist.json", _hf(model_type=["deepseek_v3"])),
    ("path.json", _hf(_name_or_path=1.5)),
    (
        "falcon.json",
        json.dumps(
            {
                "model_type": "falcon",
                "hidden_size": 4544,
                "num_hidden_layers": 32,
                "num_attention_heads": 71,
                "multi_query": "false",
                "vocab_size": 65024,
            }
        ).encode(),
    ),
    ("binary.yaml", b"\xff\xfe\x00\x00"),
    ("evil.yaml", b"!!python/object/apply:os.system ['true']"),
    ("dupe.yaml", _shipped("gpt2") + b"\nhidden_size: 768\n"),
    ("big.yaml", b"#" * ((1 << 20) + 10)),
]


@pytest.mark.parametrize("name,raw", UPLOADS, ids=[u[0] for u in UPLOADS])
def test_hostile_uploads(name, raw):
    at = run({}, upload=(name, raw))
    shown = "Showing the shipped DeepSeek-V3"
    assert any(shown in e.value for e in at.sidebar.error), f"{name}: accepted silently"
    # said above the tabs too, where the figures are (the sidebar's box was easy to miss)
    assert any(f"{name} did not load" in e.value for e in at.main.error), name
    assert all("Traceback" not in e.value for e in at.error)
    assert DEFAULT_KV in "\n".join(m.value for m in at.markdown)  # still showing DeepSeek-V3


def test_good_upload_is_used():
    at = run({}, upload=("gpt2.yaml", _shipped("gpt2")))
    assert not any("Showing" in e.value for e in at.error)  # no upload error (the planner
    assert "GPT-2" in at.subheader[0].value  # may still refuse tp 8 for 12 heads)
    assert f"({mlacalc.kv_cache_bytes('gpt2', 131072, 8):,} bytes)" in "\n".join(
        m.value for m in at.markdown
    )
    assert any("not the upload" in c.value for c in at.caption)


def test_an_uploaded_config_json_is_the_model_the_sidebar_and_title_name():
    """After an upload the sidebar still showed the shipped deepseek-v3 and the title the
    model_type alone (a bare config.json names no model)."""
    from reference_data import HF_CONFIGS_2

    raw = (HF_CONFIGS_2 / "nvidia--NVIDIA-Nemotron-3-Super-120B-A12B-FP8.config.json").read_bytes()
    at = run({}, upload=("config.json", raw))
    assert not any("Showing" in e.value for e in at.error)
    assert not [s for s in at.selectbox if s.key == "model"]  # no shipped model shown
    assert at.subheader[0].value.startswith("nemotron-h (uploaded config.json): ")
    at.radio(key="source").set_value("Shipped model").run()  # back: the shipped choice kept
    assert at.selectbox(key="model").value == "deepseek-v3"
    assert at.subheader[0].value.startswith("DeepSeek-V3")


def _nvfp4() -> tuple[bytes, bytes]:
    from reference_data import HF_CONFIGS_2

    stem = HF_CONFIGS_2 / "nvidia--DeepSeek-V3.1-NVFP4"
    return (
        stem.with_name(stem.name + ".config.json").read_bytes(),
        stem.with_name(stem.name + ".hf_quant_config.json").read_bytes(),
    )


def test_an_upload_with_its_hf_quant_config_is_sized_as_stored():
    config, quant = _nvfp4()
    at = run({}, upload=("config.json", config), quant=("hf_quant_config.json", quant))
    assert not any("Showing" in e.value for e in at.error)
    shown = "\n".join(m.value for m in at.markdown) + "\n".join(c.value for c in at.caption)
    assert "nvfp4" in shown.lower()


def test_a_hostile_hf_quant_config_upload_is_one_error():
    config, _ = _nvfp4()
    at = run({}, upload=("config.json", config), quant=("hf_quant_config.json", b'{"a": [1'))
    assert any("hf_quant_config.json" in e.value for e in at.error)
    assert all("Traceback" not in e.value for e in at.error)
