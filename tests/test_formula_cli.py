"""`mlacalc formula`'s refusals and hints, from a new user's trial (round 24, issue 22).

Before: `formula attention_flops --variant gqa --stage absorb` printed a bare 0 with rc 0 (GQA
has no absorb stage), and a misspelt quantity (`kv_cache_byte`) was refused with the seven
choices as a metavar and no closest spelling.
"""

import re

import pytest


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--variant", "gqa", "--stage", "absorb"], "GQA has no absorb stage: its stages are "),
        (["--variant", "mha", "--stage", "absorb"], "MHA has no absorb stage"),
        (["--variant", "gqa", "--stage", "kv_up"], "GQA has no kv_up stage"),
        (
            ["--variant", "mla", "--impl", "naive", "--stage", "absorb"],
            "MLA (naive) has no absorb stage: its stages are q_proj, kv_proj, kv_up, core, o_proj",
        ),
        (
            ["--variant", "mla", "--phase", "decode", "--stage", "kv_up"],
            "MLA (serving default, in decode) has no kv_up stage: its stages are q_proj, "
            "kv_proj, absorb, core, o_proj",
        ),
    ],
)
def test_formula_refuses_a_stage_the_variant_has_not(run, args, words):
    out, err = run("formula", "attention_flops", *args, code=2)
    assert out == "" and "--stage" in err and words in err and err.count("\n") == 1, err


def test_formula_stages_it_has_still_print(run):
    out, err = run("formula", "attention_flops", "--variant", "gqa", "--stage", "core")
    assert out.strip() == "4*B*L*S*d_h*n_h*q" and err == ""


def test_formula_misspelt_quantity_gets_the_closest(run):
    _, err = run("formula", "kv_cache_byte", "--variant", "mla", code=2)
    assert "'kv_cache_byte' is not a quantity: did you mean 'kv_cache_bytes'?" in err, err
    assert "{kv_cache_elements|" not in err  # the long metavar is gone
    _, err = run("formula", "zzz", "--variant", "mla", code=2)
    assert "did you mean" not in err and "one of kv_cache_elements, kv_cache_bytes" in err, err


def test_formula_help_names_the_quantities(run):
    out, _ = run("formula", "--help")
    assert "Usage: mlacalc formula [OPTIONS] QUANTITY" in out
    assert "kv_cache_elements, kv_cache_bytes," in " ".join(out.split())


# -- DSA (DeepSeek-V3.2's sparse attention): the formula equals report's counts ----------------

#: keys below, at and above the models' index_topk (2,048), and a chunk of new tokens
DSA_SEQ = (1000, 2048, 2049, 8192)
DSA_QUANTITIES = {
    "attention_flops": "flops",
    "elementwise_flops": "elementwise_flops",
    "fused_bytes": "fused_bytes",
    "unfused_bytes": "unfused_bytes",
}


def _value(text, **env):
    return eval(text, {"min": min}, env)  # a --python formula of B, S, q, b, b_a, b_w


@pytest.mark.slow  # about 4.5 min of CPU: every phase, impl, stage and S of two models
@pytest.mark.parametrize("name", ["deepseek-v3.2", "glm-5.1"])
@pytest.mark.parametrize("causal", [False, True])
def test_formula_dsa_is_report(run, name, causal):
    import json
    from fractions import Fraction

    import mlacalc

    m = mlacalc.load_model(name)
    batch = 2
    flag = ["--causal"] if causal else []
    env = {"B": batch, "b": 2, "b_a": 2, "b_w": Fraction(mlacalc.dtype_bits(m.weights_dtype), 8)}
    base = ["--variant", "dsa", "--subs", name, "--python"]
    out, _ = run("formula", "kv_cache_bytes", *base)
    formulas = {}
    for seq in DSA_SEQ:
        for phase, q_len in (("decode", 1), ("prefill", seq), ("chunk", 512)):
            chunk = ["--q-len", q_len] if phase == "chunk" else []
            report = json.loads(
                run("report", name, "-s", seq, "-b", batch, "--phase", phase, *chunk,
                    "--format", "json", *flag)[0]
            )  # fmt: skip
            cache = next(k for k in report["kv_cache"] if k["impl"] == "absorbed")
            assert _value(out, S=seq, **env) == cache["total_bytes"], (seq, out)
            for a in report["attention"]:
                if a["impl"] != a["cache_impl"] and not a["default"]:
                    continue  # the expanded op sequence over an expanded cache (as MLA's test)
                args = [*base, "--phase", phase, *flag]
                if not a["default"]:
                    args += ["--impl", a["impl"]]
                for quantity, key in DSA_QUANTITIES.items():
                    if (quantity, *args) not in formulas:
                        text, err = run("formula", quantity, *args)
                        extra = re.search(r"\(([\d,]+) a layer x (\d+)\), whatever", err)
                        extra = int(extra[1].replace(",", "")) * int(extra[2]) if extra else 0
                        formulas[(quantity, *args)] = text, extra
                    text, extra = formulas[(quantity, *args)]
                    got = _value(text, S=seq, q=q_len, **env) + extra
                    assert got == a[key], (name, seq, phase, a["impl"], quantity, got, a[key])
                for stage, flops in a["stage_flops"].items():
                    if flops == 0:
                        continue  # refused: the variant has no such stage (above)
                    key = ("attention_flops", *args, "--stage", stage)
                    if key not in formulas:
                        formulas[key] = run("formula", *key)[0], 0
                    got = _value(formulas[key][0], S=seq, q=q_len, **env)
                    assert got == flops, (name, seq, phase, a["impl"], stage, got, flops)


