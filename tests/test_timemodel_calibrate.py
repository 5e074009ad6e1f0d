"""The calibrate preset of the microbenchmark, read back and fitted (CPU, tiny grid)."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from mlacalc.data import MEASUREMENTS  # noqa: E402
from mlacalc.hardware.catalogue import load_hardware  # noqa: E402
from mlacalc.measured.calibrate import calibrate  # noqa: E402
from mlacalc.measured.observations import kernel_set_device, read_kernel_set  # noqa: E402
from mlacalc.timemodel.fit import fit_profile  # noqa: E402
from mlacalc.timemodel.kernel_time import predict_batch  # noqa: E402
from mlacalc.timemodel.profile import load_profile  # noqa: E402
from mlacalc.words.errors import ConfigError, InvalidArgumentError  # noqa: E402


@pytest.fixture(scope="module")
def tiny_set(tmp_path_factory):
    from mlacalc.bench.kernel_sweep import run_calibrate

    out = tmp_path_factory.mktemp("calibrate")
    csv_path, json_path = run_calibrate(
        device="cpu",
        threads=1,
        tiny=True,
        out_dir=out,
        name="tiny",
        repeats=5,
        max_seconds=0.5,
        log=lambda s: None,
    )
    return csv_path, json_path


def test_rows_carry_exact_counts(tiny_set):
    csv_path, json_path = tiny_set
    meta = json.loads(json_path.read_text())
    assert meta["preset"] == "calibrate" and meta["rows_schema"] == "mlacalc.words.kernels/1"
    assert "several GPUs" in meta["collectives"]
    with open(csv_path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert {r["kind"] for r in rows} == {
        "gemm",
        "attention_decode",
        "attention_prefill",
        "elementwise",
    }
    assert all(r["status"] == "ok" and float(r["median_s"]) > 0 for r in rows)
    for r in rows:
        if r["kind"] == "gemm":
            m, n, k = int(r["m"]), int(r["n"]), int(r["k"])
            # an independent count: torch's FLOP counter on the same product
            from torch.utils.flop_counter import FlopCounterMode

            x, w = torch.zeros(m, k), torch.zeros(n, k)
            with FlopCounterMode(display=False) as fc:
                torch.nn.functional.linear(x, w)
            assert int(r["flops"]) == fc.get_total_flops()
            assert int(r["bytes"]) == 4 * (m * k + n * k + m * n)
        if r["kind"] == "attention_decode":
            b, s, h, d = (int(r[f]) for f in ("batch", "kv_len", "n_heads", "head_dim_qk"))
            assert int(r["flops"]) == 4 * b * h * s * d


def test_read_back_and_calibrate(tiny_set, tmp_path):
    _, json_path = tiny_set
    obs = read_kernel_set(json_path)
    assert sorted(o.batch.kind for o in obs) == [
        "attention_decode",
        "attention_prefill",
        "elementwise",
        "gemm",
    ]
    # a CPU: its own ceilings, named as -H names the set (it was the path as typed)
    assert re.fullmatch(rf"measured:{json_path.stem}-[0-9a-f]{{8}}", obs[0].device)
    assert all(o.device == obs[0].device for o in obs)
    assert load_hardware(obs[0].device).origin == str(json_path.resolve())
    # the tiny grid has fewer rows per class than the parameters each fit adjusts (3 GEMMs for
    # 9): calibrate refuses it as underdetermined (it reported residuals of about zero)
    with pytest.raises(InvalidArgumentError, match=r"underdetermined: 3 row\(s\) for the 10 "):
        calibrate([str(json_path)], name="cpu-tiny")
    # the fitter itself still runs on it: the read-back and the fit's mechanics
    prof = fit_profile(obs, name="cpu-tiny")
    path = prof.save(tmp_path / "cpu.json")
    again = load_profile(path)
    assert again.fitted_on[0]["tables"]["calibrate:gemm"] == 3
    gemm = next(o for o in obs if o.batch.kind == "gemm")
    assert again.fitted_devices == [gemm.device]
    pred = predict_batch(gemm.batch, gemm.device, again)
    assert pred.shape == (3,) and np.all(pred > 0)
    # the fit orders the GEMMs as measured (larger products take longer)
    assert list(np.argsort(pred)) == list(np.argsort(gemm.seconds))


def test_a_held_class_is_scored_not_fitted(tiny_set):
    # fit_profile(held=): a class the held profile has keeps its values and gets the residuals
    # of them (refit_classes.py --rescore: a class whose parameters were set one at a time);
    # the fit's own values scored so give the fit's own residuals (one scorer)
    import dataclasses

    obs = read_kernel_set(tiny_set[1])
    prof = fit_profile(obs, name="cpu-tiny")
    same = fit_profile(obs, name="cpu-tiny", held=prof)
    assert same.classes == prof.classes and same.residuals == prof.residuals
    key = next(k for k in prof.classes if k.startswith("gemm"))
    moved = {**prof.classes[key], "fixed_s": 10.0 * max(prof.classes[key].get("fixed_s", 0), 1e-4)}
    held = dataclasses.replace(prof, classes={key: moved}, devices={})
    out = fit_profile(obs, name="cpu-tiny", held=held)
    assert out.classes[key] == moved
    ((device, table),) = out.residuals.items()
    assert table[key]["median_abs_error"] > prof.residuals[device][key]["median_abs_error"] + 0.5
    others = [k for k in prof.classes if k != key]
    assert {k: out.classes[k] for k in others} == {k: prof.classes[k] for k in others}


def test_gpu_names_map_onto_the_catalogue(tmp_path):
    for name, entry in (
        ("NVIDIA H100 80GB HBM3", "H100-SXM"),
        ("NVIDIA H100 PCIe", "H100-PCIe"),
        ("NVIDIA A100-SXM4-80GB", "A100-SXM-80GB"),
        ("NVIDIA H200", "H200"),
        ("NVIDIA GeForce RTX 4090", "RTX-4090"),
    ):
        assert kernel_set_device({"device": {"kind": "cuda", "name": name}}, tmp_path) == entry
    other = tmp_path / "x.json"
    unknown = {"device": {"kind": "cuda", "name": "Tesla V100"}}
    assert kernel_set_device(unknown, other) == "measured:x"


def test_a_set_s_device_name_is_a_function_of_its_files(tmp_path, monkeypatch):
    # the name was the path as typed (run/k.json and /abs/run/k.json two devices); then the
    # first set read took measured:<stem> and a second of the same stem a digest, so the names
    # hung on the order and the process (a review found B predicted with A's fit elsewhere)
    from mlacalc.hardware import catalogue
    from mlacalc.hardware.catalogue import measured_device_name

    monkeypatch.setattr(catalogue, "_NAMED_SETS", {})
    shipped = MEASUREMENTS / "cpu-2core-epyc-fp32.json"
    rows = MEASUREMENTS / "cpu-2core-epyc-fp32.csv"

    def put(folder: str, meta: dict, csv_text: str) -> Path:
        (tmp_path / folder).mkdir()
        (tmp_path / folder / rows.name).write_text(csv_text)
        path = tmp_path / folder / shipped.name
        path.write_text(json.dumps(meta))
        return path

    meta, text = json.loads(shipped.read_text()), rows.read_text()
    assert measured_device_name(shipped) == "measured:cpu-2core-epyc-fp32"
    # a copy of a committed set's files is that set, and is never held over its name
    copy = tmp_path / "copy" / shipped.name
    copy.parent.mkdir()
    copy.write_bytes(shipped.read_bytes())
    (copy.parent / rows.name).write_text(text)
    assert measured_device_name(copy) == "measured:cpu-2core-epyc-fp32"
    assert load_hardware("measured:cpu-2core-epyc-fp32").origin == str(shipped)
    # another sidecar, or the same sidecar with other rows: other devices, named by digest
    faster = dict(meta, ceilings=dict(meta["ceilings"]))
    faster["ceilings"]["copy_bytes_per_s"] *= 2
    a = put("a", faster, text)
    b = put("b", meta, text + "\n")
    names = [measured_device_name(a), measured_device_name(b)]
    assert len(set(names)) == 2
    for name in names:
        assert re.fullmatch(r"measured:cpu-2core-epyc-fp32-[0-9a-f]{8}", name)
    # in any order, in any process (the registry emptied): the same names
    monkeypatch.setattr(catalogue, "_NAMED_SETS", {})
    assert [measured_device_name(b), measured_device_name(a)] == names[::-1]
    hw = load_hardware(names[0])
    assert hw.name == names[0] and hw.origin == str(a.resolve())
    bandwidth = load_hardware(shipped).memory_bandwidth_bytes_per_s
    assert hw.memory_bandwidth_bytes_per_s == 2 * bandwidth
    # a set deleted after it was named does not break the next one of its stem
    a.unlink()
    assert measured_device_name(b) == names[1]
    # such a name read in another run: one line saying to give the path
    monkeypatch.setattr(catalogue, "_NAMED_SETS", {})
    with pytest.raises(InvalidArgumentError, match=r"give the set by its path \(-H PATH"):
        load_hardware(names[1])


def test_kernel_sweep_under_a_spent_budget_records_every_kernel_as_not_reached(tmp_path):
    """--max-minutes on the calibrate preset: kernels past the deadline are skipped rows that
    say so (the same budget as the attention sweep's); a budget that is not a positive number
    of minutes is refused."""
    from mlacalc.bench.kernel_sweep import run_calibrate

    kw = {"device": "cpu", "threads": 1, "tiny": True, "out_dir": tmp_path, "log": lambda s: None}
    csv_path, json_path = run_calibrate(name="spent", max_minutes=1e-9, **kw)
    with open(csv_path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert rows and all(r["status"] == "skipped" for r in rows)
    assert all("time budget (--max-minutes 1e-09)" in r["note"] for r in rows)
    assert json.loads(json_path.read_text())["counts"]["skipped"] == len(rows)
    with pytest.raises(ValueError, match="max_minutes must be a positive number"):
        run_calibrate(name="bad", max_minutes=0.0, **kw)


def test_a_table_of_another_engine_than_engine_is_refused(run, tmp_path):
    """A parquet file named alone whose collection_meta.yaml names its engine: another
    --engine is refused naming both (a vLLM table was fitted into a profile labelled 'engine
    trtllm', and validated as SGLang's, without a word); no --engine reads it as its own."""
    from reference_data import MEASURED

    # vLLM's custom all-reduce table: quick to fit (0.7 s of CPU; its B200 mla_bmm table took
    # ~10 s), and its meta names vllm as every table's does
    table = MEASURED / "b200_sxm" / "comm" / "vllm" / "0.24.0" / "custom_allreduce_perf.parquet"
    out = tmp_path / "p.json"
    _, err = run("calibrate", table, "--engine", "trtllm", "-o", out, code=2)
    assert "holds vllm tables" in err and "engine trtllm's" in err and "--engine vllm" in err
    assert err.count("\n") == 1 and not out.exists()
    _, err = run("validate", "--measured", table, "--engine", "sglang", code=2)
    assert "holds vllm tables" in err and "engine sglang's" in err and err.count("\n") == 1
    run("calibrate", table, "-o", out, "--format", "json")
    assert json.loads(out.read_text())["engine"] == "vllm"


def test_tables_of_two_engines_named_together_are_refused(run, tmp_path):
    """vLLM's and SGLang's tables named together with no --engine: one profile cannot be both,
    so it is refused naming both engines (a review found the profile labelled 'trtllm', the
    default, without a word)."""
    from reference_data import MEASURED

    root = MEASURED / "h100_sxm" / "mla_bmm"
    vllm = root / "vllm" / "0.24.0" / "mla_bmm_perf.parquet"
    sglang = root / "sglang" / "0.5.14" / "mla_bmm_perf.parquet"
    out = tmp_path / "p.json"
    _, err = run("calibrate", vllm, sglang, "-o", out, code=2)
    assert "2 engines (sglang, vllm" in err and err.count("\n") == 1 and not out.exists()


def test_the_gpu_sweep_adds_fp8_gemms_and_the_timer_is_checked(tmp_path):
    """On a GPU with FP8 tensor cores the GEMM grid is swept again in fp8 (rows of their own
    dtype); the graph timer needs CUDA and says so in one line."""
    from mlacalc.bench.kernel_sweep import kernel_points, run_calibrate

    plain, fp8 = kernel_points("cuda"), kernel_points("cuda", fp8=True)
    gemms = [p for p in plain if p["kind"] == "gemm"]
    extra = [p for p in fp8 if p.get("dtype") == "fp8"]
    assert len(fp8) == len(plain) + len(gemms) and len(extra) == len(gemms)
    assert {(p["m"], p["n"], p["k"]) for p in extra} == {(p["m"], p["n"], p["k"]) for p in gemms}
    kw = {"device": "cpu", "threads": 1, "tiny": True, "out_dir": tmp_path, "log": lambda s: None}
    with pytest.raises(InvalidArgumentError, match="timer: graph replays a CUDA graph"):
        run_calibrate(name="g", timer="graph", **kw)
    with pytest.raises(InvalidArgumentError, match="timer: must be auto, graph or events"):
        run_calibrate(name="g", timer="cuda", **kw)


def test_a_second_dtype_of_a_kind_is_a_table_of_its_own(tiny_set, tmp_path):
    """The fp8 GEMMs of a bf16 run read back as ``calibrate:gemm:fp8`` beside
    ``calibrate:gemm`` (one table per kernel class and dtype, named apart)."""
    csv_path, json_path = tiny_set
    with open(csv_path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    extra = [dict(r, dtype="fp8") for r in rows if r["kind"] == "gemm"]
    out_csv = tmp_path / "two.csv"
    with open(out_csv, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows + extra)
    meta = json.loads(json_path.read_text())
    meta["rows_file"] = out_csv.name
    # a device the catalogue does not name (this CPU) has only the peaks its run measured:
    # fp8 GEMM rows without an fp8 ceiling are refused (their fit would take the fp32 peak)
    (tmp_path / "two.json").write_text(json.dumps(meta))
    with pytest.raises(ConfigError, match="has fp8 GEMM rows but no fp8 matmul ceiling"):
        read_kernel_set(tmp_path / "two.json")
    meta["ceilings"]["matmul_flops_per_s"]["fp8"] = (
        2 * meta["ceilings"]["matmul_flops_per_s"]["fp32"]
    )
    (tmp_path / "two.json").write_text(json.dumps(meta))
    names = sorted(o.table for o in read_kernel_set(tmp_path / "two.json"))
    assert "calibrate:gemm" in names and "calibrate:gemm:fp8" in names
    assert len(names) == 5
