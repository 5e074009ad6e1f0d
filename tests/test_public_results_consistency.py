"""Every public result finite and physically consistent, over a spread of models, devices and
layouts (issue 26: a plan said it fits with NaN step, TTFT and TPOT; plans that do not fit
reported a KV budget of -69 GB). For each plan: memory parts sum to the totals, budgets and
counts non-negative, the largest batch's cache within the budget, times positive and finite
(TTFT unbounded only for a load the deployment does not sustain), tokens/s consistent with
the step; the kernels of a step finite; the same for the search's points, predict_time and
the report."""

from __future__ import annotations

import math
import random

import pytest

import mlacalc
from mlacalc.words.errors import InvalidArgumentError

MODELS = [
    "deepseek-v3",
    "llama-3-8b",
    "llama-3-70b",
    "qwen3-next-80b-a3b",
    "kimi-linear-48b-a3b",
    "gemma-3-1b",
    "gemma-4-26b-a4b",
    "gpt-oss-120b",
    "mixtral-8x7b",
    "minicpm3-4b",
    "falcon-7b",
    "deepseek-v3.2",
]
DEVICES = ["H100-SXM", "H200", "A100-SXM-80GB", "B200", "MI300X", "L40S"]
LAYOUTS = [
    dict(gpus=1),
    dict(gpus=8),
    dict(gpus=8, tp=1, dp_attention=True, ep=8),
    dict(gpus=16, tp=8, pp=2),
    dict(gpus=4, tp=1, pp=4),
    dict(gpus=32, tp=1, dp_attention=True, ep=32),
]
MIXES = [
    {},
    dict(seq_len=131072, batch=4),
    dict(isl=2000, osl=500),
    dict(isl=2000, osl=500, concurrency=64),
    dict(isl=128, osl=1024, request_rate=2.0),
    dict(isl=4000, osl=200, mode="disaggregated"),
    dict(isl=1000, osl=100, chunked_prefill=512),
]


N_CASES = 30


def _cases(n: int, seed: int = 26):
    """``n`` (model, device, layout, mix) drawn over the grid (the same ones every run)."""
    rng = random.Random(seed)
    return [
        (rng.choice(MODELS), rng.choice(DEVICES), rng.choice(LAYOUTS), rng.choice(MIXES))
        for _ in range(n)
    ]


def _check_plan(p) -> None:
    where = f"{p.model} on {p.gpus} x {p.hardware} ({p.layout})"
    for k, v in vars(p).items():
        if isinstance(v, float) and not math.isfinite(v):
            # only a load the deployment does not sustain queues without bound
            assert k in ("ttft_s", "queued") and v == math.inf and not p.sustainable, (where, k)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            assert v >= 0, (where, k, v)
    mem = p.memory
    assert mem["memory"] == p.memory_per_gpu_bytes == p.usable_per_gpu_bytes + mem["reserve"]
    assert mem["weights"] == p.weights_per_gpu_bytes
    parts = sum(v for k, v in mem.items() if k.startswith("weights_"))
    assert parts == pytest.approx(mem["weights"], rel=1e-9, abs=16), where
    budget = max(p.usable_per_gpu_bytes - p.weights_per_gpu_bytes, 0)
    assert p.kv_budget_per_gpu_bytes == mem["kv_budget"] == budget, where
    if p.max_batch:
        per_group = -(-p.max_batch // p.dp)
        assert per_group * p.kv_bytes_per_sequence_per_gpu <= budget, where
    if not p.fits and p.decode_step_s is None:
        return
    for name in ("decode_step_s", "prefill_s", "tpot_s"):
        value = getattr(p, name)
        if value is not None:
            assert 0 < value < math.inf, (where, name, value)
    if p.ttft_s is not None:
        assert p.ttft_s > 0, where
    if p.decode_tokens_per_s is not None:  # the running batch's tokens each step
        running = p.decode_running or p.decode_batch
        rate = running * p.tokens_per_step / p.decode_step_s
        assert p.decode_tokens_per_s == pytest.approx(rate, rel=1e-9), where
    if p.output_tokens_per_s is not None:
        total = p.gpus + p.prefill_gpus
        assert p.output_tokens_per_s_per_gpu == pytest.approx(p.output_tokens_per_s / total)
        assert p.output_tokens_per_s > 0 and p.output_tokens_per_s_per_user > 0
    for k in p.kernels:
        assert math.isfinite(k["seconds"]) and k["seconds"] >= 0, (where, k)
        assert k["flops_per_call"] >= 0 and k["bytes_per_call"] >= 0, (where, k)


@pytest.mark.parametrize(("model", "device", "layout", "mix"), _cases(N_CASES))
def test_every_plan_is_finite_and_consistent(model, device, layout, mix):
    try:
        p = mlacalc.plan(model, device, **layout, **mix)
    except InvalidArgumentError as exc:
        # a layout the model refuses is an answer too: one line naming the argument
        assert "\n" not in str(exc) and str(exc).split(":")[0].strip(), exc
        return
    _check_plan(p)


def test_most_drawn_plans_are_valid_layouts():
    """The drawn grid is not mostly refusals (the consistency test checks something)."""
    valid = 0
    for model, device, layout, mix in _cases(N_CASES):
        try:
            mlacalc.plan(model, device, **{**layout, **mix, "isl": None, "osl": None,
                         "concurrency": None, "request_rate": None, "mode": "aggregated",
                         "chunked_prefill": None})  # fmt: skip
            valid += 1
        except InvalidArgumentError:
            pass
    assert valid >= N_CASES * 2 // 3


@pytest.mark.parametrize(
    ("model", "device", "gpus"),
    [("deepseek-v3", "H200", [8, 16]), ("qwen3-next-80b-a3b", "H100-SXM", [1, 4]),
     ("gpt-oss-120b", "B200", [2])],
)  # fmt: skip
def test_every_search_point_is_finite_and_consistent(model, device, gpus):
    r = mlacalc.search(model, device, gpus, isl=2000, osl=500, ttft=2.0, tpot=0.05)
    assert r.points
    for p in r.points:
        for k, v in p.items():
            if isinstance(v, float):
                assert math.isfinite(v) and v >= 0, (k, v)
        if p["fits"] and p.get("tpot_s") is not None:
            assert p["tpot_s"] > 0 and p["ttft_s"] > 0 and p["output_tokens_per_s_per_gpu"] > 0
        if p["meets_targets"]:
            assert p["tpot_s"] <= 0.05 and p["ttft_s"] <= 2.0


@pytest.mark.parametrize("model", MODELS)
def test_predict_time_and_report_are_finite(model):
    for phase, seq in (("decode", 32768), ("prefill", 4096)):
        t = mlacalc.predict_time(model, "H100-SXM", phase, seq, batch=8)
        assert 0 < t.seconds < math.inf and t.flops >= 0 and t.bytes > 0
    from mlacalc.report import model_report

    def walk(x, path=""):
        if isinstance(x, dict):
            for k, v in x.items():
                walk(v, f"{path}.{k}")
        elif isinstance(x, list):
            for i, v in enumerate(x):
                walk(v, f"{path}[{i}]")
        elif isinstance(x, float):
            assert math.isfinite(x), path

    walk(model_report(model, seq_len=8192, batch=4))
