"""Checkpoints as published: NVFP4, FP8 and mixed-precision ModelOpt exports sized from their
``hf_quant_config.json`` (read beside a config.json, from a folder, or uploaded with it), the
per-component precision record, and the loader's hardening (text_config over a top-level
field, non-float dtypes, non-finite values, a file rewritten within the same second)."""

from __future__ import annotations

import json
import os
import shutil

import pytest
from reference_data import HF_CONFIGS_2

import mlacalc
from mlacalc.cost.quant import (
    Tensor,
    checkpoint_weights,
    component_precision,
    quantized_weight_bytes,
    tensor_bytes,
)
from mlacalc.models.loading import parse_upload
from mlacalc.models.quantization import (
    ComponentPrecision,
    QuantScheme,
    modelopt_config,
    scheme_of,
)
from mlacalc.report import model_report
from mlacalc.words.errors import ConfigError

DSV31 = "nvidia--DeepSeek-V3.1-NVFP4"
KIMI = "nvidia--Kimi-K2.6-NVFP4"
GEMMA = "nvidia--Gemma-4-31B-IT-NVFP4"


def _files(name: str):
    return HF_CONFIGS_2 / f"{name}.config.json", HF_CONFIGS_2 / f"{name}.hf_quant_config.json"


# -- sizes by hand ---------------------------------------------------------------------


def test_nvfp4_matrix_bytes_by_hand():
    """[out=32, in=64]: 32*64/2 payload bytes; 32*4 e4m3 scales, float32 weight_scale_2 and
    input_scale."""
    nvfp4 = QuantScheme(method="nvfp4", bits=4, group_size=16, input_scale=True)
    w4a16 = QuantScheme(method="nvfp4", bits=4, group_size=16, input_scale=False)
    t = Tensor("model.layers.0.mlp.up_proj.weight", (32, 64), "linear")
    assert tensor_bytes(t, nvfp4) == (1024, 128 + 8)
    assert tensor_bytes(t, w4a16) == (1024, 128 + 4)
    # a stacked tensor of 4 experts: 4 matrices with their own scalars; a ragged row rounds up
    e = Tensor("model.layers.3.mlp.experts.down_proj", (4, 32, 70), "experts")
    assert tensor_bytes(e, nvfp4) == (4 * 32 * 35, 4 * (32 * 5 + 8))


def test_fp8_per_tensor_bytes_by_hand():
    fp8 = QuantScheme(method="fp8_tensor", bits=8, input_scale=True)
    t = Tensor("model.layers.0.self_attn.q_proj.weight", (48, 64), "linear")
    assert tensor_bytes(t, fp8) == (48 * 64, 8)


def test_modelopt_excludes_are_globs_over_whole_names():
    scheme = scheme_of(
        {
            "quant_method": "modelopt",
            "quant_algo": "NVFP4",
            "group_size": 16,
            "exclude_modules": ["lm_head", "model.layers.1*", "model.language_model.layers.0.mlp"],
        }
    )
    kept = [
        "model.layers.1.mlp.up_proj.weight",
        "model.layers.12.mlp.up_proj.weight",  # fnmatch: "1*" covers 12 as ModelOpt reads it
        "model.layers.0.mlp.down_proj.weight",  # prefix of the language model read away
    ]
    for name in kept:
        assert tensor_bytes(Tensor(name, (16, 16), "linear"), scheme)[1] == 0, name
    q = Tensor("model.layers.2.mlp.up_proj.weight", (16, 16), "linear")
    assert tensor_bytes(q, scheme) == (128, 16 + 8)


# -- the published exports -------------------------------------------------------------


