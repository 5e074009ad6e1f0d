"""A plan with no engine named times the default engine's (TensorRT-LLM's) kernels without its
scheduler defaults; naming it applies them. Both said "engine trtllm" while a model-architect
trial's design got max_batch 1,328 at 16-token pages by default and 1,312 at TensorRT-LLM's 32
with --engine trtllm: the default's engine line now says so, and what naming it would set."""

from __future__ import annotations

import json
from pathlib import Path

import mlacalc
from mlacalc.cli import main

DESIGN = str(Path(__file__).parent / "data" / "trial5" / "design.json")
ARGS = dict(dp_attention=True, ep=8, isl=2000, osl=500, concurrency=256)
FLAGS = ["--gpus", "8", "--dp-attention", "--ep", "8", "--isl", "2000", "--osl", "500",
         "--concurrency", "256"]  # fmt: skip
SAID = "the default engine, its kernels timed but not its scheduler defaults"


def test_the_default_engine_says_its_defaults_are_not_applied():
    p = mlacalc.plan(DESIGN, "H100", 8, **ARGS)
    named = mlacalc.plan(DESIGN, "H100", 8, engine="trtllm", **ARGS)
    # the figures themselves are as they were: the note explains the difference
    assert (p.max_batch, named.max_batch) == (1328, 1312)
    assert p.engine == named.engine == "trtllm"
    note = p.default_engine_note
    assert note.startswith(SAID) and "--engine trtllm" in note
    assert "max_running 2,048" in note and "page_size 32 (here 16)" in note
    assert p.to_dict()["default_engine_note"] == note
    assert named.default_engine_note == ""
    # another engine's defaults taken: not the default's case
    assert (
        mlacalc.plan(DESIGN, "H100", 8, engine_defaults="sglang", **ARGS).default_engine_note == ""
    )
    # an option given is not listed as one the engine would set
    given = mlacalc.plan(DESIGN, "H100", 8, max_running=64, page_size=32, **ARGS)
    assert "max_running" not in given.default_engine_note
    assert "page_size" not in given.default_engine_note


def test_the_cli_engine_line_and_json_say_it(capsys):
    assert main(["plan", DESIGN, "-H", "H100", *FLAGS]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert f"engine trtllm, {SAID}" in out
    assert main(["plan", DESIGN, "-H", "H100", *FLAGS, "--engine", "trtllm"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert SAID not in out and "(engine trtllm;" in out
    assert main(["plan", DESIGN, "-H", "H100", *FLAGS, "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["default_engine_note"].startswith(SAID)


SEARCH = ["search", "llama-3.1-8b", "-H", "H100-SXM", "--gpus", "1", "--isl", "1000",
          "--osl", "200"]  # fmt: skip


def test_search_says_it_in_plans_words():
    """search had plan's ambiguity: no engine named, 'engine trtllm' said, its scheduler
    defaults not applied (the page 16, TensorRT-LLM's 32)."""
    r = mlacalc.search("llama-3.1-8b", "H100-SXM", 1, isl=1000, osl=200)
    p = mlacalc.plan("llama-3.1-8b", "H100-SXM", 1, isl=1000, osl=200)
    assert r.default_engine_note == p.default_engine_note  # one helper, one sentence
    assert (
        r.default_engine_note.startswith(SAID) and "page_size 32 (here 16)" in r.default_engine_note
    )
    assert r.to_dict()["default_engine_note"] == r.default_engine_note
    named = mlacalc.search("llama-3.1-8b", "H100-SXM", 1, isl=1000, osl=200, engine="trtllm")
    assert named.default_engine_note == "" and named.page_size == 32


def test_the_search_cli_says_it(capsys):
    assert main(SEARCH) == 0
    assert f"engine trtllm, {SAID}" in " ".join(capsys.readouterr().out.split())
    assert main([*SEARCH, "--engine", "trtllm"]) == 0
    assert SAID not in " ".join(capsys.readouterr().out.split())
