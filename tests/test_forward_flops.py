"""The whole model's forward FLOPs per token (``mlacalc.cost.forward``) against PyTorch.

A tiny decoder is built here from the reference attention layers (``mlacalc.bench.
torch_layers``) and plain ``nn.Linear`` FFNs, routers, experts and head; one token is decoded
over a cache of ``S - 1`` tokens and ``FlopCounterMode`` counts its matrix products, which must
equal the weights' and attention's parts exactly (the element-wise part is what it does not
count). The weights' part of a plain model is 2 x its active parameters less its norms'.
"""

from __future__ import annotations

import json

import pytest

import mlacalc
from mlacalc.cost.forward import forward_flops_per_token
from mlacalc.cost.params import layer_norms, param_counts

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

from mlacalc.bench.torch_layers import layer_for_model  # noqa: E402

F = nn.functional


pytestmark = pytest.mark.usefixtures("torch_one_thread")  # tiny tensors: one thread


def _tiny(name: str, **changes):
    """A shipped model's layout, tiny: 48 wide, 4 heads, 4 routed experts (2 a token) of 16,
    a vocabulary of 100, and ``changes``."""
    return mlacalc.load_model(name).with_changes(
        hidden_size=48,
        num_attention_heads=4,
        n_routed_experts=4,
        num_experts_per_tok=2,
        moe_intermediate_size=16,
        vocab_size=100,
        **changes,
    )


def tiny_gqa_moe():
    """Mixtral's layout (GQA, every layer MoE, no shared expert), tiny."""
    return _tiny(
        "mixtral-8x7b", num_key_value_heads=2, head_dim=8, num_hidden_layers=2, intermediate_size=16
    )


def tiny_mla_moe():
    """DeepSeek-V3's layout (MLA, a first dense layer, MoE with a shared expert), tiny; its 8
    routing groups do not split 4 experts, so one group (no limit: the FLOPs do not see it)."""
    return _tiny(
        "deepseek-v3",
        n_group=1,
        topk_group=1,
        num_key_value_heads=4,
        kv_lora_rank=32,
        q_lora_rank=24,
        qk_nope_head_dim=16,
        qk_rope_head_dim=8,
        v_head_dim=12,
        num_hidden_layers=3,
        first_k_dense_replace=1,
        n_shared_experts=1,
        intermediate_size=40,
    )


class SwiGLU(nn.Module):
    def __init__(self, d, f):
        super().__init__()
        self.gate, self.up, self.down = nn.Linear(d, f, False), nn.Linear(d, f, False), None
        self.down = nn.Linear(f, d, False)

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))


class MoE(nn.Module):
    """A router, top-k of the routed experts run on the token, and the shared experts."""

    def __init__(self, m):
        super().__init__()
        d, f = m.hidden_size, m.moe_intermediate_size
        self.k = m.num_experts_per_tok
        self.router = nn.Linear(d, m.n_routed_experts, False)
        self.experts = nn.ModuleList(SwiGLU(d, f) for _ in range(m.n_routed_experts))
        self.shared = SwiGLU(d, f * m.n_shared_experts) if m.n_shared_experts else None

    def forward(self, x):
        weights, chosen = self.router(x).softmax(-1).topk(self.k, dim=-1)
        out = sum(w * self.experts[int(e)](x) for w, e in zip(weights[0, 0], chosen[0, 0]))
        return out + (self.shared(x) if self.shared is not None else 0)


class Decoder(nn.Module):
    def __init__(self, m):
        super().__init__()
        one = m.with_changes(num_hidden_layers=1, first_k_dense_replace=0)
        dense = m.first_k_dense_replace or 0
        self.attn = nn.ModuleList(layer_for_model(one) for _ in range(m.num_hidden_layers))
        self.ffn = nn.ModuleList(
            SwiGLU(m.hidden_size, m.intermediate_size) if i < dense else MoE(m)
            for i in range(m.num_hidden_layers)
        )
        self.norm = nn.RMSNorm(m.hidden_size)
        self.head = nn.Linear(m.hidden_size, m.vocab_size, False)

    def forward(self, x, caches, start):
        out = []
        for attn, ffn, cache in zip(self.attn, self.ffn, caches):
            h, cache = attn(
                self.norm(x), cache, start=start, mode="causal" if start == 0 else "dense"
            )
            x = x + h
            x = x + ffn(self.norm(x))
            out.append(cache)
        return self.head(self.norm(x)[:, -1:]), out


@pytest.mark.parametrize("make", [tiny_gqa_moe, tiny_mla_moe], ids=["gqa-moe", "mla-moe"])
@pytest.mark.parametrize("S", [1, 33])
def test_forward_flops_equal_flopcountermode(make, S):
    m = make()
    torch.manual_seed(0)
    model = Decoder(m)
    d = m.hidden_size
    caches = [None] * m.num_hidden_layers
    with torch.no_grad():
        if S > 1:  # the S - 1 tokens before, cached by the model itself
            _, caches = model(torch.randn(1, S - 1, d), caches, 0)
        with FlopCounterMode(display=False) as counter:
            model(torch.randn(1, 1, d), caches, S - 1)
    f = forward_flops_per_token(m, S)
    assert f.weight_flops + f.attention == counter.get_total_flops()
    assert f.weights["experts"] > 0 and f.weights["head"] == 2 * d * m.vocab_size
    assert f.elementwise > 0 and f.total == f.weight_flops + f.attention + f.elementwise


