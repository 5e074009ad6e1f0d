"""Numeric evaluators generated from the symbolic formulas. Do not edit.

Regenerate with ``python -m mlacalc.formulas.codegen``; a test checks that this
file equals what the generator prints. Each ``ops_*`` function returns one tuple
per op: (name, stage, kind, flops, act_read, weight_read, cache_read, act_write,
cache_write). Arguments may be Python ints (exact) or numpy arrays (sweeps).
"""

# fmt: off

from typing import Callable, NamedTuple


class LayerFunctions(NamedTuple):
    """The evaluators of one layer; ``args`` names their parameters, in order."""

    args: tuple
    ops: Callable
    kv_row_elements: Callable
    params: Callable
    matmul_flops: Callable
    shapes: Callable


ARGS_mha = ('B', 'P', 'S', 'b', 'b_a', 'b_w', 'beta_o', 'beta_qkv', 'd', 'd_h', 'n_h', 'n_kv', 'q', 'rho',)

def ops_mha(B, P, S, b, b_a, b_w, beta_o, beta_qkv, d, d_h, n_h, n_kv, q, rho):
    return (
        ('q_proj', 'q_proj', 'matmul', 2*B*d*d_h*n_h*q, B*b_a*d*q, b_w*d_h*n_h*(beta_qkv + d), 0, B*b_a*d_h*n_h*q, 0),
        ('kv_proj', 'kv_proj', 'matmul', 4*B*d*d_h*n_kv*q, B*b_a*d*q, 2*b_w*d_h*n_kv*(beta_qkv + d), 0, 2*B*b_a*d_h*n_kv*q, 0),
        ('rope', 'rope', 'elementwise', 3*B*d_h*q*rho*(n_h + n_kv), B*b_a*d_h*q*rho*(n_h + n_kv), 0, 0, B*b_a*d_h*q*rho*(n_h + n_kv), 0),
        ('cache_write', 'cache', 'elementwise', 0, 2*B*b_a*d_h*n_kv*q, 0, 0, 0, 2*B*b*d_h*n_kv*q),
        ('scores', 'core', 'matmul', 2*B*P*d_h*n_h, B*b_a*d_h*n_h*q, 0, B*S*b*d_h*n_kv, B*S*b_a*n_h*q, 0),
        ('softmax', 'softmax', 'elementwise', 5*B*S*n_h*q, B*S*b_a*n_h*q, 0, 0, B*S*b_a*n_h*q, 0),
        ('pv', 'core', 'matmul', 2*B*P*d_h*n_h, B*S*b_a*n_h*q, 0, B*S*b*d_h*n_kv, B*b_a*d_h*n_h*q, 0),
        ('o_proj', 'o_proj', 'matmul', 2*B*d*d_h*n_h*q, B*b_a*d_h*n_h*q, b_w*d*(beta_o + d_h*n_h), 0, B*b_a*d*q, 0),
    )


def shapes_mha(B, P, S, b, b_a, b_w, beta_o, beta_qkv, d, d_h, n_h, n_kv, q, rho):
    return (
        (1, B*q, d_h*n_h, d),
        (1, B*q, 2*d_h*n_kv, d),
        None,
        None,
        (B*n_kv, n_h*q/n_kv, S, d_h),
        None,
        (B*n_kv, n_h*q/n_kv, d_h, S),
        (1, B*q, d, d_h*n_h),
    )


def matmul_flops_mha(B, P, S, b, b_a, b_w, beta_o, beta_qkv, d, d_h, n_h, n_kv, q, rho):
    return 4*B*d_h*(P*n_h + d*n_h*q + d*n_kv*q)


def kv_row_elements_mha(B, P, S, b, b_a, b_w, beta_o, beta_qkv, d, d_h, n_h, n_kv, q, rho):
    return 2*d_h*n_kv


def params_mha(B, P, S, b, b_a, b_w, beta_o, beta_qkv, d, d_h, n_h, n_kv, q, rho):
    return {
        'q_proj': d_h*n_h*(beta_qkv + d),
        'k_proj': d_h*n_kv*(beta_qkv + d),
        'v_proj': d_h*n_kv*(beta_qkv + d),
        'o_proj': d*(beta_o + d_h*n_h),
    }


ARGS_mla_naive_qlora = ('B', 'P', 'S', 'b', 'b_a', 'b_w', 'beta_o', 'beta_qkv', 'd', 'd_c', 'd_cq', 'd_nope', 'd_rope', 'd_v', 'n_h', 'q',)

