"""User-facing symbolic formulas (imports sympy on first call only).

>>> from mlacalc import formula
>>> formula("kv_cache_elements", "mla")
d_c + d_rope
>>> formula("kv_cache_elements", "gqa")
2*d_h*n_kv
"""

from __future__ import annotations

import functools
from dataclasses import replace
from typing import Any

from mlacalc.words import arguments as args
from mlacalc.words.errors import InvalidArgumentError
from mlacalc.words.vocab import (
    MLA_IMPLEMENTATIONS,
    PHASES,
    QUANTITIES,
    STAGES,
    STANDARD_IMPL,
    VARIANTS,
    Impl,
    Phase,
    Variant,
    serving_impl,
)

__all__ = ["FORMULA_VARIANTS", "QUANTITIES", "V4_QUANTITIES", "V4_VARIANTS", "VARIANTS", "formula"]

#: the variants a formula is written for: the attention variants, DSA (DeepSeek-V3.2's MLA
#: whose core attends the top-k keys a lightning indexer picks; formulas/dsa_layer.py), and
#: DeepSeek-V4's layers: compressed sparse, heavily compressed and window-only
#: (formulas/compressed_layer.py)
V4_VARIANTS = ("csa", "hca", "swa")
FORMULA_VARIANTS = (*VARIANTS, "dsa", *V4_VARIANTS)
#: the quantities a DeepSeek-V4 layer has a formula of (report counts the others)
V4_QUANTITIES = ("kv_cache_bytes", "attention_flops")


def _layer(variant: str, impl: str | None, phase: str | None, q_lora: bool):
    # deferred: the symbolic layers load sympy; the numeric path never does
    from mlacalc.cost.formulas import dsa_layer, mha, mla

    if variant == "dsa":  # an MLA layer over the picked keys
        base = _layer("mla", impl, phase, q_lora)
        if impl is None and phase == "chunk":  # a DSA chunk's default: naive, latent cache
            latent = mla.layer("absorbed", q_lora)
            base = replace(
                mla.layer("naive", q_lora),
                kv_row_elements=latent.kv_row_elements,
                kv_row_bytes=latent.kv_row_bytes,
            )
        return dsa_layer.layer(base, q_lora)
    if variant == "mla":
        if impl is None:
            # serving default: expanded K/V in prefill (the new tokens') and chunk (the
            # cached prefix's too), absorbed in decode; the cache is the latent either way
            layer = mla.layer(serving_impl(phase), q_lora)
            latent = mla.layer("absorbed", q_lora)
            return replace(
                layer, kv_row_elements=latent.kv_row_elements, kv_row_bytes=latent.kv_row_bytes
            )
        if impl not in MLA_IMPLEMENTATIONS:
            raise InvalidArgumentError(
                "impl",
                f"unknown MLA implementation {impl!r}; use one of "
                + ", ".join(MLA_IMPLEMENTATIONS),
            )
        return mla.layer(impl, q_lora)
    if impl not in (None, STANDARD_IMPL):
        raise InvalidArgumentError(
            "impl", f"{variant.upper()} has one implementation ('{STANDARD_IMPL}')"
        )
    return mha.layer()


