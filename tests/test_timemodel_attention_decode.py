"""The paged GQA/MHA/MQA decode time model (``attention_decode``): the mechanisms it states,
one by one on synthetic kernels, and its accuracy on the measured decode rows (a quick fit on a
sample of the published GPU tables shipped with the package)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from reference_data import MEASURED

from mlacalc.hardware.catalogue import load_hardware
from mlacalc.timemodel import attention_time, mla_time, shared
from mlacalc.timemodel import terms as M
from mlacalc.timemodel.device import device_figures
from mlacalc.words.kernels import KernelBatch

REF = MEASURED
M_CLOCKS = attention_time.MMHA_FALLBACK_CLOCKS
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


def test_packing_kernels_keep_every_query_head_of_a_kv_head_in_one_unit():
    # 64 query heads on one KV head: XQA (head_pack 32, the default) runs a unit a query head
    # (MMHA), its cache re-read from the L2; a packing kernel (head_pack 0: FlashAttention-3,
    # FlashInfer) keeps one unit a KV head
    wide = dict(batch=2048.0, n_heads=64.0, n_kv=1.0, kv_len=2.0)
    over = dict(seq_s=3e-6, grouped_unit=1.0)
    xqa = M.kernel_terms(_decode("bf16", **wide), H100, _params(**over))
    packed = M.kernel_terms(_decode("bf16", head_pack=0.0, **wide), H100, _params(**over))
    assert packed["compute_s"][0] < xqa["compute_s"][0] / 2.5
    assert packed["memory_s"][0] == pytest.approx(xqa["memory_s"][0], rel=1e-12)
    # within 16 heads a KV head (one row tile either way: XQA's 16 rows, FlashAttention-3's
    # 64, FA3_DECODE_ROW_TILE) the two rules are one where their key splits are (128 keys:
    # none; XQA picks its own count, xqa_splits)
    # (a further kernel of TensorRT-LLM's own: TRTLLM_FURTHER_KERNEL_S, the fitted launch_s
    # of the others at H100's clock, the reference)
    narrow = dict(batch=64.0, n_heads=16.0, n_kv=1.0, kv_len=128.0)
    over = dict(over, launch_s=attention_time.TRTLLM_FURTHER_KERNEL_S)
    same = [_seconds(_decode("bf16", head_pack=p, **narrow), **over)[0] for p in (32.0, 0.0)]
    assert same[0] == pytest.approx(same[1], rel=1e-12)


def test_query_heads_beyond_the_pack_run_in_sm_clocks_whatever_the_cache():
    # beyond 32 query heads a KV head TensorRT-LLM's decode runs a unit a query head at
    # MMHA_FALLBACK_UNIT_CLOCKS a unit and MMHA_FALLBACK_CLOCKS an element (both devices' rows:
    # fp8 as slow as bf16, H100 about as slow as B200); before, the repeated cache reads were
    # HBM bytes (fallback_reads), fp8 half of bf16 and B200 0.44 of H100
    b200 = device_figures(load_hardware("B200"))
    wide = dict(batch=16.0, n_heads=64.0, n_kv=1.0, kv_len=8192.0)
    prm = _params(seq_s=3e-6, block_s=1e-6)
    units, elements = 16.0 * 64.0, 16.0 * 64.0 * 8192.0 * 128.0 * 2.0
    for fig in (H100, b200):
        # (1,024 units, one part each: the SMs of a wave, 1,024 / ceil(1,024 / SMs))
        per_wave = units / np.ceil(units / fig.sm_count)
        want = (
            attention_time.MMHA_FALLBACK_UNIT_CLOCKS * units / fig.sm_count
            + attention_time.MMHA_FALLBACK_CLOCKS * elements / per_wave
        ) / fig.clock_hz
        for dtype in ("bf16", "fp8"):
            got = M.kernel_terms(_decode(dtype, **wide), fig, prm)["compute_s"][0]
            assert got == pytest.approx(want, rel=0.02)  # the products' FLOPs are beside it


def test_mmha_fallback_elements_run_on_a_waves_sms():
    # one sequence of 64 query heads on one KV head: MMHA splits each head's keys up to one
    # part an SM over the heads (ceil(132 / 64) = 3 on H100), 192 parts in two waves of 132
    # SMs: the element clocks run on 96 SMs, not 132 (H100's fp8 rows: 230 us at 32,768 keys,
    # 88 SMs' worth at 0.069 clocks an element)
    prm = _params(seq_s=3e-6, block_s=1e-6)
    one = dict(batch=1.0, n_heads=64.0, n_kv=1.0, kv_len=32768.0)
    units, elements = 64.0, 64.0 * 32768.0 * 128.0 * 2.0
    want = (
        attention_time.MMHA_FALLBACK_UNIT_CLOCKS * units / H100.sm_count
        + attention_time.MMHA_FALLBACK_CLOCKS * elements / 96.0
    ) / H100.clock_hz
    for dtype in ("bf16", "fp8"):
        got = M.kernel_terms(_decode(dtype, **one), H100, prm)["compute_s"][0]
        assert got == pytest.approx(want, rel=0.02)


def test_trtllm_bf16_grouped_decode_runs_mmha_below_xqa_block_threshold(monkeypatch):
    # TensorRT-LLM runs its bf16 grouped decode as XQA only where batch x KV heads x
    # max(1, cached keys // 128) x 4 reaches the SMs (H100: 33 blocks); below, MMHA's units a
    # query head (the MMHA_FALLBACK_* clocks); Hopper's fp8 XQA and Blackwell's kernel always
    b200 = device_figures(load_hardware("B200"))
    prm = _params(seq_s=3e-6, block_s=1e-6, mmha_s=2e-6)
    rows = _decode("bf16", batch=[8.0, 16.0], n_heads=8.0, n_kv=1.0, kv_len=512.0)
    assert list(attention_time.xqa_dispatched(rows, H100)) == [False, True]
    got = M.kernel_terms(rows, H100, prm)
    units, elements = 8.0 * 8.0, 8.0 * 8.0 * 512.0 * 128.0 * 2.0
    busy = 2.0 * units  # its keys split in two parts of 256 (32,768 key elements each)
    want = (
        attention_time.MMHA_FALLBACK_UNIT_CLOCKS * units / H100.sm_count
        + attention_time.MMHA_FALLBACK_CLOCKS * elements / min(busy, H100.sm_count)
    ) / H100.clock_hz
    assert got["compute_s"][0] == pytest.approx(want, rel=0.02)
    # the MMHA call's own fixed part (mmha_s, at H100's clock: the reference) and its split
    # reduction kernel, where the XQA row merges its parts in the kernel (XQA_MERGES_IN_KERNEL,
    # merge_s 0 here)
    further = attention_time.TRTLLM_FURTHER_KERNEL_S
    assert got["extra_s"][0] - got["extra_s"][1] == pytest.approx(2e-6 + further, rel=0.01)
    # the same shape with an fp8 cache (Hopper's fp8 XQA) or on B200 keeps its grouped unit:
    # the MMHA clocks do not reach it
    others = [(d, f) for d, f in (("fp8", H100), ("bf16", b200), ("fp8", b200))]
    one = [_decode(d, batch=8.0, n_heads=8.0, n_kv=1.0, kv_len=512.0) for d, _ in others]
    before = [M.kernel_terms(k, f, prm)["seconds"][0] for k, (_, f) in zip(one, others)]
    mmha = M.kernel_terms(rows, H100, prm)["seconds"]
    monkeypatch.setattr(attention_time, "MMHA_FALLBACK_CLOCKS", 10 * M_CLOCKS)
    after = [M.kernel_terms(k, f, prm)["seconds"][0] for k, (_, f) in zip(one, others)]
    assert after == pytest.approx(before, rel=1e-12)
    moved = M.kernel_terms(rows, H100, prm)["seconds"]
    assert moved[0] > 2.0 * mmha[0] and moved[1] == pytest.approx(mmha[1], rel=1e-12)


def test_h100_bf16_grouped_rows_below_xqas_threshold_time_as_mmha(generation_tables):
    # H100's bf16 grouped rows (2-32 query heads a KV head) under XQA's block threshold whose
    # MMHA units, a query head each, fill the SMs (batch x query heads 257-512): MMHA's
    # clocks a unit and element put them at a median 10% fast, where XQA's one unit a KV head
    # had them 36% fast (one KV head, 512 keys, 8 sequences of 12-16 heads: 25.4 us measured)
    from mlacalc.measured.observations import predict_mapped
    from mlacalc.timemodel.profile import load_profile

    t, mapped = generation_tables["h100_sxm"]
    c = t.columns
    group = c["num_heads"] / c["num_key_value_heads"]
    blocks = c["batch_size"] * c["num_key_value_heads"] * np.maximum(1, (c["step"] + 1) // 128)
    units = c["batch_size"] * c["num_heads"]
    sel = (
        (group > 1)
        & (group <= 32)
        & (blocks * attention_time.XQA_MIN_BLOCK_FACTOR < H100.sm_count)
        & (units > 256)
        & (units <= 512)
        & (c["kv_cache_dtype"] != "fp8")
    )
    assert sel.sum() >= 200
    pred = predict_mapped(mapped, "H100-SXM", load_profile("default"))
    err = pred[sel] / t.seconds[sel] - 1.0
    assert np.median(np.abs(err)) < 0.2


def test_trtllm_mmha_splits_its_keys_one_part_an_sm(monkeypatch):
    # TensorRT-LLM's MMHA (a unit a query head: MHA here) splits a unit's keys into at most
    # ceil(SMs / units) parts (MMHA_SPLIT_UNITS_PER_SM), where the other decode kernels fill
    # four resident units an SM: 16 heads over 8,192 keys run 9 parts a head, 144 in all,
    # which draw 144 x sm_bandwidth / 132 of the HBM; a packing kernel keeps its 512 parts
    prm = _params(sm_bandwidth=0.5)
    mha = dict(batch=1.0, n_heads=16.0, n_kv=16.0, kv_len=8192.0)
    rows = _decode("bf16", **mha)
    got = M.kernel_terms(rows, H100, prm)["memory_s"][0]
    share = min(1.0, 16.0 * 9.0 * 0.5 / H100.sm_count)
    want = rows.bytes[0] / (prm["eff_memory"] * H100.hbm_bytes_per_s * share)
    assert got == pytest.approx(want, rel=1e-9)
    packed = M.kernel_terms(_decode("bf16", head_pack=0.0, **mha), H100, prm)["memory_s"][0]
    full = rows.bytes[0] / (prm["eff_memory"] * H100.hbm_bytes_per_s)
    assert packed == pytest.approx(full, rel=1e-9) and got > 1.8 * full
    monkeypatch.setattr(attention_time, "MMHA_SPLIT_UNITS_PER_SM", 4.0)
    assert M.kernel_terms(rows, H100, prm)["memory_s"][0] == pytest.approx(full, rel=1e-9)


def test_h100_mha_rows_of_few_heads_over_long_caches(generation_tables):
    # H100's MHA rows (TensorRT-LLM's MMHA) of 16-64 query heads over all sequences and
    # 2,048-16,384 cached keys: with one part an SM (MMHA_SPLIT_UNITS_PER_SM) a median 12.8%
    # off (bf16 -8.8%, fp8 -18.3% signed); four an SM had them 24.5% fast
    from mlacalc.measured.observations import predict_mapped
    from mlacalc.timemodel.profile import load_profile

    t, mapped = generation_tables["h100_sxm"]
    c = t.columns
    units = c["batch_size"] * c["num_heads"]
    sel = (
        (c["num_heads"] == c["num_key_value_heads"])
        & (c["window_size"] == 0)
        & (units >= 16)
        & (units <= 64)
        & (c["step"] >= 2047)
        & (c["step"] <= 16383)
    )
    assert sel.sum() >= 500
    pred = predict_mapped(mapped, "H100-SXM", load_profile("default"))
    err = pred[sel] / t.seconds[sel] - 1.0
    assert np.median(np.abs(err)) < 0.16


def test_trtllm_mmha_block_size_sets_its_least_sm_work():
    # MMHA's launcher sizes its block at 256 x min(floor(4 x SMs / (batch x query heads)), 4)
    # threads; at 256 or 768 (factor 1 or 3) a call takes at least mmha_block_s of SM work, and
    # its own latency hides mmha_hidden_s of it at every factor
    a100 = device_figures(load_hardware("A100-SXM-80GB"))
    units = np.array([64.0, 128.0, 160.0, 192.0, 256.0, 320.0, 1024.0])
    got = attention_time.mmha_narrow_block(units, H100)
    assert got.tolist() == [False, False, True, False, False, True, True]
    got = attention_time.mmha_narrow_block(units, a100)
    assert got.tolist() == [False, True, False, False, True, True, True]
    block, hidden = 6e-6, 1e-6
    scale = M.REFERENCE_CLOCK_HZ / H100.clock_hz
    for cols, narrow in (
        (dict(batch=4.0, n_heads=40.0, n_kv=40.0), True),  # MHA, 160 units: factor 3
        (dict(batch=4.0, n_heads=48.0, n_kv=48.0), False),  # 192 units: factor 2
        (dict(batch=2.0, n_heads=80.0, n_kv=2.0), True),  # 160 query heads beyond 32 a KV head
    ):
        rows = _decode("bf16", kv_len=4.0, **cols)
        off = M.kernel_terms(rows, H100, _params())["compute_s"][0]
        on = M.kernel_terms(rows, H100, _params(mmha_block_s=block, mmha_hidden_s=hidden))
        want = max(off - hidden * scale, block * scale if narrow else 0.0)
        assert on["compute_s"][0] == pytest.approx(want, rel=1e-9), cols
    # XQA's units, the packing kernels and B200's TensorRT-LLM-gen kernel are not MMHA's
    b200 = device_figures(load_hardware("B200"))
    for fig, dtype, cols in (
        (H100, "fp8", dict(batch=20.0, n_heads=32.0, n_kv=8.0)),
        (H100, "bf16", dict(batch=4.0, n_heads=40.0, n_kv=40.0, head_pack=0.0)),
        (b200, "bf16", dict(batch=4.0, n_heads=40.0, n_kv=40.0)),
    ):
        rows = _decode(dtype, kv_len=4.0, **cols)
        off = M.kernel_terms(rows, fig, _params())["compute_s"]
        on = M.kernel_terms(rows, fig, _params(mmha_block_s=block, mmha_hidden_s=hidden))
        assert on["compute_s"] == pytest.approx(off, rel=1e-12), (fig.sm_count, dtype, cols)


def test_h100_fp8_mmha_rows_of_short_caches_by_block_size(generation_tables):
    # H100's fp8-cache MMHA rows (MHA, and beyond 32 query heads a KV head) at up to 8 cached
    # keys, no window: their time is set by batch x query heads alone, 8.6-9.3 us at a block
    # factor of 2 or 4 and 12.9-14.8 us at 1 or 3 up to 1,024 units (MMHA_BLOCK_SLOTS); the
    # smooth model read them 6.4% / 24.0% (median / p90), with the block's least work and the
    # work the call hides 5.9% / 12.1%
    from mlacalc.measured.observations import predict_mapped
    from mlacalc.timemodel.profile import load_profile

    t, mapped = generation_tables["h100_sxm"]
    c = t.columns
    group = c["num_heads"] // c["num_key_value_heads"]
    sel = ((group == 1) | (group > 32)) & (c["window_size"] == 0) & (c["isl"] + c["step"] <= 8)
    sel = sel & (c["kv_cache_dtype"] == "fp8")
    assert sel.sum() >= 1500
    pred = predict_mapped(mapped, "H100-SXM", load_profile("default"))
    err = np.abs(pred[sel] / t.seconds[sel] - 1.0)
    assert np.quantile(err, 0.9) < 0.16 and np.median(err) < 0.065


def test_trtllm_mma_sync_decode_overlaps_more_with_more_units_in_turn():
    # TensorRT-LLM's MMHA and mma.sync XQA units take p = turn_overlap x turns ** overlap_turns
    # (turns: the units an SM runs in turn, at least 1; at most TURN_OVERLAP_MAX) for their
    # compute and memory; Hopper's fp8 XQA, the packing kernels and a class without
    # turn_overlap keep the class's overlap
    prm = _params(overlap=3.0, turn_overlap=1.5, overlap_turns=0.5)
    cases = (
        ("bf16", dict(batch=64.0, n_heads=32.0, n_kv=32.0), 1.5 * (64 * 32 / 132) ** 0.5),  # MHA
        ("bf16", dict(batch=4.0, n_heads=32.0, n_kv=32.0, kv_len=64.0), 1.5),  # under one an SM
        ("bf16", dict(batch=256.0, n_heads=32.0, n_kv=8.0), 1.5 * (256 * 8 / 132) ** 0.5),  # XQA
        ("bf16", dict(batch=2048.0, n_heads=64.0, n_kv=64.0), 16.0),  # at the cap
        ("fp8", dict(batch=256.0, n_heads=32.0, n_kv=8.0), 3.0),  # Hopper's fp8 XQA
        ("bf16", dict(batch=64.0, n_heads=32.0, n_kv=32.0, head_pack=0.0), 3.0),  # packing
    )
    for dtype, cols, p in cases:
        rows = _decode(dtype, **{"kv_len": 512.0, **cols})
        t = M.kernel_terms(rows, H100, prm)
        body = shared.combine(t["compute_s"], t["memory_s"], p)
        want = t["fixed_s"] + body + t["extra_s"]
        assert t["seconds"][0] == pytest.approx(want[0], rel=1e-9), (dtype, cols)
    # a class fitted without it (turn_overlap 0) keeps its overlap at every shape
    rows = _decode("bf16", kv_len=512.0, batch=64.0, n_heads=32.0, n_kv=32.0)
    t = M.kernel_terms(rows, H100, _params(overlap=3.0, overlap_turns=0.5))
    want = t["fixed_s"] + shared.combine(t["compute_s"], t["memory_s"], 3.0) + t["extra_s"]
    assert t["seconds"][0] == pytest.approx(want[0], rel=1e-9)


def test_h100_mha_rows_of_many_units_in_turn(generation_tables):
    # H100's bf16 MHA rows (TensorRT-LLM's MMHA) at 4-64 units an SM in turn, no window: with
    # the class's one overlap a median 7.6% off (+6.1% signed); with the overlap growing with
    # the units in turn (turn_overlap, overlap_turns) 4.2% (+1.8%); the rule off, the refitted
    # profile 5.5%
    from mlacalc.measured.observations import predict_mapped
    from mlacalc.timemodel.profile import load_profile

    t, mapped = generation_tables["h100_sxm"]
    c = t.columns
    turns = c["batch_size"] * c["num_heads"] / H100.sm_count
    sel = (
        (c["num_heads"] == c["num_key_value_heads"])
        & (c["kv_cache_dtype"] != "fp8")
        & (c["window_size"] == 0)
        & (turns > 4)
        & (turns <= 64)
    )
    assert sel.sum() >= 1000
    pred = predict_mapped(mapped, "H100-SXM", load_profile("default"))
    err = pred[sel] / t.seconds[sel] - 1.0
    assert np.median(np.abs(err)) < 0.05


def test_trtllm_bf16_decode_is_shorter_at_head_dims_64_and_192():
    # TensorRT-LLM's own bf16 decode (MMHA, mma.sync XQA) takes narrow_head_s less a call at
    # head dims 64 and 192 (NARROW_HEAD_DIMS) on H100 and A100; its fp8 cache, the packing
    # kernels and B200's TensorRT-LLM-gen kernel take no step
    b200 = device_figures(load_hardware("B200"))
    a100 = device_figures(load_hardware("A100-SXM-80GB"))
    cut = 7e-7
    hds = [64.0, 128.0, 192.0, 256.0]
    for fig, dtype, cols, step in (
        (H100, "bf16", {}, True),
        (H100, "bf16", dict(n_heads=8.0, n_kv=8.0), True),  # MHA (MMHA)
        (a100, "bf16", {}, True),
        (H100, "fp8", {}, False),
        (H100, "bf16", dict(head_pack=0.0), False),
        (b200, "bf16", {}, False),
    ):
        rows = _decode(dtype, batch=2.0, kv_len=16.0, head_dim_qk=hds, head_dim_v=hds, **cols)
        off = M.kernel_terms(rows, fig, _params())["extra_s"]
        on = M.kernel_terms(rows, fig, _params(narrow_head_s=cut))["extra_s"]
        want = np.array([cut, 0.0, cut, 0.0]) * M.REFERENCE_CLOCK_HZ / fig.clock_hz * step
        assert off - on == pytest.approx(want, rel=1e-9, abs=1e-15), (fig.sm_count, dtype, cols)


def test_fa3_decode_call_waits_by_its_head_dim():
    # FlashAttention-3's decode (a packing decode of no variant on Hopper) waits fa3_hd_wait_s
    # a 128 of head dim past 128 (less below it, unpadded at 192); TensorRT-LLM's own kernels,
    # a variant (SGLang's Triton) and B200's TensorRT-LLM-gen kernel take none
    b200 = device_figures(load_hardware("B200"))
    wait = 1e-6
    hds = [64.0, 128.0, 192.0, 256.0]
    for fig, cols, on in (
        (H100, dict(head_pack=0.0), True),
        (H100, {}, False),
        (b200, dict(head_pack=0.0), False),
    ):
        for dtype in ("bf16", "fp8"):
            rows = _decode(dtype, batch=2.0, kv_len=16.0, head_dim_qk=hds, head_dim_v=hds, **cols)
            off = M.kernel_terms(rows, fig, _params())["extra_s"]
            more = M.kernel_terms(rows, fig, _params(fa3_hd_wait_s=wait))["extra_s"]
            want = np.array([-0.5, 0.0, 0.5, 1.0]) * wait * on
            assert more - off == pytest.approx(want, rel=1e-9, abs=1e-15), (fig.sm_count, cols)
    rows = _decode("bf16", batch=2.0, kv_len=16.0, head_pack=0.0)
    rows = dataclasses.replace(rows, variant="triton")
    assert np.all(attention_time.fa3_hd_wait_s(rows, H100, _params(fa3_hd_wait_s=wait), 0) == 0)
    # the prompt call of the same kernel waits the same; MLA's prompt kind none
    prompt = dataclasses.replace(_decode("bf16", head_dim_qk=hds), kind="attention_prefill")
    got = attention_time.fa3_hd_wait_s(prompt, H100, _params(fa3_hd_wait_s=wait), 0)
    assert got == pytest.approx(np.array([-0.5, 0.0, 0.5, 1.0]) * wait)
    mla = dataclasses.replace(prompt, kind="mla_prefill")
    assert np.all(attention_time.fa3_hd_wait_s(mla, H100, _params(fa3_hd_wait_s=wait), 0) == 0)
    assert "fa3_hd_wait_s" in M.fit_params("attention_prefill", "bf16")


def test_fa3_head_dim_wait_at_the_built_head_dim():
    # the wait is read at the head dim FlashAttention-3 is built for: 80 runs the 96 build
    # (-0.25 x the wait, not 80's -0.375 extrapolated), 112 the 128 one, 300 is held at 256's;
    # never below 64's, and the call's time stays positive at every one
    wait = 1e-6
    hds = [64.0, 80.0, 96.0, 112.0, 128.0, 256.0, 300.0]
    for kind in ("attention_decode", "attention_prefill"):
        rows = _decode("bf16", batch=2.0, kv_len=16.0, head_dim_qk=hds, head_dim_v=hds)
        rows = dataclasses.replace(rows, kind=kind)
        got = attention_time.fa3_hd_wait_s(rows, H100, _params(fa3_hd_wait_s=wait), 0)
        want = np.array([-0.5, -0.25, -0.25, 0.0, 0.0, 1.0, 1.0]) * wait
        assert got == pytest.approx(want, rel=1e-9, abs=1e-15), kind
        assert got[1] == got[2] and np.all(got >= got[0])
    rows = _decode("bf16", batch=2.0, kv_len=16.0, head_dim_qk=hds, head_dim_v=hds, head_pack=0.0)
    t = M.kernel_terms(rows, H100, _params(fa3_hd_wait_s=wait))["seconds"]
    assert np.all(t > 0)


def test_h100_bf16_decode_floor_by_head_dim(generation_tables):
    # H100's bf16 rows at 1-4 sequences and up to 16 cached keys (no window) take 7.8 / 8.8 /
    # 8.1 / 9.0 us at head dims 64 / 128 / 192 / 256; with one call cost for all of them they
    # read +7.8% / -3.6% / +3.6% / -4.5% (signed medians, 12 points apart; hd 64 8.6% |error|),
    # with head dims 64 and 192 narrow_head_s shorter +3.4% / +0.5% / -0.5% / -0.4%
    from mlacalc.measured.observations import predict_mapped
    from mlacalc.timemodel.profile import load_profile

    t, mapped = generation_tables["h100_sxm"]
    c = t.columns
    pred = predict_mapped(mapped, "H100-SXM", load_profile("default"))
    floor = (
        (c["kv_cache_dtype"] != "fp8")
        & (c["window_size"] == 0)
        & (c["batch_size"] <= 4)
        & (c["isl"] + c["step"] <= 16)
    )
    signed = []
    for hd in (64, 128, 192, 256):
        sel = floor & (c["head_dim"] == hd)
        assert sel.sum() >= 80
        err = pred[sel] / t.seconds[sel] - 1.0
        assert np.median(np.abs(err)) < 0.06, hd
        signed.append(np.median(err))
    assert max(signed) - min(signed) < 0.05


def test_trtllm_further_kernels_take_a_read_time():
    # B200's rows all run the same three kernels, so its fits split the floor between fixed_s
    # and launch_s at will (fp8 10.8 + 2 x 0 us); a further kernel of TensorRT-LLM's own decode
    # is TRTLLM_FURTHER_KERNEL_S at H100's clock on every device, whatever launch_s
    one = dict(batch=1.0, kv_len=64.0)  # bf16: the RoPE pre-kernel, no split
    b200 = device_figures(load_hardware("B200"))
    a100 = device_figures(load_hardware("A100-SXM-80GB"))
    for fig in (H100, b200, a100):
        kernels = 2.0 if fig is b200 else 1.0  # B200: the dispatch kernel too
        want = kernels * attention_time.TRTLLM_FURTHER_KERNEL_S * M.REFERENCE_CLOCK_HZ
        for launch in (5e-6, 0.0):
            extra = M.kernel_terms(_decode("bf16", **one), fig, _params(launch_s=launch))
            assert extra["extra_s"][0] == pytest.approx(want / fig.clock_hz, rel=1e-9)
    # the packing kernels (SGLang's, vLLM's) keep their fitted launch_s
    packed = M.kernel_terms(_decode("bf16", head_pack=0.0, **one), H100, _params(launch_s=5e-6))
    assert packed["extra_s"][0] == pytest.approx(5e-6)


def test_blackwell_trtllm_decode_walks_a_kv_heads_query_heads_in_one_tile():
    # B200's TensorRT-LLM rows take as long at 32 query heads a KV head as at 2 (fp8 and bf16);
    # Hopper's fp8 XQA walks each block once per 8 of them (before: B200 too, 4 tiles at 32)
    b200 = device_figures(load_hardware("B200"))
    prm = _params(block_s=1e-6, seq_s=0.0, qhead_unit=0.0, wave_s=0.0, grouped_unit=0.2)
    for dtype in ("fp8", "bf16"):
        walk = {}
        for fig in (H100, b200):
            t = [
                M.kernel_terms(
                    _decode(dtype, no_flops=True, batch=64.0, n_heads=h, n_kv=1.0), fig, prm
                )["compute_s"][0]
                for h in (8.0, 32.0)
            ]
            walk[fig.sm_count] = t[1] / t[0]
        assert walk[b200.sm_count] == pytest.approx(1.0, rel=1e-6)
        if dtype == "fp8":
            assert walk[H100.sm_count] > 3.0  # 4 tiles of 8 against 1


def test_packing_kernels_split_the_windows_keys_only():
    # FlashAttention-3's windowed decode finds the window's key blocks before splitting them:
    # as fast at 65,536 cached keys as at 1,024 (the XQA rule above splits the whole cache)
    kv = [1024.0, 65536.0]
    t = _seconds(_decode("bf16", batch=4.0, window=128.0, kv_len=kv, head_pack=0.0))
    assert t[1] == pytest.approx(t[0], rel=1e-9)


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
    # bf16 (mma.sync XQA, at enough sequences to run it): both within one 16-row tile
    bf16 = _decode("bf16", no_flops=True, batch=64.0, n_kv=1.0, n_heads=heads, kv_len=64.0)
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
    from mlacalc.measured.mapping import map_table
    from mlacalc.measured.tables import load_measured

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

        batch = part.batch.take(pos)
        seconds = t.seconds[part.rows[pos]]
        sample = np.unique(np.linspace(0, len(pos) - 1, 1500).astype(np.int64))
        obs = Observations("H100-SXM", t.table, batch.take(sample), seconds[sample])
        fitted = fit_class([obs])
        prm = _params(**fitted)
        stats = error_stats(M.kernel_terms(batch, H100, prm)["seconds"], seconds)
        # the full fit reaches 7.9% / p90 24%; a sample fit a little less
        assert stats["median_abs_error"] < 0.10
        assert stats["p90_abs_error"] < 0.30
        return
    pytest.fail("no bf16 attention_decode part")


def test_model_steps_give_the_decode_kernel_its_cache_class_and_sinks():
    from mlacalc.cost.model_step import step_kernels

    def core(model, kv_dtype):
        kernels = step_kernels(model, "decode", 4096, 8, kv_dtype=kv_dtype)
        return next(k for k in kernels if k.kind == "attention_decode")

    assert core("llama-3-8b", "bf16").dtype == "bf16"
    llama = core("llama-3-8b", "fp8")
    assert llama.dtype == "fp8" and llama.shape["sinks"] == 0
    assert core("gpt-oss-120b", "fp8").shape["sinks"] == 1


# --- mechanisms added for issue 9 (decode helper) -------------------------------------------


def test_sm90_fp8_xqa_merges_its_splits_in_kernel():
    # 256 cached keys: one part; 512: two. A bf16 call of one sequence (MMHA, below XQA's
    # block threshold) adds the reduction kernel's launch; Hopper's fp8 XQA merges in the
    # kernel: no launch, ``merge_s`` per part
    launch, merge = 3e-6, 5e-8
    scale = M.REFERENCE_CLOCK_HZ / H100.clock_hz
    prm = dict(launch_s=launch, merge_s=merge, seq_s=0.0, block_s=0.0)
    kv = [256.0, 512.0]
    bf16 = M.kernel_terms(_decode("bf16", batch=1.0, n_kv=1.0, kv_len=kv), H100, _params(**prm))
    assert bf16["extra_s"][1] - bf16["extra_s"][0] == pytest.approx(launch * scale, rel=1e-9)
    fp8 = M.kernel_terms(_decode("fp8", batch=1.0, n_kv=1.0, kv_len=kv), H100, _params(**prm))
    assert fp8["extra_s"][0] == pytest.approx(0.0, abs=1e-15)  # fused pre-kernel, one part
    assert fp8["extra_s"][1] == pytest.approx(2 * merge * scale, rel=1e-9)  # two parts, hd 128
    # the merge grows with the parts: 64k keys split 256 ways at batch 1 and one KV head
    long = M.kernel_terms(_decode("fp8", batch=1.0, n_kv=1.0, kv_len=65536.0), H100, _params(**prm))
    assert long["extra_s"][0] == pytest.approx(256 * merge * scale, rel=1e-9)
    # the mma.sync XQA (bf16, 512 units: XQA's own count, two parts at 256 keys) merges in
    # the kernel too (XQA_MERGES_IN_KERNEL): ``merge_s`` a part, no reduction kernel
    xqa = _decode("bf16", batch=64.0, n_kv=8.0, kv_len=[128.0, 256.0])
    extra = M.kernel_terms(xqa, H100, _params(**prm))["extra_s"]
    assert extra[1] - extra[0] == pytest.approx(2 * merge * scale, rel=1e-9)


def test_blackwell_decode_runs_rope_apart_and_merges_splits_in_kernel():
    # TensorRT-LLM-gen's decode kernel (every engine's on B200): the RoPE + append pre-kernel
    # runs before it for either cache dtype (no fused fp8 XQA), and its key splits reduce in
    # the kernel (no reduction kernel); a kernel the table names as another (a variant) keeps
    # the reduction kernel. TensorRT-LLM's own dispatch (head_pack 32, the default) runs one
    # more kernel before the pre-kernel; the engines' call through FlashInfer (head_pack 0) not
    b200 = device_figures(load_hardware("B200"))
    launch = 3e-6
    scale = M.REFERENCE_CLOCK_HZ / b200.clock_hz
    prm = _params(launch_s=launch, merge_s=0.0, seq_s=0.0, block_s=0.0)
    kv = [256.0, 512.0]  # one part, two parts
    for dtype in ("bf16", "fp8"):
        for pack, kernels in ((32.0, 1.0 + attention_time.TRTLLM_GEN_DISPATCH_KERNELS), (0.0, 1.0)):
            b = _decode(dtype, batch=1.0, n_kv=1.0, kv_len=kv, head_pack=pack)
            extra = M.kernel_terms(b, b200, prm)["extra_s"]
            # TensorRT-LLM's own further kernels: TRTLLM_FURTHER_KERNEL_S, not the fitted launch
            own = attention_time.TRTLLM_FURTHER_KERNEL_S
            each = (own if pack > 0 else launch) * scale
            assert extra[0] == pytest.approx(kernels * each, rel=1e-9)
            assert extra[1] == pytest.approx(extra[0], rel=1e-9)  # no reduction kernel
    other = _decode("bf16", batch=1.0, n_kv=1.0, kv_len=kv)
    other = KernelBatch(
        other.kind,
        other.dtype,
        other.flops,
        other.bytes,
        other.calls,
        other.shape,
        variant="flashinfer",
    )
    extra = M.kernel_terms(other, b200, prm)["extra_s"]
    assert extra[1] - extra[0] == pytest.approx(launch * scale, rel=1e-9)


def test_trtllm_gen_unit_work_runs_at_the_rate_of_hoppers_xqa_mma():
    # TensorRT-LLM's own decode (head_pack 32) on B200: the unit work of a bf16 cache at half
    # Hopper's (tcgen05 at twice Hopper's bf16 rate per SM and clock), an fp8 cache's as
    # Hopper's fp8 XQA (its fp8 warp-group MMA already at that rate); H100 and the variants 1
    b200 = device_figures(load_hardware("B200"))
    prm = _params(seq_s=1e-6, block_s=1e-7, fixed_s=0.0, launch_s=0.0)
    for dtype, factor in (("bf16", 0.5), ("fp8", 1.0)):
        b = _decode(dtype, no_flops=True, batch=512.0, kv_len=64.0, head_pack=32.0)
        assert attention_time._xqa_work_scale(b, b200) == factor
        assert attention_time._xqa_work_scale(b, H100) == 1.0
        assert attention_time._xqa_work_scale(dataclasses.replace(b, variant="triton"), b200) == 1.0
    bf16 = _decode("bf16", no_flops=True, batch=512.0, kv_len=64.0, head_pack=32.0)
    fp8 = _decode("fp8", no_flops=True, batch=512.0, kv_len=64.0, head_pack=32.0)
    work = [M.kernel_terms(b, b200, prm)["compute_s"][0] for b in (bf16, fp8)]
    assert work[0] < 0.75 * work[1]


def test_flash_attention_3_runs_its_append_and_combine_kernels_for_an_fp8_cache_too():
    # a packing kernel on Hopper (head_pack 0: FlashAttention-3) is not the fp8 XQA: the
    # engine's cache append runs before it and its combine kernel after its key splits, for
    # either cache dtype; no in-kernel merge
    launch, merge = 3e-6, 5e-8
    scale = M.REFERENCE_CLOCK_HZ / H100.clock_hz
    prm = _params(launch_s=launch, merge_s=merge, seq_s=0.0, block_s=0.0)
    kv = [256.0, 512.0]
    for dtype in ("bf16", "fp8"):
        b = _decode(dtype, batch=1.0, n_kv=1.0, kv_len=kv, head_pack=0.0)
        extra = M.kernel_terms(b, H100, prm)["extra_s"]
        assert extra[0] == pytest.approx(launch * scale, rel=1e-9)
        assert extra[1] == pytest.approx(2 * launch * scale, rel=1e-9)


def test_sglang_blackwell_converts_an_fp8_kernels_query_first():
    # SGLang's TensorRT-LLM-gen path: two elementwise kernels over the query, each a further
    # kernel's launch and wait (attention_time.TRTLLM_FURTHER_KERNEL_S at H100's clock, not the
    # class's fitted launch_s, which its fit could not tell from the fixed cost) and 7 bytes a
    # query element at the class's share of HBM
    b200 = device_figures(load_hardware("B200"))
    scale = M.REFERENCE_CLOCK_HZ / b200.clock_hz
    kernel = attention_time.TRTLLM_FURTHER_KERNEL_S * scale
    stream = 64 * 32 * 128 * 7.0 / (0.8 * b200.hbm_bytes_per_s)
    for launch in (2e-6, 0.0):
        prm = _params(launch_s=launch, eff_memory=0.8)
        dec = _decode("fp8", batch=64.0, n_heads=32.0, q_convert=[0.0, 2.0])
        extra = M.kernel_terms(dec, b200, prm)["extra_s"]
        assert extra[1] - extra[0] == pytest.approx(2 * kernel + stream, rel=1e-9)
    # a model step under SGLang on B200 takes the kernels; vLLM's does not
    step = _decode("fp8")
    ran = attention_time.engine_attention_kernel(step, "sglang", b200)
    assert ran.shape["q_convert"][0] == attention_time.QUERY_CONVERT_KERNELS
    assert "q_convert" not in attention_time.engine_attention_kernel(step, "vllm", b200).shape
    bf16 = attention_time.engine_attention_kernel(_decode("bf16"), "sglang", b200)
    assert "q_convert" not in bf16.shape


def test_sglang_flashattention3_fp8_decode_casts_its_query_first():
    # SGLang's FlashAttention-3 decode on Hopper with an fp8 cache: one cast kernel over the
    # query (attention_time.FA3_QUERY_CAST_KERNELS), a further kernel's launch and wait and 3
    # bytes a query element (2 read, 1 written); a model step takes it, vLLM's (the same
    # kernel, no cast), a bf16 cache's and a prompt's do not
    prm = _params(launch_s=2e-6, eff_memory=0.8)
    dec = _decode("fp8", batch=64.0, n_heads=32.0, head_pack=0.0, q_convert=[0.0, 1.0])
    extra = M.kernel_terms(dec, H100, prm)["extra_s"]
    stream = 64 * 32 * 128 * 3.0 / (0.8 * H100.hbm_bytes_per_s)
    kernel = attention_time.TRTLLM_FURTHER_KERNEL_S * M.REFERENCE_CLOCK_HZ / H100.clock_hz
    assert extra[1] - extra[0] == pytest.approx(kernel + stream, rel=1e-9)
    ran = attention_time.engine_attention_kernel(_decode("fp8"), "sglang", H100)
    assert ran.shape["q_convert"][0] == attention_time.FA3_QUERY_CAST_KERNELS == 1.0
    for engine, dtype in (("vllm", "fp8"), ("sglang", "bf16")):
        step = attention_time.engine_attention_kernel(_decode(dtype), engine, H100)
        assert "q_convert" not in step.shape
    prompt = dataclasses.replace(_decode("fp8"), kind="attention_prefill")
    assert "q_convert" not in attention_time.engine_attention_kernel(prompt, "sglang", H100).shape


def test_sm90_query_heads_pad_to_eight_in_the_unit_work():
    # Hopper's warp-group MMA: 12 query heads a KV head cost the unit work of 16; the
    # mma.sync kernel (bf16) counts the 12 it has
    prm = dict(seq_s=1e-6, block_s=0.0, grouped_unit=0.0, qhead_unit=1.0, launch_s=0.0, wave_s=0.0)

    def unit(dtype, heads):
        b = _decode(dtype, no_flops=True, batch=2048.0, n_kv=1.0, n_heads=heads, kv_len=1.0)
        b = KernelBatch(b.kind, b.dtype, b.flops, np.zeros(len(b)), b.calls, b.shape)
        return M.kernel_terms(b, H100, _params(**prm))["compute_s"]

    fp8 = unit("fp8", [12.0, 16.0])
    assert fp8[0] == pytest.approx(fp8[1], rel=1e-9)
    bf16 = unit("bf16", [12.0, 16.0])
    assert bf16[0] == pytest.approx(0.75 * bf16[1], rel=1e-9)


def test_grouped_units_beyond_the_resident_slots_pay_a_wave_each():
    # a grouped unit holds a 64-token K and V stage and 8 bytes per query row and head-dim
    # element: fp8, head dim 256, 16 query heads a KV head: 32 KB + 32 KB, 3 units on the
    # 228 KB of an H100 SM, 396 on its 132 SMs; the 397th starts a second wave, which costs
    # ``wave_s`` per 8 query rows and 1024 of head dim (16 x 256 / 1024 = 4)
    wave = 1e-6
    scale = M.REFERENCE_CLOCK_HZ / H100.clock_hz
    prm = dict(seq_s=0.0, block_s=0.0, launch_s=0.0, merge_s=0.0, wave_s=wave)

    def walk(dtype, batch, fig=H100, heads=16.0):
        b = _decode(
            dtype,
            no_flops=True,
            batch=batch,
            n_kv=1.0,
            n_heads=heads,
            kv_len=1.0,
            head_dim_qk=256.0,
            head_dim_v=256.0,
        )
        b = KernelBatch(b.kind, b.dtype, b.flops, np.zeros(len(b)), b.calls, b.shape)
        return M.kernel_terms(b, fig, _params(**prm))["compute_s"]

    assert attention_time._decode_unit_bytes(_decode("fp8"), 256.0, 16.0) == 65536.0
    fp8 = walk("fp8", [396.0, 397.0, 792.0, 793.0])
    assert fp8[0] == pytest.approx(0.0, abs=1e-15)
    assert fp8[1] == pytest.approx(4 * wave * scale, rel=1e-9)
    assert fp8[2] == pytest.approx(fp8[1], rel=1e-9)
    assert fp8[3] == pytest.approx(2 * fp8[1], rel=1e-9)
    # a bf16 stage is twice the bytes (64 + 32 KB: 2 a SM, 264 units); MHA units never wait
    bf16 = walk("bf16", [264.0, 265.0])
    assert bf16[0] == pytest.approx(0.0, abs=1e-15) and bf16[1] > 0.0
    assert walk("fp8", [4096.0], heads=1.0)[0] == pytest.approx(0.0, abs=1e-15)
    # an A100 SM offers 164 KB: 2 fp8 units of 64 KB, 216 on its 108 SMs
    a100 = device_figures(load_hardware("A100-SXM-80GB"))
    a = walk("fp8", [216.0, 217.0], fig=a100)
    assert a[0] == pytest.approx(0.0, abs=1e-15) and a[1] > 0.0


def test_a100_mha_rows_read_k_once_while_the_resident_keys_fit_the_l2(generation_tables):
    # the K-only cache's second (V) pass of MMHA finds K in the L2 at short caches
    _, mapped = generation_tables["a100_sxm"]
    part = next(p for p in mapped.parts if p.batch.kind == "attention_decode")
    s = part.batch.shape
    mha = s["n_heads"] == s["n_kv"]
    resident = np.minimum(s["batch"] * s["n_heads"], 432.0) * s["kv_len"] * 256.0
    assert np.all(s["kv_reads"][mha & (resident <= 40 * 2**20)] == 1.0)
    assert np.all(s["kv_reads"][mha & (resident > 41 * 2**20)] == 2.0)
    assert np.any(mha & (resident <= 40 * 2**20)) and np.any(mha & (resident > 41 * 2**20))


def _mla(dtype="bf16", **cols) -> KernelBatch:
    """MLA decode kernels (DeepSeek-V3 latent geometry) with the measured mapping's columns."""
    shape = {
        "batch": 1.0,
        "q_len": 1.0,
        "kv_len": 4096.0,
        "n_heads": 128.0,
        "n_kv": 1.0,
        "head_dim_qk": 576.0,
        "head_dim_v": 512.0,
        "kv_split": 1.0,
        "operand_reads": 1.0,
        "kv_bytes": 1.0 if dtype == "fp8" else 2.0,
        "preprocess_bytes": 1e6,
    }
    shape.update(cols)
    n = max(np.size(v) for v in shape.values())
    shape = {k: np.broadcast_to(np.asarray(v, dtype=float), (n,)).copy() for k, v in shape.items()}
    b, kv, h = shape["batch"], shape["kv_len"], shape["n_heads"]
    flops = 2.0 * h * b * kv * (576.0 + 512.0)
    nbytes = shape["preprocess_bytes"] + b * kv * 576.0 * shape["kv_bytes"] + b * h * 1088 * 2
    return KernelBatch("mla_decode", dtype, flops, nbytes, np.ones(n), shape)