def ops_mla_naive_qlora(B, P, S, b, b_a, b_w, beta_o, beta_qkv, d, d_c, d_cq, d_nope, d_rope, d_v, n_h, q):
    return (
        ('q_a_proj', 'q_proj', 'matmul', 2*B*d*d_cq*q, B*b_a*d*q, b_w*d_cq*(beta_qkv + d), 0, B*b_a*d_cq*q, 0),
        ('q_a_layernorm', 'norm', 'elementwise', 4*B*d_cq*q, B*b_a*d_cq*q, b_w*d_cq, 0, B*b_a*d_cq*q, 0),
        ('q_b_proj', 'q_proj', 'matmul', 2*B*d_cq*n_h*q*(d_nope + d_rope), B*b_a*d_cq*q, b_w*d_cq*n_h*(d_nope + d_rope), 0, B*b_a*n_h*q*(d_nope + d_rope), 0),
        ('kv_a_proj', 'kv_proj', 'matmul', 2*B*d*q*(d_c + d_rope), B*b_a*d*q, b_w*(beta_qkv + d)*(d_c + d_rope), 0, B*b_a*q*(d_c + d_rope), 0),
        ('kv_a_layernorm', 'norm', 'elementwise', 4*B*d_c*q, B*b_a*d_c*q, b_w*d_c, 0, B*b_a*d_c*q, 0),
        ('rope', 'rope', 'elementwise', 3*B*d_rope*q*(n_h + 1), B*b_a*d_rope*q*(n_h + 1), 0, 0, B*b_a*d_rope*q*(n_h + 1), 0),
        ('kv_b_proj', 'kv_up', 'matmul', 2*B*d_c*n_h*q*(d_nope + d_v), B*b_a*d_c*q, b_w*d_c*n_h*(d_nope + d_v), 0, B*b_a*n_h*q*(d_nope + d_v), 0),
        ('cache_write', 'cache', 'elementwise', 0, B*b_a*q*(d_rope + n_h*(d_nope + d_v)), 0, 0, 0, B*b*n_h*q*(d_nope + d_rope + d_v)),
        ('scores', 'core', 'matmul', 2*B*P*n_h*(d_nope + d_rope), B*b_a*n_h*q*(d_nope + d_rope), 0, B*S*b*n_h*(d_nope + d_rope), B*S*b_a*n_h*q, 0),
        ('softmax', 'softmax', 'elementwise', 5*B*S*n_h*q, B*S*b_a*n_h*q, 0, 0, B*S*b_a*n_h*q, 0),
        ('pv', 'core', 'matmul', 2*B*P*d_v*n_h, B*S*b_a*n_h*q, 0, B*S*b*d_v*n_h, B*b_a*d_v*n_h*q, 0),
        ('o_proj', 'o_proj', 'matmul', 2*B*d*d_v*n_h*q, B*b_a*d_v*n_h*q, b_w*d*(beta_o + d_v*n_h), 0, B*b_a*d*q, 0),
    )


def shapes_mla_naive_qlora(B, P, S, b, b_a, b_w, beta_o, beta_qkv, d, d_c, d_cq, d_nope, d_rope, d_v, n_h, q):
    return (
        (1, B*q, d_cq, d),
        None,
        (1, B*q, n_h*(d_nope + d_rope), d_cq),
        (1, B*q, d_c + d_rope, d),
        None,
        None,
        (1, B*q, n_h*(d_nope + d_v), d_c),
        None,
        (B*n_h, q, S, d_nope + d_rope),
        None,
        (B*n_h, q, d_v, S),
        (1, B*q, d, d_v*n_h),
    )


def matmul_flops_mla_naive_qlora(B, P, S, b, b_a, b_w, beta_o, beta_qkv, d, d_c, d_cq, d_nope, d_rope, d_v, n_h, q):
    return 2*B*(P*d_nope*n_h + P*d_rope*n_h + P*d_v*n_h + d*d_c*q + d*d_cq*q + d*d_rope*q + d*d_v*n_h*q + d_c*d_nope*n_h*q + d_c*d_v*n_h*q + d_cq*d_nope*n_h*q + d_cq*d_rope*n_h*q)


def kv_row_elements_mla_naive_qlora(B, P, S, b, b_a, b_w, beta_o, beta_qkv, d, d_c, d_cq, d_nope, d_rope, d_v, n_h, q):
    return n_h*(d_nope + d_rope + d_v)


def params_mla_naive_qlora(B, P, S, b, b_a, b_w, beta_o, beta_qkv, d, d_c, d_cq, d_nope, d_rope, d_v, n_h, q):
    return {
        'q_a_proj': d_cq*(beta_qkv + d),
        'q_a_layernorm': d_cq,
        'q_b_proj': d_cq*n_h*(d_nope + d_rope),
        'kv_a_proj_with_mqa': (beta_qkv + d)*(d_c + d_rope),
        'kv_a_layernorm': d_c,
        'kv_b_proj': d_c*n_h*(d_nope + d_v),
        'o_proj': d*(beta_o + d_v*n_h),
    }


ARGS_mla_naive_noqlora = ('B', 'P', 'S', 'b', 'b_a', 'b_w', 'beta_o', 'beta_qkv', 'd', 'd_c', 'd_nope', 'd_rope', 'd_v', 'n_h', 'q',)

def ops_mla_naive_noqlora(B, P, S, b, b_a, b_w, beta_o, beta_qkv, d, d_c, d_nope, d_rope, d_v, n_h, q):
    return (
        ('q_proj', 'q_proj', 'matmul', 2*B*d*n_h*q*(d_nope + d_rope), B*b_a*d*q, b_w*n_h*(beta_qkv + d)*(d_nope + d_rope), 0, B*b_a*n_h*q*(d_nope + d_rope), 0),
        ('kv_a_proj', 'kv_proj', 'matmul', 2*B*d*q*(d_c + d_rope), B*b_a*d*q, b_w*(beta_qkv + d)*(d_c + d_rope), 0, B*b_a*q*(d_c + d_rope), 0),
        ('kv_a_layernorm', 'norm', 'elementwise', 4*B*d_c*q, B*b_a*d_c*q, b_w*d_c, 0, B*b_a*d_c*q, 0),
        ('rope', 'rope', 'elementwise', 3*B*d_rope*q*(n_h + 1), B*b_a*d_rope*q*(n_h + 1), 0, 0, B*b_a*d_rope*q*(n_h + 1), 0),
        ('kv_b_proj', 'kv_up', 'matmul', 2*B*d_c*n_h*q*(d_nope + d_v), B*b_a*d_c*q, b_w*d_c*n_h*(d_nope + d_v), 0, B*b_a*n_h*q*(d_nope + d_v), 0),
        ('cache_write', 'cache', 'elementwise', 0, B*b_a*q*(d_rope + n_h*(d_nope + d_v)), 0, 0, 0, B*b*n_h*q*(d_nope + d_rope + d_v)),
        ('scores', 'core', 'matmul', 2*B*P*n_h*(d_nope + d_rope), B*b_a*n_h*q*(d_nope + d_rope), 0, B*S*b*n_h*(d_nope + d_rope), B*S*b_a*n_h*q, 0),
        ('softmax', 'softmax', 'elementwise', 5*B*S*n_h*q, B*S*b_a*n_h*q, 0, 0, B*S*b_a*n_h*q, 0),
        ('pv', 'core', 'matmul', 2*B*P*d_v*n_h, B*S*b_a*n_h*q, 0, B*S*b*d_v*n_h, B*b_a*d_v*n_h*q, 0),
        ('o_proj', 'o_proj', 'matmul', 2*B*d*d_v*n_h*q, B*b_a*d_v*n_h*q, b_w*d*(beta_o + d_v*n_h), 0, B*b_a*d*q, 0),
    )


