"""Generate ``mlacalc/_generated.py`` from the symbolic layers.

The numeric path must not import sympy (it takes longer to import than a whole
report may take), so every expression the engine evaluates is printed here as a
plain Python function. ``tests/test_codegen.py`` regenerates the module and
checks that the committed file is identical, so the two cannot drift apart.

Run ``python -m mlacalc.formulas.codegen`` after changing a formula.
"""

from __future__ import annotations

import sys
from pathlib import Path

import sympy as sp

from . import mha, mla
from .ops import Layer

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
    poly = sp.Poly(sp.expand(expr), *args)
    if not all(c.is_integer for c in poly.coeffs()):
        raise ValueError(f"expression {expr} has non-integer coefficients")
    return sp.pycode(sp.factor_terms(expr))


def _args(layer: Layer) -> list[sp.Symbol]:
    exprs = [getattr(op, f) for op in layer.ops for f in _FIELDS]
    exprs += [layer.kv_row_elements, *layer.params.values()]
    exprs += [x for op in layer.ops if op.shape for x in op.shape]
    free = set().union(*(sp.sympify(e).free_symbols for e in exprs))
    return sorted(free, key=lambda s: s.name)


def render() -> str:
    lines = [
        '"""Numeric evaluators generated from the symbolic formulas. Do not edit.',
        "",
        "Regenerate with ``python -m mlacalc.formulas.codegen``; a test checks that this",
        "file equals what the generator prints. Each ``ops_*`` function returns one tuple",
        "per op: (name, stage, kind, flops, act_read, weight_read, cache_read, act_write,",
        "cache_write). Arguments may be Python ints (exact) or numpy arrays (sweeps).",
        '"""',
        "",
        "# fmt: off",
        "",
        "from typing import Callable, NamedTuple",
        "",
        "",
        "class LayerFunctions(NamedTuple):",
        '    """The evaluators of one layer; ``args`` names their parameters, in order."""',
        "",
        "    args: tuple",
        "    ops: Callable",
        "    kv_row_elements: Callable",
        "    params: Callable",
        "    matmul_flops: Callable",
        "    shapes: Callable",
        "",
        "",
    ]
    registry = []
    for layer in layers():
        args = _args(layer)
        names = ", ".join(s.name for s in args)
        lines.append(f"ARGS_{layer.key} = ({', '.join(repr(s.name) for s in args)},)")
        lines.append("")
        lines.append(f"def ops_{layer.key}({names}):")
        lines.append("    return (")
        for op in layer.ops:
            vals = ", ".join(_code(getattr(op, f), args) for f in _FIELDS)
            lines.append(f"        ({op.name!r}, {op.stage!r}, {op.kind!r}, {vals}),")
        lines.append("    )")
        lines.append("")
        lines.append("")
        lines.append(f"def shapes_{layer.key}({names}):")
        lines.append("    return (")
        for op in layer.ops:
            if op.shape is None:
                lines.append("        None,")
            else:
                lines.append(
                    "        (" + ", ".join(sp.pycode(sp.sympify(x)) for x in op.shape) + "),"
                )
        lines.append("    )")
        lines.append("")
        lines.append("")
        lines.append(f"def matmul_flops_{layer.key}({names}):")
        lines.append(f"    return {_code(sp.factor(layer.matmul_flops()), args)}")
        lines.append("")
        lines.append("")
        lines.append(f"def kv_row_elements_{layer.key}({names}):")
        lines.append(f"    return {_code(layer.kv_row_elements, args)}")
        lines.append("")
        lines.append("")
        lines.append(f"def params_{layer.key}({names}):")
        lines.append("    return {")
        for pname, pexpr in layer.params.items():
            lines.append(f"        {pname!r}: {_code(pexpr, args)},")
        lines.append("    }")
        lines.append("")
        lines.append("")
        registry.append(layer.key)
    lines.append("LAYERS = {")
    for key in registry:
        lines.append(
            f"    {key!r}: LayerFunctions(ARGS_{key}, ops_{key}, kv_row_elements_{key}, "
            f"params_{key}, matmul_flops_{key}, shapes_{key}),"
        )
    lines.append("}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    TARGET.write_text(render(), encoding="utf-8")
    print(f"wrote {TARGET}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
