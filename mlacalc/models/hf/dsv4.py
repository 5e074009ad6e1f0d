"""DeepSeek-V4 (``DeepseekV4Config``): compressed attention, hash-routed MoE, hyper-connections.

The file is read by the class's own rules (:func:`mlacalc.models.deepseek_v4.read_config`:
``layer_types`` or the legacy ``compress_ratios``, ``compress_rates`` or
``compress_rate_csa`` / ``compress_rate_hca``, ``mlp_layer_types`` or ``num_hash_layers``,
the attribute map) and each of its layers becomes a layer kind of the schema: ``csa``
(compressed sparse attention: keys pooled from overlapping windows every ``compress_rate_csa``
tokens, a lightning indexer picking ``index_topk`` of them), ``hca`` (heavily compressed
attention: every key pooled from ``compress_rate_hca`` tokens attended) or ``swa`` (the
window only), each with its sliding window of ``sliding_window`` keys on one shared K = V
head; the first layers' MoE routes by a frozen token-id table (``hash_moe_layers``); the
residual is ``hc_mult`` streams mixed by hyper-connections. The costs are
:mod:`mlacalc.cost.compressed`; the counts equal the reference on the meta device
(``tests/test_dsv4_family.py``).
"""

from mlacalc.models import deepseek_v4 as v4
from mlacalc.models.architecture import Arch
from mlacalc.models.registry import Default, Family, NotImported, register
from mlacalc.words.errors import ConfigError

#: the V4Config fields written into the schema's fields of the same name
_SAME = (
    "vocab_size",
    "hidden_size",
    "moe_intermediate_size",
    "num_hidden_layers",
    "num_attention_heads",
    "head_dim",
    "q_lora_rank",
    "num_experts_per_tok",
    "n_routed_experts",
    "n_shared_experts",
    "hc_mult",
    "sliding_window",
    "o_groups",
    "o_lora_rank",
    "tie_word_embeddings",
    "mlp_bias",
)
_INDEXER = ("index_n_heads", "index_head_dim", "index_topk")
#: fields the reference reads that are schema fields (read or dropped as such, not listed)
_SCHEMA_FIELDS = ("quantization_config", "qk_rope_head_dim", "max_position_embeddings")


def _translate(data, raw, derived, problems) -> None:
    try:
        c = v4.read_config(data)
    except ConfigError as error:
        problems.append((error.field or "config", error.message, error.fix))
        _as_far_as_read(data, raw)
        return
    for key in _SAME:
        raw[key] = getattr(c, key)
    raw["num_key_value_heads"] = 1
    raw["intermediate_size"] = c.moe_intermediate_size  # the class's alias; no dense FFN
    csa, hca = c.rate(v4.CSA), c.rate(v4.HCA)
    ratio = {v4.SLIDING: 0, v4.CSA: csa, v4.HCA: hca}
    raw["compress_ratios"] = [ratio[t] for t in c.layer_types]
    raw["compress_rate_csa"], raw["compress_rate_hca"] = csa, hca
    if v4.CSA in c.layer_types:
        raw.update({k: getattr(c, k) for k in _INDEXER})
    else:  # no indexer is built without a CSA layer
        for k in _INDEXER:
            raw.pop(k, None)
    raw["hash_moe_layers"] = [i + 1 for i, t in enumerate(c.mlp_layer_types) if t == "hash_moe"]
    quant, experts = data.get("quantization_config"), data.get("expert_dtype")
    if isinstance(quant, dict) and experts is not None and "expert_dtype" not in quant:
        # DeepseekV4Config moves a top-level expert_dtype into the quantization config, where
        # the fp8 integration stores the routed experts as e2m1 with a ue8m0 scale per 32
        raw["quantization_config"] = {**quant, "expert_dtype": experts}
        derived.append(f"quantization_config.expert_dtype = {experts!r} (from expert_dtype)")
    if data.get("layer_types") is not None or data.get("compress_ratios") is not None:
        given = "layer_types" if data.get("layer_types") is not None else "compress_ratios"
        kinds = f"each layer's kind read from {given}, its first {c.num_hidden_layers} entries"
    else:  # neither listed: the class's own rule, which a user should know was applied
        kinds = (
            "neither layer_types nor compress_ratios given, so each layer's kind is "
            "DeepseekV4Config's default, two hca layers then csa and hca alternating"
        )
    _mtp(data, raw, derived)
    counts = {k: c.layer_types.count(k) for k in (v4.CSA, v4.HCA, v4.SLIDING)}
    derived.append(
        f"compress_ratios: {kinds} ({counts[v4.HCA]} hca, {counts[v4.CSA]} "
        f"csa, {counts[v4.SLIDING]} sliding), rates {csa} (csa) and {hca} (hca); "
        f"hash_moe_layers: {len(raw['hash_moe_layers'])} (mlp_layer_types or num_hash_layers)"
    )


