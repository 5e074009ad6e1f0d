"""MLA decode mechanisms that differ by the kernel a row ran: an fp8 latent cache converted to
bf16 by a kernel of its own (SGLang's FlashAttention-3 backend on H100, ``cache_convert``), and
the 128 query heads a Blackwell ``tcgen05`` unit carries (docs/time-model.md, "MLA decode")."""

from __future__ import annotations

import numpy as np
import pytest
from mapped_rows import rows_running
from reference_data import MEASURED

from mlacalc.hardware.catalogue import load_hardware
from mlacalc.timemodel.device import device_figures
from mlacalc.timemodel.mla_time import mla_split_keys, mla_tile_rows, mla_unit_rows
from mlacalc.timemodel.terms import default_params, kernel_terms
from mlacalc.words.kernels import KernelBatch


def _fig(name):
    return device_figures(load_hardware(name))


def _decode(heads, kv, *, batch=1.0, dtype="bf16", convert=0.0, variant=""):
    heads = np.asarray(heads, dtype=float)
    n = len(heads)
    lat, v = 576.0, 512.0
    kvb = 1.0 if dtype == "fp8" else 2.0
    return KernelBatch(
        kind="mla_decode",
        dtype=dtype,
        flops=2.0 * batch * heads * kv * (lat + v),
        bytes=batch * (kv * lat * kvb + heads * (lat + v) * 2.0),
        calls=np.ones(n),
        shape={
            "batch": np.full(n, batch),
            "q_len": np.ones(n),
            "kv_len": np.full(n, kv),
            "n_heads": heads,
            "n_kv": np.ones(n),
            "head_dim_qk": np.full(n, lat),
            "head_dim_v": np.full(n, v),
            "kv_bytes": np.full(n, kvb),
            "cache_convert": np.full(n, convert),
        },
        variant=variant,
    )


def test_converted_cache_costs_each_cached_element_not_each_head_tile():
    # the H100 rows of SGLang's FlashAttention-3 backend: with an fp8 cache, 2.06 ns a cached
    # token at every head count from 1 to 64 (bf16: 0.38 ns); the conversion is one pass over
    # the cached elements on every SM, whatever the heads
    fig = _fig("H100-SXM")
    prm = default_params("mla_decode")
    prm.update(dequant_s=4e-10, call_latency_s=5e-6)
    kv, b = 65536.0, 32.0
    conv = kernel_terms(_decode([1.0, 64.0], kv, batch=b, dtype="fp8", convert=1.0), fig, prm)
    plain = kernel_terms(_decode([1.0, 64.0], kv, batch=b, dtype="fp8"), fig, prm)
    added = conv["seconds"] - plain["seconds"]
    # the pass: a call's latency and b x kv x 576 elements at dequant_s an element and SM
    # (scaled to the device's clock); the attention reads bf16 rows, no fp8 q quantization
    scale = 1.83e9 / fig.clock_hz
    pass_s = 5e-6 + b * kv * 576 * 4e-10 * scale / fig.sm_count
    assert np.all(added >= pass_s * 0.95)
    assert added[1] == pytest.approx(added[0], rel=0.1)  # not per head
    # no conversion where the kernel reads fp8 itself: the parameter changes nothing
    prm0 = dict(prm, dequant_s=0.0)
    again = kernel_terms(_decode([1.0, 64.0], kv, batch=b, dtype="fp8"), fig, prm0)
    assert np.allclose(again["seconds"], plain["seconds"])


@pytest.mark.parametrize(
    "source, kvd, expected",
    [("flash_attention", "fp8", 1.0), ("flash_attention", "bf16", 0.0), ("trtllm_mla", "fp8", 0.0)],
)
def test_mapping_converts_only_sglangs_flash_attention_fp8_rows(source, kvd, expected):
    pytest.importorskip("pyarrow")
    from mlacalc.measured.mapping import map_table
    from mlacalc.measured.tables import load_measured

    system = "h100_sxm" if source == "flash_attention" else "b200_sxm"
    tables = load_measured(MEASURED / system / "mla", engine="sglang").tables
    t = next(x for x in tables if x.table == "generation_mla_perf")
    mapped = map_table(t)
    parts = [p for p in mapped.parts if p.batch.kind == "mla_decode"]
    dtype = "fp8" if kvd == "fp8" else "bf16"
    part = next(p for p in parts if p.batch.dtype == dtype)
    assert np.all(part.batch.shape["cache_convert"] == expected)


def test_trtllm_rows_never_convert():
    pytest.importorskip("pyarrow")
    from mlacalc.measured.mapping import map_table
    from mlacalc.measured.tables import load_measured

    tables = load_measured(MEASURED / "h100_sxm" / "mla", engine="trtllm").tables
    t = next(x for x in tables if x.table == "generation_mla_perf")
    for p in map_table(t).parts:
        if p.batch.kind == "mla_decode":
            assert not np.any(p.batch.shape["cache_convert"])


@pytest.mark.parametrize(
    "name, variant, rows",
    [
        ("H100-SXM", "", 64.0),
        ("A100-SXM-80GB", "", 64.0),
        ("B200", "", 128.0),
        ("GB200", "", 128.0),
        ("B200", "sparse", 128.0),  # FlashMLA's sparse kernels: the tcgen05 MMA's rows
        ("H100-SXM", "sparse", 64.0),
        ("B200", "indexer", 64.0),
        ("RTX-PRO-6000-Server", "", 64.0),
    ],
)
def test_tile_rows_by_mma(name, variant, rows):
    assert mla_tile_rows(_decode([128.0], 1024.0, variant=variant), _fig(name)) == rows


