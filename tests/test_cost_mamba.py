"""Mamba-2 state-space layers (Nemotron-H's mixer): FLOPs against the Hugging Face layer under
FlopCounterMode, the step's kernels, the state, the model cards and the loader's rules.

FlopCounterMode counts matrix products and convolutions. Where the reference computes what
the product does not count, the difference is written out and added: the convolution
outputs it computes and discards (``K - 1`` per channel in prefill, ``2 K - 1`` in a chunk
after a context, one in decode) and its chunk-to-chunk product over a ``(c + 1) x (c + 1)``
decay matrix (:meth:`MambaShape.reference_mixing_flops`), where the product counts the state
pass as the element-wise scan a serving kernel runs. Decode's state update is element-wise
in the reference (``state * dA + dB x``); the product counts it as the rank-one product it is
(``2 P N`` per head), so the reference's visible decode core is half the product's.
"""

from __future__ import annotations

import pytest

import mlacalc
from mlacalc.cost.mamba import MAMBA_KERNELS, mamba_shape
from mlacalc.cost.model_step import KERNEL_STAGES, step_kernels
from mlacalc.models.architecture import layer_pattern
from mlacalc.models.hf import import_hf_config
from mlacalc.models.registry import NOT_MODELLED
from mlacalc.words.errors import ConfigError

# a tiny Nemotron-H of one Mamba-2 layer: d 64, 4 heads of 8, 2 groups of state 16, K 4, Q 32
TINY = dict(
    model_type="nemotron_h",
    hidden_size=64,
    vocab_size=96,
    layers_block_type=["mamba"],
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    mamba_num_heads=4,
    mamba_head_dim=8,
    n_groups=2,
    ssm_state_size=16,
    conv_kernel=4,
    chunk_size=32,
    intermediate_size=128,
)


def _tiny_model():
    return import_hf_config(dict(TINY))


def _reference():
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from transformers import AutoModelForCausalLM, NemotronHConfig

    torch.manual_seed(0)
    cfg = NemotronHConfig(**{k: v for k, v in TINY.items() if k != "model_type"})
    # the Mamba-2 layer first; an attention layer after it (the reference's cache needs one)
    cfg.layers_block_type = ["linear_attention", "full_attention"]
    return torch, AutoModelForCausalLM.from_config(cfg).float().eval()


def _counted(fn) -> int:
    """FLOPs FlopCounterMode sees in the first layer's mixer (the Mamba-2 layer)."""
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        fn()
    counts = counter.get_flop_counts()
    return sum(counts["NemotronHForCausalLM.model.layers.0.mixer"].values())


def _ours(phase, seq_len, q_len=None):
    cost = mlacalc.attention_cost(_tiny_model(), phase, seq_len, 1, q_len=q_len)
    assert cost.group_labels == ("mamba",)
    return cost.flops


def test_prefill_flops_equal_reference():
    """A prefill of 100 tokens (4 chunks of 32, the last padded) through the reference."""
    torch, model = _reference()
    s, q = mamba_shape(_tiny_model()), 100
    ids = torch.zeros(1, q, dtype=torch.long)
    with torch.no_grad():
        seen = _counted(lambda: model(input_ids=ids, use_cache=True))
    discarded = 2 * s.conv_dim * s.conv_kernel * (s.conv_kernel - 1)
    assert seen == _ours("prefill", q) + s.reference_mixing_flops(q) + discarded


def test_chunk_and_decode_flops_equal_reference():
    """A chunk of 40 tokens after 100 (initial state passed in), then one decode token."""
    torch, model = _reference()
    s = mamba_shape(_tiny_model())
    with torch.no_grad():
        out = model(input_ids=torch.zeros(1, 100, dtype=torch.long), use_cache=True)
        cache = out.past_key_values
        chunk = torch.zeros(1, 40, dtype=torch.long)
        seen = _counted(lambda: model(input_ids=chunk, past_key_values=cache, use_cache=True))
        discarded = 2 * s.conv_dim * s.conv_kernel * (2 * s.conv_kernel - 1)
        expected = _ours("chunk", 140, q_len=40) + s.reference_mixing_flops(40) + discarded
        assert seen == expected
        one = torch.zeros(1, 1, dtype=torch.long)
        seen = _counted(lambda: model(input_ids=one, past_key_values=cache, use_cache=True))
    core = s.core_flops(1, recurrent=True)
    # the reference's update is element-wise: it shows the read-out (half the product's core)
    visible = _ours("decode", 141) - core // 2 + 2 * s.conv_dim * s.conv_kernel
    assert seen == visible


