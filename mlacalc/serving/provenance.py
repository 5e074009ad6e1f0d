"""Where a plan's and a search's times come from: the calibration profile that predicted
the kernels, and how the device was predicted with it, in words.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from mlacalc.data import PROFILES
from mlacalc.hardware.catalogue import HardwareSpec, load_hardware
from mlacalc.timemodel.device import device_figures
from mlacalc.timemodel.engine_profiles import STAND_IN_NOTE, chosen_profile
from mlacalc.timemodel.kernel_time import run_class
from mlacalc.timemodel.mla_geometry import MEASURED_MLA_GEOMETRY, mla_geometry_off
from mlacalc.timemodel.moe_time import DEEPEP_STEP
from mlacalc.timemodel.profile import (
    assumed_figures,
    load_profile,
    other_cpu_warning,
    shipped_profiles,
)
from mlacalc.timemodel.terms import class_key
from mlacalc.words.engines import ENGINE_LABELS, check_engine
from mlacalc.words.kernels import MIN_LATENCY_MOE, KernelBatch

__all__ = [
    "DEVICE_ROUTES",
    "ROUTE_ERRORS",
    "ROUTE_LOO_P90",
    "SERVING_ERRORS",
    "STAND_IN_WARN_SHARE",
    "UNMEASURED_KERNELS",
    "calibration_of",
    "device_warnings",
    "engine_profile_of",
    "engine_vendor_warning",
    "kernel_error_words",
    "prediction_route",
    "route_warning",
    "serving_error_words",
    "stand_in_kernels",
    "stand_in_parts",
    "stand_in_warnings",
    "unmeasured_named",
    "unmeasured_parts",
    "with_stand_ins",
]


def engine_profile_of(profile: Any, engine: Any, hw: HardwareSpec) -> tuple[Any, str, str]:
    """The profile a plan or search times ``engine``'s kernels on ``hw`` with, the engine's
    name and what stood in for it (``"; ..."`` to add to the calibration line, or ``""``): with
    no profile named, the engine's own profile for the device
    (:func:`~mlacalc.timemodel.engine_profiles.profile_for`); a named one as given, said when
    it is another engine's."""
    name = check_engine(engine, hw=hw)
    prof, note = chosen_profile(profile, name, hw)
    return prof, name, f"; {note}" if note else ""


def calibration_of(
    profile: Any, hw: HardwareSpec, kernels: Iterable[dict[str, Any] | tuple[str, str]]
) -> tuple[str, str]:
    """The profile's name (its file beside it when it is not a shipped one) and, in words, how
    the kernels on ``hw`` were predicted with it: the device as ``roofline`` says it
    (:meth:`~mlacalc.timemodel.profile.Profile.describe`: "calibrated on A100-SXM-80GB,
    H100-SXM; H200 by datasheet ratios from H100-SXM (same tensor-core generation)", the
    pooled fit's "unvalidated"), then only the kernel classes (``kind``, ``dtype``) whose
    parameters :meth:`~mlacalc.timemodel.profile.Profile.params` obtains otherwise. A measured
    device (``measured:<set>``) is timed by its measured ceilings, not datasheet figures. Last,
    every figure of the device the time model assumes (:func:`~mlacalc.timemodel.profile.
    assumed_figures`: H20's clock, a PCIe part's peer latency)."""
    prof = load_profile(profile)
    kernels = list(kernels)
    name = prof.name
    shipped = PROFILES
    if prof.origin and Path(prof.origin).resolve().parent != shipped:
        name = f"{prof.name} ({prof.origin})"
    classes = {
        (k["kind"], k["dtype"], k.get("variant", "")) if isinstance(k, dict) else (k[0], k[1], "")
        for k in kernels
        if not isinstance(k, dict) or "seconds" not in k or _takes_time(k["seconds"])
    }
    lead = prof.describe(hw.name, hw, assumed=False)  # its assumed figures said last
    # what params says of a class predicted as the lead says the device is
    expected = prof.fitted_how(hw.name, hw)
    runs: dict[tuple[str, str, str], str] = {}
    for kind, dtype, variant in sorted(classes):
        # the class the device runs (fp8 weights without fp8 tensor cores: weight-only) and
        # the engine's kernel of it (a step's block-scaled GEMM under SGLang: per-tensor), as
        # the step's times look it up: two of the step's classes run as one are one class.
        # Only a step's experts behind DeepEP (moe_time.DEEPEP_STEP) or on TensorRT-LLM-gen's
        # MoE (words.kernels.MIN_LATENCY_MOE, chosen) keep their variant: the
        # others are looked up by their plain class, as they always were
        kept = variant if variant in (DEEPEP_STEP, MIN_LATENCY_MOE) else ""
        one = KernelBatch(kind, dtype, np.zeros(1), np.zeros(1), np.ones(1), {}, kept)
        run, _, _, how = run_class(one, hw, prof)
        ran_as = (run.kind, run.dtype, run.variant)
        runs[ran_as] = _fallback_how(prof, hw, ran_as, how, expected)
    # a class the kernels' own shapes run (a DSA core's kernel variant) that another class's
    # fit stands in for is one of the step's classes too, said as those above are
    shaped = {_ran_class(k, hw, prof) for k in kernels} - {()}
    for c in sorted(shaped - set(runs)):
        how = prof.params(hw.name, *c[:2], hw, c[2])[1]
        said = _fallback_how(prof, hw, c, how, expected)
        if said != how:
            runs[c] = said
    hows = Counter(runs.values())
    keys: dict[str, list[str]] = {}
    for run_key, how in runs.items():
        keys.setdefault(how, []).append(class_key(*run_key))
    # a how that names none of its classes ("B200 by the profile's pooled fit ...") names them
    rest = sorted(
        h if any(k in h for k in keys[h]) else f"{', '.join(keys[h])}: {h}"
        for h in hows
        if h != expected
    )
    total = len(runs)
    text = lead
    if rest and expected not in hows and all(h.startswith("uncalibrated ") for h in rest):
        # the profile holds none of the step's classes: said first, not "calibrated on ..."
        text = (
            f"none of the step's {total} kernel classes is calibrated: "
            + "; ".join(_grouped(rest))
            + f"; the profile holds other classes only ({lead})"
        )
    elif rest:
        others = sum(n for h, n in hows.items() if h != expected)
        text += f"; {others} of {total} kernel classes otherwise: " + "; ".join(_grouped(rest))
    # every class the step runs that the profile's notes mark as a stand-in (another
    # profile's class where its own tables time none: engine_profiles' stand-ins, the DeepGEMM
    # experts behind DeepEP, vLLM's B200 FlashMLA sparse class), said with its note: the
    # classes as looked up above, and those the kernels' own shapes run (a DSA core's kernel)
    # (those lent for one reason listed as one: "stand-in: gemm:fp8_block, gemm:fp8_block:bmm
    # from trtllm profile default (no vllm table)")
    # A lent fit that times another class also names the class it times ("the dispatch:fp8
    # fit timing the step's dispatch:bf16": GLM-5.1's bf16 dispatch beside nvfp4 experts under
    # SGLang on B200 was said only as "stand-in: dispatch:fp8", a kernel the step does not run)
    ran = set(runs) | shaped
    found: dict[str, set[str]] = {}
    for c in ran:
        key = prof.class_found(hw.name, *c[:2], hw, c[2]) if c else None
        if key:
            found.setdefault(key, set()).add(class_key(*c))
    lent: dict[str, list[str]] = {}
    timing: dict[str, list[str]] = {}
    for key in sorted(found):
        how = _stand_in_how(prof, key)
        if how:
            lent.setdefault(how, []).append(key)
            others = sorted(found[key] - {key})
            if others:
                timing.setdefault(how, []).append(
                    f"the {key} fit timing the step's {', '.join(others)}"
                )
    for how, keys in lent.items():
        text += f"; {STAND_IN_NOTE}{', '.join(keys)} {how}"
        text += "".join(f", {t}" for t in timing.get(how, []))
    text += assumed_figures(hw)
    if getattr(hw, "measured", False):
        # its peaks and bandwidth are what mlacalc bench measured on it: the ratios are theirs
        text = text.replace(
            "by datasheet ratios", "by the ratios of its measured ceilings (mlacalc bench)"
        )
    return name, text


