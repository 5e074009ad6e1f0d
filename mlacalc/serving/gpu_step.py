"""The kernels one GPU runs in a serving step under a layout, and their time.

A step runs ``dec_B`` decoding sequences (``dec_q`` new tokens each: 1, or 1 + the draft
tokens that MTP verifies, attending ``dec_S`` keys) and ``pf_N`` prefilling sequences
(``pf_q`` new tokens each after ``pf_prefix`` cached ones, causal) on one attention group;
every argument may be a numpy array, so one call builds the kernels of many steps (a search
evaluates every batch size at once). The GPU is a rank of the fullest pipeline stage.

The kernels are the model step's (:func:`mlacalc.cost.model_step.step_kernels`: every projection,
the attention core of each layer kind, norms, RoPE, FFN, router, shared experts, head, with
their FLOPs and bytes), sharded under the layout:

- each model-step kernel's work is affine in what drives it, so it is read off the model
  step at a few tiny steps (:func:`_templates`): a fixed part (its weights), a part per
  token (decode tokens and prompt tokens apart: a kernel both phases run reads its weights
  once), and, for attention cores, a part per attended (query, key) pair (FLOPs) and per
  cached row read (bytes). A step of any size is then these coefficients times its arrays;
- tensor parallelism splits a kernel as its weights split (:data:`COLUMN` output features,
  :data:`ROW` input features, :data:`HEADS` per-head products and attention heads; GQA
  key/value heads up to ``n_kv`` ranks and replicated beyond); a Mamba layer's kernels run a
  rank's heads, channels and B/C groups (:func:`_state_share`); the MLA latent and query
  down-projections, the router, norms and the DSA indexer are replicated (every rank does
  all of them), and the latent decode core reads the whole latent cache on every rank;
- the routed experts are the layout's: the experts this GPU holds, the tokens the routing
  sends it from every attention group of the MoE group (``routing_imbalance`` x the even
  share), and the experts those tokens touch;
- communication is added where the layout needs it (see :mod:`mlacalc.serving.layout` and
  :mod:`mlacalc.serving.comm`).

Every kernel is timed by the calibrated kernel model
(:func:`mlacalc.timemodel.kernel_time.predict_batch`),
collectives included: all-reduce, all-gather, reduce-scatter, expert-parallel dispatch and
combine (DeepEP low-latency rows for decode, normal rows with prompt tokens) and the stage
hand-over, fitted on the measured NCCL, TensorRT-LLM and DeepEP tables, whenever the group fits
in one node (over the scale-up link). The kernel model has no term for the scale-out network:
a group that spans nodes is timed by the link model of :mod:`mlacalc.serving.comm` (network
bandwidth and latency per GPU, its achieved share from the DeepSeek-V3 ISCA paper).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from fractions import Fraction
from functools import lru_cache
from typing import Any

import numpy as np

from mlacalc.cost.compressed import (
    LOGIT_KEY_BLOCK,
    SELECTING_LOGITS,
    dsa_ragged_logits_bytes,
    dsa_topk,
    engine_topk,
    logit_blocks_below,
    padded_heads,
    v4_topk,
)
from mlacalc.cost.engine import kv_cache
from mlacalc.cost.linear import LINEAR_CHUNK, linear_chunks
from mlacalc.cost.mamba import mamba_shape
from mlacalc.cost.mamba1 import mamba1_shape
from mlacalc.cost.model_step import (
    KEPT_GEMMS,
    STATE_GEMMS,
    checkpoint_stored,
    step_kernels,
    stored_experts,
)
from mlacalc.cost.params import expert_shape
from mlacalc.cost.quant import checkpoint_part_bytes, kept_head_format
from mlacalc.hardware.catalogue import HardwareSpec
from mlacalc.models.architecture import kv_head_share
from mlacalc.models.loading import ModelConfig
from mlacalc.serving.comm import (
    combine_bytes,
    comm_seconds,
    dispatch_bytes,
    distinct_ranks_per_token,
    placed_groups,
    remote_nodes_per_token,
)
from mlacalc.serving.layout import Layout, stage_layers
from mlacalc.serving.precision import component_of, format_bits, format_class, kept_components
from mlacalc.serving.ranks import (
    hottest_expert_rows,
    placement_imbalance,
    rebalanced,
    routing_factor,
)
from mlacalc.serving.scheduler import Scheduler
from mlacalc.timemodel.comm_time import (
    PEER_WAIT_ENGINES,
    SGLANG_NCCL_FROM_BYTES,
    VLLM_SYMM_VARIANT,
    vllm_path,
)
from mlacalc.timemodel.device import device_figures
from mlacalc.timemodel.kernel_time import predict_batch, run_dtype
from mlacalc.timemodel.mla_time import step_decode_path_tokens
from mlacalc.timemodel.moe_backend import runs_trtllm_gen
from mlacalc.timemodel.moe_time import DEEPEP_RECEIVED, DEEPEP_ROUTED, ROWS_SPREAD
from mlacalc.timemodel.profile import load_profile
from mlacalc.timemodel.roofline_time import ROOFLINE
from mlacalc.words.dtypes import KVLayout, canonical_dtype, dtype_bits, weight_gemm_class
from mlacalc.words.engines import default_engine
from mlacalc.words.kernels import TRTLLM_GEN_MOE, Kernel, KernelBatch, variant_of
from mlacalc.words.vocab import SOFTMAX_FLOPS_PER_ELEMENT

__all__ = [
    "COLUMN",
    "HEADS",
    "ROW",
    "Spec",
    "StepModel",
    "StepTimes",
    "routed_experts_class",
    "spec_kernels",
]

ACT = 2  # bytes per activation element (bf16)
#: The kind of the spec that carries a step's host work (not a kernel: never timed by the
#: kernel model; :meth:`StepModel.compose` adds it)
HOST = "host"

#: SMs a DeepEP normal-mode dispatch or combine runs on (DeepEP's ``Buffer.num_sms`` default)
DEEPEP_NORMAL_SMS = 20

#: Model-step GEMMs split by output features under tensor parallelism (column parallel).
COLUMN = frozenset(
    {
        "q_proj",
        "q_b_proj",
        "q_gate_proj",
        "kv_b_proj",
        "dense_ffn_up",
        "shared_experts_up",
        "lm_head",
        "linear_in_proj",
        "mamba_in_proj",
        "mamba1_in_proj",
        "mamba1_dt_proj",
    }
)
#: Model-step GEMMs split by input features (row parallel; an all-reduce follows).
ROW = frozenset(
    {
        "o_proj",
        "o_b_proj",
        "dense_ffn_down",
        "shared_experts_down",
        "linear_o_proj",
        "mamba_out_proj",
        "mamba1_out_proj",
        "mamba1_x_proj",
    }
)
#: Per-head kernels split by heads: the absorbed products, the attention core, the element-wise
#: work of the split heads and FFN width (RoPE, activations, linear attention's recurrence).
HEADS = frozenset(
    {
        "q_absorb",
        "o_absorb",
        "o_a_proj",  # DeepSeek-V4's grouped output projection: its groups split
        "attention",
        "rope",
        "k_assemble",  # MLA's expanded prompt keys, one a head
        "dense_ffn_act",
        "shared_experts_act",
        "linear_conv",
        "linear_core",
        "linear_norm",
    }
)
#: Model-step kernels of the output head (run once per step, on the last stage; the
#: embedding, part ``embed``, runs on the first).
_HEAD = frozenset({"final_norm", "lm_head"})
#: Kernels whose tokens are the sequences sampled (one per prompt, every decode position).
_PER_SEQUENCE = frozenset({"lm_head"})


def _part(name: str) -> str:
    if name == "embedding":
        return "embed"
    if name in _HEAD:
        return "head"
    if name.startswith("dense_ffn"):
        return "dense_ffn"
    if name in ("router", "routed_experts") or name.startswith("shared_experts"):
        return "moe_ffn"
    return "layer"


@dataclass(frozen=True)
class _Template:
    """One model-step kernel as coefficients of what drives its work (see the module
    docstring): ``flops`` as (fixed, per decode token, per prompt token, per decode pair,
    per decode pair of a selected key, per prompt causal pair, per prompt (token, key), per
    prompt (token, selected key), per prompt key: an MLA chunk's cached prefix expanded),
    ``bytes`` and sizes the same with cached rows read in decode and keys in the prompt for
    the pairs (and nothing in the last place: bytes per key are the pairs' place)."""

    name: str
    kind: str
    dtype: str
    part: str
    calls: int
    phases: str  # "both", "decode" or "prefill": which tokens run it
    window: int  # a windowed core's keys per query (0: every key)
    flops: Coef
    bytes: Coef
    elements: Coef  # an element-wise kernel's size
    rows: Coef  # a GEMM's rows (m)
    groups: Coef  # a GEMM's batched groups
    shape: dict[str, int]
    #: a ``kv_proj``'s K/V heads: its layer kind's, as the core it feeds reads them (a Gemma 4
    #: full layer's ``num_global_key_value_heads``, a MiMo-V2-Flash sliding layer's
    #: ``sliding_key_value_heads``); 0 for any other kernel
    n_kv: int = 0
    #: a scan kernel's figures the model step counts in whole chunks of the scan
    #: (:func:`_whole_chunk_figures`): ``"f"`` its FLOPs, ``"b"`` its bytes and sizes
    whole: str = ""
    #: a chunked core's ``attention_chunk_size`` (Llama 4's local layers: a query attends the
    #: keys of its own chunk only, :func:`_chunked_pairs`); 0 for any other kernel
    chunk: int = 0


Coef = tuple[float, ...]

#: Decode steps the templates are read from: (batch, keys).
_DECODE_POINTS = ((1, 2), (2, 2), (1, 3))


def _prefill_points(
    cap: int | None, period: int = 0, chunk: int = LINEAR_CHUNK, per_key: bool = False
) -> tuple[tuple[int, int], ...]:
    """Prompt steps the templates are read from: (new tokens, keys), whole chunks of the
    linear-attention kernels (``chunk``, :func:`_scan_chunk`: their work is affine in whole
    chunks), and a chunk after more than ``cap`` keys (the keys a DSA layer selects) where the
    model has one. DeepSeek-V4 (``period``: the window and the compress ratios' common
    multiple): chunks after a full window, in whole periods, so that the window's keys are a
    constant per query and the pooled keys a ratio of the keys. ``per_key`` (a plain MLA
    model, whose chunk expands its cached prefix through kv_b_proj: work per key) adds a short
    chunk after a long prefix, which tells work per key from work per (token, key)."""
    C = _whole(period, chunk)
    extra = ((C, cap + 2 * C),) if cap else ()
    if per_key:
        extra += ((C, 3 * C),)
    if period:
        return ((C, 2 * C), (2 * C, 3 * C), (2 * C, 4 * C), (3 * C, 4 * C), *extra)
    return ((C, C), (2 * C, 2 * C), (2 * C, 3 * C), (3 * C, 3 * C), *extra)


def _whole_chunk_figures(
    at_chunk: list[tuple[tuple[str, int], Kernel]],
    short: list[tuple[tuple[str, int], Kernel]],
) -> dict[tuple[str, int], str]:
    """The scan kernels (:func:`_scan_kernel`) whose FLOPs (``"f"``) or bytes (``"b"``) the
    model step counts in whole chunks of the scan: the same for a prompt one token short of
    a chunk (``short``) as for the whole chunk (``at_chunk``). The served step counts them so
    (a prompt's tokens rounded up to whole chunks); where the figure mixes a term a token with
    one a chunk (a delta rule's bytes) it stays a token's."""
    out = {}
    for (key, a), (_, b) in zip(at_chunk, short):
        if _scan_kernel(key[0]):
            out[key] = "f" * (a.flops == b.flops) + "b" * (a.bytes == b.bytes)
    return out


def _expands_prefix(m: ModelConfig) -> bool:
    """Whether a chunk of ``m`` after a cached prefix expands the prefix's latent rows
    (:func:`mlacalc.words.vocab.serving_impl`: a plain MLA model's ``"compressed"`` chunk)."""
    return m.is_mla and m.index_topk is None and not m.compress_ratios


def _whole(period: int, chunk: int) -> int:
    """Tokens a prompt step the templates are read from holds a whole number of: every
    scan's chunk, and DeepSeek-V4's period."""
    return math.lcm(period, chunk) if period else chunk


def _scan_kernel(name: str) -> bool:
    """Whether a model-step kernel is a linear-attention or Mamba layer's own (its work per
    token, with a state carried between chunks), not a projection's or a core's over keys:
    where a prompt has a prefix it reads the state the prefix left (the scan's, the
    convolution's last inputs) once a sequence, whatever the prefix's length, so its
    templates' prompt bytes take a term per sequence with a prefix where others take one per
    key (read as one per key, Qwen3-Next's delta-rule core had read 35x its bytes 1K tokens
    after 30K)."""
    return name.startswith(("linear_", "mamba_", "mamba1_"))


def _attended(shape: dict[str, Any], keys: Any) -> Any:
    """The keys an attention core reads after ``keys`` tokens: all of them, or (a DeepSeek-V4
    core, its shape's ``pooled_ratio``) its window's and the pooled ones (at most
    ``pooled_cap`` of those where an indexer picks them)."""
    if shape.get("selected_cap"):  # MiniMax-M3's block-sparse decode: its chosen blocks
        return np.minimum(keys, shape["selected_cap"])
    ratio = shape.get("pooled_ratio")
    if not ratio:
        return keys
    pooled = keys // ratio
    if shape.get("pooled_cap"):
        pooled = np.minimum(pooled, shape["pooled_cap"])
    return np.minimum(keys, shape.get("pooled_window", 0)) + pooled


def _pooled(n: Any, rate: int, topk: int) -> Any:
    """``sum(min(j // rate, topk) for j in 1..n)``: the pooled keys the queries at positions
    ``1..n`` of a DeepSeek-V4 CSA layer attend together (numpy arrays or numbers)."""
    below = np.minimum(n, topk * rate - 1)
    q = below // rate
    return rate * q * (q - 1) // 2 + q * (below - q * rate + 1) + topk * np.maximum(0, n - below)


def _csa(m: ModelConfig) -> tuple[int, int] | None:
    """DeepSeek-V4: its CSA layers' (ratio, index_topk), None without them."""
    if m.compress_ratios and m.index_topk and m.compress_rate_csa in m.compress_ratios:
        return m.compress_rate_csa, m.index_topk
    return None


def _period(m: ModelConfig) -> int:
    """DeepSeek-V4: the common multiple of its window and compress ratios; MiniMax-M3: its
    key block (the indexer's block scores and each query's blocks are affine in whole blocks);
    0 otherwise."""
    if m.sparse_block_size is not None:
        return m.sparse_block_size
    if not m.compress_ratios:
        return 0
    return math.lcm(m.sliding_window, *(r for r in m.compress_ratios if r))


def _scan_chunk(m: ModelConfig) -> int:
    """Prompt tokens in whole chunks of every chunked scan the model runs: Gated DeltaNet's
    (:data:`LINEAR_CHUNK`) and Mamba-2's (its ``mamba_chunk_size``, 128 where unset; the
    prompt steps the templates are read from must hold whole chunks of it too, or the
    chunk count, not affine in the tokens, is read as a cost per key: Nemotron-3-Super's
    scan had come out negative per key and its prompts quadratic)."""
    if m.mamba_num_heads is None:
        return LINEAR_CHUNK
    return math.lcm(LINEAR_CHUNK, mamba_shape(m).chunk)


def _state_share(m: ModelConfig, name: str, tp: int) -> float | None:
    """The share of a Mamba layer's kernel ``name`` that one of ``tp`` tensor-parallel ranks
    runs, as the engines shard the mixer (vLLM's ``MambaMixer2`` and ``MambaMixer``) and as
    :func:`mlacalc.serving.layout.kv_bytes_per_sequence_per_gpu` splits its state:
    ``ceil(H / tp)`` of Mamba-2's ``H`` heads (their x, z and step sizes, the scan and its
    states, the gated norm, ``out_proj``'s inputs) and ``ceil(G / tp)`` of its ``G`` B/C
    groups (a group replicated on the ranks whose heads read it: ``in_proj``'s outputs and
    the convolution's channels hold both); ``ceil(I / tp)`` of Mamba-1's ``I`` channels
    (``in_proj``, ``dt_proj``, the convolution, the scan, ``x_proj``'s and ``out_proj``'s
    inputs). None for any other kernel and for Mamba-1's step-size norms (replicated: they
    run on ``x_proj``'s all-reduced output). Left unsplit, a rank had run every head's
    state update: Nemotron-3.5-Lightning's read 269.8 MB a call at TP8 as at TP1."""
    if name.startswith("mamba1_"):
        if name == "mamba1_dt_norms":
            return None
        return math.ceil(m.mamba_inner_size / tp) / m.mamba_inner_size
    if not name.startswith("mamba_"):
        return None
    s = mamba_shape(m)
    heads = math.ceil(s.heads / tp)
    bc = 2 * math.ceil(s.groups / tp) * s.state  # B and C of the rank's groups
    if name == "mamba_in_proj":  # z, x, B, C and the step sizes
        return (2 * heads * s.head_dim + bc + heads) / s.in_width
    if name == "mamba_conv":  # x, B and C
        return (heads * s.head_dim + bc) / s.conv_dim
    return heads / s.heads


def _block_of(m: ModelConfig, window: int) -> tuple[int, int] | None:
    """A block-sparse model's ``(B, T)`` for its msa prompt core, the one kernel the model
    step marks with a window of ``T B`` keys (:func:`mlacalc.cost.block_sparse.block_sparse_core`;
    the model has no sliding window); None for every other kernel and model."""
    if m.sparse_block_size is None or not window:
        return None
    block, topk = m.sparse_block_size, m.sparse_topk_blocks
    return (block, topk) if window == block * topk else None


def _cap(m: ModelConfig) -> int | None:
    """The keys past which a sparse layer's selected keys stop growing: DSA's ``index_topk``;
    DeepSeek-V4's CSA ``index_topk`` pooled keys, ``index_topk x compress_rate_csa`` keys."""
    if m.sparse_block_size is not None:  # MiniMax-M3: T blocks of B keys (kind msa)
        return m.sparse_topk_blocks * m.sparse_block_size
    if m.compress_ratios and m.index_topk and m.compress_rate_csa in m.compress_ratios:
        return m.index_topk * m.compress_rate_csa
    return None if m.compress_ratios else m.index_topk


def _size(k: Kernel) -> list[int]:
    """The shape figures that grow with the step: an element-wise kernel's elements, a
    GEMM's rows and batched groups."""
    return [int(k.shape.get(f, 0)) for f in ("elements", "m", "groups")]


def _linear_fields(shape: dict[str, Any], elements: Any, seqs: Any, q: Any, one: Any) -> dict:
    """The shape fields of a linear layer's kernel class
    (:func:`mlacalc.cost.linear.linear_kernels`) for ``seqs`` sequences of ``q`` new tokens
    each, ``elements`` its output elements: the constant ones as they are, the sequences, the
    (sequence, value head) walkers and the chunks each walks (one for the recurrent kernel),
    flash-linear-attention's added traffic in proportion to the elements."""
    out = {k: float(v) * one for k, v in shape.items() if k not in ("elements", "seqs")}
    out["seqs"] = seqs
    if "heads" in shape:
        out["seq_heads"] = seqs * shape["heads"]
        chunked = variant_of("elementwise", shape) == "gdn_chunk"
        out["chunks"] = linear_chunks(q) * one if chunked else one
        if chunked:  # the tokens of its fullest chunk (elementwise_time: chunk_token_s)
            out["chunk_tokens"] = np.minimum(q, LINEAR_CHUNK) * one
    if "fla_bytes" in shape:
        out["fla_bytes"] = elements * (shape["fla_bytes"] / shape["elements"])
    return out


def _causal_pairs(q: Any, prefix: Any, window: int) -> Any:
    """(query, key) pairs a causal chunk of ``q`` tokens after ``prefix`` attends."""
    if not window:
        return q * prefix + q * (q + 1) / 2
    c = np.clip(window - prefix, 0, q)  # queries whose keys all fit the window
    return c * prefix + c * (c + 1) / 2 + (q - c) * window


def _block_pairs_below(n: Any, block: int, topk: int) -> Any:
    """(query, key) pairs of positions ``1 .. n`` of a block-sparse core (MiniMax-M3's msa):
    position ``j`` attends every key up to itself while ``j <= T B``, else ``T - 1`` whole
    blocks and its own block up to itself
    (:func:`mlacalc.cost.block_sparse.block_keys_attended`)."""
    cap = topk * block
    head = np.minimum(n, cap)
    past = np.maximum(n - cap, 0)  # positions past T B (cap a whole number of blocks)
    return head * (head + 1) / 2 + past * (topk - 1) * block + _chunk_pairs_below(past, block)


def _block_pairs(q: Any, prefix: Any, block: int, topk: int) -> Any:
    """(query, key) pairs a causal chunk of ``q`` tokens after ``prefix`` attends in a
    block-sparse core (as :func:`mlacalc.cost.block_sparse.block_sparse_keys_and_pairs`
    counts them). Read as a window of ``T B`` keys, a chunk past ``T B`` had counted its
    queries' last, partial blocks whole, the prompt template fitted on it had come out
    non-affine, and a one-token chunk of MiniMax-M3 had negative attention FLOPs."""
    return _block_pairs_below(prefix + q, block, topk) - _block_pairs_below(prefix, block, topk)


def _solve_exact(a: list[list[Fraction]], y: list[Fraction]) -> list[Fraction]:
    """A least-squares solution of ``a x = y`` in exact arithmetic (normal equations); a
    driver the others already span over the reference steps gets 0."""
    n = len(a[0])
    m = [[sum(r[i] * r[j] for r in a) for j in range(n)] for i in range(n)]
    v = [sum(r[i] * yi for r, yi in zip(a, y)) for i in range(n)]
    pivots: list[int] = []
    row = 0
    for c in range(n):
        p = next((r for r in range(row, n) if m[r][c] != 0), None)
        if p is None:
            continue
        m[row], m[p], v[row], v[p] = m[p], m[row], v[p], v[row]
        for r in range(n):
            if r != row and m[r][c] != 0:
                k = m[r][c] / m[row][c]
                m[r] = [x - k * z for x, z in zip(m[r], m[row])]
                v[r] -= k * v[row]
        pivots.append(c)
        row += 1
    x = [Fraction(0)] * n
    for r, c in enumerate(pivots):
        x[c] = v[r] / m[r][c]
    return x


@lru_cache(maxsize=256)
def _solver(drivers: tuple[tuple[Any, ...], ...]) -> tuple[list[int], list[list[Fraction]]]:
    """The drivers kept (a driver equal to an earlier one over every reference step, or zero,
    gets none) and the exact matrix taking a work figure over the reference steps to its
    coefficients: :func:`_solve_exact` is linear in the figures, so its columns are the
    solutions for each reference step alone. One per set of drivers, shared by every kernel."""
    cols = list(zip(*drivers))
    keep = [j for j, c in enumerate(cols) if any(c) and not any(cols[i] == c for i in range(j))]
    a = [[Fraction(row[j]) for j in keep] for row in drivers]
    rows = len(drivers)
    columns = [_solve_exact(a, [Fraction(int(r == i)) for r in range(rows)]) for i in range(rows)]
    return keep, [list(x) for x in zip(*columns)]


def _fit(drivers: list[list[Any]], values: list[list[float]]) -> list[Coef]:
    """Coefficients of each work figure (FLOPs, bytes, sizes) over the drivers (rows: the
    reference steps), exact where the work is affine in them; a driver equal to an earlier
    one over every reference step (or zero) gets none."""
    width = len(drivers[0])
    keep, solve = _solver(tuple(tuple(row) for row in drivers))
    out = []
    for v in values:
        y = [Fraction(t) for t in v]
        coef = [0.0] * width
        for j, g in zip(keep, solve):
            coef[j] = float(sum((gi * yi for gi, yi in zip(g, y) if yi), Fraction(0)))
        out.append(tuple(coef))
    return out


def _chunk_pairs_below(n: Any, chunk: int) -> Any:
    """(query, key) pairs of positions ``1 .. n`` of a chunked causal core: position ``j``
    attends the ``(j - 1) % chunk + 1`` keys of its own chunk up to itself."""
    r = np.mod(n, chunk)
    return np.floor_divide(n, chunk) * (chunk * (chunk + 1) / 2) + r * (r + 1) / 2


def _chunked_pairs(q: Any, prefix: Any, chunk: int) -> Any:
    """(query, key) pairs a causal chunk of ``q`` tokens after ``prefix`` attends in a chunked
    core (as :func:`mlacalc.cost.attention.chunked_keys_and_pairs` counts them)."""
    return _chunk_pairs_below(prefix + q, chunk) - _chunk_pairs_below(prefix, chunk)


def _chunked_keys(q: Any, seq: Any, chunk: int) -> Any:
    """Keys a chunked core reads for the last ``q`` of ``seq`` positions: those of the
    chunks they touch (:func:`mlacalc.cost.attention.chunked_keys_and_pairs`)."""
    return seq - np.floor_divide(seq - q, chunk) * chunk


def _flat_selected(keys: Any, cap: Any) -> Any:
    """DeepSeek-V4's ``indexer_topk`` (:func:`mlacalc.cost.compressed`): the indices a token
    writes, ``min(pooled keys, index_topk)`` of the whole sequence's, in keys
    (``min(keys, cap)``, ``cap`` the top-k's keys: :func:`_cap`)."""
    return np.minimum(keys, cap)


def _keys_seen(q: Any, seq: Any, window: int, chunk: int) -> Any:
    """Keys a core reads for the last ``q`` of ``seq`` positions: ``min(seq, window)`` for a
    windowed core, those of the touched chunks for a chunked one, every key otherwise."""
    if chunk:
        return _chunked_keys(q, seq, chunk)
    return np.minimum(seq, window) if window else seq


def _chunked_cores(m: ModelConfig, run: Any) -> frozenset[tuple[str, int]]:
    """The attention cores of a model with chunked layers (``attention_chunk_size``) that
    attend their own chunk only: a decode step one key past a chunk reads fewer keys than one
    at a whole chunk (the model step's layer kinds keep no mark of it in the kernel's shape)."""
    C = m.attention_chunk_size
    if not C:
        return frozenset()
    at, past = _keyed(run("decode", C, 1)), _keyed(run("decode", C + 1, 1))
    return frozenset(
        key for (key, a), (_, b) in zip(at, past) if "n_heads" in a.shape and b.flops < a.flops
    )


def _decode_points(cap: int | None, period: int = 0) -> tuple[tuple[int, int], ...]:
    """Decode steps the templates are read from: (batch, keys), and one past ``cap`` (the
    keys a DSA layer selects) where the model has one; DeepSeek-V4 (``period``) after a full
    window, in whole periods (see :func:`_prefill_points`)."""
    if period:
        base = ((1, period), (2, period), (1, 2 * period))
        return base + (((1, cap + period),) if cap else ())
    return _DECODE_POINTS + (((1, cap + 2),) if cap else ())


def _solve_decode(k: list[Kernel], window: int, cap: int | None, period: int = 0) -> list[Coef]:
    """(fixed, per token, per key row, per selected row) FLOPs, bytes and sizes of a decode
    kernel: rows ``min(keys, window)`` for a windowed core; selected rows ``min(keys,
    index_topk)`` (a DSA layer's top-k indices; every key otherwise)."""
    d = [
        [1, b, b * (min(s, window) if window else s), b * min(s, cap) if cap else 0]
        for b, s in _decode_points(cap, period)
    ]
    sizes = [list(v) for v in zip(*(_size(x) for x in k))]
    return _fit(d, [[x.flops for x in k], [x.bytes for x in k], *sizes])


def _solve_prefill(
    k: list[Kernel],
    window: int,
    cap: int | None,
    points: tuple[tuple[int, int], ...],
    csa: tuple[int, int] | None = None,
    scan: bool = False,
    flat_sel: bool = False,
    block: tuple[int, int] | None = None,
) -> list[Coef]:
    """(fixed, per token, per causal pair, per (token, key), per (token, selected key), per
    key) FLOPs and (fixed, per token, per key, per (token, key), per (token, selected key),
    none) bytes and sizes of a prompt kernel read at the prompt steps ``points``
    (:func:`_prefill_points`; FLOPs per key: an MLA chunk's prefix expanded through kv_b_proj);
    keys ``min(keys, window)`` for a windowed core, selected keys ``min(keys, index_topk)``;
    a chunked scan's kernel (``scan``, :func:`_scan_kernel`) per sequence with a prefix in
    place of per key; ``flat_sel`` (DeepSeek-V4's ``indexer_topk``: each token writes
    ``min(pooled keys, index_topk)`` indices of the whole sequence's, :func:`_flat_selected`)
    bytes per such selected key in place of each query's own; ``block`` (a block-sparse
    core's ``(B, T)``, :func:`_block_of`) its causal pairs by :func:`_block_pairs`."""
    f_rows, b_rows = [], []
    for q, keys in points:
        kw = min(keys, window) if window else keys
        sel = q * min(keys, cap) if cap else 0
        if csa:  # DeepSeek-V4's CSA: each query's own pooled keys, at most index_topk
            sel = _pooled(keys, *csa) - _pooled(keys - q, *csa)
        pairs = _block_pairs(q, keys - q, *block) if block else _causal_pairs(q, keys - q, window)
        f_rows.append([1, q, pairs, q * kw, sel, kw])
        sel_b = q * _flat_selected(keys, cap) if flat_sel else sel
        b_rows.append([1, q, int(keys > q) if scan else kw, q * kw, sel_b, 0])
    flops = _fit(f_rows, [[x.flops for x in k]])
    sizes = [list(v) for v in zip(*(_size(x) for x in k))]
    return flops + _fit(b_rows, [[x.bytes for x in k], *sizes])


def _layer_logits(ks: list[Kernel]) -> list[Kernel | None]:
    """Each indexer's logits kernel of ``ks``, one entry a layer's ``indexer_topk`` (in order):
    the ``indexer_scores`` run since the previous top-k, or None where the layer runs none."""
    out: list[Kernel | None] = []
    seen = None
    for k in ks:
        if k.name == "indexer_scores":
            seen = k
        elif k.name == "indexer_topk":
            out.append(seen)
            seen = None
    return out


def _with_logits(ks: list[Kernel], plain: list[Kernel]) -> list[Kernel]:
    """``ks`` (a step's kernels as an engine of
    :data:`~mlacalc.cost.compressed.SELECTING_LOGITS` runs them) with the ``indexer_scores`` of
    each layer that dropped its own (no query selects) put back from ``plain`` (the same step
    without the engine's rules, whose logits kernel is the engine's), before that layer's
    top-k; a layer that keeps its logits, or has none in ``plain``, is left as it is."""
    want = _layer_logits(plain)
    out: list[Kernel] = []
    seen, layer = False, 0
    for k in ks:
        if k.name == "indexer_scores":
            seen = True
        elif k.name == "indexer_topk":
            put = want[layer] if layer < len(want) else None
            if not seen and put is not None:
                out.append(put)
            seen, layer = False, layer + 1
        out.append(k)
    return out


def _keyed(kernels: list[Kernel]) -> list[tuple[tuple[str, int], Kernel]]:
    """Kernels keyed by name and occurrence (a model with layer kinds repeats names)."""
    seen: dict[str, int] = {}
    out = []
    for k in kernels:
        i = seen.get(k.name, 0)
        seen[k.name] = i + 1
        out.append(((k.name, i), k))
    return out


@lru_cache(maxsize=64)
def _templates(
    m: ModelConfig, weight_dtype: str, kv_layout: KVLayout, engine: str = ""
) -> tuple[_Template, ...]:
    """The model step's kernels (:func:`mlacalc.cost.model_step.step_kernels`, as ``engine``
    runs them) as affine templates, in the order a layer runs them: the decode step's, with
    the prompt's merged in where both phases run the same kernel (name, kind and weights); the
    routed experts apart."""

    def run(phase: str, seq_len: int, batch: int, q_len: int | None = None) -> list[Kernel]:
        def of(e: str) -> list[Kernel]:
            return step_kernels(
                fit_m,
                phase,  # type: ignore[arg-type]
                seq_len,
                batch,
                q_len,
                causal=True,
                weight_dtype=weight_dtype,
                kv_dtype=kv_layout,
                engine=e,
            )

        ks = of(engine)
        # a template holds a prompt's logits at every size: the rows where none selects
        # drop them (_indexer_specs)
        return _with_logits(ks, of("")) if engine in SELECTING_LOGITS else ks

    cap, period, csa, chunk = _cap(m), _period(m), _csa(m), _scan_chunk(m)
    points = _prefill_points(cap, period, chunk, _expands_prefix(m))
    # a chunked core is read as a full one (its reference steps within one chunk; a chunk
    # shorter than them read from the model with a chunk as long) and driven by its own
    # chunk's keys and pairs in the served step (StepModel._from_templates)
    top = max(k for _, k in (*points, *_decode_points(cap, period)))
    C = m.attention_chunk_size
    fit_m = m.with_changes(attention_chunk_size=top) if C and top > C else m
    dec = [_keyed(run("decode", s, b)) for b, s in _decode_points(cap, period)]
    pre = [
        _keyed(run("prefill", keys, 1) if q == keys else run("chunk", keys, 1, q))
        for q, keys in points
    ]
    for lists in (dec, pre):
        if len({tuple(key for key, _ in ks) for ks in lists}) != 1:  # pragma: no cover
            raise AssertionError("the model step's kernels change with the step's size")
    pre_by_key = {key: [ks[i][1] for ks in pre] for i, (key, _) in enumerate(pre[0])}
    chunked = _chunked_cores(fit_m, run)
    whole = {}
    if any(_scan_kernel(key[0]) for key, _ in pre[0]):
        whole = _whole_chunk_figures(pre[0], _keyed(run("prefill", chunk - 1, 1)))

    def chunk_of(key: tuple[str, int], ref: Kernel) -> int:
        return m.attention_chunk_size if key in chunked and "n_heads" in ref.shape else 0

    def solve_prompt(key: tuple[str, int], ref: Kernel) -> list[Coef]:
        flat = bool(csa) and key[0] == "indexer_topk"
        return _solve_prefill(pre_by_key[key], window(ref), cap, points, csa,
                              _scan_kernel(key[0]), flat, _block_of(m, window(ref)))  # fmt: skip

    no_dec: list[Coef] = [(0.0, 0.0, 0.0, 0.0)] * 5
    no_pre: list[Coef] = [(0.0, 0.0, 0.0, 0.0, 0.0, 0.0)] * 5

    def make(
        key: tuple[str, int], ref: Kernel, phases: str, d: list[Coef], p: list[Coef]
    ) -> _Template:
        """A template from decode (``d``) and prompt (``p``) coefficients of FLOPs, bytes
        and elements; the fixed part once."""
        f, b, e, r, g = (
            (d[i][0] + p[i][0], d[i][1], p[i][1], d[i][2], d[i][3], *p[i][2:]) for i in range(5)
        )
        return _Template(
            ref.name,
            ref.kind,
            ref.dtype,
            _part(ref.name),
            ref.calls,
            phases,
            window(ref),
            f,
            b,
            e,
            r,
            g,
            dict(ref.shape),
            kv_heads.get(key, m.num_key_value_heads) if ref.name == "kv_proj" else 0,
            whole.get(key, ""),
            chunk_of(key, ref),
        )

    def window(ref: Kernel) -> int:
        return int(ref.shape.get("window", 0) or 0) if "n_heads" in ref.shape else 0

    # each kv_proj's K/V heads: those of the core that reads its rows, the next "attention" of
    # the step (a kind's kernels run together; an indexer's scores may come between)
    kv_heads: dict[tuple[str, int], int] = {}
    pending: list[tuple[str, int]] = []
    for key, ref in dec[0] + pre[0]:
        if key[0] == "kv_proj":
            pending.append(key)
        elif key[0] == "attention" and "n_kv" in ref.shape:
            kv_heads.update((k, int(ref.shape["n_kv"])) for k in pending)
            pending = []

    out: list[_Template] = []
    used: set[tuple[str, int]] = set()
    for i, (key, ref) in enumerate(dec[0]):
        if ref.kind == "moe":
            continue
        d = _solve_decode([ks[i][1] for ks in dec], window(ref), cap, period)
        ps = pre_by_key.get(key)
        if key[0] in _PER_SEQUENCE:
            # one row per sampled sequence: the decode coefficients (the prompt step's batch
            # of one does not separate the fixed part from the per-sequence one)
            out.append(make(key, ref, "both", d, no_pre))
            used.add(key)
            continue
        if ps is not None and ps[0].kind == ref.kind:
            p = solve_prompt(key, ps[0])
            same_weights = d[0][0] == p[0][0] and d[1][0] == p[1][0]
            # one kernel class (a linear layer's conv and delta rule run another kernel for
            # a prompt than for one token a sequence)
            same_class = variant_of(ref.kind, ref.shape) == variant_of(ps[0].kind, ps[0].shape)
            if same_weights and same_class and not any(any(c[2:]) for c in d[:3] + p[:3]):
                # the same kernel in both phases: its weights once, each phase's tokens
                out.append(make(key, ref, "both", d, [(0.0, *c[1:]) for c in p]))
                used.add(key)
                continue
        out.append(make(key, ref, "decode", d, no_pre))
    # the prompt's own kernels (MLA's expanded K/V and its core), after the kernel they
    # follow in the prompt step
    for i, (key, ref) in enumerate(pre[0]):
        if key in used or ref.kind == "moe":
            continue
        prompt = solve_prompt(key, ref)
        t = make(key, ref, "prefill", no_dec, prompt)
        before = {k for k, _ in pre[0][:i]}
        at = max((j + 1 for j, x in enumerate(out) if (x.name, 0) in before), default=0)
        out.insert(at, t)
    return tuple(out)


@lru_cache(maxsize=256)
def _stage_counts(m: ModelConfig, pp: int) -> tuple[tuple[int, int], ...]:
    """(dense layers, MoE layers) of each of ``pp`` pipeline stages."""
    return tuple(
        (sum(not m.is_moe_layer(i) for i in r), sum(m.is_moe_layer(i) for i in r))
        for r in stage_layers(m, pp)
    )


@dataclass
class Spec:
    """One kernel of a layer (or of the head), over the evaluated steps (arrays)."""

    name: str
    kind: str
    dtype: str
    part: str  # "layer", "dense_ffn", "moe_ffn", "embed", "head", "p2p"
    flops: np.ndarray
    bytes: np.ndarray
    shape: dict[str, np.ndarray] = field(default_factory=dict)
    comm: bool = False
    n_gpus: int = 1
    network: bool = False
    calls: int = 1  # the calls it makes in the whole step (layers of its kind)


@dataclass(frozen=True)
class StepTimes:
    """Times of the evaluated steps (arrays), by part, and the per-kernel breakdown."""

    seconds: np.ndarray  # one token's pass through every stage (a step's latency)
    stage_seconds: np.ndarray  # the slowest stage (what limits the step rate under PP)
    compute_s: np.ndarray
    comm_s: np.ndarray
    kernels: list[dict[str, Any]]


def _profile_engine(profile: Any) -> str | None:
    """The engine of ``profile`` (a :class:`~mlacalc.timemodel.profile.Profile`, or a name or
    path the time model loads, :func:`~mlacalc.timemodel.profile.load_profile`), so the step's
    kernels and their classes are one engine's; None without a profile or for the roofline."""
    if profile is None or (isinstance(profile, str) and profile.strip() == ROOFLINE):
        return None
    return getattr(load_profile(profile), "engine", None)


def _refuse_negative(name: str, flops: Any, nbytes: Any) -> None:
    """An internal error where a template gives a kernel negative work at an evaluated step.
    Its coefficients may be negative one by one (a per-token term less a per-key one: DSA's
    top-k, a scan's state), never their sum at a step: :func:`_fit` solves its reference
    steps exactly, so a kernel not affine in the drivers is interpolated between them
    silently (ed47a94's first cut: kv_b_proj at -50,000,896 B, NaN plans). Less than one
    FLOP or byte below zero is rounding."""
    for what, x in (("FLOPs", flops), ("bytes", nbytes)):
        low = float(np.min(x)) if np.size(x) else 0.0
        if low < -1.0:
            raise RuntimeError(
                f"the serving step's template of kernel {name!r} gives {low:,.0f} {what} at a "
                "step: its work is not affine in the drivers it was fitted on "
                "(mlacalc.serving.gpu_step._templates)"
            )


def _arr(x: Any) -> np.ndarray:
    return np.atleast_1d(np.asarray(x, dtype=np.float64))


def routed_experts_class(
    m: ModelConfig, weight_dtype: str | None, component_dtypes: dict[str, str] | None = None
) -> str | None:
    """The class of a model step's routed-experts MoE kernel, as :class:`StepModel` builds it
    (``weight_dtype`` None: as the checkpoint stores them; an ``experts`` component's format
    over it); None for a model without routed experts."""
    if not m.num_moe_layers:
        return None
    components = kept_components(m, weight_dtype, component_dtypes or {})
    if "experts" in components:  # the experts in a format of their own
        return format_class(components["experts"], True)
    if weight_dtype is None and checkpoint_stored(m):
        return stored_experts(m)[1]
    return weight_gemm_class(canonical_dtype(weight_dtype or m.weights_dtype), "bf16")


class StepModel:
    """The per-GPU kernels of one model under one layout, weight dtype (None: as a quantized
    checkpoint stores the weights, :func:`mlacalc.cost.model_step.step_kernels`) and KV layout."""

    def __init__(
        self,
        m: ModelConfig,
        lay: Layout,
        weight_dtype: str | None,
        kv_layout: KVLayout,
        hw: HardwareSpec,
        profile: Any = None,
        routing_imbalance: float = 1.0,
        fp8_dispatch: bool | None = None,
        routing: str = "random",
        expert_skew: float = 0.0,
        rebalance: bool | None = None,
        scheduler: Scheduler | None = None,
        component_dtypes: dict[str, str] | None = None,
        engine: str | None = None,
        moe_backend: str | None = None,
    ):
        self.m, self.lay, self.hw, self.profile = m, lay, hw, profile
        #: the serving engine whose kernels run (None: the profile's, a profile named or given
        #: by path as the time model loads it, else the device's default: TensorRT-LLM, SGLang
        #: on AMD, as plan names it)
        self.engine = engine or _profile_engine(profile) or default_engine(hw)
        #: new tokens a sequence up to which a prompt runs the engine's MLA decode path (0:
        #: never; :func:`mlacalc.timemodel.mla_time.step_decode_path_tokens`)
        self.decode_path_tokens = (
            step_decode_path_tokens(m, self.engine, device_figures(hw), kv_layout)
            if hw.kind == "gpu"
            else 0
        )
        #: weight formats of named components over the base (mlacalc.serving.precision)
        # (the embedding and head kept in their stored format under a dtype asked)
        self.components = kept_components(m, weight_dtype, component_dtypes or {})
        #: the format the model step builds the head in (None: the weight dtype)
        self.head_kept = kept_head_format(m, weight_dtype)
        #: the engine's host work around each step (mlacalc.serving.scheduler)
        self.scheduler = scheduler or Scheduler()
        #: how a step's copies spread over the expert ranks (:mod:`mlacalc.serving.ranks`):
        #: ``random`` or ``balanced``, the experts' popularity (Zipf exponent) and whether the
        #: placement is rebalanced (EPLB; by default when redundant experts are placed)
        self.routing = routing
        self.expert_skew = float(expert_skew)
        self.rebalance = rebalanced(lay.redundant_experts, rebalance)
        self.placement = (
            placement_imbalance(
                m.n_routed_experts,
                lay.ep,
                lay.redundant_experts,
                self.expert_skew,
                self.rebalance,
            )
            if m.num_moe_layers
            else 1.0
        )
        #: no weight dtype chosen: the weights as the checkpoint stores them
        # (mlacalc.cost.model_step)
        self.stored = weight_dtype is None and checkpoint_stored(m)
        self.w_dtype = canonical_dtype(weight_dtype or m.weights_dtype)
        self.w_bytes = dtype_bits(self.w_dtype) / 8
        # the class of the weights' format, as mlacalc.cost.model_step's (the time model runs the
        # kernel
        # the device has for it: a dequantizing weight-only GEMM where its tensor cores lack it)
        self.gemm_dtype = weight_gemm_class(self.w_dtype, "bf16")
        self.imbalance = float(routing_imbalance)
        #: the routed experts' MoE class (None: no routed experts) and whether TensorRT-LLM
        #: runs them on TensorRT-LLM-gen's MoE (``moe_backend`` "trtllm-gen" where it applies:
        #: mlacalc.timemodel.moe_backend; elsewhere the class as it was)
        self.moe_dtype = routed_experts_class(m, weight_dtype, component_dtypes)
        self.moe_backend = moe_backend
        self.gen_moe = self.moe_dtype is not None and runs_trtllm_gen(
            moe_backend, self.engine, hw, self.moe_dtype
        )
        self.fp8_dispatch = self.w_dtype.startswith("fp8") if fp8_dispatch is None else fp8_dispatch
        self.d = m.hidden_size
        self.kv_row = kv_cache(m, 1, 1, kv_layout, None, False).row_bytes  # one token, one layer
        # a DeepSeek-V4 layer's kernels as self.engine runs them (cost.compressed)
        w = None if self.stored else self.w_dtype
        self.templates = _templates(m, w, kv_layout, self.engine)
        self.scan_chunk = _scan_chunk(m)
        self.sharded = [self._sharded(t) for t in self.templates]
        #: each template's weight class where a component's format replaces the base one
        self.formats: list[str | None] = [
            self._reformat(t, c) for t, c in zip(self.templates, self.sharded)
        ]
        self.stage_counts = _stage_counts(m, lay.pp)
        #: calls of a kernel of each part in the whole step (the collectives of a part)
        self.part_calls = {
            "layer": m.num_hidden_layers,
            "dense_ffn": sum(c[0] for c in self.stage_counts),
            "moe_ffn": sum(c[1] for c in self.stage_counts),
            "embed": 1,
            "head": 1,
            "p2p": lay.pp - 1,
        }

    # ------------------------------------------------------------------ kernel builders
    def _base_bits(self, component: str) -> float:
        """Bits per weight of a component in the base format: the checkpoint's own (its
        bytes over its parameters, scales included) or the weight dtype's."""
        if self.stored:
            part = {
                "experts": "moe_routed_experts",
                "shared_experts": "moe_shared_experts",
                "head": "lm_head",
                "embeddings": "embedding",
            }.get(component, component)
            params, nbytes = (checkpoint_part_bytes(self.m) or {}).get(part, (0, 0))
            if params:
                return 8.0 * nbytes / params
        elif component == "head" and self.head_kept is not None:
            return format_bits(self.head_kept)  # the model step's head (kept_head_format)
        return float(dtype_bits(self.w_dtype))

    def _reformat(self, t: _Template, coefs: tuple[list[float], ...]) -> str | None:
        """A GEMM whose component has a format of its own: its weights' bytes (the fixed
        part of its bytes) at that format's bits, and the class it then runs in."""
        comp = component_of(t.name, t.part)
        fmt = self.components.get(comp) if comp else None
        if comp == "head" and self.m.tie_word_embeddings:  # the head reads the embedding's table
            fmt = self.components.get("embeddings")  # in its format (precision._check_present)
        if fmt is None or t.kind != "gemm" or coefs[1][0] <= 0:
            return None
        coefs[1][0] *= format_bits(fmt) / self._base_bits(comp)
        return format_class(fmt)

    def _sharded(self, t: _Template) -> tuple[list[float], ...]:
        """A template's FLOPs, bytes, elements, rows and groups coefficients on this GPU
        under tensor parallelism (see :data:`COLUMN`, :data:`ROW`, :data:`HEADS`), and its
        fixed shape figures."""
        f, b, e = list(t.flops), list(t.bytes), list(t.elements)
        r, g, shape = list(t.rows), list(t.groups), dict(t.shape)
        tp = self.lay.tp
        state = _state_share(self.m, t.name, tp)  # a Mamba layer's kernel: its rank's share
        heads = t.name in HEADS or (t.name.startswith("linear_") and t.name not in COLUMN | ROW)
        heads = heads or state is not None
        if tp == 1:
            pass
        elif t.name == "q_pad":  # the core's padded query: a rank's heads padded again
            h = self.m.num_attention_heads
            share = padded_heads(math.ceil(h / tp)) / padded_heads(h)
            f, b, e = ([x * share for x in c] for c in (f, b, e))
        elif t.kind == "gemm" and (t.name in COLUMN | ROW or t.name == "kv_proj"):
            n, k, groups = shape["n"], shape["k"], shape["groups"]
            if t.name == "kv_proj":  # its kind's K/V heads: split up to n_kv ranks, then whole
                dim, share = "n", float(kv_head_share(t.n_kv, tp))
            else:
                dim, share = ("n" if t.name in COLUMN else "k"), state or 1 / tp
            act = (k + n) * groups * ACT  # per token, in and out
            kept = (k + n * share if dim == "n" else k * share + n) * groups * ACT
            f = [x * share for x in f]
            b[0] *= share
            per_key = b[5] and dim == "n"  # a chunk's kv_b_proj: its output a key
            for i in (1, 2):  # per token: the split activations and the cache rows written
                if i == 2 and per_key:
                    continue  # its prompt tokens' latent input alone, read whole
                b[i] = kept + (b[i] - act) * share if b[i] else 0.0
            if per_key:  # each key's latent row read whole, its expansion split
                b[5] -= n * groups * ACT * (1 - share)
            shape[dim] = math.ceil(shape[dim] * share)
        elif heads and "n_heads" in shape:  # an attention core: heads split, rows as K/V heads
            n_kv = shape["n_kv"]
            rows = float(kv_head_share(n_kv, tp))  # whole K/V heads, as kv_proj's
            share, local = 1 / tp, math.ceil(shape["n_heads"] / tp)
            if shape.get("sparse"):
                # DeepSeek-V4's sparse core takes a rank's query heads 64 at a time
                # (cost.compressed.padded_heads): the template runs the model's heads padded,
                # a rank its own share of them padded again (V4-Pro at TP8: 16 heads, run as 64)
                local = padded_heads(math.ceil(self.m.num_attention_heads / tp))
                share = local / shape["n_heads"]
            f = [x * share for x in f]
            # per token and per row the heads' share; the K/V rows (3-5) as the KV heads
            b = [x * (rows if 3 <= i < 6 else share) for i, x in enumerate(b)]
            shape["n_heads"] = local
            shape["n_kv"] = round(n_kv * rows)
        elif heads:  # per-head products and element-wise work: all of it split
            if state:  # a Mamba layer's: its rank's heads (channels, groups) exactly
                f, b, e, g = ([x * state for x in c] for c in (f, b, e, g))
            else:
                f, b, e, g = ([x / tp for x in c] for c in (f, b, e, g))
            for fld in ("channels", "heads"):  # a linear layer's conv channels, value heads
                if fld in shape:
                    n = shape[fld]  # a Mamba layer's: its rank's channels exactly
                    shape[fld] = round(n * state) if state else math.ceil(n / tp)
        # else replicated: the latent and query down-projections, router, norms, indexer
        return f, b, e, r, g, shape

    def _comm(
        self,
        out: list[Spec],
        name: str,
        kind: str,
        part: str,
        msg: np.ndarray,
        n: int,
        network: bool = False,
        calls: int | None = None,
        **fields: np.ndarray | float,
    ) -> None:
        """A collective over ``n`` GPUs; ``msg`` is one rank's message as
        :func:`mlacalc.serving.comm.comm_seconds` counts it (its share for all-gather and
        reduce-scatter), ``fields`` the kernel model's extra shape fields; ``calls``: in the
        whole step (by default every kernel's of its part)."""
        if n > 1:
            # the kernel model's message: the full per-rank buffer for all-gather and
            # reduce-scatter (as the measured NCCL tables count it), else what the rank sends
            full = msg * n if kind in ("all_gather", "reduce_scatter") else msg
            shape = {"message_bytes": full, "n_gpus": np.full_like(msg, n)}
            shape.update({k: v + msg * 0.0 for k, v in fields.items()})
            out.append(
                Spec(
                    name,
                    kind,
                    "fp8" if kind == "dispatch" and self.fp8_dispatch else "bf16",
                    part,
                    msg * 0.0,
                    msg,
                    shape,
                    comm=True,
                    n_gpus=n,
                    network=network,
                    calls=self.part_calls[part] if calls is None else calls,
                )
            )

    def _x_proj_reduce(self, out: list[Spec], tokens: np.ndarray) -> None:
        """Mamba-1's ``x_proj`` is row parallel under tensor parallelism (vLLM's
        ``MambaMixer``): each rank's partial step-size rank, B and C (``R + 2N`` a token) are
        all-reduced before the step-size norms and ``dt_proj``, once a Mamba-1 layer."""
        calls = sum(t.calls for t in self.templates if t.name == "mamba1_x_proj")
        if calls:
            width = mamba1_shape(self.m).x_width
            msg = tokens * width * ACT
            name = "all_reduce after Mamba-1 x_proj (TP)"
            self._comm(out, name, "all_reduce", "layer", msg, self.lay.tp, calls=calls)

    def _from_templates(self, out: list[Spec], dec_B, dec_q, dec_S, pf_N, pf_q, pf_pre) -> None:
        """The model step's kernels (:func:`_templates`) sharded on this GPU, over the rows."""
        T_dec, T_pf = dec_B * dec_q, pf_N * pf_q
        logits = T_dec + pf_N  # prefill needs the last token's logits
        cap, csa = _cap(self.m), _csa(self.m)
        one = np.ones_like(dec_B)
        zero = 0.0 * one
        ctx = pf_pre + pf_q
        # prompts the engine runs down its MLA decode path (vLLM's of up to its decode
        # backend's threshold: mla_time.step_decode_path_tokens): their tokens take the
        # absorbed kernels (q_absorb, o_absorb, the latent core over their cached rows) where
        # the others take the expanded ones (kv_b_proj, k_assemble, the prompt core)
        latent = (pf_q <= self.decode_path_tokens) * 1.0
        T_lat = T_pf * latent
        drivers: dict[tuple[int, int], tuple[tuple[Any, ...], tuple[Any, ...]]] = {}

        def rows_of(window: int, chunk: int = 0) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
            """The drivers of a template's coefficients (FLOPs, then bytes and sizes); a
            chunked core's (``chunk``) over the keys of the chunks its queries touch."""
            if (window, chunk) not in drivers:
                S_eff = _keys_seen(dec_q, dec_S, window, chunk)
                keys_w = _keys_seen(pf_q, ctx, window, chunk)
                rows_dec = dec_B * S_eff
                full_pf = T_pf * keys_w
                capped = dec_B * np.minimum(dec_S, cap) if cap else dec_B * dec_S
                sel_pf = T_pf * np.minimum(ctx, cap) if cap else zero
                if csa:  # DeepSeek-V4's CSA: each query's own pooled keys, at most top-k
                    sel_pf = pf_N * (_pooled(ctx, *csa) - _pooled(pf_pre, *csa))
                pairs_pf = pf_N * _causal_pairs(pf_q, pf_pre, window)
                block = _block_of(self.m, window)
                if block:
                    pairs_pf = pf_N * _block_pairs(pf_q, pf_pre, *block)
                if chunk:
                    pairs_pf = pf_N * _chunked_pairs(pf_q, pf_pre, chunk)
                keys_pf = pf_N * keys_w
                per_dec = (rows_dec * dec_q, capped * dec_q)
                if self.m.sparse_block_size is not None:  # msa decode: each query's own keys
                    B, T = self.m.sparse_block_size, self.m.sparse_topk_blocks
                    per_dec = (per_dec[0], dec_B * _block_pairs(dec_q, dec_S - dec_q, B, T))
                drivers[(window, chunk)] = (
                    (one, T_dec, T_pf, *per_dec, pairs_pf, full_pf, sel_pf, keys_pf),
                    (one, T_dec, T_pf, rows_dec, capped, keys_pf, full_pf, sel_pf, zero),
                )
            return drivers[(window, chunk)]

        def lin(coef: Coef, x: tuple[Any, ...], on: Any) -> Any:
            total = zero
            for c, v in zip(coef, x):
                if c:
                    total = total + c * v
            return on * total

        def latent_core(t: _Template, f: Coef, b: Coef, shape: dict[str, Any]) -> Spec:
            """The decode core's call over the decode-path prompts (its own call beside the
            decoding sequences'): their tokens, causal pairs and cached rows on the decode
            template's coefficients, the prompts' sequences as the kernel's."""
            pairs = pf_N * _causal_pairs(pf_q, pf_pre, 0) * latent
            x_f = (zero, T_lat, zero, pairs, zero, zero, zero, zero, zero)
            x_b = (zero, T_lat, zero, pf_N * ctx * latent, zero, zero, zero, zero, zero)
            on = T_lat > 0
            sh = {k: float(v) * one for k, v in shape.items()}
            sh.update(batch=pf_N * on, q_len=pf_q * one, kv_len=ctx * one, causal=one)
            return Spec(t.name, t.kind, t.dtype, t.part, lin(f, x_f, on), lin(b, x_b, on), sh,
                        calls=t.calls)  # fmt: skip

        for t, (f, b, e, r, g, shape), fmt in zip(self.templates, self.sharded, self.formats):
            per_pair, per_row = rows_of(t.window, t.chunk)
            if csa and t.name == "indexer_topk":  # V4's: the whole sequence's top-k a token
                per_row = (*per_row[:7], T_pf * _flat_selected(ctx, cap), *per_row[8:])
            if _scan_kernel(t.name):  # a prompt's state read once a sequence with a prefix
                per_row = (*per_row[:5], pf_N * (pf_pre > 0), *per_row[6:])
            if t.whole:  # work in whole chunks of the scan: the prompt's tokens rounded up
                T_whole = pf_N * np.ceil(pf_q / self.scan_chunk) * self.scan_chunk
                if "f" in t.whole:
                    per_pair = (*per_pair[:2], T_whole, *per_pair[3:])
                if "b" in t.whole:
                    per_row = (*per_row[:2], T_whole, *per_row[3:])
            core = "n_heads" in shape
            if self.decode_path_tokens and t.phases == "prefill":  # the expanded prompts'
                keep = 1.0 - latent
                per_pair = tuple(x * keep if i else x for i, x in enumerate(per_pair))
                per_row = tuple(x * keep if i else x for i, x in enumerate(per_row))
            elif self.decode_path_tokens and t.phases == "decode" and not core:
                per_pair = (per_pair[0], T_dec + T_lat, *per_pair[2:])
                per_row = (per_row[0], T_dec + T_lat, *per_row[2:])
            if self.decode_path_tokens and t.phases == "decode" and core:
                out.append(latent_core(t, f, b, shape))
            if t.name in _PER_SEQUENCE:
                per_pair = per_row = (one, logits, zero, zero, zero, zero, zero, zero, zero)
                on = logits > 0
            else:
                T_pre = T_pf - T_lat if t.phases == "prefill" else T_pf
                T_d = T_dec + T_lat if t.phases == "decode" and not core else T_dec
                on = {"both": T_dec + T_pf, "decode": T_d, "prefill": T_pre}[t.phases] > 0
            flops, nbytes = lin(f, per_pair, on), lin(b, per_row, on)
            _refuse_negative(t.name, flops, nbytes)
            if t.kind == "gemm":
                sh = {k: np.full_like(one, float(shape[k])) for k in ("n", "k")}
                sh["m"] = lin(r, per_row, on)
                sh["groups"] = lin(g, per_row, on)
            elif "n_heads" in shape:  # an attention core: its phase's sequences
                decode = t.phases == "decode"
                sh = {k: float(v) * one for k, v in shape.items()}
                sh.update(
                    batch=dec_B if decode else pf_N,
                    q_len=dec_q * one if decode else pf_q * one,
                    kv_len=_attended(shape, dec_S if decode else ctx) * one,
                    causal=one * (0.0 if decode else 1.0),  # decode attends every key
                )
                if "batch_keys" in shape:  # SGLang's prompt logits: all its prompts' keys
                    seen = np.maximum(np.floor(ctx / shape.get("pooled_ratio", 1)), 1)
                    sh["batch_keys"] = zero if decode else pf_N * seen  # (words.kernels)
                if shape.get("sparse"):  # DeepSeek-V4's core: each query's keys by index
                    sh["causal"] = float(shape["causal"]) * one  # (cost.compressed: none)
                if shape.get("rows_per_query") and not decode:
                    # DeepSeek-V4's prompt indexer (cost.compressed): a unit a (query, head)
                    # row over the pooled keys each query sees in whole blocks, their mean
                    # over the chunk (cost.compressed.walked_logit_keys)
                    rate = shape["pooled_ratio"]
                    walked = logit_blocks_below(ctx, rate) - logit_blocks_below(pf_pre, rate)
                    seen = LOGIT_KEY_BLOCK * walked / np.maximum(pf_q, 1)
                    sh.update(
                        q_len=pf_q * shape["rows_per_query"] * one,
                        kv_len=np.maximum(seen, 1) * one,
                        causal=zero,
                    )
            else:
                sh = {"elements": lin(e, per_row, on)}
                if "mhc" in shape:  # DeepSeek-V4's hyper-connections: their kernel class
                    sh["mhc"] = float(shape["mhc"]) * one
                if "linear" in shape:  # a linear layer's conv or delta rule: its class
                    decode = t.phases == "decode"
                    seqs = (dec_B if decode else pf_N) * on
                    q = one if decode else pf_q
                    sh.update(_linear_fields(shape, sh["elements"], seqs, q, one))
            # a GEMM of the weights in the weight dtype's class; the router keeps its own
            # (16 bits under a narrower dtype, as memory sizes it: model_step.KEPT_GEMMS)
            weighted = (
                t.kind == "gemm"
                and b[0] > 0
                and not self.stored
                and t.name not in KEPT_GEMMS + STATE_GEMMS
            )
            dtype = fmt or (self.gemm_dtype if weighted else t.dtype)
            spec = Spec(t.name, t.kind, dtype, t.part, flops, nbytes, sh, calls=t.calls)
            rows = (dec_B, dec_q, dec_S, pf_N, pf_q, pf_pre)
            out += self._indexer_specs(t, spec, shape, on, rows, csa)

    def _indexer_specs(
        self, t: _Template, spec: Spec, shape: dict[str, Any], on: Any, rows: tuple, csa: Any
    ) -> list[Spec]:
        """``spec`` as the step runs it: an indexer's pass over its prompts' whole ragged
        logits matrix and an engine's top-k of an indexer as the tables' rows are mapped, any
        other kernel as it is. ``rows``: the decode and prompt drivers (dec_B, dec_q, dec_S,
        pf_N, pf_q, pf_pre)."""
        dec_B, dec_q, dec_S, pf_N, pf_q, pf_pre = rows
        decode = t.phases == "decode"
        if t.name == "indexer_ragged_logits":  # its prompts' whole matrix, as mapped
            topk = self.m.index_topk
            rag = dsa_ragged_logits_bytes(pf_N, pf_q, pf_pre, topk, decode, self.engine)
            return [dataclasses.replace(spec, flops=0.0 * on, bytes=rag * on)]
        if csa and t.name == "indexer_scores" and not decode and self.engine in SELECTING_LOGITS:
            # no logits kernel where no query of the prompt selects, as mapped
            # (no FLOPs and no bytes, as _engine_topk's "none"; ``calls`` counts the step's
            # layers, not rows, and stays)
            sel = engine_topk(pf_N, pf_q, pf_pre, *csa, False)[0]["units"] > 0
            return [
                dataclasses.replace(
                    spec, flops=np.where(sel, spec.flops, 0.0), bytes=np.where(sel, spec.bytes, 0.0)
                )
            ]
        if "topk_kernel" not in shape:
            return [spec]
        # an engine's top-k of an indexer, as mapped
        seqs, q, pre = (dec_B, dec_q, dec_S - dec_q) if decode else (pf_N, pf_q, pf_pre)
        if csa:  # DeepSeek-V4's CSA (FLAT_TOPK_ENGINES, ROW_TOPK_PROMPT)
            return _engine_topk(spec, v4_topk(self.engine, seqs, q, pre, *csa, decode), on)
        # a DSA layer's (every engine)
        topk = dsa_topk(seqs, q, pre, self.m.index_topk, decode, self.engine)
        return _engine_topk(spec, topk, on, keep=False)

    def _sampling(self, out: list[Spec], logits: np.ndarray) -> None:
        """What turns the head's logits into tokens, per sampled position: under tensor
        parallelism the vocabulary-split logits are gathered (each rank holds ``V / tp`` of
        every row), then the sampler reads every row of ``V`` logits once (softmax over the
        vocabulary, :data:`~mlacalc.words.vocab.SOFTMAX_FLOPS_PER_ELEMENT` per logit; top-k/top-p
        are comparisons) and writes one token id per row."""
        V = self.m.vocab_size
        if not V:
            return
        self._comm(
            out,
            "all_gather of logits (TP)",
            "all_gather",
            "head",
            logits * math.ceil(V / self.lay.tp) * ACT,
            self.lay.tp,
        )
        elements = logits * V
        out.append(
            Spec(
                "sampling",
                "elementwise",
                "bf16",
                "head",
                SOFTMAX_FLOPS_PER_ELEMENT * elements,
                elements * ACT + logits * 4,  # the logits in, a 32-bit token id out per row
                {"elements": elements},
                calls=self.part_calls["head"],
            )
        )

    def _moe(self, out: list[Spec], T: np.ndarray, T_moe: np.ndarray, decode: np.ndarray) -> None:
        """The routed experts and their exchange: this GPU's group sends its own ``T``
        tokens; the experts compute the MoE group's, ``T_moe`` per attention group (the
        groups' mean; a synced group that prefills more than the others waits for them at the
        exchange, :mod:`mlacalc.serving.ranks`), the hottest rank's share of them."""
        m, lay, d = self.m, self.lay, self.d
        part = "moe_ffn"
        E, k = m.n_routed_experts, m.num_experts_per_tok
        slots = E + lay.redundant_experts  # experts placed, replicas included
        groups = lay.moe_group // lay.tp  # attention groups feeding the MoE group
        T_grp = T_moe * groups  # distinct tokens entering the MoE group
        local = slots // lay.ep
        expert = expert_shape(m)
        inter = expert.inter // lay.moe_tp
        # the hottest rank's share of the copies over the even one: the experts' popularity
        # and the step's finite sample (mlacalc.serving.ranks), or the user's measured factor,
        # which holds both, where there are expert ranks (ep 1: one rank, every copy its own;
        # a disaggregated plan's ep-1 pool beside an expert-parallel one had been loaded by it)
        hot = self._rank_factor(T_grp * k)
        assign = T_grp * k / lay.ep * hot  # routed copies this GPU computes
        active = np.minimum(local * (1 - (1 - k / slots) ** T_grp), np.maximum(assign, 1.0))
        # the model step's routed-expert kernel on this GPU's share: 2 x weights FLOPs per
        # routed copy, the touched experts' weights read once, each copy in and out once
        flops = 2.0 * assign * expert.weights / lay.moe_tp
        one, moe_dtype = (
            stored_experts(m) if self.stored else (expert.params * self.w_bytes, self.gemm_dtype)
        )
        if "experts" in self.components:  # the experts in a format of their own
            fmt = self.components["experts"]
            one, moe_dtype = expert.params * format_bits(fmt) / 8, format_class(fmt, True)
        nbytes = active * one / lay.moe_tp + assign * 2 * d * ACT
        out.append(
            Spec(
                "routed_experts",
                "moe",
                moe_dtype,
                part,
                flops,
                nbytes,
                {
                    "tokens": T_grp,
                    "hidden": np.full_like(T, d),
                    "inter": np.full_like(T, inter),
                    "experts": np.full_like(T, local),
                    "ep": np.full_like(T, lay.ep),  # vLLM's expert map (moe_time.EP_MAP_MOE)
                    "topk": np.full_like(T, k),
                    "active_experts": active,
                    "max_tokens_per_expert": np.maximum(
                        np.ceil(assign / np.maximum(active, 1.0)),
                        hottest_expert_rows(assign, local, self.routing),
                    ),
                    "gated": np.full_like(T, 1 if expert.gated else 0),
                    # a random routing's experts each get rows spread about their mean, a
                    # balanced one's whole rows (moe_time.ROWS_SPREAD), not every one the mean
                    ROWS_SPREAD: np.full_like(T, 1 if self.routing == "random" else 2),
                    # experts behind DeepEP's exchange (dispatch and combine: EP over more
                    # ranks than TP's): the engine's kernel there, which may not be the one
                    # its plain class times, over the copies the rank receives, and the
                    # routing of the tokens it sends, run before the dispatch
                    # (moe_time.engine_moe_tiles)
                    **(
                        {
                            "deepep": np.ones_like(T),
                            DEEPEP_RECEIVED: assign,
                            DEEPEP_ROUTED: T / lay.tp,
                        }
                        if self._deepep()
                        else {}
                    ),
                    # TensorRT-LLM-gen's MoE chosen (words.kernels.TRTLLM_GEN_MOE)
                    **({TRTLLM_GEN_MOE: np.ones_like(T)} if self.gen_moe else {}),
                },
                calls=self.part_calls[part],
            )
        )
        self._moe_exchange(out, T, decode, slots, hot)

    def _deepep(self) -> bool:
        """Whether the routed experts' exchange is DeepEP's dispatch and combine
        (:meth:`_moe_exchange`: EP over more ranks than TP's group)."""
        return self.lay.ep > 1 and self.lay.moe_group != self.lay.tp

    @property
    def node_groups(self) -> tuple[int, int] | None:
        """``(n_group, topk_group)`` of the model's group-limited routing where its groups
        keep their place on the nodes (:func:`~mlacalc.serving.comm.placed_groups`). None under
        ``routing="balanced"``: the engines' simulated balanced routing (DeepSeek's profile,
        SGLang's perfect-balance runs) draws a token's experts over every expert, from recall
        of SGLang's fake dispatch (random expert ids), no group limit."""
        if self.routing == "balanced":
            return None
        node = self.hw.scale_up_gpus or self.lay.moe_group
        return placed_groups(self.m.routing_groups, self.lay.moe_group, node, self.rebalance)

    def _moe_exchange(
        self, out: list[Spec], T: np.ndarray, decode: np.ndarray, slots: int, hot: np.ndarray
    ) -> None:
        """The routed experts' collectives: an all-reduce under TP alone; the EP exchange
        (dispatch and combine, ``hot`` x the even share on the hottest rank) within a domain or
        over the network; DP-attention without EP's all-gather and reduce-scatter."""
        m, lay, d = self.m, self.lay, self.d
        part, k = "moe_ffn", m.num_experts_per_tok
        if lay.moe_group == lay.tp:
            self._comm(out, "all_reduce after MoE (TP)", "all_reduce", part, T * d * ACT, lay.tp)
        else:
            sent = T / lay.tp  # tp ranks split their group's tokens
            # the GPU holding the busiest experts receives (dispatch) and returns (combine)
            # ``hot`` x the even share: the exchange waits for it
            if lay.ep > 1:
                node = self.hw.scale_up_gpus or lay.moe_group
                if lay.moe_group <= node:
                    # one node: the kernel model's DeepEP exchange (fitted on the measured
                    # one-node tables): low-latency rows (decode) send every routed copy,
                    # normal rows (prompt tokens) a token once per destination rank
                    ranks = distinct_ranks_per_token(slots, k, lay.moe_group)
                    copies = np.where(decode, float(k), ranks)
                    low = decode * 1.0
                    sms = np.where(decode, 0.0, float(DEEPEP_NORMAL_SMS))
                    for kind, nbytes in (
                        ("dispatch", dispatch_bytes(sent, copies, d, self.fp8_dispatch) * hot),
                        ("combine", combine_bytes(sent, copies, d) * hot),
                    ):
                        self._comm(
                            out,
                            f"EP {kind}",
                            kind,
                            part,
                            nbytes,
                            lay.moe_group,
                            tokens=sent,
                            hidden=float(d),
                            topk=float(k),
                            copies=sent * copies * hot,
                            low_latency=low,
                            sms=sms,
                            experts=float(slots),  # the low-latency kernels' SMs
                        )
                else:
                    # across nodes (link model): decode rows (no prompt tokens): DeepEP
                    # low-latency kernels, every routed copy over RDMA; rows with prompt
                    # tokens: normal kernels, one copy per remote node over RDMA (forwarded
                    # over NVLink, concurrently, not counted apart), the remote nodes
                    # bounded by the model's group-limited routing where its groups lie on
                    # the nodes (node_groups)
                    low = decode
                    normal_copies = remote_nodes_per_token(
                        lay.moe_group, node, k, m.n_routed_experts, self.node_groups
                    )
                    for mode, rows, n_copies in (
                        ("low-latency", low, float(k)),
                        ("normal", ~low, normal_copies),
                    ):
                        if not rows.any():
                            continue
                        # the kernel model's shape of the same exchange: the floor of its
                        # time, a call never being faster than over the scale-up link
                        # (time_jobs)
                        kernel = dict(
                            tokens=np.where(rows, sent, 0.0),
                            hidden=float(d),
                            topk=float(k),
                            copies=np.where(rows, sent * n_copies * hot, 0.0),
                            low_latency=rows * (1.0 if mode == "low-latency" else 0.0),
                            sms=0.0 if mode == "low-latency" else float(DEEPEP_NORMAL_SMS),
                            experts=float(slots),
                            n_gpus=float(node),  # the kernel model's group: one domain
                        )
                        self._comm(
                            out,
                            f"EP dispatch ({mode})",
                            "dispatch",
                            part,
                            np.where(
                                rows,
                                dispatch_bytes(sent, n_copies, d, self.fp8_dispatch) * hot,
                                0.0,
                            ),
                            lay.moe_group,
                            network=True,
                            **kernel,
                        )
                        self._comm(
                            out,
                            f"EP combine ({mode})",
                            "combine",
                            part,
                            np.where(rows, combine_bytes(sent, n_copies, d) * hot, 0.0),
                            lay.moe_group,
                            network=True,
                            **kernel,
                        )
            else:
                self._comm(
                    out,
                    "all_gather before MoE (DP-attention)",
                    "all_gather",
                    part,
                    sent * d * ACT,
                    lay.moe_group,
                )
                self._comm(
                    out,
                    "reduce_scatter after MoE (DP-attention)",
                    "reduce_scatter",
                    part,
                    sent * d * ACT,
                    lay.moe_group,
                )
            if lay.tp > 1 and m.n_shared_experts:
                self._comm(
                    out,
                    "all_reduce of shared experts (TP)",
                    "all_reduce",
                    part,
                    T * d * ACT,
                    lay.tp,
                )

    def expert_rank_load(self, tokens: float) -> float | None:
        """The hottest expert rank's routed copies over the even share when ``tokens`` per
        attention group enter a MoE layer (None: no experts shared over ranks)."""
        m, lay = self.m, self.lay
        if not m.num_moe_layers or lay.ep <= 1:
            return None
        copies = np.array([tokens * (lay.moe_group // lay.tp) * m.num_experts_per_tok])
        return float(self._rank_factor(copies)[0])

    def _rank_factor(self, copies: np.ndarray) -> np.ndarray:
        """The hottest expert rank's copies over the even share when ``copies`` routed copies
        enter the MoE group: the user's measured ``routing_imbalance`` where given (a run's
        busiest expert GPU over the mean: the popularity, the placement and the sample all in
        it, so it replaces them rather than multiplying them), else the routing's model
        (:func:`~mlacalc.serving.ranks.routing_factor`); 1 without expert ranks."""
        copies = np.asarray(copies, dtype=np.float64)
        if self.lay.ep <= 1:
            return np.ones_like(copies)
        if self.imbalance != 1.0:
            return np.full_like(copies, self.imbalance)
        return routing_factor(copies, self.lay.ep, self.placement, self.routing)

    def specs(self, dec_B=0, dec_q=1, dec_S=1, pf_N=0, pf_q=1, pf_pre=0, pf_moe=None) -> list[Spec]:
        """Every kernel of the step on this GPU: the model step's, sharded, the routed
        experts of the layout, its collectives and the stage hand-over. ``pf_moe``: the
        prompts per attention group the experts see (the synced groups' mean; by default
        this group's ``pf_N``)."""
        dec_B, pf_N = _arr(dec_B), _arr(pf_N)
        n = max(len(dec_B), len(pf_N), 1 if pf_moe is None else len(_arr(pf_moe)))
        z = np.zeros(n)
        dec_B, pf_N = dec_B + z, pf_N + z
        pf_moe = pf_N if pf_moe is None else _arr(pf_moe) + z
        dec_q, dec_S, pf_q, pf_pre = (_arr(x) + z for x in (dec_q, dec_S, pf_q, pf_pre))
        T = dec_B * dec_q + pf_N * pf_q
        T_moe = dec_B * dec_q + pf_moe * pf_q
        # rows without prompt tokens on any synced group (the exchange's mode is the set's)
        decode = (pf_N == 0) & (pf_moe == 0)
        out: list[Spec] = []
        self._from_templates(out, dec_B, dec_q, dec_S, pf_N, pf_q, pf_pre)
        self._sampling(out, dec_B * dec_q + pf_N)
        act = T * self.d * ACT
        self._comm(out, "all_reduce after attention (TP)", "all_reduce", "layer", act, self.lay.tp)
        self._x_proj_reduce(out, T)
        if self.part_calls["dense_ffn"]:
            self._comm(
                out, "all_reduce after FFN (TP)", "all_reduce", "dense_ffn", act, self.lay.tp
            )
        if self.m.num_moe_layers:
            self._moe(out, T, T_moe, decode)
        if self.lay.pp > 1:
            self._comm(out, "p2p to the next stage", "p2p", "p2p", act, 2)
        if not self.scheduler.idle:
            # the host's work (not a kernel: no calls, timed by compose from its rows): the
            # sequences in the step, its tokens and whether it is a decode step
            out.append(
                Spec(
                    "host",
                    HOST,
                    "",
                    "host",
                    dec_B + pf_N,
                    T,
                    {"decode": decode * 1.0},
                    calls=0,
                )
            )
        return out

    # ------------------------------------------------------------------ timing
    def time_specs(self, specs: list[Spec]) -> list[np.ndarray]:
        """Seconds of each spec (one call), as arrays."""
        return time_jobs([(self, specs)], self.profile)[0]

    def kernels(self, **kw: Any) -> list[Kernel]:
        """The kernels of one step (the first row of ``kw``) as
        :class:`mlacalc.words.kernels.Kernel`
        records, each with the calls it makes in the whole step (layers of its kind), for the
        kernel model's :func:`~mlacalc.timemodel.kernel_time.predict_kernels` or any other
        consumer."""
        out = []
        for sp in self.specs(**kw):
            work = sp.bytes[0] if sp.kind == "elementwise" or sp.comm else sp.flops[0]
            if sp.calls and work > 0:
                out.append(
                    Kernel(
                        sp.name,
                        sp.kind,
                        sp.dtype,
                        round(float(sp.flops[0])),
                        round(float(sp.bytes[0])),
                        sp.calls,
                        {k: round(float(v[0])) for k, v in sp.shape.items()},
                    )
                )
        return out

    def _p2p_group(self) -> int:
        """A group size whose link carries the stage hand-over: the network when a stage fills
        whole nodes, the scale-up link otherwise."""
        node = self.hw.scale_up_gpus
        return self.lay.gpus if node and self.lay.stage_gpus >= node and self.lay.gpus > node else 2

    def step(self, overlap: str = "none", **kw: Any) -> StepTimes:
        """The time of the steps ``kw`` describes (see :meth:`specs`); ``overlap="tbo"`` splits
        the step into two micro-batches whose communication hides behind the other's compute."""
        specs = self.specs(**(halved(kw) if overlap == "tbo" else kw))
        return self.compose(specs, self.time_specs(specs), overlap)

    def compose(
        self,
        specs: list[Spec],
        secs: list[np.ndarray],
        overlap: str = "none",
        rows: slice = slice(None),
        breakdown: bool = True,
    ) -> StepTimes:
        """Sum the kernels' times (``rows`` of them) into a step through every stage."""
        parts: dict[str, tuple[Any, Any]] = {}
        stages: dict[str, Any] = {}  # a MoE layer's pieces of the five-stage schedule
        layers = self.m.num_hidden_layers
        host = None
        for sp, t in zip(specs, secs):
            if sp.kind == HOST:
                host = sp
                continue
            # per layer of its part: a layer kernel's share of the layers (its kind's)
            t = t[rows] * (sp.calls / layers if sp.part == "layer" else 1.0)
            c, k = parts.get(sp.part, (0.0, 0.0))
            parts[sp.part] = (c + (0 if sp.comm else t), k + (t if sp.comm else 0))
            if overlap == "tbo" and sp.part in ("layer", "moe_ffn"):
                piece = stage_piece(sp)
                stages[piece] = stages.get(piece, 0.0) + t
                if sp.kind == "dispatch":  # decode rows: the low-latency kernels
                    low = np.asarray(sp.shape.get("low_latency", 0.0))
                    low = np.broadcast_to(low, np.shape(sp.flops))[rows] > 0
                    stages["low"] = stages.get("low", False) | low

        def part(name: str) -> tuple[Any, Any]:
            c, k = parts.get(name, (0.0, 0.0))
            if overlap == "tbo":  # two micro-batches: each one's links hide behind the other's
                return 2 * c, 2 * np.maximum(np.subtract(k, c), 0.0)  # compute; exposed comm
            return c, k

        lc, lk = part("layer")
        dc, dk = part("dense_ffn")
        mc, mk = part("moe_ffn")
        if "low" in stages:  # decode rows of a two-batch-overlap step: the five stages
            sc, sk = five_stage_layer(stages)
            mc = np.where(stages["low"], sc - lc, mc)
            # the MoE part's links: the layer's beside the per-part rule's attention links
            # (``lk``), never below 0 by rounding
            mk = np.where(stages["low"], np.maximum(sk - lk, 0.0), mk)
        ec, ek = part("embed")
        hc, hk = part("head")
        pc, pk = part("p2p")
        stage_times, compute, comm = [], 0.0, 0.0
        last = len(self.stage_counts) - 1
        for si, (nd, nm) in enumerate(self.stage_counts):
            # the embedding on the first stage, the output head on the last (one stage: both)
            c = nd * (lc + dc) + nm * (lc + mc) + (ec if si == 0 else 0) + (hc if si == last else 0)
            k = nd * (lk + dk) + nm * (lk + mk) + (ek if si == 0 else 0) + (hk if si == last else 0)
            if si < last:
                c, k = c + pc, k + pk
            stage_times.append(c + k)
            compute, comm = compute + c, comm + k
        zero = np.zeros(len(specs[0].flops[rows])) if specs else np.zeros(1)
        compute, comm = compute + zero, comm + zero
        total = compute + comm
        stage = np.max(
            np.vstack([np.broadcast_to(x, np.shape(total)) for x in stage_times]), axis=0
        )
        if host is not None:
            # the engine's host work beside (overlap scheduling) or after the GPU's
            launches = sum(sp.calls for sp in specs if sp.kind != HOST)
            whole = 2.0 if overlap == "tbo" else 1.0  # the step's, not one micro-batch's
            h = self.scheduler.host_seconds(
                whole * host.flops[rows],
                whole * host.bytes[rows],
                host.shape["decode"][rows] > 0,
                launches,
            )
            total = self.scheduler.step_seconds(total, h)
            stage = self.scheduler.step_seconds(stage, h)

        kernels = [
            {
                "name": sp.name,
                "kind": sp.kind,
                # the kernel the device runs (fp8 weights without fp8 tensor cores: w8a16)
                "dtype": run_dtype(sp.kind, sp.dtype, self.hw) if not sp.comm else sp.dtype,
                "part": sp.part,
                "calls": sp.calls,
                "flops": sp.flops[rows],
                "bytes": sp.bytes[rows],
                "seconds_per_call": t[rows],
                "seconds": t[rows] * sp.calls,
                "communication": sp.comm,
                # the class variant the time model looked the kernel up by, and its shapes,
                # from which the class its engine runs follows (provenance)
                "variant": _variant(sp),
                "shape": {k: np.asarray(v)[rows] for k, v in sp.shape.items()},
            }
            for sp, t in zip(specs, secs)
            if sp.calls and breakdown
        ]
        return StepTimes(
            np.asarray(total, dtype=float),
            np.asarray(stage, dtype=float),
            np.asarray(compute, dtype=float),
            np.asarray(comm, dtype=float),
            kernels,
        )


#: Kernels of a layer's second attention stage (the attention core and what follows it)
#: in the five-stage decode schedule; the projections before the core are its first.
_ATTENTION_CORE = frozenset(
    {"attention", "o_absorb", "o_proj", "o_a_proj", "o_b_proj", "post_attention_norm", "router"}
)


def stage_piece(sp: Spec) -> str:
    """Which piece of a MoE layer's five-stage schedule a layer or MoE kernel is."""
    if sp.comm:
        return sp.kind if sp.kind in ("dispatch", "combine") else f"{sp.part}_links"
    if sp.part == "layer":
        return "core" if sp.name in _ATTENTION_CORE else "prep"
    if sp.name in _ATTENTION_CORE:
        return "core"
    return "experts" if sp.kind == "moe" else "shared"


def five_stage_layer(pieces: dict[str, Any]) -> tuple[Any, Any]:
    """Compute and exposed links of one MoE layer of a two-batch-overlap decode step: the
    schedule DeepSeek describes for its decode ("we subdivide the attention layer into two
    steps and use a 5-stage pipeline") and SGLang runs with DeepEP's low-latency kernels
    (``operations_strategy._compute_moe_deepseek_blog_decode`` in SGLang 0.4.9: stages
    [attention projections], [attention core, gate], [dispatch send, shared experts],
    [dispatch receive, routed experts, combine send], [combine receive]; micro-batch B runs
    two stages behind A on one compute stream). The low-latency kernels send through the NIC
    and receive through a hook, holding no SMs in between, so one micro-batch's dispatch is
    in flight while its own shared experts and the other's projections run, its combine
    while the other's attention core runs; nothing hides its routed experts' wait for its
    own dispatch, nor a combine the other's core does not cover. Each transfer starts after
    the one before it has been received, so the link never queues, and a micro-batch's half
    of the layer is ``max(shared + projections, dispatch) + experts + max(core, combine)``;
    the layer is two halves. ``pieces`` are one micro-batch's per-layer seconds (``prep``,
    ``core``, ``shared``, ``experts``, ``dispatch``, ``combine``; a TP layout's all-reduces
    as ``layer_links`` and ``moe_ffn_links``, hidden behind their part's compute as before)."""

    def get(key: str) -> Any:
        return pieces.get(key, 0.0)

    prep, core, shared, experts = get("prep"), get("core"), get("shared"), get("experts")
    compute = 2 * (prep + core + shared + experts)
    # each half's links: what its dispatch and combine leave past the compute beside them
    # (``2 half - compute`` as such: written as the two excesses, never below 0 by rounding,
    # where ``2 half - compute`` gave -3.1e-18 s on GB200 EP72, a trial's JSON)
    links = 2 * np.maximum(get("dispatch") - (shared + prep), 0.0)
    links = links + 2 * np.maximum(get("combine") - core, 0.0)
    # the TP all-reduces of the attention and of the shared experts: the per-part rule
    links = links + 2 * np.maximum(get("layer_links") - (prep + core), 0.0)
    links = links + 2 * np.maximum(get("moe_ffn_links") - (shared + experts), 0.0)
    return compute, links


def halved(kw: dict[str, Any]) -> dict[str, Any]:
    """The arguments of one of the two micro-batches of a two-batch-overlap step."""
    out = dict(kw)
    for key in ("dec_B", "pf_N", "pf_moe"):
        if out.get(key) is not None:
            out[key] = _arr(out[key]) / 2
    return out


def _engine_topk(
    spec: Spec, topk: tuple[dict[str, Any], Any], on: Any, keep: bool = True
) -> list[Spec]:
    """An indexer's top-k ``spec`` as the engine runs it in each row, as the mapping of its
    module rows builds it: a DeepSeek-V4 CSA layer's under an engine of
    :data:`~mlacalc.cost.compressed.FLAT_TOPK_ENGINES` or ``ROW_TOPK_PROMPT``
    (:func:`~mlacalc.cost.compressed.v4_topk`), a DSA layer's under any
    (:func:`~mlacalc.cost.compressed.dsa_topk`, ``keep`` False). One spec per kernel it runs,
    each with the rows that run it; where no query selects, the step's own kernel (``keep``)
    or none (no bytes: those rows time 0)."""
    shape, nbytes = topk
    code = shape["topk_kernel"] * on
    out = []
    for c in np.unique(code).tolist():
        at = code == c
        if c == 0:  # the step's kernel, its own bytes and size; or none
            elements = spec.shape["elements"] if keep else 0.0 * code
            sh = {"elements": elements, "units": 0.0 * code, "ctas": 0.0 * code}
            sh["long_elements"] = sh["index_topk"] = 0.0 * code
            sh["topk_kernel"] = code
            b = spec.bytes if keep else 0.0
        else:
            sh, b = {k: np.asarray(v, dtype=np.float64) for k, v in shape.items()}, nbytes
        sh = {k: np.where(at, v, 0.0) for k, v in sh.items()}
        part = dataclasses.replace(spec, bytes=np.where(at, b, 0.0), shape=sh)
        out.append(part)
    return out


def _variant(sp: Spec) -> str:
    """The kernel-class variant of a spec, as :func:`mlacalc.words.kernels.variant_of` names it for
    a single kernel (a GEMM of several groups is a batched GEMM)."""
    fields = (
        "mhc",  # DeepSeek-V4's hyper-connections
        "linear",  # a linear-attention kernel's measured class (delta rule, conv1d)
        "dsa_kv_bytes",  # a DSA core
        "sparse",  # DeepSeek-V4's core (FlashMLA's sparse kernels)
        "indexer",  # DeepSeek-V4's indexer scores (DeepGEMM's MQA logits)
        "topk_kernel",  # an engine's top-k of an indexer (DeepSeek-V4's, DSA's)
        "deepep",  # routed experts behind DeepEP's exchange
        TRTLLM_GEN_MOE,  # routed experts on TensorRT-LLM-gen's MoE (moe_backend)
    )
    shape = {f: _most(sp.shape, f, 0.0) for f in fields}
    return variant_of(sp.kind, {"groups": _most(sp.shape, "groups", 1.0), **shape})


def _most(shape: dict[str, np.ndarray], field: str, absent: float) -> float:
    """The largest of a shape field's rows, ``absent`` where the spec has no such field (as
    ``float(np.max(shape.get(field, absent)))``, without numpy's reduction of a bare number:
    a search asks it of every spec, most of them without the field)."""
    v = shape.get(field)
    return absent if v is None else float(np.max(v))


#: The shape figures of a DSA core that its batch reads as one model's (the first walking row's
#: rule, the cache's bytes: :func:`mlacalc.timemodel.dsa_time.engine_dsa_kernel`)
_ONE_MODEL_FIELDS = ("dsa_kv_bytes", "n_heads", "window")


def _one_model(sp: Spec) -> tuple[float, ...]:
    """What keeps a kernel in a batch of one model's: for a DSA core (a batch the time model
    reads as one model's core) its cache's bytes, heads and top-k; for any other kernel
    nothing. A search times many step models' kernels together (:func:`time_jobs`): its
    bf16-cache and fp8-cache candidates' DSA cores in one batch had both run as the first
    row's cache (DeepSeek-V3.2 on 8 B300, a 4,000-token prompt under TensorRT-LLM: the fp8
    cache's prompt core 67.3 ms a step in a search of both caches, 39.0 ms in plan)."""
    if "dsa_kv_bytes" not in sp.shape:
        return ()
    return tuple(float(np.max(sp.shape.get(f, 0))) for f in _ONE_MODEL_FIELDS)


def spec_kernels(specs: list[Spec]) -> list[dict[str, Any]]:
    """The kernels ``specs`` (a search's, which no step composed) make as
    :func:`mlacalc.serving.provenance.calibration_of` reads a step's breakdown: one per kernel
    class and variant, its rows those :func:`time_jobs` times together, with their shapes."""
    groups: dict[tuple[str, str, str], list[Spec]] = {}
    for sp in specs:
        if sp.calls and sp.kind != HOST:
            groups.setdefault((sp.kind, sp.dtype, _variant(sp)), []).append(sp)
    out = []
    for (kind, dtype, variant), members in groups.items():
        batch, _ = _class_batch(kind, dtype, variant, members)
        if batch is not None:
            out.append(
                {
                    "kind": kind,
                    "dtype": dtype,
                    "variant": variant,
                    "flops": batch.flops,
                    "bytes": batch.bytes,
                    "shape": batch.shape,
                }
            )
    return out


def _class_batch(
    kind: str, dtype: str, variant: str, specs: list[Spec]
) -> tuple[KernelBatch | None, list[np.ndarray]]:
    """One kernel class's ``specs`` as the one batch the kernel model times them in: their rows
    that do work (FLOPs; bytes for an elementwise or communication kernel), with each spec's
    mask of them; None where no row does."""
    masks = [(sp.bytes > 0) if kind == "elementwise" or sp.comm else (sp.flops > 0) for sp in specs]
    if not any(mk.any() for mk in masks):
        return None, masks
    names = sorted({k for sp in specs for k in sp.shape})
    batch = KernelBatch(
        kind,
        dtype,
        np.concatenate([sp.flops[mk] for sp, mk in zip(specs, masks)]),
        np.concatenate([sp.bytes[mk] for sp, mk in zip(specs, masks)]),
        np.ones(int(sum(mk.sum() for mk in masks))),
        {
            key: np.concatenate(
                [sp.shape.get(key, np.zeros_like(sp.flops))[mk] for sp, mk in zip(specs, masks)]
            )
            for key in names
        },
        variant,
    )
    return batch, masks


def time_jobs(
    jobs: list[tuple[StepModel, list[Spec]]], profile: Any = None
) -> list[list[np.ndarray]]:
    """Seconds of every spec of every job (a step model and its specs), with one kernel-model
    call per kernel class and dtype across all jobs of a device."""
    out: list[list[np.ndarray]] = [[np.zeros(1)] * len(specs) for _, specs in jobs]
    groups: dict[tuple[int, str, str, str], list[tuple[int, int]]] = {}
    hws: dict[int, HardwareSpec] = {}
    #: network exchanges' link-model times: each is also timed by the kernel model as if
    #: within the scale-up domain, and takes the longer (the call's own fixed work stays)
    floors: dict[tuple[int, int], np.ndarray] = {}
    for j, (sm, specs) in enumerate(jobs):
        for i, sp in enumerate(specs):
            if sp.kind == HOST:
                out[j][i] = np.zeros_like(sp.flops)
                continue
            if sp.comm:
                n = sm._p2p_group() if sp.kind == "p2p" else sp.n_gpus
                sm.hw.link(n)  # a missing link figure: named, with its fix
                if sp.network or not _one_node(sm.hw, n):
                    # the scale-out network: the kernel model has no term for it
                    t = comm_seconds(sp.kind, sp.bytes, n, sm.hw, network=sp.network)
                    out[j][i] = np.where(sp.bytes > 0, t, 0.0)  # a row that sends nothing
                    if sp.kind not in ("dispatch", "combine") or "copies" not in sp.shape:
                        continue
                    floors[(j, i)] = out[j][i]
            hws[id(sm.hw)] = sm.hw
            key = (id(sm.hw), sp.kind, sp.dtype, _variant(sp), _one_model(sp))
            groups.setdefault(key, []).append((j, i))
    for (hw_id, kind, dtype, variant, _), idx in groups.items():
        specs = [jobs[j][1][i] for j, i in idx]
        batch, masks = _class_batch(kind, dtype, variant, specs)
        if batch is None:
            for (j, i), sp in zip(idx, specs):
                out[j][i] = np.zeros_like(sp.flops)
            continue
        pred = _predict(
            batch, hws[hw_id], profile if profile is not None else jobs[idx[0][0]][0].profile
        )
        pos = 0
        for (j, i), sp, mk in zip(idx, specs, masks):
            t = np.zeros_like(sp.flops)
            n = int(mk.sum())
            t[mk] = pred[pos : pos + n]
            out[j][i] = np.maximum(t, floors[(j, i)]) if (j, i) in floors else t
            pos += n
    return out


def _one_node(hw: HardwareSpec, n_gpus: int) -> bool:
    """Whether a group of ``n_gpus`` GPUs talks over the scale-up link (within one node, or one
    NVLink domain of several: :attr:`HardwareSpec.scale_up_gpus`)."""
    return hw.scale_up_gpus is None or n_gpus <= hw.scale_up_gpus


def _engine_all_reduce(
    batch: KernelBatch, engine: str | None, hw: HardwareSpec
) -> tuple[KernelBatch, np.ndarray, np.ndarray]:
    """A custom all-reduce batch with the shape fields of ``engine``'s own kernel, as its
    measured rows were fitted with (``measured.mapping._allreduce_table``), and where the
    engine's call is NCCL's whatever the custom kernel's fit says (1.0): SGLang's and vLLM's
    one-shot waits a round trip a peer (``peer_wait``), SGLang's call is NCCL's from
    :data:`~mlacalc.timemodel.comm_time.SGLANG_NCCL_FROM_BYTES`, and vLLM's takes its custom
    kernel, PyTorch's symmetric-memory one or NCCL's by size, GPU count and ``hw``'s compute
    capability (:func:`~mlacalc.timemodel.comm_time.vllm_path`: its one-shot, two-shot or the
    switch's multimem reduction)."""
    msg = np.broadcast_to(
        np.asarray(batch.shape.get("message_bytes", batch.bytes), dtype=float), (len(batch),)
    )
    if engine not in PEER_WAIT_ENGINES:
        return batch, np.zeros(len(batch)), np.zeros(len(batch))
    shape = dict(batch.shape, peer_wait=np.ones(len(batch)))
    nccl = (msg >= SGLANG_NCCL_FROM_BYTES).astype(float)
    symm = np.zeros(len(batch))
    if engine == "vllm":
        path = vllm_path(
            msg, np.asarray(batch.shape.get("n_gpus", 2), dtype=float), hw.compute_capability
        )
        shape["one_shot"] = np.minimum(
            path["one_shot"], np.asarray(batch.shape.get("one_shot", 1.0))
        )
        shape["multimem"] = path["multimem"]
        nccl, symm = path["nccl"], path["symm"]
    return dataclasses.replace(batch, shape=shape), nccl, symm


def _predict(batch: KernelBatch, hw: HardwareSpec, profile: Any) -> np.ndarray:
    """Seconds per row from the calibrated kernel model."""
    handed = symm = np.zeros(len(batch))
    if batch.kind == "all_reduce" and batch.dtype == "bf16":
        batch, handed, symm = _engine_all_reduce(batch, _profile_engine(profile), hw)
    seconds = np.asarray(predict_batch(batch, hw, profile), dtype=np.float64)
    if symm.any() and not batch.variant:  # vLLM's symmetric-memory calls: their own class
        own = dataclasses.replace(batch, variant=VLLM_SYMM_VARIANT)
        seconds = np.where(symm > 0, predict_batch(own, hw, profile), seconds)
    if batch.kind == "all_reduce" and batch.dtype == "bf16":
        # an engine's all-reduce runs its own kernels (the custom all-reduce class) or NCCL,
        # whichever is faster: TensorRT-LLM's AUTO strategy hands large calls to NCCL (the
        # measured 1.0 rows from 2^20 elements, which therefore fit the NCCL class, not the
        # custom one), vLLM's and SGLang's custom all-reduce stop at a size of their own:
        # SGLang's from SGLANG_NCCL_FROM_BYTES, vLLM's past its custom and symmetric-memory
        # kernels' sizes (``handed``), where its call is NCCL's whatever the custom kernel's
        # fit says
        shape = {k: v for k, v in batch.shape.items() if k != "multimem"}
        nccl = dataclasses.replace(
            batch, dtype="fp16", shape=dict(shape, one_shot=np.zeros(len(batch)))
        )
        ring = np.asarray(predict_batch(nccl, hw, profile), dtype=float)
        seconds = np.where(handed > 0, ring, np.minimum(seconds, ring))
    return seconds
