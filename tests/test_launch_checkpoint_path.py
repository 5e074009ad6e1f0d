"""--launch's --model-path when none is given: the Hugging Face repository a shipped model's
sources name, a config file's _name_or_path or folder, else a placeholder said in words (it
printed the catalogue name, `--model-path deepseek-v3.2`, which no engine can load). Each
test failed before."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mlacalc.models.loading import load_model
from mlacalc.serving.launch import checkpoint_path

QWEN = Path(__file__).parent / "data" / "hf-configs" / "qwen3-8b.config.json"


@pytest.mark.parametrize(
    ("name", "repo"),
    [
        ("deepseek-v3.2", "deepseek-ai/DeepSeek-V3.2"),  # an org--repo_config.json copy
        ("llama-3.1-8b", "meta-llama/Llama-3.1-8B"),  # a line opening on org/repo config.json
        ("llama-2-70b", "meta-llama/Llama-2-70b-hf"),  # the _name_or_path a line quotes
        ("mixtral-8x7b", "mistralai/Mixtral-8x7B-v0.1"),  # the checkpoint a line names
    ],
)
def test_a_shipped_model_launches_its_repository(name, repo):
    assert checkpoint_path(load_model(name)) == (repo, "")


def test_a_model_without_one_gets_a_placeholder_said_in_words(run):
    path, said = checkpoint_path(load_model("llama-3-70b"))
    assert path == "<checkpoint of llama-3-70b>"
    assert "replace it, or give --model-path" in said
    out, _ = run("plan", "llama-3-70b", "-H", "H200", "--gpus", 8, "--launch", "vllm")
    assert "vllm serve '<checkpoint of llama-3-70b>'" in out
    assert f"# note: {said}" in out


def test_the_cli_prints_the_repository(run):
    out, _ = run("plan", "deepseek-v3.2", "-H", "B200", "--gpus", 8, "--launch", "sglang")
    assert "--model-path deepseek-ai/DeepSeek-V3.2 " in out
    assert "--model-path deepseek-v3.2 " not in out
    out, _ = run("plan", "deepseek-v3.2", "-H", "B200", "--gpus", 8, "--launch", "vllm",
                 "--model-path", "/models/v32")  # fmt: skip
    assert "vllm serve /models/v32 " in out


@pytest.mark.skipif(not QWEN.is_file(), reason="shared reference configs absent")
def test_a_config_file_names_its_checkpoint(tmp_path):
    data = json.loads(QWEN.read_text())
    folder = tmp_path / "Qwen3-8B"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(data))
    assert checkpoint_path(load_model(str(folder / "config.json"))) == (str(folder), "")
    (folder / "config.json").write_text(json.dumps({**data, "_name_or_path": "Qwen/Qwen3-8B"}))
    assert checkpoint_path(load_model(str(folder / "config.json"))) == ("Qwen/Qwen3-8B", "")
    named = tmp_path / "Qwen--Qwen3-8B.config.json"
    named.write_text(json.dumps(data))
    path, said = checkpoint_path(load_model(str(named)))
    assert path == "Qwen/Qwen3-8B" and "read from the config's file name" in said


def test_the_library_search_launches_the_repository():
    from mlacalc.serving.search import search

    r = search("qwen3-8b", "H100", 1, isl=1000, osl=200)
    ((_, cmd),) = r.launch_commands("vllm")
    assert cmd.startswith("vllm serve Qwen/Qwen3-8B ")
