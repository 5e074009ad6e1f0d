"""The microbenchmark's ``calibrate`` preset: the kernel vocabulary of the time model, timed.

It times, on the device (CUDA when there is one, else the CPU), the kernels a calibration
profile is fitted on: GEMMs over a shape sweep (``[m, k] @ [k, n]`` from a matrix-vector
product to large squares), scaled-dot-product attention in decode (one query token over a
cache, grouped-query heads) and causal prefill through the fastest backend PyTorch picks on
the device, and large copies; on a GPU with FP8 tensor cores (compute capability 8.9 or more)
the GEMM sweep again in fp8 (e4m3 operands, one scale per tensor, bf16 out, through
``torch._scaled_mm``). On CUDA each kernel is timed as the published tables time theirs: a
CUDA graph of many calls replayed, so the host's dispatch is out of the time (``timer="events"``
times each call eagerly between two events instead, dispatch included). Collectives need several
GPUs in one process group; with one device they are recorded as skipped. Every row carries its
kernel class, dtype, exact FLOPs, minimal bytes and shape fields, so ``mlacalc calibrate`` reads
the set without a mapping:

    mlacalc bench --preset calibrate --device cuda --out results/
    mlacalc calibrate results/cuda-<device>-calibrate-bf16.json -o my-gpu.json

Files: ``<name>.csv`` (one row per kernel) and ``<name>.json`` (the ``mlacalc.bench/1``
sidecar of every microbenchmark run: device, ceilings, settings; ``preset: calibrate``,
``rows_schema: mlacalc.words.kernels/1``).
"""

from __future__ import annotations

import csv
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

from mlacalc.bench.runner import (
    SCHEMA,
    TORCH_DTYPES,
    Budget,
    device_info,
    measure_ceilings,
    synchronize,
    time_fn,
    time_graph,
    timing_stats,
)
from mlacalc.words.errors import InvalidArgumentError
from mlacalc.words.kernels import KERNEL_SET_SHAPE

__all__ = ["KERNEL_FIELDS", "ROWS_SCHEMA", "kernel_points", "run_calibrate"]

ROWS_SCHEMA = "mlacalc.words.kernels/1"
KERNEL_FIELDS = (
    "kind", "dtype", "flops", "bytes", "calls", *KERNEL_SET_SHAPE,
    "status", "median_s", "q1_s", "q3_s", "repeats", "note",
)  # fmt: skip


def kernel_points(device: str, tiny: bool = False, fp8: bool = False) -> list[dict]:
    """The kernels of the sweep: dicts of kind and shape fields, and ``dtype`` where it is not
    the run's (``tiny``: a few seconds on a CPU, for tests; ``fp8``: the GEMM sweep again in
    fp8, for a GPU that has FP8 tensor cores)."""
    gpu = device == "cuda"
    if tiny:
        gemms = [(m, 256, 256) for m in (1, 16, 128)]
        decode = [(1, 256, 4, 1, 64), (4, 512, 4, 2, 64)]
        prefill = [(1, 128, 4, 4, 64)]
        copies = [1 << 18]
    elif gpu:
        ms = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
        nks = (
            (4096, 4096),
            (8192, 8192),
            (16384, 4096),
            (4096, 16384),
            (1024, 7168),
            (7168, 2048),
            (128, 8192),
            (57344, 8192),
        )
        gemms = [(m, n, k) for n, k in nks for m in ms]
        decode = [
            (b, s, h, kv, 128)
            for b in (1, 8, 32, 128)
            for s in (512, 4096, 32768)
            for h, kv in ((32, 8), (64, 8), (32, 32))
        ]
        prefill = [
            (b, s, h, kv, 128)
            for b, s in ((1, 1024), (1, 4096), (4, 2048), (1, 16384))
            for h, kv in ((32, 8), (32, 32))
        ]
        copies = [1 << p for p in range(16, 31, 2)]
    else:
        ms = (1, 4, 16, 64, 256, 1024)
        nks = ((1024, 1024), (4096, 1024), (1024, 4096))
        gemms = [(m, n, k) for n, k in nks for m in ms]
        decode = [
            (b, s, h, kv, 64) for b in (1, 8) for s in (512, 4096) for h, kv in ((8, 2), (8, 8))
        ]
        prefill = [(1, s, 8, 8, 64) for s in (256, 1024)]
        copies = [1 << p for p in range(14, 25, 2)]
    out: list[dict] = [{"kind": "gemm", "m": m, "n": n, "k": k} for m, n, k in gemms]
    if fp8:
        out += [{"kind": "gemm", "m": m, "n": n, "k": k, "dtype": "fp8"} for m, n, k in gemms]
    out += [
        {
            "kind": "attention_decode",
            "batch": b,
            "kv_len": s,
            "n_heads": h,
            "n_kv": kv,
            "head_dim": d,
        }
        for b, s, h, kv, d in decode
    ]
    out += [
        {
            "kind": "attention_prefill",
            "batch": b,
            "kv_len": s,
            "n_heads": h,
            "n_kv": kv,
            "head_dim": d,
        }
        for b, s, h, kv, d in prefill
    ]
    out += [{"kind": "elementwise", "elements": e} for e in copies]
    return out


