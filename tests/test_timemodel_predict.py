"""Roofline predictions: by hand, fused against unfused, bounds, calibration, launch counts."""

import pytest

import mlacalc
from mlacalc import InvalidArgumentError, UnknownHardwareError
from mlacalc.cost.model_step import step_kernels
from mlacalc.hardware.catalogue import measured_sets
from mlacalc.timemodel.predict import LAUNCHES, Calibration, predict_time


def test_fused_decode_by_hand():
    """Llama-3-8B, one layer, decode at 4096 keys, batch 1, H100-SXM: every kernel memory-bound."""
    p = predict_time("llama-3-8b", "H100-SXM", "decode", 4096, 1, mode="fused", profile="roofline")
    bw, lat = 3350e9, 5e-6
    d, kv = 4096, 1024
    weights = 2 * (d * d + 2 * d * kv + d * d)  # bf16 q, k+v, o
    io = 2 * (d + d * 2 + 2 * kv) + 2 * (d + d)  # activations in and out of the three GEMMs
    new_rows = 2 * 2 * kv  # the token's K and V written to the cache
    core = 2 * (d + 4096 * 2 * kv + d)  # q in, K and V of 4096 keys, o out
    expected = (weights + io + new_rows + core) / bw + 4 * lat
    assert p.seconds == pytest.approx(expected, rel=1e-12)
    assert p.bound == "memory" and len(p.ops) == 4


@pytest.mark.parametrize(
    "name", ["deepseek-v3", "deepseek-v2-lite", "llama-3-70b", "gpt2", "mistral-7b"]
)
@pytest.mark.parametrize(
    "phase,S,B", [("decode", 8192, 16), ("prefill", 2048, 1), ("decode", 512, 1)]
)
def test_fused_is_faster_than_unfused(name, phase, S, B):
    impls = (
        [None, "naive", "compressed", "absorbed", "absorbed_merged"]
        if mlacalc.load_model(name).is_mla
        else [None]
    )
    for hw in ("H100-SXM", "RTX-4090"):
        for impl in impls:
            # the kernel model is calibrated on the kernels serving engines run (the default
            # implementation); every implementation keeps the order under the plain roofline
            profile = None if impl is None else "roofline"
            fused = predict_time(name, hw, phase, S, B, impl=impl, mode="fused", profile=profile)
            unfused = predict_time(
                name, hw, phase, S, B, impl=impl, mode="unfused", profile=profile
            )
            assert fused.seconds < unfused.seconds and fused.bytes <= unfused.bytes
            assert (
                fused.flops
                == unfused.flops
                == mlacalc.attention_flops(
                    mlacalc.load_model(name).with_changes(num_hidden_layers=1),
                    phase,
                    S,
                    B,
                    impl=impl,
                )
            )


def test_bounds_and_calibration():
    decode = predict_time("deepseek-v3", "H100-SXM", "decode", 4096, 1)
    prefill = predict_time("deepseek-v3", "H100-SXM", "prefill", 4096, 1)
    assert decode.bound == "memory" and prefill.bound == "compute"
    cal = Calibration(
        matmul_flops_per_s={"bf16": 500e12},
        copy_bytes_per_s=2e12,
        launch_latency_s=1e-5,
        gemv_bytes_per_s={"bf16": 1e12},
    )
    slow = predict_time("deepseek-v3", "H100-SXM", "prefill", 4096, 1, calibration=cal)
    assert slow.calibrated and slow.seconds > prefill.seconds
    assert slow.peak_flops_per_s == 500e12