def stand_in_kernels(
    profile: Any, hw: HardwareSpec, kernels: Iterable[dict[str, Any]], i: int = 0
) -> list[tuple[str, str, list[str], float, list[str]]]:
    """The kernels of a timed step (row ``i`` of :meth:`~mlacalc.serving.gpu_step.StepModel.
    step`'s breakdown) that another profile's class times, where the profile's notes mark
    that class a stand-in: each stand-in's key, its note ("from trtllm profile default (no
    sglang table)"), the names of the kernels it times, their seconds (all calls) and the
    step's classes it times other than its own (``dispatch:bf16`` timed by the
    ``dispatch:fp8`` fit: the step's bytes as sized, at that fit's rates)."""
    prof = load_profile(profile)
    out: dict[str, tuple[str, list[str], float, set[str]]] = {}
    for k in kernels:
        seconds = float(np.atleast_1d(k.get("seconds", 0.0))[i]) if "seconds" in k else 0.0
        ran = _ran_class(k, hw, prof) if seconds > 0 else ()
        key = prof.class_found(hw.name, *ran[:2], hw, ran[2]) if ran else None
        how = _stand_in_how(prof, key) if key else None
        if how:
            how, names, total, timed = out.get(key, (how, [], 0.0, set()))
            timed = timed | ({class_key(*ran)} - {key})
            # a kernel of several layer kinds (attention of dsa and dsa-shared): named once
            named = names if k["name"] in names else [*names, k["name"]]
            out[key] = (how, named, total + seconds, timed)
    return [
        (key, how, names, total, sorted(timed))
        for key, (how, names, total, timed) in sorted(out.items())
    ]


#: the share of a decode step's kernel time another engine's stand-in class may time unsaid
#: beyond the calibration line: from this share on, a warning of its own, and the route's
#: ``engine_route`` reads ``partly_stand_in`` (:func:`with_stand_ins`)
STAND_IN_WARN_SHARE = 0.05


def with_stand_ins(route: dict[str, Any], parts: list[dict[str, Any]]) -> dict[str, Any]:
    """``route`` (:func:`prediction_route`) with the decode step's stand-ins (``parts``, each
    a class another engine's fit times and its share of the step's kernel time:
    :func:`stand_in_parts`) as fields: ``stand_ins`` and their summed
    ``stand_in_share``. Where the engine's own profile timed the step (``engine_route`` own) but
    stand-ins time :data:`STAND_IN_WARN_SHARE` of it or more, ``engine_route`` reads
    ``partly_stand_in`` and the expected error says it is the engine's own kernels' only (a
    trial read vLLM's 5.4% on a B200 DeepSeek-V3 step three quarters of which TensorRT-LLM's
    fits timed)."""
    if not route:
        return route
    unmeasured = [p for p in parts if p.get("unmeasured")]
    parts = [p for p in parts if not p.get("unmeasured")]
    share = sum(p["share"] for p in parts)
    out = {
        **route,
        "stand_ins": [
            {"class": p["class"], "from": p["from"], "share": round(p["share"], 4)} for p in parts
        ],
        "stand_in_share": round(share, 4),
        "unmeasured_kernels": [
            {
                "kernel": p["kernels"][0],
                "what": p["what"],
                "timed_as": p["timed_as"],
                "class": p["class"],
                "share": round(p["share"], 4),
            }
            for p in unmeasured
        ],
        "unmeasured_share": round(sum(p["share"] for p in unmeasured), 4),
    }
    if out["unmeasured_share"] >= STAND_IN_WARN_SHARE:
        # the kernel tables' error is that of the kernels they measure: a state update timed
        # as a GEMM takes half a Nemotron-3-Super decode step with no measured error
        named = ", ".join(
            f"{u['kernel']} timed as {u['timed_as'].split(' (')[0]}"
            for u in out["unmeasured_kernels"]
            if u["share"] >= STAND_IN_WARN_SHARE
        )
        out["expected_error_source"] += (
            f"; {out['unmeasured_share']:.0%} of the decode step's kernel time ({named}) is "
            "kernels no shared table measures, whose error that figure does not cover"
        )
    if route["engine_route"] != "own" or share < STAND_IN_WARN_SHARE:
        out["note"] = prediction_note(out)
        return out
    label = ENGINE_LABELS.get(route["engine"], route["engine"])
    named = ", ".join(p["class"] for p in parts if p["share"] >= STAND_IN_WARN_SHARE)
    out["engine_route"] = "partly_stand_in"
    out["expected_error_source"] += (
        f"; that is {label}'s own kernel classes' error: {share:.0%} of the decode step's "
        f"kernel time ({named}) is timed by another engine's fit, whose error on {label}'s "
        "kernels no table measures"
    )
    out["note"] = prediction_note(out)
    return out


