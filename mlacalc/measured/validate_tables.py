"""Validation of measured sets: every row predicted and compared, per table and overall.

Used by :func:`mlacalc.validate` with ``measured=``; see :mod:`mlacalc.measured.validate` and
docs/measured-sets.md.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

from mlacalc.hardware.catalogue import MEASURED_SYSTEMS, load_hardware
from mlacalc.measured.mapped import distinct_kernels, reason_values
from mlacalc.measured.mapping import NO_KERNEL, map_table, not_predicted
from mlacalc.measured.observations import (
    KIND_SHAPE_COLUMNS,
    kernel_set_warnings,
    read_kernel_set,
)
from mlacalc.measured.tables import (
    MeasuredSet,
    bench_sidecar,
    engine_of_named_tables,
    holds_tables_of,
    load_measured,
    observations_digest,
    table_digest,
)
from mlacalc.measured.validate_bench import bench_prediction, validate_file
from mlacalc.timemodel.engine_profiles import left_out_base, left_out_composed, profile_for
from mlacalc.timemodel.kernel_time import batch_terms, roofline_seconds
from mlacalc.timemodel.profile import (
    check_profile_applies,
    load_profile,
    other_cpu_warning,
    shipped_profiles,
)
from mlacalc.words.engines import DEFAULT_ENGINE, SHARED, check_engine
from mlacalc.words.errors import ConfigError, InvalidArgumentError, MlacalcError
from mlacalc.words.kernels import COMM_KINDS
from mlacalc.words.vocab import VALIDATE_SCHEMA, stamped

__all__ = [
    "DTYPE_SPLIT_TABLES",
    "ROOFLINE",
    "TIME_REASONS",
    "MeasuredValidation",
    "TableValidation",
    "engine_profile",
    "row_kinds",
    "stand_in_note",
    "time_reasons",
    "validate_measured",
]

#: Tables whose rows are split by their main kernel's dtype into table kinds
#: (``gemm_perf:nvfp4``): one table of them times kernels of several dtypes whose errors differ
#: (TensorRT-LLM's B200 gemm_perf: nvfp4 at m <= 64 at -46% under a pooled 14% median)
DTYPE_SPLIT_TABLES = (
    "gemm_perf",
    "mla_bmm_perf",
    "generation_mla_perf",
    "context_attention_perf",
    "generation_attention_perf",
    "moe_perf",
)


def row_kinds(mapped: Any) -> np.ndarray:
    """The table kind of each row of a mapped table: the table's name, with the dtype of the
    row's main kernel (not a quantize or element-wise one) for :data:`DTYPE_SPLIT_TABLES`."""
    label = np.full(len(mapped.table), mapped.table.table, dtype=object)
    if mapped.table.table in DTYPE_SPLIT_TABLES:
        for p in mapped.parts:
            if p.batch.kind not in ("quantize", "elementwise"):
                label[p.rows] = f"{mapped.table.table}:{p.batch.dtype}"
    return label


