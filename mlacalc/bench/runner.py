"""The companion microbenchmark: time every attention variant, on CUDA when there is one.

For each point (model dimensions, implementation, phase, batch, seq_len) one attention
layer of :mod:`mlacalc.bench.torch_layers` runs on random inputs and a preallocated cache of
the right length. Before any timing a numerics gate checks, per model, that the MLA
implementations agree on shared weights and that step-by-step decode equals prefill;
an implementation that fails is recorded and not timed. Ceilings (a large matmul per
dtype, a large copy, the latency of a trivial op) are measured in the same run, for the
roofline's calibration. Results go to a CSV (one row per point) and a JSON sidecar
(device, versions, settings, ceilings, numerics); see ``docs/microbenchmark.md``.
"""

from __future__ import annotations

import csv
import json
import math
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from mlacalc.bench.torch_layers import layer_for_model
from mlacalc.cost.engine import attention_cost, kv_cache_bytes
from mlacalc.cost.params import param_counts
from mlacalc.models.loading import ModelConfig, load_model
from mlacalc.words.vocab import BENCH_SCHEMA, MLA_IMPLEMENTATIONS, STANDARD_IMPL

__all__ = [
    "CSV_FIELDS",
    "PRESETS",
    "SCHEMA",
    "BenchPoint",
    "Budget",
    "build_layer",
    "custom_points",
    "device_info",
    "measure_ceilings",
    "numerics_gate",
    "point_inputs",
    "preset_points",
    "run_benchmark",
    "synchronize",
    "time_fn",
    "time_graph",
    "timing_stats",
    "trivial_op_latency",
]

SCHEMA = BENCH_SCHEMA
TORCH_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
#: ‖out - ref‖ / ‖ref‖ allowed against a float64 reference, per run dtype
TOLERANCE = {"fp32": 1e-4, "bf16": 3e-2, "fp16": 1e-2}
MLA_IMPLS = MLA_IMPLEMENTATIONS

CSV_FIELDS = (
    "model",
    "variant",
    "impl",
    "phase",
    "batch",
    "seq_len",
    "q_len",
    "hidden_size",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "kv_lora_rank",
    "q_lora_rank",
    "qk_nope_head_dim",
    "qk_rope_head_dim",
    "v_head_dim",
    "dtype",
    "status",
    "median_s",
    "q1_s",
    "q3_s",
    "iqr_s",
    "min_s",
    "repeats",
    "warmup",
    "input_sets",
    "flops",
    "note",
    # the trivial-op latency measured just before the point (the host's speed at that moment;
    # sets measured before this column lack it)
    "launch_latency_s",
)


@dataclass(frozen=True)
class BenchPoint:
    model: str
    impl: str  # "standard" for MHA/GQA/MQA
    phase: str  # "prefill" or "decode"
    batch: int
    seq_len: int

    @property
    def q_len(self) -> int:
        return self.seq_len if self.phase == "prefill" else 1


def _grid(
    model: str, impls: Iterable[str], phase: str, batches: Iterable[int], seqs: Iterable[int]
):
    return [BenchPoint(model, impl, phase, b, s) for impl in impls for b in batches for s in seqs]


def _model_grid(model: str, decode: tuple, prefill: tuple) -> list[BenchPoint]:
    m = load_model(model)
    impls = MLA_IMPLS if m.is_mla else (STANDARD_IMPL,)
    return _grid(model, impls, "decode", *decode) + _grid(model, impls, "prefill", *prefill)


def custom_points(
    models: Iterable[ModelConfig],
    impls: Iterable[str],
    phases: Iterable[str],
    batches: Iterable[int],
    seqs: Iterable[int],
) -> list[BenchPoint]:
    """A custom sweep: every model x implementation x phase x batch x seq_len.

    Of ``impls``, each model keeps those it can run (MLA implementations for MLA models,
    ``standard`` for the others); none left (or none given) means all of its own.
    """
    points = []
    for m in models:
        own = MLA_IMPLS if m.is_mla else (STANDARD_IMPL,)
        chosen = [i for i in impls if i in own] or list(own)
        for phase in phases:
            points += _grid(m.name, chosen, phase, list(batches), list(seqs))
    return points


def _quick():
    pts = _model_grid("deepseek-v2-lite", ((1, 4), (512,)), ((1,), (128,)))
    for name in ("gpt2", "qwen2.5-7b", "gemma-2b"):
        pts += _model_grid(name, ((1, 4), (512,)), ((1,), (128,)))
    return pts


def _cpu():
    pts = _model_grid("deepseek-v2-lite", ((1, 8), (512, 2048, 8192)), ((1,), (128, 512)))
    pts += _model_grid("deepseek-v2", ((1, 4), (1024, 4096)), ((1,), (128,)))
    pts += _model_grid("llama-3-8b", ((1, 8), (512, 2048, 8192)), ((1,), (128, 512)))
    pts += _model_grid("llama-2-7b", ((1, 8), (512, 2048)), ((1,), (128, 512)))
    pts += _model_grid("gemma-2b", ((1, 8), (512, 2048, 8192)), ((1,), (128, 512)))
    return pts


