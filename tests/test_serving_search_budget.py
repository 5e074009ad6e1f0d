"""A search that spends a GPU budget (``search(..., gpus=N)``, ``mlacalc search --gpus N``):
pools of any size within it, replicas, batches refined near the targets, and ``plan`` of the
best point giving its figures."""

from __future__ import annotations

import pytest

from mlacalc.serving.plan import plan
from mlacalc.serving.search import BATCHES, REFINE_POINTS, budget_counts, search
from mlacalc.words.errors import InvalidArgumentError

ISSUE = dict(isl=2000, osl=500, tpot=0.05)  # the 16-GPU question of the issue


@pytest.fixture(scope="module")
def dsv3_16():
    return search("deepseek-v3", "H200", 16, **ISSUE)


def _plan_of(b, isl, osl):
    extra = {}
    if b["mode"] == "disaggregated":
        extra = dict(
            mode="disaggregated",
            prefill_gpus=b["prefill_gpus"],
            prefill_tp=b["prefill_tp"],
            prefill_ep=b["prefill_ep"],
            prefill_dp_attention=b["prefill_dp_attention"],
            prefill_redundant_experts=b["prefill_redundant_experts"],
        )
    return plan(
        "deepseek-v3",
        "H200",
        b["decode_gpus"],
        tp=b["tp"],
        ep=b["ep"],
        pp=b["pp"],
        dp_attention=b["dp_attention"],
        redundant_experts=b["redundant_experts"],
        overlap=b["overlap"],
        kv_dtype=b["kv_dtype"],
        isl=isl,
        osl=osl,
        concurrency=b["concurrency"],
        **extra,
    )


def test_budget_pool_sizes():
    assert budget_counts(16) == (1, 2, 4, 8, 16)
    assert budget_counts(24) == (1, 2, 4, 8, 16, 24)
    assert budget_counts(1) == (1,)
    with pytest.raises(InvalidArgumentError, match="gpus"):
        search("deepseek-v3", "H200", 0, **ISSUE)


def test_a_split_that_beats_every_aggregated_layout_is_the_answer(dsv3_16):
    """The issue's question: 16 H200, 2000 + 500 tokens, TPOT <= 50 ms. Whenever a split
    deployment meeting the target beats every aggregated one on the budget's tokens/s, the
    best is a split, with both pools in its answer, within the budget."""
    r = dsv3_16
    assert r.budget == 16
    ok = [p for p in r.points if p["meets_targets"]]
    agg = max(p["budget_output_tokens_per_s"] for p in ok if p["mode"] == "aggregated")
    dis = max(p["budget_output_tokens_per_s"] for p in ok if p["mode"] == "disaggregated")
    b = r.best
    assert b["budget_output_tokens_per_s"] == max(agg, dis)
    if dis > agg:
        assert b["mode"] == "disaggregated"
        assert b["decode_gpus"] + b["prefill_gpus"] == b["gpus"] <= 16
        assert b["prefill_layout"] and b["prefill_gpus"] >= 1
    assert b["replicas"] == 16 // b["gpus"]
    assert b["budget_output_tokens_per_s"] == pytest.approx(
        b["replicas"] * b["output_tokens_per_s"]
    )
    assert b["requests_per_s"] == pytest.approx(b["output_tokens_per_s"] / 500)
    assert b["request_latency_s"] == pytest.approx(b["ttft_s"] + 500 * b["tpot_s"])


def test_plan_of_the_best_point_reproduces_it(dsv3_16):
    b = dsv3_16.best
    p = _plan_of(b, 2000, 500)
    assert p.ttft_s == pytest.approx(b["ttft_s"], rel=1e-6)
    assert p.tpot_s == pytest.approx(b["tpot_s"], rel=1e-6)
    assert p.output_tokens_per_s == pytest.approx(b["output_tokens_per_s"], rel=1e-6)
    assert p.total_gpus == b["gpus"]


def test_batches_are_refined_near_the_target(dsv3_16):
    """The best batch need not be a power of two: the batches between the searched ones next
    to the first pass's best are searched too, and no searched batch of the best's own
    deployment meets the target with more tokens/s per GPU."""
    r = dsv3_16
    b = r.best
    same = [
        p
        for p in r.points
        if all(p[k] == b[k] for k in ("mode", "layout", "decode_gpus", "kv_dtype", "overlap"))
        and p.get("prefill_layout") == b.get("prefill_layout")
    ]
    batches = {p["batch_per_group"] for p in same}
    assert batches - set(BATCHES), "no refined batch"
    assert len(batches - set(BATCHES)) <= 2 * REFINE_POINTS
    better = [
        p
        for p in same
        if p["meets_targets"] and p["budget_output_tokens_per_s"] > b["budget_output_tokens_per_s"]
    ]
    assert not better
    # the refined best is at least the power-of-two grid's best
    grid = [p for p in r.points if p["meets_targets"] and p["batch_per_group"] in BATCHES]
    assert b["budget_output_tokens_per_s"] >= max(p["budget_output_tokens_per_s"] for p in grid)


def test_a_list_of_counts_keeps_its_meaning():
    """A list of GPU counts is searched count by count, as before (no budget, one replica)."""
    r = search("llama-3-8b", "H100-SXM", [1, 2], isl=1000, osl=200, tpot=0.02)
    assert r.budget is None
    assert {p["gpus"] for p in r.points} <= {1, 2}
    assert all(p["replicas"] == 1 for p in r.points)
