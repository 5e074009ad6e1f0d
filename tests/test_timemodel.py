"""The kernel time model: API, physical terms, profiles and fitting."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mlacalc.hardware.catalogue import load_hardware
from mlacalc.measured.calibrate import calibrate
from mlacalc.timemodel.device import device_figures
from mlacalc.timemodel.fit import Observations, error_stats, fit_class
from mlacalc.timemodel.kernel_time import predict_batch, predict_kernels, roofline_seconds
from mlacalc.timemodel.profile import Profile, load_profile
from mlacalc.timemodel.terms import default_params, kernel_terms
from mlacalc.words.errors import ConfigError, InvalidArgumentError
from mlacalc.words.kernels import Kernel, KernelBatch, batches_of

#: a profile with no fitted classes: every kernel at the model's starting values
UNFIT = Profile(name="unfit")


def gemm(m: int, n: int, k: int, dtype: str = "bf16", warm: int = 0) -> Kernel:
    w = 1 if dtype.startswith("fp8") else 2
    return Kernel(
        f"gemm{m}x{n}x{k}",
        "gemm",
        dtype,
        flops=2 * m * n * k,
        bytes=2 * m * k + w * n * k + 2 * m * n,
        shape={"m": m, "n": n, "k": k, "warm_l2": warm},
    )


def gemm_batch(ms, n, k, dtype="bf16", warm=0) -> KernelBatch:
    ((_, batch),) = batches_of([gemm(int(m), n, k, dtype, warm) for m in ms])
    return batch


def test_batch_equals_single_kernels():
    ks = [gemm(m, 4096, 7168) for m in (1, 16, 128, 1024, 8192)]
    ((_, batch),) = batches_of(ks)
    together = predict_batch(batch, "H100-SXM")
    alone = [predict_kernels([k], "H100-SXM")[0].seconds for k in ks]
    assert np.allclose(together, alone, rtol=1e-12)


def test_never_faster_than_the_roofline():
    for hw in ("H100-SXM", "A100-SXM-80GB", "H200", "RTX-4090"):
        for t, k in zip(
            predict_kernels([gemm(m, 8192, 8192) for m in (1, 64, 4096)], hw),
            [gemm(m, 8192, 8192) for m in (1, 64, 4096)],
        ):
            assert t.seconds > roofline_seconds(k.flops, k.bytes, hw, "bf16")
            assert t.roofline_s == pytest.approx(roofline_seconds(k.flops, k.bytes, hw, "bf16"))


def test_bounds_follow_intensity():
    small, big = predict_kernels([gemm(1, 8192, 8192), gemm(8192, 8192, 8192)], "H100-SXM")
    assert small.bound == "memory"
    assert big.bound == "compute"
    tiny = predict_kernels([gemm(1, 64, 64)], "H100-SXM", UNFIT)[0]
    # a tiny GEMM: memory-bound by its intensity, its time set by the fixed cost per call
    assert tiny.bound == "memory" and tiny.limited_by == "latency"


def test_calls_scale_time():
    k = gemm(256, 4096, 4096)
    k3 = Kernel(k.name, k.kind, k.dtype, k.flops, k.bytes, calls=3, shape=k.shape)
    one, three = predict_kernels([k, k3], "H100-SXM")
    assert three.seconds == pytest.approx(3 * one.seconds)


def test_wave_quantization_steps_at_sm_count():
    """A kernel that runs whole waves of tiles steps at the SM count: one 128 x 128 tile more
    than fills the SMs needs a second wave (or smaller, slower tiles), far more than the one
    tile's more work. Hopper's cuBLAS bf16 GEMMs (persistent, BALANCED_WAVES: since 979409f)
    spread that last partial wave over every SM instead, so they take the tile's share only."""

    def compute_s(device: str, tiles: int, dtype: str = "bf16") -> float:
        fig = device_figures(load_hardware(device))
        prm = default_params("gemm")
        prm["fixed_s"] = 1e-9
        return kernel_terms(gemm_batch([128], tiles * 128, 16384, dtype), fig, prm)["compute_s"][0]

    # A100's 108 SMs and H100's block-scaled fp8 GEMM: whole waves
    assert compute_s("A100-SXM-80GB", 109) > 1.5 * compute_s("A100-SXM-80GB", 108)
    assert compute_s("H100-SXM", 133, "fp8_block") > 1.5 * compute_s("H100-SXM", 132, "fp8_block")
    # H100's 132 SMs under cuBLAS bf16: the 133rd tile's work spread over every SM
    c1, c2 = compute_s("H100-SXM", 132), compute_s("H100-SXM", 133)
    assert c2 == pytest.approx(c1 * 133 / 132, rel=1e-9)
    # and no tile choice runs above the tensor rate
    fig = device_figures(load_hardware("H100-SXM"))
    ideal = 2 * 128 * 132 * 128 * 16384 / (default_params("gemm")["eff_compute"] * fig.peak("bf16"))
    assert c1 == pytest.approx(ideal)


