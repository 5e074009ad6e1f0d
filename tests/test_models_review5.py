"""Review5's config files count what transformers builds from them on the meta device.

q2: a qwen3_moe file without head_dim; Qwen3MoeConfig has no head_dim field, so its attention
takes hidden_size / num_attention_heads (64 here), where mlacalc had filled Qwen3Config's 128.
m1, d1: a key a class's attribute_map lists (MixtralConfig's num_experts, DeepseekV3Config's
num_local_experts) wins over the class's own spelling, as transformers sets it after.
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
    ("m1", 1_893_413_888),  # num_experts 32 wins over num_local_experts 8 (attribute_map)
    # num_local_experts 8 wins over n_routed_experts 16 (attribute_map); transformers'
    # parameters() gives 101,353,984: its 3 x 8 e_score_correction_bias are buffers
    ("d1", 101_354_008),
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
    bias = sum(b.numel() for n, b in built.named_buffers() if "e_score_correction_bias" in n)
    assert sum(p.numel() for p in built.parameters()) + bias == total


def test_every_alias_that_wins_is_in_its_class_attribute_map():
    transformers = pytest.importorskip("transformers")
    from mlacalc.models.hf import families

    for unit in families().values():
        for model_type, keys in unit.alias_wins.items():
            hf_type = {"kimi_k2": "deepseek_v3"}.get(model_type, model_type)  # its class
            amap = transformers.CONFIG_MAPPING[hf_type].attribute_map
            for key in keys:
                assert key in amap and key in unit.renames, (model_type, key)


def test_every_attribute_map_key_a_family_reads_wins():
    """Each key a type's class lists in its attribute_map, where the family reads it (a rename),
    is in the family's alias_wins for that type (review5's m1, d1 had read the first spelling)."""
    transformers = pytest.importorskip("transformers")
    from mlacalc.models.hf import families

    wrong = []
    for unit in families().values():
        for model_type in unit.model_types:
            hf_type = {"kimi_k2": "deepseek_v3"}.get(model_type, model_type)
            if hf_type not in transformers.CONFIG_MAPPING:
                continue
            amap = transformers.CONFIG_MAPPING[hf_type].attribute_map
            read = {k for k in amap if k in unit.renames}
            if read != set(unit.alias_wins.get(model_type, ())):
                wrong.append(f"{model_type}: {sorted(read)} vs {unit.alias_wins.get(model_type)}")
    assert not wrong, "\n".join(wrong)
