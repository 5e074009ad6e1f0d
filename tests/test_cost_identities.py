"""Identities of the cost model, as property-based tests over random dimensions."""

from fractions import Fraction

import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

import mlacalc
from mlacalc.cost import symbols as s

LLAMA = mlacalc.load_model("llama-3-8b")
V3 = mlacalc.load_model("deepseek-v3")
V2_LITE = mlacalc.load_model("deepseek-v2-lite")

dim = st.integers(1, 64)
even = st.integers(1, 32).map(lambda x: 2 * x)
phases = st.sampled_from(["prefill", "decode", "chunk"])


@st.composite
def mha_models(draw, n_kv=None):
    n_kv_ = draw(st.integers(1, 8)) if n_kv is None else n_kv
    group = draw(st.integers(1, 6))
    return LLAMA.with_changes(
        hidden_size=draw(dim),
        num_attention_heads=n_kv_ * group,
        num_key_value_heads=n_kv_,
        head_dim=draw(even),
        num_hidden_layers=draw(st.integers(1, 8)),
    )


@st.composite
def mla_models(draw):
    q_lora = draw(st.booleans())
    base = V3 if q_lora else V2_LITE
    n_h = draw(st.integers(1, 32))
    return base.with_changes(
        hidden_size=draw(dim),
        num_attention_heads=n_h,
        num_key_value_heads=n_h,
        kv_lora_rank=draw(dim),
        q_lora_rank=draw(dim) if q_lora else None,
        qk_nope_head_dim=draw(dim),
        qk_rope_head_dim=draw(even),
        v_head_dim=draw(dim),
        num_hidden_layers=draw(st.integers(1, 8)),
    )


@st.composite
def workloads(draw):
    S = draw(st.integers(1, 5000))
    phase = draw(phases)
    q = draw(st.integers(1, S)) if phase == "chunk" else None
    return dict(
        phase=phase, seq_len=S, batch=draw(st.integers(1, 64)), q_len=q, causal=draw(st.booleans())
    )


# -- GQA contains MHA and MQA --------------------------------------------------------


def test_gqa_formulas_reduce_to_mha_and_mqa():
    for quantity in (
        "kv_cache_elements",
        "kv_cache_bytes",
        "attention_params",
        "attention_flops",
        "unfused_bytes",
        "fused_bytes",
        "elementwise_flops",
    ):
        for phase in (None, "prefill", "decode", "chunk"):
            gqa = mlacalc.formula(quantity, "gqa", phase=phase)
            assert (
                sp.simplify(gqa.subs(s.n_kv, s.n_h) - mlacalc.formula(quantity, "mha", phase=phase))
                == 0
            )
            assert (
                sp.simplify(gqa.subs(s.n_kv, 1) - mlacalc.formula(quantity, "mqa", phase=phase))
                == 0
            )


@settings(max_examples=60, deadline=None)
@given(model=mha_models(), work=workloads())
def test_gqa_with_all_heads_is_mha(model, work):
    mha = model.with_changes(num_key_value_heads=model.num_attention_heads)
    assert mha.variant == "mha"
    mha_formula = mlacalc.formula(
        "attention_flops", "mha", phase=work["phase"], causal=work["causal"]
    )
    values = {
        s.L: mha.num_hidden_layers,
        s.B: work["batch"],
        s.S: work["seq_len"],
        s.d: mha.hidden_size,
        s.n_h: mha.num_attention_heads,
        s.d_h: mha.head_dim,
        s.q: work["q_len"] or 1,
    }
    assert mlacalc.attention_flops(mha, **work) == mha_formula.subs(values)


@settings(max_examples=60, deadline=None)
@given(model=mha_models(n_kv=1), work=workloads())
def test_gqa_with_one_head_is_mqa(model, work):
    assert model.variant in ("mqa", "mha")  # one query head per KV head is also MHA
    mqa_formula = mlacalc.formula("kv_cache_bytes", "mqa")
    values = {
        s.L: model.num_hidden_layers,
        s.B: work["batch"],
        s.S: work["seq_len"],
        s.d_h: model.head_dim,
        s.b: 2,
    }
    assert mlacalc.kv_cache_bytes(model, work["seq_len"], work["batch"]) == mqa_formula.subs(values)


# -- the numeric engine is the symbolic formula --------------------------------------


