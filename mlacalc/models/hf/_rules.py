"""Default rules several family units share (each unit still lists the ones it uses)."""

from __future__ import annotations

from mlacalc.models.registry import Default

__all__ = [
    "MLA_IGNORED",
    "MLA_MOE_REQUIRED",
    "head_dim_from_width",
    "kv_heads_equal_heads",
    "mlp_four_times_width",
]

#: the widths an MLA config must state (it has no single head width), and its routed experts
MLA_MOE_REQUIRED = (
    "kv_lora_rank",
    "qk_nope_head_dim",
    "qk_rope_head_dim",
    "v_head_dim",
    "n_routed_experts",
)
#: ``head_dim`` means nothing to MLA, which states its three widths
MLA_IGNORED = {"head_dim": "MLA states qk_nope_head_dim, qk_rope_head_dim and v_head_dim"}


def head_dim_from_width(why: str) -> Default:
    """``head_dim = hidden_size // num_attention_heads`` (the usual Hugging Face rule)."""
    return Default(
        why,
        rule=lambda v: v["hidden_size"] // v["num_attention_heads"],
        needs=("hidden_size", "num_attention_heads"),
    )


def kv_heads_equal_heads(why: str) -> Default:
    """``num_key_value_heads = num_attention_heads`` (multi-head attention)."""
    return Default(why, rule=lambda v: v["num_attention_heads"], needs=("num_attention_heads",))


def mlp_four_times_width(why: str) -> Default:
    """``intermediate_size = 4 * hidden_size`` (GPT-2 and Falcon MLPs)."""
    return Default(why, rule=lambda v: 4 * v["hidden_size"], needs=("hidden_size",))


def class_groups(v) -> int:
    """DeepseekV3Config's ``n_group`` default, 8, where it is a routing the schema takes: 8
    groups split the routed experts and 4 of them (``topk_group``'s default) hold a token's
    ``num_experts_per_tok``; else 1, no limit (a small test model's 6 experts, or 8 experts
    at top-6, which 4 groups of 1 cannot hold)."""
    experts, k = v["n_routed_experts"], v.get("num_experts_per_tok") or 0
    return 8 if experts % 8 == 0 and 4 * (experts // 8) >= k else 1


def class_group_defaults(config: str) -> dict[str, Default]:
    """The group-limited routing fields a DeepSeek-V3-style class fills where a config leaves
    them out (``config``: the class's name, ``"DeepseekV3Config"``): ``n_group`` by
    :func:`class_groups`, ``topk_group`` 4 (at most ``n_group``), each said on stderr."""
    return {
        "n_group": Default(
            f"{config} default", rule=class_groups, needs=("n_routed_experts",), warn=True
        ),
        "topk_group": Default(
            f"{config} default",
            rule=lambda v: min(4, v["n_group"]),
            needs=("n_group",),
            warn=True,  # the class's constant (at most the groups stated): said on stderr
        ),
    }