def test_mla_decode_honours_rope_kernel():
    # the measured rows time the RoPE pre-kernel (and with an fp8 cache the q quantization)
    # as kernels of the call; a model step times RoPE itself (``rope_kernel`` 0)
    fig = H100
    prm = M.default_params("mla_decode")
    prm.update(launch_s=2e-6)
    scale = M.REFERENCE_CLOCK_HZ / fig.clock_hz
    for dtype, kernels in (("bf16", 1.0), ("fp8", 2.0)):
        t = M.kernel_terms(_mla(dtype, rope_kernel=[1.0, 0.0]), fig, prm)
        pre = 1e6 / (prm["eff_memory"] * fig.hbm_bytes_per_s)
        gap = t["extra_s"][0] - t["extra_s"][1]
        assert gap == pytest.approx(kernels * 2e-6 * scale + pre, rel=1e-9)
        # the pre-kernel's bytes are not the attention kernel's
        assert t["memory_s"][0] == pytest.approx(t["memory_s"][1], rel=1e-12)


def test_step_mla_decode_leaves_rope_to_the_step():
    from mlacalc.cost.model_step import step_kernels

    kernels = step_kernels("deepseek-v3", "decode", 4096, 8)
    core = [k for k in kernels if k.kind == "mla_decode" and k.name == "attention"]
    assert core and all(k.shape.get("rope_kernel") == 0 for k in core)


