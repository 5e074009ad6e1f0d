"""Linear attention's heads split whole over TP ranks (mlacalc.serving.layout): Qwen3.5's 16
gated delta-net key heads allow TP16 at most. trial4: TP32 fitted with no word. Each test
failed before."""

from __future__ import annotations

import pytest

from mlacalc.cost.engine import as_model
from mlacalc.hardware.catalogue import load_hardware
from mlacalc.serving.layout import tp_splits_heads
from mlacalc.serving.plan import plan
from mlacalc.serving.search_space import candidate_layouts
from mlacalc.words.errors import InvalidArgumentError

Q35 = "qwen3.5-122b-a10b"  # 32 attention heads, 16 linear key heads, 64 linear value heads


def test_tp_beyond_the_linear_key_heads_is_refused_naming_tp_and_the_limit():
    with pytest.raises(InvalidArgumentError) as info:
        plan(Q35, "B200", 32, tp=32, batch=1, seq_len=4096)
    assert info.value.argument == "tp"
    assert "16 linear-attention key heads" in str(info.value) and "tp 16" in str(info.value)
    assert plan(Q35, "B200", 16, tp=16, batch=1, seq_len=4096).fits


def test_cli_says_it_in_one_line(run):
    _, err = run("plan", Q35, "-H", "B200", "--gpus", 32, "--tp", 32, "--batch", 1, "--seq-len",
                 "4k", code=2)  # fmt: skip
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "--tp" in lines[0] and "tp 16" in lines[0]


def test_search_tries_no_layout_that_splits_a_linear_head():
    """search's layouts on 32 GB200 (one NVLink domain): TP up to 16, none of 32."""
    m = as_model(Q35)
    assert tp_splits_heads(m, 16) and not tp_splits_heads(m, 32)
    lays = candidate_layouts(m, load_hardware("GB200"), 32, None, 1 << 60)
    assert max(lay.tp for lay in lays) == 16
