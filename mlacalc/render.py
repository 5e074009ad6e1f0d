"""Rendering shared by the command line and the app: titled tables, units, CSV and JSON.

A report is a list of :class:`Section` objects (a title, column names, rows of cells and a
note). :func:`render_table` draws them for a terminal of a given width, :func:`render_markdown`
as Markdown; :func:`render_csv` writes a document in long ``field,value`` form and
:func:`render_rows_csv` a list of records in wide form; :func:`render_json` keeps exact
integers. Cells are formatted by :func:`exact_int` (thousands separators, every digit kept
beyond 2^53), :func:`ratio`, and the unit formatters re-exported from :mod:`mlacalc.words.units`
(bytes in binary units, FLOPs and counts in SI units).
"""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass, field
from typing import Any

import yaml
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from mlacalc.models.registry import family_of
from mlacalc.words.units import human_bytes, human_seconds, human_si

__all__ = [
    "EXACT_FLOAT_LIMIT",
    "UNITS_NOTE",
    "Section",
    "exact_int",
    "flatten",
    "grid_rows",
    "human_bytes",
    "human_seconds",
    "human_si",
    "model_yaml",
    "ratio",
    "render_csv",
    "render_json",
    "render_markdown",
    "render_rows_csv",
    "render_table",
]

UNITS_NOTE = (
    "Bytes in binary units (KiB = 2^10 B, GiB = 2^30 B); "
    "FLOPs and parameters in SI units (G = 10^9)."
)


@dataclass
class Section:
    """One titled table of a report: column names, rows of cells, an optional note below."""

    title: str
    columns: list[str]
    rows: list[list[Any]]
    note: str = ""
    #: Columns (by index) that hold text and are aligned left; the first always is.
    text_columns: tuple[int, ...] = field(default=())


def exact_int(n: int) -> str:
    """``671026419200`` -> ``'671,026,419,200'``: every digit, also beyond 2^53.

    >>> exact_int(2**60 + 1)
    '1,152,921,504,606,846,977'
    """
    return f"{int(n):,}"


#: Largest integer every float64 (and so every JavaScript number) holds exactly.
EXACT_FLOAT_LIMIT = 2**53


