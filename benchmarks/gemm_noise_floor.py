"""How far a GEMM table's rows stray from rows that ran the same kernel: the floor its error
figures meet.

A measured ``gemm_perf`` table times each (m, n, k) once. At 9 to 16 rows the kernels of
these tables hold all the rows in one row tile (their tiles have 16 rows or more, and cuBLAS's
few-row kernel on B200 is taken at up to 8 rows: docs/time-model.md), so for each dtype and
(n, k) the 8 rows of 9 to 16 tokens ran one kernel on the same weight. Each row against its
group's median is the table's own scatter: a model that gave every group its median exactly
would be off by that much. One group is not one path: vLLM's B200 block-scaled rows, whose
wrapper steps at a row count not a multiple of 4 (``gemm_time`` ``align_s``). Printed per
engine, device and dtype: the scatter's median and p90, the shares of rows more than 20% (the
issue's p90 bound) above and below their group's median, and the shipped fitted profile's
median and p90 on the same rows and on the whole kind.

    PYTHONPATH=. python benchmarks/gemm_noise_floor.py [--engine E] [--measured ROOT]

Reads the tables shipped with the package (the ``measured`` extra, pyarrow); about 10 s a
table on a free machine.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
DEFAULT_ROOT = HERE.parent / "mlacalc" / "data" / "measured"

#: Row counts whose calls run one kernel per (dtype, n, k) in every engine's GEMM tables.
SAME_KERNEL_ROWS = (9, 16)

#: The issue's p90 bound, as the share of a row's time it may be off.
BOUND = 0.20

#: The shipped profile each engine's rows of a device are fitted with (bench_timemodel's).
FITTED = {
    "trtllm": {"H100-SXM": "default", "B200": "fit-b200-sxm"},
    "sglang": {"H100-SXM": "fit-h100-sxm-sglang", "B200": "fit-b200-sxm-sglang"},
    "vllm": {"H100-SXM": "fit-h100-sxm-vllm", "B200": "fit-b200-sxm-vllm"},
}
SYSTEMS = {"H100-SXM": "h100_sxm", "B200": "b200_sxm"}

#: (engine, device, kind) whose 9-16 rows run two paths (vLLM's B200 block-scaled wrapper steps
#: at a row count not a multiple of 4): their scatter is no one kernel's, so not printed as one
TWO_PATHS = {("vllm", "B200", "gemm_perf:fp8_block")}


def scatter(kind, n, k, m, seconds) -> np.ndarray:
    """Each row's time over the median of its (kind, n, k) group at SAME_KERNEL_ROWS rows,
    less one; NaN outside those rows."""
    lo, hi = SAME_KERNEL_ROWS
    inside = (m >= lo) & (m <= hi)
    out = np.full(len(seconds), np.nan)
    keys = np.array([f"{a}|{b}|{c}" for a, b, c in zip(kind, n, k)], dtype=object)
    for key in np.unique(keys[inside]):
        rows = np.flatnonzero(inside & (keys == key))
        out[rows] = seconds[rows] / np.median(seconds[rows]) - 1.0
    return out


def pct(x: np.ndarray, q: float) -> float:
    return float(np.percentile(np.abs(x), q) * 100.0)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--measured", default=str(DEFAULT_ROOT))
    ap.add_argument("--engine", action="append", choices=sorted(FITTED))
    args = ap.parse_args(argv)

    from mlacalc.measured.mapping import map_table
    from mlacalc.measured.observations import predict_mapped
    from mlacalc.measured.tables import load_measured
    from mlacalc.measured.validate_tables import row_kinds

    print(
        "engine device kind: same-kernel rows | their scatter median / p90 / share over "
        f"{BOUND:.0%} (above / below) | fitted on them median / p90 | fitted, whole kind "
        "median / p90"
    )
    for engine, devices in FITTED.items():
        if args.engine and engine not in args.engine:
            continue
        for device, profile in devices.items():
            tables = load_measured(Path(args.measured) / SYSTEMS[device], engine=engine).tables
            for table in tables:
                if table.table != "gemm_perf":
                    continue
                mapped = map_table(table)
                err = predict_mapped(mapped, device, profile) / table.seconds - 1.0
                kind = row_kinds(mapped)
                cols = [np.asarray(table.column(c)) for c in ("n", "k", "m")]
                spread = scatter(kind, *cols, table.seconds)
                for name in sorted(set(kind.tolist())):
                    own = (kind == name) & np.isfinite(err)
                    same = own & np.isfinite(spread)
                    if not same.any():
                        continue
                    if (engine, device, name) in TWO_PATHS:
                        print(f"{engine} {device} {name}: left out (two paths at 9-16 rows)")
                        continue
                    s, e, w = spread[same], err[same], err[own]
                    print(
                        f"{engine} {device} {name}: {int(same.sum())} | "
                        f"{pct(s, 50):.1f}% / {pct(s, 90):.1f}% / "
                        f"{np.mean(s > BOUND) * 100:.1f}% / {np.mean(s < -BOUND) * 100:.1f}% | "
                        f"{pct(e, 50):.1f}% / {pct(e, 90):.1f}% | "
                        f"{pct(w, 50):.1f}% / {pct(w, 90):.1f}%"
                    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