@pytest.mark.parametrize(
    "name, heads, rows, units",
    [
        ("B200", 1.0, 16.0, 1.0),
        ("B200", 16.0, 16.0, 1.0),
        ("B200", 32.0, 16.0, 2.0),
        ("B200", 64.0, 128.0, 1.0),
        ("B200", 128.0, 128.0, 1.0),
        ("H100-SXM", 32.0, 64.0, 1.0),
        ("H100-SXM", 128.0, 64.0, 2.0),
    ],
)
def test_blackwell_runs_16_row_units_up_to_32_heads(name, heads, rows, units):
    # every engine's B200 rows: 32 heads take 1.5-1.6x the time of 16 or 64 heads, 1-16 heads
    # one time: two 16-row units each streaming the cache; Hopper keeps its 64-row tile (256
    # sequences: more 16-row CTAs than SMs, so no low-latency kernel past 32 heads)
    got = mla_unit_rows(_decode([heads], 1024.0, batch=256.0), _fig(name))
    assert got[0] == rows and np.ceil(heads / got[0]) == units
    sparse = mla_unit_rows(_decode([32.0], 1024.0, variant="sparse"), _fig(name))[0]
    assert sparse == (128.0 if name == "B200" else 64.0)  # no 16-row unit for FlashMLA's


@pytest.mark.parametrize(
    "heads, batch, keys, rows",
    [
        (128.0, 1.0, 255.0, 16.0),  # 8 CTAs of 255 keys: the low-latency kernel
        (64.0, 16.0, 2047.0, 16.0),  # 64 CTAs, each sequence's keys in 2 parts of 1,024
        (128.0, 4.0, 4095.0, 16.0),  # 32 CTAs, 4 parts of 1,024
        (64.0, 64.0, 63.0, 128.0),  # 256 CTAs: more than the SMs
        (128.0, 16.0, 2047.0, 128.0),  # 128 CTAs, one part of 2,047 keys: past 1,024
        (128.0, 1.0, 131072.0, 128.0),  # 8 CTAs, 18 parts of 7,282 keys
    ],
)
def test_blackwell_low_latency_kernel_runs_16_row_units_past_32_heads(heads, batch, keys, rows):
    # TensorRT-LLM-gen's launcher (from recall) keeps its 16-row kernel past 32 heads where the
    # 16-row CTAs fit in the SMs and a CTA's part of the keys is at most 1,024: B200's bf16 rows
    # of one sequence of 128 heads take 10.3-10.9 us at 63-255 keys, as 1-16 heads do, where
    # one 128-row unit read 12.3-16.0 us. Hopper's tile and the sparse kernels' do not change
    b200 = _fig("B200")
    assert mla_unit_rows(_decode([heads], keys, batch=batch), b200)[0] == rows
    assert mla_unit_rows(_decode([heads], keys, batch=batch), _fig("H100-SXM"))[0] == 64.0
    sparse = _decode([heads], keys, batch=batch, variant="sparse")
    assert mla_unit_rows(sparse, b200)[0] == 128.0


#: the B200 profile each engine's MLA decode rows are fitted in
_B200_PROFILE = {"trtllm": "fit-b200-sxm", "sglang": "fit-b200-sxm-sglang"}


def _b200_mla_errors(engine):
    """B200's ``generation_mla_perf`` table of ``engine``, its mapping and each row's error
    (prediction / measured - 1) under that engine's profile (:data:`_B200_PROFILE`)."""
    pytest.importorskip("pyarrow")
    from mlacalc.measured.mapping import map_table
    from mlacalc.measured.observations import predict_mapped
    from mlacalc.measured.tables import load_measured
    from mlacalc.timemodel.profile import load_profile

    tables = load_measured(MEASURED / "b200_sxm" / "mla", engine=engine).tables
    t = next(x for x in tables if x.table == "generation_mla_perf")
    mapped = map_table(t)
    pred = predict_mapped(mapped, None, load_profile(_B200_PROFILE[engine]))
    return t, mapped, pred / t.seconds - 1.0


@pytest.mark.parametrize(
    "engine, bound",
    [
        # median |error| of the bf16 rows the low-latency kernel runs past 32 heads (64-128
        # heads, 135 rows): TensorRT-LLM 11.3% (p90 37.9%) with one 128-row unit, 4.9% (17.1%)
        # with 16-row units; SGLang 11.6% (30.7%) -> 9.6% (15.6%)
        ("trtllm", 0.07),
        ("sglang", 0.11),
    ],
)
def test_blackwell_low_latency_rows_past_32_heads(engine, bound):
    from mlacalc.timemodel.mla_time import low_latency_units

    _, mapped, err = _b200_mla_errors(engine)
    part = next(p for p in mapped.parts if p.batch.kind == "mla_decode" and p.batch.dtype == "bf16")
    heads = part.batch.shape["n_heads"] * part.batch.shape["q_len"]
    low = low_latency_units(part.batch, _fig("B200"), heads) & (heads > 32)
    rows = part.rows[low]
    assert rows.size >= 100
    assert np.median(np.abs(err[rows][mapped.modelled[rows]])) <= bound


