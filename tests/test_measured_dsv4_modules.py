"""DeepSeek-V4's compressed attention module tables mapped onto a model step's kernels."""

from pathlib import Path

import numpy as np
import pytest

MEASURED = Path(__file__).resolve().parent.parent / "mlacalc" / "data" / "measured"


def _table(system: str, engine: str, table: str):
    from mlacalc.measured.tables import load_measured

    version = {"sglang": "0.5.14", "vllm": "0.24.0"}[engine]
    path = MEASURED / system / "sparse_attention" / engine / version / f"{table}.parquet"
    (t,) = load_measured(path).tables
    return t


@pytest.mark.parametrize(
    "table", ["dsv4_csa_context_module_perf", "dsv4_hca_generation_module_perf"]
)
def test_interpolated_rows_are_the_kernel_list_built_at_the_rows_own_batch_and_heads(table):
    """The mapping builds each (model, gemm_type, isl, step) at four corners (batch 1 and 2 by
    8 and 16 heads) and interpolates: every kernel of 40 random rows (FLOPs, bytes, every shape
    field) equals the list built at the row's own batch and heads."""
    pytest.importorskip("pyarrow")
    from mlacalc.measured.dsv4_modules import dsv4_module_kernels
    from mlacalc.measured.mapping import map_table

    t = _table("h100_sxm", "vllm", table)
    mapped = map_table(t)
    c = t.columns
    decode = "generation" in table
    kind = "csa" if "_csa_" in table else "hca"
    rng = np.random.default_rng(0)
    for row in rng.choice(len(t), size=40, replace=False).tolist():
        want = dsv4_module_kernels(
            str(c["model"][row]), kind, int(c["num_heads"][row]), str(c["gemm_type"][row]),
            int(c["batch_size"][row]), 1 if decode else int(c["isl"][row]), int(c["step"][row]),
            decode,
        )  # fmt: skip
        got = {k["name"]: k for k in mapped.kernels_of_row(row)}
        assert set(got) == {k.name for k in want}
        for k in want:
            g = got[k.name]
            assert (g["kind"], g["dtype"]) == (k.kind, k.dtype)
            np.testing.assert_allclose([g["flops"], g["bytes"]], [k.flops, k.bytes], rtol=1e-9)
            for f, v in k.shape.items():
                assert g["shape"][f] == pytest.approx(v, rel=1e-9), (k.name, f)


def test_every_v4_module_row_of_a_known_checkpoint_is_predicted():
    """vLLM's H100 V4 module tables and its HCA attention kernel table: every row predicted
    (none left out); the kernel table's rows are the list's ``attention`` kernel alone."""
    pytest.importorskip("pyarrow")
    from mlacalc.measured.mapping import map_table
    from mlacalc.measured.observations import predict_mapped

    tables = ("dsv4_csa_context_module_perf", "dsv4_hca_generation_module_perf",
              "dsv4_hca_attn_module_perf")  # fmt: skip
    for table in tables:
        mapped = map_table(_table("h100_sxm", "vllm", table))
        pred = predict_mapped(mapped, None, "fit-h100-sxm-vllm")
        assert mapped.modelled.all() and np.isfinite(pred).all()
        if table == "dsv4_hca_attn_module_perf":
            assert {p.name for p in mapped.parts} == {"attention"}


