"""What a prediction for a device mlacalc never measured says, alike on every front end: a
sidecar's ceilings refused for another device, the device's route and its ratios."""

from __future__ import annotations

import json

import pytest

from mlacalc.data import MEASUREMENTS
from mlacalc.timemodel.predict import predict_time
from mlacalc.words.errors import InvalidArgumentError

CPU = MEASUREMENTS / "cpu-2core-epyc-fp32.json"
H200 = MEASUREMENTS / "cuda-nvidia-h200-full-bf16.json"


@pytest.mark.parametrize(
    "hardware, sidecar, said",
    [
        ("L40S", CPU, "is a CPU, not L40S"),
        ("L40S", H200, "the catalogue's H200, not L40S"),
        ("H100-SXM", H200, "the catalogue's H200, not H100-SXM"),
    ],
)
def test_a_sidecar_of_another_device_is_refused(hardware, sidecar, said):
    with pytest.raises(InvalidArgumentError, match=r"device\.name") as err:
        predict_time("llama-3.1-8b", hardware, "decode", 4096, 16, calibration=sidecar)
    assert said in str(err.value) and "\n" not in str(err.value)


def test_a_sidecar_of_the_device_is_taken(tmp_path):
    p = predict_time("llama-3.1-8b", "H200", "decode", 4096, 16, calibration=H200)
    assert p.calibrated and not p.warnings
    meta = json.loads(H200.read_text())
    meta["device"]["name"] = "NVIDIA L20"  # no catalogue GPU: taken, said unchecked
    p = predict_time("llama-3.1-8b", "H200", "decode", 4096, 16, calibration=meta)
    assert any("'NVIDIA L20' is no catalogue GPU" in w for w in p.warnings)
    # a measured CPU with its own sidecar, and another run of the same CPU
    p = predict_time("llama-3.1-8b", CPU, "decode", 1024, 1, dtype="fp32", calibration=CPU)
    assert p.calibrated


#: The catalogue devices the shared datasheets hold (the reference folder of GPU datasheets
#: beside the project, a copy of aiconfigurator's system descriptions at 095f58a5; listed
#: here, not read: the tests and the catalogue read nothing outside the repository). H20,
#: MI300X, MI325X, MI355X, H800, RTX-4080 and RTX-4090 have none there.
SHARED_DATASHEETS = {
    "A100-PCIe-40GB": "a100_pcie",
    "A100-SXM-80GB": "a100_sxm",
    "A30": "a30",
    "B200": "b200_sxm",
    "B300": "b300_sxm",
    "GB200": "gb200",
    "GB300": "gb300",
    "H100-PCIe": "h100_pcie",
    "H100-SXM": "h100_sxm",
    "H200": "h200_sxm",
    "L4": "l4",
    "L40S": "l40s",
    "RTX-PRO-6000-Server": "rtx_pro_6000_server",
}


def test_a_device_with_a_shared_datasheet_is_not_said_to_have_none():
    """The words 'secondary sources only (no stored datasheet)' (Profile.describe) only for a
    device no shared datasheet holds; one that has it cites the file (L40S cited it for its
    memory only and was said to have none)."""
    from mlacalc.hardware.catalogue import _catalogue_dir, load_hardware, shipped_hardware
    from mlacalc.timemodel.profile import load_profile

    prof = load_profile("default")
    for name in shipped_hardware():
        hw = load_hardware(name)
        said = "no stored datasheet" in prof.describe(hw.name, hw)
        if name in SHARED_DATASHEETS:
            text = (_catalogue_dir() / f"{name}.yaml").read_text()
            assert f"{SHARED_DATASHEETS[name]}.yaml" in text, name
            assert not said, name


