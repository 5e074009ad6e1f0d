"""mlacalc.render: tables, units, CSV/JSON/YAML writers shared by the CLI and the app."""

from __future__ import annotations

import csv
import io
import json

import pytest

import mlacalc
from mlacalc.render import (
    EXACT_FLOAT_LIMIT,
    Section,
    exact_int,
    grid_rows,
    human_seconds,
    model_yaml,
    render_csv,
    render_json,
    render_markdown,
    render_rows_csv,
    render_table,
)

BIG = 3**50  # 717897987691852588770249, far beyond 2^53 and 2^64


def test_exact_integers_survive_every_writer():
    doc = {"total_bytes": BIG, "rows": [{"flops": BIG + 1}], "ratio": 0.5}
    assert json.loads(render_json(doc))["total_bytes"] == BIG
    long_form = dict(csv.reader(io.StringIO(render_csv(doc))))
    assert int(long_form["total_bytes"]) == BIG and int(long_form["rows[0].flops"]) == BIG + 1
    wide = list(csv.DictReader(io.StringIO(render_rows_csv([{"n": BIG, "tags": ["a", "b"]}]))))
    assert int(wide[0]["n"]) == BIG and wide[0]["tags"] == "['a', 'b']"
    as_json = list(csv.DictReader(io.StringIO(render_rows_csv([{"t": ["a"]}], json_cells=True))))
    assert json.loads(as_json[0]["t"]) == ["a"]
    assert exact_int(BIG).replace(",", "") == str(BIG)


def test_grid_rows_keep_every_digit_beyond_two_to_the_53():
    rows = [
        {"name": "x", "n": EXACT_FLOAT_LIMIT + 1, "small": 7, "f": 1.5},
        {"name": "y", "n": 3, "small": 8, "f": 2.0},
    ]
    shown, kinds = grid_rows(rows)
    assert kinds == {"name": "text", "n": "exact", "small": "int", "f": "float"}
    assert shown[0]["n"] == f"{EXACT_FLOAT_LIMIT + 1:,}" and shown[1]["n"] == "3"
    assert float(EXACT_FLOAT_LIMIT + 1) == EXACT_FLOAT_LIMIT  # why: a float would lose the 1
    assert shown[0]["small"] == 7 and rows[0]["n"] == EXACT_FLOAT_LIMIT + 1  # input untouched
    same, kinds = grid_rows([{"a": 1}])
    assert same == [{"a": 1}] and kinds == {"a": "int"}


def test_tables_fit_the_width_and_never_cut_a_name():
    """A table fits the width; narrower, figures fold and headers wrap, but a name is never
    cut (was: ``kimi-linear-48b-a3`` / ``b``); where the names alone do not fit the table is
    drawn wider instead."""
    name = "kimi-linear-48b-a3b"
    sections = [Section("A title", ["model name", "value"], [[name, f"{BIG:,}"]], note="n")]
    for width in (26, 40, 60, 100, 160):
        text = render_table(sections, "header", width=width)
        table = [line for line in text.splitlines() if line.startswith(("┃", "│", "┏", "└"))]
        assert any(f"│ {name} │" in line for line in table), text
        assert max(len(line) for line in table) <= max(width, len(name) + 4 + 7)
        assert "header" in text and "A title" in text
    markdown = render_markdown(sections)
    assert "| model name | value |" in markdown and "|---|---:|" in markdown


def test_a_table_wider_than_the_width_keeps_its_last_column():
    """Where rich narrows columns to fit, a name column is not narrowed and set back (which
    cropped the last column: `mlacalc list` at 160 columns lost "KV of one 128k sequence")."""
    names = [f"model-{i:02d}-with-a-long-name-x" for i in range(3)]
    columns = ["name", *(f"figure column {k}" for k in range(9)), "last column"]
    rows = [[n, *("123.45 KiB" for _ in range(9)), "8.44 GiB"] for n in names]
    text = render_table([Section("t", columns, rows)], width=140)
    table = [line for line in text.splitlines() if line.startswith(("┃", "│", "┏", "└"))]
    assert max(len(line) for line in table) <= 140
    assert all(line.endswith(("┃", "│", "┓", "┘")) for line in table)
    assert sum("8.44 GiB" in line for line in table) == 3
    assert all(any(f"│ {n} " in line for line in table) for n in names)


def test_human_seconds():
    assert human_seconds(2.5) == "2.50 s"
    assert human_seconds(0.0025) == "2.50 ms"
    assert human_seconds(2.5e-6) == "2.50 us"
    assert human_seconds(2.5e-9) == "2.50 ns"
    assert human_seconds(0.0) == "0 s"  # before: "0.00 ns" (train's zero recompute time)


@pytest.mark.parametrize("name", mlacalc.shipped_models())
def test_model_yaml_loads_back_to_the_same_model(name, tmp_path):
    m = mlacalc.load_model(name)
    path = tmp_path / f"{name}.yaml"
    path.write_text(model_yaml(m, f"{name}.yaml"), encoding="utf-8")
    back = mlacalc.load_model(str(path))
    assert mlacalc.param_counts(back) == mlacalc.param_counts(m)
    assert mlacalc.kv_cache_bytes(back, 4096, 2) == mlacalc.kv_cache_bytes(m, 4096, 2)
    assert back.variant == m.variant and back.num_hidden_layers == m.num_hidden_layers


def test_text_in_square_brackets_is_printed_not_read_as_markup():
    """A table's title, cells, column names, note and header are text: a profile note
    ``[trtllm kernels stand in for vllm: ...]`` had been read as a style tag and dropped, so
    `mlacalc validate --engine vllm` said ``predicted (default )``."""
    from mlacalc.render import Section, render_table

    note = "[trtllm kernels stand in for vllm: no vllm profile fits these devices]"
    out = render_table(
        [Section(f"predicted (default {note})", ["a [b]", "c"], [["[x y]", "1"]], note=note)],
        header="[bold]header[/bold]",
    )
    flat = " ".join(out.split())  # a narrow table wraps its title
    assert f"predicted (default {note})" in flat
    assert "[x y]" in flat and "a [b]" in flat and flat.count(note) == 2
    assert "[bold]header[/bold]" in out


def test_model_yaml_of_a_model_without_mamba_layers_writes_no_mamba_fields():
    """The Mamba fields' defaults (a conv bias, a gated norm) say nothing of DeepSeek-V3: its
    YAML leaves them out (a new-user trial found them in an imported NVFP4 DeepSeek); a hybrid
    with Mamba layers keeps them."""
    assert "mamba_" not in model_yaml(mlacalc.load_model("deepseek-v3"))
    assert "mamba_" in model_yaml(mlacalc.load_model("nemotron-3-super-120b-a12b"))
