"""Measured sets as fitting observations, and row predictions of mapped tables.

A measured table mapped onto kernels (:func:`mlacalc.measured.mapping.map_table`) gives, per row,
the kernels the row timed. A table whose rows each hold one main kernel (every GEMM, attention,
MLA, MoE and collective table) is fitted on: its main kernel class is fitted against the
measured time less the predicted time of the row's minor kernels (quantize, element-wise).
Composite rows (the MLA module tables: projections, norms, attention) are never fitted on;
they check the fitted kernels together.
"""

from __future__ import annotations

import csv
import math
import os
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from mlacalc.hardware.catalogue import HardwareSpec, load_hardware, measured_device_name
from mlacalc.measured.dsv4_modules import RAGGED_CORE, shared_kernel_tables
from mlacalc.measured.mapped import distinct_kernels
from mlacalc.measured.mapping import MappedTable, map_table
from mlacalc.measured.msa_modules import CORE_VARIANTS
from mlacalc.measured.tables import (
    MeasuredSet,
    MeasuredTable,
    bench_sidecar,
    gpu_device,
    load_measured,
)
from mlacalc.timemodel.fit import Observations
from mlacalc.timemodel.kernel_time import predict_batch, roofline_seconds
from mlacalc.timemodel.mla_time import GEN_SPARSE_VARIANT, GEN_SPARSE_WIDE_VARIANT, WALK_VARIANT
from mlacalc.timemodel.profile import Profile, load_profile, shipped_profiles
from mlacalc.timemodel.terms import class_key
from mlacalc.words.dtypes import DTYPE_BITS
from mlacalc.words.errors import ConfigError
from mlacalc.words.kernels import (
    KERNEL_SET_SHAPE,
    OWN_DECODE_TOPK_CODE,
    ROW_PROMPT_SHORT_CODE,
    ROW_PROMPT_TOPK_CODE,
    ROW_PROMPT_WIDE_CODE,
    TOPK_KERNEL_VARIANTS,
    KernelBatch,
)

__all__ = [
    "MINOR_KINDS",
    "NOT_CALLS",
    "kernel_set_device",
    "kernel_set_warnings",
    "observations_and_mapped",
    "observations_of",
    "predict_mapped",
    "read_kernel_set",
    "residual_observations",
]

#: Tables whose rows are not kernel calls and are never fitted on. (``computescale_perf`` is a
#: difference of two timings, dynamic minus static quantization: the one kernel more a dynamic
#: quantization launches, the absolute-maximum reduction. It is fitted as that kernel's own
#: class, the ``amax`` variant of ``quantize``, which no other table and no step uses.)
NOT_CALLS: tuple[str, ...] = ()

#: Kernel classes that ride along with a row's main kernel and are predicted, not fitted.
MINOR_KINDS = ("elementwise", "quantize")


def predict_mapped(
    mapped: Any,
    hardware: HardwareSpec | str | None = None,
    profile: Profile | str | os.PathLike | None = None,
) -> np.ndarray:
    """Predicted seconds of every row of a mapped table (the sum of its kernels, at least the
    row's host floor where it has one: a device the profile was not fitted on takes a fitted
    device's, ``MappedTable.host_floor_for``); NaN where the row is not predicted.
    ``hardware`` defaults to the table's device."""
    hw = load_hardware(hardware if hardware is not None else mapped.table.device)
    prof = load_profile(profile)
    n = len(mapped.table)
    total = np.zeros(n)
    for part in mapped.parts:
        b, inverse = distinct_kernels(part.batch)
        t = np.asarray(predict_batch(b, hw, prof), dtype=np.float64)[inverse]
        total += np.bincount(part.rows, weights=t, minlength=n)
    floored = mapped.with_host_floor(total, prof.fitted_devices if prof is not None else ())
    return np.where(mapped.modelled, floored, np.nan)


