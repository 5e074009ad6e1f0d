"""The fused MoE layer's time model (``moe`` kernels) and the MoE quirk rule."""

from __future__ import annotations

import numpy as np

from mlacalc.hardware import load_hardware
from mlacalc.kernels import KernelBatch
from mlacalc.measured.quirks import slower_than_more_work
from mlacalc.timemodel.device import device_figures
from mlacalc.timemodel.model import default_params, kernel_terms

FIG = device_figures(load_hardware("H100-SXM"))
HIDDEN, INTER = 4096, 1536  # local intermediate (gated: three matrices)


def _moe(dtype="bf16", tokens=(1,), active=None, top=None, topk=8, rows=None, **prm):
    """Terms of moe kernels on H100; ``rows``: the rank's (token, expert) pairs (default all
    ``tokens x topk``, one rank)."""
    tokens = np.asarray(tokens, dtype=np.float64)
    pairs = tokens * topk if rows is None else np.asarray(rows, dtype=np.float64)
    active = pairs if active is None else np.asarray(active, dtype=np.float64)
    top = np.ones_like(tokens) if top is None else np.asarray(top, dtype=np.float64)
    batch = KernelBatch(
        "moe",
        dtype,
        2.0 * pairs * HIDDEN * INTER * 3,
        active * 3 * HIDDEN * INTER * 2.0 + pairs * HIDDEN * 4,
        np.ones_like(tokens),
        {
            "tokens": tokens,
            "topk": np.full_like(tokens, topk),
            "hidden": np.full_like(tokens, HIDDEN),
            "inter": np.full_like(tokens, INTER),
            "gated": np.ones_like(tokens),
            "active_experts": active,
            "max_tokens_per_expert": top,
            "assignments": pairs,
        },
    )
    p = default_params("moe")
    p.update(prm)
    return kernel_terms(batch, FIG, p)


def test_small_batches_read_the_touched_experts_weights():
    """At one token per expert the layer streams the weights of the experts it touches: the
    time grows with the experts touched, not with the tokens behind them."""
    t = _moe(tokens=[1, 2, 4], active=[8, 16, 32])["seconds"]
    assert t[0] < t[1] < t[2]
    same = _moe(tokens=[4, 4], active=[8, 8], top=[4, 1])["seconds"]  # 32 vs 8 rows
    assert abs(same[0] / same[1] - 1) < 0.25


def test_row_tiles_pad_each_expert():
    """The grouped GEMMs pad every expert's rows to whole tiles: one expert holding every row
    runs fewer row tiles than the same rows spread thinly over many experts."""
    spread = _moe(tokens=[256], active=[128], top=[16])["compute_s"]
    packed = _moe(tokens=[256], active=[16], top=[128])["compute_s"]
    assert spread[0] > packed[0]


def test_every_token_entering_the_rank_is_routed():
    """``route_s``: the routing (top-k, the gather/scatter indices) covers every (token, top-k)
    pair entering the rank, local or not: at one local expert with the same rows, more tokens
    entering cost more; without the term they cost the same."""

    def two(**prm):
        t = _moe(tokens=[512, 16384], active=[1, 1], top=[16, 16], rows=[16, 16], **prm)
        return t["seconds"][1] / t["seconds"][0]

    assert two(route_s=0.0) == 1.0
    assert two(route_s=1e-7) > 1.5


def test_each_wave_of_tiles_pays_its_tile_work():
    """``tile_s``: a wave of output tiles pays its pipeline fill and epilogue beside the main
    loop, so a layer of many thin experts costs more with it."""
    off = _moe(tokens=[256], active=[128], top=[16], tile_s=0.0)["compute_s"]
    on = _moe(tokens=[256], active=[128], top=[16], tile_s=1e-6)["compute_s"]
    assert on[0] > off[0] + 1e-6


def _cols(tp, ep, dist):
    n = len(tp)
    return {
        "moe_dtype": np.full(n, "bfloat16"),
        "num_tokens": np.full(n, 1),
        "hidden_size": np.full(n, 5120),
        "inter_size": np.full(n, 8192),
        "topk": np.full(n, 1),
        "num_experts": np.full(n, 16),
        "kernel_source": np.full(n, "moe_torch_flow_cutlass"),
        "moe_tp_size": np.asarray(tp),
        "moe_ep_size": np.asarray(ep),
        "distribution": np.asarray(dist),
    }


def test_slower_than_more_work_compares_rows_doing_at_least_the_work():
    """A row more than 2x a row whose GPU does at least its work is excluded: a larger split of
    the same routing (ep 2 against ep 1), and the balanced row at ep 1 against a power-law row
    (the measured H100 case: 0.49 ms where the balanced call, one expert, takes 0.10 ms). A
    row doing more work may be slower; a smaller slowdown is kept."""
    cols = _cols(
        [1, 1, 1, 1, 1],
        [1, 2, 1, 1, 2],
        ["balanced", "balanced", "power_law_1.01", "power_law_1.2", "power_law_1.2"],
    )
    sec = np.array([0.103, 0.482, 0.488, 0.15, 0.04])
    out = slower_than_more_work(cols, sec, np.ones(5, dtype=bool))
    assert out.tolist() == [False, True, True, False, False]
    # power-law rows never stand for each other's work, nor a balanced row at ep > 1
    cols = _cols([1, 1, 1], [2, 2, 2], ["balanced", "power_law_1.01", "power_law_1.2"])
    out = slower_than_more_work(cols, np.array([0.05, 0.5, 0.05]), np.ones(3, dtype=bool))
    assert not out.any()
