"""Multi-head latent attention (DeepSeek-V2 section 2.1; DeepSeek-V3 ``inference/model.py``).

Projections, with decoupled RoPE and optional query compression:

- query: ``c_q = W_DQ x`` (``d -> d_cq``, RMSNorm), ``[q_nope; q_rope] = W_UQ c_q``
  (``d_cq -> n_h (d_nope + d_rope)``); without compression one ``W_Q``
  (``d -> n_h (d_nope + d_rope)``);
- key/value: ``[c_kv; k_rope] = W_DKV x`` (``d -> d_c + d_rope``, RMSNorm on ``c_kv``),
  ``[k_nope; v] = W_UKV c_kv`` (``d_c -> n_h (d_nope + d_v)``);
- output: ``W_O`` (``n_h d_v -> d``).

Implementations (what the cache holds, what each step computes):

- ``naive``: cache the expanded per-head K (``d_nope + d_rope``) and V (``d_v``):
  ``n_h (d_nope + d_rope + d_v)`` elements per token per layer; ``W_UKV`` runs on
  the new tokens only.
- ``compressed``: cache ``c_kv`` and ``k_rope`` (``d_c + d_rope``); every step
  re-expands all ``S`` cached latents through ``W_UKV``.
- ``absorbed``: same cache; ``W_UK`` is applied to the query (``q_nope -> d_c``),
  attention runs in latent space against ``[c_kv; k_rope]`` (an MQA with
  ``d_c + d_rope`` wide keys and ``d_c`` wide values), ``W_UV`` after attention.
- ``absorbed_merged``: ``W_UQ W_UK`` and ``W_UV W_O`` multiplied ahead of time.

Per (query, key) pair and head the attention core costs ``2 (d_nope + d_rope + d_v)``
FLOPs expanded and ``2 (2 d_c + d_rope)`` absorbed: 320 vs 1088 for DeepSeek-V3.
"""

from __future__ import annotations

import sympy as sp

from mlacalc.cost.formulas.ops import (
    NORM_FLOPS_PER_ELEMENT,
    ROPE_FLOPS_PER_ELEMENT,
    SOFTMAX_FLOPS_PER_ELEMENT,
    Layer,
    Op,
)
from mlacalc.cost.symbols import (
    B,
    P,
    S,
    b,
    b_a,
    b_w,
    beta_o,
    beta_qkv,
    d,
    d_c,
    d_cq,
    d_nope,
    d_rope,
    d_v,
    n_h,
    q,
)
from mlacalc.words.vocab import MLA_IMPLEMENTATIONS, layer_key

__all__ = ["IMPLEMENTATIONS", "layer", "params"]

IMPLEMENTATIONS = MLA_IMPLEMENTATIONS


def params(q_lora: bool) -> dict[str, sp.Expr]:
    """Parameters of each projection as the Hugging Face DeepSeek-V2/V3 attention holds them.

    ``beta_qkv`` stands for ``attention_bias`` on ``q_a_proj``/``kv_a_proj_with_mqa``
    (and on ``q_proj`` without compression); ``beta_o`` for the ``o_proj`` bias.
    """
    out: dict[str, sp.Expr] = {}
    if q_lora:
        out["q_a_proj"] = d * d_cq + beta_qkv * d_cq
        out["q_a_layernorm"] = d_cq
        out["q_b_proj"] = d_cq * n_h * (d_nope + d_rope)
    else:
        out["q_proj"] = d * n_h * (d_nope + d_rope) + beta_qkv * n_h * (d_nope + d_rope)
    out["kv_a_proj_with_mqa"] = d * (d_c + d_rope) + beta_qkv * (d_c + d_rope)
    out["kv_a_layernorm"] = d_c
    out["kv_b_proj"] = d_c * n_h * (d_nope + d_v)
    out["o_proj"] = n_h * d_v * d + beta_o * d
    return out


#: Tokens of the step, (query, key) pairs per head, and the latent cache row's elements.
_T = B * q
_SCORES = B * n_h * q * S
_LATENT_ROW = d_c + d_rope


def layer(impl: str, q_lora: bool) -> Layer:
    """The MLA layer for one implementation, with or without query compression."""
    if impl not in IMPLEMENTATIONS:
        raise ValueError(f"unknown MLA implementation {impl!r}")
    p = params(q_lora)
    merged = impl == "absorbed_merged"
    ops = _query_ops(q_lora, merged, p) + _kv_down_ops(p)
    if impl == "naive":
        row = n_h * (d_nope + d_rope + d_v)
        ops += _naive_core_ops(p["kv_b_proj"], row)
    elif impl == "compressed":
        row = _LATENT_ROW
        ops += _compressed_core_ops(p["kv_b_proj"])
    else:
        row = _LATENT_ROW
        ops += _absorbed_core_ops(merged)
    ops.append(_output_op(merged, p))
    return Layer(
        key=layer_key(True, impl, q_lora),
        ops=tuple(ops),
        kv_row_elements=row,
        kv_row_bytes=row * b,
        params=p,
    )


