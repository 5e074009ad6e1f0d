"""Whole-model parameter accounting, exactly as the reference implementations hold weights.

Counting rules (DESIGN.md): every weight and bias the Hugging Face implementation
of the architecture holds, norm weights included, MoE routers (and DeepSeek-V3's
``e_score_correction_bias``) included, a tied embedding counted once. MTP
(next-n prediction) modules are reported apart from the main model; they share the
embedding and the output head, so only their own weights are counted.

``active`` is what one token's matmuls touch: everything except the routed experts
it does not use and except the input embedding and position tables (lookups); the
output head counts, and a tied table counts because it does the output matmul.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .config import ModelConfig, load_model
from .dtypes import dtype_bits
from .engine import attention_params

__all__ = ["ParamCounts", "param_counts", "weight_bytes"]


@dataclass(frozen=True)
class ParamCounts:
    """Parameter counts of a model; every field is an exact integer.

    ``breakdown`` splits ``total`` (main model, MTP excluded) into its parts;
    ``attention_breakdown`` splits one layer's attention by projection.
    """

    model: str
    total: int
    active: int
    attention_per_layer: int
    embedding: int
    mtp: int
    mtp_active: int
    breakdown: dict[str, int] = field(default_factory=dict)
    attention_breakdown: dict[str, int] = field(default_factory=dict)

    @property
    def total_with_mtp(self) -> int:
        return self.total + self.mtp

    @property
    def non_embedding(self) -> int:
        """Total minus the input embedding and position tables (and an untied head)."""
        b = self.breakdown
        return self.total - b["embedding"] - b["position_embedding"] - b["lm_head"]

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "total": self.total,
            "active": self.active,
            "attention_per_layer": self.attention_per_layer,
            "embedding": self.embedding,
            "mtp": self.mtp,
            "mtp_active": self.mtp_active,
            "non_embedding": self.non_embedding,
            "breakdown": dict(self.breakdown),
            "attention_breakdown": dict(self.attention_breakdown),
        }


def _ffn_dense(m: ModelConfig, width: int) -> int:
    """A dense FFN of the given width."""
    d = m.hidden_size
    if m.family in ("gpt2", "falcon"):  # up, down (GELU), biases where present
        bias = (width + d) if m.bias else 0
        return 2 * d * width + bias
    bias = (2 * width + d) if m.mlp_bias else 0  # gate, up, down (SwiGLU / GeGLU)
    return 3 * d * width + bias


def _norms_per_layer(m: ModelConfig) -> int:
    d = m.hidden_size
    if m.family == "gpt2":
        return 2 * 2 * d  # ln_1, ln_2 with weight and bias
    if m.family == "falcon":
        count = 2 if (m.new_decoder_architecture or not m.parallel_attn) else 1
        return count * 2 * d  # LayerNorm weight and bias
    return 2 * d  # RMSNorm weights


def _final_norm(m: ModelConfig) -> int:
    return 2 * m.hidden_size if m.family in ("gpt2", "falcon") else m.hidden_size


def _moe_parts(m: ModelConfig) -> dict[str, int]:
    """Parameters of one MoE FFN, split into routed experts, shared experts and router."""
    d, width = m.hidden_size, m.moe_intermediate_size
    expert = 3 * d * width
    router = m.n_routed_experts * d
    if m.topk_method == "noaux_tc":
        router += m.n_routed_experts  # e_score_correction_bias
    return {
        "expert": expert,
        "routed": m.n_routed_experts * expert,
        "shared": 3 * d * width * m.n_shared_experts,
        "router": router,
    }


def param_counts(model: ModelConfig | str) -> ParamCounts:
    """Total, active and per-part parameter counts of a model.

    Examples
    --------
    >>> param_counts("gpt2").total
    124439808
    >>> param_counts("llama-2-7b").total
    6738415616
    """
    m = model if isinstance(model, ModelConfig) else load_model(model)
    d, V, L = m.hidden_size, m.vocab_size, m.num_hidden_layers
    attn = attention_params(m)
    attn_layer = sum(attn.values())
    embedding = V * d
    position = m.max_position_embeddings * d if m.family == "gpt2" else 0
    lm_head = 0 if m.tie_word_embeddings else V * d
    norms = L * _norms_per_layer(m) + _final_norm(m)

    dense_ffn = routed = shared = router = 0
    inactive = 0
    moe = _moe_parts(m) if m.is_moe else None
    for i in range(L):
        if m.is_moe_layer(i):
            routed += moe["routed"]
            shared += moe["shared"]
            router += moe["router"]
            inactive += (m.n_routed_experts - m.num_experts_per_tok) * moe["expert"]
        else:
            dense_ffn += _ffn_dense(m, m.intermediate_size)

    breakdown = {
        "embedding": embedding,
        "position_embedding": position,
        "lm_head": lm_head,
        "attention": L * attn_layer,
        "dense_ffn": dense_ffn,
        "moe_routed_experts": routed,
        "moe_shared_experts": shared,
        "moe_router": router,
        "norms": norms,
    }
    total = sum(breakdown.values())
    lookups = position + (embedding if lm_head else 0)  # a tied table does the output matmul
    active = total - lookups - inactive

    mtp = mtp_active = 0
    if m.num_nextn_predict_layers:
        # DeepSeek-V3 MTP module: enorm, hnorm, eh_proj (2d -> d), one MoE decoder layer,
        # shared_head.norm; embedding and output head are shared with the main model.
        layer = attn_layer + _norms_per_layer(m)
        layer += (
            (moe["routed"] + moe["shared"] + moe["router"])
            if moe
            else _ffn_dense(m, m.intermediate_size)
        )
        own = 2 * d + 2 * d * d + layer + d
        mtp = m.num_nextn_predict_layers * own
        per_active = own - (
            (m.n_routed_experts - m.num_experts_per_tok) * moe["expert"] if moe else 0
        )
        mtp_active = m.num_nextn_predict_layers * per_active
    return ParamCounts(
        model=m.name,
        total=total,
        active=active,
        attention_per_layer=attn_layer,
        embedding=embedding,
        mtp=mtp,
        mtp_active=mtp_active,
        breakdown=breakdown,
        attention_breakdown=attn,
    )


def weight_bytes(
    model: ModelConfig | str, dtype: str | None = None, include_mtp: bool = False
) -> int:
    """Bytes of the model's weights stored in ``dtype`` (default: the model's own)."""
    m = model if isinstance(model, ModelConfig) else load_model(model)
    counts = param_counts(m)
    n = counts.total + (counts.mtp if include_mtp else 0)
    return -(-n * dtype_bits(dtype or m.weights_dtype) // 8)
