"""Gemma 4 (``gemma4``, ``gemma4_text``): full layers with their own head width and K=V heads.

The shipped Gemma-4-26B-A4B against its published config.json and counts by hand; small
Gemma 4 models built with ``transformers`` against mlacalc (parameters, the cache a forward
leaves, attention FLOPs under ``FlopCounterMode``, per layer); the card's figures; the
settings refused by name; the step kernels and the planner's cache by kind; load speed.
Exactness of the shipped config on the ``meta`` device at ``S`` in 1, 4096, 32768 is in
``tests/test_reference_hf.py`` (it covers every shared config.json).
"""

from __future__ import annotations

import json
from dataclasses import fields

import pytest
from reference_data import HF_CONFIGS

import mlacalc
from mlacalc.models.architecture import kind_model, layer_pattern
from mlacalc.models.patterns import LayerKind, cache_spec
from mlacalc.models.tensors import tensors
from mlacalc.words.errors import ConfigError

CONFIG = HF_CONFIGS / "gemma-4-26b-a4b.config.json"

D, L, V, H = 2816, 30, 262_144, 16
E, K, MOE, DENSE = 128, 8, 704, 2112


def _data(**changes) -> dict:
    data = json.loads(CONFIG.read_text(encoding="utf-8"))
    data["text_config"] = {**data["text_config"], **changes}
    return data


def _layer(full: bool) -> int:
    """One decoder layer of Gemma-4-26B-A4B, by hand."""
    d_h, n_kv = (512, 2) if full else (256, 8)
    attn = H * d_h * D * 2 + n_kv * d_h * D * (1 if full else 2) + 2 * d_h  # q, o, k(, v), norms
    mlp = 3 * D * DENSE
    moe = E * D + D + E + E * 3 * MOE * D  # router proj, scale, per-expert scale, experts
    return attn + mlp + moe + 7 * D + 1  # 7 norms and the layer scalar


def test_shipped_model_is_the_config_json():
    shipped = mlacalc.load_model("gemma-4-26b-a4b")
    imported = mlacalc.load_model(CONFIG)
    skip = {"name", "source", "display_name", "notes", "origin", "derived"}
    for f in fields(shipped):
        if f.name not in skip:
            assert getattr(shipped, f.name) == getattr(imported, f.name), f.name
    assert layer_pattern(shipped).describe() == "30 layers: 25 sliding(1024) + 5 full; FFN: 30 MoE"
    assert (shipped.global_head_dim, shipped.num_global_key_value_heads) == (512, 2)
    assert shipped.attention_k_eq_v and shipped.n_shared_experts == 3


def test_counts_by_hand():
    p = mlacalc.param_counts("gemma-4-26b-a4b")
    total = V * D + 25 * _layer(False) + 5 * _layer(True) + D  # tied head
    assert p.total == total == 25_233_141_790
    unused = L * (E - K) * 3 * MOE * D
    assert p.active == total - unused == 3_822_530_590
    assert p.embedding == V * D and p.breakdown["lm_head"] == 0
    m = mlacalc.load_model("gemma-4-26b-a4b")
    assert sum(t.numel for t in tensors(m)) == p.total
    full = [t.name for t in tensors(m) if t.name.startswith("model.layers.5.self_attn.")]
    assert not any("v_proj" in n for n in full)


def test_cache_by_kind_both_conventions():
    """Sliding layers keep 8 K/V heads of 256, full layers 2 of 512 (K and V two tensors even
    though V is made from the key projection): 8,192 and 4,096 bytes per token in bf16. The
    product keeps W = 1024 tokens of a sliding layer (a serving engine's ring); the Hugging
    Face cache W - 1 = 1023."""
    m = mlacalc.load_model("gemma-4-26b-a4b")
    spec = cache_spec(json.loads(CONFIG.read_text()))
    pattern = layer_pattern(m)
    for s in (1, 4096, 32768):
        engine = 25 * min(s, 1024) * 8192 + 5 * s * 4096
        hf = 25 * min(s, 1023) * 8192 + 5 * s * 4096
        assert mlacalc.kv_cache_bytes(m, s) == engine
        assert sum(spec.model_bytes(pattern, s).values()) == engine
        assert sum(spec.model_bytes(pattern, s, convention="hf").values()) == hf
    kv = mlacalc.kv_cache(m, 32768, batch=2, kv_dtype="fp8")
    assert kv.by_kind == (
        ("sliding(1024)", 25, 1024, 25 * 2 * 1024 * 4096),
        ("full", 5, 32768, 5 * 2 * 32768 * 2048),
    )
    assert kv.bytes_per_token == 5 * 2048


