"""Architectures beyond the base layouts: what each model family adds, layer by layer.

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
``mimo_v2_flash``  value heads of ``v_head_dim`` narrower than the query/key heads of
                   ``head_dim``; sliding layers of their own KV heads
                   (``sliding_key_value_heads``) with one sink logit per head, full layers
                   without; MoE with a correction bias after a dense first layer
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
``falcon_h1``      full attention and a Mamba-2 mixer (:mod:`mlacalc.cost.mamba`) side by side
                   on the same normed input in every layer, then a gated MLP
``deepseek_v4``    its own layers (:mod:`mlacalc.cost.compressed`): ``csa`` / ``hca`` / ``swa`` by
                   ``compress_ratios``, a grouped output projection, hash-routed MoE layers
                   (``hash_moe_layers``) and hyper-connections (``hc_mult``); tensors from
                   :mod:`mlacalc.models.deepseek_v4`
``jamba``          Mamba-1 selective-scan layers (:mod:`mlacalc.cost.mamba1`) with attention
                   without RoPE at ``full_attention_layers``; Mixtral's MoE every
                   ``moe_layer_freq``-th layer from ``moe_layer_offset``, gated MLPs between
``nemotron_h``     one mixer per layer (``block_types``): Mamba-2 (:mod:`mlacalc.cost.mamba`),
                   attention, a MoE or an MLP, each after one norm; MLPs and experts of up
                   and down only (relu2), routed experts in a latent width
=================  =========================================================================

:func:`layer_pattern` gives a model's per-layer kinds (:mod:`mlacalc.models.patterns`),
:func:`param_counts` its exact parameters, and :func:`tensors` the checkpoint's weight
tensors (for quantized byte counts in :mod:`mlacalc.cost.quant`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from mlacalc.models.patterns import BLOCK_LAYERS, SPARSE_BLOCK_FIELDS, LayerKind, LayerPattern
from mlacalc.models.registry import IgnoredField, families, family_of
from mlacalc.models.schema import query_width_warning

if TYPE_CHECKING:
    from mlacalc.models.schema import ModelConfig

__all__ = [
    "Arch",
    "arch_of",
    "archs",
    "count_warnings",
    "describe",
    "kind_model",
    "kv_head_share",
    "layer_pattern",
]


@dataclass(frozen=True)
class Arch:
    """What a family adds to the Llama layout (each a rule of its reference implementation)."""

    qk_norm: str = ""  # "", "head" (d_h each) or "full" (n_h d_h and n_kv d_h)
    norms_per_layer: int = 2
    sinks: bool = False
    sliding_sinks: bool = False  # attention sinks in the sliding layers only (MiMo-V2-Flash)
    router_bias: bool = False  # a bias on the router's logits (GPT-OSS)
    correction_bias: bool = False  # a per-expert correction bias on the routing scores
    expert_bias: bool = False
    off_pattern: str = "full"  # kind of the layers that are not full: sliding/chunked
    nope_full: bool = False  # full-attention layers without RoPE (Llama 4)
    indexer: bool = False  # DeepSeek sparse attention: MLA plus a lightning indexer
    shared_gate: bool = False  # a sigmoid gate on the shared expert (one d-wide row)
    gated_query: bool = False  # q_proj also yields a per-head output gate (Qwen3-Next)
    head_gate: bool = False  # g_proj: d -> n_h, a sigmoid gate per head on the core (Step-3.7)
    kimi_delta: bool = False  # linear layers are Kimi Delta Attention (Kimi Linear)
    split_linear_in: bool = False  # in_proj_qkv, _z, _b, _a, not qkvz and ba (Qwen3.5)
    global_attention: bool = False  # full layers: global_head_dim, K=V heads (Gemma 4)
    mamba: bool = False  # Mamba-2 state-space layers (mlacalc.cost.mamba)
    blocks: bool = False  # one mixer per layer, listed in block_types (Nemotron-H, -NAS)
    ungated_mlp: bool = False  # MLPs and experts of up and down only (Nemotron-H's relu2)
    mamba1: bool = False  # Mamba-1 selective-scan layers (mlacalc.cost.mamba1; Jamba)
    parallel_mamba: bool = False  # a Mamba-2 mixer beside the attention in every layer (Falcon-H1)
    compressed: bool = False  # DeepSeek-V4: csa / hca / swa layers (mlacalc.cost.compressed)


def archs() -> dict[str, Arch]:
    """model_type -> :class:`Arch`, for every registered family that adds to its base layout
    (each family module states its own, :mod:`mlacalc.models.hf`)."""
    return {t: a for family in families().values() for t, a in family.archs.items()}


def arch_of(model: ModelConfig) -> Arch | None:
    """The additions of the model's family, or None for a base-layout model."""
    family = family_of(model.model_type)
    return None if family is None else family.archs.get(model.model_type)


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
    if model.block_types:  # one mixer per layer, no FFN beside an attention or SSM
        return LayerPattern(tuple(BLOCK_LAYERS[b] for b in model.block_types))
    if arch.parallel_mamba and model.mamba_num_heads is not None:  # side by side, every layer
        return LayerPattern(
            tuple(
                LayerKind("full", ffn="moe" if model.is_moe_layer(i) else "dense", mamba=True)
                for i in range(n)
            )
        )
    if arch.compressed:  # DeepSeek-V4: each layer's kind from its compress ratio
        return _compressed_pattern(model)
    interval = getattr(model, "full_attention_interval", None)
    chunk = getattr(model, "attention_chunk_size", None)
    own = "dsa" if model.index_topk is not None else ("mla" if model.is_mla else "full")
    if getattr(model, "linear_num_value_heads", None) is not None:
        off = LayerKind("linear")
    elif model.mamba_num_heads is not None:  # Mamba-2 layers between listed attention ones
        off = LayerKind("mamba")
    elif model.mamba_dt_rank is not None:  # Mamba-1 layers between listed attention ones
        off = LayerKind("mamba1")
    elif model.sliding_window is not None:
        off = LayerKind("sliding", window=model.sliding_window)
    elif chunk is not None:
        off = LayerKind("chunked", window=chunk)
    else:
        off = LayerKind(own)
    full = LayerKind(own, rope=not arch.nope_full)
    listed = set(getattr(model, "full_attention_layers", ()) or ())
    shared = set(model.shared_indexer_layers)
    layers = []
    for i in range(n):
        attn = (
            full
            if (i + 1 in listed if listed else interval is not None and (i + 1) % interval == 0)
            else off
        )
        ffn = "moe" if model.is_moe_layer(i) else "dense"
        if model.is_sparse_layer(i):  # MiniMax-M3's block-sparse layers (the others full)
            attn = LayerKind("msa")
        indexer = not (attn.attention == "dsa" and i + 1 in shared)
        layers.append(
            LayerKind(attn.attention, ffn=ffn, window=attn.window, rope=attn.rope, indexer=indexer)
        )
    return LayerPattern(tuple(layers))


