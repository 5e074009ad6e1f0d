"""Plan and search arguments checked against physical bounds before any arithmetic, and the
figures of every plan finite and consistent. Each test is named after a defect it caught
(issue 26): a layout whose experts are split past their columns timed as NaN, a pipeline
stage of linear layers only dividing by zero, a KV budget printed negative, the arrivals model
building a matrix of (16384 / isl + 1)^2."""

from __future__ import annotations

import math

import pytest

import mlacalc
from mlacalc.words.errors import InvalidArgumentError


def _finite_figures(obj) -> list[str]:
    """The names of the float fields of a plan (or a search point) that are not finite."""
    items = obj.items() if isinstance(obj, dict) else vars(obj).items()
    return [k for k, v in items if isinstance(v, float) and not math.isfinite(v)]


def test_plan_with_experts_split_past_their_columns_is_refused_not_nan():
    # tp=1 with DP-attention on 4,096 GPUs and ep=1: each expert's 2,048 columns split 4,096
    # ways; the step, TTFT and TPOT were NaN and the plan said it fits
    with pytest.raises(InvalidArgumentError, match=r"^ep: .*split 4096 ways.*2048"):
        mlacalc.plan(
            "deepseek-v3", "H200", 4096, tp=1, dp_attention=True, isl=1000, osl=100,
            concurrency=4096,
        )  # fmt: skip


def test_search_on_4096_gpus_marks_no_nan_point_as_meeting_targets():
    r = mlacalc.search("deepseek-v3", "H200", [4096], isl=1000, osl=100, ttft=2.0, tpot=0.05)
    assert r.points
    for p in r.points:
        assert not _finite_figures(p), p
    assert all(p["tpot_s"] <= 0.05 and p["ttft_s"] <= 2.0 for p in r.points if p["meets_targets"])


@pytest.mark.parametrize(
    ("model", "gpus"), [("kimi-linear-48b-a3b", 8), ("qwen3-next-80b-a3b", 16)]
)
def test_plan_pipeline_stage_of_linear_layers_only_is_no_zero_division(model, gpus):
    # with pp = gpus the first stage held only linear layers: 0 cache bytes per token there
    p = mlacalc.plan(model, "H100-SXM", gpus, tp=1, pp=gpus)
    assert p.fits and p.kv_bytes_per_token_per_gpu > 0 and p.kv_tokens_per_gpu > 0
    # the fullest stage sizes the cache: no fewer bytes per token than with one stage per GPU
    one = mlacalc.plan(model, "H100-SXM", 1, tp=1, pp=1)
    assert p.kv_bytes_per_token_per_gpu <= one.kv_bytes_per_token_per_gpu
    assert not _finite_figures(p)


def test_plan_that_does_not_fit_reports_a_kv_budget_of_zero_not_negative():
    p = mlacalc.plan("deepseek-v3", "H100-SXM", 1)
    assert not p.fits
    assert p.kv_budget_per_gpu_bytes == 0 == p.memory["kv_budget"]


# ---- the arrivals model: bounded in memory and time for any request mix


def _chain_cost(t, rate):
    """(seconds, peak bytes Python allocated) of one step_chain."""
    import time
    import tracemalloc

    from mlacalc.serving.arrivals import step_chain

    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        chain = step_chain(t, rate)
        return chain, time.perf_counter() - t0, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("rate", [1e-6, 1.0, 1e4, 1e9])
def test_arrivals_chain_of_one_token_prompts_is_bounded_in_memory_and_time(rate):
    # isl 1: 16,385 states; the dense chain built (16385)^2 matrices (2 GB each) for minutes
    np = pytest.importorskip("numpy")
    t = 0.01 + 2e-5 * np.arange(16385)
    chain, seconds, peak = _chain_cost(t, rate)
    assert seconds < 3.0 and peak < 64 * 2**20
    figures = (chain.wait_s, chain.own_step_s, chain.mean_step_s, chain.prompts_per_step)
    assert all(math.isfinite(x) and x >= 0 for x in figures)
    assert t[0] <= chain.mean_step_s <= t[-1]


def _binned_and_exact(t, rate):
    from mlacalc.serving import arrivals

    binned = arrivals.step_chain(t, rate)
    exact_states, arrivals.EXACT_STATES = arrivals.EXACT_STATES, 10**6
    try:
        return binned, arrivals.step_chain(t, rate)
    finally:
        arrivals.EXACT_STATES = exact_states


@pytest.mark.parametrize(
    "rate",
    [
        1.0,  # idle
        1000.0,  # loaded: 17 prompts a step
        3500.0,  # saturated: every step the fullest
        pytest.param(2000.0, marks=pytest.mark.slow),  # 100 prompts a step
        pytest.param(2400.0, marks=pytest.mark.slow),  # near saturation: 600, in the bins
    ],
)
def test_arrivals_binned_chain_agrees_with_the_exact_one(rate):
    np = pytest.importorskip("numpy")
    binned, exact = _binned_and_exact(0.01 + 4e-4 * np.arange(801), rate)
    for name in ("wait_s", "own_step_s", "mean_step_s"):
        assert getattr(binned, name) == pytest.approx(getattr(exact, name), rel=5e-3)


def test_plan_with_one_token_prompts_under_a_request_rate_is_bounded_in_memory_and_time():
    # plan('llama-3-8b', 'H100-SXM', 1, isl=1, osl=1, request_rate=1.0) built two matrices of
    # (16385)^2 (4 GB) and ran for minutes; the step table was timed at all 16,385 prompt counts
    import time
    import tracemalloc

    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        p = mlacalc.plan("llama-3-8b", "H100-SXM", 1, isl=1, osl=1, request_rate=1.0)
        seconds, peak = time.perf_counter() - t0, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert seconds < 20 and peak < 128 * 2**20, (seconds, peak)
    assert p.fits and p.sustainable and not _finite_figures(p)
    assert 0 < p.tpot_s < p.ttft_s < 1


def test_search_with_one_token_prompts_is_bounded_in_time():
    # the app's search ran out of memory at isl 1 (every prefill pool timed at 16,384 passes)
    import time

    t0 = time.perf_counter()
    r = mlacalc.search("llama-3-8b", "H100-SXM", [1, 2], isl=1, osl=1)
    assert time.perf_counter() - t0 < 20
    assert r.best and all(not _finite_figures(p) for p in r.points)
