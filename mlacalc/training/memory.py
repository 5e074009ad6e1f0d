"""Training memory: activations saved for the backward pass, and weights, gradients and optimizer
states per GPU.

**Activations.** The bytes of the tensors a layer saves for its backward pass, for one
micro-batch of ``N = micro_batch x seq_len`` tokens (``a`` bytes per activation element, fp32
statistics at 4 bytes). The layer is written with fused kernels (FlashAttention, fused
RMSNorm and RoPE, fused SwiGLU by default, as Megatron-LM runs it; the tensors have Hugging
Face's shapes one for one), each operation saving what PyTorch's autograd saves for it
(``tests/test_training_reference.py`` builds these layers and captures the saved tensors with
``torch.autograd.graph.saved_tensors_hooks``). Hugging Face's unfused layers save more (their
RMSNorm's fp32 copies, RoPE's cos/sin, GELU intermediates): +17% to +82% measured against
this count with ``swiglu="unfused"``:

- an RMSNorm saves its input and the per-token reciprocal RMS (fp32); a linear layer its input
  (the weight is a parameter, not an activation); SiLU its input; a product both operands;
  a flash-attention kernel its query, key, value, output and the per-row log-sum-exp (fp32);
  a materialized attention (scores, softmax, values as three operations) its query and key,
  the probabilities (``n_h T^2`` per sequence) and its values;
- attention, MHA/GQA/MQA (flash): input, its RMS, the normed input, Q, K, V (``n_kv`` heads),
  the output and the log-sum-exp; with query and key norms (Qwen3 per head, MiniMax-M2 over the
  whole projection) also Q and K before their norm and the norms' RMS;
- MLA expanded (flash): input, RMS, normed input; the compressed query, its RMS and its normed
  form (with ``q_lora_rank``); the latent before its norm, the RMS and the normed latent; the
  query, the key (``[k_nope, k_rope]``, ``n_h`` heads) and the value; output and log-sum-exp.
  With ``recompute="kv_up"`` K and V are not kept; the RoPE key is (``d_rope`` per token) and
  K, V are made again from the latent before the attention's backward;
- MLA absorbed (materialized): as expanded up to the latent, then the query (the absorbed
  product reads its position-free part), the absorbed query ``[q W_UK, q_rope]``
  (``n_h (d_c + d_rope)``), the key ``[c, k_rope]`` (``d_c + d_rope``), the probabilities, the
  latent output (``n_h d_c``) and the output (``n_h d_v``);
- dense FFN (gated): input, RMS, normed input; with ``swiglu="fused"`` (the default, as
  Megatron-LM's ``bias_swiglu_impl`` and TransformerEngine's ``LayerNormMLP`` run it: one
  GEMM makes ``[gate, up]`` and one kernel their ``SiLU(gate) * up``, saving its input) the
  gate-up output (``2 f``) and the product (the down projection's input); with
  ``swiglu="unfused"`` (eager PyTorch: ``silu(x W_g) * (x W_u)``) gate, up, SiLU(gate) and the
  product, one ``f`` more;
- MoE: input, RMS, normed input, the router's probabilities (fp32, ``E`` per token) and its
  top-k indices (int64); per routed copy of a token (``N k`` of them) the gathered input, the
  expert's SwiGLU tensors (as the dense FFN's), its output and its routing weight (fp32: the
  product's two operands), the token it came from and its place among the top-k (int64, the
  gather indices); the weighted outputs go back to their tokens by a scatter-add, which keeps
  only its index (Megatron-LM's unpermute, from recall; Hugging Face's ``index_add`` keeps its
  source too, ``N k d`` elements more a layer); the shared experts as a
  dense FFN of their width; GPT-OSS's router (a bias on its logits) keeps the top-k indices
  and the softmax over those k logits in the activation dtype (the routing weight) in place
  of the fp32 softmax over every expert;
- ``recompute="full"``: a decoder layer keeps its input alone (while its backward runs, its
  forward runs again and saves the rest: :func:`recomputed_layer_bytes`, which memory per GPU
  adds once);
- the embedding its token ids (int64); the head: the final norm's input and RMS, the normed
  input, the log-probabilities (``N V``, fp32: the loss upcasts the logits, as Megatron-LM's
  vocab-parallel cross-entropy does, from recall), the targets (int64) and the loss's total
  weight (fp32 too).

- GPT-2 and Falcon: LayerNorms save their input, mean and reciprocal standard deviation (fp32);
  the fused QKV projection's output holds Q, K and V (the flash kernel keeps it whole); the MLP
  saves its first projection's output (GELU's input) and the GELU output; GPT-2's embedding also
  its position ids; Falcon-7B's MLP reads the attention's normed input (one norm per layer),
  the new decoder architecture's a second norm of the same input.

- Gemma 3: a norm after attention and one after the FFN, before each residual add, each
  saving its input (the block's output) and its RMS (the add saves nothing).

A causal mask is one constant for all layers and is not counted. Activation accounting is
built for the Llama and DeepSeek layouts (RMSNorm, gated FFN, query/key norms, Gemma 3's
post-norms, GPT-OSS's sinks, which a flash kernel keeps inside its log-sum-exp), MiniCPM3
(DeepSeek's MLA, dense; its constant scalings save nothing), GPT-2 and Falcon; other families
are refused by name, with the part of their layer not described.

**Weights, gradients, optimizer.** Bytes per parameter by ``precision``: ``bf16-mixed``
(Megatron-LM: bf16 weights, fp32 gradients and master weights, fp32 Adam moments),
``fp8-mixed`` (DeepSeek-V3: as bf16-mixed with bf16 Adam moments), ``bf16`` (everything bf16,
no master copy) and ``fp32``; optimizer states: AdamW/Adam 2, Lion and SGD with momentum 1,
SGD 0. ZeRO stage 1 shards the master weights and optimizer states over the data-parallel
ranks, stage 2 also the gradients, stage 3 also the weights.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mlacalc.cost.params import expert_shape, ffn_shape, shared_experts_shape
from mlacalc.models.architecture import arch_of
from mlacalc.models.loading import ModelConfig
from mlacalc.words import arguments as args
from mlacalc.words.dtypes import dtype_bits
from mlacalc.words.errors import InvalidArgumentError

__all__ = [
    "OPTIMIZERS",
    "PRECISIONS",
    "SWIGLU",
    "ActivationTensor",
    "layer_activations",
    "optimizer_bytes_per_param",
    "recomputed_layer_bytes",
    "state_bytes",
]

F32 = 4
I64 = 8

#: optimizer -> states per parameter
OPTIMIZERS = {"adamw": 2, "adam": 2, "lion": 1, "sgd-momentum": 1, "sgd": 0}
#: precision -> (weight, gradient, master, state) bytes per parameter (master 0: none)
PRECISIONS = {
    "bf16-mixed": (2, 4, 4, 4),
    "fp8-mixed": (2, 4, 4, 2),
    "bf16": (2, 2, 0, 2),
    "fp32": (4, 4, 0, 4),
}


#: how a gated FFN's SwiGLU runs -> what it saves for backward (besides its input's norm)
SWIGLU = {
    "fused": "the [gate, up] GEMM output and the product (Megatron-LM, TransformerEngine)",
    "unfused": "gate, up, SiLU(gate) and the product (eager PyTorch)",
}


def check_swiglu(swiglu: Any) -> str:
    """``swiglu`` checked: ``"fused"`` or ``"unfused"``."""
    return args.choice("swiglu", swiglu, SWIGLU)


@dataclass(frozen=True)
class ActivationTensor:
    """One saved tensor of a layer: its name, elements, bytes and the layers that save it."""

    block: str
    name: str
    elements: int
    bytes: int
    layers: int

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _unbuilt(m: ModelConfig) -> str:
    """What of ``m``'s layer the activation accounting does not describe ("" if none)."""
    arch = arch_of(m)
    # MiniCPM3's layer is DeepSeek's MLA with a dense SwiGLU: its residual and embedding
    # scalings multiply by constants, which save nothing for backward
    if m.family not in ("llama", "deepseek", "minicpm3", "gpt2", "falcon"):
        return f"the {m.family} layout"
    if m.family in ("llama", "deepseek", "minicpm3") and not m.gated_mlp:
        return "an ungated MLP in a Llama-style layer"
    if arch is None:
        return ""
    checks = (
        (arch.qk_norm not in ("", "head", "full"), f"its {arch.qk_norm} query/key norm"),
        (arch.norms_per_layer not in (2, 4), f"{arch.norms_per_layer} norms a layer"),
        (arch.global_attention, "its global layers' shared K = V heads"),
        (arch.sliding_sinks, "attention sinks in its sliding layers"),
        (
            not m.is_mla and 0 < (m.v_head_dim or m.head_dim) < m.head_dim,
            "values narrower than keys",
        ),
        (arch.gated_query or arch.head_gate, "a gate on the attention's output"),
    )
    return ", ".join(what for hit, what in checks if hit)


