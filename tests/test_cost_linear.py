"""Linear-attention layers (Qwen3-Next's Gated DeltaNet, Kimi Linear's Kimi Delta Attention):
FLOPs against the Hugging Face layers under FlopCounterMode, the step's kernels, card figures,
refusals and load speed.

FlopCounterMode counts matrix products and convolutions. The reference's delta rule also
has work it cannot see: Gated DeltaNet's unit triangular solves (``solve_triangular``), and
Kimi Delta Attention's decayed ``k k^T`` / ``q k^T`` products (element-wise products summed)
and the inverse it builds by forward substitution in a Python loop; its recurrent form (one
token after a context) is element-wise throughout. Each of these is rewritten here as
matrix products, checked equal to the reference's expression on random data, and counted
by FlopCounterMode: the independent route for that part.
"""

from __future__ import annotations

import json

import pytest
from reference_data import HF_CONFIGS

import mlacalc
from mlacalc.cost.linear import LINEAR_CHUNK, linear_shape
from mlacalc.models.architecture import layer_pattern
from mlacalc.words.errors import ConfigError

NEXT = HF_CONFIGS / "qwen3-next-80b-a3b-thinking.config.json"
KIMI = HF_CONFIGS / "kimi-linear-48b-a3b.config.json"
C = LINEAR_CHUNK

# tiny linear layers: (h_k, h_v, d_k, d_v) for Gated DeltaNet, (H, D) for KDA; d = 64, K = 4
TINY_NEXT = dict(
    hidden_size=64,
    num_hidden_layers=1,
    linear_num_key_heads=2,
    linear_num_value_heads=4,
    linear_key_head_dim=8,
    linear_value_head_dim=6,
    linear_conv_kernel_dim=4,
)
TINY_KIMI = dict(
    hidden_size=64,
    num_hidden_layers=1,
    linear_num_key_heads=4,
    linear_num_value_heads=4,
    linear_key_head_dim=8,
    linear_value_head_dim=8,
    linear_conv_kernel_dim=4,
)


def _model(path, tiny):
    return mlacalc.load_model(path).with_changes(**tiny)


def _ours(model, phase, seq_len, batch):
    cost = mlacalc.attention_cost(model, phase, seq_len, batch)
    assert cost.group_labels == ("linear",)
    return cost.flops


# ------------------------------------------------------------------ the reference layers


def _hf_layer(kind, tiny):
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    torch.manual_seed(0)
    if kind == "next":
        from transformers.models.qwen3_next import modeling_qwen3_next as mod
        from transformers.models.qwen3_next.configuration_qwen3_next import Qwen3NextConfig

        cfg = Qwen3NextConfig(
            **{k: v for k, v in tiny.items() if k != "num_hidden_layers"},
            num_hidden_layers=4,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=16,
        )
        return cfg, mod.Qwen3NextGatedDeltaNet(cfg, 0).float()
    from transformers.models.kimi_linear import modeling_kimi_linear as mod
    from transformers.models.kimi_linear.configuration_kimi_linear import KimiLinearConfig

    cfg = KimiLinearConfig(
        hidden_size=tiny["hidden_size"],
        linear_num_heads=tiny["linear_num_value_heads"],
        linear_head_dim=tiny["linear_value_head_dim"],
        linear_conv_kernel_dim=tiny["linear_conv_kernel_dim"],
        num_hidden_layers=4,
    )
    return cfg, mod.KimiLinearDeltaAttention(cfg, 0).float()


def _counted(fn):
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        fn()
    return counter.get_total_flops()


def _forward_substitution(lower, rhs):
    """``solve_triangular(lower, rhs, unitriangular=True)`` as one product per row."""
    out = rhs.clone()
    for i in range(1, lower.shape[-1]):
        out[..., i, :] = rhs[..., i, :] - (lower[..., i : i + 1, :i] @ out[..., :i, :])[..., 0, :]
    return out


def _inverse_by_rows(attn):
    """Kimi's forward-substitution loop (``row + (row[:, None] * sub).sum(-2)``) as products."""
    attn = attn.clone()
    for i in range(1, attn.shape[-1]):
        row = attn[..., i : i + 1, :i].clone()
        attn[..., i, :i] = (row + row @ attn[..., :i, :i])[..., 0, :]
    return attn


