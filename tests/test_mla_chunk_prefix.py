"""An MLA chunk after a cached prefix starts from the cache the engines keep, the latent
(docs/time-model.md, "An MLA chunk over a cached prefix").

A new-user trial (trial10) found the default chunk (``impl=None``) priced as if the prefix's
expanded K/V were cached: DeepSeek-V3, 256 new tokens after 32,512 cached on H100 under SGLang,
1.516 ms a layer causal, while every path from the latent cache took 3.8-4.2 ms; the serving
step's chunks did the same."""

from __future__ import annotations

import pytest

from mlacalc import attention_cost, load_model
from mlacalc.cost.model_step import step_kernels
from mlacalc.hardware.catalogue import load_hardware
from mlacalc.serving import StepModel, make_layout
from mlacalc.timemodel.predict import predict_time
from mlacalc.words.dtypes import resolve_kv_layout

S, Q = 32768, 256


def test_default_chunk_expands_the_cached_latent_prefix():
    """The default chunk is ``compressed``: kv_b_proj runs over every key (the prefix's latent
    rows too, 32,768 x 512 -> 128 x 256 a layer), the fused bound reads the latent cache, and
    the label says so (before: ``naive``, kv_b over the 256 new tokens only, 47.8 PFLOP; the
    fused bound the latent's while its FLOPs were the expanded cache's)."""
    m = load_model("deepseek-v3")
    got = attention_cost(m, "chunk", S, q_len=Q, causal=True)
    want = attention_cost(m, "chunk", S, q_len=Q, causal=True, impl="compressed")
    naive = attention_cost(m, "chunk", S, q_len=Q, causal=True, impl="naive")
    assert got.impl == "compressed"
    assert got.stage_flops == want.stage_flops and got.fused_bytes == want.fused_bytes
    kv_b = next(o for o in got.ops if o.name == "kv_b_proj")
    assert kv_b.flops == 2 * S * 512 * 128 * 256
    assert got.flops > naive.flops
    # the cache the default keeps: the latent row (576 bf16 values a layer), not 128 x 320
    assert got.fused_bytes < naive.fused_bytes / 10
    assert attention_cost(m, "prefill", 4096).impl == "naive"  # no prefix: its own tokens
    assert attention_cost(m, "decode", 4096).impl == "absorbed"


def test_dsa_chunk_keeps_its_own_path():
    """A DSA layer's core attends each query's own top-k keys, no one prefix to expand:
    its chunk keeps ``naive`` (its engines' paths are dsa_time's)."""
    assert attention_cost("deepseek-v3.2", "chunk", S, q_len=Q).impl == "naive"


@pytest.mark.parametrize("engine", ["trtllm", "sglang", "vllm"])
def test_predicted_chunk_is_the_latent_path(engine):
    """predict_time's default chunk (2,048 new tokens: past vLLM's decode path) is the
    ``compressed`` chunk's time, not the expanded cache's (``naive``): H100 trtllm 8.617 ->
    11.154 ms, SGLang 8.496 -> 10.659, vLLM 8.702 -> 11.297 ms a layer, causal."""
    m = load_model("deepseek-v3")

    def t(impl):
        return predict_time(m, "H100-SXM", "chunk", S, q_len=2048, impl=impl, causal=True,
                            engine=engine)  # fmt: skip

    got = t(None)
    assert got.impl == "compressed"
    assert got.seconds == pytest.approx(t("compressed").seconds, rel=1e-12)
    assert got.seconds > 1.2 * t("naive").seconds


