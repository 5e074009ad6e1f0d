"""Calibration profiles: the fitted parameters of the kernel time model, and what they came from.

A profile holds, per kernel class (``"gemm:bf16"``, ``"mla_decode:bf16"``, ...):

- ``classes``: the parameters fitted jointly on every measured device, used to predict any
  device by its datasheet figures (transfer);
- ``devices``: the parameters fitted on one measured device, used when predicting that device.

It records which measured sets it was fitted on, the residuals of the fit per device and
class, and notes (datasheet figures used where the catalogue had none). Profiles are JSON
(``schema: mlacalc.profile/1``).
"""

from __future__ import annotations

import difflib
import functools
import hashlib
import json
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mlacalc.data import HARDWARE, PROFILES
from mlacalc.hardware.catalogue import HardwareSpec, load_hardware, shipped_hardware
from mlacalc.timemodel.device import ASSUMED_KEYS, DeviceFigures, device_figures
from mlacalc.timemodel.gemm_time import CUTLASS_FP8_ENGINES
from mlacalc.timemodel.terms import PARAMS, borrowed_params, class_key, default_params
from mlacalc.words.engines import DEFAULT_ENGINE, check_engine
from mlacalc.words.errors import ConfigError, InvalidArgumentError, MlacalcError
from mlacalc.words.kernels import KERNEL_KINDS
from mlacalc.words.safeio import json_error_words

__all__ = [
    "DEFAULT_PROFILE",
    "ELEMENTWISE_STAND_INS",
    "SCHEMA",
    "TIMING_VARIANTS",
    "Profile",
    "assumed_figures",
    "load_profile",
    "shipped_profiles",
]

SCHEMA = "mlacalc.profile/1"
DEFAULT_PROFILE = "default"
#: A model step's ``fp4`` GEMMs and experts are the measured ``nvfp4`` kernels (4-bit weights
#: and activations, fp8 scales per 16: how the engines serve FP4 checkpoints on Blackwell).
_ALIASES = {"fp16": "bf16", "fp8_e4m3": "fp8", "fp8_e5m2": "fp8", "fp4": "nvfp4"}
#: The class a dtype without a fit of its own borrows before the bf16 fit. A per-tensor fp8
#: GEMM borrows the SmoothQuant int8 fit (a profile fitted on an A100 has no fp8): both are
#: 8-bit tensor-core GEMMs over an input quantized by kernels of their own, rescaled in the
#: epilogue, with one fixed cost above a bf16 GEMM's. Fitted on A100, predicting H100 fp8:
#: median error 10.9% with the int8 fit (the shipped profiles), 22.6% with the bf16 fit (when
#: this was chosen: 7.3% against 22.6%, the difference nearly all the fixed cost, 4.4 us
#: against 2.6 us at the reference clock; the compute efficiency alone changed it by 0.4
#: points). The block-scaled fp8 GEMM keeps the bf16 fit (with the int8 fit 23% against 16%:
#: its own fixed cost is the bf16 GEMM's). An nvfp4 GEMM or MoE (a profile fitted where no
#: fp4 tensor cores were measured: the Hopper default predicting B200) borrows the block-scaled
#: fp8 fit: both multiply block-scaled operands whose bf16 input a kernel of their own
#: quantizes, with the scale-handling fixed cost a bf16 fit lacks. Fitted on H100 + A100,
#: predicting B200's TensorRT-LLM nvfp4 rows: GEMM median |error| 57.7% -> 34.8%, MoE 31.1% ->
#: 25.4% (with the bf16 fit: 4-bit operands at the fp4 rate and no quantization; the rest is
#: the fp4 rate B200's kernels do not reach, 0.60 of it in B200's own fit against 0.78 for
#: block-scaled fp8, which no Hopper fit can say).
_STAND_INS = {"fp8": "int8", "nvfp4": "fp8_block"}
#: A kind's own first stand-in for a dtype under the engines named, tried before
#: :data:`_STAND_INS`. An nvfp4 GEMM (a CUTLASS / CuTe kernel on Blackwell in every engine)
#: borrows the fit of the engine's CUTLASS fp8 GEMM: SGLang's and vLLM's per-tensor class,
#: CUTLASS's ``scaled_mm`` (:data:`~mlacalc.timemodel.gemm_time.CUTLASS_FP8_ENGINES`), a GEMM
#: whose bf16 input a kernel of its own quantizes as the nvfp4 GEMM's is; TensorRT-LLM's
#: per-tensor class is cuBLAS's, and it keeps its block-scaled fit (its own CUTLASS kernel).
#: Predicting B200's nvfp4 GEMM rows from the engine's H100 profile, median / signed |error|:
#: SGLang 15.5% / -15.4% -> 12.4% / -10.7%, vLLM (no plain block-scaled fit: the bf16 one had
#: stood in) 49.1% / -49.1% -> 24.9% / -24.9%. TensorRT-LLM's rows from its cuBLAS fp8 fit were
#: 29.0% / -29.0% against 32.4% / -32.2%, but nearly all 20-35% fast (2% within 15%, against
#: 30% with the block-scaled fit), which raised its pooled leave-one-out median: the library
#: rule was chosen with those figures in view. Not for MoE: TensorRT-LLM's nvfp4 MoE from the
#: fp8 MoE fit 25.7% -> 28.4%.
_KIND_FIRST_STAND_INS = {("gemm", "nvfp4"): ("fp8", CUTLASS_FP8_ENGINES)}
#: The kind whose fit a kernel class borrows when no table of the profile has a fit of its own
#: kind, and which of its parameters (the others keep their defaults). DeepEP's dispatch and
#: combine (a profile fitted where no DeepEP was measured: the A100 one) take the fixed cost
#: of NCCL's all-to-all of the same payload width (fp8 -> int8, bf16 -> fp16): each is one
#: kernel whose ranks write their tokens straight into every peer's buffer and then wait on a
#: flag from each peer, so a call pays one launch and one cross-rank handshake, the terms an
#: all-to-all's ``fixed_s`` holds. Not the link efficiency nor the per-step latency: NCCL
#: copies with its own channels and its flagged (LL) steps are per peer, where DeepEP's warps
#: copy (LL: every SM; normal: the SMs it is given) and normal mode's steps are its own.
#: Fitted on A100 only, predicting the measured H100 DeepEP rows: low-latency 36.9% -> 9.0%
#: median error (normal mode 14.6% -> 15.2%); borrowing also the link efficiency gave 9.8% and
#: 21.1%, the whole all-to-all fit 12.7% and 48.3% (normal mode's n - 1 steps then wait a
#: tenth of a link latency each, the NCCL flagged step's). The rule was chosen among these three
#: with the H100 figures in view (a mild selection on the predicted device).
#: (No stand-in for the amax quantize pass: its fixed cost and its bandwidth, 0.40 of HBM on
#: H100, have no structural relative in an A100 fit; a GEMM node's fixed cost per node gave
#: 13% with the int8 GEMM fit, 41% with the bf16 one, too fragile to ship.)
_KIND_STAND_INS: dict[str, tuple[str, tuple[str, ...]]] = {
    "dispatch": ("all_to_all", ("fixed_s",)),
    "combine": ("all_to_all", ("fixed_s",)),
}

