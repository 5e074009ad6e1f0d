"""The time of one training step on a parallel layout, from the kernel time model.

Layout (Megatron-LM's ranks): ``tp`` tensor-parallel ranks, ``pp`` pipeline stages, ``dp``
data-parallel ranks, ``cp`` context-parallel ranks (``tp x cp x pp x dp`` GPUs; the
sequence split over ``cp``, its K and V passed around a ring: docs/training.md, "Context
parallelism"); ``ep`` expert-parallel ranks laid over the ``tp x dp`` ranks of a stage
(``ep`` divides ``tp x cp x dp``; each holds ``E / ep`` routed experts whole,
:func:`ep_group`).
A step runs ``global_batch / (micro_batch x dp)`` micro-batches through the pipeline with the
1F1B schedule, then reduces the gradients over the data-parallel ranks and steps the optimizer.

One GPU's kernels for one micro-batch, on each pipeline stage its own layers
(:func:`stage_layer_ids`, :func:`layer_calls`; the embedding on the first stage, the final
norm and the head on the last; the slowest stage sets the pace):

- forward: the model step's kernels (:func:`mlacalc.training.flops.forward_kernels`) sharded as
  Megatron-LM shards them: column-parallel projections (queries, MLA's up-projections, FFN up)
  split their outputs over ``tp`` (GQA's key/value projection up to ``n_kv`` ranks, each
  rank computing ``ceil(n_kv / tp)`` whole heads beyond), row-parallel ones (output
  projection, FFN down) their inputs,
  the attention core its query heads (its K/V heads and their bytes as the key/value
  projection holds them, ``ceil(n_kv / tp)`` whole heads; MLA's latent whole), the head its
  vocabulary;
  MLA's down-projections and the router are replicated; element-wise work is split (sequence
  parallelism); the routed experts are grouped GEMMs over the rank's ``E / ep`` experts, each
  receiving an even share of the tokens of its expert-parallel group (``tokens / tp`` per rank);
- backward: each GEMM as its two gradient GEMMs (input and weight, shapes transposed); the
  attention core as its class at the backward's FLOPs (the flash backward: twice the forward
  plus the recomputed scores; the class's rate at those FLOPs, not the forward's: DeepSeek-V2's
  expanded core at 4K reaches 1.34x the forward's rate, docs/training.md); the absorbed
  path's materialized scores, softmax and values as GEMMs and an element-wise pass;
  element-wise kernels move twice their forward bytes;
- the loss on the last stage: Megatron-LM's vocab-parallel cross-entropy on the logits upcast
  to fp32 (:func:`loss_kernels`: element-wise passes over the rank's ``V / tp`` slice, 38
  bytes a logit forward and 14 backward), not recomputed;
- recomputation: the recomputed kernels again (forward), and under full recompute the
  layers' tensor-, expert- and context-parallel collectives of the forward again;
- communication, by the link model of :mod:`mlacalc.serving.comm` (scale-up link within a
  node or an NVLink domain of several, an NVL72 rack; the scale-out network beyond), added
  to the compute or, with ``overlap`` (a schedule such as DeepSeek's DualPipe that hides
  it), overlapped with it (the longer of the two):
  tensor parallelism with sequence parallelism, an all-gather and a reduce-scatter of the
  layer's activations around attention and around the FFN, forward and backward; expert
  parallelism, a dispatch (fp8 with fp8 training) and a combine (bf16), forward and backward,
  as DeepEP's normal kernels send them (every routed copy within a node; across nodes one copy
  per remote node a token's experts live on, experts spread evenly or, under DeepSeek's
  group-limited routing, within its groups,
  :func:`~mlacalc.serving.comm.remote_nodes_per_token`); pipeline stages, the activations
  of a micro-batch forward and their gradients backward; data
  parallelism, once per step, a reduce-scatter of the gradients and an all-gather of the
  weights (ZeRO-1), each stage's hidden behind its own last backward up to its length and
  the backward the stages before it still run (:func:`_dp_tail`).

With ``dtype="fp32"`` (``precision="fp32"``) activations are 4 bytes (the element-wise kernels
and the communication move twice the bytes) and the matmuls (GEMMs, attention) run on TF32
tensor cores: their compute term :func:`tf32_slowdown` times longer (half the dense bf16 rate
where the device file gives no ``fp32`` peak).

With ``comm_sms`` (DeepSeek-V3 gives 20 of an H800's 132 SMs to communication while it
overlaps), the compute kernels take ``sm_count / (sm_count - comm_sms)`` longer.

Step time = micro-batches ``x`` the slowest stage's micro-batch time ``+`` the bubble, the
other stages' micro-batch times ``/ vp`` (``vp`` virtual stages under the interleaved
schedule, 1 under 1F1B; ``(pp - 1) / vp`` micro-batch times where the stages are alike)
``+`` the exposed data-parallel time ``+`` the optimizer step (an element-wise kernel
reading and writing the rank's weights, gradients and states).
"""

from __future__ import annotations

import math
import re
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from mlacalc.cost.engine import attention_cost
from mlacalc.cost.model_step import FFN_ACTIVATION_FLOPS_PER_ELEMENT
from mlacalc.cost.params import expert_shape
from mlacalc.hardware.catalogue import HardwareSpec, load_hardware
from mlacalc.models.architecture import kv_head_share, layer_pattern
from mlacalc.models.loading import ModelConfig
from mlacalc.report import attention_kind_labels
from mlacalc.serving.comm import (
    combine_bytes,
    comm_seconds,
    dispatch_bytes,
    remote_nodes_per_token,
)
from mlacalc.serving.layout import kv_heads_degrees, kv_heads_unsplit
from mlacalc.serving.provenance import engine_profile_of
from mlacalc.timemodel.kernel_time import predict_kernels
from mlacalc.timemodel.profile import Profile
from mlacalc.training.flops import (
    SCHEDULES,
    core_kinds,
    engine_impl,
    forward_kernels,
    score_flops,
)
from mlacalc.training.lora import (
    NF4_BYTES_PER_PARAM,
    adapted_matrices,
    block_layers,
    layer_blocks,
)
from mlacalc.words import arguments as args
from mlacalc.words.dtypes import dtype_bits
from mlacalc.words.engines import DEFAULT_ENGINE
from mlacalc.words.errors import InvalidArgumentError
from mlacalc.words.kernels import Kernel

__all__ = [
    "Layout",
    "StageParams",
    "StageTime",
    "StepTime",
    "check_schedule",
    "chunk_sizes",
    "layer_calls",
    "loss_kernels",
    "make_layout",
    "mtp_kernels",
    "mtp_layers",
    "shard",
    "stage_layer_ids",
    "step_time",
]

_COLUMN = {"q_proj", "q_b_proj", "kv_b_proj", "dense_ffn_up", "shared_experts_up", "eh_proj"}
_ROW = {"o_proj", "dense_ffn_down", "shared_experts_down"}
_REPLICATED = {"q_a_proj", "kv_a_proj", "qkv_a_proj", "router"}
_BIG = 1 << 24


@dataclass(frozen=True)
class Layout:
    """A training layout: parallel ranks and batch sizes (sequences)."""

    tp: int
    pp: int
    dp: int
    ep: int
    micro_batch: int
    global_batch: int
    #: context-parallel ranks: each sequence split over ``cp`` GPUs (:func:`make_layout`)
    cp: int = 1
    #: virtual pipeline stages a GPU holds (Megatron-LM's interleaved 1F1B schedule: each
    #: stage's layers cut into ``vp`` chunks of ``L / (pp vp)`` layers, placed round-robin)
    vp: int = 1
    #: the layers each pipeline stage holds (``pp`` counts); () for the even split
    #: (:func:`stage_layer_ids`)
    stage_layers: tuple[int, ...] = ()

    @property
    def gpus(self) -> int:
        return self.tp * self.cp * self.pp * self.dp

    @property
    def micro_batches(self) -> int:
        return self.global_batch // (self.micro_batch * self.dp)

    def to_dict(self) -> dict[str, int]:
        return {**self.__dict__, "gpus": self.gpus, "micro_batches": self.micro_batches}


#: GEMMs fp8-mixed leaves in bf16: the attention core's and the output head
_KEPT_BF16 = frozenset({"scores", "pv", "lm_head"})


#: The widest tensor degree a KV-head refusal suggests beyond the one asked for: an 8-GPU
#: node's (a layout is not yet tied to a GPU here; a wider ``--tp``, as on an NVL72 rack,
#: keeps its own width as the bound). ``--tp 7`` on 4 KV heads had suggested 28.
_NODE_TP = 8


