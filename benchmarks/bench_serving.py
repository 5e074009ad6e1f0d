"""Serving figures against published ones, and the speed of search (a benchmark, not a timed test).

(a) the DeepSeek-V3 ISCA 2025 paper's communication-bound TPOT from its own inputs;
(b) DeepEP dispatch/combine latencies from bytes and link bandwidth (H800, CX7 400 Gb/s);
(c) the SGLang 96 x H100 decode node (EP72, DP-attention, two-batch overlap);
(d) the TensorRT-LLM v0.14 online table: TTFT, ITL and output tokens/s per row, with errors
    (random arrivals at each row's rate, each step's prompts in a pass of their own before
    the decode pass);
(e) search() for DeepSeek-V3 on 8-64 H200 GPUs: median wall time;
(f) the TensorRT-LLM v0.17 offline max-throughput table (FP8), every row with its error.

    python benchmarks/bench_serving.py
"""

from __future__ import annotations

import statistics
import time

import numpy as np

from mlacalc.hardware import load_hardware
from mlacalc.serving.comm import combine_bytes, comm_seconds, dispatch_bytes, isca_comm_bound_tpot
from mlacalc.serving.scenarios import (
    compare,
    compare_offline,
    compare_sglang,
    compare_sglang_prefill,
)
from mlacalc.serving.search import search

DEEPEP = {
    8: (163, 318),
    16: (173, 329),
    32: (182, 350),
    64: (186, 353),
    128: (192, 369),
    256: (194, 360),
}


def main() -> None:
    tpot = isca_comm_bound_tpot()
    print(
        f"(a) ISCA comm-bound TPOT: {tpot * 1e3:.2f} ms = {1 / tpot:.1f} tok/s at 50 GB/s "
        f"(paper 14.76 ms, 67); "
        f"{isca_comm_bound_tpot(bandwidth_bytes_per_s=900e9) * 1e3:.3f} ms at 900 GB/s (paper 0.82)"
    )
    hw = load_hardware("H800")
    tokens = np.array([128.0])
    print("(b) DeepEP low-latency, 128 tokens, top-8, hidden 7168 (predicted / measured us):")
    for ep, (md, mc) in DEEPEP.items():
        d = comm_seconds("dispatch", dispatch_bytes(tokens, 8, 7168), ep, hw, network=True)[0] * 1e6
        c = comm_seconds("combine", combine_bytes(tokens, 8, 7168), ep, hw, network=True)[0] * 1e6
        print(
            f"    EP{ep:<4} dispatch {d:6.1f} / {md} ({d / md - 1:+.0%})   "
            f"combine {c:6.1f} / {mc} ({c / mc - 1:+.0%})"
        )
    s = compare_sglang()
    print(
        f"(c) SGLang EP72 decode node: "
        f"{s['predicted_output_tokens_per_s_per_node']:,.0f} tok/s/node vs 22,282 measured "
        f"({s['error']:+.1%}); step {s['decode_step_s'] * 1e3:.1f} ms (two-batch overlap)"
    )
    for r in compare_sglang_prefill():
        print(
            f"    SGLang EP32 prefill, {r['isl']}-token prompts: "
            f"{r['predicted_tokens_per_s_per_node']:,.0f} tok/s/node vs "
            f"{r['measured_tokens_per_s_per_node']:,.0f} ({r['error']:+.1%})"
        )
    rows = compare()
    print("(d) TensorRT-LLM v0.14 online table (predicted / measured):")
    print(
        "    model           GPU       ISL  OSL  QPS | TTFT ms          | ITL ms           "
        "| output tok/s"
    )
    for r in rows:
        print(
            f"    {r['model']:<15} {r['hardware']:<9} {r['isl']:>4} {r['osl']:>4} {r['qps']:>4g} | "
            f"{r['predicted_ttft_ms']:5.1f}/{r['ttft_ms']:<4g} {r['error_ttft_ms']:+5.0%} | "
            f"{r['predicted_itl_ms']:5.1f}/{r['itl_ms']:<4g} {r['error_itl_ms']:+5.0%} | "
            f"{r['predicted_output_tokens_per_s']:6.0f}/{r['output_tokens_per_s']:<5g} "
            f"{r['error_output_tokens_per_s']:+5.0%}"
        )
    for key in ("ttft_ms", "itl_ms", "output_tokens_per_s"):
        errs = [r[f"error_{key}"] for r in rows]
        print(
            f"    {key:<20} median |error| {statistics.median(abs(e) for e in errs):.1%}, "
            f"signed median {statistics.median(errs):+.1%}, "
            f"max |error| {max(abs(e) for e in errs):.1%}"
        )
    offline = compare_offline()
    print("(f) TensorRT-LLM v0.17 offline max throughput, FP8 (predicted / measured output tok/s):")
    for r in offline:
        print(
            f"    {r['model']:<15} {r['hardware']:<9} TP{r['tp']} {r['isl']:>5}/{r['osl']:<5} "
            f"{r['predicted_output_tokens_per_s']:8.0f} / {r['output_tokens_per_s']:<9g} "
            f"{r['error']:+5.0%}"
        )
    errs = [r["error"] for r in offline]
    print(
        f"    median |error| {statistics.median(abs(e) for e in errs):.1%}, signed median "
        f"{statistics.median(errs):+.1%}, max |error| {max(abs(e) for e in errs):.1%}"
    )
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        r = search("deepseek-v3", "H200", [8, 16, 32, 64], isl=2000, osl=500, ttft=2.0, tpot=0.05)
        times.append(time.perf_counter() - t0)
    b = r.best
    print(
        f"(e) search DeepSeek-V3 on 8-64 H200 (isl 2000, osl 500, TTFT 2 s, TPOT 50 ms): "
        f"median {statistics.median(times):.2f} s over 5 runs, {len(r.points):,} points, "
        f"{r.layouts} layouts; "
        f"best {b['gpus']} GPUs {b['mode']} {b['layout']} {b['weight_dtype']}/{b['kv_dtype']} "
        f"batch {b['batch_per_group']}: {b['output_tokens_per_s_per_gpu']:.0f} tok/s/GPU, "
        f"{b['output_tokens_per_s_per_user']:.1f} tok/s/user"
    )


if __name__ == "__main__":
    main()