#: The fit a plain element-wise kernel of a served step (its RMSNorms, RoPE, activations, the
#: prompt's key assembly, embedding, sampling; no table times one alone) borrows under each
#: engine where the profile has no ``elementwise`` class of its own: (kind, dtype, variant) of
#: the engine's one measured single-kernel streaming call over rows of bf16, of which it takes
#: the floor of a call and the share of the HBM a large call reaches (``fixed_s``,
#: ``eff_memory``; its draw by work units keeps the default). TensorRT-LLM's static fp8
#: quantize (``scale_matrix_perf``: one kernel reading bf16, writing fp8; 1.4 / 2.1 us at one
#: token on H100 / B200); SGLang's static quantize is no such kernel (7.9 us at one token, 0.10
#: of the HBM: with its fit the DSA and DeepSeek-V4 module rows come 30-50% slow), so SGLang's
#: causal-conv1d update (``gdn_perf``, one kernel streaming its state and rows: 1.5 / 2.0 us,
#: 0.80 of the HBM). Not vLLM: its MLA classes (fitted on its module rows' residuals), its
#: module classes and host floors were fitted with the defaults in place, and its quantize
#: (2.0 / 2.2 us, 0.88-0.89 of the HBM) would move those rows up to a point worse and one host
#: floor's group past its share (docs/time-model.md, "Element-wise kernels of a served step").
ELEMENTWISE_STAND_INS: dict[str, tuple[str, str, str]] = {
    "trtllm": ("quantize", "fp8", ""),
    "sglang": ("elementwise", "bf16", "conv1d_update"),
}
_ELEMENTWISE_LENT = ("fixed_s", "eff_memory")

#: A lent parameter in words, for the calibration line a user reads (trial12: "has no fit:
#: fixed_s, eff_memory of quantize:fp8" named parameters no output explains).
_LENT_WORDS = {"fixed_s": "fixed cost a call", "eff_memory": "memory-bandwidth efficiency"}


def _lent(key: str, names: tuple[str, ...], other: str, how: str) -> str:
    """How a class without a fit of its own borrows ``names`` from ``other``, in words."""
    said = " and ".join(_LENT_WORDS.get(n, n) for n in names)
    return f"{key} (no fit of its own) takes its {said} from {other} ({how})"


#: variant -> the variant whose fit times it where a profile lacks its own: SGLang's ragged
#: DeepSeek-V4 prompt core (fitted on its module rows' residuals) by FlashMLA's sparse prefill;
#: the walking sparse MLA kernel (``mla_time.WALK_VARIANT``) and TensorRT-LLM-gen's sparse
#: kernel (``mla_time.GEN_SPARSE_VARIANT``) by the sparse class (FlashMLA's; TensorRT-LLM-gen's
#: own class is never the walk's: ``fit-b200-sxm``'s put TensorRT-LLM's H100 prompt module
#: from B200's fit at +103% where the plain class gives -15.6%, docs/time-model.md, "What
#: stands in for the walk"); TensorRT-LLM's decode top-k (``cost.compressed.OWN_DECODE_TOPK``)
#: by SGLang's, which its profiles take in; vLLM's FlashInfer sparse prompt past 2^16 tokens
#: (``mla_time.GEN_SPARSE_WIDE_VARIANT``) by TensorRT-LLM-gen's sparse class, then that one's
#: parent; DeepSeek-V4's v2 top-k past ``LONG_ROW`` pooled keys (``topk_v2_long``) by its
#: top-last class, which timed those rows before they had one
#: Variants that say only how a table timed the plain class's kernel (vLLM's ``gemm_perf``
#: nvfp4 rows: FlashInfer's CuTe DSL linear through vLLM's wrapper, one eager call at a time,
#: ``mapping.VLLM_NVFP4_TABLE_VARIANT``): a profile without their own fit times them as the
#: plain class of the dtype, its stand-ins too (:data:`_STAND_INS`), before any bf16 fit.
TIMING_VARIANTS = frozenset({"FlashInferCuteDslNvFp4LinearKernel"})

_PARENT_VARIANTS = {
    "sparse_ragged": "sparse",
    "sparse_walk": "sparse",
    "sparse_gen": "sparse",
    "sparse_gen_wide": "sparse_gen",
    "topk_trtllm_decode": "topk_flat",
    "topk_vllm_prompt": "topk_flat",
    "topk_vllm_prompt_short": "topk_vllm_prompt",
    "topk_vllm_prompt_wide": "topk_vllm_prompt",
    "topk_v2_long": "topk_v2_top_last",
}


#: The prefix of the note ``mlacalc calibrate --base`` writes: which profile gave the classes
#: the user's tables do not fit (:func:`mlacalc.measured.calibrate.with_base`)
BASE_NOTE = "base: "
_BASE_WORDS = re.compile(
    re.escape(BASE_NOTE) + r"profile (.+?) \(\w+\) gives every class the tables of (.+?) do not fit"
)


def based_on(profile: Profile) -> tuple[str, list[str]] | None:
    """The base profile's name and the user's devices of a profile ``calibrate --base`` wrote
    (its :data:`BASE_NOTE` note), or None for a profile written without a base."""
    for note in profile.notes:
        found = _BASE_WORDS.match(note)
        if found:
            return found.group(1), found.group(2).split(", ")
    return None