def _query_ops(q_lora: bool, merged: bool, p: dict[str, sp.Expr]) -> list[Op]:
    """The query path: ``W_DQ``, its norm and ``W_UQ`` with compression, else one ``W_Q``.
    Merged, the up-projection carries ``W_UQ W_UK`` (``d_c`` wide per head) beside RoPE."""
    T = _T
    q_width = n_h * (d_c + d_rope) if merged else n_h * (d_nope + d_rope)
    if not q_lora:
        w_q = d * q_width + beta_qkv * q_width
        return [
            Op(
                "q_proj",
                "q_proj",
                "matmul",
                2 * T * d * q_width,
                shape=(1, T, q_width, d),
                act_read=T * d * b_a,
                weight_read=w_q * b_w,
                act_write=T * q_width * b_a,
            )
        ]
    w_q = d_cq * q_width  # W_UQ, or W_UQ.W_UK merged with the RoPE columns
    return [
        Op(
            "q_a_proj",
            "q_proj",
            "matmul",
            2 * T * d * d_cq,
            shape=(1, T, d_cq, d),
            act_read=T * d * b_a,
            weight_read=p["q_a_proj"] * b_w,
            act_write=T * d_cq * b_a,
        ),
        Op(
            "q_a_layernorm",
            "norm",
            "elementwise",
            NORM_FLOPS_PER_ELEMENT * T * d_cq,
            act_read=T * d_cq * b_a,
            weight_read=d_cq * b_w,
            act_write=T * d_cq * b_a,
        ),
        Op(
            "q_b_proj",
            "q_proj",
            "matmul",
            2 * T * d_cq * q_width,
            shape=(1, T, q_width, d_cq),
            act_read=T * d_cq * b_a,
            weight_read=w_q * b_w,
            act_write=T * q_width * b_a,
        ),
    ]


def _kv_down_ops(p: dict[str, sp.Expr]) -> list[Op]:
    """The shared key/value down-projection ``W_DKV``, the latent's norm, and RoPE on the
    query heads and the one shared RoPE key."""
    T = _T
    return [
        Op(
            "kv_a_proj",
            "kv_proj",
            "matmul",
            2 * T * d * _LATENT_ROW,
            shape=(1, T, _LATENT_ROW, d),
            act_read=T * d * b_a,
            weight_read=p["kv_a_proj_with_mqa"] * b_w,
            act_write=T * _LATENT_ROW * b_a,
        ),
        Op(
            "kv_a_layernorm",
            "norm",
            "elementwise",
            NORM_FLOPS_PER_ELEMENT * T * d_c,
            act_read=T * d_c * b_a,
            weight_read=d_c * b_w,
            act_write=T * d_c * b_a,
        ),
        Op(
            "rope",
            "rope",
            "elementwise",
            ROPE_FLOPS_PER_ELEMENT * T * (n_h + 1) * d_rope,
            act_read=T * (n_h + 1) * d_rope * b_a,
            act_write=T * (n_h + 1) * d_rope * b_a,
        ),
    ]


def _softmax_op() -> Op:
    """Softmax over every (query, key) pair of every head."""
    return Op(
        "softmax",
        "softmax",
        "elementwise",
        SOFTMAX_FLOPS_PER_ELEMENT * _SCORES,
        act_read=_SCORES * b_a,
        act_write=_SCORES * b_a,
    )


def _latent_cache_write_op() -> Op:
    """The new tokens' ``[c_kv; k_rope]`` rows written to the cache."""
    return Op(
        "cache_write",
        "cache",
        "elementwise",
        0 * _T,
        act_read=_T * _LATENT_ROW * b_a,
        cache_write=_T * _LATENT_ROW * b,
    )


def _naive_core_ops(w_ukv: sp.Expr, row: sp.Expr) -> list[Op]:
    """``naive``: ``W_UKV`` on the new tokens, their expanded K and V (``row`` elements a
    token) cached, attention per head against the expanded cache."""
    T, scores = _T, _SCORES
    return [
        Op(
            "kv_b_proj",
            "kv_up",
            "matmul",
            2 * T * d_c * n_h * (d_nope + d_v),
            shape=(1, T, n_h * (d_nope + d_v), d_c),
            act_read=T * d_c * b_a,
            weight_read=w_ukv * b_w,
            act_write=T * n_h * (d_nope + d_v) * b_a,
        ),
        Op(
            "cache_write",
            "cache",
            "elementwise",
            0 * T,
            act_read=T * (n_h * (d_nope + d_v) + d_rope) * b_a,
            cache_write=T * row * b,
        ),
        Op(
            "scores",
            "core",
            "matmul",
            2 * B * n_h * P * (d_nope + d_rope),
            shape=(B * n_h, q, S, d_nope + d_rope),
            act_read=T * n_h * (d_nope + d_rope) * b_a,
            cache_read=B * S * n_h * (d_nope + d_rope) * b,
            act_write=scores * b_a,
        ),
        _softmax_op(),
        Op(
            "pv",
            "core",
            "matmul",
            2 * B * n_h * P * d_v,
            shape=(B * n_h, q, d_v, S),
            act_read=scores * b_a,
            cache_read=B * S * n_h * d_v * b,
            act_write=T * n_h * d_v * b_a,
        ),
    ]


