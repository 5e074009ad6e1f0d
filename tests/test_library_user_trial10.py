"""A researcher using mlacalc as a Python library (trial 10): numpy counts, a changed
config's identity, the errors and warnings a library user meets where the CLI says more."""

import numpy as np
import pytest

import mlacalc
from mlacalc import ConfigError, InvalidArgumentError
from mlacalc.models import schema
from mlacalc.models.variants import as_variant

V3 = mlacalc.load_model("deepseek-v3")


def test_numpy_integers_are_whole_numbers_everywhere():
    """The notebook loop ``for r in np.arange(128, 1025, 128): base.with_changes(
    kv_lora_rank=r)``. Before: with_changes refused np.int64(256) ("write a whole number such as
    kv_lora_rank: 128", wrong fix) and plan refused gpus=np.int64(8), while predict_time took
    them: one rule now (mlacalc.words.arguments.whole), stored as Python ints."""
    for rank in np.arange(128, 1025, 128):
        m = V3.with_changes(kv_lora_rank=rank)
        assert type(m.kv_lora_rank) is int and m.kv_lora_rank == int(rank)
    assert V3.with_changes(kv_lora_rank=np.int64(256)) == V3.with_changes(kv_lora_rank=256)
    data = dict(V3.to_dict(), name="np-v3", kv_lora_rank=np.int32(256))
    assert type(mlacalc.model_from_dict(data).kv_lora_rank) is int
    p = mlacalc.plan(V3, "B200", np.int64(8), tp=np.int64(8))
    assert p == mlacalc.plan(V3, "B200", 8, tp=8)
    assert as_variant(V3, "gqa", num_key_value_heads=np.int64(8)).num_key_value_heads == 8


@pytest.mark.parametrize("value", [np.float64(256), 256.0, True, np.True_])
def test_floats_and_booleans_are_still_no_whole_numbers(value):
    with pytest.raises(ConfigError, match="kv_lora_rank"):
        V3.with_changes(kv_lora_rank=value)
    with pytest.raises(InvalidArgumentError, match="gpus"):
        mlacalc.plan(V3, "B200", value)


def test_a_changed_config_does_not_claim_the_originals_identity():
    """Before: with_changes(kv_lora_rank=256) kept name 'deepseek-v3', label 'DeepSeek-V3' and
    the official source, so every result said 'deepseek-v3'; name='my-mla' kept the label."""
    m = V3.with_changes(kv_lora_rank=256)
    assert m.name == "deepseek-v3-kv-lora-rank-256"
    assert m.label == "DeepSeek-V3 with kv_lora_rank=256"
    assert m.source[0] == "derived from deepseek-v3 by with_changes(kv_lora_rank=256)"
    assert m.aliases == ()
    assert mlacalc.kv_cache(m, 4096).model == m.name
    named = V3.with_changes(kv_lora_rank=256, name="my-mla")
    assert named.name == named.label == "my-mla"
    assert V3.with_changes(notes="mine").name == "deepseek-v3"  # no model field changed
    shown = V3.with_changes(kv_lora_rank=256, display_name="Mine")
    assert (shown.name, shown.label) == ("deepseek-v3-kv-lora-rank-256", "Mine")
    # round trip: a derived model writes and reads back as itself
    again = mlacalc.model_from_dict(m.to_dict())
    assert (again.name, again.label, again.kv_lora_rank) == (m.name, m.label, 256)


def test_an_error_in_a_value_set_in_code_blames_the_call_not_the_shipped_file():
    """Before: '/.../deepseek-v3.yaml: field ...' for a value set by with_changes."""
    with pytest.raises(ConfigError) as info:
        V3.with_changes(qk_rope_head_dim=63)
    assert str(info.value).startswith("with_changes(qk_rope_head_dim=63): field 'qk_rope_head_dim'")
    assert ".yaml" not in str(info.value)
    # an MLA model's KV heads (a mirror of the query heads) follow the query heads
    assert V3.with_changes(num_attention_heads=64).num_key_value_heads == 64


