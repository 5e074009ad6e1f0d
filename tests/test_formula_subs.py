"""`formula --subs MODEL`: every shipped model's numbers are report's, or it is refused by name.

Trial 3 (main 501453c) found the formula silently wrong on models it does not describe:
DeepSeek-V2-Lite (no query latent) 7,471,616 attention parameters a layer against report's
13,763,072; Mistral-7B (window 4,096) a 32K x 2 cache of 4,294,967,296 B against 536,870,912;
Gemma 3 and Qwen3-Next likewise; DeepSeek-V3's fp8 block scales (2,918,240 B) unsaid.
"""

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


def _value(text, **env):
    return eval(text, {}, env)  # a --python formula of B, S, q, b, b_a, b_w


def _stated(err, pattern):
    """The figure a warning states the formula leaves out (0 when none is stated)."""
    found = re.search(pattern, err)
    return int(found.group(1).replace(",", "")) if found else 0


@pytest.mark.slow  # every shipped model: about 30 s of CPU
@pytest.mark.parametrize("name", SHIPPED)
def test_formula_subs_is_report_or_refused(run, capsys, name):
    from mlacalc.cli import main

    m = mlacalc.load_model(name)
    v = m.variant
    rc = main(["formula", "attention_params", "--variant", v, "--subs", name, "--python"])
    out, err = capsys.readouterr()
    if rc:  # refused: one line naming the model and pointing at report
        assert "--subs" in err and "mlacalc report" in err and err.count("\n") == 1, err
        return
    report = json.loads(run("report", name, "-s", S, "-b", B, "--format", "json")[0])
    per_layer = report["parameters"]["attention_per_layer"]
    assert int(out) + _stated(err, r"\(([\d,]+) weights a layer\)") == per_layer, (out, err)
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
            extra = _stated(err, r"report reads ([\d,]+) bytes more")
            assert _value(out, q=a["q_len"], **env) + extra == a[key], (quantity, a["label"])


@pytest.mark.parametrize("name", [n for n in SHIPPED if mlacalc.load_model(n).is_mla])
def test_formula_subs_mla_parameters_are_reports(run, capsys, name):
    """Every shipped MLA model: attention_params is report's attention_per_layer (plus the
    weights a warning states), or refused (fast; the slow test above checks every quantity)."""
    from mlacalc.cli import main

    rc = main(["formula", "attention_params", "--variant", "mla", "--subs", name, "--python"])
    out, err = capsys.readouterr()
    if rc:
        assert "mlacalc report" in err, err
        return
    extra = _stated(err, r"\(([\d,]+) weights a layer\)")
    want = mlacalc.param_counts(name).attention_per_layer
    assert int(out) + extra == want, (name, out, err)


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