def test_blackwell_32_heads_cost_more_than_16_and_64():
    # B200's fitted class (measured 3,389 / 5,147 / 3,375 us): with the padded tile
    # (mla_time.PAD_SPLIT_TILES) the defaults' eff_compute 0.6 makes 64 heads, a whole 128-row
    # tile, compute-bound, which no fit of the rows has
    from mlacalc.timemodel.profile import load_profile

    prm = {**default_params("mla_decode")}
    prm.update(load_profile("fit-b200-sxm").classes["mla_decode:bf16"])
    t = kernel_terms(_decode([16.0, 32.0, 64.0], 131072.0, batch=128.0), _fig("B200"), prm)
    s = t["seconds"]
    assert s[1] > 1.2 * s[0] and s[1] > 1.2 * s[2]


def test_fp8_operands_are_a_byte_on_blackwell_and_converted_to_bf16_on_hopper():
    # at one head the products are nothing and the shared-memory traffic sets the pace: B200's
    # fp8 MMA reads byte-wide latent rows (half bf16's traffic); Hopper's converts each block's
    # rows to bf16 in shared memory first (its fp8 read and bf16 write, HOPPER_FP8_MLA_BYTES)
    # and reads bf16 operands: more than bf16's traffic. A converted cache is bf16. (One head
    # is a whole padded tile of products, mla_time.PAD_SPLIT_TILES: at the fits' eff_compute,
    # 1.0, the traffic still sets the pace; the defaults' 0.6 would let the products)
    prm = {**default_params("mla_decode"), "eff_compute": 1.0}
    kv, b = 131072.0, 64.0
    ratio = {}
    for name in ("H100-SXM", "B200"):
        fp8 = kernel_terms(_decode([1.0], kv, batch=b, dtype="fp8"), _fig(name), prm)
        bf16 = kernel_terms(_decode([1.0], kv, batch=b), _fig(name), prm)
        ratio[name] = fp8["compute_s"][0] / bf16["compute_s"][0]
    assert ratio["B200"] == pytest.approx(0.5, rel=0.05)
    assert 1.05 < ratio["H100-SXM"] < 1.2
    h100 = _fig("H100-SXM")
    conv = kernel_terms(_decode([1.0], kv, batch=b, dtype="fp8", convert=1.0), h100, prm)
    bf16 = kernel_terms(_decode([1.0], kv, batch=b), h100, prm)
    assert conv["compute_s"][0] == pytest.approx(bf16["compute_s"][0], rel=1e-6)


def test_hoppers_fp8_kernel_multiplies_at_the_bf16_rate():
    # 128 heads over a long cache: the products set the pace. Hopper's fp8 kernel converts
    # its rows to bf16 and multiplies bf16 (its products as bf16's); B200's multiplies fp8
    prm = {**default_params("mla_decode"), "eff_memory": 1.0}
    t = {}
    for name in ("H100-SXM", "B200"):
        for dtype in ("bf16", "fp8"):
            b = _decode([128.0], 131072.0, batch=64.0, dtype=dtype)
            t[name, dtype] = kernel_terms(b, _fig(name), prm)["compute_s"][0]
    assert t["H100-SXM", "fp8"] >= t["H100-SXM", "bf16"]
    assert t["B200", "fp8"] < 0.75 * t["B200", "bf16"]


def test_blackwell_streams_the_cache_once_for_128_heads():
    # B200 (TensorRT-LLM, 64 sequences of 131K keys): 128 heads take no longer than 64 (1,733
    # against 1,699 us bf16). Hopper's two 64-head units each pass every latent row through
    # their shared memory (twice the work of 64 heads); B200's one 128-row unit passes it once,
    # only the products and the query tile's re-reads growing with the heads
    prm = default_params("mla_decode")
    kv, b = 131072.0, 64.0
    ratio = {}
    for name in ("H100-SXM", "B200"):
        t = kernel_terms(_decode([64.0, 128.0], kv, batch=b), _fig(name), prm)
        ratio[name] = t["compute_s"][1] / t["compute_s"][0]
    assert ratio["H100-SXM"] == pytest.approx(2.0, rel=0.01)
    assert ratio["B200"] < 0.9 * ratio["H100-SXM"]


def _sglang_decode_errors(system: str, profile: str, dtype: str) -> np.ndarray:
    pytest.importorskip("pyarrow")
    from mlacalc.measured.mapping import map_table
    from mlacalc.measured.observations import predict_mapped
    from mlacalc.measured.tables import load_measured
    from mlacalc.timemodel.profile import load_profile

    tables = load_measured(MEASURED / system / "mla", engine="sglang").tables
    t = next(x for x in tables if x.table == "generation_mla_perf")
    mapped = map_table(t)
    err = predict_mapped(mapped, None, load_profile(profile)) / t.seconds - 1.0
    keep = rows_running(mapped, dtype, "mla_decode")
    return np.abs(err[keep & mapped.modelled & np.isfinite(err)])


@pytest.mark.parametrize(
    "system, profile, median, p90",
    [
        # fitted: 15.2% / 65.9% before the conversion (a per-block cost stood in for it)
        ("h100_sxm", "fit-h100-sxm-sglang", 0.035, 0.09),
        # B200 (trtllm_mla, which reads fp8) from H100's fit: 220% / 1,613% before (H100's
        # per-block cost carried to a kernel that converts nothing), 23.4% / 44.5% after; 20.8%
        # / 41.8% with B200's 16-row units and fp8 operands a byte wide
        ("b200_sxm", "fit-h100-sxm-sglang", 0.22, 0.44),
    ],
)
def test_sglang_fp8_decode_conversion_fits_and_transfers(system, profile, median, p90):
    e = _sglang_decode_errors(system, profile, "fp8")
    assert e.size > 1000
    assert np.median(e) <= median and np.percentile(e, 90) <= p90


