"""Mutation suite of aiconfigurator's parquet tables: every column of a vendored table given
the wrong type, missing values, a dictionary encoding, and its times made NaN, zero or
negative. Each case reads (and then validates and calibrates to finite figures, never
scoring an unusable time) or is refused in one line naming the file and the column; the
error of a wrong type printed 14-23 lines of the column's data and named neither. A
dictionary-encoded text column (what pandas writes for a category) reads as the plain one."""

from __future__ import annotations

import math
import shutil

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")  # reading parquet tables needs the measured extra
import pyarrow.parquet as pq  # noqa: E402
from reference_data import MEASURED  # noqa: E402

import mlacalc  # noqa: E402
from mlacalc.measured.tables import load_measured  # noqa: E402
from mlacalc.words.errors import ConfigError, MlacalcError  # noqa: E402

SOURCE = MEASURED / "a100_sxm/gemm/trtllm/1.0.0"
# every 300th row: a spread of shapes, small enough to validate in a second
TABLE = pq.read_table(SOURCE / "gemm_perf.parquet").take(list(range(0, 27384, 300)))


def _write(tmp_path, table) -> str:
    folder = tmp_path / "a100_sxm/gemm/trtllm/1.0.0"
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(SOURCE / "collection_meta.yaml", folder)
    path = folder / "gemm_perf.parquet"
    pq.write_table(table, path)
    return str(path)


def _replace(name: str, array) -> pa.Table:
    i = TABLE.column_names.index(name)
    return TABLE.set_column(i, pa.field(name, array.type), array)


def _plain(tmp_path) -> dict:
    """The summary of the sample as vendored, validated by the roofline."""
    path = _write(tmp_path / "reference", TABLE)
    return mlacalc.validate(measured=path, profile="roofline").tables[0].summary()


def _refused(path: str, column: str) -> str:
    with pytest.raises(ConfigError) as err:
        load_measured(path)
    text = str(err.value)
    assert "\n" not in text and path in text and f"'{column}'" in text, text
    assert len(text) < 400
    return text


N = TABLE.num_rows
WRONG = {
    "numbers as text": lambda: pa.array([str(i) for i in range(N)]),
    "list": lambda: pa.array([[1, 2]] * N),
    "struct": lambda: pa.array([{"a": 1}] * N),
    "timestamp": lambda: pa.array([0] * N, pa.timestamp("s")),
    "binary": lambda: pa.array([b"\x00"] * N),
}


@pytest.mark.parametrize("kind", sorted(WRONG))
@pytest.mark.parametrize("column", ["m", "k", "latency"])
def test_parquet_number_column_of_the_wrong_type_is_one_line_naming_file_and_column(
    tmp_path, column, kind
):
    _refused(_write(tmp_path, _replace(column, WRONG[kind]())), column)


@pytest.mark.parametrize("column", ["gemm_dtype", "op_name", "framework"])
def test_parquet_text_column_of_numbers_is_one_line_naming_file_and_column(tmp_path, column):
    _refused(_write(tmp_path, _replace(column, pa.array(list(range(N))))), column)


@pytest.mark.parametrize("column", ["gemm_dtype", "kernel_source", "op_name"])
def test_parquet_dictionary_encoded_text_column_is_accepted(tmp_path, column):
    encoded = _replace(column, TABLE.column(column).dictionary_encode())
    plain = load_measured(_write(tmp_path / "plain", TABLE)).tables[0]
    read = load_measured(_write(tmp_path / "dict", encoded)).tables[0]
    assert read.columns[column].tolist() == plain.columns[column].tolist()
    v = mlacalc.validate(measured=_write(tmp_path / "dict", encoded), profile="roofline")
    assert v.tables[0].summary()["predicted"] == _plain(tmp_path)["predicted"] > 0


def test_parquet_missing_values_read_as_nan_and_empty_text(tmp_path):
    m = TABLE.column("m").to_pylist()
    dtype = TABLE.column("gemm_dtype").to_pylist()
    table = _replace("m", pa.array([None, *m[1:]], pa.int64()))
    table = table.set_column(
        table.column_names.index("gemm_dtype"), "gemm_dtype", pa.array([None, *dtype[1:]])
    )
    t = load_measured(_write(tmp_path, table)).tables[0]
    assert math.isnan(t.columns["m"][0]) and t.columns["gemm_dtype"][0] == ""
    v = mlacalc.validate(measured=_write(tmp_path, table), profile="roofline").tables[0]
    assert v.summary()["predicted"] == _plain(tmp_path)["predicted"] - 1
    assert math.isfinite(v.summary()["median_abs_error"])


