"""The routed experts of a served step behind DeepEP's exchange run the kernel the engine runs
there: SGLang's block-scaled fp8 experts DeepGEMM's grouped GEMM (``moe_time.DEEPEP_GROUPED_GEMM``),
timed by TensorRT-LLM's grouped MoE class of the device (no SGLang table times that kernel), not
SGLang's Triton fused MoE class, whose passes over every routed pair of every token entering the
rank are the Triton kernel's without DeepEP (its tables' rows: all tokens on every rank)."""

from __future__ import annotations

import numpy as np
import pytest

from mlacalc.cost.engine import as_model
from mlacalc.hardware.catalogue import load_hardware
from mlacalc.serving import StepModel, make_layout
from mlacalc.serving.gpu_step import _variant, halved
from mlacalc.timemodel.engine_profiles import profile_for
from mlacalc.timemodel.kernel_time import predict_batch, run_class
from mlacalc.timemodel.moe_time import ALL_PAIRS_MOE, DEEPEP_STEP, DEEPGEMM_MOE, PAIR_TILE_MOE
from mlacalc.timemodel.terms import class_key
from mlacalc.words.dtypes import resolve_kv_layout
from mlacalc.words.kernels import KernelBatch


def _routed(hw_name: str, engine: str, *, ep: int = 72, tp: int = 1, prefill: bool = False):
    """The routed experts of DeepSeek-V3's step (as stored: block-scaled fp8) under ``engine``
    (EP72 decode of 256 sequences at 2,000 keys, or EP32 prefill of 16 x 1,024 tokens, with
    two-batch overlap: one micro-batch's call), its batch, the profile and the hardware."""
    m, hw = as_model("deepseek-v3"), load_hardware(hw_name)
    gpus = max(ep, tp)
    lay = make_layout(m, gpus, tp=tp, ep=ep, dp_attention=ep > tp, redundant_experts=32)
    prof = profile_for(engine, hw.name, hw)[0]
    sm = StepModel(m, lay, None, resolve_kv_layout("bf16"), hw, prof, engine=engine)
    kw = dict(pf_N=np.array([16.0]), pf_q=1024) if prefill else dict(dec_B=np.array([256.0]))
    (sp,) = [s for s in sm.specs(**halved(kw)) if s.name == "routed_experts"]
    batch = KernelBatch(sp.kind, sp.dtype, sp.flops, sp.bytes, np.ones(1), sp.shape, _variant(sp))
    return batch, prof, hw


@pytest.mark.parametrize(("hw_name", "lender"), [("H100-SXM", "default"), ("B200", "fit-b200-sxm")])
def test_sglangs_experts_behind_deepep_take_the_grouped_gemm_class(hw_name, lender):
    """Under SGLang the EP72 decode's experts (DeepEP's exchange) are their own batch
    (``deepep``), run as DeepGEMM's grouped GEMM: the ``deepgemm`` class, TensorRT-LLM's
    ``moe:fp8_block`` of the device (H100: its CUTLASS grouped GEMM, the default profile's; B200:
    DeepGEMM's own, fit-b200-sxm's), with TensorRT-LLM's tiles and no passes over every routed
    pair. Before: SGLang's Triton class, 1.51 ms a call on H100 (its passes over the 73,728
    routed pairs 1.28 ms), 0.61 ms on B200 (FlashInfer's TensorRT-LLM MoE, 0.44 ms of passes)."""
    batch, prof, hw = _routed(hw_name, "sglang")
    assert batch.variant == DEEPEP_STEP
    run, _, params, _ = run_class(batch, hw, prof)
    assert run.variant == DEEPGEMM_MOE and ALL_PAIRS_MOE not in run.shape
    assert (PAIR_TILE_MOE in run.shape) == (hw_name == "B200")  # TensorRT-LLM's tcgen05 tile
    trt_batch, trt_prof, _ = _routed(hw_name, "trtllm")
    assert trt_prof.name == lender
    assert class_key("moe", "fp8_block") in trt_prof.devices[hw.name]  # its own device fit
    assert params == run_class(trt_batch, hw, trt_prof)[2]
    # the same call as TensorRT-LLM times it
    ours = float(predict_batch(batch, hw, prof)[0])
    assert ours == pytest.approx(float(predict_batch(trt_batch, hw, trt_prof)[0]), rel=1e-9)
    assert ours < {"H100-SXM": 0.4e-3, "B200": 0.25e-3}[hw_name]  # 1.51 / 0.61 ms before


def test_sglangs_deepep_prefill_experts_take_the_grouped_gemm_class_too():
    """DeepEP's normal kernels (a prompt pass, EP32): the same class (DeepGEMM's contiguous
    grouped GEMM). As stored (block-scaled fp8) SGLang's EP32 prefill node was -60.5% / -58.7%
    / -56.3% (1K / 2K / 4K prompts; the Triton class's 44.2 ms a call), now +16.7% / +19.4% /
    +21.2%, as TensorRT-LLM's (+14.0% / +16.4% / +18.1%) but for the rest of SGLang's kernels."""
    batch, prof, hw = _routed("H100-SXM", "sglang", ep=32, prefill=True)
    run, _, _, _ = run_class(batch, hw, prof)
    assert run.variant == DEEPGEMM_MOE
    assert float(predict_batch(batch, hw, prof)[0]) < 15e-3  # 44.2 ms a call before


def test_experts_without_deepep_or_under_other_engines_keep_their_class():
    """Under TP alone (no DeepEP exchange) SGLang's experts stay its Triton fused MoE class,
    with its passes over every routed pair; under TensorRT-LLM a DeepEP step's experts are its
    plain class, timed as without the marker."""
    batch, prof, hw = _routed("H100-SXM", "sglang", ep=1, tp=8)
    assert batch.variant == "" and "deepep" not in batch.shape
    run, _, _, _ = run_class(batch, hw, prof)
    assert run.variant == "" and ALL_PAIRS_MOE in run.shape
    batch, prof, hw = _routed("B200", "trtllm")
    run, _, _, _ = run_class(batch, hw, prof)
    assert run.variant == ""
    plain = KernelBatch(
        batch.kind,
        batch.dtype,
        batch.flops,
        batch.bytes,
        batch.calls,
        {k: v for k, v in batch.shape.items() if k != "deepep"},
    )
    assert float(predict_batch(batch, hw, prof)[0]) == float(predict_batch(plain, hw, prof)[0])
