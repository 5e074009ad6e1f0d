"""DeepSeek-V4-Pro's attention layers predicted against the vendored B200 module tables.

The rows: sglang 0.5.14's ``dsv4_{hca,csa}_{generation,context}_module_perf`` (B200, one GPU,
DeepSeek-V4-Pro's 128 heads, fp8_block GEMMs, an fp8_e4m3 cache), each the latency of one
attention layer of that kind. The prediction: ``mlacalc.predict_time`` of one layer of that
kind (``scope="attention_layer"``: its projections, compressor, indexer, core and output
projection; a model whose layers are all of that kind), decode at ``isl + step`` keys (the
generation tables) or a prompt of ``isl`` tokens after ``step`` cached ones (the context
tables), batch ``batch_size``, fp8 cache. Nothing is fitted on these rows: the kernel classes
keep the default profile's B200 figures. Prints the ratio predicted / measured (median, 10th
and 90th percentile) per table; and vLLM 0.24.0's HCA attention kernel alone against the
step's ``attention`` kernel (:func:`core_ratios`).

    python benchmarks/bench_dsv4_modules.py            # every matching row (~1 min)
    python benchmarks/bench_dsv4_modules.py --rows 40  # a sample of each table
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

import pyarrow.parquet as pq

import mlacalc
from mlacalc.cost.model_step import step_kernels
from mlacalc.timemodel.kernel_time import predict_kernels

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


def core_ratios(rows: int | None, profile: str | None = None) -> list[float]:
    """vLLM 0.24.0's ``dsv4_hca_attn_module_perf`` (B200, the HCA attention kernel alone,
    ``FLASHMLA_SPARSE_DSV4``, DeepSeek-V4-Flash's 64 heads, fp8 cache) against the step's
    ``attention`` kernel of an HCA layer of 64 heads of DeepSeek-V4-Pro's width (512, one K = V
    head, a window of 128 and one pooled key per 128 tokens: the geometry the table records and
    Flash shares, its config not vendored); decode where ``isl`` is 1, else a causal prompt of
    ``isl`` after ``step``."""
    pro = mlacalc.load_model("deepseek-v4-pro")
    model = pro.with_changes(
        compress_ratios=(pro.compress_rate_hca,) * pro.num_hidden_layers,
        num_attention_heads=64,
        o_groups=8,
    )
    t = pq.read_table(TABLES / "vllm/0.24.0/dsv4_hca_attn_module_perf.parquet").to_pandas()
    if rows:
        t = t.sample(n=min(rows, len(t)), random_state=0)
    out = []
    for r in t.itertuples():
        b, isl, step = int(r.batch_size), int(r.isl), int(r.step)
        phase = "decode" if isl == 1 else ("chunk" if step else "prefill")
        kernels = step_kernels(
            model, phase, isl + step, b, q_len=isl if phase == "chunk" else None, causal=True,
            kv_dtype="fp8", scope="attention_layer",
        )  # fmt: skip
        core = [k for k in kernels if k.name == "attention"]
        seconds = sum(k.seconds for k in predict_kernels(core, "b200", profile))
        out.append(seconds / (r.latency / 1e3))
    return sorted(out)


def _line(label: str, r: list[float]) -> str:
    p10, p90 = r[len(r) // 10], r[9 * len(r) // 10]
    return (
        f"{label} rows {len(r):5d}  predicted/measured median {statistics.median(r):.2f}  "
        f"p10 {p10:.2f}  p90 {p90:.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=None, help="a sample of each table")
    n = parser.parse_args().rows
    for kind in ("hca", "csa"):
        for phase in ("decode", "prefill"):
            print(_line(f"{kind} {phase:7s}", ratios(kind, phase, n)))
    print(_line("vLLM hca core (default profile)", core_ratios(n)))
    print(_line("vLLM hca core (fit-b200-sxm-vllm)", core_ratios(n, "fit-b200-sxm-vllm")))


if __name__ == "__main__":
    main()
