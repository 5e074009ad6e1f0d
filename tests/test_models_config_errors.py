"""Bad input: one clear line naming the file, the field and the fix; never a silent number."""

from pathlib import Path

import pytest
import yaml

import mlacalc
from mlacalc import ConfigError, InvalidArgumentError, UnknownDtypeError, UnknownModelError

SHIPPED_DIR = Path(mlacalc.__file__).resolve().parent / "data" / "models"


def base_yaml(name="llama-2-7b") -> dict:
    return yaml.safe_load((SHIPPED_DIR / f"{name}.yaml").read_text())


def write(tmp_path, data, name="model.yaml") -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data))
    return path


def error_for(tmp_path, data, name="model.yaml") -> ConfigError:
    path = write(tmp_path, data, name)
    with pytest.raises(ConfigError) as info:
        mlacalc.load_model(path)
    message = str(info.value)
    assert "\n" not in message and str(path) in message
    return info.value


def changed(name="llama-2-7b", **changes):
    data = base_yaml(name)
    for key, value in changes.items():
        if value is ...:
            data.pop(key)
        else:
            data[key] = value
    return data


def test_every_shipped_file_loads():
    for name in mlacalc.shipped_models():
        model = mlacalc.load_model(name)
        assert model.name == name and model.source


def test_missing_field(tmp_path):
    err = error_for(tmp_path, changed(hidden_size=...))
    assert err.field == "hidden_size" and "is missing" in str(err) and "add it" in str(err)


def test_missing_model_type_says_where_the_types_are_listed(tmp_path):
    """A one-line error has nothing "below" (before: "(see the list below)")."""
    err = error_for(tmp_path, changed(model_type=...))
    assert err.field == "model_type" and "below" not in str(err)
    assert "docs/config-schema.md" in str(err)


def test_missing_mla_field(tmp_path):
    err = error_for(tmp_path, changed("deepseek-v3", qk_rope_head_dim=...))
    assert err.field == "qk_rope_head_dim"


def test_missing_head_dim_follows_the_hf_rule(tmp_path):
    # absent head_dim takes LlamaConfig's rule, as a config.json would, and says so
    model = mlacalc.load_model(write(tmp_path, changed(head_dim=...)))
    assert model.head_dim == 4096 // 32
    assert any(d.startswith("head_dim = 128 (LlamaConfig") for d in model.derived)
    err = error_for(tmp_path, changed(head_dim=None))
    assert err.field == "head_dim" and "required" in str(err)


@pytest.mark.parametrize("value", ["4096", 4096.0, True, [4096]])
def test_mistyped_field(tmp_path, value):
    err = error_for(tmp_path, changed(hidden_size=value))
    assert err.field == "hidden_size" and "positive integer" in str(err)


def test_misspelled_field_suggests_the_right_one(tmp_path):
    data = changed()
    data["num_attention_head"] = data.pop("num_attention_heads")
    err = error_for(tmp_path, data)
    assert err.field == "num_attention_head" and "num_attention_heads" in str(err)


@pytest.mark.parametrize(
    "field",
    [
        "hidden_size",
        "num_hidden_layers",
        "num_attention_heads",
        "head_dim",
        "vocab_size",
        "intermediate_size",
    ],
)
@pytest.mark.parametrize("value", [0, -8])
def test_zero_or_negative_dimension(tmp_path, field, value):
    err = error_for(tmp_path, changed(**{field: value}))
    assert err.field == field and str(value) in str(err)


def test_mla_dimension_zero(tmp_path):
    err = error_for(tmp_path, changed("deepseek-v3", kv_lora_rank=0))
    assert err.field == "kv_lora_rank" and "null" in str(err)


def test_heads_not_divisible(tmp_path):
    err = error_for(tmp_path, changed(num_key_value_heads=5))
    assert err.field == "num_key_value_heads" and "not divisible" in str(err)


