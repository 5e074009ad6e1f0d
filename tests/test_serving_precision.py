"""Weights per component (mlacalc.serving.precision): each component sized in its own format
and each of its kernels timed by its own class."""

from __future__ import annotations

import math
import re

import pytest

from mlacalc.cost.engine import as_model
from mlacalc.hardware.catalogue import load_hardware
from mlacalc.serving.gpu_step import StepModel
from mlacalc.serving.layout import make_layout, weight_breakdown, weight_bytes_by_part
from mlacalc.serving.plan import plan
from mlacalc.serving.precision import component_weight_bytes, format_bits
from mlacalc.words.dtypes import resolve_kv_layout
from mlacalc.words.errors import InvalidArgumentError

DSV3 = as_model("deepseek-v3")
B200 = load_hardware("B200")
DPA8 = dict(tp=1, dp_attention=True, ep=8)
LAY = make_layout(DSV3, 8, **DPA8)


def test_each_component_sized_in_its_format():
    """The routed experts in nvfp4 hold 4.5 bits a weight (one fp8 scale per 16), the
    attention in fp8 8; every other part as the checkpoint stores it, byte for byte."""
    base = weight_bytes_by_part(DSV3, LAY, None)
    params = weight_breakdown(DSV3, LAY)
    mixed = component_weight_bytes(DSV3, LAY, None, {"experts": "nvfp4", "attention": "fp8"})
    assert mixed["routed_experts"] == math.ceil(params["routed_experts"] * 4.5 / 8)
    # the q_a / kv_a layernorms keep 16 bits (had been sized fp8: 11,413,547,008 B)
    assert mixed["attention"] == math.ceil(params["attention"]) + 61 * (1_536 + 512)
    assert {k: v for k, v in mixed.items() if k not in ("routed_experts", "attention")} == {
        k: v for k, v in base.items() if k not in ("routed_experts", "attention")
    }
    p = plan(DSV3, B200, 8, **DPA8, seq_len=4096, component_dtypes={"experts": "nvfp4"})
    q = plan(DSV3, B200, 8, **DPA8, seq_len=4096)
    assert q.weights_per_gpu_bytes - p.weights_per_gpu_bytes == (
        base["routed_experts"] - math.ceil(params["routed_experts"] * 4.5 / 8)
    )
    assert p.max_batch > q.max_batch and "experts nvfp4" in p.weight_format
    assert format_bits("mxfp4") == 4.25 and format_bits("fp8") == 8


def test_fp8_block_per_component_is_the_fp8_checkpoint_byte_for_byte():
    """fp8_block asked per component of a bf16 DeepSeek-V3 holds what its fp8 checkpoint
    stores (one fp8 byte a value, a float32 per 128 x 128 block, ceil on both sides: kv_a's 576
    rows are 5 blocks), part by part; Llama-3.1-70B's 16,711,680 B of scales (its 68.45 G
    matrix weights / 16,384 x 4) a quarter a GPU at TP4. Its kernels run the fp8_block class."""
    layers = ("attention", "dense_ffn", "experts", "shared_experts")
    bf16 = DSV3.with_changes(quantization_config=None)
    asked = component_weight_bytes(bf16, LAY, None, dict.fromkeys(layers, "fp8_block"))
    stored = weight_bytes_by_part(DSV3, LAY, None)
    for part in ("attention", "dense_ffn", "routed_experts", "shared_experts"):
        assert asked[part] == stored[part], part
    llama = as_model("llama-3.1-70b")
    lay = make_layout(llama, 4, tp=4)
    two = {"attention": "fp8_block", "dense_ffn": "fp8_block"}
    block = component_weight_bytes(llama, lay, None, two)
    fp8 = component_weight_bytes(llama, lay, None, dict.fromkeys(two, "fp8"))
    assert sum(block.values()) - sum(fp8.values()) == 16_711_680 // 4
    step = StepModel(llama, lay, None, resolve_kv_layout("bf16"), B200, component_dtypes=two)
    kernels = {k.name: k.dtype for k in step.kernels(dec_B=8, dec_S=2000)}
    assert kernels["o_proj"] == "fp8_block" and kernels["lm_head"] == "bf16"


def test_each_kernel_timed_by_its_own_class():
    """The experts' grouped GEMM runs the fp4 class and reads 4.5-bit weights, the attention
    projections the fp8 class, the head and the router as before."""
    kv = resolve_kv_layout("bf16")
    base = StepModel(DSV3, LAY, None, kv, B200)
    formats = {"experts": "nvfp4", "attention": "fp8"}
    mixed = StepModel(DSV3, LAY, None, kv, B200, component_dtypes=formats)
    kb = {k.name: k for k in base.kernels(dec_B=64, dec_S=2000)}
    km = {k.name: k for k in mixed.kernels(dec_B=64, dec_S=2000)}
    assert km["routed_experts"].dtype == "fp4" and kb["routed_experts"].dtype == "fp8_block"
    assert km["o_proj"].dtype == "fp8" and km["q_b_proj"].dtype == "fp8"
    assert km["lm_head"].dtype == kb["lm_head"].dtype and km["router"].dtype == "bf16"
    assert km["routed_experts"].bytes < kb["routed_experts"].bytes
    assert km["routed_experts"].flops == kb["routed_experts"].flops  # the same work


