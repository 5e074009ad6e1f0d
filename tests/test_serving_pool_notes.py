"""Layouts a plan builds that cost more than they seem, said in its warnings (text and JSON):
a prefill pool that splits each expert over many GPUs, and tensor parallelism over the network
(a new-user trial, trial 9: both were accepted without a word)."""

from __future__ import annotations

import json
import re

import pytest

import mlacalc

DISAGG = dict(tp=1, dp_attention=True, ep=72, redundant_experts=32, mode="disaggregated",
              isl=2000, osl=1, concurrency=100)  # fmt: skip


def test_a_prefill_pool_that_splits_its_experts_says_so():
    # before: 'TP1 DP-attention4096 EP32 MoE-TP128', one 2,000-token prompt 9.1 s, no word.
    # DeepSeek-V3's 16-column shards under its 128x128 fp8 blocks are refused now (the
    # engines load whole blocks, tests/test_plan_wide_ep.py); bf16 DeepSeek-V2's 12-column
    # shards load, and are said
    with pytest.raises(mlacalc.MlacalcError) as exc:
        mlacalc.plan("deepseek-v3", "H200", 72, prefill_gpus=4096, prefill_ep=32, **DISAGG)
    said = str(exc.value)
    assert said.startswith("prefill_ep: 4096-GPU prefill pool: ") and "(MoE-TP128)" in said
    assert "--prefill-ep 256 (with --prefill-redundant-experts 256)" in said
    v2 = dict(DISAGG, ep=32, redundant_experts=0)
    p = mlacalc.plan("deepseek-v2", "H200", 32, prefill_gpus=4096, prefill_ep=32, **v2)
    assert p.prefill_layout.endswith("MoE-TP128")
    said = [w for w in p.warnings if "each expert is split 128 ways" in w]
    assert said and "--prefill-ep" in said[0] and "--prefill-gpus" in said[0]
    whole = mlacalc.plan("deepseek-v2", "H200", 32, prefill_gpus=32, prefill_ep=32, **v2)
    assert not any("each expert is split" in w for w in whole.warnings)


def test_tensor_parallelism_over_the_network_says_so(run):
    # before: TP16 over two H100 nodes, no word
    p = mlacalc.plan("deepseek-v3", "H100-SXM", 16, tp=16, seq_len=4096, batch=64)
    said = [w for w in p.warnings if "tensor-parallel all-reduce crosses the network" in w]
    assert said and "tp 16 spans 2 scale-up domains" in said[0]
    assert f"{p.step_links_s * 1e3:,.1f} ms of links" in said[0]
    within = mlacalc.plan("deepseek-v3", "H100-SXM", 16, tp=8, pp=2, seq_len=4096, batch=64)
    assert not any("crosses the network" in w for w in within.warnings)
    out, _ = run("plan", "deepseek-v3", "-H", "H100-SXM", "--gpus", 16, "--tp", 16,
                 "--seq-len", 4096, "--batch", 64, "--format", "json")  # fmt: skip
    assert any("crosses the network" in w for w in json.loads(out)["warnings"])


def test_a_prefill_pool_ep_derived_below_the_decode_pools_says_so():
    # before: decode ep 32 on 16 prefill GPUs ran the pool at ep 16, shown only in its layout
    pools = dict(tp=8, dp_attention=True, ep=32, mode="disaggregated", isl=4000, osl=1000,
                 concurrency=512)  # fmt: skip
    p = mlacalc.plan("deepseek-v3", "H200", 64, prefill_gpus=16, **pools)
    assert p.prefill_layout.endswith("EP16")
    said = [w for w in p.warnings if w.startswith("the prefill pool runs at ep 16, not")]
    assert said and "decode pool's 32" in said[0] and "pool's 16 GPUs and its 256" in said[0]
    assert "--prefill-ep" in said[0]
    for quiet in (dict(prefill_gpus=16, prefill_ep=16), dict(prefill_gpus=32)):
        q = mlacalc.plan("deepseek-v3", "H200", 64, **quiet, **pools)
        assert not any("the prefill pool runs at ep" in w for w in q.warnings), quiet


