"""StarCoder2 (``Starcoder2Config``): sequential blocks with a LayerNorm (weight and bias) before
attention and before the MLP, q/k/v/o projections with biases (``use_bias``), a plain
(ungated) GELU MLP ``c_fc`` / ``c_proj`` of ``intermediate_size`` with biases, rotary
positions, a final LayerNorm and a tied head by default; every layer sliding when
``sliding_window`` is set. Its tensors are Falcon's sequential layout (``parallel_attn:
false``): the same shapes and counts under other names."""

from mlacalc.models.registry import Default, Family, HFInput, register


def _translate(data, raw, derived, problems) -> None:
    bias = data.get("use_bias", True)
    raw["bias"] = bool(bias)
    raw["parallel_attn"] = False
    raw["new_decoder_architecture"] = False
    derived.append(
        f"bias = {bool(bias)} (use_bias); sequential LayerNorm blocks (Falcon's layout, "
        "parallel_attn: false)"
    )


FAMILY = register(
    Family(
        name="starcoder2",
        model_types=("starcoder2",),
        layout="falcon",
        hf_class="transformers Starcoder2Config",
        defaults={
            "head_dim": Default(
                "Starcoder2: hidden_size / num_attention_heads",
                rule=lambda v: v["hidden_size"] // v["num_attention_heads"],
                needs=("hidden_size", "num_attention_heads"),
            ),
            "num_key_value_heads": Default("Starcoder2Config default", value=2),
            "tie_word_embeddings": Default("Starcoder2Config default", value=True),
        },
        inputs={"use_bias": HFInput("boolean", "biases on every projection (default true)")},
        translate=_translate,
        layer_norm=True,
        gated_mlp=False,
    )
)
