"""Numeric evaluators generated from the symbolic formulas. Do not edit.

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


ARGS_ops_mha = ('B', 'P', 'S', 'b', 'b_a', 'b_w', 'beta_o', 'beta_qkv', 'd', 'd_h', 'd_v', 'n_h', 'n_kv', 'q', 'rho')


def ops_mha(B, P, S, b, b_a, b_w, beta_o, beta_qkv, d, d_h, d_v, n_h, n_kv, q, rho):
    return (
        OpTerms('q_proj', 'q_proj', 'matmul', 2*B*d*d_h*n_h*q, B*b_a*d*q, b_w*d_h*n_h*(beta_qkv + d), 0, B*b_a*d_h*n_h*q, 0, (1, B*q, d_h*n_h, d)),
        OpTerms('kv_proj', 'kv_proj', 'matmul', 2*B*d*n_kv*q*(d_h + d_v), B*b_a*d*q, b_w*n_kv*(beta_qkv*d_h + beta_qkv*d_v + d*d_h + d*d_v), 0, B*b_a*n_kv*q*(d_h + d_v), 0, (1, B*q, n_kv*(d_h + d_v), d)),
        OpTerms('rope', 'rope', 'elementwise', 3*B*d_h*q*rho*(n_h + n_kv), B*b_a*d_h*q*rho*(n_h + n_kv), 0, 0, B*b_a*d_h*q*rho*(n_h + n_kv), 0, None),
        OpTerms('cache_write', 'cache', 'elementwise', 0, B*b_a*n_kv*q*(d_h + d_v), 0, 0, 0, B*b*n_kv*q*(d_h + d_v), None),
        OpTerms('scores', 'core', 'matmul', 2*B*P*d_h*n_h, B*b_a*d_h*n_h*q, 0, B*S*b*d_h*n_kv, B*S*b_a*n_h*q, 0, (B*n_kv, n_h*q/n_kv, S, d_h)),
        OpTerms('softmax', 'softmax', 'elementwise', 5*B*S*n_h*q, B*S*b_a*n_h*q, 0, 0, B*S*b_a*n_h*q, 0, None),
        OpTerms('pv', 'core', 'matmul', 2*B*P*d_v*n_h, B*S*b_a*n_h*q, 0, B*S*b*d_v*n_kv, B*b_a*d_v*n_h*q, 0, (B*n_kv, n_h*q/n_kv, d_v, S)),
        OpTerms('o_proj', 'o_proj', 'matmul', 2*B*d*d_v*n_h*q, B*b_a*d_v*n_h*q, b_w*d*(beta_o + d_v*n_h), 0, B*b_a*d*q, 0, (1, B*q, d, d_v*n_h)),
    )


ARGS_matmul_flops_mha = ('B', 'P', 'd', 'd_h', 'd_v', 'n_h', 'n_kv', 'q')


def matmul_flops_mha(B, P, d, d_h, d_v, n_h, n_kv, q):
    return 2*B*(d_h + d_v)*(P*n_h + d*n_h*q + d*n_kv*q)


ARGS_kv_row_elements_mha = ('d_h', 'd_v', 'n_kv')


def kv_row_elements_mha(d_h, d_v, n_kv):
    return n_kv*(d_h + d_v)


ARGS_params_mha = ('beta_o', 'beta_qkv', 'd', 'd_h', 'd_v', 'n_h', 'n_kv')


def params_mha(beta_o, beta_qkv, d, d_h, d_v, n_h, n_kv):
    return {
        'q_proj': d_h*n_h*(beta_qkv + d),
        'k_proj': d_h*n_kv*(beta_qkv + d),
        'v_proj': d_v*n_kv*(beta_qkv + d),
        'o_proj': d*(beta_o + d_v*n_h),
    }


ARGS_ops_mla_naive_qlora = ('B', 'P', 'S', 'b', 'b_a', 'b_w', 'beta_o', 'beta_qkv', 'd', 'd_c', 'd_cq', 'd_nope', 'd_rope', 'd_v', 'n_h', 'q')


def ops_mla_naive_qlora(B, P, S, b, b_a, b_w, beta_o, beta_qkv, d, d_c, d_cq, d_nope, d_rope, d_v, n_h, q):
    return (
        OpTerms('q_a_proj', 'q_proj', 'matmul', 2*B*d*d_cq*q, B*b_a*d*q, b_w*d_cq*(beta_qkv + d), 0, B*b_a*d_cq*q, 0, (1, B*q, d_cq, d)),
        OpTerms('q_a_layernorm', 'norm', 'elementwise', 4*B*d_cq*q, B*b_a*d_cq*q, b_w*d_cq, 0, B*b_a*d_cq*q, 0, None),
        OpTerms('q_b_proj', 'q_proj', 'matmul', 2*B*d_cq*n_h*q*(d_nope + d_rope), B*b_a*d_cq*q, b_w*d_cq*n_h*(d_nope + d_rope), 0, B*b_a*n_h*q*(d_nope + d_rope), 0, (1, B*q, n_h*(d_nope + d_rope), d_cq)),
        OpTerms('kv_a_proj', 'kv_proj', 'matmul', 2*B*d*q*(d_c + d_rope), B*b_a*d*q, b_w*(beta_qkv + d)*(d_c + d_rope), 0, B*b_a*q*(d_c + d_rope), 0, (1, B*q, d_c + d_rope, d)),
        OpTerms('kv_a_layernorm', 'norm', 'elementwise', 4*B*d_c*q, B*b_a*d_c*q, b_w*d_c, 0, B*b_a*d_c*q, 0, None),
        OpTerms('rope', 'rope', 'elementwise', 3*B*d_rope*q*(n_h + 1), B*b_a*d_rope*q*(n_h + 1), 0, 0, B*b_a*d_rope*q*(n_h + 1), 0, None),
        OpTerms('kv_b_proj', 'kv_up', 'matmul', 2*B*d_c*n_h*q*(d_nope + d_v), B*b_a*d_c*q, b_w*d_c*n_h*(d_nope + d_v), 0, B*b_a*n_h*q*(d_nope + d_v), 0, (1, B*q, n_h*(d_nope + d_v), d_c)),
        OpTerms('cache_write', 'cache', 'elementwise', 0, B*b_a*q*(d_rope + n_h*(d_nope + d_v)), 0, 0, 0, B*b*n_h*q*(d_nope + d_rope + d_v), None),
        OpTerms('scores', 'core', 'matmul', 2*B*P*n_h*(d_nope + d_rope), B*b_a*n_h*q*(d_nope + d_rope), 0, B*S*b*n_h*(d_nope + d_rope), B*S*b_a*n_h*q, 0, (B*n_h, q, S, d_nope + d_rope)),
        OpTerms('softmax', 'softmax', 'elementwise', 5*B*S*n_h*q, B*S*b_a*n_h*q, 0, 0, B*S*b_a*n_h*q, 0, None),
        OpTerms('pv', 'core', 'matmul', 2*B*P*d_v*n_h, B*S*b_a*n_h*q, 0, B*S*b*d_v*n_h, B*b_a*d_v*n_h*q, 0, (B*n_h, q, d_v, S)),
        OpTerms('o_proj', 'o_proj', 'matmul', 2*B*d*d_v*n_h*q, B*b_a*d_v*n_h*q, b_w*d*(beta_o + d_v*n_h), 0, B*b_a*d*q, 0, (1, B*q, d, d_v*n_h)),
    )


ARGS_matmul_flops_mla_naive_qlora = ('B', 'P', 'd', 'd_c', 'd_cq', 'd_nope', 'd_rope', 'd_v', 'n_h', 'q')


def matmul_flops_mla_naive_qlora(B, P, d, d_c, d_cq, d_nope, d_rope, d_v, n_h, q):
    return 2*B*(P*d_nope*n_h + P*d_rope*n_h + P*d_v*n_h + d*d_c*q + d*d_cq*q + d*d_rope*q + d*d_v*n_h*q + d_c*d_nope*n_h*q + d_c*d_v*n_h*q + d_cq*d_nope*n_h*q + d_cq*d_rope*n_h*q)


ARGS_kv_row_elements_mla_naive_qlora = ('d_nope', 'd_rope', 'd_v', 'n_h')


def kv_row_elements_mla_naive_qlora(d_nope, d_rope, d_v, n_h):
    return n_h*(d_nope + d_rope + d_v)


ARGS_params_mla_naive_qlora = ('beta_o', 'beta_qkv', 'd', 'd_c', 'd_cq', 'd_nope', 'd_rope', 'd_v', 'n_h')


def params_mla_naive_qlora(beta_o, beta_qkv, d, d_c, d_cq, d_nope, d_rope, d_v, n_h):
    return {
        'q_a_proj': d_cq*(beta_qkv + d),
        'q_a_layernorm': d_cq,
        'q_b_proj': d_cq*n_h*(d_nope + d_rope),
        'kv_a_proj_with_mqa': (beta_qkv + d)*(d_c + d_rope),
        'kv_a_layernorm': d_c,
        'kv_b_proj': d_c*n_h*(d_nope + d_v),
        'o_proj': d*(beta_o + d_v*n_h),
    }


ARGS_ops_mla_naive_noqlora = ('B', 'P', 'S', 'b', 'b_a', 'b_w', 'beta_o', 'beta_qkv', 'd', 'd_c', 'd_nope', 'd_rope', 'd_v', 'n_h', 'q')


def ops_mla_naive_noqlora(B, P, S, b, b_a, b_w, beta_o, beta_qkv, d, d_c, d_nope, d_rope, d_v, n_h, q):
    return (
        OpTerms('q_proj', 'q_proj', 'matmul', 2*B*d*n_h*q*(d_nope + d_rope), B*b_a*d*q, b_w*n_h*(beta_qkv + d)*(d_nope + d_rope), 0, B*b_a*n_h*q*(d_nope + d_rope), 0, (1, B*q, n_h*(d_nope + d_rope), d)),
        OpTerms('kv_a_proj', 'kv_proj', 'matmul', 2*B*d*q*(d_c + d_rope), B*b_a*d*q, b_w*(beta_qkv + d)*(d_c + d_rope), 0, B*b_a*q*(d_c + d_rope), 0, (1, B*q, d_c + d_rope, d)),
        OpTerms('kv_a_layernorm', 'norm', 'elementwise', 4*B*d_c*q, B*b_a*d_c*q, b_w*d_c, 0, B*b_a*d_c*q, 0, None),
        OpTerms('rope', 'rope', 'elementwise', 3*B*d_rope*q*(n_h + 1), B*b_a*d_rope*q*(n_h + 1), 0, 0, B*b_a*d_rope*q*(n_h + 1), 0, None),
        OpTerms('kv_b_proj', 'kv_up', 'matmul', 2*B*d_c*n_h*q*(d_nope + d_v), B*b_a*d_c*q, b_w*d_c*n_h*(d_nope + d_v), 0, B*b_a*n_h*q*(d_nope + d_v), 0, (1, B*q, n_h*(d_nope + d_v), d_c)),
        OpTerms('cache_write', 'cache', 'elementwise', 0, B*b_a*q*(d_rope + n_h*(d_nope + d_v)), 0, 0, 0, B*b*n_h*q*(d_nope + d_rope + d_v), None),
        OpTerms('scores', 'core', 'matmul', 2*B*P*n_h*(d_nope + d_rope), B*b_a*n_h*q*(d_nope + d_rope), 0, B*S*b*n_h*(d_nope + d_rope), B*S*b_a*n_h*q, 0, (B*n_h, q, S, d_nope + d_rope)),
        OpTerms('softmax', 'softmax', 'elementwise', 5*B*S*n_h*q, B*S*b_a*n_h*q, 0, 0, B*S*b_a*n_h*q, 0, None),
        OpTerms('pv', 'core', 'matmul', 2*B*P*d_v*n_h, B*S*b_a*n_h*q, 0, B*S*b*d_v*n_h, B*b_a*d_v*n_h*q, 0, (B*n_h, q, d_v, S)),
        OpTerms('o_proj', 'o_proj', 'matmul', 2*B*d*d_v*n_h*q, B*b_a*d_v*n_h*q, b_w*d*(beta_o + d_v*n_h), 0, B*b_a*d*q, 0, (1, B*q, d, d_v*n_h)),
    )


ARGS_matmul_flops_mla_naive_noqlora = ('B', 'P', 'd', 'd_c', 'd_nope', 'd_rope', 'd_v', 'n_h', 'q')


def matmul_flops_mla_naive_noqlora(B, P, d, d_c, d_nope, d_rope, d_v, n_h, q):
    return 2*B*(P*d_nope*n_h + P*d_rope*n_h + P*d_v*n_h + d*d_c*q + d*d_nope*n_h*q + d*d_rope*n_h*q + d*d_rope*q + d*d_v*n_h*q + d_c*d_nope*n_h*q + d_c*d_v*n_h*q)


ARGS_kv_row_elements_mla_naive_noqlora = ('d_nope', 'd_rope', 'd_v', 'n_h')


def kv_row_elements_mla_naive_noqlora(d_nope, d_rope, d_v, n_h):
    return n_h*(d_nope + d_rope + d_v)


ARGS_params_mla_naive_noqlora = ('beta_o', 'beta_qkv', 'd', 'd_c', 'd_nope', 'd_rope', 'd_v', 'n_h')


def params_mla_naive_noqlora(beta_o, beta_qkv, d, d_c, d_nope, d_rope, d_v, n_h):
    return {
        'q_proj': n_h*(beta_qkv + d)*(d_nope + d_rope),
        'kv_a_proj_with_mqa': (beta_qkv + d)*(d_c + d_rope),
        'kv_a_layernorm': d_c,
        'kv_b_proj': d_c*n_h*(d_nope + d_v),
        'o_proj': d*(beta_o + d_v*n_h),
    }


ARGS_ops_mla_compressed_qlora = ('B', 'P', 'S', 'b', 'b_a', 'b_w', 'beta_o', 'beta_qkv', 'd', 'd_c', 'd_cq', 'd_nope', 'd_rope', 'd_v', 'n_h', 'q')


def ops_mla_compressed_qlora(B, P, S, b, b_a, b_w, beta_o, beta_qkv, d, d_c, d_cq, d_nope, d_rope, d_v, n_h, q):
    return (
        OpTerms('q_a_proj', 'q_proj', 'matmul', 2*B*d*d_cq*q, B*b_a*d*q, b_w*d_cq*(beta_qkv + d), 0, B*b_a*d_cq*q, 0, (1, B*q, d_cq, d)),
        OpTerms('q_a_layernorm', 'norm', 'elementwise', 4*B*d_cq*q, B*b_a*d_cq*q, b_w*d_cq, 0, B*b_a*d_cq*q, 0, None),
        OpTerms('q_b_proj', 'q_proj', 'matmul', 2*B*d_cq*n_h*q*(d_nope + d_rope), B*b_a*d_cq*q, b_w*d_cq*n_h*(d_nope + d_rope), 0, B*b_a*n_h*q*(d_nope + d_rope), 0, (1, B*q, n_h*(d_nope + d_rope), d_cq)),
        OpTerms('kv_a_proj', 'kv_proj', 'matmul', 2*B*d*q*(d_c + d_rope), B*b_a*d*q, b_w*(beta_qkv + d)*(d_c + d_rope), 0, B*b_a*q*(d_c + d_rope), 0, (1, B*q, d_c + d_rope, d)),
        OpTerms('kv_a_layernorm', 'norm', 'elementwise', 4*B*d_c*q, B*b_a*d_c*q, b_w*d_c, 0, B*b_a*d_c*q, 0, None),
        OpTerms('rope', 'rope', 'elementwise', 3*B*d_rope*q*(n_h + 1), B*b_a*d_rope*q*(n_h + 1), 0, 0, B*b_a*d_rope*q*(n_h + 1), 0, None),
        OpTerms('cache_write', 'cache', 'elementwise', 0, B*b_a*q*(d_c + d_rope), 0, 0, 0, B*b*q*(d_c + d_rope), None),
        OpTerms('kv_b_proj', 'kv_up', 'matmul', 2*B*S*d_c*n_h*(d_nope + d_v), 0, b_w*d_c*n_h*(d_nope + d_v), B*S*b*d_c, B*S*b_a*n_h*(d_nope + d_v), 0, (1, B*S, n_h*(d_nope + d_v), d_c)),
        OpTerms('k_assemble', 'layout', 'elementwise', 0, B*S*b_a*d_nope*n_h, 0, B*S*b*d_rope, B*S*b_a*n_h*(d_nope + d_rope), 0, None),
        OpTerms('scores', 'core', 'matmul', 2*B*P*n_h*(d_nope + d_rope), B*b_a*n_h*(S + q)*(d_nope + d_rope), 0, 0, B*S*b_a*n_h*q, 0, (B*n_h, q, S, d_nope + d_rope)),
        OpTerms('softmax', 'softmax', 'elementwise', 5*B*S*n_h*q, B*S*b_a*n_h*q, 0, 0, B*S*b_a*n_h*q, 0, None),
        OpTerms('pv', 'core', 'matmul', 2*B*P*d_v*n_h, B*S*b_a*n_h*(d_v + q), 0, 0, B*b_a*d_v*n_h*q, 0, (B*n_h, q, d_v, S)),
        OpTerms('o_proj', 'o_proj', 'matmul', 2*B*d*d_v*n_h*q, B*b_a*d_v*n_h*q, b_w*d*(beta_o + d_v*n_h), 0, B*b_a*d*q, 0, (1, B*q, d, d_v*n_h)),
    )


ARGS_matmul_flops_mla_compressed_qlora = ('B', 'P', 'S', 'd', 'd_c', 'd_cq', 'd_nope', 'd_rope', 'd_v', 'n_h', 'q')


def matmul_flops_mla_compressed_qlora(B, P, S, d, d_c, d_cq, d_nope, d_rope, d_v, n_h, q):
    return 2*B*(P*d_nope*n_h + P*d_rope*n_h + P*d_v*n_h + S*d_c*d_nope*n_h + S*d_c*d_v*n_h + d*d_c*q + d*d_cq*q + d*d_rope*q + d*d_v*n_h*q + d_cq*d_nope*n_h*q + d_cq*d_rope*n_h*q)


ARGS_kv_row_elements_mla_compressed_qlora = ('d_c', 'd_rope')


def kv_row_elements_mla_compressed_qlora(d_c, d_rope):
    return d_c + d_rope


ARGS_params_mla_compressed_qlora = ('beta_o', 'beta_qkv', 'd', 'd_c', 'd_cq', 'd_nope', 'd_rope', 'd_v', 'n_h')


def params_mla_compressed_qlora(beta_o, beta_qkv, d, d_c, d_cq, d_nope, d_rope, d_v, n_h):
    return {
        'q_a_proj': d_cq*(beta_qkv + d),
        'q_a_layernorm': d_cq,
        'q_b_proj': d_cq*n_h*(d_nope + d_rope),
        'kv_a_proj_with_mqa': (beta_qkv + d)*(d_c + d_rope),
        'kv_a_layernorm': d_c,
        'kv_b_proj': d_c*n_h*(d_nope + d_v),
        'o_proj': d*(beta_o + d_v*n_h),
    }


ARGS_ops_mla_compressed_noqlora = ('B', 'P', 'S', 'b', 'b_a', 'b_w', 'beta_o', 'beta_qkv', 'd', 'd_c', 'd_nope', 'd_rope', 'd_v', 'n_h', 'q')


def ops_mla_compressed_noqlora(B, P, S, b, b_a, b_w, beta_o, beta_qkv, d, d_c, d_nope, d_rope, d_v, n_h, q):
    return (
        OpTerms('q_proj', 'q_proj', 'matmul', 2*B*d*n_h*q*(d_nope + d_rope), B*b_a*d*q, b_w*n_h*(beta_qkv + d)*(d_nope + d_rope), 0, B*b_a*n_h*q*(d_nope + d_rope), 0, (1, B*q, n_h*(d_nope + d_rope), d)),
        OpTerms('kv_a_proj', 'kv_proj', 'matmul', 2*B*d*q*(d_c + d_rope), B*b_a*d*q, b_w*(beta_qkv + d)*(d_c + d_rope), 0, B*b_a*q*(d_c + d_rope), 0, (1, B*q, d_c + d_rope, d)),
        OpTerms('kv_a_layernorm', 'norm', 'elementwise', 4*B*d_c*q, B*b_a*d_c*q, b_w*d_c, 0, B*b_a*d_c*q, 0, None),
        OpTerms('rope', 'rope', 'elementwise', 3*B*d_rope*q*(n_h + 1), B*b_a*d_rope*q*(n_h + 1), 0, 0, B*b_a*d_rope*q*(n_h + 1), 0, None),
        OpTerms('cache_write', 'cache', 'elementwise', 0, B*b_a*q*(d_c + d_rope), 0, 0, 0, B*b*q*(d_c + d_rope), None),
        OpTerms('kv_b_proj', 'kv_up', 'matmul', 2*B*S*d_c*n_h*(d_nope + d_v), 0, b_w*d_c*n_h*(d_nope + d_v), B*S*b*d_c, B*S*b_a*n_h*(d_nope + d_v), 0, (1, B*S, n_h*(d_nope + d_v), d_c)),
        OpTerms('k_assemble', 'layout', 'elementwise', 0, B*S*b_a*d_nope*n_h, 0, B*S*b*d_rope, B*S*b_a*n_h*(d_nope + d_rope), 0, None),
        OpTerms('scores', 'core', 'matmul', 2*B*P*n_h*(d_nope + d_rope), B*b_a*n_h*(S + q)*(d_nope + d_rope), 0, 0, B*S*b_a*n_h*q, 0, (B*n_h, q, S, d_nope + d_rope)),
        OpTerms('softmax', 'softmax', 'elementwise', 5*B*S*n_h*q, B*S*b_a*n_h*q, 0, 0, B*S*b_a*n_h*q, 0, None),
        OpTerms('pv', 'core', 'matmul', 2*B*P*d_v*n_h, B*S*b_a*n_h*(d_v + q), 0, 0, B*b_a*d_v*n_h*q, 0, (B*n_h, q, d_v, S)),
        OpTerms('o_proj', 'o_proj', 'matmul', 2*B*d*d_v*n_h*q, B*b_a*d_v*n_h*q, b_w*d*(beta_o + d_v*n_h), 0, B*b_a*d*q, 0, (1, B*q, d, d_v*n_h)),
    )


ARGS_matmul_flops_mla_compressed_noqlora = ('B', 'P', 'S', 'd', 'd_c', 'd_nope', 'd_rope', 'd_v', 'n_h', 'q')


def matmul_flops_mla_compressed_noqlora(B, P, S, d, d_c, d_nope, d_rope, d_v, n_h, q):
    return 2*B*(P*d_nope*n_h + P*d_rope*n_h + P*d_v*n_h + S*d_c*d_nope*n_h + S*d_c*d_v*n_h + d*d_c*q + d*d_nope*n_h*q + d*d_rope*n_h*q + d*d_rope*q + d*d_v*n_h*q)


ARGS_kv_row_elements_mla_compressed_noqlora = ('d_c', 'd_rope')


def kv_row_elements_mla_compressed_noqlora(d_c, d_rope):
    return d_c + d_rope


ARGS_params_mla_compressed_noqlora = ('beta_o', 'beta_qkv', 'd', 'd_c', 'd_nope', 'd_rope', 'd_v', 'n_h')


def params_mla_compressed_noqlora(beta_o, beta_qkv, d, d_c, d_nope, d_rope, d_v, n_h):
    return {
        'q_proj': n_h*(beta_qkv + d)*(d_nope + d_rope),
        'kv_a_proj_with_mqa': (beta_qkv + d)*(d_c + d_rope),
        'kv_a_layernorm': d_c,
        'kv_b_proj': d_c*n_h*(d_nope + d_v),
        'o_proj': d*(beta_o + d_v*n_h),
    }


ARGS_ops_mla_absorbed_qlora = ('B', 'P', 'S', 'b', 'b_a', 'b_w', 'beta_o', 'beta_qkv', 'd', 'd_c', 'd_cq', 'd_nope', 'd_rope', 'd_v', 'n_h', 'q')


def ops_mla_absorbed_qlora(B, P, S, b, b_a, b_w, beta_o, beta_qkv, d, d_c, d_cq, d_nope, d_rope, d_v, n_h, q):
    return (
        OpTerms('q_a_proj', 'q_proj', 'matmul', 2*B*d*d_cq*q, B*b_a*d*q, b_w*d_cq*(beta_qkv + d), 0, B*b_a*d_cq*q, 0, (1, B*q, d_cq, d)),
        OpTerms('q_a_layernorm', 'norm', 'elementwise', 4*B*d_cq*q, B*b_a*d_cq*q, b_w*d_cq, 0, B*b_a*d_cq*q, 0, None),
        OpTerms('q_b_proj', 'q_proj', 'matmul', 2*B*d_cq*n_h*q*(d_nope + d_rope), B*b_a*d_cq*q, b_w*d_cq*n_h*(d_nope + d_rope), 0, B*b_a*n_h*q*(d_nope + d_rope), 0, (1, B*q, n_h*(d_nope + d_rope), d_cq)),
        OpTerms('kv_a_proj', 'kv_proj', 'matmul', 2*B*d*q*(d_c + d_rope), B*b_a*d*q, b_w*(beta_qkv + d)*(d_c + d_rope), 0, B*b_a*q*(d_c + d_rope), 0, (1, B*q, d_c + d_rope, d)),
        OpTerms('kv_a_layernorm', 'norm', 'elementwise', 4*B*d_c*q, B*b_a*d_c*q, b_w*d_c, 0, B*b_a*d_c*q, 0, None),
        OpTerms('rope', 'rope', 'elementwise', 3*B*d_rope*q*(n_h + 1), B*b_a*d_rope*q*(n_h + 1), 0, 0, B*b_a*d_rope*q*(n_h + 1), 0, None),
        OpTerms('cache_write', 'cache', 'elementwise', 0, B*b_a*q*(d_c + d_rope), 0, 0, 0, B*b*q*(d_c + d_rope), None),
        OpTerms('q_absorb', 'absorb', 'matmul', 2*B*d_c*d_nope*n_h*q, B*b_a*d_nope*n_h*q, b_w*d_c*d_nope*n_h, 0, B*b_a*d_c*n_h*q, 0, (n_h, B*q, d_c, d_nope)),
        OpTerms('q_assemble', 'layout', 'elementwise', 0, B*b_a*n_h*q*(d_c + d_rope), 0, 0, B*b_a*n_h*q*(d_c + d_rope), 0, None),
        OpTerms('scores', 'core', 'matmul', 2*B*P*n_h*(d_c + d_rope), B*b_a*n_h*q*(d_c + d_rope), 0, B*S*b*(d_c + d_rope), B*S*b_a*n_h*q, 0, (B, n_h*q, S, d_c + d_rope)),
        OpTerms('softmax', 'softmax', 'elementwise', 5*B*S*n_h*q, B*S*b_a*n_h*q, 0, 0, B*S*b_a*n_h*q, 0, None),
        OpTerms('pv', 'core', 'matmul', 2*B*P*d_c*n_h, B*S*b_a*n_h*q, 0, B*S*b*d_c, B*b_a*d_c*n_h*q, 0, (B, n_h*q, d_c, S)),
        OpTerms('o_absorb', 'absorb', 'matmul', 2*B*d_c*d_v*n_h*q, B*b_a*d_c*n_h*q, b_w*d_c*d_v*n_h, 0, B*b_a*d_v*n_h*q, 0, (n_h, B*q, d_v, d_c)),
        OpTerms('o_proj', 'o_proj', 'matmul', 2*B*d*d_v*n_h*q, B*b_a*d_v*n_h*q, b_w*d*(beta_o + d_v*n_h), 0, B*b_a*d*q, 0, (1, B*q, d, d_v*n_h)),
    )


ARGS_matmul_flops_mla_absorbed_qlora = ('B', 'P', 'd', 'd_c', 'd_cq', 'd_nope', 'd_rope', 'd_v', 'n_h', 'q')


def matmul_flops_mla_absorbed_qlora(B, P, d, d_c, d_cq, d_nope, d_rope, d_v, n_h, q):
    return 2*B*(2*P*d_c*n_h + P*d_rope*n_h + d*d_c*q + d*d_cq*q + d*d_rope*q + d*d_v*n_h*q + d_c*d_nope*n_h*q + d_c*d_v*n_h*q + d_cq*d_nope*n_h*q + d_cq*d_rope*n_h*q)


ARGS_kv_row_elements_mla_absorbed_qlora = ('d_c', 'd_rope')


def kv_row_elements_mla_absorbed_qlora(d_c, d_rope):
    return d_c + d_rope


ARGS_params_mla_absorbed_qlora = ('beta_o', 'beta_qkv', 'd', 'd_c', 'd_cq', 'd_nope', 'd_rope', 'd_v', 'n_h')


def params_mla_absorbed_qlora(beta_o, beta_qkv, d, d_c, d_cq, d_nope, d_rope, d_v, n_h):
    return {
        'q_a_proj': d_cq*(beta_qkv + d),
        'q_a_layernorm': d_cq,
        'q_b_proj': d_cq*n_h*(d_nope + d_rope),
        'kv_a_proj_with_mqa': (beta_qkv + d)*(d_c + d_rope),
        'kv_a_layernorm': d_c,
        'kv_b_proj': d_c*n_h*(d_nope + d_v),
        'o_proj': d*(beta_o + d_v*n_h),
    }


ARGS_ops_mla_absorbed_noqlora = ('B', 'P', 'S', 'b', 'b_a', 'b_w', 'beta_o', 'beta_qkv', 'd', 'd_c', 'd_nope', 'd_rope', 'd_v', 'n_h', 'q')


def ops_mla_absorbed_noqlora(B, P, S, b, b_a, b_w, beta_o, beta_qkv, d, d_c, d_nope, d_rope, d_v, n_h, q):
    return (
        OpTerms('q_proj', 'q_proj', 'matmul', 2*B*d*n_h*q*(d_nope + d_rope), B*b_a*d*q, b_w*n_h*(beta_qkv + d)*(d_nope + d_rope), 0, B*b_a*n_h*q*(d_nope + d_rope), 0, (1, B*q, n_h*(d_nope + d_rope), d)),
        OpTerms('kv_a_proj', 'kv_proj', 'matmul', 2*B*d*q*(d_c + d_rope), B*b_a*d*q, b_w*(beta_qkv + d)*(d_c + d_rope), 0, B*b_a*q*(d_c + d_rope), 0, (1, B*q, d_c + d_rope, d)),
        OpTerms('kv_a_layernorm', 'norm', 'elementwise', 4*B*d_c*q, B*b_a*d_c*q, b_w*d_c, 0, B*b_a*d_c*q, 0, None),
        OpTerms('rope', 'rope', 'elementwise', 3*B*d_rope*q*(n_h + 1), B*b_a*d_rope*q*(n_h + 1), 0, 0, B*b_a*d_rope*q*(n_h + 1), 0, None),
        OpTerms('cache_write', 'cache', 'elementwise', 0, B*b_a*q*(d_c + d_rope), 0, 0, 0, B*b*q*(d_c + d_rope), None),
        OpTerms('q_absorb', 'absorb', 'matmul', 2*B*d_c*d_nope*n_h*q, B*b_a*d_nope*n_h*q, b_w*d_c*d_nope*n_h, 0, B*b_a*d_c*n_h*q, 0, (n_h, B*q, d_c, d_nope)),
        OpTerms('q_assemble', 'layout', 'elementwise', 0, B*b_a*n_h*q*(d_c + d_rope), 0, 0, B*b_a*n_h*q*(d_c + d_rope), 0, None),
        OpTerms('scores', 'core', 'matmul', 2*B*P*n_h*(d_c + d_rope), B*b_a*n_h*q*(d_c + d_rope), 0, B*S*b*(d_c + d_rope), B*S*b_a*n_h*q, 0, (B, n_h*q, S, d_c + d_rope)),
        OpTerms('softmax', 'softmax', 'elementwise', 5*B*S*n_h*q, B*S*b_a*n_h*q, 0, 0, B*S*b_a*n_h*q, 0, None),
        OpTerms('pv', 'core', 'matmul', 2*B*P*d_c*n_h, B*S*b_a*n_h*q, 0, B*S*b*d_c, B*b_a*d_c*n_h*q, 0, (B, n_h*q, d_c, S)),
        OpTerms('o_absorb', 'absorb', 'matmul', 2*B*d_c*d_v*n_h*q, B*b_a*d_c*n_h*q, b_w*d_c*d_v*n_h, 0, B*b_a*d_v*n_h*q, 0, (n_h, B*q, d_v, d_c)),
        OpTerms('o_proj', 'o_proj', 'matmul', 2*B*d*d_v*n_h*q, B*b_a*d_v*n_h*q, b_w*d*(beta_o + d_v*n_h), 0, B*b_a*d*q, 0, (1, B*q, d, d_v*n_h)),
    )


ARGS_matmul_flops_mla_absorbed_noqlora = ('B', 'P', 'd', 'd_c', 'd_nope', 'd_rope', 'd_v', 'n_h', 'q')


def matmul_flops_mla_absorbed_noqlora(B, P, d, d_c, d_nope, d_rope, d_v, n_h, q):
    return 2*B*(2*P*d_c*n_h + P*d_rope*n_h + d*d_c*q + d*d_nope*n_h*q + d*d_rope*n_h*q + d*d_rope*q + d*d_v*n_h*q + d_c*d_nope*n_h*q + d_c*d_v*n_h*q)


ARGS_kv_row_elements_mla_absorbed_noqlora = ('d_c', 'd_rope')


def kv_row_elements_mla_absorbed_noqlora(d_c, d_rope):
    return d_c + d_rope


ARGS_params_mla_absorbed_noqlora = ('beta_o', 'beta_qkv', 'd', 'd_c', 'd_nope', 'd_rope', 'd_v', 'n_h')


def params_mla_absorbed_noqlora(beta_o, beta_qkv, d, d_c, d_nope, d_rope, d_v, n_h):
    return {
        'q_proj': n_h*(beta_qkv + d)*(d_nope + d_rope),
        'kv_a_proj_with_mqa': (beta_qkv + d)*(d_c + d_rope),
        'kv_a_layernorm': d_c,
        'kv_b_proj': d_c*n_h*(d_nope + d_v),
        'o_proj': d*(beta_o + d_v*n_h),
    }


ARGS_ops_mla_absorbed_merged_qlora = ('B', 'P', 'S', 'b', 'b_a', 'b_w', 'beta_o', 'beta_qkv', 'd', 'd_c', 'd_cq', 'd_rope', 'n_h', 'q')


def ops_mla_absorbed_merged_qlora(B, P, S, b, b_a, b_w, beta_o, beta_qkv, d, d_c, d_cq, d_rope, n_h, q):
    return (
        OpTerms('q_a_proj', 'q_proj', 'matmul', 2*B*d*d_cq*q, B*b_a*d*q, b_w*d_cq*(beta_qkv + d), 0, B*b_a*d_cq*q, 0, (1, B*q, d_cq, d)),
        OpTerms('q_a_layernorm', 'norm', 'elementwise', 4*B*d_cq*q, B*b_a*d_cq*q, b_w*d_cq, 0, B*b_a*d_cq*q, 0, None),
        OpTerms('q_b_proj', 'q_proj', 'matmul', 2*B*d_cq*n_h*q*(d_c + d_rope), B*b_a*d_cq*q, b_w*d_cq*n_h*(d_c + d_rope), 0, B*b_a*n_h*q*(d_c + d_rope), 0, (1, B*q, n_h*(d_c + d_rope), d_cq)),
        OpTerms('kv_a_proj', 'kv_proj', 'matmul', 2*B*d*q*(d_c + d_rope), B*b_a*d*q, b_w*(beta_qkv + d)*(d_c + d_rope), 0, B*b_a*q*(d_c + d_rope), 0, (1, B*q, d_c + d_rope, d)),
        OpTerms('kv_a_layernorm', 'norm', 'elementwise', 4*B*d_c*q, B*b_a*d_c*q, b_w*d_c, 0, B*b_a*d_c*q, 0, None),
        OpTerms('rope', 'rope', 'elementwise', 3*B*d_rope*q*(n_h + 1), B*b_a*d_rope*q*(n_h + 1), 0, 0, B*b_a*d_rope*q*(n_h + 1), 0, None),
        OpTerms('cache_write', 'cache', 'elementwise', 0, B*b_a*q*(d_c + d_rope), 0, 0, 0, B*b*q*(d_c + d_rope), None),
        OpTerms('scores', 'core', 'matmul', 2*B*P*n_h*(d_c + d_rope), B*b_a*n_h*q*(d_c + d_rope), 0, B*S*b*(d_c + d_rope), B*S*b_a*n_h*q, 0, (B, n_h*q, S, d_c + d_rope)),
        OpTerms('softmax', 'softmax', 'elementwise', 5*B*S*n_h*q, B*S*b_a*n_h*q, 0, 0, B*S*b_a*n_h*q, 0, None),
        OpTerms('pv', 'core', 'matmul', 2*B*P*d_c*n_h, B*S*b_a*n_h*q, 0, B*S*b*d_c, B*b_a*d_c*n_h*q, 0, (B, n_h*q, d_c, S)),
        OpTerms('o_proj', 'o_proj', 'matmul', 2*B*d*d_c*n_h*q, B*b_a*d_c*n_h*q, b_w*d*(beta_o + d_c*n_h), 0, B*b_a*d*q, 0, (1, B*q, d, d_c*n_h)),
    )


ARGS_matmul_flops_mla_absorbed_merged_qlora = ('B', 'P', 'd', 'd_c', 'd_cq', 'd_rope', 'n_h', 'q')


def matmul_flops_mla_absorbed_merged_qlora(B, P, d, d_c, d_cq, d_rope, n_h, q):
    return 2*B*(2*P*d_c*n_h + P*d_rope*n_h + d*d_c*n_h*q + d*d_c*q + d*d_cq*q + d*d_rope*q + d_c*d_cq*n_h*q + d_cq*d_rope*n_h*q)


ARGS_kv_row_elements_mla_absorbed_merged_qlora = ('d_c', 'd_rope')


def kv_row_elements_mla_absorbed_merged_qlora(d_c, d_rope):
    return d_c + d_rope


ARGS_params_mla_absorbed_merged_qlora = ('beta_o', 'beta_qkv', 'd', 'd_c', 'd_cq', 'd_nope', 'd_rope', 'd_v', 'n_h')


def params_mla_absorbed_merged_qlora(beta_o, beta_qkv, d, d_c, d_cq, d_nope, d_rope, d_v, n_h):
    return {
        'q_a_proj': d_cq*(beta_qkv + d),
        'q_a_layernorm': d_cq,
        'q_b_proj': d_cq*n_h*(d_nope + d_rope),
        'kv_a_proj_with_mqa': (beta_qkv + d)*(d_c + d_rope),
        'kv_a_layernorm': d_c,
        'kv_b_proj': d_c*n_h*(d_nope + d_v),
        'o_proj': d*(beta_o + d_v*n_h),
    }


ARGS_ops_mla_absorbed_merged_noqlora = ('B', 'P', 'S', 'b', 'b_a', 'b_w', 'beta_o', 'beta_qkv', 'd', 'd_c', 'd_rope', 'n_h', 'q')


def ops_mla_absorbed_merged_noqlora(B, P, S, b, b_a, b_w, beta_o, beta_qkv, d, d_c, d_rope, n_h, q):
    return (
        OpTerms('q_proj', 'q_proj', 'matmul', 2*B*d*n_h*q*(d_c + d_rope), B*b_a*d*q, b_w*n_h*(beta_qkv + d)*(d_c + d_rope), 0, B*b_a*n_h*q*(d_c + d_rope), 0, (1, B*q, n_h*(d_c + d_rope), d)),
        OpTerms('kv_a_proj', 'kv_proj', 'matmul', 2*B*d*q*(d_c + d_rope), B*b_a*d*q, b_w*(beta_qkv + d)*(d_c + d_rope), 0, B*b_a*q*(d_c + d_rope), 0, (1, B*q, d_c + d_rope, d)),
        OpTerms('kv_a_layernorm', 'norm', 'elementwise', 4*B*d_c*q, B*b_a*d_c*q, b_w*d_c, 0, B*b_a*d_c*q, 0, None),
        OpTerms('rope', 'rope', 'elementwise', 3*B*d_rope*q*(n_h + 1), B*b_a*d_rope*q*(n_h + 1), 0, 0, B*b_a*d_rope*q*(n_h + 1), 0, None),
        OpTerms('cache_write', 'cache', 'elementwise', 0, B*b_a*q*(d_c + d_rope), 0, 0, 0, B*b*q*(d_c + d_rope), None),
        OpTerms('scores', 'core', 'matmul', 2*B*P*n_h*(d_c + d_rope), B*b_a*n_h*q*(d_c + d_rope), 0, B*S*b*(d_c + d_rope), B*S*b_a*n_h*q, 0, (B, n_h*q, S, d_c + d_rope)),
        OpTerms('softmax', 'softmax', 'elementwise', 5*B*S*n_h*q, B*S*b_a*n_h*q, 0, 0, B*S*b_a*n_h*q, 0, None),
        OpTerms('pv', 'core', 'matmul', 2*B*P*d_c*n_h, B*S*b_a*n_h*q, 0, B*S*b*d_c, B*b_a*d_c*n_h*q, 0, (B, n_h*q, d_c, S)),
        OpTerms('o_proj', 'o_proj', 'matmul', 2*B*d*d_c*n_h*q, B*b_a*d_c*n_h*q, b_w*d*(beta_o + d_c*n_h), 0, B*b_a*d*q, 0, (1, B*q, d, d_c*n_h)),
    )


ARGS_matmul_flops_mla_absorbed_merged_noqlora = ('B', 'P', 'd', 'd_c', 'd_rope', 'n_h', 'q')


def matmul_flops_mla_absorbed_merged_noqlora(B, P, d, d_c, d_rope, n_h, q):
    return 2*B*(2*P*d_c*n_h + P*d_rope*n_h + 2*d*d_c*n_h*q + d*d_c*q + d*d_rope*n_h*q + d*d_rope*q)


ARGS_kv_row_elements_mla_absorbed_merged_noqlora = ('d_c', 'd_rope')


def kv_row_elements_mla_absorbed_merged_noqlora(d_c, d_rope):
    return d_c + d_rope


ARGS_params_mla_absorbed_merged_noqlora = ('beta_o', 'beta_qkv', 'd', 'd_c', 'd_nope', 'd_rope', 'd_v', 'n_h')


def params_mla_absorbed_merged_noqlora(beta_o, beta_qkv, d, d_c, d_nope, d_rope, d_v, n_h):
    return {
        'q_proj': n_h*(beta_qkv + d)*(d_nope + d_rope),
        'kv_a_proj_with_mqa': (beta_qkv + d)*(d_c + d_rope),
        'kv_a_layernorm': d_c,
        'kv_b_proj': d_c*n_h*(d_nope + d_v),
        'o_proj': d*(beta_o + d_v*n_h),
    }


LAYERS = {
    'mha': LayerFunctions(Evaluator(ARGS_ops_mha, ops_mha), Evaluator(ARGS_kv_row_elements_mha, kv_row_elements_mha), Evaluator(ARGS_params_mha, params_mha), Evaluator(ARGS_matmul_flops_mha, matmul_flops_mha)),
    'mla_naive_qlora': LayerFunctions(Evaluator(ARGS_ops_mla_naive_qlora, ops_mla_naive_qlora), Evaluator(ARGS_kv_row_elements_mla_naive_qlora, kv_row_elements_mla_naive_qlora), Evaluator(ARGS_params_mla_naive_qlora, params_mla_naive_qlora), Evaluator(ARGS_matmul_flops_mla_naive_qlora, matmul_flops_mla_naive_qlora)),
    'mla_naive_noqlora': LayerFunctions(Evaluator(ARGS_ops_mla_naive_noqlora, ops_mla_naive_noqlora), Evaluator(ARGS_kv_row_elements_mla_naive_noqlora, kv_row_elements_mla_naive_noqlora), Evaluator(ARGS_params_mla_naive_noqlora, params_mla_naive_noqlora), Evaluator(ARGS_matmul_flops_mla_naive_noqlora, matmul_flops_mla_naive_noqlora)),
    'mla_compressed_qlora': LayerFunctions(Evaluator(ARGS_ops_mla_compressed_qlora, ops_mla_compressed_qlora), Evaluator(ARGS_kv_row_elements_mla_compressed_qlora, kv_row_elements_mla_compressed_qlora), Evaluator(ARGS_params_mla_compressed_qlora, params_mla_compressed_qlora), Evaluator(ARGS_matmul_flops_mla_compressed_qlora, matmul_flops_mla_compressed_qlora)),
    'mla_compressed_noqlora': LayerFunctions(Evaluator(ARGS_ops_mla_compressed_noqlora, ops_mla_compressed_noqlora), Evaluator(ARGS_kv_row_elements_mla_compressed_noqlora, kv_row_elements_mla_compressed_noqlora), Evaluator(ARGS_params_mla_compressed_noqlora, params_mla_compressed_noqlora), Evaluator(ARGS_matmul_flops_mla_compressed_noqlora, matmul_flops_mla_compressed_noqlora)),
    'mla_absorbed_qlora': LayerFunctions(Evaluator(ARGS_ops_mla_absorbed_qlora, ops_mla_absorbed_qlora), Evaluator(ARGS_kv_row_elements_mla_absorbed_qlora, kv_row_elements_mla_absorbed_qlora), Evaluator(ARGS_params_mla_absorbed_qlora, params_mla_absorbed_qlora), Evaluator(ARGS_matmul_flops_mla_absorbed_qlora, matmul_flops_mla_absorbed_qlora)),
    'mla_absorbed_noqlora': LayerFunctions(Evaluator(ARGS_ops_mla_absorbed_noqlora, ops_mla_absorbed_noqlora), Evaluator(ARGS_kv_row_elements_mla_absorbed_noqlora, kv_row_elements_mla_absorbed_noqlora), Evaluator(ARGS_params_mla_absorbed_noqlora, params_mla_absorbed_noqlora), Evaluator(ARGS_matmul_flops_mla_absorbed_noqlora, matmul_flops_mla_absorbed_noqlora)),
    'mla_absorbed_merged_qlora': LayerFunctions(Evaluator(ARGS_ops_mla_absorbed_merged_qlora, ops_mla_absorbed_merged_qlora), Evaluator(ARGS_kv_row_elements_mla_absorbed_merged_qlora, kv_row_elements_mla_absorbed_merged_qlora), Evaluator(ARGS_params_mla_absorbed_merged_qlora, params_mla_absorbed_merged_qlora), Evaluator(ARGS_matmul_flops_mla_absorbed_merged_qlora, matmul_flops_mla_absorbed_merged_qlora)),
    'mla_absorbed_merged_noqlora': LayerFunctions(Evaluator(ARGS_ops_mla_absorbed_merged_noqlora, ops_mla_absorbed_merged_noqlora), Evaluator(ARGS_kv_row_elements_mla_absorbed_merged_noqlora, kv_row_elements_mla_absorbed_merged_noqlora), Evaluator(ARGS_params_mla_absorbed_merged_noqlora, params_mla_absorbed_merged_noqlora), Evaluator(ARGS_matmul_flops_mla_absorbed_merged_noqlora, matmul_flops_mla_absorbed_merged_noqlora)),
}
