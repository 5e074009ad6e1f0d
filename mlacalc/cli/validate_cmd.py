"""`mlacalc validate`: predicted vs measured, per table and overall, or set by set."""

from __future__ import annotations

from typing import Any

import click

from mlacalc.cli.common import Section, emit, format_option, given, serving_engine_option, warn
from mlacalc.words.units import lines_words

_KEY_SKIP = (
    "table",
    "system",
    "row",
    "measured_s",
    "predicted_s",
    "error",
    "not_predicted",
    "op_name",
)


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:+.1f}%"


def _abs_pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _us(x: float | None) -> str:
    return "-" if x is None else f"{x * 1e6:,.2f}"


def _worst(records: list[dict], n: int) -> list[dict]:
    """The ``n`` predicted rows of largest |error|, largest first."""
    scored = [r for r in records if r.get("error") is not None]
    return sorted(scored, key=lambda r: -abs(r["error"]))[:n]


def _row_cells(recs: list[dict]) -> list[list]:
    cells = []
    for r in recs:
        shape = " ".join(f"{k}={r[k]}" for k in r if k not in _KEY_SKIP)
        cells.append(
            [
                r["row"],
                shape,
                _us(r["measured_s"]),
                _us(r["predicted_s"]),
                _pct(r["error"]),
                r["not_predicted"] or "",
            ]
        )
    return cells


def _rows_section(title: str, recs: list[dict]) -> Section:
    return Section(
        title,
        ["row", "shape", "measured (us)", "predicted (us)", "error", "not predicted"],
        _row_cells(recs),
        text_columns=(1, 5),
    )


def _measured_sections(v: Any, show_rows: bool, worst: int | None = None) -> list[Section]:
    rows = []
    for t in v.tables:
        s = t.summary()
        why = ", ".join(f"{k} {n}" for k, n in s["not_predicted_by_reason"].items())
        rows.append(
            [
                s["system"],
                s["table"],
                f"{s['rows']:,}",
                f"{s['predicted']:,}",
                # of the predicted rows, those predicted as no kernel (0 s, as measured):
                # outside the error figures
                f"{s['predicted_zero']:,}",
                f"{s['not_predicted']:,}",
                _abs_pct(s["median_abs_error"]),
                _pct(s["signed_median_error"]),
                _abs_pct(s["p90_abs_error"]),
                why or "-",
            ]
        )
    o = v.overall
    rows.append(
        [
            "all",
            "",
            f"{o['rows']:,}",
            f"{o['predicted']:,}",
            f"{sum(t.predicted_zero for t in v.tables):,}",
            f"{o['not_predicted']:,}",
            _abs_pct(o["median_abs_error"]),
            _pct(o["signed_median_error"]),
            _abs_pct(o["p90_abs_error"]),
            "",
        ]
    )
    flags = sorted({r for t in v.tables for r in t.rules if r.startswith("non_split_kv")})
    notes = "; ".join(["quirk rules: docs/measured-sets.md", *flags])
    if any(t.predicted_zero for t in v.tables):
        notes += (
            "\nof which 0 s: rows predicted as no kernel (0 s, as measured): counted as "
            "predicted, outside the error figures"
        )
    unmapped = {
        t.table: r.split(": ", 1)[-1]
        for t in v.tables
        for r in t.rules
        if r.startswith("not_mapped")
    }
    for table, why in sorted(unmapped.items()):
        notes += f"\nnot mapped: {table} ({why})"
    # a profile without a class for some kernels predicts them with the datasheet defaults:
    # say which tables, as their figures do not test a calibration
    lacking = [
        t
        for t in v.tables
        if "uncalibrated" in t.calibration and "plain roofline" not in t.calibration
    ]
    if lacking:
        names = ", ".join(sorted({t.profile for t in lacking if t.profile})) or v.profile
        notes += (
            f"\nuncalibrated kernel classes (no class in profile {names}; datasheet "
            f"defaults) in: {', '.join(f'{t.system} {t.table}' for t in lacking)}"
        )
    if v.profile_note:
        notes += "\nprofiles: " + v.profile_note.replace("\n", "\nprofiles: ")
    # the microbenchmark's rows are eager PyTorch, run by no serving engine: the engine is
    # named where GPU kernel tables are validated, and only for those
    bench = [t for t in v.tables if t.table == "bench"]
    if len(bench) == len(v.tables):
        whose = "eager PyTorch (the microbenchmark)"
    elif bench:
        whose = f"engine {v.engine} (kernel tables; the microbenchmark's rows: eager PyTorch)"
    else:
        whose = f"engine {v.engine}"
    out = [
        Section(
            f"{whose}: predicted ({v.profile}) vs measured; error = predicted / measured - 1",
            [
                "system",
                "table",
                "rows",
                "predicted",
                "of which 0 s",
                "not predicted",
                "median |error|",
                "signed median",
                "p90 |error|",
                "not predicted by reason",
            ],
            rows,
            note=notes,
            text_columns=(1, 9),
        )
    ]
    kinds = v.by_kind
    if len(kinds) > len(v.tables):  # some table split by its kernels' dtype
        out.append(_kind_section(kinds))
    for t in v.tables if worst or show_rows else ():
        recs = t.row_records()
        if worst:
            out.append(
                _rows_section(f"{t.system} {t.table}: {worst:,} worst rows", _worst(recs, worst))
            )
        if show_rows:
            out.append(_rows_section(f"{t.system} {t.table}: rows", recs))
    return out


