"""The collective classes of the time model: ``all_reduce``, ``all_gather``,
``reduce_scatter``, ``all_to_all``, ``p2p``, and DeepEP's ``dispatch`` and ``combine``.

Terms: ``fixed + steps x latency_steps x link latency`` plus the algorithm bytes the faster of
two ways: flagged stores at half of ``link_eff x link bandwidth`` (issued by the SMs, so
clock-scaled), or bulk copies at the full rate behind ``proto_s`` per step. An all-reduce is
the faster of a ring (2(n-1)/n of the message), one-shot (every peer's message read directly;
not in NCCL) and, where the switch reduces in the fabric (``link_multicast``: NVLink SHARP),
the switch-reduced all-reduce (the message once each way at ``switch_eff`` of the link). A
ring rank also copies its own 1/n share through HBM at ``eff_memory``. NCCL's all-to-all sends
flagged up to 16 KB a peer and in bulk above, all peers at once behind one synchronisation;
DeepEP's kernels pay SM work per token (``token_copies``). The figures behind each rule are in
docs/decisions.md ("Time model").
"""

from __future__ import annotations

import numpy as np

from mlacalc.hardware.catalogue import mesh_group_bandwidth
from mlacalc.timemodel.device import DeviceFigures
from mlacalc.timemodel.shared import REFERENCE_CLOCK_HZ, col, combine
from mlacalc.words.kernels import KernelBatch

__all__ = [
    "DEEPEP_LL_NORM",
    "P2P_FLAGGED_BYTES",
    "PEER_WAIT_ENGINES",
    "SGLANG_NCCL_FROM_BYTES",
    "VLLM_CUSTOM_BELOW_BYTES",
    "VLLM_MULTIMEM_GPUS",
    "VLLM_ONE_SHOT_BELOW_BYTES",
    "VLLM_SYMM_MEM_BELOW_BYTES",
    "VLLM_SYMM_VARIANT",
    "collective_terms",
    "vllm_one_shot",
    "vllm_path",
]

#: (flagged stores), and in bulk above: NCCL's documented NCCL_P2P_LL_THRESHOLD default, 16384.
P2P_FLAGGED_BYTES = 16384.0

#: Bytes a rank from which SGLang's custom all-reduce hands the call to NCCL (the engine's
#: all-reduce of at least this many bytes runs NCCL's ring, whatever the custom kernel would
#: take): its measured 0.5 tables' CUDA-graph rows from 2^24 bf16 elements (32 MB) equal the
#: same system's NCCL all-reduce at 2, 4 and 8 GPUs, on B200 (0.99-1.08 of NCCL's time, 15
#: sizes) and H100 (0.97-1.01), while at 16 MB they run its own kernels (0.53-0.91 of
#: NCCL's). Between 16 and 32 MB the tables do not say where; 32 MB is the first size NCCL's.
SGLANG_NCCL_FROM_BYTES = 2.0**25

#: Engines whose custom all-reduce's one-shot waits one link round trip per peer (``peer_wait``
#: in a collective's shape): SGLang's and vLLM's kernel (SGLang's came from vLLM's) starts
#: with a barrier on which each block polls the n - 1 peers' flags one after another before it
#: reads their buffers (from recall of ``custom_all_reduce.cuh``). Their CUDA-graph rows' smallest
#: calls grow with the GPU count where the message does not: 2^7-2^10 bf16 elements, SGLang
#: H100 2.4 / 2.6-2.8 / 3.3-4.8 us at 2 / 4 / 8 GPUs, B200 3.7-3.8 / 4.2-4.8 / 4.5-7.0; vLLM
#: H100 4.2-4.3 / 4.5-4.6 / 4.6-4.7. TensorRT-LLM's own kernel (its Lamport one-shot: no
#: barrier before the reads) keeps one round trip.
PEER_WAIT_ENGINES = ("sglang", "vllm")

