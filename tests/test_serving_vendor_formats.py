"""What a plan says where the engine or format named does not run as named (a new-user
trial's findings): NVFP4 checkpoints on Hopper, TensorRT-LLM and NVFP4 on AMD parts, fp4 as a
plain dtype."""

from __future__ import annotations

import re

import pytest
from reference_data import HF_CONFIGS_2

import mlacalc
from mlacalc.serving.plan import plan
from mlacalc.words.errors import MlacalcError

KIMI_NVFP4 = HF_CONFIGS_2 / "nvidia--Kimi-K2.6-NVFP4.config.json"
ASK = dict(isl=2000, osl=500, concurrency=64)


def test_an_nvfp4_checkpoint_on_a_part_without_fp4_tensor_cores_says_so():
    """Kimi-K2.6 NVFP4 as stored: its experts run the weight-only MXFP4 MoE on H20 (no fp4
    tensor cores), said as ``--expert-dtype nvfp4`` says it; on B200 nothing is said; with the
    experts' format given (or a weight dtype chosen) the checkpoint's is not the one timed."""
    m = mlacalc.load_model(KIMI_NVFP4)
    (said,) = [w for w in plan(m, "H20", 8, tp=8, ep=8, **ASK).warnings if "checkpoint's" in w]
    assert said.startswith("the checkpoint's experts in nvfp4: H20 has no fp4 tensor cores")
    assert "w4a16_mxfp4" in said
    assert not [w for w in plan(m, "B200", 8, tp=8, ep=8, **ASK).warnings if "checkpoint's" in w]
    given = plan(m, "H20", 8, tp=8, ep=8, component_dtypes={"experts": "fp8"}, **ASK)
    assert not [w for w in given.warnings if "checkpoint's experts" in w]


def test_mxfp4_experts_that_run_weight_only_on_hopper_say_so():
    """DeepSeek-V4-Pro's MXFP4 experts run MXFP4 x MXFP8 (w4a8_mxfp4) on Blackwell and the
    weight-only w4a16_mxfp4 on H200: said once, as Kimi-K2.6 NVFP4's are (it said nothing);
    GPT-OSS's, weight-only on every part, say nothing, nor V4-Pro's on B200."""
    ask = dict(isl=4000, osl=1000, concurrency=64)
    said = [w for w in plan("deepseek-v4-pro", "H200", 16, **ask).warnings if "tensor cores" in w]
    assert said == [
        "the checkpoint's experts in mxfp4: H200 has no fp4 tensor cores, so they are sized in "
        "mxfp4 and timed as the weight-only MXFP4 MoE the engines run instead (w4a16_mxfp4: "
        "the shipped H100 tables time it under TensorRT-LLM (Triton), SGLang (Triton, Marlin), "
        "vLLM (Triton, Marlin))"
    ]
    # "tensor cores", not the indexer's "scores" (its TP warning, round 24, names them)
    assert not [
        w for w in plan("deepseek-v4-pro", "B200", 8, **ask).warnings if "tensor cores" in w
    ]
    assert not [w for w in plan("gpt-oss-120b", "H200", 1, **ask).warnings if "tensor cores" in w]


def test_fp4_as_a_plain_dtype_says_what_it_leaves_out():
    """``weight_dtype="fp4"`` sizes the layers' linear weights at 4 bits, no scales, and
    what cost.params.kept_parts keeps at its own bits (the norms and routers at 16, the
    embedding and head as stored): the plan says so, from kept_parts itself, and how to size
    NVFP4 (it had said "every tensor (norms and routers too)", which b33cb37 made untrue);
    the error for ``--weight-dtype nvfp4`` says what fp4 is."""
    p = plan("qwen3-8b", "B200", 1, seq_len=8192, weight_dtype="fp4")
    (said,) = [w for w in p.warnings if w.startswith("weights in fp4")]
    assert "no block scales" in said and "--expert-dtype nvfp4" in said
    assert "every tensor" not in said and "routers too" not in said
    assert "the layers' linear weights at 4 bits" in said
    assert "the norms, the embedding and the output head at 16 bits" in said
    moe = plan("deepseek-v3", "B200", 8, seq_len=8192, weight_dtype="fp4").warnings
    (said,) = [w for w in moe if w.startswith("weights in fp4")]
    assert "the norms and MoE routers, the embedding and the output head at 16 bits" in said
    (said,) = [w for w in plan("gpt2", "B200", 1, weight_dtype="fp4").warnings if "fp4" in w]
    assert "the norms at 16 bits, the embedding at 32 bits" in said  # GPT-2 stores fp32
    with pytest.raises(MlacalcError, match=r"fp4: 4 bits every weight, no scales"):
        plan("qwen3-8b", "B200", 1, seq_len=8192, weight_dtype="nvfp4")