def test_parquet_sizes_that_overflow_are_not_predicted_by_their_own_reason(tmp_path):
    """m of 1e307 in three rows: the GEMM's FLOPs (2 m n k) overflow, so a row has no finite
    work; it is left out as such, not as a class the time model lacks."""
    m = TABLE.column("m").to_pylist()
    path = _write(tmp_path, _replace("m", pa.array([1e307] * 3 + m[3:], pa.float64())))
    with np.errstate(over="ignore"):
        t = mlacalc.validate(measured=path, profile="roofline").tables[0]
    assert list(t.reason[:3]) == ["work_not_finite"] * 3
    assert "no_time_model" not in t.not_predicted_by_reason()
    assert t.summary()["predicted"] == _plain(tmp_path)["predicted"] - 3


@pytest.mark.parametrize("bad", [math.nan, 0.0, -0.02, math.inf])
def test_parquet_nan_zero_or_negative_latency_is_never_scored(tmp_path, bad):
    lat = TABLE.column("latency").to_pylist()
    path = _write(tmp_path, _replace("latency", pa.array([bad] * 5 + lat[5:], pa.float64())))
    t = mlacalc.validate(measured=path, profile="roofline").tables[0]
    # counted by reason, named as the bench route names it: a zero time (a difference floored
    # at zero), a negative one and a NaN or infinite one apart (all three were "zero_time")
    reasons = t.not_predicted_by_reason()
    own = (
        "time_not_finite" if not math.isfinite(bad) else "time_negative" if bad < 0 else "zero_time"
    )
    assert reasons == {own: 5}
    s = t.summary()
    assert s["predicted"] == _plain(tmp_path)["predicted"] - 5
    assert all(math.isfinite(s[k]) for k in ("median_abs_error", "p90_abs_error"))
    prof = mlacalc.calibrate(path, use_scipy=False)
    assert all(math.isfinite(v) for c in prof.classes.values() for v in c.values())


def test_parquet_mutated_at_random_reads_or_is_one_line(tmp_path):
    """Hypothesis gives a column values of a drawn type, nulls among them."""
    pytest.importorskip("hypothesis")
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    values = st.one_of(
        st.lists(st.integers(-(2**40), 2**40) | st.none(), min_size=N, max_size=N),
        st.lists(
            st.floats(allow_nan=True, allow_infinity=True) | st.none(), min_size=N, max_size=N
        ),
        st.lists(st.text(max_size=4) | st.none(), min_size=N, max_size=N),
        st.lists(st.booleans(), min_size=N, max_size=N),
    )
    counter = iter(range(10**6))

    @settings(max_examples=25, derandomize=True, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))  # fmt: skip
    @given(column=st.sampled_from(TABLE.column_names), data=values)
    def check(column, data):
        path = _write(tmp_path / str(next(counter)), _replace(column, pa.array(data)))
        try:
            v = mlacalc.validate(measured=path, profile="roofline")
        except MlacalcError as exc:
            assert "\n" not in str(exc) and path in str(exc)
            return
        for t in v.tables:
            s = t.summary()
            if s["predicted"]:
                assert math.isfinite(s["median_abs_error"])

    check()


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("tables", [1, 2]),  # was an AttributeError
        ("tables", {"gemm_perf": "complete"}),
        ("runtime", "trtllm"),
        ("runtime", {"framework": ["trtllm"], "version": "1.0.0"}),
        ("runtime", {"framework": "trtllm", "version": None}),
        ("runtime", {"framework": "warp", "version": "1"}),
    ],
    ids=str,
)
def test_collection_meta_malformed_is_one_line_naming_the_field(tmp_path, field, value):
    import yaml

    path = _write(tmp_path, TABLE)
    meta_path = tmp_path / "a100_sxm/gemm/trtllm/1.0.0/collection_meta.yaml"
    meta = yaml.safe_load(meta_path.read_text())
    meta[field] = value
    meta_path.write_text(yaml.safe_dump(meta))
    for call in (lambda: load_measured(path), lambda: mlacalc.calibrate(path)):
        with pytest.raises(ConfigError) as err:
            call()
        text = str(err.value)
        assert "\n" not in text and "collection_meta.yaml" in text and field in text, text


def test_parquet_outside_the_folder_layout_is_one_line_naming_it(tmp_path):
    # a parquet file whose folders are not <system>/<family>/<framework>/<version> (one close
    # to the root was read as system '/')
    folder = tmp_path / "loose"
    folder.mkdir()
    shutil.copy(SOURCE / "collection_meta.yaml", folder)
    pq.write_table(TABLE, folder / "gemm_perf.parquet")
    with pytest.raises(MlacalcError) as err:
        load_measured(str(folder / "gemm_perf.parquet"))
    assert "\n" not in str(err.value) and "'/'" not in str(err.value)