def count_warnings(model: ModelConfig) -> list[str]:
    """Counts valid as transformers builds them that leave a part the model declares without a
    layer: routed experts but no MoE layer (a dense-layer count, a MoE frequency or offset, a
    block list), a full-attention interval past the last layer, an MLA width above hidden_size
    (:meth:`ModelConfig.width_warnings`), and a config.json field its class ignores, dropped
    (:class:`~mlacalc.models.registry.IgnoredField`). Each sentence names the field
    that did it and the fix; loading warns them (:func:`mlacalc.cli.common.load`)."""
    out = [f"{model.label}: {note}" for note in model.derived if isinstance(note, IgnoredField)]
    n = model.num_hidden_layers
    no_moe = model.no_moe_layer_warning()
    if no_moe:
        out.append(no_moe)
    out += model.width_warnings()
    query = query_width_warning(model)  # head_dim floored, or kept by a change of the heads
    if query:
        out.append(query)
    interval = model.full_attention_interval
    pattern = layer_pattern(model)
    if interval is not None and interval > n and pattern.is_uniform:
        kind = pattern.layers[0].label if pattern.layers else "-"
        out.append(
            f"{model.label} declares full_attention_interval {interval} but has {n} layers: no "
            f"layer is full attention, every one is {kind}; lower full_attention_interval to "
            f"at most {n} if that is not meant"
        )
    return out


