"""Eager PyTorch as it runs: the host's dispatch queue, and the passes over memory that eager
operators make beyond the engine's op sequence.

**The queue.** In eager PyTorch the host dispatches each ATen op (argument checks, output
allocation, the launch) and returns before the kernel has run; the GPU works through its queue
while the host dispatches the next ops. A step that ends in a synchronisation therefore costs
the larger of the two totals, the GPU's and the host's, plus the fill of the pipe: never a
dispatch floor under every op. :func:`dispatch_queue` runs the queue call by call: the host
issues call ``j`` when it has dispatched it (the dispatch times before it summed), the GPU
starts it when both that has happened and the call before it has finished. What the GPU waits
for the host is each kernel's wait. On a CPU the host runs the operators itself: there is no
queue and every op's dispatch adds to its time (:func:`host_runs_kernels`).

**Eager operators.** :func:`eager_passes` lists what eager PyTorch does with the reference
layers' shapes (:mod:`mlacalc.bench.torch_layers`) that the engine's op sequence leaves out:

- ``scores * scale`` is an op of its own (a pass over the score matrix), and so is
  ``masked_fill`` with several new tokens;
- ``torch.matmul`` of two 4-D tensors folds the batch dimensions into one before ``bmm``; an
  operand whose two batch dimensions cannot be merged in place (a permuted view: compressed
  MLA's values ``kv_b_proj(...).view(B, S, h, d).transpose(1, 2)[..., d_nope:]``, the queries
  of several new tokens grouped by head) is copied first;
- an ``einsum`` returns its result as a permuted view of the ``bmm`` it ran (absorbed MLA's
  ``bqhc,hvc->bqhv``, computed as ``[h, bq, v]``): the ``reshape`` after it copies it, and so
  does the ``reshape`` of several new tokens' per-head output back to ``[B, q, h d]``;
- RoPE (``x * cos + rotate_half(x) * sin``) is five passes where the engine's sequence counts
  one (:func:`rope_passes`), and MLA's queries (naive, compressed, absorbed-merged) and naive
  MLA's keys are assembled by a ``cat`` the engine's sequence leaves out.

A product of queries against a latent cache broadcast over heads (``[B, h, q, c] @ [B, 1, c,
S]``) would make ``torch.matmul`` expand and copy the cache once per head; the reference layers
fold the heads into the rows instead (``[B, q h, c] @ [B, c, S]``: the latent read once per
sequence), so the engine's ``scores`` product already is what runs.
"""

from __future__ import annotations

from collections.abc import Sequence

from mlacalc.models.loading import ModelConfig

__all__ = [
    "BMM_ENTRY_DISPATCHES",
    "BMM_ROW_BANDWIDTH",
    "CAT_COPIES_ELEMENTS",
    "CAT_PASSES",
    "CAT_SHARE",
    "FIRST_TOUCH_BYTES_PER_S",
    "FRESH_OUTPUT_BYTES",
    "HOST_OP_LATENCIES",
    "REGISTER_SOFTMAX",
    "REGISTER_SOFTMAX_KEYS",
    "SOFTMAX_SHARE",
    "STRIDED_PASSES",
    "STRIDED_SHARE",
    "attended_keys",
    "cpu_eager_seconds",
    "dispatch_queue",
    "eager_passes",
    "gpu_pass_share",
    "host_op_seconds",
    "host_runs_kernels",
    "rope_passes",
]


def dispatch_queue(
    gpu_s: Sequence[float], host_s: Sequence[float], calls: Sequence[int]
) -> list[float]:
    """The seconds the GPU waits for the host before each kernel's calls, all calls summed:
    kernel ``i`` runs ``calls[i]`` times, each call ``gpu_s[i] / calls[i]`` on the GPU after
    ``host_s[i] / calls[i]`` of dispatch on the host. Calls go round by round (call ``r`` of
    every kernel with more than ``r`` calls, in order: a layer's ops, layer after layer). The
    step is ``sum(gpu_s) + sum(wait)``: at least the larger of the two totals, at most their
    sum."""
    n = len(gpu_s)
    if not (len(host_s) == len(calls) == n):
        raise ValueError("gpu_s, host_s and calls must have one entry per kernel")
    count = [max(1, int(c)) for c in calls]
    per_gpu = [g / c for g, c in zip(gpu_s, count)]
    per_host = [h / c for h, c in zip(host_s, count)]
    wait = [0.0] * n
    host_t = gpu_t = 0.0
    for r in range(max(count, default=0)):
        for i in range(n):
            if count[i] > r:
                host_t += per_host[i]
                start = max(host_t, gpu_t)
                wait[i] += start - gpu_t
                gpu_t = start + per_gpu[i]
    return wait