def test_mla_key_splits_pay_a_combine_kernel_and_their_partials():
    # FlashMLA's parts write 64 x 512 fp32 partial outputs a combine kernel reads back; the
    # non-splitting kernel has neither
    prm = M.default_params("mla_decode")
    prm.update(launch_s=2e-6)
    scale = M.REFERENCE_CLOCK_HZ / H100.clock_hz
    t = M.kernel_terms(_mla(rope_kernel=0.0, kv_split=[1.0, 0.0], batch=1.0), H100, prm)
    # 128 heads: two 64-head units, each split into 32 parts of 128 of the 4096 keys
    # (FlashMLA's parts: two 64-token blocks, ``MLA_SPLIT_KEYS``)
    assert mla_time.MLA_SPLIT_KEYS == 128.0
    units = 2.0 * min(np.floor(H100.sm_count / 2.0), 4096 / 128)
    partial = units * 64 * 512 * 4.0
    expect = 2e-6 * scale + partial / (prm["eff_memory"] * H100.hbm_bytes_per_s)
    assert t["extra_s"][0] - prm["call_latency_s"] == pytest.approx(expect, rel=1e-9)
    assert t["extra_s"][1] == pytest.approx(prm["call_latency_s"], rel=1e-9)


def test_non_splitting_mla_decode_has_its_own_overlap():
    # ``walk_overlap`` combines the non-splitting kernel's compute and memory; ``overlap``
    # (applied after, on the splitting kernel) leaves it alone
    fig = device_figures(load_hardware("A100-SXM-80GB"))
    prm = M.default_params("mla_decode")
    batch = _mla(rope_kernel=0.0, kv_split=[0.0, 1.0], batch=64.0, kv_len=8192.0)
    base = M.kernel_terms(batch, fig, dict(prm, walk_overlap=1.0, overlap=2.0))["seconds"]
    other_p = M.kernel_terms(batch, fig, dict(prm, walk_overlap=1.0, overlap=8.0))["seconds"]
    walk_p = M.kernel_terms(batch, fig, dict(prm, walk_overlap=8.0, overlap=2.0))["seconds"]
    assert other_p[0] == pytest.approx(base[0], rel=1e-12)
    assert walk_p[0] < base[0]
    assert walk_p[1] == pytest.approx(base[1], rel=1e-12)
    terms = M.kernel_terms(batch, fig, dict(prm, walk_overlap=1.0))
    assert terms["memory_s"][0] == 0.0 and terms["memory_s"][1] > 0.0


