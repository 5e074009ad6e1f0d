"""A model keeps its checkpoint's quantization, and weight bytes follow it.

The exact checkpoint bytes of DeepSeek-V3 (fp8, 128x128 block scales), GPT-OSS-120B (MXFP4
experts) and Kimi-K2 Thinking (compressed-tensors int4 groups of 32) are computed here a
second way, by hand from the published widths (every projection matrix written out, the
scheme's arithmetic applied), anchored on the exact parameter totals recounted from the
published configs (671,026,419,200 and 1,026,408,232,448) or that the Hugging Face
implementation holds (GPT-OSS, ``tests/test_reference_hf.py``).
With torch and transformers installed, the same schemes applied to the tensors of the
Hugging Face models built on the meta device give the same bytes.
"""

from __future__ import annotations

import json
import math

import pytest
from reference_data import HF_CONFIGS

import mlacalc
from mlacalc.cost.quant import checkpoint_part_bytes, checkpoint_weights, quantization_scheme
from mlacalc.words.errors import ConfigError

CONFIGS = HF_CONFIGS


def _raw(name: str) -> dict:
    return json.loads((CONFIGS / f"{name}.config.json").read_text(encoding="utf-8"))


def _k25_scheme() -> dict:
    """Kimi-K2.5's quantization_config (in its text_config)."""
    return _raw("kimi-k2.5")["text_config"]["quantization_config"]


def _fp8(out: int, inp: int) -> int:
    """One fp8 byte per value and a float32 scale per 128 x 128 block."""
    return out * inp + 4 * math.ceil(out / 128) * math.ceil(inp / 128)


# ---------------------------------------------------------------- DeepSeek-V3, fp8 blocks

DSV3_PARAMS = 671_026_419_200  # recounted from the published config.json
DSV3_BYTES = 673_150_582_112


def _deepseek_v3_by_hand() -> tuple[int, int]:
    """(total bytes, scale bytes) of the DeepSeek-V3 checkpoint's main model."""
    d, v, layers, dense, e = 7168, 129_280, 61, 3, 256
    attention = [(1536, d), (128 * 192, 1536), (576, d), (128 * 256, 512), (d, 128 * 128)]
    mlp = [(18_432, d), (18_432, d), (d, 18_432)]
    expert = [(2048, d), (2048, d), (d, 2048)]  # also the one shared expert
    matrices = (
        layers * attention + dense * mlp + (layers - dense) * (e + 1) * expert
    )  # lists of (out, in)
    quantized = sum(o * i for o, i in matrices)
    kept = DSV3_PARAMS - quantized  # embedding, head, norms, routers (+ correction bias)
    assert kept == 2 * v * d + layers * (2 * d + 1536 + 512) + d + (layers - dense) * e * (d + 1)
    scales = sum(4 * math.ceil(o / 128) * math.ceil(i / 128) for o, i in matrices)
    return quantized + scales + 2 * kept, scales


def test_deepseek_v3_fp8_block_bytes():
    total, scales = _deepseek_v3_by_hand()
    assert (total, scales) == (DSV3_BYTES, 163_352_928)
    for source in ("deepseek-v3", CONFIGS / "deepseek-v3.config.json"):  # YAML and config.json
        m = mlacalc.load_model(source)
        w = checkpoint_weights(m)
        assert (w.total_bytes, w.scale_bytes) == (total, scales)
        assert mlacalc.weight_bytes(m) == total
        assert mlacalc.param_counts(m).total == DSV3_PARAMS  # counts stay logical
        assert w.kept_parts == ("embedding", "norms", "router", "output head")
    # a chosen dtype overrides, the norms, routers, embedding and head kept at 16 bits as
    # plan keeps them (DSV3_PARAMS before: report and plan said two totals)
    assert mlacalc.weight_bytes("deepseek-v3", "fp8") == DSV3_PARAMS + 1_960_809_984


# ---------------------------------------------------------------- GPT-OSS-120B, MXFP4

OSS_PARAMS = 116_829_156_672  # the Hugging Face implementation's (tests/test_reference_hf.py)
OSS_EXPERTS = 36 * 128 * 3 * 2880 * 2880  # gate_up (2 x 2880 rows) and down, per expert
OSS_BYTES = 65_248_815_744


