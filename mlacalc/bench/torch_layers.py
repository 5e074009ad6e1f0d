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

from mlacalc.models.loading import ModelConfig, load_model

__all__ = ["MHACache", "MHAReference", "MLACache", "MLAReference", "RMSNorm", "layer_for_model"]


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
    angles = positions.to(torch.float32)[:, None] * inv[None, :]  # [T, dim/2]
    cos = torch.cat([angles.cos(), angles.cos()], -1)
    sin = torch.cat([angles.sin(), angles.sin()], -1)
    shape = [1] * x.dim()
    t_axis = x.dim() - 2 if x.dim() == 3 else x.dim() - 3  # [B, T, dim] or [B, T, H, dim]
    shape[t_axis] = x.shape[t_axis]
    shape[-1] = dim
    cos, sin = cos.view(shape).to(x.dtype), sin.view(shape).to(x.dtype)
    half = dim // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], -1)
    return x * cos + rotated * sin


def _key_ranges(q: int, S: int, window: int | None, mode: str) -> list[tuple[int, int]]:
    """For each new query (the last at key S), the [lo, hi) key range its row computes."""
    out = []
    for j in range(S - q + 1, S + 1):  # 1-based position of the query
        if mode == "causal":
            lo = 0 if window is None else max(0, j - window)
            out.append((lo, j))
        else:
            width = S if window is None else min(S, window)
            lo = max(0, min(j - width, S - width))
            out.append((lo, lo + width))
    return out


def _append(
    buf: torch.Tensor, new: torch.Tensor, used: int, dim: int = 1
) -> tuple[torch.Tensor, torch.Tensor]:
    """Put ``new`` after the first ``used`` positions of ``buf`` along ``dim`` (the token axis).

    Written in place when the buffer has room (a preallocated cache, as serving engines
    and the microbenchmark use); otherwise a grown copy. Returns (buffer, valid part).
    """
    q = new.shape[dim]
    if buf.shape[dim] >= used + q:
        buf.narrow(dim, used, q).copy_(new)
        return buf, buf.narrow(dim, 0, used + q)
    grown = torch.cat([buf.narrow(dim, 0, used), new.to(buf.dtype)], dim)
    return grown, grown


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
    """K and V buffers [B, n_kv, capacity, d_h] (head-major, as serving engines keep them);
    the first ``used`` positions hold tokens (``None``: all of them). A buffer with spare
    positions is written in place."""

    k: torch.Tensor
    v: torch.Tensor
    used: int | None = None

    @property
    def nbytes(self) -> int:
        return self.k.nbytes + self.v.nbytes

    @property
    def length(self) -> int:
        return self.k.shape[2] if self.used is None else self.used


