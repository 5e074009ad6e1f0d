"""MiMo-V2-Flash (``mimo_v2_flash``) against transformers' ``MiMoV2Flash`` on the ``meta`` device.

Parameters equal the reference to the parameter (the class defaults, which are the shipped
model's, with ``--runslow``; reduced configs by default, with biases, all-full and all-sliding
patterns); the cache after a meta forward of ``S`` tokens equals ``cache_spec`` in the
reference's convention and ``kv_cache_bytes`` in the engine's; one full and one sliding
``MiMoV2FlashAttention`` (value heads narrower than the query/key heads, sinks in the sliding
one) equal ``attention_cost`` under ``FlopCounterMode``; bad input is refused naming the field.
"""

from __future__ import annotations

from functools import lru_cache

import pytest

import mlacalc
from mlacalc import MlacalcError
from mlacalc.models.patterns import cache_spec, layer_pattern
from mlacalc.models.schema import model_from_dict
from mlacalc.models.tensors import tensors

PUBLISHED_TOTAL = 308_778_780_864  # MiMoV2FlashForCausalLM(MiMoV2FlashConfig()) on meta

_SMALL = dict(
    vocab_size=100,
    hidden_size=64,
    intermediate_size=96,
    num_hidden_layers=7,
    num_attention_heads=8,
    num_key_value_heads=2,
    head_dim=24,
    v_head_dim=16,
    moe_intermediate_size=32,
    n_routed_experts=4,
    num_experts_per_tok=2,
    sliding_window=5,
)


def _torch():
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    return torch, transformers


def _count(model) -> int:
    seen: set[int] = set()
    total = 0
    for value in model.state_dict(keep_vars=True).values():
        if id(value) not in seen:
            seen.add(id(value))
            total += value.numel()
    return total


@lru_cache(maxsize=8)
def _reference(**changes):
    torch, transformers = _torch()
    lists = {k: list(v) if isinstance(v, tuple) else v for k, v in changes.items()}
    config = transformers.MiMoV2FlashConfig(**{**_SMALL, **lists})  # lists: hashable as tuples
    with torch.device("meta"):
        model = transformers.MiMoV2FlashForCausalLM._from_config(config, dtype=torch.bfloat16)
    return config, model


def test_the_shipped_model():
    model = mlacalc.load_model("mimo-v2-flash")
    assert mlacalc.param_counts(model).total == PUBLISHED_TOTAL
    assert layer_pattern(model).describe() == (
        "48 layers: 9 full + 39 sliding(129); FFN: 1 dense + 47 MoE"
    )
    names = {t.name: t.shape for t in tensors(model)}
    assert names["model.layers.0.self_attn.v_proj.weight"] == (4 * 128, 4096)
    assert names["model.layers.1.self_attn.k_proj.weight"] == (8 * 192, 4096)
    assert names["model.layers.1.self_attn.v_proj.weight"] == (8 * 128, 4096)
    assert names["model.layers.1.self_attn.o_proj.weight"] == (4096, 64 * 128)
    assert names["model.layers.1.self_attn.sinks"] == (64,)
    assert "model.layers.0.self_attn.sinks" not in names  # full layers have none


@pytest.mark.slow
def test_published_parameters_equal_the_reference():
    torch, transformers = _torch()
    config = transformers.MiMoV2FlashConfig()
    with torch.device("meta"):
        reference = transformers.MiMoV2FlashForCausalLM(config)
    assert _count(reference) == PUBLISHED_TOTAL
    model = mlacalc.import_hf_config(config.to_dict())
    assert mlacalc.param_counts(model).total == PUBLISHED_TOTAL
    shipped = mlacalc.load_model("mimo-v2-flash")
    assert mlacalc.kv_cache_bytes(model, 32768) == mlacalc.kv_cache_bytes(shipped, 32768)


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"attention_bias": True},
        {"layer_types": ["full_attention"] * 7},
        {"layer_types": ["sliding_attention"] * 7},
        {"mlp_layer_types": ["dense"] * 3 + ["sparse"] * 4, "num_key_value_heads": 4},
    ],
    ids=["defaults", "bias", "all-full", "all-sliding", "dense-lead"],
)
def test_reduced_parameters_equal_the_reference(changes):
    config, reference = _reference(
        **{k: tuple(v) if isinstance(v, list) else v for k, v in changes.items()}
    )
    model = mlacalc.import_hf_config(config.to_dict())
    assert mlacalc.param_counts(model).total == _count(reference)