def stand_in_note(prof: Any, engine: str, why: str = "") -> str:
    """What a label adds when a profile of another engine predicts ``engine``'s kernels:
    ``why`` no profile of ``engine`` does (by default: none ships)."""
    theirs = getattr(prof, "engine", DEFAULT_ENGINE)
    if theirs == engine:
        return ""
    return f" [{theirs} kernels stand in for {engine}: {why or f'no {engine} profile ships'}]"


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
    reason: np.ndarray  # "" where predicted (NO_KERNEL: predicted exactly, 0 s)
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
        """``predicted / measured - 1`` of the predicted rows (not of the rows predicted as no
        kernel, 0 s as measured: 0 / 0 has no relative error)."""
        ok = self.predicted_mask
        return self.predicted_s[ok] / self.measured_s[ok] - 1.0

    @property
    def predicted_zero(self) -> int:
        """Rows predicted exactly as no kernel (0 s, as measured): counted as predicted."""
        return int((self.reason == NO_KERNEL).sum())

    def kinds(self) -> np.ndarray:
        """Each row's table kind (:func:`row_kinds`; the table's name where no kernels were
        mapped: a microbenchmark table, a kernel set)."""
        if getattr(self.mapped, "parts", None) is None:
            return np.full(self.rows, self.table, dtype=object)
        return row_kinds(self.mapped)

    def not_predicted_by_reason(self) -> dict[str, int]:
        left = not_predicted(self.reason)
        names, counts = np.unique(self.reason[left].astype(str), return_counts=True)
        return {str(n): int(c) for n, c in zip(names, counts)}

    def summary(self) -> dict[str, Any]:
        ok = self.rows - int(not_predicted(self.reason).sum())
        return {
            "table": self.table,
            "system": self.system,
            "framework": self.framework,
            "version": self.version,
            "rows": self.rows,
            "predicted": ok,
            "not_predicted": self.rows - ok,
            "predicted_zero": self.predicted_zero,
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
        columns[why_i] = [None if w in ("", NO_KERNEL) else w for w in columns[why_i]]
        return [dict(zip(names, values)) for values in zip(*columns)]


@dataclass
class MeasuredValidation:
    """Predicted against measured for a whole measured set, per table and overall."""

    tables: list[TableValidation]
    profile: str
    paths: tuple[str, ...]
    engine: str = DEFAULT_ENGINE
    #: device -> the profile ``mlacalc plan`` predicts the engine's kernels on it with, where
    #: another than the one that predicted the tables here
    plan_profiles: dict[str, str] = field(default_factory=dict)
    #: what predicted the tables against what plan uses, and how to validate the latter
    profile_note: str = ""
    #: what the command line says as warnings: a kernel set's ceilings its own GEMM rows beat
    #: (:func:`~mlacalc.measured.observations.kernel_set_warnings`)
    warnings: list[str] = field(default_factory=list)
    #: device -> the digest of the profile that predicted its tables (``Profile.digest``);
    #: empty for the plain roofline bound
    profile_digests: dict[str, str] = field(default_factory=dict)

    @property
    def by_kind(self) -> list[dict[str, Any]]:
        """The errors by device and table kind (:func:`row_kinds`: gemm_perf split by dtype,
        as ``benchmarks/bench_timemodel.py`` scores them), each kind's rows of every table
        pooled: a kind far off is visible under a pooled median that hides it."""
        groups: dict[tuple[str, str], list[Any]] = {}
        for t in self.tables:
            kinds = t.kinds()
            for kind in sorted(set(kinds.tolist())):
                groups.setdefault((t.device, kind), []).append((t, kinds == kind))
        out = []
        for (device, kind), parts in sorted(groups.items()):
            rows = sum(int(sel.sum()) for _, sel in parts)
            ok = [(t, sel & t.predicted_mask) for t, sel in parts]
            err = np.concatenate([t.predicted_s[m] / t.measured_s[m] - 1.0 for t, m in ok])
            zero = sum(int((sel & (t.reason == NO_KERNEL)).sum()) for t, sel in parts)
            out.append(
                {
                    "device": device,
                    "kind": kind,
                    "rows": rows,
                    "predicted": int(err.size) + zero,
                    "not_predicted": rows - int(err.size) - zero,
                    **_stats(err),
                }
            )
        return out

    @property
    def overall(self) -> dict[str, Any]:
        rows = sum(t.rows for t in self.tables)
        err = np.concatenate([t.errors for t in self.tables]) if self.tables else np.zeros(0)
        zero = sum(t.predicted_zero for t in self.tables)
        return {
            "rows": rows,
            "predicted": int(err.size) + zero,
            "not_predicted": rows - int(err.size) - zero,
            **_stats(err),
        }

    def to_dict(self, rows: bool = False) -> dict[str, Any]:
        """The JSON of ``mlacalc validate --measured`` (errors as fractions); with ``rows``,
        every row as well."""
        doc: dict[str, Any] = {
            "schema": VALIDATE_SCHEMA,
            "overall": self.overall,
            "tables": [t.summary() for t in self.tables],
            "by_kind": self.by_kind,
            "profile": self.profile,
            "engine": self.engine,
            "plan_profiles": dict(self.plan_profiles),
            "profile_note": self.profile_note,
            "warnings": list(self.warnings),
            "profile_digests": dict(self.profile_digests),
        }
        if rows:
            doc["rows"] = [r for t in self.tables for r in t.row_records()]
        return stamped(doc)


def _fitted_tables(prof: Any) -> set[tuple[str, str]]:
    """(device, table) pairs a profile was fitted on, from its recorded provenance."""
    return {
        (str(e.get("device")), str(tab))
        for e in getattr(prof, "fitted_on", ())
        if isinstance(e, dict)
        for tab in (e.get("tables") or {})
    }


def _shipped_of(engine: str) -> list[Any]:
    """The shipped profiles of ``engine`` that load (sorted by name)."""
    out = []
    for name in shipped_profiles():
        try:
            prof = load_profile(name)
        except MlacalcError:
            continue
        if prof.engine == engine:
            out.append(prof)
    return out


def _profiles_not_fitted_on(devices: set[str], engine: str = DEFAULT_ENGINE) -> list[str]:
    """Shipped profiles of ``engine`` fitted on none of ``devices`` (sorted by name)."""
    out = []
    for prof in _shipped_of(engine):
        on = {d for d, _ in _fitted_tables(prof)}
        if on and not on & devices:
            out.append(prof.name)
    return out


def engine_profile(engine: str) -> str:
    """The shipped profile a prediction for ``engine`` uses by default: ``default`` for
    TensorRT-LLM, ``default-<engine>`` for another engine where one ships, else ``default``
    (another engine's kernels standing in, which every output then says)."""
    if engine == DEFAULT_ENGINE or f"default-{engine}" not in shipped_profiles():
        return "default"
    return f"default-{engine}"


def _fitted_namesakes(prof: Any, tables: list[Any]) -> list[Any]:
    """The tables of ``tables`` of a device and name the profile was fitted on, of the
    profile's engine or shared by every engine (another engine's table of the same name timed
    other kernels)."""
    fitted = _fitted_tables(prof)
    engine = getattr(prof, "engine", DEFAULT_ENGINE)
    return [t for t in tables if (t.device, t.table) in fitted and t.engine in (engine, SHARED)]


def _clash(prof: Any, tables: list[Any]) -> list[str]:
    """The tables of ``tables`` the profile was fitted on: its namesakes
    (:func:`_fitted_namesakes`) of the same content where the profile recorded it."""
    contents = _fitted_contents(prof)
    named = {
        f"{t.device}/{t.table}"
        for t in _fitted_namesakes(prof, tables)
        if _same_content(t, contents.get((t.device, t.table)))
    }
    # the same content under another device or path (a copy of the set in another folder, the
    # same file by an absolute path): refused by its recorded digest, wherever it lies
    digests: dict[str, set[str]] = {}
    for (_, table), seen in contents.items():
        digests.setdefault(table, set()).update(seen)
    named |= {
        f"{t.device}/{t.table}"
        for t in tables
        if t.table in digests and _same_content(t, digests[t.table])
    }
    return sorted(named)


def _fitted_contents(prof: Any) -> dict[tuple[str, str], set[str]]:
    """(device, table) -> the digests of the tables of that name the profile was fitted on,
    where its ``fitted_on`` records them (``contents``: :func:`mlacalc.calibrate` writes them;
    the shipped profiles, fitted before, have none)."""
    out: dict[tuple[str, str], set[str]] = {}
    for e in getattr(prof, "fitted_on", ()):
        contents = e.get("contents") if isinstance(e, dict) else None
        if isinstance(contents, dict):
            for table, digests in contents.items():
                if isinstance(digests, list):
                    out.setdefault((str(e.get("device")), str(table)), set()).update(
                        str(d) for d in digests
                    )
    return out


def _same_content(table: Any, digests: set[str] | None) -> bool:
    """Whether ``table`` is one the profile was fitted on: by content where the profile
    recorded it (a held-out table of the same device and name, other rows, is not), else by
    device and name alone."""
    if digests is None:
        return True
    mine = getattr(table, "digest", None)
    if mine is None:
        mine = table_digest(table)
    return mine in digests


def _namesakes(prof: Any, tables: list[Any]) -> list[str]:
    """Warnings for the tables of ``tables`` of a device and name the profile was fitted on
    under other content (validated: a held-out table): the content digest tells a whole table,
    not its rows, so rows the fit also held would go unseen and read as held out."""
    if prof is None:
        return []
    named = sorted({f"{t.device}/{t.table}" for t in _fitted_namesakes(prof, tables)})
    if not named:
        return []
    return [
        f"profile '{prof.name}' was fitted on other tables named {', '.join(named[:4])}"
        f"{' ...' if len(named) > 4 else ''}: validated as held out by their content; rows "
        "these share with the fit's read better than held-out rows would"
    ]


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
            + (
                ""
                if _fitted_contents(prof)
                else "; a profile calibrate writes now records its tables' content: fitted "
                "again, it validates a held-out table of the same device"
            )
        )
        raise InvalidArgumentError(
            "profile",
            f"profile '{prof.name}' was fitted on {', '.join(clash[:4])}"
            f"{' ...' if len(clash) > 4 else ''}; validating on the data a "
            f"profile was fitted on proves nothing: {hint}",
        )


