"""Speed of the numeric path (a benchmark, not a timed test).

(a) median wall time of a cold process that imports mlacalc and computes a full
    report of deepseek-v3: parameters, KV cache at 128K x 8, decode and prefill FLOPs;
(b) points per second of the vectorised sweep.

    python benchmarks/bench_engine.py
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

COLD = """
import mlacalc
m = mlacalc.load_model("deepseek-v3")
p = mlacalc.param_counts(m)
kv = {
    impl: mlacalc.kv_cache_bytes(m, 131072, 8, impl=impl)
    for impl in ("naive", "compressed", "absorbed")
}
d = mlacalc.attention_cost(m, "decode", 131072, 8)
f = mlacalc.attention_cost(m, "prefill", 131072, 1)
print(p.total, p.active, kv["absorbed"], d.flops, f.flops)
"""


def cold_report(runs: int = 21) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", COLD], check=True, capture_output=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def sweep_rate(points: int = 2_000_000, repeats: int = 5) -> float:
    import numpy as np

    import mlacalc

    m = mlacalc.load_model("deepseek-v3")
    seq = np.arange(1, points + 1, dtype=np.float64)
    best = float("inf")
    for quantity in ("kv_cache_bytes", "attention_flops"):
        for _ in range(repeats):
            start = time.perf_counter()
            mlacalc.sweep(m, quantity, seq_len=seq, phase="decode")
            best = min(best, time.perf_counter() - start) if quantity == "attention_flops" else best
    return points / best


if __name__ == "__main__":
    print(f"(a) cold import + full deepseek-v3 report: median {cold_report():.3f} s over 21 runs")
    print(
        f"(b) vectorised sweep (attention_flops, decode): {sweep_rate() / 1e6:.1f} million points/s"
    )
