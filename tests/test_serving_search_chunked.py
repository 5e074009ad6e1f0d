"""Chunked prefill in the search: aggregated points are also run at the token budgets of
``chunked_prefills`` (each point saying its ``chunked_prefill``), timed as plan times a chunked
deployment, and plan of the best (its printed command carrying ``--chunked-prefill N``)
gives its figures."""

from __future__ import annotations

import json
import shlex
from collections import defaultdict

import pytest
from _helpers import plan_point

from mlacalc.serving.search import CHUNKS, search
from mlacalc.words.errors import InvalidArgumentError

ISL, OSL = 4000, 500


@pytest.fixture(scope="module")
def llama():
    return search("llama-3-8b", "H100-SXM", [1, 2], isl=ISL, osl=OSL, tpot=0.05)


def _plan(model, hw, p, isl, osl, **kw):
    """plan of a search point with its chunk budget."""
    return plan_point(model, hw, p, isl, osl, chunked_prefill=p["chunked_prefill"], **kw)


def test_chunked_points_are_searched_and_equal_plan(llama):
    """The grid includes the engines' default (8,192); chunked points exist beside the
    whole-prompt ones, and each equals plan with its --chunked-prefill."""
    assert 8192 in CHUNKS
    chunked = [p for p in llama.points if p["chunked_prefill"]]
    whole = [p for p in llama.points if p["mode"] == "aggregated" and not p["chunked_prefill"]]
    assert chunked and whole
    assert {p["chunked_prefill"] for p in chunked} <= set(CHUNKS)
    for p in chunked[:: max(1, len(chunked) // 5)]:
        q = _plan("llama-3-8b", "H100-SXM", p, ISL, OSL, weight_dtype=p["weight_dtype"])
        assert q.tpot_s == pytest.approx(p["tpot_s"], rel=1e-9)
        assert q.ttft_s == pytest.approx(p["ttft_s"], rel=1e-9)
        assert q.output_tokens_per_s == pytest.approx(p["output_tokens_per_s"], rel=1e-9)


def test_synced_groups_chunked_points_equal_plan_and_a_bigger_budget_never_shortens_the_step():
    """DeepSeek-V3 DP-attention on 8 H200 with prompts of 8,000 tokens (budgets of 2,048 and
    8,192: a prompt in 4 chunks or one): each chunked point equals plan; at one deployment
    and batch, a bigger budget never gives a shorter TPOT (a group carrying a chunk holds the
    others up); a budget beyond the prompt (16,384) runs as the prompt's own (timed once)."""
    isl = 8000
    r = search("deepseek-v3", "H200", [8], isl=isl, osl=OSL, modes=("aggregated",),
               kv_dtypes=("fp8",), overlaps=("none",))  # fmt: skip
    synced = [p for p in r.points if p["chunked_prefill"] and p["dp_attention"] and p["dp"] > 1]
    assert {p["chunked_prefill"] for p in synced} >= {2048, 16384}
    assert 8192 not in {p["chunked_prefill"] for p in r.points}  # 16,384 runs the same
    for p in synced[:: max(1, len(synced) // 3)]:
        q = _plan("deepseek-v3", "H200", p, isl, OSL)
        assert q.tpot_s == pytest.approx(p["tpot_s"], rel=1e-9)
        assert q.ttft_s == pytest.approx(p["ttft_s"], rel=1e-9)
    by_setup = defaultdict(list)
    for p in synced:
        by_setup[(p["layout"], p["batch_per_group"])].append(p)
    for runs in by_setup.values():
        runs.sort(key=lambda p: p["chunked_prefill"])
        tpots = [p["tpot_s"] for p in runs]
        assert tpots == sorted(tpots), tpots


def test_chunked_points_beaten_on_both_figures_by_another_budget_are_left_out(llama):
    """Of one deployment's chunked points at one batch, none is beaten on TPOT, TTFT and
    tokens/s by another budget's (it could be neither the best nor on the frontier). Tokens/s
    follow from TTFT and TPOT (Little's law: the batch's osl tokens each TTFT + (osl - 1)
    TPOT), so the search keeps the budgets no other beats on both. With one request a group,
    TPOT is the decode step whatever the budget (its own chunks come before its first
    token): 2,048 (TTFT 91.8 ms) is beaten by 16,384 (85.7 ms) then. It stayed before for its
    tokens/s alone, 144.08 against 144.05, a request counted as osl mean steps (Llama-3-8B
    TP1 bf16; the search's points 473 -> 456)."""
    groups = defaultdict(list)
    for p in llama.points:
        if p["chunked_prefill"]:
            key = (p["gpus"], p["layout"], p["overlap"], p["kv_dtype"], p["weight_dtype"])
            groups[(*key, p["batch_per_group"])].append(p)
    assert groups
    for pts in groups.values():
        for a in pts:
            assert not any(
                b is not a
                and b["tpot_s"] <= a["tpot_s"]
                and b["ttft_s"] <= a["ttft_s"]
                and b["output_tokens_per_s"] >= a["output_tokens_per_s"]
                for b in pts
            )


def test_no_chunked_budgets_is_the_whole_prompt_search(llama):
    r = search("llama-3-8b", "H100-SXM", [1, 2], isl=ISL, osl=OSL, tpot=0.05,
               chunked_prefills=None)  # fmt: skip
    assert not any(p["chunked_prefill"] for p in r.points)
    assert len(r.points) < len(llama.points)
    for bad in ("x", 0, [2048, -1], 2.5):
        with pytest.raises(InvalidArgumentError, match="chunked_prefills"):
            search("llama-3-8b", "H100-SXM", [1], isl=ISL, osl=OSL, chunked_prefills=bad)
    # prompts in a pass of their own: plan refuses chunks with it, the search runs none
    sep = search("llama-3-8b", "H100-SXM", [1], isl=ISL, osl=OSL, prefill_pass="separate")
    assert not any(p["chunked_prefill"] for p in sep.points)


def test_plan_command_of_a_chunked_best_reproduces_it(run):
    """The search's best here is chunked; the plan command it prints carries
    --chunked-prefill N and gives its figures."""
    args = ("search", "llama-3-8b", "-H", "H100-SXM", "--gpus", "1,2", "--isl", 3000,
            "--osl", OSL, "--tpot", "50ms", "--format", "json")  # fmt: skip
    doc = json.loads(run(*args)[0])
    b = doc["best"]
    assert b["mode"] == "aggregated" and b["chunked_prefill"] in CHUNKS
    cmd = doc["plan_command"]
    assert f"--chunked-prefill {b['chunked_prefill']}" in cmd
    p = json.loads(run(*shlex.split(cmd)[1:], "--format", "json")[0])
    assert p["tpot_s"] == pytest.approx(b["tpot_s"], rel=1e-6)
    assert p["ttft_s"] == pytest.approx(b["ttft_s"], rel=1e-6)
    launch = json.loads(run(*args, "--launch", "sglang")[0])["launch"]
    assert f"--chunked-prefill-size {b['chunked_prefill']}" in launch
    none = json.loads(run(*args, "--chunked-prefills", "none")[0])
    assert none["best"]["chunked_prefill"] is None
    assert "--chunked-prefill" not in none["plan_command"]
