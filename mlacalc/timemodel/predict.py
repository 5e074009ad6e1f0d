"""Roofline time predictions from the engine's FLOPs and bytes.

Each kernel takes ``max(flops / peak, bytes / bandwidth)`` plus a launch latency. Two modes:

- ``fused``: the ideal lower bound for kernels a serving engine fuses: every GEMM one
  kernel reading its weight once, the attention core one flash-style kernel (scores,
  softmax and the value product without materialising the score matrix, each cached byte
  read once), element-wise work fused into its neighbours, the new cache rows written once;
- ``unfused``: the op-by-op PyTorch sequence the microbenchmark runs: every op reads its
  inputs and writes its outputs (the score matrix included) and every dispatched ATen op
  pays a launch latency.

What a plain roofline misses, and what corrects it here:

- calibration: peaks from the ceilings the microbenchmark measured on the device in the
  same run (a large matmul, a large matrix-vector product, a large copy, a trivial op)
  instead of datasheet figures; matmuls stream their operands at the measured
  matrix-vector bandwidth, element-wise ops at the copy bandwidth; and the measured time
  of ``[M x n] @ [n x n]`` GEMMs for M from 1 up sets a floor under every matmul (scaled
  to its size), because a few-row product runs far below both roofs on real libraries;
- skinny products: a GPU matmul whose output has fewer 128x128 tiles than the device has
  SMs cannot use every SM, so its compute peak is scaled by ``tiles / SMs`` (decode-time
  attention products such as ``[128 x S] @ [S x 512]`` run as batched products with B x 4
  tiles); a single GEMM may split K (cuBLAS split-K), at most once per 512 of K. The fused
  attention core splits the keys across SMs (flash-decoding), so it is not penalised.
  This correction has not been checked against GPU measurements yet.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mlacalc.cost.engine import as_model, attention_cost, model_layer_key, resolve_impl
from mlacalc.cost.model_step import (
    as_stored,
    attention_kernels,
    checkpoint_stored,
    kernel_stage,
    one_layer,
    step_kernels,
)
from mlacalc.hardware.catalogue import HardwareSpec, load_hardware, lookup_peak, read_sidecar
from mlacalc.models.loading import ModelConfig
from mlacalc.words import arguments
from mlacalc.words.dtypes import canonical_dtype
from mlacalc.words.errors import ConfigError, InvalidArgumentError
from mlacalc.words.kernels import KERNEL_KINDS, Kernel
from mlacalc.words.vocab import MODES, SCOPES

__all__ = [
    "LAUNCHES",
    "ROOFLINE",
    "TILE",
    "Calibration",
    "OpTime",
    "Prediction",
    "kernel_time",
    "predict_time",
]

TILE = 128
#: ``profile=ROOFLINE`` predicts with the plain roofline bound instead of the kernel time model
ROOFLINE = "roofline"
#: latency assumed per kernel launch when no measurement calibrates it
DEFAULT_LAUNCH_S = {"gpu": 5e-6, "cpu": 2e-6}

#: ATen ops (views excluded) one forward of a reference layer dispatches, by layer and by
#: whether the step has one new token (no mask) or several; counted with TorchDispatchMode
#: (tests/test_roofline.py recounts them).
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
class Calibration:
    """Ceilings measured on one device: they replace the datasheet peaks."""

    matmul_flops_per_s: dict[str, float]
    copy_bytes_per_s: float
    launch_latency_s: float
    gemv_bytes_per_s: dict[str, float] = field(default_factory=dict)
    #: dtype -> (n, [M...], [seconds...]) of [M x n] @ [n x n] GEMMs measured on the device
    gemm_m_sweep: dict[str, tuple] = field(default_factory=dict)
    source: str = ""

    @classmethod
    def from_measurements(cls, json_path: str | Path | dict) -> Calibration:
        meta = json_path if isinstance(json_path, dict) else read_sidecar(Path(json_path))
        c = meta["ceilings"]
        return cls(
            matmul_flops_per_s={
                canonical_dtype(k): float(v) for k, v in c["matmul_flops_per_s"].items()
            },
            copy_bytes_per_s=float(c["copy_bytes_per_s"]),
            launch_latency_s=float(c["launch_latency_s"]),
            gemv_bytes_per_s={
                canonical_dtype(k): float(v) for k, v in c.get("gemv_bytes_per_s", {}).items()
            },
            gemm_m_sweep={
                canonical_dtype(k): (int(v["n"]), tuple(v["m"]), tuple(v["seconds"]))
                for k, v in c.get("gemm_m_sweep", {}).items()
            },
            source=str(meta.get("rows_file", "")),
        )

    def gemm_seconds(self, dtype: str, G: int, M: int, N: int, K: int) -> float | None:
        """Time of G products [M x K] @ [K x N] read off the measured GEMM sweep (scaled by
        N K / n^2, interpolated linearly in M, extrapolated in proportion to M beyond the sweep),
        or None."""
        sweep = self.gemm_m_sweep.get(canonical_dtype(dtype))
        if not sweep:
            return None
        n, ms, secs = sweep
        if ms[0] >= M:
            per = secs[0]
        elif ms[-1] <= M:
            per = secs[-1] * M / ms[-1]
        else:
            i = next(j for j in range(1, len(ms)) if ms[j] >= M)
            frac = (M - ms[i - 1]) / (ms[i] - ms[i - 1])
            per = secs[i - 1] + frac * (secs[i] - secs[i - 1])
        return G * per * (N * K) / (n * n)


#: the collectives among the kernel kinds (their time is link time, not memory)
_COMM_KINDS = KERNEL_KINDS[KERNEL_KINDS.index("all_reduce") :]


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

    @property
    def seconds(self) -> float:
        if self.model_s:
            return self.model_s
        return max(self.compute_s, self.memory_s, self.measured_floor_s) + self.launch_s

    @property
    def bound(self) -> str:
        """What limits the kernel: ``"compute"`` or ``"memory"``; of a kernel the time model
        predicts, also ``"latency"`` (its fixed cost per call outweighs its compute time, its
        memory time and its other work: a small kernel) and, of a collective, ``"link"`` (as
        :func:`mlacalc.timemodel.kernel_time.predict_kernels` says)."""
        if self.model_s:
            if self.kind in _COMM_KINDS:
                return "link" if self.memory_s > self.launch_s else "latency"
            other = self.launch_s - self.fixed_s
            if self.fixed_s > max(self.compute_s, self.memory_s, other):
                return "latency"
        return "compute" if self.compute_s > self.memory_s else "memory"

    @property
    def arithmetic_intensity(self) -> float:
        return self.flops / self.bytes if self.bytes else math.inf

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
    calibrated: bool
    #: the calibration profile that predicted the kernels ("roofline" for the plain bound)
    profile: str = ROOFLINE
    #: how the device is predicted: "calibrated on H100-SXM, A100-SXM-80GB; H200 by datasheet
    #: ratios", or the plain roofline bound
    calibration: str = "plain roofline bound"
    #: how the weights are read: a dtype chosen (or defaulted), or ``"checkpoint fp8 block
    #: 128x128"`` when read as the model's quantized checkpoint stores them
    weights: str = ""
    #: the layer timed by ``scope="attention_layer"`` where a model's layers differ: its kind
    #: and the model's pattern ("sliding(128): layer 1 of 36 layers: 18 sliding(128) + 18
    #: full"); "" where the layers are alike or the step is the whole model's
    layer: str = ""

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
    def compute_s(self) -> float:
        """The time of the kernels whose compute time exceeds their memory time (whatever
        else bounds them: :attr:`OpTime.bound`); with :attr:`memory_s` the whole time."""
        return sum(o.seconds for o in self.ops if o.compute_s > o.memory_s)

    @property
    def memory_s(self) -> float:
        """The time of the other kernels (memory, link or latency bound)."""
        return sum(o.seconds for o in self.ops if not o.compute_s > o.memory_s)

    @property
    def bound(self) -> str:
        """``"compute"`` or ``"memory"``: which kind of kernel takes most of the time, each
        kernel by its larger term (a latency-bound kernel by its compute or memory time)."""
        return "compute" if self.compute_s > self.memory_s else "memory"

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
        return {
            "model": self.model,
            "hardware": self.hardware,
            "phase": self.phase,
            "seq_len": self.seq_len,
            "batch": self.batch,
            "q_len": self.q_len,
            "impl": self.impl,
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
            "profile": self.profile,
            "calibration": self.calibration,
            "calibrated": self.calibrated,
            "peak_flops_per_s": self.peak_flops_per_s,
            "bandwidth_bytes_per_s": self.bandwidth_bytes_per_s,
            "stage_seconds": self.stage_seconds(),
            "ops": [o.to_dict() for o in self.ops],
        }


# ------------------------------------------------------------------------------------


class _Rates:
    """Peaks, bandwidths and latency for one prediction (catalogue or calibrated)."""

    def __init__(
        self,
        hw: HardwareSpec,
        calibration: Calibration | None,
        dtype: str,
        weight_dtype: str,
        launch_latency_s: float | None,
        stored: bool = False,
    ):
        self.hw = hw
        self.cal = calibration
        self.dtype, self.weight_dtype = dtype, weight_dtype
        #: weights read as the model's checkpoint stores them (no weight dtype chosen)
        self.stored = stored
        if calibration is not None:
            self.copy_bw = calibration.copy_bytes_per_s
            self.gemv_bw = calibration.gemv_bytes_per_s.get(dtype, self.copy_bw)
            latency = calibration.launch_latency_s
        else:
            self.copy_bw = self.gemv_bw = hw.memory_bandwidth_bytes_per_s
            latency = (
                hw.launch_latency_s
                if hw.launch_latency_s is not None
                else DEFAULT_LAUNCH_S[hw.kind]
            )
        self.latency = launch_latency_s if launch_latency_s is not None else latency

    def peak(self, dtype: str) -> float:
        if self.cal is not None:
            measured = lookup_peak(self.cal.matmul_flops_per_s, dtype)
            if measured is not None:
                return measured
        return self.hw.peak(dtype)

    def matmul_peak(self, has_weight: bool) -> float:
        # GEMMs on fp8 weights run at the fp8 rate (DeepSeek-V3 style; a device without fp8
        # at its bf16 rate), on fp4 weights at the fp4 rate where the device has fp4 tensor
        # cores (the class mlacalc.cost.model_step.weight_gemm_class names, as the kernel model's);
        # the attention core in the compute dtype
        if has_weight:
            w = canonical_dtype(self.weight_dtype)
            if w.startswith("fp8"):
                return self.peak("fp8")
            if w == "fp4" and "fp4" in self.hw.peak_flops_per_s:
                return self.peak("fp4")
        return self.peak(self.dtype)

    def tile_efficiency(self, shape) -> float:
        """Share of the SMs a (batched) product can keep busy: its 128x128 output tiles, times
        the K-splits a single GEMM can use (split-K, at most one per 512 of K); batched
        products (G > 1) are not split."""
        if shape is None or self.hw.kind != "gpu" or not self.hw.sm_count:
            return 1.0
        G, M, N, K = shape
        sms = self.hw.sm_count
        tiles = G * math.ceil(M / TILE) * math.ceil(N / TILE)
        if G == 1 and tiles < sms:
            tiles *= min(math.ceil(sms / tiles), max(1, K // 512))
        return min(1.0, tiles / sms)


def _matmul_time(rates: _Rates, name, stage, flops, nbytes, shape, has_weight, launches) -> OpTime:
    eff = rates.tile_efficiency(shape)
    floor = 0.0
    if rates.cal is not None and shape is not None:
        floor = rates.cal.gemm_seconds(rates.dtype, *shape) or 0.0
    return OpTime(
        name=name,
        stage=stage,
        kind="matmul",
        flops=flops,
        bytes=nbytes,
        compute_s=flops / (rates.matmul_peak(has_weight) * eff),
        memory_s=nbytes / rates.gemv_bw,
        launch_s=launches * rates.latency,
        efficiency=eff,
        measured_floor_s=floor,
    )


def _core_shape(k: Kernel) -> tuple[int, int, int, int]:
    """(G, M, N, K) of the score product of an attention-core kernel."""
    f = k.shape
    keys = f["kv_len"] if not f["window"] else min(f["kv_len"], f["window"])
    if k.kind == "mla_decode":  # latent heads share one cached row: one product per sequence
        return (f["batch"], f["q_len"] * f["n_heads"], keys, f["head_dim_qk"])
    group = round(f["n_heads"] / f["n_kv"] * f["q_len"])
    return (f["batch"] * f["n_kv"], group, keys, f["head_dim_qk"])


def _kernel_shape(k: Kernel) -> tuple[int, int, int, int] | None:
    f = k.shape
    if k.kind == "gemm":
        return (f["groups"], f["m"], f["n"], f["k"])
    if k.kind == "moe":
        return (f["active_experts"], f["max_tokens_per_expert"], f["inter"], f["hidden"])
    if k.kind in ("attention_prefill", "attention_decode", "mla_prefill", "mla_decode"):
        return _core_shape(k)
    return None


def kernel_time(rates: _Rates, k: Kernel) -> OpTime:
    """The roofline of one kernel of :func:`mlacalc.cost.model_step.step_kernels`, all its
    ``calls``.

    GEMMs and MoE blocks run at the matmul peak of their weights' dtype, the attention core
    at the compute dtype's; element-wise kernels stream at the copy bandwidth."""
    stage = kernel_stage(k.name)
    if k.kind == "elementwise":
        t = OpTime(
            name=k.name,
            stage=stage,
            kind=k.kind,
            flops=k.flops,
            bytes=k.bytes,
            compute_s=0.0,
            memory_s=k.bytes / rates.copy_bw,
            launch_s=rates.latency,
        )
    else:
        # a GEMM or MoE runs at its weights' rate; with the weights as the checkpoint stores
        # them, a kernel of kept bf16 weights or of a weight-only class (4-bit values
        # dequantized to bf16) at the compute dtype's
        weighted = k.kind in ("gemm", "moe") and not (
            rates.stored and not k.dtype.startswith("fp8")
        )
        t = _matmul_time(rates, k.name, stage, k.flops, k.bytes, _kernel_shape(k), weighted, 1)
    return _scale(t, k.calls) if k.calls != 1 else t


