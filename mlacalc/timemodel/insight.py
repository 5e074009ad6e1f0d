"""Symbolic roofline insight (sympy): where MLA turns compute-bound, where absorption stops paying.

- :func:`ridge_point`: FLOPs per byte at which a device turns compute-bound.
- :func:`compute_bound_seq_len`: the KV length at which absorbed MLA decode crosses the ridge,
  for the attention-core kernel alone (the FlashMLA kernel) and for the whole layer (weights
  included, fused bound).
- :func:`absorption_crossover`: the number of query tokens per sequence above which running
  attention in latent space (absorbed) costs more FLOPs than expanding K/V from the latent
  (compressed); seeds 002 and 003 argue about exactly this (decode vs prefill).

Every function returns the sympy expression and its value for the model.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from typing import Any

import sympy as sp

from mlacalc.cost import symbols as s
from mlacalc.cost.engine import as_model
from mlacalc.cost.symbolic import formula
from mlacalc.hardware.catalogue import HardwareSpec, load_hardware
from mlacalc.models.loading import ModelConfig
from mlacalc.timemodel.predict import predict_time
from mlacalc.words import arguments as args
from mlacalc.words.dtypes import dtype_bits
from mlacalc.words.errors import InvalidArgumentError
from mlacalc.words.vocab import MLA_FIELD_SYMBOLS

__all__ = [
    "Insight",
    "absorption_crossover",
    "compute_bound_seq_len",
    "model_compute_bound_seq_len",
    "ridge_point",
]


@dataclass(frozen=True)
class Insight:
    name: str
    expression: Any  # sympy expression (the closed form)
    value: float | None  # its value for the model and device, None if never reached
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "expression": str(self.expression),
            "value": self.value,
            "note": self.note,
        }


def _mla_values(m: ModelConfig) -> dict:

    values = {s.ALL[sym]: getattr(m, name) or 0 for name, sym in MLA_FIELD_SYMBOLS.items()}
    values[s.L] = 1
    return values


def _hardware(hardware: Any) -> HardwareSpec:
    if not isinstance(hardware, (HardwareSpec, str, os.PathLike)) or hardware == "":
        raise InvalidArgumentError(
            "hardware", f"must be a HardwareSpec, a catalogue name or a path, got {hardware!r}"
        )
    return load_hardware(hardware)


def ridge_point(hardware: HardwareSpec | str, dtype: str = "bf16") -> Insight:
    """FLOPs per byte at which ``hardware`` turns compute-bound in ``dtype``."""
    dtype = args.dtype("dtype", dtype)
    hw = _hardware(hardware)

    P, W = sp.symbols("P_peak BW", positive=True)
    return Insight(
        "ridge point (FLOP/byte)",
        P / W,
        hw.peak(dtype) / hw.memory_bandwidth_bytes_per_s,
        f"{hw.name}: {hw.peak(dtype) / 1e12:.1f} TFLOP/s {dtype} / "
        f"{hw.memory_bandwidth_bytes_per_s / 1e12:.2f} TB/s",
    )


@functools.lru_cache(maxsize=1)
def _ridge() -> Any:
    """The symbol of a device's ridge point, FLOP/byte (sympy imported on first use)."""
    return sp.Symbol("R", positive=True)


@functools.lru_cache(maxsize=2)
def _crossing_terms(q_lora: bool) -> tuple[tuple[str, Any, Any], ...]:
    """(name, FLOPs, bytes) of the two crossings of :func:`compute_bound_seq_len`."""
    # the attention-core kernel (as FlashMLA runs it): scores + values over the latent cache
    core_flops = 2 * s.B * s.n_h * s.S * (2 * s.d_c + s.d_rope)
    core_bytes = s.b * s.B * s.S * (s.d_c + s.d_rope) + s.b_a * s.B * s.n_h * (2 * s.d_c + s.d_rope)
    layer_flops = formula("attention_flops", "mla", "absorbed", phase="decode", q_lora=q_lora)
    layer_bytes = formula("fused_bytes", "mla", "absorbed", phase="decode", q_lora=q_lora)
    return (
        (
            "plain roofline: absorbed decode core kernel turns compute-bound at S =",
            core_flops,
            core_bytes,
        ),
        (
            "plain roofline: absorbed decode layer (fused, weights included) turns "
            "compute-bound at S =",
            layer_flops,
            layer_bytes,
        ),
    )


