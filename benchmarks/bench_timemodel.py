"""Accuracy of the kernel time model on the published measured sets (H100-SXM, A100-SXM-80GB).

Three figures, per table kind and pooled: the shipped profile on the devices it was fitted on,
and leave-one-device-out (fit on H100-SXM only and predict A100-SXM-80GB, and the reverse).
Errors are ``predicted / measured - 1``; rows the mapping cannot model count as not predicted.

    python benchmarks/bench_timemodel.py [--refit [--write-dir DIR]] [--only TABLES] [--json OUT]
    python benchmarks/bench_timemodel.py --engines [--loo-profile H100=PATH] [--json OUT]

Needs the ``measured`` extra (pyarrow); reads the GPU tables shipped with the package
(``--measured ROOT``, default ``mlacalc/data/measured``). Targets (the issue's): fitted median
<= 6% per kind, p90 <= 20%; leave-one-out median <= 12% pooled, not predicted <= 2% of every
table. A figure that rounds to a target it is not within is printed to two decimals (6.04%).

``--engines`` (slower: every table of H100 and B200, about 1.5 M rows): per engine (TensorRT-LLM,
SGLang, vLLM) and device, each table kind predicted by the engine's shipped profile of that
device (fitted) and by the engine's profile of the other device (leave one device out; for
TensorRT-LLM B200 from the H100 + A100 default, and H100 from a profile passed with
``--loo-profile H100-SXM=PATH``: the shipped B200 fit ``fit-b200-sxm``, or a B200 + A100 fit
``mlacalc calibrate a100_sxm b200_sxm`` writes; for SGLang and vLLM the engine's fit of the
other device, the classes it lacks from ``default`` on B200 and ``fit-b200-sxm`` on H100, as
``mlacalc validate`` composes it, whatever ``--loo-profile`` says), the rows
not predicted per table, and the time of ``mlacalc validate`` over one device and engine.
Targets (the issue): fitted median <= 6% per kind, p90 <= 20%; leave-one-out pooled median
<= 12% per engine; not predicted <= 2% of every table; validate <= 15 s.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
DEFAULT_ROOT = HERE.parent / "mlacalc" / "data" / "measured"  # the tables shipped with the package
SYSTEMS = {"H100-SXM": "h100_sxm", "A100-SXM-80GB": "a100_sxm"}


def kind_of(mapped) -> list[tuple[str, np.ndarray]]:
    """Table kinds of a mapped table's rows: the table, split by the main kernel's dtype (the
    rule ``mlacalc validate`` breaks its errors down by)."""
    from mlacalc.measured.validate_tables import row_kinds  # deferred: as evaluate's imports

    label = row_kinds(mapped)
    return [(k, label == k) for k in sorted(set(label.tolist()))]


def stats(pred: np.ndarray, meas: np.ndarray, modelled: np.ndarray, zero=None) -> dict:
    """``zero``: rows predicted exactly as no kernel (0 s, as measured): predicted, outside
    the error figures (0 / 0 has no relative error)."""
    ok = modelled & np.isfinite(pred)
    err = pred[ok] / meas[ok] - 1.0
    done = int(ok.sum()) + (0 if zero is None else int(np.sum(zero)))
    out = {
        "rows": len(meas),
        "predicted": done,
        "not_predicted": int(len(meas) - done),
    }
    if err.size:
        out.update(
            median_abs_error=float(np.median(np.abs(err))),
            signed_median_error=float(np.median(err)),
            p90_abs_error=float(np.percentile(np.abs(err), 90)),
        )
    return out


def evaluate(mapped_by_device: dict, profile) -> dict:
    from mlacalc.measured.mapping import NO_KERNEL
    from mlacalc.measured.observations import predict_mapped

    out: dict = {}
    for device, tables in mapped_by_device.items():
        if not tables:
            continue
        pooled_p, pooled_m, pooled_ok, pooled_z = [], [], [], []
        for mapped in tables:
            pred = predict_mapped(mapped, device, profile)
            meas = mapped.table.seconds
            ok = np.asarray(mapped.modelled, dtype=bool)
            zero = mapped.reason == NO_KERNEL
            for kind, sel in kind_of(mapped):
                out.setdefault(device, {})[kind] = stats(pred[sel], meas[sel], ok[sel], zero[sel])
            pooled_p.append(pred)
            pooled_m.append(meas)
            pooled_ok.append(ok)
            pooled_z.append(zero)
        out[device]["pooled"] = stats(
            np.concatenate(pooled_p),
            np.concatenate(pooled_m),
            np.concatenate(pooled_ok),
            np.concatenate(pooled_z),
        )
    return out


#: The targets a printed median and p90 are compared with (the issue's, as fractions)
MEDIAN_TARGET, P90_TARGET = 0.06, 0.20


def pct(x: float, target: float) -> str:
    """``x`` as a percentage to one decimal, or to two where one decimal would print the
    target it is over or under (6.04% is over 6%, not "6.0%")."""
    one = f"{x:.1%}"
    return f"{x:.2%}" if one == f"{target:.1%}" and round(x, 6) != target else one


def show(title: str, result: dict) -> None:
    print(f"\n## {title}\n")
    print("| device | table kind | rows | not predicted | median abs | signed median | p90 |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for device, kinds in result.items():
        for kind, s in kinds.items():
            if "median_abs_error" not in s:
                print(f"| {device} | {kind} | {s['rows']} | {s['not_predicted']} | - | - | - |")
                continue
            print(
                f"| {device} | {kind} | {s['rows']} | {s['not_predicted']} | "
                f"{pct(s['median_abs_error'], MEDIAN_TARGET)} | "
                f"{s['signed_median_error']:+.1%} | {pct(s['p90_abs_error'], P90_TARGET)} |"
            )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--measured", default=str(DEFAULT_ROOT))
    ap.add_argument(
        "--refit",
        action="store_true",
        help="fit the two-device profile again instead of reading the shipped one",
    )
    ap.add_argument("--write-profile", help="write the two-device profile here")
    ap.add_argument(
        "--write-dir",
        help="with --refit: write all three profiles (default.json and the two one-device "
        "fits) into this folder; mlacalc/data/profiles is where the shipped ones live",
    )
    ap.add_argument("--profile", help="evaluate this profile instead of the shipped one")
    ap.add_argument("--no-loo", action="store_true", help="skip leave-one-device-out")
    ap.add_argument("--json", help="write every figure as JSON")
    ap.add_argument(
        "--engines",
        action="store_true",
        help="per engine and device on H100 and B200: fitted, leave one device out, not predicted",
    )
    ap.add_argument(
        "--loo-profile",
        action="append",
        default=[],
        metavar="DEVICE=PATH",
        help="with --engines: the profile that predicts TensorRT-LLM's tables of DEVICE leaving "
        "it out (TensorRT-LLM's rows only: SGLang's and vLLM's stand-in classes come from the "
        "shipped TensorRT-LLM profile validate takes, B200 from default, H100 from fit-b200-sxm)",
    )
    ap.add_argument(
        "--engine",
        action="append",
        default=[],
        help="with --engines: only this engine (repeatable; default: all three)",
    )
    ap.add_argument(
        "--only",
        help="comma-separated table names (or parts of them): read, fit and evaluate only those "
        "(a quick look at a few kernel classes; the shipped profile is fitted on every table)",
    )
    args = ap.parse_args(argv)
    if args.engines:
        return engines_main(args)

    from mlacalc.measured.calibrate import calibrate
    from mlacalc.measured.mapping import map_table
    from mlacalc.measured.tables import load_measured
    from mlacalc.timemodel.profile import load_profile

    t0 = time.perf_counter()
    mapped = {}
    for device, system in SYSTEMS.items():
        tables = load_measured(Path(args.measured) / system).tables
        if args.only:
            wanted = [w.strip() for w in args.only.split(",") if w.strip()]
            tables = [t for t in tables if any(w in t.table for w in wanted)]
        mapped[device] = [map_table(t) for t in tables]
    print(
        f"read and mapped {sum(len(m.table) for v in mapped.values() for m in v)} rows "
        f"in {time.perf_counter() - t0:.1f} s"
    )
    results = {}
    if args.refit or args.write_profile:
        t0 = time.perf_counter()
        both = calibrate(
            [m for v in mapped.values() for m in v],
            name="default",
            progress=lambda s: print(" ", s, file=sys.stderr),
        )
        print(f"fitted the two-device profile in {time.perf_counter() - t0:.1f} s")
        if args.write_profile:
            both.save(args.write_profile)
        if args.write_dir:
            Path(args.write_dir).mkdir(parents=True, exist_ok=True)
            both.save(Path(args.write_dir) / "default.json")
    else:
        both = load_profile(args.profile or "default")
    t0 = time.perf_counter()
    results["fitted"] = evaluate(mapped, both)
    print(f"predicted every row in {time.perf_counter() - t0:.1f} s")
    show("Fitted devices (profile fitted on both)", results["fitted"])
    if not args.no_loo:
        for train, test in (("H100-SXM", "A100-SXM-80GB"), ("A100-SXM-80GB", "H100-SXM")):
            shipped = f"fit-{train.lower()}"
            if not mapped[train] or not mapped[test]:
                continue
            prof = calibrate(mapped[train], name=shipped) if args.refit else load_profile(shipped)
            if args.refit and args.write_dir:
                prof.save(Path(args.write_dir) / f"{shipped}.json")
            results[f"fit {train} -> {test}"] = evaluate({test: mapped[test]}, prof)
            show(
                f"Leave one out: fitted on {train}, predicting {test}",
                results[f"fit {train} -> {test}"],
            )
    if args.only:
        if args.json:
            Path(args.json).write_text(json.dumps(results, indent=1))
        return 0
    results["speed_ms"] = speed()
    print("\n## Speed (ms per call, best of 5 x 100)\n")
    for k, v in results["speed_ms"].items():
        print(f"- {k}: {v:.3f}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


#: Engine -> device -> (the shipped profile fitted on the device, the one that leaves it out).
ENGINE_PROFILES = {
    "trtllm": {"H100-SXM": ("default", None), "B200": ("fit-b200-sxm", "default")},
    "sglang": {
        "H100-SXM": ("fit-h100-sxm-sglang", "fit-b200-sxm-sglang"),
        "B200": ("fit-b200-sxm-sglang", "fit-h100-sxm-sglang"),
    },
    "vllm": {
        "H100-SXM": ("fit-h100-sxm-vllm", "fit-b200-sxm-vllm"),
        "B200": ("fit-b200-sxm-vllm", "fit-h100-sxm-vllm"),
    },
}
ENGINE_SYSTEMS = {"H100-SXM": "h100_sxm", "B200": "b200_sxm"}


def left_out_profile(engine: str, device: str, loo: str):
    """The profile that predicts ``engine`` on ``device`` left out of its fit. TensorRT-LLM:
    ``loo`` itself (``ENGINE_PROFILES`` or ``--loo-profile``). SGLang and vLLM: the engine's fit
    of the other device, with the classes it lacks and the kernels it runs on this device's
    generation through TensorRT-LLM's taken from TensorRT-LLM's shipped profile fitted on the
    other device and not this one (``engine_profiles.left_out_base``: B200 from the H100 + A100
    ``default``, H100 from ``fit-b200-sxm``), the profile ``mlacalc validate`` composes for the
    device's tables; ``--loo-profile`` does not change it."""
    from mlacalc.hardware.catalogue import load_hardware
    from mlacalc.timemodel.engine_profiles import left_out_base, left_out_composed
    from mlacalc.timemodel.profile import load_profile

    prof = load_profile(loo)
    if engine == "trtllm":
        return prof
    base = left_out_base(prof, [device])
    return left_out_composed(prof, base, load_hardware(device)) if base is not None else prof


