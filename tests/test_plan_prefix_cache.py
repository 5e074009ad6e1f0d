"""Prefix caching in ``plan`` (``prefix_cache_hit``, ``--prefix-cache-hit``): the share of each
prompt's tokens whose KV is found cached. The prefill computes the rest, its attention reading
the cached keys, timed as the step model times a chunk of a chunked prefill after the chunks
before it; decode is unchanged; the KV memory still holds every running request's whole prompt (an
upper bound on the running requests' KV, prefixes kept for others not counted, said in the
output); a disaggregated prompt's whole KV crosses to the decode pool.
"""

from __future__ import annotations

import json
import math

import pytest

from mlacalc.cli import main
from mlacalc.serving.gpu_step import StepModel
from mlacalc.serving.plan import PREFIX_CACHE_MEMORY, plan
from mlacalc.serving.plan_checks import check_request, prefix_cached_tokens
from mlacalc.serving.scheduler import with_engine_defaults
from mlacalc.words.errors import InvalidArgumentError

#: plan's figures before prefix caching was added (main at b0c4062), which a hit of 0 keeps;
#: refreshed when cuBLAS's persistent GEMMs balanced their last wave (gemm_time.BALANCED_WAVES,
#: gemm:bf16 refitted: llama-3-8b TTFT 60.54 -> 59.93 ms in flight, qwen3 chunked 141.5 -> 137.8),
#: and when TensorRT-LLM's bf16 grouped decode ran MMHA below XQA's block threshold (60f690f,
#: attention_decode refitted: in flight 59.93 -> 59.99 ms, chunked 137.8 -> 138.3 ms), and when
#: TensorRT-LLM's MMHA and mma.sync XQA overlapped more with the units an SM runs in turn
#: (attention_time.turn_overlap: in flight TPOT 12.53 -> 12.57 ms, chunked 20.38 -> 20.45 ms),
#: and when its bf16 decode took narrow_head_s less a call at head dims 64 and 192
#: (attention_time.NARROW_HEAD_DIMS; attention_decode:bf16 refitted, its other terms moved:
#: arrivals TPOT 7.087 -> 7.105 ms, in flight 12.573 -> 12.577 ms), and when TensorRT-LLM's
#: mma.sync XQA split the whole cache by its own count and merged in the kernel
#: (attention_time.xqa_splits; attention_decode:bf16 refitted: arrivals TPOT 7.105 -> 7.203
#: ms, in flight 12.577 -> 12.747 ms, chunked 20.62 -> 20.94 ms), and when TensorRT-LLM's
#: MMHA fallback ran its elements on a wave's SMs (c74655fa; attention_decode refitted in
#: default: in flight TPOT 12.7466 -> 12.7442 ms, chunked 20.938 -> 20.935 ms), and when the
#: open loop took whole steps to its fixed point (figures.open_loop, both stopping within 1e-5
#: of it: arrivals TTFT 54.429104 -> 54.429118 ms, TPOT 7.2020719 -> 7.2020813 ms)
TODAY = {
    "inflight": (
        dict(model="llama-3-8b", hardware="H200", gpus=1, isl=2048, osl=256, concurrency=32),
        dict(ttft_s=0.06021314778270781, tpot_s=0.012744211551765264),
        dict(output_tokens_per_s=2474.9341216857056, prefill_s=0.04195520477066293),
    ),
    "arrivals": (
        dict(model="llama-3-8b", hardware="H200", gpus=1, isl=2048, osl=256, request_rate=4),
        dict(ttft_s=0.05442911768772068, tpot_s=0.0072020813386519215),
        dict(output_tokens_per_s=1024.0, prefill_s=0.04195520477066293),
    ),
    "chunked": (
        dict(
            model="qwen3-30b-a3b",
            hardware="H200",
            gpus=2,
            isl=4096,
            osl=512,
            concurrency=64,
            chunked_prefill=1024,
        ),
        dict(ttft_s=0.14247507846079763, tpot_s=0.020935374533792746),
        dict(output_tokens_per_s=3022.752336939513, prefill_chunks_s=0.10644342427305167),
    ),
    "disaggregated": (
        dict(
            model="qwen3-30b-a3b",
            hardware="H200",
            gpus=2,
            isl=4096,
            osl=512,
            concurrency=64,
            mode="disaggregated",
            prefill_gpus=2,
        ),
        # 2 + 2 GPUs of one H200 node: the KV transfer goes over NVLink, a rank's share (was
        # the whole cache over the network, 10.07 ms)
        dict(
            ttft_s=0.06184763815250051,
            tpot_s=0.015457149218604797,
            kv_transfer_s=0.000645462038095238,
        ),
        dict(output_tokens_per_s=4108.372343758322, prefill_pool_requests_per_s=24.18326050632421),
    ),
}


