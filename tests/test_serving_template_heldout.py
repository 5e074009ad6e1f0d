"""The serving step's templates (serving/gpu_step.py ``_templates``) are solved exactly at
their reference steps (``_fit``: a square system), so a kernel whose work is not affine in
the drivers is interpolated silently between them (9460f4c's fp8 MLA prompt: kv_b_proj's
bytes negative at TP8, NaN plans). Each is checked here at held-out steps against the model
step (:func:`step_kernels`), and a negative figure at a step is refused naming the kernel."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mlacalc import load_model
from mlacalc.cost.model_step import step_kernels
from mlacalc.hardware.catalogue import load_hardware
from mlacalc.serving import StepModel, make_layout
from mlacalc.serving.gpu_step import _refuse_negative
from mlacalc.words.dtypes import resolve_kv_layout

#: Models whose templates are exact (not DeepSeek-V4's pooling or MiniMax-M3's block indexer,
#: which the templates approximate) and held-out prompt steps
#: (new tokens, cached), none a reference step, every one whole chunks of every scan.
MODELS = [
    "deepseek-v3",
    "minicpm3-4b",
    "kimi-linear-48b-a3b",
    "qwen3-next-80b-a3b",
    "jamba-1.5-mini",
    "falcon-h1-34b",
    "gemma-3-1b",
    "gpt-oss-120b",
    "mimo-v2-flash",
    "llama-3-8b",
    # its chunked layers' cores (attention_chunk_size 8192): before, their keys were the
    # whole prefix, attention (the chunked one) 4,096 new after 40,960 at 21.0x the model
    # step's FLOPs and 2.67x its bytes; 256 after 16,128 2.02x, 1.86x
    "llama-4-scout",
]
PROMPTS = ((768, 0), (1280, 6400), (4096, 40960), (256, 16128))
DECODES = ((3, 5000), (7, 300), (2, 8193), (5, 20000))


def _keyed(kernels):
    seen: dict[str, int] = {}
    out = {}
    for k in kernels:
        out[(k.name, seen.setdefault(k.name, 0))] = k
        seen[k.name] += 1
    return out


@pytest.mark.parametrize("kv", ["bf16", "fp8"])
@pytest.mark.parametrize("name", MODELS)
def test_templates_hold_at_held_out_steps(name, kv):
    """Every non-MoE kernel of a prompt, a chunk after a prefix and a decode step off the
    reference steps, as the model step's (rel 1e-6). Before, Jamba's Mamba-1 kernels were
    not known for scan kernels (``_scan_kernel``: ``mamba_`` only): their state read took a
    term per cached key, ``mamba1_state_update`` 1,280 new after 6,400 at 1,482,686,464 B
    for the model step's 29,360,128 (50.5x; 320x after 40,960), ``mamba1_conv`` 1.15x."""
    m = load_model(name)
    sm = StepModel(m, make_layout(m, 1), None, resolve_kv_layout(kv),
                   load_hardware("H100-SXM"), None)  # fmt: skip
    steps = [(dict(pf_N=1, pf_q=q, pf_pre=p), ("chunk" if p else "prefill", q + p, 1, q if p
              else None)) for q, p in PROMPTS]  # fmt: skip
    steps += [(dict(dec_B=b, dec_S=s), ("decode", s, b, None)) for b, s in DECODES]
    for kw, (phase, seq, batch, q_len) in steps:
        ref = step_kernels(m, phase, seq, batch, q_len=q_len, causal=True, kv_dtype=kv,
                           engine=sm.engine)  # fmt: skip
        # the kernels that run (a prompt without a prefix gathers none: prefix_gather's 0 B)
        names = {k.name for k in ref if k.kind != "moe" and (k.bytes or k.flops)}
        ours = _keyed(k for k in sm.kernels(**kw) if k.name in names)
        want = _keyed(k for k in ref if k.name in names)
        assert ours.keys() == want.keys(), kw
        for key, b in want.items():
            a = ours[key]
            for what in ("flops", "bytes"):
                got, exp = getattr(a, what) * a.calls, getattr(b, what) * b.calls
                assert got == pytest.approx(exp, rel=1e-6, abs=1), (key, what, kw)


