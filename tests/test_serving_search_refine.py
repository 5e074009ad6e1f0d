"""Which setups a search refines (:func:`mlacalc.serving.search.refine_seeds`): every one
whose best could pass the best once its batches are refined, bounded by the grid's spacing
(:func:`mlacalc.serving.search.refine_bound`); the unlimited answer it moves is pinned in
tests/test_serving_search_limits.py (9,957.4 -> 10,108.0 tok/s/GPU) and
tests/test_serving_search_memo.py (64,081 -> 64,863 tok/s)."""

from __future__ import annotations

from types import SimpleNamespace

from mlacalc.serving.search import BATCHES, refine_bound


def _point(batch: int, rate: float) -> dict:
    return {"batch_per_group": batch, "output_tokens_per_s_per_gpu": rate}


def _rate(p: dict) -> float:
    return p["output_tokens_per_s_per_gpu"]


REQ = SimpleNamespace(batches=BATCHES)


def test_the_bound_is_the_setups_next_searched_batch():
    """Best meeting the targets at 256 (100 tok/s/GPU), the next searched batch 512 timed at
    150 (missing them): refinement between them finds at most 150."""
    best = _point(256, 100.0)
    assert refine_bound(REQ, best, [best, _point(512, 150.0), _point(1024, 190.0)], _rate) == 150


def test_without_a_point_at_the_next_batch_the_bound_scales_with_the_batch():
    """512 does not fit (no point): tokens/s grow at most in proportion to the batch, so
    at most 100 x 512 / 256; at the grid's end (1,024) refinement goes to twice it."""
    best = _point(256, 100.0)
    assert refine_bound(REQ, best, [best], _rate) == 200
    end = _point(1024, 100.0)
    assert refine_bound(REQ, end, [end], _rate) == 200
    odd = _point(300, 90.0)  # a refined batch: the next searched one above it, 512
    assert refine_bound(REQ, odd, [odd], _rate) == 90.0 * 512 / 300
