"""A user's own tables of a device mlacalc never measured (a new-user trial of 2026-11-30 wrote
small tables for L40S, H20 and MI300X in the shared layout): each fault it found is one line
naming the file and the field, or a warning, and a folder of any catalogue device reads."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest

pa = pytest.importorskip("pyarrow")  # reading parquet tables needs the measured extra
import pyarrow.parquet as pq  # noqa: E402
from reference_data import MEASURED  # noqa: E402

import mlacalc  # noqa: E402
from mlacalc.measured.tables import (  # noqa: E402
    UnknownSystemError,
    gpu_device,
    load_measured,
    system_device,
)
from mlacalc.words.errors import ConfigError  # noqa: E402

SOURCE = MEASURED / "a100_sxm/gemm/trtllm/1.0.0"
#: every 400th row of A100's GEMM table: a spread of shapes, read in a second
TABLE = pq.read_table(SOURCE / "gemm_perf.parquet").take(list(range(0, 27384, 400)))
N = TABLE.num_rows


def _column(table, name: str, values) -> pa.Table:
    i = table.column_names.index(name)
    array = pa.array(values)
    return table.set_column(i, pa.field(name, array.type), array)


def _write(tmp_path: Path, system: str, table=TABLE, meta: str | None = None) -> Path:
    """``table`` as ``<tmp>/<system>/gemm/trtllm/1.0.0/gemm_perf.parquet``; the system folder."""
    folder = tmp_path / system / "gemm/trtllm/1.0.0"
    folder.mkdir(parents=True, exist_ok=True)
    if meta is None:
        shutil.copy(SOURCE / "collection_meta.yaml", folder)
    else:
        (folder / "collection_meta.yaml").write_text(meta, encoding="utf-8")
    pq.write_table(table, folder / "gemm_perf.parquet")
    return tmp_path / system


# --- folders named after any catalogue device ------------------------------------------------


@pytest.mark.parametrize(
    ("folder", "device"),
    [("H20", "H20"), ("h20", "H20"), ("h20_sxm", "H20"), ("mi300x", "MI300X"),
     ("h100_sxm", "H100-SXM"), ("rtx_4090", "RTX-4090"), ("L40S", "L40S")],
)  # fmt: skip
def test_a_folder_named_as_minus_h_names_a_device_reads_as_it(folder, device):
    assert system_device(folder) == device


@pytest.mark.parametrize("folder", ["gb300_nvl", "h2", "", "..", "measured:x", "a/b"])
def test_a_folder_naming_no_device_is_none(folder):
    assert system_device(folder) is None


def test_tables_of_an_h20_folder_validate_and_calibrate(tmp_path):
    path = _write(tmp_path, "H20", _column(TABLE, "device", ["NVIDIA H20"] * N))
    mset = load_measured(path)
    assert [t.device for t in mset.tables] == ["H20"]
    result = mlacalc.validate(measured=path, profile="roofline")
    assert result.overall["predicted"] == N
    prof = mlacalc.calibrate(path, use_scipy=False)
    assert prof.fitted_devices == ["H20"]


def test_an_unknown_folder_offers_the_catalogue_not_editing_the_package(tmp_path):
    path = _write(tmp_path, "gb300_nvl", TABLE.drop(["device"]))
    with pytest.raises(UnknownSystemError) as err:
        load_measured(path)
    text = str(err.value)
    assert "gb300_nvl" in text and "H20" in text and "MI300X" in text and "\n" not in text
    assert "MEASURED_SYSTEMS" not in text and "catalogue.py" not in text


# --- the table's own device and framework columns against its folder -------------------------


def test_gpu_names_match_whole_words():
    assert gpu_device("NVIDIA L40") is None  # not the L4
    assert gpu_device("NVIDIA H200") == "H200" and gpu_device("NVIDIA H20") == "H20"
    assert gpu_device("NVIDIA GB200") == "GB200" and gpu_device("NVIDIA B200") == "B200"
    assert gpu_device("NVIDIA A100-SXM4-80GB") == "A100-SXM-80GB"


def test_a_device_column_of_another_gpu_than_its_folder_is_refused(tmp_path):
    table = _column(TABLE, "device", ["NVIDIA H100 80GB HBM3"] * N)
    path = _write(tmp_path, "l40s", table)
    with pytest.raises(ConfigError, match=r"field 'device'.*H100-SXM.*'l40s' \(L40S\)"):
        load_measured(path)
    # a name mlacalc does not place in the catalogue is not checked
    load_measured(_write(tmp_path / "b", "l40s", _column(TABLE, "device", ["Some GPU"] * N)))


def test_a_framework_column_of_another_engine_than_its_meta_is_refused(tmp_path):
    path = _write(tmp_path, "a100_sxm", _column(TABLE, "framework", ["VLLM"] * N))
    with pytest.raises(ConfigError, match=r"field 'framework'.*'VLLM' \(vllm\).*trtllm"):
        load_measured(path)


def test_the_shipped_tables_pass_the_column_checks():
    """Every shipped table's device and framework columns agree with its folder and meta (the
    NCCL tables, collected under TensorRT-LLM, are shared: not checked)."""
    for system in ("a100_sxm", "h100_sxm", "b200_sxm"):
        assert load_measured(MEASURED / system, engine="all").tables


# --- collection_meta.yaml ---------------------------------------------------------------------


def test_an_empty_collection_meta_names_what_it_needs(tmp_path):
    path = _write(tmp_path, "a100_sxm", meta="")
    with pytest.raises(ConfigError) as err:
        load_measured(path)
    text = str(err.value)
    assert "collection_meta.yaml" in text and "runtime.framework" in text
    assert "model file" not in text


# --- calibrate-preset kernel sets -------------------------------------------------------------

SIDECAR = {
    "schema": "mlacalc.bench/1",
    "rows_schema": "mlacalc.words.kernels/1",
    "rows_file": "k.csv",
    "preset": "calibrate",
    "dtype": "fp32",
    "device": {"kind": "cpu", "name": "test CPU", "threads": 1},
    "ceilings": {
        "matmul_flops_per_s": {"fp32": 2e11},
        "matmul_n": 2048,
        "gemv_bytes_per_s": {"fp32": 2e10},
        "copy_bytes": 1 << 20,
        "copy_bytes_per_s": 2e10,
        "launch_latency_s": 2e-6,
    },
}


def _kernel_set(tmp_path: Path, columns: list[str], rate: float = 1e11, meta=None) -> Path:
    rows = []
    for i in range(12):
        m = 64 * (i + 1)
        flops = 2 * m * 1024 * 1024
        rows.append(dict(kind="gemm", dtype="fp32", m=m, n=1024, k=1024, calls=1, status="ok",
                         flops=flops, bytes=4 * (2 * m * 1024 + 1024 * 1024),
                         median_s=flops / rate + 2e-5))  # fmt: skip
    with open(tmp_path / "k.csv", "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=columns, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    path = tmp_path / "k.json"
    path.write_text(json.dumps(meta or SIDECAR))
    return path


ALL = ["kind", "dtype", "flops", "bytes", "calls", "m", "n", "k", "status", "median_s"]


@pytest.mark.parametrize("missing", ["m", "n", "k"])
def test_a_kernel_set_without_a_gemm_shape_column_is_one_line(tmp_path, missing):
    path = _kernel_set(tmp_path, [c for c in ALL if c != missing])
    for run in (
        lambda: mlacalc.validate(measured=path),
        lambda: mlacalc.calibrate(path, use_scipy=False),
    ):
        with pytest.raises(ConfigError) as err:
            run()
        text = str(err.value)
        assert f"field '{missing}'" in text and "k.csv" in text and "\n" not in text
    assert mlacalc.validate(measured=_kernel_set(tmp_path, ALL)).overall["predicted"] == 12


# --- rows a parquet table cannot give: counted, said, never scored --------------------------


def _latency(values) -> pa.Table:
    return _column(TABLE, "latency", values)


def test_parquet_rows_of_bad_times_or_dtypes_are_said_as_a_kernel_sets_are(tmp_path):
    """calibrate dropped them unsaid ("290 rows", nothing on stderr or in the notes); the words
    are a kernel set's (time not finite ...), the dtype column and value named."""
    lat = TABLE.column("latency").to_pylist()
    lat[:3] = [float("nan")] * 3
    lat[3:5] = [-1.0, -2.0]
    dtypes = TABLE.column("gemm_dtype").to_pylist()
    dtypes[5:9] = ["bf17"] * 4
    table = _column(_latency(lat), "gemm_dtype", dtypes)
    prof = mlacalc.calibrate(_write(tmp_path, "a100_sxm", table), use_scipy=False)
    notes = [n for n in prof.notes if " excluded: " in n]
    assert "A100-SXM-80GB: 3 row(s) of gemm_perf excluded: time not finite (NaN or infinite)" in (
        notes
    )
    assert "A100-SXM-80GB: 2 row(s) of gemm_perf excluded: time zero or negative" in notes
    assert any("4 row(s)" in n and "gemm_dtype 'bf17'" in n for n in notes), notes