def test_gpt_oss_mxfp4_bytes():
    """Experts: half a byte per value and a one-byte scale per 32; everything else bf16."""
    total = OSS_EXPERTS // 2 + OSS_EXPERTS // 32 + 2 * (OSS_PARAMS - OSS_EXPERTS)
    assert total == OSS_BYTES
    m = mlacalc.load_model("gpt-oss-120b")
    w = checkpoint_weights(m)
    assert (w.total_bytes, w.quantized_params) == (OSS_BYTES, OSS_EXPERTS)
    assert w.scale_bytes == OSS_EXPERTS // 32 == 3_583_180_800
    assert {"attention", "attention sinks", "router", "biases"} <= set(w.kept_parts)
    assert mlacalc.weight_bytes(m) == OSS_BYTES
    assert mlacalc.weight_bytes(m, "bf16") == 2 * OSS_PARAMS


# ---------------------------------------------------------------- Kimi-K2 Thinking, int4 groups

K2_PARAMS = 1_026_408_232_448  # recounted from the published config.json
K2_ROUTED = 60 * 384 * 3 * 2048 * 7168  # 60 MoE layers, 384 experts of three 2048 x 7168
K2_BYTES = 594_205_858_816


def _kimi_thinking():
    """Kimi-K2 Thinking: the shared config.json is abridged (no quantization_config); the
    checkpoint's scheme is the compressed-tensors int4 one that Kimi-K2.5's config states for
    the same language model."""
    data = _raw("kimi-k2-thinking")
    data["quantization_config"] = _k25_scheme()
    return mlacalc.import_hf_config(data, "kimi-k2-thinking.config.json")


def test_kimi_k2_thinking_int4_bytes():
    """Routed experts packed 8 values per int32, one bf16 scale per 32 values of a row, one
    int32 shape pair per matrix; attention, the dense layer, shared experts, head bf16."""
    matrices = 60 * 384 * 3
    total = K2_ROUTED // 2 + K2_ROUTED // 32 * 2 + 8 * matrices + 2 * (K2_PARAMS - K2_ROUTED)
    assert total == K2_BYTES
    thinking = _kimi_thinking()
    assert mlacalc.param_counts(thinking).total == K2_PARAMS
    for m in (thinking, mlacalc.load_model("kimi-k2.5")):
        w = checkpoint_weights(m)
        assert (w.total_bytes, w.quantized_params) == (K2_BYTES, K2_ROUTED)
        assert w.scale_bytes == K2_ROUTED // 16 + 8 * matrices
        assert "shared experts" in w.kept_parts and "attention" in w.kept_parts
        assert mlacalc.weight_bytes(m) == K2_BYTES


# ---------------------------------------------------------------- AWQ and GPTQ int4 groups

QUANT = HF_CONFIGS.parent / "quant"  # configs standing for published AWQ / GPTQ ones (README)


def _stored(tensors: dict[str, tuple[tuple[int, ...], int]]) -> int:
    """Bytes of tensors given as name -> (shape, bytes a value)."""
    return sum(math.prod(shape) * size for shape, size in tensors.values())