@dataclass(frozen=True)
class Profile:
    """Fitted kernel-model parameters with their provenance and residuals."""

    name: str
    classes: dict[str, dict[str, float]] = field(default_factory=dict)
    devices: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)
    fitted_on: tuple[dict[str, Any], ...] = ()
    residuals: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    origin: str = field(default="", compare=False)
    #: the serving engine whose kernels the profile was fitted on (:mod:`mlacalc.words.engines`;
    #: a profile written before engines were a dimension is TensorRT-LLM's)
    engine: str = DEFAULT_ENGINE

    @property
    def fitted_devices(self) -> list[str]:
        """The devices the profile holds device-specific parameters for."""
        return sorted(self.devices)

    def _lookup(
        self, table: dict[str, dict[str, float]], kind: str, dtype: str, variant: str = ""
    ) -> dict | None:
        key = self._found(table, kind, dtype, variant)
        return None if key is None else table[key]

    def _found(
        self, table: dict[str, dict[str, float]], kind: str, dtype: str, variant: str = ""
    ) -> str | None:
        # a variant's own fit in the dtype; else the plain class of the dtype (a profile
        # fitted without the variant, or an older one); else the bf16 fit, variant first
        alias = _ALIASES.get(dtype, dtype)
        keys = [class_key(kind, dtype, variant), class_key(kind, alias, variant)] if variant else []
        parent = _PARENT_VARIANTS.get(variant)
        while parent:  # a variant fitted on part of its parent's kernels: the parent's fit next
            keys += [class_key(kind, dtype, parent), class_key(kind, alias, parent)]
            parent = _PARENT_VARIANTS.get(parent)
        keys += [class_key(kind, dtype), class_key(kind, alias)]
        if alias in _STAND_INS and (not variant or variant in TIMING_VARIANTS):
            first = _KIND_FIRST_STAND_INS.get((kind, alias))
            if first is not None and self.engine in first[1]:
                keys.append(class_key(kind, first[0]))
            keys.append(class_key(kind, _STAND_INS[alias]))
        if variant:
            keys.append(class_key(kind, "bf16", variant))
        keys.append(class_key(kind, "bf16"))
        for key in keys:
            if key in table:
                return key
        # another dtype's plain class of the kind; never a variant's (a profile holding only
        # the Gated DeltaNet variants of elementwise kernels does not time a model's norms)
        same_kind = sorted(k for k in table if k.split(":", 1)[0] == kind and k.count(":") == 1)
        return same_kind[0] if same_kind else None

    def class_found(
        self, device: str, kind: str, dtype: str, hardware: Any = None, variant: str = ""
    ) -> str | None:
        """The key of the profile's class whose fit :meth:`params` times a kernel class by on
        ``device`` (the variant's parent's, another dtype's, ...); None where none is."""
        tables = [self.devices.get(device, {})]
        if hardware is not None and self.devices:
            near = self._sibling(hardware, device)
            tables.append(self.devices.get(near, {}) if near else {})
        for table in [*tables, self.classes]:
            key = self._found(table, kind, dtype, variant)
            if key is not None:
                return key
        return None

    def stood_in_for(
        self, device: str, kind: str, dtype: str, hardware: Any = None, variant: str = ""
    ) -> str | None:
        """The key of the class whose fit :meth:`params` times a kernel class by (its
        :meth:`class_found`) where that is another class's fit, a fallback of :meth:`_found`:
        another dtype's (a dtype's stand-in of :data:`_KIND_FIRST_STAND_INS` or
        :data:`_STAND_INS`: ``gemm:nvfp4`` by ``gemm:fp8`` or ``gemm:fp8_block``, ``gemm:fp8``
        by ``gemm:int8``; the bf16 fit: a weight-only ``gemm:w4a16`` or ``moe:w4a16`` by
        ``gemm:bf16`` / ``moe:bf16``; the kind's first plain class of any dtype) or another
        variant's (a variant's parent of :data:`_PARENT_VARIANTS`: ``sparse_walk`` by
        ``sparse``; the bf16 fit of the variant). None where the class's own fit times it: its
        key, one of its dtype's aliases (``fp16`` is ``bf16``: NCCL's fp16 collective fits time a
        step's bf16 collectives, the same bytes), or its dtype's plain class where the
        variant has no fit (a kernel path of the same class, looked up as the profile's fit of
        it), and where no class does (:meth:`params` says its lender or datasheet defaults)."""
        found = self.class_found(device, kind, dtype, hardware, variant)
        if found is None:
            return None
        _, found_dtype, *rest = found.split(":", 2)
        found_variant = rest[0] if rest else ""
        if _ALIASES.get(found_dtype, found_dtype) != _ALIASES.get(dtype, dtype):
            return found
        return found if found_variant not in ("", variant) else None

    def nearest_fitted(self, hardware: Any) -> str | None:
        """The fitted device whose fit stands in for ``hardware``: of its vendor, one of the
        same architecture (an NVIDIA GPU's compute capability major and architecture name: a
        B200 fit for B300, GB200 and GB300; H100's for H200, H800 and H20; A100's for A30), the
        nearest in dense bf16 FLOP per clock per SM; for a file that gives neither capability
        nor a known architecture, the device within a factor 1.5 of that rate. None otherwise:
        the pooled fit stands in (:meth:`nearest_architecture` names the fitted architecture
        whose kernels the device runs). Another architecture's own fit does not: on the shipped
        tables the pooled fit predicted B200 as well as H100's fit did (NCCL 23% against 28%),
        and A100's fit on Ada's and the RTX PRO 6000's SM counts predicted a GEMM with more rows
        up to 18% faster (L4; the pooled fit 6%)."""
        return self._ranked(hardware)[0]

    def _sibling(self, hardware: Any, device: str) -> str | None:
        """:meth:`nearest_fitted` among the fitted devices other than ``device`` itself: the
        fit that stands in for a class ``device``'s own level of the profile does not hold (a
        user's H200 GEMM fit over a base holding H100's: H100's attention, not the pooled)."""
        return self._ranked(hardware, skip=device)[0]

    def nearest_architecture(self, hardware: Any) -> str | None:
        """The fitted device of another architecture whose kernels ``hardware`` runs (the same
        tensor-core generation, :attr:`DeviceFigures.tensor_core_generation`: Ada's and the RTX
        PRO 6000's per-warp ``mma.sync`` kernels are Ampere's, data-centre Blackwell's
        warp-group MMAs Hopper's), nearest in FLOP per clock per SM; None where a device of its
        own architecture is fitted, or none of its generation."""
        return self._ranked(hardware)[1]

    def _ranked(self, hardware: Any, skip: str = "") -> tuple[str | None, str | None]:
        """(:meth:`nearest_fitted`, :meth:`nearest_architecture`) of ``hardware``, among the
        fitted devices but ``skip``."""
        fig = _figures(hardware)
        if fig is None:
            return None, None
        rate = _rate_per_clock(hardware)
        vendor = str(getattr(hardware, "vendor", ""))
        candidates = tuple(d for d in self.fitted_devices if d != skip)
        key = (candidates, vendor, fig.compute_capability, fig.architecture, rate)
        if key in _NEAREST:
            return _NEAREST[key]
        best: dict[int, tuple[float, str]] = {}
        for name in candidates:
            try:
                other_hw = load_hardware(name)
            except MlacalcError:
                continue
            other = _figures(other_hw)
            if other is None or str(getattr(other_hw, "vendor", "")) != vendor:
                continue
            other_rate = _rate_per_clock(other_hw)
            gap = abs(math.log(rate / other_rate)) if rate and other_rate else math.inf
            if _same_architecture(fig, other):
                tier = 0
            elif min(fig.compute_capability, other.compute_capability) <= 0:
                tier = 0 if gap < math.log(1.5) else -1  # no capability: by the rate alone
            elif fig.tensor_core_generation == other.tensor_core_generation:
                tier = 1
            else:
                tier = -1
            if tier >= 0 and (tier not in best or (gap, name) < best[tier]):
                best[tier] = (gap, name)
        near = best[0][1] if 0 in best else None
        found = (near, best[1][1] if near is None and 1 in best else None)
        if len(_NEAREST) > 256:
            _NEAREST.clear()
        _NEAREST[key] = found
        return found

    def params(
        self, device: str, kind: str, dtype: str, hardware: Any = None, variant: str = ""
    ) -> tuple[dict[str, float], str]:
        """The parameters for one kernel class (``variant``: of that kernel, see
        :mod:`mlacalc.words.kernels`) on ``device``, and how they were obtained: the device's own
        fit; else (given its ``hardware`` spec) the fit of the measured device of the same
        tensor-core generation, by datasheet ratios; else the fit pooled over every measured
        device."""
        base = default_params(kind)
        fitted = self._lookup(self.devices.get(device, {}), kind, dtype, variant)
        if fitted is not None:
            base.update(fitted)
            return borrowed_params(kind, dtype, base, fitted), self._how(device)
        if hardware is not None and self.devices:
            near = self._sibling(hardware, device)
            near_table = self.devices.get(near, {}) if near else {}
            fitted = self._lookup(near_table, kind, dtype, variant) if near else None
            if fitted is not None:
                base.update(fitted)
                return borrowed_params(kind, dtype, base, fitted), self._how(device, near)
        fitted = self._lookup(self.classes, kind, dtype, variant)
        if fitted is not None:
            base.update(fitted)
            base = borrowed_params(kind, dtype, base, fitted)
            return base, self._how(device, pooled=True)
        key = class_key(kind, dtype, variant)
        lender = ELEMENTWISE_STAND_INS.get(self.engine) if kind == "elementwise" else None
        if lender is not None and not variant:
            other, other_dt, other_variant = lender
            lent, how = self.params(device, other, other_dt, hardware, variant=other_variant)
            if not how.startswith("uncalibrated"):
                base.update({name: lent[name] for name in _ELEMENTWISE_LENT})
                of = class_key(other, other_dt, other_variant)
                return base, _lent(key, _ELEMENTWISE_LENT, of, how)
        stand_in = _KIND_STAND_INS.get(f"{kind}:{variant}" if variant else kind)
        if stand_in is not None:
            other, names = stand_in
            lent, how = self.params(device, other, dtype, hardware)
            if not how.startswith("uncalibrated"):
                base.update({name: lent[name] for name in names})
                return base, _lent(key, names, other, how)
        return base, f"uncalibrated {key} (no profile class; datasheet defaults)"

    def _how(self, device: str, near: str | None = None, *, pooled: bool = False) -> str:
        """How :meth:`params` says a class was obtained: the device's own fit, the fit of the
        measured device ``near`` it, or the pooled fit."""
        if pooled:
            on = ", ".join(self.fitted_devices) or self.name
            if device in self.devices:  # its own level holds other classes, not this one
                return (
                    f"{device} by datasheet ratios from the profile's pooled classes "
                    f"({device}'s own fit holds no such class)"
                )
            return f"{device} by datasheet ratios (profile fitted on {on})"
        if near is not None:
            return f"{device} by datasheet ratios from {near} (same tensor-core generation)"
        return f"calibrated on {device}"

    def fitted_how(self, device: str, hardware: Any = None) -> str:
        """What :meth:`params` says of a class the device's own level of the profile holds:
        its own fit, else (given its ``hardware``) the nearest measured device's, else the
        pooled fit."""
        if device in self.devices:
            return self._how(device)
        near = self.nearest_fitted(hardware) if hardware is not None and self.devices else None
        return self._how(device, near) if near is not None else self._how(device, pooled=True)

    def describe(self, device: str, hardware: Any = None, *, assumed: bool = True) -> str:
        """One line: how a device is predicted with this profile; given its ``hardware`` spec,
        from which fit (:meth:`params`): the measured device of the same vendor and tensor-core
        generation, or the pooled fit, which no measurement of that kind of device checks;
        then, unless ``assumed`` is false (a line that says them last), the figures of the
        device the time model assumes (:func:`assumed_figures`)."""
        note = assumed_figures(hardware) if assumed else ""
        on = ", ".join(self.fitted_devices)
        if not on:
            return f"profile {self.name}: not fitted; datasheet defaults" + note
        if device in self.devices:
            own = f"calibrated on {on}; {device} by its own fit"
            base = based_on(self)
            if base is not None and device in base[1]:  # calibrate --base, on the user's device
                own += (
                    f" of {len(self.devices[device])} class(es), every other class by profile "
                    f"{base[0]}'s fits (calibrate --base)"
                )
            return own + note + _file_note(hardware)
        if hardware is None:
            return f"calibrated on {on}; {device} by datasheet ratios"
        near, kin = self._ranked(hardware)
        if near is not None:
            text = (
                f"calibrated on {on}; {device} by datasheet ratios from {near} (same tensor-core "
                "generation)"
            )
        elif kin is not None:
            theirs = _figures(load_hardware(kin))
            # "generation": the tensor cores' (a Blackwell RTX part, compute capability 12.0,
            # runs Ampere's mma.sync kernels, not data-centre Blackwell's)
            own = ", ".join(
                str(x)
                for x in (
                    getattr(hardware, "architecture", ""),
                    getattr(hardware, "compute_capability", None)
                    and f"compute capability {hardware.compute_capability}",
                )
                if x
            )
            text = (
                f"calibrated on {on}; {device} by datasheet ratios from the pooled fit (no "
                "measured device of its tensor-core generation"
                + (f" ({own})" if own else "")
                + "; nearest fitted tensor-core generation "
                f"{(theirs.architecture if theirs else '') or kin} ({kin}), whose kernels it runs: "
                "unvalidated)"
            )
        else:
            text = (
                f"calibrated on {on}; {device} by datasheet ratios from the pooled fit (no "
                "measured device of its vendor and tensor-core generation: unvalidated)"
            )
        return text + note + _file_note(hardware)

    def route(self, device: str, hardware: Any) -> str:
        """A few words on how :meth:`describe` predicts ``device``: ``"own fit"``, ``"from
        H100-SXM"`` (the same tensor-core generation, by datasheet ratios), ``"pooled via
        A100-SXM-80GB, unvalidated"`` (the nearest fitted generation whose kernels it runs),
        ``"pooled, unvalidated"`` (no measured device of its vendor and generation), or
        ``"not fitted"`` (a profile with no fit)."""
        if not self.fitted_devices:
            return "not fitted"
        if device in self.devices:
            return "own fit"
        near, kin = self._ranked(hardware)
        if near is not None:
            return f"from {near}"
        if kin is not None:
            return f"pooled via {kin}, unvalidated"
        return "pooled, unvalidated"

    @functools.cached_property
    def digest(self) -> str:
        """``"sha256:"`` and the first 16 hex digits of the SHA-256 of the profile's content
        (:meth:`to_dict` as canonical JSON: keys sorted, no whitespace), its ``name`` and
        ``notes`` left out: the same for a file and the :class:`Profile` it loads to, whatever
        its path, name, notes or layout, and different for any changed figure. Not
        ``sha256sum`` of the file (a file re-indented keeps its digest). Every JSON output names
        the profile it used by it (``profile.digest``). Computed once per object: a profile
        is not edited in place (:func:`load_profile` shares one object a file; edit a copy,
        ``Profile.from_dict(p.to_dict())``)."""
        content = self.to_dict()
        for words in ("name", "notes"):
            content.pop(words)
        return digest_of(content)

    @property
    def source_digest(self) -> str:
        """:attr:`digest` of the profile this one was composed from (the engines' profiles
        borrow classes of shipped ones: :mod:`~mlacalc.timemodel.engine_profiles`), its own
        where it was not composed; what every JSON output names it by."""
        return self.__dict__.get("_composed_from") or self.digest

    @property
    def shipped(self) -> bool:
        """Whether the profile's content is one shipped with mlacalc (:attr:`source_digest`
        equal to a shipped profile's digest, whatever its name or path): only a shipped
        profile's times carry README.md's measured errors."""
        return self.source_digest in _shipped_digests()

    def identity(self) -> dict[str, Any]:
        """The profile as every JSON output names it: ``name``, ``digest``
        (:attr:`source_digest`) and ``shipped``."""
        return {"name": self.name, "digest": self.source_digest, "shipped": self.shipped}

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "name": self.name,
            "engine": self.engine,
            "fitted_on": list(self.fitted_on),
            "notes": list(self.notes),
            "classes": self.classes,
            "devices": self.devices,
            "residuals": self.residuals,
        }

    @classmethod
    def from_dict(cls, data: Any, origin: str = "<dict>") -> Profile:
        if not isinstance(data, dict) or data.get("schema") != SCHEMA:
            raise ConfigError(
                f"is not a {SCHEMA} calibration profile",
                source=origin,
                field="schema",
                fix="pass a file written by mlacalc calibrate",
            )
        _check_keys(data, origin)
        _check_provenance(data, origin)
        classes = _check_classes(data.get("classes", {}), origin, "classes")
        devices_raw = data.get("devices", {})
        if not isinstance(devices_raw, dict):
            raise ConfigError("must map device names to classes", source=origin, field="devices")
        devices = {
            str(d): _check_classes(c, origin, f"devices.{d}") for d, c in devices_raw.items()
        }
        return cls(
            name=str(data.get("name", Path(origin).stem)),
            classes=classes,
            devices=devices,
            fitted_on=tuple(data.get("fitted_on", ())),
            residuals=dict(data.get("residuals", {})),
            notes=tuple(data.get("notes", ())),
            origin=origin,
            engine=_engine_field(data.get("engine"), origin),
        )

    def save(self, path: str | os.PathLike) -> Path:
        """Write the profile as JSON; returns the path."""
        out = Path(path)
        out.write_text(
            json.dumps(self.to_dict(), indent=1, sort_keys=False) + "\n", encoding="utf-8"
        )
        return out


