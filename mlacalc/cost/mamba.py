"""Mamba-2 state-space layers: FLOPs, bytes, state and serving kernels of one step.

A Mamba-2 mixer (Nemotron-H's ``NemotronHMamba2Mixer``, the reference) has ``H`` heads of
width ``P`` (inner width ``I = H P``) and ``G`` groups of B and C of state width ``N``:

- ``in_proj`` (``d -> I + (I + 2 G N) + H``) makes the gate ``z``, the convolution's channels
  (x, B and C) and one step size per head;
- a depthwise causal convolution of ``K`` taps over the ``I + 2 G N`` channels;
- the selective scan (SSD) with one ``P x N`` state per head;
- a gated RMSNorm over ``I`` and ``out_proj`` (``I -> d``).

FLOPs (``2 m n k`` per product, as everywhere in mlacalc). A step of ``q`` new tokens per
sequence runs the scan in one of the reference's two forms:

- **recurrent** (one new token after a context: decode), per token and head ``4 P N``: the
  state's rank-one update ``x dB^T`` (``2 P N``, an outer product the reference writes
  element-wise) and its read-out against C (``2 P N``, the reference's ``bmm``);
- **chunked** (otherwise: prefill, chunks), ``c = ceil(q / Q)`` chunks of ``Q``
  (``mamba_chunk_size``) computed whole, the last one padded as the reference pads it; per
  chunk and head ``2 Q^2 N`` (``C B^T``) + ``2 Q^2 P`` (the masked scores times x) +
  ``2 Q P N`` (each chunk's state, ``B^T x``) + ``2 Q P N`` (the output from the chunk's
  incoming state, ``C h``).

The states passed from chunk to chunk are a scan, ``2 P N`` per chunk and head (decay and
add), counted as element-wise work (``mamba_state_pass``), as a serving kernel runs it. The
reference instead mixes every pair of chunks in one product (``einsum('bzch,bzhpn')`` over a
``(c + 1) x (c + 1)`` decay matrix: ``2 (c + 1)^2 P N`` per head), which grows with the square
of the context and is not counted; ``tests/test_cost_mamba.py`` proves the other products
against FlopCounterMode with that term added. The convolution counts ``2 K`` per channel and
new token (stage ``core``; the outputs the reference computes and discards are not counted).
``causal`` does not change a Mamba-2 layer.

Bytes: the weights once (projections in the weight dtype; the convolution taps, biases and
per-head vectors in bf16), the layer's input and output, and the state: the convolution
window (cache dtype) and the float32 SSM state, read when the step follows a context and
written every step. An engine may keep the SSM state in bf16 (``state_dtype`` of
:meth:`mlacalc.models.patterns.CacheSpec.layer_bytes`); the Hugging Face cache and
Nemotron-H's ``mamba_ssm_cache_dtype`` keep float32, the product's default.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from mlacalc.cost.attention import AttentionCost, OpCost, op_cost, packed_bytes, state_layer_cost
from mlacalc.cost.linear import conv_shape
from mlacalc.words.dtypes import dtype_bits, gemm_class, resolve_kv_layout, state_layout
from mlacalc.words.kernels import Kernel
from mlacalc.words.vocab import NORM_FLOPS_PER_ELEMENT
from mlacalc.words.workload import Workload

if TYPE_CHECKING:
    from mlacalc.models.schema import ModelConfig

__all__ = [
    "MAMBA_KERNELS",
    "MambaShape",
    "mamba_cost",
    "mamba_kernels",
    "mamba_shape",
    "mamba_state_bytes",
]

#: Bytes of one element of the SSM state (float32, as the reference holds it).
STATE_BYTES = 4
#: Bits of the small parameters (convolution taps and bias, per-head vectors, norm weight).
SMALL_BITS = 16

#: The step kernels of a Mamba-2 layer, each with what it does (names a measured table of
#: Mamba-2 kernels maps onto: the chunked scan is the four ``mamba_ssd_*`` products and the
#: state pass, the decode update ``mamba_state_update``).
MAMBA_KERNELS = {
    "mamba_in_proj": "gemm: d -> z, x, B, C and the step sizes",
    "mamba_conv": "elementwise: the depthwise causal convolution over x, B and C",
    "mamba_ssd_cb": "gemm: C B^T per chunk and head (Q x N by N x Q)",
    "mamba_ssd_diag": "gemm: the decay-masked scores times x per chunk (Q x Q by Q x P)",
    "mamba_ssd_states": "gemm: each chunk's state B^T x (P x Q by Q x N)",
    "mamba_state_pass": "elementwise: the states passed from chunk to chunk (a scan)",
    "mamba_ssd_out": "gemm: the output from each chunk's incoming state (Q x N by N x P)",
    "mamba_state_update": "gemm: decode's rank-one update and read-out per head (1 x N by N x P)",
    "mamba_norm": "elementwise: the gated RMSNorm",
    "mamba_out_proj": "gemm: I -> d",
}


@dataclass(frozen=True)
class MambaShape:
    """The widths of one Mamba-2 layer."""

    hidden: int
    heads: int
    head_dim: int
    groups: int
    state: int
    conv_kernel: int
    chunk: int
    conv_bias: bool = True
    proj_bias: bool = False
    norm: bool = True  # the gated RMSNorm's weight (Falcon-H1 may have the gate alone)

    @property
    def inner(self) -> int:
        """``I = H P``, the width of x, z and the output."""
        return self.heads * self.head_dim

    @property
    def conv_dim(self) -> int:
        """Channels of the convolution: x, B and C."""
        return self.inner + 2 * self.groups * self.state

    @property
    def in_width(self) -> int:
        """Outputs of ``in_proj``: z, x, B, C and one step size per head."""
        return self.inner + self.conv_dim + self.heads

    @property
    def small_params(self) -> int:
        """Convolution taps (and bias), ``dt_bias``, ``A_log``, ``D`` and the norm's weight."""
        conv = self.conv_dim * (self.conv_kernel + (1 if self.conv_bias else 0))
        return conv + 3 * self.heads + (self.inner if self.norm else 0)

    @property
    def state_elements(self) -> int:
        """SSM state of one sequence: a ``P x N`` matrix per head."""
        return self.heads * self.head_dim * self.state

    def chunks(self, q: int) -> int:
        return -(-q // self.chunk)

    def core_flops(self, q: int, recurrent: bool) -> int:
        """Scan FLOPs of one sequence's ``q`` new tokens (all heads), products only.

        Examples
        --------
        Nemotron-3-Super's Mamba-2 layer (128 heads of 64, state 128, chunks of 128): decode
        per token and head, then prefill per token and head

        >>> s = MambaShape(4096, 128, 64, 8, 128, 4, 128)
        >>> s.core_flops(1, recurrent=True) // 128, s.core_flops(128, False) // 128 // 128
        (32768, 81920)
        """
        p, n = self.head_dim, self.state
        if recurrent:
            return self.heads * q * 4 * p * n
        c = self.chunk
        return self.heads * self.chunks(q) * (2 * c * c * (n + p) + 4 * c * p * n)

    def reference_mixing_flops(self, q: int) -> int:
        """FLOPs of the reference's chunk-to-chunk product (``(c + 1)^2`` chunk pairs per head):
        what FlopCounterMode sees in place of the state pass."""
        return self.heads * 2 * (self.chunks(q) + 1) ** 2 * self.head_dim * self.state


def mamba_shape(model: ModelConfig) -> MambaShape:
    """The Mamba-2 widths of a model with Mamba-2 layers."""
    return MambaShape(
        hidden=model.hidden_size,
        heads=model.mamba_num_heads,
        head_dim=model.mamba_head_dim,
        groups=model.mamba_n_groups,
        state=model.ssm_state_size,
        conv_kernel=model.mamba_d_conv,
        chunk=model.mamba_chunk_size or 128,
        conv_bias=model.mamba_conv_bias,
        proj_bias=model.mamba_bias,
        norm=model.mamba_gated_norm,
    )


def mamba_state_bytes(model: ModelConfig, kv_bytes: int, state_bytes: int = STATE_BYTES) -> int:
    """Bytes one Mamba-2 layer keeps per sequence: the convolution window of ``mamba_d_conv``
    columns over x, B and C (``kv_bytes`` each, as the Hugging Face cache holds it) and one
    ``P x N`` SSM state per head (``state_bytes`` each: float32 by default)."""
    s = mamba_shape(model)
    return s.conv_dim * s.conv_kernel * kv_bytes + s.state_elements * state_bytes


def mamba_cost(model: ModelConfig, layers: int, work: Workload) -> AttentionCost:
    """The cost of ``layers`` Mamba-2 layers for one step of a checked workload: ``q_len``
    new tokens per sequence, the last at position ``seq_len`` (see the module docs)."""
    seq_len, batch, q = work.seq_len, work.batch, work.q_len
    w_bits = dtype_bits(work.weight_dtype or model.weights_dtype)
    a_bits = dtype_bits(work.act_dtype)
    s = mamba_shape(model)
    tokens, d = batch * q, s.hidden
    prior = seq_len > q
    recurrent = prior and q == 1
    cache_bits = state_layout(work.kv_dtype).row_bytes(1) * 8
    conv_state = packed_bytes(batch * s.conv_dim * s.conv_kernel, cache_bits)
    ssm_state = batch * s.state_elements * resolve_kv_layout(work.kv_dtype).state_bytes
    ops: list[OpCost] = []

    def op(*args, **kwargs) -> None:
        ops.append(op_cost(*args, **kwargs))

    proj_bias = s.in_width if s.proj_bias else 0
    op(
        "mamba_in_proj",
        "kv_proj",
        "matmul",
        2 * tokens * d * s.in_width,
        packed_bytes(tokens * d, a_bits),
        packed_bytes(tokens * s.in_width, a_bits),
        weights=packed_bytes(d * s.in_width + proj_bias, w_bits),
        shape=(1, tokens, s.in_width, d),
    )
    conv_w = s.conv_dim * (s.conv_kernel + (1 if s.conv_bias else 0))
    op(
        "mamba_conv",
        "core",
        "matmul",
        2 * tokens * s.conv_dim * s.conv_kernel,
        packed_bytes(tokens * s.conv_dim, a_bits),
        packed_bytes(tokens * s.conv_dim, a_bits),
        weights=packed_bytes(conv_w, SMALL_BITS),
        c_read=conv_state if prior else 0,
        c_write=conv_state,
        shape=(s.conv_dim, tokens, 1, s.conv_kernel),
    )
    op(
        "mamba_ssd",
        "core",
        "matmul",
        batch * s.core_flops(q, recurrent),
        packed_bytes(tokens * (s.conv_dim + s.heads), a_bits),
        packed_bytes(tokens * s.inner, a_bits),
        weights=packed_bytes(3 * s.heads, SMALL_BITS),
        c_read=ssm_state if prior else 0,
        c_write=ssm_state,
    )
    if not recurrent:
        op(
            "mamba_state_pass",
            "core",
            "elementwise",
            batch * s.heads * s.chunks(q) * 2 * s.head_dim * s.state,
            0,
            0,
        )
    op(
        "mamba_norm",
        "norm",
        "norm",
        NORM_FLOPS_PER_ELEMENT * tokens * s.inner,
        packed_bytes(2 * tokens * s.inner, a_bits),
        packed_bytes(tokens * s.inner, a_bits),
        weights=packed_bytes(s.inner if s.norm else 0, SMALL_BITS),
    )
    op(
        "mamba_out_proj",
        "o_proj",
        "matmul",
        2 * tokens * s.inner * d,
        packed_bytes(tokens * s.inner, a_bits),
        packed_bytes(tokens * d, a_bits),
        weights=packed_bytes(s.inner * d + (d if s.proj_bias else 0), w_bits),
        shape=(1, tokens, d, s.inner),
    )
    return state_layer_cost(
        model,
        layers,
        work,
        ops,
        variant="mamba",
        impl="recurrent" if recurrent else "chunked",
        io_bytes=2 * packed_bytes(tokens * d, a_bits),
        state_bytes=conv_state + ssm_state,
    )


def mamba_kernels(
    cost: AttentionCost, model: ModelConfig, act_dtype: str, weight_dtype: str, calls: int = 1
) -> list[Kernel]:
    """The serving kernels of one Mamba-2 layer, from its :func:`mamba_cost` (names and roles
    in :data:`MAMBA_KERNELS`).

    Every product is a ``gemm`` whose shape gives its FLOPs exactly (``2 g m n k``), timed by
    the GEMM class until a measured Mamba-2 class exists. The chunked scan over ``G`` =
    sequences x heads x chunks: ``mamba_ssd_cb`` (``G`` products ``Q x N`` by ``N x Q``; x, B,
    C and the step sizes read, the scores written in float32), ``mamba_ssd_diag`` (``Q x Q``
    by ``Q x P``), ``mamba_ssd_states`` (``P x Q`` by ``Q x N``; the chunk states written in
    float32), ``mamba_state_pass`` (element-wise: each chunk state read and rewritten, the
    sequence's state read and written), ``mamba_ssd_out`` (``Q x N`` by ``N x P``; the output
    written). Decode's ``mamba_state_update``: ``2 x`` sequences x heads products ``1 x N``
    by ``N x P`` (the rank-one update and the read-out), the state streamed in and out.
    """
    s = mamba_shape(model)
    a = dtype_bits(act_dtype)
    f = 8 * STATE_BYTES
    c, p, n = s.chunk, s.head_dim, s.state
    out: list[Kernel] = []

    def gemm(name: str, dtype: str, g: int, m: int, nn: int, k: int, nbytes: int) -> None:
        shape = {"m": m, "n": nn, "k": k, "groups": g}
        out.append(
            Kernel(name, "gemm", dtype, 2 * g * m * nn * k, nbytes, calls=calls, shape=shape)
        )

    def elementwise(name: str, flops: int, nbytes: int, elements: int) -> None:
        shape = {"elements": elements}
        if name == "mamba_conv":  # the measured Mamba-2 conv1d classes
            update = cost.impl == "recurrent"
            shape.update(conv_shape(update, cost.batch, s.conv_dim, prefix="mamba2_"))
        out.append(Kernel(name, "elementwise", act_dtype, flops, nbytes, calls=calls, shape=shape))

    for o in cost.ops:
        if o.name == "mamba_ssd" and cost.impl == "recurrent":
            g = 2 * cost.batch * s.heads * cost.q_len
            gemm("mamba_state_update", "float32", g, 1, p, n, o.bytes)
        elif o.name == "mamba_ssd":
            g = cost.batch * s.heads * s.chunks(cost.q_len)
            state = o.cache_bytes_read + o.cache_bytes_written
            inputs = o.bytes_read - o.cache_bytes_read
            scores = packed_bytes(g * c * c, f)
            chunk_states = packed_bytes(g * p * n, f)
            gemm("mamba_ssd_cb", act_dtype, g, c, c, n, inputs + scores)
            gemm("mamba_ssd_diag", act_dtype, g, c, p, c, 2 * scores)
            gemm("mamba_ssd_states", act_dtype, g, p, n, c, chunk_states)
            elementwise(
                "mamba_state_pass",
                g * 2 * p * n,
                2 * chunk_states + state,
                g * p * n,
            )
            gemm("mamba_ssd_out", act_dtype, g, c, p, n, chunk_states + o.bytes_written)
        elif o.name == "mamba_state_pass":
            continue  # timed with the chunked scan above
        elif o.kind == "matmul" and o.name != "mamba_conv":
            g, m, nn, k = o.shape
            gemm(o.name, gemm_class(act_dtype, weight_dtype, True), g, m, nn, k, o.bytes)
        else:  # the depthwise convolution and the norm stream on the CUDA cores
            elementwise(o.name, o.flops, o.bytes, o.bytes_written * 8 // max(1, a))
    return out
