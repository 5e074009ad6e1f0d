"""`formula --subs MODEL`: every shipped model's numbers are report's, or it is refused by name.

Trial 3 (main 501453c) found the formula silently wrong on models it does not describe:
DeepSeek-V2-Lite (no query latent) 7,471,616 attention parameters a layer against report's
13,763,072; Mistral-7B (window 4,096) a 32K x 2 cache of 4,294,967,296 B against 536,870,912;
Gemma 3 and Qwen3-Next likewise; DeepSeek-V3's fp8 block scales (2,918,240 B) unsaid.
"""

import dataclasses
import json
import re
from fractions import Fraction

import pytest

import mlacalc

SHIPPED = mlacalc.shipped_models()

S, B = 32768, 2
QUANTITIES = {
    "attention_flops": "flops",
    "elementwise_flops": "elementwise_flops",
    "fused_bytes": "fused_bytes",
    "unfused_bytes": "unfused_bytes",
}


#: bytes an fp8 checkpoint's attention layer stores beyond 1 B a weight, counted by hand from
#: the tensor shapes: 128 x 128 blocks of a float32 scale each, and the latent norms (MLA)
#: kept in bf16, 1 B more a weight
SCALES = {
    # q_a 12 x 56, q_b 192 x 12, kv_a 5 x 56, kv_b 256 x 4, o 56 x 128 = 11,448 blocks;
    # q_a_layernorm 1,536 + kv_a_layernorm 512
    "deepseek-v3": 11_448 * 4 + 2_048,
    # the same MLA tensors (its indexer's: read at b_w by report, as by the formula)
    "deepseek-v3.2": 11_448 * 4 + 2_048,
    # q_a 12 x 56, q_b 96 x 12, kv_a 5 x 56, kv_b 128 x 4, o 56 x 64 = 6,200 blocks; norms
    "kimi-k2": 6_200 * 4 + 2_048,
    # q 48 x 24, k 8 x 24, v 8 x 24, o 24 x 48 = 2,688 blocks (its q/k norms: no term, no read)
    "minimax-m2.5": 2_688 * 4,
}


def _variant(m):
    """The formula variant of a model: ``dsa`` for an MLA model with an indexer."""
    return "dsa" if m.is_mla and m.index_topk and not m.compress_ratios else m.variant


def _value(text, **env):
    return eval(text, {"min": min}, env)  # a --python formula of B, S, q, b, b_a, b_w


def _stated(err, pattern):
    """The figure a warning states the formula leaves out (0 when none is stated)."""
    found = re.search(pattern, err)
    return int(found.group(1).replace(",", "")) if found else 0


@pytest.mark.slow  # every shipped model: about 30 s of CPU
@pytest.mark.parametrize("name", SHIPPED)
def test_formula_subs_is_report_or_refused(run, capsys, name):
    from mlacalc.cli import main

    m = mlacalc.load_model(name)
    v = _variant(m)
    rc = main(["formula", "attention_params", "--variant", v, "--subs", name, "--python"])
    out, err = capsys.readouterr()
    if rc:  # refused: one line naming the model and pointing at report
        assert "--subs" in err and "mlacalc report" in err and err.count("\n") == 1, err
        return
    report = json.loads(run("report", name, "-s", S, "-b", B, "--format", "json")[0])
    per_layer = report["parameters"]["attention_per_layer"]
    # the q/k norms counted by name, not the warning's difference (before: any gap passed)
    parts = report["parameters"]["attention_breakdown"]
    norms = sum(n for k, n in parts.items() if k in ("q_norm", "k_norm"))
    assert _stated(err, r"\(([\d,]+) weights a layer\)") == norms, err
    assert int(out) + norms == per_layer, (out, err)
    env = dict(B=B, S=S, b=2, b_a=2)
    env["b_w"] = Fraction(mlacalc.dtype_bits(report["settings"]["weight_dtype"]), 8)
    out, _ = run("formula", "kv_cache_bytes", "--variant", v, "--subs", name, "--python")
    cache = {k["impl"]: k["total_bytes"] for k in report["kv_cache"]}
    assert _value(out, **env) == cache["absorbed" if m.is_mla else "standard"]
    for a in report["attention"]:
        if a["impl"] != a["cache_impl"] and not a["default"]:
            continue  # the expanded MLA op sequence over an expanded cache: no formula of its own
        args = ["--variant", v, "--phase", a["phase"], "--subs", name, "--python"]
        if m.is_mla and not a["default"]:
            args += ["--impl", a["impl"]]
        for quantity, key in QUANTITIES.items():
            out, err = run("formula", quantity, *args)
            extra = _stated(err, r"\(([\d,]+) a layer x \d+\), whatever")
            scales = SCALES.get(name, 0) if quantity.endswith("_bytes") else 0
            assert extra == scales, (name, quantity, err)  # hand-checked
            kinds = report["layers"]["attention"]
            layers = sum(n for k, n in kinds.items() if k != "none") if extra else 0
            assert _value(out, q=a["q_len"], **env) + extra * layers == a[key], (quantity, a)


