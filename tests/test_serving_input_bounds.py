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

# The defects these tests caught ran for minutes (a matrix of (16385)^2, a step table timed at
# every prompt count): a bound of the defect's size, not a speed figure (speed is measured in
# benchmarks/), so a busy machine does not fail it. Memory is the tight bound.
RAN_FOR_MINUTES_S = 120.0


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
    assert seconds < RAN_FOR_MINUTES_S and peak < 64 * 2**20
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
    assert seconds < RAN_FOR_MINUTES_S and peak < 128 * 2**20, (seconds, peak)
    assert p.fits and p.sustainable and not _finite_figures(p)
    assert p.tpot_s is None and 0 < p.ttft_s < 1  # one output token: no gap, no TPOT


def test_search_with_one_token_prompts_is_bounded_in_time():
    # the app's search ran out of memory at isl 1 (every prefill pool timed at 16,384 passes)
    import time

    t0 = time.perf_counter()
    r = mlacalc.search("llama-3-8b", "H100-SXM", [1, 2], isl=1, osl=1)
    assert time.perf_counter() - t0 < RAN_FOR_MINUTES_S
    assert r.best and all(not _finite_figures(p) for p in r.points)


# ---- plan and search arguments: a mutation suite (every argument, wrong types and bounds)

BAD = [None, True, 0, -1, 1.5, math.nan, math.inf, "x", "8", [], 10**12, 1e300, -0.0, {}]
SEARCH_ARGS = dict(ttft=None, tpot=None, weight_dtypes=None, kv_dtypes=("bf16",),
                   modes=("aggregated",), overlaps=("none",), batches=(8,),
                   memory_reserve=0.1, page_size=16, prefill_pass="fused",
                   output_lag_steps=0, profile=None)  # fmt: skip
PLAN_ARGS = ["tp", "dp", "pp", "ep", "seq_len", "batch", "page_size", "memory_reserve",
             "concurrency", "request_rate", "chunked_prefill", "mtp_tokens", "routing_imbalance",
             "redundant_experts", "output_lag_steps", "kv_dtype", "weight_dtype", "dp_attention",
             "overlap", "mode", "prefill_pass", "profile", "engine_memory"]  # fmt: skip


def _answer_or_one_line(call) -> object:
    """The result, or None after a one-line MlacalcError; any other exception fails."""
    try:
        return call()
    except mlacalc.MlacalcError as exc:
        assert "\n" not in str(exc), str(exc)
        return None


@pytest.mark.parametrize("name", sorted(SEARCH_ARGS))
def test_search_argument_mutated_is_an_answer_or_one_line(name):
    # page_size 0 or None and memory_reserve None were a raw ZeroDivisionError or TypeError
    for value in BAD:
        r = _answer_or_one_line(
            lambda value=value: mlacalc.search(
                "llama-3-8b", "H100-SXM", [1], isl=1000, osl=100, **{**SEARCH_ARGS, name: value}
            )
        )
        for p in r.points if r is not None else ():
            assert not _finite_figures(p), (name, value, p)


@pytest.mark.parametrize("name", PLAN_ARGS)
def test_plan_argument_mutated_is_an_answer_or_one_line(name):
    import warnings

    for value in BAD:
        mix = {} if name in ("seq_len", "batch") else dict(isl=1000, osl=100)
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)  # no overflow inside
            p = _answer_or_one_line(
                lambda value=value, mix=mix: mlacalc.plan(
                    "deepseek-v2-lite", "H100-SXM", 2, **mix, **{name: value}
                )
            )
        if p is not None:
            bad = [k for k in _finite_figures(p) if not (k in ("ttft_s", "queued") and
                                                        not p.sustainable)]  # fmt: skip
            assert not bad, (name, value, bad)


def test_plan_routing_imbalance_past_every_token_on_one_expert_is_refused():
    # 1e300 overflowed the step's arithmetic; the most is n_routed_experts / top-k
    with pytest.raises(InvalidArgumentError, match=r"^routing_imbalance: 33 is past .* 32"):
        mlacalc.plan("deepseek-v3", "H200", 8, ep=8, routing_imbalance=33.0)
    # ep 8: without expert ranks an imbalance is refused (tests/test_serving_ep_only.py)
    assert mlacalc.plan("deepseek-v3", "H200", 8, ep=8, routing_imbalance=32.0).fits


def test_cli_json_is_strict_json_even_for_an_unbounded_queue(capsys):
    # "NaN" and "Infinity" are no JSON; an unbounded TTFT is null
    import json

    from mlacalc.cli import main
    from mlacalc.render import render_json

    doc = {"ttft_s": math.inf, "x": [math.nan, 1.5], "n": 10**30}
    assert json.loads(render_json(doc)) == {"ttft_s": None, "x": [None, 1.5], "n": 10**30}
    args = ["plan", "llama-3-8b", "-H", "H100-SXM", "--gpus", "1", "--isl", "1000", "--osl",
            "100", "--request-rate", "1000", "--format", "json"]  # fmt: skip
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out, parse_constant=lambda c: pytest.fail(c))
    assert out["fits"] and out["ttft_s"] is None


def test_cli_plan_on_4096_gpus_with_experts_split_past_their_columns_prints_no_nan_ms(capsys):
    # it printed "nan ms" for the step, TTFT and TPOT and said the plan fits
    from mlacalc.cli import main

    args = ["plan", "deepseek-v3", "-H", "H200", "--gpus", "4096", "--tp", "1",
            "--dp-attention", "--isl", "1000", "--osl", "100", "--concurrency", "4096"]  # fmt: skip
    assert main(args) == 2
    captured = capsys.readouterr()
    assert captured.err.count("\n") == 1 and "--ep" in captured.err
    assert "nan" not in (captured.out + captured.err).lower()


def test_plan_chunked_prefill_of_one_token_chunks_is_bounded_and_agrees():
    # a 100,000-token prompt in chunks of 1 timed 100,000 steps: 30 s and 3 GB
    import time

    from mlacalc.serving import figures

    kw = dict(isl=8000, osl=100, chunked_prefill=4)
    sampled = mlacalc.plan("llama-3-8b", "H100-SXM", 2, **kw)
    most, figures._MOST_CHUNKS = figures._MOST_CHUNKS, 10**9
    try:
        exact = mlacalc.plan("llama-3-8b", "H100-SXM", 2, **kw)
    finally:
        figures._MOST_CHUNKS = most
    assert sampled.ttft_s == pytest.approx(exact.ttft_s, rel=1e-5)
    t0 = time.perf_counter()
    p = mlacalc.plan("llama-3-8b", "H100-SXM", 2, isl=100000, osl=1, chunked_prefill=1)
    assert time.perf_counter() - t0 < 20 and not _finite_figures(p) and p.ttft_s > 0  # defect: 30 s
