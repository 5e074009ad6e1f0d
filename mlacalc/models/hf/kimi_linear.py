"""Kimi Linear (``KimiLinearConfig``): Kimi Delta Attention linear layers between MLA full
layers without RoPE, DeepSeek-V3's MoE (shared expert, router correction bias) after leading
dense layers.

A linear layer has ``linear_num_heads`` heads of ``linear_head_dim`` for queries, keys and
values alike (the schema's ``linear_num_key_heads`` / ``linear_num_value_heads`` and
``linear_key_head_dim`` / ``linear_value_head_dim`` take them), a short convolution of
``linear_conv_kernel_dim`` taps, and keeps a ``D x D`` float32 state per head. The checkpoint
states these in ``linear_attn_config`` (``num_heads``, ``head_dim``,
``short_conv_kernel_size``) and its full layers there as 1-based lists (``full_attn_layers``,
``kda_layers``); transformers' ``layer_types`` says the same per layer, and without either
every fourth layer from the fifth (1-based) is full. The full layers become
``full_attention_layers``; the dense/MoE split comes from ``mlp_layer_types`` (default: the
first ``first_k_dense_replace``, 1, dense).
"""

from mlacalc.models.architecture import Arch
from mlacalc.models.hf._rules import MLA_IGNORED, MLA_MOE_REQUIRED, kv_heads_equal_heads
from mlacalc.models.registry import Default, Family, HFInput, register

_LINEAR_KEYS = {
    "num_heads": ("linear_num_key_heads", "linear_num_value_heads"),
    "head_dim": ("linear_key_head_dim", "linear_value_head_dim"),
    "short_conv_kernel_size": ("linear_conv_kernel_dim",),
}
_TOP_KEYS = {
    "linear_num_heads": "num_heads",
    "linear_head_dim": "head_dim",
    "linear_conv_kernel_dim": "short_conv_kernel_size",
}


def _full_layers(data, n, problems) -> list[int] | None:
    """1-based full layers, by the reference's precedence: ``layer_types``, then
    ``linear_attn_config``'s lists, then the class rule."""
    lin = data.get("linear_attn_config") or {}
    types = data.get("layer_types")
    if types is not None:
        if not isinstance(types, list) or len(types) != n:
            problems.append(
                ("layer_types", f"must list one type per layer (num_hidden_layers: {n})", None)
            )
            return None
        other = sorted({t for t in types if t not in ("full_attention", "linear_attention")})
        if other:
            problems.append(
                (
                    "layer_types",
                    f"layer type {other[0]!r} is not modelled for kimi_linear",
                    "the nearest modelled types are full_attention and linear_attention",
                )
            )
            return None
        return [i + 1 for i, t in enumerate(types) if t == "full_attention"]
    if "full_attn_layers" in lin and "kda_layers" in lin:
        full, kda = lin["full_attn_layers"], lin["kda_layers"]
        ok = all(
            isinstance(v, list) and all(isinstance(i, int) and 0 < i <= n for i in v)
            for v in (full, kda)
        )
        if not ok or sorted(full + kda) != list(range(1, n + 1)):
            problems.append(
                (
                    "linear_attn_config",
                    f"full_attn_layers and kda_layers must share out the layers 1..{n} (1-based)",
                    None,
                )
            )
            return None
        return sorted(full)
    return [i + 1 for i in range(n) if i and i % 4 == 0]


#: fields of Kimi-K3's text config (model_type kimi_linear inside a kimi_k3 wrapper) that
#: change counts KimiLinearConfig's model does not have: field -> (value that is harmless, what
#: it adds). transformers' KimiLinear ignores them and would build another model, so a config
#: that sets them is refused rather than counted as plain Kimi Linear.
_K3_ONLY = {
    "routed_expert_hidden_size": (
        "hidden_size",  # experts as wide as the model: no latent projection
        "Kimi-K3's latent MoE: routed experts on a narrower projection",
    ),
    "attn_res_block_size": (None, "Kimi-K3's attention residuals over blocks of layers"),
    "mla_use_output_gate": (False, "Kimi-K3's output gate on the MLA layers"),
}


def _refuse_k3_fields(data, problems) -> None:
    for key, (harmless, what) in _K3_ONLY.items():
        value = data.get(key)
        if harmless == "hidden_size":
            harmless = data.get("hidden_size")
        if value is not None and value != harmless:
            problems.append(
                (
                    key,
                    f"not modelled: {what} (no transformers class implements it)",
                    "remove the field only if the checkpoint does not use it",
                )
            )


