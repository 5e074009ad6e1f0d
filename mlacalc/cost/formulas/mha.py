"""MHA, GQA and MQA: one formula family, parameterised by the KV heads ``n_kv``.

MHA is ``n_kv = n_h`` and MQA is ``n_kv = 1``. Per token and layer the cache holds
one K and one V vector per KV head: ``2 * n_kv * d_h`` elements (DeepSeek-V2 tech
report, Table 1: MHA ``2 n_h d_h l``, GQA ``2 n_g d_h l``, MQA ``2 d_h l``). The value
heads have a width ``d_v`` of their own (``d_v = d_h`` for every model but MiMo-V2-Flash,
whose values are narrower than its queries and keys): ``v_proj``, the value products,
``o_proj`` and the V half of the cache row use it; :func:`mlacalc.cost.symbolic.formula`
prints the formulas with ``d_v = d_h``.

The op sequence is the one the reference layer in :mod:`mlacalc.bench.torch_layers`
runs: Q and K/V projections of the ``q`` new tokens, RoPE, the cache write, the
score product against ``S`` cached keys (query heads grouped per KV head, so each
K/V head is read once), softmax, probabilities times values, output projection.
"""

from __future__ import annotations

from mlacalc.cost.formulas.ops import ROPE_FLOPS_PER_ELEMENT, SOFTMAX_FLOPS_PER_ELEMENT, Layer, Op
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
    d_h,
    d_v,
    n_h,
    n_kv,
    q,
    rho,
)
from mlacalc.words.vocab import layer_key

__all__ = ["layer"]


def layer() -> Layer:
    """The MHA/GQA/MQA layer (FLOPs, bytes, cache row, parameters)."""
    T = B * q  # new tokens in the step
    scores = B * n_h * q * S  # materialised score elements
    kv_row = n_kv * (d_h + d_v)  # cached elements per token per layer: K and V
    params = {
        "q_proj": d * n_h * d_h + beta_qkv * n_h * d_h,
        "k_proj": d * n_kv * d_h + beta_qkv * n_kv * d_h,
        "v_proj": d * n_kv * d_v + beta_qkv * n_kv * d_v,
        "o_proj": n_h * d_v * d + beta_o * d,
    }
    ops = (
        Op(
            "q_proj",
            "q_proj",
            "matmul",
            2 * T * d * n_h * d_h,
            shape=(1, T, n_h * d_h, d),
            act_read=T * d * b_a,
            weight_read=params["q_proj"] * b_w,
            act_write=T * n_h * d_h * b_a,
        ),
        Op(
            "kv_proj",
            "kv_proj",
            "matmul",
            2 * T * d * kv_row,
            shape=(1, T, kv_row, d),
            act_read=T * d * b_a,
            weight_read=(params["k_proj"] + params["v_proj"]) * b_w,
            act_write=T * kv_row * b_a,
        ),
        Op(
            "rope",
            "rope",
            "elementwise",
            rho * ROPE_FLOPS_PER_ELEMENT * T * (n_h + n_kv) * d_h,
            act_read=rho * T * (n_h + n_kv) * d_h * b_a,
            act_write=rho * T * (n_h + n_kv) * d_h * b_a,
        ),
        Op(
            "cache_write",
            "cache",
            "elementwise",
            0 * T,
            act_read=T * kv_row * b_a,
            cache_write=T * kv_row * b,
        ),
        Op(
            "scores",
            "core",
            "matmul",
            2 * B * n_h * P * d_h,
            shape=(B * n_kv, n_h / n_kv * q, S, d_h),
            act_read=T * n_h * d_h * b_a,
            cache_read=B * S * n_kv * d_h * b,
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
            shape=(B * n_kv, n_h / n_kv * q, d_v, S),
            act_read=scores * b_a,
            cache_read=B * S * n_kv * d_v * b,
            act_write=T * n_h * d_v * b_a,
        ),
        Op(
            "o_proj",
            "o_proj",
            "matmul",
            2 * T * n_h * d_v * d,
            shape=(1, T, d, n_h * d_v),
            act_read=T * n_h * d_v * b_a,
            weight_read=params["o_proj"] * b_w,
            act_write=T * d * b_a,
        ),
    )
    return Layer(
        key=layer_key(False, "standard", False),
        ops=ops,
        kv_row_elements=kv_row,
        kv_row_bytes=kv_row * b,
        params=params,
    )
