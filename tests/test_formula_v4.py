"""DeepSeek-V4's layers as formulas: `mlacalc formula --variant csa | hca | swa`.

Before: `formula ... --subs deepseek-v4-pro` was refused ("DeepSeek-V4's compressed attention,
which has no formula variant"), so a learner had the prose of docs/deepseek-v4.md and report's
totals but no formula to read. Each formula here is held, at sequence lengths on both sides of
the window, the compression rates and the top-k's reach, to two routes it does not share code
with: `report` (the engine convention's cache and the step's stage FLOPs, all layers) and the
counting rules checked against transformers' `modeling_deepseek_v4`
(`mlacalc.cost.compressed.layer_cache` and `attention_flops`, layer by layer).
"""

import json
import re

import pytest

import mlacalc
from mlacalc import formula
from mlacalc.cost import compressed as cc
from mlacalc.cost import symbols as s
from mlacalc.models import deepseek_v4 as v4
from mlacalc.report import model_report
from mlacalc.words.errors import InvalidArgumentError

KINDS = {"csa": v4.CSA, "hca": v4.HCA, "swa": v4.SLIDING}
STAGES = ("q_proj", "kv_proj", "core", "o_proj")
#: the shipped model, and a what-if of it whose first two layers keep the window only
PRO = mlacalc.load_model("deepseek-v4-pro")
SWA = PRO.with_changes(compress_ratios=[0, 0, *PRO.compress_ratios[2:]])
#: lengths below and past the window (128), the rates (4, 128) and the top-k's reach (4,096)
LENGTHS = (1, 3, 4, 5, 127, 128, 129, 1000, 4095, 4096, 4099, 32768, 100003)


def _values(m, kind, seq, batch):
    c = v4.config_of(m)
    rate = {"csa": m.compress_rate_csa, "hca": m.compress_rate_hca, "swa": 1}[kind]
    return {
        s.d: m.hidden_size, s.n_h: m.num_attention_heads, s.d_h: m.head_dim,
        s.d_cq: m.q_lora_rank, s.d_o: m.o_lora_rank, s.g: m.o_groups,
        s.W: m.sliding_window, s.m_r: rate, s.k: m.index_topk, s.n_i: m.index_n_heads,
        s.d_i: m.index_head_dim, s.L: sum(t == KINDS[kind] for t in c.layer_types),
        s.S: seq, s.B: batch, s.b: 2,
    }  # fmt: skip


def _kinds(m):
    c = v4.config_of(m)
    return [k for k in KINDS if KINDS[k] in c.layer_types]


@pytest.mark.parametrize("m", [PRO, SWA], ids=["pro", "pro-with-swa"])
def test_v4_formulas_are_report_and_the_reference_rules(m):
    c = v4.config_of(m)
    # each formula built once and substituted at every length (built at each length, the
    # sympy factoring took over half of the file's 13.4 s of a CI worker)
    cache = {k: formula("kv_cache_bytes", k) for k in _kinds(m)}
    flops = {
        (k, phase, stage): formula("attention_flops", k, phase=phase, stage=stage)
        for k in _kinds(m)
        for phase in ("prefill", "decode")
        for stage in STAGES
    }
    for seq in LENGTHS:
        batch = 3
        doc = model_report(m, seq_len=seq, batch=batch, kv_dtype="bf16")
        kv = {k: int(cache[k].subs(_values(m, k, seq, batch))) for k in _kinds(m)}
        for kind, got in kv.items():  # each kind: the reference's rows, layer by layer
            rows = sum(sum(cc.layer_cache(c, t, seq, "engine").values())
                       for t in c.layer_types if t == KINDS[kind])  # fmt: skip
            assert got == batch * 2 * rows, (kind, seq)
        served = next(r for r in doc["kv_cache"] if r["default"])
        assert sum(kv.values()) == served["total_bytes"], seq
        for phase in ("prefill", "decode"):
            stages = doc["attention"][[a["phase"] for a in doc["attention"]].index(phase)]
            for stage in STAGES:
                got = sum(
                    int(flops[k, phase, stage].subs(_values(m, k, seq, batch))) for k in _kinds(m)
                )
                assert got == stages["stage_flops"][stage], (seq, phase, stage)


