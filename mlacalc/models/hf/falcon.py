"""Falcon (``FalconConfig``): fused query_key_value, parallel attention and MLP, multi-query."""

from mlacalc.models.hf._rules import head_dim_from_width, mlp_four_times_width
from mlacalc.models.registry import Default, Family, HFInput, register


def _translate(data, raw, derived, problems) -> None:
    """``multi_query`` decides the KV heads unless the new decoder architecture states them."""
    _check_parallel_norms(data, problems)
    heads = raw.get("num_attention_heads")
    new_arch = data.get("new_decoder_architecture")
    if new_arch is True or not isinstance(heads, int) or isinstance(heads, bool):
        return  # the stated num_kv_heads (or its default) stands
    multi_query = data.get("multi_query")
    if multi_query is None:
        multi_query = True  # FalconConfig default
    if not isinstance(multi_query, bool):
        return  # reported by the input check
    raw["num_key_value_heads"] = 1 if multi_query else heads
    derived.append(
        f"num_key_value_heads = {raw['num_key_value_heads']} "
        f"(multi_query: {str(multi_query).lower()})"
    )


def _check_parallel_norms(data, problems) -> None:
    """``num_ln_in_parallel_attn`` of a parallel block: FalconDecoderLayer holds two norms
    (``ln_attn``, ``ln_mlp``) when it is 2 (the new decoder architecture's default) and one
    otherwise; a value that departs from its architecture's default is refused."""
    stated = data.get("num_ln_in_parallel_attn")
    if stated is None or data.get("parallel_attn") is False:
        return
    expected = 2 if data.get("new_decoder_architecture") is True else 1
    if stated != expected:
        problems.append(
            (
                "num_ln_in_parallel_attn",
                f"{stated!r} norms before a parallel block is not modelled for this architecture "
                f"(modelled: {expected}, the FalconConfig rule)",
                f"use num_ln_in_parallel_attn: {expected} or leave it out",
            )
        )


FAMILY = register(
    Family(
        name="falcon",
        model_types=("falcon",),
        layout="falcon",
        hf_class="transformers FalconConfig",
        aliases={"RefinedWebModel": "falcon", "RefinedWeb": "falcon"},
        renames={
            "num_kv_heads": "num_key_value_heads",
            "ffn_hidden_size": "intermediate_size",
            "n_embed": "hidden_size",
            "n_head": "num_attention_heads",
            "n_layer": "num_hidden_layers",
        },
        defaults={
            "head_dim": head_dim_from_width("falcon: head_dim = hidden_size / heads"),
            "intermediate_size": mlp_four_times_width("FalconMLP is 4 x hidden_size"),
            "num_key_value_heads": Default(
                "FalconConfig: multi_query defaults to true; the new decoder architecture "
                "defaults to num_attention_heads",
                rule=lambda v: v["num_attention_heads"] if v.get("new_decoder_architecture") else 1,
                needs=("num_attention_heads",),
                warn=True,
            ),
            "tie_word_embeddings": Default("Falcon ties its output head by default", value=True),
            "parallel_attn": Default("FalconConfig default", value=True),
            "bias": Default("FalconConfig default", value=False),
            "new_decoder_architecture": Default("FalconConfig default", value=False),
        },
        inputs={
            "multi_query": HFInput("boolean", "one K/V head shared by every query head"),
        },
        reads=("multi_query", "num_ln_in_parallel_attn"),
        translate=_translate,
        fused_qkv=True,
        layer_norm=True,
        gated_mlp=False,
    )
)