def formula(
    quantity: str,
    variant: Variant,
    impl: Impl | None = None,
    *,
    phase: Phase | None = None,
    stage: str | None = None,
    causal: bool = False,
    q_lora: bool = True,
    bias: bool = False,
    rope: bool = True,
    out_bias: bool | None = None,
) -> Any:
    """The sympy expression of a quantity for an attention variant.

    Parameters
    ----------
    quantity
        One of :data:`QUANTITIES`.
    variant
        ``"mha"`` (``n_kv = n_h``), ``"gqa"``, ``"mqa"`` (``n_kv = 1``), ``"mla"``, or
        ``"dsa"`` (DeepSeek-V3.2: MLA whose core attends ``min(S, k)`` keys an indexer of
        ``n_i`` heads ``d_i`` wide picks, scoring all ``S``), or a DeepSeek-V4 layer,
        ``"csa"``, ``"hca"`` or ``"swa"`` (``kv_cache_bytes``, and ``attention_flops`` with
        ``phase`` prefill or decode: :mod:`mlacalc.cost.formulas.compressed_layer`).
    impl
        MLA implementation (``naive``, ``compressed``, ``absorbed``, ``absorbed_merged``);
        ``None`` follows the serving default (absorbed in decode, expanded otherwise).
    phase
        For FLOPs and bytes: ``"prefill"`` (``q = S``), ``"decode"`` (``q = 1``) or
        ``"chunk"`` (``q`` stays a symbol). ``None`` keeps ``q`` and the pair count
        ``P`` as symbols.
    stage
        Restrict ``attention_flops`` to one stage (``q_proj``, ``kv_proj``, ``kv_up``,
        ``absorb``, ``core``, ``o_proj``).
    causal
        Count only the pairs a causal kernel needs: ``P = q (2 S - q + 1) / 2``.
    q_lora
        MLA with query compression (``d_cq``) or a plain ``W_Q``.
    bias, out_bias
        Biases on the query/key/value projections and on the output projection
        (``out_bias`` None: as ``bias``; Qwen2 has the first and not the second).
    rope
        RoPE applied (GPT-2's learned positions: False).

    Examples
    --------
    >>> formula("attention_flops", "mla", "absorbed", phase="decode", stage="core")
    2*B*L*S*n_h*(2*d_c + d_rope)
    """
    args.choice("quantity", quantity, QUANTITIES)
    args.choice("variant", variant, FORMULA_VARIANTS)
    args.choice("phase", phase, PHASES, allow_none=True)
    args.choice("stage", stage, STAGES, allow_none=True)
    if impl is not None and not isinstance(impl, str):
        raise InvalidArgumentError("impl", f"must be an implementation name or None, got {impl!r}")
    causal, q_lora = args.flag("causal", causal), args.flag("q_lora", q_lora)
    bias, rope = args.flag("bias", bias), args.flag("rope", rope)
    out_bias = bias if out_bias is None else args.flag("out_bias", out_bias)
    if stage is not None and quantity != "attention_flops":
        raise InvalidArgumentError("stage", "only attention_flops is broken down by stage")
    if variant in V4_VARIANTS:
        return _v4_formula(quantity, variant, impl, phase, stage)
    return _expression(quantity, variant, impl, phase, stage, causal, q_lora, bias, rope, out_bias)


@functools.lru_cache(maxsize=512)
def _expression(
    quantity: str,
    variant: Variant,
    impl: Impl | None,
    phase: Phase | None,
    stage: str | None,
    causal: bool,
    q_lora: bool,
    bias: bool,
    rope: bool,
    out_bias: bool,
) -> Any:
    """:func:`formula`'s expression of its checked arguments, built once a process (sympy's
    expressions are immutable: the factoring and collecting take a second or more for the MLA
    and DSA variants, and a model's --subs, report and tests ask for the same ones again)."""
    # deferred: sympy loads only when a formula is asked for
    import sympy as sp

    from mlacalc.cost import symbols as s

    layer = _layer(variant, impl, phase, q_lora)

    if quantity == "kv_cache_elements":
        expr = layer.kv_row_elements
    elif quantity == "kv_cache_bytes":
        expr = s.L * s.B * s.S * layer.kv_row_bytes
    elif quantity == "attention_params":
        expr = sp.Add(*layer.params.values())
    elif quantity == "attention_flops":
        expr = s.L * layer.matmul_flops(stage)
    elif quantity == "elementwise_flops":
        expr = s.L * layer.elementwise_flops()
    elif quantity == "unfused_bytes":
        expr = s.L * layer.unfused_bytes()
    else:
        expr = s.L * layer.fused_bytes()

    subs: dict = {s.beta_qkv: int(bias), s.beta_o: int(out_bias), s.rho: int(rope)}
    if variant not in ("mla", "dsa"):  # one head width: d_v is MiMo-V2-Flash's alone (model_dims)
        subs[s.d_v] = s.d_h
    if variant == "mha":
        subs[s.n_kv] = s.n_h
    elif variant == "mqa":
        subs[s.n_kv] = 1
    expr = expr.subs(subs)
    pairs = s.q * (2 * s.S - s.q + 1) / 2 if causal else s.q * s.S
    expr = expr.subs(s.P, pairs)
    if phase == "prefill":
        expr = expr.subs(s.q, s.S)
    elif phase == "decode":
        expr = expr.subs(s.q, 1)
    if variant == "dsa":  # factored with min(S, k) and P_k as symbols, then put in
        # deferred: the symbolic layers load sympy; the numeric path never does
        from mlacalc.cost.formulas.dsa_layer import KEYS, KEYS_ATTENDED

        pairs_k = _window_pairs(phase, causal)
        grouped = sp.factor_terms(sp.collect(sp.expand(expr), [s.P_k, KEYS], func=sp.factor))
        return grouped.subs({KEYS: KEYS_ATTENDED, s.P_k: pairs_k})
    return sp.factor(expr)


