"""Reference PyTorch attention layers: MHA/GQA/MQA and MLA in every implementation.

These are the independent route the engine is checked against (their FLOPs are
counted by ``torch.utils.flop_counter.FlopCounterMode`` and their cache tensors
measured with ``nbytes``) and the code the companion microbenchmark times. They
are written for clarity, one PyTorch op per step of the engine's op sequence.

Parameter names follow the Hugging Face implementations (``q_a_proj``,
``kv_a_proj_with_mqa``, ``kv_b_proj``, ...), so ``sum(p.numel())`` can be compared
with :func:`mlacalc.attention_params`.

Cache handling: ``forward(x, cache)`` takes the cache of the tokens before this
step (``None`` for an empty one), appends the new tokens' rows and returns
``(output, new_cache)``. With a sliding window ``W`` the returned cache keeps the
last ``W`` tokens and each query attends at most ``W`` keys.

Core modes (how the (query, key) pairs are computed):

- ``"dense"``: one matmul over all ``q x S`` pairs, masked (what a dense kernel does);
- ``"causal"``: row by row, each query against exactly the keys it may see;
- with a window, ``"dense"`` gives each query a band of ``min(S, W)`` keys.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

__all__ = ["RMSNorm", "MHAReference", "MLAReference", "MHACache", "MLACache", "layer_for_model"]


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scale = torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + self.eps)
        return (x.float() * scale).to(x.dtype) * self.weight


def rope(x: torch.Tensor, positions: torch.Tensor, theta: float = 10000.0) -> torch.Tensor:
    """Rotate pairs of the last dimension of ``x`` [..., T, (heads,) dim] by position."""
    dim = x.shape[-1]
    inv = 1.0 / theta ** (torch.arange(0, dim, 2, device=x.device, dtype=torch.float32) / dim)
    angles = positions.to(torch.float32)[:, None] * inv[None, :]          # [T, dim/2]
    cos = torch.cat([angles.cos(), angles.cos()], -1)
    sin = torch.cat([angles.sin(), angles.sin()], -1)
    shape = [1] * x.dim()
    t_axis = x.dim() - 2 if x.dim() == 3 else x.dim() - 3   # [B, T, dim] or [B, T, H, dim]
    shape[t_axis] = x.shape[t_axis]
    shape[-1] = dim
    cos, sin = cos.view(shape).to(x.dtype), sin.view(shape).to(x.dtype)
    half = dim // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], -1)
    return x * cos + rotated * sin


def _key_ranges(q: int, S: int, window: int | None, mode: str) -> list[tuple[int, int]]:
    """For each new query (the last at key S), the [lo, hi) key range its row computes."""
    out = []
    for j in range(S - q + 1, S + 1):            # 1-based position of the query
        if mode == "causal":
            lo = 0 if window is None else max(0, j - window)
            out.append((lo, j))
        else:
            width = S if window is None else min(S, window)
            lo = max(0, min(j - width, S - width))
            out.append((lo, lo + width))
    return out


def _mask(q: int, S: int, window: int | None, device) -> torch.Tensor:
    """Boolean [q, S] mask of the keys each query may see (for the dense mode)."""
    pos = torch.arange(S - q, S, device=device)[:, None]
    key = torch.arange(S, device=device)[None, :]
    allowed = key <= pos
    if window is not None:
        allowed &= key > pos - window
    return allowed


# --------------------------------------------------------------------------------------
# MHA / GQA / MQA

@dataclass
class MHACache:
    k: torch.Tensor   # [B, S, n_kv, d_h]
    v: torch.Tensor   # [B, S, n_kv, d_h]

    @property
    def nbytes(self) -> int:
        return self.k.nbytes + self.v.nbytes

    @property
    def length(self) -> int:
        return self.k.shape[1]


class MHAReference(nn.Module):
    """Multi-head attention with ``n_kv`` KV heads (MHA: n_kv = n_h, MQA: n_kv = 1).

    ``offset`` is the number of tokens before the cache's first row (non-zero once
    a sliding window has dropped old tokens); positions are absolute.
    """

    def __init__(self, d: int, n_h: int, n_kv: int, d_h: int, *, qkv_bias: bool = False, o_bias: bool = False,
                 use_rope: bool = True, window: int | None = None, cache_dtype: torch.dtype | None = None):
        super().__init__()
        if n_h % n_kv:
            raise ValueError("n_h must be a multiple of n_kv")
        self.d, self.n_h, self.n_kv, self.d_h = d, n_h, n_kv, d_h
        self.use_rope, self.window, self.cache_dtype = use_rope, window, cache_dtype
        self.q_proj = nn.Linear(d, n_h * d_h, bias=qkv_bias)
        self.k_proj = nn.Linear(d, n_kv * d_h, bias=qkv_bias)
        self.v_proj = nn.Linear(d, n_kv * d_h, bias=qkv_bias)
        self.o_proj = nn.Linear(n_h * d_h, d, bias=o_bias)

    def empty_cache(self, batch: int, dtype=None, device=None) -> MHACache:
        dtype = dtype or self.cache_dtype or self.q_proj.weight.dtype
        shape = (batch, 0, self.n_kv, self.d_h)
        return MHACache(torch.empty(shape, dtype=dtype, device=device), torch.empty(shape, dtype=dtype, device=device))

    def forward(self, x: torch.Tensor, cache: MHACache | None = None, *, start: int = 0,
                mode: str = "dense") -> tuple[torch.Tensor, MHACache]:
        B, q, _ = x.shape
        cache = cache if cache is not None else self.empty_cache(B, device=x.device)
        positions = torch.arange(start, start + q, device=x.device)
        xq = self.q_proj(x).view(B, q, self.n_h, self.d_h)
        # K and V are projected by one fused matmul when the weights are concatenated;
        # two Linear calls count the same FLOPs and keep the HF parameter names.
        xk = self.k_proj(x).view(B, q, self.n_kv, self.d_h)
        xv = self.v_proj(x).view(B, q, self.n_kv, self.d_h)
        if self.use_rope:
            xq, xk = rope(xq, positions), rope(xk, positions)
        k_all = torch.cat([cache.k, xk.to(cache.k.dtype)], 1)
        v_all = torch.cat([cache.v, xv.to(cache.v.dtype)], 1)
        S = k_all.shape[1]
        g = self.n_h // self.n_kv
        # group the query heads of each KV head so every K/V head is read once
        qg = xq.view(B, q, self.n_kv, g, self.d_h).permute(0, 2, 3, 1, 4).reshape(B, self.n_kv, g * q, self.d_h)
        kt = k_all.to(x.dtype).permute(0, 2, 3, 1)                     # [B, n_kv, d_h, S]
        vv = v_all.to(x.dtype).permute(0, 2, 1, 3)                     # [B, n_kv, S, d_h]
        scale = 1.0 / math.sqrt(self.d_h)
        window = self.window
        if mode == "dense":
            lo = 0
            if window is not None and S > window:
                if q > 1:
                    raise ValueError("a prompt longer than the window needs mode='band' or mode='causal'")
                lo = S - window                                        # decode: the last W keys
            scores = torch.matmul(qg, kt[..., lo:]) * scale           # [B, n_kv, g*q, S - lo]
            allowed = _mask(q, S - lo, window, x.device).repeat(g, 1)
            probs = torch.softmax(scores.masked_fill(~allowed, float("-inf")), -1)
            out = torch.matmul(probs, vv[:, :, lo:])                  # [B, n_kv, g*q, d_h]
        else:
            rows = []
            for i, (lo, hi) in enumerate(_key_ranges(q, S, window, "causal" if mode == "causal" else "band")):
                qi = qg.view(B, self.n_kv, g, q, self.d_h)[:, :, :, i]            # [B, n_kv, g, d_h]
                s = torch.matmul(qi, kt[..., lo:hi]) * scale                      # [B, n_kv, g, hi-lo]
                keys = torch.arange(lo, hi, device=x.device)
                pos = S - q + i
                ok = keys <= pos
                if window is not None:
                    ok &= keys > pos - window
                p = torch.softmax(s.masked_fill(~ok, float("-inf")), -1)
                rows.append(torch.matmul(p, vv[:, :, lo:hi]))                     # [B, n_kv, g, d_h]
            out = torch.stack(rows, 3).reshape(B, self.n_kv, g * q, self.d_h)
        out = out.view(B, self.n_kv, g, q, self.d_h).permute(0, 3, 1, 2, 4).reshape(B, q, self.n_h * self.d_h)
        keep = S if window is None else min(S, window)
        return self.o_proj(out), MHACache(k_all[:, S - keep:], v_all[:, S - keep:])


# --------------------------------------------------------------------------------------
# MLA

@dataclass
class MLACache:
    """MLA cache: ``latent`` [B, S, d_c + d_rope] (compressed impls) or expanded
    ``k`` [B, S, n_h, d_nope + d_rope] and ``v`` [B, S, n_h, d_v] (naive)."""

    latent: torch.Tensor | None = None
    k: torch.Tensor | None = None
    v: torch.Tensor | None = None

    @property
    def nbytes(self) -> int:
        return sum(t.nbytes for t in (self.latent, self.k, self.v) if t is not None)

    @property
    def length(self) -> int:
        return (self.latent if self.latent is not None else self.k).shape[1]


class MLAReference(nn.Module):
    """Multi-head latent attention with decoupled RoPE and optional query compression.

    ``impl`` is ``"naive"``, ``"compressed"``, ``"absorbed"`` or ``"absorbed_merged"``;
    it may be changed after construction (the weights are shared), but call
    :meth:`merge_weights` before using ``"absorbed_merged"`` after the weights change.
    """

    def __init__(self, d: int, n_h: int, d_c: int, d_cq: int | None, d_nope: int, d_rope: int, d_v: int, *,
                 impl: str = "absorbed", bias: bool = False, cache_dtype: torch.dtype | None = None):
        super().__init__()
        self.d, self.n_h, self.d_c, self.d_cq = d, n_h, d_c, d_cq
        self.d_nope, self.d_rope, self.d_v = d_nope, d_rope, d_v
        self.impl, self.cache_dtype = impl, cache_dtype
        if d_cq:
            self.q_a_proj = nn.Linear(d, d_cq, bias=bias)
            self.q_a_layernorm = RMSNorm(d_cq)
            self.q_b_proj = nn.Linear(d_cq, n_h * (d_nope + d_rope), bias=False)
        else:
            self.q_proj = nn.Linear(d, n_h * (d_nope + d_rope), bias=bias)
        self.kv_a_proj_with_mqa = nn.Linear(d, d_c + d_rope, bias=bias)
        self.kv_a_layernorm = RMSNorm(d_c)
        self.kv_b_proj = nn.Linear(d_c, n_h * (d_nope + d_v), bias=False)
        self.o_proj = nn.Linear(n_h * d_v, d, bias=bias)
        self._merged: tuple[torch.Tensor, torch.Tensor | None, torch.Tensor] | None = None

    # -- weights seen per head
    def _w_uk_uv(self) -> tuple[torch.Tensor, torch.Tensor]:
        w = self.kv_b_proj.weight.view(self.n_h, self.d_nope + self.d_v, self.d_c)
        return w[:, : self.d_nope], w[:, self.d_nope:]              # [n_h, d_nope, d_c], [n_h, d_v, d_c]

    def _q_weight(self) -> tuple[torch.Tensor, torch.Tensor | None]:
        lin = self.q_b_proj if self.d_cq else self.q_proj
        return lin.weight, lin.bias

    @torch.no_grad()
    def merge_weights(self) -> None:
        """Precompute W_UQ.W_UK (with the RoPE rows) and W_UV.W_O (seed 002, section 5.2.3)."""
        w_uk, w_uv = self._w_uk_uv()
        wq, bq = self._q_weight()
        n_in = wq.shape[1]
        wq = wq.view(self.n_h, self.d_nope + self.d_rope, n_in)
        q_nope_merged = torch.einsum("hnc,hni->hci", w_uk, wq[:, : self.d_nope])   # [n_h, d_c, n_in]
        w_q = torch.cat([q_nope_merged, wq[:, self.d_nope:]], 1).reshape(self.n_h * (self.d_c + self.d_rope), n_in)
        b_q = None
        if bq is not None:
            bq = bq.view(self.n_h, self.d_nope + self.d_rope)
            b_q = torch.cat([torch.einsum("hnc,hn->hc", w_uk, bq[:, : self.d_nope]), bq[:, self.d_nope:]], 1)
            b_q = b_q.reshape(-1)
        w_o = self.o_proj.weight.view(self.d, self.n_h, self.d_v)
        w_o_merged = torch.einsum("dhv,hvc->dhc", w_o, w_uv).reshape(self.d, self.n_h * self.d_c)
        self._merged = (w_q, b_q, w_o_merged)

    def empty_cache(self, batch: int, dtype=None, device=None) -> MLACache:
        dtype = dtype or self.cache_dtype or self.kv_b_proj.weight.dtype
        if self.impl == "naive":
            return MLACache(k=torch.empty(batch, 0, self.n_h, self.d_nope + self.d_rope, dtype=dtype, device=device),
                            v=torch.empty(batch, 0, self.n_h, self.d_v, dtype=dtype, device=device))
        return MLACache(latent=torch.empty(batch, 0, self.d_c + self.d_rope, dtype=dtype, device=device))

    def forward(self, x: torch.Tensor, cache: MLACache | None = None, *, start: int = 0,
                mode: str = "dense") -> tuple[torch.Tensor, MLACache]:
        B, q, _ = x.shape
        impl = self.impl
        cache = cache if cache is not None else self.empty_cache(B, device=x.device)
        positions = torch.arange(start, start + q, device=x.device)
        n_h, d_c, d_nope, d_rope, d_v = self.n_h, self.d_c, self.d_nope, self.d_rope, self.d_v

        # -- query path
        q_in = self.q_a_layernorm(self.q_a_proj(x)) if self.d_cq else x
        if impl == "absorbed_merged":
            if self._merged is None:
                self.merge_weights()
            w_q, b_q, w_o = self._merged
            qf = F.linear(q_in, w_q, b_q).view(B, q, n_h, d_c + d_rope)
            q_lat, q_rope = qf[..., :d_c], qf[..., d_c:]
        else:
            lin = self.q_b_proj if self.d_cq else self.q_proj
            qf = lin(q_in).view(B, q, n_h, d_nope + d_rope)
            q_nope, q_rope = qf[..., :d_nope], qf[..., d_nope:]
        q_rope = rope(q_rope, positions)

        # -- shared latent and RoPE key of the new tokens
        kv = self.kv_a_proj_with_mqa(x)
        c_kv = self.kv_a_layernorm(kv[..., :d_c])
        k_rope = rope(kv[..., d_c:], positions)                                    # [B, q, d_rope]
        scale = 1.0 / math.sqrt(d_nope + d_rope)

        if impl == "naive":
            kvb = self.kv_b_proj(c_kv).view(B, q, n_h, d_nope + d_v)
            k_new = torch.cat([kvb[..., :d_nope], k_rope[:, :, None].expand(B, q, n_h, d_rope)], -1)
            k_all = torch.cat([cache.k, k_new.to(cache.k.dtype)], 1)
            v_all = torch.cat([cache.v, kvb[..., d_nope:].to(cache.v.dtype)], 1)
            new_cache = MLACache(k=k_all, v=v_all)
            out = self._expanded_core(torch.cat([q_nope, q_rope], -1), k_all.to(x.dtype), v_all.to(x.dtype),
                                      scale, mode)
            return self.o_proj(out), new_cache

        latent_new = torch.cat([c_kv, k_rope], -1)
        latent = torch.cat([cache.latent, latent_new.to(cache.latent.dtype)], 1)     # [B, S, d_c + d_rope]
        new_cache = MLACache(latent=latent)
        lat = latent.to(x.dtype)
        S = lat.shape[1]
        if impl == "compressed":
            kvb = self.kv_b_proj(lat[..., :d_c]).view(B, S, n_h, d_nope + d_v)          # re-expand all S
            k_all = torch.cat([kvb[..., :d_nope], lat[:, :, None, d_c:].expand(B, S, n_h, d_rope)], -1)
            out = self._expanded_core(torch.cat([q_nope, q_rope], -1), k_all, kvb[..., d_nope:], scale, mode)
            return self.o_proj(out), new_cache

        if impl == "absorbed":
            w_uk, w_uv = self._w_uk_uv()
            q_lat = torch.einsum("bqhn,hnc->bqhc", q_nope, w_uk)
        qf = torch.cat([q_lat, q_rope], -1).reshape(B, q * n_h, d_c + d_rope)     # rows: (query, head)
        ctx = self._latent_core(qf, lat, scale, q, mode)                              # [B, q*n_h, d_c]
        if impl == "absorbed":
            o = torch.einsum("bqhc,hvc->bqhv", ctx.view(B, q, n_h, d_c), w_uv).reshape(B, q, n_h * d_v)
            return self.o_proj(o), new_cache
        return F.linear(ctx.reshape(B, q, n_h * d_c), w_o, self.o_proj.bias), new_cache

    # -- attention cores
    def _expanded_core(self, qf, k_all, v_all, scale, mode):
        """Per-head attention with expanded K [B,S,n_h,dk] and V [B,S,n_h,d_v]."""
        B, q, n_h, _ = qf.shape
        S = k_all.shape[1]
        qh, kt, vh = qf.transpose(1, 2), k_all.permute(0, 2, 3, 1), v_all.transpose(1, 2)
        if mode == "dense":
            s = torch.matmul(qh, kt) * scale                                        # [B, n_h, q, S]
            p = torch.softmax(s.masked_fill(~_mask(q, S, None, qf.device), float("-inf")), -1)
            out = torch.matmul(p, vh)                                               # [B, n_h, q, d_v]
        else:
            rows = []
            for i, (lo, hi) in enumerate(_key_ranges(q, S, None, "causal")):
                p = torch.softmax(torch.matmul(qh[:, :, i: i + 1], kt[..., lo:hi]) * scale, -1)
                rows.append(torch.matmul(p, vh[:, :, lo:hi]))
            out = torch.cat(rows, 2)
        return out.transpose(1, 2).reshape(B, q, -1)

    def _latent_core(self, qf, lat, scale, q, mode):
        """MQA over the latent: keys [c_kv; k_rope] (d_c + d_rope wide), values c_kv."""
        B, rows_n, _ = qf.shape
        S = lat.shape[1]
        n_h = rows_n // q
        if mode == "dense":
            s = torch.matmul(qf, lat.transpose(1, 2)) * scale                       # [B, q*n_h, S]
            allowed = _mask(q, S, None, qf.device).repeat_interleave(n_h, 0)
            p = torch.softmax(s.masked_fill(~allowed, float("-inf")), -1)
            return torch.matmul(p, lat[..., : self.d_c])                             # [B, q*n_h, d_c]
        rows = []
        for i, (lo, hi) in enumerate(_key_ranges(q, S, None, "causal")):
            qi = qf[:, i * n_h: (i + 1) * n_h]
            p = torch.softmax(torch.matmul(qi, lat[:, lo:hi].transpose(1, 2)) * scale, -1)
            rows.append(torch.matmul(p, lat[:, lo:hi, : self.d_c]))
        return torch.cat(rows, 1)


def layer_for_model(model, impl: str | None = None, *, dtype: torch.dtype = torch.float32,
                    cache_dtype: torch.dtype | None = None, device=None) -> nn.Module:
    """A reference layer with a model's attention dimensions (``model``: a ModelConfig or name)."""
    from ..config import ModelConfig, load_model

    m = model if isinstance(model, ModelConfig) else load_model(model)
    if m.is_mla:
        layer = MLAReference(m.hidden_size, m.num_attention_heads, m.kv_lora_rank, m.q_lora_rank,
                             m.qk_nope_head_dim, m.qk_rope_head_dim, m.v_head_dim, impl=impl or "absorbed",
                             bias=m.attention_bias, cache_dtype=cache_dtype)
    else:
        layer = MHAReference(m.hidden_size, m.num_attention_heads, m.num_key_value_heads, m.head_dim,
                             qkv_bias=m.attention_bias or m.qkv_bias or m.bias, o_bias=m.attention_bias or m.bias,
                             use_rope=m.family != "gpt2", window=m.sliding_window, cache_dtype=cache_dtype)
    return layer.to(device=device, dtype=dtype)
