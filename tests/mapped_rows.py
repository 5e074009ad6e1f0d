"""What the measured-table tests share: a mapped row runs exactly the kernels a model step of
its shape builds (names, kinds, dtypes, FLOPs, bytes and every shape field), and which rows
run a kernel of a kind and dtype."""

from __future__ import annotations

import functools

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


def _frozen(a):
    if isinstance(a, np.ndarray):
        a.flags.writeable = False
    return a


@functools.cache
def mapped_table(system: str, family: str, table: str, engine: str = "trtllm"):
    """The shipped measured table ``table`` of ``engine`` (the set's tables of that engine and
    the shared ones, as ``load_measured(..., engine=engine)`` reads them) in
    ``<system>/<family>``, mapped onto kernels (:func:`~mlacalc.measured.mapping.map_table`)
    once per test process: many tests predict one table, and mapping the larger ones takes
    seconds. Its arrays are read-only, so that a test that would change them fails instead of
    changing what the next test reads; a test that wants to change one maps its own copy."""
    pytest.importorskip("pyarrow")
    from reference_data import MEASURED

    from mlacalc.measured.mapping import map_table
    from mlacalc.measured.tables import load_measured

    tables = load_measured(MEASURED / system / family, engine=engine).tables
    t = min((x for x in tables if x.table == table and x.engine in (engine, "")),
            key=lambda x: x.engine != engine)  # fmt: skip
    mapped = map_table(t)
    for a in (*t.columns.values(), t.seconds, mapped.reason, mapped.host_s):
        _frozen(a)
    for a in mapped.flags.values():
        _frozen(a)
    for p in mapped.parts:
        for a in (p.rows, p.batch.flops, p.batch.bytes, p.batch.calls, *p.batch.shape.values()):
            _frozen(a)
    return mapped


@functools.cache
def predicted(system: str, family: str, table: str, profile: str, engine: str = "trtllm"):
    """``predict_mapped`` of :func:`mapped_table`'s table by the shipped profile named
    ``profile`` (on the table's device), once per test process: several tests hold different
    rows of one table's prediction by one profile, and predicting a large table takes seconds.
    Read-only, as the mapped table's arrays."""
    from mlacalc.measured.observations import predict_mapped

    return _frozen(predict_mapped(mapped_table(system, family, table, engine), None, profile))


def prediction_of(mapped, profile: str):
    """The prediction of ``mapped`` by the shipped profile ``profile``: :func:`predicted`'s,
    made once per process, where ``mapped`` is :func:`mapped_table`'s map of an engine's
    table; predicted afresh for any other map."""
    from mlacalc.measured.observations import predict_mapped

    t = mapped.table
    if t.engine and mapped is mapped_table(t.system, t.family, t.table, t.engine):
        return predicted(t.system, t.family, t.table, profile, t.engine)
    return predict_mapped(mapped, None, profile)
