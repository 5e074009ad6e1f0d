"""A DSA layer's sparse MLA kernel (DeepSeek-V3.2, GLM-5) as each engine runs it on each device:
one rule (mlacalc.timemodel.dsa_time) for the module tables' mapping and a served model step.
TensorRT-LLM on Hopper (both phases) and vLLM on Hopper with an fp8 cache (decode; prompts of
at most 16 heads) walk every top-k slot of a query in 64-head passes; SGLang and every engine on
Blackwell walk the slots the keys fill, at their heads."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from reference_data import MEASURED

from mlacalc.cost.model_step import step_kernels
from mlacalc.hardware.catalogue import load_hardware
from mlacalc.timemodel.device import device_figures
from mlacalc.timemodel.dsa_time import (
    engine_dsa_kernel,
    walk_heads,
    walked_core,
    walked_row_bytes,
)
from mlacalc.timemodel.kernel_time import device_batch, predict_batch, run_class
from mlacalc.timemodel.profile import load_profile
from mlacalc.words.kernels import batches_of

H100, B200 = device_figures(load_hardware("H100-SXM")), device_figures(load_hardware("B200"))


def test_the_walking_rule_by_engine_generation_phase_cache_and_heads():
    heads = np.array([1.0, 16, 32, 64, 128, 256])
    fp8, bf16 = np.ones(6, bool), np.zeros(6, bool)
    for context in (True, False):  # TensorRT-LLM on Hopper: any cache, up to 128 heads
        for cache in (fp8, bf16):
            got = walk_heads("trtllm", "sm90", context, cache, heads)
            assert got.tolist() == [64, 64, 64, 64, 64, 0]
    assert walk_heads("vllm", "sm90", True, fp8, heads).tolist() == [64, 64, 0, 0, 0, 0]
    assert walk_heads("vllm", "sm90", False, fp8, heads).tolist() == [64] * 5 + [0]
    assert not walk_heads("vllm", "sm90", False, bf16, heads).any()
    for engine in ("trtllm", "vllm", "sglang"):
        assert not walk_heads(engine, "tcgen05", False, fp8, heads).any()  # Blackwell
    for context in (True, False):  # SGLang on Hopper: its fp8 cache's FlashMLA kernel
        assert walk_heads("sglang", "sm90", context, fp8, heads).tolist() == [64] * 5 + [0]
        assert not walk_heads("sglang", "sm90", context, bf16, heads).any()


def test_a_walk_pads_the_heads_to_whole_passes_and_gathers_once_a_pass():
    w = walked_core(10, np.array([16.0, 100.0]), 2048, 576, 512, 1.0, 64)
    assert w["n_heads"].tolist() == [64, 128] and (w["kv_len"] == 2048).all()
    assert w["flops"][0] == 2 * 64 * 10 * 2048 * (576 + 512)
    # q and out at the padded heads in bf16, one gather of 2,048 fp8 rows a pass, each as
    # FlashMLA's sparse fp8 cache stores it: 512 fp8 values, 4 float32 scales, 64 bf16 RoPE
    assert w["bytes"][1] == 10 * 128 * 576 * 2 + 10 * 2048 * 2 * 656 + 10 * 128 * 512 * 2
    b = walked_core(10, np.array([16.0]), 2048, 576, 512, 2.0, 64)  # a bf16 cache: 576 x 2
    assert b["bytes"][0] == 10 * 64 * 576 * 2 + 10 * 2048 * 1152 + 10 * 64 * 512 * 2


def test_a_walked_slot_is_the_row_as_the_cache_stores_it():
    """fp8: FlashMLA's ``fp8_ds_mla`` row (the KV layout the cost model sizes caches with);
    bf16: the 576 values at two bytes; GLM-5's latent (512 + 64) is DeepSeek-V3.2's."""
    from mlacalc.words.dtypes import resolve_kv_layout

    got = walked_row_bytes(np.array([576.0, 576.0]), 512.0, np.array([1.0, 2.0]))
    assert got.tolist() == [656.0, 1152.0]
    assert got[0] == resolve_kv_layout("fp8_ds_mla").row_bytes(512, 64)


def _step_core(phase: str, keys: int, batch: int, kv: str, heads: int):
    """The model step's DSA core of DeepSeek-V3.2 (one layer), its heads those of one rank."""
    q_len = keys if phase == "prefill" else None
    ks = step_kernels(
        "deepseek-v3.2", phase, keys, batch, q_len=q_len, kv_dtype=kv, causal=True,
        scope="attention_layer",
    )  # fmt: skip
    core = next(k for k in ks if k.name == "attention")
    core = dataclasses.replace(core, shape={**core.shape, "n_heads": heads})
    ((_, b),) = batches_of([core])
    return b


@pytest.mark.parametrize(
    ("engine", "fig", "kv"),
    [("sglang", H100, "bf16"), ("trtllm", B200, "fp8"), ("sglang", B200, "fp8")],
)
def test_where_the_tables_show_no_walk_a_decode_core_is_unchanged(engine, fig, kv):
    b = device_batch(_step_core("decode", 1024, 8, kv, 16), load_hardware("H100-SXM"))
    run = engine_dsa_kernel(b, engine, fig)
    assert run.variant == "" and run.kind == b.kind and run.dtype == b.dtype
    assert np.array_equal(run.flops, b.flops) and np.array_equal(run.bytes, b.bytes)
    assert all(np.array_equal(run.shape[k], v) for k, v in b.shape.items())


def test_sglang_s_prompt_runs_dense_while_every_key_is_picked():
    """SGLang's module rows name the dense MHA up to 2,048 keys (FlashAttention-3 on H100,
    TensorRT-LLM's ragged kernel on B200): a prompt of at most ``index_topk`` keys keeps the
    expanded core the step counts; past it, the absorbed sparse kernel."""
    hw = load_hardware("H100-SXM")
    for fig in (H100, B200):
        b = device_batch(_step_core("prefill", 2048, 2, "bf16", 16), hw)
        run = engine_dsa_kernel(b, "sglang", fig)
        assert (run.kind, run.variant) == ("mla_prefill", "")
        assert np.array_equal(run.flops, b.flops) and np.array_equal(run.bytes, b.bytes)
        run = engine_dsa_kernel(device_batch(_step_core("prefill", 2049, 2, "bf16", 16), hw),
                                "sglang", fig)  # fmt: skip
        assert (run.kind, run.variant, run.shape["kv_len"][0]) == ("mla_decode", "sparse", 2048)