@pytest.mark.parametrize("kv", ["bf16", "fp8"])
@pytest.mark.parametrize(("engine", "tp"), [("trtllm", 1), ("sglang", 1), ("trtllm", 8)])
@pytest.mark.parametrize(("q", "pre"), [(256, 32512), (300, 5000), (2048, 4096), (8192, 0)])
def test_served_chunk_prices_the_model_steps_chunk(engine, tp, q, pre, kv):
    """The serving step's prompt kernels after a prefix are the model step's chunk (the same
    route, :func:`step_kernels`): kv_b_proj over prefix and new tokens, the key assembly, the
    core. Before, the templates had no FLOPs per key: kv_b_proj's FLOPs after a 32,512-token
    prefix came out 1.99x the model step's at TP1 (fitted through the prompt steps' pairs).
    With an fp8 cache the chunk gathers its prefix's rows at bf16 (prefix_gather), kv_b_proj
    reads every key's latent at bf16 and the core the expanded K/V at bf16, as a prompt's
    does: else the prompt steps the templates are read from disagree (a first cut put a
    2,000-token prompt's core at 50.4 GB for the model step's 15.0 GB)."""
    m = load_model("deepseek-v3")
    sm = StepModel(m, make_layout(m, tp, tp=tp), m.weights_dtype, resolve_kv_layout(kv),
                   load_hardware("H100-SXM"), None, engine=engine)  # fmt: skip
    names = ("prefix_gather", "kv_b_proj", "k_assemble", "attention")
    ours = [k for k in sm.kernels(pf_N=1, pf_q=q, pf_pre=pre) if k.name in names]
    phase = "chunk" if pre else "prefill"
    ref = step_kernels(m, phase, q + pre, 1, q_len=q if pre else None, causal=True,
                       weight_dtype=m.weights_dtype, kv_dtype=kv, engine=engine)  # fmt: skip
    ref = [k for k in ref if k.name in names and (k.bytes or k.flops)]  # no prefix: no gather
    assert [k.name for k in ours] == [k.name for k in ref]
    for a, b in zip(ours, ref):
        assert a.flops * a.calls * tp == pytest.approx(b.flops * b.calls, rel=1e-9), a.name
        if tp == 1:
            assert a.bytes * a.calls == pytest.approx(b.bytes * b.calls, rel=1e-9), a.name
    kv_b = next(k for k in ours if k.name == "kv_b_proj")
    assert kv_b.shape["m"] == q + pre  # every key's latent row expanded
    if tp > 1:  # the latent rows read whole on every rank, the expansion split
        new = q * 512 * 2  # the new tokens' latent from the projection (bf16)
        cached = pre * 512 * 2  # the prefix's from the gathered, dequantized rows (bf16)
        out = (q + pre) * 128 * 256 * 2
        weights = 512 * 128 * 256 // tp  # fp8 weights
        assert kv_b.bytes == pytest.approx(new + cached + out / tp + weights, rel=1e-6)


def test_results_say_which_cache_they_start_from():
    """``impl`` names the op sequence and ``cache`` what the cache holds: the default prompt
    runs ``naive`` FLOPs over the latent cache, ``impl="naive"`` named caches the expanded
    K/V (both said ``naive`` and nothing else before, trial10); predict_time says it too, and
    its docstring no longer calls the calibrated model's time a roofline."""
    m = load_model("deepseek-v3")
    got = {
        impl: (attention_cost(m, "prefill", 4096, impl=impl).cache,
               predict_time(m, "H100-SXM", "prefill", 4096, impl=impl).cache)
        for impl in (None, "naive", "compressed", "absorbed")
    }  # fmt: skip
    assert got == {
        None: ("latent", "latent"),
        "naive": ("expanded", "expanded"),
        "compressed": ("latent", "latent"),
        "absorbed": ("latent", "latent"),
    }
    p = predict_time(m, "H100-SXM", "chunk", S, q_len=Q, engine="vllm")
    assert (p.impl, p.cache) == ("absorbed", "latent")  # vLLM's decode path
    assert p.to_dict()["cache"] == "latent"
    assert attention_cost("llama-3-8b", "decode", 4096).to_dict()["cache"] == "kv"
    assert not predict_time.__doc__.lstrip().startswith("Roofline")


@pytest.mark.parametrize("name", ["kimi-linear-48b-a3b", "minicpm3-4b", "deepseek-v2-lite"])
def test_every_served_chunk_kernel_is_the_model_steps(name):
    """MLA beside linear-attention layers (Kimi Linear: the extra prompt step the per-key
    term reads must not disturb the scans' templates), without a query LoRA, small models:
    every non-MoE kernel of a chunk after a prefix, and of a prompt, as the model step's."""
    m = load_model(name)
    sm = StepModel(m, make_layout(m, 1), None, resolve_kv_layout("bf16"),
                   load_hardware("H100-SXM"), None)  # fmt: skip

    def keyed(ks):
        seen: dict[str, int] = {}
        out = {}
        for k in ks:
            out[(k.name, seen.setdefault(k.name, 0))] = k
            seen[k.name] += 1
        return out

    for q, pre in ((1024, 30720), (2048, 6144), (8192, 0)):
        ref = step_kernels(m, "chunk" if pre else "prefill", q + pre, 1,
                           q_len=q if pre else None, causal=True, engine=sm.engine)  # fmt: skip
        # (a prompt without a prefix lists prefix_gather with no work: no kernel runs)
        names = {k.name for k in ref if k.kind != "moe" and (k.bytes or k.flops)}
        ours = keyed(k for k in sm.kernels(pf_N=1, pf_q=q, pf_pre=pre) if k.name in names)
        want = keyed(k for k in ref if k.name in names)
        assert ours.keys() == want.keys()
        for key, b in want.items():
            a = ours[key]
            assert a.flops * a.calls == pytest.approx(b.flops * b.calls, rel=1e-6, abs=1), key
            assert a.bytes * a.calls == pytest.approx(b.bytes * b.calls, rel=1e-6, abs=1), key


