"""Falcon-H1: attention and a Mamba-2 mixer side by side in every layer (``full+mamba``),
against transformers' ``FalconH1ForCausalLM`` on the meta device.

Parameters equal the reference's to the parameter (tiny configs covering every bias and norm
switch, and the shipped Falcon-H1-34B built from its config.json dict with fewer layers);
each layer's cache and state bytes equal the reference cache's after meta forwards of ``S``
tokens (``S`` in 1, 4096, 32768); the Mamba-2 mixer's and the MLP's FLOPs equal
FlopCounterMode on a tiny layer; a mutation suite of the config's fields.
"""

from __future__ import annotations

import pytest

import mlacalc
from mlacalc import ConfigError
from mlacalc.cost.mamba import mamba_shape
from mlacalc.cost.model_step import step_kernels
from mlacalc.models.architecture import layer_pattern
from mlacalc.models.hf import import_hf_config
from mlacalc.models.patterns import layer_pattern as config_pattern

TINY = dict(
    model_type="falcon_h1",
    vocab_size=1000,
    hidden_size=128,
    intermediate_size=256,
    num_hidden_layers=3,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=48,
    mamba_d_ssm=192,
    mamba_n_heads=6,
    mamba_n_groups=2,
    mamba_d_state=16,
    mamba_d_conv=4,
    mamba_chunk_size=32,
    mamba_rms_norm=True,
    attention_bias=True,
    mlp_bias=True,
    mamba_proj_bias=True,
    projectors_bias=True,
)
#: the other switches: no norm weight, no biases, the inner width from mamba_expand, the
#: attention's head width hidden_size / heads
PLAIN = {
    **{k: v for k, v in TINY.items() if k != "head_dim"},
    "mamba_rms_norm": False,
    "attention_bias": False,
    "mlp_bias": False,
    "mamba_proj_bias": False,
    "projectors_bias": False,
    "mamba_d_ssm": None,
    "mamba_n_heads": 8,
}

#: tiiuae/Falcon-H1-34B-Instruct's config.json as the shipped YAML states it
# (mlacalc/data/models/falcon-h1-34b.yaml; the muP multipliers change no count)
FALCON_H1_34B = dict(
    model_type="falcon_h1",
    vocab_size=261120,
    hidden_size=5120,
    intermediate_size=21504,
    num_hidden_layers=72,
    num_attention_heads=20,
    num_key_value_heads=4,
    head_dim=128,
    mamba_d_ssm=4096,
    mamba_n_heads=32,
    mamba_d_head=128,
    mamba_n_groups=2,
    mamba_d_state=256,
    mamba_d_conv=4,
    mamba_chunk_size=128,
    mamba_expand=2,
    mamba_conv_bias=True,
    mamba_proj_bias=False,
    projectors_bias=False,
    mamba_rms_norm=False,
    mamba_norm_before_gate=False,
    attention_bias=False,
    mlp_bias=False,
    tie_word_embeddings=False,
    max_position_embeddings=262144,
    embedding_multiplier=5.656854249492381,
    key_multiplier=0.0078125,
    attention_out_multiplier=0.9375,
    mlp_multipliers=[0.8838834764831844, 0.5859375],
    ssm_multipliers=[0.3535533905932738, 0.25, 0.1767766952966369, 0.5, 0.3535533905932738],
)

SEQ_LENS = (1, 4096, 32768)  # meta forwards of one layer: fast


def _ref():
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    import hf_reference_2 as ref

    return ref


@pytest.mark.parametrize("data", [TINY, PLAIN], ids=["biases-norm", "plain"])
def test_tiny_params_and_state_equal_reference(data):
    """Every layer full+mamba; parameters and each layer's cache after 1 and 300 tokens."""
    ref = _ref()
    from mlacalc.models.patterns import cache_spec

    m = import_hf_config(dict(data))
    pattern = layer_pattern(m)
    assert pattern.describe() == "3 layers: 3 full+mamba; FFN: 3 dense"
    meta = ref.build(dict(data))
    assert mlacalc.param_counts(m).total == ref.param_count(meta)
    spec = cache_spec(m)
    raw = cache_spec(dict(data))  # the config.json's own spellings give the same state
    assert config_pattern(dict(data)) == pattern == config_pattern(m)
    assert (raw.conv_elements, raw.state_elements) == (spec.conv_elements, spec.state_elements)
    for seq_len in (1, 300):
        per_layer = ref.cache_bytes(meta, seq_len)
        ours = [spec.layer_bytes(k, seq_len, convention="hf") for k in pattern.layers]
        assert [b for _, b in per_layer] == ours
        assert mlacalc.kv_cache_bytes(m, seq_len) == sum(ours)


