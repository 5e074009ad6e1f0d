"""search says what plan of its best point says of the device and the engine where neither was
fitted (trial12: on MI300X plan warned "not a fitted device" and "TensorRT-LLM runs on NVIDIA
GPUs only" and gave an "Expected error" line and a ``prediction`` object; search, in text, JSON
and ``SearchResult.warnings``, gave none of them). Each test failed before."""

from __future__ import annotations

import json

from _helpers import plan_point

from mlacalc.serving.search import search

KW = dict(isl=1000, osl=200, tpot=0.05, modes=("aggregated",), chunked_prefills=None)
DEVICE = ("is not a fitted device", "TensorRT-LLM runs on NVIDIA GPUs only")


def _device_lines(warnings) -> list[str]:
    return [w for w in warnings if any(s in w for s in DEVICE)]


def test_search_on_amd_carries_plans_device_and_engine_warnings():
    for engine in ("trtllm", "sglang"):
        r = search("llama-3-8b", "MI300X", [1, 2], engine=engine, **KW)
        planned = plan_point("llama-3-8b", "MI300X", r.best, 1000, 200, engine=engine)
        said = _device_lines(planned.warnings)
        assert said and said == _device_lines(r.warnings)  # the same lines, in plan's order
        assert ("TensorRT-LLM runs on NVIDIA" in " ".join(said)) == (engine == "trtllm")
        assert r.prediction == planned.prediction  # the route and the error to expect
        doc = r.to_dict()
        assert doc["prediction"]["device_route"] == "pooled"
        assert doc["prediction"]["note"].startswith("Expected error:")
        json.dumps(doc)


def test_a_fitted_device_under_its_own_engine_says_nothing_new():
    r = search("llama-3-8b", "H100-SXM", [1, 2], **KW)
    assert not _device_lines(r.warnings)
    assert r.prediction["device_route"] == "fitted"


def test_search_text_gives_the_expected_error_line(run):
    out, err = run(
        "search", "llama-3-8b", "-H", "MI300X", "--gpus", "1,2", "--isl", "1000", "--osl", "200",
        "--tpot", "50ms", "--engine", "trtllm",
    )  # fmt: skip
    assert "Expected error:" in out
    assert "TensorRT-LLM runs on NVIDIA GPUs only" in out + err
    assert "MI300X is not a fitted device" in out + err


def test_a_search_that_times_nothing_says_no_times_as_plan_does():
    """review12 11: V3 on one MI300X fits nowhere, yet search gave a full ``prediction`` route
    and "trtllm kernels stand in for sglang" where plan of it says "No times"; the device's
    vendor line (of the device, not of a time) stays."""
    for engine, vendor in (("sglang", False), ("trtllm", True)):
        r = search("deepseek-v3", "MI300X", [1], isl=1024, osl=1024, engine=engine)
        assert not r.points and r.best is None
        assert r.prediction == {} and r.calibration == ""
        assert not any("stand in" in w and "profile" in w for w in r.warnings)
        assert bool(_device_lines(r.warnings)) == vendor
        json.dumps(r.to_dict())


def test_csv_output_keeps_the_warnings_on_stderr(run):
    """A capacity analyst's CSV for a spreadsheet carried none of the caveats the other
    formats print (the CSV returned before the warnings were said)."""
    args = ("search", "llama-3-8b", "-H", "MI300X", "--gpus", "1", "--isl", "1000", "--osl",
            "200", "--tpot", "50ms")  # fmt: skip
    out, err = run(*args, "--format", "csv")
    assert out.startswith(("gpus", "mode", "decode_gpus")) or "," in out.splitlines()[0]
    said = [line for line in err.splitlines() if "is not a fitted device" in line]
    _, err_json = run(*args, "--format", "json")
    assert said and said == [x for x in err_json.splitlines() if "is not a fitted device" in x]
