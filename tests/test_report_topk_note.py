"""A DSA or DeepSeek-V4 CSA indexer whose index_topk is at or past the keys it ranks picks every
key: report said nothing (a new-user trial: index_topk 16,384 at 8k, 10,000,000 past
DeepSeek-V3.2's 163,840 positions, 100,000 on DeepSeek-V4-Pro at 2k)."""

from __future__ import annotations

import mlacalc
from mlacalc.report import model_report


def _notes(name, seq_len, **changes):
    m = mlacalc.load_model(name)
    m = m.with_changes(**changes) if changes else m
    return [n for n in model_report(m, seq_len=seq_len)["notes"] if "index_topk" in n]


def test_topk_at_or_past_the_context_is_said():
    (n,) = _notes("deepseek-v3.2", 8192, index_topk=16384)
    assert "at or past the 8,192 keys at seq_len 8,192" in n and "pure overhead" in n
    (n,) = _notes("deepseek-v3.2", 8192, index_topk=8192)  # equal: every key too
    assert "selects every key" in n
    assert _notes("deepseek-v3.2", 8192) == []  # 2,048 of 8,192: it selects


def test_topk_past_the_models_positions_never_binds():
    (n,) = _notes("deepseek-v3.2", 8192, index_topk=10_000_000)
    assert "the 163,840 keys the model's max_position_embeddings (163,840)" in n
    assert "can never bind" in n


def test_deepseek_v4_counts_its_pooled_keys():
    # CSA ranks one pooled key per 4 tokens: 512 at 2,048 tokens
    (n,) = _notes("deepseek-v4-pro", 2048, index_topk=100_000)
    assert "the 512 compressed keys at seq_len 2,048" in n
    assert _notes("deepseek-v4-pro", 8192) == []  # 1,024 of 2,048 pooled keys
    assert _notes("deepseek-v3", 1024) == []  # no indexer
