"""The linear-attention kernels of the time model (Gated DeltaNet and Mamba-2 tables): the
kernels whose bandwidth follows the SMs, the chunked rule's walk over its chunks, the chunked
form's HBM passes, and TensorRT-LLM's prompt conv in waves of channel blocks."""

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


def test_trtllm_mamba2_prompt_conv_runs_in_waves_of_channel_blocks():
    """TensorRT-LLM's Mamba-2 prompt conv: ``units`` = sequences x 32-channel blocks (its
    one-token rows step by a wave of them); its GDN conv keeps a launch a sequence."""
    t, m = _mapped("h100_sxm", "trtllm", "mamba2_perf")
    (p,) = [p for p in m.parts if p.batch.variant == "mamba2_conv1d"]
    ch = t.column("nheads") * t.column("head_dim") + 2 * t.column("n_groups") * t.column("d_state")
    units = t.column("batch_size") * np.ceil(ch / 32)
    np.testing.assert_allclose(p.batch.shape["units"], units[p.rows])
    assert "launches" not in p.batch.shape
    _, g = _mapped("h100_sxm", "trtllm", "gdn_perf")
    (c,) = [p for p in g.parts if p.batch.variant == "conv1d"]
    assert "units" not in c.batch.shape and c.batch.shape["launches"].max() > 1


@pytest.mark.parametrize(
    "system, engine, table, profile, bound",
    [
        # each device predicted by the other's fit (before these terms: 67% / 38% GDN, 49% /
        # 35% Mamba-2 conv, TensorRT-LLM; 49% / 38% SGLang; 78% / 43% vLLM)
        ("h100_sxm", "trtllm", "gdn_perf", "fit-b200-sxm", 0.14),
        ("b200_sxm", "trtllm", "gdn_perf", "default", 0.14),
        ("h100_sxm", "trtllm", "mamba2_perf", "fit-b200-sxm", 0.125),
        ("b200_sxm", "trtllm", "mamba2_perf", "default", 0.16),
        ("h100_sxm", "sglang", "gdn_perf", "fit-b200-sxm-sglang", 0.135),
        ("b200_sxm", "vllm", "gdn_perf", "fit-h100-sxm-vllm", 0.165),
    ],
)
def test_linear_attention_carries_between_devices(system, engine, table, profile, bound):
    from mlacalc.measured.observations import predict_mapped

    t, m = _mapped(system, engine, table)
    pred = predict_mapped(m, None, profile)
    ok = m.modelled & np.isfinite(pred)
    assert ok.sum() > 600 and np.median(np.abs(pred[ok] / t.seconds[ok] - 1)) <= bound


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
