"""The GEMM time model: per-library tiles and split-K rules, the epilogue, block-scale promotion,
and the stand-in fit of a dtype a profile has no class for."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from reference_data import MEASURED

from mlacalc.hardware.catalogue import load_hardware
from mlacalc.timemodel import gemm_time as model
from mlacalc.timemodel.device import device_figures
from mlacalc.timemodel.profile import Profile
from mlacalc.timemodel.shared import REFERENCE_CLOCK_HZ
from mlacalc.timemodel.terms import default_params, kernel_terms
from mlacalc.words.kernels import KernelBatch


def _gemm(dtype: str, m, n, k, **cols) -> KernelBatch:
    m, n, k = (np.atleast_1d(np.asarray(v, dtype=np.float64)) for v in (m, n, k))
    size = len(m)
    shape = {"m": m, "n": n, "k": k, "quantize_input": np.zeros(size)}
    shape.update({c: np.full(size, float(v)) for c, v in cols.items()})
    elem = 1.0 if dtype in ("fp8", "fp8_block", "int8", "w8a16") else 2.0
    nbytes = m * k * 2.0 + n * k * elem + m * n * 2.0
    return KernelBatch("gemm", dtype, 2.0 * m * n * k, nbytes, np.ones(size), shape)


def _terms(batch: KernelBatch, device: str = "A100-SXM-80GB", **prm) -> dict:
    params = default_params("gemm")
    params.update(prm)
    return kernel_terms(batch, device_figures(load_hardware(device)), params)


def test_smoothquant_int8_walks_all_of_k_except_its_gemv():
    """The SmoothQuant int8 GEMM never splits K: at m = 64 with one column tile the time is one
    tile's walk of all of K. At m <= 4 its GEMV kernel splits K over the SMs."""
    tile = _terms(_gemm("int8", 64, 128, 65536))["compute_s"][0]
    gemv = _terms(_gemm("int8", 4, 128, 65536))["compute_s"][0]
    bf16 = _terms(_gemm("bf16", 64, 128, 65536))["compute_s"][0]
    assert tile > 5 * gemv
    # bf16 (cuBLAS) splits K: faster than the int8 tile's walk despite half the peak
    assert bf16 < tile / 4


def test_weight_only_pads_rows_to_16_and_splits_k_in_two(monkeypatch):
    """Weight-only GEMMs have 16-row tiles (the m = 8 time is the m = 16 time, well under a
    64-row tile's) and split K in at most 2, each split at least 4096 deep; below 5 rows their
    GEMV walks all of K per block. (The splits' reduction is left out here: see
    test_split_k_pays_its_reduction.)"""
    monkeypatch.setattr(model, "SPLIT_K_PARTIAL_BYTES", 0.0)
    t = _terms(_gemm("w4a16", [8, 16, 64], 16384, 16384))["compute_s"]
    assert t[0] == pytest.approx(t[1])
    assert t[2] > 1.5 * t[0]
    # one tile: no split at k = 4096, two of 4096 at k = 8192, still two at k = 32768
    walk = _terms(_gemm("w4a16", [8, 8, 8], 128, [4096, 8192, 32768]))["compute_s"]
    assert walk[0] == pytest.approx(walk[1])
    assert walk[2] == pytest.approx(4 * walk[1])
    gemv = _terms(_gemm("w4a16", [1, 1, 4], 128, [4096, 8192, 8192]))["compute_s"]
    assert gemv[1] == pytest.approx(2 * gemv[0])
    assert gemv[1] == pytest.approx(gemv[2])


def test_dequantization_adds_per_weight_element_and_row_tile():
    """``dequant_s`` per weight element a tile converts, once per 16-row tile."""
    batch = _gemm("w8a16", [16, 32], 128, 4096)
    base = _terms(batch, dequant_s=0.0)["compute_s"]
    more = _terms(batch, dequant_s=1e-11)["compute_s"]
    scale = 1.83e9 / device_figures(load_hardware("A100-SXM-80GB")).clock_hz
    assert more[0] - base[0] == pytest.approx(128 * 4096 * 1e-11 * scale, rel=1e-6)


def test_weight_only_conversion_has_a_physical_default():
    """Without a fit (a profile fitted where no weight-only GEMM ran) each weight's conversion
    costs 1.5 instructions on the 128 lanes an SM issues a clock, at the reference clock."""
    from mlacalc.timemodel.terms import PARAMS

    dq = default_params("gemm")["dequant_s"]
    assert dq == pytest.approx(1.5 / 128.0 / 1.83e9)
    assert PARAMS["dequant_s"][0] < dq < PARAMS["dequant_s"][1]
    batch = _gemm("w4a16", 16, 128, 16384)
    assert _terms(batch)["compute_s"][0] > _terms(batch, dequant_s=0.0)["compute_s"][0]


def test_weight_only_tiles_run_two_to_an_sm(monkeypatch):
    """Weight-only kernels hold two tiles on an SM: 128 column tiles on the A100's 108 SMs (two
    on some) take well under twice the time of 96 (one each); one tile at a time, twice."""
    from mlacalc.timemodel import gemm_time as model

    batch = _gemm("w4a16", [16, 16], [12288, 16384], 65536)
    two = _terms(batch, dequant_s=0.0, tile_s=0.0)["compute_s"]
    # a 16 x 128 tile reaches 0.47 of the SM alone, two of them 0.94
    assert 0.99 < two[1] / two[0] < 1.1
    monkeypatch.setitem(model.RESIDENT_TILES_BY_DTYPE, "w4a16", 1.0)
    one = _terms(batch, dequant_s=0.0, tile_s=0.0)["compute_s"]
    assert one[1] / one[0] == pytest.approx(2.0)
    assert one[0] == pytest.approx(two[0])
    # bf16 (cuBLAS) keeps one tile at a time
    assert "bf16" not in model.RESIDENT_TILES_BY_DTYPE


def test_epilogue_share_adds_the_output_write():
    """A GEMM's output write, behind its mainloop: ``epilogue_share`` of it adds to the time."""
    batch = _gemm("bf16", 8192, 8192, 128)
    hidden = _terms(batch, epilogue_share=0.0)
    unhidden = _terms(batch, epilogue_share=1.0)
    fig = device_figures(load_hardware("A100-SXM-80GB"))
    prm = default_params("gemm")
    out = 8192 * 8192 * 2.0 / (prm["eff_memory"] * fig.hbm_bytes_per_s)
    assert unhidden["extra_s"][0] == pytest.approx(out, rel=1e-6)
    assert unhidden["seconds"][0] > hidden["seconds"][0] + 0.5 * out


def test_write_share_slows_the_output_write_alone():
    """``write_share``: the output write at that share of the operand stream's rate, its
    unhidden part (``epilogue_share``) and the rest in the stream; at 1, the write as before."""
    batch = _gemm("bf16", 8192, 8192, 128)
    fig = device_figures(load_hardware("A100-SXM-80GB"))
    out = 8192 * 8192 * 2.0 / (default_params("gemm")["eff_memory"] * fig.hbm_bytes_per_s)
    same = _terms(batch, epilogue_share=0.4)
    assert same["extra_s"][0] == pytest.approx(0.4 * out, rel=1e-6)
    half = _terms(batch, epilogue_share=0.4, write_share=0.5)
    assert half["extra_s"][0] == pytest.approx(0.8 * out, rel=1e-6)
    # the operands' reads keep their rate: only the write's time doubles
    assert half["memory_s"][0] - same["memory_s"][0] == pytest.approx(0.6 * out, rel=1e-6)


def test_block_scaled_fp8_pays_the_promotion_per_k_block():
    """The block-scaled fp8 GEMM rescales each tile's partial product per 128-deep K block on
    the CUDA cores; per-tensor fp8 has no such term."""
    big = _gemm("fp8_block", 8192, 8192, 8192)
    base = _terms(big, "H100-SXM", promote_cycles=0.0)["compute_s"][0]
    promoted = _terms(big, "H100-SXM", promote_cycles=1 / 64)["compute_s"][0]
    assert 1.1 < promoted / base < 1.8
    fp8 = _gemm("fp8", 8192, 8192, 8192)
    a = _terms(fp8, "H100-SXM", promote_cycles=0.0)["compute_s"][0]
    b = _terms(fp8, "H100-SXM", promote_cycles=1 / 64)["compute_s"][0]
    assert a == b


def test_deepgemm_converts_fp32_scales_per_weight_row_on_tcgen05_alone():
    """A block-scaled GEMM handed fp32 scales (``scale_convert``: SGLang's DeepGEMM call) pays
    ``convert_row_cycles`` a weight row on B200, where the K blocks pack four to an int32 (k /
    128 a multiple of 4); not at k = 768, not on H100 (DeepGEMM's sm90 kernel reads fp32
    scales), not without the flag. Where the K blocks do not pack whole (k = 768: 6 blocks) the
    conversion pads them first: PAD_CONVERT_KERNELS more nodes in place of the pass per row."""
    cyc = 100.0
    fig = device_figures(load_hardware("B200"))
    n = np.asarray([4096.0, 65536.0, 65536.0])
    k = np.asarray([4096.0, 4096.0, 768.0])
    conv = _gemm("fp8_block", 16, n, k, scale_convert=1)
    plain = _gemm("fp8_block", 16, n, k)
    node = 1.5e-6
    extra = _terms(conv, "B200", convert_row_cycles=cyc, node_s=node)["extra_s"]
    base = _terms(plain, "B200", convert_row_cycles=cyc, node_s=node)["extra_s"]
    # its kernels: CONVERT_KERNELS more graph nodes at ``node_s`` (clocked) on every such row
    nodes = model.CONVERT_KERNELS * node * REFERENCE_CLOCK_HZ / fig.clock_hz
    want = cyc * n / (fig.clock_hz * fig.sm_count) + nodes
    assert extra[:2] - base[:2] == pytest.approx(want[:2], rel=1e-9)
    pad = model.PAD_CONVERT_KERNELS * node * REFERENCE_CLOCK_HZ / fig.clock_hz
    assert model.PAD_CONVERT_KERNELS > 0
    assert extra[2] - base[2] == pytest.approx(nodes + pad, rel=1e-9)
    hopper = _terms(conv, "H100-SXM", convert_row_cycles=cyc, node_s=node)["extra_s"]
    assert hopper == pytest.approx(
        _terms(plain, "H100-SXM", convert_row_cycles=cyc, node_s=node)["extra_s"]
    )


