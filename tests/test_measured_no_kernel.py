"""Rows whose shape runs no kernel: SGLang's top-k tables (GLM-5's ``fast_topk_transform_fused``
and DeepSeek-V4's top-k calibration sweep) time 0 exactly where no query has more keys than the
model's ``index_topk``. The mapping predicts those rows as no kernel, 0 s (``NO_KERNEL``):
counted as predicted, outside the error figures; a row it says runs nothing but that times
something is a miss (``NO_KERNEL_TIMED``), counted as not predicted."""

from __future__ import annotations

import numpy as np
import pytest
from reference_data import MEASURED

import mlacalc
from mlacalc.cli.validate_cmd import _measured_sections
from mlacalc.measured.mapping import NO_KERNEL, NO_KERNEL_TIMED, map_table, not_predicted
from mlacalc.measured.tables import load_measured

pa = pytest.importorskip("pyarrow")  # reading parquet tables needs the measured extra
import pyarrow.parquet as pq  # noqa: E402

FOLDER = "sparse_attention/sglang/0.5.14"


def _table(system: str, name: str):
    (t,) = load_measured(MEASURED / system / FOLDER / f"{name}.parquet").tables
    return t


def test_pooled_keys_are_the_sum_of_each_querys_keys():
    """The kernel's logits read: query ``i`` of a sequence ranks ``floor((step + i) / 4)``
    pooled keys where they are more than the model's top-k (a query of no more takes them
    whole, its logits unread), summed exactly (brute force over 200 rows of the sweep)."""
    t = _table("h100_sxm", "dsv4_csa_topk_calib_perf")
    (part,) = [p for p in map_table(t).parts if p.batch.variant == "topk_v1_flat"]
    c = t.columns
    for i in range(0, len(part.rows), max(1, len(part.rows) // 200)):
        r = part.rows[i]
        bs, isl, step = int(c["batch_size"][r]), int(c["isl"][r]), int(c["step"][r])
        topk = 1024 if "Pro" in str(c["model"][r]) else 512
        keys = sum(k for q in range(1, isl + 1) if (k := (step + q) // 4) > topk)
        assert part.batch.shape["elements"][i] == bs * keys


@pytest.mark.parametrize("system", ["h100_sxm", "b200_sxm"])
@pytest.mark.parametrize(
    "name, zero", [("glm5_topk_module_perf", 2444), ("dsv4_csa_topk_calib_perf", None)]
)
def test_no_kernel_rows_are_exactly_the_rows_timed_zero(system, name, zero):
    t = _table(system, name)
    mapped = map_table(t)
    none = mapped.reason == NO_KERNEL
    assert np.array_equal(none, t.seconds <= 0)  # the rule, not the time, picks them
    assert zero is None or int(none.sum()) == zero
    assert not not_predicted(mapped.reason).any()
    covered = np.zeros(len(t), bool)
    for p in mapped.parts:
        covered[p.rows] = True
    assert not (covered & none).any() and covered[~none].all()


def test_calibration_sweep_zero_where_no_pooled_key_count_passes_the_top_k():
    # DeepSeek-V4-Flash selects 512 of step + isl tokens pooled 4 to one key: up to 2,051
    # tokens give at most 512 keys (nothing to select), 2,052 give 513; the sweep's nearest
    # rows are at 2,049 and 2,052 tokens
    t = _table("h100_sxm", "dsv4_csa_topk_calib_perf")
    c = t.columns
    flash = c["model"].astype(str) == "sgl-project/DeepSeek-V4-Flash-FP8"
    reason = map_table(t).reason
    tokens = c["step"] + c["isl"]
    assert (flash & (tokens == 2049)).any() and (flash & (tokens == 2052)).any()
    assert (reason[flash & (tokens < 2052)] == NO_KERNEL).all()
    assert (reason[flash & (tokens >= 2052)] == "").all()


def test_a_no_kernel_row_that_times_something_is_counted_a_miss(tmp_path):
    src = MEASURED / "h100_sxm" / FOLDER
    table = pq.read_table(src / "glm5_topk_module_perf.parquet")
    lat = np.asarray(table.column("latency").to_pylist())
    zero = np.flatnonzero(lat <= 0)[:3]
    keep = np.concatenate([zero, np.flatnonzero(lat > 0)[:20]])
    lat[zero[0]] = 0.01  # one row the rule says runs no kernel now times 10 us
    table = table.set_column(
        table.column_names.index("latency"), "latency", pa.array(lat, pa.float64())
    ).take(keep)
    folder = tmp_path / "h100_sxm" / FOLDER
    folder.mkdir(parents=True)
    (folder / "collection_meta.yaml").write_text((src / "collection_meta.yaml").read_text())
    pq.write_table(table, folder / "glm5_topk_module_perf.parquet")
    val = mlacalc.validate(
        measured=str(folder / "glm5_topk_module_perf.parquet"),
        profile="fit-b200-sxm-sglang",
        engine="sglang",
    )
    v = val.tables[0]
    s = v.summary()
    assert s["rows"] == 23 and s["predicted_zero"] == 2
    assert s["not_predicted_by_reason"] == {NO_KERNEL_TIMED: 1}
    assert s["predicted"] == 22 and v.errors.size == 20 and np.isfinite(v.errors).all()
    assert (v.predicted_s[v.reason == NO_KERNEL] == 0).all()
    rows = v.row_records()
    assert [r["not_predicted"] for r in rows[:3]] == [NO_KERNEL_TIMED, None, None]
    # the text table gives the rows predicted as no kernel in a column of the predicted ones,
    # not among the reasons rows are not predicted
    (sec, *_) = _measured_sections(val, False)
    cells = dict(zip(sec.columns, sec.rows[0]))
    assert cells["predicted"] == "22" and cells["of which 0 s"] == "2"
    assert cells["not predicted"] == "1"
    assert cells["not predicted by reason"] == f"{NO_KERNEL_TIMED} 1"
    assert dict(zip(sec.columns, sec.rows[-1]))["of which 0 s"] == "2"
