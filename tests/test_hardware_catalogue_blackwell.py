"""The devices added from datasheets (Blackwell, Blackwell Ultra, the RTX PRO 6000, L4, A30,
H20, MI325X, MI355X): every figure sourced and physical, assumptions flagged, the NVL72 rack as
one NVLink domain, and each device predicted from the fitted architecture nearest it, saying
which fit stood in."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml

import mlacalc
from mlacalc.hardware.catalogue import load_hardware, shipped_hardware
from mlacalc.models.loading import load_model
from mlacalc.serving.layout import make_layout
from mlacalc.serving.search_space import needs_network
from mlacalc.timemodel.device import device_figures
from mlacalc.timemodel.profile import Profile, load_profile, shipped_profiles
from mlacalc.words.errors import ConfigError, UnknownHardwareError

ADDED = ("B300", "GB200", "GB300", "RTX-PRO-6000-Server", "L4", "A30", "H20", "MI325X", "MI355X")
BLACKWELL_DC = ("B200", "B300", "GB200", "GB300")


@pytest.mark.parametrize("name", shipped_hardware())
def test_every_assumed_figure_is_sourced_as_an_assumption(name):
    hw = load_hardware(name)
    for key in hw.assumed:
        assert "assumption" in hw.field_sources[key], (name, key)
    # and the time model lists the ones it reads among the device's assumed figures
    listed = " ".join(device_figures(hw).fallbacks)
    for key, figure in (("l2_mib", "l2_bytes"), ("scale_up_latency_us", "link_latency_s")):
        if key in hw.assumed:
            assert figure in listed, (name, key)


@pytest.mark.parametrize("name", ADDED)
def test_added_devices_are_datasheet_only_and_say_so(name):
    hw = load_hardware(name)
    assert hw.source and hw.sm_count and hw.memory_bytes and hw.scale_up_bytes_per_s
    assert "datasheet figures only" in hw.notes
    # no figure is another tool's observation-based tuning
    for text in (*hw.source, *hw.field_sources.values()):
        assert "0.8" not in text.split("scaling")[0][-6:]  # mem_bw_empirical_scaling_factor
    assert "10 us" not in " ".join(hw.field_sources.values())  # the tool's p2p_latency


def test_blackwell_ratios_are_sane():
    b200 = load_hardware("B200")
    for name in BLACKWELL_DC:
        hw = load_hardware(name)
        fig = device_figures(hw)
        assert fig.tensor_core_generation == "sm90" and hw.architecture == "Blackwell"
        assert hw.peak("fp8") == pytest.approx(2 * hw.peak("bf16"))
        assert hw.peak("fp4") >= 2 * hw.peak("fp8")  # Blackwell Ultra: 3x
        assert hw.peak("bf16") >= b200.peak("bf16") and hw.memory_bytes >= 180e9
        assert hw.scale_up_bytes_per_s == 900e9 and hw.scale_up_multicast
        # 8,192 dense bf16 FLOP per clock per SM: twice Hopper's
        rate = hw.peak("bf16") / (hw.sm_count * hw.boost_clock_hz)
        assert rate == pytest.approx(8192, rel=0.002), name
    # Blackwell Ultra traded INT8 for FP4
    assert load_hardware("B300").peak("int8") < b200.peak("int8") / 25
    assert load_hardware("GB200").peak("bf16") / b200.peak("bf16") == pytest.approx(2500 / 2250)


def test_other_added_devices_are_physical():
    pro = load_hardware("RTX-PRO-6000-Server")
    assert device_figures(pro).tensor_core_generation == "sm80"  # compute capability 12.0
    assert pro.peak("fp4") == 2 * pro.peak("fp8") == 4 * pro.peak("bf16") == 2000e12
    l4, l40s = load_hardware("L4"), load_hardware("L40S")
    assert l4.memory_bandwidth_bytes_per_s < l40s.memory_bandwidth_bytes_per_s / 2
    a30 = load_hardware("A30")
    assert "fp8" not in a30.peak_flops_per_s and a30.peak("fp8") == a30.peak("bf16")
    h20, h100 = load_hardware("H20"), load_hardware("H100-SXM")
    assert h20.peak("bf16") < h100.peak("bf16") / 6 and h20.boost_clock_hz is None
    assert "clock_hz" in " ".join(device_figures(h20).fallbacks)  # no clock: said, not hidden
    for name, rate in (("MI325X", 2048), ("MI355X", 4096)):
        hw = load_hardware(name)
        assert hw.vendor == "amd" and device_figures(hw).tensor_core_generation == "other"
        assert hw.peak("bf16") == pytest.approx(hw.sm_count * hw.boost_clock_hz * rate, rel=1e-3)


def test_nvl72_rack_is_one_nvlink_domain():
    gb = load_hardware("GB200")
    assert gb.gpus_per_node == 4 and gb.scale_up_gpus == 72
    assert gb.link(4) == gb.link(72) == (900e9, 5.33e-6)  # NVLink across the trays of a rack
    assert gb.link(73) == (100e9, 2.8e-6)  # beyond the rack: the network
    b200 = load_hardware("B200")
    assert b200.scale_up_gpus == 8 and b200.link(16) == (50e9, 2.8e-6)
    m = load_model("deepseek-v3")
    inside = make_layout(m, 64, tp=1, ep=64, dp_attention=True)
    beyond = make_layout(m, 128, tp=1, ep=128, dp_attention=True)
    assert not needs_network(inside, gb) and needs_network(inside, b200)
    assert needs_network(beyond, gb)
    assert load_hardware("GB300").scale_up_gpus == 72


def test_a_layout_inside_the_rack_is_timed_over_nvlink():
    """TP16 spans four trays of a GB200 rack over NVLink, two HGX B200 nodes over the network:
    the same model and load step much faster on the rack, most of it the all-reduce."""
    kw = {"isl": 1000, "osl": 200, "concurrency": 64}
    gb = mlacalc.plan("llama-3-70b", "GB200", 16, **kw)
    b200 = mlacalc.plan("llama-3-70b", "B200", 16, **kw)
    assert gb.layout == b200.layout == "TP16"
    assert gb.tpot_s < 0.8 * b200.tpot_s


def _variant(tmp_path, **change):
    data = yaml.safe_load(Path(load_hardware("GB200").origin).read_text())
    data.update(change)
    path = tmp_path / "gb.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize(
    "change,field",
    [
        ({"scale_up_domain_gpus": 2}, "scale_up_domain_gpus"),
        ({"scale_up_domain_gpus": 7.5}, "scale_up_domain_gpus"),
        ({"scale_up_domain_gpus": -72}, "scale_up_domain_gpus"),
        ({"assumed": "l2_mib"}, "assumed"),
        ({"assumed": ["name"]}, "assumed.name"),
        ({"assumed": ["boost_clock_mhz"], "boost_clock_mhz": None}, "assumed.boost_clock_mhz"),
        ({"scale_up_domain_gpu": 72}, "scale_up_domain_gpu"),
    ],
)
def test_bad_domain_and_assumed_fields_are_named(tmp_path, change, field):
    path = _variant(tmp_path, **change)
    if change.get("boost_clock_mhz", 0) is None:
        data = yaml.safe_load(path.read_text())
        del data["boost_clock_mhz"], data["field_sources"]["boost_clock_mhz"]
        path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError) as err:
        load_hardware(path)
    assert field in str(err.value) and "\n" not in str(err.value)


def _profile(*devices: str) -> Profile:
    """The shipped fits of ``devices``, with a Blackwell fit made of H100's parameters where
    "B200" is asked for and none ships (the rule reads which devices are fitted, not values)."""
    shipped = load_profile("default")
    tables = {d: shipped.devices.get(d) or shipped.devices["H100-SXM"] for d in devices}
    return Profile(name="test", classes=shipped.classes, devices=tables)


def test_blackwell_parts_take_a_b200_fit_when_one_exists():
    prof = _profile("H100-SXM", "A100-SXM-80GB", "B200")
    for name in ("B300", "GB200", "GB300"):
        hw = load_hardware(name)
        assert prof.nearest_fitted(hw) == "B200"
        _, how = prof.params(name, "gemm", "bf16", hw)
        assert how == f"{name} by datasheet ratios from B200 (same tensor-core generation)"
        text = prof.describe(name, hw)
        assert "from B200" in text and "assumed, not its datasheet's: " in text
        assert "l2_mib" in text  # the L2 is B200's, stated
        # the clock is derived from the quoted peak, not a datasheet figure: stated too (the
        # footnote listed the L2 and the latencies, not the clock that sets the fixed costs)
        assert f"clock_hz = {hw.boost_clock_hz:g} (boost_clock_mhz: derived" in text
    pred = mlacalc.predict_time("deepseek-v3", "B300", "decode", 4096, 8, profile=prof)
    assert "from B200" in pred.calibration and "l2_mib" in pred.calibration


def test_without_a_fit_of_its_architecture_the_pooled_fit_stands_in_unvalidated():
    """Another architecture's own fit does not stand in (the pooled fit does); the prediction
    names the nearest fitted architecture, whose kernels the device runs, and says
    unvalidated."""
    prof = _profile("H100-SXM", "A100-SXM-80GB")
    for name in BLACKWELL_DC:
        hw = load_hardware(name)
        assert prof.nearest_fitted(hw) is None
        assert prof.nearest_architecture(hw) == "H100-SXM"
        text = prof.describe(name, hw)
        assert (
            "pooled fit" in text
            and "nearest fitted tensor-core generation Hopper (H100-SXM)" in text
        )
        assert "unvalidated" in text
        _, how = prof.params(name, "gemm", "bf16", hw)
        assert how.startswith(f"{name} by datasheet ratios (profile fitted on")
    for name in ("RTX-PRO-6000-Server", "L40S", "L4"):
        hw = load_hardware(name)
        assert prof.nearest_fitted(hw) is None
        text = prof.describe(name, hw)
        assert "nearest fitted tensor-core generation Ampere (A100-SXM-80GB)" in text
        assert "unvalidated" in text
    for name, near in (("A30", "A100-SXM-80GB"), ("H20", "H100-SXM")):  # same architecture
        hw = load_hardware(name)
        assert prof.nearest_fitted(hw) == near
        text = prof.describe(name, hw)
        assert f"from {near} (same tensor-core generation)" in text
        assert "unvalidated" not in text
    for name in ("MI300X", "MI325X", "MI355X"):
        hw = load_hardware(name)
        assert prof.nearest_fitted(hw) is None and prof.nearest_architecture(hw) is None
        text = prof.describe(name, hw)
        assert "pooled fit" in text and "unvalidated" in text


@pytest.mark.parametrize("profile", shipped_profiles())
def test_shipped_profiles_transfer_by_architecture(profile):
    """Whatever a shipped profile was fitted on, a B300 takes its Blackwell fit if it has one,
    else the pooled fit, naming a Hopper fit as the nearest architecture; the prediction says
    which."""
    prof = load_profile(profile)
    if not prof.fitted_devices:
        pytest.skip(f"profile {profile} holds no device fit")
    caps = {}
    for d in prof.fitted_devices:
        try:
            caps[d] = device_figures(load_hardware(d)).compute_capability
        except mlacalc.MlacalcError:
            continue
    b300 = prof.nearest_fitted(load_hardware("B300"))
    blackwell = [d for d, c in caps.items() if math.floor(c) == 10]
    hopper = [d for d, c in caps.items() if 9 <= c < 12]
    kin = prof.nearest_architecture(load_hardware("B300"))
    if blackwell:
        assert b300 in blackwell and kin is None
    else:
        assert b300 is None and (kin in hopper if hopper else kin is None)
    pred = mlacalc.predict_time("llama-3-8b", "B300", "decode", 2048, 4, profile=prof)
    assert "B300 by datasheet ratios from" in pred.calibration
    assert f"from {b300}" in pred.calibration if b300 else "unvalidated" in pred.calibration


def test_blackwell_parts_use_a_shipped_blackwell_fit_by_default():
    """With no profile named, B300, GB200 and GB300 are predicted with a shipped one-device
    Blackwell fit where one ships (fit-b200-sxm), else the default's pooled fit, saying which."""
    blackwell = [
        name
        for name in shipped_profiles()
        if any(
            math.floor(device_figures(load_hardware(d)).compute_capability) == 10
            for d in load_profile(name).fitted_devices
        )
    ]
    for hw in ("B300", "GB200", "GB300"):
        pred = mlacalc.predict_time("deepseek-v3", hw, "decode", 4096, 8)
        if blackwell:
            assert pred.profile in blackwell
            assert f"{hw} by datasheet ratios from B200 (same tensor-core generation)" in (
                pred.calibration
            )
        else:
            assert "pooled fit" in pred.calibration and "unvalidated" in pred.calibration
    # the rack's GPUs are faster than HGX B200's (8 TB/s, 2.5 PFLOP/s bf16), not slower
    b200 = mlacalc.predict_time("deepseek-v3", "B200", "decode", 4096, 64, scope="model")
    gb200 = mlacalc.predict_time("deepseek-v3", "GB200", "decode", 4096, 64, scope="model")
    assert 0.85 * b200.seconds < gb200.seconds < b200.seconds


def test_names_people_use_for_the_added_devices():
    assert load_hardware("rtx-pro-6000").name == "RTX-PRO-6000-Server"
    assert load_hardware("rtx_pro_6000_server").name == "RTX-PRO-6000-Server"  # the system file
    gb = load_hardware("GB200-NVL72")
    assert gb.name == "GB200" and gb.alias_note == "'GB200-NVL72' means GB200"
    assert load_hardware("gb300-nvl72").name == "GB300" and load_hardware("b300").name == "B300"


@pytest.mark.parametrize(
    ("spelt", "entry"),
    [
        ("GB200 NVL72", "GB200"),
        ("gb300_nvl72", "GB300"),
        ("RTX PRO 6000", "RTX-PRO-6000-Server"),
        ("h100 sxm", "H100-SXM"),
    ],
)
def test_spaces_and_underscores_spell_the_hyphenated_names(spelt, entry):
    hw = load_hardware(spelt)
    assert hw.name == entry and hw.alias_note == f"'{spelt}' means {entry}"


def test_a_spelling_that_names_nothing_still_lists_the_known_names():
    with pytest.raises(UnknownHardwareError, match=r"Did you mean GB200.* Known: .*GB300"):
        load_hardware("GB200 NVL36")
