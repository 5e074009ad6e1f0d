"""`mlacalc formula --at SYMBOL=VALUE`: a formula's symbols given values, down to the number.

Before: `formula kv_cache_bytes --subs deepseek-v3 --set seq_len=4096` was refused (seq_len is
not a field of a model), and a learner had no way to put B, S and b in the printed formula and
read the figure beside `report`'s. The numbers here are checked against `report --format json`,
which counts the cache layer by layer (an independent route: the layer pattern and the cache
spec, not the symbolic formula).
"""

import json

import pytest

#: DeepSeek-V3's MLA formula, substituted
V3 = ("--variant", "mla", "--subs", "deepseek-v3")


def _at(*pairs: str) -> list[str]:
    """``--at`` once for each SYMBOL=VALUE."""
    return [a for pair in pairs for a in ("--at", pair)]


def _report_kv(run, model, seq, batch, kv_dtype):
    doc = json.loads(
        run("report", model, "-s", seq, "-b", batch, "--kv-dtype", kv_dtype, "--format", "json")[0]
    )
    return next(r["total_bytes"] for r in doc["kv_cache"] if r["default"])


@pytest.mark.parametrize(
    ("model", "variant", "seq", "batch", "b", "kv_dtype"),
    [
        ("deepseek-v3", "mla", 4096, 8, "fp8", "fp8"),
        ("deepseek-v2-lite", "mla", 1000, 3, "2", "bf16"),
        ("llama-3.1-8b", "gqa", 8192, 1, "bf16", "bf16"),
    ],
)
def test_formula_at_every_symbol_is_reports_cache(run, model, variant, seq, batch, b, kv_dtype):
    args = ["--variant", variant, "--subs", model]
    out, err = run(
        "formula",
        "kv_cache_bytes",
        *args,
        "--at",
        f"B={batch}",
        "--at",
        f"S={seq}",
        "--at",
        f"b={b}",
    )
    assert int(out) == _report_kv(run, model, seq, batch, kv_dtype)
    assert f"kv_cache_bytes = {int(out):,} bytes" in err


def test_formula_at_partial_keeps_the_other_symbols(run):
    out, _ = run(
        "formula", "kv_cache_bytes", "--variant", "mla", "--subs", "deepseek-v3", "--at", "B=8"
    )
    assert out.strip() == "281088*S*b"  # 35,136 elements a token over 61 layers, x 8
    out, _ = run(
        "formula",
        "kv_cache_bytes",
        "--variant",
        "gqa",
        *_at("n_kv=8", "d_h=128"),
        "--python",
    )
    assert out.strip() == "2048*B*L*S*b"


def test_formula_at_without_subs_is_the_hand_figure(run):
    # Llama-3.1-8B by hand: 2 (K, V) x 32 layers x 8 KV heads x 128 x 2 bytes x 8,192 tokens
    out, _ = run(
        "formula",
        "kv_cache_bytes",
        "--variant",
        "gqa",
        *_at("B=1", "L=32", "S=8192", "b=2", "d_h=128", "n_kv=8"),
    )
    assert int(out) == 2 * 32 * 8 * 128 * 2 * 8192


def test_formula_at_flops_match_report(run):
    # decode FLOPs of DeepSeek-V3's attention, absorbed, 3 sequences of 2,000 keys: report's
    out, _ = run(
        "formula",
        "attention_flops",
        "--variant",
        "mla",
        "--subs",
        "deepseek-v3",
        "--impl",
        "absorbed",
        "--phase",
        "decode",
        *_at("B=3", "S=2000"),
    )
    doc = json.loads(
        run("report", "deepseek-v3", "-s", 2000, "-b", 3, "--phase", "decode", "--format", "json")[
            0
        ]
    )
    rows = [r for r in doc["attention"] if r["impl"] == "absorbed" and r["phase"] == "decode"]
    assert rows and int(out) == rows[0]["flops"]


