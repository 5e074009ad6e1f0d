"""The linear-attention kernels of the time model (Gated DeltaNet and Mamba-2 tables): the
kernels whose bandwidth follows the SMs, the chunked rule's walk over its chunks, the chunked
form's HBM passes, and TensorRT-LLM's Mamba-2 prompt conv in channel blocks."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from reference_data import MEASURED

from mlacalc.hardware.catalogue import load_hardware
from mlacalc.timemodel.device import device_figures
from mlacalc.timemodel.elementwise_time import SM_BYTES_PER_CLOCK
from mlacalc.timemodel.terms import default_params, kernel_terms
from mlacalc.words.kernels import KernelBatch


def _batch(variant: str, nbytes: float, **fields: float) -> KernelBatch:
    shape = {k: np.array([float(v)]) for k, v in fields.items()}
    return KernelBatch("elementwise", "bf16", np.zeros(1), np.array([nbytes]), np.ones(1), shape,
                       variant=variant)  # fmt: skip


def _conv_step(variant: str, seqs: int, tokens: list[int]) -> KernelBatch:
    """A model step's conv over 64 channels: one row per entry of ``tokens`` (new tokens a
    sequence), each of ``seqs`` sequences."""
    n = len(tokens)
    shape = {
        "seqs": np.full(n, float(seqs)),
        "channels": np.full(n, 64.0),
        "elements": seqs * np.asarray(tokens, dtype=np.float64) * 64.0,
    }
    return KernelBatch("elementwise", "bf16", np.zeros(n), np.ones(n), np.ones(n), shape, variant)


def _prm(**over: float) -> dict[str, float]:
    return {**default_params("elementwise"), "fixed_s": 0.0, "eff_memory": 1.0,
            "sm_bandwidth": 16.0, "unit_latency_s": 0.0, **over}  # fmt: skip


def test_sm_bound_kernels_move_bytes_at_a_rate_per_sm_and_clock():
    """The conv1d and chunked kernels draw H100's bytes per SM and clock on every device (so at
    most SMs x clock x 13.9 B, 3.8 TB/s on B200, half its HBM); the recurrent kernel and other
    streaming kernels draw the HBM's bandwidth."""
    h100, b200 = (device_figures(load_hardware(n)) for n in ("H100-SXM", "B200"))
    nbytes = 2.0**32
    for variant in ("conv1d", "gdn_chunk", "mamba2_conv1d"):
        (th,) = kernel_terms(_batch(variant, nbytes), h100, _prm())["memory_s"]
        (tb,) = kernel_terms(_batch(variant, nbytes), b200, _prm())["memory_s"]
        assert th == pytest.approx(nbytes / h100.hbm_bytes_per_s)  # H100 unchanged
        assert tb == pytest.approx(nbytes / (SM_BYTES_PER_CLOCK * 148 * b200.clock_hz))
        assert tb / th == pytest.approx(132 * h100.clock_hz / (148 * b200.clock_hz), rel=1e-6)
    for variant in ("gdn_recurrent", "mhc_post"):
        (tb,) = kernel_terms(_batch(variant, nbytes), b200, _prm())["memory_s"]
        assert tb == pytest.approx(nbytes / b200.hbm_bytes_per_s)


def test_a_chunked_kernel_walks_its_chunks_in_waves_of_units():
    """Each (sequence, head) walks its chunks one after another, ``unit_latency_s`` a chunk, in
    waves of units over the SMs: 512 chunks of 16 units wait 512 latencies, 264 units twice."""
    h100 = device_figures(load_hardware("H100-SXM"))
    prm = _prm(unit_latency_s=1e-6)
    one = kernel_terms(_batch("gdn_chunk", 1.0, chunks=512, seq_heads=16), h100, prm)
    two = kernel_terms(_batch("gdn_chunk", 1.0, chunks=512, seq_heads=264), h100, prm)
    assert one["extra_s"][0] == pytest.approx(512e-6)
    assert two["extra_s"][0] == pytest.approx(2 * 512e-6)
    # fewer SMs, more waves
    few = dataclasses.replace(h100, sm_count=8)
    assert kernel_terms(_batch("gdn_chunk", 1.0, chunks=4, seq_heads=16), few, prm)["extra_s"][
        0
    ] == pytest.approx(8e-6)