def test_fewer_bits_for_the_experts_never_slower_on_blackwell():
    """bf16 experts do not fit 8 B200; fp8 ones step slower than nvfp4 ones."""
    kw = dict(**DPA8, seq_len=4096, batch=256)
    assert not plan(DSV3, B200, 8, **kw, component_dtypes={"experts": "bf16"}).fits
    fp8 = plan(DSV3, B200, 8, **kw, component_dtypes={"experts": "fp8"}).decode_step_s
    fp4 = plan(DSV3, B200, 8, **kw, component_dtypes={"experts": "nvfp4"}).decode_step_s
    assert fp8 > fp4


@pytest.mark.parametrize(
    "bad", [{"expert": "fp4"}, {"experts": "nvfp5"}, ["experts", "fp4"], {"head": 4}]
)
def test_component_dtypes_are_checked(bad):
    with pytest.raises(InvalidArgumentError) as e:
        plan(DSV3, B200, 8, **DPA8, seq_len=4096, component_dtypes=bad)
    assert e.value.argument == "component_dtypes"


def test_the_cli_flags(run):
    out, _ = run("plan", "deepseek-v3", "-H", "B200", "--gpus", 8, "--tp", 1, "--ep", 8,
                 "--dp-attention", "--seq-len", 4096, "--expert-dtype", "nvfp4",
                 "--attention-dtype", "fp8", "--format", "json")  # fmt: skip
    import json

    doc = json.loads(out)
    assert doc["weight_format"].endswith("attention fp8, experts nvfp4")
    kernels = {k["name"]: k for k in doc["kernels"]}
    assert kernels["routed_experts"]["dtype"] == "fp4"


def test_component_formats_are_a_searched_choice(run):
    """search(component_choices=) tries each choice beside the weights as they are; a point
    says its component_dtypes, plan of it gives its figures, and the printed plan command
    carries the component flags."""
    from mlacalc.serving.search import search

    r = search("deepseek-v3", "B200", 8, isl=2000, osl=500, tpot=0.05, modes=("aggregated",),
               component_choices=[{"experts": "nvfp4"}])  # fmt: skip
    formats = {tuple(p["component_dtypes"].items()) for p in r.points}
    assert formats == {(), (("experts", "nvfp4"),)}
    assert r.best["component_dtypes"] == {"experts": "nvfp4"}
    # nvfp4 experts fit 4 GPUs: two replicas of them (the best until the MoE classes were
    # refitted with a power-law row's experts padded one by one, c1c8015: TP4 DP-attention2
    # EP8 at 256 a group now meets the 50 ms TPOT, 49.89 ms, at 10,247 tokens/s against the
    # replicas' 9,723); plan of that point gives its figures
    fours = [p for p in r.points if p["gpus"] == 4 and p["meets_targets"]
             and p["component_dtypes"] == {"experts": "nvfp4"}]  # fmt: skip
    b = max(fours, key=lambda p: p["budget_output_tokens_per_s"])
    assert b["replicas"] == 2 and b["layout"] == "TP4 EP4"
    lay = dict(tp=b["tp"], ep=b["ep"], kv_dtype=b["kv_dtype"])
    p = plan(DSV3, B200, 4, **lay, isl=2000, osl=500, concurrency=b["concurrency"],
             component_dtypes=b["component_dtypes"])  # fmt: skip
    assert p.tpot_s == pytest.approx(b["tpot_s"], rel=1e-6)
    assert p.output_tokens_per_s == pytest.approx(b["output_tokens_per_s"], rel=1e-6)
    out, _ = run("search", "deepseek-v3", "-H", "B200", "--gpus", 8, "--isl", 2000, "--osl",
                 500, "--tpot", "50ms", "--modes", "aggregated", "--component-choice",
                 "experts=nvfp4", "--format", "json")  # fmt: skip
    import json

    assert "--expert-dtype nvfp4" in json.loads(out)["plan_command"]
    with pytest.raises(InvalidArgumentError) as e:
        search("deepseek-v3", "B200", 8, isl=2000, osl=500, component_choices=[{"gate": "fp4"}])
    assert e.value.argument == "component_choices"


def test_a_format_the_device_cannot_run_is_said():
    """nvfp4 experts on H200 (no fp4 tensor cores) are sized in nvfp4 and timed as the
    weight-only MXFP4 MoE: the plan says so; on B200 they run as fp4 and nothing is said."""
    asked = dict(seq_len=4096, batch=8, component_dtypes={"experts": "nvfp4"})
    h200 = plan("deepseek-v3", "H200", 8, **asked)
    said = [w for w in h200.warnings if w.startswith("experts in nvfp4")]
    assert len(said) == 1 and "no fp4 tensor cores" in said[0] and "w4a16_mxfp4" in said[0]
    # a stand-in, not "the kernel it runs instead": no shipped table shows an engine run NVFP4
    # experts on Hopper (a trial read it as TensorRT-LLM loading an NVFP4 checkpoint there)
    assert "timed as a stand-in, the weight-only MXFP4 MoE" in said[0]
    assert "runs instead" not in said[0]
    b200 = plan("deepseek-v3", "B200", 8, **asked)
    assert not [w for w in b200.warnings if w.startswith("experts in nvfp4")]


