"""Loading every shared config.json with its full report, in a warm process (a benchmark, not
a timed test).

For each config in ``tests/data/hf-configs/`` and ``tests/data/hf-configs-2/`` (an
``hf_quant_config.json`` beside it read too): the seconds of ``load_model(path)`` followed by
``model_report(model)`` (parameters, cache, FLOPs, checkpoint bytes, the whole report dict),
the first time in a process that has already imported mlacalc and reported one other model
(``first``: nothing of this config cached), and the median of later repeats with the loader's
file cache cleared each time (``again``: the file is parsed and validated anew; results cached
per model value may be reused). A config the product refuses is timed up to its one-line
error. Target: under 50 ms for every config on the 2-core development machine.

    python benchmarks/bench_load_configs.py [repeats]
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import mlacalc
from mlacalc.models import loading
from mlacalc.report import model_report
from mlacalc.words.errors import MlacalcError

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = [ROOT / "tests" / "data" / "hf-configs", ROOT / "tests" / "data" / "hf-configs-2"]
TARGET_S = 0.050


def once(path: Path) -> tuple[float, str]:
    """Seconds to load ``path`` and build its report, and what came of it."""
    start = time.perf_counter()
    try:
        model = mlacalc.load_model(path)
        model_report(model)
        outcome = "report"
    except MlacalcError as exc:
        outcome = "refused: " + str(exc).split(": ", 2)[-1][:60]
    return time.perf_counter() - start, outcome


def main(repeats: int = 5) -> int:
    once(ROOT / "tests" / "data" / "hf-configs" / "llama-3.1-8b.config.json")  # warm the process
    paths = [p for folder in FOLDERS for p in sorted(folder.glob("*.config.json"))]
    worst = 0.0
    print(f"{'config':58s} {'first ms':>9s} {'again ms':>9s}  outcome")
    for path in paths:
        first, outcome = once(path)
        again = []
        for _ in range(repeats):
            loading._CACHE.clear()
            again.append(once(path)[0])
        median = statistics.median(again)
        worst = max(worst, first, median)
        print(f"{path.name[:58]:58s} {first * 1e3:9.1f} {median * 1e3:9.1f}  {outcome}")
    verdict = "within" if worst <= TARGET_S else "OVER"
    print(f"\nworst {worst * 1e3:.1f} ms over {len(paths)} configs: {verdict} the 50 ms target")
    return 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 5))
