"""The prefill softmax's exponentials and the non-splitting MLA decode kernel (time model)."""

from __future__ import annotations

import numpy as np

from mlacalc.hardware import load_hardware
from mlacalc.kernels import KernelBatch
from mlacalc.timemodel.device import device_figures
from mlacalc.timemodel.model import SFU_EXP_PER_CLOCK, default_params, kernel_terms


def _prefill(dtype: str, d_qk: float, d_v: float, isl: float = 8192.0, heads: float = 32.0):
    pairs = isl * (isl + 1) / 2
    flops = 2.0 * heads * pairs * (d_qk + d_v)
    shape = {
        "batch": 1.0,
        "q_len": isl,
        "kv_len": isl,
        "n_heads": heads,
        "n_kv": heads,
        "head_dim_qk": d_qk,
        "head_dim_v": d_v,
        "window": 0.0,
        "causal": 1.0,
    }
    return KernelBatch(
        kind="attention_prefill",
        dtype=dtype,
        flops=np.array([flops]),
        bytes=np.array([1e6]),
        calls=np.array([1.0]),
        shape={k: np.array([v]) for k, v in shape.items()},
    ), heads * pairs


def test_prefill_time_never_beats_the_exponentials():
    fig = device_figures(load_hardware("H100-SXM"))
    prm = default_params("attention_prefill")
    prm.update(eff_compute=1.0, eff_exp=1.0, sfu_overlap=16.0, seq_s=0.0, block_s=0.0)
    for dtype, d in (("fp8", 64.0), ("fp8", 128.0), ("bf16", 64.0)):
        batch, scores = _prefill(dtype, d, d)
        compute = kernel_terms(batch, fig, prm)["compute_s"][0]
        sfu = scores / (SFU_EXP_PER_CLOCK * fig.sm_count * fig.clock_hz)
        tensor = batch.flops[0] / fig.peak(dtype)
        assert compute >= 0.99 * max(sfu, tensor)
    # fp8 at head_dim 64 on H100: the exponentials take twice the products at full rate
    batch, scores = _prefill("fp8", 64.0, 64.0)
    compute = kernel_terms(batch, fig, prm)["compute_s"][0]
    assert compute > 1.9 * batch.flops[0] / fig.peak("fp8")


def test_a_kernel_without_values_has_no_softmax():
    fig = device_figures(load_hardware("H100-SXM"))
    prm = default_params("attention_prefill")
    batch, _ = _prefill("bf16", 128.0, 0.0)
    slow, fast = dict(prm, eff_exp=0.05), dict(prm, eff_exp=1.0)
    a = kernel_terms(batch, fig, slow)["seconds"][0]
    b = kernel_terms(batch, fig, fast)["seconds"][0]
    assert a == b
    batch, _ = _prefill("bf16", 128.0, 128.0)
    assert (
        kernel_terms(batch, fig, slow)["seconds"][0] > kernel_terms(batch, fig, fast)["seconds"][0]
    )


def _mla_decode(heads: np.ndarray, kv: float, split: float) -> KernelBatch:
    n = len(heads)
    lat, v = 576.0, 512.0
    flops = 2.0 * heads * kv * (lat + v)
    shape = {
        "batch": np.ones(n),
        "q_len": np.ones(n),
        "kv_len": np.full(n, kv),
        "n_heads": heads,
        "n_kv": np.ones(n),
        "head_dim_qk": np.full(n, lat),
        "head_dim_v": np.full(n, v),
        "kv_split": np.full(n, split),
    }
    return KernelBatch(
        kind="mla_decode",
        dtype="bf16",
        flops=flops,
        bytes=kv * lat * 2.0 + heads * (lat + v) * 2.0,
        calls=np.ones(n),
        shape=shape,
    )


def test_non_splitting_mla_decode_pays_the_whole_head_tile():
    # the A100 rows: one sequence's keys walked on one SM, the same time for 1 to 64 heads
    # (128 heads: two tiles, on two SMs side by side at batch 1)
    fig = device_figures(load_hardware("A100-SXM-80GB"))
    prm = default_params("mla_decode")
    heads = np.array([1.0, 16.0, 64.0, 128.0])
    t = kernel_terms(_mla_decode(heads, 131072.0, 0.0), fig, prm)["compute_s"]
    assert np.allclose(t, t[0], rtol=1e-9)
    # a splitting kernel spreads the keys over the SMs and counts only the real heads
    s = kernel_terms(_mla_decode(heads, 131072.0, 1.0), fig, prm)["compute_s"]
    assert s[0] < s[2] and np.all(s < t / 10)


