"""The microbenchmark: presets, the numerics gate, honest labels, recorded skips, file schema."""

import csv
import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import mlacalc  # noqa: E402
from mlacalc.bench import runner  # noqa: E402
from mlacalc.bench.runner import CSV_FIELDS, BenchPoint, run_benchmark  # noqa: E402
from mlacalc.cli import main  # noqa: E402


def read(csv_path: Path, json_path: Path):
    with open(csv_path) as f:
        rows = list(csv.DictReader(f))
    return rows, json.loads(json_path.read_text())


def check_files(csv_path, json_path):
    rows, meta = read(csv_path, json_path)
    # a set measured before the last columns were added lacks them (validate falls back)
    assert list(rows[0]) == list(CSV_FIELDS)[: len(rows[0])]
    assert len(rows[0]) >= CSV_FIELDS.index("note") + 1
    assert meta["schema"] == "mlacalc.bench/1" and meta["rows_file"] == csv_path.name
    for key in ("name", "kind", "torch_version", "threads"):
        assert meta["device"][key] not in (None, "")
    ceilings = meta["ceilings"]
    assert ceilings["copy_bytes_per_s"] > 1e8 and ceilings["launch_latency_s"] > 0
    assert all(v > 1e8 for v in ceilings["matmul_flops_per_s"].values())
    for row in rows:
        assert row["status"] in ("ok", "skipped", "oom", "numerics_failed")
        if row["status"] == "ok":
            q1, med, q3 = float(row["q1_s"]), float(row["median_s"]), float(row["q3_s"])
            assert 0 < q1 <= med <= q3 and int(row["repeats"]) >= 3
            impl = None if row["impl"] == "standard" else row["impl"]
            model = mlacalc.load_model(row["model"]).with_changes(num_hidden_layers=1)
            assert int(row["flops"]) == mlacalc.attention_flops(
                model, row["phase"], int(row["seq_len"]), int(row["batch"]), impl=impl
            )
    return rows, meta


@pytest.mark.slow
def test_quick_preset_through_the_cli(tmp_path, capsys):
    """What CI runs on every change: the quick preset, then a check of the files it wrote (at
    most 5 timed calls and 1 s a point, not the default 20 and 3 s: the files are the same)."""
    assert (
        main(
            [
                "bench",
                "--preset",
                "quick",
                "--repeats",
                "5",
                "--max-seconds",
                "1",
                "--out",
                str(tmp_path),
                "--name",
                "quick",
                "--no-progress",
            ]
        )
        == 0
    )
    rows, meta = check_files(tmp_path / "quick.csv", tmp_path / "quick.json")
    assert meta["device"]["kind"] == "cpu" and meta["preset"] == "quick" and meta["dtype"] == "fp32"
    combos = {(r["model"], r["impl"], r["phase"]) for r in rows if r["status"] == "ok"}
    for impl in ("naive", "compressed", "absorbed", "absorbed_merged"):
        assert ("deepseek-v2-lite", impl, "decode") in combos and (
            "deepseek-v2-lite",
            impl,
            "prefill",
        ) in combos
    variants = {r["variant"] for r in rows}
    assert variants == {"mla", "mha", "gqa", "mqa"}
    assert all(n["passed"] for n in meta["numerics"])
    assert meta["device"]["threads"] == torch.get_num_threads()
    # a fresh run has every column, and the host's speed measured before each timed point
    assert list(rows[0]) == list(CSV_FIELDS)
    assert all(float(r["launch_latency_s"]) > 0 for r in rows if r["status"] == "ok")
    # each dtype's ceilings sized to its own rate, the sizes recorded
    ceilings = meta["ceilings"]
    sizes = ceilings["matmul_n_by_dtype"]
    assert set(sizes) == set(ceilings["matmul_flops_per_s"]) == {"fp32", "bf16"}
    assert all(512 <= n <= 2048 for n in sizes.values()) and ceilings["matmul_n"] == max(
        sizes.values()
    )
    for sweep in ceilings["gemm_m_sweep"].values():
        assert (
            sweep["n"] == 4096
            and sweep["m"] == [1, 2, 4, 8, 16, 32, 64, 128, 256, 512][: len(sweep["m"])]
        )