def test_deepseek_v31_nvfp4_reads_its_hf_quant_config():
    config, _ = _files(DSV31)
    model = mlacalc.load_model(config)
    scheme = model.quantization
    assert (scheme.method, scheme.group_size, scheme.input_scale) == ("nvfp4", 16, True)
    assert any("hf_quant_config.json (ModelOpt NVFP4)" in d for d in model.derived)
    weights = checkpoint_weights(model)
    # its excludes keep the MLA down/up projections in bf16, not o_proj, and the MTP layer
    assert "model.layers.*.self_attn.q_a_proj.weight" in weights.kept
    assert "model.layers.*.self_attn.o_proj.weight" not in weights.kept
    # and the summary says the attention is kept only in part, naming what is kept (it had
    # said "attention", which o_proj, quantized, is not)
    kept = "attention in part (q_a_proj, q_b_proj, kv_a_proj_with_mqa, kv_b_proj)"
    assert kept in weights.kept_parts and "attention" not in weights.kept_parts
    assert kept in model_report(model, seq_len=4096)["weights"]["summary"]
    with_mtp = checkpoint_weights(model, include_mtp=True)
    assert with_mtp.kept_params > weights.kept_params
    precision = component_precision(model)
    assert precision.kv_cache == "fp8"
    assert precision.format_of("experts") == "nvfp4"
    assert precision.dtype_of("experts") == "fp4"
    assert precision.format_of("embeddings") == "bf16"
    assert set(precision.weights["attention"]) == {"nvfp4", "bf16"}  # o_proj / the rest
    # every parameter is in exactly one format and one counted component or the rest
    counts = mlacalc.param_counts(model)
    listed = sum(sum(f.values()) for f in precision.weights.values())
    assert 0 < counts.total - listed < counts.total * 0.001  # norms, routers, biases


def test_kimi_k26_config_json_and_hf_quant_config_agree():
    """Kimi-K2.6 NVFP4 states its scheme twice (config.json's quantization_config with
    ``ignore``, hf_quant_config.json with ``exclude_modules``): both size it the same."""
    config, _ = _files(KIMI)
    both = mlacalc.load_model(config)
    data = json.loads(config.read_text())
    alone = mlacalc.import_hf_config(data)
    assert alone.quantization.method == both.quantization.method == "nvfp4"
    assert checkpoint_weights(alone) == checkpoint_weights(both)
    precision = component_precision(both)
    assert precision.format_of("dense_ffn") == "bf16"  # layer 0 excluded whole
    assert precision.format_of("shared_experts") == "bf16"
    assert precision.format_of("experts") == "nvfp4"


@pytest.mark.parametrize("how", ["file", "folder", "upload"])
def test_hf_quant_config_is_read_wherever_a_config_is_loaded(tmp_path, how):
    config, quant = _files(DSV31)
    reference = checkpoint_weights(mlacalc.load_model(config))
    if how == "file":
        model = mlacalc.load_model(config)
    elif how == "folder":
        shutil.copy(config, tmp_path / "config.json")
        shutil.copy(quant, tmp_path / "hf_quant_config.json")
        model = mlacalc.load_model(tmp_path)
    else:
        model = parse_upload(config.read_bytes(), "config.json", quant=quant.read_bytes())
    assert checkpoint_weights(model) == reference


def test_without_its_hf_quant_config_an_nvfp4_export_says_so(tmp_path):
    config, _ = _files(DSV31)
    folder = tmp_path / "DeepSeek-V3.1-NVFP4"  # the export's folder, as downloaded
    folder.mkdir()
    shutil.copy(config, folder / "config.json")
    model = mlacalc.load_model(folder)
    assert model.quantization_config is None
    assert any("hf_quant_config.json" in d for d in model.derived)
    assert component_precision(model).format_of("experts") == "bf16"


def test_mixed_precision_export_keeps_each_layer_in_its_format():
    """Qwen3.6-27B NVFP4: linear-attention projections FP8 per tensor, MLPs W4A16 NVFP4, the
    head W4A16 NVFP4 (listed in quantized_layers), embedding bf16."""
    model = mlacalc.load_model(_files("nvidia--Qwen3.6-27B-NVFP4")[0])
    assert model.quantization.method == "mixed"
    precision = component_precision(model)
    assert precision.format_of("dense_ffn") == "w4a16_nvfp4"
    assert precision.format_of("head") == "w4a16_nvfp4"
    assert precision.format_of("embeddings") == "bf16"
    assert "fp8_tensor" in precision.weights["attention"]
    assert precision.kv_cache == "fp8"


