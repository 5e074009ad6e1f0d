"""search says what plan of its point says of the point's formats (a KV cache the engine does
not offer, weights the device has no tensor cores for), and prefers points whose cache the
engine offers (a capacity planner's trial: an nvfp4 cache was the best under TensorRT-LLM on
H200, its JSON ``warnings`` empty, where plan of it said TensorRT-LLM offers none for MLA).
Each test failed before."""

from __future__ import annotations

import json

import pytest
from _helpers import plan_point

from mlacalc.serving.search import search

KW = dict(isl=1000, osl=1000, ttft=2.0, tpot=0.05, modes=("aggregated",), chunked_prefills=None)


def test_the_best_carries_plans_kv_warning():
    r = search("deepseek-v3", "H200", [8], kv_dtypes=("nvfp4",), **KW)
    assert r.best["kv_dtype"] == "nvfp4"  # the only cache asked: still the answer, said
    planned = plan_point("deepseek-v3", "H200", r.best, 1000, 1000)
    cannot = [w for w in planned.warnings if "offers no nvfp4 KV cache for MLA" in w]
    assert cannot and cannot[0] in r.warnings


def test_a_cache_the_engine_offers_is_preferred_and_the_other_marked():
    r = search("deepseek-v3", "B200", [8], kv_dtypes=("nvfp4", "fp8"), engine="sglang", **KW)
    assert r.best["kv_dtype"] == "fp8"
    assert not any(w.startswith("--kv-dtype") for w in r.warnings)  # the best's: none
    fastest = max((p for p in r.points if p["meets_targets"]),
                  key=lambda p: p["output_tokens_per_s_per_gpu"])  # fmt: skip
    if fastest["kv_dtype"] == "nvfp4":  # passed over: not the best though faster
        assert fastest["output_tokens_per_s_per_gpu"] > r.best["output_tokens_per_s_per_gpu"]
    if any(p["kv_dtype"] == "nvfp4" for p in r.frontier):
        assert any(
            w.startswith("frontier points with nvfp4 KV: ") and "SGLang offers no nvfp4" in w
            for w in r.warnings
        )


def test_weights_the_device_cannot_multiply_are_said_in_text_and_json(run):
    args = ("search", "deepseek-v3", "-H", "H200", "--gpus", 8, "--isl", 1000, "--osl", 1000,
            "--modes", "aggregated", "--chunked-prefills", "none",
            "--weight-dtypes", "fp4")  # fmt: skip
    doc = json.loads(run(*args, "--format", "json")[0])
    said = [w for w in doc["warnings"] if "H200 has no fp4 tensor cores" in w]
    assert len(said) == 1, doc["warnings"]
    # and plan's words of the dtype itself (fp4 sized with no block scales), as plan says them
    assert any(w.startswith("weights in fp4 are sized as") for w in doc["warnings"])
    _, err = run(*args)
    assert "H200 has no fp4 tensor cores" in err


@pytest.mark.parametrize("engine", ["trtllm", "vllm"])
def test_nothing_is_said_of_formats_the_engine_runs(engine):
    r = search("llama-3-8b", "H100-SXM", [1], engine=engine, **KW)
    assert not any("offers no" in w or "tensor cores" in w for w in r.warnings)
