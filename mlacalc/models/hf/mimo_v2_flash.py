"""MiMo-V2-Flash (``MiMoV2FlashConfig``; transformers 5.23 ``MiMoV2FlashAttention``).

The Llama layout with an attention of two head widths: query and key heads of ``head_dim``
(192) and value heads of ``v_head_dim`` (128): ``v_proj`` is ``d -> n_kv v_head_dim`` and
``o_proj`` ``n_h v_head_dim -> d``, a cache row ``n_kv (head_dim + v_head_dim)``. Layers are
full or sliding (``layer_types``; the class default: the first layer and every 6th, 1-based,
full), read as the 1-based ``full_attention_layers``. A sliding layer has **twice** the KV heads
of a full one (``sliding_key_value_heads`` = 2 ``num_key_value_heads``, the class's rule) and
one attention-sink logit per query head (``sinks``); a full layer has neither. q/k/v biases
with ``attention_bias`` (``o_proj`` never has one: read as ``qkv_bias``). Dense gated MLPs of
``intermediate_size`` lead (``mlp_layer_types``, default: the first layer), then MoE layers:
DeepSeek-V3's sigmoid router with its per-expert correction bias over ``n_routed_experts``
gated experts of ``moe_intermediate_size``, no shared expert. Untied head.

The window: the class's ``sliding_window`` (default 129) is the keys a query attends, itself
included; a published ``sliding_window_size`` W (SGLang's, the keys before the query) is read
as W + 1, as the class does. The MTP layers of the checkpoint are not counted (the class
builds none). ``attention_value_scale`` multiplies the values element-wise (no count).
"""

from typing import Any

from mlacalc.models.architecture import Arch
from mlacalc.models.hf._layer_types import read_mlp_layer_types
from mlacalc.models.registry import ClassDefault, Default, Family, register

_TYPES = ("full_attention", "sliding_attention")


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _layer_types(data, raw, derived, problems, n: int) -> None:
    types = data.get("layer_types")
    if types is None:  # MiMoV2FlashConfig: the first layer and every 6th (1-based) full
        types = [
            "full_attention" if (i == 0 or not (i + 1) % 6) else "sliding_attention"
            for i in range(n)
        ]
        derived.append(
            ClassDefault("layer_types: the MiMoV2FlashConfig default (layer 1 and every 6th full)")
        )
    if not isinstance(types, list) or len(types) != n:
        got = len(types) if isinstance(types, list) else type(types).__name__
        problems.append(
            ("layer_types", f"must list one type per layer ({n} layers), got {got}", None)
        )
        return
    unknown = [t for t in types if t not in _TYPES]
    if unknown:
        problems.append(
            (
                "layer_types",
                f"layer type {unknown[0]!r} is not modelled for mimo_v2_flash",
                "use full_attention and sliding_attention",
            )
        )
        return
    full = [i + 1 for i, t in enumerate(types) if t == "full_attention"]
    if len(full) == n:
        raw["sliding_window"] = None  # stated: the family's default window would apply
        derived.append("every layer full (layer_types): sliding_window unused")
        return
    raw["full_attention_layers"] = full
    derived.append(
        f"full_attention_layers = {len(full)} 1-based layers from layer_types (the others sliding)"
    )


def _window(data, raw, derived, problems) -> None:
    size = data.get("sliding_window_size")
    if size is None:
        return
    if _int(size) is None or size <= 0:
        problems.append(("sliding_window_size", f"must be a positive integer, got {size!r}", None))
        return
    raw["sliding_window"] = size + 1
    derived.append(
        f"sliding_window = {size + 1} (sliding_window_size {size} plus the query, as "
        "MiMoV2FlashConfig reads it)"
    )


def _translate(data, raw, derived, problems) -> None:
    n = _int(raw.get("num_hidden_layers", 48))
    if n is None or n <= 0:
        return  # the schema reports num_hidden_layers
    raw.setdefault("num_hidden_layers", n)
    if "v_head_dim" in data and data["v_head_dim"] is None:
        problems.append(
            ("v_head_dim", "is null; MiMoV2FlashConfig needs the value heads' width", "state it")
        )
    _window(data, raw, derived, problems)
    _layer_types(data, raw, derived, problems, n)
    kinds = data.get("mlp_layer_types")
    if kinds is None:
        kinds = ["dense"] + ["sparse"] * (n - 1)
    elif not isinstance(kinds, list) or len(kinds) != n:
        problems.append(("mlp_layer_types", f"must list one type per layer ({n} layers)", None))
        return
    read_mlp_layer_types({"mlp_layer_types": kinds}, raw, derived, problems)
    if raw.get("attention_bias"):
        raw["attention_bias"], raw["qkv_bias"] = False, True
        derived.append("attention_bias: q/k/v biases only (o_proj has none), read as qkv_bias")


FAMILY = register(
    Family(
        name="mimo_v2_flash",
        model_types=("mimo_v2_flash",),
        layout="llama",
        hf_class="transformers MiMoV2FlashConfig",
        stray=(
            "n_shared_experts",
            "first_k_dense_replace",
            "moe_layer_freq",
            "moe_layer_offset",
            "topk_method",
        ),
        alias_wins={"mimo_v2_flash": ("num_local_experts",)},  # the classes' attribute_map
        renames={"num_local_experts": "n_routed_experts"},
        defaults={
            "vocab_size": Default("MiMoV2FlashConfig default", value=152576),
            "hidden_size": Default("MiMoV2FlashConfig default", value=4096),
            "intermediate_size": Default("MiMoV2FlashConfig default", value=16384),
            "num_hidden_layers": Default("MiMoV2FlashConfig default", value=48),
            "num_attention_heads": Default("MiMoV2FlashConfig default", value=64),
            "num_key_value_heads": Default("MiMoV2FlashConfig default", value=4),
            "head_dim": Default("MiMoV2FlashConfig default", value=192),
            "v_head_dim": Default("MiMoV2FlashConfig default", value=128),
            "tie_word_embeddings": Default("MiMoV2FlashConfig default", value=False),
            "sliding_window": Default("MiMoV2FlashConfig default", value=129),
            "n_routed_experts": Default("MiMoV2FlashConfig default", value=256),
            "num_experts_per_tok": Default("MiMoV2FlashConfig default", value=8),
            "moe_intermediate_size": Default("MiMoV2FlashConfig default", value=2048),
            "max_position_embeddings": Default("MiMoV2FlashConfig default", value=131072),
            "sliding_key_value_heads": Default(
                "MiMoV2FlashAttention: a sliding layer has 2 x num_key_value_heads",
                rule=lambda v: 2 * v["num_key_value_heads"],
                needs=("num_key_value_heads",),
            ),
        },
        reads=("layer_types", "mlp_layer_types", "sliding_window_size"),
        irrelevant={
            "attention_value_scale": "multiplies the values element-wise (no weight, no product)",
        },
        translate=_translate,
        moe=True,
        archs={"mimo_v2_flash": Arch(correction_bias=True, sliding_sinks=True)},
    )
)