def test_warm_l2_speeds_small_weights_only():
    cold = predict_batch(gemm_batch([1], 1024, 1024, warm=0), "H100-SXM", UNFIT)[0]
    warm = predict_batch(gemm_batch([1], 1024, 1024, warm=1), "H100-SXM", UNFIT)[0]
    assert warm < cold
    big_cold = predict_batch(gemm_batch([1], 16384, 16384, warm=0), "H100-SXM", UNFIT)[0]
    big_warm = predict_batch(gemm_batch([1], 16384, 16384, warm=1), "H100-SXM", UNFIT)[0]
    assert big_warm == pytest.approx(big_cold)


def test_transfer_by_datasheet_ratio():
    # a bandwidth-bound kernel runs faster on H200 than H100 by about their HBM ratio
    h100 = predict_batch(gemm_batch([1], 16384, 16384), "H100-SXM")[0]
    h200 = predict_batch(gemm_batch([1], 16384, 16384), "H200")[0]
    ratio = (
        load_hardware("H200").memory_bandwidth_bytes_per_s
        / load_hardware("H100-SXM").memory_bandwidth_bytes_per_s
    )
    assert h100 / h200 == pytest.approx(ratio, rel=0.05)


def test_collectives_link_bound_and_latency():
    msg = [2**10, 2**30]
    batch = KernelBatch(
        "all_reduce",
        "bf16",
        np.zeros(2),
        np.array(msg, float),
        np.ones(2),
        {"message_bytes": np.array(msg, float), "n_gpus": np.array([8.0, 8.0])},
    )
    small, large = predict_batch(batch, "H100-SXM", UNFIT)
    link = device_figures(load_hardware("H100-SXM")).link_bytes_per_s
    # H100's NVSwitch reduces in the fabric (NVLS): the message crosses the link once each way
    assert large > 2**30 / link
    assert small < 1e-4
    # without in-switch reduction (A100) the ring's 2(n-1)/n of the message is the bound
    (a100,) = predict_batch(_collective("all_reduce", [2.0**30], 8), "A100-SXM-80GB", UNFIT)
    a100_link = device_figures(load_hardware("A100-SXM-80GB")).link_bytes_per_s
    assert a100 > 2 * 7 / 8 * 2**30 / a100_link
    single = KernelBatch(
        "all_reduce",
        "bf16",
        np.zeros(1),
        np.array([2.0**20]),
        np.ones(1),
        {"message_bytes": np.array([2.0**20]), "n_gpus": np.array([1.0])},
    )
    assert predict_batch(single, "H100-SXM", UNFIT)[0] == pytest.approx(
        default_params("all_reduce")["fixed_s"]
    )


def test_fit_recovers_known_parameters():
    truth = default_params("gemm")
    truth.update(eff_compute=0.62, eff_memory=0.8, fixed_s=2.5e-6)
    fig = device_figures(load_hardware("H100-SXM"))
    ms = np.unique(np.geomspace(1, 16384, 40).astype(int))
    batches = [gemm_batch(ms, n, k) for n, k in ((4096, 4096), (16384, 2048), (1024, 8192))]
    obs = [
        Observations("H100-SXM", "synthetic", b, kernel_terms(b, fig, truth)["seconds"])
        for b in batches
    ]
    for use_scipy in (True, False):
        fitted = fit_class(obs, use_scipy=use_scipy)
        prm = default_params("gemm")
        prm.update(fitted)
        for o in obs:
            pred = kernel_terms(o.batch, fig, prm)["seconds"]
            assert error_stats(pred, o.seconds)["median_abs_error"] < 0.01
        assert fitted["eff_compute"] == pytest.approx(0.62, rel=0.05)
        assert fitted["fixed_s"] == pytest.approx(2.5e-6, rel=0.1)


