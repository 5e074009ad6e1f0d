"""Falcon-H1 (``FalconH1Config``): attention and a Mamba-2 mixer side by side in every layer.

Every layer normalises its input once (``input_layernorm``) and feeds it to both mixers:
grouped-query attention (Llama's, ``head_dim`` wide, biases with ``attention_bias``) and a
Mamba-2 mixer (:mod:`mlacalc.cost.mamba`; ``mamba_n_heads`` heads over an inner width of
``mamba_d_ssm``, or ``mamba_expand x hidden_size`` when that is null, ``mamba_n_groups``
groups of B and C of ``mamba_d_state``). Their outputs are added; a second norm
(``pre_ff_layernorm``) and a gated MLP (``intermediate_size``, biases with ``mlp_bias``)
follow. The layer kind is ``full+mamba``: it caches the attention's keys and values per
token and the Mamba-2 state per sequence (the convolution window and one float32
``P x N`` matrix per head).

The mixer's gated RMSNorm has a weight only with ``mamba_rms_norm`` (read as
``mamba_gated_norm``; without it the gate alone multiplies the output). ``in_proj`` has a
bias with ``mamba_proj_bias`` and ``out_proj`` with ``projectors_bias``: the schema's one
``mamba_bias`` holds both, so a config where the two differ is refused naming
``projectors_bias``. The muP multipliers (embedding, attention in and out, key, SSM in and
out, the per-channel ``ssm_multipliers`` and ``mlp_multipliers``, the LM head's) scale
activations element-wise and change no count.
"""

from mlacalc.models.architecture import Arch
from mlacalc.models.registry import Default, Family, register

_RENAMES = {
    "mamba_n_heads": "mamba_num_heads",
    "mamba_d_state": "ssm_state_size",
    "mamba_proj_bias": "mamba_bias",
    "mamba_rms_norm": "mamba_gated_norm",
}


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _translate(data, raw, derived, problems) -> None:
    """The Mamba-2 inner width (``mamba_d_ssm`` or ``mamba_expand x hidden_size``) into
    ``mamba_head_dim`` by FalconH1Config's rule; the two projection biases checked equal.
    An explicit ``num_key_value_heads: null`` means one KV head per query head (the class's
    rule), where an absent one takes the class default 8."""
    null_kv = "num_key_value_heads" in data and data["num_key_value_heads"] is None
    if null_kv and "num_attention_heads" in raw:
        raw["num_key_value_heads"] = raw["num_attention_heads"]
        derived.append("num_key_value_heads = num_attention_heads (null in the file)")
    d, heads = raw.get("hidden_size"), raw.get("mamba_num_heads", 128)
    inner, expand = data.get("mamba_d_ssm", 1024), data.get("mamba_expand", 2)
    if inner is None:
        if not _is_int(expand) or expand <= 0:
            problems.append(("mamba_expand", f"must be a positive integer, got {expand!r}", None))
            return
        inner = expand * d if _is_int(d) else None
        field = "mamba_expand"
    else:
        field = "mamba_d_ssm"
        if not _is_int(inner) or inner <= 0:
            problems.append(("mamba_d_ssm", f"must be a positive integer, got {inner!r}", None))
            return
    if _is_int(inner) and _is_int(heads) and heads > 0:
        head = data.get("mamba_d_head", "auto")
        if inner % heads:
            problems.append(
                (
                    field,
                    f"the Mamba-2 inner width {inner} is not a multiple of mamba_n_heads {heads}",
                    "FalconH1Config requires heads that divide mamba_d_ssm",
                )
            )
            return
        if head in ("auto", None):
            raw["mamba_head_dim"] = inner // heads
            derived.append(
                f"mamba_head_dim = {inner // heads} (mamba_d_head auto: the inner width {inner} "
                f"/ mamba_n_heads {heads})"
            )
        elif head != inner // heads:
            problems.append(
                (
                    "mamba_d_head",
                    f"{head!r} x mamba_n_heads {heads} is not the Mamba-2 inner width {inner}",
                    "FalconH1Config requires it; use auto",
                )
            )
            return
        else:
            raw["mamba_head_dim"] = head
    in_bias = data.get("mamba_proj_bias", False)
    out_bias = data.get("projectors_bias", False)
    if out_bias is not None and in_bias is not None and bool(out_bias) != bool(in_bias):
        problems.append(
            (
                "projectors_bias",
                f"{out_bias!r} differs from mamba_proj_bias {in_bias!r}: a bias on out_proj "
                "and not in_proj (or the reverse) is not modelled",
                "set both alike",
            )
        )


FAMILY = register(
    Family(
        name="falcon_h1",
        model_types=("falcon_h1",),
        layout="llama",
        hf_class="transformers FalconH1Config",
        renames=_RENAMES,
        defaults={
            "intermediate_size": Default("FalconH1Config default", value=14336),
            "tie_word_embeddings": Default("FalconH1Config default", value=False),
            "max_position_embeddings": Default("FalconH1Config default", value=8192),
            # absent: the class default 8; an explicit null: num_attention_heads (_translate)
            "num_key_value_heads": Default("FalconH1Config default", value=8),
            "head_dim": Default(
                "the attention's width: hidden_size / num_attention_heads (LlamaAttention)",
                rule=lambda v: v["hidden_size"] // v["num_attention_heads"],
                needs=("hidden_size", "num_attention_heads"),
            ),
            "mamba_num_heads": Default("FalconH1Config mamba_n_heads default", value=128),
            "ssm_state_size": Default("FalconH1Config mamba_d_state default", value=256),
            "mamba_n_groups": Default("FalconH1Config default", value=1),
            "mamba_d_conv": Default("FalconH1Config default", value=4),
            "mamba_chunk_size": Default("FalconH1Config default", value=256),
            "mamba_gated_norm": Default("FalconH1Config mamba_rms_norm default", value=False),
        },
        reads=("mamba_d_ssm", "mamba_expand", "mamba_d_head", "projectors_bias"),
        irrelevant={
            "n_groups": "NemotronH's name for the SSM groups; "
            "FalconH1Config reads mamba_n_groups (from recall)",
            "num_logits_to_keep": "logits kept during generation",
            "time_step_limit": "the step sizes' clamp (element-wise; Infinity means none)",
            "mamba_norm_before_gate": "whether the gate multiplies before or after the norm "
            "(element-wise)",
            "lm_head_multiplier": "a muP multiplier: scales activations",
            "embedding_multiplier": "a muP multiplier: scales activations",
            "mlp_multipliers": "muP multipliers: scale activations",
            "key_multiplier": "a muP multiplier: scales activations",
            "attention_out_multiplier": "a muP multiplier: scales activations",
            "attention_in_multiplier": "a muP multiplier: scales activations",
            "ssm_multipliers": "muP multipliers: scale activations (a non-persistent buffer)",
            "ssm_in_multiplier": "a muP multiplier: scales activations",
            "ssm_out_multiplier": "a muP multiplier: scales activations",
            "layers_block_type": "a property: every layer hybrid (attention and Mamba-2)",
            "layer_types": "FalconH1Config's alias of layers_block_type: every layer hybrid",
        },
        translate=_translate,
        archs={"falcon_h1": Arch(mamba=True, parallel_mamba=True)},
    )
)
