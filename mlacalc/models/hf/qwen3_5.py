"""Qwen3.5 / Qwen3.6 (``Qwen3_5Config`` and ``Qwen3_5MoeConfig``; the language model in
``text_config``, model_type ``qwen3_5_text`` / ``qwen3_5_moe_text``).

The layer is Qwen3-Next's: three Gated DeltaNet linear-attention layers for every full one
(``layer_types`` / ``full_attention_interval``), the full layers' ``q_proj`` also yielding a
per-head output gate, per-head q/k RMSNorm. The reference splits the linear layer's input
projection into ``in_proj_qkv``, ``in_proj_z``, ``in_proj_b`` and ``in_proj_a`` where Qwen3-Next
fuses ``in_proj_qkvz`` and ``in_proj_ba``: the same rows, so the same parameters and FLOPs.
``qwen3_5`` has a dense MLP of ``intermediate_size`` in every layer; ``qwen3_5_moe`` a MoE of
``num_experts`` with a gated shared expert (as Qwen3-Next).

The vision tower of the multimodal checkpoint is not counted (the language model only). The
multi-token-prediction layers (``mtp_num_hidden_layers``) are not built by the Hugging Face
class (it drops their weights on load) and are not counted either.
"""

from mlacalc.models.architecture import Arch
from mlacalc.models.hf._layer_types import lift_text_config, read_layer_types
from mlacalc.models.registry import DEEPSEEK_MOE_FIELDS, Default, Family, NotImported, register

_RENAMES = {"num_experts": "n_routed_experts"}


def _translate(data, raw, derived, problems) -> None:
    text = lift_text_config(data, raw, _RENAMES)
    if "text_config" in data:
        derived.append("read text_config (the language model; the vision tower is not counted)")
    moe = raw["model_type"] == "qwen3_5_moe_text"
    _mtp(text, raw, derived)
    types = text.get("layer_types")
    if types is not None:
        read_layer_types(
            {
                **text,
                "layer_types": [
                    "sliding_attention" if t == "linear_attention" else t for t in types
                ]
                if isinstance(types, list)
                else types,
            },
            raw,
            derived,
            problems,
            off="sliding_attention",
            default_interval=4,
        )
    elif "full_attention_interval" not in raw:
        raw["full_attention_interval"] = 4
        derived.append("full_attention_interval = 4 (Qwen3_5TextConfig's layer_types rule)")
    raw.pop("sliding_window", None)
    if not moe:
        return
    if "intermediate_size" not in raw:  # read by no count: every layer is MoE
        raw["intermediate_size"] = raw.get("moe_intermediate_size", 512)
        derived.append(
            f"intermediate_size = {raw['intermediate_size']} (Qwen3_5MoeTextConfig has none: "
            "every layer is MoE; the expert width, which no count reads)"
        )
    shared = text.get("shared_expert_intermediate_size", 512)
    width = raw.get("moe_intermediate_size", 512)
    if isinstance(shared, int) and isinstance(width, int) and width > 0:
        if shared % width:
            problems.append(
                (
                    "shared_expert_intermediate_size",
                    f"{shared} is not a multiple of moe_intermediate_size {width}",
                    "the shared expert is modelled as n_shared_experts experts of that width",
                )
            )
        else:
            raw["n_shared_experts"] = shared // width
            derived.append(
                f"n_shared_experts = {shared // width} (the shared expert of "
                f"shared_expert_intermediate_size {shared}, as experts of moe_intermediate_size "
                f"{width})"
            )


def _mtp(text, raw, derived) -> None:
    """The config's MTP layers are not imported: said in ``derived`` (import-hf prints it) and
    in the model's ``notes`` (plan's refusal of ``--mtp-tokens`` cites them)."""
    n = text.get("mtp_num_hidden_layers")
    if not isinstance(n, int) or isinstance(n, bool) or n <= 0:
        return
    why = (
        f"the MTP layer{'s' if n > 1 else ''} (mtp_num_hidden_layers: {n}) not counted: the "
        "Hugging Face class builds none (it drops their weights on load), and mlacalc's MTP "
        "module is DeepSeek's (a layer of the model's own pattern, here a linear one), not the "
        "full-attention layer the engines draft with; num_nextn_predict_layers is 0, so plan's "
        "--mtp-tokens and --include-mtp have no MTP module to use"
    )
    derived.append(NotImported(why))
    raw["notes"] = why


_LINEAR_DEFAULTS = {
    "head_dim": Default("Qwen3_5TextConfig default", value=256),
    "num_key_value_heads": Default("Qwen3_5TextConfig default", value=4),
    "tie_word_embeddings": Default("Qwen3_5TextConfig default", value=False),
    "linear_num_key_heads": Default("Qwen3_5TextConfig default", value=16),
    "linear_num_value_heads": Default("Qwen3_5TextConfig default", value=32),
    "linear_key_head_dim": Default("Qwen3_5TextConfig default", value=128),
    "linear_value_head_dim": Default("Qwen3_5TextConfig default", value=128),
    "linear_conv_kernel_dim": Default("Qwen3_5TextConfig default", value=4),
}

#: schema fields of the file that the text model does not read
IGNORED = {"sliding_window": "Qwen3.5 has no sliding layers"}
#: fields the Hugging Face classes read (or the files hold) that change no count
IRRELEVANT = {
    "mtp_num_hidden_layers": "the MTP layers are not built by the Hugging Face class",
    "mtp_use_dedicated_embeddings": "the MTP layers are not built by the Hugging Face class",
    "attn_output_gate": "the reference always gates the full layers' output (q_proj x2)",
    "output_gate_type": "an activation of the output gate (element-wise)",
    "mamba_ssm_dtype": "the reference cache holds the recurrent state in float32 whatever it says",
    "mlp_only_layers": "Qwen3_5MoeTextConfig does not read it: every layer is MoE",
    "language_model_only": "whether the vision tower is loaded (not counted either way)",
}


FAMILY = register(
    Family(
        name="qwen3_5",
        model_types=("qwen3_5_text", "qwen3_5_moe_text"),
        aliases={"qwen3_5": "qwen3_5_text", "qwen3_5_moe": "qwen3_5_moe_text"},
        layout="llama",
        hf_class="transformers Qwen3_5TextConfig / Qwen3_5MoeTextConfig (text_config)",
        stray=DEEPSEEK_MOE_FIELDS,
        stray_by_type={
            "qwen3_5_text": ("moe_intermediate_size", "num_experts_per_tok", "num_experts"),
        },
        renames=_RENAMES,
        defaults=_LINEAR_DEFAULTS,
        defaults_by_type={
            "qwen3_5_text": {
                "intermediate_size": Default("Qwen3_5TextConfig default", value=12288),
            },
            "qwen3_5_moe_text": {
                "num_key_value_heads": Default("Qwen3_5MoeTextConfig default", value=2),
                "n_routed_experts": Default("Qwen3_5MoeTextConfig num_experts", value=256),
                "num_experts_per_tok": Default("Qwen3_5MoeTextConfig default", value=8),
                "moe_intermediate_size": Default("Qwen3_5MoeTextConfig default", value=512),
            },
        },
        ignored=IGNORED,
        irrelevant=IRRELEVANT,
        reads=("text_config", "layer_types", "shared_expert_intermediate_size"),
        translate=_translate,
        moe=True,
        linear=True,
        archs={
            t: Arch(
                qk_norm="head",
                shared_gate=True,
                gated_query=True,
                off_pattern="linear",
                split_linear_in=True,
            )
            for t in ("qwen3_5_text", "qwen3_5_moe_text")
        },
    )
)
