"""Architectures beyond the base layouts: what each new model family adds, layer by layer.

The families here follow the Llama layout (RMSNorm, rotary attention with separate
q/k/v/o projections, gated MLP or routed experts) and add, by a written rule of their
Hugging Face implementation:

=================  =========================================================================
``qwen3``          per-head RMSNorm on queries and keys (``q_norm``, ``k_norm``: ``d_h`` each)
``qwen3_moe``      Qwen3 attention; every layer a MoE of ``num_experts`` (router without bias)
``glm4_moe``       GLM-4.5/4.7: q/k/v biases when ``attention_bias``; ``first_k_dense_replace``
                   dense layers, then MoE with shared experts and a router correction bias
``minimax_m2``     RMSNorm over the whole query and key projections (``n_h d_h``, ``n_kv d_h``);
                   every layer a MoE, router with a correction bias, no shared expert
``phi3``           fused ``qkv_proj`` and ``gate_up_proj`` (same counts as separate matrices)
``gpt_oss``        biases on q/k/v/o, one attention-sink logit per head, router with a bias,
                   experts with biases; sliding and full layers alternate
``gemma3_text``    per-head q/k norms, four norms per layer (sandwich), tied head; ``W``-token
                   sliding layers with every ``full_attention_interval``-th layer full
``llama4_text``    chunked layers with every ``full_attention_interval``-th layer full and
                   without RoPE; weightless L2 q/k norms; MoE with one shared expert; dense
                   layers of ``intermediate_size`` (config.json: ``intermediate_size_mlp``)
``gemma4_text``    Gemma 3's layer, and full layers with their own head width
                   (``global_head_dim``) and, with ``attention_k_eq_v``, KV heads
                   (``num_global_key_value_heads``) and no ``v_proj``; a dense MLP beside the
                   routed experts (``n_shared_experts`` of them), a router with scale vectors,
                   three more norms and a scalar per layer
``qwen3_next``     Gated DeltaNet linear layers (:mod:`mlacalc.cost.linear`) with every
                   ``full_attention_interval``-th layer full, its ``q_proj`` also yielding
                   a per-head output gate; MoE with a gated shared expert
``kimi_linear``    Kimi Delta Attention linear layers (:mod:`mlacalc.cost.linear`) with MLA full
                   layers without RoPE at ``full_attention_layers``; DeepSeek-V3's MoE
=================  =========================================================================

:func:`layer_pattern` gives a model's per-layer kinds (:mod:`mlacalc.models.patterns`),
:func:`param_counts` its exact parameters, and :func:`tensors` the checkpoint's weight
tensors (for quantized byte counts in :mod:`mlacalc.cost.quant`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from mlacalc.cost.quant import Tensor
from mlacalc.models.patterns import LayerKind, LayerPattern

if TYPE_CHECKING:
    from mlacalc.cost.params import ParamCounts
    from mlacalc.models.schema import ModelConfig

__all__ = ["ARCHS", "Arch", "arch_of", "layer_pattern", "param_counts", "tensors"]


@dataclass(frozen=True)
class Arch:
    """What a family adds to the Llama layout (each a rule of its reference implementation)."""

    qk_norm: str = ""  # "", "head" (d_h each) or "full" (n_h d_h and n_kv d_h)
    norms_per_layer: int = 2
    sinks: bool = False
    router_bias: bool = False  # a bias on the router's logits (GPT-OSS)
    correction_bias: bool = False  # a per-expert correction bias on the routing scores
    expert_bias: bool = False
    off_pattern: str = "full"  # kind of the layers that are not full: sliding/chunked
    nope_full: bool = False  # full-attention layers without RoPE (Llama 4)
    indexer: bool = False  # DeepSeek sparse attention: MLA plus a lightning indexer
    shared_gate: bool = False  # a sigmoid gate on the shared expert (one d-wide row)
    gated_query: bool = False  # q_proj also yields a per-head output gate (Qwen3-Next)
    kimi_delta: bool = False  # linear layers are Kimi Delta Attention (Kimi Linear)
    global_attention: bool = False  # full layers: global_head_dim, K=V heads (Gemma 4)


ARCHS: dict[str, Arch] = {
    "qwen3": Arch(qk_norm="head"),
    "qwen3_moe": Arch(qk_norm="head"),
    "glm4_moe": Arch(correction_bias=True),
    "minimax_m2": Arch(qk_norm="full", correction_bias=True),
    "phi3": Arch(off_pattern="sliding"),
    "gpt_oss": Arch(sinks=True, router_bias=True, expert_bias=True, off_pattern="sliding"),
    "gemma3_text": Arch(qk_norm="head", norms_per_layer=4, off_pattern="sliding"),
    "llama4_text": Arch(off_pattern="chunked", nope_full=True),
    "qwen2_moe": Arch(shared_gate=True),
    "gemma4_text": Arch(
        qk_norm="head", norms_per_layer=4, off_pattern="sliding", global_attention=True
    ),
    "qwen3_next": Arch(qk_norm="head", shared_gate=True, gated_query=True, off_pattern="linear"),
    "kimi_linear": Arch(
        correction_bias=True, off_pattern="linear", nope_full=True, kimi_delta=True
    ),
    "cohere": Arch(norms_per_layer=1),
    "cohere2": Arch(norms_per_layer=1, off_pattern="sliding"),
    "deepseek_v32": Arch(correction_bias=True, indexer=True),
    "glm_moe_dsa": Arch(correction_bias=True, indexer=True),
}


def arch_of(model: ModelConfig) -> Arch | None:
    """The additions of the model's family, or None for a base-layout model."""
    return ARCHS.get(model.model_type)


