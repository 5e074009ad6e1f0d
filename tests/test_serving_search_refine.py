"""Which setups a search refines (:func:`mlacalc.serving.search.refine_seeds`): every one
whose best could pass the best once its batches are refined, bounded by the grid's spacing
(:func:`mlacalc.serving.search.refine_bound`); the unlimited answer it moves is pinned in
tests/test_serving_search_limits.py (9,957.4 -> 10,108.0 tok/s/GPU) and
tests/test_serving_search_memo.py (64,081 -> 64,863 tok/s)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from mlacalc.serving.search import BATCHES, DIP_MARGIN, gap_bounds, refine_bound, search


def _point(batch: int, rate: float) -> dict:
    return {"batch_per_group": batch, "output_tokens_per_s_per_gpu": rate}


def _rate(p: dict) -> float:
    return p["output_tokens_per_s_per_gpu"]


REQ = SimpleNamespace(batches=BATCHES)


def test_the_bound_is_the_setups_next_searched_batch():
    """Best meeting the targets at 256 (100 tok/s/GPU), the next searched batch 512 timed at
    150 (missing them): refinement between them finds at most 150, but for a dip
    (DIP_MARGIN)."""
    best = _point(256, 100.0)
    points = [best, _point(512, 150.0), _point(1024, 190.0)]
    assert refine_bound(REQ, best, points, _rate) == DIP_MARGIN * 150


def test_without_a_point_at_the_next_batch_the_bound_scales_with_the_batch():
    """512 does not fit (no point): tokens/s grow at most in proportion to the batch, so
    at most 100 x 512 / 256 (x DIP_MARGIN); at the grid's end (1,024) refinement goes to
    twice it."""
    best = _point(256, 100.0)
    assert refine_bound(REQ, best, [best], _rate) == DIP_MARGIN * 200
    end = _point(1024, 100.0)
    assert refine_bound(REQ, end, [end], _rate) == DIP_MARGIN * 200
    odd = _point(300, 90.0)  # a refined batch: the next searched one above it, 512
    assert refine_bound(REQ, odd, [odd], _rate) == pytest.approx(DIP_MARGIN * 90.0 * 512 / 300)


def test_a_dip_within_the_margin_is_refined():
    """Tokens/s may fall with the batch where a kernel's rows cross a tile edge (Llama-3-8B
    on an H100 6.1%, 206 -> 214): a figure within DIP_MARGIN of the next batch's is reached."""
    best = _point(256, 100.0)
    assert refine_bound(REQ, best, [best, _point(512, 150.0)], _rate) == DIP_MARGIN * 150
    assert DIP_MARGIN >= 1.07  # above the largest dip measured (1.061)


def _answer(r) -> tuple:
    b = r.best
    return (b["layout"], b["overlap"], b["kv_dtype"], b["weight_format"],
            b["batch_per_group"], round(b["output_tokens_per_s_per_gpu"], 6))  # fmt: skip


QWEN = dict(model="qwen3-30b-a3b", hardware="H200", isl=2000)
BRUTE = (
    dict(QWEN, gpus=(2,), osl=200, tpot=0.008, modes=("aggregated",)),
    dict(QWEN, gpus=(4,), osl=200, tpot=0.009, engine="vllm"),
)


@pytest.mark.parametrize("kw", BRUTE, ids=["qwen3-30b-2-h200", "qwen3-30b-4-h200-vllm"])
def test_the_refined_answer_is_every_batchs(kw):
    """Grids whose gaps refinement fills with every whole batch (12 or fewer between two
    searched ones), the first missing the targets in one: the same best as timing every batch
    from 1 to 32 (best 18 and 22 per group, within it)."""
    every = _answer(search(batches=tuple(range(1, 33)), **kw))
    assert every[4] < 32
    for grid in ((1, 2, 4, 8, 12, 16, 24, 32), (12, 16, 24, 32), (24, 32)):
        assert _answer(search(batches=grid, **kw)) == every, grid


