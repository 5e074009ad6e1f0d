"""The record every formula module fills in: one :class:`Op` per kernel."""

from __future__ import annotations

from dataclasses import dataclass

import sympy as sp

from mlacalc.cost.symbols import B, S, b_a, d, q
from mlacalc.words.vocab import (
    ELEMENTWISE_STAGES,
    MATMUL_STAGES,
    NORM_FLOPS_PER_ELEMENT,
    ROPE_FLOPS_PER_ELEMENT,
    SOFTMAX_FLOPS_PER_ELEMENT,
)

__all__ = [
    "NORM_FLOPS_PER_ELEMENT",
    "ROPE_FLOPS_PER_ELEMENT",
    "SOFTMAX_FLOPS_PER_ELEMENT",
    "Layer",
    "Op",
]

_ZERO = sp.Integer(0)


@dataclass(frozen=True)
class Op:
    """One kernel of an attention layer, as the unfused op-by-op sequence runs it.

    ``flops`` are matmul FLOPs (``2*m*n*k``) for ``kind == "matmul"`` and nominal
    element-wise FLOPs otherwise. Bytes are split by what is touched: activations,
    weights, and the KV cache; each op reads its inputs and writes its outputs once.
    """

    name: str
    stage: str
    kind: str
    flops: sp.Expr
    act_read: sp.Expr = _ZERO
    weight_read: sp.Expr = _ZERO
    cache_read: sp.Expr = _ZERO
    act_write: sp.Expr = _ZERO
    cache_write: sp.Expr = _ZERO
    #: (G, M, N, K) of a (batched) matrix product: G products of [M x K] @ [K x N]
    shape: tuple | None = None

    def __post_init__(self):
        stages = MATMUL_STAGES if self.kind == "matmul" else ELEMENTWISE_STAGES
        if self.stage not in stages:
            raise ValueError(f"op {self.name}: stage {self.stage!r} is not one of {stages}")
        if (self.kind == "matmul") != (self.shape is not None):
            raise ValueError(f"op {self.name}: matmul ops, and only they, carry a shape")

    @property
    def bytes_read(self) -> sp.Expr:
        return self.act_read + self.weight_read + self.cache_read

    @property
    def bytes_written(self) -> sp.Expr:
        return self.act_write + self.cache_write


@dataclass(frozen=True)
class Layer:
    """An attention layer of one variant and implementation.

    ``ops`` is the unfused sequence; ``kv_row_elements`` the elements one token
    adds to one layer's cache, ``kv_row_bytes`` their bytes; ``params`` the
    parameters of each projection as the reference implementation holds them;
    ``x_elements_per_token`` the width of the layer's input and output.
    """

    key: str
    ops: tuple[Op, ...]
    kv_row_elements: sp.Expr
    kv_row_bytes: sp.Expr
    params: dict[str, sp.Expr]

    def matmul_flops(self, stage: str | None = None) -> sp.Expr:
        return sp.Add(
            *[
                o.flops
                for o in self.ops
                if o.kind == "matmul" and (stage is None or o.stage == stage)
            ]
        )

    def elementwise_flops(self) -> sp.Expr:
        return sp.Add(*[o.flops for o in self.ops if o.kind != "matmul"])

    def unfused_bytes(self) -> sp.Expr:
        return sp.Add(*[o.bytes_read + o.bytes_written for o in self.ops])

    def fused_bytes(self) -> sp.Expr:
        """Ideal fused lower bound: each weight once, the input and the output once,
        every cached row of the S keys read once and the q new rows written once."""
        weights = sp.Add(*[o.weight_read for o in self.ops])
        return weights + 2 * B * q * d * b_a + B * S * self.kv_row_bytes + B * q * self.kv_row_bytes
