"""Conversion to MLA (TransMLA, MHA2MLA): the converted model against a reference conversion built
here in PyTorch on small layers (replicate the key projection, truncated SVD to the rank), its
tensors' sizes, its cache tensors' bytes and FlopCounterMode on its forward pass, split and joint,
expanded and absorbed; and the record, the refusals and every view taking the converted model."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mlacalc
from mlacalc.cost.convert_cost import conversion_cost, reading_notes
from mlacalc.models.convert import conversion_refusal, convert, equivalence_rank
from mlacalc.words.errors import InvalidArgumentError

D, N_H, D_H, L = 64, 4, 16, 2


pytestmark = pytest.mark.usefixtures("torch_one_thread")  # tiny tensors: one thread


def small(n_kv: int) -> mlacalc.ModelConfig:
    return mlacalc.model_from_dict(
        {
            "name": f"tiny-{n_kv}",
            "model_type": "llama",
            "hidden_size": D,
            "num_hidden_layers": L,
            "num_attention_heads": N_H,
            "num_key_value_heads": n_kv,
            "head_dim": D_H,
            "vocab_size": 128,
            "intermediate_size": 96,
            "tie_word_embeddings": False,
        }
    )


def test_llama_3_70b_transmla_record():
    c = convert("llama-3-70b", method="transmla", kv_lora_rank=512)
    m = c.model
    assert (m.kv_lora_rank, m.qk_rope_head_dim, m.qk_nope_head_dim, m.v_head_dim) == (
        512,
        64,
        128,  # TransMLA: the source's head width (64 = d_h - rope before: 448 dims lost)
        128,
    )
    assert m.num_key_value_heads == 64 and m.q_lora_rank is None
    assert (c.source_cache_elements, c.cache_elements) == (2048, 576)
    assert c.equivalence_rank == equivalence_rank("llama-3-70b") == 1984
    assert c.full_rank == 8 * 256 - 64  # 960 position-free key dims + 1,024 value dims
    assert ("kv_lora_rank", None, 512) in c.changes
    # every view takes the converted model
    assert mlacalc.kv_cache_bytes(m, 1) == 576 * 2 * 80
    assert mlacalc.param_counts(m).total > 0
    assert mlacalc.attention_flops(m, "decode", 4096, impl="absorbed") > 0
    assert mlacalc.predict_time(m, "H100", "decode", 4096, batch=8, scope="model").seconds > 0


def test_rope_strategy_changes_no_count():
    base = conversion_cost(convert("llama-2-7b", method="mha2mla", kv_lora_rank=256))
    for s in ("high", "low", "uniform", "2-norm"):
        c = convert("llama-2-7b", method="mha2mla", kv_lora_rank=256, rope_strategy=s)
        cc = conversion_cost(c)
        assert c.rope_strategy == s
        assert (cc.params, cc.flops, cc.cache_bytes_per_token) == (
            base.params,
            base.flops,
            base.cache_bytes_per_token,
        )


@pytest.mark.parametrize(
    ("model", "why"),
    [
        ("gpt2", "no RoPE"),
        ("qwen3-8b", "k_norm"),
        ("gemma-3-1b", "sliding window"),
        ("qwen3-next-80b-a3b", "linear-attention"),
        ("llama-4-scout", "chunked or sliding"),
        ("deepseek-v3", "already MLA"),
        ("nemotron-3-super-120b-a12b", "mamba"),
        ("llama-3.3-nemotron-super-49b", "full/none"),
    ],
)
def test_refusals_name_the_reason(model, why):
    with pytest.raises(InvalidArgumentError, match=why) as err:
        convert(model)
    assert str(err.value).startswith("model: cannot convert to MLA")
    assert "\n" not in str(err.value)


def test_a_falcon_with_alibi_is_refused_for_its_missing_rope():
    """RoPE is the model's (ModelConfig.rope), not its family's: a Falcon with ALiBi has none
    (its positions a bias on the scores), so it is refused where it converted with "RoPE stays
    on one shared 32-wide key"; the same Falcon without ALiBi still converts."""
    falcon = mlacalc.load_model("falcon-7b")
    assert convert(falcon).model.qk_rope_head_dim == 32
    alibi = falcon.with_changes(alibi=True)
    assert "ALiBi, no RoPE" in conversion_refusal(alibi)
    with pytest.raises(InvalidArgumentError, match="ALiBi, no RoPE") as err:
        convert(alibi)
    assert str(err.value).startswith("model: cannot convert to MLA") and "\n" not in str(err.value)