def test_a_chosen_weight_dtype_says_what_it_times_that_the_checkpoint_would_not():
    """``weight_dtype="fp8"`` on DeepSeek-V3 (fp8 in 128 x 128 blocks) times per-tensor fp8
    GEMMs and MoE, which the plan says (under vLLM its per-tensor fp8 MoE is 4x the
    checkpoint's block-scaled one); fp4 weights on a device without fp4 tensor cores say they
    run the weight-only kernel, as a component's format does; a dtype the device runs and the
    checkpoint does not contradict says nothing."""
    fp8 = plan("deepseek-v3", "H200", 8, weight_dtype="fp8", seq_len=4096)
    assert any("per-tensor fp8" in w and "fp8 block 128x128" in w for w in fp8.warnings)
    fp4 = plan("deepseek-v3", "H200", 8, weight_dtype="fp4", seq_len=4096)
    assert any("H200 has no fp4 tensor cores" in w and "(w4a16)" in w for w in fp4.warnings)
    b200 = plan("deepseek-v3", "B200", 8, weight_dtype="fp4", seq_len=4096)
    assert not any("tensor cores" in w or "per-tensor" in w for w in b200.warnings)
    stored = plan("deepseek-v3", "H200", 8, seq_len=4096)
    assert not any("per-tensor" in w for w in stored.warnings)


def test_mxfp4_experts_with_mxfp8_activations_run_the_mixed_format_moe():
    """``mxfp4_mxfp8`` experts (MXFP4 weights, activations quantized to MXFP8) are sized at
    4.25 bits a weight and run the ``w4a8_mxfp4`` MoE where the device has fp4 tensor cores
    (B200), the weight-only MXFP4 MoE elsewhere (H100, said). GPT-OSS's checkpoint under
    TensorRT-LLM on Blackwell runs its measured weight-only MXFP4 MoE, 3-7x its w4a8 one: the
    plan says so and names the format that times the other, under SGLang (FlashInfer's MoE)
    it says nothing."""
    mix = dict(isl=1000, osl=1000, concurrency=64.0)
    kw = dict(component_dtypes={"experts": "mxfp4_mxfp8"})
    stored = plan("gpt-oss-120b", "B200", 1, **mix)
    w4a8 = plan("gpt-oss-120b", "B200", 1, **mix, **kw)
    experts = {k["name"]: k for k in w4a8.to_dict()["kernels"]}["routed_experts"]
    assert experts["dtype"] == "w4a8_mxfp4"
    assert w4a8.tpot_s < stored.tpot_s / 2
    assert format_bits("mxfp4_mxfp8") == 4.25
    said = [w for w in stored.warnings if "w4a8_mxfp4" in w]
    assert len(said) == 1 and "mxfp4_mxfp8" in said[0]
    assert not [w for w in w4a8.warnings if "weight-only MXFP4" in w]
    sglang = plan("gpt-oss-120b", "B200", 1, **mix, engine="sglang")
    assert not [w for w in sglang.warnings if "w4a8_mxfp4" in w]
    h100 = plan("gpt-oss-120b", "H100-SXM", 1, **mix, **kw)
    assert any("H100-SXM has no" in w and "(w4a16_mxfp4: " in w for w in h100.warnings)


def test_a_checkpoint_calibrated_for_an_fp8_cache_says_so_when_planned_with_bf16():
    """NVIDIA's DeepSeek-V3.1 NVFP4 export states kv_cache_quant_algo FP8: planned with a bf16
    cache the plan says the checkpoint is calibrated for fp8 (sized as asked); with fp8, or a
    checkpoint that states nothing, it says nothing."""
    from reference_data import HF_CONFIGS_2

    import mlacalc

    m = mlacalc.load_model(HF_CONFIGS_2 / "nvidia--DeepSeek-V3.1-NVFP4.config.json")
    bf16 = plan(m, "B200", 8, kv_dtype="bf16", seq_len=4096)
    assert any("calibrated for an fp8 KV cache" in w for w in bf16.warnings)
    fp8 = plan(m, "B200", 8, kv_dtype="fp8", seq_len=4096)
    assert not any("fp8 KV cache" in w for w in fp8.warnings)
    plain = plan("deepseek-v3", "B200", 8, kv_dtype="bf16", seq_len=4096)
    assert not any("fp8 KV cache" in w for w in plain.warnings)


def test_a_checkpoint_calibrated_for_an_nvfp4_cache_says_so_as_fp8_does():
    """kv_cache_quant_algo NVFP4 had been read as no KV quantization, unsaid: planned with a
    wider cache (bf16, fp8) the plan names --kv-dtype nvfp4, report says it; with nvfp4, nothing."""
    import json

    from reference_data import HF_CONFIGS_2

    from mlacalc.models.loading import parse_upload
    from mlacalc.report import model_report

    stem = HF_CONFIGS_2 / "nvidia--DeepSeek-V3.1-NVFP4"
    quant = json.loads(stem.with_name(stem.name + ".hf_quant_config.json").read_text())
    quant["quantization"]["kv_cache_quant_algo"] = "NVFP4"
    config = stem.with_name(stem.name + ".config.json").read_bytes()
    m = parse_upload(config, "config.json", quant=json.dumps(quant).encode())
    assert m.quantization.kv_cache == "nvfp4"
    for kv in ("bf16", "fp8"):
        said = plan(m, "B200", 8, kv_dtype=kv, seq_len=4096).warnings
        assert any(
            "calibrated for an nvfp4 KV cache" in w and "--kv-dtype nvfp4" in w for w in said
        )
    assert not any(
        "calibrated for" in w for w in plan(m, "B200", 8, kv_dtype="nvfp4", seq_len=4096).warnings
    )
    assert any("--kv-dtype nvfp4" in n for n in model_report(m)["notes"])


