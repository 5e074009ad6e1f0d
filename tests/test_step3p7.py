"""Step-3.7-Flash (``step3p7``) against transformers' ``Step3p7`` on the ``meta`` device.

The published file is the remote code's flat format; the reference is transformers' model
built with those fields as its ``text_config`` (``Step3p7Config(text_config=...)``: given the
flat file itself the wrapper builds its default text config, see docs/model-families.md). The
vision tower and projector are set apart. Parameters of the whole published config equal the
reference's to the parameter; the cache after a meta forward of ``S`` tokens (3 dense layers: full
and sliding ones) equals ``cache_spec`` in the reference's convention (``S`` 4096 by default,
1 and 32768 with ``--runslow``); the per-head gate ``g_proj`` is a ``d -> n_h`` product in the
query stage and a tensor of its own; the class defaults (every layer full) too.
"""

from __future__ import annotations

import json
from functools import lru_cache

import pytest
from reference_data import HF_CONFIGS_2

import mlacalc
from mlacalc import MlacalcError
from mlacalc.models.patterns import cache_spec, layer_pattern
from mlacalc.models.tensors import tensors

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

PATH = HF_CONFIGS_2 / "stepfun-ai--Step-3.7-Flash.config.json"
_TOWER = ("model.vision_model.", "model.multi_modal_projector.")


def _flat(layers: int | None = None) -> dict:
    data = json.loads(PATH.read_text(encoding="utf-8"))
    if layers is not None:
        data["num_hidden_layers"] = layers
        data["layer_types"] = data["layer_types"][:layers]
    return data


@lru_cache(maxsize=2)
def _reference(layers: int | None = None):
    data = {k: v for k, v in _flat(layers).items() if k not in ("model_type", "architectures")}
    config = transformers.Step3p7Config(text_config=data)
    with torch.device("meta"):
        model = transformers.Step3p7ForConditionalGeneration._from_config(
            config, dtype=torch.bfloat16
        )
    seen: set[int] = set()
    total = 0
    for key, value in model.state_dict(keep_vars=True).items():
        if id(value) in seen or key.startswith(_TOWER):
            continue
        seen.add(id(value))
        total += value.numel()
    return model, total


def test_parameters_equal_the_reference():
    model = mlacalc.load_model(PATH)
    assert mlacalc.param_counts(model).total == _reference()[1] == 195_844_508_736


def test_pattern_is_the_published_one():
    model = mlacalc.load_model(PATH)
    assert layer_pattern(model).describe() == (
        "45 layers: 12 full + 33 sliding(512); FFN: 3 dense + 42 MoE"
    )
    assert layer_pattern(model) == layer_pattern(_flat())


@pytest.mark.parametrize(
    "seq_len",
    [pytest.param(1, marks=pytest.mark.slow), 4096, pytest.param(32768, marks=pytest.mark.slow)],
)
def test_cache_bytes_equal_the_reference(seq_len):
    model, _ = _reference(3)  # the dense lead: full, sliding, sliding
    ids = torch.zeros(1, seq_len, dtype=torch.long, device="meta")
    with torch.no_grad():
        cache = model(input_ids=ids, use_cache=True).past_key_values
    held = sum(
        t.nbytes
        for layer in cache.layers
        for t in vars(layer).values()
        if isinstance(t, torch.Tensor) and t.dim() >= 2
    )
    raw = _flat(3)
    pattern = layer_pattern(raw)
    assert sum(cache_spec(raw).model_bytes(pattern, seq_len, convention="hf").values()) == held
    ours = mlacalc.import_hf_config(raw)
    assert mlacalc.kv_cache_bytes(ours, seq_len) == sum(
        cache_spec(raw).model_bytes(pattern, seq_len).values()
    )


def test_class_defaults_equal_the_reference():
    config = transformers.Step3p7TextConfig(num_hidden_layers=5)
    data = {**config.to_dict(), "model_type": "step3p5"}  # the text class's own type
    wrapper = transformers.Step3p7Config(text_config=dict(data))  # it pops model_type
    with torch.device("meta"):
        reference = transformers.Step3p7ForConditionalGeneration(wrapper)
    params = sum(
        v.numel()
        for k, v in reference.state_dict(keep_vars=True).items()
        if not k.startswith(_TOWER)
    )
    model = mlacalc.import_hf_config(data)
    assert mlacalc.param_counts(model).total == params
    assert layer_pattern(model).describe() == "5 layers: 5 full; FFN: 3 dense + 2 MoE"


def test_sweep_refuses_the_gate_it_does_not_hold():
    model = mlacalc.import_hf_config(
        {**transformers.Step3p7TextConfig(num_hidden_layers=2).to_dict(), "model_type": "step3p5"}
    )
    assert not model.full_attention_layers  # every layer full: one kind, yet a gate
    with pytest.raises(MlacalcError, match="g_proj"):
        mlacalc.sweep(model, "attention_flops", seq_len=[1024, 2048])


