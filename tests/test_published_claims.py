"""One test per numeric claim of the seed articles and the papers they quote.

Each test computes the product's own figure and asserts it, together with whether
the published claim holds or how it is off. docs/seed-claims.md lists the same
claims with the verdicts and names the articles (its Sources section defines the seed
labels); keep the two in step.
"""

from fractions import Fraction

import pytest

import mlacalc
from mlacalc import (
    KVLayout,
    attention_cost,
    attention_flops,
    kv_cache,
    kv_cache_bytes,
    param_counts,
)
from mlacalc.models.variants import as_variant

GiB, MiB, KiB = 2**30, 2**20, 2**10
V2 = mlacalc.load_model("deepseek-v2")
V3 = mlacalc.load_model("deepseek-v3")
V2_MHA = as_variant(V2, "mha")  # the 'hypothetical standard MHA' of seed 004


def one_layer(model):
    return mlacalc.load_model(model).with_changes(num_hidden_layers=1)


def per_key_decode_flops(model, impl):
    """Marginal decode FLOPs of one more cached key, one layer, one sequence."""
    m = one_layer(model)
    return attention_flops(m, "decode", 1001, impl=impl) - attention_flops(
        m, "decode", 1000, impl=impl
    )


# ------------------------------------------------------------------------------------
# DeepSeek-V2 technical report (arXiv:2405.04434; quoted by seeds 002 and 004)


def test_v2_table1_mla_equals_gqa_with_2_25_groups():
    mla = kv_cache(V2, 1).row_elements
    assert mla == 512 + 64 == 576
    assert Fraction(mla, 2 * V2.qk_nope_head_dim) == Fraction(9, 4)  # 2.25 groups of d_h = 128
    assert Fraction(mla, V2.qk_nope_head_dim) == Fraction(9, 2)  # (d_c + d_h^R) = 9/2 d_h


def test_v2_mla_is_2_25_times_mqa():  # seed 002, sections 1.4 and 2.4.2
    mqa = kv_cache(as_variant(V2, "mqa"), 1).row_elements
    assert Fraction(kv_cache(V2, 1).row_elements, mqa) == Fraction(9, 4)


def test_v2_table9_cache_elements():
    assert kv_cache(V2, 1).elements_per_token == 34_560  # "34.6K"
    assert kv_cache("deepseek-v2-lite", 1).elements_per_token == 15_552  # "15.6K"
    small_mha = as_variant("deepseek-v2-lite", "mha")
    assert kv_cache(small_mha, 1).elements_per_token == 110_592  # "110.6K"


def test_v2_93_3_percent_kv_reduction():
    """93.3% holds only for MLA cached at 6 bits against DeepSeek 67B in 16 bits."""
    ds67b = mlacalc.load_model("llama-2-70b").with_changes(
        name="deepseek-67b",
        num_hidden_layers=95,
        num_attention_heads=64,
        num_key_value_heads=8,
        head_dim=128,
    )
    base = kv_cache_bytes(ds67b, 1, kv_dtype="bf16")
    same_precision = 1 - Fraction(kv_cache_bytes(V2, 1, kv_dtype="bf16"), base)
    six_bit = 1 - Fraction(kv_cache_bytes(V2, 1, kv_dtype=KVLayout.uniform(6)), base)
    assert round(float(same_precision) * 100, 1) == 82.2
    assert round(float(six_bit) * 100, 1) == 93.3


# ------------------------------------------------------------------------------------
# seed 004: "Understanding DeepSeek's Multi-Head Latent Attention"


