"""The hardware catalogue: published figures, names, user files and measured devices."""

import pytest

from mlacalc import ConfigError, UnknownHardwareError
from mlacalc.hardware.catalogue import load_hardware, measured_sets, shipped_hardware

# name: (dense bf16 TFLOP/s, fp8 TFLOP/s or None, bandwidth GB/s, memory GB): vendor datasheets,
# cited field by field in each hardware_configs/*.yaml
PUBLISHED = {
    "H100-SXM": (989.5, 1979.0, 3350, 80),
    "H100-PCIe": (756.5, 1513.0, 2000, 80),
    "H800": (989.0, 1979.0, 3350, 80),
    "H200": (990.0, 1979.0, 4800, 141),
    "B200": (2250.0, 4500.0, 7700, 180),
    "A100-SXM-80GB": (312.0, None, 2039, 80),
    "A100-PCIe-40GB": (312.0, None, 1555, 40),
    "L40S": (362.05, 733.0, 864, 48),
    "RTX-4090": (165.15, 330.3, 1008, 24),
    "RTX-4080": (97.5, 194.9, 716.8, 16),
    "MI300X": (1307.0, 2615.0, 5300, 192),
    "B300": (2250.0, 4500.0, 7750, 288),
    "GB200": (2500.0, 5000.0, 8000, 186),
    "GB300": (2500.0, 5000.0, 8000, 288),
    "RTX-PRO-6000-Server": (500.0, 1000.0, 1792, 96),
    "L4": (121.0, 242.0, 300, 24),
    "A30": (165.0, None, 933, 24),
    "H20": (148.0, 296.0, 4000, 96),
    "MI325X": (1307.4, 2614.9, 6000, 256),
    "MI355X": (2516.6, 5033.2, 8000, 288),
}


def test_catalogue_has_every_device():
    assert set(shipped_hardware()) == set(PUBLISHED)


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_catalogue_figures(name):
    hw = load_hardware(name)
    bf16, fp8, bw, mem = PUBLISHED[name]
    assert hw.peak("bf16") == pytest.approx(bf16 * 1e12, rel=1e-12)
    if fp8:
        assert hw.peak_flops_per_s["fp8"] == pytest.approx(fp8 * 1e12, rel=1e-12)
    else:
        assert "fp8" not in hw.peak_flops_per_s and hw.peak("fp8") == hw.peak("bf16")
    assert hw.memory_bandwidth_bytes_per_s == pytest.approx(bw * 1e9, rel=1e-12)
    assert hw.memory_bytes == mem * 10**9 and hw.source and hw.accumulate == "fp32"


def test_hardware_names_case_insensitive_and_unknown():
    assert load_hardware("h200") is load_hardware("H200")
    with pytest.raises(UnknownHardwareError) as info:
        load_hardware("H300")
    assert "H200" in str(info.value) and "Known" in str(info.value)


def test_user_hardware_file_and_errors(tmp_path):
    path = tmp_path / "my.yaml"
    path.write_text(
        "name: MY-GPU\npeak_tflops: {bf16: 100}\nmemory_bandwidth_gb_per_s: 1000\nmemory_gb: 24\n"
        "source: my lab\n"
    )
    hw = load_hardware(path)
    assert hw.ridge_point == 100.0 and hw.memory_bytes == 24 * 10**9
    path.write_text(
        "name: X\npeak_tflop: {bf16: 1}\nmemory_bandwidth_gb_per_s: 1\nmemory_gb: 1\nsource: s\n"
    )
    with pytest.raises(ConfigError) as info:
        load_hardware(path)
    assert info.value.field == "peak_tflop" and "peak_tflops" in str(info.value)
    path.write_text(
        "name: X\npeak_tflops: {bf16: -1}\nmemory_bandwidth_gb_per_s: 1\nmemory_gb: 1\nsource: s\n"
    )
    with pytest.raises(ConfigError, match="positive"):
        load_hardware(path)


def test_measured_device_loads_from_its_sidecar():
    sets = measured_sets()
    assert sets
    hw = load_hardware(f"measured:{sets[0]}")
    assert (
        hw.measured
        and hw.kind == "cpu"
        and hw.launch_latency_s > 0
        and "fp32" in hw.peak_flops_per_s
    )


def test_wrong_schema_sidecar(tmp_path):
    path = tmp_path / "x.json"
    path.write_text('{"schema": "something/else"}')
    with pytest.raises(ConfigError, match=r"mlacalc\.bench/1") as err:
        load_hardware(path)
    # -H with a JSON that is no sidecar most likely meant a device's figures: name the YAML
    assert "hardware .yaml" in str(err.value) and "H100-SXM.yaml" in str(err.value)


def test_unknown_hardware_suggests_the_name_it_begins_first():
    from mlacalc.words.errors import UnknownHardwareError

    with pytest.raises(UnknownHardwareError) as err:
        load_hardware("mi300")
    assert "Did you mean MI300X," in str(err.value)