def test_a_hybrid_export_s_mixer_names_are_read_as_the_layout_s():
    """Nemotron-3.5-Lightning NVFP4 names its blocks ``backbone.layers.N.mixer.`` (experts,
    shared experts, Mamba in/out projections, attention): every module its quantized_layers
    lists matches a tensor, and the quantized parameters are, by hand from its config, 23 MoE
    layers of 128 up + down experts (1,856 x 2,688) and a shared expert of 3,712, 23 Mamba
    in_proj (4,096 gate + 6,144 conv channels + 64 heads, x 2,688) and out_proj, the head; the
    attention (excluded) kept. Before, none matched: 352 M quantized, 58 GiB of weights."""
    model = mlacalc.load_model(_files("nvidia--NVIDIA-Nemotron-3.5-Lightning-30B-A3B-NVFP4")[0])
    w = checkpoint_weights(model)
    assert w.unmatched == ()
    d, layers = 2688, 23
    experts, shared = 2 * 128 * 1856 * d, 2 * 3712 * d
    mamba = (4096 + 6144 + 64) * d + d * 4096
    assert w.quantized_params == layers * (experts + shared + mamba) + 131072 * d
    # its attention layers kept whole; of its Mamba mixers the convolution and the state's
    # decay and skip, the projections quantized
    assert "attention" in w.kept_parts
    assert "Mamba mixers in part (conv1d, A_log, D)" in w.kept_parts
    precision = component_precision(model)
    assert precision.format_of("experts") == "w4a16_nvfp4"
    assert w.total_bytes < 20e9  # about 0.56 bytes a quantized weight (was 62.6 GB)


def test_qwen3_5_s_split_linear_projections_take_the_export_s_formats():
    """Qwen3.6-27B NVFP4 lists ``linear_attn.in_proj_qkv`` and ``in_proj_z`` in FP8: Qwen3.5's
    reference splits Qwen3-Next's ``in_proj_qkvz`` / ``in_proj_ba`` into four matrices, the same
    rows. Quantized by hand: 64 MLPs (3 x 5,120 x 17,408), 48 linear layers' qkv (10,240 rows),
    z (6,144) and out projections, 16 full layers' gated q (2 x 24 x 256), k, v, o, the head."""
    model = mlacalc.load_model(_files("nvidia--Qwen3.6-27B-NVFP4")[0])
    w = checkpoint_weights(model)
    assert w.unmatched == ()
    d = 5120
    linear = (2 * 16 * 128 + 48 * 128) * d + 48 * 128 * d + d * 48 * 128
    full = 24 * 256 * 2 * d + 2 * 4 * 256 * d + d * 24 * 256
    assert w.quantized_params == 64 * 3 * d * 17408 + 48 * linear + 16 * full + 248320 * d
    # its gates' projections, the convolution and the decay kept, the rest quantized
    assert "linear attention in part (in_proj_b, in_proj_a, conv1d, A_log)" in w.kept_parts


def test_a_listed_module_no_tensor_matches_is_said(tmp_path):
    """A mixed-precision export naming a module the layout does not have: the weights line
    warns, naming it, rather than sizing it kept in silence."""
    config, quant = _files("nvidia--Qwen3.6-27B-NVFP4")
    q = json.loads(quant.read_text())
    name = "model.language_model.layers.0.linear_attn.in_proj_xyz"
    q["quantization"]["quantized_layers"][name] = {"quant_algo": "FP8"}
    shutil.copy(config, tmp_path / "config.json")
    (tmp_path / "hf_quant_config.json").write_text(json.dumps(q))
    w = checkpoint_weights(mlacalc.load_model(tmp_path))
    assert w.unmatched == ("model.layers.*.linear_attn.in_proj_xyz",)
    assert "1 quantized_layers name(s) match no tensor" in w.describe()
    assert "in_proj_xyz" in w.describe()


def test_precision_of_an_unquantized_model_is_its_dtype():
    model = mlacalc.load_model("llama-3-8b")
    precision = component_precision(model)
    assert isinstance(precision, ComponentPrecision)
    assert {precision.format_of(c) for c in precision.weights} == {"bf16"}
    assert precision.kv_cache is None
    assert precision.to_dict()["formats"]["head"] == "bf16"


# -- bad hf_quant_config.json: one line naming the key ----------------------------------