def engines_main(args) -> int:
    """``--engines``: every engine on H100 and B200 (see the module docstring)."""
    from mlacalc.measured.mapping import map_table, not_predicted
    from mlacalc.measured.tables import load_measured
    from mlacalc.measured.validate import validate
    from mlacalc.timemodel.profile import load_profile

    loo_given = dict(s.split("=", 1) for s in args.loo_profile)
    results: dict = {}
    for engine, devices in ENGINE_PROFILES.items():
        if args.engine and engine not in args.engine:
            continue
        for device, (fitted, loo) in devices.items():
            system = ENGINE_SYSTEMS[device]
            t0 = time.perf_counter()
            if not args.only:  # validate's time is over every table
                validate(measured=str(Path(args.measured) / system), engine=engine)
            took = time.perf_counter() - t0
            tables = load_measured(Path(args.measured) / system, engine=engine).tables
            if args.only:
                wanted = [w.strip() for w in args.only.split(",") if w.strip()]
                tables = [t for t in tables if any(w in t.table for w in wanted)]
            mapped = [map_table(t) for t in tables]  # the engine's tables and the shared ones
            if not mapped:  # --only named no table of this engine on this device
                continue
            key = f"{engine} {device}"
            results[key] = {"validate_s": took, "not_predicted": {}}
            for m in mapped:
                left = int(not_predicted(m.reason).sum())
                results[key]["not_predicted"][m.table.table] = [left, len(m.table)]
            results[key]["fitted"] = evaluate({device: mapped}, load_profile(fitted))[device]
            loo = loo_given.get(device, loo) if engine == "trtllm" else loo
            if loo:
                prof = left_out_profile(engine, device, loo)
                results[key]["loo"] = evaluate({device: mapped}, prof)[device]
                results[key]["loo_profile"] = loo
            show(f"{engine} on {device}: fitted ({fitted})", {device: results[key]["fitted"]})
            if loo:
                show(f"{engine} on {device}: leave one out ({loo})", {device: results[key]["loo"]})
            timed = f"{took:.1f} s" if not args.only else "not timed (--only)"
            print(f"\nvalidate over {system} ({engine}): {timed}; not predicted per table:")
            for name, (left, rows) in results[key]["not_predicted"].items():
                print(f"- {name}: {left} of {rows} ({left / rows:.1%})")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


