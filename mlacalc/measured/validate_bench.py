"""The microbenchmark's own files, predicted against measured row by row.

Each row of a microbenchmark file (``.json`` sidecar or its ``.csv``) is predicted by the
``mode`` roofline (the unfused op sequence the microbenchmark runs, by default) with the
ceilings measured in the same run as calibration, and the trivial-op latency measured just
before the row where the set has that column (the host's speed drifts over a run); rows are
grouped by implementation or variant. The error of a row is ``predicted / measured - 1``:
negative means too fast.
"""

from __future__ import annotations

import csv
import math
import os
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mlacalc.data import MEASUREMENTS
from mlacalc.hardware.catalogue import (
    hardware_from_measurements,
    measured_sets,
    read_sidecar,
)
from mlacalc.measured.observations import rows_short_warning, time_unit_problem
from mlacalc.measured.tables import bench_time_text
from mlacalc.models.loading import load_model
from mlacalc.timemodel.predict import Calibration, predict_time
from mlacalc.words.arguments import one_or_many
from mlacalc.words.errors import ConfigError, InvalidArgumentError

__all__ = [
    "ValidationRow",
    "ValidationSet",
    "bench_prediction",
    "default_measurement_files",
    "validate_bench_files",
    "validate_file",
]

#: A row whose interquartile range over its repeats exceeds this share of its median is noisy:
#: left out of a set's median and worst error (the measurement, not the model, is in doubt).
#: The committed sets' rows stay under it but one (H200: 0.52; CPU: up to 0.16); a run on a
#: loaded 2-core box had 14 of 21 above it, up to 4.5 (trial of 2026-11-29).
NOISY_SPREAD = 0.5


def bench_prediction(mode: str = "unfused") -> str:
    """What predicts a microbenchmark run's rows (:func:`validate_file`), in the words both
    ``mlacalc validate FILE`` and ``validate --measured FILE`` print: ``predict_time`` in
    ``mode`` (unfused: the op sequence the eager layers run) with the run's own measured
    ceilings (its GEMM, copy and softmax rates, not the datasheet's) and each row's trivial-op
    launch latency; neither the plain datasheet roofline nor a calibration profile."""
    if mode == "unfused":  # the eager model: each op's roofline, first touch, dispatch
        return (
            "the eager model (the op sequence the layer runs) on the run's measured ceilings "
            "and launch latency"
        )
    return f"the {mode} kernels' roofline on the run's measured ceilings and launch latency"


_REQUIRED_COLUMNS = ("model", "impl", "phase", "batch", "seq_len", "dtype", "status", "median_s")


@dataclass(frozen=True)
class ValidationRow:
    model: str
    variant: str
    impl: str
    phase: str
    batch: int
    seq_len: int
    measured_s: float
    predicted_s: float
    bound: str
    flops: int = 0
    bytes: int = 0
    #: the interquartile range of the repeats over the median (NaN where the run has none)
    spread: float = math.nan

    @property
    def noisy(self) -> bool:
        """Whether the repeats spread over more than :data:`NOISY_SPREAD` of the median."""
        return self.spread > NOISY_SPREAD

    @property
    def error(self) -> float:
        """(predicted - measured) / measured: negative means the roofline is optimistic."""
        return (self.predicted_s - self.measured_s) / self.measured_s

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "variant": self.variant,
            "impl": self.impl,
            "phase": self.phase,
            "batch": self.batch,
            "seq_len": self.seq_len,
            "measured_s": self.measured_s,
            "predicted_s": self.predicted_s,
            "error": self.error,
            "bound": self.bound,
            "flops": self.flops,
            "bytes": self.bytes,
            "spread": self.spread,
            "noisy": self.noisy,
        }


@dataclass(frozen=True)
class ValidationSet:
    name: str
    device: str
    mode: str
    rows: tuple[ValidationRow, ...]
    skipped: int = 0
    groups: dict[str, dict[str, float]] = field(default_factory=dict)
    #: ok rows whose time cannot be scored (NaN, infinite, zero or negative), by reason
    excluded: dict[str, int] = field(default_factory=dict)
    #: what the set's files say beyond its rows (a rows file shorter than its sidecar counts)
    warnings: tuple[str, ...] = ()
    #: the rows file's lines of the excluded rows, by reason
    excluded_lines: dict[str, tuple[int, ...]] = field(default_factory=dict)

    @property
    def noisy(self) -> tuple[ValidationRow, ...]:
        """The rows whose repeats spread over :data:`NOISY_SPREAD` of their median."""
        return tuple(r for r in self.rows if r.noisy)

    @property
    def scored(self) -> tuple[ValidationRow, ...]:
        """The rows the median and worst error are taken over: the quiet ones (every row
        where all are noisy)."""
        return tuple(r for r in self.rows if not r.noisy) or self.rows

    @property
    def median_abs_error(self) -> float:
        return statistics.median(abs(r.error) for r in self.scored)

    @property
    def worst_abs_error(self) -> float:
        return max(abs(r.error) for r in self.scored)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "device": self.device,
            "mode": self.mode,
            "rows_validated": len(self.rows),
            "rows_not_ok": self.skipped,
            "rows_excluded": dict(self.excluded),
            "rows_excluded_lines": {k: list(v) for k, v in self.excluded_lines.items()},
            "warnings": list(self.warnings),
            "rows_noisy": len(self.noisy),
            "noisy_spread": NOISY_SPREAD,
            "median_abs_error": self.median_abs_error,
            "worst_abs_error": self.worst_abs_error,
            "by_impl": self.groups,
            "rows": [r.to_dict() for r in self.rows],
        }