def test_a_step_runs_the_kernel_its_engines_class_was_fitted_on():
    # a model step's fp8 MLA decode (its kernel chosen by the device rule, ``step_kernel``)
    # under SGLang on Hopper converts its cache, as SGLang's H100 rows did; not under
    # TensorRT-LLM, not on B200, not a measured row (which names its own kernel), not bf16
    from mlacalc.timemodel.kernel_time import device_batch
    from mlacalc.timemodel.mla_time import engine_mla_kernel

    step = _decode([128.0], 32768.0, dtype="fp8")
    del step.shape["cache_convert"], step.shape["kv_bytes"]
    for name, engine, expected in (
        ("H100-SXM", "sglang", True),
        ("H200", "sglang", True),
        ("H100-SXM", "trtllm", False),
        ("B200", "sglang", False),
    ):
        run = device_batch(step, load_hardware(name))
        out = engine_mla_kernel(run, engine, _fig(name))
        assert ("cache_convert" in out.shape) is expected
        if expected:
            assert out.shape["cache_convert"][0] == 1.0 and out.shape["kv_bytes"][0] == 1.0
    measured = _decode([128.0], 32768.0, dtype="fp8")  # carries cache_convert 0
    out = engine_mla_kernel(
        device_batch(measured, load_hardware("H100-SXM")), "sglang", _fig("H100-SXM")
    )
    assert out.shape["cache_convert"][0] == 0.0
    bf16 = device_batch(_decode([128.0], 32768.0), load_hardware("H100-SXM"))
    assert engine_mla_kernel(bf16, "sglang", _fig("H100-SXM")) is bf16


def test_sglang_fp8_decode_step_on_hopper_is_slower_than_bf16():
    # SGLang's H100 rows, 16 sequences of 32K keys at 128 heads: about 1.15 ms with an fp8
    # cache against 0.27 ms bf16; TensorRT-LLM's fp8 kernel is the faster one
    import mlacalc

    def attention_s(engine, kv):
        p = mlacalc.predict_time(
            "deepseek-v3", "H100-SXM", "decode", 32768, batch=16, engine=engine, kv_dtype=kv
        )
        return next(o for o in p.ops if o.name == "attention").model_s

    assert attention_s("sglang", "fp8") > 3.0 * attention_s("sglang", "bf16")
    assert attention_s("trtllm", "fp8") < attention_s("trtllm", "bf16")


def test_an_engines_hopper_profile_times_blackwells_mla_decode_with_trtllms_classes():
    # SGLang's trtllm_mla and vLLM's FLASHINFER_MLA run TensorRT-LLM-gen's MLA decode kernel on
    # B200: their H100-only profiles, predicting B200, take TensorRT-LLM's mla_decode classes;
    # not on a device of their own generation, and TensorRT-LLM's own profile is left alone
    from mlacalc.timemodel.engine_profiles import STAND_IN_NOTE, with_generation_kernels
    from mlacalc.timemodel.profile import load_profile

    trt, b200 = load_profile("default"), load_hardware("B200")
    for engine in ("sglang", "vllm"):
        prof = load_profile(f"fit-h100-sxm-{engine}")
        got = with_generation_kernels(prof, trt, b200)
        for dtype in ("bf16", "fp8"):
            key = f"mla_decode:{dtype}"
            assert got.classes[key] == trt.classes[key] != prof.classes[key]
            assert any(n.startswith(f"{STAND_IN_NOTE}{key} from trtllm") for n in got.notes)
        assert with_generation_kernels(prof, trt, load_hardware("H200")) is prof
    assert with_generation_kernels(trt, trt, b200) is trt


def _trtllm_decode_errors(system: str, profile: str, dtype: str) -> np.ndarray:
    pytest.importorskip("pyarrow")
    from mlacalc.measured.mapping import map_table
    from mlacalc.measured.observations import predict_mapped
    from mlacalc.measured.tables import load_measured
    from mlacalc.timemodel.profile import load_profile

    tables = load_measured(MEASURED / system / "mla", engine="trtllm").tables
    mapped = map_table(next(x for x in tables if x.table == "generation_mla_perf"))
    err = predict_mapped(mapped, None, load_profile(profile)) / mapped.table.seconds - 1.0
    keep = rows_running(mapped, dtype, "mla_decode")
    return np.abs(err[keep & mapped.modelled & np.isfinite(err)])


@pytest.mark.slow
@pytest.mark.parametrize(
    "system, profile, dtype, median",
    [
        # TensorRT-LLM's fp8 rows from the other device, with Hopper's fp8 kernel converting
        # its rows to bf16 and multiplying bf16 (HOPPER_FP8_MLA_BYTES): B200 from H100 30.5%
        # -> 15.0%, H100 from B200 15.2% -> 12.5% (bounds were 0.16, 0.135); with FlashMLA's
        # combine kernel launched on every H100 call (FLASHMLA_DECODE) 15.0% -> 8.3% and
        # 12.5% -> 8.0%, bf16 12.2% -> 9.0% and 10.6% -> 5.8%; H100 from B200 fp8 8.0% ->
        # 8.48%, bf16 5.8% -> 5.15% since B200's classes took a cost a CTA (round 23), read on
        # Hopper per wave
        ("b200_sxm", "default", "fp8", 0.09),
        ("h100_sxm", "fit-b200-sxm", "fp8", 0.085),
        ("b200_sxm", "default", "bf16", 0.095),
        ("h100_sxm", "fit-b200-sxm", "bf16", 0.065),
    ],
)
def test_trtllm_decode_from_the_other_device(system, profile, dtype, median):
    e = _trtllm_decode_errors(system, profile, dtype)
    assert e.size > 1400
    assert np.median(e) <= median