def test_an_eagerly_timed_wrapper_call_lasts_the_longer_of_its_host_work_and_its_kernels():
    """vLLM's block-scaled GEMM rows (``host_wrapper``) last the longer of the wrapper's host
    work (``host_s``, ``align_s`` more where the activation's scales are not TMA-aligned:
    ``scale_unaligned``) and the kernels; a row without the flag, and a class whose fit saw no
    wrapper (the defaults are only a fit's start), pay no floor."""
    host, align = 80e-6, 10e-6
    small = _gemm("fp8_block", [16, 17], 128, 128, host_wrapper=1)
    small.shape["scale_unaligned"] = np.asarray([0.0, 1.0])
    got = _terms(small, "H100-SXM", host_s=host, align_s=align)["seconds"]
    assert got == pytest.approx([host, host + align], rel=1e-9)
    bare = _terms(_gemm("fp8_block", [16, 17], 128, 128), "H100-SXM", host_s=host)["seconds"]
    assert np.all(bare < 0.2 * host)
    # past the floor the kernels' time is the call's
    big = _gemm("fp8_block", 16384, 16384, 16384, host_wrapper=1)
    plain = _gemm("fp8_block", 16384, 16384, 16384)
    kernels = _terms(plain, "H100-SXM")["seconds"][0]
    assert kernels > host
    assert _terms(big, "H100-SXM", host_s=host)["seconds"][0] == pytest.approx(kernels)
    # a stand-in class fitted on graph replays carries no floor
    prof = Profile(name="h100", devices={"H100-SXM": {"gemm:bf16": {"fixed_s": 3e-6}}})
    prm, _ = prof.params("H100-SXM", "gemm", "fp8_block", variant="DeepGemmFp8BlockScaledMMKernel")
    assert prm["host_s"] == 0.0 and prm["align_s"] == 0.0


def test_a_quantize_kernel_of_a_cta_a_token_draws_bytes_a_clock_per_cta():
    """vLLM's per-tensor quantize gives each token a CTA (``units`` = tokens): one token's row
    streams at ``sm_bandwidth`` times Hopper's bytes a clock per SM whichever the device (its
    one-token amax takes 7.9 / 7.8 us on H100 / B200), from the HBM or a warm L2, and many
    tokens at the class's share of the HBM; a kernel tiled over the elements is not limited."""
    from mlacalc.timemodel.elementwise_time import SM_BYTES_PER_CLOCK

    def quant(tokens, k, units):
        e = np.asarray([tokens * k], dtype=np.float64)
        shape = {"elements": e, "passes": np.ones(1), "write": np.ones(1)}
        shape.update(units=np.full(1, float(units)), warm_l2=np.zeros(1))
        return KernelBatch("quantize", "fp8", np.zeros(1), 3.0 * e, np.ones(1), shape)

    prm = {**default_params("quantize"), "sm_bandwidth": 0.75, "fixed_s": 0.0}
    for device in ("H100-SXM", "B200"):
        fig = device_figures(load_hardware(device))
        one = kernel_terms(quant(1, 65536, 1), fig, prm)["memory_s"][0]
        want = 3.0 * 65536 / (0.75 * SM_BYTES_PER_CLOCK * fig.clock_hz)
        assert one == pytest.approx(want, rel=1e-9)
        # tiled over the elements: 64 KB pieces, each a share of the HBM
        tiled = kernel_terms(quant(1, 65536, 0), fig, prm)["memory_s"][0]
        share = 3 * 0.75 / fig.sm_count
        bw = prm["eff_memory"] * fig.hbm_bytes_per_s * share
        assert tiled == pytest.approx(3.0 * 65536 / bw, rel=1e-9)
        many = kernel_terms(quant(16384, 65536, 16384), fig, prm)["memory_s"][0]
        assert many == pytest.approx(
            3.0 * 16384 * 65536 / (prm["eff_memory"] * fig.hbm_bytes_per_s)
        )


def test_nvfp4_gemm_walks_all_of_k_in_one_tile():
    """The nvfp4 GEMMs (CUTLASS / CuTe DSL block-scaled kernels on B200) never split K: at one
    row and 128 columns the time grows with k as one tile's walk (B200's rows: TensorRT-LLM
    8.4 -> 127 us from k = 1,024 to 65,536 at every n up to 4,096); cuBLAS's per-tensor fp8
    GEMM splits K over the idle SMs."""
    walk = _terms(_gemm("nvfp4", [1, 1], 128, [8192, 65536]), "B200")["compute_s"]
    assert walk[1] == pytest.approx(8 * walk[0], rel=1e-6)
    fp8 = _terms(_gemm("fp8", [1, 1], 128, [8192, 65536]), "B200")["compute_s"]
    assert fp8[1] < 4 * fp8[0]


def test_block_scaled_mma_pads_rows_to_128_on_tcgen05_alone():
    """tcgen05's block-scaled MMA (nvfp4, DeepGEMM's fp8) has no 64-row shape: on B200 one row
    and 128 rows walk K in the same 128-row tile (every engine's nvfp4 rows: 1.00-1.01 from 1
    to 128 rows), where bf16 keeps its 64-row tiles and Hopper's ``wgmma`` its 64 rows."""
    rows = [1, 64, 128]
    for dtype in ("nvfp4", "fp8_block"):
        t = _terms(_gemm(dtype, rows, 16384, 65536), "B200")["compute_s"]
        assert t[0] == pytest.approx(t[2], rel=1e-9) and t[1] == pytest.approx(t[2], rel=1e-9)
    hopper = _terms(_gemm("fp8_block", rows, 16384, 65536), "H100-SXM")["compute_s"]
    assert hopper[1] < 0.8 * hopper[2]
    bf16 = _terms(_gemm("bf16", rows, 16384, 65536), "B200")["compute_s"]
    # 0.8 before cuBLAS's stream-K on tcgen05 (gemm_time.STREAM_K_DTYPES) spread the 128-row
    # call's 64 tiles of 128 x 256 over the 148 SMs (0.82 since): still under the 128-row tile
    assert bf16[1] < 0.85 * bf16[2]


def test_nvfp4_block_scales_ask_more_operand_reuse_on_tcgen05():
    """nvfp4's fp8 scale per 16 elements passes through shared memory with the operands
    (SCALE_OPERAND_BYTES: 1.125 times the 4-bit bytes), so on B200 a tile below the full rate
    reaches sqrt(1 / 1.125) of what it would without them; fp8 tiles are unchanged."""
    # m = 2 x 148 x 128 rows: every candidate tile makes whole waves over B200's 148 SMs, so
    # the per-tensor GEMM's balanced last wave (BALANCED_WAVES) does not part them
    big, rows = 8192, 2 * 148 * 128
    fig = device_figures(load_hardware("B200"))
    nv = _terms(_gemm("nvfp4", rows, big, big), "B200")["compute_s"][0]
    fp8 = _terms(_gemm("fp8", rows, big, big), "B200")["compute_s"][0]
    # the same tiles at four and two times bf16's rate: nvfp4 takes half fp8's time, over the
    # scales' share of the rate
    ratio = nv / fp8 * fig.peak("fp4") / fig.peak("fp8")
    assert ratio == pytest.approx(np.sqrt(model.SCALE_OPERAND_BYTES["nvfp4"]), rel=1e-6)


def test_profile_without_fp8_times_per_tensor_fp8_with_its_int8_fit():
    """A profile fitted on a device without fp8 (A100): per-tensor fp8 borrows the int8 fit,
    block-scaled fp8 the bf16 fit."""
    prof = Profile(
        name="a100",
        devices={
            "A100-SXM-80GB": {
                "gemm:bf16": {"fixed_s": 2e-6},
                "gemm:int8": {"fixed_s": 4e-6},
            }
        },
    )
    fp8, _ = prof.params("A100-SXM-80GB", "gemm", "fp8")
    block, _ = prof.params("A100-SXM-80GB", "gemm", "fp8_block")
    assert fp8["fixed_s"] == 4e-6
    assert block["fixed_s"] == 2e-6


def test_profile_without_fp4_times_an_nvfp4_gemm_with_its_cutlass_fp8_fit():
    """A profile fitted where no fp4 tensor cores were measured (H100): an nvfp4 GEMM borrows
    the engine's CUTLASS fp8 GEMM fit, SGLang's and vLLM's per-tensor one (else the
    block-scaled one), TensorRT-LLM's block-scaled one (its per-tensor fp8 is cuBLAS's); an
    nvfp4 MoE keeps the block-scaled MoE fit."""
    table = {
        "gemm:bf16": {"fixed_s": 2e-6},
        "gemm:fp8": {"fixed_s": 3e-6},
        "gemm:fp8_block": {"fixed_s": 5e-6},
        "moe:fp8": {"fixed_s": 7e-6},
        "moe:fp8_block": {"fixed_s": 9e-6},
    }
    for engine in ("sglang", "vllm"):
        prof = Profile(name="h100", devices={"H100-SXM": table}, engine=engine)
        assert prof.params("H100-SXM", "gemm", "nvfp4")[0]["fixed_s"] == 3e-6
        assert prof.params("H100-SXM", "moe", "nvfp4")[0]["fixed_s"] == 9e-6
    block_only = {k: v for k, v in table.items() if k != "gemm:fp8"}
    prof = Profile(name="h100", devices={"H100-SXM": block_only}, engine="sglang")
    assert prof.params("H100-SXM", "gemm", "nvfp4")[0]["fixed_s"] == 5e-6
    prof = Profile(name="h100", devices={"H100-SXM": table})
    assert prof.params("H100-SXM", "gemm", "nvfp4")[0]["fixed_s"] == 5e-6


def _engine_gemm_rows(engine: str):
    """H100's and B200's ``gemm_perf`` tables as ``engine`` measured them, each with the engine's
    shipped profile of that device's predictions of its rows: (device, table, predicted seconds)."""
    from mlacalc.measured.mapping import map_table
    from mlacalc.measured.observations import predict_mapped
    from mlacalc.measured.tables import load_measured
    from mlacalc.timemodel.profile import load_profile

    for system, device in (("h100_sxm", "H100-SXM"), ("b200_sxm", "B200")):
        tables = load_measured(Path(MEASURED) / system, engine=engine).tables
        (table,) = [t for t in tables if t.table == "gemm_perf"]
        prof = f"fit-{system.replace('_', '-')}-{engine}"
        yield device, table, predict_mapped(map_table(table), device, load_profile(prof))


def _quantize(elements, write=1, launches=1, warm=1) -> KernelBatch:
    e = np.atleast_1d(np.asarray(elements, dtype=np.float64))
    size = len(e)
    shape = {
        "elements": e,
        "passes": np.ones(size),
        "write": np.full(size, float(write)),
        "launches": np.full(size, float(launches)),
        "warm_l2": np.full(size, float(warm)),
    }
    nbytes = 2.0 * e + write * (e + 4.0)
    return KernelBatch("quantize", "fp8", np.zeros(size), nbytes, np.ones(size), shape)


def test_warm_quantize_reads_its_input_from_the_l2_when_it_fits():
    """A warm replay of a quantize on the same input reads it at ``l2_speedup`` x HBM while
    input and output fit in ``l2_share`` of the L2; well beyond, at the HBM rate."""
    fig = device_figures(load_hardware("H100-SXM"))
    prm = default_params("quantize")
    prm.update(l2_share=0.5, l2_speedup=2.0, sm_bandwidth=16.0)
    small = 4e6  # 12 MB: inside half the 50 MB L2
    warm = kernel_terms(_quantize(small), fig, prm)["memory_s"][0]
    cold = kernel_terms(_quantize(small, warm=0), fig, prm)["memory_s"][0]
    bw = prm["eff_memory"] * fig.hbm_bytes_per_s
    assert cold == pytest.approx(3.0 * small / bw, rel=1e-3)
    assert warm == pytest.approx(small / bw + 2.0 * small / (2.0 * fig.hbm_bytes_per_s), rel=1e-3)
    big = 1e8  # 300 MB: no share of it stays resident
    a = kernel_terms(_quantize(big), fig, prm)["memory_s"][0]
    b = kernel_terms(_quantize(big, warm=0), fig, prm)["memory_s"][0]
    assert a == pytest.approx(b)


