"""MiMo (``mimo``: XiaomiMiMo/MiMo-7B, published modeling code ``modeling_mimo.py``; no
transformers class).

The rule, read from the structure of its published code and config: ``MiMoForCausalLM`` is
Qwen2's causal LM (``Qwen2ForCausalLM``, whose attention has q, k and v biases and an
``o_proj`` without one, whatever ``attention_bias`` says: the Qwen2 code of that release reads
no such key) plus ``num_nextn_predict_layers`` multi-token-prediction layers
(``model.mtp_layers``). Each MTP layer holds two input norms (``token_layernorm``,
``hidden_layernorm``), ``input_proj`` (``2d -> d``, no bias), a Qwen2 decoder layer (its two
norms, attention with q/k/v biases, gated MLP of ``intermediate_size``) and a
``final_layernorm``: the same tensors as a DeepSeek MTP module's ``enorm``, ``hnorm``,
``eh_proj``, decoder layer and ``shared_head.norm``, which is how mlacalc counts them (apart
from the main model's total, as for every MTP family). ``use_mrope`` (multimodal RoPE) changes
no count; ``use_sliding_window: true`` is refused as for Qwen2.
"""

from mlacalc.models.hf._rules import head_dim_from_width
from mlacalc.models.registry import Default, Family, HFInput, register


def _translate(data, raw, derived, problems) -> None:
    if raw.pop("attention_bias", None):
        derived.append(
            "attention_bias read as Qwen2's rule: q, k and v biases, o_proj without "
            "(MiMo's Qwen2 attention reads no attention_bias)"
        )


FAMILY = register(
    Family(
        name="mimo",
        model_types=("mimo",),
        layout="llama",
        hf_class="published modeling code (MiMoConfig, a Qwen2Config; no transformers class)",
        defaults={
            "head_dim": head_dim_from_width("Qwen2 rule: hidden_size / num_attention_heads"),
            "num_key_value_heads": Default("Qwen2Config default", value=32),
            "tie_word_embeddings": Default("Qwen2Config default", value=False),
            "qkv_bias": Default("Qwen2 attention has q, k, v biases", value=True, warn=False),
            "num_nextn_predict_layers": Default("absent: no MTP layer", value=0, warn=False),
        },
        inputs={
            "use_sliding_window": HFInput(
                "boolean",
                "Qwen2: sliding windows on the upper layers",
                refuse_when=True,
                refuse_why="per-layer sliding windows (use_sliding_window: true) are not modelled",
            ),
        },
        ignored={"sliding_window": "read only with use_sliding_window: true, which is refused"},
        irrelevant={
            "max_window_layers": "read only with use_sliding_window: true, which is refused",
            "use_mrope": "multimodal RoPE position ids (no parameter, element-wise)",
        },
        translate=_translate,
        mtp=True,
    )
)
