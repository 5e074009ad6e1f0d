"""search's throughput target: the GPUs a tokens/s target needs, in whole replicas of a point
meeting the latency targets (SearchResult.gpus_for, search --throughput / --throughput-of).
A user divided by hand before. The arithmetic by hand, and a mutation suite over the new
options and arguments. Each test failed before (no such method or option)."""

from __future__ import annotations

import json
import math

import pytest

from mlacalc.serving.provenance import SERVING_ERRORS
from mlacalc.serving.search import search
from mlacalc.words.errors import InvalidArgumentError

ARGS = ("search", "qwen3-8b", "-H", "H100", "--gpus", "1,2", "--isl", 1000, "--osl", 200)


@pytest.fixture(scope="module")
def result():
    return search("qwen3-8b", "H100", [1, 2], isl=1000, osl=200)


def test_the_gpus_by_hand(result):
    b = result.best
    out = result.gpus_for(50_000)
    one = b["requests_per_s"] * 200  # output tokens/s of one replica
    assert out["replica_tokens_per_s"] == pytest.approx(b["output_tokens_per_s"])
    assert out["replicas"] == math.ceil(50_000 / one)
    assert out["gpus"] == out["replicas"] * out["replica_gpus"]
    assert out["tokens_per_s"] >= 50_000 > (out["replicas"] - 1) * one
    total = result.gpus_for(50_000, of="total")  # prompt and output tokens: 1,200 a request
    assert total["replica_tokens_per_s"] == pytest.approx(b["requests_per_s"] * 1200)
    assert total["replicas"] == math.ceil(50_000 / (b["requests_per_s"] * 1200))
    # a target a replica meets: one replica, never zero
    assert result.gpus_for(1)["replicas"] == 1


def test_the_fewest_gpus_of_any_point_meeting_the_targets(result):
    meeting = [p for p in result.points if p.get("meets_targets")]
    for target in (9_000, 20_000, 123_456):
        out = result.gpus_for(target)
        fewest = min(math.ceil(target / p["output_tokens_per_s"] - 1e-9) * p["gpus"]
                     for p in meeting)  # fmt: skip
        assert out["gpus"] == fewest


def test_the_target_carries_its_replicas_figures_and_says_where_a_larger_replica_may_win(result):
    """A capacity analyst's JSON had the GPU count but not the replica's TTFT, TPOT, batch or
    KV dtype the text gave; and Kimi-K2 on H100 came to 96 GPUs searching 16 and 32 GPUs, 48
    adding 64, with no word that the answer is bound by the counts searched."""
    out = result.gpus_for(50_000)
    p = out["point"]
    for key in ("batch_per_group", "kv_dtype", "ttft_s", "tpot_s"):
        assert out[key] == p[key], key
    assert out["best_deployment"] == (p is result.best)
    # replicas of 1 GPU, below the largest count searched (2): nothing to say
    assert (out["replica_gpus"], out["note"]) == (1, "")
    two = max((q for q in result.points if q["meets_targets"] and q["gpus"] == 2),
              key=lambda q: q["output_tokens_per_s"])  # fmt: skip
    out = result.gpus_for(50_000, point=two)
    assert out["replicas"] > 1 and out["replica_gpus"] == 2  # the largest count searched
    assert out["note"].startswith(f"{out['replicas']} replicas of 2 GPUs, the largest count")
    assert out["note"].endswith("(--gpus 2,4,8)")
    assert result.gpus_for(1, point=two)["note"] == ""  # one replica: nothing to say
    # the count were the replica's tokens/s over-predicted as the offline table's median row
    e = out["served_error"]
    assert e == SERVING_ERRORS["offline_throughput"]["median"] > 0
    replicas = math.ceil(50_000 * (1 + e) / out["replica_tokens_per_s"] - 1e-9)
    assert out["gpus_at_served_error"] == replicas * 2 >= out["gpus"]
    doc = json.loads(json.dumps({k: v for k, v in out.items() if k != "point"}))
    assert doc["note"] == out["note"]