def test_amax_reduction_pays_the_fixed_cost_of_each_graph_node():
    """The scale-only quantize (memset of the scale, then the reduction) pays two fixed costs;
    the mapping gives it ``launches = 2``."""
    fig = device_figures(load_hardware("H100-SXM"))
    prm = default_params("quantize")
    one = kernel_terms(_quantize(32, write=0, launches=1), fig, prm)["seconds"][0]
    two = kernel_terms(_quantize(32, write=0, launches=2), fig, prm)["seconds"][0]
    assert two - one == pytest.approx(prm["fixed_s"], rel=1e-6)
    from mlacalc.measured.mapping import _Builder
    from mlacalc.measured.mapping import _quantize as map_quantize

    b = _Builder(2)
    map_quantize(b, "compute_scale", np.arange(2), np.array([32.0, 64.0]), 0, 1, write=0)
    map_quantize(b, "scale_matrix", np.arange(2), np.array([32.0, 64.0]), 0, 1)
    assert [float(p.batch.shape["launches"][0]) for p in b.parts] == [2.0, 1.0]


def test_dynamic_fp8_quantization_pays_a_fixed_cost_per_graph_node():
    """A per-tensor fp8 GEMM's dynamic quantization is three graph nodes (the amax reduction's
    memset and kernel, then the scaling pass): ``quant_fixed_s`` for each, where the mapping
    says so (``quant_launches``); without it, one per pass over the input."""
    fig = device_figures(load_hardware("H100-SXM"))
    prm = default_params("gemm")
    prm.update(quant_fixed_s=2e-6)
    base = _gemm("fp8", 16, 1024, 1024, quantize_input=1, quant_passes=2)
    three = _gemm("fp8", 16, 1024, 1024, quantize_input=1, quant_passes=2, quant_launches=3)
    a = kernel_terms(base, fig, prm)["extra_s"][0]
    b = kernel_terms(three, fig, prm)["extra_s"][0]
    assert b - a == pytest.approx(2e-6, rel=1e-6)
    from mlacalc.measured.mapping import _Builder, _gemm_kernels

    bld = _Builder(1)
    _gemm_kernels(bld, "gemm", np.arange(1), "fp8", [16.0], [1024.0], [1024.0])
    assert float(bld.parts[0].batch.shape["quant_launches"][0]) == 3.0


def test_a_per_tensor_amax_lasts_at_least_its_chain_of_atomics():
    """vLLM's amax kernel folds each token's maximum into the one scale with an atomic: the
    atomics on one address queue at the L2 (``atomic_cycles`` each), so the quantization
    lasts at least tokens x cycles / clock, however little it reads; where its read of the
    input outlasts the chain, nothing is added. The mapping gives vLLM's rows one a token."""
    fig = device_figures(load_hardware("H100-SXM"))
    prm = default_params("gemm")
    prm.update(atomic_cycles=12.0)
    cols = {"quantize_input": 1, "quant_passes": 2, "quant_launches": 3}
    for m, k, chained in ((8192, 128, True), (64, 65536, False)):
        plain = kernel_terms(_gemm("fp8", m, 128, k, **cols), fig, prm)["extra_s"][0]
        atom = _gemm("fp8", m, 128, k, quant_atomics=m, **cols)
        extra = kernel_terms(atom, fig, prm)["extra_s"][0] - plain
        read = prm["quant_bytes"] * 2.0 * m * k / (prm["eff_memory"] * fig.hbm_bytes_per_s)
        chain = m * 12.0 / fig.clock_hz
        assert extra == pytest.approx(max(chain - read, 0.0), abs=1e-12)
        assert (extra > 0) == chained
    from mlacalc.measured.mapping import _Builder, _gemm_kernels

    bld = _Builder(1)
    _gemm_kernels(bld, "gemm", np.arange(1), "fp8", [16.0], [64.0], [64.0], amax_atomics=1.0)
    _gemm_kernels(bld, "gemm", np.arange(1), "fp8", [16.0], [64.0], [64.0])
    assert [float(p.batch.shape["quant_atomics"][0]) for p in bld.parts] == [16.0, 0.0]


def test_cutlass_scaled_mm_takes_its_tile_from_the_rows_and_never_splits_k():
    """CUTLASS's Hopper fp8 scaled_mm (``cutlass_dispatch``) runs 64 x 64 tiles up to 64 rows,
    64 x 128 up to 128 and 128 x 128 beyond, each walking all of K: n = 128, k = 65,536 steps
    up at 65 and 129 rows (measured on H100: 47-54, 67-101, 167-197 us); cuBLAS's fp8 splits
    K and does not. The same rule on B200 (no steps there; it fits them as well)."""
    h100 = device_figures(load_hardware("H100-SXM"))
    # at the full rate with every SM busy: no power-limited clock (POWER_LIMITED_DTYPES)
    prm = {**default_params("gemm"), "eff_compute": 1.0}
    ms = [64, 65, 128, 129]
    cutlass = kernel_terms(_gemm("fp8", ms, [128] * 4, [65536] * 4, cutlass_dispatch=1), h100, prm)
    cublas = kernel_terms(_gemm("fp8", ms, [128] * 4, [65536] * 4), h100, prm)
    c, b = cutlass["compute_s"], cublas["compute_s"]
    # one tile a 64-row block of each 64 or 128 columns, all of K, at the full rate (every
    # tile of the list is fed from shared memory on Hopper: model.fed_rate)
    per_sm = prm["eff_compute"] * h100.peak("fp8") / h100.sm_count
    for i, (tm, tn) in enumerate(((64, 64), (64, 128), (64, 128), (128, 128))):
        assert c[i] == pytest.approx(2.0 * tm * tn * 65536 / per_sm, rel=1e-9)
    assert c[1] > 1.4 * c[0] and c[3] > 1.4 * c[2] and np.all(b < c)
    b200 = device_figures(load_hardware("B200"))
    on_b200 = kernel_terms(_gemm("fp8", ms, [128] * 4, [65536] * 4, cutlass_dispatch=1), b200, prm)
    plain = kernel_terms(_gemm("fp8", ms, [128] * 4, [65536] * 4), b200, prm)
    assert np.all(plain["compute_s"] < on_b200["compute_s"])
    # B200's 64 x 128 tile is fed at 2/3 of its rate, its 128 x 128 whole: a step of 4/3 (its
    # rows show none; it was 1.41 with the square-root rule)
    assert on_b200["compute_s"][3] == pytest.approx(4.0 / 3.0 * on_b200["compute_s"][2])


def test_cutlass_scaled_mm_fills_a_wave_by_its_tiles_stage_on_hopper():
    """CUTLASS's Hopper fp8 scaled_mm fills each wave's pipeline with a stage of its tile's
    tm + tn rows of K (model.CUTLASS_SM90_STAGE_ROWS): ``tile_s`` x 0.5 for the 64 x 64 tile
    (up to 64 rows), 0.75 for 64 x 128 (65-128), 1 for the 128 x 128 tile beyond. Measured:
    SGLang's H100 calls of n, k <= 512 take 5.0, 5.5-5.8 and 6.5-6.9 us at 17-64, 65-128 and
    129-512 rows. Not on B200 (``tcgen05``), whose wave takes ``tile_s`` whole."""
    h100 = device_figures(load_hardware("H100-SXM"))
    b200 = device_figures(load_hardware("B200"))
    ms = [16, 100, 200]

    def wave(fig):
        def seconds(tile_s):
            prm = {**default_params("gemm"), "eff_compute": 1.0, "tile_s": tile_s}
            batch = _gemm("fp8", ms, [64] * 3, [128] * 3, cutlass_dispatch=1)
            return kernel_terms(batch, fig, prm)["compute_s"]

        return seconds(1e-6) - seconds(0.0)

    np.testing.assert_allclose(wave(h100), [0.5e-6, 0.75e-6, 1e-6], rtol=1e-6)
    # B200's (its clock scales ``tile_s``): the same wave for every tile
    on_b200 = wave(b200)
    assert on_b200[0] > 0.9e-6 and np.allclose(on_b200, on_b200[0], rtol=1e-9)
    assert model.CUTLASS_SM90_STAGE_ROWS == 256.0


def test_cutlass_scaled_mm_on_hopper_runs_its_128_row_tiles_in_pairs():
    """Above 128 rows CUTLASS's Hopper fp8 scaled_mm runs its 128-row tiles in clusters of
    two along M (model.CUTLASS_SM90_CLUSTER_M): a call of 256 j + 1 rows runs as many tiles as
    one of 256 (j + 1) (SGLang's H100 rows at k >= 4,096: t(257) / t(512) 1.15, t(513) /
    t(768) 1.17 where t(257) / t(256) is 1.31), where cuBLAS's fp8 (TensorRT-LLM's, 0.74 of
    t(512) at 257 rows) and vLLM's Blackwell kernel (its B200 rows step at 257 rows but not at
    513 or 769) count 128 rows a tile."""
    h100 = device_figures(load_hardware("H100-SXM"))
    prm = {**default_params("gemm"), "eff_compute": 1.0}
    # 40 column tiles: 256 rows fill 80 of the 132 SMs, 257 and 512 rows two waves
    ms, ns, ks = [256, 257, 512, 129], [128 * 40] * 4, [8192] * 4
    got = kernel_terms(_gemm("fp8", ms, ns, ks, cutlass_dispatch=1), h100, prm)["compute_s"]
    assert got[1] == pytest.approx(got[2], rel=1e-9) and got[1] > 1.9 * got[0]
    # 129 rows: two 128-row tiles, a whole cluster already
    assert got[3] == pytest.approx(got[0], rel=1e-9)
    cublas = kernel_terms(_gemm("fp8", ms, ns, ks), h100, prm)["compute_s"]
    b200 = device_figures(load_hardware("B200"))
    sm100 = kernel_terms(_gemm("fp8", ms, ns, ks, cutlass_dispatch=1), b200, prm)["compute_s"]
    # 120 tiles of 128 rows: one wave, against 160 in two
    assert cublas[1] < cublas[2] and sm100[1] < 0.6 * sm100[2]


