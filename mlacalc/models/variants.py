"""A model re-expressed with another attention design (what would MHA, GQA, MQA or MLA cost here?).

Everything but the attention heads stays as it is (FFN, experts, embeddings, layers), a
sparse attention's selection included: DeepSeek sparse attention's indexer (its cache and
top-k keys) and block-sparse layers stay in the MHA/GQA/MQA equivalents
(:func:`kept_sparse_note` says so).
The rules, also printed by the reports:

- to MHA/GQA/MQA from MLA: ``head_dim = qk_nope_head_dim`` (the per-head width
  DeepSeek-V2 compares against: ``d_h = 128``);
- to MLA from MHA/GQA/MQA: DeepSeek-V2's proportions, ``kv_lora_rank = 4 d_h``,
  ``qk_rope_head_dim = d_h / 2``, ``qk_nope_head_dim = v_head_dim = d_h``, no query
  compression (each can be overridden);
- the model's own design (same variant, same KV heads) is the model itself;
- an equivalent has one head shape in every layer: a model whose full layers have their
  own head width and KV heads (Gemma 4) takes its other layers' ``head_dim`` and
  ``num_key_value_heads`` everywhere (:func:`one_head_shape_note` says so).
"""

from __future__ import annotations

from mlacalc.models.loading import ModelConfig, model_argument
from mlacalc.models.schema import BOUNDS
from mlacalc.words import arguments as args
from mlacalc.words.errors import InvalidArgumentError
from mlacalc.words.vocab import VARIANTS, Variant

__all__ = ["EQUIVALENT_VARIANTS", "as_variant", "kept_sparse_note", "one_head_shape_note"]

EQUIVALENT_VARIANTS = VARIANTS

_MLA_FIELDS = ("q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")


#: every layer with the same heads (Gemma 4's full layers lose their own width and K=V heads)
_UNIFORM_HEADS = {
    "global_head_dim": None,
    "num_global_key_value_heads": None,
    "attention_k_eq_v": False,
    "sliding_key_value_heads": None,  # MiMo-V2-Flash's sliding layers lose their own KV heads
}


