"""The MLA module tables as the kernel lists the engines run (docs/time-model.md, "MLA module
rows"): TensorRT-LLM's expanded prompt puts its keys together in a copy kernel of its own."""

from __future__ import annotations

import numpy as np
import pytest
from reference_data import MEASURED


def _context_module(system: str, engine: str):
    pytest.importorskip("pyarrow")
    from mlacalc.measured.mapping import map_table
    from mlacalc.measured.tables import load_measured

    t = next(x for x in load_measured(MEASURED / system / "mla", engine=engine).tables
             if x.table == "mla_context_module_perf" and x.engine == engine)  # fmt: skip
    return t, map_table(t)


@pytest.mark.parametrize("system", ["h100_sxm", "b200_sxm"])
def test_trtllm_prompt_module_copies_its_keys_together(system):
    """Every TensorRT-LLM prompt module row runs the key assembly: 128-wide k_nope read and a
    192-wide bf16 key written a token and head, the 64-wide RoPE key read once a token."""
    t, mapped = _context_module(system, "trtllm")
    (part,) = [p for p in mapped.parts if p.name == "k_assemble"]
    assert np.array_equal(np.sort(part.rows), np.arange(len(t)))
    c = t.columns
    tok = (np.asarray(c["batch_size"], float) * np.asarray(c["isl"], float))[part.rows]
    h = np.asarray(c["num_heads"], float)[part.rows]
    assert part.batch.kind == "elementwise" and part.batch.dtype == "bf16"
    np.testing.assert_allclose(part.batch.bytes, tok * h * (128 + 192) * 2 + tok * 64 * 2)
    np.testing.assert_allclose(part.batch.shape["elements"], tok * h * 192)


def test_vllm_prompt_module_keeps_its_copy_in_the_residual_fit():
    """vLLM's prompt classes are fitted on its module rows' residuals, which hold its key copy:
    no kernel of its own (mapping.K_ASSEMBLE_ENGINES)."""
    _, mapped = _context_module("h100_sxm", "vllm")
    assert not any(p.name == "k_assemble" for p in mapped.parts)


@pytest.mark.parametrize("table", ["mla_context_module_perf", "mla_generation_module_perf"])
def test_module_gemms_are_resident_only_as_part_of_the_whole_module(table):
    """Every GEMM and BMM of a module row judges its weight's L2 residency against all the
    bytes one replay cycles through the L2 (mapping.module_l2_bytes): the module's weights
    and the cached rows its attention reads, the same for every kernel of the row."""
    pytest.importorskip("pyarrow")
    from mlacalc.measured.mapping import map_table
    from mlacalc.measured.tables import load_measured
    from mlacalc.timemodel.shared import elem_bytes

    t = next(x for x in load_measured(MEASURED / "h100_sxm" / "mla", engine="trtllm").tables
             if x.table == table)  # fmt: skip
    c = t.columns
    h = np.asarray(c["num_heads"], float)
    gt = np.asarray(c["gemm_type"]).astype(str)
    e = np.where(gt == "fp8_block", 1.0, 2.0)
    weights = (2112 * 7168 + h * 192 * 1536 + 7168 * h * 128) * e + h * 256 * 512 * 2.0
    kv = np.asarray(c["isl"] if table.startswith("mla_context") else c["step"] + 1, float)
    kvb = np.where(np.asarray(c["kv_cache_dtype"]).astype(str) == "fp8", 1.0, 2.0)
    cache = np.asarray(c["batch_size"], float) * kv * 576 * kvb
    gemms = [p for p in map_table(t).parts if p.batch.kind == "gemm"]
    assert len(gemms) >= 6
    for p in gemms:
        b = p.batch
        weight = b.shape["groups"] * b.shape["n"] * b.shape["k"] * elem_bytes(b.dtype)
        np.testing.assert_allclose(
            weight * b.shape["weight_copies"], (weights + cache)[p.rows], rtol=1e-9
        )
