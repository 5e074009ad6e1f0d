"""A measured balanced MoE row and a served step of balanced routing count their experts' row
tiles by one function (``moe_time.whole_row_tiles``, ``ROWS_SPREAD`` 2): whole rows, each
expert's padded on its own, which is exact for the round-robin loads of a balanced row. Before,
the measured rows gave every expert but the busiest the mean of the rest padded to whole tiles
(at 16.25 rows an expert, two 16-row tiles each where three quarters of the experts have one),
while a served step of the same call took whole rows: the classes were fitted on another count
than the one a step was timed with."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mlacalc.cost.engine import as_model
from mlacalc.hardware.catalogue import load_hardware
from mlacalc.measured.mapping import map_table
from mlacalc.measured.tables import MeasuredTable
from mlacalc.serving import StepModel, make_layout
from mlacalc.serving.gpu_step import _variant
from mlacalc.timemodel.device import device_figures
from mlacalc.timemodel.engine_profiles import profile_for
from mlacalc.timemodel.kernel_time import run_class
from mlacalc.timemodel.moe_time import ROWS_SPREAD, _moe_m_tiles
from mlacalc.timemodel.terms import default_params, kernel_terms
from mlacalc.words.dtypes import resolve_kv_layout
from mlacalc.words.kernels import KernelBatch

TILES = np.array([8.0, 16.0, 32.0, 64.0, 128.0, 256.0])[:, None]

#: (tokens, top-k, experts, EP): means of whole rows, of a fraction past a tile's rows, of fewer
#: assignments than experts, and a rank of one expert
CALLS = [(260, 8, 128, 1), (260, 8, 128, 4), (1000, 8, 256, 8), (7, 22, 512, 8),
         (96, 6, 64, 2), (4096, 8, 128, 32), (33, 10, 512, 512), (16, 8, 128, 1)]  # fmt: skip


def _round_robin_tiles(tokens: int, topk: int, experts: int, ep: int, tile: float) -> float:
    """Row tiles of the measured rank (rank 0) of a balanced row, counted from its loads
    (the independent route): assignment ``j`` goes to expert ``j mod E``, expert ``e`` sits on
    rank ``e mod ep``; each touched expert's rows padded to whole tiles."""
    a = tokens * topk
    loads = [a // experts + (e < a % experts) for e in range(0, experts, ep)]
    return float(sum(math.ceil(n / tile) for n in loads if n))


def _mapped(calls, dtype="bfloat16", source="moe_torch_flow_cutlass", device="H100-SXM"):
    """The moe batch the mapping gives balanced ``moe_perf`` rows of ``calls``, rows in order."""
    t, k, e, ep = (np.array(c) for c in zip(*calls, strict=True))
    n = len(calls)
    table = MeasuredTable(
        table="moe_perf", system="test", device=device, family="moe", framework="trtllm",
        version="1.3.0rc20", provenance="test", source="test",
        columns={
            "moe_dtype": np.array([dtype] * n), "num_tokens": t,
            "hidden_size": np.full(n, 2048), "inter_size": np.full(n, 768), "topk": k,
            "num_experts": e, "moe_tp_size": np.full(n, 1), "moe_ep_size": ep,
            "distribution": np.array(["balanced"] * n),
            "kernel_source": np.array([source] * n),
        },
        seconds=np.full(n, 1e-4),
    )  # fmt: skip
    part = map_table(table, quirks=False).parts[0]
    order = np.argsort(part.rows)
    shape = {name: np.asarray(v)[order] for name, v in part.batch.shape.items()}
    return KernelBatch("moe", part.batch.dtype, part.batch.flops[order],
                       part.batch.bytes[order], np.ones(n), shape)  # fmt: skip


def test_balanced_rows_count_their_round_robin_tiles():
    batch = _mapped(CALLS)
    assert (batch.shape[ROWS_SPREAD] == 2).all()
    s = batch.shape
    pairs = batch.flops / (2.0 * s["hidden"] * s["inter"] * 3.0)
    active, top = s["active_experts"], s["max_tokens_per_expert"]
    got = _moe_m_tiles(TILES, active, pairs, top, s[ROWS_SPREAD])
    want = [[_round_robin_tiles(*c, float(tm)) for c in CALLS] for tm in TILES[:, 0]]
    assert got == pytest.approx(np.array(want), rel=1e-9)
    # the equal share's count (no spread) pads every expert past 16 rows to two 16-row tiles
    equal = _moe_m_tiles(TILES, active, pairs, top)
    assert equal[1, 0] == 256 and got[1, 0] == pytest.approx(160)  # 32 of 17 rows, 96 of 16


def _served(batch_size: int, hw_name: str, engine: str, experts: str | None):
    """Qwen3-30B-A3B's routed experts on one GPU (128 experts, top-8, hidden 2,048,
    intermediate 768) decoding ``batch_size`` sequences under balanced routing, as its engine
    runs them, with the profile and device figures."""
    m, hw = as_model("qwen3-30b-a3b"), load_hardware(hw_name)
    prof = profile_for(engine, hw.name, hw)[0]
    comps = {"experts": experts} if experts else None
    sm = StepModel(m, make_layout(m, 1), None, resolve_kv_layout("bf16"), hw, prof,
                   routing="balanced", engine=engine, component_dtypes=comps)  # fmt: skip
    (sp,) = [s for s in sm.specs(dec_B=np.array([float(batch_size)])) if s.name == "routed_experts"]
    batch = KernelBatch(sp.kind, sp.dtype, sp.flops, sp.bytes, np.ones(1), sp.shape, _variant(sp))
    return run_class(batch, hw, prof)[0], device_figures(hw)


@pytest.mark.parametrize(
    ("hw_name", "engine", "experts", "dtype", "source"),
    [
        # TensorRT-LLM's CUTLASS MoE, the library's fastest tile
        ("H100-SXM", "trtllm", None, "bfloat16", "moe_torch_flow_cutlass"),
        # FlashInfer's TensorRT-LLM-gen MoE: a 16-row tile at 16.25 rows an expert
        ("B200", "sglang", "nvfp4", "nvfp4", "sglang_flashinfer_trtllm_moe"),
    ],
)
def test_a_served_balanced_step_and_a_measured_balanced_row_agree(
    hw_name, engine, experts, dtype, source
):
    """260 sequences, 2,080 routed copies over 128 experts (16.25 rows an expert, every expert
    touched): the served step's experts and the measured row of the same call run the same
    tiles, so the same compute under the same parameters (before: the row 1.6x the step's
    tiles of 16 rows)."""
    served, fig = _served(260, hw_name, engine, experts)
    assert served.shape[ROWS_SPREAD][0] == 2
    measured = _mapped([(260, 8, 128, 1)], dtype, source, hw_name)
    s, m = served.shape, measured.shape
    assert s["active_experts"][0] == pytest.approx(m["active_experts"][0], rel=1e-6)
    assert s["max_tokens_per_expert"][0] == m["max_tokens_per_expert"][0] == 17
    assert served.flops[0] == pytest.approx(measured.flops[0], rel=1e-9)
    prm = default_params("moe")
    a = kernel_terms(served, fig, prm)["compute_s"][0]
    b = kernel_terms(measured, fig, prm)["compute_s"][0]
    assert a == pytest.approx(b, rel=1e-3)
