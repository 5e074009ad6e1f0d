"""Measured sets: reading aiconfigurator tables, mapping rows onto kernels, quirk rules.

The GPU tables are the published ones shipped with the package (``mlacalc/data/measured``).
Counts are checked against the figures the reference's TABLES.md states, an independent route.
"""

from __future__ import annotations

import shutil
import sys

import numpy as np
import pytest
from reference_data import MEASURED

from mlacalc.words.errors import ConfigError, MlacalcError

REF = MEASURED


@pytest.fixture(scope="module")
def pq():
    return pytest.importorskip("pyarrow.parquet")


@pytest.fixture(scope="module")
def h100(pq):
    from mlacalc.measured.tables import load_measured

    return load_measured(REF / "h100_sxm")


@pytest.fixture(scope="module")
def a100(pq):
    from mlacalc.measured.tables import load_measured

    return load_measured(REF / "a100_sxm")


# ------------------------------------------------------------------ reading


def test_h100_tables_have_the_row_counts_of_tables_md(h100):
    rows = {t.table: len(t) for t in h100.tables}
    assert rows["gemm_perf"] == 100_668
    assert rows["context_attention_perf"] == 75_840
    assert rows["generation_attention_perf"] == 52_033
    assert rows["context_mla_perf"] == 1_760
    assert rows["generation_mla_perf"] == 2_896
    assert rows["mla_context_module_perf"] == 3_866
    assert rows["mla_generation_module_perf"] == 5_888
    assert rows["mla_bmm_perf"] == 848
    assert rows["moe_perf"] == 126_360
    assert rows["custom_allreduce_perf"] == 69
    assert rows["nccl_perf"] == 1_008
    assert rows["wideep_deepep_ll_perf"] == 2 * 176  # one dispatch and one combine per row
    assert rows["wideep_deepep_normal_perf"] == 2 * 2_484
    assert {t.device for t in h100.tables} == {"H100-SXM"}


def test_a100_maps_to_its_catalogue_device_and_latency_is_seconds(a100, pq):
    assert {t.device for t in a100.tables} == {"A100-SXM-80GB"}
    gemm = a100.table("gemm_perf")
    raw = pq.read_table(REF / "a100_sxm/gemm/trtllm/1.0.0/gemm_perf.parquet").column("latency")
    assert np.allclose(gemm.seconds, raw.to_numpy() * 1e-3)
    assert gemm.framework == "trtllm" and gemm.version == "1.0.0" and gemm.provenance == "legacy"


def test_one_parquet_file_and_a_folder_below_the_system_read_the_same(pq):
    from mlacalc.measured.tables import load_measured

    one = load_measured(REF / "a100_sxm/mla_bmm/trtllm/1.0.0/mla_bmm_perf.parquet")
    below = load_measured(REF / "a100_sxm/mla_bmm")
    assert len(one.tables) == len(below.tables) == 1
    assert np.array_equal(one.tables[0].seconds, below.tables[0].seconds)


def test_system_not_in_the_catalogue_is_an_error_naming_it(pq, tmp_path):
    from mlacalc.measured.tables import UnknownSystemError, load_measured

    leaf = tmp_path / "gb300_nvl" / "mla_bmm" / "trtllm" / "1.0.0"
    leaf.mkdir(parents=True)
    src = REF / "a100_sxm/mla_bmm/trtllm/1.0.0"
    shutil.copy(src / "mla_bmm_perf.parquet", leaf)
    shutil.copy(src / "collection_meta.yaml", leaf)
    with pytest.raises(UnknownSystemError, match="gb300_nvl"):
        load_measured(tmp_path / "gb300_nvl")


def test_bad_paths_and_missing_meta_are_one_line_errors(pq, tmp_path):
    from mlacalc.measured.tables import load_measured

    with pytest.raises(ConfigError, match="no such file"):
        load_measured(tmp_path / "nothing")
    with pytest.raises(ConfigError, match=r"\*\.parquet"):
        load_measured(tmp_path)
    leaf = tmp_path / "a100_sxm" / "gemm" / "trtllm" / "1.0.0"
    leaf.mkdir(parents=True)
    shutil.copy(REF / "a100_sxm/mla_bmm/trtllm/1.0.0/mla_bmm_perf.parquet", leaf)
    with pytest.raises(ConfigError, match=r"collection_meta\.yaml"):
        load_measured(tmp_path / "a100_sxm")
    (leaf / "collection_meta.yaml").write_text("!!python/object:os.system {}\n")
    with pytest.raises(ConfigError, match="tag"):
        load_measured(tmp_path / "a100_sxm")


