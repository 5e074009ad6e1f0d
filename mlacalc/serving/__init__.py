"""Serving: parallel layouts, the per-GPU step with its communication, serving figures, search.

:func:`mlacalc.plan` answers for one deployment; :func:`mlacalc.serving.search.search`
explores many. The modules: :mod:`~mlacalc.serving.layout` (what each GPU holds),
:mod:`~mlacalc.serving.gpu_step` (its kernels and their time), :mod:`~mlacalc.serving.comm`
(bytes on the wire and link time), :mod:`~mlacalc.serving.scenarios` (published measurements
to check against). The modules that need numpy load on first use, so that importing
mlacalc stays fast.
"""

from __future__ import annotations

import importlib
from typing import Any

from mlacalc.serving.layout import Layout, make_layout

__all__ = [
    "LINK_EFFICIENCY",
    "Layout",
    "StepModel",
    "comm_seconds",
    "isca_comm_bound_tpot",
    "make_layout",
    "search",
]

_LAZY = {
    "LINK_EFFICIENCY": "comm",
    "comm_seconds": "comm",
    "isca_comm_bound_tpot": "comm",
    "StepModel": "gpu_step",
    "search": "search",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
