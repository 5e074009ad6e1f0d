"""The kernels one GPU runs in a serving step under a layout, and their time.

A step runs ``dec_B`` decoding sequences (``dec_q`` new tokens each: 1, or 1 + the draft
tokens that MTP verifies, attending ``dec_S`` keys) and ``pf_N`` prefilling sequences
(``pf_q`` new tokens each after ``pf_prefix`` cached ones, causal) on one attention group;
every argument may be a numpy array, so one call builds the kernels of many steps (a search
evaluates every batch size at once). The GPU is a rank of the fullest pipeline stage.

Per layer the GPU runs, in order: the attention projections of its heads (MLA: the
replicated latent and query down-projections, the absorbed per-head products around the
latent decode kernel, K/V expanded from the latent for prefill), the attention core, the
output projection, then the FFN: dense (its ``1/tp`` of the width), or MoE (router,
shared experts split like a dense FFN, the routed experts it holds as one grouped kernel
with the tokens the routing sends it), with the communication its layout needs (see
:mod:`mlacalc.serving.layout` and :mod:`mlacalc.serving.comm`). FLOPs are ``2 m n k`` per
product; bytes read each weight once and each activation in and out once.

Every kernel is timed by the calibrated kernel model (:func:`mlacalc.timemodel.predict_batch`),
collectives included: all-reduce, all-gather, reduce-scatter, expert-parallel dispatch and
combine (DeepEP low-latency rows for decode, normal rows with prompt tokens) and the stage
hand-over, fitted on the measured NCCL, TensorRT-LLM and DeepEP tables, whenever the group fits
in one node (over the scale-up link). The kernel model has no term for the scale-out network:
a group that spans nodes is timed by the link model of :mod:`mlacalc.serving.comm` (network
bandwidth and latency per GPU, its achieved share from the DeepSeek-V3 ISCA paper).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..config import ModelConfig
from ..dtypes import KVLayout, canonical_dtype, dtype_bits
from ..engine import kv_cache
from ..hardware import HardwareSpec
from ..kernels import Kernel, KernelBatch
from ..params import FFNShape, expert_shape, ffn_shape, shared_experts_shape
from .comm import (
    combine_bytes,
    comm_seconds,
    dispatch_bytes,
    distinct_ranks_per_token,
    remote_nodes_per_token,
)
from .layout import Layout, _stage_layers

__all__ = ["Spec", "StepModel", "StepTimes"]

ACT = 2  # bytes per activation element (bf16)
#: SMs a DeepEP normal-mode dispatch or combine runs on (DeepEP's ``Buffer.num_sms`` default)
DEEPEP_NORMAL_SMS = 20


@dataclass
class Spec:
    """One kernel of a layer (or of the head), over the evaluated steps (arrays)."""

    name: str
    kind: str
    dtype: str
    part: str  # "layer", "dense_ffn", "moe_ffn", "head", "p2p"
    flops: np.ndarray
    bytes: np.ndarray
    shape: dict[str, np.ndarray] = field(default_factory=dict)
    comm: bool = False
    n_gpus: int = 1
    network: bool = False


@dataclass(frozen=True)
class StepTimes:
    """Times of the evaluated steps (arrays), by part, and the per-kernel breakdown."""

    seconds: np.ndarray  # one token's pass through every stage (a step's latency)
    stage_seconds: np.ndarray  # the slowest stage (what limits the step rate under PP)
    compute_s: np.ndarray
    comm_s: np.ndarray
    kernels: list[dict[str, Any]]


def _arr(x: Any) -> np.ndarray:
    return np.atleast_1d(np.asarray(x, dtype=np.float64))


class StepModel:
    """The per-GPU kernels of one model under one layout, weight dtype and KV layout."""

    def __init__(
        self,
        m: ModelConfig,
        lay: Layout,
        weight_dtype: str,
        kv_layout: KVLayout,
        hw: HardwareSpec,
        profile: Any = None,
        routing_imbalance: float = 1.0,
        fp8_dispatch: bool | None = None,
    ):
        self.m, self.lay, self.hw, self.profile = m, lay, hw, profile
        self.w_dtype = canonical_dtype(weight_dtype)
        self.w_bytes = dtype_bits(self.w_dtype) / 8
        self.gemm_dtype = (
            "fp8"
            if self.w_dtype.startswith("fp8")
            else "fp4"
            if self.w_dtype in ("fp4", "int4") and "fp4" in hw.peak_flops_per_s
            else "int8"
            if self.w_dtype == "int8" and "int8" in hw.peak_flops_per_s
            else "bf16"
        )
        self.kv_row = kv_cache(m, 1, 1, kv_layout, None, False).row_bytes  # one token, one layer
        self.imbalance = float(routing_imbalance)
        self.fp8_dispatch = self.w_dtype.startswith("fp8") if fp8_dispatch is None else fp8_dispatch
        d = m.hidden_size
        self.d = d
        self.h = m.num_attention_heads // lay.tp
        self.d_h = m.head_dim or d // m.num_attention_heads
        self.kv_r = math.ceil(m.num_key_value_heads / lay.tp)
        self.window = m.sliding_window or 0
        stages = _stage_layers(m, lay.pp)
        self.stage_counts = [
            (sum(not m.is_moe_layer(i) for i in r), sum(m.is_moe_layer(i) for i in r))
            for r in stages
        ]

    # ------------------------------------------------------------------ kernel builders
    def _gemm(
        self,
        out: list[Spec],
        name: str,
        part: str,
        m: np.ndarray,
        n: int,
        k: int,
        groups: int = 1,
        dtype: str | None = None,
        weight_bytes: float | None = None,
    ) -> None:
        wb = self.w_bytes if weight_bytes is None else weight_bytes
        flops = 2.0 * m * n * k * groups
        nbytes = groups * (n * k * wb + (m * k + m * n) * ACT)
        out.append(
            Spec(
                name,
                "gemm",
                dtype or self.gemm_dtype,
                part,
                flops,
                nbytes,
                {
                    "m": m,
                    "n": np.full_like(m, n),
                    "k": np.full_like(m, k),
                    "groups": np.full_like(m, groups),
                },
            )
        )

    def _elementwise(
        self, out: list[Spec], name: str, part: str, elements: np.ndarray, passes: float = 3
    ) -> None:
        out.append(
            Spec(
                name,
                "elementwise",
                "bf16",
                part,
                elements * 0.0,
                elements * ACT * passes,
                {"elements": elements},
            )
        )

    def _comm(
        self,
        out: list[Spec],
        name: str,
        kind: str,
        part: str,
        msg: np.ndarray,
        n: int,
        network: bool = False,
        **fields: np.ndarray | float,
    ) -> None:
        """A collective over ``n`` GPUs; ``msg`` is one rank's message as
        :func:`mlacalc.serving.comm.comm_seconds` counts it (its share for all-gather and
        reduce-scatter), ``fields`` the kernel model's extra shape fields."""
        if n > 1:
            # the kernel model's message: the full per-rank buffer for all-gather and
            # reduce-scatter (as the measured NCCL tables count it), else what the rank sends
            full = msg * n if kind in ("all_gather", "reduce_scatter") else msg
            shape = {"message_bytes": full, "n_gpus": np.full_like(msg, n)}
            shape.update({k: v + msg * 0.0 for k, v in fields.items()})
            out.append(
                Spec(
                    name,
                    kind,
                    "fp8" if kind == "dispatch" and self.fp8_dispatch else "bf16",
                    part,
                    msg * 0.0,
                    msg,
                    shape,
                    comm=True,
                    n_gpus=n,
                    network=network,
                )
            )

    def _attention(self, out: list[Spec], dec_B, dec_q, dec_S, pf_N, pf_q, pf_pre) -> None:
        m, lay, d, h = self.m, self.lay, self.d, self.h
        T = dec_B * dec_q + pf_N * pf_q
        T_dec = dec_B * dec_q
        part = "layer"
        if m.is_mla:
            d_c, d_r = m.kv_lora_rank, m.qk_rope_head_dim
            d_n, d_v = m.qk_nope_head_dim, m.v_head_dim
            if m.q_lora_rank:
                self._gemm(out, "q_a_proj (replicated)", part, T, m.q_lora_rank, d)
                self._gemm(out, "q_b_proj", part, T, h * (d_n + d_r), m.q_lora_rank)
            else:
                self._gemm(out, "q_proj", part, T, h * (d_n + d_r), d)
            self._gemm(out, "kv_a_proj_with_mqa (replicated)", part, T, d_c + d_r, d)
            self._gemm(out, "absorb W_UK (decode)", part, T_dec, d_c, d_n, groups=h)
            flops = 2.0 * dec_B * dec_q * dec_S * h * (2 * d_c + d_r)
            nbytes = dec_B * dec_S * self.kv_row + T_dec * h * (d_c + d_r + d_c) * ACT
            out.append(
                Spec(
                    "MLA latent decode",
                    "mla_decode",
                    "bf16",
                    part,
                    flops,
                    nbytes,
                    self._attn_shape(dec_B, dec_q, dec_S, h, 1, d_c + d_r, d_c),
                )
            )
            self._gemm(out, "absorb W_UV (decode)", part, T_dec, d_v, d_c, groups=h)
            keys = pf_N * (pf_pre + pf_q)
            self._gemm(out, "kv_b_proj (prefill K/V from latent)", part, keys, h * (d_n + d_v), d_c)
            pairs = self._pairs(pf_q, pf_pre)
            flops = 2.0 * pf_N * pairs * h * (d_n + d_r + d_v)
            nbytes = (pf_N * pf_q * h * (d_n + d_r + d_v) + keys * h * (d_n + d_r + d_v)) * ACT
            out.append(
                Spec(
                    "MLA prefill attention",
                    "mla_prefill",
                    "bf16",
                    part,
                    flops,
                    nbytes,
                    self._attn_shape(pf_N, pf_q, pf_pre + pf_q, h, h, d_n + d_r, d_v, causal=1),
                )
            )
            self._gemm(out, "o_proj", part, T, d, h * d_v)
        else:
            d_h, kv_r = self.d_h, self.kv_r
            self._gemm(out, "qkv_proj", part, T, (h + 2 * kv_r) * d_h, d)
            S_eff = np.minimum(dec_S, self.window) if self.window else dec_S
            flops = 2.0 * dec_B * dec_q * S_eff * h * 2 * d_h
            row_rank = self.kv_row * kv_r / m.num_key_value_heads
            nbytes = dec_B * S_eff * row_rank + T_dec * h * 2 * d_h * ACT
            out.append(
                Spec(
                    "decode attention",
                    "attention_decode",
                    "bf16",
                    part,
                    flops,
                    nbytes,
                    self._attn_shape(dec_B, dec_q, dec_S, h, kv_r, d_h, d_h),
                )
            )
            pairs = self._pairs(pf_q, pf_pre)
            flops = 2.0 * pf_N * pairs * h * 2 * d_h
            keys = pf_N * (pf_pre + pf_q)
            nbytes = pf_N * pf_q * h * 2 * d_h * ACT + keys * row_rank
            out.append(
                Spec(
                    "prefill attention",
                    "attention_prefill",
                    "bf16",
                    part,
                    flops,
                    nbytes,
                    self._attn_shape(pf_N, pf_q, pf_pre + pf_q, h, kv_r, d_h, d_h, causal=1),
                )
            )
            self._gemm(out, "o_proj", part, T, d, h * d_h)
        self._elementwise(out, "norms, residuals, RoPE", part, 2 * T * d, passes=4)
        self._comm(out, "all_reduce after attention (TP)", "all_reduce", part, T * d * ACT, lay.tp)

    def _attn_shape(self, B, q, S, heads, n_kv, dqk, dv, causal: int = 0) -> dict[str, np.ndarray]:
        one = np.ones_like(B)
        return {
            "batch": B,
            "q_len": q * one,
            "kv_len": S * one,
            "n_heads": heads * one,
            "n_kv": n_kv * one,
            "head_dim_qk": dqk * one,
            "head_dim_v": dv * one,
            "window": self.window * one,
            "causal": causal * one,
        }

    def _pairs(self, q: np.ndarray, prefix: np.ndarray) -> np.ndarray:
        """(query, key) pairs a causal chunk of ``q`` tokens after ``prefix`` attends."""
        if not self.window:
            return q * prefix + q * (q + 1) / 2
        w = self.window
        c = np.clip(w - prefix, 0, q)  # queries whose keys all fit the window
        return c * prefix + c * (c + 1) / 2 + (q - c) * w

    def _dense_ffn(
        self, out: list[Spec], T: np.ndarray, shape: FFNShape, part: str, name: str = ""
    ) -> None:
        """A dense FFN block (or the shared experts), its width split over the TP ranks."""
        inter = shape.inter // self.lay.tp
        self._gemm(
            out,
            f"{name}gate_up_proj" if shape.gated else f"{name}up_proj",
            part,
            T,
            (shape.matrices - 1) * inter,
            self.d,
        )
        self._elementwise(out, f"{name}activation", part, T * inter)
        self._gemm(out, f"{name}down_proj", part, T, self.d, inter)

    def _moe(self, out: list[Spec], T: np.ndarray, decode: np.ndarray) -> None:
        m, lay, d = self.m, self.lay, self.d
        part = "moe_ffn"
        E, k = m.n_routed_experts, m.num_experts_per_tok
        slots = E + lay.redundant_experts  # experts placed, replicas included
        self._gemm(out, "router", part, T, E, d, dtype="bf16", weight_bytes=2)
        if m.n_shared_experts:
            self._dense_ffn(out, T, shared_experts_shape(m), part, "shared expert ")
        groups = lay.moe_group // lay.tp  # attention groups feeding the MoE group
        T_grp = T * groups  # distinct tokens entering the MoE group
        local = slots // lay.ep
        expert = expert_shape(m)
        inter = expert.inter // lay.moe_tp
        assign = T_grp * k / lay.ep * self.imbalance  # routed copies this GPU computes
        active = np.minimum(local * (1 - (1 - k / slots) ** T_grp), np.maximum(assign, 1.0))
        mats = expert.matrices
        flops = 2.0 * assign * d * inter * mats
        nbytes = active * d * inter * mats * self.w_bytes + assign * (2 * d + inter) * ACT
        out.append(
            Spec(
                f"routed experts ({local} local)",
                "moe",
                self.gemm_dtype,
                part,
                flops,
                nbytes,
                {
                    "tokens": T_grp,
                    "hidden": np.full_like(T, d),
                    "inter": np.full_like(T, inter),
                    "experts": np.full_like(T, local),
                    "topk": np.full_like(T, k),
                    "active_experts": active,
                    "max_tokens_per_expert": np.ceil(assign / np.maximum(active, 1.0)),
                    "gated": np.full_like(T, 1 if expert.gated else 0),
                },
            )
        )
        if lay.moe_group == lay.tp:
            self._comm(out, "all_reduce after MoE (TP)", "all_reduce", part, T * d * ACT, lay.tp)
        else:
            sent = T / lay.tp  # tp ranks split their group's tokens
            if lay.ep > 1:
                node = self.hw.gpus_per_node or lay.moe_group
                if lay.moe_group <= node:
                    # one node: the kernel model's DeepEP exchange (fitted on the measured
                    # one-node tables): low-latency rows (decode) send every routed copy,
                    # normal rows (prompt tokens) a token once per destination rank
                    ranks = distinct_ranks_per_token(slots, k, lay.moe_group)
                    copies = np.where(decode, float(k), ranks)
                    low = decode * 1.0
                    sms = np.where(decode, 0.0, float(DEEPEP_NORMAL_SMS))
                    for kind, nbytes in (
                        ("dispatch", dispatch_bytes(sent, copies, d, self.fp8_dispatch)),
                        ("combine", combine_bytes(sent, copies, d)),
                    ):
                        self._comm(
                            out,
                            f"EP {kind}",
                            kind,
                            part,
                            nbytes,
                            lay.moe_group,
                            tokens=sent,
                            hidden=float(d),
                            topk=float(k),
                            copies=sent * copies,
                            low_latency=low,
                            sms=sms,
                        )
                else:
                    # across nodes (link model): decode rows (no prompt tokens): DeepEP
                    # low-latency kernels, every routed copy over RDMA; rows with prompt
                    # tokens: normal kernels, one copy per remote node over RDMA (forwarded
                    # over NVLink, concurrently, not counted apart)
                    low = decode
                    normal_copies = remote_nodes_per_token(lay.moe_group, node, k)
                    for mode, rows, n_copies in (
                        ("low-latency", low, float(k)),
                        ("normal", ~low, normal_copies),
                    ):
                        if not rows.any():
                            continue
                        self._comm(
                            out,
                            f"EP dispatch ({mode})",
                            "dispatch",
                            part,
                            np.where(
                                rows, dispatch_bytes(sent, n_copies, d, self.fp8_dispatch), 0.0
                            ),
                            lay.moe_group,
                            network=True,
                        )
                        self._comm(
                            out,
                            f"EP combine ({mode})",
                            "combine",
                            part,
                            np.where(rows, combine_bytes(sent, n_copies, d), 0.0),
                            lay.moe_group,
                            network=True,
                        )
            else:
                self._comm(
                    out,
                    "all_gather before MoE (DP-attention)",
                    "all_gather",
                    part,
                    sent * d * ACT,
                    lay.moe_group,
                )
                self._comm(
                    out,
                    "reduce_scatter after MoE (DP-attention)",
                    "reduce_scatter",
                    part,
                    sent * d * ACT,
                    lay.moe_group,
                )
            if lay.tp > 1 and m.n_shared_experts:
                self._comm(
                    out,
                    "all_reduce of shared experts (TP)",
                    "all_reduce",
                    part,
                    T * d * ACT,
                    lay.tp,
                )

    def specs(self, dec_B=0, dec_q=1, dec_S=1, pf_N=0, pf_q=1, pf_pre=0) -> list[Spec]:
        """Every kernel of one layer of each kind, the head, and the stage hand-over."""
        dec_B, pf_N = _arr(dec_B), _arr(pf_N)
        n = max(len(dec_B), len(pf_N))
        z = np.zeros(n)
        dec_B, pf_N = dec_B + z, pf_N + z
        dec_q, dec_S, pf_q, pf_pre = (_arr(x) + z for x in (dec_q, dec_S, pf_q, pf_pre))
        T = dec_B * dec_q + pf_N * pf_q
        decode = pf_N == 0  # rows without prompt tokens
        out: list[Spec] = []
        self._attention(out, dec_B, dec_q, dec_S, pf_N, pf_q, pf_pre)
        if self.m.num_hidden_layers - self.m.num_moe_layers:
            self._dense_ffn(out, T, ffn_shape(self.m), "dense_ffn")
            self._comm(
                out,
                "all_reduce after FFN (TP)",
                "all_reduce",
                "dense_ffn",
                T * self.d * ACT,
                self.lay.tp,
            )
        if self.m.num_moe_layers:
            self._moe(out, T, decode)
        logits = dec_B * dec_q + pf_N  # prefill needs the last token's logits
        self._elementwise(out, "embedding lookup, final norm", "head", T * self.d, passes=2)
        self._gemm(
            out,
            "lm_head",
            "head",
            logits,
            self.m.vocab_size // self.lay.tp,
            self.d,
            dtype="bf16",
            weight_bytes=self.w_bytes,
        )
        if self.lay.pp > 1:
            self._comm(out, "p2p to the next stage", "p2p", "p2p", T * self.d * ACT, 2)
        return out

    # ------------------------------------------------------------------ timing
    def time_specs(self, specs: list[Spec]) -> list[np.ndarray]:
        """Seconds of each spec (one call), as arrays."""
        return time_jobs([(self, specs)], self.profile)[0]

    def kernels(self, **kw: Any) -> list[Kernel]:
        """The kernels of one step (the first row of ``kw``) as :class:`mlacalc.kernels.Kernel`
        records, each with the calls it makes in the whole step (layers of its kind), for the
        kernel model's :func:`~mlacalc.timemodel.predict_kernels` or any other consumer."""
        counts = {
            "layer": self.m.num_hidden_layers,
            "dense_ffn": sum(c[0] for c in self.stage_counts),
            "moe_ffn": sum(c[1] for c in self.stage_counts),
            "head": 1,
            "p2p": self.lay.pp - 1,
        }
        out = []
        for sp in self.specs(**kw):
            work = sp.bytes[0] if sp.kind == "elementwise" or sp.comm else sp.flops[0]
            if counts[sp.part] and work > 0:
                out.append(
                    Kernel(
                        sp.name,
                        sp.kind,
                        sp.dtype,
                        round(float(sp.flops[0])),
                        round(float(sp.bytes[0])),
                        counts[sp.part],
                        {k: round(float(v[0])) for k, v in sp.shape.items()},
                    )
                )
        return out

    def _p2p_group(self) -> int:
        """A group size whose link carries the stage hand-over: the network when a stage fills
        whole nodes, the scale-up link otherwise."""
        node = self.hw.gpus_per_node
        return self.lay.gpus if node and self.lay.stage_gpus >= node and self.lay.gpus > node else 2

    def step(self, overlap: str = "none", **kw: Any) -> StepTimes:
        """The time of the steps ``kw`` describes (see :meth:`specs`); ``overlap="tbo"`` splits
        the step into two micro-batches whose communication hides behind the other's compute."""
        specs = self.specs(**(halved(kw) if overlap == "tbo" else kw))
        return self.compose(specs, self.time_specs(specs), overlap)

    def compose(
        self,
        specs: list[Spec],
        secs: list[np.ndarray],
        overlap: str = "none",
        rows: slice = slice(None),
        breakdown: bool = True,
    ) -> StepTimes:
        """Sum the kernels' times (``rows`` of them) into a step through every stage."""
        parts: dict[str, tuple[Any, Any]] = {}
        for sp, t in zip(specs, secs):
            t = t[rows]
            c, k = parts.get(sp.part, (0.0, 0.0))
            parts[sp.part] = (c + (0 if sp.comm else t), k + (t if sp.comm else 0))

        def part(name: str) -> tuple[Any, Any]:
            c, k = parts.get(name, (0.0, 0.0))
            if overlap == "tbo":  # two micro-batches: each one's links hide behind the other's
                return 2 * c, 2 * np.maximum(np.subtract(k, c), 0.0)  # compute; exposed comm
            return c, k

        lc, lk = part("layer")
        dc, dk = part("dense_ffn")
        mc, mk = part("moe_ffn")
        hc, hk = part("head")
        pc, pk = part("p2p")
        stage_times, compute, comm = [], 0.0, 0.0
        last = len(self.stage_counts) - 1
        for si, (nd, nm) in enumerate(self.stage_counts):
            c = nd * (lc + dc) + nm * (lc + mc) + (hc if si in (0, last) else 0)
            k = nd * (lk + dk) + nm * (lk + mk) + (hk if si in (0, last) else 0)
            if si < last:
                c, k = c + pc, k + pk
            stage_times.append(c + k)
            compute, comm = compute + c, comm + k
        zero = np.zeros(len(specs[0].flops[rows])) if specs else np.zeros(1)
        compute, comm = compute + zero, comm + zero
        total = compute + comm
        stage = np.max(
            np.vstack([np.broadcast_to(x, np.shape(total)) for x in stage_times]), axis=0
        )
        counts = {
            "layer": self.m.num_hidden_layers,
            "dense_ffn": sum(c[0] for c in self.stage_counts),
            "moe_ffn": sum(c[1] for c in self.stage_counts),
            "head": 1,
            "p2p": self.lay.pp - 1,
        }
        kernels = [
            {
                "name": sp.name,
                "kind": sp.kind,
                "dtype": sp.dtype,
                "part": sp.part,
                "calls": counts[sp.part],
                "flops": sp.flops[rows],
                "bytes": sp.bytes[rows],
                "seconds_per_call": t[rows],
                "seconds": t[rows] * counts[sp.part],
                "communication": sp.comm,
            }
            for sp, t in zip(specs, secs)
            if counts[sp.part] and breakdown
        ]
        return StepTimes(
            np.asarray(total, dtype=float),
            np.asarray(stage, dtype=float),
            np.asarray(compute, dtype=float),
            np.asarray(comm, dtype=float),
            kernels,
        )


