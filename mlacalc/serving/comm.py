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
  (forwarded to its experts over NVLink), as DeepEP's internode kernels do;
- point-to-point (pipeline stages): one step, the activations of the step.

``LINK_EFFICIENCY`` = 0.8 is the achieved share of a link that the DeepSeek-V3 ISCA 2025 paper
(arXiv 2505.09343, sections 4.1 and 4.3) reports for both kinds of link: "use 40GB/s for
effective bandwidth" of 50 GB/s InfiniBand, and "200GB/s bandwidth (of which about 160GB/s can
actually be achieved)" on H800 NVLink. It is not fitted to any figure the tests compare with.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
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
    "isca_comm_bound_tpot",
    "kv_transfer",
    "kv_transfer_seconds",
    "network_words",
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


def remote_nodes_per_token(group: int, per_node: int, topk: int) -> float:
    """Other nodes a token's ``topk`` experts live on, on average, when its experts spread
    uniformly over the ``ceil(group / per_node)`` nodes of an expert-parallel group."""
    nodes = -(-group // per_node)
    return (nodes - 1) * (1 - (1 - 1 / nodes) ** topk) if nodes > 1 else 0.0


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