@pytest.mark.parametrize(
    "seq_len",
    [1, pytest.param(4096, marks=pytest.mark.slow), pytest.param(32768, marks=pytest.mark.slow)],
)
def test_cache_bytes_equal_the_reference(seq_len):
    torch, _ = _torch()
    # dense layers (the meta device cannot route experts); layers 1 and 6 full, 5 sliding
    config, reference = _reference(mlp_layer_types=("dense",) * 7)
    ids = torch.zeros(1, seq_len, dtype=torch.long, device="meta")
    with torch.no_grad():
        cache = reference(input_ids=ids, use_cache=True).past_key_values
    held = sum(
        t.nbytes
        for layer in cache.layers
        for t in vars(layer).values()
        if isinstance(t, torch.Tensor) and t.dim() >= 2
    )
    raw = config.to_dict()
    pattern = layer_pattern(raw)
    assert sum(cache_spec(raw).model_bytes(pattern, seq_len, convention="hf").values()) == held
    ours = mlacalc.import_hf_config(raw)
    assert mlacalc.kv_cache_bytes(ours, seq_len) == sum(
        cache_spec(raw).model_bytes(pattern, seq_len).values()
    )
    assert mlacalc.kv_cache_bytes(ours, seq_len) == sum(
        cache_spec(ours).model_bytes(layer_pattern(ours), seq_len).values()
    )


def test_cache_rows_by_kind():
    model = mlacalc.load_model("mimo-v2-flash")
    by_kind = {k: (n, t, b) for k, n, t, b in mlacalc.kv_cache(model, 4096).by_kind}
    assert by_kind["full"] == (9, 4096, 9 * 4096 * 4 * (192 + 128) * 2)
    assert by_kind["sliding(129)"] == (39, 129, 39 * 129 * 8 * (192 + 128) * 2)


def test_attention_layers_match_flopcounter():
    """A full and a sliding MiMoV2FlashAttention (eager, 8 tokens) under FlopCounterMode: the
    q, k, v, o products and the two core products, K at head_dim and V at v_head_dim. The
    eager reference multiplies every (query, key) pair and masks; the product counts the pairs
    a window keeps, so the sliding layer differs by exactly the masked pairs' products. The
    sinks add a logit per head to the softmax: no product."""
    torch, transformers = _torch()
    from torch.utils.flop_counter import FlopCounterMode  # deferred: torch is optional
    from transformers.models.mimo_v2_flash import modeling_mimo_v2_flash as hf

    config = transformers.MiMoV2FlashConfig(
        **{**_SMALL, "num_hidden_layers": 2}, layer_types=["full_attention", "sliding_attention"]
    )
    config._attn_implementation = "eager"
    s, n_h, d_h, d_v = 8, 8, 24, 16
    x, pos = torch.zeros(1, s, 64), torch.arange(s)[None]
    reference = []
    for i in range(2):
        layer = hf.MiMoV2FlashAttention(config, i)
        cos, sin = hf.MiMoV2FlashRotaryEmbedding(config)(x, pos, config.layer_types[i])
        with FlopCounterMode(display=False) as counter:
            layer(x, (cos, sin), attention_mask=None)
        reference.append(counter.get_total_flops())
    model = mlacalc.import_hf_config(config.to_dict())
    ours = {
        k["kind"]: k
        for k in mlacalc.attention_cost(model, phase="prefill", seq_len=s).to_dict()["by_kind"]
    }
    assert ours["full"]["flops"] == reference[0]
    kept = ours["sliding(5)"]["pairs_per_head"]
    assert kept == s * 5
    assert ours["sliding(5)"]["flops"] + 2 * n_h * (s * s - kept) * (d_h + d_v) == reference[1]


def test_decode_flops_use_both_widths():
    model = mlacalc.load_model("mimo-v2-flash")
    cost = mlacalc.attention_cost(model, phase="decode", seq_len=4096, batch=1)
    groups = dict(zip(cost.group_labels, cost.groups))
    full, sliding = groups["full"], groups["sliding(129)"]
    d, n_h = 4096, 64
    assert full.stage_flops["kv_proj"] == 9 * 2 * d * 4 * (192 + 128)
    assert sliding.stage_flops["kv_proj"] == 39 * 2 * d * 8 * (192 + 128)
    assert full.stage_flops["core"] == 9 * 2 * n_h * 4096 * (192 + 128)
    assert sliding.stage_flops["core"] == 39 * 2 * n_h * 129 * (192 + 128)
    assert full.stage_flops["o_proj"] == 9 * 2 * n_h * 128 * d


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"v_head_dim": -1}, "v_head_dim"),
        ({"v_head_dim": 0}, "v_head_dim"),
        ({"v_head_dim": None}, "v_head_dim"),
        ({"v_head_dim": "128"}, "v_head_dim"),
        ({"layer_types": ["full_attention"] * 6}, "layer_types"),
        ({"layer_types": ["chunked_attention"] * 7}, "layer_types"),
        ({"layer_types": "full_attention"}, "layer_types"),
        ({"mlp_layer_types": ["sparse", "dense"] + ["sparse"] * 5}, "mlp_layer_types"),
        ({"mlp_layer_types": ["dense"] * 3}, "mlp_layer_types"),
        ({"sliding_window_size": -3}, "sliding_window_size"),
        ({"sliding_key_value_heads": 3}, "sliding_key_value_heads"),
        ({"head_dim": -192}, "head_dim"),
    ],
)
def test_bad_input_is_refused_by_name(change, field):
    data = {"model_type": "mimo_v2_flash", **_SMALL, **change}
    with pytest.raises(MlacalcError) as err:
        mlacalc.import_hf_config(data)
    assert field in str(err.value) and "\n" not in str(err.value)


