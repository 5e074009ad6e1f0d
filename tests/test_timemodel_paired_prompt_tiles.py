"""Blackwell's prompt CTA carries two query tiles of a head under SGLang and vLLM
(``attention_time.paired_tile_waves``, ``PAIRED_TILE_PREFILL``): the arithmetic of the waves a
tile's fixed work is paid for, and the measured B200 rows of 256 tokens it is read on."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mlacalc.hardware.catalogue import load_hardware
from mlacalc.timemodel.attention_time import engine_attention_kernel, paired_tile_waves
from mlacalc.timemodel.device import device_figures
from mlacalc.words.kernels import KernelBatch

MEASURED = Path(__file__).resolve().parents[1] / "mlacalc" / "data" / "measured"


def _prompt(batch: float, isl: float, heads: float, dtype: str = "bf16") -> KernelBatch:
    shape = {
        "batch": batch,
        "q_len": isl,
        "kv_len": isl,
        "n_heads": heads,
        "n_kv": heads,
        "head_dim_qk": 128.0,
        "head_dim_v": 128.0,
        "window": 0.0,
        "causal": 1.0,
    }
    return KernelBatch(
        kind="attention_prefill",
        dtype=dtype,
        flops=np.array([1e9]),
        bytes=np.array([1e6]),
        calls=np.array([1.0]),
        shape={k: np.array([v]) for k, v in shape.items()},
    )


def _waves(batch: KernelBatch, device: str) -> float:
    fig = device_figures(load_hardware(device))
    tiles = np.ceil(batch.shape["q_len"] / 128.0)
    units = batch.shape["batch"] * batch.shape["n_heads"] * tiles
    one = np.ones(1)
    return float(paired_tile_waves(batch, fig, units, batch.shape["q_len"], one, 128.0 * one)[0])


@pytest.mark.parametrize(
    ("isl", "waves"),
    [
        (128, 1.0),  # one tile a head: a CTA each, as before
        (256, 0.5),  # 8,192 tiles in 4,096 CTAs: 28 waves of 148 SMs, not 56
        (384, 56.0 / 84.0),  # three tiles: two CTAs a head
    ],
)
def test_b200_sglang_vllm_prompt_pays_a_cta_per_two_tiles(isl, waves):
    fig = device_figures(load_hardware("B200"))
    for engine in ("sglang", "vllm"):
        batch = engine_attention_kernel(_prompt(64, isl, 64), engine, fig)
        assert batch.shape["paired_tiles"][0] == 2.0
        assert _waves(batch, "B200") == pytest.approx(waves)


def test_other_kernels_keep_a_cta_a_tile():
    b200 = device_figures(load_hardware("B200"))
    h100 = device_figures(load_hardware("H100-SXM"))
    # TensorRT-LLM's own prompt kernel and SGLang's fp8 prompt (query converted to fp8)
    assert "paired_tiles" not in engine_attention_kernel(_prompt(64, 256, 64), "trtllm", b200).shape
    sg_fp8 = engine_attention_kernel(_prompt(64, 256, 64, "fp8"), "sglang", b200)
    assert "paired_tiles" not in sg_fp8.shape
    assert _waves(sg_fp8, "B200") == 1.0
    # Hopper's FlashAttention-3: a tile a CTA whatever the column says
    paired = _prompt(64, 256, 64)
    paired.shape["paired_tiles"] = np.array([2.0])
    assert _waves(paired, "H100-SXM") == 1.0
    assert "paired_tiles" not in engine_attention_kernel(_prompt(64, 256, 64), "vllm", h100).shape


@pytest.mark.parametrize(
    ("engine", "dtype"), [("sglang", "bf16"), ("vllm", "bf16"), ("vllm", "fp8")]
)
def test_b200_prompts_of_two_tiles(engine, dtype):
    # 256 tokens, 32 sequences and more, no window: a CTA a tile read them +9% to +11% (signed
    # median), the fixed work of twice the CTAs
    from mlacalc.measured.mapping import map_table  # deferred: the measured extra (pyarrow)
    from mlacalc.measured.observations import predict_mapped
    from mlacalc.measured.tables import load_measured
    from mlacalc.measured.validate_tables import row_kinds

    pytest.importorskip("pyarrow")
    tables = load_measured(MEASURED / "b200_sxm", engine=engine).tables
    t = next(x for x in tables if x.table == "context_attention_perf")
    mapped = map_table(t)
    pred = predict_mapped(mapped, "B200", f"fit-b200-sxm-{engine}")
    c = t.columns
    src = c["kernel_source"].astype(str)
    sel = np.isin(src, ["trtllm_mha", "vllm_flashinfer_trtllmprefill"])
    sel &= (c["isl"] == 256) & (c["batch_size"] >= 32) & (c["window_size"] <= 0)
    sel &= row_kinds(mapped) == f"context_attention_perf:{dtype}"
    assert sel.sum() >= 300
    err = pred[sel] / t.seconds[sel] - 1.0
    assert abs(np.median(err)) < 0.08
    assert np.median(np.abs(err)) < 0.11


def test_a_served_sglang_b200_prompt_over_an_fp8_cache_runs_as_its_measured_rows():
    """fixr11: a served SGLang B200 prompt over an fp8 cache was timed at the activations'
    dtype, bf16, paired, where the mapping times the measured rows of that kernel fp8 (the
    query converted first), unpaired: the step's prompt now takes the rows' path."""
    b200 = device_figures(load_hardware("B200"))
    step = _prompt(64, 256, 64)
    step.shape["fp8_cache"] = np.array([1.0])
    sg = engine_attention_kernel(step, "sglang", b200)
    assert sg.dtype == "fp8" and "paired_tiles" not in sg.shape and "q_convert" in sg.shape
    vl = engine_attention_kernel(step, "vllm", b200)  # vLLM's measured fp8 rows are paired
    assert vl.dtype == "bf16" and vl.shape["paired_tiles"][0] == 2.0
    assert engine_attention_kernel(_prompt(64, 256, 64), "sglang", b200).dtype == "bf16"
    # through the class lookup: the step's kernel takes the fp8 row's time
    from mlacalc.cost.engine import as_model, attention_cost  # deferred: the whole step
    from mlacalc.cost.model_step import attention_kernels
    from mlacalc.timemodel.kernel_time import predict_batch

    row = _prompt(64, 256, 64, "fp8")
    row.shape["q_convert"] = np.array([1.0])  # as the mapping gives SGLang's B200 fp8 rows
    t_step = predict_batch(step, "B200", "fit-b200-sxm-sglang")[0]
    t_row = predict_batch(row, "B200", "fit-b200-sxm-sglang")[0]
    assert t_step == pytest.approx(t_row)
    # a model step's prompt core carries the column over an fp8 cache only
    m = as_model("llama-3.1-8b")
    cost = attention_cost(m, phase="prefill", seq_len=1024, batch=4, causal=True)
    for kv, said in (("fp8", [1]), ("bf16", [])):
        (core,) = [k for k in attention_kernels(cost, m, "bf16", "bf16", kv_dtype=kv)
                   if k.name == "attention"]  # fmt: skip
        assert [core.shape[c] for c in core.shape if c == "fp8_cache"] == said
