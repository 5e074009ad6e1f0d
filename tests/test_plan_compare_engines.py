"""plan --compare-engines: the same deployment under TensorRT-LLM, SGLang and vLLM side by side
(a trial moving a fleet from SGLang to vLLM looped over three plans by hand, and read two
engines' figures agreeing within 0.1% without seeing that one engine's fits timed most of
both). Each engine's row is what plan --engine E gives; the stand-ins' share is said."""

from __future__ import annotations

import json

import pytest

ARGS = ("plan", "deepseek-v3", "-H", "H200", "--gpus", "16", "--tp", "1", "--dp-attention",
        "--ep", "16", "--isl", "2000", "--osl", "500", "--concurrency", "1024")  # fmt: skip


def test_each_row_is_what_plan_of_that_engine_gives(run):
    doc = json.loads(run(*ARGS, "--compare-engines", "--format", "json")[0])
    assert doc["schema"] == "mlacalc.plan-engines/1"
    assert [r["engine"] for r in doc["engines"]] == ["trtllm", "sglang", "vllm"]
    for row in doc["engines"]:
        one = json.loads(run(*ARGS, "--engine", row["engine"], "--format", "json")[0])
        assert row["refused"] is None and row["fits"] is True
        assert row["ttft_s"] == pytest.approx(one["ttft_s"], rel=1e-12)
        assert row["tpot_s"] == pytest.approx(one["tpot_s"], rel=1e-12)
        assert row["decode_step_s"] == pytest.approx(one["decode_step_s"], rel=1e-12)
        per_gpu = one["output_tokens_per_s"] / (one["gpus"] + (one["prefill_gpus"] or 0))
        assert row["output_tokens_per_s_per_gpu"] == pytest.approx(per_gpu, rel=1e-12)
        route = one["prediction"]
        assert (row["engine_route"], row["stand_in_share"]) == (
            route["engine_route"],
            route["stand_in_share"],
        )
        assert doc["plans"][row["engine"]]["tpot_s"] == one["tpot_s"]


def test_the_stand_ins_share_is_in_the_table_and_their_lines_name_the_engine(run):
    out, err = run(*ARGS, "--compare-engines", "--format", "markdown")
    doc = json.loads(run(*ARGS, "--compare-engines", "--format", "json")[0])
    vllm = next(r for r in doc["engines"] if r["engine"] == "vllm")
    assert vllm["engine_route"] == "partly_stand_in" and vllm["stand_in_share"] > 0.05
    row = next(line for line in out.splitlines() if line.startswith("| vLLM |"))
    assert f"| {vllm['stand_in_share']:.0%} of the decode step |" in row
    assert "| TensorRT-LLM |" in out and "| none |" in out
    # a stand-in line is one engine's: said with its name; the device's, once for all
    assert "mlacalc: warning: vLLM: routed_experts (" in err
    assert err.count("H200 is not a fitted device") == 1


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (("--engine", "vllm"), "--compare-engines plans every engine; --engine vllm names one"),
        (("--launch", "sglang"), "--compare-engines gives no launch commands; for --launch"),
        (("--engine", "VLLM"), "--engine vllm names one"),
    ],
)
def test_one_engine_named_beside_it_is_refused_in_one_line(run, extra, needle):
    _, err = run(*ARGS, "--compare-engines", *extra, code=2)
    assert needle in err and len(err.strip().splitlines()) == 1, err


def test_an_engine_that_refuses_the_deployment_gets_its_reason(run):
    args = ("plan", "deepseek-v3", "-H", "H200", "--gpus", "8", "--isl", "2000", "--osl", "500",
            "--concurrency", "64", "--moe-backend", "cutlass", "--compare-engines")  # fmt: skip
    doc = json.loads(run(*args, "--format", "json")[0])
    rows = {r["engine"]: r for r in doc["engines"]}
    assert rows["trtllm"]["refused"] is None
    for engine in ("sglang", "vllm"):
        assert rows[engine]["refused"].startswith("moe_backend: is TensorRT-LLM's MoE backend")
        assert engine not in doc["plans"]