def test_mla_decode_shared_memory_fill_and_query_per_key():
    # beyond the operand reads, a key costs the shared memory its latent row's fill (cache
    # bytes) and the query tile's re-read (q bytes): 576 x (2 + 2) bf16, 576 x (1 + 1) fp8
    fig = device_figures(load_hardware("A100-SXM-80GB"))
    prm = M.default_params("mla_decode")
    prm.update(walk_overlap=1.0, unit_latency_s=0.0, block_s=0.0, call_latency_s=0.0)
    kv = 65536.0
    smem = {}
    for dtype in ("bf16", "fp8"):
        batch = _mla(dtype, rope_kernel=0.0, kv_split=0.0, kv_len=kv, n_heads=64.0)
        no_flops = KernelBatch(
            batch.kind, dtype, np.zeros(1), np.zeros(1), batch.calls, batch.shape
        )
        smem[dtype] = M.kernel_terms(no_flops, fig, prm)["compute_s"][0]
    per_key = 576 * 2.0 / (shared.SMEM_BYTES_PER_CLOCK * fig.clock_hz)
    reads = (576 + 512) * 2.0 / (shared.SMEM_BYTES_PER_CLOCK * fig.clock_hz)
    assert smem["bf16"] == pytest.approx(kv * (reads + 2 * per_key), rel=1e-9)
    assert smem["fp8"] == pytest.approx(kv * (reads + per_key), rel=1e-9)