def _full():
    decode_seqs = (128, 1024, 4096, 16384, 65536, 131072)
    prefill_seqs = (128, 1024, 4096, 16384)
    batches = (1, 8, 32, 128)
    pts = []
    for name in ("deepseek-v2", "deepseek-v3", "llama-3-70b", "llama-2-7b"):
        pts += _model_grid(name, (batches, decode_seqs), ((1, 8), prefill_seqs))
    return pts


#: name -> (points, dtype, description)
PRESETS: dict[str, tuple[Callable[[], list[BenchPoint]], str, str]] = {
    "quick": (
        _quick,
        "fp32",
        "a minute on a CPU: every variant and MLA implementation at small sizes (CI)",
    ),
    "cpu": (
        _cpu,
        "fp32",
        "the committed CPU set: V2-Lite and V2 attention, a GQA, an MHA and an MQA model",
    ),
    "full": (
        _full,
        "bf16",
        "DeepSeek-V2/V3, Llama-3-70B (GQA), Llama-2-7B (MHA); batch 1-128, seq_len to 128K",
    ),
}


def preset_points(name: str) -> list[BenchPoint]:
    return PRESETS[name][0]()


# ------------------------------------------------------------------------------------
# device, timing and ceilings


def device_info(device: torch.device, threads: int) -> dict:
    info = {
        "kind": device.type,
        "torch_version": torch.__version__,
        "threads": threads,
        "python": platform.python_version(),
        "platform": platform.platform(),
    }
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        info.update(
            name=torch.cuda.get_device_name(device),
            cuda_version=torch.version.cuda,
            sm_count=props.multi_processor_count,
            memory_bytes=props.total_memory,
        )
    else:
        name = platform.processor() or platform.machine()
        try:
            for line in Path("/proc/cpuinfo").read_text().splitlines():
                if line.startswith("model name"):
                    name = line.split(":", 1)[1].strip()
                    break
        except OSError:
            pass
        info.update(name=f"{name} ({os.cpu_count()} logical CPUs)", cuda_version=None)
    return info


def synchronize(device: torch.device):
    """Wait for the device's queued work (a no-op on the CPU)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_fn(
    fn: Callable[[int], None],
    device: torch.device,
    *,
    warmup: int,
    repeats: int,
    max_seconds: float,
) -> list[float]:
    """Seconds per call of ``fn(i)`` (``i`` picks the input set): warm-up, then up to
    ``repeats`` timed calls (at least 3) within ``max_seconds``."""
    for i in range(warmup):
        fn(i)
    synchronize(device)
    times: list[float] = []
    budget_start = time.perf_counter()
    for i in range(repeats):
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn(i)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
        else:
            t0 = time.perf_counter()
            fn(i)
            times.append(time.perf_counter() - t0)
        if i >= 2 and time.perf_counter() - budget_start > max_seconds:
            break
    return times


def time_graph(
    fn: Callable[[int], None],
    device: torch.device,
    *,
    warmup: int,
    repeats: int,
    max_seconds: float,
    replay_seconds: float = 1e-3,
    max_calls: int = 200,
) -> tuple[list[float], int]:
    """Seconds per call of ``fn(0)`` replayed from a CUDA graph, as published kernel tables are
    taken: the host's dispatch is out of the time. ``calls`` calls are captured in one graph
    (enough for a replay of about ``replay_seconds``, from one eager call's time: at most
    ``max_calls``, at least one), then up to ``repeats`` replays (at least 3) within
    ``max_seconds`` are each timed by CUDA events and divided by ``calls``. Returns the
    per-call times and ``calls``."""
    side = torch.cuda.Stream(device)
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side):  # warm-up off the default stream, as graph capture asks
        for _ in range(max(warmup, 1)):
            fn(0)
    torch.cuda.current_stream(device).wait_stream(side)
    eager = time_fn(fn, device, warmup=0, repeats=3, max_seconds=max_seconds)
    calls = max(1, min(max_calls, round(replay_seconds / max(min(eager), 1e-7))))
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn(0)
    graph.replay()
    synchronize(device)
    # each replay between two events, as time_fn times a call
    replays = time_fn(
        lambda i: graph.replay(), device, warmup=0, repeats=repeats, max_seconds=max_seconds
    )
    return [t / calls for t in replays], calls


def timing_stats(times: list[float]) -> dict:
    """Median, quartiles and spread of a list of timings (seconds)."""
    times = sorted(times)
    if len(times) >= 4:
        q1, _, q3 = statistics.quantiles(times, n=4, method="inclusive")
    else:
        q1, q3 = times[0], times[-1]
    return {
        "median_s": statistics.median(times),
        "q1_s": q1,
        "q3_s": q3,
        "iqr_s": q3 - q1,
        "min_s": times[0],
        "repeats": len(times),
    }


#: the longest one call of a ceiling's product should take (seconds): each ceiling's size is
#: picked from the device's own rate so that a slow device (a CPU's bf16 without bf16
#: instructions: about 1.2 GFLOP/s a thread) does not wait minutes for a figure; a 2-core Zen 3's
#: fp32 2048^2 product (0.2 s, 42.6 GFLOP/s a thread against 37.0 at 1024) is still reached
CEILING_CALL_SECONDS = 0.25
#: the square matmul's side: its largest (a fast device's, which these sizes always reach) and
#: the floor kept however slow the device (a product still far beyond the caches' tiles)
MATMUL_N = {"cuda": 8192, "cpu": 2048}
MATMUL_N_FLOOR = 512
#: a call at least this long is warmed up once, not twice (the first call's setup is paid once)
LONG_CALL_SECONDS = 0.05


def sized_matmul(
    device: torch.device,
    make: Callable[[int], tuple[torch.Tensor, torch.Tensor]],
    *,
    largest: int,
    floor: int = MATMUL_N_FLOOR,
    call_seconds: float = CEILING_CALL_SECONDS,
    start: int = 256,
) -> tuple[int, float]:
    """The side ``n`` of a square matmul sized to the device's own rate, and one call's seconds
    at it: products of side ``start``, then doubled, each called twice (the second timed),
    while the next doubling's call (8x the work) is estimated within ``call_seconds`` and
    ``largest`` is not reached; never below ``floor`` (also when a call is long). The calls
    at the chosen size are its warm-up."""
    n = start
    while True:
        a, b = make(n)
        torch.matmul(a, b)
        synchronize(device)
        t0 = time.perf_counter()
        torch.matmul(a, b)
        synchronize(device)
        seconds = time.perf_counter() - t0
        if n >= largest or (n >= floor and 8 * seconds > call_seconds):
            return n, seconds
        n = min(2 * n, largest)


def _ceiling_warmup(call_seconds: float) -> int:
    """Warm-up calls before a ceiling's timed calls: two, one when a call is long."""
    return 1 if call_seconds >= LONG_CALL_SECONDS else 2


