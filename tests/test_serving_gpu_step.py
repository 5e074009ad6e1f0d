"""The serving step's per-GPU kernels are the model step's (:mod:`mlacalc.cost.model_step`),
sharded.

At one GPU every kernel of :func:`mlacalc.cost.model_step.step_kernels` appears in the serving step
with the same name, kind, calls, FLOPs and bytes (the routed experts: the same FLOPs; their
bytes count the experts the step touches as a fraction, not rounded up), for MLA and GQA,
decode and prefill, layer kinds (sliding and full layers), DeepSeek sparse attention and
linear attention. Under tensor parallelism the split kernels carry 1/tp of the FLOPs, the
replicated ones (MLA's latent and query down-projections, the router, norms) all of them;
under expert parallelism a GPU computes 1/ep of the routed FLOPs.
"""

from __future__ import annotations

import pytest

from mlacalc.cost.engine import as_model
from mlacalc.cost.model_step import step_kernels
from mlacalc.hardware.catalogue import load_hardware
from mlacalc.serving import StepModel, make_layout
from mlacalc.serving.gpu_step import COLUMN, HEADS, ROW
from mlacalc.words.dtypes import resolve_kv_layout

B, S = 16, 4096


def _keyed(kernels):
    seen: dict[str, int] = {}
    out = {}
    for k in kernels:
        i = seen.get(k.name, 0)
        seen[k.name] = i + 1
        out[(k.name, i)] = k
    return out


