"""The time model of communication kernels: in-switch (NVLS) all-reduce where the catalogue
says the switch reduces, the ring's copy of a rank's own share, a step's wait in SM cycles, and
the TensorRT-LLM 1.0 all-reduces that are NCCL's."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from reference_data import MEASURED

from mlacalc.hardware.catalogue import hardware_from_dict, load_hardware
from mlacalc.measured.mapping import map_table
from mlacalc.measured.tables import MeasuredTable
from mlacalc.timemodel.device import device_figures
from mlacalc.timemodel.terms import REFERENCE_CLOCK_HZ, default_params, kernel_terms
from mlacalc.words.errors import ConfigError
from mlacalc.words.kernels import KernelBatch


def _batch(kind: str, msg: list[float], n: list[float], **fields: float) -> KernelBatch:
    size = len(msg)
    shape = {"message_bytes": np.array(msg, float), "n_gpus": np.array(n, float)}
    shape.update({k: np.full(size, float(v)) for k, v in fields.items()})
    return KernelBatch(kind, "fp16", np.zeros(size), np.array(msg, float), np.ones(size), shape)


def _prm(kind: str, **over: float) -> dict[str, float]:
    return {**default_params(kind), "fixed_s": 0.0, **over}


def test_link_multicast_is_a_sourced_datasheet_figure():
    h100 = device_figures(load_hardware("H100-SXM"))
    a100 = device_figures(load_hardware("A100-SXM-80GB"))
    assert h100.link_multicast == 1.0 and a100.link_multicast == 0.0
    for name in ("H100-SXM", "A100-SXM-80GB"):  # from the catalogue, with its source
        assert "NVSwitch" in load_hardware(name).field_sources["scale_up_multicast"]
        assert not [f for f in device_figures(load_hardware(name)).fallbacks if "multicast" in f]


def test_switch_reduced_all_reduce_only_where_the_switch_reduces():
    """A large 8-GPU all-reduce on an NVLS switch moves the message once each way at
    ``switch_eff`` times the ring's link efficiency, behind the ring's 2(n-1) synchronised
    steps; at 2 GPUs the ring moves as much and wins; without the switch, the ring."""
    msg = 2.0**30
    prm = _prm("all_reduce", switch_eff=0.7, link_eff=0.8, eff_memory=1e9, proto_s=1e-6)
    batch = _batch("all_reduce", [msg, msg], [8, 2], one_shot=0)
    h100 = device_figures(load_hardware("H100-SXM"))
    a100 = device_figures(load_hardware("A100-SXM-80GB"))
    t8, t2 = kernel_terms(batch, h100, prm)["seconds"]
    step = prm["latency_steps"] * h100.link_latency_s + 1e-6
    link = 0.8 * h100.link_bytes_per_s
    assert t8 == pytest.approx(14 * step + msg / (0.7 * link), rel=1e-6)
    assert t8 < 14 * step + 2 * 7 / 8 * msg / link
    assert t2 == pytest.approx(2 * step + msg / link, rel=1e-3)
    (a8,) = kernel_terms(_batch("all_reduce", [msg], [8], one_shot=0), a100, prm)["seconds"]
    assert a8 > 2 * 7 / 8 * msg / (0.8 * a100.link_bytes_per_s)


def test_flagged_stores_follow_the_clock():
    """Small messages go as flagged stores, issued by the SMs: their rate is the link's share
    at the reference clock, scaled with the device's clock (bulk copies are not)."""
    prm = _prm("all_gather", eff_memory=1e9, latency_steps=0.0, proto_s=1e-3)
    a100 = device_figures(load_hardware("A100-SXM-80GB"))
    (t,) = kernel_terms(_batch("all_gather", [1e5], [2]), a100, prm)["seconds"]
    issue = a100.clock_hz / 1.83e9
    assert t == pytest.approx(2 * 0.5e5 / (prm["link_eff"] * a100.link_bytes_per_s * issue))