def shapes_mla_naive_noqlora(B, P, S, b, b_a, b_w, beta_o, beta_qkv, d, d_c, d_nope, d_rope, d_v, n_h, q):
    return (
        (1, B*q, n_h*(d_nope + d_rope), d),
        (1, B*q, d_c + d_rope, d),
        None,
        None,
        (1, B*q, n_h*(d_nope + d_v), d_c),
        None,
        (B*n_h, q, S, d_nope + d_rope),
        None,
        (B*n_h, q, d_v, S),
        (1, B*q, d, d_v*n_h),
    )


def matmul_flops_mla_naive_noqlora(B, P, S, b, b_a, b_w, beta_o, beta_qkv, d, d_c, d_nope, d_rope, d_v, n_h, q):
    return 2*B*(P*d_nope*n_h + P*d_rope*n_h + P*d_v*n_h + d*d_c*q + d*d_nope*n_h*q + d*d_rope*n_h*q + d*d_rope*q + d*d_v*n_h*q + d_c*d_nope*n_h*q + d_c*d_v*n_h*q)


def kv_row_elements_mla_naive_noqlora(B, P, S, b, b_a, b_w, beta_o, beta_qkv, d, d_c, d_nope, d_rope, d_v, n_h, q):
    return n_h*(d_nope + d_rope + d_v)


def params_mla_naive_noqlora(B, P, S, b, b_a, b_w, beta_o, beta_qkv, d, d_c, d_nope, d_rope, d_v, n_h, q):
    return {
        'q_proj': n_h*(beta_qkv + d)*(d_nope + d_rope),
        'kv_a_proj_with_mqa': (beta_qkv + d)*(d_c + d_rope),
        'kv_a_layernorm': d_c,
        'kv_b_proj': d_c*n_h*(d_nope + d_v),
        'o_proj': d*(beta_o + d_v*n_h),
    }


ARGS_mla_compressed_qlora = ('B', 'P', 'S', 'b', 'b_a', 'b_w', 'beta_o', 'beta_qkv', 'd', 'd_c', 'd_cq', 'd_nope', 'd_rope', 'd_v', 'n_h', 'q',)

def ops_mla_compressed_qlora(B, P, S, b, b_a, b_w, beta_o, beta_qkv, d, d_c, d_cq, d_nope, d_rope, d_v, n_h, q):
    return (
        ('q_a_proj', 'q_proj', 'matmul', 2*B*d*d_cq*q, B*b_a*d*q, b_w*d_cq*(beta_qkv + d), 0, B*b_a*d_cq*q, 0),
        ('q_a_layernorm', 'norm', 'elementwise', 4*B*d_cq*q, B*b_a*d_cq*q, b_w*d_cq, 0, B*b_a*d_cq*q, 0),
        ('q_b_proj', 'q_proj', 'matmul', 2*B*d_cq*n_h*q*(d_nope + d_rope), B*b_a*d_cq*q, b_w*d_cq*n_h*(d_nope + d_rope), 0, B*b_a*n_h*q*(d_nope + d_rope), 0),
        ('kv_a_proj', 'kv_proj', 'matmul', 2*B*d*q*(d_c + d_rope), B*b_a*d*q, b_w*(beta_qkv + d)*(d_c + d_rope), 0, B*b_a*q*(d_c + d_rope), 0),
        ('kv_a_layernorm', 'norm', 'elementwise', 4*B*d_c*q, B*b_a*d_c*q, b_w*d_c, 0, B*b_a*d_c*q, 0),
        ('rope', 'rope', 'elementwise', 3*B*d_rope*q*(n_h + 1), B*b_a*d_rope*q*(n_h + 1), 0, 0, B*b_a*d_rope*q*(n_h + 1), 0),
        ('cache_write', 'cache', 'elementwise', 0, B*b_a*q*(d_c + d_rope), 0, 0, 0, B*b*q*(d_c + d_rope)),
        ('kv_b_proj', 'kv_up', 'matmul', 2*B*S*d_c*n_h*(d_nope + d_v), 0, b_w*d_c*n_h*(d_nope + d_v), B*S*b*d_c, B*S*b_a*n_h*(d_nope + d_v), 0),
        ('k_assemble', 'layout', 'elementwise', 0, B*S*b_a*d_nope*n_h, 0, B*S*b*d_rope, B*S*b_a*n_h*(d_nope + d_rope), 0),
        ('scores', 'core', 'matmul', 2*B*P*n_h*(d_nope + d_rope), B*b_a*n_h*(S + q)*(d_nope + d_rope), 0, 0, B*S*b_a*n_h*q, 0),
        ('softmax', 'softmax', 'elementwise', 5*B*S*n_h*q, B*S*b_a*n_h*q, 0, 0, B*S*b_a*n_h*q, 0),
        ('pv', 'core', 'matmul', 2*B*P*d_v*n_h, B*S*b_a*n_h*(d_v + q), 0, 0, B*b_a*d_v*n_h*q, 0),
        ('o_proj', 'o_proj', 'matmul', 2*B*d*d_v*n_h*q, B*b_a*d_v*n_h*q, b_w*d*(beta_o + d_v*n_h), 0, B*b_a*d*q, 0),
    )


