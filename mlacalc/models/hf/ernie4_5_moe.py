"""ERNIE 4.5 MoE (``Ernie4_5_MoeConfig``): ERNIE 4.5's attention (biases on every projection
with ``use_bias``) and, from layer ``moe_layer_start_index`` (0-based) to
``moe_layer_end_index`` (inclusive; -1: the last), a MoE of ``moe_num_experts`` experts of
``moe_intermediate_size`` with ``moe_num_shared_experts`` shared experts in one MLP
(``moe_intermediate_size x moe_num_shared_experts`` wide) and a router whose top-k picks by a
per-expert correction bias (``moe_statics``); the other layers a dense MLP of
``intermediate_size``. MoE layers placed otherwise (``moe_layer_interval`` other than 1, a
dense tail) are refused naming the key. With ``use_bias`` the output head carries a bias too
(refused: not modelled)."""

from mlacalc.models.architecture import Arch
from mlacalc.models.registry import DEEPSEEK_MOE_FIELDS, Default, Family, HFInput, register

_RENAMES = {
    "moe_num_experts": "n_routed_experts",
    "num_experts": "n_routed_experts",
    "moe_k": "num_experts_per_tok",
    "moe_num_shared_experts": "n_shared_experts",
}


def _translate(data, raw, derived, problems) -> None:
    n = raw.get("num_hidden_layers")
    start = data.get("moe_layer_start_index", 1)
    end = data.get("moe_layer_end_index", -1)
    interval = data.get("moe_layer_interval", 1)
    if interval != 1:
        problems.append(
            (
                "moe_layer_interval",
                f"{interval!r}: only consecutive MoE layers are modelled",
                "moe_layer_interval: 1",
            )
        )
    if isinstance(n, int) and end not in (-1, None, n - 1):
        problems.append(
            (
                "moe_layer_end_index",
                f"{end!r}: dense layers after the MoE ones are not modelled",
                f"moe_layer_end_index: -1 (or {n - 1})",
            )
        )
    if isinstance(start, int) and not isinstance(start, bool) and start >= 0:
        raw["first_k_dense_replace"] = start
        raw["moe_layer_freq"] = 1
        derived.append(f"first_k_dense_replace = {start} (moe_layer_start_index)")
    if data.get("use_bias") is True:
        if raw.get("tie_word_embeddings") is False:
            problems.append(
                (
                    "use_bias",
                    "an untied output head with a bias (use_bias: true) is not modelled",
                    "use_bias: false",
                )
            )
        raw["attention_bias"] = raw["mlp_bias"] = True
        derived.append("attention_bias = mlp_bias = True (use_bias)")


FAMILY = register(
    Family(
        name="ernie4_5_moe",
        model_types=("ernie4_5_moe",),
        layout="llama",
        hf_class="transformers Ernie4_5_MoeConfig",
        stray=DEEPSEEK_MOE_FIELDS,
        alias_wins={"ernie4_5_moe": ("num_experts",)},  # the classes' attribute_map
        renames=_RENAMES,
        defaults={
            "head_dim": Default(
                "Ernie4_5_MoeConfig: hidden_size / num_attention_heads",
                rule=lambda v: v["hidden_size"] // v["num_attention_heads"],
                needs=("hidden_size", "num_attention_heads"),
            ),
            "num_key_value_heads": Default("Ernie4_5_MoeConfig default", value=4),
            "tie_word_embeddings": Default("Ernie4_5_MoeConfig default", value=True),
            "n_routed_experts": Default("Ernie4_5_MoeConfig moe_num_experts default", value=64),
            "num_experts_per_tok": Default("Ernie4_5_MoeConfig moe_k default", value=6),
            "n_shared_experts": Default(
                "Ernie4_5_MoeConfig moe_num_shared_experts default", value=2
            ),
            "moe_intermediate_size": Default("Ernie4_5_MoeConfig default", value=1536),
            "first_k_dense_replace": Default(
                "Ernie4_5_MoeConfig moe_layer_start_index default", value=1
            ),
            "moe_layer_freq": Default("consecutive MoE layers", value=1, warn=False),
            "topk_method": Default(
                "ERNIE routers pick by a correction bias", value="noaux_tc", warn=False
            ),
        },
        inputs={"use_bias": HFInput("boolean", "biases on every projection and the head")},
        reads=("moe_layer_start_index", "moe_layer_end_index", "moe_layer_interval"),
        irrelevant={
            "moe_norm_min": "a floor of the routing weights' normalisation",
            "moe_use_aux_free": "how the correction bias is trained",
        },
        translate=_translate,
        moe=True,
        archs={"ernie4_5_moe": Arch(correction_bias=True)},
    )
)
