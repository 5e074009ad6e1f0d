"""The hardware catalogue: published figures, names, user files and measured devices."""

import pytest

from mlacalc import ConfigError, UnknownHardwareError
from mlacalc.hardware.catalogue import load_hardware, measured_sets, shipped_hardware

GiB, MiB = 2**30, 2**20

# name: (dense bf16 TFLOP/s, fp8 TFLOP/s or None, bandwidth GB/s, memory in bytes): vendor
# datasheets, cited field by field in each hardware_configs/*.yaml. The memory is the capacity as
# the device reports it, from the shared datasheets' mem_capacity (gpu-datasheets/*.yaml) where
# they hold the device: an "80 GB" H100 holds 80 GiB (it was 80e9 B before memory_bytes), and
# the nvidia-smi readings in MiB for B300, GB200, GB300, L40S and the RTX PRO 6000
PUBLISHED = {
    "H100-SXM": (989.5, 1979.0, 3350, 80 * GiB),
    "H100-PCIe": (756.5, 1513.0, 2000, 80 * GiB),
    "H800": (989.0, 1979.0, 3350, 80 * GiB),
    "H200": (990.0, 1979.0, 4800, 141 * GiB),
    "B200": (2250.0, 4500.0, 7700, 180 * GiB),
    "A100-SXM-80GB": (312.0, None, 2039, 80 * GiB),
    "A100-PCIe-40GB": (312.0, None, 1555, 40 * GiB),
    "L40S": (362.05, 733.0, 864, 46_068 * MiB),
    "RTX-4090": (165.15, 330.3, 1008, 24 * GiB),
    "RTX-4080": (97.5, 194.9, 716.8, 16 * GiB),
    "MI300X": (1307.0, 2615.0, 5300, 192 * GiB),
    "B300": (2250.0, 4500.0, 7750, 275_040 * MiB),
    "GB200": (2500.0, 5000.0, 8000, 189_471 * MiB),
    "GB300": (2500.0, 5000.0, 8000, 284_208 * MiB),
    "RTX-PRO-6000-Server": (500.0, 1000.0, 1792, 97_887 * MiB),
    "L4": (121.0, 242.0, 300, 24 * GiB),
    "A30": (165.0, None, 933, 24 * GiB),
    "H20": (148.0, 296.0, 4000, 96 * GiB),
    "MI325X": (1307.4, 2614.9, 6000, 256 * GiB),
    "MI355X": (2516.6, 5033.2, 8000, 288 * GiB),
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
    assert hw.memory_bytes == mem and hw.source and hw.accumulate == "fp32"


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
    assert hw.ridge_point == 100.0 and hw.memory_bytes == 24 * 10**9  # no memory_bytes: the label
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


def test_memory_bytes_is_the_capacity_and_a_unit_slip_is_refused(tmp_path):
    """``memory_bytes`` is the capacity (the ``memory_gb`` label stays for reading); one typed in
    GB or MiB, far from the label, is a one-line error naming the field."""
    path = tmp_path / "my.yaml"
    base = "name: X\npeak_tflops: {bf16: 100}\nmemory_bandwidth_gb_per_s: 1000\nmemory_gb: 80\n"
    path.write_text(base + "memory_bytes: 85899345920\nsource: s\n")
    assert load_hardware(path).memory_bytes == 80 * GiB
    for slip in ("80", "81920", "85899345920.5"):
        path.write_text(base + f"memory_bytes: {slip}\nsource: s\n")
        with pytest.raises(ConfigError) as info:
            load_hardware(path)
        assert info.value.field == "memory_bytes"


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
