"""The terms that change from Hopper to data-centre Blackwell (docs/time-model.md, "What carries
from Hopper to Blackwell"): operand reuse at twice the tensor rate per SM, tcgen05's 128-row MMA
and MN-major fp8 operand, block scales inside the MMA, and the nvfp4 stand-in of a fit without
fp4 tensor cores."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from mlacalc.hardware.catalogue import load_hardware
from mlacalc.timemodel.device import device_figures
from mlacalc.timemodel.profile import load_profile
from mlacalc.timemodel.shared import mma_rows, operand_reuse, tile_rate
from mlacalc.timemodel.terms import default_params, kernel_terms
from mlacalc.words.kernels import KernelBatch


def _fig(name):
    return device_figures(load_hardware(name))


@pytest.mark.parametrize(
    "name, reuse, tcgen05, rows",
    [
        ("H100-SXM", 1.0, False, 64.0),
        ("H200", 1.0, False, 64.0),
        ("H20", 0.25, False, 64.0),  # cut tensor cores: a quarter of the reuse suffices
        ("A100-SXM-80GB", 1.0, False, 16.0),
        ("B200", 2.0, True, 128.0),
        ("GB200", 2.0, True, 128.0),
        ("B300", 2.0, True, 128.0),
        ("RTX-PRO-6000-Server", 1.0, False, 16.0),  # consumer Blackwell: mma.sync
        ("MI300X", 1.0, False, 64.0),
    ],
)
def test_blackwell_figures(name, reuse, tcgen05, rows):
    fig = _fig(name)
    assert operand_reuse(fig) == reuse
    assert fig.tcgen05 is tcgen05
    assert mma_rows(fig) == rows


def test_tile_rate_needs_twice_the_reuse_at_twice_the_rate():
    # 128 x 256 (intensity 85.3) is at the full rate on Hopper, sqrt(85.3 / 128) on B200;
    # 256 x 256 (the SM pair's tile, intensity 128) is at the full rate on both
    assert tile_rate(128, 256) == 1.0
    assert tile_rate(128, 256, 2.0) == pytest.approx((128 * 256 / 384 / 128) ** 0.5)
    assert tile_rate(256, 256, 2.0) == 1.0
    assert tile_rate(64, 64, 2.0) == pytest.approx(tile_rate(64, 64) / 2**0.5)


def _gemm(dtype, m=8192, n=8192, k=8192):
    return KernelBatch(
        kind="gemm",
        dtype=dtype,
        flops=np.array([2.0 * m * n * k]),
        bytes=np.array([float((m * k + k * n + m * n) * 2)]),
        calls=np.array([1.0]),
        shape={"m": np.array([m]), "n": np.array([n]), "k": np.array([k])},
    )


def test_a_large_gemm_on_b200_runs_at_the_reuse_its_largest_tile_reaches():
    """A compute-bound bf16 GEMM on B200 takes about 1 / 0.816 of the time its doubled rate
    alone gives; on H100 the rule is unchanged."""
    prm = default_params("gemm")
    b200 = _fig("B200")
    # B200's figures under a rule without the reuse (another vendor's part: same GEMM tiles)
    plain = dataclasses.replace(b200, vendor="amd")
    assert operand_reuse(plain) == 1.0
    with_reuse = kernel_terms(_gemm("bf16"), b200, prm)["compute_s"][0]
    without = kernel_terms(_gemm("bf16"), plain, prm)["compute_s"][0]
    assert with_reuse / without == pytest.approx(1.0 / tile_rate(128, 256, 2.0), rel=0.02)


def test_block_scales_cost_nothing_on_the_cuda_cores_of_blackwell():
    """Hopper's block-scaled fp8 GEMM pays ``promote_cycles`` per output element and K block;
    B200's MMA applies the scales itself."""
    base = default_params("gemm")
    costly = dict(base, promote_cycles=0.2)
    for name, differs in (("H100-SXM", True), ("B200", False)):
        fig = _fig(name)
        a = kernel_terms(_gemm("fp8_block"), fig, base)["seconds"][0]
        b = kernel_terms(_gemm("fp8_block"), fig, costly)["seconds"][0]
        assert bool(b > a * 1.01) is differs


def test_nvfp4_borrows_an_fp8_fit_where_no_fp4_was_measured():
    """Where no fp4 was measured an nvfp4 GEMM or MoE borrows the block-scaled fp8 fit under
    TensorRT-LLM (profile._STAND_INS); SGLang's nvfp4 GEMM its CUTLASS per-tensor fp8 fit
    (profile._KIND_FIRST_STAND_INS)."""
    hw = load_hardware("B200")
    sg = load_profile("fit-h100-sxm-sglang")
    got, _ = sg.params("B200", "gemm", "nvfp4", hw)
    assert got["fixed_s"] == sg.params("B200", "gemm", "fp8", hw)[0]["fixed_s"]
    prof = load_profile("default")
    for kind, dtype in (("gemm", "fp8_block"), ("moe", "fp8_block")):
        got, _ = prof.params("B200", kind, "nvfp4", hw)
        lent, _ = prof.params("B200", kind, dtype, hw)
        assert got["eff_compute"] == lent["eff_compute"]
        assert got["fixed_s"] == lent["fixed_s"]


def test_a_step_fp4_gemm_runs_the_nvfp4_kernel_and_its_rules():
    """A model step's fp4 GEMMs and MoE (``--weight-dtype fp4``, an NVFP4 checkpoint) run the
    kernel the device's fp4 tensor cores run, timed as the measured ``nvfp4`` rows are, K never
    split and the input quantized (a reviewer found the step's "fp4" missing those rules: at
    one row and k = 65,536 an fp4 GEMM took 1.7x its k = 8,192 time, nvfp4's 8x); on H100,
    without fp4 tensor cores, the weight-only kernel."""
    from mlacalc.timemodel.kernel_time import device_batch, predict_kernels
    from mlacalc.words.kernels import Kernel, batches_of

    def gemm(dtype, k):
        shape = {"m": 1, "n": 128, "k": k, "groups": 1}
        return Kernel("g", "gemm", dtype, 2.0 * 128 * k, 128 * k / 2 + 2 * k, 1, shape)

    for k in (8192, 65536):
        fp4, nv = predict_kernels([gemm("fp4", k), gemm("nvfp4", k)], "B200", "fit-b200-sxm")
        assert fp4.seconds == pytest.approx(nv.seconds, rel=1e-12)
    ((_, batch),) = batches_of([gemm("fp4", 4096)])
    assert device_batch(batch, load_hardware("B200")).dtype == "nvfp4"
    assert device_batch(batch, load_hardware("H100-SXM")).dtype == "w4a16"
