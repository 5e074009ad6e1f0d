"""Which calibration profile predicts an engine's kernels on a device.

Every shipped profile was fitted on one engine's measured tables (``Profile.engine``). A
prediction for an engine on a device, with no profile named, uses the shipped profile of that
engine fitted on that device's own tables where one ships (``fit-b200-sxm`` for TensorRT-LLM on
B200), else the engine's default (``default`` for TensorRT-LLM, ``default-<engine>``), else the
engine's profile of a device of the same tensor-core generation (H200 under SGLang: the SGLang
fit of H100), else TensorRT-LLM's default standing in, which the prediction then says. A
profile of another engine never stands in silently: :func:`engine_note` is the words every
output adds.

Within an engine's profile, a kernel class the engine's tables do not time on any device (B200
has no DeepEP table) is taken from the TensorRT-LLM default profile (:func:`with_stand_ins`), and
:attr:`Profile.notes` lists each such class. (vLLM's MLA attention, published only inside whole
modules, is fitted on the module rows' residuals: ``mlacalc.measured.calibrate``.) An engine's
profile predicting a device of a kernel generation it was not fitted on takes TensorRT-LLM's
MoE classes for the MoE the engine runs there through TensorRT-LLM's kernels
(:func:`with_generation_kernels`: SGLang's and vLLM's FlashInfer TensorRT-LLM MoE on Blackwell).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from mlacalc.hardware.catalogue import load_hardware
from mlacalc.timemodel.device import device_figures
from mlacalc.timemodel.gemm_time import TRTLLM_BLOCK_FP8_GEMM
from mlacalc.timemodel.mla_time import TRTLLM_MLA_DECODE
from mlacalc.timemodel.moe_time import (
    DEEPEP_GROUPED_GEMM,
    DEEPGEMM_MOE,
    ENGINE_MOE_KERNEL,
    SIBLING_MOE_BUILDS,
    TRTLLM_CUTLASS_MOE,
    TRTLLM_MOE,
    flashinfer_cutlass_moe,
)
from mlacalc.timemodel.profile import (
    DEFAULT_PROFILE,
    Profile,
    check_profile_applies,
    load_profile,
    shipped_profiles,
)
from mlacalc.timemodel.terms import class_key
from mlacalc.words.engines import DEFAULT_ENGINE, check_engine
from mlacalc.words.errors import MlacalcError

__all__ = [
    "STAND_IN_NOTE",
    "chosen_profile",
    "engine_note",
    "left_out_base",
    "left_out_composed",
    "profile_for",
    "with_deepep_moe",
    "with_generation_kernels",
    "with_sibling_builds",
    "with_stand_ins",
]

#: The prefix of a profile note that names a class another engine's fit stands in for.
STAND_IN_NOTE = "stand-in: "

#: Composed profiles by the objects composed (``id`` of the profile and its base, and the
#: generation), each with those objects, so that a hit is the same pair: a key of names alone
#: mistook a profile already composed with stand-ins (the same name and origin) for the
#: profile itself, and which came first decided the classes and levels returned
_COMPOSED: dict[tuple[int, int, str], tuple[Profile, Profile, Profile]] = {}


def _cached(prof: Profile, base: Profile, gen: str) -> Profile | None:
    """The profile composed of exactly ``prof`` and ``base`` for ``gen`` before, or None."""
    hit = _COMPOSED.get((id(prof), id(base), gen))
    if hit is None or hit[0] is not prof or hit[1] is not base:
        return None
    return hit[2]


def _cache(prof: Profile, base: Profile, gen: str, composed: Profile) -> Profile:
    if len(_COMPOSED) > 256:  # profiles fitted in a session are new objects each: bounded
        _COMPOSED.clear()
    _COMPOSED[(id(prof), id(base), gen)] = (prof, base, composed)
    # the profile a user named (or the shipped one chosen), whose classes lent from shipped
    # profiles were added to: every output names it by that profile's digest
    composed.__dict__["_composed_from"] = prof.source_digest
    return composed


def _shipped_of(engine: str) -> list[Profile]:
    out = []
    for name in shipped_profiles():
        prof = load_profile(name)
        if prof.engine == engine:
            out.append(prof)
    return out


def with_stand_ins(prof: Profile, base: Profile) -> Profile:
    """``prof`` with every class it lacks (pooled and per device) taken from ``base`` (another
    engine's profile, or the engine's default where ``prof`` was fitted on one device's tables
    only), each listed in the notes as a stand-in; ``prof`` itself when it lacks none."""
    if prof is base or not base.classes:
        return prof
    hit = _cached(prof, base, "")
    if hit is not None:
        return hit
    missing = sorted(k for k in base.classes if k not in prof.classes)
    if not missing:
        return prof
    classes = dict(prof.classes)
    classes.update({k: base.classes[k] for k in missing})
    devices = {d: dict(c) for d, c in prof.devices.items()}
    for device, table in base.devices.items():
        if device not in devices:  # the profile's fitted devices stay its own
            continue
        mine = devices[device]
        for k in missing:
            if k in table and k not in mine:
                mine[k] = table[k]
    why = f"no {prof.engine} table" if prof.engine != base.engine else "no table of its own"
    notes = prof.notes + tuple(
        f"{STAND_IN_NOTE}{k} from {base.engine} profile {base.name} ({why})" for k in missing
    )
    composed = dataclasses.replace(prof, classes=classes, devices=devices, notes=notes)
    return _cache(prof, base, "", composed)


def _generations(prof: Profile) -> set[str]:
    """The kernel generations (:attr:`DeviceFigures.kernel_generation`) of a profile's fitted
    devices that the catalogue knows."""
    out = set()
    for name in prof.fitted_devices:
        try:
            out.add(device_figures(load_hardware(name)).kernel_generation)
        except MlacalcError:
            continue
    return out


def _native_moe_classes(prof: Profile, gen: str) -> dict[str, str]:
    """The plain MoE classes (by name) of ``prof``'s engine on generation ``gen`` whose kernel
    there (:data:`~mlacalc.timemodel.moe_time.ENGINE_MOE_KERNEL`, the ``kernel_source`` of the
    class's rows on ``gen``) ``prof``'s own tables time as a variant, with the variant class
    that times it: of the dtype, else of bf16 (the same kernel at the dtype's rate and bytes).
    SGLang's Hopper bf16, block-scaled fp8 and MXFP4 MoE is its Triton fused MoE, which its
    B200 table times beside FlashInfer's TensorRT-LLM MoE (``sglang_fused_moe_triton``)."""
    out = {}
    for dtype, kernel in ENGINE_MOE_KERNEL.get((prof.engine, gen), {}).items():
        for lent in (class_key("moe", dtype, kernel), class_key("moe", "bf16", kernel)):
            if lent in prof.classes:
                out[class_key("moe", dtype)] = lent
                break
    return out


def left_out_composed(prof: Profile, base: Profile, hardware: Any) -> Profile:
    """An engine's profile of other devices ``prof`` predicting a device left out of its fit,
    composed as a prediction composes it: the classes it lacks and the kernels the engine runs
    on ``hardware``'s generation through TensorRT-LLM's (:func:`with_generation_kernels`) taken
    from ``base``, TensorRT-LLM's profile of those devices not fitted on ``hardware``
    (:func:`left_out_base`; ``validate`` and ``benchmarks/bench_timemodel.py --engines`` both
    score leave-one-device-out this way)."""
    return with_generation_kernels(with_stand_ins(with_sibling_builds(prof), base), base, hardware)


def with_sibling_builds(prof: Profile) -> Profile:
    """``prof`` with each MoE class variant it lacks whose other build it has
    (:data:`~mlacalc.timemodel.moe_time.SIBLING_MOE_BUILDS`: one kernel, its ``kernel_source``
    named apart on each device) taken from that build, each noted as a stand-in; ``prof``
    itself when it lacks none."""
    pairs = [(a, b) for a, b in SIBLING_MOE_BUILDS] + [(b, a) for a, b in SIBLING_MOE_BUILDS]
    lent = [(k, s) for k, s in pairs if k not in prof.classes and s in prof.classes]
    if not lent:
        return prof
    hit = _cached(prof, prof, "siblings")
    if hit is not None:
        return hit
    classes = dict(prof.classes)
    devices = {d: dict(c) for d, c in prof.devices.items()}
    for k, s in lent:
        classes[k] = prof.classes[s]
        for mine in devices.values():
            if s in mine and k not in mine:
                mine[k] = mine[s]
    notes = prof.notes + tuple(
        f"{STAND_IN_NOTE}{k} from {prof.name}'s {s} (the kernel's build on another device)"
        for k, s in lent
    )
    composed = dataclasses.replace(prof, classes=classes, devices=devices, notes=notes)
    return _cache(prof, prof, "siblings", composed)


def left_out_base(prof: Profile, held_out: Any, excluded: Any = None) -> Profile | None:
    """TensorRT-LLM's shipped profile that stands in for the classes an engine's profile ``prof``
    lacks when ``prof`` predicts a device left out of its fit (:func:`left_out_composed`): the
    one fitted on every device ``prof`` was fitted on and on none of ``held_out`` (device
    names), the most devices first, as the issue's leave-one-device-out route reads: B200 from
    the H100 + A100 fit (``default``), H100 from the B200 fit (``fit-b200-sxm``: no B200 + A100
    fit ships). ``excluded`` (a predicate on a profile) drops more (``validate``: a profile
    fitted on the tables it checks, by content). ``None`` where no shipped profile fits.
    ``validate`` and ``benchmarks/bench_timemodel.py --engines`` both take this one."""
    held = set(held_out)
    on = set(prof.fitted_devices)
    found = [
        p
        for p in _shipped_of(DEFAULT_ENGINE)
        if on <= set(p.fitted_devices) and not held & set(p.fitted_devices)
    ]
    if excluded is not None:
        found = [p for p in found if not excluded(p)]
    found.sort(key=lambda p: (-len(p.fitted_devices), p.name))
    return found[0] if found else None


def with_generation_kernels(prof: Profile, base: Profile, hardware: Any) -> Profile:
    """``prof``, an engine's profile fitted on devices of another kernel generation than
    ``hardware``'s, with the MoE classes the engine runs there through TensorRT-LLM's own MoE
    kernels (FlashInfer's ``trtllm`` backend on data-centre Blackwell:
    :data:`~mlacalc.timemodel.moe_time.TRTLLM_MOE`) taken from TensorRT-LLM's profile ``base``
    fitted on ``prof``'s generation: its own bf16 class at each dtype's rate and bytes (its
    Hopper classes of fp8 and block-scaled fp8 time its CUTLASS MoE's costs of those dtypes,
    :data:`~mlacalc.timemodel.moe_time.TRTLLM_OWN_MOE`, which TensorRT-LLM-gen's kernels do not
    pay); each noted as a stand-in. The engine's own class of such a
    dtype, fitted on another kernel (SGLang's Triton MoE on H100), stays the class of that
    kernel's variant (:data:`~mlacalc.timemodel.moe_time.ENGINE_MOE_KERNEL`), which a table of
    the device holds apart. A class that on ``hardware``'s generation is FlashInfer's CUTLASS
    MoE (TensorRT-LLM's MoE wrapped: vLLM's Hopper block-scaled fp8,
    :func:`~mlacalc.timemodel.moe_time.flashinfer_cutlass_moe`) and that ``prof``'s tables time
    no variant of takes ``base``'s class of the dtype where ``base``'s tables time that dtype on
    the CUTLASS MoE (:data:`~mlacalc.timemodel.moe_time.TRTLLM_CUTLASS_MOE`), else its bf16
    class (TensorRT-LLM's Blackwell block-scaled class is DeepGEMM's kernel). ``prof`` itself
    where its engine runs no such kernel on ``hardware``, where ``base`` is not TensorRT-LLM's
    or where a fitted device of ``prof`` is of ``hardware``'s generation. Likewise the MLA
    decode classes where the engine runs TensorRT-LLM's own MLA decode kernel there
    (:data:`~mlacalc.timemodel.mla_time.TRTLLM_MLA_DECODE`: SGLang's and vLLM's on Blackwell),
    from ``base``'s classes of the same dtype, and the block-scaled fp8 GEMM class where the
    engine's is DeepGEMM's kernel on both generations
    (:data:`~mlacalc.timemodel.gemm_time.TRTLLM_BLOCK_FP8_GEMM`: SGLang's, whose Blackwell fit
    holds a per-call scale conversion its Hopper kernel does not run). (These are
    pooled classes: the device's own level of ``prof`` is another generation's.)"""
    if prof.engine == DEFAULT_ENGINE or base.engine != DEFAULT_ENGINE or hardware is None:
        return prof
    gen = device_figures(hardware).kernel_generation
    moved = TRTLLM_MOE.get((prof.engine, gen), ())
    mla = (prof.engine, gen) in TRTLLM_MLA_DECODE
    block = (prof.engine, gen) in TRTLLM_BLOCK_FP8_GEMM
    native = _native_moe_classes(prof, gen)
    mine = _generations(prof)
    src = next(iter(mine)) if len(mine) == 1 else ""
    # the MoE classes that on ``gen`` are FlashInfer's CUTLASS MoE, TensorRT-LLM's MoE wrapped,
    # where ``prof``'s tables time no variant of that kernel (moe_time.flashinfer_cutlass_moe)
    wrapped = [
        d
        for d, kernel in ENGINE_MOE_KERNEL.get((prof.engine, gen), {}).items()
        if flashinfer_cutlass_moe(kernel) and class_key("moe", d) not in native
    ]
    if not (moved or mla or block or native or wrapped) or gen in mine or not src:
        return prof
    if src not in _generations(base):
        return prof
    hit = _cached(prof, base, gen)
    if hit is not None:
        return hit
    classes = dict(prof.classes)
    notes = list(prof.notes)
    kept = ENGINE_MOE_KERNEL.get((prof.engine, src), {})
    lent = class_key("moe", "bf16")
    for dtype in moved:
        # TensorRT-LLM's own bf16 class, for every dtype: the same library's routing,
        # permutation and fused passes around its grouped GEMMs, at the dtype's rate and bytes.
        # No Hopper table times a TensorRT-LLM-gen kernel; TensorRT-LLM's Hopper fp8 and
        # block-scaled fp8 classes (its CUTLASS MoE's, TRTLLM_OWN_MOE) carry those kernels' own
        # costs over its bf16 class: the per-tensor fp8 CUTLASS MoE 2.5 us a wave of tiles
        # (its bf16 0.7 us on H100, 1.4 pooled), the block-scaled one 14.3 bf16 passes around
        # its GEMMs over Hopper's 1x128 activation blocks (bf16 5.6). TensorRT-LLM-gen's
        # kernels quantize their activations inside the routing and FC1's epilogue (fp4) or
        # take them quantized (fp8), so neither (docs/time-model.md, "TensorRT-LLM's bf16
        # class for every TensorRT-LLM-gen dtype")
        name = class_key("moe", dtype)
        if lent not in base.classes:
            continue
        if name in prof.classes and dtype in kept:
            classes.setdefault(class_key("moe", dtype, kept[dtype]), prof.classes[name])
        # TensorRT-LLM-gen's routing selects every token's top-k in its fused routing kernel,
        # with no generic top-k after it (moe_time.TRTLLM_MOE): no select_s; nor the CUTLASS
        # path's cost per expert of the rank (expert_s: its B200 rows show none), nor the
        # CUTLASS path's one-block sort (sort_pair_s: TensorRT-LLM-gen's cost a routed pair up
        # to moe_time.GEN_TOKEN_KNEE tokens is another kernel's, fitted on B200 alone)
        classes[name] = {
            **base.classes[lent],
            "select_s": 0.0,
            "expert_s": 0.0,
            "sort_pair_s": 0.0,
        }
        notes.append(
            f"{STAND_IN_NOTE}{name} from {base.engine} profile {base.name}'s {lent} "
            f"({prof.engine} runs TensorRT-LLM's MoE kernels on {gen}; its own fit is of {src})"
        )
    for dtype in wrapped:
        # TensorRT-LLM's class of the dtype where its tables of ``src`` time it on its CUTLASS
        # MoE, the kernels FlashInfer wraps; else (its Blackwell block-scaled class is
        # DeepGEMM's kernel) its CUTLASS bf16 class at the dtype's rate and bytes, as above
        name = class_key("moe", dtype)
        cutlass = name if dtype in TRTLLM_CUTLASS_MOE.get(src, ()) else lent
        if cutlass in base.classes:
            classes[name] = base.classes[cutlass]
            notes.append(
                f"{STAND_IN_NOTE}{name} from {base.engine} profile {base.name}'s {cutlass} "
                f"({prof.engine}'s {name} on {gen} is FlashInfer's CUTLASS MoE, TensorRT-LLM's "
                f"MoE wrapped, which its tables of {src} do not time)"
            )
    for name, lent in native.items():
        classes[name] = prof.classes[lent]
        notes.append(
            f"{STAND_IN_NOTE}{name} from {prof.name}'s {lent} ({prof.engine}'s {name} on {gen} "
            f"is that kernel, which its tables of {src} time as a variant)"
        )
    for dtype in ("bf16", "fp8") if mla else ():
        name = class_key("mla_decode", dtype)
        if name in base.classes:
            classes[name] = base.classes[name]
            notes.append(
                f"{STAND_IN_NOTE}{name} from {base.engine} profile {base.name}'s {name} "
                f"({prof.engine} runs TensorRT-LLM's MLA decode kernel on {gen}; its own fit "
                f"is of {src})"
            )
    name = class_key("gemm", "fp8_block")
    if block and (prof.engine, src) in TRTLLM_BLOCK_FP8_GEMM and name in base.classes:
        classes[name] = dict(base.classes[name])
        node = base.classes.get(class_key("quantize", "fp8"), {}).get("fixed_s")
        if node is not None:
            # each kernel of the per-call scale conversion (gemm_time.CONVERT_KERNELS) is one
            # more small node of the graph, at the cost of TensorRT-LLM's quantize node
            classes[name]["node_s"] = node
        notes.append(
            f"{STAND_IN_NOTE}{name} from {base.engine} profile {base.name}'s {name} "
            f"({prof.engine} runs DeepGEMM's block-scaled GEMM on {src} and {gen}, converting "
            f"its scales per call on tcgen05 alone)"
        )
    composed = dataclasses.replace(prof, classes=classes, notes=tuple(notes))
    return _cache(prof, base, gen, composed)


def with_deepep_moe(prof: Profile, trt: Profile) -> Profile:
    """``prof`` with the class of DeepGEMM's grouped GEMM MoE that its engine runs behind
    DeepEP's exchange (:data:`~mlacalc.timemodel.moe_time.DEEPEP_GROUPED_GEMM`; SGLang's and
    vLLM's block-scaled fp8 experts) taken from TensorRT-LLM's profile ``trt`` of the device, whose
    class of the dtype is a grouped-GEMM MoE over the rank's own rows (on B200 DeepGEMM's
    itself, on H100 TensorRT-LLM's CUTLASS kernel), pooled and per fitted device, noted as a
    stand-in; ``prof`` itself where it holds the class or its engine runs none."""
    dtypes = DEEPEP_GROUPED_GEMM.get(prof.engine, ())
    if not dtypes or trt.engine != DEFAULT_ENGINE:
        return prof
    hit = _cached(prof, trt, DEEPGEMM_MOE)
    if hit is not None:
        return hit
    classes = dict(prof.classes)
    devices = {d: dict(c) for d, c in prof.devices.items()}
    notes = list(prof.notes)
    for dtype in dtypes:
        name, key = class_key("moe", dtype), class_key("moe", dtype, DEEPGEMM_MOE)
        if key in classes or name not in trt.classes:
            continue
        classes[key] = trt.classes[name]
        for device, table in devices.items():
            # the device's own level of TensorRT-LLM's fit where it has one, else its pooled one
            table[key] = trt.devices.get(device, {}).get(name, trt.classes[name])
        notes.append(
            f"{STAND_IN_NOTE}{key} from {trt.engine} profile {trt.name}'s {name} "
            f"({prof.engine} runs DeepGEMM's grouped GEMM for its {dtype} experts behind "
            f"DeepEP, which its tables do not time)"
        )
    if len(notes) == len(prof.notes):
        return prof
    composed = dataclasses.replace(prof, classes=classes, devices=devices, notes=tuple(notes))
    return _cache(prof, trt, DEEPGEMM_MOE, composed)


def profile_for(
    engine: Any, device: str | None = None, hardware: Any = None
) -> tuple[Profile, str]:
    """The shipped profile that predicts ``engine``'s kernels on ``device`` and a note of what
    stood in (``""`` when nothing did): :func:`_engine_profile`, with the DeepGEMM MoE class its
    engine runs behind DeepEP taken from TensorRT-LLM's profile of the device
    (:func:`with_deepep_moe`)."""
    prof, note = _engine_profile(engine, device, hardware)
    return _with_device_deepep_moe(prof, device, hardware), note


def _with_device_deepep_moe(prof: Profile, device: str | None, hardware: Any) -> Profile:
    """``prof`` with the DeepGEMM MoE class its engine runs behind DeepEP lent by TensorRT-LLM's
    own profile of ``device`` (:func:`with_deepep_moe`); ``prof`` where its engine runs none."""
    if prof.engine == DEFAULT_ENGINE or not DEEPEP_GROUPED_GEMM.get(prof.engine):
        return prof
    trt, _ = _engine_profile(DEFAULT_ENGINE, device, hardware)
    return with_deepep_moe(prof, trt)


def _engine_profile(
    engine: Any, device: str | None = None, hardware: Any = None
) -> tuple[Profile, str]:
    """The shipped profile that predicts ``engine``'s kernels on ``device`` and a note of what
    stood in (``""`` when nothing did): the engine's profile fitted on the device; else its
    default (``default``, ``default-<engine>``) where one ships; else (given the device's
    ``hardware``) its profile fitted on a device of the same tensor-core generation, which
    predicts this one by datasheet ratios; else TensorRT-LLM's default, standing in. Under
    TensorRT-LLM a device whose architecture the default was not fitted on takes the one-device
    profile of its architecture where one ships (B300, GB200, GB300: ``fit-b200-sxm``)."""
    engine = check_engine(engine)
    base = load_profile(DEFAULT_PROFILE)
    mine = _shipped_of(engine)
    if engine == DEFAULT_ENGINE:
        own = [p for p in mine if device and p.fitted_devices == [device]]
        if device and device not in base.fitted_devices and own:
            return with_stand_ins(own[0], base), ""
        if hardware is not None and device not in base.fitted_devices:
            # a device of an architecture only a one-device profile was fitted on (B300, GB200
            # and GB300 by fit-b200-sxm): that fit, by datasheet ratios, not the pooled one
            kin = [p for p in mine if len(p.fitted_devices) == 1 and p.nearest_fitted(hardware)]
            if kin and base.nearest_fitted(hardware) is None:
                return with_stand_ins(kin[0], base), ""
        return base, ""
    own = [p for p in mine if device and device in p.fitted_devices]
    if own:
        return with_stand_ins(own[0], base), ""
    default = [p for p in mine if p.name == f"default-{engine}"]
    if default:
        return with_generation_kernels(with_stand_ins(default[0], base), base, hardware), ""
    if hardware is not None:
        near = [p for p in mine if p.nearest_fitted(hardware) is not None]
        if near:
            return with_generation_kernels(with_stand_ins(near[0], base), base, hardware), ""
    return base, engine_note(base, engine)


def chosen_profile(profile: Any, engine: str, hardware: Any) -> tuple[Profile, str]:
    """The profile that predicts ``engine``'s kernels on ``hardware`` and what stood in for it
    (``""`` when nothing did): the one given (a name, path or Profile), said when it is another
    engine's; none given, the engine's own for the device (:func:`profile_for`). Either way
    the DeepGEMM MoE class the profile's engine runs behind DeepEP, which no SGLang or vLLM
    table times, is TensorRT-LLM's of the device (:func:`with_deepep_moe`, a stand-in the
    profile's notes say): a named SGLang profile's plain Triton class would time that step
    with TensorRT-LLM's tiles, a combination fitted nowhere."""
    if profile is None:
        return profile_for(engine, hardware.name, hardware)
    prof = load_profile(profile)
    check_profile_applies(prof, hardware)
    note = engine_note(prof, engine, given=True)
    return _with_device_deepep_moe(prof, hardware.name, hardware), note


def engine_note(prof: Profile, engine: str, given: bool = False) -> str:
    """Words for a prediction of ``engine`` made with ``prof``: empty when the profile is the
    engine's own, else what stood in and why (``given``: the user named the profile)."""
    if prof.engine == engine:
        return ""
    if given:
        return (
            f"{prof.engine} kernels stand in for {engine}: the profile given ({prof.name}) is "
            f"{prof.engine}'s"
        )
    return (
        f"{prof.engine} kernels stand in for {engine}: no {engine} profile fits this device "
        f"(profile {prof.name})"
    )