def _mapped_observations(mapped: Any, profile: Profile | None) -> list:

    table = mapped.table
    modelled = np.asarray(mapped.modelled, dtype=bool)
    n = len(table)
    if table.table in NOT_CALLS or not mapped.parts:
        return []
    main = [p for p in mapped.parts if p.batch.kind not in MINOR_KINDS] or list(mapped.parts)
    counts = np.bincount(np.concatenate([p.rows for p in main]), minlength=n)
    if np.any(counts[modelled] != 1):
        return []  # composite rows (several main kernels): validated, not fitted
    hw = load_hardware(table.device)
    minor = np.zeros(n)
    for p in mapped.parts:
        if all(p is not q for q in main):
            minor += np.bincount(p.rows, weights=predict_batch(p.batch, hw, profile), minlength=n)
    out = []
    for p in main:
        keep = modelled[p.rows]
        if not keep.any():
            continue
        rows = p.rows[keep]
        seconds = table.seconds[rows] - minor[rows]
        ok = seconds > 0
        if not ok.any():
            continue
        out.append(
            Observations(
                device=table.device,
                table=table.table,
                batch=p.batch.take(np.flatnonzero(keep)[ok]),
                seconds=seconds[ok],
                source=table.source,
            )
        )
    return out


#: A composite row fits the one kernel its single-kernel tables leave unfitted only where that
#: kernel's share of the row (the row's time less the others' predictions) is at least this:
#: below it the other kernels' errors, a few per cent of the row, would be the residual's tens
#: of per cent (a rule of the residual's arithmetic, not fitted to a table).
RESIDUAL_SHARE = 0.25

#: Variants whose residual share is lower than :data:`RESIDUAL_SHARE`, chosen: TensorRT-LLM's
#: decode top-k (``topk_trtllm_decode``) is 14-17% of an H100 decode row past the top-k at the
#: median (41 us at one sequence to 418 us at 1,024; the walk is most of the row), so at 25%
#: only the 2,049-key rows fit it there (docs/time-model.md, "TensorRT-LLM's decode top-k").
#: TensorRT-LLM-gen's sparse MLA kernel (``sparse_gen``) the same: under a quarter of a B200
#: prompt row of up to about 1,000 tokens (the projections and the indexer are the rest), so
#: at a quarter only rows of thousands of tokens fitted it, and their fixed cost (24 us a
#: call) put the rows of up to 128 tokens 12-30% over at the median.
#: vLLM's DeepSeek-V4 CSA prompt top-k (``topk_vllm_prompt``) too: at a quarter its fit took
#: only the rows where the stand-in was shortest (1,471 of 5,840 on B200) and put the table
#: +11% over (13.2% / 35.5% fitted); at a tenth (2,698 rows) 11.5% / 26.2%.
#: Its two other paths by the call's longest row (``cost.compressed.ROW_TOPK_SHORT_KEYS``) alike.
RESIDUAL_SHARES = {
    "topk_trtllm_decode": 0.10,
    "sparse_gen": 0.10,
    "topk_vllm_prompt": 0.10,
    "topk_vllm_prompt_short": 0.10,
    "topk_vllm_prompt_wide": 0.10,
}


#: The sparse MLA kernel's class (``mla_decode`` variant ``sparse``): in a profile without it
#: (vLLM's, TensorRT-LLM's: only SGLang publishes a table of it, FlashMLA's sparse prefill,
#: ``glm5_dsa_attn_module_perf``) the plain MLA decode class, fitted on the engine's dense MLA
#: decode, timed the DSA module rows' sparse cores (docs/time-model.md, "Host floor of a module
#: launched eagerly"); a refit of the class fits it on those rows' residuals
SPARSE_CORE = "sparse"

#: kernel variants that only composite rows time, fitted on their residuals as an unfitted kind
RESIDUAL_VARIANTS = frozenset(
    {
        *CORE_VARIANTS.values(),
        RAGGED_CORE,
        WALK_VARIANT,
        SPARSE_CORE,
        GEN_SPARSE_VARIANT,
        GEN_SPARSE_WIDE_VARIANT,
        TOPK_KERNEL_VARIANTS[OWN_DECODE_TOPK_CODE - 1],
        TOPK_KERNEL_VARIANTS[ROW_PROMPT_TOPK_CODE - 1],
        TOPK_KERNEL_VARIANTS[ROW_PROMPT_SHORT_CODE - 1],
        TOPK_KERNEL_VARIANTS[ROW_PROMPT_WIDE_CODE - 1],
    }
)