def _choose_profile(
    profile: Any, tables: list[Any], engine: str = DEFAULT_ENGINE
) -> tuple[Any, str]:
    """The profile that predicts ``tables``, and its label. With no profile given, the shipped
    default of ``engine`` where it was fitted on none of these tables, else the engine's own
    shipped profile fitted on none of their devices (leave-one-device-out, as
    ``benchmarks/bench_timemodel.py --engines`` scores it: SGLang's H100 fit predicting its B200
    tables), else TensorRT-LLM's standing in, the label saying why; an explicit profile fitted
    on them is refused."""
    if profile is not None:
        prof = load_profile(profile)
        _check_not_fitted_on(prof, tables)
        return prof, prof.name
    prof = load_profile(engine_profile(engine))
    if prof.engine == engine and not _clash(prof, tables):
        return prof, prof.name
    devices = sorted({t.device for t in tables})
    others = _profiles_not_fitted_on(set(devices), engine)
    if not others:
        if engine == DEFAULT_ENGINE:
            _check_not_fitted_on(prof, tables)  # refused, naming what to pass
            return prof, prof.name
        base, label = _choose_profile(None, tables, DEFAULT_ENGINE)
        return base, label + stand_in_note(base, engine, _why_none(engine, tables))
    alt = load_profile(others[0])
    on = " and ".join(sorted({d for d, _ in _fitted_tables(alt)}))
    these = f"these {' and '.join(devices)} tables"
    if prof.engine == engine:  # the engine's default, fitted on these tables
        mine = " and ".join(sorted({d for d, _ in _fitted_tables(prof)}))
        return (
            alt,
            f"{alt.name} (the default profile was fitted on {mine}, {these} included; "
            f"this one on {on} only)",
        )
    # the engine's own fit of another device, with the classes it lacks and the kernels the
    # engine runs on this generation through TensorRT-LLM's taken from TensorRT-LLM's profile
    # fitted on ``alt``'s devices and not these (engine_profiles.left_out_base: B200 from the
    # H100 + A100 default, H100 from fit-b200-sxm), as the engines benchmark scores it; else
    # TensorRT-LLM's profile these tables would take
    base = left_out_base(alt, devices, excluded=lambda p: bool(_clash(p, tables)))
    if base is None:
        base = _choose_profile(None, tables, DEFAULT_ENGINE)[0]
    hw = load_hardware(devices[0]) if len(devices) == 1 else None
    composed = left_out_composed(alt, base, hw)
    fitted = _own_fitted_on(engine, tables)
    why = (
        f"{engine}'s {', '.join(fitted)} {'was' if len(fitted) == 1 else 'were'} fitted on {these}"
        if fitted
        else f"no {engine} profile was fitted on {' or '.join(devices)}"
    )
    return composed, (
        f"{alt.name} ({why}; this one on {on} only, {base.engine}'s {base.name} standing in "
        "for the classes it lacks)"
    )


