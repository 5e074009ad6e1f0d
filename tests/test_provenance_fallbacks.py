"""A plan's calibration line says which class's fit stood in for a class the profile has no fit
of (issue 22: "where one engine lacks a table on a device, the prediction says what stood
in"): an AWQ checkpoint's int4 weight-only GEMM under vLLM on H100 was said "H100-SXM by its
own fit" while the device's bf16 GEMM fit timed it (Profile._found's fallbacks)."""

from __future__ import annotations

import numpy as np
import pytest

from mlacalc.hardware.catalogue import load_hardware
from mlacalc.serving.provenance import calibration_of
from mlacalc.timemodel.profile import Profile, load_profile

QUANT = "tests/data/quant"


@pytest.mark.parametrize(
    ("profile", "device", "kernels", "said"),
    [
        # a weight-only GEMM (AWQ / GPTQ int4, int8 weights): the device's bf16 GEMM fit
        ("fit-h100-sxm-vllm", "H100-SXM", [("gemm", "w4a16")], "gemm:w4a16 by the gemm:bf16 fit"),
        ("fit-h100-sxm-vllm", "H100-SXM", [("gemm", "w8a16")], "gemm:w8a16 by the gemm:bf16 fit"),
        # a weight-only MoE where the profile has none on the device: the bf16 MoE fit
        ("default", "H100-SXM", [("moe", "w4a16")], "moe:w4a16 by the moe:bf16 fit"),
        # a dtype's stand-in (profile._STAND_INS): per-tensor fp8 by SmoothQuant int8, nvfp4
        # by block-scaled fp8
        ("fit-a100-sxm-80gb", "H100-SXM", [("gemm", "fp8")], "gemm:fp8 by the gemm:int8 fit"),
        ("fit-h100-sxm", "B200", [("moe", "nvfp4")], "moe:nvfp4 by the moe:fp8_block fit"),
        # a kind's own first stand-in (profile._KIND_FIRST_STAND_INS): SGLang's nvfp4 GEMM by
        # its CUTLASS fp8 GEMM
        ("fit-h100-sxm-sglang", "B200", [("gemm", "nvfp4")], "gemm:nvfp4 by the gemm:fp8 fit"),
    ],
)
def test_calibration_says_the_class_that_stood_in(profile, device, kernels, said):
    text = calibration_of(profile, load_hardware(device), kernels)[1]
    assert said in text, text
    key = said.split(" by ")[0]
    assert f"(no {key} fit of its own" in text, text


def test_calibration_says_a_variants_parent_and_another_dtype_standing_in():
    hw = load_hardware("H100-SXM")
    # a variant by its parent's fit (profile._PARENT_VARIANTS), from the kernel's own shape:
    # vLLM's prompt top-k under a profile that fits only the flat top-k
    topk = {
        "name": "indexer_topk",
        "kind": "elementwise",
        "dtype": "bf16",
        "variant": "topk_vllm_prompt",
        "flops": np.array([1e6]),
        "bytes": np.array([1e7]),
        "seconds": np.array([1e-5]),
        "shape": {},
    }
    text = calibration_of("default", hw, [topk])[1]
    assert "elementwise:bf16:topk_vllm_prompt by the elementwise:bf16:topk_flat fit" in text
    # the kind's plain class of another dtype, where neither the dtype nor bf16 has a fit
    prof = Profile("t", classes={"moe:fp8_block": {"fixed_s": 1e-5}, "gemm:bf16": {}})
    text = calibration_of(prof, hw, [("moe", "int8"), ("gemm", "bf16")])[1]
    assert "1 of 2 kernel classes otherwise: moe:int8 by the moe:fp8_block fit" in text, text
    assert prof.stood_in_for("H100-SXM", "gemm", "bf16") is None


def test_own_classes_and_aliases_are_not_stand_ins():
    # a bf16 collective by NCCL's fp16 fit (the same bytes), a class's own fit: unsaid
    hw = load_hardware("B200")
    prof = load_profile("fit-b200-sxm-vllm")
    assert prof.stood_in_for("B200", "all_gather", "bf16", hw) is None
    assert prof.stood_in_for("B200", "gemm", "fp16", hw) is None
    text = calibration_of(prof, hw, [("all_gather", "bf16"), ("gemm", "bf16")])[1]
    assert " by the " not in text and "B200 by its own fit" in text, text


def test_awq_plan_says_the_bf16_fit_timing_its_int4_gemms():
    from mlacalc.cli.plan_cmd import plan_note
    from mlacalc.serving.plan import plan

    p = plan(
        f"{QUANT}/llama-3.1-8b-awq.config.json",
        hardware="H100",
        gpus=1,
        isl=256,
        osl=32,
        concurrency=8,
        engine="vllm",
    )
    said = "gemm:w4a16 by the gemm:bf16 fit (no gemm:w4a16 fit of its own)"
    assert said in p.calibration  # the JSON's and the app's line (appviews engine_words)
    assert said in p.to_dict()["calibration"]
    assert said in plan_note(p).replace("\n", " ")  # the CLI's text
