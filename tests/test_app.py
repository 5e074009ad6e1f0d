"""The Streamlit app through AppTest: every view renders, and its numbers follow the widgets."""

from pathlib import Path

import pytest

pytest.importorskip("streamlit")
pytest.importorskip("plotly")
from streamlit.testing.v1 import AppTest  # noqa: E402

import mlacalc  # noqa: E402
from mlacalc.config import parse_upload  # noqa: E402

APP = str(Path(__file__).resolve().parent.parent / "app.py")


def run(**query) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    for key, value in query.items():
        at.query_params[key] = value
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def markdown(at) -> str:
    return "\n".join(m.value for m in at.markdown)


def metrics(at) -> dict:
    return {m.label: m.value for m in at.metric}


def test_default_scenario_every_view():
    at = run()
    text = markdown(at)
    assert f"**{mlacalc.kv_cache_bytes('deepseek-v3', 131072, 8):,} bytes**" in text
    assert f"**{mlacalc.param_counts('deepseek-v3').total:,}**" in text
    p = mlacalc.plan("deepseek-v3", "H200", 8, tp=8, kv_dtype="bf16", page_size=16, seq_len=131072, batch=8)
    assert f"Largest batch: **{p.max_batch:,}** sequences" in text
    assert f"**{p.weights_per_gpu_bytes:,} bytes**" in text
    m = metrics(at)
    assert m["absorbed / naive attention-core FLOPs"] == "3.40x"
    assert m["total (main model)"] == "671.03 G"
    assert "Ridge point of H200 (bf16): **206.2 FLOP/byte**" in text
    assert "median |error|" in text
    assert len(at.tabs) == 6 and len(at.latex) >= 3 and not at.error


def test_widgets_drive_the_numbers():
    at = run()
    at.number_input(key="seq_len").set_value(4096)
    at.number_input(key="batch").set_value(3)
    at.selectbox(key="kv_dtype").set_value("fp8_ds_mla")
    at.run()
    assert not at.exception
    expected = mlacalc.kv_cache_bytes("deepseek-v3", 4096, 3, kv_dtype="fp8_ds_mla")
    assert f"**{expected:,} bytes**" in markdown(at)
    assert at.query_params["seq_len"] == "4096" and at.query_params["kv"] == "fp8_ds_mla"


def test_other_model_and_equivalents():
    at = run()
    at.selectbox(key="model").set_value("llama-3-70b")
    at.run()
    assert not at.exception
    assert f"**{mlacalc.kv_cache_bytes('llama-3-70b', 131072, 8):,} bytes**" in markdown(at)
    assert "GQA" in at.subheader[0].value
    equivalents = at.dataframe[1].value
    assert len(equivalents) == 4


def test_scenario_from_the_url():
    at = run(model="mistral-7b", seq_len="10000", batch="2", kv="fp8", hw="RTX-4090")
    expected = mlacalc.kv_cache_bytes("mistral-7b", 10000, 2, kv_dtype="fp8")     # sliding window: 4096 kept
    assert f"**{expected:,} bytes**" in markdown(at)
    assert at.selectbox(key="hardware").value == "RTX-4090"


def test_bad_url_values_fall_back():
    at = run(model="no-such-model", seq_len="-5", batch="x", kv="fp6", hw="H300")
    assert f"**{mlacalc.kv_cache_bytes('deepseek-v3', 131072, 8):,} bytes**" in markdown(at)


def test_what_if_dimensions():
    at = run()
    at.checkbox(key="whatif").check().run()
    at.slider(key="w_dc").set_value(256).run()
    assert not at.exception
    model = mlacalc.load_model("deepseek-v3").with_changes(kv_lora_rank=256)
    assert f"**{mlacalc.kv_cache_bytes(model, 131072, 8):,} bytes**" in markdown(at)


def test_invalid_what_if_shows_an_error_and_keeps_working():
    at = run()
    at.selectbox(key="model").set_value("llama-3-8b").run()
    at.checkbox(key="whatif").check().run()
    at.number_input(key="w_kv").set_value(5).run()
    assert not at.exception
    assert any("num_key_value_heads" in e.value for e in at.error)
    assert f"**{mlacalc.kv_cache_bytes('llama-3-8b', 131072, 8):,} bytes**" in markdown(at)


def test_planner_widgets_and_errors():
    at = run()
    at.number_input(key="plan_gpus").set_value(16)
    at.number_input(key="plan_tp").set_value(8)
    at.number_input(key="plan_ep").set_value(16)
    at.run()
    assert not at.exception
    p = mlacalc.plan("deepseek-v3", "H200", 16, tp=8, ep=16, kv_dtype="bf16", page_size=16, seq_len=131072, batch=8)
    assert f"Largest batch: **{p.max_batch:,}** sequences" in markdown(at)
    at.number_input(key="plan_ep").set_value(3).run()
    assert any("expert parallel degree 3" in e.value for e in at.error)
    assert metrics(at)["per token, all layers"] == "68.62 KiB"          # the other views still render


def test_flops_view_phase_switch():
    at = run()
    at.radio(key="flops_phase").set_value("prefill").run()
    assert not at.exception
    table = at.dataframe[3].value
    default = table[table["impl"].str.contains("default")].iloc[0]
    assert int(default["total FLOPs"]) == mlacalc.attention_flops("deepseek-v3", "prefill", 131072, 8)


def test_upload_parsing_is_safe(tmp_path):
    """The app hands uploads to parse_upload: in memory, safe loader, size limit."""
    text = (Path(mlacalc.__file__).parent / "model_configs" / "gpt2.yaml").read_bytes()
    assert parse_upload(text, "gpt2.yaml").name == "gpt2"
    with pytest.raises(mlacalc.ConfigError, match="at most"):
        parse_upload(b"#" * (1 << 20 + 1), "big.yaml", 1 << 20)
    marker = tmp_path / "pwned"
    with pytest.raises(mlacalc.ConfigError, match="tag"):
        parse_upload(f"!!python/object/apply:os.system ['touch {marker}']".encode(), "evil.yaml")
    assert not marker.exists()
    with pytest.raises(mlacalc.ConfigError, match="not valid JSON"):
        parse_upload(b'{"model_type": ', "config.json")
    with pytest.raises(mlacalc.ConfigError, match="UTF-8"):
        parse_upload(b"\xff\xfe\x00", "x.yaml")
