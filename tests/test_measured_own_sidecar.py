"""A measured device given by its sidecar alone is timed on everything the sidecar measured."""

import csv
import statistics

import pytest

from mlacalc.data import MEASUREMENTS
from mlacalc.measured.validate_bench import validate_file
from mlacalc.timemodel.predict import OWN_RATES, predict_time

SET = "cpu-2core-epyc-fp32"


def test_measured_device_alone_predicts_what_validate_does():
    """predict_time(hardware="measured:SET") reads the sidecar's matrix-vector rates and GEMM
    sweep (the trial's 57.9% median on the 74 rows, against validate's 9.1%), so the API's
    median |error| on the committed CPU set is validate's."""
    with open(MEASUREMENTS / f"{SET}.csv", newline="", encoding="utf-8") as f:
        rows = [r for r in csv.DictReader(f) if r["status"] == "ok"]
    errors = []
    for r in rows:
        p = predict_time(
            r["model"],
            f"measured:{SET}",
            r["phase"],
            int(r["seq_len"]),
            int(r["batch"]),
            impl=None if r["impl"] == "standard" else r["impl"],
            mode="unfused",
            dtype=r["dtype"],
            weight_dtype=r["dtype"],
            launch_latency_s=float(r["launch_latency_s"]) if r.get("launch_latency_s") else None,
        )
        errors.append(abs(p.seconds / float(r["median_s"]) - 1))
    checked = validate_file(MEASUREMENTS / f"{SET}.json")
    assert len(errors) == len(checked.rows)
    assert statistics.median(errors) == pytest.approx(checked.median_abs_error, rel=1e-9)


def test_measured_device_alone_matches_its_calibration_and_says_so():
    kw = dict(batch=4, impl="absorbed", mode="unfused", dtype="fp32")
    alone = predict_time("deepseek-v2-lite", f"measured:{SET}", "decode", 2048, **kw)
    given = predict_time(
        "deepseek-v2-lite",
        f"measured:{SET}",
        "decode",
        2048,
        calibration=MEASUREMENTS / f"{SET}.json",
        **kw,
    )
    assert alone.seconds == given.seconds
    assert OWN_RATES in alone.calibration and alone.calibrated