def check_layout(m: ModelConfig) -> None:
    """Refuse a family whose layer the activation accounting does not describe, naming what of
    it is not described."""
    missing = _unbuilt(m)
    if missing:
        raise InvalidArgumentError(
            "model",
            f"activation memory of {m.label} ({m.model_type}) is not built ({missing}): it is "
            "for the Llama and DeepSeek layouts (RMSNorm, gated FFN, optional query/key norms, "
            "Gemma 3's norms after each block, gpt-oss's sinks and router), MiniCPM3, GPT-2 "
            "and Falcon",
        )


def _post_norm(m: ModelConfig, n: int, a: int) -> list[tuple[str, int, int]]:
    """Gemma 3's norm after a block, before the residual add: its input (the block's output)
    and its RMS; its output feeds the add, which saves nothing."""
    arch = arch_of(m)
    if arch is None or arch.norms_per_layer != 4:
        return []
    return [("post_norm_input", n * m.hidden_size, a), ("post_norm_rms", n, F32)]


def _norm(n: int, d: int, a: int, layer_norm: bool) -> list[tuple[str, int, int]]:
    """A norm's saved tensors: its input, its statistics (fp32), its output."""
    stats = (
        [("input_mean", n, F32), ("input_rstd", n, F32)] if layer_norm else [("input_rms", n, F32)]
    )
    return [("input", n * d, a), *stats, ("normed_input", n * d, a)]


