"""Prefix caching in search (``search(prefix_cache_hit=h)``, ``mlacalc search
--prefix-cache-hit h``): every prompt of every point timed as plan times it at that hit
(plan's own rule and step arguments, :func:`mlacalc.serving.figures.prompt_args`), so a
search limited to one layout gives plan's figures for it; 0 is the search as before; the
hit is said in the constraints and the plan command; bad hits refused as plan refuses them."""

from __future__ import annotations

import json
import math

import pytest
from _helpers import plan_point

from mlacalc.cli import main
from mlacalc.serving.search import search
from mlacalc.words.errors import InvalidArgumentError

MOE = "qwen3-30b-a3b"
ASK = dict(isl=2000, osl=500, ttft=2.0, tpot=0.05)
ONE = dict(tp=1, ep=8, dp_attention="on", kv_dtypes="fp8", weight_dtypes="fp8")
FIGURES = ("ttft_s", "tpot_s", "output_tokens_per_s_per_gpu", "output_tokens_per_s_per_user")


def _plan_of(r, p, hit):
    return plan_point(
        MOE, r.hardware, p, r.isl, r.osl, weight_dtype=p["weight_dtype"],
        chunked_prefill=p["chunked_prefill"], memory_reserve=r.memory_reserve,
        engine=r.engine, engine_defaults="none", prefix_cache_hit=hit,
        **r.scheduler_defaults_applied,
    )  # fmt: skip


@pytest.mark.parametrize("chunks", [None, (512,)], ids=["whole-prompts", "chunked-512"])
@pytest.mark.parametrize("hit", [0.5, 0.9])
def test_one_layout_is_plan_of_it_at_the_hit(hit, chunks):
    """Limited to one layout (TP1 DP-attention8 EP8, fp8, aggregated), the best at a hit (and
    the best chunked point) is plan of it at that hit, to 1e-12: its prompts' steps, the
    prompt alone and (chunked) the chunks after the cached tokens (before: search took no
    hit)."""
    r = search(
        MOE, "H200", [8], modes="aggregated", chunked_prefills=chunks, prefix_cache_hit=hit,
        **ONE, **ASK,
    )  # fmt: skip
    b = r.best
    if chunks:  # the chunked point of the most tokens/s per GPU
        b = max(
            (p for p in r.points if p["chunked_prefill"] == chunks[0]),
            key=lambda p: p["output_tokens_per_s_per_gpu"],
        )
    assert b["layout"] == "TP1 DP-attention8 EP8"
    got = _plan_of(r, b, hit)
    assert got.prefix_cached_tokens == int(hit * 2000) // 16 * 16  # whole 16-token pages
    for key in FIGURES:
        assert getattr(got, key) == pytest.approx(b[key], rel=1e-12), key


@pytest.mark.parametrize(
    "every",
    [pytest.param(False, id="sample"), pytest.param(True, id="all", marks=pytest.mark.slow)],
)
def test_every_point_of_one_layout_is_plan_of_it(every):
    """Every aggregated point (whole prompts, batches 16, 64, 256 and those refinement adds)
    at hit 0.75, not only the best. By default the three batches asked, the best and the
    smallest and largest batch refinement adds (6 plans); --runslow: all 40 points, a
    property check of 40 plans (13.8 s of the file's 17.9 s of CPU)."""
    r = search(
        MOE, "H200", [8], modes="aggregated", chunked_prefills=None, batches=(16, 64, 256),
        prefix_cache_hit=0.75, overlaps="none", **ONE, **ASK,
    )  # fmt: skip
    batches = [p["batch_per_group"] for p in r.points]
    assert {16, 64, 256} <= set(batches)
    added = sorted(set(batches) - {16, 64, 256})
    assert len(added) >= 2 and r.best in r.points
    picked = {16, 64, 256, r.best["batch_per_group"], added[0], added[-1]}
    for p in r.points if every else [p for p in r.points if p["batch_per_group"] in picked]:
        got = _plan_of(r, p, 0.75)
        for key in FIGURES:
            assert getattr(got, key) == pytest.approx(p[key], rel=1e-12), (
                p["batch_per_group"],
                key,
            )


