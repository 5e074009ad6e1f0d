"""Hugging Face config.json import: the variant comes from the fields; counts match the YAMLs."""

import json
import shutil

import pytest
from reference_data import HF_WRITTEN

import mlacalc
from mlacalc import ConfigError

DATA = HF_WRITTEN
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


def _hf(name: str) -> dict:
    return json.loads((DATA / f"{name}.config.json").read_text())


@pytest.mark.parametrize("value", ["abc", None, [], {}, 1.5, True, "4096"])
def test_hidden_size_type_is_checked_before_any_arithmetic(value):
    # the head_dim rule divides hidden_size: a wrong type must be reported, not divided
    data = _hf("llama-2-7b")
    data["hidden_size"] = value
    with pytest.raises(ConfigError) as info:
        mlacalc.import_hf_config(data)
    assert info.value.field == "hidden_size"
    assert [p[0] for p in info.value.problems] == ["hidden_size"]  # no follow-on noise


@pytest.mark.parametrize("value", [["llama"], {"name": "llama"}, 3, None, ""])
def test_model_type_must_be_a_string(value):
    data = _hf("llama-2-7b")
    data["model_type"] = value
    with pytest.raises(ConfigError) as info:
        mlacalc.import_hf_config(data)
    assert info.value.field == "model_type" and "llama" in str(info.value)


def test_unknown_model_type_names_the_nearest():
    data = _hf("mistral-7b")
    data["model_type"] = "mistrall"
    with pytest.raises(ConfigError) as info:
        mlacalc.import_hf_config(data)
    assert "did you mean 'mistral'?" in str(info.value)


def test_name_or_path_must_be_a_string():
    data = _hf("llama-2-7b")
    data["_name_or_path"] = 1.5
    with pytest.raises(ConfigError) as info:
        mlacalc.import_hf_config(data)
    assert info.value.field == "_name_or_path"


def test_name_from_repository_id_else_the_file():
    """``_name_or_path`` names the model where it is a repository id or a path; a bare alias
    (Llama-3.3-Nemotron-Super's "llama_nemotron_super") gives way to the file's name, as every
    other import takes (the alias named it "llama-nemotron-super")."""
    data = _hf("llama-2-7b")
    assert mlacalc.import_hf_config(data, "x/llama.config.json").name == "llama-2-7b-hf"
    data["_name_or_path"] = "/raid/checkpoints/my-llama/"
    assert mlacalc.import_hf_config(data, "x/llama.config.json").name == "my-llama"
    data["_name_or_path"] = "llama_exported"
    assert mlacalc.import_hf_config(data, "x/llama.config.json").name == "llama"
    assert mlacalc.import_hf_config(data, "x/snap/config.json").name == "snap"


@pytest.mark.parametrize(
    "field,digits,bound",
    [
        ("num_hidden_layers", 30, "2,048"),
        ("n_routed_experts", 30, "65,536"),
        ("hidden_size", 5000, "1,048,576"),
        ("vocab_size", 0, "16,777,216"),
    ],
    ids=["layers-1e30", "experts-1e30", "hidden-5000-digits", "vocab-2^24+1"],
)
def test_values_above_the_bound_are_refused_with_the_bound(field, digits, bound):
    data = _hf("deepseek-v3")
    data[field] = 10**digits if digits else 2**24 + 1
    with pytest.raises(ConfigError) as info:
        mlacalc.import_hf_config(data)
    assert info.value.field == field and bound in str(info.value)
    assert len(str(info.value)) < 400


@pytest.mark.parametrize("value", ["false", "true", 0, 1, [], None])
def test_falcon_multi_query_must_be_a_boolean(value):
    data = _hf("falcon-7b")
    data["multi_query"] = value
    if value is None:  # null is the class default (true): one KV head
        assert mlacalc.import_hf_config(data).num_key_value_heads == 1
        return
    with pytest.raises(ConfigError) as info:
        mlacalc.import_hf_config(data)
    assert info.value.field == "multi_query" and "true or false" in str(info.value)


def test_falcon_multi_query_false_is_multi_head():
    data = _hf("falcon-7b")
    data["multi_query"] = False
    model = mlacalc.import_hf_config(data)
    assert model.num_key_value_heads == 71 and model.variant == "mha"
    assert "num_key_value_heads = 71 (multi_query: false)" in model.derived