def stand_in_parts(
    profile: Any, hw: HardwareSpec, kernels: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The decode step's kernels another profile's class times (:func:`stand_in_kernels`),
    each with its share of the step's kernel time: ``class``, ``from`` (the profile's note),
    ``kernels`` (their names), ``share`` and ``applied_to`` (the step's classes it times other
    than its own); then the step's kernels no shared table measures as what they are
    (:data:`UNMEASURED_KERNELS`), each marked ``unmeasured`` with the class that times it
    (:func:`unmeasured_parts`). :func:`with_stand_ins` and :func:`stand_in_warnings` say the
    two apart."""
    total = sum(float(np.atleast_1d(k["seconds"])[0]) for k in kernels if "seconds" in k)
    return [
        {
            "class": key,
            "from": how,
            "kernels": names,
            "share": seconds / total if total > 0 else 0.0,
            "applied_to": timed,
        }
        for key, how, names, seconds, timed in stand_in_kernels(profile, hw, kernels)
    ] + unmeasured_parts(profile, hw, kernels)


#: The step kernels no shared measured table holds, by (name, kind): what each is and what
#: times it instead. The shared tables' Mamba-2 rows are ``causal_conv1d_fn`` and
#: ``causal_conv1d_update`` only, no table measures Kimi Delta Attention or Mamba-1: their state
#: updates (a trial's Nemotron-3-Super decode step 50%, Kimi-Linear's 43%, Falcon-H1's 38%) are
#: timed by a class fitted on other kernels (:func:`unmeasured_parts`).
UNMEASURED_KERNELS = {
    ("mamba_state_update", "gemm"): (
        "Mamba-2's decode state update",
        "a batched GEMM (1 x N by N x P products per head, the float32 state streamed)",
    ),
    ("linear_core", "gemm"): (
        "Kimi Delta Attention's recurrent core",
        "a batched GEMM (1 x d_k by d_k x d_v products per head, the float32 state streamed)",
    ),
    ("mamba1_state_update", "elementwise"): (
        "Mamba-1's state update",
        "an element-wise kernel (the float32 state read and written)",
    ),
    ("mamba1_scan", "elementwise"): (
        "Mamba-1's selective-scan read-out",
        "an element-wise kernel",
    ),
}


def unmeasured_parts(
    profile: Any, hw: HardwareSpec, kernels: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The step's kernels of :data:`UNMEASURED_KERNELS` that take time, each with its share of
    the step's kernel time: ``unmeasured`` (True), ``kernels`` (its name), ``what`` (the kernel
    it is), ``timed_as`` (the kind of kernel it is timed as), ``class`` (the profile's class
    whose fit times it, or ``kind:dtype`` where none does) and ``share``."""
    prof = load_profile(profile)
    total = sum(float(np.atleast_1d(k["seconds"])[0]) for k in kernels if "seconds" in k)
    out: dict[str, dict[str, Any]] = {}
    for k in kernels:
        said = UNMEASURED_KERNELS.get((k.get("name"), k.get("kind")))
        seconds = float(np.atleast_1d(k.get("seconds", 0.0))[0])
        if said is None or seconds <= 0 or total <= 0:
            continue
        ran = _ran_class(k, hw, prof)
        key = prof.class_found(hw.name, *ran[:2], hw, ran[2]) if ran else None
        part = out.setdefault(
            k["name"],
            {
                "unmeasured": True,
                "kernels": [k["name"]],
                "what": said[0],
                "timed_as": said[1],
                "class": key or f"{k['kind']}:{k['dtype']}",
                "share": 0.0,
            },
        )
        part["share"] += seconds / total
    return list(out.values())


def stand_in_warnings(engine: str, parts: list[dict[str, Any]]) -> tuple[str, ...]:
    """The stand-ins of :func:`stand_in_parts`, said with their share of the step's kernel
    time where it is at least :data:`STAND_IN_WARN_SHARE`: a comparison of engines there
    compares one table."""
    label = ENGINE_LABELS.get(engine, engine)
    out = []
    for part in parts:
        if part.get("unmeasured"):
            if part["share"] >= STAND_IN_WARN_SHARE:
                out.append(
                    f"{part['kernels'][0]}, {part['what']} ({part['share']:.0%} of the decode "
                    f"step's kernel time), is timed as {part['timed_as']} by the "
                    f"{part['class']} fit: no shared table measures this kernel, so its time "
                    "has no measured error and engines compared on it are compared on another "
                    "kernel's fit"
                )
            continue
        key, names, timed = part["class"], part["kernels"], part["applied_to"]
        # a fit of another dtype's class (dispatch:fp8) timing the step's (dispatch:bf16): the
        # step's bytes as they were sized, at that fit's rates, so the sizing said beside it
        # and the timing agree
        applied = (
            f", applied to the step's {', '.join(timed)} (its bytes as sized, at the {key} "
            "fit's rates)"
            if timed
            else ""
        )
        if part["share"] >= STAND_IN_WARN_SHARE:
            out.append(
                f"{', '.join(names)} ({part['share']:.0%} of the decode step's kernel time) "
                f"{'is' if len(names) == 1 else 'are'} timed by the {key} fit {part['from']}"
                f"{applied}: that part of the step is not timed by {label}'s own kernel "
                "tables, so engines compared on it are compared on one table"
            )
    return tuple(out)


def _fallback_how(
    prof: Any, hw: HardwareSpec, run: tuple[str, ...], how: str, expected: str
) -> str:
    """``how`` (:meth:`~mlacalc.timemodel.profile.Profile.params`' words for the class ``run``,
    its kind, dtype and variant, is looked up as) where the profile times it by its own fit;
    where another class's fit stands in (:meth:`~mlacalc.timemodel.profile.Profile.
    stood_in_for`: an AWQ checkpoint's ``gemm:w4a16`` by the device's ``gemm:bf16`` fit, an
    nvfp4 GEMM by an fp8 fit, a variant by its parent's), that said: "gemm:w4a16 by the
    gemm:bf16 fit (no gemm:w4a16 fit of its own)", with the device's route where it is not the
    line's (``expected``). A class the profile's notes mark as another profile's stand-in is
    said with that note instead (:func:`calibration_of`: "the gemm:fp8 fit timing the step's
    gemm:nvfp4"). A trial read an AWQ plan's "H100-SXM by its own fit" where no shared table
    times an int4 weight-only GEMM on H100 under vLLM: the device's bf16 fit stood in unsaid."""
    key = class_key(*run)
    lent = prof.stood_in_for(hw.name, *run[:2], hw, run[2])
    if lent is None or _stand_in_how(prof, lent):
        return how
    where = "" if how == expected else f"; {how}"
    return f"{key} by the {lent} fit (no {key} fit of its own{where})"


def _stand_in_how(prof: Any, key: str) -> str | None:
    """What the profile's notes say stood in for class ``key`` ("from trtllm profile default
    (no sglang table)"), or None where its class is no stand-in."""
    said = [n for n in prof.notes if n.startswith(f"{STAND_IN_NOTE}{key} from ")]
    return said[0][len(f"{STAND_IN_NOTE}{key} ") :] if said else None


def _ran_class(
    kernel: dict[str, Any] | tuple[str, str], hw: HardwareSpec, prof: Any
) -> tuple[str, ...]:
    """The class (kind, dtype, variant) the time model ran a step's ``kernel`` by on ``hw``
    with ``prof``, from the shapes of its rows that take time (a kernel of a step's breakdown,
    :meth:`mlacalc.serving.gpu_step.StepModel.compose`); ``()`` for one without shapes."""
    if not isinstance(kernel, dict) or "shape" not in kernel:
        return ()
    flops, moved = np.atleast_1d(kernel["flops"]), np.atleast_1d(kernel["bytes"])
    live = np.atleast_1d(kernel.get("seconds", 1.0)) > 0
    live = np.broadcast_to(live, flops.shape) & ((flops > 0) | (moved > 0))
    if not live.any():
        return ()
    shape = {k: np.broadcast_to(v, flops.shape)[live] for k, v in kernel["shape"].items()}
    one = KernelBatch(
        kernel["kind"],
        kernel["dtype"],
        flops[live],
        moved[live],
        np.ones(int(live.sum())),
        shape,
        kernel.get("variant", ""),
    )
    run = run_class(one, hw, prof)[0]
    return (run.kind, run.dtype, run.variant)


def _grouped(hows: list[str]) -> list[str]:
    """Every class's how, those uncalibrated for one reason as one list ("elementwise:bf16,
    moe:bf16 uncalibrated (no profile class; datasheet defaults)"): every class named."""
    reasons: dict[str, list[str]] = {}
    out = []
    for how in hows:
        match = re.fullmatch(r"uncalibrated (\S+) \((.+)\)", how)
        if match:
            reasons.setdefault(match[2], []).append(match[1])
        else:
            out.append(how)
    return [f"{', '.join(keys)} uncalibrated ({why})" for why, keys in reasons.items()] + out


