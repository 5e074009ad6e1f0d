"""The kernels of a model step (mlacalc.cost.model_step): exact FLOPs and bytes against hand
counts."""

import math
from fractions import Fraction

import pytest
from reference_data import HF_CONFIGS

import mlacalc
from mlacalc.cost.model_step import (
    KERNEL_STAGES,
    attention_traffic_bytes,
    kernel_stage,
    moe_active_experts,
    step_kernels,
)
from mlacalc.models.architecture import layer_pattern
from mlacalc.words.kernels import KERNEL_KINDS, variant_of

ATTENTION_CORE_KINDS = {"attention_prefill", "attention_decode", "mla_prefill", "mla_decode"}


def test_deepseek_v3_decode_layer_bytes_by_hand():
    """One DeepSeek-V3 layer, decode at 4,096 keys, batch 1, bf16 weights and activations.

    The fused bound (each weight once, input and output once, cache rows once) and what the
    serving kernels move (each also reads and writes what it hands to the next), by hand."""
    d, n_h, d_cq, d_c, d_rope, d_nope, d_v, S = 7168, 128, 1536, 512, 64, 128, 128, 4096
    w = {  # weight elements
        "q_a": d * d_cq,
        "q_a_ln": d_cq,
        "q_b": d_cq * n_h * (d_nope + d_rope),
        "kv_a": d * (d_c + d_rope),
        "kv_a_ln": d_c,
        "w_uk": n_h * d_nope * d_c,
        "w_uv": n_h * d_c * d_v,
        "o": n_h * d_v * d,
    }
    row = 2 * (d_c + d_rope)  # one cached latent row, bf16
    fused = 2 * sum(w.values()) + 2 * 2 * d + (S + 1) * row
    assert fused == 378_963_072
    kernels = (
        2 * (d + w["q_a"] + d_cq)  # q_a_proj and kv_a_proj as one GEMM (qkv_a_proj): the
        + 2 * (w["kv_a"] + d_c + d_rope)  # hidden state read once
        + 2 * (d_cq + w["q_b"] + n_h * (d_nope + d_rope))  # q_b_proj
        + 2 * (n_h * d_nope + w["w_uk"] + n_h * d_c)  # q_absorb
        + 2 * n_h * (d_c + d_rope)
        + S * row
        + 2 * n_h * d_c  # core: q, the cache once, out
        + 2 * (n_h * d_c + w["w_uv"] + n_h * d_v)  # o_absorb
        + 2 * (n_h * d_v + w["o"] + d)  # o_proj
    )
    # 379,668,736 with q_a and kv_a apart (2 d bytes more); 379,654,400 with the new cache row
    # on qkv_a_proj, where the RoPE pre-kernel (element-wise) now writes it
    assert kernels == 379_653_248
    got = attention_traffic_bytes("deepseek-v3", "decode", S, 1, weight_dtype="bf16")
    assert got["fused_bytes"] == fused and got["kernel_bytes"] == kernels
    assert got["handoff_bytes"] == kernels + 2 * (d_cq + d_c) - fused
    # the two latent norms (input, weight, output) and RoPE (q and k rope parts read and
    # written), and the new cache row the RoPE pre-kernel writes
    norms_rope = 2 * 3 * (d_cq + d_c) + 2 * 2 * (n_h + 1) * d_rope
    assert got["norm_rope_bytes"] == norms_rope + row == 45_312 + row
    cost = mlacalc.attention_cost("deepseek-v3", "decode", S, 1, weight_dtype="bf16")
    assert cost.fused_bytes == 61 * fused  # the one definition of fused bytes


