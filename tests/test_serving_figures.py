"""Serving figures a new-user trial found wrong (docs/serving.md, "Serving figures"): chunked
prefill's TPOT against the whole-prompt plan's, TTFT against the prefill of one prompt, and
what an overloaded deployment serves. Each test failed before its fix."""

from __future__ import annotations

import math

import pytest

from mlacalc.serving.figures import chunked_figures
from mlacalc.serving.plan import duration_text, plan

LONG = dict(isl=32000, osl=2000, concurrency=4)  # Llama-3-8B on one H100: 4 long prompts


def _llama(**kw):
    return plan("llama-3-8b", "H100-SXM", 1, **kw)


@pytest.fixture(scope="module")
def whole():
    return _llama(**LONG)


# ------------------------------------------------- 1: chunked TPOT counts the prompt's work
def test_a_chunk_beyond_the_prompt_is_the_whole_prompt_plan(whole):
    """A budget of the prompt or more runs it in one step: the figures are the whole-prompt
    plan's (they spread P tokens over every step before, 17.6 ms against 14.9)."""
    p = _llama(**LONG, chunked_prefill=65536)
    assert p.tpot_s == pytest.approx(whole.tpot_s, rel=1e-9)
    assert p.ttft_s == pytest.approx(whole.ttft_s, rel=1e-9)
    assert p.prefill_chunks == 1 and p.prefill_chunk_tokens == 32000  # the prompt's


@pytest.mark.parametrize("chunk", [512, 2048, 8192])
def test_chunked_tpot_adds_the_prompts_chunk_steps_as_the_whole_prompt_adds_its_step(whole, chunk):
    """One group, fewer than one chunk a step: the mean step is the decode step plus, per
    prompt started, what its chunk steps add over decode steps; the same work the whole
    prompt's step adds, so TPOT stays within a few percent of the whole-prompt plan's and
    the chunk size moves it (it did not move at all before)."""
    p = _llama(**LONG, chunked_prefill=chunk)
    n = p.running_batch_per_group / LONG["osl"]  # prompts started per step
    steps = math.ceil(LONG["isl"] / chunk)
    assert p.prefill_chunks == steps
    added = p.prefill_chunks_s - steps * p.decode_step_s
    assert p.tpot_s == pytest.approx(p.decode_step_s + n * added, rel=1e-9)
    assert p.tpot_s == pytest.approx(whole.tpot_s, rel=0.03)
    # TTFT: the wait for the step in progress (or the run of another prompt's chunks), then
    # the prompt's own steps
    assert p.prefill_chunks_s < p.ttft_s < 1.2 * p.prefill_chunks_s


def test_chunk_size_moves_the_figures(whole):
    small, large = _llama(**LONG, chunked_prefill=512), _llama(**LONG, chunked_prefill=8192)
    assert small.prefill_chunks_s > large.prefill_chunks_s  # 63 steps read the weights again
    assert small.ttft_s > large.ttft_s and small.tpot_s != large.tpot_s


def test_chunked_figures_at_full_load_and_the_wait():
    """Beyond one chunk step a step every step is the full-load step and a request waits
    half of it; below, the wait is E[T^2] / 2 E[T] over decode steps and prompt runs."""
    cycle, ttft = chunked_figures(2.0, 2, 1.0, 0.01, 0.05, 0.3)
    assert cycle == pytest.approx(0.05) and ttft == pytest.approx(0.025 + 0.3)
    n, steps, t, S = 0.01, 4, 0.01, 0.2
    cycle, ttft = chunked_figures(n, steps, n * steps, t, 0.05, S)
    assert cycle == pytest.approx((1 - n * steps) * t + n * S)
    wait = ((1 - n * steps) * t**2 + n * S**2) / (2 * cycle)
    assert ttft == pytest.approx(wait + S)