def _ffn_norm(m: ModelConfig, n: int, a: int) -> list[tuple[str, int, int]]:
    """The FFN's norm: its own (sequential layers), none (Falcon-7B's MLP reads the attention's
    normed input), or a second norm of the same input (Falcon's new decoder architecture)."""
    d = m.hidden_size
    if m.family != "falcon":
        return _norm(n, d, a, m.layer_norm)
    if m.new_decoder_architecture:
        return [("input_mean", n, F32), ("input_rstd", n, F32), ("normed_input", n * d, a)]
    if m.parallel_attn:
        return []
    return _norm(n, d, a, True)


def _attention(m: ModelConfig, n: int, b: int, t: int, impl: str, recompute: str, a: int):
    d, n_h = m.hidden_size, m.num_attention_heads
    out = _norm(n, d, a, m.layer_norm)
    if m.fused_qkv:  # Q, K, V are views of the one projection's output
        d_h, n_kv = m.head_dim, m.num_key_value_heads
        return [
            *out,
            ("qkv", n * (n_h + 2 * n_kv) * d_h, a),
            ("output", n * n_h * d_h, a),
            ("logsumexp", b * n_h * t, F32),
        ]
    if not m.is_mla:
        d_h, n_kv = m.head_dim, m.num_key_value_heads
        arch = arch_of(m)
        if arch is not None and arch.qk_norm:  # the norm's input and its RMS (per head or row)
            rows = (n_h, n_kv) if arch.qk_norm == "head" else (1, 1)
            out += [
                ("q_before_norm", n * n_h * d_h, a),
                ("q_rms", n * rows[0], F32),
                ("k_before_norm", n * n_kv * d_h, a),
                ("k_rms", n * rows[1], F32),
            ]
        return [
            *out,
            ("q", n * n_h * d_h, a),
            ("k", n * n_kv * d_h, a),
            ("v", n * n_kv * d_h, a),
            ("output", n * n_h * d_h, a),
            ("logsumexp", b * n_h * t, F32),
        ]
    d_c, d_r, d_v = m.kv_lora_rank, m.qk_rope_head_dim, m.v_head_dim
    d_qk = m.qk_nope_head_dim + d_r
    if m.q_lora_rank:
        q = m.q_lora_rank
        out += [("q_latent", n * q, a), ("q_latent_rms", n, F32), ("q_latent_normed", n * q, a)]
    out += [("kv_latent", n * d_c, a), ("kv_latent_rms", n, F32), ("kv_latent_normed", n * d_c, a)]
    out.append(("q", n * n_h * d_qk, a))
    if impl == "absorbed":
        return [
            *out,
            ("q_absorbed", n * n_h * (d_c + d_r), a),
            ("key_latent", n * (d_c + d_r), a),
            ("probabilities", b * n_h * t * t, a),
            ("output_latent", n * n_h * d_c, a),
            ("output", n * n_h * d_v, a),
        ]
    if recompute == "kv_up":
        out.append(("k_rope", n * d_r, a))
    else:
        out += [("k", n * n_h * d_qk, a), ("v", n * n_h * d_v, a)]
    return [*out, ("output", n * n_h * d_v, a), ("logsumexp", b * n_h * t, F32)]