def test_sglang_cutlass_scaled_mm_on_blackwell_takes_its_own_tiles_in_pairs():
    """SGLang's B200 fp8 scaled_mm (``cutlass_sm100``, model.CUTLASS_SM100_FP8_TILES): 128-row
    tiles of 64 columns at 65-256 rows (Hopper's list: two 64 x 128 tiles at 65-128 rows) and
    above 256 rows 128 x 128 tiles in pairs along M, as on Hopper: SGLang's B200 rows take one
    time across each 256-row step (n = k = 16,384: 71-76 us at 129-256 rows, 113-122 at
    257-512, 167-173 at 513-768), and a wave of K blocks takes at least
    model.CUTLASS_SM100_KBLOCK_CYCLES each, whatever the tile. The field is set for SGLang's
    rows and steps, not vLLM's."""
    from mlacalc.timemodel.gemm_time import CUTLASS_SM100_KBLOCK, CUTLASS_SM100_KBLOCK_CYCLES

    b200 = device_figures(load_hardware("B200"))
    prm = {**default_params("gemm"), "eff_compute": 1.0}
    # n = 5,120: 257 rows run 512 rows' tiles (4 x 40 of 128 x 128: 160, two waves of 148
    # SMs); 129-256 rows two row tiles of 80 tiles of 64 columns, also 160: the same waves, a
    # tile of half the work fed as a two-SM 256 x 64 pair, at 0.8 of the rate (model.fed_rate)
    ms, ns, ks = [256, 257, 512, 129], [128 * 40] * 4, [8192] * 4
    own = kernel_terms(_gemm("fp8", ms, ns, ks, cutlass_dispatch=1, cutlass_sm100=1), b200, prm)
    got = own["compute_s"]
    assert got[1] == pytest.approx(got[2], rel=1e-9)
    assert got[1] == pytest.approx(1.6 * got[0], rel=1e-9)
    assert got[3] == pytest.approx(got[0], rel=1e-9)
    # 16 rows, n = 32: one 64 x 64 tile, whose MMAs (at half the rate) take less than the K
    # blocks' floor: the floor
    few = _gemm("fp8", [16], [32], [65536], cutlass_dispatch=1, cutlass_sm100=1)
    floor = 65536 / CUTLASS_SM100_KBLOCK * CUTLASS_SM100_KBLOCK_CYCLES / b200.clock_hz
    assert kernel_terms(few, b200, prm)["compute_s"][0] == pytest.approx(floor, rel=1e-9)
    # 100 rows, n = 32: one 128 x 64 tile (Hopper's list: two 64 x 128 tiles), at the rate
    # its feed allows (2/3 on B200, model.fed_rate), its walk of K the same work
    one = _gemm("fp8", [100], [32], [65536], cutlass_dispatch=1, cutlass_sm100=1)
    per_sm = b200.peak("fp8") / b200.sm_count
    want = 2.0 * 128 * 64 * 65536 / (2.0 / 3.0 * per_sm)
    assert kernel_terms(one, b200, prm)["compute_s"][0] == pytest.approx(want, rel=1e-9)
    # Hopper ignores the field
    h100 = device_figures(load_hardware("H100-SXM"))
    with_field = _gemm("fp8", ms, ns, ks, cutlass_dispatch=1, cutlass_sm100=1)
    without = _gemm("fp8", ms, ns, ks, cutlass_dispatch=1)
    a, b = (kernel_terms(x, h100, prm)["compute_s"] for x in (with_field, without))
    assert np.allclose(a, b, rtol=1e-12)
    # the mapping and a served step mark SGLang's kernel, not vLLM's
    from mlacalc.measured.mapping import _Builder, _gemm_kernels
    from mlacalc.timemodel.gemm_time import (
        CUTLASS_FP8_ENGINES as CUTLASS,
    )
    from mlacalc.timemodel.gemm_time import (
        CUTLASS_SM100_ENGINES,
        CUTLASS_SM100_FIELD,
        engine_gemm_kernel,
    )

    bld = _Builder(1)
    for flag in (1.0, 0.0):
        _gemm_kernels(bld, "gemm", np.arange(1), "fp8", [16.0], [64.0], [64.0], cutlass_sm100=flag)
    assert [float(p.batch.shape[CUTLASS_SM100_FIELD][0]) for p in bld.parts] == [1.0, 0.0]
    assert frozenset({"sglang"}) == CUTLASS_SM100_ENGINES
    step = _gemm("fp8", [300], [4096], [4096])
    shape = {c: v for c, v in step.shape.items() if c != "quantize_input"}
    step = KernelBatch("gemm", "fp8", step.flops, step.bytes, step.calls, shape)
    marks = {e: engine_gemm_kernel(step, e, b200).shape[CUTLASS_SM100_FIELD][0] for e in CUTLASS}
    assert marks == {"sglang": 1.0, "vllm": 0.0}


def test_cutlass_scaled_mm_tile_runs_at_its_shared_memory_feed():
    """A CUTLASS scaled_mm tile reaches the share of the SM's tensor rate its shared-memory
    feed allows, linear in its intensity (model.fed_rate): a 64 x 64 fp8 tile takes its 4 KB
    of operands per 32 clocks of Hopper's 4,096 multiply-adds a clock, the whole 128 bytes a
    clock, so it runs at the full rate on H100 (SGLang's rows of one row walk 1,024 of K in
    0.53-0.60 us, 0.56 at the peak; the square-root rule gave 0.71 of it), at half on B200
    (twice the multiply-adds a clock from the same feed), where 128 x 128 is fed whole."""
    prm = {**default_params("gemm"), "eff_compute": 1.0}  # no power-limited clock
    ms, ns, ks = [1, 100, 1000], [1024] * 3, [65536] * 3
    for device, rates in (("H100-SXM", (1.0, 1.0, 1.0)), ("B200", (0.5, 2.0 / 3.0, 1.0))):
        fig = device_figures(load_hardware(device))
        got = kernel_terms(_gemm("fp8", ms, ns, ks, cutlass_dispatch=1), fig, prm)["compute_s"]
        per_sm = prm["eff_compute"] * fig.peak("fp8") / fig.sm_count
        tiles = ((64, 64), (64, 128), (128, 128))
        for i, ((tm, tn), rate) in enumerate(zip(tiles, rates, strict=True)):
            waves = np.ceil(np.ceil(ms[i] / tm) * np.ceil(ns[i] / tn) / fig.sm_count)
            want = waves * 2.0 * tm * tn * ks[i] / (rate * per_sm)
            assert got[i] == pytest.approx(want, rel=1e-9), (device, tm, tn)


def test_an_fp8_gemm_on_few_sms_runs_at_the_peak_and_on_all_at_eff_compute():
    """The chip's power limit (model.POWER_LIMITED_DTYPES): a per-tensor fp8 GEMM keeping a
    share b of the SMs busy reaches 1 - (1 - eff_compute) b of the tensor peak: a 64 x 64
    CUTLASS tile of one row walks K at the SM's peak (SGLang's H100 rows: 0.53-0.60 us per
    1,024 of K, 0.56 at the peak), a GEMM on every SM at ``eff_compute`` (the largest rows at
    0.65 of it). bf16 keeps one rate (not refitted with the rule)."""
    h100 = device_figures(load_hardware("H100-SXM"))
    prm = {**default_params("gemm"), "eff_compute": 0.6}
    peak_sm = h100.peak("fp8") / h100.sm_count
    one = kernel_terms(_gemm("fp8", 1, 64, 65536, cutlass_dispatch=1), h100, prm)["compute_s"]
    busy = 1.0 / h100.sm_count
    want = 2.0 * 64 * 64 * 65536 / (peak_sm * (1.0 - 0.4 * busy))
    assert one[0] == pytest.approx(want, rel=1e-9)
    # 128 x 128 tiles over every SM: the class's efficiency
    m, n = 128.0 * 12, 128.0 * 11
    full = kernel_terms(_gemm("fp8", m, n, 65536, cutlass_dispatch=1), h100, prm)["compute_s"]
    assert full[0] == pytest.approx(2.0 * 128 * 128 * 65536 / (0.6 * peak_sm), rel=1e-9)
    bf16 = kernel_terms(_gemm("bf16", 1, 64, 65536), h100, prm)["compute_s"]
    plain = kernel_terms(_gemm("bf16", 1, 64, 65536), h100, {**prm, "eff_compute": 1.0})
    assert bf16[0] > 1.5 * plain["compute_s"][0]


def test_a_block_scaled_gemm_the_per_tensor_class_stands_in_for_takes_its_fed_tiles():
    """A block-scaled fp8 GEMM timed by the per-tensor class on cuBLAS-style tiles (SGLang's
    step rule, model.step_block_fp8, and the module tables' stand-ins,
    measured.mapped.KernelSlots) rates those tiles by the shared-memory feed the class's
    ``eff_compute`` was fitted with (model.fed_rate): the square-root rule on top of that
    full-chip efficiency counted the feed's loss twice. On B200 the 128 x 256 tile of a large
    GEMM then runs at the full rate (0.82 of it by the square-root rule); on H100 every tile of
    the list does, and the one that fills the SMs' waves best is run."""
    import dataclasses

    from mlacalc.measured.mapped import KernelSlots
    from mlacalc.words.kernels import Kernel

    prm = {**default_params("gemm"), "eff_compute": 0.7, "tile_s": 0.0}
    got = {}
    for device in ("H100-SXM", "B200"):
        fig = device_figures(load_hardware(device))
        # m = 2 x 128 rows an SM: whole waves of every tile, where the per-tensor GEMM's last
        # partial wave would be balanced (BALANCED_WAVES) and the stand-in's is not
        rows = 2 * 128 * fig.sm_count
        blk = _gemm("fp8_block", rows, 8192, 8192)
        blk = dataclasses.replace(
            blk, shape={f: v for f, v in blk.shape.items() if f != "quantize_input"}
        )
        step = model.step_block_fp8(blk, "sglang")
        assert step.dtype == "fp8" and step.shape["block_stand_in"][0] == 1
        plain = dataclasses.replace(step, shape={**step.shape, "block_stand_in": np.zeros(1)})
        fed = kernel_terms(step, fig, prm)["compute_s"][0]
        got[device] = fed / kernel_terms(plain, fig, prm)["compute_s"][0]
        # every SM busy: the class's efficiency; the tile of the fewest tile-FLOPs over its waves
        per_sm = 0.7 * fig.peak("fp8") / fig.sm_count
        want = min(
            np.ceil(np.ceil(rows / tm) * np.ceil(8192 / tn) / fig.sm_count)
            * tm
            * tn
            * model.fed_rate(tm, tn, 2.0 if device == "B200" else 1.0) ** -1
            for tm, tn, _ in model.GEMM_TILES
        )
        assert fed == pytest.approx(want * 2.0 * 8192 / per_sm, rel=1e-9), device
    assert got["B200"] == pytest.approx(np.sqrt(128 * 256 / 384 / 128), rel=1e-9)
    # H100: every tile of the list fed whole, none slower than the square-root rule's (at
    # whole waves of every tile the same tile wins: 1.0)
    assert got["H100-SXM"] <= 1.0 + 1e-9
    # the module tables' stand-ins carry the same mark
    slots = KernelSlots()
    k = Kernel("q_b_proj", "gemm", "fp8", 2.0 * 64 * 4096 * 1024, 1e7, 1,
               {"m": 64, "n": 4096, "k": 1024, "groups": 1})  # fmt: skip
    slots.add(k, np.array([0]), slots.vector(k)[None, :])
    (part,) = slots.parts()
    assert part.batch.shape["block_stand_in"][0] == 1
    assert part.batch.shape["cutlass_dispatch"][0] == 0


