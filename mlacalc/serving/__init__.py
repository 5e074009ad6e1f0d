"""Serving: parallel layouts, the per-GPU step with its communication, serving figures, search.

:func:`mlacalc.plan` answers for one deployment; :func:`mlacalc.serving.search.search`
explores many. The modules: :mod:`~mlacalc.serving.layout` (what each GPU holds),
:mod:`~mlacalc.serving.step` (its kernels and their time), :mod:`~mlacalc.serving.comm`
(bytes on the wire and link time).
"""

from .comm import LINK_EFFICIENCY, comm_seconds, isca_comm_bound_tpot
from .layout import Layout, make_layout
from .step import StepModel

__all__ = [
    "LINK_EFFICIENCY",
    "Layout",
    "StepModel",
    "comm_seconds",
    "isca_comm_bound_tpot",
    "make_layout",
]
