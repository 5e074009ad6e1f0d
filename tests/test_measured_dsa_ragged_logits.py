"""SGLang's DSA prompt indexer pays a pass over its batch's whole ragged logits matrix
(mlacalc.cost.compressed.dsa_ragged_logits_bytes; docs/time-model.md, "Sparse-attention
kernels"): every query a row over every sequence's keys, the elements outside a query's own
keys at RAGGED_LOGITS_BYTES each, where some query selects."""

from __future__ import annotations

import numpy as np
import pytest

from mlacalc.cost.compressed import RAGGED_LOGITS_BYTES, dsa_ragged_logits_bytes


def test_the_pass_is_the_matrix_outside_each_querys_own_keys():
    # 2 sequences of 4 new tokens after 4,096 cached: 8 rows of 8,200 keys; a query's own
    # keys are 4,097..4,100 (16,406 of a sequence's 4 queries)
    own = 2 * (4 * 4096 + 4 * 5 / 2)
    want = RAGGED_LOGITS_BYTES * (8 * 8200 - own)
    assert dsa_ragged_logits_bytes(2, 4, 4096, 2048, False, "sglang") == pytest.approx(want)
    # one sequence: only the causal triangle above its queries' keys
    got = dsa_ragged_logits_bytes(1, 4, 4096, 2048, False, "sglang")
    assert got == pytest.approx(RAGGED_LOGITS_BYTES * 4 * 3 / 2)
    # quadratic in the sequences at a fixed shape (the tail of SGLang's module rows)
    one, two = (dsa_ragged_logits_bytes(b, 4, 16384, 2048, False, "sglang") for b in (512, 1024))
    assert two / one == pytest.approx(4.0, rel=1e-3)


def test_no_pass_in_decode_under_other_engines_or_where_no_query_selects():
    args = (np.array([64.0, 64.0]), np.array([4.0, 4.0]), np.array([2044.0, 2045.0]), 2048)
    assert dsa_ragged_logits_bytes(*args, True, "sglang").tolist() == [0.0, 0.0]
    for engine in ("vllm", "trtllm", ""):
        assert dsa_ragged_logits_bytes(*args, False, engine).tolist() == [0.0, 0.0]
    # 2,048 keys at most: every key taken, no selection, no pass (SGLang's dense path's rows)
    got = dsa_ragged_logits_bytes(*args, False, "sglang")
    assert got[0] == 0.0 and got[1] > 0.0


@pytest.mark.parametrize(
    ("system", "bound_tail", "bound_all"),
    # the rows with at least 2^32 (query, key of the batch) elements: median |error| H100
    # 49.1% -> 16.2%, B200 41.7% -> 14.9% (signed -49.1% -> -7.2%, -41.6% -> -8.8%); the
    # table's p90 31.3% -> 22.2%, 33.0% -> 24.8%
    [("h100_sxm", 0.18, 0.235), ("b200_sxm", 0.17, 0.26)],
)
def test_sglang_prompt_rows_of_many_sequences_after_a_long_cache(system, bound_tail, bound_all):
    pytest.importorskip("pyarrow")
    from reference_data import MEASURED

    from mlacalc.measured.mapping import map_table
    from mlacalc.measured.observations import predict_mapped
    from mlacalc.measured.tables import load_measured

    path = MEASURED / system / "sparse_attention" / "sglang" / "0.5.14"
    (t,) = load_measured(path / "dsa_context_module_perf.parquet").tables
    mapped = map_table(t)
    prof = f"fit-{system.replace('_', '-')}-sglang"
    err = predict_mapped(mapped, None, prof) / t.seconds - 1.0
    ok = mapped.modelled & np.isfinite(err)
    src = t.column("kernel_source").astype(str)
    indexer = (np.char.find(src, "_indexer_") >= 0) & (np.char.find(src, "skip_") < 0)
    bs, isl, step = (t.column(c).astype(float) for c in ("batch_size", "isl", "step"))
    tail = ok & indexer & (bs * isl * bs * (step + isl) >= 2.0**32)
    assert tail.sum() > 7000
    assert np.median(np.abs(err[tail])) <= bound_tail  # 0.491 / 0.417 without the pass
    assert np.median(err[tail]) >= -0.12  # -0.491 / -0.416
    assert np.percentile(np.abs(err[ok]), 90) <= bound_all  # 0.313 / 0.330


def _sglang_b200_dsa_row() -> dict:
    """The B200 SGLang DSA prompt module row of DeepSeek-V3.2 at 64 sequences of 4 new tokens
    after 16,384 cached (``sglang_dsa_indexer_trtllm``), mapped: its parts by name."""
    pytest.importorskip("pyarrow")
    import dataclasses

    from reference_data import MEASURED

    from mlacalc.measured.mapping import map_table
    from mlacalc.measured.tables import load_measured

    path = MEASURED / "b200_sxm" / "sparse_attention" / "sglang" / "0.5.14"
    (t,) = load_measured(path / "dsa_context_module_perf.parquet").tables
    c = t.columns
    hit = (c["model"].astype(str) == "deepseek-ai/DeepSeek-V3.2") & (c["batch_size"] == 64)
    hit &= (c["isl"] == 4) & (c["step"] == 16384)
    hit &= c["kernel_source"].astype(str) == "sglang_dsa_indexer_trtllm"
    row = np.flatnonzero(hit)[:1]
    assert row.size == 1
    one = dataclasses.replace(t, columns={k: v[row] for k, v in c.items()}, seconds=t.seconds[row])
    return {p.name: p for p in map_table(one).parts}


