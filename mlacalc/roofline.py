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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .config import ModelConfig
from .dtypes import canonical_dtype, dtype_bits
from .engine import _layer_key, _model, attention_cost, resolve_impl
from .errors import InvalidArgumentError
from .hardware import HardwareSpec, load_hardware, lookup_peak, read_sidecar
from .vocab import MODES, SCOPES

__all__ = ["Calibration", "OpTime", "Prediction", "predict_time", "ffn_ops", "LAUNCHES", "TILE"]

TILE = 128
#: latency assumed per kernel launch when no measurement calibrates it
DEFAULT_LAUNCH_S = {"gpu": 5e-6, "cpu": 2e-6}

#: ATen ops (views excluded) one forward of a reference layer dispatches, by layer and by
#: whether the step has one new token (no mask) or several; counted with TorchDispatchMode
#: (tests/test_roofline.py recounts them).
LAUNCHES = {
    ("mha", True, True): 47, ("mha", True, False): 55,          # (key, rope, single-token)
    ("mha", False, True): 11, ("mha", False, False): 18,
    ("mla_naive_qlora", True, True): 62, ("mla_naive_qlora", True, False): 68,
    ("mla_compressed_qlora", True, True): 62, ("mla_compressed_qlora", True, False): 68,
    ("mla_absorbed_qlora", True, True): 62, ("mla_absorbed_qlora", True, False): 69,
    ("mla_absorbed_merged_qlora", True, True): 60, ("mla_absorbed_merged_qlora", True, False): 66,
    ("mla_naive_noqlora", True, True): 55, ("mla_naive_noqlora", True, False): 61,
    ("mla_compressed_noqlora", True, True): 55, ("mla_compressed_noqlora", True, False): 61,
    ("mla_absorbed_noqlora", True, True): 55, ("mla_absorbed_noqlora", True, False): 62,
    ("mla_absorbed_merged_noqlora", True, True): 53, ("mla_absorbed_merged_noqlora", True, False): 59,
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
    def from_measurements(cls, json_path: "str | Path | dict") -> "Calibration":
        meta = json_path if isinstance(json_path, dict) else read_sidecar(Path(json_path))
        c = meta["ceilings"]
        return cls(matmul_flops_per_s={canonical_dtype(k): float(v) for k, v in c["matmul_flops_per_s"].items()},
                   copy_bytes_per_s=float(c["copy_bytes_per_s"]), launch_latency_s=float(c["launch_latency_s"]),
                   gemv_bytes_per_s={canonical_dtype(k): float(v) for k, v in c.get("gemv_bytes_per_s", {}).items()},
                   gemm_m_sweep={canonical_dtype(k): (int(v["n"]), tuple(v["m"]), tuple(v["seconds"]))
                                 for k, v in c.get("gemm_m_sweep", {}).items()},
                   source=str(meta.get("rows_file", "")))

    def gemm_seconds(self, dtype: str, G: int, M: int, N: int, K: int) -> float | None:
        """Time of G products [M x K] @ [K x N] read off the measured GEMM sweep (scaled by N K / n^2,
        interpolated linearly in M, extrapolated in proportion to M beyond the sweep), or None."""
        sweep = self.gemm_m_sweep.get(canonical_dtype(dtype))
        if not sweep:
            return None
        n, ms, secs = sweep
        if M <= ms[0]:
            per = secs[0]
        elif M >= ms[-1]:
            per = secs[-1] * M / ms[-1]
        else:
            i = next(j for j in range(1, len(ms)) if ms[j] >= M)
            frac = (M - ms[i - 1]) / (ms[i] - ms[i - 1])
            per = secs[i - 1] + frac * (secs[i] - secs[i - 1])
        return G * per * (N * K) / (n * n)


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

    @property
    def seconds(self) -> float:
        return max(self.compute_s, self.memory_s, self.measured_floor_s) + self.launch_s

    @property
    def bound(self) -> str:
        return "compute" if self.compute_s > self.memory_s else "memory"

    @property
    def arithmetic_intensity(self) -> float:
        return self.flops / self.bytes if self.bytes else math.inf

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "stage": self.stage, "kind": self.kind, "flops": self.flops, "bytes": self.bytes,
                "arithmetic_intensity_flops_per_byte": self.arithmetic_intensity, "bound": self.bound,
                "seconds": self.seconds, "compute_s": self.compute_s, "memory_s": self.memory_s,
                "launch_s": self.launch_s, "efficiency": self.efficiency, "measured_floor_s": self.measured_floor_s}


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
        return sum(o.seconds for o in self.ops if o.bound == "compute")

    @property
    def memory_s(self) -> float:
        return sum(o.seconds for o in self.ops if o.bound == "memory")

    @property
    def bound(self) -> str:
        """``"compute"`` or ``"memory"``: which kind of kernel takes most of the time."""
        return "compute" if self.compute_s > self.memory_s else "memory"

    @property
    def launch_s(self) -> float:
        return sum(o.launch_s for o in self.ops)

    @property
    def arithmetic_intensity(self) -> float:
        return self.flops / self.bytes if self.bytes else math.inf

    def achieved(self, measured_s: float) -> dict[str, float]:
        """Fractions of the peaks a measured time reaches with this prediction's FLOPs and bytes."""
        return {"flops_fraction": self.flops / measured_s / self.peak_flops_per_s,
                "bandwidth_fraction": self.bytes / measured_s / self.bandwidth_bytes_per_s}

    def stage_seconds(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for op in self.ops:
            out[op.stage] = out.get(op.stage, 0.0) + op.seconds
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "hardware": self.hardware, "phase": self.phase, "seq_len": self.seq_len,
                "batch": self.batch, "q_len": self.q_len, "impl": self.impl, "mode": self.mode, "scope": self.scope,
                "dtype": self.dtype, "seconds": self.seconds, "bound": self.bound, "flops": self.flops,
                "bytes": self.bytes, "arithmetic_intensity_flops_per_byte": self.arithmetic_intensity,
                "launch_s": self.launch_s, "calibrated": self.calibrated,
                "peak_flops_per_s": self.peak_flops_per_s, "bandwidth_bytes_per_s": self.bandwidth_bytes_per_s,
                "stage_seconds": self.stage_seconds(), "ops": [o.to_dict() for o in self.ops]}