def test_rewrites_equal_the_reference_expressions():
    """The matrix-product rewrites compute what the reference's expressions compute."""
    torch = pytest.importorskip("torch")
    torch.manual_seed(1)
    lower = torch.randn(3, 16, 16).tril(-1) * 0.1
    rhs = torch.randn(3, 16, 5)
    solve = torch.linalg.solve_triangular(
        lower + torch.eye(16), rhs, upper=False, unitriangular=True
    )
    assert torch.allclose(_forward_substitution(lower, rhs), solve, atol=1e-5)
    attn = torch.randn(3, 16, 16).tril(-1) * 0.1
    ref = attn.clone()
    for i in range(1, 16):  # the reference's loop, as written in modeling_kimi_linear
        row = ref[..., i, :i].clone()
        sub = ref[..., :i, :i].clone()
        ref[..., i, :i] = row + (row.unsqueeze(-1) * sub).sum(-2)
    assert torch.allclose(_inverse_by_rows(attn), ref, atol=1e-6)
    # Kimi's decayed k_beta k^T: per-channel decay folded into the operands
    k_beta, key, g = torch.randn(3, 16, 8), torch.randn(3, 16, 8), -torch.rand(3, 16, 8).cumsum(1)
    decay = (g.unsqueeze(-2) - g.unsqueeze(-3)).exp()
    ref = (k_beta.unsqueeze(-2) * key.unsqueeze(-3) * decay).sum(-1)
    ours = (k_beta * g.exp()) @ (key * (-g).exp()).transpose(-1, -2)
    assert torch.allclose(ours, ref, rtol=1e-4, atol=1e-4)


def _solves_flops(groups, d_k, d_v):
    """FlopCounterMode's count of Gated DeltaNet's two unit triangular solves of a chunk."""
    torch = pytest.importorskip("torch")
    lower = torch.zeros(groups, C, C)
    return _counted(lambda: _forward_substitution(lower, torch.zeros(groups, C, d_v))) + _counted(
        lambda: _forward_substitution(lower, torch.zeros(groups, C, d_k))
    )


def _kda_unseen_flops(groups, d):
    """FlopCounterMode's count of Kimi's decayed k k^T and q k^T and its inverse by rows."""
    torch = pytest.importorskip("torch")
    a, b = torch.zeros(groups, C, d), torch.zeros(groups, C, d)
    products = 2 * _counted(lambda: a @ b.transpose(-1, -2))
    return products + _counted(lambda: _inverse_by_rows(torch.zeros(groups, C, C)))