def _plan(case: dict, **extra):
    case = dict(case, **extra)
    return plan(case.pop("model"), case.pop("hardware"), case.pop("gpus"), **case)


@pytest.mark.parametrize("name", sorted(TODAY))
def test_no_hit_is_todays_figures(name):
    """A hit of 0 (the default) gives the figures plan gave before the option, to the last
    digit, aggregated (in flight, arrivals, chunked) and disaggregated."""
    case, *figures = TODAY[name]
    for p in (_plan(case), _plan(case, prefix_cache_hit=0.0)):
        for want in figures:
            assert {k: getattr(p, k) for k in want} == pytest.approx(want, rel=1e-12, abs=0)
        assert p.prefix_cache_hit == 0.0 and p.prefix_cached_tokens == 0
        assert p.prefix_cache_memory is None


ONE = dict(isl=4096, osl=256, concurrency=1)


def _step_model(**args):
    """The checked request and decode pool's step model of plan("llama-3-8b", "H200", 1,
    **args), as plan builds them."""
    full = {**plan.__kwdefaults__, "model": "llama-3-8b", "hardware": "H200", "gpus": 1, **args}
    req = check_request(**with_engine_defaults(full))
    return req, StepModel(
        req.m, req.lay, req.sized, req.kv, req.hw, req.profile, **req.step_model_args()
    )


def test_a_hit_prompt_is_the_last_chunk_of_a_chunked_prefill():
    """A 4,096-token prompt with 3,072 found cached (hit 0.75) is timed as the last 1,024-token
    chunk of a chunked prefill of it: one step of 1,024 new tokens after 3,072 cached
    (``pf_pre``). Chunked at 1,024, the cached prompt's one chunk step equals the fourth of the
    uncached prompt's four (each beside the one decode sequence at concurrency 1), and alone
    (``prefill_s``) the chunk step alone."""
    _, sm = _step_model(**ONE, chunked_prefill=1024)
    decode = dict(dec_B=1.0, dec_q=1, dec_S=4096 + 256 / 2)
    chunks = [
        float(sm.step(**decode, pf_N=1.0, pf_q=1024, pf_pre=1024 * j).seconds[0]) for j in range(4)
    ]
    whole = plan("llama-3-8b", "H200", 1, **ONE, chunked_prefill=1024)
    hit = plan("llama-3-8b", "H200", 1, **ONE, chunked_prefill=1024, prefix_cache_hit=0.75)
    assert whole.prefill_chunks == 4 and hit.prefill_chunks == 1
    assert whole.prefill_chunks_s == pytest.approx(sum(chunks), rel=1e-12)
    assert hit.prefill_chunks_s == pytest.approx(chunks[-1], rel=1e-12)
    alone = float(sm.step(pf_N=1.0, pf_q=1024, pf_pre=3072).seconds[0])
    unchunked = plan("llama-3-8b", "H200", 1, **ONE, prefix_cache_hit=0.75)
    assert unchunked.prefill_s == pytest.approx(alone, rel=1e-12)
    # the attention reads the cached keys: more than a 1,024-token prompt of its own
    assert unchunked.prefill_s > plan("llama-3-8b", "H200", 1, isl=1024, osl=256).prefill_s


@pytest.mark.parametrize("mode", ["aggregated", "disaggregated"])
def test_a_hit_speeds_the_prompt_not_the_decode_step_nor_the_memory(mode):
    """TTFT and the prefill fall with the hit, the prefill pool's rate rises (its pass
    batches the prompts' computed tokens); the decode step at the batch (all 64 in flight
    running, aggregated; the arrivals' decode batch, disaggregated), the largest batch and
    the KV transfer (the whole prompt's KV crosses to the decode pool) stay; the output says
    the hit and the memory's assumption, in the JSON's stable keys."""
    if mode == "disaggregated":
        args = dict(isl=4096, osl=512, request_rate=8.0, mode=mode, prefill_gpus=2)
    else:
        args = dict(isl=4096, osl=512, concurrency=64)
    plans = [plan("qwen3-30b-a3b", "H200", 2, **args, prefix_cache_hit=h) for h in (0.0, 0.5, 0.9)]
    assert plans[0].ttft_s > plans[1].ttft_s > plans[2].ttft_s
    assert plans[0].prefill_s > plans[1].prefill_s > plans[2].prefill_s
    # floor(0.9 x 4096) = 3686 (before), rounded down to whole 16-token pages: 3680
    assert [p.prefix_cached_tokens for p in plans] == [0, 2048, 3680]
    for p in plans[1:]:
        assert p.decode_step_s == plans[0].decode_step_s
        assert p.max_batch == plans[0].max_batch
        assert p.kv_bytes_per_sequence_per_gpu == plans[0].kv_bytes_per_sequence_per_gpu
        assert p.kv_transfer_s == plans[0].kv_transfer_s
        assert p.prefix_cache_memory == PREFIX_CACHE_MEMORY
        # what is counted, exactly: the running requests' whole prompts; a prefix kept for a
        # request not running is not (the words called the count "an upper bound on the
        # cache", false for another turn's prefix or a prefill pool's radix cache)
        assert "upper bound on the running requests' KV" in p.prefix_cache_memory
        assert "prefixes kept for requests not running" in p.prefix_cache_memory
        d = p.to_dict()
        assert d["prefix_cache_hit"] == p.prefix_cache_hit
        assert d["prefix_cached_tokens"] == p.prefix_cached_tokens
    if mode == "disaggregated":
        rates = [p.prefill_pool_requests_per_s for p in plans]
        assert rates[0] < rates[1] < rates[2]
        assert plans[0].tpot_s == plans[2].tpot_s  # the decode pool carries no prompts
    else:  # the others' prompts take less of each gap
        assert plans[0].tpot_s > plans[1].tpot_s > plans[2].tpot_s


