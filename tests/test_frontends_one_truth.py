"""One truth per label in the command line: a context past max_position_embeddings is one
rule, tables never cut a name, --insight's words agree with the table's bound column."""

from __future__ import annotations

import json

import pytest

import mlacalc


def test_plan_past_max_position_embeddings_is_one_rule(run):
    """Was: 'largest batch at 131,072 tokens' counted as if the model were trained that far
    beside 'longest context at batch 8: 8,192'. Past the limit, the longest context is memory's
    figure too, and the warning says it once."""
    out, _ = run("plan", "llama-3-8b", "-H", "H200", "--gpus", "1", "--seq-len", "128k", "-b", "1")
    p = mlacalc.plan("llama-3-8b", "H200", 1, seq_len=131072, batch=1)
    assert p.max_batch >= 1 and p.max_context_memory >= 131072  # consistent with the batch
    assert p.longest_context_text().startswith(f"{p.max_context_memory:,} tokens (memory's")
    text = " ".join(out.split())
    assert f"{p.max_context_memory:,} tokens (memory's" in text and "counted past" in text
    assert text.count("exceeds the model's max_position_embeddings") == 1
    within = mlacalc.plan("llama-3-8b", "H200", 1, seq_len=4096, batch=1)
    assert within.longest_context_text().startswith("8,192 tokens (the model's")


@pytest.mark.parametrize("columns", ["60", "100"])
def test_cli_tables_never_cut_a_model_name(run, monkeypatch, columns):
    """Was: ``kimi-linear-48b-a3`` / ``b`` in a narrow terminal."""
    monkeypatch.setenv("COLUMNS", columns)
    out, _ = run("list")
    assert any("│ kimi-linear-48b-a3b " in line for line in out.splitlines())
    out, _ = run("compare", "kimi-linear-48b-a3b", "qwen3-next-80b-a3b")
    assert any("│ Kimi-Linear-48B-A3B " in line for line in out.splitlines())


def test_insight_words_agree_with_the_bound_column(run):
    """Was: 'compute-bound from S = never ... compute-bound only at S <= 4,096'. The kernel
    model's row applies the table's rule, and its note names the label the table shows."""
    pytest.importorskip("sympy")
    for hw, batch in (("H100-SXM", "1"), ("H200", "64")):
        args = ("roofline", "deepseek-v3", "-H", hw, "-b", batch, "--insight")
        doc = json.loads(run(*args, "--format", "json")[0])
        core = next(o for o in doc["predictions"][0]["ops"] if o["stage"] == "core")
        row = next(i for i in doc["insights"] if i["name"].startswith("kernel model"))
        assert f"at S = 32,768: {core['bound']} (" in row["note"]
        if row["value"] is None:
            assert "compute-bound at" not in row["note"] or "memory-bound at S" in row["note"]
        else:
            assert core["bound"] == ("compute" if row["value"] <= 32768 else "memory")
