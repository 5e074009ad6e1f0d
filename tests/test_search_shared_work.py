"""The search's shared work answers what the work it replaced answered: the cache bytes a
sequence holds remembered per question, the refined seeds timed together (the whole search's
JSON is unchanged: checked byte for byte on three searches when they landed)."""

from __future__ import annotations

import pytest

from mlacalc.models.loading import load_model
from mlacalc.serving import layout as L
from mlacalc.words.dtypes import resolve_kv_layout


@pytest.mark.parametrize("name", ["deepseek-v3", "qwen3-next-80b-a3b", "gemma-4-26b-a4b"])
def test_remembered_cache_bytes_are_the_computed_ones(name):
    m = load_model(name)
    kv = resolve_kv_layout("fp8")
    for tp, pp, ep in ((1, 1, 1), (2, 1, 2), (4, 2, 1), (8, 1, 8)):
        lay = L.make_layout(m, tp * pp, tp=tp, pp=pp, ep=ep if m.is_moe else 1)
        for context in (1, 4096, 131072):
            exact = L._kv_bytes_per_sequence_per_gpu(m, kv, lay, context, 64, False)
            assert L.kv_bytes_per_sequence_per_gpu(m, kv, lay, context, 64) == exact
            assert L.kv_bytes_per_sequence_per_gpu(m, kv, lay, context, 64) == exact  # hit
    # a model built again is another key: its answer is its own, not the first's
    again = load_model(name)
    lay = L.make_layout(again, 2, tp=2)
    assert L.kv_bytes_per_sequence_per_gpu(again, kv, lay, 4096) == (
        L._kv_bytes_per_sequence_per_gpu(again, kv, lay, 4096, 1, False)
    )