def as_variant(
    model: ModelConfig | str,
    variant: Variant,
    *,
    num_key_value_heads: int | None = None,
    kv_lora_rank: int | None = None,
    qk_rope_head_dim: int | None = None,
    q_lora_rank: int | None = None,
) -> ModelConfig:
    """The same model with its attention replaced by ``variant``'s equivalent.

    Examples
    --------
    >>> as_variant("deepseek-v3", "mha").head_dim, as_variant("llama-3-8b", "mla").kv_lora_rank
    (128, 512)
    """
    m = model_argument(model)
    args.choice("variant", variant, EQUIVALENT_VARIANTS)
    if m.compress_ratios:  # DeepSeek-V4: window, pooled keys and compressors in every layer
        raise InvalidArgumentError(
            "model",
            f"{m.label}'s compressed attention (compress_ratios) has no MHA/GQA/MQA/MLA "
            "equivalent modelled: compare it as it is",
        )
    if m.sparse_block_size is not None and variant == "mla":  # MiniMax-M3's msa layers
        raise InvalidArgumentError(
            "variant",
            f"{m.label}'s block-sparse attention (sparse_block_size: GQA keys and an indexer) "
            "has no MLA equivalent modelled: compare it as mha, gqa or mqa",
        )
    num_key_value_heads = args.optional_count(
        "num_key_value_heads", num_key_value_heads, BOUNDS["num_key_value_heads"]
    )
    kv_lora_rank = args.optional_count("kv_lora_rank", kv_lora_rank, BOUNDS["kv_lora_rank"])
    qk_rope_head_dim = args.optional_count(
        "qk_rope_head_dim", qk_rope_head_dim, BOUNDS["qk_rope_head_dim"]
    )
    q_lora_rank = args.optional_count("q_lora_rank", q_lora_rank, BOUNDS["q_lora_rank"])
    n_h = m.num_attention_heads
    d_h = m.head_dim if not m.is_mla else m.qk_nope_head_dim
    name = f"{m.name}-as-{variant}"
    label = f"{m.label} as {variant.upper()}"
    if variant == "mla":
        if m.is_mla and kv_lora_rank is None and qk_rope_head_dim is None and q_lora_rank is None:
            return m
        base = m.qk_nope_head_dim if m.is_mla else d_h
        rope = qk_rope_head_dim or (
            m.qk_rope_head_dim if m.is_mla else max(2, base // 2 + base // 2 % 2)
        )
        changes = {
            "kv_lora_rank": kv_lora_rank or (m.kv_lora_rank if m.is_mla else 4 * base),
            "qk_rope_head_dim": rope,
            "qk_nope_head_dim": base,
            "v_head_dim": m.v_head_dim or base,  # MLA's, MiMo-V2-Flash's, else d_h
            "q_lora_rank": q_lora_rank
            if q_lora_rank is not None
            else (m.q_lora_rank if m.is_mla else None),
            "num_key_value_heads": n_h,
            "head_dim": None,
            "sliding_window": None,
            **_UNIFORM_HEADS,
        }
        return m.with_changes(name=name, display_name=label, **changes)
    if variant == "mha":
        n_kv = n_h
    elif variant == "mqa":
        n_kv = 1
    else:
        if num_key_value_heads is None:
            choices = [k for k in (8, 4, 2) if n_h % k == 0 and k < n_h]
            if not choices:
                raise InvalidArgumentError(
                    "num_key_value_heads", f"{n_h} heads have no GQA grouping; name one"
                )
            num_key_value_heads = choices[0]
        n_kv = args.whole(num_key_value_heads)
        if n_kv is None or n_kv <= 0 or n_h % n_kv:
            raise InvalidArgumentError(
                "num_key_value_heads", f"must divide the {n_h} heads, got {num_key_value_heads!r}"
            )
        # GQA of 4, 8 or 16 KV heads are three models: each result names its own
        name = f"{name}{n_kv}"
    if variant == m.variant and n_kv == m.num_key_value_heads:
        return m  # the model's own design: itself, every kind of layer as it is
    return m.with_changes(
        name=name,
        display_name=label,
        num_key_value_heads=n_kv,
        head_dim=d_h,
        **{
            **dict.fromkeys(_MLA_FIELDS),
            **_UNIFORM_HEADS,
            "v_head_dim": None if m.is_mla else m.v_head_dim,  # MiMo-V2-Flash keeps its own
        },
    )


def one_head_shape_note(model: ModelConfig | str) -> str:
    """What the equivalents of a model with per-kind head shapes assume ("" otherwise)."""
    m = model_argument(model)
    if m.sliding_key_value_heads is not None and not m.is_mla:
        return (
            f"{m.label}'s sliding layers have their own KV heads "
            f"({m.sliding_key_value_heads}); the other designs use its full layers' heads in "
            "every layer"
        )
    if m.is_mla or (m.global_head_dim is None and not m.attention_k_eq_v):
        return ""
    full = m.global_head_dim or m.head_dim
    kv = m.num_global_key_value_heads or m.num_key_value_heads
    k_eq_v = ", K = V" if m.attention_k_eq_v else ""
    return (
        f"{m.label}'s full layers have their own heads (d_h {full}, {kv} KV heads{k_eq_v}); "
        f"the other designs use its other layers' shape in every layer (d_h {m.head_dim}, "
        "K and V apart), so they differ from the model in the full layers too"
    )


def kept_sparse_note(model: ModelConfig | str) -> str:
    """What the MHA/GQA/MQA equivalents of a sparse-attention model keep ("" otherwise): they
    are not plain dense attention (a new-user trial read GLM-5.1 "as MHA" as plain MHA)."""
    m = model_argument(model)
    if m.index_topk is not None:
        return (
            f"{m.label}'s MHA/GQA/MQA rows keep its DeepSeek sparse attention: the indexer's "
            f"cache ({m.index_head_dim}-wide keys per token and layer) and attention over its "
            f"top {m.index_topk:,} keys only, not every key as plain MHA/GQA/MQA would"
        )
    if m.sparse_block_size is not None:
        return (
            f"{m.label}'s MHA/GQA/MQA rows keep its block-sparse layers: their indexer and "
            f"attention over the top {m.sparse_topk_blocks} blocks of {m.sparse_block_size} "
            "keys (and the local ones), not every key as plain MHA/GQA/MQA would"
        )
    return ""
