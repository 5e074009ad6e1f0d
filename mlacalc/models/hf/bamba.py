"""Bamba (``BambaConfig``): Mamba-2 layers with grouped-query attention at ``attn_layer_indices``.

Every layer is a mixer and a gated MLP (``intermediate_size``), with two norms: the mixer is a
Mamba-2 layer (:mod:`mlacalc.cost.mamba`; ``mamba_n_heads`` heads of ``mamba_d_head``, whose
product is ``mamba_expand x hidden_size``, ``mamba_n_groups`` groups of ``mamba_d_state``) or,
at the 0-based ``attn_layer_indices`` (read into the 1-based ``full_attention_layers``),
attention. A Mamba-2 layer keeps a fixed state per sequence: the convolution window and one
``mamba_d_head x mamba_d_state`` float32 matrix per head.
"""

from mlacalc.models.architecture import Arch
from mlacalc.models.registry import Default, Family, register

_RENAMES = {
    "mamba_n_heads": "mamba_num_heads",
    "mamba_d_state": "ssm_state_size",
    "mamba_proj_bias": "mamba_bias",
}


def read_mamba_widths(data, raw, derived, problems, owner: str) -> None:
    """``mamba_d_head`` (``"auto"``: ``mamba_expand x hidden_size / mamba_n_heads``, the
    configuration class's rule) into ``mamba_head_dim``, checked against that product."""
    d, heads = raw.get("hidden_size"), raw.get("mamba_num_heads", 128)
    expand, head = data.get("mamba_expand", 2), data.get("mamba_d_head", "auto")
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (d, heads, expand)):
        return  # the schema reports the widths; mamba_expand is named below
    if heads <= 0 or expand <= 0 or (expand * d) % heads:
        problems.append(
            (
                "mamba_expand",
                f"mamba_expand {expand} x hidden_size {d} is not a multiple of mamba_n_heads "
                f"{heads}",
                f"{owner} requires heads that divide the Mamba-2 inner width",
            )
        )
        return
    if head in ("auto", None):
        raw["mamba_head_dim"] = expand * d // heads
        derived.append(
            f"mamba_head_dim = {raw['mamba_head_dim']} (mamba_d_head auto: mamba_expand x "
            "hidden_size / mamba_n_heads)"
        )
    elif head != expand * d // heads:
        problems.append(
            (
                "mamba_d_head",
                f"{head!r} x mamba_n_heads {heads} is not mamba_expand x hidden_size {expand * d}",
                f"{owner} requires it; use auto",
            )
        )
    else:
        raw["mamba_head_dim"] = head


def _translate(data, raw, derived, problems) -> None:
    read_mamba_widths(data, raw, derived, problems, "BambaConfig")
    indices = data.get("attn_layer_indices") or []
    n = raw.get("num_hidden_layers")
    if not isinstance(indices, list) or not all(
        isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in indices
    ):
        problems.append(("attn_layer_indices", f"must list 0-based layers, got {indices!r}", None))
        return
    if isinstance(n, int) and any(i >= n for i in indices):
        problems.append(
            ("attn_layer_indices", f"names a layer past num_hidden_layers {n}", "list 0-based")
        )
        return
    if indices:
        raw["full_attention_layers"] = sorted({i + 1 for i in indices})
        derived.append("full_attention_layers: attn_layer_indices + 1 (the others Mamba-2)")


_MAMBA_DEFAULTS = {
    "num_key_value_heads": Default("BambaConfig default", value=8),
    "tie_word_embeddings": Default("BambaConfig default", value=False),
    "mamba_num_heads": Default("BambaConfig mamba_n_heads default", value=128),
    "ssm_state_size": Default("BambaConfig mamba_d_state default", value=256),
    "mamba_n_groups": Default("BambaConfig default", value=1),
    "mamba_d_conv": Default("BambaConfig default", value=4),
    "mamba_chunk_size": Default("BambaConfig default", value=256),
    "max_position_embeddings": Default("BambaConfig default", value=262144),
}

FAMILY = register(
    Family(
        name="bamba",
        model_types=("bamba",),
        layout="llama",
        hf_class="transformers BambaConfig",
        renames=_RENAMES,
        defaults={
            **_MAMBA_DEFAULTS,
            "head_dim": Default(
                "the attention's width: hidden_size / num_attention_heads",
                rule=lambda v: v["hidden_size"] // v["num_attention_heads"],
                needs=("hidden_size", "num_attention_heads"),
            ),
        },
        reads=("attn_layer_indices", "mamba_expand", "mamba_d_head"),
        irrelevant={
            "n_groups": "NemotronH's name for the SSM groups; "
            "BambaConfig reads mamba_n_groups (from recall)",
            "num_logits_to_keep": "logits kept during generation",
            "time_step_limit": "the step sizes' clamp (element-wise; Infinity means none)",
            "z_loss_coefficient": "a training loss",
        },
        translate=_translate,
        archs={"bamba": Arch(mamba=True)},
    )
)
