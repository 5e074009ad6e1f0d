"""Speculative decoding with the model's MTP module (mlacalc.serving.speculative): the
acceptance length as input, published defaults for DeepSeek's MTP, the verify pass at k + 1
tokens and the drafts' cost."""

from __future__ import annotations

import pytest

from mlacalc.serving.plan import plan
from mlacalc.serving.speculative import PUBLISHED_LENGTHS
from mlacalc.words.errors import InvalidArgumentError

KW = dict(tp=1, dp_attention=True, ep=8, isl=2000, osl=500, concurrency=256)


def _plan(**kw):
    return plan("deepseek-v3", "H200", 8, **KW, **kw)


def test_published_defaults_for_deepseeks_mtp():
    """No rate or length: the published figure for the draft count, named in the warnings."""
    for k, (tau, source) in PUBLISHED_LENGTHS.items():
        p = _plan(mtp_tokens=k)
        assert p.tokens_per_step == pytest.approx(tau)
        assert any(source in w for w in p.warnings)
    with pytest.raises(InvalidArgumentError) as e:
        _plan(mtp_tokens=4)
    assert e.value.argument == "mtp_acceptance" and "no published figure" in e.value.message


def test_length_or_rate():
    assert _plan(mtp_tokens=2, mtp_acceptance_length=2.5).tokens_per_step == 2.5
    assert _plan(mtp_tokens=2, mtp_acceptance=0.5).tokens_per_step == pytest.approx(1.75)


def test_verify_at_k_plus_one_and_the_drafts_cost():
    """A step verifying k + 1 tokens per sequence (and drafting k) is longer than a plain
    step, longer with more drafts; the time per output token is the step over tau, shorter
    than a plain step's when the drafts are accepted, and every draft accepted (tau = k + 1)
    beats any shorter acceptance."""
    plain = _plan()
    one = _plan(mtp_tokens=1, mtp_acceptance_length=1.85)
    two = _plan(mtp_tokens=2, mtp_acceptance_length=1.85)
    assert plain.decode_step_s < one.decode_step_s < two.decode_step_s
    assert one.tpot_s < plain.tpot_s
    assert one.tpot_s < two.tpot_s  # the same acceptance from more drafts costs more
    best = _plan(mtp_tokens=2, mtp_acceptance_length=3.0)
    assert best.tpot_s < two.tpot_s
    none = _plan(mtp_tokens=1, mtp_acceptance_length=1.0)
    assert none.tpot_s > plain.tpot_s  # drafts never accepted only cost


@pytest.mark.parametrize(
    ("kw", "arg"),
    [
        (dict(mtp_tokens=1, mtp_acceptance_length=2.5), "mtp_acceptance_length"),
        (dict(mtp_tokens=1, mtp_acceptance_length=0.5), "mtp_acceptance_length"),
        (dict(mtp_tokens=1, mtp_acceptance_length=float("nan")), "mtp_acceptance_length"),
        (
            dict(mtp_tokens=1, mtp_acceptance=0.8, mtp_acceptance_length=1.8),
            "mtp_acceptance_length",
        ),
        (dict(mtp_acceptance_length=1.8), "mtp_acceptance_length"),
    ],
)
def test_mtp_arguments_are_checked(kw, arg):
    with pytest.raises(InvalidArgumentError) as e:
        _plan(**kw)
    assert e.value.argument == arg
    with pytest.raises(InvalidArgumentError) as e:
        plan("llama-3-8b", "H100-SXM", 1, isl=100, osl=100, mtp_tokens=1)
    assert e.value.argument == "mtp_tokens"


def test_a_capacity_plan_verifies_and_drafts_too():
    """Without a request mix, a plan with drafts times the step that verifies k + 1 tokens per
    sequence and drafts k, and counts tau tokens per sequence a step (it timed a plain step
    and counted one token before)."""
    kw = dict(tp=1, dp_attention=True, ep=8, seq_len=4000, batch=8 * 64)
    plain = plan("deepseek-v3", "H200", 8, **kw)
    mtp = plan("deepseek-v3", "H200", 8, **kw, mtp_tokens=1, mtp_acceptance_length=1.85)
    assert mtp.tokens_per_step == 1.85
    assert mtp.decode_step_s > plain.decode_step_s
    assert mtp.decode_tokens_per_s == pytest.approx(mtp.decode_batch * 1.85 / mtp.decode_step_s)