def shapes_mla_compressed_qlora(B, P, S, b, b_a, b_w, beta_o, beta_qkv, d, d_c, d_cq, d_nope, d_rope, d_v, n_h, q):
    return (
        (1, B*q, d_cq, d),
        None,
        (1, B*q, n_h*(d_nope + d_rope), d_cq),
        (1, B*q, d_c + d_rope, d),
        None,
        None,
        None,
        (1, B*S, n_h*(d_nope + d_v), d_c),
        None,
        (B*n_h, q, S, d_nope + d_rope),
        None,
        (B*n_h, q, d_v, S),
        (1, B*q, d, d_v*n_h),
    )


def matmul_flops_mla_compressed_qlora(B, P, S, b, b_a, b_w, beta_o, beta_qkv, d, d_c, d_cq, d_nope, d_rope, d_v, n_h, q):
    return 2*B*(P*d_nope*n_h + P*d_rope*n_h + P*d_v*n_h + S*d_c*d_nope*n_h + S*d_c*d_v*n_h + d*d_c*q + d*d_cq*q + d*d_rope*q + d*d_v*n_h*q + d_cq*d_nope*n_h*q + d_cq*d_rope*n_h*q)


def kv_row_elements_mla_compressed_qlora(B, P, S, b, b_a, b_w, beta_o, beta_qkv, d, d_c, d_cq, d_nope, d_rope, d_v, n_h, q):
    return d_c + d_rope


def params_mla_compressed_qlora(B, P, S, b, b_a, b_w, beta_o, beta_qkv, d, d_c, d_cq, d_nope, d_rope, d_v, n_h, q):
    return {
        'q_a_proj': d_cq*(beta_qkv + d),
        'q_a_layernorm': d_cq,
        'q_b_proj': d_cq*n_h*(d_nope + d_rope),
        'kv_a_proj_with_mqa': (beta_qkv + d)*(d_c + d_rope),
        'kv_a_layernorm': d_c,
        'kv_b_proj': d_c*n_h*(d_nope + d_v),
        'o_proj': d*(beta_o + d_v*n_h),
    }


ARGS_mla_compressed_noqlora = ('B', 'P', 'S', 'b', 'b_a', 'b_w', 'beta_o', 'beta_qkv', 'd', 'd_c', 'd_nope', 'd_rope', 'd_v', 'n_h', 'q',)

def ops_mla_compressed_noqlora(B, P, S, b, b_a, b_w, beta_o, beta_qkv, d, d_c, d_nope, d_rope, d_v, n_h, q):
    return (
        ('q_proj', 'q_proj', 'matmul', 2*B*d*n_h*q*(d_nope + d_rope), B*b_a*d*q, b_w*n_h*(beta_qkv + d)*(d_nope + d_rope), 0, B*b_a*n_h*q*(d_nope + d_rope), 0),
        ('kv_a_proj', 'kv_proj', 'matmul', 2*B*d*q*(d_c + d_rope), B*b_a*d*q, b_w*(beta_qkv + d)*(d_c + d_rope), 0, B*b_a*q*(d_c + d_rope), 0),
        ('kv_a_layernorm', 'norm', 'elementwise', 4*B*d_c*q, B*b_a*d_c*q, b_w*d_c, 0, B*b_a*d_c*q, 0),
        ('rope', 'rope', 'elementwise', 3*B*d_rope*q*(n_h + 1), B*b_a*d_rope*q*(n_h + 1), 0, 0, B*b_a*d_rope*q*(n_h + 1), 0),
        ('cache_write', 'cache', 'elementwise', 0, B*b_a*q*(d_c + d_rope), 0, 0, 0, B*b*q*(d_c + d_rope)),
        ('kv_b_proj', 'kv_up', 'matmul', 2*B*S*d_c*n_h*(d_nope + d_v), 0, b_w*d_c*n_h*(d_nope + d_v), B*S*b*d_c, B*S*b_a*n_h*(d_nope + d_v), 0),
        ('k_assemble', 'layout', 'elementwise', 0, B*S*b_a*d_nope*n_h, 0, B*S*b*d_rope, B*S*b_a*n_h*(d_nope + d_rope), 0),
        ('scores', 'core', 'matmul', 2*B*P*n_h*(d_nope + d_rope), B*b_a*n_h*(S + q)*(d_nope + d_rope), 0, 0, B*S*b_a*n_h*q, 0),
        ('softmax', 'softmax', 'elementwise', 5*B*S*n_h*q, B*S*b_a*n_h*q, 0, 0, B*S*b_a*n_h*q, 0),
        ('pv', 'core', 'matmul', 2*B*P*d_v*n_h, B*S*b_a*n_h*(d_v + q), 0, 0, B*b_a*d_v*n_h*q, 0),
        ('o_proj', 'o_proj', 'matmul', 2*B*d*d_v*n_h*q, B*b_a*d_v*n_h*q, b_w*d*(beta_o + d_v*n_h), 0, B*b_a*d*q, 0),
    )


def shapes_mla_compressed_noqlora(B, P, S, b, b_a, b_w, beta_o, beta_qkv, d, d_c, d_nope, d_rope, d_v, n_h, q):
    return (
        (1, B*q, n_h*(d_nope + d_rope), d),
        (1, B*q, d_c + d_rope, d),
        None,
        None,
        None,
        (1, B*S, n_h*(d_nope + d_v), d_c),
        None,
        (B*n_h, q, S, d_nope + d_rope),
        None,
        (B*n_h, q, d_v, S),
        (1, B*q, d, d_v*n_h),
    )


def matmul_flops_mla_compressed_noqlora(B, P, S, b, b_a, b_w, beta_o, beta_qkv, d, d_c, d_nope, d_rope, d_v, n_h, q):
    return 2*B*(P*d_nope*n_h + P*d_rope*n_h + P*d_v*n_h + S*d_c*d_nope*n_h + S*d_c*d_v*n_h + d*d_c*q + d*d_nope*n_h*q + d*d_rope*n_h*q + d*d_rope*q + d*d_v*n_h*q)


