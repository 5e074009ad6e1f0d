"""The calibration line names the kernel classes it says were obtained otherwise, and calls a
class the device's own level lacks what it stands on: the profile's pooled classes."""

from __future__ import annotations

import mlacalc


def test_b200_calibration_line_names_its_pooled_classes():
    """DeepSeek-V3 on 8 B200 at DP-attention EP8: the EP dispatch and combine classes are the
    pooled level of fit-b200-sxm. The line said "B200 by its own fit; 3 of 8 kernel classes
    otherwise: B200 by datasheet ratios (profile fitted on B200)", naming no class and
    contradicting the own fit it had just claimed."""
    args = dict(tp=1, dp_attention=True, ep=8, kv_dtype="fp8", isl=2000, osl=500)
    for engine in ("trtllm", "vllm"):
        p = mlacalc.plan("deepseek-v3", "B200", 8, **args, concurrency=64.0, engine=engine)
        text = p.calibration
        assert "B200 by its own fit; 3 of 8 kernel classes otherwise" in text, text
        assert (
            "combine:bf16, dispatch:fp8: B200 by datasheet ratios from the profile's pooled "
            "classes (B200's own fit holds no such class)"
        ) in text, text
        assert "B200 by datasheet ratios (profile fitted on B200)" not in text
        # where the pooled classes came from: another profile's, lent (the stand-in clause)
        assert "stand-in: combine:bf16, dispatch:fp8 from trtllm profile default" in text
    # a device predicted from another's fit still names its pooled classes
    p = mlacalc.plan("deepseek-v3", "GB200", 8, **args, concurrency=64.0)
    assert "combine:bf16, dispatch:fp8: GB200 by datasheet ratios (profile fitted on B200)" in (
        p.calibration
    )
