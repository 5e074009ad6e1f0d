"""prefill_pass and output_lag_steps through every front end: plan() and search() refuse
what they cannot mean, the CLI takes both flags with one-line errors naming the flag and its
choices, and search agrees with plan on the same deployment."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from mlacalc.cli import cli, main
from mlacalc.serving.plan import plan
from mlacalc.serving.search import search
from mlacalc.words.errors import InvalidArgumentError

KW = dict(isl=1000, osl=200, weight_dtype="bf16")


@pytest.mark.parametrize(
    ("kwargs", "argument"),
    [
        ({"mode": "disaggregated", "prefill_pass": "separate"}, "prefill_pass"),
        ({"chunked_prefill": 512, "prefill_pass": "separate"}, "prefill_pass"),
        ({"mode": "disaggregated", "output_lag_steps": 1}, "output_lag_steps"),
        ({"output_lag_steps": 1.5}, "output_lag_steps"),
        ({"prefill_pass": "together"}, "prefill_pass"),
    ],
)
def test_plan_refuses_an_engine_it_cannot_mean(kwargs, argument):
    with pytest.raises(InvalidArgumentError) as info:
        plan("llama-3-8b", "H100-SXM", 2, **KW, **kwargs)
    assert info.value.argument == argument


def test_plan_records_the_engine():
    p = plan(
        "llama-3-8b",
        "H100-SXM",
        1,
        concurrency=8,
        prefill_pass="separate",
        output_lag_steps=2,
        **KW,
    )
    doc = p.to_dict()
    assert (doc["prefill_pass"], doc["output_lag_steps"]) == ("separate", 2)


@pytest.mark.parametrize("prefill_pass", ["fused", "separate"])
def test_search_points_agree_with_plan(prefill_pass):
    r = search(
        "llama-3-8b",
        "H100-SXM",
        [1],
        isl=1000,
        osl=200,
        modes=("aggregated",),
        weight_dtypes=("bf16",),
        kv_dtypes=("bf16",),
        prefill_pass=prefill_pass,
        output_lag_steps=1,
    )
    assert (r.to_dict()["prefill_pass"], r.to_dict()["output_lag_steps"]) == (prefill_pass, 1)
    pt = next(x for x in r.points if x["batch_per_group"] == 32)
    p = plan(
        "llama-3-8b",
        "H100-SXM",
        1,
        concurrency=32,
        prefill_pass=prefill_pass,
        output_lag_steps=1,
        **KW,
    )
    assert pt["ttft_s"] == pytest.approx(p.ttft_s, rel=1e-9)
    assert pt["tpot_s"] == pytest.approx(p.tpot_s, rel=1e-9)


def test_search_separate_pass_costs_the_running_batch_its_prefill():
    kw = dict(
        isl=1000, osl=200, modes=("aggregated",), weight_dtypes=("bf16",), kv_dtypes=("bf16",)
    )
    fused = search("llama-3-8b", "H100-SXM", [1], **kw)
    apart = search("llama-3-8b", "H100-SXM", [1], prefill_pass="separate", **kw)
    # apart runs no chunks; the batches both timed (refinement's later passes,
    # search.refine_gaps, go where each search's best and gaps lead: 28 shared of 53 and 40)
    whole = {(p["overlap"], p["batch_per_group"]): p for p in fused.points
             if not p["chunked_prefill"]}  # fmt: skip
    other = {(p["overlap"], p["batch_per_group"]): p for p in apart.points}
    both = whole.keys() & other.keys()
    assert {("none", 1), ("none", 2), ("none", 64)} <= both and len(both) >= 20
    for a, b in ((whole[k], other[k]) for k in sorted(both)):
        # one request a group: its gaps are decode steps either way (its prompt is before
        # its first token); more: the others' prompts' passes fall between its tokens
        more = a["batch_per_group"] > 1
        assert b["tpot_s"] > a["tpot_s"] if more else b["tpot_s"] == a["tpot_s"]
        assert b["ttft_s"] > a["ttft_s"]
    for bad in ({"prefill_pass": "apart"}, {"output_lag_steps": -1}):
        with pytest.raises(InvalidArgumentError) as info:
            search("llama-3-8b", "H100-SXM", [1], **kw, **bad)
        assert info.value.argument == next(iter(bad))


PLAN = [
    "plan",
    "llama-3-8b",
    "-H",
    "H100",
    "--gpus",
    "1",
    "--weight-dtype",
    "bf16",
    "--isl",
    "467",
    "--osl",
    "256",
    "--request-rate",
    "4",
]


def test_plan_cli_takes_both_flags():
    runner = CliRunner()
    out = runner.invoke(
        cli, [*PLAN, "--prefill-pass", "separate", "--output-lag-steps", "1", "--format", "json"]
    )
    assert out.exit_code == 0, out.output
    doc = json.loads(out.output)
    p = plan(
        "llama-3-8b",
        "H100-SXM",
        1,
        isl=467,
        osl=256,
        request_rate=4.0,
        weight_dtype="bf16",
        prefill_pass="separate",
        output_lag_steps=1,
    )
    assert (doc["prefill_pass"], doc["output_lag_steps"]) == ("separate", 1)
    assert doc["ttft_s"] == pytest.approx(p.ttft_s) and doc["tpot_s"] == pytest.approx(p.tpot_s)
    table = runner.invoke(cli, [*PLAN, "--prefill-pass", "separate", "--output-lag-steps", "1"])
    assert "separate" in table.output and "1 step(s)" in table.output
    assert "--prefill-pass [fused|separate]" in runner.invoke(cli, ["plan", "--help"]).output


@pytest.mark.parametrize(
    ("extra", "needles"),
    [
        (["--prefill-pass", "apart"], ("--prefill-pass", "'fused', 'separate'")),
        (["--output-lag-steps", "-1"], ("--output-lag-steps", "0<=x")),
        (["--chunked-prefill", "512", "--prefill-pass", "separate"], ("--prefill-pass",)),
    ],
)
def test_plan_cli_bad_engine_is_one_line(extra, needles, capsys):
    assert main([*PLAN, *extra]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and all(n in err for n in needles), err


def test_plan_cli_disaggregated_refuses_lag(capsys):
    args = [
        "plan",
        "llama-3-8b",
        "-H",
        "H100",
        "--gpus",
        "2",
        "--isl",
        "100",
        "--osl",
        "100",
        "--mode",
        "disaggregated",
        "--output-lag-steps",
        "2",
    ]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--output-lag-steps" in err


def test_search_cli_takes_both_flags(capsys):
    args = [
        "search",
        "llama-3-8b",
        "-H",
        "H100",
        "--gpus",
        "1",
        "--isl",
        "1000",
        "--osl",
        "200",
        "--modes",
        "aggregated",
        "--weight-dtypes",
        "bf16",
        "--kv-dtypes",
        "bf16",
    ]
    runner = CliRunner()
    out = runner.invoke(
        cli, [*args, "--prefill-pass", "separate", "--output-lag-steps", "1", "--format", "json"]
    )
    assert out.exit_code == 0, out.output
    doc = json.loads(out.output)
    assert (doc["prefill_pass"], doc["output_lag_steps"]) == ("separate", 1)
    assert main([*args, "--prefill-pass", "apart"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--prefill-pass" in err and "'separate'" in err