def test_a_nan_time_has_one_reason_name_on_every_path(tmp_path):
    from mlacalc.measured.validate_tables import time_reasons

    assert time_reasons([float("nan"), float("inf"), -1.0, 0.0, 1.0]).tolist() == [
        "time_not_finite", "time_not_finite", "time_negative", "zero_time", ""
    ]  # fmt: skip
    lat = TABLE.column("latency").to_pylist()
    lat[0] = float("nan")
    parquet = mlacalc.validate(measured=_write(tmp_path, "a100_sxm", _latency(lat)))
    columns = ALL
    kernel = _kernel_set(tmp_path, columns)
    text = (tmp_path / "k.csv").read_text().splitlines()
    cells = text[1].split(",")
    cells[columns.index("median_s")] = "nan"
    (tmp_path / "k.csv").write_text("\n".join([text[0], ",".join(cells), *text[2:]]) + "\n")
    bench = mlacalc.validate(measured=kernel)
    for v in (parquet, bench):
        assert v.tables[0].not_predicted_by_reason() == {"time_not_finite": 1}


@pytest.mark.parametrize("value", [0, -4])
def test_a_size_of_zero_or_below_is_one_reason_and_no_numpy_warning(tmp_path, value):
    import warnings

    m = TABLE.column("m").to_pylist()
    m[:2] = [value, value]
    path = _write(tmp_path, "a100_sxm", _column(TABLE, "m", m))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # gemm_time.py divided by it
        (t,) = mlacalc.validate(measured=path).tables
        prof = mlacalc.calibrate(path, use_scipy=False)
    assert t.not_predicted_by_reason() == {"m_not_positive": 2}
    assert any("2 row(s) of gemm_perf excluded: m 0, negative or missing" in n for n in prof.notes)


