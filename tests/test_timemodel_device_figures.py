"""Device figures come from the hardware catalogue alone: the time model's figures, the
measured-set reader's system table and L2 sizes are the catalogue's, and a figure a file does
not give is an assumption the figures name."""

from __future__ import annotations

import pytest

from mlacalc.hardware.catalogue import MEASURED_SYSTEMS, load_hardware, shipped_hardware
from mlacalc.timemodel.device import ASSUMED, device_figures
from mlacalc.words.errors import ConfigError


def test_figures_are_the_catalogues():
    for name in shipped_hardware():
        hw = load_hardware(name)
        fig = device_figures(hw)
        assert fig.sm_count == hw.sm_count, name
        if hw.l2_bytes:
            assert fig.l2_bytes == hw.l2_bytes, name
        if hw.scale_up_latency_s:
            assert fig.link_latency_s == hw.scale_up_latency_s, name
        if hw.scale_up_multicast is not None:
            assert fig.link_multicast == float(hw.scale_up_multicast), name
        # what the file lacks is one of the stated assumptions, named as such; what the file
        # itself lists as assumed is named with the file's own source
        for note in fig.fallbacks:
            figure = note.split(" = ")[0]
            own = note[note.index(" (") + 2 : -1].removeprefix("assumed: ")
            assert (figure in ASSUMED and ASSUMED[figure][1] in note) or (
                own in hw.field_sources.values() and "assumption" in own
            ), (name, note)


def test_every_multicast_figure_has_a_source():
    for name in shipped_hardware():
        hw = load_hardware(name)
        if hw.scale_up_multicast is not None:
            assert hw.field_sources.get("scale_up_multicast"), name


def test_multicast_must_be_true_or_false(tmp_path):
    base = (
        "name: X\npeak_tflops: {bf16: 100}\nmemory_bandwidth_gb_per_s: 1000\nmemory_gb: 10\n"
        "source: test\n"
    )
    path = tmp_path / "x.yaml"
    path.write_text(base + "scale_up_multicast: 1\n")
    with pytest.raises(ConfigError, match="scale_up_multicast"):
        load_hardware(path)
    path.write_text(base + "scale_up_multicast: false\n")
    hw = load_hardware(path)
    assert hw.scale_up_multicast is False and device_figures(hw).link_multicast == 0.0
    assert not [f for f in device_figures(hw).fallbacks if f.startswith("link_multicast")]


def test_measured_systems_read_the_catalogue():
    tables = pytest.importorskip("mlacalc.measured.tables")
    assert tables.SYSTEM_DEVICES is MEASURED_SYSTEMS
    for system, device in MEASURED_SYSTEMS.items():
        l2 = load_hardware(device).l2_bytes
        assert tables.SYSTEM_L2_BYTES.get(system) == (l2 or None), system
    assert tables.SYSTEM_L2_BYTES["h100_sxm"] == 50 * 2**20
    assert tables.SYSTEM_L2_BYTES["a100_sxm"] == 40 * 2**20
