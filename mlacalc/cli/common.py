"""Argument types, shared options and output of the ``mlacalc`` commands."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable
from typing import Any, ClassVar

import click

from ..errors import MlacalcError
from ..render import (
    Section,
    render_csv,
    render_json,
    render_markdown,
    render_rows_csv,
    render_table,
)

__all__ = [
    "FORMATS",
    "IMPL_CHOICE",
    "KV_DTYPE",
    "PHASE_CHOICE",
    "SIZE",
    "W_DTYPE",
    "DtypeType",
    "Section",
    "SizeType",
    "emit",
    "format_option",
    "load",
    "phases",
    "size_list",
    "terminal_width",
]

FORMATS = ("table", "markdown", "json", "csv")


class SizeType(click.ParamType):
    """A token count or batch: ``131072``, ``128k`` (= 128 x 1024), ``1M`` (= 1024^2), ``1.5k``."""

    name = "size"
    _pattern = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kKmMgG]?)\s*$")
    _scale: ClassVar[dict[str, int]] = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            result = value
        else:
            match = self._pattern.match(str(value))
            if not match:
                self.fail(f"'{value}' is not a size; write 131072, 128k or 1M", param, ctx)
            number, suffix = match.groups()
            scaled = float(number) * self._scale[suffix.lower()]
            if scaled != int(scaled) or ("." in number and not suffix):
                self.fail(f"'{value}' is not a whole number", param, ctx)
            result = int(scaled) if "." in number else int(number) * self._scale[suffix.lower()]
        if result <= 0:
            self.fail(f"'{value}' must be positive", param, ctx)
        return result


SIZE = SizeType()


class DtypeType(click.ParamType):
    """A dtype name (``bf16``, ``fp8``, ...) or, for KV caches, a cache layout."""

    name = "dtype"

    def __init__(self, layouts: bool):
        self.layouts = layouts

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        from ..dtypes import DTYPE_BITS, KV_LAYOUTS, canonical_dtype

        key = str(value).strip().lower()
        if self.layouts and key in KV_LAYOUTS:
            return key
        try:
            return canonical_dtype(key)
        except MlacalcError:
            known = list(DTYPE_BITS) + (list(KV_LAYOUTS) if self.layouts else [])
            self.fail(f"unknown dtype '{value}'; use one of: {', '.join(known)}", param, ctx)


KV_DTYPE = DtypeType(layouts=True)
W_DTYPE = DtypeType(layouts=False)

IMPL_CHOICE = click.Choice(["naive", "compressed", "absorbed", "absorbed_merged", "standard"])
PHASE_CHOICE = click.Choice(["prefill", "decode", "chunk", "both"])


def format_option(f: Callable) -> Callable:
    """The ``--format`` option every report takes."""
    return click.option(
        "--format",
        "fmt",
        type=click.Choice(FORMATS),
        default="table",
        show_default=True,
        help="Output format. json/csv keep exact integers.",
    )(f)


def load(name: str):
    """A model by shipped name, YAML file or Hugging Face config.json."""
    from ..config import load_model

    return load_model(name)


def phases(phase: str) -> list[str]:
    """``both`` -> prefill and decode; any other phase stands for itself."""
    return ["prefill", "decode"] if phase == "both" else [phase]


def size_list(text: str | None) -> list[int] | None:
    """``'1,8,32k'`` -> ``[1, 8, 32768]``."""
    if text is None:
        return None
    return [SIZE.convert(part, None, None) for part in text.split(",") if part.strip()]


def terminal_width(default: int = 160) -> int:
    """Columns for tables: ``$COLUMNS``, else the terminal's width, else ``default``."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) >= 40:
        return int(columns)
    try:
        if sys.stdout.isatty():
            return max(40, os.get_terminal_size(sys.stdout.fileno()).columns)
    except (OSError, ValueError, AttributeError):
        pass
    return default


def emit(
    fmt: str,
    document: Any,
    sections: Callable[[], list[Section]],
    header: str = "",
    rows_csv: bool = False,
) -> None:
    """Print ``document`` (json/csv) or its ``sections()`` (table/markdown)."""
    if fmt == "json":
        text = render_json(document)
    elif fmt == "csv":
        text = render_rows_csv(document) if rows_csv else render_csv(document)
    elif fmt == "markdown":
        text = render_markdown(sections(), header)
    else:
        text = render_table(sections(), header, width=terminal_width())
    click.echo(text, nl=False)