# ---------------------------------------------- 2: TTFT and the prefill of one prompt alone
def test_dp_attention_prefill_of_one_prompt_is_the_prompt_alone():
    """Under DP-attention the prefill row timed every group's experts with a prompt each
    (7.95 s where the prompt alone takes 6.3 s and TTFT was 5.97 s); the plan now shows the
    prompt alone and the chunk steps TTFT is made of."""
    p = plan("deepseek-v3", "H200", 8, dp_attention=True, ep=8, isl=32000, osl=1000,
             concurrency=8, chunked_prefill=8192)  # fmt: skip
    assert p.prefill_chunks == 4
    assert p.ttft_s > p.prefill_chunks_s
    # the kernel model prices the four chunk steps (each with the decode batch) within a few
    # percent of one pass of the whole prompt alone
    assert p.prefill_chunks_s == pytest.approx(p.prefill_s, rel=0.1)


def test_the_plan_prints_the_prompts_chunk_steps_under_ttft(run):
    """The table says what TTFT is made of (the prompt's chunk steps beside the decode batch)
    and that the prefill row is one pass of the prompt alone."""
    args = ["plan", "llama-3-8b", "-H", "H100-SXM", "--gpus", 1, "--isl", 32000, "--osl", 2000,
            "--concurrency", 4, "--chunked-prefill", 8192]  # fmt: skip
    text = " ".join(run(*args)[0].split())
    assert "prefill of one 32,000-token prompt (causal, one pass alone)" in text
    assert "of which the prompt's 4 chunk step(s) of 8,192 tokens (beside the decode batch)" in text
    assert "chunk step(s)" not in " ".join(run(*args[:-2])[0].split())


# ------------------------------------------------ 3: an overloaded deployment saturates
def test_an_overloaded_deployment_serves_its_capacity_at_the_largest_batch():
    """Requests arriving faster than served: the batch fills and the queue grows, and the
    deployment serves what its full batch does (a closed loop at the largest batch), never
    less as the rate grows (it fell from 1,000 to 100 output tokens/s before)."""
    mix = dict(isl=2000, osl=500, max_running=32)
    full = _llama(**mix, concurrency=32)
    rates = [_llama(**mix, request_rate=r) for r in (2.0, 5.0, 50.0, 1e6)]
    served = [p.output_tokens_per_s for p in rates]
    assert served == sorted(served)
    for p in rates[2:]:
        assert not p.sustainable and math.isinf(p.ttft_s)
        assert p.output_tokens_per_s == pytest.approx(full.output_tokens_per_s, rel=1e-9)
        assert p.tpot_s == pytest.approx(full.tpot_s, rel=1e-9)
        assert "at its largest batch (32 running)" in p.warnings[-1]


def test_requests_beyond_the_batch_warn_and_a_long_ttft_reads_in_minutes():
    p = _llama(isl=2000, osl=500, max_running=32, concurrency=5000)
    assert p.queued == 5000 - 32
    assert any("5,000 requests in flight exceed the 32" in w for w in p.warnings)
    assert p.ttft_s > 600 and p.ttft_text().endswith(" min")
    assert duration_text(7.4791) == "7,479.1 ms"
    assert duration_text(52.34) == "52.3 s"
    assert duration_text(3003.5345) == "50.1 min"


@pytest.mark.parametrize("rate", [0.02, 0.15])
def test_chunked_under_random_arrivals_stays_near_the_whole_prompt_plan(rate):
    """Under a request rate the chunked plan keeps the closed loop's steps and adds the M/D/1
    excess of its prefill runs (the closed loop's wait holds the rest of a run in progress):
    TPOT and TTFT within a few percent of the whole-prompt plan's arrivals chain (TPOT was
    1.3-1.4x it)."""
    mix = dict(isl=32000, osl=2000, request_rate=rate)
    whole, chunked = _llama(**mix), _llama(**mix, chunked_prefill=8192)
    assert chunked.sustainable and chunked.prefill_chunks == 4
    assert chunked.tpot_s == pytest.approx(whole.tpot_s, rel=0.05)
    assert chunked.ttft_s == pytest.approx(whole.ttft_s, rel=0.05)
    assert chunked.ttft_s > chunked.prefill_chunks_s
