"""Hugging Face config.json import: the variant comes from the fields; counts match the YAMLs."""

import json
import shutil
from pathlib import Path

import pytest

import mlacalc
from mlacalc import ConfigError

DATA = Path(__file__).parent / "data" / "hf"
NAMES = sorted(p.name.split(".config.json")[0] for p in DATA.glob("*.config.json"))


@pytest.mark.parametrize("name", NAMES)
def test_import_matches_shipped_yaml(name, tmp_path):
    path = tmp_path / name / "config.json"
    path.parent.mkdir()
    shutil.copy(DATA / f"{name}.config.json", path)
    imported = mlacalc.load_model(path)
    shipped = mlacalc.load_model(name)
    assert imported.variant == shipped.variant
    assert mlacalc.param_counts(imported).to_dict() | {"model": 0} == mlacalc.param_counts(
        shipped
    ).to_dict() | {"model": 0}
    for impl in (None, "naive") if shipped.is_mla else (None,):
        assert mlacalc.kv_cache_bytes(imported, 4096, 2, impl=impl) == mlacalc.kv_cache_bytes(
            shipped, 4096, 2, impl=impl
        )
        assert mlacalc.attention_flops(
            imported, "prefill", 512, impl=impl
        ) == mlacalc.attention_flops(shipped, "prefill", 512, impl=impl)
    # a directory holding config.json loads too
    assert mlacalc.load_model(path.parent).name == imported.name


def test_variant_comes_from_fields_not_name(tmp_path):
    data = json.loads((DATA / "llama-2-7b.config.json").read_text())
    data["_name_or_path"] = "someone/deepseek-v3-lookalike"
    data["num_key_value_heads"] = 1
    path = tmp_path / "config.json"
    path.write_text(json.dumps(data))
    assert mlacalc.load_model(path).variant == "mqa"
    data = json.loads((DATA / "deepseek-v3.config.json").read_text())
    data["_name_or_path"] = "llama-lookalike"
    path.write_text(json.dumps(data))
    assert mlacalc.load_model(path).variant == "mla"


def test_derived_fields_are_reported():
    llama = mlacalc.import_hf_config(json.loads((DATA / "llama-2-7b.config.json").read_text()))
    assert llama.head_dim == 128
    assert any(d.startswith("head_dim") for d in llama.derived)
    gpt2 = mlacalc.import_hf_config(json.loads((DATA / "gpt2.config.json").read_text()))
    assert gpt2.intermediate_size == 3072 and any("n_inner" in d for d in gpt2.derived)
    falcon = mlacalc.import_hf_config(json.loads((DATA / "falcon-7b.config.json").read_text()))
    assert falcon.num_key_value_heads == 1 and falcon.variant == "mqa"
    minicpm = mlacalc.import_hf_config(json.loads((DATA / "minicpm3-4b.config.json").read_text()))
    assert minicpm.v_head_dim == 64 and any(d.startswith("v_head_dim") for d in minicpm.derived)
    v3 = mlacalc.import_hf_config(json.loads((DATA / "deepseek-v3.config.json").read_text()))
    assert v3.weights_dtype == "fp8"  # quantization_config says fp8 although torch_dtype is bf16


def test_unsupported_model_type(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "mamba", "hidden_size": 8}))
    with pytest.raises(ConfigError) as info:
        mlacalc.load_model(path)
    assert info.value.field == "model_type" and "deepseek_v3" in str(info.value)


def test_invalid_json(tmp_path):
    path = tmp_path / "config.json"
    path.write_text('{"model_type": "llama",')
    with pytest.raises(ConfigError, match="not valid JSON at line 1"):
        mlacalc.load_model(path)


def test_hf_config_with_bad_value(tmp_path):
    data = json.loads((DATA / "llama-2-7b.config.json").read_text())
    data["num_key_value_heads"] = 7
    path = tmp_path / "config.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ConfigError) as info:
        mlacalc.load_model(path)
    assert info.value.field == "num_key_value_heads" and str(path) in str(info.value)
