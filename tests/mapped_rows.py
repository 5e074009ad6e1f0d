"""A check the module-table tests share: a mapped row runs exactly the kernels a model step of
its shape builds (names, kinds, dtypes, FLOPs, bytes and every shape field)."""

from __future__ import annotations

import numpy as np
import pytest


def assert_row_runs(mapped, row: int, want) -> None:
    """Row ``row`` of ``mapped`` (a :class:`~mlacalc.measured.mapped.MappedTable`) holds the
    kernels ``want`` (a model step's :class:`~mlacalc.words.kernels.Kernel` list), no more."""
    got = {k["name"]: k for k in mapped.kernels_of_row(row)}
    assert set(got) == {k.name for k in want}
    for k in want:
        g = got[k.name]
        assert (g["kind"], g["dtype"]) == (k.kind, k.dtype)
        np.testing.assert_allclose([g["flops"], g["bytes"]], [k.flops, k.bytes], rtol=1e-9)
        for f, v in k.shape.items():
            assert g["shape"][f] == pytest.approx(v, rel=1e-9), (k.name, f)
