"""DeepSeek-V4's compressed attention module tables as the kernels a model step runs.

``dsv4_{csa,hca}_{context,generation}_module_perf`` (SGLang, vLLM; H100, B200) time one
attention layer of DeepSeek-V4-Flash or -Pro of that kind (CSA: one pooled key per 4 tokens
and the lightning indexer's top-k; HCA: one per 128, all attended) for ``batch_size``
sequences of ``isl`` new tokens after ``step`` cached ones, ``num_heads`` local heads. A row
is the layer's kernel list as :mod:`mlacalc.cost.compressed` builds it for a model step
(``compressed_cost`` and ``compressed_kernels``: the projections, the compressor and its
pooling, the indexer, the core attention, the grouped output projection), for the row's
model with its local heads (``o_groups`` scaled with them, at least one), an fp8 cache, bf16
activations and the row's ``gemm_type`` weights (``fp8_block``: the fp8 GEMMs of a step).

Building the list row by row costs about 0.14 ms, 14 s for one device's SGLang tables. Every
quantity of the list (FLOPs, bytes, every shape field) is affine in the batch ``b`` at a fixed
head count (the projections' rows, the attention's units and its cache reads grow with it,
the weights do not) and affine in the local heads ``h`` at a fixed batch (q_b's outputs, the
output groups (one per 8 heads in both models at every head count the tables hold), the
attention's heads; the compressor and the indexer do not change): bilinear, ``A + B b + C h +
D b h``; the core runs at least :data:`~mlacalc.cost.compressed.HEAD_TILE` heads (padded), so
it is bilinear in ``max(h, 64)``. So the list is built at four corners per distinct (model,
``gemm_type``, ``isl``, ``step``), batch 1 and 2 by 64 and 128 heads, and a row is their
bilinear interpolation
(tests/test_measured_dsv4_modules.py checks it against the list built at the row's own batch
and heads).

vLLM's ``dsv4_hca_attn_module_perf`` times the HCA layer's attention kernel alone
(``FLASHMLA_SPARSE_DSV4``, DeepSeek-V4-Flash's 64 heads, an fp8 cache): the ``attention``
kernel of that list, decode where ``isl`` is 1, else a causal prompt of ``isl`` after
``step`` (as ``benchmarks/bench_dsv4_modules.py`` compares it).
"""

from __future__ import annotations

import os
from dataclasses import replace
from functools import cache
from pathlib import Path

import numpy as np

from mlacalc.cost.compressed import (
    FLAT_TOPK_ENGINES,
    FUSED_QKV_A,
    HEAD_TILE,
    LONG_ROW,
    PADDED_QUERY,
    RAGGED,
    RAGGED_CORE,
    compressed_cost,
    compressed_kernels,
    ragged_core_shape,
)
from mlacalc.cost.model_step import as_stored
from mlacalc.measured.mapped import KernelPart, KernelSlots
from mlacalc.measured.tables import MeasuredTable, load_measured
from mlacalc.models import deepseek_v4 as v4
from mlacalc.models.loading import ModelConfig, load_model
from mlacalc.models.patterns import LayerKind
from mlacalc.words.kernels import V4_TOPK_VARIANTS, Kernel
from mlacalc.words.workload import Workload

__all__ = [
    "DSV4_MODELS",
    "FLAT_TOPK",
    "FLAT_TOPK_ENGINES",
    "FUSED_QKV_A",
    "LONG_ROW",
    "LONG_TOPK",
    "PADDED_QUERY",
    "PROMPT_LONG_TOPK",
    "PROMPT_TOPK",
    "RAGGED",
    "RAGGED_CORE",
    "SHARED_KERNEL_TABLES",
    "dsv4_module_kernels",
    "dsv4_module_parts",
    "shared_kernel_tables",
]

