"""The kernel model on real model steps: kernels the product emits are timed by the class of the
kernel they describe, and the time moves the way the work does."""

from __future__ import annotations

import dataclasses
from itertools import pairwise

import numpy as np
import pytest

import mlacalc
from mlacalc.hardware.catalogue import load_hardware
from mlacalc.timemodel.kernel_time import batch_terms, class_params, predict_kernels
from mlacalc.timemodel.profile import load_profile
from mlacalc.timemodel.terms import kernel_terms
from mlacalc.words.kernels import Kernel, batches_of


@pytest.mark.parametrize("device", ["H100-SXM", "A100-SXM-80GB", "L40S", "RTX-4090", "MI300X"])
@pytest.mark.parametrize("batch", [1, 8])
def test_sliding_window_decode_never_gets_faster_as_the_cache_grows(device, batch):
    """Gemma 3's window layers: the kernels that split the whole cache put the window's keys in
    its last parts, so a longer cache never shortens the walk or adds parts that stream it;
    within 1%: TensorRT-LLM's Hopper-and-older decode splits a part at 32,768 key elements
    (539c1c6: 128 keys at head dim 256), so at 256-2,048 keys the window's keys take more parts
    as the cache grows (0.2-0.6% faster, was within 0.1%)."""
    times = []
    for seq in (256, 512, 1024, 2048, 4096, 8192, 32768):
        r = mlacalc.predict_time("gemma-3-1b", device, "decode", seq, batch=batch, scope="model")
        times.append(sum(o.model_s for o in r.ops if o.name == "attention"))
    # (A100, batch 8: TensorRT-LLM's bf16 grouped decode runs MMHA at 256 keys and its XQA
    # from 512, its block threshold, attention_time.xqa_dispatched: a switch of kernel, 2.3%
    # faster here, which H100's rows show too: 15.3-15.8 us at 8 sequences of 512 keys, 11.9-12.4
    # at 16)
    start = 1 if (device, batch) == ("A100-SXM-80GB", 8) else 0
    assert all(b >= a * 0.99 for a, b in pairwise(times[start:])), times


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
    from mlacalc.cost.model_step import step_kernels

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


@pytest.mark.parametrize(
    "device, cc, generation",
    [
        ("H100-SXM", 9.0, "sm90"),
        ("H200", 9.0, "sm90"),
        ("H800", 9.0, "sm90"),
        ("H100-PCIe", 9.0, "sm90"),
        ("A100-SXM-80GB", 8.0, "sm80"),
        ("L40S", 8.9, "sm80"),
        ("RTX-4090", 8.9, "sm80"),
        ("B200", 10.0, "sm90"),
        ("MI300X", 0.0, "other"),
    ],
)
def test_the_device_architecture_comes_from_the_catalogue(device, cc, generation):
    """The catalogue gives each NVIDIA device its compute capability (sourced); the kernels a
    device runs where the measured generations differ are chosen by one rule on it
    (tensor_core_generation), not by whether the device has fp8 tensor cores."""
    from mlacalc.timemodel.device import device_figures

    hw = load_hardware(device)
    fig = device_figures(hw)
    assert fig.compute_capability == cc and fig.tensor_core_generation == generation
    assert fig.sm90_or_later is (generation == "sm90")
    assert fig.architecture and hw.field_sources.get("architecture")
    if cc:
        assert hw.field_sources.get("compute_capability")


@pytest.mark.parametrize(
    "text, generation",
    [
        ("architecture: Ampere\n", "sm80"),  # no capability: the architecture's
        ("architecture: Hopper\n", "sm90"),
        ("compute_capability: 12.0\n", "sm80"),  # consumer Blackwell: no warp-group MMA
        ("", "other"),  # neither: stated as unvalidated, the large-tile rules
        ("vendor: amd\ncompute_capability: 9.4\n", "other"),  # ROCm's gfx942 is not sm90
    ],
)
def test_a_user_file_picks_its_kernels_by_one_rule(tmp_path, text, generation):
    """A user file without a compute capability takes its architecture's; another vendor's
    capability never selects NVIDIA kernels; every rule (prefill MMA rows and resident tiles,
    MLA operand reads, Hopper's fp8 decode) follows the same generation."""
    from mlacalc.timemodel.device import device_figures, mla_decode_kernel
    from mlacalc.timemodel.shared import mma_rows as _mma_rows

    path = tmp_path / "gpu.yaml"
    path.write_text(
        "name: MyGPU\npeak_tflops: {bf16: 300}\nmemory_bandwidth_gb_per_s: 2000\n"
        "memory_gb: 80\nsm_count: 108\nsource: my lab\n" + text
    )
    fig = device_figures(load_hardware(path))
    assert fig.tensor_core_generation == generation
    sm80 = generation == "sm80"
    assert _mma_rows(fig) == (16.0 if sm80 else 64.0)
    assert mla_decode_kernel(fig)["operand_reads"] == (4.0 if sm80 else 1.0)
    assert fig.sm90_or_later is (generation == "sm90")