@lru_cache(maxsize=512)
def layer_pattern(model: ModelConfig) -> LayerPattern:
    """The model's per-layer kinds, from its fields.

    Without ``full_attention_interval`` every layer is alike: sliding when the model
    has a ``sliding_window``, chunked with an ``attention_chunk_size``, else full (MLA
    for an MLA model). With it, layers ``k, 2k, ...`` (1-based) are full and the others
    sliding or chunked.
    """
    arch = arch_of(model) or Arch()
    n = model.num_hidden_layers
    interval = getattr(model, "full_attention_interval", None)
    chunk = getattr(model, "attention_chunk_size", None)
    own = "dsa" if model.index_topk is not None else ("mla" if model.is_mla else "full")
    if getattr(model, "linear_num_value_heads", None) is not None:
        off = LayerKind("linear")
    elif model.sliding_window is not None:
        off = LayerKind("sliding", window=model.sliding_window)
    elif chunk is not None:
        off = LayerKind("chunked", window=chunk)
    else:
        off = LayerKind(own)
    full = LayerKind(own, rope=not arch.nope_full)
    listed = set(getattr(model, "full_attention_layers", ()) or ())
    layers = []
    for i in range(n):
        attn = (
            full
            if (i + 1 in listed if listed else interval is not None and (i + 1) % interval == 0)
            else off
        )
        ffn = "moe" if model.is_moe_layer(i) else "dense"
        layers.append(LayerKind(attn.attention, ffn=ffn, window=attn.window, rope=attn.rope))
    return LayerPattern(tuple(layers))


def kind_model(model: ModelConfig, kind: LayerKind) -> ModelConfig:
    """The model as if every layer were of ``kind``: its window or chunk, and a Gemma 4
    full layer's own head width and KV heads (``attention_k_eq_v`` kept only there)."""
    changes: dict[str, Any] = dict(
        full_attention_interval=None,
        full_attention_layers=(),
        sliding_window=kind.window if kind.attention == "sliding" else None,
        attention_chunk_size=kind.window if kind.attention == "chunked" else None,
    )
    if (model.global_head_dim is not None or model.attention_k_eq_v) and not model.is_mla:
        full = kind.attention == "full"
        changes.update(global_head_dim=None, num_global_key_value_heads=None)
        changes["attention_k_eq_v"] = full and model.attention_k_eq_v
        if full:
            changes["head_dim"] = model.global_head_dim or model.head_dim
            if model.attention_k_eq_v and model.num_global_key_value_heads:
                changes["num_key_value_heads"] = model.num_global_key_value_heads
    return model.with_changes(**changes)