class MHAReference(nn.Module):
    """Multi-head attention with ``n_kv`` KV heads (MHA: n_kv = n_h, MQA: n_kv = 1); value
    heads of ``d_v`` (None: ``d_h``; MiMo-V2-Flash's are narrower than its query/key heads).

    ``offset`` is the number of tokens before the cache's first row (non-zero once
    a sliding window has dropped old tokens); positions are absolute.
    """

    def __init__(
        self,
        d: int,
        n_h: int,
        n_kv: int,
        d_h: int,
        *,
        qkv_bias: bool = False,
        o_bias: bool = False,
        use_rope: bool = True,
        window: int | None = None,
        cache_dtype: torch.dtype | None = None,
        d_v: int | None = None,
    ):
        super().__init__()
        if n_h % n_kv:
            raise ValueError("n_h must be a multiple of n_kv")
        self.d, self.n_h, self.n_kv, self.d_h = d, n_h, n_kv, d_h
        self.d_v = d_v or d_h
        self.use_rope, self.window, self.cache_dtype = use_rope, window, cache_dtype
        self.q_proj = nn.Linear(d, n_h * d_h, bias=qkv_bias)
        self.k_proj = nn.Linear(d, n_kv * d_h, bias=qkv_bias)
        self.v_proj = nn.Linear(d, n_kv * self.d_v, bias=qkv_bias)
        self.o_proj = nn.Linear(n_h * self.d_v, d, bias=o_bias)

    def empty_cache(self, batch: int, dtype=None, device=None, capacity: int = 0) -> MHACache:
        """A cache with room for ``capacity`` tokens and none used."""
        dtype = dtype or self.cache_dtype or self.q_proj.weight.dtype
        shape = (batch, self.n_kv, capacity, self.d_h)
        return MHACache(
            torch.empty(shape, dtype=dtype, device=device),
            torch.empty((*shape[:3], self.d_v), dtype=dtype, device=device),
            used=0,
        )

    def forward(
        self, x: torch.Tensor, cache: MHACache | None = None, *, start: int = 0, mode: str = "dense"
    ) -> tuple[torch.Tensor, MHACache]:
        B, q, _ = x.shape
        cache = cache if cache is not None else self.empty_cache(B, device=x.device)
        positions = torch.arange(start, start + q, device=x.device)
        xq = self.q_proj(x).view(B, q, self.n_h, self.d_h)
        # K and V are projected by one fused matmul when the weights are concatenated;
        # two Linear calls count the same FLOPs and keep the HF parameter names.
        xk = self.k_proj(x).view(B, q, self.n_kv, self.d_h)
        xv = self.v_proj(x).view(B, q, self.n_kv, self.d_v)
        if self.use_rope:
            xq, xk = rope(xq, positions), rope(xk, positions)
        used = cache.length
        k_buf, k_all = _append(cache.k, xk.transpose(1, 2), used, dim=2)  # [B, n_kv, S, d_h]
        v_buf, v_all = _append(cache.v, xv.transpose(1, 2), used, dim=2)
        S = k_all.shape[2]
        g = self.n_h // self.n_kv
        # group the query heads of each KV head so every K/V head is read once
        qg = (
            xq.view(B, q, self.n_kv, g, self.d_h)
            .permute(0, 2, 3, 1, 4)
            .reshape(B, self.n_kv, g * q, self.d_h)
        )
        kt = k_all.to(x.dtype).transpose(-1, -2)  # [B, n_kv, d_h, S] (a view)
        vv = v_all.to(x.dtype)  # [B, n_kv, S, d_v]
        scale = 1.0 / math.sqrt(self.d_h)
        window = self.window
        if mode == "dense":
            lo = 0
            if window is not None and window < S:
                if q > 1:
                    raise ValueError(
                        "a prompt longer than the window needs mode='band' or mode='causal'"
                    )
                lo = S - window  # decode: the last W keys
            scores = torch.matmul(qg, kt[..., lo:]) * scale  # [B, n_kv, g*q, S - lo]
            if q > 1:  # one query sees every key: no mask
                allowed = _mask(q, S - lo, window, x.device).repeat(g, 1)
                scores = scores.masked_fill(~allowed, float("-inf"))
            probs = torch.softmax(scores, -1)
            out = torch.matmul(probs, vv[:, :, lo:])  # [B, n_kv, g*q, d_v]
        else:
            rows = []
            for i, (lo, hi) in enumerate(
                _key_ranges(q, S, window, "causal" if mode == "causal" else "band")
            ):
                qi = qg.view(B, self.n_kv, g, q, self.d_h)[:, :, :, i]  # [B, n_kv, g, d_h]
                s = torch.matmul(qi, kt[..., lo:hi]) * scale  # [B, n_kv, g, hi-lo]
                keys = torch.arange(lo, hi, device=x.device)
                pos = S - q + i
                ok = keys <= pos
                if window is not None:
                    ok &= keys > pos - window
                p = torch.softmax(s.masked_fill(~ok, float("-inf")), -1)
                rows.append(torch.matmul(p, vv[:, :, lo:hi]))  # [B, n_kv, g, d_v]
            out = torch.stack(rows, 3).reshape(B, self.n_kv, g * q, self.d_v)
        out = (
            out.view(B, self.n_kv, g, q, self.d_v)
            .permute(0, 3, 1, 2, 4)
            .reshape(B, q, self.n_h * self.d_v)
        )
        keep = S if window is None else min(S, window)
        if keep < S:
            return self.o_proj(out), MHACache(k_all[:, :, S - keep :], v_all[:, :, S - keep :])
        return self.o_proj(out), MHACache(k_buf, v_buf, used=S)


# --------------------------------------------------------------------------------------
# MLA


@dataclass
class MLACache:
    """MLA cache: ``latent`` [B, S, d_c + d_rope] (compressed impls) or expanded, head-major
    ``k`` [B, n_h, S, d_nope + d_rope] and ``v`` [B, n_h, S, d_v] (naive)."""

    latent: torch.Tensor | None = None
    k: torch.Tensor | None = None
    v: torch.Tensor | None = None
    used: int | None = None

    @property
    def nbytes(self) -> int:
        return sum(t.nbytes for t in (self.latent, self.k, self.v) if t is not None)

    @property
    def length(self) -> int:
        if self.used is not None:
            return self.used
        return self.latent.shape[1] if self.latent is not None else self.k.shape[2]


