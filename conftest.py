"""Collection rules for ``pytest --doctest-modules`` over the package.

The calculator core needs no optional extra. A package module, or a helper module of the
tests, that imports an optional extra at its top (the microbenchmark imports PyTorch) is left
out of doctest collection when that extra is not installed, so that a core-only environment
collects without errors; the tests of such modules skip on their own with
``pytest.importorskip``.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

#: the optional extras (see pyproject.toml) a package module may import at its top
OPTIONAL = ("torch", "transformers", "pyarrow", "pandas", "scipy", "streamlit")

_TOP_IMPORT = re.compile(r"^(?:import|from)\s+(" + "|".join(OPTIONAL) + r")\b", re.MULTILINE)


def _missing(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is None
    except (ImportError, ValueError):
        return True


def _needs_missing_extra(path: Path) -> bool:
    text = path.read_text(encoding="utf-8", errors="replace")
    return any(_missing(name) for name in set(_TOP_IMPORT.findall(text)))


_ROOT = Path(__file__).resolve().parent
#: package modules, and the tests' own helper modules (doctest collection imports them too)
_MODULES = [*sorted((_ROOT / "mlacalc").rglob("*.py")), *sorted((_ROOT / "tests").glob("[!t]*.py"))]
collect_ignore = [str(path.relative_to(_ROOT)) for path in _MODULES if _needs_missing_extra(path)]
