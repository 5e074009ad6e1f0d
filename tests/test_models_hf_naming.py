"""A config.json is named one way on every route: load_model (and so plan and search) and
import-hf call the same naming (models.hf._translate._name). After 5d5e645 import-hf named a
folder that says nothing of its model by model_type and size (llama-71b) while load_model and
plan kept the folder's name (a snapshot hash, "main", "12"): the two disagreed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import mlacalc

LLAMA = Path("tests/data/hf-configs/llama-3.3-70b-instruct.config.json").read_text()
HASH = "0123456789abcdef0123456789abcdef01234567"
CASES = {  # folder, extra config.json fields -> the name every route gives
    "snapshot hash": (HASH, {}, "llama"),
    "generic folder": ("main", {}, "llama"),
    "short folder": ("12", {}, "llama"),
    "named folder": ("Llama-3.3-70B-Instruct", {}, "llama-3.3-70b-instruct"),
    "repository id": (HASH, {"_name_or_path": "meta-llama/Llama-3.3-70B-Instruct"},
                      "llama-3.3-70b-instruct"),
    "bare alias": ("main", {"_name_or_path": "llama_local"}, "llama-local"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(CASES))
def test_load_model_plan_and_import_hf_name_a_config_alike(case, run, tmp_path):
    folder, extra, name = CASES[case]
    path = tmp_path / folder / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps({**json.loads(LLAMA), **extra}))
    loaded = mlacalc.load_model(path).name
    planned = mlacalc.plan(str(path), "H200", 8, isl=100, osl=10, batch=1).to_dict()["model"]
    out, err = run("import-hf", str(path))
    imported = next(x for x in out.splitlines() if x.startswith("name: ")).removeprefix("name: ")
    assert loaded == planned == imported == name, case
    assert f"named {name!r} after " in err


def test_a_folder_that_says_nothing_is_said():
    """The note says where the name came from and why not the folder."""
    from mlacalc.models.hf._translate import _name

    name, how = _name({}, f"/x/{HASH}/config.json", "llama")
    assert name == "llama" and f"its folder {HASH!r} says nothing of the model" in how
    name, how = _name({}, "/x/Llama-3.3-70B-Instruct/config.json", "llama")
    assert name == "llama-3.3-70b-instruct" and "its folder" in how