@pytest.mark.slow
def test_no_cuda_falls_back_to_cpu_and_says_so(tmp_path, capsys, monkeypatch):
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    # the fallback and its labels are checked here, not the ceilings (measured by the test above)
    monkeypatch.setattr(runner, "_measure_and_log_ceilings", _quick_ceilings)
    code = main(
        [
            "bench",
            "--model",
            "gpt2",
            "--phase",
            "decode",
            "--seq-len",
            "64",
            "--device",
            "cuda",
            "--repeats",
            "3",
            "--out",
            str(tmp_path),
            "--name",
            "x",
            "--no-progress",
        ]
    )
    assert code == 0
    assert "no CUDA device" in capsys.readouterr().err
    _, meta = check_files(tmp_path / "x.csv", tmp_path / "x.json")
    assert meta["device"]["kind"] == "cpu" and meta["device"]["cuda_version"] is None


@pytest.mark.slow
def test_broken_implementation_is_reported_and_not_timed(tmp_path, monkeypatch):
    original = runner.build_layer

    def broken(model, impl, dtype, device, seed=0):
        layer = original(model, impl, dtype, device, seed)
        if impl == "absorbed":
            with torch.no_grad():
                layer.kv_b_proj.weight.mul_(
                    1.5
                )  # absorption now uses other weights than the expansion
        return layer

    monkeypatch.setattr(runner, "build_layer", broken)
    # the numerics gate is checked here, not the ceilings (measured by the two tests above)
    monkeypatch.setattr(runner, "_measure_and_log_ceilings", _quick_ceilings)
    points = [
        BenchPoint("deepseek-v2-lite", impl, "decode", 1, 64) for impl in ("naive", "absorbed")
    ]
    csv_path, json_path = run_benchmark(
        points, repeats=3, out_dir=tmp_path, name="b", progress=False, log=lambda s: None
    )
    rows, meta = read(csv_path, json_path)
    status = {r["impl"]: r["status"] for r in rows}
    assert status == {"naive": "ok", "absorbed": "numerics_failed"}
    assert rows[1]["median_s"] == ""
    gate = {n["impl"]: n["passed"] for n in meta["numerics"]}
    assert gate["absorbed"] is False and gate["naive"] is True


def _one_point(tmp_path: Path, name: str):
    """The rows and sidecar of a sweep of one GPT-2 decode point (batch 2, 256 keys)."""
    csv_path, json_path = run_benchmark(
        [BenchPoint("gpt2", "standard", "decode", 2, 256)],
        repeats=3,
        out_dir=tmp_path,
        name=name,
        progress=False,
        log=lambda s: None,
    )
    return read(csv_path, json_path)


@pytest.mark.slow
def test_point_that_does_not_fit_is_a_recorded_skip(tmp_path, monkeypatch):
    monkeypatch.setattr(runner, "_available_bytes", lambda device: 1 << 20)
    # the skip's bookkeeping is checked here, not the ceilings (measured by the tests above)
    monkeypatch.setattr(runner, "_measure_and_log_ceilings", _quick_ceilings)
    rows, meta = _one_point(tmp_path, "s")
    assert (
        rows[0]["status"] == "skipped"
        and "GiB" in rows[0]["note"]
        and meta["counts"]["skipped"] == 1
    )


def _quick_ceilings(dev, dtype, log):
    """Ceilings for tests of the sweep's bookkeeping (the measured ones take seconds)."""
    return {
        "matmul_flops_per_s": {"fp32": 1e11},
        "matmul_n": 64,
        "gemv_bytes_per_s": {"fp32": 1e10},
        "copy_bytes_per_s": 1e10,
        "launch_latency_s": 1e-6,
    }