def test_sglang_s_dense_choice_is_the_whole_batch_s_in_any_row_order():
    """A prompt's chunks are one batch: with any row past top-k, every row runs the sparse
    kernel, in either order (the first row's keys had decided: a 32K prompt in chunks of 2,048
    ran every chunk dense, its 16K-key chunks at 2,048 keys' cost; a review found it)."""
    hw = load_hardware("H100-SXM")
    rows = [device_batch(_step_core("prefill", k, 1, "bf16", 16), hw) for k in (2048, 16384)]
    for order in (rows, rows[::-1]):
        b = dataclasses.replace(
            order[0],
            flops=np.concatenate([r.flops for r in order]),
            bytes=np.concatenate([r.bytes for r in order]),
            calls=np.concatenate([r.calls for r in order]),
            shape={k: np.concatenate([r.shape[k] for r in order]) for k in order[0].shape},
        )
        run = engine_dsa_kernel(b, "sglang", H100)
        assert (run.kind, run.variant) == ("mla_decode", "sparse")
        assert sorted(run.shape["kv_len"].tolist()) == [2048, 2048]
        assert sorted(run.shape["batch"].tolist()) == [2048, 16384]


@pytest.mark.parametrize(("engine", "fig"), [("trtllm", B200), ("vllm", B200), ("vllm", H100)])
def test_past_the_walk_a_prompt_runs_the_absorbed_sparse_kernel(engine, fig):
    """Every prompt the walk rule leaves alone (but SGLang's dense one) runs the absorbed
    sparse kernel: a token one query of its heads over ``min(keys, top-k)`` latent rows, the
    score and value products over the 576 / 512 latent widths (3.4x the expanded core's 192 /
    128 at the same keys); TensorRT-LLM-gen's (TensorRT-LLM's own on B200) over its causal
    picks, ``min(position, top-k)`` a token (dsa_time.causal_picks: 1,792.125 on average over
    8,192 new tokens)."""
    b = device_batch(_step_core("prefill", 8192, 2, "bf16", 64), load_hardware("H100-SXM"))
    run = engine_dsa_kernel(b, engine, fig)
    variant = "sparse_gen" if engine == "trtllm" else "sparse"  # mla_time.GEN_SPARSE_VARIANT
    assert (run.kind, run.dtype, run.variant) == ("mla_decode", "bf16", variant)
    assert run.shape["batch"][0] == 2 * 8192 and run.shape["q_len"][0] == 1
    kv = 1792.125 if engine == "trtllm" else 2048
    assert run.shape["kv_len"][0] == kv and run.shape["n_heads"][0] == 64
    assert run.flops[0] == 2 * 64 * 2 * 8192 * kv * (576 + 512)
    # q and out per token and head, and a sequence's 8,192 latent rows once, bf16
    assert run.bytes[0] == (2 * 8192 * 64 + 2 * 8192) * 576 * 2 + 2 * 8192 * 64 * 512 * 2


@pytest.mark.parametrize(
    ("fig", "kv", "heads", "unit", "split"),
    [(B200, "fp8", 128, 64, 1), (B200, "bf16", 16, 64, 1), (B200, "bf16", 128, 0, 1),
     (H100, "bf16", 16, 0, 0)],
)  # fmt: skip
def test_vllm_s_decode_runs_its_prompt_s_sparse_kernel_where_it_does_not_walk(
    fig, kv, heads, unit, split
):
    """vLLM runs one sparse kernel for every query (dsa_time.ONE_SPARSE_KERNEL): where no walk
    holds, a decode step's query is one more query of the prompt's absorbed sparse kernel
    (FlashInfer's 64-head unit with an fp8 cache or at most 16 heads on B200, FlashMLA's MMA
    rows otherwise), not the plain MLA decode class it had been."""
    b = device_batch(_step_core("decode", 1025, 8, kv, heads), load_hardware("H100-SXM"))
    run = engine_dsa_kernel(b, "vllm", fig)
    # FlashMLA's sparse class for FlashInfer's kernel too (dsa_time.DECODE_SPARSE_VARIANT)
    assert (run.kind, run.dtype, run.variant) == ("mla_decode", "bf16", "sparse")
    assert run.shape["batch"][0] == 8 and run.shape["q_len"][0] == 1
    assert run.shape["kv_len"][0] == 1025 and run.shape["n_heads"][0] == heads
    assert run.shape["unit_heads"][0] == unit and run.shape["kv_split"][0] == split
    assert run.flops[0] == 2 * heads * 8 * 1025 * (576 + 512)
    assert run.bytes[0] == (8 * heads + 8 * 1025) * 576 * 2 + 8 * heads * 512 * 2
    long = device_batch(_step_core("decode", 32768, 8, kv, heads), load_hardware("H100-SXM"))
    assert engine_dsa_kernel(long, "vllm", fig).shape["kv_len"][0] == 2048  # the top-k


def test_vllm_h100_walks_with_an_fp8_cache_only():
    hw = load_hardware("H100-SXM")
    b = device_batch(_step_core("decode", 1024, 8, "bf16", 16), hw)
    assert engine_dsa_kernel(b, "vllm", H100).shape["kv_len"][0] == 1024  # its keys
    b = device_batch(_step_core("decode", 1024, 8, "fp8", 16), hw)
    run = engine_dsa_kernel(b, "vllm", H100)
    assert run.shape["kv_len"][0] == 2048 and run.shape["n_heads"][0] == 64
    # the prompt's walking kernel (one kernel for a query in both phases): bf16 products, a
    # query's walk on one SM, FlashMLA's unit (the MMA's rows); before, the plain decode class
    # splitting the keys (dsa_time.SPARSE_WALK's note on the phases); its own class, fitted on
    # the module rows' residuals (mla_time.WALK_VARIANT)
    assert (run.variant, run.dtype) == ("sparse_walk", "bf16")
    assert run.shape["kv_split"][0] == 0 and run.shape["unit_heads"][0] == 0
    assert run.shape["kv_bytes"][0] == 1  # its cache read as stored (walked_row_bytes)


def test_sglang_h100_fp8_walk_is_flashmla_s_fp8_decode_kernel_in_both_phases():
    """SGLang's H100 fp8 cache (``..._flashmla_kv``): every top-k slot walked in 64-head passes
    by FlashMLA's fp8 sparse decode kernel, timed by its own class (``mla_decode`` fp8
    ``sparse``), the keys split as FlashMLA's decode kernels split them, 656-byte rows; a
    prompt of at most 2,048 keys still runs the dense MHA (its rows' ``..._dense_mha_fa3``).
    vLLM's fp8 walk stays the prompt's walking kernel (bf16, no split: KV_CACHE_WALK)."""
    from mlacalc.timemodel.device import mla_decode_kernel
    from mlacalc.timemodel.dsa_time import kv_cache_walk

    hw = load_hardware("H100-SXM")
    assert kv_cache_walk("sglang", "sm90", [True, False]).tolist() == [True, False]
    assert not kv_cache_walk("vllm", "sm90", [True]).any()
    assert not kv_cache_walk("sglang", "tcgen05", [True]).any()
    for phase, keys in (("decode", 1024), ("prefill", 4096)):
        b = device_batch(_step_core(phase, keys, 2, "fp8", 16), hw)
        run = engine_dsa_kernel(b, "sglang", H100)
        assert (run.kind, run.dtype, run.variant) == ("mla_decode", "fp8", "sparse")
        assert run.shape["kv_len"][0] == 2048 and run.shape["n_heads"][0] == 64
        assert run.shape["kv_split"][0] == mla_decode_kernel(H100)["kv_split"]
        assert run.shape["kv_bytes"][0] == 1
    dense = engine_dsa_kernel(device_batch(_step_core("prefill", 2048, 2, "fp8", 16), hw),
                              "sglang", H100)  # fmt: skip
    assert dense.kind == "mla_prefill" and dense.variant == ""