def measure_ceilings(
    device: torch.device, dtypes: Iterable[str], *, call_seconds: float = CEILING_CALL_SECONDS
) -> dict:
    """A large matmul per dtype (FLOP/s), a large matrix-vector product per dtype (bytes of the
    matrix per second), a sweep of [M x n] @ [n x n] GEMMs per dtype, a large copy (bytes/s,
    read + write), on a CPU the first touch of a fresh output (bytes/s) and a trivial op's
    latency (s).

    Each dtype's products are sized to its own rate (:func:`sized_matmul`): the square matmul
    grows from 256 a side until one call would pass ``call_seconds`` (at most 8192 on CUDA,
    2048 on a CPU; at least 512), and the GEMM sweep stops at the M whose call, at that rate,
    would pass it (its first M always kept; beyond its last M the reader extrapolates in
    proportion to M). The sizes used are recorded (``matmul_n_by_dtype``; ``matmul_n`` the
    largest, as sets measured before it had one number for every dtype)."""
    gen = torch.Generator(device="cpu").manual_seed(7)
    out: dict = {"matmul_flops_per_s": {}, "matmul_n": None, "matmul_n_by_dtype": {}}
    out["ceiling_call_seconds"] = call_seconds
    largest = MATMUL_N["cuda" if device.type == "cuda" else "cpu"]
    for dt in dtypes:

        def square(side, dt=dt):
            return tuple(
                torch.randn(side, side, generator=gen).to(device, TORCH_DTYPES[dt])
                for _ in range(2)
            )

        n, probe = sized_matmul(device, square, largest=largest, call_seconds=call_seconds)
        sets = [square(n) for _ in range(2)]
        t = timing_stats(
            time_fn(
                lambda i, sets=sets: torch.matmul(*sets[i % 2]),
                device,
                warmup=_ceiling_warmup(probe) - 1,  # the probe's calls warmed this size up
                repeats=10,
                max_seconds=1,
            )
        )
        out["matmul_flops_per_s"][dt] = 2 * n**3 / t["median_s"]
        out["matmul_n_by_dtype"][dt] = n
        del sets
    out["matmul_n"] = max(out["matmul_n_by_dtype"].values(), default=None)
    # a matrix-vector product streaming a large matrix: the bandwidth a matmul achieves on its
    # operand (decode-time projections are such products)
    out["gemv_bytes_per_s"] = {}
    side = 16384 if device.type == "cuda" else 8192
    for dt in dtypes:
        mat = torch.randn(side, side, generator=gen).to(device, TORCH_DTYPES[dt])
        mats = [mat, -mat]  # two buffers to rotate, one drawing of random numbers
        vec = torch.randn(1, side, generator=gen).to(device, TORCH_DTYPES[dt])
        t = timing_stats(
            time_fn(
                lambda i, vec=vec, mats=mats: torch.nn.functional.linear(vec, mats[i % 2]),
                device,
                warmup=2,
                repeats=10,
                max_seconds=1,
            )
        )
        out["gemv_bytes_per_s"][dt] = mats[0].nbytes / t["median_s"]
    # GEMMs [M x n] @ [n x n] from a matrix-vector product to a square-ish product: the time a
    # projection of M tokens takes, whose skinniness no datasheet peak accounts for; up to the M
    # whose call passes call_seconds at the dtype's measured matmul rate
    out["gemm_m_sweep"] = {}
    n = 8192 if device.type == "cuda" else 4096
    ms = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512] + (
        [1024, 2048, 4096] if device.type == "cuda" else []
    )
    for dt in dtypes:
        rate = out["matmul_flops_per_s"][dt]
        kept = [m for m in ms if m == ms[0] or 2 * m * n * n / rate <= call_seconds]
        mat = torch.randn(n, n, generator=gen).to(device, TORCH_DTYPES[dt])
        mats = [mat, -mat]
        seconds = []
        for m in kept:
            xs = [torch.randn(m, n, generator=gen).to(device, TORCH_DTYPES[dt]) for _ in range(2)]
            t = timing_stats(
                time_fn(
                    lambda i, xs=xs, mats=mats: torch.nn.functional.linear(xs[i % 2], mats[i % 2]),
                    device,
                    warmup=_ceiling_warmup(2 * m * n * n / rate),
                    repeats=10,
                    max_seconds=1,
                )
            )
            seconds.append(t["median_s"])
        out["gemm_m_sweep"][dt] = {"n": n, "m": kept, "seconds": seconds}
    elements = (1 << 29) if device.type == "cuda" else (1 << 26)  # 2 GiB / 256 MiB of fp32
    src = torch.randn(elements, generator=gen).to(device)
    dst = torch.empty_like(src)
    t = timing_stats(time_fn(lambda i: dst.copy_(src), device, warmup=2, repeats=10, max_seconds=1))
    out["copy_bytes"] = 2 * src.nbytes
    out["copy_bytes_per_s"] = 2 * src.nbytes / t["median_s"]
    if device.type == "cpu":
        # the first write of a fresh output big enough to be mapped from the operating system
        # on every allocation (page faults, zeroing), beyond the same write into mapped memory
        fill = timing_stats(
            time_fn(lambda i: dst.fill_(1.0), device, warmup=2, repeats=10, max_seconds=1)
        )
        fresh = timing_stats(
            time_fn(
                lambda i: torch.empty_like(src).fill_(1.0),
                device,
                warmup=2,
                repeats=10,
                max_seconds=1,
            )
        )
        extra = fresh["median_s"] - fill["median_s"]
        if extra > 0:
            out["first_touch_bytes_per_s"] = src.nbytes / extra
    out["launch_latency_s"] = trivial_op_latency(device)
    return out