@pytest.mark.parametrize(
    "S,gpt2_mb,v2_mb",
    [
        (512, 6, 64),
        (1024, 24, 256),
        (2048, 96, 1024),
        (4096, 384, 4096),
        (8192, 1536, 16384),
        (16384, 6144, 65536),
        (32768, 24576, 262144),
        (65536, 98304, 1048576),
    ],
)
def test_seed004_attention_matrix_table(S, gpt2_mb, v2_mb):
    """Holds in MiB (the 'MB' of the table is 2**20 bytes): one layer's fp16 score matrix."""

    def scores_bytes(model):
        cost = attention_cost(one_layer(model), "prefill", S, act_dtype="fp16")
        return next(op for op in cost.ops if op.name == "scores").bytes_written

    assert scores_bytes("gpt2") == gpt2_mb * MiB
    assert scores_bytes(V2) == v2_mb * MiB


@pytest.mark.parametrize(
    "S,published_mb", [(128, 0.4), (256, 0.8), (512, 1.5), (1024, 3.0), (2048, 6.0), (4096, 12.0)]
)
def test_seed004_gpt2_cache_table_is_one_layer(S, published_mb):
    """The table's cache sizes are one layer's; GPT-2 has 12 layers (12 MiB -> 144 MiB at 4096)."""
    full = kv_cache_bytes("gpt2", S, kv_dtype="fp16")
    assert round(full / 12 / MiB, 1) == published_mb
    if S == 4096:
        assert full == 144 * MiB