def _mapped_core(table: str, heads: int, batch: int, step: int, isl: int):
    """The mapped sparse MLA kernel of TensorRT-LLM's H100 row of DeepSeek-V3.2 at that shape
    (bf16 GEMMs and cache), without what the module row adds to it (the RoPE and append
    pre-kernel of a decode row, timed as kernels of their own in a step)."""
    pytest.importorskip("pyarrow")
    from mlacalc.measured.mapping import map_table
    from mlacalc.measured.tables import load_measured

    path = MEASURED / "h100_sxm" / "sparse_attention" / "trtllm" / "1.3.0rc20" / f"{table}.parquet"
    (t,) = load_measured(path).tables
    c = t.columns
    hit = (c["model"].astype(str) == "deepseek-ai/DeepSeek-V3.2") & (c["num_heads"] == heads)
    hit &= (c["batch_size"] == batch) & (c["step"] == step) & (c["isl"] == isl)
    hit &= c["gemm_type"].astype(str) == "bfloat16"
    (row,) = np.flatnonzero(hit)[:1]
    cols = {k: v[[row]] for k, v in c.items()}
    mapped = map_table(dataclasses.replace(t, columns=cols, seconds=t.seconds[[row]]))
    (p,) = [p for p in mapped.parts if p.name in ("sparse_mla", "mla_decode")]
    b = p.batch
    pre = b.shape["preprocess_bytes"]
    shape = {**b.shape, "preprocess_bytes": 0 * pre, "rope_kernel": 0 * pre}
    shape["rope_elements"] = 0 * pre
    return dataclasses.replace(b, bytes=b.bytes - pre, shape=shape)


@pytest.mark.parametrize("heads", [16, 128])
@pytest.mark.parametrize("phase", ["decode", "prefill"])
def test_a_served_step_runs_the_mapped_module_rule(phase, heads):
    """TensorRT-LLM on H100: the step's core (16 heads: a TP8 rank of DeepSeek-V3.2) runs the
    kernel the module table's row of that shape is mapped to, at its time."""
    hw, prof = load_hardware("H100-SXM"), load_profile("default")
    if phase == "decode":
        mapped = _mapped_core("dsa_generation_module_perf", heads, 64, 1024, 1)
        step = _step_core("decode", 1025, 64, "bf16", heads)
    else:
        mapped = _mapped_core("dsa_context_module_perf", heads, 4, 0, 1024)
        step = _step_core("prefill", 1024, 4, "bf16", heads)
    run, *_ = run_class(step, hw, prof)
    assert (run.kind, run.dtype, run.variant) == (mapped.kind, mapped.dtype, mapped.variant)
    for key in ("batch", "q_len", "kv_len", "n_heads", "head_dim_qk", "head_dim_v", "kv_split"):
        assert run.shape[key][0] == mapped.shape[key][0], key
    assert run.flops[0] == pytest.approx(mapped.flops[0], rel=1e-12)
    assert run.bytes[0] == pytest.approx(mapped.bytes[0], rel=1e-12)
    got, want = predict_batch(step, hw, prof)[0], predict_batch(mapped, hw, prof)[0]
    assert got == pytest.approx(want, rel=1e-9)


def test_sglang_b200_dsa_decode_core_runs_between_the_absorption_bmms():
    """SGLang's B200 DSA decode core on the plain latent decode class takes the absorbed
    chain's saving (dsa_time.DSA_DECODE_CHAIN: mla_time.CHAIN_SAVING_S), in a served step and
    in its module rows alike; TensorRT-LLM's B200 core and SGLang's H100 one do not. Its module
    rows run SGLang's own kernels before the call (dsa_time.DSA_DECODE_PRE_KERNELS)."""
    from mlacalc.timemodel.dsa_time import dsa_decode_chain
    from mlacalc.timemodel.mla_time import chain_saving_s

    assert dsa_decode_chain("sglang", "tcgen05")
    assert not dsa_decode_chain("trtllm", "tcgen05") and not dsa_decode_chain("sglang", "sm90")
    hw, prof = load_hardware("B200"), load_profile("fit-b200-sxm-sglang")
    b = device_batch(_step_core("decode", 1024, 8, "fp8", 16), hw)
    run = engine_dsa_kernel(b, "sglang", B200)
    assert run.variant == "" and run.shape["absorbed_chain"][0] == 1
    assert "absorbed_chain" not in engine_dsa_kernel(b, "trtllm", B200).shape
    alone = dataclasses.replace(run, shape={**run.shape, "absorbed_chain": np.zeros(1)})
    saved = predict_batch(alone, hw, prof)[0] - predict_batch(run, hw, prof)[0]
    assert saved == pytest.approx(chain_saving_s(B200), rel=1e-9)
    mapped = _mapped_row("b200_sxm", "sglang", "dsa_generation_module_perf", "mla_decode",
                         num_heads=16, batch_size=8, step=1024, kv_cache_dtype="fp8")  # fmt: skip
    assert mapped.shape["absorbed_chain"][0] == 1
    trt = _mapped_row("b200_sxm", "trtllm", "dsa_generation_module_perf", "mla_decode",
                      num_heads=16, batch_size=8, step=1024, kv_cache_dtype="fp8")  # fmt: skip
    assert trt.shape["absorbed_chain"][0] == 0
    # its kernels before the call (dsa_time.DSA_DECODE_PRE_KERNELS): one fused RoPE + fp8
    # quantize + write with an fp8 cache, three with a bf16 one; TensorRT-LLM's the default
    from mlacalc.timemodel.dsa_time import dsa_decode_pre_kernels

    assert mapped.shape["pre_kernels"][0] == 1
    assert dsa_decode_pre_kernels("sglang", "tcgen05", np.array([True, False])).tolist() == [1, 3]
    assert trt.shape["pre_kernels"][0] == 0
    on = {**mapped.shape, "rope_kernel": np.ones(1)}
    two = dataclasses.replace(mapped, shape={**on, "pre_kernels": np.full(1, 2.0)})
    one = dataclasses.replace(mapped, shape=on)
    launch = predict_batch(two, hw, prof)[0] - predict_batch(one, hw, prof)[0]
    assert launch == pytest.approx(2e-6, rel=0.5)  # one launch_s less