def fitted_kinds(profile: Profile) -> set[str]:
    """The kinds of device (``gpu``, ``cpu``) ``profile`` was fitted on: a ``fitted_on``
    entry's ``kind`` (written by calibrate since 2026-11-29), else its device read from the
    catalogue or its file; a device that cannot be read counts as a GPU."""
    kinds = set()
    for entry in profile.fitted_on:
        kind = entry.get("kind") if isinstance(entry, dict) else None
        if kind is None:
            kind = _device_kind(str(entry.get("device", "")) if isinstance(entry, dict) else "")
        kinds.add(kind)
    return kinds


@functools.lru_cache(maxsize=256)
def _device_kind(device: str) -> str:
    try:
        return load_hardware(device).kind
    except (MlacalcError, OSError):
        return "gpu"


def measured_device_of(device: str) -> dict[str, Any]:
    """The ``device`` mapping of a measured device's sidecar (name, threads, kind), ``{}`` for
    a catalogue device or one that cannot be read."""
    try:
        hw = load_hardware(device)
    except (MlacalcError, OSError):
        return {}
    if not (hw.measured and hw.origin):
        return {}
    try:
        with open(hw.origin, encoding="utf-8") as f:
            found = json.load(f).get("device")
    except (OSError, ValueError, AttributeError):
        return {}
    return found if isinstance(found, dict) else {}