def test_split_k_pays_its_reduction(monkeypatch):
    """A split-K GEMM writes each split's fp32 partial tile and reads it back (8 bytes a padded
    output element and split, at the class's HBM rate); a GEMM with a wave of tiles or more
    does not split and pays nothing."""
    fig = device_figures(load_hardware("A100-SXM-80GB"))
    prm = default_params("gemm")
    bw = prm["eff_memory"] * fig.hbm_bytes_per_s
    # as many splits as the idle SMs allow, each at least 1,024 deep (the split count's choice:
    # test_split_count_is_the_fastest_with_its_reduce_kernel)
    monkeypatch.setattr(model, "SPLIT_K_CHOICES", (np.inf,))
    monkeypatch.setattr(model, "SPLIT_K_LEAST_K", 1024)
    batch = _gemm("bf16", [16, 256, 4096], [32, 1024, 4096], [65536, 4096, 4096])
    with_red = _terms(batch)
    monkeypatch.setattr(model, "SPLIT_K_PARTIAL_BYTES", 0.0)
    without = _terms(batch)
    # one 64x64 tile split 64 ways (k / 1024): the reduction moves 64 x 64 x 64 x 8 bytes of
    # HBM traffic, memory time, not compute
    assert with_red["memory_s"][0] == pytest.approx(without["memory_s"][0] + 64**3 * 8.0 / bw)
    assert with_red["compute_s"][0] == pytest.approx(without["compute_s"][0])
    # m = 256, n = 1024, k = 4096: split without the reduction, dearer with it
    assert with_red["seconds"][1] > without["seconds"][1] * 1.02
    # 4096 x 4096: a thousand tiles, no split, no reduction
    assert with_red["seconds"][2] == pytest.approx(without["seconds"][2])


def test_the_tile_is_the_fastest_in_all(monkeypatch):
    """The tile and split a GEMM runs are those of the least whole time (compute, memory at
    the bandwidth the tiles draw, partial sums, epilogue), as a library's profiler picks: no
    candidate's time is below the one chosen."""
    # SMs that each draw half their share of the bandwidth: a tile with few units is slow to
    # stream even where its compute is least (a choice by compute alone was 1.8-2x slower at
    # m = 80-128, n = 8192)
    slow = dict(sm_bandwidth=0.5, overlap=16.0)
    batch = _gemm("bf16", [64, 80, 128, 1024], [128, 8192, 8192, 512], [1536, 16384, 4096, 4096])
    chosen = _terms(batch, "H100-SXM", **slow)["seconds"]
    for tile in model.GEMM_TILES:
        monkeypatch.setitem(model._TILES, "", model.tile_arrays((tile,)))
        alone = _terms(batch, "H100-SXM", **slow)["seconds"]
        assert np.all(chosen <= alone * (1 + 1e-12))
    monkeypatch.undo()


def test_one_row_bf16_gemm_on_a_low_tensor_rate_device_is_a_memory_bound_gemv(monkeypatch):
    """At m = 1 a bf16 GEMM whose 64-row tile would be bound by its padded tensor-core work
    (Ada GeForce: a quarter of the A100's tensor rate per SM) runs as a CUDA-core GEMV: no
    padded rows, memory-bound. At m = 2, or where the tile is memory-bound anyway, and for fp8,
    the tiled kernel stays."""
    # the tiled kernel walking all of K on few SMs (no split-K: an m = 2 call's split choice
    # would shorten the walk it is compared with)
    monkeypatch.setattr(model, "SPLIT_K_CHOICES", (1.0,))
    shape = ("bf16", [1, 2], 768, 768)
    rtx = _terms(_gemm(*shape), "RTX-4080")
    assert rtx["compute_s"][0] < 0.2 * rtx["memory_s"][0]
    assert rtx["compute_s"][1] > rtx["memory_s"][1]
    assert rtx["seconds"][0] < 0.5 * rtx["seconds"][1]
    # without the GEMV the one-row call pays the padded tile: as slow as m = 2
    monkeypatch.setattr(model, "CUDA_CORE_GEMV_MAX_M", {})
    padded = _terms(_gemm(*shape), "RTX-4080")
    assert padded["compute_s"][0] == pytest.approx(padded["compute_s"][1])
    monkeypatch.undo()
    monkeypatch.setattr(model, "SPLIT_K_CHOICES", (1.0,))
    # a weight-streaming shape whose tiles are memory-bound keeps its tiled time
    big = _terms(_gemm("bf16", [1, 2], 16384, 16384), "A100-SXM-80GB")
    assert big["compute_s"][0] == pytest.approx(big["compute_s"][1])
    fp8 = _terms(_gemm("fp8", [1, 2], 768, 768), "RTX-4080")
    assert fp8["compute_s"][0] == pytest.approx(fp8["compute_s"][1])


def test_split_count_is_the_fastest_with_its_reduce_kernel(monkeypatch):
    """cuBLAS-style GEMMs (bf16, fp8) run the split count of least whole time among
    SPLIT_K_CHOICES, each split at least SPLIT_K_LEAST_K deep; a split GEMM pays its
    reduction's own kernel (a fixed cost of the class) beside the partial sums. A GEMM of 64
    rows and one of 65 then take about the same time (measured H100, n = 128, k = 1,536: 4.8
    and 4.6 us), where a split barred below k = 2,048 left the 64-row call 30% slower."""
    batch = _gemm("bf16", [64, 65, 16, 4096], [128, 128, 32, 4096], [1536, 1536, 65536, 4096])
    chosen = _terms(batch, "H100-SXM")
    for choice in model.SPLIT_K_CHOICES:
        monkeypatch.setattr(model, "SPLIT_K_CHOICES", (choice,))
        alone = _terms(batch, "H100-SXM")["seconds"]
        assert np.all(chosen["seconds"] <= alone * (1 + 1e-12))
    monkeypatch.undo()
    # split calls pay the reduce kernel's fixed cost; 4096 x 4096 (a wave of tiles) none
    monkeypatch.setattr(model, "SPLIT_K_CHOICES", (np.inf,))
    split = _terms(batch, "H100-SXM")
    monkeypatch.setattr(model, "SPLIT_K_REDUCE_NODES", 0.0)
    free = _terms(batch, "H100-SXM")
    assert split["extra_s"][:3] - free["extra_s"][:3] == pytest.approx(split["fixed_s"][:3])
    assert split["seconds"][3] == pytest.approx(free["seconds"][3])
    monkeypatch.undo()
    # SMs drawing 2.5 shares of the bandwidth each (the H100 fit of the old rule): 64 rows
    # within 5% of 65, where the old rule (as many splits as the idle SMs allow, each at least
    # 1,024 deep, no reduce kernel) made them 30% slower
    new = _terms(batch, "H100-SXM", sm_bandwidth=2.5)["seconds"]
    assert new[0] <= 1.05 * new[1]
    monkeypatch.setattr(model, "SPLIT_K_CHOICES", (np.inf,))
    monkeypatch.setattr(model, "SPLIT_K_LEAST_K", 1024)
    monkeypatch.setattr(model, "SPLIT_K_REDUCE_NODES", 0.0)
    old = _terms(batch, "H100-SXM", sm_bandwidth=2.5)["seconds"]
    assert old[0] > 1.25 * old[1]


def test_one_row_gemv_only_where_even_the_most_split_tile_is_compute_bound():
    """The CUDA-core GEMV replaces the tiled kernel at m = 1 only where the tile's padded work
    outlasts its reads in its most split candidate, not merely in the one run (which may stay
    unsplit for its reduce kernel's cost): H100, n = 128, k = 16384, a reduce kernel dearer
    than the unsplit walk, m = 1 takes the m = 2 time (measured H100 rows: m = 1 as m = 2)."""
    batch = _gemm("bf16", [1, 2], 128, 16384)
    t = _terms(batch, "H100-SXM", fixed_s=5e-5, sm_bandwidth=16.0)
    assert t["seconds"][0] == pytest.approx(t["seconds"][1], rel=1e-3)
    assert t["compute_s"][0] > 5 * t["memory_s"][0]


def test_plugin_gemm_runs_the_kernel_profiled_at_the_next_power_of_two(monkeypatch):
    """TensorRT-LLM's plugin GEMMs (weight-only, SmoothQuant int8) run at m rows the kernel
    its profiler chose at the next power of two: m = 80 pads like m = 128 (measured A100 w4a16,
    n, k >= 2,048: m = 80 at 0.99 of the m = 128 time), slower than a tile chosen for 80 rows;
    a power of two is unchanged."""
    for dtype in ("w4a16", "int8"):
        batch = _gemm(dtype, [80, 128], 4096, 4096)
        profiled = _terms(batch)["seconds"]
        monkeypatch.setattr(model, "PROFILED_POW2_M", ())
        own = _terms(batch)["seconds"]
        monkeypatch.undo()
        assert profiled[0] > 1.05 * own[0]
        assert profiled[1] == pytest.approx(own[1])
        assert profiled[0] <= profiled[1] * (1 + 1e-9)


#: The most a GEMM's predicted time may fall as its rows grow (n, k fixed), as a share of the
#: slowest call of fewer rows. A library's kernel switch can make more rows faster, as the
#: measured H100 rows show: from m = 64 to 65 (a second 64-row tile, twice the units drawing
#: the bandwidth) 5% of the bf16 and fp8 (n, k) shapes get 3% faster or more and 1% 8-9%
#: (bf16 n = 51200, k = 32: 23%); from m = 16 to 17 the same (bf16 n = k = 4096: 16.3-16.7 us at
#: m = 1 to 16, 15.2-15.7 us at m = 17 to 64); bf16 n = 2048, k = 3584: 15.5 us at m = 225,
#: 10.1 us at m = 256. On A100 TensorRT-LLM's GEMV (m <= 4) walks all of K where its tiled
#: kernel splits it (w4a16 n = 128, k = 16384: 42.0 us at m = 4, 31.7 us at m = 8).
MONOTONE_STEP = 0.12

_SWEEP_SHAPES = (
    (32, 4096),
    (128, 512),
    (128, 1536),
    (128, 16384),
    (512, 512),
    (1536, 1536),
    (1536, 4096),
    (4096, 4096),
    (7168, 16384),
    (16384, 7168),
)
_WEIGHT_BYTES = {"fp8": 1.0, "fp8_block": 1.0, "int8": 1.0, "w8a16": 1.0, "w4a16": 0.5}


def _sweep(dtype: str, n: float, k: float) -> KernelBatch:
    """A GEMM of m = 1 to 4096 rows with its bytes: activations, weights and the bf16 output."""
    m = np.arange(1.0, 4097.0)
    size = len(m)
    shape = {"m": m, "n": np.full(size, n), "k": np.full(size, k)}
    if dtype.startswith("fp8"):
        passes = np.full(size, 2.0 if dtype == "fp8" else 1.0)
        shape.update(quantize_input=np.ones(size), quant_passes=passes)
    x = 1.0 if dtype == "int8" else 2.0
    nbytes = m * k * x + n * k * _WEIGHT_BYTES.get(dtype, 2.0) + m * n * 2.0
    return KernelBatch("gemm", dtype, 2.0 * m * n * k, nbytes, np.ones(size), shape)