def test_ring_copies_its_own_share_through_hbm():
    """Per byte on the link a ring is slower at 2 GPUs than at 8: every rank also copies its
    own 1/n of the message (read and write) at ``eff_memory`` of the HBM bandwidth."""
    fig = device_figures(load_hardware("H100-SXM"))
    msg = 2.0**30
    prm = _prm("all_gather", eff_memory=0.4, link_eff=0.7)
    t2, t8 = kernel_terms(_batch("all_gather", [msg, msg], [2, 8]), fig, prm)["seconds"]
    own = lambda n: 2 * msg / n / (0.4 * fig.hbm_bytes_per_s)  # noqa: E731
    link = 0.7 * fig.link_bytes_per_s
    lat = prm["latency_steps"] * fig.link_latency_s  # per step, n - 1 steps
    assert t2 - own(2) == pytest.approx(lat + 0.5 * msg / link, rel=1e-9)
    assert t8 - own(8) == pytest.approx(7 * lat + 7 / 8 * msg / link, rel=1e-9)
    assert (t2 / 0.5) > (t8 / (7 / 8))


def test_the_ideal_collective_has_no_copy_term():
    """``predict_kernels``' plain bound (no ``eff_memory`` in its parameters) is the link alone."""
    fig = device_figures(load_hardware("A100-SXM-80GB"))
    ideal = {"link_eff": 1.0, "latency_steps": 0.0, "proto_s": 0.0, "fixed_s": 0.0}
    (t,) = kernel_terms(_batch("all_gather", [2.0**30], [8]), fig, ideal)["seconds"]
    assert t == pytest.approx(7 / 8 * 2.0**30 / fig.link_bytes_per_s)


def test_deepep_normal_pays_per_token_work_on_its_sms():
    """Normal-mode DeepEP on a set number of SMs: the SMs also work on every token, whatever
    its copies (``token_copies`` copies' worth), so at equal bytes fewer copies a token (more
    tokens) take longer; the link-bound time (all SMs) does not change."""
    fig = device_figures(load_hardware("H100-SXM"))
    prm = _prm("combine", token_copies=3.0, latency_steps=0.0)
    msg = [1e9, 1e9, 1e9]
    shape = dict(low_latency=0.0)
    one = _batch("combine", msg, [8, 8, 8], **shape)
    one.shape["tokens"] = np.array([8e4, 1e4, 8e4])  # 1 copy a token / 8 copies a token
    one.shape["copies"] = np.array([8e4, 8e4, 8e4])
    one.shape["sms"] = np.array([4.0, 4.0, 0.0])
    t1, t8, free = kernel_terms(one, fig, prm)["seconds"]
    link_t = 7 / 8 * 1e9 / (prm["link_eff"] * fig.link_bytes_per_s)
    share = 4 * prm["sm_bandwidth"] / fig.sm_count
    assert t1 == pytest.approx(link_t * (1 + 3.0) / share)
    assert t8 == pytest.approx(link_t * (1 + 3.0 / 8) / share)
    assert free == pytest.approx(link_t)


def test_deepep_normal_combine_ends_with_a_tokens_reduction():
    """A normal-mode combine ends with one token's reduction, in series: a warp reads the
    token's copies (``copies / tokens`` ranks) and writes their sum, ``reduce_s`` an element
    of each of the ``1 + r`` hidden rows; a dispatch has none. The H100 rows show it: a few
    tokens' combine grows with the hidden size (31 us at 2,048, 49 us at 7,168) whatever its
    SMs, while the dispatch stays at 25-26 us; without the term the shipped fit was 25% slow
    at hidden 2,048 and 17-20% fast at 7,168 (the table's combine rows 7.3% -> 4.3%)."""
    fig = device_figures(load_hardware("H100-SXM"))
    rows = dict(low_latency=0.0, tokens=4.0, hidden=7168.0, sms=24.0)
    combine = _batch("combine", [1e3, 1e3], [8, 8], **rows)
    combine.shape["copies"] = np.array([4.0 * 5.0, 4.0])  # 5 ranks a token, then 1
    base = kernel_terms(combine, fig, _prm("combine", reduce_s=0.0))["seconds"]
    with_reduce = kernel_terms(combine, fig, _prm("combine", reduce_s=5e-10))["seconds"]
    np.testing.assert_allclose(with_reduce - base, [6 * 7168 * 5e-10, 2 * 7168 * 5e-10])
    dispatch = _batch("dispatch", [1e3], [8], **rows, copies=20.0)
    d0 = kernel_terms(dispatch, fig, _prm("dispatch", reduce_s=0.0))["seconds"]
    d1 = kernel_terms(dispatch, fig, _prm("dispatch", reduce_s=5e-10))["seconds"]
    np.testing.assert_allclose(d0, d1)
    low = _batch("combine", [1e3], [8], **{**rows, "low_latency": 1.0}, copies=20.0)
    l0 = kernel_terms(low, fig, _prm("combine", reduce_s=0.0))["seconds"]
    l1 = kernel_terms(low, fig, _prm("combine", reduce_s=5e-10))["seconds"]
    np.testing.assert_allclose(l0, l1)


