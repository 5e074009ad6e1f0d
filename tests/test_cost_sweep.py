"""The vectorised sweep agrees with the exact scalar path."""

import numpy as np
import pytest
from reference_data import HF_CONFIGS

import mlacalc
from mlacalc import InvalidArgumentError, sweep


@pytest.mark.parametrize("name", mlacalc.shipped_models())
def test_sweep_matches_scalar(name):
    model = mlacalc.load_model(name)
    S = np.array([1, 17, 4096, 131072])
    layered = (
        model.full_attention_interval is not None
        or model.full_attention_layers
        or model.block_types
        or model.mamba_num_heads is not None  # Falcon-H1: Mamba-2 beside every attention
    )
    if layered or model.attention_chunk_size is not None:
        with pytest.raises(InvalidArgumentError, match="layers of different kinds"):
            sweep(model, "kv_cache_bytes", seq_len=S)
        return
    if model.compress_ratios:  # DeepSeek-V4's pooled keys and compressors
        with pytest.raises(InvalidArgumentError, match="compressed attention"):
            sweep(model, "kv_cache_bytes", seq_len=S)
        return
    if model.index_topk is not None:
        with pytest.raises(InvalidArgumentError, match="lightning indexer"):
            sweep(model, "kv_cache_bytes", seq_len=S)
        return
    if model.sparse_block_size is not None:  # MiniMax-M3's block-sparse layers
        with pytest.raises(InvalidArgumentError, match="block-sparse attention"):
            sweep(model, "kv_cache_bytes", seq_len=S)
        return
    B = np.array([1, 3, 8, 2])
    impls = (
        ("naive", "compressed", "absorbed", "absorbed_merged", None) if model.is_mla else (None,)
    )
    for impl in impls:
        got = sweep(model, "kv_cache_bytes", seq_len=S, batch=B, impl=impl)
        assert got.tolist() == [
            mlacalc.kv_cache_bytes(model, int(s), int(b), impl=impl) for s, b in zip(S, B)
        ]
        for phase in ("prefill", "decode"):
            for causal in (False, True):
                flops = sweep(
                    model,
                    "attention_flops",
                    seq_len=S,
                    batch=B,
                    phase=phase,
                    impl=impl,
                    causal=causal,
                )
                exact = [
                    mlacalc.attention_flops(model, phase, int(s), int(b), impl=impl, causal=causal)
                    for s, b in zip(S, B)
                ]
                np.testing.assert_allclose(flops, exact, rtol=1e-15)
                costs = [
                    mlacalc.attention_cost(model, phase, int(s), int(b), impl=impl)
                    for s, b in zip(S, B)
                ]
                np.testing.assert_allclose(
                    sweep(model, "fused_bytes", seq_len=S, batch=B, phase=phase, impl=impl),
                    [c.fused_bytes for c in costs],
                    rtol=1e-15,
                )
                np.testing.assert_allclose(
                    sweep(model, "unfused_bytes", seq_len=S, batch=B, phase=phase, impl=impl),
                    [c.unfused_bytes for c in costs],
                    rtol=1e-15,
                )


@pytest.mark.parametrize("name", ["deepseek-v3.2", "glm-5"])
def test_sweep_refuses_sparse_attention(name):
    """DSA models keep indexer keys and attend top-k keys: sweep refuses them by name."""
    path = HF_CONFIGS / f"{name}.config.json"
    model = mlacalc.load_model(path)
    assert model.index_topk is not None
    # the scalar engine counts the indexer key cache beside the latent rows
    latent_only = model.num_hidden_layers * (model.kv_lora_rank + model.qk_rope_head_dim) * 2
    assert mlacalc.kv_cache_bytes(model, 1) > latent_only
    for quantity in ("kv_cache_bytes", "attention_flops", "fused_bytes", "unfused_bytes"):
        with pytest.raises(InvalidArgumentError, match="index_topk"):
            sweep(model, quantity, seq_len=np.array([1, 4096]))


def test_sweep_over_dimensions():
    ranks = np.array([128, 256, 512, 1024])
    got = sweep("deepseek-v3", "kv_cache_bytes", seq_len=1, kv_lora_rank=ranks)
    assert got.tolist() == [61 * (r + 64) * 2 for r in ranks]
    base = mlacalc.load_model("llama-3-70b")
    heads = np.array([1, 2, 4, 8, 16, 64])
    flops = sweep(base, "attention_flops", seq_len=8192, phase="decode", num_key_value_heads=heads)
    exact = [
        mlacalc.attention_flops(base.with_changes(num_key_value_heads=int(h)), "decode", 8192)
        for h in heads
    ]
    assert flops.tolist() == exact