#: The checkpoints the tables name: DeepSeek-V4-Pro (the shipped ``deepseek-v4-pro``; the FP8
#: checkpoint and the original are one architecture) and DeepSeek-V4-Flash (the config class's
#: defaults, :data:`mlacalc.models.deepseek_v4.DEFAULTS`: Pro's layout at 4,096 wide, 64 heads,
#: q rank 1,024, 8 output groups, top-k 512).
DSV4_MODELS = {
    "sgl-project/DeepSeek-V4-Pro-FP8": "pro",
    "deepseek-ai/DeepSeek-V4-Pro": "pro",
    "sgl-project/DeepSeek-V4-Flash-FP8": "flash",
}
_FLASH = {
    k: v4.DEFAULTS[k]
    for k in ("hidden_size", "num_attention_heads", "q_lora_rank", "o_groups", "o_lora_rank",
              "index_n_heads", "index_head_dim", "index_topk", "sliding_window", "head_dim")
}  # fmt: skip
_WEIGHTS = {"fp8_block": "fp8", "bfloat16": "bf16", "bf16": "bf16"}
#: The class variant of the CSA top-k in SGLang's decode rows: ``topk_transform_v2`` over flat
#: logits (the collector's random weights score every key alike), fitted on SGLang's
#: ``dsv4_csa_topk_calib_perf``. The rows show it: DeepSeek-V4-Flash's CSA decode at one
#: sequence takes 118-121 us up to 2,048 cached tokens and 201-206 us from 4,096 to 65,536 (the
#: top-k selects once a query has more than 512 pooled keys), as the calibration's v2 kernel
#: on flat logits takes 82 us there; DeepSeek-V4-Pro's jump comes at 6,144 (1,024 keys).
#: Fitted, the class is in effect a constant (its ``unit_latency_s`` at its upper bound; with
#: the long rows in its fit, :data:`LONG_TOPK`, its ``eff_memory`` and ``sm_bandwidth`` were at
#: theirs too): 81-85 us on H100 (65-69 us on B200) to every row of up to 128 sequences, as the
#: rows of 4,096 to 65,536 cached tokens take 81-85 us (65-69 us). Over its 108 rows (the
#: calibration's long rows are :data:`LONG_TOPK`'s) a device median / p90 |error| 0.6% / 1.2% on
#: H100, 0.5% / 1.3% on B200 (1.0% / 400% and 1.0% / 308% while it took the 14 long flat rows
#: too, predicted 4-8x); the rows at 3,072 cached tokens (768 pooled keys) take 39-49 us,
#: predicted 64-70% over.
FLAT_TOPK = V4_TOPK_VARIANTS[0]
#: Past LONG_ROW pooled keys a row the v2 kernel takes another path, whose time the
#: calibration shows does not depend on the logits' spread: on flat logits 9.9-16.9 us on H100
#: from 32,768 to 262,144 pooled keys against 9.4-14.3 us on top-last ones (B200 9.3-16.9 and
#: 8.7-14.4), where up to 16,384 flat logits take 82 us (65-69 on B200; no calibration row lies
#: between 16,384 and 32,768 pooled keys). A class of its own (``topk_v2_long``), fitted on
#: those 28 rows a device, both modes (H100 3.4% / 7.7%, B200 3.2% / 7.8% median / p90); the
#: top-last class had timed them (and the module rows, a served step), its fit over the short
#: rows' keys giving 6.6 us at 32,768 pooled keys and 34.8 us at 262,144 where the top-last
#: rows take 9.5 and 14.3 (H100): 30% short to 2.4x over.
LONG_TOPK = V4_TOPK_VARIANTS[1]
#: SGLang's prompt top-k: ``topk_transform_v1`` over flat logits (the transform the
#: calibration times at prompt sizes: 31-51 ns a selecting query on H100 from 256 to 8,192
#: queries, where the top-last logits take 11-18), one unit a query that selects. The rows
#: show it: a CSA prompt row's residual a token, less the HCA row's of the same shape, rises
#: by 60-90 ns on H100 (about 50 on B200) once queries have more pooled keys than the top-k.
PROMPT_TOPK = V4_TOPK_VARIANTS[2]
#: The v1 transform past :data:`LONG_ROW` pooled keys a row (its last query's), over flat
#: logits: another path, as the v2 kernel's, its time a key about half the shorter rows'. The
#: calibration (``dsv4_csa_topk_calib_perf``, rows of 256 selecting queries and more) shows
#: it: its flat rows take 0.0126 ns a key and query on H100 at 8,193-12,288 keys and 0.0083
#: at 16,385-18,432 (B200 0.0097 and 0.0061; no row lies between), 0.005 past 131,072 (B200
#: 0.003), where the top-last rows take 0.004 from 4,096 keys on (B200 0.002): not the
#: top-last time, as the v2 kernel's long rows are. Timed by the one ``topk_v1_flat`` class,
#: these rows (1,000+ selecting queries) were over-predicted by 12%, 29%, 39% and 55% on H100
#: from 16,384 to 32,768, 65,536, 131,072 keys and beyond (B200 13%, 49%, 63%, 66%), the rows
#: of 4,096-16,384 keys short by 13-15%.
PROMPT_LONG_TOPK = V4_TOPK_VARIANTS[3]
#: Kernel tables of one engine that time a kernel another engine's module runs too, and that
#: engine's fit takes in: ``{engine: {(the engine that measured it, table), ...}}``. SGLang's
#: DeepSeek-V4 layer (``kernel_source`` ``compressed_flashmla``) runs FlashMLA's sparse kernels,
#: the kernels vLLM's ``dsv4_hca_attn_module_perf`` times alone (``FLASHMLA_SPARSE_DSV4``, the
#: HCA core of DeepSeek-V4-Flash); SGLang publishes no table of them alone, so its profiles
#: fitted no ``sparse`` prefill class and timed its prompt core by the dense prefill class of
#: FA3's tables, which gives that table's prompt rows 35-37% less than measured at the
#: median (H100 195 us where the kernel takes 389 at 4,096 tokens; B200 110 against 253).
#:
#: The DSA indexer's top-k likewise: TensorRT-LLM's (``indexer_topk_decode`` and its prompt
#: kernel) and vLLM's (``top_k_per_row``) are one CTA a selecting row over its fp32 logits, as
#: SGLang's ``fast_topk_transform_fused`` is, and neither engine publishes a table of its own;
#: SGLang's ``glm5_topk_module_perf`` times that work, so their fits take it in for the
#: ``topk_*`` classes, a stand-in for their own kernel (it is not the same code). Before, their
#: DSA module rows timed the top-k by the plain streaming class, bandwidth alone (2-12 us a
#: call at 1 to 1,024 rows, where SGLang's kernel takes 10-124 us on H100): TensorRT-LLM's
#: B200 decode rows from 4,096 cached keys on were 21% short at the median, its H100 prompt
#: rows of 3,072 tokens and more 15% (docs/time-model.md gives the figures before and after).
SHARED_KERNEL_TABLES = {
    "sglang": frozenset({("vllm", "dsv4_hca_attn_module_perf")}),
    "trtllm": frozenset({("sglang", "glm5_topk_module_perf")}),
    "vllm": frozenset({("sglang", "glm5_topk_module_perf")}),
}
# The evidence for SGLang's ragged prompt core (mlacalc.timemodel.kernel_time.RAGGED, timed by
# its own class RAGGED_CORE, which a served step takes as the mapping here does):
# The engines whose prompt core runs the chunk's tokens of every sequence as one ragged batch
# (FlashMLA's sparse prefill takes each token's own index list, a token a unit, as GLM-5's
# ``glm5_dsa_attn_module_perf`` maps it), nothing padded per sequence: SGLang. Its module
# rows show it: HCA prompts (H100, DeepSeek-V4-Flash, 64 heads, bf16) take what their
# attention-less kernels leave at about 140 ns a token however the tokens split into
# sequences (1,024 tokens as 1,024 x 1, 256 x 4, 64 x 16: 142, 140, 140 us), where vLLM's
# kernel table, on which the ``sparse`` prefill class is fitted, takes 1.6 us a sequence of 4
# tokens (1,631 us at 1,024 x 4 against 389 us for one sequence of 4,096).
# The class variant of that ragged prompt core (``attention_prefill:bf16:sparse_ragged``),
# which no single-kernel table times: fitted on the residuals of SGLang's CSA and HCA prompt
# rows (:data:`mlacalc.measured.observations.RESIDUAL_VARIANTS`), not on vLLM's
# ``dsv4_hca_attn_module_perf`` (whose kernel pads per sequence). Timed by vLLM's fit, the core
# of SGLang's H100 HCA prompts (DeepSeek-V4-Flash, 64 heads) grows with the cached tokens
# 1.8-1.9x as fast as predicted wherever a row has 256 tokens or more (the row's time less that
# of the same row at 4,096 cached tokens, against the predicted difference, medians per
# token count from 8,192 to 1,000,000 cached): vLLM's kernel of one 256-token prompt takes
# 254 us after 524,288 tokens, where SGLang's layer takes 369 us more than after 4,096.