def test_missing_pyarrow_names_the_extra(monkeypatch, tmp_path):
    from mlacalc.measured.tables import load_measured

    leaf = tmp_path / "h100_sxm" / "gemm" / "trtllm" / "1"
    leaf.mkdir(parents=True)
    (leaf / "gemm_perf.parquet").write_bytes(b"PAR1")
    (leaf / "collection_meta.yaml").write_text("runtime: {framework: trtllm, version: '1'}\n")
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    with pytest.raises(MlacalcError, match=r"mlacalc\[measured\]"):
        load_measured(tmp_path)


def test_microbenchmark_set_reads_into_the_same_type():
    from mlacalc.data import MEASUREMENTS
    from mlacalc.hardware.catalogue import measured_sets
    from mlacalc.measured.tables import MeasuredTable, load_measured

    name = measured_sets()[0]
    path = MEASUREMENTS / f"{name}.json"
    s = load_measured(path)
    (t,) = s.tables
    assert isinstance(t, MeasuredTable) and t.table == "bench"
    assert t.device == f"measured:{name}"
    ok = t.columns["status"] == "ok"
    assert np.array_equal(t.seconds[ok], t.columns["median_s"][ok])


def test_whole_h100_set_loads_and_maps_every_row(pq):
    from mlacalc.measured.mapping import map_table
    from mlacalc.measured.tables import load_measured

    s = load_measured(REF / "h100_sxm")
    mapped = [map_table(t) for t in s.tables]
    assert len(s) > 370_000
    assert sum(len(m.table) for m in mapped) == len(s)


# ------------------------------------------------------------------ mapping


_MAPPED: dict[tuple[int, str], object] = {}


def _map(measured_set, name):
    """map_table of one table, computed once per test session."""
    from mlacalc.measured.mapping import map_table

    key = (id(measured_set), name)
    if key not in _MAPPED:
        _MAPPED[key] = map_table(measured_set.table(name))
    return _MAPPED[key]


def _row(mapped, **where):
    cols = mapped.table.columns
    mask = np.ones(len(mapped.table), dtype=bool)
    for k, v in where.items():
        mask &= cols[k] == v
    idx = np.nonzero(mask)[0]
    assert idx.size >= 1, where
    return int(idx[0])


def test_gemm_rows_are_exact_gemms_with_the_weight_copy_rule(h100, a100):
    from mlacalc.measured.mapping import map_table

    m = map_table(h100.table("gemm_perf"))
    i = _row(m, gemm_dtype="bfloat16", m=4096, n=4096, k=4096)
    (k,) = m.kernels_of_row(i)
    assert k["kind"] == "gemm" and k["dtype"] == "bf16"
    assert k["flops"] == 2 * 4096**3
    assert k["bytes"] == 2 * (3 * 4096 * 4096)
    # W = 32 MiB: ceil(50 MiB / 32 MiB) = 2 copies
    assert k["shape"]["weight_copies"] == 2 and k["shape"]["warm_l2"] == 1
    i = _row(m, gemm_dtype="fp8_block", m=1, n=7168, k=2048)
    (k,) = m.kernels_of_row(i)
    assert k["dtype"] == "fp8_block" and k["shape"]["quantize_input"] == 1
    assert k["shape"]["quant_group"] == 128
    scales = 4 * (1 * 16 + 56 * 16)
    assert k["bytes"] == 1 * 2048 + 7168 * 2048 + 2 * 7168 + scales
    i = _row(m, gemm_dtype="fp8", m=1, n=65536, k=51200)
    (k,) = m.kernels_of_row(i)
    assert k["shape"]["weight_copies"] == 1 and k["shape"]["quant_passes"] == 2
    a = map_table(a100.table("gemm_perf"))
    plugin = {p.batch.dtype: len(p.batch) for p in a.parts if "plugin" in p.batch.shape}
    assert plugin == {"w8a16": 6_048, "w4a16": 6_048, "int8": 6_048}
    i = _row(a, gemm_dtype="int4_wo", m=1, n=65536, k=16384)
    (k,) = a.kernels_of_row(i)
    assert k["flops"] == 2 * 65536 * 16384 and k["shape"]["warm_l2"] == 0
    assert k["bytes"] == 16384 * 2 + 65536 * 16384 // 2 + 65536 * 2 + 2 * 65536
    assert set(a.parts[0].batch.shape["weight_copies"]) == {5.0}


