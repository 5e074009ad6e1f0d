"""The app's recurrent state dtype: a sidebar choice for a model with linear or Mamba layers.

`--state-dtype` (report, roofline, plan, search) had no counterpart in the app: a hybrid
model's state was sized in float32 with no way to see an engine's bf16. The sidebar offers it
for a model that keeps a recurrent state only, the URL carries it (`state=bf16`), and the KV
view's total is `mlacalc.kv_cache` with the same layout.
"""

import pytest

pytest.importorskip("streamlit")
pytest.importorskip("plotly")
from _helpers import run_app as run

import mlacalc
from mlacalc.words.dtypes import with_state_dtype


def _markdown(at) -> str:
    return "\n".join(m.value for m in at.markdown)


def test_state_bf16_from_the_url_sizes_the_kv_view():
    at = run(model="qwen3-next-80b-a3b", seq_len="8192", batch="4", state="bf16")
    assert at.selectbox(key="state_dtype").value == "bf16"
    layout = with_state_dtype("bf16", "bf16")
    half = mlacalc.kv_cache("qwen3-next-80b-a3b", 8192, 4, layout).total_bytes
    full = mlacalc.kv_cache_bytes("qwen3-next-80b-a3b", 8192, 4)
    assert half < full
    assert f"({half:,} bytes)" in _markdown(at)
    assert "recurrent state in bf16" in "\n".join(c.value for c in at.caption) + _markdown(at)


def test_the_widget_writes_the_url_and_fp32_leaves_it_out():
    at = run(model="qwen3-next-80b-a3b")
    assert at.selectbox(key="state_dtype").value == "fp32" and "state" not in at.query_params
    at.selectbox(key="state_dtype").set_value("bf16").run()
    assert not at.exception and at.query_params["state"] == "bf16"


def test_a_model_without_a_state_has_no_choice():
    at = run(model="deepseek-v3", state="bf16")
    assert not any(s.key == "state_dtype" for s in at.selectbox)
    assert f"({mlacalc.kv_cache_bytes('deepseek-v3', 131072, 8):,} bytes)" in _markdown(at)


def test_a_bad_state_in_the_url_is_named():
    at = run(model="qwen3-next-80b-a3b", state="fp8")
    shown = "\n".join(w.value for w in at.warning)
    assert "'state=fp8' is not a known recurrent state dtype" in shown
    assert at.selectbox(key="state_dtype").value == "fp32"


def test_the_planner_plans_with_the_state_chosen():
    def largest(**q):
        at = run("Capacity planner", model="qwen3-next-80b-a3b", hw="H200", seq_len="8192", **q)
        got = {m.label: m.value for m in at.metric}
        return next(
            int(v.replace(",", "")) for k, v in got.items() if k.startswith("largest batch")
        )

    assert largest(state="bf16") > largest()
