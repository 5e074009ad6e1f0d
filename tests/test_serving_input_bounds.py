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
