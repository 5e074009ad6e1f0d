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
LLAMA_ID = "meta-llama/Llama-3.3-70B-Instruct"
NAMED = "llama-3.3-70b-instruct"
CASES = {  # folder(s) under a path that says nothing, extra config.json fields -> the name
    "snapshot hash": (HASH, {}, "llama"),
    "generic folder": ("main", {}, "llama"),
    "short folder": ("12", {}, "llama"),
    "named folder": ("Llama-3.3-70B-Instruct", {}, NAMED),
    "repository id": (HASH, {"_name_or_path": LLAMA_ID}, NAMED),
    "bare alias": ("main", {"_name_or_path": "llama_local"}, "llama-local"),
    # review10 F5: each of these kept its folder's name (ckpt, checkpoint-1000, 1.5b, ...)
    **{f"folder {f}": (f, {}, "llama") for f in (
        "ckpt", "weights", "final", "latest", "output", "checkpoint-1000", "global_step500",
        "global-step500", "step_20", "snapshots", "hf_model", "hf-model", "1.5b", "70B", "8x7b",
    )},
    # ... and the folder above names the model where theirs does not
    "a step under a named run": ("Llama-3.3-70B-Instruct/checkpoint-1000", {}, NAMED),
    "two folders under it": ("Llama-3.3-70B-Instruct/checkpoints/global_step500", {}, NAMED),
    "a size under a named folder": ("my-llama-finetune/1.5b", {}, "my-llama-finetune"),
    "the Hub cache": (f"models--meta-llama--Llama-3.3-70B-Instruct/snapshots/{HASH}", {}, NAMED),
    "a path to a step": ("ckpt", {"_name_or_path": "/data/Llama-3.3-70B-Instruct/checkpoint-9"},
                         NAMED),
    "a path that says nothing": ("final", {"_name_or_path": "/data/ckpt/checkpoint-9"}, "llama"),
    # a folder above one that says nothing names the model only where it names a model (its
    # family or a size): a user's, a team's or a run's folder does not (alice/ckpt was alice)
    "a user's folder": ("alice/ckpt", {}, "llama"),
    "a user's folder two up": ("alice/ckpt/checkpoint-1000", {}, "llama"),
    "a team's run": ("nlp-team/run-a/final", {}, "llama"),
    "a user's path": ("final", {"_name_or_path": "/home/alice/ckpt"}, "llama"),
    "a user's folder, a repository id": ("alice/ckpt", {"_name_or_path": LLAMA_ID}, NAMED),
    "a user's folder, a named folder": ("alice/Llama-3.3-70B-Instruct", {}, NAMED),
    "a user's folder, a size": ("alice/finetune-70b/ckpt", {}, "finetune-70b"),
    "a user's folder, the Hub cache": (f"alice/models--meta-llama--Llama-3.3-70B-Instruct/"
                                       f"snapshots/{HASH}", {}, NAMED),
    "the family under a user": ("alice/my-llama/step_20", {}, "my-llama"),
    # a version's folder says nothing alone (Mistral-7B/v0.3 was named v0.3): the folder above
    # that names the model names it, with the version; a run's folders name nothing (runs)
    "a version under a named folder": ("Mistral-7B/v0.3", {}, "mistral-7b-v0.3"),
    "a dotted version alone": ("v1.2.0", {}, "llama"),
    "a version spelled out": ("Llama-3.3-70B-Instruct/version_2", {}, f"{NAMED}-version-2"),
    "a run's folders": ("runs/final/weights", {}, "llama"),
    # a version's folder joins the name once, or not at all: Mistral-7B-v0.3/v0.3 was named
    # mistral-7b-v0.3-v0.3, and Mistral-7B/v0.3/snapshots/<hash> llama (the version's folder
    # took the place of the one above it that names the model)
    "a version the named folder writes": ("Mistral-7B-v0.3/v0.3", {}, "mistral-7b-v0.3"),
    "a version over a snapshot": (f"Mistral-7B/v0.3/snapshots/{HASH}", {}, "mistral-7b-v0.3"),
    "a version over a step": ("Mistral-7B/v2/checkpoints/step_20", {}, "mistral-7b-v2"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(CASES))
def test_load_model_plan_and_import_hf_name_a_config_alike(case, run, tmp_path):
    folder, extra, name = CASES[case]
    path = tmp_path / "0" / "0" / folder / "config.json"  # "0": no name to find above it
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({**json.loads(LLAMA), **extra}))
    loaded = mlacalc.load_model(path).name
    planned = mlacalc.plan(str(path), "H200", 8, isl=100, osl=10, batch=1).to_dict()["model"]
    out, err = run("import-hf", str(path))
    imported = next(x for x in out.splitlines() if x.startswith("name: ")).removeprefix("name: ")
    assert loaded == planned == imported == name, case
    assert f"named {name!r} after " in err


def test_a_folder_names_a_model_by_its_family_or_a_size():
    from mlacalc.models.hf._translate import family_words, names_a_model

    families = family_words("qwen2_moe", ("Qwen2MoeForCausalLM",))
    assert families == ("qwen",)
    for folder in ("Qwen1.5-MoE-A2.7B", "my_qwen_run", "Mixtral-8x7B", "bob-70b", "tiny-125m"):
        assert names_a_model(folder, families), folder
    for folder in ("alice", "nlp-team", "run-a", "ckpt", "experiments", "70b", "b200"):
        assert not names_a_model(folder, families), folder


def test_a_folder_that_says_nothing_is_said():
    """The note says where the name came from and why not the folder."""
    from mlacalc.models.hf._translate import _name

    name, how = _name({}, f"/x/{HASH}/config.json", "llama")
    assert name == "llama" and f"its folder {HASH!r} says nothing of the model" in how
    name, how = _name({}, "/x/Llama-3.3-70B-Instruct/config.json", "llama")
    assert name == "llama-3.3-70b-instruct" and "its folder" in how
    name, how = _name({}, f"/x/models--meta-llama--Llama-3.3-70B-Instruct/snapshots/{HASH}/"
                         "config.json", "llama")  # fmt: skip
    assert name == NAMED
    assert "the Hub cache's folder 'models--meta-llama--Llama-3.3-70B-Instruct' above it" in how
    name, how = _name({}, "/x/run/ckpt/final/checkpoint-1000/config.json", "llama")
    assert (name, how) == ("llama", "named 'llama' after model_type 'llama' (no repository id in "
        "_name_or_path/name_or_path; its folder 'checkpoint-1000' says nothing of the model, nor "
        "the folders above it)")  # fmt: skip
