"""What the app shows (AppTest): the measured view's default profile, times in their units, the
planner's context in the library's words, warnings past max_position_embeddings, URL values
clamped, labels, colours and legends of the charts, the FLOPs tables, the README's models."""

from __future__ import annotations

import json
import re

import pytest

pytest.importorskip("streamlit")
pytest.importorskip("plotly")

from reference_data import MEASURED, ROOT

import mlacalc

APP = str(ROOT / "app.py")
REF = MEASURED


from test_app import PLANNER, every_view, markdown, run  # noqa: E402  (one runner)


def charts(at) -> dict[str, dict]:
    """Plotly figures by title."""
    out = {}
    for c in at.get("plotly_chart"):
        spec = json.loads(c.proto.spec)
        title = spec["layout"].get("title", {}).get("text", "")
        out[title] = spec
    return out


def test_measured_default_profile_is_the_library_choice():
    """'default' on a set the shipped default was fitted on: the app predicts it with the
    profile ``mlacalc.validate(measured=...)`` chooses, and names it, instead of refusing."""
    pytest.importorskip("pyarrow.parquet")
    path = REF / "h100_sxm" / "mla_bmm"
    expected = mlacalc.validate(measured=path)
    at = run("Measured sets")
    (pick,) = [s for s in at.selectbox if s.key == "meas_set"]
    pick.set_value("other path ...").run()
    (box,) = [t for t in at.text_input if t.key == "meas_path"]
    box.set_value(str(path)).run()
    (profile,) = [s for s in at.selectbox if s.key == "meas_profile"]
    assert profile.value == "default"
    assert not at.exception and not at.error, [e.value for e in at.error]
    text = markdown(at)
    assert f"Profile used: **{expected.profile}**" in text
    med = f"{100 * expected.overall['median_abs_error']:.1f}%"
    assert f"median |error| **{med}**" in text


def test_microbenchmark_times_in_units_and_device_in_one_pair_of_brackets():
    at = run("Measured sets")
    v = mlacalc.validate()[0].to_dict()
    text = markdown(at)
    assert f"{v['name']} on {v['device']}: median" in text
    assert f"({v['device']})" not in text
    table = next(d.value for d in at.dataframe if "measured" in d.value.columns)
    row = v["rows"][0]
    from mlacalc.render import human_seconds

    assert table["measured"].iloc[0] == human_seconds(row["measured_s"])
    assert table["measured"].iloc[0].endswith((" ms", " us", " s"))
    assert table["error %"].iloc[0] == pytest.approx(round(100 * row["error"], 1))


def test_planner_longest_context_in_the_library_words():
    at = run(PLANNER, model="llama-3-70b", seq_len="4096", batch="16", kv="fp8", hw="H100-SXM")
    p = mlacalc.plan(
        "llama-3-70b", "H100-SXM", 8, tp=8, kv_dtype="fp8", page_size=16, seq_len=4096, batch=16
    )
    assert p.max_context_memory > p.max_context  # capped at max_position_embeddings
    captions = [c.value for c in at.caption]
    assert p.longest_context_text() in captions
    assert not any("model's window" in c for c in captions)


def test_context_beyond_max_position_embeddings_warned_in_every_counting_tab():
    runs = every_view(model="llama-3-70b", seq_len="32768", batch="16", kv="fp8", hw="H100-SXM")
    infos = [i.value for at in runs for i in at.info]
    ours = [i for i in infos if "exceeds the model's max_position_embeddings (8,192)" in i]
    # KV cache, FLOPs, Roofline and the planner say it, once each, in the same words
    assert len(ours) == 4 and len(set(o.rstrip(".") for o in ours)) == 1, infos
    runs = every_view(model="llama-3-70b", seq_len="8192")
    assert not [i.value for at in runs for i in at.info if "max_position_embeddings" in i.value]


