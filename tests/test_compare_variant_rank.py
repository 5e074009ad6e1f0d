"""compare --as-variants --kv-lora-rank: the MLA equivalent at a rank of one's choosing
(trial10: fixed at d_c = 4 d_h, no option). Each test failed before."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from mlacalc.cost.engine import as_model
from mlacalc.report import variant_equivalents
from mlacalc.words.errors import InvalidArgumentError


def _compare(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mlacalc", "compare", *args], capture_output=True, text=True
    )


def test_the_mla_equivalent_takes_the_rank_given():
    (mla,) = [e for e in variant_equivalents(as_model("llama-3-70b"), None, 1024)[0] if e.is_mla]
    assert mla.kv_lora_rank == 1024
    (own,) = [e for e in variant_equivalents(as_model("llama-3-70b"))[0] if e.is_mla]
    assert own.kv_lora_rank == 4 * 128


def test_an_mla_model_shows_itself_and_its_design_at_the_rank():
    run = _compare("deepseek-v3", "--as-variants", "--kv-lora-rank", "256", "--format", "json")
    assert run.returncode == 0, run.stderr
    ranks = [r["kv_lora_rank"] for r in json.loads(run.stdout) if r["kv_lora_rank"]]
    assert ranks == [512, 256]


def test_bad_ranks_and_the_flag_alone_are_one_line():
    with pytest.raises(InvalidArgumentError):
        variant_equivalents(as_model("llama-3-70b"), None, 0)
    for args in (("--as-variants", "--kv-lora-rank", "0"), ("--kv-lora-rank", "64")):
        run = _compare("llama-3-70b", *args)
        assert run.returncode == 2 and "--kv-lora-rank" in run.stderr
        assert len(run.stderr.strip().splitlines()) == 1
