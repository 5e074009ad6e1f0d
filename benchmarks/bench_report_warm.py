"""A warm report (a benchmark, not a timed test): ``model_report`` of a model whose layers
have rules of their own, in a process that has loaded and reported it once.

MiniMax-M3 (block-sparse msa layers: the indexer's selection is counted per block) and
DeepSeek-V4-Pro (csa / hca / swa layers, hyper-connections) are the slowest shipped reports;
the first call loads the model and fills the caches the later calls share. Prints the first
call and the best and median of the next ones, each model loaded by name as the CLI does.
Target on the 2-core development machine: <= 50 ms a warm report.

    python benchmarks/bench_report_warm.py [runs]
"""

from __future__ import annotations

import statistics
import sys
import time

MODELS = ("minimax-m3", "deepseek-v4-pro")


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    import mlacalc
    from mlacalc.report import model_report

    for name in MODELS:
        start = time.perf_counter()
        model_report(mlacalc.load_model(name))
        first = time.perf_counter() - start
        took = []
        for _ in range(runs):
            start = time.perf_counter()
            model_report(mlacalc.load_model(name))
            took.append(time.perf_counter() - start)
        print(
            f"{name}: first {1e3 * first:.1f} ms; warm best {1e3 * min(took):.1f} ms, "
            f"median {1e3 * statistics.median(took):.1f} ms (of {runs})"
        )


if __name__ == "__main__":
    main()