def _takes_time(x: Any) -> bool:
    """Whether any of a kernel's rows takes time (a number or an array)."""
    try:
        return bool(float(max(x)) > 0) if hasattr(x, "__len__") else float(x) > 0
    except ValueError:  # an empty array
        return False


#: Per engine and measured device: the benchmark's pooled median / p90 |error| of the engine's
#: profile fitted on the device's own tables, and the median of that profile on the other
#: device's tables (leave one device out: the nearest measured route to a device predicted
#: from this fit by datasheet ratios), as README.md's "How accurate the times are" gives them:
#: the per-engine table, whose H100-SXM row's leave-one-device-out figure is the B200 profile
#: on H100's tables and the B200 row's the H100 (TensorRT-LLM: the H100 + A100 default)
#: profile on B200's; A100-SXM-80GB's from the first table's pooled row ("A100-SXM-80GB,
#: fitted" and "H100 from A100 only"). ``tests/test_plan_prediction_route.py`` reads the README
#: and fails where these drift.
ROUTE_ERRORS: dict[tuple[str, str], tuple[float, float, float]] = {
    ("trtllm", "H100-SXM"): (4.7, 15.1, 11.3),
    ("trtllm", "B200"): (5.3, 17.3, 10.2),
    ("sglang", "H100-SXM"): (5.1, 17.5, 10.9),
    ("sglang", "B200"): (5.7, 19.0, 9.9),
    ("vllm", "H100-SXM"): (4.9, 15.0, 10.8),
    ("vllm", "B200"): (5.1, 16.1, 10.5),
    ("trtllm", "A100-SXM-80GB"): (5.9, 20.0, 10.3),
}

#: The pooled p90 |error| (%) of the leave-one-device-out row each :data:`ROUTE_ERRORS` entry's
#: third figure is the median of (the profile fitted on the key's device predicting the other
#: device's tables; A100's: H100's tables from the A100 fit), from the same run of
#: ``benchmarks/bench_timemodel.py --engines --loo-profile H100-SXM=fit-b200-sxm`` at 892e99b8
#: whose medians README.md's per-engine table gives (its JSON: ``loo.pooled.p90_abs_error``),
#: refreshed with ROUTE_ERRORS: the p90 a device predicted by datasheet ratios from that fit
#: expects (:func:`prediction_route`)
ROUTE_LOO_P90: dict[tuple[str, str], float] = {
    ("trtllm", "H100-SXM"): 33.8,
    ("trtllm", "B200"): 27.8,
    ("sglang", "H100-SXM"): 32.5,
    ("sglang", "B200"): 30.2,
    ("vllm", "H100-SXM"): 43.5,
    ("vllm", "B200"): 56.2,
    ("trtllm", "A100-SXM-80GB"): 33.0,
}

#: README.md's pooled cross-generation errors ("How accurate the times are", the pooled row):
#: median / p90 |error| (%) of A100's tables predicted from the H100 fit and of H100's from the
#: A100 fit, the nearest measured stand-in for a device no table of whose vendor ships
CROSS_GENERATION_ERRORS = {"A100 from H100": (9.2, 28.0), "H100 from A100": (10.3, 33.0)}


def other_vendor_words(vendor: str) -> str:
    """What every figure on another vendor's GPU (AMD's) is, in one clause: the engines' figures
    are the same NVIDIA-fitted efficiencies scaled by the datasheet, so not told apart, and
    the least error to expect is the cross-generation transfer's (trial12)."""
    (a, a90), (h, h90) = CROSS_GENERATION_ERRORS.values()
    return (
        f"on {vendor.upper()} every engine's figures are the same NVIDIA-fitted kernel "
        "efficiencies scaled by the datasheet, so the engines are not told apart there, and "
        f"the error is at least that between two NVIDIA generations (A100 from H100 {a:g}% "
        f"median / {a90:g}% p90, H100 from A100 {h:g}% / {h90:g}%: README.md), its direction "
        "unknown"
    )


#: The serving-level errors: the product's served figures against published runs, as
#: docs/serving.md's "Checked against published figures" table gives them (signed: product
#: minus published over published; an absolute median where the table gives one), each with the
#: table row it is read from (its first cell's start) and the words of its figure there.
#: ``tests/test_plan_prediction_route.py`` reads docs/serving.md and fails where these drift.
#: Plan.prediction carries them beside the kernel tables' error (``expected_error``), which is
#: each measured kernel row's, not TTFT's or TPOT's.
SERVING_ERRORS: dict[str, dict[str, Any]] = {
    "online_tpot": {
        "median": -0.130,
        "max_abs": 0.253,
        "of": "TPOT (ITL), TensorRT-LLM v0.14 online, 35 rows (Llama-3.1 70B / 8B, H100 / H200)",
        "row": "same: ITL",
        "said": "median -13.0%, max 25.3%",
    },
    "online_ttft": {
        "median_abs": 0.062,
        "median": -0.039,
        "max_abs": 0.191,
        "of": "TTFT, the same rows",
        "row": "same: TTFT",
        "said": "median absolute error 6.2% (signed -3.9%), max 19.1%",
    },
    "online_throughput": {
        "median": 0.026,
        "max_abs": 0.143,
        "of": "output tokens/s, the same rows",
        "row": "TensorRT-LLM v0.14 online",
        "said": "median error +2.6%, max 14.3%",
    },
    "offline_throughput": {
        "median_abs": 0.097,
        "median": 0.097,
        "max_abs": 0.385,
        "of": "tokens/s, TensorRT-LLM v0.17 offline max throughput, 70 rows",
        "row": "TensorRT-LLM v0.17 offline",
        "said": "median absolute error 9.7% (signed +9.7%: optimistic on nearly every row), max "
        "38.5%",
    },
    "expert_parallel": {
        "low": -0.114,
        "high": 0.24,
        "of": "tokens/s per node, DeepSeek's and SGLang's expert-parallel runs (H800 EP32-EP144, "
        "H100 EP32 / EP72)",
        "rows": {
            "DeepSeek profile, H800 decode": "+2.0%",
            "DeepSeek profile, H800 prefill": "-4.8%",
            "DeepSeek Day-6": "+12.8%",
            "SGLang 9 x 8 H100 decode": "-11.4%",
            "SGLang 4 x 8 H100 prefill": "+20 / +23 / +24%",
        },
    },
}

#: Where :data:`SERVING_ERRORS` are read
SERVING_ERROR_SOURCE = "docs/serving.md 'Checked against published figures'"


#: The devices the published serving runs of :data:`SERVING_ERRORS` ran on
SERVING_ERROR_DEVICES = ("H100-SXM", "H200", "H800")


