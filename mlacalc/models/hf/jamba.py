"""Jamba (``JambaConfig``): Mamba-1 layers, attention every ``attn_layer_period`` layers, a MoE
every ``expert_layer_period`` layers.

Every layer is a mixer and an FFN with two norms. The mixer is attention (0-based layers with
``i % attn_layer_period == attn_layer_offset``; grouped-query, no biases, no positional
embedding) or a Mamba-1 selective-scan mixer (:mod:`mlacalc.cost.mamba1`: inner width
``mamba_expand x hidden_size``, read as ``mamba_inner_size``; state ``mamba_d_state`` per
channel; step-size rank ``mamba_dt_rank``, ``auto``: ``ceil(hidden_size / 16)``). The FFN is
Mixtral's MoE (``num_experts`` gated experts of ``intermediate_size``, a router without
bias) in the layers with ``i % expert_layer_period == expert_layer_offset`` (read as
``moe_layer_freq`` and ``moe_layer_offset``) and a gated MLP of ``intermediate_size``
elsewhere; with ``num_experts`` 1 every FFN is the MLP. A Mamba-1 layer keeps a fixed state
per sequence, as the Hugging Face cache holds it: the convolution window (``I x K``, the
activation dtype) and ``I x N`` float32 values.
"""

import math

from mlacalc.models.architecture import Arch
from mlacalc.models.registry import DEEPSEEK_MOE_WIDTH_FIELDS, Default, Family, register

_RENAMES = {
    "mamba_d_state": "ssm_state_size",
    "mamba_proj_bias": "mamba_bias",
    "num_experts": "n_routed_experts",
    "num_local_experts": "n_routed_experts",
    "expert_layer_period": "moe_layer_freq",
    "expert_layer_offset": "moe_layer_offset",
}


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _period(data, problems, period_key, offset_key, defaults) -> tuple[int, int] | None:
    period, offset = data.get(period_key, defaults[0]), data.get(offset_key, defaults[1])
    if not _is_int(period) or period <= 0:
        problems.append((period_key, f"must be a positive integer, got {period!r}", None))
        return None
    if not _is_int(offset) or not 0 <= offset < period:
        problems.append(
            (
                offset_key,
                f"must be an integer from 0 to {period_key} - 1 ({period - 1}), got {offset!r}",
                "JambaConfig requires the offset below the period",
            )
        )
        return None
    return period, offset


def _translate(data, raw, derived, problems) -> None:
    d, n = raw.get("hidden_size"), raw.get("num_hidden_layers")
    expand, rank = data.get("mamba_expand", 2), data.get("mamba_dt_rank", "auto")
    if not _is_int(expand) or expand <= 0:
        problems.append(("mamba_expand", f"must be a positive integer, got {expand!r}", None))
    elif _is_int(d):
        raw["mamba_inner_size"] = expand * d
        derived.append(f"mamba_inner_size = {expand * d} (mamba_expand x hidden_size)")
    if rank == "auto" and _is_int(d):
        raw["mamba_dt_rank"] = math.ceil(d / 16)
        derived.append(f"mamba_dt_rank = {raw['mamba_dt_rank']} (auto: ceil(hidden_size / 16))")
    attention = _period(data, problems, "attn_layer_period", "attn_layer_offset", (8, 4))
    experts = _period(data, problems, "expert_layer_period", "expert_layer_offset", (2, 1))
    if attention is not None and _is_int(n) and n > 0:
        period, offset = attention
        raw["full_attention_layers"] = [i + 1 for i in range(n) if i % period == offset]
        derived.append(
            "full_attention_layers: i % attn_layer_period == attn_layer_offset (1-based; the "
            "others Mamba-1)"
        )
    if experts is not None and raw.get("n_routed_experts") == 1:  # JambaMLP in every layer
        raw["n_routed_experts"] = 0
        for key in ("num_experts_per_tok", "moe_layer_freq", "moe_layer_offset"):
            raw.pop(key, None)
        derived.append("n_routed_experts = 0 (num_experts 1: every FFN is the gated MLP)")


FAMILY = register(
    Family(
        name="jamba",
        model_types=("jamba",),
        layout="llama",
        hf_class="transformers JambaConfig",
        stray=DEEPSEEK_MOE_WIDTH_FIELDS,
        alias_wins={"jamba": ("num_local_experts",)},  # the classes' attribute_map
        renames=_RENAMES,
        defaults={
            "vocab_size": Default("JambaConfig default", value=65536),
            "intermediate_size": Default("JambaConfig default", value=14336),
            "num_key_value_heads": Default("JambaConfig default", value=8),
            "tie_word_embeddings": Default("JambaConfig default", value=False),
            "max_position_embeddings": Default("JambaConfig default", value=262144),
            "head_dim": Default(
                "the attention's width: hidden_size / num_attention_heads (LlamaAttention)",
                rule=lambda v: v["hidden_size"] // v["num_attention_heads"],
                needs=("hidden_size", "num_attention_heads"),
            ),
            "n_routed_experts": Default("JambaConfig num_experts default", value=16),
            "num_experts_per_tok": Default("JambaConfig default", value=2),
            "moe_layer_freq": Default("JambaConfig expert_layer_period default", value=2),
            "moe_layer_offset": Default("JambaConfig expert_layer_offset default", value=1),
            "moe_intermediate_size": Default(
                "Jamba's experts use intermediate_size (MixtralExperts)",
                rule=lambda v: v["intermediate_size"],
                needs=("intermediate_size",),
            ),
            "ssm_state_size": Default("JambaConfig mamba_d_state default", value=16),
            "mamba_d_conv": Default("JambaConfig default", value=4),
        },
        reads=("mamba_expand", "attn_layer_period", "attn_layer_offset"),
        irrelevant={
            "n_groups": "a Mamba-2 key (NemotronH's SSM groups); "
            "Jamba's Mamba-1 layers have no groups",
            "use_mamba_kernels": "deprecated, no effect",
            "use_mambapy": "the training fallback's implementation",
            "use_associative_scan": "how the reference runs the scan under torch.compile (the "
            "same products)",
            "layers_block_type": "a property: attention at attn_layer_period / "
            "attn_layer_offset, the others Mamba-1",
            "layer_types": "a property: layers_block_type in layer_types' words",
            "layers_num_experts": "a property: num_experts at expert_layer_period / "
            "expert_layer_offset, 1 (the MLP) elsewhere",
        },
        translate=_translate,
        moe=True,
        rope=False,
        archs={"jamba": Arch(mamba1=True, nope_full=True)},
    )
)