def test_flashmla_launches_its_combine_kernel_on_every_call():
    # FlashMLA (TensorRT-LLM's H100 kernel, ``combine_always``) launches its combine kernel
    # whether or not a sequence's keys split: a call over one cached key pays one more launch;
    # where the keys split (one sequence of 64K keys) both launch it
    fig = _fig("H100-SXM")
    prm = default_params("mla_decode")
    for kv, more in ((1.0, True), (65536.0, False)):
        plain = _decode([16.0], kv)
        flash = _decode([16.0], kv)
        flash.shape["combine_always"] = np.ones(1)
        added = kernel_terms(flash, fig, prm)["seconds"] - kernel_terms(plain, fig, prm)["seconds"]
        if more:
            assert added[0] > 0.5 * prm["launch_s"]
        else:
            assert added[0] == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize(
    "system, engine, expected",
    [
        ("h100_sxm", "trtllm", {"bf16": 1.0, "fp8": 1.0}),
        ("b200_sxm", "trtllm", {"bf16": 0.0, "fp8": 0.0}),
        ("h100_sxm", "sglang", {"bf16": 0.0, "fp8": 0.0}),
        # vLLM's H100 rows: FLASHMLA with an fp8 cache, FLASH_ATTN_MLA with a bf16 one
        ("h100_sxm", "vllm", {"bf16": 0.0, "fp8": 1.0}),
        ("b200_sxm", "vllm", {"bf16": 0.0, "fp8": 0.0}),
    ],
)
def test_mapping_marks_flashmla_decode_rows(system, engine, expected):
    pytest.importorskip("pyarrow")
    from mlacalc.measured.mapping import map_table
    from mlacalc.measured.tables import load_measured

    tables = load_measured(MEASURED / system / "mla", engine=engine).tables
    seen = 0
    for name in ("generation_mla_perf", "mla_generation_module_perf"):
        t = next((x for x in tables if x.table == name and x.engine == engine), None)
        if t is None:
            continue
        for p in map_table(t).parts:
            if p.batch.kind == "mla_decode":
                want = expected[p.batch.dtype]
                assert np.all(p.batch.shape["combine_always"] == want), (name, p.batch.dtype)
                seen += 1
    assert seen >= 2


def test_a_trtllm_step_on_hopper_runs_flashmla():
    from mlacalc.timemodel.kernel_time import device_batch
    from mlacalc.timemodel.mla_time import engine_mla_kernel

    for name, engine, dtype, expected in (
        ("H100-SXM", "trtllm", "bf16", True),
        ("H200", "trtllm", "fp8", True),
        ("B200", "trtllm", "bf16", False),
        ("H100-SXM", "sglang", "bf16", False),
        ("H100-SXM", "vllm", "fp8", True),  # its FLASHMLA backend
        ("H100-SXM", "vllm", "bf16", False),  # FLASH_ATTN_MLA
        ("B200", "vllm", "fp8", False),
    ):
        step = _decode([128.0], 4096.0, dtype=dtype)
        if dtype == "fp8":
            del step.shape["cache_convert"]
        out = engine_mla_kernel(device_batch(step, load_hardware(name)), engine, _fig(name))
        assert ("combine_always" in out.shape) is expected, (name, engine, dtype)
    step = _decode([128.0], 4096.0)
    # a measured row names its kernel: left as it is
    assert "combine_always" not in engine_mla_kernel(step, "trtllm", _fig("H100-SXM")).shape


def test_vllms_flashinfer_mla_call_costs_a_time_per_row_and_head_beyond_the_kernel():
    # vLLM's B200 generation module rows minus TensorRT-LLM's on the same shapes: 2.93-3.01 ns
    # a (sequence, head) with a bf16 cache, 2.69-2.79 ns with fp8, flat in the cache length
    # (mla_time.WRAPPER_ROW_HEAD_S); TensorRT-LLM's own call and vLLM's Hopper backends: none
    from mlacalc.timemodel.mla_time import engine_mla_kernel, wrapper_row_head_s

    b200, h100 = _fig("B200"), _fig("H100-SXM")
    assert wrapper_row_head_s("vllm", b200, "bf16") == pytest.approx(2.96e-9)
    assert wrapper_row_head_s("vllm", b200, "fp8") == pytest.approx(2.75e-9)
    for engine, fig in (("trtllm", b200), ("sglang", b200), ("vllm", h100)):
        assert wrapper_row_head_s(engine, fig, "bf16") == 0.0
    prm = default_params("mla_decode")
    heads = [1.0, 128.0]
    plain = kernel_terms(_decode(heads, 2.0, batch=1024.0), b200, prm)["seconds"]
    step = _decode(heads, 2.0, batch=1024.0)
    step = KernelBatch(**{**step.__dict__, "shape": {**step.shape, "step_kernel": np.ones(2)}})
    wrapped = kernel_terms(engine_mla_kernel(step, "vllm", b200), b200, prm)["seconds"]
    np.testing.assert_allclose(wrapped - plain, 1024.0 * np.asarray(heads) * 2.96e-9, rtol=1e-6)
    same = kernel_terms(engine_mla_kernel(step, "trtllm", b200), b200, prm)["seconds"]
    np.testing.assert_allclose(same, plain)