def _own_fitted_on(engine: str, tables: list[Any]) -> list[str]:
    """The shipped profiles of ``engine`` fitted on ``tables`` (sorted names)."""
    return [prof.name for prof in _shipped_of(engine) if _clash(prof, tables)]


def _why_none(engine: str, tables: list[Any]) -> str:
    """Why no profile of ``engine`` predicts ``tables``: its profiles were fitted on them, or
    none ships."""
    fitted = _own_fitted_on(engine, tables)
    if fitted:
        return (
            f"{engine}'s {', '.join(fitted)} {'was' if len(fitted) == 1 else 'were'} fitted on "
            f"these tables and no other {engine} profile ships"
        )
    return f"no {engine} profile ships"


def _predict_mapped(mapped: Any, hw: Any, prof: Any) -> tuple[np.ndarray, str]:
    """Per-row predicted seconds of a mapped table (NaN where a kernel cannot be predicted)."""
    n = len(mapped.table)
    total = np.zeros(n)
    how: set[str] = set()
    for part in mapped.parts:
        b, inverse = distinct_kernels(part.batch)
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
        t = np.asarray(t, dtype=np.float64)[inverse]
        total += np.bincount(part.rows, weights=t, minlength=n)
    if prof is None:  # the plain bound: no host floor (the floors were fitted on these rows)
        return total, "; ".join(sorted(how))
    floor = mapped.host_floor_for(prof.fitted_devices)
    if floor is not None and np.isfinite(floor).any():
        system = mapped.floors_from(prof.fitted_devices)
        how.add(
            "a module's kernels under the engine's host floor (mlacalc.timemodel.host_floor"
            + ("" if system == mapped.table.system else
               f"; measured on {MEASURED_SYSTEMS.get(system, system)}, not on this device")
            + ")"
        )  # fmt: skip
    return mapped.with_host_floor(total, prof.fitted_devices), "; ".join(sorted(how))


