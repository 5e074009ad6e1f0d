"""The model schema: every field declared once, and the validation generated from it.

A model is one mapping whose field names are the ones Hugging Face writes in
``config.json`` (``hidden_size``, ``num_key_value_heads``, ``kv_lora_rank``, ...),
plus ``name``, ``model_type`` and ``source``. Each field of :class:`ModelConfig`
carries its :class:`Spec` (kind, upper bound, meaning); the checks of kind and
range, the table :data:`FIELDS` and the field list of ``docs/config-schema.md`` all
come from those declarations, so a field cannot exist unvalidated.

Validation collects every problem before it reports: one :class:`ConfigError` lists
each missing or invalid field (its ``field`` is the first one, ``problems`` all of
them). Types and ranges are checked before any arithmetic reads a value.

The attention variant is read from the fields, never from the model's name:
``kv_lora_rank`` set means MLA; otherwise ``num_key_value_heads`` equal to
``num_attention_heads`` is MHA, 1 is MQA, anything in between is GQA.
"""

from __future__ import annotations

import math
import warnings
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import MISSING, dataclass, field, fields, replace
from difflib import get_close_matches
from pathlib import Path
from typing import Any

from mlacalc.models import registry
from mlacalc.models.quantization import scheme_of, unread_quantization_warning
from mlacalc.words.arguments import whole
from mlacalc.words.dtypes import DTYPE_BITS, canonical_dtype
from mlacalc.words.errors import ConfigError, MlacalcWarning, UnknownDtypeError

__all__ = [
    "BOUNDS",
    "FIELDS",
    "SPECS",
    "ModelConfig",
    "Spec",
    "model_from_dict",
    "model_types",
    "raise_problems",
]

# kinds of value
POS = "positive integer"
NONNEG = "non-negative integer"
OPTPOS = "positive integer or null"
BOOL = "boolean"
STR = "string"
OPTSTR = "string (may be empty)"
STRS = "string or list of strings"
NAMES = "list of strings"
INTS = "list of positive integers"
BLOCKS = "list of block kinds"
WIDTHS = "list of widths"
RATIOS = "list of compress ratios"
#: the kinds whose value is a list (``--set`` reads ``[4, 8, 12]`` and ``4,8,12`` for them;
#: ``source`` is text, commas and all)
LIST_KINDS = (NAMES, INTS, BLOCKS, WIDTHS, RATIOS)
#: the kinds of block a ``block_types`` list names (Nemotron-H: one mixer per layer)
BLOCK_KINDS = ("mamba", "attention", "moe", "mlp")
QUANT = "mapping or null"

# documented upper bounds: far above every real model, low enough that no count overflows
# a loop or a table and no string grows without end
MAX_WIDTH = 1 << 20  # hidden, FFN, latent and head widths
MAX_HEADS = 1 << 16  # attention and KV heads
MAX_LAYERS = 2_048  # decoder layers and every per-layer count
MAX_EXPERTS = 1 << 16  # routed and shared experts
MAX_VOCAB = 1 << 24  # vocabulary entries
MAX_TOKENS = 1 << 40  # context lengths and windows
#: positions a model declares: 2^30, 100x the longest context released (Llama 4 Scout's 10M)
MAX_POSITIONS = 1 << 30
MAX_TEXT = 10_000  # characters of a string field
MAX_ITEMS = 64  # entries of a list field

#: Problems found while reading a model: (field, message, fix or None).
Problem = tuple[str, str, "str | None"]


@dataclass(frozen=True)
class Spec:
    """One field of the schema: its kind, its inclusive upper bound, what it means, and
    what an absent value means (``absent``)."""

    kind: str
    doc: str
    hi: int | None = None
    absent: str = ""

    def check(self, name: str, value: Any) -> Problem | None:
        """The problem with ``value`` for this field, or None when it is valid."""
        kind = self.kind
        if kind in (POS, NONNEG, OPTPOS):
            if value is None and kind == OPTPOS:
                return None
            if whole(value) is None:
                return (
                    name,
                    f"must be a {kind}, got {_show(value)} ({type(value).__name__})",
                    f"write a whole number such as {name}: 128",
                )
            value = whole(value)
            if name == "qk_rope_head_dim" and value <= 0:
                return NO_ROPE
            if kind in (POS, OPTPOS) and value <= 0:
                fix = "use null for none" if kind == OPTPOS else "dimensions must be at least 1"
                return (name, f"must be a {kind}, got {value}", fix)
            if kind == NONNEG and value < 0:
                return (name, f"must be a {kind}, got {value}", "use 0 for none")
            if self.hi is not None and value > self.hi:
                return (
                    name,
                    f"is {_show(value)}, above the bound of {self.hi:,}",
                    "mlacalc reads values up to this bound (docs/config-schema.md)",
                )
            return None
        if kind == BOOL:
            if not isinstance(value, bool):
                return (
                    name,
                    f"must be true or false, got {_show(value)} ({type(value).__name__})",
                    "write true or false without quotes",
                )
            return None
        if kind in (STR, OPTSTR):
            if not isinstance(value, str) or (kind == STR and not value.strip()):
                return (name, f"must be a non-empty string, got {_show(value)}", None)
            if len(value) > (self.hi or MAX_TEXT):
                return (
                    name,
                    f"is {len(value):,} characters, above the bound of {self.hi or MAX_TEXT:,}",
                    None,
                )
            return None
        if kind in (STRS, NAMES):
            items = [value] if isinstance(value, str) and kind == STRS else value
            if not isinstance(items, (list, tuple)) or not all(
                isinstance(s, str) and s.strip() for s in items
            ):
                return (name, f"must be a {kind}, got {_show(value)}", None)
            if kind == STRS and not items:
                return (name, "must name at least one source", "say where the values come from")
            if len(items) > MAX_ITEMS or any(len(s) > MAX_TEXT for s in items):
                return (
                    name,
                    f"holds more than {MAX_ITEMS} entries or an entry over {MAX_TEXT:,} characters",
                    None,
                )
            return None
        if kind == INTS:
            fix = "list 1-based layer numbers such as [4, 8, 12]"
            if not isinstance(value, (list, tuple)):
                return (name, f"must be a {kind} up to {self.hi:,}, got {_show(value)}", fix)
            for i in value:
                if whole(i) is None:
                    return (name, f"{_show(i)} is not an integer", fix)
                if not 0 < i <= (self.hi or 0):
                    return (name, f"{i} is not a layer number from 1 to {self.hi:,}", fix)
            if list(value) != sorted(set(value)):
                return (name, "must list each layer once, in increasing order", None)
            return None
        if kind == BLOCKS:
            if not isinstance(value, (list, tuple)) or any(b not in BLOCK_KINDS for b in value):
                return (
                    name,
                    f"must list one of {', '.join(BLOCK_KINDS)} per layer, got {_show(value)}",
                    "name each layer's block: mamba, attention, moe or mlp",
                )
            if len(value) > MAX_LAYERS:
                return (name, f"lists more than {MAX_LAYERS:,} layers", None)
            return None
        if kind == WIDTHS:
            if not isinstance(value, (list, tuple)) or not all(
                whole(w) is not None and 0 < w <= (self.hi or 0) for w in value
            ):
                return (
                    name,
                    f"must be a {kind} up to {self.hi:,}, got {_show(value)}",
                    "list one positive width per block",
                )
            if len(value) > MAX_LAYERS:
                return (name, f"lists more than {MAX_LAYERS:,} widths", None)
            return None
        if kind == RATIOS:
            if not isinstance(value, (list, tuple)) or not all(
                whole(r) is not None and 0 <= r <= (self.hi or 0) for r in value
            ):
                return (
                    name,
                    f"must be a {kind} (integers from 0 to {self.hi:,}), got {_show(value)}",
                    "list each layer's ratio: 0 for the window only, else the tokens pooled "
                    "into one compressed key",
                )
            if len(value) > MAX_LAYERS:
                return (name, f"lists more than {MAX_LAYERS:,} layers", None)
            return None
        if kind == QUANT:
            return _quantization_problem(name, value)
        raise AssertionError(f"field {name}: unknown kind {kind!r}")  # pragma: no cover


class FrozenMapping(Mapping[str, Any]):
    """A read-only, hashable mapping: how a model keeps a nested field such as
    ``quantization_config`` (lists become tuples). ``thaw`` gives plain dicts and lists."""

    __slots__ = ("_items",)

    def __init__(self, data: Mapping[str, Any]):
        self._items = {k: _freeze(v) for k, v in data.items()}

    def __getitem__(self, key: str) -> Any:
        return self._items[key]

    def __iter__(self):
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        return hash(tuple(sorted(self._items.items(), key=lambda kv: str(kv[0]))))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Mapping) and dict(self.items()) == dict(other.items())

    def __repr__(self) -> str:
        return repr(self.thaw())

    def __reduce__(self):
        return (FrozenMapping, (self.thaw(),))

    def thaw(self) -> dict[str, Any]:
        """The mapping as plain dicts and lists (for YAML and JSON)."""
        return {k: _thaw(v) for k, v in self._items.items()}


def _plain(value: Any) -> Any:
    """A value with numpy integer scalars made Python ints (alone or in a list), so that a
    model built from ``np.arange`` values stores, prints and dumps as one written by hand;
    anything else as given (the checks judge it)."""
    if isinstance(value, (list, tuple)):
        items = [_plain(v) for v in value]
        return tuple(items) if isinstance(value, tuple) else items
    number = whole(value)
    return value if number is None or type(value) is int else number


def _freeze(value: Any) -> Any:
    if isinstance(value, Mapping):
        return value if isinstance(value, FrozenMapping) else FrozenMapping(value)
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    return value


def _thaw(value: Any) -> Any:
    if isinstance(value, FrozenMapping):
        return value.thaw()
    if isinstance(value, tuple):
        return [_thaw(v) for v in value]
    return value


def _size(value: Any, depth: int = 0) -> int:
    """Entries of a nested value (a bound on what a mapping field may hold)."""
    if depth > 8:
        return 1 << 30
    if isinstance(value, Mapping):
        return 1 + sum(1 + _size(v, depth + 1) for v in value.values())
    if isinstance(value, (list, tuple)):
        return 1 + sum(_size(v, depth + 1) for v in value)
    return 1


