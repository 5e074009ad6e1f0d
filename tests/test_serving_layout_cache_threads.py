"""The serving layout's memories are shared by the app's pricing threads: an eviction that
meets another thread's eviction of the same oldest entry must not raise KeyError."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from mlacalc.models.loading import load_model
from mlacalc.serving import layout as L
from mlacalc.words.dtypes import resolve_kv_layout


class _EvictedMeanwhile(dict):
    """A memory whose oldest entry another thread evicts between the first key being read
    and its deletion (the interleaving of two threads evicting at once, made certain)."""

    def __iter__(self):
        keys = list(dict.__iter__(self))
        if keys:
            dict.pop(self, keys[0])  # the other thread's eviction
        return iter(keys)


@pytest.fixture
def v3():
    return load_model("deepseek-v3")


@pytest.mark.parametrize(
    ("memory", "kept"), [("_KV_BYTES", "_KV_BYTES_KEPT"), ("_BREAKDOWNS", "_BREAKDOWNS_KEPT")]
)
def test_an_eviction_met_by_another_threads_eviction_is_no_keyerror(monkeypatch, v3, memory, kept):
    bf16 = resolve_kv_layout("bf16")
    monkeypatch.setattr(L, memory, _EvictedMeanwhile())
    monkeypatch.setattr(L, kept, 1)
    for tp in (1, 2, 4, 8):
        lay = L.make_layout(v3, 8, tp=tp)
        if memory == "_KV_BYTES":
            assert L.kv_bytes_per_sequence_per_gpu(v3, bf16, lay, 4096) > 0
        else:
            assert L.stage_breakdowns(v3, lay)
        assert len(getattr(L, memory)) == 1


def test_threads_pricing_at_once_get_the_figures_of_one_thread(monkeypatch, v3):
    bf16 = resolve_kv_layout("bf16")
    lays = [L.make_layout(v3, 8, tp=tp) for tp in (1, 2, 4, 8)]
    asks = [(lay, s) for lay in lays for s in (1, 1024, 4096, 32768)]
    alone = [L.kv_bytes_per_sequence_per_gpu(v3, bf16, lay, s) for lay, s in asks]
    monkeypatch.setattr(L, "_KV_BYTES", {})
    monkeypatch.setattr(L, "_KV_BYTES_KEPT", 2)  # every call evicts

    def price(_):
        return [L.kv_bytes_per_sequence_per_gpu(v3, bf16, lay, s) for lay, s in asks * 20]

    with ThreadPoolExecutor(8) as pool:
        for got in pool.map(price, range(8)):
            assert got == alone * 20
