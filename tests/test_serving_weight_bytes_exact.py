"""Weights on a GPU in whole weights and bytes: norms in the 16 bits the engines keep them in
under a narrower weight dtype, and a tensor-parallel split exact (no float share rounding a
bf16 part to an odd byte count); the ranks' shards add up to the whole."""

from __future__ import annotations

import json

import pytest

import mlacalc
from mlacalc.serving.layout import make_layout, weight_bytes_by_part, weights_per_gpu

#: Qwen3-32B's config.json (the trial's): 64 layers of 64 query and 8 K/V heads of 128,
#: per-head q/k norms, hidden 5120, FFN 25600, vocabulary 151936, untied head
QWEN3_32B = {
    "architectures": ["Qwen3ForCausalLM"],
    "model_type": "qwen3",
    "head_dim": 128,
    "hidden_act": "silu",
    "hidden_size": 5120,
    "intermediate_size": 25600,
    "max_position_embeddings": 40960,
    "num_attention_heads": 64,
    "num_hidden_layers": 64,
    "num_key_value_heads": 8,
    "rms_norm_eps": 1e-06,
    "rope_theta": 1000000,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "vocab_size": 151936,
}
D, L, HD = 5120, 64, 128


@pytest.fixture(scope="module")
def qwen3_32b(tmp_path_factory):
    path = tmp_path_factory.mktemp("cfg") / "qwen3-32b.config.json"
    path.write_text(json.dumps(QWEN3_32B))
    return mlacalc.load_model(str(path))


#: the norms part: a layer's input and post-attention norms and the final one (the per-head
#: q/k norms are the attention's)
NORMS = L * 2 * D + D


@pytest.mark.parametrize("dtype", ["fp8", "int4", "fp4"])
def test_norms_keep_16_bits_under_a_narrower_weight_dtype(qwen3_32b, dtype):
    """660,480 parameters of norms are 1,320,960 B under fp8 (they had been 660,480: a byte a
    weight); the linear weights shrink, the norms do not."""
    lay = make_layout(qwen3_32b, 1)
    assert weight_bytes_by_part(qwen3_32b, lay, dtype)["norms"] == NORMS * 2 == 1_320_960
    assert weight_bytes_by_part(qwen3_32b, lay, "fp32")["norms"] == NORMS * 4


def test_plan_memory_keeps_norms_in_bf16(qwen3_32b):
    p = mlacalc.plan(
        qwen3_32b, "B200", gpus=1, weight_dtype="fp8", isl=2000, osl=500, concurrency=8
    )
    assert p.memory["weights_norms"] == 1_320_960
    assert p.weights_per_gpu_bytes == sum(
        v for k, v in p.memory.items() if k.startswith("weights_")
    )


def test_tp8_bf16_attention_by_hand(qwen3_32b):
    """q, k, v, o split over 8 ranks (one K/V head each), the q/k norms whole on every rank:
    1,509,982,208 B (a float share had made it ...209, half a bf16 weight)."""
    per_layer = (D * 64 * HD + 2 * D * 8 * HD + 64 * HD * D) // 8 + 2 * HD
    parts = weight_bytes_by_part(qwen3_32b, make_layout(qwen3_32b, 8, tp=8), "bf16")
    assert parts["attention"] == L * per_layer * 2 == 1_509_982_208


@pytest.mark.parametrize("tp", [2, 4, 8])
def test_shards_are_whole_weights_and_add_up_to_the_whole(qwen3_32b, tp):
    """Every part on a rank is whole bf16 weights; the split parts' shards sum to the whole
    (the attention's replicated per-head norms apart) and the total is the sum of its parts."""
    one = weight_bytes_by_part(qwen3_32b, make_layout(qwen3_32b, 1), "bf16")
    lay = make_layout(qwen3_32b, tp, tp=tp)
    parts = weight_bytes_by_part(qwen3_32b, lay, "bf16")
    assert all(v % 2 == 0 for v in parts.values())
    assert parts["dense_ffn"] * tp == one["dense_ffn"]
    assert parts["embedding_head"] * tp == one["embedding_head"]
    head_norms = L * 2 * HD * 2
    assert (parts["attention"] - head_norms) * tp == one["attention"] - head_norms
    assert weights_per_gpu(qwen3_32b, lay, "bf16") == sum(parts.values())


@pytest.mark.parametrize("dtype", ["fp8", "fp4"])
def test_a_moe_router_keeps_16_bits_under_a_narrower_weight_dtype(dtype):
    """Qwen3-30B-A3B: 48 routers of 128 x 2048 are 2 bytes a weight under fp8 or fp4 (they
    had been sized in the dtype, as the norms were), as the engines build them unquantized."""
    from reference_data import HF_CONFIGS

    m = mlacalc.load_model(str(HF_CONFIGS / "qwen3-30b-a3b.config.json"))
    parts = weight_bytes_by_part(m, make_layout(m, 1), dtype)
    assert parts["router"] == 48 * 128 * 2048 * 2
    assert weight_bytes_by_part(m, make_layout(m, 1), "bf16")["router"] == parts["router"]