def serving_error_words(device: str = "") -> str:
    """The serving-level errors in one clause (:data:`SERVING_ERRORS`), naming the devices
    they were measured on; where ``device`` is none of them, that none was measured on it."""
    e = SERVING_ERRORS
    tpot, ttft = e["online_tpot"], e["online_ttft"]
    ep = e["expert_parallel"]
    text = (
        f"served TPOT (ITL) {tpot['median']:+.1%} at the median (max {tpot['max_abs']:.1%}), TTFT "
        f"{ttft['median_abs']:.1%} median |error| (max {ttft['max_abs']:.1%}) against TensorRT-"
        f"LLM's online Llama runs on H100 / H200, offline throughput "
        f"{e['offline_throughput']['median_abs']:.1%} median |error| (H100 / H200), "
        f"expert-parallel runs' tokens/s {ep['low']:+.1%} .. {ep['high']:+.0%} (H800, H100) "
        f"({SERVING_ERROR_SOURCE})"
    )
    if device and device not in SERVING_ERROR_DEVICES:
        text += f", none of them on {device}"
    return text


def kernel_error_words(route: dict) -> str:
    """The kernel tables' error for a route in one clause (``prediction_note``'s first;
    ``roofline`` prints it alone): the median and p90, and whose figure it is: a fitted
    device's own (in-sample: the rows it was fitted on) with the held-out figure beside it, or
    the leave-one-device-out figure of the fit a device is predicted from by ratios."""
    e = route.get("expected_error")
    if not e:  # with its floor where one is known (another vendor's GPU: a review)
        source = str(route.get("expected_error_source") or "")
        said = source if source.startswith("not measured (") else "not measured"
        return f"the kernel tables' error for this route is {said}"
    p90 = f", p90 {e['p90']:.1%}" if e.get("p90") is not None else ""
    of = ""
    if e.get("of") == "own_residuals":
        of = (
            f"profile {(route.get('profile') or {}).get('name', '')}'s own residuals, on the "
            "rows it was fitted on, the median over its classes weighted by their rows; not "
            "README.md's; "
        )
    elif e.get("of") == "fitted":
        held = e.get("held_out") or {}
        beside = (
            f"; held out, from the {held['from']} fit: median {held['median']:.1%}"
            + (f", p90 {held['p90']:.1%}" if held.get("p90") else "")
            if held
            else ""
        )
        of = f"in-sample, on the rows it was fitted on{beside}; "
    elif e.get("of") == "held_out":
        of = (
            f"the {route['device_fit']} fit scored on another device's tables, that device "
            "left out of it; "
        )
    elif e.get("of") == "floor":
        return (
            f"the kernel tables' error for this route is not measured; expect at least median "
            f"{e['median']:.1%}{p90} |error| (a floor, not a measurement: the engine's "
            "leave-one-device-out figures, README.md; each measured kernel's time, not TTFT or "
            "TPOT)"
        )
    return (
        f"the kernel tables' median {e['median']:.1%}{p90} |error| ({of}each measured kernel's "
        "time, not TTFT or TPOT)"
    )


#: :func:`kernel_expected_error` of the plain roofline bound (``profile="roofline"`` or a
#: ``calibration``): not a prediction of the kernels' times, so no error of one
PLAIN_BOUND_ERROR: dict[str, Any] = {
    "note": "Expected error: not measured for the plain roofline bound (uncalibrated: a lower "
    "bound on each kernel's time, not a prediction of it)",
    "median": None,
    "p90": None,
    "of": None,
    "source": "not measured",
}


def kernel_expected_error(route: dict | None) -> dict[str, Any]:
    """The error to expect of a kernel-model prediction (``Prediction.expected_error`` and
    ``roofline --format json``'s ``expected_error``), as plan says it for the same device,
    engine and profile, its kernel clause alone (a roofline call times kernels, not TTFT or
    TPOT): ``note`` (one line), ``median``, ``p90``, ``of`` and ``source``; for ``route`` None
    the plain roofline bound's (:data:`PLAIN_BOUND_ERROR`)."""
    if route is None:
        return dict(PLAIN_BOUND_ERROR)
    e = route["expected_error"] or {}
    return {
        "note": f"Expected error: {kernel_error_words(route)}.",
        "median": e.get("median"),
        "p90": e.get("p90"),
        "of": e.get("of"),
        "source": route["expected_error_source"],
    }


def unmeasured_named(route: dict) -> str | None:
    """The kernels no shared table measures that take :data:`STAND_IN_WARN_SHARE` of a route's
    decode step or more, by name (``prediction_note``'s and the app's expected-error line's);
    None where all of them together take less."""
    if route.get("unmeasured_share", 0) < STAND_IN_WARN_SHARE:
        return None
    return ", ".join(
        u["kernel"] for u in route["unmeasured_kernels"] if u["share"] >= STAND_IN_WARN_SHARE
    )


def prediction_note(route: dict) -> str:
    """One sentence on how far a plan's times may be off: the kernel tables' error for its route
    (each measured kernel row's, not TTFT's or TPOT's: :func:`kernel_error_words`), the
    serving-level errors beside it, and where the model's MLA geometry is not measured, that
    neither is its."""
    kernel = kernel_error_words(route)
    if route.get("engine_route") == "partly_stand_in":
        kernel += (
            f", {ENGINE_LABELS.get(route['engine'], route['engine'])}'s own kernels only: "
            f"{route['stand_in_share']:.0%} of the decode step's kernel time is another "
            "engine's fit, not measured on this engine"
        )
    names = unmeasured_named(route)
    if names is not None:
        kernel += (
            f"; it does not cover the {route['unmeasured_share']:.0%} of the decode step's "
            f"kernel time no shared table measures ({names}, timed by another kind of kernel's "
            "fit)"
        )
    text = f"Expected error: {kernel}; {serving_error_words(route.get('device', ''))}"
    if route.get("geometry_note"):
        text += f"; {route['geometry_note']}"
    return text + "."


#: The measured device whose tables leave-one-device-out predicts from a fit of the key's
_OTHER_DEVICE = {"H100-SXM": "B200", "B200": "H100-SXM", "A100-SXM-80GB": "H100-SXM"}


def _loo_floor(engine: str) -> tuple[float, float | None] | None:
    """(median, p90) |error| as fractions: ``engine``'s worst leave-one-device-out figures
    (:data:`ROUTE_ERRORS`' third, :data:`ROUTE_LOO_P90`), the floor README.md gives a device no
    table of whose tensor-core generation ships; None for an engine with none."""
    medians = [e[2] for (eng, _), e in ROUTE_ERRORS.items() if eng == engine]
    p90s = [v for (eng, _), v in ROUTE_LOO_P90.items() if eng == engine]
    if not medians:
        return None
    return round(max(medians) / 100, 4), (round(max(p90s) / 100, 4) if p90s else None)


def _held_out(engine: str, device: str) -> dict[str, Any] | None:
    """A fitted device's tables predicted from another device's fit of ``engine`` (README.md's
    leave-one-device-out figures): median, p90 where known, and the fit's device."""
    if device == "A100-SXM-80GB":
        median, p90 = CROSS_GENERATION_ERRORS["A100 from H100"]
        return {"median": round(median / 100, 4), "p90": round(p90 / 100, 4), "from": "H100-SXM"}
    other = _OTHER_DEVICE.get(device)
    measured = ROUTE_ERRORS.get((engine, other or ""))
    if not other or not measured:
        return None
    p90 = ROUTE_LOO_P90.get((engine, other))
    return {
        "median": round(measured[2] / 100, 4),
        "p90": round(p90 / 100, 4) if p90 is not None else None,
        "from": other,
    }