def test_deepep_normal_combine_of_few_tokens_follows_the_hidden_size():
    """The shipped profile on H100's normal combine rows of at most 64 tokens: every hidden
    size's signed median within 8% (before the reduction term +25% at 2,048, -19% at 7,168)."""
    pytest.importorskip("pyarrow")
    from mlacalc.measured.observations import predict_mapped
    from mlacalc.measured.tables import load_measured
    from mlacalc.timemodel.profile import load_profile

    path = MEASURED / "h100_sxm" / "comm" / "sglang" / "0.5.12"
    (t,) = load_measured(path / "wideep_deepep_normal_perf.parquet").tables
    pred = predict_mapped(map_table(t), "H100-SXM", load_profile("default"))
    err = pred / t.seconds - 1.0
    pick = (t.column("measure") == "combine") & (t.column("num_token") <= 64)
    hidden = t.column("hidden_size")
    for h in np.unique(hidden[pick]):
        signed = float(np.median(err[pick & (hidden == h)]))
        assert abs(signed) < 0.08, (h, signed)


def test_deepep_low_latency_runs_on_an_sm_per_expert():
    """DeepEP's low-latency kernels run on as many SMs as the call has experts (a warp group
    each; past the SMs, ``ceil(E / SMs)`` groups share an SM), each SM taking its share of the
    tokens one after another (``unit_latency_s`` a token, a p-norm with the link, p = 2); a
    dispatch SM waits a round trip for each of its groups' expert counts. The measured rows
    carry the experts (8 experts: 1,024 tokens a quarter of 128 experts' dispatch time at 4x
    fewer copies), and so does a served step's exchange."""
    from mlacalc.timemodel.comm_time import DEEPEP_LL_NORM

    fig = device_figures(load_hardware("H100-SXM"))
    prm = _prm("dispatch", unit_latency_s=2e-6, latency_steps=1.0)
    lat = fig.link_latency_s
    batch = _batch("dispatch", [0.0, 0.0, 0.0, 0.0], [8, 8, 8, 8], low_latency=1.0, tokens=1024)
    batch.shape["experts"] = np.array([8.0, 128.0, 512.0, 0.0])
    t8, t128, t512, none = kernel_terms(batch, fig, prm)["seconds"]
    assert t8 == pytest.approx(lat + 128 * 2e-6)  # 1,024 tokens over 8 SMs
    assert t128 == pytest.approx(lat + 8 * 2e-6)
    assert t512 == pytest.approx(4 * lat + 8 * 2e-6)  # 4 groups on 128 SMs
    assert none == pytest.approx(lat)
    one = _batch("combine", [1e6], [8], low_latency=1.0, tokens=1024, experts=8)
    (tc,) = kernel_terms(one, fig, _prm("combine", unit_latency_s=2e-6))["seconds"]
    link_t = 1e6 / (default_params("combine")["link_eff"] * fig.link_bytes_per_s)
    serial = 128 * 2e-6
    steps = default_params("combine")["latency_steps"] * lat
    assert tc == pytest.approx(steps + (link_t**DEEPEP_LL_NORM + serial**DEEPEP_LL_NORM) ** 0.5)
    path = MEASURED / "h100_sxm" / "comm" / "sglang" / "0.5.12" / "wideep_deepep_ll_perf.parquet"
    pytest.importorskip("pyarrow")
    from mlacalc.measured.tables import load_measured

    (t,) = load_measured(path).tables
    m = map_table(t)
    for p in m.parts:
        np.testing.assert_array_equal(p.batch.shape["experts"], t.column("num_experts")[p.rows])