def test_out_of_range_url_integers_clamp_on_both_sides():
    at = run(L="0", d_c="-5", seq_len="0")
    assert at.number_input(key="w_layers").value == 1
    assert at.slider(key="w_dc").value == 16
    assert at.number_input(key="seq_len").value == 1
    notices = " ".join(w.value for w in at.warning)
    for name, lo in (("L=0", 1), ("d_c=-5", 16), ("seq_len=0", 1)):
        assert f"'{name}' is below the smallest value {lo:,}; clamped to {lo:,}" in notices
    at = run(L="9999")
    assert at.number_input(key="w_layers").value == 512
    at = run(L="x")  # not a number: the model's own value
    assert at.number_input(key="w_layers").value == 61


def test_capacity_labels_name_the_sidebar_workload():
    at = run(PLANNER, model="llama-3-70b", seq_len="4096", batch="8", kv="fp8", hw="H100-SXM")
    labels = [m.label for m in at.metric]
    assert "longest context at batch 8" in labels and "largest batch at 4,096 tokens" in labels
    assert any(
        "Capacity at the sidebar's workload** (4,096 tokens, batch 8)" in m.value
        for m in at.markdown
    )


def test_binding_wraps_and_dp_attention_label_fits():
    at = run(PLANNER)
    assert "binding" not in [m.label for m in at.metric]  # a metric truncates its value
    assert any('">binding</div>' in m.value for m in at.markdown)
    assert at.checkbox(key="plan_dpa").label == "DP-attention"


def test_memory_bar_parts_keep_their_colour_and_the_legend_wraps_below():
    def bar(at):
        return charts(at)["Memory of one GPU"]

    ds, llama = bar(run(PLANNER)), bar(run(PLANNER, model="llama-3-70b", hw="H100-SXM"))
    for fig in (ds, llama):
        assert fig["layout"]["legend"]["orientation"] == "h"

    def colours(fig):
        return {
            ("KV" if t["name"].startswith("KV") else t["name"]): t["marker"]["color"]
            for t in fig["data"]
        }

    a, b = colours(ds), colours(llama)
    shared = set(a) & set(b)
    assert {"KV", "attention", "free", "reserve"} <= shared
    assert all(a[k] == b[k] for k in shared), (a, b)
    assert len(set(a.values())) == len(a)  # no two parts alike


def test_flops_tables_fit_and_the_star_is_explained():
    at = run("FLOPs")
    summary = next(d.value for d in at.dataframe if "total FLOPs" in d.value.columns)
    assert len(summary.columns) <= 6
    stages = next(d.value for d in at.dataframe if "o_proj" in d.value.columns)
    assert {"impl", "core", "o_proj"} <= set(stages.columns) and len(stages.columns) <= 8
    assert stages["o_proj"].iloc[0].endswith(("G", "T", "P", "M", "K"))
    assert any("absorbed*: absorbed (default)" in c.value for c in at.caption)


def test_kv_legend_names_a_one_curve_design_once():
    kv = next(
        f for t, f in charts(run(model="llama-3-70b")).items() if "KV cache of the whole" in t
    )
    names = [t["name"] for t in kv["data"]]
    assert "GQA" in names and "GQA gqa" not in names
    kv = next(f for t, f in charts(run()).items() if "KV cache of the whole" in t)
    assert {"MLA naive", "MLA latent"} <= {t["name"] for t in kv["data"]}


def test_readme_lists_every_shipped_model():
    text = (ROOT / "README.md").read_text()
    section = text.split("## Shipped models", 1)[1].split("\n## ", 1)[0]
    flat = re.sub(r"[^a-z0-9]", "", section.lower())
    missing = [n for n in mlacalc.shipped_models() if re.sub(r"[^a-z0-9]", "", n) not in flat]
    assert not missing, missing


def test_microbenchmark_sets_say_what_they_check():
    """The H200 sets' 7.2% / 6.6% read as the engines' accuracy in a trial: each set says it
    checks the unfused roofline against the eager microbenchmark, not the engines' model."""
    from appviews.measured import BENCH_SCOPE

    at = run("Measured sets")
    captions = [c.value for c in at.caption]
    assert captions.count(BENCH_SCOPE) == len(mlacalc.validate())
    assert "eager" in BENCH_SCOPE and "not the engines' kernel model" in BENCH_SCOPE
