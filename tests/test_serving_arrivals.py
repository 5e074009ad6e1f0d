"""Random arrivals into a continuous-batching engine (mlacalc.serving.arrivals), checked
against a direct simulation of the same engine, and the planner's use of it."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mlacalc.serving.arrivals import step_chain
from mlacalc.serving.plan import plan
from mlacalc.words.errors import InvalidArgumentError


def _simulate(t: np.ndarray, rate: float, steps: int, seed: int = 0) -> tuple[float, float]:
    """Run the engine step by step with Poisson arrival times: each step carries every prompt
    that arrived during the step before it (at most len(t) - 1; the rest wait). Returns the
    mean time from arrival to the end of the step that runs it, and the mean step."""
    rng = np.random.default_rng(seed)
    k_max = len(t) - 1
    now, waiting, lengths, ttfts = 0.0, [], [], []
    arrivals = np.cumsum(rng.exponential(1 / rate, size=int(rate * steps * t[-1]) + 1000))
    nxt = 0
    for _ in range(steps):
        take, waiting = waiting[:k_max], waiting[k_max:]
        length = t[len(take)]
        end = now + length
        ttfts += [end - a for a in take]
        lengths.append(length)
        while nxt < len(arrivals) and arrivals[nxt] < end:
            waiting.append(arrivals[nxt])
            nxt += 1
        now = end
    return float(np.mean(ttfts)), float(np.mean(lengths))


@pytest.mark.parametrize("rate", [5.0, 15.0, 25.0])
def test_chain_matches_a_simulation(rate):
    t = np.array([0.010, 0.025, 0.045, 0.060, 0.080])
    c = step_chain(t, rate)
    ttft, mean_step = _simulate(t, rate, 60_000)
    assert c.ttft_s == pytest.approx(ttft, rel=0.03)
    assert c.mean_step_s == pytest.approx(mean_step, rel=0.02)
    # an arrival waits more than half the mean step: it falls in long steps more often
    assert c.wait_s > c.mean_step_s / 2


def test_chain_without_arrivals_is_the_plain_steps():
    t = np.array([0.01, 0.03, 0.05])
    c = step_chain(t, 1e-9)
    assert (c.wait_s, c.own_step_s, c.mean_step_s) == pytest.approx((0.005, 0.03, 0.01))
    assert c.prompts_per_step == pytest.approx(0.0, abs=1e-6)


def test_output_lag_adds_one_step_to_ttft_only():
    kw = dict(isl=467, osl=256, request_rate=4.0, weight_dtype="bf16")
    base = plan("llama-3-8b", "H100-SXM", 1, **kw)
    lag = plan("llama-3-8b", "H100-SXM", 1, output_lag_steps=1, **kw)
    # (requests stay a step longer: Little's law runs a hair more of them at once, which can
    # move a GEMM to its next tile or split: a few tenths of a percent)
    assert lag.tpot_s == pytest.approx(base.tpot_s, rel=5e-3)
    assert lag.ttft_s - base.ttft_s == pytest.approx(lag.tpot_s, rel=1e-2)
    with pytest.raises(InvalidArgumentError, match="output_lag_steps"):
        plan("llama-3-8b", "H100-SXM", 1, output_lag_steps=-1, **kw)


def test_an_idle_engine_starts_a_prompt_at_once():
    """At a vanishing request rate the engine idles: TTFT is the prompt's prefill alone."""
    p = plan("llama-3-8b", "H100-SXM", 1, isl=467, osl=16, request_rate=0.01, weight_dtype="bf16")
    assert p.ttft_s == pytest.approx(p.prefill_s, rel=0.01)
    busy = plan("llama-3-8b", "H100-SXM", 1, isl=467, osl=16, request_rate=16, weight_dtype="bf16")
    assert busy.ttft_s > p.ttft_s + busy.decode_step_s / 4
    assert math.isfinite(busy.ttft_s)


def test_a_separate_prefill_pass():
    """prefill_pass="separate": each prompt costs the running sequences its whole prefill
    (ITL longer than with one shared pass), and an idle engine's TTFT is the prefill and one
    decode pass."""
    kw = dict(isl=467, osl=16, weight_dtype="bf16")
    fused = plan("llama-3-70b", "H100-SXM", 4, request_rate=16, **kw)
    apart = plan("llama-3-70b", "H100-SXM", 4, request_rate=16, prefill_pass="separate", **kw)
    assert apart.tpot_s > fused.tpot_s * 1.2
    idle = plan("llama-3-8b", "H100-SXM", 1, request_rate=0.01, prefill_pass="separate", **kw)
    assert idle.ttft_s == pytest.approx(idle.prefill_s + idle.decode_step_s, rel=0.01)
    with pytest.raises(InvalidArgumentError, match="prefill_pass"):
        plan("llama-3-8b", "H100-SXM", 1, prefill_pass="apart", **kw)
