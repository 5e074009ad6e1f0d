"""GQA's K/V heads split whole or copy whole over TP ranks (mlacalc.serving.layout): vLLM's
and SGLang's QKV layers and TensorRT-LLM's attention (from recall) need ``n_kv % tp == 0`` or
``tp % n_kv == 0``. trial10: 6 KV heads at TP4 fitted with no word, 7 at TP8 said "each head
is copied onto 1 GPUs". Each test failed before."""

from __future__ import annotations

from collections import Counter

import pytest

from mlacalc.cost.engine import as_model
from mlacalc.hardware.catalogue import load_hardware
from mlacalc.serving.layout import kv_heads_unsplit, make_layout, tp_splits_heads
from mlacalc.serving.search_space import candidate_layouts
from mlacalc.words.errors import InvalidArgumentError

LLAMA = "llama-3.1-70b"  # 64 attention heads, 8 KV heads


def _gqa(heads: int, kv: int):
    return as_model(LLAMA).replaced(num_attention_heads=heads, num_key_value_heads=kv)


@pytest.mark.parametrize(
    "heads, kv, tp, ok",
    [(48, 6, 4, False), (56, 7, 8, False), (48, 6, 3, True), (48, 6, 6, True),
     (48, 6, 12, True), (64, 8, 16, True), (64, 8, 4, True), (48, 8, 12, False)],
)  # fmt: skip
def test_a_tp_must_divide_or_be_a_multiple_of_the_kv_heads(heads, kv, tp, ok):
    m = _gqa(heads, kv)
    assert tp_splits_heads(m, tp) is ok
    assert (kv_heads_unsplit(m, tp) is None) is ok
    if ok:
        assert make_layout(m, tp, tp=tp).tp == tp
    else:
        with pytest.raises(InvalidArgumentError) as info:
            make_layout(m, tp, tp=tp)
        assert info.value.argument == "tp" and "num_key_value_heads" in str(info.value)


def test_the_refusal_names_the_nearest_degrees_that_work():
    """Among the degrees the GPUs given allow (fixr11: 'use tp 3 or 6' on 4 GPUs, 'use tp 4
    or 28' for Qwen2.5-7B on 7)."""
    with pytest.raises(InvalidArgumentError) as info:
        make_layout(_gqa(48, 6), 12, tp=4)
    assert "on 12 GPUs use tp 3 or 6," in str(info.value)
    with pytest.raises(InvalidArgumentError) as info:
        make_layout(_gqa(48, 6), 4, tp=4)
    assert "on 4 GPUs use tp 2," in str(info.value)
    with pytest.raises(InvalidArgumentError) as info:
        make_layout(as_model("qwen2.5-7b"), 7, tp=7)
    assert "on 7 GPUs use tp 1," in str(info.value)
    with pytest.raises(InvalidArgumentError) as info:
        make_layout(_gqa(56, 7), 8, tp=8)
    assert "on 8 GPUs use tp 1," in str(info.value)


def test_mla_and_shipped_layouts_are_untouched():
    """MLA's one latent is read whole by every rank: any tp dividing the heads serves it."""
    assert all(tp_splits_heads(as_model("deepseek-v3"), t) for t in (1, 2, 4, 8, 16, 32, 64))
    assert all(tp_splits_heads(as_model(LLAMA), t) for t in (1, 2, 4, 8, 16, 32, 64))


def test_plan_cli_refuses_in_one_line(run):
    _, err = run("plan", LLAMA, "-H", "H200", "--gpus", 4, "--tp", 4, "--set",
                 "num_attention_heads=48", "--set", "num_key_value_heads=6", "--isl", "1k",
                 "--osl", "1k", code=2)  # fmt: skip
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "--tp" in lines[0] and "num_key_value_heads" in lines[0]


def test_search_skips_such_degrees_and_counts_them():
    m = _gqa(48, 6)
    removed: Counter[str] = Counter()
    lays = candidate_layouts(m, load_hardware("H200"), 4, None, 1 << 60, removed=removed)
    assert lays and all(lay.tp != 4 for lay in lays)
    assert any("TP4" in r and "num_key_value_heads" in r for r in removed)


def test_search_counts_each_layout_the_kv_heads_rule_out():
    """A MoE model's TP4 is two layouts (plain, EP4) where its KV heads split: both counted
    (fixr11: one a degree, whatever the layouts)."""
    m = as_model("qwen3-30b-a3b").replaced(num_attention_heads=48, num_key_value_heads=6)
    removed: Counter[str] = Counter()
    candidate_layouts(m, load_hardware("H200"), 4, None, 1 << 60, removed=removed)
    assert removed == {"TP4: splits the 6 KV heads unevenly (num_key_value_heads)": 2}


@pytest.mark.parametrize("tp", [7, 4])
def test_training_refuses_such_degrees_in_one_line(tp):
    """fixr11: train qwen2.5-7b --tp 7 priced 4 KV heads over 7 ranks."""
    from mlacalc.training.cost import training_cost  # deferred: only this test trains

    m = _gqa(48, 6) if tp == 4 else as_model("qwen2.5-7b")
    with pytest.raises(InvalidArgumentError) as info:
        training_cost(m, 4096, 1, tp=tp)
    said = str(info.value)
    assert info.value.argument == "tp" and "num_key_value_heads" in said
    # no degree past an 8-GPU node beyond the one asked (it had suggested 28 for --tp 7)
    assert ("use tp 4, or" if tp == 7 else "tp 3 or 6, or") in said
    assert training_cost("qwen2.5-7b", 4096, 1, tp=4).memory_per_gpu > 0


def test_train_search_keeps_to_degrees_that_run():
    """Without --tp no layout splits the KV heads unevenly; with --tp 7 one line names the
    degrees that work (fixr11: train-search ranked layouts the heads do not split)."""
    from mlacalc.training import layout_search  # deferred: only here

    m = as_model("qwen2.5-7b")
    only = dict.fromkeys(("tp", "cp", "pp", "ep", "virtual_stages", "micro_batch"))
    tps = {shape[0] for shape, _ in layout_search._shapes(m, 8, 14, 4096, 14, only)}
    assert tps == {1, 2}  # 7 and 14 divide the 28 query heads, not the 4 KV heads
    with pytest.raises(InvalidArgumentError) as info:
        layout_search.training_search(m, "H100", 8, 8, tp=7)
    assert info.value.argument == "tp"
    assert "num_key_value_heads" in str(info.value) and "do: 1, 2, 4" in str(info.value)
