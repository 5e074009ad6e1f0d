"""A DSA index_topk at or above the keys (trial10): the walking kernel's time doubles from
32,768 to 65,536 slots at one counted FLOPs and bytes, and the JSON's roofline_s was of other
figures than its flops and bytes. The text says the walk past the keys; the JSON carries the
run figures its times are of and says so. Each test failed before."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

DSA = "deepseek-v3.2"


def _roofline(topk: int, *extra: str) -> str:
    run = subprocess.run(
        [sys.executable, "-m", "mlacalc", "roofline", DSA, "-H", "H100-SXM", "--seq-len", "32k",
         "--batch", "64", "--set", f"index_topk={topk}", *extra],
        capture_output=True, text=True,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    return run.stdout


@pytest.fixture(scope="module")
def docs() -> dict[int, dict]:
    return {
        k: json.loads(_roofline(k, "--format", "json"))["predictions"][0] for k in (32768, 65536)
    }


def test_the_walk_past_the_keys_is_said():
    text = " ".join(_roofline(65536).split())
    assert "every one of the 65,536 index_topk slots a query, past the 32,768 keys" in text
    assert "as the engine runs them" in text
    assert "index_topk slots a query" not in " ".join(_roofline(2048).split())


def test_the_json_carries_the_run_figures_its_times_are_of(docs):
    low, high = docs[32768], docs[65536]
    assert high["flops"] == low["flops"] and high["bytes"] == low["bytes"]
    assert high["run_flops"] > high["flops"] and high["run_bytes"] > high["bytes"]
    assert "run_flops" in high["figures"] and "roofline_s" in high["figures"]
    ops = high["ops"]
    counted = sum(o["run_flops"] or o["flops"] for o in ops if o["kind"] == "matmul")
    assert high["run_flops"] == counted


def test_a_model_running_each_kernel_as_counted_has_equal_figures():
    doc = json.loads(
        subprocess.run(
            [
                sys.executable,
                "-m",
                "mlacalc",
                "roofline",
                "deepseek-v3",
                "-H",
                "H100-SXM",
                "--format",
                "json",
            ],
            capture_output=True,
            text=True,
        ).stdout
    )["predictions"][0]
    assert doc["run_flops"] == doc["flops"] and doc["run_bytes"] == doc["bytes"]