def _k_eq_v(cost: Any) -> Any:
    """A layer cost whose key projection also serves as the value (``attention_k_eq_v``):
    the ``kv_proj`` GEMM makes K only (half its FLOPs, weights and output); the cache
    still receives K and V."""
    from dataclasses import replace

    ops, saved = [], 0
    for op in cost.ops:
        if op.name == "kv_proj":
            written = op.bytes_written - op.cache_bytes_written
            saved = op.weight_bytes - op.weight_bytes // 2
            g, m, n, k = op.shape
            op = replace(
                op,
                flops=op.flops // 2,
                bytes_read=op.bytes_read - saved,
                bytes_written=op.bytes_written - written // 2,
                weight_bytes=op.weight_bytes - saved,
                shape=(g, m, n // 2, k),
            )
        ops.append(op)
    stage = dict(cost.stage_flops)
    stage["kv_proj"] = sum(cost.layers * o.flops for o in ops if o.stage == "kv_proj")
    return replace(
        cost, ops=tuple(ops), stage_flops=stage, fused_layer_bytes=cost.fused_layer_bytes - saved
    )


def _gemma4_layer(m: ModelConfig, i: int, p: str) -> list[Tensor]:
    """One Gemma 4 decoder layer (Hugging Face names); experts stacked ``[E, out, in]``."""
    d, n_h = m.hidden_size, m.num_attention_heads
    kind = layer_pattern(m).layers[i]
    full = kind.attention == "full"
    k_eq_v = full and m.attention_k_eq_v
    d_h = (m.global_head_dim or m.head_dim) if full else m.head_dim
    n_kv = m.num_global_key_value_heads if k_eq_v and m.num_global_key_value_heads else None
    n_kv = n_kv or m.num_key_value_heads
    a = f"{p}.self_attn"
    if m.is_mla:  # an MLA equivalent of the model (mlacalc.models.variants)
        out = _mla_tensors(m, arch_of(m) or Arch(), p)
    else:
        out = [
            Tensor(f"{a}.q_proj.weight", (n_h * d_h, d), "linear"),
            Tensor(f"{a}.k_proj.weight", (n_kv * d_h, d), "linear"),
        ]
        if not k_eq_v:
            out.append(Tensor(f"{a}.v_proj.weight", (n_kv * d_h, d), "linear"))
        out.append(Tensor(f"{a}.o_proj.weight", (d, n_h * d_h), "linear"))
        if m.attention_bias:
            out += [
                Tensor(f"{a}.q_proj.bias", (n_h * d_h,)),
                Tensor(f"{a}.k_proj.bias", (n_kv * d_h,)),
            ]
            if not k_eq_v:
                out.append(Tensor(f"{a}.v_proj.bias", (n_kv * d_h,)))
            out.append(Tensor(f"{a}.o_proj.bias", (d,)))
        out += [Tensor(f"{a}.q_norm.weight", (d_h,)), Tensor(f"{a}.k_norm.weight", (d_h,))]
    moe = m.is_moe_layer(i)
    width = m.n_shared_experts * m.moe_intermediate_size if moe else m.intermediate_size
    out += _mlp(f"{p}.mlp", d, width)
    norms = [
        "input_layernorm",
        "post_attention_layernorm",
        "pre_feedforward_layernorm",
        "post_feedforward_layernorm",
    ]
    if moe:
        e, w = m.n_routed_experts, m.moe_intermediate_size
        out += [
            Tensor(f"{p}.router.proj.weight", (e, d)),
            Tensor(f"{p}.router.scale", (d,)),
            Tensor(f"{p}.router.per_expert_scale", (e,)),
            Tensor(f"{p}.experts.gate_up_proj", (e, 2 * w, d), "experts"),
            Tensor(f"{p}.experts.down_proj", (e, d, w), "experts"),
        ]
        norms += [
            "post_feedforward_layernorm_1",
            "post_feedforward_layernorm_2",
            "pre_feedforward_layernorm_2",
        ]
    out += [Tensor(f"{p}.{n}.weight", (d,)) for n in norms]
    out.append(Tensor(f"{p}.layer_scalar", (1,)))
    return out


def _mla_tensors(m: ModelConfig, arch: Arch, p: str) -> list[Tensor]:
    """MLA projections (DeepSeek-V3 names), and a DSA layer's indexer."""
    d, n_h, a = m.hidden_size, m.num_attention_heads, f"{p}.self_attn"
    qk = m.qk_nope_head_dim + m.qk_rope_head_dim
    bias = m.attention_bias
    out = []
    if m.q_lora_rank:
        out += [
            Tensor(f"{a}.q_a_proj.weight", (m.q_lora_rank, d), "linear"),
            Tensor(f"{a}.q_a_layernorm.weight", (m.q_lora_rank,)),
            Tensor(f"{a}.q_b_proj.weight", (n_h * qk, m.q_lora_rank), "linear"),
        ]
        if bias:
            out.append(Tensor(f"{a}.q_a_proj.bias", (m.q_lora_rank,)))
    else:
        out.append(Tensor(f"{a}.q_proj.weight", (n_h * qk, d), "linear"))
    out += [
        Tensor(
            f"{a}.kv_a_proj_with_mqa.weight", (m.kv_lora_rank + m.qk_rope_head_dim, d), "linear"
        ),
        Tensor(f"{a}.kv_a_layernorm.weight", (m.kv_lora_rank,)),
        Tensor(
            f"{a}.kv_b_proj.weight",
            (n_h * (m.qk_nope_head_dim + m.v_head_dim), m.kv_lora_rank),
            "linear",
        ),
        Tensor(f"{a}.o_proj.weight", (d, n_h * m.v_head_dim), "linear"),
    ]
    if bias:
        out += [
            Tensor(f"{a}.kv_a_proj_with_mqa.bias", (m.kv_lora_rank + m.qk_rope_head_dim,)),
            Tensor(f"{a}.o_proj.bias", (d,)),
        ]
    if arch.indexer:
        heads, width = m.index_n_heads, m.index_head_dim
        source = m.q_lora_rank or d
        out += [
            Tensor(f"{a}.indexer.wq_b.weight", (heads * width, source), "linear"),
            Tensor(f"{a}.indexer.wk.weight", (width, d), "linear"),
            Tensor(f"{a}.indexer.k_norm.weight", (width,)),
            Tensor(f"{a}.indexer.k_norm.bias", (width,)),
            Tensor(f"{a}.indexer.weights_proj.weight", (heads, d), "linear"),
        ]
    return out


def _attention_tensors(m: ModelConfig, arch: Arch, p: str) -> list[Tensor]:
    if m.is_mla:
        return _mla_tensors(m, arch, p)
    d, n_h, n_kv, d_h = m.hidden_size, m.num_attention_heads, m.num_key_value_heads, m.head_dim
    qkv_bias = m.attention_bias or m.qkv_bias
    out = [
        Tensor(f"{p}.self_attn.q_proj.weight", (n_h * d_h * (1 + arch.gated_query), d), "linear"),
        Tensor(f"{p}.self_attn.k_proj.weight", (n_kv * d_h, d), "linear"),
        Tensor(f"{p}.self_attn.v_proj.weight", (n_kv * d_h, d), "linear"),
        Tensor(f"{p}.self_attn.o_proj.weight", (d, n_h * d_h), "linear"),
    ]
    if qkv_bias:
        out += [
            Tensor(f"{p}.self_attn.q_proj.bias", (n_h * d_h * (1 + arch.gated_query),)),
            Tensor(f"{p}.self_attn.k_proj.bias", (n_kv * d_h,)),
            Tensor(f"{p}.self_attn.v_proj.bias", (n_kv * d_h,)),
        ]
    if m.attention_bias:
        out.append(Tensor(f"{p}.self_attn.o_proj.bias", (d,)))
    if arch.qk_norm == "head":
        out += [
            Tensor(f"{p}.self_attn.q_norm.weight", (d_h,)),
            Tensor(f"{p}.self_attn.k_norm.weight", (d_h,)),
        ]
    elif arch.qk_norm == "full":
        out += [
            Tensor(f"{p}.self_attn.q_norm.weight", (n_h * d_h,)),
            Tensor(f"{p}.self_attn.k_norm.weight", (n_kv * d_h,)),
        ]
    if arch.sinks:
        out.append(Tensor(f"{p}.self_attn.sinks", (n_h,)))
    return out


def _mlp(p: str, d: int, width: int, bias: bool = False) -> list[Tensor]:
    out = [
        Tensor(f"{p}.gate_proj.weight", (width, d), "linear"),
        Tensor(f"{p}.up_proj.weight", (width, d), "linear"),
        Tensor(f"{p}.down_proj.weight", (d, width), "linear"),
    ]
    if bias:
        out += [
            Tensor(f"{p}.gate_proj.bias", (width,)),
            Tensor(f"{p}.up_proj.bias", (width,)),
            Tensor(f"{p}.down_proj.bias", (d,)),
        ]
    return out


def _moe(m: ModelConfig, arch: Arch, p: str) -> list[Tensor]:
    d, e, width = m.hidden_size, m.n_routed_experts, m.moe_intermediate_size
    out = [
        Tensor(f"{p}.mlp.experts.gate_proj", (e, width, d), "experts"),
        Tensor(f"{p}.mlp.experts.up_proj", (e, width, d), "experts"),
        Tensor(f"{p}.mlp.experts.down_proj", (e, d, width), "experts"),
    ]
    if arch.expert_bias:
        out += [
            Tensor(f"{p}.mlp.experts.gate_up_proj_bias", (e, 2 * width), "expert_bias"),
            Tensor(f"{p}.mlp.experts.down_proj_bias", (e, d), "expert_bias"),
        ]
    out.append(Tensor(f"{p}.mlp.gate.weight", (e, d)))
    if arch.router_bias:
        out.append(Tensor(f"{p}.mlp.gate.bias", (e,)))
    if arch.correction_bias or m.topk_method == "noaux_tc":
        out.append(Tensor(f"{p}.mlp.gate.e_score_correction_bias", (e,)))
    if m.n_shared_experts:
        out += _mlp(f"{p}.mlp.shared_experts", d, m.n_shared_experts * width)
    if arch.shared_gate:
        out.append(Tensor(f"{p}.mlp.shared_expert_gate.weight", (1, d)))
    return out


def _linear_tensors(m: ModelConfig, p: str) -> list[Tensor]:
    """A Gated DeltaNet layer (Qwen3-Next names)."""
    d, a = m.hidden_size, f"{p}.linear_attn"
    hk, hv = m.linear_num_key_heads, m.linear_num_value_heads
    dk, dv = m.linear_key_head_dim, m.linear_value_head_dim
    conv = 2 * hk * dk + hv * dv
    return [
        Tensor(f"{a}.in_proj_qkvz.weight", (2 * hk * dk + 2 * hv * dv, d), "linear"),
        Tensor(f"{a}.in_proj_ba.weight", (2 * hv, d), "linear"),
        Tensor(f"{a}.conv1d.weight", (conv, 1, m.linear_conv_kernel_dim)),
        Tensor(f"{a}.dt_bias", (hv,)),
        Tensor(f"{a}.A_log", (hv,)),
        Tensor(f"{a}.norm.weight", (dv,)),
        Tensor(f"{a}.out_proj.weight", (d, hv * dv), "linear"),
    ]


def _kda_tensors(m: ModelConfig, p: str) -> list[Tensor]:
    """A Kimi Delta Attention layer (Kimi Linear names): ``H`` heads of ``D``."""
    d, a = m.hidden_size, f"{p}.self_attn"
    h, w = m.linear_num_value_heads, m.linear_value_head_dim
    return [
        Tensor(f"{a}.q_proj.weight", (h * w, d), "linear"),
        Tensor(f"{a}.k_proj.weight", (h * w, d), "linear"),
        Tensor(f"{a}.v_proj.weight", (h * w, d), "linear"),
        Tensor(f"{a}.conv1d.weight", (3 * h * w, 1, m.linear_conv_kernel_dim)),
        Tensor(f"{a}.forget_gate.f_a_proj.weight", (w, d), "linear"),
        Tensor(f"{a}.forget_gate.f_b_proj.weight", (h * w, w), "linear"),
        Tensor(f"{a}.forget_gate.dt_bias", (h * w,)),
        Tensor(f"{a}.forget_gate.A_log", (1, 1, h, 1)),
        Tensor(f"{a}.b_proj.weight", (h, d), "linear"),
        Tensor(f"{a}.g_a_proj.weight", (w, d), "linear"),
        Tensor(f"{a}.g_b_proj.weight", (h * w, w), "linear"),
        Tensor(f"{a}.o_norm.weight", (w,)),
        Tensor(f"{a}.o_proj.weight", (d, h * w), "linear"),
    ]


def linear_state_bytes(model: ModelConfig, kv_bytes: int, state_bytes: int = 4) -> int:
    """Bytes one linear-attention layer keeps per sequence: the convolution window of
    ``linear_conv_kernel_dim`` columns over q, k and v (``kv_bytes`` each, as the Hugging
    Face cache holds it) and one ``key x value`` recurrent state per value head (float32)."""
    m = model
    conv = (
        2 * m.linear_num_key_heads * m.linear_key_head_dim
        + m.linear_num_value_heads * m.linear_value_head_dim
    ) * m.linear_conv_kernel_dim
    state = m.linear_num_value_heads * m.linear_key_head_dim * m.linear_value_head_dim
    return conv * kv_bytes + state * state_bytes


def _layer(m: ModelConfig, arch: Arch, i: int, prefix: str = "model.layers") -> list[Tensor]:
    p, d = f"{prefix}.{i}", m.hidden_size
    if arch.global_attention:
        return _gemma4_layer(m, i, p)
    linear = (  # MTP layers beyond the main model are full layers
        arch.off_pattern == "linear"
        and i < m.num_hidden_layers
        and layer_pattern(m).layers[i].attention == "linear"
    )
    if linear:
        out = _kda_tensors(m, p) if arch.kimi_delta else _linear_tensors(m, p)
    else:
        out = _attention_tensors(m, arch, p)
    if m.is_moe_layer(i):
        out += _moe(m, arch, p)
    else:
        out += _mlp(f"{p}.mlp", d, m.intermediate_size, m.mlp_bias)
    names = (
        "input_layernorm",
        "post_attention_layernorm",
        "pre_feedforward_layernorm",
        "post_feedforward_layernorm",
    )[: arch.norms_per_layer]
    out += [Tensor(f"{p}.{n}.weight", (d,)) for n in names]
    return out


def tensors(model: ModelConfig, include_mtp: bool = False) -> list[Tensor]:
    """The weight tensors of the model's checkpoint (experts stacked ``[E, out, in]``)."""
    m, arch = model, arch_of(model) or Arch()
    d, v = m.hidden_size, m.vocab_size
    out = [Tensor("model.embed_tokens.weight", (v, d))]
    for i in range(m.num_hidden_layers):
        out += _layer(m, arch, i)
    out.append(Tensor("model.norm.weight", (d,)))
    if not m.tie_word_embeddings:
        out.append(Tensor("lm_head.weight", (v, d)))
    if include_mtp:
        for j in range(m.num_nextn_predict_layers):
            p = f"model.layers.{m.num_hidden_layers + j}"
            out += [
                Tensor(f"{p}.enorm.weight", (d,)),
                Tensor(f"{p}.hnorm.weight", (d,)),
                Tensor(f"{p}.eh_proj.weight", (d, 2 * d), "linear"),
                Tensor(f"{p}.shared_head.norm.weight", (d,)),
            ]
            out += _layer(m, arch, m.num_hidden_layers + j)
    return out


def _part(name: str) -> str:
    if name.startswith("model.embed_tokens"):
        return "embedding"
    if name.startswith("lm_head"):
        return "lm_head"
    if ".self_attn." in name or ".linear_attn." in name:
        return "attention"
    if "norm" in name or name.endswith(".layer_scalar"):
        return "norms"
    if ".experts." in name:
        return "moe_routed_experts"
    if ".mlp.shared_experts." in name:
        return "moe_shared_experts"
    if ".mlp.gate." in name or ".router." in name or ".mlp.shared_expert_gate." in name:
        return "moe_router"  # the shared expert's gate: one row scoring each token, a router
    return "dense_ffn"


def param_counts(model: ModelConfig) -> ParamCounts:
    """Exact parameter counts of a model of one of these families (see the module docs)."""
    from mlacalc.cost.params import ParamCounts

    m = model
    parts = dict.fromkeys(
        (
            "embedding",
            "position_embedding",
            "lm_head",
            "attention",
            "dense_ffn",
            "moe_routed_experts",
            "moe_shared_experts",
            "moe_router",
            "norms",
        ),
        0,
    )
    inactive = 0
    for t in tensors(m):
        parts[_part(t.name)] += t.numel
        if t.role in ("experts", "expert_bias"):
            inactive += t.numel // m.n_routed_experts * (m.n_routed_experts - m.num_experts_per_tok)
    total = sum(parts.values())
    lookups = parts["embedding"] if parts["lm_head"] else 0
    arch = arch_of(m) or Arch()
    first = _layer(m, arch, 0, "x") if arch.global_attention else _attention_tensors(m, arch, "x")
    attn = {  # Gemma 4: its first (sliding) layer's
        t.name.rsplit(".self_attn.", 1)[1].removesuffix(".weight"): t.numel
        for t in first
        if ".self_attn." in t.name
    }
    mtp = mtp_active = 0
    if m.num_nextn_predict_layers:
        extra = tensors(m, include_mtp=True)[len(tensors(m)) :]
        mtp = sum(t.numel for t in extra)
        unused = sum(
            t.numel // m.n_routed_experts * (m.n_routed_experts - m.num_experts_per_tok)
            for t in extra
            if t.role in ("experts", "expert_bias")
        )
        mtp_active = mtp - unused
    return ParamCounts(
        model=m.name,
        total=total,
        active=total - lookups - inactive,
        attention_per_layer=sum(attn.values()),
        embedding=parts["embedding"],
        mtp=mtp,
        mtp_active=mtp_active,
        breakdown=parts,
        attention_breakdown=attn,
    )


def describe(model: ModelConfig) -> dict[str, Any]:
    """The pattern of a model for reports: summary line and layers by kind."""
    return layer_pattern(model).to_dict()


def kv_by_kind(
    model: ModelConfig,
    seq_len: int,
    batch: int,
    row_bytes: int,
    layers: int,
    layout: Any = None,
) -> tuple[tuple[str, int, int, int], ...]:
    """``(label, layers, tokens kept per layer, bytes)`` per kind of layer, the product's
    convention (a sliding or chunked layer keeps ``min(S, W)``); MTP layers beyond the
    main model are like the main model's full layers. A DSA layer's row adds the
    indexer key in the cache layout (``index_head_dim`` values; an 8-bit layout adds a
    float32 scale per 128 values, as DeepSeek's indexer cache keeps it). A Gemma 4 full
    layer's row is its own: K and V of ``num_global_key_value_heads`` heads of
    ``global_head_dim`` (two tensors even with ``attention_k_eq_v``)."""
    out: dict[str, list[int]] = {}
    full_row = row_bytes
    if (model.global_head_dim is not None or model.attention_k_eq_v) and not model.is_mla:
        from mlacalc.words.dtypes import resolve_kv_layout

        sub = kind_model(model, LayerKind("full"))
        elements = 2 * sub.num_key_value_heads * sub.head_dim
        full_row = resolve_kv_layout("bf16" if layout is None else layout).row_bytes(elements)
    pattern = layer_pattern(model)
    kinds = [(k.label, k.tokens_kept(seq_len)) for k in pattern.layers]
    full = next((k.label for k in pattern.layers if k.window is None), "full")
    kinds += [(full, seq_len)] * (layers - len(kinds))
    own_row = {k.label: full_row for k in pattern.layers if k.attention == "full"}
    for label, tokens in kinds:
        entry = out.setdefault(label, [0, tokens])
        entry[0] += 1
    dsa_row = row_bytes + (indexer_row_bytes(model, layout) if model.index_topk else 0)
    if "linear" in out:
        from mlacalc.words.dtypes import resolve_kv_layout

        element = resolve_kv_layout("bf16" if layout is None else layout).row_bytes(1)
        state = linear_state_bytes(model, element)
    return tuple(
        (label, n, t, n * batch * state)
        if label == "linear"
        else (
            label,
            n,
            t,
            n * batch * t * (dsa_row if label == "dsa" else own_row.get(label, row_bytes)),
        )
        for label, (n, t) in out.items()
    )


def indexer_row_bytes(model: ModelConfig, layout: Any = None) -> int:
    """Bytes of one token's indexer key in one DSA layer (bf16 when no layout is given)."""
    from mlacalc.words.dtypes import resolve_kv_layout

    layout = resolve_kv_layout("bf16" if layout is None else layout)
    if layout.bits == 8 and not layout.scale_group:
        layout = resolve_kv_layout("fp8_ds_mla")  # fp8 keys with a float32 scale per 128
    return layout.row_bytes(model.index_head_dim)


def indexer_cost(
    model: ModelConfig,
    q: int,
    seq_len: int,
    batch: int,
    causal: bool,
    layout: Any,
    weight_bits: int,
) -> tuple[dict[str, int], int]:
    """Matmul FLOPs by stage and fused bytes of one DSA layer's indexer for one step.

    ``q`` new tokens project an indexer query per head from the query latent
    (``wq_b``, stage ``q_proj``) and head weights from the hidden state
    (``weights_proj``, ``q_proj``), a key from the hidden state (``wk``, ``kv_proj``),
    and score every cached key on every indexer head (``core``: ``2 n_i d_i`` per
    (query, key) pair, all keys, causal or not as asked). Bytes: its weights once, the
    indexer keys of the ``seq_len`` tokens read and of the new tokens written.
    """
    from mlacalc.cost.engine import attended_pairs

    d, heads, width = model.hidden_size, model.index_n_heads, model.index_head_dim
    source = model.q_lora_rank or d
    tokens = batch * q
    flops = {
        "q_proj": 2 * tokens * (source * heads * width + d * heads),
        "kv_proj": 2 * tokens * d * width,
        "core": 2 * batch * heads * width * attended_pairs(q, seq_len, None, causal),
    }
    weights = (source * heads * width + d * width + d * heads) * weight_bits // 8 + 2 * width * 2
    row = indexer_row_bytes(model, layout)
    return flops, weights + batch * (seq_len + q) * row


def chunked_keys_and_pairs(q: int, seq_len: int, chunk: int, causal: bool) -> tuple[int, int]:
    """Keys read and (query, key) pairs per sequence and head of a chunked layer.

    The new tokens are positions ``S-q+1 .. S`` (1-based); position ``j`` attends the
    keys of its own chunk up to itself, ``(j - 1) % C + 1`` of them. Non-causal, each
    chunk the new tokens touch is a dense block: its new tokens times its keys up to
    the last new one. Keys read are those of the chunks touched.

    Examples
    --------
    >>> chunked_keys_and_pairs(1, 10, 4, False), chunked_keys_and_pairs(10, 10, 4, True)
    ((2, 2), (10, 23))
    """
    lo = seq_len - q + 1
    keys = seq_len - (lo - 1) // chunk * chunk
    pairs = 0
    start = (lo - 1) // chunk * chunk  # keys before the first touched chunk
    while start < seq_len:
        a, b = max(lo, start + 1), min(seq_len, start + chunk)
        if causal:
            pairs += (a - start + b - start) * (b - a + 1) // 2
        else:
            pairs += (b - a + 1) * (b - start)
        start += chunk
    return keys, pairs


def pattern_cost(
    model: ModelConfig,
    phase: str,
    seq_len: int,
    batch: int,
    q_len: int | None,
    impl: str | None,
    causal: bool,
    kv_dtype: Any,
    weight_dtype: str | None,
    act_dtype: str,
) -> Any:
    """The attention cost of a model whose layers differ: one cost per kind, summed."""
    from dataclasses import replace

    from mlacalc.cost.engine import STAGES, attention_cost

    groups: dict[str, tuple[LayerKind, int]] = {}
    for k in layer_pattern(model).layers:
        kind, n = groups.get(k.label, (k, 0))
        groups[k.label] = (kind, n + 1)
    order = sorted(
        groups.items(),
        key=lambda item: (item[1][0].window is not None, item[1][0].attention == "linear"),
    )
    costs, labels = [], []
    for label, (kind, n) in order:
        if kind.attention == "linear":  # a fixed state per sequence (mlacalc.cost.linear)
            from mlacalc.cost.linear import linear_group_cost

            args = (phase, seq_len, batch, q_len, causal, kv_dtype, weight_dtype, act_dtype)
            costs.append(linear_group_cost(model, n, *args))
            labels.append(label)
            continue
        sub = kind_model(model, kind).with_changes(num_hidden_layers=n)
        k_eq_v = sub.attention_k_eq_v
        if k_eq_v:
            sub = sub.with_changes(attention_k_eq_v=False)
        cost = attention_cost(
            sub, phase, seq_len, batch, q_len, impl, causal, kv_dtype, weight_dtype, act_dtype
        )
        if not kind.rope:  # a layer without rotary embedding runs no RoPE kernel
            cost = replace(cost, ops=tuple(o for o in cost.ops if o.name != "rope"))
        if (arch_of(model) or Arch()).gated_query and not sub.is_mla:
            from mlacalc.cost.linear import gated_query_cost

            cost = gated_query_cost(cost, sub, weight_dtype, act_dtype)
        costs.append(_k_eq_v(cost) if k_eq_v else cost)
        labels.append(label)
    stage = {s: sum(c.stage_flops.get(s, 0) for c in costs) for s in STAGES}
    return replace(
        costs[0],
        model=model.name,
        layers=model.num_hidden_layers,
        stage_flops=stage,
        groups=tuple(costs),
        group_labels=tuple(labels),
    )
