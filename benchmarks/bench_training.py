"""Training figures against published ones (a benchmark, not a timed test).

(a) per-token training compute against the DeepSeek-V3 ISCA 2025 paper's Table 2 (arXiv
    2505.09343: 250 / 155 / 394 / 2,448 GFLOPs per token for DeepSeek-V3, DeepSeek-V2, a 72B
    dense and a 405B dense model; sequence length and convention not stated): mlacalc's
    forward + backward matmul FLOPs per token, causal, at 4,096 and 2,048 tokens;
(b) the predicted step time of published training runs, each with its layout
    (:data:`mlacalc.training.runs.PUBLISHED_RUNS`: DeepSeek-V3 and V2 from GPU hours per
    trillion tokens, arXiv 2412.19437 and 2405.04434; Llama 3 405B's MFU, arXiv 2407.21783
    Table 4), with the error of each. Nothing in the step-time model is fitted to these runs;
(c) seed 003's question: absorbed against expanded MLA training of DeepSeek-V3, per length.

    python benchmarks/bench_training.py
"""

from __future__ import annotations

from mlacalc.training.cost import absorption_table
from mlacalc.training.flops import training_flops
from mlacalc.training.runs import compare_runs

ISCA = (
    ("deepseek-v3", 250),
    ("deepseek-v2", 155),
    ("qwen2.5-72b", 394),
    ("llama-3.1-405b", 2448),
)


def fit_line(r: dict) -> str:
    """Why a run's assumed layout does not fit: its memory a GPU against the device's and the
    usable share, and what the published run did that the layout leaves out."""
    gib = 2**30
    return (
        f"the assumed layout needs {r['memory_per_gpu'] / gib:.1f} GiB a GPU, "
        f"{r['usable_memory_bytes'] / gib:.1f} of {r['device_memory_bytes'] / gib:.1f} GiB "
        f"usable: {r['memory_note'] or 'no published lever said'}"
    )


def main() -> None:
    print("(a) GFLOPs per token (forward + backward), ISCA Table 2")
    print(f"    {'model':<16} {'paper':>7} {'4K':>9} {'err':>7} {'2K':>9} {'err':>7}")
    for model, paper in ISCA:
        at = [training_flops(model, t).per_token / 1e9 for t in (4096, 2048)]
        print(
            f"    {model:<16} {paper:>7,} {at[0]:>9,.1f} {at[0] / paper - 1:>+7.1%} "
            f"{at[1]:>9,.1f} {at[1] / paper - 1:>+7.1%}"
        )
    print("\n(b) published training runs: predicted against published throughput")
    rows = compare_runs()
    for r in rows:
        unit = "MFU" if r["metric"] == "mfu" else "tokens/s/GPU"
        fmt = "{:.1%}" if r["metric"] == "mfu" else "{:,.0f}"
        print(
            f"    {r['run']:<28} {unit:<13} published {fmt.format(r['published']):>7} "
            f"predicted {fmt.format(r['predicted']):>7}  error {r['error']:+.1%}  "
            f"(MFU {r['mfu']:.1%}, step {r['step_s']:.2f} s)"
        )
        if r["fits"] is False:
            print(f"        {fit_line(r)}")
    errors = [abs(r["error"]) for r in rows]
    print(f"    mean |error| {sum(errors) / len(errors):.1%}, max {max(errors):.1%}")
    print("\n(c) DeepSeek-V3, absorbed / expanded (kv_up recompute), one sequence")
    for r in absorption_table("deepseek-v3", [1024, 4096, 16384, 65536]):
        print(
            f"    {r['seq_len']:>6,} tokens: core FLOPs {r['core_ratio']:.2f}x, total FLOPs "
            f"{r['flops_ratio']:.2f}x, activations {r['activations_ratio']:.2f}x"
        )


if __name__ == "__main__":
    main()