@pytest.mark.parametrize("name", [n for n in SHIPPED if mlacalc.load_model(n).is_mla])
def test_formula_subs_mla_parameters_are_reports(run, capsys, name):
    """Every shipped MLA model: attention_params is report's attention_per_layer (plus the
    weights a warning states), or refused (fast; the slow test above checks every quantity)."""
    from mlacalc.cli import main

    m = mlacalc.load_model(name)
    rc = main(["formula", "attention_params", "--variant", _variant(m), "--subs", name])
    out, err = capsys.readouterr()
    if rc:
        assert "mlacalc report" in err, err
        return
    counts = mlacalc.param_counts(name)
    norms = sum(n for k, n in counts.attention_breakdown.items() if k in ("q_norm", "k_norm"))
    assert _stated(err, r"\(([\d,]+) weights a layer\)") == norms, err
    assert int(out) + norms == counts.attention_per_layer, (name, out, err)


@pytest.mark.parametrize(
    ("name", "needle"),
    [
        ("mistral-7b", "32 sliding(4096) layers: the last 4,096 keys only"),
        ("gemma-3-1b", "22 sliding(512) layers"),
        ("llama-4-scout", "36 chunked(8192) layers: its chunk's 8,192 keys only"),
        ("qwen3-next-80b-a3b", "36 linear layers: a fixed-size recurrent state"),
        ("nemotron-3-super-120b-a12b", "40 mamba layers"),
        ("falcon-h1-34b", "a Mamba-2 mixer beside the attention"),
        ("kimi-linear-48b-a3b", "6 mla no-rope layers: no RoPE"),
    ],
)
def test_formula_subs_refuses_layers_it_does_not_describe(run, name, needle):
    v = mlacalc.load_model(name).variant
    _, err = run("formula", "kv_cache_bytes", "--variant", v, "--subs", name, code=2)
    assert needle in err and f"`mlacalc report {name}`" in err, err


def test_formula_subs_takes_the_query_latent_from_the_model(run):
    # before: 7,471,616 (d_cq = 0 dropped the whole query projection)
    out, err = run("formula", "attention_params", "--variant", "mla", "--subs", "deepseek-v2-lite")
    assert out.strip() == "13763072" and "no query latent" in err
    _, err = run(
        "formula",
        "attention_params",
        "--variant",
        "mla",
        "--subs",
        "deepseek-v3",
        "--no-q-lora",
        code=2,
    )
    assert "DeepSeek-V3 has a query latent (q_lora_rank 1536)" in err


def test_formula_subs_states_the_fp8_scales(run):
    # DeepSeek-V3, decode: report reads 2,918,240 B of block scales beside b_w = 1 B a weight
    _, err = run(
        "formula", "fused_bytes", "--variant", "mla", "--phase", "decode", "--subs", "deepseek-v3"
    )
    assert "report reads 2,918,240 bytes more (47,840 a layer x 61)" in err
    _, err = run(
        "formula", "fused_bytes", "--variant", "mla", "--phase", "decode", "--subs", "kimi-k2.5"
    )
    assert "scales" not in err  # a bf16 checkpoint


