"""Hardware catalogue, roofline predictions, symbolic insight and the capacity planner."""

import math
from fractions import Fraction

import pytest

import mlacalc
from mlacalc import ConfigError, InvalidArgumentError
from mlacalc.hardware import UnknownHardwareError, load_hardware, measured_sets, shipped_hardware
from mlacalc.insight import absorption_crossover, compute_bound_seq_len, ridge_point
from mlacalc.planner import DoesNotFitError, plan
from mlacalc.roofline import LAUNCHES, Calibration, predict_time

# ---------------------------------------------------------------- hardware catalogue

PUBLISHED = {   # name: (dense bf16 TFLOP/s, fp8 TFLOP/s or None, bandwidth GB/s, memory GB) -- published-facts D, D.2
    "H100-SXM": (989.5, 1979.0, 3350, 80), "H100-PCIe": (756.5, 1513.0, 2000, 80), "H800": (989.0, 1979.0, 3350, 80),
    "H200": (990.0, 1979.0, 4800, 141), "B200": (2250.0, 4500.0, 7700, 180), "A100-SXM-80GB": (312.0, None, 2039, 80),
    "A100-PCIe-40GB": (312.0, None, 1555, 40), "L40S": (362.05, 733.0, 864, 48), "RTX-4090": (165.15, 330.3, 1008, 24),
    "RTX-4080": (97.5, 194.9, 716.8, 16), "MI300X": (1307.0, 2615.0, 5300, 192),
}


def test_catalogue_has_every_device():
    assert set(shipped_hardware()) == set(PUBLISHED)


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_catalogue_figures(name):
    hw = load_hardware(name)
    bf16, fp8, bw, mem = PUBLISHED[name]
    assert hw.peak("bf16") == pytest.approx(bf16 * 1e12, rel=1e-12)
    if fp8:
        assert hw.peak_flops_per_s["fp8"] == pytest.approx(fp8 * 1e12, rel=1e-12)
    else:
        assert "fp8" not in hw.peak_flops_per_s and hw.peak("fp8") == hw.peak("bf16")
    assert hw.memory_bandwidth_bytes_per_s == pytest.approx(bw * 1e9, rel=1e-12)
    assert hw.memory_bytes == mem * 10**9 and hw.source and hw.accumulate == "fp32"


def test_hardware_names_case_insensitive_and_unknown():
    assert load_hardware("h200") is load_hardware("H200")
    with pytest.raises(UnknownHardwareError) as info:
        load_hardware("H300")
    assert "H200" in str(info.value) and "Known" in str(info.value)


def test_user_hardware_file_and_errors(tmp_path):
    path = tmp_path / "my.yaml"
    path.write_text("name: MY-GPU\npeak_tflops: {bf16: 100}\nmemory_bandwidth_gb_per_s: 1000\nmemory_gb: 24\n"
                    "source: my lab\n")
    hw = load_hardware(path)
    assert hw.ridge_point == 100.0 and hw.memory_bytes == 24 * 10**9
    path.write_text("name: X\npeak_tflop: {bf16: 1}\nmemory_bandwidth_gb_per_s: 1\nmemory_gb: 1\nsource: s\n")
    with pytest.raises(ConfigError) as info:
        load_hardware(path)
    assert info.value.field == "peak_tflop" and "peak_tflops" in str(info.value)
    path.write_text("name: X\npeak_tflops: {bf16: -1}\nmemory_bandwidth_gb_per_s: 1\nmemory_gb: 1\nsource: s\n")
    with pytest.raises(ConfigError, match="positive"):
        load_hardware(path)


def test_measured_device_loads_from_its_sidecar():
    sets = measured_sets()
    assert sets
    hw = load_hardware(f"measured:{sets[0]}")
    assert hw.measured and hw.kind == "cpu" and hw.launch_latency_s > 0 and "fp32" in hw.peak_flops_per_s


def test_wrong_schema_sidecar(tmp_path):
    path = tmp_path / "x.json"
    path.write_text('{"schema": "something/else"}')
    with pytest.raises(ConfigError, match="mlacalc.bench/1"):
        load_hardware(path)
    with pytest.raises(ConfigError, match="mlacalc.bench/1"):
        mlacalc.validate([path])


# ---------------------------------------------------------------- roofline