class MLAReference(nn.Module):
    """Multi-head latent attention with decoupled RoPE and optional query compression.

    ``impl`` is ``"naive"``, ``"compressed"``, ``"absorbed"`` or ``"absorbed_merged"``;
    it may be changed after construction (the weights are shared), but call
    :meth:`merge_weights` before using ``"absorbed_merged"`` after the weights change.
    """

    def __init__(
        self,
        d: int,
        n_h: int,
        d_c: int,
        d_cq: int | None,
        d_nope: int,
        d_rope: int,
        d_v: int,
        *,
        impl: str = "absorbed",
        bias: bool = False,
        cache_dtype: torch.dtype | None = None,
    ):
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
        return w[:, : self.d_nope], w[:, self.d_nope :]  # [n_h, d_nope, d_c], [n_h, d_v, d_c]

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
        q_nope_merged = torch.einsum("hnc,hni->hci", w_uk, wq[:, : self.d_nope])  # [n_h, d_c, n_in]
        w_q = torch.cat([q_nope_merged, wq[:, self.d_nope :]], 1).reshape(
            self.n_h * (self.d_c + self.d_rope), n_in
        )
        b_q = None
        if bq is not None:
            bq = bq.view(self.n_h, self.d_nope + self.d_rope)
            b_q = torch.cat(
                [torch.einsum("hnc,hn->hc", w_uk, bq[:, : self.d_nope]), bq[:, self.d_nope :]], 1
            )
            b_q = b_q.reshape(-1)
        w_o = self.o_proj.weight.view(self.d, self.n_h, self.d_v)
        w_o_merged = torch.einsum("dhv,hvc->dhc", w_o, w_uv).reshape(self.d, self.n_h * self.d_c)
        self._merged = (w_q, b_q, w_o_merged)

    def empty_cache(self, batch: int, dtype=None, device=None, capacity: int = 0) -> MLACache:
        """A cache with room for ``capacity`` tokens and none used."""
        dtype = dtype or self.cache_dtype or self.kv_b_proj.weight.dtype
        if self.impl == "naive":
            return MLACache(
                k=torch.empty(
                    batch, self.n_h, capacity, self.d_nope + self.d_rope, dtype=dtype, device=device
                ),
                v=torch.empty(batch, self.n_h, capacity, self.d_v, dtype=dtype, device=device),
                used=0,
            )
        return MLACache(
            latent=torch.empty(batch, capacity, self.d_c + self.d_rope, dtype=dtype, device=device),
            used=0,
        )

    def forward(
        self, x: torch.Tensor, cache: MLACache | None = None, *, start: int = 0, mode: str = "dense"
    ) -> tuple[torch.Tensor, MLACache]:
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
        k_rope = rope(kv[..., d_c:], positions)  # [B, q, d_rope]
        scale = 1.0 / math.sqrt(d_nope + d_rope)

        if impl == "naive":
            kvb = self.kv_b_proj(c_kv).view(B, q, n_h, d_nope + d_v)
            k_new = torch.cat([kvb[..., :d_nope], k_rope[:, :, None].expand(B, q, n_h, d_rope)], -1)
            used = cache.length
            k_buf, k_all = _append(cache.k, k_new.transpose(1, 2), used, dim=2)  # [B, n_h, S, dk]
            v_buf, v_all = _append(cache.v, kvb[..., d_nope:].transpose(1, 2), used, dim=2)
            new_cache = MLACache(k=k_buf, v=v_buf, used=k_all.shape[2])
            out = self._expanded_core(
                torch.cat([q_nope, q_rope], -1), k_all.to(x.dtype), v_all.to(x.dtype), scale, mode
            )
            return self.o_proj(out), new_cache

        latent_new = torch.cat([c_kv, k_rope], -1)
        buf, latent = _append(cache.latent, latent_new, cache.length)  # [B, S, d_c + d_rope]
        new_cache = MLACache(latent=buf, used=latent.shape[1])
        lat = latent.to(x.dtype)
        S = lat.shape[1]
        if impl == "compressed":
            kvb = (
                self.kv_b_proj(lat[..., :d_c]).view(B, S, n_h, d_nope + d_v).transpose(1, 2)
            )  # re-expand all S
            k_all = torch.cat(
                [kvb[..., :d_nope], lat[:, None, :, d_c:].expand(B, n_h, S, d_rope)], -1
            )
            out = self._expanded_core(
                torch.cat([q_nope, q_rope], -1), k_all, kvb[..., d_nope:], scale, mode
            )
            return self.o_proj(out), new_cache

        if impl == "absorbed":
            w_uk, w_uv = self._w_uk_uv()
            q_lat = torch.einsum("bqhn,hnc->bqhc", q_nope, w_uk)
        qf = torch.cat([q_lat, q_rope], -1).reshape(B, q * n_h, d_c + d_rope)  # rows: (query, head)
        ctx = self._latent_core(qf, lat, scale, q, mode)  # [B, q*n_h, d_c]
        if impl == "absorbed":
            o = torch.einsum("bqhc,hvc->bqhv", ctx.view(B, q, n_h, d_c), w_uv).reshape(
                B, q, n_h * d_v
            )
            return self.o_proj(o), new_cache
        return F.linear(ctx.reshape(B, q, n_h * d_c), w_o, self.o_proj.bias), new_cache

    # -- attention cores
    def _expanded_core(self, qf, k_all, v_all, scale, mode):
        """Per-head attention with expanded, head-major K [B,n_h,S,dk] and V [B,n_h,S,d_v]."""
        B, q, _, _ = qf.shape
        S = k_all.shape[2]
        qh, kt, vh = qf.transpose(1, 2), k_all.transpose(-1, -2), v_all
        if mode == "dense":
            s = torch.matmul(qh, kt) * scale  # [B, n_h, q, S]
            if q > 1:
                s = s.masked_fill(~_mask(q, S, None, qf.device), float("-inf"))
            p = torch.softmax(s, -1)
            out = torch.matmul(p, vh)  # [B, n_h, q, d_v]
        else:
            rows = []
            for i, (lo, hi) in enumerate(_key_ranges(q, S, None, "causal")):
                p = torch.softmax(torch.matmul(qh[:, :, i : i + 1], kt[..., lo:hi]) * scale, -1)
                rows.append(torch.matmul(p, vh[:, :, lo:hi]))
            out = torch.cat(rows, 2)
        return out.transpose(1, 2).reshape(B, q, -1)

    def _latent_core(self, qf, lat, scale, q, mode):
        """MQA over the latent: keys [c_kv; k_rope] (d_c + d_rope wide), values c_kv."""
        _, rows_n, _ = qf.shape
        S = lat.shape[1]
        n_h = rows_n // q
        if mode == "dense":
            s = torch.matmul(qf, lat.transpose(1, 2)) * scale  # [B, q*n_h, S]
            if q > 1:
                allowed = _mask(q, S, None, qf.device).repeat_interleave(n_h, 0)
                s = s.masked_fill(~allowed, float("-inf"))
            p = torch.softmax(s, -1)
            return torch.matmul(p, lat[..., : self.d_c])  # [B, q*n_h, d_c]
        rows = []
        for i, (lo, hi) in enumerate(_key_ranges(q, S, None, "causal")):
            qi = qf[:, i * n_h : (i + 1) * n_h]
            p = torch.softmax(torch.matmul(qi, lat[:, lo:hi].transpose(1, 2)) * scale, -1)
            rows.append(torch.matmul(p, lat[:, lo:hi, : self.d_c]))
        return torch.cat(rows, 1)


def layer_for_model(
    model,
    impl: str | None = None,
    *,
    dtype: torch.dtype = torch.float32,
    cache_dtype: torch.dtype | None = None,
    device=None,
) -> nn.Module:
    """A reference layer with a model's attention dimensions (``model``: a ModelConfig or name)."""
    m = model if isinstance(model, ModelConfig) else load_model(model)
    if m.is_mla:
        layer = MLAReference(
            m.hidden_size,
            m.num_attention_heads,
            m.kv_lora_rank,
            m.q_lora_rank,
            m.qk_nope_head_dim,
            m.qk_rope_head_dim,
            m.v_head_dim,
            impl=impl or "absorbed",
            bias=m.attention_bias,
            cache_dtype=cache_dtype,
        )
    else:
        layer = MHAReference(
            m.hidden_size,
            m.num_attention_heads,
            m.num_key_value_heads,
            m.head_dim,
            d_v=m.v_head_dim,
            qkv_bias=m.attention_bias or m.qkv_bias or m.bias,
            o_bias=m.attention_bias or m.bias,
            use_rope=m.rope,
            window=m.sliding_window,
            cache_dtype=cache_dtype,
        )
    return layer.to(device=device, dtype=dtype)