def host_runs_kernels(kind: str) -> bool:
    """Whether the host itself runs the kernels (a CPU device): no queue, each op's dispatch
    adds to its time."""
    return kind == "cpu"


#: The host's time to dispatch one of a reference layer's ATen ops on a GPU, in trivial-op
#: latencies (the microbenchmark's ``launch_latency_s``: an in-place add on 8 elements, called
#: in a loop). A layer's op pays more than that loop's: the Python of the module around it
#: (``nn.Linear``, the views :data:`~mlacalc.timemodel.predict.LAUNCHES` does not count), a
#: fresh output from the caching allocator, broadcasting checks, cuBLAS's heuristic. Fitted on
#: the committed H200 set's 96 host-bound rows (those whose GPU work is under 30% of the
#: prediction; each row predicted with the trivial-op latency measured just before it): median
#: error +2%, median |error| 7.7% (2.2 gives -13%, 3.0 +30%). Checked apart from the set: the
#: host's time to enqueue one decode layer, timed directly on another H200 session
#: (``benchmarks/eager_profile.py``), is 18.0-21.1 us per counted op over four layers, 2.6-3.1
#: times the set's median trivial-op latency (6.9 us).
HOST_OP_LATENCIES = 2.6


def host_op_seconds(kind: str, latency_s: float) -> float:
    """The host's time per dispatched ATen op of the eager sequence on a device of ``kind``:
    on a GPU :data:`HOST_OP_LATENCIES` trivial-op latencies; on a CPU, where the host runs the
    op itself and the trivial op's latency is the whole of its fixed cost, one."""
    return latency_s if host_runs_kernels(kind) else HOST_OP_LATENCIES * latency_s


#: Share of the measured copy bandwidth eager PyTorch's CUDA softmax reaches over a pass of
#: its scores (read once, written once), by the kernel PyTorch picks for the row length:
#: rows of up to 1,024 keys (one warp per row) and rows too long for registers reach about
#: 0.45 (profiled on an H200, ``benchmarks/eager_profile.py``: 0.45-0.46 at 1K keys, 0.39 at
#: 16K, 0.44-0.47 for decode rows of 64K-128K), rows held in registers :data:`REGISTER_SOFTMAX`
#: 0.28 (0.26-0.30 at 4K keys, three kernels).
SOFTMAX_SHARE = 0.45
REGISTER_SOFTMAX = 0.28
#: The row lengths PyTorch's register-resident softmax takes: above one warp's 1,024 and up to
#: what a block of 1,024 threads holds at 8 bf16 values each (8,192; observed at 4,096, and
#: 16,384 ran the shared-memory kernel: the upper bound itself was not observed).
REGISTER_SOFTMAX_KEYS = (1024, 8192)
#: Share of the copy bandwidth of PyTorch's shared-memory softmax, which takes the rows too long
#: for registers that fit a block's shared memory: 0.39 profiled at 16K keys (a Llama-2-7B
#: prompt's ``cunn_SoftMaxForwardSmem``, 20.8 ms of its 76.8).
SMEM_SOFTMAX = 0.39
#: The shared memory a block of PyTorch's softmax holds a row in: 48 KiB (from recall of
#: ``aten/src/ATen/native/cuda/SoftMax.cu``, the default per-block limit), 24K bf16 keys.
SMEM_SOFTMAX_BYTES = 48 * 1024
#: Share of the copy bandwidth of a pass eager PyTorch runs through its generic element-wise
#: kernel (operands permuted, sliced or broadcast, so no vectorised loads): a copy of a
#: permuted view, a ``cat`` of strided slices and expanded tensors, ``masked_fill_`` over a
#: mask broadcast across sequences and heads. Profiled on an H200: 0.32-0.35 over six such
#: kernels (masked fills of 0.27-17 GB of scores; compressed MLA's re-expanded keys and values,
#: 77 GB in 65 copies).
STRIDED_SHARE = 0.34
#: The passes of :func:`eager_passes` and of the layers' op sequences that copy strided views
STRIDED_PASSES = frozenset({"q_heads_copy", "v_copy", "out_copy", "rope_neg", "rope_mul"})
#: Share of the copy bandwidth PyTorch's batched ``cat`` kernel reaches (``CatArrayBatchedCopy``,
#: not vectorised: its inputs are slices of wider rows or expanded). Profiled on an H200
#: (``benchmarks/eager_profile.py``, the six prompts): 0.16-0.23 of the measured copy rate
#: (absorbed MLA's query assembly 0.16; RoPE's halves and the expanded MLA keys and queries
#: 0.19-0.23).
CAT_SHARE = 0.2
#: The ``cat`` passes of :func:`eager_passes` and of the layers' op sequences
CAT_PASSES = frozenset({"rope_cat", "q_cat", "k_cat", "q_assemble", "k_assemble"})
#: A ``cat`` whose output has this many elements or more cannot index it in 32 bits: PyTorch
#: copies each input into its slice of the output instead (``copy_`` split into 32-bit pieces;
#: from recall of ``aten/src/ATen/native/cuda/Cat.cu``, checked in the profile: compressed MLA's
#: keys re-expanded over 64K tokens, 13 G elements, ran as 65 copies at 0.39 of the copy rate),
#: at :data:`STRIDED_SHARE`.
CAT_COPIES_ELEMENTS = 2**31


