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

    path = mlacalc.measured.validate.default_measurement_files()[0]
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