@functools.lru_cache(maxsize=2)
def _crossing_forms(q_lora: bool) -> tuple[tuple[str, Any, Any, Any], ...]:
    """The closed forms behind :func:`compute_bound_seq_len`, solved once per query layout:
    (name, the S at which intensity reaches the ridge ``R``, that S simplified for display,
    the intensity's limit as S grows)."""

    out = []
    for name, flops, nbytes in _crossing_terms(q_lora):
        solutions = sp.solve(sp.Eq(flops, _ridge() * nbytes), s.S)
        expr = solutions[0] if solutions else None
        shown = sp.simplify(expr) if solutions else sp.nan
        out.append((name, expr, shown, sp.limit(flops / nbytes, s.S, sp.oo)))
    return tuple(out)


def compute_bound_seq_len(
    model: ModelConfig | str,
    hardware: HardwareSpec | str,
    batch: int = 1,
    dtype: str = "bf16",
    kv_dtype: str | None = None,
) -> list[Insight]:
    """KV length S at which absorbed MLA decode becomes compute-bound: kernel alone, whole layer.

    Plain roofline: the closed-form intensity against the datasheet ridge (peak / bandwidth);
    :func:`model_compute_bound_seq_len` applies the same rule to the kernel as the kernel
    model runs it (its dtype and the bytes it moves).
    """
    m = as_model(model)
    batch = args.count("batch", batch, args.MAX_BATCH)
    dtype = args.dtype("dtype", dtype)
    kv_dtype = args.dtype("kv_dtype", kv_dtype, allow_none=True)
    if not m.is_mla:
        raise InvalidArgumentError(
            "model", f"{m.label} is {m.variant.upper()}; this insight is for MLA"
        )
    hw = _hardware(hardware)

    ridge = hw.peak(dtype) / hw.memory_bandwidth_bytes_per_s
    b = sp.Rational(dtype_bits(kv_dtype or dtype), 8)
    a = sp.Rational(dtype_bits(dtype), 8)
    values = {
        **_mla_values(m),
        s.B: batch,
        s.b: b,
        s.b_a: a,
        s.b_w: sp.Rational(dtype_bits(m.weights_dtype), 8),
    }
    out = []
    topk = m.index_topk  # DSA: attention reads at most index_topk keys, whatever S
    for name, expr, shown, limit_expr in _crossing_forms(m.q_lora_rank is not None):
        value = expr.subs(values).subs(_ridge(), ridge) if expr is not None else None
        limit = limit_expr.subs(values)
        expr = shown
        if topk is not None:
            out.append(_dsa_crossing(m, name, expr, value, limit, values, hw, ridge, batch))
            continue
        if value is None or not value.is_real or value <= 0:
            out.append(
                Insight(
                    name,
                    expr,
                    None,
                    f"never: the intensity tends to {float(limit):.1f} FLOP/byte, below the "
                    f"datasheet ridge {ridge:.1f} of {hw.name}",
                )
            )
        else:
            out.append(
                Insight(
                    name,
                    expr,
                    float(value),
                    f"batch {batch}, {hw.name} datasheet ridge {ridge:.1f} FLOP/byte; intensity "
                    f"tends to "
                    f"{float(limit):.1f} as S grows",
                )
            )
    return out


def _dsa_crossing(m, name, expr, value, limit, values, hw, ridge, batch) -> Insight:
    """A crossing of :func:`compute_bound_seq_len` for a DSA model: its attention reads
    min(S, index_topk) keys, so the intensity stops growing at S = index_topk (the dense limit
    is never reached) and a crossing past index_topk never comes."""
    topk = m.index_topk
    _, flops, nbytes = next(t for t in _crossing_terms(m.q_lora_rank is not None) if t[0] == name)
    capped = float((flops / nbytes).subs(values).subs(s.S, topk))
    layer = "layer" in name
    what = (
        "dense MLA's fused layer with S capped at index_topk; the indexer's kernels are not in "
        "this closed form"
        if layer
        else "the core reads the index_topk keys the indexer picks"
    )
    head = (
        f"batch {batch}, {hw.name} datasheet ridge {ridge:.1f} FLOP/byte; DSA: {what}, so the "
        f"intensity stops at {capped:.1f} FLOP/byte from S = index_topk = {topk:,} "
        f"(dense MLA would tend to {float(limit):.1f})"
    )
    if value is not None and value.is_real and 0 < value <= topk:
        return Insight(name, expr, float(value), head)
    return Insight(name, expr, None, f"never: {head}, below the ridge")