def test_sweep_chunk_and_layouts():
    S = np.arange(100, 5000, 700)
    got = sweep(
        "deepseek-v3", "attention_flops", seq_len=S, phase="chunk", q_len=64, impl="absorbed"
    )
    assert got.tolist() == [
        mlacalc.attention_flops("deepseek-v3", "chunk", int(s), q_len=64, impl="absorbed")
        for s in S
    ]
    # every named layout, and the byte traffic they feed: the sweep's rows are the scalar
    # functions' (it had a copy of the row formula that left nvfp4's RoPE key without scales:
    # 19,520 B a token for DeepSeek-V3 where kv_cache_bytes and plan gave 19,764)
    for kv in ("fp8_ds_mla", "nvfp4", "fp8", "fp4"):
        layout = sweep("deepseek-v3", "kv_cache_bytes", seq_len=S, kv_dtype=kv)
        assert layout.tolist() == [
            mlacalc.kv_cache_bytes("deepseek-v3", int(s), kv_dtype=kv) for s in S
        ]
        fused = sweep("deepseek-v3", "fused_bytes", seq_len=S, phase="decode", kv_dtype=kv)
        assert fused.tolist() == [
            mlacalc.attention_cost("deepseek-v3", "decode", int(s), kv_dtype=kv).fused_bytes
            for s in S
        ]
    assert sweep("deepseek-v3", "kv_cache_bytes", seq_len=1, kv_dtype="nvfp4") == 61 * 324


def test_sweep_bad_input():
    with pytest.raises(InvalidArgumentError):
        sweep("deepseek-v3", "kv_cache_bytes", seq_len=np.array([0, 5]))
    with pytest.raises(InvalidArgumentError):
        sweep("deepseek-v3", "kv_cache_bytes", seq_len=5, n_heads=4)
    with pytest.raises(InvalidArgumentError):
        sweep("deepseek-v3", "latency", seq_len=5)


def test_sweep_refuses_each_value_loading_refuses():
    """An odd RoPE width swept gave 70,150 B a token while loading and with_changes refuse it
    ("RoPE rotates pairs"): each swept value (each combination of several) now goes through
    with_changes, and the error names the field, the value and where it sits."""
    m = mlacalc.load_model("deepseek-v3")
    with pytest.raises(InvalidArgumentError) as err:
        sweep(m, "kv_cache_bytes", seq_len=1, qk_rope_head_dim=np.array([32, 63, 64]))
    assert str(err.value).startswith("qk_rope_head_dim: holds 63 at index 1, which loading")
    assert "RoPE rotates pairs" in str(err.value)
    with pytest.raises(InvalidArgumentError, match=r"holds 63 at index \(1, 0\) \(with kv_lora"):
        sweep(
            m,
            "kv_cache_bytes",
            qk_rope_head_dim=np.array([[32], [63]]),
            kv_lora_rank=np.array([256, 512]),
        )
    ok = sweep(m, "kv_cache_bytes", seq_len=1, qk_rope_head_dim=np.array([32, 62]))
    assert ok[1] == mlacalc.kv_cache_bytes(m.with_changes(qk_rope_head_dim=62), 1)


def test_sweep_checks_a_long_array_by_its_range_and_parity(monkeypatch):
    """kv_lora_rank 1 .. 10,000 built one model a value (0.01 s became 5.65 s): past
    EACH_UP_TO combinations the check takes each field's smallest and largest value of each
    parity, a few models; an odd RoPE width among 500 even ones is still refused, by value
    and index. And a bool in a list is refused, as convert refuses it (it was taken as 1)."""
    from mlacalc.models.schema import ModelConfig

    m = mlacalc.load_model("deepseek-v3")
    made = []
    real = ModelConfig.with_changes

    def counted(self, **changes):
        made.append(changes)
        return real(self, **changes)

    monkeypatch.setattr(ModelConfig, "with_changes", counted)
    out = sweep(m, "kv_cache_bytes", seq_len=1024, kv_lora_rank=np.arange(1, 10001))
    assert len(out) == 10000 and len(made) <= 4
    assert {c["kv_lora_rank"] for c in made} == {1, 2, 9999, 10000}
    rope = np.arange(2, 1002, 2)
    rope[300] = 63
    with pytest.raises(InvalidArgumentError, match=r"holds 63 at index 300, which loading"):
        sweep(m, "kv_cache_bytes", seq_len=1, qk_rope_head_dim=rope)
    with pytest.raises(InvalidArgumentError, match="not True or False"):
        sweep(m, "kv_cache_bytes", seq_len=1, kv_lora_rank=[True, 512])