@pytest.mark.parametrize("kv", ["bf16", "fp8"])
def test_mla_prompt_kernels_positive_at_tp8(kv):
    """DeepSeek-V3 at TP8 (H200): every kernel of a prompt and of a chunk after a prefix does
    positive work (9460f4c: kv_b_proj -50,000,896 B with an fp8 cache), and an fp8 plan's
    figures are finite."""
    from mlacalc.serving.plan import plan

    m = load_model("deepseek-v3")
    sm = StepModel(m, make_layout(m, 8, tp=8), m.weights_dtype, resolve_kv_layout(kv),
                   load_hardware("H200"), None)  # fmt: skip
    for q, pre in ((8000, 0), (256, 8192), (4096, 4096)):
        for k in sm.kernels(pf_N=1, pf_q=q, pf_pre=pre):
            assert k.flops >= 0 and k.bytes > 0, (k.name, q, pre)
    p = plan("deepseek-v3", "H200", 8, isl=8000, osl=500, concurrency=16, kv_dtype=kv)
    assert all(math.isfinite(x) for x in (p.ttft_s, p.tpot_s, p.prefill_s))


def test_negative_work_is_refused_naming_the_kernel():
    """A template giving negative work at a step is an internal error naming the kernel,
    not a NaN further on (shared.py's power mean)."""
    with pytest.raises(RuntimeError, match=r"kv_b_proj.*-50,000,896 bytes"):
        _refuse_negative("kv_b_proj", np.array([1.0, 2.0]), np.array([3.0, -50_000_896.0]))
    _refuse_negative("kv_b_proj", np.array([0.0]), np.array([-0.5]))  # rounding


@pytest.mark.parametrize(
    "name", ["qwen3-next-80b-a3b", "kimi-linear-48b-a3b", "nemotron-3-super-120b-a12b"]
)
def test_scans_count_whole_chunks_as_the_model_step(name):
    """A prompt's chunked scans do their FLOPs in whole chunks (the model step's
    linear_chunks / Mamba-2's chunks): the served step counts them so at any token count.
    Before, the templates (read at whole chunks) counted tokens: Kimi-Linear 16 new after
    16,000, linear_core_qk at 0.25 of the model step's FLOPs (300 after 5,000: 0.9375)."""
    m = load_model(name)
    sm = StepModel(m, make_layout(m, 1), None, resolve_kv_layout("bf16"),
                   load_hardware("H100-SXM"), None)  # fmt: skip
    for q, pre in ((16, 16000), (300, 5000), (1000, 0)):
        ref = step_kernels(m, "chunk" if pre else "prefill", q + pre, 1,
                           q_len=q if pre else None, causal=True, engine=sm.engine)  # fmt: skip
        names = {k.name for k in ref if k.kind != "moe" and (k.bytes or k.flops)}
        ours = _keyed(k for k in sm.kernels(pf_N=1, pf_q=q, pf_pre=pre) if k.name in names)
        for key, b in _keyed(k for k in ref if k.name in names).items():
            a = ours[key]
            assert a.flops * a.calls == pytest.approx(b.flops * b.calls, rel=1e-6, abs=1), (
                key, q, pre)  # fmt: skip


def test_chunk_shorter_than_the_reference_steps():
    """A chunked core whose chunk is shorter than the templates' reference steps (Scout with a
    64-token chunk, the reference prompts up to 192 keys) is read from the model with a chunk as
    long and driven by its own chunk's keys in the served step: every core as the model step's,
    prompts and decode across chunk boundaries."""
    m = load_model("llama-4-scout").with_changes(attention_chunk_size=64)
    sm = StepModel(m, make_layout(m, 1), None, resolve_kv_layout("bf16"),
                   load_hardware("H100-SXM"), None)  # fmt: skip
    steps = [(dict(pf_N=1, pf_q=q, pf_pre=p), ("chunk" if p else "prefill", q + p, 1, q if p
              else None)) for q, p in ((200, 0), (37, 91), (1, 100), (4096, 40960))]  # fmt: skip
    steps += [(dict(dec_B=b, dec_S=s), ("decode", s, b, None)) for b, s in ((2, 65), (4, 8193))]
    for kw, (phase, seq, batch, q_len) in steps:
        ref = step_kernels(m, phase, seq, batch, q_len=q_len, causal=True, engine=sm.engine)
        ours = _keyed(k for k in sm.kernels(**kw) if k.name == "attention")
        for key, b in _keyed(k for k in ref if k.name == "attention").items():
            a = ours[key]
            for what in ("flops", "bytes"):
                got, exp = getattr(a, what) * a.calls, getattr(b, what) * b.calls
                assert got == pytest.approx(exp, rel=1e-6), (key, what, kw)


