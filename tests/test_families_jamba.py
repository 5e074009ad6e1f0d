"""Jamba: Mamba-1 layers (``mamba1``), attention without positional embedding every
``attn_layer_period`` layers, a MoE every ``expert_layer_period`` layers, against transformers'
``JambaForCausalLM`` on the meta device.

Parameters equal the reference's to the parameter (tiny configs covering every switch, and the
shipped Jamba-1.5-Mini built from its config.json dict with fewer layers); each layer's cache
and state bytes equal the reference cache's after meta forwards of ``S`` tokens (``S`` in 1,
4096, 32768); the Mamba-1 mixer's FLOPs equal FlopCounterMode on a tiny layer; refusals name
the field; a mutation run over every field of the config.
"""

from __future__ import annotations

import pytest

import mlacalc
from mlacalc import ConfigError
from mlacalc.cost.mamba1 import Mamba1Shape, mamba1_shape
from mlacalc.cost.model_step import step_kernels
from mlacalc.models.architecture import layer_pattern
from mlacalc.models.hf import import_hf_config
from mlacalc.models.patterns import layer_pattern as config_pattern

TINY = dict(
    model_type="jamba",
    vocab_size=100,
    hidden_size=64,
    intermediate_size=96,
    num_hidden_layers=4,
    num_attention_heads=4,
    num_key_value_heads=2,
    num_experts=4,
    num_experts_per_tok=2,
    expert_layer_period=2,
    expert_layer_offset=1,
    attn_layer_period=4,
    attn_layer_offset=2,
    mamba_d_state=8,
    mamba_d_conv=4,
    mamba_expand=2,
    mamba_dt_rank=5,
)
#: the other switches: the MLP alone, projection biases, no convolution bias, rank auto
OTHER = {
    **TINY,
    "num_experts": 1,
    "mamba_proj_bias": True,
    "mamba_conv_bias": False,
    "mamba_dt_rank": "auto",
    "attn_layer_offset": 0,
    "attn_layer_period": 3,
}

#: ai21labs/AI21-Jamba-1.5-Mini's config.json as the shipped YAML states it
JAMBA_15_MINI = dict(
    model_type="jamba",
    vocab_size=65536,
    hidden_size=4096,
    intermediate_size=14336,
    num_hidden_layers=32,
    num_attention_heads=32,
    num_key_value_heads=8,
    num_experts=16,
    num_experts_per_tok=2,
    expert_layer_period=2,
    expert_layer_offset=1,
    attn_layer_period=8,
    attn_layer_offset=4,
    mamba_d_state=16,
    mamba_d_conv=4,
    mamba_expand=2,
    mamba_dt_rank=256,
    mamba_conv_bias=True,
    mamba_proj_bias=False,
    tie_word_embeddings=False,
    max_position_embeddings=262144,
    use_mamba_kernels=False,
)


def _ref():
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    import hf_reference_2 as ref

    return ref


@pytest.mark.parametrize(
    ("data", "summary"),
    [
        (TINY, "4 layers: 3 mamba1 + 1 full no-rope; FFN: 2 dense + 2 MoE"),
        (OTHER, "4 layers: 2 full no-rope + 2 mamba1; FFN: 4 dense"),
    ],
    ids=["moe", "mlp-biases"],
)
def test_tiny_params_and_state_equal_reference(data, summary):
    """Parameters and each layer's cache after 1 and 300 tokens."""
    ref = _ref()
    from mlacalc.models.patterns import cache_spec

    m = import_hf_config(dict(data))
    pattern = layer_pattern(m)
    assert pattern.describe() == summary
    meta = ref.build(dict(data))
    assert mlacalc.param_counts(m).total == ref.param_count(meta)
    mixer = next(x for x in meta.model.layers if hasattr(x, "mamba")).mamba
    assert mamba1_shape(m).params() == sum(p.numel() for p in mixer.parameters())
    spec = cache_spec(m)
    raw = cache_spec(dict(data))  # the config.json's own spellings give the same state
    assert config_pattern(dict(data)) == pattern == config_pattern(m)
    assert (raw.conv_elements, raw.state_elements) == (spec.conv_elements, spec.state_elements)
    for seq_len in (1, 300):
        per_layer = ref.cache_bytes(meta, seq_len)
        ours = [spec.layer_bytes(k, seq_len, convention="hf") for k in pattern.layers]
        assert [b for _, b in per_layer] == ours
        assert mlacalc.kv_cache_bytes(m, seq_len) == sum(ours)