@pytest.mark.parametrize("name", mlacalc.shipped_models())
@pytest.mark.parametrize("phase,S,B,q", [("decode", 4096, 8, None), ("chunk", 2048, 2, 256)])
def test_kernels_are_consistent_with_their_shapes_and_the_engine(name, phase, S, B, q):
    m = mlacalc.load_model(name)
    kernels = step_kernels(m, phase, S, B, q_len=q)
    for k in kernels:
        assert k.kind in KERNEL_KINDS and k.name in KERNEL_STAGES
        assert isinstance(k.flops, int) and isinstance(k.bytes, int) and k.bytes > 0
        if k.kind == "gemm":
            f = k.shape
            assert k.flops == 2 * f["groups"] * f["m"] * f["n"] * f["k"], k.name
    # the attention kernels of every layer carry exactly the engine's matmul FLOPs
    attention = [k for k in kernels if kernel_stage(k.name) not in ("ffn", "head", "hyper")]
    # (the linear and Mamba layers' depthwise conv, Gated DeltaNet's delta rule and Mamba-1's
    # selective scan: matmul FLOPs in the engine, a streaming kernel here, as engines run them)
    convs = ("linear_conv", "mamba_conv", "mamba1_conv", "linear_core", "mamba1_scan")
    matmul = sum(k.flops * k.calls for k in attention if k.kind != "elementwise" or k.name in convs)
    assert matmul == mlacalc.attention_flops(m, phase, S, B, q_len=q)
    core = [k for k in kernels if k.kind in ATTENTION_CORE_KINDS and k.name == "attention"]
    core += [k for k in kernels if k.name in ("linear_core", "linear_core_state")]  # linear
    core += [k for k in kernels if k.name in ("mamba_state_update", "mamba_ssd_states")]
    core += [k for k in kernels if k.name == "mamba1_scan"]  # Jamba's Mamba-1
    # one per sequence mixer (Nemotron-H's MoE and MLP blocks have none; a Falcon-H1 layer
    # two: the attention and the Mamba-2 mixer beside it)
    kinds = layer_pattern(m).layers
    mixers = sum(k.attention != "none" for k in kinds) + sum(k.mamba for k in kinds)
    assert sum(k.calls for k in core) == mixers
    scorers = [k for k in kernels if k.name == "indexer_scores"]  # a DSA layer's indexer
    indexed = m.num_hidden_layers if m.index_topk else 0
    if m.compress_ratios:  # DeepSeek-V4: the CSA layers' indexers
        indexed = sum(k.attention == "csa" for k in kinds)
    assert sum(k.calls for k in scorers) == indexed
    ffn_calls = sum(k.calls for k in kernels if k.name in ("dense_ffn_up", "router"))
    assert ffn_calls == sum(k.ffn != "none" for k in kinds)


def test_llama_3_8b_decode_flops_by_hand():
    """Batch 8, decode: every weight GEMM does 2 FLOPs per weight per token; the head one token
    per sequence."""
    d, L, inter, V, kv, T = 4096, 32, 14336, 128256, 1024, 8
    per_layer = d * d + 2 * d * kv + d * d + 3 * d * inter
    kernels = step_kernels("llama-3-8b", "decode", 4096, T)
    weights = sum(k.flops * k.calls for k in kernels if k.kind == "gemm")
    assert weights == 2 * T * (L * per_layer + V * d)
    core = next(k for k in kernels if k.name == "attention")
    assert core.kind == "attention_decode" and core.flops == 2 * 2 * T * 32 * 128 * 4096
    assert core.shape["n_kv"] == 8 and core.shape["head_dim_qk"] == 128


def test_deepseek_v3_moe_kernels():
    """fp8 chosen as the weight dtype: one byte per weight, the per-tensor fp8 class."""
    T = 32
    kernels = {
        k.name: k for k in step_kernels("deepseek-v3", "decode", 4096, T, weight_dtype="fp8")
    }
    experts = kernels["routed_experts"]
    assert experts.kind == "moe" and experts.calls == 58 and kernels["dense_ffn_up"].calls == 3
    assert experts.flops == 2 * T * 8 * 3 * 7168 * 2048
    active = experts.shape["active_experts"]
    expected = 256 * (1 - Fraction(31, 32) ** T)  # 163.3 experts expected, exactly
    assert active == moe_active_experts(256, 8, T) == math.ceil(expected) == 164
    assert experts.bytes == active * 3 * 7168 * 2048 + 2 * T * 8 * 7168 * 2  # fp8 weights
    assert kernels["router"].shape == {"m": T, "n": 256, "k": 7168, "groups": 1}
    assert kernels["lm_head"].flops == 2 * T * 7168 * 129280
    assert kernels["attention"].kind == "mla_decode" and kernels["attention"].shape["n_kv"] == 1
    assert kernels["q_absorb"].dtype == "fp8" and kernels["attention"].dtype == "bf16"


