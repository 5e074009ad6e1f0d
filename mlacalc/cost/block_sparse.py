"""MiniMax-M3's block-sparse attention (layer kind ``msa``): what its core attends and what
its indexer costs, by the rules of the reference (transformers' ``MiniMaxM3VLIndexer``).

The indexer projects ``n_i`` query heads and one key of ``d_i`` from the hidden state
(``q_proj``, ``k_proj``; an RMSNorm and RoPE on each, element-wise), caches the key of every
token, scores every cached key on every indexer head (``2 n_i d_i`` FLOPs per (query, key)
pair: the reference multiplies the whole score matrix and masks the future), takes each
block of ``B`` keys' max and keeps the ``T`` best blocks per query, the ``L`` blocks ending at
the query's own forced among them (``1 <= L <= T``). Every earlier block holds only past keys
and scores finitely, so the query at 1-based position ``j`` attends ``min(T, ceil(j / B))``
blocks: every key up to itself while ``j <= T B``, else ``T - 1`` whole blocks and its own
block up to itself, ``(T - 1) B + ((j - 1) mod B + 1)`` keys. The cache row of a layer is the
GQA K and V plus the indexer key.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from mlacalc.words.dtypes import dtype_bits, gemm_class, resolve_kv_layout
from mlacalc.words.kernels import Kernel, indexer_score_shape

if TYPE_CHECKING:
    from mlacalc.models.schema import ModelConfig

__all__ = [
    "BLOCK_SPARSE_KERNELS",
    "block_indexer_cost",
    "block_indexer_kernels",
    "block_indexer_row_bytes",
    "block_keys_attended",
    "block_sparse_core",
    "block_sparse_keys_and_pairs",
]


def block_keys_attended(position: int, block: int, topk: int) -> int:
    """Keys the query at 1-based ``position`` attends in a block-sparse layer.

    >>> block_keys_attended(100, 128, 16), block_keys_attended(2048, 128, 16)
    (100, 2048)
    >>> block_keys_attended(2049, 128, 16), block_keys_attended(4096, 128, 16)
    (1921, 2048)
    """
    if position <= topk * block:
        return position
    return (topk - 1) * block + (position - 1) % block + 1


def _ramp(n: int, block: int) -> int:
    """Sum of ``(x - 1) mod B + 1`` for ``x = 1 .. n``."""
    whole, rest = divmod(n, block)
    return whole * block * (block + 1) // 2 + rest * (rest + 1) // 2


def block_sparse_keys_and_pairs(
    q: int, seq_len: int, block: int, topk: int, causal: bool
) -> tuple[int, int]:
    """Keys read per query and (query, key) pairs per sequence and head for ``q`` new tokens,
    the last at key ``seq_len``.

    Causal: each query's own keys (:func:`block_keys_attended`) summed exactly. Non-causal
    (what a dense block kernel computes): every new token times ``min(S, T B)`` keys.

    >>> block_sparse_keys_and_pairs(1, 32768, 128, 16, True)
    (2048, 2048)
    >>> [block_sparse_keys_and_pairs(4, 4, 2, 1, causal) for causal in (True, False)]
    [(2, 6), (2, 8)]
    """
    cap = topk * block
    keys = min(seq_len, cap)
    if not causal:
        return keys, q * keys
    lo, hi = seq_len - q + 1, seq_len
    dense_hi = min(hi, cap)  # positions up to T B attend every key up to themselves
    pairs = (lo + dense_hi) * (dense_hi - lo + 1) // 2 if dense_hi >= lo else 0
    start = max(lo, cap + 1)
    if hi >= start:
        pairs += (hi - start + 1) * (topk - 1) * block + _ramp(hi, block) - _ramp(start - 1, block)
    return keys, pairs


def block_indexer_row_bytes(model: ModelConfig, layout: Any = None) -> int:
    """Bytes of one token's indexer key in one block-sparse layer (the cache layout's element,
    bf16 when none is given)."""
    layout = resolve_kv_layout("bf16" if layout is None else layout)
    return layout.row_bytes(model.sparse_index_dim)


def block_indexer_cost(
    model: ModelConfig,
    q: int,
    seq_len: int,
    batch: int,
    causal: bool,
    layout: Any,
    weight_bits: int,
) -> tuple[dict[str, int], int]:
    """Matmul FLOPs by stage and fused bytes of one block-sparse layer's indexer for one step.

    ``q_proj`` (``d -> n_i d_i``, stage ``q_proj``), ``k_proj`` (``d -> d_i``, ``kv_proj``) and
    the scores of every cached key on every indexer head (``core``: ``2 n_i d_i`` per pair,
    ``q S`` pairs, or the causal ones when asked). Bytes: its weights and two norms (bf16)
    once, the indexer keys of the ``seq_len`` tokens read and of the new tokens written.
    """
    d, heads, width = model.hidden_size, model.sparse_index_heads, model.sparse_index_dim
    tokens = batch * q
    lo = seq_len - q + 1
    pairs = (lo + seq_len) * q // 2 if causal else q * seq_len
    flops = {
        "q_proj": 2 * tokens * d * heads * width,
        "kv_proj": 2 * tokens * d * width,
        "core": 2 * batch * heads * width * pairs,
    }
    weights = (d * heads * width + d * width) * weight_bits // 8 + 2 * width * 2
    row = block_indexer_row_bytes(model, layout)
    return flops, weights + batch * (seq_len + q) * row


#: the block-sparse indexer's kernels and the breakdown stage of each
BLOCK_SPARSE_KERNELS = {
    "block_indexer_q_proj": "q_proj",
    "block_indexer_k_proj": "kv_proj",
    "block_indexer_scores": "core",
    "block_indexer_topk": "core",
}
#: bytes of one indexer logit (float32) and of one chosen block's index (int64, as the
#: reference's top-k returns it)
_LOGIT_BYTES = 4
_INDEX_BYTES = 8


def _packed(elements: int, bits: int) -> int:
    return -(-elements * bits // 8)


def _gemm(name: str, dtype: str, flops: int, nbytes: int, m: int, n: int, k: int, calls: int):
    shape = {"m": m, "n": n, "k": k, "groups": 1}
    return Kernel(
        name=name, kind="gemm", dtype=dtype, flops=flops, bytes=nbytes, calls=calls, shape=shape
    )


def block_indexer_kernels(
    cost: Any,
    model: ModelConfig,
    act_dtype: str,
    weight_dtype: str,
    calls: int = 1,
    kv_dtype: Any = "bf16",
) -> list[Kernel]:
    """The indexer of one block-sparse layer as serving kernels, each a class the time model
    has (empty for a layer without one):

    - ``block_indexer_q_proj``, ``block_indexer_k_proj`` (``gemm``): ``d -> n_i d_i`` and
      ``d -> d_i``, their RMSNorm weights read and the new keys written to the cache by the
      second;
    - ``block_indexer_scores`` (``attention_decode`` in decode: an MQA decode of ``n_i`` query
      heads on one shared key; ``attention_prefill`` otherwise; no value product):
      ``2 n_i d_i`` FLOPs per (query, key) pair over every key (causal or not as asked), the
      cached keys read once, one float32 score per (head, query, block of ``B`` keys) written:
      the max over a block taken in the kernel's epilogue (its key tiles hold whole blocks),
      as a serving kernel does, where the reference materialises every key's score;
    - ``block_indexer_topk`` (``elementwise``, no FLOPs: comparisons): the block scores read,
      ``min(T, blocks)`` block indices per head and query written.

    The FLOPs are the engine's (:func:`block_indexer_cost`, added to ``q_proj``, ``kv_proj``
    and ``core``); the core's kernel attends at most ``T B`` keys (its ``window``).
    """
    if model.sparse_block_size is None:
        return []
    d, heads, width = model.hidden_size, model.sparse_index_heads, model.sparse_index_dim
    b, q, S = cost.batch, cost.q_len, cost.seq_len
    tokens = b * q
    a_bits, w_bits = dtype_bits(act_dtype), dtype_bits(weight_dtype)
    dtype = gemm_class(act_dtype, weight_dtype, True)
    row = block_indexer_row_bytes(model, kv_dtype)
    flops, _ = block_indexer_cost(model, q, S, b, cost.causal, kv_dtype, w_bits)
    key_blocks = -(-S // model.sparse_block_size)
    logits = b * heads * q * key_blocks * _LOGIT_BYTES  # a block's max, pooled in the epilogue
    blocks = min(model.sparse_topk_blocks, key_blocks)
    return [
        _gemm(
            "block_indexer_q_proj",
            dtype,
            flops["q_proj"],
            _packed(d * heads * width, w_bits)
            + 2 * width
            + _packed(tokens * (d + heads * width), a_bits),
            tokens,
            heads * width,
            d,
            calls,
        ),
        _gemm(
            "block_indexer_k_proj",
            dtype,
            flops["kv_proj"],
            _packed(d * width, w_bits) + 2 * width + _packed(tokens * d, a_bits) + tokens * row,
            tokens,
            width,
            d,
            calls,
        ),
        Kernel(
            name="block_indexer_scores",
            kind="attention_decode" if cost.phase == "decode" else "attention_prefill",
            dtype=act_dtype,
            flops=flops["core"],
            bytes=_packed(tokens * heads * width, a_bits) + b * S * row + logits,
            calls=calls,
            shape=indexer_score_shape(b, q, S, heads, width, cost.causal),
        ),
        Kernel(
            name="block_indexer_topk",
            kind="elementwise",
            dtype=act_dtype,
            flops=0,
            bytes=logits + tokens * heads * blocks * _INDEX_BYTES,
            calls=calls,
            shape={"elements": b * heads * q * key_blocks},
        ),
    ]


def block_sparse_core(kernels: list[Kernel], model: ModelConfig) -> list[Kernel]:
    """A block-sparse layer's kernels with its attention core timed as the block-sparse kernel
    runs it: in decode a paged kernel over the chosen blocks only (``kv_len`` the keys the query
    attends, ``min(S, T B)``, no window: the block table lists the ``T`` blocks), in prefill a
    band of ``T B`` keys (each query tile meets the blocks its queries chose; the band's tile
    rule of sliding-window prefill). FLOPs and bytes are left as counted; ``selected_cap``
    tells the serving step's templates that ``kv_len`` stops at ``T B``."""
    cap = model.sparse_topk_blocks * model.sparse_block_size
    out = []
    for k in kernels:
        if k.name == "attention" and k.kind == "attention_decode":
            kv_len = min(k.shape["kv_len"], cap)
            k = replace(k, shape={**k.shape, "kv_len": kv_len, "window": 0, "selected_cap": cap})
        out.append(k)
    return out
