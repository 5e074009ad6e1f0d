"""Parameter counts against what the real implementations hold and what papers publish."""

from decimal import Decimal

import pytest

import mlacalc

# Exact totals: the number of parameters the Hugging Face implementation holds.
EXACT_TOTALS = [
    pytest.param("gpt2", 124_439_808, id="gpt2-HF-GPT2LMHeadModel-124439808"),
    pytest.param("llama-2-7b", 6_738_415_616, id="llama-2-7b-PEFT-all-params-6738415616"),
    pytest.param("llama-3-8b", 8_030_261_248, id="llama-3-8b-safetensors-8030261248"),
    pytest.param("qwen2.5-7b", 7_615_616_512, id="qwen2.5-7b-HF-API-7615616512"),
    pytest.param("mixtral-8x7b", 46_702_792_704, id="mixtral-8x7b-46702792704"),
]


@pytest.mark.parametrize("name,expected", EXACT_TOTALS)
def test_exact_totals(name, expected):
    assert mlacalc.param_counts(name).total == expected


# Exact recounts from each model's Hugging Face config (cited in its model_configs/*.yaml `source`).
DERIVED_TOTALS = {
    "llama-2-70b": 68_976_648_192,
    "llama-3-70b": 70_553_706_496,
    "llama-3.1-405b": 405_853_388_800,
    "mistral-7b": 7_241_732_096,
    "qwen2.5-72b": 72_706_203_648,
    "falcon-7b": 6_921_720_704,
    "gemma-2b": 2_506_172_416,
    "deepseek-v2-lite": 15_706_484_224,
    "deepseek-v2": 235_741_434_880,
    "deepseek-v3": 671_026_419_200,
    "deepseek-v3.2": 671_877_944_064,
    "kimi-k2": 1_026_408_232_448,
    "minicpm3-4b": 4_073_875_968,
}


@pytest.mark.parametrize("name,expected", sorted(DERIVED_TOTALS.items()))
def test_derived_totals(name, expected):
    assert mlacalc.param_counts(name).total == expected


def agrees(value: int, published: str) -> bool:
    """Does an exact count agree with a published figure such as '2.4B' or '1T'?

    Published counts are rounded or truncated to their last digit, so a figure
    ``v`` with last-digit unit ``u`` covers ``[v - u/2, v + u)``.
    """
    scale = {"B": 10**9, "T": 10**12}[published[-1]]
    digits = published[:-1]
    unit = Decimal(1).scaleb(Decimal(digits).as_tuple().exponent) * scale
    v = Decimal(digits) * scale
    return v - unit / 2 <= value < v + unit


PUBLISHED_MOE = [
    pytest.param("deepseek-v3", "671B", "37B", id="deepseek-v3-README-s3"),
    pytest.param("deepseek-v2", "236B", "21B", id="deepseek-v2-tech-report-s3.1.2"),
    pytest.param("deepseek-v2-lite", "15.7B", "2.4B", id="deepseek-v2-lite-tech-report-B.1"),
    pytest.param("kimi-k2", "1T", "32B", id="kimi-k2-README-s2"),
]


@pytest.mark.parametrize("name,total,active", PUBLISHED_MOE)
def test_published_moe_counts(name, total, active):
    counts = mlacalc.param_counts(name)
    assert agrees(counts.total, total)
    assert agrees(counts.active, active)


def test_agrees_rule():
    assert agrees(2_451_435_008, "2.4B")  # V2-Lite: 2.45B, published truncated
    assert not agrees(2_500_000_000, "2.4B")
    assert not agrees(2_340_000_000, "2.4B")
    assert agrees(36_625_618_432, "37B") and not agrees(36_400_000_000, "37B")


def test_deepseek_v3_active_convention(v3):
    """Active = all but unused routed experts and the input embedding (output head counts)."""
    c = mlacalc.param_counts(v3)
    assert c.active == 36_625_618_432
    # + the input embedding gives the 37.55B of the 'embedding and head both counted' rule
    assert c.active + c.embedding == 37_552_297_472


def test_deepseek_v3_mtp(v3):
    c = mlacalc.param_counts(v3)
    assert c.mtp == 11_610_068_224
    assert c.total_with_mtp == 682_636_487_424
    # the Hugging Face checkpoint also stores the MTP layer's copies of embed_tokens and the head
    assert c.total + c.mtp + 2 * c.embedding == 684_489_845_504  # "685B on HF"


