"""Fitting a calibration profile on measured sets.

For every kernel class, the parameters the model lists in
:data:`mlacalc.timemodel.terms.FIT_PARAMS` are fitted by least squares on the log of
predicted / measured time, with a robust loss so that the isolated spikes of measured tables
do not pull the fit. Each parameter is searched inside its physical bounds
(:data:`~mlacalc.timemodel.terms.PARAMS`) through a logistic transform of its logarithm.
``scipy.optimize.least_squares`` is used when scipy is installed; otherwise a
Levenberg-Marquardt iteration in numpy with Huber weights does the same job.

Two fits per class: one per measured device (used to predict that device) and one pooled over
every device, each device weighted equally (used to predict every other device by its
datasheet figures).
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mlacalc.hardware.catalogue import load_hardware
from mlacalc.timemodel.device import device_figures
from mlacalc.timemodel.gemm_time import kept_shapes
from mlacalc.timemodel.profile import Profile, measured_device_of
from mlacalc.timemodel.terms import PARAMS, class_key, default_params, fit_params, kernel_terms
from mlacalc.words.engines import DEFAULT_ENGINE
from mlacalc.words.errors import InvalidArgumentError
from mlacalc.words.kernels import KernelBatch

__all__ = ["Observations", "error_stats", "fit_class", "fit_profile"]

_ZERO_FLOOR = 1e-6  # a lower bound of 0 is searched from hi * this
_MAX_ROWS = 12000  # rows per (class, device) a fit uses, sampled evenly
#: rows a fit predicts at a time: every row's terms are its own, and a kernel class's arrays of
#: a few thousand rows stay in a core's cache (speed only: a prediction of SGLang's 12,000 B200
#: MoE rows took 15-22 ms whole and 9-12 ms in slices of 4,096; each row's residual the same)
_SLICE_ROWS = 4096


@dataclass(frozen=True)
class Observations:
    """Measured times of single kernels: one class (a batch) on one catalogue device.
    ``lines``: each row's line in the file ``lines_file`` it was read from, where one was (a
    kernel set's rows file), so that a row left out is said by its line."""

    device: str
    table: str
    batch: KernelBatch
    seconds: np.ndarray
    source: str = ""
    lines: tuple[int, ...] | None = None
    lines_file: str = ""

    def __post_init__(self) -> None:
        if len(self.batch) != len(np.asarray(self.seconds)):
            raise InvalidArgumentError(
                "seconds",
                f"{len(self.seconds)} times for {len(self.batch)} "
                "kernels; give one measured time per row",
            )
        if self.lines is not None and len(self.lines) != len(self.batch):
            raise InvalidArgumentError(
                "lines",
                f"{len(self.lines)} line numbers for {len(self.batch)} kernels; give one per "
                "row, or none",
            )


def error_stats(predicted: np.ndarray, measured: np.ndarray) -> dict[str, float]:
    """rows, median |error|, signed median error and p90 |error| of predicted / measured - 1."""
    err = np.asarray(predicted, dtype=np.float64) / np.asarray(measured, dtype=np.float64) - 1.0
    if err.size == 0:
        return {
            "rows": 0,
            "median_abs_error": math.nan,
            "signed_median_error": math.nan,
            "p90_abs_error": math.nan,
        }
    return {
        "rows": int(err.size),
        "median_abs_error": float(np.median(np.abs(err))),
        "signed_median_error": float(np.median(err)),
        "p90_abs_error": float(np.percentile(np.abs(err), 90)),
    }


def _bounds(name: str) -> tuple[float, float]:
    lo, hi, _ = PARAMS[name]
    return math.log(max(lo, hi * _ZERO_FLOOR)), math.log(hi)


def pinned_params(key: str, params: dict[str, float]) -> list[str]:
    """The fitted parameters of class ``key`` (``kind:dtype[:variant]``) that sit on a bound of
    their search range (within 0.1% of its log width): the data pushed them out of it, so the
    fit says nothing about them."""
    kind, dtype = key.split(":")[:2]
    pinned = []
    for name in fit_params(kind, dtype):
        if name not in params or params[name] <= 0:
            continue
        lo, hi = _bounds(name)
        s = (math.log(params[name]) - lo) / (hi - lo)
        if s < 1e-3 or s > 1 - 1e-3:
            pinned.append(f"{name} {params[name]:.6g}")
    return pinned


