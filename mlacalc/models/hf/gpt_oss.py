"""GPT-OSS (``GptOssConfig``): GQA with biases on q/k/v/o and one attention-sink logit per
head; sliding (``sliding_window``) and full layers alternate; every FFN a MoE of
``num_local_experts`` experts of ``intermediate_size`` with biases, routers with a bias."""

from mlacalc.models.architecture import Arch
from mlacalc.models.hf._layer_types import read_layer_types
from mlacalc.models.registry import DEEPSEEK_MOE_WIDTH_FIELDS, Default, Family, register


def _translate(data, raw, derived, problems) -> None:
    read_layer_types(data, raw, derived, problems, off="sliding_attention", default_interval=2)


FAMILY = register(
    Family(
        name="gpt_oss",
        model_types=("gpt_oss",),
        layout="llama",
        hf_class="transformers GptOssConfig",
        stray=DEEPSEEK_MOE_WIDTH_FIELDS,
        alias_wins={"gpt_oss": ("num_experts",)},  # the classes' attribute_map
        renames={
            "num_experts": "n_routed_experts",
            "num_local_experts": "n_routed_experts",
            "experts_per_token": "num_experts_per_tok",
        },
        defaults={
            "head_dim": Default("GptOssConfig default", value=64),
            "num_key_value_heads": Default("GptOssConfig default", value=8),
            "tie_word_embeddings": Default("GptOssConfig default", value=False),
            "attention_bias": Default("GptOssConfig default", value=True),
            "n_routed_experts": Default("GptOssConfig num_local_experts default", value=128),
            "num_experts_per_tok": Default("GptOssConfig default", value=4),
            "sliding_window": Default("GptOssConfig default", value=128),
            "moe_intermediate_size": Default(
                "GPT-OSS experts use intermediate_size",
                rule=lambda v: v["intermediate_size"],
                needs=("intermediate_size",),
            ),
        },
        translate=_translate,
        moe=True,
        requires_experts=True,
        archs={
            "gpt_oss": Arch(sinks=True, router_bias=True, expert_bias=True, off_pattern="sliding"),
        },
    )
)