#: The reasons a row whose measured time is not a finite positive number is not predicted, the
#: mapping's own names on every path (a microbenchmark's rows were counted as
#: ``measured_time_not_positive``, a parquet table's as these): NaN or infinite, below zero,
#: zero.
TIME_REASONS = ("time_not_finite", "time_negative", "zero_time")


#: The reasons that are a fault of the input (with ``<column>_not_positive``): a set whose
#: every row has one is an error (:func:`_check_some_usable`).
INPUT_FAULTS = frozenset(
    {"time_not_finite", "time_negative", "unknown_dtype", "work_not_finite", "status"}
)


def time_reasons(seconds: Any) -> np.ndarray:
    """Per row, the reason (:data:`TIME_REASONS`) its measured time cannot be scored, else ""."""
    seconds = np.asarray(seconds, dtype=np.float64)
    out = np.full(seconds.shape, "", dtype=object)
    with np.errstate(invalid="ignore"):
        out[seconds == 0] = TIME_REASONS[2]
        out[seconds < 0] = TIME_REASONS[1]
    out[~np.isfinite(seconds)] = TIME_REASONS[0]
    return out


#: The reason a row whose sizes give no finite work is not predicted: its kernels' FLOPs or
#: bytes overflow (a column far outside any real shape: 1e307 rows), so no time is a number.
WORK_SIZE = "work_not_finite"


def _validate_bench_table(table: Any) -> TableValidation:
    """A microbenchmark table: every ok row predicted by the unfused op model with the
    set's measured ceilings (as :func:`validate` without ``measured``)."""
    vs = validate_file(table.meta["sidecar"], "unfused")
    pred = np.full(len(table), np.nan)
    status_ok = table.columns["status"] == "ok"
    # an ok row whose time is NaN, infinite, zero or negative is never scored (validate_file
    # leaves it out too): counted apart
    usable = status_ok & np.isfinite(table.seconds) & (table.seconds > 0)
    for i, r in zip(np.nonzero(usable)[0], vs.rows):
        pred[i] = r.predicted_s
    reason = np.where(status_ok, "", "status").astype(object)
    bad = status_ok & ~usable
    reason[bad] = time_reasons(table.seconds)[bad]
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
        bench_prediction("unfused"),
    )


def _kernel_set_of(item: Any) -> Path | None:
    """The sidecar of a ``calibrate``-preset kernel set named by ``item`` (its ``.json`` or
    ``.csv``), else None (a path :func:`~mlacalc.measured.tables.load_measured` reads)."""
    if not isinstance(item, (str, os.PathLike)) or not os.fspath(item).strip():
        return None
    p = Path(item).expanduser()
    if p.suffix.lower() not in (".json", ".csv") or not p.is_file():
        return None
    side, meta = bench_sidecar(p)
    return side if meta.get("preset") == "calibrate" else None


def _split_kernel_sets(measured: Any) -> tuple[list[Path], Any]:
    """``measured``'s calibrate-preset kernel sets and the rest (None when nothing is left)."""
    if isinstance(measured, MeasuredSet):
        return [], measured
    items = [measured] if isinstance(measured, (str, os.PathLike)) else measured
    if not isinstance(items, (list, tuple)):
        return [], measured  # load_measured refuses it by name
    sets = [side for side in map(_kernel_set_of, items) if side is not None]
    if not sets:
        return [], measured
    rest = [i for i in items if _kernel_set_of(i) is None]
    return sets, rest or None


def _kernel_seconds(batch: Any, hw: Any, prof: Any) -> tuple[np.ndarray, str]:
    """Predicted seconds of a kernel set's batch (NaN where it cannot be predicted) and how."""
    try:
        if prof is None:
            if batch.kind in COMM_KINDS:
                raise InvalidArgumentError("kind", "the plain roofline has no link term")
            t = roofline_seconds(batch.flops, batch.bytes, hw, batch.dtype) * batch.calls
            return np.asarray(t, dtype=np.float64), "plain roofline bound (uncalibrated)"
        terms, how = batch_terms(batch, hw, prof)
        return np.asarray(terms["seconds"], dtype=np.float64), how
    except MlacalcError:
        return np.full(len(batch), np.nan), ""


