"""What a library integrator's trial found (mlacalc embedded in a planning service): the
library's answers are the CLI's, JSON-ready, and its refusals name the argument. Each test
failed before its fix."""

from __future__ import annotations

import json

import mlacalc


# ---- 1. search(...).to_dict() is `mlacalc search --format json`
def test_search_to_dict_is_the_cli_json_on_a_checkpoint_model(run):
    """Was: gpt-oss-120b's points sized as its checkpoint stores them ("checkpoint mxfp4
    experts") said weight_dtype bf16 in Python and fp4 on the CLI (plan says fp4), and the
    Python dict had no plan_command."""
    r = mlacalc.search("gpt-oss-120b", "H100-SXM", (1, 2), isl=2000, osl=500)
    lib = r.to_dict()
    out, _ = run(
        "search", "gpt-oss-120b", "-H", "H100-SXM", "--gpus", "1,2", "--isl", 2000,
        "--osl", 500, "--format", "json",
    )  # fmt: skip
    cli = json.loads(out)
    lib.pop("seconds"), cli.pop("seconds")
    assert lib == cli
    stored = [p for p in lib["frontier"] if p["weight_format"].startswith("checkpoint ")]
    assert stored and {p["weight_dtype"] for p in stored} == {"fp4"}
    assert lib["plan_command"].startswith("mlacalc plan gpt-oss-120b -H H100-SXM ")
    assert r.plan_command == lib["plan_command"]