@pytest.mark.parametrize("split", [1.0, 0.0])
def test_a_fit_leaves_the_parameters_of_a_kernel_it_never_saw_at_their_start(split):
    """Fitted on key-splitting MLA decode rows only (an H100-only fit), the non-splitting
    kernel's overlap (``walk_overlap``) is not fitted: no row responds to it, so it keeps its
    default instead of a value the search happened to leave; and the reverse."""
    from mlacalc.timemodel.fit import Observations, fit_class

    batch = _mla(
        batch=np.array([1, 4, 16, 64, 128, 1, 16, 64]),
        kv_len=np.array([1024, 1024, 4096, 4096, 8192, 32768, 32768, 2048]),
        kv_split=split,
        operand_reads=1.0 if split else 4.0,
    )
    fig = device_figures(load_hardware("H100-SXM"))
    prm = M.default_params("mla_decode")
    seconds = M.kernel_terms(batch, fig, prm)["seconds"] * np.linspace(0.9, 1.1, len(batch))
    fitted = fit_class([Observations("H100-SXM", "synthetic", batch, seconds)])
    if split:
        assert "walk_overlap" not in fitted and "overlap" in fitted
    else:
        assert "walk_overlap" in fitted and "overlap" not in fitted


def _as_variant(b: KernelBatch, variant: str = "triton", **cols) -> KernelBatch:
    shape = {**b.shape, **{k: np.full(len(b), v) for k, v in cols.items()}}
    return KernelBatch(b.kind, b.dtype, b.flops, b.bytes, b.calls, shape, variant=variant)


