"""Measured sets: GPU and microbenchmark kernel timings, read, mapped onto kernels, checked.

* :mod:`~mlacalc.measured.sets` reads aiconfigurator tables (parquet, optional ``measured``
  extra) and the microbenchmark's CSV/JSON into :class:`MeasuredTable` objects;
* :mod:`~mlacalc.measured.mapping` turns every row into the kernels it timed;
* :mod:`~mlacalc.measured.quirks` holds the stated rules for the data's known quirks;
* :mod:`~mlacalc.measured.moe_routing` gives the expected expert loads of MoE rows.
"""

from .mapping import (
    NOT_MODELLED,
    KernelPart,
    MappedTable,
    map_table,
    mapped_tables,
    observations,
)
from .sets import (
    SYSTEM_DEVICES,
    MeasuredSet,
    MeasuredTable,
    UnknownSystemError,
    load_measured,
    read_bench_set,
)

__all__ = [
    "NOT_MODELLED",
    "SYSTEM_DEVICES",
    "KernelPart",
    "MappedTable",
    "MeasuredSet",
    "MeasuredTable",
    "UnknownSystemError",
    "load_measured",
    "map_table",
    "mapped_tables",
    "observations",
    "read_bench_set",
]
