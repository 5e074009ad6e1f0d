"""Collection rules: doctests over the package, and the slow tests left out by default.

Tests marked ``slow`` (the microbenchmark's runs, the browser, a few long property checks:
each over about 10 s on two cores) are skipped unless ``--runslow`` is given or the marker
expression names them (``-m slow``); ``.ci/run`` runs them as a step of their own. The
default run stays a few minutes long; speed itself is measured in ``benchmarks/``, not here.

The calculator core needs no optional extra. A package module, or a helper module of the
tests, that imports an optional extra at its top (the microbenchmark imports PyTorch) is left
out of doctest collection when that extra is not installed, so that a core-only environment
collects without errors; the tests of such modules skip on their own with
``pytest.importorskip``.
"""

from __future__ import annotations

import gc
import importlib.util
import re
from pathlib import Path

import pytest

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


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--runslow", action="store_true", help="run the tests marked slow too (skipped by default)"
    )


def pytest_configure(config: pytest.Config) -> None:
    """The cyclic garbage collector of a test process runs less often (Python's default: a
    young collection every 700 allocations, the whole heap every hundred of those): a test
    process holds what its tests cache (models, measured tables, search steps), and every
    whole-heap pass walks all of it. tests/test_app_display.py, test_architecture.py and
    test_models_config_mutation.py in one process: 8.6 s of 61.6 s of CPU collecting (6.2 s
    in 37 whole-heap passes) by default, 2.7 s with these thresholds. Garbage is still
    collected, a little later; nothing a test checks depends on when."""
    gc.set_threshold(10_000, 20, 20)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--runslow") or "slow" in (config.getoption("-m") or ""):
        return
    skip = pytest.mark.skip(reason="slow: run with --runslow or -m slow")
    for item in items:
        if item.get_closest_marker("slow") is not None:
            item.add_marker(skip)
