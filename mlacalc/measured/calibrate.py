"""Fit a calibration profile on measured sets: :func:`calibrate` (``mlacalc.calibrate``)."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from mlacalc.measured.mapped import reason_values
from mlacalc.measured.mapping import MappedTable, map_table
from mlacalc.measured.observations import (
    RESIDUAL_SHARE,
    kernel_set_warnings,
    observations_and_mapped,
    observations_of,
    read_kernel_set,
    residual_observations,
)
from mlacalc.measured.tables import (
    MeasuredSet,
    MeasuredTable,
    bench_sidecar,
    engine_of_named_tables,
    load_measured,
    observations_digest,
    table_digest,
)
from mlacalc.timemodel.engine_profiles import with_stand_ins
from mlacalc.timemodel.fit import Observations, fit_profile, pinned_params
from mlacalc.timemodel.observation_checks import usable_observations
from mlacalc.timemodel.profile import BASE_NOTE, DEFAULT_PROFILE, Profile, load_profile
from mlacalc.timemodel.terms import fit_params
from mlacalc.words.arguments import one_or_many
from mlacalc.words.engines import DEFAULT_ENGINE, check_engine
from mlacalc.words.errors import ConfigError, InvalidArgumentError


def _as_observations(item: Any, engine: str, progress=None) -> list[Observations]:
    if isinstance(item, Observations):
        return [item]
    if isinstance(item, (list, tuple)):
        out: list[Observations] = []
        for sub in item:
            out += _as_observations(sub, engine, progress)
        return out
    return observations_of(item, engine=engine, progress=progress)


def calibrate(
    measured_sets: Any,
    *,
    name: str = "custom",
    use_scipy: bool = True,
    notes: Iterable[str] = (),
    progress=None,
    engine: str | None = None,
    base: Any = None,
) -> Profile:
    """Fit a profile on measured sets: :class:`~mlacalc.timemodel.fit.Observations`, measured
    sets read by :func:`mlacalc.measured.tables.load_measured`, or their paths. Records what it
    was fitted on and the residuals per device and kernel class, with the device's own fit and
    the pooled one. One path (a ``str`` or ``os.PathLike``) or one measured set is a list of one.
    ``engine`` (default ``trtllm``): the serving engine whose tables a folder gives (with the
    tables every engine shares, NCCL's and DeepEP's), recorded in the profile. ``progress``
    (a callable of one line) is told each table as it is read and each class as it is fitted.
    ``base`` (a profile of the same engine: a shipped name, a JSON path or a Profile) gives
    every class these tables do not fit (:func:`with_base`); without it those classes are
    timed by datasheet defaults.
    """
    engine = check_engine(engine_of_named_tables(measured_sets, engine))
    if base is not None:
        base_profile(base, engine)
    obs: list[Observations] = []
    mapped = []
    for item in one_or_many("measured_sets", measured_sets, what="measured sets or paths"):
        item_obs, item_mapped = _read_and_map(item, engine, progress)
        obs += item_obs
        mapped += item_mapped
    # a table's rows the mapping left out for a fault of the input (a time NaN or negative, a
    # dtype or size no kernel has), counted as a kernel set's are (they were dropped unsaid)
    faults, counts = input_faults(mapped)
    said = "; ".join(f"{n:,} {why}" for why, n in counts)
    empty = bool(mapped) and not any(len(m.table) for m in mapped)
    if not obs:
        raise InvalidArgumentError(
            "measured_sets",
            f"no kernel rows to fit{_in(measured_sets)}"
            + (f" (excluded: {said})" if said else " (its tables hold no rows)" if empty else "")
            + "; give measured sets whose tables map onto single kernels"
            + (" with finite positive times, known dtypes and sizes of at least 1" if said else ""),
        )
    # rows with no usable time or work, unknown kinds and underdetermined classes left out,
    # each said in the profile's notes
    try:
        obs, excluded = usable_observations(obs)
    except InvalidArgumentError as exc:  # none left: say whose rows they were
        sources = sorted({str(o.source) for o in obs if getattr(o, "source", "")})
        where = f" in {', '.join(sources[:3])}{' ...' if len(sources) > 3 else ''}"
        message = exc.message.replace("can use", "can use" + where, 1) if sources else exc.message
        if said:
            message = message.replace(" (excluded: ", f" (excluded: {said}; ", 1)
        raise InvalidArgumentError(exc.argument, message) from None
    ceilings = [w for side in _kernel_sets(measured_sets) for w in kernel_set_warnings(side)]
    notes = (*notes, *faults, *ceilings, *excluded)
    prof = fit_profile(
        obs, name=name, use_scipy=use_scipy, notes=notes, progress=progress, engine=engine
    )
    prof = fit_composite_classes(prof, mapped, use_scipy=use_scipy, progress=progress)
    prof = with_contents(prof, mapped, measured_sets, engine)
    prof = dataclasses.replace(prof, notes=(*prof.notes, *fit_warnings(prof)))
    return prof if base is None else with_base(prof, base)


def base_profile(base: Any, engine: str) -> Profile:
    """The profile ``base`` names (a shipped name, a JSON path or a :class:`Profile`), checked
    to be a fitted profile of ``engine``: one line naming ``base`` otherwise. calibrate checks
    it before fitting, so a wrong base is said in a second, not after minutes of fitting."""
    try:
        under = load_profile(base)
    except InvalidArgumentError as exc:  # not a shipped name nor a file: said as the base's
        raise InvalidArgumentError("base", exc.message) from None
    except ConfigError as exc:  # a file that is no profile: its own words, as the base's
        raise InvalidArgumentError("base", str(exc)) from None
    if under.engine != engine:
        raise InvalidArgumentError(
            "base",
            f"profile {under.name} was fitted on {under.engine}'s tables and this one on "
            f"{engine}'s: give a {engine} profile as the base (or calibrate with "
            f"--engine {under.engine})",
        )
    if not under.classes and not under.devices:
        raise InvalidArgumentError(
            "base", f"profile {under.name} holds no fitted class: give a calibrated profile"
        )
    return under


def with_base(prof: Profile, base: Any) -> Profile:
    """``prof`` (fitted on a user's tables) over ``base`` (a shipped profile name, a JSON path or
    a :class:`Profile` of the same engine, :func:`base_profile`): every class ``prof`` does not
    fit, pooled and per device, is ``base``'s, so a profile fitted on a few GEMM tables of a new
    device times its attention, norms and collectives by the shipped fit (by datasheet ratios
    from the nearest fitted device) instead of the datasheet defaults. ``prof``'s device fits win
    where both hold a class of a device, and the pooled classes stay ``base``'s (a device
    neither fits is predicted as ``base`` predicts it); ``fitted_on`` and the residuals are
    both profiles', and one note names the base and the user's devices. A non-TensorRT-LLM
    base takes the TensorRT-LLM classes its engine's predictions take anyway
    (:func:`~mlacalc.timemodel.engine_profiles.with_stand_ins`)."""
    under = base_profile(base, prof.engine)
    if under.engine != DEFAULT_ENGINE:
        under = with_stand_ins(under, load_profile(DEFAULT_PROFILE))
    # the pooled classes stay the base's (a device neither profile fits is predicted as the
    # base predicts it); the user's pooled fit only where the base holds no such class
    classes = {**prof.classes, **under.classes}
    devices = {d: dict(c) for d, c in under.devices.items()}
    for device, table in prof.devices.items():
        devices[device] = {**devices.get(device, {}), **table}
    residuals = {d: dict(r) for d, r in under.residuals.items()}
    for device, table in prof.residuals.items():
        residuals[device] = {**residuals.get(device, {}), **table}
    on = ", ".join(under.fitted_devices) or "no device"
    note = (
        f"{BASE_NOTE}profile {under.name} ({under.engine}) gives every class the tables of "
        f"{', '.join(prof.fitted_devices)} do not fit: its {len(under.classes)} pooled "
        f"class(es), which stay its own, and its fits of {on} (a device of the same "
        "architecture is timed from the nearest by datasheet ratios)"
    )
    return dataclasses.replace(
        prof,
        classes=classes,
        devices=devices,
        residuals=residuals,
        fitted_on=(*under.fitted_on, *prof.fitted_on),
        notes=(*prof.notes, note, *under.notes),
    )


def with_contents(prof: Profile, mapped: list[MappedTable], measured_sets: Any, engine: str):
    """``prof`` with, in each ``fitted_on`` entry, ``contents``: the digest of each table it
    was fitted on (:func:`~mlacalc.measured.tables.table_digest`, a kernel set's class or
    observations given as such by :func:`~mlacalc.measured.tables.observations_digest`).
    validate refuses a profile on a table of the same content, and only then: a held-out
    table of a device and name it was fitted on, with other rows, is validated."""
    found: dict[tuple[str, str], set[str]] = {}
    for m in mapped:
        found.setdefault((m.table.device, m.table.table), set()).add(table_digest(m.table))
    for side in _kernel_sets(measured_sets):
        for o in read_kernel_set(side):
            found.setdefault((o.device, o.table), set()).add(observations_digest(o))
    for o in _given_observations(measured_sets):
        found.setdefault((o.device, o.table), set()).add(observations_digest(o))
    fitted_on = []
    for entry in prof.fitted_on:
        contents = {
            table: sorted(found[(entry["device"], table)])
            for table in entry.get("tables", {})
            if (entry["device"], table) in found
        }
        fitted_on.append({**entry, "contents": contents} if contents else dict(entry))
    return dataclasses.replace(prof, fitted_on=tuple(fitted_on))


def _given_observations(measured_sets: Any) -> list[Observations]:
    items = measured_sets if isinstance(measured_sets, (list, tuple)) else [measured_sets]
    out: list[Observations] = []
    for item in items:
        if isinstance(item, Observations):
            out.append(item)
        elif isinstance(item, (list, tuple)):
            out += _given_observations(item)
    return out


#: A fitted class is said to be a poor fit above these residuals (median and p90 |error|), or
#: with fewer than ``ROWS_PER_PARAM`` rows a parameter. 3 of the shipped profiles' 393 device
#: fits pass them (vLLM's FA4 decode on H100, 50% / 145%; SGLang's flat top-k, p90 300-400%);
#: a noisy CPU run's GEMM fit had 79% / 155% (trial of 2026-11-29).
POOR_MEDIAN, POOR_P90, ROWS_PER_PARAM = 0.30, 1.0, 3
POOR_FIT = "poor fit: "


def fit_warnings(prof: Profile) -> list[str]:
    """One line per (device, class) whose fit is poor: its residuals above
    ``POOR_MEDIAN`` / ``POOR_P90``, parameters on their search bounds, or few rows for its
    parameters, each line with the class, its residuals, pinned parameters and rows against
    parameters (``"poor fit: "`` first; calibrate warns them and keeps them in the notes)."""
    out = []
    for device, classes in sorted(prof.residuals.items()):
        for key, stats in sorted(classes.items()):
            params = prof.devices.get(device, {}).get(key) or prof.classes.get(key, {})
            kind, dtype = key.split(":")[:2]
            n_params = len(fit_params(kind, dtype))
            pinned = pinned_params(key, params)
            median, p90 = stats.get("median_abs_error", 0.0), stats.get("p90_abs_error", 0.0)
            rows = int(stats.get("rows", 0))
            # a bound alone says nothing: 234 of the shipped profiles' 393 device fits hold one
            # (a parameter no row informs stays at a bound, harmlessly)
            if median <= POOR_MEDIAN and p90 <= POOR_P90 and rows >= ROWS_PER_PARAM * n_params:
                continue
            out.append(
                f"{POOR_FIT}{device}: {key}: residuals median {median:.1%}, p90 {p90:.1%}; "
                f"{rows} rows for {n_params} parameters; "
                + (f"on their search bounds: {', '.join(pinned)}" if pinned else "no bound hit")
                + " (check the measurements' spread, or measure more shapes)"
            )
    return out


#: The words a fault of a table's row is said in, as a kernel set's rows are
#: (:mod:`mlacalc.timemodel.observation_checks`): the mapping's reason -> the words.
FAULT_WORDS = {
    "time_not_finite": "time not finite (NaN or infinite)",
    "time_negative": "time zero or negative",
    "unknown_dtype": "unknown dtype",
}


def _fault_words(why: str) -> str | None:
    if why in FAULT_WORDS:
        return FAULT_WORDS[why]
    if why.endswith("_not_positive"):
        return f"{why[: -len('_not_positive')]} 0, negative or missing"
    return None


def input_faults(mapped: list[MappedTable]) -> tuple[list[str], list[tuple[str, int]]]:
    """The rows of mapped tables left out for a fault of the input (a time NaN, infinite,
    negative or zero, a dtype the kernel vocabulary has no class for, a size of 0 or below),
    as notes (``"L40S: 5 row(s) of gemm_perf excluded: time not finite (NaN or infinite)"``,
    the words of a kernel set's rows) and counts by words, the most first."""
    notes: list[str] = []
    counts: dict[str, int] = {}
    for m in mapped:
        reason = np.asarray(m.reason).astype(str)
        seconds = np.asarray(m.table.seconds, dtype=np.float64)
        with np.errstate(invalid="ignore"):
            zero = (reason == "zero_time") & (seconds == 0)  # not a floored difference's row
        reason = np.where(zero, "time_negative", reason)
        for why in sorted(set(reason.tolist()) - {""}):
            words = _fault_words(why)
            if words is None:
                continue
            rows = reason == why
            held = reason_values(m.table, rows, why)
            words += f" ({held})" if held else ""
            n = int(rows.sum())
            notes.append(f"{m.table.device}: {n} row(s) of {m.table.table} excluded: {words}")
            counts[words] = counts.get(words, 0) + n
    return notes, sorted(counts.items(), key=lambda i: -i[1])


def _kernel_sets(measured_sets: Any) -> list[Path]:
    """The ``calibrate``-preset kernel sets named among ``measured_sets`` (their sidecars)."""
    items = measured_sets if isinstance(measured_sets, (list, tuple)) else [measured_sets]
    out = []
    for item in items:
        if isinstance(item, (list, tuple)):
            out += _kernel_sets(item)
        elif isinstance(item, (str, os.PathLike)) and Path(item).suffix.lower() in (
            ".json",
            ".csv",
        ):
            side, meta = bench_sidecar(item)
            if meta.get("preset") == "calibrate":
                out.append(side)
    return out


def _in(measured_sets: Any) -> str:
    """`` in PATH, ...`` of the paths among ``measured_sets`` ("" when none is a path)."""
    items = measured_sets if isinstance(measured_sets, (list, tuple)) else [measured_sets]
    paths = [os.fspath(i) for i in items if isinstance(i, (str, os.PathLike))]
    return f" in {', '.join(paths[:3])}{' ...' if len(paths) > 3 else ''}" if paths else ""


def _read_and_map(
    item: Any, engine: str, progress=None
) -> tuple[list[Observations], list[MappedTable]]:
    """A calibrate input's observations (:func:`_as_observations`) and its mapped tables
    (:func:`_mapped_of`), a measured set's each table read and mapped once (speed only: the
    same observations and tables, in the same order, as the two apart, which read and mapped
    every table twice)."""
    plain = isinstance(item, MeasuredSet) or (
        isinstance(item, (str, os.PathLike)) and Path(item).suffix.lower() not in (".json", ".csv")
    )
    if not plain:
        return _as_observations(item, engine, progress), _mapped_of(item, engine)
    return observations_and_mapped(item, engine, progress)


def _mapped_of(item: Any, engine: str) -> list[MappedTable]:
    """The mapped tables of a calibrate input (none for observations or a kernel set)."""
    if isinstance(item, Observations):
        return []
    if isinstance(item, (list, tuple)):
        return [m for sub in item for m in _mapped_of(sub, engine)]
    if isinstance(item, MappedTable):
        return [item]
    if isinstance(item, MeasuredTable):
        return [map_table(item)]
    if isinstance(item, (str, os.PathLike)) and Path(item).suffix in (".json", ".csv"):
        return []
    mset = item if isinstance(item, MeasuredSet) else load_measured(item, engine=engine)
    out = []
    for table in mset.tables:
        try:
            out.append(map_table(table))
        except ConfigError:  # a table the mapping has no kernels for
            continue
    return out


def fit_composite_classes(
    prof: Profile, mapped: list[MappedTable], *, use_scipy: bool = True, progress=None
) -> Profile:
    """``prof`` with the kernel classes that only composite rows time (vLLM's MLA attention,
    published only inside its whole-module tables) fitted on those rows' residuals
    (:func:`~mlacalc.measured.observations.residual_observations`: the row's time less the
    other kernels' predictions by ``prof``, with the TensorRT-LLM default standing in for a
    class ``prof`` lacks, as it does in a prediction); ``prof`` itself when no such row."""
    predictor = with_stand_ins(prof, load_profile(DEFAULT_PROFILE))
    obs: list[Observations] = []
    for m in mapped:
        obs += residual_observations(m, predictor, set(prof.classes))
    if not obs:
        return prof
    try:
        obs, excluded = usable_observations(obs)
    except InvalidArgumentError:  # no residual a fit can use
        return prof
    if not obs:
        return prof
    extra = fit_profile(obs, name=prof.name, use_scipy=use_scipy, progress=progress)
    new = sorted(k for k in extra.classes if k not in prof.classes)
    note = (
        f"{', '.join(new)}: fitted on the residuals of composite rows (a row's time less this "
        f"profile's prediction of its other kernels, where at least {RESIDUAL_SHARE:.0%} of the "
        "row): no single-kernel table times these classes"
    )
    return with_classes(prof, extra, note, excluded)


def with_classes(prof: Profile, extra: Profile, note: str, excluded=()) -> Profile:
    """``prof`` with the classes of ``extra`` it lacks (pooled, per device, residuals, what they
    were fitted on), ``note`` and ``excluded`` added to its notes; ``prof`` when none."""
    new = sorted(k for k in extra.classes if k not in prof.classes)
    if not new:
        return prof
    classes = {**prof.classes, **{k: extra.classes[k] for k in new}}
    devices = {d: dict(c) for d, c in prof.devices.items()}
    residuals = {d: dict(c) for d, c in prof.residuals.items()}
    for d, table in extra.devices.items():
        devices.setdefault(d, {}).update({k: v for k, v in table.items() if k in new})
    for d, table in extra.residuals.items():
        residuals.setdefault(d, {}).update({k: v for k, v in table.items() if k in new})
    fitted_on = [dict(f, tables=dict(f["tables"])) for f in prof.fitted_on]
    for f in extra.fitted_on:
        mine = next((g for g in fitted_on if g["device"] == f["device"]), None)
        if mine is None:
            fitted_on.append(f)
            continue
        mine["tables"].update(f["tables"])
        mine["sources"] = sorted(set(mine.get("sources", [])) | set(f.get("sources", [])))
    return dataclasses.replace(
        prof,
        classes=classes,
        devices=devices,
        residuals=residuals,
        fitted_on=tuple(fitted_on),
        notes=(*prof.notes, note, *excluded),
    )