#: A host-floored row (``MappedTable.host_s``) gives a residual only where its time is at least
#: this many times its floor: under the rows' ``max(kernels, floor)`` form such a row is its
#: kernels' time, the floor at most 0.8 of it; nearer the floor a row mixes the host's dispatch
#: into its kernels' time. Chosen among the values tried, not fitted: 1.0 let those rows in
#: (vLLM's H100 walk, ``mla_time.WALK_VARIANT``, fitted 11.9% / 72% median / p90 on its rows,
#: 9.7% / 36% at 1.25); 1.5 and 2.0 leave out rows the fit then extrapolates to (TensorRT-LLM's
#: H100 prompt module 4.6% at 1.25, 4.7% and 5.3%). Before, no floored row gave a residual.
FLOOR_MARGIN = 1.25


def _residual_variant(part: Any, fitted: Any) -> bool:
    """Whether ``part`` is a kernel variant only composite rows time (MiniMax-M3's block-sparse
    kernels, :data:`~mlacalc.measured.msa_modules.CORE_VARIANTS`) and ``fitted`` lacks it."""
    b = part.batch
    return b.variant in RESIDUAL_VARIANTS and class_key(b.kind, b.dtype, b.variant) not in fitted


def residual_observations(mapped: Any, profile: Profile, fitted: Any) -> list:
    """Fitting observations a composite table's rows give of a kernel kind no single-kernel
    table times (``fitted``: the class keys already fitted; a kind with any of them is fitted,
    its other dtypes and variants borrowing as a prediction does): for each row whose main
    kernels hold exactly one kernel of an unfitted kind, that kernel against the row's time less the
    predicted time (``profile``) of every other kernel of the row, where that residual is at
    least :data:`RESIDUAL_SHARE` of the row. vLLM publishes its MLA attention only inside the
    whole-module tables; this is how its MLA classes are fitted. A kernel variant no
    single-kernel table times (:data:`RESIDUAL_VARIANTS`) is open too while ``fitted`` lacks
    its class, though its kind is fitted: MiniMax-M3's block-sparse cores."""
    table = mapped.table
    n = len(table)
    modelled = np.asarray(mapped.modelled, dtype=bool)
    # a minor kind's variant no single-kernel table times (TensorRT-LLM's decode top-k) is open too
    main = [
        p
        for p in mapped.parts
        if p.batch.kind not in MINOR_KINDS or p.batch.variant in RESIDUAL_VARIANTS
    ]
    if not main or not modelled.any():
        return []
    counts = np.bincount(np.concatenate([p.rows for p in main]), minlength=n)
    if not np.any(counts[modelled] > 1):
        return []  # single-kernel rows are fitted directly
    hw = load_hardware(table.device)
    fitted_kinds = {key.split(":", 1)[0] for key in fitted}
    open_parts = [
        p for p in main if p.batch.kind not in fitted_kinds or _residual_variant(p, fitted)
    ]
    if not open_parts:
        return []
    n_open = np.bincount(np.concatenate([p.rows for p in open_parts]), minlength=n)
    others = np.zeros(n)
    for p in mapped.parts:
        if all(p is not q for q in open_parts):
            others += np.bincount(p.rows, weights=predict_batch(p.batch, hw, profile), minlength=n)
    call = mapped.call_for(profile.fitted_devices if profile is not None else ())
    residual = table.seconds - others - (0.0 if call is None else call)
    usable = modelled & (n_open == 1)
    if mapped.host_s is not None:  # a row near its host floor: its time is not its kernels' sum
        floor = np.where(np.isfinite(mapped.host_s), mapped.host_s, 0.0)
        usable &= table.seconds >= FLOOR_MARGIN * floor
    out = []
    for p in open_parts:
        share = RESIDUAL_SHARES.get(p.batch.variant, RESIDUAL_SHARE)
        rows = usable[p.rows] & (residual[p.rows] >= share * table.seconds[p.rows])
        keep = np.flatnonzero(rows)
        if keep.size == 0:
            continue
        out.append(
            Observations(
                device=table.device,
                table=table.table,
                batch=p.batch.take(keep),
                seconds=residual[p.rows[keep]],
                source=table.source,
            )
        )
    return out


def kernel_set_device(meta: dict, json_path: Path) -> str:
    """The catalogue device a ``calibrate`` run was taken on (matched by the GPU's name, e.g.
    ``NVIDIA H100 80GB HBM3`` -> ``H100-SXM``), else the run's own measured ceilings, named as
    ``-H PATH`` names them (``measured:<the sidecar's stem>``, which
    :func:`mlacalc.load_hardware` then reads): a profile fitted on it names that device, not
    the path as typed."""
    device = meta.get("device")
    device = device if isinstance(device, dict) else {}
    name = str(device.get("name", "")).upper()
    if device.get("kind") == "cuda":
        return gpu_device(name) or measured_device_name(json_path)
    return measured_device_name(json_path)


