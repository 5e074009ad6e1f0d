"""A prefix hit on a hybrid model (review10 F8): Jamba's Mamba layers and Qwen3-Next's Gated
DeltaNet layers keep one state a sequence, which engines snapshot only at some boundaries;
the plan took the hit in every layer without a word. It now says so, where a token is
found cached."""

from __future__ import annotations

import pytest

import mlacalc

MIX = dict(isl=4096, osl=256, concurrency=16)


def _notes(model, **kw):
    p = mlacalc.plan(model, "H100-SXM", 8, **MIX, **kw)
    return [w for w in p.warnings if "found in those layers' states too" in w]


@pytest.mark.parametrize(
    ("model", "said"),
    [
        ("jamba-1.5-mini", "28 of 32 layers keep a Mamba state, not every token's keys"),
        ("qwen3-next-80b-a3b", "36 of 48 layers keep a linear-attention state, not every"),
    ],
)
def test_a_hybrid_models_prefix_hit_is_said_to_be_taken_in_its_state_layers(model, said):
    (note,) = _notes(model, prefix_cache_hit=0.75)  # before: no note
    assert said in note and "3,072 cached tokens" in note
    assert "not counted in the KV memory" in note and "from recall" in note
    assert not _notes(model)  # no hit: nothing to say
    assert not _notes(model, prefix_cache_hit=0.0002)  # a hit that caches no token


def test_an_attention_only_model_has_no_such_note():
    assert not _notes("llama-3.1-8b", prefix_cache_hit=0.75)


def test_a_parallel_hybrids_layers_are_said_to_keep_both():
    """Falcon-H1's layers run attention and a Mamba-2 mixer side by side: they keep every
    token's keys and a state (the note said "a state, not every token's keys")."""
    (note,) = _notes("falcon-h1-34b", prefix_cache_hit=0.75, tp=4, dp=2)
    assert "layers keep a Mamba state beside their attention's keys" in note
    assert "not every token's keys" not in note