@pytest.mark.parametrize("device", ["L40S", "RTX-4090", "B200", "MI300X", "H100-SXM"])
def test_hoppers_fp8_decode_rules_follow_the_compute_capability(device):
    """An fp8-cache grouped decode (8 query heads a KV head, a 128-token window) runs Hopper's
    XQA rules (8-row tiles, window-only splits, fused RoPE) on compute capability 9.0 and later:
    the same device figures with the capability swapped predict another time."""
    hw = load_hardware(device)
    b, kv, heads, n_kv = 8, 8192, 32, 4
    k = Kernel(
        "attention",
        "attention_decode",
        "fp8",
        flops=4 * b * heads * 128 * 128,
        bytes=b * 128 * n_kv * 2 * 128,
        shape={
            "batch": b,
            "q_len": 1,
            "kv_len": kv,
            "n_heads": heads,
            "n_kv": n_kv,
            "head_dim_qk": 128,
            "head_dim_v": 128,
            "window": 128,
            "causal": 1,
            "kv_bytes": 1,
        },
    )
    ((_, batch),) = batches_of([k])
    fig, prm, _ = class_params(hw, load_profile(), "attention_decode", "fp8", "")
    swapped = dataclasses.replace(fig, compute_capability=8.9 if fig.sm90_or_later else 9.0)
    own = kernel_terms(batch, fig, prm, scaled=True)["seconds"][0]
    other = kernel_terms(batch, swapped, prm, scaled=True)["seconds"][0]
    if fig.vendor != "nvidia":  # another vendor's capability never selects NVIDIA kernels
        assert own == other
        return
    assert own != pytest.approx(other, rel=1e-3)
    # the whole-cache splits of the non-Hopper kernels cost more than Hopper's window splits
    assert bool(own > other) is (not fig.sm90_or_later)


@pytest.mark.parametrize(
    "device, reads",
    [("A100-SXM-80GB", 4.0), ("L40S", 4.0), ("H100-SXM", 1.0), ("B200", 1.0), ("MI300X", 1.0)],
)
def test_a_steps_mla_decode_runs_the_key_splitting_kernel_of_its_generation(device, reads):
    """A model step's MLA decode kernel splits keys on every device (the serving engines'
    kernels do: FlashMLA, FlashInfer, the Triton decode kernels), with the operand reads of the
    device's tensor-core generation (mma.sync: four 16-row warps, each reading every row). The
    non-splitting kernel is the one TensorRT-LLM 1.0 ran on the measured A100 rows only: at 4
    sequences (far fewer units than SMs) it is the slower one."""
    from mlacalc.cost.model_step import step_kernels
    from mlacalc.timemodel.device import mla_decode_kernel
    from mlacalc.timemodel.kernel_time import device_batch

    hw = load_hardware(device)
    assert mla_decode_kernel(hw) == {"kv_split": 1.0, "operand_reads": reads}
    assert mla_decode_kernel(hw, non_splitting=True)["kv_split"] == 0.0
    ks = step_kernels("deepseek-v3", "decode", 8192, batch=4, scope="attention_layer")
    (mla,) = [k for k in ks if k.kind == "mla_decode"]
    assert "kv_split" not in mla.shape  # the step names no device
    ((_, batch),) = batches_of([mla])
    run = device_batch(batch, hw)
    assert run.shape["kv_split"][0] == 1.0 and run.shape["operand_reads"][0] == reads
    p = mlacalc.predict_time("deepseek-v3", hw, "decode", 8192, batch=4)
    # the profile the step used: TensorRT-LLM's fit of the device where one ships (B200)
    fig, prm, _ = class_params(hw, load_profile(p.profile), "mla_decode", mla.dtype, "")
    (t,) = [o.model_s for o in p.ops if o.name == "attention"]
    assert t == pytest.approx(kernel_terms(run, fig, prm, scaled=True)["seconds"][0])
    walk = dict(run.shape, kv_split=np.array([0.0]))
    t_walk = kernel_terms(dataclasses.replace(batch, shape=walk), fig, prm, scaled=True)
    assert t < t_walk["seconds"][0]


