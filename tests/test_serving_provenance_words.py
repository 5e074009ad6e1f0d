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


def test_a_lent_fit_names_the_class_it_times():
    """GLM-5.1 with nvfp4 experts on 8 B200 under SGLang: the EP dispatch is sized and timed in
    bf16, by the dispatch:fp8 fit lent from TensorRT-LLM's profile. The line said only
    "stand-in: combine:bf16, dispatch:fp8 from trtllm profile default", naming a dispatch the
    step does not run; it now says which class that fit times."""
    p = mlacalc.plan("glm-5.1", "B200", 8, tp=1, dp_attention=True, ep=8, seq_len=9000,
                     component_dtypes={"experts": "nvfp4"}, engine="sglang")  # fmt: skip
    assert {k["dtype"] for k in p.kernels if k["kind"] == "dispatch"} == {"bf16"}
    assert "the dispatch:fp8 fit timing the step's dispatch:bf16" in p.calibration, p.calibration
