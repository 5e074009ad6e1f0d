"""convert --kv-lora-rank above the full rank of the position-free K and V: said on stderr
and in the JSON's warnings, with what it costs (trial10: 4,096 on Llama-3.1-70B, 2.03x the
cache, said only in a note under the last table). Each test failed before."""

from __future__ import annotations

import json
import subprocess
import sys

from reference_data import HF_CONFIGS

from mlacalc.cli.convert_cmd import rank_warning
from mlacalc.cost.convert_cost import conversion_cost
from mlacalc.models.convert import convert

LLAMA = str(HF_CONFIGS / "llama-3.1-70b.config.json")


def _convert(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mlacalc", "convert", LLAMA, *args], capture_output=True, text=True
    )


def test_a_rank_above_the_full_rank_is_warned_with_its_cost():
    run = _convert("--kv-lora-rank", "4096")
    assert run.returncode == 0
    (line,) = [x for x in run.stderr.splitlines() if "--kv-lora-rank 4,096" in x]
    assert "carry nothing" in line and "2.03x the source's cache" in line
    assert "--kv-lora-rank 1,984 or less" in line
    doc = json.loads(_convert("--kv-lora-rank", "4096", "--format", "json").stdout)
    assert any("carry nothing" in w for w in doc["warnings"])


def test_the_equivalence_rank_and_below_say_nothing():
    for rank in (None, 1984, 512):
        c = convert(LLAMA, kv_lora_rank=rank)
        assert rank_warning(c, conversion_cost(c, "decode", 4096, 1)) == ""
    assert "warning: --kv-lora-rank" not in _convert("--kv-lora-rank", "1984").stderr


def test_above_the_full_rank_below_the_equivalence_rank_is_said_too():
    """MHA2MLA on Llama-3-70B: full rank 1,536 (8 KV heads x (128 - 64) + 8 x 128), the
    equivalence rank 1,984 (a rank between them on an MHA model is past the hidden size, and
    refused)."""
    c = convert("llama-3-70b", method="mha2mla", kv_lora_rank=1800)
    said = rank_warning(c, conversion_cost(c, "decode", 4096, 1))
    assert "above the full rank 1,536" in said and "equivalence" not in said