def _mapped_row(system: str, engine: str, table: str, part: str, **match):
    """The mapped kernel ``part`` of the one DeepSeek-V3.2 row of an engine's DSA module
    ``table`` whose columns equal ``match``, without the RoPE pre-kernel's launch the mapped
    kernel carries by default (a step times RoPE as a kernel of its own)."""
    pytest.importorskip("pyarrow")
    from mlacalc.measured.mapping import map_table
    from mlacalc.measured.tables import load_measured

    version = {"trtllm": "1.3.0rc20", "sglang": "0.5.14", "vllm": "0.24.0"}[engine]
    path = MEASURED / system / "sparse_attention" / engine / version
    (t,) = load_measured(path / f"{table}.parquet").tables
    c = t.columns
    hit = c["model"].astype(str) == "deepseek-ai/DeepSeek-V3.2"
    for key, value in match.items():
        hit &= (c[key].astype(str) == value) if isinstance(value, str) else (c[key] == value)
    row = np.flatnonzero(hit)[0]
    cols = {k: v[[row]] for k, v in c.items()}
    mapped = map_table(dataclasses.replace(t, columns=cols, seconds=t.seconds[[row]]))
    (p,) = [p for p in mapped.parts if p.name == part]
    return dataclasses.replace(p.batch, shape={**p.batch.shape, "rope_kernel": np.zeros(1)})


def _mapped_prompt(system: str, engine: str, heads: int, kv: str, source: str):
    """The mapped sparse MLA kernel of one engine's prompt row of DeepSeek-V3.2: one sequence
    of 4,096 new tokens, ``heads`` heads, a ``kv`` cache, the attention ``source`` names."""
    return _mapped_row(system, engine, "dsa_context_module_perf", "sparse_mla", num_heads=heads,
                       batch_size=1, step=0, isl=4096, kv_cache_dtype=kv,
                       kernel_source=source)  # fmt: skip


@pytest.mark.parametrize("heads", [16, 128])
@pytest.mark.parametrize(
    ("system", "engine", "kv", "source"),
    [
        ("h100_sxm", "sglang", "bfloat16", "sglang_dsa_indexer_flashmla_sparse"),
        ("h100_sxm", "sglang", "fp8", "sglang_dsa_indexer_flashmla_kv"),
        ("b200_sxm", "sglang", "bfloat16", "sglang_dsa_indexer_flashmla_sparse"),
        ("b200_sxm", "sglang", "fp8", "sglang_dsa_indexer_trtllm"),
        ("b200_sxm", "trtllm", "bfloat16", "default"),
        ("b200_sxm", "trtllm", "fp8", "default"),
        ("b200_sxm", "vllm", "bfloat16", "FLASHINFER_MLA_SPARSE|FLASHMLA_SPARSE"),
        ("b200_sxm", "vllm", "fp8", "FLASHINFER_MLA_SPARSE"),
        ("h100_sxm", "vllm", "bfloat16", "FLASHMLA_SPARSE"),
    ],
)
def test_a_served_prompt_past_the_walk_runs_the_mapped_module_kernel(
    system, engine, kv, source, heads
):
    """Where no walk applies, a served prompt of 4,096 tokens runs the kernel its engine's
    module row of that shape is mapped to (the absorbed sparse kernel, or SGLang's
    TensorRT-LLM-gen decode kernel on B200 with an fp8 cache), at its time under the engine's
    fit of that device. ``a|b``: the source at 16 heads, and at 128 (vLLM's B200 bf16 rows:
    FlashInfer's up to 16 heads)."""
    source = source.split("|")[heads > 16] if "|" in source else source
    profile = f"fit-{system.replace('_', '-')}" + ("" if engine == "trtllm" else f"-{engine}")
    hw, prof = load_hardware("H100-SXM" if system == "h100_sxm" else "B200"), load_profile(profile)
    mapped = _mapped_prompt(system, engine, heads, kv, source)
    step = _step_core("prefill", 4096, 1, "fp8" if kv == "fp8" else "bf16", heads)
    _same_kernel(step, mapped, hw, prof)


def _mapped_decode(system: str, heads: int, kv: str, source: str):
    """The mapped sparse MLA kernel of vLLM's decode row of DeepSeek-V3.2: 64 sequences after
    1,024 cached tokens, ``heads`` heads, bf16 GEMMs, a ``kv`` cache, the ``source`` named."""
    return _mapped_row(system, "vllm", "dsa_generation_module_perf", "mla_decode",
                       num_heads=heads, batch_size=64, step=1024, isl=1, kv_cache_dtype=kv,
                       kernel_source=source, gemm_type="bfloat16")  # fmt: skip


@pytest.mark.parametrize("heads", [16, 128])
@pytest.mark.parametrize(
    ("system", "kv", "source"),
    [
        ("b200_sxm", "bfloat16", "FLASHINFER_MLA_SPARSE|FLASHMLA_SPARSE"),
        ("b200_sxm", "fp8", "FLASHINFER_MLA_SPARSE"),
        ("h100_sxm", "bfloat16", "FLASHMLA_SPARSE"),
    ],
)
def test_a_served_vllm_decode_runs_the_mapped_module_kernel(system, kv, source, heads):
    """Where no walk applies, a served vLLM decode core (64 sequences, 1,025 keys) runs the
    kernel vLLM's module row of that shape is mapped to (the prompt's sparse kernel), at its
    time under vLLM's fit of that device."""
    source = source.split("|")[heads > 16] if "|" in source else source
    hw = load_hardware("H100-SXM" if system == "h100_sxm" else "B200")
    prof = load_profile(f"fit-{system.replace('_', '-')}-vllm")
    mapped = _mapped_decode(system, heads, kv, source)
    step = _step_core("decode", 1025, 64, "fp8" if kv == "fp8" else "bf16", heads)
    _same_kernel(step, mapped, hw, prof)


def test_a_plan_of_deepseek_v32_on_8_h100_under_trtllm_walks():
    """The plan's decode step: each TP8 rank's 16 heads run one 64-head pass over all 2,048
    slots of every sequence, the time the module table's rule gives that shape."""
    from mlacalc.serving.plan import plan

    p = plan(
        "deepseek-v3.2", "H100-SXM", gpus=8, weight_dtype="fp4", isl=2000, osl=500,
        concurrency=64, kv_dtype="bf16", engine="trtllm",
    )  # fmt: skip
    assert p.decode_batch == 64
    (k,) = [k for k in p.kernels if k["name"] == "attention"]
    mapped = _mapped_core("dsa_generation_module_perf", 16, 64, 1024, 1)
    want = predict_batch(mapped, "H100-SXM", "default")[0]
    assert k["seconds"] / k["calls"] == pytest.approx(want, rel=1e-6)