_FIX = "pass the files mlacalc bench --preset calibrate wrote"


def _cell(text: Any, source: str, line: int, column: str) -> float:
    """A number of a kernel-set row: an empty cell is 0; ``nan`` and ``inf`` are numbers (the
    fit leaves their row out, counted); text that is no number is one line naming the file, line
    and column (it was read as NaN and reported as a time not finite)."""
    if text in (None, ""):
        return 0.0
    try:
        return float(text)
    except (TypeError, ValueError):
        raise ConfigError(
            f"line {line}: {str(text)[:20]!r} is not a number",
            source=source,
            field=column,
            fix=_FIX,
        ) from None


#: The shape columns a kernel set's rows of each kind need (those ``mlacalc bench --preset
#: calibrate`` writes for it): a rows file without one of them for a kind it holds is refused,
#: naming the file and the column (a GEMM set without ``m`` was fitted and validated, its
#: shapes read as missing).
KIND_SHAPE_COLUMNS: dict[str, tuple[str, ...]] = {
    "gemm": ("m", "n", "k"),
    "attention_decode": ("batch", "q_len", "kv_len", "n_heads", "n_kv", "head_dim_qk",
                         "head_dim_v"),
    "attention_prefill": ("batch", "q_len", "kv_len", "n_heads", "n_kv", "head_dim_qk",
                          "head_dim_v"),
    "elementwise": ("elements",),
}  # fmt: skip


@cache
def _kernel_dtypes() -> frozenset[str]:
    """The dtypes a kernel-set row may name: mlacalc's dtypes and those of the shipped profiles'
    kernel classes (``fp8_block``, ``nvfp4``, ``w4a16`` ...)."""
    out = set(DTYPE_BITS)
    for name in shipped_profiles():
        out |= {key.split(":")[1] for key in load_profile(name).classes if ":" in key}
    return frozenset(out)


def _kernel_rows(rows_path: Path) -> list[tuple[int, dict]]:
    """The ``ok`` rows of a kernel set's CSV with their line numbers; an empty file, a file of
    its header alone, one without an ``ok`` row, a missing column or a dtype mlacalc does not
    know is one line naming the file (and line and column)."""
    source = str(rows_path)
    try:
        with open(rows_path, newline="", encoding="utf-8") as fh:
            reader = csv.DictReader(fh)
            names = list(reader.fieldnames or [])
            # each row's line in the file (a quoted cell may span lines: the record's last)
            rows = [(reader.line_num, r) for r in reader]
    except OSError as exc:
        raise ConfigError(f"cannot be read ({exc.strerror or exc})", source=source) from None
    except (UnicodeDecodeError, csv.Error) as exc:
        raise ConfigError(
            f"is not a CSV text file ({str(exc)[:80]})", source=source, fix=_FIX
        ) from None
    if not names:
        raise ConfigError("is empty (no header, no rows)", source=source, fix=_FIX)
    for need in ("kind", "dtype", "flops", "bytes", "status", "median_s"):
        if need not in names:
            raise ConfigError(
                "is not a calibrate rows file: the column is missing",
                source=source,
                field=need,
                fix=_FIX,
            )
    if not rows:
        raise ConfigError("has no rows (its header alone)", source=source, fix=_FIX)
    ok = [(i, r) for i, r in rows if r.get("status") == "ok"]
    if not ok:
        said = ", ".join(sorted({str(r.get("status"))[:20] for _, r in rows}))
        raise ConfigError(
            f"has no row with status ok ({len(rows)} row(s), status {said})",
            source=source,
            fix=_FIX,
        )
    known = _kernel_dtypes()
    numbers = [n for n in ("flops", "bytes", "calls", "median_s", *KERNEL_SET_SHAPE) if n in names]
    for i, r in ok:  # in the file's order: the first bad cell is the one named
        for name in numbers:
            _cell(r.get(name), source, i, name)
        if str(r.get("dtype")) not in known:
            raise ConfigError(
                f"line {i}: {str(r.get('dtype'))[:20]!r} is not a dtype mlacalc knows (one of "
                f"{', '.join(sorted(known))})",
                source=source,
                field="dtype",
                fix=_FIX,
            )
    for kind in sorted({str(r.get("kind")) for _, r in ok}):
        for need in KIND_SHAPE_COLUMNS.get(kind, ()):
            if need not in names:
                raise ConfigError(
                    f"has {kind} rows but no {need} column (the shape of a {kind} row: "
                    f"{', '.join(KIND_SHAPE_COLUMNS[kind])})",
                    source=source,
                    field=need,
                    fix=_FIX,
                )
    return ok


