"""Count-like fields against one another: one line naming the field and the fix; a dense-layer
count that leaves a MoE model no MoE layer is said, not refused (transformers builds such a
config every layer dense, as a config cut to fewer layers than its dense ones is), where it had
silently made GLM-5.1 with first_k_dense_replace 100 a 33B dense model.

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
        "num_experts_per_tok",
        "kv_lora_rank",
        "num_key_value_heads",
    } <= fields


def _warned_mutations():
    """(file, field, value, words) cases: each leaves a declared part without a layer, valid
    as transformers builds it (a warning on load, not a refusal; the suite these cases had
    before 578add7 expected one)."""
    for name, d in SHIPPED.items():
        n = d["num_hidden_layers"]
        experts = d.get("n_routed_experts", 0) and not d.get("block_types")
        no_moe = "routed experts but no MoE layer"
        if experts and "first_k_dense_replace" in d:
            yield name, "first_k_dense_replace", n, no_moe  # every layer dense
            yield name, "first_k_dense_replace", n + 1, no_moe  # more dense layers than layers
        if experts and d.get("moe_layer_freq") == 1 and d.get("first_k_dense_replace", 0):
            yield name, "moe_layer_freq", n + 1, no_moe  # the first MoE layer past the last
        if d.get("block_types") and "moe" in d["block_types"] and d.get("n_routed_experts"):
            blocks = ["mlp" if b == "moe" else b for b in d["block_types"]]
            yield name, "block_types", blocks, no_moe
        if d.get("full_attention_interval"):
            yield name, "full_attention_interval", n + 1, "no layer is full attention"


WARNED = list(_warned_mutations())


@pytest.mark.parametrize(
    ("name", "field", "value", "words"),
    WARNED,
    ids=[f"{c[0]}-{c[1]}-{i}" for i, c in enumerate(WARNED)],
)
def test_one_mutated_layer_count_is_one_warning_naming_it(tmp_path, run, name, field, value, words):
    """Each case loads (exit status 0, as docs/cli.md has a warning) with one warning line
    on stderr naming the field and its fix, no traceback, and the report on stdout. Before:
    moe_layer_freq 62 on DeepSeek-V3 was said as 'first_k_dense_replace 3 of 61 layers ...
    lower first_k_dense_replace', and a full_attention_interval past the last layer (every
    layer sliding, chunked or linear) was not said at all."""
    data = dict(SHIPPED[name], **{field: value})
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    out, err = run("report", path, "--seq-len", 4096)
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("mlacalc: warning: "), err
    fix = "add 'moe' blocks to block_types" if field == "block_types" else f"lower {field}"
    assert words in err and f"{field} " in err and fix in err, err
    assert "Traceback" not in err and out
    _, plain = run("report", name, "--seq-len", 4096)
    assert plain == ""  # the shipped file, unmutated: nothing said


def test_the_warned_suite_covers_every_field():
    fields = {c[1] for c in WARNED}
    assert {
        "first_k_dense_replace",
        "moe_layer_freq",
        "block_types",
        "full_attention_interval",
    } <= fields


def test_glm_with_100_dense_layers_is_said_not_silently_shrunk(tmp_path, capsys):
    """The trial's typo: every layer dense, counted so (as transformers builds it), and said on
    the command line with the field to lower."""
    from mlacalc.cli import main

    data = dict(SHIPPED["glm-5.1"], first_k_dense_replace=100)
    path = tmp_path / "g.yaml"
    path.write_text(yaml.safe_dump(data))
    m = mlacalc.load_model(path)
    assert m.num_moe_layers == 0
    assert main(["report", str(path), "--seq-len", "4096"]) == 0
    err = capsys.readouterr().err
    assert "declares 256 routed experts but no MoE layer" in " ".join(err.split())
    assert main(["report", "glm-5.1", "--seq-len", "4096"]) == 0
    assert "no MoE layer" not in capsys.readouterr().err


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