def _pairs_brute(s, w):
    return sum(min(i, w) if w else i for i in range(1, s + 1))


def test_attention_rows_count_causal_window_pairs_and_decode_reads_the_cache(h100):
    from mlacalc.measured.mapping import map_table

    ctx = map_table(h100.table("context_attention_perf"))
    for w in (0, 128, 8192):
        i = _row(ctx, window_size=w, isl=1024, attn_dtype="bfloat16", kv_cache_dtype="bfloat16")
        (k,) = ctx.kernels_of_row(i)
        b, h, hd = (ctx.table.columns[c][i] for c in ("batch_size", "num_heads", "head_dim"))
        assert k["kind"] == "attention_prefill" and k["shape"]["causal"] == 1
        assert k["flops"] == 2 * b * h * _pairs_brute(1024, w) * 2 * hd
    # bf16 attention with an fp8 cache runs the fp8 FMHA (quirk rule)
    i = _row(ctx, attn_dtype="bfloat16", kv_cache_dtype="fp8")
    assert ctx.kernels_of_row(i)[0]["dtype"] == "fp8"

    gen = map_table(h100.table("generation_attention_perf"))
    i = _row(gen, step=1023, window_size=0, kv_cache_dtype="bfloat16", head_dim=128)
    (k,) = gen.kernels_of_row(i)
    b, h, kv = (gen.table.columns[c][i] for c in ("batch_size", "num_heads", "num_key_value_heads"))
    assert k["kind"] == "attention_decode" and k["shape"]["kv_len"] == 1024
    assert k["flops"] == 2 * b * h * 1024 * 2 * 128
    cache_read = b * 2 * kv * 1024 * 128 * 2
    pre = k["shape"]["preprocess_bytes"]
    assert k["bytes"] == pre + cache_read + b * h * 128 * 2 * 2
    i = _row(gen, head_dim=64)
    assert gen.kernels_of_row(i)[0]["shape"]["sinks"] == 1


def test_mla_rows_use_deepseek_v3_geometry(h100):
    from mlacalc.measured.mapping import map_table

    gen = map_table(h100.table("generation_mla_perf"))
    i = _row(gen, num_heads=128, batch_size=64, step=4095, kv_cache_dtype="bfloat16")
    (k,) = gen.kernels_of_row(i)
    assert k["kind"] == "mla_decode" and k["shape"]["head_dim_qk"] == 576
    assert k["flops"] == 2 * 128 * 64 * 4096 * (576 + 512)
    ctx = map_table(h100.table("context_mla_perf"))
    i = _row(ctx, num_heads=128, batch_size=1, isl=4096, kv_cache_dtype="bfloat16")
    (k,) = ctx.kernels_of_row(i)
    assert k["flops"] == 2 * 128 * _pairs_brute(4096, 0) * (192 + 128)


def test_mla_module_is_the_list_of_kernels_the_module_runs(h100):
    from mlacalc.measured.mapping import map_table

    gen = map_table(h100.table("mla_generation_module_perf"))
    i = _row(gen, gemm_type="fp8_block", num_heads=128, batch_size=8, kv_cache_dtype="bfloat16")
    names = sorted(k["name"] for k in gen.kernels_of_row(i))
    assert names == sorted(
        ["q_a+kv_a", "q_b", "o_proj", "q_a_norm", "kv_a_norm", "bmm_pre", "bmm_post", "mla_decode"]
    )
    by = {k["name"]: k for k in gen.kernels_of_row(i)}
    assert by["q_a+kv_a"]["flops"] == 2 * 8 * 2112 * 7168 and by["q_a+kv_a"]["dtype"] == "fp8_block"
    assert by["bmm_pre"]["dtype"] == "bf16" and by["bmm_pre"]["shape"]["groups"] == 128
    assert by["o_proj"]["flops"] == 2 * 8 * 7168 * 128 * 128
    ctx = map_table(h100.table("mla_context_module_perf"))
    names = {k["name"] for k in ctx.kernels_of_row(0)}
    assert "kv_b" in names and "mla_context" in names and "bmm_pre" not in names