def test_tensorrt_llm_and_nvfp4_on_an_amd_part_are_said():
    """TensorRT-LLM (named: SGLang is the default on AMD) runs on NVIDIA GPUs only: on MI355X
    its kernels' times are a stand-in, said; under SGLang nothing is said of the engine. NVFP4
    experts on MI355X (whose fp4 tensor cores take MXFP4) are said too; on B200 neither."""
    kw = dict(tp=8, ep=8, component_dtypes={"experts": "nvfp4"}, **ASK)
    words = plan("kimi-k2", "MI355X", 8, engine="trtllm", **kw).warnings
    assert [w for w in words if w.startswith("TensorRT-LLM runs on NVIDIA GPUs only: on MI355X")]
    assert [w for w in words if w.startswith("experts in nvfp4: NVFP4 is NVIDIA's")]
    sglang = plan("kimi-k2", "MI355X", 8, engine="sglang", **kw).warnings
    assert not [w for w in sglang if w.startswith("TensorRT-LLM runs")]
    assert not [w for w in plan("kimi-k2", "B200", 8, **kw).warnings if "NVIDIA" in w]


def test_launch_commands_on_an_amd_part(run):
    """``--launch trtllm`` on MI355X is refused naming the engines that run there; SGLang's
    command there leaves DeepEP (NVIDIA's) out and says so; on B200 it keeps it."""
    args = ("plan", "kimi-k2", "--gpus", 8, "--tp", 8, "--ep", 8, "--isl", 2000, "--osl", 500,
            "--concurrency", 16)  # fmt: skip
    _, err = run(*args, "-H", "MI355X", "--launch", "trtllm", code=2)
    assert "TensorRT-LLM runs on NVIDIA GPUs only (MI355X is AMD's)" in err
    out, _ = run(*args, "-H", "MI355X", "--launch", "sglang")
    assert "--ep-size 8" in out and "deepep" not in out.split("# server", 1)[1]
    assert "DeepEP (--moe-a2a-backend deepep) is NVIDIA's" in out
    out, _ = run(*args, "-H", "B200", "--launch", "sglang")
    assert "--moe-a2a-backend deepep" in out


def test_an_nvfp4_checkpoint_as_stored_on_an_amd_part_is_said():
    """Kimi-K2.6 NVFP4 as stored on MI355X: its experts' NVFP4 is said as a given
    ``--expert-dtype nvfp4`` is (a review found only the given formats checked)."""
    m = mlacalc.load_model(KIMI_NVFP4)
    words = plan(m, "MI355X", 8, tp=8, ep=8, engine="sglang", **ASK).warnings
    assert [w for w in words if w.startswith("experts in nvfp4: NVFP4 is NVIDIA's")]


def test_a_vendor_is_read_in_any_case(tmp_path):
    """A hardware file saying ``vendor: NVIDIA`` is NVIDIA's (a review's copy of H100-SXM.yaml
    with the vendor in capitals was told TensorRT-LLM runs on NVIDIA GPUs only)."""
    from pathlib import Path

    from mlacalc.hardware.catalogue import load_hardware

    text = (Path(mlacalc.__file__).parent / "data" / "hardware" / "H100-SXM.yaml").read_text()
    assert "vendor: nvidia" in text
    mine = tmp_path / "my-h100.yaml"
    mine.write_text(
        text.replace("vendor: nvidia", "vendor: NVIDIA").replace("name: H100-SXM", "name: My-H100")
    )
    assert load_hardware(str(mine)).vendor == "nvidia"
    assert not [
        w for w in plan("qwen3-8b", str(mine), 1, **ASK).warnings if "NVIDIA GPUs only" in w
    ]