#: Bytes a rank below which vLLM's custom all-reduce runs its one-shot kernel (every rank reads
#: every peer's buffer and reduces it whole), by GPU count; from them on its two-shot kernel
#: (reduce-scatter, then all-gather, a barrier between), which the model takes as the ring of
#: ``2(n - 1)`` synchronised steps; two GPUs always one-shot. From recall of vLLM's
#: ``custom_all_reduce.cuh`` (one-shot where ``world_size == 2``, or ``<= 4`` GPUs and under
#: 512 KB, or ``<= 8`` and under 256 KB), and the measured 0.24 CUDA-graph rows step at exactly
#: those sizes on both devices: 4 GPUs 2^17 -> 2^18 bf16 elements 7.2 -> 11.4 us (H100),
#: 8.6 -> 18.0 us (B200); 8 GPUs 2^16 -> 2^17 elements 7.9 -> 10.8 us (H100), 9.4 -> 25.8 us
#: (B200), where the message only doubles. The fastest-of rule had kept the one-shot there
#: (B200 rows from 2^18 elements at 4 GPUs 22-40% fast, 8 GPUs 2^17 56% fast).
VLLM_ONE_SHOT_BELOW_BYTES = {2: np.inf, 4: 512.0 * 1024, 8: 256.0 * 1024}


def vllm_one_shot(message_bytes, n_gpus) -> np.ndarray:
    """1.0 where vLLM's custom all-reduce of ``message_bytes`` a rank over ``n_gpus`` GPUs runs
    its one-shot kernel, 0.0 where its two-shot (:data:`VLLM_ONE_SHOT_BELOW_BYTES`; the limit of
    the smallest listed count at least ``n_gpus``, none above 8: two-shot)."""
    msg = np.asarray(message_bytes, dtype=np.float64)
    n = np.broadcast_to(np.asarray(n_gpus, dtype=np.float64), msg.shape)
    limit = np.zeros(msg.shape)
    for count, below in sorted(VLLM_ONE_SHOT_BELOW_BYTES.items(), reverse=True):
        limit = np.where(n <= count, below, limit)
    return (msg < limit).astype(np.float64)


_MIB = 1024.0 * 1024.0

#: Bytes a rank below which vLLM hands an all-reduce to its custom kernel, by compute capability
#: and GPU count (its ``CUSTOM_ALL_REDUCE_MAX_SIZES``, capped at the kernel's own 8 MB buffer;
#: a capability without an entry: the 8 MB buffer alone). From recall of vLLM's
#: ``all_reduce_utils.py`` (not checked against a stored copy: vLLM uses it where its
#: symmetric-memory all-reduce is on, as by default on these devices), and where the 0.24
#: CUDA-graph rows step: B200 2 GPUs 13.1 -> 25.3 us at 1 -> 2 MB, 4 GPUs 18.4 -> 23.8 us at
#: 1 -> 2 MB, 8 GPUs 26.1 -> 17.2 us at 512 KB -> 1 MB; H100 2 GPUs 20.2 -> 45.0 us at 4 -> 8 MB
#: (0.62 -> 0.97 of NCCL's time), 4 GPUs 0.73 -> 0.86 of NCCL's at 4 -> 8 MB.
VLLM_CUSTOM_BELOW_BYTES = {
    9.0: {2: 8 * _MIB, 4: 8 * _MIB, 6: _MIB / 2, 8: _MIB / 4},
    10.0: {2: 2 * _MIB, 4: 2 * _MIB, 6: _MIB, 8: _MIB},
}

#: Bytes a rank below which vLLM runs PyTorch's symmetric-memory all-reduce where its custom
#: kernel has stopped, by compute capability and GPU count; NCCL from there (and on a device
#: without an entry, past the custom kernel). From the same recall; the rows meet the same
#: system's NCCL all-reduce there: B200 2 GPUs from 8 MB (1.23 of NCCL's time after 0.92 at
#: 4 MB), 4 GPUs from 32 MB (1.00 after 0.71), 8 GPUs from 128 MB (1.11 after 0.81); H100
#: 2 GPUs from 64 MB (1.01), 4 GPUs from 32 MB (1.11, 0.99 at 16 MB), 8 GPUs from 64 MB
#: (1.07 after 0.89).
VLLM_SYMM_MEM_BELOW_BYTES = {
    9.0: {2: 64 * _MIB, 4: 32 * _MIB, 6: 64 * _MIB, 8: 64 * _MIB},
    10.0: {2: 8 * _MIB, 4: 32 * _MIB, 6: 128 * _MIB, 8: 128 * _MIB},
}

