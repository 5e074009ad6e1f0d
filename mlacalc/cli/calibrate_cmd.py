"""`mlacalc calibrate`: fit a calibration profile of the kernel time model on measured sets."""

from __future__ import annotations

from pathlib import Path

import click

from mlacalc.cli.common import Section, emit, format_option, serving_engine_option, warn
from mlacalc.words.engines import check_engine
from mlacalc.words.errors import InvalidArgumentError


def _pct(x: float | None) -> str:
    return "-" if x is None or x != x else f"{100 * x:.1f}%"


def _signed(x: float | None) -> str:
    return "-" if x is None or x != x else f"{100 * x:+.1f}%"


@click.command("calibrate")
@click.argument("measured", nargs=-1, required=True, metavar="MEASURED...")
@click.option(
    "-o",
    "--output",
    required=True,
    metavar="PROFILE.json",
    help="Where to write the fitted profile (JSON).",
)
@click.option("--name", default=None, help="Profile name (default: the output file's stem).")
@click.option(
    "--base",
    default=None,
    metavar="PROFILE",
    help="A profile of the same engine (a shipped name such as default or fit-h100-sxm-sglang, "
    "or a JSON file) whose classes time every kernel class these tables do not fit; without "
    "it those classes are timed by datasheet defaults.",
)
@serving_engine_option
@format_option
def command(measured, output, name, base, engine, fmt):
    """Fit a calibration profile on measured sets.

    MEASURED is an aiconfigurator <system> folder (or any folder below it, or one .parquet
    table) or a microbenchmark .json written by `mlacalc bench --preset calibrate`. Every
    kernel class with single-kernel rows is fitted per device and pooled over all devices;
    the profile records what it was fitted on and the residuals. Predict with it through
    --profile PROFILE.json; devices it was not fitted on are predicted from their datasheet
    figures. A few tables of a new device fit a few classes: --base gives the rest from a
    shipped profile (attention, norms, collectives by datasheet ratios from its devices).

    \b
    Examples:
      mlacalc calibrate mlacalc/data/measured/h100_sxm -o h100.json
      mlacalc calibrate mlacalc/data/measured/b200_sxm --engine vllm -o b200-vllm.json
      mlacalc calibrate my_h200/ bench-results/cuda-h200-calibrate.json -o h200.json
      mlacalc calibrate my_l40s/gemm_perf.parquet --base default -o l40s.json
      mlacalc validate --measured mlacalc/data/measured/a100_sxm --profile h100.json
    """
    # deferred: fitting loads numpy and the measured sets; `mlacalc --help` stays light
    from mlacalc.measured.calibrate import BASE_NOTE, base_profile, calibrate, with_base
    from mlacalc.measured.tables import engine_of_named_tables

    out = Path(output)
    if out.suffix.lower() != ".json":
        raise InvalidArgumentError("--output", f"{output!r}: write the profile to a .json file")
    if base is not None:  # said before the fit, which can take minutes
        base_profile(base, check_engine(engine_of_named_tables(list(measured), engine)))
    # a folder's tables take minutes: a line on stderr per table read and class fitted
    prof = calibrate(
        list(measured),
        name=name or out.stem,
        engine=engine,
        progress=lambda line: click.echo(f"calibrate: {line}", err=True),
    )
    own = prof
    if base is not None:
        prof = with_base(own, base)
    prof.save(out)
    for note in own.notes:  # rows left out of the fit, by reason (also in the profile's notes)
        if (
            " excluded: " in note
            or " not fitted (" in note
            or note.startswith(("poor fit: ", "ceilings: ", "rows: "))
        ):
            warn(note)
    records = [
        {"device": device, "class": key, **stats}
        for device, classes in own.residuals.items()
        for key, stats in classes.items()
    ]

    def sections() -> list[Section]:
        rows = [
            [
                r["device"],
                r["class"],
                f"{r['rows']:,}",
                _pct(r["median_abs_error"]),
                _signed(r["signed_median_error"]),
                _pct(r["p90_abs_error"]),
                _pct(r.get("pooled_median_abs_error")),
            ]
            for r in records
        ]
        return [
            Section(
                f"profile '{prof.name}' written to {out} (engine {prof.engine}, fitted on "
                f"{', '.join(own.fitted_devices)}); residuals, error = predicted / measured - 1"
                + "".join(
                    f"; {n.removeprefix(BASE_NOTE)}" for n in prof.notes if n.startswith(BASE_NOTE)
                ),
                [
                    "device",
                    "kernel class",
                    "rows",
                    "median |error|",
                    "signed median",
                    "p90 |error|",
                    "median |error| (pooled fit)",
                ],
                rows,
                text_columns=(0, 1),
            )
        ]

    emit(fmt, {"profile": str(out), "digest": prof.digest, **prof.to_dict()}, sections)
