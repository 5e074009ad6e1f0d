"""Fit ``pool_switch_s`` of SGLang's DeepSeek-V4 decode compressor class, per device.

The class (``elementwise:bf16:v4_pool_decode``, :data:`mlacalc.cost.compressed.POOL_SWITCH`)
times the ``compressor_pool`` kernel of a decode step; past one MMA tile of sequences each of
the layer's compressors takes ``pool_switch_s`` more. No table times that kernel alone, so the
parameter is fitted on SGLang's DeepSeek-V4 decode module rows of the profile's device (CSA and
HCA): the row's time less the profile's prediction of the row with the switch at 0, against
the switches a row counts, by least squares of the relative error (each row weighed by
``1 / measured``). The class's other parameters are those the plain ``elementwise:bf16`` class
borrows in that profile (its streaming pass, as before). Writes the class into the profile.

    python benchmarks/fit_v4_pool_switch.py [--profiles fit-b200-sxm-sglang,...] [--dry-run]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PROFILES = ROOT / "mlacalc" / "data" / "profiles"
MEASURED = ROOT / "mlacalc" / "data" / "measured"
DEVICES = {"fit-b200-sxm-sglang": "B200", "fit-h100-sxm-sglang": "H100-SXM"}
SYSTEMS = {"B200": "b200_sxm", "H100-SXM": "h100_sxm"}
TABLES = ("dsv4_csa_generation_module_perf", "dsv4_hca_generation_module_perf")


def fit_one(name: str) -> tuple[dict[str, float], dict[str, float]]:
    """The class's parameters for profile ``name`` and the figures of the fit."""
    from mlacalc.hardware.catalogue import load_hardware  # deferred: a script's heavy imports
    from mlacalc.measured.mapping import map_table
    from mlacalc.measured.observations import predict_mapped
    from mlacalc.measured.tables import load_measured
    from mlacalc.timemodel.device import device_figures
    from mlacalc.timemodel.profile import load_profile
    from mlacalc.timemodel.shared import col, mma_rows
    from mlacalc.words.kernels import V4_POOL_DECODE

    device = DEVICES[name]
    hw = load_hardware(device)
    key = f"elementwise:bf16:{V4_POOL_DECODE}"
    plain, _ = load_profile(name).params(hw.name, "elementwise", "bf16", hw, "")
    params = {"eff_memory": plain["eff_memory"], "fixed_s": plain["fixed_s"]}
    raw = json.loads((PROFILES / f"{name}.json").read_text())
    raw["classes"][key] = {**params, "pool_switch_s": 0.0}
    base = load_profile_dict(raw)
    rows = mma_rows(device_figures(hw))
    meas, pred, count = [], [], []
    tables = load_measured(MEASURED / SYSTEMS[device], engine="sglang").tables
    for t in (t for t in tables if t.table in TABLES):
        m = map_table(t)
        n = len(t)
        c = np.zeros(n)
        for p in m.parts:
            if p.batch.variant == V4_POOL_DECODE:
                over = col(p.batch, "pool_rows", 0) > rows
                c += np.bincount(p.rows, weights=over * col(p.batch, "pool_switch", 0), minlength=n)
        meas.append(t.seconds)
        pred.append(predict_mapped(m, device, base))
        count.append(c)
    y, p, c = (np.concatenate(v) for v in (meas, pred, count))
    ok = np.isfinite(p)
    w = 1.0 / y[ok] ** 2
    x = float(np.sum(w * (y - p)[ok] * c[ok]) / np.sum(w * c[ok] ** 2))
    x = min(max(x, 0.0), 1e-4)
    before = np.median(np.abs(p[ok] / y[ok] - 1.0))
    after = np.median(np.abs((p + c * x)[ok] / y[ok] - 1.0))
    return {**params, "pool_switch_s": round(x, 9)}, {
        "rows": int(ok.sum()),
        "switching rows": int((c[ok] > 0).sum()),
        "median before": float(before),
        "median after": float(after),
    }


def load_profile_dict(raw: dict):
    """A profile from its JSON dict (as the shipped file would load it)."""
    from mlacalc.timemodel.profile import Profile  # deferred: a script's heavy imports

    return Profile.from_dict(raw)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profiles", default=",".join(DEVICES))
    ap.add_argument("--dry-run", action="store_true")
    args = ap.parse_args(argv)
    from mlacalc.words.kernels import V4_POOL_DECODE  # deferred: a script's heavy imports

    for name in args.profiles.split(","):
        params, figures = fit_one(name)
        print(name, params, figures)
        if args.dry_run:
            continue
        path = PROFILES / f"{name}.json"
        raw = json.loads(path.read_text())
        raw["classes"][f"elementwise:bf16:{V4_POOL_DECODE}"] = params
        path.write_text(json.dumps(raw, indent=1, sort_keys=False) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
