"""Communication between GPUs: bytes on the wire, and the link model for what the kernel model
cannot time.

The serving step times its collectives with the calibrated kernel model
(:mod:`mlacalc.timemodel`, fitted on the measured NCCL, TensorRT-LLM all-reduce and DeepEP
tables, all of them within one node) whenever the group fits in one node. The kernel model has
no term for the scale-out network, so a group spanning nodes is timed here, as is the
DeepSeek-V3 ISCA analytic check, which is defined by the paper's own link assumptions.

In the link model a collective's time is
``steps x link latency + bytes / (LINK_EFFICIENCY x link bandwidth)`` over the scale-up link
(NVLink, Infinity Fabric, PCIe) when the group fits in one node, the scale-out network per GPU
otherwise (:meth:`mlacalc.hardware.catalogue.HardwareSpec.link`):

- all-reduce: the faster of a ring (``2 (n-1)`` steps, ``2 (n-1)/n`` of the message on the
  wire) and one-shot (one step, every peer's message read);
- all-gather and reduce-scatter: ``n - 1`` steps of one rank's share each;
- expert-parallel dispatch and combine (DeepEP-style all-to-all): every routed copy of a token
  leaves in one step (``tokens x top-k x hidden`` elements, fp8 with one 4-byte scale per 128
  elements for dispatch, bf16 for combine), as DeepEP's published bandwidths count them; the
  low-latency kernels of decode send every copy over the NIC (RDMA); the normal kernels of
  prefill use NVLink within a node and, across nodes, send one copy per remote node over RDMA
  (forwarded to its experts over NVLink), as DeepEP's internode kernels do; DeepSeek's
  group-limited routing (a token's experts from ``topk_group`` of ``n_group`` groups) bounds
  the remote nodes where the groups lie on nodes (:func:`remote_nodes_per_token`);
- point-to-point (pipeline stages): one step, the activations of the step.

``LINK_EFFICIENCY`` = 0.8 is the achieved share of a link that the DeepSeek-V3 ISCA 2025 paper
(arXiv 2505.09343, sections 4.1 and 4.3) reports for both kinds of link: "use 40GB/s for
effective bandwidth" of 50 GB/s InfiniBand, and "200GB/s bandwidth (of which about 160GB/s can
actually be achieved)" on H800 NVLink. It is not fitted to any figure the tests compare with.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
from math import comb
from typing import Any

import numpy as np

from mlacalc.hardware.catalogue import HardwareSpec
from mlacalc.serving.layout import kv_bytes_per_sequence_per_gpu
from mlacalc.timemodel.kernel_time import predict_kernels
from mlacalc.words.kernels import Kernel

__all__ = [
    "LINK_EFFICIENCY",
    "KVTransfer",
    "combine_bytes",
    "comm_seconds",
    "dispatch_bytes",
    "distinct_ranks_per_token",
    "group_routing_words",
    "isca_comm_bound_tpot",
    "kv_transfer",
    "kv_transfer_seconds",
    "network_words",
    "node_expert_ranges",
    "placed_groups",
    "remote_nodes_per_token",
]

LINK_EFFICIENCY = 0.8
#: fp8 dispatch carries one fp32 scale per 128-element block (DeepEP, DeepGEMM block scaling)
FP8_SCALE_BLOCK = 128


def network_words(hw: HardwareSpec | None, gpus: int | None = None) -> str:
    """How the times take the links, as a plan's or search's note says it: collectives within
    one scale-up fabric included (the kernel model's, :func:`comm_seconds` beyond), traffic
    beyond it at :data:`LINK_EFFICIENCY` of the network's bandwidth. The fabric is the node's
    (8 GPUs of an H100, H200 or B200 node) unless the device's NVLink domain spans several
    nodes (GB200's NVL72 rack of 4-GPU trays): then the domain is named, and a deployment of
    ``gpus`` that fits one is said to send nothing over the network (a new user's trial read
    "within a node" of 72 GPUs on GB200, a 4-GPU tray, as traffic over the network)."""
    share = f"{LINK_EFFICIENCY:.0%}"
    domain = hw.scale_up_gpus if hw is not None else None
    node = hw.gpus_per_node if hw is not None else None
    if domain is None or node is None or domain <= node:
        return (
            f"collectives within a node included; traffic between nodes at {share} of the "
            "network's datasheet bandwidth"
        )
    fabric = (hw.scale_up_link or "scale-up fabric").split()[0]
    words = (
        f"collectives within a scale-up domain ({fabric}, {domain} GPUs on {hw.name}, "
        f"{node}-GPU nodes) included; traffic between domains at {share} of the network's "
        "datasheet bandwidth"
    )
    if gpus == 1:
        words += "; one GPU: no traffic crosses the network"
    elif gpus is not None and gpus <= domain:
        words += f"; these {gpus:,} GPUs fit one domain: no traffic crosses the network"
    return words


def remote_nodes_per_token(
    group: int,
    per_node: int,
    topk: int,
    experts: int | None = None,
    groups: tuple[int, int] | None = None,
) -> float:
    """Other nodes a token's ``topk`` experts live on, on average over the tokens of every rank
    of an expert-parallel ``group`` of ``per_node`` ranks a node.

    Without ``groups`` a token's experts spread uniformly over the ``ceil(group / per_node)``
    nodes. With ``groups = (n_group, topk_group)`` (DeepSeek's group-limited routing) and the
    ``experts`` laid on the ranks in order, ``experts / group`` each (as the engines place them
    without a load balancer), the count is exact for this routing: a token's ``topk_group``
    groups drawn uniformly from the ``n_group`` (consecutive runs of ``experts / n_group``),
    its ``topk`` experts uniformly from theirs, each picked group holding at least one when
    ``topk >= topk_group`` (the router picks a group by its best experts' scores: DeepSeek-V3's
    router on independent random scores leaves 0.9% of its picked groups empty). Groups laid
    whole on nodes bound the count by ``topk_group`` nodes: DeepSeek-V3 at EP64 (one group a
    node) 3.5 remote nodes a token where uniform routing reaches 4.59.
    """
    nodes = -(-group // per_node)
    if nodes <= 1:
        return 0.0
    if groups is None or experts is None:
        return (nodes - 1) * (1 - (1 - 1 / nodes) ** topk)
    return _grouped_remote_nodes(group, per_node, topk, experts, *groups)


def node_expert_ranges(experts: int, group: int, per_node: int) -> list[tuple[int, int]]:
    """The experts each node of an expert-parallel ``group`` holds, ``[lo, hi)``: rank ``r``
    holds ``[r E / group, (r + 1) E / group)`` (rounded down), node ``n`` ranks
    ``n per_node`` on."""
    out = []
    for first in range(0, group, per_node):
        last = min(first + per_node, group)
        out.append((first * experts // group, last * experts // group))
    return out


@lru_cache(maxsize=256)
def _grouped_remote_nodes(
    group: int, per_node: int, topk: int, experts: int, n_group: int, topk_group: int
) -> float:
    size = experts // n_group
    ranges = node_expert_ranges(experts, group, per_node)
    conditioned = topk >= topk_group
    # the routings of a token's picked groups that hit every one of them
    whole = (
        sum(
            (-1) ** i * comb(topk_group, i) * comb((topk_group - i) * size, topk)
            for i in range(topk_group + 1)
        )
        if conditioned
        else comb(topk_group * size, topk)
    )
    if not whole:  # the picked groups hold fewer than topk experts (the schema refuses it)
        return remote_nodes_per_token(group, per_node, topk)
    picks = comb(n_group, topk_group)
    hit = []
    for lo, hi in ranges:
        overlap = [
            min(hi, (g + 1) * size) - max(lo, g * size)
            for g in range(n_group)
            if min(hi, (g + 1) * size) > max(lo, g * size)
        ]
        # (picked touching groups, experts left in them off this node) -> signed ways: each
        # touching group is not picked, picked, or (inclusion-exclusion) picked and missed
        ways: dict[tuple[int, int], int] = {(0, 0): 1}
        for o in overlap:
            nxt: dict[tuple[int, int], int] = {}
            for (a, left), w in ways.items():
                nxt[(a, left)] = nxt.get((a, left), 0) + w
                if a < topk_group:
                    key = (a + 1, left + size - o)
                    nxt[key] = nxt.get(key, 0) + w
                    if conditioned:
                        key = (a + 1, left)
                        nxt[key] = nxt.get(key, 0) - w
            ways = nxt
        rest = n_group - len(overlap)
        missed = 0
        for (a, left), w in ways.items():
            if topk_group - a > rest or topk_group - a < 0:
                continue
            free = topk_group - a
            if conditioned:
                avoid = sum(
                    (-1) ** m * comb(free, m) * comb(left + (free - m) * size, topk)
                    for m in range(free + 1)
                )
            else:
                avoid = comb(left + free * size, topk)
            missed += w * comb(rest, free) * avoid
        hit.append(1.0 - missed / (picks * whole))
    weights = [
        (min(first + per_node, group) - first) / group for first in range(0, group, per_node)
    ]
    return float(sum(hit) - sum(w * h for w, h in zip(weights, hit, strict=True)))


def placed_groups(
    groups: tuple[int, int] | None, group: int, per_node: int, rebalance: bool
) -> tuple[int, int] | None:
    """A model's ``(n_group, topk_group)`` (:attr:`ModelConfig.routing_groups`) where its
    groups keep their place on the nodes of an expert-parallel ``group``: the engines lay the
    experts in order, ``E / group`` a rank; a rebalanced placement (EPLB) keeps whole groups on
    a node only where the nodes divide ``n_group`` (DeepSeek's hierarchical policy), and its
    global policy elsewhere packs experts by load alone (None: routed as if uniform)."""
    nodes = -(-group // per_node)
    if groups is None or (rebalance and groups[0] % nodes):
        return None
    return groups


def group_routing_words(
    experts: int, group: int, per_node: int, topk: int, groups: tuple[int, int] | None
) -> str | None:
    """How group-limited routing bounds the nodes a token's experts live on, in words: where
    its groups lie (whole on nodes, or across them) and the remote nodes a token reaches
    against uniform routing's. None without a group limit or within one node."""
    nodes = -(-group // per_node)
    if groups is None or nodes <= 1:
        return None
    n_group, topk_group = groups
    size = experts // n_group
    ranges = node_expert_ranges(experts, group, per_node)
    bounds = {g * size for g in range(n_group + 1)}
    edges = {lo for lo, _ in ranges} | {hi for _, hi in ranges}
    if edges <= bounds:
        held = {(hi - lo) // size for lo, hi in ranges}
        where = (
            f"{'/'.join(map(str, sorted(held)))} whole group{'s' if max(held) > 1 else ''} a node"
        )
    elif bounds <= edges:
        where = f"each group of {size} experts over {nodes // n_group} nodes"
    else:
        where = f"groups of {size} experts not lined up with the nodes' experts"
    grouped = remote_nodes_per_token(group, per_node, topk, experts, groups)
    uniform = remote_nodes_per_token(group, per_node, topk)
    return (
        f"group-limited routing (n_group {n_group}, topk_group {topk_group}; {where}): "
        f"{grouped:.2f} remote nodes a token ({uniform:.2f} if routed over every expert)"
    )


def distinct_ranks_per_token(experts: int, topk: int, ranks: int) -> float:
    """Ranks a token's ``topk`` distinct experts live on, on average, when ``experts`` are
    placed ``experts // ranks`` per rank and a token's experts are drawn uniformly:
    ``ranks (1 - C(E - E/ranks, k) / C(E, k))``. DeepEP's normal kernels send a token once per
    such rank."""
    if ranks <= 1:
        return 1.0
    other = experts - experts // ranks
    miss = 1.0
    for j in range(topk):
        miss *= max(other - j, 0) / (experts - j)
    return ranks * (1.0 - miss)


def dispatch_bytes(
    tokens: float | np.ndarray, topk: int, hidden: int, fp8: bool = True
) -> float | np.ndarray:
    """Bytes one GPU sends to dispatch ``tokens`` to their ``topk`` experts."""
    per = hidden + 4 * (hidden // FP8_SCALE_BLOCK) if fp8 else 2 * hidden
    return tokens * topk * per


def combine_bytes(tokens: float | np.ndarray, topk: float, hidden: int) -> float | np.ndarray:
    """Bytes one GPU receives to combine its ``tokens``' expert outputs (bf16)."""
    return tokens * topk * hidden * 2


def comm_seconds(
    kind: str,
    message_bytes: np.ndarray,
    n_gpus: int,
    hw: HardwareSpec,
    efficiency: float = LINK_EFFICIENCY,
    network: bool = False,
) -> np.ndarray:
    """Seconds of one collective of ``kind`` over ``n_gpus`` GPUs, per message (vectorised).

    ``message_bytes`` is one rank's message: its tensor for all-reduce, its share for all-gather
    and reduce-scatter, everything it sends for dispatch, combine, all-to-all and p2p.
    ``network=True`` sends over the scale-out NIC even within a node, as DeepEP's low-latency
    kernels do (pure RDMA).
    """
    msg = np.asarray(message_bytes, dtype=np.float64)
    if n_gpus <= 1 and kind != "p2p":
        return np.zeros_like(msg)
    if network and hw.scale_out_bytes_per_s:
        bw, lat = hw.scale_out_bytes_per_s, hw.scale_out_latency_s or 0.0
    else:
        bw, lat = hw.link(n_gpus)
    bw = bw * efficiency
    n = float(n_gpus)
    if kind == "all_reduce":
        ring = 2 * (n - 1) * lat + 2 * (n - 1) / n * msg / bw
        one_shot = lat + (n - 1) * msg / bw
        return np.minimum(ring, one_shot)
    if kind in ("all_gather", "reduce_scatter"):
        return (n - 1) * lat + (n - 1) * msg / bw
    return lat + msg / bw  # dispatch, combine, all_to_all, p2p


def isca_comm_bound_tpot(
    tokens: int = 32,
    experts_per_token: int = 9,
    hidden: int = 7000,
    dispatch_bytes_per_element: int = 1,
    combine_bytes_per_element: int = 2,
    bandwidth_bytes_per_s: float = 50e9,
    layers: int = 61,
) -> float:
    """The communication-bound time per output token of the DeepSeek-V3 ISCA 2025 paper
    (section 2.3.2): under two-batch overlap each layer takes two EP rounds, a round moves
    ``(dispatch + combine bytes) x tokens x experts x hidden`` at the link bandwidth, no
    latency, no computation. With the paper's own inputs: 14.76 ms (67 tokens/s) at 50 GB/s,
    0.82 ms at 900 GB/s."""
    per_round = (
        (dispatch_bytes_per_element + combine_bytes_per_element)
        * tokens
        * experts_per_token
        * hidden
        / bandwidth_bytes_per_s
    )
    return layers * 2 * per_round


def kv_transfer_seconds(hw: HardwareSpec, nbytes: float, network: bool | None = None) -> float:
    """Seconds to move ``nbytes`` from one prefill rank to one decode rank: over the scale-out
    network (the link model: the kernel model has no network term) when ``network`` (None:
    whenever the device has a network figure), else GPU to GPU over the scale-up link as the
    kernel model's ``p2p``."""
    if network is None:
        network = bool(hw.scale_out_bytes_per_s)
    if network and hw.scale_out_bytes_per_s:  # the pools talk over the network
        bw, lat = hw.scale_out_bytes_per_s, hw.scale_out_latency_s or 0.0
        return lat + nbytes / (bw * LINK_EFFICIENCY)
    hw.link(2)  # a missing scale-up figure: named, with its fix

    kernel = Kernel(
        "KV transfer",
        "p2p",
        "bf16",
        0,
        round(nbytes),
        shape={"message_bytes": round(nbytes), "n_gpus": 2},
    )
    return predict_kernels([kernel], hw)[0].seconds


@dataclass(frozen=True)
class KVTransfer:
    """One request's KV cache handed from its prefill group to its decode group."""

    seconds: float
    #: the link it crosses, in words: the network or the scale-up link, with its name
    link: str
    #: the most bytes one rank sends or receives (the ranks move their shares in parallel)
    rank_bytes: int
    #: the whole request's cache (every layer, every head once)
    total_bytes: int

    def describe(self) -> str:
        return f"over {self.link}; each rank's share in parallel"


def kv_transfer(
    hw: HardwareSpec,
    m: Any,
    kv: Any,
    p_lay: Any,
    d_lay: Any,
    context: int,
) -> KVTransfer:
    """One request's ``context`` tokens of cache sent from its prefill group (``p_lay``: its
    ``tp x pp`` ranks) to its decode group (``d_lay``), the ranks' shares in parallel, each
    rank through its own link (the catalogue's network figures are per GPU: a NIC a GPU).

    A prefill rank sends its stage's cache split over the stage's tensor ranks: a K/V head
    shard is its own rank's; a part every rank holds (MLA's latent, a K/V head replicated where
    the ranks outnumber the heads) can go from any of them, so the sending splits too
    (``stage / tp``). A decode rank receives all it holds (MLA's latent whole on every tensor
    rank), so a replicated cache is bounded by the receiving side. The time is the larger of
    the two shares over the link the pools share: the scale-up link when both pools fit in one
    scale-up domain (a node, or an NVL72 rack's 72 GPUs: :attr:`HardwareSpec.scale_up_gpus`),
    the network otherwise. From recall, not a shared table: the engines' transfer backends
    (NIXL, Mooncake) move each rank's pages from its own GPU."""
    whole_stage = kv_bytes_per_sequence_per_gpu(m, kv, replace(p_lay, tp=1), context)
    send = -(-whole_stage // p_lay.tp)
    recv = kv_bytes_per_sequence_per_gpu(m, kv, d_lay, context)
    total = kv_bytes_per_sequence_per_gpu(m, kv, replace(p_lay, tp=1, pp=1), context)
    per_rank = max(send, recv)
    domain = hw.scale_up_gpus
    together = domain is not None and p_lay.gpus + d_lay.gpus <= domain
    network = bool(hw.scale_out_bytes_per_s) and not together
    if network:
        link = f"the network: {hw.scale_out_link}" if hw.scale_out_link else "the network"
    else:
        name = hw.scale_up_link
        link = f"the scale-up link: {name}" if name else "the scale-up link"
    return KVTransfer(kv_transfer_seconds(hw, per_rank, network), link, per_rank, total)