def test_a_time_budget_runs_cheapest_first_and_records_what_it_did_not_reach(tmp_path, monkeypatch):
    """--max-minutes: the points run cheapest first, the rows come back in the points' order,
    and points past the deadline are skipped rows that say why."""
    monkeypatch.setattr(runner, "_measure_and_log_ceilings", _quick_ceilings)
    timed = []
    real = runner.time_point

    def spy(model, point, *args, **kwargs):
        timed.append(point.seq_len)
        return real(model, point, *args, **kwargs)

    monkeypatch.setattr(runner, "time_point", spy)
    points = [BenchPoint("gpt2", "standard", "decode", 1, s) for s in (512, 64, 128)]
    kw = {"repeats": 3, "max_seconds": 0.05, "out_dir": tmp_path, "progress": False}
    csv_path, json_path = run_benchmark(points, name="b", max_minutes=10, log=print, **kw)
    rows, meta = read(csv_path, json_path)
    assert timed == [64, 128, 512]  # cheapest first
    assert [int(r["seq_len"]) for r in rows] == [512, 64, 128]  # written in the points' order
    assert all(r["status"] == "ok" for r in rows) and meta["max_minutes"] == 10
    timed.clear()
    csv_path, json_path = run_benchmark(points, name="c", max_minutes=1e-9, log=print, **kw)
    rows, meta = read(csv_path, json_path)
    assert timed == [] and meta["counts"]["skipped"] == 3
    assert all("time budget (--max-minutes 1e-09)" in r["note"] for r in rows)
    for bad in (0, -1, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="max_minutes must be a positive number"):
            run_benchmark(points, name="d", max_minutes=bad, log=print, **kw)


@pytest.mark.parametrize("where", ["time_point", "build_layer"])
def test_out_of_memory_is_a_recorded_row(tmp_path, monkeypatch, where):
    """The device running out of memory while a point is timed, or while its layer is built
    (once per implementation, inside the point's timing), is an ``oom`` row."""
    monkeypatch.setattr(runner, "_measure_and_log_ceilings", _quick_ceilings)
    monkeypatch.setattr(runner, "_gate_models", lambda models, dtype, dev, log: ([], set()))

    def oom(*args, **kwargs):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 80.00 GiB")

    monkeypatch.setattr(runner, where, oom)
    rows, meta = _one_point(tmp_path, "o")
    assert rows[0]["status"] == "oom" and "out of memory" in rows[0]["note"]
    assert meta["counts"]["oom"] == 1


def test_bench_cli_refuses_a_time_budget_that_is_not_positive(capsys):
    assert main(["bench", "--preset", "quick", "--max-minutes", "0"]) == 2
    assert "--max-minutes" in capsys.readouterr().err


def test_inputs_are_never_zeros():
    model = mlacalc.load_model("deepseek-v2-lite")
    layer = runner.build_layer(model, "absorbed", torch.float32, torch.device("cpu"))
    gen = torch.Generator().manual_seed(0)
    cache = runner._fill_cache(layer, 2, 32, 31, torch.float32, torch.device("cpu"), gen)
    assert cache.used == 31 and (cache.latent != 0).float().mean() > 0.99
    assert all((p != 0).any() for p in layer.parameters())


def test_timer_statistics():
    stats = runner.timing_stats([5.0, 1.0, 2.0, 3.0, 4.0])
    assert (
        stats["median_s"] == 3.0
        and stats["q1_s"] == 2.0
        and stats["q3_s"] == 4.0
        and stats["iqr_s"] == 2.0
    )
    assert stats["repeats"] == 5 and stats["min_s"] == 1.0
    calls = []
    times = runner.time_fn(
        lambda i: calls.append(i), torch.device("cpu"), warmup=2, repeats=6, max_seconds=10
    )
    assert len(times) == 6 and calls == [0, 1, 0, 1, 2, 3, 4, 5]