def _mapped(system: str, engine: str, table: str):
    pytest.importorskip("pyarrow")
    from mlacalc.measured.mapping import map_table
    from mlacalc.measured.tables import load_measured

    (path,) = (MEASURED / system / "linear_attention" / engine).glob(f"*/{table}.parquet")
    (t,) = load_measured(path).tables
    return t, map_table(t)


def test_the_chunked_forms_passes_and_the_fused_kernel():
    """Flash-linear-attention's chunked rule (SGLang, TensorRT-LLM) moves its intermediates
    through HBM: 5 KiB a token and value head at 128-wide heads with as many key heads, over
    five times its inputs and output; FlashInfer's fused kernel (vLLM) moves q, k, v, the
    output, the gates and the state only. Both walk ceil(seq_len / 64) chunks a unit."""
    t, m = _mapped("h100_sxm", "sglang", "gdn_perf")
    (p,) = [p for p in m.parts if p.batch.variant == "gdn_chunk"]
    hk, hv = t.column("num_k_heads")[p.rows], t.column("num_v_heads")[p.rows]
    tok, seqs = t.column("num_tokens")[p.rows], t.column("batch_size")[p.rows]
    state = seqs * hv * 128 * 128 * 4.0
    fla = tok * (10 * hk * 128 + hv * (16 * 128 + 12 * 64 + 4 * 128 * 128 / 64))
    np.testing.assert_allclose(p.batch.bytes, fla + state)
    same = hk == hv
    assert np.allclose((p.batch.bytes - state)[same] / (tok * hv)[same], 5120.0)
    np.testing.assert_allclose(p.batch.shape["chunks"], np.ceil(t.column("seq_len")[p.rows] / 64))
    np.testing.assert_allclose(p.batch.shape["seq_heads"], seqs * hv)
    t, m = _mapped("h100_sxm", "vllm", "gdn_perf")
    (p,) = [p for p in m.parts if p.batch.variant == "gdn_chunk"]
    hk, hv = t.column("num_k_heads")[p.rows], t.column("num_v_heads")[p.rows]
    tok, seqs = t.column("num_tokens")[p.rows], t.column("batch_size")[p.rows]
    io = tok * (2 * hk * 128 + 2 * hv * 128) * 2.0 + tok * hv * 8.0
    np.testing.assert_allclose(p.batch.bytes, io + seqs * hv * 128 * 128 * 4.0)


def test_trtllm_prompt_conv_runs_in_channel_blocks():
    """TensorRT-LLM's prompt conv: ``units`` = sequences x 32-channel blocks (its one-token
    rows grow by a CTA's wait for each); sequences not a multiple of 8 tokens take the
    unvectorised path (``scalar_load``); its GDN conv is the same kernel."""
    t, m = _mapped("h100_sxm", "trtllm", "mamba2_perf")
    (p,) = [p for p in m.parts if p.batch.variant == "mamba2_conv1d"]
    ch = t.column("nheads") * t.column("head_dim") + 2 * t.column("n_groups") * t.column("d_state")
    units = t.column("batch_size") * np.ceil(ch / 32)
    np.testing.assert_allclose(p.batch.shape["units"], units[p.rows])
    scalar = t.column("seq_len")[p.rows] % 8 != 0
    np.testing.assert_array_equal(p.batch.shape["scalar_load"] > 0, scalar)
    assert scalar.any() and not scalar.all()
    assert "launches" not in p.batch.shape
    t, g = _mapped("h100_sxm", "trtllm", "gdn_perf")
    (c,) = [p for p in g.parts if p.batch.variant == "conv1d"]
    ch = t.column("num_k_heads") * t.column("head_k_dim")
    np.testing.assert_allclose(c.batch.shape["units"], (t.column("batch_size") * ch / 32)[c.rows])
    assert c.batch.shape["scalar_load"].any() and "launches" not in c.batch.shape