def test_v4_indexer_topk_bytes_after_a_prefix():
    """DeepSeek-V4's ``indexer_topk`` (TensorRT-LLM's step kernel) writes, a token, the top-k
    of the whole sequence's pooled keys (``cost.compressed``): the served step's bytes as the
    model step's after a prefix. Before, the template took each query's own pooled keys: 4,096
    new after 40,960 at 1.79x the model step's bytes, 1,280 after 6,400 1.30x."""
    m = load_model("deepseek-v4-pro")
    sm = StepModel(m, make_layout(m, 1), None, resolve_kv_layout("bf16"),
                   load_hardware("H100-SXM"), None)  # fmt: skip
    for q, pre in ((4096, 40960), (1280, 6400), (256, 16128), (8192, 8192), (768, 0)):
        ref = step_kernels(m, "chunk" if pre else "prefill", q + pre, 1,
                           q_len=q if pre else None, causal=True, engine=sm.engine)  # fmt: skip
        (want,) = (k for k in ref if k.name == "indexer_topk")
        (got,) = (k for k in sm.kernels(pf_N=1, pf_q=q, pf_pre=pre) if k.name == "indexer_topk")
        assert got.bytes * got.calls == pytest.approx(want.bytes * want.calls, rel=1e-6), (q, pre)


def _msa_pairs(q: int, prefix: int, block: int, topk: int) -> int:
    """(query, key) pairs of ``q`` new tokens after ``prefix`` in a block-sparse layer, by hand:
    the query at 1-based position ``j`` attends ``j`` keys up to ``T B``, past it ``T - 1``
    whole blocks and its own block up to itself."""
    cap = block * topk
    return sum(j if j <= cap else (topk - 1) * block + (j - 1) % block + 1
               for j in range(prefix + 1, prefix + q + 1))  # fmt: skip


@pytest.mark.parametrize(
    "step",
    [
        dict(pf_N=1, pf_q=1, pf_pre=1999),  # a plan's concurrency-1 chunk: one token past 1,999
        dict(pf_N=1, pf_q=2, pf_pre=2100),
        dict(pf_N=1, pf_q=300, pf_pre=2000),
        dict(pf_N=2, pf_q=2000, pf_pre=0),
        dict(dec_B=1, dec_S=2001),
        dict(dec_B=2, dec_S=2100),
        dict(dec_B=4, dec_S=2500),
    ],
)
def test_minimax_m3_attention_flops_are_the_hand_count(step):
    """MiniMax-M3's attention cores (3 full layers, 57 block-sparse ones of the top 16 blocks
    of 128 keys) at steps off the reference ones: 4 x heads x head width FLOPs per (query,
    key) pair, the pairs counted by hand. Before, the msa prompt core's template read the
    2,048 chosen keys as a sliding window (a chunk past 2,048 keys counts its queries' last
    blocks whole), its fit was not affine, and a one-token chunk after 1,999 keys came out at
    -17,856,125 FLOPs: ``mlacalc plan minimax-m3 -H B200 --gpus 8 --engine vllm --isl 2000
    --osl 500 --concurrency 1`` failed with that internal error; decode past 2,048 keys
    counted 2,048 keys where the query's last block holds fewer."""
    m = load_model("minimax-m3")
    sm = StepModel(m, make_layout(m, 1), None, resolve_kv_layout("bf16"),
                   load_hardware("B200"), None, engine="vllm")  # fmt: skip
    B, T = m.sparse_block_size, m.sparse_topk_blocks
    full = [i for i in range(m.num_hidden_layers) if not m.is_sparse_layer(i)]
    per_pair = 4 * m.num_attention_heads * m.head_dim
    if "dec_B" in step:
        n, q, prefix = step["dec_B"], 1, step["dec_S"] - 1
    else:
        n, q, prefix = step["pf_N"], step["pf_q"], step["pf_pre"]
    dense = q * prefix + q * (q + 1) // 2
    sparse = _msa_pairs(q, prefix, B, T)
    want = n * per_pair * (len(full) * dense + (m.num_hidden_layers - len(full)) * sparse)
    got = sum(k.flops * k.calls for k in sm.kernels(**step) if k.name == "attention")
    assert got == pytest.approx(want, rel=1e-9)


@pytest.mark.parametrize("hw", ["B200", "H100-SXM", "H200-SXM"])
@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm"])
def test_minimax_m3_plans_at_low_concurrency(hw, engine):
    """The plans that raised the negative-FLOPs internal error (vllm and sglang at
    concurrency 1 and 2) run, at every device (H100 on 16 GPUs: 8 do not hold the weights)."""
    from mlacalc import plan

    gpus = 16 if hw.startswith("H100") else 8
    for c in (1, 2, 4):
        p = plan("minimax-m3", hw, gpus=gpus, engine=engine, isl=2000, osl=500, concurrency=c)
        assert p.fits and p.tpot_s > 0
