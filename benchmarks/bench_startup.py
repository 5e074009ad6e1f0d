"""Cold start of `mlacalc report deepseek-v3` against `python -c "import numpy, yaml"`.

The two run in pairs, one right after the other in fresh processes, so that both see the same
load on the machine; each pair gives a ratio of wall times (and of CPU times), and the medians
of the ratios are printed. Target: a cold report within 2x of importing numpy and yaml.

    python benchmarks/bench_startup.py [pairs]
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
from pathlib import Path

import bench_cli  # beside this file: one way to time a fresh process

BASELINE = [sys.executable, "-c", "import numpy, yaml"]
TARGET = 2.0
#: the environment of the timed processes: Python may write its bytecode caches, as it does on
#: a user's machine (a shell with PYTHONDONTWRITEBYTECODE set would compile every module of
#: mlacalc again in every process, while numpy's caches were written when it was installed)
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def once(args: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds of one fresh process, Python free to write its bytecode caches."""
    return bench_cli.once(args, ENV)


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
    # the console script beside this interpreter, as the baseline runs this interpreter (a
    # version manager's shim on PATH would add its own start-up to one side of each pair)
    beside = Path(sys.executable).parent / "mlacalc"
    exe = str(beside) if beside.is_file() else shutil.which("mlacalc")
    if exe is None:
        raise SystemExit("install mlacalc first: python -m pip install -e .")
    pairs = int(sys.argv[1]) if len(sys.argv) > 1 else 21
    once([exe, "report", "deepseek-v3"])  # warm the file cache and write the bytecode once
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