def _validate_kernel_set(side: Path, profile: Any, engine: str) -> tuple[list, str]:
    """A ``calibrate``-preset kernel set (``mlacalc bench --preset calibrate``), each kernel
    class a table: its ``ok`` rows predicted from their kernel, FLOPs, bytes and shape (as
    :func:`~mlacalc.measured.observations.read_kernel_set` reads them for ``calibrate``) on the
    set's device, by ``profile`` (none: the engine's shipped profile for that device; never one
    fitted on this set), and the label."""
    obs = read_kernel_set(side)
    hw = load_hardware(obs[0].device)
    tables = [
        SimpleNamespace(
            device=o.device, table=o.table, engine=SHARED, digest=observations_digest(o)
        )
        for o in obs
    ]
    if isinstance(profile, str) and profile == ROOFLINE:
        prof, label = None, "plain roofline bound (uncalibrated)"
    elif profile is None:
        prof, note = profile_for(engine, hw.name, hw)
        _check_not_fitted_on(prof, tables)
        label = prof.name + (f" [{note}]" if note else "")
    else:
        prof, label = _choose_profile(profile, tables, engine)
        # a CPU's fp32 GEMM fit timing a GPU's kernels: refused as roofline -H GPU and plan do
        check_profile_applies(prof, hw)
    out = []
    for o in obs:
        b = o.batch
        # a shape size of 0 or below is no kernel: never predicted (the time model divided by
        # it, numpy warning, and an m of 0 was scored at +1,068%)
        sized = np.full(len(b), "", dtype=object)
        for name in KIND_SHAPE_COLUMNS.get(b.kind, ()):
            if name in b.shape:
                with np.errstate(invalid="ignore"):
                    bad = ~(np.asarray(b.shape[name], dtype=np.float64) > 0)
                sized[bad & (sized == "")] = f"{name}_not_positive"
        good = np.flatnonzero(sized == "")
        pred = np.full(len(b), np.nan)
        how = ""
        if good.size:
            pred[good], how = _kernel_seconds(b.take(good), hw, prof)
        seconds = np.asarray(o.seconds, dtype=np.float64)
        reason = time_reasons(seconds)
        reason[(reason == "") & (sized != "")] = sized[(reason == "") & (sized != "")]
        work = np.asarray(b.flops, dtype=np.float64) + np.asarray(b.bytes, dtype=np.float64)
        reason[(reason == "") & ~np.isfinite(work)] = WORK_SIZE
        reason[(reason == "") & ~(np.isfinite(pred) & (pred > 0))] = "no_time_model"
        pred = np.where(np.isfinite(pred), pred, np.nan)
        columns = {"kind": np.full(len(b), b.kind), "dtype": np.full(len(b), b.dtype)}
        columns.update({k: np.asarray(v) for k, v in b.shape.items()})
        columns.update(flops=np.asarray(b.flops), bytes=np.asarray(b.bytes))
        out.append(
            TableValidation(
                o.table,
                side.stem,
                o.device,
                "mlacalc.bench calibrate (PyTorch's kernels)",
                "mlacalc.bench/1",
                seconds,
                pred,
                reason,
                [],
                how,
                SimpleNamespace(table=SimpleNamespace(columns=columns)),
                getattr(prof, "name", ""),
            )
        )
    return out, f"{side.name}: {label} (the set times PyTorch's kernels, predicted as {engine}'s)"