def test_weights_part_is_two_active_params_of_a_plain_model():
    """Llama-3-8B: every weight but the norms' multiplies the token once; attention's part at
    4,096 keys is layers x (QK^T + PV) x heads x head_dim x keys x 2."""
    m = mlacalc.load_model("llama-3-8b")
    f = forward_flops_per_token(m, 4096)
    n_norms, norm_weights = layer_norms(m)
    norms = m.num_hidden_layers * n_norms * norm_weights + m.hidden_size
    assert f.weight_flops == 2 * (param_counts(m).active - norms)
    assert f.attention == 32 * 2 * 2 * 32 * 128 * 4096
    # a DeepSeek-V3 token: its weights' part is 2 x its 37 B active parameters to 0.01%
    v3 = forward_flops_per_token("deepseek-v3", 131072)
    assert v3.weight_flops == pytest.approx(2 * param_counts("deepseek-v3").active, rel=1e-4)
    assert v3.impl == "absorbed" and v3.weights["experts"] > v3.weights["dense"] > 0


def test_hyper_connections_weights_are_other():
    """DeepSeek-V4-Pro: its hyper-connections' products with their weights (each ``mhc_pre``'s
    with ``hc_fn``, and ``hc_head``) are the ``other`` part, about 2 x their parameters (less
    the biases and scales, which multiply nothing: 0.01%), and the weights' products come to
    2 x the active parameters within 0.1% (97.53 G without them, 0.19% short)."""
    m = mlacalc.load_model("deepseek-v4-pro")
    f = forward_flops_per_token(m, 4096)
    pc = param_counts(m)
    hyper = pc.breakdown["hyper_connections"]
    assert f.weights["other"] == pytest.approx(2 * hyper, rel=1e-3)
    assert f.weights["other"] > 100 * 229_376  # more than hc_head's product alone
    assert f.weight_flops == pytest.approx(2 * pc.active, rel=1e-3)
    # what mhc_pre and mhc_post do besides (mixes by weights computed from the streams)
    assert f.elementwise > 0


def test_report_and_compare_give_the_whole_model(run):
    doc = json.loads(run("report", "llama-3-8b", "--seq-len", "4k", "--format", "json")[0])
    f = doc["forward_flops_per_token"]
    assert f == forward_flops_per_token("llama-3-8b", 4096).to_dict()
    assert f["seq_len"] == 4096 and f["total_flops"] == (
        f["weight_flops"] + f["attention_flops"] + f["elementwise_flops"]
    )
    text = run("report", "llama-3-8b", "--seq-len", "4k", "--format", "markdown")[0]
    assert "### Forward FLOPs per token, whole model, at seq_len 4,096" in text
    assert f"| total | {f['total_flops']:,} |" in text
    rows = json.loads(
        run("compare", "llama-3-8b", "deepseek-v3", "--seq-len", "4k", "--format", "json")[0]
    )
    v3 = forward_flops_per_token("deepseek-v3", 4096)
    assert rows[1]["forward_flops_per_token"] == v3.total
    assert rows[1]["forward_attention_flops_per_token"] == v3.attention
    _, err = run("report", "llama-3-8b", "--seq-len", "0", code=2)
    assert "seq" in err


def _forward_note(run, *argv):
    text = run("report", *argv, "--seq-len", "4k", "--format", "markdown")[0]
    return text[text.index("### Forward FLOPs") :].split("one token's", 1)[1].split("\n\n")[0]


def test_report_forward_note_is_the_models_own(run):
    """The forward table's note names the keys of the model's own layer kinds (no window nor
    DSA for Llama-3-70B), and says when --impl asks for another MLA implementation than the
    absorbed decode it counts."""
    plain = _forward_note(run, "llama-3-70b")
    assert "window" not in plain and "DSA" not in plain and "Mamba" not in plain
    assert "--impl" not in plain
    assert "sliding layer's window" in _forward_note(run, "gpt-oss-120b")
    dsa = _forward_note(run, "deepseek-v3.2")
    assert "DSA layer's top-k" in dsa and "window" not in dsa
    assert "Mamba layer's state update" in _forward_note(run, "falcon-h1-34b")
    naive = _forward_note(run, "deepseek-v3", "--impl", "naive")
    assert "--impl naive does not apply here" in naive and "absorbed MLA" in naive
    assert "--impl" not in _forward_note(run, "deepseek-v3", "--impl", "absorbed")


def test_the_public_name_is_the_same_count():
    """``mlacalc.forward_flops_per_token`` (exported, loaded on first use) is this module's."""
    import mlacalc
    from mlacalc.cost.forward import forward_flops_per_token

    assert mlacalc.forward_flops_per_token is forward_flops_per_token
    f = mlacalc.forward_flops_per_token("deepseek-v3", seq_len=4096)
    assert f.total == f.weight_flops + f.attention + f.elementwise
    assert abs(f.weight_flops / (2 * mlacalc.param_counts("deepseek-v3").active) - 1) < 1e-3
