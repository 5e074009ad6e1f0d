"""The 2026 families that need no new layer kind, against the Hugging Face implementation.

For each config (a shared one in ``tests/data/hf-configs-2/``, or a transformers class's
defaults for a family the shared folders lack), the language model is built on the ``meta``
device and its parameters compared with ``mlacalc.param_counts(...).total``, to the
parameter; a meta forward of ``S`` tokens (1, 4096, 32768) fills its cache, whose bytes are
compared with ``kv_cache_bytes`` in the reference's convention (a sliding window keeps ``W - 1``
tokens there; ``min(S, W)`` in the product's). A multimodal checkpoint is built whole
(``...ForConditionalGeneration``) and its vision tower's parameters set apart: the product
counts the language model and its head.

Builds of the largest configs (hundreds of layers of experts on meta) take seconds each; the
default run checks every config's parameters and the cache at 4096 tokens, ``--runslow``
the cache at 1 and 32768 tokens too.
"""

from __future__ import annotations

import json
from functools import lru_cache

import pytest
from reference_data import HF_CONFIGS_2

import mlacalc
from mlacalc.models.patterns import cache_spec, layer_pattern

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

#: shared configs of this issue's families (and new configs of families mlacalc had)
SHARED = [
    "Qwen--Qwen3-VL-8B-Instruct",
    "Qwen--Qwen3-VL-30B-A3B-Instruct",
    "zai-org--GLM-5.1",
    "Qwen--Qwen3-Coder-480B-A35B-Instruct",
    "MiniMaxAI--MiniMax-M2.7",
    "nvidia--DeepSeek-V3.1-NVFP4",
    "nvidia--Kimi-K2.6-NVFP4",
    "nvidia--Gemma-4-31B-IT-NVFP4",
]


def _raw(name: str) -> dict:
    data = json.loads((HF_CONFIGS_2 / f"{name}.config.json").read_text(encoding="utf-8"))
    return {k: v for k, v in data.items() if k != "quantization_config"}


@lru_cache(maxsize=2)
def _reference(name: str):
    """(language model with its head, parameters of the language model and head)."""
    data = _raw(name)
    config = transformers.AutoConfig.for_model(**data)
    text = config.get_text_config()
    with torch.device("meta"):
        try:
            model = transformers.AutoModelForCausalLM.from_config(text, dtype=torch.bfloat16)
            whole = model
        except ValueError:  # a text config with no causal-LM class: build the wrapper
            whole = transformers.AutoModelForImageTextToText.from_config(
                config, dtype=torch.bfloat16
            )
            model = whole
    seen: set[int] = set()
    total = 0
    for key, value in whole.state_dict(keep_vars=True).items():
        if id(value) in seen or key.startswith(("model.visual.", "visual.", "model.vision")):
            continue
        seen.add(id(value))
        total += value.numel()
    return model, total


def _cache(name: str, seq_len: int) -> int:
    model, _ = _reference(name)
    ids = torch.zeros(1, seq_len, dtype=torch.long, device="meta")
    with torch.no_grad():
        cache = model(input_ids=ids, use_cache=True).past_key_values
    total = 0
    for layer in cache.layers:
        for value in vars(layer).values():
            if isinstance(value, torch.Tensor) and value.dim() >= 2:
                total += value.nbytes
    return total


@pytest.mark.parametrize("name", SHARED)
def test_parameters_equal_the_reference(name):
    model = mlacalc.load_model(HF_CONFIGS_2 / f"{name}.config.json")
    assert mlacalc.param_counts(model).total == _reference(name)[1]


#: configs whose cache check at 4096 tokens runs by default (the rest: --runslow)
_FAST = ("Qwen--Qwen3-VL-8B-Instruct", "Qwen--Qwen3-VL-30B-A3B-Instruct")
CACHE_CASES = [
    pytest.param(
        name, seq_len, marks=() if (seq_len == 4096 and name in _FAST) else pytest.mark.slow
    )
    for name in SHARED
    for seq_len in (1, 4096, 32768)
]


@pytest.mark.parametrize(("name", "seq_len"), CACHE_CASES)
def test_cache_bytes_equal_the_reference(name, seq_len):
    model = mlacalc.load_model(HF_CONFIGS_2 / f"{name}.config.json")
    raw = _raw(name)
    pattern = layer_pattern(raw)
    ours = sum(cache_spec(raw).model_bytes(pattern, seq_len, convention="hf").values())
    assert ours == _cache(name, seq_len)
    assert mlacalc.kv_cache_bytes(model, seq_len) == sum(
        cache_spec(raw).model_bytes(pattern, seq_len).values()
    )