def test_calibrate_records_provenance_and_round_trips(tmp_path):
    fig = {d: device_figures(load_hardware(d)) for d in ("H100-SXM", "A100-SXM-80GB")}
    truth = default_params("gemm")
    truth.update(eff_compute=0.7, fixed_s=3e-6)
    ms = np.unique(np.geomspace(1, 8192, 30).astype(int))
    obs = []
    for d in fig:
        b = gemm_batch(ms, 4096, 4096)
        obs.append(
            Observations(
                d, "gemm_perf", b, kernel_terms(b, fig[d], truth)["seconds"], source=f"{d}.parquet"
            )
        )
    prof = calibrate(obs, name="test")
    assert prof.fitted_devices == ["A100-SXM-80GB", "H100-SXM"]
    assert prof.fitted_on[0]["tables"] == {"gemm_perf": len(ms)}
    assert prof.residuals["H100-SXM"]["gemm:bf16"]["median_abs_error"] < 0.02
    path = prof.save(tmp_path / "p.json")
    again = load_profile(path)
    assert again.classes == prof.classes and again.devices == prof.devices
    _, how = again.params("H100-SXM", "gemm", "bf16")
    assert how == "calibrated on H100-SXM"
    _, how = again.params("H200", "gemm", "bf16")
    assert how.startswith("H200 by datasheet ratios")
    assert "datasheet ratios" in again.describe("H200")
    t = predict_kernels([gemm(64, 4096, 4096)], "H200", profile=path)[0]
    assert t.calibration.startswith("H200 by datasheet ratios") and t.profile == "test"


def test_bad_input_names_the_argument(tmp_path):
    with pytest.raises(InvalidArgumentError, match="batch"):
        predict_batch([gemm(1, 2, 3)], "H100-SXM")
    with pytest.raises(InvalidArgumentError, match="kernels"):
        predict_kernels(["gemm"], "H100-SXM")
    with pytest.raises(InvalidArgumentError, match="profile"):
        load_profile("no-such-profile")
    bad = tmp_path / "bad.json"
    bad.write_text(
        json.dumps({"schema": "mlacalc.profile/1", "classes": {"gemm:bf16": {"speed": 1}}})
    )
    with pytest.raises(ConfigError, match="speed"):
        load_profile(bad)
    bad.write_text("{")
    with pytest.raises(ConfigError, match="JSON"):
        load_profile(bad)
    with pytest.raises(ConfigError, match="schema"):
        Profile.from_dict({"classes": {}})
    with pytest.raises(InvalidArgumentError, match="seconds"):
        Observations("H100-SXM", "t", gemm_batch([1, 2], 64, 64), np.ones(3))


def test_expert_exchange_modes():
    """DeepEP-style dispatch: normal mode moves data with the SMs it is given and pays n - 1
    latency steps; low-latency mode sends every copy in one step."""
    msg = np.array([2.0**28] * 3 + [2.0**10] * 2)
    sms = np.array([4.0, 8.0, 0.0, 0.0, 0.0])
    low = np.array([0.0, 0.0, 0.0, 0.0, 1.0])
    batch = KernelBatch(
        "dispatch",
        "fp8",
        np.zeros(5),
        msg,
        np.ones(5),
        {"message_bytes": msg, "n_gpus": np.full(5, 8.0), "sms": sms, "low_latency": low},
    )
    fig = device_figures(load_hardware("H100-SXM"))
    prm = default_params("dispatch")
    t = kernel_terms(batch, fig, prm)["seconds"]
    link = prm["link_eff"] * fig.link_bytes_per_s
    # 4 SMs draw 4 x sm_bandwidth / 132 of the link; twice the SMs, half the time
    share4 = 4 * prm["sm_bandwidth"] / fig.sm_count
    lat = prm["latency_steps"] * fig.link_latency_s
    assert t[0] == pytest.approx(prm["fixed_s"] + 7 * lat + 7 / 8 * msg[0] / (link * share4))
    steps = prm["fixed_s"] + 7 * lat
    assert t[0] - steps == pytest.approx(2 * (t[1] - steps))
    # small messages: n - 1 steps of latency against one
    assert t[3] - t[4] == pytest.approx(6 * lat, rel=0.01)


