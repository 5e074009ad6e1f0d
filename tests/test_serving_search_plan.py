"""A search point is plan of its deployment at its concurrency (docs/serving.md): every
figure the point reports, plan of the point's own fields gives (a new-user trial re-planned
72 bests; three, disaggregated and prefill-bound, did not reproduce: the search kept a batch
past plan's cap, between two searched batches)."""

from __future__ import annotations

import pytest
from _helpers import plan_point

from mlacalc.serving.search import search

LLAMA = "tests/data/hf-configs/llama-3.3-70b-instruct.config.json"
ASK = dict(isl=2000, osl=500, ttft=2.0, tpot=0.05)


def plan_of(r, p, model):
    """plan of a search point, from its fields and the search's options (as its
    plan_command has them)."""
    extra = {}
    if p["mode"] != "disaggregated":
        extra = dict(
            chunked_prefill=p["chunked_prefill"],
            prefill_pass=r.prefill_pass,
            output_lag_steps=r.output_lag_steps,
        )
    checkpoint = str(p["weight_format"]).startswith("checkpoint ")
    return plan_point(
        model,
        r.hardware,
        p,
        r.isl,
        r.osl,
        weight_dtype=None if checkpoint else p["weight_dtype"],
        component_dtypes=p["component_dtypes"] or None,
        memory_reserve=r.memory_reserve,
        page_size=r.page_size,
        engine=r.engine,
        engine_defaults="none",  # the search's scheduler values, as it took them:
        **r.scheduler_defaults_applied,
        **extra,
    )


def assert_plan_equals(r, p, model):
    got = plan_of(r, p, model)
    assert got.fits and got.sustainable
    assert not [w for w in got.warnings if "wait in the queue" in w], got.warnings
    assert got.total_gpus == p["gpus"]
    assert got.layout == p["layout"]
    assert got.weights_per_gpu_bytes == p["weights_per_gpu_bytes"]
    for key in (
        "ttft_s",
        "tpot_s",
        "output_tokens_per_s",
        "output_tokens_per_s_per_gpu",
        "output_tokens_per_s_per_user",
    ):
        assert getattr(got, key) == pytest.approx(p[key], rel=1e-6), key
    if p["mode"] == "disaggregated":
        assert got.prefill_layout == p["prefill_layout"]
        assert got.running_batch_per_group == pytest.approx(p["batch_per_group"], rel=1e-9)


@pytest.mark.parametrize(
    "frontier",
    [pytest.param(False, id="best"), pytest.param(True, id="frontier", marks=pytest.mark.slow)],
)
def test_a_prefill_bound_best_is_what_plan_gives(frontier):
    """Llama-3.3-70B on B200 (trtllm), 8 GPUs: the best was a TP4 decode batch of 668 with a
    TP1 DP4 prefill pool, TTFT 0.973 s; plan of it capped the batch at the pool's rate near
    666 and queued the rest (TTFT 2.150 s, missing the 2 s target). Before: search TTFT
    0.9727 s, plan 2.1500 s; after: both 0.6550 s (batch 570; an aggregated b115, 18,791
    tok/s, passes it once aggregated sizes are refined too), and every frontier point too
    (--runslow: 35 more plans, a property check over the frontier, four fifths of the test's
    time; the default run plans the best)."""
    r = search(LLAMA, "B200", 8, **ASK)
    for p in [r.best, *r.frontier] if frontier else [r.best]:
        assert_plan_equals(r, p, LLAMA)


# the new-user trial's sweep, the three that did not reproduce among others
SWEEP = [
    (LLAMA, "B200", "trtllm"),
    (LLAMA, "H200", "sglang"),
    ("gpt-oss-120b", "H200", "vllm"),  # before: search TTFT 0.436 s, plan 3.082 s
    ("gpt-oss-120b", "B200", "trtllm"),
    # a frontier point's disaggregated TP1 DP-attention6 EP6 decode pool at batch 115 once
    # disagreed with plan (TTFT 0.2162 s in the search, 0.2461 s in plan): the MoE's step was
    # a wave longer in the search's array of batches than alone (tests/
    # test_timemodel_rows_alone.py)
    ("qwen3-30b-a3b", "H100", "sglang"),
    ("deepseek-v3", "H200", "trtllm"),
]


@pytest.mark.slow
@pytest.mark.parametrize("model,hardware,engine", SWEEP)
def test_best_and_frontier_are_what_plan_gives(model, hardware, engine):
    r = search(model, hardware, 8, engine=engine, **ASK)
    assert r.best is not None
    for p in [r.best, *r.frontier]:
        assert_plan_equals(r, p, model)
