"""MiniCPM3 (``MiniCPM3Config``): MLA attention with a dense gated MLP."""

from mlacalc.models.hf._rules import MLA_IGNORED, kv_heads_equal_heads
from mlacalc.models.registry import Default, Family, register


def _translate(data, raw, derived, problems) -> None:
    if raw.get("q_lora_rank") == 0:
        raw["q_lora_rank"] = None
        derived.append("q_lora_rank = None (0 means no query compression)")


FAMILY = register(
    Family(
        name="minicpm3",
        model_types=("minicpm3",),
        layout="minicpm3",
        hf_class="transformers MiniCPM3Config",
        defaults={
            "num_key_value_heads": kv_heads_equal_heads("MLA repeats num_attention_heads here"),
            "tie_word_embeddings": Default("MiniCPM3Config default", value=True),
            "q_lora_rank": Default("MiniCPM3Config default", value=768),
            "v_head_dim": Default(
                "MiniCPM3: v_head_dim = hidden_size / num_attention_heads",
                rule=lambda v: v["hidden_size"] // v["num_attention_heads"],
                needs=("hidden_size", "num_attention_heads"),
            ),
        },
        required=("kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim"),
        ignored=MLA_IGNORED,
        translate=_translate,
        mla=True,
    )
)
