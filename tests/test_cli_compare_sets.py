"""``compare``'s ``--set N:FIELD=VALUE`` changes only the N-th model given: a design set
against itself (``compare deepseek-v3 deepseek-v3 --set 2:kv_lora_rank=256``) had no route,
every ``--set`` changed every model. Bad positions are one line naming ``--set``."""

from __future__ import annotations

import json

import pytest

import mlacalc


def _rows(run, *args):
    out, _ = run("compare", *args, "--format", "json")
    return json.loads(out)


def test_a_positional_set_changes_only_that_model(run):
    rows = _rows(run, "deepseek-v3", "deepseek-v3", "--set", "2:kv_lora_rank=256")
    first, second = rows
    assert first["kv_lora_rank"] == 512 and second["kv_lora_rank"] == 256
    edited = mlacalc.load_model("deepseek-v3").with_changes(kv_lora_rank=256)
    assert second["kv_bytes_per_token"] == mlacalc.kv_cache_bytes(edited, 1, 1)
    assert first["kv_bytes_per_token"] == mlacalc.kv_cache_bytes("deepseek-v3", 1, 1)
    assert "kv_lora_rank=256" in second["display_name"] and first["display_name"] == "DeepSeek-V3"


def test_a_plain_set_still_changes_every_model_and_mixes_with_positional_ones(run):
    rows = _rows(run, "llama-3-8b", "llama-3-70b", "--set", "num_hidden_layers=4",
                 "--set", "1:num_key_value_heads=4")  # fmt: skip
    assert [r["num_key_value_heads"] for r in rows] == [4, 8]
    assert [r["display_name"] for r in rows] == [
        "Llama-3-8B with num_hidden_layers=4, num_key_value_heads=4",
        "Llama-3-70B with num_hidden_layers=4",
    ]


@pytest.mark.parametrize(
    ("bad", "said"),
    [
        ("3:kv_lora_rank=256", "names model '3'; write N:FIELD=VALUE with N from 1 to 2"),
        ("0:kv_lora_rank=256", "names model '0'; write N:FIELD=VALUE with N from 1 to 2"),
        ("x:kv_lora_rank=256", "names model 'x'; write N:FIELD=VALUE with N from 1 to 2"),
        ("\u00b2:kv_lora_rank=256", "write N:FIELD=VALUE with N from 1 to 2"),  # a superscript 2
        ("\u0662:kv_lora_rank=256", "write N:FIELD=VALUE with N from 1 to 2"),  # an Arabic-Indic 2
        ("2:=256", "names no field after '2:'; write N:FIELD=VALUE"),
        ("2:kv_lora_rank=0", "--set kv_lora_rank=0 (model 2, deepseek-v3): must be a positive"),
        ("2:kv_lora_rnak=256", "(model 2, deepseek-v3)"),
    ],
)
def test_a_bad_positional_set_is_one_line_naming_it(run, bad, said):
    _, err = run("compare", "deepseek-v3", "deepseek-v3", "--set", bad, code=2)
    flat = " ".join(err.split())
    assert "--set" in flat and said in flat and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_a_field_set_both_ways_for_one_model_is_refused(run):
    _, err = run("compare", "deepseek-v3", "deepseek-v3", "--set", "kv_lora_rank=128",
                 "--set", "2:kv_lora_rank=256", code=2)  # fmt: skip
    assert "kv_lora_rank is set twice for model 2; give it once" in " ".join(err.split())
