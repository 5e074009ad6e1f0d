"""The weight tensors of a model's checkpoint, by the parameter layout of its family.

:func:`tensors` lists every weight tensor (name, shape, role) as the reference implementation
holds it (experts stacked ``[E, out, in]``); :func:`part_of` names the part of the model a
tensor belongs to (embedding, attention, dense FFN, routed or shared experts, router, norms,
output head). Parameter counts (:mod:`mlacalc.cost.families`) and quantized checkpoint bytes
(:mod:`mlacalc.cost.quant`) both sum over this list.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from mlacalc.models import deepseek_v4
from mlacalc.models.architecture import Arch, arch_of, kind_model, layer_pattern
from mlacalc.models.patterns import LayerKind

if TYPE_CHECKING:
    from mlacalc.models.schema import ModelConfig

__all__ = ["Tensor", "block_width", "first_attention_tensors", "part_of", "tensors"]


@dataclass(frozen=True)
class Tensor:
    """One weight tensor of a checkpoint.

    ``role`` is ``"linear"`` for a projection matrix ``[out, in]``, ``"experts"`` for
    ``E`` stacked expert matrices ``[E, out, in]``, ``"int64"`` for an integer buffer the
    checkpoint saves (DeepSeek-V4's ``tid2eid``), and ``"other"`` for embeddings, norms,
    biases, router weights and anything else that is never quantized.
    """

    name: str
    shape: tuple[int, ...]
    role: str = "other"

    @property
    def numel(self) -> int:
        return math.prod(self.shape)


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
    layer = int(p.rsplit(".", 1)[-1]) + 1 if p.rsplit(".", 1)[-1].isdigit() else 0
    if arch.indexer and layer not in m.shared_indexer_layers:  # a shared layer has none
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


def _attention_tensors(m: ModelConfig, arch: Arch, p: str, sinks: bool = False) -> list[Tensor]:
    """One layer's attention; ``sinks`` adds a sink logit per head beside ``arch.sinks``, and a
    value width of its own (``v_head_dim`` without MLA) shapes ``v_proj`` and ``o_proj``."""
    if m.is_mla:
        return _mla_tensors(m, arch, p)
    d, n_h, n_kv, d_h = m.hidden_size, m.num_attention_heads, m.num_key_value_heads, m.head_dim
    d_v = m.v_head_dim or d_h
    qkv_bias = m.attention_bias or m.qkv_bias
    out = [
        Tensor(f"{p}.self_attn.q_proj.weight", (n_h * d_h * (1 + arch.gated_query), d), "linear"),
        Tensor(f"{p}.self_attn.k_proj.weight", (n_kv * d_h, d), "linear"),
        Tensor(f"{p}.self_attn.v_proj.weight", (n_kv * d_v, d), "linear"),
        Tensor(f"{p}.self_attn.o_proj.weight", (d, n_h * d_v), "linear"),
    ]
    if qkv_bias:
        out += [
            Tensor(f"{p}.self_attn.q_proj.bias", (n_h * d_h * (1 + arch.gated_query),)),
            Tensor(f"{p}.self_attn.k_proj.bias", (n_kv * d_h,)),
            Tensor(f"{p}.self_attn.v_proj.bias", (n_kv * d_v,)),
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
    if arch.sinks or sinks:
        out.append(Tensor(f"{p}.self_attn.sinks", (n_h,)))
    if arch.head_gate:
        out.append(Tensor(f"{p}.self_attn.g_proj.weight", (n_h, d), "linear"))
    layer = p.rsplit(".", 1)[-1]
    if m.sparse_block_size is not None and layer.isdigit() and m.is_sparse_layer(int(layer)):
        heads, width, a = m.sparse_index_heads, m.sparse_index_dim, f"{p}.self_attn.indexer"
        out += [  # MiniMax-M3's block-sparse indexer (its query and key, an RMSNorm on each)
            Tensor(f"{a}.q_proj.weight", (heads * width, d), "linear"),
            Tensor(f"{a}.k_proj.weight", (width, d), "linear"),
            Tensor(f"{a}.q_norm.weight", (width,)),
            Tensor(f"{a}.k_norm.weight", (width,)),
        ]
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
        shared = m.shared_intermediate_size or m.n_shared_experts * width
        out += _mlp(f"{p}.mlp.shared_experts", d, shared)
    if arch.shared_gate:
        out.append(Tensor(f"{p}.mlp.shared_expert_gate.weight", (1, d)))
    return out


def _linear_tensors(m: ModelConfig, p: str, split: bool = False) -> list[Tensor]:
    """A Gated DeltaNet layer (Qwen3-Next names; ``split``: Qwen3.5's, whose input projection
    is four matrices, the same rows)."""
    d, a = m.hidden_size, f"{p}.linear_attn"
    hk, hv = m.linear_num_key_heads, m.linear_num_value_heads
    dk, dv = m.linear_key_head_dim, m.linear_value_head_dim
    conv = 2 * hk * dk + hv * dv
    if split:
        inputs = [
            Tensor(f"{a}.in_proj_qkv.weight", (conv, d), "linear"),
            Tensor(f"{a}.in_proj_z.weight", (hv * dv, d), "linear"),
            Tensor(f"{a}.in_proj_b.weight", (hv, d), "linear"),
            Tensor(f"{a}.in_proj_a.weight", (hv, d), "linear"),
        ]
    else:
        inputs = [
            Tensor(f"{a}.in_proj_qkvz.weight", (2 * hk * dk + 2 * hv * dv, d), "linear"),
            Tensor(f"{a}.in_proj_ba.weight", (2 * hv, d), "linear"),
        ]
    return [
        *inputs,
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


def mamba_tensors(m: ModelConfig, p: str) -> list[Tensor]:
    """A Mamba-2 mixer (names after Nemotron-H's ``mixer.``, under ``mamba.``): ``H`` heads of
    ``P``, inner width ``I = H P``, ``G`` groups of B and C of width ``N``; ``in_proj`` makes the
    gate (``I``), x, B and C (the convolution's ``I + 2 G N`` channels) and one step size per
    head; ``D``, ``A_log`` and ``dt_bias`` per head; a gated RMSNorm over ``I``; ``out_proj``."""
    d, a = m.hidden_size, f"{p}.mamba"
    inner = m.mamba_num_heads * m.mamba_head_dim
    conv = inner + 2 * m.mamba_n_groups * m.ssm_state_size
    proj = inner + conv + m.mamba_num_heads
    out = [Tensor(f"{a}.in_proj.weight", (proj, d), "linear")]
    if m.mamba_bias:
        out.append(Tensor(f"{a}.in_proj.bias", (proj,)))
    out.append(Tensor(f"{a}.conv1d.weight", (conv, 1, m.mamba_d_conv)))
    if m.mamba_conv_bias:
        out.append(Tensor(f"{a}.conv1d.bias", (conv,)))
    out += [Tensor(f"{a}.{n}", (m.mamba_num_heads,)) for n in ("dt_bias", "A_log", "D")]
    if m.mamba_gated_norm:
        out.append(Tensor(f"{a}.norm.weight", (inner,)))
    out.append(Tensor(f"{a}.out_proj.weight", (d, inner), "linear"))
    if m.mamba_bias:
        out.append(Tensor(f"{a}.out_proj.bias", (d,)))
    return out


def mamba1_tensors(m: ModelConfig, p: str) -> list[Tensor]:
    """A Mamba-1 mixer (Jamba's ``mamba.``): ``in_proj`` ``d -> 2 I``, the depthwise
    convolution over ``I``, ``x_proj`` ``I -> R + 2 N``, ``dt_proj`` ``R -> I`` with a bias,
    ``A_log`` ``I x N``, ``D``, the step size's, B's and C's RMSNorms, ``out_proj``."""
    d, a = m.hidden_size, f"{p}.mamba"
    i, n, r = m.mamba_inner_size, m.ssm_state_size, m.mamba_dt_rank
    out = [Tensor(f"{a}.in_proj.weight", (2 * i, d), "linear")]
    if m.mamba_bias:
        out.append(Tensor(f"{a}.in_proj.bias", (2 * i,)))
    out.append(Tensor(f"{a}.conv1d.weight", (i, 1, m.mamba_d_conv)))
    if m.mamba_conv_bias:
        out.append(Tensor(f"{a}.conv1d.bias", (i,)))
    out += [
        Tensor(f"{a}.x_proj.weight", (r + 2 * n, i), "linear"),
        Tensor(f"{a}.dt_proj.weight", (i, r), "linear"),
        Tensor(f"{a}.dt_proj.bias", (i,)),
        Tensor(f"{a}.A_log", (i, n)),
        Tensor(f"{a}.D", (i,)),
        Tensor(f"{a}.out_proj.weight", (d, i), "linear"),
        Tensor(f"{a}.dt_layernorm.weight", (r,)),
        Tensor(f"{a}.b_layernorm.weight", (n,)),
        Tensor(f"{a}.c_layernorm.weight", (n,)),
    ]
    if m.mamba_bias:
        out.append(Tensor(f"{a}.out_proj.bias", (d,)))
    return out


def _up_down(p: str, d: int, width: int, bias: bool) -> list[Tensor]:
    """An MLP of up and down only (Nemotron-H's relu2 MLP and shared expert)."""
    out = [
        Tensor(f"{p}.up_proj.weight", (width, d), "linear"),
        Tensor(f"{p}.down_proj.weight", (d, width), "linear"),
    ]
    if bias:
        out += [Tensor(f"{p}.up_proj.bias", (width,)), Tensor(f"{p}.down_proj.bias", (d,))]
    return out


def _latent_moe(m: ModelConfig, p: str) -> list[Tensor]:
    """Nemotron-H's MoE: ungated experts (up and down) in the latent width, the projections
    to and from it, a router with its correction bias, one ungated shared expert."""
    d, e, w = m.hidden_size, m.n_routed_experts, m.moe_intermediate_size
    width = m.moe_latent_size or d
    out = [
        Tensor(f"{p}.mlp.experts.up_proj", (e, w, width), "experts"),
        Tensor(f"{p}.mlp.experts.down_proj", (e, width, w), "experts"),
        Tensor(f"{p}.mlp.gate.weight", (e, d)),
        Tensor(f"{p}.mlp.gate.e_score_correction_bias", (e,)),
    ]
    shared = m.shared_intermediate_size or m.n_shared_experts * w
    out += _up_down(f"{p}.mlp.shared_experts", d, shared, m.mlp_bias)
    if m.moe_latent_size:
        out += [
            Tensor(f"{p}.mlp.fc1_latent_proj.weight", (width, d), "linear"),
            Tensor(f"{p}.mlp.fc2_latent_proj.weight", (d, width), "linear"),
        ]
        if m.mlp_bias:
            out += [
                Tensor(f"{p}.mlp.fc1_latent_proj.bias", (width,)),
                Tensor(f"{p}.mlp.fc2_latent_proj.bias", (d,)),
            ]
    return out


def _block(m: ModelConfig, arch: Arch, i: int, p: str) -> list[Tensor]:
    """One block of a one-mixer-per-layer model (``block_types``): its norm and mixer."""
    block = m.block_types[i]
    out = [Tensor(f"{p}.norm.weight", (m.hidden_size,))]
    if block == "mamba":
        return out + mamba_tensors(m, p)
    if block == "attention":
        return out + _attention_tensors(m, arch, p)
    if block == "moe":
        return out + _latent_moe(m, p)
    width = block_width(m, i)
    if arch.ungated_mlp:
        return out + _up_down(f"{p}.mlp", m.hidden_size, width, m.mlp_bias)
    return out + _mlp(f"{p}.mlp", m.hidden_size, width, m.mlp_bias)


def block_width(m: ModelConfig, i: int) -> int:
    """The FFN width of block ``i`` (an ``mlp`` block): its entry of ``block_widths``, else
    ``intermediate_size``."""
    if not m.block_widths:
        return m.intermediate_size
    return m.block_widths[m.block_types[:i].count("mlp")]


def _layer(m: ModelConfig, arch: Arch, i: int, prefix: str = "model.layers") -> list[Tensor]:
    p, d = f"{prefix}.{i}", m.hidden_size
    if m.block_types and i < m.num_hidden_layers:
        return _block(m, arch, i, p)
    if arch.global_attention:
        return _gemma4_layer(m, i, p)
    linear = (  # MTP layers beyond the main model are full layers
        arch.off_pattern == "linear"
        and i < m.num_hidden_layers
        and layer_pattern(m).layers[i].attention == "linear"
    )
    if linear:
        out = _kda_tensors(m, p) if arch.kimi_delta else _linear_tensors(m, p, arch.split_linear_in)
    elif arch.mamba and i < m.num_hidden_layers and layer_pattern(m).layers[i].attention == "mamba":
        out = mamba_tensors(m, p)
    elif (
        arch.mamba1 and i < m.num_hidden_layers and layer_pattern(m).layers[i].attention == "mamba1"
    ):
        out = mamba1_tensors(m, p)
    elif arch.parallel_mamba and m.mamba_num_heads and i < m.num_hidden_layers:  # side by side
        out = _attention_tensors(m, arch, p) + mamba_tensors(m, p)
    elif m.sliding_key_value_heads is not None or arch.sliding_sinks:  # MiMo-V2-Flash
        kind = layer_pattern(m).layers[i] if i < m.num_hidden_layers else LayerKind("full")
        sliding = kind.attention == "sliding"
        out = _attention_tensors(kind_model(m, kind), arch, p, sinks=arch.sliding_sinks and sliding)
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


def _v4_role(name: str, shape: tuple[int, ...]) -> str:
    """A DeepSeek-V4 tensor's role: the routed experts, a projection matrix, or other (norms,
    sinks, the compressors' position biases, the router and its tables, the mixers)."""
    if ".experts." in name:
        return "experts"
    if name.endswith(".tid2eid"):  # the hash layers' token-id table: an int64 buffer
        return "int64"
    other = (".gate.", "position_bias", "_hc.", "hc_head", "embed_tokens")
    if len(shape) == 2 and name.endswith(".weight") and not any(o in name for o in other):
        return "linear"
    return "other"


def _v4_tensors(m: ModelConfig) -> list[Tensor]:
    """DeepSeek-V4's checkpoint as its reference names it (:mod:`mlacalc.models.deepseek_v4`;
    the MTP layers are not built there and not listed)."""
    return [Tensor(n, s, _v4_role(n, s)) for n, s in deepseek_v4.tensors(deepseek_v4.config_of(m))]


def tensors(model: ModelConfig, include_mtp: bool = False) -> list[Tensor]:
    """The weight tensors of the model's checkpoint (experts stacked ``[E, out, in]``)."""
    m, arch = model, arch_of(model) or Arch()
    if arch.compressed:  # DeepSeek-V4: its own layers (compressed attention, mixers)
        return _v4_tensors(m)
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


def part_of(name: str) -> str:
    if name.startswith("model.embed_tokens"):
        return "embedding"
    if name.startswith("lm_head"):
        return "lm_head"
    if ".self_attn." in name or ".linear_attn." in name or ".mamba." in name:
        return "attention"
    if "_hc." in name or name.startswith("model.hc_head."):  # DeepSeek-V4's stream mixers
        return "hyper_connections"
    if "norm" in name or name.endswith(".layer_scalar"):
        return "norms"
    if ".experts." in name:
        return "moe_routed_experts"
    if ".mlp.shared_experts." in name:
        return "moe_shared_experts"
    if ".mlp.gate." in name or ".router." in name or ".mlp.shared_expert_gate." in name:
        return "moe_router"  # the shared expert's gate: one row scoring each token, a router
    return "dense_ffn"


def first_attention_tensors(model: ModelConfig) -> list[Tensor]:
    """The attention tensors of the model's first layer (a Gemma 4 model: its whole first,
    sliding, layer), prefixed ``x``: what ``attention_per_layer`` counts."""
    arch = arch_of(model) or Arch()
    if arch.compressed:  # DeepSeek-V4: its first layer's attention (and compressor, indexer)
        first = "model.layers.0.self_attn."
        return [replace(t, name="x.self_attn." + t.name[len(first) :])
                for t in _v4_tensors(model) if t.name.startswith(first)]  # fmt: skip
    if arch.global_attention:
        return _layer(model, arch, 0, "x")
    return _attention_tensors(model, arch, "x")