def make_layout(
    m: ModelConfig,
    tp: Any = 1,
    pp: Any = 1,
    dp: Any = 1,
    ep: Any = 1,
    micro_batch: Any = 1,
    global_batch: Any = None,
    cp: Any = 1,
    seq_len: int | None = None,
    virtual_stages: Any = 1,
    stage_layers: Any = None,
) -> Layout:
    """A checked layout for ``m`` (``global_batch`` defaults to one micro-batch per rank);
    ``cp`` context-parallel ranks split each sequence of ``seq_len`` tokens into ``2 cp``
    equal chunks, two a rank (the load-balanced split of causal attention);
    ``virtual_stages`` chunks of layers a pipeline stage holds under the interleaved schedule
    (:func:`check_virtual_stages`); ``stage_layers`` the layers of each pipeline stage
    (:func:`check_stage_layers`; None: an even split)."""
    tp, pp, dp, ep, cp = (
        args.count(n, v, _BIG)
        for n, v in (("tp", tp), ("pp", pp), ("dp", dp), ("ep", ep), ("cp", cp))
    )
    if cp > 1 and seq_len is not None and seq_len % (2 * cp):
        raise InvalidArgumentError(
            "cp",
            f"{cp} context-parallel ranks split a sequence into {2 * cp} equal chunks (two a "
            f"rank), which {seq_len:,} tokens do not; use a cp whose 2 cp divides the sequence",
        )
    micro_batch = args.count("micro_batch", micro_batch, _BIG)
    if global_batch is None:
        global_batch = micro_batch * dp
    global_batch = args.count("global_batch", global_batch, 1 << 40)
    if global_batch % (micro_batch * dp):
        raise InvalidArgumentError(
            "global_batch",
            f"{global_batch:,} sequences do not split into micro-batches of {micro_batch} on "
            f"{dp} data-parallel rank{'s' if dp != 1 else ''}; use a multiple of "
            f"{micro_batch * dp:,} ("
            + " or ".join(f"{n:,}" for n in _multiples(global_batch, micro_batch * dp))
            + ")",
        )
    if m.num_attention_heads % tp:
        raise InvalidArgumentError(
            "tp", f"{m.label}'s {m.num_attention_heads} heads do not split over {tp} ranks"
        )
    n_kv = kv_heads_unsplit(m, tp)
    if n_kv:  # the serving rule (docs/training.md, "KV heads over tensor ranks")
        raise InvalidArgumentError(
            "tp",
            f"{tp} tensor ranks neither split nor copy whole the {n_kv} KV heads "
            f"(num_key_value_heads) of {m.label}: use "
            f"{kv_heads_degrees(m, tp, n_kv, most=max(tp, _NODE_TP))}, or a "
            f"num_key_value_heads that {tp} divides or is a multiple of",
        )
    if pp > m.num_hidden_layers:
        raise InvalidArgumentError(
            "pp", f"{pp} stages for {m.num_hidden_layers} layers: at most one stage per layer"
        )
    if ep > 1 and not m.is_moe:
        raise InvalidArgumentError("ep", f"{m.label} has no experts to spread over {ep} ranks")
    # Megatron-Core folds the expert layout over a stage's tp x cp x dp ranks (from recall)
    if (dp * cp * tp) % ep or (m.is_moe and m.n_routed_experts % ep):
        kinds, sizes = "data-parallel x tensor-parallel", f"{dp} x {tp}"
        if cp > 1:
            kinds, sizes = (
                "data-parallel x context-parallel (--cp) x tensor-parallel",
                f"{dp} x {cp} x {tp}",
            )
        raise InvalidArgumentError(
            "ep",
            f"{ep} expert-parallel ranks must divide the {m.n_routed_experts} experts and the "
            f"{dp * cp * tp:,} {kinds} ranks ({sizes}) they are laid over",
        )
    lay = Layout(tp, pp, dp, ep, micro_batch, global_batch, cp)
    lay = Layout(**{**lay.__dict__, "stage_layers": check_stage_layers(m, pp, stage_layers)})
    return Layout(**{**lay.__dict__, "vp": check_virtual_stages(m, lay, virtual_stages)})


def check_stage_layers(m: ModelConfig, pp: int, value: Any) -> tuple[int, ...]:
    """The layers of each pipeline stage, given as ``pp`` counts (``"7,8,8,7"`` or a
    sequence) or as ``"FIRST,..,LAST"`` (the first and last stages' counts, the stages between
    splitting the rest evenly: Megatron-Core's ``--decoder-first-pipeline-num-layers`` and
    ``--decoder-last-pipeline-num-layers``, which need the rest to divide, from recall); ()
    for None (the even split, :func:`stage_layer_ids`). Refused in one line naming
    ``stage_layers``: a count not a whole number, a stage with no layers, counts not one a
    stage or not summing to the model's layers."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return ()
    L = m.num_hidden_layers
    use = "give one count a stage (e.g. 7,8,8,7) or FIRST,..,LAST (e.g. 7,..,7)"
    if isinstance(value, str):
        items: list[Any] = [x.strip() for x in value.split(",")]
    elif isinstance(value, (list, tuple)):
        items = list(value)
    else:
        raise InvalidArgumentError(
            "stage_layers", f"takes counts, got {args.show_value(value)}: {use}"
        )
    if items.count("..") > 1 or (".." in items and len(items) == 1):
        raise InvalidArgumentError(
            "stage_layers", f"'..' stands for the stages between the given ones, once: {use}"
        )
    counts: list[int | None] = []
    for x in items:
        if x == "..":
            counts.append(None)
            continue
        n = args.whole(x) if not isinstance(x, str) else (int(x) if _digits(x) else None)
        if n is None:
            raise InvalidArgumentError(
                "stage_layers",
                f"got {x!r}, where each count is a whole number of layers (or '..'): {use}",
            )
        if n < 1:
            raise InvalidArgumentError(
                "stage_layers",
                f"a stage of {n} layers: every pipeline stage holds at least one; {use}",
            )
        counts.append(n)
    given = [n for n in counts if n is not None]
    if None in counts:
        middle = pp - len(given)
        left = L - sum(given)
        if middle < 1 or left < middle or left % middle:
            raise InvalidArgumentError(
                "stage_layers",
                f"the {max(middle, 0)} stages between the given ones do not split the "
                f"{left:,} layers left of {m.label}'s {L:,} evenly (at least one each): "
                "give every stage's count, one a stage",
            )
        at = counts.index(None)
        counts[at : at + 1] = [left // middle] * middle
    if len(counts) != pp:
        raise InvalidArgumentError(
            "stage_layers",
            f"got {len(counts)} count{'s' * (len(counts) != 1)} for {pp} pipeline stages "
            f"(pp {pp}): {use}",
        )
    if sum(given := [int(n) for n in counts if n is not None]) != L:
        raise InvalidArgumentError(
            "stage_layers",
            f"the counts sum to {sum(given):,} layers and {m.label} has {L:,}: make them sum "
            f"to {L:,}",
        )
    return tuple(given)


def _multiples(n: int, unit: int) -> list[int]:
    """The multiples of ``unit`` on either side of ``n`` (the one above alone below ``unit``):
    what a global batch that does not split is offered."""
    below = n // unit * unit
    return ([below] if below else []) + [below + unit]


def _digits(text: str) -> bool:
    """Whether ``text`` is a whole number written out (a sign allowed, so -1 is said as a
    stage without layers)."""
    return re.fullmatch(r"[+-]?[0-9]+", text) is not None


def check_schedule(lay: Layout, schedule: Any) -> str:
    """The pipeline schedule, refused in one line where unknown, or ``zb-h1`` with the
    interleaved schedule's virtual stages (ZB-H1 is a schedule of whole stages)."""
    text = str(schedule).strip().lower()
    if text not in SCHEDULES:
        raise InvalidArgumentError(
            "schedule",
            f"{schedule!r} is not a pipeline schedule: use one of {', '.join(SCHEDULES)}",
        )
    if text == "zb-h1" and lay.vp > 1:
        raise InvalidArgumentError(
            "schedule",
            f"zb-h1 splits whole stages' backwards, not {lay.vp} virtual stages' chunks: use "
            "virtual_stages 1, or schedule 1f1b",
        )
    return text