#: KV lengths the kernel model is evaluated at by :func:`model_compute_bound_seq_len`
_MODEL_GRID = tuple(2**k for k in range(6, 21))  # 64 .. 1,048,576
#: the test behind a kernel's bound label (the shown "formula"): the one rule of the ``bound``
#: column (:func:`mlacalc.words.kernels.roofline_bound`)
_MODEL_TEST = "FLOPs / bytes >= ridge of the kernel's dtype"


def model_compute_bound_seq_len(
    model: ModelConfig | str,
    hardware: HardwareSpec | str,
    batch: int = 1,
    dtype: str = "bf16",
    kv_dtype: str | None = None,
    profile: Any = None,
    seq_len: int | None = None,
) -> Insight | None:
    """KV length S from which absorbed MLA decode attention, as the kernel model runs it, is
    labelled compute-bound (the ``bound`` column of ``mlacalc roofline``: its FLOPs per byte
    against the device's ridge for the kernel's dtype), or None where the device is timed by
    the plain roofline (then :func:`compute_bound_seq_len` says it).

    The labels are evaluated at S = 64 .. 2^20 (powers of two) and the crossing from memory- to
    compute-bound is found exactly by bisection. ``value`` is the S from which the kernel stays
    compute-bound up to 2^20, None when it does not; the note gives the label, the intensity
    and the ridge at ``seq_len``.
    """
    m = as_model(model)
    if not m.is_mla:
        raise InvalidArgumentError(
            "model", f"{m.label} is {m.variant.upper()}; this insight is for MLA"
        )
    hw = _hardware(hardware)

    def core(S: int) -> Any:
        p = predict_time(
            m, hw, "decode", S, batch, "absorbed", dtype=dtype, kv_dtype=kv_dtype, profile=profile
        )
        # the attention kernel itself, not a DSA indexer's (a core kernel too)
        return p, next(o for o in p.ops if o.stage == "core" and not o.name.startswith("indexer"))

    first, _ = core(_MODEL_GRID[0])
    if first.profile == "roofline":
        return None
    labels = [core(S)[1].bound for S in _MODEL_GRID]
    name = (
        f"kernel model ({first.profile}): absorbed decode attention kernel stays "
        "compute-bound from S ="
    )
    words = [f"batch {batch}, {hw.name}, the bound column's rule"]
    if m.index_topk is not None:
        words.append(
            f"DSA: the attention row, which reads min(S, index_topk = {m.index_topk:,}) keys; "
            "the indexer's rows are not in it"
        )
    if seq_len is not None:
        _, op = core(seq_len)
        words.append(
            f"at S = {seq_len:,}: {op.bound} ({op.arithmetic_intensity:,.1f} FLOP/byte, "
            f"ridge {op.ridge:,.1f})"
            + (
                f"; the time model reads its time limited by {op.limited_by} (the table's "
                "'limited by' column), which differs from the bound"
                if op.limited_by not in ("", op.bound)
                else ""
            )
        )
    compute = [S for S, b in zip(_MODEL_GRID, labels) if b == "compute"]
    if labels[-1] != "compute":
        if compute:  # compute-bound somewhere, memory-bound again at the longest S
            words.append(
                f"compute-bound at S = {min(compute):,} to {max(compute):,} of the grid, "
                f"memory-bound at S = {_MODEL_GRID[-1]:,}"
            )
        else:
            words.append(f"memory-bound at every S from {_MODEL_GRID[0]:,} to {_MODEL_GRID[-1]:,}")
        return Insight(name, _MODEL_TEST, None, "; ".join(words))
    below = [i for i, b in enumerate(labels) if b != "compute"]
    if not below:
        value = _MODEL_GRID[0]
        words.append(f"compute-bound at every S from {value:,} to {_MODEL_GRID[-1]:,}")
    else:
        lo, hi = _MODEL_GRID[below[-1]], _MODEL_GRID[below[-1] + 1]
        while hi - lo > 1:  # lo: not compute-bound, hi: compute-bound
            mid = (lo + hi) // 2
            if core(mid)[1].bound == "compute":
                hi = mid
            else:
                lo = mid
        value = hi
        if any(b == "compute" for b in labels[: below[0]]):
            words.append("also compute-bound at short S (per-sequence work)")
    return Insight(name, _MODEL_TEST, float(value), "; ".join(words))