def test_mimo_is_qwen2_with_deepseek_style_mtp_layers():
    """MiMo-7B (remote code): the main model equals Qwen2 built from the same config on the
    meta device; its MTP layer the rule's modules (two norms, the 2d -> d input projection, a
    Qwen2 decoder layer, a final norm), also built from transformers' Qwen2 modules."""
    from transformers.models.qwen2 import modeling_qwen2 as q2

    data = _raw("XiaomiMiMo--MiMo-7B-Base")
    model = mlacalc.load_model(HF_CONFIGS_2 / "XiaomiMiMo--MiMo-7B-Base.config.json")
    config = transformers.Qwen2Config(
        **{k: v for k, v in data.items() if k not in ("model_type", "architectures")}
    )
    d = config.hidden_size
    with torch.device("meta"):
        main = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
        mtp = torch.nn.ModuleList(
            [
                q2.Qwen2RMSNorm(d),
                q2.Qwen2RMSNorm(d),
                torch.nn.Linear(2 * d, d, bias=False),
                q2.Qwen2DecoderLayer(config, 0),
                q2.Qwen2RMSNorm(d),
            ]
        )
    counts = mlacalc.param_counts(model).to_dict()
    assert counts["total"] == sum(p.numel() for p in main.parameters())
    assert (
        counts["mtp"] == sum(p.numel() for p in mtp.parameters()) * data["num_nextn_predict_layers"]
    )
    ids = torch.zeros(1, 4096, dtype=torch.long, device="meta")
    with torch.no_grad():
        cache = main(input_ids=ids, use_cache=True).past_key_values
    ref = sum(
        t.nbytes
        for layer in cache.layers
        for t in vars(layer).values()
        if isinstance(t, torch.Tensor) and t.dim() >= 2
    )
    assert mlacalc.kv_cache_bytes(model, 4096) == ref


#: families the shared folders lack: checked on their transformers class's defaults (each
#: class's docstring names the checkpoint the defaults reproduce)
CLASS_DEFAULTS = [
    "smollm3",
    "gemma2",
    "olmo2",
    "olmoe",
    "seed_oss",
    "ernie4_5",
    "exaone4",
    "ernie4_5_moe",
    "hunyuan_v1_moe",
    "starcoder2",
]
#: what a class's defaults lack to build at all (HunYuanMoEV1Config leaves head_dim None)
_BUILDABLE = {"hunyuan_v1_moe": {"head_dim": 128, "num_experts": 8, "moe_topk": [2] * 32}}


@lru_cache(maxsize=1)
def _default_model(model_type: str):
    config = transformers.CONFIG_MAPPING[model_type](**_BUILDABLE.get(model_type, {}))
    data = config.to_dict()
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    return data, model


@pytest.mark.parametrize("model_type", CLASS_DEFAULTS)
def test_class_defaults_equal_the_reference(model_type):
    data, reference = _default_model(model_type)
    model = mlacalc.import_hf_config(data)
    seen: set[int] = set()
    params = 0
    for value in reference.state_dict(keep_vars=True).values():
        if id(value) not in seen:
            seen.add(id(value))
            params += value.numel()
    assert mlacalc.param_counts(model).total == params
    ids = torch.zeros(1, 4096, dtype=torch.long, device="meta")
    with torch.no_grad():
        cache = reference(input_ids=ids, use_cache=True).past_key_values
    held = sum(
        t.nbytes
        for layer in cache.layers
        for t in vars(layer).values()
        if isinstance(t, torch.Tensor) and t.dim() >= 2
    )
    pattern = layer_pattern(data)
    assert layer_pattern(model) == pattern
    assert sum(cache_spec(data).model_bytes(pattern, 4096, convention="hf").values()) == held


@pytest.mark.parametrize(
    "placement",
    [
        {"interleave_moe_layer_step": 2},
        {"moe_layers": [1, 3, 5, 7]},
        {"interleave_moe_layer_step": 4},
    ],
    ids=["step-2", "moe-layers", "step-4"],
)
def test_llama4_interleaved_moe_layers_equal_the_reference(placement):
    """Llama-4-Maverick's placement (MoE in every second layer), on 8 layers of the class's
    defaults: parameters, the dense/MoE pattern and the cache at 4096 tokens."""
    config = transformers.Llama4TextConfig(num_hidden_layers=8, **placement)
    data = config.to_dict()
    with torch.device("meta"):
        reference = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    model = mlacalc.import_hf_config(data)
    assert mlacalc.param_counts(model).total == sum(p.numel() for p in reference.parameters())
    moe = [
        i
        for i, layer in enumerate(reference.model.layers)
        if hasattr(layer.feed_forward, "experts")
    ]
    assert [i for i, k in enumerate(layer_pattern(model).layers) if k.ffn == "moe"] == moe
    assert layer_pattern(data) == layer_pattern(model)
    ids = torch.zeros(1, 4096, dtype=torch.long, device="meta")
    with torch.no_grad():
        cache = reference(input_ids=ids, use_cache=True).past_key_values
    held = sum(
        t.nbytes
        for layer in cache.layers
        for t in vars(layer).values()
        if isinstance(t, torch.Tensor) and t.dim() >= 2
    )
    assert (
        sum(cache_spec(data).model_bytes(layer_pattern(data), 4096, convention="hf").values())
        == held
    )


