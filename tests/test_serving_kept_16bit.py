"""The tensors kept at 16 bits under a narrower weight dtype (cost.quant's never-quantized list:
MoE routers, every norm, attention's own included) are sized and timed in bf16 on every
route: memory's parts against an independent meta-device count (transformers), and the router
kernel's class equal to its memory's format (the checkpoint path's, which times it bf16)."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest

import mlacalc
from mlacalc.cost.model_step import step_kernels
from mlacalc.hardware.catalogue import load_hardware
from mlacalc.serving.gpu_step import StepModel
from mlacalc.serving.layout import make_layout, weight_bytes_by_part
from mlacalc.words.dtypes import resolve_kv_layout

CONFIGS = Path(__file__).parent / "data" / "hf-configs"


def _meta_count(path: Path) -> Counter:
    """Parameters by part of the model transformers builds on the meta device: attention's
    norms apart from the rest of attention, the router with its correction bias."""
    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    d = json.loads(path.read_text())
    d.pop("quantization_config", None)
    d.pop("auto_map", None)
    cfg = transformers.AutoConfig.for_model(d.pop("model_type"), **d)
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(cfg)
    c: Counter = Counter()
    named = list(model.named_parameters()) + list(model.named_buffers())
    for n, p in named:
        if "e_score_correction_bias" in n or re.search(r"mlp\.gate\.weight$", n):
            c["router"] += p.numel()
        elif "self_attn" in n and isinstance(p, torch.nn.Parameter):
            c["attention_norm" if "norm" in n else "attention"] += p.numel()
    return c


@pytest.mark.parametrize("name", ["qwen3-8b", "qwen3-30b-a3b", "deepseek-v2-lite"])
@pytest.mark.parametrize("dtype", ["fp8", "fp4"])
def test_attention_norms_and_routers_sized_at_16_bits(name, dtype):
    """Attention under a narrower dtype: its projections at the dtype's bits, its norms at 16
    (qwen3-8b's 36 x (128 + 128) q/k norms, 9,216 weights, had been 1 byte each under fp8);
    the routers (with DeepSeek's correction bias) at 16, all from the meta-device count."""
    path = CONFIGS / f"{name}.config.json"
    c = _meta_count(path)
    m = mlacalc.load_model(str(path))
    parts = weight_bytes_by_part(m, make_layout(m, 1), dtype)
    bits = {"fp8": 8, "fp4": 4}[dtype]
    assert c["attention_norm"] > 0
    assert parts["attention"] == -(-(c["attention"] * bits + c["attention_norm"] * 16) // 8)
    assert parts.get("router", 0) == 2 * c["router"]


def test_deepseek_v3_attention_norms_at_16_bits():
    """DeepSeek-V3's q_a / kv_a layernorms, 61 x (1,536 + 512) = 124,928 weights (the
    meta-device count the review took), 2 bytes each under fp8, on every TP rank (whole)."""
    m = mlacalc.load_model(str(CONFIGS / "deepseek-v3.config.json"))
    for tp in (1, 8):
        lay = make_layout(m, tp)
        fp8 = weight_bytes_by_part(m, lay, "fp8")["attention"]
        bf16 = weight_bytes_by_part(m, lay, "bf16")["attention"]
        assert bf16 - fp8 == (bf16 - 2 * 124_928) // 2  # only the projections halve


@pytest.mark.parametrize("dtype", ["fp8", "fp4"])
def test_router_kernel_dtype_is_its_memorys(dtype):
    """The router GEMM under --weight-dtype fp8 had been timed as an fp8 GEMM (0.523 ms of a
    DeepSeek-V3 H200 TP8 step) while memory held it in bf16; it now reads bf16 weights in the
    bf16 class, as the fp8 checkpoint times it (0.382 ms)."""
    m = mlacalc.load_model("deepseek-v3")
    ks = {k.name: k for k in step_kernels(m, "decode", 2048, batch=8, weight_dtype=dtype)}
    stored = {k.name: k for k in step_kernels(m, "decode", 2048, batch=8)}
    router = ks["router"]
    assert router.dtype == stored["router"].dtype == "bf16"
    assert router.bytes == stored["router"].bytes  # the checkpoint keeps the router bf16 too
    lay = make_layout(m, 1)
    assert (
        weight_bytes_by_part(m, lay, dtype)["router"]
        == weight_bytes_by_part(m, lay, "bf16")["router"]
    )
    hw = load_hardware("H200")
    step = StepModel(m, make_layout(m, 8), dtype, resolve_kv_layout("bf16"), hw)
    specs = {s.name: s for s in step.specs(dec_B=8, dec_S=2048)}
    assert specs["router"].dtype == "bf16"
    assert specs["routed_experts"].dtype != "bf16"  # the experts keep the asked format


def test_norm_and_router_kernels_read_the_same_bytes_whatever_the_weight_dtype():
    """DeepSeek-V3's norms (the latent q_a / kv_a ones had read 1 byte a weight under fp8:
    4,608 and 1,536 B of a 9,216 and 3,072 B kernel) and router read the same bytes under
    fp8, bf16 and the fp8 checkpoint, all in the bf16 class."""
    names = ("input_norm", "q_a_layernorm", "kv_a_layernorm", "post_attention_norm", "router")
    by = {}
    for w in ("fp8", "fp4", "bf16", None):
        ks = {k.name: k for k in step_kernels("deepseek-v3", "decode", 4096, weight_dtype=w)}
        by[w] = [(ks[n].bytes, ks[n].dtype) for n in names]
    assert by["fp8"] == by["fp4"] == by["bf16"] == by[None]
    assert by["fp8"][1] == (9_216, "bf16") and by["fp8"][2] == (3_072, "bf16")


def test_mtp_layers_norms_and_router_at_16_bits():
    """DeepSeek-V3's MTP layer keeps 1,873,152 weights in bf16 under fp8 (by hand: enorm,
    hnorm, shared_head.norm, input and post-attention norms 5 x 7,168, q_a / kv_a layernorms
    1,536 + 512, router 256 x 7,168 and its 256 correction biases); they had been 1 byte."""
    m = mlacalc.load_model(str(CONFIGS / "deepseek-v3.config.json"))
    kept = 5 * 7_168 + 1_536 + 512 + 256 * 7_168 + 256
    assert kept == 1_873_152
    lay = make_layout(m, 1)
    bf16 = weight_bytes_by_part(m, lay, "bf16", include_mtp=True)["mtp"]
    fp8 = weight_bytes_by_part(m, lay, "fp8", include_mtp=True)["mtp"]
    assert fp8 == (bf16 - 2 * kept) // 2 + 2 * kept


@pytest.mark.parametrize("fmt", ["fp8", "nvfp4"])
def test_attention_in_a_format_of_its_own_keeps_its_norms_at_16_bits(fmt):
    """--attention-dtype (component_dtypes) sizes attention's projections in the format and
    its norms at 16 bits, as --weight-dtype does: qwen3-8b's 9,216 q/k-norm weights had been
    sized at the format's bits."""
    from mlacalc.serving.precision import component_weight_bytes, format_bits

    m = mlacalc.load_model(str(CONFIGS / "qwen3-8b.config.json"))
    lay = make_layout(m, 1)
    bf16 = weight_bytes_by_part(m, lay, "bf16")["attention"]
    got = component_weight_bytes(m, lay, None, {"attention": fmt})["attention"]
    norms = 36 * (128 + 128)
    bits = format_bits(fmt)
    assert got == -(-int(((bf16 // 2 - norms) * bits + norms * 16) * 8) // 64)
    if fmt == "fp8":
        assert got == weight_bytes_by_part(m, lay, "fp8")["attention"]


@pytest.mark.parametrize("name", ["deepseek-v3", "llama-3-70b", "qwen3-next-80b-a3b"])
@pytest.mark.parametrize("dtype", ["fp8", "fp4", "bf16"])
def test_report_and_plan_size_one_model_alike(name, dtype):
    """``mlacalc report``'s weights and the planner's at one GPU are one total, to the byte,
    MTP layers apart and all: under a narrower dtype both keep the norms and routers at 16
    bits and the embedding and head as stored (cost.params.kept_parts). Report had sized
    every parameter at the dtype: DeepSeek-V3 at fp8 671,026,419,200 B where plan holds
    672,987,229,184 (1,960,809,984 B apart: the norms, routers, embedding and head)."""
    from mlacalc.report import model_report
    from mlacalc.serving.precision import component_weight_bytes, kept_components

    m = mlacalc.load_model(name)
    w = model_report(m, weight_dtype=dtype, phases=["decode"])["weights"]
    lay, kept = make_layout(m, 1), kept_components(m, dtype, {})
    plan = component_weight_bytes(m, lay, dtype, kept)
    assert w["total_bytes"] == sum(plan.values())
    with_mtp = sum(component_weight_bytes(m, lay, dtype, kept, include_mtp=True).values())
    assert w["total_bytes"] + w["mtp_bytes"] == with_mtp
    parts = {k["part"]: k["bits"] for k in w["kept"]}
    if dtype == "bf16":
        assert parts == {}
    else:  # the kept parts as the report says them, each in 16 bits, the rest in the dtype
        assert set(parts) >= {"embedding"} and set(parts.values()) == {16}
        rest = mlacalc.param_counts(m).total - sum(k["parameters"] for k in w["kept"])
        assert w["total_bytes"] == rest * (8 if dtype == "fp8" else 4) // 8 + sum(
            k["bytes"] for k in w["kept"]
        )


def test_report_and_plan_agree_on_one_gpu():
    """A whole plan on one GPU holds the bytes report states (Llama-3-70B in fp8 on an H200)."""
    from mlacalc.report import model_report

    p = mlacalc.plan("llama-3-70b", "H200", 1, weight_dtype="fp8", seq_len=4096, batch=1)
    w = model_report("llama-3-70b", weight_dtype="fp8", phases=["decode"])["weights"]
    assert p.weights_per_gpu_bytes == w["total_bytes"] == 72_656_371_712
    assert "but the norms (1,318,912) in 16 bits" in w["summary"]


def test_a_16_bit_cast_keeps_nothing_as_stored():
    """An engine serving a 16-bit dtype casts every tensor: GPT-2 (stored fp32) under bf16 is
    every parameter in 2 bytes, 248,879,616 B, in report and plan alike (it had kept the
    embedding in 32 bits: 327,647,232 B). Quantizing below 16 bits still keeps it as stored."""
    from mlacalc.report import model_report
    from mlacalc.serving.precision import component_weight_bytes, kept_components

    m = mlacalc.load_model("gpt2")
    for dtype in ("bf16", "fp16"):
        assert kept_components(m, dtype, {}) == {}
        w = model_report(m, weight_dtype=dtype, phases=["decode"])["weights"]
        assert w["kept"] == [] and w["summary"] == f"every parameter in {dtype}"
        assert w["total_bytes"] == 2 * mlacalc.param_counts(m).total == 248_879_616
        plan = component_weight_bytes(m, make_layout(m, 1), dtype, {})
        assert sum(plan.values()) == w["total_bytes"]
    assert kept_components(m, "fp8", {}) == {"embeddings": "fp32"}
    w = model_report(m, weight_dtype="fp8", phases=["decode"])["weights"]
    assert {k["part"]: k["bits"] for k in w["kept"]} == {"norms": 16, "embedding": 32}


def _layered_attention(m):
    """Each decoder layer's attention tensors (the main layers, MTP apart)."""
    from mlacalc.models.tensors import part_of, tensors

    out: dict[int, list] = {}
    for t in tensors(m):
        if part_of(t.name) == "attention" and ".layers." in t.name:
            out.setdefault(int(t.name.split(".layers.", 1)[1].split(".", 1)[0]), []).append(t)
    return out


@pytest.mark.parametrize("name", mlacalc.shipped_models())
def test_attention_norms_take_their_tensors_share(name):
    """One rule splits attention's tensors over TP for the parameters a rank holds and for its
    norms kept at 16 bits: every layer's tensors, each at :func:`_attention_tensor_share`, add
    up to the layer's share of parameters (the norms, by hand:
    test_kimi_linear_attention_norms_by_hand and the DeepSeek-V4 test below). The norms had
    had their own rule: DeepSeek-V4's at fp8 TP8 37,698 weights where its latent and
    indexer norms, whole on every rank, are 160,000; Kimi-Linear's delta-net output norms
    whole (5,760) where its layers split over TP (3,408)."""
    from mlacalc.serving import layout as L

    m = mlacalc.load_model(name)
    kinds = L.layer_pattern_of(m)
    layers = _layered_attention(m)
    per_layer = L._layer_params(m)
    for tp in (1, 2, 8):
        if m.num_attention_heads % tp or not L.tp_splits_heads(m, tp):
            continue
        for i, ts in layers.items():
            shares = [L._attention_tensor_share(m, kinds[i], tp, t) for t in ts]
            if L.arch_of(m) is not None:
                held = sum(t.numel * f for t, f in zip(ts, shares))
                want = per_layer[i]["attention"] * L._attention_share(m, kinds[i], tp)
                assert held == want, (name, tp, i)


def test_kimi_linear_attention_norms_by_hand():
    """Kimi-Linear-48B-A3B's attention norms kept at 16 bits, counted by hand: 6 MLA layers'
    kv_a_layernorm (512, whole on every rank) = 3,072, and 21 delta-net layers' o_norm (128,
    split over TP with their layer) = 2,688 / tp: 5,760 / 4,416 / 3,408 at TP 1 / 2 / 8.
    (This replaces an assert that summed the tensors' shares as _attention_norms does, and
    could not fail.)"""
    from mlacalc.serving import layout as L

    m = mlacalc.load_model("kimi-linear-48b-a3b")
    got = [L._attention_norms(m, tp, range(m.num_hidden_layers)) for tp in (1, 2, 8)]
    assert got == [3072 + 2688 // tp for tp in (1, 2, 8)] == [5760, 4416, 3408]


def test_deepseek_v4_attention_norms_whole_on_every_rank():
    """DeepSeek-V4-Pro keeps 61 x (1,536 q_a_norm + 512 kv_norm + 512 compressor kv_norm) +
    30 CSA indexers' 128 kv_norm = 160,000 norm weights whole on each TP rank (only the query
    heads' tensors split: cost.compressed.compressed_attention_split), 2 bytes each under fp8:
    TP8 fp8 attention 4,241,907,731 -> 4,242,030,032 B (the norms had 37,698 weights a rank)."""
    from mlacalc.serving.layout import attention_norm_params

    m = mlacalc.load_model("deepseek-v4-pro")
    assert 61 * (1_536 + 512 + 512) + 30 * 128 == 160_000
    for tp in (1, 2, 8):
        assert attention_norm_params(m, make_layout(m, tp)) == 160_000
    assert weight_bytes_by_part(m, make_layout(m, 8), "fp8")["attention"] == 4_242_030_032


def test_deepseek_v4_checkpoint_attention_splits_tensor_by_tensor():
    """DeepSeek-V4-Pro as its checkpoint stores it (no --weight-dtype): each attention tensor
    at its own format, the query heads' tensors (q_b_proj, o_a_proj, o_b_proj, sinks) over TP
    and the rest whole, by hand from the tensors. The layers had taken their share of the
    parameters in bytes, whole and split tensors alike: TP8 4,246,756,104 B where the tensors
    make 4,259,010,464 (12.25 MB more a GPU), TP2 10,777,846,533 -> 10,784,849,024."""
    from mlacalc.cost.quant import checkpoint_tensors, tensor_bytes
    from mlacalc.models.tensors import part_of

    m = mlacalc.load_model("deepseek-v4-pro")
    heads = (".self_attn.q_b_proj.", ".self_attn.o_a_proj.", ".self_attn.o_b_proj.", ".sinks")
    got = {2: 10_784_849_024, 8: 4_259_010_464}
    for tp, want in got.items():
        by_hand = sum(
            sum(tensor_bytes(t, m.quantization)) / (tp if any(h in t.name for h in heads) else 1)
            for t in checkpoint_tensors(m)
            if part_of(t.name) == "attention" and ".layers." in t.name
        )
        assert round(by_hand) == want
        assert weight_bytes_by_part(m, make_layout(m, tp), None)["attention"] == want