@pytest.mark.parametrize(
    ("kwargs", "argument"),
    [
        ({"tokens_per_s": 0}, "tokens_per_s"),
        ({"tokens_per_s": -5.0}, "tokens_per_s"),
        ({"tokens_per_s": float("nan")}, "tokens_per_s"),
        ({"tokens_per_s": float("inf")}, "tokens_per_s"),
        ({"tokens_per_s": "50k"}, "tokens_per_s"),
        ({"tokens_per_s": True}, "tokens_per_s"),
        ({"tokens_per_s": None}, "tokens_per_s"),
        ({"tokens_per_s": 5e4, "of": "input"}, "of"),
        ({"tokens_per_s": 5e4, "of": "Output"}, "of"),
    ],
)
def test_bad_arguments_name_themselves(result, kwargs, argument):
    with pytest.raises(InvalidArgumentError) as info:
        result.gpus_for(**kwargs)
    assert info.value.argument == argument


def test_no_point_meeting_the_targets_is_said():
    r = search("qwen3-8b", "H100", [1], isl=1000, osl=200, tpot=1e-6)
    with pytest.raises(InvalidArgumentError, match="no deployment meets the targets"):
        r.gpus_for(1000)


def test_the_cli_prints_and_writes_it(run, result):
    out, _ = run(*ARGS, "--throughput", "50k")
    assert "GPUs for 50,000 output tokens/s" in out
    want = result.gpus_for(50_000)
    row = next(line for line in out.splitlines() if "│ TP" in line and "aggregated" in line
               and f"{want['gpus']} │" in line)  # fmt: skip
    assert f"{want['replicas']} │" in row
    doc = json.loads(run(*ARGS, "--throughput", "1.2M", "--throughput-of", "total",
                         "--format", "json")[0])  # fmt: skip
    t = doc["throughput_target"]
    assert t["of"] == "total" and t["target_tokens_per_s"] == 1_200_000
    assert t["gpus"] == result.gpus_for(1.2e6, of="total")["gpus"]
    out, _ = run(*ARGS, "--tpot", "1us", "--throughput", "50000")
    assert "no deployment meets the targets: none to replicate" in out


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        (["--throughput", "0"], "'0' is not a positive number of tokens/s"),
        (["--throughput", "-3k"], "is not a positive number"),
        (["--throughput", "fast"], "'fast' is not a positive number"),
        (["--throughput", "1e999"], "is not a positive number"),
        (["--throughput", "nan"], "is not a positive number"),
        (["--throughput", ""], "is not a positive number"),
        (["--throughput-of", "total"], "give --throughput TOKENS/S with it"),
        (["--throughput-of", "input", "--throughput", "5k"], "--throughput-of"),
        (["--throughput", "5k", "--format", "csv"], "give --format json"),
    ],
)
def test_bad_options_are_one_line_naming_the_option(run, extra, words):
    _, err = run(*ARGS, *extra, code=2)
    assert err.count("\n") == 1 and words in err, err


def test_the_apps_search_gives_the_gpus_for_a_target():
    """The planner's search: a throughput target gives the GPUs, as throughput_gpus of the
    points it drew (the default model, deepseek-v3 on H200, at half, the same and twice the
    form's 8 GPUs)."""
    pytest.importorskip("streamlit")
    from _helpers import run_app

    from mlacalc.serving.search import throughput_gpus
    from mlacalc.words import defaults as D

    at = run_app("Capacity planner")
    at.checkbox(key="plan_search").check().run()
    assert not any("GPUs for" in m.value for m in at.markdown)  # 0: no target, nothing said
    at.number_input(key="plan_throughput").set_value(100_000.0).run()
    assert not at.exception
    line = next(m.value for m in at.markdown if "GPUs for 100,000 output tokens/s" in m.value)
    r = search(
        "deepseek-v3", "H200", [4, 8, 16], isl=D.ISL, osl=D.OSL, ttft=D.TTFT_TARGET_S,
        tpot=D.TPOT_TARGET_S, engine_defaults="trtllm",
    )  # fmt: skip
    want = throughput_gpus(r.points, r.best, D.ISL, D.OSL, 100_000)
    assert line.startswith(f"**{want['gpus']:,} GPUs for 100,000 output tokens/s**")


