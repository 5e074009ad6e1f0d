"""Cold start of `mlacalc report deepseek-v3` against `python -c "import numpy, yaml"`.

The two run in pairs, one right after the other in fresh processes, so that both see the same
load on the machine; each pair gives a ratio of wall times (and of CPU times), and the medians
of the ratios are printed. Target: a cold report within 2x of importing numpy and yaml.

    python benchmarks/bench_startup.py [pairs]
"""

from __future__ import annotations

import resource
import shutil
import statistics
import subprocess
import sys
import time

BASELINE = [sys.executable, "-c", "import numpy, yaml"]
TARGET = 2.0


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def once(args: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds of one fresh process."""
    start, start_cpu = time.perf_counter(), _cpu()
    subprocess.run(args, check=True, capture_output=True)
    return time.perf_counter() - start, _cpu() - start_cpu


def paired(command: list[str], pairs: int) -> dict[str, float]:
    """Median wall and CPU ratios of ``command`` to the baseline over ``pairs`` pairs (the
    order inside a pair alternates), with the medians of each side."""
    walls, cpus, ours, base = [], [], [], []
    for i in range(pairs):
        if i % 2:
            b, c = once(BASELINE), once(command)
        else:
            c, b = once(command), once(BASELINE)
        walls.append(c[0] / b[0])
        cpus.append(c[1] / b[1] if b[1] > 0 else float("nan"))
        ours.append(c[0])
        base.append(b[0])
    return {
        "wall_ratio": statistics.median(walls),
        "cpu_ratio": statistics.median(cpus),
        "command_wall_s": statistics.median(ours),
        "baseline_wall_s": statistics.median(base),
    }


if __name__ == "__main__":
    exe = shutil.which("mlacalc")
    if exe is None:
        raise SystemExit("install mlacalc first: python -m pip install -e .")
    pairs = int(sys.argv[1]) if len(sys.argv) > 1 else 21
    once([exe, "list"])  # warm the file cache and the bytecode once
    r = paired([exe, "report", "deepseek-v3"], pairs)
    print(
        f"mlacalc report deepseek-v3: {r['command_wall_s']:.3f} s; "
        f"python -c 'import numpy, yaml': {r['baseline_wall_s']:.3f} s (medians of {pairs})"
    )
    verdict = "within" if r["wall_ratio"] <= TARGET else "over"
    print(
        f"paired ratio: wall {r['wall_ratio']:.2f}x, cpu {r['cpu_ratio']:.2f}x "
        f"({verdict} the {TARGET:.0f}x target)"
    )