def test_a_kernel_sets_gemm_of_m_zero_is_not_scored(tmp_path):
    import warnings

    path = _kernel_set(tmp_path, ALL)
    text = (tmp_path / "k.csv").read_text().splitlines()
    cells = text[1].split(",")
    cells[ALL.index("m")] = "0"
    (tmp_path / "k.csv").write_text("\n".join([text[0], ",".join(cells), *text[2:]]) + "\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        (t,) = mlacalc.validate(measured=path).tables
    assert t.not_predicted_by_reason() == {"m_not_positive": 1}  # scored at +1,068% before


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ("nan", "time_not_finite"),
        ("negative", "time_negative"),
        ("dtype", "unknown_dtype (gemm_dtype 'bf17')"),
        ("m", "m_not_positive (m 0)"),
        ("empty", "0 row(s)"),
    ],
)
def test_a_set_with_no_usable_row_is_an_error_counting_the_reasons(tmp_path, change, said):
    """validate printed a table of "-" and exited 0; calibrate said "give measured sets whose
    tables map onto single kernels" without a reason."""
    table = TABLE.take(list(range(min(N, 60)))) if change != "empty" else TABLE.slice(0, 0)
    n = table.num_rows
    if change == "nan":
        table = _latency([float("nan")] * N)
        said = f"{N} time_not_finite"
    elif change == "negative":
        table = _column(table, "latency", [-1.0] * n)
    elif change == "dtype":
        table = _column(table, "gemm_dtype", ["bf17"] * n)
    elif change == "m":
        table = _column(table, "m", [0] * n)
    path = _write(tmp_path, "a100_sxm", table)
    with pytest.raises(ConfigError) as err:
        mlacalc.validate(measured=path)
    text = str(err.value)
    assert "has no row to validate" in text and said in text and "\n" not in text, text
    with pytest.raises(mlacalc.MlacalcError) as err:
        mlacalc.calibrate(path, use_scipy=False)
    text = str(err.value)
    if change != "empty":
        words = {
            "nan": "time not finite",
            "negative": "time zero or negative",
            "dtype": "unknown dtype (gemm_dtype 'bf17')",
            "m": "m 0, negative or missing",
        }
        assert words[change] in text, text  # fmt: skip
    else:
        assert "hold no rows" in text, text


# --- a run's ceilings its own rows beat --------------------------------------------------------


def test_ceilings_a_runs_own_gemm_rows_beat_are_warned(tmp_path):
    """A CPU run whose ceilings were measured under load (its matmul ceiling 3x below the GEMM
    rows the same run timed) was accepted unchecked: warned in validate and calibrate (its
    notes), saying what the ceilings do to the prediction."""
    import copy

    from mlacalc.measured.observations import CEILING_MARGIN, kernel_set_warnings

    good = _kernel_set(tmp_path, ALL)  # rows at up to 1e11 FLOP/s under a 2e11 ceiling
    assert kernel_set_warnings(good) == []
    assert mlacalc.validate(measured=good).warnings == []
    loaded = copy.deepcopy(SIDECAR)
    loaded["ceilings"]["matmul_flops_per_s"]["fp32"] = 3e10
    (tmp_path / "bad").mkdir()
    path = _kernel_set(tmp_path / "bad", ALL, meta=loaded)
    (said,) = kernel_set_warnings(path)
    assert said.startswith("ceilings: k.json: its fp32 GEMM rows") and "x too slow" in said
    ratio = float(said.split("TFLOP/s, ")[1].split("x its own")[0])
    assert ratio > CEILING_MARGIN
    assert mlacalc.validate(measured=path).warnings == [said]
    prof = mlacalc.calibrate(path, use_scipy=False)
    assert said in prof.notes
    # within the margin: nothing said
    loaded["ceilings"]["matmul_flops_per_s"]["fp32"] = 1e11 / (CEILING_MARGIN - 0.2)
    path.write_text(json.dumps(loaded))
    assert kernel_set_warnings(path) == []


