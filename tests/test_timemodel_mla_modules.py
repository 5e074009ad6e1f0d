"""The MLA module tables as the kernel lists the engines run (docs/time-model.md, "MLA module
rows"): an expanded prompt puts its keys together in a copy kernel of its own, in every
engine, as a served step does."""

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


@pytest.mark.parametrize("engine", ["trtllm", "vllm"])
@pytest.mark.parametrize("system", ["h100_sxm", "b200_sxm"])
def test_prompt_module_copies_its_keys_together(system, engine):
    """Every expanded prompt module row runs the key assembly, in every engine (TensorRT-LLM's
    ``forward_context_default``, vLLM's ``torch.cat``): 128-wide k_nope read and a 192-wide
    bf16 key written a token and head, the 64-wide RoPE key read once a token. vLLM's rows on
    its decode path (mapping.decode_path_prompts) expand no keys."""
    from mlacalc.measured.mapping import decode_path_prompts

    t, mapped = _context_module(system, engine)
    (part,) = [p for p in mapped.parts if p.name == "k_assemble"]
    expanded = np.flatnonzero(~decode_path_prompts(t))
    assert expanded.size and np.array_equal(np.sort(part.rows), expanded)
    c = t.columns
    tok = (np.asarray(c["batch_size"], float) * np.asarray(c["isl"], float))[part.rows]
    h = np.asarray(c["num_heads"], float)[part.rows]
    assert part.batch.kind == "elementwise" and part.batch.dtype == "bf16"
    np.testing.assert_allclose(part.batch.bytes, tok * h * (128 + 192) * 2 + tok * 64 * 2)
    np.testing.assert_allclose(part.batch.shape["elements"], tok * h * 192)


@pytest.mark.parametrize("gemm_type", ["bf16", "fp8_block"])
def test_served_prompt_runs_the_module_rows_kernels(gemm_type):
    """The served DeepSeek-V3 prompt layer (cost.model_step) and the mapped TensorRT-LLM module
    row of the same shape (128 heads, bf16 cache) run the same key assembly and the same fused
    q_a+kv_a GEMM: name, FLOPs, bytes (one definition: model_step.k_assemble_bytes) and the
    GEMM's n and k. Before, the step had no k_assemble, and its qkv_a_proj carried the naive
    op sequence's expanded K/V cache write (n_h * 320 elements a token, 672 MB at 2 x 4,096
    tokens against the GEMM's own 182 MB), where the engines write each token's latent row in
    their RoPE pre-kernel."""
    from mlacalc.cost.model_step import step_kernels
    from mlacalc.measured.mapped import canon_dtypes

    t, mapped = _context_module("h100_sxm", "trtllm")
    c = t.columns
    gt, kvd = canon_dtypes(c["gemm_type"]), canon_dtypes(c["kv_cache_dtype"])
    pick = (np.asarray(c["num_heads"]) == 128) & (gt == gemm_type) & (kvd == "bf16")
    idx = int(np.flatnonzero(pick & (np.asarray(c["isl"]) == 4096))[0])
    bs, isl = int(c["batch_size"][idx]), int(c["isl"][idx])
    w = "bf16" if gemm_type == "bf16" else "fp8"
    step = step_kernels("deepseek-v3", "prefill", isl, bs, weight_dtype=w, scope="attention_layer")
    step = {k.name: k for k in step}
    for served, name in (("k_assemble", "k_assemble"), ("qkv_a_proj", "q_a+kv_a")):
        (part,) = [p for p in mapped.parts if p.name == name and idx in p.rows]
        at = int(np.flatnonzero(part.rows == idx)[0])
        k, b = step[served], part.batch
        assert k.kind == b.kind and k.flops == pytest.approx(float(b.flops[at]), rel=1e-12)
        for dim in ("n", "k", "elements"):
            if dim in k.shape:
                assert k.shape[dim] == b.shape[dim][at], (served, dim)
        if served == "qkv_a_proj" and gemm_type == "fp8_block":
            # the step's fp8 GEMM reads its bf16 input (quantized in the GEMM's own pass) where
            # the mapping counts the quantized input and the 1x128 scales
            continue
        assert k.bytes == pytest.approx(float(b.bytes[at]), rel=1e-12), served


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
