"""16 GPUs with no tp given: tp is every GPU of a stage (docs/serving.md, "Layouts"), TP16 over
two 8-GPU nodes. On H100 it is planned with a warning naming tp at most 8; on L40S, whose file
gives no scale-out network, it failed naming only the missing figure (a trial): now the error
names the fix (tp=8 / --tp 8, or search), and tp=8 plans."""

from __future__ import annotations

import pytest

import mlacalc
from mlacalc.words.errors import InvalidArgumentError

KW = dict(isl=2000, osl=500, concurrency=64)


def test_l40s_x16_says_the_fix_and_tp8_plans(run):
    with pytest.raises(InvalidArgumentError) as exc:
        mlacalc.plan("llama-3.1-70b", "L40S", 16, **KW)
    said = str(exc.value)
    assert exc.value.argument == "tp" and "\n" not in said
    assert "with no tp given" in said and "tp=8 (--tp 8)" in said and "search" in said
    with pytest.raises(InvalidArgumentError, match="tp=8"):
        mlacalc.plan("llama-3.1-70b", "L40S", 16, tp=16, **KW)
    assert mlacalc.plan("llama-3.1-70b", "L40S", 16, tp=8, **KW).fits
    _, err = run("plan", "llama-3.1-70b", "-H", "L40S", "--gpus", 16, code=2)
    assert "--tp 8" in err


def test_h100_x16_is_planned_with_the_network_warning():
    p = mlacalc.plan("llama-3.1-70b", "H100-SXM", 16, **KW)
    assert p.tp == 16
    assert any("spans 2 scale-up domains" in w and "tp at most 8" in w for w in p.warnings)
