"""report's JSON carries what loading the model warns (a trial's ``--set kv_lora_rank=8192``
on DeepSeek-V3 said "above hidden_size" on stderr, the JSON had no warnings key)."""

from __future__ import annotations

import json

import mlacalc
from mlacalc.report import model_report


def test_report_json_carries_the_width_warning(run):
    out, err = run("report", "deepseek-v3", "--set", "kv_lora_rank=8192", "--format", "json")
    doc = json.loads(out)
    assert any("above hidden_size" in w for w in doc["warnings"])
    assert "above hidden_size" in err  # still said on stderr too
    assert json.loads(run("report", "deepseek-v3", "--format", "json")[0])["warnings"] == []


def test_the_api_report_carries_it():
    m = mlacalc.load_model("deepseek-v3").with_changes(kv_lora_rank=8192)
    assert any("above hidden_size" in w for w in model_report(m)["warnings"])