#: A run's GEMM rows may beat its own measured matmul ceiling of their dtype by at most this
#: factor before the ceilings are said to be wrong (:func:`kernel_set_warnings`). The runs
#: seen beat theirs by 0.99-1.03x (the H200 runs 0.99 and 1.02, an idle 2-core CPU run 1.03);
#: a CPU run whose ceilings were measured under load, 3.0x.
CEILING_MARGIN = 1.5

#: The start of each such warning (a profile's note, a validation's warning).
CEILING_NOTE = "ceilings: "


def kernel_set_warnings(path: str | os.PathLike) -> list[str]:
    """Warnings about a ``calibrate``-preset kernel set's own measured ceilings: a dtype whose
    GEMM rows ran faster than :data:`CEILING_MARGIN` times the run's matmul ceiling of that
    dtype (the ceilings were measured under load, or on another device), with what that does:
    a device the catalogue does not name is predicted (validate) and fitted (calibrate) on
    these ceilings, so its GEMMs read that much too slow; a catalogued GPU is predicted on the
    catalogue's figures, the ceilings unused."""
    p, meta = bench_sidecar(path)
    if meta.get("preset") != "calibrate":
        return []
    peaks = meta.get("ceilings", {}).get("matmul_flops_per_s", {})
    best: dict[str, float] = {}
    source = str(p.parent / str(meta["rows_file"]))
    rows = _kernel_rows(p.parent / str(meta["rows_file"]))
    short = rows_short_warning(meta, Path(source), len(rows), "validate and calibrate use")
    for i, r in rows:
        if r.get("kind") != "gemm":
            continue
        flops, t = (
            _cell(r.get("flops"), source, i, "flops"),
            _cell(r.get("median_s"), source, i, "median_s"),
        )
        if math.isfinite(flops) and math.isfinite(t) and t > 0 and flops > 0:
            dtype = str(r.get("dtype"))
            best[dtype] = max(best.get(dtype, 0.0), flops / t)
    device = kernel_set_device(meta, p)
    out = [short] if short else []
    for dtype, rate in sorted(best.items()):
        peak = peaks.get(dtype)
        if not isinstance(peak, (int, float)) or peak <= 0 or rate <= CEILING_MARGIN * peak:
            continue
        ratio = rate / peak
        effect = (
            f"predicted on the catalogue's {device}, whose figures validate uses: these "
            "ceilings are not used"
            if not device.startswith("measured:")
            else f"validate predicts its {dtype} GEMMs on these ceilings, up to {ratio:.1f}x too "
            "slow, and calibrate fits its GEMM class against that peak"
        )
        out.append(
            f"{CEILING_NOTE}{p.name}: its {dtype} GEMM rows ran at up to "
            f"{rate / 1e12:.3g} TFLOP/s, {ratio:.1f}x its own measured {dtype} matmul ceiling "
            f"({peak / 1e12:.3g} TFLOP/s; "
            f"over {CEILING_MARGIN}x is no ceiling): the ceilings were measured under load or "
            f"not on this device; {effect}; measure again on an idle machine"
        )
    return out


#: Every row of a set timed over this many times its roofline bound on the run's own ceilings
#: (launch latency included) is no run in seconds (:func:`time_unit_problem`): the runs seen
#: have their fastest row within 0.04x-1.1x of it (CPU and H200 kernel sets, the CPU layer
#: sets); the same rows written in milliseconds, 38x.
UNIT_FACTOR = 20.0

