"""The Hugging Face reference route: models built from a config on the ``meta`` device.

No weights are read or downloaded: ``transformers`` builds each model from its
``config.json`` with every tensor on the ``meta`` device (shapes and dtypes only),
so the parameter count is what the implementation holds, and a forward of ``S``
tokens on meta tensors leaves in the cache the tensors the implementation keeps.
Used by ``tests/test_reference_hf.py``; needs ``torch`` and ``transformers``.
"""

from __future__ import annotations

import json
from functools import cache, lru_cache
from pathlib import Path

import torch
from reference_data import HF_CONFIGS

CONFIG_DIR = HF_CONFIGS


def config_files() -> list[Path]:
    """Every shared ``config.json`` copy, sorted by name."""
    return sorted(CONFIG_DIR.glob("*.config.json"))


def raw_config(name: str) -> dict:
    """The published config of ``name`` (file stem without ``.config.json``)."""
    return json.loads((CONFIG_DIR / f"{name}.config.json").read_text(encoding="utf-8"))


def implemented(name: str) -> bool:
    """Whether transformers implements the config's ``model_type`` (no remote code)."""
    from transformers import CONFIG_MAPPING

    return raw_config(name).get("model_type") in CONFIG_MAPPING


@cache
def _text_config(name: str, layers: int | None = None):
    from transformers import CONFIG_MAPPING

    data = dict(raw_config(name))
    inner = data.get("text_config")
    if isinstance(inner, dict) and inner.get("model_type") == data["model_type"]:
        data = dict(inner)  # a wrapper whose model_type names the text model
    config = CONFIG_MAPPING[data.pop("model_type")](**data)
    text = config.get_text_config()
    if layers is not None:  # the first `layers` layers, their kinds unchanged
        text.num_hidden_layers = layers
        for key in ("layer_types", "mlp_layer_types"):
            if getattr(text, key, None) is not None:
                setattr(text, key, list(getattr(text, key))[:layers])
    return text


@lru_cache(maxsize=4)
def build(name: str, layers: int | None = None) -> torch.nn.Module:
    """The causal language model of ``name`` on the meta device, in bf16 (optionally only
    its first ``layers`` layers)."""
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        return AutoModelForCausalLM.from_config(_text_config(name, layers), dtype=torch.bfloat16)


def _state(name: str, layers: int | None = None) -> dict[str, torch.Tensor]:
    """The tensors a checkpoint of the model holds: parameters and persistent buffers (such as
    DeepSeek-V3's ``e_score_correction_bias``), a tied table once."""
    out: dict[str, torch.Tensor] = {}
    seen: set[int] = set()
    for key, value in build(name, layers).state_dict(keep_vars=True).items():
        if id(value) not in seen:
            seen.add(id(value))
            out[key] = value
    return out


@cache
def param_count(name: str) -> int:
    """Parameters the implementation holds as a checkpoint stores them (a tied table once)."""
    return sum(t.numel() for t in _state(name).values())


def weight_tensors(name: str, layers: int | None = None):
    """The checkpoint's tensors as :class:`mlacalc.cost.quant.Tensor` (role from the module type:
    ``nn.Linear`` weights are ``linear``, 3-D expert stacks ``experts``)."""
    from mlacalc.cost.quant import Tensor

    model = build(name, layers)
    linear = {f"{m}.weight" for m, mod in model.named_modules() if isinstance(mod, torch.nn.Linear)}
    out = []
    for key, value in _state(name, layers).items():
        role = "linear" if key in linear else ("experts" if value.dim() == 3 else "other")
        out.append(Tensor(key, tuple(value.shape), role))
    return out


def _tensors(obj, seen: set[int]):
    """Cache tensors reachable from one cache layer (tensors, lists, dicts of tensors)."""
    if isinstance(obj, torch.Tensor):
        if id(obj) not in seen and obj.dim() >= 2:  # scalars are bookkeeping, not cache
            seen.add(id(obj))
            yield obj
    elif isinstance(obj, dict):
        for value in obj.values():
            yield from _tensors(value, seen)
    elif isinstance(obj, (list, tuple)):
        for value in obj:
            yield from _tensors(value, seen)


def cache_bytes(
    name: str, seq_len: int, layers: int | None = None
) -> tuple[int, tuple[tuple[str, int], ...]]:
    """Bytes of the cache after a forward of ``seq_len`` tokens (batch 1), and per layer.

    The per-layer entries are ``(cache layer class, bytes)`` in layer order. ``layers``
    runs only the first layers (a layer's cache does not depend on the layers after it).
    One forward a (name, seq_len, layers), however ``layers`` is passed (a ``functools.cache``
    on this signature held ``(name, seq_len)`` and ``(name, seq_len, None)`` apart, and
    test_reference_hf.py ran each whole-model forward twice).
    """
    return _cache_bytes(name, seq_len, layers)


@cache
def _cache_bytes(
    name: str, seq_len: int, layers: int | None
) -> tuple[int, tuple[tuple[str, int], ...]]:
    model = build(name, layers)
    ids = torch.zeros(1, seq_len, dtype=torch.long, device="meta")
    with torch.no_grad():
        cache = model(input_ids=ids, use_cache=True).past_key_values
    per_layer = []
    for layer in cache.layers:
        seen: set[int] = set()
        per_layer.append((type(layer).__name__, sum(t.nbytes for t in _tensors(vars(layer), seen))))
    return sum(b for _, b in per_layer), tuple(per_layer)
