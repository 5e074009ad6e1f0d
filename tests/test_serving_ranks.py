"""Ranks that wait for each other (mlacalc.serving.ranks): a step under DP-attention is its
slowest group's, and the expert exchange waits for the hottest expert rank."""

from __future__ import annotations

from itertools import pairwise

import numpy as np
import pytest

from mlacalc.cost.engine import as_model
from mlacalc.hardware.catalogue import load_hardware
from mlacalc.serving import figures
from mlacalc.serving.gpu_step import StepModel
from mlacalc.serving.layout import make_layout
from mlacalc.serving.plan import plan
from mlacalc.serving.ranks import (
    expected_max_normal,
    placement_imbalance,
    routing_factor,
    synced_groups,
    synced_prompts,
)
from mlacalc.words.dtypes import resolve_kv_layout
from mlacalc.words.errors import InvalidArgumentError

DSV3 = as_model("deepseek-v3")
H200 = load_hardware("H200")
KV = resolve_kv_layout("bf16")
DPA8 = dict(tp=1, dp_attention=True, ep=8)


def test_expected_maximum_of_normals_against_tabulated_values():
    """Blom's approximation against the tabulated expected maxima (Harter 1961): 0.5642 (2),
    1.4236 (8), 1.5388 (10), 2.0697 (32, by the same table's interpolation)."""
    assert expected_max_normal(1) == 0.0
    assert expected_max_normal(2) == pytest.approx(0.5642, rel=0.05)
    assert expected_max_normal(8) == pytest.approx(1.4236, rel=0.01)
    assert expected_max_normal(10) == pytest.approx(1.5388, rel=0.01)
    assert expected_max_normal(32) == pytest.approx(2.0697, rel=0.01)


def test_one_group_keeps_the_unsynced_rule():
    """One group: k = ceil(n) prompts join a share n / k of the steps (the planner's rule
    before ranks were synced); g groups: each group's k in a share p = n / k of its steps,
    independently, so a share 1 - (1 - p)^g of the set's steps, K = g n over that share."""
    n = np.array([0.05, 0.5, 1.0, 2.3])
    K, share, slow, mean = synced_prompts(n, 1, 8)
    assert list(K) == [1, 1, 1, 3] and list(slow) == list(K) and list(mean) == list(K)
    assert share == pytest.approx(np.minimum(n / K, 1.0))
    K, share, slow, mean = synced_prompts(n, 8, 8)
    assert list(slow) == [1, 1, 1, 3]
    # a group has its k prompts in a share n / k of its steps, independently of the others
    share_by_hand = [1 - 0.95**8, 1 - 0.5**8, 1.0, 1 - (1 - 2.3 / 3) ** 8]
    assert share == pytest.approx(share_by_hand)
    assert np.allclose(K, 8 * n / np.array(share_by_hand))
    assert mean == pytest.approx(K / 8)


def test_synced_prompt_steps_never_fall_as_the_load_rises():
    """8 synced groups: the share of the steps carrying a prompt, and that share times the
    slowest group's prompts, rise with n. Before (K = ceil(g n) in a share g n / K, the
    slowest ceil(K / g)) the share fell from 1 to 0.5 as g n passed 1 (n 0.125 -> 0.126: 1 ->
    0.504); at n = 1 / 8 it is now the chance that one of 8 groups has a prompt, 1 - (7/8)^8."""
    n = np.linspace(0.01, 3, 3000)
    _, share, slow, _ = synced_prompts(n, 8, 8)
    assert np.all(np.diff(share * slow) >= 0)
    assert np.all(np.diff(share[n <= 1]) >= 0) and share[0] < share[100] < 1
    assert synced_prompts(0.125, 8, 8)[1] == pytest.approx(1 - (7 / 8) ** 8)
    assert synced_prompts(0.126, 8, 8)[1] == pytest.approx(1 - (1 - 0.126) ** 8)
    assert synced_groups(DSV3, make_layout(DSV3, 8, **DPA8)) == 8
    assert synced_groups(DSV3, make_layout(DSV3, 8, tp=8)) == 1
    llama = as_model("llama-3-8b")
    assert synced_groups(llama, make_layout(llama, 8, tp=1, dp=8)) == 1


def test_a_step_is_never_faster_than_its_slowest_group():
    """The step whose slowest group prefills ceil(K / g) prompts, the experts at the set's
    mean, is no faster than the mean group's step; and the plan's TPOT under DP-attention is
    no faster than the unsynced average of the same deployment (every group on its own)."""
    sm = StepModel(DSV3, make_layout(DSV3, 8, **DPA8), "fp8", KV, H200)
    slow = sm.step(dec_B=64, dec_S=2250, pf_N=1, pf_q=2000, pf_moe=1 / 8).seconds[0]
    even = sm.step(dec_B=64, dec_S=2250, pf_N=1 / 8, pf_q=2000).seconds[0]
    assert slow > even
    kw = dict(isl=2000, osl=500, **DPA8)
    for load in (dict(concurrency=64), dict(concurrency=512), dict(request_rate=4.0)):
        synced = plan(DSV3, H200, 8, **kw, **load)
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(figures, "synced_groups", lambda m, lay: 1)
            alone = plan(DSV3, H200, 8, **kw, **load)
        assert synced.tpot_s >= alone.tpot_s * (1 - 1e-9), load
        assert synced.tpot_s > alone.tpot_s * 1.01, load  # the effect is not negligible here


