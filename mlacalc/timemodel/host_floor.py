"""The host floor of a module timed as the engine launches it, eagerly.

Some measured module tables time one call of a module's Python forward as the engine runs it
outside a CUDA graph: the host dispatches every op (argument checks, allocation, the launch) while
the GPU works through its queue, and the call costs the larger of the two totals
(:func:`mlacalc.timemodel.eager_time.dispatch_queue`). Where the module's kernels are short the
host's dispatch of the module is the time: DeepSeek-V3.2's sparse-attention module at one
sequence of a few tokens takes 0.30 ms under TensorRT-LLM, 0.79-0.97 ms under SGLang, 1.4 ms
under vLLM on H100 at any cached length, against about 64 us of weight reads.

The dispatch time of a module is a per-engine constant: the ops its forward runs and each op's
host cost are the engine's, not the row's. :data:`HOST_FLOOR_S` holds it per device, engine,
table and the attention path the row names (``kernel_source``: a different path runs other
ops), each the median measured time of that group's rows of the fewest tokens
(:func:`mlacalc.measured.host_floors.fit_host_floors` refits them; docs/measured-sets.md gives
the rows, medians and residuals). A row's prediction is then
``max(kernels, floor)``: the form the rows follow where the kernels pass the floor (see
docs/time-model.md, "host floor").
"""

from __future__ import annotations

import numpy as np

__all__ = ["HOST_FLOOR_S", "host_floor_seconds"]

_CTX, _GEN = "dsa_context_module_perf", "dsa_generation_module_perf"

#: (system, engine, table, kernel_source) -> the module's host dispatch time, seconds.
#: (fitted by mlacalc.measured.host_floors.fit_host_floors with each engine's shipped profile;
#: the groups not listed are kernel-bound at their fewest tokens: no floor)
HOST_FLOOR_S: dict[tuple[str, str, str, str], float] = {
    ("h100_sxm", "trtllm", _CTX, "default"): 0.000246,
    ("h100_sxm", "trtllm", _GEN, "default"): 0.0002685,
    ("b200_sxm", "trtllm", _GEN, "default"): 0.0001115,
    ("h100_sxm", "sglang", _CTX, "sglang_dsa_dense_mha_fa3"): 0.000849,
    ("h100_sxm", "sglang", _CTX, "sglang_dsa_indexer_flashmla_kv"): 0.001544,
    ("h100_sxm", "sglang", _CTX, "sglang_dsa_indexer_flashmla_sparse"): 0.001472,
    ("h100_sxm", "sglang", _CTX, "sglang_dsa_skip_indexer_flashmla_kv"): 0.0006794,
    ("h100_sxm", "sglang", _CTX, "sglang_dsa_skip_indexer_flashmla_sparse"): 0.0005988,
    ("b200_sxm", "sglang", _CTX, "sglang_dsa_dense_mha_trtllm_ragged"): 0.0008195,
    ("b200_sxm", "sglang", _CTX, "sglang_dsa_indexer_flashmla_sparse"): 0.001433,
    ("b200_sxm", "sglang", _CTX, "sglang_dsa_indexer_trtllm"): 0.001402,
    ("b200_sxm", "sglang", _CTX, "sglang_dsa_skip_indexer_flashmla_sparse"): 0.0005731,
    ("b200_sxm", "sglang", _CTX, "sglang_dsa_skip_indexer_trtllm"): 0.0005258,
    ("h100_sxm", "vllm", _CTX, "FLASHMLA_SPARSE"): 0.00145,
    ("b200_sxm", "vllm", _CTX, "FLASHINFER_MLA_SPARSE"): 0.001868,
    ("b200_sxm", "vllm", _CTX, "FLASHMLA_SPARSE"): 0.001741,
    ("b200_sxm", "vllm", _GEN, "FLASHINFER_MLA_SPARSE"): 0.0001611,
    ("b200_sxm", "vllm", _GEN, "FLASHMLA_SPARSE"): 0.0001889,
}


def host_floor_seconds(system: str, engine: str, table: str, sources) -> np.ndarray:
    """Per-row host floor (seconds) of a table's rows by their ``kernel_source``; NaN where
    :data:`HOST_FLOOR_S` has no floor for the group (its rows are predicted by their kernels
    alone)."""
    src = np.asarray(sources).astype(str)
    out = np.full(src.shape[0], np.nan)
    for name in np.unique(src):
        floor = HOST_FLOOR_S.get((system, engine, table, str(name)))
        if floor is not None:
            out[src == name] = floor
    return out
