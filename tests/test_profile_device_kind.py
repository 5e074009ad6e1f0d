"""A profile fitted on CPU runs only is refused for a GPU (its fp32 GEMM fit timed H100's bf16
GEMMs by datasheet ratios: 204 us against 44.8 with the default, trial of 2026-11-29), and any
profile is left unused, said, on a CPU."""

from __future__ import annotations

import dataclasses
import shlex

from click.testing import CliRunner

from mlacalc.cli import cli
from mlacalc.timemodel.profile import DEFAULT_PROFILE, load_profile


def _cpu_profile(tmp_path):
    prof = load_profile(DEFAULT_PROFILE)
    cpu = dataclasses.replace(
        prof,
        name="mycpu",
        devices={"cpu-run.json": prof.classes},
        fitted_on=({"device": "cpu-run.json", "tables": {"calibrate:gemm": 18}, "kind": "cpu"},),
    )
    return cpu.save(tmp_path / "mycpu.json")


def test_a_cpu_fit_is_refused_for_a_gpu(tmp_path):
    path = _cpu_profile(tmp_path)
    for command in (
        shlex.split("roofline deepseek-v2-lite -H H100-SXM --batch 4 -s 512"),
        shlex.split("plan deepseek-v2-lite -H H100-SXM --gpus 1 --isl 1000 --osl 200"),
    ):
        out = CliRunner().invoke(cli, [*command, "--profile", str(path)])
        assert out.exit_code != 0, out.output
        message = out.output + str(out.exception)  # the entry point prints an MlacalcError
        assert "--profile" in message and "fitted on CPU runs only" in message
        # the refusal says where a CPU profile is read
        assert "mlacalc validate --measured OTHER_RUN.json --profile" in message


def test_a_profile_is_left_unused_on_a_cpu(tmp_path):
    path = _cpu_profile(tmp_path)
    args = ["roofline", "llama-3-8b", "-H", "measured:cpu-2core-epyc-fp32", "--dtype", "fp32"]
    out = CliRunner().invoke(cli, [*args, "--batch", "1", "-s", "512", "--profile", str(path)])
    assert out.exit_code == 0, out.output
    # ignored, saying where such a profile is read (validate --measured on another run)
    said = " ".join(out.output.split())
    assert "validate --measured OTHER_RUN.json --profile P" in said and "); ignored" in said
