"""Cold start of the command line (a benchmark, not a timed test).

Median wall time of `mlacalc report deepseek-v3` in a fresh process, for each
output format. Target on the 2-core development machines: <= 0.4 s.

    python benchmarks/bench_cli.py
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import time


def cold(args: list[str], runs: int = 15) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(args, check=True, capture_output=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


if __name__ == "__main__":
    exe = shutil.which("mlacalc")
    if exe is None:
        raise SystemExit("install mlacalc first: pip install -e .")
    for fmt in ("table", "json"):
        print(f"mlacalc report deepseek-v3 --format {fmt}: median {cold([exe, 'report', 'deepseek-v3', '--format', fmt]):.3f} s")
    print(f"mlacalc list: median {cold([exe, 'list']):.3f} s")