def test_a_disaggregated_best_is_plan_of_it_at_the_hit():
    """A prefill pool's passes compute the tokens not found cached and batch more prompts
    (16,384 // 500 = 32 at hit 0.75, 8 without): plan of the best at the hit, to 1e-9."""
    r = search(MOE, "H200", [8, 16], modes="disaggregated", prefix_cache_hit=0.75, **ONE, **ASK)
    b = r.best
    got = _plan_of(r, b, 0.75)
    assert got.prefill_layout == b["prefill_layout"]
    for key in FIGURES:
        assert getattr(got, key) == pytest.approx(b[key], rel=1e-9), key


def test_a_hit_of_0_is_the_search_as_before():
    """``prefix_cache_hit=0`` gives every point as no hit does, to the bit (the unlimited
    search's best is pinned in tests/test_serving_search_limits.py)."""
    kw = dict(modes=("aggregated", "disaggregated"), **ONE, **ASK)
    a, b = (
        search(MOE, "H200", [8, 16], **kw),
        search(MOE, "H200", [8, 16], prefix_cache_hit=0, **kw),
    )
    keys = ("layout", "mode", "batch_per_group", "chunked_prefill", "overlap", *FIGURES)
    assert [tuple(p[k] for k in keys) for p in a.points] == [
        tuple(p[k] for k in keys) for p in b.points
    ]
    assert a.constraints() == b.constraints() and b.constraints()["prefix_cache_hit"] == 0.0


def test_the_hit_shortens_ttft_and_is_said():
    """At hit 0.75 the best's TTFT falls (its prompts compute 512 of 2,000 tokens, 1,488 found
    cached in whole 16-token pages: 51.60 -> 29.12 ms at batch 64; 51.78 -> 29.29 ms before
    Hopper's fp8 XQA waited once its cache outgrows the L2, attention_time._spill_share, its
    fp8 decode class refitted; 51.61 -> 29.03 ms at a22e1de
    before TensorRT-LLM's own MoE took its sort's costs, moe_time ``sort_s`` and
    ``sort_pair_s``; 51.73 -> 29.15 ms before the fp8 decode's merge refit, 72004ed; 51.35 ->
    28.98 ms before
    TensorRT-LLM's own fp8 MoE took a cost per row of the rank, moe_time ``row_s``; 51.76 ->
    29.28 ms before
    DeepEP's normal combine ended with a token's reduction, comm_time's ``reduce_s``; 29.10 ms
    at 1,500 cached before the pages; 51.92 -> 28.21 ms before ranks.synced_prompts' share rose
    with the load; 53.06 -> 28.55 ms before cuBLAS's persistent GEMMs balanced their last wave,
    gemm_time.BALANCED_WAVES; 51.33 -> 28.96 ms before the MMHA split refit of
    attention_decode, attention_time.MMHA_SPLIT_UNITS_PER_SM; the figures at 1e-6 moved when
    TensorRT-LLM's MMHA and mma.sync XQA overlapped more with the units an SM runs in turn,
    attention_time.turn_overlap; 51.78 -> 29.29 ms before the fp8 decode class's refit with
    MMHA's block size, mmha_block_s and mmha_hidden_s, which moved its Hopper fp8 XQA terms;
    51.73 -> 29.24 ms before the decode classes' refit with the MMHA fallback's wave of SMs,
    attention_time._mmha_fallback_s, which moved them again),
    and TPOT with it; the constraints and each row say the hit."""
    kw = dict(modes="aggregated", chunked_prefills=None, batches=(64,), overlaps="none")
    a = search(MOE, "H200", [8], **ONE, **ASK, **kw)
    r = search(MOE, "H200", [8], prefix_cache_hit=0.75, **ONE, **ASK, **kw)
    assert a.best["ttft_s"] == pytest.approx(0.05160089, rel=1e-6)
    assert r.best["ttft_s"] == pytest.approx(0.02911547, rel=1e-6)
    assert r.best["tpot_s"] < a.best["tpot_s"]
    assert r.constraints()["prefix_cache_hit"] == 0.75
    assert r.constraints_text().endswith("--prefix-cache-hit 0.75")
    assert r.row(r.best)["constraints"] == r.constraints_text()