def test_moe_balanced_loads_match_a_round_robin_simulation():
    from mlacalc.measured.moe_routing import rank_loads

    cases = [(1, 8, 160, 16), (3, 8, 160, 16), (100, 8, 256, 8), (7, 22, 512, 16), (5, 2, 8, 1)]
    for tokens, k, e, ep in cases:
        expert = np.arange(tokens * k) % e
        mine = expert[expert % ep == 0]
        loads = rank_loads(
            np.array([tokens]), np.array([k]), np.array([e]), np.array([ep]), np.array([0.0])
        )
        assert loads.assignments[0] == mine.size
        assert loads.active_experts[0] == np.unique(mine).size
        assert loads.max_per_expert[0] == np.bincount(expert).max()


def test_power_law_draws_are_bounded_loads_summing_to_the_assignments():
    from mlacalc.measured.moe_routing import power_law_draws, rank_loads

    for t, k, e, a in ((16384, 8, 256, 1.01), (64, 2, 8, 1.2), (3, 22, 512, 1.2), (1, 1, 16, 1.01)):
        loads = power_law_draws(t, k, e, a)
        assert loads.shape[1] == e and loads.max() <= t
        assert np.all(loads.sum(axis=1) == t * k) and np.all(loads == np.floor(loads))
        assert np.array_equal(loads, power_law_draws(t, k, e, a))  # seeded by the key
    # the straggler rank: one rank holds everything at ep = 1; more ranks, a larger share
    args = [
        np.array([4096] * 3),
        np.array([8] * 3),
        np.array([256] * 3),
        np.array([1, 8, 256]),
        np.array([1.2] * 3),
    ]
    r = rank_loads(*args)
    assert r.assignments[0] == 4096 * 8
    per_rank_mean = 4096 * 8 / np.array([1, 8, 256])
    share = r.assignments / per_rank_mean
    assert share[0] == pytest.approx(1, abs=0.01) and 1 < share[1] < share[2]
    assert r.active_experts[2] == 1 and r.max_per_expert[2] == r.assignments[2]
    # the calls batched by expert count and EP give each call's figures on its own
    from mlacalc.measured.moe_routing import _straggler_loads

    for i, p in enumerate((1, 8, 256)):
        a, most, act, tiles = _straggler_loads(4096, 8, 256, 1_200_000, p)
        assert (r.assignments[i], r.max_per_expert[i], r.active_experts[i]) == (a, most, act)
        assert np.array_equal(r.row_tiles[i], tiles)


def test_comm_rows_message_semantics(h100):
    from mlacalc.measured.mapping import map_table

    nccl = map_table(h100.table("nccl_perf"))
    i = _row(nccl, op_name="all_gather", nccl_dtype="half", num_gpus=8)
    (k,) = nccl.kernels_of_row(i)
    assert k["kind"] == "all_gather"
    assert k["shape"]["message_bytes"] == 2 * nccl.table.columns["message_size"][i]
    ll = h100.table("wideep_deepep_ll_perf")
    mapped = map_table(ll)
    disp = mapped.row_totals("bytes")[ll.columns["measure"] == "dispatch"]
    bw = ll.columns["dispatch_bandwidth_gbps"][ll.columns["measure"] == "dispatch"] * 1e9
    # the table's own bandwidth column: bytes / time, exactly
    assert np.allclose(disp / ll.seconds[ll.columns["measure"] == "dispatch"], bw, rtol=1e-6)


def test_every_table_maps_every_row_or_says_why(h100, a100):
    from mlacalc.measured.mapping import NOT_MODELLED

    for mset, t in [(ms, t) for ms in (h100, a100) for t in ms.tables]:
        m = _map(mset, t.table)
        covered = m.row_totals("calls") > 0
        assert np.all(covered | (m.reason != "")), t.label
        assert set(m.reason[m.reason != ""]) <= set(NOT_MODELLED), t.label


# ------------------------------------------------------------------ quirks