def _attention_ops(
    model: ModelConfig,
    rates: _Rates,
    phase,
    seq_len,
    batch,
    q_len,
    impl,
    causal,
    mode,
    kv_dtype,
    layers: int,
) -> tuple[list[OpTime], int]:
    """The attention kernels of ``layers`` layers, and the new tokens per sequence of the step
    (unfused: the eager sequence's full score matrix, masked, whether causal or not)."""
    causal = causal and mode != "unfused"
    cost = attention_cost(
        model, phase, seq_len, batch, q_len, impl, causal, kv_dtype, rates.weight_dtype, rates.dtype
    )
    out: list[OpTime] = []
    if mode == "unfused":
        key = model_layer_key(model, cost.impl)
        rope = not (not model.is_mla and model.family == "gpt2")
        total = LAUNCHES[(key, rope, cost.q_len == 1)]
        matmuls = [o for o in cost.ops if o.kind == "matmul"]
        others = [o for o in cost.ops if o.kind != "matmul"]
        extra = (total - len(matmuls)) / max(len(others), 1)
        for op in cost.ops:
            if op.kind == "matmul":
                t = _matmul_time(
                    rates, op.name, op.stage, op.flops, op.bytes, op.shape, op.weight_bytes > 0, 1
                )
            else:
                t = OpTime(
                    name=op.name,
                    stage=op.stage,
                    kind=op.kind,
                    flops=op.flops,
                    bytes=op.bytes,
                    compute_s=0.0,
                    memory_s=op.bytes / rates.copy_bw,
                    launch_s=extra * rates.latency,
                )
            out.append(t)
    else:
        # the serving kernels of the step (mlacalc.cost.model_step); element-wise work (norms,
        # RoPE) is fused into its neighbours here, as the fused bound assumes
        if rates.stored:  # the weights as the checkpoint stores them
            kernels = step_kernels(
                model,
                phase,
                seq_len,
                batch,
                q_len,
                impl,
                causal,
                None,
                kv_dtype,
                rates.dtype,
                scope="attention_layer",
            )
        else:
            kernels = attention_kernels(
                cost, model, rates.dtype, rates.weight_dtype, kv_dtype=kv_dtype
            )
        out = [kernel_time(rates, k) for k in kernels if k.kind != "elementwise"]
    if layers != 1:
        out = [_scale(o, layers) for o in out]
    return out, cost.q_len


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
    )


