"""DeepSeek-V4's attention layers (``csa``, ``hca``, ``swa``): FLOPs, bytes, cache and kernels.

Every DeepSeek-V4 layer attends with one shared K = V head of ``head_dim`` (``D``): a query
low-rank path (``q_a_proj`` ``d -> q_lora_rank``, its norm, ``q_b_proj`` to ``n_h D``, each
head's row normalised without weight and rotated: ``rope``, one streaming pass), the
window's key (``kv_proj`` ``d -> D``), one sink logit per head, a grouped output projection
(``o_groups`` products of ``n_h D / g -> o_lora_rank``, then ``g o_lora_rank -> d``). The kinds
differ in what the query sees besides the last ``W`` (``sliding_window``) keys:

- ``hca`` (heavily compressed attention): a compressor (kv and gate projections ``d -> D``
  each) pools every ``m' = compress_rate_hca`` tokens into one key; every pooled key is
  attended;
- ``csa`` (compressed sparse attention): the compressor projects two overlapping series
  (``d -> 2 D`` kv and gate) pooled every ``m = compress_rate_csa`` tokens; a lightning indexer
  with its own compressor at ``index_head_dim`` (``d_i``), a query (``q_lora_rank -> n_i d_i``)
  and per-head weights (``d -> n_i``) scores every pooled key, and the query attends the
  ``index_topk`` best;
- ``swa``: the window only.

The counting rules are at the end of this module (:func:`cache_bytes`, :func:`attention_flops`,
:func:`forward_flops`, on the :class:`~mlacalc.models.deepseek_v4.V4Config` the model reads
into; checked against transformers' ``modeling_deepseek_v4`` on the meta device and with
``FlopCounterMode``); :func:`compressed_cost` lays them out as one layer's operations.
FLOPs (2 per multiply-add): the projections as above, ``compressor`` and
``indexer_compressor`` (stage ``kv_proj``), the indexer's query and weights (``q_proj``),
``indexer_scores`` (``2 n_i d_i`` per query and pooled key, stage ``core``) and ``attention``
(``core``): ``4 n_h D`` per (query, key) pair over the keys a kernel that skips masked ones
attends, the query at 1-based position ``j`` ``min(j, W)`` window keys and ``j // m`` pooled
keys (at most ``index_topk`` in a CSA layer). The reference's eager product (every pooled key,
masked) is :func:`attention_flops`' ``core``.

Cache per sequence (:func:`compressed_layer_bytes`, the engine convention: a ring of ``W``
window rows): the window's rows, one pooled key of ``D`` per ``m`` tokens, a CSA layer's pooled
indexer key of ``d_i`` per ``m`` tokens, and the compressors' bounded state (the kv and gate
rows of an unfinished window; CSA's overlap rows): it grows by ``2 D / m'`` values a token in an
HCA layer and ``(D + d_i) / m`` in a CSA layer.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import replace
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from mlacalc.cost.attention import AttentionCost, OpCost, op_cost, packed_bytes
from mlacalc.models import deepseek_v4 as v4
from mlacalc.models.patterns import LayerKind
from mlacalc.words.dtypes import dtype_bits, gemm_class, resolve_kv_layout
from mlacalc.words.kernels import (
    DSA_TOPK_CODE,
    OWN_DECODE_TOPK_CODE,
    ROW_PROMPT_SHORT_CODE,
    ROW_PROMPT_TOPK_CODE,
    ROW_PROMPT_WIDE_CODE,
    Kernel,
)
from mlacalc.words.vocab import NORM_FLOPS_PER_ELEMENT, STAGES
from mlacalc.words.workload import Workload

if TYPE_CHECKING:
    from mlacalc.models.schema import ModelConfig

__all__ = [
    "COMPRESSED_KERNELS",
    "CONVENTIONS",
    "EVERY_DECODE_TOPK",
    "FLAT_TOPK_ENGINES",
    "FUSED_QKV_A",
    "HEAD_TILE",
    "LOGIT_KEY_BLOCK",
    "LONG_ROW",
    "OWN_DECODE_TOPK",
    "PADDED_QUERY",
    "POOL_SWITCH",
    "RAGGED",
    "RAGGED_CORE",
    "RAGGED_LOGITS_BYTES",
    "RAGGED_LOGITS_ENGINES",
    "ROW_TOPK_PROMPT",
    "ROW_TOPK_SHORT_KEYS",
    "ROW_TOPK_WIDE_KEYS",
    "SELECTING_LOGITS",
    "SPLIT_KEY_LOGITS_ENGINES",
    "TOKEN_UNIT_CORE",
    "attention_flops",
    "cache_bytes",
    "causal_keys",
    "compressed_attention_split",
    "compressed_cost",
    "compressed_growth",
    "compressed_kernels",
    "compressed_layer_bytes",
    "compressed_row_elements",
    "compressed_splits_by_heads",
    "dsa_ragged_logits_bytes",
    "dsa_topk",
    "engine_topk",
    "engine_v4_kernels",
    "forward_flops",
    "layer_cache",
    "logit_blocks_below",
    "near_topk_rows",
    "padded_heads",
    "pooled_below",
    "ragged_core_shape",
    "v4_topk",
    "walked_logit_keys",
]

#: DeepSeek-V4's kind -> the reference's layer type
_TYPES = {"csa": v4.CSA, "hca": v4.HCA, "swa": v4.SLIDING}
#: bytes of one indexer logit and of one picked key's index
_LOGIT_BYTES = 4
_INDEX_BYTES = 4
#: the paged cache's block (tokens) of the indexer's decode kernel
_PAGE = 64
#: the query heads FlashMLA's sparse attention kernels (DeepSeek-V4's core in SGLang and vLLM)
#: take at a time: a rank's local heads (tensor parallel) are padded to a multiple of it (8 to
#: 64 heads run 64), the padded heads' products run too (the module tables: the error of the
#: layer's prompts is flat across 8-64 local heads with the pad, -35% to -15% from 64 down to
#: 8 heads without it)
HEAD_TILE = 64


def pooled_below(n: Any, rate: int) -> Any:
    """``sum(j // rate for j in 1..n)``: the pooled keys the queries at positions ``1..n`` of
    a sequence see together (numbers or numpy arrays)."""
    q = n // rate
    return rate * q * (q - 1) // 2 + q * (n - q * rate + 1)


#: Keys DeepGEMM's prompt logits kernel (``fp8_mqa_logits``, every engine's DSA and
#: DeepSeek-V4 CSA prompt indexer) walks at a time: a query scores its causal (pooled) keys in
#: whole blocks of this many, the last one masked, so a query of fewer keys costs a block.
#: Read from SGLang's ``glm5_mqa_logits_module_perf`` rows, not recalled of the kernel: at no
#: cached keys a call's time is its queries' count alone up to 256 new tokens a sequence and
#: grows from 512 (B200, 65,536 queries: 118.8 / 118.1 / 117.8 us at 64 / 128 / 256 tokens a
#: sequence, 145.3 at 512, 213.7 at 1,024; H100 190.6 / 189.1 / 187.0, then 247.6, 378.0),
#: where the mean causal keys grow 64 / 128 / 256 / 512. See docs/time-model.md ("DeepGEMM's
#: prompt logits walk whole blocks of 256 keys").
LOGIT_KEY_BLOCK = 256


def logit_blocks_below(n: Any, rate: int = 1) -> Any:
    """``sum(ceil((j // rate) / LOGIT_KEY_BLOCK) for j in 1..n)``: the key blocks the queries
    at positions ``1..n`` of a sequence walk together (numbers or numpy arrays, ``n >= 0``)."""
    blk = LOGIT_KEY_BLOCK
    # query j walks at least m blocks where j >= ((m - 1) blk + 1) rate: `most` such m
    most = (n // rate - 1) // blk + 1
    return most * (n + 1) - rate * (blk * most * (most - 1) // 2 + most)


def walked_logit_keys(prefix: Any, q: Any, rate: int = 1) -> Any:
    """The mean keys a query of ``q`` new tokens after ``prefix`` cached ones walks in the
    prompt logits kernel: the pooled keys it sees (``(prefix + i) // rate`` for the query at
    position i) in whole :data:`LOGIT_KEY_BLOCK` blocks (numbers or numpy arrays)."""
    walked = logit_blocks_below(prefix + q, rate) - logit_blocks_below(prefix, rate)
    return LOGIT_KEY_BLOCK * walked / q


def padded_heads(heads: int) -> int:
    """The query heads FlashMLA's sparse kernels run for ``heads``: a multiple of
    :data:`HEAD_TILE` (8-64 heads run 64, 96 run 128)."""
    return math.ceil(heads / HEAD_TILE) * HEAD_TILE


# The kernels each serving engine runs for a DeepSeek-V4 layer in place of the step's: one
# definition, taken by a served step (compressed_kernels with its ``engine``: predict_time,
# and plan's step model, mlacalc.serving.gpu_step) and by the module tables' mapping
# (mlacalc.measured.dsv4_modules, beside whose import each rule's evidence stands).

#: The engines whose DeepSeek-V4 prompt core runs a chunk's tokens of every sequence as one
#: ragged batch (FlashMLA's sparse prefill, a token a unit, nothing padded per sequence),
#: :func:`ragged_core_shape`, timed by a class of its own (:data:`RAGGED_CORE`): SGLang.
RAGGED = frozenset({"sglang"})
#: The class variant of that ragged prompt core (``attention_prefill:bf16:sparse_ragged``),
#: fitted on the residuals of SGLang's CSA and HCA prompt module rows; a profile without it
#: times the core by the ``sparse`` class (:mod:`mlacalc.timemodel.profile`).
RAGGED_CORE = "sparse_ragged"
#: The engines whose DeepSeek-V4 prompt core (FlashMLA's sparse prefill as vLLM runs it)
#: spreads its products over one CTA a query token (shape column ``token_units``:
#: ``mlacalc.timemodel.attention_time._token_units``), fitted on vLLM's
#: ``dsv4_hca_attn_module_perf``: vLLM. The mapping of vLLM's module tables carries the column
#: whichever profile times them (SGLang's fits take that table in); a served step of another
#: engine does not (TensorRT-LLM's sparse core keeps its units' spread).
TOKEN_UNIT_CORE = frozenset({"vllm"})
#: The engines whose DeepSeek-V4 prompt core (vLLM's ``FLASHMLA_SPARSE_DSV4``) takes a query's
#: heads in tiles of one MMA's rows (``mlacalc.timemodel.shared.mma_rows``: 128 on data-centre
#: Blackwell's ``tcgen05``, 64 on Hopper), each tile the time of the 64-head call, as the MLA
#: decode and sparse kernels' units are (``mlacalc.timemodel.mla_time.mla_tile_rows``): on B200
#: 128 heads take the 64-head call's time (``mlacalc.timemodel.kernel_time.engine_v4_prompt_core``).
#: The tile takes the products and the per-head bytes (queries, sinks, outputs:
#: :func:`core_head_bytes`) of 64 heads; the keys' read, which every head shares, stays whole, so
#: 128 heads never time faster than 64 (as first written, halving all the bytes, one sequence of
#: 16 CSA tokens after 131,072 cached took 28.71 us at 128 heads against 30.11 at 64 under
#: ``fit-b200-sxm-vllm``; now 30.11 at both). vLLM B200 median / p90 |error| (from H100's fit):
#: CSA prompt module 9.06% / 23.96% (7.49%), HCA 4.33% / 10.93% (6.23%), unchanged by that fix
#: to 0.01 point (``bench_timemodel.py --engines --engine vllm --loo-profile
#: H100-SXM=fit-b200-sxm --only dsv4``).
#: From vLLM's B200 module rows: DeepSeek-V4-Pro's rows at 128 local heads (TP 1) less those at
#: 64, less twice the step from 32 to 64 heads (where the core is the same 64-head call) and the
#: other kernels' predicted step, leave 0.15-0.25 of the 64-head core's predicted time (HCA,
#: from 128 new tokens) and 0.25-0.44 (CSA, more keys a query) where the class, per head, gave
#: 1.0; Hopper's rows leave 0.7-0.9. SGLang's B200 core (its own kernel, ``compressed_flashmla``,
#: and a class fitted on its rows at every head count) is left as it is (docs/time-model.md,
#: "vLLM's DeepSeek-V4 prompt core takes 128 heads in one Blackwell tile").
WIDE_TILE_CORE = frozenset({"vllm"})
#: The engines that run the query's low-rank projection and the shared key's projection
#: (``q_a_proj``, ``kv_proj``: both read the layer's input) as one GEMM, ``q_a_kv_proj``, as
#: vLLM runs DeepSeek-V2/V3's ``q_a_proj`` and ``kv_a_proj_with_mqa`` (``fused_qkv_a_proj``;
#: from recall of vLLM's DeepSeek model code, not read from a source in this repository).
FUSED_QKV_A = frozenset({"vllm"})
#: The engines that move the query through a buffer of the core's padded heads once more
#: (``q_pad``: a read and a write of ``64 ceil(h / 64)`` heads of ``head_dim`` bf16 a token),
#: inferred from vLLM's module rows, the kernel not recorded.
PADDED_QUERY = frozenset({"vllm"})
#: The engines whose DeepSeek-V4 decode compressors (CSA's two, the main one and the indexer's;
#: HCA's one) each take a fixed time more once the step's sequences pass one MMA tile of rows
#: (64 on Hopper, 128 on data-centre Blackwell): the ``compressor_pool`` kernel of a decode step
#: carries the layer's compressors (``pool_switch``) and its sequences (``pool_rows``), timed by
#: a class of its own (:data:`~mlacalc.words.kernels.V4_POOL_DECODE`, ``pool_switch_s``). SGLang:
#: its decode module rows step once, between 64 and 128 sequences on H100 and between 128 and
#: 256 on B200, by about 11 us an HCA row and twice that a CSA row, at every head count, both
#: GEMM dtypes, both models and every cached length; its prompt rows of one token a sequence
#: (the same projections' rows) and its DSA decode rows (the same GEMMs) do not step there. The
#: kernel is not identified (docs/time-model.md, "SGLang's DeepSeek-V4 decode compressors").
POOL_SWITCH = frozenset({"sglang"})
#: The engines whose CSA top-k is SGLang's transform over flat logits (the collectors' random
#: weights score every key alike): ``topk_transform_v2`` in decode, ``topk_transform_v1`` in a
#: prompt, one unit a query that selects (:func:`engine_topk`).
FLAT_TOPK_ENGINES = frozenset({"sglang"})
#: The engines whose CSA prompt top-k is their DSA indexer's per-row kernel: one CTA a query that
#: selects (:func:`engine_topk`'s counts), timed by a class of its own (``topk_vllm_prompt``,
#: :data:`~mlacalc.words.kernels.ROW_PROMPT_TOPK_CODE`) fitted on the CSA prompt module rows'
#: residuals (no table times the kernel alone; a profile without it lends the ``topk_flat`` class of
#: the DSA module rows); where no query selects, in a decode step and in a chunk of one new token a
#: sequence (which runs the decode kernels: the rows of one new token after 4,096 and 65,535 cached
#: ones read 19-40% over with the per-row kernel, -13% to +1% without), the step's streaming pass as
#: before. vLLM: from recall, its DeepSeek-V4 indexer calls the ``top_k_per_row`` kernels of its
#: DeepSeek-V3.2 one. Its CSA prompt rows show the selection's onset on both devices: the row less
#: its kernels' predictions, a sequence, is about 0 while every query has at most ``index_topk``
#: pooled keys (DeepSeek-V4-Flash 512: up to 2,048 keys; Pro 1,024: up to 4,096) and grows with the
#: selecting queries past them (Flash at 4,096 cached tokens, B200: 27, 109, 600 us at 128, 512,
#: 2,048 new tokens; H100 40, 163, 874), where the streaming pass over every logit predicted 2-33
#: us. The stand-in class gave a selecting query about a sixth of what the rows add
#: (docs/time-model.md, "DeepSeek-V4's CSA prompt top-k").
ROW_TOPK_PROMPT = frozenset({"vllm"})
#: The engines whose CSA prompt indexer runs its MQA logits only where some query selects (has
#: more pooled keys than ``index_topk``): a chunk whose every query takes its keys whole launches
#: no logits kernel (nor a top-k), in a prompt of any length (one new token too); a decode step
#: runs its paged logits whatever the keys. vLLM's module rows show it on both devices: the CSA
#: row less the HCA row of the same shape, less the predictions of the other CSA-only kernels
#: (the indexer's three projections, the wider compressor, the core's extra keys), is -10 to -12
#: ns a new token (medians, B200 / H100) where no query selects, against 14-16 ns a token of
#: predicted logits, and grows with the selecting queries past the onset; its decode rows keep
#: their logits (the same difference there is -10 to +11 us a row, the paged logits 5-6 us).
#: SGLang's rows do not (32-42 ns a token left where none selects: its logits run).
SELECTING_LOGITS = frozenset({"vllm"})
#: Past this many pooled keys a row the top-k kernels take another path: the v2 kernel's time
#: then does not depend on the logits' spread (timed by its top-last variant), the v1
#: kernel's halves a key (a variant of its own): ``mlacalc.measured.dsv4_modules``.
LONG_ROW = 16384
#: SGLang's ``fast_topk_transform_fused`` (the GLM-5 / DSA top-k, flat and top-last logits) reads
#: a query's keys faster while its fp32 logits fit in one SM's 256 KB of L1 / shared memory:
#: past this many keys a row its passes re-read them from the L2 / HBM, which the class's
#: ``long_read`` (fitted) multiplies the row's reads by. The ``glm5_topk`` decode rows show it on
#: H100 and B200 alike (one query a sequence: 0.27 ns a key from 4,097 to 32,769 keys, 0.38-0.40
#: from 65,537 to 202,752; the prompt rows of 32,769-49,152 keys a query on the cheap side):
#: the switch lies between 49,152 and 65,537 keys, taken at the 256 KB of a row.
STAGED_ROW_KEYS = 65536


#: The step kernels of a DeepSeek-V4 layer, each with its stage.
COMPRESSED_KERNELS = {
    "q_a_proj": "q_proj",
    "q_a_kv_proj": "q_proj",  # vLLM's q_a_proj and kv_proj as one GEMM (FUSED_QKV_A)
    "q_b_proj": "q_proj",
    "q_a_layernorm": "norm",
    "rope": "rope",
    "kv_proj": "kv_proj",
    "compressor": "kv_proj",
    "compressor_pool": "core",
    "indexer_compressor": "kv_proj",
    "indexer_q_proj": "q_proj",
    "indexer_weights_proj": "q_proj",
    "indexer_scores": "core",
    "indexer_topk": "core",
    "attention": "core",
    "q_pad": "core",  # vLLM's pass over the core's padded query (PADDED_QUERY)
    "o_a_proj": "o_proj",
    "o_b_proj": "o_proj",
}


def _layer_type(kind: LayerKind | str) -> str:
    return _TYPES[kind.attention if isinstance(kind, LayerKind) else kind]


def compressed_layer_bytes(
    model: ModelConfig, kind: LayerKind | str, seq_len: int, layout: Any = None
) -> int:
    """Bytes one layer of ``kind`` holds for one sequence after ``seq_len`` tokens, every part
    (window, pooled keys, indexer keys, the compressors' state) in the cache layout's element
    size, the engine convention (a ring of ``W`` window rows)."""
    c = v4.config_of(model)
    parts = layer_cache(c, _layer_type(kind), seq_len, "engine")
    return resolve_kv_layout("bf16" if layout is None else layout).row_bytes(sum(parts.values()))


def compressed_growth(model: ModelConfig, seq_len: int, layout: Any = None) -> int:
    """Bytes one more token adds to one sequence's cache of every layer, averaged over a period
    of the compress ratios once the window is full (from ``seq_len`` on): a pooled key (and a
    CSA layer's pooled indexer key) per ratio tokens, the window and the compressors' state
    bounded. The next token alone adds the compressors' pending rows or, at a window's end,
    a pooled key (``kv_cache(...).bytes_per_token``)."""
    period = math.lcm(*(r for r in model.compress_ratios if r)) or 1
    start = -(-max(seq_len, model.sliding_window) // period) * period
    kinds = _kinds(model)
    at, after = (
        sum(compressed_layer_bytes(model, k, s, layout) for k in kinds)
        for s in (start, start + period)
    )
    return (after - at) // period


def _kinds(model: ModelConfig) -> list[str]:
    names = {0: "swa", model.compress_rate_csa: "csa", model.compress_rate_hca: "hca"}
    return [names[r] for r in model.compress_ratios]


def kind_counts(model: ModelConfig) -> dict[str, int]:
    """DeepSeek-V4's kinds of layer (``csa``, ``hca``, ``swa``) and each one's layers, in the
    order the model first has them; ``{}`` for a model with none."""
    return dict(Counter(_kinds(model))) if model.compress_ratios else {}


def compressed_row_elements(model: ModelConfig, kind: LayerKind | str) -> tuple[int, int]:
    """``(window, pooled)``: elements one token adds to a layer's window rows and, averaged over
    a window of ``ratio`` tokens, to its pooled keys (a fraction's numerator over the ratio:
    ``D`` for HCA and ``D + d_i`` for CSA, 0 for a window-only layer)."""
    t = _layer_type(kind)
    if t == v4.SLIDING:
        return model.head_dim, 0
    return model.head_dim, model.head_dim + (model.index_head_dim if t == v4.CSA else 0)


@lru_cache(maxsize=64)
def compressed_attention_split(model: ModelConfig, kind: LayerKind) -> tuple[int, int]:
    """``(split, total)``: of one layer's attention parameters, those a tensor-parallel split
    by query heads divides (``q_b_proj``, the grouped ``o_a_proj`` and ``o_b_proj``, the
    sinks) and all of them (the query's low-rank input, the shared K = V projection, the
    compressors and the indexer are kept whole on every rank)."""
    c = v4.config_of(model)
    t = _layer_type(kind)
    one = replace(c, num_hidden_layers=1, layer_types=(t,), mlp_layer_types=("moe",))
    attention = [(n, math.prod(s)) for n, s in v4.tensors(one) if ".self_attn." in n]
    split = sum(size for n, size in attention if compressed_splits_by_heads(n))
    return split, sum(size for _, size in attention)


#: the tensors of a compressed layer's attention a split by query heads divides
_HEAD_TENSORS = (".self_attn.q_b_proj.", ".o_a_proj.", ".o_b_proj.", ".sinks")


def compressed_splits_by_heads(name: str) -> bool:
    """Whether a tensor-parallel split by query heads divides the compressed-layer attention
    tensor ``name`` (:func:`compressed_attention_split`'s ``split``); the rest, the norms and
    the indexer's included, are whole on every rank."""
    return any(h in name for h in _HEAD_TENSORS)


def compressed_cost(
    model: ModelConfig, kind: LayerKind, layers: int, work: Workload
) -> AttentionCost:
    """The cost of ``layers`` DeepSeek-V4 layers of ``kind`` for one step of a checked workload
    (see the module docs): one layer's operations; the stages over every layer and sequence."""
    c = v4.config_of(model)
    t = _layer_type(kind)
    b, q, S = work.batch, work.q_len, work.seq_len
    context = S - q
    flops = attention_flops(c, t, q, context)
    w_bits = dtype_bits(work.weight_dtype or model.weights_dtype)
    a_bits = dtype_bits(work.act_dtype)
    row = resolve_kv_layout(work.kv_dtype).row_bytes
    tokens, d, nh, hd = b * q, c.hidden_size, c.num_attention_heads, c.head_dim
    rate = c.rate(t) if t != v4.SLIDING else 0
    pooled = S // rate if rate else 0
    new_pooled = pooled - (context // rate if rate else 0)
    window = min(S, c.sliding_window)
    ops: list[OpCost] = []

    def proj(name: str, stage: str, n_in: int, n_out: int, groups: int = 1, **cache: int):
        ops.append(
            op_cost(
                name,
                stage,
                "matmul",
                2 * tokens * n_in * n_out * groups,
                packed_bytes(tokens * n_in * groups, a_bits),
                packed_bytes(tokens * n_out * groups, a_bits),
                weights=packed_bytes(n_in * n_out * groups, w_bits),
                shape=(groups, tokens, n_out, n_in),
                **cache,
            )
        )

    r = c.q_lora_rank
    proj("q_a_proj", "q_proj", d, r)
    ops.append(
        op_cost(
            "q_a_layernorm",
            "norm",
            "norm",
            NORM_FLOPS_PER_ELEMENT * tokens * r,
            packed_bytes(tokens * r, a_bits),
            packed_bytes(tokens * r, a_bits),
            weights=packed_bytes(r, 16),
        )
    )
    proj("q_b_proj", "q_proj", r, nh * hd)
    ops.append(  # the query's per-head RMSNorm (no weight) and RoPE, one pass over its rows
        op_cost(
            "rope",
            "rope",
            "elementwise",
            NORM_FLOPS_PER_ELEMENT * tokens * nh * hd,
            packed_bytes(tokens * nh * hd, a_bits),
            packed_bytes(tokens * nh * hd, a_bits),
        )
    )
    proj("kv_proj", "kv_proj", d, hd, c_write=b * row(q * hd))
    if t != v4.SLIDING:
        series = 2 if t == v4.CSA else 1  # CSA: two overlapping series
        proj("compressor", "kv_proj", d, 2 * series * hd)
        ops.append(  # the softmax-gated pooling of rate rows into one key, per series
            op_cost(
                "compressor_pool",
                "core",
                "elementwise",
                4 * tokens * series * hd,
                packed_bytes(tokens * 2 * series * hd, a_bits),
                0,
                weights=packed_bytes(rate * series * hd, 16),
                c_write=b * row(new_pooled * hd),
            )
        )
    if t == v4.CSA:
        ni, di = c.index_n_heads, c.index_head_dim
        proj("indexer_compressor", "kv_proj", d, 4 * di, c_write=b * row(new_pooled * di))
        proj("indexer_q_proj", "q_proj", r, ni * di)
        proj("indexer_weights_proj", "q_proj", d, ni)
        logits = tokens * pooled * _LOGIT_BYTES
        ops.append(
            op_cost(
                "indexer_scores",
                "core",
                "matmul",
                b * flops["indexer_score"],
                packed_bytes(tokens * ni * (di + 1), a_bits),
                logits,
                c_read=b * row(pooled * di),
            )
        )
        picked = min(pooled, c.index_topk)
        ops.append(
            op_cost(
                "indexer_topk", "core", "elementwise", 0, logits, tokens * picked * _INDEX_BYTES
            )
        )
        # the pooled rows the core gathers: a query's top-k, so a decode step reads its top-k
        # and a chunk at most its queries' top-k each (all the pooled rows where they cover
        # them; SGLang's CSA prompt rows of 4-64 new tokens after 131,072-1,000,000 cached
        # tokens read 13-33% over with every pooled row read)
        attended = min(pooled, q * picked)
    else:
        attended = pooled
    ops.append(
        op_cost(
            "attention",
            "core",
            "matmul",
            b * flops["core_causal"],
            packed_bytes(tokens * nh * hd, a_bits) + packed_bytes(nh, 32),  # q, the sinks
            packed_bytes(tokens * nh * hd, a_bits),
            c_read=b * row((window + attended) * hd),
        )
    )
    g, o = c.o_groups, c.o_lora_rank
    proj("o_a_proj", "o_proj", nh * hd // g, o, groups=g)
    proj("o_b_proj", "o_proj", g * o, d)
    stage = dict.fromkeys(STAGES, 0)
    for op in ops:
        if op.kind == "matmul":
            stage[op.stage] += layers * op.flops
    io = 2 * packed_bytes(tokens * d, a_bits)
    fused = (
        sum(op.weight_bytes for op in ops)
        + io
        + sum(op.cache_bytes_read + op.cache_bytes_written for op in ops)
    )
    return AttentionCost(
        model=model.name,
        variant=kind.attention,
        impl="compressed",
        phase=work.phase,
        seq_len=S,
        q_len=q,
        batch=b,
        causal=work.causal,
        layers=layers,
        pairs_per_head=b * flops["core_causal"] // (4 * nh * hd),
        ops=tuple(ops),
        stage_flops=stage,
        fused_layer_bytes=fused,
    )


def core_head_bytes(shape: Any, act: str) -> Any:
    """The bytes of a DeepSeek-V4 prompt core (:func:`compressed_kernels`' ``attention``, of
    shape ``shape`` in activation dtype ``act``) that each query head moves: its queries and
    outputs (``batch`` x ``q_len`` tokens of ``head_dim_qk`` and ``head_dim_v`` a head) and
    its attention sink (32 bits), over the shape's (padded) ``n_heads``; the rest of the
    core's bytes, the window's and pooled keys' read, all heads share. Works on numbers or
    on a batch's numpy columns."""
    tokens = shape["batch"] * shape["q_len"]
    per_head = tokens * (shape["head_dim_qk"] + shape["head_dim_v"]) * dtype_bits(act) / 8
    return shape["n_heads"] * (per_head + 4)


def _attention_kernel(name: str, kind: str, o: OpCost, act: str, calls: int, **shape) -> Kernel:
    return Kernel(name, kind, act, o.flops, o.bytes, calls=calls, shape=shape)


def compressed_kernels(
    cost: AttentionCost,
    model: ModelConfig,
    act_dtype: str,
    weight_dtype: str,
    calls: int = 1,
    kv_dtype: Any = "bf16",
    engine: str = "",
) -> list[Kernel]:
    """The serving kernels of one DeepSeek-V4 layer from its :func:`compressed_cost`, each a
    class the time model has: the projections (the grouped ``o_a_proj`` as ``o_groups``
    products) as GEMMs of their exact shapes; ``attention`` over the keys a query attends (the
    window and its pooled keys: the last query's count as ``kv_len``, the exact FLOPs), in
    decode the latent decode class (``mla_decode``: ``n_h`` query heads over one shared row
    of ``head_dim``, K = V, as FlashMLA runs it; in the cache's dtype, an fp8 cache the fp8
    kernel), in a prompt an MQA prefill (one K = V head);
    ``indexer_scores`` DeepGEMM's fp8 kernels: in decode its paged MQA logits (``n_i`` heads of
    ``index_head_dim`` against one shared key per pooled position, ``head_dim_v`` 0), in a
    prompt its MQA logits (a (query, head) row a unit over the pooled keys the query sees);
    the pooling, the norms, the query's ``rope`` pass and the top-k as streaming kernels.
    ``engine``: the kernels that engine runs in their place (:func:`engine_v4_kernels`)."""
    c = v4.config_of(model)
    b, q, S = cost.batch, cost.q_len, cost.seq_len
    decode = cost.phase == "decode" or cost.q_len == 1  # one query: the decode kernel
    rate = {"csa": c.rate(v4.CSA), "hca": c.rate(v4.HCA)}.get(cost.variant, 0)
    pooled = S // rate if rate else 0
    seen = min(S, c.sliding_window) + (
        min(pooled, c.index_topk) if cost.variant == "csa" else pooled
    )
    gemm_dtype = gemm_class(act_dtype, weight_dtype, True)
    a_bits = dtype_bits(act_dtype)
    fp8 = resolve_kv_layout(kv_dtype).name.startswith("fp8")
    core_dtype = "fp8" if decode and fp8 else act_dtype  # the decode kernel follows its cache
    out: list[Kernel] = []
    nh = c.num_attention_heads
    # FlashMLA's sparse kernels take the query heads 64 at a time: the heads padded to a
    # multiple of 64 (a rank of 8-64 heads runs 64, as the module tables show; 96 would run 128)
    tile = padded_heads(nh)
    for o in cost.ops:
        if o.name == "attention":
            kind = "mla_decode" if decode else "attention_prefill"
            # the padded heads' products run, their queries are read and outputs written
            act = o.bytes_read - o.cache_bytes_read - o.weight_bytes
            padded = replace(
                o,
                flops=o.flops * tile // nh,
                bytes_read=o.bytes_read + act * (tile - nh) // nh,
                bytes_written=o.bytes_written * tile // nh,
            )
            out.append(
                _attention_kernel(
                    o.name, kind, padded, core_dtype, calls, batch=b, q_len=q, kv_len=seen,
                    n_heads=tile, n_kv=1, head_dim_qk=c.head_dim,
                    head_dim_v=c.head_dim, window=0, causal=0, pooled_ratio=rate,
                    pooled_cap=c.index_topk if cost.variant == "csa" else 0,
                    pooled_window=c.sliding_window, rope_kernel=1, sparse=1,
                    **({"token_units": 1} if engine in TOKEN_UNIT_CORE and not decode else {}),
                )
            )  # fmt: skip
        elif o.name == "indexer_scores" and decode:
            # DeepGEMM's fp8 paged MQA logits, as both engines run it and the
            # dsv4_paged_mqa_logits tables time it (variant ``indexer``): the fp8 pooled keys
            # split over the SMs, every indexer head sharing one key, no value product
            out.append(
                _attention_kernel(
                    o.name, "mla_decode", o, "fp8", calls, batch=b, q_len=q,
                    kv_len=max(pooled, 1), n_heads=c.index_n_heads, n_kv=1,
                    head_dim_qk=c.index_head_dim, head_dim_v=0, window=0, causal=1,
                    page_size=_PAGE, kv_bytes=1, kv_split=1, operand_reads=1, rope_kernel=0,
                    preprocess_bytes=0, indexer=1, pooled_ratio=rate, pooled_cap=0,
                    pooled_window=0,
                )
            )  # fmt: skip
        elif o.name == "indexer_scores":
            # DeepGEMM's fp8 MQA logits, the prompt form of the indexer (the kernel
            # glm5_mqa_logits_module_perf times, variant ``indexer``): a CTA takes a query's
            # heads together, so a unit is one (query, head) row (``rows_per_query`` of them
            # a query) of one head of ``d_i`` over the pooled keys that query sees, their
            # mean over the chunk's queries as ``kv_len``
            # in whole blocks of keys (LOGIT_KEY_BLOCK)
            keys_each = walked_logit_keys(S - q, q, rate)
            # SGLang scores the batch as one ragged run, a logits row as wide as all its
            # sequences' pooled keys (attention_time.logits_row_slowdown)
            ragged = {"batch_keys": b * max(pooled, 1)} if engine in RAGGED_LOGITS_ENGINES else {}
            if engine in SPLIT_KEY_LOGITS_ENGINES:
                ragged["split_keys"] = 1  # a few queries' keys over every SM
            out.append(
                _attention_kernel(
                    o.name, "attention_prefill", o, "fp8", calls, batch=b,
                    q_len=q * c.index_n_heads, kv_len=max(keys_each, 1), n_heads=1, n_kv=1,
                    head_dim_qk=c.index_head_dim, head_dim_v=0, window=0, causal=0,
                    kv_bytes=1, rope_kernel=0, preprocess_bytes=0, indexer=1,
                    rows_per_query=c.index_n_heads, pooled_ratio=rate, pooled_cap=0,
                    pooled_window=0, **ragged,
                )
            )  # fmt: skip
        elif o.kind == "matmul":
            g, m, n, k = o.shape
            shape = {"m": m, "n": n, "k": k, "groups": g}
            k = Kernel(o.name, "gemm", gemm_dtype, o.flops, o.bytes, calls=calls, shape=shape)
            out.append(k)
        else:
            elements = max(1, o.bytes_read * 8 // max(1, a_bits))
            shape = {"elements": elements}
            out.append(
                Kernel(o.name, "elementwise", act_dtype, o.flops, o.bytes, calls=calls, shape=shape)
            )
    return engine_v4_kernels(out, cost, engine) if engine else out


def ragged_core_shape(shape: dict[str, Any]) -> dict[str, Any]:
    """A prompt core's shape (numbers or numpy arrays) as an engine of :data:`RAGGED` runs it:
    the tokens of all its sequences one sequence of ``batch x q_len`` queries, each with the
    keys it had, its CTAs splitting their keys over idle SMs (``split_tokens``:
    ``mlacalc.timemodel.attention_time._split_token_ctas``)."""
    b = shape["batch"]
    return {**shape, "batch": b * 0 + 1, "q_len": b * shape["q_len"], "split_tokens": b * 0 + 1}


def engine_topk(
    batch: Any, q: Any, prefix: Any, rate: int, topk: int, decode: Any
) -> tuple[dict[str, Any], Any]:
    """The CSA top-k of :data:`FLAT_TOPK_ENGINES` for ``batch`` sequences of ``q`` new tokens
    after ``prefix`` cached ones (numbers or numpy arrays; ``decode``: a decode step): its
    shape, the (query, pooled key) pairs ranked (``elements``), the queries that select
    (``units``; the query at 1-based position ``i`` ranks ``(prefix + i) // rate`` pooled keys,
    one with no more than ``topk`` of them takes them all without reading its logits), the
    CTAs that draw the bandwidth (``ctas``: one a query, where any selects) and the kernel
    (``topk_kernel``: 0 where no query selects, the step's kernel; else
    :data:`~mlacalc.words.kernels.V4_TOPK_VARIANTS` position + 1), the top-k a selecting
    query keeps (``index_topk``, 0 where none selects:
    :data:`~mlacalc.timemodel.elementwise_time.SLOT_DRAW_VARIANTS`), and its bytes (the fp32
    logits of the selecting queries read, every query's indices written). SGLang's GLM-5
    top-k rows of 2,048 new tokens after 1 to 64 cached (1 to 64 queries select) take 17 us
    on H100 at one sequence, where every query's logits read by the selecting CTAs predicted
    0.05-2.6 ms."""
    # deferred: the numeric path (a model's counts, one kernel list) imports no numpy
    import numpy as np

    seq = prefix + q
    # the last ``picks`` queries of a sequence select; the others take their keys whole
    picks = np.minimum(np.maximum(seq - rate * (topk + 1) + 1, 0), q)
    pairs = batch * (pooled_below(seq, rate) - pooled_below(seq - picks, rate))
    selecting = batch * picks
    code = np.where(seq // rate > LONG_ROW, np.where(decode, 2, 4), np.where(decode, 1, 3))
    shape = {
        "elements": pairs,
        "long_elements": _long_pairs(batch, seq, picks, rate),
        "units": selecting,
        "ctas": np.where(selecting > 0, batch * q, 0),
        "topk_kernel": np.where(selecting > 0, code, 0),
        "index_topk": np.where(selecting > 0, topk, 0),
    }
    return shape, pairs * _LOGIT_BYTES + batch * q * topk * _INDEX_BYTES


def _long_pairs(batch: Any, seq: Any, picks: Any, rate: int) -> Any:
    """The (query, pooled key) pairs ranked by the last ``picks`` queries of sequences of
    ``seq`` tokens whose rows hold more than :data:`STAGED_ROW_KEYS` pooled keys (the query at
    position ``p`` holds ``p // rate``)."""
    import numpy as np  # deferred: the numeric path imports no numpy (as engine_topk)

    first = np.minimum(np.maximum(seq - picks, rate * (STAGED_ROW_KEYS + 1) - 1), seq)
    return batch * (pooled_below(seq, rate) - pooled_below(first, rate))


#: Engines whose decode top-k of a DSA layer is a kernel of their own, not SGLang's
#: ``fast_topk_transform_fused`` (variant ``topk_trtllm_decode``, fitted on the DSA module rows'
#: residuals: no table times it alone). TensorRT-LLM's decode rows show it: a row past the top-k
#: takes, beyond its rows under it, about 25 us more than SGLang's class gives its top-k from 1
#: to 128 sequences on both devices (B200 25.6-31.8 us, H100 25-33 us, step 1,024 -> 4,096,
#: every head count and GEMM dtype), and 0.1 us (B200) or 0.3 us (H100) more a sequence past
#: 256; its rows of 4,096 to 32,768 keys grow with the keys as predicted (the logits), so the
#: cost is the selection's, not the scores'. Its prompt rows past the top-k show no such step
#: (docs/time-model.md, "Host floor of a module launched eagerly").
OWN_DECODE_TOPK = frozenset({"trtllm"})
#: TensorRT-LLM's decode top-k (:data:`OWN_DECODE_TOPK`) over rows of a few keys past the top-k
#: (at most ``NEAR_TOPK_KEYS`` times ``index_topk``), in a call of at least
#: :data:`NEAR_TOPK_MIN_ROWS` rows, takes a slower path in the measured DSA decode module rows
#: of the GEMM runs :data:`NEAR_TOPK_GEMMS`: each row's CTA waits ``near_topk_s`` (a fitted
#: ``elementwise`` parameter, 0 where not fitted) a wave of such rows over the SMs
#: (``near_rows``, :func:`near_topk_rows`), beside its usual selection. Those rows show it on
#: H100 and B200 alike, at every head count and cache dtype: at 2,049 keys (the tables' only
#: key count between 2,048 and 4,097) the row less its other kernels' predictions takes
#: 137-155 us (B200) and 176-208 us (H100) from 8 to 128 sequences, 273 / 371 at 256, 506 /
#: 708 at 512, 839 / 1,378 at 1,024 (medians over heads and caches), against 37-62 / 48-87,
#: 91 / 124, 127 / 221, 193 / 396 us at 4,097 keys: beyond the 4,097-key rows about 100 us
#: (B200) and 125 us (H100) a wave of rows over the SMs (one wave up to 128 rows, 2 at 256,
#: 4 at 512, 7 / 8 at 1,024). B200's nvfp4 runs (the same models, heads, caches and shapes)
#: do not show it (at 1,024 sequences -137 to +117 us at 2,049 keys, -38 to +212 at 4,097),
#: nor do vLLM's rows (its per-row decode top-k smooth across 2,048 keys), so it reads as the
#: selection's cost on the collector's logits in those runs (a top-k over values is
#: data-dependent), not as a cost a served step pays: a served step does not take it. At 1,
#: 2 and 4 sequences the same rows take 9-17 us, less than at 4,097 keys (26-42): another
#: path, not modelled. Where between 2,049 and 4,097 keys the slower path ends the tables do
#: not say (docs/time-model.md, "TensorRT-LLM's decode rows just past the top-k").
NEAR_TOPK_KEYS = 2
NEAR_TOPK_MIN_ROWS = 8
NEAR_TOPK_GEMMS = frozenset({"bf16", "fp8_block"})


def near_topk_rows(batch: Any, q: Any, prefix: Any, topk: int, decode: Any, engine: str) -> Any:
    """The rows of ``engine``'s DSA decode top-k that take the slower path near the top-k
    (:data:`NEAR_TOPK_KEYS`, ``near_rows``): ``batch`` rows of one query where each has more
    than ``topk`` and at most ``NEAR_TOPK_KEYS topk`` keys and the call has at least
    :data:`NEAR_TOPK_MIN_ROWS` rows; 0 elsewhere. Numbers or numpy arrays."""
    import numpy as np  # deferred: the numeric path imports no numpy (as engine_topk)

    keys = prefix + q
    near = np.logical_and(decode, engine in OWN_DECODE_TOPK)
    near = near & (keys > topk) & (keys <= NEAR_TOPK_KEYS * topk)
    near = near & (batch * q >= NEAR_TOPK_MIN_ROWS)
    return np.where(near, batch * q, 0)


#: Engines whose DSA decode top-k runs on every sequence, whatever its keys (a row of at most
#: ``index_topk`` keys too, which SGLang's kernel skips: its ``glm5_topk`` zero rows): vLLM's
#: decode module rows are smooth across the top-k's 2,048 keys where skipping predicted a
#: step of the whole top-k. B200 (``fit-b200-sxm-vllm``, the row less its kernels'
#: predictions, median over every group): 24 -> 16 us at 1,024 -> 2,049 keys at one sequence,
#: 97 -> 85 at 128, 208 -> 169 at 1,024 sequences, where the top-k came in at 10, 10 and 48 us;
#: H100 (``fit-h100-sxm-vllm``) -23 -> -35, 23 -> 10 us at 1 and 128 sequences. From recall:
#: vLLM's indexer calls its per-row decode top-k on every decode row, padding the slots past a
#: row's keys (a decode step it captures in a CUDA graph, whose kernels cannot hang on the
#: lengths). Timed by the same class as a selecting row: every row a unit, its logits read.
EVERY_DECODE_TOPK = frozenset({"vllm"})


#: vLLM's CSA prompt top-k (:data:`ROW_TOPK_PROMPT`) takes one of three paths by the pooled
#: keys of the call's longest row (its last query's, ``(prefix + q) // rate``): up to this many
#: (``topk_vllm_prompt_short``, :data:`~mlacalc.words.kernels.ROW_PROMPT_SHORT_CODE`), more than
#: :data:`ROW_TOPK_WIDE_KEYS` (``topk_vllm_prompt_wide``), else ``topk_vllm_prompt``: three
#: classes of one form (a fixed cost, a wait a wave of selecting queries over the SMs, the
#: logits read), each fitted on the module rows' residuals. The rows show it on both devices:
#: each CSA prompt row less its other kernels' predictions (the implied top-k), fitted as a
#: fixed cost and a cost a wave of selecting queries, one per range of the call's longest row,
#: gives a wave 7.9 us up to 1,024 keys, 29.6 from 1,025 to 4,096 and 13.8 past it on B200
#: (H100 11.1, 39.2, 14.7), where one cost a wave for all (the shipped form) gives 19.2
#: (24.7); the lower edge is a CTA of 1,024 threads holding one key a thread (a row of at most
#: 1,024 keys sorts in registers), the upper one read from the rows (4,096 to 6,144 keys fit
#: alike; the rows hold no call between). Split by the call's mean keys a selecting query the
#: fits read the same (B200 5.31% against 5.36% median), so the call's longest row, which the
#: kernel's launch knows (its logits' width), is taken. docs/time-model.md ("vLLM's CSA prompt
#: top-k takes three paths by the call's longest row").
ROW_TOPK_SHORT_KEYS = 1024
ROW_TOPK_WIDE_KEYS = 4096


def v4_topk(
    engine: str, batch: Any, q: Any, prefix: Any, rate: int, topk: int, decode: Any
) -> tuple[dict[str, Any], Any]:
    """The CSA top-k of ``engine`` (numbers or numpy arrays, as :func:`engine_topk`): SGLang's
    transform over flat logits (:data:`FLAT_TOPK_ENGINES`), or under :data:`ROW_TOPK_PROMPT` a
    prompt's selecting queries in the engine's own prompt top-k (``topk_kernel``
    :data:`~mlacalc.words.kernels.ROW_PROMPT_TOPK_CODE`, or its short or wide path by the
    call's longest row, :data:`ROW_TOPK_SHORT_KEYS`; 0, the step's pass, where none selects
    and in decode)."""
    # deferred: the numeric path imports no numpy (as engine_topk)
    import numpy as np

    shape, nbytes = engine_topk(batch, q, prefix, rate, topk, decode)
    if engine in ROW_TOPK_PROMPT:
        row = np.logical_and(np.asarray(shape["topk_kernel"]) > 0, np.logical_not(decode))
        longest = (np.asarray(prefix) + np.asarray(q)) // rate
        code = np.where(longest <= ROW_TOPK_SHORT_KEYS, ROW_PROMPT_SHORT_CODE, ROW_PROMPT_TOPK_CODE)
        code = np.where(longest > ROW_TOPK_WIDE_KEYS, ROW_PROMPT_WIDE_CODE, code)
        shape["topk_kernel"] = np.where(row, code, 0)
    return shape, nbytes


#: Engines whose DSA prompt indexer scores a batch's queries against the batch's keys
#: concatenated (one ragged logits matrix, every query a row over every sequence's keys) and
#: pay a pass over that whole matrix, not only each query's own keys:
#: :func:`dsa_ragged_logits_bytes`. SGLang's DSA prompt module rows show it on H100 and B200
#: (many sequences of a few new tokens after a long cache: up to 4x their kernels); vLLM's and
#: TensorRT-LLM's rows of as many queries and keys do not (their rows read 5-12% over there).
RAGGED_LOGITS_ENGINES = frozenset({"sglang"})
#: Engines whose DeepSeek-V4 CSA prompt indexer logits spread a few queries' pooled keys over
#: every SM (shape field ``split_keys``, :func:`mlacalc.timemodel.attention_time.prefill_terms`:
#: where a call has fewer 128-row units than SMs, each unit's keys split over the idle SMs),
#: so the logits' time follows the (query, pooled key) pairs at the whole device's rate at any
#: count of queries. SGLang's CSA prompt module rows show it (one sequence after 131,072 to
#: 1,000,000 cached tokens: the row less its other kernels' predictions grows in proportion to
#: the new tokens from 32 to 1,024, about 2.8 us a query at 250,000 pooled keys on B200, 4.4 on
#: H100, where one 128-row unit an SM walking its keys alone gives the time of 256 queries to
#: any count up to 256: 611 us on B200 at 4 new tokens, where the whole row takes 330). The
#: kernel is not identified: GLM-5's prompt logits table (DeepGEMM's ``fp8_mqa_logits``
#: alone) does not split (2.24 ms at 1 to 256 queries over 1,048,576 keys on B200), so
#: SGLang's V4 path runs another. vLLM's CSA prompt rows reach no cache that long.
SPLIT_KEY_LOGITS_ENGINES = frozenset({"sglang"})
#: Bytes that pass moves per element of the matrix outside a query's own keys, at the
#: streaming (``elementwise``) class's rate: fitted on SGLang's DSA prompt module rows
#: (0.80-0.85 on H100, 0.85-0.90 on B200 give the least p90; less than a 4-byte logit, so
#: not a plain write of the matrix: which kernel it is the tables do not say).
RAGGED_LOGITS_BYTES = 0.85


def dsa_ragged_logits_bytes(
    batch: Any, q: Any, prefix: Any, topk: int, decode: Any, engine: str
) -> Any:
    """Bytes of ``engine``'s pass over a DSA prompt's ragged logits matrix
    (:data:`RAGGED_LOGITS_ENGINES`): ``batch`` sequences of ``q`` new tokens after ``prefix``
    cached ones give ``batch q`` rows of ``batch (prefix + q)`` keys, of which each query's
    own causal keys are the logits kernel's; the rest, :data:`RAGGED_LOGITS_BYTES` an element.
    0 in decode, under other engines and where no query has more keys than ``topk`` (no
    selection runs: those rows, SGLang's dense prompt path among them, read 3-66% over with
    the pass). Numbers or numpy arrays."""
    import numpy as np  # deferred: the numeric path imports no numpy (as engine_topk)

    b, q, pre = (np.asarray(v, dtype=np.float64) for v in (batch, q, prefix))
    own = b * (q * pre + q * (q + 1) / 2)
    outside = np.maximum(b * q * b * (pre + q) - own, 0.0)
    on = np.logical_and(np.logical_not(decode), engine in RAGGED_LOGITS_ENGINES)
    on = np.logical_and(on, pre + q > topk)
    return np.where(on, RAGGED_LOGITS_BYTES * outside, 0.0)


def dsa_topk(
    batch: Any, q: Any, prefix: Any, topk: int, decode: Any, engine: str = ""
) -> tuple[dict[str, Any], Any]:
    """A DSA layer's indexer top-k (DeepSeek-V3.2, GLM-5) as ``engine`` runs it, in a served
    step and in the mapping of the DSA module rows alike: :func:`engine_topk` over the layer's
    keys (``rate`` 1), one kernel (``topk_kernel``: :data:`~mlacalc.words.kernels.DSA_TOPK_CODE`,
    ``topk_flat``, SGLang's ``fast_topk_transform_fused`` over flat logits, the class the
    ``glm5_topk`` rows fit) in both phases and at any row length, but a decode top-k of
    :data:`OWN_DECODE_TOPK` (its own kernel, ``topk_trtllm_decode``); 0 where no query has more
    keys than ``topk`` (no kernel runs: those rows time 0), but a decode top-k of
    :data:`EVERY_DECODE_TOPK`, which runs on every row (each query a unit over all its keys)."""
    # deferred: the numeric path imports no numpy (as engine_topk)
    import numpy as np

    shape, nbytes = engine_topk(batch, q, prefix, 1, topk, decode)
    every = np.logical_and(decode, engine in EVERY_DECODE_TOPK)
    if np.any(every):  # every query selects, over all its keys
        seq = prefix + q
        pairs = batch * (pooled_below(seq, 1) - pooled_below(seq - q, 1))
        longs = _long_pairs(batch, seq, q, 1)
        fields = (("elements", pairs), ("long_elements", longs), ("units", batch * q))
        for field, value in (*fields, ("ctas", batch * q)):
            shape[field] = np.where(every, value, shape[field])
        nbytes = shape["elements"] * _LOGIT_BYTES + batch * q * topk * _INDEX_BYTES
    own = np.logical_and(decode, engine in OWN_DECODE_TOPK)
    code = np.where(own, OWN_DECODE_TOPK_CODE, DSA_TOPK_CODE)
    shape["topk_kernel"] = np.where(shape["units"] > 0, code, 0)
    return shape, nbytes


def engine_v4_kernels(kernels: list[Kernel], cost: AttentionCost, engine: str) -> list[Kernel]:
    """One DeepSeek-V4 layer's ``kernels`` (:func:`compressed_kernels`, of ``cost``) as
    ``engine`` runs them: ``q_a_proj`` and ``kv_proj`` one GEMM (:data:`FUSED_QKV_A`), a pass
    over the padded query after the core (:data:`PADDED_QUERY`), the decode compressors' switch
    past one MMA tile of rows (:data:`POOL_SWITCH`), the CSA top-k over flat
    logits (:data:`FLAT_TOPK_ENGINES`, :func:`engine_topk`; the step's kernel where no query
    selects), no prompt logits where no query selects (:data:`SELECTING_LOGITS`). The ragged
    prompt core (:data:`RAGGED`) is the time model's, on every path that times a step
    (``mlacalc.timemodel.kernel_time.engine_v4_prompt_core``)."""
    out = list(kernels)
    if engine in FUSED_QKV_A:
        out = _fused_qkv_a(out)
    if engine in PADDED_QUERY:
        i = next(i for i, k in enumerate(out) if k.name == "attention")
        a = out[i].shape
        el = a["batch"] * a["q_len"] * a["n_heads"] * a["head_dim_qk"]  # the heads padded
        pad = Kernel("q_pad", "elementwise", "bf16", 0, 4 * el, out[i].calls, {"elements": el})
        out.insert(i + 1, pad)
    decode = cost.phase == "decode"
    if engine in POOL_SWITCH and decode and cost.variant in ("csa", "hca"):
        pools = {"pool_switch": 2 if cost.variant == "csa" else 1, "pool_rows": cost.batch}
        out = [replace(k, shape={**k.shape, **pools}) if k.name == "compressor_pool" else k
               for k in out]  # fmt: skip
    row_topk = engine in ROW_TOPK_PROMPT and not decode
    if (engine in FLAT_TOPK_ENGINES or row_topk) and cost.variant == "csa":
        a = next(k for k in out if k.name == "attention").shape
        q, prefix = cost.q_len, cost.seq_len - cost.q_len
        # one query a sequence runs the decode kernels (compressed_kernels' logits and core):
        # under ROW_TOPK_PROMPT its top-k is the decode step's streaming pass too
        one = engine in ROW_TOPK_PROMPT and q == 1
        shape, nbytes = v4_topk(
            engine, cost.batch, q, prefix, a["pooled_ratio"], a["pooled_cap"], decode or one
        )
        out = [_topk(k, shape, nbytes) if k.name == "indexer_topk" else k for k in out]
    if engine in SELECTING_LOGITS and cost.variant == "csa" and not decode:
        a = next(k for k in out if k.name == "attention").shape
        q, prefix = cost.q_len, cost.seq_len - cost.q_len
        shape, _ = engine_topk(cost.batch, q, prefix, a["pooled_ratio"], a["pooled_cap"], False)
        if not shape["units"]:  # no query selects: no logits kernel
            out = [k for k in out if k.name != "indexer_scores"]
    return out


def _topk(k: Kernel, shape: dict[str, Any], nbytes: Any) -> Kernel:
    """The step's top-k ``k`` as :func:`engine_topk` gives it (where no query selects, the
    step's kernel, its shape's fields all there: a measured table's rows take them)."""
    if not shape["topk_kernel"]:
        none = {"units": 0, "ctas": 0, "long_elements": 0, "topk_kernel": 0, "index_topk": 0}
        return replace(k, shape={**k.shape, **none})
    return replace(k, bytes=int(nbytes), shape={f: int(v) for f, v in shape.items()})


def _fused_qkv_a(out: list[Kernel]) -> list[Kernel]:
    """``out`` with ``kv_proj`` folded into ``q_a_proj`` (one GEMM over the same input: the
    outputs side by side, the input read once)."""
    kv = next(k for k in out if k.name == "kv_proj")
    fused = []
    for k in out:
        if k.name == "q_a_proj":
            s = k.shape
            read = s["m"] * s["k"] * 2  # the bf16 input, which both read
            shape = {**s, "n": s["n"] + kv.shape["n"]}
            k = replace(k, name="q_a_kv_proj", flops=k.flops + kv.flops,
                        bytes=k.bytes + kv.bytes - read, shape=shape)  # fmt: skip
        if k.name != "kv_proj":
            fused.append(k)
    return fused


# ------------------------------------------------------------------------------------------
# the counting rules of DeepSeek-V4's layers (checked against the reference)

#: the cache conventions: the reference's (``hf``: the last ``W - 1`` window rows) and an
#: engine's ring of ``W`` slots
CONVENTIONS = ("hf", "engine")


def layer_cache(c: v4.V4Config, kind: str, s: int, convention: str) -> dict[str, int]:
    """Rows x width (elements) of one layer's cache after ``s`` tokens, by part."""
    hd, w = c.head_dim, c.sliding_window
    window = min(s, w - 1) if convention == "hf" else min(s, w)
    parts = {"window": window * hd}  # K = V: one tensor
    if kind == v4.SLIDING:  # the reference's generic sliding cache holds K and V apart
        parts["window"] *= 2 if convention == "hf" else 1
        return parts
    rate = c.rate(kind)
    entries, pending = divmod(s, rate)
    parts["compressed"] = entries * hd
    if kind == v4.HCA:  # the tokens of an unfinished window: their kv and gate projections
        parts["pending"] = 2 * pending * hd
        return parts
    ihd = c.index_head_dim
    parts["indexer"] = entries * ihd
    # two series each of kv and gate per pending token; the last full window's first series
    # (kv and gate, rate rows each) carried for the next window's overlap
    parts["pending"] = 2 * pending * 2 * (hd + ihd)
    parts["overlap"] = 2 * rate * (hd + ihd) if entries else 0
    return parts


def cache_bytes(
    c: v4.V4Config, seq_len: int, convention: str = "hf", dtype_bytes: int = 2
) -> list[dict[str, int]]:
    """Bytes each layer caches for one sequence after a forward of ``seq_len`` tokens, by part.

    Parts: ``window`` (the sliding window's shared K = V rows: ``min(S, W - 1)`` as the
    reference's cache keeps them, ``min(S, W)`` in the ``engine`` convention of a ring of ``W``
    slots; a ``sliding_attention`` layer's reference cache is the generic sliding one, which
    holds the same rows twice, as keys and as values, the engine's once), ``compressed`` (one
    pooled key per ``rate`` tokens, ``head_dim`` wide), ``indexer`` (a v4.CSA layer's pooled
    indexer keys, ``index_head_dim`` wide), ``pending`` (the kv and gate projections of the
    tokens of an unfinished window, two series of each in a v4.CSA layer, for the compressor and
    the indexer) and ``overlap`` (a v4.CSA layer's last full window's first series, kv and gate,
    carried into the next window). Every part is held in the activation dtype (``dtype_bytes``;
    bf16 in the reference on the meta device).
    """
    if convention not in CONVENTIONS:
        raise ValueError(f"convention must be one of {CONVENTIONS}, got {convention!r}")
    if isinstance(seq_len, bool) or not isinstance(seq_len, int) or seq_len < 0:
        raise ValueError(f"seq_len must be an integer >= 0, got {seq_len!r}")
    return [
        {k: v * dtype_bytes for k, v in layer_cache(c, kind, seq_len, convention).items()}
        for kind in c.layer_types
    ]


def _floor_sum(n: int, rate: int) -> int:
    """``sum(j // rate for j in 1..n)`` in closed form."""
    q = n // rate
    return rate * q * (q - 1) // 2 + q * (n - q * rate + 1) if n > 0 else 0


def causal_keys(n: int, window: int, rate: int = 0, topk: int | None = None) -> int:
    """Keys the queries at 1-based positions ``1..n`` attend together, in closed form: each
    query ``j`` its ``min(j, window)`` window keys and ``j // rate`` pooled ones (at most
    ``topk`` where an indexer picks them; ``rate`` 0: none)."""
    full = min(n, window)
    keys = full * (full + 1) // 2 + window * max(0, n - window)
    if rate:
        if topk is None:
            keys += _floor_sum(n, rate)
        else:  # j // rate reaches topk at j = topk * rate
            below = min(n, topk * rate - 1)
            keys += _floor_sum(below, rate) + topk * max(0, n - below)
    return keys


def attention_flops(
    c: v4.V4Config, layer_type: str, seq_len: int, context: int = 0
) -> dict[str, int]:
    """FLOPs of one attention layer's forward of ``seq_len`` new tokens after ``context``
    cached ones (batch 1; ``context`` 0 is a prefill, ``seq_len`` 1 a decode step), by
    stage, as the reference computes them (2 per multiply-add; element-wise work, softmax,
    norms, rotary and top-k not counted, as ``FlopCounterMode`` counts).

    With ``T = context + S`` tokens seen, ``P = T // rate`` pooled keys exist. ``core`` is the
    reference's eager attention: every new query against every key it holds, masked, not
    skipped: the window rows its cache kept (``min(context, W - 1)``) plus the new ones, and
    every pooled key, ``4 n_h head_dim S (min(context, W - 1) + S + P)``. ``core_causal`` is
    the work of a kernel that skips masked keys: the query at 1-based position ``j`` sees
    ``min(j, W)`` window keys and ``j // rate`` pooled keys (in a v4.CSA layer at most
    ``index_topk`` of them). ``indexer_score``: a v4.CSA query's indexer scores every pooled key
    the reference holds (``2 n_i d_i S P``, the future ones masked after scoring).
    """
    if layer_type not in v4.LAYER_TYPES:
        raise ValueError(f"layer_type must be one of {v4.LAYER_TYPES}, got {layer_type!r}")
    for name, value in (("seq_len", seq_len), ("context", context)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{name} must be an integer >= 0, got {value!r}")
    s, d, nh, hd = seq_len, c.hidden_size, c.num_attention_heads, c.head_dim
    g, r, w = c.o_groups, c.o_lora_rank, c.sliding_window
    out = {
        "q_proj": 2 * s * (d * c.q_lora_rank + c.q_lora_rank * nh * hd),
        "kv_proj": 2 * s * d * hd,
        "o_proj": 2 * s * (nh * hd * r + g * r * d),
    }
    rate = c.rate(layer_type) if layer_type != v4.SLIDING else 0
    pooled = (context + s) // rate if rate else 0
    out["core"] = 4 * nh * hd * s * (min(context, w - 1) + s + pooled)
    topk = c.index_topk if layer_type == v4.CSA else None
    out["core_causal"] = (
        4
        * nh
        * hd
        * (causal_keys(context + s, w, rate, topk) - causal_keys(context, w, rate, topk))
    )
    if layer_type == v4.HCA:
        out["compressor"] = 2 * s * d * 2 * hd
    elif layer_type == v4.CSA:
        ni, di = c.index_n_heads, c.index_head_dim
        out["compressor"] = 2 * s * d * 2 * (2 * hd)
        out["indexer_proj"] = 2 * s * (d * 2 * (2 * di) + c.q_lora_rank * ni * di + d * ni)
        out["indexer_score"] = 2 * ni * di * s * pooled
    return out


def forward_flops(c: v4.V4Config, seq_len: int, context: int = 0) -> dict[str, int]:
    """FLOPs of the whole model's forward of ``seq_len`` new tokens after ``context`` cached
    ones (batch 1; logits for every new token), by part, as the reference computes them
    (:func:`attention_flops`' ``core`` for the attention, the eager dense product):
    ``attention``; ``moe`` (router, ``num_experts_per_tok`` routed experts and the shared one
    per token; a hash layer's router runs too, for the weights); ``hyper`` (per layer two mixers
    of ``2 S n d (2 + n) n`` and two stream mixes of ``2 S n^2 d``, and the head mixer ``2 S n^2
    d``); ``lm_head``."""
    s, d, n = seq_len, c.hidden_size, c.hc_mult
    w, e, k = c.moe_intermediate_size, c.n_routed_experts, c.num_experts_per_tok
    attention = 0
    for kind in c.layer_types:
        stages = attention_flops(c, kind, s, context)
        attention += sum(v for key, v in stages.items() if key != "core_causal")
    layers = c.num_hidden_layers
    return {
        "attention": attention,
        "moe": layers * 2 * s * d * (e + 3 * w * (k + 1)),
        "hyper": layers * 2 * (2 * s * n * d * (2 + n) * n + 2 * s * n * n * d) + 2 * s * n * n * d,
        "lm_head": 2 * s * d * c.vocab_size,
    }
