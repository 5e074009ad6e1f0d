"""Mamba-1 (selective scan) layers: FLOPs, bytes, state and serving kernels of one step.

A Mamba-1 mixer (Jamba's ``JambaMambaMixer``, the reference) works on an inner width ``I``
(``mamba_inner_size``: ``mamba_expand x hidden_size``) with a state of ``N``
(``ssm_state_size``) per channel and a step-size rank ``R`` (``mamba_dt_rank``):

- ``in_proj`` (``d -> 2 I``) makes x and the gate z;
- a depthwise causal convolution of ``K`` taps over x's ``I`` channels;
- ``x_proj`` (``I -> R + 2 N``) makes the low-rank step size and B and C (Jamba normalises
  each with an RMSNorm: ``dt_layernorm``, ``b_layernorm``, ``c_layernorm``); ``dt_proj``
  (``R -> I``, with a bias) lifts the step size to every channel;
- the selective scan with one ``N``-wide state per channel (``A_log`` is ``I x N``, ``D`` is
  ``I``), gated by z;
- ``out_proj`` (``I -> d``).

FLOPs (``2 m n k`` per product). Every projection counts its product; the convolution ``2 K``
per channel and new token (stage ``core``; the outputs the reference computes and discards
are not counted); the scan's read-out ``y = C h`` is a product of ``2 I N`` per token (the
reference's ``matmul``, stage ``core``). The state update ``h = exp(dt A) h + dt B x`` is
element-wise: ``4 I N`` per token (the discretised decay and input, the decay's product and the
sum), counted apart (``mamba1_state_update``), as FlopCounterMode does not see it.

Bytes: the weights once, the layer's input and output, and the state per sequence: the
convolution window (``I x K`` in the cache dtype, as the Hugging Face cache holds it) and the
``I x N`` float32 SSM state, read when the step follows a context and written every step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from mlacalc.cost.attention import AttentionCost, OpCost, op_cost, packed_bytes, state_layer_cost
from mlacalc.words.dtypes import dtype_bits, gemm_class, resolve_kv_layout, state_layout
from mlacalc.words.kernels import Kernel
from mlacalc.words.vocab import NORM_FLOPS_PER_ELEMENT
from mlacalc.words.workload import Workload

if TYPE_CHECKING:
    from mlacalc.models.schema import ModelConfig

__all__ = [
    "MAMBA1_KERNELS",
    "Mamba1Shape",
    "mamba1_cost",
    "mamba1_kernels",
    "mamba1_shape",
    "mamba1_state_bytes",
]

#: Bytes of one element of the SSM state (float32, as the reference holds it).
STATE_BYTES = 4
#: Bits of the small parameters (convolution taps and bias, A_log, D, the norms' weights).
SMALL_BITS = 16

#: The step kernels of a Mamba-1 layer, each with what it does.
MAMBA1_KERNELS = {
    "mamba1_in_proj": "gemm: d -> x and the gate z",
    "mamba1_conv": "elementwise: the depthwise causal convolution over x",
    "mamba1_x_proj": "gemm: I -> the step size's rank, B and C",
    "mamba1_dt_norms": "elementwise: the RMSNorms of the step size, B and C",
    "mamba1_dt_proj": "gemm: the step size R -> I",
    "mamba1_scan": "elementwise: the selective scan's read-out y = C h, tokens x I dots of N",
    "mamba1_state_update": "elementwise: h = exp(dt A) h + dt B x, the float32 state read "
    "and written",
    "mamba1_out_proj": "gemm: I -> d",
}


@dataclass(frozen=True)
class Mamba1Shape:
    """The widths of one Mamba-1 layer."""

    hidden: int
    inner: int
    state: int
    rank: int
    conv_kernel: int
    conv_bias: bool = True
    proj_bias: bool = False

    @property
    def x_width(self) -> int:
        """Outputs of ``x_proj``: the step size's rank, B and C."""
        return self.rank + 2 * self.state

    @property
    def state_elements(self) -> int:
        """SSM state of one sequence: ``N`` values per channel."""
        return self.inner * self.state

    def params(self) -> int:
        """Parameters of the mixer (as the reference builds it).

        >>> Mamba1Shape(64, 128, 8, 5, 4).params()
        29845
        """
        d, i, n, r, k = self.hidden, self.inner, self.state, self.rank, self.conv_kernel
        bias = (2 * i + d) if self.proj_bias else 0
        conv = i * k + (i if self.conv_bias else 0)
        return (
            d * 2 * i + conv + i * self.x_width + r * i + i + i * n + i + i * d + bias + r + 2 * n
        )


def mamba1_shape(model: ModelConfig) -> Mamba1Shape:
    """The Mamba-1 widths of a model with Mamba-1 layers."""
    return Mamba1Shape(
        hidden=model.hidden_size,
        inner=model.mamba_inner_size,
        state=model.ssm_state_size,
        rank=model.mamba_dt_rank,
        conv_kernel=model.mamba_d_conv,
        conv_bias=model.mamba_conv_bias,
        proj_bias=model.mamba_bias,
    )


def mamba1_state_bytes(model: ModelConfig, kv_bytes: int, state_bytes: int = STATE_BYTES) -> int:
    """Bytes one Mamba-1 layer keeps per sequence: the convolution window (``I x K``,
    ``kv_bytes`` each) and the ``I x N`` SSM state (``state_bytes`` each: float32)."""
    s = mamba1_shape(model)
    return s.inner * s.conv_kernel * kv_bytes + s.state_elements * state_bytes


