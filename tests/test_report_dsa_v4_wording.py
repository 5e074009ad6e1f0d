"""report's words on DSA and DeepSeek-V4 caches (a new-user trial, round 24): the naive
figure named as such beside the default latent cache's, V4's tokens kept per kind, its
by-kind bytes column said to be an average, and each indexer's key precision."""

from __future__ import annotations


def _md(run, *args):
    return run("report", *args, "--phase", "decode", "--format", "markdown")[0]


def test_dsa_per_token_note_names_the_naive_and_the_default_figure(run):
    out = _md(run, "deepseek-v3.2", "--seq-len", "128k")
    assert "(dsa layers: 4.77 MiB/token naive, K/V expanded; 76.49 KiB/token the absorbed " in out
    # the indexer keys: fp8 + a float32 scale a 128 values, 132 B, whatever the cache's dtype
    for dtype in ("bf16", "fp8"):
        out = _md(run, "deepseek-v3.2", "--seq-len", "8k", "--kv-dtype", dtype)
        assert "indexer keys (128 values) are fp8 with a float32 scale a 128 values " in out
        assert "132 B a token and layer" in out


def test_v4_tokens_kept_by_kind_and_the_averaged_column(run):
    out = _md(run, "deepseek-v4-pro", "--seq-len", "128k")
    assert "| 1,152 (hca); 32,896 (csa) |" in out
    assert "| bytes/token/layer (one more token adds, averaged) |" in out
    assert "each at its own row's bytes, plus the compressors' bounded state" in out
    assert "pooled indexer keys (128 values) are in the cache's dtype (bf16: 256 B" in out
    fp8 = _md(run, "deepseek-v4-pro", "--seq-len", "128k", "--kv-dtype", "fp8")
    assert "(fp8: 128 B a pooled key)" in fp8


def test_a_plain_model_keeps_its_words(run):
    out = _md(run, "deepseek-v3", "--seq-len", "8k")
    assert "indexer keys" not in out and "(one more token adds, averaged)" not in out
