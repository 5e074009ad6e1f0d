"""The paged GQA/MHA/MQA decode time model (``attention_decode``): the mechanisms it states,
one by one on synthetic kernels, and its accuracy on the measured decode rows (a quick fit on a
sample of the shared tables, skipped when they are absent)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mlacalc.hardware import load_hardware
from mlacalc.kernels import KernelBatch
from mlacalc.timemodel import model as M
from mlacalc.timemodel.device import device_figures

REF = Path(__file__).resolve().parents[1].parent / "shared" / "reference" / "gpu-measured"
H100 = device_figures(load_hardware("H100-SXM"))


def _decode(dtype="bf16", *, no_flops=False, **cols) -> KernelBatch:
    """One decode kernel per row of the given columns (broadcast), with roofline-ish work
    (``no_flops``: none, to look at the unit and block terms alone)."""
    shape = {
        "batch": 64.0,
        "q_len": 1.0,
        "kv_len": 4096.0,
        "n_heads": 32.0,
        "n_kv": 8.0,
        "head_dim_qk": 128.0,
        "head_dim_v": 128.0,
        "window": 0.0,
        "causal": 1.0,
        "sinks": 0.0,
    }
    shape.update(cols)
    n = max(np.size(v) for v in shape.values())
    shape = {k: np.broadcast_to(np.asarray(v, dtype=float), (n,)).copy() for k, v in shape.items()}
    kvb = 1.0 if dtype == "fp8" else 2.0
    win, kv = shape["window"], shape["kv_len"]
    kv = np.where(win > 0, np.minimum(kv, win), kv)
    nbytes = shape["batch"] * 2 * shape["n_kv"] * kv * shape["head_dim_qk"] * kvb
    flops = 4.0 * shape["batch"] * shape["n_heads"] * kv * shape["head_dim_qk"] * (not no_flops)
    return KernelBatch("attention_decode", dtype, flops, nbytes, np.ones(n), shape)


def _params(**over) -> dict[str, float]:
    prm = M.default_params("attention_decode")
    prm.update(over)
    return prm


def _seconds(batch: KernelBatch, **over) -> np.ndarray:
    return M.kernel_terms(batch, H100, _params(**over))["seconds"]


def test_fp8_grouped_decode_fuses_the_rope_pre_kernel():
    # Hopper's fp8 XQA does RoPE and the cache append itself: one launch fewer, unless the
    # layer has attention sinks (another kernel) or the cache is bf16
    launch = 3e-6
    scale = M.REFERENCE_CLOCK_HZ / H100.clock_hz
    fp8 = _seconds(_decode("fp8", batch=1.0, kv_len=16.0, sinks=[0.0, 1.0]), launch_s=launch)
    assert fp8[1] - fp8[0] == pytest.approx(launch * scale, rel=1e-6)
    bf16 = _seconds(_decode("bf16", batch=1.0, kv_len=16.0, sinks=[0.0, 1.0]), launch_s=launch)
    assert bf16[1] == pytest.approx(bf16[0], rel=1e-9)
    # a device without fp8 tensor cores has no such kernel
    a100 = device_figures(load_hardware("A100-SXM-80GB"))
    fp8 = _decode("fp8", batch=1.0, kv_len=16.0, sinks=[0.0, 1.0])
    t = M.kernel_terms(fp8, a100, _params(launch_s=launch))["seconds"]
    assert t[1] == pytest.approx(t[0], rel=1e-9)


def test_bf16_decode_splits_the_whole_cache_under_a_window():
    # MMHA and the bf16 XQA split the whole cache, their splits before the window empty but
    # run; Hopper's fp8 XQA splits only the window's keys
    kv = [1024.0, 65536.0]
    bf16 = M.kernel_terms(_decode("bf16", batch=4.0, window=128.0, kv_len=kv), H100, _params())
    assert bf16["compute_s"][1] > 2.0 * bf16["compute_s"][0]
    assert bf16["extra_s"][1] == bf16["extra_s"][0]  # both split: a reduction kernel each
    fp8 = _seconds(_decode("fp8", batch=4.0, window=128.0, kv_len=kv))
    assert fp8[1] == pytest.approx(fp8[0], rel=1e-9)


def test_mmha_walks_keys_one_by_one_xqa_whole_blocks():
    kv = [2.0, 64.0]
    mha = _seconds(_decode("bf16", batch=2048.0, n_heads=32.0, n_kv=32.0, kv_len=kv))
    assert mha[1] > mha[0] * 1.01
    gqa = _seconds(_decode("bf16", batch=2048.0, n_heads=32.0, n_kv=8.0, kv_len=kv))
    # the grouped unit walks one whole 64-token block either way; only the bytes differ
    terms = M.kernel_terms(
        _decode("bf16", batch=2048.0, n_heads=32.0, n_kv=8.0, kv_len=kv), H100, _params()
    )
    assert terms["compute_s"][1] - terms["compute_s"][0] < 1e-3 * terms["compute_s"][0] + (
        terms["compute_s"][1] * 0.05
    )
    assert gqa[1] >= gqa[0]


def test_per_unit_work_is_throughput_not_a_one_unit_floor():
    # eight units on 132 SMs pay 8/132 of a unit's work, not a whole unit's
    prm = dict(seq_s=1e-5, block_s=0.0, launch_s=0.0, qhead_unit=0.0, grouped_unit=1.0)
    t = M.kernel_terms(_decode(batch=1.0, n_heads=8.0, n_kv=8.0, kv_len=16.0), H100, _params(**prm))
    scale = M.REFERENCE_CLOCK_HZ / H100.clock_hz
    assert t["compute_s"][0] < 0.1 * 1e-5 * scale


def test_head_dim_192_runs_as_256_and_sm90_tiles_of_eight_rows():
    t = _seconds(_decode("bf16", batch=512.0, kv_len=2.0, head_dim_qk=[192.0, 256.0]))
    assert t[0] == pytest.approx(t[1], rel=0.05)  # only the bytes differ
    prm = dict(qhead_unit=0.0, seq_s=0.0)
    # fp8 (Hopper XQA): 8 and 16 query heads a KV head walk a block once and twice
    heads = [8.0, 16.0]
    fp8 = _decode("fp8", no_flops=True, batch=1.0, n_kv=1.0, n_heads=heads, kv_len=64.0)
    g = M.kernel_terms(fp8, H100, _params(**prm))["compute_s"]
    assert g[1] == pytest.approx(2.0 * g[0], rel=1e-9)
    # bf16 (mma.sync XQA): both within one 16-row tile
    bf16 = _decode("bf16", no_flops=True, batch=1.0, n_kv=1.0, n_heads=heads, kv_len=64.0)
    g = M.kernel_terms(bf16, H100, _params(**prm))["compute_s"]
    assert g[1] == pytest.approx(g[0], rel=1e-9)


def test_fp8_class_borrowed_from_a_bf16_fit_keeps_the_default_grouped_unit():
    fitted = {"grouped_unit": 5.0, "seq_s": 1e-6}
    prm = M.borrowed_params("attention_decode", "fp8", dict(_params(), **fitted), fitted)
    assert prm["grouped_unit"] == M.DEFAULTS["grouped_unit"]
    own = dict(fitted, dequant_s=1e-11)
    prm = M.borrowed_params("attention_decode", "fp8", dict(_params(), **own), own)
    assert prm["grouped_unit"] == 5.0


@pytest.fixture(scope="module")
def generation_tables():
    pytest.importorskip("pyarrow.parquet")
    if not REF.is_dir():
        pytest.skip(f"shared measured tables not found at {REF}")
    from mlacalc.measured import load_measured, map_table

    out = {}
    for system in ("h100_sxm", "a100_sxm"):
        path = next((REF / system / "attention").rglob("generation_attention_perf.parquet"))
        t = next(x for x in load_measured(path.parent).tables if x.table == path.stem)
        out[system] = (t, map_table(t))
    return out


def test_a100_grouped_rows_move_only_k_bytes(generation_tables):
    # the A100 collector's K-only cache: grouped-query rows read V from the L2 after K
    _, mapped = generation_tables["a100_sxm"]
    part = next(p for p in mapped.parts if p.batch.kind == "attention_decode")
    s = part.batch.shape
    k_bytes = s["batch"] * s["n_kv"] * s["kv_len"] * s["head_dim_qk"] * s["kv_bytes"]
    grouped = (s["n_heads"] > s["n_kv"]) & (s["n_heads"] <= 32 * s["n_kv"])
    big = (k_bytes > 1e8) & (s["kv_len"] >= 1024)
    # K plus the query/output/pre-kernel bytes: under K + V
    assert np.all(part.batch.bytes[grouped & big] < 1.9 * k_bytes[grouped & big])
    assert np.all(part.batch.bytes[~grouped & big] > 2.0 * k_bytes[~grouped & big])
    _, hm = generation_tables["h100_sxm"]
    hp = next(p for p in hm.parts if p.batch.kind == "attention_decode")
    hs = hp.batch.shape
    hk = hs["batch"] * hs["n_kv"] * hs["kv_len"] * hs["head_dim_qk"] * hs["kv_bytes"]
    hbig = (hk > 1e8) & (hs["kv_len"] >= 1024) & (hs["window"] == 0)
    assert np.all(hp.batch.bytes[hbig] > 2.0 * hk[hbig])


def test_quick_fit_on_h100_decode_rows(generation_tables):
    """A fit of the bf16 class on a sample of the H100 rows, checked on all of them."""
    from mlacalc.measured.mapping import single_kernel_rows
    from mlacalc.timemodel.fit import Observations, error_stats, fit_class

    t, mapped = generation_tables["h100_sxm"]
    for part, pos in single_kernel_rows(mapped):
        if part.batch.kind != "attention_decode" or part.batch.dtype != "bf16":
            continue
        from mlacalc.timemodel.fit import _take

        batch = _take(part.batch, pos)
        seconds = t.seconds[part.rows[pos]]
        sample = np.unique(np.linspace(0, len(pos) - 1, 1500).astype(np.int64))
        obs = Observations("H100-SXM", t.table, _take(batch, sample), seconds[sample])
        fitted = fit_class([obs])
        prm = _params(**fitted)
        stats = error_stats(M.kernel_terms(batch, H100, prm)["seconds"], seconds)
        # the full fit reaches 7.9% / p90 24%; a sample fit a little less
        assert stats["median_abs_error"] < 0.10
        assert stats["p90_abs_error"] < 0.30
        return
    pytest.fail("no bf16 attention_decode part")


def test_model_steps_give_the_decode_kernel_its_cache_class_and_sinks():
    from mlacalc.step import step_kernels

    def core(model, kv_dtype):
        kernels = step_kernels(model, "decode", 4096, 8, kv_dtype=kv_dtype)
        return next(k for k in kernels if k.kind == "attention_decode")

    assert core("llama-3-8b", "bf16").dtype == "bf16"
    llama = core("llama-3-8b", "fp8")
    assert llama.dtype == "fp8" and llama.shape["sinks"] == 0
    assert core("gpt-oss-120b", "fp8").shape["sinks"] == 1
