"""`mlacalc bench`: the microbenchmark of the reference PyTorch layers."""

from __future__ import annotations

import importlib.util

import click

from mlacalc.cli.common import IMPL_CHOICE, load, phases, size_list, warn
from mlacalc.words.errors import MlacalcError


@click.command("bench")
@click.option(
    "--preset",
    type=click.Choice(["quick", "cpu", "full", "calibrate"]),
    default=None,
    help="quick: under a minute on a CPU; cpu: the committed CPU set; full: DeepSeek-V2/V3, "
    "a GQA and an MHA model, batch 1-128, seq_len to 128K (for a GPU); calibrate: the time "
    "model's kernels (GEMM sweep, SDPA decode/prefill, copies) for mlacalc calibrate.",
)
@click.option(
    "--model", "models", multiple=True, help="Model(s) for a custom sweep (repeat the option)."
)
@click.option(
    "--impl",
    "impls",
    multiple=True,
    type=IMPL_CHOICE,
    help="Implementations (default: all that apply).",
)
@click.option(
    "--phase", type=click.Choice(["prefill", "decode", "both"]), default="both", show_default=True
)
@click.option(
    "--batch", "batches", default="1", show_default=True, help="Comma-separated batches: 1,8,32."
)
@click.option(
    "--seq-len", "seqs", default="1024", show_default=True, help="Comma-separated lengths: 512,4k."
)
@click.option(
    "--dtype",
    type=click.Choice(["fp32", "bf16", "fp16"]),
    default=None,
    help="Compute dtype (default: the preset's; fp32 for custom sweeps).",
)
@click.option(
    "--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto", show_default=True
)
@click.option(
    "--threads", type=int, default=None, help="CPU threads (default: all); recorded in the results."
)
@click.option("--warmup", type=int, default=2, show_default=True)
@click.option(
    "--repeats", type=int, default=20, show_default=True, help="Timed repeats per point (at most)."
)
@click.option(
    "--max-seconds", type=float, default=3.0, show_default=True, help="Time budget per point."
)
@click.option(
    "--out",
    "out_dir",
    default="bench-results",
    show_default=True,
    help="Directory for the CSV and JSON.",
)
@click.option(
    "--name", default=None, help="Base name of the output files (default: device-preset-dtype)."
)
@click.option(
    "--max-minutes",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Bound the whole run: points then run cheapest first, and those not reached in time "
    "are recorded as skipped (for a GPU held for a fixed time).",
)
@click.option(
    "--timer",
    type=click.Choice(["auto", "graph", "events"]),
    default="auto",
    show_default=True,
    help="--preset calibrate on CUDA: graph replays a CUDA graph of many calls (the host's "
    "dispatch out of the time, as the published tables); events times each call eagerly. auto: "
    "graph on CUDA.",
)
@click.option("--no-progress", is_flag=True, help="No progress bar.")
def command(
    preset,
    models,
    impls,
    phase,
    batches,
    seqs,
    dtype,
    device,
    threads,
    warmup,
    repeats,
    max_seconds,
    out_dir,
    name,
    max_minutes,
    timer,
    no_progress,
):
    """Time every attention variant with the reference PyTorch layers (needs the bench extra).

    \b
    Examples:
      mlacalc bench --preset quick
      mlacalc bench --preset full --device cuda --out results/
      mlacalc bench --model deepseek-v3 --impl absorbed --impl naive --phase decode \
          --batch 1,8 --seq-len 4k,32k
    """
    if importlib.util.find_spec("torch") is None:
        raise MlacalcError("the microbenchmark needs PyTorch: pip install 'mlacalc[bench]'")
    # deferred: the microbenchmark needs PyTorch (the bench extra); no other command loads it
    from mlacalc.bench.runner import PRESETS, custom_points, preset_points, run_benchmark

    if preset and models:
        raise click.BadParameter("use --preset or --model, not both", param_hint="--model")
    if timer != "auto" and preset != "calibrate":
        raise click.BadParameter(
            "applies to --preset calibrate (the layers are timed as eager PyTorch runs them)",
            param_hint="--timer",
        )
    if preset == "calibrate":
        # deferred: the kernel sweep needs PyTorch (the bench extra)
        from mlacalc.bench.kernel_sweep import run_calibrate

        csv_path, json_path = run_calibrate(
            dtype=dtype,
            device=device,
            threads=threads,
            warmup=warmup,
            repeats=repeats,
            max_seconds=max_seconds,
            out_dir=out_dir,
            name=name,
            max_minutes=max_minutes,
            timer=timer,
            log=lambda s: click.echo(s, err=True),
        )
        click.echo(f"wrote {csv_path} and {json_path}")
        _said_of_run(json_path, calibrate=True)
        return
    if not preset and not models:
        raise click.BadParameter("name a --preset or at least one --model", param_hint="--preset")
    if preset:
        points = preset_points(preset)
        dtype = dtype or PRESETS[preset][1]
    else:
        wanted = phases(phase)
        points = custom_points(
            [load(name) for name in models],
            impls,
            wanted,
            size_list(batches, "--batch"),
            size_list(seqs, "--seq-len"),
        )
        dtype = dtype or "fp32"
    csv_path, json_path = run_benchmark(
        points,
        dtype=dtype,
        device=device,
        threads=threads,
        warmup=warmup,
        repeats=repeats,
        max_seconds=max_seconds,
        out_dir=out_dir,
        name=name,
        preset=preset or "custom",
        progress=not no_progress,
        max_minutes=max_minutes,
        log=lambda s: click.echo(s, err=True),
    )
    click.echo(f"wrote {csv_path} and {json_path}")
    _said_of_run(json_path, calibrate=False)


def _said_of_run(json_path, calibrate: bool) -> None:
    """Warn what the run's own files show as soon as it is written: ceilings its GEMM rows beat
    (a kernel set), rows far slower than its ceilings predict (a busy host, a layer set), a
    rows file shorter than its counts; a set that cannot be read is left to validate."""
    try:
        if calibrate:
            # deferred: reading a set loads numpy and the measured package
            from mlacalc.measured.observations import kernel_set_warnings

            said = kernel_set_warnings(json_path)
        else:
            # deferred: as above
            from mlacalc.measured.validate_bench import validate_file

            said = list(validate_file(json_path).warnings)
    except MlacalcError:
        return
    for line in said:
        warn(line)
