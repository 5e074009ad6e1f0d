"""Granite 4.0 hybrids (``GraniteMoeHybridConfig``): Mamba-2 layers and attention layers
(``layer_types``: ``mamba`` / ``linear_attention``, ``attention`` / ``full_attention``), each
with a MoE beside a shared MLP, or the shared MLP alone.

The mixer is Bamba's Mamba-2 (:mod:`mlacalc.cost.mamba`; ``mamba_n_heads`` heads of
``mamba_d_head``, ``mamba_expand x hidden_size`` wide) or grouped-query attention (biases with
``attention_bias``; no RoPE parameters either way: ``position_embedding_type``). The FFN:
``num_local_experts`` gated experts of ``intermediate_size`` (fused ``gate_up_proj``, a
router without bias, ``num_experts_per_tok`` a token) plus a gated shared MLP of
``shared_intermediate_size`` (``input_linear`` of twice that width, ``output_linear``), its
output added; with no experts the shared MLP is the layer's dense FFN (read into
``intermediate_size``). Two norms per layer. The multipliers (embedding, residual, attention,
logits) scale activations and change no count.
"""

from mlacalc.models.architecture import Arch
from mlacalc.models.hf.bamba import read_mamba_widths
from mlacalc.models.registry import DEEPSEEK_MOE_WIDTH_FIELDS, Default, Family, register

_RENAMES = {
    "mamba_n_heads": "mamba_num_heads",
    "mamba_d_state": "ssm_state_size",
    "mamba_proj_bias": "mamba_bias",
    "num_local_experts": "n_routed_experts",
}
_MAMBA = ("mamba", "linear_attention")
_ATTENTION = ("attention", "full_attention")


def _translate(data, raw, derived, problems) -> None:
    read_mamba_widths(data, raw, derived, problems, "GraniteMoeHybridConfig")
    n = raw.get("num_hidden_layers")
    types = data.get("layer_types", data.get("layers_block_type"))
    if types is None and isinstance(n, int):
        types = ["mamba"] * n  # GraniteMoeHybridConfig's default: every layer Mamba-2
    if not isinstance(types, list) or (isinstance(n, int) and len(types) != n):
        problems.append(("layer_types", f"must list one type per layer, got {types!r}", None))
        return
    bad = [t for t in types if t not in _MAMBA + _ATTENTION]
    if bad:
        problems.append(
            ("layer_types", f"names {bad[0]!r}", "use mamba or attention for each layer")
        )
        return
    raw["full_attention_layers"] = [i + 1 for i, t in enumerate(types) if t in _ATTENTION]
    derived.append("full_attention_layers: the attention layers of layer_types (1-based)")
    shared = data.get("shared_intermediate_size", 1024)
    experts = raw.get("n_routed_experts", 8)
    if experts == 0:  # the shared MLP alone: the layer's dense FFN
        raw["intermediate_size"] = shared
        raw.pop("shared_intermediate_size", None)
        derived.append(f"intermediate_size = {shared!r} (no experts: the shared MLP's width)")
        return
    raw["moe_intermediate_size"] = raw.get("intermediate_size", 11008)
    raw["shared_intermediate_size"] = shared
    raw["n_shared_experts"] = 1
    derived.append(
        "moe_intermediate_size = intermediate_size (the experts' width); one shared MLP of "
        f"shared_intermediate_size {shared!r}"
    )


FAMILY = register(
    Family(
        name="granitemoehybrid",
        model_types=("granitemoehybrid",),
        layout="llama",
        hf_class="transformers GraniteMoeHybridConfig",
        stray=DEEPSEEK_MOE_WIDTH_FIELDS,
        renames=_RENAMES,
        defaults={
            "intermediate_size": Default("GraniteMoeHybridConfig default", value=11008),
            "tie_word_embeddings": Default("GraniteMoeHybridConfig default", value=False),
            "n_routed_experts": Default("GraniteMoeHybridConfig num_local_experts", value=8),
            "num_experts_per_tok": Default("GraniteMoeHybridConfig default", value=2),
            "max_position_embeddings": Default("GraniteMoeHybridConfig default", value=2048),
            "num_key_value_heads": Default(
                "GraniteMoeHybridConfig: null means num_attention_heads",
                rule=lambda v: v["num_attention_heads"],
                needs=("num_attention_heads",),
            ),
            "head_dim": Default(
                "hidden_size / num_attention_heads (the attention's width)",
                rule=lambda v: v["hidden_size"] // v["num_attention_heads"],
                needs=("hidden_size", "num_attention_heads"),
            ),
            "mamba_num_heads": Default("GraniteMoeHybridConfig mamba_n_heads", value=128),
            "ssm_state_size": Default("GraniteMoeHybridConfig mamba_d_state", value=256),
            "mamba_n_groups": Default("GraniteMoeHybridConfig default", value=1),
            "mamba_d_conv": Default("GraniteMoeHybridConfig default", value=4),
            "mamba_chunk_size": Default("GraniteMoeHybridConfig default", value=256),
        },
        reads=(
            "layer_types",
            "layers_block_type",
            "mamba_expand",
            "mamba_d_head",
            "shared_intermediate_size",
        ),
        irrelevant={
            "n_groups": "NemotronH's name for the SSM groups; "
            "GraniteMoeHybridConfig reads mamba_n_groups (from recall)",
            "embedding_multiplier": "scales activations",
            "logits_scaling": "scales activations",
            "residual_multiplier": "scales activations",
            "attention_multiplier": "the attention's scale (element-wise)",
            "position_embedding_type": "rope or nope: no parameters either way (element-wise)",
            "time_step_limit": "the step sizes' clamp (element-wise; Infinity means none)",
        },
        translate=_translate,
        moe=True,
        archs={"granitemoehybrid": Arch(mamba=True)},
    )
)
