"""The app's labels and tables, one truth each (AppTest): typed tables, per-layer-kind rows
named, shares on a linear axis, only the open tab computed."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("streamlit")
pytest.importorskip("plotly")

from test_app import PLANNER, run

from mlacalc.render import grid_rows


def test_qwen3_next_kv_table_is_typed():
    """Was: 'fixed state' text in the numeric columns of the KV-by-kind table (an Arrow type
    error in the log, numbers without separators). A column holds one type: the layer counts
    and bytes numbers, the per-token cells the CLI report's text (figures with separators,
    "fixed state" for a linear layer), and a table mixing the two is refused where it is
    built."""
    at = run(model="qwen3-next-80b-a3b")
    table = next(d.value for d in at.dataframe if "kind of layer" in d.value.columns)
    for column in ("layers", "bytes"):
        assert table[column].dtype.kind in "if", (column, table[column].dtype)
    keeps = dict(zip(table["kind of layer"], table["keeps"]))
    assert keeps == {"linear": "a fixed state per sequence", "full": "every token"}
    per_token = dict(zip(table["kind of layer"], table["bytes/token/layer"]))
    assert per_token["linear"] == "fixed state" and per_token["full"] == "2,048"
    with pytest.raises(TypeError, match="'n' mixes numbers and text"):
        grid_rows([{"n": 3}, {"n": "fixed state"}])


def test_hybrid_mamba_kv_table_says_what_each_layer_keeps_as_report_does():
    """Was (Nemotron-H): the by-kind table's bytes/token/layer printed "None" for the mamba and
    none rows, and "keeps" said "every token" beside 0 tokens kept. A Mamba layer keeps a fixed
    state per sequence, a layer without a mixer nothing; the per-token cells are the CLI
    report's, row for row."""
    from click.testing import CliRunner

    from mlacalc.cli import cli

    at = run(model="nemotron-3-super-120b-a12b", seq_len="8192")
    table = next(d.value for d in at.dataframe if "kind of layer" in d.value.columns)
    rows = {r["kind of layer"]: r for r in table.to_dict("records")}
    assert rows["mamba"]["keeps"] == "a fixed state per sequence"
    assert rows["none"]["keeps"] == "nothing (no sequence mixer)"
    assert rows["full"]["keeps"] == "every token"
    out = CliRunner().invoke(cli, ["report", "nemotron-3-super-120b-a12b", "-s", "8k"]).output
    for kind, row in rows.items():
        (line,) = [x for x in out.splitlines() if f"│ {kind} " in x]
        cells = [c.strip() for c in line.split("│")]
        assert [row["bytes/token/layer"], row["tokens kept per layer"]] == cells[4:6], kind
        assert "None" not in str(row.values())
    assert [rows[k]["bytes/token/layer"] for k in ("mamba", "none")] == ["fixed state", "-"]


def test_gemma4_kernel_rows_name_their_layer_kind():
    """Was: two rows both called 'attention' in the planner's kernel table for Gemma 4."""
    at = run(PLANNER, model="gemma-4-26b-a4b", hw="H100-SXM", gpus="1", tp="1")
    table = next(d.value for d in at.dataframe if "ms" in d.value.columns)
    rows = table[table["kernel"] == "attention"]
    assert sorted(rows["layer kind"]) == ["full", "sliding(1024)"]


def test_parameters_chart_draws_shares_on_a_linear_axis():
    """Was: the parts of the model on a log axis (a 2% part looked like half the model)."""
    at = run("Parameters")
    spec = next(
        json.loads(c.proto.spec)
        for c in at.get("plotly_chart")
        if "Parameters of the whole model" in json.loads(c.proto.spec)["layout"]["title"]["text"]
    )
    assert spec["layout"]["xaxis"]["type"] == "linear"
    assert spec["layout"]["xaxis"]["range"] == [0, 100]
    assert sum(spec["data"][0]["x"]) == pytest.approx(100)


def test_only_the_open_tab_runs():
    """The first load computes its tab only (the sidebar waited as grey placeholders while six
    views ran): the planner's widgets are absent on the first tab, the KV metrics on the
    planner's, and the tab is in the URL."""
    first = run()
    assert "plan_gpus" not in [n.key for n in first.number_input]
    assert "per token, all layers" in [m.label for m in first.metric]
    planner = run(PLANNER)
    assert "plan_gpus" in [n.key for n in planner.number_input]
    assert "per token, all layers" not in [m.label for m in planner.metric]
    bad = run(view="No such tab")
    assert any("'view=No such tab' is not a known view" in w.value for w in bad.warning)
    lower = run(view=PLANNER.lower())  # a tab's title as written, or the first tab
    assert any("is not a known view" in w.value for w in lower.warning)
    assert "plan_gpus" not in [n.key for n in lower.number_input]