def test_the_bare_constructor_names_what_is_missing_and_the_way_to_build_one():
    """Before: Python's TypeError 'missing 9 required keyword-only arguments'."""
    with pytest.raises(ConfigError) as info:
        mlacalc.ModelConfig(name="x")
    text = str(info.value)
    assert "\n" not in text and "hidden_size" in text and "model_from_dict" in text
    assert "with_changes" in info.value.fix
    # nine missing: the constructor is named, not the first of them (before: "ModelConfig(...):
    # field 'model_type': misses 9 required field(s): model_type, source, ...")
    assert text.startswith("ModelConfig(...): misses 9 required fields: model_type, source, ")
    assert info.value.field is None


def test_the_bare_constructor_names_a_lone_missing_field():
    """Before: "field 'tie_word_embeddings': misses 1 required field(s): tie_word_embeddings"."""
    values = {f: getattr(V3, f) for f in schema._REQUIRED_INIT if f != "tie_word_embeddings"}
    with pytest.raises(ConfigError) as info:
        mlacalc.ModelConfig(**values)
    assert info.value.field == "tie_word_embeddings"
    assert str(info.value).startswith(
        "ModelConfig(...): field 'tie_word_embeddings': is required and was not given ("
    )


def test_every_config_error_carries_its_fix():
    """Before: .fix was None on every ConfigError, the fix only inside the message."""
    with pytest.raises(ConfigError) as info:
        V3.with_changes(kv_lora_rank=np.float64(256))
    assert info.value.fix == "write a whole number such as kv_lora_rank: 128"
    assert str(info.value).count(info.value.fix) == 1


def test_routed_experts_without_a_moe_layer_warn_on_every_route(tmp_path):
    """Before: with_changes(first_k_dense_replace=100) on 61 layers gave 37.4 B parameters and
    0 routed experts silently, while the CLI's report of the same YAML warned. Now every
    construction route warns the CLI's sentence (valid as transformers builds it: not refused)."""
    import yaml

    words = "declares 256 routed experts but no MoE layer (first_k_dense_replace 100 of 61"
    with pytest.warns(mlacalc.MlacalcWarning, match=r"no MoE layer \(first_k_dense_replace 100"):
        m = V3.with_changes(first_k_dense_replace=100)
    assert m.num_moe_layers == 0
    data = dict(V3.to_dict(), first_k_dense_replace=100)
    with pytest.warns(mlacalc.MlacalcWarning) as got:
        mlacalc.model_from_dict(data)
    assert words in str(got[0].message)
    path = tmp_path / "fkdr.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.warns(mlacalc.MlacalcWarning, match="lower first_k_dense_replace"):
        mlacalc.load_model(path)
    hf = {"model_type": "deepseek_v3", **{k: v for k, v in data.items() if k in _HF_KEYS}}
    with pytest.warns(mlacalc.MlacalcWarning, match="no MoE layer"):
        mlacalc.import_hf_config(hf)


_HF_KEYS = (
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "vocab_size",
    "intermediate_size",
    "moe_intermediate_size",
    "n_routed_experts",
    "n_shared_experts",
    "num_experts_per_tok",
    "first_k_dense_replace",
    "kv_lora_rank",
    "q_lora_rank",
    "qk_nope_head_dim",
    "qk_rope_head_dim",
    "v_head_dim",
)


def test_a_prediction_says_when_no_one_device_holds_the_step():
    """Before: 1.307 s with 2,837 GiB read a step on one 80 GiB H100 and no warning anywhere
    (Prediction had no warnings field)."""
    p = mlacalc.predict_time(
        V3, "H100-SXM", "decode", 131072, batch=256, scope="model", engine="sglang"
    )
    assert len(p.warnings) == 1 and "exceeds one H100-SXM's 80 GiB" in p.warnings[0]
    assert p.to_dict()["warnings"] == list(p.warnings)
    small = mlacalc.load_model("llama-2-7b")
    assert mlacalc.predict_time(small, "H100-SXM", "decode", 4096, scope="model").warnings == ()
    assert mlacalc.predict_time(V3, "H100-SXM", "decode", 4096).warnings == ()  # one layer