def test_the_measured_mla_rows_carry_the_kernel_the_same_rule_gives():
    """The mapping labels the A100 and H100 MLA decode rows with the device rule's columns."""
    from pathlib import Path

    from mlacalc.measured import mapping
    from mlacalc.timemodel.device import mla_decode_kernel

    assert "mla_decode_kernel(" in Path(mapping.__file__).read_text(encoding="utf-8")
    a100 = load_hardware("a100_sxm")
    assert mla_decode_kernel(a100, non_splitting=True) == {"kv_split": 0.0, "operand_reads": 4.0}
    assert mla_decode_kernel(load_hardware("h100_sxm")) == {"kv_split": 1.0, "operand_reads": 1.0}


@pytest.mark.parametrize("device, run", [("B200", "nvfp4"), ("H100-SXM", "w4a16")])
def test_fp4_weights_run_one_class_in_predict_time_and_plan(device, run):
    """fp4 weights: the model step and the serving step name the fp4 class (one rule,
    mlacalc.words.dtypes.weight_gemm_class); the device decides the kernel for both paths alike:
    the fp4 GEMM where the tensor cores have fp4 (B200: NVFP4, the kernel its measured fp4 rows
    time, with its rules), else a dequantizing weight-only GEMM."""
    from mlacalc.cost.engine import as_model
    from mlacalc.cost.model_step import step_kernels
    from mlacalc.serving import StepModel, make_layout
    from mlacalc.timemodel.kernel_time import device_batch
    from mlacalc.words.dtypes import resolve_kv_layout

    hw = load_hardware(device)
    m = as_model("llama-3-8b")
    ks = step_kernels(m, "decode", 4096, 16, weight_dtype="fp4", scope="model")
    gemms = {k.name: k for k in ks if k.kind == "gemm"}
    # the head kept bf16 as the checkpoint stores it, on both paths (kept_head_format)
    assert gemms.pop("lm_head").dtype == "bf16" and {k.dtype for k in gemms.values()} == {"fp4"}
    lay = make_layout(m, 1, tp=1, dp=1, ep=1)
    sm = StepModel(m, lay, "fp4", resolve_kv_layout("bf16"), hw)
    served = {k.name: k for k in sm.kernels(dec_B=16, dec_S=4096) if k.kind == "gemm"}
    assert sm.gemm_dtype == "fp4" and served["o_proj"].dtype == "fp4"
    assert served["lm_head"].dtype == "bf16"
    ((_, batch),) = batches_of([gemms["o_proj"]])
    assert device_batch(batch, hw).dtype == run
    # predict_time times o_proj as the kernel the device runs, as plan's predict_batch does
    p = mlacalc.predict_time(m, hw, "decode", 4096, batch=16, weight_dtype="fp4", scope="model")
    (t,) = [o for o in p.ops if o.name == "o_proj"]
    (ref,) = predict_kernels([gemms["o_proj"]], hw, p.profile)
    assert t.model_s == pytest.approx(ref.seconds)


@pytest.mark.parametrize("device, rate", [("B200", "fp4"), ("H100-SXM", "bf16")])
def test_the_roofline_of_fp4_weights_is_at_the_rate_of_the_kernel_that_runs(device, rate):
    """The plain roofline (profile="roofline") and the ideal reported beside a kernel-model
    prediction compute fp4-weight GEMMs at the fp4 rate where the device has fp4 tensor cores,
    else at the bf16 rate of the dequantizing kernel (never at the fp8 rate H100 has)."""
    from mlacalc.cost.model_step import step_kernels

    hw = load_hardware(device)
    (o,) = [
        k
        for k in step_kernels("llama-3-8b", "prefill", 4096, 4, weight_dtype="fp4")
        if k.name == "o_proj"
    ]
    (t,) = predict_kernels([o], hw)
    assert t.roofline_s == pytest.approx(
        max(o.flops / hw.peak(rate), o.bytes / hw.memory_bandwidth_bytes_per_s) * o.calls
    )
    p = mlacalc.predict_time(
        "llama-3-8b", hw, "prefill", 4096, 4, weight_dtype="fp4", profile="roofline"
    )
    (op,) = [x for x in p.ops if x.name == "o_proj"]
    assert op.compute_s == pytest.approx(o.flops / (hw.peak(rate) * op.efficiency))