def test_unmeasured_devices_take_the_fit_of_their_generation():
    """A device nobody measured is predicted with the fit of the measured device of its vendor
    and architecture, else the fit pooled over all, naming the nearest fitted architecture whose
    kernels it runs (unvalidated)."""
    from mlacalc.timemodel.profile import Profile

    shipped = load_profile("default")
    keep = ("H100-SXM", "A100-SXM-80GB")  # the Hopper and Ampere fits, whatever else ships
    prof = Profile(
        name="hopper-ampere",
        classes=shipped.classes,
        devices={d: shipped.devices[d] for d in keep},
    )
    near = {
        h: prof.nearest_fitted(load_hardware(h))
        for h in ("H200", "H800", "H100-PCIe", "A100-PCIe-40GB", "B200", "MI300X", "RTX-4090")
    }
    assert near == {
        "H200": "H100-SXM",
        "H800": "H100-SXM",
        "H100-PCIe": "H100-SXM",
        "A100-PCIe-40GB": "A100-SXM-80GB",
        "B200": None,
        "MI300X": None,
        "RTX-4090": None,
    }
    # the pooled fit stands in; the nearest fitted architecture whose kernels they run is named
    assert prof.nearest_architecture(load_hardware("B200")) == "H100-SXM"
    assert prof.nearest_architecture(load_hardware("RTX-4090")) == "A100-SXM-80GB"
    assert prof.nearest_architecture(load_hardware("MI300X")) is None
    _, how = prof.params("H200", "gemm", "bf16", load_hardware("H200"))
    assert how == "H200 by datasheet ratios from H100-SXM (same tensor-core generation)"
    _, how = prof.params("B200", "gemm", "bf16", load_hardware("B200"))
    assert how.startswith("B200 by datasheet ratios (profile fitted on")
    text = prof.describe("B200", load_hardware("B200"))
    assert (
        "nearest fitted tensor-core generation Hopper (H100-SXM)" in text and "unvalidated" in text
    )


def test_cached_class_rates_give_the_uncached_times():
    """batch_terms takes the clock-scaled parameters from a per-(device, profile, class) cache;
    they give exactly what kernel_terms gives from the profile's own parameters."""
    from mlacalc.hardware.catalogue import load_hardware
    from mlacalc.timemodel.device import device_figures
    from mlacalc.timemodel.kernel_time import batch_terms, class_params
    from mlacalc.timemodel.profile import load_profile

    hw, prof = load_hardware("H200"), load_profile("default")
    batch = gemm_batch([1, 64, 4096], 7168, 2048)
    params, _ = prof.params(hw.name, "gemm", "bf16", hw)
    direct = kernel_terms(batch, device_figures(hw), params)["seconds"]
    for _ in range(2):  # the first call fills the cache, the second reads it
        cached, how = batch_terms(batch, hw, prof)
        assert np.array_equal(cached["seconds"], direct) and "H200" in how
    a100 = load_hardware("A100-SXM-80GB")  # 1410 MHz: its cycles take longer
    a100_params, _ = prof.params(a100.name, "gemm", "bf16", a100)
    assert class_params(a100, prof, "gemm", "bf16")[1]["fixed_s"] > a100_params["fixed_s"]


def test_ideal_of_a_dispatch_on_a_set_number_of_sms():
    """predict_kernels gives the plain bound of a DeepEP kernel that runs on a set number of SMs."""
    import mlacalc
    from mlacalc.timemodel.kernel_time import predict_kernels
    from mlacalc.words.kernels import Kernel

    shape = {"tokens": 128, "hidden": 7168, "topk": 8, "n_gpus": 8, "message_bytes": 10**7}
    kernels = [
        Kernel("dispatch", "dispatch", "fp8", 0, 10**7, 1, {**shape, "sms": sms}) for sms in (0, 20)
    ]
    times = predict_kernels(kernels, mlacalc.load_hardware("H100-SXM"))
    assert times[0].roofline_s == times[1].roofline_s > 0
    assert times[1].seconds >= times[0].seconds > times[0].roofline_s