def _ffn(n: int, f: int, a: int, swiglu: str, prefix: str = "") -> list[tuple[str, int, int]]:
    """A SwiGLU's saved tensors beyond its input: fused, the one ``[gate, up]`` GEMM output
    (the fused kernel's saved input) and the product (the down projection's input); unfused,
    gate and up (SiLU's and the product's inputs), SiLU(gate) and the product."""
    if swiglu == "fused":
        return [(f"{prefix}gate_up", 2 * n * f, a), (f"{prefix}product", n * f, a)]
    return [(f"{prefix}{x}", n * f, a) for x in ("gate", "up", "activation", "product")]


def _moe(m: ModelConfig, n: int, a: int, swiglu: str) -> list[tuple[str, int, int]]:
    d, E, k = m.hidden_size, m.n_routed_experts, m.num_experts_per_tok
    f_e = expert_shape(m).inter
    arch = arch_of(m)
    weight = F32  # the routing weight: a slice of the fp32 softmax over every expert
    out = [("router_probabilities", n * E, F32), ("router_topk_index", n * k, I64)]
    if arch is not None and arch.router_bias:
        # GPT-OSS's router (the one with a bias on its logits): the top k of the logits, then
        # a softmax over those k in the activation dtype, which is the routing weight
        weight = a
        out = [("router_topk_index", n * k, I64), ("router_topk_probabilities", n * k, a)]
    out += [("expert_input", n * k * d, a), *_ffn(n * k, f_e, a, swiglu, "expert_")]
    out += [
        ("expert_output", n * k * d, a),
        ("routing_weight", n * k, weight),
        ("expert_index", n * k, I64),
        ("routing_index", n * k, I64),
    ]
    if m.n_shared_experts:
        out += _ffn(n, shared_experts_shape(m).inter, a, swiglu, "shared_")
    return out