def test_packing_decode_unit_work_runs_at_the_sms_tensor_width():
    # FlashAttention-3 on Hopper and TensorRT-LLM-gen on Blackwell (head_pack 0, no variant):
    # a unit's per-unit and per-block work is its MMAs at the SM's tensor rate, which B200's
    # SM doubles a clock (0.5 of the fitted work), H20's cut tensor cores quarter (4x); A100
    # (other tile rules, other kernels), a kernel the table names as another (a variant:
    # FlashInfer's own here; SGLang's Triton decode counts its own splits, triton_kv_splits) and
    # TensorRT-LLM's XQA (head_pack 32) keep the fitted work
    # (8 sequences of 8 KV heads at 128 keys: enough blocks for TensorRT-LLM's XQA,
    # attention_time.xqa_dispatched)
    prm = _params(seq_s=2e-6, block_s=3e-7, wave_s=1e-6)
    b = _decode(no_flops=True, batch=[8.0, 64.0, 512.0], kv_len=[128.0, 4096.0, 65536.0])
    zero = np.zeros(len(b))
    packing = KernelBatch(
        b.kind, b.dtype, b.flops, b.bytes, b.calls, {**b.shape, "head_pack": zero}
    )
    for device, factor in (("H100-SXM", 1.0), ("B200", 0.5), ("H20", 4.0), ("A100-SXM-80GB", 1.0)):
        fig = device_figures(load_hardware(device))
        own = M.kernel_terms(packing, fig, prm)["compute_s"]
        other = M.kernel_terms(_as_variant(packing, "flashinfer"), fig, prm)["compute_s"]
        assert np.all(own > 0)
        np.testing.assert_allclose(own, factor * other, rtol=1e-6)
        # TensorRT-LLM's XQA keeps it but on Blackwell, where its own rule halves a bf16
        # cache's work (test_trtllm_gen_unit_work_runs_at_the_rate_of_hoppers_xqa_mma)
        # (the rows whose key splits the variant shares: off Blackwell the mma.sync XQA splits
        # the second row's 4,096 keys in two, its own count, xqa_splits)
        xqa = M.kernel_terms(b, fig, prm)["compute_s"] / (factor if device == "B200" else 1.0)
        var = M.kernel_terms(_as_variant(b, "flashinfer"), fig, prm)["compute_s"]
        same = [0, 1, 2] if device == "B200" else [0, 2]
        np.testing.assert_allclose(xqa[same], var[same])


