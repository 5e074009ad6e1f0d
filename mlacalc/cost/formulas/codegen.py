"""Generate ``mlacalc/cost/_generated.py`` from the symbolic layers.

The numeric path must not import sympy (it takes longer to import than a whole
report may take), so every expression the engine evaluates is printed here as a
plain Python function. ``tests/test_cost_codegen.py`` regenerates the module and
checks that the committed file is identical, so the two cannot drift apart.

Run ``python -m mlacalc.cost.formulas.codegen`` after changing a formula.
"""

from __future__ import annotations

import sys
from pathlib import Path

import sympy as sp

from mlacalc.cost.formulas import mha, mla
from mlacalc.cost.formulas.ops import Layer

TARGET = Path(__file__).resolve().parent.parent / "_generated.py"

_FIELDS = ("flops", "act_read", "weight_read", "cache_read", "act_write", "cache_write")


def layers() -> list[Layer]:
    """Every layer the engine evaluates, in a fixed order."""
    out = [mha.layer()]
    for impl in mla.IMPLEMENTATIONS:
        for q_lora in (True, False):
            out.append(mla.layer(impl, q_lora))
    return out


def _code(expr: sp.Expr, args: list[sp.Symbol]) -> str:
    expr = sp.sympify(expr)
    if expr == 0:
        return "0"
    poly = sp.Poly(sp.expand(expr), *args) if args else None
    if poly is not None and not all(c.is_integer for c in poly.coeffs()):
        raise ValueError(f"expression {expr} has non-integer coefficients")
    return sp.pycode(sp.factor_terms(expr))


def _free(exprs) -> list[sp.Symbol]:
    """The symbols the expressions use, sorted by name: a generated function's parameters."""
    free = set().union(*(sp.sympify(e).free_symbols for e in exprs))
    return sorted(free, key=lambda s: s.name)


def _op_exprs(layer: Layer) -> list[sp.Expr]:
    exprs = [getattr(op, f) for op in layer.ops for f in _FIELDS]
    return exprs + [x for op in layer.ops if op.shape for x in op.shape]


_HEADER = '''"""Numeric evaluators generated from the symbolic formulas. Do not edit.

Regenerate with ``python -m mlacalc.cost.formulas.codegen``; a test checks that this
file equals what the generator prints. Each layer has four evaluators (an
:class:`Evaluator`: the generated function and the symbols it takes, in order):
``ops`` returns one :class:`OpTerms` record per op, ``kv_row_elements`` the cached
elements per token, ``params`` the parameters by projection, ``matmul_flops`` the
summed matmul FLOPs. Arguments may be Python ints (exact) or numpy arrays (sweeps).
"""

# fmt: off

from collections.abc import Callable
from typing import Any, NamedTuple


class OpTerms(NamedTuple):
    """One op of a layer, evaluated: FLOPs (matmul, or nominal element-wise), the bytes it
    reads and writes by kind, and the (G, M, N, K) of its product (None off matmuls)."""

    name: str
    stage: str
    kind: str
    flops: Any
    act_read: Any
    weight_read: Any
    cache_read: Any
    act_write: Any
    cache_write: Any
    shape: Any


class Evaluator(NamedTuple):
    """A generated function and the names of the symbols it takes, in order."""

    args: tuple
    fn: Callable


class LayerFunctions(NamedTuple):
    """The evaluators of one layer."""

    ops: Evaluator
    kv_row_elements: Evaluator
    params: Evaluator
    matmul_flops: Evaluator
'''


def _signature(name: str, args: list[sp.Symbol]) -> list[str]:
    names = ", ".join(s.name for s in args)
    return [f"ARGS_{name} = {tuple(s.name for s in args)!r}", "", "", f"def {name}({names}):"]


def _shape_code(shape) -> str:
    if shape is None:
        return "None"
    return "(" + ", ".join(sp.pycode(sp.sympify(x)) for x in shape) + ")"


def render() -> str:
    lines = _HEADER.split("\n")
    lines.append("")
    registry = []
    for layer in layers():
        key = layer.key
        args = _free(_op_exprs(layer))
        lines += _signature(f"ops_{key}", args)
        lines.append("    return (")
        for op in layer.ops:
            vals = ", ".join(_code(getattr(op, f), args) for f in _FIELDS)
            lines.append(
                f"        OpTerms({op.name!r}, {op.stage!r}, {op.kind!r}, {vals}, "
                f"{_shape_code(op.shape)}),"
            )
        lines += ["    )", "", ""]
        flops = sp.factor(layer.matmul_flops())
        args = _free([flops])
        lines += _signature(f"matmul_flops_{key}", args)
        lines += [f"    return {_code(flops, args)}", "", ""]
        args = _free([layer.kv_row_elements])
        lines += _signature(f"kv_row_elements_{key}", args)
        lines += [f"    return {_code(layer.kv_row_elements, args)}", "", ""]
        args = _free(layer.params.values())
        lines += _signature(f"params_{key}", args)
        lines.append("    return {")
        for pname, pexpr in layer.params.items():
            lines.append(f"        {pname!r}: {_code(pexpr, args)},")
        lines += ["    }", "", ""]
        registry.append(key)
    lines.append("LAYERS = {")
    for key in registry:
        evs = ", ".join(
            f"Evaluator(ARGS_{f}_{key}, {f}_{key})"
            for f in ("ops", "kv_row_elements", "params", "matmul_flops")
        )
        lines.append(f"    {key!r}: LayerFunctions({evs}),")
    lines.append("}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    TARGET.write_text(render(), encoding="utf-8")
    print(f"wrote {TARGET}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