#: How a plan's device was predicted (``Plan.prediction["device_route"]``): its own fit, the
#: fit of a measured device of its tensor-core generation by datasheet ratios, the pooled fit
#: naming the nearest fitted generation whose kernels it runs, the pooled fit alone, the
#: ratios of its own measured ceilings (``mlacalc bench``), or no fit at all.
DEVICE_ROUTES = (
    "fitted",
    "same_generation",
    "nearest_architecture",
    "pooled",
    "measured_ceilings",
    "not_fitted",
)


#: The least difference of an assumed clock from its fitted device's that the route notes
#: (:func:`prediction_route`): 1%, below B200's 1.4% over H100 that the fits take in stride
CLOCK_NOTE_FROM = 0.01


def geometry_note(m: Any) -> str:
    """Where an MLA model's latent rank or head widths are not a measured row's
    (:func:`~mlacalc.timemodel.mla_geometry.mla_geometry_off`): that the expected error is the
    benchmark's at the measured geometry, not at this one ("" elsewhere: a plan of kv_lora_rank
    1,024 gave expected_error 0.048 beside its "extrapolated" warning, a trial found)."""
    off = mla_geometry_off(m) if m is not None else {}
    if not off:
        return ""
    measured = ", ".join(f"{f} {v}" for f, v in MEASURED_MLA_GEOMETRY.items())
    theirs = ", ".join(f"{f} {have:,}" for f, (have, _) in off.items())
    return (
        f"the expected error holds for the measured MLA geometry (DeepSeek-V3's {measured}), "
        f"not for this model's {theirs}: its attention core's time is the fitted rule "
        "extrapolated, with no measured error"
    )


def prediction_route(
    profile: Any, hw: HardwareSpec, engine: str, engine_note: str = "", model: Any = None
) -> dict:
    """How a plan's kernel times on ``hw`` under ``engine`` were predicted, as fields
    (``Plan.prediction``): the device's route (:data:`DEVICE_ROUTES`) and the fitted device
    whose fit timed it, the engine's (``own``, or ``stand_in``: another engine's profile, said
    in ``engine_note``), the benchmark's error for that route where the project measured one
    (:data:`ROUTE_ERRORS`, with the README row it is read from), the device figures the time
    model assumes and, where its clock is one of them and slower than the fitted device's, what
    that does to its fixed costs. ``geometry_note``: where ``model`` is MLA at a latent rank or
    head widths no measured row has, that the expected error is not this geometry's
    (:func:`geometry_note`). ``expected_error`` is the kernel tables' (``expected_error_of``:
    "kernels"), not TTFT's or TPOT's: ``serving_error`` holds the served figures' against
    published runs (:data:`SERVING_ERRORS`), and ``note`` says both in one sentence
    (:func:`prediction_note`)."""
    prof = load_profile(profile)
    fig = _device_figures(hw)
    route, fit = _device_route(prof, hw)
    theirs = engine if not engine_note else prof.engine
    # the pooled fit times a device of a generation no table ships: no one device's fit did,
    # the nearest fitted architecture whose kernels it runs is named beside (its ratios too)
    kin = fit if route == "nearest_architecture" else None
    fit = None if kin else fit
    out: dict[str, Any] = {
        "device": hw.name,
        "device_route": route,
        "device_fit": fit,
        "nearest_architecture": kin,
        "ratios": transfer_ratios(hw, fit or kin),
        "engine": engine,
        "engine_route": "stand_in" if engine_note else "own",
        "engine_profile": prof.engine,
        "expected_error": None,
        "expected_error_source": "",
        "assumed": sorted(f.split(" = ")[0] for f in fig.fallbacks) if fig else [],
        "clock_note": "",
        "geometry_note": geometry_note(model),
        "expected_error_of": "kernels",
        "serving_error": {
            k: {f: v for f, v in e.items() if f not in ("row", "said", "rows")}
            for k, e in SERVING_ERRORS.items()
        },
        "serving_error_source": SERVING_ERROR_SOURCE,
        "note": "",
    }
    label = ENGINE_LABELS.get(theirs, theirs)
    # README.md's figures are the shipped profiles' (matched by content digest): a profile
    # edited or fitted by a user is scored by its own residuals where it records them, else
    # not at all (a copy of fit-h100-sxm-sglang with its GEMMs halved moved TPOT 24 -> 36 ms
    # and kept the shipped 5.2% median, a trial found)
    shipped = prof.shipped
    measured = ROUTE_ERRORS.get((theirs, fit or "")) if shipped else None
    out["profile"] = prof.identity()
    if engine_note:
        out["expected_error_source"] = (
            "not measured (no benchmark times one engine's kernels by another's profile)"
        )
    elif route == "fitted" and measured:
        out["expected_error"] = {
            "median": round(measured[0] / 100, 4),
            "p90": round(measured[1] / 100, 4),
            "of": "fitted",
            "held_out": _held_out(theirs, fit or ""),
        }
        out["expected_error_source"] = (
            f"README.md 'How accurate the times are': {label} on {fit}, fitted (pooled median "
            "/ p90 |error| of every measured row, in-sample: the rows the profile was fitted "
            "on; held out: the device's tables predicted from another device's fit)"
        )
    elif route == "same_generation" and measured and _beyond_checked(hw, fit):
        out["expected_error_source"] = (
            f"not measured: {_beyond_checked(hw, fit)}; no table of {hw.name} ships (unvalidated)"
        )
    elif route == "same_generation" and measured:
        p90 = ROUTE_LOO_P90.get((theirs, fit or ""))
        out["expected_error"] = {
            "median": round(measured[2] / 100, 4),
            "p90": round(p90 / 100, 4) if p90 is not None else None,
            "of": "held_out",
        }
        out["expected_error_source"] = (
            f"README.md 'How accurate the times are': {label}'s {fit} profile on "
            f"{_OTHER_DEVICE[fit or '']}'s tables (leave one device out, pooled median |error|; "
            "p90: provenance.ROUTE_LOO_P90, the same benchmark run), the nearest measured "
            f"route: no table of {hw.name} ships, so its own is not measured"
        )
    if not measured and not engine_note and not out["expected_error_source"]:
        _user_profile_error(out, prof, hw, route, shipped)
    vendor = str(getattr(hw, "vendor", "") or "")
    nvidia = vendor.lower() in ("", "nvidia")  # another vendor's floor: other_vendor_words
    floor = (
        _loo_floor(theirs)
        if route in ("nearest_architecture", "pooled") and nvidia and shipped
        else None
    )
    if not out["expected_error_source"] and floor is not None:
        # no table of its generation ships: the least error to expect is what a fit carried
        # to another measured device gives (README.md: "at least as far off as the
        # leave-one-device-out column"), said as a floor, not as its own measurement
        out["expected_error"] = {"median": floor[0], "p90": floor[1], "of": "floor"}
        out["expected_error_source"] = (
            f"not measured: no table of this device's tensor-core generation ships; a floor, "
            f"not a measurement: README.md 'How accurate the times are', {label}'s "
            "leave-one-device-out figures (the worst of its fits scored on another measured "
            "device's tables; p90: provenance.ROUTE_LOO_P90); a device no table of whose "
            "generation ships is at least as far off, possibly more"
        )
    if not out["expected_error_source"]:
        out["expected_error_source"] = (
            "not measured: no table of this device's tensor-core generation ships"
            if route in ("nearest_architecture", "pooled")
            else "not measured"
        )
    if getattr(hw, "kind", "") == "gpu" and not nvidia:
        out["expected_error_source"] += "; " + other_vendor_words(vendor)
    if (
        fig
        and fit
        and route == "same_generation"
        and any(f.startswith("clock_hz = ") for f in fig.fallbacks)
    ):
        # every fixed cost is a time of SM work stated in clocks (terms.CLOCKED): a device
        # predicted from another's fit at an assumed clock takes the ratio of the two clocks
        theirs_fig = _device_figures(load_hardware(fit))
        ratio = theirs_fig.clock_hz / fig.clock_hz if theirs_fig else 1.0
        if abs(ratio - 1.0) >= CLOCK_NOTE_FROM:
            said = next(f for f in fig.fallbacks if f.startswith("clock_hz = "))
            why = re.split(r": |; ", said.partition(" (")[2].removeprefix("assumed: "), maxsplit=1)
            out["clock_note"] = (
                f"its SM clock ({fig.clock_hz / 1e6:,.0f} MHz) is an assumption ({why[0]}) and "
                f"{'below' if ratio > 1 else 'above'} {fit}'s "
                f"({theirs_fig.clock_hz / 1e6:,.0f} MHz): each kernel's fixed cost is stated "
                f"in clocks, so it takes {ratio:.2f}x {fit}'s, and a step of small kernels "
                f"comes out {'slower' if ratio > 1 else 'faster'} than on {fit} by up to that"
            )
    out["note"] = prediction_note(out)
    return out