def kv_row_elements_mla_compressed_noqlora(B, P, S, b, b_a, b_w, beta_o, beta_qkv, d, d_c, d_nope, d_rope, d_v, n_h, q):
    return d_c + d_rope


def params_mla_compressed_noqlora(B, P, S, b, b_a, b_w, beta_o, beta_qkv, d, d_c, d_nope, d_rope, d_v, n_h, q):
    return {
        'q_proj': n_h*(beta_qkv + d)*(d_nope + d_rope),
        'kv_a_proj_with_mqa': (beta_qkv + d)*(d_c + d_rope),
        'kv_a_layernorm': d_c,
        'kv_b_proj': d_c*n_h*(d_nope + d_v),
        'o_proj': d*(beta_o + d_v*n_h),
    }


ARGS_mla_absorbed_qlora = ('B', 'P', 'S', 'b', 'b_a', 'b_w', 'beta_o', 'beta_qkv', 'd', 'd_c', 'd_cq', 'd_nope', 'd_rope', 'd_v', 'n_h', 'q',)

def ops_mla_absorbed_qlora(B, P, S, b, b_a, b_w, beta_o, beta_qkv, d, d_c, d_cq, d_nope, d_rope, d_v, n_h, q):
    return (
        ('q_a_proj', 'q_proj', 'matmul', 2*B*d*d_cq*q, B*b_a*d*q, b_w*d_cq*(beta_qkv + d), 0, B*b_a*d_cq*q, 0),
        ('q_a_layernorm', 'norm', 'elementwise', 4*B*d_cq*q, B*b_a*d_cq*q, b_w*d_cq, 0, B*b_a*d_cq*q, 0),
        ('q_b_proj', 'q_proj', 'matmul', 2*B*d_cq*n_h*q*(d_nope + d_rope), B*b_a*d_cq*q, b_w*d_cq*n_h*(d_nope + d_rope), 0, B*b_a*n_h*q*(d_nope + d_rope), 0),
        ('kv_a_proj', 'kv_proj', 'matmul', 2*B*d*q*(d_c + d_rope), B*b_a*d*q, b_w*(beta_qkv + d)*(d_c + d_rope), 0, B*b_a*q*(d_c + d_rope), 0),
        ('kv_a_layernorm', 'norm', 'elementwise', 4*B*d_c*q, B*b_a*d_c*q, b_w*d_c, 0, B*b_a*d_c*q, 0),
        ('rope', 'rope', 'elementwise', 3*B*d_rope*q*(n_h + 1), B*b_a*d_rope*q*(n_h + 1), 0, 0, B*b_a*d_rope*q*(n_h + 1), 0),
        ('cache_write', 'cache', 'elementwise', 0, B*b_a*q*(d_c + d_rope), 0, 0, 0, B*b*q*(d_c + d_rope)),
        ('q_absorb', 'absorb', 'matmul', 2*B*d_c*d_nope*n_h*q, B*b_a*d_nope*n_h*q, b_w*d_c*d_nope*n_h, 0, B*b_a*d_c*n_h*q, 0),
        ('q_assemble', 'layout', 'elementwise', 0, B*b_a*n_h*q*(d_c + d_rope), 0, 0, B*b_a*n_h*q*(d_c + d_rope), 0),
        ('scores', 'core', 'matmul', 2*B*P*n_h*(d_c + d_rope), B*b_a*n_h*q*(d_c + d_rope), 0, B*S*b*(d_c + d_rope), B*S*b_a*n_h*q, 0),
        ('softmax', 'softmax', 'elementwise', 5*B*S*n_h*q, B*S*b_a*n_h*q, 0, 0, B*S*b_a*n_h*q, 0),
        ('pv', 'core', 'matmul', 2*B*P*d_c*n_h, B*S*b_a*n_h*q, 0, B*S*b*d_c, B*b_a*d_c*n_h*q, 0),
        ('o_absorb', 'absorb', 'matmul', 2*B*d_c*d_v*n_h*q, B*b_a*d_c*n_h*q, b_w*d_c*d_v*n_h, 0, B*b_a*d_v*n_h*q, 0),
        ('o_proj', 'o_proj', 'matmul', 2*B*d*d_v*n_h*q, B*b_a*d_v*n_h*q, b_w*d*(beta_o + d_v*n_h), 0, B*b_a*d*q, 0),
    )


def shapes_mla_absorbed_qlora(B, P, S, b, b_a, b_w, beta_o, beta_qkv, d, d_c, d_cq, d_nope, d_rope, d_v, n_h, q):
    return (
        (1, B*q, d_cq, d),
        None,
        (1, B*q, n_h*(d_nope + d_rope), d_cq),
        (1, B*q, d_c + d_rope, d),
        None,
        None,
        None,
        (n_h, B*q, d_c, d_nope),
        None,
        (B, n_h*q, S, d_c + d_rope),
        None,
        (B, n_h*q, d_c, S),
        (n_h, B*q, d_v, d_c),
        (1, B*q, d, d_v*n_h),
    )


def matmul_flops_mla_absorbed_qlora(B, P, S, b, b_a, b_w, beta_o, beta_qkv, d, d_c, d_cq, d_nope, d_rope, d_v, n_h, q):
    return 2*B*(2*P*d_c*n_h + P*d_rope*n_h + d*d_c*q + d*d_cq*q + d*d_rope*q + d*d_v*n_h*q + d_c*d_nope*n_h*q + d_c*d_v*n_h*q + d_cq*d_nope*n_h*q + d_cq*d_rope*n_h*q)


