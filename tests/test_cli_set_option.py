"""``--set FIELD=VALUE`` on report, compare and plan: a new design's fields without a YAML file
(no flag set kv_lora_rank, qk_rope_head_dim or the KV heads before), through with_changes,
with its validation and one-line errors naming --set and the field."""

import json

import pytest

import mlacalc

V3 = mlacalc.load_model("deepseek-v3")


def test_report_with_set_is_the_changed_model(run):
    out, _ = run("report", "deepseek-v3", "--set", "kv_lora_rank=256", "--set",
                 "qk_rope_head_dim=32", "--seq-len", "1k", "--format", "json")  # fmt: skip
    doc = json.loads(out)
    changed = V3.with_changes(kv_lora_rank=256, qk_rope_head_dim=32)
    assert doc["model"]["name"] == changed.name and doc["model"]["kv_lora_rank"] == 256
    absorbed = next(k for k in doc["kv_cache"] if k["impl"] == "absorbed")
    assert (
        absorbed["total_bytes"]
        == mlacalc.kv_cache_bytes(changed, 1024)
        != (mlacalc.kv_cache_bytes(V3, 1024))
    )


def test_compare_and_plan_take_set(run):
    out, _ = run("compare", "llama-3-70b", "--as-variants", "--set", "num_key_value_heads=4",
                 "--format", "json")  # fmt: skip
    assert "num_key_value_heads=4" in out
    changed = mlacalc.load_model("llama-3-70b").with_changes(num_key_value_heads=2)
    out, _ = run("plan", "llama-3-70b", "-H", "H200", "--gpus", 4, "--set",
                 "num_key_value_heads=2", "--format", "json")  # fmt: skip
    plan = mlacalc.plan(changed, "H200", 4)
    assert json.loads(out)["max_batch"] == plan.max_batch


@pytest.mark.parametrize(
    "value, words",
    [
        ("qk_rope_head_dim=33", "--set qk_rope_head_dim=33: RoPE rotates pairs of dimensions"),
        ("kv_lora=33", "did you mean 'kv_lora_rank'?"),
        ("kv_lora_rank", "'kv_lora_rank' is not FIELD=VALUE"),
        ("kv_lora_rank=2.5", "kv_lora_rank"),
    ],
)
def test_a_bad_set_is_one_line_naming_the_option_and_field(run, value, words):
    _, err = run("report", "deepseek-v3", "--set", value, code=2)
    assert err.count("\n") == 1 and "Invalid value for --set" in err and words in err, err


def test_set_twice_and_a_wide_rank_are_said(run):
    _, err = run("report", "deepseek-v3", "--set", "kv_lora_rank=256", "--set",
                 "kv_lora_rank=512", code=2)  # fmt: skip
    assert "kv_lora_rank is set twice" in err
    _, err = run("report", "deepseek-v3", "--set", "kv_lora_rank=8192", "--seq-len", "1k")
    assert "mlacalc: warning: DeepSeek-V3 with kv_lora_rank=8192: kv_lora_rank 8,192" in err


@pytest.mark.parametrize(
    "sets, words",
    [
        # one field: the option as given, then what is wrong and the fix
        (
            ["num_key_value_heads=0"],
            "--set num_key_value_heads=0: must be a positive integer, "
            "got 0 (dimensions must be at least 1)",
        ),
        (["kv_lora_rank=abc"], "--set kv_lora_rank=abc: must be a positive integer or null"),
        (["kv_lora_rank=null", "q_lora_rank=true"], "--set q_lora_rank=true: "),
        # two: each in its own words
        (
            ["hidden_size=-1", "num_key_value_heads=0"],
            "--set hidden_size=-1: must be a positive integer, got -1 (dimensions must be at least "
            "1); --set num_key_value_heads=0: must be",
        ),
        # a field the change made wrong, not one given: named with the option that did it
        (
            ["num_attention_heads=7"],
            "--set num_attention_heads=7: field 'num_key_value_heads' "
            "as the change leaves it: 8 KV heads exceed num_attention_heads (7)",
        ),
    ],
)
def test_a_refused_set_is_said_in_the_users_words(run, sets, words):
    """trial: 'Invalid value for --set: with_changes(num_key_value_heads=0): field ...', the
    library's call, not what was typed."""
    args = [a for s in sets for a in ("--set", s)]
    _, err = run("report", "llama-3-70b", *args, code=2)
    assert err.count("\n") == 1 and "with_changes" not in err, err
    assert f"Invalid value for {words}" in err or words in err, err
    assert err.startswith("mlacalc: error: Invalid value for --set "), err


@pytest.mark.parametrize(
    "value, option, fix",
    [
        ("hidden_size=1e3", "--set hidden_size=1e3:", "such as --set hidden_size=128"),
        (
            "num_key_value_heads=2.5",
            "--set num_key_value_heads=2.5:",
            "--set num_key_value_heads=128",
        ),
    ],
)
def test_a_set_error_echoes_the_value_typed_and_advises_set(run, value, option, fix):
    """'--set hidden_size=1e3' was echoed '--set hidden_size=1000.0' and the fix read as YAML,
    'such as num_key_value_heads: 128'."""
    _, err = run("report", "llama-3-8b", "--set", value, code=2)
    assert f"Invalid value for {option}" in err and fix in err, err
    assert ": 128" not in err and "1000.0:" not in err, err
