"""Predicted against measured, row by row.

Two kinds of measured data are checked:

* measured sets (GPU kernel tables in aiconfigurator's layout, or the microbenchmark's files)
  through :func:`validate_measured`: every row mapped onto its kernels
  (:mod:`mlacalc.measured`), predicted by the kernel time model with a calibration profile
  (the shipped one by default, never one fitted on the set it validates) or, labelled as such,
  by the plain roofline bound; per table and overall: rows, predicted, not predicted (by
  reason), median |error|, signed median error and p90 |error|;
* the microbenchmark's own files through :func:`validate` without ``measured``: the unfused
  roofline (the op sequence the microbenchmark runs) with the ceilings measured in the same
  run as calibration.

The error of a row is ``predicted / measured - 1``: negative means the prediction is too fast.
"""

from __future__ import annotations

import csv
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .config import load_model
from .errors import ConfigError, InvalidArgumentError, MlacalcError
from .hardware import _measurements_dir, hardware_from_measurements, measured_sets, read_sidecar
from .roofline import Calibration, predict_time

__all__ = [
    "MeasuredValidation",
    "TableValidation",
    "ValidationRow",
    "ValidationSet",
    "default_measurement_files",
    "validate",
    "validate_measured",
]

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
        }


@dataclass(frozen=True)
class ValidationSet:
    name: str
    device: str
    mode: str
    rows: tuple[ValidationRow, ...]
    skipped: int = 0
    groups: dict[str, dict[str, float]] = field(default_factory=dict)

    @property
    def median_abs_error(self) -> float:
        return statistics.median(abs(r.error) for r in self.rows)

    @property
    def worst_abs_error(self) -> float:
        return max(abs(r.error) for r in self.rows)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "device": self.device,
            "mode": self.mode,
            "rows_validated": len(self.rows),
            "rows_not_ok": self.skipped,
            "median_abs_error": self.median_abs_error,
            "worst_abs_error": self.worst_abs_error,
            "by_impl": self.groups,
            "rows": [r.to_dict() for r in self.rows],
        }


def default_measurement_files() -> list[Path]:
    return [_measurements_dir() / f"{name}.json" for name in measured_sets()]


def _group(rows: list[ValidationRow]) -> dict[str, dict[str, float]]:
    groups: dict[str, list[float]] = {}
    for r in rows:
        key = r.impl if r.variant == "mla" else r.variant
        groups.setdefault(key, []).append(abs(r.error))
    return {
        k: {"rows": len(v), "median_abs_error": statistics.median(v), "worst_abs_error": max(v)}
        for k, v in groups.items()
    }


def validate_file(json_path: str | Path, mode: str = "unfused") -> ValidationSet:
    path = Path(json_path)
    if path.suffix == ".csv":
        path = path.with_suffix(".json")
    meta = read_sidecar(path)
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
    hardware = hardware_from_measurements(path)
    calibration = Calibration.from_measurements(meta)
    rows, skipped = [], 0
    for r in raw:
        if r["status"] != "ok":
            skipped += 1
            continue
        model = load_model(r["model"])
        impl = None if r["impl"] == "standard" else r["impl"]
        p = predict_time(
            model,
            hardware,
            r["phase"],
            int(r["seq_len"]),
            int(r["batch"]),
            impl=impl,
            mode=mode,
            dtype=r["dtype"],
            calibration=calibration,
        )
        rows.append(
            ValidationRow(
                model=model.name,
                variant=model.variant,
                impl=r["impl"],
                phase=r["phase"],
                batch=int(r["batch"]),
                seq_len=int(r["seq_len"]),
                measured_s=float(r["median_s"]),
                predicted_s=p.seconds,
                bound=p.bound,
                flops=p.flops,
                bytes=p.bytes,
            )
        )
    if not rows:
        raise ConfigError("has no ok rows to validate", source=str(csv_path))
    return ValidationSet(
        name=path.stem,
        device=meta["device"]["name"],
        mode=mode,
        rows=tuple(rows),
        skipped=skipped,
        groups=_group(rows),
    )


def _validate_bench_files(files: list[str | Path] | None, mode: str) -> list[ValidationSet]:
    paths = [Path(f) for f in files] if files else default_measurement_files()
    if not paths:
        raise ConfigError(
            "no measurement files",
            source="mlacalc/measurements",
            fix="run mlacalc bench, or pass the files to validate",
        )
    return [validate_file(p, mode) for p in paths]


