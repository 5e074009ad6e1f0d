"""Fitting observations checked before a fit: the rows a fit can use, and the others counted.

A measured time that is not a finite positive number (NaN, infinite, zero or negative: a
failed or corrupted measurement), or a row whose FLOPs, bytes or calls are not finite and
non-negative (or that moves no bytes, has a GEMM size of 0 or a shape not finite), is never
fitted on; a kernel kind the time model does not know has no class to fit (a class of it
would be invented and never used). A class fitted on one device with no more rows than the
parameters it adjusts would match them exactly and report a residual of about zero, which
says nothing: those rows are left out of that device's fit and said so.

:func:`usable_observations` returns what is left and, in words, what was excluded and why (the
lines go into the profile's notes), and refuses a set with no usable row, counting the reasons.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

import numpy as np

from mlacalc.timemodel.fit import Observations
from mlacalc.timemodel.terms import class_key, fit_params
from mlacalc.words.errors import InvalidArgumentError
from mlacalc.words.kernels import KERNEL_KINDS
from mlacalc.words.units import lines_words

__all__ = ["usable_observations"]


def _row_reasons(o: Observations) -> np.ndarray:
    """Per row: "" when usable, else why not."""
    n = len(o.batch)
    reasons = np.full(n, "", dtype=object)
    with np.errstate(invalid="ignore"):
        seconds = np.asarray(o.seconds, dtype=np.float64)
        work = [np.asarray(a, dtype=np.float64) for a in (o.batch.flops, o.batch.bytes)]
        calls = np.asarray(o.batch.calls, dtype=np.float64)
        bad_work = np.zeros(n, dtype=bool)
        for a in work:
            bad_work |= ~np.isfinite(a) | (a < 0)
        bad_work |= ~np.isfinite(calls) | (calls < 0)
        for col in o.batch.shape.values():
            bad_work |= ~np.isfinite(np.asarray(col, dtype=np.float64))
        # a kernel moves data; a GEMM has three sizes (0 divided its tiles by zero)
        bad_work |= work[1] <= 0
        if o.batch.kind == "gemm":
            for name in ("m", "n", "k"):
                if name in o.batch.shape:
                    bad_work |= np.asarray(o.batch.shape[name], dtype=np.float64) <= 0
    reasons[bad_work] = (
        "FLOPs, bytes or calls negative or not finite, no bytes, a GEMM size of 0, or a shape "
        "not finite"
    )
    reasons[seconds <= 0] = "time zero or negative"
    reasons[~np.isfinite(seconds)] = "time not finite (NaN or infinite)"
    return reasons


def usable_observations(
    obs: Iterable[Any], argument: str = "measured_sets"
) -> tuple[list[Observations], tuple[str, ...]]:
    """The observations a fit can use and notes saying what was excluded (see the module
    docstring); an error naming ``argument`` when nothing is left."""
    out: list[Observations] = []
    counts: Counter[str] = Counter()
    notes: list[str] = []
    for i, o in enumerate(obs):
        if not isinstance(o, Observations):
            raise InvalidArgumentError(
                f"{argument}[{i}]",
                f"must be fitting observations, a measured set or a path, got {type(o).__name__}",
            )
        key = class_key(o.batch.kind, o.batch.dtype, o.batch.variant)
        if o.batch.kind not in KERNEL_KINDS:
            reason = f"unknown kernel kind '{str(o.batch.kind)[:40]}'"
            counts[reason] += len(o.batch)
            notes.append(f"{o.device}: {len(o.batch)} row(s) of {o.table} excluded: {reason}")
            continue
        reasons = _row_reasons(o)
        for reason, n in Counter(r for r in reasons if r).items():
            counts[reason] += n
            # a kernel set's rows are said by their lines in its rows file
            where = (
                lines_words([o.lines[i] for i in np.flatnonzero(reasons == reason)], o.lines_file)
                if o.lines is not None
                else ""
            )
            notes.append(f"{o.device}: {n} row(s) of {key} ({o.table}) excluded: {reason}{where}")
        keep = np.flatnonzero(reasons == "")
        if len(keep) == len(o.batch):
            out.append(o)
        elif len(keep):
            seconds = np.asarray(o.seconds, dtype=np.float64)[keep]
            out.append(Observations(o.device, o.table, o.batch.take(keep), seconds, o.source))
    out = _determined(out, counts, notes)
    if not out:
        excluded = "; ".join(f"{n} {reason}" for reason, n in counts.most_common())
        raise InvalidArgumentError(
            argument,
            "no kernel rows a fit can use"
            + (f" (excluded: {excluded})" if excluded else "")
            + "; give measured sets whose tables map onto single kernels with positive times",
        )
    return out, tuple(notes)


def _determined(
    obs: list[Observations], counts: Counter[str], notes: list[str]
) -> list[Observations]:
    """Leave out each (class, device) whose rows do not outnumber the parameters its fit
    adjusts."""

    def group(o: Observations) -> tuple[str, str]:
        return class_key(o.batch.kind, o.batch.dtype, o.batch.variant), o.device

    rows: Counter[tuple[str, str]] = Counter()
    params: dict[tuple[str, str], int] = {}
    for o in obs:
        rows[group(o)] += len(o.batch)
        params[group(o)] = len(fit_params(o.batch.kind, o.batch.dtype))
    few = {g for g, n in rows.items() if n <= params[g]}
    for key, device in sorted(few):
        n, p = rows[(key, device)], params[(key, device)]
        reason = f"underdetermined: {n} row(s) for the {p} parameters of {key}"
        counts[reason] += n
        notes.append(f"{device}: {key} not fitted ({reason})")
    return [o for o in obs if group(o) not in few]