def test_a_setup_missing_the_targets_at_every_searched_batch_is_refined_below_them():
    """A review's case: batches 512 and 784 on 8 H200, TP1 DP-attention8 EP8 missing TPOT at
    both, was never refined; the search's best was TP2 DP-attention4 EP8's b970, 9,868.7
    tok/s/GPU, where batches 256 and 784 find TP1 DP-attention8 EP8's b510, 10,232.9. Batches
    below a setup's first found b493, 10,076.2, in two passes (review10); passes go on while
    a gap beside the best could pass it (gap_bounds): b510 again (refine calls 53 -> 57). At
    TPOT 49.5 ms: since Hopper's fp8 XQA waits once its cache outgrows the L2 (its fp8 decode
    class refitted with a fuller overlap, attention_time._spill_share) batch 512 takes 49.67
    ms a step as TP1 DP8 and 49.77 as TP1 DP-attention8 EP8, within 50 ms, so the case's 50 ms
    no longer has every setup miss both batches; at 49.5 they do, and the refined best is TP1
    DP-attention8 EP8's b506, 10,472.1 tok/s/GPU, TPOT 48.27 ms."""
    r = search("qwen3-30b-a3b", "H200", (8,), batches=(512, 784), isl=2000, osl=500, ttft=2.0,
               tpot=0.0495, modes=("aggregated",))  # fmt: skip
    assert r.best["layout"] == "TP1 DP-attention8 EP8" and r.best["batch_per_group"] < 512
    assert r.best["output_tokens_per_s_per_gpu"] >= 10_400  # 9,868.7, then 10,076.2 before


@pytest.mark.parametrize("grid", [BATCHES, (512, 784)], ids=["searched-batches", "512-784"])
def test_a_looser_target_finds_no_worse_best(grid):
    """A brief's case (Qwen3-30B-A3B on 8 H200, 2,000 in / 500 out, aggregated): TP1
    DP-attention8 EP8 met TPOT 50 ms at its searched b512 (10,277.1 tok/s/GPU), so only the
    gaps next to it were refined once (b485 below it on the searched batches, nothing below
    512 on 512 / 784), and the best was TP1 DP8's b512, 10,287.5, where TPOT 49.5 ms found
    the setup's b506, 10,472.1 at 48.27 ms: its TPOT rises 48.27 -> 49.35 ms from b506 to
    b507, where each attention group's prompts a step pass one (``ranks.synced_prompts``).
    Refinement now goes on next to a setup's best while a gap could pass the best found
    (``search.refine_gaps``): both targets give b506, and the looser's best is no worse."""
    ask = dict(isl=2000, osl=500, ttft=2.0, modes=("aggregated",), batches=grid)
    loose = search("qwen3-30b-a3b", "H200", (8,), tpot=0.05, **ask).best
    tight = search("qwen3-30b-a3b", "H200", (8,), tpot=0.0495, **ask).best
    assert loose["tpot_s"] <= 0.05 and tight["tpot_s"] <= 0.0495
    assert _rate(loose) >= _rate(tight) >= 10_400
    assert (loose["layout"], loose["batch_per_group"]) == ("TP1 DP-attention8 EP8", 506)


def test_a_gap_is_refined_while_it_could_pass_the_best():
    """A batch y above a timed x gives at most key(x) y / x (a step takes no less time at a
    larger batch): best at 400 (100), timed 380 (96) and 420 (104, missing the targets)."""
    seed = _point(400, 100.0)
    setup = [_point(380, 96.0), seed, _point(420, 104.0), _point(420, 90.0)]
    assert gap_bounds(seed, setup, 100.0, budget=False) == (380, 420)
    # 420 holds at most 105 and 380's gap at most 96 x 400 / 380 = 101.05: over 102, neither
    assert gap_bounds(seed, setup, 102.0, budget=False) == (None, 420)
    assert gap_bounds(seed, setup, 106.0, budget=False) == (None, None)
    # a gap under two batches wide holds no batch
    assert gap_bounds(seed, [_point(399, 99.0), seed, _point(401, 101.0)], 0.0, False) == (
        None, None)  # fmt: skip