# ------------------------------------------------------------------ measured sets


#: What ``profile="roofline"`` predicts with: the plain roofline bound, uncalibrated.
ROOFLINE = "roofline"


def _stats(err: np.ndarray) -> dict[str, float | None]:
    if err.size == 0:
        return {"median_abs_error": None, "signed_median_error": None, "p90_abs_error": None}
    a = np.abs(err)
    return {
        "median_abs_error": float(np.median(a)),
        "signed_median_error": float(np.median(err)),
        "p90_abs_error": float(np.percentile(a, 90)),
    }


@dataclass
class TableValidation:
    """Predicted against measured for one table: per-row times and why rows are left out."""

    table: str
    system: str
    device: str
    framework: str
    version: str
    measured_s: np.ndarray
    predicted_s: np.ndarray  # NaN where not predicted
    reason: np.ndarray  # "" where predicted
    rules: list[str]
    calibration: str
    mapped: Any = field(default=None, repr=False)
    profile: str = ""  # the profile that predicted the table ("" for the plain roofline)

    @property
    def rows(self) -> int:
        return int(self.measured_s.shape[0])

    @property
    def predicted_mask(self) -> np.ndarray:
        return self.reason == ""

    @property
    def errors(self) -> np.ndarray:
        """``predicted / measured - 1`` of the predicted rows."""
        ok = self.predicted_mask
        return self.predicted_s[ok] / self.measured_s[ok] - 1.0

    def not_predicted_by_reason(self) -> dict[str, int]:
        names, counts = np.unique(self.reason[~self.predicted_mask].astype(str), return_counts=True)
        return {str(n): int(c) for n, c in zip(names, counts)}

    def summary(self) -> dict[str, Any]:
        ok = int(self.predicted_mask.sum())
        return {
            "table": self.table,
            "system": self.system,
            "framework": self.framework,
            "version": self.version,
            "rows": self.rows,
            "predicted": ok,
            "not_predicted": self.rows - ok,
            **_stats(self.errors),
            "device": self.device,
            "calibration": self.calibration,
            "profile": self.profile,
            "not_predicted_by_reason": self.not_predicted_by_reason(),
            "rules": list(self.rules),
        }

    def row_records(self) -> list[dict[str, Any]]:
        """One dict per row: the table's own columns, measured and predicted seconds, error."""
        cols = self.mapped.table.columns if self.mapped is not None else {}
        skip = ("framework", "version", "device", "kernel_source", "latency")
        names = [
            "table",
            "system",
            "row",
            *(c for c in cols if c not in skip),
            "measured_s",
            "predicted_s",
            "error",
            "not_predicted",
        ]
        ok = self.predicted_mask
        finite = np.isfinite(self.predicted_s)
        with np.errstate(invalid="ignore", divide="ignore"):
            err = self.predicted_s / self.measured_s - 1.0
        columns = [
            [self.table] * self.rows,
            [self.system] * self.rows,
            list(range(self.rows)),
            *(cols[c].tolist() for c in cols if c not in skip),
            self.measured_s.tolist(),
            np.where(finite, self.predicted_s, np.nan).astype(object).tolist(),
            err.astype(object).tolist(),
            self.reason.astype(str).tolist(),
        ]
        pred_i, err_i, why_i = len(names) - 3, len(names) - 2, len(names) - 1
        columns[pred_i] = [v if f else None for v, f in zip(columns[pred_i], finite.tolist())]
        columns[err_i] = [v if o else None for v, o in zip(columns[err_i], ok.tolist())]
        columns[why_i] = [w or None for w in columns[why_i]]
        return [dict(zip(names, values)) for values in zip(*columns)]


@dataclass
class MeasuredValidation:
    """Predicted against measured for a whole measured set, per table and overall."""

    tables: list[TableValidation]
    profile: str
    paths: tuple[str, ...]

    @property
    def overall(self) -> dict[str, Any]:
        rows = sum(t.rows for t in self.tables)
        err = np.concatenate([t.errors for t in self.tables]) if self.tables else np.zeros(0)
        return {
            "rows": rows,
            "predicted": int(err.size),
            "not_predicted": rows - int(err.size),
            **_stats(err),
        }

    def to_dict(self, rows: bool = False) -> dict[str, Any]:
        """The JSON of ``mlacalc validate --measured`` (errors as fractions); with ``rows``,
        every row as well."""
        doc: dict[str, Any] = {
            "overall": self.overall,
            "tables": [t.summary() for t in self.tables],
            "profile": self.profile,
        }
        if rows:
            doc["rows"] = [r for t in self.tables for r in t.row_records()]
        return doc