def _single_gpu_all_reduce() -> KernelBatch:
    return KernelBatch(
        "all_reduce",
        "bf16",
        np.zeros(1),
        np.array([2.0**20]),
        np.ones(1),
        {"message_bytes": np.array([2.0**20]), "n_gpus": np.array([1.0])},
    )


def test_collective_fixed_cost_is_sm_cycles():
    """A collective's fixed cost (launch, protocol handshakes) is work on the SMs: stated at
    the reference clock, it scales with the device's clock; the link terms do not."""
    prof = Profile(name="p", classes={"all_reduce:bf16": {"fixed_s": 1e-5}})
    h100 = predict_batch(_single_gpu_all_reduce(), "H100-SXM", prof)[0]
    a100 = predict_batch(_single_gpu_all_reduce(), "A100-SXM-80GB", prof)[0]
    clocks = [device_figures(load_hardware(d)).clock_hz for d in ("H100-SXM", "A100-SXM-80GB")]
    assert h100 == pytest.approx(1e-5 * 1.83e9 / clocks[0])
    assert a100 / h100 == pytest.approx(clocks[0] / clocks[1])


def test_fp8_gemm_borrowing_a_bf16_fit_pays_its_quantize_passes():
    """A profile fitted where there are no fp8 units has no fp8 GEMM class: the bf16 fit is
    used at the fp8 rate, and each quantization pass over the bf16 input is one more kernel
    (the class's fixed cost) and one read of the input."""
    fitted = {"fixed_s": 3e-6, "eff_compute": 0.8, "eff_memory": 0.8}
    prof = Profile(name="p", classes={"gemm:bf16": fitted})
    params, how = prof.params("H100-SXM", "gemm", "fp8")
    assert params["quant_fixed_s"] == 3e-6 and params["quant_bytes"] == 1.0
    assert "datasheet ratios" in how
    own = Profile(name="q", classes={"gemm:fp8": {**fitted, "quant_fixed_s": 0.0}})
    assert own.params("H100-SXM", "gemm", "fp8")[0]["quant_fixed_s"] == 0.0
    k = gemm(16, 256, 256, "fp8")
    k = Kernel(k.name, k.kind, k.dtype, k.flops, k.bytes, shape={**k.shape, "quant_passes": 2})
    (t,) = predict_kernels([k], "H100-SXM", prof)
    (t_own,) = predict_kernels([k], "H100-SXM", own)
    # two passes: two more fixed costs on the borrowed fit, none on the fp8 fit
    assert t.seconds - t_own.seconds == pytest.approx(2 * 3e-6, rel=0.01)


def test_plugin_gemm_timed_outside_a_graph_pays_a_launch():
    from mlacalc.timemodel.terms import UNGRAPHED_LAUNCH_S

    k = gemm(64, 1024, 1024)
    plugin = Kernel(k.name, k.kind, k.dtype, k.flops, k.bytes, shape={**k.shape, "plugin": 1})
    graphed = Kernel(k.name, k.kind, k.dtype, k.flops, k.bytes, shape={**k.shape, "plugin": 0})
    a, b = predict_kernels([plugin, graphed], "A100-SXM-80GB", UNFIT)
    assert a.seconds - b.seconds == pytest.approx(UNGRAPHED_LAUNCH_S)


