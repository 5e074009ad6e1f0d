"""Nemotron-NAS (``DeciLMConfig``, remote code only): Llama-3.x Nemotron Super/Ultra, whose
layers are searched one by one (``block_configs``, one entry per layer).

No transformers class exists; the rule is read from the structure of the published modeling
code (``modeling_decilm.py`` of the checkpoints, ``DeciLMDecoderLayer``): a layer whose
``attention.no_op`` is false has an input RMSNorm and Llama attention (``q``, ``k``, ``v``, ``o``
projections; ``num_attention_heads / attention.n_heads_in_group`` KV heads; ``attention_bias``);
a layer whose ``ffn.no_op`` is false has a post-attention RMSNorm and a gated Llama MLP
(``mlp_bias``) of width ``find_multiple(int(2 x ffn.ffn_mult x hidden_size / 3), 256)``
(``_ffn_mult_to_intermediate_size``). A no-op part holds no weights and no norm.

mlacalc reads each layer's two parts as two blocks (``block_types``: ``attention``, ``mlp``),
each one norm and one mixer as Nemotron-H's, the MLP widths in ``block_widths``: a model of
``L`` layers has as many blocks as parts that are not no-ops (Llama-3.3-Nemotron-Super-49B:
80 layers, 49 attention and 80 MLP blocks). Refused by name: a part replaced by one linear
layer (``replace_with_linear``), sink or windowed attention (``num_sink_tokens``,
``window_length``, ``unshifted_sink``, ``use_prefill_window_in_sink_attention``), a sparsified
part (``sparsify``) and attention layers of different KV heads (``n_heads_in_group``): none is
modelled.
"""

from __future__ import annotations

from typing import Any

from mlacalc.models.architecture import Arch
from mlacalc.models.registry import Default, Family, register

#: settings of a block that are not modelled, with the value that means "off"
_OFF = {
    "replace_with_linear": False,
    "sparsify": None,
    "num_sink_tokens": None,
    "window_length": None,
    "unshifted_sink": False,
    "use_prefill_window_in_sink_attention": False,
}


def ffn_width(mult: float, hidden: int) -> int:
    """DeciLM's ``_ffn_mult_to_intermediate_size``: ``2 mult d / 3`` up to a multiple of 256.

    >>> ffn_width(5.25, 8192), ffn_width(1.0, 8192)
    (28672, 5632)
    """
    width = int(2 * mult * hidden / 3)
    return -(-width // 256) * 256


def _part(entry: Any, name: str, i: int, problems: list) -> dict | None:
    part = entry.get(name) if isinstance(entry, dict) else None
    if not isinstance(part, dict):
        problems.append(
            (f"block_configs[{i}].{name}", "must be a mapping", "copy the published block")
        )
        return None
    for key, off in _OFF.items():
        value = part.get(key, off)
        if value is None:
            value = off  # null means off
        if value != off:
            problems.append(
                (
                    f"block_configs[{i}].{name}.{key}",
                    f"{key}: {part[key]!r} is not modelled",
                    f"the nearest modelled block has {key}: {str(off).lower()}",
                )
            )
            return None
    return part


def _translate(data, raw, derived, problems) -> None:
    blocks = data.get("block_configs")
    d, heads = raw.get("hidden_size"), raw.get("num_attention_heads")
    if not isinstance(blocks, list) or not blocks:
        problems.append(("block_configs", "must list one block per layer", None))
        return
    if not (isinstance(d, int) and isinstance(heads, int) and d > 0 and heads > 0):
        return  # the schema reports hidden_size and num_attention_heads
    types, widths, groups = [], [], set()
    for i, entry in enumerate(blocks):
        attention, ffn = _part(entry, "attention", i, problems), _part(entry, "ffn", i, problems)
        if attention is None or ffn is None:
            return
        if not attention.get("no_op"):
            group = attention.get("n_heads_in_group")
            if not isinstance(group, int) or isinstance(group, bool) or group <= 0:
                problems.append(
                    (f"block_configs[{i}].attention.n_heads_in_group", f"got {group!r}", None)
                )
                return
            groups.add(group)
            types.append("attention")
        if not ffn.get("no_op"):
            mult = ffn.get("ffn_mult")
            if isinstance(mult, bool) or not isinstance(mult, (int, float)) or not mult > 0:
                problems.append((f"block_configs[{i}].ffn.ffn_mult", f"got {mult!r}", None))
                return
            widths.append(ffn_width(mult, d))
            types.append("mlp")
    if len(groups) > 1:
        problems.append(
            (
                "block_configs",
                f"attention layers of different KV heads (n_heads_in_group {sorted(groups)}) "
                "are not modelled",
                "the nearest modelled layout gives every attention layer the same group",
            )
        )
        return
    if groups:
        (group,) = groups
        if heads % group:
            problems.append(
                (
                    "num_attention_heads",
                    f"{heads} is not a multiple of block_configs' n_heads_in_group {group}",
                    "each group of query heads shares one KV head",
                )
            )
            return
        raw["num_key_value_heads"] = heads // group
    else:
        raw["num_key_value_heads"] = heads  # no attention layer: no count reads it
    stated = raw.get("num_hidden_layers")
    raw["block_types"], raw["block_widths"] = types, widths
    raw["num_hidden_layers"] = len(types)
    if widths:
        raw["intermediate_size"] = max(widths)
    derived.append(
        f"block_types: the {len(blocks)} layers of block_configs as {types.count('attention')} "
        f"attention and {len(widths)} MLP blocks (num_hidden_layers {stated!r} -> "
        f"{len(types)} blocks); block_widths from ffn_mult; num_key_value_heads = "
        f"{raw['num_key_value_heads']} (num_attention_heads / n_heads_in_group)"
    )


FAMILY = register(
    Family(
        name="nemotron_nas",
        model_types=("nemotron-nas",),
        layout="llama",
        hf_class="remote code DeciLMConfig (modeling_decilm.py of the checkpoints)",
        defaults={
            "tie_word_embeddings": Default("DeciLMConfig (LlamaConfig) default", value=False),
            "head_dim": Default(
                "hidden_size / num_attention_heads (the Llama rule of DeciLMAttention)",
                rule=lambda v: v["hidden_size"] // v["num_attention_heads"],
                needs=("hidden_size", "num_attention_heads"),
            ),
        },
        reads=("block_configs",),
        irrelevant={
            "pretraining_tp": "tensor-parallel slicing of the training run (same matrices)",
        },
        translate=_translate,
        archs={"nemotron-nas": Arch(norms_per_layer=1, blocks=True)},
    )
)
