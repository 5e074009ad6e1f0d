"""Cold start of the command line (a benchmark, not a timed test).

Median wall time and median CPU time (user + system) of each command in a fresh process
(the `mlacalc` script), against a bare `python -c pass` measured the same way. On a
loaded machine the wall time grows with the load and the CPU time much less, so both are
printed. Target on the 2-core development machines: <= 0.4 s for every command.

    python benchmarks/bench_cli.py [runs]
"""

from __future__ import annotations

import resource
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


def children_cpu_seconds() -> float:
    """User and system CPU seconds of the finished child processes so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def once(args: list[str], env: dict[str, str] | None = None) -> tuple[float, float]:
    """Wall and CPU seconds of one fresh process."""
    start, start_cpu = time.perf_counter(), children_cpu_seconds()
    subprocess.run(args, check=True, capture_output=True, env=env)
    return time.perf_counter() - start, children_cpu_seconds() - start_cpu


def cold(args: list[str], runs: int) -> tuple[float, float]:
    """Median wall and CPU seconds of ``runs`` fresh processes."""
    wall, cpu = zip(*(once(args) for _ in range(runs)))
    return statistics.median(wall), statistics.median(cpu)


if __name__ == "__main__":
    exe = shutil.which("mlacalc")
    if exe is None:
        raise SystemExit("install mlacalc first: pip install -e .")
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    wall, cpu = cold([sys.executable, "-c", "pass"], runs)
    print(f"python -c pass: wall {wall:.3f} s, cpu {cpu:.3f} s")
    for args in COMMANDS:
        wall, cpu = cold([exe, *args], runs)
        print(f"mlacalc {' '.join(args)}: wall {wall:.3f} s, cpu {cpu:.3f} s (median of {runs})")
