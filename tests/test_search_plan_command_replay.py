"""The library's ``SearchResult.plan_command`` runs through the CLI and gives the best point's
figures for a model given as a path and for a shipped model's changes; a config no command
names has none."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

import mlacalc
from mlacalc.models.loading import load_model

ASK = {"isl": 2000, "osl": 500, "modes": ("aggregated",), "kv_dtypes": ("fp8",)}
SHIPPED = Path(mlacalc.__file__).parent / "data" / "models" / "llama-3.1-8b.yaml"


def _replays(run, result):
    words = shlex.split(result.plan_command)[2:]  # past "mlacalc plan"
    planned = json.loads(run("plan", *words, "--format", "json")[0])
    for key in ("ttft_s", "tpot_s"):
        assert planned[key] == pytest.approx(result.best[key], rel=1e-6), key


def test_a_changed_shipped_model_replays_as_its_base_and_set(run):
    changed = load_model("llama-3.1-8b").with_changes(num_key_value_heads=4)
    result = mlacalc.search(changed, "H100-SXM", 1, **ASK)
    assert result.plan_command.startswith("mlacalc plan llama-3.1-8b ")
    assert result.plan_command.endswith(" --set num_key_value_heads=4")
    _replays(run, result)


def test_a_path_stays_the_path(run):
    result = mlacalc.search(str(SHIPPED), "H100-SXM", 1, **ASK)
    assert shlex.split(result.plan_command)[2] == str(SHIPPED)
    _replays(run, result)


def test_a_config_read_from_a_file_replays_as_the_file(run):
    """A ModelConfig the caller loaded from a file (its plan command was None) is replayed by
    the file's path; changed after loading, it names no file (its origin is the change)."""
    path = Path(__file__).parent / "data" / "hf-configs-2" / "XiaomiMiMo--MiMo-7B-Base.config.json"
    loaded = load_model(str(path))
    result = mlacalc.search(loaded, "H100-SXM", 1, **ASK)
    assert shlex.split(result.plan_command)[2] == str(path)
    _replays(run, result)
    changed = loaded.with_changes(num_key_value_heads=4)
    assert mlacalc.search(changed, "H100-SXM", 1, **ASK).plan_command is None


def test_a_config_no_command_names_has_no_plan_command():
    built = load_model("llama-3.1-8b").with_changes(num_key_value_heads=4, name="my-llama")
    built = built.with_changes(source=("built in a notebook",))
    result = mlacalc.search(built, "H100-SXM", 1, **ASK)
    assert result.best is not None and result.plan_command is None