def test_the_sparse_kernels_unit_is_tensorrt_llm_gen_s_own_or_the_mma_s_rows():
    """TensorRT-LLM-gen's sparse MLA (TensorRT-LLM's own, vLLM's FlashInfer backend) takes 64
    heads a unit on every device; FlashMLA's (SGLang, vLLM's FLASHMLA_SPARSE) the MMA's rows:
    128 on Blackwell, whose padded rows it multiplies."""
    from mlacalc.timemodel.dsa_time import sparse_unit_heads
    from mlacalc.timemodel.mla_time import mla_tile_rows, padded_products

    assert sparse_unit_heads("trtllm") == 64 and sparse_unit_heads("sglang") == 0
    src = np.array(["FLASHINFER_MLA_SPARSE", "FLASHMLA_SPARSE"])
    assert sparse_unit_heads("vllm", src).tolist() == [64, 0]
    b = device_batch(_step_core("decode", 1024, 8, "bf16", 64), load_hardware("B200"))
    flash = dataclasses.replace(b, variant="sparse")
    gen = dataclasses.replace(flash, shape={**flash.shape, "unit_heads": np.full(1, 64.0)})
    assert mla_tile_rows(flash, B200)[0] == 128 and mla_tile_rows(flash, H100)[0] == 64
    # TensorRT-LLM-gen's unit is the MMA's rows where they are more (B200's 128: one unit at
    # 128 heads; test_tensorrt_llm_gen_s_sparse_kernel_runs_128_heads_in_one_unit_on_blackwell)
    assert mla_tile_rows(gen, B200)[0] == 128 and mla_tile_rows(gen, H100)[0] == 64
    assert padded_products(flash)[0] and not padded_products(gen)[0]


def _dsa_prompt_signed(engine: str, profile: str) -> dict:
    """Signed median error of the B200 DSA prompt module rows (``dsa_context_module_perf``)
    of ``engine`` by ``profile``, per (kernel source, cache dtype, heads)."""
    pytest.importorskip("pyarrow")
    from mlacalc.measured.mapping import map_table
    from mlacalc.measured.observations import predict_mapped
    from mlacalc.measured.tables import load_measured

    tables = load_measured(MEASURED / "b200_sxm", engine=engine).tables
    (t,) = [x for x in tables if x.table == "dsa_context_module_perf"]
    err = predict_mapped(map_table(t), t.device, load_profile(profile)) / t.seconds - 1.0
    keys = zip(t.column("kernel_source"), t.column("kv_cache_dtype"), t.column("num_heads"))
    groups: dict = {}
    for key, e in zip(keys, err):
        groups.setdefault((str(key[0]), str(key[1]), int(key[2])), []).append(e)
    return {k: float(np.nanmedian(v)) for k, v in groups.items()}


def test_tensorrt_llm_gen_s_sparse_kernel_runs_128_heads_in_one_unit_on_blackwell():
    """TensorRT-LLM-gen's sparse MLA on B200 takes 128 heads in one 128-row tcgen05 unit
    (the MMA's rows, mla_time.mla_tile_rows), not two 64-head ones: a token's core, the row
    less its other kernels, takes 1.17-1.36x the 64-head time at 128 heads (TensorRT-LLM's own
    rows and vLLM's FlashInfer ones), where two units streaming the picks gave 2x: those rows
    were +11.5% (TensorRT-LLM, bf16 cache) and +16% to +32% (vLLM, fp8 cache) signed."""
    trt = _dsa_prompt_signed("trtllm", "fit-b200-sxm")
    vllm = _dsa_prompt_signed("vllm", "fit-b200-sxm-vllm")
    for dtype in ("bfloat16", "fp8"):
        assert abs(trt["default", dtype, 128]) < 0.05
    assert abs(vllm["FLASHINFER_MLA_SPARSE", "fp8", 128]) < 0.05


def test_flashinfer_s_sparse_kernel_runs_16_row_units_up_to_32_heads():
    """vLLM's FlashInfer sparse MLA (B200) runs TensorRT-LLM-gen's 16-row units up to 32
    query rows, as the plain MLA decode kernel does (mla_time.mla_unit_rows): its fp8 rows at 32
    heads take more a token than at 16 or 64, in both phases; TensorRT-LLM's own prompt rows do
    not (dsa_time.sparse_small_units). The prompt rows at 32 heads were -15% signed."""
    from mlacalc.timemodel.dsa_time import sparse_small_units
    from mlacalc.timemodel.mla_time import mla_unit_rows

    src = np.array(["FLASHINFER_MLA_SPARSE", "FLASHMLA_SPARSE"])
    assert sparse_small_units("vllm", src).tolist() == [1.0, 0.0]
    assert sparse_small_units("trtllm", "").tolist() == 0.0
    b = device_batch(_step_core("decode", 1024, 8, "bf16", 32), load_hardware("B200"))
    gen = dataclasses.replace(b, variant="sparse_gen")
    gen = dataclasses.replace(gen, shape={**gen.shape, "unit_heads": np.full(1, 64.0)})
    small = dataclasses.replace(gen, shape={**gen.shape, "small_units": np.ones(1)})
    assert mla_unit_rows(gen, B200)[0] == 128 and mla_unit_rows(small, B200)[0] == 16
    assert mla_unit_rows(small, H100)[0] == 64
    vllm = _dsa_prompt_signed("vllm", "fit-b200-sxm-vllm")
    assert abs(vllm["FLASHINFER_MLA_SPARSE", "fp8", 32]) < 0.08