def test_deepseek_v32_indexer_and_published_685b():
    """DeepSeek-V3.2 is DeepSeek-V3 plus one lightning indexer per layer (MTP layer included):
    wq_b 1536 -> 64 x 128, wk 7168 -> 128, its LayerNorm (weight and bias), weights_proj
    7168 -> 64. The card's 685B counts the MTP module and its copies of the embedding and head,
    as DeepSeek-V3's does."""
    indexer = 1536 * 64 * 128 + 7168 * 128 + 2 * 128 + 7168 * 64
    assert indexer == 13_959_424
    v3, v32 = mlacalc.param_counts("deepseek-v3"), mlacalc.param_counts("deepseek-v3.2")
    assert v32.total == v3.total + 61 * indexer == 671_877_944_064
    assert v32.mtp == v3.mtp + indexer == 11_624_027_648
    assert agrees(v32.total + v32.mtp + 2 * v32.embedding, "685B")
    assert not agrees(v32.total, "685B")
    assert agrees(v32.active, "37B")


def test_mtp_zero_where_none():
    assert mlacalc.param_counts("deepseek-v2").mtp == 0
    assert mlacalc.param_counts("llama-3-8b").mtp == 0


def test_gemma_non_embedding_matches_paper_table_2():
    c = mlacalc.param_counts("gemma-2b")
    assert c.non_embedding == 1_981_884_416
    assert c.embedding == 256_000 * 2048  # the paper's 524,550,144 uses a 256,128-token vocabulary


def test_qwen_non_embedding_matches_card():
    c = mlacalc.param_counts("qwen2.5-7b")
    assert agrees(c.total, "7.61B") and agrees(c.non_embedding, "6.53B")


def test_active_of_dense_models():
    gpt2 = mlacalc.param_counts("gpt2")
    assert gpt2.active == gpt2.total - 1024 * 768  # tied wte does the head matmul; wpe is a lookup
    llama = mlacalc.param_counts("llama-2-7b")
    assert llama.active == llama.total - 32000 * 4096  # untied: the input table is a lookup
    assert mlacalc.param_counts("minicpm3-4b").active == mlacalc.param_counts("minicpm3-4b").total


def test_mixtral_active():
    c = mlacalc.param_counts("mixtral-8x7b")
    assert c.active == 12_879_925_248 - 32000 * 4096  # HF card 12.9B counts the input embedding


# Each part recounted by hand from the reference configs (layer shapes of the Hugging Face
# classes), not from the code under test; the totals are the exact figures above.
HAND_BREAKDOWNS = {
    "gpt2": {  # d 768, 12 layers, vocab 50257, 1024 positions, tied head, biases everywhere
        "embedding": 50257 * 768,
        "position_embedding": 1024 * 768,
        "lm_head": 0,
        "attention": 12 * (768 * 3 * 768 + 3 * 768 + 768 * 768 + 768),
        "dense_ffn": 12 * (768 * 3072 + 3072 + 3072 * 768 + 768),
        "norms": 12 * 2 * 2 * 768 + 2 * 768,
    },
    "mixtral-8x7b": {  # d 4096, 32 layers, 8 experts of 14336, GQA 32/8 heads of 128
        "embedding": 32000 * 4096,
        "lm_head": 32000 * 4096,
        "attention": 32 * (4096 * 4096 + 2 * 4096 * 1024 + 4096 * 4096),
        "moe_routed_experts": 32 * 8 * 3 * 4096 * 14336,
        "moe_router": 32 * 8 * 4096,
        "norms": 32 * 2 * 4096 + 4096,
    },
    "deepseek-v3": {  # d 7168, 61 layers (3 dense), 256 routed + 1 shared experts of 2048
        "embedding": 129280 * 7168,
        "lm_head": 129280 * 7168,
        "attention": 61
        * (
            7168 * 1536
            + 1536
            + 1536 * 128 * 192  # q_a_proj, q_a_layernorm, q_b_proj
            + 7168 * 576
            + 512
            + 512 * 128 * 256  # kv_a_proj_with_mqa, kv_a_layernorm, kv_b_proj
            + 128 * 128 * 7168  # o_proj
        ),
        "dense_ffn": 3 * 3 * 7168 * 18432,
        "moe_routed_experts": 58 * 256 * 3 * 7168 * 2048,
        "moe_shared_experts": 58 * 3 * 7168 * 2048,
        "moe_router": 58 * (256 * 7168 + 256),  # gate weight and e_score_correction_bias
        "norms": 61 * 2 * 7168 + 7168,
    },
}


@pytest.mark.parametrize("name", sorted(HAND_BREAKDOWNS))
def test_breakdown_matches_a_hand_count(name):
    c = mlacalc.param_counts(name)
    expected = dict.fromkeys(c.breakdown, 0) | HAND_BREAKDOWNS[name]
    assert c.breakdown == expected
    assert sum(expected.values()) == c.total
    assert c.to_dict()["total"] == c.total


