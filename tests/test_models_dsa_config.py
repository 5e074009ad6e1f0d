"""A DSA model type (DeepSeek-V3.2, GLM-5) needs its indexer fields; an indexer needs MLA."""

from pathlib import Path

import pytest

import mlacalc
from mlacalc.words.errors import ConfigError

INDEXER = ("index_n_heads", "index_head_dim", "index_topk")

DSA_YAML = """\
name: dsa-test
model_type: {model_type}
source: test
hidden_size: 7168
num_hidden_layers: 61
num_attention_heads: 128
num_key_value_heads: 128
vocab_size: 129280
intermediate_size: 18432
q_lora_rank: 1536
kv_lora_rank: 512
qk_nope_head_dim: 128
qk_rope_head_dim: 64
v_head_dim: 128
n_routed_experts: 256
n_shared_experts: 1
moe_intermediate_size: 2048
num_experts_per_tok: 8
first_k_dense_replace: 3
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "model.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("model_type", ["deepseek_v32", "glm_moe_dsa"])
@pytest.mark.parametrize("field", INDEXER)
def test_dsa_yaml_with_a_null_indexer_field_names_it(tmp_path, model_type, field):
    text = DSA_YAML.format(model_type=model_type) + f"{field}: null\n"
    with pytest.raises(ConfigError, match=f"{field}.*required for model_type {model_type}") as e:
        mlacalc.load_model(_write(tmp_path, text))
    assert e.value.field == field


@pytest.mark.parametrize(("model_type", "heads"), [("deepseek_v32", 64), ("glm_moe_dsa", 32)])
def test_dsa_yaml_without_indexer_fields_takes_the_class_defaults(tmp_path, model_type, heads):
    model = mlacalc.load_model(_write(tmp_path, DSA_YAML.format(model_type=model_type)))
    assert (model.index_n_heads, model.index_head_dim, model.index_topk) == (heads, 128, 2048)
    assert {d.split(" = ")[0] for d in model.derived} >= set(INDEXER)
    # 61 layers x ((latent 512 + RoPE 64) x 2 bytes + the indexer key: 128 fp8 values and a
    # float32 scale)
    assert mlacalc.kv_cache_bytes(model, 1) == 61 * ((512 + 64) * 2 + 128 + 4)


def test_partial_indexer_is_refused_by_name():
    with pytest.raises(ConfigError, match=r"index_n_heads.*required when index_topk") as e:
        mlacalc.load_model("deepseek-v3").with_changes(index_topk=2048)
    assert e.value.field == "index_n_heads"


def test_indexer_needs_mla():
    with pytest.raises(ConfigError, match="MLA layers only") as e:
        mlacalc.load_model("llama-3-8b").with_changes(
            index_n_heads=4, index_head_dim=64, index_topk=512
        )
    assert e.value.field == "index_n_heads"


def test_removing_the_indexer_of_a_dsa_type_is_refused(tmp_path):
    model = mlacalc.load_model(_write(tmp_path, DSA_YAML.format(model_type="deepseek_v32")))
    with pytest.raises(ConfigError, match="index_topk") as e:
        model.with_changes(index_topk=None)
    assert e.value.field == "index_topk"
