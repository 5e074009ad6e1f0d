"""A search times each distinct kernel once and shares step models between replicas
(:func:`mlacalc.serving.search_space.time_candidates`, the step cache of a
:class:`~mlacalc.serving.search_space.SearchRequest`); the answer is the one it gave before
(the speed is measured by ``benchmarks/bench_search.py``, not asserted here)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from mlacalc.serving.gpu_step import StepModel, time_jobs
from mlacalc.serving.scheduler import Scheduler
from mlacalc.serving.search import BATCHES, check_search, search
from mlacalc.serving.search_space import candidates, time_candidates


def _request(budget: int):
    return check_search(
        "deepseek-v3",
        "H200",
        budget,
        isl=2000,
        osl=500,
        ttft=None,
        tpot=0.05,
        weight_dtypes=None,
        kv_dtypes=("bf16", "fp8"),
        modes=("aggregated", "disaggregated"),
        overlaps=("none", "tbo"),
        batches=BATCHES,
        memory_reserve=0.1,
        page_size=16,
        prefill_pass="fused",
        output_lag_steps=0,
        profile=None,
        scheduler=Scheduler(),
    )


def test_shared_kernels_time_as_each_candidate_alone():
    """Candidates of a 32-GPU budget: replicas share their kernels (fewer distinct kernel
    lists than candidates: 160 of 164), each candidate's step model holds its own layout, and
    every kernel's seconds equal those of the candidate timed alone with a step model built
    for its own layout. (A 16-GPU budget's shared lists, 68 of 94, were DP-attention layouts
    of one attention group a stage timed beside the same layout without it, now one layout:
    its 8- and 16-GPU replicas run different rows, the 16-GPU ones pairing no prefill pool.)"""
    req = _request(32)
    cands = candidates(req, Counter())
    assert len({id(c.specs) for c in cands}) < len(cands)
    shared = Counter(id(c.specs) for c in cands)
    together = time_candidates(cands, req.profile)
    checked = 0
    for c, secs in zip(cands, together):
        if shared[id(c.specs)] < 2:
            continue
        checked += 1
        assert c.sm.lay is c.lay
        own = StepModel(
            req.m, c.lay, None, c.kv_layout, req.hw, req.profile, scheduler=req.scheduler
        )
        # the shared kernels (built for another layout of the same splits) are the kernels
        # a step model built for this layout gives at the candidate's rows
        dec_B, pf_N, pf_q, pf_moe, pf_pre = c.rows
        fresh = own.specs(
            dec_B=dec_B, dec_S=req.S_avg, pf_N=pf_N, pf_q=pf_q, pf_moe=pf_moe, pf_pre=pf_pre
        )
        for a, b in zip(fresh, c.specs, strict=True):
            assert (a.name, a.kind, a.dtype, a.comm, a.n_gpus, a.network, a.calls) == (
                b.name, b.kind, b.dtype, b.comm, b.n_gpus, b.network, b.calls
            )  # fmt: skip
            np.testing.assert_array_equal(a.flops, b.flops)
            np.testing.assert_array_equal(a.bytes, b.bytes)
            assert a.shape.keys() == b.shape.keys()
            for key in a.shape:
                np.testing.assert_array_equal(a.shape[key], b.shape[key])
        if checked > 8:  # the kernels' seconds for a few
            continue
        alone = time_jobs([(own, c.specs)], req.profile)[0]
        for a, b in zip(secs, alone):
            np.testing.assert_array_equal(a, b)
        for ov in c.overlaps:
            sl = c.slices[(ov, "dec")]
            np.testing.assert_array_equal(
                c.sm.compose(c.specs, secs, ov, sl, False).seconds,
                own.compose(c.specs, alone, ov, sl, False).seconds,
            )
    assert checked


def test_the_64_gpu_answer_is_the_one_before_the_kernels_were_shared():
    """DeepSeek-V3 on a budget of 64 H200 (2,000 + 500 tokens, TPOT 50 ms), the search of
    docs/speed.md: the same points and best as when every candidate was timed on its own
    (commit 29fb6cc; the figures move only with the time model and the step's composition:
    since every setup that could pass the best is refined (search.refine_bound) the best is
    TP2 DP-attention16 EP32, fp8 cache, at 191 sequences per group, 65,671 tokens/s, TTFT
    0.357 s, TPOT 46.53 ms, 20,745 points of 512 layouts (bf16 at 186, 64,894 tokens/s, TTFT
    2.220 s, TPOT 45.86 ms, 20,328 points before DeepSeek's group-limited routing was counted
    in the prompt passes' exchange across nodes, be342fc9: fewer remote nodes a token, a prefill
    pool no longer busy; 26,311 of 748 before a MoE-TP degree
    that cannot split the experts' 2,048 columns into whole 128-column fp8 blocks was refused,
    layout._moe_tp_splits, the best unchanged; 26,268 before refinement went on next
    to a setup's best while a gap beside it could pass the best found, search.refine_gaps, the
    best unchanged; 26,213 and 64,865 before MLA decode's
    512-key first split on Blackwell and its split units' wait, split_wait_s; 26,367 and 64,863
    before MLA decode's
    whole query tiles and its rate cap, 28592c0, refitted the default profile's MLA decode
    classes; 30,551 of 824 before DP-attention
    over one attention group a stage was timed once, as the same layout without it, the best
    unchanged; 29,841 before refinement's bound took a dip's margin, search.DIP_MARGIN, the
    best unchanged; 15,912 of 416 before the search's own
    layouts put expert parallelism inside pipeline stages, 32e7c03, the best unchanged; 13,692
    points before refinement, the best
    TP4 DP-attention8 EP32, fp8 cache, at 353, 64,081 tokens/s, TTFT 1.4977 s, TPOT 44.07 ms;
    64,096 tokens/s, TTFT 1.4978 s, TPOT 44.06 ms and 13,670 points before cuBLAS's
    persistent GEMMs balanced their last wave, gemm_time.BALANCED_WAVES, the best's layout
    and batch unchanged, since two-batch overlap ran decode in five stages; 17,115 points
    of 540 layouts before an ep above tp over several attention groups was DP-attention,
    86233e9: its layouts without DP-attention were the same layouts timed again, now merged;
    the best unchanged;
    63,668 tokens/s, 1.4945 s, 44.36 ms and 17,380 points before the MoE classes were refitted
    with a power-law row's experts padded one by one, c1c8015, the best's layout and batch
    unchanged; 17,284 before each aggregated size's best was refined under a budget, the best
    unchanged;
    17,815 before a random routing's experts each got rows spread about their mean, not
    every one the mean, moe_time.ROWS_SPREAD: steps just past a tile's rows got faster and
    those at one slower, the best point unchanged; 17,283 before the catalogue held an
    H200's 141 GiB, not 141e9 B: more batches fit;
    372 a group, 64,553.03, TTFT 1.8589 s, TPOT 46.102 ms before every engine's experts behind
    DeepEP ran over the copies a rank receives and routed its own tokens once, 56179d5; 64,559.72
    and 17,059 points, TTFT 1.859 s, before FlashMLA's combine launch on every call, 0e13c55;
    64,561.44, TTFT 1.85901 s, TPOT 46.0956 ms, before the persistent bf16 GEMM paid its wave
    cost once a call on Hopper, gemm_time.PERSISTENT_DTYPES; 64,519, 17,226 points, TTFT
    2.219 s, before a served step's element-wise kernels borrowed TensorRT-LLM's quantize fit,
    profile.ELEMENTWISE_STAND_INS: its norms, RoPE and activations 0.87 -> 0.62 ms of an H200
    TP8 decode step at batch 4; 65,312 at 392 before the prompt's key-assembly
    copy, baee41b, and the MoE's cost per local expert, c6962e1, with which the points went
    from 16,983 to 17,226; 64,244 before MLA's q_a and kv_a projections ran as one GEMM, with
    which the points the search keeps went from 16,867 to 16,983; 64,206 before Hopper's fp8
    MLA decode at the bf16 rate, 85d2e5b, and DeepEP's low-latency SMs per expert, 695bcd2,
    with which the points the search keeps went from 17,020 to 16,867; 64,207 before the MLA
    decode refit of 7bddb2b),
    where it was TP2 DP-attention16 EP32 at 186, 59,859), whole prompts only (the
    chunked-prefill points came later)."""
    r = search("deepseek-v3", "H200", 64, isl=2000, osl=500, tpot=0.05, chunked_prefills=None)
    b = r.best
    assert len(r.points) == 20745 and r.layouts == 512
    assert (b["mode"], b["decode_gpus"], b["prefill_gpus"]) == ("disaggregated", 32, 32)
    assert (b["layout"], b["prefill_layout"]) == (
        "TP2 DP-attention16 EP32",
        "TP1 DP-attention32 EP32",
    )
    assert (b["overlap"], b["kv_dtype"], b["batch_per_group"]) == ("tbo", "fp8", 191)
    assert b["budget_output_tokens_per_s"] == pytest.approx(65671.46507250995, rel=1e-9)
    assert b["ttft_s"] == pytest.approx(0.35683845752316457, rel=1e-9)
    assert b["tpot_s"] == pytest.approx(0.046534670676613855, rel=1e-9)
