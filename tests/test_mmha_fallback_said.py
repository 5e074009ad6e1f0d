"""TensorRT-LLM's decode past the 32 query heads a KV head its grouped XQA kernel packs is timed
as its masked MHA kernel (attention_time's MMHA_FALLBACK_* rule): said where a roofline row or a
plan uses it (a new-user trial's Qwen3-Coder with one KV head read 51x its roofline bound with no
word, MQA the slowest design)."""

from __future__ import annotations

from mlacalc.serving.plan import plan
from mlacalc.timemodel.predict import MMHA_RUNS_AS, predict_time


def _runs_as(model: str, engine: str) -> list[str]:
    p = predict_time(model, "H100-SXM", "decode", 4096, 16, engine=engine)
    return [o.runs_as for o in p.ops if o.name == "attention"]


def test_a_roofline_row_on_the_masked_mha_kernel_says_so():
    # Falcon-7B: 71 query heads on its one KV head (186.5 us under TensorRT-LLM, 19.3 SGLang)
    assert _runs_as("falcon-7b", "trtllm") == [MMHA_RUNS_AS]
    assert _runs_as("falcon-7b", "sglang") == [""]
    assert _runs_as("llama-3-8b", "trtllm") == [""]  # 4 a KV head: XQA


def test_the_cli_roofline_note_names_the_kernel(capsys):
    from mlacalc.cli import main

    args = ["roofline", "falcon-7b", "-H", "H100-SXM", "--batch", "16", "--seq-len", "4096"]
    assert main(args) == 0
    assert " ".join(capsys.readouterr().out.split()).count("masked MHA kernel (MMHA)") == 1
    assert main([*args, "--engine", "sglang"]) == 0
    assert "MMHA" not in capsys.readouterr().out


def test_a_plan_on_the_masked_mha_kernel_says_so_once():
    ask = dict(isl=1000, osl=100, concurrency=16)
    said = [w for w in plan("falcon-7b", "H200", 1, engine="trtllm", **ask).warnings if "MMHA" in w]
    assert len(said) == 1 and said[0].startswith("decode attention with 71 query heads a KV head")
    for model, engine, gpus in (
        ("falcon-7b", "sglang", 1),
        ("llama-3-8b", "trtllm", 1),
        ("deepseek-v4-pro", "trtllm", 8),  # its own compressed kernels
    ):
        p = plan(model, "H200", gpus, engine=engine, **ask)
        assert not [w for w in p.warnings if "MMHA" in w], (model, engine)


def test_the_app_says_it_in_the_roofline_and_planner_views():
    import pytest

    pytest.importorskip("streamlit")
    from test_app import run

    at = run("Roofline", model="falcon-7b", hw="H100-SXM")
    assert [c for c in at.caption if "masked MHA kernel (MMHA)" in c.value]
    at = run("Capacity planner", model="falcon-7b", hw="H200", gpus="1")
    said = [w.value for w in [*at.warning, *at.info] if "MMHA" in w.value]
    assert len(said) == 1 and "71 query heads a KV head" in said[0]