def test_a_steps_wait_is_sm_cycles():
    """A collective's per-step wait (``latency_steps`` link latencies) is polled by the SMs: it
    scales with the clock like the fixed cost, so a device at 1.41 GHz waits 1.83/1.41 times
    as long a step as one at the reference clock (NCCL's 2-4 KB calls: 0.8 us a step on H100,
    1.0 us on A100)."""
    h100 = device_figures(load_hardware("H100-SXM"))
    slow = dataclasses.replace(h100, clock_hz=1.41e9)
    prm = _prm("all_gather", eff_memory=1e9, latency_steps=1.0, proto_s=0.0)
    batch = _batch("all_gather", [64.0], [8])
    (fast_t,) = kernel_terms(batch, h100, prm)["seconds"]
    (slow_t,) = kernel_terms(batch, slow, prm)["seconds"]
    steps = 7 * h100.link_latency_s
    assert fast_t == pytest.approx(steps, rel=1e-3)
    assert slow_t == pytest.approx(steps * REFERENCE_CLOCK_HZ / 1.41e9, rel=1e-3)


def _custom_allreduce(version: str) -> MeasuredTable:
    sizes = np.array([2.0**18, 2.0**19, 2.0**20, 2.0**24])
    return MeasuredTable(
        table="custom_allreduce_perf",
        system="test",
        device="A100-SXM-80GB",
        family="comm",
        framework="trtllm",
        version=version,
        provenance="test",
        source="test",
        columns={"message_size": sizes, "num_gpus": np.full(4, 8.0)},
        seconds=np.full(4, 1e-4),
    )


def test_trtllm_1_0_hands_large_all_reduces_to_nccl():
    """TensorRT-LLM 1.0's AUTO all-reduce is NCCL's from 2^20 elements (the measured A100 rows
    equal the NCCL table's there): those rows map onto NCCL's 2-byte ring class (``fp16``, no
    one-shot); a later version keeps every row on its own kernels' class."""
    old = {p.batch.dtype: p for p in map_table(_custom_allreduce("1.0.0"), quirks=False).parts}
    assert sorted(old) == ["bf16", "fp16"]
    assert old["bf16"].rows.tolist() == [0, 1]
    assert old["fp16"].rows.tolist() == [2, 3]
    assert (old["fp16"].batch.shape["one_shot"] == 0).all()
    assert (old["fp16"].batch.shape["message_bytes"] == [2.0**21, 2.0**25]).all()
    new = map_table(_custom_allreduce("1.3.0rc20"), quirks=False).parts
    assert [(p.batch.dtype, p.rows.tolist()) for p in new] == [("bf16", [0, 1, 2, 3])]


def test_sglang_0_5_hands_all_reduces_from_32_mb_to_nccl():
    """SGLang 0.5's custom all-reduce is NCCL's from 2^24 bf16 elements (its measured rows equal
    the NCCL table's there on B200 and H100): CUDA-graph rows from there map onto NCCL's ring
    class, eager rows too, with a copy of the message through HBM (read and written, an
    elementwise kernel: the input's copy an eager call makes); TensorRT-LLM 1.3 keeps them all."""

    def parts(framework, version, backend):
        columns = {
            "message_size": np.array([2.0**22, 2.0**23, 2.0**24, 2.0**26]),
            "num_gpus": np.full(4, 8.0),
            "backend": np.full(4, backend),
        }
        t = dataclasses.replace(_custom_allreduce(version), framework=framework, columns=columns)
        return map_table(t, quirks=False).parts

    def rows(got):
        return [(p.batch.dtype, p.batch.variant, p.rows.tolist()) for p in got]

    graph = parts("sglang", "0.5.14", "sglang_graph")
    assert rows(graph) == [("bf16", "", [0, 1]), ("fp16", "", [2, 3])]
    eager = parts("sglang", "0.5.14", "sglang_eager")
    assert rows(eager) == [("bf16", "eager", [0, 1]), ("fp16", "", [2, 3]), ("bf16", "", [2, 3])]
    assert (graph[1].batch.shape["one_shot"] == 0).all()
    assert (eager[1].batch.shape["one_shot"] == 0).all()
    copy = eager[2].batch
    assert copy.kind == "elementwise" and (copy.bytes == 2 * eager[1].batch.bytes).all()
    assert rows(parts("trtllm", "1.3.0rc20", "")) == [("bf16", "", [0, 1, 2, 3])]