def grid_rows(rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """Rows ready for a data grid, and the kind of every column.

    A column holding an integer beyond 2^53 in magnitude (which a grid would round to a
    float, or refuse beyond 2^63) becomes exact text with thousands separators; kinds are
    ``"int"``, ``"exact"`` (such text), ``"float"`` and ``"text"``. A column mixing numbers and
    text is refused (TypeError): numbers stay numbers, words go in a column of their own.

    >>> rows, kinds = grid_rows([{"n": 2**60 + 1, "k": 3}, {"n": 5, "k": 4}])
    >>> rows[0]["n"], rows[1]["n"], kinds
    ('1,152,921,504,606,846,977', '5', {'n': 'exact', 'k': 'int'})
    """
    kinds: dict[str, str] = {}
    numeric: set[str] = set()
    for row in rows:
        for key, value in row.items():
            number = isinstance(value, (int, float)) and not isinstance(value, bool)
            if number:
                numeric.add(key)
            if (kinds.get(key) == "text" and number) or (key in numeric and isinstance(value, str)):
                raise TypeError(
                    f"table column {key!r} mixes numbers and text ({value!r}): a grid column "
                    "holds one type; put the words in a column of their own (empty cells: None)"
                )
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                kind = "text" if value is not None else kinds.get(key, "int")
            elif isinstance(value, float):
                kind = "float"
            else:
                kind = "exact" if abs(value) > EXACT_FLOAT_LIMIT else "int"
            order = ("int", "float", "exact", "text")
            previous = kinds.get(key, "int")
            kinds[key] = max(previous, kind, key=order.index)
    exact = [k for k, kind in kinds.items() if kind == "exact"]
    if not exact:
        return list(rows), kinds
    out = []
    for row in rows:
        new = dict(row)
        for key in exact:
            value = new.get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                new[key] = exact_int(value)
            elif isinstance(value, float):
                new[key] = f"{value:,.6g}"
        out.append(new)
    return out, kinds


def ratio(x: float) -> str:
    """``12.345`` -> ``'12.35x'``."""
    return f"{x:,.2f}x"


#: The widest a name column is kept whole (a model or kernel name); a longer label, a
#: sentence, wraps at its spaces
NAME_WIDTH = 40


def _column_widths(section: Section) -> list[int]:
    """Each column's width: its longest cell (at most :data:`NAME_WIDTH`, beyond which a label
    wraps at spaces), or its header's longest word when that is longer."""
    widths = []
    for i, col in enumerate(section.columns):
        cells = [len(str(row[i])) for row in section.rows if i < len(row)]
        widths.append(
            max([min(max(cells, default=1), NAME_WIDTH), *(len(w) for w in str(col).split()), 1])
        )
    return widths


def render_table(sections: list[Section], header: str = "", width: int | None = None) -> str:
    """Plain-text tables (rich, no colour) at ``width`` columns (default: 160). Headers wrap
    at spaces; a name (the first column, and the text columns) is never cut, as
    ``kimi-linear-48b-a3`` / ``b`` was: figures fold first when the table would not fit, and
    a table whose names alone do not fit is drawn wider than ``width``."""
    buffer = io.StringIO()
    console = Console(
        file=buffer,
        width=width or 160,
        force_terminal=False,
        color_system=None,
        highlight=False,
    )
    if header:
        console.print(escape(header))
    for section in sections:
        table = Table(title=escape(section.title), title_justify="left", show_lines=False)
        widths = _column_widths(section)
        text = [i == 0 or i in section.text_columns for i in range(len(widths))]
        # a text column whose cells all fit in its width is given that width outright: rich
        # narrows the widest column first where a table does not fit, and a minimum width
        # then set it back, cropping the last column (list at 160 columns lost its "KV of one
        # 128k sequence"); a column of longer sentences keeps the minimum and the room left
        whole = [
            text[i] and all(len(str(r[i])) <= widths[i] for r in section.rows if i < len(r))
            for i in range(len(widths))
        ]
        for i, col in enumerate(section.columns):
            table.add_column(
                escape(col),
                justify="left" if text[i] else "right",
                width=widths[i] if whole[i] else None,
                min_width=widths[i] if text[i] and not whole[i] else None,
                overflow="fold",
            )
        for row in section.rows:
            table.add_row(*[escape(str(c)) for c in row])
        # the names whole, four characters of each figure, a space each side and a rule each
        needed = sum(w if t else 4 for w, t in zip(widths, text)) + 3 * len(widths) + 1
        console.width = max(width or 160, needed)
        console.print(table)
        console.width = width or 160
        if section.note:
            console.print(escape(section.note))
    console.print(UNITS_NOTE)
    return buffer.getvalue()


def render_markdown(sections: list[Section], header: str = "") -> str:
    """GitHub Markdown tables, one ``###`` heading per section."""
    lines = [header, ""] if header else []
    for section in sections:
        lines.append(f"### {section.title}")
        lines.append("")
        lines.append("| " + " | ".join(section.columns) + " |")
        aligns = [
            "---" if i == 0 or i in section.text_columns else "---:"
            for i in range(len(section.columns))
        ]
        lines.append("|" + "|".join(aligns) + "|")
        for row in section.rows:
            lines.append("| " + " | ".join(str(c).replace("|", "\\|") for c in row) + " |")
        if section.note:
            lines += ["", section.note]
        lines.append("")
    lines.append(UNITS_NOTE)
    return "\n".join(lines) + "\n"


def flatten(prefix: str, value: Any, out: list[tuple[str, Any]]) -> None:
    """Append the ``(dotted.path, leaf)`` pairs of a nested document to ``out``."""
    if isinstance(value, dict):
        for k, v in value.items():
            flatten(f"{prefix}.{k}" if prefix else k, v, out)
    elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        for i, v in enumerate(value):
            flatten(f"{prefix}[{i}]", v, out)
    elif isinstance(value, list):
        out.append((prefix, ";".join(str(v) for v in value)))
    else:
        out.append((prefix, value))


def render_csv(document: dict | list) -> str:
    """Long format: one ``field,value`` row per leaf; exact integers, units in the names."""
    rows: list[tuple[str, Any]] = []
    flatten("", document, rows)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["field", "value"])
    for key, value in rows:
        writer.writerow([key, "" if value is None else value])
    return buffer.getvalue()


