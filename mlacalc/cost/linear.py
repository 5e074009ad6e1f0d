"""Linear-attention layers: FLOPs, bytes and serving kernels of one step.

Two kinds of linear layer are modelled, each as its Hugging Face reference computes it:

- **Gated DeltaNet** (Qwen3-Next): one fused input projection ``in_proj_qkvz`` (queries and
  keys of ``h_k`` heads of ``d_k``, values and output gates of ``h_v`` heads of ``d_v``) and
  ``in_proj_ba`` (two scalars per value head), a depthwise causal convolution of ``K`` taps
  over q, k and v, the gated delta rule with one ``d_k x d_v`` state per value head, a gated
  RMSNorm and ``out_proj``;
- **Kimi Delta Attention** (Kimi Linear): separate q, k, v projections of ``H`` heads of
  ``D``, a low-rank forget gate (``f_a_proj``, ``f_b_proj``: a decay per channel), an input
  gate ``b_proj``, a low-rank output gate (``g_a_proj``, ``g_b_proj``), the same convolution
  and delta rule (``h_k = h_v = H``, ``d_k = d_v = D``), a gated RMSNorm and ``o_proj``.

FLOPs (``2 m n k`` per product, as everywhere in mlacalc). A step of ``q`` new tokens per
sequence runs the delta rule in one of the reference's two forms:

- **recurrent** (one new token after a context: decode, or a chunk of one token), per token
  and value head ``6 d_k d_v``: the state read against the key, its rank-one update and the
  state read against the query, each a ``d_k x d_v`` product;
- **chunked** (otherwise: prefill, chunks), ``ceil(q / C)`` chunks of ``C = 64`` tokens, each
  computed whole (the last one padded, as the reference and the serving kernels tile it);
  per chunk and value head, Gated DeltaNet ``4 C^2 d_k + 2 C^2 d_v + 6 C d_k d_v`` for its
  products (``k_beta k^T``, ``q k^T``, the state read twice, the intra-chunk product with
  the new values, the state update) plus ``C (C - 1) (d_k + d_v)`` for its two unit
  triangular solves (one multiply-add per entry below the diagonal and right-hand column);
  Kimi Delta Attention ``6 C^2 d_k + 4 C^2 d_v + 6 C d_k d_v`` (the two decayed products
  ``k_beta k^T`` and ``q k^T`` over every channel, the inverse applied to ``v_beta`` and
  the decayed keys, the same four per-chunk products) plus ``(C - 1) C (2 C - 1) / 3``
  for building the inverse by forward substitution.

The chunked form is counted for every multi-token step because it is what runs: its work
per token is larger than the recurrent form's (``C``-wide intra-chunk blocks) but it is a
few large products instead of ``q`` dependent ones. ``causal`` does not change a linear
layer: its intra-chunk blocks are computed whole. The short convolution counts ``2 K`` per
channel and new token (stage ``core``, with the delta rule); the outputs per channel the
reference computes and discards are not counted (``K - 1`` in prefill, ``2 K - 1`` in a chunk
after a context, one in decode). Input projections
are stage ``kv_proj``, the output gate and projection ``o_proj``.

Bytes: the weights once (projection matrices in the weight dtype, the convolution taps and
the per-head vectors in bf16), the layer's input and output, and the state: the convolution
window (cache dtype) and the float32 recurrent state, read when the step follows a context
and written every step.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from mlacalc.cost.attention import AttentionCost, OpCost, op_cost, packed_bytes, state_layer_cost
from mlacalc.models.architecture import arch_of
from mlacalc.words.dtypes import dtype_bits, gemm_class, resolve_kv_layout, state_layout
from mlacalc.words.kernels import Kernel, linear_code
from mlacalc.words.vocab import NORM_FLOPS_PER_ELEMENT
from mlacalc.words.workload import Workload

if TYPE_CHECKING:
    from mlacalc.models.schema import ModelConfig

__all__ = [
    "LINEAR_CHUNK",
    "LinearShape",
    "conv_shape",
    "delta_rule_flops",
    "gated_query_cost",
    "gdn_kernel_bytes",
    "linear_chunks",
    "linear_cost",
    "linear_kernels",
    "linear_shape",
]

#: Tokens per chunk of the chunked delta rule (the reference's and the serving kernels').
LINEAR_CHUNK = 64
#: Bytes of one element of the recurrent state (float32, as the reference holds it).
STATE_BYTES = 4
#: Bits of the small parameters (convolution taps, per-head vectors, norm weights).
SMALL_BITS = 16


@dataclass(frozen=True)
class LinearShape:
    """The widths of one linear-attention layer."""

    kind: str  # "gated_deltanet" or "kimi_delta"
    hidden: int
    k_heads: int
    v_heads: int
    d_k: int
    d_v: int
    conv_kernel: int

    @property
    def conv_dim(self) -> int:
        """Channels of the short convolution: q, k and v."""
        return 2 * self.k_heads * self.d_k + self.v_heads * self.d_v

    @property
    def value_width(self) -> int:
        return self.v_heads * self.d_v

    @property
    def in_width(self) -> int:
        """Outputs of the input projection(s) reading the hidden state."""
        if self.kind == "kimi_delta":  # q, k, v; f_a, g_a (one head width each); b
            return 3 * self.value_width + 2 * self.d_k + self.v_heads
        return 2 * self.k_heads * self.d_k + 2 * self.value_width + 2 * self.v_heads

    @property
    def gate_up_width(self) -> int:
        """Outputs of the low-rank gates' up-projections (Kimi: f_b and g_b), 0 otherwise."""
        return 2 * self.value_width if self.kind == "kimi_delta" else 0

    @property
    def small_params(self) -> int:
        """Convolution taps, per-head vectors and the output norm's weight."""
        conv = self.conv_dim * self.conv_kernel
        if self.kind == "kimi_delta":  # dt_bias per channel, A_log per head, o_norm
            return conv + self.value_width + self.v_heads + self.d_v
        return conv + 2 * self.v_heads + self.d_v  # dt_bias, A_log, norm

    @property
    def state_elements(self) -> int:
        return self.v_heads * self.d_k * self.d_v

    def core_flops(self, q: int, recurrent: bool) -> int:
        """Delta-rule FLOPs of one sequence's ``q`` new tokens (all value heads).

        Examples
        --------
        Qwen3-Next's linear layer, per token and value head: recurrent, then chunked

        >>> s = LinearShape("gated_deltanet", 2048, 16, 32, 128, 128, 4)
        >>> s.core_flops(1, recurrent=True) // 32, s.core_flops(64, recurrent=False) // 64 // 32
        (98304, 163584)
        """
        return delta_rule_flops(self.kind, q, self.v_heads, self.d_k, self.d_v, recurrent)


