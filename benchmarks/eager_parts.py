"""Each profiled prompt of ``benchmarks/results/h200-eager-profile.txt``: the eager model's
predicted parts (the catalogue's H200, the row's trivial-op latency from the committed full set)
grouped as the profile's ATen ops, against the profile's device time per ATen op.

    PYTHONPATH=. python benchmarks/eager_parts.py [-a]      # -a: the decode points too
"""

from __future__ import annotations

import ast
import csv
import re
import sys
from pathlib import Path

from mlacalc.data import MEASUREMENTS
from mlacalc.timemodel.predict import predict_time

PROFILE = Path(__file__).parent / "results" / "h200-eager-profile.txt"
SET = MEASUREMENTS / "cuda-nvidia-h200-full-bf16.csv"
#: predicted op -> the ATen op eager PyTorch runs it as
GROUP = {
    "scores": "bmm",
    "pv": "bmm",
    "q_absorb": "bmm",
    "o_absorb": "bmm",
    "softmax": "_softmax",
    "scale": "mul",
    "mask": "masked_fill_ + clone",
    "q_assemble": "cat",
    "k_assemble": "cat",
    "q_cat": "cat",
    "k_cat": "cat",
    "rope_cat": "rope (mul, cat, neg, add)",
}


def group(o) -> str:
    if o.name in GROUP:
        return GROUP[o.name]
    if o.kind == "matmul":
        return "mm"
    if o.name.startswith("rope"):
        return "rope (mul, cat, neg, add)"
    if o.name.endswith("_copy") or o.name == "cache_write":
        return "copy_"
    return "other"


def profile() -> dict[tuple, dict[str, float]]:
    """point -> {ATen op: device us} (the profile lists its top kernels and ATen ops)."""
    out: dict[tuple, dict[str, float]] = {}
    key = None
    for line in PROFILE.read_text().splitlines():
        if line.startswith("=="):
            key = ast.literal_eval(line[3 : line.index(":")])
            out[key] = {}
            continue
        m = re.match(r"\s*([\d.]+) us\s+(\d+)x\s+cpu\s+([\d.]+)\s+(.*)", line)
        if m and m.group(4).startswith("aten::"):
            out[key][m.group(4)[6:]] = float(m.group(1))
        elif m and m.group(4).startswith("Memcpy DtoD"):
            out[key]["(DtoD: clone)"] = float(m.group(1))
    return out


def main() -> None:
    with open(SET, newline="") as f:
        rows = {
            (r["model"], r["impl"], r["phase"], int(r["batch"]), int(r["seq_len"])): r
            for r in csv.DictReader(f)
            if r["status"] == "ok"
        }
    for key, aten in profile().items():
        model, impl, phase, batch, seq = key
        if phase != "prefill" and "-a" not in sys.argv:
            continue
        r = rows.get(key)
        p = predict_time(
            model,
            "H200",
            phase,
            seq,
            batch,
            impl=None if impl == "standard" else impl,
            mode="unfused",
            dtype="bf16",
            weight_dtype="bf16",  # the reference layers' weights, whatever the checkpoint stores
            launch_latency_s=float(r["launch_latency_s"]) if r else 7e-6,
        )
        meas = float(r["median_s"]) if r else float("nan")
        err = p.seconds / meas - 1
        print(
            f"== {key}: predicted {p.seconds * 1e3:.2f} ms, measured {meas * 1e3:.2f} ({err:+.1%})"
        )
        parts: dict[str, list] = {}
        for o in p.ops:
            parts.setdefault(group(o), []).append((o.name, o.model_s * 1e6))
        for g, ops in parts.items():
            each = ", ".join(f"{n} {t:.0f}" for n, t in ops)
            print(f"   {g:26s} {sum(t for _, t in ops):9.0f} us  [{each}]")
        print(
            "   profile (its top ATen ops, us):", ", ".join(f"{k} {v:.0f}" for k, v in aten.items())
        )


if __name__ == "__main__":
    main()