def _compressed_core_ops(w_ukv: sp.Expr) -> list[Op]:
    """``compressed``: the latent row cached, all ``S`` cached latents re-expanded through
    ``W_UKV`` every step, the RoPE key joined on, attention per head on the expansion."""
    T, scores = _T, _SCORES
    return [
        _latent_cache_write_op(),
        Op(
            "kv_b_proj",
            "kv_up",
            "matmul",
            2 * B * S * d_c * n_h * (d_nope + d_v),
            shape=(1, B * S, n_h * (d_nope + d_v), d_c),
            cache_read=B * S * d_c * b,
            weight_read=w_ukv * b_w,
            act_write=B * S * n_h * (d_nope + d_v) * b_a,
        ),
        Op(
            "k_assemble",
            "layout",
            "elementwise",
            0 * T,
            act_read=B * S * n_h * d_nope * b_a,
            cache_read=B * S * d_rope * b,
            act_write=B * S * n_h * (d_nope + d_rope) * b_a,
        ),
        Op(
            "scores",
            "core",
            "matmul",
            2 * B * n_h * P * (d_nope + d_rope),
            shape=(B * n_h, q, S, d_nope + d_rope),
            act_read=T * n_h * (d_nope + d_rope) * b_a + B * S * n_h * (d_nope + d_rope) * b_a,
            act_write=scores * b_a,
        ),
        _softmax_op(),
        Op(
            "pv",
            "core",
            "matmul",
            2 * B * n_h * P * d_v,
            shape=(B * n_h, q, d_v, S),
            act_read=scores * b_a + B * S * n_h * d_v * b_a,
            act_write=T * n_h * d_v * b_a,
        ),
    ]


def _absorbed_core_ops(merged: bool) -> list[Op]:
    """``absorbed`` / ``absorbed_merged``: the latent row cached, attention in latent space
    (all heads share the cache, an MQA); unmerged, ``W_UK`` is applied to the query before
    and ``W_UV`` to the output after."""
    T, scores = _T, _SCORES
    ops = [_latent_cache_write_op()]
    if not merged:
        ops += [
            Op(
                "q_absorb",
                "absorb",
                "matmul",
                2 * T * n_h * d_nope * d_c,
                shape=(n_h, T, d_c, d_nope),
                act_read=T * n_h * d_nope * b_a,
                weight_read=n_h * d_nope * d_c * b_w,
                act_write=T * n_h * d_c * b_a,
            ),
            Op(
                "q_assemble",
                "layout",
                "elementwise",
                0 * T,
                act_read=T * n_h * (d_c + d_rope) * b_a,
                act_write=T * n_h * (d_c + d_rope) * b_a,
            ),
        ]
    ops += [
        Op(
            "scores",
            "core",
            "matmul",
            2 * B * n_h * P * (d_c + d_rope),
            shape=(B, q * n_h, S, d_c + d_rope),
            act_read=T * n_h * (d_c + d_rope) * b_a,
            cache_read=B * S * _LATENT_ROW * b,
            act_write=scores * b_a,
        ),
        _softmax_op(),
        Op(
            "pv",
            "core",
            "matmul",
            2 * B * n_h * P * d_c,
            shape=(B, q * n_h, d_c, S),
            act_read=scores * b_a,
            cache_read=B * S * d_c * b,
            act_write=T * n_h * d_c * b_a,
        ),
    ]
    if not merged:
        ops.append(
            Op(
                "o_absorb",
                "absorb",
                "matmul",
                2 * T * n_h * d_c * d_v,
                shape=(n_h, T, d_v, d_c),
                act_read=T * n_h * d_c * b_a,
                weight_read=n_h * d_c * d_v * b_w,
                act_write=T * n_h * d_v * b_a,
            )
        )
    return ops


def _output_op(merged: bool, p: dict[str, sp.Expr]) -> Op:
    """The output projection: ``W_O`` on ``n_h d_v``, or merged ``W_UV W_O`` on ``n_h d_c``."""
    T = _T
    if merged:
        return Op(
            "o_proj",
            "o_proj",
            "matmul",
            2 * T * n_h * d_c * d,
            shape=(1, T, d, n_h * d_c),
            act_read=T * n_h * d_c * b_a,
            weight_read=(n_h * d_c * d + beta_o * d) * b_w,
            act_write=T * d * b_a,
        )
    return Op(
        "o_proj",
        "o_proj",
        "matmul",
        2 * T * n_h * d_v * d,
        shape=(1, T, d, n_h * d_v),
        act_read=T * n_h * d_v * b_a,
        weight_read=p["o_proj"] * b_w,
        act_write=T * d * b_a,
    )