def test_model_scope_adds_ffn_and_head():
    layer = predict_time("deepseek-v3", "H200", "decode", 4096, 32)
    model = predict_time(
        "deepseek-v3", "H200", "decode", 4096, 32, scope="model", weight_dtype="fp8"
    )
    names = {o.name for o in model.ops}
    ffn = {"router", "routed_experts", "shared_experts_up", "shared_experts_down"}
    assert ffn | {"dense_ffn_up", "dense_ffn_down", "lm_head"} <= names
    assert model.seconds > 61 * layer.seconds * 0.5
    # the model step is the step's kernels (mlacalc.cost.model_step), each timed by the kernel model
    kernels = step_kernels("deepseek-v3", "decode", 4096, 32, weight_dtype="fp8", act_dtype="bf16")
    assert [o.name for o in model.ops] == [k.name for k in kernels]
    assert model.bytes == sum(k.bytes * k.calls for k in kernels)
    # the plain roofline bound fuses element-wise work into its neighbours
    plain = predict_time(
        "deepseek-v3",
        "H200",
        "decode",
        4096,
        32,
        scope="model",
        weight_dtype="fp8",
        profile="roofline",
    )
    big = [k for k in kernels if k.kind != "elementwise"]
    assert [o.name for o in plain.ops] == [k.name for k in big]
    assert plain.flops == sum(k.flops * k.calls for k in big)
    dense = predict_time("llama-3-8b", "H100-SXM", "decode", 4096, 8, scope="model")
    assert "routed_experts" not in {o.name for o in dense.ops}


def test_skinny_products_are_penalised_on_gpus_only():
    batched = predict_time(
        "deepseek-v3",
        "H100-SXM",
        "decode",
        4096,
        2,
        impl="absorbed",
        mode="unfused",
        profile="roofline",
    )
    pv = next(o for o in batched.ops if o.name == "pv")
    assert pv.efficiency == pytest.approx(
        8 / 132
    )  # 2 x [128 x S] @ [S x 512]: 2 x 4 output tiles, no split
    single = predict_time(
        "deepseek-v3",
        "H100-SXM",
        "decode",
        4096,
        1,
        impl="absorbed",
        mode="unfused",
        profile="roofline",
    )
    pv = next(o for o in single.ops if o.name == "pv")
    assert pv.efficiency == pytest.approx(32 / 132)  # one GEMM: split-K by 8 (K = 4096 / 512)
    cpu = predict_time(
        "deepseek-v3",
        f"measured:{measured_sets()[0]}",
        "decode",
        4096,
        1,
        impl="absorbed",
        mode="unfused",
        dtype="fp32",
    )
    assert all(o.efficiency == 1.0 for o in cpu.ops)


def test_kernel_model_by_default_roofline_as_the_ideal():
    """GPUs are predicted by the calibrated kernel model; the plain bound is kept beside it."""
    p = predict_time("llama-3-8b", "H100-SXM", "decode", 4096, 1)
    plain = predict_time("llama-3-8b", "H100-SXM", "decode", 4096, 1, profile="roofline")
    assert p.profile == "default" and plain.profile == "roofline"
    assert p.calibration.startswith("calibrated on") and "H100-SXM" in p.calibration
    # the ideal of the same kernels: every kernel's max(FLOPs / peak, bytes / bandwidth)
    ideal = sum(max(o.flops / 989.5e12, o.bytes / 3350e9) for o in p.ops)
    assert p.roofline_s == pytest.approx(ideal, rel=1e-9)
    assert p.seconds > p.roofline_s
    assert all(o.seconds >= o.roofline_s for o in p.ops)
    h200 = predict_time("llama-3-8b", "H200", "decode", 4096, 1)
    assert "H200 by datasheet ratios" in h200.calibration
    assert h200.seconds < p.seconds  # more bandwidth, a memory-bound step
    d = p.to_dict()
    assert d["profile"] == "default" and d["roofline_s"] == p.roofline_s
    assert {"roofline_s", "calibration"} <= set(d["ops"][0])


def test_unfused_pays_the_dispatch_of_every_op():
    """Eager mode: each op a calibrated kernel, never shorter than the CPU takes to issue it."""
    lat = 7e-6
    p = predict_time("gpt2", "H100-SXM", "decode", 64, 1, mode="unfused", launch_latency_s=lat)
    fused = predict_time("gpt2", "H100-SXM", "decode", 64, 1)
    assert p.seconds >= LAUNCHES[("mha", False, True)] * lat * 0.999
    assert p.seconds > fused.seconds
    assert p.flops == fused.flops


def test_roofline_bad_input():
    with pytest.raises(InvalidArgumentError, match="mode"):
        predict_time("gpt2", "H100-SXM", "decode", 10, mode="fast")
    with pytest.raises(InvalidArgumentError, match="scope"):
        predict_time("gpt2", "H100-SXM", "decode", 10, scope="gpu")
    with pytest.raises(UnknownHardwareError):
        predict_time("gpt2", "H300", "decode", 10)