def test_nccl_all_to_all_switches_protocol_at_16_kb_a_peer():
    """NCCL's all-to-all sends flagged (LL) up to 16 KB a peer and in bulk above, whichever is
    faster; in bulk all n - 1 sends run at once behind one synchronisation, so a bulk exchange
    costs the same synchronisation at 2 and 8 GPUs."""
    fig = device_figures(load_hardware("H100-SXM"))
    link = fig.link_bytes_per_s
    small, large = 16384.0 * 8, 16384.0 * 8 + 8
    batch = _batch("all_to_all", [small, large], [8, 8])
    prm = _prm("all_to_all", eff_memory=1e9, latency_steps=0.0, proto_s=0.0, link_eff=1.0)
    t_small, t_large = kernel_terms(batch, fig, prm)["seconds"]
    assert t_small == pytest.approx(2 * 7 / 8 * small / link)  # flagged, though bulk is faster
    assert t_large == pytest.approx(7 / 8 * large / link)
    prm = _prm("all_to_all", eff_memory=1e9, latency_steps=0.0, proto_s=1e-5, link_eff=1.0)
    msg = 2.0**26
    t2, t8 = kernel_terms(_batch("all_to_all", [msg, msg], [2, 8]), fig, prm)["seconds"]
    assert t2 == pytest.approx(1e-5 + msg / 2 / link)
    assert t8 == pytest.approx(1e-5 + 7 / 8 * msg / link)


def test_uncalibrated_deepep_normal_draws_the_link_with_24_sms():
    """Without a DeepEP fit, normal-mode kernels on 24 SMs of a 132-SM device move data at the
    link's rate (DeepEP's README: 153-158 GB/s of an H800's ~160 GB/s NVLink on 24 SMs), and on
    fewer SMs proportionally slower."""
    fig = device_figures(load_hardware("H100-SXM"))
    assert fig.sm_count == 132
    prm = {**default_params("dispatch"), "fixed_s": 0.0, "latency_steps": 0.0}
    msg = [1e9, 1e9, 1e9]
    batch = _batch("dispatch", msg, [8, 8, 8], low_latency=0.0, tokens=1e5, copies=1e5)
    batch.shape["sms"] = np.array([24.0, 12.0, 0.0])
    t24, t12, free = kernel_terms(batch, fig, prm)["seconds"]
    link_t = 7 / 8 * 1e9 / (prm["link_eff"] * fig.link_bytes_per_s)
    assert free == pytest.approx(link_t)
    assert t24 == pytest.approx(link_t)
    assert t12 == pytest.approx(2 * link_t)


def test_a_collectives_round_trips_follow_the_link_latency():
    """A collective's fixed cost and bulk synchronisation are flag round trips over the fabric:
    stated at NVLink 4's latency (H100's catalogue figure, so H100 is unchanged) and scaled
    with the device's link latency; an eager call's fixed cost is the host's and is not."""
    h100 = device_figures(load_hardware("H100-SXM"))
    slow = dataclasses.replace(h100, link_latency_s=1.6 * h100.link_latency_s)
    prm = _prm("all_gather", fixed_s=4e-6, proto_s=2e-6, eff_memory=1e9, latency_steps=0.0)
    batch = _batch("all_gather", [2.0**28], [2])  # bulk: one step of proto_s
    fast, slow_t = (kernel_terms(batch, f, prm) for f in (h100, slow))
    assert fast["fixed_s"][0] == pytest.approx(4e-6)
    assert slow_t["fixed_s"][0] == pytest.approx(1.6 * 4e-6)
    sync = slow_t["memory_s"][0] - fast["memory_s"][0]
    assert sync == pytest.approx(0.6 * 2e-6, rel=1e-6)
    eager = dataclasses.replace(batch, variant="eager")
    assert kernel_terms(eager, slow, prm)["fixed_s"][0] == pytest.approx(4e-6)
    # B200's NVLink 5 figure is derived, stated as an assumption, and 1.60x NVLink 4's
    b200 = load_hardware("B200")
    assert "scale_up_latency_us" in b200.assumed
    assert device_figures(b200).link_latency_s == pytest.approx(1.6 * h100.link_latency_s, 1e-3)