def validate_measured(
    measured: Any, profile: Any = None, *, engine: str | None = None
) -> MeasuredValidation:
    """Predict every row of a measured set and compare with the measured time.

    ``measured`` is a path (or paths) as :func:`mlacalc.measured.tables.load_measured` reads them,
    or a loaded :class:`~mlacalc.measured.tables.MeasuredSet`. ``profile`` is a calibration profile
    (name, path or object) or ``"roofline"`` for the plain roofline bound. ``None`` is the shipped
    default, or, for a device whose tables that was fitted on, a shipped profile fitted on
    none of that device's data (leave-one-device-out); an explicit profile fitted on any
    table of the set is refused. Rows the
    product cannot model or that a quirk rule excludes are counted as not predicted, by reason.
    ``engine`` (default ``trtllm``): whose tables a folder gives (with those every engine
    shares) and whose shipped profiles predict them.
    """
    engine = check_engine(engine_of_named_tables(measured, engine))
    kernel_sets, measured = _split_kernel_sets(measured)
    sets = [_validate_kernel_set(side, profile, engine) for side in kernel_sets]
    said = [w for side in kernel_sets for w in kernel_set_warnings(side)]
    if (
        kernel_sets
        and profile is not None
        and not (isinstance(profile, str) and profile == ROOFLINE)
    ):
        # a CPU profile fitted on another CPU, or with other threads, than the run it scores
        prof = load_profile(profile)
        said += [
            w for w in (other_cpu_warning(prof, load_hardware(str(s))) for s in kernel_sets) if w
        ]
    if measured is None:  # kernel sets alone
        tables = [t for tabs, _ in sets for t in tabs]
        named = tuple(str(side) for side in kernel_sets)
        _check_some_usable(tables, named)
        label = "; ".join(lab for _, lab in sets)
        return MeasuredValidation(tables, label, named, engine, warnings=said)
    mset = measured if isinstance(measured, MeasuredSet) else load_measured(measured, engine=engine)
    gpu_tables = [t for t in mset.tables if t.table != "bench"]
    label = "plain roofline bound (uncalibrated)"
    by_device: dict[str, Any] = {}
    if gpu_tables and not (isinstance(profile, str) and profile == ROOFLINE):
        if profile is None:  # each device by a profile not fitted on it
            labels = []
            for device in sorted({t.device for t in gpu_tables}):
                mine = [t for t in gpu_tables if t.device == device]
                by_device[device], text = _choose_profile(None, mine, engine)
                labels.append(text)
            label = (
                labels[0]
                if len(set(labels)) == 1
                else "; ".join(f"{d}: {lab}" for d, lab in zip(sorted(by_device), labels))
            )
        else:
            prof, label = _choose_profile(profile, gpu_tables, engine)
            by_device = {t.device: prof for t in gpu_tables}
            for device in sorted(by_device):  # a CPU's fit on GPU tables: refused
                check_profile_applies(prof, load_hardware(device))
    out = []
    for t in mset.tables:
        if t.table == "bench":
            out.append(_validate_bench_table(t))
            continue
        mapped = map_table(t)
        pred, how = _predict_mapped(mapped, load_hardware(t.device), by_device.get(t.device))
        reason = mapped.reason.copy()
        # a measured time that is NaN, infinite, zero or negative is never scored
        timed = time_reasons(t.seconds)
        reason[reason == ""] = timed[reason == ""]
        work = mapped.row_totals("flops") + mapped.row_totals("bytes")
        reason[(reason == "") & ~np.isfinite(work)] = WORK_SIZE
        bad = (reason == "") & ~(np.isfinite(pred) & (pred > 0))
        reason[bad] = "no_time_model"
        pred = np.where(reason == "", pred, np.where(np.isfinite(pred), pred, np.nan))
        pred[reason == NO_KERNEL] = 0.0  # no kernel runs: 0 s, as measured
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
    # the label says what predicted each kind of table: a microbenchmark run's rows are never
    # the plain roofline bound's (that label was every bench-only set's, beside the same
    # figure plain validate printed as the unfused roofline on the run's measured ceilings)
    bench = sorted({Path(t.meta["sidecar"]).stem for t in mset.tables if t.table == "bench"})
    labels = [lab for _, lab in sets] + ([label] if gpu_tables else [])
    labels += [f"{', '.join(bench)}: {bench_prediction('unfused')}"] if bench else []
    label = "; ".join(labels) or label
    if sets:
        out = [t for tabs, _ in sets for t in tabs] + out
    named = tuple(str(side) for side in kernel_sets) + tuple(mset.paths)
    _check_some_usable(out, named)
    plans, note = (
        _plan_profiles(by_device, gpu_tables, engine, named) if profile is None else ({}, "")
    )
    for prof in {id(p): p for p in by_device.values()}.values():
        said = said + _namesakes(prof, [t for t in gpu_tables if by_device.get(t.device) is prof])
    digests = {d: p.source_digest for d, p in sorted(by_device.items()) if p is not None}
    return MeasuredValidation(out, label, named, engine, plans, note, said, digests)


