"""The serving step's per-GPU kernels against the model step of :mod:`mlacalc.step`.

The serving step (:mod:`mlacalc.serving.step`) still builds its own vectorised kernel list;
this pins it to the model step, kernel by kernel, so that the two definitions cannot drift:
at one GPU every GEMM, attention core and routed-expert kernel has the model step's FLOPs, and
the GEMMs its bytes (apart from the differences named below); under tensor parallelism the
split kernels carry 1/tp of them and the replicated MLA down-projections all of them; under
expert parallelism a GPU computes 1/ep of the routed FLOPs.

Known differences in bytes (not FLOPs): the serving step's key/value down-projection does not
count the new cache rows it writes, its fused query/key/value projection reads its input once
(the model step has two projections, each reading it), its router reads bf16 weights, its
routed-expert kernel counts the expert's intermediate activations and fractional active
experts, and its element-wise kernels are lumped per layer (norms, residuals, RoPE) with no FLOPs.
"""

from __future__ import annotations

import pytest

from mlacalc.dtypes import resolve_kv_layout
from mlacalc.engine import as_model
from mlacalc.hardware import load_hardware
from mlacalc.serving import StepModel, make_layout
from mlacalc.step import step_kernels

#: serving kernel name -> model-step kernel names it stands for
NAMES = {
    "q_a_proj (replicated)": ("q_a_proj",),
    "q_b_proj": ("q_b_proj",),
    "kv_a_proj_with_mqa (replicated)": ("kv_a_proj",),
    "absorb W_UK (decode)": ("q_absorb",),
    "absorb W_UV (decode)": ("o_absorb",),
    "kv_b_proj (prefill K/V from latent)": ("kv_b_proj",),
    "MLA latent decode": ("attention",),
    "MLA prefill attention": ("attention",),
    "decode attention": ("attention",),
    "prefill attention": ("attention",),
    "qkv_proj": ("q_proj", "kv_proj"),
    "o_proj": ("o_proj",),
    "gate_up_proj": ("dense_ffn_up",),
    "down_proj": ("dense_ffn_down",),
    "router": ("router",),
    "shared expert gate_up_proj": ("shared_experts_up",),
    "shared expert down_proj": ("shared_experts_down",),
    "lm_head": ("lm_head",),
}
REPLICATED = {"q_a_proj (replicated)", "kv_a_proj_with_mqa (replicated)", "router"}
SAME_BYTES_EXCEPT = {"kv_a_proj_with_mqa (replicated)", "router", "qkv_proj"}
B, S = 16, 4096


def _pair(model: str, phase: str, tp: int = 1, ep: int = 1):
    m = as_model(model)
    gpus = max(tp, ep)
    lay = make_layout(m, gpus, tp=tp, dp=gpus // tp, ep=ep, dp_attention=ep > tp)
    sm = StepModel(m, lay, m.weights_dtype, resolve_kv_layout("bf16"), load_hardware("H200"))
    if phase == "decode":
        ref = step_kernels(m, "decode", S, B, weight_dtype=m.weights_dtype)
        ours = sm.kernels(dec_B=B, dec_S=S)
    else:
        ref = step_kernels(m, "prefill", S, 1, weight_dtype=m.weights_dtype, causal=True)
        ours = sm.kernels(pf_N=1, pf_q=S)
    return {k.name: k for k in ref}, [k for k in ours if not k.kind.startswith(("all_", "disp"))]


@pytest.mark.parametrize("model", ["deepseek-v3", "llama-3-70b"])
@pytest.mark.parametrize("phase", ["decode", "prefill"])
def test_one_gpu_matches_the_model_step(model, phase):
    ref, ours = _pair(model, phase)
    seen = set()
    for k in ours:
        if k.kind == "elementwise":
            continue
        if k.kind == "moe":
            assert k.flops == ref["routed_experts"].flops
            assert k.calls == ref["routed_experts"].calls
            seen.add("routed_experts")
            continue
        names = NAMES[k.name]
        assert k.flops == sum(ref[n].flops for n in names), k.name
        assert k.calls == ref[names[0]].calls, k.name
        if k.name not in SAME_BYTES_EXCEPT:
            assert k.bytes == sum(ref[n].bytes for n in names), k.name
        seen.update(names)
    # every model-step kernel but the element-wise ones has its serving counterpart
    assert seen == {n for n, k in ref.items() if k.kind != "elementwise"}


@pytest.mark.parametrize("model", ["deepseek-v3", "llama-3-70b"])
def test_tensor_parallel_splits_heads_ffn_and_vocabulary(model):
    """TP8: heads, FFN and vocabulary 1/8 per GPU; the MLA down-projections replicated."""
    ref, ours = _pair(model, "decode", tp=8)
    for k in ours:
        if k.kind in ("elementwise", "moe"):
            continue
        full = sum(ref[n].flops for n in NAMES[k.name])
        assert k.flops * (1 if k.name in REPLICATED else 8) == full, k.name


def test_expert_parallel_splits_the_routed_flops():
    """EP8 with DP-attention: each GPU computes 1/8 of the routed copies of the 8 groups'
    tokens, i.e. the routed FLOPs of one group's step."""
    ref, ours = _pair("deepseek-v3", "decode", tp=1, ep=8)
    (moe,) = [k for k in ours if k.kind == "moe"]
    assert moe.flops == ref["routed_experts"].flops
    assert moe.shape["experts"] == 256 // 8
