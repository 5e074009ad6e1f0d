"""MiniMax-M3 (``minimax_m3``; the reference is transformers' ``MiniMaxM3VLTextConfig`` and
``MiniMaxM3VLTextModel``, the language model of ``minimax_m3_vl``).

transformers has no class for ``model_type: minimax_m3``; its text config takes the published
file's fields as they are (``MiniMaxM3VLTextConfig(**config)``: ``sparse_attention_config`` and
``moe_layer_freq`` are read by its ``__post_init__``), and so does this family:

- attention: GQA (``num_attention_heads`` query heads, ``num_key_value_heads`` KV heads of
  ``head_dim``, no biases) with a per-head RMSNorm on queries and keys (``q_norm``, ``k_norm``:
  ``head_dim`` each) and partial RoPE (``rotary_dim``, no count);
- block-sparse layers (``sparse_attention_config.sparse_attention_freq`` 1; the others full):
  an indexer of ``sparse_num_index_heads`` heads of ``sparse_index_dim`` (``q_proj``
  ``d -> n_i d_i``, ``k_proj`` ``d -> d_i``, an RMSNorm of ``d_i`` on each) that caches one key
  per token, scores every key, takes the max over each block of ``sparse_block_size`` keys and
  lets each query attend the ``sparse_topk_blocks`` best blocks, the ``sparse_local_block``
  blocks ending at its own always among them (read as the schema's ``sparse_*`` fields);
- FFN: a gated MLP of ``dense_intermediate_size`` where ``moe_layer_freq`` is 0 (the first
  ``first_k_dense_replace`` layers), else a MoE of ``num_local_experts`` experts of
  ``intermediate_size`` (the class's expert width; the file's ``moe_intermediate_size`` is
  not read by it and must agree), a router with a correction bias (a buffer) and one shared
  expert of ``shared_intermediate_size``;
- untied head. The checkpoint's MTP modules (``num_mtp_modules``) are not built by the class
  (it drops ``mtp.*`` weights on load) and are not counted.

Refused by name (the class builds none of them, or the count would depend on data): an
output gate (``attention_output_gate``), query/key norms other than per head
(``use_qk_norm``, ``qk_norm_type``), ``n_shared_experts`` other than 1, an index value path
(``sparse_disable_index_value`` 0 on a sparse layer), init blocks (``sparse_init_block``),
block scores other than the max (``sparse_score_type``), ``use_sparse_attention: false`` with
sparse layers listed, and no local block (``sparse_local_block`` 0: whether a query's own
block is attended would depend on the scores).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mlacalc.models.architecture import Arch
from mlacalc.models.hf._layer_types import lift_text_config, read_mlp_layer_types
from mlacalc.models.registry import ClassDefault, Default, Family, HFInput, register

_SPARSE = "sparse_attention_config"
#: sparse_attention_config key (and the text config's flat name) -> schema field
_SPARSE_FIELDS = {
    "sparse_block_size": ("index_block_size", "sparse_block_size"),
    "sparse_topk_blocks": ("index_topk_blocks", "sparse_topk_blocks"),
    "sparse_local_block": ("index_local_blocks", "sparse_local_blocks"),
    "sparse_num_index_heads": ("index_n_heads", "sparse_index_heads"),
    "sparse_index_dim": ("index_head_dim", "sparse_index_dim"),
}
#: MiniMaxM3VLTextConfig's defaults of the indexer (used when a file states the sparse
#: layers but not a width)
INDEX_DEFAULTS = {
    "sparse_block_size": 128,
    "sparse_topk_blocks": 16,
    "sparse_local_blocks": 1,
    "sparse_index_heads": 4,
    "sparse_index_dim": 128,
}


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _flags(value: Any, n: Any) -> bool:
    """Whether ``value`` lists one 0/1 flag per layer."""
    return (
        isinstance(value, list)
        and (not _count(n) or len(value) == n)
        and all(_count(f) and f in (0, 1) for f in value)
    )


def _sparse_config(cfg: Mapping[str, Any], raw: dict, problems: list, n: Any) -> list[int]:
    """The block-sparse fields of ``sparse_attention_config``; the 0-based sparse layers."""
    name = _SPARSE
    freq = cfg.get("sparse_attention_freq")
    if freq is None:
        sparse: list[int] = []
    elif not _flags(freq, n):
        problems.append(
            (
                f"{name}.sparse_attention_freq",
                f"must list a 0 or 1 for each of the {n} layers",
                None,
            )
        )
        return []
    else:
        sparse = [i for i, f in enumerate(freq) if f]
    if sparse and cfg.get("use_sparse_attention", True) is not True:
        problems.append(
            (
                f"{name}.use_sparse_attention",
                f"{cfg.get('use_sparse_attention')!r} while sparse_attention_freq lists sparse "
                "layers: the reference builds them whatever this switch says",
                "use true, or set sparse_attention_freq to 0 everywhere",
            )
        )
    for key, (_, field) in _SPARSE_FIELDS.items():
        value = cfg.get(key)
        if value is None:
            continue
        if not _count(value) or value < 1:
            problems.append((f"{name}.{key}", f"must be a positive integer, got {value!r}", None))
            continue
        raw[field] = value
    init = cfg.get("sparse_init_block", 0)
    if init != 0:
        problems.append(
            (
                f"{name}.sparse_init_block",
                f"{init!r}: init blocks are not modelled (the reference has none)",
                "use 0",
            )
        )
    score = cfg.get("sparse_score_type", "max")
    if score != "max":
        problems.append(
            (
                f"{name}.sparse_score_type",
                f"{score!r}: only a block's max key score is modelled (the reference's)",
                "use max",
            )
        )
    off = cfg.get("sparse_disable_index_value")
    if off is not None:
        if not _flags(off, n):
            problems.append(
                (
                    f"{name}.sparse_disable_index_value",
                    f"must list a 0 or 1 for each of the {n} layers",
                    None,
                )
            )
        elif any(not off[i] for i in sparse):
            problems.append(
                (
                    f"{name}.sparse_disable_index_value",
                    "an index value path (0 on a sparse layer) is not modelled: the reference "
                    "has none",
                    "use 1 on every sparse layer",
                )
            )
    return sparse


def _text_layer_types(data: Mapping[str, Any], problems: list, n: Any) -> list[int] | None:
    """The text config's ``layer_types`` (``minimax_m3_sparse`` / ``full_attention``)."""
    types = data.get("layer_types")
    if types is None:
        return None
    ok = ("minimax_m3_sparse", "full_attention")
    if (
        not isinstance(types, list)
        or (_count(n) and len(types) != n)
        or any(t not in ok for t in types)
    ):
        problems.append(
            ("layer_types", f"must list minimax_m3_sparse or full_attention per layer ({n})", None)
        )
        return []
    return [i for i, t in enumerate(types) if t == "minimax_m3_sparse"]


