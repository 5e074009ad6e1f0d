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