def test_more_kv_heads_than_heads(tmp_path):
    err = error_for(tmp_path, changed(num_key_value_heads=64))
    assert err.field == "num_key_value_heads" and "exceed" in str(err)


def test_odd_rope_dimension(tmp_path):
    err = error_for(tmp_path, changed("deepseek-v3", qk_rope_head_dim=63))
    assert err.field == "qk_rope_head_dim" and "odd" in str(err)
    err = error_for(tmp_path, changed(head_dim=127))
    assert err.field == "head_dim" and "odd" in str(err)


def test_unknown_weights_dtype(tmp_path):
    err = error_for(tmp_path, changed(weights_dtype="fp7"))
    assert err.field == "weights_dtype" and "bf16" in str(err)


def test_unknown_model_type(tmp_path):
    err = error_for(tmp_path, changed(model_type="mamba"))
    assert err.field == "model_type" and "deepseek_v3" in str(err)


def test_mla_field_without_kv_lora_rank(tmp_path):
    err = error_for(tmp_path, changed(q_lora_rank=1536))
    assert err.field == "q_lora_rank" and "kv_lora_rank" in str(err)


def test_moe_without_expert_width(tmp_path):
    err = error_for(tmp_path, changed("deepseek-v3", moe_intermediate_size=...))
    assert err.field == "moe_intermediate_size"


def test_experts_per_token_out_of_range(tmp_path):
    err = error_for(tmp_path, changed("deepseek-v3", num_experts_per_tok=300))
    assert err.field == "num_experts_per_tok"


def test_source_is_optional_for_user_files(tmp_path):
    path = write(tmp_path, changed(source=...))
    assert mlacalc.load_model(path).source == (f"user file {path}",)


def test_shipped_files_need_a_source():
    from mlacalc.models.loading import parse_config_text

    text = (SHIPPED_DIR / "llama-2-7b.yaml").read_text()
    body = "\n".join(line for line in text.splitlines() if not line.startswith(("source", "  - ")))
    with pytest.raises(ConfigError) as info:
        parse_config_text(body, "llama-2-7b.yaml", shipped=True)
    assert info.value.field == "source" and "is missing" in str(info.value)
    for name in mlacalc.shipped_models():
        assert not any(d.startswith("source") for d in mlacalc.load_model(name).derived)


def test_malformed_yaml(tmp_path):
    err = error_for(tmp_path, "name: x\nhidden_size: [1, 2\n")
    assert "not valid YAML" in str(err) and "line" in str(err)


def test_yaml_tag_is_never_executed(tmp_path):
    marker = tmp_path / "pwned"
    text = f"!!python/object/apply:os.system ['touch {marker}']\n"
    err = error_for(tmp_path, text)
    assert "tag" in str(err)
    assert not marker.exists()
    text = f"name: x\nhidden_size: !!python/object/apply:os.system ['touch {marker}']\n"
    error_for(tmp_path, text)
    assert not marker.exists()


def test_empty_file(tmp_path):
    assert "is empty" in str(error_for(tmp_path, ""))
    assert "is empty" in str(error_for(tmp_path, "# only a comment\n"))


def test_not_a_mapping(tmp_path):
    assert "mapping" in str(error_for(tmp_path, "- 1\n- 2\n"))


def test_file_too_large(tmp_path):
    err = error_for(tmp_path, "# " + "x" * (1 << 20) + "\n")
    assert "1 MiB" in str(err)


def test_unreadable_path():
    with pytest.raises(ConfigError) as info:
        mlacalc.load_model("no/such/model.yaml")
    assert "no such file" in str(info.value)


def test_unknown_model_lists_known_names():
    with pytest.raises(UnknownModelError) as info:
        mlacalc.load_model("deepseek-v4")
    message = str(info.value)
    assert "deepseek-v3" in message and "Did you mean" in message and "llama-2-7b" in message
    assert isinstance(info.value, KeyError)