@pytest.mark.parametrize("tokens", [5, 64, 70])
def test_gated_deltanet_prefill_matches_flop_counter(tokens):
    """Qwen3-Next's linear layer, prefill of ``tokens`` from nothing (batch 2): FlopCounterMode
    on the reference layer plus the solves it cannot see, less the ``K - 1`` convolution
    outputs per sequence the reference computes and discards, equals mlacalc's FLOPs."""
    torch = pytest.importorskip("torch")
    cfg, layer = _hf_layer("next", TINY_NEXT)
    batch = 2
    x = torch.randn(batch, tokens, cfg.hidden_size)
    seen = _counted(lambda: layer(x))
    s = linear_shape(_model(NEXT, TINY_NEXT))
    chunks = -(-tokens // C)
    unseen = _solves_flops(batch * s.v_heads * chunks, s.d_k, s.d_v)
    discarded = 2 * batch * s.conv_dim * s.conv_kernel * (s.conv_kernel - 1)
    assert seen + unseen - discarded == _ours(_model(NEXT, TINY_NEXT), "prefill", tokens, batch)


@pytest.mark.parametrize("tokens", [5, 70])
def test_kimi_delta_prefill_matches_flop_counter(tokens):
    """Kimi Linear's KDA layer, prefill (batch 2): FlopCounterMode on the reference layer plus
    its einsum-free products and inverse, less the discarded convolution outputs."""
    torch = pytest.importorskip("torch")
    cfg, layer = _hf_layer("kimi", TINY_KIMI)
    batch = 2
    x = torch.randn(batch, tokens, cfg.hidden_size)
    seen = _counted(lambda: layer(x))
    s = linear_shape(_model(KIMI, TINY_KIMI))
    assert s.kind == "kimi_delta"
    chunks = -(-tokens // C)
    unseen = _kda_unseen_flops(batch * s.v_heads * chunks, s.d_k)
    discarded = 2 * batch * s.conv_dim * s.conv_kernel * (s.conv_kernel - 1)
    assert seen + unseen - discarded == _ours(_model(KIMI, TINY_KIMI), "prefill", tokens, batch)


def _recurrent_step(state, q, k, v, decay, beta):
    """One token of the delta rule with the state as products: read against the key, the
    rank-one update, read against the query (``state``: [G, d_k, d_v]; ``decay`` per head
    ([G, 1, 1]) or per channel ([G, d_k, 1]))."""
    state = state * decay
    kv_mem = k.unsqueeze(-2) @ state  # [G, 1, d_v]
    delta = (v.unsqueeze(-2) - kv_mem) * beta[..., None, None]
    state = state + k.unsqueeze(-1) @ delta
    return state, (q.unsqueeze(-2) @ state)[..., 0, :]


@pytest.mark.parametrize("kind", ["next", "kimi"])
def test_recurrent_form_equals_reference_and_is_counted(kind):
    """Decode runs the recurrent form, element-wise in the reference (FlopCounterMode sees
    nothing): the product rewrite equals the reference's step, its FlopCounterMode count is
    ``6 d_k d_v`` per value head, and a reference decode step with a cache (its projections
    and convolution, two convolution outputs of which one is kept) plus that count equals
    mlacalc's decode FLOPs."""
    torch = pytest.importorskip("torch")
    from transformers.cache_utils import DynamicCache

    tiny = TINY_NEXT if kind == "next" else TINY_KIMI
    path = NEXT if kind == "next" else KIMI
    cfg, layer = _hf_layer(kind, tiny)
    s = linear_shape(_model(path, tiny))
    b, h, dk, dv = 2, s.v_heads, s.d_k, s.d_v
    torch.manual_seed(2)
    q, k = torch.nn.functional.normalize(torch.randn(2, b, 1, h, dk), dim=-1)
    v, beta = torch.randn(b, 1, h, dv), torch.rand(b, 1, h)
    g = -torch.rand(b, 1, h) if kind == "next" else -torch.rand(b, 1, h, dk)
    state = torch.randn(b, h, dk, dv)
    if kind == "next":
        from transformers.models.qwen3_next.modeling_qwen3_next import (
            torch_recurrent_gated_delta_rule as rule,
        )

        decay = g[:, 0].exp()[..., None, None]
    else:
        from transformers.models.kimi_linear.modeling_kimi_linear import (
            recurrent_kimi_delta_attention as rule,
        )

        decay = g[:, 0].exp()[..., None]
    ref_out, ref_state = rule(q, k, v, g=g, beta=beta, initial_state=state, output_final_state=True)
    scale = dk**-0.5
    args = (state, q[:, 0] * scale, k[:, 0], v[:, 0], decay, beta[:, 0])
    new_state, out = _recurrent_step(*args)
    assert torch.allclose(new_state, ref_state, atol=1e-5)
    assert torch.allclose(out, ref_out[:, 0], atol=1e-5)
    core = _counted(lambda: _recurrent_step(*args))
    assert core == b * h * 6 * dk * dv

    cache = DynamicCache(config=cfg)
    x = torch.randn(b, 7, cfg.hidden_size)
    layer(x, cache_params=cache)
    step = _counted(lambda: layer(torch.randn(b, 1, cfg.hidden_size), cache_params=cache))
    extra_conv_output = 2 * b * s.conv_dim * s.conv_kernel
    assert step - extra_conv_output + core == _ours(_model(path, tiny), "decode", 8, b)


# ------------------------------------------------------------------ whole models


@pytest.mark.parametrize("path", [NEXT, KIMI], ids=["qwen3-next", "kimi-linear"])
@pytest.mark.parametrize("phase,q_len", [("prefill", None), ("decode", None), ("chunk", 512)])
def test_step_kernels_sum_to_the_cost(path, phase, q_len):
    """The step's kernels carry exactly the attention cost's matmul FLOPs, linear layers
    included, and the linear layers' state moves as memory (read and written per step)."""
    from mlacalc.cost.model_step import kernel_stage, step_kernels

    m = mlacalc.load_model(path)
    cost = mlacalc.attention_cost(m, phase, 8192, 4, q_len=q_len)
    kernels = step_kernels(m, phase, 8192, 4, q_len=q_len)
    attention = {"q_proj", "kv_proj", "kv_up", "absorb", "core", "o_proj"}
    total = sum(
        k.flops * k.calls
        for k in kernels
        if kernel_stage(k.name) in attention and not k.name.startswith("indexer")
    )
    assert total == cost.flops
    s = linear_shape(m)
    state = 4 * 4 * s.state_elements  # batch 4, float32
    kimi = s.kind == "kimi_delta"
    name = "linear_core_state" if kimi and phase != "decode" else "linear_core"
    core = next(k for k in kernels if k.name == name)
    assert core.bytes >= 2 * state if phase != "prefill" else core.bytes >= state
    assert core.calls == layer_pattern(m).counts()["linear"]
    names = {k.name for k in kernels if k.name.startswith("linear_core")}
    if phase == "decode":  # the recurrent form: three state products per token and head
        assert names == {"linear_core"}
        assert core.flops == 4 * 6 * s.v_heads * s.d_k * s.d_v
    elif kimi:  # no measured kernel: the reference's products
        assert names == {"linear_core_qk", "linear_core_inverse", "linear_core_apply"} | {
            "linear_core_state",
            "linear_core_pv",
        }
    else:  # Gated DeltaNet: the engines' one chunked kernel, with the whole chunked count
        assert names == {"linear_core"} and core.kind == "elementwise"
        assert core.flops == 4 * s.core_flops(8192 if phase == "prefill" else q_len, False)


def test_kimi_pattern_cache_and_cards():
    """Kimi Linear (KimiLinearConfig defaults): every fourth layer from the fifth is MLA
    without RoPE, the others KDA; the card's 48B is the transformer blocks without the
    embedding and output head (48.38B; 49.13B with them), 3B active (3.12B)."""
    m = mlacalc.load_model(KIMI)
    assert layer_pattern(m).describe() == (
        "27 layers: 21 linear + 6 mla no-rope; FFN: 1 dense + 26 MoE"
    )
    assert m.full_attention_layers == (5, 9, 13, 17, 21, 25)
    p = mlacalc.param_counts(m)
    assert p.total == 49_133_081_120
    tables = p.breakdown["embedding"] + p.breakdown["lm_head"]
    assert round((p.total - tables) / 1e9, 2) == 48.38
    assert int(p.active / 1e9) == 3
    # 21 fixed states (3 convolution windows of 4 x 4096 bf16, 32 float32 128 x 128 states)
    # and 6 MLA latents of 576 bf16 per token
    state = 3 * 4096 * 4 * 2 + 32 * 128 * 128 * 4
    assert mlacalc.kv_cache_bytes(m, 4096) == 21 * state + 6 * 4096 * 576 * 2


def test_kimi_checkpoint_layer_lists():
    """The checkpoint's linear_attn_config (1-based full_attn_layers / kda_layers) is read
    as transformers reads it; lists that do not share out the layers are refused by name."""
    data = json.loads(KIMI.read_text())
    data.pop("layer_types")
    kda = [i for i in range(1, 28) if i not in (4, 8, 12, 16, 20, 24, 27)]
    lin = {"full_attn_layers": [4, 8, 12, 16, 20, 24, 27], "kda_layers": kda, "num_heads": 16}
    m = mlacalc.models.loading.import_hf_config({**data, "linear_attn_config": lin})
    assert layer_pattern(m).counts() == {"linear": 20, "mla no-rope": 7}
    assert m.linear_num_value_heads == m.linear_num_key_heads == 16
    bad = {**lin, "kda_layers": kda[:-1]}
    with pytest.raises(ConfigError, match="linear_attn_config"):
        mlacalc.models.loading.import_hf_config({**data, "linear_attn_config": bad})
    with pytest.raises(ConfigError, match="mlp_layer_types"):
        mlacalc.models.loading.import_hf_config(
            {**data, "mlp_layer_types": ["sparse", "dense"] * 13}
        )


@pytest.mark.parametrize("name", ["qwen3-next-80b-a3b", "kimi-linear-48b-a3b"])
def test_shipped_report_and_plan(name):
    """The shipped YAMLs load, report FLOPs by kind, predict a time and plan."""
    from mlacalc.report import model_report

    m = mlacalc.load_model(name)
    cost = mlacalc.attention_cost(m, "decode", 32768, 8)
    assert "linear" in cost.group_labels
    rep = model_report(m)
    assert rep is not None
    for scope in ("attention_layer", "model"):
        t = mlacalc.predict_time(m, "h100-sxm", "decode", 32768, batch=8, scope=scope)
        assert t.seconds > 0
    prefill = mlacalc.predict_time(m, "h100-sxm", "prefill", 8192, scope="model")
    assert prefill.seconds > t.seconds
    p = mlacalc.plan(m, "h100-sxm", gpus=8, seq_len=131072)
    assert p is not None


def test_gated_full_layer_matches_flop_counter():
    """A Qwen3-Next full layer: its q_proj also yields the output gate (``q_gate_proj``);
    FlopCounterMode on the reference attention (eager, every (query, key) pair) equals the
    full layers' FLOPs of a 4-layer model (3 linear + 1 full)."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from transformers.models.qwen3_next import modeling_qwen3_next as mod
    from transformers.models.qwen3_next.configuration_qwen3_next import Qwen3NextConfig

    dims = dict(hidden_size=64, num_attention_heads=4, num_key_value_heads=2, head_dim=16)
    cfg = Qwen3NextConfig(**dims, num_hidden_layers=4, attn_implementation="eager")
    layer = mod.Qwen3NextAttention(cfg, 3).float().eval()
    rotary = mod.Qwen3NextRotaryEmbedding(cfg)
    batch, tokens = 2, 9
    x = torch.randn(batch, tokens, 64)
    pos = rotary(x, torch.arange(tokens)[None].expand(batch, -1))
    seen = _counted(lambda: layer(x, pos, None))
    m = _model(NEXT, {**TINY_NEXT, **dims, "num_hidden_layers": 4})
    cost = mlacalc.attention_cost(m, "prefill", tokens, batch)
    assert cost.group_labels == ("full", "linear")
    assert seen == cost.groups[0].flops
    assert cost.groups[0].stage_flops["q_proj"] == 2 * batch * tokens * 64 * 2 * 64


def test_kimi_mla_layer_matches_flop_counter():
    """A Kimi Linear full layer is MLA without RoPE (the reference still splits the
    RoPE-width key part and caches it): FlopCounterMode on the reference attention
    (eager, prefill from nothing) equals the MLA layers' FLOPs (expanded heads)."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from transformers.models.kimi_linear import modeling_kimi_linear as mod
    from transformers.models.kimi_linear.configuration_kimi_linear import KimiLinearConfig

    dims = dict(
        hidden_size=64,
        num_attention_heads=4,
        num_key_value_heads=4,
        kv_lora_rank=16,
        qk_nope_head_dim=8,
        qk_rope_head_dim=4,
        v_head_dim=8,
    )
    cfg = KimiLinearConfig(**dims, num_hidden_layers=5, attn_implementation="eager")
    layer = mod.KimiLinearAttention(cfg, 4).float().eval()
    batch, tokens = 2, 9
    x = torch.randn(batch, tokens, 64)
    seen = _counted(lambda: layer(x, None))
    m = _model(KIMI, {**TINY_KIMI, **dims, "num_hidden_layers": 5, "full_attention_layers": [5]})
    cost = mlacalc.attention_cost(m, "prefill", tokens, batch, impl="naive")
    assert cost.group_labels == ("mla no-rope", "linear")
    assert seen == cost.groups[0].flops


def test_fields_that_change_no_figure_of_the_reference():
    """Qwen3-Next with attention_bias: the gated q_proj's bias is twice the query width, as
    the reference holds it (4 layers, 16 experts, meta device). Kimi Linear's reference
    places MoE layers by mlp_layer_types and always keeps the correction bias, so a
    config.json's moe_layer_freq or topk_method changes nothing."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from transformers.models.qwen3_next import modeling_qwen3_next as mod
    from transformers.models.qwen3_next.configuration_qwen3_next import Qwen3NextConfig

    data = json.loads(NEXT.read_text())
    data.update(attention_bias=True, num_hidden_layers=4, num_experts=16)
    cfg = Qwen3NextConfig(**{k: v for k, v in data.items() if k != "model_type"})
    with torch.device("meta"):
        reference = mod.Qwen3NextForCausalLM(cfg)
    ours = mlacalc.param_counts(mlacalc.models.loading.import_hf_config(dict(data))).total
    assert ours == sum(p.numel() for p in reference.parameters())
    kimi = json.loads(KIMI.read_text())
    changed = mlacalc.models.loading.import_hf_config(
        {**kimi, "moe_layer_freq": 2, "topk_method": "x"}
    )
    assert mlacalc.param_counts(changed).total == 49_133_081_120


@pytest.mark.parametrize("name", ["qwen3-next-80b-a3b", "kimi-linear-48b-a3b"])
def test_attention_variants_of_a_model_with_linear_layers(name):
    """The same model with its full layers as MHA, GQA, MQA or MLA (the app's side-by-side
    table): the linear layers stay, an MLA version has no query gate."""
    from mlacalc.models.variants import as_variant
    from mlacalc.report import compare_rows
    from mlacalc.words.vocab import VARIANTS

    m = mlacalc.load_model(name)
    rows = compare_rows(
        [as_variant(m, v) for v in VARIANTS], seq_len=4096, batch=2, kv_dtype="bf16"
    )
    assert len(rows) == len(VARIANTS)
    for v in VARIANTS:
        cost = mlacalc.attention_cost(as_variant(m, v), "decode", 4096, 2)
        assert cost.group_labels[-1] == "linear" and cost.flops > cost.groups[-1].flops


def test_unfused_mode_is_refused_for_linear_layers():
    """The eager op-by-op sequence of a linear layer is not modelled: refused naming mode."""
    with pytest.raises(mlacalc.InvalidArgumentError, match="mode"):
        mlacalc.predict_time("kimi-linear-48b-a3b", "h100-sxm", "decode", 4096, mode="unfused")


def test_plan_splits_linear_state_by_heads():
    """Under tensor parallelism a rank keeps the state of its own linear heads: Qwen3-Next on
    TP8 holds 2 of 16 key heads and 4 of 32 value heads per linear layer (convolution
    channels, 3 columns of the 4-tap window as the engines keep them, and 128 x 128 float32
    states), and one of its two KV heads per full layer."""
    p = mlacalc.plan("qwen3-next-80b-a3b", "h100-sxm", gpus=8, seq_len=131072)
    assert p.tp == 8
    linear = (2 * 2 * 128 + 4 * 128) * 3 * 2 + 4 * 128 * 128 * 4
    full = 131072 * 2 * 256 * 2  # K and V of one KV head, bf16
    assert p.kv_bytes_per_sequence_per_gpu == 36 * linear + 12 * full
    assert p.kv_bytes_per_token_per_gpu == 12 * 2 * 256 * 2


@pytest.mark.parametrize("kind", ["next", "kimi"])
def test_chunk_after_a_context_matches_flop_counter(kind):
    """A chunk of 5 tokens after 7 (batch 2), through the reference cache: the chunked form
    from the cached state. The reference convolves its kept window and the new columns with
    padding, ``2 K - 1`` outputs per channel more than the ``q`` it keeps (not counted)."""
    torch = pytest.importorskip("torch")
    from transformers.cache_utils import DynamicCache

    tiny, path = (TINY_NEXT, NEXT) if kind == "next" else (TINY_KIMI, KIMI)
    cfg, layer = _hf_layer(kind, tiny)
    s = linear_shape(_model(path, tiny))
    batch, past, new = 2, 7, 5
    cache = DynamicCache(config=cfg)
    layer(torch.randn(batch, past, cfg.hidden_size), cache_params=cache)
    seen = _counted(lambda: layer(torch.randn(batch, new, cfg.hidden_size), cache_params=cache))
    if kind == "next":
        unseen = _solves_flops(batch * s.v_heads, s.d_k, s.d_v)
    else:
        unseen = _kda_unseen_flops(batch * s.v_heads, s.d_k)
    discarded = 2 * batch * s.conv_dim * s.conv_kernel * (2 * s.conv_kernel - 1)
    cost = mlacalc.attention_cost(_model(path, tiny), "chunk", past + new, batch, q_len=new)
    assert cost.impl == "chunked"
    assert seen + unseen - discarded == cost.flops