@functools.lru_cache(maxsize=2)
def _crossover_forms(q_lora: bool) -> tuple[Any, Any]:
    """The closed form of :func:`absorption_crossover` and its long-context limit, solved
    once per query layout."""
    absorbed = formula("attention_flops", "mla", "absorbed", phase="chunk", q_lora=q_lora)
    compressed = formula("attention_flops", "mla", "compressed", phase="chunk", q_lora=q_lora)
    solutions = [x for x in sp.solve(sp.Eq(absorbed, compressed), s.q) if x != 0]
    expr = sp.simplify(solutions[0])
    return expr, sp.limit(expr, s.S, sp.oo)


def absorption_crossover(model: ModelConfig | str, seq_len: int | None = None) -> Insight:
    """Query tokens per sequence above which absorbed MLA costs more FLOPs than compressed.

    Both keep the same latent cache: ``compressed`` re-expands the ``S`` cached latents through
    ``W_UKV`` every step, ``absorbed`` pays ``2 d_c + d_rope`` instead of ``d_nope + d_rope + d_v``
    per (query, key) pair and head. Equal cost at
    ``q* = S d_c (d_nope + d_v) / (S (2 d_c - d_nope - d_v) + d_c (d_nope + d_v))``, which tends to
    ``d_c (d_nope + d_v) / (2 d_c - d_nope - d_v)`` for long contexts (170.7 for DeepSeek-V3).
    Where that bottom is not positive (``2 d_c <= d_nope + d_v``, e.g. a small ``d_c``;
    DeepSeek-V3 at ``kv_lora_rank`` 128 is the equal case) absorbed costs no more at any query
    count ``q <= S``: the value is None and the note says so and why; so at a given ``S`` where
    ``q*`` is at or past ``S`` (no step has that many new tokens).
    """
    m = as_model(model)
    seq_len = args.optional_count("seq_len", seq_len, args.MAX_TOKENS)
    if not m.is_mla:
        raise InvalidArgumentError(
            "model", f"{m.label} is {m.variant.upper()}; this insight is for MLA"
        )

    expr, limit = _crossover_forms(m.q_lora_rank is not None)
    form = limit if seq_len is None else expr
    where = "long-context limit" if seq_len is None else f"at S = {seq_len}"
    # q* = S a / (S b + a), a = d_c (d_nope + d_v), b = 2 d_c - d_nope - d_v: the model's
    # values put in before the limit is taken (the generic limit a / b is 0/0-free only for b != 0)
    num, den = sp.fraction(sp.together(expr.subs(_mla_values(m))))
    if seq_len is None:
        top, bottom = sp.Poly(num, s.S), sp.Poly(den, s.S)
        if bottom.degree() < top.degree():  # b = 0: q* = S, at every length
            value = None
        else:
            value = top.coeff_monomial(s.S ** top.degree()) / bottom.coeff_monomial(
                s.S ** bottom.degree()
            )
    else:
        n, d = num.subs(s.S, seq_len), den.subs(s.S, seq_len)
        value = n / d if d != 0 else None
    # a step has at most S new tokens: a q* at or past S (or none, or negative) is no crossover
    if value is None or value <= 0 or (seq_len is not None and value >= seq_len):
        # 2 d_c <= d_nope + d_v: a latent dot product costs no more than an expanded one, and
        # absorption's own products (2 q n_h d_c (d_nope + d_v)) no more than compressed's
        # re-expansion of the S >= q cached latents (2 S n_h d_c (d_nope + d_v)): no q makes
        # absorbed dearer (equal at q = S where 2 d_c = d_nope + d_v)
        n_sum = (m.qk_nope_head_dim or 0) + (m.v_head_dim or 0)
        rank = 2 * (m.kv_lora_rank or 0)
        why = (
            f"2 d_c = {rank} is not above d_nope + d_v = {n_sum}, so a latent (query, key) "
            "product costs no more than an expanded one and absorbing the queries no more than "
            "re-expanding the S cached latents"
            if rank <= n_sum
            else f"q* = {float(value):,.1f} is past the S = {seq_len} tokens a step can hold"
        )
        return Insight(
            "absorption stops paying above q =",
            form,
            None,
            f"{where}; never: absorption pays at every query count (absorbed costs no more "
            f"FLOPs than compressed at any q <= S), as {why}",
        )
    return Insight(
        "absorption stops paying above q =",
        form,
        float(value),
        f"{where}; below it (decode) absorb, above it (prefill) expand",
    )
