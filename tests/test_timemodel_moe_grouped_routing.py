"""SGLang's and vLLM's ``moe_perf`` rows of DeepSeek-V3's shape under its group-limited top-k
(``moe_routing.GROUPED_ROUTING``): the collector's logits, routed by 8 groups keep 4, put most
of the call on the lowest experts, rank 0's."""

from __future__ import annotations

import numpy as np
import pytest
from reference_data import MEASURED

from mlacalc.measured.moe_routing import (
    _balanced_picks,
    _grouped_routed,
    _power_law_picks,
    _power_law_picks_of_draws,
    grouped_balanced_loads,
    grouped_rank_loads,
    power_law_draws,
)

EP = (1, 2, 4, 8, 16, 32, 64, 128, 256)


def test_balanced_picks_stride_over_the_experts():
    # one expert a group of 32: a stride of 256 / 8
    assert _balanced_picks(64, 8, 256)[33].tolist() == [(33 + 32 * i) % 256 for i in range(8)]
    assert _balanced_picks(1, 8, 256)[0].tolist() == [32 * i for i in range(8)]
    # fewer tokens than the stride: spread over it
    assert _balanced_picks(16, 8, 256)[3].tolist() == [6 + 32 * i for i in range(8)]


def test_balanced_logits_under_grouped_routing_fill_the_first_groups_lowest_experts():
    """Every group scores the same (one picked expert), so groups 0-3 are kept; each token keeps
    its 4 picks there and fills 4 more from experts 0-4 (0-3 but its own pick). Rank 0's share
    of the call at EP 1 to 256: 1, 1, 3/4, 5/8, 9/16, 17/32, 1/2, 1/4, 1/8 (plain round robin:
    1 / EP)."""
    tokens = 4096
    loads = grouped_balanced_loads(tokens, 8, 256, 8, 4)
    assert loads.sum() == tokens * 8
    assert loads[:4].tolist() == [tokens] * 4 and loads[128:].sum() == 0
    share = [loads[: 256 // ep].sum() / (tokens * 8) for ep in EP]
    want = [1, 1, 3 / 4, 5 / 8, 9 / 16, 17 / 32, 1 / 2, 1 / 4, 1 / 8]
    assert share == pytest.approx(want)


def test_power_law_logits_keep_every_assignment_under_grouped_routing():
    n = 3
    r = grouped_rank_loads(
        np.array([4096, 4096, 64]), np.full(n, 8), np.full(n, 256), np.array([1, 8, 8]),
        np.full(n, 8), np.full(n, 4), np.array([1.2, 1.2, 1.01]),
    )  # fmt: skip
    assert r.assignments[0] == pytest.approx(4096 * 8)  # EP 1: the whole call
    # the collector's straggler rank before routing carries less than the routed rank 0
    plain = power_law_draws(4096, 8, 256, 1.2).reshape(-1, 8, 32).sum(axis=2).max(axis=1)
    assert r.assignments[1] > 1.3 * plain.mean()
    assert (r.row_tiles[:, 0] >= r.active_experts).all()


def _deepseek_rows(system, engine, version):
    from mlacalc.measured.mapping import map_table
    from mlacalc.measured.tables import load_measured

    path = MEASURED / system / "moe" / engine / version / "moe_perf.parquet"
    (t,) = load_measured(path).tables
    c = t.columns
    shape = (
        (c["hidden_size"] == 7168)
        & (c["inter_size"] == 2048)
        & (c["num_experts"] == 256)
        & (c["topk"] == 8)
    )
    return t, map_table(t), shape


@pytest.mark.parametrize(
    "system, engine, version, profile, bound",
    [
        # fitted |error| of the shape's balanced rows, median: 21.0% (block-scaled fp8) and
        # 17.9% (nvfp4) with round-robin loads, 7.6% and 6.8% with these
        ("b200_sxm", "sglang", "0.5.14", "fit-b200-sxm-sglang", 0.09),
        # H100's Triton block-scaled fp8 rows: 23.9% -> 5.4%
        ("h100_sxm", "sglang", "0.5.14", "fit-h100-sxm-sglang", 0.07),
        # FlashInfer's CUTLASS (35.3% -> 4.9%) and the Triton (40.3% -> 3.4%) block-scaled rows
        ("h100_sxm", "vllm", "0.24.0", "fit-h100-sxm-vllm", 0.07),
    ],
)
def test_deepseek_v3_shaped_balanced_rows_under_grouped_routing(
    system, engine, version, profile, bound
):
    """The measured evidence: the shape's balanced rows take at EP 2 the time of EP 1 (4,096
    tokens and more), where every other shape's take about half; predicted at the bound."""
    pytest.importorskip("pyarrow")
    from mlacalc.measured.observations import predict_mapped

    t, m, shape = _deepseek_rows(system, engine, version)
    c = t.columns
    bal = shape & (c["distribution"] == "balanced") & m.modelled
    big = bal & (c["num_tokens"] >= 4096) & (c["moe_tp_size"] == 1)
    ep1 = {(str(c["kernel_source"][i]), c["num_tokens"][i]): t.seconds[i]
           for i in np.nonzero(big & (c["moe_ep_size"] == 1))[0]}  # fmt: skip
    ratio = [t.seconds[i] / ep1[k] for i in np.nonzero(big & (c["moe_ep_size"] == 2))[0]
             if (k := (str(c["kernel_source"][i]), c["num_tokens"][i])) in ep1]  # fmt: skip
    if ratio:  # (vLLM's H100 CUTLASS rows start at EP 2)
        assert np.median(ratio) > 0.95
    pred = predict_mapped(m, None, profile)
    err = np.abs(pred[bal] / t.seconds[bal] - 1.0)
    assert len(err) > 300 and np.median(err) <= bound


def test_trtllm_tables_keep_the_round_robin_loads():
    """TensorRT-LLM's collector renormalizes a plain top-k: its CUTLASS rows of the shape halve
    at EP 2 (EP 2 / EP 1 at 4,096 tokens and more, TP 1: 0.47)."""
    pytest.importorskip("pyarrow")
    t, m, shape = _deepseek_rows("h100_sxm", "trtllm", "1.3.0rc20")
    c = t.columns
    checked = 0
    for part in (p for p in m.parts if p.batch.kind == "moe"):
        rows = part.rows
        sel = shape[rows] & (c["distribution"][rows] == "balanced")
        sel &= c["num_tokens"][rows] == 4096
        ep = c["moe_ep_size"][rows][sel]
        assert np.allclose(part.batch.shape["assignments"][sel] * ep, 4096 * 8)
        checked += int(sel.sum())
    assert checked > 0


def test_trtllm_gen_min_latency_rows_route_by_groups():
    """TensorRT-LLM-gen's min-latency MoE (TensorRT-LLM's B200 ``moe_torch_flow_min_latency``
    rows) routes inside itself by groups at top-8, every shape (128, 160 and 256 experts): its
    balanced rows take at EP 2 the time of EP 1 (4,096 tokens and more, TP 1; its CUTLASS rows
    of the same calls about half), and the mapping gives them rank 0's grouped loads. Fitted
    median |error| of those balanced rows: 14.6% with round-robin loads, 8.0% with these."""
    pytest.importorskip("pyarrow")
    from mlacalc.measured.mapping import map_table
    from mlacalc.measured.observations import predict_mapped
    from mlacalc.measured.tables import load_measured

    path = MEASURED / "b200_sxm" / "moe" / "trtllm" / "1.3.0rc20" / "moe_perf.parquet"
    (t,) = load_measured(path).tables
    c = t.columns
    src = c["kernel_source"].astype(str)
    sel = (src == "moe_torch_flow_min_latency") & (c["topk"] == 8)
    bal = sel & (c["distribution"] == "balanced")
    big = bal & (c["num_tokens"] >= 4096) & (c["moe_tp_size"] == 1)
    key = ("hidden_size", "inter_size", "num_experts", "num_tokens")
    ep1 = {tuple(c[k][i] for k in key): t.seconds[i]
           for i in np.nonzero(big & (c["moe_ep_size"] == 1))[0]}  # fmt: skip
    ratio = [t.seconds[i] / ep1[k] for i in np.nonzero(big & (c["moe_ep_size"] == 2))[0]
             if (k := tuple(c[k][i] for k in key)) in ep1]  # fmt: skip
    assert len(ratio) > 20 and np.median(ratio) > 0.95
    assert len(set(c["num_experts"][bal].tolist())) >= 3
    m = map_table(t)
    # rank 0 of EP 2 holds the whole balanced call (round robin: half)
    for part in (p for p in m.parts if p.batch.kind == "moe"):
        rows = part.rows
        at = bal[rows] & (c["moe_ep_size"][rows] == 2) & (c["num_tokens"][rows] == 4096)
        assert np.allclose(part.batch.shape["assignments"][at], 4096 * 8)
    pred = predict_mapped(m, None, "fit-b200-sxm")
    ok = bal & m.modelled
    err = np.abs(pred[ok] / t.seconds[ok] - 1.0)
    assert ok.sum() > 7000 and np.median(err) <= 0.09


def _routed_row_by_row(picks, count, experts, groups, kept):
    """Group-limited top-k of each row of picks as its docstring says it, one row at a time:
    groups scored by their picks (two at most), the ``kept`` best (lower index on ties), then
    the picks in those groups and the lowest-index other experts of those groups."""
    size = experts // groups
    out = np.zeros(experts)
    for row, n in zip(picks.tolist(), count.tolist(), strict=True):
        score = [min(sum(e // size == g for e in row), 2) for g in range(groups)]
        keep = sorted(range(groups), key=lambda g: (-score[g], g))[:kept]
        pool = [e for e in range(experts) if e // size in keep]
        chosen = sorted(pool, key=lambda e: (e not in row, e))[: len(row)]
        out[chosen] += n
    return out


@pytest.mark.parametrize("tokens, alpha, ep", [(3, 1.2, 8), (40, 0.5, 4), (200, 1.5, 32)])
def test_grouped_routing_of_power_law_picks_as_row_by_row(tokens, alpha, ep):
    """The vectorised routing (a sparse path for distinct picks in groups of 32) gives the
    loads a row-by-row reading of the rule gives, for one draw's picks of a few calls."""
    loads = power_law_draws(tokens, 8, 256, alpha, draws=2)
    for draw in loads:
        picks, count = _power_law_picks(draw, 8, ep)
        want = _routed_row_by_row(picks, count, 256, 8, 4)
        assert np.array_equal(_grouped_routed(picks, count, 256, 8, 4), want)


@pytest.mark.parametrize("tokens, alpha, ep", [(1, 1.2, 1), (40, 0.5, 4), (4096, 1.01, 32)])
def test_picks_of_every_draw_at_once_as_draw_by_draw(tokens, alpha, ep):
    """The picks of a call's draws found at once (speed only) are each draw's picks, draw by
    draw, with their token counts and draws; a call's cached draws come back as a copy."""
    loads = power_law_draws(tokens, 8, 256, alpha)
    picks, count, draw = _power_law_picks_of_draws(loads, 8, ep)
    for d, row in enumerate(loads):
        want_picks, want_count = _power_law_picks(row, 8, ep)
        assert np.array_equal(picks[draw == d], want_picks)
        assert np.array_equal(count[draw == d], want_count)
    loads[0, 0] = -1.0
    assert power_law_draws(tokens, 8, 256, alpha)[0, 0] >= 0