@pytest.mark.parametrize(
    "system, engine, table, profile, bound",
    [
        # each device predicted by the other's fit (before these terms: 67% / 38% GDN, 49% /
        # 35% Mamba-2 conv, TensorRT-LLM; 49% / 38% SGLang; 78% / 43% vLLM)
        ("h100_sxm", "trtllm", "gdn_perf", "fit-b200-sxm", 0.105),
        ("b200_sxm", "trtllm", "gdn_perf", "default", 0.11),
        ("h100_sxm", "trtllm", "mamba2_perf", "fit-b200-sxm", 0.065),
        ("b200_sxm", "trtllm", "mamba2_perf", "default", 0.065),
        ("h100_sxm", "sglang", "gdn_perf", "fit-b200-sxm-sglang", 0.115),
        ("b200_sxm", "vllm", "gdn_perf", "fit-h100-sxm-vllm", 0.11),
    ],
)
def test_linear_attention_carries_between_devices(system, engine, table, profile, bound):
    from mlacalc.measured.observations import predict_mapped

    t, m = _mapped(system, engine, table)
    pred = predict_mapped(m, None, profile)
    ok = m.modelled & np.isfinite(pred)
    assert ok.sum() > 600 and np.median(np.abs(pred[ok] / t.seconds[ok] - 1)) <= bound


def test_the_mamba2_prompt_conv_waits_per_cta_overlapped_with_its_traffic():
    """TensorRT-LLM's Mamba-2 prompt conv: ``unit_latency_s`` a CTA's share of the SMs (no whole
    waves: 133 CTAs wait 133/132 latencies, not two), overlapped with its traffic (a p-norm,
    p = 2), ``scalar_load`` times as long on the unvectorised path."""
    h100 = device_figures(load_hardware("H100-SXM"))
    prm = _prm(unit_latency_s=1e-6, scalar_load=1.3)
    nbytes = 1e-6 * h100.hbm_bytes_per_s  # 1 us of traffic
    (wait,) = kernel_terms(_batch("mamba2_conv1d", 0.0, units=133), h100, prm)["memory_s"]
    assert wait == pytest.approx(133 / 132 * 1e-6)
    t = kernel_terms(_batch("mamba2_conv1d", nbytes, units=132), h100, prm)
    assert t["memory_s"][0] == pytest.approx(2**0.5 * 1e-6) and t["extra_s"][0] == 0.0
    slow = kernel_terms(_batch("mamba2_conv1d", 0.0, units=132, scalar_load=1), h100, prm)
    assert slow["memory_s"][0] == pytest.approx(1.3e-6)
    # a step's conv carries the same fields as the measured row of its shape
    from mlacalc.timemodel.elementwise_time import engine_linear_kernel

    step = _conv_step("mamba2_conv1d", 2, [4, 16])
    out = engine_linear_kernel(step, "trtllm", h100)
    np.testing.assert_allclose(out.shape["units"], [4.0, 4.0])
    np.testing.assert_allclose(out.shape["scalar_load"], [1.0, 0.0])


def test_sglang_and_vllm_prompt_conv_walks_its_block_of_tokens():
    """SGLang's and vLLM's prompt conv1d: a CTA walks at most 8 of a sequence's tokens one
    after another (``chunks``, one unit), a measured row and a step alike; TensorRT-LLM's and
    the update kernel have no such walk. Their Mamba-2 convs are these kernels."""
    from mlacalc.timemodel.elementwise_time import engine_linear_kernel

    for engine in ("sglang", "vllm"):
        t, m = _mapped("h100_sxm", engine, "gdn_perf")
        (p,) = [p for p in m.parts if p.batch.variant == "conv1d"]
        q = t.column("seq_len")[p.rows]
        np.testing.assert_allclose(p.batch.shape["chunks"], np.minimum(q, 8))
        np.testing.assert_allclose(p.batch.shape["seq_heads"], 1.0)
        (u,) = [p for p in m.parts if p.batch.variant == "conv1d_update"]
        assert "chunks" not in u.batch.shape
    h100 = device_figures(load_hardware("H100-SXM"))
    step = _conv_step("conv1d", 4, [3, 100])
    out = engine_linear_kernel(step, "vllm", h100)
    np.testing.assert_allclose(out.shape["chunks"], [3.0, 8.0])
    walk = kernel_terms(out, h100, _prm(unit_latency_s=1e-7))["extra_s"]
    np.testing.assert_allclose(walk, [3e-7, 8e-7])
    assert "chunks" not in engine_linear_kernel(step, "trtllm", h100).shape
    # their Mamba-2 conv is the same kernel, timed by their conv classes
    mamba = engine_linear_kernel(dataclasses.replace(step, variant="mamba2_conv1d"), "sglang", h100)
    assert mamba.variant == "conv1d" and "chunks" in mamba.shape
    update = dataclasses.replace(step, variant="mamba2_conv1d_update")
    assert engine_linear_kernel(update, "vllm", h100).variant == "conv1d_update"
    assert engine_linear_kernel(update, "trtllm", h100).variant == "mamba2_conv1d_update"


