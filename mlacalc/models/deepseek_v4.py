"""DeepSeek-V4's layers, counted by the rules of its reference implementation.

DeepSeek-V4 (``model_type`` ``deepseek_v4``; transformers 5.23's ``DeepseekV4Config`` and
``modeling_deepseek_v4``) departs from DeepSeek-V3 in every part of a layer:

- **Attention** is multi-query with one shared K = V head of ``head_dim`` (512), a query
  low-rank path (``q_a_proj`` to ``q_lora_rank``, ``q_b_proj`` to ``n_h head_dim``), one
  attention-sink logit per head and a grouped output projection (``o_groups`` blocks of
  ``n_h head_dim / g`` to ``o_lora_rank`` each, then ``g o_lora_rank`` to ``d``). Every layer
  keeps a sliding window of ``sliding_window`` keys; on top of it a layer is one of
  ``sliding_attention`` (the window only), ``heavily_compressed_attention`` (HCA: a
  compressor pools every ``m' = compress_rates[hca]`` (128) tokens into one key, all of them
  attended) or ``compressed_sparse_attention`` (CSA: a compressor pools overlapping windows of
  ``2m`` tokens at stride ``m = compress_rates[csa]`` (4), and a lightning indexer with its
  own compressor at ``index_head_dim`` scores every pooled key and lets the query attend the
  ``index_topk`` best).
- **MoE** in every layer: ``n_routed_experts`` experts of ``moe_intermediate_size``, one
  shared expert of the same width, a router without groups; the first layers
  (``mlp_layer_types`` ``hash_moe``) pick their experts from a frozen token-id table
  ``tid2eid`` (``vocab_size x top-k`` int64, a checkpoint buffer) instead of the router's
  top-k, the others carry a per-expert correction bias.
- **Hyper-connections** (mHC): the residual is ``hc_mult`` streams; each layer has two mixers
  (before attention and before the MoE) of ``(2 + n) n x n d`` weights, ``(2 + n) n`` biases
  and 3 scales, and the model a head mixer of ``n x n d`` + ``n`` + 1 before the final norm.

This module reads a ``config.json`` by the class's own rules (legacy ``compress_ratios``,
``num_hash_layers``, ``compress_rate_csa`` / ``compress_rate_hca`` folded in as
``__post_init__`` does) and gives the checkpoint's tensors as the reference names them and
their parameters; the cache the reference holds after a forward and the FLOPs of a layer and
of the model are counted in :mod:`mlacalc.cost.compressed` (``cache_bytes``,
``attention_flops``, ``forward_flops``). The loadable family (:mod:`mlacalc.models.hf.dsv4`)
reads a config into the schema's fields, and :func:`config_of` turns a loaded model back into a
:class:`V4Config` for these rules. Every count is checked against transformers on the meta
device (``tests/test_deepseek_v4.py``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mlacalc.words.errors import ConfigError

__all__ = [
    "ALIASES",
    "CSA",
    "HCA",
    "IRRELEVANT",
    "LAYER_TYPES",
    "READ",
    "SLIDING",
    "V4Config",
    "active_param_count",
    "config_of",
    "param_count",
    "read_config",
    "tensors",
]

SLIDING = "sliding_attention"
CSA = "compressed_sparse_attention"
HCA = "heavily_compressed_attention"
LAYER_TYPES = (SLIDING, CSA, HCA)
MLP_LAYER_TYPES = ("hash_moe", "moe")
# the legacy per-layer integers of a published config.json -> layer type (the class's table)
_RATIO_TO_TYPE = {0: SLIDING, 4: CSA, 128: HCA}

#: DeepseekV4Config's class defaults (transformers 5.23) for a field a config.json omits
DEFAULTS: Mapping[str, Any] = {
    "vocab_size": 129280,
    "hidden_size": 4096,
    "moe_intermediate_size": 2048,
    "num_hidden_layers": 43,
    "num_attention_heads": 64,
    "head_dim": 512,
    "q_lora_rank": 1024,
    "num_experts_per_tok": 6,
    "n_routed_experts": 256,
    "n_shared_experts": 1,
    "hc_mult": 4,
    "sliding_window": 128,
    "o_groups": 8,
    "o_lora_rank": 1024,
    "index_n_heads": 64,
    "index_head_dim": 128,
    "index_topk": 512,
    "num_nextn_predict_layers": 1,
    "tie_word_embeddings": False,
    "mlp_bias": False,
    "num_hash_layers": 3,
}
_DEFAULT_RATES = {CSA: 4, HCA: 128}
#: the class's attribute_map: a config.json may spell these fields so
ALIASES: Mapping[str, str] = {
    "num_local_experts": "n_routed_experts",
    "intermediate_size": "moe_intermediate_size",
}
#: every field read besides DEFAULTS' (the per-layer lists, rates and their legacy spellings)
READ = (
    "model_type",
    "num_key_value_heads",
    "layer_types",
    "compress_ratios",
    "mlp_layer_types",
    "compress_rates",
    "compress_rate_csa",
    "compress_rate_hca",
    *ALIASES,
)
#: fields the class reads that change no parameter, cache byte or FLOP counted here (why)
IRRELEVANT: Mapping[str, str] = {
    **dict.fromkeys(
        (
            "rope_theta",
            "rope_parameters",
            "rope_scaling",
            "compress_rope_theta",
            "partial_rotary_factor",
            "qk_rope_head_dim",
            "max_position_embeddings",
        ),
        "rotary frequencies: no parameter, the rotation is element-wise",
    ),
    **dict.fromkeys(
        ("hc_sinkhorn_iters", "hc_eps", "rms_norm_eps", "swiglu_limit", "hidden_act"),
        "element-wise work (Sinkhorn normalisation, norms, clipping, the activation)",
    ),
    **dict.fromkeys(
        ("scoring_func", "norm_topk_prob", "routed_scaling_factor", "topk_method"),
        "how routing weights are computed and scaled: the same experts run",
    ),
    **dict.fromkeys(
        ("output_router_logits", "router_aux_loss_coef", "router_jitter_noise"),
        "a router's training loss or noise",
    ),
    **dict.fromkeys(
        ("attention_dropout", "initializer_range", "use_cache"), "training or runtime switches"
    ),
    **dict.fromkeys(("bos_token_id", "eos_token_id", "pad_token_id"), "a token id"),
    "attention_bias": "the reference's projections have no bias whatever it says",
    "expert_dtype": "the published checkpoint's storage of the experts, not their count",
    "quantization_config": "the published checkpoint's storage, not the logical parameters",
}
_COUNTS = ("num_nextn_predict_layers", "num_hash_layers")  # may be 0
_INT_FIELDS = tuple(k for k, v in DEFAULTS.items() if type(v) is int and k not in _COUNTS)
_INDEX = ("index_head_dim", "index_topk")  # with index_n_heads: absent without a CSA layer


@dataclass(frozen=True)
class V4Config:
    """The fields of a DeepSeek-V4 config that change a parameter, a cache byte or a FLOP."""

    vocab_size: int
    hidden_size: int
    moe_intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    head_dim: int
    q_lora_rank: int
    num_experts_per_tok: int
    n_routed_experts: int
    n_shared_experts: int
    hc_mult: int
    sliding_window: int
    o_groups: int
    o_lora_rank: int
    index_n_heads: int
    index_head_dim: int
    index_topk: int
    num_nextn_predict_layers: int
    num_hash_layers: int
    tie_word_embeddings: bool
    mlp_bias: bool
    layer_types: tuple[str, ...]
    mlp_layer_types: tuple[str, ...]
    compress_rates: tuple[tuple[str, int], ...]

    def rate(self, layer_type: str) -> int:
        """The compression rate of a CSA or HCA layer."""
        return dict(self.compress_rates)[layer_type]


def _fail(origin: str, field: str, message: str, fix: str | None = None):
    raise ConfigError(message, source=origin, field=field, fix=fix)


def _positive(raw: Mapping[str, Any], key: str, origin: str) -> int:
    value = raw.get(key, DEFAULTS[key])
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        _fail(origin, key, f"must be a positive integer, got {value!r}")
    return value


def _layer_types(raw: Mapping[str, Any], n: int, origin: str) -> tuple[str, ...]:
    """``layer_types``, else the legacy ``compress_ratios`` (0 / 4 / 128 per layer, the
    class's table), else the class's default (two HCA layers, then CSA and HCA alternating)."""
    listed = raw.get("layer_types")
    field = "layer_types"
    if listed is None and raw.get("compress_ratios") is not None:
        field, ratios = "compress_ratios", raw["compress_ratios"]
        if not isinstance(ratios, list) or any(
            isinstance(r, bool) or r not in _RATIO_TO_TYPE for r in ratios
        ):
            _fail(origin, field, "must list 0, 4 or 128 per layer", "use layer_types")
        listed = [_RATIO_TO_TYPE[r] for r in ratios]
    if listed is None:
        alternate = [CSA if i % 2 else HCA for i in range(max(n - 2, 0))]
        return tuple([HCA] * min(n, 2) + alternate)
    if not isinstance(listed, list) or any(t not in LAYER_TYPES for t in listed):
        _fail(origin, field, f"entries must be one of {', '.join(LAYER_TYPES)}")
    if len(listed) < n:  # the class keeps the first num_hidden_layers entries
        _fail(origin, field, f"lists {len(listed)} layers, num_hidden_layers is {n}")
    return tuple(listed[:n])


def _mlp_layer_types(raw: Mapping[str, Any], n: int, origin: str) -> tuple[str, ...]:
    listed = raw.get("mlp_layer_types")
    if listed is None:
        hashed = raw.get("num_hash_layers", DEFAULTS["num_hash_layers"])
        if isinstance(hashed, bool) or not isinstance(hashed, int) or hashed < 0:
            _fail(origin, "num_hash_layers", f"must be an integer >= 0, got {hashed!r}")
        return tuple(["hash_moe"] * min(n, hashed) + ["moe"] * max(0, n - hashed))
    if not isinstance(listed, list) or any(t not in MLP_LAYER_TYPES for t in listed):
        _fail(origin, "mlp_layer_types", "entries must be 'hash_moe' or 'moe'")
    if len(listed) < n:
        _fail(origin, "mlp_layer_types", f"lists {len(listed)} layers, num_hidden_layers is {n}")
    return tuple(listed[:n])


def _rates(raw: Mapping[str, Any], origin: str) -> tuple[tuple[str, int], ...]:
    rates = raw.get("compress_rates")
    if rates is None:
        rates = dict(_DEFAULT_RATES)
    elif not isinstance(rates, dict) or set(rates) - set(LAYER_TYPES):
        _fail(origin, "compress_rates", f"must map {CSA} and {HCA} to a rate")
    rates = {**_DEFAULT_RATES, **{k: v for k, v in rates.items() if k != SLIDING}}
    for legacy, kind in (("compress_rate_csa", CSA), ("compress_rate_hca", HCA)):
        if raw.get(legacy) is not None:
            rates[kind] = raw[legacy]
    for kind, value in rates.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            _fail(origin, "compress_rates", f"{kind} must be a positive integer, got {value!r}")
    return ((CSA, rates[CSA]), (HCA, rates[HCA]))


def read_config(raw: Mapping[str, Any], origin: str = "config.json") -> V4Config:
    """A DeepSeek-V4 ``config.json`` read as ``DeepseekV4Config`` reads it.

    Refused, naming the field: a value the class cannot take, a per-layer list shorter than
    ``num_hidden_layers``, ``n_shared_experts`` other than 1 (the reference builds one shared
    expert whatever the value, so another count could not be checked), ``num_key_value_heads``
    other than 1 (its attention has one shared K = V head whatever the value), heads that do
    not split into ``o_groups``.
    """
    if not isinstance(raw, Mapping):
        _fail(origin, "config", f"must be a JSON object, got {type(raw).__name__}")
    raw = dict(raw)
    for alias, field in ALIASES.items():  # the class's attribute_map
        if alias in raw:
            if field in raw and raw[field] != raw[alias]:
                _fail(origin, alias, f"is {raw[alias]!r} but {field} is {raw[field]!r}")
            raw[field] = raw[alias]
    if raw.get("model_type", "deepseek_v4") != "deepseek_v4":
        _fail(origin, "model_type", f"is {raw.get('model_type')!r}, not deepseek_v4")
    values: dict[str, Any] = {k: _positive(raw, k, origin) for k in _INT_FIELDS}
    for key in _COUNTS:
        value = raw.get(key, DEFAULTS[key])
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            _fail(origin, key, f"must be an integer >= 0, got {value!r}")
        values[key] = value
    for key in ("tie_word_embeddings", "mlp_bias"):
        value = raw.get(key, DEFAULTS[key])
        if not isinstance(value, bool):
            _fail(origin, key, f"must be true or false, got {value!r}")
        values[key] = value
    if values["n_shared_experts"] != 1:
        _fail(origin, "n_shared_experts", "must be 1: DeepSeek-V4 has one shared expert")
    if raw.get("num_key_value_heads", 1) != 1:
        _fail(origin, "num_key_value_heads", "must be 1: one K = V head is shared by all heads")
    if values["sliding_window"] < 2:  # the reference's cache keeps the last W - 1 rows
        _fail(origin, "sliding_window", "must be at least 2", "use 2 or more")
    n = values["num_hidden_layers"]
    heads, groups = values["num_attention_heads"], values["o_groups"]
    if heads * values["head_dim"] % groups:
        _fail(origin, "o_groups", f"must divide num_attention_heads x head_dim, got {groups}")
    if values["num_experts_per_tok"] > values["n_routed_experts"]:
        _fail(origin, "num_experts_per_tok", "must not exceed n_routed_experts")
    return V4Config(
        **values,
        layer_types=_layer_types(raw, n, origin),
        mlp_layer_types=_mlp_layer_types(raw, n, origin),
        compress_rates=_rates(raw, origin),
    )


#: :func:`config_of` of the last few models, by identity (the model kept beside its config, so
#: an id is never reused while its entry lives): a module table's rows build one model's
#: kernels thousands of times (speed only)
_CONFIGS: dict[int, tuple[Any, V4Config]] = {}


def config_of(model: Any) -> V4Config:
    """The :class:`V4Config` of a loaded ``deepseek_v4`` :class:`~mlacalc.ModelConfig` (its
    ``compress_ratios``, rates, ``hash_moe_layers`` and widths; the schema checked them)."""
    hit = _CONFIGS.get(id(model))
    if hit is not None and hit[0] is model:
        return hit[1]
    config = _config_of(model)
    if len(_CONFIGS) >= 64:
        _CONFIGS.clear()
    _CONFIGS[id(model)] = (model, config)
    return config


def _config_of(model: Any) -> V4Config:
    m = model
    kinds = {0: SLIDING, m.compress_rate_csa: CSA, m.compress_rate_hca: HCA}
    hashed = set(m.hash_moe_layers)
    return V4Config(
        **{k: getattr(m, k) for k in _INT_FIELDS if k not in ("index_n_heads", *_INDEX)},
        **{k: getattr(m, k) or DEFAULTS[k] for k in ("index_n_heads", *_INDEX)},
        num_nextn_predict_layers=0,
        num_hash_layers=len(hashed),
        tie_word_embeddings=m.tie_word_embeddings,
        mlp_bias=m.mlp_bias,
        layer_types=tuple(kinds[r] for r in m.compress_ratios),
        mlp_layer_types=tuple(
            "hash_moe" if i + 1 in hashed else "moe" for i in range(m.num_hidden_layers)
        ),
        compress_rates=(
            (CSA, m.compress_rate_csa or _DEFAULT_RATES[CSA]),
            (HCA, m.compress_rate_hca or _DEFAULT_RATES[HCA]),
        ),
    )


def _compressor(c: V4Config, p: str, width: int, rate: int, overlap: bool) -> list:
    """A compressor's tensors: kv and gate projections, a position bias per slot, a norm.
    An overlapping (CSA) compressor projects to two series of ``width``."""
    out = 2 * width if overlap else width
    return [
        (f"{p}.kv_proj.weight", (out, c.hidden_size)),
        (f"{p}.gate_proj.weight", (out, c.hidden_size)),
        (f"{p}.position_bias", (rate, out)),
        (f"{p}.kv_norm.weight", (width,)),
    ]


def _attention(c: V4Config, i: int, p: str) -> list:
    d, nh, hd = c.hidden_size, c.num_attention_heads, c.head_dim
    kind = c.layer_types[i]
    out = [
        (f"{p}.q_a_proj.weight", (c.q_lora_rank, d)),
        (f"{p}.q_a_norm.weight", (c.q_lora_rank,)),
        (f"{p}.q_b_proj.weight", (nh * hd, c.q_lora_rank)),
        (f"{p}.kv_proj.weight", (hd, d)),
        (f"{p}.kv_norm.weight", (hd,)),
        (f"{p}.o_a_proj.weight", (c.o_groups * c.o_lora_rank, nh * hd // c.o_groups)),
        (f"{p}.o_b_proj.weight", (d, c.o_groups * c.o_lora_rank)),
        (f"{p}.sinks", (nh,)),
    ]
    if kind == HCA:
        out += _compressor(c, f"{p}.compressor", hd, c.rate(HCA), overlap=False)
    elif kind == CSA:
        q = f"{p}.compressor.indexer"
        out += _compressor(c, f"{p}.compressor", hd, c.rate(CSA), overlap=True)
        out += _compressor(c, q, c.index_head_dim, c.rate(CSA), overlap=True)
        out += [
            (f"{q}.q_b_proj.weight", (c.index_n_heads * c.index_head_dim, c.q_lora_rank)),
            (f"{q}.scorer.weights_proj.weight", (c.index_n_heads, d)),
        ]
    return out


def _hyper(c: V4Config, p: str) -> list:
    n = c.hc_mult
    return [
        (f"{p}.fn", ((2 + n) * n, n * c.hidden_size)),
        (f"{p}.base", ((2 + n) * n,)),
        (f"{p}.scale", (3,)),
    ]


def _moe(c: V4Config, i: int, p: str) -> list:
    d, e, w = c.hidden_size, c.n_routed_experts, c.moe_intermediate_size
    out = [(f"{p}.gate.weight", (e, d))]
    if c.mlp_layer_types[i] == "hash_moe":  # a frozen token-id -> experts table (int64)
        out.append((f"{p}.gate.tid2eid", (c.vocab_size, c.num_experts_per_tok)))
    else:
        out.append((f"{p}.gate.e_score_correction_bias", (e,)))
    out += [
        (f"{p}.experts.gate_up_proj", (e, 2 * w, d)),
        (f"{p}.experts.down_proj", (e, d, w)),
    ]
    for name, shape in (("gate_proj", (w, d)), ("up_proj", (w, d)), ("down_proj", (d, w))):
        out.append((f"{p}.shared_experts.{name}.weight", shape))
        if c.mlp_bias:
            out.append((f"{p}.shared_experts.{name}.bias", shape[:1]))
    return out


def tensors(c: V4Config) -> list[tuple[str, tuple[int, ...]]]:
    """Every tensor of the checkpoint of the reference's ``DeepseekV4ForCausalLM`` (name,
    shape), buffers it saves included (``tid2eid``, ``e_score_correction_bias``). The MTP
    layers (``num_nextn_predict_layers``) are not built by the reference and not listed."""
    d, n = c.hidden_size, c.hc_mult
    out: list[tuple[str, tuple[int, ...]]] = [("model.embed_tokens.weight", (c.vocab_size, d))]
    for i in range(c.num_hidden_layers):
        p = f"model.layers.{i}"
        out += _attention(c, i, f"{p}.self_attn")
        out += _moe(c, i, f"{p}.mlp")
        out += [
            (f"{p}.input_layernorm.weight", (d,)),
            (f"{p}.post_attention_layernorm.weight", (d,)),
        ]
        out += _hyper(c, f"{p}.attn_hc") + _hyper(c, f"{p}.ffn_hc")
    out += [
        ("model.norm.weight", (d,)),
        ("model.hc_head.hc_fn", (n, n * d)),
        ("model.hc_head.hc_base", (n,)),
        ("model.hc_head.hc_scale", (1,)),
    ]
    if not c.tie_word_embeddings:
        out.append(("lm_head.weight", (c.vocab_size, d)))
    return out


def param_count(c: V4Config) -> int:
    """Parameters (and saved buffers) of the checkpoint, MTP layers excluded."""
    return sum(math.prod(shape) for _, shape in tensors(c))


def active_param_count(c: V4Config, embedding: bool = True) -> int:
    """Parameters a token uses: all but the routed experts it is not sent to
    (``num_experts_per_tok`` of ``n_routed_experts`` per layer); the input embedding (one row
    read, not a product) is left out with ``embedding=False``."""
    unused = c.n_routed_experts - c.num_experts_per_tok
    per_expert = 3 * c.hidden_size * c.moe_intermediate_size
    total = param_count(c) - c.num_hidden_layers * unused * per_expert
    if not embedding and not c.tie_word_embeddings:
        total -= c.vocab_size * c.hidden_size
    return total
