"""The hardware catalogue as a kernel model reads it: every figure present, sourced, physical."""

from __future__ import annotations

import math

import pytest

from mlacalc.hardware.catalogue import (
    MEASURED_SYSTEMS,
    AmbiguousHardwareError,
    UnknownHardwareError,
    load_hardware,
    shipped_hardware,
)
from mlacalc.words.errors import ConfigError, InvalidArgumentError, MlacalcError

DATACENTER = ("H100-SXM", "H200", "H800", "A100-SXM-80GB", "B200", "MI300X")

# Figures a kernel model reads, and the YAML key that carries each one's source.
SOURCED = {
    "peak_flops_per_s": "peak_tflops",
    "memory_bandwidth_bytes_per_s": "memory_bandwidth_gb_per_s",
    "memory_bytes": "memory_bytes",
    "sm_count": "sm_count",
    "l2_bytes": "l2_mib",
    "boost_clock_hz": "boost_clock_mhz",
    "scale_up_bytes_per_s": "scale_up_gb_per_s",
    "scale_up_latency_s": "scale_up_latency_us",
    "scale_out_bytes_per_s": "scale_out_gb_per_s",
    "scale_out_latency_s": "scale_out_latency_us",
    "gpus_per_node": "gpus_per_node",
    "scale_up_domain_gpus": "scale_up_domain_gpus",
    "compute_capability": "compute_capability",
}


@pytest.mark.parametrize("name", shipped_hardware())
def test_every_figure_has_a_source(name):
    hw = load_hardware(name)
    for attr, key in SOURCED.items():
        if getattr(hw, attr) is not None:
            assert hw.field_sources.get(key), f"{name}: {key} has no entry in field_sources"
    assert hw.sm_count and hw.scale_up_bytes_per_s, (
        f"{name}: SM count and scale-up link are required"
    )


@pytest.mark.parametrize("name", DATACENTER)
def test_datacenter_devices_have_network_and_node(name):
    hw = load_hardware(name)
    assert (hw.gpus_per_node == 8 and hw.scale_out_bytes_per_s and hw.l2_bytes) or name == "B200"
    assert hw.scale_up_bytes_per_s > hw.scale_out_bytes_per_s  # NVLink/IF outruns the NIC


def test_tensor_peak_equals_sms_times_clock_times_rate_per_sm():
    """An independent route to each peak: SMs x clock x dense FLOP per SM per clock."""
    per_sm_clock = {
        "H100-SXM": 4096,
        "H200": 4096,
        "H800": 4096,
        "H100-PCIe": 4096,
        "A100-SXM-80GB": 2048,
        "A100-PCIe-40GB": 2048,
        "RTX-4090": 512,
        "RTX-4080": 512,
        "L40S": 1024,
        "MI300X": 2048,
        "MI325X": 2048,
        "MI355X": 4096,  # CDNA 4 doubles CDNA 3's rate per compute unit
        "A30": 2048,
        "L4": 1024,
        "RTX-PRO-6000-Server": 1024,  # compute capability 12.0: Ada's rate per SM
        "B200": 8192,  # fifth-generation tensor cores: twice Hopper's rate per SM
        "B300": 8192,
        "GB200": 8192,
        "GB300": 8192,
        # H20 has none: its rate is capped below SMs x clock x Hopper's (no clock is given)
    }
    for name, rate in per_sm_clock.items():
        hw = load_hardware(name)
        assert hw.sm_count * hw.boost_clock_hz * rate == pytest.approx(
            hw.peak("bf16"), rel=0.015
        ), name  # L40S: 1.2%


def test_rtx_4080_bf16_is_the_tensor_rate_not_fp32():
    hw = load_hardware("RTX-4080")
    fp32_non_tensor = 76 * 128 * 2 * 2.505e9  # 48.7 TFLOP/s: CUDA cores, not tensor
    assert hw.peak("bf16") == pytest.approx(2 * fp32_non_tensor, rel=1e-3) == 97.5e12
    # the same rate per SM per clock as RTX-4090's published 165.15 TFLOP/s
    r4090 = load_hardware("RTX-4090")
    assert hw.peak("bf16") / (hw.sm_count * hw.boost_clock_hz) == pytest.approx(
        r4090.peak("bf16") / (r4090.sm_count * r4090.boost_clock_hz), rel=1e-3
    )


def test_b200_sm_count_and_fp4():
    hw = load_hardware("B200")
    assert hw.sm_count == 148 and hw.peak("fp4") == 2 * hw.peak("fp8") == 9000e12


def test_fp4_only_where_the_device_has_it():
    have = {n for n in shipped_hardware() if "fp4" in load_hardware(n).peak_flops_per_s}
    assert have == {"B200", "B300", "GB200", "GB300", "RTX-PRO-6000-Server", "MI355X"}


def test_links_in_and_across_nodes():
    hw = load_hardware("H800")
    assert hw.link(8) == (200e9, 3.33e-6)  # NVLink within the node
    assert hw.link(16) == (50e9, 2.8e-6)  # InfiniBand across nodes
    with pytest.raises(InvalidArgumentError, match="scale_out_gb_per_s"):
        load_hardware("RTX-4080").link(2) if load_hardware(
            "RTX-4080"
        ).gpus_per_node else load_hardware("L40S").link(16)