def test_each_gpu_counts_best_is_refined():
    """A throughput target replicates the best point of some GPU count (the one whose whole
    replicas need the fewest GPUs), so every count's best is refined, not only the overall
    best's: refine ran between the grid batches around it (a capacity planner's trial:
    DeepSeek-V3 on GB200 replicated 8 + 8 GPUs at grid batch 256, 52,395 tok/s, where plan of
    its refined batch gives 74,501). Failed before: qwen3-8b's 3 GPUs (1 + 2 disaggregated)
    stayed at batch 256, 18,993 tok/s, where batch 372 gives 20,292."""
    from mlacalc.serving.search import BATCHES, count_bests, setup_of

    r = search("qwen3-8b", "H100", [1, 2, 4], isl=1000, osl=200, ttft=1.0, tpot=0.02)
    bests = count_bests(r.points)
    assert 3 in bests
    for p in bests.values():
        b = p["batch_per_group"]
        lo = max((x for x in BATCHES if x < b), default=0)
        hi = min((x for x in BATCHES if x > b), default=2 * b)
        near = {q["batch_per_group"] for q in r.points
                if setup_of(q) == setup_of(p) and q["gpus"] == p["gpus"]}  # fmt: skip
        for side in (range(lo + 1, b), range(b + 1, hi)):  # both gaps, where they hold one
            assert not side or near & set(side), (p["gpus"], b, sorted(near))


def test_the_replicas_plan_line_gives_its_tokens(run):
    """search --throughput's JSON carries the replica's own plan line, and plan of it gives
    the replica's tokens/s (the best's plan line is another deployment's where they differ)."""
    doc = json.loads(run("search", "qwen3-8b", "-H", "H100", "--gpus", "1,2,4", "--isl", 1000,
                         "--osl", 200, "--ttft", "1s", "--tpot", "20ms", "--throughput", "20.1k",
                         "--format", "json")[0])  # fmt: skip
    t = doc["throughput_target"]
    planned = json.loads(run(*t["plan_command"].split()[1:], "--format", "json")[0])
    assert planned["output_tokens_per_s"] == pytest.approx(t["replica_tokens_per_s"], rel=1e-6)


def test_each_counts_best_is_one_the_engine_runs():
    """A count's best, the point refinement must reach for a throughput target, is one whose
    KV cache the engine runs before any faster one it does not (throughput_gpus replicates
    only those): an nvfp4 MLA cache under TensorRT-LLM led its count at more tokens/s."""
    from mlacalc.serving.search import count_bests

    def pt(gpus, tok, runs=None):
        p = {"gpus": gpus, "meets_targets": True, "output_tokens_per_s_per_gpu": tok}
        if runs is not None:
            p["engine_runs"] = runs
        return p

    fast_unrun, slow_run, other = pt(8, 900.0, False), pt(8, 700.0, True), pt(4, 500.0)
    missed = pt(8, 950.0, True) | {"meets_targets": False}
    bests = count_bests([fast_unrun, slow_run, other, missed])
    assert bests[8] is slow_run and bests[4] is other
    assert count_bests([fast_unrun])[8] is fast_unrun  # none runnable: the fastest still


def test_the_gpu_count_is_said_in_whole_nodes(run):
    """A capacity analyst priced '16 GB200' with no word of the 4-GPU trays they come in: the
    table's GPU count says the device's nodes it fills (H100's are 8 GPUs)."""
    from mlacalc.cli.search_cmd import _nodes_words

    assert _nodes_words(16, 4) == " (4 nodes of 4)"
    assert _nodes_words(6, 4) == " (2 nodes of 4, 2 GPUs spare)"
    assert _nodes_words(3, None) == "" and _nodes_words(3, 1) == ""
    out, _ = run(*ARGS, "--throughput", "50k", "--format", "markdown")
    doc = json.loads(run(*ARGS, "--throughput", "50k", "--format", "json")[0])
    gpus = doc["throughput_target"]["gpus"]
    nodes = -(-gpus // 8)
    assert f"| {gpus:,} ({nodes:,} node{'s' if nodes > 1 else ''} of 8" in out
    served = doc["throughput_target"]["gpus_at_served_error"]
    assert "over-predicted by 9.7% (the offline served table's median, " in " ".join(out.split())
    assert f"docs/serving.md): {served:,} GPUs." in " ".join(out.split())