def test_mapping_times_the_wrapper_on_vllms_b200_module_rows_only():
    pytest.importorskip("pyarrow")
    from mlacalc.measured.mapping import map_table
    from mlacalc.measured.tables import load_measured

    for system, engine, want in (("b200_sxm", "vllm", True), ("b200_sxm", "trtllm", False),
                                 ("h100_sxm", "vllm", False)):  # fmt: skip
        tables = load_measured(MEASURED / system / "mla", engine=engine).tables
        t = next(x for x in tables if x.table == "mla_generation_module_perf")
        for p in map_table(t).parts:
            if p.batch.kind == "mla_decode":
                assert np.all((p.batch.shape["wrapper_row_head_s"] > 0) == want)


def _core_ms(hw, heads, keys, q_len, engine="trtllm", batch=128):
    """DeepSeek-V3's latent decode core (FlashMLA's benchmark shape: 128 sequences), ms."""
    import mlacalc

    m = mlacalc.load_model("deepseek-v3").with_changes(num_attention_heads=heads)
    if q_len == 1:
        p = mlacalc.predict_time(m, hw, "decode", seq_len=keys, batch=batch, engine=engine)
    else:
        p = mlacalc.predict_time(
            m, hw, "chunk", seq_len=keys, batch=batch, q_len=q_len, impl="absorbed", engine=engine
        )
    ops = [o for o in p.to_dict()["ops"] if o["stage"] == "core"]
    return sum(o["seconds"] for o in ops) * 1e3, sum(o["flops"] for o in ops)


@pytest.mark.parametrize(
    "hw, heads, keys, q_len, measured",
    [
        # FlashMLA's published rows (128 sequences): H20 from its issue #30, H100 from the
        # community rows its README links; before the padded tile (mla_time.PAD_SPLIT_TILES)
        # H20's read 0.229 / 0.350 / 0.634 / 0.793 ms (-62% / -42% / +3% / -32%)
        ("H20", 16, 4096, 1, 0.601),
        ("H20", 16, 4096, 2, 0.606),
        ("H20", 16, 4096, 4, 0.614),
        ("H20", 16, 4096, 5, 1.168),
        ("H100-SXM", 16, 4096, 1, 0.215),
        ("H100-SXM", 16, 4096, 2, 0.218),
        ("H100-SXM", 32, 4096, 1, 0.218),
        ("H100-SXM", 32, 4096, 2, 0.223),
        ("H100-SXM", 64, 4096, 1, 0.223),
    ],
)
def test_flashmla_published_rows_with_the_padded_64_row_tile(hw, heads, keys, q_len, measured):
    """Every engine's latent decode kernel multiplies whole 64-row tiles of (query token, head)
    rows: on H20 (a 37 FLOP a byte ridge) 16 to 64 rows take one time, 80 twice it; on H100
    the cache stream binds either way."""
    ms, _ = _core_ms(hw, heads, keys, q_len)
    assert ms == pytest.approx(measured, rel=0.08)


def test_padded_tile_is_the_plain_kernels_not_the_indexers():
    fig = _fig("H20")
    prm = {**default_params("mla_decode"), "eff_compute": 1.0, "eff_memory": 1.0}
    one = kernel_terms(_decode([16.0, 64.0], 4096.0, batch=128.0), fig, prm)["compute_s"]
    assert one[0] == pytest.approx(one[1], rel=0.02)  # 16 heads: a whole 64-row tile


@pytest.mark.parametrize(
    "hw, engine", [("H800", "trtllm"), ("H100-SXM", "sglang"), ("H100-SXM", "vllm"),
                   ("B200", "trtllm"), ("B200", "sglang"), ("B200", "vllm")]
)  # fmt: skip
@pytest.mark.parametrize("keys", [8192, 16384, 131072])
def test_mtp_decode_no_faster_than_any_measured_mla_decode(hw, engine, keys):
    """Two query tokens (MTP) at 128 heads are compute-bound past every measured row (the
    tables time one token): the products take no more than the best rate a measured row of
    the generation reaches (mla_time.MLA_DECODE_RATE_CAP: H100's TensorRT-LLM bf16 row 668
    TFLOP/s, FlashMLA's published H800 best 660; B200's 1,460). Before: H800 at 8,192 keys
    783 TFLOP/s, 16,384 803."""
    from mlacalc.timemodel.mla_time import MLA_DECODE_RATE_CAP

    fig = _fig(hw)
    cap = MLA_DECODE_RATE_CAP[fig.kernel_generation, "bf16"] * fig.sm_count * fig.clock_hz
    ms, flops = _core_ms(hw, 128, keys, 2, engine=engine)
    assert flops / (ms * 1e-3) <= cap * 1.001


def test_rate_cap_is_the_best_measured_row():
    """MLA_DECODE_RATE_CAP is no tuned figure: the best rate of TensorRT-LLM's bf16 rows on
    each device, per SM and clock, and no engine's generation_mla_perf row passes it."""
    pytest.importorskip("pyarrow")  # the measured tables are parquet
    from mlacalc.measured.tables import load_measured
    from mlacalc.timemodel.mla_time import MLA_DECODE_RATE_CAP

    for system, name in (("h100_sxm", "H100-SXM"), ("b200_sxm", "B200")):
        fig = _fig(name)
        best = {}
        for engine in ("trtllm", "sglang", "vllm"):
            for t in load_measured(MEASURED / system, engine=engine).tables:
                if t.table != "generation_mla_perf":
                    continue
                c = t.columns
                keys = c["isl"].astype(float) + c["step"].astype(float)
                rate = c["batch_size"] * keys * c["num_heads"] * 1088.0 * 2.0 / t.seconds
                rate = rate / (fig.sm_count * fig.clock_hz)
                for kv in ("bfloat16", "fp8"):
                    sel = c["kv_cache_dtype"] == kv
                    best[engine, kv] = float(rate[sel].max())
        gen = fig.kernel_generation
        assert best["trtllm", "bfloat16"] == pytest.approx(MLA_DECODE_RATE_CAP[gen, "bf16"], 0.002)
        assert best["trtllm", "fp8"] == pytest.approx(MLA_DECODE_RATE_CAP[gen, "fp8"], 0.002)
        for (_engine, kv), r in best.items():
            assert r <= MLA_DECODE_RATE_CAP[gen, "fp8" if kv == "fp8" else "bf16"] * 1.002


