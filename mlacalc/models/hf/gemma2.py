"""Gemma 2 (``Gemma2Config``): Gemma's layer (256-wide heads, tied head) with four norms per
layer (before and after attention and the MLP), no query/key norm, and ``sliding_window``
layers alternating with full ones (``layer_types``: every second layer full). Soft-capping of
attention logits and final logits (``attn_logit_softcapping``, ``final_logit_softcapping``)
and ``query_pre_attn_scalar`` scale activations: no parameter, element-wise."""

from mlacalc.models.architecture import Arch
from mlacalc.models.hf._layer_types import read_layer_types
from mlacalc.models.registry import Default, Family, HFInput, register


def _translate(data, raw, derived, problems) -> None:
    read_layer_types(data, raw, derived, problems, off="sliding_attention", default_interval=2)


FAMILY = register(
    Family(
        name="gemma2",
        model_types=("gemma2",),
        layout="llama",
        hf_class="transformers Gemma2Config",
        defaults={
            "head_dim": Default("Gemma2Config default", value=256),
            "num_key_value_heads": Default("Gemma2Config default", value=4),
            "tie_word_embeddings": Default("Gemma2Config default", value=True),
            "sliding_window": Default("Gemma2Config default", value=4096),
        },
        inputs={
            "use_bidirectional_attention": HFInput(
                "boolean",
                "text tokens attend both ways (an embedding model, not a causal LM)",
                refuse_when=True,
                refuse_why="bidirectional attention (an encoder) is not modelled: causal LMs only",
            ),
        },
        reads=("layer_types",),
        translate=_translate,
        archs={"gemma2": Arch(norms_per_layer=4, off_pattern="sliding")},
    )
)