def halved(kw: dict[str, Any]) -> dict[str, Any]:
    """The arguments of one of the two micro-batches of a two-batch-overlap step."""
    out = dict(kw)
    for key in ("dec_B", "pf_N"):
        if key in out:
            out[key] = _arr(out[key]) / 2
    return out


def time_jobs(
    jobs: list[tuple[StepModel, list[Spec]]], profile: Any = None
) -> list[list[np.ndarray]]:
    """Seconds of every spec of every job (a step model and its specs), with one kernel-model
    call per kernel class and dtype across all jobs of a device."""
    out: list[list[np.ndarray]] = [[np.zeros(1)] * len(specs) for _, specs in jobs]
    groups: dict[tuple[int, str, str], list[tuple[int, int]]] = {}
    hws: dict[int, HardwareSpec] = {}
    for j, (sm, specs) in enumerate(jobs):
        for i, sp in enumerate(specs):
            if sp.comm:
                n = sm._p2p_group() if sp.kind == "p2p" else sp.n_gpus
                sm.hw.link(n)  # a missing link figure: named, with its fix
                if sp.network or not _one_node(sm.hw, n):
                    # the scale-out network: the kernel model has no term for it
                    t = comm_seconds(sp.kind, sp.bytes, n, sm.hw, network=sp.network)
                    out[j][i] = np.where(sp.bytes > 0, t, 0.0)  # a row that sends nothing
                    continue
            hws[id(sm.hw)] = sm.hw
            groups.setdefault((id(sm.hw), sp.kind, sp.dtype), []).append((j, i))
    for (hw_id, kind, dtype), idx in groups.items():
        specs = [jobs[j][1][i] for j, i in idx]
        masks = [
            (sp.bytes > 0) if kind == "elementwise" or sp.comm else (sp.flops > 0) for sp in specs
        ]
        if not any(mk.any() for mk in masks):
            for (j, i), sp in zip(idx, specs):
                out[j][i] = np.zeros_like(sp.flops)
            continue
        names = sorted({k for sp in specs for k in sp.shape})
        batch = KernelBatch(
            kind,
            dtype,
            np.concatenate([sp.flops[mk] for sp, mk in zip(specs, masks)]),
            np.concatenate([sp.bytes[mk] for sp, mk in zip(specs, masks)]),
            np.ones(int(sum(mk.sum() for mk in masks))),
            {
                key: np.concatenate(
                    [sp.shape.get(key, np.zeros_like(sp.flops))[mk] for sp, mk in zip(specs, masks)]
                )
                for key in names
            },
        )
        pred = _predict(
            batch, hws[hw_id], profile if profile is not None else jobs[idx[0][0]][0].profile
        )
        pos = 0
        for (j, i), sp, mk in zip(idx, specs, masks):
            t = np.zeros_like(sp.flops)
            n = int(mk.sum())
            t[mk] = pred[pos : pos + n]
            out[j][i] = t
            pos += n
    return out


def _one_node(hw: HardwareSpec, n_gpus: int) -> bool:
    """Whether a group of ``n_gpus`` GPUs talks over the scale-up link (within one node)."""
    return hw.gpus_per_node is None or n_gpus <= hw.gpus_per_node


def _predict(batch: KernelBatch, hw: HardwareSpec, profile: Any) -> np.ndarray:
    """Seconds per row from the calibrated kernel model, or the plain roofline (datasheet peak
    and bandwidth) when the kernel model is not available."""
    try:
        from ..timemodel import predict_batch
    except ImportError:  # pragma: no cover - the model ships with mlacalc
        peak = hw.peak(batch.dtype if batch.dtype in hw.peak_flops_per_s else "bf16")
        return (
            np.maximum(batch.flops / peak, batch.bytes / hw.memory_bandwidth_bytes_per_s)
            * batch.calls
        )
    return np.asarray(predict_batch(batch, hw, profile), dtype=np.float64)