def _to_x(names: tuple[str, ...], values: dict[str, float]) -> np.ndarray:
    """Search coordinates of parameter values; a start on a bound is moved inside it (5% of the
    log range), where the logistic transform still has a gradient."""
    x = []
    for n in names:
        lo, hi = _bounds(n)
        s = (math.log(max(values[n], 1e-300)) - lo) / (hi - lo)
        s = min(max(s, 0.05), 0.95)
        x.append(math.log(s / (1 - s)))
    return np.array(x)


def _from_x(names: tuple[str, ...], x: np.ndarray, base: dict[str, float]) -> dict[str, float]:
    out = dict(base)
    for n, xi in zip(names, x):
        lo, hi = _bounds(n)
        out[n] = math.exp(lo + (hi - lo) / (1.0 + math.exp(-float(np.clip(xi, -40, 40)))))
    return out


def _subsample(n: int, limit: int) -> np.ndarray:
    if n <= limit:
        return np.arange(n)
    return np.unique(np.linspace(0, n - 1, limit).astype(np.int64))


def _lm(fun, x0: np.ndarray, iterations: int = 60) -> np.ndarray:
    """Levenberg-Marquardt with Huber weights (the numpy route when scipy is missing)."""
    x, lam = x0.copy(), 1e-2
    r = fun(x)

    def cost(res):
        a = np.abs(res)
        return float(np.sum(np.where(a < 0.05, 0.5 * a * a, 0.05 * (a - 0.025))))

    best = cost(r)
    for _ in range(iterations):
        w = np.sqrt(np.minimum(1.0, 0.05 / np.maximum(np.abs(r), 1e-12)))
        jac = np.empty((r.size, x.size))
        for j in range(x.size):
            step = np.zeros_like(x)
            step[j] = 1e-4
            jac[:, j] = (fun(x + step) - r) / 1e-4
        jw, rw = jac * w[:, None], r * w
        a, g = jw.T @ jw, jw.T @ rw
        improved = False
        for _ in range(8):
            try:
                dx = -np.linalg.solve(a + lam * np.diag(np.diag(a) + 1e-9), g)
            except np.linalg.LinAlgError:
                lam *= 10
                continue
            r_new = fun(x + dx)
            c_new = cost(r_new)
            if c_new < best:
                x, r, best, lam, improved = x + dx, r_new, c_new, max(lam / 3, 1e-7), True
                break
            lam *= 10
        if not improved or float(np.max(np.abs(dx))) < 1e-6:
            break
    return x


def _informed(names: tuple[str, ...], residuals, start: dict[str, float]) -> tuple[str, ...]:
    """The parameters some residual responds to: each is moved to both ends of its search
    range (every other one at its start) and kept if any residual changes."""
    x0 = _to_x(names, start)
    r0 = residuals(x0, names)
    kept = []
    for j, name in enumerate(names):
        for end in (-6.0, 6.0):
            x = x0.copy()
            x[j] = end
            if np.max(np.abs(residuals(x, names) - r0), initial=0.0) > 1e-9:
                kept.append(name)
                break
    return tuple(kept)


def fit_class(
    observations: list[Observations],
    *,
    base: dict[str, float] | None = None,
    use_scipy: bool = True,
    also: dict[str, float] | None = None,
) -> dict[str, float]:
    """The fitted parameters of one kernel class over ``observations`` (all of one kind and
    dtype), each device weighted equally. ``also``: a third start (a profile's current values
    of the class, for a refit after a formula change), the best of the three kept."""
    # the search predicts the same rows at every step, only the parameters changing: a GEMM's
    # candidate kernels are taken once (speed only, gemm_time.kept_shapes)
    # scipy loaded before BLAS is limited: its own OpenBLAS (the SVD of least_squares' steps)
    # is limited only if loaded when the limit is set
    least_squares = _scipy_least_squares() if use_scipy else None
    with kept_shapes(), _blas_one_thread():
        return _fit_class(observations, base=base, least_squares=least_squares, also=also)


def _scipy_least_squares():
    """``scipy.optimize.least_squares``, or None without scipy (the fit then runs its own
    Levenberg-Marquardt)."""
    try:
        # deferred: scipy is optional; without it the fit runs its own Levenberg-Marquardt
        from scipy.optimize import least_squares
    except ImportError:
        return None
    return least_squares


#: thread settings a user may give BLAS; one set keeps BLAS as the user said
_USER_THREAD_VARS = (
    "OPENBLAS_NUM_THREADS",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "BLIS_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
)