def _awq_gemm(out: int, inp: int, g: int = 128) -> dict:
    """AutoAWQ WQLinear_GEMM's stored tensors of one [out, in] linear (K = in, N = out)."""
    return {"qweight": ((inp, out // 8), 4), "qzeros": ((inp // g, out // 8), 4),
            "scales": ((inp // g, out), 2)}  # fmt: skip


def _gptq(out: int, inp: int, g: int = 128, bits: int = 4) -> dict:
    """AutoGPTQ QuantLinear's stored tensors of one [out, in] linear (g_idx stored always)."""
    return {"qweight": ((inp * bits // 32, out), 4), "qzeros": ((inp // g, out * bits // 32), 4),
            "scales": ((inp // g, out), 2), "g_idx": ((inp,), 4)}  # fmt: skip


def test_awq_llama_8b_bytes_as_stored():
    """Llama-3.1-8B AWQ (gemm, group 128): every linear's qweight, qzeros and fp16 scales built
    by their shapes; embedding, head and norms fp16."""
    d, ff, kv, v, layers = 4096, 14336, 1024, 128_256, 32
    linears = [(d, d), (kv, d), (kv, d), (d, d), (ff, d), (ff, d), (d, ff)]
    quantized = layers * sum(_stored(_awq_gemm(o, i)) for o, i in linears)
    kept = 2 * (2 * v * d + (2 * layers + 1) * d)
    m = mlacalc.load_model(QUANT / "llama-3.1-8b-awq.config.json")
    w = checkpoint_weights(m)
    assert w.total_bytes == quantized + kept == 5_727_854_592
    assert w.kept_parts == ("embedding", "norms", "output head")
    assert w.description == "awq gemm int4 group 128"
    assert mlacalc.weight_bytes(m) == w.total_bytes
    gemv = m.with_changes(quantization_config={**m.quantization_config, "version": "gemv"})
    # gemv: qweight [N, K/8], qzeros [N, ceil(K/128/8)], scales [N, 8 * that]: the same bytes
    # where K/128 is a multiple of 8 (4096: 32 groups, 14336: 112), none padded
    assert checkpoint_weights(gemv).total_bytes == w.total_bytes
    assert checkpoint_part_bytes(m)["dense_ffn"][1] == layers * sum(
        _stored(_awq_gemm(o, i)) for o, i in linears[4:]
    )


def test_gptq_qwen3_moe_bytes_as_stored():
    """Qwen3-30B-A3B GPTQ int4 (group 128): attention and each of 128 experts' three linears
    as qweight, qzeros, fp16 scales and g_idx; router, embedding, head and norms fp16. The
    plan times them as the int4 weight-only kernels (w4a16)."""
    d, layers, e, ff, v = 2048, 48, 128, 768, 151_936
    attention = [(4096, d), (512, d), (512, d), (d, 4096)]
    expert = [(ff, d), (ff, d), (d, ff)]
    quantized = layers * (
        sum(_stored(_gptq(o, i)) for o, i in attention)
        + e * sum(_stored(_gptq(o, i)) for o, i in expert)
    )
    kept = 2 * (2 * v * d + layers * (e * d + 2 * d + 2 * 128) + d)
    m = mlacalc.load_model(QUANT / "qwen3-30b-a3b-gptq.config.json")
    w = checkpoint_weights(m)
    assert w.total_bytes == quantized + kept
    assert "router" in w.kept_parts and "attention" not in w.kept_parts
    per_channel = {**m.quantization_config, "group_size": -1}
    one = checkpoint_weights(m.with_changes(quantization_config=per_channel))
    assert one.total_bytes == kept + layers * (
        sum(_stored(_gptq(o, i, i)) for o, i in attention)
        + e * sum(_stored(_gptq(o, i, i)) for o, i in expert)
    )
    from mlacalc.cost.model_step import stored_dtype
    from mlacalc.cost.quant import component_precision, stored_weight_dtype

    assert stored_weight_dtype(m) == "int4" and stored_dtype(m.quantization, "int4") == "w4a16"
    assert component_precision(m).format_of("experts") == "int4"


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"bits": 3}, "bits"),
        ({"bits": 8}, "bits"),  # AWQ packs 4-bit values only
        ({"group_size": 0}, "group_size"),
        ({"version": "marlin"}, "version"),
        ({"zero_point": False}, "zero_point"),
        ({"quant_method": "gptq", "bits": 5}, "bits"),
        ({"quant_method": "gptq", "bits": 3}, "bits"),
        ({"quant_method": "gptq", "group_size": -2}, "group_size"),
        ({"quant_method": "gptq", "checkpoint_format": "marlin"}, "checkpoint_format"),
        ({"group_size": 96}, "group_size"),  # does not divide 4096: refused when sized
    ],
)
def test_bad_awq_gptq_field_is_named(change, field):
    raw = json.loads((QUANT / "llama-3.1-8b-awq.config.json").read_text(encoding="utf-8"))
    raw["quantization_config"] = {**raw["quantization_config"], **change}
    with pytest.raises(ConfigError) as err:
        mlacalc.weight_bytes(mlacalc.import_hf_config(raw))
    assert err.value.field == f"quantization_config.{field}"
    assert "\n" not in str(err.value)


def test_group_size_not_dividing_names_the_source_and_tensor():
    """Refused when sized, the error still names the config's source (the sizing alone cannot)
    and the first matrix whose input features the group size does not divide (q_proj's 4,096
    by 96)."""
    raw = json.loads((QUANT / "llama-3.1-8b-awq.config.json").read_text(encoding="utf-8"))
    raw["quantization_config"] = {**raw["quantization_config"], "group_size": 96}
    with pytest.raises(ConfigError) as err:
        mlacalc.weight_bytes(mlacalc.import_hf_config(raw))
    assert err.value.source
    assert "q_proj.weight's 4096 input features" in str(err.value)


# ---------------------------------------------------------------- the meta-device route


@pytest.mark.parametrize(
    ("name", "expected"),
    [("deepseek-v3", DSV3_BYTES), ("gpt-oss-120b", OSS_BYTES), ("kimi-k2.5", K2_BYTES)],
)
def test_bytes_equal_the_reference_tensors(name, expected):
    """The scheme over the Hugging Face model's own tensors (meta device) gives the same
    bytes. The reference fuses each expert's gate and up matrices, which the checkpoint keeps
    apart: packed-integer schemes store one more 8-byte shape pair per expert there."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    import hf_reference as ref

    from mlacalc.cost.quant import quantized_weight_bytes

    tensors = ref.weight_tensors(name)
    theirs = quantized_weight_bytes(tensors, quantization_scheme(ref.raw_config(name)))
    fused = sum(t.shape[0] for t in tensors if t.name.endswith("experts.gate_up_proj"))
    extra = 8 * fused if theirs.scheme.startswith("int") else 0
    assert theirs.total_bytes + extra == expected


# ---------------------------------------------------------------- plan and search


def test_plan_sizes_gpt_oss_from_mxfp4():
    """plan with no weight dtype holds the MXFP4 checkpoint; experts split whole under EP."""
    one = mlacalc.plan("gpt-oss-120b", "H200", 1, seq_len=8192)
    assert one.weight_format == "checkpoint mxfp4 experts"
    # the layout's parameter split leaves out the 2,304 attention-sink logits (4,608 bytes)
    assert 0 <= OSS_BYTES - one.weights_per_gpu_bytes <= 2 * 36 * 64
    assert one.weights_per_gpu_bytes < mlacalc.weight_bytes("gpt-oss-120b", "fp8")
    experts = OSS_EXPERTS // 2 + OSS_EXPERTS // 32 + 2 * 36 * 128 * 3 * 2880  # + expert biases
    assert checkpoint_part_bytes(mlacalc.load_model("gpt-oss-120b"))["moe_routed_experts"] == (
        OSS_EXPERTS + 36 * 128 * 3 * 2880,
        experts,
    )
    ep4 = mlacalc.plan("gpt-oss-120b", "H200", 4, tp=4, ep=4, seq_len=8192)
    assert ep4.memory["weights_routed_experts"] == experts // 4
    bf16 = mlacalc.plan("gpt-oss-120b", "H200", 1, weight_dtype="bf16", seq_len=8192)
    assert bf16.weight_format == "bf16" and not bf16.fits  # 233.7 GB of bf16 weights


def test_plan_deepseek_v3_experts_under_ep():
    """EP8: each GPU holds 32 of the 256 experts of each of the 58 MoE layers, as fp8 with
    their block scales (and one more byte per parameter nowhere)."""
    p = mlacalc.plan("deepseek-v3", "H200", 8, tp=8, ep=8, seq_len=32768)
    per_expert = 3 * _fp8(2048, 7168)
    assert p.memory["weights_routed_experts"] == 58 * 32 * per_expert == 81_758_552_064
    assert p.weight_format == "checkpoint fp8 block 128x128"
    fp8 = mlacalc.plan("deepseek-v3", "H200", 8, tp=8, ep=8, weight_dtype="fp8", seq_len=32768)
    assert fp8.memory["weights_routed_experts"] == 58 * 32 * 3 * 2048 * 7168
    # an asked dtype quantizes the layers, the embedding and head as stored (e61f853)
    assert fp8.weight_format == "fp8, embeddings bf16, head bf16"


def test_search_sizes_the_checkpoint():
    from mlacalc.serving.search import search

    r = search("gpt-oss-120b", "H200", [1], isl=1000, osl=200, batches=(1, 8))
    own = [p for p in r.points if p["weight_format"] == "checkpoint mxfp4 experts"]
    assert own and all(p["weights_per_gpu_bytes"] <= OSS_BYTES for p in own)


# ---------------------------------------------------------------- reports and the schema


def test_report_names_the_checkpoint():
    from mlacalc.report import model_report

    doc = model_report("deepseek-v3", seq_len=4096, batch=1)
    w = doc["weights"]
    assert w["format"] == "checkpoint fp8 block 128x128" and w["total_bytes"] == DSV3_BYTES
    assert w["checkpoint"]["scale_bytes"] == 163_352_928
    # binary units, as the report's tables (673.2 GB = 626.92 GiB; 0.16 GB = 155.79 MiB)
    assert w["summary"].startswith(
        "checkpoint: fp8 block 128x128, 626.92 GiB incl. 155.79 MiB scales"
    )
    assert "bf16: embedding, norms, router, output head" in w["summary"]
    mtp = checkpoint_weights(mlacalc.load_model("deepseek-v3"), include_mtp=True).total_bytes
    assert w["mtp_bytes"] == mtp - DSV3_BYTES
    chosen = model_report("deepseek-v3", seq_len=4096, batch=1, weight_dtype="bf16")
    assert chosen["weights"]["format"] == "bf16" and chosen["weights"]["checkpoint"] is None
    assert chosen["weights"]["total_bytes"] == 2 * DSV3_PARAMS
    plain = model_report("llama-3-8b", seq_len=4096, batch=1)["weights"]
    assert plain["format"] == "bf16" and plain["checkpoint"] is None


def test_cli_report_and_plan_say_which_bytes(capsys):
    from mlacalc.cli import main

    assert main(["report", "gpt-oss-120b", "--format", "markdown"]) == 0
    out = capsys.readouterr().out
    assert "weights (checkpoint mxfp4 experts)" in out and "65,248,815,744 B" in out
    assert "kept in bf16" in out and "3,583,180,800 B" in out
    assert main(["report", "gpt-oss-120b", "--weight-dtype", "fp8", "--format", "json"]) == 0
    # fp8 but the norms and routers (13,485,888) and the embedding and head (579,133,440
    # each) at 16 bits, as plan: OSS_PARAMS before
    kept = 13_485_888 + 2 * 579_133_440
    assert json.loads(capsys.readouterr().out)["weights"]["total_bytes"] == OSS_PARAMS + kept
    assert main(["plan", "deepseek-v3", "--hardware", "H200", "--gpus", "8"]) == 0
    assert "weights per GPU (checkpoint fp8 block 128x128)" in capsys.readouterr().out


def test_quantization_is_a_schema_field():
    """Shipped YAML files carry it; it survives to_dict, the YAML writer and with_changes."""
    from mlacalc.render import model_yaml

    shipped = ("deepseek-v3", "deepseek-v3.2", "kimi-k2", "kimi-k2.5", "gpt-oss-120b")
    for name in (*shipped, "minimax-m2.5"):
        m = mlacalc.load_model(name)
        assert m.quantization is not None, name
        again = mlacalc.models.loading.parse_config_text(model_yaml(m), f"{name}.yaml")
        assert again.quantization == m.quantization
        assert again.quantization_config == m.quantization_config
        assert mlacalc.weight_bytes(again) == mlacalc.weight_bytes(m)
        assert isinstance(m.to_dict()["quantization_config"], dict)
        hash(m)
    assert mlacalc.load_model("llama-3-70b").quantization is None
    m = mlacalc.load_model("gpt-oss-120b").with_changes(quantization_config=None)
    assert mlacalc.weight_bytes(m) == 2 * OSS_PARAMS  # weights_dtype bf16 again


@pytest.mark.parametrize(
    ("value", "field"),
    [
        ({"quant_method": "hqq"}, "quantization_config.quant_method"),
        ({"quant_method": "awq"}, "quantization_config.bits"),
        ("fp8", "quantization_config"),
        (
            {"quant_method": "fp8", "weight_block_size": [128]},
            "quantization_config.weight_block_size",
        ),
        (
            "bad regex",  # Kimi-K2.5's scheme with an ignore pattern that does not compile
            "quantization_config.ignore",
        ),
    ],
)
def test_bad_quantization_is_named(value, field):
    if value == "bad regex":
        value = {**_k25_scheme(), "ignore": ["re:(["]}
    data = mlacalc.load_model("gpt-oss-120b").to_dict()
    data["quantization_config"] = value
    with pytest.raises(ConfigError) as err:
        mlacalc.models.loading.model_from_dict(data, "m.yaml")
    assert err.value.field == field
    raw = {**_raw("gpt-oss-120b"), "quantization_config": value}
    with pytest.raises(ConfigError, match=field.replace(".", r"\.")):
        mlacalc.import_hf_config(raw)


def test_external_quantization_is_noted():
    """An NVFP4 ModelOpt export keeps its scheme in hf_quant_config.json: the import says so
    in ``derived`` and its weights are sized by weights_dtype."""
    m = mlacalc.load_model(CONFIGS / "deepseek-v3.1-nvfp4.config.json")
    assert m.quantization is None
    assert any("hf_quant_config.json" in note for note in m.derived)
    assert mlacalc.weight_bytes(m) == 2 * mlacalc.param_counts(m).total


def test_quantization_on_an_unlisted_layout_is_refused():
    """GPT-2 and Falcon checkpoints' tensors are not listed: the field is refused by name."""
    fp8 = {"quant_method": "fp8", "weight_block_size": [128, 128]}
    for name in ("gpt2", "falcon-7b"):
        with pytest.raises(ConfigError) as err:
            mlacalc.load_model(name).with_changes(quantization_config=fp8)
        assert err.value.field == "quantization_config" and "not" in str(err.value)


def test_plan_splits_each_tensor_as_tp_splits_it():
    """DeepSeek-V3 at TP8: each checkpoint tensor's bytes (scales included) on one GPU, summed
    by hand: q_a/kv_a projections, their norms, the layer norms and the routers whole, every
    other tensor an eighth. Each part equals the plan's exactly (the attention had been sized
    in proportion to its parameters, 105,936 bytes light: its replicated bf16 norms and
    scales)."""
    from mlacalc.cost.quant import tensor_bytes
    from mlacalc.models.tensors import part_of as _part
    from mlacalc.models.tensors import tensors

    m = mlacalc.load_model("deepseek-v3")
    whole = ("q_a_proj", "q_a_layernorm", "kv_a_proj_with_mqa", "kv_a_layernorm")
    by_hand: dict[str, float] = {}
    for t in tensors(m):
        layer_norm = "norm" in t.name and ".self_attn." not in t.name
        kept_whole = any(f".{w}." in t.name for w in whole) or ".mlp.gate." in t.name
        share = 1 if layer_norm or kept_whole else 1 / 8
        part = {
            "embedding": "embedding_head",
            "lm_head": "embedding_head",
            "moe_routed_experts": "routed_experts",
            "moe_shared_experts": "shared_experts",
            "moe_router": "router",
        }.get(_part(t.name), _part(t.name))
        by_hand[part] = by_hand.get(part, 0) + sum(tensor_bytes(t, m.quantization)) * share
    p = mlacalc.plan("deepseek-v3", "H200", 8, tp=8, seq_len=32768)
    for part, nbytes in by_hand.items():
        assert p.memory[f"weights_{part}"] == math.ceil(nbytes), part
    assert abs(p.weights_per_gpu_bytes - sum(by_hand.values())) < len(by_hand)


def test_plan_times_the_weights_it_sizes():
    """A plan with no weight dtype times the step on the checkpoint it holds: GPT-OSS's routed
    experts run as the weight-only MXFP4 class; a chosen dtype times them in that dtype."""

    def experts(p):
        return [k["dtype"] for k in p.to_dict()["kernels"] if k["name"] == "routed_experts"]

    stored = mlacalc.plan("gpt-oss-120b", "H200", 1, seq_len=8192)
    chosen = mlacalc.plan("gpt-oss-120b", "H200", 2, tp=2, weight_dtype="fp8", seq_len=8192)
    assert experts(stored) == ["w4a16_mxfp4"]
    assert experts(chosen) == ["fp8"]


def test_a_dsa_checkpoint_names_its_kept_indexer_weights_not_its_attention():
    """DeepSeek-V3.2 keeps only its indexer's head weights (and norms) of the attention in
    bf16: the summary says so rather than "attention", which its fp8 projections are not."""
    w = checkpoint_weights(mlacalc.load_model("deepseek-v3.2"))
    assert "indexer head weights" in w.kept_parts and "attention" not in w.kept_parts