def linear_chunks(q):
    """The chunks of :data:`LINEAR_CHUNK` tokens the chunked delta rule cuts ``q`` new tokens of
    a sequence into, the last one padded (an integer, or numpy arrays elementwise)."""
    return -(-q // LINEAR_CHUNK)


def delta_rule_flops(kind: str, q, v_heads, d_k, d_v, recurrent: bool):
    """Delta-rule FLOPs of one sequence's ``q`` new tokens over ``v_heads`` value heads (the
    module docs' counts; integers in, an integer out, or numpy arrays of them elementwise:
    the measured ``gdn_perf`` rows are mapped with the same count)."""
    if recurrent:
        return v_heads * q * 6 * d_k * d_v
    c = LINEAR_CHUNK
    chunks = linear_chunks(q)
    if kind == "kimi_delta":
        per = 6 * c * c * d_k + 4 * c * c * d_v + 6 * c * d_k * d_v + (c - 1) * c * (2 * c - 1) // 3
    else:
        per = 4 * c * c * d_k + 2 * c * c * d_v + 6 * c * d_k * d_v + c * (c - 1) * (d_k + d_v)
    return v_heads * chunks * per


def gdn_kernel_bytes(tokens, seqs, k_heads, d_k, v_heads, d_v) -> tuple:
    """The HBM traffic of the serving engines' Gated DeltaNet kernels over ``tokens`` new
    tokens of ``seqs`` sequences (integers, or numpy arrays elementwise): ``(io, passes,
    state)``. ``io``: q and k (``k_heads x d_k``), v in and the output out (``v_heads x
    d_v``) in bf16, the gate and beta in float32. ``passes``: flash-linear-attention's chunked
    form (SGLang's and TensorRT-LLM's), which moves its intermediates through HBM between its
    kernels, each (token, value head) in bf16 unless said: q and k read by five of its
    kernels (k four times), v read and the output written once, ``w``, ``u`` and the new
    values written and read back, the chunk's float32 products and their bf16 inverse
    written and read, the per-chunk states (``d_k x d_v`` bf16) written and read back: an
    estimate of that traffic, which replaces ``io`` where it is larger (FlashInfer's fused
    kernel, vLLM's, moves ``io`` alone). ``state``: one float32 ``d_k x d_v`` state per
    sequence and value head, written once."""
    c = LINEAR_CHUNK
    io = tokens * (2 * k_heads * d_k + 2 * v_heads * d_v) * 2 + tokens * v_heads * 8
    passes = tokens * (10 * k_heads * d_k + v_heads * (16 * d_v + 12 * c + 4 * d_k * d_v // c))
    return io, passes, seqs * v_heads * d_k * d_v * STATE_BYTES


def linear_shape(model: ModelConfig) -> LinearShape:
    """The linear-attention widths of a model with linear layers."""
    arch = arch_of(model)
    kind = "kimi_delta" if arch is not None and arch.kimi_delta else "gated_deltanet"
    return LinearShape(
        kind=kind,
        hidden=model.hidden_size,
        k_heads=model.linear_num_key_heads,
        v_heads=model.linear_num_value_heads,
        d_k=model.linear_key_head_dim,
        d_v=model.linear_value_head_dim,
        conv_kernel=model.linear_conv_kernel_dim,
    )


def linear_cost(model: ModelConfig, layers: int, work: Workload) -> AttentionCost:
    """The cost of ``layers`` linear-attention layers for one step of a checked workload
    (:func:`mlacalc.cost.attention.checked_workload`): ``q_len`` new tokens per sequence, the
    last attending ``seq_len`` tokens (see the module docs)."""
    seq_len, batch, q, layout = work.seq_len, work.batch, work.q_len, work.kv_dtype
    weight_bits = dtype_bits(work.weight_dtype or model.weights_dtype)
    act_bits = dtype_bits(work.act_dtype)
    s = linear_shape(model)
    tokens = batch * q
    d = s.hidden
    prior = seq_len > q
    recurrent = prior and q == 1
    cache_bits = state_layout(layout).row_bytes(1) * 8
    conv_state = packed_bytes(batch * s.conv_dim * s.conv_kernel, cache_bits)
    rec_state = batch * s.state_elements * resolve_kv_layout(layout).state_bytes
    ops = []

    def op(*args, **kwargs) -> None:
        ops.append(op_cost(*args, **kwargs))

    op(
        "linear_in_proj",
        "kv_proj",
        "matmul",
        2 * tokens * d * s.in_width,
        packed_bytes(tokens * d, act_bits),
        packed_bytes(tokens * s.in_width, act_bits),
        weights=packed_bytes(d * s.in_width, weight_bits),
        shape=(1, tokens, s.in_width, d),
    )
    if s.gate_up_width:
        half = s.gate_up_width // 2
        op(
            "linear_gate_proj",
            "kv_proj",
            "matmul",
            2 * tokens * s.d_k * s.gate_up_width,
            packed_bytes(2 * tokens * s.d_k, act_bits),
            packed_bytes(tokens * s.gate_up_width, act_bits),
            weights=packed_bytes(s.d_k * s.gate_up_width, weight_bits),
            shape=(2, tokens, half, s.d_k),
        )
    op(
        "linear_conv",
        "core",
        "matmul",
        2 * tokens * s.conv_dim * s.conv_kernel,
        packed_bytes(tokens * s.conv_dim, act_bits),
        packed_bytes(tokens * s.conv_dim, act_bits),
        weights=packed_bytes(s.conv_dim * s.conv_kernel, SMALL_BITS),
        c_read=conv_state if prior else 0,
        c_write=conv_state,
        shape=(s.conv_dim, tokens, 1, s.conv_kernel),
    )
    gates = s.value_width + s.v_heads if s.kind == "kimi_delta" else 2 * s.v_heads
    vectors = s.small_params - s.conv_dim * s.conv_kernel - s.d_v
    op(
        "linear_core",
        "core",
        "matmul",
        batch * s.core_flops(q, recurrent),
        packed_bytes(tokens * (s.conv_dim + gates), act_bits),
        packed_bytes(tokens * s.value_width, act_bits),
        weights=packed_bytes(vectors, SMALL_BITS),
        c_read=rec_state if prior else 0,
        c_write=rec_state,
        shape=None,
    )
    op(
        "linear_norm",
        "norm",
        "norm",
        NORM_FLOPS_PER_ELEMENT * tokens * (2 * s.k_heads * s.d_k + s.value_width),
        packed_bytes(2 * tokens * s.value_width, act_bits),
        packed_bytes(tokens * s.value_width, act_bits),
        weights=packed_bytes(s.d_v, SMALL_BITS),
    )
    op(
        "linear_o_proj",
        "o_proj",
        "matmul",
        2 * tokens * s.value_width * d,
        packed_bytes(tokens * s.value_width, act_bits),
        packed_bytes(tokens * d, act_bits),
        weights=packed_bytes(s.value_width * d, weight_bits),
        shape=(1, tokens, d, s.value_width),
    )
    return state_layer_cost(
        model,
        layers,
        work,
        ops,
        variant="linear",
        impl="recurrent" if recurrent else "chunked",
        io_bytes=2 * packed_bytes(tokens * d, act_bits),
        state_bytes=conv_state + rec_state,
    )


def linear_kernels(
    cost: AttentionCost, model: ModelConfig, act_dtype: str, weight_dtype: str, calls: int = 1
) -> list[Kernel]:
    """The serving kernels of one linear-attention layer, from its :func:`linear_cost`.

    Every projection is a ``gemm`` whose shape gives its FLOPs exactly (``2 g m n k``):
    ``linear_in_proj`` (and Kimi's ``linear_gate_proj``, two products) and ``linear_o_proj``.
    ``linear_conv``, the depthwise causal convolution (a few taps per channel and token, its
    window read and written), is the streaming kernel the engines run (``causal_conv1d_fn``
    for a prompt or chunk, ``causal_conv1d_update`` one token a sequence): the measured
    classes ``conv1d`` and ``conv1d_update`` (shape ``linear``, :data:`LINEAR_VARIANTS`).

    Gated DeltaNet's delta rule is one kernel, ``linear_core``, as the engines run it and
    their ``gdn_perf`` rows time it: recurrent (``fused_recurrent_gated_delta_rule``, class
    ``gdn_recurrent``: the float32 state streamed in and out) or chunked
    (``chunk_gated_delta_rule``, class ``gdn_chunk``: its FLOPs the chunked count; its bytes
    flash-linear-attention's passes over its intermediates, :func:`gdn_kernel_bytes`, and the
    state; ``fused_bytes`` what FlashInfer's fused kernel, vLLM's, moves instead; ``chunks``
    a sequence walks one after another, ``seq_heads`` walkers).

    Kimi Delta Attention's rule has no measured table: recurrent, ``linear_core`` (three
    ``1 x d_k`` by ``d_k x d_v`` products per token and value head); chunked, over ``G`` =
    sequences x value heads x chunks:

    - ``linear_core_qk``: ``k_beta k^T`` and ``q k^T`` (``2G`` products ``C x d_k`` by
      ``d_k x C``), the chunk's q, k, v and gates read, the two ``C x C`` blocks written;
    - ``linear_core_inverse`` (its inverse by rows, ``G`` products of ``(C - 1) / 3 x C / 2``
      by ``2 C - 1``: ``(C - 1) C (2 C - 1) / 3`` FLOPs) and ``linear_core_apply`` (the
      inverse times ``v_beta`` and the decayed keys);
    - ``linear_core_state``: the state read twice and updated per chunk (``3G`` products
      ``C x d_k`` by ``d_k x d_v``), each chunk's state read and written (float32);
    - ``linear_core_pv``: the intra-chunk product with the new values (``G`` products
      ``C x C`` by ``C x d_v``), the output written.

    Its intermediates are float32, as the reference computes them; ``linear_norm`` is
    element-wise.
    """
    s = linear_shape(model)
    a = _bits(act_dtype)
    f = 8 * STATE_BYTES
    c, dk, dv = LINEAR_CHUNK, s.d_k, s.d_v
    out: list[Kernel] = []

    def gemm(name: str, dtype: str, g: int, m: int, n: int, k: int, nbytes: int) -> None:
        shape = {"m": m, "n": n, "k": k, "groups": g}
        out.append(Kernel(name, "gemm", dtype, 2 * g * m * n * k, nbytes, calls=calls, shape=shape))

    for o in cost.ops:
        if o.name == "linear_core" and s.kind == "gated_deltanet":
            out.append(_gdn_core(o, cost, s, act_dtype, calls))
        elif o.name == "linear_core" and cost.impl == "recurrent":
            g = 3 * cost.batch * s.v_heads * cost.q_len
            gemm("linear_core", "float32", g, 1, dv, dk, o.bytes)
        elif o.name == "linear_core":
            g = cost.batch * s.v_heads * linear_chunks(cost.q_len)
            state = o.cache_bytes_read + o.cache_bytes_written
            inputs = o.bytes_read - o.cache_bytes_read
            gemm(
                "linear_core_qk",
                act_dtype,
                2 * g,
                c,
                c,
                dk,
                inputs + packed_bytes(2 * g * c * c, f),
            )
            wu = packed_bytes(g * c * (dk + dv), f)
            block = packed_bytes(g * c * c, f)
            gemm("linear_core_inverse", act_dtype, g, (c - 1) // 3, 2 * c - 1, c // 2, 2 * block)
            gemm("linear_core_apply", act_dtype, g, c, dk + dv, c, block + 2 * wu)
            chunk_states = packed_bytes(2 * g * dk * dv, f)
            gemm("linear_core_state", act_dtype, 3 * g, c, dv, dk, wu + chunk_states + state)
            pv = block + packed_bytes(g * (c * dv + dk * dv), f) + o.bytes_written
            gemm("linear_core_pv", act_dtype, g, c, dv, c, pv)
        elif o.kind == "matmul" and o.name != "linear_conv":
            g, m, n, k = o.shape
            gemm(o.name, gemm_class(act_dtype, weight_dtype, True), g, m, n, k, o.bytes)
        else:
            # element-wise kernels, and the depthwise causal convolution: a few taps per
            # channel (``1 x K`` by ``K`` products, no reduction across channels) that a
            # streaming kernel runs on the CUDA cores, not a batched GEMM of 1 x 1 tiles
            shape = {"elements": o.bytes_written * 8 // max(1, a)}
            if o.name == "linear_conv":
                update = cost.impl == "recurrent"
                shape.update(conv_shape(update, cost.batch, s.conv_dim))
            out.append(
                Kernel(o.name, "elementwise", act_dtype, o.flops, o.bytes, calls=calls, shape=shape)
            )
    return out


def conv_shape(update: bool, seqs: int, channels: int, prefix: str = "") -> dict[str, int]:
    """The shape fields of a causal conv1d kernel of a step: its measured class (``linear``:
    ``conv1d`` for a prompt or chunk, ``conv1d_update`` one token a sequence; ``prefix``
    ``mamba2_`` for Mamba-2's), the sequences and the channels (an engine whose prompt kernel
    runs per sequence: :func:`mlacalc.timemodel.elementwise_time.engine_linear_kernel`)."""
    variant = prefix + ("conv1d_update" if update else "conv1d")
    return {"linear": linear_code(variant), "seqs": seqs, "channels": channels}


def _gdn_core(o: OpCost, cost: AttentionCost, s: LinearShape, act_dtype: str, calls: int) -> Kernel:
    """Gated DeltaNet's delta rule as the engines' one kernel (:func:`linear_kernels`): its
    exact FLOPs and bytes (inputs, output, state), and the shape fields its class reads:
    the sequences, value heads and chunks each (sequence, head) walks; a chunked kernel's
    ``fla_bytes``, what flash-linear-attention's passes over its intermediates add to the
    call's traffic (:func:`gdn_kernel_bytes`; an engine running them adds it)."""
    tokens = cost.batch * cost.q_len
    shape = {
        "elements": tokens * s.v_heads * s.d_v,
        "seqs": cost.batch,
        "heads": s.v_heads,
        "seq_heads": cost.batch * s.v_heads,
    }
    if cost.impl == "recurrent":
        shape.update(linear=linear_code("gdn_recurrent"), chunks=1)
    else:
        io, passes, _ = gdn_kernel_bytes(tokens, cost.batch, s.k_heads, s.d_k, s.v_heads, s.d_v)
        shape.update(
            linear=linear_code("gdn_chunk"),
            chunks=linear_chunks(cost.q_len),
            chunk_tokens=min(cost.q_len, LINEAR_CHUNK),
            fla_bytes=max(0, passes - io),
        )
    return Kernel(
        "linear_core", "elementwise", act_dtype, o.flops, o.bytes, calls=calls, shape=shape
    )


def _bits(dtype: str) -> int:
    return dtype_bits(dtype)


def gated_query_cost(
    cost: AttentionCost,
    model: ModelConfig,
    weight_dtype: str | None,
    act_dtype: str,
    width: int | None = None,
) -> AttentionCost:
    """A full layer whose ``q_proj`` also yields an output gate (Qwen3-Next): one more
    ``d -> n_h d_h`` product (``q_gate_proj``, stage ``q_proj``) after the query's, its
    weights read once; the sigmoid gate on the core's output is element-wise. ``width``
    narrows the gate: ``n_h`` for one gate a head (Step-3.7's ``g_proj``)."""
    d = model.hidden_size
    if width is None:
        width = model.num_attention_heads * model.head_dim
    tokens = cost.batch * cost.q_len
    a_bits, w_bits = dtype_bits(act_dtype), dtype_bits(weight_dtype or model.weights_dtype)
    weights = packed_bytes(d * width, w_bits)
    gate = OpCost(
        name="q_gate_proj",
        stage="q_proj",
        kind="matmul",
        flops=2 * tokens * d * width,
        bytes_read=weights + packed_bytes(tokens * d, a_bits),
        bytes_written=packed_bytes(tokens * width, a_bits),
        weight_bytes=weights,
        cache_bytes_read=0,
        cache_bytes_written=0,
        shape=(1, tokens, width, d),
    )
    ops = list(cost.ops)
    at = next((i + 1 for i, o in enumerate(ops) if o.stage == "q_proj"), 0)
    ops.insert(at, gate)
    stage = dict(cost.stage_flops)
    stage["q_proj"] += cost.layers * gate.flops
    return replace(
        cost,
        ops=tuple(ops),
        stage_flops=stage,
        fused_layer_bytes=cost.fused_layer_bytes + weights,
    )
