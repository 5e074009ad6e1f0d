"""MiniMax-M3's block-sparse attention module tables as the kernels of one ``msa`` layer.

vLLM 0.24.0's ``msa_{context,generation}_module_perf`` (H100: ``MiniMaxM3SparseTritonImpl``,
B200: ``MiniMaxM3SparseMSAImpl``) time one call of MiniMax-M3's block-sparse attention module
(``model`` ``MiniMaxAI/MiniMax-M3``, ``tp_size`` 1) for ``batch_size`` sequences of ``isl`` new
tokens after ``step`` cached ones (generation: ``isl`` 1, the new token the ``step + 1``-th key,
as the collection's meta file keys it since its 2026-08-13 re-key), ``num_heads`` query heads,
``gemm_type`` projections (``bfloat16``, ``fp8_block``, ``nvfp4``) and a ``kv_cache_dtype``
cache. The tables do not list the module's kernels; a row is read as one ``msa`` layer's
attention block of a model step: ``q_proj``, ``kv_proj``, RoPE, the indexer
(:func:`mlacalc.cost.block_sparse.block_indexer_kernels`: its two projections, the scores of
every cached key, the block top-k), the core over the chosen blocks
(:func:`~mlacalc.cost.block_sparse.block_sparse_core`) and ``o_proj``, as
:func:`mlacalc.cost.model_step.attention_kernels` builds them for the shipped ``minimax-m3``
with ``num_heads`` query heads and its KV heads scaled with them (``max(1, 4 H / 64)``: the
share of a tensor-parallel rank holding ``H`` of the 64 heads; 8 at 128 heads), the indexer
(4 heads, one key) whole. The rows bear this reading out where it can be read: at one
sequence the time grows with the heads as the q/o weights do and halves with ``fp8_block``
(the projections are in the call); at 256 sequences of 131,072 keys it is about 3 ms on H100
at any head count (the indexer's scores over every key, which no head count shares).

Every quantity of the list (FLOPs, bytes, every shape field) is affine in the batch at a fixed
(heads, dtypes, ``isl``, ``step``): the list is built at batch 1 and 2 per distinct key and a
row is their linear interpolation (tests/test_measured_msa_modules.py checks it against the
list built at the row's own batch). The KV heads are not affine in the query heads below 16,
so the heads are part of the key (8 values in the tables).
"""

from __future__ import annotations

from functools import cache

import numpy as np

from mlacalc.cost.block_sparse import block_sparse_core
from mlacalc.cost.engine import cost_of
from mlacalc.cost.model_step import attention_kernels
from mlacalc.measured.mapped import KernelPart, KernelSlots
from mlacalc.measured.tables import MeasuredTable
from mlacalc.models.architecture import kind_model, layer_pattern
from mlacalc.models.loading import ModelConfig, load_model
from mlacalc.words.kernels import Kernel
from mlacalc.words.workload import Workload

__all__ = ["MSA_MODELS", "msa_module_kernels", "msa_module_parts"]

#: The checkpoint the tables name, as the shipped model it is.
MSA_MODELS = {"MiniMaxAI/MiniMax-M3": "minimax-m3"}
#: ``gemm_type`` -> the weights' dtype (``fp8_block``: a step's fp8 GEMMs; ``nvfp4``: fp4)
_WEIGHTS = {"bfloat16": "bf16", "bf16": "bf16", "fp8_block": "fp8", "nvfp4": "fp4"}
_CACHE = {"bfloat16": "bf16", "bf16": "bf16", "fp8": "fp8"}


@cache
def _model(name: str, heads: int) -> ModelConfig:
    """One block-sparse layer of ``name`` with ``heads`` query heads, its KV heads scaled."""
    m = load_model(MSA_MODELS[name])
    kind = next(k for k in layer_pattern(m).layers if k.attention == "msa")
    kv = max(1, m.num_key_value_heads * heads // m.num_attention_heads)
    sub = kind_model(m, kind).with_changes(num_hidden_layers=1)
    return sub.with_changes(num_attention_heads=heads, num_key_value_heads=kv)


def msa_module_kernels(
    model: str, heads: int, gemm_type: str, kv_cache_dtype: str, batch: int, isl: int,
    step: int, decode: bool,
) -> list[Kernel]:  # fmt: skip
    """The kernels of one row: one block-sparse layer of ``model`` (a name of
    :data:`MSA_MODELS`) at ``heads`` query heads, ``batch`` sequences of ``isl`` new tokens
    after ``step`` cached ones (``decode``: one new token, the decode kernels)."""
    m = _model(model, heads)
    w, kv = _WEIGHTS[gemm_type], _CACHE[kv_cache_dtype]
    if decode:
        work = Workload("decode", step + 1, batch, None, None, False, kv, w, "bf16")
    elif step:
        work = Workload("chunk", isl + step, batch, isl, None, True, kv, w, "bf16")
    else:
        work = Workload("prefill", isl, batch, None, None, True, kv, w, "bf16")
    window = m.sparse_topk_blocks * m.sparse_block_size
    kernels = attention_kernels(cost_of(m, work), m, "bf16", w, 1, window, kv)
    return block_sparse_core(kernels, m)


def msa_module_parts(t: MeasuredTable, reason: np.ndarray) -> list[KernelPart]:
    """The kernels of every row of a MiniMax-M3 msa module table (see the module docs); rows
    of another model or of a ``gemm_type`` / ``kv_cache_dtype`` without a dtype here are
    marked (``unknown_model``, ``unknown_dtype``)."""
    models = t.column("model").astype(str)
    gemm = t.column("gemm_type").astype(str)
    cache_dt = t.column("kv_cache_dtype").astype(str)
    known = np.isin(models, list(MSA_MODELS))
    dtypes = np.isin(gemm, list(_WEIGHTS)) & np.isin(cache_dt, list(_CACHE))
    reason[~known] = "unknown_model"
    reason[known & ~dtypes] = "unknown_dtype"
    ok = np.flatnonzero(known & dtypes)
    decode = "generation" in t.table
    heads = t.column("num_heads").astype(np.int64)
    bs = t.column("batch_size").astype(np.float64)
    isl = np.ones(len(t), dtype=np.int64) if decode else t.column("isl").astype(np.int64)
    step = t.column("step").astype(np.int64)
    keys = np.stack([models[ok], gemm[ok], cache_dt[ok], heads[ok].astype(str),
                     isl[ok].astype(str), step[ok].astype(str)], axis=1)  # fmt: skip
    uniq, inverse = np.unique(keys, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    slots = KernelSlots()  # the kernels of each (name, kind, dtype), one vector per row
    for u, (model, g, c, h, q, s) in enumerate(uniq.tolist()):
        at = ok[inverse == u]
        one, two = (msa_module_kernels(model, int(h), g, c, bb, int(q), int(s), decode)
                    for bb in (1, 2))  # fmt: skip
        b = bs[at][:, None] - 1.0
        for k1, k2 in zip(one, two):
            v1, v2 = slots.vector(k1)[None, :], slots.vector(k2)[None, :]
            slots.add(k1, at, v1 + b * (v2 - v1))
    return slots.parts()
