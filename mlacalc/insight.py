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

from dataclasses import dataclass
from typing import Any

from .config import ModelConfig
from .dtypes import dtype_bits
from .engine import as_model
from .errors import InvalidArgumentError
from .hardware import HardwareSpec, load_hardware
from .vocab import MLA_FIELD_SYMBOLS

__all__ = ["Insight", "absorption_crossover", "compute_bound_seq_len", "ridge_point"]


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
    from . import symbols as s

    values = {s.ALL[sym]: getattr(m, name) or 0 for name, sym in MLA_FIELD_SYMBOLS.items()}
    values[s.L] = 1
    return values


def ridge_point(hardware: HardwareSpec | str, dtype: str = "bf16") -> Insight:
    import sympy as sp

    hw = load_hardware(hardware)
    P, W = sp.symbols("P_peak BW", positive=True)
    return Insight(
        "ridge point (FLOP/byte)",
        P / W,
        hw.peak(dtype) / hw.memory_bandwidth_bytes_per_s,
        f"{hw.name}: {hw.peak(dtype) / 1e12:.1f} TFLOP/s {dtype} / "
        f"{hw.memory_bandwidth_bytes_per_s / 1e12:.2f} TB/s",
    )


def compute_bound_seq_len(
    model: ModelConfig | str,
    hardware: HardwareSpec | str,
    batch: int = 1,
    dtype: str = "bf16",
    kv_dtype: str | None = None,
) -> list[Insight]:
    """KV length S at which absorbed MLA decode becomes compute-bound: kernel alone, whole layer."""
    import sympy as sp

    from . import symbols as s
    from .symbolic import formula

    m = as_model(model)
    if not m.is_mla:
        raise InvalidArgumentError(
            "model", f"{m.label} is {m.variant.upper()}; this insight is for MLA"
        )
    hw = load_hardware(hardware)
    ridge = hw.peak(dtype) / hw.memory_bandwidth_bytes_per_s
    b = sp.Rational(dtype_bits(kv_dtype or dtype), 8)
    a = sp.Rational(dtype_bits(dtype), 8)
    R = sp.Symbol("R", positive=True)  # the ridge point, FLOP/byte
    values = {
        **_mla_values(m),
        s.B: batch,
        s.b: b,
        s.b_a: a,
        s.b_w: sp.Rational(dtype_bits(m.weights_dtype), 8),
    }
    out = []
    # the attention-core kernel (as FlashMLA runs it): scores + values over the latent cache
    core_flops = 2 * s.B * s.n_h * s.S * (2 * s.d_c + s.d_rope)
    core_bytes = s.b * s.B * s.S * (s.d_c + s.d_rope) + s.b_a * s.B * s.n_h * (2 * s.d_c + s.d_rope)
    for name, flops, nbytes in (
        ("absorbed decode core kernel turns compute-bound at S =", core_flops, core_bytes),
        (
            "absorbed decode layer (fused, weights included) turns compute-bound at S =",
            formula(
                "attention_flops",
                "mla",
                "absorbed",
                phase="decode",
                q_lora=m.q_lora_rank is not None,
            ),
            formula(
                "fused_bytes", "mla", "absorbed", phase="decode", q_lora=m.q_lora_rank is not None
            ),
        ),
    ):
        solutions = sp.solve(sp.Eq(flops, R * nbytes), s.S)
        expr = solutions[0] if solutions else sp.nan
        value = expr.subs(values).subs(R, ridge) if solutions else None
        limit = sp.limit(flops / nbytes, s.S, sp.oo).subs(values)
        if value is None or not value.is_real or value <= 0:
            out.append(
                Insight(
                    name,
                    sp.simplify(expr),
                    None,
                    f"never: the intensity tends to {float(limit):.1f} FLOP/byte, below the ridge "
                    f"{ridge:.1f} of {hw.name}",
                )
            )
        else:
            out.append(
                Insight(
                    name,
                    sp.simplify(expr),
                    float(value),
                    f"batch {batch}, {hw.name} ridge {ridge:.1f} FLOP/byte; intensity tends to "
                    f"{float(limit):.1f} as S grows",
                )
            )
    return out


def absorption_crossover(model: ModelConfig | str, seq_len: int | None = None) -> Insight:
    """Query tokens per sequence above which absorbed MLA costs more FLOPs than compressed.

    Both keep the same latent cache: ``compressed`` re-expands the ``S`` cached latents through
    ``W_UKV`` every step, ``absorbed`` pays ``2 d_c + d_rope`` instead of ``d_nope + d_rope + d_v``
    per (query, key) pair and head. Equal cost at
    ``q* = S d_c (d_nope + d_v) / (S (2 d_c - d_nope - d_v) + d_c (d_nope + d_v))``, which tends to
    ``d_c (d_nope + d_v) / (2 d_c - d_nope - d_v)`` for long contexts (170.7 for DeepSeek-V3).
    """
    import sympy as sp

    from . import symbols as s
    from .symbolic import formula

    m = as_model(model)
    if not m.is_mla:
        raise InvalidArgumentError(
            "model", f"{m.label} is {m.variant.upper()}; this insight is for MLA"
        )
    q_lora = m.q_lora_rank is not None
    absorbed = formula("attention_flops", "mla", "absorbed", phase="chunk", q_lora=q_lora)
    compressed = formula("attention_flops", "mla", "compressed", phase="chunk", q_lora=q_lora)
    solutions = [x for x in sp.solve(sp.Eq(absorbed, compressed), s.q) if x != 0]
    expr = sp.simplify(solutions[0])
    values = _mla_values(m)
    if seq_len is None:
        limit = sp.limit(expr, s.S, sp.oo)
        return Insight(
            "absorption stops paying above q =",
            limit,
            float(limit.subs(values)),
            "long-context limit; below it (decode) absorb, above it (prefill) expand",
        )
    value = expr.subs(values).subs(s.S, seq_len)
    return Insight(
        "absorption stops paying above q =",
        expr,
        float(value),
        f"at S = {seq_len}; below it (decode) absorb, above it (prefill) expand",
    )