def _v4_formula(
    quantity: str, variant: str, impl: str | None, phase: str | None, stage: str | None
):
    """A DeepSeek-V4 layer's formula (:mod:`mlacalc.cost.formulas.compressed_layer`), each
    argument it has no formula for refused by name."""
    # deferred: the symbolic layers load sympy; the numeric path never does
    from mlacalc.cost.formulas import compressed_layer as v4

    what = f"DeepSeek-V4's {variant} layer"
    if quantity not in V4_QUANTITIES:
        raise InvalidArgumentError(
            "quantity",
            f"{what} has formulas of {' and '.join(V4_QUANTITIES)} only, not {quantity}; "
            "mlacalc report counts the rest",
        )
    if impl is not None:
        raise InvalidArgumentError("impl", f"{what} has one implementation, got {impl!r}")
    if quantity == "kv_cache_bytes":
        return v4.kv_cache_bytes(variant)
    if phase not in ("prefill", "decode"):
        got = "none given" if phase is None else f"not {phase}"
        raise InvalidArgumentError(
            "phase",
            f"{what}'s attention_flops is written for phase prefill (q = S) or decode (q = 1), "
            f"{got}: its window and pooled keys make a chunk's a long sum",
        )
    if stage is not None and stage not in v4.STAGES:
        raise InvalidArgumentError(
            "stage", f"{what} has no {stage} stage: its stages are {', '.join(v4.STAGES)}"
        )
    return v4.attention_flops(variant, phase, stage)


def _window_pairs(phase: str | None, causal: bool):
    """``P_k``: the (query, key) pairs a head of a DSA core computes, each query attending at
    most ``k`` keys (:func:`mlacalc.cost.attention.attended_pairs` with a window of ``k``).
    Causal, the query at 1-based position ``j`` attends ``min(j, k)`` keys."""
    # deferred: sympy loads only when a formula is asked for
    import sympy as sp

    from mlacalc.cost import symbols as s

    S, q, k = s.S, s.q, s.k
    if phase == "decode":
        return sp.Min(S, k)
    if not causal:
        return (S if phase == "prefill" else q) * sp.Min(S, k)
    if phase == "prefill":  # positions 1 .. S
        return sp.Piecewise((S * (S + 1) / 2, k >= S), (k * (k + 1) / 2 + (S - k) * k, True))
    lo = S - q + 1  # a chunk (or q symbolic): positions S - q + 1 .. S
    return sp.Piecewise(
        (q * (2 * S - q + 1) / 2, k >= S),
        (q * k, lo >= k),
        ((lo + k) * (k - lo + 1) / 2 + (S - k) * k, True),
    )
