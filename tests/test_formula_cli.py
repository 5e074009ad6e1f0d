"""`mlacalc formula`'s refusals and hints, from a new user's trial (round 24, issue 22).

Before: `formula attention_flops --variant gqa --stage absorb` printed a bare 0 with rc 0 (GQA
has no absorb stage), and a misspelt quantity (`kv_cache_byte`) was refused with the seven
choices as a metavar and no closest spelling.
"""

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
