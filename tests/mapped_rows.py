"""What the measured-table tests share: a mapped row runs exactly the kernels a model step of
its shape builds (names, kinds, dtypes, FLOPs, bytes and every shape field), and which rows
run a kernel of a kind and dtype."""

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


def rows_running(mapped, dtype: str | None = None, kind: str = "") -> np.ndarray:
    """Per row of ``mapped``, whether it runs a kernel of ``dtype`` (None: any) whose kind
    starts with ``kind`` ("": any): the rows of one table kind, as bench_timemodel.py splits
    them."""
    keep = np.zeros(len(mapped.table), dtype=bool)
    for p in mapped.parts:
        if p.batch.kind.startswith(kind) and dtype in (None, p.batch.dtype):
            keep[p.rows] = True
    return keep
