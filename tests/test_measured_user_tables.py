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