def kv_row_elements_mla_absorbed_qlora(B, P, S, b, b_a, b_w, beta_o, beta_qkv, d, d_c, d_cq, d_nope, d_rope, d_v, n_h, q):
    return d_c + d_rope


def params_mla_absorbed_qlora(B, P, S, b, b_a, b_w, beta_o, beta_qkv, d, d_c, d_cq, d_nope, d_rope, d_v, n_h, q):
    return {
        'q_a_proj': d_cq*(beta_qkv + d),
        'q_a_layernorm': d_cq,
        'q_b_proj': d_cq*n_h*(d_nope + d_rope),
        'kv_a_proj_with_mqa': (beta_qkv + d)*(d_c + d_rope),
        'kv_a_layernorm': d_c,
        'kv_b_proj': d_c*n_h*(d_nope + d_v),
        'o_proj': d*(beta_o + d_v*n_h),
    }


ARGS_mla_absorbed_noqlora = ('B', 'P', 'S', 'b', 'b_a', 'b_w', 'beta_o', 'beta_qkv', 'd', 'd_c', 'd_nope', 'd_rope', 'd_v', 'n_h', 'q',)

def ops_mla_absorbed_noqlora(B, P, S, b, b_a, b_w, beta_o, beta_qkv, d, d_c, d_nope, d_rope, d_v, n_h, q):
    return (
        ('q_proj', 'q_proj', 'matmul', 2*B*d*n_h*q*(d_nope + d_rope), B*b_a*d*q, b_w*n_h*(beta_qkv + d)*(d_nope + d_rope), 0, B*b_a*n_h*q*(d_nope + d_rope), 0),
        ('kv_a_proj', 'kv_proj', 'matmul', 2*B*d*q*(d_c + d_rope), B*b_a*d*q, b_w*(beta_qkv + d)*(d_c + d_rope), 0, B*b_a*q*(d_c + d_rope), 0),
        ('kv_a_layernorm', 'norm', 'elementwise', 4*B*d_c*q, B*b_a*d_c*q, b_w*d_c, 0, B*b_a*d_c*q, 0),
        ('rope', 'rope', 'elementwise', 3*B*d_rope*q*(n_h + 1), B*b_a*d_rope*q*(n_h + 1), 0, 0, B*b_a*d_rope*q*(n_h + 1), 0),
        ('cache_write', 'cache', 'elementwise', 0, B*b_a*q*(d_c + d_rope), 0, 0, 0, B*b*q*(d_c + d_rope)),
        ('q_absorb', 'absorb', 'matmul', 2*B*d_c*d_nope*n_h*q, B*b_a*d_nope*n_h*q, b_w*d_c*d_nope*n_h, 0, B*b_a*d_c*n_h*q, 0),
        ('q_assemble', 'layout', 'elementwise', 0, B*b_a*n_h*q*(d_c + d_rope), 0, 0, B*b_a*n_h*q*(d_c + d_rope), 0),
        ('scores', 'core', 'matmul', 2*B*P*n_h*(d_c + d_rope), B*b_a*n_h*q*(d_c + d_rope), 0, B*S*b*(d_c + d_rope), B*S*b_a*n_h*q, 0),
        ('softmax', 'softmax', 'elementwise', 5*B*S*n_h*q, B*S*b_a*n_h*q, 0, 0, B*S*b_a*n_h*q, 0),
        ('pv', 'core', 'matmul', 2*B*P*d_c*n_h, B*S*b_a*n_h*q, 0, B*S*b*d_c, B*b_a*d_c*n_h*q, 0),
        ('o_absorb', 'absorb', 'matmul', 2*B*d_c*d_v*n_h*q, B*b_a*d_c*n_h*q, b_w*d_c*d_v*n_h, 0, B*b_a*d_v*n_h*q, 0),
        ('o_proj', 'o_proj', 'matmul', 2*B*d*d_v*n_h*q, B*b_a*d_v*n_h*q, b_w*d*(beta_o + d_v*n_h), 0, B*b_a*d*q, 0),
    )


def shapes_mla_absorbed_noqlora(B, P, S, b, b_a, b_w, beta_o, beta_qkv, d, d_c, d_nope, d_rope, d_v, n_h, q):
    return (
        (1, B*q, n_h*(d_nope + d_rope), d),
        (1, B*q, d_c + d_rope, d),
        None,
        None,
        None,
        (n_h, B*q, d_c, d_nope),
        None,
        (B, n_h*q, S, d_c + d_rope),
        None,
        (B, n_h*q, d_c, S),
        (n_h, B*q, d_v, d_c),
        (1, B*q, d, d_v*n_h),
    )


def matmul_flops_mla_absorbed_noqlora(B, P, S, b, b_a, b_w, beta_o, beta_qkv, d, d_c, d_nope, d_rope, d_v, n_h, q):
    return 2*B*(2*P*d_c*n_h + P*d_rope*n_h + d*d_c*q + d*d_nope*n_h*q + d*d_rope*n_h*q + d*d_rope*q + d*d_v*n_h*q + d_c*d_nope*n_h*q + d_c*d_v*n_h*q)


def kv_row_elements_mla_absorbed_noqlora(B, P, S, b, b_a, b_w, beta_o, beta_qkv, d, d_c, d_nope, d_rope, d_v, n_h, q):
    return d_c + d_rope


def params_mla_absorbed_noqlora(B, P, S, b, b_a, b_w, beta_o, beta_qkv, d, d_c, d_nope, d_rope, d_v, n_h, q):
    return {
        'q_proj': n_h*(beta_qkv + d)*(d_nope + d_rope),
        'kv_a_proj_with_mqa': (beta_qkv + d)*(d_c + d_rope),
        'kv_a_layernorm': d_c,
        'kv_b_proj': d_c*n_h*(d_nope + d_v),
        'o_proj': d*(beta_o + d_v*n_h),
    }