# ------------------------------------------------------------------------------------

class _Rates:
    """Peaks, bandwidths and latency for one prediction (catalogue or calibrated)."""

    def __init__(self, hw: HardwareSpec, calibration: Calibration | None, dtype: str, weight_dtype: str,
                 launch_latency_s: float | None):
        self.hw = hw
        self.cal = calibration
        self.dtype, self.weight_dtype = dtype, weight_dtype
        if calibration is not None:
            self.copy_bw = calibration.copy_bytes_per_s
            self.gemv_bw = calibration.gemv_bytes_per_s.get(dtype, self.copy_bw)
            latency = calibration.launch_latency_s
        else:
            self.copy_bw = self.gemv_bw = hw.memory_bandwidth_bytes_per_s
            latency = hw.launch_latency_s if hw.launch_latency_s is not None else DEFAULT_LAUNCH_S[hw.kind]
        self.latency = launch_latency_s if launch_latency_s is not None else latency

    def peak(self, dtype: str) -> float:
        if self.cal is not None:
            measured = lookup_peak(self.cal.matmul_flops_per_s, dtype)
            if measured is not None:
                return measured
        return self.hw.peak(dtype)

    def matmul_peak(self, has_weight: bool) -> float:
        # GEMMs on fp8 weights run at the fp8 rate (DeepSeek-V3 style); the attention core in the compute dtype
        if has_weight and canonical_dtype(self.weight_dtype).startswith("fp8"):
            return self.peak("fp8")
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
    return OpTime(name=name, stage=stage, kind="matmul", flops=flops, bytes=nbytes,
                  compute_s=flops / (rates.matmul_peak(has_weight) * eff), memory_s=nbytes / rates.gemv_bw,
                  launch_s=launches * rates.latency, efficiency=eff, measured_floor_s=floor)