def test_the_head_gate_is_one_product_a_head():
    model = mlacalc.load_model(PATH)
    d, n_h, d_h = model.hidden_size, model.num_attention_heads, model.head_dim
    names = {t.name: t.shape for t in tensors(model)}
    assert names["model.layers.0.self_attn.g_proj.weight"] == (n_h, d)
    cost = mlacalc.attention_cost(model, phase="prefill", seq_len=64, batch=2)
    gates = [o for o in cost.ops if o.name == "q_gate_proj"]
    assert gates and all(o.flops == 2 * 128 * d * n_h for o in gates)
    query = sum(o.flops for o in cost.ops if o.name == "q_proj")
    assert cost.stage_flops["q_proj"] == 45 * (2 * 128 * d * n_h * d_h + 2 * 128 * d * n_h)
    assert query  # the query's own product is there too


def test_attention_layers_match_flopcounter():
    """One full and one sliding Step3p7Attention (eager, 8 tokens) under FlopCounterMode: q, k,
    v, g and o products and the two core products. The eager reference multiplies every
    (query, key) pair and masks; the product counts the pairs a window keeps, so the sliding
    layer differs by exactly the masked pairs' score and value products."""
    from torch.utils.flop_counter import FlopCounterMode  # deferred: torch is optional
    from transformers.models.step3p7.modeling_step3p7 import (
        Step3p7Attention,
        Step3p7RotaryEmbedding,
    )

    text = transformers.Step3p7TextConfig(
        num_hidden_layers=2,
        hidden_size=64,
        head_dim=16,
        num_attention_heads=4,
        num_key_value_heads=2,
        layer_types=["full_attention", "sliding_attention"],
        sliding_window=4,
        intermediate_size=96,
        vocab_size=100,
        n_routed_experts=4,
        num_experts_per_tok=2,
        moe_intermediate_size=32,
        share_expert_dim=32,
    )
    text._attn_implementation = "eager"
    s, n_h, d_h = 8, 4, 16
    x, pos = torch.zeros(1, s, 64), torch.arange(s)[None]
    reference = []
    for i in range(2):
        layer = Step3p7Attention(text.per_layer_config[i], i)
        cos, sin = Step3p7RotaryEmbedding(text)(x, pos, layer_type=text.layer_types[i])
        with FlopCounterMode(display=False) as counter:
            layer(x, (cos, sin), attention_mask=None)
        reference.append(counter.get_total_flops())
    model = mlacalc.import_hf_config({**text.to_dict(), "model_type": "step3p5"})
    by_kind = mlacalc.attention_cost(model, phase="prefill", seq_len=s).to_dict()["by_kind"]
    ours = {k["kind"]: k for k in by_kind}
    assert ours["full"]["flops"] == reference[0]
    kept = ours["sliding(4)"]["pairs_per_head"]  # 8 x 4: each query's window (not causal)
    assert kept == 32
    assert ours["sliding(4)"]["flops"] + 2 * 2 * n_h * (s * s - kept) * d_h == reference[1]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"num_sliding_attention_heads": 32}, "num_sliding_attention_heads"),
        ({"attention_other_setting": {"num_attention_heads": 32}}, "attention_other_setting"),
        ({"gating": False}, "gating"),
        ({"mlp_bias": True}, "mlp_bias"),
        ({"sparse_attention_config": {"sparse_num_index_heads": 4}}, "sparse_attention_config"),
        ({"use_bidirectional_attention": True}, "use_bidirectional_attention"),
        ({"layer_types": ["minimax_m3_sparse"] * 45}, "layer_types"),
        ({"layer_types": ["full_attention"] * 44}, "layer_types"),
        ({"moe_layers_enum": "a,b"}, "moe_layers_enum"),
        ({"mlp_layer_types": ["sparse", "dense"] + ["sparse"] * 43}, "mlp_layer_types"),
        ({"sliding_window": None}, "sliding_window"),
    ],
)
def test_what_is_not_modelled_is_refused_by_name(change, field):
    data = {**_flat(), **change}
    with pytest.raises(MlacalcError) as err:
        mlacalc.import_hf_config(data)
    assert field in str(err.value) and "\n" not in str(err.value)


def test_legacy_moe_layers_enum_and_mtp_pad_are_read():
    data = _flat()
    data["moe_layers_enum"] = ",".join(str(i) for i in range(5, 45))
    data["layer_types"] = data["layer_types"] + ["full_attention"] * 3
    model = mlacalc.import_hf_config(data)
    assert layer_pattern(model).describe().endswith("FFN: 5 dense + 40 MoE")
    wrapper = transformers.Step3p7Config(
        text_config={k: v for k, v in data.items() if k not in ("model_type", "architectures")}
    )
    assert wrapper.text_config.mlp_layer_types == ["dense"] * 5 + ["sparse"] * 40
    assert len(wrapper.text_config.layer_types) == 45


def test_the_wrapper_given_the_flat_file_builds_its_defaults():
    """Why the reference takes the file's fields as text_config (docs/model-families.md): the
    wrapper given the flat file keeps them on itself and builds its default text config."""
    data = {k: v for k, v in _flat().items() if k != "model_type"}
    text = transformers.Step3p7Config(**data).text_config
    assert text.vocab_size == 128_815 != data["vocab_size"]
    assert set(text.layer_types) == {"full_attention"} and text.sliding_window is None
    own = transformers.Step3p7Config(text_config=data).text_config
    assert own.vocab_size == data["vocab_size"] and own.sliding_window == 512