@pytest.mark.parametrize(
    ("device", "dtypes"),
    [
        ("H100-SXM", ("bf16", "fp8", "fp8_block")),
        ("A100-SXM-80GB", ("bf16", "int8", "w4a16", "w8a16")),
        ("A100-PCIe-40GB", ("bf16",)),
        ("H100-PCIe", ("bf16", "fp8", "fp8_block")),
        ("H800", ("bf16", "fp8", "fp8_block")),
        ("H200", ("bf16", "fp8", "fp8_block")),
        ("B200", ("bf16", "fp8", "fp8_block")),
        ("MI300X", ("bf16", "fp8", "fp8_block")),
        ("L40S", ("bf16", "fp8", "fp8_block")),
        ("RTX-4080", ("bf16", "fp8")),
        ("RTX-4090", ("bf16", "fp8", "fp8_block")),
    ],
)
def test_gemm_time_barely_falls_with_more_rows(device, dtypes):
    """With the shipped profile (fitted devices, and by transfer catalogue ones) a GEMM of more
    rows (m = 1 to 4096) is never predicted more than MONOTONE_STEP faster than one of fewer
    (the worst, L40S block-scaled fp8 by transfer, 11.3%); bf16, the calls a user sizes most,
    within 6% (A100-PCIe-40GB, n = 128, k = 512: m = 65 5.6% faster than m = 64, its second
    row tile's units; measured on H100 as often: 5% of shapes 3% or more). Before the split
    count became a choice: H100 bf16 n = 128, k = 1,536, m = 64 at 8.4 us against 6.0 us at
    m = 80 (measured 4.8, 4.7)."""
    from mlacalc.timemodel.kernel_time import predict_batch
    from mlacalc.timemodel.profile import load_profile

    prof = load_profile()
    for dtype in dtypes:
        for n, k in _SWEEP_SHAPES:
            t = predict_batch(_sweep(dtype, n, k), device, prof)
            worst = np.min(t / np.maximum.accumulate(t))
            step = 0.06 if dtype == "bf16" else MONOTONE_STEP
            assert worst >= 1.0 - step, (dtype, n, k, worst)


def test_persistent_bf16_gemm_fills_its_pipeline_once():
    """cuBLAS's plain bf16 GEMM on a TMA device (H100, B200) is a persistent kernel: ``tile_s``
    once a call, not once a wave of tiles (gemm_time.PERSISTENT_DTYPES); on A100 once a wave;
    the batched bf16 GEMM and the fp8 GEMMs keep theirs a wave."""
    # 4,096 x 4,096 output in 128 x 128 tiles: 1,024 tiles, several waves on any device
    batch = _gemm("bf16", 4096, 4096, 1024)
    for device, per_wave in (("H100-SXM", False), ("B200", False), ("A100-SXM-80GB", True)):
        off = _terms(batch, device, tile_s=0.0)["compute_s"][0]
        on = _terms(batch, device, tile_s=1e-6)["compute_s"][0]
        added = (on - off) / 1e-6
        # (seconds at the reference clock: scaled by the device clock)
        assert (added > 2.0) if per_wave else added == pytest.approx(1.0, rel=0.05), device
    bmm = KernelBatch("gemm", "bf16", batch.flops, batch.bytes, batch.calls, batch.shape, "bmm")
    off = _terms(bmm, "H100-SXM", tile_s=0.0)["compute_s"][0]
    assert (_terms(bmm, "H100-SXM", tile_s=1e-6)["compute_s"][0] - off) / 1e-6 > 2.0
    assert "fp8_block" not in model.PERSISTENT_DTYPES


def test_cublas_fp8_gemm_is_persistent_and_cutlass_scaled_mm_is_not():
    """The per-tensor fp8 GEMM of cuBLAS (TensorRT-LLM's) pays ``tile_s`` once a call on H100;
    CUTLASS's ``scaled_mm`` (``cutlass_dispatch``) and a block-scaled stand-in a wave; A100's
    (an int8 fit standing in) a wave."""
    batch = _gemm("fp8", [4096] * 3, 4096, 1024, cutlass_dispatch=0)
    batch.shape["cutlass_dispatch"] = np.array([0.0, 1.0, 0.0])
    batch.shape[model.BLOCK_STAND_IN] = np.array([0.0, 0.0, 1.0])
    off = _terms(batch, "H100-SXM", tile_s=0.0)["compute_s"]
    added = (_terms(batch, "H100-SXM", tile_s=1e-6)["compute_s"] - off) / 1e-6
    assert added[0] == pytest.approx(1.0, rel=0.05) and added[1] > 2.0 and added[2] > 2.0
    off = _terms(batch, tile_s=0.0)["compute_s"][0]
    assert (_terms(batch, tile_s=1e-6)["compute_s"][0] - off) / 1e-6 > 2.0


def test_persistent_gemm_spreads_its_last_partial_wave():
    """cuBLAS's persistent bf16 GEMM on a TMA device spreads the tiles of a last partial wave
    over every SM (gemm_time.BALANCED_WAVES): at n = k = 4,096 its compute time grows with m
    in proportion from 2,048 to 4,096 rows (measured on B200, SGLang: 21.5-23.6 ns a row),
    where A100's non-persistent grid pays each wave whole, a step of time at each (the 3% left
    is the half row tile of m = 2,112, 2,240, ...)."""
    m = np.arange(2048.0, 4097.0, 64.0)
    batch = _gemm("bf16", m, np.full_like(m, 4096.0), np.full_like(m, 4096.0))
    for device in ("B200", "H100-SXM", "A100-SXM-80GB"):
        per_row = _terms(batch, device, tile_s=0.0)["compute_s"] / m
        spread = per_row.max() / per_row.min()
        if device == "A100-SXM-80GB":
            assert spread > 1.1, device
        else:
            assert spread < 1.05, (device, spread)  # before the rule: B200 1.38, H100 1.19


def test_vllm_per_tensor_quantize_moves_at_a_rate_per_sm_and_clock():
    """vLLM's per-tensor quantize (``quant_sm_bound`` rows, set by the mapping with its amax's
    atomics) moves its passes' bytes at ``quant_sm_bytes`` per QUANT_SM_BYTES_PER_CLOCK bytes a
    clock on every SM, so its time follows the SMs and clock from H100 to B200, not the HBM;
    every other quantize keeps the class's HBM share at ``quant_bytes``."""
    from mlacalc.measured.mapping import _Builder, _gemm_kernels
    from mlacalc.timemodel.gemm_time import QUANT_SM_BYTES_PER_CLOCK

    prm = default_params("gemm")
    prm.update(quant_sm_bytes=1.5, quant_bytes=1.0, atomic_cycles=0.0)
    cols = {"quantize_input": 1, "quant_passes": 2, "quant_launches": 3}
    m, k = 8192, 16384
    took = {}
    for name in ("H100-SXM", "B200"):
        fig = device_figures(load_hardware(name))
        plain = kernel_terms(_gemm("fp8", m, 64, k, **cols), fig, prm)["extra_s"][0]
        sm = kernel_terms(_gemm("fp8", m, 64, k, quant_sm_bound=1, **cols), fig, prm)
        rate = fig.sm_count * fig.clock_hz * QUANT_SM_BYTES_PER_CLOCK
        hbm = prm["eff_memory"] * fig.hbm_bytes_per_s
        passes = m * k * 5.0  # two bf16 reads and the fp8 write
        assert sm["extra_s"][0] - plain == pytest.approx(passes * (1.5 / rate - 1.0 / hbm))
        took[name] = sm["extra_s"][0]
    # the SMs times the clock, not the HBM (2.3x), part the two devices
    assert 1.0 < took["H100-SXM"] / took["B200"] < 1.3
    bld = _Builder(1)
    _gemm_kernels(bld, "gemm", np.arange(1), "fp8", [16.0], [64.0], [64.0], quant_sm_bound=1.0)
    _gemm_kernels(bld, "gemm", np.arange(1), "fp8", [16.0], [64.0], [64.0])
    assert [float(p.batch.shape["quant_sm_bound"][0]) for p in bld.parts] == [1.0, 0.0]
    # a model step's per-tensor fp8 GEMM under vLLM, not SGLang's
    from mlacalc.timemodel.gemm_time import engine_gemm_kernel

    step = _gemm("fp8", 64, 1024, 1024)
    step.shape.pop("quantize_input", None)
    fig = device_figures(load_hardware("B200"))
    assert engine_gemm_kernel(step, "vllm", fig).shape["quant_sm_bound"][0] == 1.0
    assert "quant_sm_bound" not in engine_gemm_kernel(step, "sglang", fig).shape


@pytest.mark.parametrize("name", ["L40S", "L4", "RTX-4090", "MI300X", "H100-SXM", "B200"])
def test_vllm_per_tensor_quantize_is_never_faster_than_its_memory(name):
    """The rate per SM and clock of vLLM's quantize was read on H100 and B200, where the SMs
    bind; a device of little memory bandwidth for its SMs (a GDDR card) cannot move the
    passes' bytes faster than its datasheet rate: the passes take at least their bytes over
    the HBM (a review: L40S 190.6 us for 671 MB that take 776.7 us at its full bandwidth).
    On H100 and B200 the rate per SM binds, so their fits do not move."""
    prm = dict(default_params("gemm"), quant_sm_bytes=1.63, quant_fixed_s=0.0, atomic_cycles=0.0)
    cols = {"quantize_input": 1, "quant_passes": 2, "quant_launches": 3}
    m, k = 8192, 16384
    fig = device_figures(load_hardware(name))
    sm = kernel_terms(_gemm("fp8", m, 64, k, quant_sm_bound=1, **cols), fig, prm)
    plain = kernel_terms(_gemm("fp8", m, 64, k, **cols), fig, dict(prm, quant_bytes=0.0))
    passes = sm["extra_s"][0] - plain["extra_s"][0]
    bytes_moved = m * k * 5.0
    assert passes >= bytes_moved / fig.hbm_bytes_per_s * (1 - 1e-12), name
    per_sm = bytes_moved * 1.63 / (fig.sm_count * fig.clock_hz * 16)
    assert passes == pytest.approx(max(per_sm, bytes_moved / fig.hbm_bytes_per_s)), name
    if name in ("H100-SXM", "B200"):
        assert per_sm > bytes_moved / fig.hbm_bytes_per_s, name


