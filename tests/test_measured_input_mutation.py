"""Mutation suite of the measured inputs besides the parquet tables: microbenchmark sidecars
and their rows, calibrate kernel sets, and the observations ``calibrate`` fits on.

A malformed sidecar (every field the readers use, mutated) is refused in one line naming the
file and field by every reader: ``validate`` of the files and of ``measured=``, the hardware
loader and the command line; never an AttributeError, KeyError, IndexError or
UnicodeDecodeError. A row whose time is NaN, infinite, zero or negative is never scored: it is
left out and counted by reason. ``calibrate`` leaves out rows it cannot fit on and refuses a
class with no more rows than parameters (it reported a residual of 1e-6 for 9 parameters on one
row), and invents no class from an unknown kind. Each test is named after the defect it caught
(issue 26)."""

from __future__ import annotations

import copy
import csv
import io
import json
import math
from pathlib import Path

import numpy as np
import pytest

import mlacalc
from mlacalc.cli import main
from mlacalc.data import PROFILES
from mlacalc.hardware.catalogue import load_hardware
from mlacalc.measured.tables import load_measured
from mlacalc.measured.validate_tables import TIME_REASONS
from mlacalc.timemodel.fit import Observations
from mlacalc.timemodel.predict import predict_time
from mlacalc.timemodel.profile import load_profile
from mlacalc.words.errors import ConfigError, InvalidArgumentError, MlacalcError
from mlacalc.words.kernels import KernelBatch

MEASUREMENTS = Path(mlacalc.__file__).parent / "data" / "measurements"
#: the committed CPU set (rows without a per-row latency column)
SHIPPED = MEASUREMENTS / "cpu-2core-epyc-fp32.json"
#: the committed GPU set, whose rows carry the trivial-op latency measured before each point
GPU_SET = MEASUREMENTS / "cuda-nvidia-h200-full-bf16.json"
META = json.loads(SHIPPED.read_text(encoding="utf-8"))
ROWS = SHIPPED.with_suffix(".csv").read_text(encoding="utf-8").splitlines()


def _set(tmp_path: Path, meta=None, rows=None, name="set") -> Path:
    """A microbenchmark set in ``tmp_path``: the shipped one, or its sidecar and rows changed."""
    meta = copy.deepcopy(META if meta is None else meta)
    tmp_path.mkdir(parents=True, exist_ok=True)
    if isinstance(meta, dict) and meta.get("rows_file") == META["rows_file"]:
        meta["rows_file"] = f"{name}.csv"
    (tmp_path / f"{name}.csv").write_text("\n".join(ROWS if rows is None else rows) + "\n")
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(meta))
    return path


def _one_line(exc: BaseException, path: Path) -> str:
    text = str(exc)
    assert "\n" not in text and str(path.parent) in text, text
    return text


def _readers(path: Path):
    """Every reader of a microbenchmark set, as (name, call)."""
    return [
        ("validate", lambda: mlacalc.validate([path])),
        ("validate measured=", lambda: mlacalc.validate(measured=path)),
        ("load_hardware", lambda: load_hardware(path)),
    ]


def _mutate(meta: dict, where: str, value) -> dict:
    meta = copy.deepcopy(meta)
    *parents, last = where.split(".")
    node = meta
    for p in parents:
        node = node[p]
    if value is _DROP:
        node.pop(last)
    else:
        node[last] = value
    return meta


class _Drop:
    """A field removed from the sidecar (its repr is the test id: the same in every process)."""

    def __repr__(self) -> str:
        return "<dropped>"


_DROP = _Drop()
BAD_SIDECARS = [
    ("device", "H100"),
    ("device", []),
    ("device", _DROP),
    ("device.kind", "gpu"),
    ("device.kind", None),
    ("device.kind", _DROP),
    ("device.memory_bytes", -5),
    ("device.memory_bytes", "80GB"),
    ("ceilings", []),
    ("ceilings.matmul_flops_per_s", {}),
    ("ceilings.matmul_flops_per_s", "fast"),
    ("ceilings.matmul_flops_per_s", {"fp99": 1e12}),
    ("ceilings.matmul_flops_per_s", {"fp32": -1.0}),
    ("ceilings.matmul_flops_per_s", {"fp32": 0}),
    ("ceilings.matmul_flops_per_s", {"fp32": "1e12"}),
    ("ceilings.copy_bytes_per_s", 0),
    ("ceilings.copy_bytes_per_s", -1e9),
    ("ceilings.copy_bytes_per_s", None),
    ("ceilings.copy_bytes_per_s", _DROP),
    ("ceilings.launch_latency_s", -1e-6),
    ("ceilings.launch_latency_s", "1us"),
    ("ceilings.gemv_bytes_per_s", [1, 2]),
    ("ceilings.gemm_m_sweep", [1]),
    ("ceilings.gemm_m_sweep.fp32", []),
    ("ceilings.gemm_m_sweep.fp32.n", 0),
    ("ceilings.gemm_m_sweep.fp32.m", [4, 2, 1]),
    ("ceilings.gemm_m_sweep.fp32.m", []),
    ("ceilings.gemm_m_sweep.fp32.seconds", [1e-3]),
    ("ceilings.gemm_m_sweep.fp32.seconds", [-1.0] * 10),
    ("rows_file", 5),
    ("rows_file", ""),
    ("rows_file", "../elsewhere.csv"),
    ("rows_file", "/etc/hostname"),
    ("schema", "mlacalc.bench/2"),
]


