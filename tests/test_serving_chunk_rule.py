"""Chunked prefill's keep-up rule is one function (``figures.chunk_rule``): the plan's
``chunk_load`` and the search's chunked points (``search_space._chunk_rows``) each had a copy
(the chunk the decode tokens leave of the budget, a prompt's chunk steps, the prompt tokens a
group's requests bring a step)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from mlacalc.serving import search_space
from mlacalc.serving.figures import chunk_load, chunk_rule
from mlacalc.serving.search import search


def _mix(isl, osl, chunk, max_tokens, q, tau):
    req = SimpleNamespace(
        computed_tokens=isl, osl=osl, chunked_prefill=chunk, max_tokens=max_tokens
    )
    return SimpleNamespace(req=req, q=q, tau=tau)


#: (isl, osl, chunked_prefill, max_tokens, B, load, q, tau) -> (chunk, steps, n, P), by hand:
#: the chunk is chunked_prefill or what B x q decode tokens leave of max_tokens (at least 1),
#: steps = ceil(isl / chunk), n = load / (steps + (osl - 1) / tau), P = n x isl
HAND = [
    # the chunk whole (8,192 - 64 leaves more than 2,048): one step, 64 / (1 + 499)
    ((2000, 500, 2048, 8192, 64.0, 64.0, 1.0, 1.0), (2048, 1, 0.128, 256.0)),
    # no token cap: ceil(2000 / 256) = 8 steps, 17 / (8 + 1)
    ((2000, 2, 256, None, 17.0, 17.0, 1.0, 1.0), (256, 8, 17 / 9, 2000 * 17 / 9)),
    # MTP 1: 1,000 x 2 decode tokens leave 48 of 2,048; ceil(8000 / 48) = 167 steps
    ((8000, 2, 8192, 2048, 1000.0, 1000.0, 2.0, 1.7), (48, 167, 1000 / (167 + 1 / 1.7),
                                                       8000 * 1000 / (167 + 1 / 1.7))),
    # MTP 3: 4,000 decode tokens over a 2,048 budget leave the floor, 1 token a step
    ((100, 500, 2048, 2048, 1000.0, 250.0, 4.0, 2.9), (1, 100, 250 / (100 + 499 / 2.9),
                                                       100 * 250 / (100 + 499 / 2.9))),
]  # fmt: skip


@pytest.mark.parametrize(("given", "want"), HAND)
def test_the_rule_by_hand_on_scalars_and_arrays(given, want):
    """The plan's chunk_load and chunk_rule on arrays (the search's) each give the rule's
    figures worked by hand (the test before compared chunk_load with chunk_rule, which
    chunk_load calls: it could not fail)."""
    isl, osl, chunk, cap, b, load, q, tau = given
    got = chunk_load(_mix(isl, osl, chunk, cap, q, tau), b, load)
    assert got[:2] == want[:2] and got[2:] == pytest.approx(want[2:], rel=1e-12)
    B = np.array([b, b])  # the search's arrays, a row each
    arrays = chunk_rule(isl, osl, chunk, cap, B, np.array([load, load]), q, tau)
    for x, w in zip(arrays, want):
        assert np.broadcast_to(x, B.shape) == pytest.approx([w, w], rel=1e-12)


def test_the_search_takes_its_chunked_points_by_the_plans_rule(monkeypatch):
    """The search's chunked points are those the plan's rule keeps up with: a rule that keeps
    up with nothing leaves the search none (the search no longer has a rule of its own)."""
    ask = dict(isl=2000, osl=200, modes=("aggregated",), kv_dtypes=("bf16",),
               weight_dtypes=("bf16",), overlaps=("none",), batches=(8, 64),
               chunked_prefills=(512,), max_tokens=8192)  # fmt: skip
    before = search("llama-3.1-8b", "H100-SXM", (1,), **ask)
    assert any(p["chunked_prefill"] == 512 for p in before.points)

    def never(isl, osl, chunked_prefill, max_tokens, B, load, q=1.0, tau=1.0):
        chunk, steps, n, P = chunk_rule(isl, osl, chunked_prefill, max_tokens, B, load, q, tau)
        return chunk, steps, n, P + np.inf

    monkeypatch.setattr(search_space, "chunk_rule", never)
    after = search("llama-3.1-8b", "H100-SXM", (1,), **ask)
    assert not any(p["chunked_prefill"] == 512 for p in after.points)