@pytest.mark.parametrize(
    ("quant", "field"),
    [
        ({"producer": {}}, "quantization"),
        ({"quantization": {"quant_algo": "INT4_AWQ"}}, "quantization.quant_algo"),
        (
            {"quantization": {"quant_algo": "NVFP4", "group_size": 32}},
            "quantization.group_size",
        ),
        (
            {"quantization": {"quant_algo": "NVFP4", "exclude_modules": "lm_head"}},
            "quantization.exclude_modules",
        ),
        (
            {"quantization": {"quant_algo": "MIXED_PRECISION", "quantized_layers": {"a": 1}}},
            "quantization.quantized_layers",
        ),
        (
            {
                "quantization": {
                    "quant_algo": "MIXED_PRECISION",
                    "quantized_layers": {"a": {"quant_algo": "INT8_SQ"}},
                }
            },
            "quantization.quantized_layers",
        ),
    ],
)
def test_a_bad_hf_quant_config_is_refused_naming_the_key(quant, field):
    """The error names hf_quant_config.json and its own key (it had named config.json's
    ``quantization_config.quant_algo`` for a bad quant_algo or group_size in this file)."""
    config, _ = _files(DSV31)
    with pytest.raises(ConfigError) as info:
        parse_upload(config.read_bytes(), "config.json", quant=json.dumps(quant).encode())
    assert info.value.field == field, str(info.value)
    assert info.value.source == "hf_quant_config.json", str(info.value)
    assert "\n" not in str(info.value)


def test_modelopt_config_folds_expert_indices():
    q = modelopt_config(
        {
            "quantization": {
                "quant_algo": "MIXED_PRECISION",
                "quantized_layers": {
                    f"backbone.layers.1.mixer.experts.{i}.up_proj": {"quant_algo": "NVFP4"}
                    for i in range(64)
                },
            }
        }
    )
    # the expert index folded, the block's mixer named as the layout names a MoE block
    assert q["quantized_layers"] == {"NVFP4": ["model.layers.1.mlp.experts.up_proj"]}


# -- loader hardening --------------------------------------------------------------------


def _llama() -> dict:
    return {
        "model_type": "llama",
        "hidden_size": 256,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "vocab_size": 1000,
        "intermediate_size": 512,
    }


@pytest.mark.parametrize("dtype", ["complex64", "int64", "bool", "torch.complex128"])
def test_a_non_float_dtype_is_refused_naming_the_field(dtype):
    with pytest.raises(ConfigError) as info:
        mlacalc.import_hf_config({**_llama(), "torch_dtype": dtype})
    assert info.value.field == "torch_dtype"


def test_a_top_level_field_does_not_override_text_config():
    data = {"model_type": "ministral3", "hidden_size": 1152, "text_config": _llama()}
    data["text_config"]["model_type"] = "ministral3"
    model = mlacalc.import_hf_config(data)
    assert model.hidden_size == 256
    note = [d for d in model.derived if "top-level" in d]
    assert note and "hidden_size" in note[0] and "1152" in note[0]


def test_a_file_rewritten_within_the_same_second_is_read_again(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(_llama()))
    stamp = os.stat(path)
    first = mlacalc.load_model(path)
    path.write_text(json.dumps({**_llama(), "num_hidden_layers": 3}))
    os.utime(path, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))  # same mtime as before
    assert (first.num_hidden_layers, mlacalc.load_model(path).num_hidden_layers) == (2, 3)


def test_infinity_in_a_field_that_changes_no_count_loads_with_a_note(tmp_path):
    path = tmp_path / "config.json"
    text = json.dumps(_llama())[:-1] + ', "router_aux_loss_coef": Infinity}'
    path.write_text(text)
    model = mlacalc.load_model(path)
    assert any("router_aux_loss_coef holds Infinity" in d for d in model.derived)


@pytest.mark.parametrize("value", ["NaN", "Infinity", "[1, -Infinity]"])
def test_a_non_finite_value_in_a_counted_field_is_refused(tmp_path, value):
    path = tmp_path / "config.json"
    data = _llama()
    del data["intermediate_size"]
    path.write_text(json.dumps(data)[:-1] + f', "intermediate_size": {value}}}')
    with pytest.raises(ConfigError) as info:
        mlacalc.load_model(path)
    assert info.value.field == "intermediate_size"
    assert "not a finite number" in str(info.value)


def test_whole_quantized_checkpoint_bytes_add_up():
    """payload + scales + kept equal the total, and a scheme-free size is larger."""
    model = mlacalc.load_model(_files(GEMMA)[0])
    weights = checkpoint_weights(model)
    assert weights.total_bytes == weights.payload_bytes + weights.scale_bytes + weights.kept_bytes
    assert weights.total_bytes < 2 * mlacalc.param_counts(model).total
    from mlacalc.models.tensors import tensors

    again = quantized_weight_bytes(tensors(model), model.quantization)
    assert again == weights


