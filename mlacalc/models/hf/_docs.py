"""Rewrite the generated tables of ``docs/config-schema.md``: ``python -m mlacalc.models.hf._docs``.

Run it after adding a family unit or a schema field; a test fails while the page differs.
"""

from __future__ import annotations

import sys
from pathlib import Path

from mlacalc.models import registry
from mlacalc.models.hf import markdown_defaults, markdown_spellings
from mlacalc.models.schema import markdown_fields

_DOC_TABLES = {
    "fields": markdown_fields,
    "defaults": lambda: registry_tables()[0],
    "spellings": lambda: registry_tables()[1],
    "model-types": lambda: ", ".join(registry.model_types()) + ".",
}


def registry_tables() -> tuple[str, str]:
    """The family defaults and spellings tables (from :mod:`mlacalc.models.hf`)."""
    return markdown_defaults(), markdown_spellings()


def refresh_schema_doc(text: str) -> str:
    """``text`` with every ``<!-- generated: NAME -->`` ... ``<!-- end: NAME -->`` block
    rewritten from the declarations (``python -m mlacalc.models.hf._docs`` updates the page)."""
    for name, make in _DOC_TABLES.items():
        start, end = f"<!-- generated: {name} -->", f"<!-- end: {name} -->"
        if start not in text or end not in text:
            raise ValueError(f"docs/config-schema.md lacks the {start} block")
        head, rest = text.split(start, 1)
        _, tail = rest.split(end, 1)
        text = f"{head}{start}\n{make()}\n{end}{tail}"
    return text


def main(argv: list[str]) -> None:
    """Refresh the page named in ``argv`` (default ``docs/config-schema.md``)."""
    page = Path(argv[0] if argv else "docs/config-schema.md")
    page.write_text(refresh_schema_doc(page.read_text()))
    print(f"refreshed {page}")


if __name__ == "__main__":
    main(sys.argv[1:])
