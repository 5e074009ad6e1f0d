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

Four rules of the engine's module change the step's list, each read off the rows
(docs/measured-sets.md gives the evidence): the four projections of the hidden state run as
one GEMM (``qkv_proj``, :func:`_fused_projection`); a prompt of one new token runs the decode
path; the indexer's keys stay bf16 whatever the cache; a longer prompt's core runs one query
token at a time (:func:`_per_token`). The engine's block-sparse cores are class variants of
their own (:data:`CORE_VARIANTS`), which no single-kernel table times: they are fitted on these
rows' residuals (:func:`mlacalc.measured.observations.residual_observations`).

Every quantity of the list (FLOPs, bytes, every shape field) is affine in the batch at a fixed
(heads, dtypes, ``isl``, ``step``): the list is built at batch 1 and 2 per distinct key and a
row is their linear interpolation (tests/test_measured_msa_modules.py checks it against the
list built at the row's own batch). The KV heads are not affine in the query heads below 16,
so the heads are part of the key (8 values in the tables).
"""

from __future__ import annotations

from functools import cache

import numpy as np

from mlacalc.cost.block_sparse import (
    BLOCK_SPARSE_KERNELS,
    block_sparse_core,
    block_sparse_keys_and_pairs,
)
from mlacalc.cost.engine import cost_of
from mlacalc.cost.model_step import attention_kernels
from mlacalc.measured.mapped import KernelPart, KernelSlots
from mlacalc.measured.tables import MeasuredTable
from mlacalc.models.architecture import kind_model, layer_pattern
from mlacalc.models.loading import ModelConfig, load_model
from mlacalc.words.kernels import Kernel
from mlacalc.words.workload import Workload

__all__ = ["CORE_VARIANTS", "MSA_MODELS", "PROMPT_CORE", "msa_module_kernels", "msa_module_parts"]

#: The checkpoint the tables name, as the shipped model it is.
MSA_MODELS = {"MiniMaxAI/MiniMax-M3": "minimax-m3"}
#: ``gemm_type`` -> the weights' dtype (``fp8_block``: a step's fp8 GEMMs; ``nvfp4``: fp4)
_WEIGHTS = {"bfloat16": "bf16", "bf16": "bf16", "fp8_block": "fp8", "nvfp4": "fp4"}
_CACHE = {"bfloat16": "bf16", "bf16": "bf16", "fp8": "fp8"}
#: the kernel name of a prompt's core run one query token at a time (:func:`_per_token`)
PROMPT_CORE = "attention_per_token"
#: the engine's block-sparse kernels, which no single-kernel table times: core name -> class
#: variant, each fitted on the residuals of these tables' rows (docs/measured-sets.md)
CORE_VARIANTS = {"attention": "msa", PROMPT_CORE: "msa_prefill"}


@cache
def _model(name: str, heads: int) -> ModelConfig:
    """One block-sparse layer of ``name`` with ``heads`` query heads, its KV heads scaled."""
    m = load_model(MSA_MODELS[name])
    kind = next(k for k in layer_pattern(m).layers if k.attention == "msa")
    kv = max(1, m.num_key_value_heads * heads // m.num_attention_heads)
    sub = kind_model(m, kind).replaced(num_hidden_layers=1)
    return sub.replaced(num_attention_heads=heads, num_key_value_heads=kv)


def msa_module_kernels(
    model: str, heads: int, gemm_type: str, kv_cache_dtype: str, batch: int, isl: int,
    step: int, decode: bool,
) -> list[Kernel]:  # fmt: skip
    """The kernels of one row: one block-sparse layer of ``model`` (a name of
    :data:`MSA_MODELS`) at ``heads`` query heads, ``batch`` sequences of ``isl`` new tokens
    after ``step`` cached ones (``decode``: one new token, the decode kernels)."""
    m = _model(model, heads)
    w, kv = _WEIGHTS[gemm_type], _CACHE[kv_cache_dtype]
    if decode or isl == 1:  # one new token: the engine's decode path, prompt or not
        work = Workload("decode", step + isl, batch, None, None, False, kv, w, "bf16")
    elif step:
        work = Workload("chunk", isl + step, batch, isl, None, True, kv, w, "bf16")
    else:
        work = Workload("prefill", isl, batch, None, None, True, kv, w, "bf16")
    window = m.sparse_topk_blocks * m.sparse_block_size
    kernels = attention_kernels(cost_of(m, work), m, "bf16", w, 1, window, kv)
    if kv != "bf16":  # the indexer's keys stay bf16 whatever the cache (module docs)
        keys = attention_kernels(cost_of(m, work), m, "bf16", w, 1, window, "bf16")
        indexer = {k.name: k for k in keys if k.name in BLOCK_SPARSE_KERNELS}
        kernels = [indexer.get(k.name, k) for k in kernels]
    kernels = _fused_projection(block_sparse_core(kernels, m))
    if work.phase == "decode":
        return kernels
    return [_per_token(k, m, kv) if k.name == "attention" else k for k in kernels]


def _per_token(core: Kernel, m: ModelConfig, cache: str) -> Kernel:
    """A prompt's block-sparse core as the engine's sparse kernel runs it: every new token a
    query of its own over the blocks its indexer chose (no two queries share a block list), an
    ``attention_decode`` over ``batch * q`` one-token queries (:data:`PROMPT_CORE`) each
    attending the mean of the keys the new tokens attend (rounded up; the time model walks a
    unit's keys in 64-key blocks), in the ``cache``'s dtype as the decode core is (it reads
    the cache as it is: an fp8 cache's prompt rows take some 1.45 times the bf16 cache's on
    H100 at long prompts). FLOPs and bytes are the counted core's; ``seqs`` is the call's
    sequences, over which Blackwell's kernel passes for every query token and head
    (:func:`mlacalc.timemodel.attention_time.sequence_pass_s`)."""
    s = core.shape
    b, q, S = s["batch"], s["q_len"], s["kv_len"]
    B, T = m.sparse_block_size, m.sparse_topk_blocks
    _, pairs = block_sparse_keys_and_pairs(q, S, B, T, True)
    keys = -(-pairs // q)
    shape = {"batch": b * q, "q_len": 1, "kv_len": keys, "n_heads": s["n_heads"],
             "n_kv": s["n_kv"], "head_dim_qk": s["head_dim_qk"], "head_dim_v": s["head_dim_v"],
             "window": 0, "causal": 0, "sinks": 0, "rope_kernel": 0,
             "selected_cap": T * B, "seqs": b}  # fmt: skip
    return Kernel(PROMPT_CORE, "attention_decode", cache, core.flops, core.bytes, core.calls,
                  shape)  # fmt: skip


#: the GEMMs of the hidden state that run as one (``qkv_proj``), in the order their outputs
#: are concatenated
_FUSED = ("q_proj", "kv_proj", "block_indexer_q_proj", "block_indexer_k_proj")


def _fused_projection(kernels: list[Kernel]) -> list[Kernel]:
    """``kernels`` with the four projections of the hidden state (:data:`_FUSED`) as one GEMM,
    ``qkv_proj``, in the first one's place: ``m`` tokens by ``d`` to the concatenated ``n``,
    the FLOPs and weight, output and cache bytes theirs, the hidden state read once (each of
    the four read it)."""
    parts = [k for k in kernels if k.name in _FUSED]
    first = parts[0]
    m, d = first.shape["m"], first.shape["k"]
    reread = (len(parts) - 1) * m * d * 2  # bf16 activations
    fused = Kernel(
        name="qkv_proj",
        kind="gemm",
        dtype=first.dtype,
        flops=sum(k.flops for k in parts),
        bytes=sum(k.bytes for k in parts) - reread,
        calls=first.calls,
        shape={"m": m, "n": sum(k.shape["n"] for k in parts), "k": d, "groups": 1},
    )
    out = []
    for k in kernels:
        if k is first:
            out.append(fused)
        elif k.name not in _FUSED:
            out.append(k)
    return out


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
    # the rows of each distinct key, in the table's order (one sort, not a pass a key)
    order = np.argsort(inverse, kind="stable")
    bounds = np.searchsorted(inverse[order], np.arange(len(uniq) + 1))
    slots = KernelSlots()  # the kernels of each (name, kind, dtype), one vector per row
    for u, (model, g, c, h, q, s) in enumerate(uniq.tolist()):
        at = ok[order[bounds[u] : bounds[u + 1]]]
        one, two = (msa_module_kernels(model, int(h), g, c, bb, int(q), int(s), decode)
                    for bb in (1, 2))  # fmt: skip
        for k1, k2 in zip(one, two):
            slots.add_corners((k1, k2), at)
            if k1.name in CORE_VARIANTS:
                slots.name_variant(k1, CORE_VARIANTS[k1.name])
    b_all = bs[:, None] - 1.0

    def affine(
        slot: tuple[str, str, str], at: np.ndarray, v: np.ndarray, which: np.ndarray
    ) -> np.ndarray:
        """Affine in the batch between the lists of batch 1 and 2 (the same arithmetic,
        element by element, as key by key)."""
        return v[which, 0] + b_all[at] * (v[:, 1] - v[:, 0])[which]

    slots.interpolate(affine)
    return slots.parts(t.engine)