def test_flashinfer_s_second_small_unit_shares_the_first_s_picks():
    """The second 16-row unit of a token at 17-32 heads on vLLM's FlashInfer sparse prompt
    (B200) adds mla_time.SECOND_UNIT_SHARE of a unit, not a whole one: the fp8 rows' core a
    token at 10,240-49,152 tokens takes 1.38x the 16-head time at 32 heads, where two whole
    units read +18% to +34% (those rows at 6,144 tokens and more were +23% signed)."""
    pytest.importorskip("pyarrow")
    from mlacalc.measured.mapping import map_table
    from mlacalc.measured.observations import predict_mapped
    from mlacalc.measured.tables import load_measured
    from mlacalc.timemodel.mla_time import SECOND_UNIT_SHARE, mla_unit_count

    b = device_batch(_step_core("decode", 1024, 8, "bf16", 32), load_hardware("B200"))
    gen = dataclasses.replace(b, variant="sparse_gen")
    small = dataclasses.replace(gen, shape={**gen.shape, "small_units": np.ones(1)})
    two = np.full(1, 2.0)
    assert mla_unit_count(gen, two)[0] == 2.0
    assert mla_unit_count(small, two)[0] == 1.0 + SECOND_UNIT_SHARE < 1.6
    plain = dataclasses.replace(small, variant="")  # the plain decode kernel keeps whole units
    assert mla_unit_count(plain, two)[0] == 2.0
    (t,) = [
        x
        for x in load_measured(MEASURED / "b200_sxm", engine="vllm").tables
        if x.table == "dsa_context_module_perf"
    ]
    err = predict_mapped(map_table(t), t.device, load_profile("fit-b200-sxm-vllm")) / t.seconds
    tokens = t.column("batch_size") * t.column("isl")
    rows = (
        (t.column("kernel_source").astype(str) == "FLASHINFER_MLA_SPARSE")
        & (t.column("kv_cache_dtype").astype(str) == "fp8")
        & (t.column("num_heads") == 32)
        & (tokens >= 6144)
        & (tokens < 65536)
    )
    assert rows.sum() > 300
    assert abs(np.median(err[rows] - 1.0)) < 0.08


def _glm5_sparse_rows(
    system: str, profile: str, table: str = "glm5_dsa_attn_module_perf"
) -> np.ndarray:
    """|error| of every row of SGLang's ``table`` on ``system`` by ``profile`` (rows timed
    0 s, where no kernel runs, left out)."""
    pytest.importorskip("pyarrow")
    from mlacalc.measured.mapping import map_table
    from mlacalc.measured.observations import predict_mapped
    from mlacalc.measured.tables import load_measured

    path = MEASURED / system / "sparse_attention" / "sglang" / "0.5.14"
    (t,) = load_measured(path / f"{table}.parquet").tables
    pred = predict_mapped(map_table(t), t.device, load_profile(profile))
    ok = np.isfinite(pred) & (t.seconds > 0)
    return np.abs(pred[ok] / t.seconds[ok] - 1)


def test_flashmla_sparse_prompt_carries_between_hopper_and_blackwell():
    """FlashMLA's sparse prompt kernel runs a token's 64 heads at the same time a token on B200
    as on H100 (its 128-row tcgen05 tile half padding): with the padded rows multiplied, each
    device's fit predicts the other's rows 16% (B200 from H100) and 33% (H100 from B200) off
    at the median, where they were 47% and 64% off."""
    assert np.median(_glm5_sparse_rows("b200_sxm", "fit-h100-sxm-sglang")) < 0.19
    assert np.median(_glm5_sparse_rows("h100_sxm", "fit-b200-sxm-sglang")) < 0.36


def test_the_top_k_selection_draws_bandwidth_by_its_sms_on_every_device():
    """A top-k selection's CTA walks its row's logits at a rate per SM and clock: SGLang's
    GLM-5 top-k rows take the same time on B200 as on H100 up to 512 rows, so each device's
    fit predicts the other's rows 11% (H100) and 14% (B200) off at the median, where drawing
    the HBM's rate they were 43% too slow and 28% too fast."""
    from mlacalc.timemodel.elementwise_time import SM_BOUND_VARIANTS, TOPK_VARIANTS

    assert set(TOPK_VARIANTS) <= set(SM_BOUND_VARIANTS) and "topk_flat" in TOPK_VARIANTS
    table = "glm5_topk_module_perf"
    assert np.median(_glm5_sparse_rows("h100_sxm", "fit-b200-sxm-sglang", table)) < 0.13
    assert np.median(_glm5_sparse_rows("b200_sxm", "fit-h100-sxm-sglang", table)) < 0.16


def test_a_top_k_query_that_takes_its_keys_whole_reads_no_logits():
    """SGLang's top-k gives every query a CTA, but only a query with more keys than
    ``index_topk`` reads its logits and selects: 2,048 new tokens after one cached take 17 us
    on H100 (one query selects), where counting every query's logits read by the one
    selecting CTA predicted 2.6 ms. The counts (``cost.compressed.engine_topk``) rank the
    selecting queries' keys alone and spread the bandwidth over every query's CTA; every row
    of the GLM-5 top-k tables is then within 2x of its time (before: up to 150x over)."""
    from mlacalc.cost.compressed import engine_topk

    shape, nbytes = engine_topk(1, 2048, 1, 1, 2048, False)
    assert (shape["elements"], shape["units"], shape["ctas"]) == (2049, 1, 2048)
    assert nbytes == 2049 * 4 + 2048 * 2048 * 4  # the one row's logits, every query's indices
    table = "glm5_topk_module_perf"
    assert _glm5_sparse_rows("h100_sxm", "fit-h100-sxm-sglang", table).max() < 1.0  # was 149
    assert _glm5_sparse_rows("b200_sxm", "fit-b200-sxm-sglang", table).max() < 1.0  # was 156


def test_the_indexer_logits_split_their_keys_without_a_combine_kernel():
    """DeepGEMM's paged MQA logits write each (query, key) logit from the part that scored it:
    no value product, no partial outputs, no combine kernel where the keys split (the latent
    decode's merge is a launch and its partial results). The fitted class's time from 128 keys
    (one part) to 256 (two parts at one sequence) grows by far less than a launch."""
    prof = load_profile("fit-b200-sxm-sglang")
    hw = load_hardware("B200")

    def logits(keys: float) -> float:
        from mlacalc.words.kernels import KernelBatch

        shape = dict(batch=1, q_len=1, kv_len=keys, n_heads=64, n_kv=1, head_dim_qk=128,
                     head_dim_v=0, window=0, causal=1, page_size=64, kv_bytes=1, kv_split=1,
                     operand_reads=1, rope_kernel=0, preprocess_bytes=0)  # fmt: skip
        shape = {k: np.array([float(v)]) for k, v in shape.items()}
        nb = 64 * 132 + keys * 132 + keys * 4
        b = KernelBatch("mla_decode", "fp8", np.array([2 * 64 * 128 * keys]), np.array([nb]),
                        np.ones(1), shape, "indexer")  # fmt: skip
        return float(predict_batch(b, hw, prof)[0])

    assert logits(256.0) - logits(128.0) < 0.5e-6  # a launch is about 2 us


_VERSIONS = {"trtllm": "1.3.0rc20", "sglang": "0.5.14", "vllm": "0.24.0"}