def layer_activations(
    m: ModelConfig,
    seq_len: int,
    micro_batch: int,
    impl: str,
    recompute: str,
    dtype: str = "bf16",
    swiglu: str = "fused",
) -> list[ActivationTensor]:
    """The tensors every decoder layer and the head save for the backward pass of one
    micro-batch (``layers``: how many layers save each); ``swiglu``: :data:`SWIGLU`."""
    check_layout(m)
    swiglu = check_swiglu(swiglu)
    a = dtype_bits(dtype) // 8
    b, t = micro_batch, seq_len
    n, d, L = b * t, m.hidden_size, m.num_hidden_layers
    out: list[ActivationTensor] = []
    if recompute == "full":
        out.append(ActivationTensor("layer", "input", n * d, n * d * a, L))
    else:
        post = _post_norm(m, n, a)
        for name, el, size in _attention(m, n, b, t, impl, recompute, a) + post:
            out.append(ActivationTensor("attention", name, el, el * size, L))
        norm = _ffn_norm(m, n, a)
        moe_layers = m.num_moe_layers
        if L - moe_layers:
            f = ffn_shape(m).inter
            mlp = [("fc_output", n * f, a), ("activation", n * f, a)]
            dense = norm + (_ffn(n, f, a, swiglu) if m.gated_mlp else mlp) + post
            out += [ActivationTensor("ffn", x, el, el * s, L - moe_layers) for x, el, s in dense]
        if moe_layers:
            moe = norm + _moe(m, n, a, swiglu) + post
            out += [ActivationTensor("moe", x, el, el * s, moe_layers) for x, el, s in moe]
    stats = (
        [("final_norm_mean", n, F32), ("final_norm_rstd", n, F32)]
        if m.layer_norm
        else [("final_norm_rms", n, F32)]
    )
    positions = [("position_ids", t, I64)] if m.family == "gpt2" else []
    head = [
        ("token_ids", n, I64),
        *positions,
        ("final_norm_input", n * d, a),
        *stats,
        ("normed", n * d, a),
        # Megatron-LM's cross-entropy upcasts the logits to fp32 and keeps their softmax (fp32)
        # for its backward, whatever the activation dtype (from recall)
        ("log_probabilities", n * m.vocab_size, F32),
        ("targets", n, I64),
        ("loss_weight", 1, F32),
    ]
    out += [ActivationTensor("head", x, el, el * s, 1) for x, el, s in head]
    return out


def recomputed_layer_bytes(
    m: ModelConfig,
    seq_len: int,
    micro_batch: int,
    impl: str,
    dtype: str = "bf16",
    swiglu: str = "fused",
) -> dict[str, int]:
    """``recompute="full"``: what one decoder layer saves when its forward runs again in the
    backward, beyond the input it kept (the rerun reads that storage): its tensors under
    ``"none"`` less its input, for a dense (``"ffn"``) and a MoE (``"moe"``) layer. Live on
    top of every layer's kept input while that layer's backward runs, one layer at a time."""
    per: dict[str, int] = {}
    for a in layer_activations(m, seq_len, micro_batch, impl, "none", dtype, swiglu):
        per[a.block] = per.get(a.block, 0) + a.bytes
    kept = micro_batch * seq_len * m.hidden_size * (dtype_bits(dtype) // 8)
    return {k: per["attention"] + per[k] - kept for k in ("ffn", "moe") if k in per}


def optimizer_bytes_per_param(optimizer: Any, precision: Any) -> tuple[int, int, int, int]:
    """(weight, gradient, master, optimizer-state) bytes per parameter."""
    states = OPTIMIZERS[args.choice("optimizer", optimizer, OPTIMIZERS)]
    w, g, master, s = PRECISIONS[args.choice("precision", precision, PRECISIONS)]
    return w, g, master, states * s


def state_bytes(
    params: float,
    optimizer: str,
    precision: str,
    dp: int,
    zero: int,
    expert_params: float = 0.0,
    expert_dp: int = 1,
) -> dict:
    """Weights, gradients, master weights and optimizer states of ``params`` parameters on one
    GPU, sharded over ``dp`` data-parallel ranks by ZeRO stage ``zero``, and of
    ``expert_params`` routed-expert parameters, sharded over the ``expert_dp`` ranks that hold
    the same experts (``dp x cp x tp / ep``, :func:`mlacalc.training.step.expert_dp`: an
    expert-parallel shard is replicated that many times, so ZeRO can split its states no
    further, as Megatron-LM's distributed optimizer does over its expert data-parallel
    group)."""
    w, g, master, s = optimizer_bytes_per_param(optimizer, precision)
    stages = {"weights": 3, "gradients": 2, "master_weights": 1, "optimizer_states": 1}
    per = {"weights": w, "gradients": g, "master_weights": master, "optimizer_states": s}
    return {
        k: params * per[k] / (dp if zero >= stage else 1)
        + expert_params * per[k] / (expert_dp if zero >= stage else 1)
        for k, stage in stages.items()
    }