def default_measurement_files() -> list[Path]:
    return [MEASUREMENTS / f"{name}.json" for name in measured_sets()]


def _group(rows: list[ValidationRow]) -> dict[str, dict[str, float]]:
    groups: dict[str, list[float]] = {}
    for r in [r for r in rows if not r.noisy] or rows:
        key = r.impl if r.variant == "mla" else r.variant
        groups.setdefault(key, []).append(abs(r.error))
    return {
        k: {"rows": len(v), "median_abs_error": statistics.median(v), "worst_abs_error": max(v)}
        for k, v in groups.items()
    }


def validate_file(json_path: str | Path, mode: str = "unfused") -> ValidationSet:
    given = Path(json_path)
    if not given.exists():  # the path as the caller wrote it, not its sidecar's name
        raise ConfigError(
            "no such file",
            source=str(given),
            fix="pass a microbenchmark .json (or its .csv) that mlacalc bench wrote",
        )
    path = given
    if path.suffix == ".csv":
        path = path.with_suffix(".json")
        if not path.is_file():
            raise ConfigError(
                f"has no {path.name} sidecar beside it",
                source=str(given),
                fix="keep the .json that mlacalc bench wrote next to its .csv",
            )
    meta = read_sidecar(path)
    if meta.get("preset") == "calibrate":
        raise ConfigError(
            "is a kernel set (mlacalc bench --preset calibrate), not a run of attention "
            "layers (which validate FILE checks against the roofline)",
            source=str(given),
            field="preset",
            fix="predict its kernels with mlacalc validate --measured FILE (validate(measured=)), "
            "or fit on it with mlacalc calibrate",
        )
    csv_path = path.parent / meta["rows_file"]
    try:
        with open(csv_path, newline="", encoding="utf-8") as fh:
            reader = csv.DictReader(fh)
            missing = [c for c in _REQUIRED_COLUMNS if c not in (reader.fieldnames or [])]
            if missing:
                raise ConfigError(
                    "is not an mlacalc.bench/1 rows file",
                    source=str(csv_path),
                    field=missing[0],
                    fix="pass files written by mlacalc bench",
                )
            raw = list(reader)
    except OSError as exc:
        raise ConfigError(f"cannot be read ({exc.strerror or exc})", source=str(csv_path)) from None
    except (UnicodeDecodeError, csv.Error) as exc:
        raise ConfigError(
            f"is not a CSV text file ({str(exc)[:80]})",
            source=str(csv_path),
            fix="pass files written by mlacalc bench",
        ) from None
    hardware = hardware_from_measurements(path)
    calibration = Calibration.from_measurements(meta)
    rows, skipped = [], 0
    excluded: dict[str, int] = {}
    lines: dict[str, list[int]] = {}
    for i, r in enumerate(raw, start=2):  # line 1 is the header
        if r["status"] != "ok":
            skipped += 1
            continue
        sizes, reason = _row_sizes(r, csv_path, i)
        if reason:  # a time that cannot be scored: counted with its line, never scored
            excluded[reason] = excluded.get(reason, 0) + 1
            lines.setdefault(reason, []).append(i)
            continue
        batch, seq_len, measured = sizes
        latency = _row_latency(r, csv_path, i)
        model = load_model(r["model"])
        impl = None if r["impl"] == "standard" else r["impl"]
        p = predict_time(
            model,
            hardware,
            r["phase"],
            seq_len,
            batch,
            impl=impl,
            mode=mode,
            dtype=r["dtype"],
            # the reference layers hold their weights in the run's dtype, whatever the
            # checkpoint stores (a model with an fp8 quantization_config is run in bf16)
            weight_dtype=r["dtype"],
            calibration=calibration,
            launch_latency_s=latency,
        )
        rows.append(
            ValidationRow(
                model=model.name,
                variant=model.variant,
                impl=r["impl"],
                phase=r["phase"],
                batch=batch,
                seq_len=seq_len,
                measured_s=measured,
                predicted_s=p.seconds,
                bound=p.bound,
                flops=p.flops,
                bytes=p.bytes,
                spread=_row_spread(r, measured),
            )
        )
    if not rows:
        why = "; ".join(f"{n} {reason}" for reason, n in sorted(excluded.items()))
        raise ConfigError(
            "has no ok rows to validate" + (f" (excluded: {why})" if why else ""),
            source=str(csv_path),
        )
    unit = time_unit_problem(
        [r.measured_s for r in rows], [r.predicted_s for r in rows], "its prediction"
    )
    if unit:
        raise ConfigError(
            unit,
            source=str(csv_path),
            field="median_s",
            fix="write median_s in seconds, as mlacalc bench does",
        )
    ok = sum(1 for r in raw if r["status"] == "ok")
    short = rows_short_warning(meta, csv_path, ok, "validated on")
    busy = busy_host_warning(rows, meta, csv_path)
    return ValidationSet(
        name=path.stem,
        device=str(meta["device"].get("name", path.stem)),
        mode=mode,
        rows=tuple(rows),
        skipped=skipped,
        groups=_group(rows),
        excluded=excluded,
        warnings=tuple(w for w in (short, busy) if w),
        excluded_lines={k: tuple(v) for k, v in lines.items()},
    )


