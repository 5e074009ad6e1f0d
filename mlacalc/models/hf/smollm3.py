"""SmolLM3 (``SmolLM3Config``): the Llama layout (RMSNorm, q/k/v/o projections, gated MLP, tied
head by default) with every ``no_rope_layer_interval``-th layer (``no_rope_layers`` 0) without
rotary embedding. A layer without RoPE holds the same weights and cache and does the same
products (the rotation is element-wise), so the pattern only labels those layers ``no-rope``;
a ``no_rope_layers`` list that is not that period is refused naming it."""

from mlacalc.models.architecture import Arch
from mlacalc.models.registry import Default, Family, HFInput, register


def _translate(data, raw, derived, problems) -> None:
    n = raw.get("num_hidden_layers")
    interval = data.get("no_rope_layer_interval", 4)
    listed = data.get("no_rope_layers")
    if not isinstance(n, int) or isinstance(interval, bool) or not isinstance(interval, int):
        return
    if interval <= 0:
        problems.append(("no_rope_layer_interval", f"must be positive, got {interval!r}", None))
        return
    expected = [int((i + 1) % interval != 0) for i in range(n)]
    if listed is not None and listed != expected:
        problems.append(
            (
                "no_rope_layers",
                "only every k-th layer without RoPE (no_rope_layer_interval) is modelled",
                "leave no_rope_layers unset, or list 0 every no_rope_layer_interval-th layer",
            )
        )
        return
    types = data.get("layer_types")
    if types is not None and any(t != "full_attention" for t in types or ()):
        problems.append(
            ("layer_types", "only full-attention layers are modelled for smollm3", None)
        )
        return
    if interval <= n:
        raw["full_attention_interval"] = interval
        derived.append(
            f"full_attention_interval = {interval} (every {interval}th layer without RoPE; "
            "same weights, cache and products as the others)"
        )


FAMILY = register(
    Family(
        name="smollm3",
        model_types=("smollm3",),
        layout="llama",
        hf_class="transformers SmolLM3Config",
        defaults={
            "head_dim": Default(
                "SmolLM3: hidden_size / num_attention_heads",
                rule=lambda v: v["hidden_size"] // v["num_attention_heads"],
                needs=("hidden_size", "num_attention_heads"),
            ),
            "num_key_value_heads": Default("SmolLM3Config default", value=4),
            "tie_word_embeddings": Default("SmolLM3Config default", value=True),
        },
        inputs={
            "use_sliding_window": HFInput(
                "boolean",
                "SmolLM3: sliding windows",
                refuse_when=True,
                refuse_why="use_sliding_window: true is not modelled for smollm3",
            ),
        },
        ignored={"sliding_window": "read only with use_sliding_window: true, which is refused"},
        reads=("no_rope_layers", "no_rope_layer_interval", "layer_types"),
        translate=_translate,
        archs={"smollm3": Arch(nope_full=True)},
    )
)