def test_formula_at_fraction_stays_exact(run):
    out, err = run(
        "formula",
        "kv_cache_bytes",
        "--variant",
        "gqa",
        *_at("B=1", "L=1", "S=3", "b=33/32", "d_h=1", "n_kv=1"),
    )
    assert out.strip() == "99/16"  # 2 x 3 x 33/32
    assert "kv_cache_bytes = 6.1875" in err


@pytest.mark.parametrize(
    ("at", "words"),
    [
        (["S4096"], "'S4096' is not SYMBOL=VALUE; write e.g. --at S=4096"),
        (["=4"], "is not SYMBOL=VALUE"),
        (["S="], "is not SYMBOL=VALUE"),
        (["s=4"], "s is not a symbol of the formulas: did you mean S?"),
        (["seq_len=4"], "seq_len is not a symbol of the formulas"),
        (["S=0"], "S=0: S is a whole number of at least 1"),
        (["S=-3"], "S=-3: S is a whole number of at least 1"),
        (["S=1.5"], "S=1.5: S is a whole number of at least 1"),
        (["S=1e3"], "S=1e3: S is a whole number of at least 1"),
        (["S=٣"], "S=٣: S is a whole number of at least 1"),
        (["b=0"], "b=0: b is bytes per element: a positive number"),
        (["b=fp9"], "b=fp9: b is bytes per element"),
        (["b=1/0"], "b=1/0: b is bytes per element"),
        (["b=nan"], "b=nan: b is bytes per element"),
        (["rho=1"], "rho is not a symbol of the formulas"),
        (["S=4q"], "S=4q: S is a whole number of at least 1"),
        (["S=4", "S=5"], "S is given twice; give it once"),
        (["q=9", "S=8"], "the formula of kv_cache_bytes has no q"),
        (
            ["d_c=512"],
            "the formula of kv_cache_bytes has no d_c: its symbols are B, L, S, b, d_h, n_kv",
        ),
    ],
)
def test_formula_at_bad_input_is_one_line(run, at, words):
    args = [a for v in at for a in ("--at", v)]
    _, err = run("formula", "kv_cache_bytes", "--variant", "gqa", *args, code=2)
    assert words in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_formula_at_after_subs_names_set(run):
    _, err = run("formula", "kv_cache_bytes", *V3, *_at("d_c=256"), code=2)
    assert "has no d_c: its symbols are B, S, b (--subs deepseek-v3 gave the model's" in err
    assert "--set changes them" in err


def test_formula_help_shows_at(run):
    text = " ".join(run("formula", "--help")[0].split())
    assert "--at SYMBOL=VALUE" in text and "--at b=fp8" in text


@pytest.mark.parametrize(
    ("field", "hint"), [("seq_len", "--at S=4096"), ("batch", "--at B=8"), ("kv_dtype", "b=fp8")]
)
def test_formula_set_of_a_workload_setting_points_at_at(run, field, hint):
    _, err = run(
        "formula",
        "kv_cache_bytes",
        *V3,
        "--set",
        f"{field}=4096",
        code=2,
    )
    assert f"{field} is the workload's, not a field of the model" in err and hint in err


def test_formula_at_takes_sizes_and_checks_q_against_s(run):
    # a size as every other command writes it: 4k = 4,096
    out, _ = run("formula", "kv_cache_bytes", "--variant", "gqa",
                 *_at("B=1", "L=1", "S=4k", "b=1", "d_h=1", "n_kv=1"))  # fmt: skip
    assert int(out) == 2 * 4096
    _, err = run("formula", "attention_flops", "--variant", "mla", "--impl", "naive",
                 *_at("q=9", "S=8"), code=2)  # fmt: skip
    assert "q=9 new tokens attend S=8 keys, which hold them: give q <= S" in err
    _, err = run("formula", "attention_flops", "--variant", "gqa", "--phase", "decode",
                 *_at("q=10", "S=5"), code=2)  # fmt: skip
    assert "has no q" in err
