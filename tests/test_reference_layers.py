"""The engine against real PyTorch modules: FLOPs counted by FlopCounterMode, cache nbytes.

Every variant and MLA implementation, prefill / decode / chunk, with and without
query compression, dense and causal kernels, sliding windows, over a grid of shapes.
Counts must be equal, not close.
"""

import pytest

torch = pytest.importorskip("torch")
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

import mlacalc  # noqa: E402
from mlacalc.bench.torch_layers import layer_for_model  # noqa: E402

IMPLS = ("naive", "compressed", "absorbed", "absorbed_merged")


def tiny_mla(q_lora, n_h=4, d_c=32, d_rope=8, d_nope=16, d_v=12, d=48, bias=False):
    base = mlacalc.load_model("deepseek-v3" if q_lora else "deepseek-v2-lite")
    return base.with_changes(
        hidden_size=d,
        num_attention_heads=n_h,
        num_key_value_heads=n_h,
        kv_lora_rank=d_c,
        q_lora_rank=24 if q_lora else None,
        qk_nope_head_dim=d_nope,
        qk_rope_head_dim=d_rope,
        v_head_dim=d_v,
        num_hidden_layers=1,
        attention_bias=bias,
    )


def tiny_mha(n_h, n_kv, d_h=8, d=40, window=None, model="llama-3-8b", **kw):
    base = mlacalc.load_model(model)
    return base.with_changes(
        hidden_size=d,
        num_attention_heads=n_h,
        num_key_value_heads=n_kv,
        head_dim=d_h,
        num_hidden_layers=1,
        sliding_window=window,
        **kw,
    )


def run(layer, x, cache=None, start=0, mode="dense"):
    if hasattr(layer, "merge_weights") and layer.impl == "absorbed_merged":
        layer.merge_weights()  # a load-time step, not part of the counted forward
    with FlopCounterMode(display=False) as counter:
        y, new_cache = layer(x, cache, start=start, mode=mode)
    return counter.get_total_flops(), y, new_cache


def prior_cache(layer, batch, length, torch_dtype=torch.float32):
    """A cache holding `length` tokens, produced by the layer itself."""
    if length == 0:
        return None
    x = torch.randn(batch, length, layer.d, dtype=torch_dtype)
    _, _, cache = run(layer, x, mode="causal")
    return cache


def check(model, impl, phase, S, B, q=None, causal=False):
    layer = layer_for_model(model, impl)
    q_new = {"prefill": S, "decode": 1, "chunk": q}[phase]
    past = S - q_new
    cache = prior_cache(layer, B, past)
    start = past
    if cache is not None and model.sliding_window:
        assert cache.length == min(past, model.sliding_window)  # the layer keeps the last W tokens
    x = torch.randn(B, q_new, model.hidden_size)
    mode = "causal" if causal else ("band" if model.sliding_window and q_new > 1 else "dense")
    flops, _, new_cache = run(layer, x, cache, start=start, mode=mode)
    expected = mlacalc.attention_flops(
        model, phase, S, batch=B, q_len=q if phase == "chunk" else None, impl=impl, causal=causal
    )
    assert flops == expected
    assert new_cache.nbytes == mlacalc.kv_cache_bytes(model, S, B, "fp32", impl)


GRID = [(1, 1), (2, 7), (3, 16)]  # (batch, seq_len)


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("q_lora", [True, False], ids=["q_lora", "plain_wq"])
@pytest.mark.parametrize("phase", ["prefill", "decode"])
@pytest.mark.parametrize("causal", [False, True], ids=["dense", "causal"])
@pytest.mark.parametrize("B,S", GRID)
def test_mla_flops_and_cache(impl, q_lora, phase, causal, B, S):
    check(tiny_mla(q_lora), impl, phase, S, B, causal=causal)


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("causal", [False, True], ids=["dense", "causal"])
@pytest.mark.parametrize("S,q", [(9, 3), (16, 16), (5, 1)])
def test_mla_chunk(impl, causal, S, q):
    check(tiny_mla(True), impl, "chunk", S, 2, q=q, causal=causal)


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize(
    "dims",
    [
        dict(n_h=2, d_c=16, d_rope=4, d_nope=8, d_v=8, d=24),
        dict(n_h=6, d_c=40, d_rope=16, d_nope=24, d_v=20, d=64),
    ],
)
def test_mla_other_shapes(impl, dims):
    model = tiny_mla(True, **dims)
    for phase in ("prefill", "decode"):
        check(model, impl, phase, 11, 2)


@pytest.mark.parametrize("impl", IMPLS)
def test_mla_with_biases(impl):
    # attention_bias puts biases on q_a_proj / q_proj, kv_a_proj_with_mqa and o_proj
    for q_lora in (True, False):
        model = tiny_mla(q_lora, bias=True)
        check(model, impl, "prefill", 6, 2)
        layer = layer_for_model(model, impl)
        assert (
            sum(p.numel() for p in layer.parameters())
            == mlacalc.param_counts(model).attention_per_layer
        )


@pytest.mark.parametrize(
    "n_h,n_kv", [(4, 4), (8, 2), (6, 1), (12, 3)], ids=["mha", "gqa4", "mqa", "gqa3"]
)
@pytest.mark.parametrize("phase", ["prefill", "decode"])
@pytest.mark.parametrize("causal", [False, True], ids=["dense", "causal"])
@pytest.mark.parametrize("B,S", GRID)
def test_mha_family_flops_and_cache(n_h, n_kv, phase, causal, B, S):
    check(tiny_mha(n_h, n_kv), None, phase, S, B, causal=causal)


