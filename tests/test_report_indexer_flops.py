"""The indexer's FLOPs apart from the attention's in report (a student read DeepSeek-V3.2's decode
core, 165.79 G, as attention: 131.00 G of it is the indexer's scores; V4's 34.53 G likewise).
``attention[].indexer_stage_flops``: of each stage, the indexer's; the rest is the attention's."""

from __future__ import annotations

import json

import mlacalc
from mlacalc.cost.engine import attention_cost
from mlacalc.report import model_report


def _row(name, seq_len=131072):
    doc = model_report(name, seq_len=seq_len, phases=["decode"])
    return next(r for r in doc["attention"] if r["default"])


def test_dsa_core_splits_into_indexer_and_attention_exactly():
    r = _row("deepseek-v3.2")
    m = mlacalc.load_model("deepseek-v3.2")
    index = r["indexer_stage_flops"]
    assert set(index) == set(r["stage_flops"])
    # the attention's own core: its scores and values over the 2,048 keys picked, every layer
    cost = attention_cost("deepseek-v3.2", "decode", 131072)
    own = 61 * sum(o.flops for o in cost.ops if o.stage == "core" and o.kind == "matmul")
    assert r["stage_flops"]["core"] - index["core"] == own == 61 * 2 * 128 * 2048 * 1088
    # the indexer's scores: 2 n_i d_i a (query, key) pair over every key, every layer
    assert index["core"] == 61 * 2 * m.index_n_heads * m.index_head_dim * 131072
    assert index["core"] + own == r["stage_flops"]["core"] == 165_792_448_512


def test_v4_csa_indexer_is_its_own_ops_and_no_key_without_an_indexer():
    r = _row("deepseek-v4-pro")
    cost = attention_cost("deepseek-v4-pro", "decode", 131072)
    csa = [(g.layers, o) for g in cost.groups for o in g.ops if o.name == "indexer_scores"]
    assert r["indexer_stage_flops"]["core"] == sum(n * o.flops for n, o in csa) > 0
    assert r["stage_flops"]["core"] == 34_527_510_528
    assert "indexer_stage_flops" not in _row("deepseek-v3")


def test_report_table_has_the_indexer_column(run):
    out = run("report", "deepseek-v3.2", "--seq-len", "128k", "--phase", "decode",
              "--format", "markdown")[0]  # fmt: skip
    assert "| indexer scores (in core) |" in out and "| 165.79 G | 14.33 G | 131.00 G |" in out
    doc = json.loads(run("report", "deepseek-v3", "--format", "json")[0])
    assert "indexer_stage_flops" not in doc["attention"][0]


def test_compare_gives_the_indexer_share(run):
    rows = json.loads(
        run("compare", "deepseek-v3.2", "deepseek-v3", "--seq-len", "128k", "--format", "json")[0]
    )
    r = _row("deepseek-v3.2")
    assert rows[0]["decode_indexer_flops"] == sum(r["indexer_stage_flops"].values()) > 0
    assert rows[0]["decode_flops"] == r["flops"]
    assert rows[1]["decode_indexer_flops"] == rows[1]["prefill_indexer_flops"] == 0
    out = run("compare", "deepseek-v3.2", "--seq-len", "128k", "--format", "markdown")[0]
    assert "| 190.32 G (indexer 132.70 G) |" in out