def _fitted_tables(prof: Any) -> set[tuple[str, str]]:
    """(device, table) pairs a profile was fitted on, from its recorded provenance."""
    return {
        (str(e.get("device")), str(tab))
        for e in getattr(prof, "fitted_on", ())
        if isinstance(e, dict)
        for tab in (e.get("tables") or {})
    }


def _profiles_not_fitted_on(devices: set[str]) -> list[str]:
    """Shipped profiles fitted on none of ``devices`` (sorted by name)."""
    from .timemodel import load_profile, shipped_profiles

    out = []
    for name in shipped_profiles():
        try:
            on = {d for d, _ in _fitted_tables(load_profile(name))}
        except MlacalcError:
            continue
        if on and not on & devices:
            out.append(name)
    return out


def _clash(prof: Any, tables: list[Any]) -> list[str]:
    fitted = _fitted_tables(prof)
    return sorted({f"{t.device}/{t.table}" for t in tables if (t.device, t.table) in fitted})


def _check_not_fitted_on(prof: Any, tables: list[Any]) -> None:
    """Refuse a profile fitted on any of the tables it would validate."""
    clash = _clash(prof, tables)
    if clash:
        devices = {t.device for t in tables}
        others = _profiles_not_fitted_on(devices)
        hint = (
            f"use a profile not fitted on {', '.join(sorted(devices))}"
            + (f" (shipped: {', '.join(others)})" if others else "")
            + ", e.g. mlacalc calibrate OTHER_SET -o p.json, then --profile p.json"
        )
        raise InvalidArgumentError(
            "profile",
            f"profile '{prof.name}' was fitted on {', '.join(clash[:4])}"
            f"{' ...' if len(clash) > 4 else ''}; validating on the data a "
            f"profile was fitted on proves nothing: {hint}",
        )


def _choose_profile(profile: Any, tables: list[Any]) -> tuple[Any, str]:
    """The profile that predicts ``tables``, and its label. With no profile given, the shipped
    default, or, when that was fitted on these tables, the shipped profile fitted on none of
    their devices (leave-one-device-out); an explicit profile fitted on them is refused."""
    from .timemodel import load_profile

    prof = load_profile(profile)
    if profile is None and _clash(prof, tables):
        devices = {t.device for t in tables}
        others = _profiles_not_fitted_on(devices)
        if others:
            alt = load_profile(others[0])
            on = sorted({d for d, _ in _fitted_tables(alt)})
            return alt, (
                f"{alt.name} (the default profile was fitted on "
                f"{', '.join(sorted(devices))}; this one on {', '.join(on)} only)"
            )
    _check_not_fitted_on(prof, tables)
    return prof, prof.name


def _predict_mapped(mapped: Any, hw: Any, prof: Any) -> tuple[np.ndarray, str]:
    """Per-row predicted seconds of a mapped table (NaN where a kernel cannot be predicted)."""
    from .timemodel import batch_terms, roofline_seconds
    from .timemodel.model import COMM_KINDS

    n = len(mapped.table)
    total = np.zeros(n)
    how: set[str] = set()
    for part in mapped.parts:
        b = part.batch
        try:
            if prof is None:
                if b.kind in COMM_KINDS:
                    raise InvalidArgumentError("kind", "the plain roofline has no link term")
                t = roofline_seconds(b.flops, b.bytes, hw, b.dtype) * b.calls
                how.add("plain roofline bound (datasheet peak and bandwidth; uncalibrated)")
            else:
                terms, text = batch_terms(b, hw, prof)
                t = terms["seconds"]
                how.add(text)
        except MlacalcError:
            t = np.full(len(b), np.nan)
        total += np.bincount(part.rows, weights=np.asarray(t, dtype=np.float64), minlength=n)
    return total, "; ".join(sorted(how))