def test_sglang_triton_decode_draws_hoppers_bytes_a_clock_per_sm():
    # SGLang's Triton decode gathers the cache with pointer loads: an SM draws at most H100's
    # HBM bytes per SM-clock, so on B200 (2.02x that per SM-clock) its memory time is 2.02x
    # what B200's HBM alone gives; on H100, and for a kernel copying pages (another variant),
    # the HBM's
    prm = _params()
    b = _decode(no_flops=True, batch=[8.0, 256.0], kv_len=[8192.0, 65536.0])
    for device, factor in (("H100-SXM", 1.0), ("B200", 2.02)):
        fig = device_figures(load_hardware(device))
        triton = M.kernel_terms(_as_variant(b), fig, prm)["memory_s"]
        other = KernelBatch(b.kind, b.dtype, b.flops, b.bytes, b.calls, b.shape, variant="fi")
        np.testing.assert_allclose(triton, factor * M.kernel_terms(other, fig, prm)["memory_s"])


def test_flash_attention_3_fp8_decode_waits_on_its_first_v_block_transpose():
    # FlashAttention-3 on Hopper (head_pack 0, no variant) with an fp8 cache: a unit's first
    # 64-key V block transposed before its MMA, FA3_FP8_FIRST_V_CLOCKS a clock per element of
    # the block (head dim 192 run as 256), once a unit, the units an SM runs in turn; none for
    # a bf16 cache, on Blackwell, for another kernel (a variant) or TensorRT-LLM's XQA
    # (before: none anywhere; vLLM's H100 fp8 rows 12.2% -> 10.3%, from B200's fit 24.2% ->
    # 14.5%)
    prm = _params(seq_s=0.0, block_s=0.0, wave_s=0.0, dequant_s=0.0)
    clocks = attention_time.FA3_FP8_FIRST_V_CLOCKS
    cols = dict(batch=[1.0, 1.0, 4096.0], n_kv=1.0, n_heads=8.0, head_dim_qk=[128.0, 192.0, 128.0])
    share = 4096.0 / H100.sm_count
    want = clocks * 64.0 * np.array([128.0, 256.0, 128.0 * share]) / H100.clock_hz

    def added(dtype, fig, pack):
        b = _decode(dtype, no_flops=True, head_pack=pack, **cols)
        own = M.kernel_terms(b, fig, prm)["compute_s"]
        return own - M.kernel_terms(_as_variant(b), fig, prm)["compute_s"]

    np.testing.assert_allclose(added("fp8", H100, 0.0), want, rtol=1e-6)
    b200 = device_figures(load_hardware("B200"))
    for dtype, fig, pack in (("bf16", H100, 0.0), ("fp8", b200, 0.0), ("fp8", H100, 32.0)):
        np.testing.assert_allclose(added(dtype, fig, pack), 0.0, atol=1e-15)


def test_trtllm_gen_walks_an_fp8_cache_at_the_sms_tensor_width():
    # TensorRT-LLM's own decode on B200 walks a cache's blocks (block_s) at half Hopper's
    # clocks with either cache (tcgen05's fp8 MMA at twice Hopper's fp8 XQA rate), where its
    # unit work keeps an fp8 cache at Hopper's (_xqa_work_scale 1); H100 and the variants 1
    b200 = device_figures(load_hardware("B200"))
    for dtype in ("bf16", "fp8"):
        b = _decode(dtype, no_flops=True, batch=64.0, kv_len=8192.0, head_pack=32.0)
        assert attention_time._xqa_walk_scale(b, b200) == 0.5
        assert attention_time._xqa_walk_scale(b, H100) == 1.0
        assert attention_time._xqa_walk_scale(dataclasses.replace(b, variant="triton"), b200) == 1.0
    # the walk alone: an fp8 cache's takes as long as a bf16 cache's on B200
    prm = _params(seq_s=0.0, block_s=1e-7, fixed_s=0.0, launch_s=0.0, grouped_unit=0.0,
                  qhead_unit=0.0, wave_s=0.0)  # fmt: skip
    walk = [
        M.kernel_terms(_decode(dt, no_flops=True, batch=64.0, kv_len=8192.0, head_pack=32.0),
                       b200, prm)["compute_s"][0]
        for dt in ("bf16", "fp8")
    ]  # fmt: skip
    assert walk[1] == pytest.approx(walk[0], rel=1e-9)


def test_sglangs_triton_decode_splits_a_sequence_into_at_most_eight_parts():
    # SGLang's Triton decode (the ``triton`` variant) splits a sequence's keys into no more
    # than 8 parts (attention_time.TRITON_MAX_KV_SPLITS): one sequence's walk takes twice as
    # long at twice the keys (B200's measured rows at head dim 256: 84 -> 160 -> 314 us from
    # 8,192 to 32,768 keys), where the packing kernel's parts of 256 keys fill the SMs
    keys = np.array([8192.0, 16384.0])
    plain = _decode(no_flops=True, batch=1.0, n_kv=1.0, n_heads=16.0, kv_len=keys, head_pack=0.0)
    triton = dataclasses.replace(plain, variant="triton")
    prm = _params(fixed_s=0.0, eff_memory=1e6, block_s=1e-7, seq_s=0.0, launch_s=0.0)

    def walk(batch):
        return M.kernel_terms(batch, H100, prm)["compute_s"]

    t, p = walk(triton), walk(plain)
    assert t[1] / t[0] == pytest.approx(2.0, rel=0.02)
    assert p[1] / p[0] == pytest.approx(1.0, rel=0.02)
    assert t[1] > 6 * p[1]


def test_sglangs_triton_decode_splits_by_its_grid_and_the_caches_length():
    # SGLang's Triton decode takes min(ceil(SMs x max(log2(keys / 64), 1) / grid), 8) splits
    # (grid: sequences x query-head groups of at most 16 heads), each rounded up to whole
    # 32-key blocks (attention_time.triton_kv_splits): one sequence of one KV head splits 255
    # keys 8 ways (parts of 32), 100 keys 4 ways (the count's 8 rounded to 32-key parts), 31
    # keys not at all; on H100 (132 SMs) 2,048 units at 4,096 keys take one part (ceil(792 /
    # 2,048)), 64 units at 1,024 keys 8 (ceil(528 / 64) = 9, capped); an MHA call's grid is a
    # head each, a group of 32 query heads two 16-head groups
    rows = dict(
        batch=[1.0, 1.0, 1.0, 2048.0, 64.0, 16.0, 8.0],
        n_kv=[1.0, 1.0, 1.0, 1.0, 1.0, 16.0, 1.0],
        n_heads=[16.0, 16.0, 16.0, 8.0, 8.0, 16.0, 32.0],
        kv_len=[255.0, 100.0, 31.0, 4096.0, 1024.0, 8192.0, 8192.0],
    )
    b = dataclasses.replace(_decode(**rows, head_pack=0.0), variant="triton")
    a = attention_time.attention_shape(b)
    got = attention_time.triton_kv_splits(b, H100, a, a["kv"])
    # 16 x 16 MHA units at 8,192 keys: ceil(924 / 256) = 4; 8 x 2 groups: ceil(924 / 16) -> 8
    assert got == pytest.approx([8.0, 4.0, 1.0, 1.0, 8.0, 4.0, 8.0])


