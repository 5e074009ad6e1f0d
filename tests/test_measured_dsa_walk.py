"""The DSA module tables' sparse MLA kernels that walk every top-k slot of a query
(mlacalc.measured.mapping._SPARSE_WALK): TensorRT-LLM's on H100 (both phases) and vLLM's H100
prompt rows with an fp8 cache and at most 16 heads run over all 2,048 slots, 64 query heads a
pass, each pass gathering its query's slots; every other row over the slots its keys fill, at
its own heads."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from reference_data import MEASURED

pytest.importorskip("pyarrow")

VERSION = {"trtllm": "1.3.0rc20", "sglang": "0.5.14", "vllm": "0.24.0"}


def _attention(system: str, engine: str, table: str, every: int = 1):
    """Every ``every``-th row of the table and, per row, its sparse MLA kernel's shape
    (kv_len, n_heads, variant, bytes)."""
    from mlacalc.measured.mapping import map_table
    from mlacalc.measured.tables import load_measured

    path = MEASURED / system / "sparse_attention" / engine / VERSION[engine] / f"{table}.parquet"
    (t,) = load_measured(path).tables
    cols = {k: v[::every] for k, v in t.columns.items()}
    t = dataclasses.replace(t, columns=cols, seconds=t.seconds[::every])
    mapped = map_table(t)
    n = len(t)
    kv, heads, nbytes = np.full(n, np.nan), np.full(n, np.nan), np.full(n, np.nan)
    variant = np.full(n, "", dtype=object)
    for p in mapped.parts:
        if p.name in ("sparse_mla", "mla_decode"):
            kv[p.rows] = p.batch.shape["kv_len"]
            heads[p.rows] = p.batch.shape["n_heads"]
            nbytes[p.rows] = p.batch.bytes
            variant[p.rows] = p.batch.variant
    return t, kv, heads, variant, nbytes, mapped


@pytest.mark.parametrize("table", ["dsa_context_module_perf", "dsa_generation_module_perf"])
def test_trtllm_h100_walks_every_slot_in_64_head_passes(table):
    t, kv, heads, variant, nbytes, _ = _attention("h100_sxm", "trtllm", table)
    h = t.columns["num_heads"].astype(float)
    assert (kv == 2048).all()  # whatever the keys: the slots past the cache walked too
    assert np.array_equal(heads, 64 * np.ceil(h / 64))  # 1-64 heads one pass, 128 two
    assert (variant == "sparse").all()  # a decode query is one query over its slots
    # each pass gathers its query's 2,048 latent rows (576 bf16 values)
    tokens = t.columns["batch_size"] * (t.columns["isl"] if "context" in table else 1)
    assert (nbytes >= tokens * heads / 64 * 2048 * 576 * 2).all()


def test_trtllm_b200_walks_the_slots_its_keys_fill():
    t, kv, heads, _, _, _ = _attention("b200_sxm", "trtllm", "dsa_context_module_perf", 3)
    c = t.columns
    assert np.array_equal(kv, np.minimum(c["step"] + c["isl"], 2048))
    assert np.array_equal(heads, c["num_heads"].astype(float))


def test_vllm_h100_walks_only_with_an_fp8_cache_and_few_heads():
    t, kv, heads, _, _, _ = _attention("h100_sxm", "vllm", "dsa_context_module_perf", 3)
    c = t.columns
    walk = (c["kv_cache_dtype"].astype(str) == "fp8") & (c["num_heads"] <= 16)
    assert walk.any() and (~walk).any()
    assert (kv[walk] == 2048).all() and (heads[walk] == 64).all()
    keys = np.minimum(c["step"] + c["isl"], 2048)
    assert np.array_equal(kv[~walk], keys[~walk])
    assert np.array_equal(heads[~walk], c["num_heads"][~walk].astype(float))


def test_sglang_b200_dense_and_tensorrt_llm_gen_paths():
    """SGLang's B200 dense path (``..._dense_mha_trtllm_ragged``) is the dense path (kv_b and a
    prompt attention over every key, no sparse kernel), as H100's ``..._dense_mha_fa3``; its
    TensorRT-LLM-gen sparse path (``..._trtllm``) the plain MLA decode class in the cache's
    dtype (the kernel of SGLang's B200 generation_mla_perf rows), FlashMLA's the ``sparse``
    variant in bf16."""
    t, kv, _, variant, _, mapped = _attention("b200_sxm", "sglang", "dsa_context_module_perf", 25)
    src = t.columns["kernel_source"].astype(str)
    dense = np.char.find(src, "_dense_mha_") >= 0
    assert dense.any() and np.isnan(kv[dense]).all()  # no sparse kernel on the dense rows
    prefill = np.zeros(len(t), bool)
    dtype = np.full(len(t), "", dtype=object)
    for p in mapped.parts:
        if p.batch.kind == "mla_prefill":
            prefill[p.rows] = True
        if p.name == "sparse_mla":
            dtype[p.rows] = p.batch.dtype
    assert np.array_equal(prefill, dense)
    gen = np.char.endswith(src, "_trtllm")
    kvd = t.columns["kv_cache_dtype"].astype(str)
    assert gen.any() and (variant[gen] == "").all()
    assert (dtype[gen] == np.where(kvd[gen] == "fp8", "fp8", "bf16")).all()
    flashmla = np.char.endswith(src, "_flashmla_sparse")
    assert (variant[flashmla] == "sparse").all() and (dtype[flashmla] == "bf16").all()