def speed() -> dict[str, float]:
    """predict_time per call: one attention layer and a model step, kernel model and roofline."""
    import timeit

    import mlacalc

    out = {}
    for scope in ("attention_layer", "model"):
        for profile in (None, "roofline"):

            def call(scope=scope, profile=profile):
                return mlacalc.predict_time(
                    "deepseek-v3", "H200", "decode", 32768, batch=64, scope=scope, profile=profile
                )

            call()
            best = min(timeit.repeat(call, number=100, repeat=5)) / 100
            out[f"predict_time {scope} ({profile or 'kernel model'})"] = best * 1e3
    # the two halves of a kernel-model call: the step's kernels (mlacalc.cost.model_step) and their
    # times
    from mlacalc.cost.model_step import step_kernels
    from mlacalc.timemodel.predict import _model_ops, as_model
    from mlacalc.timemodel.profile import load_profile

    model, hw, prof = as_model("deepseek-v3"), mlacalc.load_hardware("H200"), load_profile()
    for scope in ("attention_layer", "model"):
        args = (model, "decode", 32768, 64, None, None, False, "bf16", "bf16", "bf16")
        kernels = step_kernels(*args, scope=scope)
        best = min(
            timeit.repeat(lambda a=args, s=scope: step_kernels(*a, scope=s), number=100, repeat=5)
        )
        out[f"  step kernels {scope} ({len(kernels)} kernels)"] = best / 100 * 1e3
        best = min(timeit.repeat(lambda ks=kernels: _model_ops(ks, hw, prof), number=100, repeat=5))
        out[f"  kernel times {scope}"] = best / 100 * 1e3
    return out


if __name__ == "__main__":
    raise SystemExit(main())