def _fitted_cpus(profile: Profile) -> list[tuple[str, str, Any]]:
    """(device, CPU name, threads) of each CPU run ``profile`` was fitted on: the name and
    threads its ``fitted_on`` entry records (calibrate writes them), else read from the run's
    sidecar where it still lies; the name is ``""`` where neither says. The device is the run's
    ``measured:`` name (a function of its files), or, in a profile fitted before it was, the
    path of its sidecar as typed."""
    out = []
    for entry in profile.fitted_on:
        if not isinstance(entry, dict) or entry.get("kind", "gpu") == "gpu":
            continue
        where = str(entry.get("device", "?"))
        name, threads = entry.get("device_name"), entry.get("threads")
        if name is None:
            found = measured_device_of(where)
            name, threads = found.get("name", ""), found.get("threads")
        out.append((where, str(name or ""), threads))
    return out


def _real(path: str) -> str:
    """``path`` resolved (a run named by two paths is one run); ``path`` as given where it
    cannot be resolved."""
    try:
        return os.path.realpath(path)
    except (OSError, ValueError):
        return path


def other_cpu_warning(profile: Any, hardware: Any) -> str:
    """A warning where a CPU profile (a :class:`Profile` or what :func:`load_profile` takes)
    times a measured CPU it was not fitted on: another CPU's GEMM fit (a Xeon's on an EPYC),
    or the same CPU run with another thread count (a 1-thread fit on a 2-thread set); ``""``
    where it was fitted on this CPU or on GPUs. The profile is read for a measured CPU only
    (plan and every front end's device warnings ask it of each call)."""
    if getattr(hardware, "kind", "gpu") != "cpu" or not getattr(hardware, "measured", False):
        return ""
    profile = load_profile(profile)
    cpus = _fitted_cpus(profile)
    if not cpus:
        return ""
    mine = measured_device_of(hardware.origin) if hardware.origin else {}
    name, threads = str(mine.get("name", "")), mine.get("threads")
    fix = (
        "fit one on this CPU's own calibrate-preset run (mlacalc bench --preset calibrate "
        "--device cpu, then mlacalc calibrate SIDECAR -o p.json)"
    )
    origin = _real(hardware.origin) if hardware.origin else ""
    same = [
        c
        for c in cpus
        if (c[1] and c[1] == name)
        or c[0] == hardware.name
        or (origin and not c[0].startswith("measured:") and _real(c[0]) == origin)
    ]
    if not same:
        on = "; ".join(f"{w} ({n or 'no device name recorded'})" for w, n, _ in cpus[:3])
        if not name or any(not n for _, n, _ in cpus):
            return (
                f"profile '{profile.name}' was fitted on CPU runs ({on}) and {hardware.name} "
                f"is {name or 'unnamed'}: could not tell which CPU it was fitted on (no device "
                f"name recorded); if it is another CPU, its kernel fit is that CPU's; {fix}"
            )
        return (
            f"profile '{profile.name}' was fitted on another CPU ({on}), not {hardware.name} "
            f"({name or 'unnamed'}): its kernel fit is that CPU's; {fix}"
        )
    if threads is not None and all(t is not None and t != threads for _, _, t in same):
        ran = ", ".join(sorted({str(t) for _, _, t in same}))
        return (
            f"profile '{profile.name}' was fitted on {name or hardware.name} with {ran} thread(s); "
            f"{hardware.name} ran {threads}: a CPU kernel's rate follows its threads; {fix} "
            "with the same threads"
        )
    return ""


