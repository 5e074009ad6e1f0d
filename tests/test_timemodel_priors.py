"""Kernel classes a profile has no fit of their own kind for (a profile fitted on a device
without DeepEP or quantize tables): the structural stand-ins of
:data:`mlacalc.timemodel.profile._KIND_STAND_INS`."""

from __future__ import annotations

import pytest

from mlacalc.timemodel.profile import Profile
from mlacalc.timemodel.terms import default_params

A2A_INT8 = {"fixed_s": 9e-6, "link_eff": 0.5, "latency_steps": 0.1, "proto_s": 4e-6}
A2A_FP16 = {"fixed_s": 8e-6, "link_eff": 0.55, "latency_steps": 0.09, "proto_s": 4e-6}
GEMM_INT8 = {"fixed_s": 3.4e-6, "eff_compute": 0.9}
GEMM_BF16 = {"fixed_s": 2.3e-6, "eff_compute": 0.9}


def _profile(extra: dict | None = None, pooled_extra: dict | None = None) -> Profile:
    own = {
        "all_to_all:int8": A2A_INT8,
        "all_to_all:fp16": A2A_FP16,
        "gemm:int8": GEMM_INT8,
        "gemm:bf16": GEMM_BF16,
        **(extra or {}),
    }
    return Profile(
        name="one-device",
        classes={**own, **(pooled_extra or {})},
        devices={"A100-SXM-80GB": own},
    )


@pytest.mark.parametrize(
    ("kind", "dtype", "lent"), [("dispatch", "fp8", A2A_INT8), ("combine", "bf16", A2A_FP16)]
)
def test_deepep_without_a_fit_takes_the_all_to_all_fixed_cost_only(kind, dtype, lent):
    """DeepEP's kernels without a fit of their own pay one launch and one cross-rank handshake,
    the fixed cost of NCCL's all-to-all of the same payload width; their link efficiency and
    step latency stay the uncalibrated defaults (NCCL's channels and flagged steps are not
    DeepEP's warps and steps)."""
    for device in ("A100-SXM-80GB", "H100-SXM"):
        prm, how = _profile().params(device, kind, dtype)
        assert prm["fixed_s"] == lent["fixed_s"]
        for name in ("link_eff", "latency_steps", "sm_bandwidth", "token_copies"):
            assert prm[name] == default_params(kind)[name]
        assert "all_to_all" in how and "no fit" in how


def test_deepep_fit_anywhere_in_the_profile_beats_the_stand_in():
    """Its own fit wins, also a pooled one when the predicted device's table has none (a
    two-device profile predicting an A100 or an unmeasured device)."""
    own = {"fixed_s": 1.5e-5, "link_eff": 0.6, "latency_steps": 0.7}
    prm, _ = _profile({"dispatch:fp8": own}).params("H100-SXM", "dispatch", "fp8")
    assert prm["fixed_s"] == own["fixed_s"] and prm["link_eff"] == own["link_eff"]
    prm, how = _profile(pooled_extra={"dispatch:fp8": own}).params(
        "A100-SXM-80GB", "dispatch", "fp8"
    )
    assert prm["fixed_s"] == own["fixed_s"] and "no fit" not in how


def test_without_the_stand_in_kind_either_the_defaults_hold():
    prof = Profile(name="gemm-only", classes={"gemm:bf16": GEMM_BF16})
    prm, how = prof.params("H100-SXM", "dispatch", "fp8")
    assert prm["fixed_s"] == default_params("dispatch")["fixed_s"]
    assert how.startswith("uncalibrated")


def test_amax_reduction_without_a_quantize_fit_stays_uncalibrated():
    """No stand-in for the amax pass: without a quantize fit it keeps the defaults, and says so."""
    prm, how = _profile().params("H100-SXM", "quantize", "fp8", variant="amax")
    assert prm["fixed_s"] == default_params("quantize")["fixed_s"]
    assert how.startswith("uncalibrated")


def test_amax_with_a_quantize_fit_keeps_it():
    fit = {"fixed_s": 1.4e-6, "eff_memory": 0.9}
    prm, how = _profile({"quantize:fp8": fit}).params("H100-SXM", "quantize", "fp8", variant="amax")
    assert prm["fixed_s"] == fit["fixed_s"] and "no fit" not in how


@pytest.mark.parametrize(
    ("engine", "device", "lender"),
    [
        ("trtllm", "H100-SXM", "quantize:fp8"),
        ("trtllm", "B200", "quantize:fp8"),
        ("sglang", "H100-SXM", "elementwise:bf16:conv1d_update"),
        ("sglang", "B200", "elementwise:bf16:conv1d_update"),
    ],
)
def test_a_served_steps_elementwise_kernels_borrow_the_engines_streaming_fit(
    engine, device, lender
):
    """A plain element-wise kernel (a norm, RoPE, an activation: no table times one alone)
    takes the floor and the HBM share of the engine's measured one-kernel streaming call
    (profile.ELEMENTWISE_STAND_INS); its draw by work units keeps the default. Before, every
    engine's served step timed them by the datasheet defaults ("uncalibrated")."""
    from mlacalc.timemodel.engine_profiles import profile_for

    prof, _ = profile_for(engine, device)
    prm, how = prof.params(device, "elementwise", "bf16")
    fit = prof.devices[device][lender]
    assert "no fit" in how and lender in how and not how.startswith("uncalibrated")
    assert prm["fixed_s"] == fit["fixed_s"] and prm["eff_memory"] == fit["eff_memory"]
    assert prm["sm_bandwidth"] == default_params("elementwise")["sm_bandwidth"]
    # the variants keep their own fits
    prm, how = prof.params(device, "elementwise", "bf16", variant="conv1d_update")
    assert "no fit" not in how


def test_elementwise_without_the_lender_stays_uncalibrated():
    prm, how = _profile().params("H100-SXM", "elementwise", "bf16")
    assert prm["fixed_s"] == default_params("elementwise")["fixed_s"]
    assert how.startswith("uncalibrated")


def test_vllms_elementwise_kernels_keep_the_defaults_its_module_fits_were_made_with():
    from mlacalc.timemodel.engine_profiles import profile_for

    for device in ("H100-SXM", "B200"):
        prof, _ = profile_for("vllm", device)
        prm, how = prof.params(device, "elementwise", "bf16")
        assert how.startswith("uncalibrated")
        assert prm["fixed_s"] == default_params("elementwise")["fixed_s"]
