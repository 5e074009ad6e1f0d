"""Every figure the time model assumes for a device, rather than reads from its datasheet, is
said where a prediction says what its times are (a trial: H20's assumed H100 clock, the RTX PRO
6000's assumed 5 us PCIe latency and MI300X's assumed absence of in-switch reduction were in
``device_figures(...).fallbacks`` but the calibration line listed only the file's ``assumed``
keys), and a device whose cited sources are all secondary says so."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

import mlacalc
from mlacalc.hardware.catalogue import load_hardware, shipped_hardware
from mlacalc.timemodel.device import device_figures
from mlacalc.timemodel.profile import load_profile


def _heads(name: str) -> list[str]:
    """Each fallback's "figure = value", the part of it a reader cites."""
    return [f.split(" (")[0] for f in device_figures(load_hardware(name)).fallbacks]


@pytest.mark.parametrize("name", shipped_hardware())
def test_every_fallback_is_in_the_calibration_line(name):
    hw = load_hardware(name)
    text = load_profile("default").describe(name, hw)
    for head in _heads(name):
        assert head in text, (head, text)
    for key in hw.assumed:  # the file's own assumptions keep their field names
        assert key in text, (key, text)
    secondary = all("secondary" in s for s in hw.source)
    assert ("secondary sources only" in text) == secondary, text


def test_the_trial_devices_say_their_assumptions_in_predict_time_and_plan():
    pred = mlacalc.predict_time("deepseek-v3", "H20", "decode", 4096, 8)
    assert "clock_hz = 1.83e+09 (no clock for this device: 1830 MHz (H100 SXM's) assumed)" in (
        pred.calibration
    )
    assert "secondary sources only" in pred.calibration
    pred = mlacalc.predict_time("llama-3-8b", "RTX-PRO-6000-Server", "decode", 4096, 8)
    assert "link_latency_s = 5e-06 (no link latency" in pred.calibration
    p = mlacalc.plan("llama-3-8b", "MI300X", 8, tp=8, isl=1000, osl=100, engine="vllm")
    assert "link_multicast = 0 (no in-switch reduction figure" in p.calibration
    assert p.to_dict()["calibration"] == p.calibration


def test_a_user_file_names_what_it_lacks(tmp_path: Path):
    data = yaml.safe_load((Path(mlacalc.__file__).parent / "data/hardware/H200.yaml").read_text())
    data["name"] = "my-gpu"
    for key in ("sm_count", "boost_clock_mhz", "l2_mib"):
        data.pop(key)
    data["field_sources"] = {k: v for k, v in data["field_sources"].items() if k in data}
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump(data))
    hw = load_hardware(str(path))
    text = load_profile("default").describe(hw.name, hw)
    for fallback in device_figures(hw).fallbacks:
        assert fallback.split(" (")[0] in text
    assert "sm_count = 108 (not in mine.yaml: no SM count" in text, text