#: GPU counts at which vLLM's symmetric-memory all-reduce is the switch's multimem reduction
#: (NVLink SHARP: every rank's message reduced in the fabric, the switch-reduced all-reduce of
#: :func:`collective_terms`), by compute capability; at other counts its two-shot (a
#: reduce-scatter then an all-gather by the SMs: the ring's volume). From the same recall; the
#: B200 rows at 8 GPUs run at 0.48-0.65 of NCCL's time over 1-16 MB, where its custom two-shot
#: took 0.87 at 256-512 KB.
VLLM_MULTIMEM_GPUS = {9.0: (4, 6, 8), 10.0: (6, 8)}


#: The class variant of vLLM's graph calls to PyTorch's symmetric-memory all-reduce (a kernel
#: of its own, with its own fixed cost and rate: B200 2 GPUs 25.3 / 33.7 us at 2 / 4 MB where
#: the custom one-shot took 13.1 at 1 MB; 8 GPUs 17.2 us at 1 MB after the custom two-shot's
#: 26.1 at 512 KB); a profile without it times them with the custom class.
VLLM_SYMM_VARIANT = "symm"


def _by_count(table: dict[int, float], n: np.ndarray, default: float) -> np.ndarray:
    """The entry of the smallest listed count at least ``n`` (none: ``default``)."""
    out = np.full(n.shape, default)
    for count, value in sorted(table.items(), reverse=True):
        out = np.where(n <= count, value, out)
    return out


def vllm_path(message_bytes, n_gpus, capability: float | None) -> dict[str, np.ndarray]:
    """The kernel vLLM's all-reduce of ``message_bytes`` a rank over ``n_gpus`` GPUs of compute
    capability ``capability`` runs, as row fields: ``nccl`` 1.0 where NCCL's (past the custom
    kernel and the symmetric-memory one, :data:`VLLM_CUSTOM_BELOW_BYTES`,
    :data:`VLLM_SYMM_MEM_BELOW_BYTES`), ``symm`` 1.0 where PyTorch's symmetric-memory one (a
    class of its own, :data:`VLLM_SYMM_VARIANT`), ``one_shot`` 1.0 where the custom kernel's
    one-shot (:func:`vllm_one_shot`), ``multimem`` 1.0 where the switch's reduction
    (:data:`VLLM_MULTIMEM_GPUS`), 0.0 where a kernel of the SMs (the custom two-shot or the
    symmetric-memory two-shot), for the rows not NCCL's."""
    msg = np.asarray(message_bytes, dtype=np.float64)
    n = np.broadcast_to(np.asarray(n_gpus, dtype=np.float64), msg.shape)
    cap = round(float(capability or 0.0), 1)
    custom = msg < _by_count(VLLM_CUSTOM_BELOW_BYTES.get(cap, {}), n, 8 * _MIB)
    symm = ~custom & (msg < _by_count(VLLM_SYMM_MEM_BELOW_BYTES.get(cap, {}), n, 0.0))
    multimem = symm & np.isin(n, VLLM_MULTIMEM_GPUS.get(cap, ()))
    one = vllm_one_shot(msg, n) * custom
    return {
        "nccl": (~custom & ~symm).astype(np.float64),
        "symm": symm.astype(np.float64),
        "one_shot": one,
        "multimem": multimem.astype(np.float64),
    }


#: The p of the p-norm of a DeepEP low-latency kernel's link time and its SMs' walk over their
#: tokens. Chosen, not fitted: on the H100 ``wideep_deepep_ll_perf`` rows (352), the classes
#: refitted at each p, dispatch 6.8% / 13.7% at p = 1 (the sum), 4.9% / 10.5% at 2; from 4 the
#: fit drops the walk (8.5% / 27.8%, as without it).
DEEPEP_LL_NORM = 2.0