def test_moe_active_experts_limits():
    assert moe_active_experts(256, 8, 1) == 8
    assert moe_active_experts(256, 8, 10**6) == 256
    assert moe_active_experts(8, 2, 3) == 5  # 8 (1 - (3/4)^3) = 4.6, in whole experts
    assert moe_active_experts(1024, 1, 2) == 2  # never more than T k
    assert moe_active_experts(8, 2, 100) == 8


def test_attention_layer_scope_and_bad_input():
    layer = step_kernels("deepseek-v3", "prefill", 1024, scope="attention_layer", impl="naive")
    assert {k.calls for k in layer} == {1}
    assert next(k for k in layer if k.name == "attention").kind == "mla_prefill"
    with pytest.raises(mlacalc.InvalidArgumentError, match="scope"):
        step_kernels("gpt2", "decode", 16, scope="gpu")
    with pytest.raises(mlacalc.InvalidArgumentError, match="name"):
        kernel_stage("nothing")


# -- DSA: the lightning indexer ----------------------------------------------------------

REFERENCE = HF_CONFIGS


@pytest.mark.parametrize("config", ["deepseek-v3.2.config.json", "glm-5.config.json"])
@pytest.mark.parametrize(
    "phase,S,B,q,causal",
    [
        ("decode", 4096, 8, None, False),
        ("prefill", 3000, 2, None, True),
        ("chunk", 9000, 3, 512, False),
    ],
)
def test_dsa_step_carries_the_indexer_flops_of_the_engine(config, phase, S, B, q, causal):
    """The attention kernels of a DSA model, indexer included, carry exactly the engine's matmul
    FLOPs; the indexer's by hand: query and head-weight projections, the key projection, and
    2 n_i d_i FLOPs per (query, key) pair over every key."""
    m = mlacalc.load_model(REFERENCE / config)
    kernels = step_kernels(m, phase, S, B, q_len=q, causal=causal)
    attention = [k for k in kernels if kernel_stage(k.name) not in ("ffn", "head")]
    # (the linear layers' depthwise conv: matmul FLOPs in the engine, a streaming kernel here)
    matmul = sum(
        k.flops * k.calls for k in attention if k.kind != "elementwise" or k.name == "linear_conv"
    )
    assert matmul == mlacalc.attention_flops(m, phase, S, B, q_len=q, causal=causal)
    d, n_i, d_i, d_cq = m.hidden_size, m.index_n_heads, m.index_head_dim, m.q_lora_rank
    new = {"decode": 1, "prefill": S, "chunk": q}[phase]
    T = B * new
    pairs = new * (2 * S - new + 1) // 2 if causal else new * S
    by_name = {k.name: k for k in kernels if k.name.startswith("indexer")}
    assert list(by_name) == [
        "indexer_q_proj",
        "indexer_weights_proj",
        "indexer_k_proj",
        "indexer_scores",
        "indexer_topk",
    ]
    assert by_name["indexer_q_proj"].flops == 2 * T * d_cq * n_i * d_i
    assert by_name["indexer_weights_proj"].flops == 2 * T * d * n_i
    assert by_name["indexer_k_proj"].flops == 2 * T * d * d_i
    scores = by_name["indexer_scores"]
    assert scores.flops == 2 * B * n_i * d_i * pairs and scores.calls == m.num_hidden_layers
    # DeepGEMM's fp8 logits in the shape the DSA module tables' mapping gives them (variant
    # indexer): decode the paged form over every key, a prompt 128-row tiles of (query, head)
    # rows over the mean keys a query walks, its own in whole blocks of 256
    # (cost.compressed.walked_logit_keys; every key of a chunk that is not causal)
    assert scores.dtype == "fp8" and variant_of(scores.kind, scores.shape) == "indexer"
    if phase == "decode":
        assert scores.shape["kv_len"] == S and scores.shape["n_heads"] == n_i
    else:
        blocks = [-(-(j if causal else S) // 256) for j in range(S - new + 1, S + 1)]
        assert scores.shape["kv_len"] == pytest.approx(256 * sum(blocks) / new)
        assert scores.shape["q_len"] == new * n_i
    assert scores.shape["n_kv"] == 1
    # keys of every token read once (fp8 with a float32 scale a 128 values, whatever the
    # cache: they were read at bf16 beside a bf16 cache), one float32 logit per (query, key)
    assert scores.bytes == 2 * T * n_i * (d_i + 1) + B * S * (d_i + 4) + B * new * S * 4
    assert by_name["indexer_topk"].flops == 0
    core = next(k for k in kernels if k.name == "attention")
    assert core.shape["window"] == m.index_topk  # the core attends the top-k keys only


def test_dsa_decode_step_flops_with_and_without_the_indexer():
    """DeepSeek-V3.2, decode at 4,096 keys, batch 8: 461.0 GFLOP of attention without the
    indexer, 507.4 GFLOP with it (the engine's figure)."""
    m = mlacalc.load_model(REFERENCE / "deepseek-v3.2.config.json")
    kernels = step_kernels(m, "decode", 4096, 8)
    attention = [k for k in kernels if kernel_stage(k.name) not in ("ffn", "head")]
    total = sum(k.flops * k.calls for k in attention if k.kind != "elementwise")
    indexer = sum(k.flops * k.calls for k in attention if k.name.startswith("indexer"))
    assert total == mlacalc.attention_flops(m, "decode", 4096, 8) == 507_355_594_752
    assert total - indexer == 460_982_321_152
    fp8 = {k.name: k for k in step_kernels(m, "decode", 4096, 8, kv_dtype="fp8")}
    # an 8-bit indexer cache keeps fp8 keys with a float32 scale per 128 values
    keys = fp8["indexer_scores"].bytes - 2 * 8 * 64 * 129 - 8 * 4096 * 4
    assert keys == 8 * 4096 * (128 + 4)


@pytest.mark.parametrize("phase,S,B", [("decode", 4096, 8), ("prefill", 2048, 1)])
def test_mla_down_projections_run_as_one_gemm(phase, S, B):
    """DeepSeek-V3's q_a and kv_a projections read the same hidden state; the engines run
    them as one GEMM (7,168 -> 1,536 + 576, as the module tables' rows are mapped:
    mlacalc.measured.mapping's ``q_a+kv_a``): one kernel with both FLOPs, the hidden state read
    once. A model without a query LoRA keeps kv_a_proj apart."""
    ks = {k.name: k for k in step_kernels("deepseek-v3", phase, S, B, weight_dtype="bf16")}
    assert "q_a_proj" not in ks and "kv_a_proj" not in ks
    k = ks["qkv_a_proj"]
    assert (k.shape["n"], k.shape["k"], k.kind) == (1536 + 576, 7168, "gemm")
    cost = mlacalc.attention_cost("deepseek-v3", phase, S, B, weight_dtype="bf16")
    ops = {o.name: o for o in cost.ops}
    assert k.flops == ops["q_a_proj"].flops + ops["kv_a_proj"].flops
    tokens = B * (1 if phase == "decode" else S)
    apart = ops["q_a_proj"].bytes + ops["kv_a_proj"].bytes
    assert k.bytes == apart - tokens * 7168 * 2  # the hidden state read once
    # the new latent rows written by the RoPE pre-kernel (before: on this GEMM, and in a
    # prompt the naive op sequence's expanded K/V rows, n_h * 320 elements a token)
    assert ks["rope"].bytes == ops["rope"].bytes + tokens * 576 * 2
    lite = {k.name for k in step_kernels("deepseek-v2-lite", phase, S, B)}
    assert "kv_a_proj" in lite and "qkv_a_proj" not in lite