def test_rank_one_update_equals_reference_expression():
    """The decode update counted as a rank-one product equals the reference's element-wise
    ``state * dA + (dt B) x`` (one head, P x N)."""
    torch = pytest.importorskip("torch")
    torch.manual_seed(2)
    state, x, b = torch.randn(8, 16), torch.randn(8), torch.randn(16)
    dt, a = 0.3, -0.7
    ref = state * torch.exp(torch.tensor(dt * a)) + (dt * b)[None, :] * x[:, None]
    ours = torch.exp(torch.tensor(dt * a)) * state + x[:, None] @ (dt * b)[None, :]
    assert torch.allclose(ours, ref)


def test_step_kernels_carry_the_cost_exactly():
    """The layer's kernels sum to its FLOPs (state pass apart) in prefill and decode, each a
    named Mamba-2 kernel with a stage."""
    m = _tiny_model()
    for phase, seq_len in (("prefill", 100), ("decode", 141)):
        cost = mlacalc.attention_cost(m, phase, seq_len, 3)
        ks = [k for k in step_kernels(m, phase, seq_len, 3) if k.name.startswith("mamba_")]
        assert {k.name for k in ks} <= set(MAMBA_KERNELS)
        assert all(KERNEL_STAGES[k.name] for k in ks)
        gemm = sum(k.flops * k.calls for k in ks if k.kind == "gemm")
        conv = next(k for k in ks if k.name == "mamba_conv")
        assert gemm + conv.flops == cost.flops
    s = mamba_shape(m)
    decode = {k.name: k for k in step_kernels(m, "decode", 141, 3)}
    state = 3 * (s.conv_dim * s.conv_kernel * 2 + s.state_elements * 4)
    assert decode["mamba_state_update"].bytes >= 2 * s.state_elements * 4 * 3
    assert decode["mamba_conv"].bytes >= 2 * 3 * s.conv_dim * s.conv_kernel * 2
    assert mlacalc.kv_cache_bytes(m, 141, 3) == state


def test_state_is_constant_in_context_and_has_both_precisions():
    """A Mamba-2 layer's state does not grow with the context; bf16 state (an engine's
    choice) halves the SSM part."""
    from mlacalc.models.patterns import cache_spec

    m = _tiny_model()
    kind = layer_pattern(m).layers[0]
    spec = cache_spec(m)
    conv = (4 * 8 + 2 * 2 * 16) * 4 * 2  # K columns of x, B and C in bf16
    assert {spec.layer_bytes(kind, s) for s in (1, 4096, 1 << 20)} == {conv + 4 * 8 * 16 * 4}
    assert spec.layer_bytes(kind, 9, state_dtype="bf16") == conv + 4 * 8 * 16 * 2


@pytest.mark.parametrize(
    ("name", "total", "active"),
    [
        ("nemotron-3-super-120b-a12b", 120_668_707_840, 12_233_366_528),
        ("nemotron-3-ultra-550b-a55b", 549_308_993_536, 54_985_101_312),
        ("qwen3.5-122b-a10b", 122_111_526_912, 9_008_449_536),
    ],
)
def test_shipped_flagships_and_cards(name, total, active):
    """The shipped flagships load by name with the reference's parameters (the figures of
    tests/test_families_hybrid.py), and the model cards' figures agree within their rounding:
    Nemotron-3 Super 120B (truncated) and 12B active, Ultra 550B (to two figures) and 55B
    active; Qwen3.5-122B-A10B 122B, its 10B active counting the input embedding as Qwen's
    cards do (9.77B)."""
    counts = mlacalc.param_counts(name)
    assert (counts.total, counts.active) == (total, active)
    billions = counts.total / 1e9
    if name.startswith("nemotron-3-super"):
        assert (int(billions), round(counts.active / 1e9)) == (120, 12)
    elif name.startswith("nemotron-3-ultra"):
        assert (round(billions, -1), round(counts.active / 1e9)) == (550, 55)
    else:
        with_embedding = counts.active + counts.breakdown["embedding"]
        assert (round(billions), round(with_embedding / 1e9)) == (122, 10)