# The evidence for FUSED_QKV_A (mlacalc.cost.compressed), the engines whose module rows run the
# query's low-rank projection and the shared key's projection (``q_a_proj``, ``kv_proj``: both read
# the layer's input) as one GEMM, as vLLM runs DeepSeek-V2/V3's ``q_a_proj`` and
# ``kv_a_proj_with_mqa`` (``fused_qkv_a_proj``; from recall of vLLM's DeepSeek model code, not read
# from a source in this repository). The rows show it: vLLM's decode rows of one sequence were
# predicted 4-29 us over (H100) and 5-26 us (B200) at every head count, a GEMM's fixed cost being
# 6-9 us there; one GEMM of ``q_lora_rank + head_dim`` outputs takes that away (the prompts of one
# token, predicted 4-21 us over on H100, come within 0-13 us). vLLM alone: SGLang's rows are fitted
# with the projections apart.
#
# The evidence for PADDED_QUERY, the engines whose module rows move the query through a buffer of
# the core's padded heads once more than the list's kernels do (``q_pad``: a read and a write of
# ``64 ceil(h / 64)`` heads of ``head_dim`` bf16 a token): vLLM. Inferred from its rows, the kernel
# is not recorded: its prompts of 1,024 tokens and more (DeepSeek-V4-Flash, one query projection
# fused as above) were short by 42 ns a token on H100 and 21 on B200 at every local head count from
# 8 to 64 (B200; on H100 from 8 to 16 heads, more at 32-64 heads and long prompts) and about alike
# for DeepSeek-V4-Pro at 16 heads (hidden 7,168 against 4,096: not a pass over the hidden state, nor
# the hyper-connections' four fp32 streams, which would take 51 and 88 ns on H100), however many
# cached tokens; 128 KB a token (64 heads) at the streaming class's rate takes 46 ns on H100 and 20
# on B200.

