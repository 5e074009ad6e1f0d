"""An MLA latent rank or head widths no measured kernel row has (every MLA row is DeepSeek-V3's
kv_lora_rank 512, RoPE 64, nope 128, v 128; the DSA module tables add GLM-5's nope 192, v 256):
one check, carried by every timed output (predict_time's warnings, roofline, plan, search,
convert's timed sweep), and a plan's expected error says it is not this geometry's. A
model-architect trial found predict_time, search and convert silent at kv_lora_rank 1,024, and
every output silent at RoPE 32 / nope 96 / v 96 heads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mlacalc.cli import main
from mlacalc.models.loading import model_argument
from mlacalc.serving.plan import plan
from mlacalc.timemodel.mla_geometry import MLA_GEOMETRY_SAID, mla_geometry_note, mla_geometry_off
from mlacalc.timemodel.predict import predict_time

ODD = str(Path(__file__).parent / "data" / "trial5" / "design_odddims.json")


def _said(warnings) -> list[str]:
    return [w for w in warnings if MLA_GEOMETRY_SAID in w]


def test_the_check_reads_rank_and_head_widths():
    v3 = model_argument("deepseek-v3")
    assert mla_geometry_off(v3) == {}
    assert mla_geometry_off(v3.with_changes(kv_lora_rank=1024)) == {"kv_lora_rank": (1024, 512)}
    assert mla_geometry_off(model_argument(ODD)) == {
        "qk_rope_head_dim": (32, 64),
        "qk_nope_head_dim": (96, 128),
        "v_head_dim": (96, 128),
    }
    # GLM-5's widths are measured for a DSA model (its module tables), not for a dense MLA one
    assert mla_geometry_off(model_argument("glm-5.1")) == {}
    wide = v3.with_changes(qk_nope_head_dim=192, v_head_dim=256)
    assert set(mla_geometry_off(wide)) == {"qk_nope_head_dim", "v_head_dim"}
    assert mla_geometry_off(model_argument("llama-3-8b")) == {}
    # several models (a rank sweep): each width off listed once
    note = mla_geometry_note(*(v3.with_changes(kv_lora_rank=r) for r in (256, 512, 1024)))
    assert "kv_lora_rank 256, 1,024 (measured 512)" in note


def test_predict_time_warns_where_the_kernel_model_times_an_mla_core():
    m = model_argument("deepseek-v3").with_changes(kv_lora_rank=1024)
    args = ("H100", "decode")
    kw = dict(seq_len=32768, batch=32, scope="attention_layer")
    assert len(_said(predict_time(m, *args, **kw).warnings)) == 1
    assert _said(predict_time(model_argument(ODD), *args, **kw).warnings)
    assert not _said(predict_time(model_argument("deepseek-v3"), *args, **kw).warnings)
    # no fitted rule (the plain bound), or an expanded MHA core (no latent): nothing to say
    assert not _said(predict_time(m, *args, profile="roofline", **kw).warnings)
    assert not _said(predict_time(m, *args, impl="naive", **kw).warnings)


def test_roofline_and_plan_say_narrower_heads(capsys):
    assert main(["roofline", ODD, "-H", "H100", "--batch", "16", "--seq-len", "4096"]) == 0
    out = capsys.readouterr()
    assert " ".join(out.out.split()).count(MLA_GEOMETRY_SAID) == 1
    assert MLA_GEOMETRY_SAID not in out.err  # said once, in the report
    m = model_argument("/".join([str(Path(ODD).parent), "design.json"]))
    p = plan(m.with_changes(qk_rope_head_dim=48), "H100", 8, dp_attention=True, ep=8, isl=2000,
             osl=500, concurrency=64)  # fmt: skip
    assert len(_said(p.warnings)) == 1 and "qk_rope_head_dim 48" in _said(p.warnings)[0]


def test_a_plan_says_its_expected_error_is_not_this_geometry():
    m = model_argument("deepseek-v3")
    args = dict(dp_attention=True, ep=8, isl=2000, osl=500, concurrency=64)
    p = plan(m.with_changes(kv_lora_rank=1024), "H100", 8, **args)
    r = p.prediction
    assert r["expected_error"]  # the benchmark's, kept
    assert "not for this model's kv_lora_rank 1,024" in r["geometry_note"]
    assert plan(m, "H100", 8, **args).prediction["geometry_note"] == ""


def test_search_json_carries_it(capsys):
    args = ["search", ODD, "-H", "H100", "--gpus", "8", "--isl", "2000", "--osl", "500"]
    assert main([*args, "--format", "json"]) == 0
    out = capsys.readouterr()
    assert len(_said(json.loads(out.out)["warnings"])) == 1
    assert MLA_GEOMETRY_SAID in out.err


def test_convert_timed_sweep_says_each_rank_off(capsys):
    args = ["convert", "llama-3-8b", "--ranks", "256,512,1k", "--hw", "B200", "--format", "json"]
    assert main(args) == 0
    out = capsys.readouterr()
    (said,) = _said(json.loads(out.out)["warnings"])
    # the converted model's rank (the equivalence rank) and the swept ranks other than 512
    assert "kv_lora_rank 256, 1,024" in said and " 512 (measured" not in said
    assert MLA_GEOMETRY_SAID in out.err
    # no device: no times, nothing extrapolated to say
    assert main(["convert", "llama-3-8b", "--format", "json"]) == 0
    assert "warnings" not in json.loads(capsys.readouterr().out)


def test_the_app_planner_line_says_it():
    pytest.importorskip("streamlit")
    from appviews.planner import prediction_line

    m = model_argument("deepseek-v3").with_changes(kv_lora_rank=1024)
    p = plan(m, "H100", 8, dp_attention=True, ep=8, isl=2000, osl=500, concurrency=64)
    assert "not for this model's kv_lora_rank 1,024" in prediction_line(p.prediction)
