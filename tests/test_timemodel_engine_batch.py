"""A model step's kernels are timed as the engine's kernels run them (the kernels its classes
were fitted on), on every path that times a step: ``predict_time`` and ``predict_kernels``
(which ``plan`` and ``search`` use) agree, kernel by kernel."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import mlacalc
from mlacalc.cost.model_step import step_kernels
from mlacalc.hardware.catalogue import load_hardware
from mlacalc.timemodel.attention_time import engine_attention_kernel
from mlacalc.timemodel.device import device_figures
from mlacalc.timemodel.kernel_time import predict_batch, predict_kernels
from mlacalc.words.kernels import KernelBatch, batches_of

H100 = device_figures(load_hardware("H100-SXM"))
B200 = device_figures(load_hardware("B200"))


def _attention(kind: str, variant: str = "", **extra) -> KernelBatch:
    n = 3
    shape = {
        "batch": np.full(n, 4.0),
        "q_len": np.full(n, 1.0 if kind == "attention_decode" else 16.0),
        "kv_len": np.array([128.0, 4096.0, 32768.0]),
        "n_heads": np.full(n, 64.0),
        "n_kv": np.full(n, 1.0),
        "head_dim_qk": np.full(n, 128.0),
        "head_dim_v": np.full(n, 128.0),
        "window": np.zeros(n),
        "causal": np.ones(n),
    }
    shape.update({k: np.full(n, v) for k, v in extra.items()})
    return KernelBatch(
        kind=kind,
        dtype="bf16",
        flops=np.full(n, 1e9),
        bytes=np.full(n, 1e7),
        calls=np.ones(n),
        shape=shape,
        variant=variant,
    )


def test_the_engines_decode_kernels_pack_every_query_head_of_a_kv_head():
    batch = _attention("attention_decode")
    for engine in ("sglang", "vllm"):
        for fig in (H100, B200):
            packed = engine_attention_kernel(batch, engine, fig)
            assert np.all(packed.shape["head_pack"] == 0)
    # TensorRT-LLM's XQA keeps its own rule (32, the kernel's default)
    assert engine_attention_kernel(batch, "trtllm", H100) is batch


def test_prompts_pack_on_hopper_only():
    batch = _attention("attention_prefill")
    for engine in ("sglang", "vllm"):
        assert np.all(engine_attention_kernel(batch, engine, H100).shape["head_pack"] == 0)
        # Blackwell's prompt kernels (FlashInfer / TensorRT-LLM-gen): a tile a query head, no
        # packing (SGLang's B200 batch gains only its head-dim-192 wait column, 001406c, its
        # operands read under the products, attention_time.OPERAND_ASYNC_PREFILL, and both
        # engines' bf16 prompts two query tiles a CTA, attention_time.PAIRED_TILE_PREFILL)
        on_b200 = engine_attention_kernel(batch, engine, B200)
        assert "head_pack" not in on_b200.shape
        added = ("hd192_side_call", "paired_tiles", "operand_async")
        assert {k: v for k, v in on_b200.shape.items() if k not in added} == batch.shape
    assert engine_attention_kernel(batch, "trtllm", H100) is batch


@pytest.mark.parametrize(
    "batch",
    [
        _attention("attention_decode", head_pack=32.0),  # a measured row names its kernel's
        _attention("attention_prefill", "sparse"),  # a kernel of its own
        _attention("attention_prefill", "encoder"),
        _attention("attention_prefill", pooled_ratio=4.0),  # DeepSeek-V4's own kernels
    ],
    ids=["measured", "sparse", "encoder", "dsv4"],
)
def test_kernels_that_name_their_own_rule_are_left_alone(batch):
    assert engine_attention_kernel(batch, "sglang", H100) is batch


def test_a_step_without_its_kernels_packing_is_timed_as_the_packed_kernel():
    """64 query heads on one KV head, 16-token prompts on H100 under SGLang: the step, which
    names no ``head_pack``, is timed as the FlashAttention-3 kernel (packed) its class was
    fitted on, not as a tile a query head (which the class's parameters do not describe)."""
    bare = _attention("attention_prefill")
    # (as SGLang's measured rows: packed, operands under the products, OPERAND_ASYNC_PREFILL)
    packed = _attention("attention_prefill", head_pack=0.0, operand_async=1.0)
    one = _attention("attention_prefill", head_pack=1.0)
    prof = "fit-h100-sxm-sglang"
    t_bare = predict_batch(bare, "H100-SXM", prof)
    assert np.array_equal(t_bare, predict_batch(packed, "H100-SXM", prof))
    assert not np.allclose(t_bare, predict_batch(one, "H100-SXM", prof), rtol=1e-3)
    # under TensorRT-LLM the same step keeps a tile a query head
    trt = predict_batch(bare, "H100-SXM", "fit-h100-sxm")
    assert np.array_equal(trt, predict_batch(one, "H100-SXM", "fit-h100-sxm"))


@pytest.mark.parametrize(
    "model, phase, seq, q",
    [("qwen3-30b-a3b", "prefill", 16, None), ("qwen3-30b-a3b", "decode", 4096, None)],
)
@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_predict_time_and_predict_kernels_agree_kernel_by_kernel(model, phase, seq, q, engine):
    """predict_time's model ops and predict_kernels (plan's and search's route) time each of a
    step's kernels alike under an engine: the MoE tiles, the MLA kernel and the attention
    packing of the engine's classes are applied on both."""
    pred = mlacalc.predict_time(model, "H100", phase, seq, batch=8, scope="model", engine=engine)
    kernels = step_kernels(model, phase, seq, batch=8, q_len=q)  # predict_time: not causal
    by_name = {t.name: t.seconds for t in predict_kernels(kernels, "H100", pred.profile)}
    ops = {op.name: op.model_s for op in pred.ops}
    checked = 0
    for name in ("attention", "routed_experts"):
        for key in by_name:
            if key == name and key in ops:
                assert ops[key] == pytest.approx(by_name[key], rel=1e-9), key
                checked += 1
    assert checked >= 2, sorted(by_name)


def _gemm(dtype: str, variant: str = "", **extra) -> KernelBatch:
    m = np.array([1.0, 96.0, 512.0])
    shape = {"m": m, "n": np.full(3, 4096.0), "k": np.full(3, 4096.0), "groups": np.ones(3)}
    shape.update({k: np.full(3, v) for k, v in extra.items()})
    return KernelBatch(
        kind="gemm",
        dtype=dtype,
        flops=2 * m * 4096 * 4096,
        bytes=4096 * 4096 + 2 * m * 4096 * 2,
        calls=np.ones(3),
        shape=shape,
        variant=variant,
    )


def test_the_engines_per_tensor_fp8_gemm_is_cutlass_scaled_mm():
    from mlacalc.timemodel.gemm_time import engine_gemm_kernel

    step = _gemm("fp8")
    for engine in ("sglang", "vllm"):
        for fig in (H100, B200):
            assert np.all(engine_gemm_kernel(step, engine, fig).shape["cutlass_dispatch"] == 1)
    assert engine_gemm_kernel(step, "trtllm", H100) is step  # cuBLAS, which splits K
    # a measured row (it states its quantization) keeps its kernel; so does a step's
    # block-scaled GEMM under vLLM (SGLang's: test_a_block_scaled_gemm_is_one_rule_...)
    measured_block = _gemm("fp8_block", quantize_input=1.0)
    for other in (measured_block, _gemm("bf16"), _gemm("fp8", cutlass_dispatch=0.0)):
        assert engine_gemm_kernel(other, "sglang", H100) is other
    assert engine_gemm_kernel(_gemm("fp8_block"), "vllm", H100).dtype == "fp8_block"
    # the step is timed as the kernel the class was fitted on: vLLM's rows also move their
    # quantize per SM and clock (049bbc4, gemm_time.QUANT_SM_BOUND_ENGINES)
    prof = "fit-h100-sxm-vllm"
    assert np.array_equal(
        predict_batch(step, "H100-SXM", prof),
        predict_batch(_gemm("fp8", cutlass_dispatch=1.0, quant_sm_bound=1.0), "H100-SXM", prof),
    )


def test_a_served_sglang_step_runs_its_block_scaled_gemms_at_the_per_tensor_class():
    """gemm_time.step_block_fp8 on a served step: DeepSeek-V3.2's q_b_proj (the checkpoint's
    fp8_block) under SGLang runs at the per-tensor class, one 1x128 quantize pass, cuBLAS-style
    tiles; its FLOPs and bytes are the step's. The stand-alone table's row of that shape (it
    states its quantization) keeps the block-scaled class (its scale packing or pad nodes;
    its time 10.6 us from the step's at this shape from 63e26d2, 15 us more before, within
    0.01 us since b3cf4e9c's refit of the per-tensor class it borrows on B200, within 5% since
    the block-scaled class's refit with ``write_share``); a vLLM step keeps the block-scaled
    class."""
    from mlacalc.timemodel.kernel_time import engine_batch

    prof = "fit-b200-sxm-sglang"
    step = next(k for k in step_kernels("deepseek-v3.2", "decode", 4096, batch=32)
                if k.name == "q_b_proj")  # fmt: skip
    assert step.dtype == "fp8_block"  # the checkpoint's class, before the engine's rule
    ((_, served),) = batches_of([step])
    ran = engine_batch(served, "sglang", B200)
    assert ran.dtype == "fp8" and ran.variant == ""
    assert np.array_equal(ran.flops, served.flops) and np.array_equal(ran.bytes, served.bytes)
    for f, v in (("quantize_input", 1), ("quant_passes", 1), ("quant_launches", 1),
                 ("cutlass_dispatch", 0)):  # fmt: skip
        assert ran.shape[f][0] == v, f
    (t,) = predict_kernels([step], "B200", prof)
    assert t.seconds == pytest.approx(predict_batch(ran, "B200", prof)[0], rel=1e-12)
    stated = {"quantize_input": np.ones(1), "quant_passes": np.ones(1)}
    alone = dataclasses.replace(served, shape={**served.shape, **stated})
    assert engine_batch(alone, "sglang", B200) is alone
    # the two classes' times at this shape: 10.6 us apart a call until b3cf4e9c refitted
    # SGLang's B200 per-tensor class (CUTLASS's Blackwell tiles and K-block floor), whose
    # parameters the block-scaled class of that profile borrows: 758.378 and 758.386 us a
    # step; 793.60 and 758.38 us since the block-scaled class was refitted with its output
    # write at a rate of its own (gemm_time._streams, ``write_share``; its ``eff_memory``
    # 0.889 -> 0.843 at this weight-bound shape), the class the row keeps still its own (the
    # line above)
    assert predict_batch(alone, "B200", prof)[0] == pytest.approx(t.seconds, rel=0.05)
    assert engine_batch(served, "vllm", B200) is served


def test_a_block_scaled_gemm_is_one_rule_for_sglang_module_rows_and_a_served_step():
    """SGLang's block-scaled fp8 GEMM inside a model step runs at the per-tensor class
    (gemm_time.step_block_fp8): a DSA module row's q_b projection (DeepSeek-V3.2, 128 heads,
    32 sequences, fp8_block on B200) and the served step's q_b_proj of the same shape get the
    same class and time; the stand-alone table's row of that shape keeps the block-scaled class,
    whose per-call cost (15 us fixed on B200) the step does not pay."""
    pytest.importorskip("pyarrow")
    from mlacalc.data import MEASURED
    from mlacalc.measured.mapping import map_table
    from mlacalc.measured.tables import load_measured
    from mlacalc.timemodel.kernel_time import batch_terms, engine_batch

    prof = "fit-b200-sxm-sglang"
    path = MEASURED / "b200_sxm" / "sparse_attention" / "sglang" / "0.5.14"
    (table,) = load_measured(path / "dsa_generation_module_perf.parquet").tables
    mapped = map_table(table)
    row = np.flatnonzero(
        (table.column("model").astype(str) == "deepseek-ai/DeepSeek-V3.2")
        & (table.column("gemm_type").astype(str) == "fp8_block")
        & (table.column("num_heads") == 128)
        & (table.column("batch_size") == 32)
    )[0]
    (part,) = [p for p in mapped.parts if p.name == "q_b" and row in p.rows]
    module = part.batch.take(np.flatnonzero(part.rows == row))
    step = next(k for k in step_kernels("deepseek-v3.2", "decode", 4096, batch=32)
                if k.name == "q_b_proj")  # fmt: skip
    assert step.dtype == "fp8_block"  # the checkpoint's class, before the engine's rule
    assert {f: float(module.shape[f][0]) for f in ("m", "n", "k")} == {
        f: float(step.shape[f]) for f in ("m", "n", "k")
    }
    # the served step's batch as gpu_step builds it: the step's fields, the module's bytes and
    # warm L2 (the collector's), so the two differ only in where they come from
    served = KernelBatch("gemm", step.dtype, module.flops, module.bytes, module.calls,
                         {"m": module.shape["m"], "n": module.shape["n"],
                          "k": module.shape["k"], "groups": module.shape["groups"],
                          "warm_l2": module.shape["warm_l2"]})  # fmt: skip
    ran = engine_batch(served, "sglang", B200)
    assert module.dtype == ran.dtype == "fp8"
    for f in ("quantize_input", "quant_passes", "quant_launches", "cutlass_dispatch"):
        assert module.shape[f][0] == ran.shape[f][0], f
    t_module, how_module = batch_terms(module, "B200", prof)
    t_served, how_served = batch_terms(served, "B200", prof)
    assert how_module == how_served
    assert t_served["seconds"][0] == pytest.approx(t_module["seconds"][0], rel=1e-12)
    # the stand-alone row of that shape (it states its 1x128 quantization) keeps its class
    stated = {"quantize_input": np.ones(1), "quant_passes": np.ones(1)}
    alone = KernelBatch("gemm", "fp8_block", served.flops, served.bytes, served.calls,
                        {**served.shape, **stated})  # fmt: skip
    assert engine_batch(alone, "sglang", B200) is alone
    # 16.1 -> 12.6 us against the step's 9.9 us with the class fed as a two-SM pair
    # (gemm_time.PAIRED_MMA_DTYPES) and refitted: margin was 5 us
    assert predict_batch(alone, "B200", prof)[0] > t_served["seconds"][0] + 2e-6
    # and a served DeepSeek-V3.2 step under vLLM keeps the block-scaled class
    assert engine_batch(served, "vllm", B200).dtype == "fp8_block"


@pytest.mark.parametrize(
    "profile,engine",
    [
        ("fit-h100-sxm-vllm", "vllm"),
        ("fit-h100-sxm-sglang", "sglang"),
        (None, "trtllm"),
        ("roofline", "trtllm"),
    ],
)
def test_a_served_step_runs_the_kernels_of_its_profile_s_engine_given_by_name(profile, engine):
    """A profile given by name is one engine's fit; the step's kernels (vLLM's short prompts
    down its MLA decode path, 512 tokens over a bf16 cache on Hopper) follow that engine, as
    the time model that loads the name does. A name had left the kernels TensorRT-LLM's."""
    from mlacalc.hardware.catalogue import load_hardware
    from mlacalc.serving.gpu_step import StepModel
    from mlacalc.serving.layout import make_layout
    from mlacalc.words.dtypes import resolve_kv_layout

    m = mlacalc.load_model("deepseek-v3")
    sm = StepModel(
        m, make_layout(m, 8, tp=8), "fp8", resolve_kv_layout("bf16"), load_hardware("H200"), profile
    )
    assert sm.engine == engine
    assert sm.decode_path_tokens == (512 if engine == "vllm" else 0)
