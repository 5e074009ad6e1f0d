"""Checkpoints with their own modeling code that follow the Llama layout: InternLM
(``internlm``: biases on q, k, v and o when ``bias``), InternLM2 (``internlm2``: q, k, v fused
in ``wqkv``) and Baichuan-7B (``baichuan``: q, k, v fused in ``W_pack``). transformers does
not implement them; the rule, read from their published modeling code, is the Llama count:
RMSNorm before attention and MLP, rotary attention with ``(n_h + 2 n_kv) d_h x d`` query,
key and value weights (fused or not) and ``d x n_h d_h`` output, a gated MLP, untied head
unless ``tie_word_embeddings``."""

from mlacalc.models.hf._rules import head_dim_from_width, kv_heads_equal_heads
from mlacalc.models.registry import Default, Family, register


def _translate(data, raw, derived, problems) -> None:
    if data.get("model_type") == "internlm" and data.get("bias", True):
        raw["attention_bias"] = True
        derived.append("attention_bias = True (InternLM bias: q, k, v and o biases)")
    raw.pop("bias", None)


FAMILY = register(
    Family(
        name="remote_llama",
        model_types=("internlm", "internlm2", "baichuan"),
        layout="llama",
        hf_class="published modeling code (no transformers class)",
        defaults={
            "head_dim": head_dim_from_width("Llama rule: hidden_size / num_attention_heads"),
            "num_key_value_heads": kv_heads_equal_heads("absent means MHA"),
            "tie_word_embeddings": Default(
                "untied output head in these checkpoints", value=False, warn=False
            ),
        },
        translate=_translate,
    )
)
