"""Validation of the roofline against the committed measurement sets."""

import json

import pytest

import mlacalc
from mlacalc import ConfigError
from mlacalc.data import MEASUREMENTS
from mlacalc.hardware.catalogue import load_hardware
from mlacalc.timemodel.predict import Calibration, predict_time


def test_wrong_schema_sidecar(tmp_path):
    path = tmp_path / "x.json"
    path.write_text('{"schema": "something/else"}')
    with pytest.raises(ConfigError, match=r"mlacalc\.bench/1"):
        mlacalc.validate([path])


#: the stated bound: the unfused roofline, calibrated by the ceilings of the same run, predicts
#: every committed measurement set with a median |error| of at most 25%
MEDIAN_ERROR_BOUND = 0.25


def test_committed_sets_are_predicted_within_the_stated_bound():
    sets = mlacalc.validate()
    assert sets
    for v in sets:
        assert v.median_abs_error <= MEDIAN_ERROR_BOUND, (v.name, v.median_abs_error)
        # every row scored but those the run recorded as not fitting in memory (the GPU set's
        # longest caches): no time failed, none was excluded
        meta = json.loads((MEASUREMENTS / f"{v.name}.json").read_text())
        assert meta["counts"]["oom"] == meta["counts"]["numerics_failed"] == 0
        assert len(v.rows) >= 20 and v.skipped == meta["counts"]["skipped"] and not v.excluded
        for group, stats in v.groups.items():
            assert stats["median_abs_error"] <= 0.30, (
                v.name,
                group,
                stats,
            )  # every implementation too
        for r in v.rows:
            assert r.predicted_s > 0 and r.flops > 0 and r.bytes > 0


def test_the_measured_gemm_sweep_is_what_closes_the_gap():
    """Predicting the same rows with the plain ceilings only (no GEMM sweep) is much worse:
    the calibration, not a fit to the rows, brings the error under the bound."""
    import csv
    import dataclasses
    import statistics

    from mlacalc.hardware.catalogue import read_sidecar
    from mlacalc.measured.validate import default_measurement_files

    path = default_measurement_files()[0]
    meta = read_sidecar(path)
    full = Calibration.from_measurements(meta)
    plain = dataclasses.replace(full, gemm_m_sweep={})
    hw = load_hardware(path)
    errors = {"full": [], "plain": []}
    with open(path.parent / meta["rows_file"], newline="") as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        impl = None if r["impl"] == "standard" else r["impl"]
        for name, cal in (("full", full), ("plain", plain)):
            p = predict_time(
                r["model"],
                hw,
                r["phase"],
                int(r["seq_len"]),
                int(r["batch"]),
                impl=impl,
                mode="unfused",
                dtype=r["dtype"],
                calibration=cal,
            )
            errors[name].append(abs(p.seconds / float(r["median_s"]) - 1))
    assert statistics.median(errors["full"]) < 0.75 * statistics.median(errors["plain"])


def _h200_errors(name: str) -> tuple[list[float], list[float], set[str]]:
    """|error| of every ``ok`` row of a committed H200 set predicted by the eager model on the
    catalogue's H200 with the row's trivial-op latency, of the rows over 3 ms, and the models
    of those rows."""
    import csv

    errors, gpu_bound = [], []
    with open(MEASUREMENTS / f"{name}.csv", newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["status"] == "ok"]
    for r in rows:
        p = predict_time(
            r["model"],
            "H200",
            r["phase"],
            int(r["seq_len"]),
            int(r["batch"]),
            impl=None if r["impl"] == "standard" else r["impl"],
            mode="unfused",
            dtype="bf16",
            weight_dtype="bf16",  # the reference layers' weights, whatever the checkpoint stores
            launch_latency_s=float(r["launch_latency_s"]),
        )
        error = abs(p.seconds / float(r["median_s"]) - 1)
        errors.append(error)
        if float(r["median_s"]) > 3e-3:
            gpu_bound.append(error)
    return errors, gpu_bound, {r["model"] for r in rows}