def test_other_families_refuse_the_new_fields():
    base = mlacalc.load_model("llama-3-8b").to_dict()
    for key, value in (("v_head_dim", 64), ("sliding_key_value_heads", 8)):
        with pytest.raises(MlacalcError) as err:
            model_from_dict({**base, key: value}, "mutation")
        assert key in str(err.value) and "\n" not in str(err.value)


def test_yaml_mutations_name_the_field():
    base = mlacalc.load_model("mimo-v2-flash").to_dict()
    for key, value in (
        ("v_head_dim", -128),
        ("sliding_key_value_heads", 0),
        ("sliding_key_value_heads", 7),
        ("full_attention_layers", [0, 6]),
    ):
        with pytest.raises(MlacalcError) as err:
            model_from_dict({**base, key: value}, "mutation")
        assert key in str(err.value) and "\n" not in str(err.value)


def test_step_kernels_carry_both_widths_and_sinks_per_kind():
    from mlacalc.cost.model_step import step_kernels

    model = mlacalc.load_model("mimo-v2-flash")
    cores = [
        k
        for k in step_kernels(model, "decode", seq_len=4096, batch=8)
        if k.kind == "attention_decode"
    ]
    shapes = {k.calls: k.shape for k in cores}
    assert set(shapes) == {9, 39}
    assert (shapes[9]["n_kv"], shapes[9]["window"], shapes[9]["sinks"]) == (4, 0, 0)
    assert (shapes[39]["n_kv"], shapes[39]["window"], shapes[39]["sinks"]) == (8, 129, 1)
    assert all(s["head_dim_qk"] == 192 and s["head_dim_v"] == 128 for s in shapes.values())
    # the core reads K at 192 and V at 128 per cached token and KV head
    full = next(k for k in cores if k.calls == 9)
    assert full.flops == 8 * 2 * 64 * 4096 * (192 + 128)


def test_kv_rows_per_gpu_follow_each_kinds_heads():
    from mlacalc.serving.layout import Layout, kv_bytes_per_token_per_gpu
    from mlacalc.words.dtypes import resolve_kv_layout

    model, bf16 = mlacalc.load_model("mimo-v2-flash"), resolve_kv_layout("bf16")
    for tp, full, sliding in ((1, 4, 8), (2, 2, 4), (8, 1, 1)):
        lay = Layout(gpus=tp, tp=tp, dp=1, pp=1, ep=tp, dp_attention=False, moe_group=tp, moe_tp=1)
        expected = (9 * full + 39 * sliding) * (192 + 128) * 2
        assert kv_bytes_per_token_per_gpu(model, bf16, lay) == expected


def test_variants_and_conversion_say_what_they_assume():
    from mlacalc.models.convert import conversion_refusal
    from mlacalc.models.variants import as_variant, one_head_shape_note

    model = mlacalc.load_model("mimo-v2-flash")
    gqa = as_variant(model, "gqa", num_key_value_heads=8)  # 4: the model itself
    assert gqa.v_head_dim == 128 and gqa.sliding_key_value_heads is None
    assert "sliding layers have their own KV heads" in one_head_shape_note(model)
    every_layer_full = model.with_changes(sliding_window=None, full_attention_layers=())
    assert "value heads" in conversion_refusal(every_layer_full)


def test_without_a_window_the_sliding_layers_are_refused_not_dropped():
    """sliding_window null would turn the 39 sliding layers into full ones of 4 KV heads and
    no sinks (another model's parameters and cache): refused naming the field. And convert
    names what stops it, not the window (whose removal is refused in turn)."""
    data = {**mlacalc.load_model("mimo-v2-flash").to_dict(), "sliding_window": None}
    data.pop("name", None)
    with pytest.raises(MlacalcError) as err:
        model_from_dict(data, "mimo.yaml")
    assert "field 'sliding_window'" in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(MlacalcError) as err:
        mlacalc.convert("mimo-v2-flash", to="mla", kv_lora_rank=512)
    assert "value heads or sliding layers" in str(err.value) and "sliding_window" not in str(
        err.value
    )