def test_names_are_case_insensitive_and_aliases_work(v3):
    assert mlacalc.load_model("DeepSeek-V3") is v3
    assert mlacalc.load_model("deepseek-r1") is v3


def test_with_changes_validates():
    with pytest.raises(ConfigError) as info:
        mlacalc.load_model("llama-3-8b").with_changes(num_key_value_heads=3)
    assert info.value.field == "num_key_value_heads"


@pytest.mark.parametrize(
    "kwargs,argument",
    [
        (dict(seq_len=0), "seq_len"),
        (dict(seq_len=-5), "seq_len"),
        (dict(seq_len=1.5), "seq_len"),
        (dict(seq_len=True), "seq_len"),
        (dict(seq_len=8, batch=0), "batch"),
    ],
)
def test_bad_lengths(kwargs, argument):
    with pytest.raises(InvalidArgumentError) as info:
        mlacalc.kv_cache_bytes("llama-3-8b", **kwargs)
    assert info.value.argument == argument


def test_bad_phase_arguments():
    with pytest.raises(InvalidArgumentError, match="q_len"):
        mlacalc.attention_flops("llama-3-8b", "chunk", 100)
    with pytest.raises(InvalidArgumentError, match="cannot exceed"):
        mlacalc.attention_flops("llama-3-8b", "chunk", 100, q_len=101)
    with pytest.raises(InvalidArgumentError, match="phase"):
        mlacalc.attention_flops("llama-3-8b", "generate", 100)
    with pytest.raises(InvalidArgumentError, match="decode adds one token"):
        mlacalc.attention_flops("llama-3-8b", "decode", 100, q_len=4)


def test_bad_impl():
    with pytest.raises(InvalidArgumentError, match="one implementation"):
        mlacalc.attention_flops("llama-3-8b", "decode", 100, impl="absorbed")
    with pytest.raises(InvalidArgumentError, match="absorbed_merged"):
        mlacalc.attention_flops("deepseek-v3", "decode", 100, impl="absorb")


def test_unknown_kv_dtype():
    with pytest.raises(UnknownDtypeError) as info:
        mlacalc.kv_cache_bytes("deepseek-v3", 1, kv_dtype="fp6")
    assert "fp8_ds_mla" in str(info.value) and "bf16" in str(info.value)


def test_every_error_is_an_mlacalc_error():
    for exc in (ConfigError, UnknownModelError, UnknownDtypeError, InvalidArgumentError):
        assert issubclass(exc, mlacalc.MlacalcError)


def test_schema_doc_lists_every_field():
    doc = (Path(__file__).parent.parent / "docs" / "config-schema.md").read_text()
    for field in mlacalc.models.loading.FIELDS:
        assert f"| `{field}` |" in doc


# -- a user's YAML is friendly -------------------------------------------------------

MINIMAL = (
    "model_type: llama\nhidden_size: 4096\nnum_hidden_layers: 32\nnum_attention_heads: 32\n"
    "vocab_size: 32000\nintermediate_size: 11008\n"
)


def test_minimal_user_yaml_loads_with_every_default_listed(tmp_path):
    path = write(tmp_path, MINIMAL, name="My Llama.yaml")
    model = mlacalc.load_model(path)
    assert model.name == "my-llama"  # the file's stem
    assert model.source == (f"user file {path}",)
    assert (model.head_dim, model.num_key_value_heads, model.tie_word_embeddings) == (
        128,
        32,
        False,
    )
    assert [d.split(" = ")[0] for d in model.derived] == [
        "name",
        "head_dim",
        "num_key_value_heads",
        "tie_word_embeddings",
    ]
    # the same model as a Hugging Face config.json gives the same counts
    shipped = mlacalc.load_model("llama-2-7b")
    assert mlacalc.param_counts(model).total == mlacalc.param_counts(shipped).total


