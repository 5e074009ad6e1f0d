"""On an AMD GPU the default engine is SGLang, not TensorRT-LLM, which runs on NVIDIA GPUs only
(trial12: plan, search and the app on MI300X / MI355X defaulted to TensorRT-LLM); naming
TensorRT-LLM there is kept, and warned. On NVIDIA GPUs the default is unchanged."""

from __future__ import annotations

import pytest

from mlacalc.serving.plan import plan
from mlacalc.serving.search import search
from mlacalc.timemodel.predict import predict_time
from mlacalc.words.engines import default_engine

ASK = dict(isl=1000, osl=200, concurrency=8)
SAID = "the default on AMD (TensorRT-LLM runs on NVIDIA GPUs only)"


def test_plan_search_and_predict_time_default_to_sglang_on_amd():
    p = plan("llama-3-8b", "MI300X", 1, **ASK)
    assert p.engine == "sglang" and p.default_engine_note.startswith(SAID)
    assert not [w for w in p.warnings if "TensorRT-LLM runs on NVIDIA" in w]
    r = search("llama-3-8b", "MI355X", [1], isl=1000, osl=200, tpot=0.05, modes=("aggregated",))
    assert r.engine == "sglang" and r.default_engine_note.startswith(SAID)
    assert predict_time("llama-3-8b", "MI325X", "decode", 4096, 8).engine == "sglang"


def test_the_default_engine_note_does_not_say_its_own_kernels_timed_where_another_s_stand_in():
    """The twentieth round left it: on MI300X the note said SGLang's "kernels timed" and the
    provenance, a line on, "trtllm kernels stand in for sglang". On an NVIDIA device with the
    engine's own fit the words are as before."""
    for result in (
        plan("llama-3-8b", "MI300X", 1, **ASK),
        search("llama-3-8b", "MI300X", [1], isl=1000, osl=200, tpot=0.05, modes=("aggregated",)),
    ):
        note = result.default_engine_note
        assert "its kernels timed" not in note, note
        assert "trtllm's kernels standing in for its own" in note, note
        assert "scheduler defaults not applied: --engine sglang" in note, note
    assert (
        "its kernels timed but not" in plan("llama-3-8b", "H100-SXM", 1, **ASK).default_engine_note
    )


def test_trtllm_named_on_amd_is_kept_and_warned_and_nvidia_keeps_trtllm():
    p = plan("llama-3-8b", "MI300X", 1, engine="trtllm", **ASK)
    assert p.engine == "trtllm" and not p.default_engine_note
    assert [w for w in p.warnings if w.startswith("TensorRT-LLM runs on NVIDIA GPUs only")]
    h = plan("llama-3-8b", "H100-SXM", 1, **ASK)
    assert h.engine == "trtllm" and h.default_engine_note.startswith("the default engine")
    assert default_engine(None) == "trtllm"


def test_the_cli_says_why(run):
    out, _ = run("plan", "llama-3-8b", "-H", "MI300X", "--gpus", 1, "--isl", 1000, "--osl", 200)
    assert f"engine sglang, {SAID}" in " ".join(out.split())


def test_the_app_follows_the_device_unless_an_engine_is_asked():
    pytest.importorskip("streamlit")  # the app is an optional extra
    from _helpers import run_app  # deferred: the app's test helper loads streamlit

    at = run_app("Capacity planner", model="deepseek-v3", hw="MI355X")
    assert at.session_state["engine"] == "sglang"
    assert any(SAID in c.value for c in at.caption)
    assert run_app("Capacity planner", hw="MI355X", engine="trtllm").session_state["engine"] == (
        "trtllm"
    )  # asked: kept (the planner warns, as plan does)
    assert run_app("Capacity planner", hw="H200").session_state["engine"] == "trtllm"


def test_engine_memory_with_no_engine_named_is_read_by_the_default_engine_s_rule():
    """fixt12 left it: ``engine_memory`` with no engine was read by TensorRT-LLM's rule (a share
    of what the weights leave) on AMD, where the default engine is SGLang (a share of all)."""
    args = dict(tp=4, engine_memory=0.9, isl=2000, osl=500)
    default = plan("llama-3-70b", "MI300X", 4, **args)
    sglang = plan("llama-3-70b", "MI300X", 4, engine="sglang", **args)
    trtllm = plan("llama-3-70b", "MI300X", 4, engine="trtllm", **args)
    assert default.kv_budget_per_gpu_bytes == sglang.kv_budget_per_gpu_bytes
    assert default.kv_budget_per_gpu_bytes != trtllm.kv_budget_per_gpu_bytes