def _ffn_and_head_ops(
    model: ModelConfig, rates: _Rates, phase, seq_len, batch, q_len, impl, causal, kv_dtype
) -> list[OpTime]:
    """FFN / MoE (the experts a batch touches read once) and the output head on one token per
    sequence: the step's kernels after the attention blocks, element-wise work fused."""
    kernels = step_kernels(
        model,
        phase,
        seq_len,
        batch,
        q_len,
        impl,
        causal,
        None if rates.stored else rates.weight_dtype,
        kv_dtype,
        rates.dtype,
        scope="model",
    )
    return [
        kernel_time(rates, k)
        for k in kernels
        if k.kind != "elementwise" and kernel_stage(k.name) in ("ffn", "head")
    ]


_MATMUL_KINDS = (
    "gemm",
    "moe",
    "attention_prefill",
    "attention_decode",
    "mla_prefill",
    "mla_decode",
)


def _model_ops(
    kernels: list[Kernel],
    hw: HardwareSpec,
    prof: Any,
    dispatch_s: list[float] | None = None,
    stages: list[str] | None = None,
) -> list[OpTime]:
    """Kernels timed by the kernel time model (one numpy evaluation per kernel class), with the
    plain roofline bound of each. ``dispatch_s`` (eager mode): the CPU time to dispatch each
    kernel's ops; a kernel shorter than that waits on the CPU."""
    from mlacalc.timemodel.kernel_time import class_params, device_batch
    from mlacalc.timemodel.model import kernel_terms
    from mlacalc.words.kernels import batches_of

    out: list[OpTime | None] = [None] * len(kernels)
    for idx, batch in batches_of(kernels):
        batch = device_batch(batch, hw)  # the kernel this device runs (as plan times it)
        fig, params, how = class_params(hw, prof, batch.kind, batch.dtype, batch.variant)
        terms = kernel_terms(batch, fig, params, scaled=True)
        # the plain roofline bound of each kernel (all calls), with the datasheet figures
        peak, bw = fig.peak(batch.dtype), fig.hbm_bytes_per_s
        seconds = terms["seconds"].tolist()
        compute = terms["compute_s"].tolist()
        memory = terms["memory_s"].tolist()
        launch = (terms["fixed_s"] + terms["extra_s"]).tolist()
        fixed = terms["fixed_s"].tolist()
        for j, i in enumerate(idx):
            k = kernels[i]
            calls = k.calls
            t = seconds[j]
            if dispatch_s is not None:
                t = max(t, dispatch_s[i] * calls)
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
                roofline_s=max(k.flops / peak, k.bytes / bw) * calls,
                calibration=how,
                fixed_s=fixed[j] * calls,
            )
    return [o for o in out if o is not None]