@pytest.mark.parametrize("causal", [False, True], ids=["dense", "causal"])
@pytest.mark.parametrize("S,q", [(12, 4), (7, 7), (20, 1)])
def test_mha_chunk(causal, S, q):
    check(tiny_mha(8, 2), None, "chunk", S, 2, q=q, causal=causal)


@pytest.mark.parametrize(
    "phase,S,q",
    [
        ("prefill", 13, None),
        ("decode", 13, None),
        ("chunk", 13, 5),
        ("prefill", 4, None),
        ("decode", 5, None),
    ],
)
@pytest.mark.parametrize("causal", [False, True], ids=["band", "causal"])
def test_sliding_window(phase, S, q, causal):
    model = tiny_mha(4, 2, window=5, model="mistral-7b")
    check(model, None, phase, S, 2, q=q, causal=causal)


@pytest.mark.parametrize("name", ["gpt2", "qwen2.5-7b", "falcon-7b", "llama-2-7b"])
def test_biases_and_fused_qkv(name):
    base = mlacalc.load_model(name)
    n_h, n_kv = base.num_attention_heads, base.num_key_value_heads
    heads = 4 if n_kv == n_h else 8
    kv = heads if n_kv == n_h else (1 if n_kv == 1 else 2)
    model = base.with_changes(
        hidden_size=heads * 8 if base.family == "gpt2" else 40,
        num_attention_heads=heads,
        num_key_value_heads=kv,
        head_dim=8,
        num_hidden_layers=1,
    )
    check(model, None, "prefill", 6, 2)
    layer = layer_for_model(model)
    assert (
        sum(p.numel() for p in layer.parameters())
        == mlacalc.param_counts(model).attention_per_layer
    )


@pytest.mark.parametrize("name", [n for n in mlacalc.shipped_models()])
def test_attention_params_match_module(name):
    """A layer at full real dimensions (meta device: no memory) holds the counted projections
    (query/key norms and attention sinks of the newer families are checked against the
    Hugging Face implementations in test_reference_hf.py)."""
    model = mlacalc.load_model(name)
    with torch.device("meta"):
        layer = layer_for_model(model, device="meta")
    assert sum(p.numel() for p in layer.parameters()) == sum(
        mlacalc.attention_params(model).values()
    )


@pytest.mark.parametrize(
    "kv_dtype,torch_dtype",
    [
        ("bf16", torch.bfloat16),
        ("fp16", torch.float16),
        ("fp8", torch.float8_e4m3fn),
        ("fp32", torch.float32),
    ],
)
@pytest.mark.parametrize("impl", ["naive", "absorbed"])
def test_cache_bytes_by_dtype(kv_dtype, torch_dtype, impl):
    model = tiny_mla(True)
    layer = layer_for_model(model, impl)
    cache = layer.empty_cache(3, dtype=torch_dtype)
    _, _, cache = run(layer, torch.randn(3, 9, model.hidden_size), cache)
    assert cache.nbytes == mlacalc.kv_cache_bytes(model, 9, 3, kv_dtype, impl)


@pytest.mark.slow
def test_real_dimensions_decode_flops(v3):
    """DeepSeek-V3's real attention dimensions, one decode step at 64 keys, every impl."""
    model = v3.with_changes(num_hidden_layers=1)
    for impl in IMPLS:
        check(model, impl, "decode", 64, 1)


def test_fp8_ds_mla_layout_row():
    # The FlashMLA layout stores 512 fp8 values + 4 fp32 scales + 64 bf16 RoPE values.
    latent = torch.empty(1, 1, 512, dtype=torch.float8_e4m3fn)
    scales = torch.empty(1, 1, 4, dtype=torch.float32)
    rope = torch.empty(1, 1, 64, dtype=torch.bfloat16)
    per_layer = latent.nbytes + scales.nbytes + rope.nbytes
    assert per_layer == 656
    assert mlacalc.kv_cache_bytes("deepseek-v3", 1, kv_dtype="fp8_ds_mla") == 61 * per_layer


@pytest.mark.parametrize(
    ("phase", "S", "q", "causal", "window"),
    [
        ("prefill", 7, None, False, None),
        ("prefill", 7, None, True, None),
        ("decode", 7, None, False, None),
        ("chunk", 9, 3, True, 5),
        ("decode", 9, None, False, 5),
    ],
)
def test_value_heads_of_their_own_width(phase, S, q, causal, window):
    """MiMo-V2-Flash's value heads (d_v 12) narrower than its query/key heads (d_h 20): the
    reference layer's FLOPs and cache equal the counts, full and sliding."""
    model = tiny_mha(
        4,
        2,
        d_h=20,
        window=window,
        model="mimo-v2-flash",
        v_head_dim=12,
        full_attention_layers=(),
        sliding_key_value_heads=None,
    )
    check(model, None, phase, S, 2, q=q, causal=causal)
    layer = layer_for_model(model)
    assert layer.v_proj.weight.shape == (2 * 12, 40)
    assert sum(p.numel() for p in layer.parameters()) == sum(
        mlacalc.attention_params(model).values()
    )