def test_a_ceilings_matmul_is_sized_to_the_devices_rate():
    """The square matmul doubles from ``start`` while the next call (8x the work) stays within
    the call's time: a fast device reaches the largest size (a GPU's 8192, as before), a slow
    one stops at the floor, and no size passes the largest."""
    made = []

    def make(n):
        made.append(n)
        return torch.ones(n, n), torch.ones(n, n)

    cpu = torch.device("cpu")
    assert runner.sized_matmul(cpu, make, largest=64, floor=16, call_seconds=1e9, start=8)[0] == 64
    assert made == [8, 16, 32, 64]
    made.clear()
    n, seconds = runner.sized_matmul(cpu, make, largest=64, floor=16, call_seconds=0, start=8)
    assert n == 16 and made == [8, 16] and seconds > 0
    assert runner.sized_matmul(cpu, make, largest=24, floor=16, call_seconds=1e9, start=8)[0] == 24
    assert runner._ceiling_warmup(0.2) == 1 and runner._ceiling_warmup(1e-3) == 2


def test_preallocated_cache_matches_growing_cache():
    layer = runner.build_layer(
        mlacalc.load_model("deepseek-v2-lite").with_changes(num_hidden_layers=1),
        "absorbed",
        torch.float64,
        torch.device("cpu"),
    )
    x = torch.randn(2, 9, 2048, dtype=torch.float64)
    full, grown = layer(x)
    cache = layer.empty_cache(2, capacity=9)
    steps = []
    for t in range(9):
        y, cache = layer(x[:, t : t + 1], cache, start=t)
        steps.append(y)
    torch.testing.assert_close(torch.cat(steps, 1), full)
    one_layer = mlacalc.load_model("deepseek-v2-lite").with_changes(num_hidden_layers=1)
    assert (
        cache.nbytes == grown.nbytes == mlacalc.kv_cache_bytes(one_layer, 9, 2, kv_dtype=64)
    )  # 64-bit elements


def test_bench_cli_errors(capsys):
    assert main(["bench"]) == 2
    assert "--preset" in capsys.readouterr().err
    assert main(["bench", "--preset", "quick", "--model", "gpt2"]) == 2
    assert "not both" in capsys.readouterr().err


def test_committed_measurements_are_well_formed():
    folder = Path(mlacalc.__file__).parent / "data" / "measurements"
    sidecars = sorted(folder.glob("*.json"))
    assert sidecars, "no committed measurement set"
    for json_path in sidecars:
        meta = json.loads(json_path.read_text())
        _, meta = check_files(folder / meta["rows_file"], json_path)
        assert meta["counts"]["ok"] >= 20


def test_a_prompt_longer_than_the_sliding_window_is_a_skipped_row_not_a_crash():
    """mistral-7b (window 4096) at a 16K prompt: the reference layer's prefill stops at the
    window, so the point is a skipped row that says so (it was an internal error that ended
    the whole run on the H200); a decode point over the same cache is still timed."""
    model = mlacalc.load_model("mistral-7b")
    assert model.sliding_window == 4096
    timing = runner._Timing(warmup=1, repeats=3, max_seconds=1.0, cache_bytes_target=0)
    long = BenchPoint("mistral-7b", "standard", "prefill", 1, 16384)
    row = runner._point_row(model, long, "fp32", torch.device("cpu"), timing, 1 << 40)
    assert row["status"] == "skipped" and row["median_s"] is None
    assert "longer than the sliding window (4096)" in row["note"]
    assert "a prompt of at most 4096" in row["note"]
    decode = BenchPoint("mistral-7b", "standard", "decode", 1, 16384)
    # no memory given: skipped for memory, so the window check let the decode point through
    row = runner._point_row(model, decode, "fp32", torch.device("cpu"), timing, 0)
    assert row["status"] == "skipped" and "GiB free" in row["note"]
