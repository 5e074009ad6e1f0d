"""search takes the engine's own KV page as plan does (F3's sequel): a search under an engine
ran 16-token pages whatever the engine's, its launch lines said no page, and plan of its best
point (under the engine's defaults) ran the engine's page: a prompt's cached tokens, and so the
figures, differed between the two."""

from __future__ import annotations

import json

import pytest
from _helpers import plan_point

import mlacalc
from mlacalc.serving.scheduler import engine_page_size
from mlacalc.serving.search import search

ASK = dict(isl=2000, osl=100, prefix_cache_hit=0.5, modes=("aggregated",), kv_dtypes=("bf16",))
ASK.update(overlaps=("none",), batches=(8, 32), chunked_prefills=None, weight_dtypes=("bf16",))


@pytest.mark.parametrize(
    ("engine", "page", "cached"),
    [("sglang", 1, 1000), ("vllm", 16, 992), ("trtllm", 32, 992), (None, 16, 992)],
)
def test_search_runs_the_engines_page_and_plan_of_its_best_agrees(engine, page, cached):
    """Qwen3-30B-A3B on 1 H200, 2,000-token prompts half cached. Before: every engine's search
    at page 16 (992 cached); SGLang's plan of the same point at page 1 (1,000 cached). Now the
    search's page is the engine's, as plan's under the engine's defaults, and plan of the best
    point at it gives the point's figures."""
    r = search("qwen3-30b-a3b", "H200", [1], engine=engine, **ASK)
    assert r.page_size == page == engine_page_size(engine)
    assert r.to_dict()["prefix_cached_tokens"] == cached
    got = plan_point(
        "qwen3-30b-a3b",
        "H200",
        r.best,
        r.isl,
        r.osl,
        weight_dtype="bf16",
        prefix_cache_hit=0.5,
        page_size=r.page_size,
        engine=engine,
        engine_defaults="none",  # the search's values as it took them (no chunked prefill)
        **r.scheduler_defaults_applied,
    )
    assert got.prefix_cached_tokens == cached
    # plan's own page under the engine's defaults is the search's
    own = mlacalc.plan("qwen3-30b-a3b", "H200", 1, isl=2000, osl=100, engine=engine)
    assert own.page_size == page
    for key in ("ttft_s", "tpot_s", "output_tokens_per_s"):
        assert getattr(got, key) == pytest.approx(r.best[key], rel=1e-6), key
    if engine is not None:  # the launch lines set the page the search assumed
        said = {"sglang": "--page-size 1", "vllm": "--block-size 16", "trtllm": "per_block: 32"}
        assert said[engine] in "\n".join(c for _, c in r.launch_commands(engine))
    given = search("qwen3-30b-a3b", "H200", [1], engine=engine, page_size=64, **ASK)
    assert given.page_size == 64 and given.to_dict()["prefix_cached_tokens"] == 960


def test_the_search_cli_plan_command_says_the_page(run):
    """search --engine sglang: its plan command names page 1 (it had no page: plan under
    --engine-defaults none ran 16) and gives the best point's figures."""
    args = ["search", "qwen3-30b-a3b", "-H", "H200", "--gpus", 1, "--isl", 2000, "--osl", 100,
            "--prefix-cache-hit", 0.5, "--modes", "aggregated", "--kv-dtypes", "bf16",
            "--engine", "sglang", "--format", "json"]  # fmt: skip
    doc = json.loads(run(*args)[0])
    assert doc["page_size"] == 1 and "--page-size 1" in doc["plan_command"]
    planned = json.loads(run(*doc["plan_command"].split()[1:], "--format", "json")[0])
    for key in ("ttft_s", "tpot_s", "output_tokens_per_s"):
        assert planned[key] == pytest.approx(doc["best"][key], rel=1e-6), key