def _values(model, work):
    v = {
        s.L: model.num_hidden_layers,
        s.B: work["batch"],
        s.S: work["seq_len"],
        s.d: model.hidden_size,
        s.n_h: model.num_attention_heads,
        s.q: work["q_len"] or 1,
    }
    if model.is_mla:
        v.update(
            {
                s.d_c: model.kv_lora_rank,
                s.d_cq: model.q_lora_rank or 0,
                s.d_nope: model.qk_nope_head_dim,
                s.d_rope: model.qk_rope_head_dim,
                s.d_v: model.v_head_dim,
            }
        )
    else:
        v.update({s.n_kv: model.num_key_value_heads, s.d_h: model.head_dim})
    return v


@pytest.mark.slow
@settings(max_examples=80, deadline=None)
@given(
    model=mla_models(),
    work=workloads(),
    impl=st.sampled_from(["naive", "compressed", "absorbed", "absorbed_merged", None]),
)
def test_engine_equals_formula_mla(model, work, impl):
    expr = mlacalc.formula(
        "attention_flops",
        "mla",
        impl,
        phase=work["phase"],
        causal=work["causal"],
        q_lora=model.q_lora_rank is not None,
    )
    assert mlacalc.attention_flops(model, impl=impl, **work) == expr.subs(_values(model, work))
    cost = mlacalc.attention_cost(model, impl=impl, **work)
    fused = mlacalc.formula(
        "fused_bytes", "mla", impl, phase=work["phase"], q_lora=model.q_lora_rank is not None
    )
    w = Fraction(mlacalc.dtype_bits(model.weights_dtype), 8)
    # the formula reads every weight at b_w; report's cost keeps the latent norms' weights
    # (q_a_layernorm, kv_a_layernorm) at 16 bits under a narrower dtype, as the engines do
    norms = (model.q_lora_rank or 0) + model.kv_lora_rank
    kept = model.num_hidden_layers * norms * max(Fraction(2) - w, Fraction(0))
    values = {**_values(model, work), s.b: 2, s.b_a: 2, s.b_w: w}
    assert cost.fused_bytes == fused.subs(values) + kept
    unfused = mlacalc.formula(
        "unfused_bytes",
        "mla",
        impl,
        phase=work["phase"],
        causal=work["causal"],
        q_lora=model.q_lora_rank is not None,
    )
    assert cost.unfused_bytes == unfused.subs(values) + kept


@settings(max_examples=60, deadline=None)
@given(model=mha_models(), work=workloads())
def test_engine_equals_formula_gqa(model, work):
    expr = mlacalc.formula("attention_flops", "gqa", phase=work["phase"], causal=work["causal"])
    assert mlacalc.attention_flops(model, **work) == expr.subs(_values(model, work))


# -- MLA ---------------------------------------------------------------------------


def test_absorbed_over_naive_core_ratio_symbolic():
    naive = mlacalc.formula("attention_flops", "mla", "naive", stage="core")
    absorbed = mlacalc.formula("attention_flops", "mla", "absorbed", stage="core")
    ratio = sp.simplify(absorbed / naive)
    assert sp.simplify(ratio - (2 * s.d_c + s.d_rope) / (s.d_nope + s.d_rope + s.d_v)) == 0


@settings(max_examples=80, deadline=None)
@given(model=mla_models(), work=workloads())
def test_absorbed_over_naive_core_ratio(model, work):
    core = {
        impl: mlacalc.attention_cost(model, impl=impl, **work).stage_flops["core"]
        for impl in ("naive", "absorbed")
    }
    expected = Fraction(
        2 * model.kv_lora_rank + model.qk_rope_head_dim,
        model.qk_nope_head_dim + model.qk_rope_head_dim + model.v_head_dim,
    )
    assert Fraction(core["absorbed"], core["naive"]) == expected


def test_absorbed_over_naive_is_3_4_for_deepseek_v3(v3):
    core = {
        impl: mlacalc.attention_cost(v3, "prefill", 4096, impl=impl).stage_flops["core"]
        for impl in ("naive", "absorbed")
    }
    assert Fraction(core["absorbed"], core["naive"]) == Fraction(1088, 320) == Fraction(17, 5)


@settings(max_examples=80, deadline=None)
@given(model=mla_models(), work=workloads())
def test_absorption_projections_equal_the_kv_up_projection_they_replace(model, work):
    """Seed 003: W_UK into the query plus W_UV after attention cost exactly what expanding the
    new tokens' K/V costs, so in prefill the projections net to zero."""
    naive = mlacalc.attention_cost(model, impl="naive", **work).stage_flops
    absorbed = mlacalc.attention_cost(model, impl="absorbed", **work).stage_flops
    assert absorbed["absorb"] == naive["kv_up"]


