"""The plain roofline bound as a class of the time model: ``max(flops / peak, bytes /
bandwidth)`` per kernel, with no fitted term.

Two forms:

- :func:`ideal_seconds` / :func:`ideal_batch_seconds`: the bound with the datasheet figures of
  the kernel's own dtype and no fixed cost (a collective: its link time at the full link
  bandwidth, no latency), the ideal no kernel beats, reported beside every prediction as
  ``roofline_s``;
- :func:`roofline_terms`: what ``profile="roofline"`` predicts a step with (its
  :class:`RooflineRates`): GEMMs, MoE blocks and the attention core at the matmul peak of their
  weights' dtype, scaled by the share of the SMs their 128 x 128 output tiles keep busy (a
  single GEMM may split K, at most once per 512 of K; the fused attention core splits its keys
  across SMs, so it is not penalised); their operands at the matrix-vector bandwidth,
  element-wise kernels at the copy bandwidth; a launch latency per kernel. With a
  microbenchmark's :class:`Calibration` the measured ceilings replace the datasheet figures and
  the measured time of ``[M x n] @ [n x n]`` GEMMs sets a floor under every matmul (scaled to
  its size), because a few-row product runs far below both roofs on real libraries. The tile
  correction has not been checked against GPU measurements.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mlacalc.hardware.catalogue import HardwareSpec, lookup_peak, read_sidecar
from mlacalc.timemodel.device import DeviceFigures
from mlacalc.timemodel.terms import kernel_terms
from mlacalc.words.dtypes import canonical_dtype
from mlacalc.words.kernels import COMM_KINDS, Kernel, KernelBatch

__all__ = [
    "DEFAULT_LAUNCH_S",
    "PARAMS_IDEAL",
    "ROOFLINE",
    "TILE",
    "Calibration",
    "RooflineRates",
    "ideal_batch_seconds",
    "ideal_seconds",
    "kernel_ridge",
    "roofline_terms",
]

#: ``profile=ROOFLINE`` predicts with the plain roofline bound instead of the kernel time model
ROOFLINE = "roofline"
#: the output tile whose count over the SMs scales a product's compute peak
TILE = 128
#: latency assumed per kernel launch when no measurement calibrates it
DEFAULT_LAUNCH_S = {"gpu": 5e-6, "cpu": 2e-6}

#: The ideal collective: the whole link, no latency, no synchronisation, no fixed cost, and no
#: limit from the SMs a kernel runs on (DeepEP normal mode uses a set number of them).
PARAMS_IDEAL = {
    "link_eff": 1.0,
    "latency_steps": 0.0,
    "proto_s": 0.0,
    "fixed_s": 0.0,
    "sm_bandwidth": 1e9,
}


def ideal_seconds(
    flops: float | np.ndarray, nbytes: float | np.ndarray, fig: DeviceFigures, dtype: str
) -> np.ndarray:
    """``max(flops / peak, bytes / bandwidth)`` with the datasheet peak of ``dtype`` and the
    HBM bandwidth: the ideal of one call."""
    return np.maximum(
        np.asarray(flops, dtype=np.float64) / fig.peak(dtype),
        np.asarray(nbytes, dtype=np.float64) / fig.hbm_bytes_per_s,
    )


def kernel_ridge(fig: DeviceFigures, kind: str, dtype: str) -> float:
    """FLOPs per byte at which ``fig``'s device turns compute-bound for a ``kind`` kernel of
    ``dtype`` (as the device runs it): the datasheet peak of that dtype over HBM bandwidth;
    0 for a collective (no FLOPs to weigh)."""
    if kind in COMM_KINDS:
        return 0.0
    return fig.peak(dtype) / fig.hbm_bytes_per_s


def ideal_batch_seconds(batch: KernelBatch, fig: DeviceFigures) -> np.ndarray:
    """The ideal of each row of ``batch``, all its calls: a collective's link time at the full
    link bandwidth and no latency (:data:`PARAMS_IDEAL`), any other kernel's
    :func:`ideal_seconds` at its dtype."""
    if batch.kind in COMM_KINDS:
        return kernel_terms(batch, fig, dict(PARAMS_IDEAL))["seconds"]
    return ideal_seconds(batch.flops, batch.bytes, fig, batch.dtype) * batch.calls


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
    #: bytes per second at which a fresh output's pages are first touched (a CPU run measures
    #: it; None: the eager model's calibrated value, mlacalc.timemodel.eager_time)
    first_touch_bytes_per_s: float | None = None
    #: the sidecar's ``device.name`` and ``device.kind`` ("cuda" or "cpu"; "" for a
    #: Calibration built by hand): predict_time refuses the ceilings for another device
    device_name: str = ""
    device_kind: str = ""

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
            first_touch_bytes_per_s=(
                float(c["first_touch_bytes_per_s"]) if c.get("first_touch_bytes_per_s") else None
            ),
            device_name=str((meta.get("device") or {}).get("name", "")),
            device_kind=str((meta.get("device") or {}).get("kind", "")),
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


class RooflineRates:
    """The figures ``profile="roofline"`` predicts one step with: peaks and bandwidths (the
    catalogue's, or a :class:`Calibration`'s measured ceilings), the launch latency, and the
    dtypes the step computes and stores its weights in."""

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
        """The rate of a product: on fp8 weights the fp8 rate (DeepSeek-V3 style; a device
        without fp8 at its bf16 rate), on fp4 weights the fp4 rate where the device has fp4
        tensor cores (the class :func:`mlacalc.words.dtypes.weight_gemm_class` names, as
        the kernel model's); a product without weights (the attention core) in the compute
        dtype."""
        if has_weight:
            w = canonical_dtype(self.weight_dtype)
            if w.startswith("fp8"):
                return self.peak("fp8")
            if w == "fp4" and "fp4" in self.hw.peak_flops_per_s:
                return self.peak("fp4")
        return self.peak(self.dtype)

    def weighted(self, kind: str, dtype: str) -> bool:
        """Whether a serving kernel runs at its weights' rate: a GEMM or MoE block does; with
        the weights as the checkpoint stores them, one of kept bf16 weights or of a weight-only
        class (4-bit values dequantized to bf16) runs at the compute dtype's."""
        return kind in ("gemm", "moe") and not (self.stored and not dtype.startswith("fp8"))


def _products(k: Kernel) -> tuple[float, float, float, float] | None:
    """(G, M, N, K) of a kernel's products: a GEMM's; a MoE block's over its active experts and
    the busiest expert's rows; an attention core's score product (latent MLA decode heads share
    one cached row: one product per sequence). None for other kinds."""
    f = k.shape
    if k.kind == "gemm":
        return (f["groups"], f["m"], f["n"], f["k"])
    if k.kind == "moe":
        return (f["active_experts"], f["max_tokens_per_expert"], f["inter"], f["hidden"])
    if k.kind not in ("attention_prefill", "attention_decode", "mla_prefill", "mla_decode"):
        return None
    keys = f["kv_len"] if not f["window"] else min(f["kv_len"], f["window"])
    if k.kind == "mla_decode":
        return (f["batch"], f["q_len"] * f["n_heads"], keys, f["head_dim_qk"])
    group = round(f["n_heads"] / f["n_kv"] * f["q_len"])
    return (f["batch"] * f["n_kv"], group, keys, f["head_dim_qk"])


def _tile_efficiency(products: tuple | None, rates: RooflineRates) -> float:
    """Share of the SMs a (batched) product can keep busy: its 128 x 128 output tiles, times
    the K splits a single GEMM can use (split-K, at most one per 512 of K); batched products
    (G > 1) are not split. 1 off a GPU, or without products."""
    hw = rates.hw
    if products is None or hw.kind != "gpu" or not hw.sm_count:
        return 1.0
    g, m, n, k = products
    sms = hw.sm_count
    tiles = g * math.ceil(m / TILE) * math.ceil(n / TILE)
    if g == 1 and tiles < sms:
        tiles *= min(math.ceil(sms / tiles), max(1, k // 512))
    return min(1.0, tiles / sms)


def roofline_terms(
    kernels: Sequence[Kernel],
    rates: RooflineRates,
    *,
    weighted: Sequence[bool] | None = None,
    launches: Sequence[float] | None = None,
) -> dict[str, np.ndarray]:
    """The plain roofline of one call of each kernel, in one evaluation (a single formula
    covers every kind): ``compute_s`` (FLOPs at the matmul peak, scaled by ``efficiency``, the
    share of the SMs the products keep busy), ``memory_s`` (bytes at the matrix-vector
    bandwidth; an element-wise kernel: at the copy bandwidth, and no compute), ``fixed_s``
    (``launches`` launch latencies, one a kernel by default), ``floor_s`` (the measured GEMM
    floor), ``extra_s`` (none) and ``seconds``, ``max(compute, memory, floor) + fixed``.
    ``weighted``: whether each kernel runs at its weights' rate (default:
    :meth:`RooflineRates.weighted` of its kind and dtype)."""
    n = len(kernels)
    flops = np.array([k.flops for k in kernels], dtype=np.float64)
    nbytes = np.array([k.bytes for k in kernels], dtype=np.float64)
    streaming = np.array([k.kind == "elementwise" for k in kernels], dtype=bool)
    if weighted is None:
        weighted = [rates.weighted(k.kind, k.dtype) for k in kernels]
    peaks: dict[bool, float] = {}  # each rate only where a kernel runs at it
    peak, efficiency, floor = np.ones(n), np.ones(n), np.zeros(n)
    for i, k in enumerate(kernels):
        if streaming[i]:
            continue
        w = bool(weighted[i])
        if w not in peaks:
            peaks[w] = rates.matmul_peak(w)
        peak[i] = peaks[w]
        products = _products(k)
        efficiency[i] = _tile_efficiency(products, rates)
        if rates.cal is not None and products is not None:
            floor[i] = rates.cal.gemm_seconds(rates.dtype, *products) or 0.0
    compute = np.where(streaming, 0.0, flops / (peak * efficiency))
    memory = nbytes / np.where(streaming, rates.copy_bw, rates.gemv_bw)
    count = np.ones(n) if launches is None else np.asarray(launches, dtype=np.float64)
    fixed = count * rates.latency
    return {
        "compute_s": compute,
        "memory_s": memory,
        "fixed_s": fixed,
        "extra_s": np.zeros(n),
        "floor_s": floor,
        "efficiency": efficiency,
        "seconds": np.maximum(np.maximum(compute, memory), floor) + fixed,
    }
