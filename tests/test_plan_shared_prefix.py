"""A shared prefix (``shared_prefix``, ``--shared-prefix``): the first tokens of every prompt
alike (a RAG or agent deployment's system prompt or document set). Its pages are held once per
attention group and counted once in the KV budget, so the largest batch grows; every request
after the first finds it cached, so the prefill computes the rest (as a prefix-cache hit of the
same tokens). 0 is no shared prefix: every figure as without.
"""

from __future__ import annotations

import json

import pytest

from mlacalc.cli import main
from mlacalc.serving.plan import SHARED_PREFIX_MEMORY, plan
from mlacalc.serving.plan_checks import prefix_cached_tokens
from mlacalc.serving.search import search
from mlacalc.words.errors import InvalidArgumentError

#: llama-3-8b on one H100 (bf16 cache, page 16): 8,000-token prompts, 300 out
MIX = dict(isl=8000, osl=300, concurrency=64)
#: llama-3-8b's cache a token on one GPU: K and V, 32 layers, 8 KV heads of 128, bf16
PER_TOKEN = 2 * 32 * 8 * 128 * 2


def _plan(**kw):
    return plan("llama-3-8b", "H100-SXM", 1, **{**MIX, **kw})


def test_largest_batch_is_the_budget_less_the_prefix_over_each_requests_own_tokens():
    """By hand: the prefix's 6,000 tokens (375 whole 16-token pages) once, each request its
    other 8,304 - 6,000 tokens (8,300 in whole pages)."""
    p = _plan(shared_prefix=6000)
    assert p.kv_bytes_per_token_per_gpu == PER_TOKEN and p.page_size == 16
    shared = 6000 * PER_TOKEN
    own = (8304 - 6000) * PER_TOKEN
    assert p.kv_bytes_shared_prefix_per_gpu == shared == p.memory["kv_shared_prefix"]
    assert p.kv_bytes_per_sequence_per_gpu == 8304 * PER_TOKEN  # the whole sequence, as before
    assert p.max_batch == (p.kv_budget_per_gpu_bytes - shared) // own
    assert (p.shared_prefix, p.shared_prefix_tokens) == (6000, 6000)
    assert p.prefix_cache_memory == SHARED_PREFIX_MEMORY


def test_a_shared_prefix_makes_the_batch_larger_and_the_prefill_shorter():
    a, b = _plan(), _plan(shared_prefix=6000)
    assert b.max_batch > 3 * a.max_batch  # 56 -> 200
    assert b.prefill_s < a.prefill_s / 2


def test_the_prefill_computes_the_tokens_after_the_prefix_as_a_hit_of_the_same_tokens():
    """6,000 of 8,000 found cached: the prefill the hit 0.75 times (its batch is not asked)."""
    shared = _plan(shared_prefix=6000, concurrency=None, batch=None)
    hit = _plan(prefix_cache_hit=0.75, concurrency=None, batch=None)
    assert shared.prefix_cached_tokens == hit.prefix_cached_tokens == 6000
    assert shared.prefill_s == hit.prefill_s
    assert "the shared prefix: 6,000 of 8,000 tokens found cached" in shared.prefix_cache_text()


def test_a_hit_beside_the_prefix_takes_the_larger_and_pages_round_down():
    assert prefix_cached_tokens(0.9, 8000, 16, 6000) == 7200  # the hit's, larger
    assert prefix_cached_tokens(0.5, 8000, 16, 6000) == 6000  # the prefix's
    assert prefix_cached_tokens(0.0, 8000, 16, 6007) == 6000  # whole pages
    p = _plan(shared_prefix=6007)
    assert p.shared_prefix_tokens == 6000 and p.kv_bytes_shared_prefix_per_gpu == 6000 * PER_TOKEN
    assert "rounded down to whole 16-token pages" in p.prefix_cache_text()