def test_predict_time_and_roofline_say_plans_device_words(run):
    """roofline and predict_time warn as plan does (one helper, provenance.device_warnings):
    an unmeasured device's route (L40S: JSON warnings were []), TensorRT-LLM on an AMD GPU, and
    the transfer's ratios; a fitted device under its own engine has none."""
    from mlacalc.serving.plan import plan

    l40s = predict_time("llama-3.1-8b", "L40S", "decode", 4096, 16, scope="model")
    assert any(w.startswith("L40S is not a fitted device") for w in l40s.warnings)
    assert any("its figures over A100-SXM-80GB's: SMs 1.31x" in w for w in l40s.warnings)
    # TensorRT-LLM named on AMD (the default there is SGLang): said by every front end
    mi = predict_time("llama-3.1-8b", "MI300X", "decode", 4096, 16, engine="trtllm")
    assert any("TensorRT-LLM runs on NVIDIA GPUs only" in w for w in mi.warnings)
    assert not predict_time("llama-3.1-8b", "H100-SXM", "decode", 4096, 16).warnings
    p = plan("llama-3.1-8b", "MI300X", 1, isl=1000, osl=100, engine="trtllm")
    for w in mi.warnings:
        assert w in p.warnings, w
    args = ("roofline", "llama-3.1-8b", "-H", "MI300X", "--engine", "trtllm", "--format", "json")
    out = json.loads(run(*args)[0])
    said = out["predictions"][0]["warnings"]
    assert said[:2] == list(mi.warnings[:2])


def test_a_device_beyond_the_checked_transfer_is_unvalidated():
    """H20's bf16 tensor rate is 0.15x H100's, beyond the 0.44x-2.27x the leave-one-device-out
    check (H100 <-> B200) moved: no error figure is quoted for it (plan said 'expect about 11%');
    H200 (1.0x the rate, 1.43x the bandwidth) keeps it. The serving errors name their devices."""
    from mlacalc.hardware.catalogue import load_hardware
    from mlacalc.serving.provenance import ROUTE_ERRORS, prediction_route, route_warning

    h20 = prediction_route("default", load_hardware("H20"), "trtllm")
    assert h20["expected_error"] is None and h20["ratios"]["bf16"] == pytest.approx(0.15, abs=0.01)
    words = route_warning(h20)
    assert "expect about" not in words and "unvalidated" in words and "0.15x" in words
    h200 = prediction_route("default", load_hardware("H200"), "trtllm")
    # the H100 fit's error on B200's tables (README's per-engine table)
    assert h200["expected_error"]["median"] == pytest.approx(
        ROUTE_ERRORS[("trtllm", "H100-SXM")][2] / 100
    )
    assert "on H100 / H200" in h20["note"] and "none of them on H20" in h20["note"]
    assert "none of them" not in h200["note"]


def test_a_profile_fitted_on_the_users_tables_says_its_own_error(tmp_path, run):
    """A profile calibrate fits on a user's L40S tables (GEMMs only) gives its own residuals as
    the error of its route (plan said 'the kernel tables' error for this route is not
    measured'), and plan and roofline warn that it fits only those classes."""
    from mlacalc.timemodel.profile import Profile, load_profile

    h100 = load_profile("default").devices["H100-SXM"]["gemm:bf16"]
    residual = {"rows": 300, "median_abs_error": 0.0605, "p90_abs_error": 0.1926}
    path = Profile(
        name="l40s-prof",
        classes={"gemm:bf16": dict(h100)},
        devices={"L40S": {"gemm:bf16": dict(h100)}},
        fitted_on=({"device": "L40S", "tables": {"gemm_perf": 300}, "sources": ["x"]},),
        residuals={"L40S": {"gemm:bf16": residual}},
    ).save(tmp_path / "l40s-prof.json")
    args = ["llama-3.1-8b", "-H", "L40S", "--profile", str(path), "--format", "json"]
    doc = json.loads(run("plan", *args[:3], "--gpus", "1", *args[3:])[0])
    route = doc["prediction"]
    assert route["expected_error"] == {
        "median": 0.0605,
        "p90": 0.1926,
        "of": "own_residuals",
    }
    assert "gemm:bf16 300 rows, median 6.0%, p90 19.3%" in route["expected_error_source"]
    said = "L40S is timed by a profile fitted on its own tables for gemm:bf16 only"
    assert any(w.startswith(said) for w in doc["warnings"])
    out = json.loads(run("roofline", *args)[0])
    assert any(w.startswith(said) for w in out["predictions"][0]["warnings"])