@pytest.mark.parametrize("value", [[], "no", 0])
def test_qwen2_use_sliding_window_must_be_a_boolean(value):
    data = _hf("qwen2.5-7b")
    data["use_sliding_window"] = value
    with pytest.raises(ConfigError) as info:
        mlacalc.import_hf_config(data)
    assert info.value.field == "use_sliding_window"


@pytest.mark.parametrize("field,default", [("first_k_dense_replace", 3), ("n_shared_experts", 1)])
def test_dropped_deepseek_fields_take_the_hugging_face_default(field, default):
    # DeepseekV3Config: first_k_dense_replace = 3, n_shared_experts = 1; the real config
    # states the same values, so dropping either must not change the 671B total
    full = mlacalc.import_hf_config(_hf("deepseek-v3"))
    data = _hf("deepseek-v3")
    data.pop(field)
    model = mlacalc.import_hf_config(data)
    assert getattr(model, field) == default
    assert f"{field} = {default} (DeepseekV3Config default)" in model.derived
    assert mlacalc.param_counts(model).total == mlacalc.param_counts(full).total == 671_026_419_200


def test_every_problem_of_a_config_json_is_reported_at_once():
    data = _hf("llama-2-7b")
    for key in ("hidden_size", "vocab_size"):
        data.pop(key)
    data["tie_word_embeddings"] = "no"
    data["num_key_value_heads"] = 0
    with pytest.raises(ConfigError) as info:
        mlacalc.import_hf_config(data)
    fields = {p[0] for p in info.value.problems}
    assert fields == {"hidden_size", "vocab_size", "tie_word_embeddings", "num_key_value_heads"}
    assert "\n" not in str(info.value)
    assert all(f"'{f}'" in str(info.value) for f in fields)


def test_every_model_type_has_one_family_unit():
    from mlacalc.models import hf

    units = hf.families()
    covered = [t for unit in units.values() for t in unit.model_types]
    assert sorted(covered) == sorted(hf.model_types()) and len(set(covered)) == len(covered)
    assert set(mlacalc.models.loading.MODEL_TYPES) == set(covered)
    for unit in units.values():
        assert unit.layout in hf.LAYOUTS
        for name in list(unit.defaults) + [n for d in unit.defaults_by_type.values() for n in d]:
            assert name in mlacalc.models.loading.FIELDS, (unit.name, name)
        for target in unit.renames.values():
            assert target in mlacalc.models.loading.FIELDS, (unit.name, target)


# the Hugging Face configuration class each model_type reads (Kimi-K2 names DeepseekV3Config)
_HF_CLASS_TYPE = {"kimi_k2": "deepseek_v3"}
# fields a file must state: the size of a model is never guessed
_STATED = (
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "vocab_size",
    "intermediate_size",
    "kv_lora_rank",
    "qk_nope_head_dim",
    "qk_rope_head_dim",
    "v_head_dim",
    "n_routed_experts",
    "moe_intermediate_size",
    "num_experts_per_tok",
)


#: (model_type, class field) -> the schema field the family reads it as (a class field of the
#: same name that means something narrower than the schema's)
_READ_AS = {("seed_oss", "attention_bias"): "qkv_bias"}  # q/k/v biases only; o_proj apart


