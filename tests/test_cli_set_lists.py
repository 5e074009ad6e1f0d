"""``--set`` of a list field (``shared_indexer_layers=[4, 8, 12]``, ``4,8,12``, ``2``): a
trial's every spelling failed, the error's own example ``[4, 8, 12]`` among them, while the
library's ``with_changes(shared_indexer_layers=[2, 4, 6])`` worked."""

import json

import pytest

import mlacalc

V32 = mlacalc.load_model("deepseek-v3.2")


def _report(run, *sets):
    args = [a for s in sets for a in ("--set", s)]
    out, _ = run("report", "deepseek-v3.2", *args, "--seq-len", "1k", "--format", "json")
    return json.loads(out)


def _absorbed_bytes(doc) -> int:
    return next(k for k in doc["kv_cache"] if k["impl"] == "absorbed")["total_bytes"]


@pytest.mark.parametrize("value", ["[4, 8, 12]", "4,8,12", "[4,8,12]", "4, 8, 12"])
def test_a_list_set_is_the_librarys_list(run, value):
    doc = _report(run, f"shared_indexer_layers={value}")
    changed = V32.with_changes(shared_indexer_layers=[4, 8, 12])
    assert "3 dsa-shared" in doc["layers"]["summary"]
    assert _absorbed_bytes(doc) == mlacalc.kv_cache_bytes(changed, 1024)


def test_one_entry_and_the_empty_list(run):
    assert "1 dsa-shared" in _report(run, "shared_indexer_layers=2")["layers"]["summary"]
    assert "shared" not in _report(run, "shared_indexer_layers=[]")["layers"]["summary"]


def test_quoted_words_in_a_list_are_the_words():
    from mlacalc.cli.common import _parse_sets

    sets = _parse_sets(None, None, ('block_types=["mamba", moe]', "block_widths=[8]"))
    assert sets == {"block_types": ["mamba", "moe"], "block_widths": [8]}
    assert _parse_sets(None, None, ("shared_indexer_layers=null",)) == {
        "shared_indexer_layers": None
    }


@pytest.mark.parametrize(
    "value, words",
    [
        ("[4,,8]", "'[4,,8]' has an empty entry"),
        ("[4, 8", "opens or closes a bracket"),
        ("[8, 4]", "must list each layer once, in increasing order"),
    ],
)
def test_a_bad_list_is_one_line_naming_set_and_the_field(run, value, words):
    _, err = run("report", "deepseek-v3.2", "--set", f"shared_indexer_layers={value}", code=2)
    assert err.count("\n") == 1 and "--set shared_indexer_layers" in err and words in err, err


def test_the_errors_example_is_a_value_that_works(run):
    _, err = run("report", "deepseek-v3.2", "--set", "shared_indexer_layers=x", code=2)
    example = err.split("such as ")[1].split(")")[0]
    assert example == "[4, 8, 12]"
    _report(run, f"shared_indexer_layers={example}")


def test_a_text_field_keeps_its_commas(run):
    out, _ = run("report", "llama-3-8b", "--set", "display_name=Mine, wider", "--format", "json")
    assert json.loads(out)["model"]["display_name"] == "Mine, wider"


@pytest.mark.parametrize(
    "value, words",
    [
        ("1", "names layer 1, which has no earlier layer's top-k to reuse (list layers 2 to 78)"),
        ("[2, 100]", "names layer 100, past num_hidden_layers 78 (1-based) (list layers 2 to 78)"),
        ("[4, 4]", "must list each layer once"),
    ],
)
def test_shared_indexer_layers_are_checked_against_the_model(run, value, words):
    _, err = run("report", "glm-5.1", "--set", f"shared_indexer_layers={value}", code=2)
    assert err.count("\n") == 1 and "--set shared_indexer_layers" in err and words in err, err


@pytest.mark.parametrize("layers", [[1], [100], [1, 2]])
def test_with_changes_checks_shared_indexer_layers_too(layers):
    glm = mlacalc.load_model("glm-5.1")
    with pytest.raises(mlacalc.ConfigError) as info:
        glm.with_changes(shared_indexer_layers=layers)
    assert info.value.field == "shared_indexer_layers"
    assert glm.with_changes(shared_indexer_layers=[2, 78]).shared_indexer_layers == (2, 78)


@pytest.mark.parametrize("model", ["deepseek-v4-pro", "llama-3-8b"])
def test_shared_indexer_layers_only_on_a_dsa_model(run, model):
    _, err = run("report", model, "--set", "shared_indexer_layers=2", code=2)
    assert err.count("\n") == 1 and "is read only for a DSA model" in err, err


def test_a_list_change_is_shown_and_named_by_its_values():
    glm = mlacalc.load_model("glm-5.1")
    a = glm.with_changes(shared_indexer_layers=[2, 4, 6])
    b = glm.with_changes(shared_indexer_layers=[2, 4, 8])
    assert a.label == "GLM-5.1 with shared_indexer_layers=[2, 4, 6]"
    assert a.name == "glm-5.1-shared-indexer-layers-2-4-6" and a.name != b.name
    assert glm.with_changes(shared_indexer_layers=[]).label.endswith("=[]")
    long_a = glm.with_changes(shared_indexer_layers=list(range(2, 40)))
    long_b = glm.with_changes(shared_indexer_layers=list(range(2, 41)))
    assert long_a.name != long_b.name and len(long_a.name) <= 200


@pytest.mark.parametrize(
    "value, words", [("a,b", "'a' is not an integer"), ("[2, 0]", "0 is not a layer number")]
)
def test_a_bad_entry_is_named(run, value, words):
    _, err = run("report", "glm-5.1", "--set", f"shared_indexer_layers={value}", code=2)
    assert err.count("\n") == 1 and words in err and "tuple" not in err, err