def test_formula_subs_counts_the_layers_with_attention(run):
    # Llama-3.3-Nemotron-Super: 80 of its 129 layers have no attention
    name = "llama-3.3-nemotron-super-49b"
    out, err = run("formula", "kv_cache_bytes", "--variant", "gqa", "--subs", name, "--python")
    assert "L = 49: Llama" in err and "(80 of 129 have none)" in err
    # before: L = 129, a cache 129/49 of report's
    report = json.loads(run("report", name, "-s", S, "-b", B, "--format", "json")[0])
    assert _value(out, B=B, S=S, b=2) == report["kv_cache"][0]["total_bytes"]


@pytest.mark.parametrize(
    ("variant", "name", "fits"),
    [
        ("mha", "llama-3-8b", "use --variant gqa ("),
        ("mqa", "llama-3-8b", "use --variant gqa ("),
        ("mha", "qwen3-8b", "use --variant gqa ("),
        ("mla", "llama-3-8b", "use --variant gqa ("),
        ("gqa", "deepseek-v3", "use --variant mla ("),
        ("mqa", "gpt2", "use --variant mha or --variant gqa"),
    ],
)
def test_formula_subs_refuses_another_variant(run, variant, name, fits):
    # before: Llama-3-8B's cache under --variant mha printed 262144*B*S*b (4x report's),
    # under mqa 8192*B*S*b (1/8); Qwen3-8B's mha attention_params 67,108,864 against
    # report's 41,943,296 with a "-25,165,568 weights" left out
    _, err = run("formula", "kv_cache_bytes", "--variant", variant, "--subs", name, code=2)
    assert f"not {variant.upper()}: {fits}" in err, err


def test_formula_subs_takes_gqa_for_an_mha_model(run):
    # GQA keeps n_kv a symbol: an MHA model's n_kv = n_h gives MHA's formula
    gqa, _ = run("formula", "kv_cache_bytes", "--variant", "gqa", "--subs", "gpt2")
    mha, _ = run("formula", "kv_cache_bytes", "--variant", "mha", "--subs", "gpt2")
    assert gqa == mha == "18432*B*S*b\n"


@pytest.mark.parametrize(
    ("name", "norms"),
    [
        ("qwen3-8b", 2 * 128),  # one d_h-wide norm on each of q and k, shared by the heads
        ("minimax-m2.5", 48 * 128 + 8 * 128),  # whole-width q and k norms
        ("llama-3-8b", 0),
    ],
)
def test_formula_subs_states_the_q_k_norms_counted(run, name, norms):
    # before: the warning stated report minus the formula, whatever the gap (a
    # mismatched variant's -25,165,568 passed as Qwen3-8B's "q_norm and k_norm")
    out, err = run("formula", "attention_params", "--variant", "gqa", "--subs", name)
    assert _stated(err, r"\(([\d,]+) weights a layer\)") == norms, err
    assert int(out) + norms == mlacalc.param_counts(name).attention_per_layer


def test_formula_subs_refuses_a_gap_it_cannot_name(run, monkeypatch):
    # a gap the q/k norms do not make is refused, not labelled "weights of its own"
    from mlacalc.cli import formula_cmd

    real = formula_cmd.param_counts

    def more(m):
        c = real(m)
        return dataclasses.replace(c, attention_per_layer=c.attention_per_layer + 5)

    monkeypatch.setattr(formula_cmd, "param_counts", more)
    _, err = run("formula", "attention_params", "--variant", "gqa", "--subs", "qwen3-8b", code=2)
    assert "5 the formula has no term for beyond its q_norm and k_norm" in err, err


def test_formula_subs_refuses_merged_weights_scales(run):
    # before: 148,192 B a layer "of scales" (the merged weights at the checkpoint's rate,
    # against 47,840 the checkpoint's attention tensors hold beyond 1 B a weight)
    _, err = run(
        "formula",
        "fused_bytes",
        "--variant",
        "mla",
        "--impl",
        "absorbed_merged",
        "--subs",
        "deepseek-v3",
        code=2,
    )
    assert "report reads 9,039,712 bytes" in err and "hold 2,918,240 beyond it" in err, err


