"""Expert parallelism and DP-attention across nodes and racks: the exchange over the
network is never faster than over one NVLink domain (its own fixed work per call stays),
and an NVL72 rack is one domain of 72 GPUs."""

from __future__ import annotations

import pytest

from mlacalc.hardware.catalogue import load_hardware
from mlacalc.serving.plan import plan
from mlacalc.serving.search_space import needs_network

DPA = dict(tp=1, dp_attention=True)


@pytest.mark.parametrize("per_gpu", [1, 16, 256])
def test_an_exchange_across_nodes_is_never_faster_than_in_one_domain(per_gpu):
    """EP16 on B200 (8 GPUs a node: the exchange crosses the network) against GB200 (one
    NVLink domain of 72): never faster, at any batch, including the smallest, where the
    network's bytes are few and each call's fixed work dominates."""
    kw = dict(**DPA, ep=16, seq_len=4096, batch=16 * per_gpu)
    across = plan("deepseek-v3", "B200", 16, **kw)
    within = plan("deepseek-v3", "GB200", 16, **kw)
    assert across.step_comm_s >= within.step_comm_s


def test_each_exchange_call_pays_at_least_the_network_latency():
    hw = load_hardware("B200")
    p = plan("deepseek-v3", hw, 16, **DPA, ep=16, seq_len=4096, batch=16)
    calls = sum(k["calls"] for k in p.kernels if k["kind"] in ("dispatch", "combine"))
    assert calls and p.step_comm_s >= calls * hw.scale_out_latency_s


def test_an_nvl72_rack_is_one_nvlink_domain():
    from mlacalc.cost.engine import as_model
    from mlacalc.serving.layout import make_layout

    m = as_model("deepseek-v3")
    lay = make_layout(m, 72, tp=1, dp_attention=True, ep=72, redundant_experts=32)
    assert not needs_network(lay, load_hardware("GB200"))
    assert needs_network(lay, load_hardware("B200"))
    kw = dict(**DPA, ep=72, redundant_experts=32, seq_len=2000, batch=72 * 64)
    rack = plan(m, "GB200", 72, **kw)
    nodes = plan(m, "B200", 72, **kw)
    assert rack.step_comm_s < nodes.step_comm_s
