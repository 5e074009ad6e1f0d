"""GPT-2 (``GPT2Config``): LayerNorm and Conv1D with biases, GELU MLP, learned positions."""

from mlacalc.models.hf._rules import head_dim_from_width, kv_heads_equal_heads, mlp_four_times_width
from mlacalc.models.registry import Default, Family, HFInput, register


def _translate(data, raw, derived, problems) -> None:
    # GPT-2 attention is always multi-head: a stray num_key_value_heads means nothing to it
    raw.pop("num_key_value_heads", None)


FAMILY = register(
    Family(
        name="gpt2",
        model_types=("gpt2",),
        layout="gpt2",
        hf_class="transformers GPT2Config",
        renames={
            "n_embd": "hidden_size",
            "n_layer": "num_hidden_layers",
            "n_head": "num_attention_heads",
            "n_positions": "max_position_embeddings",
            "n_inner": "intermediate_size",
        },
        defaults={
            "head_dim": head_dim_from_width("gpt2: head_dim = hidden_size / heads"),
            "intermediate_size": mlp_four_times_width("GPT-2: n_inner null means 4 x n_embd"),
            "num_key_value_heads": kv_heads_equal_heads("GPT-2 attention is multi-head"),
            "tie_word_embeddings": Default("GPT-2 ties its output head to wte", value=True),
            "bias": Default(
                "GPT-2 has biases on every linear layer and layer norm", value=True, warn=False
            ),
            "max_position_embeddings": Default("GPT2Config n_positions default", value=1024),
        },
        inputs={
            "add_cross_attention": HFInput(
                "boolean",
                "cross-attention to an encoder in every block",
                refuse_when=True,
                refuse_why="cross-attention (an encoder-decoder GPT-2) is not modelled",
            )
        },
        irrelevant={
            "scale_attn_weights": "scales attention scores (element-wise)",
            "scale_attn_by_inverse_layer_idx": "scales attention scores (element-wise)",
            "reorder_and_upcast_attn": "the precision of the score product, same FLOPs",
            **dict.fromkeys(
                (
                    "summary_type",
                    "summary_use_proj",
                    "summary_activation",
                    "summary_proj_to_labels",
                    "summary_first_dropout",
                ),
                "the sequence-summary head of GPT2DoubleHeadsModel, not the causal LM",
            ),
        },
        translate=_translate,
        fused_qkv=True,
        layer_norm=True,
        gated_mlp=False,
        rope=False,
    )
)