def _validate_bench_table(table: Any) -> TableValidation:
    """A microbenchmark table: every ok row predicted by the unfused op model with the
    set's measured ceilings (as :func:`validate` without ``measured``)."""
    vs = validate_file(table.meta["sidecar"], "unfused")
    pred = np.full(len(table), np.nan)
    ok = np.nonzero(table.columns["status"] == "ok")[0]
    for i, r in zip(ok, vs.rows):
        pred[i] = r.predicted_s
    reason = np.where(table.columns["status"] == "ok", "", "status").astype(object)
    return TableValidation(
        table.table,
        table.system,
        table.device,
        table.framework,
        table.version,
        table.seconds,
        pred,
        reason,
        [],
        "unfused roofline with the set's measured ceilings",
    )


def validate_measured(measured: Any, profile: Any = None) -> MeasuredValidation:
    """Predict every row of a measured set and compare with the measured time.

    ``measured`` is a path (or paths) as :func:`mlacalc.measured.load_measured` reads them, or a
    loaded :class:`~mlacalc.measured.MeasuredSet`. ``profile`` is a calibration profile (name,
    path or object) or ``"roofline"`` for the plain roofline bound. ``None`` is the shipped
    default, or, for a device whose tables that was fitted on, a shipped profile fitted on
    none of that device's data (leave-one-device-out); an explicit profile fitted on any
    table of the set is refused. Rows the
    product cannot model or that a quirk rule excludes are counted as not predicted, by reason.
    """
    from .hardware import load_hardware
    from .measured import MeasuredSet, load_measured, map_table

    mset = measured if isinstance(measured, MeasuredSet) else load_measured(measured)
    gpu_tables = [t for t in mset.tables if t.table != "bench"]
    label = "plain roofline bound (uncalibrated)"
    by_device: dict[str, Any] = {}
    if gpu_tables and not (isinstance(profile, str) and profile == ROOFLINE):
        if profile is None:  # each device by a profile not fitted on it
            labels = []
            for device in sorted({t.device for t in gpu_tables}):
                mine = [t for t in gpu_tables if t.device == device]
                by_device[device], text = _choose_profile(None, mine)
                labels.append(text)
            label = (
                labels[0]
                if len(set(labels)) == 1
                else "; ".join(f"{d}: {lab}" for d, lab in zip(sorted(by_device), labels))
            )
        else:
            prof, label = _choose_profile(profile, gpu_tables)
            by_device = {t.device: prof for t in gpu_tables}
    out = []
    for t in mset.tables:
        if t.table == "bench":
            out.append(_validate_bench_table(t))
            continue
        mapped = map_table(t)
        pred, how = _predict_mapped(mapped, load_hardware(t.device), by_device.get(t.device))
        reason = mapped.reason.copy()
        bad = (reason == "") & ~(np.isfinite(pred) & (pred > 0))
        reason[bad] = "no_time_model"
        pred = np.where(reason == "", pred, np.where(np.isfinite(pred), pred, np.nan))
        out.append(
            TableValidation(
                t.table,
                t.system,
                t.device,
                t.framework,
                t.version,
                t.seconds,
                pred,
                reason,
                list(mapped.rules),
                how,
                mapped,
                getattr(by_device.get(t.device), "name", ""),
            )
        )
    return MeasuredValidation(out, label, mset.paths)


def validate(
    files: list[str | Path] | None = None,
    mode: str = "unfused",
    *,
    measured: Any = None,
    profile: Any = None,
) -> list[ValidationSet] | MeasuredValidation:
    """Predicted against measured.

    With ``measured`` (an aiconfigurator system folder, a folder below it, a parquet file, a
    microbenchmark ``.json``, or a list of them): every row predicted by the kernel time model
    with ``profile`` (the shipped one by default, never one fitted on the set; ``"roofline"`` for
    the plain bound), as a :class:`MeasuredValidation`. Without it: the microbenchmark files
    ``files`` (``.json`` sidecars or their ``.csv``; every committed set when None), each row
    predicted by the ``mode`` roofline with the set's measured ceilings, as ValidationSets.
    """
    if measured is not None:
        if files:
            raise InvalidArgumentError("files", "give either files or measured=, not both")
        return validate_measured(measured, profile)
    if profile is not None:
        raise InvalidArgumentError(
            "profile", "a profile applies to measured= sets; pass measured=PATH"
        )
    return _validate_bench_files(files, mode)
