"""`mlacalc validate`: predicted vs measured, set by set."""

from __future__ import annotations

import click

from .common import Section, emit, format_option


@click.command("validate")
@click.argument("files", nargs=-1)
@click.option(
    "--mode",
    type=click.Choice(["fused", "unfused"]),
    default="unfused",
    show_default=True,
    help="unfused models the op sequence the microbenchmark runs.",
)
@click.option("--rows", "show_rows", is_flag=True, help="Also print every row.")
@format_option
def command(files, mode, show_rows, fmt):
    """Predicted vs measured: the roofline against measured files (default: the committed sets).

    \b
    Examples:
      mlacalc validate
      mlacalc validate bench-results/cuda-h100-full-bf16.json --rows
    """
    from ..validation import validate as run_validation

    sets = run_validation(list(files) or None, mode)
    doc = [s.to_dict() for s in sets]

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
                    len(v.rows),
                    f"{100 * v.median_abs_error:.1f}%",
                    f"{100 * v.worst_abs_error:.1f}%",
                ]
            )
            out.append(
                Section(
                    f"{v.name} ({v.device}), {mode} roofline vs measured",
                    ["implementation / variant", "rows", "median |error|", "worst |error|"],
                    rows,
                )
            )
            if show_rows:
                out.append(
                    Section(
                        "rows",
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
                            ]
                            for r in v.rows
                        ],
                    )
                )
        return out

    if fmt == "csv":
        rows = [{"set": v.name, "device": v.device, **r.to_dict()} for v in sets for r in v.rows]
        emit(fmt, rows, sections, rows_csv=True)
    else:
        emit(fmt, doc, sections)