def _refusals(data: Mapping[str, Any], problems: list) -> None:
    if data.get("attention_output_gate"):
        problems.append(
            ("attention_output_gate", "an attention output gate is not modelled", "use false")
        )
    if data.get("use_qk_norm", True) is not True or data.get("qk_norm_type", "per_head") != (
        "per_head"
    ):
        key = "use_qk_norm" if data.get("use_qk_norm", True) is not True else "qk_norm_type"
        problems.append(
            (
                key,
                "MiniMax-M3 is modelled with a per-head query/key RMSNorm (the reference's)",
                "use use_qk_norm: true and qk_norm_type: per_head",
            )
        )
    shared = data.get("n_shared_experts", 1)
    if shared != 1:
        problems.append(
            (
                "n_shared_experts",
                f"{shared!r}: the reference builds one shared expert of shared_intermediate_size",
                "use 1",
            )
        )


def _widths(data: Mapping[str, Any], raw: dict, derived: list, problems: list) -> None:
    """Dense MLP width and expert width as the reference reads them."""
    expert = data.get("intermediate_size")
    stated = data.get("moe_intermediate_size")
    if stated is not None and expert is not None and stated != expert:
        problems.append(
            (
                "moe_intermediate_size",
                f"{stated!r} differs from intermediate_size {expert!r}, the experts' width the "
                "reference builds",
                "state the experts' width in both",
            )
        )
    if expert is not None:
        raw["moe_intermediate_size"] = expert
    dense = data.get("dense_intermediate_size", 12288)
    raw["intermediate_size"] = dense
    derived.append(
        f"intermediate_size = {dense!r} (dense_intermediate_size: the dense layers' MLP); "
        f"moe_intermediate_size = {expert!r} (intermediate_size: the experts' width)"
    )


def _moe_layers(data: Mapping[str, Any], raw: dict, derived: list, problems: list, n) -> None:
    freq = data.get("moe_layer_freq")
    kinds = data.get("mlp_layer_types")
    raw.pop("moe_layer_freq", None)
    if kinds is None and freq is not None:
        if not _flags(freq, n):
            problems.append(
                ("moe_layer_freq", f"must list a 0 or 1 for each of the {n} layers", None)
            )
            return
        kinds = ["sparse" if f else "dense" for f in freq]
    if kinds is None and _count(n):
        kinds = ["sparse"] * n  # MiniMaxM3VLTextConfig's default: a MoE in every layer
    if isinstance(kinds, list) and _count(n) and len(kinds) != n:
        problems.append(("mlp_layer_types", f"must list one kind per layer ({n})", None))
        return
    stated = data.get("first_k_dense_replace")
    before = len(problems)
    read_mlp_layer_types({"mlp_layer_types": kinds}, raw, derived, problems)
    if (
        len(problems) == before
        and stated is not None
        and raw.get("first_k_dense_replace") != stated
    ):
        problems.append(
            (
                "first_k_dense_replace",
                f"{stated!r} differs from the {raw.get('first_k_dense_replace')} leading dense "
                "layers of moe_layer_freq, which the reference reads",
                "state the same dense layers in both",
            )
        )
    raw["n_shared_experts"] = 1
    raw["moe_layer_freq"] = 1


