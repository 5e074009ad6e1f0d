"""The sympy symbols every formula is built from (created once, here).

All are positive integers except the byte sizes (positive rationals, so that
4-bit formats stay exact) and the 0/1 switches for biases and RoPE.
"""

from __future__ import annotations

import sympy as sp

_dim = {"positive": True, "integer": True}

# model dimensions
d = sp.Symbol("d", **_dim)  #: hidden size
L = sp.Symbol("L", **_dim)  #: decoder layers
n_h = sp.Symbol("n_h", **_dim)  #: query heads
n_kv = sp.Symbol("n_kv", **_dim)  #: key/value heads (MHA family)
d_h = sp.Symbol("d_h", **_dim)  #: head width (MHA family)
d_c = sp.Symbol("d_c", **_dim)  #: MLA latent width (kv_lora_rank)
d_cq = sp.Symbol("d_cq", **_dim)  #: MLA query latent width (q_lora_rank)
d_nope = sp.Symbol("d_nope", **_dim)  #: MLA per-head query/key width without RoPE
d_rope = sp.Symbol("d_rope", **_dim)  #: MLA decoupled RoPE width
d_v = sp.Symbol("d_v", **_dim)  #: MLA per-head value width
k = sp.Symbol("k", **_dim)  #: DSA keys the indexer picks per query (index_topk)
n_i = sp.Symbol("n_i", **_dim)  #: DSA indexer heads (index_n_heads)
d_i = sp.Symbol("d_i", **_dim)  #: DSA indexer head width (index_head_dim)

# DeepSeek-V4's compressed layers (formulas/compressed_layer.py; d_h is their head_dim D)
W = sp.Symbol("W", **_dim)  #: sliding window: the last W tokens' rows every V4 layer keeps
m_r = sp.Symbol("m", **_dim)  #: a compressed layer's rate: one pooled key per m tokens
d_o = sp.Symbol("d_o", **_dim)  #: V4's output low rank (o_lora_rank)
g = sp.Symbol("g", **_dim)  #: V4's output groups (o_groups)

# workload
B = sp.Symbol("B", **_dim)  #: batch (sequences)
S = sp.Symbol("S", **_dim)  #: keys the last query attends (KV length)
q = sp.Symbol("q", **_dim)  #: new (query) tokens per sequence in this step
P = sp.Symbol("P", **_dim)  #: (query, key) pairs computed per sequence per head
P_k = sp.Symbol("P_k", **_dim)  #: DSA core pairs per sequence per head (min(j, k) keys each)

# bytes per element
b = sp.Symbol("b", positive=True, rational=True)  #: KV-cache bytes per element
b_w = sp.Symbol("b_w", positive=True, rational=True)  #: weight bytes per element
b_a = sp.Symbol("b_a", positive=True, rational=True)  #: activation bytes per element
#: DSA indexer key bytes per element: fp8 with a float32 scale a 128 values (33/32)
b_i = sp.Symbol("b_i", positive=True, rational=True)

# 0/1 switches
beta_qkv = sp.Symbol(
    "beta_qkv", nonnegative=True, integer=True
)  #: q/k/v (MLA: q_a, kv_a) biases present
beta_o = sp.Symbol("beta_o", nonnegative=True, integer=True)  #: output-projection bias present
rho = sp.Symbol("rho", nonnegative=True, integer=True)  #: RoPE applied (1) or not (0)

#: Symbols by name, for users who want to substitute values.
ALL = {
    s.name: s
    for s in (
        d,
        L,
        n_h,
        n_kv,
        d_h,
        d_c,
        d_cq,
        d_nope,
        d_rope,
        d_v,
        k,
        n_i,
        d_i,
        W,
        m_r,
        d_o,
        g,
        B,
        S,
        q,
        P,
        P_k,
        b,
        b_w,
        b_a,
        b_i,
        beta_qkv,
        beta_o,
        rho,
    )
}
