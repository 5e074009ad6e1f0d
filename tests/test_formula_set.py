"""formula --set: a formula's value at a design point without a file, the --subs model's
fields changed (trial10: formula had no --set). Each test failed before."""

from __future__ import annotations

import subprocess
import sys


def _formula(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mlacalc", "formula", *args], capture_output=True, text=True
    )


def test_set_changes_the_substituted_model():
    base = _formula("kv_cache_elements", "--variant", "mla", "--subs", "deepseek-v3")
    point = _formula(
        "kv_cache_elements", "--variant", "mla", "--subs", "deepseek-v3",
        "--set", "kv_lora_rank=256",
    )  # fmt: skip
    assert base.returncode == point.returncode == 0, point.stderr
    assert base.stdout.split()[-1] == "576" and point.stdout.split()[-1] == "320"


def test_set_without_a_model_or_with_a_bad_value_is_one_line():
    run = _formula("kv_cache_elements", "--variant", "mla", "--set", "kv_lora_rank=256")
    assert run.returncode == 2 and "--subs" in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1
    run = _formula(
        "kv_cache_elements", "--variant", "mla", "--subs", "deepseek-v3",
        "--set", "kv_lora_rank=-1",
    )  # fmt: skip
    assert run.returncode == 2 and "--set kv_lora_rank=-1" in run.stderr