@settings(max_examples=60, deadline=None)
@given(model=mla_models(), n_h=st.integers(1, 256), S=st.integers(1, 10**6), B=st.integers(1, 512))
def test_latent_cache_does_not_depend_on_heads(model, n_h, S, B):
    other = model.with_changes(num_attention_heads=n_h, num_key_value_heads=n_h)
    for impl in ("compressed", "absorbed", "absorbed_merged", None):
        assert mlacalc.kv_cache_bytes(model, S, B, impl=impl) == mlacalc.kv_cache_bytes(
            other, S, B, impl=impl
        )
    assert mlacalc.kv_cache(model, S, B).row_elements == model.kv_lora_rank + model.qk_rope_head_dim


@settings(max_examples=60, deadline=None)
@given(model=mla_models())
def test_naive_mla_caches_expanded_heads(model):
    row = mlacalc.kv_cache(model, 1, impl="naive").row_elements
    assert row == model.num_attention_heads * (
        model.qk_nope_head_dim + model.qk_rope_head_dim + model.v_head_dim
    )


@settings(max_examples=80, deadline=None)
@given(
    model=st.one_of(mla_models(), mha_models()),
    S=st.integers(1, 10**7),
    B=st.integers(1, 4096),
    k=st.integers(1, 1000),
    kv_dtype=st.sampled_from(["bf16", "fp8", "fp32", "int4", "int8"]),
)
def test_cache_linear_in_batch_times_length(model, S, B, k, kv_dtype):
    base = mlacalc.kv_cache_bytes(model, S, B, kv_dtype)
    assert mlacalc.kv_cache_bytes(model, S, B * k, kv_dtype) == k * base
    assert mlacalc.kv_cache_bytes(model, S * k, B, kv_dtype) == k * base
    assert mlacalc.kv_cache_bytes(model, S * B, 1, kv_dtype) == base


def test_compressed_equals_naive_in_prefill(v3):
    for S in (1, 7, 4096):
        assert mlacalc.attention_flops(
            v3, "prefill", S, impl="compressed"
        ) == mlacalc.attention_flops(v3, "prefill", S, impl="naive")


def test_textbook_mha_prefill_formula():
    """Cross-check: MHA prefill = L (8 B S d n_h d_h + 4 B n_h S^2 d_h), the textbook count."""
    m = mlacalc.load_model("llama-2-7b")
    for S in (1, 100, 4096):
        L, d, n_h, d_h = 32, 4096, 32, 128
        assert mlacalc.attention_flops(m, "prefill", S) == L * (
            8 * S * d * n_h * d_h + 4 * n_h * S * S * d_h
        )


def test_causal_pairs():
    assert mlacalc.attended_pairs(4096, 4096, causal=True) == 4096 * 4097 // 2
    assert mlacalc.attended_pairs(1, 4096, causal=True) == 4096
    assert mlacalc.attended_pairs(3, 10, causal=True) == 8 + 9 + 10
    assert mlacalc.attended_pairs(10, 10, window=4, causal=True) == 1 + 2 + 3 + 4 * 7
    assert mlacalc.attended_pairs(10, 10, window=4) == 40


@settings(max_examples=200, deadline=None)
@given(S=st.integers(1, 300), data=st.data(), window=st.one_of(st.none(), st.integers(1, 300)))
def test_causal_pairs_by_enumeration(S, data, window):
    q = data.draw(st.integers(1, S))
    brute = sum(min(j, window) if window else j for j in range(S - q + 1, S + 1))
    assert mlacalc.attended_pairs(q, S, window, causal=True) == brute


def test_huge_sizes_stay_exact():
    """10 million tokens x batch 1024 of a 1T-parameter model: no overflow, no rounding."""
    kimi = mlacalc.load_model("kimi-k2")
    S, B = 10_000_000, 1024
    assert mlacalc.kv_cache_bytes(kimi, S, B) == 61 * 576 * 2 * S * B == 719_585_280_000_000
    assert mlacalc.kv_cache_bytes(kimi, S, B, impl="naive") == 61 * 64 * 320 * 2 * S * B
    flops = mlacalc.attention_flops(kimi, "prefill", S, batch=B, impl="naive")
    assert isinstance(flops, int) and flops > 2**64
    assert (
        flops % 2 == 0
        and flops == mlacalc.attention_flops(kimi, "prefill", S, batch=1, impl="naive") * B
    )