def test_the_h200_set_is_predicted_by_the_shipped_profile_it_was_never_fitted_on():
    """The eager model on the catalogue's H200 (the shipped H100 fit carried by datasheet
    ratios, no ceiling from the set) with each row's measured trivial-op latency: the kernel
    classes never saw this set, the GPU passes' shares come from a profiled run, and only the
    host's cost per op was fitted on the set's host-bound rows. Median |error| 6.9% (the rows
    over 3 ms, whose time is the GPU's: 6.5%); both held to 8% (9.2% and 9.4% before the eager
    RoPE and cat passes, 2026-11-29, when the bound was 12%). The weights are bf16, as the
    reference layers hold them: DeepSeek-V3's fp8 checkpoint had been timed at fp8 rates
    (7.0% / 6.5%, p90 21.8% -> 20.1%)."""
    import statistics

    errors, gpu_bound, _ = _h200_errors("cuda-nvidia-h200-full-bf16")
    assert len(errors) == 278 and len(gpu_bound) > 80
    assert statistics.median(errors) <= 0.08
    assert statistics.median(gpu_bound) <= 0.08


def test_the_held_out_h200_set_is_predicted_with_nothing_fitted_on_it():
    """The second H200 lease (2026-11-29) timed four models the eager model never saw measured
    (Kimi K2 and MiniCPM3-4B, MLA in its four implementations; Qwen3-8B and Llama-3.1-8B, GQA),
    decode and prefill, batch 1-32, 1K-16K tokens. Predicted on the catalogue's H200 (the shipped
    H100 fit carried by datasheet ratios) with each row's measured trivial-op latency, nothing
    taken from the set: median |error| 6.3% over 156 rows, 5.1% over the 65 rows over 3 ms,
    p90 14.1% (Kimi K2's fp8 checkpoint timed at bf16 rates, as the layers run it; at fp8 rates
    6.1%, 5.5%, 15.6%); held to 7%, 7% and 16%. Before the eager RoPE and cat passes (found on
    the full set and the profile, then checked here untuned): 8.7%, 11.9% and 21.8%, prefill
    predicted fast by -7% to -33% by model and implementation, held to 10%, 14% and 25%."""
    import statistics

    errors, gpu_bound, models = _h200_errors("cuda-nvidia-h200-heldout-bf16")
    assert models == {"kimi-k2", "minicpm3-4b", "qwen3-8b", "llama-3.1-8b"}
    assert len(errors) == 156 and len(gpu_bound) == 65
    assert statistics.median(errors) <= 0.07
    assert statistics.median(gpu_bound) <= 0.07
    assert sorted(errors)[int(0.9 * len(errors))] <= 0.16


def test_noisy_rows_are_said_and_left_out_of_the_median(tmp_path):
    """A run whose repeats spread widely (IQR up to 90% of the median on a loaded 2-core box,
    trial of 2026-11-29) blamed the model: rows whose IQR exceeds NOISY_SPREAD of their median
    are marked and left out of the median and worst error."""
    import csv as _csv
    import json as _json
    import shutil
    import statistics

    from click.testing import CliRunner

    from mlacalc.cli import cli
    from mlacalc.measured.validate_bench import NOISY_SPREAD, validate_file

    src = MEASUREMENTS / "cpu-2core-epyc-fp32.json"
    meta = _json.loads(src.read_text())
    shutil.copy(src, tmp_path / src.name)
    with open(MEASUREMENTS / meta["rows_file"], newline="") as fh:
        reader = _csv.DictReader(fh)
        fields, rows = reader.fieldnames, list(reader)
    ok = [r for r in rows if r["status"] == "ok"]
    for r in ok[:5]:  # five rows spread twice their median
        r["iqr_s"] = str(2 * float(r["median_s"]))
    with open(tmp_path / meta["rows_file"], "w", newline="") as fh:
        writer = _csv.DictWriter(fh, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    before = validate_file(src)
    after = validate_file(tmp_path / src.name)
    assert not before.noisy and len(after.noisy) == 5
    assert all(r.spread > NOISY_SPREAD for r in after.noisy)
    quiet = statistics.median(abs(r.error) for r in before.rows[5:])
    assert after.median_abs_error == pytest.approx(quiet)
    assert after.to_dict()["rows_noisy"] == 5
    out = CliRunner().invoke(cli, ["validate", str(tmp_path / src.name), "--rows"], env=WIDE)
    assert out.exit_code == 0, out.output
    text = " ".join(out.output.split())  # the title wraps at the table's width
    assert "5 of 74 rows noisy (interquartile range over 50% of the median" in text
    assert "200% noisy" in text


WIDE = {"COLUMNS": "400"}