def test_fused_decode_by_hand():
    """Llama-3-8B, one layer, decode at 4096 keys, batch 1 on H100-SXM: every kernel memory-bound."""
    p = predict_time("llama-3-8b", "H100-SXM", "decode", 4096, 1, mode="fused")
    bw, lat = 3350e9, 5e-6
    d, kv = 4096, 1024
    weights = 2 * (d * d + 2 * d * kv + d * d)                 # bf16 q, k+v, o
    io = 2 * (d + d * 2 + 2 * kv) + 2 * (d + d)                 # activations in and out of the three GEMMs
    new_rows = 2 * 2 * kv                                       # the token's K and V written to the cache
    core = 2 * (d + 4096 * 2 * kv + d)                          # q in, K and V of 4096 keys, o out
    expected = (weights + io + new_rows + core) / bw + 4 * lat
    assert p.seconds == pytest.approx(expected, rel=1e-12)
    assert p.bound == "memory" and len(p.ops) == 4


@pytest.mark.parametrize("name", ["deepseek-v3", "deepseek-v2-lite", "llama-3-70b", "gpt2", "mistral-7b"])
@pytest.mark.parametrize("phase,S,B", [("decode", 8192, 16), ("prefill", 2048, 1), ("decode", 512, 1)])
def test_fused_is_faster_than_unfused(name, phase, S, B):
    impls = [None, "naive", "compressed", "absorbed", "absorbed_merged"] if mlacalc.load_model(name).is_mla else [None]
    for hw in ("H100-SXM", "RTX-4090"):
        for impl in impls:
            fused = predict_time(name, hw, phase, S, B, impl=impl, mode="fused")
            unfused = predict_time(name, hw, phase, S, B, impl=impl, mode="unfused")
            assert fused.seconds < unfused.seconds and fused.bytes <= unfused.bytes
            assert fused.flops == unfused.flops == mlacalc.attention_flops(
                mlacalc.load_model(name).with_changes(num_hidden_layers=1), phase, S, B, impl=impl)


def test_bounds_and_calibration():
    decode = predict_time("deepseek-v3", "H100-SXM", "decode", 4096, 1)
    prefill = predict_time("deepseek-v3", "H100-SXM", "prefill", 4096, 1)
    assert decode.bound == "memory" and prefill.bound == "compute"
    cal = Calibration(matmul_flops_per_s={"bf16": 500e12}, copy_bytes_per_s=2e12, launch_latency_s=1e-5,
                      gemv_bytes_per_s={"bf16": 1e12})
    slow = predict_time("deepseek-v3", "H100-SXM", "prefill", 4096, 1, calibration=cal)
    assert slow.calibrated and slow.seconds > prefill.seconds
    assert slow.peak_flops_per_s == 500e12


def test_model_scope_adds_ffn_and_head():
    layer = predict_time("deepseek-v3", "H200", "decode", 4096, 32)
    model = predict_time("deepseek-v3", "H200", "decode", 4096, 32, scope="model", weight_dtype="fp8")
    names = {o.name for o in model.ops}
    assert {"routed_experts", "shared_experts", "router", "dense_ffn", "lm_head"} <= names
    assert model.seconds > 61 * layer.seconds * 0.5
    dense = predict_time("llama-3-8b", "H100-SXM", "decode", 4096, 8, scope="model")
    assert "routed_experts" not in {o.name for o in dense.ops}


def test_skinny_products_are_penalised_on_gpus_only():
    batched = predict_time("deepseek-v3", "H100-SXM", "decode", 4096, 2, impl="absorbed", mode="unfused")
    pv = next(o for o in batched.ops if o.name == "pv")
    assert pv.efficiency == pytest.approx(8 / 132)     # 2 x [128 x S] @ [S x 512]: 2 x 4 output tiles, no split
    single = predict_time("deepseek-v3", "H100-SXM", "decode", 4096, 1, impl="absorbed", mode="unfused")
    pv = next(o for o in single.ops if o.name == "pv")
    assert pv.efficiency == pytest.approx(32 / 132)    # one GEMM: split-K by 8 (K = 4096 / 512)
    cpu = predict_time("deepseek-v3", f"measured:{measured_sets()[0]}", "decode", 4096, 1, impl="absorbed",
                       mode="unfused", dtype="fp32")
    assert all(o.efficiency == 1.0 for o in cpu.ops)


def test_roofline_bad_input():
    with pytest.raises(InvalidArgumentError, match="mode"):
        predict_time("gpt2", "H100-SXM", "decode", 10, mode="fast")
    with pytest.raises(InvalidArgumentError, match="scope"):
        predict_time("gpt2", "H100-SXM", "decode", 10, scope="gpu")
    with pytest.raises(UnknownHardwareError):
        predict_time("gpt2", "H300", "decode", 10)


torch = pytest.importorskip("torch")