def test_block_list_errors_name_the_field():
    """A block the family does not know, or a list that disagrees with the layers, is one
    error naming the field."""
    with pytest.raises(ConfigError, match="layers_block_type"):
        import_hf_config({**TINY, "layers_block_type": ["mamba", "conv"]})
    with pytest.raises(ConfigError, match="hybrid_override_pattern"):
        import_hf_config(
            {k: v for k, v in TINY.items() if k != "layers_block_type"}
            | {"hybrid_override_pattern": "M*X"}
        )
    with pytest.raises(ConfigError, match="mamba_n_groups"):
        import_hf_config({**TINY, "n_groups": 3})
    with pytest.raises(ConfigError, match="shared_intermediate_size"):  # its schema name
        import_hf_config(
            {
                **TINY,
                "layers_block_type": ["moe"],
                "moe_intermediate_size": 64,
                "moe_shared_expert_intermediate_size": -5,
            }
        )
    with pytest.raises(ConfigError, match="mamba_num_heads"):
        mlacalc.load_model("llama-3-8b").with_changes(mamba_num_heads=4)


# a tiny Bamba: Mamba-2 layers with attention at layers 2 and 5 (0-based), each with an MLP
TINY_BAMBA = dict(
    model_type="bamba",
    hidden_size=64,
    num_hidden_layers=6,
    num_attention_heads=4,
    num_key_value_heads=2,
    intermediate_size=128,
    vocab_size=96,
    attn_layer_indices=[2, 5],
    mamba_n_heads=4,
    mamba_n_groups=2,
    mamba_d_state=16,
    mamba_chunk_size=32,
    mamba_expand=1,
)


def test_bamba_params_state_and_flops_equal_reference():
    """Bamba (a Mamba-2 or attention mixer and an MLP in every layer): parameters, each
    layer's cache after 1 and 300 tokens, and the Mamba-2 layer's prefill FLOPs equal the
    reference's (the same additions as Nemotron-H's mixer)."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    import hf_reference_2 as ref
    from transformers import AutoModelForCausalLM, BambaConfig

    from mlacalc.models.patterns import cache_spec

    m = import_hf_config(dict(TINY_BAMBA))
    pattern = layer_pattern(m)
    assert pattern.describe() == "6 layers: 4 mamba + 2 full; FFN: 6 dense"
    meta = ref.build(dict(TINY_BAMBA))
    assert mlacalc.param_counts(m).total == ref.param_count(meta)
    spec = cache_spec(m)
    for seq_len in (1, 300):
        per_layer = ref.cache_bytes(meta, seq_len)
        ours = [spec.layer_bytes(k, seq_len, convention="hf") for k in pattern.layers]
        assert [b for _, b in per_layer] == ours
        assert mlacalc.kv_cache_bytes(m, seq_len) == sum(ours)
    torch.manual_seed(0)
    config = BambaConfig(**{k: v for k, v in TINY_BAMBA.items() if k != "model_type"})
    model = AutoModelForCausalLM.from_config(config).float().eval()
    from torch.utils.flop_counter import FlopCounterMode

    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(input_ids=torch.zeros(1, 100, dtype=torch.long), use_cache=True)
    seen = sum(counter.get_flop_counts()["BambaForCausalLM.model.layers.0.mamba"].values())
    cost = mlacalc.attention_cost(m, "prefill", 100)
    mamba = cost.groups[cost.group_labels.index("mamba")]
    s = mamba_shape(m)
    discarded = 2 * s.conv_dim * s.conv_kernel * (s.conv_kernel - 1)
    assert seen == mamba.flops // mamba.layers + s.reference_mixing_flops(100) + discarded


def test_bamba_refusals_name_the_field():
    with pytest.raises(ConfigError, match="mamba_expand"):
        import_hf_config({**TINY_BAMBA, "mamba_n_heads": 3})
    with pytest.raises(ConfigError, match="mamba_d_head"):
        import_hf_config({**TINY_BAMBA, "mamba_d_head": 8})
    with pytest.raises(ConfigError, match="attn_layer_indices"):
        import_hf_config({**TINY_BAMBA, "attn_layer_indices": [6]})


TINY_GRANITE = dict(
    model_type="granitemoehybrid",
    hidden_size=64,
    num_hidden_layers=4,
    num_attention_heads=4,
    num_key_value_heads=2,
    intermediate_size=24,
    vocab_size=96,
    layer_types=["mamba", "attention", "mamba", "mamba"],
    mamba_n_heads=4,
    mamba_n_groups=2,
    mamba_d_state=16,
    mamba_chunk_size=32,
    mamba_expand=1,
    shared_intermediate_size=100,
    num_local_experts=6,
)


@pytest.mark.parametrize("experts", [6, 0])
def test_granite_hybrid_params_and_state_equal_reference(experts):
    """Granite 4.0 hybrids: Mamba-2 or attention, then routed experts of intermediate_size
    beside a shared MLP of shared_intermediate_size (not a multiple of it here), or the
    shared MLP alone; parameters, cache and the step's FFN kernels."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    import hf_reference_2 as ref

    from mlacalc.models.patterns import cache_spec

    data = {**TINY_GRANITE, "num_local_experts": experts}
    m = import_hf_config(dict(data))
    meta = ref.build(data)
    assert mlacalc.param_counts(m).total == ref.param_count(meta)
    pattern = layer_pattern(m)
    spec = cache_spec(m)
    per_layer = ref.cache_bytes(meta, 300)
    assert [b for _, b in per_layer] == [
        spec.layer_bytes(k, 300, convention="hf") for k in pattern.layers
    ]
    ks = {k.name: k for k in step_kernels(m, "decode", 300, 2)}
    shared = "shared_experts_up" if experts else "dense_ffn_up"
    assert ks[shared].shape["n"] == 2 * 100 and ks[shared].calls == 4


