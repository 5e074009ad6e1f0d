"""Nemotron-H (``NemotronHConfig``): Nemotron 3 Nano / Super / Ultra and their hybrids.

Each layer is one block, a norm then one mixer, listed in ``layers_block_type`` (older files:
the letters of ``hybrid_override_pattern``): a Mamba-2 state-space layer (``mamba``; the
configuration class's ``linear_attention``, ``M``), grouped-query attention without biases
(``attention``, ``*``), a MoE (``moe``, ``E``) or an MLP (``mlp``, ``-``). No layer has an FFN
beside its mixer, so a model of ``L`` blocks has ``L`` layers whose kinds are ``mamba`` /
``full`` with no FFN, or no mixer (``none``) with a MoE or dense FFN. The MLP, the shared
expert and the routed experts are ungated (``up_proj``, relu2, ``down_proj``); with
``moe_latent_size`` the routed experts work in that width between ``fc1_latent_proj`` and
``fc2_latent_proj``; the router keeps a correction bias. The shared expert's width
``moe_shared_expert_intermediate_size`` is its own width (``shared_intermediate_size``).

A Mamba-2 layer keeps a fixed state per sequence, as the Hugging Face cache holds it: the
convolution window (``conv_kernel`` columns over x, B and C, in the activation dtype) and one
``mamba_head_dim x ssm_state_size`` float32 matrix per head (``mamba_ssm_cache_dtype``; an
engine may keep it in bf16: ``state_dtype``). The multi-token-prediction layers
(``num_nextn_predict_layers``, ``mtp_layers_block_type``) are not built by the Hugging Face
class and are not counted.
"""

from mlacalc.models.architecture import Arch
from mlacalc.models.patterns import block_types
from mlacalc.models.registry import ClassDefault, Default, Family, register
from mlacalc.words.errors import ConfigError

_RENAMES = {
    "n_groups": "mamba_n_groups",
    "conv_kernel": "mamba_d_conv",
    "chunk_size": "mamba_chunk_size",
    "use_conv_bias": "mamba_conv_bias",
    "use_bias": "mamba_bias",
    "num_local_experts": "n_routed_experts",
    "moe_shared_expert_intermediate_size": "shared_intermediate_size",
}


def _translate(data, raw, derived, problems) -> None:
    cache_dtype = data.get("mamba_ssm_cache_dtype", "float32")
    if cache_dtype != "float32":
        derived.append(
            f"mamba_ssm_cache_dtype {cache_dtype!r}: the Hugging Face cache holds the SSM state "
            "in float32 (the default figure); an engine that follows the file keeps it in that "
            "precision (state_dtype)"
        )
    try:
        blocks = block_types({**data, "model_type": "nemotron_h"})
    except ConfigError as exc:
        problems.append((exc.field or "layers_block_type", str(exc).split(": ", 2)[-1], None))
        return
    if not any(k in data for k in ("layers_block_type", "layer_types", "hybrid_override_pattern")):
        derived.append(
            ClassDefault("block_types = NemotronHConfig's default (mamba, moe, attention, mlp)")
        )
    raw["block_types"] = blocks
    stated = data.get("num_hidden_layers")
    if stated is not None and stated != len(blocks):
        derived.append(
            f"num_hidden_layers = {len(blocks)} (the blocks listed; the file's {stated!r} is "
            "not read by NemotronHConfig)"
        )
    raw["num_hidden_layers"] = len(blocks)
    if "moe" not in blocks:
        for key in ("n_routed_experts", "num_experts_per_tok", "moe_intermediate_size"):
            raw.pop(key, None)
        return
    if raw.get("n_routed_experts") is None:  # absent or null: NemotronHConfig's default
        raw["n_routed_experts"] = 8
    raw["n_shared_experts"] = 1  # NemotronHMoE's one shared expert; the file's is not read
    if raw.get("shared_intermediate_size") is None:
        raw["shared_intermediate_size"] = 7688
        derived.append(
            "shared_intermediate_size = 7688 (NemotronHConfig's "
            "moe_shared_expert_intermediate_size default)"
        )


FAMILY = register(
    Family(
        name="nemotron_h",
        model_types=("nemotron_h",),
        layout="llama",
        hf_class="transformers NemotronHConfig",
        stray=("first_k_dense_replace", "moe_layer_freq", "moe_layer_offset", "topk_method"),
        alias_wins={"nemotron_h": ("num_local_experts",)},  # the classes' attribute_map
        renames=_RENAMES,
        defaults={
            "head_dim": Default("NemotronHConfig default", value=128),
            "num_key_value_heads": Default("NemotronHConfig default", value=8),
            "intermediate_size": Default("NemotronHConfig default", value=21504),
            "tie_word_embeddings": Default("NemotronHConfig default", value=False),
            "num_experts_per_tok": Default("NemotronHConfig default", value=2),
            "moe_intermediate_size": Default("NemotronHConfig default", value=7688),
            "mamba_num_heads": Default("NemotronHConfig default", value=128),
            "mamba_head_dim": Default("NemotronHConfig default", value=64),
            "ssm_state_size": Default("NemotronHConfig default", value=128),
            "mamba_n_groups": Default("NemotronHConfig n_groups default", value=8),
            "mamba_d_conv": Default("NemotronHConfig conv_kernel default", value=4),
            "mamba_chunk_size": Default("NemotronHConfig chunk_size default", value=128),
        },
        ignored={
            "attention_bias": "NemotronHAttention's projections have no bias whatever it says",
            "num_nextn_predict_layers": "the Hugging Face class builds no MTP layers",
            "sliding_window": "NemotronHAttention attends every key",
        },
        irrelevant={
            "expand": "the Mamba-2 inner width is mamba_num_heads x mamba_head_dim; the modeling "
            "code does not read expand",
            "mamba_hidden_act": "the convolution's activation (element-wise)",
            "mlp_hidden_act": "the MLP's activation (element-wise; the MLP is up and down "
            "whatever it is)",
            "mamba_proj_bias": "not read by the modeling code (use_bias sets the Mamba-2 "
            "projections' biases)",
            "moe_shared_expert_overlap": "when the shared expert runs (scheduling)",
            "mtp_layers_block_type": "the Hugging Face class builds no MTP layers",
            "num_logits_to_keep": "logits kept during generation (the output head counts one "
            "token a sequence)",
            "rescale_prenorm_residual": "weight initialization",
            "residual_in_fp32": "the residual's precision (element-wise)",
            "time_step_floor": "step-size initialization",
            "time_step_min": "step-size initialization and clamp (element-wise)",
            "time_step_max": "step-size initialization",
            "time_step_limit": "the step sizes' clamp (element-wise; Infinity means none)",
            "use_mamba_kernels": "deprecated, no effect",
        },
        reads=(
            "mamba_ssm_cache_dtype",
            "layers_block_type",
            "layer_types",
            "hybrid_override_pattern",
        ),
        translate=_translate,
        moe=True,
        archs={
            "nemotron_h": Arch(
                norms_per_layer=1,
                correction_bias=True,
                mamba=True,
                ungated_mlp=True,
                blocks=True,
            ),
        },
    )
)
