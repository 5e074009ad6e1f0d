"""EXAONE 4.0 (``Exaone4Config``): per-head q/k RMSNorm, norms after attention and after the MLP
(two per layer, none before), and ``sliding_window`` layers with every
``sliding_window_pattern``-th layer full (``layer_types`` when stated; Exaone4Config's rule
otherwise). Without ``sliding_window`` every layer is full."""

from mlacalc.models.architecture import Arch
from mlacalc.models.hf._layer_types import read_layer_types
from mlacalc.models.registry import Default, Family, register


def _translate(data, raw, derived, problems) -> None:
    if data.get("sliding_window") is None and "sliding_window" in data:
        raw["full_attention_interval"] = None
        derived.append("every layer full (sliding_window: null)")
        return
    pattern = data.get("sliding_window_pattern", 4)
    if isinstance(pattern, str):
        if (
            not pattern
            or set(pattern) - {"L", "G"}
            or pattern.count("G") != 1
            or pattern[-1] != "G"
        ):
            problems.append(
                (
                    "sliding_window_pattern",
                    f"{pattern[:20]!r}: only local layers closed by one global one ('LLLG') "
                    "are modelled",
                    None,
                )
            )
            return
        pattern = len(pattern)
    read_layer_types(
        {**data, "sliding_window_pattern": pattern},
        raw,
        derived,
        problems,
        off="sliding_attention",
        default_interval=4,
        interval_key="sliding_window_pattern",
    )


FAMILY = register(
    Family(
        name="exaone4",
        model_types=("exaone4",),
        layout="llama",
        hf_class="transformers Exaone4Config",
        defaults={
            "head_dim": Default(
                "Exaone4: hidden_size / num_attention_heads",
                rule=lambda v: v["hidden_size"] // v["num_attention_heads"],
                needs=("hidden_size", "num_attention_heads"),
            ),
            "num_key_value_heads": Default("Exaone4Config default", value=32),
            "tie_word_embeddings": Default("Exaone4Config default", value=False),
            "sliding_window": Default("Exaone4Config default", value=4096),
        },
        reads=("sliding_window_pattern", "layer_types"),
        translate=_translate,
        archs={"exaone4": Arch(qk_norm="head", off_pattern="sliding")},
    )
)
