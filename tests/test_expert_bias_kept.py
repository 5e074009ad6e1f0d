"""A routed expert's bias keeps its stored dtype under any ``--expert-dtype``: a bias is added
to a GEMM's output, never block-quantized with its weight. GPT-OSS-120B's expert biases (bf16
in the checkpoint) were sized at 4.25 bits under ``--expert-dtype mxfp4`` (routed experts
56.80 -> 56.75 GiB, below the checkpoint's own MXFP4 experts)."""

import mlacalc
from mlacalc.models.tensors import tensors
from mlacalc.serving.layout import make_layout, weight_bytes_by_part
from mlacalc.serving.precision import component_weight_bytes


def _counts(m):
    weights = sum(t.numel for t in tensors(m) if t.role == "experts")
    biases = sum(t.numel for t in tensors(m) if t.role == "expert_bias")
    return weights, biases


def test_gpt_oss_expert_biases_stay_bf16_by_hand():
    m = mlacalc.load_model("gpt-oss-120b")
    lay = make_layout(m, 1, tp=1)
    weights, biases = _counts(m)
    assert biases == 36 * 128 * (2 * 2880 + 2880)  # gate_up and down biases, every layer
    mx = component_weight_bytes(m, lay, None, {"experts": "mxfp4"})["routed_experts"]
    assert mx == weights * 4.25 / 8 + biases * 2 == 60_993_699_840
    # the checkpoint's own MXFP4 experts: the same bytes
    assert mx == weight_bytes_by_part(m, lay, None)["routed_experts"]
    fp8 = component_weight_bytes(m, lay, None, {"experts": "fp8"})["routed_experts"]
    assert fp8 == weights + biases * 2


def test_a_model_without_expert_biases_is_unchanged():
    m = mlacalc.load_model("qwen3-30b-a3b")
    lay = make_layout(m, 1, tp=1)
    weights, biases = _counts(m)
    assert biases == 0
    fp8 = component_weight_bytes(m, lay, None, {"experts": "fp8"})["routed_experts"]
    assert fp8 == weights