#: A run whose rows took this many times what the eager model predicts on the run's own
#: ceilings, at the median, was timed on a busy host (:func:`busy_host_warning`): the
#: committed sets sit at 0.97x-1.1x (CPU 2.8% fast, the H200 sets within 7%); a 2-core host
#: shared with other sessions, its default threads, 3.5x (median error -71%).
BUSY_FACTOR = 2.0


def busy_host_warning(rows: list[ValidationRow], meta: dict[str, Any], csv_path: Path) -> str:
    """Words for a run whose rows ran over :data:`BUSY_FACTOR` times slower than its own
    ceilings predict, at the median: the host was busy while it ran (its threads shared), or
    its ceilings were measured at another load; ``""`` otherwise."""
    ratios = [r.measured_s / r.predicted_s for r in rows if r.predicted_s > 0]
    if len(ratios) < 3:
        return ""
    slow = statistics.median(ratios)
    if slow <= BUSY_FACTOR:
        return ""
    threads = (meta.get("device") or {}).get("threads")
    ran = f" with {threads} thread(s)" if threads else ""
    return (
        f"{csv_path}: its rows ran {slow:.1f}x slower than its own measured ceilings predict "
        f"(median): the host was busy while the run{ran} timed them (other work on its cores), "
        "or its ceilings were measured at another load; these rows do not measure the device: "
        "run mlacalc bench again on an idle machine, or with fewer threads (--threads 1)"
    )


def _row_spread(r: dict[str, Any], measured: float) -> float:
    """The row's ``iqr_s`` over its median time; NaN where the run wrote none or a bad one."""
    try:
        iqr = float(r.get("iqr_s") or "nan")
    except ValueError:
        return math.nan
    return iqr / measured if math.isfinite(iqr) and iqr >= 0 else math.nan


def _row_latency(r: dict[str, Any], csv_path: Path, line: int) -> float | None:
    """The trivial-op latency measured just before a row's point (the host's speed then), or
    None where the set predates that column or left it empty (the sidecar's ceiling is used)."""
    raw = str(r.get("launch_latency_s") or "").strip()
    if not raw:
        return None
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise ConfigError(
            f"line {line}: must be a positive number of seconds, got {raw[:20]!r}",
            source=str(csv_path),
            field="launch_latency_s",
            fix="pass files written by mlacalc bench (or leave the cell empty)",
        )
    return value


def _row_sizes(r: dict[str, Any], csv_path: Path, line: int) -> tuple[tuple[int, int, float], str]:
    """(batch, seq_len, measured seconds) of an ok row, or why its time cannot be scored; a
    size that is not a positive whole number is an error naming the line and column."""
    sizes = []
    for name in ("batch", "seq_len"):
        try:
            value = int(str(r[name]))
        except ValueError:
            value = 0
        if value <= 0:
            raise ConfigError(
                f"line {line}: must be a positive whole number, got {str(r[name])[:20]!r}",
                source=str(csv_path),
                field=name,
                fix="pass files written by mlacalc bench",
            )
        sizes.append(value)
    bench_time_text(r, csv_path, line)  # text: one line naming it, as calibrate says it
    try:
        measured = float(str(r["median_s"]))
    except ValueError:
        return (0, 0, 0.0), "time not a number"
    if not math.isfinite(measured):
        return (0, 0, 0.0), "time not finite (NaN or infinite)"
    if measured <= 0:
        return (0, 0, 0.0), "time zero or negative"
    return (sizes[0], sizes[1], measured), ""


def validate_bench_files(files: list[str | Path] | None, mode: str) -> list[ValidationSet]:
    """Validate microbenchmark files (one path is a list of one; None: every committed set)."""
    if files is not None and not (isinstance(files, (list, tuple)) and not files):
        # one path (a str or os.PathLike) is a list of one, not its characters
        files = list(one_or_many("files", files, what="measurement files"))
        for i, f in enumerate(files):
            if not isinstance(f, (str, os.PathLike)):
                raise InvalidArgumentError(
                    f"files[{i}]", f"must be a path to a .json or .csv, got {type(f).__name__}"
                )
            if not os.fspath(f).strip():  # Path('') is the working directory
                raise InvalidArgumentError(
                    f"files[{i}]", f"must be a path to a .json or .csv, got {os.fspath(f)!r}"
                )
    paths = [Path(f) for f in files] if files else default_measurement_files()
    if not paths:
        raise ConfigError(
            "no measurement files",
            source="mlacalc/data/measurements",
            fix="run mlacalc bench, or pass the files to validate",
        )
    return [validate_file(p, mode) for p in paths]