#: The ratios to the bound a run in milliseconds (x 1,000) and one in microseconds (x 10^6) can
#: show, from the 0.04x-1.1x of the runs in seconds widened to 0.02x-2x: every ratio within one
#: of them names that unit; a set with ratios outside both (between 2,000x and 20,000x, or over
#: 2 x 10^6) names both units, since no cut tells them apart
UNIT_RATIOS = {"milliseconds": (20.0, 2e3), "microseconds": (2e4, 2e6)}


#: what :func:`time_unit_problem`'s bound is, by default (a kernel set's)
KERNEL_BOUND = "its roofline bound on the run's own ceilings and launch latency"


def time_unit_problem(measured: Any, bound: Any, against: str = KERNEL_BOUND) -> str:
    """Words for a set whose every time is :data:`UNIT_FACTOR` or more times its bound (the
    times look like milliseconds or microseconds: the one :data:`UNIT_RATIOS` holds every
    ratio in, else both), else ``""``; three rows at least. ``against`` names the bound."""
    ratio = np.asarray(measured, dtype=np.float64) / np.asarray(bound, dtype=np.float64)
    ratio = ratio[np.isfinite(ratio) & (ratio > 0)]
    if len(ratio) < 3 or ratio.min() <= UNIT_FACTOR:
        return ""
    mid = float(np.median(ratio))
    fits = [u for u, (lo, hi) in UNIT_RATIOS.items() if lo <= ratio.min() and ratio.max() <= hi]
    unit = fits[0] if len(fits) == 1 else "milliseconds or microseconds"
    return (
        f"every row's time is {ratio.min():,.0f}x-{ratio.max():,.0f}x (median {mid:,.0f}x) "
        f"{against}: the times look like {unit}, not seconds"
    )


#: The start of a rows file's warning (a profile's note calibrate warns, a validation's warning).
ROWS_NOTE = "rows: "


def rows_short_warning(meta: dict, rows_path: Path, read: int, does: str) -> str:
    """Words for a rows file with fewer ``ok`` rows than its sidecar counts (``counts.ok``):
    cut short or edited; ``does`` says what is done with the rows read."""
    counted = (meta.get("counts") or {}).get("ok")
    if isinstance(counted, bool) or not isinstance(counted, int) or read >= counted:
        return ""
    return (
        f"{ROWS_NOTE}{rows_path}: {read:,} ok rows read where its sidecar counts {counted:,} "
        f"(counts.ok): the rows file was cut short or edited; {does} the {read:,} read "
        "(restore the file, or run mlacalc bench again)"
    )


def _check_time_unit(out: list, meta: dict, rows_path: Path) -> None:
    """Refuse a kernel set whose every time is many times its bound (:func:`time_unit_problem`),
    naming the rows file and ``median_s``."""
    if not out:
        return
    hw = load_hardware(out[0].device)
    latency = float((meta.get("ceilings") or {}).get("launch_latency_s") or 0.0)
    measured, bound = [], []
    for o in out:
        b = o.batch
        t = roofline_seconds(b.flops, b.bytes, hw, b.dtype) * b.calls + latency * b.calls
        measured.append(np.asarray(o.seconds, dtype=np.float64))
        bound.append(np.asarray(t, dtype=np.float64))
    said = time_unit_problem(np.concatenate(measured), np.concatenate(bound))
    if said:
        raise ConfigError(
            said,
            source=str(rows_path),
            field="median_s",
            fix="write median_s in seconds, as mlacalc bench does",
        )


