"""Llama 4 (``Llama4TextConfig``, in ``text_config`` of ``Llama4Config``): chunked layers
(``attention_chunk_size``) with every ``no_rope_layer_interval``-th layer full and without
RoPE, weightless L2 query/key norms, MoE layers with one shared expert; routed and shared
experts of ``intermediate_size``, dense layers of ``intermediate_size_mlp``. MoE in every
layer (Scout) or in every ``interleave_moe_layer_step``-th one (Maverick: 2), or as
``moe_layers`` lists them when that is the same period."""

from mlacalc.models.architecture import Arch
from mlacalc.models.hf._layer_types import lift_text_config, read_layer_types
from mlacalc.models.registry import DEEPSEEK_MOE_WIDTH_FIELDS, Default, Family, register

_RENAMES = {"num_local_experts": "n_routed_experts"}


def _read_moe_layers(text, raw, derived, problems) -> None:
    """Llama4TextConfig's MoE placement: ``moe_layers`` as written, else every
    ``interleave_moe_layer_step``-th layer (1-based: layers k, 2k, ...), read as
    ``moe_layer_freq`` k and ``moe_layer_offset`` k - 1; a list of another shape is refused."""
    step = text.get("interleave_moe_layer_step", 1)
    n = raw.get("num_hidden_layers")
    if isinstance(step, bool) or not isinstance(step, int) or step <= 0:
        problems.append(("interleave_moe_layer_step", f"must be positive, got {step!r}", None))
        return
    listed = text.get("moe_layers")
    if listed is not None and isinstance(n, int):
        if not isinstance(listed, list) or not listed:
            problems.append(("moe_layers", "must list the MoE layers (0-based)", None))
            return
        step = listed[1] - listed[0] if len(listed) > 1 else n
        if listed != list(range(listed[0], n, step)) or step <= 0 or listed[0] != step - 1:
            problems.append(
                (
                    "moe_layers",
                    "only every k-th layer (k - 1, 2k - 1, ...) as MoE is modelled",
                    "state interleave_moe_layer_step instead",
                )
            )
            return
    if step > 1:
        raw["moe_layer_freq"], raw["moe_layer_offset"] = step, step - 1
        derived.append(
            f"moe_layer_freq = {step}, moe_layer_offset = {step - 1} (the last layer of every "
            f"{step} is MoE: interleave_moe_layer_step)"
        )


def _translate(data, raw, derived, problems) -> None:
    text = lift_text_config(data, raw, _RENAMES)
    if "text_config" in data:
        derived.append("read text_config (the language model of the multimodal checkpoint)")
    if isinstance(text.get("intermediate_size"), int):
        raw["moe_intermediate_size"] = text["intermediate_size"]
        raw["intermediate_size"] = text.get("intermediate_size_mlp", 16384)
        derived.append("moe_intermediate_size = intermediate_size (Llama 4 experts)")
        if "intermediate_size_mlp" not in text:
            derived.append("intermediate_size = 16384 (Llama4TextConfig intermediate_size_mlp)")
    if "n_shared_experts" not in raw:
        raw["n_shared_experts"] = 1
        derived.append("n_shared_experts = 1 (Llama 4: one shared expert in every MoE layer)")
    _read_moe_layers(text, raw, derived, problems)
    no_rope = text.get("no_rope_layers")
    interval = text.get("no_rope_layer_interval", 4)
    n = raw.get("num_hidden_layers")
    if no_rope and isinstance(n, int) and isinstance(interval, int) and interval > 0:
        expected = [int((i + 1) % interval != 0) for i in range(n)]
        if no_rope != expected:
            problems.append(
                (
                    "no_rope_layers",
                    "only every k-th layer without RoPE (no_rope_layer_interval) is modelled",
                    "leave no_rope_layers unset",
                )
            )
    text.setdefault("layer_types", None)
    read_layer_types(
        text,
        raw,
        derived,
        problems,
        off="chunked_attention",
        default_interval=interval,
        interval_key=None,
    )
    raw["n_shared_experts"] = 1


FAMILY = register(
    Family(
        name="llama4",
        model_types=("llama4_text",),
        aliases={"llama4": "llama4_text"},
        layout="llama",
        hf_class="transformers Llama4TextConfig",
        stray=DEEPSEEK_MOE_WIDTH_FIELDS,
        renames=_RENAMES,
        defaults={
            "head_dim": Default("Llama4TextConfig default", value=128),
            "num_key_value_heads": Default("Llama4TextConfig default", value=8),
            "tie_word_embeddings": Default("Llama4TextConfig default", value=False),
            "n_routed_experts": Default("Llama4TextConfig num_local_experts default", value=16),
            "num_experts_per_tok": Default("Llama4TextConfig default", value=1),
            "attention_chunk_size": Default("Llama4TextConfig default", value=8192),
        },
        reads=(
            "intermediate_size_mlp",
            "no_rope_layers",
            "no_rope_layer_interval",
            "layer_types",
            "interleave_moe_layer_step",
            "moe_layers",
        ),
        irrelevant={"use_qk_norm": "Llama 4's q/k norm is a weightless L2 norm (element-wise)"},
        translate=_translate,
        moe=True,
        requires_experts=True,
        archs={
            "llama4_text": Arch(off_pattern="chunked", nope_full=True),
        },
    )
)