def _check_some_usable(tables: list[TableValidation], paths: tuple[str, ...]) -> None:
    """Refuse a set none of whose rows is predicted for a fault of the input (every time NaN,
    infinite or negative, every dtype unknown or size 0, no rows), counting the reasons (it
    printed a table of "-" and exited 0). A set the chosen prediction cannot model (collective
    rows under the plain roofline, ``no_time_model``) or whose rows a quirk rule leaves out
    (``zero_time`` of a floored difference) is reported as before."""
    if any(int((t.reason == "").sum()) + t.predicted_zero for t in tables):
        return
    reasons = {str(r) for t in tables for r in t.reason.tolist()}
    if not reasons <= INPUT_FAULTS and not all(
        r.endswith("_not_positive") for r in reasons - INPUT_FAULTS
    ):
        return
    counts: dict[str, int] = {}
    values: dict[str, list[str]] = {}
    for t in tables:
        for why, n in t.not_predicted_by_reason().items():
            counts[why] = counts.get(why, 0) + n
            table = getattr(t.mapped, "table", None)
            held = reason_values(table, t.reason == why, why) if table is not None else ""
            if held and held not in values.setdefault(why, []):
                values[why].append(held)
    rows = sum(t.rows for t in tables)
    said = ", ".join(
        f"{n:,} {why}" + (f" ({'; '.join(values[why][:2])})" if values.get(why) else "")
        for why, n in sorted(counts.items(), key=lambda i: -i[1])
    )
    raise ConfigError(
        f"has no row to validate ({rows:,} row(s)" + (f": {said}" if said else "") + ")",
        source=", ".join(paths[:3]) + (" ..." if len(paths) > 3 else ""),
        fix="give tables with finite positive latencies, known dtypes and sizes of at least 1 "
        "(docs/measured-sets.md, 'Inputs that cannot be used')",
    )


def _devices_of(prof: Any) -> str:
    """The devices a profile was fitted on, in words."""
    return " and ".join(sorted({d for d, _ in _fitted_tables(prof)})) or "no recorded device"


def _plan_profiles(
    by_device: dict[str, Any], tables: list[Any], engine: str, paths: tuple[str, ...]
) -> tuple[dict[str, str], str]:
    """For each device whose tables a profile predicted by default: the profile ``mlacalc
    plan`` uses there where it is another (its own fit of the device, which validating on these
    tables would refuse), and a note saying which predicted, which plan uses, and the command
    that validates the latter on a device it was not fitted on (where the set's path names the
    device's system folder and a sibling folder of another device holds the same tables)."""
    plans, notes = {}, []
    for device, used in sorted(by_device.items()):
        prof, _ = profile_for(engine, device, load_hardware(device))
        if prof.name == getattr(used, "name", None):
            continue
        plans[device] = prof.name
        mine = [t for t in tables if t.device == device]
        text = (
            f"{device}: predicted by {used.name} (fitted on {_devices_of(used)}: these tables "
            f"held out); mlacalc plan on {device} uses {prof.name} (fitted on "
            f"{_devices_of(prof)}"
            + (", these tables included: validate refuses it on them" if _clash(prof, mine) else "")
            + ")"
        )
        command = _held_out_command(paths, mine, prof, engine)
        notes.append(text + (f"; to validate {prof.name} held out: {command}" if command else ""))
    return plans, "\n".join(notes)


def _held_out_command(paths: tuple[str, ...], tables: list[Any], prof: Any, engine: str) -> str:
    """``mlacalc validate`` of ``prof`` on the same tables of a device it was not fitted on (the
    newest such: H100 before A100 for a B200 fit, as the benchmark's leave-one-device-out pairs
    them): the set's path with its system folder swapped for a sibling one that holds tables of
    ``engine`` itself ("" where none: A100's engine-neutral NCCL is no SGLang set)."""
    fitted = {d for d, _ in _fitted_tables(prof)}
    systems = {t.system for t in tables}
    found = []
    for path in paths:
        parts = Path(path).parts
        for i in (i for i, part in enumerate(parts) if i and part in systems):
            for other in Path(*parts[:i]).glob("*/"):
                try:
                    hw = load_hardware(other.name)
                except MlacalcError:
                    continue
                swapped = Path(other, *parts[i + 1 :])
                if (
                    hw.name not in fitted
                    and other.name not in systems
                    and holds_tables_of(swapped, engine)  # not shared ones (NCCL) alone
                ):
                    found.append((float(hw.compute_capability or 0), str(swapped)))
    if not found:
        return ""
    return f"mlacalc validate --measured {max(found)[1]} --profile {prof.name} --engine {engine}"