def test_quirk_rules_reproduce_the_counts_tables_md_states(h100, a100):
    from mlacalc.measured.mapping import map_table

    def reasons(s, name):
        r = _map(s, name).reason
        return {k: int((r == k).sum()) for k in set(r) if k}

    # repeated local-head keys are kept and predicted, flagged: 1,044 + 2,172 rows
    ctx = map_table(a100.table("context_mla_perf"))
    gen = map_table(a100.table("generation_mla_perf"))
    assert int(ctx.flags["duplicate_key"].sum()) == 1_044
    assert int(gen.flags["duplicate_key"].sum()) == 2_172
    assert "duplicate_key" not in reasons(a100, "context_mla_perf")
    # the two NCCL sweeps are repeats of one measurement: both kept and predicted, the slower
    # row of each key flagged
    assert reasons(h100, "nccl_perf") == {}
    assert int(map_table(h100.table("nccl_perf")).flags["duplicate_sweep"].sum()) == 504
    h100_mla = reasons(h100, "context_mla_perf").get("spike", 0)
    h100_mla += reasons(h100, "generation_mla_perf").get("spike", 0)
    assert h100_mla == 12
    assert reasons(h100, "moe_perf") == {"spike": 18, "slower_than_more_work": 4652}
    assert "slower_than_more_work" not in reasons(a100, "moe_perf")
    assert reasons(h100, "generation_attention_perf").get("faster_than_hbm", 0) == 0
    # the A100 rows that beat HBM with K + V read K alone where the mapping says so (the
    # K-only cache; K of the resident units held in the L2): none is left to exclude
    assert reasons(a100, "generation_attention_perf").get("faster_than_hbm", 0) == 0
    # A100 "fp8" MLA rows are the bf16-KV kernels: mapped as bf16, predicted, flagged
    assert "fp8_label_is_bf16" not in reasons(a100, "generation_mla_perf")
    fp8 = gen.flags["fp8_label_is_bf16"]
    assert fp8.sum() == (gen.table.columns["kv_cache_dtype"] == "fp8").sum() > 0
    assert {p.batch.dtype for p in gen.parts} == {"bf16"}
    assert set(gen.parts[0].batch.shape["kv_bytes"]) == {2.0}
    assert gen.flags["non_split_kv"].all()
    assert set(gen.parts[0].batch.shape["kv_split"]) == {0.0}


def test_not_predicted_rows_are_at_most_five_percent_per_device(h100, a100):
    """Only the stated exclusions remain in the mapped tables: H100 4,683 of 393,469 (31
    spikes, 4,652 MoE rows slower than a GPU doing more); A100 13 of 54,715 (13 spikes). The
    H100 TensorRT-LLM tables leave no table unmapped: its sparse-attention (DSA) module tables
    (13,657 rows) are kernels under the engine's host floor, its linear-attention tables (2,454
    rows) map, none left out."""
    from mlacalc.measured.mapping import UNMAPPED

    for mset, expected in ((h100, 4_683), (a100, 13)):
        assert not [t for t in mset.tables if t.table in UNMAPPED]
        left = sum(int((_map(mset, t.table).reason != "").sum()) for t in mset.tables)
        assert left == expected and left <= 0.05 * sum(len(t) for t in mset.tables)
    dsa = [t for t in h100.tables if t.table.startswith("dsa_")]
    assert sum(len(t) for t in dsa) == 13_657
    assert all(_map(h100, t.table).modelled.all() for t in dsa)


def test_decode_with_an_fp8_cache_is_an_fp8_kernel(h100):
    """Decode rows with an fp8 KV cache become fp8 kernels (they multiply at the fp8 rate),
    reading one byte per cached element; bf16-cache rows stay bf16."""
    m = _map(h100, "generation_attention_perf")
    kvd = m.table.columns["kv_cache_dtype"]
    for p in m.parts:
        fp8 = kvd[p.rows] == "fp8"
        assert (p.batch.dtype == "fp8") == bool(fp8.all()) and (fp8.all() or not fp8.any())
        assert set(p.batch.shape["kv_bytes"]) == ({1.0} if p.batch.dtype == "fp8" else {2.0})
    assert {p.batch.dtype for p in m.parts} == {"bf16", "fp8"}


