"""Count-like fields against one another: one line naming the field and the fix, never a
silently different model (GLM-5.1 with first_k_dense_replace 100 was a 33B dense model).

A mutation suite over the shipped configs: each case changes one field of one file to a value
that breaks a relation, and the file must be refused with exactly one problem, naming that field.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from reference_data import HF_CONFIGS

import mlacalc
from mlacalc import ConfigError

SHIPPED_DIR = Path(mlacalc.__file__).resolve().parent / "data" / "models"
SHIPPED = {p.stem: yaml.safe_load(p.read_text()) for p in sorted(SHIPPED_DIR.glob("*.yaml"))}


def _mutations():
    """(file, field, value) cases: each breaks one relation of that file's counts."""
    for name, d in SHIPPED.items():
        n = d["num_hidden_layers"]
        experts = d.get("n_routed_experts", 0) and not d.get("block_types")
        if "first_k_dense_replace" in d:
            yield name, "first_k_dense_replace", n + 1  # more dense layers than layers
            if experts:
                yield name, "first_k_dense_replace", n  # no MoE layer left
        if experts and "moe_layer_freq" in d and d.get("first_k_dense_replace", 0):
            yield name, "moe_layer_freq", n + 1  # the first MoE layer past the last
        if d.get("full_attention_interval"):
            yield name, "full_attention_interval", n + 1  # no full layer
        if d.get("n_routed_experts"):
            yield name, "num_experts_per_tok", d["n_routed_experts"] + 1
        if d.get("kv_lora_rank"):
            yield name, "kv_lora_rank", ...  # absent: one line, not five
            yield name, "kv_lora_rank", 0
        elif d.get("num_key_value_heads", 0) > 1:
            yield name, "num_key_value_heads", d["num_attention_heads"] + 1


CASES = list(_mutations())


@pytest.mark.parametrize(("name", "field", "value"), CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_one_mutated_count_gives_one_line_naming_it(tmp_path, name, field, value):
    data = dict(SHIPPED[name])
    if value is ...:
        data.pop(field)
    else:
        data[field] = value
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError) as info:
        mlacalc.load_model(path)
    message = str(info.value)
    assert "\n" not in message and f"field '{field}'" in message, message
    assert [p[0] for p in info.value.problems] == [field], message


def test_the_suite_covers_every_relation():
    fields = {c[1] for c in CASES}
    assert {
        "first_k_dense_replace",
        "moe_layer_freq",
        "full_attention_interval",
        "num_experts_per_tok",
        "kv_lora_rank",
        "num_key_value_heads",
    } <= fields


def test_glm_with_100_dense_layers_is_refused_not_shrunk(tmp_path):
    data = dict(SHIPPED["glm-5.1"], first_k_dense_replace=100)
    path = tmp_path / "g.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(
        ConfigError, match=r"100 dense leading layers exceed num_hidden_layers \(78\).*at most 77"
    ):
        mlacalc.load_model(path)


def test_imported_config_without_kv_lora_rank_is_one_clear_line(tmp_path):
    raw = json.loads((HF_CONFIGS / "glm-5.config.json").read_text())
    raw.pop("kv_lora_rank")
    path = tmp_path / "glm.config.json"
    path.write_text(json.dumps(raw))
    with pytest.raises(ConfigError) as info:
        mlacalc.load_model(path)
    message = str(info.value)
    assert "is MLA" in message and "512" in message and "null or absent" not in message
    assert [p[0] for p in info.value.problems] == ["kv_lora_rank"], message


def test_imported_config_with_every_layer_dense_is_refused(tmp_path):
    raw = json.loads((HF_CONFIGS / "glm-5.config.json").read_text())
    raw["first_k_dense_replace"] = raw["num_hidden_layers"]
    path = tmp_path / "glm.config.json"
    path.write_text(json.dumps(raw))
    with pytest.raises(ConfigError, match="first_k_dense_replace"):
        mlacalc.load_model(path)
