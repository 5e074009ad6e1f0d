"""Under TensorRT-LLM, DP-attention runs attention on one GPU per group (its
enable_attention_dp, from recall): a plan of attention groups of two or more GPUs is timed as
SGLang and vLLM run it, and says its TensorRT-LLM launch starts another layout (a trial's TP1,
TP2 and TP4 DP-attention plans of DeepSeek-V3 on 16 H200 printed one launch command)."""

import mlacalc
from mlacalc.serving.launch import Deployment, launch_commands
from mlacalc.serving.layout import make_layout
from mlacalc.serving.plan_checks import trtllm_attention_tp

ARGS = dict(ep=16, dp_attention=True, isl=2000, osl=500, concurrency=1024)


def _said(p) -> list[str]:
    return [w for w in p.warnings if "enable_attention_dp runs attention" in w]


def test_trtllm_dp_attention_over_two_gpu_groups_is_warned():
    (w,) = _said(mlacalc.plan("deepseek-v3", "H200", 16, tp=2, engine="trtllm", **ARGS))
    assert w.startswith("TP2 DP-attention8 is timed as SGLang (--tp 16 --dp 8")
    assert "its launch starts TP1 DP-attention16" in w and "--tp 1 --dp-attention" in w
    for engine in ("sglang", "vllm"):  # they run attention groups of tp GPUs
        assert not _said(mlacalc.plan("deepseek-v3", "H200", 16, tp=2, engine=engine, **ARGS))
    assert not _said(mlacalc.plan("deepseek-v3", "H200", 16, tp=1, engine="trtllm", **ARGS))


def test_the_prefill_pool_is_said_too_and_plain_tp_is_not():
    m = mlacalc.load_model("deepseek-v3")
    dec = make_layout(m, 16, tp=1, ep=16, dp_attention=True)
    pre = make_layout(m, 16, tp=4, ep=16, dp_attention=True)
    (w,) = trtllm_attention_tp("trtllm", dec, pre)
    assert w.startswith("the prefill pool's TP4 DP-attention4")
    assert trtllm_attention_tp("trtllm", make_layout(m, 16, tp=16, ep=16), None) == ()


def test_the_launch_command_names_what_it_runs():
    d = Deployment(
        gpus=16, tp=2, dp=8, pp=1, ep=16, dp_attention=True, redundant_experts=0,
        overlap="none", kv_dtype="fp8", batch_per_group=64, gpus_per_node=8,
    )  # fmt: skip
    ((what, cmd),) = launch_commands("trtllm", "deepseek-ai/DeepSeek-V3", [d])
    assert what.startswith("server (run once")  # the label others key by stays the pool's
    assert "# enable_attention_dp runs attention TP1 over these 16 GPUs, not the TP2 " in cmd
    assert "enable_attention_dp: true" in cmd