def _kernel(point: dict, dtype: str, dev: torch.device, gen: torch.Generator):
    """(a callable running the kernel on input set i, its row fields, bytes of one input set)"""
    tdt = TORCH_DTYPES[dtype]
    e = tdt.itemsize

    def rnd(*shape):
        if gen.device.type == "cuda":  # drawn where it is used: no host staging, no bus copy
            return torch.randn(*shape, generator=gen, device=dev, dtype=tdt)
        return torch.randn(*shape, generator=gen).to(dev, tdt)

    kind = point["kind"]
    if kind == "gemm":
        m, n, k = point["m"], point["n"], point["k"]
        fp8 = point.get("dtype") == "fp8"
        # operands in the row's dtype (fp8 operands write a bf16 product)
        bytes_ = m * k + n * k + m * n * 2 if fp8 else (m * k + n * k + m * n) * e
        row = {"m": m, "n": n, "k": k, "groups": 1, "flops": 2 * m * n * k, "bytes": bytes_}
        if fp8:
            x, w = rnd(m, k).to(torch.float8_e4m3fn), rnd(n, k).to(torch.float8_e4m3fn)
            one = torch.ones((), device=dev, dtype=torch.float32)
            return (
                lambda i: torch._scaled_mm(
                    x, w.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16
                )
            ), row
        x, w = rnd(m, k), rnd(n, k)
        return (lambda i: torch.nn.functional.linear(x, w)), row
    if kind in ("attention_decode", "attention_prefill"):
        b, s, h, kv, d = (point[f] for f in ("batch", "kv_len", "n_heads", "n_kv", "head_dim"))
        q_len = 1 if kind == "attention_decode" else s
        q, key, val = rnd(b, h, q_len, d), rnd(b, kv, s, d), rnd(b, kv, s, d)
        causal = kind == "attention_prefill"
        pairs = b * (s * (s + 1) // 2 if causal else s)
        row = {
            "batch": b,
            "q_len": q_len,
            "kv_len": s,
            "n_heads": h,
            "n_kv": kv,
            "head_dim_qk": d,
            "head_dim_v": d,
            "window": 0,
            "causal": int(causal),
            "flops": 4 * h * pairs * d,
            "bytes": (2 * b * h * q_len * d + 2 * b * kv * s * d) * e,
        }

        def run(i):
            return torch.nn.functional.scaled_dot_product_attention(
                q, key, val, is_causal=causal, enable_gqa=kv != h
            )

        return run, row
    n = point["elements"]
    src, dst = rnd(n), torch.empty(n, device=dev, dtype=tdt)
    row = {"elements": n, "flops": 0, "bytes": 2 * n * e}
    return (lambda i: dst.copy_(src)), row


def run_calibrate(
    *,
    dtype: str | None = None,
    device: str = "auto",
    threads: int | None = None,
    warmup: int = 2,
    repeats: int = 20,
    max_seconds: float = 1.0,
    out_dir: str | Path = ".",
    name: str | None = None,
    tiny: bool = False,
    max_minutes: float | None = None,
    timer: str = "auto",
    log: Callable[[str], None] = lambda s: print(s, file=sys.stderr),
) -> tuple[Path, Path]:
    """Time the kernel sweep and write ``<name>.csv`` and ``<name>.json``; return their paths.

    ``dtype`` defaults to bf16 on CUDA and fp32 on the CPU. Warm replays of the same inputs, as
    the published kernel tables are taken (rows carry ``warm_l2 = 1``). ``max_minutes`` bounds
    the run: kernels not reached in time are ``skipped`` rows saying so. ``timer``: ``graph``
    (CUDA only) replays a CUDA graph of many calls, the host's dispatch out of the time (each
    row's note says how many calls); ``events`` times each call eagerly; ``auto`` is ``graph``
    on CUDA, else the CPU's clock around each call.
    """
    budget = Budget.start(max_minutes)
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        log("mlacalc bench: no CUDA device is available; running on the CPU")
        device = "cpu"
    dev = torch.device(device)
    dtype = dtype or ("bf16" if dev.type == "cuda" else "fp32")
    if dtype not in TORCH_DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(TORCH_DTYPES)}")
    if timer not in ("auto", "graph", "events"):
        raise InvalidArgumentError("timer", "must be auto, graph or events")
    if timer == "graph" and dev.type != "cuda":
        raise InvalidArgumentError(
            "timer",
            "graph replays a CUDA graph and this run has no CUDA device; use auto or events",
        )
    graphs = dev.type == "cuda" and timer != "events"
    if dev.type == "cpu":
        torch.set_num_threads(threads or os.cpu_count() or 1)
    info = device_info(dev, torch.get_num_threads())
    fp8 = (
        dev.type == "cuda"
        and not tiny
        and hasattr(torch, "_scaled_mm")
        and torch.cuda.get_device_capability(dev) >= (8, 9)
    )
    ceilings = measure_ceilings(dev, [dtype]) if not tiny else _tiny_ceilings(dev, dtype)
    if fp8:
        # the fp8 rows' own ceiling: a device read from this sidecar (one the catalogue does
        # not name) would otherwise give fp8 the bf16 peak, and calibrate a wrong fit
        try:
            ceilings["matmul_flops_per_s"]["fp8"] = _fp8_matmul_flops(dev)
        except RuntimeError as exc:
            fp8 = False
            log(f"mlacalc bench: no fp8 GEMMs (the fp8 ceiling failed: {str(exc)[:120]})")
    points = kernel_points(dev.type, tiny=tiny, fp8=fp8)
    log(f"mlacalc bench --preset calibrate: {len(points)} kernels on {info['name']} ({dtype})")
    gen = torch.Generator(device=dev).manual_seed(11)
    rows = []
    for point in points:
        base = {f: "" for f in KERNEL_FIELDS}
        base.update(kind=point["kind"], dtype=point.get("dtype", dtype), calls=1, warm_l2=1)
        if budget is not None and budget.expired():
            base.update(status="skipped", note=budget.note)
            rows.append(base)
            continue
        try:
            fn, fields = _kernel(point, dtype, dev, gen)
            base.update(fields)
            if graphs:
                times, calls = time_graph(
                    fn, dev, warmup=warmup, repeats=repeats, max_seconds=max_seconds
                )
                base.update(note=f"CUDA graph of {calls} call{'s' if calls > 1 else ''}")
            else:
                times = time_fn(fn, dev, warmup=warmup, repeats=repeats, max_seconds=max_seconds)
            stats = timing_stats(times)
            base.update(
                status="ok",
                median_s=stats["median_s"],
                q1_s=stats["q1_s"],
                q3_s=stats["q3_s"],
                repeats=stats["repeats"],
            )
        except torch.OutOfMemoryError as exc:
            base.update(status="oom", note=str(exc).splitlines()[0][:200])
        except RuntimeError as exc:
            base.update(status="error", note=str(exc).splitlines()[0][:200])
        finally:
            if dev.type == "cuda":
                torch.cuda.empty_cache()
        rows.append(base)
    gpus = torch.cuda.device_count() if dev.type == "cuda" else 0
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    slug = "".join(c if c.isalnum() else "-" for c in info["name"].lower()).strip("-")
    while "--" in slug:
        slug = slug.replace("--", "-")
    name = name or f"{dev.type}-{slug[:40]}-calibrate-{dtype}"
    csv_path, json_path = out / f"{name}.csv", out / f"{name}.json"
    with open(csv_path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=KERNEL_FIELDS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    sidecar = {
        "schema": SCHEMA,
        "rows_schema": ROWS_SCHEMA,
        "rows_file": csv_path.name,
        "preset": "calibrate",
        "dtype": dtype,
        "device": info,
        "warmup": warmup,
        "max_repeats": repeats,
        "max_seconds_per_point": max_seconds,
        "statistic": "median of the timed repeats of the same inputs (warm caches)",
        "timer": (
            "CUDA graph replay: many calls captured in one graph (each row's note says how "
            "many), CUDA events around each replay, divided by the calls"
            if graphs
            else "CUDA events around each call"
            if dev.type == "cuda"
            else "time.perf_counter around each call"
        ),
        "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "ceilings": ceilings,
        "collectives": (
            f"not timed: they need several GPUs in one process group; this run saw {gpus} GPU(s)"
        ),
        "counts": {
            s: sum(r["status"] == s for r in rows) for s in ("ok", "oom", "error", "skipped")
        },
    }
    json_path.write_text(json.dumps(sidecar, indent=2) + "\n", encoding="utf-8")
    return csv_path, json_path


def _fp8_matmul_flops(dev: torch.device, n: int = 8192) -> float:
    """FLOP/s of an n x n x n fp8 product, the sweep's own fp8 GEMM (:func:`_kernel`): the
    median of ten calls after three warm-ups, each between two events."""
    gen = torch.Generator(device=dev).manual_seed(5)
    point = {"kind": "gemm", "m": n, "n": n, "k": n, "dtype": "fp8"}
    run, row = _kernel(point, "bf16", dev, gen)
    times = time_fn(run, dev, warmup=3, repeats=10, max_seconds=2.0)
    return row["flops"] / timing_stats(times)["median_s"]


def _tiny_ceilings(dev: torch.device, dtype: str) -> dict:
    """Quick ceilings for the tiny sweep: a 512 matmul, a 4M-element copy, a trivial op."""
    gen = torch.Generator(device="cpu").manual_seed(3)
    tdt = TORCH_DTYPES[dtype]
    a = torch.randn(512, 512, generator=gen).to(dev, tdt)
    mm = timing_stats(time_fn(lambda i: a @ a, dev, warmup=1, repeats=5, max_seconds=1))["median_s"]
    src = torch.randn(1 << 22, generator=gen).to(dev, tdt)
    dst = torch.empty_like(src)
    cp = timing_stats(time_fn(lambda i: dst.copy_(src), dev, warmup=1, repeats=5, max_seconds=1))
    one = torch.zeros(1, device=dev, dtype=tdt)
    lat = timing_stats(time_fn(lambda i: one.add_(1), dev, warmup=1, repeats=20, max_seconds=1))
    synchronize(dev)
    return {
        "matmul_flops_per_s": {dtype: 2 * 512**3 / mm},
        "matmul_n": 512,
        "copy_bytes_per_s": 2 * src.nbytes / cp["median_s"],
        "launch_latency_s": lat["median_s"],
        "gemv_bytes_per_s": {},
        "gemm_m_sweep": {},
    }