ARGS_mla_absorbed_merged_qlora = ('B', 'P', 'S', 'b', 'b_a', 'b_w', 'beta_o', 'beta_qkv', 'd', 'd_c', 'd_cq', 'd_nope', 'd_rope', 'd_v', 'n_h', 'q',)

def ops_mla_absorbed_merged_qlora(B, P, S, b, b_a, b_w, beta_o, beta_qkv, d, d_c, d_cq, d_nope, d_rope, d_v, n_h, q):
    return (
        ('q_a_proj', 'q_proj', 'matmul', 2*B*d*d_cq*q, B*b_a*d*q, b_w*d_cq*(beta_qkv + d), 0, B*b_a*d_cq*q, 0),
        ('q_a_layernorm', 'norm', 'elementwise', 4*B*d_cq*q, B*b_a*d_cq*q, b_w*d_cq, 0, B*b_a*d_cq*q, 0),
        ('q_b_proj', 'q_proj', 'matmul', 2*B*d_cq*n_h*q*(d_c + d_rope), B*b_a*d_cq*q, b_w*d_cq*n_h*(d_c + d_rope), 0, B*b_a*n_h*q*(d_c + d_rope), 0),
        ('kv_a_proj', 'kv_proj', 'matmul', 2*B*d*q*(d_c + d_rope), B*b_a*d*q, b_w*(beta_qkv + d)*(d_c + d_rope), 0, B*b_a*q*(d_c + d_rope), 0),
        ('kv_a_layernorm', 'norm', 'elementwise', 4*B*d_c*q, B*b_a*d_c*q, b_w*d_c, 0, B*b_a*d_c*q, 0),
        ('rope', 'rope', 'elementwise', 3*B*d_rope*q*(n_h + 1), B*b_a*d_rope*q*(n_h + 1), 0, 0, B*b_a*d_rope*q*(n_h + 1), 0),
        ('cache_write', 'cache', 'elementwise', 0, B*b_a*q*(d_c + d_rope), 0, 0, 0, B*b*q*(d_c + d_rope)),
        ('scores', 'core', 'matmul', 2*B*P*n_h*(d_c + d_rope), B*b_a*n_h*q*(d_c + d_rope), 0, B*S*b*(d_c + d_rope), B*S*b_a*n_h*q, 0),
        ('softmax', 'softmax', 'elementwise', 5*B*S*n_h*q, B*S*b_a*n_h*q, 0, 0, B*S*b_a*n_h*q, 0),
        ('pv', 'core', 'matmul', 2*B*P*d_c*n_h, B*S*b_a*n_h*q, 0, B*S*b*d_c, B*b_a*d_c*n_h*q, 0),
        ('o_proj', 'o_proj', 'matmul', 2*B*d*d_c*n_h*q, B*b_a*d_c*n_h*q, b_w*d*(beta_o + d_c*n_h), 0, B*b_a*d*q, 0),
    )


def shapes_mla_absorbed_merged_qlora(B, P, S, b, b_a, b_w, beta_o, beta_qkv, d, d_c, d_cq, d_nope, d_rope, d_v, n_h, q):
    return (
        (1, B*q, d_cq, d),
        None,
        (1, B*q, n_h*(d_c + d_rope), d_cq),
        (1, B*q, d_c + d_rope, d),
        None,
        None,
        None,
        (B, n_h*q, S, d_c + d_rope),
        None,
        (B, n_h*q, d_c, S),
        (1, B*q, d, d_c*n_h),
    )


def matmul_flops_mla_absorbed_merged_qlora(B, P, S, b, b_a, b_w, beta_o, beta_qkv, d, d_c, d_cq, d_nope, d_rope, d_v, n_h, q):
    return 2*B*(2*P*d_c*n_h + P*d_rope*n_h + d*d_c*n_h*q + d*d_c*q + d*d_cq*q + d*d_rope*q + d_c*d_cq*n_h*q + d_cq*d_rope*n_h*q)


def kv_row_elements_mla_absorbed_merged_qlora(B, P, S, b, b_a, b_w, beta_o, beta_qkv, d, d_c, d_cq, d_nope, d_rope, d_v, n_h, q):
    return d_c + d_rope


def params_mla_absorbed_merged_qlora(B, P, S, b, b_a, b_w, beta_o, beta_qkv, d, d_c, d_cq, d_nope, d_rope, d_v, n_h, q):
    return {
        'q_a_proj': d_cq*(beta_qkv + d),
        'q_a_layernorm': d_cq,
        'q_b_proj': d_cq*n_h*(d_nope + d_rope),
        'kv_a_proj_with_mqa': (beta_qkv + d)*(d_c + d_rope),
        'kv_a_layernorm': d_c,
        'kv_b_proj': d_c*n_h*(d_nope + d_v),
        'o_proj': d*(beta_o + d_v*n_h),
    }


ARGS_mla_absorbed_merged_noqlora = ('B', 'P', 'S', 'b', 'b_a', 'b_w', 'beta_o', 'beta_qkv', 'd', 'd_c', 'd_nope', 'd_rope', 'd_v', 'n_h', 'q',)

