"""Layers of different kinds: the per-layer pattern of a model and what each layer caches.

A model is a stack of decoder layers, and layers differ. Each layer has one
attention kind and one FFN kind:

- ``full``: softmax attention over every key, the whole context cached;
- ``sliding``: attends (and keeps) the last ``W`` keys only;
- ``chunked``: attends within fixed chunks of ``C`` tokens (Llama 4), so a query sees
  at most ``C`` keys and the cache needs at most ``C`` tokens;
- ``linear``: linear attention / recurrent (Gated DeltaNet, Kimi Delta Attention): a
  fixed-size state per sequence (a short convolution window plus a recurrent
  matrix per head), no per-token cache;
- ``mla``: multi-head latent attention, the compressed latent plus the shared RoPE key
  cached per token;
- ``dsa``: DeepSeek sparse attention: an MLA layer whose lightweight indexer keeps its
  own per-token key cache, scores every key, and lets the query attend only the
  ``top-k`` keys it selects;
- ``csa``, ``hca``, ``swa``: DeepSeek-V4's layers: one shared K = V head over a window of the
  last ``W`` keys, plus keys pooled every ``ratio`` tokens (``csa``: overlapping windows, an
  indexer picking ``index_topk`` of them; ``hca``: all attended; ``swa``: none)
  (:mod:`mlacalc.cost.compressed`);
- ``mamba``: a Mamba-2 state-space layer (Nemotron-H, Bamba, Granite 4.0 hybrids): a fixed
  state per sequence (a convolution window and a ``P x N`` matrix per head), no keys;
- ``mamba1``: a Mamba-1 selective-scan layer (Jamba): a fixed state per sequence (a
  convolution window over ``I`` channels and ``N`` float32 values per channel), no keys;
- ``full+mamba``: full attention and a Mamba-2 mixer side by side on the same normed input,
  their outputs added (Falcon-H1, ``LayerKind.mamba``): the attention's per-token rows and
  the Mamba-2 state per sequence;
- ``none``: no sequence mixer at all (a Nemotron-H or Nemotron-NAS block that is only a MoE
  or an MLP; its FFN kind says which), caching nothing;

and ``rope`` false marks a layer without rotary position embedding (Llama 4's
global layers). The FFN is ``dense`` or ``moe``.

The pattern is read from a Hugging Face ``config.json`` by the same rules as the
reference implementation (``layer_types``, ``sliding_window``,
``sliding_window_pattern``, ``full_attention_interval``, ``attention_chunk_size``,
``no_rope_layers``, ``first_k_dense_replace``, ``moe_layer_freq``,
``interleave_moe_layer_step``, ``decoder_sparse_step``, ``mlp_only_layers``,
``mlp_layer_types``, ``linear_attn_config``, ``index_*``). A layer type the product
cannot model is refused by name.

Cache conventions. A full, MLA or DSA layer keeps every token. A sliding layer keeps
``min(S, W)`` tokens in the product's convention (what a serving engine's ring of
``W`` slots holds) and ``min(S, W - 1)`` in the Hugging Face reference (its dynamic
cache drops the oldest key once the new one is appended); a chunked layer likewise
with ``C``. A linear layer's state is held as the reference holds it: the
convolution window of ``K`` columns in the activation dtype and the recurrent state
in float32 (``state_dtype`` changes it).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mlacalc.words.errors import ConfigError, InvalidArgumentError

__all__ = [
    "BLOCK_LAYERS",
    "COMPRESSED_KINDS",
    "FFN_KINDS",
    "LAYER_ATTENTION_KINDS",
    "SPARSE_BLOCK_FIELDS",
    "STATE_KINDS",
    "CacheSpec",
    "LayerKind",
    "LayerPattern",
    "block_types",
    "cache_spec",
    "layer_pattern",
    "text_config",
]

#: The attention a layer runs (what its cache keeps and what it attends).
LAYER_ATTENTION_KINDS = (
    "full",
    "sliding",
    "chunked",
    "linear",
    "mla",
    "dsa",
    "msa",
    "mamba",
    "mamba1",
    "csa",
    "hca",
    "swa",
    "none",
)
#: DeepSeek-V4's attention kinds: every layer a window of the last keys (one shared K = V
#: head); CSA and HCA add keys pooled from every ``ratio`` tokens (mlacalc.cost.compressed)
COMPRESSED_KINDS = ("csa", "hca", "swa")
FFN_KINDS = ("dense", "moe", "none")
#: the schema fields of MiniMax-M3's block-sparse attention (kind ``msa``)
SPARSE_BLOCK_FIELDS = (
    "sparse_block_size",
    "sparse_topk_blocks",
    "sparse_local_blocks",
    "sparse_index_heads",
    "sparse_index_dim",
)
CONVENTIONS = ("engine", "hf")

# layer_types values of the reference implementations -> attention kind
_HF_LAYER_TYPES = {
    "full_attention": "full",
    "sliding_attention": "sliding",
    "chunked_attention": "chunked",
    "linear_attention": "linear",
}
#: kinds that keep a fixed state per sequence instead of per-token rows
STATE_KINDS = ("linear", "mamba", "mamba1")
# model types whose linear layers are Gated DeltaNet (Qwen3-Next's layer)
_GATED_DELTANET = ("qwen3_next", "qwen3_5", "qwen3_5_moe", "qwen3_5_text", "qwen3_5_moe_text")
# layer_types values that exist upstream but are not modelled, with the nearest kind
_UNMODELLED_LAYER_TYPES = {
    "conv": "linear_attention (a state per sequence) is the nearest modelled kind",
    "mamba": "linear_attention (a state per sequence) is the nearest modelled kind",
    "hybrid": "full_attention is the nearest modelled kind",
}


@dataclass(frozen=True)
class LayerKind:
    """The kind of one decoder layer.

    ``window`` is ``W`` for a sliding layer and ``C`` for a chunked one (``None``
    otherwise); ``rope`` is false for a layer without rotary embedding.
    """

    attention: str
    ffn: str = "dense"
    window: int | None = None
    rope: bool = True
    indexer: bool = True  # a DSA layer with its own indexer ("dsa-shared": the previous one's)
    mamba: bool = False  # a Mamba-2 mixer beside the attention, on the same input (Falcon-H1)
    ratio: int = 0  # DeepSeek-V4's csa / hca: the tokens pooled into one compressed key

    @property
    def label(self) -> str:
        """``full``, ``sliding(128)``, ``chunked(8192)``, ``linear``, ``mla``, ``dsa``;
        ``no-rope`` appended where the layer has no rotary embedding."""
        text = self.attention if self.window is None else f"{self.attention}({self.window})"
        if self.attention in ("csa", "hca"):  # the window is every V4 layer's: not shown
            text = self.attention
        if self.attention == "dsa" and not self.indexer:
            text = "dsa-shared"
        if self.mamba:
            text = f"{text}+mamba"
        return text if self.rope else f"{text} no-rope"

    def tokens_kept(self, seq_len: int, convention: str = "engine") -> int:
        """Tokens this layer's cache keeps per sequence after ``seq_len`` tokens."""
        if self.attention in STATE_KINDS or self.attention == "none":
            return 0
        if self.window is None:
            return seq_len
        window = min(seq_len, self.window - (1 if convention == "hf" else 0))
        return window + (seq_len // self.ratio if self.ratio else 0)  # V4: the pooled keys too

    def keys_attended(self, position: int) -> int:
        """Keys the query at 1-based ``position`` attends (its own included)."""
        if self.attention in COMPRESSED_KINDS:  # the window and the pooled keys (CSA: at most
            # index_topk of them, which this kind does not know)
            return min(position, self.window) + (position // self.ratio if self.ratio else 0)
        if self.attention == "sliding":
            return min(position, self.window)
        if self.attention == "chunked":
            return (position - 1) % self.window + 1
        return position


@dataclass(frozen=True)
class LayerPattern:
    """The kinds of a model's decoder layers, in order."""

    layers: tuple[LayerKind, ...]

    @property
    def num_layers(self) -> int:
        return len(self.layers)

    def counts(self) -> dict[str, int]:
        """Layers per attention label, in order of first appearance."""
        return dict(Counter(k.label for k in self.layers))

    def groups(self) -> dict[LayerKind, int]:
        """Layers per distinct kind (attention and FFN), in order of first appearance."""
        return dict(Counter(self.layers))

    @property
    def keeps_state(self) -> bool:
        """Whether a layer keeps a recurrent state (a linear-attention or Mamba layer, or a
        Mamba-2 mixer beside the attention)."""
        return any(k.attention in STATE_KINDS or k.mamba for k in self.layers)

    @property
    def is_uniform(self) -> bool:
        return len({(k.attention, k.window, k.rope) for k in self.layers}) == 1

    @property
    def moe_layers(self) -> int:
        return sum(k.ffn == "moe" for k in self.layers)

    def describe(self) -> str:
        """One line such as ``"48 layers: 36 linear + 12 full; FFN: 48 MoE"``."""
        parts = " + ".join(f"{n} {label}" for label, n in self.counts().items())
        ffn = Counter(k.ffn for k in self.layers)
        ffn_text = " + ".join(
            f"{ffn[f]} {'MoE' if f == 'moe' else f}" for f in FFN_KINDS if ffn[f] and f != "none"
        )
        return f"{self.num_layers} layers: {parts}; FFN: {ffn_text}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "layers": self.num_layers,
            "summary": self.describe(),
            "attention": self.counts(),
            "moe_layers": self.moe_layers,
            "kinds": [
                {
                    "attention": k.attention,
                    "window": k.window,
                    "rope": k.rope,
                    "ffn": k.ffn,
                    "layers": n,
                }
                for k, n in self.groups().items()
            ],
        }


# ----------------------------------------------------------------------------------
# reading a config.json

# older config.json spellings of the same fields
_SPELLINGS = {
    "n_layer": "num_hidden_layers",
    "n_head": "num_attention_heads",
    "n_embd": "hidden_size",
    "num_kv_heads": "num_key_value_heads",
}


def text_config(data: Mapping[str, Any]) -> dict[str, Any]:
    """The language model's config: ``text_config`` of a multimodal wrapper, else the config,
    with older spellings (``n_layer``, ``n_head``, ``n_embd``, ``num_kv_heads``) renamed."""
    inner = data.get("text_config")
    if isinstance(inner, Mapping):
        out = dict(inner)
        out.setdefault("model_type", data.get("model_type"))
        for key in ("quantization_config", "tie_word_embeddings"):
            if key in data and key not in out:
                out[key] = data[key]
    else:
        out = dict(data)
    for old, new in _SPELLINGS.items():
        if old in out and new not in out:
            out[new] = out.pop(old)
    return out


def _fail(origin: str, field: str, message: str, fix: str | None = None):
    raise ConfigError(message, source=origin, field=field, fix=fix)


def _int(raw: Mapping[str, Any], key: str, origin: str, default: Any = None) -> Any:
    value = raw.get(key, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        _fail(origin, key, f"must be a non-negative integer, got {value!r}")
    return value


def _attention_types(raw: Mapping[str, Any], n: int, origin: str) -> list[str]:
    """``layer_types`` as the reference implementation derives it."""
    mt = raw.get("model_type")
    types = raw.get("layer_types")
    if types is None:
        if mt in ("gemma2", "gpt_oss"):
            types = ["sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(n)]
        elif mt in ("gemma3", "gemma3_text", "cohere2", "exaone4"):
            default = 4 if mt in ("cohere2", "exaone4") else 6
            period = (
                _int(raw, "sliding_window_pattern", origin, None)
                or _int(raw, "full_attention_interval", origin, None)
                or default
            )
            types = [
                "sliding_attention" if (i + 1) % period else "full_attention" for i in range(n)
            ]
        elif mt in ("gemma4", "gemma4_text"):  # Gemma4TextConfig: period 6, last layer full
            types = ["sliding_attention" if (i + 1) % 6 else "full_attention" for i in range(n)]
        elif mt in ("llama4", "llama4_text"):
            no_rope = raw.get("no_rope_layers") or [
                int((i + 1) % (_int(raw, "no_rope_layer_interval", origin, 4) or 4) != 0)
                for i in range(n)
            ]
            if not isinstance(no_rope, list) or len(no_rope) != n:
                _fail(origin, "no_rope_layers", f"must list one flag per layer ({n})")
            types = ["chunked_attention" if flag else "full_attention" for flag in no_rope]
        elif mt in _GATED_DELTANET:
            period = _int(raw, "full_attention_interval", origin, 4) or 4
            types = ["linear_attention" if (i + 1) % period else "full_attention" for i in range(n)]
        elif mt == "kimi_linear":
            lin = raw.get("linear_attn_config") or {}
            if "full_attn_layers" in lin and "kda_layers" in lin:
                types = [None] * n
                for i in lin["full_attn_layers"]:
                    types[i - 1] = "full_attention"  # 1-based in the checkpoint
                for i in lin["kda_layers"]:
                    types[i - 1] = "linear_attention"
            else:
                types = [
                    "full_attention" if i and i % 4 == 0 else "linear_attention" for i in range(n)
                ]
        elif mt == "mimo_v2_flash" and "full_attention_layers" not in raw:
            # MiMoV2FlashConfig: the first layer and every 6th (1-based) full
            types = [
                "full_attention" if (i == 0 or not (i + 1) % 6) else "sliding_attention"
                for i in range(n)
            ]
        elif raw.get("full_attention_layers") and raw.get("sliding_window"):
            listed = set(raw["full_attention_layers"])  # a ModelConfig's 1-based full layers
            types = ["full_attention" if i + 1 in listed else "sliding_attention" for i in range(n)]
        elif raw.get("use_sliding_window") and raw.get("sliding_window"):
            # Qwen2/Qwen3: the first max_window_layers layers use full attention
            full = _int(raw, "max_window_layers", origin, n)
            types = ["full_attention" if i < full else "sliding_attention" for i in range(n)]
        elif raw.get("sliding_window") and mt in (
            "mistral",
            "mixtral",
            "phi3",
            "ministral3",
            "ministral",
            "starcoder2",
            "qwen2_moe_sw",
        ):
            types = ["sliding_attention"] * n
        else:
            types = ["full_attention"] * n
    mtp = raw.get("num_nextn_predict_layers")
    if mt == "step3p7" and isinstance(types, list) and isinstance(mtp, int) and mtp > 0:
        types = types[:n] if len(types) == n + mtp else types  # Step3p7TextConfig drops the pad
    if mt in ("gemma4", "gemma4_text") and isinstance(types, list) and types:
        types = [*types[:-1], "full_attention"]  # Gemma4TextConfig forces the last layer full
    if not isinstance(types, list) or len(types) != n:
        _fail(
            origin,
            "layer_types",
            f"must list one type per layer ({n} layers), got "
            f"{len(types) if isinstance(types, list) else type(types).__name__}",
        )
    for t in types:
        if t in _UNMODELLED_LAYER_TYPES:
            _fail(
                origin,
                "layer_types",
                f"layer type {t!r} is not modelled",
                _UNMODELLED_LAYER_TYPES[t],
            )
        if t not in _HF_LAYER_TYPES:
            _fail(
                origin,
                "layer_types",
                f"unknown layer type {t!r}",
                "use one of: " + ", ".join(_HF_LAYER_TYPES),
            )
    return types


def _ffn_types(raw: Mapping[str, Any], n: int, origin: str) -> list[str]:
    """Dense or MoE per layer, by the reference implementation's rule."""
    mt = raw.get("model_type")
    experts = (
        raw.get("n_routed_experts")
        or raw.get("num_experts")
        or raw.get("num_local_experts")
        or raw.get("moe_num_experts")
        or 0
    )
    if not experts:
        return ["dense"] * n
    if mt == "ernie4_5_moe" and "first_k_dense_replace" not in raw:  # Ernie4_5_MoeConfig's rule
        start = _int(raw, "moe_layer_start_index", origin, 1) or 0
        end = raw.get("moe_layer_end_index", -1)
        end = n - 1 if end in (-1, None) else end
        step = _int(raw, "moe_layer_interval", origin, 1) or 1
        return ["moe" if ((i + 1) % step == 0 and start <= i <= end) else "dense" for i in range(n)]
    if mt == "step3p7" and "mlp_layer_types" not in raw and "source" not in raw:
        listed = raw.get("moe_layers_enum")  # Step3p7TextConfig's rule (a ModelConfig: below)
        items = listed.split(",") if isinstance(listed, str) else listed
        try:
            moe = set(range(3, n)) if items is None else {int(i) for i in items if str(i).strip()}
        except (TypeError, ValueError):
            _fail(origin, "moe_layers_enum", f"must list layer indices, got {listed!r}")
        return ["moe" if i in moe else "dense" for i in range(n)]
    if isinstance(raw.get("mlp_layer_types"), list):
        kinds = raw["mlp_layer_types"]
        if mt == "step3p7" and isinstance(mtp := raw.get("num_nextn_predict_layers"), int):
            kinds = kinds[:n] if len(kinds) == n + mtp else kinds  # the MTP pad dropped
        if len(kinds) != n or any(k not in ("dense", "sparse") for k in kinds):
            _fail(
                origin,
                "mlp_layer_types",
                f"must list 'dense' or 'sparse' for each of the {n} layers",
            )
        return ["moe" if k == "sparse" else "dense" for k in kinds]
    if mt in ("llama4", "llama4_text"):
        moe = raw.get("moe_layers")
        if moe is None:
            step = (
                _int(raw, "interleave_moe_layer_step", origin, None)
                or _int(raw, "moe_layer_freq", origin, None)  # a ModelConfig's fields
                or 1
            )
            moe = list(range(step - 1, n, step))
        moe_set = set(moe)
        return ["moe" if i in moe_set else "dense" for i in range(n)]
    if "decoder_sparse_step" in raw or "mlp_only_layers" in raw:
        step = _int(raw, "decoder_sparse_step", origin, 1) or 1
        only = set(raw.get("mlp_only_layers") or [])
        return ["moe" if (i not in only and (i + 1) % step == 0) else "dense" for i in range(n)]
    first = _int(raw, "first_k_dense_replace", origin, 0) or 0
    freq = raw.get("moe_layer_freq", 1)
    if isinstance(freq, list):
        if len(freq) != n:
            _fail(origin, "moe_layer_freq", f"a list must hold one flag per layer ({n})")
        return ["moe" if (flag and i >= first) else "dense" for i, flag in enumerate(freq)]
    freq = _int(raw, "moe_layer_freq", origin, 1) or 1
    off = _int(raw, "moe_layer_offset", origin, 0) or 0
    return ["moe" if (i >= first and (i - off) % freq == 0) else "dense" for i in range(n)]


def _sparse_layers(raw: Mapping[str, Any], n: int) -> set[int]:
    """0-based block-sparse layers (MiniMax-M3, kind ``msa``): a ModelConfig's
    ``sparse_attention_layers`` (empty: all, with ``sparse_block_size``), or a config.json's
    ``sparse_attention_config.sparse_attention_freq``."""
    cfg = raw.get("sparse_attention_config")
    if isinstance(cfg, Mapping) and isinstance(cfg.get("sparse_attention_freq"), list):
        return {i for i, f in enumerate(cfg["sparse_attention_freq"]) if f}
    if raw.get("sparse_block_size") is None:
        return set()
    listed = raw.get("sparse_attention_layers") or range(1, n + 1)
    return {i - 1 for i in listed}


def _sparse_index_dim(raw: Mapping[str, Any]) -> int:
    """The indexer key width of a block-sparse layer (0 without such layers)."""
    cfg = raw.get("sparse_attention_config")
    if isinstance(cfg, Mapping) and cfg.get("sparse_attention_freq"):
        return cfg.get("sparse_index_dim", 128)
    return (raw.get("sparse_block_size") and raw.get("sparse_index_dim")) or 0


def _is_mla(raw: Mapping[str, Any]) -> bool:
    return raw.get("kv_lora_rank") is not None


def _is_dsa(raw: Mapping[str, Any]) -> bool:
    return (
        raw.get("model_type") in ("deepseek_v32", "glm_moe_dsa")
        or raw.get("index_topk") is not None
    )


#: Nemotron-H's block names (``layers_block_type``, older files' ``hybrid_override_pattern``
#: letters) -> the schema's block kinds
_BLOCK_NAMES = {
    "mamba": "mamba",
    "linear_attention": "mamba",
    "M": "mamba",
    "attention": "attention",
    "full_attention": "attention",
    "*": "attention",
    "moe": "moe",
    "E": "moe",
    "mlp": "mlp",
    "-": "mlp",
}
#: a block kind -> its layer kind (``none``: no sequence mixer, or no FFN)
BLOCK_LAYERS = {
    "mamba": LayerKind("mamba", ffn="none"),
    "attention": LayerKind("full", ffn="none"),
    "moe": LayerKind("none", ffn="moe"),
    "mlp": LayerKind("none", ffn="dense"),
}


def block_types(raw: Mapping[str, Any], origin: str = "config.json") -> list[str] | None:
    """A one-mixer-per-layer model's blocks (``mamba``, ``attention``, ``moe``, ``mlp``), read
    as Nemotron-H's configuration class reads them: ``layers_block_type`` (or its alias
    ``layer_types``; ``linear_attention`` is a Mamba-2 layer there), else the letters of
    ``hybrid_override_pattern`` (``M``, ``*``, ``E``, ``-``); None for another model."""
    if raw.get("block_types"):  # a model's own field (ModelConfig.to_dict)
        return list(raw["block_types"])
    if raw.get("model_type") not in ("nemotron_h",) and not raw.get("layers_block_type"):
        return None
    listed = raw.get("layers_block_type") or raw.get("layer_types")
    key = "layers_block_type"
    if listed is None and raw.get("hybrid_override_pattern") is not None:
        listed, key = raw["hybrid_override_pattern"], "hybrid_override_pattern"
        if not isinstance(listed, str):
            _fail(origin, key, f"must be a string of M, *, E and -, got {listed!r}")
        listed = list(listed)
    if listed is None:  # NemotronHConfig's default: one block of each kind
        listed = ["mamba", "moe", "attention", "mlp"]
    if not isinstance(listed, (list, tuple)) or not listed:
        _fail(origin, key, "must list each layer's block", "name mamba, attention, moe or mlp")
    bad = [b for b in listed if not isinstance(b, str) or b not in _BLOCK_NAMES]
    if bad:
        _fail(
            origin,
            key,
            f"names an unknown block {bad[0]!r}",
            "use mamba (linear_attention, M), attention (full_attention, *), moe (E) or mlp (-)",
        )
    return [_BLOCK_NAMES[b] for b in listed]


def shared_indexer_layers(raw: Mapping[str, Any]) -> list[int] | None:
    """1-based layers of a GLM-DSA config that reuse the previous layer's top-k, by
    GlmMoeDsaConfig's rule: ``indexer_types`` as written, else ``index_topk_pattern`` (``F``
    full, ``S`` shared), else the schedule ``index_topk_freq`` / ``index_skip_topk_offset``
    (defaults 1 and 2: every layer full). None when a value is malformed."""
    if raw.get("shared_indexer_layers"):  # a ModelConfig's field
        return list(raw["shared_indexer_layers"])
    kinds = raw.get("indexer_types")
    if kinds is None and raw.get("index_topk_pattern") is not None:
        pattern = raw["index_topk_pattern"]
        kinds = (
            [{"F": "full", "S": "shared"}.get(c, c) for c in pattern]
            if isinstance(pattern, str)
            else pattern
        )
    if kinds is None:
        freq, offset = raw.get("index_topk_freq", 1), raw.get("index_skip_topk_offset", 2)
        n = raw.get("num_hidden_layers")
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (freq, offset, n)):
            return None
        freq = max(freq, 1)
        kinds = ["full" if max(i - offset + 1, 0) % freq == 0 else "shared" for i in range(n)]
    if not isinstance(kinds, list) or any(k not in ("full", "shared") for k in kinds):
        return None
    return [i + 1 for i, k in enumerate(kinds) if k == "shared"]


def _smollm3_no_rope(raw: Mapping[str, Any], n: int, origin: str) -> list[int]:
    """SmolLM3's ``no_rope_layers`` (1: RoPE, 0: none), or its interval rule."""
    if isinstance(raw.get("no_rope_layers"), list):
        return list(raw["no_rope_layers"])
    interval = _int(raw, "full_attention_interval", origin, None) or _int(
        raw, "no_rope_layer_interval", origin, 4
    )
    return [int((i + 1) % (interval or 4) != 0) for i in range(n)]


def _jamba_pattern(raw: Mapping[str, Any], n: int, origin: str) -> LayerPattern:
    """Jamba's layers by JambaConfig's rule (a config.json's ``attn_layer_period`` /
    ``attn_layer_offset`` and ``expert_layer_period`` / ``expert_layer_offset``, or a
    ModelConfig's ``full_attention_layers``, ``moe_layer_freq`` and ``moe_layer_offset``):
    attention without RoPE where listed, Mamba-1 elsewhere; a MoE where ``num_experts > 1``."""
    listed = raw.get("full_attention_layers")
    if listed is None:
        period = _int(raw, "attn_layer_period", origin, 8) or 1
        offset = _int(raw, "attn_layer_offset", origin, 4) or 0
        listed = [i + 1 for i in range(n) if i % period == offset]
    listed = set(listed)
    own = "n_routed_experts" in raw  # a ModelConfig's names, else the config.json's
    experts = _int(raw, "n_routed_experts" if own else "num_experts", origin, 16)
    freq = _int(raw, "moe_layer_freq" if own else "expert_layer_period", origin, 2) or 1
    first = _int(raw, "moe_layer_offset" if own else "expert_layer_offset", origin, 1) or 0
    moe = bool(experts) and experts > 1
    return LayerPattern(
        tuple(
            LayerKind(
                "full" if i + 1 in listed else "mamba1",
                ffn="moe" if moe and (i - first) % freq == 0 else "dense",
                rope=i + 1 not in listed,
            )
            for i in range(n)
        )
    )


def layer_pattern(data: Any, origin: str = "config.json") -> LayerPattern:
    """The per-layer pattern of a Hugging Face ``config.json`` (a multimodal wrapper's
    ``text_config`` is read) or of a :class:`~mlacalc.ModelConfig`.

    Examples
    --------
    >>> qwen3_next = {"model_type": "qwen3_next", "num_hidden_layers": 8, "num_experts": 4}
    >>> layer_pattern(qwen3_next).describe()
    '8 layers: 6 linear + 2 full; FFN: 8 MoE'
    """
    data, origin = _config_dict(data, origin)
    raw = text_config(data)
    blocks = block_types(raw, origin)
    if blocks is not None:
        return LayerPattern(tuple(BLOCK_LAYERS[b] for b in blocks))
    n = _int(raw, "num_hidden_layers", origin)
    if not n:
        _fail(origin, "num_hidden_layers", "is required and must be positive")
    mt = raw.get("model_type")
    if mt == "jamba":
        return _jamba_pattern(raw, n, origin)
    beside = mt == "falcon_h1"  # FalconH1Config: every layer "hybrid" (attention + Mamba-2)
    types = ["full_attention"] * n if beside else _attention_types(raw, n, origin)
    ffn = _ffn_types(raw, n, origin)
    window = _int(raw, "sliding_window", origin)
    if mt == "mimo_v2_flash":  # the class's window: sliding_window_size keys plus the query
        size = _int(raw, "sliding_window_size", origin)
        window = size + 1 if size is not None else (window or 129)
    chunk = _int(raw, "attention_chunk_size", origin)
    nope_layers = mt in ("llama4", "llama4_text")
    no_rope = _smollm3_no_rope(raw, n, origin) if mt == "smollm3" else None
    shared = set(shared_indexer_layers(raw) or ()) if _is_dsa(raw) else set()
    sparse = _sparse_layers(raw, n)
    layers = []
    for i, t in enumerate(types):
        kind = _HF_LAYER_TYPES[t]
        w = None
        if kind == "sliding":
            if not window:
                _fail(
                    origin,
                    "sliding_window",
                    f"layer {i} is a sliding-window layer but no window is set",
                )
            w = window
        elif kind == "chunked":
            if not chunk:
                _fail(
                    origin, "attention_chunk_size", f"layer {i} is chunked but no chunk size is set"
                )
            w = chunk
        elif kind == "full" and _is_mla(raw):
            kind = "dsa" if _is_dsa(raw) else "mla"
        if kind == "full" and i in sparse:
            kind = "msa"
        rope = not (nope_layers and kind == "full") and not (no_rope and not no_rope[i])
        indexer = not (kind == "dsa" and shared and i + 1 in shared)
        layers.append(
            LayerKind(
                attention=kind, ffn=ffn[i], window=w, rope=rope, indexer=indexer, mamba=beside
            )
        )
    return LayerPattern(tuple(layers))


# ----------------------------------------------------------------------------------
# what each kind caches

_DTYPE_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4, "fp8": 1}


@dataclass(frozen=True)
class CacheSpec:
    """Cache elements of each attention kind of one model.

    ``token_elements[kind]`` is what one token adds to one layer of that kind
    (K and V rows, or the MLA latent plus the RoPE key; a DSA layer adds the
    indexer key in ``indexer_elements``, fp8 with its scales in the engine convention); a
    linear layer holds
    ``conv_elements`` (activation dtype) and ``state_elements`` (``state_dtype``)
    per sequence whatever the context.
    """

    token_elements: dict[str, int]
    indexer_elements: int = 0
    conv_elements: int = 0
    state_elements: int = 0

    def layer_bytes(
        self,
        kind: LayerKind,
        seq_len: int,
        batch: int = 1,
        kv_dtype: str = "bf16",
        state_dtype: str = "fp32",
        convention: str = "engine",
    ) -> int:
        """Bytes one layer of ``kind`` holds for ``batch`` sequences of ``seq_len`` tokens."""
        if convention not in CONVENTIONS:
            raise InvalidArgumentError(
                "convention", f"use one of {', '.join(CONVENTIONS)}, got {convention!r}"
            )
        b = _bytes_per_element(kv_dtype, "kv_dtype")
        if kind.attention in STATE_KINDS:
            s = _bytes_per_element(state_dtype, "state_dtype")
            return batch * (self.conv_elements * b + self.state_elements * s)
        if kind.attention == "none":
            return 0
        beside = 0  # a Mamba-2 mixer beside the attention (Falcon-H1): its state too
        if kind.mamba:
            s = _bytes_per_element(state_dtype, "state_dtype")
            beside = batch * (self.conv_elements * b + self.state_elements * s)
        row = self.token_elements[kind.attention] * b
        if kind.attention == "dsa" and kind.indexer:
            # the indexer key: in the cache's dtype in the reference (hf); the engines keep it
            # in fp8 with a float32 scale a 128 values whatever the cache's
            # (mlacalc.cost.attention.INDEXER_KEY_LAYOUT)
            n = self.indexer_elements
            row += n * b if convention == "hf" else n + 4 * -(-n // 128)
        return batch * kind.tokens_kept(seq_len, convention) * row + beside

    def model_bytes(
        self,
        pattern: LayerPattern,
        seq_len: int,
        batch: int = 1,
        kv_dtype: str = "bf16",
        state_dtype: str = "fp32",
        convention: str = "engine",
    ) -> dict[str, int]:
        """Cache bytes by attention label (``sliding(128)``, ``full``, ...) for the whole model."""
        out: dict[str, int] = {}
        for kind, n in pattern.groups().items():
            size = n * self.layer_bytes(kind, seq_len, batch, kv_dtype, state_dtype, convention)
            out[kind.label] = out.get(kind.label, 0) + size
        return out


def _bytes_per_element(dtype: str, name: str) -> int:
    if dtype not in _DTYPE_BYTES:
        raise InvalidArgumentError(name, f"use one of {', '.join(_DTYPE_BYTES)}, got {dtype!r}")
    return _DTYPE_BYTES[dtype]


def _config_dict(data: Any, origin: str) -> tuple[Mapping[str, Any], str]:
    """A config as a mapping: a ``config.json`` dict as it is, a :class:`ModelConfig` as its
    fields (the Hugging Face names, ``model_type`` included)."""
    if isinstance(data, Mapping):
        return data, origin
    to_dict = getattr(data, "to_dict", None)
    if to_dict is not None and type(data).__name__ == "ModelConfig":
        return to_dict(), getattr(data, "origin", None) or origin
    raise InvalidArgumentError(
        "config",
        f"must be a ModelConfig (mlacalc.load_model) or a config.json dict, "
        f"got {type(data).__name__}",
    )


def cache_spec(data: Any, origin: str = "config.json") -> CacheSpec:
    """Per-token and per-sequence cache elements of each attention kind a config uses:
    ``data`` is a :class:`~mlacalc.ModelConfig` or a ``config.json`` dict.

    >>> import mlacalc
    >>> cache_spec(mlacalc.load_model("llama-3-8b")).token_elements["full"]
    2048
    """
    data, origin = _config_dict(data, origin)
    raw = text_config(data)
    n_h = _int(raw, "num_attention_heads", origin)
    n_kv = _int(raw, "num_key_value_heads", origin) or n_h
    falcon = raw.get("model_type") in ("falcon", "RefinedWeb", "RefinedWebModel")
    if falcon and raw.get("multi_query", True) and not raw.get("new_decoder_architecture", False):
        n_kv = 1
    d = _int(raw, "hidden_size", origin)
    head = _int(raw, "head_dim", origin) or (d // n_h if d and n_h else None)
    rows: dict[str, int] = {}
    if head:
        rows.update(dict.fromkeys(("full", "sliding", "chunked"), 2 * n_kv * head))
    if raw.get("model_type") in ("gemma4", "gemma4_text"):
        if raw.get("num_kv_shared_layers"):
            _fail(
                origin,
                "num_kv_shared_layers",
                "layers that reuse another layer's cache are not modelled",
                "set it to 0; the nearest modelled layout keeps a cache in every layer",
            )
        # full layers: their own head width (default 512) and, with attention_k_eq_v, their
        # own KV heads; the reference still holds keys and values as two tensors
        k_eq_v = raw.get("attention_k_eq_v") is True
        g_kv = (_int(raw, "num_global_key_value_heads", origin) if k_eq_v else None) or n_kv
        g_head = _int(raw, "global_head_dim", origin, 512)
        rows["full"] = 2 * g_kv * g_head
    if raw.get("model_type") == "mimo_v2_flash" and head:
        # K of head_dim and V of v_head_dim; sliding layers hold twice the full ones' KV heads
        width = head + (_int(raw, "v_head_dim", origin, 128) or head)
        s_kv = _int(raw, "sliding_key_value_heads", origin) or 2 * n_kv
        rows.update(full=n_kv * width, chunked=n_kv * width, sliding=s_kv * width)
    if _is_mla(raw):
        latent = _int(raw, "kv_lora_rank", origin) + _int(raw, "qk_rope_head_dim", origin)
        rows["mla"] = rows["dsa"] = latent
    indexer = _int(raw, "index_head_dim", origin) or 0 if _is_dsa(raw) else 0
    if head and _sparse_index_dim(raw):  # MiniMax-M3: K, V and the indexer key per token
        rows["msa"] = 2 * n_kv * head + _sparse_index_dim(raw)
    conv = state = 0
    mt = raw.get("model_type")
    if mt in _GATED_DELTANET:  # Gated DeltaNet: conv over q, k, v; a k x v state per value head
        hk, hv = (
            _int(raw, "linear_num_key_heads", origin),
            _int(raw, "linear_num_value_heads", origin),
        )
        dk, dv = (
            _int(raw, "linear_key_head_dim", origin),
            _int(raw, "linear_value_head_dim", origin),
        )
        kernel = _int(raw, "linear_conv_kernel_dim", origin)
        conv = (2 * hk * dk + hv * dv) * kernel
        state = hv * dk * dv
    elif raw.get("mamba_dt_rank") or mt == "jamba":  # Mamba-1: conv over x; N per channel
        inner = _int(raw, "mamba_inner_size", origin) or (
            (_int(raw, "mamba_expand", origin, 2) or 0) * (d or 0)
        )
        conv = inner * (_int(raw, "mamba_d_conv", origin, 4) or 0)
        state = inner * (
            _int(raw, "ssm_state_size", origin) or _int(raw, "mamba_d_state", origin, 16)
        )
    elif mt == "falcon_h1" and not raw.get("mamba_num_heads"):  # a config.json: its spellings
        n_state = _int(raw, "mamba_d_state", origin, 256)
        inner = _int(raw, "mamba_d_ssm", origin, 1024)  # null: mamba_expand x hidden_size
        if inner is None:
            inner = (_int(raw, "mamba_expand", origin, 2) or 0) * (d or 0)
        groups = _int(raw, "mamba_n_groups", origin, 1)
        conv = (inner + 2 * groups * n_state) * _int(raw, "mamba_d_conv", origin, 4)
        state = inner * n_state  # a P x N matrix per head, P x heads = the inner width
    elif raw.get("mamba_num_heads"):  # Mamba-2: conv over x, B, C; a P x N state per head
        heads, width = _int(raw, "mamba_num_heads", origin), _int(raw, "mamba_head_dim", origin)
        groups = _int(raw, "mamba_n_groups", origin) or _int(raw, "n_groups", origin)
        n_state = _int(raw, "ssm_state_size", origin)
        kernel = _int(raw, "mamba_d_conv", origin) or _int(raw, "conv_kernel", origin)
        conv = (heads * width + 2 * groups * n_state) * kernel
        state = heads * width * n_state
    elif mt == "kimi_linear":  # Kimi Delta Attention: three short convs, a d x d state per head
        lin = raw.get("linear_attn_config") or {}
        heads = lin.get("num_heads", raw.get("linear_num_heads", 32))
        dim = lin.get("head_dim", raw.get("linear_head_dim", 128))
        kernel = lin.get("short_conv_kernel_size", raw.get("linear_conv_kernel_dim", 4))
        conv = 3 * heads * dim * kernel
        state = heads * dim * dim
    return CacheSpec(
        token_elements=rows, indexer_elements=indexer, conv_elements=conv, state_elements=state
    )
