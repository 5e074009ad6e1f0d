"""A DSA model's indexer under tensor parallelism: whole on every rank (docs/serving.md), which
plan said nowhere (a new-user trial: DeepSeek-V3.2's prefill of a 131,072-token prompt on 8
H200 at TP8 took 25.6 s against DeepSeek-V3's 14.7 s, no word why). Said with its share of the
step's kernels on a rank."""

from __future__ import annotations

import re

import pytest

from mlacalc.serving.plan import plan
from mlacalc.serving.search import search


def _said(p) -> list[str]:
    return [w for w in p.warnings if "DSA indexer" in w]


@pytest.fixture(scope="module")
def v32():
    return plan("deepseek-v3.2", "H200", 8, seq_len=131072, engine="trtllm")


def test_dsa_at_tp8_says_the_indexer_is_whole_on_every_rank(v32):
    (w,) = _said(v32)
    assert "is whole on every tensor-parallel rank (TP8)" in w and "top-2,048" in w
    assert "--tp 1 --dp-attention" in w
    # its decode figures are the plan's own kernel rows at the plan's batch
    rows = v32.kernels
    index = sum(k["seconds"] for k in rows if k["name"].startswith("indexer"))
    total = sum(k["seconds"] for k in rows)
    assert f"{index * 1e3:.2f} of the {total * 1e3:.2f} ms" in w
    assert f"decode step of {v32.max_batch:,} sequences" in w
    # the prefill's kernels add to the plan's prefill figure
    pf_i, pf_t = (float(x) for x in re.search(r"takes ([\d.]+) s of the ([\d.]+) s", w).groups())
    assert pf_t == pytest.approx(v32.prefill_s, abs=0.01) and 0 < pf_i < pf_t


def test_no_indexer_warning_without_tp_or_without_dsa():
    assert not _said(plan("deepseek-v3.2", "H200", 8, seq_len=8192, dp_attention=True))
    assert not _said(plan("deepseek-v3", "H200", 8, seq_len=8192))


def test_search_best_at_tp8_says_it_and_dp_attention_does_not():
    """search's best at TP8 said the latent's copies and not the indexer (a review); at
    DP-attention (TP1 groups) neither pool's indexer is said."""
    kw = dict(isl=2000, osl=500, engine="sglang", kv_dtypes=("bf16",), weight_dtypes=("fp8",))
    r = search("deepseek-v3.2", "H200", [8], tp=8, dp_attention="off", **kw)
    assert r.best["tp"] == 8
    (w,) = [w for w in r.warnings if "DSA indexer" in w]
    assert w.startswith("TP8: DeepSeek-V3.2's DSA indexer") and "top-2,048" in w
    assert "--tp 1 --dp-attention" in w and "plan of the point" in w
    r = search("deepseek-v3.2", "H200", [8], tp=1, dp_attention="on", **kw)
    assert r.best["tp"] == 1 and not [w for w in r.warnings if "DSA indexer" in w]