def test_cached_tokens_read_the_hit_as_written_and_keep_the_last_token():
    """0.29 of 100 tokens is 29 (not 28 from 0.29 x 100 = 28.999...); 0.999 of 10 tokens is
    9: the last token is always computed."""
    req, _ = _step_model(isl=100, osl=8, prefix_cache_hit=0.29, page_size=1)
    assert (req.cached_tokens, req.computed_tokens) == (29, 71)
    req, _ = _step_model(isl=10, osl=8, prefix_cache_hit=0.999, page_size=1)
    assert (req.cached_tokens, req.computed_tokens) == (9, 1)


def test_cached_tokens_are_whole_pages():
    """An engine finds whole pages cached (vLLM's blocks, SGLang's radix cache at its page
    size): vLLM at isl 1,234, hit 0.7, page size 64 caches 832 tokens (863 before, a trial's
    find), plan and search by one rule, and the text says so where the pages drop tokens."""
    assert prefix_cached_tokens(0.7, 1234, 64) == 832
    assert prefix_cached_tokens(0.7, 1234) == 863  # page size 1: the hit alone
    assert prefix_cached_tokens(0.99, 100, 16) == 96  # 99 (the last token kept), to 96
    p = plan(
        "qwen3-30b-a3b", "H200", 2, engine="vllm", isl=1234, osl=64, concurrency=8,
        prefix_cache_hit=0.7, page_size=64,
    )  # fmt: skip
    assert p.prefix_cached_tokens == 832
    assert "832 of 1,234 tokens found cached (rounded down to whole 64-token pages)" in (
        p.prefix_cache_text()
    )
    even = plan("qwen3-30b-a3b", "H200", 2, isl=4096, osl=64, concurrency=8, prefix_cache_hit=0.75)
    assert "pages" not in even.prefix_cache_text()  # 3,072: whole 16-token pages already


BAD = [-0.1, 1, 1.0, 1.5, math.nan, math.inf, "50%", "half", True]


def test_a_hit_of_none_is_no_prefix_cache():
    """None is 0, as other optional arguments take None (it was refused, a trial's find)."""
    none = plan("llama-3-8b", "H200", 1, isl=1024, osl=64, concurrency=8, prefix_cache_hit=None)
    zero = plan("llama-3-8b", "H200", 1, isl=1024, osl=64, concurrency=8, prefix_cache_hit=0)
    assert none.prefix_cache_hit == 0.0 and none.to_dict() == zero.to_dict()


@pytest.mark.parametrize("value", BAD, ids=repr)
def test_a_hit_outside_0_to_1_is_refused_in_one_line(value):
    with pytest.raises(InvalidArgumentError) as e:
        plan("llama-3-8b", "H200", 1, isl=1024, osl=64, prefix_cache_hit=value)
    text = str(e.value)
    assert text.startswith("prefix_cache_hit: must be a number in [0, 1)") and "\n" not in text


@pytest.mark.parametrize("value", ["-0.1", "1", "1.5", "nan", "inf", "50%", "half", ""])
def test_the_cli_refuses_a_hit_outside_0_to_1_in_one_line(value, capsys):
    args = ["plan", "llama-3-8b", "-H", "H200", "--gpus", "1", "--isl", "1024", "--osl", "64"]
    assert main([*args, "--prefix-cache-hit", value]) == 2
    err = capsys.readouterr().err.strip()
    assert "--prefix-cache-hit" in err and "must be a number in [0, 1)" in err
    assert len(err.splitlines()) == 1