def test_a_chunked_kernels_tiles_cost_a_wave_each():
    """A chunked delta rule's tiles, ``tile_s`` a wave of them over the SMs: flash-linear-
    attention's (sequence, chunk, head), a one-token sequence a whole chunk's tile; FlashInfer's
    fused kernel's (sequence, head) units; a step's kernel carries the same tiles as the row."""
    from mlacalc.timemodel.elementwise_time import engine_linear_kernel

    h100 = device_figures(load_hardware("H100-SXM"))
    prm = _prm(tile_s=1e-6)
    (t,) = kernel_terms(_batch("gdn_chunk", 1.0, tiles=133), h100, prm)["extra_s"]
    assert t == pytest.approx(2e-6)
    for engine, want in (("sglang", "chunks"), ("vllm", "fused")):
        table, m = _mapped("h100_sxm", engine, "gdn_perf")
        (p,) = [p for p in m.parts if p.batch.variant == "gdn_chunk"]
        units = (table.column("batch_size") * table.column("num_v_heads"))[p.rows]
        chunks = np.ceil(table.column("seq_len")[p.rows] / 64) if want == "chunks" else 1.0
        np.testing.assert_allclose(p.batch.shape["tiles"], units * chunks)
        step = KernelBatch("elementwise", "bf16", np.zeros(1), np.ones(1), np.ones(1),
                           {"seq_heads": np.array([64.0]), "chunks": np.array([3.0]),
                            "fla_bytes": np.array([0.0])}, variant="gdn_chunk")  # fmt: skip
        out = engine_linear_kernel(step, engine, h100).shape["tiles"]
        np.testing.assert_allclose(out, [64.0 * (3.0 if want == "chunks" else 1.0)])


@pytest.mark.parametrize("system", ["h100_sxm", "b200_sxm"])
def test_a_chunked_kernel_walks_its_fullest_chunks_tokens_once(system):
    """Flash-linear-attention's chunked rule walks the tokens of a chunk one after another,
    ``chunk_token_s`` each, once a call (``chunk_tokens``: up to 64, its fullest chunk): SGLang's
    rows at one or two sequences take 21.5 / 24.6 / 29.6 / 40.1 us at 1 / 16 / 32 / 64 tokens
    (H100, two value heads) and 41.6 at 128. Its rows of one or two sequences of 1-4 tokens had
    been +22% / +35% (H100 / B200), of 64 tokens -29% / -21% (signed median); FlashInfer's
    fused kernel (vLLM) has no such walk, and a step's kernel carries the row's field."""
    from mlacalc.timemodel.elementwise_time import engine_linear_kernel

    h100 = device_figures(load_hardware("H100-SXM"))
    prm = _prm(tile_s=1e-6, chunk_token_s=1e-7)
    few, many = (
        kernel_terms(_batch("gdn_chunk", 1.0, tiles=t, chunk_tokens=64), h100, prm)["extra_s"][0]
        for t in (1, 1000)
    )
    assert few == pytest.approx(1e-6 + 6.4e-6) and many == pytest.approx(8e-6 + 6.4e-6)
    step = KernelBatch("elementwise", "bf16", np.zeros(1), np.ones(1), np.ones(1),
                       {"seq_heads": np.array([8.0]), "chunks": np.array([1.0]),
                        "chunk_tokens": np.array([16.0]), "fla_bytes": np.array([0.0])},
                       variant="gdn_chunk")  # fmt: skip
    assert engine_linear_kernel(step, "sglang", h100).shape["chunk_tokens"][0] == 16.0
    assert engine_linear_kernel(step, "vllm", h100).shape["chunk_tokens"][0] == 0.0
    from mlacalc.measured.observations import predict_mapped
    from mlacalc.timemodel.profile import load_profile

    table, m = _mapped(system, "sglang", "gdn_perf")
    (p,) = [p for p in m.parts if p.batch.variant == "gdn_chunk"]
    q = table.column("seq_len")[p.rows]
    np.testing.assert_allclose(p.batch.shape["chunk_tokens"], np.minimum(q, 64))
    profile = "fit-h100-sxm-sglang" if system == "h100_sxm" else "fit-b200-sxm-sglang"
    err = predict_mapped(m, None, load_profile(profile))[p.rows] / table.seconds[p.rows] - 1.0
    few_seqs = table.column("batch_size")[p.rows] <= 2
    assert abs(np.median(err[few_seqs & (q <= 4)])) <= 0.13
    assert abs(np.median(err[few_seqs & (q == 64)])) <= 0.08


