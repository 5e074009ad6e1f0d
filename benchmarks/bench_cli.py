"""Cold start of the command line (a benchmark, not a timed test).

Median wall time of each command in a fresh process (the `mlacalc` script), against the
median of a bare `python -c pass` measured the same way, so a loaded machine shows as a
large baseline. Target on the 2-core development machines: <= 0.4 s for every command.

    python benchmarks/bench_cli.py [runs]
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import time

COMMANDS = [
    ["report", "deepseek-v3"],
    ["report", "deepseek-v3", "--format", "json"],
    ["list"],
    ["compare", "llama-3-70b", "deepseek-v2"],
    ["roofline", "deepseek-v3", "--hardware", "H200", "--seq-len", "32k", "--batch", "64"],
    ["plan", "deepseek-v3", "--hardware", "H200", "--gpus", "8"],
]


def cold(args: list[str], runs: int) -> float:
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
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    print(f"python -c pass: median {cold([sys.executable, '-c', 'pass'], runs):.3f} s")
    for args in COMMANDS:
        print(f"mlacalc {' '.join(args)}: median {cold([exe, *args], runs):.3f} s (of {runs})")
