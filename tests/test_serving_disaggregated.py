"""Disaggregated serving: the closed loop's and the open loop's accounting of the requests in
flight."""

import numpy as np
import pytest

from mlacalc import plan, search
from mlacalc.cli.plan_cmd import serving_rows
from mlacalc.cost.engine import as_model
from mlacalc.hardware.catalogue import load_hardware
from mlacalc.serving.gpu_step import StepModel
from mlacalc.serving.layout import make_layout
from mlacalc.serving.plan import PREFILL_TOKENS
from mlacalc.timemodel.profile import load_profile
from mlacalc.words.dtypes import resolve_kv_layout

# 16 decode GPUs (DP-attention 16, EP16) and an 8-GPU prefill pool (DP-attention 8, EP8)
SETUP = dict(tp=1, dp_attention=True, ep=16, mode="disaggregated", prefill_gpus=8)
ISL = 2000


def _plan(**kw):
    return plan("deepseek-v3", "H200", 16, isl=ISL, **SETUP, **kw)


def _pool(p):
    """The prefill pool's groups and t_pf[k] (a pass of k prompts, k = 0 .. k_max)."""
    m = as_model("deepseek-v3")
    lay = make_layout(m, p.prefill_gpus, p.prefill_tp, None, 1, p.prefill_ep,
                      p.prefill_dp_attention, p.prefill_redundant_experts)  # fmt: skip
    sm = StepModel(m, lay, None, resolve_kv_layout(p.kv_layout), load_hardware("H200"),
                   load_profile(None))  # fmt: skip
    ks = np.arange(1.0, PREFILL_TOKENS // ISL + 1)
    return lay.dp, np.concatenate([[0.0], sm.step(overlap=p.overlap, pf_N=ks, pf_q=ISL).seconds])


def _little(p, n, osl):
    """The most a closed loop of n requests can produce: n per cycle of TTFT + osl TPOTs."""
    return n / (p.ttft_s + osl * p.tpot_s) * osl


# ---------------------------------------------------------------- 1: the closed loop
def test_closed_loop_counts_only_the_requests_decoding():
    """8 users, 16 output tokens: 475 tok/s with every user counted as decoding, but a user
    spends TTFT + 16 TPOTs per request; the decode batch is the users in their decode phase,
    and TTFT comes from the prompt rate those users make (was 0.775 s from 3.7 prompts/s per
    prefill group that 8 users do not supply)."""
    p = _plan(osl=16, concurrency=8)
    assert p.output_tokens_per_s <= _little(p, 8, 16) * (1 + 1e-9)  # was 475 > 122
    X = p.output_tokens_per_s / 16  # requests/s
    assert p.decode_running == pytest.approx(X * 16 * p.tpot_s, rel=1e-6)
    assert p.decode_running < 8
    groups, t_pf = _pool(p)
    rho = X / groups * t_pf[1]  # passes of one prompt keep up
    assert rho < 1
    assert p.ttft_s == pytest.approx(t_pf[1] * (1 + rho / 2) + p.kv_transfer_s, rel=1e-6)
    assert p.ttft_s < 0.4


@pytest.mark.parametrize("osl", [16, 500])
def test_closed_loop_throughput_obeys_littles_law_across_a_sweep(osl):
    for n in (8, 64, 512, 768, 1024, 2048):
        p = _plan(osl=osl, concurrency=n)
        assert p.output_tokens_per_s <= _little(p, n, osl) * (1 + 1e-6), (n, osl)
        assert p.output_tokens_per_s == pytest.approx(_little(p, n, osl), rel=1e-6)


def test_prefill_bound_closed_loop_queues_for_the_prefill_pool():
    """Past the prefill pool's rate, TTFT grows with the users (was 3.001 s at 768, 1,024 and
    2,048 users, rho capped at 1): the extra users wait n_extra / throughput."""
    ps = {n: _plan(osl=500, concurrency=n) for n in (1024, 2048)}
    X = ps[1024].output_tokens_per_s / 500
    assert ps[2048].output_tokens_per_s == pytest.approx(ps[1024].output_tokens_per_s)
    assert ps[2048].ttft_s - ps[1024].ttft_s == pytest.approx(1024 / X, rel=1e-6)
    assert ps[1024].ttft_s > 5
    assert any("prefill-bound" in w for w in ps[1024].warnings)
    assert ps[1024].binding == "prefill pool" and ps[1024].queued > 0
    # requests waiting for the prefill pool: it does not keep up with the offered load (was
    # sustainable=True beside 17,626 of 18,432 requests queued, TTFT 138 s, in a trial)
    assert not ps[1024].sustainable
    said = dict(serving_rows(ps[1024]))["sustainable"]
    assert said.startswith("no: ") and "wait for the prefill pool" in said
    # the two pools' rates are keys (were only in the prefill-bound warning's words)
    pf, dec = ps[1024].prefill_pool_requests_per_s, ps[1024].decode_pool_requests_per_s
    assert pf == pytest.approx(X, rel=1e-6) and dec > pf
    assert f"{pf:.3g} prompts/s" in " ".join(ps[1024].warnings)
    # below the prefill pool's rate, nothing queues and nothing is prefill-bound
    p = _plan(osl=500, concurrency=64)
    assert not p.queued and not any("prefill-bound" in w for w in p.warnings)
    assert p.binding != "prefill pool"
    assert p.sustainable and p.prefill_pool_requests_per_s > p.output_tokens_per_s / 500


def test_search_disaggregated_points_count_the_requests_in_flight():
    """A disaggregated point is its decode batch plus the requests in the prefill pool and
    the KV transfer at its request rate, and plan of that concurrency equals it."""
    r = search("deepseek-v3", "H200", [8, 16], isl=ISL, osl=500)
    dis = [p for p in r.points if p["mode"] == "disaggregated"]
    assert dis
    for q in dis:
        X = q["output_tokens_per_s"] / 500
        decoding = q["batch_per_group"] * q["dp"]
        assert q["concurrency"] == pytest.approx(decoding + X * q["ttft_s"], rel=1e-9)
        assert q["output_tokens_per_s"] <= q["concurrency"] / (
            q["ttft_s"] + 500 * q["tpot_s"]
        ) * 500 * (1 + 1e-9)
    for q in dis[:: max(len(dis) // 6, 1)]:
        p = plan("deepseek-v3", "H200", q["decode_gpus"], tp=q["tp"], ep=q["ep"], pp=q["pp"],
                 dp_attention=q["dp_attention"], redundant_experts=q["redundant_experts"],
                 overlap=q["overlap"], kv_dtype=q["kv_dtype"], isl=ISL, osl=500,
                 concurrency=q["concurrency"], mode="disaggregated",
                 prefill_gpus=q["prefill_gpus"], prefill_tp=q["prefill_tp"],
                 prefill_ep=q["prefill_ep"], prefill_dp_attention=q["prefill_dp_attention"],
                 prefill_redundant_experts=q["prefill_redundant_experts"])  # fmt: skip
        assert p.decode_running == pytest.approx(q["batch_per_group"] * q["dp"], rel=1e-6)
        assert p.ttft_s == pytest.approx(q["ttft_s"], rel=1e-6)
        assert p.tpot_s == pytest.approx(q["tpot_s"], rel=1e-6)
        assert p.output_tokens_per_s == pytest.approx(q["output_tokens_per_s"], rel=1e-6)


# ---------------------------------------------------------------- 2: the open loop
def test_open_loop_uses_one_pass_size_from_the_arrival_rate():
    """At 30 requests/s TTFT was t_pf[3] (a pass size from a decode-derived demand that
    counted the prompts still in prefill) plus an M/D/1 wait at passes of 2: one pass size
    from the arrival rate on a group, for both, the one of those that keep up with the least
    pass and M/D/1 wait together (it was the smallest that keeps up: 2 prompts and a 14.1 s
    wait, where 3 prompts wait 8.2 s); the decode batch is the arrival rate times the decode
    time (osl TPOTs), not the requests in prefill; the requests queued for the prefill pool
    are the rate times their wait (Little's law; it said "queued 0")."""
    R = 30.0
    p = _plan(osl=500, request_rate=R)
    groups, t_pf = _pool(p)
    d = R / groups

    def spent(k):
        rho = min(d * t_pf[k] / k, 0.999)
        return t_pf[k] * (1 + rho / (2 * (1 - rho)))

    up = [k for k in range(1, len(t_pf)) if k / t_pf[k] >= d]
    k = min(up, key=spent)
    assert k > up[0] and spent(k) < 0.7 * spent(up[0])  # not the smallest that keeps up
    assert p.prefill_pool_pass_prompts == k
    assert p.ttft_s == pytest.approx(spent(k) + p.kv_transfer_s, rel=1e-6)
    assert p.queued == pytest.approx(R * (spent(k) - t_pf[k]), rel=1e-6)
    assert p.decode_running == pytest.approx(R * 500 * p.tpot_s, rel=1e-6)
    assert p.output_tokens_per_s == pytest.approx(R * 500)
    # the requests in flight: Little's law over the whole request
    assert p.concurrency == pytest.approx(R * (p.ttft_s + 500 * p.tpot_s), rel=1e-6)


def test_ttft_says_its_parts_the_wait_for_the_prefill_pool_first():
    """A disaggregated TTFT is the wait for the prefill pool, the prompt's pass there and the
    KV transfer (Plan.ttft_parts, printed under TTFT and shown by the app): at 30 requests/s
    on DeepSeek-V3 (8 + 8 H200, DP-attention) TTFT was 14.7 s beside a prefill row of 275 ms
    and "queued 0", with nothing saying it is the wait for the pool's passes (now 8.9 s, of
    it 8.2 s of wait, at passes of 3)."""
    from mlacalc.serving.plan import duration_text

    args = dict(dp_attention=True, ep=8, isl=2000, osl=500, mode="disaggregated")
    p = plan("deepseek-v3", "H200", 8, request_rate=30, **args)
    (wait, w), (its, s), (kv, t) = p.ttft_parts()
    assert wait == "of which the wait for the prefill pool" and kv == "of which the KV transfer"
    k = p.prefill_pool_pass_prompts
    assert its == f"of which its pass there ({k} prompt{'' if k == 1 else 's'} a group)"
    assert w + s + t == pytest.approx(p.ttft_s, rel=1e-12) and t == p.kv_transfer_s
    assert s == p.prefill_pool_pass_s >= p.prefill_s and w > 10 * s  # the wait binds
    # a closed loop says the same three; `mlacalc plan` prints them under TTFT
    c = plan("deepseek-v3", "H200", 8, concurrency=256, **args)
    assert sum(x for _, x in c.ttft_parts()) == pytest.approx(c.ttft_s, rel=1e-12)
    rows = [r[0] for r in serving_rows(c)]
    at = rows.index("TTFT")
    assert rows[at + 1 : at + 4] == [f"  {label}" for label, _ in c.ttft_parts()]
    assert duration_text(c.ttft_s) in dict(serving_rows(c))["TTFT"]
    # aggregated whole prompts: none
    assert plan("deepseek-v3", "H200", 8, dp_attention=True, ep=8, isl=2000, osl=500,
                concurrency=256).ttft_parts() == []  # fmt: skip
