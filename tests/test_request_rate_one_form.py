"""One refusal for a bad request rate, in the API and the CLI alike (it had been three:
"must be a number in >= 0.0" for -1 and inf, "must be positive" for 0); a mutation of each
kind of bad value (negative, zero, infinite, NaN, text, not a number)."""

from __future__ import annotations

import math

import pytest

import mlacalc
from mlacalc.words.errors import InvalidArgumentError

SAID = "must be a positive finite number of requests per second; got "
PLAN = ("plan", "llama-3-8b", "-H", "H100-SXM", "--gpus", 1, "--isl", 100, "--osl", 10)


@pytest.mark.parametrize(
    ("value", "text", "shown"),
    [
        (-1, "-1", "-1"),
        (0, "0", "0"),
        (0.0, "0.0", "0"),
        (-0.5, "-0.5", "-0.5"),
        (math.inf, "inf", "inf"),
        (-math.inf, "-inf", "-inf"),
        (math.nan, "nan", "nan"),
        ("abc", "abc", "'abc'"),
    ],
)
def test_a_bad_request_rate_is_refused_in_one_form(run, value, text, shown):
    with pytest.raises(InvalidArgumentError) as exc:
        mlacalc.plan("llama-3-8b", "H100-SXM", 1, isl=100, osl=10, request_rate=value)
    assert str(exc.value) == "request_rate: " + SAID + shown
    _, err = run(*PLAN, f"--request-rate={text}", code=2)
    assert f"'--request-rate': {SAID}{shown}" in " ".join(err.split())


@pytest.mark.parametrize("value", ["2", True, [1.0]])
def test_a_request_rate_that_is_no_number_is_refused_alike(value):
    with pytest.raises(InvalidArgumentError, match=f"request_rate: {SAID}"):
        mlacalc.plan("llama-3-8b", "H100-SXM", 1, isl=100, osl=10, request_rate=value)


def test_a_good_request_rate_runs():
    p = mlacalc.plan("llama-3-8b", "H100-SXM", 1, isl=100, osl=10, request_rate=0.5)
    assert p.request_rate == 0.5
