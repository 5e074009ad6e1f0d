"""calibrate says a poor fit (trial of 2026-11-29: a noisy CPU run's GEMM fit, residuals 79% /
155% with parameters on their search bounds, was written without a word): one line per class
on stderr and in the profile's notes; a clean fit says nothing."""

from __future__ import annotations

import numpy as np
from click.testing import CliRunner

from mlacalc.cli import cli
from mlacalc.hardware.catalogue import load_hardware
from mlacalc.measured.calibrate import calibrate
from mlacalc.timemodel.device import device_figures
from mlacalc.timemodel.fit import Observations
from mlacalc.timemodel.terms import default_params, kernel_terms
from mlacalc.words.kernels import Kernel, batches_of


def _gemms(ms, n=4096, k=4096):
    kernels = [
        Kernel(
            f"g{m}",
            "gemm",
            "bf16",
            flops=2 * m * n * k,
            bytes=2 * (m * k + n * k + m * n),
            shape={"m": m, "n": n, "k": k, "warm_l2": 0},
        )
        for m in ms
    ]
    ((_, batch),) = batches_of(kernels)
    return batch


def _obs(noise: float, rows: int = 30):
    fig = device_figures(load_hardware("H100-SXM"))
    truth = default_params("gemm")
    truth.update(eff_compute=0.7, fixed_s=3e-6)
    batch = _gemms(np.unique(np.geomspace(1, 8192, rows).astype(int)))
    seconds = kernel_terms(batch, fig, truth)["seconds"]
    rng = np.random.default_rng(0)
    seconds = seconds * np.exp(rng.normal(0.0, noise, len(seconds)))  # log-normal spread
    return [Observations("H100-SXM", "gemm_perf", batch, seconds, source="h.parquet")]


def test_a_clean_fit_says_nothing():
    # 30 distinct rows: 3 for each of a GEMM fit's 10 parameters (28 were 3 for 9 before the
    # output write's rate, write_share, was fitted too)
    prof = calibrate(_obs(0.0, rows=32), name="clean")
    assert not [n for n in prof.notes if n.startswith("poor fit: ")]


def test_a_noisy_fit_is_said_with_its_residuals_and_rows():
    prof = calibrate(_obs(1.0), name="noisy")
    (line,) = [n for n in prof.notes if n.startswith("poor fit: ")]
    assert line.startswith("poor fit: H100-SXM: gemm:bf16: residuals median ")
    assert " rows for 10 parameters" in line


def test_few_rows_for_the_parameters_are_said():
    prof = calibrate(_obs(0.0, rows=20), name="few")  # 19 distinct rows: under 3 a parameter
    (line,) = [n for n in prof.notes if n.startswith("poor fit: ")]
    assert "19 rows for 10 parameters" in line
    assert "on their search bounds: " in line  # a noise-free fit leaves uninformed ones there


def test_the_cli_warns_each_poor_class(tmp_path, monkeypatch):
    import mlacalc.measured.calibrate as cal

    noisy = calibrate(_obs(1.0), name="noisy")
    monkeypatch.setattr(cal, "calibrate", lambda *a, **k: noisy)
    out = CliRunner().invoke(cli, ["calibrate", "x", "-o", str(tmp_path / "p.json")])
    assert out.exit_code == 0, out.output
    assert "poor fit: H100-SXM: gemm:bf16: residuals median" in out.output
