"""A model's step timed kernel by kernel, from the engine's FLOPs and bytes.

The kernels are timed by the kernel time model (:mod:`mlacalc.timemodel`, a calibration
profile) or, with ``profile="roofline"``, a microbenchmark calibration or a measured device, by
its plain roofline class (:mod:`mlacalc.timemodel.roofline_time`): both turn a kernel into
seconds in the time model, this module only gathers a step's kernels and sums them. Two
modes:

- ``fused``: the kernels a serving engine runs (:mod:`mlacalc.cost.model_step`): every GEMM
  one kernel reading its weight once, the attention core one flash-style kernel (scores,
  softmax and the value product without materialising the score matrix, each cached byte
  read once), element-wise work fused into its neighbours, the new cache rows written once;
- ``unfused``: the op-by-op PyTorch sequence the microbenchmark runs, as eager PyTorch runs
  it (:mod:`mlacalc.timemodel.eager_time`): every op reads its inputs and writes its outputs
  (the score matrix included, and the copies eager operators make of permuted views); every
  ATen op (:data:`LAUNCHES`) is dispatched by the host, which on a GPU queues the kernels
  ahead of the device (a step costs the larger of the two totals, plus the pipe's fill) and
  on a CPU runs them itself.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mlacalc.cost.engine import (
    as_model,
    attention_params,
    cost_of,
    kv_cache,
    model_layer_key,
    resolve_impl,
)
from mlacalc.cost.model_step import (
    as_stored,
    attention_kernels,
    checkpoint_stored,
    kernel_stage,
    one_layer,
    step_kernels,
)
from mlacalc.cost.params import weight_bytes
from mlacalc.cost.quant import kept_head_format
from mlacalc.hardware.catalogue import HardwareSpec, load_hardware
from mlacalc.models.architecture import layer_pattern
from mlacalc.models.loading import ModelConfig, beyond_positions
from mlacalc.timemodel.attention_time import XQA_HEAD_PACK
from mlacalc.timemodel.device import device_figures
from mlacalc.timemodel.eager_time import (
    FIRST_TOUCH_BYTES_PER_S,
    attended_keys,
    cpu_eager_seconds,
    dispatch_queue,
    eager_passes,
    gpu_pass_share,
    host_op_seconds,
    host_runs_kernels,
)
from mlacalc.timemodel.engine_profiles import chosen_profile
from mlacalc.timemodel.kernel_time import run_class, run_dtype
from mlacalc.timemodel.mla_geometry import mla_geometry_note
from mlacalc.timemodel.mla_time import sglang_chunk_note, step_decode_path_tokens
from mlacalc.timemodel.moe_backend import check_moe_backend, runs_trtllm_gen
from mlacalc.timemodel.profile import check_profile_applies, load_profile
from mlacalc.timemodel.roofline_time import (
    ROOFLINE,
    TILE,
    Calibration,
    RooflineRates,
    ideal_seconds,
    kernel_ridge,
    roofline_terms,
)
from mlacalc.timemodel.shared import col
from mlacalc.timemodel.terms import kernel_terms
from mlacalc.words import arguments
from mlacalc.words.dtypes import dtype_bits
from mlacalc.words.engines import DEFAULT_ENGINE, check_engine
from mlacalc.words.errors import ConfigError, InvalidArgumentError
from mlacalc.words.kernels import (
    COMM_KINDS,
    TRTLLM_GEN_MOE,
    Kernel,
    batches_of,
    limiter,
    roofline_bound,
)
from mlacalc.words.vocab import MODES, SCOPES, VARIANTS, cache_kind, stamped
from mlacalc.words.workload import Workload

__all__ = [
    "LAUNCHES",
    "ROOFLINE",
    "TILE",
    "Calibration",
    "OpTime",
    "Prediction",
    "predict_time",
]

#: What a prediction's JSON figures are of (trial10: a DSA core walked as its padded top-k
#: slots gave roofline_s 2,125.8 us where flops / bytes alone give about 0.65 ms)
FIGURES_WORDS = (
    "flops and bytes: the work counted, each kernel as the layer defines it (a DSA core over "
    "the keys it picks); run_flops and run_bytes: the work of the kernels the engine runs in "
    "their place (a DSA core's sparse walk over every top-k slot), which seconds and "
    "roofline_s are of; the two differ only where an op's runs_as is set"
)

#: ATen ops (views excluded) one forward of a reference layer dispatches, by layer and by
#: whether the step has one new token (no mask) or several; counted with TorchDispatchMode
#: (tests/test_timemodel_predict.py recounts them).
LAUNCHES = {
    ("mha", True, True): 47,
    ("mha", True, False): 55,  # (key, rope, single-token)
    ("mha", False, True): 11,
    ("mha", False, False): 18,
    ("mla_naive_qlora", True, True): 62,
    ("mla_naive_qlora", True, False): 68,
    ("mla_compressed_qlora", True, True): 62,
    ("mla_compressed_qlora", True, False): 68,
    ("mla_absorbed_qlora", True, True): 62,
    ("mla_absorbed_qlora", True, False): 69,
    ("mla_absorbed_merged_qlora", True, True): 60,
    ("mla_absorbed_merged_qlora", True, False): 66,
    ("mla_naive_noqlora", True, True): 55,
    ("mla_naive_noqlora", True, False): 61,
    ("mla_compressed_noqlora", True, True): 55,
    ("mla_compressed_noqlora", True, False): 61,
    ("mla_absorbed_noqlora", True, True): 55,
    ("mla_absorbed_noqlora", True, False): 62,
    ("mla_absorbed_merged_noqlora", True, True): 53,
    ("mla_absorbed_merged_noqlora", True, False): 59,
}


@dataclass(frozen=True)
class OpTime:
    """One kernel's roofline: FLOPs, bytes, intensity, which bound it hit, and its time."""

    name: str
    stage: str
    kind: str
    flops: int
    bytes: int
    compute_s: float
    memory_s: float
    launch_s: float
    efficiency: float = 1.0
    #: a matmul's time read off the device's measured GEMM sweep (0 when none): a floor
    measured_floor_s: float = 0.0
    #: the kernel time model's time of the kernel (0 when the plain roofline predicts it)
    model_s: float = 0.0
    #: the plain roofline bound of the kernel: max(FLOPs / peak, bytes / bandwidth), datasheet
    roofline_s: float = 0.0
    #: how the kernel's class was calibrated (empty for the plain roofline)
    calibration: str = ""
    #: of ``launch_s``, the fixed cost per call (all calls; the kernel time model's, else 0)
    fixed_s: float = 0.0
    #: FLOPs per byte at which the device turns compute-bound in the dtype this kernel runs
    #: (datasheet peak of that dtype over HBM bandwidth); 0 for a collective
    ridge: float = 0.0
    #: where the engine runs the counted kernel as another one (a DSA core as its sparse
    #: kernel): that kernel's class (``"mla_decode sparse"``) and its FLOPs and bytes (all
    #: calls), which the time is of; ``""`` and 0 where it runs the kernel as counted
    runs_as: str = ""
    run_flops: int = 0
    run_bytes: int = 0

    @property
    def seconds(self) -> float:
        if self.model_s:
            return self.model_s
        return max(self.compute_s, self.memory_s, self.measured_floor_s) + self.launch_s

    @property
    def bound(self) -> str:
        """``"compute"`` or ``"memory"``: the kernel's arithmetic intensity against the
        device's ridge for the kernel's own dtype (:func:`mlacalc.words.kernels.
        roofline_bound`, the one rule every front end shows); ``"link"`` for a collective."""
        return roofline_bound(self.flops, self.bytes, self.ridge, self.kind)

    @property
    def limited_by(self) -> str:
        """The time model's largest term of this kernel, which can differ from :attr:`bound`
        (a small GEMM spread over few SMs is compute-limited at 2 FLOP/byte): ``"compute"``,
        ``"memory"``, ``"latency"`` (its fixed cost per call outweighs the rest, or its time is
        over :data:`~mlacalc.words.kernels.UNDERFILLED_RATIO` times its plain roofline bound:
        too little work to fill the device) or ``"link"``."""
        if self.model_s:
            fixed = self.launch_s if self.kind in COMM_KINDS else self.fixed_s
            return limiter(
                self.kind,
                self.compute_s,
                self.memory_s,
                fixed,
                self.launch_s - self.fixed_s,
                self.model_s,
                self.roofline_s,
            )
        return "compute" if self.compute_s > self.memory_s else "memory"

    @property
    def arithmetic_intensity(self) -> float:
        return self.flops / self.bytes if self.bytes else math.inf

    @property
    def timed_flops(self) -> int:
        """The FLOPs the time is of: :attr:`run_flops` where the engine runs the kernel as
        another (:attr:`runs_as`), the counted :attr:`flops` where it runs it as counted."""
        return self.run_flops if self.runs_as else self.flops

    @property
    def timed_bytes(self) -> int:
        """The bytes the time is of (see :attr:`timed_flops`)."""
        return self.run_bytes if self.runs_as else self.bytes

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "stage": self.stage,
            "kind": self.kind,
            "flops": self.flops,
            "bytes": self.bytes,
            "arithmetic_intensity_flops_per_byte": self.arithmetic_intensity,
            "bound": self.bound,
            "seconds": self.seconds,
            "compute_s": self.compute_s,
            "memory_s": self.memory_s,
            "launch_s": self.launch_s,
            "efficiency": self.efficiency,
            "measured_floor_s": self.measured_floor_s,
            "roofline_s": self.roofline_s or max(self.compute_s, self.memory_s),
            "calibration": self.calibration,
            "fixed_s": self.fixed_s,
            "ridge": self.ridge,
            "limited_by": self.limited_by,
            "runs_as": self.runs_as,
            # the work the time is of: the counted work where the engine runs it as counted
            "run_flops": self.timed_flops,
            "run_bytes": self.timed_bytes,
        }