def test_attention_flops_by_hand():
    m = mlacalc.load_model("gemma-4-26b-a4b")
    s = 4096

    def layer(d_h, n_kv, keys, proj_kv):
        return 2 * s * (D * H * d_h * 2 + D * proj_kv * n_kv * d_h) + 2 * 2 * H * d_h * s * keys

    sliding = layer(256, 8, 1024, 2)
    full = layer(512, 2, s, 1)  # the key projection only: it is the value too
    assert mlacalc.attention_flops(m, "prefill", s) == 25 * sliding + 5 * full
    cost = mlacalc.attention_cost(m, "decode", s, batch=3)
    assert cost.group_labels == ("full", "sliding(1024)")
    full_kv = {o.name: o for o in cost.groups[0].ops}["kv_proj"]
    assert full_kv.shape == (1, 3, 2 * 512, D) and full_kv.flops == 2 * 3 * D * 1024


def test_step_kernels_use_each_kinds_heads():
    from mlacalc.cost.model_step import step_kernels

    m = mlacalc.load_model("gemma-4-26b-a4b")
    ks = step_kernels(m, "decode", 8192, batch=4)
    cores = {k.calls: k.shape for k in ks if k.name == "attention"}
    assert (cores[5]["n_kv"], cores[5]["head_dim_qk"], cores[5]["window"]) == (2, 512, 0)
    assert (cores[25]["n_kv"], cores[25]["head_dim_qk"], cores[25]["window"]) == (8, 256, 1024)
    attention = {"q_proj", "kv_proj", "attention", "o_proj"}
    flops = sum(k.flops * k.calls for k in ks if k.name in attention)
    assert flops == mlacalc.attention_flops(m, "decode", 8192, batch=4)
    shared = next(k for k in ks if k.name == "shared_experts_up")
    assert shared.shape["n"] == 2 * DENSE and shared.calls == L


def test_planner_cache_rows_by_kind():
    """Per GPU: a sliding layer keeps ceil(8 / tp) of its 8 heads, a full layer ceil(2 / tp)
    of its 2 (tensor parallelism beyond 2 replicates them)."""
    from mlacalc.serving.layout import kv_bytes_per_sequence_per_gpu, make_layout
    from mlacalc.words.dtypes import resolve_kv_layout

    m = mlacalc.load_model("gemma-4-26b-a4b")
    bf16 = resolve_kv_layout("bf16")
    s = 100_000
    for tp, (sliding_heads, full_heads) in {1: (8, 2), 2: (4, 1), 4: (2, 1), 8: (1, 1)}.items():
        lay = make_layout(m, tp, tp=tp)
        got = kv_bytes_per_sequence_per_gpu(m, bf16, lay, s)
        assert got == 25 * 1024 * 2 * sliding_heads * 256 * 2 + 5 * s * 2 * full_heads * 512 * 2
    lay = make_layout(m, 1)
    assert kv_bytes_per_sequence_per_gpu(m, bf16, lay, s) == mlacalc.kv_cache_bytes(m, s)


def test_card_figures():
    """Card: 26B total, 4B active (A4B). The language model is 25.23B (the card's total adds
    the vision encoder, checked against Hugging Face below); 3.82B active rounds to 4B."""
    p = mlacalc.param_counts("gemma-4-26b-a4b")
    assert round(p.active / 1e9) == 4
    assert round(p.total / 1e8) == 252


def test_card_total_includes_the_vision_tower():
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    import torch
    from transformers import AutoConfig, AutoModelForImageTextToText

    config = AutoConfig.for_model(**json.loads(CONFIG.read_text()))
    with torch.device("meta"):
        model = AutoModelForImageTextToText.from_config(config, dtype=torch.bfloat16)
    seen, everything = set(), 0
    for value in model.state_dict(keep_vars=True).values():
        if id(value) not in seen:
            seen.add(id(value))
            everything += value.numel()
    text = mlacalc.param_counts("gemma-4-26b-a4b").total
    assert everything - text == 572_794_416  # the vision tower and its projection
    assert everything == 25_805_936_206 and round(everything / 1e9) == 26


# small models built with transformers: every branch of the layer, against mlacalc
_TINY = dict(
    model_type="gemma4_text",
    vocab_size=64,
    hidden_size=48,
    intermediate_size=96,
    num_hidden_layers=4,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=8,
    global_head_dim=16,
    num_global_key_value_heads=1,
    attention_k_eq_v=True,
    sliding_window=8,
    layer_types=["sliding_attention", "full_attention"] * 2,
    hidden_size_per_layer_input=0,
    enable_moe_block=True,
    num_experts=4,
    top_k_experts=2,
    moe_intermediate_size=32,
)
_VARIANTS = {
    "k_eq_v, MoE": {},
    "separate v_proj, biases": dict(attention_k_eq_v=False, attention_bias=True),
    "dense only": dict(enable_moe_block=False, num_experts=None, top_k_experts=None),
    "no global kv heads": dict(num_global_key_value_heads=None),
}


def _hf_model(data: dict):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    config = transformers.Gemma4TextConfig(**{k: v for k, v in data.items() if k != "model_type"})
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    return transformers.Gemma4ForCausalLM(config).eval()