def test_report_and_roofline_say_a_checkpoint_s_fp8_cache_is_sized_otherwise(run):
    """DeepSeek-V3.1 NVFP4 declares an fp8 KV cache (kv_cache_quant_algo FP8): sized in bf16
    (the default) the report's notes and the roofline's stderr say so, naming --kv-dtype fp8;
    sized in fp8, nothing is said (plan warned already; report and roofline were silent)."""
    config, _ = _files(DSV31)
    model = mlacalc.load_model(config)
    doc = model_report(model, seq_len=1024)
    (note,) = doc["notes"]
    assert "calibrated for an fp8 KV cache" in note and "--kv-dtype fp8" in note
    assert model_report(model, seq_len=1024, kv_dtype="fp8")["notes"] == []
    assert model_report("deepseek-v3", seq_len=1024)["notes"] == []
    out, _ = run("report", str(config), "--seq-len", "1k")
    assert "note: " in out and "calibrated for an fp8 KV cache" in " ".join(out.split())
    _, err = run("roofline", str(config), "-H", "B200", "--seq-len", "1k")
    assert "calibrated for an fp8 KV cache" in " ".join(err.split())
    _, err = run("roofline", str(config), "-H", "B200", "--seq-len", "1k", "--kv-dtype", "fp8")
    assert "calibrated for an fp8" not in err


def test_report_and_compare_read_attention_weights_as_the_checkpoint_stores_them():
    """DeepSeek-V3.1 NVFP4 keeps q_a, q_b, kv_a and kv_b in bf16 and stores o_proj in NVFP4
    (4 bits, an e4m3 scale per 16, a float32 weight_scale_2 and input_scale): by hand, 61
    layers of those bytes and the two bf16 norms are the decode row's weight bytes, and its
    fused bytes move by as much. Every attention weight had counted two bytes (a new-user
    trial: compare showed the NVFP4 export moving 1.8x the FP8 one's bytes)."""
    from mlacalc.cost.engine import attention_cost
    from mlacalc.report import compare_rows

    model = mlacalc.load_model(_files(DSV31)[0])
    doc = model_report(model, seq_len=32768, phases=["decode"])
    row = next(r for r in doc["attention"] if r["default"])
    d, h = 7168, 128
    bf16 = 2 * (d * 1536 + 1536 * h * 192 + d * 576 + 512 * h * 256 + 1536 + 512)
    o_proj = (h * 128) * d // 2 + (h * 128) * d // 16 + 8
    assert row["weight_bytes"] == 61 * (bf16 + o_proj)
    counted = attention_cost(model, "decode", 32768, 1)
    assert row["fused_bytes"] - counted.fused_bytes == row["weight_bytes"] - counted.weight_bytes
    assert row["flops"] == counted.flops
    (nv, fp8) = compare_rows([model, "deepseek-v3"], seq_len=32768, batch=1, kv_dtype="bf16")
    assert nv["decode_fused_bytes"] == row["fused_bytes"]
    assert nv["decode_fused_bytes"] < 1.1 * fp8["decode_fused_bytes"]  # was 1.83x
    # a dtype asked is every weight in it, as before
    asked = model_report(model, seq_len=32768, phases=["decode"], weight_dtype="bf16")
    assert next(r for r in asked["attention"] if r["default"])["weight_bytes"] == (
        counted.weight_bytes
    )


def test_a_group_of_other_shapes_keeps_its_own_weight_bytes():
    """Gemma-4-31B NVFP4 keeps all its attention in bf16; its global layers' projections have
    other shapes than its sliding ones: read as stored, each group's weights are its own bf16
    bytes (the first layer's tensor bytes had stood for every group: the global kv_proj 4x,
    q_proj and o_proj halved; a review found it)."""
    model = mlacalc.load_model(_files(GEMMA)[0])
    assert set(component_precision(model).weights["attention"]) == {"bf16"}
    for phase in ("decode", "prefill"):
        stored = model_report(model, seq_len=32768, phases=[phase])
        asked = model_report(model, seq_len=32768, phases=[phase], weight_dtype="bf16")
        a, b = (next(r for r in d["attention"] if r["default"]) for d in (stored, asked))
        assert a["weight_bytes"] == b["weight_bytes"] and a["fused_bytes"] == b["fused_bytes"]