def test_masked_band_blocks_cost_mask_work():
    """A sliding-window prefill walks masked blocks only (its band's edges cut through every
    block it crosses): ``mask_s`` per such block; a causal prefill without a window has none."""

    def prefill(window: int) -> Kernel:
        return Kernel(
            "fmha",
            "attention_prefill",
            "bf16",
            flops=10**9,
            bytes=10**7,
            shape={
                "batch": 1,
                "q_len": 4096,
                "kv_len": 4096,
                "n_heads": 8,
                "n_kv": 8,
                "window": window,
                "causal": 1,
            },
        )

    base = Profile(name="a", classes={"attention_prefill:bf16": {"mask_s": 0.0}})
    masked = Profile(name="b", classes={"attention_prefill:bf16": {"mask_s": 1e-6}})
    band = [predict_kernels([prefill(128)], "H100-SXM", p)[0].seconds for p in (base, masked)]
    full = [predict_kernels([prefill(0)], "H100-SXM", p)[0].seconds for p in (base, masked)]
    assert band[1] > band[0]
    assert full[1] == pytest.approx(full[0])


def test_an_fp8_bands_masked_blocks_scale_with_the_hbm_bytes_per_sm_and_clock():
    """An fp8 band's masked blocks wait on HBM: ``mask_s`` is their time at Hopper's HBM bytes
    per SM and clock, so B200 (28.0 bytes a clock an SM against H100's 13.9) takes half of it;
    a bf16 band pays ``mask_s`` on either device."""

    def prefill(dtype: str) -> Kernel:
        shape = {"batch": 1, "q_len": 1024, "kv_len": 1024, "n_heads": 1, "n_kv": 1}
        return Kernel("fmha", "attention_prefill", dtype, flops=10**6, bytes=10**4,
                      shape={**shape, "window": 128, "causal": 1})  # fmt: skip

    def mask_work(dtype: str, device: str) -> float:
        key = f"attention_prefill:{dtype}"
        profiles = [Profile(name=str(s), classes={key: {"mask_s": s}}) for s in (1e-5, 2e-5)]
        t = [predict_kernels([prefill(dtype)], device, p)[0].seconds for p in profiles]
        return t[1] - t[0]

    fig = {d: device_figures(load_hardware(d)) for d in ("H100-SXM", "B200")}
    per_sm_clock = {d: f.hbm_bytes_per_s / (f.sm_count * f.clock_hz) for d, f in fig.items()}
    ratio = mask_work("fp8", "B200") / mask_work("fp8", "H100-SXM")
    assert ratio == pytest.approx(per_sm_clock["H100-SXM"] / per_sm_clock["B200"], rel=0.02)
    assert mask_work("bf16", "B200") == pytest.approx(mask_work("bf16", "H100-SXM"), rel=0.02)


def test_block_scaled_fp8_gemm_does_not_split_k():
    """A GEMM with fewer output tiles than SMs splits K (bf16, per-tensor fp8), except the
    block-scaled fp8 kernel, whose tile walks all of K: with few tiles its time grows with k
    as one tile's walk."""
    from mlacalc.timemodel.gemm_time import NO_SPLIT_K

    assert "fp8_block" in NO_SPLIT_K and "bf16" not in NO_SPLIT_K and "fp8" not in NO_SPLIT_K

    def compute(dtype: str, k: int) -> float:
        w = 1 if dtype.startswith("fp8") else 2
        batch = KernelBatch(
            "gemm",
            dtype,
            np.array([2.0 * 1024 * k]),
            np.array([2.0 * k + w * 1024 * k]),
            np.ones(1),
            {
                "m": np.array([1.0]),
                "n": np.array([1024.0]),
                "k": np.array([float(k)]),
                "quantize_input": np.zeros(1),
            },
        )
        fig = device_figures(load_hardware("H100-SXM"))
        return float(kernel_terms(batch, fig, default_params("gemm"))["compute_s"][0])

    # one row, 1024 columns: 8-16 tiles; bf16 splits K over the idle SMs, fp8_block runs its
    # tiles whole (time per FLOP at each dtype's own peak: 8-10x; the same without a split)
    fig = device_figures(load_hardware("H100-SXM"))
    per_flop = {d: compute(d, 65536) * fig.peak(d) for d in ("bf16", "fp8_block")}
    assert 6.0 < per_flop["fp8_block"] / per_flop["bf16"] < 12.0


def _collective(kind: str, msg: list[float], n: float, **fields: float) -> KernelBatch:
    size = len(msg)
    shape = {"message_bytes": np.array(msg), "n_gpus": np.full(size, n)}
    shape.update({k: np.full(size, float(v)) for k, v in fields.items()})
    return KernelBatch(kind, "fp16", np.zeros(size), np.array(msg), np.ones(size), shape)


