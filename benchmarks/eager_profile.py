"""Where a reference layer's eager time goes on a GPU: its kernels one by one, and the host.

For a few points of the microbenchmark's GPU preset, builds the layer and cache as
``mlacalc bench`` does, then records (1) the host's time to dispatch one forward (the calls
enqueued back to back, timed before the synchronisation), (2) the wall time of one forward with
its synchronisation, and (3) every kernel of one forward under ``torch.profiler`` (name, calls,
device time). Written as JSON (and a readable table) to ``--out``. Used to check the eager terms
of the time model (docs/time-model.md, "Eager PyTorch") against the committed GPU set.

    python benchmarks/eager_profile.py --out results/ [--device cuda] [--tiny | --prefill]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

from mlacalc.bench.runner import TORCH_DTYPES, BenchPoint, build_layer, point_inputs, synchronize
from mlacalc.models.loading import load_model

POINTS = [  # (model, impl, phase, batch, seq_len)
    ("llama-2-7b", "standard", "prefill", 1, 16384),
    ("llama-2-7b", "standard", "prefill", 8, 1024),
    ("llama-3-70b", "standard", "prefill", 1, 4096),
    ("deepseek-v3", "absorbed", "prefill", 8, 1024),
    ("deepseek-v3", "naive", "prefill", 1, 4096),
    ("deepseek-v3", "compressed", "prefill", 1, 4096),
    ("llama-2-7b", "standard", "decode", 32, 131072),
    ("deepseek-v2", "naive", "decode", 128, 4096),
    ("deepseek-v3", "compressed", "decode", 8, 65536),
    ("deepseek-v2", "absorbed", "decode", 32, 131072),
    ("deepseek-v2", "absorbed", "decode", 1, 1024),
    ("deepseek-v3", "absorbed_merged", "decode", 8, 128),
    ("llama-2-7b", "standard", "decode", 1, 128),
    ("llama-3-70b", "standard", "decode", 8, 1024),
]
#: ``--prefill``: every implementation's prompt on the full preset's models (none of the held-out
#: set's), for the eager model's prompt terms
PREFILL_POINTS = [
    (model, impl, "prefill", batch, seq)
    for model, impls in (
        ("deepseek-v2", ("naive", "compressed", "absorbed", "absorbed_merged")),
        ("deepseek-v3", ("naive", "compressed", "absorbed", "absorbed_merged")),
        ("llama-3-70b", ("standard",)),
        ("llama-2-7b", ("standard",)),
    )
    for impl in impls
    for batch, seq in ((1, 1024), (1, 4096), (8, 1024), (1, 16384))
]
TINY = [
    ("llama-2-7b", "standard", "prefill", 1, 64),
    ("deepseek-v2-lite", "absorbed", "decode", 2, 256),
    ("deepseek-v2-lite", "compressed", "prefill", 1, 64),
]


def profile_point(model_name, impl, phase, batch, seq_len, dtype, dev) -> dict:
    if dev.type == "cuda":
        torch.cuda.empty_cache()  # the last point's layer and cache
    model = load_model(model_name)
    tdt = TORCH_DTYPES[dtype]
    point = BenchPoint(model_name, impl, phase, batch, seq_len)
    layer = build_layer(model, impl, tdt, dev)
    used = seq_len - point.q_len
    ((x, cache),) = point_inputs(layer, model, point, tdt, dev)  # as mlacalc bench draws them

    def run():
        with torch.no_grad():
            layer(x, cache, start=used)

    for _ in range(3):
        run()
    synchronize(dev)
    host, wall = [], []
    for _ in range(7):
        synchronize(dev)
        t0 = time.perf_counter()
        run()
        t1 = time.perf_counter()
        synchronize(dev)
        t2 = time.perf_counter()
        host.append(t1 - t0)
        wall.append(t2 - t0)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev.type == "cuda" else [])
    with profile(activities=activities) as prof:
        run()
        synchronize(dev)
    kernels = []
    for ev in prof.key_averages():
        device_us = getattr(ev, "device_time_total", None)
        if device_us is None:
            device_us = getattr(ev, "cuda_time_total", 0.0)
        self_device = getattr(ev, "self_device_time_total", None)
        if self_device is None:
            self_device = getattr(ev, "self_cuda_time_total", 0.0)
        kernels.append(
            {
                "name": ev.key[:160],
                "calls": ev.count,
                "self_device_us": float(self_device),
                "device_us": float(device_us),
                "self_cpu_us": float(ev.self_cpu_time_total),
            }
        )
    kernels.sort(key=lambda k: -k["self_device_us"])
    aten_calls = sum(k["calls"] for k in kernels if k["name"].startswith("aten::"))
    host.sort()
    wall.sort()
    return {
        "model": model_name,
        "impl": impl,
        "phase": phase,
        "batch": batch,
        "seq_len": seq_len,
        "host_dispatch_s": host[len(host) // 2],
        "wall_s": wall[len(wall) // 2],
        "aten_calls": aten_calls,
        "device_total_us": sum(k["self_device_us"] for k in kernels),
        "kernels": kernels,
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--dtype", default=None)
    ap.add_argument("--tiny", action="store_true", help="small CPU points (a check of the script)")
    ap.add_argument(
        "--prefill", action="store_true", help="the prompt grid (PREFILL_POINTS) instead"
    )
    args = ap.parse_args(argv)
    dev = torch.device(args.device)
    dtype = args.dtype or ("bf16" if dev.type == "cuda" else "fp32")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results = []
    lines = []
    for pt in TINY if args.tiny else PREFILL_POINTS if args.prefill else POINTS:
        try:
            r = profile_point(*pt, dtype, dev)
        except Exception as exc:  # one failed point must not lose the others
            print(f"{pt}: {type(exc).__name__}: {str(exc)[:200]}", file=sys.stderr)
            continue
        results.append(r)
        lines.append(
            f"== {pt}: wall {r['wall_s'] * 1e3:.3f} ms, host dispatch "
            f"{r['host_dispatch_s'] * 1e3:.3f} ms, device {r['device_total_us'] / 1e3:.3f} ms, "
            f"aten calls {r['aten_calls']}"
        )
        for k in r["kernels"][:18]:
            lines.append(
                f"   {k['self_device_us']:10.1f} us {k['calls']:4d}x  cpu {k['self_cpu_us']:8.1f}"
                f"  {k['name'][:110]}"
            )
        print(lines[-19 if len(lines) >= 19 else 0], file=sys.stderr)
        (out / "eager_profile.json").write_text(json.dumps(results, indent=1) + "\n")
        (out / "eager_profile.txt").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