def render_rows_csv(rows: list[dict], json_cells: bool = False) -> str:
    """Wide format for record lists: one row per record, the union of keys as columns.

    With ``json_cells``, dict and list values are written as JSON text.
    """
    buffer = io.StringIO()
    columns: list[str] = []
    for row in rows:
        for key in row:
            if key not in columns:
                columns.append(key)
    writer = csv.DictWriter(buffer, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: _cell(v, json_cells) for k, v in row.items()})
    return buffer.getvalue()


def _cell(value: Any, json_cells: bool) -> Any:
    if value is None:
        return ""
    if json_cells and isinstance(value, (dict, list)):
        return json.dumps(value)
    return value


def render_json(document: Any) -> str:
    """Indented JSON with exact integers (Python ints are written digit for digit); a float
    that is not finite (an unbounded queue's TTFT) is null, never the ``NaN`` or ``Infinity``
    that no JSON reader takes."""
    return json.dumps(_json_finite(document), indent=2, allow_nan=False) + "\n"


def _json_finite(x: Any) -> Any:
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: _json_finite(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_json_finite(v) for v in x]
    if hasattr(x, "dtype") and hasattr(x, "item") and getattr(x, "ndim", None) == 0:
        return _json_finite(x.item())  # a numpy scalar
    return x


#: Flags written only when true (a false one is the default), except where a family needs it.
_FLAGS_WHEN_TRUE = (
    "attention_bias",
    "qkv_bias",
    "mlp_bias",
    "parallel_attn",
    "new_decoder_architecture",
    "bias",
    "alibi",
    "attention_k_eq_v",
)
_FAMILY_FLAGS = {"falcon": ("parallel_attn", "bias")}
#: Expert and MTP counts a dense model writes only when non-zero.
_COUNTS_WHEN_NONZERO = (
    "n_routed_experts",
    "n_shared_experts",
    "num_experts_per_tok",
    "first_k_dense_replace",
    "num_nextn_predict_layers",
)


def model_yaml(m: Any, origin: str = "") -> str:
    """A model as an mlacalc YAML model file: the fields that matter, derivations as comments.

    Empty fields and false flags are left out (they are the defaults) unless the family
    defaults that field to something else when absent (Mistral's ``sliding_window: null``
    is written, or it would load back as a 4096 window); so are zero
    expert and MTP counts of dense models; MoE and MLA families default some of those
    to non-zero, so there a zero is written. ``q_lora_rank`` stays for MLA models (``null``
    means a plain query projection). The text loads back to the same model (a test).
    """

    # A field the family defaults when absent must be written even when it is empty, false
    # or zero: Mistral's ``sliding_window: null`` (full attention) would otherwise load back
    # as MistralConfig's 4096-token window.
    unit = family_of(m.model_type)
    defaulted = set(unit.defaults_for(m.model_type)) if unit is not None else set()
    data = {
        k: v
        for k, v in m.to_dict().items()
        if (v not in (None, "", []) or (k == "q_lora_rank" and m.is_mla) or k in defaulted)
        and k != "aliases"
    }
    keep = set(_FAMILY_FLAGS.get(m.family, ())) | defaulted
    for key in _FLAGS_WHEN_TRUE:
        if data.get(key) is False and key not in keep:
            data.pop(key)
    if not (m.is_moe or m.is_mla):  # their families default some of these to non-zero
        for key in _COUNTS_WHEN_NONZERO:
            if data.get(key) == 0 and key not in defaulted:
                data.pop(key)
    if not m.is_moe and "moe_layer_freq" not in defaulted:
        data.pop("moe_layer_freq", None)
    if not m.ssm_state_size:  # a model without Mamba layers: their defaults say nothing
        for key in [k for k in data if k.startswith("mamba_") and k not in defaulted]:
            data.pop(key)
    header = [f"# Converted by mlacalc import-hf from {origin}"] if origin else []
    header.append(f"# attention variant: {m.variant.upper()}")
    # a note the model's notes already hold (an MTP layer not imported) is written there only
    header += [f"# derived: {note}" for note in m.derived if note != m.notes]
    return "\n".join(header) + "\n" + yaml.safe_dump(data, sort_keys=False, width=120)
