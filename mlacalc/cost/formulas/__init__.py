"""Symbolic cost formulas: one module per attention family.

:mod:`.mha` covers MHA, GQA and MQA (one family, parameterised by ``n_kv``);
:mod:`.mla` covers multi-head latent attention in each implementation, and
:mod:`.dsa_layer` DeepSeek-V3.2's sparse attention over it (the formula's only). Both
describe a layer as a sequence of :class:`Op` records whose FLOPs and bytes are
sympy expressions; :mod:`.codegen` turns them into the plain-Python functions
of ``mlacalc/cost/_generated.py`` that the numeric path runs without importing sympy.
"""

from mlacalc.cost.formulas.ops import Layer, Op

__all__ = ["Layer", "Op"]