@pytest.mark.parametrize("model_type", sorted(NOT_MODELLED))
def test_known_unmodelled_types_say_why_without_a_look_alike(model_type, tmp_path):
    """A config of a family known but not modelled is refused with what is missing, never
    with a look-alike to try (before it was modelled: deepseek_v4 is not deepseek_v3)."""
    import json

    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": model_type, "hidden_size": 64}), encoding="utf-8")
    for load in (lambda: mlacalc.load_model(path), lambda: mlacalc.load_model(path.as_posix())):
        with pytest.raises(ConfigError, match="is not modelled") as info:
            load()
        assert "did you mean" not in str(info.value) and model_type in str(info.value)
    with pytest.raises(ConfigError, match="is not modelled"):
        mlacalc.model_from_dict(
            {"model_type": model_type, "name": "x", "source": "y", "hidden_size": 8}
        )


def test_latent_moe_flops_equal_reference():
    """Nemotron-H's MoE block (router, fc1_latent_proj, ungated experts in the latent width,
    fc2_latent_proj, the ungated shared expert) under FlopCounterMode equals the step's FFN
    kernels of one layer."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from torch.utils.flop_counter import FlopCounterMode
    from transformers import NemotronHConfig
    from transformers.models.nemotron_h.modeling_nemotron_h import NemotronHMoE

    tiny = {
        **TINY,
        "layers_block_type": ["moe"],
        "n_routed_experts": 8,
        "num_experts_per_tok": 3,
        "moe_intermediate_size": 48,
        "moe_shared_expert_intermediate_size": 100,
        "moe_latent_size": 40,
    }
    config = NemotronHConfig(**{k: v for k, v in tiny.items() if k != "model_type"})
    torch.manual_seed(0)
    block = NemotronHMoE(config).float().eval()
    for p in block.parameters():
        torch.nn.init.normal_(p, std=0.1)
    tokens = 20
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        block(torch.randn(1, tokens, 64))
    m = import_hf_config(dict(tiny))
    ffn = [k for k in step_kernels(m, "prefill", tokens) if KERNEL_STAGES[k.name] == "ffn"]
    assert {k.name for k in ffn} >= {"router", "moe_latent_in", "routed_experts", "moe_latent_out"}
    ours = sum(k.flops * k.calls for k in ffn if k.kind != "elementwise")
    assert counter.get_total_flops() == ours