def test_format_rules_a_reviewer_found_missing():
    """``mxfp4_mxfp8`` is the experts' grouped MoE format only (given to attention it had run
    GEMMs of a class no profile holds, at the bf16 fallback, unsaid); ``w4a16_nvfp4`` is
    sized with its scales (4.5 bits) and runs the weight-only class, as a checkpoint stored so
    does (it had been 4 bits at the fp4 tensor-core class)."""
    from mlacalc.serving.precision import check_components, format_class

    with pytest.raises(InvalidArgumentError, match="attention: mxfp4_mxfp8 is a format of the"):
        check_components({"attention": "mxfp4_mxfp8"})
    assert check_components({"experts": "mxfp4_mxfp8"}) == {"experts": "mxfp4_mxfp8"}
    assert format_bits("w4a16_nvfp4") == 4.5 and format_class("w4a16_nvfp4") == "w4a16"
    assert format_class("nvfp4") == "fp4"


@pytest.mark.parametrize("engine", ["trtllm", "sglang", "vllm"])
def test_experts_given_in_the_checkpoints_own_mxfp4_are_the_checkpoints_step(engine):
    """``--expert-dtype mxfp4`` on GPT-OSS names the format its checkpoint stores (MXFP4
    weights, bf16 activations): the same bytes, the same weight-only MXFP4 MoE, the same step
    (it had timed the fp4 tensor-core MoE: under TensorRT-LLM on B200 23.3 ms where the
    checkpoint read as stored takes 37.3), and under TensorRT-LLM the same warning. A dense
    component in mxfp4 runs the weight-only GEMM, as fp4 weights do without fp4 tensor
    cores."""
    from mlacalc.serving.precision import format_class

    mix = dict(isl=1000, osl=1000, concurrency=64.0, engine=engine)
    stored = plan("gpt-oss-120b", "B200", 1, **mix)
    flag = plan("gpt-oss-120b", "B200", 1, **mix, component_dtypes={"experts": "mxfp4"})
    experts = {k["name"]: k for k in flag.to_dict()["kernels"]}["routed_experts"]
    assert experts["dtype"] == "w4a16_mxfp4"
    assert flag.weights_per_gpu_bytes == pytest.approx(stored.weights_per_gpu_bytes, rel=1e-3)
    assert flag.tpot_s == pytest.approx(stored.tpot_s, rel=1e-3)
    said = [w for w in flag.warnings if "weight-only MXFP4 MoE" in w]
    assert len(said) == (engine == "trtllm")
    assert format_class("mxfp4") == "w4a16" and format_class("mxfp4", moe=True) == "w4a16_mxfp4"


def test_an_fp8_cache_whose_decode_kernels_are_slower_says_so():
    """SGLang's measured fp8 MLA decode on Hopper takes several times its bf16 kernel's time:
    a plan of DeepSeek-V3 on 8 H200 with an fp8 cache says so, with both decode steps at the
    largest batch a group holds (the fp8 one the slower, though it holds twice the tokens);
    under TensorRT-LLM, or with a bf16 cache, nothing is said."""
    kw = dict(seq_len=4096)
    sglang = plan("deepseek-v3", "H200", 8, kv_dtype="fp8", engine="sglang", **kw)
    (said,) = [w for w in sglang.warnings if "cache's decode kernels" in w]
    fp8_ms, bf16_ms = (float(x) for x in re.findall(r"([\d.]+) ms", said.replace(",", "")))
    assert fp8_ms > 1.2 * bf16_ms and "--kv-dtype bf16" in said and "under SGLang on H200" in said
    for other in (dict(kv_dtype="fp8", engine="trtllm"), dict(kv_dtype="bf16", engine="sglang")):
        p = plan("deepseek-v3", "H200", 8, **other, **kw)
        assert not [w for w in p.warnings if "cache's decode kernels" in w]


def test_a_cache_narrower_than_fp8_timed_by_its_slower_kernels_says_so_too():
    """SGLang's fp4 cache on H200 is timed by the fp8 cache's kernels (its FlashAttention-3
    backend converts the cache to bf16 in a kernel of its own, bound by the values converted,
    not their bytes: the same step as fp8's), 1.4x bf16's step with no word where fp8's was
    said (a capacity planner's trial). Now it is said as fp8's, naming fp8's kernels as the
    stand-in and the share of tokens a bf16 cache holds."""
    kw = dict(isl=1000, osl=1000, concurrency=64, engine="sglang")
    fp4 = plan("deepseek-v3", "H200", 8, tp=8, kv_dtype="fp4", **kw)
    (said,) = [w for w in fp4.warnings if "cache's decode kernels" in w]
    assert said.startswith("the fp4 cache's") and "the fp8 cache's measured kernels" in said
    # a serving plan's warning times its steps at the whole context (2,000 tokens), its
    # decode_step_s at the mean: said, so the two figures are not read as one (a review read
    # 44.18 ms in the warning against the plan's 40.18)
    whole = " (both steps at the whole context; the plan's decode_step_s is at the mean context)"
    assert said.endswith("which holds a quarter of the tokens" + whole)
    assert "sequences of 2,000 tokens a group" in said
    fp8 = plan("deepseek-v3", "H200", 8, tp=8, kv_dtype="fp8", **kw)
    assert fp4.decode_step_s == pytest.approx(fp8.decode_step_s, rel=0.01)
    (said8,) = [w for w in fp8.warnings if "cache's decode kernels" in w]
    assert "(the measured kernels)" in said8 and said8.endswith(
        "which holds half the tokens" + whole
    )