def _attention_ops(model: ModelConfig, rates: _Rates, phase, seq_len, batch, q_len, impl, causal, mode,
                   kv_dtype, layers: int) -> tuple[list[OpTime], int]:
    """The attention kernels of ``layers`` layers, and the new tokens per sequence of the step."""
    cost = attention_cost(model, phase, seq_len, batch, q_len, impl, causal, kv_dtype, rates.weight_dtype,
                          rates.dtype)
    out: list[OpTime] = []
    if mode == "unfused":
        key = _layer_key(model, cost.impl)
        rope = not (not model.is_mla and model.family == "gpt2")
        total = LAUNCHES[(key, rope, cost.q_len == 1)]
        matmuls = [o for o in cost.ops if o.kind == "matmul"]
        others = [o for o in cost.ops if o.kind != "matmul"]
        extra = (total - len(matmuls)) / max(len(others), 1)
        for op in cost.ops:
            if op.kind == "matmul":
                t = _matmul_time(rates, op.name, op.stage, op.flops, op.bytes, op.shape, op.weight_bytes > 0, 1)
            else:
                t = OpTime(name=op.name, stage=op.stage, kind=op.kind, flops=op.flops, bytes=op.bytes,
                           compute_s=0.0, memory_s=op.bytes / rates.copy_bw, launch_s=extra * rates.latency)
            out.append(t)
    else:
        ops = {o.name: o for o in cost.ops}
        cache_writes = sum(o.cache_bytes_written for o in cost.ops)
        latent = model.is_mla and cost.impl in ("absorbed", "absorbed_merged")
        first_kv = True
        for op in cost.ops:
            if op.kind != "matmul" or op.name in ("scores", "pv"):
                continue
            nbytes = op.bytes
            if op.stage == "kv_proj" and first_kv:
                nbytes += cache_writes          # the new cache rows, written once
                first_kv = False
            out.append(_matmul_time(rates, op.name, op.stage, op.flops, nbytes, op.shape, op.weight_bytes > 0, 1))
        scores, pv, softmax = ops["scores"], ops["pv"], ops["softmax"]
        act_read = (scores.bytes_read - scores.cache_bytes_read) + (pv.bytes_read - pv.cache_bytes_read
                                                                     - softmax.bytes_written)
        cache_read = (max(scores.cache_bytes_read, pv.cache_bytes_read) if latent
                      else scores.cache_bytes_read + pv.cache_bytes_read)
        core_bytes = act_read + cache_read + pv.bytes_written
        shape = scores.shape
        out.append(_matmul_time(rates, "attention", "core", scores.flops + pv.flops, core_bytes, shape, False, 1))
    if layers != 1:
        out = [_scale(o, layers) for o in out]
    return out, cost.q_len


def _scale(op: OpTime, n: int) -> OpTime:
    return OpTime(name=op.name, stage=op.stage, kind=op.kind, flops=op.flops * n, bytes=op.bytes * n,
                  compute_s=op.compute_s * n, memory_s=op.memory_s * n, launch_s=op.launch_s * n,
                  efficiency=op.efficiency, measured_floor_s=op.measured_floor_s * n)