@pytest.mark.parametrize(("q", "pre"), [(256, 8192), (4096, 4096), (2048, 30720)])
def test_one_width_a_tensor_along_the_chunk(q, pre):
    """One op sequence, each tensor at one width (review10 F4): the prefix's cached rows
    gathered out of the paged cache and written at bf16 (``prefix_gather``: read at the
    cache's width, 576 B a row with fp8, 1,152 with bf16); kv_b_proj reads every key's latent
    at bf16 (the new tokens' from the projection, the prefix's from the gathered rows) and
    writes every key's K/V at bf16; the core reads all of them at bf16. Before, with an fp8
    cache, kv_b_proj read the prefix's latent at 1 byte straight from the cache (no dequant
    op) while k_assemble read the same rows' RoPE part at bf16, and the core read the new
    tokens' K/V at 1 byte though kv_b_proj wrote them at bf16 (2,048 after 30,720: kv_b
    2,182,090,752 and core 2,768,240,640 B against bf16's 2,197,819,392 and 2,852,126,720)."""
    m = load_model("deepseek-v3")

    def kernels(kv):
        ks = step_kernels(m, "chunk", q + pre, 1, q_len=q, causal=True, kv_dtype=kv)
        return {k.name: k for k in ks}

    bf16, fp8 = kernels("bf16"), kernels("fp8")
    assert bf16["prefix_gather"].bytes == pre * (576 * 2 + 576 * 2)
    assert fp8["prefix_gather"].bytes == pre * (576 + 576 * 2)
    for name in ("kv_b_proj", "k_assemble", "attention"):
        assert fp8[name].bytes == bf16[name].bytes, name
    keys = q + pre
    per_row = 128 * (128 + 64 + 128)  # n_h (d_nope + d_rope + d_v) values a key
    q_o = q * 128 * (192 + 128) * 2  # the query in, the output out, bf16
    assert bf16["attention"].bytes == q_o + keys * per_row * 2
    if (q, pre) == (2048, 30720):
        assert bf16["kv_b_proj"].bytes == 2_197_819_392
        assert bf16["attention"].bytes == 2_852_126_720
    # a prompt without a prefix: nothing gathered, its core as the chunk's rule reads it
    prompt = {k.name: k for k in step_kernels(m, "prefill", q, 1, causal=True, kv_dtype="fp8")}
    assert prompt["prefix_gather"].bytes == 0
    assert prompt["attention"].bytes == q_o + q * per_row * 2


def test_report_says_what_runs_for_this_mla_model():
    """report's FLOPs note is the model's own: DeepSeek-V3.2's chunk stays naive (a DSA
    layer's top-k), and its naive prompt differs from compressed (351.86 T against 339.28 T),
    where before the note said "chunk (compressed)" and "the same as compressed" for both."""
    import json

    from mlacalc.cli.report_cmd import _flops_note
    from mlacalc.report import model_report

    def note(name):
        return _flops_note(json.loads(json.dumps(model_report(name, seq_len=8192))))

    dsa, plain = note("deepseek-v3.2"), note("deepseek-v3")
    assert "naive too" in dsa and "the same as compressed" not in dsa
    assert "chunk (compressed)" not in dsa
    assert "the same as compressed" in plain and "chunk (compressed)" in plain


def test_one_cache_word_for_deepseek_v4():
    """attention_cost and predict_time say one thing of DeepSeek-V4's compressed layers
    (before: '' against 'kv')."""
    a = attention_cost("deepseek-v4-pro", "decode", 8192).cache
    p = predict_time("deepseek-v4-pro", "H100-SXM", "decode", 8192).cache
    assert a == p == ""


def test_sglang_short_prefix_chunk_is_said():
    """SGLang runs an MLA chunk after fewer than 8,192 cached tokens absorbed (from recall):
    priced expanded here, and the output says so (before: only a docstring), in predict_time's
    warnings and a plan's; not at 8,192 cached, not for another engine or a DSA model."""
    from mlacalc.serving.plan import plan

    def said(name, engine, pre):
        p = predict_time(name, "H100-SXM", "chunk", 2048 + pre, q_len=2048, engine=engine)
        return any("absorbed over the latent" in w for w in p.warnings)

    assert said("deepseek-v3", "sglang", 512)
    assert not said("deepseek-v3", "sglang", 8192)
    assert not said("deepseek-v3", "trtllm", 512)
    assert not said("deepseek-v3.2", "sglang", 512)
    kw = dict(isl=16000, osl=500, concurrency=8, engine="sglang")
    chunked = plan("deepseek-v3", "H200", 8, chunked_prefill=2048, **kw)
    assert any("2,048 cached tokens" in w for w in chunked.warnings)
    assert not any("absorbed over the latent" in w for w in plan("deepseek-v3", "H200", 8,
                                                                  **kw).warnings)  # fmt: skip


def test_serving_impl_names_a_function_that_exists():
    """serving_impl's docstring pointed at mla_time.engine_prompt_impl, which does not exist."""
    import importlib
    import re

    from mlacalc.words.vocab import serving_impl

    for ref in re.findall(r":func:`([\w.]+)`", serving_impl.__doc__ or ""):
        module, _, name = ref.rpartition(".")
        assert hasattr(importlib.import_module(module), name), ref