def trivial_op_latency(device: torch.device, calls: int = 1000, repeats: int = 7) -> float:
    """Seconds per call of a trivial op (an in-place add on 8 elements) called ``calls`` times
    in a row: the host's dispatch of an op, on a GPU its launch, without work (the median of
    ``repeats`` timings)."""
    tiny = torch.ones(8, device=device)

    def many(_):
        for _ in range(calls):
            tiny.add_(1.0)

    t = timing_stats(time_fn(many, device, warmup=1, repeats=repeats, max_seconds=5))
    return t["median_s"] / calls


# ------------------------------------------------------------------------------------
# inputs and the numerics gate


def build_layer(
    model: ModelConfig, impl: str, dtype: torch.dtype, device: torch.device, seed: int = 0
):
    """The reference layer of ``model`` (``impl`` for MLA, ``standard`` otherwise) with random
    weights of order one (biases never zero) from ``seed``, on ``device`` in ``dtype``."""
    torch.manual_seed(seed)
    layer = layer_for_model(model, None if impl == "standard" else impl, dtype=torch.float32)
    with torch.no_grad():
        for name, p in layer.named_parameters():
            if name.endswith("weight") and p.dim() == 2:
                p.normal_(0.0, 1.0 / math.sqrt(p.shape[1]))  # keeps activations of order 1
            elif p.dim() == 1 and "norm" not in name:
                p.normal_(0.0, 0.02)  # biases: never zero
    layer = layer.to(device=device, dtype=dtype)
    if impl == "absorbed_merged":
        layer.merge_weights()
    return layer