def test_fp4_weights_whose_kernels_are_slower_than_fp8_s_say_so():
    """TensorRT-LLM's measured B200 nvfp4 GEMMs at a few tokens take about twice its fp8 ones:
    a plan of DeepSeek-V3 on 8 B200 with fp4 weights at 64 sequences says its decode step is
    slower than fp8 weights' (both steps given, a new-user trial found fp4 the slower without
    a word); under SGLang, or on a device without fp4 tensor cores, nothing is said. The check
    is of the plan's own steps: fp8's step is the plan of fp8 weights at that batch."""
    kw = dict(kv_dtype="fp8", seq_len=4096, batch=64)
    trt = plan("deepseek-v3", "B200", 8, weight_dtype="fp4", **kw)
    said = [w for w in trt.warnings if "fp4 weights' kernels" in w]
    fp8 = plan("deepseek-v3", "B200", 8, weight_dtype="fp8", **kw)
    if trt.decode_step_s < 1.1 * fp8.decode_step_s:
        assert not said  # the rule says nothing where fp4 is not the slower
        return
    (said,) = said
    fp4_ms, fp8_ms = (float(x) for x in re.findall(r"([\d.]+) ms", said.replace(",", "")))
    assert fp4_ms == pytest.approx(trt.decode_step_s * 1e3, rel=1e-3)
    assert fp8_ms == pytest.approx(fp8.decode_step_s * 1e3, rel=1e-3)
    assert "--weight-dtype fp8" in said and "under TensorRT-LLM on B200" in said
    for engine, hw in (("sglang", "B200"), ("trtllm", "H200")):
        p = plan("deepseek-v3", hw, 8, weight_dtype="fp4", engine=engine, **kw)
        assert not [w for w in p.warnings if "fp4 weights' kernels" in w]


def test_an_fp8_cache_warning_compares_at_the_batch_asked():
    """With a batch asked, the slower-fp8-cache warning compares both steps at that batch (a
    new-user trial read 574 sequences where it had asked 64); without one, at the most a group
    holds."""
    kw = dict(seq_len=4096, kv_dtype="fp8", engine="sglang")
    (said,) = [
        w for w in plan("deepseek-v3", "H200", 8, batch=64, **kw).warnings if "cache's decode" in w
    ]
    assert "a decode step of 64 sequences" in said and "(at the batch asked)" in said
    (said,) = [w for w in plan("deepseek-v3", "H200", 8, **kw).warnings if "cache's decode" in w]
    assert "(at the most the cache holds)" in said


@pytest.mark.parametrize("kv", ["nvfp4", "int8", "int4"])
def test_a_cache_no_table_times_runs_the_fp8_decode_kernel_and_says_so(kv):
    """No measured table times a decode kernel over an fp4 or integer cache: it had run the
    bf16-cache class (an nvfp4 cache of Qwen3-8B on H200, 41.7 MB a call, 1.65 ms against
    fp8's 1.00 ms over 73.7 MB), unsaid. It runs the fp8-cache kernel over its own bytes, never
    slower than fp8's where it reads fewer, and the plan says so."""
    kw = dict(isl=2000, osl=500, concurrency=16)
    fp8 = plan("qwen3-8b", "H200", 1, kv_dtype="fp8", **kw)
    p = plan("qwen3-8b", "H200", 1, kv_dtype=kv, **kw)
    said = [w for w in p.warnings if w.startswith(f"KV cache in {kv}:")]
    assert len(said) == 1 and "fp8-cache kernel" in said[0]
    assert not [w for w in fp8.warnings if w.startswith("KV cache in")]
    assert p.decode_step_s <= fp8.decode_step_s * (1 + 1e-9)
    bits = resolve_kv_layout(kv).bits
    assert (p.decode_step_s < fp8.decode_step_s) == (bits < 8)


def test_a_model_whose_mtp_layers_are_not_counted_says_so():
    """Step-3.7-Flash's config has 3 MTP layers its Hugging Face class does not build (not
    counted, num_nextn_predict_layers 0): drafts are refused saying so, not that the
    checkpoint has none."""
    with pytest.raises(
        InvalidArgumentError, match="not counted: its Hugging Face class builds none"
    ):
        plan("step-3.7-flash", "B200", 8, seq_len=4096, mtp_tokens=2)


def test_a_weight_dtype_asked_quantizes_the_layers_not_the_embedding_or_head():
    """``--weight-dtype fp8`` on Llama-3-8B: the layers' linear weights in fp8, the embedding
    and the head kept bf16 (2 x 128,256 x 4,096 x 2 B; fp8 had sized them 1,050,673,152 B and
    timed the head as an fp8 GEMM, 203.3 us a step at concurrency 16 on H100, now 389.3 us);
    ``--head-dtype fp8`` quantizes the head; DeepSeek-V3's fp8 keeps its bf16-stored head."""
    args = dict(isl=1024, osl=256, concurrency=16)
    p = plan("llama-3-8b", "H100", 1, weight_dtype="fp8", **args)
    assert p.memory["weights_embedding_head"] == 2 * 128_256 * 4_096 * 2 == 2_101_346_304
    assert p.weight_format == "fp8, embeddings bf16, head bf16"
    head = {k["name"]: k for k in p.kernels}["lm_head"]
    assert head["dtype"] == "bf16"
    q = plan("llama-3-8b", "H100", 1, weight_dtype="fp8", component_dtypes={"head": "fp8"}, **args)
    assert q.memory["weights_embedding_head"] == 128_256 * 4_096 * 3
    assert {k["name"]: k for k in q.kernels}["lm_head"]["dtype"] == "fp8"
    r = plan("llama-3-8b", "H100", 1, weight_dtype="bf16", **args)
    assert r.weight_format == "bf16" and r.memory["weights_embedding_head"] == 2_101_346_304
    kv = resolve_kv_layout("bf16")
    km = {k.name: k for k in StepModel(DSV3, LAY, "fp8", kv, B200).kernels(dec_B=64, dec_S=2000)}
    assert km["lm_head"].dtype == "bf16" and km["o_proj"].dtype == "fp8"