def test_a_context_beyond_the_positions_is_said_by_every_call_that_counts_it():
    """Before: kv_cache_bytes(V3, 1_000_000) and predict_time beyond max_position_embeddings
    (163,840) were silent while plan warned."""
    words = "context 1,000,000 exceeds the model's max_position_embeddings (163,840)"
    with pytest.warns(mlacalc.MlacalcWarning, match=words.replace("(", r"\(").replace(")", r"\)")):
        assert mlacalc.kv_cache_bytes(V3, 1_000_000) == 70272 * 1_000_000
    assert mlacalc.kv_cache(V3, 1_000_000).warnings == (words,)
    assert mlacalc.kv_cache(V3, 4096).warnings == ()
    p = mlacalc.predict_time(V3, "H100-SXM", "decode", 1_000_000)
    assert any(w.startswith(words) for w in p.warnings)
    assert any(words in w for w in mlacalc.plan(V3, "B200", 8, seq_len=1_000_000).warnings)


def test_the_roofline_json_carries_each_predictions_warnings(capsys):
    import json

    from mlacalc.cli import main

    argv = ["roofline", "deepseek-v3", "-H", "H100-SXM", "--scope", "model", "--format", "json"]
    assert main([*argv, "--phase", "decode", "--batch", "256", "--seq-len", "128k"]) == 0
    out, err = capsys.readouterr()
    (p,) = json.loads(out)["predictions"]
    assert "exceeds one H100-SXM's 80 GiB" in p["warnings"][0]
    assert "MlacalcWarning" not in err


_MINIMAL_MLA = dict(
    model_type="deepseek_v3",
    hidden_size=1024,
    num_hidden_layers=8,
    num_attention_heads=16,
    vocab_size=32000,
    intermediate_size=4096,
    kv_lora_rank=256,
    qk_nope_head_dim=64,
    qk_rope_head_dim=32,
    v_head_dim=64,
)


def test_a_minimal_mla_dict_is_asked_for_its_experts_with_a_fix_that_says_how():
    """Decided: a model's size is never a class default (DeepseekV3Config's 256 routed experts
    would make a small design a large MoE silently); the docstrings said absent fields take the
    HF defaults and now say which are required. Before: the fix only gave the field's meaning;
    now it says 0 makes every FFN dense."""
    for build in (
        lambda d: mlacalc.model_from_dict(dict(d, name="mini")),
        mlacalc.import_hf_config,
    ):
        with pytest.raises(ConfigError) as info:
            build(_MINIMAL_MLA)
        assert info.value.field == "n_routed_experts" and "0 for every FFN dense" in info.value.fix
    dense = mlacalc.model_from_dict(dict(_MINIMAL_MLA, name="mini", n_routed_experts=0))
    assert dense.is_mla and not dense.is_moe
    assert "n_routed_experts" in mlacalc.model_from_dict.__doc__


def test_a_plan_beyond_what_fits_names_the_batch_it_timed():
    """Before: plan(batch=64) that does not fit returned decode_step_s of the batch that fits
    with nothing named for it but decode_batch, and no docstring said so; a plot of
    decode_step_s against the batch asked went flat. Now timed_batch (the property; the JSON
    keeps decode_batch, its one key)."""
    big = mlacalc.plan(V3, "B200", 8, seq_len=32768, batch=1000)
    assert not big.fits and big.timed_batch == big.decode_batch == big.max_batch < 1000
    # one key for one number in the JSON: decode_batch (timed_batch is the property's name only;
    # before, the JSON carried both, always equal)
    doc = big.to_dict()
    assert doc["decode_batch"] == big.max_batch and "timed_batch" not in doc
    one = mlacalc.plan(V3, "B200", 8, seq_len=32768, batch=big.max_batch)
    assert one.decode_step_s == big.decode_step_s and one.timed_batch == big.max_batch


def test_gqa_equivalents_of_different_kv_heads_are_different_names():
    """Before: as_variant(V3, "gqa", num_key_value_heads=4/8/16) were all 'deepseek-v3-as-gqa',
    so three models' results said one name."""
    names = [as_variant(V3, "gqa", num_key_value_heads=k).name for k in (4, 8, 16)]
    assert names == ["deepseek-v3-as-gqa4", "deepseek-v3-as-gqa8", "deepseek-v3-as-gqa16"]
    assert mlacalc.kv_cache(as_variant(V3, "gqa", num_key_value_heads=8), 1).model == names[1]
