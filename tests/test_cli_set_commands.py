"""``--set`` on roofline, search and convert (report, compare, plan and train had it): the same
parser and one-line errors naming --set and the field; search's plan command carries it."""

import json

import pytest


def test_roofline_takes_set(run):
    out, _ = run("roofline", "deepseek-v3", "-H", "H200", "--set", "kv_lora_rank=256",
                 "--format", "json")  # fmt: skip
    assert json.loads(out)["predictions"][0]["model"] == "deepseek-v3-kv-lora-rank-256"
    _, err = run("roofline", "deepseek-v3", "-H", "H200", "--set", "kv_lora_rank=0", code=2)
    assert err.count("\n") == 1 and "Invalid value for --set kv_lora_rank=0" in err, err


def test_convert_takes_set(run):
    out, _ = run("convert", "llama-3-8b", "--set", "num_key_value_heads=4", "--kv-lora-rank",
                 256, "--format", "json")  # fmt: skip
    assert json.loads(out)["conversion"]["source"] == "llama-3-8b-num-key-value-heads-4"
    _, err = run("convert", "llama-3-8b", "--set", "num_key_value_heads=3", code=2)
    assert err.count("\n") == 1 and "Invalid value for --set num_key_value_heads=3" in err, err


def test_search_takes_set_and_its_plan_command_carries_it(run):
    out, _ = run("search", "qwen3-8b", "-H", "H100", "--gpus", 1, "--isl", 1000, "--osl", 200,
                 "--tpot", "100ms", "--set", "num_key_value_heads=4",
                 "--format", "json")  # fmt: skip
    doc = json.loads(out)
    assert doc["plan_command"].startswith("mlacalc plan qwen3-8b ")
    assert " --set num_key_value_heads=4" in doc["plan_command"]


@pytest.mark.parametrize("command", ["plan", "search"])
def test_launch_beside_set_is_refused(run, command):
    """plan --launch with --set printed the engine's lines for the unchanged checkpoint."""
    _, err = run(command, "qwen3-8b", "-H", "H100", "--gpus", 1, "--isl", 1000, "--osl", 200,
                 "--set", "num_key_value_heads=4", "--launch", "sglang", code=2)  # fmt: skip
    assert err.count("\n") == 1 and "Invalid value for --launch" in err, err
    assert "drop --launch or --set" in err, err


def test_a_model_position_outside_compare_says_it_is_compares_form(run):
    """review12 7: plan's ``--set 1:kv_lora_rank=256`` answered "not a field (did you mean
    'kv_lora_rank'?)"; N:FIELD is compare's (one model of several), said with the form here."""
    plan = ("plan", "deepseek-v3", "-H", "H200", "-g", 8, "--isl", 1024, "--osl", 1024)
    for args in (plan, ("report", "deepseek-v3"), ("roofline", "deepseek-v3", "-H", "H200")):
        _, err = run(*args, "--set", "1:kv_lora_rank=256", code=2)
        assert "N:FIELD is compare's form (one model of several)" in err
        assert "here write --set kv_lora_rank=256" in err and "did you mean" not in err
    out, _ = run("compare", "deepseek-v3", "deepseek-v3", "--set", "2:kv_lora_rank=256")
    assert out