def test_context_mla_with_an_fp8_cache_is_an_fp8_fmha(h100, a100):
    """H100 context MLA rows with an fp8 cache run an fp8 FMHA on quantized q, k, v (their own
    kernel class, and the quantize traffic in their bytes); A100 rows stay bf16 (rule 3)."""
    m = _map(h100, "context_mla_perf")
    kvd = m.table.columns["kv_cache_dtype"]
    by_dtype = {p.batch.dtype: p for p in m.parts}
    assert set(by_dtype) == {"bf16", "fp8"}
    assert (kvd[by_dtype["fp8"].rows] == "fp8").all()
    assert (kvd[by_dtype["bf16"].rows] != "fp8").all()
    # same shape, fp8 against bf16 cache: q, k, v read twice more (quantize, then fp8 reads);
    # the quantization (bf16 read, fp8 written) is a pass before the kernel, with the RoPE
    # (``preprocess_bytes``), and the kernel reads fp8 instead of bf16
    bf, f8 = by_dtype["bf16"].batch, by_dtype["fp8"].batch
    i = int(np.argmax(bf.shape["batch"] * bf.shape["q_len"]))
    key = (bf.shape["batch"][i], bf.shape["q_len"][i], bf.shape["n_heads"][i])
    j = next(
        j
        for j in range(len(f8))
        if (f8.shape["batch"][j], f8.shape["q_len"][j], f8.shape["n_heads"][j]) == key
    )
    tok_h = key[0] * key[1] * key[2]
    qkv = tok_h * (192 + 192 + 128)
    pre_bf, pre_f8 = bf.shape["preprocess_bytes"][i], f8.shape["preprocess_bytes"][j]
    latent = key[0] * key[1] * 576  # the latent cache written in fp8: a byte less a value
    assert pre_f8 - pre_bf == pytest.approx(3.0 * qkv - latent)
    assert f8.bytes[j] - pre_f8 - (bf.bytes[i] - pre_bf) == pytest.approx(-qkv)
    assert {p.batch.dtype for p in _map(a100, "context_mla_perf").parts} == {"bf16"}


def test_spike_rule_needs_both_neighbours():
    from mlacalc.measured.quirks import spikes

    cols = {"x": np.arange(6), "g": np.zeros(6)}
    t = np.array([1.0, 10.0, 1.2, 1.3, 1.4, 50.0])
    hit = spikes(cols, t, "x", ("g",), np.ones(6, dtype=bool))
    assert hit.tolist() == [False, True, False, False, False, False]  # the end point is kept


def test_moe_row_slower_than_a_gpu_doing_more_is_excluded():
    """A GPU holding a slice of another configuration's work (tp and ep both no smaller) cannot
    take more than twice as long in the same kernels; other calls are never compared."""
    from mlacalc.measured.quirks import slower_than_more_work

    call = {k: np.zeros(5) for k in ("moe_dtype", "num_tokens", "hidden_size")}
    cols = {
        **call,
        "num_tokens": np.array([8, 8, 8, 8, 16]),
        "moe_tp_size": np.array([1, 2, 1, 2, 2]),
        "moe_ep_size": np.array([1, 1, 2, 2, 1]),
    }
    t = np.array([1.0, 3.0, 0.6, 0.5, 9.0])
    hit = slower_than_more_work(cols, t, np.ones(5, dtype=bool))
    # tp 2 at 3.0 is 3x the tp 1 row doing twice its work; the 16-token row has no peer
    assert hit.tolist() == [False, True, False, False, False]


def test_roofline_bound_holds_except_where_tables_md_says_l2_helps(h100):
    """No row beats the plain roofline except the 57 small-n bf16 GEMMs and the 16 bf16 BMMs
    that TABLES.md lists as served from L2 (and the MoE rows the routing rule's docs name): an
    independent check of FLOPs and bytes."""
    from mlacalc.timemodel.kernel_time import roofline_seconds

    for name, allowed in (
        ("gemm_perf", 57),
        ("mla_bmm_perf", 16),
        ("generation_mla_perf", 0),
        ("context_attention_perf", 0),
        ("mla_generation_module_perf", 0),
        ("moe_perf", 5),
    ):
        m = _map(h100, name)
        ideal = np.zeros(len(m.table))
        for p in m.parts:
            ideal += np.bincount(
                p.rows,
                roofline_seconds(p.batch.flops, p.batch.bytes, "H100-SXM", p.batch.dtype)
                * p.batch.calls,
                minlength=len(m.table),
            )
        faster = (ideal > m.table.seconds) & (m.reason == "")
        assert int(faster.sum()) == allowed, name
        if name == "moe_perf":  # only power-law rows of at most 16 tokens (docs/measured-sets.md)
            cols = m.table.columns
            assert np.all(cols["num_tokens"][faster] <= 16)
            assert not np.any(cols["distribution"][faster] == "balanced")
