"""Gemma 4 (``Gemma4TextConfig``, in ``text_config`` of ``Gemma4Config``): the language model.

Sliding layers (``sliding_window``) with every sixth layer full (``layer_types``; the last
layer is always full). A full layer has its own head width (``global_head_dim``) and, with
``attention_k_eq_v``, its own KV heads (``num_global_key_value_heads``) and no ``v_proj``: the
key projection serves as the value too, yet K (normed, rotated) and V (normed) are two
tensors in the cache. Per-head query and key norms, four norms per layer, tied head. With
``enable_moe_block`` every layer runs a dense MLP of ``intermediate_size`` beside its routed
experts (``num_experts`` of ``moe_intermediate_size``, ``top_k_experts`` a token), modelled as
``intermediate_size / moe_intermediate_size`` shared experts; the router adds a scale vector
and a per-expert scale, the layer three more norms and a scalar.

The vision and audio towers of the multimodal checkpoint are not counted (the language
model only). Refused by name: per-layer embeddings (``hidden_size_per_layer_input``, the
default when absent), layers that reuse another layer's cache (``num_kv_shared_layers``),
``use_bidirectional_attention: all`` (halves the window and drops causality)."""

from mlacalc.models.architecture import Arch
from mlacalc.models.hf._layer_types import lift_text_config, read_layer_types
from mlacalc.models.registry import DEEPSEEK_MOE_FIELDS, Default, Family, HFInput, register

_RENAMES = {"num_experts": "n_routed_experts", "top_k_experts": "num_experts_per_tok"}
_PERIOD = 6  # Gemma4TextConfig: five sliding layers, then a full one


def _int_or_none(value):
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _translate(data, raw, derived, problems) -> None:
    text = lift_text_config(data, raw, _RENAMES)
    if "text_config" in data:
        derived.append(
            "read text_config (the language model; the vision and audio towers are not counted)"
        )
    ple = text.get("hidden_size_per_layer_input", 256)
    if ple != 0:
        problems.append(
            (
                "hidden_size_per_layer_input",
                f"per-layer embeddings (hidden_size_per_layer_input: {ple!r}; absent means the "
                "Gemma4TextConfig default 256) are not modelled",
                "the nearest modelled layout is hidden_size_per_layer_input: 0",
            )
        )
    shared = text.get("num_kv_shared_layers", 0)
    if shared not in (0, None):
        problems.append(
            (
                "num_kv_shared_layers",
                f"layers that reuse another layer's keys and values ({shared!r}) are not modelled",
                "the nearest modelled layout is num_kv_shared_layers: 0 (a cache in every layer)",
            )
        )
    if text.get("use_bidirectional_attention") == "all":
        problems.append(
            (
                "use_bidirectional_attention",
                "'all' (non-causal text attention, window halved) is not modelled",
                "use null or 'vision' (only image tokens attend both ways)",
            )
        )
    moe = text.get("enable_moe_block", False)
    if not isinstance(moe, bool):
        problems.append(("enable_moe_block", f"must be true or false, got {moe!r}", None))
    elif not moe:
        for key in ("n_routed_experts", "num_experts_per_tok", "moe_intermediate_size"):
            raw.pop(key, None)
        derived.append("no routed experts (enable_moe_block is false)")
    else:
        dense = _int_or_none(text.get("intermediate_size", 9216))
        width = _int_or_none(text.get("moe_intermediate_size"))
        if dense and width:
            if dense % width:
                problems.append(
                    (
                        "intermediate_size",
                        f"{dense} is not a multiple of moe_intermediate_size {width}",
                        "the dense MLP beside the experts is modelled as n_shared_experts "
                        "experts of that width",
                    )
                )
            else:
                raw["n_shared_experts"] = dense // width
                derived.append(
                    f"n_shared_experts = {dense // width} (the dense MLP of intermediate_size "
                    f"{dense} beside the experts in every layer, as experts of {width})"
                )
    if text.get("attention_k_eq_v") is not True and "num_global_key_value_heads" in raw:
        raw.pop("num_global_key_value_heads")
        derived.append(
            "num_global_key_value_heads ignored (Gemma4TextConfig reads it only with "
            "attention_k_eq_v)"
        )
    if text.get("attention_k_eq_v") is True and "num_global_key_value_heads" not in raw:
        derived.append(
            "num_global_key_value_heads = None (absent: Gemma4TextConfig default; the full "
            f"layers keep num_key_value_heads {raw.get('num_key_value_heads', 4)!r} KV heads)"
        )
    n = raw.get("num_hidden_layers")
    types = text.get("layer_types")
    if isinstance(types, list) and types and types[-1] != "full_attention":
        types = [*types[:-1], "full_attention"]
        derived.append("layer_types: the last layer is full (Gemma4TextConfig forces it)")
    if types is None and isinstance(n, int) and n > 0 and n % _PERIOD:
        problems.append(
            (
                "layer_types",
                f"the default pattern with num_hidden_layers {n} (not a multiple of {_PERIOD}) "
                "ends with a forced full layer, which is not periodic",
                "state layer_types with every k-th layer full",
            )
        )
        return
    read_layer_types(
        {**text, "layer_types": types},
        raw,
        derived,
        problems,
        off="sliding_attention",
        default_interval=_PERIOD,
    )


FAMILY = register(
    Family(
        name="gemma4",
        model_types=("gemma4_text",),
        aliases={"gemma4": "gemma4_text"},
        layout="llama",
        hf_class="transformers Gemma4TextConfig",
        stray=(*DEEPSEEK_MOE_FIELDS, "num_experts_per_tok"),
        renames=_RENAMES,
        defaults={
            "head_dim": Default("Gemma4TextConfig default", value=256),
            "num_key_value_heads": Default("Gemma4TextConfig default", value=4),
            "tie_word_embeddings": Default("Gemma4TextConfig default", value=True),
            "sliding_window": Default("Gemma4TextConfig default", value=512),
            "intermediate_size": Default("Gemma4TextConfig default", value=9216),
            "global_head_dim": Default("Gemma4TextConfig default", value=512),
            "n_shared_experts": Default(
                "the dense MLP beside the experts: intermediate_size / moe_intermediate_size",
                rule=lambda v: v["intermediate_size"] // v["moe_intermediate_size"],
                needs=("intermediate_size", "moe_intermediate_size"),
            ),
        },
        inputs={
            "enable_moe_block": HFInput("boolean", "Gemma 4: routed experts beside the MLP"),
            "use_bidirectional_attention": HFInput(
                "string", "Gemma 4: which tokens attend both ways ('all' is refused)"
            ),
        },
        reads=("hidden_size_per_layer_input", "num_kv_shared_layers", "layer_types"),
        irrelevant={
            "use_double_wide_mlp": "widens the MLP of KV-shared layers only, which are refused",
            "vocab_size_per_layer_input": "the per-layer embeddings' vocabulary: they are refused",
        },
        translate=_translate,
        moe=True,
        archs={
            "gemma4_text": Arch(
                qk_norm="head", norms_per_layer=4, off_pattern="sliding", global_attention=True
            ),
        },
    )
)
