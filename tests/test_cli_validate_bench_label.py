"""One figure, one label: the held-out H200 microbenchmark run predicted by ``validate FILE`` and
by ``validate --measured FILE`` is the same computation (predict_time, unfused, on the run's
measured ceilings and each row's launch latency), and both say so. ``--measured`` had labelled
it "plain roofline bound (uncalibrated)" (a trial), the datasheet bound it is not."""

from __future__ import annotations

import json
from pathlib import Path

import mlacalc
from mlacalc.measured.validate_bench import bench_prediction

HELDOUT = Path(mlacalc.__file__).parent / "data/measurements/cuda-nvidia-h200-heldout-bf16.json"


def test_both_paths_give_the_same_figure_one_label(run):
    words = bench_prediction("unfused")
    plain = " ".join(run("validate", HELDOUT)[0].split())
    measured = " ".join(run("validate", "--measured", HELDOUT)[0].split())
    assert words in plain and words in measured
    assert "plain roofline" not in measured
    doc = json.loads(run("validate", "--measured", HELDOUT, "--format", "json")[0])
    assert doc["profile"] == f"{HELDOUT.stem}: {words}"
    assert {t["calibration"] for t in doc["tables"]} == {words}
    # the same median: 6.6% both ways
    assert "6.6%" in plain.split("all ")[1][:40] and "6.6%" in measured.split("all ")[1][:60]