def _fill_cache(layer, batch: int, capacity: int, used: int, dtype, device, gen):
    """A preallocated cache of ``capacity`` tokens holding ``used`` of them, filled with N(0, 1).

    On a CPU the values come from ``gen`` (a CPU generator: the committed CPU set's inputs); on
    CUDA they are drawn in place on the device from a device generator seeded from ``gen``, so
    a cache of tens of GiB is neither staged in host memory nor copied over the bus.
    """
    cache = layer.empty_cache(batch, dtype=dtype, device=device, capacity=capacity)
    on_device = None
    if torch.device(device).type == "cuda":
        seed = int(torch.randint(0, 2**62, (1,), generator=gen))
        on_device = torch.Generator(device=device).manual_seed(seed)
    for name in ("k", "v", "latent"):
        t = getattr(cache, name, None)
        if t is not None and t.numel():
            if on_device is not None:
                t.normal_(generator=on_device)
            else:
                t.copy_(torch.randn(t.shape, generator=gen, dtype=torch.float32).to(t.dtype))
    cache.used = used
    return cache


def _rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    out, ref = out.double(), ref.double()
    if not torch.isfinite(out).all():
        return math.inf
    return (torch.linalg.vector_norm(out - ref) / torch.linalg.vector_norm(ref)).item()


def numerics_gate(
    model: ModelConfig, dtype: str, device: torch.device, seq_len: int = 12
) -> list[dict]:
    """Per implementation: error against a float64 naive reference (prefill), decode vs prefill."""
    impls = MLA_IMPLS if model.is_mla else ("standard",)
    torch_dtype = TORCH_DTYPES[dtype]
    gen = torch.Generator(device="cpu").manual_seed(11)
    x = torch.randn(1, seq_len, model.hidden_size, generator=gen)
    ref_layer = build_layer(model, impls[0], torch.float64, torch.device("cpu"))
    with torch.no_grad():
        reference, _ = ref_layer(x.double())
    results = []
    for impl in impls:
        layer = build_layer(model, impl, torch_dtype, device)
        xi = x.to(device, torch_dtype)
        with torch.no_grad():
            prefill, _ = layer(xi)
            cache = layer.empty_cache(1, device=device, capacity=seq_len)
            steps = []
            for t in range(seq_len):
                y, cache = layer(xi[:, t : t + 1], cache, start=t)
                steps.append(y)
        err = _rel_err(prefill.cpu(), reference)
        step_err = _rel_err(torch.cat(steps, 1).cpu(), prefill.cpu())
        tol = TOLERANCE[dtype]
        results.append(
            {
                "model": model.name,
                "impl": impl,
                "dtype": dtype,
                "seq_len": seq_len,
                "rel_err_vs_fp64_naive": err,
                "rel_err_decode_vs_prefill": step_err,
                "tolerance": tol,
                "passed": bool(err <= tol and step_err <= tol),
            }
        )
    return results


# ------------------------------------------------------------------------------------
# the sweep


def _estimate_bytes(model: ModelConfig, point: BenchPoint, dtype_bytes: int) -> int:
    """Weights, cache and the largest op outputs, for a fits-or-skip decision."""
    m1 = model.replaced(num_hidden_layers=1)
    impl = None if point.impl == "standard" else point.impl
    cost = attention_cost(m1, point.phase, point.seq_len, point.batch, impl=impl, act_dtype="fp32")
    largest = sorted((o.bytes_written for o in cost.ops), reverse=True)[:3]
    weights = (
        param_counts(m1).attention_per_layer
        * dtype_bytes
        * (2 if point.impl == "absorbed_merged" else 1)
    )
    cache = kv_cache_bytes(
        m1, point.seq_len, point.batch, "fp32" if dtype_bytes == 4 else "bf16", impl
    )
    return weights + cache + sum(largest) * dtype_bytes // 4


def _available_bytes(device: torch.device) -> int:
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return free
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 8 << 30


def _row(
    model: ModelConfig,
    point: BenchPoint,
    dtype: str,
    status: str,
    stats: dict | None,
    warmup: int,
    input_sets: int,
    note: str = "",
) -> dict:
    impl = None if point.impl == "standard" else point.impl
    flops = attention_cost(
        model.replaced(num_hidden_layers=1), point.phase, point.seq_len, point.batch, impl=impl
    ).flops
    row = {
        "model": model.name,
        "variant": model.variant,
        "impl": point.impl,
        "phase": point.phase,
        "batch": point.batch,
        "seq_len": point.seq_len,
        "q_len": point.q_len,
        "hidden_size": model.hidden_size,
        "num_attention_heads": model.num_attention_heads,
        "num_key_value_heads": None if model.is_mla else model.num_key_value_heads,
        "head_dim": model.head_dim,
        "kv_lora_rank": model.kv_lora_rank,
        "q_lora_rank": model.q_lora_rank,
        "qk_nope_head_dim": model.qk_nope_head_dim,
        "qk_rope_head_dim": model.qk_rope_head_dim,
        "v_head_dim": model.v_head_dim,
        "dtype": dtype,
        "status": status,
        "warmup": warmup,
        "input_sets": input_sets,
        "flops": flops,
        "note": note,
    }
    row.update(
        stats
        or {
            "median_s": None,
            "q1_s": None,
            "q3_s": None,
            "iqr_s": None,
            "min_s": None,
            "repeats": 0,
            "launch_latency_s": None,
        }
    )
    return {k: row.get(k) for k in CSV_FIELDS}


