"""Mutation suite for the configs of the hybrid families (Nemotron-H, Qwen3.5, Nemotron-NAS):
every top-level field of each real config.json, each entry of their per-layer lists
(``layers_block_type``, ``hybrid_override_pattern``, ``block_configs``' attention and FFN
settings) and the Mamba-2 fields of a Bamba and Granite hybrid, mutated. Each mutation loads
a model whose counts evaluate (parameters, cache, attention FLOPs, the step's kernels) or is
refused by one line naming the mutated field (or, for a list entry, its list)."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("hypothesis")

from hypothesis import given
from hypothesis import strategies as st
from reference_data import HF_CONFIGS_2
from test_models_config_mutation import DELETE, MUTATIONS, SETTINGS

import mlacalc
from mlacalc import MlacalcError, ModelConfig
from mlacalc.cost.model_step import step_kernels
from mlacalc.models.hf import family_of, import_hf_config

# (Nemotron-3-Super's 88 layers take seconds per run: its hybrid_override_pattern spelling
# is mutated below, the whole file with --runslow)
FILES = [
    pytest.param("nvidia--NVIDIA-Nemotron-3-Super-120B-A12B-FP8", marks=pytest.mark.slow),
    "nvidia--NVIDIA-Nemotron-3.5-Lightning-30B-A3B-NVFP4",
    "Qwen--Qwen3.5-35B-A3B",
    "nvidia--Llama-3_3-Nemotron-Super-49B-v1",
]


def _base(name: str) -> dict:
    data = json.loads((HF_CONFIGS_2 / f"{name}.config.json").read_text(encoding="utf-8"))
    data.pop("quantization_config", None)  # the checkpoint's scheme: another issue's surface
    return data


def _names(field: str, model_type: object) -> set[str]:
    names = {field}
    unit = family_of(model_type) if isinstance(model_type, str) else None
    if unit is not None and field in unit.renames:
        names.add(unit.renames[field])
    if field in ("layers_block_type", "hybrid_override_pattern", "num_hidden_layers"):
        names |= {"block_types", "layers_block_type", "hybrid_override_pattern"}
    if field == "model_type":
        names.add("model_type")
    return names


def _check(data: dict, names: set[str], container: bool = False) -> None:
    try:
        model = import_hf_config(data, "config.json")
    except MlacalcError as exc:
        message = str(exc)
        assert "\n" not in message and len(message) < 3000, message[:300]
        problems = getattr(exc, "problems", [("", "")])
        missing = container and any("is missing" in p[1] for p in problems)
        assert missing or any(n in message for n in names), (sorted(names), message[:300])
    else:
        assert isinstance(model, ModelConfig)
        assert mlacalc.param_counts(model).total > 0
        assert mlacalc.kv_cache_bytes(model, 4096, 2) > 0
        assert mlacalc.attention_flops(model, "prefill", 300) > 0
        assert all(k.bytes > 0 for k in step_kernels(model, "decode", 4096, 2))


@pytest.mark.parametrize("name", FILES)
@SETTINGS
@given(draw=st.data())
def test_every_top_level_field(name, draw):
    base = _base(name)
    inner = "text_config" in base
    for field in list(base):
        value = draw.draw(MUTATIONS | st.just(DELETE), label=field)
        data = dict(base)
        if value is DELETE:
            data.pop(field)
        else:
            data[field] = value
        _check(data, _names(field, base.get("model_type")), isinstance(base[field], dict))
    if inner:  # the text model's own fields
        for field in list(base["text_config"]):
            value = draw.draw(MUTATIONS | st.just(DELETE), label=f"text_config.{field}")
            text = dict(base["text_config"])
            if value is DELETE:
                text.pop(field)
            else:
                text[field] = value
            _check({**base, "text_config": text}, _names(field, base.get("model_type")))


@SETTINGS
@given(draw=st.data())
def test_block_list_entries(draw):
    """An entry of Nemotron-H's block list, or a letter of its pattern, mutated."""
    ultra = _base("nvidia--NVIDIA-Nemotron-3.5-Lightning-30B-A3B-NVFP4")
    blocks = list(ultra["layers_block_type"])
    i = draw.draw(st.integers(0, len(blocks) - 1), label="index")
    blocks[i] = draw.draw(MUTATIONS, label="entry")
    _check({**ultra, "layers_block_type": blocks}, {"layers_block_type", "block_types"})
    super_ = _base("nvidia--NVIDIA-Nemotron-3-Super-120B-A12B-FP8")
    pattern = super_["hybrid_override_pattern"]
    j = draw.draw(st.integers(0, len(pattern) - 1), label="letter")
    letter = draw.draw(st.text(min_size=0, max_size=2), label="replacement")
    mutated = pattern[:j] + letter + pattern[j + 1 :]
    _check({**super_, "hybrid_override_pattern": mutated}, {"hybrid_override_pattern"})


@SETTINGS
@given(draw=st.data())
def test_block_configs_entries(draw):
    """A setting of one of Nemotron-NAS's searched layers, mutated or removed."""
    base = _base("nvidia--Llama-3_3-Nemotron-Super-49B-v1")
    i = draw.draw(st.integers(0, len(base["block_configs"]) - 1), label="layer")
    part = draw.draw(st.sampled_from(["attention", "ffn"]), label="part")
    block = json.loads(json.dumps(base["block_configs"][i]))
    key = draw.draw(st.sampled_from([*block[part], "whole"]), label="key")
    value = draw.draw(MUTATIONS | st.just(DELETE), label="value")
    if key == "whole":
        block[part] = None if value is DELETE else value
    elif value is DELETE:
        block[part].pop(key)
    else:
        block[part][key] = value
    configs = [*base["block_configs"][:i], block, *base["block_configs"][i + 1 :]]
    _check({**base, "block_configs": configs}, {"block_configs", "block_widths"})