def test_deepseek_v3_attention_breakdown(v3):
    # seed 002 (docs/seed-claims.md, Sources), section 2.4.1, lists DeepSeek-V3's projection shapes
    a = mlacalc.param_counts(v3).attention_breakdown
    assert a == {
        "q_a_proj": 7168 * 1536,
        "q_a_layernorm": 1536,
        "q_b_proj": 1536 * 128 * (128 + 64),
        "kv_a_proj_with_mqa": 7168 * (512 + 64),
        "kv_a_layernorm": 512,
        "kv_b_proj": 512 * 128 * (128 + 128),
        "o_proj": 128 * 128 * 7168,
    }


def test_weight_bytes():
    # fp8: one byte each but the norms and routers (107,451,904) and the embedding and head
    # (926,679,040 each), kept at 16 bits as plan keeps them (671,026,419,200 before)
    assert mlacalc.weight_bytes("deepseek-v3", "fp8") == 671_026_419_200 + 107_451_904 + 2 * (
        926_679_040
    )
    # the checkpoint (tests/test_cost_quant.py): fp8 with block scales, bf16 embedding,
    # head, norms and router
    assert mlacalc.weight_bytes("deepseek-v3") == 673_150_582_112
    assert mlacalc.weight_bytes("deepseek-v3", "bf16") == 2 * 671_026_419_200
    # norms 266,240, embedding and head 131,072,000 each at 16 bits (6_738_415_616 // 2 before)
    kept = 266_240 + 2 * 131_072_000
    assert mlacalc.weight_bytes("llama-2-7b", "int4") == (6_738_415_616 - kept) // 2 + 2 * kept
    # the MTP layer's norms and router at 16 bits too (682,636,487,424 before)
    assert mlacalc.weight_bytes("deepseek-v3", "fp8", include_mtp=True) == 684_599_170_560


def test_deepseek_v3_mtp_published_11_5b():
    """README_WEIGHTS: the MTP module has '11.5B unique' parameters. Our 11.61B counts its eh_proj
    (2d -> d, 102,760,448); without it the module's layer and norms give 11.51B."""
    c = mlacalc.param_counts("deepseek-v3")
    eh_proj = 2 * 7168 * 7168
    assert c.mtp - eh_proj == 11_507_307_776
    assert agrees(c.mtp - eh_proj, "11.5B") and not agrees(c.mtp, "11.5B")


#: shipped models whose layout departs from the Llama one, fact by fact (the rest: separate
#: Q/K/V projections, RMSNorms, a gated MLP)
_FUSED_QKV = {"gpt2", "falcon-7b"}  # GPT-2's c_attn, Falcon's query_key_value
_LAYER_NORM = {"gpt2", "falcon-7b"}  # LayerNorm weight and bias
_UNGATED = {"gpt2", "falcon-7b", "nemotron-3-super-120b-a12b", "nemotron-3-ultra-550b-a55b"}


def test_layout_facts_of_every_shipped_model():
    """The model spec's fused_qkv, layer_norm and gated_mlp, each right for every shipped
    model (the Hugging Face modules themselves: tests/test_reference_hf.py)."""
    from mlacalc.models.loading import shipped_models

    for name in shipped_models():
        m = mlacalc.load_model(name)
        assert m.fused_qkv == (name in _FUSED_QKV), name
        assert m.layer_norm == (name in _LAYER_NORM), name
        assert m.gated_mlp == (name not in _UNGATED), name


def test_starcoder2_on_falcon_s_layout_keeps_its_q_k_v_apart():
    """StarCoder2 counts on Falcon's layout (LayerNorms with a bias, an ungated MLP) but has
    q/k/v projections of its own: a tensor-parallel rank holds ceil(n_kv / tp) whole K/V heads
    (24 heads, 2 KV heads of 128 at TP4: one, half the K/V weights). Before, Falcon's fused
    projection split evenly: 5,113,472 parameters a layer on a rank, not 5,506,816."""
    transformers = pytest.importorskip("transformers")
    from mlacalc.cost.engine import attention_params
    from mlacalc.serving.layout import _attention_per_rank

    m = mlacalc.import_hf_config(transformers.CONFIG_MAPPING["starcoder2"]().to_dict())
    assert (m.fused_qkv, m.layer_norm, m.gated_mlp) == (False, True, False)
    d, q, kv = 3072, 24 * 128, 2 * 128
    attn = attention_params(m)
    biased = {"q_proj": (d, q), "k_proj": (d, kv), "v_proj": (d, kv), "o_proj": (q, d)}
    assert attn == {k: n_in * n_out + n_out for k, (n_in, n_out) in biased.items()}
    q_o = attn["q_proj"] + attn["o_proj"]
    assert _attention_per_rank(m, 4) == q_o / 4 + (attn["k_proj"] + attn["v_proj"]) / 2
    assert _attention_per_rank(m, 4) == 5_506_816
