"""Rewrite the generated tables of ``docs/config-schema.md``: ``python -m mlacalc.models.hf._docs``.

Run it after adding a family unit or a schema field; a test fails while the page differs.
"""

from __future__ import annotations

import sys
from pathlib import Path

from mlacalc.models.schema import refresh_schema_doc


def main(argv: list[str]) -> None:
    """Refresh the page named in ``argv`` (default ``docs/config-schema.md``)."""
    page = Path(argv[0] if argv else "docs/config-schema.md")
    page.write_text(refresh_schema_doc(page.read_text()))
    print(f"refreshed {page}")


if __name__ == "__main__":
    main(sys.argv[1:])