def test_vllm_per_tensor_quantize_walks_a_row_in_steps_of_2048():
    """vLLM's per-tensor quantize (``quant_sm_bound``) walks each token's row in whole steps of
    QUANT_ROW_STRIDE elements: its passes' SM time at k = 32 is that at 2,048, at 2,560 that at
    4,096 (twice 2,048's); the 1x128 quantize of a block-scaled GEMM it stands in for
    (``block_stand_in``) and every other quantize keep their row's own bytes. vLLM's measured
    rows show the stair: at n <= 64 and 1,025+ tokens the call at k = 2,560 takes 1.41 times
    its time at 2,048 on both devices (the median), which the shipped fits give (1.08-1.09
    before the rule)."""
    from mlacalc.timemodel.gemm_time import BLOCK_STAND_IN, QUANT_ROW_STRIDE

    assert QUANT_ROW_STRIDE == 2048.0
    prm = dict(default_params("gemm"), quant_sm_bytes=1.6, quant_fixed_s=0.0, atomic_cycles=0.0)
    fig = device_figures(load_hardware("H100-SXM"))
    cols = {"quantize_input": 1, "quant_passes": 2, "quant_launches": 3}
    m, k = 16384.0, np.asarray([32.0, 2048.0, 2560.0, 4096.0])

    def passes(**more):
        with_sm = kernel_terms(_gemm("fp8", m, 64, k, quant_sm_bound=1, **cols, **more), fig, prm)
        plain = kernel_terms(_gemm("fp8", m, 64, k, **cols, **more), fig, dict(prm, quant_bytes=0))
        return with_sm["extra_s"] - plain["extra_s"]

    walked = passes()
    assert walked[0] == pytest.approx(walked[1])
    assert walked[2] == pytest.approx(walked[3]) and walked[3] == pytest.approx(2 * walked[1])
    per_sm = m * 2048.0 * 5.0 * 1.6 / (fig.sm_count * fig.clock_hz * 16)
    assert walked[1] == pytest.approx(per_sm)
    # the block-scaled stand-in's quantize: its row's own bytes (linear in k)
    blocked = passes(**{BLOCK_STAND_IN: 1})
    assert blocked / blocked[1] == pytest.approx(k / 2048.0)
    pytest.importorskip("pyarrow")  # the measured rows below: the rule above holds without it
    for device, table, pred in _engine_gemm_rows("vllm"):
        dt = np.asarray(table.column("gemm_dtype")).astype(str)
        tm, tn, tk = (np.asarray(table.column(c), dtype=float) for c in ("m", "n", "k"))
        ratios = {"measured": [], "predicted": []}
        for mm in np.unique(tm[(dt == "fp8") & (tm >= 1025)]):
            for nn in (32.0, 64.0):
                at = (dt == "fp8") & (tm == mm) & (tn == nn)
                lo, hi = at & (tk == 2048), at & (tk == 2560)
                if lo.sum() == 1 and hi.sum() == 1:
                    ratios["measured"].append(table.seconds[hi][0] / table.seconds[lo][0])
                    ratios["predicted"].append(pred[hi][0] / pred[lo][0])
        assert len(ratios["measured"]) >= 20
        measured, predicted = np.median(ratios["measured"]), np.median(ratios["predicted"])
        assert measured > 1.3, (device, measured)
        assert predicted > 1.2 and abs(predicted / measured - 1) < 0.15, (device, predicted)


def test_nvfp4_quantize_costs_each_input_row_its_cta():
    """The nvfp4 GEMM's input quantize gives each row its own small CTA: ``quant_row_cycles``
    SM cycles a CTA (of every group) over all the SMs, beside its bytes. Where the engine's
    kernel caps its grid (``fp4_quant_grid``: SGLang's) the CTAs are
    ``gemm_time.fp4_quant_ctas`` (every SM's 2,048 threads in CTAs of k / 8 threads, 512 at
    most; past that a CTA loops over rows); else (vLLM's, TensorRT-LLM's) one a row. An fp8
    GEMM's quantize has no such term, nor an nvfp4 call that quantizes nothing."""
    fig = device_figures(load_hardware("B200"))
    cyc = 160.0
    m = np.asarray([4096.0, 4096.0, 32768.0, 32768.0])
    k = np.asarray([128.0, 4096.0, 128.0, 512.0])
    # k = 128: CTAs of 16 threads, 128 an SM's worth; k = 4,096 and 512: 512 and 64 threads,
    # 4 and 32 a SM; B200's 148 SMs
    ctas = np.asarray([4096.0, 4.0 * 148, 128.0 * 148, 32.0 * 148])
    assert fig.sm_count == 148
    assert model.fp4_quant_ctas(m, k, fig.sm_count) == pytest.approx(ctas)
    per_cta = cyc / (fig.clock_hz * fig.sm_count)
    for grid, want in ((1, ctas), (0, m)):
        fp4 = _gemm("nvfp4", m, 1024, k, quantize_input=1, fp4_quant_grid=grid)
        with_rows = _terms(fp4, "B200", quant_row_cycles=cyc)["extra_s"]
        without = _terms(fp4, "B200", quant_row_cycles=0.0)["extra_s"]
        assert with_rows - without == pytest.approx(want * per_cta, rel=1e-9)
    # a served step's nvfp4 GEMM takes its engine's quantize
    step = _gemm("nvfp4", m, 1024, k, quantize_input=1)
    for engine, grid in (("sglang", 1.0), ("trtllm", 0.0), ("vllm", 0.0)):
        ran = model.engine_gemm_kernel(step, engine, fig)
        assert (ran.shape[model.FP4_QUANT_GRID_FIELD] == grid).all(), engine
    # grouped rows: every group's rows
    grouped = _gemm("nvfp4", 512, 1024, 128, quantize_input=1, groups=8)
    extra = _terms(grouped, "B200", quant_row_cycles=cyc)["extra_s"]
    base = _terms(grouped, "B200", quant_row_cycles=0.0)["extra_s"]
    assert extra - base == pytest.approx(8 * 512 * cyc / (fig.clock_hz * fig.sm_count))
    fp8 = _gemm("fp8", m, 1024, k, quantize_input=1)
    assert _terms(fp8, "B200", quant_row_cycles=cyc)["extra_s"] == pytest.approx(
        _terms(fp8, "B200", quant_row_cycles=0.0)["extra_s"]
    )
    plain = _gemm("nvfp4", m, 1024, k)
    assert _terms(plain, "B200", quant_row_cycles=cyc)["extra_s"] == pytest.approx(
        _terms(plain, "B200", quant_row_cycles=0.0)["extra_s"]
    )


def test_sglang_fp8_quantize_costs_each_token_a_cta():
    """SGLang's per-tensor fp8 GEMM quantizes its input with a CTA a token
    (gemm_time.QUANT_ROW_CTA_ENGINES): a row flagged ``quant_row_ctas`` costs
    ``quant_row_cycles`` SM cycles over all the SMs beside its bytes, whatever n and k; an
    unflagged fp8 row (vLLM's, TensorRT-LLM's) none. A served step of SGLang's carries the flag,
    another engine's not; and the measured rows the term was read on (k <= 128, n <= 256, the
    input a few hundred bytes a row) stay within 20% of the shipped fits at 16,384+ rows (the
    per-tensor quantize alone predicted them 34-44% fast)."""
    from mlacalc.timemodel.gemm_time import QUANT_ROW_CTA_FIELD, engine_gemm_kernel

    fig = device_figures(load_hardware("B200"))
    cyc = 60.0
    m = np.asarray([4096.0, 32768.0, 32768.0])
    n = np.asarray([1024.0, 32.0, 8192.0])
    k = np.asarray([128.0, 64.0, 4096.0])
    flagged = _gemm("fp8", m, n, k, quantize_input=1, **{QUANT_ROW_CTA_FIELD: 1})
    extra = _terms(flagged, "B200", quant_row_cycles=cyc)["extra_s"]
    base = _terms(flagged, "B200", quant_row_cycles=0.0)["extra_s"]
    assert extra - base == pytest.approx(m * cyc / (fig.clock_hz * fig.sm_count), rel=1e-9)
    plain = _gemm("fp8", m, n, k, quantize_input=1)
    assert _terms(plain, "B200", quant_row_cycles=cyc)["extra_s"] == pytest.approx(
        _terms(plain, "B200", quant_row_cycles=0.0)["extra_s"]
    )
    step = _gemm("fp8", m, n, k)
    step.shape.pop("quantize_input")
    assert np.all(engine_gemm_kernel(step, "sglang", fig).shape[QUANT_ROW_CTA_FIELD] == 1)
    assert QUANT_ROW_CTA_FIELD not in engine_gemm_kernel(step, "vllm", fig).shape
    pytest.importorskip("pyarrow")  # the measured rows below: the rule above holds without it
    for device, table, pred in _engine_gemm_rows("sglang"):
        dt = np.asarray(table.column("gemm_dtype")).astype(str)
        tm, tn, tk = (np.asarray(table.column(c), dtype=float) for c in ("m", "n", "k"))
        sel = (dt == "fp8") & (tk <= 128) & (tn <= 256) & (tm >= 16384)
        assert sel.sum() >= 20
        err = pred[sel] / table.seconds[sel] - 1.0
        # without the term: H100 -34%, B200 -44%; with it +4%, -14%
        assert abs(np.median(err)) < 0.2, (device, np.median(err))


def test_few_row_gemm_on_a_cut_tensor_rate_device_pads_to_a_swapped_tile(monkeypatch):
    """cuBLAS multiplies a framework's ``x W^T`` with the tokens on the MMA's N side (steps of
    8), so a call of 2-32 rows pads to 8, 16 or 32 rows, not to a 64-row tile
    (SWAP_AB_TILES). It is taken where the padded tile's work on the whole chip outlasts the
    weights' read: on H20 (148 dense bf16 TFLOPS on 4.0 TB/s) a 64-row tile had made Llama's
    FFN up-projection at m = 2 twice its time at m = 1; on the measured devices nothing moves."""
    shape = ([1, 2, 8, 16, 32], 28672, 4096)
    h20 = _terms(_gemm("bf16", *shape), "H20")
    t = h20["seconds"]
    # memory-bound from one row to 16 (at 32 rows the chip's own ridge is near: 2 x 32 FLOPs a
    # weight of 2 bytes against 148 TFLOPS / 4.0 TB/s = 37 FLOPs a byte)
    assert np.all(h20["compute_s"][1:4] < h20["memory_s"][1:4])
    assert t[1] < 1.1 * t[0] and t[4] < 1.5 * t[0]
    monkeypatch.setattr(model, "SWAP_AB_DTYPES", ())
    padded = _terms(_gemm("bf16", *shape), "H20")["seconds"]
    assert padded[1] > 1.8 * padded[0]  # the 64-row tile's work, as before the rule
    assert padded[0] == pytest.approx(t[0])  # one row is the GEMV either way
    monkeypatch.undo()
    # every few-row call on a measured device keeps its time: a sweep of shapes and dtypes
    m = np.tile(np.arange(1.0, 33.0), 4)
    n = np.repeat([128.0, 4096.0, 28672.0, 128.0], 32)
    k = np.repeat([128.0, 4096.0, 4096.0, 65536.0], 32)
    for device in ("H100-SXM", "A100-SXM-80GB", "B200", "H200"):
        for dtype in ("bf16", "fp8"):
            if dtype == "fp8" and device == "A100-SXM-80GB":
                continue
            rule = _terms(_gemm(dtype, m, n, k), device)["seconds"]
            monkeypatch.setattr(model, "SWAP_AB_DTYPES", ())
            without = _terms(_gemm(dtype, m, n, k), device)["seconds"]
            monkeypatch.undo()
            np.testing.assert_allclose(rule, without, rtol=1e-12)


