"""The Hugging Face reference route for the second set of shared configs
(``tests/data/hf-configs-2/``) and for configs written in a test: the text model built from a
config dict on the ``meta`` device, its parameters, and its cache after a meta forward.

As :mod:`hf_reference` (which reads the first set), with two differences: the config is a
dict (a family without a shared config is checked on its class defaults), and a checkpoint's
``quantization_config`` is dropped before building (the reference needs no quantizer to hold
the logical tensors). Needs ``torch`` and ``transformers``.
"""

from __future__ import annotations

import json
from functools import cache, lru_cache

import torch
from reference_data import HF_CONFIGS_2


def raw_config(name: str) -> dict:
    """The published config of ``name`` in the second set (file stem without ``.config.json``)."""
    return json.loads((HF_CONFIGS_2 / f"{name}.config.json").read_text(encoding="utf-8"))


def text_config(data: dict, layers: int | None = None):
    """The transformers text config of a config dict (the first ``layers`` layers only)."""
    from transformers import CONFIG_MAPPING

    data = {k: v for k, v in data.items() if k != "quantization_config"}
    inner = data.get("text_config")
    if isinstance(inner, dict) and inner.get("model_type") == data["model_type"]:
        data = dict(inner)
    config = CONFIG_MAPPING[data.pop("model_type")](**data)
    text = config.get_text_config()
    if layers is not None:
        text.num_hidden_layers = layers
        for key in ("layer_types", "mlp_layer_types", "layers_block_type", "compress_ratios"):
            if isinstance(getattr(text, key, None), list):
                setattr(text, key, list(getattr(text, key))[:layers])
    return text


def build(data: dict, layers: int | None = None) -> torch.nn.Module:
    """The causal language model of a config dict on the meta device, in bf16."""
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        return AutoModelForCausalLM.from_config(text_config(data, layers), dtype=torch.bfloat16)


def param_count(model: torch.nn.Module) -> int:
    """Parameters and persistent buffers the model holds as a checkpoint stores them."""
    seen: set[int] = set()
    total = 0
    for value in model.state_dict(keep_vars=True).values():
        if id(value) not in seen:
            seen.add(id(value))
            total += value.numel()
    return total


@lru_cache(maxsize=2)
def named_build(name: str, layers: int | None = None) -> torch.nn.Module:
    """The text model of the shared config ``name`` (kept for the next test of the same one)."""
    return build(raw_config(name), layers)


@cache
def named_param_count(name: str) -> int:
    """Parameters of the shared config ``name``'s text model."""
    return param_count(named_build(name))


def _tensors(obj, seen: set[int]):
    if isinstance(obj, torch.Tensor):
        if id(obj) not in seen and obj.dim() >= 2:
            seen.add(id(obj))
            yield obj
    elif isinstance(obj, dict):
        for value in obj.values():
            yield from _tensors(value, seen)
    elif isinstance(obj, (list, tuple)):
        for value in obj:
            yield from _tensors(value, seen)


def cache_bytes(model: torch.nn.Module, seq_len: int) -> tuple[tuple[str, int], ...]:
    """``(cache layer class, bytes)`` per layer after a meta forward of ``seq_len`` tokens."""
    ids = torch.zeros(1, seq_len, dtype=torch.long, device="meta")
    with torch.no_grad():
        cache_ = model(input_ids=ids, use_cache=True).past_key_values
    out = []
    for layer in cache_.layers:
        seen: set[int] = set()
        out.append((type(layer).__name__, sum(t.nbytes for t in _tensors(vars(layer), seen))))
    return tuple(out)
