"""Chunked prefill's keep-up rule is one function (``figures.chunk_rule``): the plan's
``chunk_load`` and the search's chunked points (``search_space._chunk_rows``) each had a copy
(the chunk the decode tokens leave of the budget, a prompt's chunk steps, the prompt tokens a
group's requests bring a step)."""

from __future__ import annotations

import itertools
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


@pytest.mark.parametrize(("q", "tau"), [(1.0, 1.0), (2.0, 1.7), (4.0, 2.9)])  # MTP 0, 1, 3
def test_the_plans_rule_is_the_arrays_rule_on_a_grid(q, tau):
    """chunk_load (the plan's, scalars) and chunk_rule on arrays (the search's) agree exactly
    on a grid of prompts, budgets, token caps and batches, with MTP's draft tokens too."""
    B = np.array([1.0, 3.0, 17.0, 64.0, 250.0, 1000.0])
    for isl, osl, chunk, cap in itertools.product(
        (100, 2000, 8000), (2, 500), (256, 2048, 8192), (None, 2048, 8192)
    ):
        a_chunk, a_steps, a_n, a_P = chunk_rule(isl, osl, chunk, cap, B, B, q, tau)
        for i, b in enumerate(B):
            got = chunk_load(_mix(isl, osl, chunk, cap, q, tau), b, b)
            want = tuple(
                float(np.broadcast_to(x, B.shape)[i]) for x in (a_chunk, a_steps, a_n, a_P)
            )
            assert got == want, (isl, osl, chunk, cap, b)


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
