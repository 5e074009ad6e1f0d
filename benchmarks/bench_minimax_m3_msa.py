"""MiniMax-M3's block-sparse attention layer predicted against the vendored H100 msa tables.

The rows: vLLM 0.24.0's ``msa_generation_module_perf`` and ``msa_context_module_perf`` (H100,
``MiniMaxM3SparseTritonImpl``, TP1, bf16 GEMMs and cache), each the latency of one attention
module; the rows with ``num_heads`` 64 (MiniMax-M3's query heads) are compared. The tables do
not record what the module holds; here, as mlacalc/measured/msa_modules.py maps every row of
them (every head count, both devices; docs/measured-sets.md), it is read as one block-sparse
layer's attention kernels of the model step: q/k/v projections,
RoPE, the indexer (``block_indexer_*``), the core and ``o_proj``. The prediction: those
kernels of ``mlacalc.cost.model_step.step_kernels`` for the shipped ``minimax-m3`` (decode at
``step + 1`` keys; a causal prompt of ``isl`` tokens after ``step`` cached ones), timed by the
``fit-h100-sxm-vllm`` profile. Nothing is fitted on these rows. Prints the median and 90th
percentile of |predicted / measured - 1| per table and a sample of rows.

    python benchmarks/bench_minimax_m3_msa.py             # every matching row (~1 min)
    python benchmarks/bench_minimax_m3_msa.py --rows 40   # a sample of each table
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

import pyarrow.parquet as pq

import mlacalc
from mlacalc.cost.model_step import kernel_stage, step_kernels
from mlacalc.timemodel.kernel_time import predict_kernels

TABLES = Path(__file__).parent.parent / "mlacalc/data/measured/h100_sxm/msa/vllm/0.24.0"
ATTENTION = {"q_proj", "kv_proj", "rope", "core", "o_proj"}
SPARSE_LAYERS = 57  # the kernels of the block-sparse layers run 57 times a step


def _layer_ms(model, phase: str, seq_len: int, batch: int, q_len: int | None) -> float:
    kernels = step_kernels(model, phase, seq_len, batch, q_len=q_len, causal=phase != "decode")
    kernels = [k for k in kernels if k.calls == SPARSE_LAYERS and kernel_stage(k.name) in ATTENTION]
    times = predict_kernels(kernels, "H100-SXM", "fit-h100-sxm-vllm")
    return sum(t.seconds for t in times) / SPARSE_LAYERS * 1e3


def errors(table: str, rows: int | None) -> list[tuple[int, int, int, float, float]]:
    m = mlacalc.load_model("minimax-m3")
    t = pq.read_table(TABLES / f"{table}.parquet").to_pandas()
    t = t[(t.num_heads == 64) & (t.kv_cache_dtype == "bfloat16") & (t.gemm_type == "bfloat16")]
    if table.startswith("msa_context"):
        t = t[t.isl * t.batch_size <= 65536]  # prompts the step builds in a second
    if rows:
        t = t.iloc[:: max(1, len(t) // rows)]
    out = []
    for _, r in t.iterrows():
        b, step = int(r.batch_size), int(r.step)
        if table.startswith("msa_generation"):
            pred = _layer_ms(m, "decode", step + 1, b, None)
            out.append((b, 1, step, float(r.latency), pred))
        else:
            q = int(r.isl)
            phase = "chunk" if step else "prefill"
            pred = _layer_ms(m, phase, q + step, b, q if step else None)
            out.append((b, q, step, float(r.latency), pred))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rows", type=int, default=None, help="a sample of each table")
    rows = parser.parse_args().rows
    for table in ("msa_generation_module_perf", "msa_context_module_perf"):
        found = errors(table, rows)
        e = sorted(abs(p / m - 1) for *_, m, p in found)
        print(
            f"{table}: {len(found)} rows, median |error| {100 * statistics.median(e):.1f}%, "
            f"p90 {100 * e[int(0.9 * (len(e) - 1))]:.1f}%"
        )
        for b, q, step, meas, pred in found[:: max(1, len(found) // 8)]:
            print(
                f"  batch {b:>4} new {q:>5} after {step:>6}: measured {meas:.4f} ms, "
                f"predicted {pred:.4f} ms ({100 * (pred / meas - 1):+.0f}%)"
            )


if __name__ == "__main__":
    main()
