"""Expert-parallel options without expert parallelism, and the contradictory pair (a new-user
trial, trial 9: each was accepted and did nothing, or the wrong thing, under pure TP8)."""

from __future__ import annotations

import pytest

import mlacalc
from mlacalc.words.errors import InvalidArgumentError

TP8 = dict(seq_len=4096, batch=8)


@pytest.mark.parametrize(
    "kw, arg",
    [
        # 32 replicas under TP8: +9.5 GiB a GPU and 43.64 -> 46.50 ms before
        (dict(redundant_experts=32), "redundant_experts"),
        # the busiest expert GPU's load with none: 43.64 -> 50.55 ms before
        (dict(routing_imbalance=3.0), "routing_imbalance"),
        # ignored without a word before
        (dict(expert_skew=1.5), "expert_skew"),
        (dict(rebalance=True), "rebalance"),
        (dict(dp_attention=True, tp=1, routing_imbalance=2.0), "routing_imbalance"),
    ],
)
def test_expert_rank_options_without_ep_are_refused(kw, arg):
    with pytest.raises(InvalidArgumentError) as e:
        mlacalc.plan("deepseek-v3", "H200", 8, **TP8, **kw)
    assert e.value.argument == arg
    assert "ep is 1" in e.value.message and "--ep" in e.value.message


def test_balanced_routing_with_an_imbalance_is_refused_naming_both():
    # before: accepted, load 2.0
    with pytest.raises(InvalidArgumentError) as e:
        mlacalc.plan("deepseek-v3", "H200", 8, ep=8, routing="balanced", routing_imbalance=2.0)
    assert e.value.argument == "routing_imbalance"
    assert "--routing balanced" in e.value.message and "--routing random" in e.value.message


EP32 = dict(tp=1, dp_attention=True, ep=32, isl=2000, osl=500, concurrency=1024)


@pytest.mark.parametrize(
    "kw, arg, words",
    [
        # a new-user trial (wide EP): accepted, 1.353x under 'balanced'
        (dict(routing="balanced", expert_skew=0.5), "expert_skew", "--routing random"),
        (dict(routing="balanced", rebalance=True), "rebalance", "--routing random"),
        # a measured load already holds the popularity and the placement
        (dict(routing_imbalance=1.3, expert_skew=0.5), "expert_skew", "--routing-imbalance"),
        (dict(routing_imbalance=1.3, rebalance=False), "rebalance", "--routing-imbalance"),
    ],
)
def test_routing_arguments_that_contradict_each_other_are_refused(kw, arg, words):
    with pytest.raises(InvalidArgumentError) as e:
        mlacalc.plan("deepseek-v3", "H200", 32, **EP32, **kw)
    assert e.value.argument == arg and words in e.value.message


def test_a_measured_imbalance_is_the_busiest_ranks_load_not_a_factor_on_the_models():
    """``routing_imbalance`` is the busiest expert GPU's load over the mean as a run measures
    it: the plan's hottest rank carries exactly that (a new-user trial read 1.3 give 1.383,
    1.3 x the sample's 1.064); the modelled load without it is the sample's spread, above 1."""
    modelled = mlacalc.plan("deepseek-v3", "H200", 32, **EP32)
    measured = mlacalc.plan("deepseek-v3", "H200", 32, routing_imbalance=1.3, **EP32)
    assert 1.0 < modelled.expert_rank_load < 1.3
    assert measured.expert_rank_load == pytest.approx(1.3, rel=1e-12)
    assert measured.tpot_s > modelled.tpot_s


def test_the_same_options_with_ep_still_plan():
    p = mlacalc.plan("deepseek-v3", "H200", 8, ep=8, redundant_experts=32, expert_skew=1.0, **TP8)
    assert p.fits and p.ep == 8
    # routing itself stays under TP: it spreads a GPU's tokens over its own experts
    assert mlacalc.plan("deepseek-v3", "H200", 8, routing="balanced", **TP8).fits


def test_a_prefill_pool_without_ep_does_not_inherit_the_decode_pools_replicas():
    p = mlacalc.plan(
        "deepseek-v3", "H200", 16, tp=1, dp_attention=True, ep=16, redundant_experts=16,
        mode="disaggregated", prefill_gpus=8, prefill_tp=8, prefill_ep=1,
        prefill_dp_attention=False, isl=2000, osl=100, concurrency=64,
    )  # fmt: skip
    assert p.prefill_ep == 1 and p.prefill_redundant_experts == 0


def test_cli_says_it_in_one_line(capsys):
    from mlacalc.cli import main

    args = ["plan", "deepseek-v3", "-H", "H200", "--gpus", "8", "--seq-len", "4096",
            "--batch", "8", "--expert-skew", "1.5"]  # fmt: skip
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "--expert-skew" in err and "Traceback" not in err