def test_prefill_waits_do_not_scale_with_the_clock():
    # the H100 and A100 rows at isl 16 take the same time per call (13-14 us) and per unit
    # (3.5 us a unit on an SM) although the clocks differ by 1.3x: memory waits, not cycles
    from dataclasses import replace

    fig = device_figures(load_hardware("H100-SXM"))
    slow = replace(fig, clock_hz=fig.clock_hz / 1.3)
    prm = default_params("attention_prefill")
    prm.update(call_latency_s=1e-5, unit_latency_s=3e-6, block_s=0.0, mask_s=0.0)
    batch, _ = _prefill("bf16", 128.0, 128.0, isl=16.0, heads=4.0)
    a = kernel_terms(batch, fig, prm)
    b = kernel_terms(batch, slow, prm)
    assert a["seconds"][0] >= 1.3e-5
    assert abs(a["seconds"][0] / b["seconds"][0] - 1.0) < 0.02


def test_fp8_prefill_transposes_its_value_blocks():
    # the V transpose of an fp8 kernel: 2 x 128 x d_v bytes of shared memory per key block,
    # added to the products and exponentials; a bf16 kernel has none
    from mlacalc.timemodel.model import SMEM_BYTES_PER_CLOCK, _combine

    fig = device_figures(load_hardware("H100-SXM"))
    prm = default_params("attention_prefill")
    prm.update(eff_compute=1.0, eff_exp=1.0, unit_latency_s=0.0, block_s=0.0, mask_s=0.0)
    isl, heads = 4096.0, 132.0
    units, blocks = heads * isl / 128.0, (isl / 128.0 + 1.0) / 2.0
    for dtype, transposes in (("fp8", True), ("bf16", False)):
        batch, scores = _prefill(dtype, 128.0, 128.0, isl=isl, heads=heads)
        t = kernel_terms(batch, fig, prm)["compute_s"][0]
        tensor = batch.flops[0] / fig.peak(dtype)
        sfu = scores / (SFU_EXP_PER_CLOCK * fig.sm_count * fig.clock_hz)
        walk = units / fig.sm_count * blocks * 2 * 128 * 128 / (SMEM_BYTES_PER_CLOCK * fig.clock_hz)
        expected = _combine(np.array([tensor]), np.array([sfu]), prm["sfu_overlap"])[0]
        expected += walk if transposes else 0.0
        assert abs(t / expected - 1.0) < 1e-6


def test_mla_decode_operand_reads_through_shared_memory():
    # four mma.sync warps per 64-head tile read each latent row (A100 kernel) against one
    # warp-group read (FlashMLA): 3 x 1088 x 2 bytes more per key through shared memory
    from mlacalc.timemodel.model import SMEM_BYTES_PER_CLOCK

    fig = device_figures(load_hardware("A100-SXM-80GB"))
    prm = default_params("mla_decode")
    kv = 65536.0
    one = _mla_decode(np.array([64.0]), kv, 0.0)
    four = _mla_decode(np.array([64.0]), kv, 0.0)
    four.shape["operand_reads"] = np.array([4.0])
    t1 = kernel_terms(one, fig, prm)["compute_s"][0]
    t4 = kernel_terms(four, fig, prm)["compute_s"][0]
    extra = kv * 3 * (576 + 512) * 2 / (SMEM_BYTES_PER_CLOCK * fig.clock_hz)
    assert abs((t4 - t1) / extra - 1.0) < 1e-6


def test_mla_decode_waits_do_not_scale_with_the_clock():
    from dataclasses import replace

    fig = device_figures(load_hardware("H100-SXM"))
    slow = replace(fig, clock_hz=fig.clock_hz / 1.3)
    prm = default_params("mla_decode")
    prm.update(call_latency_s=1e-5, unit_latency_s=6e-6, block_s=0.0)
    batch = _mla_decode(np.array([1.0]), 2.0, 1.0)
    a = kernel_terms(batch, fig, prm)["seconds"][0]
    b = kernel_terms(batch, slow, prm)["seconds"][0]
    assert a >= 1.6e-5
    assert abs(a / b - 1.0) < 0.02
