"""Chunked prefill under random arrivals: TTFT rises with the request rate, continuously up
to where the prompts' chunk steps saturate (then the queue grows without bound). A new-user
trial's Llama-3.3-70B, 4 H200 TP4 fp8, chunk 2,048, 2000 + 500 tokens: TTFT 2.813 s at
8.0/s, 0.295 s at 8.05/s (two formulas, M/D/1 on the runs below one chunk a step, passes of
whole prompts above, disagreeing ~10x at the seam)."""

from __future__ import annotations

import math

import pytest

from mlacalc.serving.plan import plan

LLAMA = "tests/data/hf-configs/llama-3.3-70b-instruct.config.json"
SETUP = dict(gpus=4, tp=4, weight_dtype="fp8", kv_dtype="fp8", chunked_prefill=2048, osl=500)


def _ttft(isl: int, rate: float) -> float:
    return plan(LLAMA, "H200", isl=isl, request_rate=float(rate), **SETUP).ttft_s


@pytest.mark.parametrize(
    "isl,rates",
    [
        (2000, (7.8, 7.95, 8.0, 8.05, 8.25)),  # one chunk a prompt; the seam near 8/s
        (8000, (1.8, 2.0, 2.1, 2.3)),  # four chunks a prompt
    ],
)
def test_ttft_does_not_fall_as_the_rate_rises(isl, rates):
    ttft = [_ttft(isl, r) for r in rates]
    assert any(math.isinf(t) for t in ttft), "the sweep should cross the chunk boundary"
    assert any(math.isfinite(t) for t in ttft)
    for lo, hi, r in zip(ttft, ttft[1:], rates[1:]):
        assert hi >= lo * (1 - 1e-9), (r, lo, hi)  # before: 2.813 s at 8.0/s, 0.295 at 8.05/s


def test_past_the_chunk_the_plan_says_it_is_not_sustained():
    # 8.05/s was past it before a step's chunk held the 48 tokens a 2,000-token prompt leaves
    # of 2,048 for the next prompt (chunk_hold 1.024)
    p = plan(LLAMA, "H200", isl=2000, request_rate=8.1, **SETUP)
    assert not p.sustainable and math.isinf(p.ttft_s)
    assert any("chunked prefill sustains" in w for w in p.warnings), p.warnings
    assert p.binding == "chunked prefill"


@pytest.mark.parametrize("rate", [30.0, 1000.0])
def test_an_open_loop_the_chunk_cannot_keep_up_with_binds_on_chunked_prefill(rate):
    """Llama-3.1-8B on one H100 under vLLM's 8,192-token chunk, 2000 + 20 tokens at 30/s: the
    chunk steps saturate with ~81 running while the KV cache holds 229; the binding named
    ``kv capacity`` (the open loop set no chunk bound); past the full batch's rate too."""
    p = plan("llama-3.1-8b", "H100-SXM", 1, isl=2000, osl=20, engine="vllm", request_rate=rate)
    assert not p.sustainable
    assert any("chunked prefill sustains" in w for w in p.warnings), p.warnings
    assert p.binding == "chunked prefill"
    assert p.max_batch > 2 * p.decode_running  # the cache holds more than runs


def test_closed_loop_ttft_does_not_fall_past_one_chunk_a_step():
    """A closed loop at isl 8,000 (four chunks a prompt): past one chunk step a step the wait
    was half a step, a quarter of the run's residual below it. Before: 124 in flight 0.678 s,
    128 0.512 s; after: 0.678, 0.680 s."""
    kw = dict(isl=8000, **SETUP)
    ttft = [plan(LLAMA, "H200", concurrency=c, **kw).ttft_s for c in (120, 124, 128, 160)]
    assert ttft == sorted(ttft), ttft


def test_short_prompts_share_a_step_as_the_engines_fill_its_budget():
    """Prompts far shorter than the chunk fill one step together (chunk_hold): 100-token
    prompts under vLLM's 8,192-token budget on one H100 were held one a step, so 150 requests
    a second were refused while the closed loop served 368 a second (and its throughput fell
    past 256 in flight: 461 -> 455 req/s at 1,024). Now a rate below the closed loop's is
    sustained, TTFT rising with it, and the closed loop's throughput rises with the load."""
    kw = dict(gpus=1, isl=100, osl=10, engine="vllm")
    served = [plan("llama-3-8b", "H100-SXM", concurrency=c, **kw).output_tokens_per_s / 10
              for c in (64, 256, 1024)]  # fmt: skip
    assert served[0] < served[1] < served[2]
    assert served[0] > 300
    ttft = []
    for rate in (100, 200, 300):
        p = plan("llama-3-8b", "H100-SXM", request_rate=float(rate), **kw)
        assert p.sustainable and math.isfinite(p.ttft_s), rate
        assert not [w for w in p.warnings if "chunk" in w], p.warnings
        ttft.append(p.ttft_s)
    assert ttft == sorted(ttft)


def test_ttfts_part_is_one_rule_for_the_cli_and_the_app():
    """Plan.ttft_parts: the prompt's chunk steps under TTFT, in the words `plan` prints and
    the app shows (two copies of them before)."""
    p = plan("llama-3-8b", "H100-SXM", gpus=1, isl=2000, osl=100, concurrency=8,
             chunked_prefill=512)  # fmt: skip
    ((label, s),) = p.ttft_parts()
    assert label == "of which the prompt's 4 chunk steps of 512 tokens (beside the decode batch)"
    assert s == p.prefill_chunks_s and 0 < s < p.ttft_s
    whole = plan("llama-3-8b", "H100-SXM", gpus=1, isl=2000, osl=100, concurrency=8)
    assert whole.ttft_parts() == []


def test_whole_prompts_arriving_past_their_passes_bind_the_prompt_passes():
    """Unchunked, an open loop whose prompts arrive faster than their passes alone finish them
    (TensorRT-LLM's 4 prompts of 2,000 tokens a pass on one H100: 24.1/s) is bound by the
    prompt passes, not the KV cache: 30/s was 'kv capacity' at 228 running (23.4/s served)
    and, with fp8's cache of 456, still served only 24.3/s. Below the passes' rate and past
    the full batch's (24/s at 228), the KV cache binds: fp8's larger cache serves 24/s; and
    the batch binds where it serves under half the passes' rate (their passes do not take
    most of the time)."""
    kw = dict(gpus=1, isl=2000, osl=20, engine="trtllm")
    for kv in ("bf16", "fp8"):
        p = plan("llama-3.1-8b", "H100-SXM", request_rate=30.0, kv_dtype=kv, **kw)
        assert not p.sustainable and p.binding == "prompt passes", (kv, p.binding)
        assert any("prompts' passes sustain" in w for w in p.warnings)
        assert p.output_tokens_per_s / 20 < 24.5
    kv_bound = plan("llama-3.1-8b", "H100-SXM", request_rate=24.0, **kw)
    assert not kv_bound.sustainable and kv_bound.binding == "kv capacity"
    assert plan("llama-3.1-8b", "H100-SXM", request_rate=24.0, kv_dtype="fp8", **kw).sustainable
    # a batch of 2 serves 9.2/s, under half the passes' rate: the batch binds, not the passes
    small = plan("llama-3.1-8b", "H100-SXM", request_rate=30.0, max_running=2, **kw)
    assert small.binding == "engine max_running"