@pytest.mark.parametrize("model_type", sorted(mlacalc.models.loading.MODEL_TYPES))
def test_defaults_follow_the_hugging_face_class(model_type):
    """An absent field takes the value the transformers configuration class gives it."""
    pytest.importorskip("transformers")
    from transformers import CONFIG_MAPPING

    from mlacalc.models import hf

    unit = hf.family_of(model_type)
    if _HF_CLASS_TYPE.get(model_type, model_type) not in CONFIG_MAPPING:
        pytest.skip(f"{model_type}: remote code, no transformers class; its unit states the rule")
    ref = CONFIG_MAPPING[_HF_CLASS_TYPE.get(model_type, model_type)]()
    if not hasattr(ref, "hidden_size") and hasattr(ref, "text_config"):
        ref = ref.text_config  # a wrapper (Step3p7Config) keeps the language model's fields there
    spelled: dict[str, str] = {}
    for key, field in unit.renames.items():
        spelled.setdefault(field, key)  # the family's first spelling of a field

    def reference(field):
        for key in (field, spelled.get(field)):
            if key and hasattr(ref, key):
                return True, getattr(ref, key)
        return False, None

    data = {"model_type": model_type}
    for field in _STATED:
        found, value = reference(field)
        if (
            found
            and value is not None
            and (field in unit.required or field not in unit.defaults_for(model_type))
        ):
            data[spelled.get(field, field)] = value
    if model_type == "gemma4_text":
        data["hidden_size_per_layer_input"] = 0  # per-layer embeddings are refused by name
        ref.allow_global_per_layer_attribute_access = True  # the sliding layers' head_dim
    experts = data.get(spelled.get("n_routed_experts", "n_routed_experts"))
    if unit.moe and "num_experts_per_tok" not in data and experts:
        data["num_experts_per_tok"] = 2  # DeepseekV2Config leaves it null; mlacalc needs it
    model = mlacalc.import_hf_config(data)
    compared = 0
    for field in mlacalc.models.loading.FIELDS:
        if field in data or field in ("name", "model_type", "source", "weights_dtype"):
            continue
        if field == "max_position_embeddings" and unit.layout != "gpt2":
            continue  # documented: absent means "not stated"
        if field == "head_dim" and unit.mla:
            continue  # MLA: HF sets head_dim = qk_rope_head_dim, unused
        found, expected = reference(field)
        if not found:
            continue
        if field == "num_key_value_heads" and unit.name == "falcon":  # its multi_query rule
            expected = 1 if ref.multi_query and not ref.new_decoder_architecture else expected
        if field == "head_dim" and expected is None:
            expected = ref.hidden_size // ref.num_attention_heads  # what the modeling code uses
        if field == "intermediate_size" and expected is None:
            expected = 4 * ref.hidden_size  # GPT-2: n_inner null means 4 x n_embd
        if expected is None and field in ("n_routed_experts", "num_experts_per_tok"):
            expected = 0
        if expected is None and field in ("n_group", "topk_group"):
            expected = 1  # DeepseekV2Config's None: no group limit
        if field == "sliding_window" and expected == 0:
            expected = None  # Qwen2MoeConfig: 0 means no window
        if (model_type, field) == ("deepseek_v4", "num_nextn_predict_layers"):
            assert model.num_nextn_predict_layers == 0  # its MTP module is not modelled
            continue
        ours = _READ_AS.get((model_type, field), field)  # the schema field it is read as
        assert getattr(model, ours) == expected, (model_type, field)
        compared += 1
    assert compared >= 3


@pytest.mark.parametrize("name", ["llama-3.1-8b", "llama-3.1-70b"])
def test_llama_3_1_is_its_own_model(name):
    """Llama 3.1 was an alias of Llama 3's YAML (max_position_embeddings 8,192), so a 32k context
    warned "Llama-3-70B was not trained for it"; its config has 131,072 (llama3 rope, x8)."""
    from reference_data import HF_CONFIGS

    from mlacalc.models.loading import beyond_positions

    shipped = mlacalc.load_model(name)
    config = mlacalc.load_model(HF_CONFIGS / f"{name}.config.json")
    assert shipped.label == name.replace("llama", "Llama").replace("b", "B")
    assert shipped.max_position_embeddings == config.max_position_embeddings == 131072
    assert mlacalc.param_counts(shipped).to_dict() | {"model": 0} == mlacalc.param_counts(
        config
    ).to_dict() | {"model": 0}
    assert mlacalc.kv_cache_bytes(shipped, 4096, 2) == mlacalc.kv_cache_bytes(config, 4096, 2)
    assert beyond_positions(shipped, 32768) is None
    assert beyond_positions(mlacalc.load_model(name.replace("3.1", "3")), 32768)


def test_mtp_drop_said_once_for_deepseek_v4_and_minimax_m3():
    """import-hf of DeepSeek-V4-Pro dropped its MTP layer (num_nextn_predict_layers 1) with no
    '# derived' note (Qwen3.5's, MiniMax-M3's, Step-3.7's say it); MiniMax-M3's said it twice."""
    from reference_data import HF_CONFIGS_2

    v4 = mlacalc.load_model(HF_CONFIGS_2 / "deepseek-ai--DeepSeek-V4-Pro.config.json")
    said = [str(d) for d in v4.derived if "MTP" in str(d)]
    assert len(said) == 1 and "num_nextn_predict_layers: 1" in said[0], said
    assert v4.num_nextn_predict_layers == 0 and "MTP layer" in v4.notes
    m3 = mlacalc.load_model(HF_CONFIGS_2 / "MiniMaxAI--MiniMax-M3.config.json")
    said = [str(d) for d in m3.derived if "MTP" in str(d)]
    assert len(said) == 1 and "num_mtp_modules 7" in said[0], said