#: the local head counts the lists are built at (8 and 16 output groups); every kernel is
#: affine in the heads from 8 up (one output group per 8 heads), the core from HEAD_TILE up
_H1, _H2 = HEAD_TILE, 2 * HEAD_TILE


def shared_kernel_tables(paths, engine: str | None) -> list[MeasuredTable]:
    """The tables of :data:`SHARED_KERNEL_TABLES` for ``engine`` under ``paths`` (a measured
    set's folders, as :func:`~mlacalc.measured.tables.load_measured` takes them): the other
    engine's files of those names, read whatever their engine; none where ``engine`` borrows
    none or ``paths`` holds none of them."""
    want = SHARED_KERNEL_TABLES.get(engine)
    if not want:
        return []
    items = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    out = []
    for item in items:
        root = Path(item)
        if not root.is_dir():
            continue
        for other, name in sorted(want):
            for f in sorted(root.rglob(f"{name}.parquet")):
                out += [t for t in load_measured(f).tables if t.engine == other]
    return out


@cache
def _model(name: str, heads: int) -> ModelConfig:
    """The row's model with ``heads`` local heads (its output groups scaled with them)."""
    pro = load_model("deepseek-v4-pro")
    base = pro if DSV4_MODELS[name] == "pro" else pro.replaced(**_FLASH)
    groups = max(1, base.o_groups * heads // base.num_attention_heads)
    return base.replaced(num_attention_heads=heads, o_groups=groups)


def dsv4_module_kernels(
    model: str, kind: str, heads: int, gemm_type: str, batch: int, isl: int, step: int,
    decode: bool, engine: str = "",
) -> list[Kernel]:  # fmt: skip
    """The kernels of one row: a ``kind`` (``csa``/``hca``) layer of ``model`` (a name of
    :data:`DSV4_MODELS`) at ``heads`` local heads, ``batch`` sequences of ``isl`` new tokens
    after ``step`` cached ones (``decode``: one new token, the decode kernels), as ``engine``
    runs them: the kernels a served step of that engine runs
    (:func:`~mlacalc.cost.compressed.compressed_kernels` with its ``engine``: SGLang's CSA
    top-k over flat logits, as ``dsv4_csa_topk_calib_perf`` maps it, one unit a query that
    selects; vLLM's ``q_a_proj`` and ``kv_proj`` as one GEMM and its pass over the padded
    query), and a prompt's core as one ragged batch of every sequence's tokens where the
    engine runs it so (:data:`RAGGED`: the shape
    :func:`~mlacalc.cost.compressed.ragged_core_shape` gives, which a served step's time
    model takes too)."""
    m = _model(model, heads)
    rate = m.compress_rate_csa if kind == "csa" else m.compress_rate_hca
    layer = LayerKind(kind, ffn="moe", ratio=rate)
    phase = "decode" if decode else ("chunk" if step else "prefill")
    w = Workload(phase, isl + step, batch, q_len=isl, causal=True, kv_dtype="fp8",
                 weight_dtype=_WEIGHTS[gemm_type])  # fmt: skip
    cost = compressed_cost(m, layer, 1, w)
    out = compressed_kernels(cost, m, "bf16", _WEIGHTS[gemm_type], 1, "fp8", engine)
    if _WEIGHTS[gemm_type] != "bf16":
        out = _kept_as_stored(out, model, heads)
    if engine in RAGGED and not decode:
        out = [_ragged(k) if k.name == "attention" else k for k in out]
    return out


def _kept_as_stored(kernels: list[Kernel], model: str, heads: int) -> list[Kernel]:
    """``kernels`` (built at a narrower weight dtype) with each GEMM whose weights the
    checkpoint keeps at 16 bits as a served step runs it
    (:func:`~mlacalc.cost.model_step.as_stored`): a bf16 GEMM reading bf16 weights, with no
    quantize of its input. In DeepSeek-V4's fp8 checkpoints that is the CSA indexer's
    ``weights_proj`` (one weight per indexer head, which no quantized format converts:
    :data:`mlacalc.cost.quant._NEVER`); the module rows had timed it as an fp8 GEMM with its
    input's quantize. Every other kernel as built."""
    # only a narrower GEMM can change, and how rests on its name and class alone (as_stored
    # reads each kernel on its own, its dtype from the checkpoint's tensor of that name, its
    # weights' bytes swapped for the checkpoint's: the same difference at any shape)
    out = list(kernels)
    for i, k in enumerate(kernels):
        if k.kind == "gemm" and k.dtype != "bf16":
            stored = _stored_bf16(model, heads, k)
            if stored is not None:
                dtype, delta = stored
                out[i] = Kernel(k.name, k.kind, dtype, k.flops, k.bytes + delta, k.calls, k.shape)
    return out


_STORED_BF16: dict[tuple[str, int, str, str, str], tuple[str, int] | None] = {}


def _stored_bf16(model: str, heads: int, k: Kernel) -> tuple[str, int] | None:
    """Where :func:`~mlacalc.cost.model_step.as_stored` reads ``k`` (a GEMM of the row's
    model at ``heads`` local heads) as a bf16 GEMM, its dtype and the bytes it adds (its
    weights as stored less as built), else None: asked once a (model, heads, name, kind,
    dtype) for the process."""
    key = (model, heads, k.name, k.kind, k.dtype)
    if key not in _STORED_BF16:
        s = as_stored([k], _model(model, heads), "bf16")[0]
        _STORED_BF16[key] = (s.dtype, s.bytes - k.bytes) if s.dtype == "bf16" else None
    return _STORED_BF16[key]


def _ragged(k: Kernel) -> Kernel:
    """``k``, a prompt core, as an engine of :data:`RAGGED` runs it."""
    return replace(k, shape=ragged_core_shape(k.shape))


def dsv4_module_parts(t: MeasuredTable, reason: np.ndarray) -> list[KernelPart]:
    """The kernels of every row of a DeepSeek-V4 CSA/HCA module table (see the module docs);
    rows of a model not in :data:`DSV4_MODELS` or a ``gemm_type`` it has no weights for are
    marked (``unknown_model``, ``unknown_dtype``)."""
    kind = "csa" if "_csa_" in t.table else "hca"
    core = t.table == "dsv4_hca_attn_module_perf"  # the attention kernel alone
    models = t.column("model").astype(str)
    gemm = t.column("gemm_type").astype(str)
    reason[~np.isin(models, list(DSV4_MODELS))] = "unknown_model"
    reason[~np.isin(gemm, list(_WEIGHTS))] = "unknown_dtype"
    ok = np.isin(models, list(DSV4_MODELS)) & np.isin(gemm, list(_WEIGHTS))
    heads = t.column("num_heads").astype(np.int64)
    bs = t.column("batch_size").astype(np.int64)
    generation = "generation" in t.table
    isl = np.ones(len(t), dtype=np.int64) if generation else t.column("isl").astype(np.int64)
    step = t.column("step").astype(np.int64)
    decode = (isl == 1) if core else np.full(len(t), generation)
    ragged = t.engine in RAGGED
    keys = np.stack([isl, step, decode.astype(np.int64)], axis=1)
    slots = KernelSlots()  # the kernels of each (name, kind, dtype), one vector per row
    for (model, g), rows in _groups(models, gemm, ok):
        # the rows of each distinct key (in the keys' order), in the table's order: one stable
        # sort of the keys (np.unique's order and rows; its axis=0 sort took longer)
        mine = keys[rows]
        order = np.lexsort(mine.T[::-1])
        sk = mine[order]
        starts = np.flatnonzero(np.append(True, (sk[1:] != sk[:-1]).any(axis=1)))
        uniq, bounds = sk[starts], np.append(starts, len(order))
        for u, (q, s, d) in enumerate(uniq.tolist()):
            at = rows[order[bounds[u] : bounds[u + 1]]]
            corners = [dsv4_module_kernels(model, kind, hh, g, bb, q, s, bool(d), t.engine)
                       for bb, hh in ((1, _H1), (2, _H1), (1, _H2), (2, _H2))]  # fmt: skip
            if core:
                corners = [[k for k in c if k.name == "attention"] for c in corners]
            for ks in zip(*corners):
                if ragged and ks[0].name == "attention" and ks[0].kind == "attention_prefill":
                    slots.name_variant(ks[0], RAGGED_CORE)
                slots.add_corners(ks, at)
    # every slot's rows interpolated at once (the same arithmetic, element by element, as key
    # by key): bilinear in the batch and the heads, the core's heads padded to a multiple of
    # HEAD_TILE (compressed_kernels), so affine in those
    b_all = bs.astype(np.float64)[:, None] - 1.0
    h_all = heads.astype(np.float64)[:, None]
    h_pad = (np.ceil(h_all / HEAD_TILE) * HEAD_TILE - _H1) / (_H2 - _H1)
    h_own = (h_all - _H1) / (_H2 - _H1)

    def bilinear(
        slot: tuple[str, str, str], at: np.ndarray, c: np.ndarray, which: np.ndarray
    ) -> np.ndarray:
        b, h = b_all[at], (h_pad if slot[0] in ("attention", "q_pad") else h_own)[at]
        v11, v21, v12, v22 = c[:, 0], c[:, 1], c[:, 2], c[:, 3]
        # the corners' differences once a key, then each row's (the same figures as row by row)
        d_b, d_h, d_bh = v21 - v11, v12 - v11, v22 - v21 - v12 + v11
        return v11[which] + b * d_b[which] + h * d_h[which] + b * h * d_bh[which]

    slots.interpolate(bilinear)
    return slots.parts(t.engine)


def _groups(models: np.ndarray, gemm: np.ndarray, ok: np.ndarray):
    for model in np.unique(models[ok]):
        for g in np.unique(gemm[ok & (models == model)]):
            yield (str(model), str(g)), np.flatnonzero(ok & (models == model) & (gemm == g))