def test_user_yaml_q_lora_rank_follows_the_hf_rule(tmp_path):
    v3 = base_yaml("deepseek-v3")
    for key in ("name", "source", "aliases", "display_name", "q_lora_rank", "num_key_value_heads"):
        v3.pop(key)
    model = mlacalc.load_model(write(tmp_path, v3))
    assert (
        model.q_lora_rank == 1536
        and "q_lora_rank = 1536 (DeepseekV2/V3Config default)" in model.derived
    )
    assert mlacalc.param_counts(model).total == mlacalc.param_counts("deepseek-v3").total
    v3["q_lora_rank"] = None  # null states "no query compression"
    assert mlacalc.load_model(write(tmp_path, v3)).q_lora_rank is None


def test_one_error_lists_every_missing_and_invalid_field(tmp_path):
    err = error_for(tmp_path, "hidden_size: 4096\nnum_attention_heads: '32'\nbias: 'false'\n")
    fields = [p[0] for p in err.problems]
    assert set(fields) == {
        "model_type",
        "num_hidden_layers",
        "num_attention_heads",
        "vocab_size",
        "intermediate_size",
        "bias",
    }
    assert err.field == fields[0]
    for field in fields:
        assert f"'{field}'" in str(err)


@pytest.mark.parametrize("value", ["false", "no", 0, 1, [], None, "true"])
def test_booleans_must_be_booleans(tmp_path, value):
    err = error_for(tmp_path, changed(tie_word_embeddings=value))
    assert err.field == "tie_word_embeddings" and "true or false" in str(err)


@pytest.mark.parametrize(
    "field,value,bound",
    [
        ("num_hidden_layers", 10**30, "2,048"),
        ("hidden_size", 2**20 + 1, "1,048,576"),
        ("num_attention_heads", 2**16 + 2, "65,536"),
        ("vocab_size", 2**24 + 1, "16,777,216"),
        ("sliding_window", 2**40 + 1, "1,099,511,627,776"),
    ],
)
def test_upper_bounds_are_stated_in_the_error(tmp_path, field, value, bound):
    err = error_for(tmp_path, changed(**{field: value}))
    assert err.field == field and bound in str(err)


def test_every_bound_is_generous_for_real_models():
    from mlacalc.models.schema import BOUNDS

    for name in mlacalc.shipped_models():
        model = mlacalc.load_model(name)
        for field, bound in BOUNDS.items():
            value = getattr(model, field)
            if isinstance(value, int):
                assert value * 8 <= bound, (name, field)


def test_five_thousand_digit_integer_in_a_file(tmp_path):
    err = error_for(tmp_path, "model_type: llama\nhidden_size: " + "9" * 5000 + "\n")
    assert "5,000 digits" in str(err) and "line 2" in str(err)


def test_billion_laughs_is_refused(tmp_path):
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, 9):
        prev, cur = chr(96 + i), chr(97 + i)
        lines.append(f"{cur}: &{cur} [" + ",".join([f"*{prev}"] * 9) + "]")
    err = error_for(tmp_path, "\n".join(lines) + "\n")
    assert "aliases" in str(err) and len(str(err)) < 300


def test_deep_nesting_in_a_file(tmp_path):
    err = error_for(tmp_path, "hidden_size: " + "[" * 100_000 + "]" * 100_000 + "\n")
    assert "nests deeper than" in str(err)
    err = error_for(tmp_path, '{"a": ' + "[" * 100_000 + "]" * 100_000 + "}", name="c.json")
    assert "nests deeper than" in str(err)


def test_duplicate_keys_are_an_error(tmp_path):
    text = (SHIPPED_DIR / "llama-2-7b.yaml").read_text() + "hidden_size: 8192\n"
    err = error_for(tmp_path, text)
    assert "hidden_size" in str(err) and "twice" in str(err)


def test_with_changes_checks_types_and_names():
    model = mlacalc.load_model("llama-3-8b")
    for change in (
        {"hidden_size": "abc"},
        {"num_hidden_layers": 10**30},
        {"tie_word_embeddings": "false"},
        {"hidden": 3},
    ):
        with pytest.raises(ConfigError) as info:
            model.with_changes(**change)
        assert info.value.field == next(iter(change))


