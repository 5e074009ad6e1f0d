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