@pytest.mark.parametrize("kv,tokens", [("bf16", 512), ("fp8", 128), ("int8", 128), ("nvfp4", 128)])
def test_a_narrow_cache_takes_the_fp8_decode_path_threshold(kv, tokens):
    """vLLM runs prompts of up to 512 new tokens over a bf16 cache down its MLA decode path
    on Hopper, 128 over fp8; a narrower cache, whose decode runs the fp8-cache kernel as a
    stand-in, takes fp8's threshold too (a review found 512: the prompt following the bf16
    backend and the decode the fp8 one)."""
    from mlacalc.hardware.catalogue import load_hardware
    from mlacalc.timemodel.device import device_figures
    from mlacalc.timemodel.mla_time import step_decode_path_tokens

    fig = device_figures(load_hardware("H100-SXM"))
    m = mlacalc.load_model("deepseek-v2-lite")
    assert step_decode_path_tokens(m, "vllm", fig, kv) == tokens


def test_fp8_weights_slower_than_bf16_under_the_engine_say_so():
    """vLLM's per-tensor fp8 MoE on Hopper (its measured H100 table) makes Qwen3.5-122B-A10B's
    step on 2 H200 at 128 running 106 ms against bf16's 42: said once, with both steps, as an
    fp8 cache slower than bf16 is (it said nothing); under SGLang (29 ms) nothing is said."""
    ask = dict(isl=4000, osl=1000, concurrency=128, weight_dtype="fp8", kv_dtype="fp8")
    p = plan("qwen3.5-122b-a10b", "H200", 2, engine="vllm", **ask)
    (said,) = [w for w in p.warnings if w.startswith("fp8 weights'")]
    assert "vLLM on H200 are slower than bf16 weights'" in said and "--weight-dtype bf16" in said
    fp8_ms, bf16_ms = (float(x) for x in re.findall(r"([\d.]+) ms", said))
    assert fp8_ms > 2 * bf16_ms
    sglang = plan("qwen3.5-122b-a10b", "H200", 2, engine="sglang", **ask)
    assert not [w for w in sglang.warnings if w.startswith("fp8 weights'")]


def test_fp8_weights_warning_offers_bf16_only_where_it_fits():
    """A review: DeepSeek-V3 on 8 H200 under vLLM was pointed to --weight-dtype bf16, 1.3 TB of
    weights that no 8 H200 hold (plan says it does not fit)."""
    ask = dict(isl=1000, osl=200, concurrency=64, weight_dtype="fp8")
    p = plan("deepseek-v3", "H200", 8, engine="vllm", **ask)
    (said,) = [w for w in p.warnings if w.startswith("fp8 weights'")]
    assert "--weight-dtype bf16" not in said and "do not fit" in said
    assert not plan("deepseek-v3", "H200", 8, engine="vllm", **{**ask, "weight_dtype": "bf16"}).fits


def test_fp8_e4m3_weights_run_and_are_said_as_fp8():
    """A review: --weight-dtype fp8_e4m3 missed vLLM's fp8 MoE class (routed experts 81.7 ms a
    step against fp8's 95.4 on Qwen3.5-122B-A10B, 2 H200) and its slower-than-bf16 warning."""
    ask = dict(isl=4000, osl=1000, concurrency=128, kv_dtype="fp8", engine="vllm")
    fp8, e4m3 = (
        plan("qwen3.5-122b-a10b", "H200", 2, weight_dtype=w, **ask) for w in ("fp8", "fp8_e4m3")
    )
    assert e4m3.decode_step_s == pytest.approx(fp8.decode_step_s, rel=1e-12)
    assert [w for w in e4m3.warnings if w.startswith("fp8 weights'")]


def test_nvfp4_on_an_amd_part_without_fp4_says_one_thing():
    """trial12: nvfp4 experts on MI300X (no fp4 tensor cores) were said to be timed as the
    weight-only kernel, then said to run on "MI300X's fp4 tensor cores": the second only where
    the device has fp4 (MI355X), not on MI300X or MI325X."""
    kw = dict(tp=8, ep=8, engine="sglang", component_dtypes={"experts": "nvfp4"}, **ASK)
    for device in ("MI300X", "MI325X"):
        words = plan("kimi-k2", device, 8, **kw).warnings
        assert not [w for w in words if "fp4 tensor cores take MXFP4" in w], device
        assert [w for w in words if "has no fp4 tensor cores" in w], device
    words = plan("kimi-k2", "MI355X", 8, **kw).warnings
    assert [w for w in words if "MI355X's fp4 tensor cores take MXFP4" in w]
