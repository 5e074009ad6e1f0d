"""Training costs: FLOPs by stage, activation memory per recompute policy, optimizer and
gradient memory, and the step time on a parallel layout (:func:`training_cost`); the layouts
of a number of GPUs that fit, fastest first (:func:`training_search`).

Above :mod:`mlacalc.serving` in the layer order (it reuses the serving layer's link model for
communication); nothing below imports it. The package ``__init__`` stays light: the modules
load on first use of a name.
"""

from __future__ import annotations

import importlib as _importlib
from typing import Any as _Any

__all__ = [
    "TrainingCost",
    "TrainingSearch",
    "absorption_table",
    "training_cost",
    "training_flops",
    "training_search",
]

_LAZY = {
    "TrainingCost": "mlacalc.training.cost",
    "absorption_table": "mlacalc.training.cost",
    "training_cost": "mlacalc.training.cost",
    "training_flops": "mlacalc.training.flops",
    "TrainingSearch": "mlacalc.training.layout_search",
    "training_search": "mlacalc.training.layout_search",
}


def __getattr__(name: str) -> _Any:
    if name in _LAZY:
        value = getattr(_importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'mlacalc.training' has no attribute {name!r}")
