"""A hardware file whose peak or bandwidth is typed in the wrong unit is refused, by field."""

from pathlib import Path

import pytest
import yaml

from mlacalc.hardware.catalogue import RIDGE_RANGE, load_hardware, shipped_hardware
from mlacalc.words.errors import ConfigError


def _variant(tmp_path, **change):
    data = yaml.safe_load(Path(load_hardware("H200").origin).read_text())
    for key, value in change.items():
        if key == "bf16":
            data["peak_tflops"]["bf16"] = value
        else:
            data[key] = value
    path = tmp_path / "h200.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize(
    "change",
    [{"memory_bandwidth_gb_per_s": 4.8}, {"bf16": 0.99}, {"memory_bandwidth_gb_per_s": 4.8e6}],
)
def test_unit_slips_are_refused_with_the_field(tmp_path, change):
    with pytest.raises(ConfigError) as err:
        load_hardware(_variant(tmp_path, **change))
    text = str(err.value)
    assert "peak_tflops" in text and "check the units" in text


def test_the_catalogue_lies_well_inside_the_range(tmp_path):
    lo, hi = RIDGE_RANGE
    for name in shipped_hardware():
        hw = load_hardware(name)
        for dtype, peak in hw.peak_flops_per_s.items():
            ridge = peak / hw.memory_bandwidth_bytes_per_s
            if (dtype == "int8" and hw.compute_capability == 10.3) or name == "H20":
                # real ridges of 20-40 FLOP per byte, inside the range but not a hundred times
                # in: Blackwell Ultra (B300, GB300) cut INT8 to 153.5 / 165 TOPS, and H20's
                # export-capped tensor rate (148 TFLOP/s bf16) sits on 4 TB/s of HBM3
                assert 10 * lo < ridge < hi / 10, name
                continue
            assert 100 * lo < ridge < hi / 10, name
    assert load_hardware(_variant(tmp_path, memory_bandwidth_gb_per_s=5000)).name == "H200"