def test_fp8_xqa_merge_waits_a_part_at_every_head_dim():
    # Hopper's fp8 XQA (and Blackwell's fp8 decode) merges its key splits in the kernel:
    # ``merge_s`` a part whatever the head dim (a part's head dim read at once), where it had
    # been ``merge_s`` a part and 128 of head dim. At 524,288 cached keys one sequence of one
    # KV head splits over every slot (4 an SM: 528 on H100) at head dims 64, 128 and 256
    merge = 5e-8
    scale = M.REFERENCE_CLOCK_HZ / H100.clock_hz
    prm = _params(launch_s=0.0, merge_s=merge, seq_s=0.0, block_s=0.0)
    hd = [64.0, 128.0, 256.0]
    b = _decode("fp8", batch=1.0, n_kv=1.0, kv_len=524288.0, head_dim_qk=hd, head_dim_v=hd)
    extra = M.kernel_terms(b, H100, prm)["extra_s"]
    parts = H100.sm_count * attention_time.DECODE_SPLIT_UNITS_PER_SM
    assert extra == pytest.approx([parts * merge * scale] * 3, rel=1e-9)


def test_trtllm_mma_sync_xqa_picks_its_own_split_count(monkeypatch):
    # TensorRT-LLM's mma.sync XQA (its grouped bf16 decode) splits the whole cache into a part
    # per 128 keys, at most round(sqrt(8 x that)) parts and 8 x SMs CTAs over its units
    # (xqa_splits): on H100 (132 SMs) 512 units split 256 keys in two, 1,024 units do not,
    # 128 units stop at 8 parts, one unit of 16,384 keys at 32 (the square root), 16 units of
    # 131,072 at 66 (the CTAs)
    kv = np.array([128.0, 256.0, 256.0, 1024.0, 2048.0, 16384.0, 131072.0])
    units = np.array([4.0, 512.0, 1024.0, 128.0, 128.0, 1.0, 16.0])
    got = attention_time.xqa_splits(kv, units, H100)
    assert got == pytest.approx([1.0, 2.0, 1.0, 8.0, 8.0, 32.0, 66.0])
    # 512 units (64 sequences of 8 KV heads) at 256 keys run twice the CTAs of 128 keys: their
    # unit work doubles; Hopper's fp8 XQA and the packing kernels keep their own counts
    rows = dict(batch=64.0, n_kv=8.0, kv_len=[128.0, 256.0])
    bf16 = M.kernel_terms(_decode("bf16", **rows), H100, _params())["compute_s"]
    assert bf16[1] > 1.8 * bf16[0]
    for dtype, cols in (("fp8", {}), ("bf16", dict(head_pack=0.0))):
        other = M.kernel_terms(_decode(dtype, **rows, **cols), H100, _params())["compute_s"]
        assert other[1] < 1.3 * other[0], (dtype, cols)
    monkeypatch.setattr(attention_time, "XQA_SPLIT_WAVES", 4.0)  # one part at 512 units
    bf16 = M.kernel_terms(_decode("bf16", **rows), H100, _params())["compute_s"]
    assert bf16[1] < 1.3 * bf16[0]


def test_a_decode_part_before_the_window_pays_empty_part_of_its_unit_work_and_no_walk():
    # a split of the whole cache under a window leaves the parts before the window without
    # keys: each pays ``empty_part`` of a part's unit work and walks no block (the parts
    # holding keys walk theirs); a cache without a window has no empty part
    rows = _decode("bf16", batch=16.0, n_kv=8.0, window=[128.0, 0.0], kv_len=4096.0)
    full = M.kernel_terms(rows, H100, _params(empty_part=1.0))["seconds"]
    half = M.kernel_terms(rows, H100, _params(empty_part=0.5))["seconds"]
    assert half[0] < 0.9 * full[0]
    assert half[1] == pytest.approx(full[1], rel=1e-12)
    # no unit work: a walk of the window's blocks alone, whatever the parts before it
    walk = dict(seq_s=0.0, qhead_unit=0.0, wave_s=0.0, grouped_unit=0.0, block_s=1e-6)
    short = _decode("bf16", batch=16.0, n_kv=8.0, window=128.0, kv_len=[256.0, 65536.0])
    t = M.kernel_terms(short, H100, _params(**walk))["compute_s"]
    assert t[1] < 1.2 * t[0]


def test_h100_bf16_grouped_rows_split_as_xqa_does(generation_tables):
    # H100's bf16 grouped rows of 128-512 units at 256-1,024 cached keys take twice the time
    # at 256 keys they take at 128 (512 units: 23.0 -> 43.8 us, hd 64), XQA's split in two;
    # with the model's own count (no split under 4 units an SM) they read -10.9% signed
    # (10.9% median |error|). Its rows at a 128-key window past it (32-512 units), XQA's
    # parts before the window run but hold no key: 20.6% (-17.9% signed) before
    from mlacalc.measured.observations import predict_mapped
    from mlacalc.timemodel.profile import load_profile

    t, mapped = generation_tables["h100_sxm"]
    c = t.columns
    group = c["num_heads"] / c["num_key_value_heads"]
    units = c["batch_size"] * c["num_key_value_heads"]
    keys = c["step"] + 1
    base = (c["kv_cache_dtype"] != "fp8") & (group >= 2) & (group <= 32)
    pred = predict_mapped(mapped, "H100-SXM", load_profile("default"))
    split = base & (units >= 128) & (units <= 512) & (keys >= 256) & (keys <= 1024)
    split = split & (c["window_size"] == 0)
    windowed = base & (units >= 32) & (units <= 512) & (keys >= 256) & (c["window_size"] == 128)
    for sel, rows in ((split, 700), (windowed, 900)):
        assert sel.sum() >= rows
        err = pred[sel] / t.seconds[sel] - 1.0
        assert np.median(np.abs(err)) < 0.08
        assert abs(np.median(err)) < 0.05


def test_flash_attention_3_decode_walks_a_block_in_64_row_tiles():
    # FlashAttention-3 on Hopper (head_pack 0, no variant) computes a block for up to 64 query
    # rows of a KV head in one tile (FA3_DECODE_ROW_TILE): its walk is the same at 8, 16, 48
    # and 64 query heads on one KV head, twice that at 96 and 128; a bf16 cache's tiles of 16
    # rows elsewhere (Blackwell's packing kernels, a variant) grow it at every 16
    prm = _params(seq_s=0.0, qhead_unit=0.0, wave_s=0.0, block_s=1e-6)
    heads = [8.0, 16.0, 48.0, 64.0, 96.0, 128.0]
    b = _decode(no_flops=True, head_pack=0.0, batch=1.0, n_kv=1.0, n_heads=heads, kv_len=8192.0)
    walk = M.kernel_terms(b, H100, prm)["compute_s"]
    np.testing.assert_allclose(walk[:4], walk[0], rtol=1e-12)
    np.testing.assert_allclose(walk[4:], 2.0 * walk[0], rtol=1e-12)
    b200 = device_figures(load_hardware("B200"))
    for fig, batch in ((b200, b), (H100, _as_variant(b))):
        t = M.kernel_terms(batch, fig, prm)["compute_s"]
        np.testing.assert_allclose(t[[2, 3, 5]] / t[0], [3.0, 4.0, 8.0], rtol=1e-12)


@pytest.mark.parametrize("engine", ["vllm"])
def test_h100_flash_attention_3_rows_flat_in_query_heads(engine):
    # vLLM's H100 decode rows (FlashAttention-3) of 40-64 query heads on a KV head, up to 64
    # sequences x KV heads (2,460 rows): about as long as those of 1-8 heads at one shape
    # (1.00-1.02x). In tiles of 16 (bf16) or 8 (fp8) rows they read +7.2% signed (median
    # |error| 8.3%); in 64-row tiles +4.3% (6.6%), its classes not refitted (SGLang's rows,
    # whose classes are not refitted either, +7.8% -> +6.5%)
    pytest.importorskip("pyarrow.parquet")
    from mlacalc.measured.mapping import map_table
    from mlacalc.measured.observations import predict_mapped
    from mlacalc.measured.tables import load_measured
    from mlacalc.timemodel.profile import load_profile

    tables = load_measured(REF / "h100_sxm", engine=engine).tables
    t = next(x for x in tables if x.table == "generation_attention_perf")
    c = t.columns
    group = c["num_heads"] / c["num_key_value_heads"]
    sel = (
        (group >= 40)
        & (c["batch_size"] * c["num_key_value_heads"] <= 64)
        & np.isin(c["kernel_source"].astype(str), ["fa3", "vllm_flash_attn_fa3"])
    )
    assert sel.sum() >= 300
    pred = predict_mapped(map_table(t), "H100-SXM", load_profile(f"fit-h100-sxm-{engine}"))
    err = pred[sel] / t.seconds[sel] - 1.0
    assert abs(np.median(err)) < 0.05
    assert np.median(np.abs(err)) < 0.075