@pytest.mark.parametrize(
    ("model", "hw", "gpus", "dtype"),
    [
        ("deepseek-v3", "B200", 8, "fp4"),
        ("llama-3-8b", "H100", 1, "fp8"),
        ("gemma-3-1b", "H100", 1, "fp8"),
    ],
)
def test_roofline_and_plan_time_the_head_by_one_rule(model, hw, gpus, dtype):
    """A weight dtype asked leaves the output head as the checkpoint stores it on every route
    (cost.quant.kept_head_format): predict_time (roofline) times the same bf16 head GEMM as
    plan, byte for byte and second for second. DeepSeek-V3 --weight-dtype fp4 on B200, 64
    sequences of 4,096: roofline had timed an fp4 head, 458.53 MiB in 107.4 us, where plan
    times it bf16, 1,870,823,424 B in 321.3 us; Gemma 3 1B ties its head to the embedding,
    whose table is kept bf16: the head reads it so (plan had read it in fp8)."""
    from mlacalc.timemodel.predict import predict_time

    m = as_model(model)
    layout = dict(tp=1, dp=gpus, ep=gpus, dp_attention=gpus > 1)
    p = plan(m, hw, gpus, **layout, weight_dtype=dtype, isl=4096, osl=256, concurrency=64 * gpus)
    served = {k["name"]: k for k in p.kernels}["lm_head"]
    batch = p.decode_batch // gpus
    r = predict_time(m, hw, "decode", 4096, batch, scope="model", weight_dtype=dtype)
    head = {o.name: o for o in r.ops}["lm_head"]
    V, d = m.vocab_size, m.hidden_size
    assert served["dtype"] == "bf16" and served["flops_per_call"] == head.flops
    assert served["bytes_per_call"] == head.bytes == V * d * 2 + batch * (d + V) * 2
    assert served["seconds"] == pytest.approx(head.seconds, rel=1e-9)
    assert r.weights == f"{dtype}, head bf16"


def test_a_tied_head_is_the_embeddings_table_in_time_and_memory(run):
    """A head tied to the embedding is one table: the engines compute the logits with the
    embedding's as loaded (precision._check_present), so a head format alone is refused,
    naming the flag and the fix, and the embedding's format times and sizes both. Gemma 3 1B
    --head-dtype fp8 had timed lm_head as an fp8 GEMM (0.121 ms) while memory held one bf16
    table (576 MiB; bf16 it times 0.227 ms), under "weights (bf16, head fp8)"."""
    m = as_model("gemma-3-1b")
    with pytest.raises(InvalidArgumentError, match="head: Gemma 3 1B ties its output head"):
        plan(m, "H100", 1, seq_len=4096, component_dtypes={"head": "fp8"})
    _, err = run("plan", "gemma-3-1b", "-H", "H100", "--gpus", 1, "--head-dtype", "fp8", code=2)
    assert err.startswith("mlacalc: error: Invalid value for --head-dtype: Gemma 3 1B ties")
    assert "--embedding-dtype" in err and "Traceback" not in err
    # the embedding's format is the head's, in time and in memory
    p = plan(m, "H100", 1, seq_len=4096, component_dtypes={"embeddings": "fp8"})
    assert {k["name"]: k for k in p.kernels}["lm_head"]["dtype"] == "fp8"
    assert p.memory["weights_embedding_head"] == m.vocab_size * m.hidden_size
    # a GPU step built with a head format anyway reads the embedding's table (bf16 here)
    kv = resolve_kv_layout("bf16")
    step = StepModel(m, make_layout(m, 1), None, kv, load_hardware("H100"),
                     component_dtypes={"head": "fp8"})  # fmt: skip
    assert {k.name: k for k in step.kernels(dec_B=16, dec_S=1000)}["lm_head"].dtype == "bf16"


def test_plans_help_says_a_tied_head_takes_the_embeddings_format(run):
    """--head-dtype on a tied head is refused (one table, the embedding's); the help says so
    beside the flag and beside --weight-dtype's 'quantizes the head' (it said neither)."""
    text = " ".join(run("plan", "--help")[0].split())
    assert "A head tied to the embedding is its table: --embedding-dtype." in text
    assert (
        "(--head-dtype fp8 quantizes the head; a head tied to the embedding, --embedding-dtype)"
        in text
    )


