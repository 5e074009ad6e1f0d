"""The DP-attention hint beside an MLA latent copied on TP ranks says why DP-attention holds no
sequence where it holds none (trial round 29, finding 10: "its attention weights on every GPU
leave no cache for a sequence" was said both of DeepSeek-V3.2 at 1M, where one sequence's
76.49 GiB exceed a GPU, and of GLM-5.1 in bf16, whose weights alone do not fit)."""

from __future__ import annotations

from mlacalc import plan


def _hint(*args, **kw) -> str:
    (w,) = [w for w in plan(*args, **kw).warnings if "DP-attention splits" in w]
    return w


def test_one_sequence_larger_than_a_gpus_cache():
    w = _hint("deepseek-v3.2", "H200", 8, seq_len=1048576, engine="sglang")
    assert "one sequence is whole on one GPU there too (78,324 B a token)" in w
    assert "KV tokens a GPU has room for hold no sequence of this context" in w
    assert "weights" not in w.split("DP-attention splits")[1].split("):")[-1]


def test_weights_alone_over_memory():
    w = _hint("glm-5.1", "H200", 8, seq_len=131072, engine="sglang")
    assert w.endswith("leave no room for a KV cache, as under TP8")


def test_a_batch_that_fits_is_said_as_before():
    w = _hint("deepseek-v3.2", "H200", 8, seq_len=131072, engine="sglang")
    assert "each GPU caches its own sequences'" in w and "largest batch" in w