def test_routed_experts_split_over_the_network_say_so_with_the_ep_that_fixes_it(run):
    """TP1 DP-attention on 64 H200 with no --ep split each routed expert 64 ways over 8 nodes
    (MoE-TP64: TPOT 1,151.8 ms at 512 in flight, slower with more GPUs) with no word (a
    capacity planner's trial); tp 16 over two nodes was said. Now the MoE's split is said
    with the --ep that keeps experts whole, and that layout says nothing."""
    kw = dict(tp=1, dp_attention=True, isl=1000, osl=1000, concurrency=512)
    # DeepSeek-V3's MoE-TP64 (32-column shards under 128x128 fp8 blocks) is refused now
    # (tests/test_plan_wide_ep.py); bf16 DeepSeek-V2's (24 columns) loads, and is said
    with pytest.raises(mlacalc.MlacalcError, match="MoE-TP64"):
        mlacalc.plan("deepseek-v3", "H200", 64, **kw)
    p = mlacalc.plan("deepseek-v2", "H200", 64, **kw)
    said = [w for w in p.warnings if "(MoE-TP64) span 8 scale-up domains" in w]
    assert len(said) == 1 and said[0].endswith("--ep 32"), p.warnings  # 160 experts
    for quiet in (dict(gpus=64, ep=32), dict(gpus=8)):
        n = quiet.pop("gpus")
        q = mlacalc.plan("deepseek-v2", "H200", n, **quiet, **kw)
        assert not any("scale-up domains" in w for w in q.warnings), quiet
    out, _ = run("plan", "deepseek-v2", "-H", "H200", "--gpus", 64, "--tp", 1,
                 "--dp-attention", "--isl", 1000, "--osl", 1000, "--concurrency", 512,
                 "--format", "json")  # fmt: skip
    assert any("(MoE-TP64)" in w for w in json.loads(out)["warnings"])


@pytest.mark.parametrize(
    ("kw", "advice"),
    [
        (dict(gpus=8), "; add GPUs or use a smaller weight dtype"),  # TP8: tp and ep at most
        (dict(gpus=8, tp=1, dp_attention=True, ep=8), "; add GPUs, raise tp or use a smaller"),
        (dict(gpus=8, tp=2), "; add GPUs, raise tp/ep or use a smaller weight dtype"),
        (dict(gpus=4, weight_dtype="fp4"), "; add GPUs"),  # 4 bits: no smaller dtype
    ],
)
def test_weights_that_do_not_fit_are_told_only_the_levers_that_help(kw, advice):
    """DeepSeek-V3 on 8 H100 at TP8 was told to "raise tp/ep", already at their most on 8
    GPUs (a capacity planner's trial): the advice names only what can shrink the weights."""
    n = kw.pop("gpus")
    p = mlacalc.plan("deepseek-v3", "H100-SXM", n, **kw, isl=1000, osl=1000)
    # the fewest GPUs that fit, in brackets after "add GPUs" (test_add_gpus_says_how_many)
    overflow = re.sub(r"add GPUs \(\d[^:]*: the fewest [^)]*\)", "add GPUs", p.overflow)
    assert overflow.startswith("weights:") and advice in overflow, p.overflow
    if advice == "; add GPUs":
        assert overflow.endswith(advice)


@pytest.mark.parametrize(
    ("model", "hw", "gpus", "kw", "fewest"),
    [
        ("deepseek-v3", "H200", 8, dict(weight_dtype="bf16", seq_len=32768), 16),
        ("llama-3.1-70b", "H100-SXM", 2, dict(seq_len=131072, kv_dtype="bf16"), 4),
        ("llama-3.1-70b", "H100-SXM", 1, dict(seq_len=32768, pp=1), 2),
    ],
)
def test_add_gpus_says_how_many(model, hw, gpus, kw, fewest):
    """A plan that does not fit said "add GPUs" with no count (trial 30: DeepSeek-V3 in bf16
    on 8 H200 at 32K); it now names the fewest GPUs of its layout's kind that hold the weights
    and one sequence's cache at the asked context: a plan there fits, and none of the same
    kind between fits."""
    p = mlacalc.plan(model, hw, gpus, **kw)
    assert not p.fits and f"add GPUs ({fewest} at " in p.overflow, p.overflow
    assert f"--gpus {fewest}: the fewest of this layout's kind" in p.overflow
    assert mlacalc.plan(model, hw, fewest, **kw).fits  # TP over all its GPUs, as asked
    for below in range(gpus + 1, fewest):
        try:
            q = mlacalc.plan(model, hw, below, **kw)
        except mlacalc.MlacalcError:  # no layout of the kind (TP12 of 128 heads)
            continue
        assert not q.fits, below


def test_a_cache_no_gpu_count_holds_names_the_context_not_more_gpus():
    """One sequence of 100M tokens of DeepSeek-V3 on 8 H200 (its latent copied on every TP
    rank) was told "add GPUs (no layout of this kind up to 512 GPUs holds them)": no count
    helps, so the advice is a shorter context or a narrower cache (here Llama-3-8B's 8 KV
    heads, copied past TP8, at 1G tokens on one GPU: none up to 64 holds it)."""
    p = mlacalc.plan("llama-3-8b", "H200", 1, seq_len=2**30)
    assert not p.fits and p.overflow.startswith("kv cache: one sequence"), p.overflow
    assert "add GPUs" not in p.overflow
    assert p.overflow.endswith("GPUs holds them: use a shorter context or a narrower --kv-dtype")