@pytest.mark.parametrize(
    "system, table, profile, bound",
    [
        # NCCL's floor carries between NVLink generations once it is in link latencies (each
        # way 35% / 28% median before, the fit of one device putting B200's round trips in its
        # clocked fixed cost)
        ("h100_sxm", "comm/nccl", "fit-b200-sxm", 0.09),
        ("b200_sxm", "comm/nccl", "fit-h100-sxm", 0.095),
        ("h100_sxm", "comm/trtllm", "fit-b200-sxm", 0.10),
    ],
)
def test_collectives_carry_between_nvlink_generations(system, table, profile, bound):
    pytest.importorskip("pyarrow")
    from pathlib import Path

    from mlacalc.measured.observations import predict_mapped
    from mlacalc.measured.tables import load_measured

    root = Path(__file__).resolve().parents[1] / "mlacalc" / "data" / "measured" / system
    (t,) = [x for x in load_measured(root / table, engine="all").tables if "allreduce" in x.table
            or x.table == "nccl_perf"]  # fmt: skip
    mapped = map_table(t)
    pred = predict_mapped(mapped, None, profile)
    ok = mapped.modelled & np.isfinite(pred)
    assert ok.sum() > 60 and np.median(np.abs(pred[ok] / t.seconds[ok] - 1)) <= bound


def test_infinity_fabric_is_a_mesh_a_pair_has_one_link():
    """On AMD's Infinity Fabric mesh a TP2 pair shares one link (64 GB/s each way on MI300X),
    so a 32 MiB all-reduce takes at least the message over that link (524 us), where a
    switch's 448 GB/s gave 119 us; all 8 GPUs still get the 7 links (the same time as a switch
    of 448 GB/s), and a switch (H200) is unchanged by group size."""
    mi300x = load_hardware("MI300X")
    switch = dataclasses.replace(mi300x, scale_up_mesh_link_bytes_per_s=None)
    assert "7 links" in mi300x.field_sources["scale_up_mesh_link_gb_per_s"]
    assert [mi300x.link(g)[0] / 1e9 for g in (2, 4, 8)] == [64.0, 192.0, 448.0]
    assert load_hardware("MI355X").link(2)[0] == pytest.approx(76.8e9)
    assert load_hardware("H200").link(2)[0] == load_hardware("H200").link(8)[0]
    msg = 32.0 * 2**20
    batch = _batch("all_reduce", [msg, msg], [2, 8])
    prm = default_params("all_reduce")
    mesh2, mesh8 = kernel_terms(batch, device_figures(mi300x), prm)["seconds"]
    flat2, flat8 = kernel_terms(batch, device_figures(switch), prm)["seconds"]
    assert mesh2 > msg / 64e9 > 2 * flat2
    assert mesh8 == pytest.approx(flat8)


def test_mesh_link_field_is_checked():
    base = {"name": "x", "peak_tflops": {"bf16": 100}, "memory_bandwidth_gb_per_s": 1000}
    base |= {"memory_gb": 80, "source": "s", "scale_up_gb_per_s": 448}
    assert hardware_from_dict({**base, "scale_up_mesh_link_gb_per_s": 64}).link(3)[0] == 128e9
    with pytest.raises(ConfigError, match="scale_up_mesh_link_gb_per_s"):
        hardware_from_dict({**base, "scale_up_mesh_link_gb_per_s": 500})
    del base["scale_up_gb_per_s"]
    with pytest.raises(ConfigError, match="needs scale_up_gb_per_s"):
        hardware_from_dict({**base, "scale_up_mesh_link_gb_per_s": 64})