@pytest.mark.parametrize("variant", sorted(_VARIANTS))
def test_small_models_match_transformers(variant):
    """Parameters, the cache after a forward, and each attention block's FLOPs
    (FlopCounterMode per module; eager attention computes every pair, the non-causal count)
    in prefill (8 tokens, the window) and decode at 20 keys (the sliding layers' cache then
    holds W - 1 keys and the new one)."""
    torch = pytest.importorskip("torch")
    from torch.utils.flop_counter import FlopCounterMode

    data = {**_TINY, **_VARIANTS[variant]}
    hf = _hf_model(data)
    m = mlacalc.import_hf_config(dict(data))
    seen, count = set(), 0
    for value in hf.state_dict(keep_vars=True).values():
        if id(value) not in seen:
            seen.add(id(value))
            count += value.numel()
    assert mlacalc.param_counts(m).total == count

    def attention_flops(ids, cache=None):
        with torch.no_grad(), FlopCounterMode(display=False) as counter:
            out = hf(input_ids=ids, past_key_values=cache, use_cache=True)
        per_module = counter.get_flop_counts()
        total = sum(
            sum(ops.values())
            for name, ops in per_module.items()
            if name.endswith(".self_attn") and ".layers." in name
        )
        return total, out.past_key_values

    prefill, _ = attention_flops(torch.zeros(1, 8, dtype=torch.long))
    assert mlacalc.attention_flops(m, "prefill", 8) == prefill
    _, cache = attention_flops(torch.zeros(1, 19, dtype=torch.long))
    decode, cache = attention_flops(torch.zeros(1, 1, dtype=torch.long), cache)
    assert mlacalc.attention_flops(m, "decode", 20) == decode
    nbytes = sum(t.nbytes for layer in cache.layers for t in (layer.keys, layer.values))
    pattern, spec = layer_pattern(m), cache_spec(data)
    assert sum(spec.model_bytes(pattern, 20, kv_dtype="fp32", convention="hf").values()) == nbytes


def test_kind_model():
    m = mlacalc.load_model("gemma-4-26b-a4b")
    full = kind_model(m, LayerKind("full"))
    sliding = kind_model(m, LayerKind("sliding", window=1024))
    assert (full.head_dim, full.num_key_value_heads, full.attention_k_eq_v) == (512, 2, True)
    assert (sliding.head_dim, sliding.num_key_value_heads, sliding.attention_k_eq_v) == (
        256,
        8,
        False,
    )
    assert full.global_head_dim is None and sliding.sliding_window == 1024


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"hidden_size_per_layer_input": 256}, "hidden_size_per_layer_input"),
        ({"hidden_size_per_layer_input": None}, "hidden_size_per_layer_input"),
        ({"num_kv_shared_layers": 20}, "num_kv_shared_layers"),
        ({"use_bidirectional_attention": "all"}, "use_bidirectional_attention"),
        ({"intermediate_size": 2000}, "intermediate_size"),
        ({"layer_types": None, "num_hidden_layers": 35}, "layer_types"),
        ({"num_global_key_value_heads": 3}, "num_global_key_value_heads"),
    ],
)
def test_refused_by_name(changes, field):
    data = _data(**changes)
    if changes.get("hidden_size_per_layer_input", 0) is None:
        del data["text_config"]["hidden_size_per_layer_input"]  # absent: the default 256
    with pytest.raises(ConfigError) as info:
        mlacalc.import_hf_config(data)
    assert field in str(info.value)


def test_gemma4_fields_on_another_family_are_refused():
    m = mlacalc.load_model("llama-3-8b")
    for change in ({"global_head_dim": 256}, {"attention_k_eq_v": True}):
        with pytest.raises(ConfigError, match=next(iter(change))):
            m.with_changes(**change)


def test_absent_fields_follow_the_class():
    """Without attention_k_eq_v the full layers keep num_key_value_heads (the global KV
    heads are read only with it) and their v_proj; the last layer is always full."""
    data = _data(attention_k_eq_v=False)
    m = mlacalc.import_hf_config(data)
    assert m.num_global_key_value_heads is None and not m.attention_k_eq_v
    assert kind_model(m, LayerKind("full")).num_key_value_heads == 8
    types = ["sliding_attention"] * 5 + ["full_attention"]
    data = _data(layer_types=types * 4 + ["sliding_attention"] * 6)
    m = mlacalc.import_hf_config(data)  # the last layer forced full completes the period
    assert m.full_attention_interval == 6
    assert any("last layer is full" in note for note in m.derived)
    data = _data(layer_types=types * 4 + ["sliding_attention"] * 4, num_hidden_layers=28)
    with pytest.raises(ConfigError, match="layer_types"):
        mlacalc.import_hf_config(data)  # the forced last full layer breaks the period