def test_llama4_moe_layers_of_another_shape_are_refused():
    with pytest.raises(mlacalc.ConfigError) as info:
        mlacalc.import_hf_config(
            transformers.Llama4TextConfig(num_hidden_layers=8, moe_layers=[0, 3]).to_dict()
        )
    assert info.value.field == "moe_layers"


#: GLM-DSA schedules with layers that reuse the previous layer's top-k (GlmMoeDsaConfig reads
#: indexer_types, index_topk_pattern, or index_topk_freq / index_skip_topk_offset)
DSA_SCHEDULES = [
    {"index_topk_freq": 2},
    {"index_topk_pattern": "FFSFSSFF"},
    {"index_topk_freq": 3, "index_skip_topk_offset": 1},
]


def _glm_dsa(**schedule) -> dict:
    data = _raw("zai-org--GLM-5.1")
    return {**data, "num_hidden_layers": 8, "n_routed_experts": 8, **schedule}


@pytest.mark.parametrize("schedule", DSA_SCHEDULES, ids=["freq-2", "pattern", "freq-3-offset-1"])
def test_glm_dsa_shared_indexer_layers_equal_the_reference(schedule):
    """Shared layers hold no indexer and cache no indexer key: parameters, each layer's cache
    bytes at 4096 tokens and the pattern equal the reference built on the meta device."""
    data = _glm_dsa(**schedule)
    config = transformers.AutoConfig.for_model(**data)
    with torch.device("meta"):
        reference = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    model = mlacalc.import_hf_config(data)
    shared = [i + 1 for i, k in enumerate(config.indexer_types) if k == "shared"]
    assert shared and list(model.shared_indexer_layers) == shared
    seen: set[int] = set()
    params = 0
    for value in reference.state_dict(keep_vars=True).values():
        if id(value) not in seen:
            seen.add(id(value))
            params += value.numel()
    assert mlacalc.param_counts(model).total == params
    ids = torch.zeros(1, 4096, dtype=torch.long, device="meta")
    with torch.no_grad():
        cache = reference(input_ids=ids, use_cache=True).past_key_values
    held = [
        sum(t.nbytes for t in vars(layer).values() if isinstance(t, torch.Tensor) and t.dim() >= 2)
        for layer in cache.layers
    ]
    pattern = layer_pattern(data)
    assert pattern == layer_pattern(model)
    assert [k.label for k in pattern.layers if not k.indexer] == ["dsa-shared"] * len(shared)
    spec = cache_spec(data)
    assert [spec.layer_bytes(k, 4096, convention="hf") for k in pattern.layers] == held
    # the serving count keeps each indexer key in fp8 with a float32 scale a 128 values (132 B,
    # as the engines do whatever the cache's dtype), where the reference caches it in bf16
    indexed = sum(1 for k in pattern.layers if k.indexer)
    bf16_key = 2 * data["index_head_dim"]
    fp8_key = data["index_head_dim"] + 4 * (data["index_head_dim"] // 128)
    assert mlacalc.kv_cache_bytes(model, 4096) == sum(held) - indexed * 4096 * (bf16_key - fp8_key)


@pytest.mark.parametrize("phase", ["prefill", "decode"])
def test_glm_dsa_shared_layers_skip_the_indexer_work(phase):
    """A shared layer does the attention of a DSA layer without its indexer: the model's
    FLOPs (attention cost and step kernels alike) fall by one layer's indexer per shared layer."""
    from mlacalc.cost.model_step import step_kernels

    full = mlacalc.import_hf_config(_glm_dsa())
    shared = mlacalc.import_hf_config(_glm_dsa(index_topk_freq=2))
    one = mlacalc.import_hf_config({**_glm_dsa(), "num_hidden_layers": 1})

    def flops(m):
        return sum(mlacalc.attention_cost(m, phase, 4096).stage_flops.values())

    indexer = flops(one) - flops(one.replaced(shared_indexer_layers=(1,)))
    assert indexer > 0
    n = len(shared.shared_indexer_layers)
    assert flops(full) - flops(shared) == n * indexer

    def kernel_flops(m):
        return sum(k.flops * k.calls for k in step_kernels(m, phase, 4096))

    assert kernel_flops(full) - kernel_flops(shared) == n * indexer
    names = {k.name for k in step_kernels(shared, phase, 4096)}
    assert any(name.startswith("indexer") for name in names)  # the full layers keep theirs


def test_a_shared_first_indexer_layer_is_refused():
    with pytest.raises(mlacalc.ConfigError) as info:
        mlacalc.import_hf_config(_glm_dsa(index_topk_pattern="SFFFFFFF"))
    assert info.value.field == "indexer_types"