def gpu_pass_share(name: str, keys: int = 0, outputs: int = 0) -> float:
    """Share of the copy bandwidth one element-wise op ``name`` of the eager sequence reaches
    on a GPU: the softmax over rows of ``keys`` keys :data:`SOFTMAX_SHARE` (or
    :data:`REGISTER_SOFTMAX`); a copy of a strided view :data:`STRIDED_SHARE`; a ``cat`` of
    ``outputs`` elements :data:`CAT_SHARE` (:data:`STRIDED_SHARE` from
    :data:`CAT_COPIES_ELEMENTS`, run as copies); the mask, an out-of-place ``masked_fill`` (a
    clone of the scores at the copy rate, then the broadcast fill in place at the strided rate:
    the two passes' times added); every other op 1."""
    if name == "softmax":
        lo, hi = REGISTER_SOFTMAX_KEYS
        if lo < keys <= hi:
            return REGISTER_SOFTMAX
        return SMEM_SOFTMAX if hi < keys <= SMEM_SOFTMAX_BYTES // 2 else SOFTMAX_SHARE
    if name == "mask":
        return 1.0 / (1.0 + 1.0 / STRIDED_SHARE)
    if name in STRIDED_PASSES:
        return STRIDED_SHARE
    if name in CAT_PASSES:
        return CAT_SHARE if outputs < CAT_COPIES_ELEMENTS else STRIDED_SHARE
    return 1.0


def attended_keys(model: ModelConfig, keys: int) -> int:
    """The keys one query of the reference layer attends (a score row's length): ``keys``,
    a sliding window's at most."""
    window = model.sliding_window
    return keys if not window else min(keys, window)


def eager_passes(
    model: ModelConfig, impl: str | None, batch: int, q: int, keys: int
) -> list[tuple[str, str, int]]:
    """The passes eager PyTorch makes over memory that the engine's op sequence of one layer
    leaves out, for the reference layer of ``model`` (``impl`` for MLA) at ``batch`` sequences,
    ``q`` new tokens each and ``keys`` keys: ``(after, name, elements)``, each a pass reading
    and writing ``elements`` values right after the engine op ``after``."""
    h = model.num_attention_heads
    out: list[tuple[str, str, int]] = []
    if model.is_mla:
        dq = model.qk_nope_head_dim + model.qk_rope_head_dim
        dv = model.v_head_dim
        rows = batch * h * q  # one score row per (sequence, head, new token)
        expanded = impl in ("naive", "compressed")
        out += rope_passes(batch * q * (h + 1) * model.qk_rope_head_dim)
        if expanded:  # torch.cat([q_nope, q_rope], -1)
            out.append(("rope", "q_cat", batch * q * h * dq))
        if impl == "naive":  # k_new = torch.cat([k_nope, k_rope expanded over the heads], -1)
            out.append(("rope", "k_cat", batch * q * h * dq))
        if impl == "absorbed_merged":  # torch.cat([q_lat, q_rope], -1) (absorbed: q_assemble)
            out.append(
                ("rope", "q_cat", batch * q * h * (model.kv_lora_rank + model.qk_rope_head_dim))
            )
        if expanded and q > 1:  # qf.transpose(1, 2) folded by matmul: copied
            out.append(("cache_write", "q_heads_copy", batch * q * h * dq))
        out.append(("scores", "scale", rows * keys))
        if q > 1:
            out.append(("scale", "mask", rows * keys))
        if impl == "compressed":  # kv_b_proj's values, a permuted view, folded by matmul
            out.append(("softmax", "v_copy", batch * h * keys * dv))
        if expanded and q > 1:  # out.transpose(1, 2).reshape(B, q, h dv)
            out.append(("pv", "out_copy", batch * q * h * dv))
        if impl == "absorbed":  # the einsum's permuted [b, q, h, v] view, reshaped
            out.append(("o_absorb", "out_copy", batch * q * h * dv))
        return out
    d = model.head_dim
    span = attended_keys(model, keys)
    rows = batch * h * q
    if model.rope:
        out += rope_passes(batch * q * (h + model.num_key_value_heads) * d)
    if q > 1:  # the heads of each KV head grouped: xq permuted, reshaped or folded, copied
        out.append(("rope", "q_heads_copy", batch * q * h * d))
    out.append(("scores", "scale", rows * span))
    if q > 1:
        out.append(("scale", "mask", rows * span))
        dv = model.v_head_dim or d  # MiMo-V2-Flash's values are narrower than its keys
        out.append(("pv", "out_copy", batch * q * h * dv))  # permute(0, 3, 1, 2, 4).reshape
    return out