def test_launch_counts_match_the_reference_layers():
    """LAUNCHES holds how many ATen ops each reference forward dispatches; recount them."""
    from torch.utils._python_dispatch import TorchDispatchMode

    from mlacalc.bench.layers import layer_for_model
    from mlacalc.engine import _layer_key

    views = {"view", "_unsafe_view", "t", "transpose", "permute", "expand", "slice", "select", "split",
             "split_with_sizes", "unsqueeze", "reshape", "alias", "detach", "as_strided", "unbind", "_reshape_alias",
             "squeeze", "lift_fresh", "narrow"}

    class Count(TorchDispatchMode):
        n = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func.overloadpacket.__name__ not in views:
                Count.n += 1
            return func(*args, **(kwargs or {}))

    v3 = mlacalc.load_model("deepseek-v3").with_changes(hidden_size=64, num_attention_heads=4, num_key_value_heads=4,
                                                        kv_lora_rank=32, q_lora_rank=16, qk_nope_head_dim=8,
                                                        qk_rope_head_dim=4, v_head_dim=8)
    models = [v3, v3.with_changes(q_lora_rank=None),
              mlacalc.load_model("llama-3-8b").with_changes(hidden_size=64, num_attention_heads=4,
                                                           num_key_value_heads=2, head_dim=8),
              mlacalc.load_model("gpt2").with_changes(hidden_size=32, num_attention_heads=4, num_key_value_heads=4,
                                                     head_dim=8)]
    for model in models:
        for impl in (["naive", "compressed", "absorbed", "absorbed_merged"] if model.is_mla else [None]):
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
                key = (_layer_key(model, impl or "standard"), model.family != "gpt2", q == 1)
                assert LAUNCHES[key] == Count.n, key


# ---------------------------------------------------------------- insight

def test_ridge_point():
    assert ridge_point("H200").value == 990e12 / 4.8e12 == 206.25


def test_compute_bound_seq_len_deepseek_v3_h200():
    core, layer = compute_bound_seq_len("deepseek-v3", "H200", batch=1)
    # core kernel: 2 n_h S (2 d_c + d_rope) FLOPs over 2 (S (d_c + d_rope) + n_h (2 d_c + d_rope)) bytes = R
    R = Fraction(99000, 480)                              # 990 TFLOP/s over 4.8 TB/s
    by_hand = R * 2 * 128 * 1088 / (4 * 512 * 128 + 2 * 64 * 128 - R * 2 * 576)
    assert core.value == pytest.approx(float(by_hand), rel=1e-12) and round(core.value, 1) == 1403.6
    assert layer.value > core.value                       # weights lower the intensity at batch 1
    never = compute_bound_seq_len("deepseek-v3", "H100-SXM", batch=1)
    assert never[0].value is None and "never" in never[0].note       # 241.8 < ridge 295.4


def test_absorption_crossover():
    limit = absorption_crossover("deepseek-v3")
    assert limit.value == pytest.approx(512 * 256 / 768)
    at = absorption_crossover("deepseek-v3", 4096)
    assert at.value == pytest.approx(4096 * 512 * 256 / (4096 * 768 + 512 * 256))
    v3 = mlacalc.load_model("deepseek-v3")
    q = math.floor(at.value)
    # just below the crossover absorbed is cheaper, just above it is not
    assert (mlacalc.attention_flops(v3, "chunk", 4096, q_len=q, impl="absorbed")
            < mlacalc.attention_flops(v3, "chunk", 4096, q_len=q, impl="compressed"))
    assert (mlacalc.attention_flops(v3, "chunk", 4096, q_len=q + 1, impl="absorbed")
            > mlacalc.attention_flops(v3, "chunk", 4096, q_len=q + 1, impl="compressed"))
    with pytest.raises(InvalidArgumentError):
        absorption_crossover("llama-3-8b")


# ---------------------------------------------------------------- planner