def test_more_skew_is_never_faster():
    """The hottest rank's share grows with the experts' popularity skew, rebalanced or not;
    rebalancing (EPLB) with redundant experts never does worse than a random placement, and
    more redundant slots never worse; the plan's step follows."""
    skews = [0.0, 0.2, 0.5, 0.8, 1.2]
    for rebalance in (False, True):
        f = [placement_imbalance(256, 32, 32, s, rebalance) for s in skews]
        assert f[0] == 1.0 and all(a <= b + 1e-12 for a, b in pairwise(f)), f
    for s in skews[1:]:
        assert placement_imbalance(256, 32, 32, s, True) <= placement_imbalance(
            256, 32, 32, s, False
        )
        reds = [placement_imbalance(256, 32, r, s, True) for r in (0, 32, 64, 96)]
        assert all(a >= b - 1e-12 for a, b in pairwise(reds)), reds
    steps = [
        plan(DSV3, H200, 8, **DPA8, isl=2000, osl=500, concurrency=256, expert_skew=s).tpot_s
        for s in skews
    ]
    assert all(a <= b for a, b in pairwise(steps)) and steps[-1] > steps[0], steps


def test_random_routing_spread_shrinks_with_the_tokens():
    """A finite step's hottest rank: c(ep) binomial standard deviations above the mean, a
    share that falls as 1 / sqrt(copies); balanced routing has none."""
    copies = np.array([1e3, 1e4, 1e5, 1e6])
    f = routing_factor(copies, 32, 1.0, "random")
    assert all(f > 1) and all(np.diff(f) < 0)
    assert (f - 1) * np.sqrt(copies) == pytest.approx(
        np.full(4, expected_max_normal(32) * np.sqrt(32 * (1 - 1 / 32)))
    )
    assert list(routing_factor(copies, 32, 1.0, "balanced")) == [1.0] * 4
    balanced = plan(DSV3, H200, 8, **DPA8, seq_len=4096, batch=64, routing="balanced")
    random = plan(DSV3, H200, 8, **DPA8, seq_len=4096, batch=64)
    assert random.decode_step_s > balanced.decode_step_s


def test_a_bigger_token_budget_never_lowers_the_step_under_load():
    """Chunked prefill over 8 synced groups: a group with a prompt waiting carries a whole
    chunk, so a bigger token budget never shortens the mean step (the decode's inter-token
    time) under the same load, and a budget beyond the prompt changes nothing (a chunk holds
    one prompt's tokens: 8,192 and 16,384 tokens counted the prompt as half and a quarter of
    a chunk, and the step fell from 444 ms to 435 and 239 ms at 256 requests)."""
    for load in (256, 512):
        runs = [
            plan(DSV3, H200, 8, **DPA8, isl=8000, osl=500, concurrency=load, chunked_prefill=c)
            for c in (1024, 2048, 4096, 8000, 8192, 16384)
        ]
        tpots = [p.tpot_s for p in runs]
        assert all(a <= b * (1 + 1e-9) for a, b in pairwise(tpots)), tpots
        for beyond in runs[-2:]:
            assert beyond.tpot_s == pytest.approx(runs[-3].tpot_s, rel=1e-12)
            assert beyond.ttft_s == pytest.approx(runs[-3].ttft_s, rel=1e-12)


@pytest.mark.parametrize(
    ("kw", "arg"),
    [
        (dict(routing="zipf"), "routing"),
        (dict(expert_skew=-0.1), "expert_skew"),
        (dict(expert_skew=float("nan")), "expert_skew"),
        (dict(expert_skew=5.0), "expert_skew"),
        (dict(rebalance="yes"), "rebalance"),
    ],
)
def test_routing_arguments_are_checked(kw, arg):
    with pytest.raises(InvalidArgumentError) as e:
        plan(DSV3, H200, 8, **DPA8, seq_len=4096, **kw)
    assert e.value.argument == arg


def test_the_plan_says_how_hot_the_hottest_expert_rank_is():
    """Plan.expert_rank_load: 1 under balanced routing, the sample's spread under random
    routing (about 5% at 256 sequences per GPU on EP72), more with skew, None without EP."""
    kw = dict(tp=1, dp_attention=True, ep=72, redundant_experts=32, seq_len=2000, batch=72 * 256)
    random = plan(DSV3, "H100-SXM", 72, **kw)
    assert random.expert_rank_load == pytest.approx(1.052, abs=0.005)
    assert plan(DSV3, "H100-SXM", 72, **kw, routing="balanced").expert_rank_load == 1.0
    assert plan(DSV3, "H100-SXM", 72, **kw, expert_skew=0.5).expert_rank_load > 1.052
    assert plan(DSV3, H200, 8, tp=8, seq_len=2000).expert_rank_load is None


def test_expert_rank_load_is_the_one_the_timed_kernels_apply_under_tbo():
    """Under two-batch overlap each micro-batch routes half the step's tokens, a wider sample
    spread: the dispatch bytes were scaled by 1.0739 (8,128,518 = 7,569,408 x 1.0739 at 128
    tokens a GPU) while expert_rank_load said the full batch's 1.0522 (a trial). It is now
    the load applied, the dispatch bytes over balanced routing's."""
    kw = dict(tp=1, dp_attention=True, ep=72, redundant_experts=32, seq_len=2000, batch=72 * 256)

    def dispatch(p):
        return next(k["bytes_per_call"] for k in p.kernels if k["kind"] == "dispatch")

    tbo = plan(DSV3, "H100-SXM", 72, **kw, overlap="tbo")
    even = plan(DSV3, "H100-SXM", 72, **kw, overlap="tbo", routing="balanced")
    assert tbo.expert_rank_load == pytest.approx(dispatch(tbo) / dispatch(even), rel=1e-9)
    assert tbo.expert_rank_load == pytest.approx(1.0739, abs=5e-4)  # was 1.0522