def test_the_cli_states_the_hit_and_gives_plans_command(capsys):
    args = ["search", MOE, "-H", "H200", "--gpus", "8", "--isl", "2000", "--osl", "500",
            "--tp", "1", "--ep", "8", "--dp-attention", "on", "--kv-dtypes", "fp8",
            "--weight-dtypes", "fp8", "--modes", "aggregated", "--batches", "64",
            "--chunked-prefills", "none", "--prefix-cache-hit", "0.75"]  # fmt: skip
    assert main([*args, "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["constraints"]["prefix_cache_hit"] == 0.75
    assert "--prefix-cache-hit 0.75" in doc["plan_command"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "# searched under: --tp 1 --ep 8 --dp-attention on --prefix-cache-hit 0.75" in out


BAD = [-0.1, 1, 1.0, 1.5, math.nan, math.inf, "50%", "half", True]


def test_a_hit_of_none_is_no_prefix_cache():
    """None is 0, as other optional arguments take None (it was refused, a trial's find)."""
    none = search(MOE, "H200", [8], prefix_cache_hit=None, **ONE, **ASK)
    assert none.constraints()["prefix_cache_hit"] == 0.0
    zero = search(MOE, "H200", [8], prefix_cache_hit=0, **ONE, **ASK)
    assert {**none.to_dict(), "seconds": 0} == {**zero.to_dict(), "seconds": 0}


@pytest.mark.parametrize("value", BAD, ids=repr)
def test_a_hit_outside_0_to_1_is_refused_in_one_line(value):
    """plan's check and words (words.arguments.prefix_hit)."""
    with pytest.raises(InvalidArgumentError) as e:
        search(MOE, "H200", [8], prefix_cache_hit=value, **ONE, **ASK)
    text = str(e.value)
    assert text.startswith("prefix_cache_hit: must be a number in [0, 1)") and "\n" not in text


@pytest.mark.parametrize("value", ["-0.1", "1", "1.5", "nan", "inf", "50%", "half", ""])
def test_the_cli_refuses_a_hit_outside_0_to_1_in_one_line(value, capsys):
    args = ["search", MOE, "-H", "H200", "--gpus", "8", "--isl", "2000", "--osl", "500"]
    assert main([*args, "--prefix-cache-hit", value]) == 2
    err = capsys.readouterr().err.strip()
    assert "--prefix-cache-hit" in err and "must be a number in [0, 1)" in err
    assert len(err.splitlines()) == 1


def test_the_json_carries_plans_prefix_keys_at_the_top():
    """search's JSON has plan's top-level ``prefix_cache_hit`` and ``prefix_cached_tokens``
    (before: only ``constraints.prefix_cache_hit``, a trial's find), equal to plan's of its
    best point; present at 0 too."""
    r = search(MOE, "H200", [8], prefix_cache_hit=0.75, **ONE, **ASK)
    d = r.to_dict()
    got = _plan_of(r, r.best, 0.75).to_dict()
    assert (d["prefix_cache_hit"], d["prefix_cached_tokens"]) == (0.75, 1488)
    assert d["prefix_cached_tokens"] == got["prefix_cached_tokens"]
    assert d["prefix_cache_hit"] == got["prefix_cache_hit"]
    zero = search(MOE, "H200", [8], **ONE, **ASK).to_dict()
    assert (zero["prefix_cache_hit"], zero["prefix_cached_tokens"]) == (0.0, 0)
