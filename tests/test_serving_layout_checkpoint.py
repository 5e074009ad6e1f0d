"""A quantized checkpoint's weights on one GPU, by hand: each tensor at its own format and
split as the layout splits it (MLA's latent down-projections whole on every TP rank, the
rest of the attention over TP; the MTP layer's experts over the MoE group like a layer's)."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from reference_data import HF_CONFIGS_2

import mlacalc
from mlacalc.serving.layout import make_layout, weight_bytes_by_part, weights_per_gpu

D, Q_LORA, KV_A, HEADS = 7168, 1536, 576, 128


def _fp8_block(rows: int, cols: int) -> int:
    """An fp8 matrix with one float32 scale a 128 x 128 block."""
    return rows * cols + -(-rows // 128) * -(-cols // 128) * 4


def test_deepseek_v3_fp8_attention_under_tp8_by_hand():
    """q_a and kv_a (and their norms) whole on each of 8 ranks, q_b, kv_b and o_proj split:
    36,647,776 B a layer. The attention had been sized at the part's average bytes a weight,
    which the bf16 norms and the block scales of the whole projections make a little light."""
    m = mlacalc.load_model("deepseek-v3")
    whole = _fp8_block(Q_LORA, D) + _fp8_block(KV_A, D) + (Q_LORA + 512) * 2
    split = _fp8_block(HEADS * 192, Q_LORA) + _fp8_block(HEADS * 256, 512)
    split += _fp8_block(D, HEADS * 128)
    per_layer = Fraction(whole) + Fraction(split, 8)
    assert per_layer == 36_647_776
    got = weight_bytes_by_part(m, make_layout(m, 8, tp=8), None)["attention"]
    assert got == 61 * per_layer


def test_an_nvfp4_export_s_bf16_projections_are_whole_on_each_rank():
    """DeepSeek-V3.1 NVFP4 keeps q_a, kv_a, q_b and kv_b in bf16 and stores o_proj in NVFP4
    (half a byte a weight, an fp8 scale a 16): under TP8 a rank holds q_a and kv_a whole. By
    hand 52,170,752 B a layer and the o_proj's two float32 per-tensor scales, split; it had
    read 2.28 GiB for the 2.96 GiB a rank holds (one average ratio over the part)."""
    m = mlacalc.load_model(HF_CONFIGS_2 / "nvidia--DeepSeek-V3.1-NVFP4.config.json")
    whole = (Q_LORA * D + KV_A * D) * 2 + (Q_LORA + 512) * 2
    split_bf16 = (HEADS * 192 * Q_LORA + HEADS * 256 * 512) * 2
    o_proj = D * HEADS * 128
    split_fp4 = o_proj // 2 + o_proj // 16
    per_layer = Fraction(whole) + Fraction(split_bf16 + split_fp4, 8)
    assert per_layer == 52_170_752
    got = weight_bytes_by_part(m, make_layout(m, 8, tp=8), None)["attention"]
    assert 0 <= got - 61 * per_layer <= 61 * 8 / 8 + 1  # the per-tensor scales
    at_tp1 = weight_bytes_by_part(m, make_layout(m, 1), None)["attention"]
    assert got > at_tp1 / 8 * 1.2  # the average ratio's figure was a plain eighth


def test_the_mtp_layer_s_experts_split_over_expert_parallel_ranks():
    """DeepSeek-V3 with DP-attention and EP8: a GPU holds an eighth of the MTP layer's 256
    experts (each three 2,048 x 7,168 fp8 matrices and their block scales), its attention
    whole (TP1): the MTP layer's bytes at EP8 are those at one GPU less seven eighths of the
    experts. It had split over TP alone and held every expert (10.8 GiB for 1.6)."""
    m = mlacalc.load_model("deepseek-v3")
    experts = 256 * 3 * _fp8_block(2048, D)
    alone = weight_bytes_by_part(m, make_layout(m, 1), None, include_mtp=True)["mtp"]
    lay = make_layout(m, 8, tp=1, dp_attention=True, ep=8)
    ep8 = weight_bytes_by_part(m, lay, None, include_mtp=True)["mtp"]
    assert ep8 == alone - experts * 7 // 8
    assert 1.6 < ep8 / 2**30 < 1.7
    # and the sum of the parts is what the plan holds
    parts = weight_bytes_by_part(m, lay, None, include_mtp=True)
    total = weights_per_gpu(m, lay, None, include_mtp=True)
    assert 0 <= sum(parts.values()) - total < len(parts)


def test_a_dsa_indexer_is_whole_on_every_rank_in_parameters_and_bytes():
    """DeepSeek-V3.2 at TP8: its indexer (wq_b, wk, k_norm, weights_proj) is whole on every
    rank beside q_a and kv_a (replicated in vLLM's and SGLang's modules, unsplit in a served
    step's kernels), by hand 50,596,096 parameters a layer; the bytes follow each tensor's
    format with the same split. Parameters had given the indexer the layer's average share and
    bytes an eighth (39.37 M against 38.38 M a layer, two rules for one tensor)."""
    from mlacalc.cost.quant import tensor_bytes
    from mlacalc.models.tensors import tensors

    m = mlacalc.load_model("deepseek-v3.2")
    whole = Q_LORA * D + 1536 + KV_A * D + 512  # q_a, kv_a and their norms
    whole += 64 * 128 * Q_LORA + 128 * D + 2 * 128 + 64 * D  # wq_b, wk, k_norm, weights_proj
    split = HEADS * 192 * Q_LORA + HEADS * 256 * 512 + D * HEADS * 128
    lay = make_layout(m, 8, tp=8)
    from mlacalc.serving.layout import weight_breakdown

    assert weight_breakdown(m, lay)["attention"] == pytest.approx(61 * (whole + split / 8))
    kept_whole = ("q_a_proj", "q_a_layernorm", "kv_a_proj_with_mqa", "kv_a_layernorm", "indexer")
    by_hand = Fraction(0)
    for t in tensors(m):
        if ".self_attn." in t.name:
            nbytes = sum(tensor_bytes(t, m.quantization))
            by_hand += (
                nbytes if any(f".{w}." in t.name for w in kept_whole) else Fraction(nbytes, 8)
            )
    assert weight_bytes_by_part(m, lay, None)["attention"] == math.ceil(by_hand)


def test_the_mtp_layer_s_eh_proj_is_whole_on_every_rank():
    """DeepSeek-V3's MTP ``eh_proj`` (7,168 x 14,336 fp8 with its block scales) is a plain
    linear layer in the engines' MTP modules: at TP8 a rank holds all of it, not an eighth."""
    m = mlacalc.load_model("deepseek-v3")
    eh = _fp8_block(D, 2 * D)
    tp8 = weight_bytes_by_part(m, make_layout(m, 8, tp=8), None, include_mtp=True)["mtp"]
    assert tp8 > eh  # an eighth of the experts (1.4 GB) and the whole eh_proj (103 MB)
    from mlacalc.serving.layout import _mtp_shares

    shares = {round(f, 6) for n, nb, f in _mtp_shares(m, make_layout(m, 8, tp=8)) if nb == eh}
    assert shares == {1.0}


def test_a_gated_query_splits_whole_with_its_query_under_tp():
    """Qwen3-Next's full layers: q_proj holds the query and its output gate (16 heads of 256,
    twice: 16,777,216), o_proj 8,388,608, both split over 4 ranks; 2 KV heads over TP4 leave
    each rank one (half of k_proj and v_proj, 1,048,576 of 2,097,152); the q/k norms (one
    head's width) whole. 7,340,544 a rank a full layer; each of the 36 linear layers splits
    by its heads (33,718,464 / 4). The trial's hand figure, 783,105,408 B in bf16; the gate
    had been left out of the split's proportions (788,688,939 B, not a whole number)."""
    m = mlacalc.load_model("qwen3-next-80b-a3b")
    d, heads, kv_heads, head = 2048, 16, 2, 256
    full = (2 * heads * head * d + d * heads * head) / 4 + 2 * kv_heads * head * d / 2 + 2 * head
    assert full == 7_340_544
    lay = make_layout(m, 4, tp=4)
    got = weight_bytes_by_part(m, lay, None)["attention"]
    assert got == (12 * full + 36 * 33_718_464 / 4) * 2 == 783_105_408


def test_gemma_4_s_full_layer_has_no_v_proj_to_split():
    """Gemma 4's full layers keep one projection for keys and values (k_eq_v): 2 global KV
    heads of 512, so under TP4 a rank holds half of k_proj (1,441,792 of 2,883,584) beside a
    quarter of q_proj and o_proj (23,068,672 each) and the head-width norms whole: 12,977,152
    a layer. The split had counted a v_proj the layer does not hold (a share of 0.278 for
    0.265)."""
    m = mlacalc.load_model("gemma-4-26b-a4b")
    d, heads, head, kv_heads = 2816, 16, 512, 2
    full = 2 * heads * head * d / 4 + kv_heads * head * d / 2 + 2 * head
    assert full == 12_977_152
    sliding = (2 * 16 * 256 * d + 2 * 8 * 256 * d) / 4 + 2 * 256  # 8 KV heads: a quarter each
    lay = make_layout(m, 4, tp=4)
    got = weight_bytes_by_part(m, lay, None)["attention"]
    assert got == (5 * full + 25 * sliding) * 2


@pytest.mark.parametrize("dtype", ["fp8", None])
def test_the_mtp_layer_s_norms_are_whole_on_every_rank(dtype):
    """DeepSeek-V3 with its MTP layer at TP8: a rank holds each MTP tensor as the main layers
    split it, whole elements: the norms (enorm, hnorm, the head's, the layer's two and MLA's
    q_a / kv_a layernorms), the router, eh_proj and MLA's latent down-projections whole, the
    routed experts' and every other tensor's eighth. The MTP attention had taken the layer's
    blended share (0.1958 of each tensor), leaving its latent norms 2,048 x 0.80 at 16 bits
    short: 1,646 B under fp8 (the checkpoint's bf16 norms and fp8 projections likewise)."""
    from mlacalc.cost.quant import tensor_bytes
    from mlacalc.models.tensors import tensors

    m = mlacalc.load_model("deepseek-v3")
    lay = make_layout(m, 8, tp=8)
    whole = ("norm", ".mlp.gate.", "eh_proj", "q_a_proj", "kv_a_proj_with_mqa")
    by_hand = Fraction(0)
    for t in tensors(m, include_mtp=True)[len(tensors(m)) :]:
        if dtype is None:
            nbytes = Fraction(sum(tensor_bytes(t, m.quantization)))
        else:  # fp8: a byte a weight, the norms and router at 16 bits
            kept = "norm" in t.name or ".mlp.gate." in t.name
            nbytes = Fraction(t.numel * (2 if kept else 1))
        by_hand += nbytes if any(w in t.name for w in whole) else nbytes / 8
    assert weight_bytes_by_part(m, lay, dtype, include_mtp=True)["mtp"] == math.ceil(by_hand)
