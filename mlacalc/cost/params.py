"""Whole-model parameter accounting, exactly as the reference implementations hold weights.

Counting rules (``docs/conventions.md``, Parameters): every weight and bias the Hugging Face
implementation of the architecture holds, norm weights included, MoE routers (and DeepSeek-V3's
``e_score_correction_bias``) included, a tied embedding counted once. MTP (next-n prediction)
modules are reported apart from the main model; they share the embedding and the output head,
so only their own weights are counted.

``active`` is what one token's matmuls touch: everything except the routed experts
it does not use and except the input embedding and position tables (lookups); the
output head counts, and a tied table counts because it does the output matmul.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from functools import lru_cache
from typing import Any

from mlacalc.cost.engine import attention_params
from mlacalc.cost.quant import checkpoint_weights, format_bits, kept_components
from mlacalc.models.architecture import arch_of
from mlacalc.models.loading import ModelConfig, model_argument
from mlacalc.models.tensors import first_attention_tensors, part_of, tensors
from mlacalc.words import arguments as args
from mlacalc.words.dtypes import dtype_bits

__all__ = [
    "KEPT_BITS",
    "FFNShape",
    "KeptPart",
    "ParamCounts",
    "expert_shape",
    "ffn_shape",
    "keeps_16_bits",
    "kept_params",
    "kept_parts",
    "layer_norms",
    "param_counts",
    "router_params",
    "shared_experts_shape",
    "weight_bytes",
]


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


@dataclass(frozen=True)
class FFNShape:
    """Shape of one feed-forward block (a dense FFN, one routed expert, or the shared experts).

    Gated blocks (SwiGLU / GeGLU) hold ``gate`` and ``up`` (``hidden -> inter``) and ``down``
    (``inter -> hidden``); ungated ones (GPT-2, Falcon) ``up`` and ``down`` with a GELU between.
    """

    hidden: int
    inter: int
    gated: bool
    bias: bool

    @property
    def matrices(self) -> int:
        """Weight matrices of the block: 3 gated, 2 ungated."""
        return 3 if self.gated else 2

    @property
    def up_width(self) -> int:
        """Output width of the up projection (gate and up together when gated)."""
        return (self.matrices - 1) * self.inter

    @property
    def weights(self) -> int:
        """Weight-matrix elements of the block."""
        return self.matrices * self.hidden * self.inter

    @property
    def biases(self) -> int:
        """Bias elements of the block (0 without biases)."""
        return self.up_width + self.hidden if self.bias else 0

    @property
    def params(self) -> int:
        return self.weights + self.biases


def _ungated(m: ModelConfig) -> bool:
    """Whether the model's MLPs and experts are up and down only (Nemotron-H)."""
    arch = arch_of(m)
    return arch is not None and arch.ungated_mlp


def ffn_shape(m: ModelConfig, width: int | None = None) -> FFNShape:
    """The dense FFN of a model (``width`` defaults to ``intermediate_size``)."""
    gated = m.gated_mlp
    bias = bool(m.mlp_bias) if gated else bool(m.bias)
    return FFNShape(m.hidden_size, m.intermediate_size if width is None else width, gated, bias)


def expert_shape(m: ModelConfig) -> FFNShape:
    """One routed expert of a MoE layer (gated, no biases; Nemotron-H's up and down only, in
    its ``moe_latent_size``)."""
    width = m.moe_latent_size or m.hidden_size
    return FFNShape(width, m.moe_intermediate_size, not _ungated(m), False)


def shared_experts_shape(m: ModelConfig) -> FFNShape:
    """The shared experts of a MoE layer as one gated block of ``n_shared x moe_intermediate``
    (Nemotron-H's ungated, with the MLP's biases)."""
    ungated = _ungated(m)
    width = m.shared_intermediate_size or m.n_shared_experts * m.moe_intermediate_size
    return FFNShape(m.hidden_size, width, not ungated, ungated and m.mlp_bias)


