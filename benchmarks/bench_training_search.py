"""How long a training layout search takes (a benchmark, not a timed test).

Each case runs :func:`mlacalc.training.layout_search.training_search` once, in this process, and
prints its wall time, the layouts it tried, how many fit, why the others did not, how many
calls of the cost function it made (the rest pruned) and the fastest layout:

    python benchmarks/bench_training_search.py
"""

from __future__ import annotations

import time

from mlacalc.training.layout_search import bound_of, training_search

CASES = (
    # model, device, GPUs, global batch, sequence, fixed settings
    ("llama-3.1-70b", "H100", 64, 512, 8192, {}),
    ("deepseek-v3", "H800", 64, 1024, 4096, {"precision": "fp8-mixed", "overlap": True}),
    ("deepseek-v3", "H800", 256, 1024, 4096, {"precision": "fp8-mixed", "overlap": True}),
    ("qwen3-30b-a3b", "H100", 16, 128, 4096, {}),
)


def main() -> None:
    for model, hw, gpus, batch, seq, fixed in CASES:
        start = time.perf_counter()
        s = training_search(model, hw, gpus, batch, seq, top=1, **fixed)
        took = time.perf_counter() - start
        why = ", ".join(f"{n:,} {r}" for r, n in s.not_fit.items()) or "-"
        print(
            f"{model} on {gpus} x {s.hardware}, {seq:,} tokens, batch {batch:,}: {took:.2f} s; "
            f"{s.tried:,} tried, {s.fitted:,} fit, not: {why}; {s.priced:,} pricings"
        )
        c = s.best
        if c is None:
            print(f"    nothing fits: {s.advice}")
            continue
        lay = c.layout
        print(
            f"    best: TP{lay.tp} CP{lay.cp} PP{lay.pp} DP{lay.dp} EP{lay.ep} ZeRO-{c.zero} "
            f"{c.recompute} mb {lay.micro_batch}: step {c.time.step_s:.3f} s, MFU {c.mfu:.1%}, "
            f"{c.memory_per_gpu / 2**30:.1f} GiB, bound {bound_of(c)[0]}"
        )


if __name__ == "__main__":
    main()
