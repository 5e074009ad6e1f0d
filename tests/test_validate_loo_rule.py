"""validate's leave-one-device-out under another engine than TensorRT-LLM composes the engine's
fit of the other device with TensorRT-LLM's fit of that same device, whatever folder is given,
as benchmarks/bench_timemodel.py --engines scores it (it took fit-a100-sxm-80gb for a whole
h100_sxm folder and trtllm's default for a subfolder: SGLang H100 pooled 11.0% against the
bench's 10.5%)."""

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
