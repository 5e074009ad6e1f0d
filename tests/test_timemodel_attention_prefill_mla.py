"""The prefill softmax's exponentials and the non-splitting MLA decode kernel (time model)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from _helpers import causal_prompt_batch

from mlacalc.hardware.catalogue import load_hardware
from mlacalc.timemodel.device import device_figures
from mlacalc.timemodel.shared import SFU_EXP_PER_CLOCK
from mlacalc.timemodel.terms import default_params, kernel_terms
from mlacalc.words.kernels import KernelBatch


def _prefill(dtype: str, d_qk: float, d_v: float, isl: float = 8192.0, heads: float = 32.0):
    batch = causal_prompt_batch("attention_prefill", dtype, isl, heads, d_qk, d_v)
    return batch, heads * isl * (isl + 1) / 2


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
    prm["walk_overlap"] = 16.0  # the walk's compute alone (its memory hidden)
    heads = np.array([1.0, 16.0, 64.0, 128.0])
    t = kernel_terms(_mla_decode(heads, 131072.0, 0.0), fig, prm)["compute_s"]
    assert np.allclose(t, t[0], rtol=1e-9)
    # a splitting kernel spreads the keys over the SMs; it multiplies whole 64-row query tiles
    # (mla_time.PAD_SPLIT_TILES, 28592c0: 1 to 64 heads one tile, 128 two), where it had
    # counted only the real heads (s[0] < s[2])
    s = kernel_terms(_mla_decode(heads, 131072.0, 1.0), fig, prm)["compute_s"]
    assert np.allclose(s[:3], s[0], rtol=1e-9) and s[3] > 1.9 * s[2]
    assert np.all(s < t / 10)


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
    # added to the products and exponentials, and the conversion of every probability to fp8
    # (one instruction per two scores at 16 a clock per SM); a bf16 kernel has neither. Both
    # read each K and V block from shared memory once per 64-row warp-group MMA (H100)
    from mlacalc.timemodel.shared import CONVERT_PER_CLOCK, SMEM_BYTES_PER_CLOCK
    from mlacalc.timemodel.shared import combine as _combine

    fig = device_figures(load_hardware("H100-SXM"))
    prm = default_params("attention_prefill")
    prm.update(eff_compute=1.0, eff_exp=1.0, unit_latency_s=0.0, block_s=0.0, mask_s=0.0)
    isl, heads = 4096.0, 132.0
    units, blocks = heads * isl / 128.0, (isl / 128.0 + 1.0) / 2.0
    smem = SMEM_BYTES_PER_CLOCK * fig.clock_hz
    for dtype, fp8 in (("fp8", True), ("bf16", False)):
        batch, scores = _prefill(dtype, 128.0, 128.0, isl=isl, heads=heads)
        t = kernel_terms(batch, fig, prm)["compute_s"][0]
        tensor = batch.flops[0] / fig.peak(dtype)
        sfu = scores / (SFU_EXP_PER_CLOCK * fig.sm_count * fig.clock_hz)
        walk = units / fig.sm_count * blocks * 2 * 128 * 128 / smem
        operand = units / fig.sm_count * blocks * 128 * 2 * 256 * (1 if fp8 else 2) / smem
        convert = scores * 0.5 / (CONVERT_PER_CLOCK * fig.sm_count * fig.clock_hz)
        expected = _combine(np.array([tensor]), np.array([sfu]), prm["sfu_overlap"])[0]
        # (TensorRT-LLM's kernel, a tile a query head, ends a longest tile, all isl / 128
        # blocks, after the balanced time: _causal_tail_s)
        expected *= 1.0 + fig.sm_count / units * (isl / 128.0) / blocks
        expected += operand + (walk + convert if fp8 else 0.0)
        assert abs(t / expected - 1.0) < 1e-6


def test_prefill_operand_reads_follow_the_mma_instruction():
    # an Ampere mma.sync warp multiplies 16 query rows per read of a K/V block from shared
    # memory, a Hopper warp-group MMA 64: a 128-query tile reads each block 8 times on
    # compute capability 8, twice on 9 (the same device figures otherwise)
    from dataclasses import replace

    from mlacalc.timemodel.shared import SMEM_BYTES_PER_CLOCK

    fig = device_figures(load_hardware("A100-SXM-80GB"))
    assert fig.compute_capability == 8.0
    hopper = replace(fig, compute_capability=9.0)
    prm = default_params("attention_prefill")
    prm.update(unit_latency_s=0.0, block_s=0.0, mask_s=0.0)
    isl, heads = 4096.0, 108.0
    batch, _ = _prefill("bf16", 128.0, 128.0, isl=isl, heads=heads)
    t8 = kernel_terms(batch, fig, prm)["compute_s"][0]
    t9 = kernel_terms(batch, hopper, prm)["compute_s"][0]
    waves, keys = heads * isl / 128.0 / fig.sm_count, (isl / 128.0 + 1.0) / 2.0 * 128.0
    extra = waves * keys * (8 - 2) * 256 * 2 / (SMEM_BYTES_PER_CLOCK * fig.clock_hz)
    assert abs((t8 - t9) / extra - 1.0) < 1e-6


def test_fp8_prefill_runs_head_dim_192_as_256():
    # the measured H100 fp8 rows take the same time per score at head dim 192 as at 256 (the
    # fp8 kernels are built for powers of two); the bf16 kernel has a 192 of its own
    fig = device_figures(load_hardware("H100-SXM"))
    prm = default_params("attention_prefill")
    prm.update(eff_compute=0.05, unit_latency_s=0.0, block_s=0.0, mask_s=0.0)
    ratio = {}
    for dtype in ("fp8", "bf16"):
        t = [
            kernel_terms(_prefill(dtype, d, d)[0], fig, prm)["compute_s"][0] for d in (192.0, 256.0)
        ]
        ratio[dtype] = t[0] / t[1]
    assert ratio["fp8"] > 0.97
    assert ratio["bf16"] < 0.8


def test_flash_attention_3s_fp8_prompt_keeps_its_head_dim_192_build():
    # FlashAttention-3's fp8 prompt kernel on Hopper (SGLang's and vLLM's, head_pack 0) has a
    # 192 build: its products at 192 take 0.75 of those at 256, where TensorRT-LLM's (a tile a
    # query head) run 192 as 256 (the measured H100 fp8 rows over 2 ms: SGLang / vLLM 997 /
    # 548 TFLOP/s at 192 against 912 / 429 at 256, TensorRT-LLM 631 against 813); on
    # Blackwell (TensorRT-LLM-gen's kernel) the power of two stays
    fig = device_figures(load_hardware("H100-SXM"))
    prm = default_params("attention_prefill")
    prm.update(eff_compute=0.05, unit_latency_s=0.0, block_s=0.0, mask_s=0.0)

    def ratio(fig, pack):
        t = []
        for d in (192.0, 256.0):
            batch, _ = _prefill("fp8", d, d)
            batch.shape["head_pack"] = np.array([pack])
            t.append(kernel_terms(batch, fig, prm)["compute_s"][0])
        return t[0] / t[1]

    assert abs(ratio(fig, 0.0) - 0.75) < 0.02
    assert ratio(fig, 1.0) > 0.97
    assert ratio(device_figures(load_hardware("B200")), 0.0) > 0.97


def test_prefill_rope_pre_kernel_is_its_own_kernel():
    # the measured rows time the RoPE + cache-write pre-kernel before the attention kernel:
    # its wait (pre_latency_s) and a streaming pass over its bytes, after the attention
    # kernel's own time; a step that times RoPE itself (rope_kernel = 0) drops both, and a
    # kernel without values (an indexer's logits) has none
    fig = device_figures(load_hardware("H100-SXM"))
    prm = default_params("attention_prefill")
    assert prm["pre_latency_s"] > 0
    pre_bytes = 3e8
    batch, _ = _prefill("bf16", 128.0, 128.0, isl=2048.0, heads=32.0)
    batch.bytes[:] = 4e8
    batch.shape["preprocess_bytes"] = np.array([pre_bytes])
    own = dict(batch.shape, rope_kernel=np.array([0.0]))
    measured = kernel_terms(batch, fig, prm)
    stepped = kernel_terms(
        KernelBatch(batch.kind, batch.dtype, batch.flops, batch.bytes, batch.calls, own), fig, prm
    )
    stream = pre_bytes / (prm["eff_memory"] * fig.hbm_bytes_per_s)
    gap = measured["seconds"][0] - stepped["seconds"][0]
    assert abs(gap / (prm["pre_latency_s"] + stream) - 1.0) < 1e-9
    # the attention kernel's own memory term holds only its own bytes
    plain = dict(batch.shape)
    plain.pop("preprocess_bytes")
    whole = kernel_terms(
        KernelBatch(batch.kind, batch.dtype, batch.flops, batch.bytes, batch.calls, plain), fig, prm
    )
    assert abs(measured["memory_s"][0] / whole["memory_s"][0] - 1.0 / 4.0) < 1e-9
    logits, _ = _prefill("bf16", 128.0, 0.0)
    zero = dict(logits.shape, rope_kernel=np.array([0.0]))
    a = kernel_terms(logits, fig, prm)["seconds"][0]
    b = kernel_terms(
        KernelBatch(logits.kind, logits.dtype, logits.flops, logits.bytes, logits.calls, zero),
        fig,
        prm,
    )["seconds"][0]
    assert a == b


def test_step_prefill_attention_leaves_rope_to_the_step():
    # a model step times RoPE as a kernel of its own: its prefill attention kernels (MLA and
    # GQA) carry rope_kernel = 0, so the pre-kernel is not counted twice
    from mlacalc.cost.model_step import step_kernels

    for model in ("deepseek-v3", "llama-3-8b"):
        kernels = step_kernels(model, "prefill", 2048, 1, scope="attention_layer")
        names = [k.name for k in kernels]
        assert "rope" in names
        attn = [k for k in kernels if k.kind in ("attention_prefill", "mla_prefill")]
        assert attn and all(k.shape.get("rope_kernel") == 0 for k in attn)


def test_mla_decode_operand_reads_through_shared_memory():
    # four mma.sync warps per 64-head tile read each latent row (A100 kernel) against one
    # warp-group read (FlashMLA): 3 x 1088 x 2 bytes more per key through shared memory, added
    # to the products; the warp group's reads bound its products' pace instead (overlapped),
    # so the four-read kernel takes at least those extra bytes' time more
    from mlacalc.timemodel.shared import SMEM_BYTES_PER_CLOCK

    fig = device_figures(load_hardware("A100-SXM-80GB"))
    prm = default_params("mla_decode")
    kv = 65536.0
    one = _mla_decode(np.array([64.0]), kv, 0.0)
    four = _mla_decode(np.array([64.0]), kv, 0.0)
    four.shape["operand_reads"] = np.array([4.0])
    t1 = kernel_terms(one, fig, prm)["compute_s"][0]
    t4 = kernel_terms(four, fig, prm)["compute_s"][0]
    extra = kv * 3 * (576 + 512) * 2 / (SMEM_BYTES_PER_CLOCK * fig.clock_hz)
    assert (t4 - t1) / extra >= 1.0 - 1e-6
    # and the one-read (warp-group) kernel's shared-memory traffic overlaps its products: it
    # takes less than products plus traffic, and no less than either
    smem1 = kv * (2 * (576 + 512) + 576 * 4) / (SMEM_BYTES_PER_CLOCK * fig.clock_hz)
    assert t1 >= smem1 * (1 - 1e-6)


def test_mla_decode_waits_do_not_scale_with_the_clock():
    from dataclasses import replace

    fig = device_figures(load_hardware("H100-SXM"))
    slow = replace(fig, clock_hz=fig.clock_hz / 1.3)
    prm = default_params("mla_decode")
    prm.update(call_latency_s=1e-5, unit_latency_s=6e-6, block_s=0.0)
    batch = _mla_decode(np.array([1.0]), 2.0, 1.0)
    batch.shape["rope_kernel"] = np.zeros(1)  # the RoPE pre-kernel's launch is clocked
    a = kernel_terms(batch, fig, prm)["seconds"][0]
    b = kernel_terms(batch, slow, prm)["seconds"][0]
    assert a >= 1.6e-5
    # (one 64-key block's shared-memory traffic, operands, fill and query, is SM work: clocked)
    assert abs(a / b - 1.0) < 0.03


def test_prefill_tiles_resident_by_shared_memory():
    # an Ampere FlashAttention-2 tile (128 queries, one 64-key K and V stage) of head dim 128
    # takes 64 KB: two fit the A100's 164 KB, so 150 units of one tile wait once, not twice
    # (the measured A100 rows at isl 16 step every 216 units); MLA's 192/128 tile (88 KB)
    # fits once; a Hopper kernel is persistent, one tile an SM
    from dataclasses import replace

    fig = device_figures(load_hardware("A100-SXM-80GB"))
    hopper = replace(fig, compute_capability=9.0)
    prm = default_params("attention_prefill")
    prm.update(unit_latency_s=1e-5, call_latency_s=1e-7, pre_latency_s=0.0)
    for (d_qk, d_v), gap in (((128.0, 128.0), 1e-5), ((192.0, 128.0), 0.0)):
        batch, _ = _prefill("bf16", d_qk, d_v, isl=16.0, heads=150.0)
        a = kernel_terms(batch, fig, prm)["compute_s"][0]
        b = kernel_terms(batch, hopper, prm)["compute_s"][0]
        assert abs((b - a) - gap) < 2e-7


def test_a_packing_prefill_fills_its_tiles_with_the_query_heads_of_a_kv_head():
    # 16-token prompts, 64 query heads on one KV head: FlashAttention-3's pack_gqa (head_pack
    # 0) puts 8 heads x 16 positions in a 128-row tile, 8 tiles a sequence; a tile a query
    # head (head_pack 1, the prefill default) gives 64 tiles of 16 rows. Long prompts fill
    # every tile either way: the same units, the same time but the one-head kernel's tail (a
    # longest tile after its 3,972 waves, _causal_tail_s)
    fig = device_figures(load_hardware("H100-SXM"))
    prm = default_params("attention_prefill")
    prm.update(unit_latency_s=2e-6)

    def seconds(isl: float, pack: float) -> float:
        batch, _ = _prefill("bf16", 128.0, 128.0, isl=isl, heads=64.0)
        shape = dict(batch.shape, batch=np.array([128.0]), n_kv=np.array([1.0]))
        shape["head_pack"] = np.array([pack])
        b = KernelBatch("attention_prefill", "bf16", batch.flops * 128, batch.bytes, batch.calls,
                        shape)  # fmt: skip
        return kernel_terms(b, fig, prm)["seconds"][0]

    assert seconds(16.0, 0.0) < seconds(16.0, 1.0) / 3.0
    assert 1.0 < seconds(8192.0, 1.0) / seconds(8192.0, 0.0) < 1.001
    # the default (no head_pack) is a tile a query head
    batch, _ = _prefill("bf16", 128.0, 128.0, isl=16.0, heads=64.0)
    with_one = KernelBatch("attention_prefill", "bf16", batch.flops, batch.bytes, batch.calls,
                           dict(batch.shape, head_pack=np.array([1.0])))  # fmt: skip
    assert (
        kernel_terms(batch, fig, prm)["seconds"][0]
        == kernel_terms(with_one, fig, prm)["seconds"][0]
    )


def test_only_blackwell_kernels_take_exponentials_faster_than_the_sfus():
    # eff_exp above 1 (exponentials on the FMA pipes too) speeds a B200 prompt bound by its
    # exponentials; on H100 the SFUs' rate is the most any fit gives
    prm = default_params("attention_prefill")
    prm.update(eff_compute=1.0, sfu_overlap=16.0, unit_latency_s=0.0, call_latency_s=1e-7)
    for name, faster in (("B200", True), ("H100-SXM", False)):
        fig = device_figures(load_hardware(name))
        batch, _ = _prefill("bf16", 64.0, 64.0, isl=16384.0)
        one = kernel_terms(batch, fig, dict(prm, eff_exp=1.0))["compute_s"][0]
        more = kernel_terms(batch, fig, dict(prm, eff_exp=1.5))["compute_s"][0]
        if faster:
            assert more < 0.9 * one
        else:
            assert more == one


def test_blackwells_fp8_prompt_kernel_takes_its_own_exponential_rate():
    # Blackwell's fp8 prompt kernel (no variant) runs its exponentials at
    # FP8_PROMPT_TCGEN05_EXP SFU rates, eff_exp a share of it (at most 1: a fit above 1 adds
    # nothing), and its products at FP8_PROMPT_TCGEN05_RATE of Hopper's reach; bf16 keeps
    # eff_exp as fitted
    from mlacalc.timemodel import attention_time

    prm = default_params("attention_prefill")
    prm.update(eff_compute=1.0, sfu_overlap=16.0, unit_latency_s=0.0, call_latency_s=1e-7)
    fig = device_figures(load_hardware("B200"))
    batch, _ = _prefill("fp8", 128.0, 128.0, isl=16384.0)
    one = kernel_terms(batch, fig, dict(prm, eff_exp=1.0))["compute_s"][0]
    more = kernel_terms(batch, fig, dict(prm, eff_exp=1.5))["compute_s"][0]
    assert more == one
    slower = dict(prm, eff_exp=1.0 / attention_time.FP8_PROMPT_TCGEN05_EXP)
    assert kernel_terms(batch, fig, slower)["compute_s"][0] > 1.2 * one
    # products only (exponentials free): the fp8 products at 0.88 of the fp8 peak
    fast = dict(prm, eff_exp=1.0, sfu_overlap=16.0)
    big, _ = _prefill("fp8", 256.0, 256.0, isl=16384.0)
    t = kernel_terms(big, fig, fast)["compute_s"][0]
    flops = float(big.flops[0])
    assert t >= flops / (attention_time.FP8_PROMPT_TCGEN05_RATE * fig.peak("fp8"))


def test_a_causal_prompt_ends_a_longest_tile_after_its_balanced_time():
    # one 16,384-token causal prompt a query head, 128 tiles a head on H100's 132 SMs; the
    # last tile walks all 128 key blocks, near twice the mean. A kernel that takes its tiles in
    # launch order (TensorRT-LLM's FMHA, head_pack 1) ends a longest tile after the balanced
    # time; FlashAttention-3 (head_pack 0) launches the longest first: a longest tile where its
    # waves are shorter. One head to two took 2.0x (a wave of the mean tile to two) for both
    # before; now about 1.44x and 1.24x (the shared-memory operand reads, a wave's, doubling
    # in both). Tiles of one length (no causal mask) keep the waves: 2.0x
    fig = device_figures(load_hardware("H100-SXM"))
    prm = default_params("attention_prefill")
    prm.update(eff_compute=1.0, eff_exp=1.0, sfu_overlap=16.0, unit_latency_s=0.0)

    def compute(heads: float, pack: float, causal: float = 1.0) -> float:
        batch, _ = _prefill("bf16", 128.0, 128.0, isl=16384.0, heads=heads)
        flops = batch.flops * (2.0 if causal == 0 else 1.0)
        shape = dict(batch.shape, head_pack=np.array([pack]), causal=np.array([causal]))
        b = KernelBatch("attention_prefill", "bf16", flops, batch.bytes, batch.calls, shape)
        return kernel_terms(b, fig, prm)["compute_s"][0]

    assert 1.35 < compute(2.0, 1.0) / compute(1.0, 1.0) < 1.55
    assert 1.15 < compute(2.0, 0.0) / compute(1.0, 0.0) < 1.3
    assert abs(compute(2.0, 1.0, causal=0.0) / compute(1.0, 1.0, causal=0.0) - 2.0) < 1e-6
    # one wave: the balanced time and a longest tile against the longest tile alone
    assert compute(1.0, 1.0) / compute(1.0, 0.0) > 1.3
    # 256 waves: the launch-order kernel's tail is a longest tile more, FlashAttention-3's none
    assert 1.002 < compute(264.0, 1.0) / compute(264.0, 0.0) < 1.01


def test_a_window_walking_prompt_tests_every_causal_block():
    # SGLang's Triton prompt kernel (the ``triton`` variant: attention_time.WINDOW_WALK_VARIANTS)
    # walks every causal block of a windowed prompt and tests the window's mask on each
    # (``mask_s`` a block walked); a banding kernel walks the band's blocks, two of them
    # masked. 16,384 against 8,192 tokens, 128-key window: the mask's time a unit doubles
    # (64.5 against 32.5 causal blocks a tile) under the walk, stays under the band
    fig = device_figures(load_hardware("B200"))
    prm = default_params("attention_prefill")
    prm.update(eff_compute=1.0, eff_exp=1.0, unit_latency_s=0.0, block_s=0.0)

    def mask_time(isl: float, variant: str) -> float:
        batch, _ = _prefill("bf16", 192.0, 192.0, isl=isl, heads=8.0)
        shape = dict(batch.shape, window=np.array([128.0]))
        b = KernelBatch(
            "attention_prefill", "bf16", batch.flops, batch.bytes, batch.calls, shape, variant
        )
        with_mask = kernel_terms(b, fig, dict(prm, mask_s=1e-6))["compute_s"][0]
        return with_mask - kernel_terms(b, fig, dict(prm, mask_s=0.0))["compute_s"][0]

    walk, band = mask_time(16384.0, "triton"), mask_time(16384.0, "")
    assert walk / band > 25.0  # 64.5 blocks tested a tile against the band's 2 edges
    # twice the tokens: the band's mask time follows the waves of units (7 against 4 on 148
    # SMs), the walk's the waves times the causal blocks a tile (64.5 against 32.5)
    waves = band / mask_time(8192.0, "")
    assert abs(waves - 7.0 / 4.0) < 1e-6
    assert abs(walk / mask_time(8192.0, "triton") / waves - 64.5 / 32.5) < 1e-6
    # inside the window (128 tokens) the walking kernel tests its one block, the band none
    assert mask_time(128.0, "triton") > 0.0 and mask_time(128.0, "") == 0.0


def test_blackwells_bf16_prompt_tile_halves_at_head_dim_512():
    # a 128-query tile with one 128-key K and V block needs (128 x 512 + 2 x 128 x 512) x 2
    # bytes at bf16 head dim 512, 384 KB of B200's 228: the tile runs 64 query rows, which
    # reads each K/V block from shared memory twice as often a FLOP. fp8 at 512 and bf16 at
    # 256 hold 192 KB: 128 rows. Hopper's kernels keep their tile
    from mlacalc.timemodel import attention_time

    b200 = device_figures(load_hardware("B200"))
    h100 = device_figures(load_hardware("H100-SXM"))

    def rows(dtype: str, d: float, fig) -> float:
        batch, _ = _prefill(dtype, d, d)
        q, k = attention_time._wide_head_tiles(batch, fig, np.array([128.0]), np.array([128.0]))
        assert k[0] == 128.0
        return float(q[0])

    assert rows("bf16", 512.0, b200) == attention_time.WIDE_HEAD_TILE_ROWS == 64.0
    assert rows("fp8", 512.0, b200) == 128.0
    assert rows("bf16", 256.0, b200) == 128.0
    assert rows("bf16", 512.0, h100) == 128.0
    # the products' time (exponentials free, no waits) grows by the doubled operand reads
    prm = default_params("attention_prefill")
    prm.update(eff_compute=1.0, eff_exp=1e3, sfu_overlap=16.0, unit_latency_s=0.0)
    prm.update(block_s=0.0, call_latency_s=1e-7)
    wide, _ = _prefill("bf16", 512.0, 512.0, isl=16384.0)
    half, _ = _prefill("bf16", 256.0, 256.0, isl=16384.0)
    ratio = (
        kernel_terms(wide, b200, prm)["compute_s"][0]
        / kernel_terms(half, b200, prm)["compute_s"][0]
    )
    assert ratio > 2.3  # twice the FLOPs and twice the operand reads a FLOP (was 2.0)


def test_tritons_wide_head_prompt_tile_is_hoppers_alone():
    # SGLang's Triton prompt kernel runs 64-row query tiles past head dim 256, read from H100's
    # rows only: Hopper (H100, H200) cuts the tile, A100, MI300X and an RTX 4090 (compute
    # capability 8.9, no table) keep theirs, and head dim 256 keeps 128 rows on Hopper too
    from mlacalc.timemodel import attention_time

    def rows(device: str, d: float, variant: str = "triton") -> float:
        fig = device_figures(load_hardware(device))
        batch = causal_prompt_batch("attention_prefill", "bf16", 8192.0, 8.0, d, d, variant)
        q, k = attention_time._wide_head_tiles(batch, fig, np.array([128.0]), np.array([128.0]))
        assert k[0] == 128.0
        return float(q[0])

    assert rows("H100-SXM", 512.0) == rows("H200", 512.0) == 64.0
    assert rows("H100-SXM", 512.0, "triton_upcast") == 64.0
    assert rows("H100-SXM", 256.0) == 128.0
    for device in ("A100-SXM-80GB", "MI300X", "RTX-4090"):
        assert rows(device, 512.0) == 128.0, device


def test_a_causal_band_starts_as_a_causal_triangle():
    # the tiles of a sliding window's first queries meet only the blocks up to their last
    # query: 10,240 tokens under an 8,192-key window, 80 tiles of 128 queries, the first 65
    # meeting 1..65 blocks and the last 15 the band's 65: 39 a tile, not 65. Past a long
    # prompt the mean nears the band's (16,384 tokens: 48.75), a 128-key window's 2 blocks
    # from the second tile on (512 tokens: 1.75); a non-causal band takes its whole width
    from mlacalc.timemodel.attention_time import band_tile_blocks

    q = np.array([10240.0, 16384.0, 512.0, 10240.0])
    got = band_tile_blocks(
        q, q, np.array([65.0, 65.0, 2.0, 65.0]), 128.0, 128.0, np.array([1.0, 1.0, 1.0, 0.0])
    )
    assert np.allclose(got, [39.0, 48.75, 1.75, 65.0])
    # after a cached prefix a chunk's tiles start further in: 1,024 cached keys and 1,024
    # new queries under a 1,024-key window (9 blocks): tiles meet 9, 9, ... blocks
    assert band_tile_blocks(1024.0, 2048.0, 9.0, 128.0, 128.0, 1.0) == 9.0

    # the time follows: a windowed causal prompt of 10,240 tokens under 8,192 keys takes
    # about the unwindowed prompt's time (96% of its pairs), not 1.6 times it
    fig = device_figures(load_hardware("H100-SXM"))
    prm = default_params("attention_prefill")
    prm.update(eff_compute=1.0, eff_exp=1.0, unit_latency_s=0.0)

    def compute(window: float) -> float:
        batch, pairs = _prefill("bf16", 128.0, 128.0, isl=10240.0, heads=32.0)
        if window:
            w = window
            capped = w * (w + 1) / 2 + (10240.0 - w) * w
            batch = KernelBatch(
                "attention_prefill",
                "bf16",
                batch.flops * capped / (pairs / 32.0),
                batch.bytes,
                batch.calls,
                dict(batch.shape, window=np.array([w])),
            )
        return kernel_terms(batch, fig, prm)["compute_s"][0]

    assert 0.85 < compute(8192.0) / compute(0.0) < 1.0


def _short_prompts(q: list[float], group: list[float], hd: list[float], pack: float = 0.0):
    """Prompts of ``q`` tokens, ``group`` query heads on one KV head, head dim ``hd``
    (broadcast), two sequences, FlashAttention-3's packing (``head_pack`` 0) by default."""
    q, group, hd = np.broadcast_arrays(*(np.asarray(x, dtype=float) for x in (q, group, hd)))
    n = q.size
    shape = {
        "batch": np.full(n, 2.0),
        "q_len": q,
        "kv_len": q,
        "n_heads": group,
        "n_kv": np.ones(n),
        "head_dim_qk": hd,
        "head_dim_v": hd,
        "window": np.zeros(n),
        "causal": np.ones(n),
        "head_pack": np.full(n, pack),
    }
    flops = 2.0 * 2.0 * group * q * (q + 1) / 2 * 2 * hd
    return KernelBatch("attention_prefill", "bf16", flops, np.full(n, 1e5), np.ones(n), shape)