def test_formula_subs_states_weights_stored_narrower_than_b_w(run):
    """DeepSeek-V3.1 NVFP4 (bf16 weights, its o_proj in NVFP4): report reads fewer bytes than
    b_w a weight, said as fewer. By hand: o_proj 16,384 x 7,168 weights at 4 bits and an fp8
    scale a 16 (0.5625 B) instead of 2 B, less its two float32 tensor scales. Before: "also
    stores scales ...: report reads -10,298,064,408 bytes more (-168,820,728 a layer x 61)"."""
    from reference_data import HF_CONFIGS_2

    path = HF_CONFIGS_2 / "nvidia--DeepSeek-V3.1-NVFP4.config.json"
    _, err = run("formula", "fused_bytes", "--variant", "mla", "--subs", path)
    per_layer = int(16_384 * 7_168 * (2 - Fraction(9, 16))) - 8
    assert per_layer == 168_820_728
    assert f"report reads {61 * per_layer:,} bytes fewer ({per_layer:,} a layer x 61)" in err
    assert "also stores scales" not in err and not re.search(r"-\d", err), err  # no negative


@pytest.mark.parametrize("name", ["deepseek-v3", "kimi-k2", "minimax-m2.5"])
def test_every_attention_layer_stores_what_the_first_does(name):
    """The bytes beyond b_w a weight are read off the first attention layer and stated as
    ``a layer x L``: every layer of a quantized shipped model --subs takes (DeepSeek-V3's
    first three dense, the rest MoE) stores its attention alike (sliding, chunked, linear and
    Mamba layers are refused before; tests/test_formula_subs.py's refusals)."""
    from mlacalc.cost.quant import checkpoint_tensors, tensor_bytes

    m = mlacalc.load_model(name)
    bits = mlacalc.dtype_bits(m.weights_dtype)
    per_layer: dict[str, Fraction] = {}
    for t in checkpoint_tensors(m):
        hit = re.match(r"model\.layers\.(\d+)\.self_attn\.(.*)", t.name)
        if hit and not re.match(r"[qk]_norm\.", hit[2]):
            beyond = sum(tensor_bytes(t, m.quantization)) - Fraction(t.numel * bits, 8)
            per_layer[hit[1]] = per_layer.get(hit[1], Fraction(0)) + beyond
    assert len(per_layer) == m.num_hidden_layers
    assert set(per_layer.values()) == {SCALES[name]}


@pytest.mark.parametrize(
    ("name", "variant", "layers"), [("deepseek-v3", "mla", 61), ("qwen3-8b", "gqa", 36)]
)
def test_formula_subs_says_attention_params_is_one_layer(run, name, variant, layers):
    # a learner's trial: kv_cache_bytes came out with L in it (35136*B*S*b) and
    # attention_params as a bare 187107328, one layer's, with no word that it was
    out, err = run("formula", "attention_params", "--variant", variant, "--subs", name)
    held = int(out) * layers
    reported = mlacalc.param_counts(name).breakdown["attention"]
    assert "note: attention_params is one layer's weights; " in err, err
    assert f"the {layers} layers with attention of " in err and f"hold {held:,}" in err, err
    # Qwen3's q/k norms: report counts them, the formula has no term for them
    said = (
        "(equal to report's attention)"
        if held == reported
        else f"(report's attention is {reported:,}: its q/k norms too)"
    )
    assert said in err, err


def test_formula_subs_says_kv_cache_elements_is_one_layer(run):
    # 576 for DeepSeek-V3 is one token's latent and RoPE key in one layer; its cache holds
    # 61 of them a token, as report's per-token cache counts
    out, err = run("formula", "kv_cache_elements", "--variant", "mla", "--subs", "deepseek-v3")
    assert out == "576\n"
    assert "kv_cache_elements is one token's elements in one layer; the 61 layers" in err
    assert "cache 35,136 a token" in err, err
    doc = json.loads(run("report", "deepseek-v3", "-s", 1, "--format", "json")[0])
    per_token = next(r for r in doc["kv_cache"] if r["impl"] == "absorbed")["total_bytes"]
    assert per_token == 35_136 * 2  # bf16


def test_formula_help_says_which_quantities_are_one_layer(run):
    out, _ = run("formula", "--help")
    text = " ".join(out.split())
    assert "attention_params is one layer's weights and kv_cache_elements one token's" in text