def _pair(model: str, phase: str, tp: int = 1, ep: int = 1, routing: str = "balanced"):
    m = as_model(model)
    gpus = max(tp, ep)
    lay = make_layout(m, gpus, tp=tp, dp=gpus // tp, ep=ep, dp_attention=ep > tp)
    hw = load_hardware("H200")
    sm = StepModel(m, lay, m.weights_dtype, resolve_kv_layout("bf16"), hw, routing=routing)
    kv = resolve_kv_layout("bf16")
    if phase == "decode":
        ref = step_kernels(
            m, "decode", S, B, weight_dtype=m.weights_dtype, kv_dtype=kv, engine=sm.engine
        )
        ours = sm.kernels(dec_B=B, dec_S=S)
    else:
        ref = step_kernels(
            m,
            "prefill",
            S,
            1,
            weight_dtype=m.weights_dtype,
            causal=True,
            kv_dtype=kv,
            engine=sm.engine,
        )
        ours = sm.kernels(pf_N=1, pf_q=S)
    ref = [k for k in ref if k.bytes or k.flops or k.kind == "moe"]  # listed, no kernel runs
    return _keyed(ref), _keyed(k for k in ours if k.kind not in _COMM and k.name not in _SERVING)


_COMM = ("all_reduce", "all_gather", "reduce_scatter", "dispatch", "combine", "p2p")
#: serving-only kernels (beyond the model's forward step): the sampler over the logits
_SERVING = ("sampling",)


@pytest.mark.parametrize(("model", "tp"), [("llama-3-8b", 1), ("llama-3-70b", 4)])
def test_the_sampler_reads_every_sampled_row_of_logits(model, tp):
    """Per sampled position: the vocabulary's logits gathered under TP (each rank sends its
    ceil(V / tp) bf16 logits), then read once by the sampler (5 FLOPs per logit for the
    softmax) that writes a 32-bit token id; a prompt samples its last position only."""
    m = as_model(model)
    V = m.vocab_size
    lay = make_layout(m, tp, tp=tp)
    sm = StepModel(m, lay, "bf16", resolve_kv_layout("bf16"), load_hardware("H100-SXM"))
    for kw, rows in ((dict(dec_B=B, dec_S=S), B), (dict(dec_B=B, dec_S=S, pf_N=3, pf_q=500), 19)):
        ks = {k.name: k for k in sm.kernels(**kw)}
        sampler = ks["sampling"]
        assert (sampler.kind, sampler.calls) == ("elementwise", 1)
        assert (sampler.flops, sampler.bytes) == (5 * rows * V, rows * V * 2 + rows * 4)
        if tp > 1:
            gather = ks["all_gather of logits (TP)"]
            assert gather.bytes == rows * -(-V // tp) * 2
            assert gather.shape["message_bytes"] == gather.bytes * tp
        else:
            assert "all_gather of logits (TP)" not in ks


@pytest.mark.parametrize(
    "model", ["deepseek-v3", "llama-3-70b", "gpt-oss-120b", "deepseek-v3.2", "qwen3-next-80b-a3b"]
)
@pytest.mark.parametrize("phase", ["decode", "prefill"])
def test_one_gpu_runs_the_model_step(model, phase):
    """The served step of one GPU is the model step, kernel by kernel, its output head
    included: a weight dtype asked leaves the head as the checkpoint stores it in both (one
    rule, cost.quant.kept_head_format; until it was the served step's alone, the model step
    with a chosen dtype sized the head in it and this test allowed the difference)."""
    ref, ours = _pair(model, phase)
    assert set(ours) == set(ref)
    for key, k in ours.items():
        r = ref[key]
        assert (k.kind, k.calls, k.flops, k.dtype) == (r.kind, r.calls, r.flops, r.dtype), key
        if k.kind != "moe":
            assert k.bytes == r.bytes, key
            assert k.shape == {**r.shape, **{f: k.shape[f] for f in ("window",) if f in k.shape}}


@pytest.mark.parametrize("model", ["deepseek-v3", "llama-3-70b"])
def test_tensor_parallel_splits_heads_ffn_and_vocabulary(model):
    """TP8: heads, FFN and vocabulary 1/8 per GPU; the MLA down-projections, the router and
    the norms replicated."""
    ref, ours = _pair(model, "decode", tp=8)
    split = COLUMN | ROW | HEADS | {"kv_proj"}
    for key, k in ours.items():
        if k.kind == "moe" or not ref[key].flops:
            continue
        assert k.flops * (8 if key[0] in split else 1) == ref[key].flops, key


def test_expert_parallel_splits_the_routed_flops():
    """EP8 with DP-attention, balanced routing: each GPU computes 1/8 of the routed copies of
    the 8 groups' tokens, i.e. the routed FLOPs of one group's step. Random routing: the GPU
    the exchange waits for (the hottest) computes more, by the spread of a binomial share."""
    ref, ours = _pair("deepseek-v3", "decode", tp=1, ep=8)
    moe = ours[("routed_experts", 0)]
    assert moe.flops == ref[("routed_experts", 0)].flops
    assert moe.shape["experts"] == 256 // 8
    hot = _pair("deepseek-v3", "decode", tp=1, ep=8, routing="random")[1][("routed_experts", 0)]
    copies = B * 8 * 8  # tokens of the 8 groups x top-8
    mean = copies / 8
    c8 = 1.4342  # expected maximum of 8 standard normals (Blom)
    spread = c8 * (mean * (1 - 1 / 8)) ** 0.5
    assert hot.flops == pytest.approx(moe.flops * (mean + spread) / mean, rel=1e-6)


def test_layer_kinds_scale_with_context_as_they_keep_it():
    """Qwen3-Next decode at 4K and 64K keys: its linear layers' kernels do not change (a fixed
    state per sequence), its full layers' core reads 16x the cached rows; gpt-oss's sliding
    layers read at most their window."""
    kv = resolve_kv_layout("bf16")
    hw = load_hardware("H200")
    for model in ("qwen3-next-80b-a3b", "gpt-oss-120b"):
        m = as_model(model)
        sm = StepModel(m, make_layout(m, 1), m.weights_dtype, kv, hw)
        short = _keyed(sm.kernels(dec_B=8, dec_S=4096))
        long = _keyed(sm.kernels(dec_B=8, dec_S=65536))
        for key, k in short.items():
            if key[0].startswith("linear_"):
                assert long[key].bytes == k.bytes, key
            if k.kind == "attention_decode" and k.shape["window"]:
                assert long[key].bytes == k.bytes, key  # the window, not the context
        cores = [
            (k, long[key])
            for key, k in short.items()
            if k.kind == "attention_decode" and not k.shape["window"]
        ]
        assert cores
        for s, lg in cores:  # 60K more keys of 8 sequences, one cached row each
            assert lg.bytes - s.bytes == 8 * (65536 - 4096) * sm.kv_row


@pytest.mark.parametrize(
    ("name", "prefix"),
    [("nemotron-3-super-120b-a12b", "mamba_"), ("qwen3-next-80b-a3b", "linear_")],
)
def test_a_serving_steps_chunked_scan_equals_the_model_steps(name, prefix):
    """The serving step reads a model's kernels off prompt steps in whole chunks of every scan
    it runs (Mamba-2's 128 tokens as well as Gated DeltaNet's 64): its scan kernels then equal
    the model step's at real sizes, from the start and after a prefix. Read in chunks of 64
    alone, Nemotron-3-Super's Mamba-2 chunk count came out as a negative cost per key (plans
    under SGLang and vLLM, whose chunked prompts ride on decode steps, were NaN) and its
    prompts grew as the square of their length (8K tokens on one B300: 2.6 s for 0.24 s);
    read off steps with and without a prefix, a chunk's incoming state was a cost per key
    (Qwen3-Next's delta-rule core, 1K tokens after 30K: 35x its bytes)."""
    import numpy as np

    import mlacalc
    from mlacalc.words.dtypes import resolve_kv_layout

    m = mlacalc.load_model(name)
    sm = StepModel(
        m, make_layout(m, 1, tp=1), None, resolve_kv_layout("bf16"), load_hardware("B300")
    )
    for q, pre in ((8192, 0), (2048, 6144), (1024, 30720)):
        got = [k for k in sm.kernels(pf_N=1, pf_q=q, pf_pre=pre) if k.name.startswith(prefix)]
        phase = "chunk" if pre else "prefill"
        want = step_kernels(m, phase, q + pre, 1, q_len=q if pre else None, causal=True)
        want = [k for k in want if k.name.startswith(prefix)]
        assert got and len(got) == len(want)
        for a, b in zip(got, want, strict=True):
            assert a.name == b.name
            assert a.flops * a.calls == pytest.approx(b.flops * b.calls, rel=1e-6, abs=1), (q, pre)
            assert a.bytes * a.calls == pytest.approx(b.bytes * b.calls, rel=1e-6, abs=1), (q, pre)
    for engine in ("sglang", "vllm"):
        p = mlacalc.plan(m, "B200", 4, engine=engine, isl=8192, osl=1024, concurrency=8.0)
        assert np.isfinite(p.tpot_s) and np.isfinite(p.output_tokens_per_s) and p.tpot_s > 0


@pytest.mark.parametrize("phase", ["decode", "prefill"])
@pytest.mark.parametrize(
    ("model", "tp"), [("nemotron-3-super-120b-a12b", 8), ("jamba-1.5-mini", 2)]
)
def test_tensor_parallel_splits_mamba_layers_by_their_heads(model, tp, phase):
    """Under TP every Mamba-2 kernel (in_proj, conv, the chunked scan or the decode state
    update, the gated norm, out_proj) and every Mamba-1 kernel but its step-size norms runs
    1/tp of the model step's FLOPs (the heads, channels and groups a rank holds, as the
    layout splits the layer's weights and fixed state), decode's state update streams 1/tp
    of the state, and Mamba-1's row-parallel x_proj is all-reduced once a layer. Unsplit,
    every rank ran every head: Nemotron-3.5-Lightning's state update read 269.8 MB a call at
    TP8 as at TP1 while its state per sequence per GPU fell 49.4 MB -> 6.17 MB."""
    ref, ours = _pair(model, phase, tp=tp)
    mixer = [key for key in ours if key[0].startswith("mamba")]
    assert len(mixer) >= 5
    for key in mixer:
        share = 1 if key[0] == "mamba1_dt_norms" else tp
        assert ours[key].flops * share == pytest.approx(ref[key].flops, rel=1e-9), key
        # the activations a column-parallel GEMM reads stay whole: its bytes fall, not 1/tp
        assert ours[key].bytes < ref[key].bytes or share == 1, key
    if phase == "decode" and ("mamba_state_update", 0) in ref:
        want = ref[("mamba_state_update", 0)].bytes / tp
        assert ours[("mamba_state_update", 0)].bytes == pytest.approx(want, rel=1e-9)
    m = as_model(model)
    lay = make_layout(m, tp, tp=tp)
    sm = StepModel(m, lay, m.weights_dtype, resolve_kv_layout("bf16"), load_hardware("H200"))
    reduces = {k.name: k.calls for k in sm.kernels(dec_B=B, dec_S=S) if k.kind == "all_reduce"}
    x_proj = "all_reduce after Mamba-1 x_proj (TP)"
    assert reduces.get(x_proj, 0) == sum(k.calls for k in ref.values() if k.name == "mamba1_x_proj")


@pytest.mark.parametrize(
    ("model", "tp", "kinds"),
    [
        # Gemma 4 26B-A4B (d 2816): full layers' 2 K(=V) heads of 512, sliding layers' 8 K and
        # V heads of 256; at TP4 a full layer's rank holds one head (n 512, was 256: the
        # model-wide 8 heads' share), a sliding layer's two (n 1024)
        ("gemma-4-26b-a4b", 4, {5: (2816, 512, 1024), 25: (2816, 1024, 1024)}),
        # MiMo-V2-Flash (d 4096): full layers' 4 K/V heads, sliding layers' 8, each K of 192
        # and V of 128; at TP8 every rank holds one head of either kind (n 320; a sliding
        # layer's was 640: the model-wide 4 heads' share)
        ("mimo-v2-flash", 8, {9: (4096, 320, 320), 39: (4096, 320, 320)}),
    ],
)
def test_a_kv_proj_splits_by_its_own_kinds_kv_heads(model, tp, kinds):
    """A layer kind's kv_proj holds ``kv_head_share`` of that kind's K/V heads, as its core
    reads them: by hand, per kind (its calls) the hidden size ``k``, the rank's ``n`` and the
    cache row it writes (K and V, bf16); decode of B tokens at S keys, bf16 weights."""
    m = as_model(model)
    sm = StepModel(
        m, make_layout(m, tp, tp=tp), "bf16", resolve_kv_layout("bf16"), load_hardware("H200")
    )
    ks = sm.kernels(dec_B=B, dec_S=S)
    got = {k.calls: k for k in ks if k.name == "kv_proj"}
    assert set(got) == set(kinds)
    for calls, (k, n, row) in kinds.items():
        kv = got[calls]
        assert (kv.shape["k"], kv.shape["n"]) == (k, n), calls
        assert kv.flops == 2 * B * k * n, calls
        # its weights, the tokens in and out, the cache rows it writes (2 bytes each)
        assert kv.bytes == 2 * (k * n + B * (k + n) + B * row), calls


def _falcon_mqa():
    """Falcon-7B's layout (fused query_key_value, one K/V head of 64) with 64 query heads in
    4096 wide, so that TP2 and TP4 divide its heads (Falcon-7B's 71 do not)."""
    m = as_model("falcon-7b")
    return m.with_changes(hidden_size=4096, num_attention_heads=64, intermediate_size=16384)


@pytest.mark.parametrize("tp", [2, 4])
def test_a_fused_qkv_rank_holds_whole_kv_heads(tp):
    """Falcon's fused query_key_value under TP, as vLLM's and SGLang's QKVParallelLinear
    loads it (from recall): each rank its 64 / tp query heads and the one K/V head whole, by
    hand per layer: (64 / tp + 2) x 64 x 4096 weights and the dense 4096 x 4096 / tp (was an
    even split of the fused weight: (64 + 2) x 64 x 4096 / tp); its cache one K/V head per
    token (2 x 64 bf16), its kv_proj one head's K and V (n 128)."""
    from mlacalc.serving.layout import kv_bytes_per_sequence_per_gpu, weight_breakdown

    m = _falcon_mqa()
    lay = make_layout(m, tp, tp=tp)
    per_layer = (64 // tp + 2) * 64 * 4096 + 4096 * 4096 // tp
    assert weight_breakdown(m, lay)["attention"] == 32 * per_layer  # TP2 17,039,360 a layer before
    kv = resolve_kv_layout("bf16")
    assert kv_bytes_per_sequence_per_gpu(m, kv, lay, S) == 32 * S * 2 * 64 * 2
    sm = StepModel(m, lay, "bf16", kv, load_hardware("H200"))
    ks = {k.name: k for k in sm.kernels(dec_B=B, dec_S=S)}
    assert (ks["q_proj"].shape["n"], ks["kv_proj"].shape["n"]) == (4096 // tp, 128)
    assert ks["kv_proj"].bytes == 2 * (4096 * 128 + B * (4096 + 128) + B * 128)