@dataclass(frozen=True)
class Prediction:
    """A predicted step time with its per-kernel breakdown."""

    model: str
    hardware: str
    phase: str
    seq_len: int
    batch: int
    q_len: int
    impl: str
    mode: str
    scope: str
    dtype: str
    ops: tuple[OpTime, ...]
    peak_flops_per_s: float
    bandwidth_bytes_per_s: float
    #: whether the kernels were predicted with a fitted profile (False: the plain roofline
    #: bound); whether that profile was fitted on this device is ``device_fitted``
    calibrated: bool
    #: the calibration profile that predicted the kernels ("roofline" for the plain bound)
    profile: str = ROOFLINE
    #: how the device is predicted: "calibrated on H100-SXM, A100-SXM-80GB; H200 by datasheet
    #: ratios", or the plain roofline bound
    calibration: str = "plain roofline bound"
    #: whether the profile was fitted on this device's own measurements (False: the device is
    #: predicted by datasheet ratios from another device's fit, or by the plain bound)
    device_fitted: bool = False
    #: how the weights are read: a dtype chosen (or defaulted), or ``"checkpoint fp8 block
    #: 128x128"`` when read as the model's quantized checkpoint stores them
    weights: str = ""
    #: the layer timed by ``scope="attention_layer"`` where a model's layers differ: its kind
    #: and the model's pattern ("sliding(128): layer 1 of 36 layers: 18 sliding(128) + 18
    #: full"); "" where the layers are alike or the step is the whole model's
    layer: str = ""
    #: the serving engine whose kernels were timed (``mode="fused"``; :mod:`mlacalc.words.engines`),
    #: or ``"eager PyTorch"`` for ``mode="unfused"``
    engine: str = DEFAULT_ENGINE
    #: what the time holds but the deployment may not, one sentence each: the step's working
    #: set (weights + KV cache at this scope) beyond one device's memory, a ``seq_len`` beyond
    #: the model's ``max_position_embeddings``; empty when neither
    warnings: tuple[str, ...] = ()
    #: what the cache the step starts from holds (:func:`~mlacalc.words.vocab.cache_kind`):
    #: ``"latent"`` (MLA as the engines keep it), ``"expanded"`` (``impl="naive"`` named),
    #: ``"kv"`` (MHA/GQA/MQA), ``""`` for other mixers; ``impl`` names the op sequence
    cache: str = ""
    #: the digest of :attr:`profile` (:attr:`Profile.digest
    #: <mlacalc.timemodel.profile.Profile.digest>`): the profile's content, whatever its name;
    #: ``""`` for the plain roofline bound
    profile_digest: str = ""
    #: the KV cache's dtype the step reads (``kv_dtype``, else ``dtype``): fp8 halves a bf16
    #: cache's bytes and so the memory-bound attention's time
    kv_dtype: str = ""
    #: how far the kernel times may be off (``mode="fused"`` on a GPU the catalogue lists):
    #: ``note``, ``median``, ``p90``, ``of``, ``source``
    #: (:func:`~mlacalc.serving.provenance.kernel_expected_error`, as plan's ``prediction``
    #: says it); the plain roofline bound's "not measured"; None for ``mode="unfused"`` (mlacalc
    #: validate's microbenchmark sets measure it) or a device timed on its measured ceilings
    expected_error: dict[str, Any] | None = field(default=None, compare=False)

    @property
    def seconds(self) -> float:
        return sum(o.seconds for o in self.ops)

    @property
    def flops(self) -> int:
        return sum(o.flops for o in self.ops if o.kind == "matmul")

    @property
    def bytes(self) -> int:
        return sum(o.bytes for o in self.ops)

    @property
    def run_flops(self) -> int:
        """The matmul FLOPs of the kernels as the engine runs them (:attr:`OpTime.run_flops`
        where a kernel runs as another, a DSA core as its sparse walk; its counted FLOPs
        elsewhere): the work :attr:`seconds` and :attr:`roofline_s` are of."""
        return sum(o.timed_flops for o in self.ops if o.kind == "matmul")

    @property
    def run_bytes(self) -> int:
        """The bytes of the kernels as the engine runs them (see :attr:`run_flops`)."""
        return sum(o.timed_bytes for o in self.ops)

    @property
    def compute_s(self) -> float:
        """The time of the kernels whose compute time exceeds their memory time (whatever
        else bounds them: :attr:`OpTime.bound`); with :attr:`memory_s` the whole time."""
        return sum(o.seconds for o in self.ops if o.compute_s > o.memory_s)

    @property
    def memory_s(self) -> float:
        """The time of the other kernels (memory, link or latency bound)."""
        return sum(o.seconds for o in self.ops if not o.compute_s > o.memory_s)

    @property
    def ridge(self) -> float:
        """The ridge point of the dtype that does most of the step's FLOPs (FLOP/byte)."""
        heavy = max(self.ops, key=lambda o: (o.flops, o.ridge), default=None)
        return heavy.ridge if heavy is not None else 0.0

    @property
    def bound(self) -> str:
        """``"compute"`` or ``"memory"``: the step's arithmetic intensity against :attr:`ridge`,
        by the rule each kernel's :attr:`OpTime.bound` follows."""
        return roofline_bound(self.flops, self.bytes, self.ridge)

    @property
    def launch_s(self) -> float:
        return sum(o.launch_s for o in self.ops)

    @property
    def roofline_s(self) -> float:
        """The plain roofline bound of the same kernels (datasheet peak and bandwidth, no fixed
        cost): the ideal the prediction is compared with."""
        return sum(o.roofline_s or max(o.compute_s, o.memory_s) for o in self.ops)

    @property
    def arithmetic_intensity(self) -> float:
        return self.flops / self.bytes if self.bytes else math.inf

    def achieved(self, measured_s: float) -> dict[str, float]:
        """Fractions of the peaks a measured time reaches with this prediction's FLOPs and bytes."""
        return {
            "flops_fraction": self.flops / measured_s / self.peak_flops_per_s,
            "bandwidth_fraction": self.bytes / measured_s / self.bandwidth_bytes_per_s,
        }

    def stage_seconds(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for op in self.ops:
            out[op.stage] = out.get(op.stage, 0.0) + op.seconds
        return out

    def to_dict(self) -> dict[str, Any]:
        return stamped(
            {
                "model": self.model,
                "hardware": self.hardware,
                "phase": self.phase,
                "seq_len": self.seq_len,
                "batch": self.batch,
                "q_len": self.q_len,
                "impl": self.impl,
                "cache": self.cache,
                "mode": self.mode,
                "scope": self.scope,
                "layer": self.layer,
                "dtype": self.dtype,
                "weights": self.weights,
                "seconds": self.seconds,
                "bound": self.bound,
                "flops": self.flops,
                "bytes": self.bytes,
                "arithmetic_intensity_flops_per_byte": self.arithmetic_intensity,
                "launch_s": self.launch_s,
                "roofline_s": self.roofline_s,
                "run_flops": self.run_flops,
                "run_bytes": self.run_bytes,
                "figures": FIGURES_WORDS,
                "engine": self.engine,
                "profile": self.profile,
                "profile_digest": self.profile_digest,
                "kv_dtype": self.kv_dtype,
                "expected_error": self.expected_error,
                "calibration": self.calibration,
                "calibrated": self.calibrated,
                "device_fitted": self.device_fitted,
                "peak_flops_per_s": self.peak_flops_per_s,
                "bandwidth_bytes_per_s": self.bandwidth_bytes_per_s,
                "stage_seconds": self.stage_seconds(),
                "warnings": list(self.warnings),
                "ops": [o.to_dict() for o in self.ops],
            }
        )


# ------------------------------------------------------------------------------------


def _scale(op: OpTime, n: int) -> OpTime:
    return OpTime(
        name=op.name,
        stage=op.stage,
        kind=op.kind,
        flops=op.flops * n,
        bytes=op.bytes * n,
        compute_s=op.compute_s * n,
        memory_s=op.memory_s * n,
        launch_s=op.launch_s * n,
        efficiency=op.efficiency,
        measured_floor_s=op.measured_floor_s * n,
        ridge=op.ridge,
    )


def _roofline_ops(
    kernels: list[Kernel],
    rates: RooflineRates,
    stages: list[str] | None = None,
    launches: list[float] | None = None,
    weighted: list[bool] | None = None,
) -> list[OpTime]:
    """Kernels timed by the plain roofline class (:func:`roofline_terms`), all their calls.
    ``launches`` and ``weighted`` (the eager sequence): each kernel's ATen launches and whether
    it runs at its weights' rate (by default one launch, and the serving kernels' rule,
    :meth:`RooflineRates.weighted`)."""
    terms = roofline_terms(kernels, rates, weighted=weighted, launches=launches)
    compute, memory = terms["compute_s"].tolist(), terms["memory_s"].tolist()
    launch, floor = terms["fixed_s"].tolist(), terms["floor_s"].tolist()
    efficiency = terms["efficiency"].tolist()
    fig = device_figures(rates.hw)
    out = []
    for i, k in enumerate(kernels):
        t = OpTime(
            name=k.name,
            stage=stages[i] if stages is not None else kernel_stage(k.name),
            kind=k.kind if k.kind == "elementwise" else "matmul",
            flops=k.flops,
            bytes=k.bytes,
            compute_s=compute[i],
            memory_s=memory[i],
            launch_s=launch[i],
            efficiency=efficiency[i],
            measured_floor_s=floor[i],
            ridge=kernel_ridge(fig, k.kind, run_dtype(k.kind, k.dtype, rates.hw)),
        )
        out.append(_scale(t, k.calls) if k.calls != 1 else t)
    return out


_MATMUL_KINDS = (
    "gemm",
    "moe",
    "attention_prefill",
    "attention_decode",
    "mla_prefill",
    "mla_decode",
)


#: The class name of a decode timed as TensorRT-LLM's masked MHA kernel (:func:`mmha_fallback`),
#: and what it is in words (the CLI's and the app's)
MMHA_RUNS_AS = "attention_decode mmha"
MMHA_WORDS = (
    "its masked MHA kernel (MMHA), a unit a query head: its grouped XQA kernel packs at most "
    f"{XQA_HEAD_PACK} query heads a KV head"
)


def mmha_fallback(batch: Any) -> np.ndarray:
    """Per row of a kernel batch (as the engine runs it): whether a dense decode is timed as
    TensorRT-LLM's masked MHA kernel, a unit a query head, because a KV head has more query
    heads than its grouped XQA kernel packs (``head_pack``, 32: ``attention_time``'s
    ``MMHA_FALLBACK_*`` rule, read from its measured rows at 48-128 query heads a KV head)."""
    if batch.kind != "attention_decode" or batch.variant:
        return np.zeros(len(batch), bool)
    pack = col(batch, "head_pack", XQA_HEAD_PACK)
    group = col(batch, "n_heads", 1) / np.maximum(col(batch, "n_kv", 1), 1.0)
    return (pack > 0) & (group > pack)


def _model_ops(
    kernels: list[Kernel],
    hw: HardwareSpec,
    prof: Any,
    dispatch_s: list[float] | None = None,
    stages: list[str] | None = None,
) -> list[OpTime]:
    """Kernels timed by the kernel time model (one numpy evaluation per kernel class), with the
    plain roofline bound of each. ``dispatch_s`` (eager mode): the host's time to dispatch one
    call of each kernel's ops; the host queues the calls ahead of the GPU
    (:func:`dispatch_queue`) and a kernel's time includes what the GPU waited for the host
    before its calls."""
    out: list[OpTime | None] = [None] * len(kernels)
    for idx, batch in batches_of(kernels):
        # the kernel this device runs as the engine runs it (as plan times it), and its class
        counted = batch
        batch, fig, params, how = run_class(batch, hw, prof)
        terms = kernel_terms(batch, fig, params, scaled=True)
        # the kernel the engine runs does other work than the one counted (by more than padding)
        run_f, run_b = batch.flops.tolist(), batch.bytes.tolist()
        other = [abs(a - c) > 0.05 * max(c, 1.0) for a, c in zip(run_f, counted.flops.tolist())]
        runs_as = f"{batch.kind} {batch.variant}".strip()
        # TensorRT-LLM's decode past the query heads its XQA kernel packs a KV head: the
        # masked MHA kernel, a unit a query head (said as a kernel run in place of the counted)
        mmha = mmha_fallback(batch)
        other = [o or bool(f) for o, f in zip(other, mmha)]
        runs_as = MMHA_RUNS_AS if mmha.any() else runs_as
        # the plain roofline bound of each kernel (one call), with the datasheet figures
        ideal = ideal_seconds(batch.flops, batch.bytes, fig, batch.dtype).tolist()
        seconds = terms["seconds"].tolist()
        compute = terms["compute_s"].tolist()
        memory = terms["memory_s"].tolist()
        launch = (terms["fixed_s"] + terms["extra_s"]).tolist()
        fixed = terms["fixed_s"].tolist()
        ridge = kernel_ridge(fig, batch.kind, batch.dtype)
        for j, i in enumerate(idx):
            k = kernels[i]
            calls = k.calls
            t = seconds[j]
            out[i] = OpTime(
                name=k.name,
                stage=stages[i] if stages is not None else kernel_stage(k.name),
                kind="matmul" if k.kind in _MATMUL_KINDS else k.kind,
                flops=int(k.flops) * calls,
                bytes=int(k.bytes) * calls,
                compute_s=compute[j] * calls,
                memory_s=memory[j] * calls,
                launch_s=launch[j] * calls,
                model_s=t,
                roofline_s=ideal[j] * calls,
                calibration=how,
                fixed_s=fixed[j] * calls,
                ridge=ridge,
                runs_as=runs_as if other[j] else "",
                run_flops=int(run_f[j]) * calls if other[j] else 0,
                run_bytes=int(run_b[j]) * calls if other[j] else 0,
            )
    ops = [o for o in out if o is not None]
    if dispatch_s is not None:  # the eager sequence: the host's queue runs ahead of the GPU
        calls = [k.calls for k in kernels]
        host = [d * c for d, c in zip(dispatch_s, calls)]
        waits = dispatch_queue([o.model_s for o in ops], host, calls)
        ops = [dataclasses.replace(o, model_s=o.model_s + w) for o, w in zip(ops, waits)]
    return ops


@dataclass(frozen=True)
class _Eager:
    """The op-by-op eager sequence of one attention layer as kernels, with each kernel's ATen
    launches, stage, and whether it multiplies by a weight."""

    kernels: list[Kernel]
    launches: list[float]
    stages: list[str]
    weighted: list[bool]
    #: bytes each op writes to a fresh output (0: in place, as the cache rows)
    written: list[float] = dataclasses.field(default_factory=list)


def _eager_kernels(cost: Any, model: ModelConfig, dtype: str, weight_dtype: str) -> _Eager:
    """The op-by-op eager PyTorch sequence of one attention layer as kernels (every matmul a
    GEMM, every other op an element-wise kernel reading its inputs and writing its outputs, and
    the passes eager operators add, :func:`eager_passes`: the scale and mask passes over the
    scores, the copies of permuted views), and the ATen ops each dispatches (a matmul one; the
    layer's other ops share the rest of the layer's count, :data:`LAUNCHES`)."""
    key = model_layer_key(model, cost.impl)
    rope = model.is_mla or model.rope
    total = LAUNCHES[(key, rope, cost.q_len == 1)]
    ops: list[Any] = list(cost.ops)
    passes = eager_passes(model, cost.impl, cost.batch, cost.q_len, cost.seq_len)
    for after, name, elements in passes:
        names = [o[0] if isinstance(o, tuple) else o.name for o in ops]
        at = names.index(after) + 1 if after in names else names.index("scores")
        stage = next(o.stage for o in cost.ops if o.name == "scores")
        ops.insert(at, (name, stage, elements))
    matmuls = [o for o in cost.ops if o.kind == "matmul"]
    extra = (total - len(matmuls)) / max(len(ops) - len(matmuls), 1)
    size = dtype_bits(dtype) // 8 or 1
    eager = _Eager([], [], [], [])
    for op in ops:
        if isinstance(op, tuple):  # a pass eager PyTorch adds: read and write every value
            name, stage, elements = op
            nbytes = 2 * elements * size
            eager.stages.append(stage)
            eager.kernels.append(
                Kernel(name, "elementwise", dtype, 0, nbytes, shape={"elements": nbytes // 2})
            )
            eager.launches.append(extra)
            eager.weighted.append(False)
            eager.written.append(nbytes / 2)
            continue
        eager.stages.append(op.stage)
        if op.kind == "matmul" and op.shape is not None:
            g, m, n, k = op.shape
            eager.kernels.append(
                Kernel(
                    op.name,
                    "gemm",
                    weight_dtype if op.weight_bytes > 0 else dtype,
                    int(op.flops),
                    int(op.bytes),
                    shape={"groups": g, "m": m, "n": n, "k": k},
                )
            )
            eager.launches.append(1)
            eager.weighted.append(op.weight_bytes > 0)
            eager.written.append(float(op.bytes_written))
        else:
            eager.kernels.append(
                Kernel(
                    op.name,
                    "elementwise",
                    dtype,
                    int(op.flops),
                    int(op.bytes),
                    shape={"elements": int(op.bytes) // 2},
                )
            )
            eager.launches.append(extra)
            eager.weighted.append(False)
            eager.written.append(0.0 if op.name == "cache_write" else float(op.bytes_written))
    return eager


#: hardware argument -> (spec, the file it was read from, a digest of that file's bytes): a
#: device named again is not parsed and checked again unless its file's content changed (a
#: modification time can stay the same across a rewrite within the file system's resolution).
_HARDWARE: dict[str, tuple[HardwareSpec, str, bytes]] = {}


def _digest(path: str) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return hashlib.blake2b(f.read(), digest_size=16).digest()
    except OSError:
        return None


def _hardware_of(hardware: HardwareSpec | str) -> HardwareSpec:
    """:func:`mlacalc.load_hardware`, remembered per name while its file's content is unchanged."""
    if isinstance(hardware, HardwareSpec):
        return hardware
    # names only: a path is read each time (it may be relative to another directory)
    named = isinstance(hardware, str) and not hardware.endswith((".yaml", ".yml", ".json"))
    key = hardware if named and os.sep not in hardware else None
    hit = _HARDWARE.get(key) if key is not None else None
    if hit is not None and _digest(hit[1]) == hit[2]:
        return hit[0]
    hw = load_hardware(hardware)
    if key is not None and hw.origin:
        digest = _digest(hw.origin)
        if digest is None:
            return hw
        if len(_HARDWARE) > 128:
            _HARDWARE.clear()
        _HARDWARE[key] = (hw, hw.origin, digest)
    return hw


@dataclass(frozen=True)
class _Step:
    """One step to time: the model, what the step is asked (its :class:`Workload`, the weight
    dtype resolved), how it runs (``mode``, ``scope``) and whether the weights are read as the
    checkpoint stores them (``stored``)."""

    m: ModelConfig
    work: Workload
    mode: str
    scope: str
    stored: bool
    #: TensorRT-LLM's MoE backend asked (None: its default; :mod:`mlacalc.timemodel.moe_backend`)
    moe_backend: str | None = None

    def attention_cost(self, causal: bool) -> Any:
        """The attention cost of one layer of the step."""
        one = one_layer(self.m)
        return cost_of(one, self.work.with_changes(causal=causal))

    @property
    def step_weights(self) -> str | None:
        """:func:`step_kernels`' weight dtype: None where the checkpoint's storage is read."""
        return None if self.stored else self.work.weight_dtype

    def kernels(
        self, model: ModelConfig, scope: str, weights: str | None, engine: str = ""
    ) -> list[Kernel]:
        """The serving kernels (:func:`step_kernels`) of ``model`` over ``scope``, weights
        read in ``weights`` (None: as the checkpoint stores them), as ``engine`` runs them."""
        w = self.work
        return step_kernels(
            model,
            w.phase,
            w.seq_len,
            w.batch,
            w.q_len,
            w.impl,
            w.causal,
            weights,
            w.kv_dtype,
            w.act_dtype,
            scope=scope,
            engine=engine,
        )


def _model_unfused(step: _Step, hw: HardwareSpec, prof: Any, latency: float) -> tuple:
    """The eager op-by-op sequence timed by the kernel time model, each op a kernel that
    cannot run faster than the CPU dispatches it; the FFN/MoE and head kernels of a whole
    step; and the step's new tokens per sequence."""
    one = one_layer(step.m)
    # the eager sequence computes every score and masks the upper triangle: its matmuls are
    # the full matrix's, causal or not
    cost = step.attention_cost(False)
    eager = _eager_kernels(cost, one, step.work.act_dtype, step.work.weight_dtype)
    kernels, stages = eager.kernels, list(eager.stages)
    host_op = host_op_seconds(hw.kind, latency)
    dispatch = [n * host_op for n in eager.launches]
    shares = [1.0] * len(kernels)
    if not host_runs_kernels(hw.kind):  # eager PyTorch's CUDA passes, at their share of the rate
        keys = attended_keys(one, cost.seq_len)
        size = dtype_bits(step.work.act_dtype) // 8 or 1
        shares = [
            gpu_pass_share(k.name, keys, int(w // size)) if k.kind == "elementwise" else 1.0
            for k, w in zip(kernels, eager.written)
        ]
        kernels = [_at_pass_share(k, share) for k, share in zip(kernels, shares)]
    if step.stored:  # the projections' weights as the checkpoint stores them
        kernels = as_stored(kernels, one, step.work.act_dtype)
    if step.scope == "model":
        layers = step.m.num_hidden_layers
        kernels = [
            Kernel(k.name, k.kind, k.dtype, k.flops, k.bytes, k.calls * layers, k.shape)
            for k in kernels
        ]
        rest = [
            k
            for k in step.kernels(step.m, "model", step.step_weights)
            if kernel_stage(k.name) in ("ffn", "head")
        ]
        kernels += rest
        dispatch += [host_op] * len(rest)
        stages += [kernel_stage(k.name) for k in rest]
    ops = _model_ops(kernels, hw, prof, dispatch, stages)
    # a pass timed at its share of the rate still moves its own bytes, and its ideal is theirs
    for i, share in enumerate(shares):  # the eager sequence's ops, first in the list
        if share != 1.0:
            moved = eager.kernels[i].bytes * kernels[i].calls
            ops[i] = dataclasses.replace(ops[i], bytes=moved, roofline_s=ops[i].roofline_s * share)
    return ops, cost.q_len


def _at_pass_share(k: Kernel, share: float) -> Kernel:
    """An element-wise pass that reaches ``share`` of the rate its class streams at, as the
    class sees it: 1 / ``share`` of the bytes it moves (other kernels as they are)."""
    if k.kind != "elementwise" or share == 1.0:
        return k
    return Kernel(k.name, k.kind, k.dtype, k.flops, round(k.bytes / share), k.calls, k.shape)


def _model_fused(step: _Step, hw: HardwareSpec, prof: Any) -> tuple:
    """The serving kernels of the step timed by the kernel time model, and the step's new
    tokens per sequence."""
    # the kernels the profile's engine runs (as its time rules take them: kernel_time)
    engine = getattr(prof, "engine", "")
    kernels = step.kernels(step.m, step.scope, step.step_weights, engine)
    # routed experts on the MoE backend asked (TensorRT-LLM-gen's: its class, as a plan's step)
    kernels = [
        dataclasses.replace(k, shape={**k.shape, TRTLLM_GEN_MOE: 1})
        if k.kind == "moe" and runs_trtllm_gen(step.moe_backend, engine, hw, k.dtype)
        else k
        for k in kernels
    ]
    # an element-wise kernel that moves nothing runs none (a DSA layer's top-k where no query
    # has more keys than it selects), as a served step times it (gpu_step.time_jobs)
    kernels = [k for k in kernels if k.kind != "elementwise" or k.bytes]
    ops = _model_ops(kernels, hw, prof)
    w = step.work
    q = w.q_len if w.q_len is not None else (w.seq_len if w.phase == "prefill" else 1)
    if w.phase == "chunk" or w.q_len is not None:
        q = step.attention_cost(w.causal).q_len
    return ops, q


def _roofline_attention(step: _Step, rates: RooflineRates) -> tuple[list[OpTime], int]:
    """The plain roofline of the attention kernels of one layer (scaled to every layer of a
    whole step), and the step's new tokens per sequence. Unfused: the eager sequence's full
    score matrix, masked, whether causal or not, every op a launch; fused: the serving kernels
    (:mod:`mlacalc.cost.model_step`), element-wise work (norms, RoPE) fused into its
    neighbours, as the fused bound assumes."""
    causal = step.work.causal and step.mode != "unfused"
    cost = step.attention_cost(causal)
    one = one_layer(step.m)
    if step.mode == "unfused":
        eager = _eager_kernels(cost, one, rates.dtype, rates.weight_dtype)
        out = _roofline_ops(
            eager.kernels, rates, eager.stages, eager.launches, weighted=eager.weighted
        )
        layers = 1 if step.scope == "attention_layer" else step.m.num_hidden_layers
        if not host_runs_kernels(rates.hw.kind):
            out = _eager_gpu_kernels(out, eager, rates, attended_keys(one, cost.seq_len))
        out = _eager_host(out, eager, rates, layers)
    else:
        if rates.stored:  # the weights as the checkpoint stores them
            kernels = step.kernels(one, "attention_layer", None)
        else:
            kernels = attention_kernels(
                cost, one, rates.dtype, rates.weight_dtype, kv_dtype=step.work.kv_dtype
            )
        out = _roofline_ops([k for k in kernels if k.kind != "elementwise"], rates)
    layers = 1 if step.scope == "attention_layer" else step.m.num_hidden_layers
    if layers != 1:
        out = [_scale(o, layers) for o in out]
    return out, cost.q_len


def _eager_gpu_kernels(
    ops: list[OpTime], eager: _Eager, rates: RooflineRates, keys: int
) -> list[OpTime]:
    """The eager sequence's ops as eager PyTorch's CUDA kernels run them: an element-wise op at
    its share of the copy bandwidth (:func:`gpu_pass_share`: the softmax over rows of ``keys``,
    copies of strided views, the out-of-place mask); a product without weights (the attention
    core's ``bmm`` over the cache or the scores) streams its operands at the copy rate, with no
    floor from the GEMM sweep (whose single ``[M x n] @ [n x n]`` calls carry a launch each and
    a weight matrix of 8192 x 8192, neither of which a ``bmm`` over gigabytes has)."""
    out = []
    size = dtype_bits(rates.dtype) // 8 or 1
    for o, k, w, n in zip(ops, eager.kernels, eager.weighted, eager.written):
        if k.kind == "elementwise":
            share = gpu_pass_share(k.name, keys, int(n // size))
            if share != 1.0:
                o = dataclasses.replace(o, memory_s=o.memory_s / share)
        elif not w:
            o = dataclasses.replace(o, memory_s=o.bytes / rates.copy_bw, measured_floor_s=0.0)
        out.append(o)
    return out


def _eager_host(
    ops: list[OpTime], eager: _Eager, rates: RooflineRates, layers: int
) -> list[OpTime]:
    """The eager sequence's ops as the host runs them. On a CPU the host runs every op itself:
    its dispatch (``launch_s``) adds to its time, and so does what eager PyTorch adds there
    (:func:`cpu_eager_seconds`: fresh outputs' first touch, ``bmm``'s entries run one by one).
    On a GPU the host queues the ops ahead of it (:func:`dispatch_queue`, the sequence repeated
    ``layers`` times): an op's ``launch_s`` becomes what the GPU waited for the host before it."""
    if host_runs_kernels(rates.hw.kind):
        touch = rates.cal.first_touch_bytes_per_s if rates.cal is not None else None
        extra = cpu_eager_seconds(
            [None if w else _products(k) for k, w in zip(eager.kernels, eager.weighted)],
            eager.written,
            [o.memory_s for o in ops],
            rates.latency,
            touch or FIRST_TOUCH_BYTES_PER_S,
        )
        return [dataclasses.replace(o, launch_s=o.launch_s + e) for o, e in zip(ops, extra)]
    busy = [max(o.compute_s, o.memory_s, o.measured_floor_s) * layers for o in ops]
    # the host's time per op (launch_s counts trivial-op latencies)
    host = [host_op_seconds(rates.hw.kind, o.launch_s) * layers for o in ops]
    waits = dispatch_queue(busy, host, [layers] * len(ops))
    return [dataclasses.replace(o, launch_s=w / layers) for o, w in zip(ops, waits)]


def _products(k: Kernel) -> tuple[int, int, int, int] | None:
    """(G, M, N, K) of an eager product without weights (the attention core), else None."""
    f = k.shape
    if k.kind != "gemm" or "groups" not in f:
        return None
    return (int(f["groups"]), int(f["m"]), int(f["n"]), int(f["k"]))


def _roofline_ffn_and_head(step: _Step, rates: RooflineRates) -> list[OpTime]:
    """The plain roofline of the FFN / MoE kernels (the experts a batch touches read once) and
    the output head on one token per sequence: the step's kernels after the attention blocks,
    element-wise work fused."""
    kernels = step.kernels(step.m, "model", step.step_weights)
    return _roofline_ops(
        [k for k in kernels if k.kind != "elementwise" and kernel_stage(k.name) in ("ffn", "head")],
        rates,
    )


def _prediction(step: _Step, hw, rates, q, impl, ops, **how) -> Prediction:
    """The prediction of a step from its timed ops; ``how`` says how it was calibrated (and
    ``device_said``, the device's route warnings, leads the warnings)."""
    said = how.pop("device_said", ())
    m = step.m
    layer = ""
    if step.scope == "attention_layer":
        # one layer stands for the model: where its layers differ, the first layer's kind is
        # timed (one_layer), and the prediction says so rather than stand for every kind

        pattern = layer_pattern(m)
        if len({k.label for k in pattern.layers}) > 1:
            summary = str(pattern.to_dict().get("summary", "")).split(";")[0]
            first = 0  # a model of one mixer per layer times its first attention block
            if m.block_types and "attention" in m.block_types:
                first = m.block_types.index("attention")
            layer = f"{pattern.layers[first].label}: layer {first + 1} of {summary}"
    return Prediction(
        model=m.name,
        hardware=hw.name,
        phase=step.work.phase,
        seq_len=step.work.seq_len,
        batch=step.work.batch,
        q_len=q,
        impl=impl,
        # attention_cost's word (DeepSeek-V4's compressed layers: none of the three)
        cache=(
            cache_kind(m.is_mla, step.work.impl)
            if m.variant in VARIANTS and not m.compress_ratios
            else ""
        ),
        mode=step.mode,
        scope=step.scope,
        dtype=step.work.act_dtype,
        ops=tuple(ops),
        peak_flops_per_s=rates.peak(step.work.act_dtype),
        bandwidth_bytes_per_s=rates.copy_bw,
        weights=_weights_word(step, rates),
        layer=layer,
        # a layout carrying a recurrent state's dtype too is named by its cache's dtype
        kv_dtype=str(getattr(step.work.kv_dtype, "name", step.work.kv_dtype)),
        warnings=said
        + _step_warnings(step, hw, rates)
        + _geometry_notes(step, impl, how)
        + _chunk_notes(step, impl, q, how),
        **how,
    )


def _geometry_notes(step: _Step, impl: str, how: dict[str, Any]) -> tuple[str, ...]:
    """An MLA latent rank or head widths no measured row has (:func:`mla_geometry_note`),
    where the fitted kernel model times an MLA core (not the plain bound, not eager PyTorch's
    ops, not ``impl="naive"``'s expanded MHA core)."""
    if step.mode != "fused" or how.get("profile", ROOFLINE) == ROOFLINE or impl == "naive":
        return ()
    note = mla_geometry_note(step.m)
    return (note,) if note else ()


def _chunk_notes(step: _Step, impl: str, q: int, how: dict[str, Any]) -> tuple[str, ...]:
    """An SGLang MLA chunk after a short prefix: priced expanded, run absorbed
    (:func:`~mlacalc.timemodel.mla_time.sglang_chunk_note`)."""
    if step.work.phase != "chunk" or impl != "compressed":
        return ()
    note = sglang_chunk_note(step.m, str(how.get("engine") or ""), step.work.seq_len - q)
    return (note,) if note else ()


def _step_warnings(step: _Step, hw: Any, rates: Any) -> tuple[str, ...]:
    """What a prediction holds but the deployment may not: a working set (the weights and the
    KV cache at the step's scope: the whole model's, or one attention layer's weights and an
    average layer's cache) beyond one GPU's memory, and a context beyond the model's
    positions (the words of :func:`~mlacalc.models.loading.beyond_positions`)."""
    m, work = step.m, step.work
    out = []
    if hw.kind == "gpu" and hw.memory_bytes:
        cache = kv_cache(m, work.seq_len, work.batch, work.kv_dtype)
        if step.scope == "model":
            weights = weight_bytes(m, None if rates.stored else rates.weight_dtype)
            what = "the model's weights"
        else:
            bits = dtype_bits(m.weights_dtype if rates.stored else rates.weight_dtype)
            weights = sum(attention_params(m).values()) * bits // 8
            what = "one attention layer's weights"
        kv = cache.total_bytes if step.scope == "model" else cache.total_bytes // cache.layers
        if weights + kv > hw.memory_bytes:
            gib = 2**30
            out.append(
                f"the step's working set, {(weights + kv) / gib:,.1f} GiB ({what} "
                f"{weights / gib:,.1f} GiB + KV cache {kv / gib:,.1f} GiB for {work.batch:,} x "
                f"{work.seq_len:,} tokens), exceeds one {hw.name}'s {hw.memory_bytes / gib:,.0f} "
                "GiB: no one device holds it, so this is the time of a step that cannot run "
                "as given (mlacalc.plan lays a model out over GPUs)"
            )
    beyond = beyond_positions(m, work.seq_len)
    if beyond:
        out.append(f"{beyond}: {m.label} was not trained for it; the time is counted as if it were")
    cal = rates.cal
    if cal is not None and cal.device_kind == "cuda" and not hw.measured:
        # deferred: the kernel-set reader loads the measured package
        from mlacalc.measured.tables import gpu_device

        if gpu_device(cal.device_name) is None:
            out.append(
                f"--calibrate: the sidecar's device.name {cal.device_name!r} is no catalogue "
                f"GPU, so it is not checked to be {hw.name}: its ceilings are taken as "
                f"{hw.name}'s"
            )
    return tuple(out)


def _weights_word(step: _Step, rates: Any) -> str:
    """What the weights are read in: the checkpoint's storage, or the dtype asked, with the
    output head where a whole step keeps it as the checkpoint stores it (kept_head_format)."""
    m = step.m
    if rates.stored:
        return f"checkpoint {m.quantization.describe()}"
    head = kept_head_format(m, rates.weight_dtype) if step.scope == "model" else None
    return rates.weight_dtype + (f", head {head}" if head else "")


def _calibration_of(calibration: Any) -> Calibration | None:
    """A :class:`Calibration`, or one read from a microbenchmark ``.json`` (or its dict)."""
    if calibration is None or isinstance(calibration, Calibration):
        return calibration
    if not isinstance(calibration, (str, Path, os.PathLike, dict)):
        raise InvalidArgumentError(
            "calibration",
            f"must be a Calibration or the path of a microbenchmark .json, "
            f"got {type(calibration).__name__}",
        )
    try:
        return Calibration.from_measurements(calibration)
    except (ConfigError, KeyError, TypeError, ValueError) as exc:
        why = f"has no {exc} entry" if isinstance(exc, KeyError) else str(exc)
        raise InvalidArgumentError(
            "calibration",
            f"{why}; pass a Calibration or the .json sidecar that mlacalc bench wrote",
        ) from None


def _check_calibration_device(calibration: Calibration | None, hw: HardwareSpec) -> None:
    """Refuse a sidecar's ceilings for another device than ``hw`` (a CPU's 39 GB/s beside an
    L40S's datasheet, an H200's for an L40S): its ``device.kind`` must be ``hw``'s kind, a GPU's
    ``device.name`` must name ``hw`` (matched to the catalogue as the kernel sets are:
    ``NVIDIA H200`` -> H200), and a measured device's sidecar must be of the same device. A
    GPU name the catalogue does not know is taken unchecked, said in the prediction's warnings
    (:func:`_step_warnings`). A hand-built :class:`Calibration` names no device."""
    if calibration is None or not calibration.device_kind:
        return
    mismatch = calibration_device_mismatch(calibration, hw)
    if mismatch:
        raise InvalidArgumentError("calibration", mismatch)


def calibration_device_mismatch(calibration: Calibration, hw: HardwareSpec) -> str:
    """The one-line reason the sidecar's ceilings are not ``hw``'s, or ``""``."""
    # deferred: the kernel-set reader loads the measured package
    from mlacalc.measured.tables import gpu_device

    name, kind = calibration.device_name, calibration.device_kind
    theirs = "gpu" if kind == "cuda" else kind
    fix = (
        f"pass a sidecar that mlacalc bench wrote on {hw.name}, or time it by its datasheet "
        "(drop --calibrate)"
    )
    said = f"the sidecar's device.name {name!r} (device.kind {kind!r})"
    if theirs != hw.kind:
        return f"{said} is a {theirs.upper()}, not {hw.name} (a {hw.kind.upper()}): {fix}"
    if hw.measured:
        own = hw.display_name.removesuffix(" (measured)")
        if name and own and name != own:
            return f"{said} is not {hw.name}'s device ({own!r}): {fix}"
        return ""
    if kind == "cuda":
        match = gpu_device(name)
        if match is not None and match != hw.name:
            return f"{said} is the catalogue's {match}, not {hw.name}: {fix}"
    return ""


def _check_mode(m: ModelConfig, mode: str, scope: str) -> None:
    """Errors for a mode or scope :func:`predict_time` cannot take."""
    if mode not in MODES:
        raise InvalidArgumentError("mode", f"unknown mode {mode!r}; use fused or unfused")
    if scope not in SCOPES:
        raise InvalidArgumentError(
            "scope", f"unknown scope {scope!r}; use attention_layer or model"
        )
    if mode == "unfused" and m.linear_num_value_heads is not None:
        raise InvalidArgumentError(
            "mode",
            f"{m.label} has linear-attention layers, whose eager op-by-op sequence is not "
            "modelled; use mode='fused' (the serving kernels)",
        )


def _check_latency(launch_latency_s: Any) -> None:
    """An error for a launch latency that is not a number of seconds."""
    if launch_latency_s is not None and (
        isinstance(launch_latency_s, bool)
        or not isinstance(launch_latency_s, (int, float))
        or not math.isfinite(launch_latency_s)
        or launch_latency_s < 0
    ):
        raise InvalidArgumentError(
            "launch_latency_s",
            f"must be a finite number of seconds >= 0 (or None for the device's), "
            f"got {launch_latency_s!r}",
        )


def predict_time(
    model: ModelConfig | str,
    hardware: HardwareSpec | str,
    phase: str,
    seq_len: int,
    batch: int = 1,
    impl: str | None = None,
    mode: str = "fused",
    dtype: str = "bf16",
    scope: str = "attention_layer",
    *,
    q_len: int | None = None,
    causal: bool = False,
    kv_dtype: str | None = None,
    weight_dtype: str | None = None,
    calibration: Calibration | str | Path | None = None,
    launch_latency_s: float | None = None,
    profile: Any = None,
    engine: str | None = None,
    moe_backend: str | None = None,
) -> Prediction:
    """Predicted time of one attention layer (``scope="attention_layer"``, what the
    microbenchmark times) or of a whole forward step (``scope="model"``: every layer's attention
    and FFN/MoE, weights read once, plus the output head on one token per sequence): on a GPU
    the calibrated kernel time model's (``seconds``), with the plain roofline bound beside it
    (``roofline_s``); the roofline itself where no model applies (below).

    ``impl=None`` is what the engine runs (:func:`mlacalc.cost.attention.resolve_impl`): for
    MLA the latent cache always, a chunk after a cached prefix ``"compressed"`` (the prefix's
    latent rows expanded through kv_b_proj), vLLM's short prompts and chunks ``"absorbed"``
    down its decode path; ``impl`` on the prediction names it. ``impl="naive"`` is the
    expanded-K/V cache, which no engine keeps.

    ``dtype`` is the compute and activation dtype; ``kv_dtype`` defaults to it, and so does
    ``weight_dtype``, except for a model that declares its checkpoint's ``quantization_config``:
    its weights are then read as the checkpoint stores them, each GEMM and MoE timed by the
    class of its storage (:func:`mlacalc.cost.model_step.step_kernels`; ``weights`` on the
    prediction says which).

    On a GPU the kernels are timed by the kernel time model (:mod:`mlacalc.timemodel`) with a
    calibration ``profile`` (the shipped one by default: fitted on the measured H100-SXM and
    A100-SXM-80GB sets, other devices by their datasheet figures; ``calibration`` on the
    prediction says which). ``mode="fused"`` is the serving kernels of
    :mod:`mlacalc.cost.model_step`;
    ``mode="unfused"`` the eager op-by-op sequence, each op a calibrated kernel; the host
    dispatches every ATen op (``launch_latency_s`` each, 5 us by default on a GPU) and queues
    the kernels ahead of the GPU, so the step costs the larger of the host's and the GPU's
    totals (plus the pipe's fill), not a dispatch floor per op.
    ``engine`` (``"trtllm"`` by default, ``"sglang"``, ``"vllm"``): the serving engine whose
    fused kernels are timed, by the shipped profile of that engine fitted on the device where
    one ships, else the engine's default profile, else TensorRT-LLM's standing in (the
    prediction's ``calibration`` says so; ``engine`` on the prediction names it).
    ``moe_backend`` (``scope="model"``, TensorRT-LLM): its MoE backend, as
    :func:`mlacalc.plan` takes it (``"trtllm-gen"``: nvfp4 routed experts on data-centre
    Blackwell timed as TensorRT-LLM-gen's MoE; :mod:`mlacalc.timemodel.moe_backend`).
    ``causal`` (prefill and chunk): the fused kernels skip the masked half; the eager sequence
    computes every score and masks it, so ``causal`` changes nothing there.
    ``profile="roofline"`` gives the plain roofline bound instead (``max(FLOPs / peak,
    bytes / bandwidth)`` per kernel plus a launch latency), which ``roofline_s`` of every
    prediction also reports. ``calibration`` (a :class:`Calibration` or a microbenchmark
    ``.json``), and devices loaded from measured ceilings, predict with the roofline on those
    ceilings: the CPU microbenchmark's check.

    Examples
    --------
    >>> p = predict_time("deepseek-v3", "H200", "decode", 32768, batch=64)
    >>> p.bound
    'compute'
    >>> p.calibration.split("; ")[0]
    'calibrated on A100-SXM-80GB, H100-SXM'
    >>> p.calibration.split("; ")[1]
    'H200 by datasheet ratios from H100-SXM (same tensor-core generation)'
    >>> p.seconds > p.roofline_s
    True
    """
    m = as_model(model)
    hw = _hardware_of(hardware)
    # the prediction keeps them: Python ints (np.int64 is not JSON); checked in the Workload's
    seq_len, batch, q_len = (arguments.plain_int(v) for v in (seq_len, batch, q_len))
    _check_mode(m, mode, scope)
    engine_name = _engine_of(engine, mode, hw)
    dtype = arguments.dtype("dtype", dtype)  # an unknown dtype names its argument
    stored = weight_dtype is None and checkpoint_stored(m)
    if weight_dtype:
        weight_dtype = arguments.dtype("weight_dtype", weight_dtype)
    else:
        weight_dtype = m.weights_dtype if stored else dtype
    _check_latency(launch_latency_s)
    calibration = _calibration_of(calibration)
    _check_calibration_device(calibration, hw)
    own = calibration is None and _own_calibration(hw)
    if own:
        calibration = own
    rates = RooflineRates(hw, calibration, dtype, weight_dtype, launch_latency_s, stored)
    impl = _engine_impl(m, hw, engine_name, phase, seq_len, q_len, impl, kv_dtype or dtype)
    work = Workload(
        phase, seq_len, batch, q_len, impl, causal, kv_dtype or dtype, weight_dtype, dtype
    )
    step = _Step(m=m, work=work, mode=mode, scope=scope, stored=stored)
    step = _checked_backend(step, moe_backend, engine_name, hw)
    resolved = resolve_impl(m, impl, phase)
    use_model = (
        not (isinstance(profile, str) and profile == ROOFLINE)
        and calibration is None
        and not hw.measured
        and hw.kind == "gpu"
    )
    if use_model:
        # the serving engine's own profile for the device (fused kernels), else as named
        if mode == "fused":
            prof, note = chosen_profile(profile, engine_name, hw)
        else:
            prof, note = load_profile(profile), ""
            check_profile_applies(prof, hw)
        if mode == "unfused":
            ops, q = _model_unfused(step, hw, prof, rates.latency)
        else:
            ops, q = _model_fused(step, hw, prof)
        # deferred: provenance loads the serving words; the same lines plan warns with
        from mlacalc.serving.provenance import (
            device_warnings,
            kernel_expected_error,
            prediction_route,
        )

        said = device_warnings(prof, hw, engine_name, note) if mode == "fused" else ()
        expected = (
            kernel_expected_error(prediction_route(prof, hw, engine_name, note, m))
            if mode == "fused"
            else None
        )
        return _prediction(
            step,
            hw,
            rates,
            q,
            resolved,
            ops,
            calibrated=bool(prof.fitted_devices),
            device_fitted=hw.name in prof.devices,
            profile=prof.name,
            profile_digest=prof.source_digest,
            calibration=prof.describe(hw.name, hw) + (f"; {note}" if note else ""),
            engine=engine_name,
            device_said=said,
            expected_error=expected,
        )
    return _roofline_prediction(step, hw, rates, resolved, engine_name, own)


#: what a measured device given alone is timed with (its sidecar's rates, as --calibrate reads them)
OWN_RATES = "the device's own sidecar rates (as --calibrate reads them)"


def _roofline_prediction(step: _Step, hw, rates, resolved, engine: str, own: Any) -> Prediction:
    """The plain roofline's prediction (a measured device's own sidecar rates said so)."""
    ops, q = _roofline_attention(step, rates)
    if step.scope == "model":
        ops += _roofline_ffn_and_head(step, rates)
    said: dict[str, Any] = {"calibration": f"plain roofline bound on {OWN_RATES}"} if own else {}
    if step.mode == "fused" and hw.kind == "gpu" and not hw.measured:
        # deferred: provenance loads the serving words
        from mlacalc.serving.provenance import PLAIN_BOUND_ERROR

        said["expected_error"] = dict(PLAIN_BOUND_ERROR)
    calibrated = rates.cal is not None
    return _prediction(
        step, hw, rates, q, resolved, ops, calibrated=calibrated, engine=engine, **said
    )


def _own_calibration(hw: HardwareSpec) -> Any:
    """A measured device's own sidecar read as its :class:`Calibration` (the matrix-vector
    rates, the GEMM sweep and the first-touch rate its run measured, beside the ceilings the
    device spec holds), or None for a catalogue device: ``-H SIDECAR.json`` predicts what
    ``--calibrate SIDECAR.json`` and ``mlacalc validate`` do."""
    if not (hw.measured and hw.origin and hw.origin.endswith(".json")):
        return None
    try:
        cal = Calibration.from_measurements(hw.origin)
    except (ConfigError, OSError, KeyError, TypeError, ValueError):
        return None  # the spec was read from it; a file changed since keeps the spec's ceilings
    return cal


def _checked_backend(step: _Step, backend: Any, engine: str, hw: HardwareSpec) -> _Step:
    """The step with ``moe_backend`` checked (:func:`check_moe_backend`): a whole step's
    routed experts of TensorRT-LLM's fused kernels."""
    if backend is None:
        return step
    if step.mode == "unfused" or step.scope != "model":
        raise InvalidArgumentError(
            "moe_backend",
            "applies to a whole step's routed experts (scope='model', mode='fused')",
        )
    moe = [k.dtype for k in step.kernels(step.m, "model", step.step_weights) if k.kind == "moe"]
    backend = check_moe_backend(backend, engine, hw, moe[0] if moe else None)
    return dataclasses.replace(step, moe_backend=backend)


def _engine_impl(
    m: ModelConfig,
    hw: HardwareSpec,
    engine: str,
    phase: str,
    seq_len: Any,
    q_len: Any,
    impl: Any,
    kv_dtype: Any,
) -> Any:
    """The MLA implementation the engine runs a step with where none is asked: a prompt (or
    chunk) of at most :func:`~mlacalc.timemodel.mla_time.step_decode_path_tokens` new tokens a
    sequence down the engine's decode path, absorbed (vLLM's short prompts, as its measured
    module rows are mapped: docs/time-model.md); else as asked (None: the serving default)."""
    if impl is not None or phase == "decode" or hw.kind != "gpu" or not m.is_mla:
        return impl
    q = seq_len if phase == "prefill" else q_len
    q = arguments.whole(q)
    if q is None:
        return impl  # checked, and named, where the workload is built
    limit = step_decode_path_tokens(m, engine, device_figures(hw), kv_dtype)
    return "absorbed" if 0 < q <= limit else impl


def _engine_of(engine: Any, mode: str, hw: Any = None) -> str:
    """The engine a prediction is for: a serving engine for the fused kernels (default
    TensorRT-LLM, SGLang on another vendor's GPU: :func:`~mlacalc.words.engines.
    default_engine`); eager PyTorch for the unfused sequence, where naming an engine is an
    error."""
    if mode == "unfused":
        if engine is not None:
            raise InvalidArgumentError(
                "engine",
                "applies to mode='fused' (a serving engine's kernels); mode='unfused' is eager "
                "PyTorch",
            )
        return "eager PyTorch"
    return check_engine(engine, hw=hw)