def test_a_shared_input_stays_in_the_l2_with_the_weight_copies():
    """The GEMM tables' collector runs its weight copies on one shared x (SHARED_INPUT_FIELD):
    a warm bf16 call finds x in the L2 with the weights while the copies and one x fit in its
    share (x counted once, not once a copy), and reads it at ``l2_speedup``. Not a quantized
    GEMM (it reads its quantize's fresh copy), and only TensorRT-LLM's and vLLM's rows carry
    the field, as their rows show (SGLang's do not)."""
    b200 = device_figures(load_hardware("B200"))
    prm = {**default_params("gemm"), "l2_share": 0.5, "l2_speedup": 2.0, "sm_bandwidth": 16.0}
    prm["epilogue_share"] = 0.0
    # x 33.6 MB, weight 0.5 MB x 5 copies: 36 MB, inside half of the 126 MB L2; five
    # copies of x would not fit
    m, n, k = 4096.0, 64.0, 4096.0
    x, w = m * k * 2.0, n * k * 2.0
    assert 5 * (x + w) > 2.0 * prm["l2_share"] * b200.l2_bytes > x + 5 * w
    kw = {"warm_l2": 1, "weight_copies": 5}
    shared = _terms(_gemm("bf16", m, n, k, shared_input=1, **kw), "B200", **prm)["memory_s"][0]
    alone = _terms(_gemm("bf16", m, n, k, **kw), "B200", **prm)["memory_s"][0]
    bw = prm["eff_memory"] * b200.hbm_bytes_per_s
    nbytes = x + w + m * n * 2.0
    fast = 2.0 * b200.hbm_bytes_per_s
    assert alone == pytest.approx((nbytes - w) / bw + w / fast, rel=1e-6)
    assert shared == pytest.approx((nbytes - w - x) / bw + (w + x) / fast, rel=1e-6)
    # a quantized GEMM ignores the field
    fp8 = [_gemm("fp8", m, n, k, shared_input=s, **kw) for s in (1, 0)]
    a, b = (_terms(g, "B200", **prm)["memory_s"][0] for g in fp8)
    assert a == pytest.approx(b, rel=1e-12)
    # the mapping marks the engines whose collector shares x
    from mlacalc.measured.mapping import _Builder, _gemm_kernels

    bld = _Builder(1)
    for flag in (1.0, 0.0):
        _gemm_kernels(bld, "gemm", np.arange(1), "bf16", [16.0], [64.0], [64.0], shared_input=flag)
    field = model.SHARED_INPUT_FIELD
    assert [float(p.batch.shape[field][0]) for p in bld.parts] == [1.0, 0.0]
    assert frozenset({"trtllm", "vllm"}) == model.SHARED_INPUT_ENGINES


def test_sglang_group_quantize_packs_fewer_groups_a_cta_at_an_odd_row_count():
    """SGLang's 1x128 group quantize (gemm_time.GROUP_QUANT_CTA_ENGINES) packs 16 groups into a
    CTA where m x ceil(k / 128) allows, else the largest power of two that divides it; each CTA
    the packing adds over 16 a CTA costs GROUP_QUANT_CTA_CYCLES SM cycles. An unflagged row
    pays nothing; and SGLang's measured rows of odd m above 512 at k = 768-3,584 (2 or 4 groups a
    CTA) read like their aligned neighbours (without the term -16% / -14% against +6% / +5%)."""
    from mlacalc.timemodel.gemm_time import (
        GROUP_QUANT_CTA_CYCLES,
        GROUP_QUANT_CTA_FIELD,
        group_quant_ctas,
    )

    m = np.asarray([4097.0, 4096.0, 4097.0, 4097.0, 1.0])
    k = np.asarray([3584.0, 3584.0, 4096.0, 768.0, 128.0])
    # 28 groups a row: 4 a CTA at odd m, 16 at m = 4,096; 32 a row: 16; 6 a row: 2; one: 1
    assert np.array_equal(group_quant_ctas(m, k), [28679.0, 7168.0, 8194.0, 12291.0, 1.0])
    fig = device_figures(load_hardware("H100-SXM"))
    n = np.full(len(m), 512.0)
    flagged = _gemm("fp8_block", m, n, k, quantize_input=1, **{GROUP_QUANT_CTA_FIELD: 1})
    plain = _gemm("fp8_block", m, n, k, quantize_input=1)
    added = _terms(flagged, "H100-SXM")["extra_s"] - _terms(plain, "H100-SXM")["extra_s"]
    ctas = group_quant_ctas(m, k) - m * np.ceil(k / 128) / 16
    want = ctas * GROUP_QUANT_CTA_CYCLES / (fig.clock_hz * fig.sm_count)
    assert added == pytest.approx(want, rel=1e-9)
    assert added[0] > 20e-6 and added[1] == 0.0 and added[2] == 0.0
    pytest.importorskip("pyarrow")  # the measured rows below: the rule above holds without it
    for device, table, pred in _engine_gemm_rows("sglang"):
        dt = np.asarray(table.column("gemm_dtype")).astype(str)
        tm, tk = (np.asarray(table.column(c), dtype=float) for c in ("m", "k"))
        sel = (dt == "fp8_block") & (tm > 512) & np.isin(tk, [768, 1536, 2560, 3584])
        odd = sel & (np.mod(tm, 4) != 0)
        assert odd.sum() >= 1000
        err = pred / table.seconds - 1.0
        odd_med, aligned_med = np.median(err[odd]), np.median(err[sel & ~odd])
        # with the term: H100 -0.1% against +2.6%, B200 +1.3% against +3.0%
        assert abs(odd_med) < 0.08 and abs(odd_med - aligned_med) < 0.08, (device, odd_med)


def test_a_served_sglang_block_scaled_gemm_pays_the_group_quantize_at_an_odd_row_count():
    """fixr11: a served step's block-scaled GEMM under SGLang (gemm_time.step_block_fp8) runs
    the 1x128 group quantize its gemm_perf rows were read on, so an odd prompt's GEMM pays
    its CTAs too (H100, k = 7,168: 29.6 us at m = 8,191, 14.8 at 4,097; k = 1,536 at 8,191:
    19.1), where it had been timed as the aligned m; a decode batch of 33 pays 0.1 us."""
    from mlacalc.timemodel.gemm_time import GROUP_QUANT_CTA_FIELD, step_block_fp8
    from mlacalc.timemodel.kernel_time import predict_batch

    def step(m: float, k: float) -> KernelBatch:  # a model step's: no quantization stated
        b = _gemm("fp8_block", m, 2048.0, k)
        return dataclasses.replace(b, shape={c: v for c, v in b.shape.items()
                                             if c != "quantize_input"})  # fmt: skip

    prof = "fit-h100-sxm-sglang"

    def us(m: float, k: float) -> float:
        return float(predict_batch(step(m, k), "H100-SXM", prof)[0]) * 1e6

    assert step_block_fp8(step(8191.0, 7168.0), "sglang").shape[GROUP_QUANT_CTA_FIELD][0] == 1
    assert us(8191.0, 7168.0) - us(8192.0, 7168.0) == pytest.approx(29.6, abs=0.3)
    assert us(4097.0, 7168.0) - us(4096.0, 7168.0) == pytest.approx(14.8, abs=0.3)
    assert us(8191.0, 1536.0) - us(8192.0, 1536.0) == pytest.approx(19.1, abs=0.3)
    assert us(33.0, 7168.0) - us(32.0, 7168.0) < 0.5


def test_per_tensor_quantize_rereads_its_input_from_the_l2_on_hopper():
    """A two-pass per-tensor quantize (amax, then scaling) on H100 whose class has a
    ``quant_l2_share``: the scaling pass reads the resident share of the bf16 input from the
    L2 at ``l2_speedup`` (all of it within that share of the L2, none from twice it); a class
    without it (0, the default: every profile not refitted with it) keeps both reads at the
    HBM, whatever its ``l2_share``. Not on B200 (``tcgen05``), nor vLLM's SM-bound passes, nor
    a one-pass quantize."""
    prm = dict(default_params("gemm"), quant_bytes=1.0, quant_fixed_s=0.0, atomic_cycles=0.0)
    prm.update(l2_share=0.5, l2_speedup=4.0, quant_l2_share=0.5)
    cols = {"quantize_input": 1, "quant_passes": 2, "quant_launches": 3}
    m, k = 4096.0, np.asarray([1024.0, 16384.0])  # an input of 8 MB, then 134 MB
    x = m * k * 2.0
    for name in ("H100-SXM", "B200"):
        fig = device_figures(load_hardware(name))
        per_byte = 1.0 / (prm["eff_memory"] * fig.hbm_bytes_per_s)
        # the quantize's seconds: the call's extra time less the same GEMM's without it
        base = kernel_terms(_gemm("fp8", m, 64, k), fig, prm)["extra_s"]

        def quantize(p, fig=fig, base=base, **more):
            got = kernel_terms(_gemm("fp8", m, 64, k, **dict(cols, **more)), fig, p)
            return got["extra_s"] - base

        got = quantize(prm)
        hbm_only = m * k * 5.0 * per_byte  # two bf16 reads and the fp8 write
        share = prm["quant_l2_share"] * fig.l2_bytes
        if name == "H100-SXM":
            assert x[0] < share < 2 * share < x[1]
            l2 = x[0] / (prm["l2_speedup"] * fig.hbm_bytes_per_s)
            assert got[0] == pytest.approx(m * k[0] * 3.0 * per_byte + l2)
            assert got[0] < 0.75 * hbm_only[0]
        else:
            assert got[0] == pytest.approx(hbm_only[0])
        assert got[1] == pytest.approx(hbm_only[1])
        # a class without the share: the HBM twice, its GEMM's l2_share notwithstanding
        assert quantize(dict(prm, quant_l2_share=0.0)) == pytest.approx(hbm_only)
        # vLLM's SM-bound passes and a one-pass quantize keep their bytes
        sm = dict(cols, quant_sm_bound=1)
        bound = kernel_terms(_gemm("fp8", m, 64, k, **sm), fig, dict(prm, quant_sm_bytes=1.0))
        rate = fig.sm_count * fig.clock_hz * model.QUANT_SM_BYTES_PER_CLOCK
        walked = np.ceil(k / model.QUANT_ROW_STRIDE) * model.QUANT_ROW_STRIDE
        want = m * walked * 5.0 * np.maximum(1.0 / rate, k / walked / fig.hbm_bytes_per_s)
        assert bound["extra_s"] - base == pytest.approx(want)
        single = quantize(prm, quant_passes=1, quant_launches=1)
        assert single == pytest.approx(m * k * 3.0 * per_byte)
