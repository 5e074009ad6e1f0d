"""The speed of a deployment search: DeepSeek-V3 on a budget of 64 H200 (2,000 in / 500 out,
TPOT 50 ms), the search ``mlacalc search deepseek-v3 -H H200 --gpus 64 --isl 2000 --osl 500
--tpot 50ms`` runs (a benchmark, not a timed test).

Three figures, each over ``runs`` (median, and the fastest and slowest):

(a) cold: the first search in a fresh process (its imports not counted; the model, the
    device, the profile and the kernel model's tables loaded by the search itself);
(b) warm: the next searches in one process (what the app's re-runs and a notebook see);
(c) CLI: the whole command in a fresh process, start-up and printing included.

(a) and (b) also as CPU seconds of the process, which other work on the machine changes less
than the wall time. Target: (a) and (b) <= 1 s on the 2-core development machine.

    python benchmarks/bench_search.py [runs]
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CLI = [sys.executable, "-m", "mlacalc", "search", "deepseek-v3", "-H", "H200", "--gpus", "64"]
CLI += ["--isl", "2000", "--osl", "500", "--tpot", "50ms"]
ONE = """
import time
from mlacalc.serving.search import search
for _ in range({n}):
    t, c = time.perf_counter(), time.process_time()
    r = search("deepseek-v3", "H200", 64, isl=2000, osl=500, tpot=0.05)
    print(time.perf_counter() - t, time.process_time() - c, len(r.points))
"""


def searches(n: int) -> list[tuple[float, float]]:
    """Wall and CPU seconds of ``n`` searches, one after another in a fresh process."""
    out = subprocess.run(
        [sys.executable, "-c", ONE.format(n=n)],
        check=True,
        capture_output=True,
        text=True,
        cwd=ROOT,
    ).stdout.split("\n")
    return [(float(line.split()[0]), float(line.split()[1])) for line in out if line.strip()]


def cli_seconds() -> float:
    start = time.perf_counter()
    subprocess.run(CLI, check=True, capture_output=True, cwd=ROOT)
    return time.perf_counter() - start


def show(name: str, xs: list[float]) -> None:
    print(
        f"{name:<9} median {statistics.median(xs):.3f} s  fastest {min(xs):.3f} s  "
        f"slowest {max(xs):.3f} s  ({len(xs)} runs)"
    )


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    cold, warm, cli = [], [], []
    for _ in range(runs):
        first, *rest = searches(4)
        cold.append(first)
        warm.extend(rest)
        cli.append(cli_seconds())
    for name, xs in (("cold", cold), ("warm", warm)):
        show(name, [w for w, _ in xs])
        show(name + " CPU", [c for _, c in xs])
    show("CLI", cli)


if __name__ == "__main__":
    main()
