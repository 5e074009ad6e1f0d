"""A tensor-parallel degree that does not split the attention heads is told the degrees that
do (a trial's 3 GPUs at TP 3 on Qwen3-Next's 16 heads got no fix, where the linear-heads and
--ep errors list theirs): those dividing the stage's GPUs, then the larger ones."""

import pytest

import mlacalc
from mlacalc.serving.layout import make_layout
from mlacalc.words.errors import InvalidArgumentError


def _error(model, gpus, **kw) -> str:
    with pytest.raises(InvalidArgumentError) as exc:
        make_layout(mlacalc.load_model(model), gpus, **kw)
    assert exc.value.argument in ("tp", "gpus")
    return str(exc.value)


def test_the_valid_degrees_are_listed():
    err = _error("qwen3-next-80b-a3b", 3, tp=3)
    assert "does not divide the 16 attention heads" in err
    assert "use tp 1 on these 3 GPUs (dp takes the rest), or tp 2, 4, 8 or 16 on a GPU" in err
    err = _error("deepseek-v3", 6)
    assert "use tp 1 or 2 on these 6 GPUs" in err and "or tp 4, 8, 16, 32, 64 or 128 on" in err


def test_each_degree_listed_makes_a_layout():
    m = mlacalc.load_model("qwen3-next-80b-a3b")
    for t in (1, 2, 4, 8, 16):
        make_layout(m, t, tp=t)  # every degree the error lists splits the heads
    make_layout(m, 3, tp=1)