def test_formula_dsa_decode_is_report(run):
    """The trial's commands (before: refused, 'dsa layers are not the plain MLA layer'):
    DeepSeek-V3.2's decode FLOPs and cache below and above its 2,048 keys, report's exactly."""
    import json

    out, _ = run("formula", "attention_flops", "--variant", "dsa", "--phase", "decode")
    assert out.strip() == (
        "2*B*L*(S*d_i*n_i + d*d_c + d*d_cq + d*d_i + d*d_rope + d*d_v*n_h + d*n_i + "
        "d_c*d_nope*n_h + d_c*d_v*n_h + d_cq*d_i*n_i + d_cq*d_nope*n_h + d_cq*d_rope*n_h + "
        "n_h*(2*d_c + d_rope)*Min(S, k))"
    )
    core, _ = run("formula", "attention_flops", "--variant", "dsa", "--phase", "decode",
                  "--stage", "core")  # fmt: skip
    assert core.strip() == "2*B*L*(S*d_i*n_i + n_h*(2*d_c + d_rope)*Min(S, k))"
    sub = ["--variant", "dsa", "--subs", "deepseek-v3.2"]
    flops, _ = run("formula", "attention_flops", *sub, "--phase", "decode", "--python")
    cache, _ = run("formula", "kv_cache_bytes", *sub, "--python")
    assert cache.strip() == "732*B*S*(48*b + 11)"  # 61 x (576 b + 132) a token
    for seq in (1000, 4096):
        doc = json.loads(run("report", "deepseek-v3.2", "-s", seq, "-b", 3, "--phase",
                             "decode", "--format", "json")[0])  # fmt: skip
        default = next(a for a in doc["attention"] if a["default"])
        assert _value(flops, B=3, S=seq) == default["flops"], seq
        row = next(k for k in doc["kv_cache"] if k["impl"] == "absorbed")
        assert _value(cache, B=3, S=seq, b=2) == row["total_bytes"], seq
    out, _ = run("formula", "kv_cache_elements", *sub)
    assert out == "704\n"  # 512 + 64 latent and RoPE key, 128 indexer key


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--variant", "mla", "--subs", "deepseek-v3.2"],
         "DeepSeek-V3.2 is DSA (MLA with an indexer picking 2,048 keys a query), not MLA: use "
         "--variant dsa"),
        (["--variant", "dsa", "--subs", "deepseek-v3"],
         "DeepSeek-V3 is MLA, not DSA: use --variant mla"),
        (["--variant", "dsa", "--subs", "llama-3-8b"], "not DSA: use --variant gqa"),
        (["--variant", "dsa", "--impl", "standard"], "DSA has naive, compressed"),
        (["--variant", "dsx"], "'dsx' is not a variant: did you mean 'dsa'?"),
    ],
)  # fmt: skip
def test_formula_dsa_bad_input(run, args, words):
    _, err = run("formula", "kv_cache_bytes", *args, code=2)
    assert words in err and err.count("\n") == 1, err


def test_formula_help_names_dsa_and_its_symbols(run):
    text = " ".join(run("formula", "--help")[0].split())
    for words in ("--variant dsa", "k keys the indexer picks a query (index_topk)",
                  "n_i indexer heads (index_n_heads)", "d_i indexer head width (index_head_dim)",
                  "b_i bytes per indexer key element", "FLOPs count 2 per multiply-add",
                  "[mha|gqa|mqa|mla|dsa|csa|hca|swa]"):  # fmt: skip
        assert words in text, words


def test_dsv4_doc_defines_its_symbols_before_use():
    """A student's trial: docs/deepseek-v4.md used D, n_i, d_i, m, m', W, g, n and j with no
    definition (D valued only 50 lines after its first use); now a table at the top defines
    each, before the first formula that uses it, and the glossary has DSA's and V4's."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    doc = (root / "docs" / "deepseek-v4.md").read_text()
    table = doc.index("### Symbols")
    rows = doc[table : doc.index("\n\n", doc.index("| symbol |", table))]
    for sym in ("D", "W", "m", "m'", "n_i", "d_i", "g", "n", "S", "index_topk"):
        assert f"\n| `{sym}` |" in rows or f"| `{sym}`, " in rows or f", `{sym}` |" in rows, sym
    assert "`j` the 1-based position" in rows
    body = doc[doc.index("\n\n", doc.index("| symbol |", table)) :]
    assert "n_h D" in body and doc.index("n_h D") > table  # the first formula, after the table
    glossary = (root / "docs" / "glossary.md").read_text()
    for words in ("**k, n_i, d_i, b_i, P_k**", "`index_n_heads`", "`index_head_dim`",
                  "**D, W, m, m', g, n**", "`compress_rate_csa`"):  # fmt: skip
        assert words in glossary, words


@pytest.mark.parametrize("variant", ["mqa", "dsa", "mla"])
def test_formula_v4_refusal_names_report_and_the_doc(run, variant):
    # before: "... `mlacalc report` counts them" with no model named and no doc; and (a review)
    # --variant dsa / mla were told "use --variant mqa or --variant gqa", refused in turn
    _, err = run("formula", "kv_cache_bytes", "--variant", variant, "--subs", "deepseek-v4-pro",
                 code=2)  # fmt: skip
    # round 26: each kind is a variant of its own (tests/test_formula_v4.py), named here
    assert "DeepSeek-V4-Pro's csa, hca layers are DeepSeek-V4's compressed attention" in err
    assert "use --variant hca or --variant csa (docs/deepseek-v4.md" in err
    assert "`mlacalc report deepseek-v4-pro` counts them all" in err and err.count("\n") == 1