def _blas_one_thread() -> contextlib.AbstractContextManager:
    """BLAS on one thread while a class is fitted (speed only: the same values to 5-6
    significant digits). The search's linear algebra is the SVD of a tall, narrow Jacobian
    (1,500-12,000 rows, a few columns): OpenBLAS's second thread only waits on it. On the
    2-core machine a 1,500 x 8 SVD took 12 ms of CPU on two threads and 0.3 ms on one
    (12,000 rows: 47 vs 3.7 ms); a class fit 21.1 s of CPU on two threads, 7.2 s on one.
    Done by threadpoolctl (the ``fit`` extra) where it is installed; without it BLAS keeps
    its own threads (set ``OPENBLAS_NUM_THREADS=1`` before the run for the same speed). A
    thread count the user set in the environment is kept as given."""
    if any(os.environ.get(v) for v in _USER_THREAD_VARS):
        return contextlib.nullcontext()
    try:
        # deferred: threadpoolctl is optional (the fit extra), as scipy is
        from threadpoolctl import threadpool_limits
    except ImportError:
        return contextlib.nullcontext()
    return threadpool_limits(limits=1, user_api="blas")


def _fit_class(
    observations: list[Observations],
    *,
    base: dict[str, float] | None,
    least_squares,
    also: dict[str, float] | None,
) -> dict[str, float]:
    """:func:`fit_class`, its GEMM candidates kept (``least_squares``: scipy's, or None for
    the numpy Levenberg-Marquardt)."""
    if not observations:
        raise InvalidArgumentError("observations", "nothing to fit")
    kind, dtype = observations[0].batch.kind, observations[0].batch.dtype
    names = fit_params(kind, dtype)
    start = dict(base or default_params(kind))
    parts = []
    for obs in observations:
        sec = np.asarray(obs.seconds, dtype=np.float64)
        ok = np.isfinite(sec) & (sec > 0)
        idx = _subsample(int(ok.sum()), _MAX_ROWS)
        keep = np.flatnonzero(ok)[idx]
        fig = device_figures(load_hardware(obs.device))
        batch, log_meas = obs.batch.take(keep), np.log(sec[keep])
        # predicted in slices of rows (speed only: the same residuals, in the same order)
        for i in range(0, max(len(keep), 1), _SLICE_ROWS):
            at = slice(i, i + _SLICE_ROWS)
            parts.append((batch.take(at), fig, log_meas[at], obs.device))
    devices = {p[3] for p in parts}
    rows_per_device = {d: sum(len(p[0]) for p in parts if p[3] == d) for d in devices}
    weights = [
        math.sqrt(1.0 / rows_per_device[p[3]] * max(rows_per_device.values())) for p in parts
    ]

    def residuals(x: np.ndarray, which: tuple[str, ...] | None = None) -> np.ndarray:
        prm = _from_x(which or names, x, start)
        out = []
        for (batch, fig, log_meas, _), w in zip(parts, weights):
            pred = kernel_terms(batch, fig, prm)["seconds"]
            out.append(w * (np.log(np.maximum(pred, 1e-12)) - log_meas))
        return np.concatenate(out)

    # a parameter no row of these observations responds to (a term of a kernel the fitted
    # devices do not run, e.g. the non-splitting MLA decode kernel's overlap in an H100-only
    # fit) keeps its starting value: a search would leave it wherever the start that won put
    # it, and that value would be read as a fit when another device is predicted
    names = _informed(names, residuals, start)
    if not names:
        return {}

    def robust_cost(x: np.ndarray) -> float:
        r = np.abs(residuals(x))
        return float(np.sum(np.sqrt(1.0 + (r / 0.05) ** 2) - 1.0))

    # two starts: the given values, and the middle of every parameter's range; the better wins
    # (and ``also``'s values, where given)
    starts = [_to_x(names, start), np.zeros(len(names))]
    if also:
        starts.append(_to_x(names, {**start, **also}))
    best_x, best_cost = None, math.inf
    for x0 in starts:
        if least_squares is not None:
            x = least_squares(
                residuals, x0, loss="soft_l1", f_scale=0.05, x_scale=1.0, max_nfev=300
            ).x
        else:
            x = _lm(residuals, x0)
        cost = robust_cost(x)
        if cost < best_cost:
            best_x, best_cost = x, cost
    x = best_x
    fitted = _from_x(names, x, start)
    return {n: float(f"{fitted[n]:.6g}") for n in names}