# --- a held-out set of the same device --------------------------------------------------------


def test_a_held_out_table_of_a_device_the_profile_was_fitted_on_is_validated(tmp_path):
    """validate refused a profile on any table of a device and name it was fitted on ("use a
    profile not fitted on L40S"), though the rows were other ones: refused only on the same
    content, which calibrate records (fitted_on[].contents)."""
    fit = _write(tmp_path / "fit", "a100_sxm")
    held = pq.read_table(SOURCE / "gemm_perf.parquet").take(list(range(200, 27384, 400)))
    held_out = _write(tmp_path / "held", "a100_sxm", held)
    prof = mlacalc.calibrate(fit, use_scipy=False)
    (entry,) = prof.fitted_on
    assert list(entry["contents"]) == ["gemm_perf"] and len(entry["contents"]["gemm_perf"]) == 1
    saved = tmp_path / "p.json"
    prof.save(saved)
    v = mlacalc.validate(measured=held_out, profile=str(saved))
    assert v.overall["predicted"] == held.num_rows
    # validated, and said: a content digest cannot tell rows the two tables share
    assert any("a100_sxm" not in w and "gemm_perf" in w and "held out" in w for w in v.warnings)
    for same in (fit, _write(tmp_path / "copy", "a100_sxm")):  # the table, or a copy of it
        with pytest.raises(mlacalc.MlacalcError, match="validating on the data a profile"):
            mlacalc.validate(measured=same, profile=str(saved))
    # a profile without contents (the shipped ones, fitted before) is refused by name
    bare = tmp_path / "bare.json"
    doc = json.loads(saved.read_text())
    for e in doc["fitted_on"]:
        e.pop("contents")
    bare.write_text(json.dumps(doc))
    with pytest.raises(mlacalc.MlacalcError, match="validating on the data a profile"):
        mlacalc.validate(measured=held_out, profile=str(bare))


def test_a_kernel_set_profile_is_refused_on_its_own_set_only(tmp_path):
    path = _kernel_set(tmp_path, ALL)
    prof = mlacalc.calibrate(path, use_scipy=False)
    saved = tmp_path / "p.json"
    prof.save(saved)
    with pytest.raises(mlacalc.MlacalcError, match="validating on the data a profile"):
        mlacalc.validate(measured=path, profile=str(saved))
    # the same run's file measured again (the device is the run's file, measured:NAME: the same)
    other = _kernel_set(tmp_path, ALL, rate=9e10)
    assert mlacalc.validate(measured=other, profile=str(saved)).overall["predicted"] == 12


def test_a_folder_named_after_a_collectors_device_predicts_as_the_collectors_name(tmp_path):
    """A100's MLA table under ``A100-SXM-80GB/`` predicts as under ``a100_sxm/``: the mapping's
    and the host floors' rules per device are keyed by the collector's system names, so the
    folder's name is read as the collector's (a review found generation_mla_perf 9.4% -> 52-56%
    off and 351 more rows not predicted under the catalogue's name)."""
    src = MEASURED / "a100_sxm/mla/trtllm"
    version = next(p.name for p in src.iterdir() if p.is_dir())
    for system in ("a100_sxm", "A100-SXM-80GB"):
        folder = tmp_path / system / "mla/trtllm" / version
        folder.mkdir(parents=True)
        shutil.copy(src / version / "collection_meta.yaml", folder)
        table = pq.read_table(src / version / "generation_mla_perf.parquet")
        pq.write_table(table.take(list(range(0, table.num_rows, 7))), folder / "g.parquet")
        (folder / "g.parquet").rename(folder / "generation_mla_perf.parquet")
    tables = {s: load_measured(tmp_path / s).tables[0] for s in ("a100_sxm", "A100-SXM-80GB")}
    assert {t.system for t in tables.values()} == {"a100_sxm"}
    got = {
        s: mlacalc.validate(measured=tmp_path / s, profile="fit-b200-sxm").overall for s in tables
    }
    assert got["A100-SXM-80GB"] == got["a100_sxm"]