@pytest.mark.parametrize(("where", "value"), BAD_SIDECARS, ids=lambda x: str(x)[:30])
def test_bench_sidecar_malformed_is_one_line_naming_the_field_in_every_reader(
    tmp_path, where, value
):
    path = _set(tmp_path, _mutate(META, where, value))
    field = where.split(".")[-1]
    for name, call in _readers(path):
        with pytest.raises(MlacalcError) as err:
            call()
        text = _one_line(err.value, path)
        assert field in text or where.split(".")[0] in text, (name, text)


def _gpu_set(tmp_path, latency: str, line: int = 2):
    """A copy of the committed GPU set with the ``launch_latency_s`` cell of CSV ``line`` (2:
    the first row; 0: every row) set to ``latency``."""
    meta = json.loads(GPU_SET.read_text(encoding="utf-8"))
    rows = list(csv.DictReader(io.StringIO(GPU_SET.with_suffix(".csv").read_text())))
    for i, r in enumerate(rows, start=2):
        if line in (0, i) and r["status"] == "ok":
            r["launch_latency_s"] = latency
    meta["rows_file"] = "gpu.csv"
    with open(tmp_path / "gpu.csv", "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    (tmp_path / "gpu.json").write_text(json.dumps(meta), encoding="utf-8")
    return tmp_path / "gpu.json"


@pytest.mark.parametrize("bad", ["-1e-6", "0", "fast", "nan", "inf", "1e400"])
def test_a_bad_per_row_launch_latency_is_named_with_its_line(tmp_path, bad):
    with pytest.raises(
        ConfigError, match=r"gpu\.csv: field 'launch_latency_s': line 2: must be a positive"
    ):
        mlacalc.validate([_gpu_set(tmp_path, bad)])


def test_rows_without_a_latency_take_the_sidecars_and_a_row_with_one_uses_it(tmp_path):
    """An empty latency cell (a set measured before the column) falls back to the sidecar's
    ceiling; a row's own latency moves its host-bound prediction."""
    (own,) = mlacalc.validate([GPU_SET])
    (blank,) = mlacalc.validate([_gpu_set(tmp_path, "", line=0)])
    assert len(blank.rows) == len(own.rows) and not blank.excluded
    first = next(csv.DictReader(io.StringIO(GPU_SET.with_suffix(".csv").read_text())))
    meta = json.loads(GPU_SET.read_text(encoding="utf-8"))
    kw = {"mode": "unfused", "dtype": "bf16", "impl": first["impl"], "calibration": meta}
    args = (
        first["model"],
        load_hardware(GPU_SET),
        first["phase"],
        int(first["seq_len"]),
        int(first["batch"]),
    )
    assert blank.rows[0].predicted_s == pytest.approx(predict_time(*args, **kw).seconds)
    row_latency = float(first["launch_latency_s"])
    assert own.rows[0].predicted_s == pytest.approx(
        predict_time(*args, **kw, launch_latency_s=row_latency).seconds
    )
    assert own.rows[0].predicted_s != pytest.approx(blank.rows[0].predicted_s)


@pytest.mark.parametrize(
    "raw",
    [b"", b"{", b"\xff\xfe\x00{", b"[]", b'"x"', b"[" * 50_000, b'{"schema": NaN}'],
    ids=["empty", "truncated", "not-utf8", "list", "string", "deep", "nan"],
)
def test_bench_sidecar_that_is_not_json_is_one_line_in_every_reader(tmp_path, raw):
    path = tmp_path / "set.json"
    path.write_bytes(raw)
    (tmp_path / "set.csv").write_text("\n".join(ROWS))
    for _, call in _readers(path):
        with pytest.raises(MlacalcError) as err:
            call()
        _one_line(err.value, path)


def test_bench_sidecar_malformed_on_the_command_line_is_one_line_exit_2(tmp_path, capsys):
    for i, (where, value) in enumerate(BAD_SIDECARS[::4]):
        path = _set(tmp_path, _mutate(META, where, value), name=f"s{i}")
        for args in (["validate", str(path)], ["validate", "--measured", str(path)]):
            assert main(args) == 2
            err = capsys.readouterr().err
            assert err.count("\n") == 1 and "internal error" not in err, err


# ---- the rows: a time that cannot be scored is left out and counted


def _rows_with(median: dict[int, str]) -> list[str]:
    """The shipped rows with the median time of some rows replaced."""
    reader = list(csv.reader(ROWS))
    col = reader[0].index("median_s")
    for i, value in median.items():
        reader[i][col] = value
    return [",".join(r) for r in reader]


@pytest.mark.parametrize("bad", ["nan", "-0.004", "0", "inf", "-inf", ""])
def test_bench_set_nan_or_negative_times_are_never_scored(tmp_path, bad):
    # a median of NaN and a -4100% error were scored before
    path = _set(tmp_path, rows=_rows_with({1: bad, 2: bad}))
    (v,) = mlacalc.validate([path])
    (ref,) = mlacalc.validate([SHIPPED])
    assert len(v.rows) == len(ref.rows) - 2
    assert sum(v.excluded.values()) == 2 and v.to_dict()["rows_excluded"] == v.excluded
    assert all(math.isfinite(r.error) and r.measured_s > 0 for r in v.rows)
    assert math.isfinite(v.median_abs_error)
    m = mlacalc.validate(measured=path)
    (t,) = m.tables
    # the mapping's reason names, as a parquet table's rows (measured_time_not_positive before)
    want = (
        "time_not_finite"
        if bad in ("nan", "inf", "-inf", "")
        else ("zero_time" if bad == "0" else "time_negative")
    )
    assert t.not_predicted_by_reason() == {want: 2} and want in TIME_REASONS
    assert math.isfinite(t.summary()["median_abs_error"])


def test_bench_set_text_time_names_its_line_and_a_negative_one_is_counted_by_line(tmp_path):
    # a text time was dropped and counted in the header with no line ("1 time not a number"),
    # where calibrate's kernel sets say "line 4: '12 ms' is not a number"
    path = _set(tmp_path, rows=_rows_with({3: "12 ms"}))
    for call in (lambda: mlacalc.validate([path]), lambda: mlacalc.validate(measured=path)):
        with pytest.raises(ConfigError) as exc:
            call()
        said = _one_line(exc.value, path)
        assert "set.csv: field 'median_s': line 4: '12 ms' is not a number" in said
    (v,) = mlacalc.validate([_set(tmp_path / "neg", rows=_rows_with({3: "-0.004"}))])
    assert v.excluded == {"time zero or negative": 1}
    assert v.excluded_lines == {"time zero or negative": (4,)}


def test_a_run_timed_on_a_busy_host_is_said_by_validate_and_bench(tmp_path, run, monkeypatch):
    # a quick run on a busy 2-core host scored 71.2% (every row 2-10x slower than its own
    # ceilings predict) and neither bench nor validate said a word
    reader = list(csv.reader(ROWS))
    col = reader[0].index("median_s")
    for r in reader[1:]:
        r[col] = repr(float(r[col]) * 3.5)
    busy = _set(tmp_path, rows=[",".join(r) for r in reader])
    (v,) = mlacalc.validate([busy])
    said = [w for w in v.warnings if "slower than its own measured ceilings predict" in w]
    assert len(said) == 1 and "set.csv" in said[0] and "2 thread(s)" in said[0]
    assert not mlacalc.validate([SHIPPED])[0].warnings
    pytest.importorskip("torch")  # the bench command needs it, though the run is stood in for
    import mlacalc.bench.runner as runner

    monkeypatch.setattr(runner, "run_benchmark", lambda *a, **k: (busy.with_suffix(".csv"), busy))
    _, err = run("bench", "--model", "gpt2", "--device", "cpu")
    assert "slower than its own measured ceilings predict" in err


def test_bench_set_with_no_usable_time_is_refused_counting_the_reasons(tmp_path):
    n = len(ROWS) - 1
    path = _set(tmp_path, rows=_rows_with(dict.fromkeys(range(1, n + 1), "nan")))
    with pytest.raises(ConfigError, match=rf"no ok rows to validate \(excluded: {n} time not fin"):
        mlacalc.validate([path])


@pytest.mark.parametrize(
    ("column", "value"), [("batch", "abc"), ("seq_len", "-4"), ("batch", "1.5"), ("seq_len", "")]
)
def test_bench_rows_malformed_size_is_one_line_naming_line_and_column(tmp_path, column, value):
    reader = list(csv.reader(ROWS))
    reader[3][reader[0].index(column)] = value
    path = _set(tmp_path, rows=[",".join(r) for r in reader])
    with pytest.raises(ConfigError, match=rf"field '{column}': line 4: must be a positive"):
        mlacalc.validate([path])


@pytest.mark.parametrize(
    "rows",
    [
        ["model,impl"],  # columns missing
        [ROWS[0], "deepseek-v2-lite,mla"],  # a short row
        None,  # not UTF-8 (written below)
    ],
    ids=["columns", "short", "not-utf8"],
)
def test_bench_rows_file_malformed_is_one_line(tmp_path, rows):
    path = _set(tmp_path, rows=rows or ROWS)
    if rows is None:
        (tmp_path / "set.csv").write_bytes(b"\xff\xfe" + "\n".join(ROWS).encode("utf-16"))
    for _, call in _readers(path)[:2]:
        with pytest.raises(MlacalcError) as err:
            call()
        _one_line(err.value, path)


# ---- calibrate's observations


def _obs(kind="gemm", dtype="bf16", n=40, seconds=None, device="H100-SXM") -> Observations:
    m = np.linspace(16, 4096, n)
    size = np.full(n, 4096.0)
    flops = 2 * m * size * size
    nbytes = 2 * (m * size + size * size + m * size)
    batch = KernelBatch(kind, dtype, flops, nbytes, np.ones(n), {"m": m, "n": size, "k": size})
    secs = flops / 500e12 + 5e-6 if seconds is None else np.asarray(seconds, dtype=float)
    return Observations(device, "gemm_perf", batch, secs)


def test_calibrate_refuses_ten_parameters_on_one_row_as_underdetermined():
    with pytest.raises(InvalidArgumentError, match=r"underdetermined: 1 row\(s\) for the 10 "):
        mlacalc.calibrate([_obs(n=1)], use_scipy=False)


def test_calibrate_leaves_an_underdetermined_class_out_and_says_so():
    prof = mlacalc.calibrate([_obs(), _obs(dtype="fp16", n=2)], use_scipy=False)
    assert list(prof.classes) == ["gemm:bf16"]
    assert any("gemm:fp16 not fitted (underdetermined: 2 row(s)" in n for n in prof.notes)


@pytest.mark.parametrize("bad", [math.nan, -1e-5, 0.0, math.inf, -math.inf])
def test_calibrate_with_zero_negative_nan_or_infinite_timings_excludes_and_counts(bad):
    times = _obs().seconds.copy()
    times[:10] = bad
    prof = mlacalc.calibrate([_obs(seconds=times)], use_scipy=False)
    assert prof.residuals["H100-SXM"]["gemm:bf16"]["rows"] == 30
    assert any("10 row(s) of gemm:bf16 (gemm_perf) excluded: time" in n for n in prof.notes)
    assert all(math.isfinite(v) for v in prof.classes["gemm:bf16"].values())
    with pytest.raises(InvalidArgumentError, match=r"^measured_sets: no kernel rows .*40 time"):
        mlacalc.calibrate([_obs(seconds=np.full(40, bad))], use_scipy=False)


def test_calibrate_of_unknown_kind_warp_drive_invents_no_class():
    prof = mlacalc.calibrate([_obs(), _obs(kind="warp_drive", dtype="fp32")], use_scipy=False)
    assert not any(k.startswith("warp_drive") for k in prof.classes)
    assert any("unknown kernel kind 'warp_drive'" in n for n in prof.notes)
    with pytest.raises(InvalidArgumentError, match=r"unknown kernel kind 'warp_drive'"):
        mlacalc.calibrate([_obs(kind="warp_drive", dtype="fp32")], use_scipy=False)


def _kernel_set(tmp_path: Path, rows: list[dict], columns=None) -> Path:
    """A calibrate-preset kernel set (sidecar and rows) on the shipped set's CPU ceilings."""
    meta = copy.deepcopy(META)
    meta.update(preset="calibrate", rows_file="k.csv")
    columns = columns or ["kind", "dtype", "flops", "bytes", "calls", "m", "n", "k", "status",
                          "median_s"]  # fmt: skip
    with open(tmp_path / "k.csv", "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=columns, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    path = tmp_path / "k.json"
    path.write_text(json.dumps(meta))
    return path


def _gemm_rows(n=12, **over) -> list[dict]:
    out = []
    for i in range(n):
        m = 64 * (i + 1)
        row = dict(kind="gemm", dtype="fp32", m=m, n=1024, k=1024, calls=1, status="ok")
        row.update(flops=2 * m * 1024 * 1024, bytes=4 * (2 * m * 1024 + 1024 * 1024))
        row["median_s"] = row["flops"] / 2e11 + 2e-5
        out.append({**row, **over})
    return out


@pytest.mark.parametrize(
    ("rows", "columns", "match"),
    [
        (_gemm_rows(kind="warp_drive"), None, "unknown kernel kind 'warp_drive'"),
        (_gemm_rows(median_s="nan"), None, "time not finite"),
        (_gemm_rows(median_s="-1"), None, "time zero or negative"),
        (_gemm_rows(flops="-1"), None, "FLOPs, bytes or calls negative or not finite"),
        (_gemm_rows(), ["dtype", "flops", "bytes", "status", "median_s"], "field 'kind'"),
        (_gemm_rows(n=3), None, "underdetermined: 3 row"),
    ],
    ids=["unknown-kind", "nan", "negative", "junk", "no-kind", "three-rows"],
)
def test_calibrate_kernel_set_file_malformed_is_one_line(tmp_path, rows, columns, match):
    path = _kernel_set(tmp_path, rows, columns)
    with pytest.raises(MlacalcError, match=match) as err:
        mlacalc.calibrate(str(path), use_scipy=False)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("rows", "columns", "match"),
    [
        # text in a number column was NaN, reported as "time not finite (NaN or infinite)"
        (_gemm_rows(median_s="fast"), None, r"k\.csv: field 'median_s': line 2: 'fast' is not a "),
        (_gemm_rows(flops="abc"), None, r"k\.csv: field 'flops': line 2: 'abc' is not a number"),
        # an unknown dtype was fitted as a class of its own and only warned underdetermined
        (_gemm_rows(dtype="bf17"), None, r"k\.csv: field 'dtype': line 2: 'bf17' is not a dtype"),
        # a header alone was "measured_sets: no kernel rows to fit", naming no file
        ([], None, r"k\.csv: has no rows \(its header alone\)"),
        (_gemm_rows(status="oom"), None, r"k\.csv: has no row with status ok \(12 row"),
    ],
    ids=["text-time", "text-flops", "bf17", "header-only", "none-ok"],
)
def test_calibrate_kernel_set_bad_cell_names_file_line_and_column(tmp_path, rows, columns, match):
    path = _kernel_set(tmp_path, rows, columns)
    with pytest.raises(MlacalcError, match=match) as err:
        mlacalc.calibrate(str(path), use_scipy=False)
    assert "\n" not in str(err.value)


def test_calibrate_kernel_set_empty_file_says_it_is_empty(tmp_path):
    # an empty CSV was reported as "column 'kind' is missing"
    path = _kernel_set(tmp_path, [])
    (tmp_path / "k.csv").write_text("")
    with pytest.raises(MlacalcError, match=r"k\.csv: is empty"):
        mlacalc.calibrate(str(path), use_scipy=False)


def test_calibrate_kernel_set_with_no_usable_time_names_the_set(tmp_path, capsys):
    # "measured_sets: no kernel rows a fit can use (excluded: 12 time zero or negative)" named
    # no file
    path = _kernel_set(tmp_path, _gemm_rows(median_s="-1"))
    with pytest.raises(InvalidArgumentError, match=r"can use in .*k\.json \(excluded: 12 time"):
        mlacalc.calibrate(str(path), use_scipy=False)
    assert main(["calibrate", str(path), "-o", str(tmp_path / "p.json")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "k.json" in err


def test_calibrate_kernel_set_rows_left_out_are_said_by_their_lines(tmp_path):
    # the rows a fit left out were counted without their lines ("1 row(s) of gemm:fp32
    # excluded: time zero or negative"), where validate names them: the rows file's lines now
    rows = _gemm_rows(n=14)
    for i in (2, 9):
        rows[i]["median_s"] = "-1"
    rows[5]["median_s"] = "nan"
    prof = mlacalc.calibrate(str(_kernel_set(tmp_path, rows)), use_scipy=False)
    said = [n.split(" excluded: ", 1)[1] for n in prof.notes if " excluded: " in n]
    # the header is line 1: row i is line i + 2
    assert sorted(said) == [
        "time not finite (NaN or infinite) (k.csv line 7)",
        "time zero or negative (k.csv lines 4, 11)",
    ]


@pytest.mark.parametrize("command", ["calibrate", "validate"])
@pytest.mark.parametrize("case", ["missing", "lonely", "other-rows"])
def test_a_csv_argument_names_the_csv_and_what_is_accepted(tmp_path, capsys, command, case):
    # a CSV without a sidecar (or none at all) was "my.json: cannot be read": a file never given
    csv_path = tmp_path / "my.csv"
    if case != "missing":
        csv_path.write_text("kind,dtype\n")
    if case == "other-rows":
        _kernel_set(tmp_path, _gemm_rows()).rename(tmp_path / "my.json")
    args = ["calibrate", str(csv_path), "-o", str(tmp_path / "p.json")]
    if command == "validate":
        args = ["validate", "--measured", str(csv_path)]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "my.csv" in err and "my.json:" not in err, err
    assert "parquet" in err or "pass my.json itself" in err, err


def test_calibrate_kernel_set_file_fits_its_usable_rows(tmp_path):
    rows = _gemm_rows() + _gemm_rows(n=2, median_s="nan")
    prof = mlacalc.calibrate(str(_kernel_set(tmp_path, rows)), use_scipy=False)
    assert list(prof.classes) == ["gemm:fp32"]
    assert any("2 row(s) of gemm:fp32" in n and "time not finite" in n for n in prof.notes)


# ---- the path arguments


@pytest.mark.parametrize("value", ["", "  ", [""], ["", str(SHIPPED)], b"x", 5, {"a": 1}])
def test_validate_measured_empty_string_does_not_validate_the_working_directory(
    value, monkeypatch, tmp_path
):
    # '' was Path(''): the working directory, read as a measured set (47 tables in a checkout)
    monkeypatch.chdir(tmp_path)
    for call in (lambda: mlacalc.validate(measured=value), lambda: mlacalc.calibrate(value)):
        with pytest.raises(InvalidArgumentError, match=r"^measured(_sets)?(\[\d\])?: must be"):
            call()


@pytest.mark.parametrize("value", ["", " ", [""]])
def test_validate_files_empty_string_is_not_the_working_directory(value):
    with pytest.raises(InvalidArgumentError, match=r"^files\[0\]: must be a path"):
        mlacalc.validate(value)


def test_validate_measured_empty_string_on_the_command_line_names_the_flag(capsys):
    assert main(["validate", "--measured", ""]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--measured" in err and "internal" not in err


def test_calibrate_command_says_which_rows_it_left_out(tmp_path, capsys):
    rows = _gemm_rows() + _gemm_rows(n=3, median_s="nan") + _gemm_rows(n=2, kind="warp_drive")
    path = _kernel_set(tmp_path, rows)
    assert main(["calibrate", str(path), "-o", str(tmp_path / "out.json")]) == 0
    err = capsys.readouterr().err
    assert "3 row(s) of gemm:fp32" in err and "time not finite" in err
    assert "unknown kernel kind 'warp_drive'" in err


def test_each_table_read_for_a_fit_is_told_to_progress():
    pytest.importorskip("pyarrow")  # the table is a parquet file
    from reference_data import MEASURED

    from mlacalc.measured.observations import observations_of

    lines: list[str] = []
    obs = observations_of(MEASURED / "a100_sxm" / "mla_bmm", progress=lines.append)
    assert obs and lines == ["table 1/1: a100_sxm mla_bmm_perf (424 rows)"]


@pytest.mark.slow
def test_calibrate_command_prints_a_progress_line_per_table_and_class(tmp_path, capsys):
    """A folder's tables took minutes with nothing printed: each table read and class fitted
    is a line on stderr, the output on stdout as before."""
    pytest.importorskip("pyarrow")
    from reference_data import MEASURED

    folder = MEASURED / "a100_sxm" / "mla_bmm"
    assert main(["calibrate", str(folder), "-o", str(tmp_path / "p.json")]) == 0
    out, err = capsys.readouterr()
    lines = [line for line in err.splitlines() if line.startswith("calibrate: ")]
    tables = load_measured(folder).tables
    assert [line for line in lines if " table " in line] == [
        f"calibrate: table {i}/{len(tables)}: {t.system} {t.table} ({len(t):,} rows)"
        for i, t in enumerate(tables, 1)
    ]
    assert any(line.startswith("calibrate: fitting gemm:") for line in lines)
    assert "calibrate:" not in out and "written to" in out


def test_validate_command_says_which_rows_it_left_out(tmp_path, capsys):
    path = _set(tmp_path, rows=_rows_with({1: "nan", 2: "-1"}))
    assert main(["validate", str(path)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert (
        "rows left out: 1 time not finite (NaN or infinite) (line 2); 1 time zero or negative "
        "(line 3)"
    ) in out


def test_measured_cache_key_changes_when_a_set_is_rewritten_within_the_same_second(tmp_path):
    # the app's validation cache was keyed by the path: a set rewritten in place was answered
    # from the cache; its key now carries the content
    import os

    from mlacalc.measured.tables import measured_fingerprint

    path = _set(tmp_path)
    before = measured_fingerprint(tmp_path)
    assert measured_fingerprint(tmp_path) == before == measured_fingerprint([tmp_path])
    stamp = os.stat(tmp_path / "set.csv").st_mtime_ns
    _set(tmp_path, rows=_rows_with({1: "0.5"}))
    os.utime(tmp_path / "set.csv", ns=(stamp, stamp))
    assert measured_fingerprint(tmp_path) != before
    assert measured_fingerprint(path) != measured_fingerprint(tmp_path / "missing")


def test_calibrate_kernel_set_mutated_at_random_fits_finite_or_is_one_line(tmp_path):
    """Random cells of a kernel set replaced with junk (a mutation round found 41 raw
    ValueErrors in 150 and NaN inside the fit): a finite profile or one line, no warning."""
    import random
    import warnings

    junk = ["", "nan", "-1", "0", "inf", "abc", "1e400", "gemm", "elementwise", "fp99", "1.5"]
    columns = ["kind", "dtype", "flops", "bytes", "calls", "m", "n", "k", "status", "median_s"]
    rng = random.Random(26)
    for trial in range(12):
        rows = _gemm_rows(n=20)
        for _ in range(rng.randint(1, 4)):
            rows[rng.randrange(len(rows))][rng.choice(columns)] = rng.choice(junk)
        folder = tmp_path / str(trial)
        folder.mkdir()
        path = _kernel_set(folder, rows)
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)
            try:
                prof = mlacalc.calibrate(str(path), use_scipy=False)
            except MlacalcError as exc:
                assert "\n" not in str(exc)
                continue
        assert all(math.isfinite(v) for c in prof.classes.values() for v in c.values())


@pytest.mark.slow
def test_app_measured_view_shows_a_malformed_sidecar_as_one_error(tmp_path):
    """The app's measured view given the path of malformed sidecars and rows: an error element
    naming the file, never an exception element."""
    pytest.importorskip("streamlit.testing.v1")
    from _helpers import app_test

    at = app_test()
    at.query_params["view"] = "Measured sets"
    at.run()
    (pick,) = [s for s in at.selectbox if s.key == "meas_set"]
    pick.set_value("other path ...").run()
    cases = [
        _set(tmp_path / "a", _mutate(META, "device", "H100")),
        _set(tmp_path / "b", _mutate(META, "ceilings.copy_bytes_per_s", -1)),
        _set(tmp_path / "c", _mutate(META, "rows_file", "../x.csv")),
    ]
    for path in cases:
        (box,) = [t for t in at.text_input if t.key == "meas_path"]
        box.set_value(str(path)).run()
        assert not at.exception
        assert any(str(path) in e.value for e in at.error)


# ---- calibrate-preset kernel sets under validate

H200_KERNELS = Path(__file__).resolve().parent.parent / "benchmarks" / "results"
H200_KERNELS = H200_KERNELS / "cuda-nvidia-h200-calibrate-bf16.json"


def test_validate_measured_predicts_a_calibrate_kernel_set_as_calibrate_reads_it(run):
    # the shipped calibrate-preset file was refused ("field 'model': is not an mlacalc.bench/1
    # rows file") while calibrate fitted on it
    v = mlacalc.validate(measured=str(H200_KERNELS))
    tables = {t.table: t for t in v.tables}
    assert set(tables) == {
        "calibrate:attention_decode",
        "calibrate:attention_prefill",
        "calibrate:elementwise",
        "calibrate:gemm",
    }
    assert tables["calibrate:gemm"].rows == 120 and v.overall["predicted"] == 172
    assert all(t.device == "H200" and t.profile == "default" for t in v.tables)
    assert "the set times PyTorch's kernels, predicted as trtllm's" in v.profile
    rows = v.to_dict(rows=True)["rows"]
    assert rows[0]["kind"] and rows[0]["measured_s"] > 0 and rows[0]["predicted_s"] > 0
    # the same through the CLI, by its .csv too; without --measured it says to pass --measured
    out, _ = run("validate", "--measured", H200_KERNELS.with_suffix(".csv"), "--format", "json")
    assert json.loads(out)["overall"]["predicted"] == 172
    _, err = run("validate", H200_KERNELS, code=2)
    assert err.count("\n") == 1 and "kernel set" in err and "--measured" in err


def test_validate_measured_kernel_set_counts_bad_times_and_refuses_its_own_fit(tmp_path):
    rows = _gemm_rows(n=12) + _gemm_rows(n=2, median_s="-1") + _gemm_rows(n=1, median_s="nan")
    path = _kernel_set(tmp_path, rows)
    v = mlacalc.validate(measured=str(path))
    (t,) = v.tables
    assert t.rows == 15
    assert t.not_predicted_by_reason() == {"time_negative": 2, "time_not_finite": 1}
    assert np.isfinite(t.errors).all() and len(t.errors) == 12
    fitted = tmp_path / "fitted.json"
    mlacalc.calibrate(str(path), use_scipy=False).save(fitted)
    with pytest.raises(InvalidArgumentError, match="proves nothing"):
        mlacalc.validate(measured=str(path), profile=str(fitted))
    with pytest.raises(MlacalcError, match=r"k\.json: field 'preset': is a kernel set"):
        load_measured(str(path))


def test_validate_refuses_its_own_fit_by_content_wherever_the_set_lies(tmp_path, monkeypatch):
    # the refusal was keyed on the path as typed: a copy in another folder, or the same file by
    # an absolute path, was scored (the trial's 15.7%, the fit's own residual)
    fitted_dir, copy_dir = tmp_path / "a", tmp_path / "b"
    fitted_dir.mkdir()
    copy_dir.mkdir()
    path = _kernel_set(fitted_dir, _gemm_rows(n=12))
    monkeypatch.chdir(tmp_path)
    mlacalc.calibrate("a/k.json", use_scipy=False).save(tmp_path / "fitted.json")
    _kernel_set(copy_dir, _gemm_rows(n=12))
    for given in (str(path.resolve()), "b/k.json"):
        with pytest.raises(InvalidArgumentError, match="proves nothing"):
            mlacalc.validate(measured=given, profile="fitted.json")
    # other rows of the same device are held out: scored
    _kernel_set(copy_dir, _gemm_rows(n=12, median_s=3e-4))
    assert mlacalc.validate(measured="b/k.json", profile="fitted.json").tables


def test_validate_refuses_a_cpu_profile_on_gpu_sets(tmp_path):
    # a CPU's fp32 GEMM fit was scored on the H200 kernel set (rc 0, its bf16 / fp8 GEMMs by
    # datasheet ratios from a CPU) and on a GPU table: refused as roofline -H L40S and plan do
    pytest.importorskip("pyarrow")  # the GPU table is a parquet file
    from reference_data import MEASURED

    cpu = tmp_path / "cpu.json"
    mlacalc.calibrate(str(_kernel_set(tmp_path, _gemm_rows())), use_scipy=False).save(cpu)
    gemm = MEASURED / "h100_sxm" / "gemm" / "trtllm" / "1.3.0rc20" / "gemm_perf.parquet"
    for measured in (str(H200_KERNELS), str(gemm)):
        with pytest.raises(InvalidArgumentError, match="fitted on CPU runs only"):
            mlacalc.validate(measured=measured, profile=str(cpu))


def _cpu_fit(folder: Path, name: str, threads: int) -> Path:
    """A profile fitted on a kernel set of a CPU named ``name`` run with ``threads``."""
    folder.mkdir()
    side = _kernel_set(folder, _gemm_rows())
    meta = json.loads(side.read_text())
    meta["device"].update(name=name, threads=threads)
    side.write_text(json.dumps(meta))
    out = folder / "p.json"
    mlacalc.calibrate(str(side), use_scipy=False).save(out)
    return out


def test_plan_and_validate_warn_of_a_profile_fitted_on_another_cpu_or_threads(tmp_path):
    # plan applied a Xeon's profile to the EPYC set without a word; validate scored a 2-thread
    # run with a 1-thread fit without one
    epyc = META["device"]["name"]
    xeon = _cpu_fit(tmp_path / "x", "Intel(R) Xeon(R) Processor (2 logical CPUs)", 2)
    assert json.loads(xeon.read_text())["fitted_on"][0]["device_name"].startswith("Intel")
    p = mlacalc.plan("minicpm3-4b", f"measured:{SHIPPED.stem}", 1, seq_len=576, profile=xeon)
    said = [w for w in p.warnings if "fitted on another CPU" in w]
    assert len(said) == 1 and "Xeon" in said[0] and epyc in said[0], p.warnings
    one = _cpu_fit(tmp_path / "one", epyc, 1)
    two = _kernel_set(tmp_path, _gemm_rows(n=12, median_s=3e-4))  # the shipped set's 2 threads
    v = mlacalc.validate(measured=str(two), profile=str(one))
    assert any("with 1 thread(s)" in w and "ran 2" in w for w in v.warnings), v.warnings
    same = _cpu_fit(tmp_path / "same", epyc, META["device"]["threads"])
    assert not any(
        "thread" in w for w in mlacalc.validate(measured=str(two), profile=str(same)).warnings
    )
    p = mlacalc.plan("minicpm3-4b", f"measured:{SHIPPED.stem}", 1, seq_len=576, profile=same)
    assert not any("CPU" in w and "fitted on" in w for w in p.warnings)


def test_a_cpu_profile_with_no_device_name_is_not_said_fitted_on_another_cpu(tmp_path):
    # a fit whose run recorded no device name was said "fitted on another CPU (... (no device
    # name recorded))": nothing told it was another; and its own run was called another CPU
    from mlacalc.timemodel.profile import other_cpu_warning

    unnamed = _cpu_fit(tmp_path / "u", "", META["device"]["threads"])
    p = mlacalc.plan("minicpm3-4b", f"measured:{SHIPPED.stem}", 1, seq_len=576, profile=unnamed)
    said = [w for w in p.warnings if "fitted on CPU runs" in w]
    assert len(said) == 1 and "could not tell which CPU it was fitted on" in said[0], p.warnings
    assert not any("fitted on another CPU" in w for w in p.warnings), p.warnings
    prof, own = load_profile(str(unnamed)), load_hardware(str(tmp_path / "u" / "k.json"))
    assert own.origin and other_cpu_warning(prof, own) == ""


def _in_ms(rows: list[str]) -> list[str]:
    """The rows with every median_s written in milliseconds."""
    head = rows[0].split(",")
    col = head.index("median_s")
    out = [rows[0]]
    for line in rows[1:]:
        cells = line.split(",")
        cells[col] = repr(float(cells[col]) * 1e3)
        out.append(",".join(cells))
    return out


def test_the_time_unit_refusal_names_both_units_where_the_ratio_cannot_tell():
    # the unit was guessed by a cut at a median ratio of 30,000x: a set 2,000x-20,000x its bound
    # (milliseconds of a slow run, or microseconds of a fast one) was said to be one of them
    from mlacalc.measured.observations import time_unit_problem

    bound = np.full(3, 1e-5)
    said = {
        ratios: time_unit_problem(bound * np.array(ratios), bound)
        for ratios in ((40.0, 300.0, 1100.0), (4e4, 3e5, 1.1e6), (300.0, 5e3, 1.1e6), (3e3,) * 3)
    }
    assert said[(40.0, 300.0, 1100.0)].endswith("look like milliseconds, not seconds")
    assert said[(4e4, 3e5, 1.1e6)].endswith("look like microseconds, not seconds")
    for ratios in ((300.0, 5e3, 1.1e6), (3e3,) * 3):
        assert said[ratios].endswith("like milliseconds or microseconds, not seconds"), ratios
    assert time_unit_problem(bound * 10, bound) == ""


def test_a_cut_short_set_is_said_and_times_in_ms_are_refused(tmp_path):
    # a layer set cut mid-line was scored on 3 of its sidecar's ok rows, a kernel set on 17 of
    # 34, without a word; times in ms scored every row -99.9% and wrote a profile
    short = _set(tmp_path / "short", rows=[*ROWS[:4], ROWS[4][:40]])
    (v,) = mlacalc.validate([short])
    assert len(v.rows) == 3 and len(v.warnings) == 1
    assert f"3 ok rows read where its sidecar counts {META['counts']['ok']}" in v.warnings[0]
    assert "short/set.csv" in v.warnings[0]
    with pytest.raises(ConfigError) as exc:
        mlacalc.validate([_set(tmp_path / "ms", rows=_in_ms(ROWS))])
    said = _one_line(exc.value, tmp_path / "ms" / "x")
    assert "field 'median_s'" in said and "milliseconds, not seconds" in said
    rows = _gemm_rows(n=12)
    path = _kernel_set(tmp_path, rows)
    meta = json.loads(path.read_text())
    meta["counts"] = {"ok": 24}
    path.write_text(json.dumps(meta))
    v = mlacalc.validate(measured=str(path), profile="roofline")
    assert any("12 ok rows read where its sidecar counts 24" in w for w in v.warnings)
    assert any(n.startswith("rows: ") for n in mlacalc.calibrate(str(path), use_scipy=False).notes)
    (tmp_path / "kms").mkdir()
    ms = _kernel_set(tmp_path / "kms", [{**r, "median_s": r["median_s"] * 1e3} for r in rows])
    for call in (
        lambda: mlacalc.calibrate(str(ms), use_scipy=False),
        lambda: mlacalc.validate(measured=str(ms)),
    ):
        with pytest.raises(ConfigError, match=r"k\.csv: field 'median_s': .*milliseconds"):
            call()


def test_profile_wording_names_a_string_a_missing_or_misspelt_key_and_a_missing_file(tmp_path):
    good = json.loads((PROFILES / "fit-h100-sxm.json").read_text())
    cases = {
        "str": ({**good, "classes": {"gemm:bf16": {"eff_compute": "0.5"}}}, "got the string '0.5'"),
        "none": ({k: v for k, v in good.items() if k != "classes"}, "field 'classes': is missing"),
        "typo": (
            {**{k: v for k, v in good.items() if k != "classes"}, "clases": good["classes"]},
            "field 'clases': is not a profile key (did you mean 'classes'?)",
        ),
    }
    for name, (data, said) in cases.items():
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(data))
        with pytest.raises(ConfigError) as exc:
            load_profile(str(path))
        assert said in _one_line(exc.value, path)
    with pytest.raises(InvalidArgumentError, match=r"^profile: no file 'nope\.json'"):
        load_profile("nope.json")
    # the library names its argument profile, not the CLI's --profile
    cpu = tmp_path / "cpu.json"
    mlacalc.calibrate(str(_kernel_set(tmp_path, _gemm_rows())), use_scipy=False).save(cpu)
    with pytest.raises(InvalidArgumentError, match=r"^profile: profile 'custom' was fitted on CPU"):
        mlacalc.predict_time("deepseek-v3", "H100-SXM", "decode", 1024, profile=str(cpu))


def test_calibrate_on_a_run_of_attention_layers_names_the_file_and_its_preset(run):
    # it said "measured_sets: no kernel rows to fit in ...json"; the file's preset is the reason
    _, err = run("calibrate", SHIPPED, "-o", "unused.json", code=2)
    assert err.count("\n") == 1 and "field 'preset': is a microbenchmark run of attention" in err


def test_calibrate_kernel_set_names_the_first_bad_cell_in_the_files_order(tmp_path):
    # the cells were read class by class (elementwise before gemm): a later line was named
    rows = _gemm_rows()
    rows[1]["median_s"] = "fast"
    rows.append({**_gemm_rows(n=1)[0], "kind": "elementwise", "median_s": "slow"})
    with pytest.raises(MlacalcError, match=r"field 'median_s': line 3: 'fast' is not a number"):
        mlacalc.calibrate(str(_kernel_set(tmp_path, rows)), use_scipy=False)
