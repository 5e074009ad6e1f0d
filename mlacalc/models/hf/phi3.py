"""Phi-3 / Phi-3.5 / Phi-4-mini (``Phi3Config``): the Llama layout with fused ``qkv_proj`` and
``gate_up_proj`` (the same counts as separate matrices); ``sliding_window`` on every layer."""

from mlacalc.models.architecture import Arch
from mlacalc.models.hf._rules import head_dim_from_width, kv_heads_equal_heads
from mlacalc.models.registry import Default, Family, register


def _translate(data, raw, derived, problems) -> None:
    if data.get("partial_rotary_factor") not in (None, 1, 1.0):
        derived.append("partial_rotary_factor: RoPE on part of each head (no count changes)")


FAMILY = register(
    Family(
        name="phi3",
        model_types=("phi3",),
        layout="llama",
        hf_class="transformers Phi3Config",
        defaults={
            "head_dim": head_dim_from_width("Phi3Config: hidden_size / num_attention_heads"),
            "num_key_value_heads": kv_heads_equal_heads("Phi3Config: absent means MHA"),
            "tie_word_embeddings": Default("Phi3Config default", value=False),
        },
        reads=("partial_rotary_factor",),
        translate=_translate,
        archs={
            "phi3": Arch(off_pattern="sliding"),
        },
    )
)
