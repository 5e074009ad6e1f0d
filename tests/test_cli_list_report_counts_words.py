"""What `list`'s active parameters and `report`'s attention FLOPs count, said where the figures
are (a trial: Qwen3.5-122B-A10B's 9.01 G active against its name's 10B, with no word that the
input embedding is left out; a prompt's attention FLOPs counted every (query, key) pair, twice a
causal kernel's core, with no word of it)."""

from __future__ import annotations

import re


def test_list_says_active_params_leave_out_the_input_embedding(run):
    table = run("list", "--format", "markdown")[0]
    assert "active params (no input embedding)" in table
    assert "without the input embedding and position tables" in " ".join(table.split())


def test_report_attention_table_says_which_pairs_it_counts(run):
    def title(*flags: str) -> str:
        out = run("report", "llama-3-8b", "-s", "4096", "--format", "markdown", *flags)[0]
        return re.search(r"### (Attention FLOPs.*)", out)[1]

    assert "a prompt's every (query, key) pair, not causal" in title()
    assert "a prompt's causal (query, key) pairs only" in title("--causal")
    assert "pair" not in title("--phase", "decode")  # decode: every key either way


def test_report_refuses_a_storage_format_and_names_where_it_is_taken(run):
    """`report --weight-dtype nvfp4`: report sizes plain dtypes only, so its error names the
    commands that take a format per component (a trial was sent to --expert-dtype, which
    report does not have)."""
    err = run("report", "deepseek-v3", "--weight-dtype", "nvfp4", code=2)[1]
    assert "nvfp4 is a storage format with scales" in err
    assert "plan takes --expert-dtype nvfp4" in err and "component_dtypes=" in err
    # search has no --expert-dtype: its words are --component-choice's
    assert "search --component-choice experts=nvfp4,attention=nvfp4" in err
    assert len(err.strip().splitlines()) <= 2  # the usage line and the one error line
