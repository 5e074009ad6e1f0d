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
from mlacalc.hardware.catalogue import HardwareSpec
from mlacalc.timemodel.engine_profiles import STAND_IN_NOTE, chosen_profile
from mlacalc.timemodel.kernel_time import run_class
from mlacalc.timemodel.moe_time import DEEPEP_STEP
from mlacalc.timemodel.profile import assumed_figures, load_profile
from mlacalc.timemodel.terms import class_key
from mlacalc.words.engines import check_engine
from mlacalc.words.kernels import MIN_LATENCY_MOE, KernelBatch

__all__ = ["calibration_of", "engine_profile_of", "stand_in_kernels"]


def engine_profile_of(profile: Any, engine: Any, hw: HardwareSpec) -> tuple[Any, str, str]:
    """The profile a plan or search times ``engine``'s kernels on ``hw`` with, the engine's
    name and what stood in for it (``"; ..."`` to add to the calibration line, or ``""``): with
    no profile named, the engine's own profile for the device
    (:func:`~mlacalc.timemodel.engine_profiles.profile_for`); a named one as given, said when
    it is another engine's."""
    name = check_engine(engine)
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
        runs[(run.kind, run.dtype, run.variant)] = how
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
    ran = set(runs) | {_ran_class(k, hw, prof) for k in kernels}
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
) -> list[tuple[str, str, list[str], float]]:
    """The kernels of a timed step (row ``i`` of :meth:`~mlacalc.serving.gpu_step.StepModel.
    step`'s breakdown) that another profile's class times, where the profile's notes mark
    that class a stand-in: each stand-in's key, its note ("from trtllm profile default (no
    sglang table)"), the names of the kernels it times and their seconds (all calls)."""
    prof = load_profile(profile)
    out: dict[str, tuple[str, list[str], float]] = {}
    for k in kernels:
        seconds = float(np.atleast_1d(k.get("seconds", 0.0))[i]) if "seconds" in k else 0.0
        ran = _ran_class(k, hw, prof) if seconds > 0 else ()
        key = prof.class_found(hw.name, *ran[:2], hw, ran[2]) if ran else None
        how = _stand_in_how(prof, key) if key else None
        if how:
            how, names, total = out.get(key, (how, [], 0.0))
            out[key] = (how, [*names, k["name"]], total + seconds)
    return [(key, how, names, total) for key, (how, names, total) in sorted(out.items())]


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