def read_kernel_set(path: str | os.PathLike) -> list:
    """Fitting observations of a microbenchmark ``calibrate`` run (``mlacalc bench --preset
    calibrate``): one per kernel class, rows with status ``ok``. A cell that is no number, a
    dtype mlacalc does not know, an empty file or one with no ``ok`` row is one line naming the
    file (and line and column); a time that is NaN, infinite, zero or negative is a number the
    fit leaves out, counted by reason."""
    p, meta = bench_sidecar(path)
    if meta.get("preset") != "calibrate":
        raise ConfigError(
            "is a microbenchmark run of attention layers, not of the kernel vocabulary",
            source=str(p),
            field="preset",
            fix="run mlacalc bench --preset calibrate, or validate it instead",
        )
    rows_path = p.parent / str(meta["rows_file"])
    device = kernel_set_device(meta, p)
    groups: dict[tuple[str, str], list[tuple[int, dict]]] = {}
    for i, r in _kernel_rows(rows_path):
        # a short row reads None for its missing cells
        groups.setdefault((str(r["kind"]), str(r["dtype"])), []).append((i, r))
    measured_peaks = meta.get("ceilings", {}).get("matmul_flops_per_s", {})
    for kind, dtype in groups:
        # a device read from the sidecar (one the catalogue does not name) has the peaks its
        # run measured: without one for a GEMM's dtype, the fit would take another dtype's
        if device.startswith("measured:") and kind == "gemm" and dtype not in measured_peaks:
            raise ConfigError(
                f"has {dtype} GEMM rows but no {dtype} matmul ceiling for its device, which the "
                "catalogue does not name",
                source=str(p),
                field="ceilings.matmul_flops_per_s",
                fix=f"measure again with mlacalc bench --preset calibrate (it measures the {dtype} "
                f"ceiling), or leave the {dtype} rows out",
            )
    out = []
    for (kind, dtype), rs in sorted(groups.items()):

        def col(name: str, rs=rs) -> np.ndarray:
            return np.array(
                [_cell(r.get(name), str(rows_path), i, name) for i, r in rs], dtype=np.float64
            )

        given = [f for f in KERNEL_SET_SHAPE if any(r.get(f) not in (None, "") for _, r in rs)]
        shape = {f: col(f) for f in given}
        work, seconds = (col("flops"), col("bytes"), col("calls")), col("median_s")
        try:
            batch = KernelBatch(kind, dtype, *work, shape)
        except (KeyError, ValueError, TypeError) as exc:
            raise ConfigError(
                f"has a malformed row ({str(exc)[:80]})", source=str(rows_path)
            ) from None
        out.append(
            Observations(
                device=device,
                # a second dtype of a kind (the fp8 GEMMs of a bf16 run) is a table of its own
                table=f"calibrate:{kind}"
                + ("" if dtype == str(meta.get("dtype", dtype)) else f":{dtype}"),
                batch=batch,
                seconds=seconds,
                source=str(p),
                lines=tuple(i for i, _ in rs),
                lines_file=rows_path.name,
            )
        )
    _check_time_unit(out, meta, rows_path)
    return out


def observations_of(
    item: Any, profile: Profile | None = None, *, engine: str | None = None, progress=None
) -> list:
    """Fitting observations of a measured set: a path (or list of paths) that
    :func:`mlacalc.measured.tables.load_measured` reads (``engine``'s tables and the shared
    ones: see there), a measured set, a measured table or a mapped table; ``progress`` (a
    callable of one line) is told each table of a set as it is read."""
    if isinstance(item, MappedTable):
        return _mapped_observations(item, profile)
    if isinstance(item, MeasuredTable):
        return _mapped_observations(map_table(item), profile)
    if (
        isinstance(item, (str, os.PathLike))
        and Path(item).suffix.lower() in (".json", ".csv")
        and Path(item).is_file()
    ):
        side, _ = bench_sidecar(item)  # a CSV with no sidecar beside it: named
        # a run of attention layers has no kernel rows: refused by its preset, naming the file
        return read_kernel_set(side)
    return observations_and_mapped(item, engine, progress, profile)[0]


def observations_and_mapped(
    item: Any, engine: str | None = None, progress=None, profile: Profile | None = None
) -> tuple[list, list[MappedTable]]:
    """A measured set's (or a path's that :func:`mlacalc.measured.tables.load_measured`
    reads) fitting observations, as :func:`observations_of` gives them, and the set's own
    tables mapped (not the other engines' shared ones): each table read and mapped once."""
    tables: list[MeasuredTable] = []
    if not isinstance(item, MeasuredSet):
        # and the other engines' tables of a kernel this engine's modules run too (after the
        # paths are checked: b"x" or 5 is refused by name, not a TypeError of pathlib)
        loaded = load_measured(item, engine=engine)
        tables = shared_kernel_tables(item, engine)
        item = loaded
    out: list = []
    own: list[MappedTable] = []
    every = [*item.tables, *tables]
    for i, table in enumerate(every, 1):
        if progress:
            progress(f"table {i}/{len(every)}: {table.system} {table.table} ({len(table):,} rows)")
        try:
            mapped = map_table(table)
        except ConfigError:  # a table the mapping has no kernels for
            continue
        out += _mapped_observations(mapped, profile)
        if i <= len(item.tables):
            own.append(mapped)
    return out, own