def fit_profile(
    obs: list[Observations],
    *,
    name: str = "custom",
    use_scipy: bool = True,
    notes: Iterable[str] = (),
    progress=None,
    engine: str = DEFAULT_ENGINE,
    starts: dict[str, dict[str, float]] | None = None,
    held: Profile | None = None,
) -> Profile:
    """Fit a profile on kernel observations (:func:`mlacalc.measured.calibrate.calibrate` gathers
    them from measured sets). Records what it was fitted on and the residuals per device and
    kernel class, with the device's own fit and the pooled one. ``starts``: per class key, a
    further start of its fit (:func:`fit_class`'s ``also``). ``held``: a profile whose classes
    are not fitted but scored as they stand (pooled and per device, its values), so a class
    whose parameters were set one at a time gets the residuals of what it holds."""
    starts = starts or {}
    by_class: dict[str, list[Observations]] = {}
    for o in obs:
        key = class_key(o.batch.kind, o.batch.dtype, o.batch.variant)
        by_class.setdefault(key, []).append(o)
    classes: dict[str, dict[str, float]] = {}
    devices: dict[str, dict[str, dict[str, float]]] = {}
    residuals: dict[str, dict[str, dict[str, float]]] = {}
    for key, group in sorted(by_class.items()):
        if progress:
            progress(f"fitting {key} on {len(group)} table(s)")
        keep = held is not None and key in held.classes
        if keep:
            pooled = dict(held.classes[key])
        else:
            pooled = fit_class(group, use_scipy=use_scipy, also=starts.get(key))
        classes[key] = pooled
        kind = group[0].batch.kind
        for device in sorted({o.device for o in group}):
            mine = [o for o in group if o.device == device]
            if keep:
                own = dict(held.devices.get(device, {}).get(key, pooled))
            elif len({o.device for o in group}) == 1:
                own = pooled
            else:
                start = default_params(kind)
                start.update(pooled)
                own = fit_class(mine, base=start, use_scipy=use_scipy)
            devices.setdefault(device, {})[key] = own
            pred_own, pred_pool, meas = [], [], []
            for o in mine:
                fig = device_figures(load_hardware(o.device))
                p_own, p_pool = default_params(kind), default_params(kind)
                p_own.update(own)
                p_pool.update(pooled)
                pred_own.append(kernel_terms(o.batch, fig, p_own)["seconds"])
                pred_pool.append(kernel_terms(o.batch, fig, p_pool)["seconds"])
                meas.append(np.asarray(o.seconds, dtype=np.float64))
            stats = error_stats(np.concatenate(pred_own), np.concatenate(meas))
            stats["pooled_median_abs_error"] = error_stats(
                np.concatenate(pred_pool), np.concatenate(meas)
            )["median_abs_error"]
            residuals.setdefault(device, {})[key] = stats
    extra = [n for device in sorted({o.device for o in obs}) for n in fallback_notes(device)]
    return Profile(
        name=name,
        classes=classes,
        devices=devices,
        fitted_on=tuple(fitted_record(obs)),
        residuals=residuals,
        notes=tuple(notes) + tuple(extra),
        engine=engine,
    )


def fitted_record(obs: list[Observations]) -> list[dict]:
    """A profile's ``fitted_on`` for a fit on ``obs``: per device, the rows of each table the
    classes were fitted on (summed over classes) and the files the tables came from."""
    fitted_on = []
    for device in sorted({o.device for o in obs}):
        tables: dict[str, int] = {}
        for o in obs:
            if o.device == device:
                tables[o.table] = tables.get(o.table, 0) + len(o.batch)
        # where each table came from, without the local folders above the system folder
        sources = sorted(
            {"/".join(Path(o.source).parts[-5:]) for o in obs if o.device == device and o.source}
        )
        entry = {"device": device, "tables": tables, "sources": sources}
        hw = load_hardware(device)
        if hw.kind != "gpu":  # a CPU's fit: no GPU may borrow it
            entry["kind"] = hw.kind
            # which CPU and threads it ran: a plan or validate on another CPU is warned
            found = measured_device_of(device)
            if found.get("name"):
                entry["device_name"] = str(found["name"])
            if found.get("threads") is not None:
                entry["threads"] = found["threads"]
        fitted_on.append(entry)
    return fitted_on


def fallback_notes(device: str) -> list[str]:
    """The notes a profile fitted on ``device`` carries for the figures its catalogue entry
    lacks or states as assumed (``"<device>: <figure> = <value> (<source>)"``)."""
    return [f"{device}: {fb}" for fb in device_figures(load_hardware(device)).fallbacks]
