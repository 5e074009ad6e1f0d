"""A disaggregated prefill pool run close to its rate says so (a trial's search best ran its
pool at 99.97% of the prompts/s it finishes, with TTFT met only by the steady state's mean wait
and no figure saying how busy the pool was)."""

import re

import mlacalc
from mlacalc.serving.plan import PREFILL_BUSY_WARN

POOLS = dict(
    tp=1, ep=8, dp_attention=True, kv_dtype="bf16", isl=2000, osl=500, mode="disaggregated",
    prefill_gpus=8, prefill_tp=1, prefill_ep=8, prefill_dp_attention=True, engine="trtllm",
)  # fmt: skip


def _busy(p) -> list[str]:
    return [w for w in p.warnings if w.startswith("the prefill pool is busy")]


def test_a_prefill_pool_near_its_rate_is_warned_with_its_share():
    p = mlacalc.plan("deepseek-v3", "H200", 8, concurrency=832.1, **POOLS)
    (w,) = _busy(p)
    served = p.output_tokens_per_s / 500
    share = float(re.search(r"busy ([\d.]+)%", w)[1]) / 100
    assert share == round(served / p.prefill_pool_requests_per_s, 4) >= PREFILL_BUSY_WARN
    assert "a burst of arrivals queues there" in w


def test_a_pool_with_headroom_or_aggregated_serving_is_not():
    p = mlacalc.plan("deepseek-v3", "H200", 8, concurrency=200, **POOLS)
    served = p.output_tokens_per_s / 500
    assert served / p.prefill_pool_requests_per_s < PREFILL_BUSY_WARN and not _busy(p)
    agg = mlacalc.plan(
        "deepseek-v3", "H200", 8, tp=1, ep=8, dp_attention=True, isl=2000, osl=500,
        concurrency=832.1,
    )  # fmt: skip
    assert not _busy(agg)
