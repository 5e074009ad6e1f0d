"""The time of kernels on a device: the kernel model evaluated, and the plain roofline.

``predict_batch`` predicts a :class:`~mlacalc.words.kernels.KernelBatch` (seconds per row, one numpy
expression per class); ``predict_kernels`` predicts single kernels with their terms, the bound
and how they were calibrated; ``roofline_seconds`` is the plain roofline (datasheet peak and
bandwidth, no fixed cost; :mod:`mlacalc.timemodel.roofline_time`), kept as the ideal.
Parameters come from a calibration :class:`Profile` (the shipped ``"default"`` profile unless
one is given), fitted by :func:`calibrate` on measured sets; :mod:`mlacalc.timemodel.terms`
documents every term.

Examples
--------
>>> from mlacalc.words.kernels import Kernel
>>> m, n, k = 64, 7168, 16384
>>> k = Kernel("o_proj", "gemm", "bf16", flops=2 * m * n * k,
...            bytes=2 * (m * k + k * n + m * n), shape={"m": m, "n": n, "k": k})
>>> t = predict_kernels([k], "H100-SXM")[0]
>>> t.bound, t.seconds > roofline_seconds(k.flops, k.bytes, "H100-SXM", "bf16")
('memory', True)
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from mlacalc.cost.compressed import (
    HEAD_TILE,
    RAGGED,
    RAGGED_CORE,
    WIDE_TILE_CORE,
    core_head_bytes,
    ragged_core_shape,
)
from mlacalc.hardware.catalogue import HardwareSpec, load_hardware
from mlacalc.timemodel.attention_time import engine_attention_kernel
from mlacalc.timemodel.device import DeviceFigures, device_figures, mla_decode_kernel
from mlacalc.timemodel.dsa_time import engine_dsa_kernel
from mlacalc.timemodel.elementwise_time import engine_linear_kernel
from mlacalc.timemodel.gemm_time import engine_gemm_kernel
from mlacalc.timemodel.mla_time import engine_mla_kernel
from mlacalc.timemodel.moe_time import engine_moe_tiles
from mlacalc.timemodel.profile import Profile, load_profile
from mlacalc.timemodel.roofline_time import ideal_batch_seconds, ideal_seconds, kernel_ridge
from mlacalc.timemodel.shared import mma_rows
from mlacalc.timemodel.terms import kernel_terms, scale_params
from mlacalc.words.errors import InvalidArgumentError
from mlacalc.words.kernels import (
    KERNEL_KINDS,
    Kernel,
    KernelBatch,
    batches_of,
    limiter,
    roofline_bound,
)

__all__ = [
    "KernelTime",
    "batch_terms",
    "class_params",
    "device_batch",
    "engine_batch",
    "predict_batch",
    "predict_kernels",
    "roofline_seconds",
    "run_class",
    "run_dtype",
]


@dataclass(frozen=True)
class KernelTime:
    """The predicted time of one kernel (all its ``calls``) and what it is made of."""

    name: str
    kind: str
    dtype: str
    seconds: float
    compute_s: float
    memory_s: float
    fixed_s: float
    extra_s: float
    roofline_s: float
    #: ``"compute"`` or ``"memory"`` by the one rule (intensity against the ridge of the dtype
    #: the kernel runs: :func:`mlacalc.words.kernels.roofline_bound`), ``"link"`` a collective
    bound: str
    calibration: str
    profile: str
    #: the time model's largest term: ``"compute"``, ``"memory"``, ``"latency"`` (the fixed
    #: cost per call outweighs the rest) or ``"link"``; can differ from ``bound``
    limited_by: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "dtype": self.dtype,
            "seconds": self.seconds,
            "compute_s": self.compute_s,
            "memory_s": self.memory_s,
            "fixed_s": self.fixed_s,
            "extra_s": self.extra_s,
            "roofline_s": self.roofline_s,
            "bound": self.bound,
            "limited_by": self.limited_by,
            "calibration": self.calibration,
            "profile": self.profile,
        }


def _hardware(hardware: HardwareSpec | str) -> HardwareSpec:
    return hardware if isinstance(hardware, HardwareSpec) else load_hardware(hardware)


def _check_batch(batch: Any) -> KernelBatch:
    if not isinstance(batch, KernelBatch):
        raise InvalidArgumentError("batch", f"expected a KernelBatch, got {type(batch).__name__}")
    if batch.kind not in KERNEL_KINDS:
        raise InvalidArgumentError(
            "batch.kind", f"unknown kernel kind {batch.kind!r}; known: " + ", ".join(KERNEL_KINDS)
        )
    return batch


#: (id of the spec, id of the profile, kind, dtype, variant) -> (spec, profile, figures, parameters
#: scaled to the device's clock, how calibrated): the derived rates of a kernel class, worked
#: out once per device and profile (the spec and profile are kept to check the ids).
_CLASS_CACHE: dict[tuple[int, int, str, str, str], tuple[Any, Any, DeviceFigures, dict, str]] = {}


def class_params(
    hw: HardwareSpec, prof: Profile, kind: str, dtype: str, variant: str = ""
) -> tuple[DeviceFigures, dict[str, float], str]:
    """The device figures, the parameters of one kernel class on ``hw`` (clock-scaled, as
    :func:`~mlacalc.timemodel.terms.kernel_terms` takes them with ``scaled=True``) and how the
    class was calibrated; cached per (device, profile, class)."""
    key = (id(hw), id(prof), kind, dtype, variant)
    hit = _CLASS_CACHE.get(key)
    if hit is not None and hit[0] is hw and hit[1] is prof:
        return hit[2], hit[3], hit[4]
    fig = device_figures(hw)
    params, how = prof.params(hw.name, kind, dtype, hw, variant)
    scaled = scale_params(kind, params, fig, variant)
    if len(_CLASS_CACHE) > 512:
        _CLASS_CACHE.clear()
    _CLASS_CACHE[key] = (hw, prof, fig, scaled, how)
    return fig, scaled, how


def batch_terms(
    batch: KernelBatch,
    hardware: HardwareSpec | str,
    profile: Profile | str | os.PathLike | None = None,
) -> tuple[dict[str, np.ndarray], str]:
    """Every term of every row of ``batch`` (see :func:`mlacalc.timemodel.terms.kernel_terms`)
    and how the class was calibrated."""
    batch = _check_batch(batch)
    run, fig, params, how = run_class(batch, _hardware(hardware), load_profile(profile))
    return kernel_terms(run, fig, params, scaled=True), how


def run_class(
    batch: KernelBatch, hw: HardwareSpec, prof: Profile
) -> tuple[KernelBatch, DeviceFigures, dict[str, float], str]:
    """The kernel ``hw`` runs for ``batch`` (:func:`device_batch`) as ``prof``'s engine runs it
    (:func:`engine_batch`, first: it may run the batch as another class, as a step's
    block-scaled GEMM under SGLang), and that class's device figures, parameters and how it was
    calibrated (:func:`class_params`): every path that times kernels looks the class up here."""
    run = device_batch(batch, hw)
    run = engine_batch(run, getattr(prof, "engine", ""), device_figures(hw))
    fig, params, how = class_params(hw, prof, run.kind, run.dtype, run.variant)
    return run, fig, params, how


def engine_v4_prompt_core(
    batch: KernelBatch, engine: str, fig: DeviceFigures | None = None
) -> KernelBatch:
    """A DeepSeek-V4 step's prompt core (``attention_prefill``, variant ``sparse``, over pooled
    keys) as ``engine`` runs it: an engine of :data:`~mlacalc.cost.compressed.RAGGED` (SGLang)
    its ragged batch (:func:`~mlacalc.cost.compressed.ragged_core_shape`, the shape the mapping
    of its module rows takes too), timed by the class those rows fit
    (:data:`~mlacalc.cost.compressed.RAGGED_CORE`); an engine of
    :data:`~mlacalc.cost.compressed.WIDE_TILE_CORE` (vLLM) on a device ``fig`` whose MMA
    covers more than 64 rows (``tcgen05``: 128) its heads in tiles of those rows, each the
    time of a 64-head call (:func:`_wide_tile_core`);
    others as they are."""
    ragged = batch.kind == "attention_prefill" and batch.variant == "sparse"
    if not ragged or "pooled_ratio" not in batch.shape:
        return batch
    if engine in WIDE_TILE_CORE and fig is not None and mma_rows(fig) > HEAD_TILE:
        return _wide_tile_core(batch, mma_rows(fig))
    if engine not in RAGGED:
        return batch
    return dataclasses.replace(batch, variant=RAGGED_CORE, shape=ragged_core_shape(batch.shape))


def _wide_tile_core(batch: KernelBatch, rows: float) -> KernelBatch:
    """``batch`` (a DeepSeek-V4 prompt core of ``n_heads`` padded heads, 64 a tile) as a kernel
    that takes up to ``rows`` heads in one tile at a 64-head tile's time: ``ceil(n_heads /
    rows)`` 64-head calls' products, units and per-head bytes (queries, sinks, outputs:
    :func:`~mlacalc.cost.compressed.core_head_bytes`), the keys' read, which every head
    shares, whole; so on ``tcgen05`` 128 heads time as 64 (never less), and 64 or fewer as
    before."""
    heads = np.asarray(batch.shape["n_heads"], dtype=np.float64)
    run = np.maximum(np.ceil(heads / rows), 1.0) * HEAD_TILE
    share = np.minimum(run / np.maximum(heads, 1.0), 1.0)
    if np.all(share == 1.0):
        return batch
    per_head = np.minimum(core_head_bytes(batch.shape, batch.dtype), batch.bytes)
    shape = {**batch.shape, "n_heads": np.minimum(heads, run)}
    nbytes = batch.bytes - per_head * (1.0 - share)
    return dataclasses.replace(batch, shape=shape, flops=batch.flops * share, bytes=nbytes)


def engine_batch(batch: KernelBatch, engine: str, fig: DeviceFigures) -> KernelBatch:
    """A model step's ``batch`` as ``engine``'s kernel runs it on ``fig``, the kernel its class
    was fitted on: the fused MoE's tiles (:func:`~mlacalc.timemodel.moe_time.engine_moe_tiles`),
    the per-tensor fp8 GEMM's library (:func:`~mlacalc.timemodel.gemm_time.engine_gemm_kernel`),
    a DSA layer's sparse MLA kernel (:func:`~mlacalc.timemodel.dsa_time.engine_dsa_kernel`: the
    slots it walks, as the module tables' mapping reads them), the MLA decode kernel
    (:func:`~mlacalc.timemodel.mla_time.engine_mla_kernel`), the
    linear-attention kernels (:func:`~mlacalc.timemodel.elementwise_time.engine_linear_kernel`)
    and the attention kernels' head packing
    (:func:`~mlacalc.timemodel.attention_time.engine_attention_kernel`), DeepSeek-V4's prompt
    core (:func:`engine_v4_prompt_core`); a measured row, which
    names its kernel, is left as it is. A block-scaled fp8 GEMM may run as the per-tensor
    class (:func:`~mlacalc.timemodel.gemm_time.step_block_fp8`), so the class is looked up on
    what this returns. Every path that times a step's kernels goes through here
    (``predict_batch``, ``predict_time``'s model ops)."""
    batch = engine_moe_tiles(batch, engine, fig)
    batch = engine_gemm_kernel(batch, engine, fig)
    batch = engine_dsa_kernel(batch, engine, fig)
    batch = engine_mla_kernel(batch, engine, fig)
    batch = engine_linear_kernel(batch, engine, fig)
    batch = engine_v4_prompt_core(batch, engine, fig)
    return engine_attention_kernel(batch, engine, fig)


def run_dtype(kind: str, dtype: str, hw: HardwareSpec) -> str:
    """The dtype of the kernel ``hw`` runs for a ``kind`` kernel of ``dtype`` (the class
    :func:`device_batch` times it with, and the one a kernel table shows): a GEMM or MoE of
    fp8 weights on a device without fp8 tensor cores runs ``w8a16``, of fp4 weights (or MXFP4
    weights with MXFP8 activations, ``w4a8_mxfp4``) without fp4 tensor cores ``w4a16`` (MoE:
    ``w4a16_mxfp4``); anything else as given."""
    if kind not in ("gemm", "moe"):
        return dtype
    peaks = device_figures(hw).peaks
    if dtype.startswith("fp8") and "fp8" not in peaks:
        return "w8a16"
    if dtype in ("fp4", "w4a8_mxfp4") and "fp4" not in peaks:
        return "w4a16" if kind == "gemm" else "w4a16_mxfp4"
    return dtype


def device_batch(batch: KernelBatch, hw: HardwareSpec) -> KernelBatch:
    """The kernels ``hw`` runs for ``batch``: every path that times a step (``predict_time``,
    ``plan``, ``predict_kernels``) goes through here, so they agree on the kernel a device runs.

    - weights in a format the device's tensor cores lack run a dequantizing weight-only GEMM,
      each weight converted to bf16 in the kernel (as the int8/int4 weight-only GEMMs do; it
      splits K as they do and quantizes no input), not the kernels whose rules the fp8 and fp4
      classes state: fp8 weights without fp8 tensor cores (A100) the ``w8a16`` class (GEMMs
      and MoE experts alike: no input quantization and no block-scale promotion; a profile
      without a weight-only MoE fit times those experts with its bf16 MoE fit), fp4 weights
      without fp4 tensor cores (every device before Blackwell) the ``w4a16`` class, and fp4
      experts the weight-only MoE of 4-bit float experts (``w4a16_mxfp4``);
    - an MLA decode kernel that does not say which kernel it is (a model step's; a measured
      row does) runs the key-splitting kernel the serving engines have on every device, with
      the operand reads of the device's tensor-core generation
      (:func:`~mlacalc.timemodel.device.mla_decode_kernel`).
    """
    kind, dtype = batch.kind, batch.dtype
    if kind == "gemm" or kind == "moe":
        runs = run_dtype(kind, dtype, hw)
        if runs == "fp4":  # fp4 tensor cores run NVFP4, the class their measured rows name
            runs = "nvfp4"
        return batch if runs == dtype else dataclasses.replace(batch, dtype=runs)
    if kind == "mla_decode" and "kv_split" not in batch.shape:
        n = len(batch)
        cols = mla_decode_kernel(device_figures(hw))
        shape = dict(batch.shape)
        shape.update({k: np.full(n, v) for k, v in cols.items()})
        shape["step_kernel"] = np.ones(n)  # chosen here: an engine's rule may refine it
        return dataclasses.replace(batch, shape=shape)
    return batch


def predict_batch(
    batch: KernelBatch,
    hardware: HardwareSpec | str,
    profile: Profile | str | os.PathLike | None = None,
) -> np.ndarray:
    """Seconds per row of ``batch`` on ``hardware`` (all ``calls`` of each row), vectorised."""
    terms, _ = batch_terms(batch, hardware, profile)
    return terms["seconds"]


def roofline_seconds(
    flops: float | np.ndarray,
    nbytes: float | np.ndarray,
    hardware: HardwareSpec | str,
    dtype: str = "bf16",
) -> float | np.ndarray:
    """The plain roofline: ``max(flops / peak, bytes / bandwidth)`` with datasheet figures, no
    fixed cost; the ideal no kernel beats
    (:func:`~mlacalc.timemodel.roofline_time.ideal_seconds`)."""
    out = ideal_seconds(flops, nbytes, device_figures(_hardware(hardware)), dtype)
    return float(out) if out.ndim == 0 else out


def predict_kernels(
    kernels: list[Kernel],
    hardware: HardwareSpec | str,
    profile: Profile | str | os.PathLike | None = None,
) -> list[KernelTime]:
    """The predicted time of each kernel, in order, with its terms and calibration."""
    hw = _hardware(hardware)
    prof = load_profile(profile)
    for i, k in enumerate(kernels):
        if not isinstance(k, Kernel):
            raise InvalidArgumentError(
                f"kernels[{i}]", f"expected a Kernel, got {type(k).__name__}"
            )
    out: list[KernelTime | None] = [None] * len(kernels)
    for idx, batch in batches_of(kernels):
        run = device_batch(batch, hw)  # the kernel that runs (batch_terms finds it as it is)
        terms, how = batch_terms(run, hw, prof)
        ideal = ideal_batch_seconds(run, device_figures(hw))  # the rate of the kernel that runs
        ridge = kernel_ridge(device_figures(hw), run.kind, run.dtype)
        for j, i in enumerate(idx):
            k = kernels[i]
            c, m = float(terms["compute_s"][j]), float(terms["memory_s"][j])
            fixed, extra = float(terms["fixed_s"][j]), float(terms["extra_s"][j])
            per_call = float(terms["seconds"][j]) / k.calls, float(ideal[j]) / k.calls
            limited = limiter(k.kind, c, m, fixed, extra, *per_call, tie="compute")
            out[i] = KernelTime(
                name=k.name,
                kind=k.kind,
                dtype=k.dtype,
                seconds=float(terms["seconds"][j]),
                compute_s=c * k.calls,
                memory_s=m * k.calls,
                fixed_s=fixed * k.calls,
                extra_s=extra * k.calls,
                roofline_s=float(ideal[j]),
                bound=roofline_bound(k.flops, k.bytes, ridge, k.kind),
                calibration=how,
                profile=prof.name,
                limited_by=limited,
            )
    return [t for t in out if t is not None]