def test_a_replayed_recurrent_state_is_read_from_the_l2_while_it_fits():
    """SGLang's and vLLM's recurrent rows replay one state (``state_bytes``, ``warm_l2``): read
    and written at ``l2_speedup`` times the HBM while it fits in ``l2_share`` of the L2, from
    the HBM from twice that; TensorRT-LLM's rows (no ``state_bytes``) and a served step's
    kernel (no ``warm_l2``) read the HBM."""
    h100 = device_figures(load_hardware("H100-SXM"))
    prm = _prm(l2_share=0.5, l2_speedup=2.0)
    state = np.array([0.25, 1.0, 2.0]) * 0.5 * h100.l2_bytes
    cold = KernelBatch("elementwise", "bf16", np.zeros(3), 2 * state, np.ones(3),
                       {"state_bytes": state}, variant="gdn_recurrent")  # fmt: skip
    warm = dataclasses.replace(cold, shape={"state_bytes": state, "warm_l2": np.ones(3)})
    t_cold = kernel_terms(cold, h100, prm)["memory_s"]
    t_warm = kernel_terms(warm, h100, prm)["memory_s"]
    np.testing.assert_allclose(t_cold, 2 * state / h100.hbm_bytes_per_s)
    np.testing.assert_allclose(t_warm / t_cold, [0.5, 0.5, 1.0])
    for engine, warm_rows in (("sglang", True), ("vllm", True), ("trtllm", False)):
        t, m = _mapped("h100_sxm", engine, "gdn_perf")
        (p,) = [p for p in m.parts if p.batch.variant == "gdn_recurrent"]
        assert ("state_bytes" in p.batch.shape) == warm_rows
        if warm_rows:
            hv = t.column("num_v_heads")[p.rows]
            want = t.column("batch_size")[p.rows] * hv * 128 * 128 * 4.0
            np.testing.assert_allclose(p.batch.shape["state_bytes"], want)


def test_a_fused_chunked_kernel_streams_while_it_walks():
    """FlashInfer's fused kernel (``fused``) overlaps its traffic with its walk (a p-norm,
    p = 4); flash-linear-attention's kernels add the walk after their passes."""
    h100 = device_figures(load_hardware("H100-SXM"))
    prm = _prm(unit_latency_s=1e-6)
    nbytes = 512e-6 * h100.hbm_bytes_per_s  # 512 us of traffic, as long as the walk
    split = kernel_terms(_batch("gdn_chunk", nbytes, chunks=512, seq_heads=16), h100, prm)
    fused = kernel_terms(_batch("gdn_chunk", nbytes, chunks=512, seq_heads=16, fused=1), h100, prm)
    assert split["memory_s"][0] == pytest.approx(512e-6)
    assert split["extra_s"][0] == pytest.approx(512e-6)
    assert fused["extra_s"][0] == 0.0
    assert fused["memory_s"][0] == pytest.approx(512e-6 * 2**0.25)
    _, m = _mapped("h100_sxm", "vllm", "gdn_perf")
    (p,) = [p for p in m.parts if p.batch.variant == "gdn_chunk"]
    assert np.all(p.batch.shape["fused"] == 1)
