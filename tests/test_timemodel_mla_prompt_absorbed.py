"""Which kernel SGLang's stand-alone MLA prompt rows ran (docs/measured-sets.md,
``context_mla_perf``): on H100 (FlashAttention-3, ``kernel_source`` flash_attention) the
absorbed latent attention, a converted bf16 cache for an fp8 one; on B200 (``trtllm_mla``) the
expanded one. The rows' implied FLOP rates are the evidence; the prefill class's tile and cache
conversion columns are the terms the absorbed kernel needs."""

from __future__ import annotations

import numpy as np
import pytest
from reference_data import MEASURED

from mlacalc.cost.model_step import step_kernels
from mlacalc.hardware.catalogue import load_hardware
from mlacalc.timemodel.device import device_figures
from mlacalc.timemodel.kernel_time import device_batch, engine_batch
from mlacalc.timemodel.terms import default_params, kernel_terms
from mlacalc.words.kernels import KernelBatch, batches_of

EXPANDED, ABSORBED = 192 + 128, 576 + 512  # q/k + v widths a (query, key) pair multiplies


def _context(system: str):
    pytest.importorskip("pyarrow")
    from mlacalc.measured.mapping import map_table
    from mlacalc.measured.tables import load_measured

    tables = load_measured(MEASURED / system / "mla", engine="sglang").tables
    t = next(x for x in tables if x.table == "context_mla_perf")
    return t, map_table(t)


def _rate(t, flops_per_pair: float) -> np.ndarray:
    """FLOP/s each row implies with ``flops_per_pair`` per (query, key) pair and head."""
    c = t.columns
    b, s, h = (np.asarray(c[k], dtype=float) for k in ("batch_size", "isl", "num_heads"))
    return 2.0 * h * b * s * (s + 1) / 2 * flops_per_pair / t.seconds


def test_h100_rows_are_the_absorbed_kernel_by_their_flop_rate():
    # one sequence of 16K or 32K tokens at 2-128 heads, bf16 and fp8 caches: as expanded the
    # rows draw 18-19% of H100's bf16 peak at every head count, as absorbed 60-66% (B200's
    # expanded kernel 59%)
    t, _ = _context("h100_sxm")
    c = t.columns
    long = (np.asarray(c["isl"]) >= 16384) & (np.asarray(c["num_heads"]) >= 2)
    long &= np.asarray(c["batch_size"]) == 1
    peak = device_figures(load_hardware("H100-SXM")).peak("bf16")
    exp, lat = _rate(t, EXPANDED)[long] / peak, _rate(t, ABSORBED)[long] / peak
    assert long.sum() >= 20
    assert exp.max() < 0.2 and lat.min() > 0.55 and lat.max() < 0.7


def test_b200_rows_are_the_expanded_kernel_by_their_flop_rate():
    # absorbed, B200's rows at 64-128 heads would draw up to twice its bf16 peak: they are not
    t, _ = _context("b200_sxm")
    c = t.columns
    long = (np.asarray(c["isl"]) >= 16384) & (np.asarray(c["num_heads"]) >= 64)
    long &= (np.asarray(c["batch_size"]) == 1) & (np.asarray(c["kv_cache_dtype"]) == "bfloat16")
    peak = device_figures(load_hardware("B200")).peak("bf16")
    assert long.sum() >= 4
    assert _rate(t, ABSORBED)[long].min() > 1.5 * peak
    expanded = _rate(t, EXPANDED)[long] / peak
    assert expanded.min() > 0.5 and expanded.max() < 1.0