def _v32_chunk(engine: str) -> tuple[list, object]:
    """DeepSeek-V3.2's attention layer at that row's shape under ``engine`` (predict_time's
    step kernels) and the plan's step model of it on one B200."""
    from mlacalc.cost.model_step import step_kernels
    from mlacalc.hardware.catalogue import load_hardware
    from mlacalc.models.loading import load_model
    from mlacalc.serving.gpu_step import StepModel
    from mlacalc.serving.layout import Layout
    from mlacalc.words.dtypes import resolve_kv_layout

    ks = step_kernels("deepseek-v3.2", "chunk", 16388, 64, 4, causal=True, kv_dtype="fp8",
                      engine=engine, scope="attention_layer")  # fmt: skip
    sm = StepModel(load_model("deepseek-v3.2"), Layout(1, 1, 1, 1, 1, False, 1, 1), "fp8",
                   resolve_kv_layout("fp8"), load_hardware("B200"), engine=engine)  # fmt: skip
    return ks, sm


def test_a_served_sglang_prompt_runs_the_pass_its_module_rows_are_mapped_to():
    """A served DSA prompt under SGLang (predict_time's kernels and plan's step model) runs the
    pass with the bytes the mapping gives the module row of its shape; a decode step, a prompt
    that selects nothing and vLLM's prompt run none."""
    want = float(_sglang_b200_dsa_row()["ragged_logits"].batch.bytes[0])
    assert want == pytest.approx(dsa_ragged_logits_bytes(64, 4, 16384, 2048, False, "sglang"))
    ks, sm = _v32_chunk("sglang")
    (k,) = [k for k in ks if k.name == "indexer_ragged_logits"]
    assert (k.kind, k.dtype, k.flops) == ("elementwise", "bf16", 0)
    assert k.bytes == pytest.approx(want, abs=1.0)
    # a prompt batch like the row, one of a single sequence of 1,000 keys (none selects), and
    # a decode step: the pass runs for the first alone
    specs = sm.specs(pf_N=np.array([64.0, 1.0]), pf_q=np.array([4.0, 1000.0]),
                     pf_pre=np.array([16384.0, 0.0]))  # fmt: skip
    got = sum(s.bytes for s in specs if s.name == "indexer_ragged_logits")
    assert got[0] == pytest.approx(want) and got[1] == 0.0
    specs = sm.specs(dec_B=np.array([64.0]), dec_S=np.array([16389.0]))
    assert sum(s.bytes[0] for s in specs if s.name == "indexer_ragged_logits") == 0.0
    _, vllm = _v32_chunk("vllm")
    specs = vllm.specs(pf_N=np.array([64.0]), pf_q=np.array([4.0]), pf_pre=np.array([16384.0]))
    assert not [s for s in specs if s.name == "indexer_ragged_logits"]


def test_sglangs_prompt_logits_give_the_batchs_keys_the_mapping_and_a_served_step_alike():
    """SGLang scores a DSA prompt batch as one ragged run, a logits row as wide as all its
    sequences' keys (attention_time.logits_row_slowdown reads them as ``batch_keys``): the
    module row's logits, predict_time's kernel and the plan's step model give the same count;
    a decode step and vLLM's prompt give none."""
    part = _sglang_b200_dsa_row()["mqa_logits"]
    assert part.batch.shape["batch_keys"].tolist() == [64 * 16388]
    ks, sm = _v32_chunk("sglang")
    (k,) = [k for k in ks if k.name == "indexer_scores"]
    assert k.shape["batch_keys"] == 64 * 16388
    (k,) = [k for k in _v32_chunk("vllm")[0] if k.name == "indexer_scores"]
    assert "batch_keys" not in k.shape
    specs = sm.specs(pf_N=np.array([64.0, 2.0]), pf_q=np.array([4.0, 1000.0]),
                     pf_pre=np.array([16384.0, 0.0]))  # fmt: skip
    scores = [s for s in specs if s.name == "indexer_scores"]
    (s,) = [s for s in scores if s.kind == "attention_prefill"]
    assert s.shape["batch_keys"].tolist() == [64 * 16388, 2 * 1000]
    assert all("batch_keys" not in s.shape for s in scores if s.kind != "attention_prefill")


def test_deepseek_v4s_prompt_indexer_under_sglang_gives_the_batchs_pooled_keys():
    """DeepSeek-V4's CSA prompt indexer runs the same DeepGEMM logits over the pooled keys: its
    batch keys are the sequences' pooled keys (``seq_len // ratio`` each), in a served step
    (cost.compressed) and in the module rows' mapping alike; vLLM's give none."""
    from mlacalc.cost.model_step import step_kernels

    for engine, want in (("sglang", 64 * (16388 // 4)), ("vllm", None)):
        ks = step_kernels("deepseek-v4-pro", "chunk", 16388, 64, 4, causal=True, kv_dtype="fp8",
                          engine=engine, scope="model")  # fmt: skip
        scores = [k for k in ks if k.name == "indexer_scores" and k.kind == "attention_prefill"]
        assert scores and all(k.shape.get("batch_keys") == want for k in scores)
    pytest.importorskip("pyarrow")
    from reference_data import MEASURED

    from mlacalc.measured.mapping import map_table
    from mlacalc.measured.tables import load_measured

    path = MEASURED / "b200_sxm" / "sparse_attention" / "sglang" / "0.5.14"
    (t,) = load_measured(path / "dsv4_csa_context_module_perf.parquet").tables
    parts = map_table(t).parts
    (part,) = [
        p for p in parts if p.name == "indexer_scores" and p.batch.kind == "attention_prefill"
    ]
    bs, isl, step = (t.column(c)[part.rows].astype(float) for c in ("batch_size", "isl", "step"))
    want = bs * np.maximum(np.floor((step + isl) / 4), 1)
    assert np.allclose(part.batch.shape["batch_keys"], want)
