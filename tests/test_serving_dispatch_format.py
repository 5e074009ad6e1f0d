"""The EP dispatch's format, said where no reference backs it (mlacalc.serving.plan_checks):
4-bit experts dispatch bf16 in the step model, and the plan says so. trial4: DeepSeek-V3.1
NVFP4 on 72 GB200 (EP72) dispatched bf16 (30.9 MB a call) with no word, where an fp8
checkpoint dispatches fp8."""

from __future__ import annotations

from mlacalc.serving.comm import dispatch_bytes
from mlacalc.serving.plan import plan

EP = dict(dp_attention=True, ep=8, tp=1, seq_len=2000, batch=64)


def _dispatch_notes(p):
    return [w for w in p.warnings if w.startswith("EP dispatch sized in bf16")]


def test_four_bit_experts_say_the_dispatch_format_assumed():
    p = plan("qwen3-30b-a3b", "B200", 8, **EP, component_dtypes={"experts": "nvfp4"})
    (note,) = _dispatch_notes(p)
    assert "nvfp4" in note and "recall" in note
    (row,) = [k for k in p.kernels if k["name"] == "EP dispatch"]
    assert row["dtype"] == "bf16"


def test_fp8_and_bf16_experts_say_nothing():
    assert not _dispatch_notes(plan("deepseek-v3", "B200", 8, **EP))  # fp8: DeepEP's rows
    assert not _dispatch_notes(plan("qwen3-30b-a3b", "B200", 8, **EP))  # bf16 experts
    one = dict(EP, ep=1, dp_attention=False, tp=8)
    assert not _dispatch_notes(
        plan("qwen3-30b-a3b", "B200", 8, **one, component_dtypes={"experts": "nvfp4"})
    )  # no exchange


def test_the_ratios_said():
    """fp8 with a float32 scale per 128: 7,392 B a copy of 7,168 values, 0.52x bf16's."""
    assert round(dispatch_bytes(1, 1, 7168) / dispatch_bytes(1, 1, 7168, fp8=False), 2) == 0.52
    assert round((7168 / 2 + 7168 / 16) / (7168 * 2), 2) == 0.28  # nvfp4: e4m3 scale per 16