def test_mesh_links_must_reach_the_aggregate_and_an_assumed_link_is_said():
    """review12 8: 32 GB/s links with 448 GB/s over 8 GPUs were taken (all 8 then got 224, not
    the aggregate); and a file listing the link as ``assumed`` said so in the calibration line
    but not in the device figures' fallbacks that plan JSON's ``prediction.assumed`` reads."""
    base = {"name": "x", "peak_tflops": {"bf16": 100}, "memory_bandwidth_gb_per_s": 1000}
    base |= {"memory_gb": 80, "source": "s", "scale_up_gb_per_s": 448, "gpus_per_node": 8}
    with pytest.raises(ConfigError, match=r"32 x 7 links.*below scale_up_gb_per_s \(448\)"):
        hardware_from_dict({**base, "scale_up_mesh_link_gb_per_s": 32})
    hw = hardware_from_dict({**base, "scale_up_mesh_link_gb_per_s": 64})
    assert hw.link(8)[0] == 448e9
    assumed = {**base, "scale_up_mesh_link_gb_per_s": 64}
    assumed["assumed"] = ["scale_up_mesh_link_gb_per_s"]
    fig = device_figures(hardware_from_dict(assumed))
    assert any(f.startswith("mesh_link_bytes_per_s = 6.4e+10") for f in fig.fallbacks)
    assert not any("mesh" in f for f in device_figures(hw).fallbacks)


def test_engine_one_shot_waits_per_peer_and_vllm_two_shot_from_its_limit():
    """SGLang's and vLLM's custom all-reduce rows carry ``peer_wait`` (their one-shot waits a
    round trip a peer: the smallest calls grow with the GPU count), TensorRT-LLM's not; vLLM's
    rows run the one-shot only below its size limit by GPU count (512 KB at 4 GPUs, 256 KB at
    8, always at 2) and its two-shot (the ring) from there."""
    from mlacalc.timemodel.comm_time import vllm_one_shot

    assert vllm_one_shot([2.0**18, 2.0**19, 2.0**18, 2.0**30], [4, 4, 8, 2]).tolist() == [
        1.0,
        0.0,
        0.0,
        1.0,
    ]
    elems = np.array([2.0**7, 2.0**17, 2.0**18, 2.0**19])

    def part(framework, version, backend):
        columns = {
            "message_size": elems,
            "num_gpus": np.full(4, 4.0),
            "backend": np.full(4, backend),
        }
        t = dataclasses.replace(_custom_allreduce(version), framework=framework, columns=columns)
        (got,) = map_table(t, quirks=False).parts
        return got.batch

    vllm = part("vllm", "0.24.0", "vllm_graph")
    assert (vllm.shape["peer_wait"] == 1.0).all() and vllm.shape["one_shot"].tolist() == [
        1.0,
        1.0,
        0.0,
        0.0,
    ]
    sglang = part("sglang", "0.5.14", "sglang_graph")
    assert (sglang.shape["peer_wait"] == 1.0).all() and (sglang.shape["one_shot"] == 1.0).all()
    trt = part("trtllm", "1.3.0rc20", "")
    assert (np.asarray(trt.shape.get("peer_wait", 0.0)) == 0.0).all()
    # the wait: a one-shot of a tiny message takes (n - 1) link round trips with it, one without
    fig = device_figures(load_hardware("H100-SXM"))
    prm = _prm("all_reduce", latency_steps=1.0, proto_s=0.0, fixed_s=0.0, link_eff=1.0)
    for wait, trips in ((1.0, 7.0), (0.0, 1.0)):
        batch = _batch("all_reduce", [2.0], [8], peer_wait=wait)
        t = kernel_terms(batch, fig, prm)["seconds"][0]
        assert t == pytest.approx(trips * fig.link_latency_s, rel=1e-3)