def test_plan_deepseek_v3_fp8_on_8_h200_by_hand():
    """Weights per GPU at tp=8: replicated latent/query down-projections and norms, everything else / 8."""
    replicated_attn = 11_010_048 + 1_536 + 4_128_768 + 512
    split_attn = 187_107_328 - replicated_attn
    per_gpu = (61 * (replicated_attn + split_attn // 8) + 2 * 926_679_040 // 8 + 1_189_085_184 // 8
               + 2_554_331_136 // 8 + 106_445_312 + 881_664 + 653_908_770_816 // 8)
    assert per_gpu == 84_780_357_120                       # bytes: fp8 weights
    usable = 141 * 10**9 * 9 // 10
    for kv, per_token, sequences in (("bf16", 70_272, 4), ("fp8", 35_136, 9), ("fp8_ds_mla", 40_016, 8)):
        p = plan("deepseek-v3", "H200", 8, kv_dtype=kv, seq_len=131072)
        assert p.weights_per_gpu_bytes == per_gpu
        assert p.kv_bytes_per_token_per_gpu == per_token    # the latent is replicated on every TP rank
        assert p.kv_tokens_per_gpu == (usable - per_gpu) // per_token
        assert p.max_batch == sequences == (usable - per_gpu) // per_token // 131072
        assert p.binding == "kv capacity"


def test_plan_gqa_kv_split_and_replication():
    p8 = plan("llama-3-70b", "H100-SXM", 8, weight_dtype="fp8", seq_len=8192)
    assert p8.kv_bytes_per_token_per_gpu == 327_680 // 8            # one of 8 KV heads per rank
    p16 = plan("llama-3-70b", "H100-SXM", 16, weight_dtype="fp8", seq_len=8192)
    assert p16.kv_bytes_per_token_per_gpu == 327_680 // 8           # 16 ranks, 8 heads: replicated
    dp = plan("llama-3-70b", "H100-SXM", 8, tp=4, dp=2, weight_dtype="fp8", seq_len=8192)
    assert dp.kv_bytes_per_token_per_gpu == 327_680 // 4 and dp.max_batch % 2 == 0


def test_plan_pages_batch_and_throughput():
    p = plan("llama-3-8b", "H100-SXM", 1, seq_len=1000, page_size=16, batch=8)
    assert p.kv_tokens_per_gpu // 1008 == p.max_batch             # 1000 tokens occupy 63 pages of 16
    assert p.max_context == (p.kv_tokens_per_gpu // 8) // 16 * 16
    assert p.decode_tokens_per_s > 0 and p.binding in ("memory bandwidth", "compute")
    too_many = plan("llama-3-8b", "H100-SXM", 1, seq_len=131072, batch=10_000)
    assert too_many.binding == "kv capacity" and too_many.decode_batch == too_many.max_batch
    at_max = plan("llama-3-8b", "H100-SXM", 1, seq_len=131072, batch=too_many.max_batch)
    assert at_max.decode_tokens_per_s == too_many.decode_tokens_per_s


def test_plan_bad_input():
    with pytest.raises(InvalidArgumentError, match="does not divide the 128 attention heads"):
        plan("deepseek-v3", "H200", 3)
    with pytest.raises(InvalidArgumentError, match="does not divide the 256 routed experts"):
        plan("deepseek-v3", "H200", 8, ep=3)
    with pytest.raises(InvalidArgumentError, match="tp x dp"):
        plan("deepseek-v3", "H200", 8, tp=4, dp=4)
    with pytest.raises(DoesNotFitError, match="does not fit on 1 x H100-SXM"):
        plan("deepseek-v3", "H100-SXM", 1)
    with pytest.raises(InvalidArgumentError, match="no experts"):
        plan("llama-3-8b", "H100-SXM", 1, ep=2)
    with pytest.raises(InvalidArgumentError, match="memory_reserve"):
        plan("llama-3-8b", "H100-SXM", 1, memory_reserve=1.5)
    assert issubclass(DoesNotFitError, mlacalc.MlacalcError)


# ---------------------------------------------------------------- validation

#: the stated bound: the unfused roofline, calibrated by the ceilings of the same run, predicts
#: every committed measurement set with a median |error| of at most 25%
MEDIAN_ERROR_BOUND = 0.25


def test_committed_sets_are_predicted_within_the_stated_bound():
    sets = mlacalc.validate()
    assert sets
    for v in sets:
        assert v.median_abs_error <= MEDIAN_ERROR_BOUND, (v.name, v.median_abs_error)
        assert len(v.rows) >= 20 and v.skipped == 0
        for group, stats in v.groups.items():
            assert stats["median_abs_error"] <= 0.30, (v.name, group, stats)     # every implementation too
        for r in v.rows:
            assert r.predicted_s > 0 and r.flops > 0 and r.bytes > 0


def test_the_measured_gemm_sweep_is_what_closes_the_gap():
    """Predicting the same rows with the plain ceilings only (no GEMM sweep) is much worse:
    the calibration, not a fit to the rows, brings the error under the bound."""
    import csv
    import dataclasses
    import statistics

    from mlacalc.hardware import read_sidecar

    path = mlacalc.validation.default_measurement_files()[0]
    meta = read_sidecar(path)
    full = Calibration.from_measurements(meta)
    plain = dataclasses.replace(full, gemm_m_sweep={})
    hw = load_hardware(path)
    errors = {"full": [], "plain": []}
    for r in csv.DictReader(open(path.parent / meta["rows_file"])):
        impl = None if r["impl"] == "standard" else r["impl"]
        for name, cal in (("full", full), ("plain", plain)):
            p = predict_time(r["model"], hw, r["phase"], int(r["seq_len"]), int(r["batch"]), impl=impl,
                             mode="unfused", dtype=r["dtype"], calibration=cal)
            errors[name].append(abs(p.seconds / float(r["median_s"]) - 1))
    assert statistics.median(errors["full"]) < 0.75 * statistics.median(errors["plain"])
