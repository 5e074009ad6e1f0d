"""MiniMax-M3's block-sparse attention module predicted against the vendored msa tables.

The rows: vLLM 0.24.0's ``msa_generation_module_perf`` and ``msa_context_module_perf`` (H100,
``MiniMaxM3SparseTritonImpl``; B200, ``MiniMaxM3SparseMSAImpl``; TP1), each the latency of one
attention module. Every row is mapped as mlacalc/measured/msa_modules.py reads it
(docs/measured-sets.md): the step's kernels of one block-sparse layer with the engine's fused
projection of the hidden state (``qkv_proj``), RoPE, the indexer's scores and block top-k, the
engine's block-sparse core (a prompt's one query token at a time) and ``o_proj``, timed by the
device's shipped vLLM profile, whose two core classes (``attention_decode:*:msa``,
``attention_decode:bf16:msa_prefill``) are fitted on these rows' residuals. Prints the median,
90th percentile and signed median of ``predicted / measured - 1`` per table and device, by
head count, and a sample of rows.

    python benchmarks/bench_minimax_m3_msa.py              # both devices (~15 s)
    python benchmarks/bench_minimax_m3_msa.py --device h100_sxm --heads 64
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from mlacalc.measured.mapping import map_table
from mlacalc.measured.observations import predict_mapped
from mlacalc.measured.tables import load_measured

MEASURED = Path(__file__).parent.parent / "mlacalc/data/measured"
PROFILES = {"h100_sxm": "fit-h100-sxm-vllm", "b200_sxm": "fit-b200-sxm-vllm"}
TABLES = ("msa_generation_module_perf", "msa_context_module_perf")


def errors(system: str, table: str) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """The table's columns and ``predicted / measured - 1`` of every row."""
    path = MEASURED / system / "msa" / "vllm" / "0.24.0" / f"{table}.parquet"
    (t,) = load_measured(path).tables
    mapped = map_table(t)
    pred = predict_mapped(mapped, None, PROFILES[system])
    return t.columns, pred / t.seconds - 1.0


def _line(label: str, e: np.ndarray) -> str:
    a = np.abs(e)
    return (
        f"{label}: {len(e)} rows, median |error| {100 * np.median(a):.1f}%, "
        f"p90 {100 * np.percentile(a, 90):.1f}%, signed {100 * np.median(e):+.1f}%"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--device", choices=sorted(PROFILES), action="append")
    parser.add_argument("--heads", type=int, help="only the rows of this many query heads")
    args = parser.parse_args()
    for system in args.device or sorted(PROFILES, reverse=True):
        for table in TABLES:
            cols, e = errors(system, table)
            heads = cols["num_heads"].astype(int)
            keep = heads == args.heads if args.heads else np.ones(len(e), dtype=bool)
            print(_line(f"{system} {table}", e[keep]))
            for h in sorted(set(heads[keep].tolist())):
                print("  " + _line(f"{h:>3} heads", e[keep & (heads == h)]))
            for i in np.flatnonzero(keep)[:: max(1, int(keep.sum()) // 6)]:
                print(
                    f"    batch {int(cols['batch_size'][i]):>4} isl {int(cols['isl'][i]):>5} "
                    f"step {int(cols['step'][i]):>6} {cols['gemm_type'][i]:>9} "
                    f"{cols['kv_cache_dtype'][i]:>8} cache: {100 * e[i]:+.0f}%"
                )


if __name__ == "__main__":
    main()