def point_inputs(
    layer,
    model: ModelConfig,
    point: BenchPoint,
    dtype: torch.dtype,
    device: torch.device,
    sets: int = 1,
) -> list[tuple[torch.Tensor, Any]]:
    """``sets`` input sets of a point for ``layer``: the new tokens' hidden states and a cache
    of ``seq_len`` tokens holding the ``seq_len - q`` before them, from the point's own seed."""
    gen = torch.Generator(device="cpu").manual_seed(point.batch * 1_000_003 + point.seq_len)
    q = point.q_len
    used = point.seq_len - q
    out = []
    for _ in range(sets):
        x = torch.randn(point.batch, q, model.hidden_size, generator=gen).to(device, dtype)
        out.append((x, _fill_cache(layer, point.batch, point.seq_len, used, dtype, device, gen)))
    return out


def time_point(
    model: ModelConfig,
    point: BenchPoint,
    dtype: str,
    device: torch.device,
    *,
    warmup: int,
    repeats: int,
    max_seconds: float,
    cache_bytes_target: int,
    layer=None,
) -> tuple[dict, int]:
    """Time one point (``layer``: the model's layer of this implementation and dtype, already
    on the device; built here when not given)."""
    torch_dtype = TORCH_DTYPES[dtype]
    if layer is None:
        layer = build_layer(model, point.impl, torch_dtype, device)
    used = point.seq_len - point.q_len
    one_set = _estimate_bytes(model, point, torch_dtype.itemsize)
    sets = max(1, min(4, math.ceil(cache_bytes_target / max(one_set, 1))))
    inputs = point_inputs(layer, model, point, torch_dtype, device, sets)

    def run(i):
        x, cache = inputs[i % sets]
        with torch.no_grad():
            layer(x, cache, start=used)

    # the host's speed now (it drifts over a run on a shared machine): the eager model's
    # dispatch of this point's ops is checked against it
    latency = trivial_op_latency(device, calls=200, repeats=3)
    times = time_fn(run, device, warmup=warmup, repeats=repeats, max_seconds=max_seconds)
    return {**timing_stats(times), "launch_latency_s": latency}, sets


def run_benchmark(
    points: list[BenchPoint],
    *,
    dtype: str = "fp32",
    device: str = "auto",
    threads: int | None = None,
    warmup: int = 2,
    repeats: int = 20,
    max_seconds: float = 3.0,
    out_dir: str | Path = ".",
    name: str | None = None,
    preset: str = "custom",
    progress: bool = True,
    max_minutes: float | None = None,
    log: Callable[[str], None] = lambda s: print(s, file=sys.stderr),
) -> tuple[Path, Path]:
    """Run the points, write ``<name>.csv`` and ``<name>.json`` into ``out_dir``; return both.

    ``max_minutes`` bounds the sweep (ceilings and the numerics gate included): the points then
    run cheapest first (by their estimated bytes), and those not reached in time are ``skipped``
    rows saying so. The CSV is written as the sweep goes (in the order points finish), so a run
    cut short leaves its rows; at the end it is rewritten in the points' order.
    """
    if dtype not in TORCH_DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(TORCH_DTYPES)}")
    budget = Budget.start(max_minutes)
    dev = _pick_device(device, threads, log)
    threads_used = torch.get_num_threads()
    info = device_info(dev, threads_used)
    log(f"mlacalc bench: {len(points)} points on {info['name']} ({dtype}, {threads_used} threads)")
    ceilings = _measure_and_log_ceilings(dev, dtype, log)
    models = {p.model: load_model(p.model) for p in points}
    numerics, failed = _gate_models(models.values(), dtype, dev, log)
    timing = _Timing(
        warmup=warmup,
        repeats=repeats,
        max_seconds=max_seconds,
        # > L2 / LLC: rotate input sets
        cache_bytes_target=(100 << 20) if dev.type == "cuda" else (64 << 20),
    )
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    name = name or _default_name(info, dev, preset, dtype)
    csv_path, json_path = out_dir / f"{name}.csv", out_dir / f"{name}.json"
    rows = _bench_rows(points, models, failed, dtype, dev, timing, progress, csv_path, budget)
    _write_rows(csv_path, rows)
    sidecar = {
        "schema": SCHEMA,
        "rows_file": csv_path.name,
        "preset": preset,
        "dtype": dtype,
        "device": info,
        "warmup": warmup,
        "max_repeats": repeats,
        "max_seconds_per_point": max_seconds,
        **({} if max_minutes is None else {"max_minutes": max_minutes}),
        "statistic": "median of the timed repeats; q1/q3 are the inclusive quartiles",
        "timer": "CUDA events" if dev.type == "cuda" else "time.perf_counter around each call",
        "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "ceilings": ceilings,
        "numerics": numerics,
        "counts": {
            s: sum(r["status"] == s for r in rows)
            for s in ("ok", "skipped", "oom", "numerics_failed")
        },
    }
    json_path.write_text(json.dumps(sidecar, indent=2) + "\n", encoding="utf-8")
    return csv_path, json_path


