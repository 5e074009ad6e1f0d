"""Cohere Command-R / Aya (``CohereConfig``) and Command R7B / A (``Cohere2Config``):
attention and MLP read one LayerNorm (weight only) in parallel, tied head; Cohere2
interleaves sliding layers with every ``sliding_window_pattern``-th layer full."""

from mlacalc.models.architecture import Arch
from mlacalc.models.hf._layer_types import check_layer_types, read_layer_types
from mlacalc.models.hf._rules import head_dim_from_width
from mlacalc.models.registry import Default, Family, HFInput, register


def _translate(data, raw, derived, problems) -> None:
    if data.get("model_type") == "cohere2":
        read_layer_types(
            data,
            raw,
            derived,
            problems,
            off="sliding_attention",
            default_interval=4,
            interval_key="sliding_window_pattern",
        )
    else:  # Cohere reads no layer_types: checked as transformers checks a stray one
        check_layer_types(data, raw.get("num_hidden_layers"), problems)
        raw.pop("sliding_window", None)


FAMILY = register(
    Family(
        name="cohere",
        model_types=("cohere", "cohere2"),
        layout="llama",
        hf_class="transformers CohereConfig / Cohere2Config",
        defaults={
            "head_dim": head_dim_from_width("CohereConfig: hidden_size / num_attention_heads"),
            "num_key_value_heads": Default("CohereConfig / Cohere2Config default", value=64),
            "tie_word_embeddings": Default("CohereConfig / Cohere2Config default", value=True),
        },
        defaults_by_type={
            "cohere2": {"sliding_window": Default("Cohere2Config default", value=4096)},
        },
        inputs={
            "use_qk_norm": HFInput(
                "boolean",
                "Cohere: LayerNorm on queries and keys",
                refuse_when=True,
                refuse_why="query/key norms (use_qk_norm: true) are not modelled for Cohere",
            ),
        },
        reads=("sliding_window_pattern", "layer_types"),
        translate=_translate,
        archs={
            "cohere": Arch(norms_per_layer=1),
            "cohere2": Arch(norms_per_layer=1, off_pattern="sliding"),
        },
    )
)