def _kind_section(kinds: list[dict]) -> Section:
    """The errors by device and table kind (a table split by its main kernel's dtype)."""
    rows = [
        [
            k["device"],
            k["kind"],
            f"{k['rows']:,}",
            f"{k['not_predicted']:,}",
            _abs_pct(k["median_abs_error"]),
            _pct(k["signed_median_error"]),
            _abs_pct(k["p90_abs_error"]),
        ]
        for k in kinds
    ]
    return Section(
        "by table kind and dtype (each kind's rows pooled over its tables)",
        [
            "device",
            "kind",
            "rows",
            "not predicted",
            "median |error|",
            "signed median",
            "p90 |error|",
        ],
        rows,
        text_columns=(0, 1),
    )


@click.command("validate")
@click.argument("files", nargs=-1)
@click.option(
    "--measured",
    "measured",
    multiple=True,
    metavar="PATH",
    help="A measured set: an aiconfigurator <system> folder, a folder below it, a "
    ".parquet table, or a microbenchmark .json (a run of layers, or a --preset calibrate "
    "kernel set) (repeatable).",
)
@click.option(
    "--profile",
    default=None,
    metavar="NAME|PATH",
    help="Calibration profile for --measured (default: the shipped one; never one "
    "fitted on the set); 'roofline' for the plain roofline bound.",
)
@click.option(
    "--mode",
    type=click.Choice(["fused", "unfused"]),
    default="unfused",
    show_default=True,
    help="Microbenchmark files only: unfused models the op sequence the microbenchmark runs.",
)
@click.option("--rows", "show_rows", is_flag=True, help="Also print every row.")
@click.option(
    "--worst",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="Also print each table's N rows of largest |error|, largest first (before --rows).",
)
@serving_engine_option
@format_option
def command(files, measured, profile, mode, show_rows, worst, engine, fmt):
    """Predicted vs measured.

    With --measured, every row of a measured set (GPU kernel tables in aiconfigurator's
    layout, or microbenchmark files) is predicted by the kernel time model and the errors
    are reported per table and overall; rows the product cannot model, or that a quirk rule
    excludes, are counted by reason. Without it, the microbenchmark's files (default: the
    committed sets) are checked against the roofline with their own measured ceilings.

    \b
    Examples:
      mlacalc validate --measured mlacalc/data/measured/a100_sxm
      mlacalc validate --measured mlacalc/data/measured/b200_sxm --engine sglang
      mlacalc validate --measured mlacalc/data/measured/a100_sxm/gemm --profile roofline
      mlacalc validate --measured my_h200/ --profile fitted-on-h100.json --rows --format csv
      mlacalc validate
      mlacalc validate bench-results/cuda-h100-full-bf16.json --rows
    """
    # deferred: validating loads numpy (and pyarrow for GPU tables); `--help` stays light
    from mlacalc.measured.validate import validate as run_validation

    if measured:
        if files:
            raise click.UsageError("give microbenchmark FILES or --measured PATH, not both")
        if given("mode"):
            warn(
                "--mode applies to microbenchmark FILES; --measured rows are predicted as "
                "measured (each table's kernels); ignored"
            )
        v = run_validation(measured=list(measured), profile=profile, engine=engine)
        for line in v.warnings:  # a kernel set's ceilings its own rows beat
            warn(line)
        if fmt == "csv":
            if worst and not show_rows:
                emit(fmt, [r for t in v.tables for r in _worst(t.row_records(), worst)], list,
                     rows_csv=True)  # fmt: skip
            elif show_rows:
                emit(fmt, [r for t in v.tables for r in t.row_records()], list, rows_csv=True)
            else:
                recs = [
                    {
                        k: val
                        for k, val in t.summary().items()
                        if k not in ("not_predicted_by_reason", "rules")
                    }
                    for t in v.tables
                ]
                emit(fmt, recs, list, rows_csv=True)
            return
        doc = v.to_dict(rows=show_rows)
        if worst and fmt == "json":
            doc["worst_rows"] = [r for t in v.tables for r in _worst(t.row_records(), worst)]
        emit(fmt, doc, lambda: _measured_sections(v, show_rows, worst))
        return
    if profile is not None:
        raise click.UsageError("--profile applies to --measured sets")
    if engine is not None:
        raise click.UsageError("--engine applies to --measured sets (GPU kernel tables)")
    _bench_files(run_validation(list(files) or None, mode), mode, show_rows, fmt, worst)