def _mapped_topk(engine: str, context: bool, batch: int, isl: int, step: int):
    """The mapped top-k of ``engine``'s B200 DSA module row of DeepSeek-V3.2 (128 heads, fp8
    cache where recorded): ``batch`` sequences of ``isl`` new tokens after ``step`` cached."""
    pytest.importorskip("pyarrow")
    from mlacalc.measured.mapping import map_table
    from mlacalc.measured.tables import load_measured

    path = MEASURED / "b200_sxm" / "sparse_attention" / engine / _VERSIONS[engine]
    table = "dsa_context_module_perf" if context else "dsa_generation_module_perf"
    (t,) = load_measured(path / f"{table}.parquet").tables
    c = t.columns
    hit = (c["model"].astype(str) == "deepseek-ai/DeepSeek-V3.2") & (c["num_heads"] == 128)
    hit &= (c["batch_size"] == batch) & (c["isl"] == isl) & (c["step"] == step)
    hit &= ~np.char.endswith(c["op_name"].astype(str), "skip_indexer")
    row = np.flatnonzero(hit)[0]
    cols = {k: v[[row]] for k, v in c.items()}
    mapped = map_table(dataclasses.replace(t, columns=cols, seconds=t.seconds[[row]]))
    (p,) = [p for p in mapped.parts if p.name == "topk"]
    return p.batch


# (engine, context, batch, isl, step): rows whose queries select (more keys than 2,048)
_TOPK_ROWS = [
    ("trtllm", False, 16, 1, 4096),
    ("trtllm", True, 1, 2048, 128),
    ("sglang", False, 16, 1, 2048),
    ("sglang", True, 2, 2048, 1536),
    ("vllm", False, 16, 1, 4096),
    ("vllm", True, 1, 2048, 128),
    # vLLM's decode top-k runs on every row (cost.compressed.EVERY_DECODE_TOPK)
    ("vllm", False, 16, 1, 1024),
]


@pytest.mark.parametrize(("engine", "context", "batch", "isl", "step"), _TOPK_ROWS)
def test_a_served_dsa_step_runs_the_mapped_top_k(engine, context, batch, isl, step):
    """A served DeepSeek-V3.2 step (``predict_time``'s kernels and ``plan``'s step model) runs
    the indexer top-k its engine's module rows are mapped to (``topk_flat``, the counts of
    ``cost.compressed.dsa_topk``): the same FLOPs, bytes and shape. Before, a served step
    timed it as a plain streaming kernel over every query's logits (``variant ''``: the
    decode row of 16 sequences after 4,096 keys read 262,208 B of logits and wrote 131,072 B
    of indices at 64 KB a unit, where the mapping gives 16 CTAs their rows)."""
    from mlacalc.models.loading import load_model
    from mlacalc.serving.gpu_step import StepModel, _variant
    from mlacalc.serving.layout import Layout
    from mlacalc.words.dtypes import resolve_kv_layout
    from mlacalc.words.kernels import variant_of

    mapped = _mapped_topk(engine, context, batch, isl, step)
    want = {f: mapped.shape[f][0] for f in ("elements", "units", "ctas")}
    # TensorRT-LLM's decode runs its own top-k (cost.compressed.OWN_DECODE_TOPK)
    own = "topk_trtllm_decode" if engine == "trtllm" and not context else "topk_flat"
    assert mapped.variant == own
    # predict_time's kernels (cost.model_step.step_kernels under the engine)
    phase = ("chunk" if step else "prefill") if context else "decode"
    q = isl if context else None
    ks = step_kernels("deepseek-v3.2", phase, step + isl, batch, q, causal=True,
                      kv_dtype="fp8", engine=engine, scope="attention_layer")  # fmt: skip
    (k,) = [k for k in ks if k.name == "indexer_topk"]
    assert (k.kind, k.dtype, variant_of(k.kind, k.shape)) == ("elementwise", "bf16", own)
    assert (k.flops, k.bytes) == (mapped.flops[0], mapped.bytes[0])
    assert {f: k.shape[f] for f in want} == want
    # plan's step model (one GPU): the same kernel, one spec the rows that select
    m = load_model("deepseek-v3.2")
    sm = StepModel(m, Layout(1, 1, 1, 1, 1, False, 1, 1), "fp8", resolve_kv_layout("fp8"),
                   load_hardware("B200"), engine=engine)  # fmt: skip
    one = np.ones(1)
    kw = dict(dec_B=batch * one, dec_S=(step + 1) * one)
    if context:
        kw = dict(pf_N=batch * one, pf_q=isl * one, pf_pre=step * one)
    run = [s for s in sm.specs(**kw) if s.name == "indexer_topk" and s.bytes[0] > 0]
    assert len(run) == 1 and _variant(run[0]) == own
    assert (run[0].flops[0], run[0].bytes[0]) == (mapped.flops[0], mapped.bytes[0])
    assert {f: run[0].shape[f][0] for f in want} == want


def test_a_served_dsa_top_k_where_no_query_selects_runs_none():
    """Where no query has more keys than ``index_topk`` the mapping runs no top-k (the GLM-5
    top-k tables time those rows 0): a served step's top-k moves nothing there, and a plan
    times it 0 s."""
    ks = step_kernels("deepseek-v3.2", "decode", 2048, 8, kv_dtype="fp8", engine="sglang",
                      scope="attention_layer")  # fmt: skip
    (k,) = [k for k in ks if k.name == "indexer_topk"]
    assert k.bytes == 0 and not any(k.shape.values())
    from mlacalc.timemodel.predict import predict_time

    p = predict_time("deepseek-v3.2", "B200", "decode", 2048, batch=8, kv_dtype="fp8",
                     scope="attention_layer", engine="sglang")  # fmt: skip
    assert "indexer_topk" not in {o.name for o in p.ops}
    p = predict_time("deepseek-v3.2", "B200", "decode", 2049, batch=8, kv_dtype="fp8",
                     scope="attention_layer", engine="sglang")  # fmt: skip
    assert "indexer_topk" in {o.name for o in p.ops}


def test_vllm_s_decode_top_k_runs_on_every_row_whatever_its_keys():
    """vLLM's decode top-k runs on a row of at most ``index_topk`` keys too
    (``cost.compressed.EVERY_DECODE_TOPK``): every sequence a unit over all its keys, where
    SGLang's and a prompt's select only past the top-k. Its decode module rows are smooth
    across 2,048 keys where skipping it predicted a step of the whole top-k (B200, the row less
    its kernels' predictions: 208 -> 169 us from 1,024 to 2,049 keys at 1,024 sequences, the
    top-k 48 us)."""
    from mlacalc.cost.compressed import dsa_topk

    shape, nbytes = dsa_topk(np.array([4, 4]), 1, np.array([99, 3000]), 2048, True, "vllm")
    assert list(shape["units"]) == [4, 4] and list(shape["ctas"]) == [4, 4]
    assert list(shape["elements"]) == [400, 4 * 3001] and list(shape["topk_kernel"]) == [5, 5]
    assert nbytes[0] == 400 * 4 + 4 * 2048 * 4
    for engine, decode in (("sglang", True), ("vllm", False)):
        shape, _ = dsa_topk(np.array([4]), 1, np.array([99]), 2048, decode, engine)
        assert shape["units"][0] == 0 and shape["topk_kernel"][0] == 0
    from mlacalc.timemodel.predict import predict_time

    p = predict_time("deepseek-v3.2", "B200", "decode", 1024, batch=8, kv_dtype="fp8",
                     scope="attention_layer", engine="vllm")  # fmt: skip
    assert "indexer_topk" in {o.name for o in p.ops}


