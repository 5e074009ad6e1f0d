"""Review5's config files count what transformers builds from them on the meta device.

q2: a qwen3_moe file without head_dim; Qwen3MoeConfig has no head_dim field, so its attention
takes hidden_size / num_attention_heads (64 here), where mlacalc had filled Qwen3Config's 128.
"""

from __future__ import annotations

import json
import warnings

import pytest
from reference_data import TESTS

from mlacalc import import_hf_config
from mlacalc.cost.params import param_counts

REVIEW5 = TESTS / "data" / "review5"

#: (file, parameters transformers builds on the meta device: checked below)
COUNTS = [
    ("q2", 156_874_496),
]


def _data(name: str) -> dict:
    return json.loads((REVIEW5 / f"{name}.json").read_text(encoding="utf-8"))


def _model(data: dict):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return import_hf_config(data, "config.json")


@pytest.mark.parametrize(("name", "total"), COUNTS)
def test_review5_files_count_what_transformers_builds(name, total):
    assert param_counts(_model(_data(name))).total == total


def test_qwen3_moe_head_dim_is_width_over_heads():
    model = _model(_data("q2"))
    assert model.head_dim == 1024 // 16


@pytest.mark.parametrize(("name", "total"), COUNTS)
def test_review5_counts_are_what_transformers_builds_on_meta(name, total):
    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    data = _data(name)
    config = transformers.CONFIG_MAPPING[data.pop("model_type")](**data)
    with torch.device("meta"):
        built = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    assert sum(p.numel() for p in built.parameters()) == total