def test_nvfp4_experts_under_tensorrt_llm_on_blackwell_say_which_moe_kernel_is_timed():
    """NVFP4 experts under TensorRT-LLM on Blackwell are timed as its CUTLASS NVFP4 MoE (the
    default backend's kernel); the plan says so and how much faster the TensorRT-LLM-gen MoE
    measures, a new-user trial having read fp4 slower than fp8 without a word. The figures it
    quotes are the shipped B200 table's: the median ratio of the two kernels by token count."""
    fp4 = plan("deepseek-v3", "B200", 8, seq_len=4096, batch=64, weight_dtype="fp4")
    said = [w for w in fp4.warnings if "TensorRT-LLM-gen" in w]
    assert len(said) == 1 and "CUTLASS" in said[0] and "0.47-0.72x" in said[0]
    for other in (
        plan("deepseek-v3", "B200", 8, seq_len=4096, batch=64, weight_dtype="fp8"),
        plan("deepseek-v3", "B200", 8, seq_len=4096, batch=64, weight_dtype="fp4", engine="sglang"),
        plan("deepseek-v3", "H200", 8, seq_len=4096, batch=64, weight_dtype="fp4"),
    ):
        assert not [w for w in other.warnings if "TensorRT-LLM-gen" in w]
    pytest.importorskip("pyarrow")
    import numpy as np
    from reference_data import MEASURED

    from mlacalc.measured.tables import load_measured

    (t,) = [t for t in load_measured(MEASURED / "b200_sxm" / "moe").tables if t.engine == "trtllm"]
    src, dt = t.column("kernel_source").astype(str), t.column("moe_dtype").astype(str)
    keys = ("num_tokens", "hidden_size", "inter_size", "topk", "num_experts", "moe_tp_size",
            "moe_ep_size", "distribution")  # fmt: skip
    calls: dict[str, dict[tuple, float]] = {"cutlass": {}, "gen": {}}
    for name, source in (("cutlass", "moe_torch_flow_cutlass"),
                         ("gen", "moe_torch_flow_min_latency")):  # fmt: skip
        pick = np.flatnonzero((src == source) & (dt == "nvfp4"))
        cols = [t.column(k)[pick].tolist() for k in keys]
        calls[name] = dict(zip(zip(*cols, strict=True), t.seconds[pick].tolist(), strict=True))
    both = sorted(set(calls["cutlass"]) & set(calls["gen"]))
    assert len(both) == 36045
    by_tokens: dict[float, list[float]] = {}
    for k in both:
        by_tokens.setdefault(k[0], []).append(calls["gen"][k] / calls["cutlass"][k])
    medians = [float(np.median(r)) for r in by_tokens.values()]
    assert round(min(medians), 2) == 0.47 and round(max(medians), 2) == 0.72


def test_a_checkpoints_fp8_cache_under_trtllm_says_the_engine_runs_it():
    """Kimi-K2.6 NVFP4 declares kv_cache_quant_algo FP8: the KV dtype stays bf16 by default
    (docs/serving.md says why), and under TensorRT-LLM the warning says that engine serves
    the fp8 cache by default (from recall), so --kv-dtype fp8 sizes what it runs; vLLM's
    warning does not say so, and an fp8 cache says nothing (it said the same under every
    engine before)."""
    from reference_data import HF_CONFIGS_2

    import mlacalc

    m = mlacalc.load_model(HF_CONFIGS_2 / "nvidia--Kimi-K2.6-NVFP4.config.json")
    said = "TensorRT-LLM serves such a checkpoint with the fp8 cache by default"
    trt = plan(m, "B200", 8, engine="trtllm", seq_len=4096)
    assert trt.kv_layout == "bf16"
    assert any(said in w and "--kv-dtype fp8 sizes what it runs" in w for w in trt.warnings)
    vllm = plan(m, "B200", 8, engine="vllm", seq_len=4096)
    assert any("calibrated for an fp8 KV cache" in w for w in vllm.warnings)
    assert not any(said in w for w in vllm.warnings)
    fp8 = plan(m, "B200", 8, engine="trtllm", kv_dtype="fp8", seq_len=4096)
    assert not any("fp8 KV cache" in w for w in fp8.warnings)


def test_a_checkpoints_own_mxfp4_experts_are_searched_under_mxfp8_activations():
    """GPT-OSS's MXFP4 experts on Blackwell: a search tries the same bytes run as the
    ``w4a8_mxfp4`` MoE (``experts: mxfp4_mxfp8``, each engine's B200 profile holds the class)
    beside the default weight-only kernel (a trial's B200 search chose a re-quantized fp8 and
    never tried it); not on Hopper (no fp4 tensor cores) nor for a checkpoint of other experts.
    A point whose weights are not the checkpoint's says it re-quantizes it."""
    from mlacalc.serving.plan_checks import OWN_W4A8, own_block_scaled, requantized_words
    from mlacalc.serving.provenance import engine_profile_of
    from mlacalc.serving.search import check_search

    oss = as_model("gpt-oss-120b")
    for engine in ("trtllm", "sglang", "vllm"):
        assert own_block_scaled(oss, B200, engine_profile_of(None, engine, B200)[0])
    h100 = load_hardware("H100-SXM")
    assert not own_block_scaled(oss, h100, engine_profile_of(None, "trtllm", h100)[0])
    assert not own_block_scaled(DSV3, B200, engine_profile_of(None, "trtllm", B200)[0])
    args = dict(gpus=[1], isl=2000, osl=500, ttft=2.0, tpot=0.05, modes=("aggregated",),
                weight_dtypes=None, kv_dtypes=("fp8",), overlaps=("none",), batches=(1,),
                memory_reserve=0.1, page_size=16, prefill_pass="fused", output_lag_steps=0,
                profile=None)  # fmt: skip
    req = check_search("gpt-oss-120b", "B200", **args)
    assert req.components == ((), OWN_W4A8) and req.weight_dtypes == ("bf16", "fp8")
    assert check_search("gpt-oss-120b", "H100-SXM", **args).components == ((),)
    said = requantized_words(oss, "fp8", dict(OWN_W4A8))
    assert said.startswith("re-quantizes gpt-oss-120b's checkpoint (mxfp4 experts) to weights fp8")
    assert "experts mxfp4_mxfp8 (the checkpoint's own bytes)" in said
    assert requantized_words(oss, None, dict(OWN_W4A8)) == ""
    assert requantized_words(DSV3, None, {"experts": "nvfp4"}).endswith("not the released one")
    assert requantized_words(as_model("llama-3-8b"), "fp8", {}) == ""