def _user_profile_error(out: dict[str, Any], prof: Any, hw: Any, route: str, shipped: bool) -> None:
    """``out``'s expected error where README.md's figures do not apply: a profile fitted on
    the device that records residuals of its own there is scored by them (``of``:
    ``own_residuals``); a profile not shipped whose residuals are a shipped profile's (a
    shipped file copied and edited) or that records none is not measured, the note says why."""
    own = _own_residuals(prof, hw.name) if route == "fitted" else {}
    copied = _copied_residuals(prof, hw.name) if own and not shipped else None
    who = f"profile {prof.name} ({prof.source_digest}) is not a shipped profile"
    if copied:
        out["expected_error_source"] = (
            f"not measured: {who}, and the residuals it records for {hw.name} are shipped "
            f"profile {copied}'s, not a fit of its own figures; README.md's errors hold for "
            "the shipped profiles alone (score it with mlacalc validate --profile, or fit it "
            "with mlacalc calibrate, which records its own residuals)"
        )
    elif own:
        # a profile fitted on the user's own tables of this device: its residuals there
        # (fitted rows, not held out) are the only error measured for it; across its classes
        # weighted by their rows, as README.md's figures pool a device's rows (the worst class
        # of all gave an earlier release's shipped profile 50% / 145%, from a Blackwell
        # attention class an H100 plan never runs)
        rows = [float(r.get("rows") or 1) for r in own.values()]
        out["expected_error"] = {
            "median": round(
                _weighted_median([r["median_abs_error"] for r in own.values()], rows), 4
            ),
            "p90": round(
                _weighted_median([r.get("p90_abs_error", 0.0) for r in own.values()], rows), 4
            ),
            "of": "own_residuals",
        }
        worst = max(own, key=lambda k: own[k]["median_abs_error"])
        kin = prof.name in shipped_profiles() and not shipped
        out["expected_error_source"] = (
            f"profile {prof.name}'s own residuals on the {hw.name} tables it was fitted on "
            + ("(an earlier or edited copy of the shipped profile of its name) " if kin else "")
            + "(fitted rows, not held out; the classes' median and p90 |error|, each the "
            f"median over its classes weighted by their rows; the worst class {worst}): "
            + "; ".join(
                f"{k} {r.get('rows', '?')} rows, median {r['median_abs_error']:.1%}, p90 "
                f"{r.get('p90_abs_error', 0.0):.1%}"
                for k, r in own.items()
            )
            + "; a kernel class it holds no fit of is not measured"
        )
        out["own_fit_classes"] = sorted(own)
    elif not shipped:
        out["expected_error_source"] = (
            f"not measured: {who} and records no residuals for {hw.name}; README.md's errors "
            "hold for the shipped profiles alone, matched by content (score it with mlacalc "
            "validate --profile)"
        )


#: The figures a device's transfer from a fitted device scales its kernels by, in words
_RATIO_WORDS = (
    ("sm_count", "SMs"),
    ("clock_hz", "clock"),
    ("l2_bytes", "L2"),
    ("hbm_bytes_per_s", "bandwidth"),
    ("bf16", "bf16 tensor rate"),
)


def transfer_ratios(hw: Any, fit: str | None) -> dict[str, float]:
    """The target's figures over the fitted device's that its kernels are scaled from (SMs,
    clock, L2, HBM bandwidth, dense bf16 tensor rate): what datasheet ratios moves; empty
    where no one device's fit is the source (the pooled fit, measured ceilings)."""
    if not fit or getattr(hw, "measured", False):
        return {}
    mine, theirs = _device_figures(hw), _device_figures(load_hardware(fit))
    if mine is None or theirs is None:
        return {}
    out = {}
    for key, _ in _RATIO_WORDS:
        a = mine.peaks.get(key) if key == "bf16" else getattr(mine, key, None)
        b = theirs.peaks.get(key) if key == "bf16" else getattr(theirs, key, None)
        if a and b:
            out[key] = round(float(a) / float(b), 3)
    return out


def ratio_words(route: dict) -> str:
    """The transfer's ratios in one clause: "ratios to H100-SXM: SMs 0.59x, clock 1.00x, L2
    1.20x, bandwidth 1.19x, bf16 tensor rate 0.15x" (``""`` where there are none)."""
    r = route.get("ratios") or {}
    if not r:
        return ""
    said = ", ".join(f"{w} {r[k]:.2f}x" for k, w in _RATIO_WORDS if k in r)
    return f"its figures over {route['device_fit'] or route.get('nearest_architecture')}'s: {said}"


#: The figures the leave-one-device-out check's transfer covers: a device of the same
#: generation whose tensor rate or bandwidth over the fitted device's lies outside what that
#: check moved (H100-SXM <-> B200: 0.44x-2.27x the bf16 rate, 0.44x-2.30x the bandwidth) is
#: not covered by its error
_CHECKED_RATIOS = (("bf16", "bf16 tensor rate"), ("hbm_bytes_per_s", "bandwidth"))


def _beyond_checked(hw: Any, fit: str | None) -> str:
    """Why the leave-one-device-out error of ``fit``'s profile does not cover ``hw`` (its tensor
    rate or bandwidth over ``fit``'s beyond the span that check moved: H20's bf16 rate is 0.15x
    H100's), or ``""``."""
    other = _OTHER_DEVICE.get(fit or "")
    if not other:
        return ""
    mine = transfer_ratios(hw, fit)
    checked = transfer_ratios(load_hardware(other), fit)
    for key, words in _CHECKED_RATIOS:
        if key not in mine or key not in checked:
            continue
        lo, hi = sorted((checked[key], 1 / checked[key]))
        if not lo * 0.99 <= mine[key] <= hi * 1.01:
            return (
                f"its {words} is {mine[key]:.2f}x {fit}'s, beyond the {lo:.2f}x-{hi:.2f}x "
                f"the leave-one-device-out check ({fit} <-> {other}) spans"
            )
    return ""