#: Each engine's V4 module tables by its fitted profile of the device (read alone), nothing
#: fitted on them: (engine, system, profile, table, median, p90), as measured-sets.md gives.
#: vLLM's H100 decode rows are 1.9-2.1x over (its decode kernels, no table of their own).
#: The B200 bounds are read after the Blackwell terms' refit of B200's GEMM and prefill classes
#: (f0f43e4), which moved these rows, none fitted on: SGLang's context medians 0.218 / 0.249 ->
#: 0.257 / 0.269, vLLM's CSA/HCA 0.17-0.31 -> 0.15-0.34, its HCA attention kernel 0.279 -> 0.203.
V4 = [
    ("sglang", "h100_sxm", "fit-h100-sxm-sglang", "dsv4_csa_context_module_perf", 0.24, 0.53),
    ("sglang", "h100_sxm", "fit-h100-sxm-sglang", "dsv4_csa_generation_module_perf", 0.245, 0.56),
    ("sglang", "h100_sxm", "fit-h100-sxm-sglang", "dsv4_hca_context_module_perf", 0.249, 0.56),
    ("sglang", "h100_sxm", "fit-h100-sxm-sglang", "dsv4_hca_generation_module_perf", 0.224, 0.48),
    ("sglang", "b200_sxm", "fit-b200-sxm-sglang", "dsv4_csa_context_module_perf", 0.262, 0.565),
    ("sglang", "b200_sxm", "fit-b200-sxm-sglang", "dsv4_csa_generation_module_perf", 0.195, 0.37),
    ("sglang", "b200_sxm", "fit-b200-sxm-sglang", "dsv4_hca_context_module_perf", 0.273, 0.605),
    ("sglang", "b200_sxm", "fit-b200-sxm-sglang", "dsv4_hca_generation_module_perf", 0.067, 0.29),
    ("vllm", "h100_sxm", "fit-h100-sxm-vllm", "dsv4_csa_context_module_perf", 0.223, 0.60),
    ("vllm", "h100_sxm", "fit-h100-sxm-vllm", "dsv4_csa_generation_module_perf", 1.136, 1.66),
    ("vllm", "h100_sxm", "fit-h100-sxm-vllm", "dsv4_hca_context_module_perf", 0.226, 0.55),
    ("vllm", "h100_sxm", "fit-h100-sxm-vllm", "dsv4_hca_generation_module_perf", 0.862, 1.36),
    ("vllm", "b200_sxm", "fit-b200-sxm-vllm", "dsv4_csa_context_module_perf", 0.184, 0.54),
    ("vllm", "b200_sxm", "fit-b200-sxm-vllm", "dsv4_csa_generation_module_perf", 0.344, 0.59),
    ("vllm", "b200_sxm", "fit-b200-sxm-vllm", "dsv4_hca_context_module_perf", 0.155, 0.45),
    ("vllm", "b200_sxm", "fit-b200-sxm-vllm", "dsv4_hca_generation_module_perf", 0.167, 0.38),
    # the HCA attention kernel alone (its H100 decode rows 5.8x over, B200's 1.2x)
    ("vllm", "h100_sxm", "fit-h100-sxm-vllm", "dsv4_hca_attn_module_perf", 0.28, 0.94),
    ("vllm", "b200_sxm", "fit-b200-sxm-vllm", "dsv4_hca_attn_module_perf", 0.21, 0.31),
]


@pytest.mark.slow
@pytest.mark.parametrize("engine, system, profile, table, median, p90", V4)
def test_v4_module_rows_of_every_engine_and_device(engine, system, profile, table, median, p90):
    pytest.importorskip("pyarrow")
    from mlacalc.measured.mapping import map_table
    from mlacalc.measured.observations import predict_mapped

    mapped = map_table(_table(system, engine, table))
    pred = predict_mapped(mapped, None, profile)
    assert mapped.modelled.all() and np.isfinite(pred).all()
    e = np.abs(pred / mapped.table.seconds - 1.0)
    assert np.median(e) <= median and np.percentile(e, 90) <= p90


def test_distinct_kernels_time_each_shape_once():
    """A batch's distinct kernels (equal in every field) and each kernel's index among them."""
    from mlacalc.measured.mapped import distinct_kernels
    from mlacalc.words.kernels import KernelBatch

    rng = np.random.default_rng(1)
    n = 500
    m = rng.integers(0, 4, n).astype(float)
    kb = KernelBatch("gemm", "bf16", rng.integers(0, 5, n).astype(float), 2.0 * m, np.ones(n),
                     {"m": m, "k": np.full(n, 7.0)}, "")  # fmt: skip
    u, inv = distinct_kernels(kb)
    cols = np.column_stack([kb.flops, kb.bytes, kb.shape["m"], kb.shape["k"]])
    got = np.column_stack([u.flops, u.bytes, u.shape["m"], u.shape["k"]])
    assert len(u) == len(np.unique(cols, axis=0)) and (got[inv] == cols).all()