def test_collective_steps_take_the_faster_protocol():
    """A step moves its data either as flagged stores (half the link bandwidth, no
    synchronisation) or in bulk (the full bandwidth behind ``proto_s`` per step): small
    messages pay no synchronisation, large ones run at the full link rate."""
    prm = {**default_params("all_gather"), "fixed_s": 0.0, "proto_s": 1e-5, "link_eff": 1.0}
    fig = device_figures(load_hardware("H100-SXM"))
    small, large = kernel_terms(_collective("all_gather", [1e3, 1e9], 8), fig, prm)["seconds"]
    lat = prm["latency_steps"] * fig.link_latency_s
    volume = 7 / 8 * np.array([1e3, 1e9])
    # and, in series, the rank's copy of its own 1/8 share (read and written in HBM)
    own = 2 * np.array([1e3, 1e9]) / 8 / (prm["eff_memory"] * fig.hbm_bytes_per_s)
    assert small == pytest.approx(7 * lat + 2 * volume[0] / fig.link_bytes_per_s + own[0])
    assert large == pytest.approx(7 * (lat + 1e-5) + volume[1] / fig.link_bytes_per_s + own[1])


def test_nccl_all_reduce_has_no_one_shot():
    """NCCL rows (``one_shot = 0``) all-reduce in a ring of 2(n-1) steps, so the small-message
    time grows with the GPU count; a custom all-reduce may read every peer in one step."""
    times = {
        (n, o): predict_batch(_collective("all_reduce", [256.0], n, one_shot=o), "H100-SXM")[0]
        for n in (2, 8)
        for o in (0, 1)
    }
    assert times[(8, 0)] > times[(2, 0)] * 1.5
    assert times[(8, 1)] < times[(8, 0)]


def test_batched_gemms_take_the_bmm_variant_with_a_fallback(tmp_path):
    """A GEMM of several groups is the ``bmm`` variant of its class: batched apart from plain
    GEMMs, timed by the profile's ``gemm:<dtype>:bmm`` fit where there is one, else by the plain
    class of its dtype (profiles fitted before variants existed load and predict unchanged)."""
    plain = Kernel(
        "g", "gemm", "bf16", 2 * 64 * 512 * 128, 10**6, shape={"m": 64, "n": 512, "k": 128}
    )
    bmm = Kernel(
        "b", "gemm", "bf16", plain.flops * 128, 10**8, shape={**plain.shape, "groups": 128}
    )
    batches = batches_of([plain, bmm, plain])
    assert sorted((idx, b.variant) for idx, b in batches) == [([0, 2], ""), ([1], "bmm")]
    fit = {"fixed_s": 3e-6, "eff_compute": 0.8, "eff_memory": 0.8}
    slow = {"fixed_s": 9e-6, "eff_compute": 0.4, "eff_memory": 0.4}
    old = Profile(name="old", classes={"gemm:bf16": fit})
    new = Profile(name="new", classes={"gemm:bf16": fit, "gemm:bf16:bmm": slow})
    assert old.params("H100-SXM", "gemm", "bf16", variant="bmm")[0]["fixed_s"] == 3e-6
    assert new.params("H100-SXM", "gemm", "bf16", variant="bmm")[0]["fixed_s"] == 9e-6
    assert new.params("H100-SXM", "gemm", "bf16")[0]["fixed_s"] == 3e-6
    # an fp8 batched GEMM without an fp8 fit of either kind borrows the bf16 bmm fit
    assert new.params("H100-SXM", "gemm", "fp8_block", variant="bmm")[0]["fixed_s"] == 9e-6
    t_old = predict_kernels([plain, bmm], "H100-SXM", old)
    t_new = predict_kernels([plain, bmm], "H100-SXM", new)
    assert t_new[0].seconds == t_old[0].seconds and t_new[1].seconds > t_old[1].seconds
    # the variant's fit survives a save and a load
    back = load_profile(new.save(tmp_path / "p.json"))
    assert back.params("H100-SXM", "gemm", "bf16", variant="bmm")[0]["fixed_s"] == 9e-6