def _noisy_words(v: Any) -> str:
    """The section title's words on the rows whose repeats spread too much ("" when none)."""
    # deferred: the bench validation loads the time model
    from mlacalc.measured.validate_bench import NOISY_SPREAD

    noisy = v.noisy
    if not noisy:
        return ""
    every = len(noisy) == len(v.rows)
    worst = max(r.spread for r in noisy)
    return (
        f"; {len(noisy)} of {len(v.rows)} rows noisy (interquartile range over "
        f"{NOISY_SPREAD:.0%} of the median, up to {worst:.0%}): "
        + (
            "every row, so the errors measure the run's noise as much as the model"
            if every
            else "left out of the median and worst |error| (marked in --rows)"
        )
    )


def _bench_files(
    sets: list, mode: str, show_rows: bool, fmt: str, worst: int | None = None
) -> None:
    from mlacalc.measured.validate_bench import bench_prediction  # deferred: loads numpy

    doc = [s.to_dict() for s in sets]
    for v in sets:  # a rows file shorter than its sidecar counts
        for line in v.warnings:
            warn(line)

    def sections():
        out = []
        for v in sets:
            rows = [
                [
                    k,
                    g["rows"],
                    f"{100 * g['median_abs_error']:.1f}%",
                    f"{100 * g['worst_abs_error']:.1f}%",
                ]
                for k, g in v.groups.items()
            ]
            rows.append(
                [
                    "all",
                    len(v.scored),
                    f"{100 * v.median_abs_error:.1f}%",
                    f"{100 * v.worst_abs_error:.1f}%",
                ]
            )
            # ok rows whose time cannot be scored (NaN, infinite, zero or negative), by reason
            left = "; ".join(
                f"{n} {why}" + lines_words(v.excluded_lines.get(why, ()))
                for why, n in sorted(v.excluded.items())
            )
            noisy = _noisy_words(v)
            out.append(
                Section(
                    # the roofline on the run's own ceilings and per-op latency: not the
                    # plain (datasheet) bound, nor the kernel time model
                    f"{v.name} ({v.device}): measured vs {bench_prediction(mode)}"
                    + (f" (rows left out: {left})" if left else "")
                    + noisy,
                    ["implementation / variant", "rows", "median |error|", "worst |error|"],
                    rows,
                )
            )
            for title, chosen in (
                [(f"{worst:,} worst rows", _worst_bench(v.rows, worst))] if worst else []
            ) + ([("rows", v.rows)] if show_rows else []):
                out.append(
                    Section(
                        title,
                        [
                            "model",
                            "impl",
                            "phase",
                            "batch",
                            "seq_len",
                            "measured (ms)",
                            "predicted (ms)",
                            "error",
                            "bound",
                            "IQR / median",
                        ],
                        [
                            [
                                r.model,
                                r.impl,
                                r.phase,
                                r.batch,
                                r.seq_len,
                                f"{r.measured_s * 1e3:,.3f}",
                                f"{r.predicted_s * 1e3:,.3f}",
                                f"{100 * r.error:+.1f}%",
                                r.bound,
                                "-"
                                if r.spread != r.spread
                                else f"{100 * r.spread:.0f}%" + (" noisy" if r.noisy else ""),
                            ]
                            for r in chosen
                        ],
                    )
                )
        return out

    if fmt == "csv":
        rows = [{"set": v.name, "device": v.device, **r.to_dict()} for v in sets for r in v.rows]
        emit(fmt, rows, sections, rows_csv=True)
    else:
        emit(fmt, doc, sections)


def _worst_bench(rows: list, n: int) -> list:
    """The ``n`` microbenchmark rows of largest |error|, largest first."""
    return sorted(rows, key=lambda r: -abs(r.error))[:n]