def test_launch_counts_match_the_reference_layers():
    """LAUNCHES holds how many ATen ops each reference forward dispatches; recount them."""
    torch = pytest.importorskip("torch")
    from torch.utils._python_dispatch import TorchDispatchMode

    from mlacalc.bench.torch_layers import layer_for_model
    from mlacalc.cost.engine import model_layer_key

    views = {
        "view",
        "_unsafe_view",
        "t",
        "transpose",
        "permute",
        "expand",
        "slice",
        "select",
        "split",
        "split_with_sizes",
        "unsqueeze",
        "reshape",
        "alias",
        "detach",
        "as_strided",
        "unbind",
        "_reshape_alias",
        "squeeze",
        "lift_fresh",
        "narrow",
    }

    class Count(TorchDispatchMode):
        n = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func.overloadpacket.__name__ not in views:
                Count.n += 1
            return func(*args, **(kwargs or {}))

    v3 = mlacalc.load_model("deepseek-v3").with_changes(
        hidden_size=64,
        num_attention_heads=4,
        num_key_value_heads=4,
        kv_lora_rank=32,
        q_lora_rank=16,
        qk_nope_head_dim=8,
        qk_rope_head_dim=4,
        v_head_dim=8,
    )
    models = [
        v3,
        v3.with_changes(q_lora_rank=None),
        mlacalc.load_model("llama-3-8b").with_changes(
            hidden_size=64, num_attention_heads=4, num_key_value_heads=2, head_dim=8
        ),
        mlacalc.load_model("gpt2").with_changes(
            hidden_size=32, num_attention_heads=4, num_key_value_heads=4, head_dim=8
        ),
    ]
    for model in models:
        for impl in (
            ["naive", "compressed", "absorbed", "absorbed_merged"] if model.is_mla else [None]
        ):
            layer = layer_for_model(model, impl)
            if impl == "absorbed_merged":
                layer.merge_weights()
            for q, S in ((1, 8), (8, 8), (3, 8)):
                cache = layer.empty_cache(1, capacity=S)
                cache.used = S - q
                x = torch.randn(1, q, model.hidden_size)
                Count.n = 0
                with torch.no_grad(), Count():
                    layer(x, cache, start=S - q)
                key = (model_layer_key(model, impl or "standard"), model.family != "gpt2", q == 1)
                assert LAUNCHES[key] == Count.n, key


def test_a_named_device_is_read_again_when_its_file_content_changes(monkeypatch):
    """The per-name hardware cache is keyed by the file's content, not its modification time
    (a rewrite within the file system's time resolution kept the old spec)."""
    from mlacalc.timemodel import predict as predict_module

    reads = []

    def counted(name):
        reads.append(name)
        return mlacalc.load_hardware(name)

    monkeypatch.setattr(predict_module, "_HARDWARE", {})
    monkeypatch.setattr(predict_module, "load_hardware", counted)
    first = predict_module._hardware_of("H100-SXM")
    assert predict_module._hardware_of("H100-SXM") is first and len(reads) == 1  # remembered
    spec, origin, _ = predict_module._HARDWARE["H100-SXM"]
    predict_module._HARDWARE["H100-SXM"] = (spec, origin, b"another content's digest")
    assert predict_module._hardware_of("H100-SXM") == first and len(reads) == 2  # read again


def test_a_prediction_says_whether_its_profile_was_fitted_on_the_device():
    """``calibrated`` says a fitted profile predicted the kernels; ``device_fitted`` whether it
    was fitted on this device (a new-user trial read ``calibrated: true`` on a GB200 as a
    measured device: the B200 fit predicts it by datasheet ratios)."""
    from mlacalc import predict_time

    gb = predict_time("deepseek-v3", "GB200", "decode", 4096, 8, scope="model")
    b2 = predict_time("deepseek-v3", "B200", "decode", 4096, 8, scope="model")
    bound = predict_time(
        "deepseek-v3", "B200", "decode", 4096, 8, scope="model", profile="roofline"
    )
    assert gb.calibrated and not gb.device_fitted and "by datasheet ratios" in gb.calibration
    assert b2.calibrated and b2.device_fitted and b2.to_dict()["device_fitted"] is True
    assert not bound.calibrated and not bound.device_fitted