def _mtp(data, raw, derived) -> None:
    """The config's MTP layer is not imported: said in ``derived`` (import-hf prints it, as it
    does Qwen3.5's and MiniMax-M3's; V4-Pro's said nothing) and in the model's ``notes``
    (plan's refusal of ``--mtp-tokens`` cites them)."""
    n = data.get("num_nextn_predict_layers")
    if not isinstance(n, int) or isinstance(n, bool) or n <= 0:
        return
    why = (
        f"the MTP layer{'s' if n > 1 else ''} (num_nextn_predict_layers: {n}) not counted: the "
        "reference builds none, so num_nextn_predict_layers is 0 and plan's --mtp-tokens and "
        "--include-mtp have no MTP module to use"
    )
    derived.append(NotImported(why))
    raw["notes"] = why


def _as_far_as_read(data, raw) -> None:
    """After a field the class's rules refuse, what the translation gives regardless (the
    experts' width as the FFN's, the first ``num_hidden_layers`` ratios), so the refusal is
    not joined by fields missing or inconsistent only because the translation stopped."""
    width = data.get("moe_intermediate_size")
    if "intermediate_size" not in raw and isinstance(width, int) and not isinstance(width, bool):
        raw["intermediate_size"] = width
    n, ratios = raw.get("num_hidden_layers"), raw.get("compress_ratios")
    if isinstance(n, int) and isinstance(ratios, list) and len(ratios) > n > 0:
        raw["compress_ratios"] = ratios[:n]


def _class(**values) -> dict[str, Default]:
    return {k: Default("DeepseekV4Config default", value=v) for k, v in values.items()}


FAMILY = register(
    Family(
        name="dsv4",
        model_types=("deepseek_v4",),
        layout="llama",
        hf_class="transformers DeepseekV4Config",
        stray=("first_k_dense_replace", "moe_layer_freq", "moe_layer_offset"),
        alias_wins={"deepseek_v4": ("num_local_experts",)},  # the classes' attribute_map
        renames={"num_local_experts": "n_routed_experts"},
        defaults={
            **_class(**{k: v4.DEFAULTS[k] for k in _SAME if k not in ("num_hidden_layers",)}),
            "num_key_value_heads": Default(
                "one K = V head shared by all heads", value=1, warn=False
            ),
            "compress_rate_csa": Default("DeepseekV4Config compress_rates default", value=4),
            "compress_rate_hca": Default("DeepseekV4Config compress_rates default", value=128),
        },
        required=("compress_ratios",),
        ignored={
            "num_nextn_predict_layers": "the reference builds no MTP layer (not counted)",
            "qk_rope_head_dim": "the rotated part of each head: element-wise, no parameter",
        },
        reads=(
            "layer_types",
            "mlp_layer_types",
            "compress_rates",
            "num_hash_layers",
            "expert_dtype",
        ),
        irrelevant={
            k: why
            for k, why in v4.IRRELEVANT.items()
            if k not in _SCHEMA_FIELDS and k != "expert_dtype"
        },
        translate=_translate,
        moe=True,
        requires_experts=True,
        archs={"deepseek_v4": Arch(compressed=True, sinks=True)},
    )
)