def test_flash_attention_3s_prompt_of_few_packed_rows_runs_one_warpgroup():
    # FlashAttention-3's prompt tile is one MMA warpgroup's 64 rows where the packed rows
    # (tokens x query heads a KV head) are at most 64 and the head dim at most 128: such a call
    # waits one_wg_s less; 65 rows and more, head dims 192 and 256, the one-head tiles
    # (head_pack 1), a variant, MLA's prompt kind and Blackwell's kernels wait as before
    from mlacalc.timemodel import attention_time
    from mlacalc.timemodel.terms import fit_params

    h100 = device_figures(load_hardware("H100-SXM"))
    b200 = device_figures(load_hardware("B200"))
    save = 1.5e-6
    prm = default_params("attention_prefill")
    prm.update(unit_latency_s=2e-6, call_latency_s=6e-6)
    q = [16.0, 16.0, 32.0, 64.0, 1.0, 1.0, 16.0, 16.0, 65.0]
    group = [4.0, 5.0, 2.0, 1.0, 64.0, 96.0, 4.0, 4.0, 1.0]
    hd = [128.0, 128.0, 64.0, 64.0, 128.0, 128.0, 192.0, 256.0, 128.0]
    want = np.array([1, 0, 1, 1, 1, 0, 0, 0, 0], dtype=bool)
    rows = _short_prompts(q, group, hd)
    assert np.array_equal(attention_time.fa3_one_warpgroup(rows, h100, 0.0), want)
    off = kernel_terms(rows, h100, prm)["extra_s"]
    on = kernel_terms(rows, h100, dict(prm, one_wg_s=save))["extra_s"]
    assert off - on == pytest.approx(want * save, rel=1e-9, abs=1e-15)
    # a class without it (the default) waits as before
    assert default_params("attention_prefill")["one_wg_s"] == 0.0
    assert "one_wg_s" in fit_params("attention_prefill", "bf16")
    for fig, batch in (
        (h100, _short_prompts(q, group, hd, pack=1.0)),
        (h100, dataclasses.replace(rows, variant="triton")),
        (h100, dataclasses.replace(rows, kind="mla_prefill")),
        (b200, rows),
    ):
        assert not np.any(attention_time.fa3_one_warpgroup(batch, fig, batch.shape["head_pack"]))


