"""Collection rules for ``pytest --doctest-modules`` over the package.

The calculator core needs no optional extra. Modules that import one at their top (the
microbenchmark needs PyTorch) are left out of doctest collection when that extra is not
installed, so that a core-only environment collects without errors; their tests skip on
their own with ``pytest.importorskip``.
"""

from __future__ import annotations

import importlib.util

#: package module (relative to this file) -> the optional extra it imports at module level
_NEEDS = {
    "mlacalc/bench/layers.py": "torch",
    "mlacalc/bench/runner.py": "torch",
}


def _missing(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is None
    except (ImportError, ValueError):
        return True


collect_ignore = [path for path, module in _NEEDS.items() if _missing(module)]
