"""Predicted against measured, row by row: :func:`validate` (``mlacalc.validate``).

Two kinds of measured data are checked:

* measured sets (GPU kernel tables in aiconfigurator's layout, or the microbenchmark's files)
  with ``measured=``: every row mapped onto its kernels (:mod:`mlacalc.measured.mapping`),
  predicted by the kernel time model with a calibration profile (the shipped one by default,
  never one fitted on the set it validates) or, labelled as such, by the plain roofline bound;
  per table and overall: rows, predicted, not predicted (by reason), median |error|, signed
  median error and p90 |error| (:mod:`mlacalc.measured.validate_tables`);
* the microbenchmark's own files without ``measured``: the unfused roofline (the op sequence
  the microbenchmark runs) with the ceilings measured in the same run as calibration
  (:mod:`mlacalc.measured.validate_bench`).

The error of a row is ``predicted / measured - 1``: negative means the prediction is too fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mlacalc.measured.validate_bench import (
    ValidationRow,
    ValidationSet,
    default_measurement_files,
    validate_bench_files,
    validate_file,
)
from mlacalc.measured.validate_tables import validate_measured
from mlacalc.words.errors import InvalidArgumentError

__all__ = [
    "ValidationRow",
    "ValidationSet",
    "default_measurement_files",
    "validate",
    "validate_file",
    "validate_measured",
]


def validate(
    files: list[str | Path] | None = None,
    mode: str = "unfused",
    *,
    measured: Any = None,
    profile: Any = None,
    engine: str | None = None,
) -> Any:
    """Predicted against measured.

    With ``measured`` (an aiconfigurator system folder, a folder below it, a parquet file, a
    microbenchmark ``.json``, or a list of them): every row predicted by the kernel time model
    with ``profile`` (the shipped one by default, never one fitted on the set; ``"roofline"`` for
    the plain bound), as a :class:`~mlacalc.measured.validate_tables.MeasuredValidation`.
    Without it: the microbenchmark files ``files`` (``.json`` sidecars or their ``.csv``; every
    committed set when None), each row predicted by the ``mode`` roofline with the set's
    measured ceilings, as ValidationSets. ``engine`` (``trtllm`` by default, ``sglang``,
    ``vllm``): whose measured tables a folder gives and whose profiles predict them.
    """
    if measured is not None:
        if files:
            raise InvalidArgumentError("files", "give either files or measured=, not both")
        return validate_measured(measured, profile, engine=engine)
    if engine is not None:
        raise InvalidArgumentError(
            "engine", "an engine applies to measured= sets (GPU kernel tables); pass measured=PATH"
        )
    if profile is not None:
        raise InvalidArgumentError(
            "profile", "a profile applies to measured= sets; pass measured=PATH"
        )
    return validate_bench_files(files, mode)