def router_params(m: ModelConfig) -> int:
    """Parameters of a MoE router: the gate weight (and DeepSeek-V3's correction bias)."""
    router = m.n_routed_experts * m.hidden_size
    arch = arch_of(m)
    if m.topk_method == "noaux_tc" or (arch is not None and arch.mamba):  # Nemotron-H's
        router += m.n_routed_experts  # e_score_correction_bias
    return router


def layer_norms(m: ModelConfig) -> tuple[int, int]:
    """Norms of one decoder layer: how many, and the parameters of each."""
    d = m.hidden_size
    each = 2 * d if m.layer_norm else d  # a LayerNorm's weight and bias, an RMSNorm's weight
    if m.family == "falcon":  # one norm before a parallel block (Falcon-7B)
        return (2 if (m.new_decoder_architecture or not m.parallel_attn) else 1), each
    if m.block_types:
        return 1, each  # one norm before each block's one mixer (Nemotron-H)
    return 2, each


def _ffn_dense(m: ModelConfig, width: int) -> int:
    """A dense FFN of the given width."""
    return ffn_shape(m, width).params


def _norms_per_layer(m: ModelConfig) -> int:
    count, each = layer_norms(m)
    return count * each


def _final_norm(m: ModelConfig) -> int:
    return 2 * m.hidden_size if m.layer_norm else m.hidden_size


