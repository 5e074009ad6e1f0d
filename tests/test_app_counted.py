"""A count of one is said in the singular: the app's captions said "1 sequences" at batch 1 (a
new user's trial); the words come from one helper, ``mlacalc.words.units.counted``."""

from __future__ import annotations

import pytest

from mlacalc.words.units import counted


def test_counted_is_singular_at_one_only():
    assert counted(1, "sequence") == "1 sequence"
    assert counted(0, "sequence") == "0 sequences"
    assert counted(2048, "sequence") == "2,048 sequences"


@pytest.mark.parametrize("view", ["KV cache", "FLOPs", "Roofline"])
def test_the_app_says_one_sequence_at_batch_one(view):
    pytest.importorskip("streamlit")  # the app is an optional extra
    from _helpers import run_app  # deferred: the app's test helper loads streamlit

    at = run_app(view, model="deepseek-v3", batch="1")
    said = " ".join(str(e.value) for e in [*at.caption, *at.markdown])
    assert "1 sequences" not in said
    assert "1 sequence" in said
    more = run_app(view, model="deepseek-v3", batch="3")
    assert "3 sequences" in " ".join(str(e.value) for e in [*more.caption, *more.markdown])
