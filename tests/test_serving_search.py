"""search(): the frontier, the best deployment under targets, agreement with plan(), speed, CLI."""

from __future__ import annotations

import csv
import io
import json

import pytest
from click.testing import CliRunner

from mlacalc.cli import cli
from mlacalc.serving.plan import plan
from mlacalc.serving.search import search
from mlacalc.words.errors import InvalidArgumentError


@pytest.fixture(scope="module")
def dsv3():
    return search("deepseek-v3", "H200", [8, 16, 32, 64], isl=2000, osl=500, ttft=2.0, tpot=0.05)


def test_deepseek_v3_up_to_64_gpus_covers_every_layout(dsv3):
    """Over a hundred layouts and thousands of points (benchmarks/bench_serving.py times it)."""
    assert dsv3.layouts > 100 and len(dsv3.points) > 2000


def test_frontier_is_pareto_and_best_meets_targets(dsv3):
    result = dsv3
    front = result.frontier
    for f in front:
        assert not any(
            p["output_tokens_per_s_per_gpu"] > f["output_tokens_per_s_per_gpu"]
            and p["output_tokens_per_s_per_user"] > f["output_tokens_per_s_per_user"]
            for p in result.points
        )
    best = result.best
    assert best["ttft_s"] <= 2.0 and best["tpot_s"] <= 0.05 and best["gpus"] <= 64
    meeting = [p for p in result.points if p["meets_targets"]]
    assert best["output_tokens_per_s_per_gpu"] == max(
        p["output_tokens_per_s_per_gpu"] for p in meeting
    )
    assert sum(result.reasons.values()) >= len(result.points)
    assert all(p["reason"] for p in result.points)
    assert result.reasons["misses TPOT"] > 0 and result.reasons["does not fit: kv cache"] > 0


def test_search_points_agree_with_plan():
    result = search(
        "llama-3-70b",
        "H100-SXM",
        [4, 8],
        isl=1000,
        osl=500,
        modes=("aggregated",),
        weight_dtypes=("fp8",),
        kv_dtypes=("fp8",),
    )
    for point in [p for p in result.points if p["pp"] == 1][::7][:6]:
        p = plan(
            "llama-3-70b",
            "H100-SXM",
            point["gpus"],
            tp=point["tp"],
            ep=point["ep"],
            dp_attention=point["dp_attention"],
            overlap=point["overlap"],
            weight_dtype="fp8",
            kv_dtype="fp8",
            page_size=16,
            isl=1000,
            osl=500,
            concurrency=point["concurrency"],
            chunked_prefill=point["chunked_prefill"],  # None: whole prompts
        )
        assert p.tpot_s == pytest.approx(point["tpot_s"], rel=1e-9)
        assert p.ttft_s == pytest.approx(point["ttft_s"], rel=1e-9)
        assert p.output_tokens_per_s == pytest.approx(point["output_tokens_per_s"], rel=1e-9)


def test_search_arguments():
    for kwargs, argument in (
        ({"isl": 0, "osl": 10}, "isl"),
        ({"isl": 10, "osl": 10, "tpot": -1}, "tpot"),
        ({"isl": 10, "osl": 10, "modes": ("mixed",)}, "modes"),
    ):
        with pytest.raises(InvalidArgumentError) as info:
            search("llama-3-8b", "H100-SXM", [1], **kwargs)
        assert info.value.argument == argument
    with pytest.raises(InvalidArgumentError, match="gpus"):
        search("llama-3-8b", "H100-SXM", [], isl=10, osl=10)
    none = search("llama-3-70b", "RTX-4080", [1], isl=100, osl=100)
    assert none.best is None and none.reasons["does not fit: weights"] > 0


def test_search_cli():
    runner = CliRunner()
    args = [
        "search",
        "llama-3-8b",
        "--hardware",
        "H100",
        "--gpus",
        "1,2",
        "--isl",
        "1000",
        "--osl",
        "200",
        "--ttft",
        "500ms",
        "--tpot",
        "20ms",
    ]
    out = runner.invoke(cli, args)
    assert out.exit_code == 0, out.output
    assert (
        "Best deployment of llama-3-8b on H100-SXM" in out.output
        and "Pareto frontier" in out.output
    )
    doc = json.loads(runner.invoke(cli, [*args, "--format", "json"]).stdout)  # warnings: stderr
    assert doc["best"]["tpot_s"] <= 0.02 and doc["frontier"]
    rows = list(
        csv.DictReader(io.StringIO(runner.invoke(cli, [*args, "--format", "csv", "--all"]).stdout))
    )
    assert len(rows) > len(doc["frontier"]) and {"layout", "ttft_s", "reason"} <= set(rows[0])
    bad = runner.invoke(cli, [*args[:-2], "--tpot", "fast"])
    assert bad.exit_code == 2 and "not a time" in bad.output
    bare = runner.invoke(cli, [*args[:-2], "--tpot", "50"])
    assert bare.exit_code == 2 and "'50' has no unit; write 50ms or 50s" in bare.output
    frac = runner.invoke(cli, [*args[:-2], "--tpot", "0.04"])  # a fraction: seconds first
    assert frac.exit_code == 2 and "'0.04' has no unit; write 0.04s or 0.04ms" in frac.output


def test_layouts_that_need_a_missing_network_are_skipped_with_a_reason():
    result = search("llama-3-70b", "L40S", [8, 16], isl=1000, osl=200, modes=("aggregated",))
    assert result.reasons["L40S has no network figures (scale_out_gb_per_s)"] > 0
    assert any(p["gpus"] == 16 and p["dp"] == 2 for p in result.points)  # TP8 DP2 needs no network


def test_expert_parallel_points_agree_with_plan():
    result = search(
        "deepseek-v3", "H200", [16], isl=1000, osl=500, modes=("aggregated",), kv_dtypes=("fp8",)
    )
    ep_points = [p for p in result.points if p["ep"] > 1 and p["pp"] == 1]
    assert any(p["dp_attention"] for p in ep_points) and any(
        p["overlap"] == "tbo" for p in ep_points
    )
    for point in ep_points[::11][:6]:
        p = plan(
            "deepseek-v3",
            "H200",
            16,
            tp=point["tp"],
            ep=point["ep"],
            dp_attention=point["dp_attention"],
            redundant_experts=point["redundant_experts"],
            overlap=point["overlap"],
            kv_dtype="fp8",
            page_size=16,
            isl=1000,
            osl=500,
            concurrency=point["concurrency"],
            chunked_prefill=point["chunked_prefill"],  # None: whole prompts
        )
        assert p.tpot_s == pytest.approx(point["tpot_s"], rel=1e-9)
        assert p.ttft_s == pytest.approx(point["ttft_s"], rel=1e-9)