@pytest.mark.parametrize(
    "tokens,published_gb", [(1024, 3.7), (4096, 14.6), (32768, 117.2), (131072, 468.8)]
)
def test_seed004_v2_mha_cache_table(tokens, published_gb):
    """Mixed units: the table divides by 2**30 but counts 1K = 1000 tokens."""
    exact = kv_cache_bytes(V2_MHA, tokens, kv_dtype="fp16")
    assert exact == tokens * 3_932_160
    decimal_tokens = kv_cache_bytes(V2_MHA, tokens // 1024 * 1000, kv_dtype="fp16")
    assert round(decimal_tokens / GiB, 1) == published_gb
    assert round(exact / GiB, 2) == {1024: 3.75, 4096: 15.0, 32768: 120.0, 131072: 480.0}[tokens]


def test_seed004_variants_table_per_token():
    mha = kv_cache_bytes(V2_MHA, 1, kv_dtype="fp16")
    gqa = kv_cache_bytes(as_variant(V2, "gqa", num_key_value_heads=8), 1, kv_dtype="fp16")
    mqa = kv_cache_bytes(as_variant(V2, "mqa"), 1, kv_dtype="fp16")
    mla = kv_cache_bytes(V2, 1, kv_dtype="fp16")
    assert (mha, gqa, mqa, mla) == (3_932_160, 245_760, 30_720, 69_120)
    # first table: MHA "4 MB" ok, GQA "500 KB" is 2x too high (240 KiB), MQA "31 KB" ok (30.7 kB)
    assert gqa == 240 * KiB
    # summary table: MHA "3.9 MB" ok, GQA "244 KB" ~ok, MQA "15 KB" is half the real 30 KiB,
    # MLA "60 KB" leaves out the 64-dim RoPE key (60 KiB latent only; 67.5 KiB with it)
    assert mqa == 30 * KiB and kv_cache_bytes(V2, 1, kv_dtype="fp16") - 60 * 64 * 2 == 60 * KiB
    # relative to MHA: GQA 16x ok, MQA is 128x (= n_h) not 256x, MLA 56.9x not 64x
    assert mha // gqa == 16 and mha // mqa == 128
    assert round(mha / mla, 1) == 56.9


def test_seed004_variants_table_128k():
    S = 131072
    sizes = {
        v: kv_cache_bytes(as_variant(V2, v) if v != "mla" else V2, S, kv_dtype="fp16")
        for v in ("mha", "gqa", "mqa", "mla")
    }
    assert (
        sizes["mha"] == 480 * GiB
    )  # "512 GB" = 3.9 MB x 131072, neither GiB nor GB exact (515.4 GB)
    assert (
        sizes["gqa"] == 30 * GiB
    )  # "32 GB" holds decimally (32.2 GB); the first table's 64 GB is 2x
    assert sizes["mqa"] == 3.75 * GiB  # "~4 GB" ok (4.03 GB); the summary's "2 GB" is half
    assert round(sizes["mla"] / 1e9, 2) == 9.06  # "8 GB" is the latent without RoPE (8.05 GB)


def test_seed004_compression_ratio_64_vs_57():
    mha = kv_cache(V2_MHA, 1).row_elements
    assert mha / 512 == 64  # the 64x leaves out the RoPE key
    assert (
        round(mha / kv_cache(V2, 1).row_elements, 1) == 56.9
    )  # "~57X", stated later in the article


def test_seed004_eight_requests_at_32k_nearly_1_tb():
    assert kv_cache_bytes(V2_MHA, 32768, 8, kv_dtype="fp16") == 960 * GiB  # 1.03e12 B


def test_seed004_weights_are_not_30_to_60_gb():
    assert mlacalc.weight_bytes(V2, "fp16") == 471_482_869_760  # 439 GiB at DeepSeek-V2 scale


# ------------------------------------------------------------------------------------
# seed 003: "MLA Weight Absorption: What We Kept, What We Dropped"


def test_seed003_core_flops_320_vs_1088():
    per_pair = {
        impl: attention_cost(one_layer(V3), "prefill", 64, impl=impl).stage_flops["core"]
        // (128 * 64 * 64)
        for impl in ("naive", "absorbed")
    }
    assert per_pair == {"naive": 2 * 320, "absorbed": 2 * 1088}
    assert Fraction(1088, 320) == Fraction(34, 10)


def test_seed003_ratio_same_for_24_heads():
    nam = V3.with_changes(num_attention_heads=24, num_key_value_heads=24)
    core = {
        impl: attention_cost(nam, "prefill", 128, impl=impl).stage_flops["core"]
        for impl in ("naive", "absorbed")
    }
    assert Fraction(core["absorbed"], core["naive"]) == Fraction(17, 5)


def test_seed003_projections_net_to_zero():
    for phase in ("prefill", "decode"):
        naive = attention_cost(V3, phase, 4096, impl="naive").stage_flops
        absorbed = attention_cost(V3, phase, 4096, impl="absorbed").stage_flops
        assert absorbed["absorb"] == naive["kv_up"]
        assert absorbed["kv_up"] == 0


def test_seed003_attention_weights_25_gib_is_24_gib():
    nam = one_layer(V3.with_changes(num_attention_heads=24, num_key_value_heads=24))
    cost = attention_cost(nam, "prefill", 8192, batch=8, impl="naive")
    probs = next(op for op in cost.ops if op.name == "softmax").bytes_written
    assert probs == 24 * GiB  # 25.8 GB: "25 GiB" mixes the units


def test_seed003_cache_entries_and_order_of_magnitude():
    latent = kv_cache(V3, 1).row_elements
    naive = kv_cache(V3, 1, impl="naive").row_elements
    assert latent == 512 + 1 * 64 and naive == 128 * (128 + 64) + 128 * 128 == 40_960
    assert naive // latent == 71  # "roughly an order of magnitude" understates: 71x


def test_seed003_per_head_key_is_192_not_384():
    assert V3.qk_nope_head_dim + V3.qk_rope_head_dim == 192


def test_seed003_multi_megabyte_to_sub_megabyte():
    assert kv_cache_bytes(V3, 1, impl="naive") == 4_997_120  # 4.77 MiB per token
    assert kv_cache_bytes(V3, 1) == 70_272  # 68.6 KiB per token


def test_seed003_million_tokens_one_b200_vs_two():
    b200 = 180 * 10**9  # HGX B200 memory
    assert kv_cache_bytes(V3, 2**20) < b200  # 73.7 GB
    assert kv_cache_bytes(V3, 2**20, impl="naive") > 2 * b200  # 5.24 TB


def test_seed003_kv_lora_rank_is_4x_nope():
    assert V3.kv_lora_rank == 4 * V3.qk_nope_head_dim


# ------------------------------------------------------------------------------------
# seed 002: "Exploring the Transformer Series (28) - DeepSeek MLA"


def test_seed002_v3_parameter_list():
    a = param_counts(V3).attention_breakdown
    w_dkv, w_kr = 7168 * 512, 7168 * 64
    w_uk, w_uv = (
        512 * 128 * 128,
        512 * 128 * 128,
    )  # the article labels W_UK with qk_rope_head_dim; it is d_nope
    w_dq, w_uq, w_qr, w_o = 7168 * 1536, 1536 * 128 * 128, 1536 * 64 * 128, 128 * 128 * 7168
    assert a["kv_a_proj_with_mqa"] == w_dkv + w_kr
    assert a["kv_b_proj"] == w_uk + w_uv
    assert a["q_a_proj"] == w_dq and a["q_b_proj"] == w_uq + w_qr and a["o_proj"] == w_o


def test_seed002_low_rank_vs_full_matrix():
    """'2 x d_c x d vs d x d' assumes n_h d_h = d; for DeepSeek-V3 n_h d_h = 16384, not 7168."""
    key_path = 7168 * 512 + 512 * 128 * 128
    assert key_path == 12_058_624 and key_path != 2 * 512 * 7168
    assert 7168 * 128 * 128 == 117_440_512  # the full-rank W_K it replaces


def test_seed002_ratios_and_shapes():
    assert Fraction(V2.kv_lora_rank, V2.hidden_size) == Fraction(1, 10)
    assert Fraction(V2.q_lora_rank, V2.hidden_size) == Fraction(3, 10)
    a = param_counts(V2).attention_breakdown
    assert a["q_b_proj"] == 1536 * 24576 and a["q_a_proj"] == 5120 * 1536
    assert V2.num_attention_heads * V2.v_head_dim == 16384


def test_seed002_qwen_72b_cache_needs_the_head_width():
    """'2 x 80 x 64' leaves out d_h = 128: 2 n_h d_h l = 1,310,720 elements per token
    (MHA Qwen-72B)."""
    qwen_mha = as_variant("qwen2.5-72b", "mha")
    assert kv_cache(qwen_mha, 1).elements_per_token == 2 * 64 * 128 * 80 == 1_310_720
    assert kv_cache("qwen2.5-72b", 1).elements_per_token == 163_840  # Qwen2.5-72B is GQA-8


def test_seed002_latent_is_not_split_256_256():
    """K and V each expand from the whole 512-wide latent (kv_b_proj: 512 -> n_h (128 + 128))."""
    assert param_counts(V2).attention_breakdown["kv_b_proj"] == 512 * 128 * (128 + 128)


def test_seed002_absorbed_mla_is_mqa_with_wider_heads():
    """Latent keys are d_c + d_rope = 4.5 d_h wide and values d_c = 4 d_h ('4 d' in the text
    means 4 d_h)."""
    assert V2.kv_lora_rank == 4 * V2.qk_nope_head_dim
    assert Fraction(V2.kv_lora_rank + V2.qk_rope_head_dim, V2.qk_nope_head_dim) == Fraction(9, 2)


def test_seed002_merging_wuq_wuk_costs_more():
    for phase in ("decode", "prefill"):
        absorbed = attention_cost(V2, phase, 1024, impl="absorbed").stage_flops
        merged = attention_cost(V2, phase, 1024, impl="absorbed_merged").stage_flops
        assert merged["q_proj"] > absorbed["q_proj"] + absorbed["absorb"]
        assert merged["o_proj"] > absorbed["o_proj"]


def test_seed002_no_absorption_in_prefill_but_in_decode():
    for S in (4096, 32768):
        assert attention_flops(V2, "prefill", S, impl="absorbed") > attention_flops(
            V2, "prefill", S, impl="naive"
        )
        assert attention_flops(V2, "decode", S, impl="absorbed") < attention_flops(
            V2, "decode", S, impl="compressed"
        )


def test_seed002_naive_cache_is_larger_than_mha():
    """DeepSeek's attn_impl='naive' caches more than an MHA with d_h = 128 would."""
    assert kv_cache(V3, 1, impl="naive").row_elements == 40_960
    assert kv_cache(as_variant(V3, "mha"), 1).row_elements == 32_768


def test_seed002_matrix_chain_order():
    """(A B) C costs 2 m p (k + n), A (B C) costs 2 n k (m + p); with n small the second wins."""
    m, k, p, n = 4096, 512, 512, 1
    assert 2 * m * k * p + 2 * m * p * n > 2 * m * k * n + 2 * k * p * n


# ------------------------------------------------------------------------------------
# seeds 000/001 (SGLang MLA blog) and the madsys and datacrunch tables (docs/seed-claims.md)


def test_seed000_saving_is_heads_over_groups():
    for n_kv in (1, 2, 4, 8, 16, 64):
        gqa = as_variant("llama-3-70b", "gqa", num_key_value_heads=n_kv)
        assert Fraction(
            kv_cache_bytes(as_variant(gqa, "mha"), 100), kv_cache_bytes(gqa, 100)
        ) == Fraction(64, n_kv)


def test_seed000_naive_latent_expansion_is_slower_than_full_cache():
    for S in (1024, 32768):
        assert attention_flops(V3, "decode", S, impl="compressed") > 10 * attention_flops(
            V3, "decode", S, impl="naive"
        )


def test_madsys_per_token_table():
    assert kv_cache_bytes(one_layer(V2), 1, impl="naive") == 81_920  # 81.92 kB
    assert kv_cache_bytes(one_layer(V2), 1) == 1_152  # 1.152 kB
    assert round(1 - 1152 / 81920, 3) == 0.986  # "98.6% less"
    assert per_key_decode_flops(V2, "naive") == 81_920  # 0.08 MFLOP
    assert per_key_decode_flops(V2, "compressed") == 33_636_352  # 33.64 MFLOP
    assert per_key_decode_flops(V2, "absorbed") == 278_528  # 0.28 MFLOP


def test_datacrunch_table1():
    S = 8192
    mha = kv_cache_bytes(as_variant(V3, "mha"), S, kv_dtype="fp16")
    assert mha == int(30.5 * GiB)  # "30.50 GB" is GiB
    assert (
        round(kv_cache_bytes(V3, S, kv_dtype="fp16") / GiB, 3) == 0.536
    )  # "0.51" is the latent alone, in GB
    assert round(512 * 2 * 61 * S / 1e9, 2) == 0.51
    gqa24 = kv_cache_bytes(as_variant(V3, "gqa", num_key_value_heads=32), S, kv_dtype="fp16")
    assert gqa24 == int(
        7.625 * GiB
    )  # 24 KV heads do not divide 128; 32 give 7.63 GiB; "6.10" not reproducible
    llama13b = mlacalc.load_model("llama-2-7b").with_changes(
        hidden_size=5120, num_attention_heads=40, num_key_value_heads=40, num_hidden_layers=40
    )
    assert round(kv_cache_bytes(llama13b, S, kv_dtype="fp16") / GiB, 2) == 6.25  # published 6.26


def test_datacrunch_table3_mla_operator():
    core = attention_cost(one_layer(V3), "decode", 8192, impl="absorbed").stage_flops["core"]
    assert core == 2 * 8192 * 128 * (576 + 512) == 2_281_701_376  # "2.28 GFLOPs"


def test_datacrunch_ridge_crossing_at_1394():
    """'the MLA kernel crosses the ridge at L ~ 1394': their own formulas give 1403.6 on H200."""
    from mlacalc.timemodel.insight import compute_bound_seq_len

    core = compute_bound_seq_len(V3, "H200", batch=1)[0]
    assert round(core.value, 1) == 1403.6