def test_h100_rows_map_to_the_latent_prompt_kernel_b200_rows_to_the_expanded_one():
    t, m = _context("h100_sxm")
    (part,) = [p for p in m.parts if p.batch.kind == "mla_prefill"]
    s = part.batch.shape
    assert part.batch.dtype == "bf16" and len(part.rows) == len(t)  # fp8 caches converted first
    assert set(s["n_kv"]) == {1.0} and set(s["head_dim_qk"]) == {576.0}
    assert set(s["head_dim_v"]) == {512.0} and set(s["head_pack"]) == {0.0}
    assert set(s["tile_rows"]) == {64.0} and set(s["tile_keys"]) == {64.0}
    fp8 = np.asarray(t.columns["kv_cache_dtype"])[part.rows] == "fp8"
    assert np.array_equal(s["cache_convert"] > 0, fp8)
    pairs = s["batch"] * s["q_len"] * (s["q_len"] + 1) / 2
    np.testing.assert_allclose(part.batch.flops, 2.0 * s["n_heads"] * pairs * ABSORBED)

    t, m = _context("b200_sxm")
    for p in m.parts:
        s = p.batch.shape
        assert np.array_equal(s["n_kv"], s["n_heads"]) and set(s["head_dim_qk"]) == {192.0}
        assert "tile_rows" not in s and "cache_convert" not in s


def _prefill(heads, q, *, tile=128.0, convert=0.0, kvb=2.0):
    heads = np.asarray(heads, dtype=float)
    n = len(heads)
    pairs = q * (q + 1) / 2
    return KernelBatch(
        kind="mla_prefill",
        dtype="bf16",
        flops=2.0 * heads * pairs * ABSORBED,
        bytes=q * (heads * (576 + 512) + 576) * 2.0,
        calls=np.ones(n),
        shape={
            "batch": np.ones(n),
            "q_len": np.full(n, q),
            "kv_len": np.full(n, q),
            "n_heads": heads,
            "n_kv": np.ones(n),
            "head_dim_qk": np.full(n, 576.0),
            "head_dim_v": np.full(n, 512.0),
            "causal": np.ones(n),
            "head_pack": np.zeros(n),
            "tile_rows": np.full(n, tile),
            "tile_keys": np.full(n, tile),
            "kv_bytes": np.full(n, kvb),
            "cache_convert": np.full(n, convert),
        },
    )


def test_a_named_128_tile_is_the_default_and_a_64_tile_has_more_units():
    fig = device_figures(load_hardware("H100-SXM"))
    prm = default_params("mla_prefill")
    named = kernel_terms(_prefill([8.0, 128.0], 4096.0), fig, prm)["seconds"]
    plain = _prefill([8.0, 128.0], 4096.0)
    shape = {k: v for k, v in plain.shape.items() if k not in ("tile_rows", "tile_keys")}
    default = kernel_terms(
        KernelBatch(plain.kind, plain.dtype, plain.flops, plain.bytes, plain.calls, shape),
        fig,
        prm,
    )["seconds"]
    np.testing.assert_allclose(named, default)
    small = kernel_terms(_prefill([8.0, 128.0], 4096.0, tile=64.0), fig, prm)["seconds"]
    assert np.all(small != named)


def test_a_converted_cache_adds_a_kernel_and_its_pass_whatever_the_heads():
    fig = device_figures(load_hardware("H100-SXM"))
    prm = default_params("mla_prefill")
    q = 8192.0
    conv = kernel_terms(_prefill([1.0, 128.0], q, convert=1.0, kvb=1.0), fig, prm)["seconds"]
    plain = kernel_terms(_prefill([1.0, 128.0], q, kvb=1.0), fig, prm)["seconds"]
    added = conv - plain
    pass_s = prm["call_latency_s"] + q * 576 * 3.0 / (prm["eff_memory"] * fig.hbm_bytes_per_s)
    np.testing.assert_allclose(added, pass_s)


def test_a_served_sglang_prompt_on_hopper_stays_expanded():
    # SGLang's dispatch runs a prompt without a cached prefix multi-head (``MHA_ONE_SHOT``):
    # the step's MLA prompt kernel is the expanded one, a tile a head, whatever the engine's
    # rules add; only a measured row that names the absorbed kernel carries its columns
    hw = load_hardware("H100-SXM")
    layer = step_kernels("deepseek-v3", "prefill", 4096, scope="attention_layer")
    (batch,) = [b for _, b in batches_of(layer) if b.kind == "mla_prefill"]
    batch = engine_batch(device_batch(batch, hw), "sglang", device_figures(hw))
    s = batch.shape
    assert np.array_equal(s["n_kv"], s["n_heads"]) and set(s["head_dim_qk"]) == {192.0}
    assert not {"tile_rows", "tile_keys", "head_pack", "cache_convert"} & set(s)
