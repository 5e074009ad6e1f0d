"""Every shipped model whose Hugging Face config is vendored (``tests/data/hf-configs*/``)
against that config, both read by mlacalc's loader: a field the loader reads from the config
and the shipped YAML leaves out (or states otherwise) is a model planned without it. Trial
round 29, finding 2: kimi-k2.yaml had no ``max_position_embeddings`` (its config: 131,072), so
256K and 1M prompts planned with no "exceeds max_position_embeddings" warning; deepseek-v2-lite
and falcon-7b lacked it too, and mixtral-8x7b carried the transformers class default 131,072
where its checkpoint says 32,768."""

from __future__ import annotations

import dataclasses
import warnings

import pytest
from reference_data import HF_CONFIGS

import mlacalc
from mlacalc.models.loading import load_model, shipped_models

DATA = HF_CONFIGS.parent

#: shipped model -> its checkpoint's config.json (``tests/data/<folder>/<stem>.config.json``);
#: mistral-7b is v0.1 and the vendored file v0.3 (another vocabulary, no sliding window)
_SOURCE = {
    "deepseek-v2-lite": "hf-configs/deepseek-v2-lite",
    "deepseek-v3": "hf-configs/deepseek-v3",
    "deepseek-v3.2": "hf-configs/deepseek-v3.2",
    "deepseek-v4-pro": "hf-configs-2/deepseek-ai--DeepSeek-V4-Pro",
    "falcon-7b": "hf-configs/falcon-7b",
    "gemma-2b": "hf-configs/gemma-2b",
    "gemma-3-1b": "hf-configs/gemma-3-1b-it",
    "gemma-4-26b-a4b": "hf-configs/gemma-4-26b-a4b",
    "glm-4.7": "hf-configs/glm-4.7-fp8",
    "glm-5.1": "hf-configs-2/zai-org--GLM-5.1",
    "gpt-oss-120b": "hf-configs/gpt-oss-120b",
    "gpt2": "hf-configs/gpt2",
    "internlm2-7b": "hf-configs/internlm2-7b",
    "kimi-k2": "hf-configs/kimi-k2-instruct",
    "kimi-k2.5": "hf-configs/kimi-k2.5",
    "kimi-linear-48b-a3b": "hf-configs/kimi-linear-48b-a3b",
    "llama-3.1-405b": "hf-configs/llama-3.1-405b",
    "llama-3.1-70b": "hf-configs/llama-3.1-70b",
    "llama-3.1-8b": "hf-configs/llama-3.1-8b",
    "llama-3.3-nemotron-super-49b": "hf-configs-2/nvidia--Llama-3_3-Nemotron-Super-49B-v1",
    "llama-4-scout": "hf-configs/llama-4-scout-17b-16e",
    "mimo-7b": "hf-configs-2/XiaomiMiMo--MiMo-7B-Base",
    "minicpm3-4b": "hf-configs/minicpm3-4b",
    "minimax-m2.5": "hf-configs/minimax-m2.5",
    "minimax-m3": "hf-configs-2/MiniMaxAI--MiniMax-M3",
    "ministral-3-3b": "hf-configs/ministral-3-3b-2512",
    "mixtral-8x7b": "hf-configs/mixtral-8x7b-v0.1",
    "nemotron-3-super-120b-a12b": "hf-configs-2/nvidia--NVIDIA-Nemotron-3-Super-120B-A12B-FP8",
    "nemotron-3-ultra-550b-a55b": "hf-configs-2/nvidia--NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16",
    "phi-3.5-mini": "hf-configs/phi-3.5-mini-instruct",
    "qwen1.5-moe-a2.7b": "hf-configs/qwen1.5-moe-a2.7b",
    "qwen3-30b-a3b": "hf-configs/qwen3-30b-a3b",
    "qwen3-8b": "hf-configs/qwen3-8b",
    "qwen3-next-80b-a3b": "hf-configs/qwen3-next-80b-a3b-thinking",
    "qwen3-vl-30b-a3b": "hf-configs-2/Qwen--Qwen3-VL-30B-A3B-Instruct",
    "qwen3-vl-8b": "hf-configs-2/Qwen--Qwen3-VL-8B-Instruct",
    "qwen3.5-122b-a10b": "hf-configs-2/Qwen--Qwen3.5-122B-A10B",
    "step-3.7-flash": "hf-configs-2/stepfun-ai--Step-3.7-Flash",
}


#: fields that are not the architecture (words, provenance) or that the two sides state
#: apart by design
_NOT_COMPARED = {"name", "display_name", "source", "aliases", "notes", "derived"}
#: (model, field): known differences, each with its reason
_KNOWN = {
    # the vendored copy (mlc-llm's preset) omits q_lora_rank; the checkpoint's is null
    ("deepseek-v2-lite", "q_lora_rank"),
    # GPT-2's checkpoint is fp32 and its config states no torch_dtype (read as bf16)
    ("gpt2", "weights_dtype"),
    # kimi-k2.5 and nemotron-3-super: the quantization scheme is written out in the YAML
    ("kimi-k2.5", "quantization_config"),
    ("nemotron-3-super-120b-a12b", "quantization_config"),
}


def _hf(name: str):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return load_model(DATA / f"{_SOURCE[name]}.config.json")


def test_every_source_is_a_shipped_model_and_a_vendored_file():
    assert set(_SOURCE) <= set(shipped_models())
    for name, stem in _SOURCE.items():
        assert (DATA / f"{stem}.config.json").is_file(), name


@pytest.mark.parametrize("name", sorted(_SOURCE))
def test_shipped_model_carries_its_config_max_context(name):
    hf = _hf(name)
    assert hf.max_position_embeddings, name  # every vendored source states one
    assert load_model(name).max_position_embeddings == hf.max_position_embeddings


@pytest.mark.parametrize("name", sorted(_SOURCE))
def test_shipped_model_lacks_no_field_its_config_gives(name):
    ours, hf = load_model(name), _hf(name)
    missing = [
        f.name
        for f in dataclasses.fields(ours)
        if f.name not in _NOT_COMPARED
        and (name, f.name) not in _KNOWN
        and getattr(ours, f.name) in (None, (), {}, "")
        and getattr(hf, f.name) not in (None, (), {}, "")
    ]
    assert not missing, f"{name}: {missing}"


def test_kimi_k2_long_prompt_is_flagged():
    p = mlacalc.plan("kimi-k2", "H200", 16, isl=262144, osl=1, weight_dtype="fp8")
    assert any("max_position_embeddings (131,072)" in w for w in p.warnings)