def test_v4_core_is_the_reference_causal_core_plus_the_indexer():
    c = v4.config_of(PRO)
    for seq in (4096, 4099, 20000):
        for kind in ("csa", "hca"):
            ref = [cc.attention_flops(c, t, seq) for t in c.layer_types if t == KINDS[kind]]
            want = sum(f["core_causal"] + f.get("indexer_score", 0) for f in ref)
            got = formula("attention_flops", kind, phase="prefill", stage="core")
            assert int(got.subs(_values(PRO, kind, seq, 1))) == want


def test_subs_and_at_give_the_number(run):
    out, err = run("formula", "kv_cache_bytes", "--variant", "csa", "--subs", "deepseek-v4-pro",
                   "--at", "B=1", "--at", "S=32768", "--at", "b=bf16")  # fmt: skip
    assert int(out) == int(formula("kv_cache_bytes", "csa").subs(_values(PRO, "csa", 32768, 1)))
    assert "L = 30: DeepSeek-V4-Pro's csa layers; its others: 31 hca (--variant hca)" in err
    out, _ = run("formula", "attention_flops", "--variant", "hca", "--subs", "deepseek-v4-pro",
                 "--phase", "decode")  # fmt: skip
    assert "floor(S/128)" in out and "Min(128, S)" in out
    doc = json.loads(run("report", "deepseek-v4-pro", "-s", 32768, "-b", 1, "--phase", "decode",
                         "--kv-dtype", "bf16", "--format", "json")[0])  # fmt: skip
    total = 0
    for kind in ("csa", "hca"):
        args = ["--subs", "deepseek-v4-pro", "--phase", "decode", "--at", "B=1", "--at", "S=32768"]
        out, _ = run("formula", "attention_flops", "--variant", kind, *args)
        total += int(out)
    assert total == doc["attention"][0]["flops"]


def test_the_formulas_read_as_the_doc_says():
    assert str(formula("attention_flops", "hca", phase="decode", stage="core")) == (
        "4*B*L*d_h*n_h*(floor(S/m) + Min(S, W))"
    )
    assert str(formula("kv_cache_bytes", "swa")) == "B*L*b*d_h*Min(S, W)"


@pytest.mark.parametrize(
    ("kwargs", "argument", "words"),
    [
        ({"quantity": "kv_cache_elements"}, "quantity", "has formulas of kv_cache_bytes and "),
        ({"quantity": "attention_params"}, "quantity", "mlacalc report counts the rest"),
        ({"phase": None}, "phase", "phase prefill (q = S) or decode (q = 1), none given"),
        ({"phase": "chunk"}, "phase", "not chunk"),
        ({"stage": "absorb"}, "stage", "has no absorb stage: its stages are q_proj, kv_proj"),
        ({"impl": "naive"}, "impl", "has one implementation"),
    ],
)
def test_v4_formula_refusals_name_the_argument(kwargs, argument, words):
    args = {"quantity": "attention_flops", "variant": "csa", "phase": "decode", **kwargs}
    with pytest.raises(InvalidArgumentError, match=re.escape(words)) as exc:
        formula(**args)
    assert exc.value.argument == argument


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--variant", "hca", "--subs", "deepseek-v3"],
         "DeepSeek-V3 has no DeepSeek-V4 layers (csa, hca, swa): use --variant mla"),
        (["--variant", "swa", "--subs", "deepseek-v4-pro"],
         "DeepSeek-V4-Pro has no swa layer: use --variant hca or --variant csa"),
        (["--variant", "mla", "--subs", "deepseek-v4-pro"], "compressed attention"),
        (["--variant", "hca", "--impl", "naive"], "HCA has one implementation"),
        (["--variant", "csa", "--at", "d_c=1"], "has no d_c"),
    ],
)  # fmt: skip
def test_v4_cli_refusals_are_one_line(run, args, words):
    _, err = run("formula", "kv_cache_bytes", *args, code=2)
    assert words in err and len(err.strip().splitlines()) == 1


def test_v4_flops_without_a_phase_is_one_line(run):
    _, err = run("formula", "attention_flops", "--variant", "hca", code=2)
    assert "--phase" in err and "none given" in err and len(err.strip().splitlines()) == 1


def test_help_names_the_v4_variants(run):
    text = " ".join(run("formula", "--help")[0].split())
    assert "csa" in text and "hca" in text and "swa" in text and "DeepSeek-V4" in text
