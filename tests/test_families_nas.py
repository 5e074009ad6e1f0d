"""Nemotron-NAS (DeciLM, remote code): Llama-3.3-Nemotron-Super-49B's searched layers against
the equivalent Llama modules built on the meta device, layer by layer as the published
modeling code builds them (``DeciLMDecoderLayer``: attention and its norm unless a no-op, the
gated MLP of ``_ffn_mult_to_intermediate_size`` and its norm unless a no-op); the card's 49B;
the step's kernels; the refusals."""

from __future__ import annotations

import json

import pytest
from reference_data import HF_CONFIGS_2

import mlacalc
from mlacalc.cost.model_step import step_kernels
from mlacalc.models.architecture import layer_pattern
from mlacalc.models.hf.nemotron_nas import ffn_width
from mlacalc.words.errors import ConfigError

SUPER = HF_CONFIGS_2 / "nvidia--Llama-3_3-Nemotron-Super-49B-v1.config.json"


def _data() -> dict:
    return json.loads(SUPER.read_text(encoding="utf-8"))


def test_super_49b_equals_llama_modules_on_meta():
    """Parameters equal the Llama modules the DeciLM code builds, summed layer by layer."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaAttention, LlamaMLP

    data = _data()
    d, heads = data["hidden_size"], data["num_attention_heads"]
    total = 2 * data["vocab_size"] * d + d  # embedding, untied head, final norm
    with torch.device("meta"):
        for block in data["block_configs"]:
            attention, ffn = block["attention"], block["ffn"]
            if not attention["no_op"]:
                kv = heads // attention["n_heads_in_group"]
                config = LlamaConfig(
                    hidden_size=d, num_attention_heads=heads, num_key_value_heads=kv
                )
                total += sum(p.numel() for p in LlamaAttention(config, 0).parameters()) + d
            if not ffn["no_op"]:
                width = ffn_width(ffn["ffn_mult"], d)
                config = LlamaConfig(hidden_size=d, intermediate_size=width)
                total += sum(p.numel() for p in LlamaMLP(config).parameters()) + d
    model = mlacalc.load_model(SUPER)
    assert mlacalc.param_counts(model).total == total == 49_867_145_216
    assert round(total / 1e9) == 50 and int(total / 1e9) == 49  # the card's 49B, truncated


def test_pattern_cache_and_kernels():
    """49 attention blocks keep K and V of 8 heads; the 80 MLPs run as kernels of six widths."""
    model = mlacalc.load_model(SUPER)
    assert layer_pattern(model).describe() == "129 layers: 49 full + 80 none; FFN: 80 dense"
    assert mlacalc.kv_cache_bytes(model, 1000) == 49 * 1000 * 2 * 8 * 128 * 2
    ks = [k for k in step_kernels(model, "decode", 4096, 8) if k.name == "dense_ffn_down"]
    widths = {k.shape["k"]: k.calls for k in ks}
    assert widths == {28672: 49, 17920: 1, 14336: 6, 7168: 10, 5632: 8, 2816: 6}
    assert sum(2 * 8 * k.shape["k"] * 8192 * k.calls for k in ks) == sum(
        k.flops * k.calls for k in ks
    )


@pytest.mark.parametrize(
    ("part", "key", "value"),
    [
        ("attention", "replace_with_linear", True),
        ("ffn", "replace_with_linear", True),
        ("attention", "window_length", 4096),
        ("attention", "num_sink_tokens", 4),
        ("ffn", "sparsify", ["x"]),
    ],
)
def test_unmodelled_blocks_are_refused_by_name(part, key, value, tmp_path):
    data = _data()
    data["block_configs"][3][part][key] = value
    path = tmp_path / "config.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ConfigError, match=rf"block_configs\[3\]\.{part}\.{key}"):
        mlacalc.load_model(path)


def test_mixed_kv_heads_are_refused(tmp_path):
    data = _data()
    data["block_configs"][0]["attention"]["n_heads_in_group"] = 4
    path = tmp_path / "config.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ConfigError, match="n_heads_in_group"):
        mlacalc.load_model(path)