def _same_kernel(step, mapped, hw, prof) -> None:
    """A served step's core runs as the mapped row's kernel: its class, shape, FLOPs, bytes and
    time under ``prof``."""
    run, *_ = run_class(step, hw, prof)
    assert (run.kind, run.dtype, run.variant) == (mapped.kind, mapped.dtype, mapped.variant)
    for key in ("batch", "q_len", "kv_len", "n_heads", "head_dim_qk", "head_dim_v", "kv_split",
                "kv_bytes", "unit_heads"):  # fmt: skip
        assert run.shape[key][0] == mapped.shape[key][0], key
    assert run.flops[0] == pytest.approx(mapped.flops[0], rel=1e-12)
    assert run.bytes[0] == pytest.approx(mapped.bytes[0], rel=1e-12)
    got, want = predict_batch(step, hw, prof)[0], predict_batch(mapped, hw, prof)[0]
    assert got == pytest.approx(want, rel=1e-9)


def test_a_prompt_token_picks_its_causal_prefix_up_to_the_top_k():
    """causal_picks: the mean over a prompt's new tokens of min(key position, top-k); a decode
    token (one new) its keys up to the top-k."""
    from mlacalc.timemodel.dsa_time import causal_picks

    got = causal_picks(
        [1, 1, 2048, 2048, 4096, 16, 1024], [1, 9000, 2048, 2176, 4096, 144, 1024], 2048
    )
    want = [1, 2048, 1024.5, (1920 * (129 + 2048) / 2 + 128 * 2048) / 2048, 1536.25, 136.5, 512.5]
    np.testing.assert_allclose(got, want)


def test_tensorrt_llm_b200_sparse_prompt_multiplies_an_fp8_cache_as_stored():
    """TensorRT-LLM's B200 prompt with an fp8 cache runs its sparse kernel in fp8
    (dsa_time.FP8_SPARSE_PROMPT), in the mapping and a served step alike; bf16 with a bf16
    cache, and every other engine's sparse prompt kernel in bf16 (vLLM's FlashInfer path too:
    its profile's fp8 sparse class is FlashMLA's decode kernel)."""
    mapped = _mapped_prompt("b200_sxm", "trtllm", 16, "fp8", "default")
    assert (mapped.kind, mapped.dtype, mapped.variant) == ("mla_decode", "fp8", "sparse_gen")
    assert mapped.shape["kv_bytes"][0] == 1.0
    b = device_batch(_step_core("prefill", 4096, 1, "fp8", 16), load_hardware("B200"))
    assert engine_dsa_kernel(b, "trtllm", B200).dtype == "fp8"
    assert engine_dsa_kernel(b, "vllm", B200).dtype == "bf16"
    b = device_batch(_step_core("prefill", 4096, 1, "bf16", 16), load_hardware("B200"))
    assert engine_dsa_kernel(b, "trtllm", B200).dtype == "bf16"


def test_a_profile_without_the_walk_class_never_times_it_by_tensorrt_llm_gen_s():
    """TensorRT-LLM-gen's sparse kernel is a class of its own (mla_time.GEN_SPARSE_VARIANT):
    fit-b200-sxm's (fitted on B200's prompt rows' residuals) put TensorRT-LLM's H100 prompt
    module from B200's fit at +103% as the walk's stand-in (the plain class: -15.6%). A
    profile with no class of the Hopper walk times it by its FlashMLA ``sparse`` class, else
    its plain one; a profile with no TensorRT-LLM-gen class times that kernel likewise."""
    prof = load_profile("fit-b200-sxm")
    assert "mla_decode:bf16:sparse_gen" in prof.classes
    assert "mla_decode:bf16:sparse" not in prof.classes
    assert "mla_decode:bf16:sparse_walk" not in prof.classes
    walk, _ = prof.params("B200", "mla_decode", "bf16", variant="sparse_walk")
    assert walk == prof.params("B200", "mla_decode", "bf16")[0]
    assert walk != prof.params("B200", "mla_decode", "bf16", variant="sparse_gen")[0]
    vllm = load_profile("fit-b200-sxm-vllm")  # FlashMLA's class (SGLang's, a stand-in)
    sparse = vllm.params("B200", "mla_decode", "bf16", variant="sparse")[0]
    assert vllm.params("B200", "mla_decode", "bf16", variant="sparse_walk")[0] == sparse
    # TensorRT-LLM-gen's (vLLM's FlashInfer prompt) its own, fitted on vLLM's prompt rows
    assert vllm.params("B200", "mla_decode", "bf16", variant="sparse_gen")[0] != sparse
    sglang = load_profile("fit-b200-sxm-sglang")  # none of it: FlashMLA's, then the plain one
    gen = sglang.params("B200", "mla_decode", "bf16", variant="sparse_gen_wide")[0]
    assert gen == sglang.params("B200", "mla_decode", "bf16", variant="sparse")[0]


@pytest.mark.parametrize(
    ("engine", "source", "tokens", "variant"),
    [("vllm", "FLASHINFER_MLA_SPARSE", 49152, "sparse_gen"),
     ("vllm", "FLASHINFER_MLA_SPARSE", 65536, "sparse_gen_wide"),
     ("vllm", "FLASHMLA_SPARSE", 65536, "sparse_gen"),
     ("trtllm", "", 131072, "sparse_gen")],
)  # fmt: skip
def test_flashinfer_s_sparse_prompt_past_2e16_tokens_is_a_variant_of_its_own(
    engine, source, tokens, variant
):
    """vLLM's FlashInfer sparse prompt of 65,536 tokens and more in one call runs another
    path (dsa_time.FLASHINFER_WIDE_TOKENS: its B200 rows' time a token falls there);
    TensorRT-LLM's own kernel shows no such step. A served vLLM B200 prompt of that many tokens
    takes the variant as the mapped rows do; its decode queries FlashMLA's class."""
    from mlacalc.timemodel.dsa_time import gen_sparse_variant

    assert gen_sparse_variant(engine, source, [tokens])[0] == variant
    if engine != "vllm" or source != "FLASHINFER_MLA_SPARSE":
        return
    b = device_batch(_step_core("prefill", tokens, 1, "fp8", 16), load_hardware("B200"))
    assert engine_dsa_kernel(b, "vllm", B200).variant == variant