def collective_terms(
    batch: KernelBatch, fig: DeviceFigures, prm: dict[str, float]
) -> dict[str, np.ndarray]:
    msg = np.asarray(batch.shape.get("message_bytes", batch.bytes), dtype=np.float64)
    n = np.maximum(col(batch, "n_gpus", 2), 1.0)
    link = prm["link_eff"] * fig.link_bytes_per_s
    if fig.mesh_link_bytes_per_s > 0:
        # a full mesh (Infinity Fabric): a group reaches its n - 1 peers over its n - 1 links,
        # the traffic spread over all of them (several rings, or direct sends to every peer;
        # from recall), up to the aggregate a GPU has
        bw = mesh_group_bandwidth(fig.link_bytes_per_s, fig.mesh_link_bytes_per_s, n)
        link = prm["link_eff"] * bw
    lat = prm["latency_steps"] * fig.link_latency_s
    kind = batch.kind
    proto = prm["proto_s"]

    # flagged stores are issued one by one by the SMs of the library's channels, whose count
    # follows the links (25 GB/s each way a link on NVLink 3 and 4): their rate is the link
    # bandwidth's share at the reference clock, scaled with the clock. Issue can slow a
    # transfer below the link's rate, never speed it beyond: a device clocked
    # above the reference moves its stores at the link's rate
    issue = min(1.0, fig.clock_hz / REFERENCE_CLOCK_HZ)

    def stepped(steps: np.ndarray, volume: np.ndarray) -> np.ndarray:
        # the faster of the two ways a library moves a step's data: flagged 8-byte stores that
        # carry 4 bytes each (half the link bandwidth, no synchronisation: NCCL's LL), or bulk
        # copies at the full link bandwidth behind a synchronisation per step
        flagged = steps * lat + 2.0 * volume / (link * issue)
        bulk = steps * (lat + proto) + volume / link
        return np.minimum(flagged, bulk)

    # a ring rank also copies its own 1/n share between its buffers (out-of-place: input to
    # output, or the reduced share to the output), read and written in HBM by the
    # collective's own few SMs at ``eff_memory`` of the bandwidth, in series with the ring;
    # the ideal collective (no ``eff_memory``) has no such copy
    own = 2.0 * msg / n / (prm.get("eff_memory", np.inf) * fig.hbm_bytes_per_s)
    if kind == "all_reduce":
        # an engine's own two-shot (the rows whose kernel is known, ``multimem`` 0 or 1: vLLM's
        # custom and symmetric-memory kernels) moves its share through HBM on all its SMs,
        # beside the link traffic: no copy in series (the engines' custom classes never
        # informed ``eff_memory`` while the switch's reduction stood in for their two-shot)
        sm_kernel = col(batch, "multimem", -1) >= 0
        ring = stepped(2 * (n - 1), 2 * (n - 1) / n * msg) + np.where(sm_kernel, 0.0, own)
        # one-shot: every peer's message read directly, by loads and stores the SMs issue
        # one by one, at the clock-scaled rate of the flagged steps above. NCCL has no
        # one-shot (``one_shot = 0``); custom all-reduces take it
        # SGLang's and vLLM's one-shot (``peer_wait``) waits on each peer's flag in turn
        # before it reads: a round trip per peer (:data:`PEER_WAIT_ENGINES`)
        waits = np.where(col(batch, "peer_wait", 0) > 0, n - 1, 1.0)
        one_shot = waits * lat + (n - 1) * msg / (link * issue)
        comm = np.where(col(batch, "one_shot", 1) > 0, np.minimum(ring, one_shot), ring)
        # ``multimem`` (vLLM's rows, :func:`vllm_path`): 1 where the call is the switch's
        # reduction, 0 where a kernel of the SMs that never uses it; absent (-1): the faster
        switch = col(batch, "multimem", -1)
        if fig.link_multicast > 0:
            # a switch that reduces in the fabric (NVLink SHARP, NCCL's NVLS): every rank
            # sends its message to the switch once and receives the sum once, at ``switch_eff``
            # times the ring's link efficiency, in bulk; each of its two phases (reduce,
            # multicast) ends when
            # every rank has heard from the n - 1 others, the ring's 2(n - 1) synchronised
            # steps. Taken where it is faster, as NCCL's tuner does. ``switch_eff`` is kept
            # between 0.5 and 1: below 4/7 the switch would never beat the ring at 8 GPUs or
            # fewer, which the flag (and NCCL's use of it at 8 GPUs) contradicts
            nvls = 2 * (n - 1) * (lat + proto) + msg / (prm.get("switch_eff", 1.0) * link)
            comm = np.where(switch > 0, nvls, np.where(switch < 0, np.minimum(comm, nvls), comm))
    elif kind in ("dispatch", "combine"):
        # expert-parallel token exchange: the low-latency kernels send every copy straight to
        # its rank in one step; normal mode goes through n - 1 steps and moves data with the
        # SMs it is given (``sms``; 0 = all), each drawing ``sm_bandwidth`` x link / SMs, at
        # the slower of the link and those SMs. The SMs also work on every token whatever its
        # copies (the senders of every rank scan each token's routing; the combine reduces and
        # writes each token once): ``token_copies`` copies' worth of work a token
        low = col(batch, "low_latency", 0) > 0
        sms = col(batch, "sms", 0)
        share = np.where(sms > 0, sms * prm["sm_bandwidth"] / fig.sm_count, np.inf)
        tokens = col(batch, "tokens", 0)
        copies = np.maximum(col(batch, "copies", 1), 1e-9)
        work = 1.0 + prm.get("token_copies", 0.0) * tokens / copies
        link_t = (n - 1) / n * msg / link
        sm_t = link_t * work / share
        # the low-latency kernels run on as many SMs as the call has experts (a warp group
        # each; more experts than SMs share an SM in ``groups`` warp groups), each SM sending
        # its share of the tokens one after another: ``unit_latency_s`` a token, overlapped
        # with the link (:data:`DEEPEP_LL_NORM`); a dispatch SM also waits on its experts'
        # counts one warp group after another: a round trip each (``experts`` 0: neither)
        experts = col(batch, "experts", 0)
        groups = np.maximum(np.ceil(experts / fig.sm_count), 1.0)
        ll_sms = np.maximum(np.ceil(experts / groups), 1.0)
        serial = np.where(experts > 0, np.ceil(tokens / ll_sms), 0.0) * prm.get(
            "unit_latency_s", 0.0
        )
        trips = groups if kind == "dispatch" else 1.0
        low_t = trips * lat + combine(msg / link, serial, DEEPEP_LL_NORM)
        # a normal combine ends with a token's reduction: a warp reads the token's copies
        # (``copies / tokens`` ranks' worth) and writes their sum, ``reduce_s`` an element of
        # each of those ``1 + r`` hidden rows, in series after the last copy lands (the
        # dispatch has no reduction). The H100 tables show it: a few tokens' combine takes
        # 31 us at hidden 2,048 and 49 us at 7,168 whatever the SMs (dispatch 25-26 us flat)
        reduce_t = 0.0
        if kind == "combine":
            ranks = col(batch, "copies", 0) / np.maximum(tokens, 1e-9)
            reduce_t = np.where(
                tokens > 0, (1.0 + ranks) * col(batch, "hidden", 0) * prm.get("reduce_s", 0.0), 0.0
            )
        comm = np.where(low, low_t, (n - 1) * lat + np.maximum(link_t, sm_t) + reduce_t)
    elif kind == "all_to_all":
        # NCCL's all-to-all is n - 1 point-to-point sends and receives, whose protocol is not
        # tuned per call: LL up to NCCL_P2P_LL_THRESHOLD bytes a peer, bulk (Simple) above
        # (:data:`P2P_FLAGGED_BYTES`). The sends run at once in one grouped kernel: a bulk
        # exchange synchronises once, whatever n, and the rank's send to itself is one of
        # them, beside the others, not after them
        steps, volume = n - 1, (n - 1) / n * msg
        flagged = steps * lat + 2.0 * volume / (link * issue)
        bulk = lat + proto + volume / link
        comm = np.maximum(np.where(msg / n <= P2P_FLAGGED_BYTES, flagged, bulk), own)
    elif kind in ("all_gather", "reduce_scatter"):
        comm = stepped(n - 1, (n - 1) / n * msg) + own
    else:  # p2p
        comm = lat + msg / link
    comm = np.where(n <= 1, 0.0, comm)
    zeros = np.zeros(len(batch))
    return {"compute_s": zeros, "memory_s": comm, "extra_s": zeros}