def route_warning(route: dict) -> str:
    """One line for ``plan``'s warnings where the device or the engine was not fitted (``""``
    where both were): how, the benchmark's error for that route, and the clock's note."""
    # a step partly timed by stand-ins: each said in a warning of its own (plan's
    # stand_in_warnings), not as the engine unfitted
    if route["device_route"] == "fitted" and route["engine_route"] in ("own", "partly_stand_in"):
        if not route.get("own_fit_classes"):
            return ""
        return (
            f"{route['device']} is timed by a profile fitted on its own tables for "
            f"{', '.join(route['own_fit_classes'])} only; its error there: "
            f"{route['expected_error_source']} (the calibration line says how every other "
            "class is timed)"
        )
    how = {
        "same_generation": f"by datasheet ratios from the {route['device_fit']} fit (same "
        "tensor-core generation)",
        "nearest_architecture": "by datasheet ratios from the pooled fit, nearest fitted "
        f"architecture {route.get('nearest_architecture')} (unvalidated)",
        "pooled": "by datasheet ratios from the pooled fit (unvalidated)",
        "measured_ceilings": "by the ratios of its measured ceilings (mlacalc bench)",
        "not_fitted": "by uncalibrated datasheet defaults",
        "fitted": "by its own fit",
    }[route["device_route"]]
    parts = [f"{route['device']} is not a fitted device: timed {how}"]
    if route["device_route"] == "fitted":
        parts = [f"{route['engine']} is not fitted on {route['device']}"]
    if route["engine_route"] == "stand_in":
        parts.append(f"{route['engine_profile']}'s kernels stand in for {route['engine']}'s")
    err = route["expected_error"]
    if err and route["device_route"] == "same_generation":
        # the median alone, the same under every engine as rounded (--compare-engines says this
        # line once for all); each engine's p90 is in its Expected-error line
        parts.append(
            f"expect about {err['median']:.0%} median |error|, the {route['device_fit']} "
            "profile's on another device's tables (README.md; no table of "
            f"{route['device']} checks it)"
        )
    elif err and err.get("of") == "floor":
        parts.append(
            f"its error is not measured; expect at least {err['median']:.0%} median |error| "
            "(a floor: the engine's leave-one-device-out figure, README.md)"
        )
    elif err:
        parts.append(f"expect about {err['median']:.0%} median |error| (README.md)")
    else:
        parts.append(f"its error is {route['expected_error_source']}")
    if route["clock_note"]:
        parts.append(route["clock_note"])
    if ratio_words(route):
        parts.append(ratio_words(route))
    return "; ".join(parts)


def _weighted_median(values: list[float], weights: list[float]) -> float:
    """The median of ``values`` each counted ``weights`` times (the first value whose running
    weight reaches half the total).

    >>> _weighted_median([0.05, 0.5, 0.06], [900, 10, 100])
    0.05
    """
    order = sorted(range(len(values)), key=lambda i: values[i])
    half, run = sum(weights) / 2, 0.0
    for i in order:
        run += weights[i]
        if run >= half:
            return float(values[i])
    return float(values[order[-1]])


def _own_residuals(prof: Any, device: str) -> dict[str, dict]:
    """The residuals a profile records for ``device``'s own classes (``mlacalc calibrate`` on
    a user's tables), each with a median |error|; empty for a shipped profile's device that
    :data:`ROUTE_ERRORS` covers, or a profile without them."""
    theirs = (getattr(prof, "residuals", {}) or {}).get(device, {})
    return {
        k: r
        for k, r in theirs.items()
        if isinstance(r, dict) and isinstance(r.get("median_abs_error"), (int, float))
    }


def _copied_residuals(prof: Any, device: str) -> str | None:
    """The shipped profile whose residual record of a class on ``device`` a profile of other
    content holds unchanged (a shipped file copied and edited: those residuals are not its
    own; a class's record, not the whole: a trial's copy of an earlier fit-h100-sxm-sglang
    shared 54 of its 57 with the profile shipped now, and a fit of a user's own tables
    matches none), or None."""
    theirs = (getattr(prof, "residuals", {}) or {}).get(device) or {}
    shared = {}
    for name in shipped_profiles():
        shipped = (load_profile(name).residuals or {}).get(device) or {}
        shared[name] = sum(isinstance(r, dict) and shipped.get(k) == r for k, r in theirs.items())
    best = max(shared, key=lambda n: shared[n], default=None)  # the one it shares most with
    return best if best is not None and shared[best] else None


def engine_vendor_warning(hw: Any, engine: str) -> str:
    """TensorRT-LLM on another vendor's GPU (a new-user trial's MI355X plans read as
    TensorRT-LLM's without a word): it runs on NVIDIA GPUs only, so its kernels' times there
    are a stand-in; ``""`` elsewhere."""
    vendor = getattr(hw, "vendor", "")
    if engine != "trtllm" or getattr(hw, "kind", "") != "gpu" or vendor in ("", "nvidia"):
        return ""
    return (
        f"TensorRT-LLM runs on NVIDIA GPUs only: on {hw.name} ({vendor.upper()}) these "
        "are its kernels' times by datasheet ratios, a stand-in; --engine sglang or vllm "
        "names an engine that runs there (their kernels measured on NVIDIA GPUs too)"
    )


def device_warnings(
    profile: Any, hw: Any, engine: str, engine_note: str = "", *, timed: bool = True
) -> tuple:
    """What every front end (plan, search, roofline, predict_time) says of a device it times
    by the kernel model without a fit of its own: TensorRT-LLM on another vendor's GPU
    (:func:`engine_vendor_warning`) and, where anything was ``timed``, the device's route with
    its error and ratios (:func:`route_warning`); empty for a fitted device under its own
    engine."""
    route = prediction_route(profile, hw, engine, engine_note) if timed else {}
    said = (
        engine_vendor_warning(hw, engine),
        route_warning(route) if route else "",
        other_cpu_warning(profile, hw),  # a Xeon's fit planning an EPYC
    )
    return tuple(w for w in said if w)


def _device_route(prof: Any, hw: HardwareSpec) -> tuple[str, str | None]:
    """(route, fitted device) of ``hw`` with ``prof``, as :meth:`Profile.describe` words it."""
    if getattr(hw, "measured", False):
        return "measured_ceilings", None
    if not prof.fitted_devices:
        return "not_fitted", None
    if hw.name in prof.devices:
        return "fitted", hw.name
    near = prof.nearest_fitted(hw)
    if near is not None:
        return "same_generation", near
    kin = prof.nearest_architecture(hw)
    if kin is not None:
        return "nearest_architecture", kin
    return "pooled", None


def _device_figures(hw: Any) -> Any:
    """The time model's figures of ``hw``, or None for a spec it cannot read."""
    try:
        return device_figures(hw)
    except (AttributeError, TypeError, ValueError):
        return None
