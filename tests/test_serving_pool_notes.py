"""Layouts a plan builds that cost more than they seem, said in its warnings (text and JSON):
a prefill pool that splits each expert over many GPUs, and tensor parallelism over the network
(a new-user trial, trial 9: both were accepted without a word)."""

from __future__ import annotations

import json

import mlacalc

DISAGG = dict(tp=1, dp_attention=True, ep=72, redundant_experts=32, mode="disaggregated",
              isl=2000, osl=1, concurrency=100)  # fmt: skip


def test_a_prefill_pool_that_splits_its_experts_says_so():
    # before: 'TP1 DP-attention4096 EP32 MoE-TP128', one 2,000-token prompt 9.1 s, no word
    p = mlacalc.plan("deepseek-v3", "H200", 72, prefill_gpus=4096, prefill_ep=32, **DISAGG)
    assert p.prefill_layout.endswith("MoE-TP128")
    said = [w for w in p.warnings if "each expert is split 128 ways" in w]
    assert said and "--prefill-ep" in said[0] and "--prefill-gpus" in said[0]
    whole = mlacalc.plan("deepseek-v3", "H200", 72, prefill_gpus=32, prefill_ep=32, **DISAGG)
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