def check_virtual_stages(m: ModelConfig, lay: Layout, virtual_stages: Any) -> int:
    """The virtual stages of Megatron-LM's interleaved 1F1B schedule (from recall of its
    ``--num-layers-per-virtual-pipeline-stage`` and its schedule's checks), refused where it
    cannot run: with one pipeline stage (nothing to interleave), where the layers do not cut
    into ``pp x v`` equal chunks, or where the micro-batches a step are not a multiple of
    ``pp`` (the schedule runs them in groups of ``pp``)."""
    v = args.count("virtual_stages", virtual_stages, _BIG)
    if v == 1:
        return v
    L = m.num_hidden_layers
    if lay.pp == 1:
        raise InvalidArgumentError(
            "virtual_stages",
            f"{v} virtual stages interleave a pipeline, and pp is 1: give pp > 1, or "
            "virtual_stages 1",
        )
    if lay.stage_layers:  # uneven stages: each cut into v chunks, a layer each at least
        short = [(s, n) for s, n in enumerate(lay.stage_layers) if n < v]
        if short:
            s, n = short[0]
            raise InvalidArgumentError(
                "virtual_stages",
                f"stage {s}'s {n} layers (stage_layers) do not cut into {v} chunks of a layer "
                f"or more: use virtual_stages {min(lay.stage_layers)} or fewer",
            )
    elif L % (lay.pp * v):
        fits = [x for x in range(2, L // lay.pp + 1) if L % (lay.pp * x) == 0]
        hint = f"one of {', '.join(map(str, fits[:6]))}" if fits else "1 (none divides them)"
        raise InvalidArgumentError(
            "virtual_stages",
            f"{m.label}'s {L} layers do not cut into pp x virtual_stages = {lay.pp} x {v} "
            f"equal chunks: use {hint}, or stage_layers to split them unevenly",
        )
    if lay.micro_batches % lay.pp:  # the batch is what to change: named as its field
        raise InvalidArgumentError(
            "global_batch",
            f"the interleaved schedule (virtual_stages {v}) runs micro-batches in groups of "
            f"pp = {lay.pp}, and a step has {lay.micro_batches:,} a rank: use a global_batch "
            f"a multiple of {lay.pp * lay.micro_batch * lay.dp:,} (pp x micro_batch x dp), "
            "or virtual_stages 1",
        )
    return v


def shard(
    k: Kernel, m: ModelConfig, lay: Layout, n_kv: int | None = None, per_stage: bool = False
) -> list[Kernel]:
    """One GPU's share of a forward kernel under the layout (the layers of one stage: its
    calls ``1 / pp`` of the model's, rounded up, or as given with ``per_stage``);
    ``n_kv``: the K/V heads of the kernel's layer (:func:`layer_kv_heads`; by default the
    model's)."""
    tp = lay.tp
    calls = k.calls if k.calls == 1 or per_stage else math.ceil(k.calls / lay.pp)
    s = dict(k.shape)
    flops, nbytes = k.flops, k.bytes
    if k.kind == "gemm":
        if k.name == "kv_proj" and not m.is_mla:  # whole K/V heads: replicated beyond n_kv
            share = kv_head_share(n_kv or m.num_key_value_heads, tp)
            s["n"] = max(1, math.floor(s["n"] * share))
            flops, nbytes = math.floor(flops * share), math.floor(nbytes * share)
        elif k.name in _COLUMN or k.name == "lm_head":
            s["n"] = max(1, s["n"] // tp)
            flops, nbytes = flops // tp, nbytes // tp
        elif k.name in _ROW:
            s["k"] = max(1, s["k"] // tp)
            flops, nbytes = flops // tp, nbytes // tp
        elif k.name not in _REPLICATED:  # the absorbed per-head products
            s["groups"] = max(1, s["groups"] // tp)
            flops, nbytes = flops // tp, nbytes // tp
    elif k.kind in core_kinds():  # query heads split; K/V heads whole, as kv_proj holds them
        share = kv_head_share(s["n_kv"], tp)  # MLA: its heads (expanded) or its one latent
        q_o = s["batch"] * s["q_len"] * s["n_heads"] * (s["head_dim_qk"] + s["head_dim_v"])
        q_o *= dtype_bits(k.dtype) // 8  # the query read and the output written
        flops, nbytes = flops // tp, q_o // tp + math.floor((nbytes - q_o) * share)
        s["n_heads"] = s["n_heads"] // tp
        s["n_kv"] = int(s["n_kv"] * share)
    elif k.kind == "moe":
        return _experts(k, m, lay, calls)
    else:
        flops, nbytes = flops // tp, nbytes // tp
        s = {"elements": max(1, s.get("elements", 1) // tp)}
    return [_context_share(Kernel(k.name, k.kind, k.dtype, flops, nbytes, calls, s), lay.cp)]


def _context_share(k: Kernel, cp: int) -> Kernel:
    """A context-parallel rank's share of a (tensor-parallel) kernel: its ``1 / cp`` of the
    tokens. A GEMM keeps its weight and runs ``m / cp`` rows; an element-wise kernel
    ``1 / cp`` of the elements. The attention core is left whole: :func:`step_time` times it
    over the whole sequence and gives each rank ``1 / cp`` of that time, as the load-balanced
    (zig-zag) split gives each rank ``1 / cp`` of the causal work (from recall)."""
    if cp == 1 or k.kind in core_kinds():
        return k
    s = dict(k.shape)
    if k.kind == "gemm":
        weight = s["n"] * s["k"] * s.get("groups", 1) * max(1, dtype_bits(k.dtype) // 8)
        weight = min(weight, k.bytes)
        s["m"] = max(1, s["m"] // cp)
        nbytes = weight + (k.bytes - weight) // cp
    else:
        s["elements"] = max(1, s.get("elements", 1) // cp)
        nbytes = k.bytes // cp
    return Kernel(k.name, k.kind, k.dtype, k.flops // cp, nbytes, k.calls, s)


def layer_kv_heads(kernels: list[Kernel], m: ModelConfig) -> list[int]:
    """The K/V heads of each kernel's layer: those of the attention core that follows it (a
    layer kind's own: Gemma 4's full layers 2 and sliding layers 8, MiMo-V2-Flash's 4 and 8),
    the model's after the last core."""
    out, n_kv = [], m.num_key_value_heads
    for k in reversed(kernels):
        if k.kind in core_kinds():
            n_kv = k.shape["n_kv"]
        out.append(n_kv)
    return out[::-1]


def _experts(k: Kernel, m: ModelConfig, lay: Layout, calls: int) -> list[Kernel]:
    """The routed experts of one rank as grouped GEMMs (balanced routing) with their
    activation between them."""
    f = expert_shape(m)
    local = m.n_routed_experts // lay.ep
    # the rank's tokens (sequence parallel, and its 1 / cp of the sequence)
    tokens = k.shape["tokens"] // (lay.tp * lay.cp)
    per_expert = max(1, tokens * m.num_experts_per_tok * lay.ep // m.n_routed_experts)
    up = 2 * per_expert * f.up_width * f.hidden * local
    down = 2 * per_expert * f.hidden * f.inter * local
    w = 2 if k.dtype != "fp8" else 1
    # the activation between the two grouped GEMMs (SwiGLU on the gate and up halves), a pass
    # of its own as the shared experts' is: bf16 in and out (an inference MoE kernel fuses it)
    acts = per_expert * local * f.inter
    return [
        Kernel(
            "experts_up",
            "gemm",
            k.dtype,
            up,
            local * f.up_width * f.hidden * w,
            calls,
            {"m": per_expert, "n": f.up_width, "k": f.hidden, "groups": local},
        ),
        Kernel(
            "experts_act",
            "elementwise",
            "bf16",
            FFN_ACTIVATION_FLOPS_PER_ELEMENT * acts,
            2 * per_expert * local * (f.up_width + f.inter),
            calls,
            {"elements": acts},
        ),
        Kernel(
            "experts_down",
            "gemm",
            k.dtype,
            down,
            local * f.inter * f.hidden * w,
            calls,
            {"m": per_expert, "n": f.hidden, "k": f.inter, "groups": local},
        ),
    ]


def _backward(k: Kernel, attention: str, frozen: bool = False) -> list[Kernel]:
    """The backward kernels of a forward kernel; ``frozen``: a weight GEMM's input gradient
    alone (LoRA's frozen weights take none; the adapters' ``lora_`` GEMMs take both)."""
    if k.kind == "gemm":
        s = k.shape
        dgrad = {**s, "n": s["k"], "k": s["n"]}
        wgrad = {**s, "m": s["k"], "k": s["m"]}
        out = [Kernel(k.name + "_dgrad", "gemm", k.dtype, k.flops, k.bytes, k.calls, dgrad)]
        if frozen and not k.name.startswith("lora_"):
            return out
        return [*out, Kernel(k.name + "_wgrad", "gemm", k.dtype, k.flops, k.bytes, k.calls, wgrad)]
    if k.kind in core_kinds():
        extra = score_flops(k) if attention == "flash" else 0
        return [
            Kernel(
                k.name + "_backward",
                k.kind,
                k.dtype,
                2 * k.flops + extra,
                2 * k.bytes,
                k.calls,
                k.shape,
            )
        ]
    return [Kernel(k.name + "_backward", k.kind, k.dtype, k.flops, 2 * k.bytes, k.calls, k.shape)]


def _adapter_kernels(
    m: ModelConfig, lay: Layout, seq_len: int, rank: int, targets: str, layers: Any = None
) -> list[Kernel]:
    """LoRA's adapters on one rank of a stage: ``x A`` and ``(x A) B`` for each adapted
    matrix, over the rank's ``T / cp`` tokens (gathered over the tensor-parallel ranks, as the
    base projection runs), ``B``'s output split over ``tp`` where the base is column-parallel
    and ``A``'s input where it is row-parallel; bf16; on the stage's ``layers`` (None: ``1 /
    pp`` of the model's, rounded up)."""
    tokens = lay.micro_batch * seq_len // lay.cp
    out = []
    for a in adapted_matrices(m, targets):
        if layers is None:
            calls = math.ceil(block_layers(m, a.block) / lay.pp)
        else:
            calls = sum(a.block in layer_blocks(m, i) for i in layers)
        if not calls:
            continue
        d_in = max(1, a.d_in // lay.tp) if a.split == "row" else a.d_in
        d_out = max(1, a.d_out // lay.tp) if a.split == "column" else a.d_out
        for name, n, k in ((f"lora_a_{a.name}", rank, d_in), (f"lora_b_{a.name}", d_out, rank)):
            out.append(
                Kernel(
                    name,
                    "gemm",
                    "bf16",
                    2 * tokens * n * k,
                    2 * (tokens * (n + k) + n * k),
                    calls,
                    {"m": tokens, "n": n, "k": k, "groups": 1},
                )
            )
    return out


def _dequantize(params: float, dtype: str) -> Kernel:
    """QLoRA's dequantization of a GPU's NF4 weights to the compute dtype (``dtype``) for one
    pass: an element-wise kernel reading each weight's 4 bits and its share of the block
    scales (:data:`mlacalc.training.lora.NF4_BYTES_PER_PARAM`) and writing it at the compute
    dtype's width, which the GEMM then reads as it reads an unquantized weight (bitsandbytes
    dequantizes a layer's weight before its matmul, from recall)."""
    n = math.ceil(params)
    width = 4 if dtype == "fp32" else 2
    return Kernel(
        "nf4_dequantize",
        "elementwise",
        "bf16",
        n,
        math.ceil(n * (NF4_BYTES_PER_PARAM + width)),
        1,
        {"elements": n},
    )


#: the bytes per logit Megatron-LM's vocab-parallel cross-entropy moves, each PyTorch operation
#: its own pass (from recall of ``_VocabParallelCrossEntropy``, unfused): forward, the upcast
#: (read 2, write 4), the row max (read 4), the max subtracted (4 + 4), the exponential in
#: place (4 + 4), the row sum (read 4) and the division into the softmax kept for the backward
#: (4 + 4): 38; backward, the softmax times the loss's gradient in place (4 + 4) and the
#: gradient cast back to the logits' bf16 (4 + 2): 14 (the one-hot subtraction at the targets
#: touches a logit a token). fp32 training has no casts: 32 and 8
LOSS_BYTES_PER_LOGIT = {"bf16": (38, 14), "fp32": (32, 8)}


def loss_kernels(m: ModelConfig, lay: Layout, seq_len: int, dtype: str) -> list[Kernel]:
    """The last stage's cross-entropy on one GPU, forward and backward: element-wise passes
    over its logits (its ``micro_batch x seq_len / cp`` tokens times ``V / tp`` of the
    vocabulary: under tensor parallelism each rank holds a slice and the row max and sum are
    all-reduced over the group, a few bytes a token, not counted), at
    :data:`LOSS_BYTES_PER_LOGIT`."""
    logits = lay.micro_batch * seq_len // lay.cp * max(1, m.vocab_size // lay.tp)
    fwd, bwd = LOSS_BYTES_PER_LOGIT["fp32" if dtype == "fp32" else "bf16"]
    return [
        Kernel(name, "elementwise", "fp32", 0, logits * b, 1, {"elements": logits})
        for name, b in (("cross_entropy", fwd), ("cross_entropy_backward", bwd))
    ]


def _materialized(k: Kernel) -> list[Kernel]:
    """An absorbed core with its probabilities kept: scores, softmax and values apart."""
    s = k.shape
    b, h, t = s["batch"], s["n_heads"], s["q_len"]
    e, d_c = s["head_dim_qk"], s["head_dim_v"]
    probs = b * h * t * t
    return [
        Kernel(
            "scores",
            "gemm",
            k.dtype,
            2 * b * h * t * t * e,
            2 * (b * t * (h + 1) * e + probs),
            k.calls,
            {"m": h * t, "n": t, "k": e, "groups": b},
        ),
        Kernel(
            "softmax", "elementwise", k.dtype, 5 * probs, 4 * probs, k.calls, {"elements": probs}
        ),
        Kernel(
            "pv",
            "gemm",
            k.dtype,
            2 * b * h * t * t * d_c,
            2 * (probs + b * t * (h + 1) * d_c),
            k.calls,
            {"m": h * t, "n": d_c, "k": t, "groups": b},
        ),
    ]


@dataclass(frozen=True)
class StepTime:
    """A training step's time and its parts (seconds)."""

    layout: Layout
    hardware: str
    step_s: float
    micro_batch_s: float
    forward_s: float
    backward_s: float
    recompute_s: float
    tp_comm_s: float
    ep_comm_s: float
    pp_comm_s: float
    bubble_s: float
    dp_comm_s: float
    dp_exposed_s: float
    optimizer_s: float
    #: the calibration profile that timed the kernels, and how it predicts this device
    #: ("calibrated on B200; GB200 by datasheet ratios from B200 ...")
    profile: str = ""
    calibration: str = ""
    #: context parallelism: the ring's K/V traffic a micro-batch (forward and backward) and
    #: the part the attention blocks do not hide (in the micro-batch, as the TP/EP/PP terms)
    cp_comm_s: float = 0.0
    cp_exposed_s: float = 0.0
    #: every pipeline stage's micro-batch, in order (:class:`StageTime`); the parts above are
    #: the slowest one's, which sets the pace
    stages: tuple[StageTime, ...] = ()
    slowest_stage: int = 0
    #: whether every kernel's layers were told (False: some spread evenly over the layers,
    #: :func:`layer_calls`)
    placed: bool = True
    #: the pipeline schedule (:data:`SCHEDULES`)
    schedule: str = "1f1b"

    def to_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items() if k not in ("layout", "stages")}
        stages = [st.to_dict() for st in self.stages]
        return {"layout": self.layout.to_dict(), **out, "stages": stages}


def _comm(kind: str, nbytes: float, n: int, hw: HardwareSpec, span: int) -> float:
    """One collective of ``n`` ranks whose group spans ``span`` consecutive GPUs: over the
    scale-up link where the span stays within one scale-up fabric (a node, or an NVL72 rack's
    72 GPUs: :attr:`HardwareSpec.scale_up_gpus`), over the network beyond. Before, the span
    was held to the node (a GB200 tray's 4 GPUs), so a GB200 TP8 group's all-gathers ran over
    the network (Llama-3-70B, 8K, TP8 PP4 DP8: 238.02 ms of tensor-parallel traffic a
    micro-batch where a B200 node's is 32.07)."""
    if n <= 1:
        return 0.0
    domain = hw.scale_up_gpus
    network = bool(domain and span > domain)
    return float(comm_seconds(kind, nbytes, n, hw, network=network))


def _ep_seconds(
    m: ModelConfig, lay: Layout, hw: HardwareSpec, tokens: float, fp8: bool, elem: int = 2
) -> float:
    """One dispatch and one combine of a rank's ``tokens`` (DeepEP's normal kernels: within a
    node every routed copy over the scale-up link; across nodes one copy per remote node the
    token's experts live on, over the network, forwarded within that node; a model's
    group-limited routing, ``n_group`` / ``topk_group``, bounds those nodes). ``elem`` bytes an
    activation element (4 under fp32 training) where the dispatch is not FP8, and in the
    combine."""
    k, d = m.num_experts_per_tok, m.hidden_size
    node = hw.scale_up_gpus or lay.ep  # an NVL72 rack's 72 GPUs are one fabric
    span, per_node = ep_group(lay, node)
    # across nodes, DeepSeek's group-limited routing bounds the nodes a token reaches (its
    # groups laid on the ranks in order, as the experts are: comm.remote_nodes_per_token)
    copies = (
        k
        if span <= node
        else remote_nodes_per_token(lay.ep, per_node, k, m.n_routed_experts, m.routing_groups)
    )
    wide = elem / 2  # dispatch_bytes and combine_bytes count bf16
    sent = (
        dispatch_bytes(tokens, copies, d, fp8) * (1 if fp8 else wide),
        combine_bytes(tokens, copies, d) * wide,
    )
    return sum(_comm(kind, b, lay.ep, hw, span) for kind, b in zip(("dispatch", "combine"), sent))


def _profile(hw: HardwareSpec, profile: Any) -> tuple[Profile, str]:
    """The profile that times a training step's kernels, and how it predicts ``hw``: the one
    given, else TensorRT-LLM's for the device, chosen as a serving step's is
    (:func:`~mlacalc.serving.provenance.engine_profile_of`: B200's own fit for Blackwell)."""
    prof, _, note = engine_profile_of(profile, DEFAULT_ENGINE, hw)
    return prof, prof.describe(hw.name, hw) + note


def _seconds(
    kernels: list[Kernel], hw: HardwareSpec, profile: Any, slower: float = 1.0, cp: int = 1
) -> float:
    """The kernels' predicted time; ``slower``: the matmul kernels' (GEMMs, attention) compute
    term that many times longer (fp32 training on TF32 tensor cores, :func:`tf32_slowdown`);
    ``cp``: the attention cores (timed over the whole sequence) count ``1 / cp`` of their
    time, a context-parallel rank's share (:func:`_context_share`)."""
    if not kernels:
        return 0.0
    store = _SECONDS.get()
    key = None if store is None else (id(hw), id(profile), slower, cp, *map(_kernel_key, kernels))
    hit = None if key is None else store.get(key)
    if hit is not None and hit[0] is hw and hit[1] is profile:
        return hit[2]
    matmul = {"gemm", *core_kinds()}
    cores = core_kinds()
    times = (
        predict_kernels(kernels, hw, profile)
        if store is None
        else _known(kernels, hw, profile, store)
    )
    out = sum(
        (t.seconds + (slower - 1.0) * t.compute_s * (k.kind in matmul))
        / (cp if k.kind in cores else 1)
        for k, t in zip(kernels, times, strict=True)
    )
    if store is not None:
        store[key] = (hw, profile, out)
    return out


#: :func:`_seconds` of the kernel lists already timed, by device, profile and the kernels'
#: every field, while a layout search runs (:func:`mlacalc.training.layout_search.memo`; None
#: otherwise, so that nothing outlives the search): it times the same stage's kernels for
#: every layout that shares tp, cp, ep, micro-batch and recompute policy (the device and
#: profile kept in the value and checked by identity). A context variable: a search on one
#: thread (the app serves each session on its own) neither sees nor ends another's store (a
#: module-level store set to None by one search's end failed another thread's pricing)
_SECONDS: ContextVar[dict[tuple, tuple[HardwareSpec, Any, Any]] | None] = ContextVar(
    "training_seconds", default=None
)


def _known(kernels: list[Kernel], hw: HardwareSpec, profile: Any, store: dict) -> list[Any]:
    """Each kernel's predicted time from :data:`_SECONDS` (by the kernel's every field, the
    device and the profile), those not there predicted together and kept: a stage's kernels
    recur in its backward's and other stages' lists, and a kernel's prediction is its own
    row's (the time model's terms are computed row by row)."""
    keys = [("kernel", id(hw), id(profile), *_kernel_key(k)) for k in kernels]
    held = [store.get(key) for key in keys]
    out = [h[2] if h and h[0] is hw and h[1] is profile else None for h in held]
    new = [i for i, t in enumerate(out) if t is None]
    times = predict_kernels([kernels[i] for i in new], hw, profile) if new else []
    for i, t in zip(new, times, strict=True):
        store[keys[i]] = (hw, profile, t)
        out[i] = t
    return out


def _kernel_key(k: Kernel) -> tuple:
    return (k.name, k.kind, k.dtype, k.flops, k.bytes, k.calls, *sorted(k.shape.items()))


def tf32_slowdown(hw: HardwareSpec) -> float:
    """How much longer an fp32 matmul computes than a bf16 one: the catalogue's dense ``fp32``
    peak where a device file gives one, else TF32 tensor cores at half the dense bf16 rate (the
    ratio of NVIDIA's datasheets from Ampere to Blackwell and AMD's MI300X, from recall: H100 SXM
    494.7 against 989.4 TFLOP/s; the shipped catalogue lists no TF32 or FP32 peak)."""
    fp32 = hw.peak_flops_per_s.get("fp32")
    return hw.peak("bf16") / fp32 if fp32 else 2.0


def _wide(kernels: list[Kernel]) -> list[Kernel]:
    """fp32 training: the element-wise kernels read and write 4-byte activations."""
    return [
        Kernel(k.name, k.kind, "fp32", k.flops, 2 * k.bytes, k.calls, k.shape)
        if k.kind == "elementwise"
        else k
        for k in kernels
    ]


def expert_dp(lay: Layout) -> int:
    """The ranks that hold the same routed experts: ``dp x cp x tp / ep`` (a rank holds its
    expert-parallel shard whole, so the shard repeats over the ``tp x dp`` ranks of the stage
    that ``ep`` does not span, and over the ``cp`` context-parallel ranks, which hold the same
    weights), over which ZeRO shards their states and their gradients are reduced
    (Megatron-LM's expert data-parallel group, context parallelism folded in as Megatron-Core
    folds it: from recall)."""
    return max(1, lay.dp * lay.cp * lay.tp // lay.ep)


def ring_bytes(m: ModelConfig, lay: Layout, seq_len: int, impl: str, elem: int = 2) -> int:
    """The bytes one context-parallel rank sends at one step of the ring, one layer: its K and
    V for its ``1 / cp`` of the micro-batch's tokens, as its tensor-parallel rank holds them.
    GQA/MQA: ``ceil(n_kv / tp)`` whole heads of ``d_k + d_v``; MLA expanded: the up-projected
    K and V, ``n_h / tp`` heads of ``d_nope + d_rope + d_v`` (Megatron-LM runs MLA's context
    parallelism on the expanded K and V, from recall); MLA absorbed: the latent and the RoPE
    key, ``d_c + d_rope`` a token, whole on every tensor-parallel rank. The ring makes
    ``cp - 1`` such steps a layer forward, and in the backward sends K, V and their gradients
    (twice the bytes) ``cp - 1`` times (TransformerEngine's ring, from recall)."""
    tokens = lay.micro_batch * seq_len // lay.cp
    if m.is_mla and impl != "expanded":
        width = m.kv_lora_rank + m.qk_rope_head_dim
    elif m.is_mla:
        heads = m.num_attention_heads // lay.tp
        width = heads * (m.qk_nope_head_dim + m.qk_rope_head_dim + m.v_head_dim)
    else:
        n_kv = m.num_key_value_heads
        heads = math.ceil(n_kv / lay.tp)  # whole heads, replicated beyond n_kv ranks
        width = heads * (m.head_dim + (m.v_head_dim or m.head_dim))
    return tokens * width * elem


def ep_group(lay: Layout, node: int) -> tuple[int, int]:
    """The GPUs an expert-parallel group spans and how many of its ranks share a node of
    ``node`` GPUs: ``ep`` consecutive GPUs, as many a node as the node holds, whatever ``dp``
    is (Megatron-Core's expert layout folded over the ``tp x cp x dp`` ranks of a stage,
    expert tensor parallelism 1: from recall). Before, ``ep`` dividing ``dp`` placed the group
    one rank of each of ``ep`` tensor-parallel groups, ``tp`` apart (``ep x tp`` GPUs), so the
    same model's expert traffic jumped when ``dp`` grew to a multiple of ``ep``."""
    return lay.ep, min(node, lay.ep)


def _dp_terms(
    lay: Layout,
    hw: HardwareSpec,
    params_per_gpu: float,
    expert_params_per_gpu: float,
    grad_bytes: int,
    zero: int,
    t_f: float,
    t_b: float,
    frozen: tuple[float, float] = (0.0, 0.0),
) -> tuple[float, float]:
    """The data-parallel traffic of a step and its exposed part. A gradient reduce-scatter
    and a weight all-gather, each once a step (ZeRO 0-1), the reduce-scatter every
    micro-batch (ZeRO-2 and 3: a sharded gradient buffer cannot accumulate), the all-gather
    twice every micro-batch, before its forward and before its backward (ZeRO-3: no gathered
    weights kept between micro-batches); over ``dp x cp`` ranks (the context-parallel ranks
    hold the same weights, and Megatron-LM reduces over its data-parallel group with context
    parallelism folded in: from recall), the routed experts' over :func:`expert_dp`.
    ``frozen`` (non-expert, expert) parameters a GPU train not (LoRA's base weights): no
    gradient, but ZeRO-3 shards them too, so they are gathered as the trained ones are."""
    rs = ag = 0.0
    dense = params_per_gpu - expert_params_per_gpu
    span = lay.dp * lay.cp * lay.tp
    groups = (
        (dense, frozen[0], lay.dp * lay.cp),
        (expert_params_per_gpu, frozen[1], expert_dp(lay)),
    )
    for params, still, ranks in groups:
        if ranks <= 1:
            continue
        if params > 0:
            rs += _comm("reduce_scatter", params / ranks * grad_bytes, ranks, hw, span)
        gathered = params + (still if zero >= 3 else 0.0)
        if gathered > 0:
            ag += _comm("all_gather", gathered / ranks * 2, ranks, hw, span)
    n_micro = lay.micro_batches
    rs_micro = rs if zero >= 2 else 0.0  # every micro-batch, hidden behind its backward
    ag_micro = ag if zero >= 3 else 0.0  # twice a micro-batch: behind its forward, backward
    once = (0.0 if zero >= 2 else rs) + (0.0 if zero >= 3 else ag)  # behind the last backward
    dp_comm = n_micro * (rs_micro + 2 * ag_micro) + once
    per_micro = max(0.0, ag_micro - t_f) + max(0.0, rs_micro + ag_micro - t_b)
    last = max(0.0, ag_micro - t_f) + max(0.0, rs_micro + ag_micro + once - t_b)
    return dp_comm, (n_micro - 1) * per_micro + last


def _optimizer_seconds(
    lay: Layout,
    hw: HardwareSpec,
    profile: Any,
    state_bytes_per_gpu: float,
    params_per_gpu: float,
    expert_params_per_gpu: float,
    zero: int,
) -> float:
    """The optimizer step: one element-wise pass over ``state_bytes_per_gpu`` (the bytes it
    reads and writes: under ZeRO each rank updates its shard only) for the parameters it
    updates (its shard under ZeRO 1-3: ``1 / (dp x cp)``, the experts' ``1 / expert_dp``)."""
    updated = params_per_gpu
    if zero >= 1:
        dense = params_per_gpu - expert_params_per_gpu
        updated = dense / (lay.dp * lay.cp) + expert_params_per_gpu / expert_dp(lay)
    kernel = Kernel(
        "optimizer",
        "elementwise",
        "fp32",
        0,
        int(state_bytes_per_gpu),
        1,
        {"elements": max(1, int(updated))},
    )
    return _seconds([kernel], hw, profile)


def chunk_sizes(layers: int, vp: int) -> list[int]:
    """A stage's ``layers`` cut into ``vp`` chunks as evenly as whole layers go, the longer
    chunks first: how :func:`stage_layer_ids` cuts each stage under the interleaved schedule
    (and how the memory model reads a stage's chunks)."""
    return [layers // vp + (c < layers % vp) for c in range(vp)]


def stage_layer_ids(num_layers: int, lay: Layout) -> list[list[int]]:
    """The layers each pipeline stage holds, in the order it runs them. Under 1F1B, one
    contiguous block a stage: ``lay.stage_layers`` where given, else an even split, the first
    ``L mod pp`` stages one layer more where the layers do not divide (Megatron-LM refuses
    such a split without its first / last stage counts, from recall; the serving layout's
    split). Interleaved (``vp > 1``): each stage's count cut into ``vp`` chunks as evenly as
    whole layers go (the longer chunks first), chunk ``c`` of every stage before chunk
    ``c + 1`` of any (Megatron-LM's round-robin placement, from recall)."""
    counts = list(lay.stage_layers) or chunk_sizes(num_layers, lay.pp)
    if lay.vp == 1:
        starts = [sum(counts[:s]) for s in range(lay.pp)]
        return [list(range(a, a + n)) for a, n in zip(starts, counts, strict=True)]
    chunks = [chunk_sizes(n, lay.vp) for n in counts]
    out: list[list[int]] = [[] for _ in range(lay.pp)]
    start = 0
    for c in range(lay.vp):
        for s in range(lay.pp):
            out[s] += range(start, start + chunks[s][c])
            start += chunks[s][c]
    return out


#: the forward kernels of a MoE layer's FFN (with the ``shared_experts_`` ones)
_MOE_KERNELS = frozenset({"router", "routed_experts", "moe_latent_in", "moe_latent_out"})


def layer_calls(
    kernels: list[Kernel], m: ModelConfig, kinds: tuple[str, ...]
) -> tuple[list[list[int]], bool]:
    """How many times each forward kernel of the whole model (:func:`forward_kernels`) runs on
    each layer: the embedding on layer 0, the final norm and the head on the last, an
    attention kind's kernels on the layers of that kind (``kinds``: the attention groups in
    the order the step runs them, :func:`mlacalc.report.attention_kind_labels`), the dense
    FFN's on the dense layers, a MoE block's on the MoE layers, the rest (norms) ``calls / L``
    on every layer. A kernel whose layers cannot be told so (its count disagrees) is spread
    as evenly as whole calls go, the first layers one more (the flag returned is False)."""
    L = m.num_hidden_layers
    pattern = [k.label for k in layer_pattern(m).layers]
    kind = attention_kind_labels([k.name for k in kernels], [k.calls for k in kernels], kinds)
    out, told = [], True
    for j, k in enumerate(kernels):
        if k.name == "embedding":
            on = [int(i == 0) for i in range(L)]
        elif k.name in ("final_norm", "lm_head"):
            on = [int(i == L - 1) for i in range(L)]
        elif kind and kind[j]:
            on = [int(p == kind[j]) for p in pattern]
        elif k.name.startswith("dense_ffn"):
            on = [int(not m.is_moe_layer(i)) for i in range(L)]
        elif k.name in _MOE_KERNELS or k.name.startswith("shared_experts"):
            on = [int(m.is_moe_layer(i)) for i in range(L)]
        else:
            on = [k.calls // L] * L
        if sum(on) != k.calls:  # not told: spread evenly, the first layers one more
            on, told = [k.calls // L + (i < k.calls % L) for i in range(L)], False
        out.append(on)
    return out, told


def mtp_layers(
    kernels: list[Kernel], on: list[list[int]], m: ModelConfig, n: int
) -> tuple[list[Kernel], list[list[int]]]:
    """The model's forward kernels and their calls on each layer (:func:`layer_calls`) with
    ``n`` multi-token-prediction modules appended as layers ``L .. L + n - 1`` (DeepSeek-V3's
    MTP, its config's ``num_nextn_predict_layers``; DeepSeek-V3 report section 2.2): each
    runs the last decoder layer's kernels once more (its attention and MoE block; the final
    norm and output head there stand for the module's own norm and the shared head), the
    shared embedding's lookup of the tokens one further on, two RMSNorms (``enorm`` and
    ``hnorm``, ``mtp_norms``) and the projection of their concatenation ``eh_proj``
    (tokens x 2h -> h; split over TP as a column-parallel layer, from recall of Megatron-LM's
    MTP block). ``n`` 0: the lists unchanged."""
    if not n:
        return kernels, on
    L, h = m.num_hidden_layers, m.hidden_size
    calls = [per + [per[L - 1] + (k.name == "embedding")] * n for k, per in zip(kernels, on)]
    head = next(k for k in kernels if k.name == "lm_head")
    norm = next(k for k in kernels if k.name == "final_norm")
    t = head.shape["m"]
    eh = Kernel("eh_proj", "gemm", head.dtype, 2 * t * 2 * h * h,
                dtype_bits(head.dtype) // 8 * (2 * h * h + t * 3 * h), n,
                {"m": t, "n": h, "k": 2 * h, "groups": 1})  # fmt: skip
    norms = Kernel("mtp_norms", norm.kind, norm.dtype, norm.flops, norm.bytes, 2 * n, norm.shape)
    return [*kernels, eh, norms], [*calls, [0] * L + [1] * n, [0] * L + [2] * n]


def mtp_kernels(m: ModelConfig, seq_len: int, micro_batch: int, impl: str) -> list[Kernel]:
    """The forward kernels of one micro-batch's MTP modules (:func:`mtp_layers`), each with
    its calls there, whole model on one GPU; [] for a model without them."""
    n = m.num_nextn_predict_layers
    if not n:
        return []
    fwd = forward_kernels(m, seq_len, micro_batch, impl, True, "bf16")
    on, _ = layer_calls(fwd, m, _attention_kinds(m, seq_len, micro_batch, impl))
    ks, calls = mtp_layers(fwd, on, m, n)
    L = m.num_hidden_layers
    return [
        Kernel(k.name, k.kind, k.dtype, k.flops, k.bytes, sum(per[L:]), k.shape)
        for k, per in zip(ks, calls, strict=True)
        if sum(per[L:])
    ]


@dataclass(frozen=True)
class StageTime:
    """One pipeline stage's micro-batch on one of its GPUs (seconds): the kernels of its
    layers (the embedding's on the first stage, the final norm's and the head's on the last)
    and its communication, added or, with ``overlap``, the longer of the two."""

    index: int
    layers: int
    moe_layers: int
    forward_s: float
    backward_s: float
    recompute_s: float
    tp_comm_s: float
    ep_comm_s: float
    pp_comm_s: float
    cp_comm_s: float
    cp_exposed_s: float
    micro_batch_s: float
    #: the MTP modules timed on the stage (the last; :func:`mtp_layers`), not in ``layers``
    mtp_layers: int = 0
    #: the weight-gradient GEMMs' part of ``backward_s`` (the zero-bubble schedule's ``W``)
    weight_grad_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class _Run:
    """What every stage of a step is timed under (:func:`step_time`'s inputs)."""

    m: ModelConfig
    lay: Layout
    hw: HardwareSpec
    profile: Profile
    seq_len: int
    impl: str
    recompute: str
    attention: str
    dtype: str
    gemm_dtype: str
    overlap: bool
    comm_sms: int
    lora: tuple[int, str] | None


#: forward kernels full recompute does not run again (outside the decoder layers)
_NOT_RECOMPUTED = frozenset({"embedding", "lm_head", "final_norm", "eh_proj", "mtp_norms"})


def _stage_kernels(
    r: _Run, fwd_all: list[Kernel], on: list[list[int]], layers: list[int]
) -> list[Kernel]:
    """The forward kernels of one GPU of the stage holding ``layers``: each of the model's
    with the calls it makes on them (:func:`layer_calls`), sharded (:func:`shard`), LoRA's
    adapters on them added."""
    m, lay = r.m, r.lay
    fwd: list[Kernel] = []
    for k, n_kv, per in zip(fwd_all, layer_kv_heads(fwd_all, m), on, strict=True):
        calls = sum(per[i] for i in layers)
        if not calls:
            continue
        k = Kernel(k.name, k.kind, k.dtype, k.flops, k.bytes, calls, k.shape)
        k_parts = (
            _materialized(k) if k.kind == "mla_decode" and r.attention == "materialized" else [k]
        )
        for part in k_parts:
            for s in shard(part, m, lay, n_kv, per_stage=True):
                # fp8-mixed runs the layers' linear GEMMs in fp8, the output head in bf16 (the
                # DeepSeek-V3 report keeps "the embedding module, the output head" in their
                # original precision; Transformer Engine's recipes leave the output layer
                # unquantized: from recall)
                if s.kind == "gemm" and r.gemm_dtype == "fp8" and s.name not in _KEPT_BF16:
                    s = Kernel(s.name, s.kind, "fp8", s.flops, s.bytes, s.calls, s.shape)
                fwd.append(s)
    if r.lora is not None:
        decoder = [i for i in layers if i < m.num_hidden_layers]  # MTP modules: none
        fwd += _adapter_kernels(m, lay, r.seq_len, *r.lora, layers=decoder)
    return fwd


def _stage_time(r: _Run, index: int, fwd: list[Kernel], layers: list[int], nf4: float) -> StageTime:
    """One stage's micro-batch: its forward kernels ``fwd`` (:func:`_stage_kernels`), their
    backward and recomputation, and its communication (see the module's description);
    ``nf4`` the frozen weights its GPU holds in NF4 (QLoRA)."""
    m, lay, hw, profile = r.m, r.lay, r.hw, r.profile
    bwd = [b for k in fwd for b in _backward(k, r.attention, r.lora is not None)]
    again = [
        k
        for k in fwd
        if (r.recompute == "full" and k.name not in _NOT_RECOMPUTED)
        or (r.recompute == "kv_up" and k.name == "kv_b_proj")
    ]
    slower = 1.0
    if r.dtype == "fp32":  # 4-byte activations, matmuls on TF32 tensor cores
        slower = tf32_slowdown(hw)
        fwd, bwd, again = _wide(fwd), _wide(bwd), _wide(again)
    if nf4:  # QLoRA: its weights dequantized for each pass that reads them
        fwd = [*fwd, _dequantize(nf4, r.dtype)]
        bwd = [*bwd, _dequantize(nf4, r.dtype)]
        if r.recompute == "full":
            again = [*again, _dequantize(nf4, r.dtype)]
    L = m.num_hidden_layers
    # the loss on the head's logits (not recomputed), and on each MTP module's (layers >= L)
    for _ in range(sum(i >= L - 1 for i in layers)):
        loss_f, loss_b = loss_kernels(m, lay, r.seq_len, r.dtype)
        fwd, bwd = [*fwd, loss_f], [*bwd, loss_b]
    t_f, t_b, t_r = (_seconds(x, hw, profile, slower, lay.cp) for x in (fwd, bwd, again))
    t_w = _seconds([k for k in bwd if k.name.endswith("_wgrad")], hw, profile, slower, lay.cp)
    cores = core_kinds()
    core_f, core_b = (
        _seconds([k for k in x if k.kind in cores], hw, profile, slower, lay.cp)
        if lay.cp > 1
        else 0.0
        for x in (fwd, bwd)
    )
    if r.comm_sms:  # SMs kept for communication run no compute: the rest take longer
        scale = hw.sm_count / (hw.sm_count - r.comm_sms)
        t_f, t_b, t_r, t_w = t_f * scale, t_b * scale, t_r * scale, t_w * scale
        core_f, core_b = core_f * scale, core_b * scale
    a = 2 if r.dtype == "bf16" else 4
    tokens = lay.micro_batch * r.seq_len // lay.cp  # a context-parallel rank's share
    n_layers = len(layers)
    moe_layers = sum(m.is_moe_layer(min(i, L - 1)) for i in layers)  # MTP: the last's kind
    # a layer's tensor- and expert-parallel collectives run in its forward and its backward,
    # and once more where full recompute runs its forward again: the recomputed forward is the
    # layer's own, collectives and all (Megatron-LM's checkpointed layers, from recall)
    passes = 3 if r.recompute == "full" else 2
    act = tokens * m.hidden_size * a
    tp_comm = 0.0
    if lay.tp > 1:
        one = _comm("all_gather", act / lay.tp, lay.tp, hw, lay.tp)
        one += _comm("reduce_scatter", act / lay.tp, lay.tp, hw, lay.tp)
        blocks = n_layers * 2 - (moe_layers if lay.ep > 1 else 0)
        tp_comm = passes * blocks * one
    ep_comm = 0.0
    if lay.ep > 1:
        fp8 = r.gemm_dtype == "fp8"
        ep_comm = passes * moe_layers * _ep_seconds(m, lay, hw, tokens / lay.tp, fp8, a)
    pp_comm = 0.0
    if lay.pp > 1:  # interleaved: a micro-batch crosses vp times as many stage boundaries
        pp_comm = 2 * lay.vp * _comm("p2p", act / lay.tp, 2, hw, lay.tp * lay.cp * lay.dp + 1)
    # context parallelism: the ring passes each layer's K and V cp - 1 times forward, and K, V
    # and their gradients cp - 1 times backward, each step behind an attention block; what
    # outlasts the stage's attention cores is exposed
    cp_comm = cp_exposed = 0.0
    if lay.cp > 1:
        one = _comm("p2p", ring_bytes(m, lay, r.seq_len, r.impl, a), 2, hw, lay.tp * lay.cp)
        ring_f = n_layers * (lay.cp - 1) * one
        ring_b = 2 * ring_f
        cp_comm = (passes - 1) * ring_f + ring_b
        cp_exposed = (passes - 1) * max(0.0, ring_f - core_f) + max(0.0, ring_b - core_b)
    compute = t_f + t_b + t_r
    comm = tp_comm + ep_comm + pp_comm + cp_exposed
    micro = max(compute, comm) if r.overlap else compute + comm
    mtp = sum(i >= L for i in layers)  # reported apart from the decoder layers
    mtp_moe = mtp * m.is_moe_layer(L - 1)
    return StageTime(index, n_layers - mtp, moe_layers - mtp_moe, t_f, t_b, t_r, tp_comm,
                     ep_comm, pp_comm, cp_comm, cp_exposed, micro, mtp, t_w)  # fmt: skip


#: a stage's own figures for its data-parallel traffic and optimizer step: the parameters its
#: GPU trains, their routed experts', the bytes its optimizer step reads and writes, and the
#: (non-expert, expert) parameters it holds frozen (:func:`step_time`'s ``stage_dp``)
StageParams = tuple[float, float, float, tuple[float, float]]


def _dp_tail(
    r: _Run, timed: tuple[StageTime, ...], own: list[StageParams], grad_bytes: int, zero: int
) -> tuple[float, float, float]:
    """The step's data-parallel traffic, the part of it no backward hides, and its optimizer
    step, each stage with its own parameters (``own``). Under 1F1B the last micro-batch's
    backward runs from the last stage to the first, so stage ``s`` ends its last backward the
    backward of stages ``0 .. s - 1`` (``/ vp`` interleaved) before the first stage ends its
    own, and its traffic, hidden behind that backward up to its length (:func:`_dp_terms`),
    has that lead more to run in: the exposed part is the largest over the stages of its own
    exposed part less its lead (the first stage's, whose lead is 0, at least; from recall of
    Megatron-LM's schedule and its gradient reduction per stage). The gradients' norm is then
    all-reduced over the stages before any steps its optimizer (Megatron-LM's clipping and
    its inf check span the model-parallel group, from recall), so the optimizer step is the
    longest stage's. The traffic reported is the stage's that sets the exposed part."""
    lay = r.lay
    traffic, exposed, lead, opt = 0.0, -math.inf, 0.0, 0.0
    for st, (params, experts, state_bytes, frozen) in zip(timed, own, strict=True):
        comm, bare = _dp_terms(lay, r.hw, params, experts, grad_bytes, zero,
                               st.forward_s, st.backward_s, frozen)  # fmt: skip
        if bare - lead > exposed:
            traffic, exposed = comm, bare - lead
        lead += st.backward_s / lay.vp
        opt = max(opt, _optimizer_seconds(lay, r.hw, r.profile, state_bytes, params, experts, zero))
    return traffic, max(0.0, exposed), opt


def _attention_kinds(m: ModelConfig, seq_len: int, micro_batch: int, impl: str) -> tuple[str, ...]:
    """The attention groups of a model whose layers differ, in the order the step runs them
    (:attr:`mlacalc.AttentionCost.group_labels`); () where every layer is of one kind."""
    if len({k.label for k in layer_pattern(m).layers}) < 2:
        return ()
    eng = engine_impl(m, impl)
    return attention_cost(m, "prefill", seq_len, micro_batch, impl=eng, causal=True).group_labels


def step_time(
    m: ModelConfig,
    lay: Layout,
    hardware: Any,
    seq_len: int,
    impl: str,
    recompute: str,
    attention: str,
    dtype: str,
    gemm_dtype: str,
    params_per_gpu: float,
    state_bytes_per_gpu: float,
    grad_bytes: int,
    profile: Any = None,
    overlap: bool = False,
    comm_sms: int = 0,
    expert_params_per_gpu: float = 0.0,
    zero: int = 1,
    lora: tuple[int, str] | None = None,
    frozen: tuple[float, float] = (0.0, 0.0),
    nf4_params_per_gpu: float | list[float] = 0.0,
    stages: list[list[int]] | None = None,
    mtp: int = 0,
    stage_dp: list[StageParams] | None = None,
    schedule: str = "1f1b",
) -> StepTime:
    """The predicted time of one training step (see the module's description);
    ``expert_params_per_gpu`` of ``params_per_gpu`` are routed experts', whose gradients are
    reduced over the ranks that hold the same experts (:func:`expert_dp`), not every
    data-parallel rank; ``state_bytes_per_gpu`` the bytes the optimizer step reads and
    writes; ``frozen`` the (non-expert, expert) parameters a GPU holds but does not train
    (LoRA), which ZeRO-3 gathers all the same (:func:`_dp_terms`); ``nf4_params_per_gpu``
    the frozen weights a GPU holds in NF4 (QLoRA; one figure, or one a stage), dequantized to
    the compute dtype before the GEMMs that read them: :func:`_dequantize`, once in the
    forward, once in the backward (the input-gradient GEMMs read the weights again) and once
    more under full recompute; ``stages`` the layers of each pipeline stage (None:
    :func:`stage_layer_ids`); ``mtp`` the MTP modules trained with the model, on the last
    stage after its layers (:func:`mtp_layers`: each a layer like the last, eh_proj, its
    head and its loss); ``stage_dp`` each stage's own parameters for its data-parallel
    traffic and optimizer step (:data:`StageParams`, :func:`_dp_tail`; None: the figures
    above on every stage); ``schedule`` the pipeline's (:data:`SCHEDULES`): under ``zb-h1``
    each stage's backward is its input-gradient part ``B`` and its weight-gradient GEMMs
    ``W``, and the schedule defers the ``W`` of the warm-up's and cool-down's micro-batches
    into the bubble, which leaves each other stage ``F + B - W`` of its micro-batch's
    ``F + B + W`` (its micro-batch less twice its weight-gradient GEMMs; from recall of Qi et
    al. 2023, "Zero Bubble Pipeline Parallelism", its ZB-H1 with 1F1B's peak memory).

    Each stage is timed with its own layers (:class:`StageTime`). Under 1F1B the slowest
    stage sets the pace of the steady state and the first micro-batch's forward and the
    last one's backward cross every stage once (from recall of Megatron-LM's schedule and
    Narayanan et al. 2021): step = ``m x`` the slowest stage's micro-batch ``+`` the bubble,
    the other stages' micro-batches summed (``(pp - 1) x`` the micro-batch where the stages
    are alike), ``/ vp`` interleaved (each stage a micro-batch in ``vp`` chunks)."""
    hw = hardware if isinstance(hardware, HardwareSpec) else load_hardware(hardware)
    if comm_sms and (not hw.sm_count or comm_sms >= hw.sm_count):
        raise InvalidArgumentError(
            "comm_sms",
            f"{comm_sms} SMs for communication out of {hw.sm_count or 'unknown'} on {hw.name}",
        )
    profile, calibration = _profile(hw, profile)
    r = _Run(m, lay, hw, profile, seq_len, impl, recompute, attention, dtype, gemm_dtype,
             overlap, comm_sms, lora)  # fmt: skip
    fwd_all = forward_kernels(m, seq_len, lay.micro_batch, impl, True, "bf16")
    on, told = layer_calls(fwd_all, m, _attention_kinds(m, seq_len, lay.micro_batch, impl))
    fwd_all, on = mtp_layers(fwd_all, on, m, mtp)
    L = m.num_hidden_layers
    ids = [list(x) for x in stages or stage_layer_ids(L, lay)]
    ids[-1] += range(L, L + mtp)
    nf4 = (
        nf4_params_per_gpu
        if isinstance(nf4_params_per_gpu, list)
        else [nf4_params_per_gpu] * len(ids)
    )
    timed = tuple(
        _stage_time(r, s, _stage_kernels(r, fwd_all, on, layers), layers, nf4[s])
        for s, layers in enumerate(ids)
    )
    slow = max(timed, key=lambda st: st.micro_batch_s)
    micro = slow.micro_batch_s
    schedule = check_schedule(lay, schedule)
    zb = 2.0 if schedule == "zb-h1" else 0.0  # ZB-H1: F + B - W a stage, not F + B + W
    filled = [max(0.0, st.micro_batch_s - zb * st.weight_grad_s) for st in timed]
    bubble = (sum(filled) - filled[slow.index]) / lay.vp
    n_micro = lay.micro_batches
    alike = (params_per_gpu, expert_params_per_gpu, state_bytes_per_gpu, frozen)
    own = stage_dp or [alike] * len(timed)
    dp_comm, exposed, opt = _dp_tail(r, timed, own, grad_bytes, zero)
    return StepTime(
        layout=lay,
        hardware=hw.name,
        step_s=n_micro * micro + bubble + exposed + opt,
        micro_batch_s=micro,
        forward_s=slow.forward_s,
        backward_s=slow.backward_s,
        recompute_s=slow.recompute_s,
        tp_comm_s=slow.tp_comm_s,
        ep_comm_s=slow.ep_comm_s,
        pp_comm_s=slow.pp_comm_s,
        bubble_s=bubble,
        dp_comm_s=dp_comm,
        dp_exposed_s=exposed,
        optimizer_s=opt,
        profile=profile.name,
        calibration=calibration,
        cp_comm_s=slow.cp_comm_s,
        cp_exposed_s=slow.cp_exposed_s,
        stages=timed,
        schedule=schedule,
        slowest_stage=slow.index,
        placed=told,
    )