def ffn_ops(model: ModelConfig, rates: _Rates, tokens: int, mode: str) -> list[OpTime]:
    """FFN / MoE and the output head of one forward step over ``tokens`` tokens, all layers.

    MoE weights are read once per step for every expert the batch touches; with uniform
    routing a batch of T tokens touches ``E (1 - (1 - k/E)^T)`` experts in expectation.
    """
    m = model
    w = dtype_bits(rates.weight_dtype) / 8
    a = dtype_bits(rates.dtype) / 8
    d = m.hidden_size
    out = []
    gated = m.family not in ("gpt2", "falcon")
    mats = 3 if gated else 2

    def gemm(name, flops, weights, act_in, act_out, count=1, shape=None):
        nbytes = int(weights * w + (act_in + act_out) * a)
        t = _matmul_time(rates, name, "ffn", int(flops), nbytes, shape, True, 1)
        return _scale(t, count) if count != 1 else t

    dense_layers = sum(not m.is_moe_layer(i) for i in range(m.num_hidden_layers))
    if dense_layers:
        width = m.intermediate_size
        out.append(gemm("dense_ffn", 2 * tokens * mats * d * width, mats * d * width, tokens * d * 2,
                        tokens * d, dense_layers, (1, tokens, width, d)))
    moe_layers = m.num_hidden_layers - dense_layers
    if moe_layers:
        E, k, width = m.n_routed_experts, m.num_experts_per_tok, m.moe_intermediate_size
        touched = E * (1 - (1 - k / E) ** tokens)
        expert = mats * d * width
        out.append(gemm("router", 2 * tokens * d * E, d * E, tokens * d, tokens * E, moe_layers, (1, tokens, E, d)))
        out.append(gemm("routed_experts", 2 * tokens * k * expert, touched * expert, tokens * k * d * 2,
                        tokens * k * d, moe_layers, (int(touched), max(1, tokens * k // max(int(touched), 1)), width, d)))
        if m.n_shared_experts:
            shared = m.n_shared_experts * expert
            out.append(gemm("shared_experts", 2 * tokens * shared, shared, tokens * d * 2, tokens * d, moe_layers,
                            (1, tokens, m.n_shared_experts * width, d)))
    return out


def _head_ops(model: ModelConfig, rates: _Rates, sequences: int) -> list[OpTime]:
    """The output head on one token per sequence (the token that is sampled)."""
    w = dtype_bits(rates.weight_dtype) / 8
    a = dtype_bits(rates.dtype) / 8
    V, d = model.vocab_size, model.hidden_size
    nbytes = int(V * d * w + sequences * (d + V) * a)
    return [_matmul_time(rates, "lm_head", "head", 2 * sequences * d * V, nbytes, (1, sequences, V, d), True, 1)]


def predict_time(model: "ModelConfig | str", hardware: "HardwareSpec | str", phase: str, seq_len: int,
                 batch: int = 1, impl: str | None = None, mode: str = "fused", dtype: str = "bf16",
                 scope: str = "attention_layer", *, q_len: int | None = None, causal: bool = False,
                 kv_dtype: str | None = None, weight_dtype: str | None = None,
                 calibration: "Calibration | str | Path | None" = None,
                 launch_latency_s: float | None = None) -> Prediction:
    """Roofline time of one attention layer (``scope="attention_layer"``, what the microbenchmark
    times) or of a whole forward step (``scope="model"``: every layer's attention and FFN/MoE,
    weights read once, plus the output head on one token per sequence).

    ``dtype`` is the compute and activation dtype; ``kv_dtype`` and ``weight_dtype`` default to it.
    ``calibration`` (a :class:`Calibration` or a measurement ``.json``) replaces the datasheet
    peaks with ceilings measured on the device.

    Examples
    --------
    >>> p = predict_time("deepseek-v3", "H200", "decode", 32768, batch=64)
    >>> p.bound, round(p.seconds * 1e6)
    ('compute', 709)
    """
    m = _model(model)
    hw = load_hardware(hardware)
    if mode not in MODES:
        raise InvalidArgumentError("mode", f"unknown mode {mode!r}; use fused or unfused")
    if scope not in SCOPES:
        raise InvalidArgumentError("scope", f"unknown scope {scope!r}; use attention_layer or model")
    dtype = canonical_dtype(dtype)
    weight_dtype = canonical_dtype(weight_dtype) if weight_dtype else dtype
    if calibration is not None and not isinstance(calibration, Calibration):
        calibration = Calibration.from_measurements(calibration)
    rates = _Rates(hw, calibration, dtype, weight_dtype, launch_latency_s)
    kv = kv_dtype or dtype
    resolved = resolve_impl(m, impl, phase)
    one = m.with_changes(num_hidden_layers=1)
    layers = 1 if scope == "attention_layer" else m.num_hidden_layers
    ops, q = _attention_ops(one, rates, phase, seq_len, batch, q_len, impl, causal, mode, kv, layers)
    if scope == "model":
        ops += ffn_ops(m, rates, batch * q, mode)
        ops += _head_ops(m, rates, batch)
    return Prediction(model=m.name, hardware=hw.name, phase=phase, seq_len=seq_len, batch=batch, q_len=q,
                      impl=resolved, mode=mode, scope=scope, dtype=dtype, ops=tuple(ops),
                      peak_flops_per_s=rates.peak(dtype), bandwidth_bytes_per_s=rates.copy_bw,
                      calibrated=calibration is not None)
