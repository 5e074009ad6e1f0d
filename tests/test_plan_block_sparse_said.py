"""A plan of MiniMax-M3 says what times its block-sparse (msa) attention: under SGLang it
returned no warning and timed the core as plain attention_decode (a new-user trial, 8 B200,
EP 8, 32K prompts); every engine times it by its plain attention fit, and only vLLM's msa
module tables time the block-sparse kernels."""

import pytest

import mlacalc

ARGS = dict(dp_attention=True, ep=8, isl=32000, osl=1000, concurrency=64)


def _said(p) -> list[str]:
    return [w for w in p.warnings if "block-sparse (msa) attention" in w]


@pytest.mark.parametrize("engine", ["sglang", "vllm", "trtllm"])
def test_minimax_m3s_msa_core_says_what_stands_in(engine):
    p = mlacalc.plan("minimax-m3", "B200", 8, engine=engine, **ARGS)
    (w,) = _said(p)
    assert "16 x 128 = 2,048 keys each query chooses" in w and "standing in" in w
    assert ("which a plan's step does not run" in w) == (engine == "vllm")
    # the core is the plain class it says: no msa variant in the step
    cores = [k for k in p.kernels if k["name"] == "attention"]
    assert cores and all(k["kind"] == "attention_decode" and not k["variant"] for k in cores)


def test_a_model_without_msa_layers_says_nothing():
    p = mlacalc.plan("deepseek-v3.2", "B200", 8, engine="sglang", **ARGS)
    assert _said(p) == []
