"""The kernel model on real model steps: kernels the product emits are timed by the class of the
kernel they describe, and the time moves the way the work does."""

from __future__ import annotations

import dataclasses
from itertools import pairwise

import numpy as np
import pytest

import mlacalc
from mlacalc.hardware import load_hardware
from mlacalc.kernels import Kernel, batches_of
from mlacalc.timemodel import batch_terms, class_params, load_profile, predict_kernels
from mlacalc.timemodel.model import kernel_terms


@pytest.mark.parametrize("device", ["H100-SXM", "A100-SXM-80GB", "L40S", "RTX-4090", "MI300X"])
@pytest.mark.parametrize("batch", [1, 8])
def test_sliding_window_decode_never_gets_faster_as_the_cache_grows(device, batch):
    """Gemma 3's window layers: the kernels that split the whole cache put the window's keys in
    its last parts, so a longer cache never shortens the walk or adds parts that stream it."""
    times = []
    for seq in (256, 512, 1024, 2048, 4096, 8192, 32768):
        r = mlacalc.predict_time("gemma-3-1b", device, "decode", seq, batch=batch, scope="model")
        times.append(sum(o.model_s for o in r.ops if o.name == "attention"))
    assert all(b >= a * 0.999 for a, b in pairwise(times)), times


def test_the_causal_convolution_of_linear_attention_is_a_streaming_kernel():
    """A depthwise conv of four taps per channel is not a batched GEMM of 1 x 1 tiles: it is
    timed as an element-wise kernel, a few microseconds a layer at one sequence."""
    r = mlacalc.predict_time("qwen3-next-80b-a3b", "H100-SXM", "decode", 4096, scope="model")
    conv = [o for o in r.ops if o.name == "linear_conv"]
    assert conv and all(o.kind == "elementwise" for o in conv)
    layers = 36  # Gated DeltaNet layers of Qwen3-Next-80B (3 in 4 of 48)
    assert sum(o.model_s for o in conv) / layers < 6e-6


@pytest.mark.parametrize("kv_dtype", ["bf16", "fp8"])
def test_mla_decode_kernel_takes_the_class_of_its_cache(kv_dtype):
    """The measured MLA decode classes follow the cache dtype (an fp8 cache: the fp8 kernel);
    a real step's kernel does too, and the fp8 class is the faster on H100."""
    from mlacalc.step import step_kernels

    ks = step_kernels("deepseek-v3", "decode", 8192, batch=64, kv_dtype=kv_dtype)
    (mla,) = [k for k in ks if k.kind == "mla_decode"]
    assert mla.dtype == kv_dtype
    kw = dict(batch=64, scope="attention_layer")
    t = {
        kv: sum(
            o.model_s
            for o in mlacalc.predict_time(
                "deepseek-v3", "H100-SXM", "decode", 8192, kv_dtype=kv, **kw
            ).ops
            if o.name == "attention"
        )
        for kv in ("bf16", "fp8")
    }
    assert t["fp8"] < t["bf16"]


@pytest.mark.parametrize("device", ["L40S", "RTX-4090", "H100-SXM", "A100-SXM-80GB"])
def test_a_collective_never_beats_its_link(device):
    """SM-issued stores can slow a transfer below the link's rate, never lift it above: on a
    device clocked above the reference the one-shot all-reduce still moves (n - 1) messages
    at no more than the link bandwidth, ideal and prediction alike."""
    hw = load_hardware(device)
    msg = 16e6
    k = Kernel(
        "ar",
        "all_reduce",
        "bf16",
        flops=0.0,
        bytes=msg,
        shape={"message_bytes": msg, "n_gpus": 2, "one_shot": 1},
    )
    (t,) = predict_kernels([k], hw)
    from mlacalc.timemodel.device import device_figures

    link = device_figures(hw).link_bytes_per_s
    assert t.seconds >= msg / link
    assert t.roofline_s >= msg / link * (1 - 1e-9)
    assert np.isfinite(t.seconds)


def test_fp8_weights_on_a_device_without_fp8_run_a_weight_only_gemm():
    """A100 has no fp8 tensor cores: a block-scaled fp8 checkpoint's GEMMs run a dequantizing
    weight-only kernel there (the w8a16 class, which splits K), not Hopper's block-scaled
    kernel walking all of K in one tile; H100 keeps the fp8 class."""

    k = Kernel(
        "kv_a_proj",
        "gemm",
        "fp8_block",
        flops=2 * 64 * 576 * 7168,
        bytes=576 * 7168 + 64 * 7168 * 2 + 64 * 576 * 2,
        shape={"m": 64, "n": 576, "k": 7168, "groups": 1},
    )

    ((_, batch),) = batches_of([k])
    a100, _ = batch_terms(batch, "A100-SXM-80GB")

    fig, prm, _ = class_params(load_hardware("A100-SXM-80GB"), load_profile(), "gemm", "w8a16", "")

    same = kernel_terms(dataclasses.replace(batch, dtype="w8a16"), fig, prm, scaled=True)
    assert a100["seconds"][0] == pytest.approx(same["seconds"][0])
    h100, _ = batch_terms(batch, "H100-SXM")
    assert "fp8" in load_hardware("H100-SXM").peak_flops_per_s
    assert h100["seconds"][0] < a100["seconds"][0]