def check_profile_applies(profile: Profile, hardware: Any) -> None:
    """Refuse ``profile`` for a GPU when it was fitted on CPU runs only: a CPU's fp32 GEMM fit
    would time a GPU's bf16 GEMMs by datasheet ratios (the trial of 2026-11-29: H100 decode
    204 us against 44.8 with the default)."""
    if getattr(hardware, "kind", "gpu") != "gpu" or not profile.fitted_on:
        return
    kinds = fitted_kinds(profile)
    if "gpu" not in kinds:
        on = ", ".join(str(e.get("device", "?")) for e in profile.fitted_on)
        raise InvalidArgumentError(
            "profile",
            f"profile '{profile.name}' was fitted on CPU runs only ({on}): a CPU's fp32 fit "
            f"does not time {getattr(hardware, 'name', 'a GPU')}'s GPU kernels (datasheet "
            "ratios from a CPU are no transfer); fit one on GPU tables (mlacalc calibrate "
            "DIR-or-GPU-SIDECAR -o p.json) or drop it; a CPU profile validates another run of "
            "its CPU: mlacalc validate --measured OTHER_RUN.json --profile it "
            "(docs/microbenchmark.md)",
        )


def _figures(hardware: Any) -> DeviceFigures | None:
    """The time model's figures of a GPU (None for a CPU or an object without a spec's
    fields)."""
    if getattr(hardware, "kind", "gpu") != "gpu" or not isinstance(hardware, HardwareSpec):
        return None
    return device_figures(hardware)


def _same_architecture(fig: DeviceFigures, other: DeviceFigures) -> bool:
    """Whether two NVIDIA GPUs are of one architecture: the same compute capability major
    and, where both files name it, the same architecture (Ada's 8.9 is not Ampere's 8.0)."""
    if fig.compute_capability <= 0 or other.compute_capability <= 0:
        return False
    if int(fig.compute_capability) != int(other.compute_capability):
        return False
    mine, theirs = fig.architecture.strip().lower(), other.architecture.strip().lower()
    return not (mine and theirs and mine != theirs)