def mamba1_cost(model: ModelConfig, layers: int, work: Workload) -> AttentionCost:
    """The cost of ``layers`` Mamba-1 layers for one step of a checked workload (see the
    module docs)."""
    seq_len, batch, q = work.seq_len, work.batch, work.q_len
    w_bits = dtype_bits(work.weight_dtype or model.weights_dtype)
    a_bits = dtype_bits(work.act_dtype)
    s = mamba1_shape(model)
    tokens, d, i = batch * q, s.hidden, s.inner
    prior = seq_len > q
    cache_bits = state_layout(work.kv_dtype).row_bytes(1) * 8
    conv_state = packed_bytes(batch * i * s.conv_kernel, cache_bits)
    ssm_state = batch * s.state_elements * resolve_kv_layout(work.kv_dtype).state_bytes
    ops: list[OpCost] = []

    def op(*args, **kwargs) -> None:
        ops.append(op_cost(*args, **kwargs))

    def proj(name, stage, n_in, n_out, bias=0, bias_bits=None):
        bias_bytes = packed_bytes(bias, bias_bits or w_bits)
        op(
            name,
            stage,
            "matmul",
            2 * tokens * n_in * n_out,
            packed_bytes(tokens * n_in, a_bits),
            packed_bytes(tokens * n_out, a_bits),
            weights=packed_bytes(n_in * n_out, w_bits) + bias_bytes,
            shape=(1, tokens, n_out, n_in),
        )

    proj("mamba1_in_proj", "kv_proj", d, 2 * i, 2 * i if s.proj_bias else 0)
    op(
        "mamba1_conv",
        "core",
        "matmul",
        2 * tokens * i * s.conv_kernel,
        packed_bytes(tokens * i, a_bits),
        packed_bytes(tokens * i, a_bits),
        weights=packed_bytes(i * (s.conv_kernel + (1 if s.conv_bias else 0)), SMALL_BITS),
        c_read=conv_state if prior else 0,
        c_write=conv_state,
        shape=(i, tokens, 1, s.conv_kernel),
    )
    proj("mamba1_x_proj", "kv_proj", i, s.x_width)
    op(
        "mamba1_dt_norms",
        "norm",
        "norm",
        NORM_FLOPS_PER_ELEMENT * tokens * s.x_width,
        packed_bytes(tokens * s.x_width, a_bits),
        packed_bytes(tokens * s.x_width, a_bits),
        weights=packed_bytes(s.x_width, SMALL_BITS),
    )
    proj("mamba1_dt_proj", "kv_proj", s.rank, i, i, SMALL_BITS)
    op(
        "mamba1_scan",
        "core",
        "matmul",
        2 * tokens * i * s.state,
        packed_bytes(tokens * (3 * i + 2 * s.state), a_bits),  # x, dt, z, B and C
        packed_bytes(tokens * i, a_bits),
        weights=packed_bytes(i * s.state + i, SMALL_BITS),  # A_log and D
        c_read=ssm_state if prior else 0,
        c_write=ssm_state,
    )
    op("mamba1_state_update", "core", "elementwise", 4 * tokens * i * s.state, 0, 0)
    proj("mamba1_out_proj", "o_proj", i, d, d if s.proj_bias else 0)
    return state_layer_cost(
        model,
        layers,
        work,
        ops,
        variant="mamba1",
        impl="recurrent" if prior and q == 1 else "scan",
        io_bytes=2 * packed_bytes(tokens * d, a_bits),
        state_bytes=conv_state + ssm_state,
    )


def mamba1_kernels(
    cost: AttentionCost, model: ModelConfig, act_dtype: str, weight_dtype: str, calls: int = 1
) -> list[Kernel]:
    """The serving kernels of one Mamba-1 layer, from its :func:`mamba1_cost` (names and roles
    in :data:`MAMBA1_KERNELS`): the projections as GEMMs of their exact shapes; the scan's
    read-out as ``tokens x I`` products ``1 x N`` by ``N x 1`` (its inputs, output, ``A_log``
    and ``D`` read); the state update as a streaming kernel (the float32 state read and
    written, the convolution window apart); the convolution and the norms on the CUDA cores."""
    s = mamba1_shape(model)
    a = dtype_bits(act_dtype)
    tokens = cost.batch * cost.q_len
    out: list[Kernel] = []

    def elementwise(name: str, flops: int, nbytes: int, elements: int) -> None:
        shape = {"elements": elements}
        out.append(Kernel(name, "elementwise", act_dtype, flops, nbytes, calls=calls, shape=shape))

    for o in cost.ops:
        if o.name == "mamba1_scan":
            # the selective scan streams its inputs once on the CUDA cores (a dot of N a
            # channel and token); as a batched GEMM of tokens x I products 1 x N by N x 1 the
            # GEMM model charged each product a tile: Jamba-1.5-Mini's 2K-token prompt 5.3 s
            nbytes = o.bytes - o.cache_bytes_read - o.cache_bytes_written
            elementwise(o.name, o.flops, nbytes, tokens * s.inner)
        elif o.name == "mamba1_state_update":
            scan = next(x for x in cost.ops if x.name == "mamba1_scan")
            state = scan.cache_bytes_read + scan.cache_bytes_written
            elementwise(o.name, o.flops, state, cost.batch * s.state_elements)
        elif o.kind == "matmul" and o.name != "mamba1_conv":
            g, m, n, k = o.shape
            shape = {"m": m, "n": n, "k": k, "groups": g}
            dtype = gemm_class(act_dtype, weight_dtype, True)
            out.append(Kernel(o.name, "gemm", dtype, o.flops, o.bytes, calls=calls, shape=shape))
        else:  # the depthwise convolution and the norms stream on the CUDA cores
            elementwise(o.name, o.flops, o.bytes, o.bytes_written * 8 // max(1, a))
    return out
