"""Step-3.7-Flash (``step3p7``; transformers ``Step3p7TextConfig``, the language model).

The language model (``Step3p7TextModel``): per-head q/k RMSNorm, q/k/v/o projections (all
four biased with ``attention_bias``) and a **per-head output gate**: ``g_proj`` maps the
hidden state to one logit per query head (``d -> n_h``, no bias) whose sigmoid scales that
head's core output before ``o_proj`` (``gating: true`` or ``"per-head"``, the class default).
Layers are full or sliding (``layer_types``, ``sliding_window``); the published file lists
full layers at 0, 4, 8, ... (0-based), read as the 1-based ``full_attention_layers``. Dense
gated MLPs of ``intermediate_size`` lead, then MoE layers (``mlp_layer_types``, or the
legacy ``moe_layers_enum``; the class's default makes layers 3 and on MoE): ``n_routed_experts``
(``num_experts``) gated experts of ``moe_intermediate_size``, a router with a per-expert
correction bias, and one gated shared expert of its own width ``share_expert_dim`` (read as
``shared_intermediate_size``). Untied head.

The published ``config.json`` is the remote code's flat format (``model_type: step3p7``, the
text fields at the top). transformers' ``Step3p7Config`` wrapper given that file keeps the
fields on the wrapper and builds its *default* text config (vocabulary 128,815, every layer
full); transformers reads the fields as written only as a ``text_config``. mlacalc reads the
flat fields as ``Step3p7TextConfig`` reads them (the figures of the published checkpoint),
and a ``text_config`` when there is one. The published remote code's layer is the same
(its ``attention_other_setting`` gives sliding layers their own head count; the file has none).

The MTP layers (``num_nextn_predict_layers``) are not counted: the Hugging Face class builds
none (a trailing MTP pad of ``layer_types`` is dropped, as the class does). The vision tower
(``vision_config``) is not counted. Refused by name: sliding layers with their own head count
(``num_sliding_attention_heads`` or ``attention_other_setting`` differing from
``num_attention_heads``), an element-wise gate (``gating`` other than per-head), biased MLPs
(``mlp_bias``: the shared expert's biases are not laid out), MiniMax-M3-style sparse layers
(``sparse_attention_config``) and ``use_bidirectional_attention``.
"""

from mlacalc.models.architecture import Arch
from mlacalc.models.hf._layer_types import lift_text_config, read_mlp_layer_types
from mlacalc.models.registry import ClassDefault, Default, Family, HFInput, register

_RENAMES = {
    "num_experts": "n_routed_experts",
    "moe_num_experts": "n_routed_experts",
    "num_local_experts": "n_routed_experts",
    "moe_top_k": "num_experts_per_tok",
    "num_attention_groups": "num_key_value_heads",
    "share_expert_dim": "shared_intermediate_size",
    "share_expert_dims": "shared_intermediate_size",
    "num_mtp_layers": "num_nextn_predict_layers",
}
_DENSE_LEAD = 3  # Step3p7TextConfig: layers 3 and on are MoE unless stated


def _int(value):
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _refusals(text, problems) -> None:
    heads = text.get("num_attention_heads", 64)
    own = text.get("num_sliding_attention_heads")
    other = text.get("attention_other_setting")
    if own is None and isinstance(other, dict):
        own = other.get("num_attention_heads", heads)
    if own is not None and own != heads:
        key = (
            "num_sliding_attention_heads"
            if "num_sliding_attention_heads" in text
            else ("attention_other_setting")
        )
        problems.append(
            (
                key,
                f"sliding layers with their own head count ({own!r} against "
                f"num_attention_heads {heads!r}) are not modelled",
                "the nearest modelled layout gives sliding layers num_attention_heads heads",
            )
        )
    gating = text.get("gating", True)
    if gating is not True and gating != "per-head":
        problems.append(
            (
                "gating",
                f"{gating!r}: an element-wise output gate (g_proj d -> n_h d_h) is not modelled",
                "use gating: true (one gate per head)",
            )
        )
    if text.get("mlp_bias"):
        problems.append(
            (
                "mlp_bias",
                "biased MLPs and shared expert are not modelled for step3p7",
                "the nearest modelled layout is mlp_bias: false",
            )
        )
    if text.get("sparse_attention_config"):
        problems.append(
            (
                "sparse_attention_config",
                "MiniMax-M3-style sparse attention layers are not modelled",
                "remove it (every layer full or sliding)",
            )
        )
    if text.get("use_bidirectional_attention"):
        problems.append(
            (
                "use_bidirectional_attention",
                "non-causal text attention is not modelled",
                "use false",
            )
        )


def _layer_types(text, raw, derived, problems, n, mtp) -> None:
    types = text.get("layer_types")
    if isinstance(types, list) and n is not None and mtp and len(types) == n + mtp:
        types = types[:n]
        derived.append(f"layer_types: the trailing {mtp} MTP entries dropped (as the class does)")
    if types is None:
        return  # every layer full (the class default)
    if not isinstance(types, list) or (n is not None and len(types) != n):
        problems.append(("layer_types", f"must list one type per layer ({n})", None))
        return
    unknown = [t for t in types if t not in ("full_attention", "sliding_attention")]
    if unknown:
        problems.append(
            (
                "layer_types",
                f"layer type {unknown[0]!r} is not modelled for step3p7",
                "use full_attention and sliding_attention",
            )
        )
        return
    full = [i + 1 for i, t in enumerate(types) if t == "full_attention"]
    if len(full) == len(types):
        raw.pop("sliding_window", None)
        derived.append("every layer full (layer_types): sliding_window unused")
        return
    if raw.get("sliding_window") is None:
        problems.append(
            ("sliding_window", "layer_types lists sliding layers but no window is set", None)
        )
        return
    raw["full_attention_layers"] = full
    derived.append(
        f"full_attention_layers = {len(full)} 1-based layers from layer_types (the others sliding)"
    )