def assumed_figures(hardware: Any) -> str:
    """Every figure of a GPU the time model assumes rather than reads from its datasheet, as
    one clause of the calibration line ("; assumed, not its datasheet's: clock_hz = 1.83e+09
    (no clock for this device: 1830 MHz (H100 SXM's) assumed), ..."): each of
    :func:`~mlacalc.timemodel.device.device_figures`' fallbacks (a default standing in for a
    figure the file lacks, or a figure the file lists as ``assumed``, with the start of its
    ``field_sources`` reason), then the file's other ``assumed`` fields (scale-out latency);
    and where every source the file cites is secondary, says so; else ''."""
    fig = _figures(hardware)
    if fig is None:
        assumed = tuple(getattr(hardware, "assumed", ()) or ())
        return f"; assumed, not its datasheet's: {', '.join(assumed)}" if assumed else ""
    origin = getattr(hardware, "origin", "") or ""
    users = bool(origin) and Path(origin).resolve().parent != Path(HARDWARE).resolve()
    said = []
    for fallback in fig.fallbacks:
        head, _, why = fallback.partition(" (")
        why = why[:-1]
        if why.startswith("assumed: "):  # the file's own: its field, the start of its reason
            key = next(k for k, f in ASSUMED_KEYS.items() if f == head.split(" = ")[0])
            why = f"{key}: " + re.split(r": |; ", why.removeprefix("assumed: "), maxsplit=1)[0]
        elif users:
            why = f"not in {os.path.basename(origin)}: {why}"
        said.append(f"{head} ({why})")
    for key in getattr(hardware, "assumed", ()) or ():
        if key not in ASSUMED_KEYS:  # a figure the kernel model does not read (scale-out)
            why = re.split(r": |; ", hardware.field_sources.get(key, ""), maxsplit=1)[0]
            value = getattr(hardware, key.removesuffix("_us") + "_s", None)
            shown = f"{key} = {value * 1e6:g}" if key.endswith("_us") and value else key
            said.append(f"{shown} ({why})" if why else shown)
    out = f"; assumed, not its datasheet's: {', '.join(said)}" if said else ""
    sources = tuple(getattr(hardware, "source", ()) or ())
    if not users and sources and all("secondary" in s for s in sources):
        out += "; its figures from secondary sources only (no stored datasheet)"
    return out


def _file_note(hardware: Any) -> str:
    """A GPU read from a user's file, not the catalogue, whose name shadows a catalogue
    device's (whose fits then apply to this file's figures); else ''. (The figures the file
    lacks that the time model assumes, an SM count of 108 moving a decode step by several
    percent, are :func:`assumed_figures`'.)"""
    origin = getattr(hardware, "origin", "") or ""
    fig = _figures(hardware)
    if fig is None or not origin or Path(origin).resolve().parent == Path(HARDWARE).resolve():
        return ""
    if hardware.name.lower() in {n.lower() for n in shipped_hardware()}:
        return (
            f"; its name shadows the catalogue's {hardware.name}: that device's fits time this "
            "file's figures (rename it unless it is that device)"
        )
    return ""


def _rate_per_clock(hardware: Any) -> float | None:
    """Dense bf16 tensor FLOP per clock per SM: the tensor-core generation of a GPU."""
    peaks = getattr(hardware, "peak_flops_per_s", {}) or {}
    peak = peaks.get("bf16") or peaks.get("fp16")
    sms = getattr(hardware, "sm_count", None)
    clock = getattr(hardware, "boost_clock_hz", None)
    if not peak or not sms or not clock or getattr(hardware, "kind", "gpu") != "gpu":
        return None
    return peak / (sms * clock)


def _check_classes(raw: Any, origin: str, where: str) -> dict[str, dict[str, float]]:
    if not isinstance(raw, dict):
        raise ConfigError("must map kernel classes to parameters", source=origin, field=where)
    out: dict[str, dict[str, float]] = {}
    for key, values in raw.items():
        if not isinstance(values, dict):
            raise ConfigError(
                "must map parameter names to numbers", source=origin, field=f"{where}.{key}"
            )
        checked = {}
        for name, value in values.items():
            if name not in PARAMS:
                raise ConfigError(
                    "is not a time-model parameter",
                    source=origin,
                    field=f"{where}.{key}.{name}",
                    fix="known: " + ", ".join(PARAMS),
                )
            lo, hi = _param_limits(name)
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not math.isfinite(value)
                or not lo * (1 - 1e-9) <= value <= hi * (1 + 1e-9)
            ):
                # NaN, 1e300 efficiencies or a p-norm of 0 gave NaN, absurd times or a
                # ZeroDivisionError in every prediction the profile made
                got = (
                    f"the string {value[:40]!r} (write the number without quotes)"
                    if isinstance(value, str)
                    else str(value)[:40]
                )
                raise ConfigError(
                    f"must be a number in [{lo:g}, {hi:g}] ({PARAMS[name][2]}), got {got}",
                    source=origin,
                    field=f"{where}.{key}.{name}",
                    fix="keep it in the range mlacalc calibrate fits it in, or refit the profile",
                )
            checked[name] = float(value)
        out[str(key)] = checked
    return out


_LIMITS: dict[str, tuple[float, float]] = {}


def _param_limits(name: str) -> tuple[float, float]:
    """The range a profile's parameter may take: the one the fitter searches
    (:data:`~mlacalc.timemodel.terms.PARAMS`), widened to the defaults a class without a fit
    keeps (a fitted profile writes them too)."""
    if not _LIMITS:
        defaults = [default_params(kind) for kind in KERNEL_KINDS]
        for n, (lo, hi, _) in PARAMS.items():
            values = [d[n] for d in defaults if n in d]
            _LIMITS[n] = (min([lo, *values]), max([hi, *values]))
    return _LIMITS[name]


#: the keys of a profile file (:meth:`Profile.to_dict`)
PROFILE_KEYS = ("schema", "name", "engine", "fitted_on", "notes", "classes", "devices", "residuals")


