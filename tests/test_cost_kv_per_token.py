"""``KVCache.bytes_per_token``: what one more token of one sequence adds to the cache at
this ``seq_len``, summed over the layers by kind."""

import pytest
from reference_data import HF_CONFIGS

import mlacalc
from mlacalc import kv_cache, kv_cache_bytes

MIXED = ["qwen3-next-80b-a3b-thinking", "deepseek-v3.2"]


def _models():
    out = list(mlacalc.shipped_models())
    out += [str(HF_CONFIGS / f"{n}.config.json") for n in MIXED]
    return out


@pytest.mark.parametrize("name", _models())
def test_bytes_per_token_is_the_next_tokens_growth(name):
    model = mlacalc.load_model(name)
    points = {1, 2, 127, 128, 129, 511, 512, 513, 4095, 4096, 4097, 8192, 8193, 40000}
    points |= {
        w + d for w in (model.sliding_window, model.attention_chunk_size) if w for d in (-1, 0, 1)
    }
    for s in sorted(points):
        grows = kv_cache_bytes(model, s + 1) - kv_cache_bytes(model, s)
        assert kv_cache(model, s).bytes_per_token == grows, s
        assert kv_cache(model, s, batch=3).bytes_per_token == grows, s  # per sequence


@pytest.mark.parametrize("name", ["llama-3-8b", "deepseek-v3", "qwen2.5-72b", "gpt2"])
def test_full_attention_models_add_a_row_per_layer(name):
    cache = kv_cache(name, 4096)
    assert cache.bytes_per_token == cache.row_bytes * cache.layers


def test_hand_counts():
    # DeepSeek-V3: 61 layers x (512 + 64) x 2 bytes at every length
    assert kv_cache("deepseek-v3", 100_000).bytes_per_token == 70_272
    # Mistral 7B: 32 layers x 8 KV heads x 128 x (K, V) x 2 bytes until the 4096 window is full
    assert kv_cache("mistral-7b", 4095).bytes_per_token == 131_072
    assert kv_cache("mistral-7b", 4096).bytes_per_token == 0
    # Gemma 3 1B: 26 layers, 1 KV head x 256; past 512 only the 4 full layers grow
    assert kv_cache("gemma-3-1b", 100).bytes_per_token == 26 * 1024
    assert kv_cache("gemma-3-1b", 4096).bytes_per_token == 4 * 1024


def test_linear_layers_add_nothing():
    path = HF_CONFIGS / "qwen3-next-80b-a3b-thinking.config.json"
    # 48 layers, every 4th full (2 KV heads x 256 x (K, V) x 2 bytes = 2 KiB); 36 linear
    cache = kv_cache(mlacalc.load_model(path), 4096)
    assert cache.row_bytes == 2048 and cache.layers == 48
    assert cache.bytes_per_token == 12 * 2048  # not 48 x 2048 = 96 KiB


def test_dsa_layers_add_the_indexer_key():
    path = HF_CONFIGS / "deepseek-v3.2.config.json"
    # 61 layers x ((latent 512 + RoPE 64) x 2 bytes + the indexer key: 128 fp8 values and a
    # float32 scale, whatever the cache's layout; it was 128 x 2 beside a bf16 cache)
    assert kv_cache(mlacalc.load_model(path), 1).bytes_per_token == 61 * (576 * 2 + 132)


def test_an_nvfp4_cache_counts_its_scales_and_a_bare_fp4_cache_none():
    """``nvfp4``: e2m1 values two to a byte and one e4m3 scale per 16 of K and V (Llama-3-8B,
    32 layers of 8 KV heads of 128: 2 x 8 x 128 / 2 + 2 x 8 x 128 / 16 = 1,152 B a layer),
    or of MLA's latent and its RoPE key, each in blocks of its own (DeepSeek-V3, 61 layers:
    256 + 32 latent, 32 + 4 RoPE B; it was 320, the RoPE key at four bits with no scale, a
    format no kernel reads); a bare ``fp4`` cache is four bits a value, a quarter of bf16."""
    assert mlacalc.kv_cache_bytes("llama-3-8b", 1, kv_dtype="nvfp4") == 32 * 1152
    assert mlacalc.kv_cache_bytes("llama-3-8b", 1, kv_dtype="fp4") == 32 * 1024
    assert mlacalc.kv_cache_bytes("deepseek-v3", 1, kv_dtype="nvfp4") == 61 * (256 + 32 + 32 + 4)
    bf16 = mlacalc.kv_cache_bytes("deepseek-v3", 1, kv_dtype="bf16")
    assert mlacalc.kv_cache_bytes("deepseek-v3", 1, kv_dtype="fp4") * 4 == bf16