def _mlp_types(text, raw, derived, problems, n, mtp) -> None:
    kinds = text.get("mlp_layer_types")
    if isinstance(kinds, list) and n is not None and mtp and len(kinds) == n + mtp:
        kinds = kinds[:n]
    if kinds is None:
        listed = text.get("moe_layers_enum")
        if listed is not None:
            items = listed.split(",") if isinstance(listed, str) else listed
            try:
                moe = {int(i) for i in items if str(i).strip()}
            except (TypeError, ValueError):
                problems.append(
                    ("moe_layers_enum", f"must list layer indices, got {listed!r}", None)
                )
                return
            source, filled = "moe_layers_enum", False
            moe &= set(range(n or 0))  # the class ignores other indices (MTP ones too)
            if moe and moe != set(range(min(moe), n or 0)):
                problems.append(
                    (
                        "moe_layers_enum",
                        "only leading dense layers followed by MoE layers are modelled",
                        "list every 0-based layer from the first MoE one to the last",
                    )
                )
                return
        else:
            moe = set(range(_DENSE_LEAD, n or 0))
            source = f"the Step3p7TextConfig default: layers {_DENSE_LEAD} and on MoE"
            filled = True
        kinds = ["sparse" if i in moe else "dense" for i in range(n or 0)]
        note = f"mlp_layer_types from {source}"
        derived.append(ClassDefault(note) if filled else note)
    if "first_k_dense_replace" in raw:
        raw.pop("first_k_dense_replace")
        derived.append(
            "the file's first_k_dense_replace not read (Step3p7TextConfig places its dense "
            "layers by mlp_layer_types or moe_layers_enum)"
        )
    read_mlp_layer_types({"mlp_layer_types": kinds}, raw, derived, problems)


def _translate(data, raw, derived, problems) -> None:
    text = lift_text_config(data, raw, _RENAMES)
    if "text_config" in data:
        derived.append("read text_config (the language model; the vision tower is not counted)")
    else:
        derived.append(
            "read the flat (remote-code) config as Step3p7TextConfig reads it; the vision "
            "tower is not counted"
        )
    _refusals(text, problems)
    n = _int(raw.get("num_hidden_layers"))
    mtp = _int(text.get("num_nextn_predict_layers", text.get("num_mtp_layers"))) or 0
    if mtp:
        derived.append(f"{mtp} MTP layers not counted (the Hugging Face class builds none)")
    raw.pop("num_nextn_predict_layers", None)
    _layer_types(text, raw, derived, problems, n, mtp)
    _mlp_types(text, raw, derived, problems, n, mtp)
    if raw.get("n_shared_experts") is None:
        raw["n_shared_experts"] = 1
        derived.append("n_shared_experts = 1 (the always-active shared expert)")


FAMILY = register(
    Family(
        name="step3p7",
        model_types=("step3p7",),
        aliases={"step3p5": "step3p7"},
        layout="llama",
        hf_class="transformers Step3p7TextConfig (text_config, or the flat published file)",
        stray=("moe_layer_freq", "moe_layer_offset", "topk_method"),
        renames=_RENAMES,
        defaults={
            "vocab_size": Default("Step3p7TextConfig default", value=128815),
            "hidden_size": Default("Step3p7TextConfig default", value=4096),
            "intermediate_size": Default("Step3p7TextConfig default", value=11264),
            "num_hidden_layers": Default("Step3p7TextConfig default", value=45),
            "num_attention_heads": Default("Step3p7TextConfig default", value=64),
            "num_key_value_heads": Default("Step3p7TextConfig default", value=8),
            "head_dim": Default("Step3p7TextConfig default", value=128),
            "tie_word_embeddings": Default("Step3p7TextConfig default", value=False),
            "n_routed_experts": Default("Step3p7TextConfig default", value=288),
            "num_experts_per_tok": Default("Step3p7TextConfig default", value=8),
            "moe_intermediate_size": Default("Step3p7TextConfig default", value=1280),
            "shared_intermediate_size": Default(
                "Step3p7TextConfig share_expert_dim default", value=1280
            ),
        },
        inputs={
            "use_bidirectional_attention": HFInput("boolean", "Step-3.7: refused when true"),
            "attention_other_setting": HFInput(
                "mapping", "Step-3.7 legacy: the sliding layers' heads (refused when different)"
            ),
            "sparse_attention_config": HFInput("mapping", "Step-3.7: refused when set"),
        },
        reads=(
            "gating",
            "moe_layers_enum",
            "num_sliding_attention_heads",
            "layer_types",
            "mlp_layer_types",
            "num_nextn_predict_layers",
        ),
        irrelevant={
            "query_pre_attn_scalar": "scales the attention scores only",
            "moe_router_scaling_factor": "scales the routed experts' output only",
            "swiglu_limits": "clamps the routed experts' activations only",
            "swiglu_limits_shared": "clamps the shared expert's activations only",
            "mtp_layer_types": "the MTP layers' attention kinds: MTP layers are not built",
            "mtp_mlp_layer_types": "the MTP layers' MLP kinds: MTP layers are not built",
            "use_moe_router_bias": "remote code's switch: the class always holds the bias",
            "projector_bias": "the vision projector's bias: the vision tower is not counted",
            "partial_rotary_factors": "rotary frequencies only",
        },
        translate=_translate,
        moe=True,
        archs={"step3p7": Arch(qk_norm="head", correction_bias=True, head_gate=True)},
    )
)