@pytest.mark.parametrize("q", [37, 64])
def test_mixer_flops_equal_reference(q):
    """The Mamba-1 mixer (the reference's torch path) under FlopCounterMode equals the cost's
    products of one layer: in_proj, the convolution, x_proj, dt_proj, the scan's read-out
    (2 I N a token) and out_proj (the convolution's discarded outputs added: K - 1 per
    channel); the state update is element-wise, apart."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from torch.utils.flop_counter import FlopCounterMode
    from transformers import AutoModelForCausalLM, JambaConfig

    m = import_hf_config(dict(TINY))
    torch.manual_seed(0)
    config = JambaConfig(**{k: v for k, v in TINY.items() if k != "model_type"})
    model = AutoModelForCausalLM.from_config(config).float().eval()
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(input_ids=torch.zeros(1, q, dtype=torch.long), use_cache=True)
    seen = sum(counter.get_flop_counts()["JambaForCausalLM.model.layers.0.mamba"].values())
    cost = mlacalc.attention_cost(m, "prefill", q)
    group = cost.groups[cost.group_labels.index("mamba1")]
    s = mamba1_shape(m)
    discarded = 2 * s.inner * s.conv_kernel * (s.conv_kernel - 1)
    products = sum(o.flops for o in group.ops if o.kind == "matmul")
    assert seen == products + discarded
    assert group.flops == products * group.layers
    update = next(o for o in group.ops if o.name == "mamba1_state_update")
    assert update.flops == 4 * q * s.inner * s.state
    kernels = {k.name: k for k in step_kernels(m, "decode", 300, 2)}
    assert kernels["mamba1_scan"].calls == 3 and kernels["mamba1_x_proj"].kind == "gemm"
    assert kernels["mamba1_x_proj"].shape == {"m": 2, "n": 5 + 2 * 8, "k": 128, "groups": 1}


def test_flagship_params_equal_reference():
    """Jamba-1.5-Mini as shipped equals the config.json dict's import, and 8 and 16 layers of
    it (one period of attention and experts, two) equal the reference's to the parameter; the
    whole model's total is those builds extended to 32 layers: the card's 52B total, 12B
    active."""
    ref = _ref()
    shipped = mlacalc.load_model("jamba-1.5-mini")
    counts = mlacalc.param_counts(shipped)
    assert counts.total == mlacalc.param_counts(import_hf_config(dict(JAMBA_15_MINI))).total
    eight, sixteen = (
        ref.param_count(ref.build({**JAMBA_15_MINI, "num_hidden_layers": n})) for n in (8, 16)
    )
    short = shipped.with_changes(num_hidden_layers=8, full_attention_layers=(5,))
    assert mlacalc.param_counts(short).total == eight
    assert counts.total == eight + 3 * (sixteen - eight) == 51_570_323_328
    assert (round(counts.total / 1e9), round(counts.active / 1e9)) == (52, 12)


@pytest.mark.parametrize("seq_len", [1, 4096, pytest.param(32768, marks=pytest.mark.slow)])
def test_flagship_layer_cache_equals_reference(seq_len):
    """An attention layer and a Mamba-1 layer of Jamba-1.5-Mini hold the reference cache's
    bytes (the reference built with its attention layer first: two layers, one of each kind);
    the whole model's cache is 4 attention layers' K and V plus 28 states."""
    ref = _ref()
    from mlacalc.models.patterns import cache_spec

    m = mlacalc.load_model("jamba-1.5-mini")
    two = {**JAMBA_15_MINI, "num_hidden_layers": 2, "attn_layer_offset": 0}
    per_layer = ref.cache_bytes(ref.build(two), seq_len)
    spec, kinds = cache_spec(m), layer_pattern(m).layers
    full = next(k for k in kinds if k.attention == "full")
    mamba = next(k for k in kinds if k.attention == "mamba1")
    assert [b for _, b in per_layer] == [
        spec.layer_bytes(k, seq_len, convention="hf") for k in (full, mamba)
    ]
    state = 8192 * 4 * 2 + 8192 * 16 * 4
    assert mlacalc.kv_cache_bytes(m, seq_len) == 4 * seq_len * 2 * 8 * 128 * 2 + 28 * state


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"attn_layer_offset": 4}, "attn_layer_offset"),
        ({"expert_layer_offset": 2}, "expert_layer_offset"),
        ({"attn_layer_period": 0}, "attn_layer_period"),
        ({"mamba_expand": 0}, "mamba_expand"),
        ({"mamba_dt_rank": "wide"}, "mamba_dt_rank"),
        ({"mamba_d_state": -3}, "mamba_d_state|ssm_state_size"),
    ],
)
def test_refusals_name_the_field(change, field):
    with pytest.raises(ConfigError, match=field) as info:
        import_hf_config({**TINY, **change})
    assert "\n" not in str(info.value)


def test_mamba1_fields_elsewhere_are_refused():
    with pytest.raises(ConfigError, match="mamba_dt_rank"):
        mlacalc.load_model("llama-3-8b").with_changes(
            mamba_dt_rank=4, mamba_inner_size=64, ssm_state_size=8, mamba_d_conv=4
        )
    with pytest.raises(ConfigError, match="mamba_num_heads"):
        mlacalc.load_model("jamba-1.5-mini").with_changes(mamba_num_heads=4)
    assert Mamba1Shape(64, 128, 8, 5, 4).params() == 29_845


def test_mutated_fields_load_or_name_the_field():
    """Every field of the flagship's config.json mutated: a model whose counts evaluate, or
    one line naming the field (the pattern of tests/test_families_hybrid_mutation.py)."""
    pytest.importorskip("hypothesis")
    from hypothesis import given
    from hypothesis import strategies as st
    from test_families_hybrid_mutation import _check, _names
    from test_models_config_mutation import DELETE, MUTATIONS, SETTINGS

    base = {**JAMBA_15_MINI, "num_hidden_layers": 8}
    related = {
        "mamba_expand": {"mamba_inner_size"},
        "hidden_size": {"mamba_inner_size", "mamba_dt_rank", "head_dim"},
        "num_experts": {"moe_layer_freq", "moe_layer_offset", "num_experts_per_tok"},
        "expert_layer_period": {"expert_layer_offset"},
        "attn_layer_period": {"attn_layer_offset"},
    }

    @SETTINGS
    @given(draw=st.data())
    def run(draw):
        for field in list(base):
            value = draw.draw(MUTATIONS | st.just(DELETE), label=field)
            data = dict(base)
            if value is DELETE:
                data.pop(field)
            else:
                data[field] = value
            _check(data, _names(field, "jamba") | related.get(field, set()))

    run()


def test_decode_flops_equal_reference():
    """One decode token after 20 through the reference cache: the same products (the state's
    read-out ``2 I N``); the reference's convolution over the cached window computes one output
    more than it keeps (``2 I K``), added."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from torch.utils.flop_counter import FlopCounterMode
    from transformers import AutoModelForCausalLM, JambaConfig

    m = import_hf_config(dict(TINY))
    torch.manual_seed(0)
    config = JambaConfig(**{k: v for k, v in TINY.items() if k != "model_type"})
    model = AutoModelForCausalLM.from_config(config).float().eval()
    with torch.no_grad():
        past = model(input_ids=torch.zeros(1, 20, dtype=torch.long), use_cache=True)
        with FlopCounterMode(display=False) as counter:
            model(
                input_ids=torch.zeros(1, 1, dtype=torch.long),
                past_key_values=past.past_key_values,
                use_cache=True,
            )
    seen = sum(counter.get_flop_counts()["JambaForCausalLM.model.layers.0.mamba"].values())
    cost = mlacalc.attention_cost(m, "decode", 21)
    group = cost.groups[cost.group_labels.index("mamba1")]
    s = mamba1_shape(m)
    assert group.impl == "recurrent"
    products = sum(o.flops for o in group.ops if o.kind == "matmul")
    assert seen == products + 2 * s.inner * s.conv_kernel


@pytest.mark.parametrize(("phase", "seq", "batch"), [("prefill", 2048, 1), ("decode", 4096, 64)])
def test_the_selective_scan_streams_its_bytes(phase, seq, batch):
    """Jamba's selective scan (its read-out ``y = C h``, ``tokens x I`` dots of ``N``) is a
    streaming kernel timed near its bytes at the HBM's rate; as a batched GEMM of that many
    ``1 x N`` by ``N x 1`` products the GEMM model had charged each a tile (Jamba-1.5-Mini's
    2K-token prompt on H100: 5.3 s for its 3.5 GiB)."""
    from mlacalc.hardware.catalogue import load_hardware
    from mlacalc.timemodel.kernel_time import predict_kernels

    hw = load_hardware("H100-SXM")
    scan = [k for k in step_kernels("jamba-1.5-mini", phase, seq, batch) if k.name == "mamba1_scan"]
    assert [k.kind for k in scan] == ["elementwise"]
    t = predict_kernels(scan, hw)[0].seconds / scan[0].calls  # the step's calls
    at_hbm = scan[0].bytes / hw.memory_bandwidth_bytes_per_s
    assert at_hbm <= t <= 3 * at_hbm + 20e-6