def test_mixer_and_mlp_flops_equal_reference():
    """The Mamba-2 mixer of a Falcon-H1 layer (the reference's torch path) and its MLP under
    FlopCounterMode equal the cost's Mamba-2 group and the step's FFN kernels of one layer
    (the reference's chunk-mixing product and the convolution's discarded outputs added, as
    for Bamba's mixer: tests/test_cost_mamba.py)."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from torch.utils.flop_counter import FlopCounterMode
    from transformers import AutoModelForCausalLM, FalconH1Config

    m = import_hf_config(dict(TINY))
    torch.manual_seed(0)
    config = FalconH1Config(**{k: v for k, v in TINY.items() if k != "model_type"})
    model = AutoModelForCausalLM.from_config(config).float().eval()
    q = 100
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(input_ids=torch.zeros(1, q, dtype=torch.long), use_cache=True)
    counts = counter.get_flop_counts()
    seen = sum(counts["FalconH1ForCausalLM.model.layers.0.mamba"].values())
    cost = mlacalc.attention_cost(m, "prefill", q)
    assert cost.group_labels == ("full", "mamba")
    mamba = cost.groups[1]
    s = mamba_shape(m)
    discarded = 2 * s.conv_dim * s.conv_kernel * (s.conv_kernel - 1)
    assert seen == mamba.flops // mamba.layers + s.reference_mixing_flops(q) + discarded
    mlp = sum(counts["FalconH1ForCausalLM.model.layers.0.feed_forward"].values())
    ffn = [k for k in step_kernels(m, "prefill", q) if k.name.startswith("dense_ffn")]
    assert mlp == sum(k.flops for k in ffn if k.kind == "gemm")  # per call: one layer
    assert all(k.calls == m.num_hidden_layers for k in ffn)
    names = [k.name for k in step_kernels(m, "decode", 300, 2)]
    assert {"attention", "mamba_in_proj", "mamba_state_update", "mamba_out_proj"} <= set(names)


def test_flagship_params_equal_reference():
    """Falcon-H1-34B as shipped: its YAML equals the config.json dict's import, and two
    layers of it equal the reference's to the parameter; the whole model's total is the
    reference's one- and two-layer builds extended to 72 layers."""
    ref = _ref()
    shipped = mlacalc.load_model("falcon-h1-34b")
    imported = import_hf_config(dict(FALCON_H1_34B))
    total = mlacalc.param_counts(shipped).total
    assert total == mlacalc.param_counts(imported).total
    one, two = (
        ref.param_count(ref.build({**FALCON_H1_34B, "num_hidden_layers": n})) for n in (1, 2)
    )
    assert mlacalc.param_counts(shipped.with_changes(num_hidden_layers=2)).total == two
    assert total == one + 71 * (two - one) == 33_642_221_312
    assert round(total / 1e9) == 34  # the model card's 34B


@pytest.mark.parametrize("seq_len", SEQ_LENS)
def test_flagship_layer_cache_equals_reference(seq_len):
    """A Falcon-H1-34B layer holds the reference cache's bytes: keys and values of 4 heads of
    128 per token and the Mamba-2 state (conv window over 4,096 + 2 x 2 x 256 channels, 32
    float32 matrices of 128 x 256)."""
    ref = _ref()
    from mlacalc.models.patterns import cache_spec

    m = mlacalc.load_model("falcon-h1-34b")
    per_layer = ref.cache_bytes(ref.build({**FALCON_H1_34B, "num_hidden_layers": 1}), seq_len)
    kind = layer_pattern(m).layers[0]
    assert per_layer[0][1] == cache_spec(m).layer_bytes(kind, seq_len, convention="hf")
    state = (4096 + 2 * 2 * 256) * 4 * 2 + 32 * 128 * 256 * 4
    assert mlacalc.kv_cache_bytes(m, seq_len) == 72 * (seq_len * 2 * 4 * 128 * 2 + state)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"projectors_bias": True}, "projectors_bias"),
        ({"mamba_d_ssm": 202}, "mamba_d_ssm"),
        ({"mamba_d_head": 16}, "mamba_d_head"),
        ({"mamba_d_ssm": None, "mamba_expand": 0}, "mamba_expand"),
        ({"mamba_d_ssm": "wide"}, "mamba_d_ssm"),
        ({"mamba_n_groups": 3}, "mamba_n_groups"),
    ],
)
def test_refusals_name_the_field(change, field):
    data = {**PLAIN, **change}
    with pytest.raises(ConfigError, match=field) as info:
        import_hf_config(data)
    assert "\n" not in str(info.value)


def test_mutated_fields_load_or_name_the_field():
    """Every field of the flagship's config.json mutated: a model whose counts evaluate, or
    one line naming the field (the pattern of tests/test_families_hybrid_mutation.py)."""
    pytest.importorskip("hypothesis")
    from hypothesis import given
    from hypothesis import strategies as st
    from test_families_hybrid_mutation import _check, _names
    from test_models_config_mutation import DELETE, MUTATIONS, SETTINGS

    base = {**FALCON_H1_34B, "num_hidden_layers": 4}

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
            names = _names(field, "falcon_h1")
            if field in ("mamba_d_ssm", "mamba_n_heads", "mamba_expand", "hidden_size"):
                names |= {"mamba_d_ssm", "mamba_expand", "mamba_d_head", "mamba_head_dim"}
            _check(data, names)

    run()


def test_training_costs_refuse_the_side_by_side_layers():
    """Training costs do not build a Mamba-2 mixer beside the attention: refused by name, never
    counted as attention alone."""
    from mlacalc.words.errors import InvalidArgumentError

    with pytest.raises(InvalidArgumentError, match=r"full\+mamba"):
        mlacalc.training_cost("falcon-h1-34b")


def test_conversion_to_mla_refuses_the_side_by_side_layers():
    from mlacalc.models.convert import conversion_refusal

    assert "Mamba-2 mixer beside the attention" in conversion_refusal(
        mlacalc.load_model("falcon-h1-34b")
    )


def test_absent_kv_heads_take_the_class_default_and_null_means_one_per_query_head():
    """FalconH1Config: an absent num_key_value_heads is 8, an explicit null is the head count."""
    base = {
        "model_type": "falcon_h1",
        "hidden_size": 1024,
        "num_hidden_layers": 2,
        "num_attention_heads": 16,
        "vocab_size": 1000,
        "intermediate_size": 2048,
    }
    assert mlacalc.import_hf_config(dict(base)).num_key_value_heads == 8
    assert mlacalc.import_hf_config({**base, "num_key_value_heads": None}).num_key_value_heads == 16