def test_measured_systems_map_to_catalogue_devices():
    """The shared measured sets' systems (aiconfigurator folder names) are catalogue devices."""
    a100 = load_hardware("a100_sxm")
    assert a100.name == "A100-SXM-80GB" and a100.sm_count == 108 and a100.memory_bytes == 80 * 2**30
    assert a100.memory_bandwidth_bytes_per_s == 2039e9 and "a100_sxm" in a100.alias_note
    assert load_hardware("h100_sxm").name == "H100-SXM"
    assert set(MEASURED_SYSTEMS.values()) <= set(shipped_hardware())


def test_aliases_say_what_they_mean():
    h100 = load_hardware("H100")
    assert h100.name == "H100-SXM" and h100.alias_note == "'H100' means H100-SXM"
    assert load_hardware("H100-SXM").alias_note == ""
    with pytest.raises(AmbiguousHardwareError) as info:
        load_hardware("a100")
    assert "A100-SXM-80GB" in str(info.value) and "A100-PCIe-40GB" in str(info.value)
    assert isinstance(info.value, MlacalcError) and info.value.argument == "hardware"
    with pytest.raises(UnknownHardwareError):
        load_hardware("H300")
    with pytest.raises(InvalidArgumentError, match="hardware"):
        load_hardware(42)


BASE = (
    "name: X\npeak_tflops: {bf16: 100}\nmemory_bandwidth_gb_per_s: 1000\nmemory_gb: 24\nsource: s\n"
)


@pytest.mark.parametrize(
    "line, field",
    [
        ("peak_tflops: {bf16: .nan}", "peak_tflops.bf16"),
        ("peak_tflops: {bf16: .inf}", "peak_tflops.bf16"),
        ("memory_bandwidth_gb_per_s: -1", "memory_bandwidth_gb_per_s"),
        ("memory_gb: .nan", "memory_gb"),
        ("scale_up_gb_per_s: .inf", "scale_up_gb_per_s"),
        ("scale_out_latency_us: -2.8", "scale_out_latency_us"),
        ("l2_mib: .nan", "l2_mib"),
        ("gpus_per_node: 2.5", "gpus_per_node"),
        ("sm_count: 0", "sm_count"),
        ("compute_capability: -9.0", "compute_capability"),
    ],
)
def test_non_physical_figures_are_refused_by_field(tmp_path, line, field):
    key = line.split(":")[0]
    text = (
        "\n".join(x for x in BASE.splitlines() if not x.startswith(key + ":")) + "\n" + line + "\n"
    )
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_hardware(path)
    assert info.value.field == field and "positive" in str(info.value)


def test_field_sources_must_name_real_fields(tmp_path):
    path = tmp_path / "x.yaml"
    path.write_text(BASE + "field_sources: {l2_mb: whitepaper}\n")
    with pytest.raises(ConfigError) as info:
        load_hardware(path)
    assert info.value.field == "field_sources.l2_mb"


def test_user_file_with_links(tmp_path):
    path = tmp_path / "x.yaml"
    path.write_text(
        BASE + "scale_up_gb_per_s: 100\nscale_up_latency_us: 2\ngpus_per_node: 4\nl2_mib: 8\n"
    )
    hw = load_hardware(path)
    assert hw.link(4) == (100e9, 2e-6) and hw.l2_bytes == 8 * 2**20
    assert math.isclose(hw.to_dict()["scale_up_bytes_per_s"], 100e9)


def test_measured_set_reader_agrees_with_the_catalogue():
    """The measured-set reader's system -> device map is the catalogue's one table (not a copy)
    and its L2 sizes are the catalogue's."""
    sets = pytest.importorskip("mlacalc.measured.tables")
    assert sets.SYSTEM_DEVICES is MEASURED_SYSTEMS
    for system, l2 in sets.SYSTEM_L2_BYTES.items():
        assert load_hardware(system).l2_bytes == l2, system


def test_user_file_names_its_architecture(tmp_path):
    """A user file may give the architecture and compute capability; the time model reads the
    capability to choose the kernels of the device's tensor-core generation (Hopper's 9.x
    kernels; pre-Hopper mma.sync operand reads in MLA decode); a file without either gets
    the "other" generation."""
    from mlacalc.timemodel.device import device_figures, mla_decode_kernel

    path = tmp_path / "x.yaml"
    path.write_text(BASE + "architecture: Hopper\ncompute_capability: 9.0\n")
    hw = load_hardware(path)
    assert hw.architecture == "Hopper" and hw.compute_capability == 9.0
    assert hw.to_dict()["compute_capability"] == 9.0 and device_figures(hw).sm90_or_later
    ampere = tmp_path / "a.yaml"
    ampere.write_text(BASE + "compute_capability: 8.6\n")
    assert mla_decode_kernel(load_hardware(ampere))["operand_reads"] == 4.0
    plain = tmp_path / "p.yaml"
    plain.write_text(BASE)
    fig = device_figures(load_hardware(plain))
    assert fig.compute_capability == 0.0 and not fig.sm90_or_later
    assert fig.tensor_core_generation == "other"
    assert mla_decode_kernel(fig) == {"kv_split": 1.0, "operand_reads": 1.0}