@pytest.mark.parametrize(
    "system, profile, median, p90",
    [
        # SGLang's H100 bf16 rows (FlashAttention-3's 64-row pack_gqa tile): 7.0% / 20.5%
        # fitted and 10.3% / 23.2% from B200 before the padded tile (mla_time.PAD_SPLIT_TILES),
        # one head 7.5% fast and 128 heads 7.7% slow; 4.9% / 16.2% and 7.1% / 20.9% after;
        # from B200 9.5% / 23.5% since B200's class took a cost a CTA (``cta_s``, round 23),
        # which carries the split wait Hopper's kernels pay (``split_wait_s`` refitted to 0)
        ("h100_sxm", "fit-h100-sxm-sglang", 0.055, 0.175),
        ("h100_sxm", "fit-b200-sxm-sglang", 0.10, 0.245),
    ],
)
def test_sglang_bf16_decode_with_the_padded_tile(system, profile, median, p90):
    e = _sglang_decode_errors(system, profile, "bf16")
    assert e.size > 1000
    assert np.median(e) <= median and np.percentile(e, 90) <= p90


@pytest.mark.parametrize(
    "name, variant, keys",
    [("B200", "", 256.0), ("B200", "sparse", 128.0), ("H100-SXM", "", 128.0)],
)
def test_blackwell_kernel_first_splits_at_512_keys(name, variant, keys):
    # TensorRT-LLM-gen's MLA decode (the plain kernel on ``tcgen05``) splits a sequence's keys
    # into parts of 256 and more, FlashMLA into parts of 128: one sequence of 256 keys runs no
    # combine kernel on B200 and splits on H100
    fig = _fig(name)
    assert mla_split_keys(_decode([16.0], 256.0, variant=variant), fig) == keys
    prm = default_params("mla_decode")
    if variant:
        return
    extra = [kernel_terms(_decode([16.0], kv), fig, prm)["extra_s"][0] for kv in (128.0, 256.0)]
    merges = extra[1] > extra[0] + 0.5 * prm["launch_s"]
    assert merges == (name == "H100-SXM")


def _b200_step_from_128_to_256_keys(engine: str, profile: str) -> dict[str, float]:
    """Per cache dtype, the median over B200 ``generation_mla_perf`` shapes of at most 16
    sequences of the predicted time's ratio from 128 to 256 cached keys over the measured one,
    less 1."""
    pytest.importorskip("pyarrow")
    from mlacalc.measured.mapping import map_table
    from mlacalc.measured.observations import predict_mapped
    from mlacalc.measured.tables import load_measured
    from mlacalc.timemodel.profile import load_profile

    tables = load_measured(MEASURED / "b200_sxm" / "mla", engine=engine).tables
    t = next(x for x in tables if x.table == "generation_mla_perf")
    pred = predict_mapped(map_table(t), None, load_profile(profile))
    c, out = t.columns, {}
    for kv in ("bfloat16", "fp8"):
        ratios = []
        for b in (1, 2, 4, 8, 16):
            for h in np.unique(c["num_heads"]):
                same = (c["batch_size"] == b) & (c["num_heads"] == h) & (c["kv_cache_dtype"] == kv)
                hi, lo = same & (c["step"] == 255), same & (c["step"] == 127)
                if hi.sum() == 1 and lo.sum() == 1:
                    r = (pred[hi][0] / pred[lo][0]) / (t.seconds[hi][0] / t.seconds[lo][0])
                    ratios.append(r - 1.0)
        assert len(ratios) >= 35
        out[kv] = float(np.median(ratios))
    return out


@pytest.mark.parametrize(
    "engine, profile", [("trtllm", "fit-b200-sxm"), ("sglang", "fit-b200-sxm-sglang")]
)
def test_blackwell_rows_of_256_keys_run_no_combine(engine, profile):
    # B200's rows take one time from 2 to 256 cached keys and a combine kernel's step at 512;
    # with FlashMLA's 128-key parts the model stepped up from 128 to 256 keys by 17-20% more
    # than the rows (median, 1-16 sequences; TensorRT-LLM and SGLang, bf16 and fp8), 2-7% with
    # the 256-key parts
    for kv, e in _b200_step_from_128_to_256_keys(engine, profile).items():
        assert abs(e) <= 0.12, (kv, e)