def _translate(data, raw, derived, problems) -> None:
    if isinstance(data.get("text_config"), Mapping):  # a MiniMaxM3VLConfig wrapper
        data = lift_text_config(data, raw, {})
        derived.append("read text_config (the language model); the vision tower is reported apart")
    n = raw.get("num_hidden_layers")
    if raw.pop("num_nextn_predict_layers", None) and not data.get("num_mtp_modules"):
        # (said once: with num_mtp_modules, by the sentence of those below)
        derived.append(
            "the MTP layer (num_nextn_predict_layers) not counted: the class builds none"
        )
    _refusals(data, problems)
    _widths(data, raw, derived, problems)
    _moe_layers(data, raw, derived, problems, n)
    for key in ("index_n_heads", "index_head_dim"):  # the text config's flat names: not DSA's
        raw.pop(key, None)
    cfg = data.get(_SPARSE)
    sparse = _sparse_config(cfg, raw, problems, n) if isinstance(cfg, Mapping) else []
    for flat, field in _SPARSE_FIELDS.values():
        if flat in data and field not in raw:
            raw[field] = data[flat]
    listed = _text_layer_types(data, problems, n)
    if listed is not None and not isinstance(cfg, Mapping):
        sparse = listed
    if not sparse:
        for field in INDEX_DEFAULTS:
            raw.pop(field, None)
        derived.append("every layer full attention (no block-sparse layer listed)")
        return
    for field, value in INDEX_DEFAULTS.items():
        if field not in raw:
            raw[field] = value
            derived.append(ClassDefault(f"{field} = {value} (MiniMaxM3VLTextConfig default)"))
    if _count(n) and len(sparse) < n:
        raw["sparse_attention_layers"] = [i + 1 for i in sparse]
    derived.append(f"{len(sparse)} block-sparse layers (sparse_attention_freq), the others full")
    if data.get("num_mtp_modules"):
        derived.append(
            f"the MTP modules (num_mtp_modules {data['num_mtp_modules']}, "
            f"num_nextn_predict_layers {data.get('num_nextn_predict_layers', 0)}) not counted: "
            "the Hugging Face implementation builds none"
        )


FAMILY = register(
    Family(
        name="minimax_m3",
        model_types=("minimax_m3",),
        aliases={"minimax_m3_vl_text": "minimax_m3", "minimax_m3_vl": "minimax_m3"},
        layout="llama",
        hf_class="transformers MiniMaxM3VLTextConfig (the published minimax_m3 file as its fields)",
        stray=("n_routed_experts", "moe_layer_offset", "topk_method"),
        renames={"num_local_experts": "n_routed_experts", "num_experts": "n_routed_experts"},
        defaults={
            "vocab_size": Default("MiniMaxM3VLTextConfig default", value=200064),
            "hidden_size": Default("MiniMaxM3VLTextConfig default", value=6144),
            "num_hidden_layers": Default("MiniMaxM3VLTextConfig default", value=60),
            "num_attention_heads": Default("MiniMaxM3VLTextConfig default", value=64),
            "num_key_value_heads": Default("MiniMaxM3VLTextConfig default", value=4),
            "head_dim": Default("MiniMaxM3VLTextConfig default", value=128),
            "tie_word_embeddings": Default("MiniMaxM3VLTextConfig default", value=False),
            "n_routed_experts": Default("MiniMaxM3VLTextConfig default", value=128),
            "num_experts_per_tok": Default("MiniMaxM3VLTextConfig default", value=4),
            "moe_intermediate_size": Default("MiniMaxM3VLTextConfig default", value=3072),
            "shared_intermediate_size": Default("MiniMaxM3VLTextConfig default", value=3072),
            "topk_method": Default(
                "MiniMax-M3 routers carry e_score_correction_bias", value="noaux_tc", warn=False
            ),
        },
        inputs={
            _SPARSE: HFInput("mapping", "MiniMax-M3's block-sparse attention layers and indexer"),
            "attention_output_gate": HFInput("boolean", "MiniMax-M3: refused when true"),
            "use_qk_norm": HFInput("boolean", "MiniMax-M3: refused when false"),
            "qk_norm_type": HFInput("string", "MiniMax-M3: refused unless per_head"),
        },
        reads=(
            "dense_intermediate_size",
            "moe_layer_freq",
            "mlp_layer_types",
            "layer_types",
            "index_block_size",
            "index_topk_blocks",
            "index_local_blocks",
            "index_n_heads",
            "index_head_dim",
            "num_mtp_modules",
        ),
        irrelevant={
            "projector_hidden_size": "a MiniMaxM3VLConfig wrapper's vision projector: the "
            "vision tower is reported apart",
            "rotary_dim": "the rotated channels of each head (partial RoPE): element-wise",
            "use_gemma_norm": "RMSNorm scaled by 1 + weight: the same one weight per channel",
            "use_routing_bias": "the router's correction bias is a buffer the class always holds",
            "max_position_embeddings": "the longest context trained: no count",
        },
        translate=_translate,
        moe=True,
        requires_experts=True,
        archs={"minimax_m3": Arch(qk_norm="head", correction_bias=True)},
    )
)
