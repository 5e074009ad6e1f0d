"""Every JSON output names the tool's version and, where a profile timed it, the profile's
content digest (a trial found none did: ``mlacalc.__version__`` alone, never in an output)."""

from __future__ import annotations

import json
import shutil

import pytest

import mlacalc
from mlacalc.data import MEASURED
from mlacalc.timemodel.profile import load_profile

SGLANG_H100 = load_profile("fit-h100-sxm-sglang").digest


def test_report_and_roofline_json_name_the_version(run):
    doc = json.loads(run("report", "llama-3.1-8b", "--format", "json")[0])
    assert list(doc)[:2] == ["schema", "mlacalc_version"]
    assert doc["mlacalc_version"] == mlacalc.__version__
    roof = json.loads(
        run("roofline", "llama-3.1-8b", "-H", "H100-SXM", "--engine", "sglang", "--format", "json")[
            0
        ]
    )
    assert roof["mlacalc_version"] == mlacalc.__version__
    assert roof["predictions"][0]["profile_digest"] == SGLANG_H100


def test_plan_and_search_name_the_profile_digest():
    kw = dict(isl=1000, osl=100, engine="sglang")
    p = mlacalc.plan("llama-3.1-8b", "H100-SXM", 1, concurrency=8, **kw).to_dict()
    assert p["mlacalc_version"] == mlacalc.__version__
    assert p["profile_digest"] == SGLANG_H100 == p["prediction"]["profile"]["digest"]
    s = mlacalc.search("llama-3.1-8b", "H100-SXM", [1], **kw).to_dict()
    assert s["mlacalc_version"] == mlacalc.__version__
    assert s["profile_digest"] == SGLANG_H100
    t = mlacalc.predict_time("llama-3.1-8b", "H100-SXM", "decode", 1024, engine="sglang")
    assert t.to_dict()["profile_digest"] == SGLANG_H100


def test_validate_and_calibrate_name_theirs(tmp_path, run):
    pa = pytest.importorskip("pyarrow")  # reading parquet tables needs the measured extra
    import pyarrow.parquet as pq

    # every 400th row of A100's GEMM table (69 rows): cheap to fit and to score
    source = MEASURED / "a100_sxm/gemm/trtllm/1.0.0"
    folder = tmp_path / "a100_sxm/gemm/trtllm/1.0.0"
    folder.mkdir(parents=True)
    shutil.copy(source / "collection_meta.yaml", folder)
    table = pq.read_table(source / "gemm_perf.parquet")
    pq.write_table(table.take(list(range(0, table.num_rows, 400))), folder / "gemm_perf.parquet")
    v = mlacalc.validate(measured=tmp_path / "a100_sxm", profile="fit-b200-sxm").to_dict()
    assert list(v)[:2] == ["schema", "mlacalc_version"] and v["schema"] == "mlacalc.validate/1"
    assert v["mlacalc_version"] == mlacalc.__version__
    assert v["profile_digests"] == {"A100-SXM-80GB": load_profile("fit-b200-sxm").digest}
    assert pa is not None
    out = tmp_path / "p.json"
    doc = json.loads(run("calibrate", tmp_path / "a100_sxm", "-o", out, "--format", "json")[0])
    assert doc["mlacalc_version"] == mlacalc.__version__
    assert doc["digest"] == load_profile(str(out)).digest
