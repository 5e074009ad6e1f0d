"""SGLang's and vLLM's dense prompt kernels read their MMA operands under their products on
both generations (``attention_time.OPERAND_ASYNC_PREFILL``, the mapping's ``operand_async``):
FlashAttention-3 on H100 and TensorRT-LLM-gen (through FlashInfer) on B200; vLLM's over an
fp8 cache keep them (``OPERAND_ASYNC_BF16_ONLY``). The arithmetic of the term it drops, the
kernels that keep it, the measured H100 rows at head dims 192 and 256 it is read on, and the
block walk a score kernel of no value product does not pay (``_softmax_blocks``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mlacalc.hardware.catalogue import load_hardware
from mlacalc.timemodel.attention_time import (
    engine_attention_kernel,
    prefill_terms,
)
from mlacalc.timemodel.device import device_figures
from mlacalc.timemodel.shared import SMEM_BYTES_PER_CLOCK, mma_rows
from mlacalc.timemodel.terms import default_params
from mlacalc.words.kernels import KernelBatch

MEASURED = Path(__file__).resolve().parents[1] / "mlacalc" / "data" / "measured"


def _prompt(hd: float, cols: dict, s: float = 8192.0, dtype: str = "bf16") -> KernelBatch:
    shape = {"batch": 1.0, "q_len": s, "kv_len": s, "n_heads": 32.0, "n_kv": 32.0,
             "head_dim_qk": hd, "head_dim_v": hd, "window": 0.0, "causal": 0.0, **cols}  # fmt: skip
    flops = np.array([2.0 * 32 * s * s * 2 * hd])
    return KernelBatch(
        "attention_prefill",
        dtype,
        flops,
        np.ones(1),
        np.ones(1),
        {k: np.array([float(v)]) for k, v in shape.items()},
    )


def _compute(device: str, hd: float, cols: dict, prm: dict | None = None) -> float:
    fig = device_figures(load_hardware(device))
    prm = default_params("attention_prefill") if prm is None else prm
    return float(prefill_terms(_prompt(hd, cols), fig, prm)["compute_s"][0])


@pytest.mark.parametrize("device", ["H100-SXM", "B200"])
def test_async_operands_drop_the_tiles_shared_memory_reads(device):
    # 8,192 tokens, 32 heads, non-causal: 64 tiles a head of 64 key blocks each; the dropped
    # time is each tile's K and V blocks read once per MMA's rows (2 on Hopper, 1 on Blackwell)
    fig = device_figures(load_hardware(device))
    hd = 128.0
    tiles = 32 * 64
    waves = np.ceil(tiles / fig.sm_count)
    reads = np.ceil(128.0 / mma_rows(fig))
    per_tile = 8192.0 * reads * 2 * hd * 2.0 / (SMEM_BYTES_PER_CLOCK * fig.clock_hz)
    dropped = _compute(device, hd, {}) - _compute(device, hd, {"operand_async": 1.0})
    assert dropped == pytest.approx(waves * per_tile, rel=1e-6)


def test_a_tile_cut_below_the_mma_keeps_its_reads():
    # Blackwell's bf16 prompt at head dim 512 runs 64-row tiles (the shared memory): its reads
    # stay; at 256 (128 rows) they go
    assert _compute("B200", 512.0, {"operand_async": 1.0}) == _compute("B200", 512.0, {})
    assert _compute("B200", 256.0, {"operand_async": 1.0}) < _compute("B200", 256.0, {})


def test_which_engines_kernels_take_it():
    for device in ("H100-SXM", "B200"):
        fig = device_figures(load_hardware(device))
        for engine in ("sglang", "vllm"):
            b = engine_attention_kernel(_prompt(128.0, {}), engine, fig)
            assert b.shape["operand_async"][0] == 1.0
        # TensorRT-LLM's own prompt kernels keep their reads
        b = engine_attention_kernel(_prompt(128.0, {}), "trtllm", fig)
        assert "operand_async" not in b.shape
        # vLLM's prompt over an fp8 cache keeps them (its attention_prefill:fp8 class)
        b = engine_attention_kernel(_prompt(128.0, {}, dtype="fp8"), "vllm", fig)
        assert "operand_async" not in b.shape


def test_a_score_kernel_of_no_values_walks_no_softmax_blocks():
    # MiniMax-M3's block indexer (head_dim_v 0, no variant) borrows the dense prompt class:
    # the class's block walk (block_s, the online softmax's per-block work) is not its cost;
    # a kernel with values pays it on every key block it walks
    prm = default_params("attention_prefill")
    slow = {**prm, "block_s": prm["block_s"] + 1e-6}
    fig = device_figures(load_hardware("B200"))
    for hd_v, paid in ((0.0, False), (128.0, True)):
        b = _prompt(128.0, {"head_dim_v": hd_v})
        base = prefill_terms(b, fig, prm)["compute_s"][0]
        more = prefill_terms(b, fig, slow)["compute_s"][0]
        assert (more > base) == paid


def test_h100_flashattention3_prompts_at_wide_head_dims():
    # SGLang's and vLLM's H100 bf16 rows (FlashAttention-3), no window, 2,048 tokens and more,
    # head dims 192 and 256: the reads beside the products read them +10.5% / +4.5% slow
    # (SGLang; signed medians, where head dims 64 and 128 read +1.7% / -0.5%) and +14.9% /
    # +19.3% (vLLM; +0.1% / +4.8% at 64 / 128)
    from mlacalc.measured.mapping import map_table  # deferred: the measured extra (pyarrow)
    from mlacalc.measured.observations import predict_mapped
    from mlacalc.measured.tables import load_measured
    from mlacalc.measured.validate_tables import row_kinds

    pytest.importorskip("pyarrow")
    for engine, source in (("sglang", "fa3"), ("vllm", "vllm_flash_attn_fa3")):
        tables = load_measured(MEASURED / "h100_sxm", engine=engine).tables
        t = next(x for x in tables if x.table == "context_attention_perf")
        mapped = map_table(t)
        pred = predict_mapped(mapped, "H100-SXM", f"fit-h100-sxm-{engine}")
        c = t.columns
        sel = c["kernel_source"].astype(str) == source
        sel &= (c["isl"] >= 2048) & (c["window_size"] <= 0)
        sel &= row_kinds(mapped) == "context_attention_perf:bf16"
        for hd in (192, 256):
            rows = sel & (c["head_dim"] == hd)
            assert rows.sum() >= 200
            err = pred[rows] / t.seconds[rows] - 1.0
            assert abs(np.median(err)) < 0.07, (engine, hd, np.median(err))