def _check_keys(data: dict[str, Any], origin: str) -> None:
    """A profile file's keys: one it does not know (a misspelt ``clases``) and a missing
    ``classes`` are one line naming the key (both were read as a profile of no class, which
    validate then applied as datasheet defaults)."""
    for key in data:
        if key not in PROFILE_KEYS:
            near = difflib.get_close_matches(str(key), PROFILE_KEYS, n=1)
            raise ConfigError(
                "is not a profile key" + (f" (did you mean '{near[0]}'?)" if near else ""),
                source=origin,
                field=str(key)[:40],
                fix="known: " + ", ".join(PROFILE_KEYS) + "; pass a file written by mlacalc "
                "calibrate",
            )
    if "classes" not in data:
        raise ConfigError(
            "is missing: a profile maps its kernel classes to parameters there",
            source=origin,
            field="classes",
            fix="pass a file written by mlacalc calibrate",
        )


def _check_provenance(data: dict[str, Any], origin: str) -> None:
    """A profile's ``fitted_on``, ``residuals`` and ``notes``: lists, a mapping and a list of
    text (a number or a string there was a raw TypeError or a profile whose notes were its
    characters)."""
    for name, kind, what in (
        ("fitted_on", list, "a list of the measured sets it was fitted on"),
        ("residuals", dict, "a mapping of devices to residuals per kernel class"),
        ("notes", list, "a list of notes (text)"),
    ):
        if name in data and not isinstance(data[name], kind):
            raise ConfigError(
                f"must be {what}, got {type(data[name]).__name__}",
                source=origin,
                field=name,
                fix="pass a file written by mlacalc calibrate",
            )
    if not all(isinstance(n, str) for n in data.get("notes", ())):
        raise ConfigError("must hold text only", source=origin, field="notes")


#: id -> a Profile object whose parameters were checked (the object kept, so its id stays its)
_CHECKED: dict[int, Profile] = {}


def _checked(profile: Profile) -> Profile:
    """A Profile made in code, its parameters checked as a file's are (once per object): a
    p-norm of 0 or a NaN efficiency was a ZeroDivisionError or NaN in every prediction."""
    if _CHECKED.get(id(profile)) is not profile:
        where = profile.origin or f"profile {profile.name!r}"
        if not isinstance(profile.classes, dict) or not isinstance(profile.devices, dict):
            raise ConfigError("must map kernel classes to parameters", source=where)
        _check_classes(profile.classes, where, "classes")
        for device, classes in profile.devices.items():
            _check_classes(classes, where, f"devices.{device}")
        if len(_CHECKED) > 64:
            _CHECKED.clear()
        _CHECKED[id(profile)] = profile
    return profile


def _profiles_dir() -> Path:
    return PROFILES


def shipped_profiles() -> list[str]:
    """Names of the profiles shipped with mlacalc."""
    return sorted(p.stem for p in _profiles_dir().glob("*.json"))


def digest_of(data: Any) -> str:
    """``"sha256:<16 hex>"`` of ``data`` as canonical JSON (keys sorted, no whitespace)."""
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


@functools.lru_cache(maxsize=1)
def _shipped_digests() -> frozenset[str]:
    """The digest of every shipped profile (read once per process)."""
    return frozenset(load_profile(name).digest for name in shipped_profiles())


_CACHE: dict[tuple[str, str], Profile] = {}
#: (fitted devices, vendor, capability, architecture, FLOP/clk/SM) -> the fitted device of its
#: architecture and the nearest fitted one of another architecture of its generation
_NEAREST: dict[tuple, tuple[str | None, str | None]] = {}
_SHIPPED: dict[str, Profile] = {}


def _engine_field(value: Any, origin: str) -> str:
    """A profile file's ``engine`` (absent: TensorRT-LLM, what every profile before engines
    was fitted on); an unknown one is an error naming the file."""
    try:
        return check_engine(value)
    except InvalidArgumentError as exc:
        raise ConfigError(exc.message, source=origin, field="engine") from None


def load_profile(name_or_path: str | os.PathLike | Profile | None = None) -> Profile:
    """A calibration profile: a shipped name (``"default"``, fitted on the shared H100-SXM and
    A100-SXM-80GB sets), a JSON path, or a :class:`Profile` (returned as is)."""
    if isinstance(name_or_path, Profile):
        return _checked(name_or_path)
    if name_or_path is not None and not isinstance(name_or_path, (str, os.PathLike)):
        raise InvalidArgumentError(
            "profile",
            "must be a shipped profile name, a JSON path or a Profile, got "
            f"{type(name_or_path).__name__}",
        )
    text = DEFAULT_PROFILE if name_or_path is None else os.fspath(name_or_path).strip()
    shipped = _SHIPPED.get(text)
    if shipped is not None:  # a shipped profile: read once per process
        return shipped
    path = _profiles_dir() / f"{text}.json"
    if not path.is_file():
        path = Path(text).expanduser()
        if not path.is_file():
            if text == DEFAULT_PROFILE:
                return Profile(
                    name=DEFAULT_PROFILE, notes=("no shipped profile: datasheet defaults",)
                )
            said = (
                f"no file {text!r} (and no shipped profile of that name)"
                if text.endswith(".json") or os.sep in text
                else f"no profile {text!r}"
            )
            raise InvalidArgumentError(
                "profile",
                f"{said}: give a shipped name "
                f"({', '.join(shipped_profiles()) or 'none shipped'}) or a JSON file written by "
                "mlacalc calibrate",
            )
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot be read ({exc.strerror or exc})", source=str(path)) from None
    # keyed by the content: a file rewritten within the clock's resolution (same mtime) is
    # read again, not answered from the cache
    key = (str(path), hashlib.sha256(raw).hexdigest())
    if key not in _CACHE:
        try:
            data = json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise ConfigError(
                f"is not UTF-8 text (byte {exc.start})",
                source=str(path),
                fix="pass a JSON file written by mlacalc calibrate",
            ) from None
        except json.JSONDecodeError as exc:
            raise ConfigError(
                f"is not valid JSON at {json_error_words(exc)}",
                source=str(path),
                fix="pass a JSON file written by mlacalc calibrate",
            ) from None
        except RecursionError:
            raise ConfigError("nests too deeply to be a profile", source=str(path)) from None
        if len(_CACHE) > 64:
            _CACHE.clear()
        _CACHE[key] = Profile.from_dict(data, str(path))
    if path.parent == _profiles_dir() and path.stem == text:
        _SHIPPED[text] = _CACHE[key]
    return _CACHE[key]
