"""``Prediction`` carries what ``roofline --format json`` says of it (a trial found the API
without the expected error, and neither naming the KV dtype that moved the time 0.0829 ->
0.0683 s): ``expected_error`` (one code path: provenance.kernel_expected_error), ``kv_dtype``;
and roofline's JSON has its schema id."""

from __future__ import annotations

import json

import mlacalc


def test_prediction_gives_the_expected_error_and_kv_dtype():
    kw = dict(batch=32, scope="model", engine="sglang")
    bf16 = mlacalc.predict_time("llama-3.1-70b", "H100-SXM", "decode", 8192, **kw)
    fp8 = mlacalc.predict_time("llama-3.1-70b", "H100-SXM", "decode", 8192, kv_dtype="fp8", **kw)
    assert (bf16.kv_dtype, fp8.kv_dtype) == ("bf16", "fp8")
    assert fp8.seconds < bf16.seconds
    e = bf16.expected_error
    assert e["of"] == "fitted" and e["median"] == 0.051 and e["note"].startswith("Expected error")
    assert bf16.to_dict()["expected_error"] == e and fp8.to_dict()["kv_dtype"] == "fp8"
    plain = mlacalc.predict_time("llama-3.1-70b", "H100-SXM", "decode", 8192, profile="roofline")
    assert plain.expected_error["source"] == "not measured"
    unfused = mlacalc.predict_time("llama-3.1-70b", "H100-SXM", "decode", 8192, mode="unfused")
    assert unfused.expected_error is None


def test_roofline_json_has_its_schema_and_the_apis_error(run):
    args = ["llama-3.1-8b", "-H", "H100-SXM", "--kv-dtype", "fp8", "--format", "json"]
    doc = json.loads(run("roofline", *args)[0])
    assert doc["schema"] == "mlacalc.roofline/1" and next(iter(doc)) == "schema"
    p = doc["predictions"][0]
    assert p["kv_dtype"] == "fp8"
    api = mlacalc.predict_time("llama-3.1-8b", "H100-SXM", "decode", 4096, kv_dtype="fp8")
    assert doc["expected_error"] == p["expected_error"] == api.expected_error