def _quantization_problem(name: str, value: Any) -> Problem | None:
    """The problem with a ``quantization_config`` value, or None
    (:mod:`mlacalc.models.quantization` reads it)."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        return (
            name,
            f"must be a mapping as config.json writes it, got {_show(value)}",
            "copy the checkpoint's quantization_config, or use null",
        )
    if _size(value) > 4 * MAX_ITEMS * 8:
        return (name, "is nested deeper or holds more entries than a quantization_config", None)
    try:
        scheme_of(value, "")
    except ConfigError as exc:
        return (exc.field or name, exc.message, exc.fix)
    return None


def _spec(
    kind: str, doc: str, *, hi: int | None = None, default: Any = MISSING, absent: str = ""
) -> Any:
    """Declare a schema field: the dataclass field and its :class:`Spec` in one place."""
    meta = {"spec": Spec(kind, doc, hi, absent)}
    if default is MISSING:
        return field(metadata=meta)
    return field(default=default, metadata=meta)


@dataclass(frozen=True, kw_only=True)
class ModelConfig:
    """A validated model configuration (field names as in Hugging Face ``config.json``).

    Build one with :func:`mlacalc.load_model` or :func:`model_from_dict`; the
    constructor itself checks every value. ``derived`` lists the fields that were not
    stated in the source and were filled in by a documented rule (for instance
    ``head_dim = hidden_size / heads`` when a ``config.json`` omits it).
    """

    name: str = _spec(
        STR,
        "shipped name, lower-case with dashes (deepseek-v3)",
        hi=200,
        absent="the file's name (stem), lower-case with dashes",
    )
    model_type: str = _spec(
        STR,
        "Hugging Face model_type (llama, deepseek_v3, ...: docs/config-schema.md lists them)",
        hi=200,
    )
    source: tuple[str, ...] = _spec(
        STRS,
        "where every value comes from (config.json revision, paper section)",
        absent="user files: the file's path; shipped files: required",
    )
    hidden_size: int = _spec(POS, "d, the model width", hi=MAX_WIDTH)
    num_hidden_layers: int = _spec(POS, "L, decoder layers of the main model", hi=MAX_LAYERS)
    num_attention_heads: int = _spec(POS, "n_h, query heads", hi=MAX_HEADS)
    num_key_value_heads: int = _spec(
        POS,
        "n_kv, key/value heads (MLA files repeat n_h, as Hugging Face does)",
        hi=MAX_HEADS,
        absent="the family's default (see below)",
    )
    vocab_size: int = _spec(POS, "V, vocabulary size", hi=MAX_VOCAB)
    intermediate_size: int = _spec(
        POS, "FFN width of dense layers (GPT-2, Falcon: the MLP width)", hi=MAX_WIDTH
    )
    tie_word_embeddings: bool = _spec(
        BOOL,
        "output head shares the input embedding table",
        absent="the family's default (see below)",
    )
    head_dim: int | None = _spec(
        OPTPOS,
        "d_h, per-head width of Q, K and V (MHA/GQA/MQA)",
        hi=MAX_WIDTH,
        default=None,
        absent="the family's rule (see below); unused by MLA",
    )
    display_name: str = _spec(OPTSTR, "name for reports (DeepSeek-V3)", hi=200, default="")
    aliases: tuple[str, ...] = _spec(NAMES, "other names that load this file", default=())
    notes: str = _spec(OPTSTR, "free text", default="")
    attention_bias: bool = _spec(
        BOOL,
        "bias on the attention projections (Llama: q,k,v,o; DeepSeek: q_a, kv_a, o)",
        default=False,
    )
    qkv_bias: bool = _spec(
        BOOL, "bias on the q, k and v projections only (Qwen2: true)", default=False
    )
    mlp_bias: bool = _spec(BOOL, "bias on the gated MLP projections", default=False)
    q_lora_rank: int | None = _spec(
        OPTPOS,
        "d_cq, query compression rank; null means a plain W_Q",
        hi=MAX_WIDTH,
        default=None,
        absent="MLA: the family's default (see below)",
    )
    kv_lora_rank: int | None = _spec(
        OPTPOS, "d_c, MLA latent width; null or absent means not MLA", hi=MAX_WIDTH, default=None
    )
    qk_nope_head_dim: int | None = _spec(
        OPTPOS, "d_nope, per-head query/key width without RoPE (MLA)", hi=MAX_WIDTH, default=None
    )
    qk_rope_head_dim: int | None = _spec(
        OPTPOS, "d_rope, decoupled RoPE width, shared key (MLA)", hi=MAX_WIDTH, default=None
    )
    v_head_dim: int | None = _spec(
        OPTPOS,
        "d_v, per-head value width (MLA; without MLA only MiMo-V2-Flash, whose value heads "
        "are narrower than its query/key heads of head_dim)",
        hi=MAX_WIDTH,
        default=None,
    )
    n_routed_experts: int = _spec(
        NONNEG,
        "routed experts per MoE layer (Mixtral: num_local_experts)",
        hi=MAX_EXPERTS,
        default=0,
    )
    n_shared_experts: int = _spec(
        NONNEG,
        "always-on shared experts per MoE layer",
        hi=MAX_EXPERTS,
        default=0,
        absent="MoE: the family's default (see below)",
    )
    moe_intermediate_size: int | None = _spec(
        OPTPOS, "FFN width of one expert", hi=MAX_WIDTH, default=None
    )
    num_experts_per_tok: int = _spec(
        NONNEG, "routed experts a token uses", hi=MAX_EXPERTS, default=0
    )
    first_k_dense_replace: int = _spec(
        NONNEG,
        "leading layers that keep a dense FFN",
        hi=MAX_LAYERS,
        default=0,
        absent="MoE: the family's default (see below)",
    )
    moe_layer_freq: int = _spec(
        POS, "every k-th layer after the dense ones is MoE", hi=MAX_LAYERS, default=1
    )
    moe_layer_offset: int = _spec(
        NONNEG,
        "MoE layers are the 0-based i with (i - offset) % moe_layer_freq == 0 (Llama 4's "
        "interleave_moe_layer_step k: freq k, offset k - 1)",
        hi=MAX_LAYERS,
        default=0,
    )
    n_group: int = _spec(
        POS,
        "groups the routed experts split into, in order (DeepSeek-V3: 8 of 32); a token's "
        "experts come from at most topk_group of them (the exchange between nodes; no count)",
        hi=MAX_EXPERTS,
        default=1,
        absent="1, no group limit (deepseek_v3 / v32 / kimi_k2: DeepseekV3Config's 8)",
    )
    topk_group: int = _spec(
        POS,
        "groups a token's experts may come from (DeepSeek-V3: 4 of n_group 8)",
        hi=MAX_EXPERTS,
        default=1,
        absent="required when n_group > 1 (deepseek_v3 / v32 / kimi_k2: DeepseekV3Config's 4)",
    )
    topk_method: str = _spec(
        OPTSTR,
        "router method; noaux_tc adds the e_score_correction_bias vector",
        hi=200,
        default="",
        absent="MoE: the family's default (see below)",
    )
    num_nextn_predict_layers: int = _spec(
        NONNEG,
        "MTP (next-n prediction) modules, reported apart",
        hi=MAX_LAYERS,
        default=0,
        absent="the family's default (see below)",
    )
    sliding_window: int | None = _spec(
        OPTPOS,
        "W, keys a query may attend (and the cache keeps); null for none",
        hi=MAX_TOKENS,
        default=None,
    )
    full_attention_interval: int | None = _spec(
        OPTPOS,
        "k: layers k, 2k, ... (1-based) use full attention and the others the sliding window "
        "or the chunk (Gemma 3, GPT-OSS, Llama 4); null: every layer alike",
        hi=MAX_LAYERS,
        default=None,
    )
    shared_indexer_layers: tuple[int, ...] = _spec(
        INTS,
        "1-based DSA layers (2 to num_hidden_layers) that reuse the previous layer's top-k: no "
        "indexer weights, no indexer key cached (GLM-DSA's indexer_types 'shared'); empty: "
        "every layer has one",
        hi=MAX_LAYERS,
        default=(),
    )
    full_attention_layers: tuple[int, ...] = _spec(
        INTS,
        "1-based layers with full attention, the others linear (Kimi Linear); empty: "
        "full_attention_interval decides",
        hi=MAX_LAYERS,
        default=(),
    )
    attention_chunk_size: int | None = _spec(
        OPTPOS,
        "C: chunked layers attend within chunks of C tokens (Llama 4); null for none",
        hi=MAX_TOKENS,
        default=None,
    )
    global_head_dim: int | None = _spec(
        OPTPOS,
        "head width of the full-attention layers when it differs from head_dim (Gemma 4); "
        "null: head_dim",
        hi=MAX_WIDTH,
        default=None,
        absent="the family's default (see below)",
    )
    num_global_key_value_heads: int | None = _spec(
        OPTPOS,
        "KV heads of the full-attention layers (Gemma 4 with attention_k_eq_v); "
        "null: num_key_value_heads",
        hi=MAX_HEADS,
        default=None,
    )
    attention_k_eq_v: bool = _spec(
        BOOL,
        "the full-attention layers project one key per KV head and use it as the value too "
        "(Gemma 4): no v_proj there; the cache still keeps K and V (V is normed, K normed "
        "and rotated)",
        default=False,
    )
    sliding_key_value_heads: int | None = _spec(
        OPTPOS,
        "KV heads of the sliding-window layers when they differ from num_key_value_heads "
        "(MiMo-V2-Flash: twice those of its full layers); null: num_key_value_heads",
        hi=MAX_HEADS,
        default=None,
    )
    sparse_block_size: int | None = _spec(
        OPTPOS,
        "MiniMax-M3 block-sparse attention: keys per block, the unit its indexer scores "
        "(max over the block's keys) and the core attends; null: no block-sparse layers",
        hi=MAX_TOKENS,
        default=None,
    )
    sparse_topk_blocks: int | None = _spec(
        OPTPOS,
        "block-sparse attention: blocks each query attends (its local blocks among them)",
        hi=MAX_TOKENS,
        default=None,
    )
    sparse_local_blocks: int | None = _spec(
        OPTPOS,
        "block-sparse attention: blocks ending at the query's own, always attended "
        "(1 to sparse_topk_blocks)",
        hi=MAX_TOKENS,
        default=None,
    )
    sparse_index_heads: int | None = _spec(
        OPTPOS,
        "block-sparse attention: indexer heads scoring every key (one block choice per head)",
        hi=MAX_HEADS,
        default=None,
    )
    sparse_index_dim: int | None = _spec(
        OPTPOS,
        "block-sparse attention: indexer key width, cached per token in each block-sparse layer",
        hi=MAX_WIDTH,
        default=None,
    )
    sparse_attention_layers: tuple[int, ...] = _spec(
        INTS,
        "1-based block-sparse layers, the others full; empty: every layer (with "
        "sparse_block_size), or none",
        hi=MAX_LAYERS,
        default=(),
    )
    index_n_heads: int | None = _spec(
        OPTPOS,
        "DSA indexer heads (DeepSeek-V3.2, GLM-5); null: no sparse attention",
        hi=MAX_HEADS,
        default=None,
    )
    index_head_dim: int | None = _spec(
        OPTPOS, "DSA indexer key width, cached per token and layer", hi=MAX_WIDTH, default=None
    )
    index_topk: int | None = _spec(
        OPTPOS, "DSA: keys each query attends, picked by the indexer", hi=MAX_TOKENS, default=None
    )
    compress_ratios: tuple[int, ...] = _spec(
        RATIOS,
        "DeepSeek-V4: per layer, the tokens pooled into one compressed key (compress_rate_csa: "
        "compressed sparse attention with its indexer and index_topk; compress_rate_hca: "
        "heavily compressed attention; 0: the sliding window only); empty: none",
        hi=MAX_TOKENS,
        default=(),
    )
    compress_rate_csa: int | None = _spec(
        OPTPOS,
        "DeepSeek-V4: the ratio of the compressed sparse attention layers (overlapping "
        "windows, an indexer); null: none",
        hi=MAX_TOKENS,
        default=None,
    )
    compress_rate_hca: int | None = _spec(
        OPTPOS,
        "DeepSeek-V4: the ratio of the heavily compressed attention layers; null: none",
        hi=MAX_TOKENS,
        default=None,
    )
    o_groups: int | None = _spec(
        OPTPOS,
        "DeepSeek-V4: groups of the grouped output projection (o_a_proj); null: a plain o_proj",
        hi=MAX_HEADS,
        default=None,
    )
    o_lora_rank: int | None = _spec(
        OPTPOS,
        "DeepSeek-V4: each output group's rank (o_a_proj -> o_b_proj)",
        hi=MAX_WIDTH,
        default=None,
    )
    hc_mult: int | None = _spec(
        OPTPOS,
        "DeepSeek-V4: residual streams of the hyper-connections (two mixers a layer, one "
        "before the head); null: a plain residual",
        hi=MAX_HEADS,
        default=None,
    )
    hash_moe_layers: tuple[int, ...] = _spec(
        INTS,
        "DeepSeek-V4: 1-based MoE layers that route by a frozen token-id table (tid2eid, "
        "vocab_size x num_experts_per_tok int64) instead of the router's top-k",
        hi=MAX_LAYERS,
        default=(),
    )
    linear_num_key_heads: int | None = _spec(
        OPTPOS,
        "linear-attention (Gated DeltaNet) key heads (Qwen3-Next); null: no linear layers",
        hi=MAX_HEADS,
        default=None,
    )
    linear_num_value_heads: int | None = _spec(
        OPTPOS,
        "linear-attention value heads (one recurrent state each)",
        hi=MAX_HEADS,
        default=None,
    )
    linear_key_head_dim: int | None = _spec(
        OPTPOS, "linear-attention key width per head", hi=MAX_WIDTH, default=None
    )
    linear_value_head_dim: int | None = _spec(
        OPTPOS, "linear-attention value width per head", hi=MAX_WIDTH, default=None
    )
    linear_conv_kernel_dim: int | None = _spec(
        OPTPOS,
        "linear-attention short convolution width (columns kept)",
        hi=MAX_LAYERS,
        default=None,
    )
    mamba_num_heads: int | None = _spec(
        OPTPOS,
        "Mamba-2 heads of the state-space layers (one P x N state each); null: no SSM layers",
        hi=MAX_HEADS,
        default=None,
    )
    mamba_head_dim: int | None = _spec(
        OPTPOS, "Mamba-2 head width P (inner width: heads x P)", hi=MAX_WIDTH, default=None
    )
    ssm_state_size: int | None = _spec(
        OPTPOS, "Mamba-2 state width N per head", hi=MAX_WIDTH, default=None
    )
    mamba_n_groups: int | None = _spec(
        OPTPOS,
        "Mamba-2 groups of B and C (the heads of a group share them)",
        hi=MAX_HEADS,
        default=None,
    )
    mamba_d_conv: int | None = _spec(
        OPTPOS, "Mamba-2 short convolution width (columns kept)", hi=MAX_LAYERS, default=None
    )
    mamba_chunk_size: int | None = _spec(
        OPTPOS, "Mamba-2 chunk length of the chunked scan", hi=MAX_TOKENS, default=None
    )
    mamba_conv_bias: bool = _spec(BOOL, "a bias on the Mamba-2 convolution", default=True)
    mamba_bias: bool = _spec(
        BOOL, "biases on the Mamba-2 input and output projections", default=False
    )
    mamba_dt_rank: int | None = _spec(
        OPTPOS,
        "Mamba-1 step-size rank R (x_proj's low-rank step size; set: the state-space layers are "
        "Mamba-1, Jamba); null: none",
        hi=MAX_WIDTH,
        default=None,
    )
    mamba_inner_size: int | None = _spec(
        OPTPOS,
        "Mamba-1 inner width I (mamba_expand x hidden_size): x, z and one N-wide state per channel",
        hi=MAX_WIDTH,
        default=None,
    )
    mamba_gated_norm: bool = _spec(
        BOOL,
        "the Mamba-2 output's gated RMSNorm has a weight over the inner width (false: the "
        "gate alone, Falcon-H1 without mamba_rms_norm)",
        default=True,
    )
    block_types: tuple[str, ...] = _spec(
        BLOCKS,
        "one block per layer, each one mixer after one norm: mamba, attention, moe or mlp "
        "(Nemotron-H); empty: every layer is attention and an FFN",
        default=(),
    )
    block_widths: tuple[int, ...] = _spec(
        WIDTHS,
        "the FFN width of each mlp block of block_types, in order (DeciLM / Nemotron-NAS: "
        "layers of their own widths); empty: intermediate_size for every one",
        hi=MAX_WIDTH,
        default=(),
    )
    shared_intermediate_size: int | None = _spec(
        OPTPOS,
        "width of the shared expert MLP beside the routed experts (Granite 4); null: "
        "n_shared_experts x moe_intermediate_size",
        hi=MAX_WIDTH,
        default=None,
    )
    moe_latent_size: int | None = _spec(
        OPTPOS,
        "routed experts work in this width, projected from and to the hidden width "
        "(Nemotron-H); null: the hidden width",
        hi=MAX_WIDTH,
        default=None,
    )
    max_position_embeddings: int | None = _spec(
        OPTPOS,
        "context length; GPT-2's learned position table size",
        hi=MAX_POSITIONS,
        default=None,
    )
    weights_dtype: str = _spec(
        STR, "dtype the released weights use (bf16, fp8, ...)", hi=200, default="bf16"
    )
    quantization_config: Mapping[str, Any] | None = _spec(
        QUANT,
        "the checkpoint's quantization as its config.json states it (fp8 with "
        "weight_block_size, mxfp4, compressed-tensors int groups, awq, gptq); weight bytes in "
        "reports and plans follow it, scales included, unless a weight dtype is chosen",
        default=None,
    )
    parallel_attn: bool = _spec(
        BOOL, "Falcon: attention and MLP read the same normed input", default=False
    )
    new_decoder_architecture: bool = _spec(
        BOOL, "Falcon-40B style: two layer norms per block", default=False
    )
    bias: bool = _spec(
        BOOL, "Falcon/GPT-2 style: biases on every linear layer and layer norm", default=False
    )
    alibi: bool = _spec(
        BOOL, "Falcon: ALiBi position biases instead of RoPE (no rotary embedding)", default=False
    )
    origin: str = field(default="<dict>", metadata={"internal": True})
    derived: tuple[str, ...] = field(default=(), compare=False, metadata={"internal": True})
    #: mlacalc's own view of a model (:meth:`replaced`), not a model a user states
    view: bool = field(default=False, compare=False, repr=False, metadata={"internal": True})

    def __post_init__(self) -> None:
        for f in fields(self):
            if "spec" in f.metadata and _plain(getattr(self, f.name)) is not getattr(self, f.name):
                object.__setattr__(self, f.name, _plain(getattr(self, f.name)))
        values = {f.name: getattr(self, f.name) for f in fields(self) if "spec" in f.metadata}
        problems = check_values(values)
        if not problems and not self.view:
            problems = shared_layer_problems(self.shared_indexer_layers, self.num_hidden_layers)
        if problems:
            raise_problems(self.origin, problems)

    # -- derived, read-only views -------------------------------------------------
    @property
    def family(self) -> str:
        """Parameter layout: llama, gpt2, falcon, deepseek or minicpm3."""
        return self._unit().layout

    @property
    def rope(self) -> bool:
        """Its attention rotates queries and keys (RoPE): its family's (``Family.rope``; GPT-2's
        learned positions have none) unless it biases the scores with ALiBi instead (a Falcon
        with ``alibi``)."""
        return self._unit().rope and not self.alibi

    @property
    def fused_qkv(self) -> bool:
        """One projection yields the queries, keys and values (GPT-2, Falcon; StarCoder2, on
        Falcon's layout, keeps them apart): its query part splits evenly over tensor-parallel
        ranks, its K/V part by whole K/V heads (each rank ``ceil(n_kv / tp)`` of them,
        duplicated where ranks outnumber them), as apart ones do."""
        return self._unit().fused_qkv

    @property
    def layer_norm(self) -> bool:
        """Its norms are LayerNorms with a bias, ``2 x`` the width a norm (GPT-2, Falcon,
        StarCoder2), not RMSNorms (a weight)."""
        return self._unit().layer_norm

    @property
    def gated_mlp(self) -> bool:
        """Its dense MLP is gated (gate, up, down): not GPT-2's, Falcon's or StarCoder2's, nor
        one whose architecture says its MLPs are up and down only (Nemotron-H's relu2)."""
        unit = self._unit()
        arch = unit.archs.get(self.model_type)
        return unit.gated_mlp and not (arch is not None and arch.ungated_mlp)

    def _unit(self) -> Any:
        unit = registry.family_of(self.model_type)
        assert unit is not None  # validated in __post_init__
        return unit

    @property
    def quantization(self) -> Any:
        """The checkpoint's :class:`~mlacalc.models.quantization.QuantScheme`, or None
        (unquantized)."""
        if self.quantization_config is None:
            return None
        # read once a model: a search asks it some 20,000 times (its fields are frozen; the
        # scheme is a frozen dataclass, kept beside the fields, not one of them)
        kept = self.__dict__.get("_quantization")
        if kept is None:
            kept = scheme_of(self.quantization_config, self.origin)
            self.__dict__["_quantization"] = kept
        return kept

    @property
    def is_mla(self) -> bool:
        """Whether attention is MLA (``kv_lora_rank`` is set)."""
        return self.kv_lora_rank is not None

    @property
    def variant(self) -> str:
        """``"mla"``, ``"mha"``, ``"mqa"`` or ``"gqa"``, read from the fields."""
        if self.is_mla:
            return "mla"
        if self.num_key_value_heads == self.num_attention_heads:
            return "mha"
        if self.num_key_value_heads == 1:
            return "mqa"
        return "gqa"

    @property
    def is_moe(self) -> bool:
        """Whether some FFN layers are mixtures of routed experts."""
        return self.n_routed_experts > 0

    @property
    def routing_groups(self) -> tuple[int, int] | None:
        """``(n_group, topk_group)`` when a token's experts come from only some of the expert
        groups (DeepSeek-V3's group-limited routing: 4 of 8), None when routing may pick any
        expert (one group, every group allowed, or DeepSeek-V2's ``greedy`` method, which
        reads no group)."""
        if not self.is_moe or self.n_group <= 1 or self.topk_group >= self.n_group:
            return None
        if self.topk_method == "greedy":
            return None
        return self.n_group, self.topk_group

    @property
    def label(self) -> str:
        """The name reports show."""
        return self.display_name or self.name

    @property
    def every_indexer_shared(self) -> bool:
        """Whether no layer of this DSA model runs its own indexer (a model of only shared
        layers: what :func:`~mlacalc.models.architecture.kind_model` makes of that kind)."""
        shared = set(self.shared_indexer_layers)
        return bool(shared) and all(i in shared for i in range(1, self.num_hidden_layers + 1))

    def is_sparse_layer(self, index: int) -> bool:
        """Whether decoder layer ``index`` (0-based) is block-sparse (MiniMax-M3): listed in
        ``sparse_attention_layers``, or any layer when that is empty and the fields are set."""
        if self.sparse_block_size is None:
            return False
        listed = self.sparse_attention_layers
        return index + 1 in listed if listed else 0 <= index < self.num_hidden_layers

    def is_moe_layer(self, index: int) -> bool:
        """Whether decoder layer ``index`` (0-based) has a MoE FFN (DeepSeek's rule; a model
        with ``block_types``: whether the layer is a ``moe`` block)."""
        if self.block_types:
            return index < len(self.block_types) and self.block_types[index] == "moe"
        return (
            self.is_moe
            and index >= self.first_k_dense_replace
            and (index - self.moe_layer_offset) % self.moe_layer_freq == 0
        )

    @property
    def num_moe_layers(self) -> int:
        """How many decoder layers have a MoE FFN (counted in closed form)."""
        if self.block_types:
            return self.block_types.count("moe")
        if not self.is_moe or self.first_k_dense_replace >= self.num_hidden_layers:
            return 0
        freq, start, stop = self.moe_layer_freq, self.first_k_dense_replace, self.num_hidden_layers
        # the first layer at or after start with (i - offset) a multiple of freq
        first = start + (self.moe_layer_offset - start) % freq
        return 0 if first >= stop else (stop - 1 - first) // freq + 1

    def width_warnings(self) -> list[str]:
        """MLA widths beyond the hidden state they are computed from, one sentence each (the
        field, the value, the bound, what it means and the fix): ``kv_lora_rank``,
        ``q_lora_rank`` or ``qk_rope_head_dim`` above ``hidden_size``. Each is a linear image of
        the hidden_size-wide hidden state, so it holds at most hidden_size independent
        dimensions: the rest hold nothing, yet are cached and computed, and counted as given.
        Computable, so said, not refused (:meth:`no_moe_layer_warning`'s way); [] otherwise."""
        if not self.is_mla:
            return []
        d = self.hidden_size
        out = []
        for name, what in (
            ("kv_lora_rank", "the KV latent"),
            ("q_lora_rank", "the query latent"),
            ("qk_rope_head_dim", "the shared RoPE key"),
        ):
            value = getattr(self, name)
            if value is not None and value > d:
                out.append(
                    f"{self.label}: {name} {value:,} is above hidden_size {d:,}: {what} is "
                    f"computed from the {d:,}-wide hidden state, so it holds at most {d:,} "
                    f"independent dimensions and the extra {value - d:,} hold nothing (they "
                    f"are still counted: cache, weights, FLOPs); set {name} to at most {d:,} "
                    "if that is not meant"
                )
        return out

    def no_moe_layer_warning(self) -> str | None:
        """The sentence for routed experts declared with no MoE layer to hold them (a dense-layer
        count, a MoE frequency or offset, or a block list that leaves none), naming the field
        and the fix; None otherwise. Valid as transformers builds it (a config cut to fewer
        layers than its dense ones is one), so said, not refused: a :class:`MlacalcWarning`
        from :func:`model_from_dict`, :func:`mlacalc.load_model`,
        :func:`mlacalc.import_hf_config` and :meth:`with_changes`, a warning line on the
        command line."""
        n = self.num_hidden_layers
        if not self.n_routed_experts or self.num_moe_layers:
            return None
        if self.block_types:
            why, fix = "block_types lists no 'moe' block", "add 'moe' blocks to block_types"
        elif self.first_k_dense_replace >= n:
            why = f"first_k_dense_replace {self.first_k_dense_replace} of {n} layers"
            fix = "lower first_k_dense_replace"
        else:  # the first layer the frequency (from its offset) makes a MoE is past the last
            off = self.moe_layer_offset
            offset = f", moe_layer_offset {off}" if off else ""
            why = (
                f"moe_layer_freq {self.moe_layer_freq}{offset} after "
                f"first_k_dense_replace {self.first_k_dense_replace}, of {n} layers"
            )
            fix = "lower moe_layer_freq" + (" or moe_layer_offset" if offset else "")
        return (
            f"{self.label} declares {self.n_routed_experts} routed experts but no MoE layer "
            f"({why}): every layer is counted dense; {fix} if that is not meant"
        )

    def to_dict(self) -> dict[str, Any]:
        """The configuration as a plain dict of the schema's fields."""
        out = {}
        for f in fields(self):
            if "spec" not in f.metadata:
                continue
            value = getattr(self, f.name)
            out[f.name] = list(value) if isinstance(value, tuple) else _thaw(value)
        return out

    def with_changes(self, **changes: Any) -> ModelConfig:
        """A copy with some fields changed, validated again: the way to build a what-if model
        in code (``base.with_changes(kv_lora_rank=256)``).

        The copy does not claim the original's identity: unless ``name=`` is given, its name
        carries the changes (``deepseek-v3-kv-lora-rank-256``) and, unless ``display_name=``
        is, its label says them (``DeepSeek-V3 with kv_lora_rank=256``); ``name=`` alone sets
        the label too. Its ``source`` begins ``derived from deepseek-v3 by
        with_changes(kv_lora_rank=256)`` unless ``source=`` is given, and it has no aliases.
        Changing only ``name``, ``display_name``, ``source``, ``aliases`` or ``notes`` keeps
        everything else. An MLA model's ``num_key_value_heads`` (which repeats the query heads)
        follows a change of ``num_attention_heads`` unless given. A value that is not valid is
        a :class:`ConfigError` whose source is ``with_changes(...)``, not the file the
        original came from. Routed experts left without a MoE layer are a
        :class:`~mlacalc.words.errors.MlacalcWarning`, as in :func:`model_from_dict`.
        ``kv_lora_rank=None`` alone on an MLA model is refused in one sentence: its MHA, GQA and
        MQA equivalents are :func:`mlacalc.models.variants.as_variant`'s.
        """
        changes = {k: _plain(v) for k, v in changes.items()}
        said = ", ".join(f"{k}={_show(v)}" for k, v in changes.items())
        origin = f"with_changes({said if len(said) <= 200 else said[:197] + '...'})"
        unknown = [k for k in changes if k not in SPECS]
        if unknown:
            raise_problems(origin, [_unknown_field(k) for k in unknown])
        if self.kv_lora_rank is not None and "kv_lora_rank" in changes:
            _refuse_half_mla(self, changes, origin)
        groups = changes.get("n_group")
        if (
            isinstance(groups, int)
            and groups > 1
            and self.n_group <= 1
            and "topk_group" not in changes
        ):  # the copy would carry the ungrouped model's topk_group 1: the tightest limit
            raise_problems(origin, [_topk_group_required(groups)])
        mla = changes.get("kv_lora_rank", self.kv_lora_rank) is not None
        if mla and "num_attention_heads" in changes and "num_key_value_heads" not in changes:
            # MLA files repeat the query heads here (as Hugging Face does): kept in step
            changes["num_key_value_heads"] = changes["num_attention_heads"]
        changed = [k for k in changes if k not in _IDENTITY]
        # a field now given is no longer derived: its note would say a rule it no longer
        # follows (head_dim = 128 from hidden_size / heads, beside --set head_dim=128)
        kept = tuple(
            n for n in self.derived if not any(str(n).startswith(f"{k} = ") for k in changed)
        )
        if len(kept) < len(self.derived):
            changes["derived"] = kept
        if changed:
            what = ", ".join(f"{k}={_show(changes[k])}" for k in changed)
            if "name" not in changes:
                changes["name"] = _slug(
                    "-".join([self.name, *(_name_part(k, changes[k]) for k in changed)])
                )
                changes.setdefault("display_name", _with_words(self.label, changed, changes))
            if "source" not in changes:
                line = f"derived from {self.name} by with_changes({what})"[:MAX_TEXT]
                changes["source"] = (line, *self.source[: MAX_ITEMS - 1])
            changes.setdefault("aliases", ())
        if "name" in changes and "display_name" not in changes:
            changes["display_name"] = changes["name"]
        return _warned(self._copy({**changes, "view": False}, origin), stacklevel=3)

    def replaced(self, **changes: Any) -> ModelConfig:
        """A copy with some fields changed that keeps the name, label and source: mlacalc's
        own views of the same model (one layer of it, one kind of its layers, a measured
        module's heads). A what-if model is :meth:`with_changes`'s."""
        return self._copy({**changes, "view": True}, self.origin)

    def _copy(self, changes: dict[str, Any], origin: str) -> ModelConfig:
        for key in (
            "full_attention_layers",
            "block_types",
            "block_widths",
            "shared_indexer_layers",
            "sparse_attention_layers",
            "compress_ratios",
            "hash_moe_layers",
        ):
            if isinstance(changes.get(key), list):
                changes[key] = tuple(changes[key])
        for key in ("source", "aliases"):
            if isinstance(changes.get(key), (str, list)):
                value = changes[key]
                changes[key] = (value,) if isinstance(value, str) else tuple(value)
        if isinstance(changes.get("quantization_config"), Mapping):
            changes["quantization_config"] = _freeze(changes["quantization_config"])
        return replace(self, origin=origin, **changes)


def _refuse_half_mla(model: ModelConfig, changes: dict[str, Any], origin: str) -> None:
    """``kv_lora_rank=None`` on an MLA model that keeps its other MLA widths: one short problem
    pointing at the attention variants (a trial's ``--set kv_lora_rank=null`` listed four MLA
    fields and ``head_dim`` in one long line and said nothing of them)."""
    if changes["kv_lora_rank"] is not None:
        return
    kept = [k for k in _MLA_WIDTHS if changes.get(k, getattr(model, k)) is not None]
    if kept:
        raise_problems(
            origin,
            [
                (
                    "kv_lora_rank",
                    f"null would leave {model.name} half MLA, its other MLA widths kept; to "
                    f"see it as MHA, GQA or MQA, run mlacalc compare {model.name} --as-variants",
                    None,
                )
            ],
        )


#: the MLA widths beside kv_lora_rank
_MLA_WIDTHS = ("q_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")

#: the fields that say what a model is called and where it comes from, not what it is
_IDENTITY = ("name", "display_name", "source", "aliases", "notes")


def _with_words(label: str, changed: list[str], changes: dict[str, Any], limit: int = 200) -> str:
    """``'DeepSeek-V3 with kv_lora_rank=256, ...'``: as many whole ``field=value`` changes as
    fit in ``limit`` characters, then how many more (never a field cut mid-word)."""
    parts = [f"{k}={_show(changes[k])}" for k in changed]
    for n in range(len(parts), 0, -1):
        more = f" and {len(parts) - n} more" if n < len(parts) else ""
        text = f"{label} with {', '.join(parts[:n])}{more}"
        if len(text) <= limit:
            return text
    return f"{label} with {len(parts)} changes"[:limit]


def _name_part(key: str, value: Any) -> str:
    """One change as a part of a derived model's name (``kv_lora_rank-256``; a list or a
    mapping by its field alone)."""
    if isinstance(value, bool) or value is None:
        return f"{key}-{str(value).lower()}"
    if whole(value) is not None or isinstance(value, str):
        return f"{key}-{value}"[:60]
    if isinstance(value, (list, tuple)):  # its entries: [2, 4, 6] -> key-2-4-6
        text = "-".join([key, *(str(v) for v in value)] if value else [key, "none"])
        # a long list cut keeps a checksum of the whole, so two lists stay two names
        return text if len(text) <= 60 else f"{text[:51]}-{zlib.crc32(text.encode()):08x}"
    return key


_DATACLASS_INIT = ModelConfig.__init__


def _init(self: ModelConfig, *args: Any, **values: Any) -> None:
    """The constructor: every field by name, the required ones given; anything else is one
    :class:`ConfigError` naming the fields and the way to build a model from fewer (Python's
    own "missing 9 required keyword-only arguments" named neither)."""
    unknown = [k for k in values if k not in _INIT_FIELDS]
    missing = [k for k in _REQUIRED_INIT if k not in values]
    if args or unknown or missing:
        if args:
            problem = f"takes fields by name only, got {len(args)} positional value(s)"
        elif unknown:
            problem = _unknown_field(unknown[0])[1] + f" ({_unknown_field(unknown[0])[2]})"
        elif len(missing) == 1:
            problem = "is required and was not given"
        else:  # the constructor's problem, not one field's: no field named before the list
            problem = f"misses {len(missing)} required fields: {', '.join(missing)}"
        fix = (
            "build a model from a mapping with mlacalc.model_from_dict({...}) (absent fields "
            "take the family's defaults), or change a loaded one with model.with_changes(...)"
        )
        field = unknown[0] if unknown else missing[0] if len(missing) == 1 else None
        raise ConfigError(problem, source="ModelConfig(...)", field=field, fix=fix)
    _DATACLASS_INIT(self, **values)


_INIT_FIELDS = {f.name for f in fields(ModelConfig) if f.init}
_REQUIRED_INIT = [f.name for f in fields(ModelConfig) if f.init and f.default is MISSING]
ModelConfig.__init__ = _init  # type: ignore[method-assign]

#: field name -> its declaration.
SPECS: dict[str, Spec] = {
    f.name: f.metadata["spec"] for f in fields(ModelConfig) if "spec" in f.metadata
}
#: field -> (kind, meaning): every key a YAML file may hold.
FIELDS: dict[str, tuple[str, str]] = {name: (s.kind, s.doc) for name, s in SPECS.items()}
#: field -> inclusive upper bound, for every bounded field.
BOUNDS: dict[str, int] = {name: s.hi for name, s in SPECS.items() if s.hi is not None}

# every dataclass field is either a schema field or one of the loader's own records
assert all("spec" in f.metadata or f.metadata.get("internal") for f in fields(ModelConfig))

# fields every model file states: the size of a model is never guessed
REQUIRED = (
    "name",
    "model_type",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "vocab_size",
    "intermediate_size",
    "num_key_value_heads",
    "tie_word_embeddings",
)
_MLA = ("kv_lora_rank", "q_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")
# fields every family fills by a rule when they are absent
_MLA_FIX = "give kv_lora_rank, d_c, the MLA latent width: 512 in DeepSeek-V3 and GLM-5.1"
_FAMILY_FILLED = ("head_dim", "num_key_value_heads", "tie_word_embeddings")
_MOE_REQUIRED = ("moe_intermediate_size", "num_experts_per_tok")
_MOE_ONLY = (
    "n_shared_experts",
    "moe_intermediate_size",
    "num_experts_per_tok",
    "first_k_dense_replace",
    "topk_method",
    "n_group",
    "topk_group",
)


def model_types() -> list[str]:
    """Every ``model_type`` the schema accepts (one family unit in ``mlacalc.models.hf`` each)."""
    return registry.model_types()


# -----------------------------------------------------------------------------------
# validation of values (kinds and ranges first, then the relations between fields)


def _show(value: Any) -> str:
    """A value for a message, never long: big numbers by digit count, long text cut."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**15:
        return (
            f"a {len(str(abs(value))):,}-digit number"
            if abs(value) < 10**4000
            else "a number of over 4,000 digits"
        )
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if isinstance(value, (list, tuple)):  # as a file or --set writes it: [2, 4, 6]
        text = "[" + ", ".join(_show(v) for v in value[:20]) + "]"
    elif isinstance(value, dict):
        text = f"a mapping of {len(value)} entries"
    else:
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _unknown_field(key: Any) -> Problem:
    name = str(key)[:60]
    close = get_close_matches(name, list(SPECS), n=1)
    fix = f"did you mean '{close[0]}'?" if close else "see docs/config-schema.md for the fields"
    return (name, "is not a field of the model schema", fix)


def _model_type_problem(model_type: Any) -> Problem | None:
    if not isinstance(model_type, str) or not model_type.strip():
        return (
            "model_type",
            f"must be a non-empty string, got {_show(model_type)}",
            "use one of: " + ", ".join(registry.model_types()),
        )
    if registry.family_of(model_type) is None and model_type in registry.NOT_MODELLED:
        return (
            "model_type",
            f"model_type {_show(model_type)} is not modelled: {registry.NOT_MODELLED[model_type]}",
            "supported: " + ", ".join(registry.model_types()),
        )
    if registry.family_of(model_type) is None:
        near = registry.nearest_model_type(model_type)
        hint = f"did you mean '{near}'? " if near else ""
        return (
            "model_type",
            f"unsupported model_type {_show(model_type)}",
            f"{hint}supported: " + ", ".join(registry.model_types()),
        )
    return None


def check_values(values: Mapping[str, Any], *, relations: bool = True) -> list[Problem]:
    """Every problem with a mapping of schema values: kinds and bounds of each value, then
    (unless ``relations`` is false) the relations between the fields whose values are
    valid."""
    problems: list[Problem] = []
    bad: set[str] = set()
    for name, value in values.items():
        spec = SPECS.get(name)
        if spec is None:
            problems.append(_unknown_field(name))
            bad.add(str(name))
            continue
        problem = spec.check(name, value)
        if problem is None and name == "model_type":
            problem = _model_type_problem(value)
        if problem is None and name == "weights_dtype":
            try:
                canonical_dtype(value)
            except UnknownDtypeError:
                problem = (
                    name,
                    f"unknown dtype {_show(value)}",
                    "use one of: " + ", ".join(DTYPE_BITS),
                )
        if problem is not None:
            problems.append(problem)
            bad.add(name)
    if relations:
        have = set(values) - bad
        problems += _relations({k: values[k] for k in have}, have)
    return problems


def _relations(v: Mapping[str, Any], have: set[str]) -> list[Problem]:
    """Checks between fields, each run only when the fields it reads are valid."""
    unit = registry.family_of(v["model_type"]) if "model_type" in have else None
    out = _head_problems(v, have)
    if v.get("kv_lora_rank") is not None:
        out += _mla_problems(v, have)
    elif unit is not None and unit.mla and "kv_lora_rank" not in v:
        pass  # reported missing: that one field is the problem, not the MLA fields it strays
    else:
        out += _not_mla_problems(v, have, unit)
    out += _position_problems(v, have, unit)
    out += _expert_problems(v, have, unit)
    out += _mtp_problems(v, have, unit)
    out += _indexer_problems(v, have, unit)
    out += _shared_indexer_problems(v, have, unit)
    out += _sparse_block_problems(v, have)
    out += _compressed_problems(v, have, unit)
    out += _linear_problems(v, have, unit)
    out += _mamba_problems(v, have, unit)
    out += _quantization_layout_problems(v, have, unit)
    out += _alibi_problems(v, have, unit)
    return out


def _valid(have: set[str], *names: str) -> bool:
    """Whether every named field passed its own check (a relation reads only those)."""
    return all(n in have for n in names)


def _head_problems(v: Mapping[str, Any], have: set[str]) -> list[Problem]:
    """KV heads against query heads, and Gemma 4's full-layer attention fields (theirs only,
    an even global head width, global KV heads that divide the query heads)."""
    out: list[Problem] = []
    n_h, n_kv = v.get("num_attention_heads"), v.get("num_key_value_heads")
    if _valid(have, "num_attention_heads", "num_key_value_heads"):
        if n_kv > n_h:
            out.append(
                (
                    "num_key_value_heads",
                    f"{n_kv} KV heads exceed num_attention_heads ({n_h})",
                    "num_key_value_heads must be at most num_attention_heads",
                )
            )
        elif n_h % n_kv:
            out.append(
                (
                    "num_key_value_heads",
                    f"num_attention_heads {n_h} is not divisible by num_key_value_heads {n_kv}",
                    "each KV head must serve the same number of query heads",
                )
            )
    if _valid(have, "model_type") and v["model_type"] != "gemma4_text":
        for name in _GLOBAL_ATTENTION:  # only Gemma 4's full layers differ this way
            if v.get(name):
                out.append(
                    (
                        name,
                        f"is a Gemma 4 field (full layers' own attention); {v['model_type']} "
                        "does not model it",
                        "remove it, or use model_type gemma4_text",
                    )
                )
    g_dim = v.get("global_head_dim")
    if _valid(have, "global_head_dim") and g_dim and g_dim % 2:
        out.append(
            (
                "global_head_dim",
                f"RoPE rotates pairs of dimensions; {g_dim} is odd",
                "use an even number",
            )
        )
    g_kv = v.get("num_global_key_value_heads")
    if _valid(have, "num_attention_heads", "num_global_key_value_heads") and g_kv and n_h % g_kv:
        out.append(
            (
                "num_global_key_value_heads",
                f"num_attention_heads {n_h} is not divisible by {g_kv}",
                "each KV head must serve the same number of query heads",
            )
        )
    return out + _sliding_heads_problems(v, have)


#: model types whose attention has value heads of their own width (v_head_dim without MLA)
#: and sliding layers of their own KV heads (sliding_key_value_heads)
_OWN_VALUE_WIDTH = ("mimo_v2_flash",)


def _sliding_heads_problems(v: Mapping[str, Any], have: set[str]) -> list[Problem]:
    """sliding_key_value_heads: MiMo-V2-Flash's only, at most the query heads, dividing them."""
    s_kv, n_h = v.get("sliding_key_value_heads"), v.get("num_attention_heads")
    if not _valid(have, "sliding_key_value_heads") or s_kv is None:
        return []
    if _valid(have, "model_type") and v["model_type"] not in _OWN_VALUE_WIDTH:
        return [
            (
                "sliding_key_value_heads",
                f"is a MiMo-V2-Flash field (sliding layers' own KV heads); {v['model_type']} "
                "does not model it",
                "remove it, or use model_type mimo_v2_flash",
            )
        ]
    if _valid(have, "num_attention_heads") and (s_kv > n_h or n_h % s_kv):
        return [
            (
                "sliding_key_value_heads",
                f"{s_kv} KV heads do not divide num_attention_heads {n_h}",
                "each KV head must serve the same number of query heads",
            )
        ]
    full, n = v.get("full_attention_layers") or (), v.get("num_hidden_layers")
    others = isinstance(n, int) and bool(full) and len(set(full)) < n  # layers meant sliding
    if _valid(have, "sliding_window") and v.get("sliding_window") is None and others:
        # without a window no layer is sliding, and the sliding layers' own KV heads and sinks
        # would vanish: another model's counts, not this one's with every token kept
        return [
            (
                "sliding_window",
                "is null, but the sliding layers keep their own KV heads "
                f"(sliding_key_value_heads {s_kv}) and sinks, which a layer without a window "
                "does not model",
                "give the window (MiMo-V2-Flash: 129)",
            )
        ]
    return []


#: MLA without a RoPE width (0 or null beside kv_lora_rank), in one message whichever was
#: written: 0 said "use null for none" and null "is required" (trial10)
NO_ROPE: Problem = (
    "qk_rope_head_dim",
    "is MLA's decoupled RoPE key width, which MLA needs: an even number, at least 2 (mlacalc "
    "models no MLA without RoPE)",
    "use 2 for the least (DeepSeek's is 64); null only beside a null kv_lora_rank (no MLA)",
)


def _mla_problems(v: Mapping[str, Any], have: set[str]) -> list[Problem]:
    """With kv_lora_rank set (MLA): every MLA width stated, an even RoPE width, no head_dim,
    KV heads repeating the query heads, no sliding window."""
    out: list[Problem] = []
    for name in _MLA[2:]:
        if name == "qk_rope_head_dim" and name in v and v[name] is None:
            out.append(NO_ROPE)
        elif name in v and v[name] is None:
            out.append(
                (
                    name,
                    "is required when kv_lora_rank is set (MLA)",
                    f"add it: {SPECS[name].doc}",
                )
            )
    rope = v.get("qk_rope_head_dim")
    if _valid(have, "qk_rope_head_dim") and rope is not None and rope % 2:
        out.append(
            (
                "qk_rope_head_dim",
                f"RoPE rotates pairs of dimensions; {rope} is odd",
                "use an even number",
            )
        )
    if v.get("head_dim") is not None:
        out.append(
            (
                "head_dim",
                "with kv_lora_rank set (MLA), a model states qk_nope_head_dim, "
                "qk_rope_head_dim and v_head_dim instead of head_dim",
                "remove head_dim",
            )
        )
    n_h, n_kv = v.get("num_attention_heads"), v.get("num_key_value_heads")
    if _valid(have, "num_attention_heads", "num_key_value_heads") and n_kv != n_h:
        out.append(
            (
                "num_key_value_heads",
                f"an MLA model must repeat num_attention_heads "
                f"({n_h}) here, as Hugging Face does; got {n_kv}",
                f"set num_key_value_heads: {n_h}",
            )
        )
    if v.get("sliding_window") is not None:
        out.append(
            (
                "sliding_window",
                "sliding windows are not modelled for MLA",
                "set sliding_window: null",
            )
        )
    return out


def _not_mla_problems(v: Mapping[str, Any], have: set[str], unit: Any) -> list[Problem]:
    """Without kv_lora_rank (MHA/GQA/MQA): no MLA fields, and a head_dim that is stated, even
    under RoPE, and for GPT-2 exactly hidden_size over the heads."""
    out: list[Problem] = [
        (
            name,
            "is an MLA field but kv_lora_rank is not set",
            "set kv_lora_rank for an MLA model, or remove this field",
        )
        for name in _MLA[1:]
        if v.get(name) is not None
        and not (name == "q_lora_rank" and _compressed_family(unit))
        and not (name == "v_head_dim" and v.get("model_type") in _OWN_VALUE_WIDTH)
    ]
    if v.get("model_type") in _OWN_VALUE_WIDTH and "v_head_dim" in v and v["v_head_dim"] is None:
        out.append(
            (
                "v_head_dim",
                f"is required for model_type {v['model_type']} (the value heads' width)",
                "state the per-head value width (MiMo-V2-Flash: 128)",
            )
        )
    if not _valid(have, "head_dim"):
        return out
    head_dim, n_h = v["head_dim"], v.get("num_attention_heads")
    if head_dim is None:
        out.append(("head_dim", "is required for MHA/GQA/MQA models", "state the per-head width"))
    elif unit is not None and unit.rope and not v.get("alibi") and head_dim % 2:
        out.append(
            (
                "head_dim",
                f"RoPE rotates pairs of dimensions; {head_dim} is odd",
                "use an even number",
            )
        )
    elif (
        unit is not None
        and unit.layout == "gpt2"
        and _valid(have, "num_attention_heads", "hidden_size")
        and head_dim * n_h != v["hidden_size"]
    ):
        out.append(
            (
                "head_dim",
                f"GPT-2 needs head_dim x num_attention_heads = hidden_size; "
                f"{head_dim} x {n_h} != {v['hidden_size']}",
                None,
            )
        )
    return out


def _position_problems(v: Mapping[str, Any], have: set[str], unit: Any) -> list[Problem]:
    """GPT-2's learned position table needs its size."""
    if (
        unit is not None
        and unit.layout == "gpt2"
        and _valid(have, "max_position_embeddings")
        and v["max_position_embeddings"] is None
    ):
        return [
            (
                "max_position_embeddings",
                "GPT-2 learns a position table of this size; it is required",
                None,
            )
        ]
    return []


def _expert_problems(v: Mapping[str, Any], have: set[str], unit: Any) -> list[Problem]:
    """Routed experts only in a family with MoE layers, with their width and a top-k within
    their number; none where the family needs them; no expert fields without experts."""
    experts = v.get("n_routed_experts", 0) if _valid(have, "n_routed_experts") else None
    out: list[Problem] = []
    if experts:
        if unit is not None and not unit.moe:
            out.append(
                (
                    "n_routed_experts",
                    f"model_type {v['model_type']} has no MoE layers",
                    "use a model_type whose family has experts, such as mixtral or deepseek_v3",
                )
            )
        if _valid(have, "moe_intermediate_size") and v["moe_intermediate_size"] is None:
            out.append(("moe_intermediate_size", "is required when n_routed_experts > 0", None))
        out += _group_problems(v, have, experts)
        if _valid(have, "num_experts_per_tok") and not 0 < v["num_experts_per_tok"] <= experts:
            out.append(
                (
                    "num_experts_per_tok",
                    f"must be between 1 and n_routed_experts "
                    f"({experts}), got {v['num_experts_per_tok']}",
                    None,
                )
            )
    elif experts == 0:
        if unit is not None and unit.requires_experts:
            out.append(
                (
                    "n_routed_experts",
                    f"a {v['model_type']} model needs its experts",
                    "set n_routed_experts (num_local_experts)",
                )
            )
        else:
            stray = [
                n for n in ("n_shared_experts", "num_experts_per_tok") if _valid(have, n) and v[n]
            ]
            if stray:
                out.append(
                    (
                        stray[0],
                        f"{' and '.join(stray)} set but n_routed_experts is 0",
                        "set n_routed_experts or remove the expert fields",
                    )
                )
    return out


def _topk_group_required(groups: int) -> Problem:
    """``n_group`` stated (or changed) above 1 with no ``topk_group``: it would be 1."""
    return (
        "topk_group",
        f"is required when n_group > 1 (n_group {groups}): absent it would be 1, a "
        "token's experts from one group",
        f"state the groups a token's experts may come from (DeepSeek-V3: 4 of 8); "
        f"topk_group {groups} means no limit",
    )


def _group_problems(v: Mapping[str, Any], have: set[str], experts: int) -> list[Problem]:
    """Group-limited routing's groups (``n_group``, ``topk_group``, DeepSeek-V3's names): the
    groups split the routed experts evenly, and a token picks at most all of them."""
    if not _valid(have, "n_group"):
        return []
    groups = v.get("n_group", 1)
    out: list[Problem] = []
    if experts % groups:
        near = max(g for g in range(1, min(groups, experts) + 1) if experts % g == 0)
        out.append(
            (
                "n_group",
                f"{groups} groups do not split n_routed_experts {experts} evenly",
                f"use a divisor of {experts} (such as {near}), or 1 for no group limit",
            )
        )
    if groups > 1 and "topk_group" not in v:
        # absent it would be 1, the tightest limit (one group a token): never what a file
        # stating groups means (DeepseekV3Config's own default is 4)
        out.append(_topk_group_required(groups))
    elif _valid(have, "topk_group") and v.get("topk_group", 1) > groups:
        out.append(
            (
                "topk_group",
                f"{v['topk_group']} is more than n_group ({groups})",
                f"use at most n_group ({groups}); topk_group = n_group means no limit",
            )
        )
    elif (
        not out
        and _valid(have, "topk_group", "num_experts_per_tok")
        and v.get("topk_group", 1) < groups
        and v["num_experts_per_tok"] <= experts  # else that field's own error alone
        and v.get("topk_group", 1) * (experts // groups) < v["num_experts_per_tok"]
    ):
        size, k = experts // groups, v["num_experts_per_tok"]
        out.append(
            (
                "topk_group",
                f"{v['topk_group']} groups of {size} experts hold fewer than "
                f"num_experts_per_tok {k}",
                f"use at least {-(-k // size)} (a token's experts come from its groups)",
            )
        )
    return out


def _mtp_problems(v: Mapping[str, Any], have: set[str], unit: Any) -> list[Problem]:
    """Multi-token-prediction modules only for a family that models them."""
    if (
        _valid(have, "num_nextn_predict_layers")
        and v["num_nextn_predict_layers"]
        and unit is not None
        and not unit.mtp
    ):
        return [
            (
                "num_nextn_predict_layers",
                f"MTP modules are modelled for DeepSeek-style models only, not {v['model_type']}",
                "remove num_nextn_predict_layers",
            )
        ]
    return []


def _alibi_problems(v: Mapping[str, Any], have: set[str], unit: Any) -> list[Problem]:
    """ALiBi in place of RoPE only where it is modelled: Falcon's layout (FalconConfig)."""
    if _valid(have, "alibi") and v["alibi"] and unit is not None and unit.layout != "falcon":
        return [
            (
                "alibi",
                f"ALiBi position biases are modelled for Falcon only, not {unit.layout}",
                "remove alibi (or set it false)",
            )
        ]
    return []


def _quantization_layout_problems(v: Mapping[str, Any], have: set[str], unit: Any) -> list[Problem]:
    """Checkpoint quantization only for the layouts whose checkpoint tensors are listed."""
    if (
        _valid(have, "quantization_config")
        and v["quantization_config"] is not None
        and unit is not None
        and unit.layout in ("gpt2", "falcon")
    ):
        return [
            (
                "quantization_config",
                f"checkpoint quantization is modelled for the Llama, DeepSeek and MiniCPM3 "
                f"layouts, not {unit.layout} (its checkpoint tensors are not listed)",
                "remove quantization_config to size the weights with weights_dtype",
            )
        ]
    return []


#: the widths of linear-attention layers: all five for a family with them, none otherwise
_LINEAR = (
    "linear_num_key_heads",
    "linear_num_value_heads",
    "linear_key_head_dim",
    "linear_value_head_dim",
    "linear_conv_kernel_dim",
)


def _linear_problems(v: Mapping[str, Any], have: set[str], unit: Any) -> list[Problem]:
    """A family with linear-attention layers needs their widths; another family has none."""
    valid = [n for n in _LINEAR if n in have]
    if unit is not None and unit.linear:
        missing = [
            (
                n,
                f"is required for model_type {v['model_type']} (linear-attention layers)",
                f"add it: {SPECS[n].doc}",
            )
            for n in valid
            if v[n] is None
        ]
        if missing:
            return missing
    stated = [n for n in valid if v[n] is not None]
    if unit is not None and not unit.linear and stated:
        return [
            (
                stated[0],
                f"linear-attention layers are not modelled for model_type {v['model_type']}",
                "remove the linear_* fields; qwen3_next and kimi_linear have such layers",
            )
        ]
    if "linear_num_key_heads" in have and "linear_num_value_heads" in have:
        hk, hv = v["linear_num_key_heads"], v["linear_num_value_heads"]
        if hk and hv and hv % hk:
            return [
                (
                    "linear_num_value_heads",
                    f"{hv} is not a multiple of linear_num_key_heads {hk}",
                    "each key head serves a whole number of value heads",
                )
            ]
    return []


#: the widths of Mamba-2 layers: all for a family with them, none otherwise
_MAMBA = ("mamba_num_heads", "mamba_head_dim", "ssm_state_size", "mamba_n_groups", "mamba_d_conv")


#: the widths of Mamba-1 layers (with ssm_state_size and mamba_d_conv)
_MAMBA1 = ("mamba_dt_rank", "mamba_inner_size")


def _mamba1_problems(v: Mapping[str, Any], have: set[str], unit: Any, one: list) -> list[Problem]:
    """Mamba-1 widths: all of them, a family with Mamba-1 layers, no Mamba-2 heads."""
    if unit is not None and not any(getattr(a, "mamba1", False) for a in unit.archs.values()):
        return [
            (
                one[0],
                f"Mamba-1 layers are not modelled for model_type {v['model_type']}",
                "remove the Mamba-1 fields; jamba has them",
            )
        ]
    needed = (*_MAMBA1, "ssm_state_size", "mamba_d_conv")
    missing = [n for n in needed if n in have and v[n] is None]
    if missing:
        return [(n, "is required with Mamba-1 layers", f"add it: {SPECS[n].doc}") for n in missing]
    for n in ("mamba_num_heads", "mamba_head_dim", "mamba_n_groups"):
        if n in have and v[n] is not None:
            return [(n, "is a Mamba-2 width; Mamba-1 layers have none", "remove it")]
    return []


def _mamba_problems(v: Mapping[str, Any], have: set[str], unit: Any) -> list[Problem]:
    """Mamba-2 widths: all or none, the heads a multiple of the groups; a block list as long
    as the layers and naming mamba only with the widths."""
    valid = [n for n in _MAMBA if n in have]
    stated = [n for n in valid if v[n] is not None]
    blocks = v.get("block_types") or () if "block_types" in have else ()
    archs = unit.archs.values() if unit is not None else ()
    one = [n for n in _MAMBA1 if n in have and v[n] is not None]
    if one:  # Mamba-1 layers (Jamba): their own widths, none of Mamba-2's heads
        return _mamba1_problems(v, have, unit, one)
    ssm = any(getattr(a, "mamba", False) for a in archs)
    if (stated or "mamba" in blocks) and unit is not None and not ssm:
        return [
            (
                stated[0] if stated else "block_types",
                f"Mamba-2 layers are not modelled for model_type {v['model_type']}",
                "remove the Mamba-2 fields; nemotron_h, bamba and granitemoehybrid have them",
            )
        ]
    if blocks and unit is not None and not any(getattr(a, "blocks", False) for a in archs):
        return [
            (
                "block_types",
                f"layers of one mixer each are not modelled for model_type {v['model_type']}",
                "remove block_types; nemotron_h and nemotron-nas have such layers",
            )
        ]
    needed = "mamba" in blocks or (stated and len(stated) < len(_MAMBA))
    if needed:
        missing = [n for n in valid if v[n] is None]
        if missing:
            return [
                (n, "is required with Mamba-2 layers", f"add it: {SPECS[n].doc}") for n in missing
            ]
    if _valid(have, "mamba_num_heads", "mamba_n_groups") and stated:
        heads, groups = v["mamba_num_heads"], v["mamba_n_groups"]
        if heads % groups:  # either field may be the wrong one: both are named
            why = f"mamba_num_heads {heads} is not a multiple of mamba_n_groups {groups}"
            fix = "each group of B and C serves a whole number of heads"
            return [("mamba_num_heads", why, fix), ("mamba_n_groups", why, fix)]
    experts = v.get("n_routed_experts") if "n_routed_experts" in have else None
    if "moe" in blocks and not experts:
        return [
            (
                "n_routed_experts",
                "is required by the moe blocks of block_types",
                "state the routed experts, or list no moe block",
            )
        ]
    widths = v.get("block_widths") or () if "block_widths" in have else ()
    if widths and len(widths) != list(blocks).count("mlp"):
        return [
            (
                "block_widths",
                f"lists {len(widths)} widths for {list(blocks).count('mlp')} mlp blocks",
                "list one width per mlp block of block_types",
            )
        ]
    if blocks and _valid(have, "num_hidden_layers") and len(blocks) != v["num_hidden_layers"]:
        return [
            (
                "block_types",
                f"lists {len(blocks)} blocks for num_hidden_layers {v['num_hidden_layers']}",
                "list one block per layer",
            )
        ]
    return []


#: the DSA lightning indexer's fields: all three or none
_INDEXER = ("index_n_heads", "index_head_dim", "index_topk")
_GLOBAL_ATTENTION = ("global_head_dim", "num_global_key_value_heads", "attention_k_eq_v")


def _indexer_problems(v: Mapping[str, Any], have: set[str], unit: Any) -> list[Problem]:
    """A DSA model type needs its indexer; an indexer needs all three fields and MLA."""
    valid = [n for n in _INDEXER if n in have]
    stated = [n for n in valid if v[n] is not None]
    v4 = _compressed_family(unit)  # DeepSeek-V4's CSA layers: an indexer without MLA
    if unit is not None and unit.name == "dsa":
        return [
            (
                n,
                f"is required for model_type {v['model_type']} (DeepSeek sparse attention)",
                "state it as the checkpoint's config.json does "
                "(index_n_heads, index_head_dim, index_topk)",
            )
            for n in valid
            if v[n] is None
        ]
    if stated and len(stated) < len(valid):
        missing = next(n for n in valid if v[n] is None)
        return [
            (
                missing,
                f"is required when {stated[0]} is set (DSA indexer)",
                f"add it: {SPECS[missing].doc}, or remove " + ", ".join(stated),
            )
        ]
    if stated and "kv_lora_rank" in have and v["kv_lora_rank"] is None and not v4:
        return [
            (
                stated[0],
                "a DSA indexer is modelled on MLA layers only, but kv_lora_rank is not set",
                "set the MLA fields or remove " + ", ".join(stated),
            )
        ]
    return []


#: DeepSeek-V4's fields (compressed attention, grouped output, hyper-connections, hash routing)
_COMPRESSED = (
    "compress_ratios",
    "compress_rate_csa",
    "compress_rate_hca",
    "o_groups",
    "o_lora_rank",
    "hc_mult",
    "hash_moe_layers",
)


def _compressed_family(unit: Any) -> bool:
    """Whether the family's layers are DeepSeek-V4's (compressed attention)."""
    return unit is not None and any(getattr(a, "compressed", False) for a in unit.archs.values())


def _compressed_problems(v: Mapping[str, Any], have: set[str], unit: Any) -> list[Problem]:
    """DeepSeek-V4's fields: its family's only; every one of them there, a ratio per layer that
    is 0 or one of the two rates, the indexer with CSA layers, one K = V head, one shared
    expert, output groups that divide the heads' width, hash layers among the layers."""
    stated = [n for n in _COMPRESSED if n in have and v[n] not in (None, (), [])]
    if not _compressed_family(unit):
        if stated and unit is not None:
            return [
                (stated[0], f"is a DeepSeek-V4 field, not read for {v['model_type']}", "remove it")
            ]
        return []
    need = (
        "compress_ratios",
        "o_groups",
        "o_lora_rank",
        "hc_mult",
        "q_lora_rank",
        "sliding_window",
    )
    missing = [n for n in need if n in have and v[n] in (None, (), [])]
    if missing:
        return [
            (n, "is required for DeepSeek-V4 layers", f"add it: {SPECS[n].doc}") for n in missing
        ]
    if not _valid(have, *need, "num_hidden_layers", "compress_rate_csa", "compress_rate_hca"):
        return []
    n, ratios = v["num_hidden_layers"], v["compress_ratios"]
    csa, hca = v["compress_rate_csa"], v["compress_rate_hca"]
    if len(ratios) != n:
        return [("compress_ratios", f"lists {len(ratios)} layers, num_hidden_layers is {n}", None)]
    rates = {0, *(r for r in (csa, hca) if r is not None)}
    bad = [r for r in ratios if r not in rates]
    if bad:
        return [
            (
                "compress_ratios",
                f"holds {bad[0]}, which is neither 0 nor compress_rate_csa ({csa}) nor "
                f"compress_rate_hca ({hca})",
                "use 0, compress_rate_csa or compress_rate_hca per layer",
            )
        ]
    if csa is not None and csa == hca:
        return [("compress_rate_hca", f"equals compress_rate_csa ({csa})", "give the kinds apart")]
    out: list[Problem] = []
    if csa in ratios and any(v.get(k) is None for k in _INDEXER):
        k = next(k for k in _INDEXER if v.get(k) is None)
        out.append((k, "is required with compressed sparse attention layers", None))
    if v.get("num_key_value_heads") not in (None, 1):
        out.append(
            ("num_key_value_heads", "must be 1: one K = V head is shared by all heads", None)
        )
    if v.get("n_shared_experts") not in (None, 1):
        out.append(("n_shared_experts", "must be 1: DeepSeek-V4 has one shared expert", None))
    if v["sliding_window"] < 2:
        out.append(("sliding_window", "must be at least 2", "use 2 or more"))
    width = (v.get("num_attention_heads") or 0) * (v.get("head_dim") or 0)
    if width % v["o_groups"]:
        out.append(("o_groups", f"must divide num_attention_heads x head_dim ({width})", None))
    hashed = v.get("hash_moe_layers") or ()
    if hashed and hashed[-1] > n:
        out.append(("hash_moe_layers", f"names layer {hashed[-1]}, past the {n} layers", None))
    return out


def _shared_indexer_problems(v: Mapping[str, Any], have: set[str], unit: Any) -> list[Problem]:
    """Shared indexer layers: a DSA model's, not DeepSeek-V4's (its compressed layers would
    ignore them). Which layers: :func:`shared_layer_problems`, on a model a file, ``--set`` or
    ``with_changes`` states."""
    if "shared_indexer_layers" not in have or not v["shared_indexer_layers"]:
        return []
    name = "shared_indexer_layers"
    if "index_topk" in have and v["index_topk"] is None:
        return [(name, "is read only for a DSA model (index_topk set)", "remove it")]
    if _compressed_family(unit):
        return [(name, "is read only for a DSA model, not DeepSeek-V4's csa layers", "remove it")]
    return []


def shared_layer_problems(layers: Iterable[int], n: int) -> list[Problem]:
    """A stated model's shared indexer layers: 2 to ``n`` (layer 1 has no earlier top-k to
    reuse). mlacalc's own views (:meth:`ModelConfig.replaced`: one kind of layer, fewer
    layers) are not checked: a view of the shared kind alone lists every layer."""
    layers = list(layers)
    name = "shared_indexer_layers"
    if layers and layers[-1] > n:
        return [
            (
                name,
                f"names layer {layers[-1]}, past num_hidden_layers {n} (1-based)",
                f"list layers 2 to {n}",
            )
        ]
    if layers and layers[0] == 1:
        return [
            (
                name,
                "names layer 1, which has no earlier layer's top-k to reuse",
                f"list layers 2 to {n}",
            )
        ]
    return []


#: MiniMax-M3's block-sparse attention: all five or none
_SPARSE_BLOCK = (
    "sparse_block_size",
    "sparse_topk_blocks",
    "sparse_local_blocks",
    "sparse_index_heads",
    "sparse_index_dim",
)
#: what block-sparse layers are not modelled beside (their keys are GQA rows; every layer is
#: full or block-sparse)
_NOT_BESIDE_SPARSE = (
    "kv_lora_rank",
    "index_topk",
    "sliding_window",
    "attention_chunk_size",
    "full_attention_interval",
)


def _sparse_block_problems(v: Mapping[str, Any], have: set[str]) -> list[Problem]:
    """Block-sparse attention needs all five widths, 1 to ``sparse_topk_blocks`` local blocks,
    GQA layers only (full or block-sparse), and its layers within the model."""
    valid = [n for n in _SPARSE_BLOCK if n in have]
    stated = [n for n in valid if v[n] is not None]
    layers = v.get("sparse_attention_layers") if "sparse_attention_layers" in have else ()
    if not stated:
        if layers:
            return [
                (
                    "sparse_attention_layers",
                    "is read only with block-sparse attention (sparse_block_size set)",
                    "remove it",
                )
            ]
        return []
    if len(stated) < len(valid):
        missing = next(n for n in valid if v[n] is None)
        return [
            (
                missing,
                f"is required when {stated[0]} is set (block-sparse attention)",
                f"add it: {SPECS[missing].doc}",
            )
        ]
    other = [n for n in _NOT_BESIDE_SPARSE if n in have and v[n] is not None]
    if other:
        return [
            (
                other[0],
                "block-sparse attention is modelled on GQA layers, every other layer full",
                f"remove {other[0]} or the sparse_* fields",
            )
        ]
    if len(valid) == len(_SPARSE_BLOCK):
        local, topk = v["sparse_local_blocks"], v["sparse_topk_blocks"]
        if local > topk:
            return [
                (
                    "sparse_local_blocks",
                    f"{local} local blocks exceed sparse_topk_blocks {topk}: which blocks a "
                    "query attends would depend on ties",
                    f"use 1 to {topk}",
                )
            ]
    n = v.get("num_hidden_layers") if "num_hidden_layers" in have else None
    if layers and isinstance(n, int) and max(layers) > n:
        return [
            (
                "sparse_attention_layers",
                f"names layer {max(layers)}, past num_hidden_layers {n} (1-based)",
                None,
            )
        ]
    return []


def raise_problems(origin: str, problems: list[Problem]) -> None:
    """Raise one :class:`ConfigError` listing every problem (``field`` names the first;
    ``problems`` holds them all as (field, message, fix))."""
    seen: set[tuple[str, str]] = set()
    unique = []
    for problem in problems:
        if (problem[0], problem[1]) not in seen:
            seen.add((problem[0], problem[1]))
            unique.append(problem)
    first_field, first_message, first_fix = unique[0]
    message = first_message + (f" ({first_fix})" if first_fix else "")
    for name, text, fix in unique[1:]:
        message += f"; field '{name}': {text}" + (f" ({fix})" if fix else "")
    # the first problem's fix as .fix too (the message keeps each fix beside its problem)
    error = ConfigError(message, source=origin, field=first_field, fix=first_fix)
    error.problems = tuple(unique)  # type: ignore[attr-defined]
    raise error


# -----------------------------------------------------------------------------------
# building a config from a mapping


def model_from_dict(
    data: Any,
    origin: str = "<dict>",
    *,
    strict: bool = True,
    derived: tuple[str, ...] = (),
    require_source: bool = False,
) -> ModelConfig:
    """Validate a mapping of schema fields and return a :class:`ModelConfig`.

    ``strict`` rejects keys the schema does not know (YAML files are strict; a
    Hugging Face ``config.json`` goes through :func:`mlacalc.import_hf_config`).
    The fields that size a model are required, never a class default: the widths, layers,
    heads and vocabulary (``REQUIRED``), and what the family adds (an MLA family's
    ``kv_lora_rank``, ``qk_nope_head_dim``, ``qk_rope_head_dim``, ``v_head_dim`` and
    ``n_routed_experts``, 0 for every FFN dense: Hugging Face's ``DeepseekV3Config`` defaults
    it to 256, which would make a minimal dict of a small design a large MoE). The other absent
    fields take the defaults of the model_type's family (the Hugging Face class defaults
    where mlacalc states them: ``docs/config-schema.md``), each listed in ``derived``;
    ``name`` defaults to the file's stem, and ``source`` to the file's path unless
    ``require_source`` (shipped files). Every missing or invalid field is reported in one
    :class:`ConfigError`.
    """
    return build(data, origin, strict=strict, derived=derived, require_source=require_source)


def build(
    data: Any,
    origin: str,
    *,
    strict: bool = True,
    derived: Iterable[str] = (),
    require_source: bool = False,
    problems: list[Problem] | None = None,
) -> ModelConfig:
    """:func:`model_from_dict` with problems already found by a translator prepended (a
    field the translator named is not named again by the value checks)."""
    translated = list(problems or [])
    problems = list(translated)
    if not isinstance(data, dict):
        problems.append(
            (
                "",
                f"the file must hold a mapping of fields, got {type(data).__name__}",
                "write one 'field: value' per line",
            )
        )
        _raise_mapping(origin, problems)
    notes = list(derived)
    inputs: dict[str, tuple[str, ...]] = {}  # field a rule filled -> the fields it read
    values: dict[str, Any] = {}
    for key, value in data.items():
        if not isinstance(key, str) or key not in SPECS:
            if strict:
                problems.append(_unknown_field(key))
            continue
        values[key] = _plain(value)

    if "name" not in values:
        stem = Path(origin).stem if origin and not origin.startswith("<") else ""
        name = _slug(stem)
        if name:
            values["name"] = name
            notes.append(f"name = {name!r} (the file's name)")
    if "source" not in values:
        if require_source:
            problems.append(
                ("source", "is missing", "shipped files say where every value comes from")
            )
        else:
            values["source"] = (f"user file {origin}",)
    value_problems = check_values(values, relations=False)  # kinds and bounds only
    name = values.get("name")
    if isinstance(name, str) and name.strip() and (name != name.strip().lower() or " " in name):
        value_problems.append(
            ("name", f"names are lower-case with dashes, got {_show(name)}", f"use '{_slug(name)}'")
        )
    problems += value_problems
    bad = {p[0] for p in value_problems}
    valid = {k: v for k, v in values.items() if k not in bad}

    unit = registry.family_of(valid["model_type"]) if "model_type" in valid else None
    if unit is not None:
        problems += _apply_defaults(unit, valid, values, bad, notes, inputs)
    problems += _missing(unit, values, bad)
    have = [k for k in values if k not in bad]
    problems += _relations({k: values[k] for k in have}, set(have))
    if unit is not None and unit.mla and "kv_lora_rank" in have and values["kv_lora_rank"] is None:
        # a file's MLA model with a null latent width: say that, not every field it strays
        # (the attention variants are MLA families' copies with it null, through with_changes)
        problems = [p for p in problems if not p[1].startswith("is an MLA field")]
        problems.append(
            ("kv_lora_rank", f"is null, but model_type {values['model_type']} is MLA", _MLA_FIX)
        )
    if problems:
        named = {p[0] for p in translated}  # said once, in the translator's words
        problems = translated + [p for p in problems[len(translated) :] if p[0] not in named]
        raise_problems(origin, _with_notes(problems, notes, inputs))

    source = values.pop("source")
    values["source"] = (source,) if isinstance(source, str) else tuple(source)
    values["aliases"] = tuple(a.lower() for a in values.get("aliases", ()))
    values["weights_dtype"] = canonical_dtype(values.get("weights_dtype", "bf16"))
    if values.get("quantization_config") is not None:
        values["quantization_config"] = _freeze(values["quantization_config"])
    values["full_attention_layers"] = tuple(values.get("full_attention_layers", ()))
    values["shared_indexer_layers"] = tuple(values.get("shared_indexer_layers", ()))
    values["sparse_attention_layers"] = tuple(values.get("sparse_attention_layers", ()))
    values["block_types"] = tuple(values.get("block_types", ()))
    values["block_widths"] = tuple(values.get("block_widths", ()))
    values["compress_ratios"] = tuple(values.get("compress_ratios", ()))
    values["hash_moe_layers"] = tuple(values.get("hash_moe_layers", ()))
    model = ModelConfig(origin=origin, derived=tuple(notes), **values)
    for note in notes:  # a config.json field its class ignores, dropped (said once, here)
        if isinstance(note, registry.IgnoredField):
            warnings.warn(f"{model.label}: {note}", MlacalcWarning, stacklevel=3)
    return _warned(model, stacklevel=4)


def _floored(name: str, valid: dict[str, Any]) -> str:
    """The words a ``head_dim`` derived from widths that do not divide adds to its note:
    transformers floors the quotient (4096 / 24 heads: 170, a query width of 4080)."""
    h, n = valid.get("hidden_size"), valid.get("num_attention_heads")
    if name != "head_dim" or not h or not n or h % n == 0:
        return ""
    return f", floored: {h:,} / {n} = {h / n:.2f}"


def query_width_warning(model: ModelConfig) -> str | None:
    """The sentence for a ``head_dim`` the file left out whose rule (hidden_size / heads)
    the model does not follow: floored (hidden_size not a multiple of the heads: the query
    width heads x head_dim differs from hidden_size, built by some transformers classes and
    refused by others, LlamaConfig 5.23's among them), or kept by a change of the heads
    (``--set num_attention_heads=48``: head_dim stays the file's 128, where the file edited
    so gives 8,192 / 48 floored, 170). None otherwise (a stated head_dim is as meant).
    trial10: the file route said only a derived line, the two routes disagreed silently."""
    note = next((str(n) for n in model.derived if str(n).startswith("head_dim = ")), "")
    h, n, d_h = model.hidden_size, model.num_attention_heads, model.head_dim
    if "hidden_size / num_attention_heads" not in note or model.is_mla or not d_h:
        return None
    if "floored" in note:
        q = n * d_h
        return (
            f"{model.label}: head_dim {d_h} is hidden_size {h:,} / {n} heads floored, so the "
            f"query width {n} x {d_h} = {q:,} differs from hidden_size {h:,} (counted as "
            "built; transformers' LlamaConfig refuses it); state head_dim, or heads that "
            "divide hidden_size, if that is not meant"
        )
    if h // n == d_h:
        return None
    derived = f"{h:,} / {n} = {h // n}" + (f" floored ({h / n:.2f})" if h % n else "")
    return (
        f"{model.label}: head_dim stays {d_h}, derived from the file's heads (it states no "
        f"head_dim); the file edited to {n} heads would derive hidden_size / heads, {derived}; "
        f"give head_dim (--set head_dim={d_h} to keep it, or the width meant) to say which"
    )


def _warned(model: ModelConfig, stacklevel: int) -> ModelConfig:
    """``model``, after warning what it declares but no layer holds (a library user sees what
    the command line says)."""
    said = [model.no_moe_layer_warning(), *model.width_warnings(), query_width_warning(model)]
    for sentence in [*said, unread_quantization_warning(model)]:
        if sentence:
            warnings.warn(sentence, MlacalcWarning, stacklevel=stacklevel)
    return model


def _with_notes(
    problems: list[Problem], notes: list[str], inputs: dict[str, tuple[str, ...]]
) -> list[Problem]:
    """Say where a value came from when a problem is with a value a rule filled in."""
    filled = {note.split(" = ", 1)[0]: note for note in notes if " = " in note}
    out = []
    for name, message, fix in problems:
        if name in filled and "is missing" not in message:
            source = f"; from {', '.join(inputs[name])}" if name in inputs else ""
            message = f"{message} [{filled[name]}{source}]"
        out.append((name, message, fix))
    return out


def _raise_mapping(origin: str, problems: list[Problem]) -> None:
    message = "; ".join(p[1] + (f" ({p[2]})" if p[2] else "") for p in problems)
    raise ConfigError(message, source=origin)


def _slug(text: str) -> str:
    return text.strip().lower().replace(" ", "-").replace("_", "-")[:200]


def _apply_defaults(
    unit: registry.Family,
    valid: dict[str, Any],
    values: dict[str, Any],
    bad: set[str],
    notes: list[str],
    inputs: dict[str, tuple[str, ...]],
) -> list[Problem]:
    """Fill absent fields from the family's rules, in rule order, noting each in ``notes``;
    the problems of rules that cannot give a valid value are returned."""
    problems: list[Problem] = []
    mla = valid.get("kv_lora_rank") is not None
    if "kv_lora_rank" not in values and unit.mla:
        mla = True  # reported missing; no non-MLA default applies
    rules = unit.defaults_for(valid["model_type"])
    for _ in range(2):  # rules may read fields other rules fill
        experts = valid.get("n_routed_experts")
        for name, rule in rules.items():
            if name in values or name in bad:
                continue
            own_v = name == "v_head_dim" and valid["model_type"] in _OWN_VALUE_WIDTH
            if (name == "head_dim" and mla) or (name in _MLA and not mla and not own_v):
                continue
            if name in (*_MOE_ONLY, "moe_layer_freq") and not experts:
                continue
            if any(n not in valid for n in rule.needs):
                bad.add(name)  # its inputs are reported; "missing" would add nothing
                continue
            value = rule.resolve(valid)
            problem = SPECS[name].check(name, value)
            if problem is not None:  # the rule on these inputs gives no valid value
                bad.add(name)
                problems.append(
                    (
                        name,
                        f"is absent, and its rule ({rule.why}) on {', '.join(rule.needs)} gives "
                        f"{_show(value)}: {problem[1]}",
                        f"state {name}",
                    )
                )
                continue
            values[name] = valid[name] = value
            note = f"{name} = {value!r} ({rule.why}{_floored(name, valid)})"
            notes.append(registry.ClassDefault(note) if rule.says else note)
            if rule.needs:
                inputs[name] = rule.needs
    return problems


def _missing(unit: registry.Family | None, values: dict[str, Any], bad: set[str]) -> list[Problem]:
    required = list(REQUIRED)
    if unit is not None:
        required += [n for n in unit.required if n not in required]
    if "kv_lora_rank" in bad:
        pass  # whether the model is MLA is not known: its widths' absence is no problem yet
    elif values.get("kv_lora_rank") is not None:
        required += [n for n in _MLA if n not in required]
    elif (unit is None or not unit.mla) and "head_dim" not in required:
        required.append("head_dim")
    experts = values.get("n_routed_experts")
    moe = unit is None or unit.moe  # experts in a dense family: that is the one problem said
    if moe and isinstance(experts, int) and not isinstance(experts, bool) and experts > 0:
        required += list(_MOE_REQUIRED)
    if unit is None:
        if "model_type" in values and "model_type" not in bad:
            return []  # an unknown model_type is the one problem worth stating
        # without a family, the fields its rules would fill are not reported missing
        required = [n for n in required if n not in _FAMILY_FILLED]
    return [
        (name, f"is missing; model_type {values['model_type']} is MLA", _MLA_FIX)
        if name == "kv_lora_rank" and unit is not None and unit.mla
        else (name, "is missing", _MISSING_FIX.get(name, f"add it: {SPECS[name].doc}"))
        for name in required
        if name not in values and name not in bad
    ]


#: the fix of a missing field where the field's meaning alone does not give it
_MISSING_FIX = {
    "n_routed_experts": "add it: routed experts per MoE layer, or 0 for every FFN dense (a "
    "model's size is never a class default; DeepseekV3Config's 256 would make it a MoE)",
}


def markdown_fields() -> str:
    """The table of every field (kind, upper bound, meaning, absent) that
    ``docs/config-schema.md`` shows; a test keeps the page equal to it."""
    rows = ["| field | kind | at most | meaning | when absent |", "|---|---|---:|---|---|"]
    defaults = {f.name: f.default for f in fields(ModelConfig)}
    for name, spec in SPECS.items():
        if spec.kind in (STR, OPTSTR):
            bound = f"{spec.hi or MAX_TEXT:,} characters"
        elif spec.kind in (STRS, NAMES):
            bound = f"{MAX_ITEMS} entries"
        elif spec.kind == INTS:
            bound = f"{spec.hi:,} each"
        elif spec.kind == BLOCKS:
            bound = f"{MAX_LAYERS:,} entries"
        elif spec.kind == WIDTHS:
            bound = f"{spec.hi:,} each, {MAX_LAYERS:,} entries"
        else:
            bound = f"{spec.hi:,}" if spec.hi is not None else ""
        default = defaults[name]
        if spec.absent:
            absent = spec.absent
        elif default is MISSING:
            absent = "required"
        elif default is None:
            absent = "null"
        elif default == () or default == "":
            absent = "empty"
        else:
            absent = f"`{str(default).lower() if isinstance(default, bool) else default}`"
        rows.append(f"| `{name}` | {spec.kind} | {bound} | {spec.doc} | {absent} |")
    return "\n".join(rows)


# -----------------------------------------------------------------------------------
