"""DeepSeek-V4-Pro's attention layers predicted against the vendored B200 module tables.

The rows: sglang 0.5.14's ``dsv4_{hca,csa}_{generation,context}_module_perf`` (B200, one GPU,
DeepSeek-V4-Pro's 128 heads, fp8_block GEMMs, an fp8_e4m3 cache), each the latency of one
attention layer of that kind. The prediction: ``mlacalc.predict_time`` of one layer of that
kind (``scope="attention_layer"``: its projections, compressor, indexer, core and output
projection; a model whose layers are all of that kind), decode at ``isl + step`` keys (the
generation tables) or a prompt of ``isl`` tokens after ``step`` cached ones (the context
tables), batch ``batch_size``, fp8 cache. Nothing is fitted on these rows: the kernel classes
keep the default profile's B200 figures. Prints the ratio predicted / measured (median, 10th
and 90th percentile) per table.

    python benchmarks/bench_dsv4_modules.py            # every matching row (~1 min)
    python benchmarks/bench_dsv4_modules.py --rows 40  # a sample of each table
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

import pyarrow.parquet as pq

import mlacalc

TABLES = Path(__file__).parent.parent / "mlacalc/data/measured/b200_sxm/sparse_attention"
SGLANG = TABLES / "sglang" / "0.5.14"


def ratios(kind: str, phase: str, rows: int | None) -> list[float]:
    pro = mlacalc.load_model("deepseek-v4-pro")
    rate = pro.compress_rate_csa if kind == "csa" else pro.compress_rate_hca
    model = pro.with_changes(compress_ratios=(rate,) * pro.num_hidden_layers)
    table = "generation" if phase == "decode" else "context"
    t = pq.read_table(SGLANG / f"dsv4_{kind}_{table}_module_perf.parquet").to_pandas()
    t = t[
        (t.model == "deepseek-ai/DeepSeek-V4-Pro")
        & (t.tp_size == 1)
        & (t.num_heads == 128)
        & (t.gemm_type == "fp8_block")
    ]
    if rows:
        t = t.sample(n=min(rows, len(t)), random_state=0)
    out = []
    for r in t.itertuples():
        b, isl, step = int(r.batch_size), int(r.isl), int(r.step)
        if phase == "decode":
            p = mlacalc.predict_time(model, "b200", "decode", isl + step, batch=b, kv_dtype="fp8")
        else:
            p = mlacalc.predict_time(
                model, "b200", "chunk" if step else "prefill", isl + step, batch=b,
                q_len=isl if step else None, causal=True, kv_dtype="fp8",
            )  # fmt: skip
        out.append(p.seconds / (r.latency / 1e3))  # the tables' latency is in ms
    return sorted(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=None, help="a sample of each table")
    n = parser.parse_args().rows
    for kind in ("hca", "csa"):
        for phase in ("decode", "prefill"):
            r = ratios(kind, phase, n)
            p10, p90 = r[len(r) // 10], r[9 * len(r) // 10]
            print(
                f"{kind} {phase:7s} rows {len(r):5d}  predicted/measured median "
                f"{statistics.median(r):.2f}  p10 {p10:.2f}  p90 {p90:.2f}"
            )


if __name__ == "__main__":
    main()
