"""The app's planner view: serving figures, what does not fit, the step breakdown, the search."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest

import mlacalc

APP = str(Path(__file__).resolve().parent.parent / "app.py")


def _run(**query) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    for key, value in query.items():
        at.query_params[key] = value
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_batch_that_does_not_fit_says_so_and_serving_figures_show():
    at = _run()
    # 8 x 128K sequences of DeepSeek-V3 on 8 x H200 at TP8: only 4 fit
    assert any("A batch of 8 at 131,072 tokens does not fit: 4 do" in i.value for i in at.info)
    at.number_input(key="plan_isl").set_value(2000).run()
    assert not at.exception
    p = mlacalc.plan(
        "deepseek-v3",
        "H200",
        8,
        tp=8,
        kv_dtype="bf16",
        page_size=16,
        batch=8,
        isl=2000,
        osl=500,
    )
    labels = {m.label: m.value for m in at.metric}
    assert (
        labels["TPOT"] == f"{p.tpot_s * 1e3:,.2f} ms"
        and labels["TTFT"] == f"{p.ttft_s * 1e3:,.1f} ms"
    )
    at.checkbox(key="plan_search").check().run()
    assert not at.exception
    assert any("Best meeting the targets" in m.value for m in at.markdown)


def test_weights_that_do_not_fit_are_an_answer():
    at = _run()
    at.number_input(key="plan_gpus").set_value(1)
    at.number_input(key="plan_tp").set_value(1)
    at.run()
    assert not at.exception
    assert any(i.value.startswith("Does not fit: weights") for i in at.info) and not at.error


def test_plan_view_takes_the_engine():
    """The prompts' pass and the output lag reach plan(): the metrics are plan()'s."""
    at = _run()
    at.number_input(key="plan_isl").set_value(2000)
    at.selectbox(key="plan_prefill_pass").set_value("separate")
    at.number_input(key="plan_output_lag").set_value(1)
    at.run()
    assert not at.exception
    p = mlacalc.plan(
        "deepseek-v3",
        "H200",
        8,
        tp=8,
        kv_dtype="bf16",
        page_size=16,
        batch=8,
        isl=2000,
        osl=500,
        prefill_pass="separate",
        output_lag_steps=1,
    )
    fused = mlacalc.plan("deepseek-v3", "H200", 8, tp=8, page_size=16, batch=8, isl=2000, osl=500)
    labels = {m.label: m.value for m in at.metric}
    assert p.ttft_s > fused.ttft_s
    assert labels["TTFT"] == f"{p.ttft_s * 1e3:,.1f} ms"
    assert labels["TPOT"] == f"{p.tpot_s * 1e3:,.2f} ms"
    # the search beside it runs the same engine: its frontier is search()'s with that engine
    at.checkbox(key="plan_search").check().run()
    assert not at.exception
    from mlacalc.serving.search import search

    def frontier(**engine):
        r = search(
            "deepseek-v3", "H200", [4, 8, 16], isl=2000, osl=500, ttft=2.0, tpot=0.05, **engine
        )
        return [p["output_tokens_per_s_per_user"] for p in r.frontier]

    drawn = [
        trace["x"]
        for el in at.get("plotly_chart")
        for trace in json.loads(el.proto.spec)["data"]
        if trace.get("name") == "Pareto frontier"
    ]
    separate = frontier(prefill_pass="separate", output_lag_steps=1)
    assert separate != frontier() and len(drawn) == 1
    assert drawn[0] == pytest.approx(separate, rel=1e-9)


def test_longest_context_stops_at_the_window_and_kv_line_splits_fixed_part():
    """gpt-oss-120b on 8 H100 at batch 8: the longest context is its 131,072-token window,
    with memory's own figure beside it; the KV line names the layers keeping every token."""
    at = _run(model="gpt-oss-120b", hw="H100-SXM")
    p = mlacalc.plan("gpt-oss-120b", "H100-SXM", 8, tp=8, page_size=16, batch=8)
    labels = {m.label: m.value for m in at.metric}
    assert labels["longest context at batch 8"] == "131,072"
    # the library's words, as the command line prints them
    assert any(p.longest_context_text() in c.value for c in at.caption)
    assert f"memory allows {p.max_context_memory:,}" in p.longest_context_text()
    line = next(m.value for m in at.markdown if "KV per token per GPU" in m.value)
    assert "layers keeping every token: **4,608 bytes**" in line