def _moe_parts(m: ModelConfig) -> dict[str, int]:
    """Parameters of one MoE FFN, split into routed experts, shared experts and router."""
    expert = expert_shape(m).params
    return {
        "expert": expert,
        "routed": m.n_routed_experts * expert,
        "shared": shared_experts_shape(m).params if m.n_shared_experts else 0,
        "router": router_params(m),
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
    m = model_argument(model)
    if arch_of(m) is not None:
        return tensor_param_counts(m)
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


#: the bits a norm's or a MoE router's weights keep under a narrower weight dtype (vLLM's and
#: SGLang's norms are plain bf16 parameters and their DeepSeek routers unquantized, from recall;
#: quantized checkpoints keep both bf16: :data:`mlacalc.cost.quant._NEVER`)
KEPT_BITS = 16


def keeps_16_bits(name: str) -> bool:
    """Whether the tensor ``name`` keeps :data:`KEPT_BITS` under a narrower weight dtype: a
    norm (a layer's, the final one, one inside attention such as MLA's ``q_a_layernorm`` or
    an MTP layer's ``enorm``) or a MoE router (its gate and correction bias)."""
    return part_of(name) in ("norms", "moe_router") or "norm" in name.rsplit(".", 2)[-2]


@lru_cache(maxsize=64)
def kept_params(model: ModelConfig, include_mtp: bool = False) -> int:
    """Parameters of the whole model that keep :data:`KEPT_BITS` under a narrower weight dtype
    (:func:`keeps_16_bits`): its norms and routers (``param_counts``' parts), the norms inside
    its attention layers and, with ``include_mtp``, its MTP layers' norms and router. One
    count for ``weight_bytes`` (report) and the planner's weights at one GPU."""
    b = param_counts(model).breakdown
    main = tensors(model)
    inside = sum(
        t.numel
        for t in main
        if part_of(t.name) == "attention" and ".layers." in t.name and keeps_16_bits(t.name)
    )
    mtp = 0
    if include_mtp and model.num_nextn_predict_layers:
        extra = tensors(model, include_mtp=True)[len(main) :]
        mtp = sum(t.numel for t in extra if keeps_16_bits(t.name))
    return b["norms"] + b["moe_router"] + inside + mtp


@dataclass(frozen=True)
class KeptPart:
    """Parameters a chosen weight dtype leaves at more bits: ``what`` they are, how many, and
    the bits each keeps."""

    what: str
    params: int
    bits: float

    @property
    def nbytes(self) -> Fraction:
        return Fraction(self.params) * Fraction(self.bits) / 8


def kept_parts(m: ModelConfig, dtype: str | None, include_mtp: bool = False) -> list[KeptPart]:
    """What a weight dtype narrower than the stored one leaves as it is, as the planner sizes
    a GPU's weights (:func:`mlacalc.serving.layout.weight_bytes_by_part` with
    :func:`mlacalc.cost.quant.kept_components`): the norms and MoE routers at
    :data:`KEPT_BITS` (:func:`kept_params`) under a dtype of fewer bits, and, where a dtype
    below 16 bits is asked, the embedding and the output head in the checkpoint's format where
    it has more bits (a quantization reaches the layers' linear weights only; a 16-bit dtype
    casts every tensor)."""
    bits = dtype_bits(dtype or m.weights_dtype)
    out = []
    if bits < KEPT_BITS:
        routers = param_counts(m).breakdown["moe_router"]
        what = "norms and MoE routers" if routers else "norms"
        out.append(KeptPart(what, kept_params(m, include_mtp), KEPT_BITS))
    if dtype is not None:
        kept = kept_components(m, dtype, {})
        b = param_counts(m).breakdown
        embedding = b["embedding"] + b["position_embedding"]
        if "embeddings" in kept and embedding:
            out.append(KeptPart("embedding", embedding, format_bits(kept["embeddings"])))
        if "head" in kept and b["lm_head"]:
            out.append(KeptPart("output head", b["lm_head"], format_bits(kept["head"])))
    return out


def weight_bytes(
    model: ModelConfig | str, dtype: str | None = None, include_mtp: bool = False
) -> int:
    """Bytes of the model's weights stored in ``dtype``.

    Without ``dtype``, the checkpoint's own bytes: for a model that declares its
    ``quantization_config``, the exact bytes of its quantized tensors with their scales and
    of the tensors it keeps in bf16 (:func:`mlacalc.cost.quant.checkpoint_weights`); otherwise
    every parameter in ``weights_dtype``. A dtype sizes every parameter in it but those it
    leaves as they are (:func:`kept_parts`: the norms and MoE routers at 16 bits, the
    embedding and head as stored under a dtype below 16 bits), the planner's rule: report and
    plan say one total."""
    m = model_argument(model)
    dtype = args.dtype("dtype", dtype, allow_none=True)
    include_mtp = args.flag("include_mtp", include_mtp)
    if dtype is None and m.quantization_config is not None:
        return checkpoint_weights(m, include_mtp).total_bytes
    counts = param_counts(m)
    n = counts.total + (counts.mtp if include_mtp else 0)
    bits = dtype_bits(dtype or m.weights_dtype)
    kept = kept_parts(m, dtype, include_mtp)
    rest = n - sum(k.params for k in kept)
    return math.ceil(Fraction(rest * bits, 8) + sum((k.nbytes for k in kept), Fraction(0)))


@lru_cache(maxsize=256)
def tensor_param_counts(model: ModelConfig) -> ParamCounts:
    """Exact parameter counts of a model of a family with its own layers
    (:mod:`mlacalc.models.architecture`), tensor by tensor (once per model: models are
    frozen and hashable, and a report asks several times)."""
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
    main = tensors(m)
    for t in main:
        part = part_of(t.name)  # a part of one family only (hyper_connections) when present
        parts[part] = parts.get(part, 0) + t.numel
        if t.role in ("experts", "expert_bias"):
            inactive += t.numel // m.n_routed_experts * (m.n_routed_experts - m.num_experts_per_tok)
    total = sum(parts.values())
    lookups = parts["embedding"] if parts["lm_head"] else 0
    attn = {  # Gemma 4: its first (sliding) layer's
        t.name.rsplit(".self_attn.", 1)[1].removesuffix(".weight"): t.numel
        for t in first_attention_tensors(m)
        if ".self_attn." in t.name
    }
    mtp = mtp_active = 0
    if m.num_nextn_predict_layers:
        extra = tensors(m, include_mtp=True)[len(main) :]
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