def _compressed_pattern(model: ModelConfig) -> LayerPattern:
    """DeepSeek-V4's layers: ``csa`` where the ratio is ``compress_rate_csa``, ``hca`` where it
    is ``compress_rate_hca``, ``swa`` (the window only) where it is 0; every one a MoE."""
    kinds = {0: "swa", model.compress_rate_csa: "csa", model.compress_rate_hca: "hca"}
    return LayerPattern(
        tuple(
            LayerKind(
                kinds[r],
                ffn="moe" if model.is_moe_layer(i) else "dense",
                window=model.sliding_window,
                ratio=r,
            )
            for i, r in enumerate(model.compress_ratios)
        )
    )


#: the Mamba-2 widths a model of another kind of layer drops
_MAMBA_FIELDS = (
    "mamba_num_heads",
    "mamba_head_dim",
    "ssm_state_size",
    "mamba_n_groups",
    "mamba_d_conv",
    "mamba_chunk_size",
)


def kind_model(model: ModelConfig, kind: LayerKind) -> ModelConfig:
    """The model as if every layer were of ``kind``: its window or chunk, and a Gemma 4
    full layer's own head width and KV heads (``attention_k_eq_v`` kept only there), a
    MiMo-V2-Flash sliding layer's own KV heads (``sliding_key_value_heads``)."""
    changes: dict[str, Any] = dict(
        full_attention_interval=None,
        full_attention_layers=(),
        shared_indexer_layers=(
            tuple(range(1, model.num_hidden_layers + 1))
            if (kind.attention == "dsa" and not kind.indexer)
            else ()
        ),
        sliding_window=kind.window if kind.attention == "sliding" else None,
        attention_chunk_size=kind.window if kind.attention == "chunked" else None,
    )
    if model.block_types:  # one kind of block: a plain model of that kind
        changes["block_types"] = changes["block_widths"] = ()
    if model.sparse_block_size is not None:  # MiniMax-M3: block-sparse everywhere, or nowhere
        changes["sparse_attention_layers"] = ()
        if kind.attention != "msa":
            changes.update(dict.fromkeys(SPARSE_BLOCK_FIELDS, None))
    if model.compress_ratios:  # DeepSeek-V4: every layer of this kind, its window kept
        changes["sliding_window"] = model.sliding_window
        changes["compress_ratios"] = (kind.ratio,) * model.num_hidden_layers
    if model.mamba_num_heads is not None and kind.attention != "mamba":
        changes.update(dict.fromkeys(_MAMBA_FIELDS, None))
    if model.mamba_dt_rank is not None and kind.attention != "mamba1":  # Jamba's Mamba-1
        changes.update(dict.fromkeys(("mamba_dt_rank", "mamba_inner_size"), None))
        changes.update(ssm_state_size=None, mamba_d_conv=None)
    if (model.global_head_dim is not None or model.attention_k_eq_v) and not model.is_mla:
        full = kind.attention == "full"
        changes.update(global_head_dim=None, num_global_key_value_heads=None)
        changes["attention_k_eq_v"] = full and model.attention_k_eq_v
        if full:
            changes["head_dim"] = model.global_head_dim or model.head_dim
            if model.attention_k_eq_v and model.num_global_key_value_heads:
                changes["num_key_value_heads"] = model.num_global_key_value_heads
    if model.sliding_key_value_heads is not None:
        changes["sliding_key_value_heads"] = None
        if kind.attention == "sliding":
            changes["num_key_value_heads"] = model.sliding_key_value_heads
    return model.replaced(**changes)


def describe(model: ModelConfig) -> dict[str, Any]:
    """The pattern of a model for reports: summary line and layers by kind."""
    return layer_pattern(model).to_dict()


def kv_head_share(n_kv: int, tp: int) -> Fraction:
    """The share of a layer's ``n_kv`` K/V heads one of ``tp`` tensor-parallel ranks holds:
    whole heads, ``ceil(n_kv / tp)`` of them (split up to ``n_kv`` ranks, replicated beyond).
    The one rule of the serving layout's weights and cache and of training's K/V projection
    and activations."""
    return Fraction(math.ceil(n_kv / tp), n_kv)
