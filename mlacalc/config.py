"""Model configurations: the YAML schema, its validation, and Hugging Face import.

A model is described by one YAML file whose field names are the ones Hugging Face
writes in ``config.json`` (``hidden_size``, ``num_key_value_heads``,
``kv_lora_rank``, ...), plus ``name``, ``model_type`` and ``source``. The full
schema is documented in ``docs/config-schema.md``; :data:`FIELDS` below is the
machine-readable copy that the loader enforces.

The attention variant is read from the fields, never from the model's name:
``kv_lora_rank`` set means MLA; otherwise ``num_key_value_heads`` equal to
``num_attention_heads`` is MHA, 1 is MQA, anything in between is GQA.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field, fields, replace
from difflib import get_close_matches
from pathlib import Path
from typing import Any

from .dtypes import DTYPE_BITS, canonical_dtype
from .errors import ConfigError, UnknownDtypeError, UnknownModelError

__all__ = [
    "ModelConfig",
    "load_model",
    "model_from_dict",
    "import_hf_config",
    "shipped_models",
    "FIELDS",
    "MODEL_TYPES",
]

#: Hugging Face ``model_type`` values mlacalc understands, mapped to the
#: architecture family whose parameter layout it follows.
MODEL_TYPES: dict[str, str] = {
    "llama": "llama",
    "mistral": "llama",
    "mixtral": "llama",
    "qwen2": "llama",
    "gemma": "llama",
    "gpt2": "gpt2",
    "falcon": "falcon",
    "deepseek_v2": "deepseek",
    "deepseek_v3": "deepseek",
    "kimi_k2": "deepseek",
    "minicpm3": "minicpm3",
}

_POS = "positive integer"
_NONNEG = "non-negative integer"
_BOOL = "boolean"
_STR = "string"
_OPTPOS = "positive integer or null"

#: field -> (kind, meaning). Every key a YAML file may hold.
FIELDS: dict[str, tuple[str, str]] = {
    "name": (_STR, "shipped name, lower-case with dashes (deepseek-v3)"),
    "display_name": (_STR, "name for reports (DeepSeek-V3)"),
    "model_type": (_STR, "Hugging Face model_type: " + ", ".join(MODEL_TYPES)),
    "source": ("string or list of strings", "where every value comes from (config.json revision, paper section)"),
    "aliases": ("list of strings", "other names that load this file"),
    "notes": (_STR, "free text"),
    "hidden_size": (_POS, "d, the model width"),
    "num_hidden_layers": (_POS, "L, decoder layers of the main model"),
    "num_attention_heads": (_POS, "n_h, query heads"),
    "num_key_value_heads": (_POS, "n_kv, key/value heads (MLA files repeat n_h, as Hugging Face does)"),
    "head_dim": (_POS, "d_h, per-head width of Q, K and V (MHA/GQA/MQA; required there)"),
    "vocab_size": (_POS, "V, vocabulary size"),
    "intermediate_size": (_POS, "FFN width of dense layers (GPT-2, Falcon: the MLP width)"),
    "tie_word_embeddings": (_BOOL, "output head shares the input embedding table"),
    "attention_bias": (_BOOL, "bias on the attention projections (Llama: q,k,v,o; DeepSeek: q_a, kv_a, o)"),
    "qkv_bias": (_BOOL, "bias on the q, k and v projections only (Qwen2: true)"),
    "mlp_bias": (_BOOL, "bias on the gated MLP projections"),
    "q_lora_rank": (_OPTPOS, "d_cq, query compression rank; null means a plain W_Q"),
    "kv_lora_rank": (_OPTPOS, "d_c, MLA latent width; null or absent means not MLA"),
    "qk_nope_head_dim": (_POS, "d_nope, per-head query/key width without RoPE (MLA)"),
    "qk_rope_head_dim": (_POS, "d_rope, decoupled RoPE width, shared key (MLA)"),
    "v_head_dim": (_POS, "d_v, per-head value width (MLA)"),
    "n_routed_experts": (_NONNEG, "routed experts per MoE layer (Mixtral: num_local_experts)"),
    "n_shared_experts": (_NONNEG, "always-on shared experts per MoE layer"),
    "moe_intermediate_size": (_POS, "FFN width of one expert"),
    "num_experts_per_tok": (_NONNEG, "routed experts a token uses"),
    "first_k_dense_replace": (_NONNEG, "leading layers that keep a dense FFN"),
    "moe_layer_freq": (_POS, "every k-th layer after the dense ones is MoE"),
    "topk_method": (_STR, "router method; noaux_tc adds the e_score_correction_bias vector"),
    "num_nextn_predict_layers": (_NONNEG, "MTP (next-n prediction) modules, reported apart"),
    "sliding_window": (_OPTPOS, "W, keys a query may attend (and the cache keeps); null for none"),
    "max_position_embeddings": (_POS, "context length; GPT-2's learned position table size"),
    "weights_dtype": (_STR, "dtype the released weights use (bf16, fp8, ...)"),
    "parallel_attn": (_BOOL, "Falcon: attention and MLP read the same normed input"),
    "new_decoder_architecture": (_BOOL, "Falcon-40B style: two layer norms per block"),
    "bias": (_BOOL, "Falcon/GPT-2 style: biases on every linear layer and layer norm"),
}

# Fields that must be present, per family (MLA fields are added when kv_lora_rank is set).
_REQUIRED_COMMON = ("name", "model_type", "source", "hidden_size", "num_hidden_layers",
                    "num_attention_heads", "num_key_value_heads", "vocab_size",
                    "intermediate_size", "tie_word_embeddings")
_REQUIRED_MLA = ("kv_lora_rank", "q_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")
_REQUIRED_MOE = ("moe_intermediate_size", "num_experts_per_tok")
_REQUIRED_FAMILY = {
    "gpt2": ("max_position_embeddings",),
    "falcon": ("parallel_attn", "bias"),
}


@dataclass(frozen=True)
class ModelConfig:
    """A validated model configuration (field names as in Hugging Face ``config.json``).

    Build one with :func:`load_model`; the constructor itself checks every value.
    ``derived`` lists the fields that were not stated in the source and were filled
    in by a documented rule (for instance ``head_dim = hidden_size / heads`` when a
    ``config.json`` omits it).
    """

    name: str
    model_type: str
    source: tuple[str, ...]
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    vocab_size: int
    intermediate_size: int
    tie_word_embeddings: bool
    head_dim: int | None = None
    display_name: str = ""
    aliases: tuple[str, ...] = ()
    notes: str = ""
    attention_bias: bool = False
    qkv_bias: bool = False
    mlp_bias: bool = False
    q_lora_rank: int | None = None
    kv_lora_rank: int | None = None
    qk_nope_head_dim: int | None = None
    qk_rope_head_dim: int | None = None
    v_head_dim: int | None = None
    n_routed_experts: int = 0
    n_shared_experts: int = 0
    moe_intermediate_size: int | None = None
    num_experts_per_tok: int = 0
    first_k_dense_replace: int = 0
    moe_layer_freq: int = 1
    topk_method: str = ""
    num_nextn_predict_layers: int = 0
    sliding_window: int | None = None
    max_position_embeddings: int | None = None
    weights_dtype: str = "bf16"
    parallel_attn: bool = False
    new_decoder_architecture: bool = False
    bias: bool = False
    origin: str = "<dict>"
    derived: tuple[str, ...] = field(default=(), compare=False)

    def __post_init__(self):
        _validate(self)

    # -- derived, read-only views -------------------------------------------------
    @property
    def family(self) -> str:
        """Architecture family: llama, gpt2, falcon, deepseek or minicpm3."""
        return MODEL_TYPES[self.model_type]

    @property
    def is_mla(self) -> bool:
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
        return self.n_routed_experts > 0

    @property
    def label(self) -> str:
        return self.display_name or self.name

    def is_moe_layer(self, index: int) -> bool:
        """Whether decoder layer ``index`` (0-based) has a MoE FFN (DeepSeek's rule)."""
        return (self.is_moe and index >= self.first_k_dense_replace
                and index % self.moe_layer_freq == 0)

    @property
    def num_moe_layers(self) -> int:
        return sum(self.is_moe_layer(i) for i in range(self.num_hidden_layers))

    def to_dict(self) -> dict[str, Any]:
        """The configuration as a plain dict of the schema's fields."""
        out = {}
        for f in fields(self):
            if f.name in ("origin", "derived"):
                continue
            value = getattr(self, f.name)
            out[f.name] = list(value) if isinstance(value, tuple) else value
        return out

    def with_changes(self, **changes: Any) -> "ModelConfig":
        """A copy with some fields changed, validated again (for what-if studies)."""
        return replace(self, **changes)


# -----------------------------------------------------------------------------------
# validation

def _fail(cfg_or_origin, field_name, message, fix=None):
    origin = cfg_or_origin if isinstance(cfg_or_origin, str) else cfg_or_origin.origin
    raise ConfigError(message, source=origin, field=field_name, fix=fix)


def _check_kind(origin: str, name: str, value: Any) -> None:
    kind = FIELDS[name][0]
    if kind in (_POS, _NONNEG, _OPTPOS):
        if value is None and kind == _OPTPOS:
            return
        if isinstance(value, bool) or not isinstance(value, int):
            _fail(origin, name, f"must be a {kind}, got {value!r} ({type(value).__name__})",
                  f"write a whole number such as {name}: 128")
        if kind in (_POS, _OPTPOS) and value <= 0:
            fix = "use null for none" if kind == _OPTPOS else "dimensions must be at least 1"
            _fail(origin, name, f"must be a {kind}, got {value}", fix)
        if kind == _NONNEG and value < 0:
            _fail(origin, name, f"must be a {kind}, got {value}", "use 0 for none")
    elif kind == _BOOL:
        if not isinstance(value, bool):
            _fail(origin, name, f"must be true or false, got {value!r}")
    elif kind == _STR:
        if not isinstance(value, str) or not value.strip():
            _fail(origin, name, f"must be a non-empty string, got {value!r}")


def _validate(cfg: ModelConfig) -> None:
    origin = cfg.origin
    if cfg.model_type not in MODEL_TYPES:
        _fail(cfg, "model_type", f"unsupported model_type {cfg.model_type!r}",
              "use one of: " + ", ".join(MODEL_TYPES))
    for f in fields(cfg):
        value = getattr(cfg, f.name)
        if value is None or f.name not in FIELDS or f.name in ("source", "aliases"):
            continue
        if f.name in ("notes", "display_name", "topk_method") and value == "":
            continue
        _check_kind(origin, f.name, value)
    if not cfg.source or not all(isinstance(s, str) and s.strip() for s in cfg.source):
        _fail(cfg, "source", "every model needs a source", "say where the values come from")
    try:
        canonical_dtype(cfg.weights_dtype)
    except UnknownDtypeError:
        _fail(cfg, "weights_dtype", f"unknown dtype {cfg.weights_dtype!r}",
              "use one of: " + ", ".join(DTYPE_BITS))

    n_h, n_kv = cfg.num_attention_heads, cfg.num_key_value_heads
    if n_kv > n_h:
        _fail(cfg, "num_key_value_heads", f"{n_kv} KV heads exceed the {n_h} attention heads",
              "num_key_value_heads must be at most num_attention_heads")
    if n_h % n_kv:
        _fail(cfg, "num_key_value_heads",
              f"num_attention_heads {n_h} is not divisible by num_key_value_heads {n_kv}",
              "each KV head must serve the same number of query heads")

    if cfg.is_mla:
        for name in _REQUIRED_MLA[2:]:
            if getattr(cfg, name) is None:
                _fail(cfg, name, "is required when kv_lora_rank is set (MLA)")
        if cfg.qk_rope_head_dim % 2:
            _fail(cfg, "qk_rope_head_dim", f"RoPE rotates pairs of dimensions; {cfg.qk_rope_head_dim} is odd",
                  "use an even number")
        if cfg.head_dim is not None:
            _fail(cfg, "head_dim", "MLA models state qk_nope_head_dim, qk_rope_head_dim and v_head_dim "
                  "instead of head_dim", "remove head_dim")
        if n_kv != n_h:
            _fail(cfg, "num_key_value_heads", f"an MLA model must repeat num_attention_heads ({n_h}) here, "
                  f"as Hugging Face does; got {n_kv}", f"set num_key_value_heads: {n_h}")
    else:
        for name in ("q_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"):
            if getattr(cfg, name) is not None:
                _fail(cfg, name, "is an MLA field but kv_lora_rank is not set",
                      "set kv_lora_rank for an MLA model, or remove this field")
        if cfg.head_dim is None:
            _fail(cfg, "head_dim", "is required for MHA/GQA/MQA models", "state the per-head width")
        if cfg.family != "gpt2" and cfg.head_dim % 2:
            _fail(cfg, "head_dim", f"RoPE rotates pairs of dimensions; {cfg.head_dim} is odd",
                  "use an even number")
    if cfg.family == "gpt2" and not cfg.is_mla and cfg.head_dim * n_h != cfg.hidden_size:
        _fail(cfg, "head_dim", f"GPT-2 needs head_dim x heads = hidden_size; {cfg.head_dim} x {n_h} != "
              f"{cfg.hidden_size}")
    if cfg.family == "gpt2" and cfg.max_position_embeddings is None:
        _fail(cfg, "max_position_embeddings", "GPT-2 learns a position table of this size; it is required")

    if cfg.is_moe:
        if cfg.family not in ("deepseek", "llama") or cfg.model_type in ("llama", "qwen2", "gemma", "mistral"):
            _fail(cfg, "n_routed_experts", f"model_type {cfg.model_type} has no MoE layers",
                  "use mixtral or a DeepSeek model_type")
        if cfg.moe_intermediate_size is None:
            _fail(cfg, "moe_intermediate_size", "is required when n_routed_experts > 0")
        if not 0 < cfg.num_experts_per_tok <= cfg.n_routed_experts:
            _fail(cfg, "num_experts_per_tok",
                  f"must be between 1 and n_routed_experts ({cfg.n_routed_experts}), got {cfg.num_experts_per_tok}")
    elif cfg.model_type == "mixtral":
        _fail(cfg, "n_routed_experts", "a mixtral model needs its experts", "set n_routed_experts (num_local_experts)")
    elif cfg.n_shared_experts or cfg.num_experts_per_tok:
        _fail(cfg, "n_routed_experts", "expert fields are set but n_routed_experts is 0",
              "set n_routed_experts or remove the expert fields")
    if cfg.num_nextn_predict_layers and cfg.family != "deepseek":
        _fail(cfg, "num_nextn_predict_layers", f"MTP modules are modelled for DeepSeek-style models only, "
              f"not {cfg.model_type}")
    if cfg.sliding_window is not None and cfg.is_mla:
        _fail(cfg, "sliding_window", "sliding windows are not modelled for MLA", "set sliding_window: null")


# -----------------------------------------------------------------------------------
# building configs from mappings

def model_from_dict(data: Any, origin: str = "<dict>", *, strict: bool = True,
                    derived: tuple[str, ...] = ()) -> ModelConfig:
    """Validate a mapping of schema fields and return a :class:`ModelConfig`.

    ``strict`` rejects keys the schema does not know (YAML files are strict; a
    Hugging Face ``config.json`` goes through :func:`import_hf_config` instead).
    """
    if not isinstance(data, dict):
        raise ConfigError(f"the file must hold a mapping of fields, got {type(data).__name__}",
                          source=origin, fix="write one 'field: value' per line")
    data = dict(data)
    unknown = [k for k in data if k not in FIELDS]
    if unknown and strict:
        key = str(unknown[0])
        close = get_close_matches(key, list(FIELDS), n=1)
        fix = f"did you mean '{close[0]}'?" if close else "see docs/config-schema.md for the fields"
        raise ConfigError("is not a field of the model schema", source=origin, field=key, fix=fix)
    for key in unknown:
        data.pop(key)
    required = list(_REQUIRED_COMMON)
    if data.get("kv_lora_rank") is not None:
        required += _REQUIRED_MLA
    if data.get("n_routed_experts"):
        required += _REQUIRED_MOE
    required += _REQUIRED_FAMILY.get(MODEL_TYPES.get(data.get("model_type"), ""), ())
    for name in required:
        if name not in data:
            meaning = FIELDS[name][1]
            raise ConfigError("is missing", source=origin, field=name, fix=f"add it: {meaning}")
    for name, value in data.items():
        if name not in ("source", "aliases"):
            _check_kind(origin, name, value)
    source = data.pop("source")
    if isinstance(source, str):
        source = (source,)
    elif isinstance(source, list) and all(isinstance(s, str) for s in source):
        source = tuple(source)
    else:
        raise ConfigError("must be a string or a list of strings", source=origin, field="source")
    aliases = data.pop("aliases", ())
    if not isinstance(aliases, (list, tuple)) or not all(isinstance(a, str) for a in aliases):
        raise ConfigError("must be a list of strings", source=origin, field="aliases")
    name = data["name"]
    if name != name.strip().lower() or " " in name:
        raise ConfigError(f"shipped names are lower-case with dashes, got {name!r}", source=origin,
                          field="name", fix=f"use '{name.strip().lower().replace(' ', '-')}'")
    if "weights_dtype" in data:
        try:
            data["weights_dtype"] = canonical_dtype(data["weights_dtype"])
        except UnknownDtypeError:
            raise ConfigError(f"unknown dtype {data['weights_dtype']!r}", source=origin, field="weights_dtype",
                              fix="use one of: " + ", ".join(DTYPE_BITS)) from None
    if data.get("model_type") not in MODEL_TYPES:
        raise ConfigError(f"unsupported model_type {data.get('model_type')!r}", source=origin,
                          field="model_type", fix="use one of: " + ", ".join(MODEL_TYPES))
    derived = tuple(derived)
    defaults = _family_defaults(data)
    for key, (value, why) in defaults.items():
        if key not in data:
            data[key] = value
            derived += (f"{key} = {value!r} ({why})",)
    return ModelConfig(source=source, aliases=tuple(a.lower() for a in aliases), origin=origin,
                       derived=derived, **data)


def _family_defaults(data: dict) -> dict[str, tuple[Any, str]]:
    """Architecture facts implied by model_type, reported as derived."""
    family = MODEL_TYPES[data["model_type"]]
    out: dict[str, tuple[Any, str]] = {}
    if data["model_type"] == "qwen2":
        out["qkv_bias"] = (True, "Qwen2 attention has q, k, v biases")
    if family == "gpt2":
        out["bias"] = (True, "GPT-2 has biases on every linear layer and layer norm")
    return out


# -----------------------------------------------------------------------------------
# Hugging Face config.json import

# config.json spellings that differ from the schema's names
_HF_RENAMES = {
    "n_embd": "hidden_size",
    "n_layer": "num_hidden_layers",
    "n_head": "num_attention_heads",
    "n_positions": "max_position_embeddings",
    "n_inner": "intermediate_size",
    "num_local_experts": "n_routed_experts",
    "ffn_hidden_size": "intermediate_size",
    "num_kv_heads": "num_key_value_heads",
}


def import_hf_config(data: Any, origin: str = "config.json") -> ModelConfig:
    """Convert a Hugging Face ``config.json`` mapping into a validated :class:`ModelConfig`.

    Values the file leaves to the architecture's defaults are filled in by the same
    rules as the Hugging Face implementation, and each is listed in ``derived``.
    """
    if not isinstance(data, dict):
        raise ConfigError("a config.json must hold a JSON object", source=origin)
    model_type = data.get("model_type")
    if model_type == "RefinedWebModel" or model_type == "RefinedWeb":
        model_type = "falcon"
    if model_type not in MODEL_TYPES:
        raise ConfigError(f"unsupported model_type {model_type!r}", source=origin, field="model_type",
                          fix="supported: " + ", ".join(MODEL_TYPES))
    raw = {}
    for key, value in data.items():
        key = _HF_RENAMES.get(key, key)
        if key in FIELDS and key not in raw:
            raw[key] = value
    raw["model_type"] = model_type
    derived: list[str] = []

    def default(key, value, why):
        if raw.get(key) is None:
            raw[key] = value
            derived.append(f"{key} = {value!r} ({why})")

    stem = Path(origin).parent.name if Path(origin).name == "config.json" else Path(origin).stem
    name = (data.get("_name_or_path") or stem or model_type).split("/")[-1]
    raw["name"] = name.strip().lower().replace(" ", "-").replace("_", "-") or model_type
    raw.setdefault("source", f"Hugging Face config.json: {origin}")
    family = MODEL_TYPES[model_type]
    if "hidden_size" not in raw or "num_attention_heads" not in raw:
        missing = "hidden_size" if "hidden_size" not in raw else "num_attention_heads"
        raise ConfigError("is missing", source=origin, field=missing)
    if family in ("gpt2", "falcon") and isinstance(raw["num_attention_heads"], int) and raw["num_attention_heads"] > 0:
        default("head_dim", raw["hidden_size"] // raw["num_attention_heads"],
                f"{model_type}: head_dim = hidden_size / heads")
    if family == "gpt2":
        default("intermediate_size", 4 * raw["hidden_size"] if isinstance(raw["hidden_size"], int) else None,
                "GPT-2: n_inner null means 4 x n_embd")
        default("tie_word_embeddings", True, "GPT-2 ties its output head to wte")
        raw.pop("num_key_value_heads", None)
        raw["num_key_value_heads"] = raw["num_attention_heads"]
    if family == "falcon":
        if data.get("multi_query", True) and not data.get("new_decoder_architecture", False):
            raw["num_key_value_heads"] = 1
            derived.append("num_key_value_heads = 1 (multi_query: true)")
        default("num_key_value_heads", raw["num_attention_heads"], "Falcon without multi_query is MHA")
        default("intermediate_size", 4 * raw["hidden_size"], "FalconMLP is 4 x hidden_size")
        default("tie_word_embeddings", True, "Falcon ties its output head by default")
        default("parallel_attn", True, "FalconConfig default")
        default("bias", False, "FalconConfig default")
        if data.get("alibi"):
            derived.append("alibi: true (no RoPE)")
    if family == "deepseek" or family == "minicpm3":
        if raw.get("q_lora_rank") == 0:
            raw["q_lora_rank"] = None
            derived.append("q_lora_rank = None (0 means no query compression)")
        if family == "minicpm3":
            default("v_head_dim", raw["hidden_size"] // raw["num_attention_heads"],
                    "MiniCPM3: v_head_dim = hidden_size / num_attention_heads")
        if raw.get("n_routed_experts") is None:
            raw.pop("n_routed_experts", None)
        default("num_nextn_predict_layers", 0, "absent means no MTP module")
        raw.pop("head_dim", None)
    if family == "llama":
        if model_type == "qwen2" and data.get("use_sliding_window"):
            raise ConfigError("per-layer sliding windows (use_sliding_window: true) are not modelled",
                              source=origin, field="use_sliding_window")
        if model_type == "qwen2":
            raw.pop("sliding_window", None)
        if model_type == "gemma":
            default("tie_word_embeddings", True, "Gemma ties its output head by default")
        default("head_dim", raw["hidden_size"] // raw["num_attention_heads"]
                if isinstance(raw["num_attention_heads"], int) and raw["num_attention_heads"] > 0 else None,
                "Hugging Face default: hidden_size / num_attention_heads")
        default("num_key_value_heads", raw["num_attention_heads"], "absent means MHA")
        default("tie_word_embeddings", False, "Hugging Face default for this architecture")
    torch_dtype = data.get("torch_dtype") or data.get("dtype")
    if isinstance(torch_dtype, str):
        try:
            raw.setdefault("weights_dtype", canonical_dtype(torch_dtype))
        except UnknownDtypeError:
            pass
    quantization = data.get("quantization_config")
    if isinstance(quantization, dict) and quantization.get("quant_method") == "fp8":
        raw["weights_dtype"] = "fp8"
    if family != "deepseek" and family != "minicpm3":
        for key in ("q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"):
            if raw.get(key) is None:
                raw.pop(key, None)
    if raw.get("sliding_window") is None:
        raw.pop("sliding_window", None)
    if raw.get("n_routed_experts") is None:
        raw.pop("n_routed_experts", None)
    if not raw.get("n_routed_experts"):
        for key in ("n_shared_experts", "num_experts_per_tok", "moe_intermediate_size",
                    "first_k_dense_replace", "moe_layer_freq", "topk_method"):
            raw.pop(key, None)
    elif model_type == "mixtral":
        default("moe_intermediate_size", raw.get("intermediate_size"), "Mixtral experts use intermediate_size")
    return model_from_dict(raw, origin, strict=True, derived=tuple(derived))


# -----------------------------------------------------------------------------------
# loading files

def _shipped_dir() -> Path:
    here = Path(__file__).resolve().parent / "model_configs"
    if here.is_dir():
        return here
    return Path(__file__).resolve().parent.parent / "model_configs"


_INDEX: dict[str, Path] | None = None


def _index() -> dict[str, Path]:
    """Map every shipped name and alias to its file (read once, on first use)."""
    global _INDEX
    if _INDEX is None:
        index: dict[str, Path] = {}
        for path in sorted(_shipped_dir().glob("*.yaml")):
            index[path.stem] = path
            for alias in _read_aliases(path):
                index[alias] = path
        _INDEX = index
    return _INDEX


def _read_aliases(path: Path) -> list[str]:
    # A cheap scan for the "aliases:" line, so listing names does not parse every file.
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("aliases:"):
            body = line.split(":", 1)[1].strip().strip("[]")
            return [a.strip().strip("'\"").lower() for a in body.split(",") if a.strip()]
    return []


def shipped_models() -> list[str]:
    """Names of the models shipped in ``model_configs/`` (aliases excluded)."""
    return sorted(p.stem for p in _shipped_dir().glob("*.yaml"))


_YAML_LIMIT = 1 << 20


def _read_text(path: Path) -> str:
    try:
        size = path.stat().st_size
        if size > _YAML_LIMIT:
            raise ConfigError(f"is {size} bytes; model files are at most 1 MiB", source=str(path))
        return path.read_text(encoding="utf-8")
    except ConfigError:
        raise
    except UnicodeDecodeError:
        raise ConfigError("is not UTF-8 text", source=str(path)) from None
    except OSError as exc:
        raise ConfigError(f"cannot be read ({exc.strerror or exc})", source=str(path)) from None


def parse_yaml_text(text: str, origin: str) -> Any:
    """Parse YAML with the safe loader only: tags that would build objects are refused."""
    import yaml

    if not text.strip():
        raise ConfigError("is empty", source=origin, fix="a model file needs at least the required fields")
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        return yaml.load(text, Loader=loader)  # noqa: S506 - safe loader
    except yaml.constructor.ConstructorError as exc:
        tag = getattr(exc, "problem", "") or ""
        raise ConfigError(f"holds a YAML tag mlacalc will not construct ({tag.strip()})", source=origin,
                          fix="use plain values; python/object tags are never executed") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"is not valid YAML{where}: {problem}", source=origin) from None


