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


def layer(impl: str, q_lora: bool) -> Layer:
    """The MLA layer for one implementation, with or without query compression."""
    if impl not in IMPLEMENTATIONS:
        raise ValueError(f"unknown MLA implementation {impl!r}")
    T = B * q
    scores = B * n_h * q * S
    p = params(q_lora)
    latent_row = d_c + d_rope
    merged = impl == "absorbed_merged"
    q_width = n_h * (d_c + d_rope) if merged else n_h * (d_nope + d_rope)

    ops: list[Op] = []
    # -- query path
    if q_lora:
        ops += [
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
        ]
        w_q = d_cq * q_width  # W_UQ, or W_UQ.W_UK merged with the RoPE columns
        ops.append(
            Op(
                "q_b_proj",
                "q_proj",
                "matmul",
                2 * T * d_cq * q_width,
                shape=(1, T, q_width, d_cq),
                act_read=T * d_cq * b_a,
                weight_read=w_q * b_w,
                act_write=T * q_width * b_a,
            )
        )
    else:
        w_q = d * q_width + beta_qkv * q_width
        ops.append(
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
        )
    # -- shared key/value down-projection
    ops += [
        Op(
            "kv_a_proj",
            "kv_proj",
            "matmul",
            2 * T * d * latent_row,
            shape=(1, T, latent_row, d),
            act_read=T * d * b_a,
            weight_read=p["kv_a_proj_with_mqa"] * b_w,
            act_write=T * latent_row * b_a,
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
    w_ukv = p["kv_b_proj"]
    if impl == "naive":
        row = n_h * (d_nope + d_rope + d_v)
        ops += [
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
            Op(
                "softmax",
                "softmax",
                "elementwise",
                SOFTMAX_FLOPS_PER_ELEMENT * scores,
                act_read=scores * b_a,
                act_write=scores * b_a,
            ),
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
    elif impl == "compressed":
        row = latent_row
        ops += [
            Op(
                "cache_write",
                "cache",
                "elementwise",
                0 * T,
                act_read=T * latent_row * b_a,
                cache_write=T * latent_row * b,
            ),
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
            Op(
                "softmax",
                "softmax",
                "elementwise",
                SOFTMAX_FLOPS_PER_ELEMENT * scores,
                act_read=scores * b_a,
                act_write=scores * b_a,
            ),
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
    else:
        row = latent_row
        ops.append(
            Op(
                "cache_write",
                "cache",
                "elementwise",
                0 * T,
                act_read=T * latent_row * b_a,
                cache_write=T * latent_row * b,
            )
        )
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
                cache_read=B * S * latent_row * b,
                act_write=scores * b_a,
            ),
            Op(
                "softmax",
                "softmax",
                "elementwise",
                SOFTMAX_FLOPS_PER_ELEMENT * scores,
                act_read=scores * b_a,
                act_write=scores * b_a,
            ),
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
    # -- output projection
    if merged:
        ops.append(
            Op(
                "o_proj",
                "o_proj",
                "matmul",
                2 * T * n_h * d_c * d,
                shape=(1, T, d, n_h * d_c),
                act_read=T * n_h * d_c * b_a,
                weight_read=(n_h * d_c * d + beta_o * d) * b_w,
                act_write=T * d * b_a,
            )
        )
    else:
        ops.append(
            Op(
                "o_proj",
                "o_proj",
                "matmul",
                2 * T * n_h * d_v * d,
                shape=(1, T, d, n_h * d_v),
                act_read=T * n_h * d_v * b_a,
                weight_read=p["o_proj"] * b_w,
                act_write=T * d * b_a,
            )
        )
    return Layer(
        key=layer_key(True, impl, q_lora),
        ops=tuple(ops),
        kv_row_elements=row,
        kv_row_bytes=row * b,
        params=p,
    )