def test_moe_layer_count_in_closed_form_matches_the_per_layer_rule():
    model = mlacalc.load_model("deepseek-v3")
    for layers, first, freq in [(61, 3, 1), (61, 0, 2), (10, 3, 4), (5, 9, 1), (27, 1, 3)]:
        m = model.with_changes(
            num_hidden_layers=layers, first_k_dense_replace=first, moe_layer_freq=freq
        )
        assert m.num_moe_layers == sum(m.is_moe_layer(i) for i in range(layers))


# -- the schema is declared once ------------------------------------------------------


def test_every_dataclass_field_is_declared_in_the_schema():
    import dataclasses

    from mlacalc.models.schema import SPECS, ModelConfig

    names = [f.name for f in dataclasses.fields(ModelConfig)]
    assert [n for n in names if n not in SPECS] == ["origin", "derived", "view"]
    assert list(mlacalc.models.loading.FIELDS) == list(SPECS)
    for name, spec in SPECS.items():
        if spec.kind in ("positive integer", "non-negative integer", "positive integer or null"):
            assert spec.hi is not None, name  # every dimension and count is bounded


def test_schema_doc_shows_the_generated_tables():
    from mlacalc.models import hf
    from mlacalc.models.hf._docs import refresh_schema_doc
    from mlacalc.models.schema import BOUNDS, markdown_fields
    from mlacalc.words import safeio

    doc = (Path(__file__).parent.parent / "docs" / "config-schema.md").read_text()
    assert refresh_schema_doc(doc) == doc, "run: python -m mlacalc.models.hf._docs"
    assert markdown_fields() in doc
    assert hf.markdown_defaults() in doc and hf.markdown_spellings() in doc
    table = doc.split("## Every field")[1]
    for field, bound in BOUNDS.items():
        assert f"{bound:,}" in table.split(f"| `{field}` |")[1].split("\n")[0], field
    for limit in (safeio.MAX_NODES, safeio.MAX_DEPTH, safeio.MAX_INT_DIGITS):
        assert f"{limit:,}" in doc
    assert ", ".join(hf.model_types()) in doc


def test_hf_config_without_model_type_names_that_field(tmp_path):
    import json

    from mlacalc import load_model
    from mlacalc.words.errors import ConfigError

    with open("tests/data/hf/falcon-7b.config.json") as fh:
        data = json.load(fh)
    data.pop("model_type")
    path = tmp_path / "config.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ConfigError) as err:
        load_model(path)
    text = str(err.value)
    assert "model_type" in text and "falcon" in text and "is not a field" not in text


def test_a_what_if_name_keeps_whole_changes():
    # a learner's trial: nine --set changes cut the name at 200 characters mid-word
    # ("... first_k_dense_replace=1, num_key declares 256 routed experts")
    import mlacalc

    changes = dict(
        hidden_size=256, num_attention_heads=4, q_lora_rank=96, kv_lora_rank=64,
        qk_nope_head_dim=32, qk_rope_head_dim=16, v_head_dim=32, num_hidden_layers=1,
        first_k_dense_replace=1,
    )  # fmt: skip
    m = mlacalc.load_model("deepseek-v3").with_changes(**changes)
    assert len(m.label) <= 200 and m.label.endswith(" and 2 more"), m.label
    assert m.label.startswith("DeepSeek-V3 with hidden_size=256, num_attention_heads=4, ")
    shown = m.label.removeprefix("DeepSeek-V3 with ").removesuffix(" and 2 more").split(", ")
    assert all(part.split("=")[0] in changes for part in shown), shown
    short = mlacalc.load_model("deepseek-v3").with_changes(kv_lora_rank=256)
    assert short.label == "DeepSeek-V3 with kv_lora_rank=256"