def test_a_hit_without_a_request_mix_is_refused():
    with pytest.raises(InvalidArgumentError, match="prefix_cache_hit: applies to serving"):
        plan("llama-3-8b", "H200", 1, prefix_cache_hit=0.5)


def test_the_cli_says_the_hit_and_the_memorys_assumption(capsys):
    args = ["plan", "llama-3-8b", "-H", "H200", "--gpus", "1", "--isl", "4096", "--osl", "256"]
    hit = ["--concurrency", "8", "--prefix-cache-hit", "0.75"]
    assert main([*args, *hit, "--format", "markdown"]) == 0  # rows unwrapped
    out = " ".join(capsys.readouterr().out.split())
    assert "0.75 of each prompt: 3,072 of 4,096 tokens found cached, 1,024 computed" in out
    assert "prefill of one 4,096-token prompt, 3,072 found cached (causal" in out
    assert " ".join(PREFIX_CACHE_MEMORY.split()) in out
    assert main([*args, "--prefix-cache-hit", "0.75", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["prefix_cache_hit"] == 0.75 and doc["prefix_cached_tokens"] == 3072
    assert doc["prefix_cache_memory"] == PREFIX_CACHE_MEMORY
    assert main([*args, "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["prefix_cache_hit"] == 0.0 and doc["prefix_cache_memory"] is None


def test_a_hit_that_caches_no_token_says_so_and_minus_zero_is_zero(capsys):
    """A hit that rounds to no cached token says so (it read "0 of 1 tokens found cached, 1
    computed" at isl 1, and "0 of 4,096 tokens" at a hit of 1e-9), one token is singular, and
    --prefix-cache-hit -0.0 comes back as 0.0 (it was echoed as -0.0 in the JSON)."""
    args = ["plan", "llama-3-8b", "-H", "H200", "--gpus", "1", "--osl", "256"]
    tiny = plan("llama-3-8b", "H200", 1, isl=1, osl=256, concurrency=32, prefix_cache_hit=0.5)
    assert tiny.prefix_cache_text() == (
        "0.5 of each prompt rounds to no token found cached (of 1 token): all computed"
    )
    small = plan("llama-3-8b", "H200", 1, isl=4096, osl=256, concurrency=8, prefix_cache_hit=1e-9)
    assert small.prefix_cache_text() == (
        "1e-09 of each prompt rounds to no token found cached (of 4,096 tokens): all computed"
    )
    two = plan("llama-3-8b", "H200", 1, isl=2, osl=256, concurrency=8, prefix_cache_hit=0.5)
    assert two.prefix_cache_text() == (  # 1 token, not a whole 16-token page
        "0.5 of each prompt rounds to no whole 16-token page found cached (of 2 tokens): "
        "all computed"
    )
    two = plan(
        "llama-3-8b", "H200", 1, isl=2, osl=256, concurrency=8, prefix_cache_hit=0.5, page_size=1
    )
    assert two.prefix_cache_text() == "0.5 of each prompt: 1 of 2 tokens found cached, 1 computed"
    assert main([*args, "--isl", "4096", "--prefix-cache-hit", "-0.0", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert math.copysign(1.0, doc["prefix_cache_hit"]) == 1.0 and doc["prefix_cache_hit"] == 0
    assert (
        math.copysign(
            1.0,
            plan(
                "llama-3-8b", "H200", 1, isl=64, osl=8, prefix_cache_hit=-0.0, concurrency=1
            ).prefix_cache_hit,
        )
        == 1.0
    )


def test_the_cli_says_a_disaggregated_transfer_carries_the_whole_prompt(capsys):
    args = ["plan", "qwen3-30b-a3b", "-H", "H200", "--gpus", "2", "--isl", "4096", "--osl", "512"]
    pool = ["--mode", "disaggregated", "--prefill-gpus", "2", "--format", "markdown"]
    assert main([*args, *pool, "--prefix-cache-hit", "0.75"]) == 0
    out = capsys.readouterr().out
    assert "| KV transfer per request (the whole prompt's KV, cached rows too) |" in out
    assert main([*args, *pool]) == 0
    assert "| KV transfer per request |" in capsys.readouterr().out
    # a hit that rounds to no cached token (review10 F9): no cached rows to carry, not said
    assert main([*args, *pool, "--prefix-cache-hit", "0.0002"]) == 0
    out = capsys.readouterr().out
    assert "found cached (of 4,096 tokens): all computed" in out
    assert "| KV transfer per request |" in out and "cached rows too" not in out