def test_sglangs_h100_prompts_of_few_packed_rows_read_as_the_rest():
    # SGLang's H100 FlashAttention-3 prompts at head dims 64 and 128, 16-128 tokens, no window
    # and up to 32 sequences x KV heads: those of at most 64 packed rows (one warpgroup's tile,
    # 175 rows a dtype) read +13.0% / +19.8% signed (bf16 / fp8) where the rest (865) read
    # +0.4% / +1.0% before one_wg_s (1.07 us bf16, 1.85 us fp8); with it +2.7% / +1.5%
    pytest.importorskip("pyarrow")  # reading parquet tables needs the measured extra
    from reference_data import MEASURED

    from mlacalc.measured.mapping import map_table
    from mlacalc.measured.observations import predict_mapped
    from mlacalc.measured.tables import load_measured
    from mlacalc.timemodel.profile import load_profile

    tables = load_measured(MEASURED / "h100_sxm", engine="sglang").tables
    t = next(x for x in tables if x.table == "context_attention_perf")
    c = t.columns
    rows = c["isl"] * c["num_heads"] / c["num_key_value_heads"]
    sel = (
        (c["kernel_source"].astype(str) == "fa3")
        & np.isin(c["head_dim"], [64, 128])
        & (c["isl"] >= 16)
        & (c["isl"] <= 128)
        & (c["window_size"] == 0)
        & (c["batch_size"] * c["num_key_value_heads"] <= 32)
    )
    pred = predict_mapped(map_table(t), "H100-SXM", load_profile("fit-h100-sxm-sglang"))
    err = pred / t.seconds - 1.0
    for dt in ("bfloat16", "fp8"):
        mine = sel & (c["kv_cache_dtype"].astype(str) == dt)
        one, rest = err[mine & (rows <= 64)], err[mine & (rows > 64)]
        assert len(one) >= 150 and len(rest) >= 150
        assert abs(np.median(one) - np.median(rest)) < 0.04, dt
        assert np.median(np.abs(one)) < 0.07, dt
