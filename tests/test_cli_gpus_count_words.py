"""A GPU list's bad part is refused as a GPU count (it had been "'abc' is not a size; write
131072, 128k or 1M", words for a token size)."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("bad", ["abc", "8x", "eight"])
def test_a_gpu_list_s_bad_part_is_refused_as_a_gpu_count(run, bad):
    _, err = run("search", "llama-3-8b", "-H", "H100-SXM", "--gpus", f"8,{bad}", "--isl", 2000,
                 "--osl", 500, code=2)  # fmt: skip
    flat = " ".join(err.split())
    assert f"'{bad}' is not a GPU count; write a whole number, e.g. 8, or a list" in flat
    assert "is not a size" not in flat and "128k" not in flat