@pytest.mark.parametrize("name", ["H100-SXM", "B200"])
def test_split_units_wait_beside_their_stream(name):
    # each unit an SM runs in turn of the key-splitting latent kernels waits ``split_wait_s``
    # beside its stream, added to the call's time; not the kernel that walks a whole cache on
    # one SM (A100's, ``kv_split`` 0)
    fig = _fig(name)
    prm = default_params("mla_decode")
    waited = dict(prm, split_wait_s=4e-6)
    batch = _decode([16.0, 128.0], 65536.0, batch=512.0)
    added = kernel_terms(batch, fig, waited)["seconds"] - kernel_terms(batch, fig, prm)["seconds"]
    tiles = np.array([1.0, 128.0 / mla_tile_rows(batch, fig)[1]])
    assert np.allclose(added, 4e-6 * 512.0 * tiles / fig.sm_count, rtol=1e-9)
    walk = _decode([16.0], 65536.0, batch=512.0)
    walk.shape["kv_split"] = np.zeros(1)
    assert (
        kernel_terms(walk, fig, waited)["seconds"][0] == kernel_terms(walk, fig, prm)["seconds"][0]
    )


def test_blackwell_mla_decode_splits_a_sequence_into_at_most_32_parts():
    # one sequence of 128 heads (one 128-row unit) on B200: one part an SM would be 148 parts
    # of 886 keys at 131,072 keys; TensorRT-LLM-gen's kernel takes at most 32 (Hopper's
    # FlashMLA keeps one part an SM)
    from mlacalc.timemodel.mla_time import TCGEN05_MLA_MAX_SPLITS, mla_max_splits

    batch = _decode([128.0], 131072.0)
    assert mla_max_splits(batch, _fig("B200")) == TCGEN05_MLA_MAX_SPLITS == 32.0
    assert mla_max_splits(batch, _fig("H100-SXM")) == np.inf


@pytest.mark.parametrize(
    "engine, bound",
    [
        # median |error| of the rows at one sequence and 16,384-131,072 keys, bf16 and fp8:
        # TensorRT-LLM 34.9% / 37.1% and SGLang 34.0% / 33.4% (all fast) with parts filling
        # the SMs; 22.1% / 13.3% and 15.2% / 12.0% with at most 32; SGLang 22.6% / 16.5% with
        # the low-latency kernel's 16-row units (its 64-head rows at 16,384-32,767 keys go
        # with the 32-head ones, both 23-28% fast) and its class refitted
        ("trtllm", 0.25),
        ("sglang", 0.24),
    ],
)
def test_blackwell_mla_decode_one_long_sequence(engine, bound):
    t, mapped, err = _b200_mla_errors(engine)
    kv = t.column("isl") + t.column("step")
    for dtype in ("bf16", "fp8"):
        keep = rows_running(mapped, dtype, "mla_decode") & mapped.modelled
        keep &= (t.column("batch_size") == 1) & (kv >= 16384)
        assert keep.sum() >= 30
        assert np.median(np.abs(err[keep])) <= bound


def test_blackwell_latent_kernel_pays_a_time_per_cta():
    # TensorRT-LLM-gen's plain latent kernel on B200 adds ``cta_s`` a CTA of its grid (a
    # sequence's 16-row units, one part each at 255 keys), below one wave as past it; Hopper's
    # FlashMLA and the sparse kernels pay none
    prm = default_params("mla_decode")
    priced = dict(prm, cta_s=3e-8)
    b200 = _fig("B200")
    batch = _decode([1.0, 64.0], 255.0, batch=16.0)  # 16 and 64 CTAs (4 units a sequence)
    added = kernel_terms(batch, b200, priced)["seconds"] - kernel_terms(batch, b200, prm)["seconds"]
    assert np.allclose(added, 3e-8 * np.array([16.0, 64.0]), rtol=1e-9)
    sparse = _decode([16.0], 255.0, variant="sparse")
    assert np.array_equal(
        kernel_terms(sparse, b200, priced)["seconds"], kernel_terms(sparse, b200, prm)["seconds"]
    )
    # Hopper's kernels, flat below a wave, read it as a wait per unit an SM runs in turn
    h100 = _fig("H100-SXM")
    added = kernel_terms(batch, h100, priced)["seconds"] - kernel_terms(batch, h100, prm)["seconds"]
    assert np.allclose(added, 3e-8 * h100.sm_count, rtol=1e-9)


@pytest.mark.parametrize(
    "engine, dtype, bound",
    [
        # median |error| of B200's short-cache rows (up to 255 keys) of 32-256 CTAs, 259 a
        # table and dtype, where the rows step up with the CTAs below one wave: TensorRT-LLM
        # bf16 / fp8 and SGLang bf16 / fp8 12.3% / 9.2% / 7.3% / 6.9% before the cost a CTA,
        # 6.7% / 5.1% / 6.6% / 4.5% with it (the classes refitted)
        ("trtllm", "bf16", 0.08),
        ("trtllm", "fp8", 0.065),
        ("sglang", "bf16", 0.075),
        ("sglang", "fp8", 0.06),
    ],
)
def test_blackwell_short_cache_rows_grow_with_their_ctas(engine, dtype, bound):
    from mlacalc.timemodel.mla_time import mla_unit_count

    _, mapped, err = _b200_mla_errors(engine)
    part = next(p for p in mapped.parts if p.batch.kind == "mla_decode" and p.batch.dtype == dtype)
    b = part.batch
    tiles = np.ceil(b.shape["n_heads"] * b.shape["q_len"] / mla_unit_rows(b, _fig("B200")))
    ctas = b.shape["batch"] * mla_unit_count(b, tiles)
    keep = (b.shape["kv_len"] <= 255.0) & (ctas >= 32.0) & (ctas <= 256.0)
    rows = part.rows[keep]
    assert rows.size >= 100
    assert np.median(np.abs(err[rows][mapped.modelled[rows]])) <= bound