# ---------------------------------------------------------------------------------------------
# the reference conversion in PyTorch


def _reference(torch, n_kv: int, d_c: int, rope: int, svd: str, method: str = "mha2mla"):
    """Weights of a GQA layer converted by hand: the converted tensors and the served form.

    MHA2MLA: the keys replicated to the query heads, ``rope`` dims of each head rotated (the
    shared form keeps the first head's), the other ``D_H - rope`` position-free. TransMLA: an
    orthogonal ``R`` on the ``n_kv D_H`` key dims puts the rotation in its first ``rope``
    (one shared RoPE key); the other ``n_kv D_H - rope`` give each query head a position-free
    key part of ``D_H`` dims, and the query a ``rope``-wide part that meets the shared key, so
    without the truncation the scores are the source's exactly."""
    g = torch.Generator().manual_seed(0)
    wq = torch.randn(D, N_H * D_H, generator=g, dtype=torch.float64)
    wk = torch.randn(D, n_kv * D_H, generator=g, dtype=torch.float64)
    wv = torch.randn(D, n_kv * D_H, generator=g, dtype=torch.float64)
    wo = torch.randn(N_H * D_H, D, generator=g, dtype=torch.float64)
    rep = torch.arange(N_H) // (N_H // n_kv)  # the KV head of each query head
    v_rep = wv.view(D, n_kv, D_H)[:, rep]
    if method == "transmla":
        nope = D_H
        rot, _ = torch.linalg.qr(torch.randn(n_kv * D_H, n_kv * D_H, generator=g, dtype=wk.dtype))
        wk_r = wk @ rot
        w_kr = wk_r[:, :rope]  # the shared RoPE key
        back = rot.T.view(n_kv * D_H, n_kv, D_H)[:, rep]  # (n_kv D_H, n_h, D_H): R^T by head
        k_nope = (wk_r[:, rope:] @ back[rope:].reshape(-1, N_H * D_H)).reshape(D, N_H * D_H)
        q_rope = torch.einsum("dhe,rhe->dhr", wq.view(D, N_H, D_H), back[:rope])
        wq_conv = torch.cat([wq.view(D, N_H, D_H), q_rope], -1).reshape(D, -1)
    else:
        nope = D_H - rope
        k_rep = wk.view(D, n_kv, D_H)[:, rep]  # keys replicated to the query heads
        w_kr = k_rep[:, 0, nope:]  # one shared RoPE key (d x rope)
        k_nope = k_rep[:, :, :nope].reshape(D, N_H * nope)
        wq_conv = wq
    v_all = v_rep.reshape(D, N_H * D_H)

    def trunc(w, r):
        u, s, vh = torch.linalg.svd(w, full_matrices=False)
        return u[:, :r] * s[:r], vh[:r]

    if svd == "joint":
        down, up = trunc(torch.cat([k_nope, v_all], 1), d_c)
        up_k, up_v = up[:, : N_H * nope], up[:, N_H * nope :]
        tensors = [wq_conv, down, w_kr, up, wo]
        key_lat = val_lat = slice(0, d_c)
    else:
        dk, up_k = trunc(k_nope, d_c // 2)
        dv, up_v = trunc(v_all, d_c // 2)
        down = torch.cat([dk, dv], 1)
        tensors = [wq_conv, dk, dv, w_kr, up_k, up_v, wo]
        key_lat, val_lat = slice(0, d_c // 2), slice(d_c // 2, d_c)
    return {
        "tensors": tensors,
        "wq": wq_conv,
        "down": down,
        "w_kr": w_kr,
        "up_k": up_k,
        "up_v": up_v,
        "wo": wo,
        "key_lat": key_lat,
        "val_lat": val_lat,
        "nope": nope,
        "qk": nope + rope,
        "source": (wq, wk, wv, wo, rep),
        "k_nope": k_nope,
        "v_all": v_all,
    }


def _source(torch, r, x):
    """The source GQA layer (no positions) the reference conversion was made from."""
    wq, wk, wv, wo, rep = r["source"]
    t = x.shape[0]
    q = (x @ wq).view(t, N_H, D_H).transpose(0, 1)
    k = (x @ wk).view(t, -1, D_H)[:, rep].transpose(0, 1)
    v = (x @ wv).view(t, -1, D_H)[:, rep].transpose(0, 1)
    p = torch.softmax(q @ k.transpose(1, 2), -1)
    return (p @ v).transpose(0, 1).reshape(t, N_H * D_H) @ wo


def _expanded(torch, r, x):
    """The converted layer run expanded (``naive`` prefill): K and V from the latent."""
    t, nope = x.shape[0], r["nope"]
    q = (x @ r["wq"]).view(t, N_H, r["qk"]).transpose(0, 1)
    c = x @ r["down"]
    kr = x @ r["w_kr"]
    k_nope = (c[:, r["key_lat"]] @ r["up_k"]).view(t, N_H, nope).transpose(0, 1)
    v = (c[:, r["val_lat"]] @ r["up_v"]).view(t, N_H, D_H).transpose(0, 1)
    k = torch.cat([k_nope, kr.expand(N_H, t, -1)], -1)
    p = torch.softmax(q @ k.transpose(1, 2), -1)
    return (p @ v).transpose(0, 1).reshape(t, N_H * D_H) @ r["wo"]


def _absorbed(torch, r, x, cached):
    """The converted layer run absorbed: new tokens ``x`` attend ``cached`` latent rows and
    themselves; W_UK goes into the query and W_UV after the attention."""
    t, nope = x.shape[0], r["nope"]
    q = (x @ r["wq"]).view(t, N_H, r["qk"]).transpose(0, 1)
    c_new = x @ r["down"]
    kr_new = x @ r["w_kr"]
    c = torch.cat([cached[0], c_new])
    kr = torch.cat([cached[1], kr_new])
    r_k = r["up_k"].shape[0]
    w_uk = r["up_k"].view(r_k, N_H, nope).permute(1, 2, 0)  # (n_h, nope, r_k)
    q_lat = q[..., :nope] @ w_uk  # (n_h, t, r_k)
    key = torch.cat([c[:, r["key_lat"]], kr], -1)  # (S, r_k + rope)
    p = torch.softmax(torch.cat([q_lat, q[..., nope:]], -1) @ key.T, -1)
    o_lat = p @ c[:, r["val_lat"]]  # (n_h, t, r_v)
    r_v = r["up_v"].shape[0]
    w_uv = r["up_v"].view(r_v, N_H, D_H).transpose(0, 1)  # (n_h, r_v, d_v)
    return (o_lat @ w_uv).transpose(0, 1).reshape(t, N_H * D_H) @ r["wo"]


CASES = [
    ("transmla", 2, "joint"),
    ("transmla", 2, "split"),
    ("mha2mla", 4, "joint"),
    ("mha2mla", 4, "split"),
]


@pytest.mark.parametrize(("method", "n_kv", "svd"), CASES)
def test_params_and_cache_equal_the_reference_conversion(method, n_kv, svd):
    torch = pytest.importorskip("torch")
    d_c, rope = 24, 4
    conv = convert(small(n_kv), method=method, kv_lora_rank=d_c, rope_dim=rope, svd=svd)
    cc = conversion_cost(conv)
    r = _reference(torch, n_kv, d_c, rope, svd, method)
    assert cc.projection_params == sum(t.numel() for t in r["tensors"])
    served = mlacalc.attention_params(conv.model)
    assert sum(served.values()) == cc.served_projection_params + d_c  # + the latent's norm
    assert cc.source_projection_params == D * N_H * D_H * 2 + 2 * D * n_kv * D_H
    # the cache: the latent rows and the shared RoPE key of 10 tokens, in bf16
    x = torch.randn(10, D, dtype=torch.float64)
    cache = [(x @ r["down"]).bfloat16(), (x @ r["w_kr"]).bfloat16()]
    assert sum(t.nbytes for t in cache) * L == mlacalc.kv_cache_bytes(conv.model, 10)
    assert cc.cache_bytes_per_token == sum(t.nbytes for t in cache) * L // 10


@pytest.mark.parametrize(("method", "n_kv", "svd"), CASES)
@pytest.mark.parametrize(
    ("impl", "phase"), [("naive", "prefill"), ("absorbed", "decode"), ("absorbed", "prefill")]
)
def test_flops_equal_flopcountermode(method, n_kv, svd, impl, phase):
    torch = pytest.importorskip("torch")
    from torch.utils.flop_counter import FlopCounterMode  # deferred: optional extra (torch)

    d_c, rope, s = 24, 4, 12
    conv = convert(small(n_kv), method=method, kv_lora_rank=d_c, rope_dim=rope, svd=svd)
    cc = conversion_cost(conv, phase=phase, seq_len=s, impl=impl)
    r = _reference(torch, n_kv, d_c, rope, svd, method)
    new = s if phase == "prefill" else 1
    x = torch.randn(new, D, dtype=torch.float64)
    old = torch.randn(s - new, D, dtype=torch.float64)
    cached = (old @ r["down"], old @ r["w_kr"])
    with FlopCounterMode(display=False) as fc:
        if impl == "naive":
            _expanded(torch, r, x)
        else:
            _absorbed(torch, r, x, cached)
    assert cc.flops == fc.get_total_flops() * L
    if svd == "joint":
        assert cc.stage_flops == cc.served_stage_flops


@pytest.mark.parametrize("method", ["transmla", "mha2mla"])
def test_absorbed_reference_equals_expanded(method):
    """The reference layers are one layer: absorbed and expanded give the same output."""
    torch = pytest.importorskip("torch")
    r = _reference(torch, 2, 24, 4, "split", method)
    x = torch.randn(7, D, dtype=torch.float64)
    empty = (torch.zeros(0, 24, dtype=torch.float64), torch.zeros(0, 4, dtype=torch.float64))
    # causal masks aside, a full (non-causal) pass: both forms give the same output
    assert torch.allclose(_expanded(torch, r, x), _absorbed(torch, r, x, empty), atol=1e-9)


def test_transmla_same_cache_rank_is_the_full_rank_exact_without_positions():
    """TransMLA's layout (a position-free key part of d_h per query head, the rotation in one
    shared key): the position-free keys and values have rank n_kv 2 d_h - rope, the same-cache
    rank, and the layer converted at that rank (the default) computes the source's output
    where neither has positions (the reference layers have no RoPE: with it, the key
    dimensions moved into the latent lose their rotation and the scores differ; the note says
    so, not "nothing dropped").
    Before: qk_nope_head_dim d_h - rope, full rank n_kv (2 d_h - rope) = 56 below the default
    60, whose 4 extra latent dimensions held nothing."""
    conv = convert(small(2), kv_lora_rank=None, rope_dim=4)
    notes = reading_notes(conversion_cost(conv, "decode", 64, 1))
    assert any(n.startswith("exact without positions, not with RoPE") for n in notes)
    assert not any(n.startswith("nothing dropped") for n in notes)
    torch = pytest.importorskip("torch")
    assert conv.model.qk_nope_head_dim == D_H and conv.model.qk_rope_head_dim == 4
    assert conv.kv_lora_rank == conv.equivalence_rank == conv.full_rank == 2 * 2 * D_H - 4
    r = _reference(torch, 2, conv.full_rank, 4, "joint", "transmla")
    ref = _reference(torch, 2, 200, 4, "joint", "transmla")  # untruncated
    full = torch.cat([ref["up_k"], ref["up_v"]], 1)
    assert torch.linalg.matrix_rank(ref["down"] @ full) == conv.full_rank
    x = torch.randn(9, D, dtype=torch.float64)
    assert torch.allclose(_expanded(torch, r, x), _source(torch, r, x), atol=1e-9)
    cut = _reference(torch, 2, conv.full_rank - 8, 4, "joint", "transmla")
    assert not torch.allclose(_expanded(torch, cut, x), _source(torch, r, x), atol=1e-6)


def test_mha2mla_full_rank_is_the_position_free_projections_rank():
    """MHA2MLA keeps rope dims of each head rotated: the rest, n_kv (2 d_h - rope), is the full
    rank, and the default rank is not above it (an MHA source's is d, below the same-cache
    rank)."""
    torch = pytest.importorskip("torch")
    conv = convert(small(2), method="mha2mla", rope_dim=4)
    assert conv.full_rank == 2 * (2 * D_H - 4) == conv.kv_lora_rank < conv.equivalence_rank
    ref = _reference(torch, 2, 200, 4, "joint", "mha2mla")
    assert torch.linalg.matrix_rank(ref["down"] @ torch.cat([ref["up_k"], ref["up_v"]], 1)) == 56
    mha = convert(small(4), method="mha2mla", rope_dim=4)  # 4 x 28 = 112 dims from d = 64
    assert mha.full_rank == mha.kv_lora_rank == D < mha.equivalence_rank
    assert not any("hold nothing" in n for n in mha.notes)


def test_seed002_transmla_keeps_the_cache_and_rank_is_n_kv_d_h():
    """'without increasing the KV cache size' (at the equivalence rank) and 'its rank is at most
    n_k d_h' (the replicated key projection of Llama-3-70B: 8 x 128 = 1,024)."""
    torch = pytest.importorskip("torch")
    c = convert("llama-3-70b", method="transmla")
    assert mlacalc.kv_cache_bytes(c.model, 4096) == mlacalc.kv_cache_bytes("llama-3-70b", 4096)
    g = torch.Generator().manual_seed(1)
    wk = torch.randn(256, 8 * 16, generator=g, dtype=torch.float64)  # d=256, 8 KV heads of 16
    replicated = wk.view(256, 8, 16)[:, torch.arange(64) // 8].reshape(256, 64 * 16)
    assert torch.linalg.matrix_rank(replicated) == 8 * 16


def test_seed002_joint_svd_is_the_standard_mla_form():
    """Joint SVD is DeepSeek's layer exactly; split needs a block-diagonal up-projection."""
    joint = conversion_cost(convert("llama-2-7b", method="mha2mla", kv_lora_rank=512))
    split = conversion_cost(convert("llama-2-7b", method="mha2mla", kv_lora_rank=512, svd="split"))
    assert joint.projection_params == joint.served_projection_params
    assert split.served_projection_params - split.projection_params == 32 * 256 * (128 + 64)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n_kv=st.sampled_from([1, 2, 4]),
    group=st.sampled_from([1, 2, 4]),
    d_h=st.sampled_from([16, 32, 64, 128]),
    rope_half=st.integers(1, 8),
    rank_half=st.integers(1, 128),  # d_c up to the hidden size 256: past it is refused
    svd=st.sampled_from(["joint", "split"]),
    method=st.sampled_from(["transmla", "mha2mla"]),
)
def test_conversion_closed_forms(n_kv, group, d_h, rope_half, rank_half, svd, method):
    """Parameters and cache of any conversion against the closed forms of the converted layer."""
    rope, d_c = min(2 * rope_half, d_h - 2), 2 * rank_half
    n_h, d = n_kv * group, 256
    src = small(n_kv).with_changes(
        num_attention_heads=n_h, num_key_value_heads=n_kv, head_dim=d_h, hidden_size=d
    )
    cc = conversion_cost(convert(src, method=method, kv_lora_rank=d_c, rope_dim=rope, svd=svd))
    nope = d_h if method == "transmla" else d_h - rope  # TransMLA: the source's width, + rope
    up = d_c * n_h * (nope + d_h) if svd == "joint" else d_c // 2 * n_h * (nope + d_h)
    q = d * n_h * (nope + rope)
    assert cc.projection_params == q + d * (d_c + rope) + up + n_h * d_h * d
    assert cc.cache_elements == d_c + rope
    assert cc.cache_bytes_per_token == (d_c + rope) * 2 * L
    assert cc.source_cache_bytes_per_token == 2 * n_kv * d_h * 2 * L


def test_encoder_models_are_refused_by_name(tmp_path):
    """An encoder (BERT) never becomes a model mlacalc converts: its config is refused naming
    the model_type."""
    path = tmp_path / "config.json"
    path.write_text(
        '{"model_type": "bert", "hidden_size": 64, "num_hidden_layers": 2, '
        '"num_attention_heads": 4, "vocab_size": 100, "intermediate_size": 128}'
    )
    with pytest.raises(mlacalc.MlacalcError, match="model_type 'bert'"):
        convert(path)


@pytest.mark.parametrize(
    "name,why",
    [
        ("deepseek-v4-pro", "compressed attention (compress_ratios"),
        ("mimo-v2-flash", "value heads or sliding layers have their own shape"),
        ("jamba-1.5-mini", "mamba1/dense"),
    ],
)
def test_refusal_names_the_models_own_reason(name, why):
    """DeepSeek-V4-Pro was refused for its window (the advice, drop sliding_window, is a dead
    end: every V4 layer needs it), MiMo-V2-Flash and Jamba for 'linear-attention layers' they
    do not have (their full_attention_layers list was read as a linear model's). MiMo-V2-Flash
    is refused for its heads' shapes, not its window: a file without the window is refused in
    turn (its sliding layers' own KV heads)."""
    text = conversion_refusal(mlacalc.load_model(name))
    assert why in text and "linear-attention" not in text


def test_transmla_counts_agree_with_the_mla_equivalent_and_the_paper():
    """Two routes to Llama-3.1-8B in DeepSeek's MLA layout at d_c 512 (nope 128, rope 64, the
    query kept whole): `convert` (TransMLA) and `compare --as-variants`. Before: 7.94 G against
    8.24 G parameters (convert's key part was d_h - rope = 64 wide). By hand: the query
    d x n_h (128 + 64), the latent and RoPE key d x (512 + 64), the up-projection
    512 x n_h (128 + 128), W_O n_h 128 x d and the latent's norm 512, a layer."""
    from mlacalc.models.variants import as_variant

    c = convert("llama-3.1-8b", kv_lora_rank=512).model
    v = as_variant("llama-3.1-8b", "mla")
    assert v.kv_lora_rank == 512
    assert mlacalc.param_counts(c).total == mlacalc.param_counts(v).total
    decode = [mlacalc.attention_flops(m, "decode", 32768, impl="absorbed") for m in (c, v)]
    assert decode[0] == decode[1]
    d, n_h = 4096, 32
    by_hand = d * n_h * 192 + d * 576 + 512 * n_h * 256 + n_h * 128 * d + 512
    assert mlacalc.param_counts(c).attention_per_layer == by_hand
    # TransMLA's published Llama-2-7B compression (from recall): 448 + 64 of 8,192 cached
    llama2 = convert("llama-2-7b", kv_lora_rank=448)
    assert (llama2.cache_elements, llama2.source_cache_elements) == (512, 8192)


def test_a_split_latent_holds_at_most_each_projections_rank():
    """A split SVD's key and value latents hold at most the position-free keys' rank and the
    values' apart: TransMLA of Llama-3.1-8B at its default 1,984 splits 992 + 992 against 960
    keys and 1,024 values, so 32 key dimensions hold nothing and 32 value dimensions are cut
    (before: 'the latent keeps all 1,984 dimensions'). The reference SVD in PyTorch has those
    ranks."""
    from mlacalc.cost.convert_cost import reading_notes
    from mlacalc.models.convert import split_ranks

    c = convert("llama-3.1-8b", svd="split")
    assert (c.key_rank, c.value_rank, split_ranks(c.source, "transmla", 64)) == (
        992,
        992,
        (960, 1024),
    )
    text = " ".join(reading_notes(conversion_cost(c)))
    assert "the latent keeps 1,952 of the 1,984 dimensions" in text
    assert "the key latent keeps 960 of 960, the value latent 992 of 1,024" in text
    assert any("key latent of 992 is above the rank 960" in n for n in c.notes)
    torch = pytest.importorskip("torch")
    for method, n_kv in (("transmla", 2), ("mha2mla", 2)):
        ref = _reference(torch, n_kv, 200, 4, "split", method)
        keys, values = split_ranks(small(n_kv), method, 4)
        assert torch.linalg.matrix_rank(ref["k_nope"]) == keys  # 28 (TransMLA), 24 (MHA2MLA)
        assert torch.linalg.matrix_rank(ref["v_all"]) == values