def rope_passes(elements: int) -> list[tuple[str, str, int]]:
    """The passes the reference layers' RoPE (``x * cos + rotate_half(x) * sin`` over queries
    and keys of ``elements`` values) makes beyond the one the engine's ``rope`` op counts (the
    final add): the negated half (a strided slice), the ``cat`` of the two halves, and the two
    products with ``cos`` and ``sin`` broadcast over sequences and heads."""
    return [
        ("rope", "rope_neg", elements // 2),
        ("rope", "rope_cat", elements),
        ("rope", "rope_mul", 2 * elements),
    ]


#: An output of at least this many bytes is mapped fresh from the operating system on every
#: allocation (glibc's largest ``mmap`` threshold, 32 MiB on 64-bit Linux: such blocks are
#: unmapped when freed), so its first write pays the page faults.
FRESH_OUTPUT_BYTES = 32 * 2**20
#: Bytes per second at which a fresh output's pages are faulted in and zeroed on first write,
#: where a microbenchmark set did not measure it: calibrated on the committed CPU set (its 13
#: compressed-MLA rows, whose re-expanded keys and values are gigabytes; 3-5 GB/s fit equally
#: well), in line with a page fault of about a microsecond per 4 KiB page.
FIRST_TOUCH_BYTES_PER_S = 4e9
#: Dispatches per batch entry of a CPU ``bmm``: it runs its entries one after another, each a
#: ``select`` of its operands and an ``addmm`` (two trivial-op latencies, calibrated on the
#: committed CPU set; four fit as well).
BMM_ENTRY_DISPATCHES = 2.0
#: The share of the measured matrix-vector bandwidth a CPU ``bmm`` entry of one row reaches
#: (a head's query against its own keys or values: a small matrix-vector product run alone, on
#: one thread, not split over the cores as the measured large one is): calibrated on the
#: committed CPU set's naive MLA and MHA decode rows.
BMM_ROW_BANDWIDTH = 0.75


def cpu_eager_seconds(
    products: Sequence[tuple[int, int, int, int] | None],
    written: Sequence[float],
    memory_s: Sequence[float],
    latency_s: float,
    first_touch_bytes_per_s: float = FIRST_TOUCH_BYTES_PER_S,
) -> list[float]:
    """What eager PyTorch on a CPU adds to each op of a sequence, beyond its roofline and its
    dispatch: the first touch of a fresh output of :data:`FRESH_OUTPUT_BYTES` or more
    (``written`` bytes at ``first_touch_bytes_per_s``); for a batched product without weights
    (``products``: its ``(G, M, N, K)``, G > 1), the dispatch of each of its G entries and, where
    an entry has one row, its operands read at :data:`BMM_ROW_BANDWIDTH` of the measured rate
    (``memory_s``: the op's memory time at that rate)."""
    out = []
    for prod, nbytes, mem in zip(products, written, memory_s):
        extra = nbytes / first_touch_bytes_per_s if nbytes >= FRESH_OUTPUT_BYTES else 0.0
        if prod is not None and prod[0] > 1:
            extra += prod[0] * BMM_ENTRY_DISPATCHES * latency_s
            if prod[1] == 1:
                extra += mem * (1.0 / BMM_ROW_BANDWIDTH - 1.0)
        out.append(extra)
    return out