@dataclass(frozen=True)
class Budget:
    """A run's time budget: the minutes it was given and its wall-clock end
    (``time.monotonic``)."""

    minutes: float
    deadline: float

    @classmethod
    def start(cls, max_minutes: float | None) -> Budget | None:
        """The budget of ``max_minutes`` from now (None: no budget); anything but a positive
        finite number of minutes is a ValueError."""
        if max_minutes is None:
            return None
        if not (math.isfinite(max_minutes) and max_minutes > 0):
            raise ValueError(
                f"max_minutes must be a positive number of minutes, got {max_minutes!r}"
            )
        return cls(max_minutes, time.monotonic() + 60.0 * max_minutes)

    def expired(self) -> bool:
        return time.monotonic() > self.deadline

    @property
    def note(self) -> str:
        """What a point the run did not reach says."""
        return f"not reached within the run's time budget (--max-minutes {self.minutes:g})"


@dataclass(frozen=True)
class _Timing:
    """How each point is timed (the arguments of :func:`time_point` after the device)."""

    warmup: int
    repeats: int
    max_seconds: float
    cache_bytes_target: int


def _pick_device(device: str, threads: int | None, log: Callable[[str], None]) -> torch.device:
    """The torch device to run on (``auto``: CUDA when there is one; CUDA asked for without
    one falls back to the CPU, said in the log); on the CPU, its thread count set."""
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        log(
            "mlacalc bench: no CUDA device is available; running on the CPU "
            "(results are labelled CPU)"
        )
        device = "cpu"
    dev = torch.device(device)
    if dev.type == "cpu":
        torch.set_num_threads(threads or os.cpu_count() or 1)
    return dev


def _measure_and_log_ceilings(dev: torch.device, dtype: str, log: Callable[[str], None]) -> dict:
    """The device's ceilings for the dtypes the roofline reads (and the run's), logged."""
    ceiling_dtypes = ["fp32", "bf16"] if dev.type == "cpu" else ["bf16", "fp16", "fp32"]
    if dtype not in ceiling_dtypes:
        ceiling_dtypes.append(dtype)
    ceilings = measure_ceilings(dev, ceiling_dtypes)
    log(
        "ceilings: "
        + ", ".join(
            f"matmul {k} {v / 1e12:.3f} TFLOP/s" for k, v in ceilings["matmul_flops_per_s"].items()
        )
        + f", gemv {ceilings['gemv_bytes_per_s'][dtype] / 1e9:.1f} GB/s"
        + f", copy {ceilings['copy_bytes_per_s'] / 1e9:.1f} GB/s"
        + f", op latency {ceilings['launch_latency_s'] * 1e6:.1f} us"
    )
    return ceilings


def _gate_models(
    models: Iterable[ModelConfig], dtype: str, dev: torch.device, log: Callable[[str], None]
) -> tuple[list[dict], set[tuple[str, str]]]:
    """The numerics gate of every model: its results, and the (model, impl) pairs that failed
    (logged; they are not timed)."""
    numerics, failed = [], set()
    for model in models:
        for result in numerics_gate(model, dtype, dev):
            numerics.append(result)
            if not result["passed"]:
                failed.add((model.name, result["impl"]))
                log(
                    f"numerics: {model.name} {result['impl']} disagrees "
                    f"(err {result['rel_err_vs_fp64_naive']:.2e}, "
                    f"decode {result['rel_err_decode_vs_prefill']:.2e}); "
                    "not timed"
                )
    return numerics, failed