def parse_config_text(text: str, origin: str) -> ModelConfig:
    """Build a config from the text of a YAML model file or a Hugging Face config.json."""
    stripped = text.lstrip()
    if origin.endswith(".json") or stripped.startswith("{"):
        if not stripped:
            raise ConfigError("is empty", source=origin)
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"is not valid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}",
                              source=origin) from None
        if isinstance(data, dict) and "model_type" in data and "name" not in data:
            return import_hf_config(data, origin)
        return model_from_dict(data, origin)
    data = parse_yaml_text(text, origin)
    if data is None:
        raise ConfigError("is empty", source=origin)
    return model_from_dict(data, origin)


def parse_upload(raw: bytes, filename: str, limit: int = _YAML_LIMIT) -> ModelConfig:
    """A model from the bytes of an uploaded YAML file or config.json: parsed in memory with the
    safe loader, never written to disk or executed; over ``limit`` bytes is refused."""
    if len(raw) > limit:
        raise ConfigError(f"is {len(raw):,} bytes; model files are at most {limit:,} bytes", source=filename)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError("is not UTF-8 text", source=filename) from None
    return parse_config_text(text, filename)


def load_model(name_or_path: "str | os.PathLike | ModelConfig") -> ModelConfig:
    """Load a validated model configuration.

    Parameters
    ----------
    name_or_path
        A shipped name (``"deepseek-v3"``, case-insensitive, aliases such as
        ``"deepseek-r1"`` too), the path of a YAML model file, or the path of a
        Hugging Face ``config.json``.

    Examples
    --------
    >>> m = load_model("deepseek-v3")
    >>> m.variant, m.kv_lora_rank, m.num_hidden_layers
    ('mla', 512, 61)
    """
    if isinstance(name_or_path, ModelConfig):
        return name_or_path
    if not isinstance(name_or_path, (str, os.PathLike)):
        raise ConfigError(f"expected a model name or a path, got {type(name_or_path).__name__}",
                          source=repr(name_or_path))
    text = os.fspath(name_or_path)
    key = text.strip().lower()
    index = _index()
    if key in index:
        return _load_file(index[key])
    path = Path(text).expanduser()
    if path.is_dir() and (path / "config.json").is_file():
        path = path / "config.json"
    if path.is_file():
        return _load_file(path)
    looks_like_path = os.sep in text or text.endswith((".yaml", ".yml", ".json"))
    if looks_like_path:
        raise ConfigError("no such file", source=text, fix="check the path, or give a shipped model name")
    raise UnknownModelError(text, shipped_models())


_CACHE: dict[tuple[str, float], ModelConfig] = {}


def _load_file(path: Path) -> ModelConfig:
    key = (str(path), path.stat().st_mtime)
    cached = _CACHE.get(key)
    if cached is None:
        cached = parse_config_text(_read_text(path), str(path))
        _CACHE[key] = cached
    return cached