def test_a_served_per_tensor_fp8_gemm_is_timed_with_a_static_quantize():
    """A step's per-tensor fp8 GEMM takes one scaling pass of its input (a calibrated
    checkpoint's input_scale); TensorRT-LLM's B200 gemm_perf fp8 rows a dynamic amax too, two
    kernels more: a trial read the plan's 12.68 us against the table's 21.1 us at m 64, k 8,192,
    n 2,048. The plan's kernel note says so where the step holds such GEMMs."""
    from types import SimpleNamespace

    import numpy as np

    from mlacalc.cli.plan_cmd import static_fp8_note
    from mlacalc.timemodel.kernel_time import predict_batch
    from mlacalc.words.kernels import KernelBatch

    def gemm(**quant):
        m, n, k = 64.0, 2048.0, 8192.0
        shape = {"m": m, "n": n, "k": k, **quant}
        return KernelBatch("gemm", "fp8", np.array([2 * m * n * k]),
                           np.array([m * k + k * n + 2 * m * n]), np.ones(1),
                           {x: np.array([float(v)]) for x, v in shape.items()})  # fmt: skip

    step = predict_batch(gemm(), B200, "fit-b200-sxm")[0]
    dynamic = gemm(quantize_input=1, quant_passes=2, quant_launches=3, quant_atomics=64)
    table = predict_batch(dynamic, B200, "fit-b200-sxm")[0]
    assert step == pytest.approx(12.6e-6, rel=0.02) and table == pytest.approx(21.1e-6, rel=0.06)
    fp8 = SimpleNamespace(kernels=[{"kind": "gemm", "dtype": "fp8"}])
    assert "static input scale" in static_fp8_note(fp8)
    assert static_fp8_note(SimpleNamespace(kernels=[{"kind": "gemm", "dtype": "fp4"}])) == ""


@pytest.mark.parametrize(
    ("model", "hw", "kv", "said"),
    [
        ("llama-3-8b", "A100-SXM-80GB", "fp8", "needs fp8 tensor cores (Ada, Hopper or Blackwell)"),
        ("llama-3-8b", "A100-SXM-80GB", "nvfp4", "(from recall of its docs; there: int8)"),
        ("deepseek-v2-lite", "A100-SXM-80GB", "fp8", "none there"),
        ("llama-3-8b", "H200", "fp8", None),
        ("llama-3-8b", "A100-SXM-80GB", "int8", None),
    ],
)
def test_trtllm_kv_cache_needs_its_tensor_cores(model, hw, kv, said):
    """TensorRT-LLM's FP8 KV cache is Ada's, Hopper's and Blackwell's (Ampere: INT8 only), its
    NVFP4 cache Blackwell's: an A100 plan of an fp8 cache said nothing, and of an nvfp4 one
    offered fp8 there."""
    from mlacalc import load_model
    from mlacalc.serving.plan_checks import engine_runs_kv, format_warnings

    m = load_model(model)
    dev = load_hardware(hw)
    warned = [w for w in format_warnings(m, dev, "trtllm", kv) if w.startswith("--kv-dtype")]
    assert engine_runs_kv(m, kv, "trtllm", dev) == (said is None)
    if said is not None:
        assert len(warned) == 1 and said in warned[0] and "fp8, " not in warned[0]


def test_search_takes_trtllm_gen_for_gpt_oss_own_mxfp4_on_b200():
    """GPT-OSS's own MXFP4 experts under MXFP8 activations (the w4a8_mxfp4 MoE, the choice a
    B200 search adds) take TensorRT-LLM-gen's MoE: moe_backend="trtllm-gen" is checked against
    that choice too (refused when the choice was added after the check)."""
    from mlacalc import search

    r = search("gpt-oss-120b", "B200", 1, isl=2000, osl=500, ttft=2.0, tpot=0.05,
               moe_backend="trtllm-gen", engine="trtllm", weight_dtypes=["fp8"])  # fmt: skip
    assert r.best["component_dtypes"] == {"experts": "mxfp4_mxfp8"}


def test_fp8_formats_on_a100_are_said_as_fp8_not_as_mxfp4():
    """fp8_block experts and GEMMs on A100 run w8a16: the warning named "the weight-only MXFP4
    MoE" and "without fp4 tensor cores" (words written for 4-bit float formats)."""
    from mlacalc import load_model
    from mlacalc.serving.plan_checks import format_warnings

    m = load_model("qwen3-30b-a3b")
    comps = {"experts": "fp8_block", "attention": "fp8_block"}
    said = format_warnings(m, load_hardware("A100-SXM-80GB"), "trtllm", "bf16", None, comps)
    said = [w for w in said if "fp8_block:" in w]
    assert len(said) == 2, said
    assert all("without fp8 tensor cores" in w and "MXFP4" not in w for w in said), said
    assert any("the weight-only MoE (w8a16)" in w for w in said), said
