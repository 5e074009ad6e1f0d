"""A served DeepSeek-V4 step (``predict_time``, ``plan``) runs the kernels its module rows are
mapped as, by one definition: SGLang's ragged prompt core and flat-logit top-k, vLLM's fused
query and key projections and its pass over the padded query."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import mlacalc
from mlacalc.cost.compressed import RAGGED, RAGGED_CORE, ragged_core_shape
from mlacalc.cost.model_step import step_kernels
from mlacalc.hardware.catalogue import load_hardware
from mlacalc.measured.dsv4_modules import (
    FLAT_TOPK,
    LONG_TOPK,
    PROMPT_LONG_TOPK,
    PROMPT_TOPK,
    dsv4_module_kernels,
)
from mlacalc.models.loading import load_model
from mlacalc.serving.gpu_step import StepModel, _variant
from mlacalc.serving.layout import Layout
from mlacalc.timemodel.device import device_figures
from mlacalc.timemodel.kernel_time import engine_v4_prompt_core
from mlacalc.timemodel.profile import load_profile
from mlacalc.words.dtypes import resolve_kv_layout
from mlacalc.words.kernels import batches_of, variant_of

ROW = ("sgl-project/DeepSeek-V4-Flash-FP8", "hca", 64, "bfloat16", 256, 4, 128)
PRO = "deepseek-ai/DeepSeek-V4-Pro"


def _core(kernels):
    (core,) = [k for k in kernels if k.name == "attention"]
    return core


@pytest.mark.parametrize("kind", ["hca", "csa"])
def test_sglangs_prompt_core_is_one_ragged_sequence_of_every_token_in_both_paths(kind):
    """The step builds the core per sequence (256 sequences of 4 tokens); SGLang runs it as
    one sequence of 1,024 queries, each with the keys it had, timed by the ``sparse_ragged``
    class: the mapping's kernel and the served step's batch both (one definition,
    ``ragged_core_shape``), every other field as the step's (a served V4 prompt had been
    timed by vLLM's ``sparse`` prefill class, which SGLang's rows outgrow 1.8-1.9x with the
    cached tokens)."""
    row = (ROW[0], kind, *ROW[2:])
    plain = _core(dsv4_module_kernels(*row, False))
    mapped = _core(dsv4_module_kernels(*row, False, "sglang"))
    served = engine_v4_prompt_core(batches_of([plain])[0][1], "sglang")
    assert served.variant == RAGGED_CORE == "sparse_ragged" and {"sglang"} == RAGGED
    want = {**plain.shape, "batch": 1, "q_len": 1024, "split_tokens": 1}
    assert mapped.shape == want and (mapped.flops, mapped.bytes) == (plain.flops, plain.bytes)
    assert {k: v.tolist() for k, v in served.shape.items()} == {k: [v] for k, v in want.items()}
    assert ragged_core_shape({"batch": 3, "q_len": 5, "kv_len": 7}) == {
        "batch": 1,
        "q_len": 15,
        "kv_len": 7,
        "split_tokens": 1,
    }
    plain_batch = batches_of([plain])[0][1]
    for engine in ("vllm", "trtllm"):
        assert engine_v4_prompt_core(plain_batch, engine) is plain_batch


def test_a_served_sglang_v4_prompt_reads_the_ragged_class_and_a_profile_without_it_the_sparse():
    """DeepSeek-V4-Pro's prompt on B200 under SGLang: its cores run the profile's
    ``sparse_ragged`` fit (longer than vLLM's kernel, as the rows show); a profile that lacks
    the variant times them by FlashMLA's ``sparse`` prefill fit, not the dense prompt class."""

    def core_ms(engine):
        p = mlacalc.predict_time("deepseek-v4-pro", "B200", "prefill", 8192, 1, engine=engine)
        return sum(o.model_s for o in p.ops if o.name == "attention") * 1e3

    assert core_ms("sglang") > 1.3 * core_ms("vllm")
    prof = load_profile("fit-b200-sxm-sglang")
    own, _ = prof.params("B200", "attention_prefill", "bf16", variant="sparse_ragged")
    parent, _ = prof.params("B200", "attention_prefill", "bf16", variant="sparse")
    assert own != parent
    vllm = load_profile("fit-b200-sxm-vllm")
    assert "attention_prefill:bf16:sparse_ragged" not in vllm.classes
    lent, _ = vllm.params("B200", "attention_prefill", "bf16", variant="sparse_ragged")
    assert lent == vllm.params("B200", "attention_prefill", "bf16", variant="sparse")[0]


VLLM_TOPK = "topk_vllm_prompt"

#: (engine, phase, cached tokens after the step, sequences, new tokens a sequence, the kernel
#: names the engine's rules touch, the top-k's class variant)
SERVED = [
    # vLLM's own prompt top-k where a query selects (compressed.ROW_TOPK_PROMPT,
    # topk_vllm_prompt: the class its CSA prompt module rows' residuals fit); its decode the
    # step's streaming pass
    ("vllm", "prefill", 8192, 1, 8192, ("q_a_kv_proj", "q_pad", "indexer_topk"), VLLM_TOPK),
    ("vllm", "decode", 8192, 64, 1, ("q_a_kv_proj", "q_pad", "indexer_topk"), ""),
    ("sglang", "prefill", 8192, 1, 8192, ("q_a_proj", "kv_proj", "indexer_topk"), PROMPT_TOPK),
    ("sglang", "decode", 8192, 64, 1, ("q_a_proj", "indexer_topk"), FLAT_TOPK),
    ("sglang", "decode", 100_000, 64, 1, ("indexer_topk",), LONG_TOPK),
    ("sglang", "decode", 2048, 64, 1, ("indexer_topk",), ""),  # 512 pooled keys: none selects
    # past LONG_ROW pooled keys the v1 kernel's other path
    ("sglang", "prefill", 80_000, 1, 80_000, ("indexer_topk",), PROMPT_LONG_TOPK),
]


def _mapped(engine, phase, seq, batch, q):
    """The CSA module row's kernels of DeepSeek-V4-Pro (128 heads, fp8 weights and cache)."""
    ks = dsv4_module_kernels(PRO, "csa", 128, "fp8_block", batch, q, seq - q, phase == "decode",
                             engine)  # fmt: skip
    return {k.name: k for k in ks}


@pytest.mark.parametrize("engine, phase, seq, batch, q, names, topk", SERVED)
def test_predict_times_v4_step_runs_the_mapped_kernels_of_its_engine(
    engine, phase, seq, batch, q, names, topk
):
    """``predict_time``'s model step (``step_kernels`` with its profile's engine) runs, in each
    CSA layer, the kernels the engine's module rows are mapped as: vLLM's ``q_a_proj`` and
    ``kv_proj`` as one GEMM and a pass over the padded query (before: apart, and no pass),
    SGLang's top-k its flat-logit kernel where a query selects (before: the step's streaming
    kernel); equal FLOPs, bytes and shape, by name."""
    m = load_model("deepseek-v4-pro")
    ks = step_kernels(m, phase, seq, batch, q if phase != "decode" else None, causal=True,
                      weight_dtype="fp8", kv_dtype="fp8", engine=engine)  # fmt: skip
    csa = [k for k in ks if k.calls == m.compress_ratios.count(m.compress_rate_csa)]
    served = {k.name: replace(k, calls=1) for k in csa if k.name in names}
    mapped = _mapped(engine, phase, seq, batch, q)
    assert set(served) == set(names)
    for name in names:
        assert served[name] == mapped[name], name
    assert variant_of("elementwise", served["indexer_topk"].shape) == topk
    fused = engine == "vllm"
    assert ("q_a_kv_proj" in {k.name for k in ks}) == fused == ("q_pad" in {k.name for k in ks})
    assert ("kv_proj" in {k.name for k in ks}) != fused


@pytest.mark.parametrize("engine, phase, seq, batch, q, names, topk", SERVED)
def test_plans_v4_step_runs_the_mapped_kernels_of_its_engine(
    engine, phase, seq, batch, q, names, topk
):
    """``plan``'s step model (one GPU, its profile's engine) runs the same kernels, its top-k
    split by the kernel each row runs (``engine_topk``, arrays); the kernel-class variant of
    every V4 kernel is its own (before, a plan timed V4's sparse cores and indexer scores by
    the dense classes, ``_variant`` reading none of their fields)."""
    m = load_model("deepseek-v4-pro")
    prof = load_profile(f"fit-b200-sxm-{engine}")
    sm = StepModel(m, Layout(1, 1, 1, 1, 1, False, 1, 1), "fp8", resolve_kv_layout("fp8"),
                   load_hardware("B200"), prof)  # fmt: skip
    kw = dict(dec_B=batch, dec_S=seq) if phase == "decode" else dict(pf_N=batch, pf_q=q)
    specs = sm.specs(**kw)
    calls = m.compress_ratios.count(m.compress_rate_csa)
    csa = {s.name: s for s in specs if s.calls == calls and s.name in names and s.bytes[0] > 0}
    mapped = _mapped(engine, phase, seq, batch, q)
    assert set(csa) == set(names)
    # the step's own top-k (no query selects, or an engine without the rule) is read off
    # affine templates, its prompt bytes not exactly (the indices written a query are capped)
    for name in [n for n in names if n != "indexer_topk" or topk]:
        s, k = csa[name], mapped[name]
        assert (s.flops[0], s.bytes[0]) == pytest.approx((k.flops, k.bytes), rel=1e-9), name
        for f, v in k.shape.items():
            if f in s.shape:
                assert s.shape[f][0] == pytest.approx(v, rel=1e-9), (name, f)
    assert _variant(csa["indexer_topk"]) == topk
    cores = {_variant(s) for s in specs if s.name == "attention"}
    scores = {_variant(s) for s in specs if s.name == "indexer_scores" and s.bytes[0] > 0}
    assert cores == {"sparse"} and scores == {"indexer"}


def test_plan_shards_the_padded_query_pass_as_the_core_pads_a_ranks_heads():
    """Under tensor parallelism a rank's heads are padded again (V4-Pro at TP8: 16 heads run
    64): the ``q_pad`` pass a token is 64 heads of 512 bf16 read and written, not the model's
    128 split eight ways (16)."""
    m = load_model("deepseek-v4-pro")
    lay = Layout(8, 8, 1, 1, 8, False, 8, 1)
    sm = StepModel(m, lay, "fp8", resolve_kv_layout("fp8"), load_hardware("B200"),
                   load_profile("fit-b200-sxm-vllm"))  # fmt: skip
    (pad, *_) = [s for s in sm.specs(pf_N=1, pf_q=4096) if s.name == "q_pad"]
    assert pad.shape["elements"][0] == 4096 * 64 * 512
    assert pad.bytes[0] == 4 * 4096 * 64 * 512
    assert np.all(pad.flops == 0)


@pytest.mark.parametrize("kind", ["hca", "csa"])
def test_vllms_blackwell_prompt_core_takes_128_heads_in_one_tile_of_a_64_head_calls_time(kind):
    """vLLM's DeepSeek-V4 prompt core (``WIDE_TILE_CORE``) on a ``tcgen05`` device (B200, MMAs
    of 128 rows) runs DeepSeek-V4-Pro's 128 local heads at the 64-head call's time (one tile
    a query); on Hopper (64-row MMAs), under SGLang (its own kernel) and at 64 heads the call
    is timed as before (128 heads: twice the work of 64)."""
    from mlacalc.cost.compressed import WIDE_TILE_CORE
    from mlacalc.timemodel.kernel_time import predict_batch

    assert {"vllm"} == WIDE_TILE_CORE

    def core(heads, hw, engine, prof):
        ks = dsv4_module_kernels(PRO, kind, heads, "fp8_block", 2, 4096, 2048, False, engine)
        return float(predict_batch(batches_of([_core(ks)])[0][1], hw, prof)[0])

    b200, h100 = "fit-b200-sxm-vllm", "fit-h100-sxm-vllm"
    assert core(128, "B200", "vllm", b200) == pytest.approx(core(64, "B200", "vllm", b200), 1e-9)
    assert core(128, "H100-SXM", "vllm", h100) > 1.5 * core(64, "H100-SXM", "vllm", h100)
    # the B200 core from H100's vLLM fit (leaving B200 out) takes the rule too: a device's kernel
    assert core(128, "B200", "vllm", h100) == pytest.approx(core(64, "B200", "vllm", h100), 1e-9)
    sgl = "fit-b200-sxm-sglang"
    assert core(128, "B200", "sglang", sgl) > 1.5 * core(64, "B200", "sglang", sgl)
    plain = batches_of([_core(dsv4_module_kernels(PRO, kind, 64, "fp8_block", 2, 4096, 2048,
                                                  False, "vllm"))])[0][1]  # fmt: skip
    fig = device_figures(load_hardware("B200"))
    assert engine_v4_prompt_core(plain, "vllm", fig) is plain  # 64 heads: one 64-row tile


@pytest.mark.parametrize("kind", ["hca", "csa"])
@pytest.mark.parametrize(("isl", "step"), [(16, 131072), (128, 65536)])
def test_vllms_blackwell_prompt_core_at_128_heads_takes_no_less_than_at_64(kind, isl, step):
    """The wide tile halves the 128-head core's products and its per-head bytes (queries,
    sinks, outputs: ``core_head_bytes``), not the read of the keys every head shares: one
    sequence of 16 new tokens after 131,072 cached keys (CSA: the keys' read most of the
    bytes) or 128 after 65,536 takes at least the 64-head call's time on B200 under vLLM's
    fit (once 28.71 us at 128 heads against 30.11 us at 64, CSA from 16 tokens), and the
    128-head call's bytes less the 64-head one's are its extra heads' queries and outputs."""
    from mlacalc.cost.compressed import core_head_bytes
    from mlacalc.timemodel.kernel_time import predict_batch

    fig = device_figures(load_hardware("B200"))

    def core(heads):
        ks = dsv4_module_kernels(PRO, kind, heads, "fp8_block", 1, isl, step, False, "vllm")
        batch = batches_of([_core(ks)])[0][1]
        run = engine_v4_prompt_core(batch, "vllm", fig)
        return float(predict_batch(batch, "B200", "fit-b200-sxm-vllm")[0]), batch, run

    t64, b64, _ = core(64)
    t128, b128, run = core(128)
    assert t128 >= t64
    keys = b128.bytes - core_head_bytes(b128.shape, b128.dtype)
    assert keys[0] > (0.5 * b128.bytes[0] if (kind, isl) == ("csa", 16) else 0)
    assert keys == pytest.approx(b64.bytes - core_head_bytes(b64.shape, b64.dtype))
    assert run.bytes == pytest.approx(b64.bytes)  # the 64-head call's bytes, keys whole


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_vllm_runs_no_prompt_logits_where_no_query_selects(engine):
    """DeepSeek-V4-Pro's top-k takes 1,024 of its pooled keys (one per 4 tokens): in a prompt of
    2,048 tokens no query has more, so vLLM launches no indexer logits kernel for it
    (``compressed.SELECTING_LOGITS``), in the module rows' mapping, ``predict_time``'s step and
    ``plan``'s step alike; SGLang does. Past the onset (8,192 tokens) both run it, and a decode
    step of 2,048 keys runs its paged logits under both."""
    m = load_model("deepseek-v4-pro")
    prof = load_profile(f"fit-b200-sxm-{engine}")
    sm = StepModel(m, Layout(1, 1, 1, 1, 1, False, 1, 1), "fp8", resolve_kv_layout("fp8"),
                   load_hardware("B200"), prof)  # fmt: skip
    for seq, runs in ((2048, engine != "vllm"), (8192, True)):
        assert ("indexer_scores" in _mapped(engine, "prefill", seq, 1, seq)) == runs
        ks = step_kernels(m, "prefill", seq, 1, seq, causal=True, weight_dtype="fp8",
                          kv_dtype="fp8", engine=engine)  # fmt: skip
        assert ("indexer_scores" in {k.name for k in ks}) == runs
        (logits,) = [s for s in sm.specs(pf_N=1, pf_q=seq) if s.name == "indexer_scores"
                     and s.kind == "attention_prefill"]  # fmt: skip
        assert (logits.flops[0] > 0) == runs and (logits.bytes[0] > 0) == runs  # none: no bytes
    assert "indexer_scores" in _mapped(engine, "decode", 2048, 64, 1)
    decode = step_kernels(m, "decode", 2048, 64, causal=True, weight_dtype="fp8",
                          kv_dtype="fp8", engine=engine)  # fmt: skip
    assert "indexer_scores" in {k.name for k in decode}


def test_a_served_template_puts_back_only_the_logits_a_layer_dropped():
    """gpu_step._with_logits: a template of an engine of SELECTING_LOGITS takes the plain
    step's logits kernel only into a CSA layer that dropped its own (before that layer's
    top-k), so a step where some layers keep theirs gets no second one and no missing one."""
    from mlacalc.serving.gpu_step import _with_logits
    from mlacalc.words.kernels import Kernel

    def k(name, n):
        return Kernel(name, "elementwise", "bf16", n, n)

    plain = [k("q", 0), k("indexer_scores", 1), k("indexer_topk", 2), k("core", 3),
             k("indexer_scores", 4), k("indexer_topk", 5), k("hca_core", 6)]  # fmt: skip
    kept = [k("q", 0), k("indexer_scores", 11), k("indexer_topk", 2), k("core", 3),
            k("indexer_topk", 5), k("hca_core", 6)]  # fmt: skip
    out = _with_logits(kept, plain)
    assert [(x.name, x.flops) for x in out] == [
        ("q", 0), ("indexer_scores", 11), ("indexer_topk", 2), ("core", 3),
        ("indexer_scores", 4), ("indexer_topk", 5), ("hca_core", 6),
    ]  # fmt: skip
    dropped = [x for x in plain if x.name != "indexer_scores"]
    assert _with_logits(dropped, plain) == plain
    assert _with_logits(plain, plain) == plain
    assert _with_logits(kept, kept) == kept  # a layer with no logits in the plain step either


def test_sglangs_v4_prompt_logits_split_a_few_queries_keys_over_the_sms():
    """SGLang's DeepSeek-V4 CSA prompt indexer logits (``SPLIT_KEY_LOGITS_ENGINES``) take time
    in proportion to their queries past a long cache: one sequence of 4, 64 and 256 new tokens
    after 1,000,000 cached (250,000 pooled keys a query) on B200 under SGLang's fit, where one
    128-row unit an SM walking its keys alone gave 4 new tokens the time of 256 (611 us; the
    module row of 4 tokens measures 330 us in all). vLLM's kernel (no split) keeps that."""
    from mlacalc.cost.compressed import SPLIT_KEY_LOGITS_ENGINES
    from mlacalc.timemodel.kernel_time import predict_batch

    assert {"sglang"} == SPLIT_KEY_LOGITS_ENGINES

    def logits(isl, engine):
        ks = dsv4_module_kernels(ROW[0], "csa", 64, "bfloat16", 1, isl, 1_000_000, False, engine)
        (k,) = [k for k in ks if k.name == "indexer_scores"]
        assert ("split_keys" in k.shape) == (engine == "sglang")
        return float(predict_batch(batches_of([k])[0][1], "B200", f"fit-b200-sxm-{engine}")[0])

    t4, t64, t256 = (logits(isl, "sglang") for isl in (4, 64, 256))
    assert t4 < 0.1 * t256 and 0.15 < t64 / t256 < 0.35  # about the queries' share
    assert logits(4, "vllm") == pytest.approx(logits(256, "vllm"), rel=0.02)