def ops_mla_absorbed_merged_noqlora(B, P, S, b, b_a, b_w, beta_o, beta_qkv, d, d_c, d_nope, d_rope, d_v, n_h, q):
    return (
        ('q_proj', 'q_proj', 'matmul', 2*B*d*n_h*q*(d_c + d_rope), B*b_a*d*q, b_w*n_h*(beta_qkv + d)*(d_c + d_rope), 0, B*b_a*n_h*q*(d_c + d_rope), 0),
        ('kv_a_proj', 'kv_proj', 'matmul', 2*B*d*q*(d_c + d_rope), B*b_a*d*q, b_w*(beta_qkv + d)*(d_c + d_rope), 0, B*b_a*q*(d_c + d_rope), 0),
        ('kv_a_layernorm', 'norm', 'elementwise', 4*B*d_c*q, B*b_a*d_c*q, b_w*d_c, 0, B*b_a*d_c*q, 0),
        ('rope', 'rope', 'elementwise', 3*B*d_rope*q*(n_h + 1), B*b_a*d_rope*q*(n_h + 1), 0, 0, B*b_a*d_rope*q*(n_h + 1), 0),
        ('cache_write', 'cache', 'elementwise', 0, B*b_a*q*(d_c + d_rope), 0, 0, 0, B*b*q*(d_c + d_rope)),
        ('scores', 'core', 'matmul', 2*B*P*n_h*(d_c + d_rope), B*b_a*n_h*q*(d_c + d_rope), 0, B*S*b*(d_c + d_rope), B*S*b_a*n_h*q, 0),
        ('softmax', 'softmax', 'elementwise', 5*B*S*n_h*q, B*S*b_a*n_h*q, 0, 0, B*S*b_a*n_h*q, 0),
        ('pv', 'core', 'matmul', 2*B*P*d_c*n_h, B*S*b_a*n_h*q, 0, B*S*b*d_c, B*b_a*d_c*n_h*q, 0),
        ('o_proj', 'o_proj', 'matmul', 2*B*d*d_c*n_h*q, B*b_a*d_c*n_h*q, b_w*d*(beta_o + d_c*n_h), 0, B*b_a*d*q, 0),
    )


def shapes_mla_absorbed_merged_noqlora(B, P, S, b, b_a, b_w, beta_o, beta_qkv, d, d_c, d_nope, d_rope, d_v, n_h, q):
    return (
        (1, B*q, n_h*(d_c + d_rope), d),
        (1, B*q, d_c + d_rope, d),
        None,
        None,
        None,
        (B, n_h*q, S, d_c + d_rope),
        None,
        (B, n_h*q, d_c, S),
        (1, B*q, d, d_c*n_h),
    )


def matmul_flops_mla_absorbed_merged_noqlora(B, P, S, b, b_a, b_w, beta_o, beta_qkv, d, d_c, d_nope, d_rope, d_v, n_h, q):
    return 2*B*(2*P*d_c*n_h + P*d_rope*n_h + 2*d*d_c*n_h*q + d*d_c*q + d*d_rope*n_h*q + d*d_rope*q)


def kv_row_elements_mla_absorbed_merged_noqlora(B, P, S, b, b_a, b_w, beta_o, beta_qkv, d, d_c, d_nope, d_rope, d_v, n_h, q):
    return d_c + d_rope


def params_mla_absorbed_merged_noqlora(B, P, S, b, b_a, b_w, beta_o, beta_qkv, d, d_c, d_nope, d_rope, d_v, n_h, q):
    return {
        'q_proj': n_h*(beta_qkv + d)*(d_nope + d_rope),
        'kv_a_proj_with_mqa': (beta_qkv + d)*(d_c + d_rope),
        'kv_a_layernorm': d_c,
        'kv_b_proj': d_c*n_h*(d_nope + d_v),
        'o_proj': d*(beta_o + d_v*n_h),
    }


LAYERS = {
    'mha': LayerFunctions(ARGS_mha, ops_mha, kv_row_elements_mha, params_mha, matmul_flops_mha, shapes_mha),
    'mla_naive_qlora': LayerFunctions(ARGS_mla_naive_qlora, ops_mla_naive_qlora, kv_row_elements_mla_naive_qlora, params_mla_naive_qlora, matmul_flops_mla_naive_qlora, shapes_mla_naive_qlora),
    'mla_naive_noqlora': LayerFunctions(ARGS_mla_naive_noqlora, ops_mla_naive_noqlora, kv_row_elements_mla_naive_noqlora, params_mla_naive_noqlora, matmul_flops_mla_naive_noqlora, shapes_mla_naive_noqlora),
    'mla_compressed_qlora': LayerFunctions(ARGS_mla_compressed_qlora, ops_mla_compressed_qlora, kv_row_elements_mla_compressed_qlora, params_mla_compressed_qlora, matmul_flops_mla_compressed_qlora, shapes_mla_compressed_qlora),
    'mla_compressed_noqlora': LayerFunctions(ARGS_mla_compressed_noqlora, ops_mla_compressed_noqlora, kv_row_elements_mla_compressed_noqlora, params_mla_compressed_noqlora, matmul_flops_mla_compressed_noqlora, shapes_mla_compressed_noqlora),
    'mla_absorbed_qlora': LayerFunctions(ARGS_mla_absorbed_qlora, ops_mla_absorbed_qlora, kv_row_elements_mla_absorbed_qlora, params_mla_absorbed_qlora, matmul_flops_mla_absorbed_qlora, shapes_mla_absorbed_qlora),
    'mla_absorbed_noqlora': LayerFunctions(ARGS_mla_absorbed_noqlora, ops_mla_absorbed_noqlora, kv_row_elements_mla_absorbed_noqlora, params_mla_absorbed_noqlora, matmul_flops_mla_absorbed_noqlora, shapes_mla_absorbed_noqlora),
    'mla_absorbed_merged_qlora': LayerFunctions(ARGS_mla_absorbed_merged_qlora, ops_mla_absorbed_merged_qlora, kv_row_elements_mla_absorbed_merged_qlora, params_mla_absorbed_merged_qlora, matmul_flops_mla_absorbed_merged_qlora, shapes_mla_absorbed_merged_qlora),
    'mla_absorbed_merged_noqlora': LayerFunctions(ARGS_mla_absorbed_merged_noqlora, ops_mla_absorbed_merged_noqlora, kv_row_elements_mla_absorbed_merged_noqlora, params_mla_absorbed_merged_noqlora, matmul_flops_mla_absorbed_merged_noqlora, shapes_mla_absorbed_merged_noqlora),
}
