"""validate's leave-one-device-out under another engine than TensorRT-LLM composes the engine's
fit of the other device with TensorRT-LLM's shipped profile fitted on that device and not the
one left out (engine_profiles.left_out_base: B200 from the H100 + A100 default, H100 from
fit-b200-sxm), whatever folder is given, as benchmarks/bench_timemodel.py --engines scores it
(it took fit-a100-sxm-80gb for a whole h100_sxm folder and trtllm's default for a subfolder:
SGLang H100 pooled 11.0% against the bench's 10.5%)."""

from __future__ import annotations

import pytest
from reference_data import MEASURED, benchmark

from mlacalc.hardware.catalogue import load_hardware
from mlacalc.measured.mapping import map_table
from mlacalc.measured.tables import load_measured
from mlacalc.measured.validate_tables import validate_measured
from mlacalc.timemodel.engine_profiles import left_out_composed
from mlacalc.timemodel.profile import load_profile

H100 = MEASURED / "h100_sxm"


def _bench():
    return benchmark("bench_timemodel")


@pytest.mark.parametrize("folder", ["mla", "encoder_attention"])
def test_the_cli_pools_as_the_bench_for_sglang_on_h100(folder):
    pytest.importorskip("pyarrow")
    path = H100 / folder
    cli = validate_measured(path, engine="sglang")
    assert "fit-b200-sxm-sglang" in cli.profile and "trtllm's fit-b200-sxm " in cli.profile
    mapped = [map_table(t) for t in load_measured(path, engine="sglang").tables]
    prof = left_out_composed(
        load_profile("fit-b200-sxm-sglang"), load_profile("fit-b200-sxm"), load_hardware("H100-SXM")
    )
    bench = _bench().evaluate({"H100-SXM": mapped}, prof)["H100-SXM"]["pooled"]
    assert cli.overall["median_abs_error"] == pytest.approx(bench["median_abs_error"], rel=1e-9)
    assert cli.overall["p90_abs_error"] == pytest.approx(bench["p90_abs_error"], rel=1e-9)


@pytest.mark.parametrize(
    "engine, system, device, other",
    [
        ("sglang", "b200_sxm", "B200", "fit-h100-sxm-sglang"),
        ("vllm", "h100_sxm", "H100-SXM", "fit-b200-sxm-vllm"),
    ],
)
def test_validate_and_the_engines_bench_leave_a_device_out_by_one_route(
    engine, system, device, other
):
    # the bench filled SGLang's B200 stand-ins from TensorRT-LLM's default (H100 + A100) and
    # validate from fit-h100-sxm (its MoE kinds up to 5 points apart), and its H100 ones from
    # --loo-profile's profile or none at all: both now take engine_profiles.left_out_base
    pytest.importorskip("pyarrow")
    from mlacalc.measured import validate_tables as vt

    path = MEASURED / system / "mla_bmm"
    tables = load_measured(path, engine=engine).tables
    composed, label = vt._choose_profile(None, tables, engine)
    bench = _bench().left_out_profile(engine, device, other)
    assert label.startswith(other)
    assert composed.classes == bench.classes and composed.devices == bench.devices
    base = "default" if device == "B200" else "fit-b200-sxm"
    assert f"trtllm's {base} standing in" in label
    assert any(f"profile {base} " in n for n in bench.notes)
    cli = validate_measured(path, engine=engine)
    mapped = [map_table(t) for t in tables]
    pooled = _bench().evaluate({device: mapped}, bench)[device]["pooled"]
    assert cli.overall["median_abs_error"] == pytest.approx(pooled["median_abs_error"], rel=1e-9)
    assert cli.overall["p90_abs_error"] == pytest.approx(pooled["p90_abs_error"], rel=1e-9)