def _bench_rows(
    points: list[BenchPoint],
    models: dict[str, ModelConfig],
    failed: set[tuple[str, str]],
    dtype: str,
    dev: torch.device,
    timing: _Timing,
    progress: bool,
    csv_path: Path,
    budget: Budget | None = None,
) -> list[dict]:
    """One CSV row per point, in the points' order, under a progress bar; each row is also
    appended to ``csv_path`` as it is taken. Under a ``budget`` the points run cheapest first
    and those not reached by its deadline are skipped rows. Each model's layer is built once per
    implementation and reused by its points."""
    if dev.type == "cuda":
        torch.cuda.empty_cache()  # the ceilings' buffers, cached by the allocator, are free
    available = _available_bytes(dev)
    order = list(range(len(points)))
    if budget is not None:
        order.sort(key=lambda i: _estimate_bytes(models[points[i].model], points[i], 2))
    rows: list[dict | None] = [None] * len(points)
    # layers built, by (model, impl): every one when the points are reordered (a layer of
    # DeepSeek-V3's dimensions takes seconds to build), else the last one
    built: dict[tuple[str, str], Any] = {}

    def layer_of(model: ModelConfig, impl: str):
        key = (model.name, impl)
        if key not in built:
            if budget is None:
                built.clear()
            built[key] = build_layer(model, impl, TORCH_DTYPES[dtype], dev)
        return built[key]

    with (
        open(csv_path, "w", newline="", encoding="utf-8") as fh,
        Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            disable=not progress,
            transient=False,
        ) as bar,
    ):
        writer = csv.DictWriter(fh, fieldnames=CSV_FIELDS, lineterminator="\n")
        writer.writeheader()
        task = bar.add_task("bench", total=len(points))
        for i in order:
            point = points[i]
            model = models[point.model]
            bar.update(
                task,
                description=f"{point.model} {point.impl} {point.phase} "
                f"B={point.batch} S={point.seq_len}",
            )
            if (model.name, point.impl) in failed:
                row = _untimed(
                    model, point, dtype, timing, "numerics_failed", "failed the numerics gate"
                )
            elif budget is not None and budget.expired():
                row = _untimed(model, point, dtype, timing, "skipped", budget.note)
            else:
                row = _point_row(model, point, dtype, dev, timing, available, layer_of)
            rows[i] = row
            writer.writerow({k: ("" if v is None else v) for k, v in row.items()})
            fh.flush()
            bar.advance(task)
    return [r for r in rows if r is not None]


def _untimed(
    model: ModelConfig, point: BenchPoint, dtype: str, timing: _Timing, status: str, note: str
) -> dict:
    """The row of a point that was not timed (``status``), saying why."""
    return _row(model, point, dtype, status, None, timing.warmup, 0, note)


def _point_row(
    model: ModelConfig,
    point: BenchPoint,
    dtype: str,
    dev: torch.device,
    timing: _Timing,
    available: int,
    layer_of: Callable[[ModelConfig, str], Any] = lambda m, impl: None,
) -> dict:
    """A point's row: skipped when it would not fit in memory, else timed with the layer
    ``layer_of`` gives (None: built for the point; ``oom`` when the device runs out of memory
    after all, building it included)."""
    window = model.sliding_window
    if window is not None and point.q_len > window:
        why = (
            f"a prompt of {point.q_len} tokens is longer than the sliding window ({window}): "
            f"the reference layer's prefill stops at the window (a prompt of at most {window})"
        )
        return _untimed(model, point, dtype, timing, "skipped", why)
    needs = _estimate_bytes(model, point, TORCH_DTYPES[dtype].itemsize)
    if needs > 0.8 * available:
        why = f"needs about {needs / 2**30:.1f} GiB, {available / 2**30:.1f} GiB free"
        return _untimed(model, point, dtype, timing, "skipped", why)
    try:
        stats, sets = time_point(
            model,
            point,
            dtype,
            dev,
            warmup=timing.warmup,
            repeats=timing.repeats,
            max_seconds=timing.max_seconds,
            cache_bytes_target=timing.cache_bytes_target,
            layer=layer_of(model, point.impl),
        )
        return _row(model, point, dtype, "ok", stats, timing.warmup, sets)
    except RuntimeError as exc:  # torch.OutOfMemoryError is one
        if not isinstance(exc, torch.OutOfMemoryError) and "out of memory" not in str(exc).lower():
            raise
        first_line = str(exc).splitlines()[0][:200]
        return _untimed(model, point, dtype, timing, "oom", first_line)
    finally:
        if dev.type == "cuda":
            torch.cuda.empty_cache()


def _default_name(info: dict, dev: torch.device, preset: str, dtype: str) -> str:
    """``<device type>-<device name slug>-<preset>-<dtype>``, the files' default stem."""
    slug = "".join(c if c.isalnum() else "-" for c in info["name"].lower()).strip("-")
    while "--" in slug:
        slug = slug.replace("--", "-")
    return f"{dev.type}-{slug[:40]}-{preset}-{dtype}"


def _write_rows(csv_path: Path, rows: list[dict]) -> None:
    """The rows as CSV, in :data:`CSV_FIELDS` order, an empty cell for None."""
    with open(csv_path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=CSV_FIELDS, lineterminator="\n")
        writer.writeheader()
        for row in rows:
            writer.writerow({k: ("" if v is None else v) for k, v in row.items()})
