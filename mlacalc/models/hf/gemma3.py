"""Gemma 3 (``Gemma3TextConfig``): per-head query/key RMSNorm, four norms per layer, tied
head; ``sliding_window`` layers with every ``sliding_window_pattern``-th layer full."""

from mlacalc.models.architecture import Arch
from mlacalc.models.hf._layer_types import read_layer_types
from mlacalc.models.registry import Default, Family, HFInput, register


def _translate(data, raw, derived, problems) -> None:
    read_layer_types(
        data,
        raw,
        derived,
        problems,
        off="sliding_attention",
        default_interval=6,
        interval_key="sliding_window_pattern",
    )


FAMILY = register(
    Family(
        name="gemma3",
        model_types=("gemma3_text",),
        layout="llama",
        hf_class="transformers Gemma3TextConfig",
        defaults={
            "head_dim": Default("Gemma3TextConfig default", value=256),
            "num_key_value_heads": Default("Gemma3TextConfig default", value=4),
            "tie_word_embeddings": Default("Gemma3TextConfig default", value=True),
            "sliding_window": Default("Gemma3TextConfig default", value=4096),
        },
        inputs={
            "use_bidirectional_attention": HFInput(
                "boolean",
                "text tokens attend both ways (an embedding model, not a causal LM)",
                refuse_when=True,
                refuse_why="bidirectional attention (an encoder) is not modelled: causal LMs only",
            )
        },
        reads=("sliding_window_pattern", "layer_types"),
        translate=_translate,
        archs={
            "gemma3_text": Arch(qk_norm="head", norms_per_layer=4, off_pattern="sliding"),
        },
    )
)