def test_vllm_all_reduce_path_by_capability_count_and_size():
    """vLLM's all-reduce runs its custom kernel below a size by compute capability and GPU
    count, PyTorch's symmetric-memory one above it (the switch's multimem reduction at 8 GPUs,
    a two-shot at 2 and 4 on Blackwell), NCCL past both (comm_time.vllm_path): the B200 rows
    step at 1 -> 2 MB on 2 GPUs (13.1 -> 25.3 us) and 512 KB -> 1 MB on 8 (26.1 -> 17.2 us);
    a device without an entry (A100) keeps the custom kernel to 8 MB, then NCCL. The mapping
    puts the NCCL rows on NCCL's class and a served step takes NCCL's time there."""
    from mlacalc.serving.gpu_step import _engine_all_reduce
    from mlacalc.timemodel.comm_time import vllm_path

    mb = 1024.0**2
    msg = np.array([mb, 2 * mb, 4 * mb, 8 * mb, 0.5 * mb, mb, 64 * mb, 128 * mb])
    n = np.array([2, 2, 2, 2, 8, 8, 8, 8])
    got = vllm_path(msg, n, 10.0)
    assert got["nccl"].tolist() == [0, 0, 0, 1, 0, 0, 0, 1]
    assert got["one_shot"].tolist() == [1, 0, 0, 0, 0, 0, 0, 0]
    assert got["multimem"].tolist() == [0, 0, 0, 0, 0, 1, 1, 0]
    h100 = vllm_path(np.array([4 * mb, 8 * mb, 0.25 * mb]), np.array([2, 2, 8]), 9.0)
    assert h100["nccl"].tolist() == [0, 0, 0] and h100["multimem"].tolist() == [0, 0, 1]
    a100 = vllm_path(np.array([4 * mb, 8 * mb]), np.array([8, 8]), 8.0)
    assert a100["nccl"].tolist() == [0, 1] and a100["multimem"].tolist() == [0, 0]
    # the switch's reduction alone where ``multimem`` is 1, never where 0, the faster where absent
    # (the ring then with NCCL's copy of its own share through HBM, here none: eff_memory 1e9)
    fig = device_figures(load_hardware("B200"))
    prm = _prm("all_reduce", switch_eff=0.5, eff_memory=1e9)
    times = [
        kernel_terms(_batch("all_reduce", [64 * mb], [8], **extra), fig, prm)["seconds"][0]
        for extra in (
            {"multimem": 1.0, "one_shot": 0.0},
            {"multimem": 0.0, "one_shot": 0.0},
            {"one_shot": 0.0},
        )
    ]
    assert times[2] == pytest.approx(min(times[:2])) and times[0] != times[1]
    # an engine's two-shot (``multimem`` 0) pays no copy of its share in series; NCCL's ring does
    slow = _prm("all_reduce", switch_eff=0.5, eff_memory=0.1)
    for extra, same in (({"multimem": 0.0, "one_shot": 0.0}, True), ({"one_shot": 0.0}, False)):
        b = _batch("all_reduce", [64 * mb], [8], **extra)
        t = kernel_terms(b, device_figures(load_hardware("A100-SXM-80GB")), slow)["seconds"][0]
        t0 = kernel_terms(b, device_figures(load_hardware("A100-SXM-80GB")), prm)["seconds"][0]
        assert bool(t == pytest.approx(t0)) == same
    # a served step: vLLM's 8 MB call over 2 B200s is NCCL's, 1 MB over 8 the multimem one
    batch = _batch("all_reduce", [8 * mb, mb], [2, 8])
    served, handed, symm = _engine_all_reduce(batch, "vllm", load_hardware("B200"))
    assert handed.tolist() == [1.0, 0.0] and served.shape["multimem"].tolist() == [0.0, 1.0]
    assert symm.tolist() == [0.0, 1.0]
    # the measured rows: B200's graph calls to the symmetric-memory kernel are a class of their
    # own (``symm``), its eager ones the eager class's, its NCCL ones NCCL's 2-byte ring class
    columns = {
        "message_size": np.array([2.0**19, 2.0**20, 2.0**20, 2.0**22]),
        "num_gpus": np.full(4, 2.0),
        "backend": np.array(["vllm_graph", "vllm_graph", "vllm_eager", "vllm_graph"]),
    }
    t = dataclasses.replace(
        _custom_allreduce("0.24.0"), framework="vllm", device="B200", columns=columns
    )
    parts = {(p.batch.dtype, p.batch.variant): p.rows.tolist() for p in map_table(t).parts}
    assert parts == {
        ("bf16", ""): [0],
        ("bf16", "symm"): [1],
        ("bf16", "eager"): [2],
        ("fp16", ""): [3],
    }
    assert _engine_all_reduce(batch, "trtllm", load_hardware("B200"))[1].tolist() == [0.0, 0.0]