def test_held_once_per_dp_attention_rank():
    """DeepSeek-V3 on 8 H200 under DP-attention: each rank (a GPU) holds the prefix's latent
    once, its batch the rank's room less the prefix over each request's own tokens."""
    kw = dict(tp=1, dp_attention=True, ep=8, kv_dtype="fp8", isl=32768, osl=1024)
    a = plan("deepseek-v3", "H200", 8, **kw, batch=None)
    p = plan("deepseek-v3", "H200", 8, **kw, shared_prefix=30000)
    full = p.kv_bytes_per_token_full_layers_per_gpu
    shared = p.shared_prefix_tokens * full
    assert p.kv_bytes_shared_prefix_per_gpu == shared
    own = p.kv_bytes_per_sequence_per_gpu - shared
    assert p.max_batch == (p.kv_budget_per_gpu_bytes - shared) // own * 8 > a.max_batch


def test_no_shared_prefix_is_every_figure_as_without():
    a = _plan().to_dict()
    b = _plan(shared_prefix=0).to_dict()
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
    assert (a["shared_prefix"], a["kv_bytes_shared_prefix_per_gpu"]) == (0, 0)
    assert "kv_shared_prefix" not in a["memory"] and a["prefix_cache_memory"] is None


def test_disaggregated_decode_pool_holds_it_once_and_the_transfer_stays_whole():
    kw = dict(mode="disaggregated", prefill_gpus=1, concurrency=64)
    a = plan("llama-3-8b", "H100-SXM", 1, isl=8000, osl=300, **kw)
    b = plan("llama-3-8b", "H100-SXM", 1, isl=8000, osl=300, shared_prefix=6000, **kw)
    assert b.max_batch > a.max_batch
    assert b.kv_transfer_s == a.kv_transfer_s  # each request's whole KV crosses


@pytest.mark.parametrize(
    ("value", "words"),
    [
        (-1, "whole number of tokens >= 0"),
        (1.5, "whole number of tokens >= 0"),
        ("100", "whole number of tokens >= 0"),
        (True, "whole number of tokens >= 0"),
        (8000, "fewer tokens than isl (8,000)"),
        (9000, "fewer tokens than isl (8,000)"),
    ],
)
def test_refused_naming_the_argument_and_the_fix(value, words):
    with pytest.raises(InvalidArgumentError, match="shared_prefix") as e:
        _plan(shared_prefix=value)
    assert words in str(e.value)


def test_refused_without_a_request_mix():
    with pytest.raises(InvalidArgumentError, match="shared_prefix: applies to serving"):
        plan("llama-3-8b", "H100-SXM", 1, shared_prefix=100)


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("-5", "not a token count >= 0"),
        ("abc", "not a token count >= 0"),
        ("1.5", "not a whole number of tokens"),
        ("8000", "fewer tokens than isl"),
    ],
)
def test_cli_refusals_are_one_line_naming_the_option(capsys, value, words):
    args = ["plan", "llama-3-8b", "-H", "H100-SXM", "--gpus", "1", "--isl", "8000", "--osl"]
    assert main([*args, "300", "--shared-prefix", value]) == 2
    err = capsys.readouterr().err.strip()
    assert "--shared-prefix" in err and words in err and len(err.splitlines()) == 1


def test_search_holds_it_once_as_plan_does():
    kw = dict(isl=8000, osl=300, kv_dtypes=["bf16"], weight_dtypes=["bf16"])
    a = search("llama-3-8b", "H100-SXM", [1], **kw)
    zero = search("llama-3-8b", "H100-SXM", [1], shared_prefix=0, **kw)
    da, dz = a.to_dict(), zero.to_dict()
    da.pop("seconds", None), dz.pop("seconds", None)
    assert json.dumps(da, sort_keys=True, default=str) == json.dumps(
        dz, sort_keys=True, default=str
    )
    b = search("llama-3-8b", "H100-SXM", [1], shared_prefix=6000, **kw)
    assert "--shared-prefix 6000" in b.plan_command
    assert b.to_dict()["prefix_cached_tokens"] == 6000
    best = b.best
    assert best["kv_shared_prefix_bytes"] == 6000 * PER_TOKEN
    assert max(p["batch_per_group"] for p in b.points) > max(p["batch_per_group"] for p in a.points)
    # the point's figures are plan's at its batch
    p = _plan(shared_prefix=6000, concurrency=best["concurrency"], weight_dtype="bf16")
    assert p.output_tokens_per_s == pytest.approx(best["output_tokens_per_s"], rel=1e-9)