def _eager_kernels(
    cost: Any, model: ModelConfig, dtype: str, weight_dtype: str, latency: float
) -> tuple[list[Kernel], list[float], list[str]]:
    """The op-by-op eager PyTorch sequence of one attention layer as kernels (every matmul a
    GEMM, every other op an element-wise kernel reading its inputs and writing its outputs),
    and the CPU dispatch time of each (its ATen ops times the per-op launch latency)."""
    key = model_layer_key(model, cost.impl)
    rope = not (not model.is_mla and model.family == "gpt2")
    total = LAUNCHES[(key, rope, cost.q_len == 1)]
    matmuls = [o for o in cost.ops if o.kind == "matmul"]
    extra = (total - len(matmuls)) / max(len(cost.ops) - len(matmuls), 1)
    kernels, dispatch, stages = [], [], []
    for op in cost.ops:
        stages.append(op.stage)
        if op.kind == "matmul" and op.shape is not None:
            g, m, n, k = op.shape
            kernels.append(
                Kernel(
                    op.name,
                    "gemm",
                    weight_dtype if op.weight_bytes > 0 else dtype,
                    int(op.flops),
                    int(op.bytes),
                    shape={"groups": g, "m": m, "n": n, "k": k},
                )
            )
            dispatch.append(latency)
        else:
            kernels.append(
                Kernel(
                    op.name,
                    "elementwise",
                    dtype,
                    int(op.flops),
                    int(op.bytes),
                    shape={"elements": int(op.bytes) // 2},
                )
            )
            dispatch.append(extra * latency)
    return kernels, dispatch, stages


#: hardware argument -> (spec, the file it was read from, that file's mtime): a device named
#: again is not looked up and read again unless its file changed.
_HARDWARE: dict[str, tuple[HardwareSpec, str, int]] = {}


def _hardware_of(hardware: HardwareSpec | str) -> HardwareSpec:
    """:func:`mlacalc.load_hardware`, remembered per name while its file is unchanged."""
    if isinstance(hardware, HardwareSpec):
        return hardware
    # names only: a path is read each time (it may be relative to another directory)
    named = isinstance(hardware, str) and not hardware.endswith((".yaml", ".yml", ".json"))
    key = hardware if named and os.sep not in hardware else None
    hit = _HARDWARE.get(key) if key is not None else None
    if hit is not None:
        try:
            if os.stat(hit[1]).st_mtime_ns == hit[2]:
                return hit[0]
        except OSError:
            pass
    hw = load_hardware(hardware)
    if key is not None and hw.origin:
        try:
            stamp = os.stat(hw.origin).st_mtime_ns
        except OSError:
            return hw
        if len(_HARDWARE) > 128:
            _HARDWARE.clear()
        _HARDWARE[key] = (hw, hw.origin, stamp)
    return hw


def _prediction(
    m, hw, rates, phase, seq_len, batch, q, impl, mode, scope, dtype, ops, **how
) -> Prediction:
    """The prediction of a step from its timed ops; ``how`` says how it was calibrated."""
    layer = ""
    if scope == "attention_layer":
        # one layer stands for the model: where its layers differ, the first layer's kind is
        # timed (one_layer), and the prediction says so rather than stand for every kind
        from mlacalc.cost.families import layer_pattern

        pattern = layer_pattern(m)
        if len({k.label for k in pattern.layers}) > 1:
            summary = str(pattern.to_dict().get("summary", "")).split(";")[0]
            layer = f"{pattern.layers[0].label}: layer 1 of {summary}"
    return Prediction(
        model=m.name,
        hardware=hw.name,
        phase=phase,
        seq_len=seq_len,
        batch=batch,
        q_len=q,
        impl=impl,
        mode=mode,
        scope=scope,
        dtype=dtype,
        ops=tuple(ops),
        peak_flops_per_s=rates.peak(dtype),
        bandwidth_bytes_per_s=rates.copy_bw,
        weights=f"checkpoint {m.quantization.describe()}" if rates.stored else rates.weight_dtype,
        layer=layer,
        **how,
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
) -> Prediction:
    """Roofline time of one attention layer (``scope="attention_layer"``, what the microbenchmark
    times) or of a whole forward step (``scope="model"``: every layer's attention and FFN/MoE,
    weights read once, plus the output head on one token per sequence).

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
    ``mode="unfused"`` the eager op-by-op sequence, each op a calibrated kernel that cannot
    run faster than the CPU dispatches it (``launch_latency_s`` per ATen op, 5 us by default).
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
    dtype = arguments.dtype("dtype", dtype)  # an unknown dtype names its argument
    stored = weight_dtype is None and checkpoint_stored(m)
    if weight_dtype:
        weight_dtype = arguments.dtype("weight_dtype", weight_dtype)
    else:
        weight_dtype = m.weights_dtype if stored else dtype
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
    if calibration is not None and not isinstance(calibration, Calibration):
        if not isinstance(calibration, (str, Path, os.PathLike, dict)):
            raise InvalidArgumentError(
                "calibration",
                f"must be a Calibration or the path of a microbenchmark .json, "
                f"got {type(calibration).__name__}",
            )
        try:
            calibration = Calibration.from_measurements(calibration)
        except (ConfigError, KeyError, TypeError, ValueError) as exc:
            why = f"has no {exc} entry" if isinstance(exc, KeyError) else str(exc)
            raise InvalidArgumentError(
                "calibration",
                f"{why}; pass a Calibration or the .json sidecar that mlacalc bench wrote",
            ) from None
    rates = _Rates(hw, calibration, dtype, weight_dtype, launch_latency_s, stored)
    step_weights = None if stored else weight_dtype  # step_kernels' weight_dtype
    kv = kv_dtype or dtype
    resolved = resolve_impl(m, impl, phase)
    use_model = (
        not (isinstance(profile, str) and profile == ROOFLINE)
        and calibration is None
        and not hw.measured
        and hw.kind == "gpu"
    )
    if use_model:
        from mlacalc.timemodel.profile import load_profile

        prof = load_profile(profile)
        if mode == "unfused":
            one = one_layer(m)
            # the eager sequence computes every score and masks the upper triangle: its
            # matmuls are the full matrix's, causal or not
            cost = attention_cost(
                one, phase, seq_len, batch, q_len, impl, False, kv, weight_dtype, dtype
            )
            kernels, dispatch, stages = _eager_kernels(
                cost, one, dtype, weight_dtype, rates.latency
            )
            if stored:  # the projections' weights as the checkpoint stores them
                kernels = as_stored(kernels, one, dtype)
            if scope == "model":
                layers = m.num_hidden_layers
                kernels = [
                    Kernel(k.name, k.kind, k.dtype, k.flops, k.bytes, k.calls * layers, k.shape)
                    for k in kernels
                ]
                rest = [
                    k
                    for k in step_kernels(
                        m,
                        phase,
                        seq_len,
                        batch,
                        q_len,
                        impl,
                        causal,
                        step_weights,
                        kv,
                        dtype,
                        scope="model",
                    )
                    if kernel_stage(k.name) in ("ffn", "head")
                ]
                kernels += rest
                dispatch += [rates.latency] * len(rest)
                stages += [kernel_stage(k.name) for k in rest]
            ops = _model_ops(kernels, hw, prof, dispatch, stages)
            q = cost.q_len
        else:
            kernels = step_kernels(
                m, phase, seq_len, batch, q_len, impl, causal, step_weights, kv, dtype, scope=scope
            )
            ops = _model_ops(kernels, hw, prof)
            q = q_len if q_len is not None else (seq_len if phase == "prefill" else 1)
            if phase == "chunk" or q_len is not None:
                q = attention_cost(
                    one_layer(m),
                    phase,
                    seq_len,
                    batch,
                    q_len,
                    impl,
                    causal,
                    kv,
                    weight_dtype,
                    dtype,
                ).q_len
        return _prediction(
            m,
            hw,
            rates,
            phase,
            seq_len,
            batch,
            q,
            resolved,
            mode,
            scope,
            dtype,
            ops,
            calibrated=bool(prof.fitted_devices),
            profile=prof.name,
            calibration=prof.describe(hw.name, hw),
        )
    one = one_layer(m)
    layers = 1 if scope == "attention_layer" else m.num_hidden_layers
    ops, q = _attention_ops(
        one, rates, phase, seq_len, batch, q_len, impl, causal, mode, kv, layers
    )
    if scope == "model":
        ops += _ffn_and_head_ops(m, rates, phase, seq_len, batch, q_len, impl, causal, kv)
    return _prediction(
        m,
        hw,
        rates,
        phase,
        seq_len,
        batch,
        q,
        resolved,
        mode,
        scope,
        dtype,
        ops,
        calibrated=calibration is not None,
    )