def _translate(data, raw, derived, problems) -> None:
    _refuse_k3_fields(data, problems)
    lin = data.get("linear_attn_config") or {}
    for key, fields in _LINEAR_KEYS.items():
        top = next(k for k, v in _TOP_KEYS.items() if v == key)
        value = lin.get(key, data.get(top))
        source = f"linear_attn_config.{key}" if key in lin else top
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= 1 << 20:
            problems.append((source, f"must be a positive integer, got {value!r}", None))
            continue
        for f in fields:
            raw[f] = value
        derived.append(f"{' and '.join(fields)} = {value!r} (from {source})")
    n = raw.get("num_hidden_layers")
    if isinstance(n, int) and n > 0:
        full = _full_layers(data, n, problems)
        if full is not None:
            raw["full_attention_layers"] = full
            derived.append(
                f"full_attention_layers = {full} (from "
                + (
                    "layer_types"
                    if data.get("layer_types") is not None
                    else "linear_attn_config"
                    if "full_attn_layers" in lin
                    else "the KimiLinearConfig rule: every 4th layer from the 5th"
                )
                + ")"
            )
    kinds = data.get("mlp_layer_types")
    if kinds is not None:
        dense = 0
        while isinstance(kinds, list) and dense < len(kinds) and kinds[dense] == "dense":
            dense += 1
        if not isinstance(kinds, list) or any(k != "sparse" for k in kinds[dense:]):
            problems.append(
                (
                    "mlp_layer_types",
                    "only leading dense layers followed by MoE layers are modelled",
                    "write 'dense' for the first layers and 'sparse' for the rest",
                )
            )
        else:
            raw["first_k_dense_replace"] = dense
            derived.append(f"first_k_dense_replace = {dense} (read from mlp_layer_types)")
    if raw.get("q_lora_rank") == 0:
        raw["q_lora_rank"] = None


FAMILY = register(
    Family(
        name="kimi_linear",
        model_types=("kimi_linear",),
        layout="deepseek",
        hf_class="transformers KimiLinearConfig",
        stray=(
            "n_routed_experts",
            "first_k_dense_replace",
            "moe_layer_freq",
            "moe_layer_offset",
            "topk_method",
        ),
        alias_wins={"kimi_linear": ("num_local_experts",)},  # the classes' attribute_map
        renames={
            "num_experts": "n_routed_experts",
            "num_local_experts": "n_routed_experts",
            "num_experts_per_token": "num_experts_per_tok",
            "num_shared_experts": "n_shared_experts",
            "num_expert_group": "n_group",
            "model_max_length": "max_position_embeddings",
        },
        defaults={
            "num_key_value_heads": kv_heads_equal_heads("MLA repeats num_attention_heads here"),
            "tie_word_embeddings": Default("KimiLinearConfig default", value=False),
            "q_lora_rank": Default("KimiLinearConfig default", value=None),
            "n_shared_experts": Default("KimiLinearConfig default", value=1),
            "first_k_dense_replace": Default(
                "KimiLinearConfig mlp_layer_types default: the first layer dense", value=1
            ),
            "moe_layer_freq": Default(
                "every layer after the dense ones is MoE", value=1, warn=False
            ),
            "topk_method": Default(
                "Kimi Linear routers carry e_score_correction_bias", value="noaux_tc", warn=False
            ),
            "num_nextn_predict_layers": Default(
                "KimiLinearConfig has no MTP module", value=0, warn=False
            ),
            "linear_num_key_heads": Default("KimiLinearConfig linear_num_heads", value=32),
            "linear_num_value_heads": Default("KimiLinearConfig linear_num_heads", value=32),
            "linear_key_head_dim": Default("KimiLinearConfig linear_head_dim", value=128),
            "linear_value_head_dim": Default("KimiLinearConfig linear_head_dim", value=128),
            "linear_conv_kernel_dim": Default("KimiLinearConfig default", value=4),
        },
        required=MLA_MOE_REQUIRED,
        inputs={
            "linear_attn_config": HFInput(
                "mapping", "Kimi Linear: linear-layer widths and the 1-based full/KDA layers"
            ),
        },
        ignored={
            **MLA_IGNORED,
            "moe_layer_freq": "KimiLinearConfig places MoE layers by mlp_layer_types only",
            "topk_method": "KimiLinearConfig routers always carry e_score_correction_bias",
        },
        reads=("linear_num_heads", "linear_head_dim", "layer_types", "mlp_layer_types"),
        translate=_translate,
        moe=True,
        mla=True,
        rope=False,
        linear=True,
        archs={
            "kimi_linear": Arch(
                correction_bias=True, off_pattern="linear", nope_full=True, kimi_delta=True
            ),
        },
    )
)
