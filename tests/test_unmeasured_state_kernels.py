"""A decode step's kernels no shared table measures as what they are (Mamba-2's state update
and Kimi Delta Attention's recurrent core timed as batched GEMMs, Mamba-1's state update as an
element-wise kernel: provenance.UNMEASURED_KERNELS) are said with their share of the step, as
the EP stand-ins are, and the expected-error line does not claim the kernel tables' error for
that share (a trial found Nemotron-3-Super's state update half a B200 decode step, said
nowhere, labelled with the weights' fp8)."""

import json
import re

import pytest

import mlacalc
from mlacalc.serving.provenance import STAND_IN_WARN_SHARE

ARGS = dict(tp=1, dp_attention=True, ep=8, weight_dtype="fp8", kv_dtype="fp8", isl=8192, osl=1024)


def _said(p, name: str) -> list[str]:
    return [w for w in p.warnings if w.startswith(f"{name}, ") and "no shared table" in w]


def test_mamba2_state_update_is_said_with_its_share_and_its_state_dtype():
    p = mlacalc.plan("nemotron-3-super-120b-a12b", "B200", 8, engine="sglang", concurrency=500,
                     **ARGS)  # fmt: skip
    (k,) = [k for k in p.kernels if k["name"] == "mamba_state_update"]
    # the float32 state streamed, not the weights' fp8 class
    assert (k["kind"], k["dtype"]) == ("gemm", "float32")
    (w,) = _said(p, "mamba_state_update")
    total = sum(x["seconds"] for x in p.kernels)
    share = int(re.search(r"\((\d+)% of the decode step", w)[1])
    assert share == round(100 * k["seconds"] / total) and share / 100 >= STAND_IN_WARN_SHARE
    assert "timed as a batched GEMM" in w and "gemm:bf16:bmm fit" in w
    route = p.prediction
    (u,) = [u for u in route["unmeasured_kernels"] if u["kernel"] == "mamba_state_update"]
    assert u["class"] == "gemm:bf16:bmm" and round(100 * u["share"]) == share
    assert "no shared table measures (mamba_state_update" in route["note"]
    assert "no shared table measures" in route["expected_error_source"]
    # the app's planner says it in its expected-error line too
    pytest.importorskip("streamlit")  # the app's extras (a core-only run names the module)
    pytest.importorskip("plotly")
    from appviews import planner

    line = planner.prediction_line(route)
    assert f"not the {route['unmeasured_share']:.0%} of the decode step no shared table" in line


def test_kda_core_is_said_and_gdn_core_is_not():
    p = mlacalc.plan("kimi-linear-48b-a3b", "B200", 8, engine="sglang", concurrency=500, **ARGS)
    (w,) = _said(p, "linear_core")
    assert "Kimi Delta Attention's recurrent core" in w
    assert [k["dtype"] for k in p.kernels if k["name"] == "linear_core"] == ["float32"]
    # Qwen3-Next's Gated DeltaNet core is timed by its measured gdn_recurrent class
    q = mlacalc.plan("qwen3-next-80b-a3b", "B200", 8, engine="sglang", concurrency=500, **ARGS)
    assert not [w for w in q.warnings if "no shared table" in w]
    assert (
        q.prediction["unmeasured_kernels"] == [] and "no shared table" not in q.prediction["note"]
    )


def test_json_and_compare_engines_carry_it(run):
    cli = [
        "plan",
        "kimi-linear-48b-a3b",
        "-H",
        "B200",
        "--gpus",
        "8",
        "--tp",
        "1",
        "--dp-attention",
        "--ep",
        "8",
    ]
    cli += ["--weight-dtype", "fp8", "--isl", "8k", "--osl", "1k", "--concurrency", "500"]
    out, _ = run(*cli, "--engine", "sglang", "--format", "json")
    d = json.loads(out)
    assert any(w.startswith("linear_core, ") for w in d["warnings"])
    assert d["prediction"]["unmeasured_share"] >= STAND_IN_WARN_SHARE
    out, _ = run(*cli, "--compare-engines", "--format", "markdown")
    assert "measured by no table" in out and re.search(r"\| \d+% of the decode step \|", out)
