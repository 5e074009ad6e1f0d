"""``training_cost``: what one training step of a model costs, and the absorbed-vs-expanded table.

Composes :mod:`mlacalc.training.flops` (FLOPs by stage), :mod:`mlacalc.training.memory`
(activations per recompute policy; weights, gradients and optimizer states) and, given a
device, :mod:`mlacalc.training.step` (the step time on a parallel layout, MFU, tokens per
second per GPU).

Memory per GPU, on the pipeline stage holding the most (:func:`_stages`): the activations of
the stage's layers, divided over the tensor-parallel ranks (sequence parallelism; exact at
``tp = 1``, an even split beyond, K/V heads whole), times the micro-batches in flight on it
under 1F1B (``min(pp - s, micro-batches)``); the weights, gradients, master weights and
optimizer states of the rank's parameters (the stage's layers split as the serving layout
splits them, routed experts over ``ep``), sharded by ZeRO over ``dp`` (the routed experts'
over the ``dp x tp / ep`` ranks that hold the same experts,
:func:`mlacalc.training.step.expert_dp`).
"""

from __future__ import annotations

import math
from contextvars import ContextVar
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any

from mlacalc.hardware.catalogue import HardwareSpec, load_hardware
from mlacalc.models.architecture import kv_head_share
from mlacalc.models.loading import ModelConfig, model_argument
from mlacalc.serving.layout import Layout as ServingLayout
from mlacalc.serving.layout import stage_breakdowns
from mlacalc.serving.plan_checks import check_number, usable_of
from mlacalc.training.flops import (
    TrainingFlops,
    check_recompute,
    default_attention,
    engine_impl,
    training_flops,
)
from mlacalc.training.lora import (
    NF4_BYTES_PER_PARAM,
    adapted_matrices,
    adapter_flops,
    block_layers,
    check_base_dtype,
    check_lora,
    lora_params,
    stage_lora_params,
)
from mlacalc.training.memory import (
    OPTIMIZERS,
    PRECISIONS,
    ActivationTensor,
    check_swiglu,
    layer_activations,
    optimizer_bytes_per_param,
    recomputed_layer_bytes,
    state_bytes,
)
from mlacalc.training.step import (
    Layout,
    StageParams,
    StepTime,
    check_schedule,
    chunk_sizes,
    expert_dp,
    make_layout,
    mtp_kernels,
    stage_layer_ids,
    step_time,
)
from mlacalc.words import arguments as args
from mlacalc.words import defaults as D
from mlacalc.words.errors import InvalidArgumentError
from mlacalc.words.units import human_bytes, human_seconds, human_si

__all__ = ["TrainingCost", "absorption_table", "fp8_without_fp8_units", "training_cost"]

_MAX_SEQ = 1 << 24

#: tensors a framework recomputes in the backward where it recomputes SwiGLU and the norms
#: (DeepSeek-V3 does): the SwiGLU's outputs (fused: the product, the down projection's input;
#: unfused also SiLU(gate)), the norms' outputs
_SWIGLU_NORMS = frozenset(
    (
        "activation",
        "product",
        "expert_activation",
        "expert_product",
        "shared_activation",
        "shared_product",
        "normed_input",
        "q_latent_normed",
        "kv_latent_normed",
    )
)
#: the inputs of the linear layers and of the MoE's SwiGLU, which DeepSeek-V3 keeps in FP8 for
#: their backward (its report's section on low-precision storage, from recall)
_LINEAR_INPUTS = frozenset(
    (
        "normed_input",
        "q_latent_normed",
        "kv_latent_normed",
        "output",
        "output_latent",
        "product",
        "expert_input",
        "expert_product",
        "expert_gate",
        "expert_up",
        "expert_gate_up",
        "shared_product",
    )
)


def fp8_without_fp8_units(device: str, optimizer: str) -> str:
    """What ``precision="fp8-mixed"`` still buys on ``device``, which has no FP8 tensor cores
    (one text for the CLI's warning and the app's): its GEMMs are timed as FP8 kernels at the
    bf16 peak, so they gain nothing; only the optimizer states it keeps in bf16 (4 bytes a
    state under bf16-mixed, :data:`mlacalc.training.memory.PRECISIONS`) still save memory and
    optimizer-step time, where ``optimizer`` keeps any."""
    text = (
        f"{device} has no FP8 tensor cores: fp8-mixed's GEMMs gain nothing there (FP8 kernels "
        "timed at the bf16 peak)"
    )
    if OPTIMIZERS[args.choice("optimizer", optimizer, OPTIMIZERS)]:
        return text + (
            f"; only its bf16 {optimizer} states (fp32 under bf16-mixed) still save memory and "
            "optimizer-step time"
        )
    return text + f", and {optimizer} keeps no optimizer states: it saves nothing over bf16-mixed"


#: the levers (:func:`_levers`) that lower only a GPU's activations, not its weights or states
_ACTIVATIONS_ONLY = ("full recompute", "a smaller micro-batch", "more context-parallel")


@dataclass(frozen=True)
class TrainingCost:
    """One training step: FLOPs, memory and (with a device) time."""

    model: str
    seq_len: int
    impl: str
    recompute: str
    attention: str
    optimizer: str
    precision: str
    zero: int
    layout: Layout
    flops: TrainingFlops
    activations: tuple[ActivationTensor, ...]
    activation_bytes_per_gpu: int
    states_per_gpu: dict[str, int]
    #: every parameter the busiest stage's GPU holds, whose weights ``states_per_gpu`` counts:
    #: the model's share and, under LoRA, its adapters (``trainable_params_per_gpu``)
    params_per_gpu: int
    time: StepTime | None
    peak_flops_per_s: float | None
    #: the device's memory (with a device), to say whether a rank's share fits
    device_memory_bytes: float | None = None
    #: the share of the device's memory kept apart (CUDA context, library workspaces, the
    #: allocator's fragmentation): the serving planner's ``memory_reserve`` rule
    memory_reserve: float = D.MEMORY_RESERVE
    #: the pipeline stage whose GPUs hold the most (memory per GPU is theirs), and its layers
    stage: int = 0
    stage_layers: int = 0
    #: recompute="full": what the one layer rerun in the backward saves beyond its input
    #: (the largest of the stage's; in memory per GPU, over tp), else 0
    recomputed_layer_bytes: int = 0
    #: the modelled settings that would lower a GPU's share from this layout (:func:`_levers`)
    levers: tuple[str, ...] = ()
    #: the model's FLOPs of one micro-batch, forward and backward, whatever path runs them (the
    #: expanded path's count: absorbed attention executes more for the same model); None: the
    #: path's own (``flops.model_flops``), which is the expanded path or not MLA
    model_flops_per_micro_batch: int | None = None
    #: whether ``global_batch`` was left to its default (one micro-batch a data-parallel rank:
    #: no gradient accumulation, so the whole data-parallel reduction follows one backward)
    global_batch_defaulted: bool = False
    #: with a device and several pipeline stages: how they were timed, each with its own
    #: layers, and which sets the pace (:func:`_stage_note`); else ""
    step_layers_note: str = ""
    #: how the gated FFN's SwiGLU runs, what its activations count
    #: (:data:`mlacalc.training.memory.SWIGLU`)
    swiglu: str = "fused"
    #: LoRA: the adapters' rank and targets (None: every weight trains) and the trainable
    #: parameters of the whole model and of the busiest stage's GPU
    lora_rank: int | None = None
    lora_targets: str | None = None
    trainable_params: int | None = None
    trainable_params_per_gpu: int | None = None
    #: LoRA's frozen base (:data:`mlacalc.training.lora.BASE_DTYPES`) and, under ``"nf4"``,
    #: the busiest stage's GPU's weights held in NF4 (the linear layers'), else 0
    base_dtype: str = "compute"
    nf4_params_per_gpu: int = 0
    #: inputs taken as given though they mean less than they say (a SwiGLU setting on a model
    #: without a gated FFN, a ZeRO stage given over one data-parallel rank, LoRA targets
    #: without a rank), one sentence each: the CLI prints them as warnings, the app shows them
    warnings: tuple[str, ...] = ()
    #: the MTP modules trained with the model (on the last stage; 0: none counted)
    mtp_layers: int = 0

    @property
    def base_params_per_gpu(self) -> int:
        """The model's own parameters on the busiest stage's GPU (frozen under LoRA):
        :attr:`params_per_gpu` less the adapters."""
        return self.params_per_gpu - (self.trainable_params_per_gpu if self.lora_rank else 0)

    @property
    def usable_memory_bytes(self) -> int | None:
        """What a GPU's share may take: its memory less :attr:`memory_reserve` of it, as the
        serving planner counts (:func:`mlacalc.serving.plan_checks.usable_of`); None without a
        device."""
        if self.device_memory_bytes is None:
            return None
        return usable_of(int(self.device_memory_bytes), 0, self.memory_reserve)

    @property
    def fits(self) -> bool | None:
        """Whether a GPU's usable memory holds its share (None without a device)."""
        if self.usable_memory_bytes is None:
            return None
        return self.memory_per_gpu <= self.usable_memory_bytes

    @property
    def states_fit(self) -> bool | None:
        """Whether a GPU's usable memory holds its weights, gradients, master weights and
        optimizer states alone, before any activation (None without a device): where they do
        not, no activation saving or recomputation fits the layout, only sharding them does
        (DeepSeek-V3's 1.22 TiB of frozen weights under LoRA on one 141 GB H200)."""
        if self.usable_memory_bytes is None:
            return None
        return sum(self.states_per_gpu.values()) <= self.usable_memory_bytes

    @property
    def unmodelled_savings(self) -> dict[str, int]:
        """What a GPU's activations would lose to the savings docs/training.md lists as not
        modelled: recomputing SwiGLU and the norms (their outputs dropped), keeping the
        linear layers' inputs in FP8 (1 byte where 2, or 4 under fp32), and both; each the
        share of the saved tensors' bytes it removes, times the activations per GPU. Nothing under
        ``recompute="full"`` (only layer inputs are kept)."""
        if self.recompute == "full" or not self.activation_bytes:
            return {"recompute_swiglu_norms": 0, "fp8_linear_inputs": 0, "both": 0}

        width = 4 if self.precision == "fp32" else 2  # bytes of an activation element

        def share(dropped: frozenset, to_fp8: frozenset) -> int:
            gone = 0
            for a in self.activations:
                if a.name in dropped:
                    gone += a.bytes * a.layers
                elif a.name in to_fp8 and a.bytes == width * a.elements:
                    gone += (a.bytes - a.elements) * a.layers
            return math.ceil(self.activation_bytes_per_gpu * gone / self.activation_bytes)

        none: frozenset = frozenset()
        return {
            "recompute_swiglu_norms": share(_SWIGLU_NORMS, none),
            "fp8_linear_inputs": share(none, _LINEAR_INPUTS),
            "both": share(_SWIGLU_NORMS, _LINEAR_INPUTS),
        }

    @property
    def fit_advice(self) -> str | None:
        """Where a GPU's share does not fit: by how much, what the unmodelled savings would
        take off (and whether that closes the gap), and what is modelled to try; where the
        weights and states alone are over, neither the unmodelled savings nor the levers that
        lower only the activations (:data:`_ACTIVATIONS_ONLY`), which cannot fit it."""
        if self.fits is not False or self.usable_memory_bytes is None:
            return None
        over = self.memory_per_gpu - self.usable_memory_bytes
        save = self.unmodelled_savings
        text = f"{human_bytes(over)} over"
        if not self.states_fit:
            states = sum(self.states_per_gpu.values())
            text += (
                "; the weights, gradients and optimizer states"
                + (
                    " (and ZeRO-3's gathered layers)"
                    if "zero3_gathered" in self.states_per_gpu
                    else ""
                )
                + f" alone are {human_bytes(states)}, "
                f"{human_bytes(states - self.usable_memory_bytes)} over before any activation: "
                "no activation saving fits it, only the settings that shard them"
                + (
                    " or shrink them (QLoRA's NF4 base)"
                    if any(x.startswith("base_dtype nf4") for x in self.levers)
                    else ""
                )
            )
        levers = self.levers
        if not self.states_fit:  # the activation savings cannot close it: left unsaid
            save = dict.fromkeys(save, 0)
            levers = tuple(x for x in levers if not x.startswith(_ACTIVATIONS_ONLY))
        if save["both"]:
            enough = "enough to fit" if save["both"] >= over else "not enough alone"
            text += (
                "; not modelled (docs/training.md), recomputing SwiGLU and the norms would save "
                f"about {human_bytes(save['recompute_swiglu_norms'])}, the linear layers' "
                "(and MoE SwiGLU's) inputs kept in FP8 about "
                f"{human_bytes(save['fp8_linear_inputs'])}, both about "
                f"{human_bytes(save['both'])}: {enough}"
            )
        if not levers:
            return text + "; every modelled setting is already at its limit"
        return text + "; modelled: " + ", ".join(levers)

    @property
    def model_flops(self) -> int:
        """The model's FLOPs of one micro-batch (forward and backward), what MFU counts: one
        count per token whichever path computes them (the expanded path's for MLA)."""
        if self.model_flops_per_micro_batch is None:
            return self.flops.model_flops
        return self.model_flops_per_micro_batch

    @property
    def flops_per_token(self) -> float:
        """Model FLOPs (forward and backward) per token: MFU's count."""
        return self.model_flops / self.flops.tokens

    @property
    def executed_flops_per_token(self) -> float:
        """FLOPs the path runs per token: forward, backward and recomputation (HFU's count)."""
        return self.flops.hardware_flops / self.flops.tokens

    @property
    def activation_bytes(self) -> int:
        """Activations of one micro-batch through the whole model (one GPU holding it)."""
        return sum(a.bytes * a.layers for a in self.activations)

    @property
    def activation_bytes_per_layer(self) -> dict[str, int]:
        """Bytes one layer of each block kind saves."""
        out: dict[str, int] = {}
        for a in self.activations:
            out[a.block] = out.get(a.block, 0) + a.bytes
        return out

    @property
    def memory_per_gpu(self) -> float:
        return self.activation_bytes_per_gpu + sum(self.states_per_gpu.values())

    @property
    def step_flops(self) -> int:
        """Model FLOPs of the whole step (every micro-batch on every data-parallel rank)."""
        return self.model_flops * self.layout.global_batch // self.layout.micro_batch

    @property
    def executed_step_flops(self) -> int:
        """FLOPs the whole step runs: the path's forward and backward and the recomputation."""
        return self.flops.hardware_flops * self.layout.global_batch // self.layout.micro_batch

    def _utilisation(self, flops: int) -> float | None:
        if self.time is None or not self.peak_flops_per_s:
            return None
        return flops / (self.time.step_s * self.layout.gpus * self.peak_flops_per_s)

    @property
    def mfu(self) -> float | None:
        """Model FLOPs utilisation: the model's FLOPs (:attr:`model_flops`, the same under
        every path) over the step time and the GPUs' dense bf16 peak. Under LoRA the model
        FLOPs are the LoRA step's: the forward (``2 N`` a token over the GEMMs' weights, the
        attention core's), the input-gradient GEMMs (``2 N``: the frozen weights take no
        weight gradient), the attention core's backward (twice its forward) and the adapters'
        own (forward, input and weight gradients), not full training's ``6 N``."""
        return self._utilisation(self.step_flops)

    @property
    def hfu(self) -> float | None:
        """Hardware FLOPs utilisation: the FLOPs the path executes (the absorbed path's extra
        products, the recomputation) over the step time and the GPUs' dense bf16 peak."""
        return self._utilisation(self.executed_step_flops)

    @property
    def tokens_per_s_per_gpu(self) -> float | None:
        if self.time is None:
            return None
        return self.layout.global_batch * self.seq_len / self.time.step_s / self.layout.gpus

    @property
    def gpu_hours_per_trillion_tokens(self) -> float | None:
        """GPU-hours to train on 10^12 tokens at this step's rate (the figure DeepSeek's
        reports give: 180K H800 GPU-hours for V3): ``10^12 / (tokens/s/GPU x 3,600)``."""
        rate = self.tokens_per_s_per_gpu
        return None if rate is None else 1e12 / (rate * 3600)

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "seq_len": self.seq_len,
            "impl": self.impl,
            "recompute": self.recompute,
            "swiglu": self.swiglu,
            "lora_rank": self.lora_rank,
            "lora_targets": self.lora_targets,
            "trainable_params": self.trainable_params,
            "trainable_params_per_gpu": self.trainable_params_per_gpu,
            "base_dtype": self.base_dtype,
            "nf4_params_per_gpu": self.nf4_params_per_gpu,
            "warnings": list(self.warnings),
            "attention": self.attention,
            "optimizer": self.optimizer,
            "precision": self.precision,
            "zero": self.zero,
            "layout": self.layout.to_dict(),
            "global_batch_defaulted": self.global_batch_defaulted,
            "step_layers_note": self.step_layers_note,
            "mtp_layers": self.mtp_layers,
            "flops_per_micro_batch": self.flops.to_dict(),
            "model_flops_per_token": self.model_flops // self.flops.tokens,
            "executed_flops_per_token": self.flops.hardware_flops // self.flops.tokens,
            "activation_bytes_per_micro_batch": self.activation_bytes,
            "activation_bytes_per_layer": self.activation_bytes_per_layer,
            "activations": [a.to_dict() for a in self.activations],
            "activation_bytes_per_gpu": self.activation_bytes_per_gpu,
            "states_per_gpu": self.states_per_gpu,
            "params_per_gpu": self.params_per_gpu,
            "base_params_per_gpu": self.base_params_per_gpu,
            "stage": self.stage,
            "stage_layers": self.stage_layers,
            "recomputed_layer_bytes": self.recomputed_layer_bytes,
            "memory_per_gpu": self.memory_per_gpu,
            "device_memory_bytes": self.device_memory_bytes,
            "memory_reserve": self.memory_reserve,
            "usable_memory_bytes": self.usable_memory_bytes,
            "fits": self.fits,
            "states_fit": self.states_fit,
            "unmodelled_savings": self.unmodelled_savings,
            "fit_advice": self.fit_advice,
            "time": None if self.time is None else self.time.to_dict(),
            "mfu": self.mfu,
            "hfu": self.hfu,
            "tokens_per_s_per_gpu": self.tokens_per_s_per_gpu,
            "gpu_hours_per_trillion_tokens": self.gpu_hours_per_trillion_tokens,
        }


def state_label(
    key: str,
    optimizer: str,
    precision: str,
    lora_rank: int | None,
    base_dtype: str,
    nf4_params: int,
) -> str:
    """A memory row's name (a key of :attr:`TrainingCost.states_per_gpu`), as the CLI's and the
    app's tables say it; the optimizer's says its bytes a parameter, in which dtype (fp8-mixed
    keeps Adam's moments in bf16, as DeepSeek-V3 trained: half of bf16-mixed's fp32)."""
    if key == "zero3_gathered":
        grad = "" if lora_rank else ", its unsharded gradient"
        return (
            "ZeRO-3 gathered (the largest layer, embedding or head whole, the next one "
            f"prefetched{grad})"
        )
    label = key.replace("_", " ")
    if key == "weights" and base_dtype == "nf4":
        return (
            f"weights ({human_si(nf4_params)} in NF4 at {NF4_BYTES_PER_PARAM * 8:.3f} bits, "
            "scales in; the rest in the compute dtype)"
        )
    if key != "optimizer_states" or not OPTIMIZERS[optimizer]:
        return label
    n, per = OPTIMIZERS[optimizer], PRECISIONS[precision][3]
    dtype = {4: "fp32", 2: "bf16"}[per]
    text = f"{label} ({n} x {dtype} = {n * per} B a parameter"
    if precision == "fp8-mixed":
        text += f"; {n * PRECISIONS['bf16-mixed'][3]} under bf16-mixed"
    return text + ")"


def _levers(
    m: ModelConfig,
    lay: Layout,
    recompute: str,
    zero: int,
    seq_len: int,
    attention: str,
    nf4: bool = False,
    nf4_lever: bool = False,
) -> tuple[str, ...]:
    """The modelled settings that would lower a GPU's share from this layout, leaving out
    those already in use or at their limit: full recompute; more pipeline ranks (up to one a
    layer), tensor-parallel ranks (up to one a head), expert-parallel ranks (a model with
    routed experts, up to one an expert); more context-parallel ranks (while ``4 cp`` divides
    the sequence: twice the ranks, ``2 cp`` chunks each; :func:`_cp_lever` gives figures; not
    under materialized attention, whose probabilities context parallelism does not split);
    under LoRA with its frozen base in the compute dtype (``nf4_lever``: not under fp8-mixed
    or ZeRO-3, which refuse NF4), QLoRA's NF4 base; each ZeRO stage above ``zero``, cheapest
    first (ZeRO-1 shards the master weights and optimizer states for the same traffic, ZeRO-2
    the gradients too for a reduce-scatter every micro-batch, ZeRO-3 the weights too for two
    all-gathers every micro-batch; they shard nothing over one data-parallel rank: there, or
    at ZeRO-3, more data-parallel ranks; not ZeRO-3 with an NF4 base, ``nf4``, whose ZeRO-3
    is not built, :func:`~mlacalc.training.lora.check_base_dtype`); a smaller micro-batch."""
    out = [] if recompute == "full" else ["full recompute"]
    more = [
        name
        for name, now, limit in (
            ("pipeline", lay.pp, m.num_hidden_layers),
            ("tensor", lay.tp, m.num_attention_heads),
            ("expert", lay.ep, m.n_routed_experts if m.is_moe else 1),
        )
        if now < limit
    ]
    if more:
        out.append(f"more {'/'.join(more)}-parallel ranks")
    if seq_len % (4 * lay.cp) == 0 and attention != "materialized":
        out.append("more context-parallel ranks")
    if nf4_lever and zero != 3:  # LoRA's base in the compute dtype: QLoRA's NF4 holds less
        out.append("nf4")
    if lay.dp > 1 and zero < 3:
        out += [f"ZeRO-{z}" for z in range(zero + 1, 3 if nf4 else 4)]
    elif not nf4:  # QLoRA under ZeRO-3 is refused: no ZeRO-3 lever to offer
        out.append("more data-parallel ranks under ZeRO-3")
    if lay.micro_batch > 1:
        out.append("a smaller micro-batch")
    return tuple(out)


@dataclass(frozen=True)
class _Stage:
    """What one GPU of a pipeline stage holds: its parameters (non-expert, routed experts),
    activations and weight, gradient and optimizer bytes."""

    index: int
    layers: int
    dense: int
    experts: int
    activations: int
    states: dict[str, int]
    again: int = 0
    #: LoRA: the rank's adapter parameters (the trainable ones), else 0
    lora: int = 0
    #: QLoRA: the frozen parameters held in NF4 (the linear layers'), else 0
    nf4: int = 0
    #: the layers it holds, in the order it runs them
    ids: tuple[int, ...] = ()

    @property
    def total(self) -> int:
        return self.activations + sum(self.states.values())


def _kv_replication(m: ModelConfig, tp: int) -> Fraction:
    """How much more of the K/V heads a tensor-parallel rank holds than ``1 / tp`` of them:
    ``ceil(n_kv / tp) tp / n_kv`` (each rank needs a whole KV head, replicated beyond ``n_kv``
    ranks, as the serving layout splits them, a fused QKV projection's too); 1 for MLA."""
    if m.is_mla:
        return Fraction(1)
    return kv_head_share(m.num_key_value_heads, tp) * tp


def _grown(m: ModelConfig, name: str, kv: Fraction) -> Fraction:
    """How much more of an attention activation a rank keeps than ``1 / tp`` of it, its K/V
    heads grown by ``kv`` (:func:`_kv_replication`): K and V whole, a fused QKV projection's
    output (``qkv``: its ``n_h`` query heads split, its ``2 n_kv`` K/V heads grown)."""
    if name in ("k", "v", "k_before_norm"):
        return kv
    if name == "qkv":
        n_h, n_kv = m.num_attention_heads, m.num_key_value_heads
        return (n_h + 2 * n_kv * kv) / (n_h + 2 * n_kv)
    return Fraction(1)


def _stages(
    m: ModelConfig,
    lay: Layout,
    acts: tuple[ActivationTensor, ...],
    optimizer: str,
    precision: str,
    zero: int,
    rerun: dict[str, int],
    lora: tuple[int, str] | None = None,
    nf4: bool = False,
    mtp: int = 0,
) -> list[_Stage]:
    """Every pipeline stage's share on one of its GPUs, exactly (integers, rounded up): the
    parameters as the serving layout splits a stage's layers over ``tp`` (K/V heads replicated
    beyond ``n_kv`` ranks, MLA's latent down-projections, norms and the router whole, the
    embedding on the first stage, the head and the final norm on the last; the layers of
    ``stage_layers`` where given, else the first ``L mod pp`` stages one layer more;
    interleaved, round-robin chunks, :func:`_stage_parts`), the routed experts over ``ep``;
    the activations of the stage's
    layers over ``tp`` times the micro-batches in flight on it (:func:`_held`: 1F1B's
    ``min(pp - s, micro)``, or the interleaved schedule's peak of chunks held), the head's on
    the last; with ``recompute="full"`` also the one layer whose forward runs again in the
    backward (``rerun``, :func:`recomputed_layer_bytes`; the stage's largest); ``nf4``
    (QLoRA): the frozen linear layers' weights (attention, dense FFN, shared and routed
    experts; not the embedding, head, norms or router) at :data:`NF4_BYTES_PER_PARAM` bytes;
    ``mtp``: the MTP modules trained with the model on the last stage, their parameters
    (:func:`_mtp_parts`) and each a layer's activations like the last one's and the head's
    logits again (not under ZeRO-3's gathered units nor QLoRA's NF4 weights)."""
    L = m.num_hidden_layers
    per_block: dict[str, Fraction] = {}
    kv = _kv_replication(m, lay.tp)
    for a in acts:
        grown = _grown(m, a.name, kv) if a.block == "attention" else 1
        per_block[a.block] = per_block.get(a.block, Fraction(0)) + a.bytes * grown
    out = []
    # the final norm is the last stage's (the serving layout spreads it over the layers)
    final = (2 if m.layer_norm else 1) * m.hidden_size
    units = _units(m, lay) if zero == 3 else []
    for s, (parts, layers, last) in enumerate(_stage_parts(m, lay, mtp)):
        extra = mtp if last else 0  # the MTP modules: layers like the last
        parts = {**parts, "norms": parts["norms"] + final * (last - len(layers) / L)}
        experts = math.ceil(parts.get("routed_experts", 0))
        dense = math.ceil(sum(parts.values())) - experts
        again = 0
        if "layer" in per_block:  # recompute="full": each layer keeps its input alone
            each = [per_block["layer"]] * (len(layers) + extra)
            again = max(rerun["moe" if m.is_moe_layer(i) else "ffn"] for i in layers)
        else:
            each = [
                per_block["attention"] + per_block["moe" if m.is_moe_layer(i) else "ffn"]
                for i in [*layers, *[L - 1] * extra]
            ]
        # over tp (sequence parallelism) and cp (each context-parallel rank keeps its own
        # 1 / cp of the tokens: every saved tensor is linear in them under flash attention)
        ranks = lay.tp * lay.cp
        act = (_held(lay, s, each) + again) / ranks
        act += per_block["head"] * (1 + extra) / ranks if last else 0
        # ZeRO shards over the data-parallel ranks with the context-parallel ones folded in
        dp = lay.dp * lay.cp
        states = state_bytes(dense, optimizer, precision, dp, zero, experts, expert_dp(lay))
        adapters = quantized = 0
        if lora is not None:  # frozen weights in the compute dtype; the adapters train
            adapters = stage_lora_params(m, *lora, layers, lay.tp)
            trained = state_bytes(adapters, optimizer, precision, dp, zero)
            trained["weights"] += states["weights"]
            if nf4:  # QLoRA (not under ZeRO-3): the linear layers' weights in NF4
                linear = ("attention", "dense_ffn", "shared_experts", "routed_experts")
                quantized = math.ceil(sum(parts.get(k, 0) for k in linear))
                w = optimizer_bytes_per_param(optimizer, precision)[0]
                trained["weights"] -= quantized * (w - NF4_BYTES_PER_PARAM)
            states = trained
        if zero == 3:
            states["zero3_gathered"] = _gathered(
                m, lay, units, layers, s == 0, last, optimizer, precision, lora
            )
        out.append(
            _Stage(
                s,
                len(layers),
                dense,
                experts,
                math.ceil(act),
                {k: math.ceil(v) for k, v in states.items()},
                again,
                adapters,
                quantized,
                tuple(layers),
            )
        )
    return out


def _mtp_parts(m: ModelConfig, lay: Layout, mtp: int) -> dict[str, float]:
    """The MTP modules' parameters on one GPU of the last stage: the serving layout's
    (:func:`mlacalc.serving.layout.stage_breakdowns` with ``include_mtp``, less without),
    their routed experts apart (sharded over the expert-data-parallel ranks as the layers'
    are): each module's decoder layer splits as the last layer does."""
    if not mtp:
        return {}
    L = m.num_hidden_layers
    one = ServingLayout(lay.tp * lay.dp * L, lay.tp, lay.dp, L, lay.ep, False, lay.ep, 1)
    with_mtp = stage_breakdowns(m, one, include_mtp=True)[-1][0]
    plain = stage_breakdowns(m, one)[-1][0]
    total = sum(with_mtp.values()) - sum(plain.values())
    routed = min(total, plain.get("routed_experts", 0.0) * mtp)
    return {"routed_experts": routed, "mtp": total - routed}


def _stage_parts(
    m: ModelConfig, lay: Layout, mtp: int = 0
) -> list[tuple[dict[str, float], list[int], bool]]:
    """Each pipeline stage's parameters on one of its GPUs (the serving layout's parts), its
    layers and whether it is the last. Under 1F1B a stage's layers are one block (the serving
    layout's split; ``lay.stage_layers`` where given); under the interleaved schedule
    (``vp > 1``) stage ``s`` holds its chunks, chunk ``c`` of every stage before chunk
    ``c + 1`` of any (Megatron-LM's round-robin placement, from recall;
    :func:`~mlacalc.training.step.stage_layer_ids`); given counts or chunks, its parts the
    sum of its layers' (the split with one stage a layer): a model
    whose layers differ (MoE every few layers) puts a different mix on each stage than 1F1B.
    The first chunk, with the embedding, is stage 0's, the last, with the head, stage
    ``pp - 1``'s, as under 1F1B; the last also holds ``mtp`` MTP modules (:func:`_mtp_parts`)."""
    out = _decoder_parts(m, lay)
    parts, layers, last = out[-1]
    for k, v in _mtp_parts(m, lay, mtp).items():
        parts = {**parts, k: parts.get(k, 0.0) + v}
    out[-1] = (parts, layers, last)
    return out


def _decoder_parts(m: ModelConfig, lay: Layout) -> list[tuple[dict[str, float], list[int], bool]]:
    """:func:`_stage_parts` without the MTP modules."""
    if lay.vp == 1 and not lay.stage_layers:
        serving = ServingLayout(lay.gpus, lay.tp, lay.dp, lay.pp, lay.ep, False, lay.ep, 1)
        return [(p, list(layers), last) for p, layers, last in stage_breakdowns(m, serving)]
    L = m.num_hidden_layers
    one = ServingLayout(lay.tp * lay.dp * L, lay.tp, lay.dp, L, lay.ep, False, lay.ep, 1)
    per_layer = [parts for parts, _, _ in stage_breakdowns(m, one)]
    out = []
    for s, layers in enumerate(stage_layer_ids(L, lay)):
        parts: dict[str, float] = {}
        for i in layers:
            for k, v in per_layer[i].items():
                parts[k] = parts.get(k, 0.0) + v
        out.append((parts, layers, s == lay.pp - 1))
    return out


def _mtp_count(m: ModelConfig, mtp: Any, lora: tuple[int, str] | None) -> int:
    """The MTP modules a run trains (``training_cost``'s ``mtp``: their parameters, states,
    activations, FLOPs and time on the last stage): None, the config's
    ``num_nextn_predict_layers`` (DeepSeek-V3's one), none under LoRA (a fine-tune of the
    next-token head alone); True asks for them, refused on a model without."""
    n = m.num_nextn_predict_layers
    if mtp is None:
        return n if lora is None else 0
    if args.flag("mtp", mtp) and not n:
        raise InvalidArgumentError(
            "mtp", f"{m.name} has no MTP modules (num_nextn_predict_layers 0): leave mtp off"
        )
    return n if mtp else 0


def _mtp_note(mtp: int) -> str:
    if not mtp:
        return ""
    return (
        f"{mtp} MTP module{'s' if mtp > 1 else ''} trained on the last stage, counted in time, "
        "FLOPs (MFU's) and memory: a layer like the last, eh_proj, the shared head and a "
        "second loss"
    )


def _stage_note(m: ModelConfig, lay: Layout, time: StepTime | None, mtp: int = 0) -> str:
    """:func:`_pipeline_note`, and the MTP modules where counted (:func:`_mtp_note`)."""
    return "; ".join(x for x in (_pipeline_note(m, lay, time), _mtp_note(mtp)) if x)


def _pipeline_note(m: ModelConfig, lay: Layout, time: StepTime | None) -> str:
    """How the pipeline's stages were timed, where there are several and a time: each with
    its own layers (their MoE layers where the stages' mixes differ), the embedding on the
    first, the head on the last, and which sets the pace; "" otherwise."""
    split = _split_note(m, lay)
    if time is None or lay.pp == 1:
        return split
    stages = time.stages
    mix = ""
    if len({Fraction(st.moe_layers, st.layers) for st in stages}) > 1:
        mix = (
            " (MoE layers a stage: "
            + ", ".join(f"{st.moe_layers}/{st.layers}" for st in stages)
            + ")"
        )
    told = (
        ""
        if time.placed
        else ("; some kernels' layers could not be told and are spread evenly over the layers")
    )
    return (
        f"each pipeline stage is timed with its own layers{mix}, the embedding on the first, "
        f"the output head on the last: stage {time.slowest_stage}'s micro-batch is the "
        "longest and sets the pace (the parts above are its), the bubble is the other "
        "stages' micro-batches"
        + (f" / {lay.vp}" if lay.vp > 1 else "")
        + (", less twice their weight-gradient GEMMs (zb-h1)" if time.schedule == "zb-h1" else "")
        + told
    ) + (f"; {split}" if split else "")


def _split_note(m: ModelConfig, lay: Layout) -> str:
    """Where the pipeline's stages hold different numbers of layers, how they were split:
    as given (``stage_layers``), or the default's remainder where the layers do not divide;
    "" for an even split."""
    L = m.num_hidden_layers
    counts = [len(x) for x in stage_layer_ids(L, lay)]
    if len(set(counts)) <= 1:
        return ""
    said = ", ".join(f"{n}" for n in counts)
    if lay.stage_layers:
        return f"the stages hold {said} layers, as stage_layers gives them"
    return (
        f"{L} layers do not split evenly over {lay.pp} stages: the first {L % lay.pp} hold "
        f"one more ({said}; Megatron-LM refuses such a split without first and last stage "
        "counts, from recall); stage_layers sets each stage's"
    )


def _held(lay: Layout, s: int, each: list[Fraction]) -> Fraction:
    """The activation bytes stage ``s`` holds at once, ``each`` its layers' bytes a
    micro-batch (in the order :func:`_stage_parts` gives them): 1F1B, all of them times
    :func:`_in_flight`; interleaved, the peak over Megatron-LM's schedule on the stage (from
    recall): a warm-up of ``2 (pp - s - 1) + (vp - 1) pp`` chunk forwards, then one forward
    and one backward a step until the ``m vp`` forwards are done, then the backwards left.
    The ``k``-th forward runs chunk ``(k // pp) mod vp`` (``get_model_chunk_id``: ``pp``
    micro-batches through a chunk, then the next) and holds that chunk's layers' bytes; the
    ``k``-th backward frees chunk ``vp - 1 - ((k // pp) mod vp)``'s. A stage whose chunks
    differ (MoE on some layers) peaks in the steady state when its first chunk is the
    heavier (the forwards refill it while the backwards free the last), at the warm-up's end
    when the first is the lighter."""
    if lay.vp == 1:
        return sum(each, Fraction(0)) * _in_flight(lay, s)
    chunks, start = [], 0
    for size in chunk_sizes(len(each), lay.vp):
        chunks.append(sum(each[start : start + size], Fraction(0)))
        start += size
    total = lay.micro_batches * lay.vp

    def chunk(k: int, forward: bool) -> Fraction:
        c = (k // lay.pp) % lay.vp
        return chunks[c if forward else lay.vp - 1 - c]

    warm = min(2 * (lay.pp - s - 1) + (lay.vp - 1) * lay.pp, total)
    held = sum((chunk(k, True) for k in range(warm)), Fraction(0))
    peak = held
    for k in range(total - warm):  # steady state: forward warm + k, then backward k
        held += chunk(warm + k, True)
        peak = max(peak, held)
        held -= chunk(k, False)
    return peak


def _in_flight(lay: Layout, s: int) -> Fraction:
    """The micro-batches whose activations stage ``s`` holds at once, in whole-stage units:
    1F1B's ``min(pp - s, micro-batches)``; the interleaved schedule's warm-up holds
    ``2 (pp - s - 1) + (vp - 1) pp + 1`` chunks of ``1 / vp`` of the stage's layers (at most
    ``vp`` x the micro-batches), from recall of Megatron-LM's interleaved schedule: the first
    stage ``1 + (pp - 1) / (pp vp)`` times 1F1B's ``pp``, the figure of Korthikanti et al.
    2022."""
    if lay.vp == 1:
        return Fraction(min(lay.pp - s, lay.micro_batches))
    chunks = 2 * (lay.pp - s - 1) + (lay.vp - 1) * lay.pp + 1
    return Fraction(min(chunks, lay.vp * lay.micro_batches), lay.vp)


def _units(m: ModelConfig, lay: Layout) -> list[tuple[float, float]]:
    """What ZeRO-3 gathers at a time, on one GPU: each layer's parameters on its
    tensor-parallel rank, (non-expert, routed experts), then the embedding's and the output
    head's (with the final norm) as two more units; the serving layout's split with one stage a
    layer (:func:`mlacalc.serving.layout.stage_breakdowns`)."""
    L = m.num_hidden_layers
    one = ServingLayout(lay.tp * lay.dp * L, lay.tp, lay.dp, L, lay.ep, False, lay.ep, 1)
    stages = stage_breakdowns(m, one)
    norm = m.hidden_size * (2 if m.layer_norm else 1)
    out = []
    for parts, _, _ in stages:
        experts = parts.get("routed_experts", 0.0)
        # its norms: the serving layout spreads the final norm over the layers
        rest = sum(parts.values()) - experts - parts["embedding_head"] - norm / L
        out.append((rest, experts))
    embedding = stages[0][0]["embedding_head"]
    head = stages[-1][0]["embedding_head"] - (embedding if L == 1 else 0)
    return [*out, (embedding, 0.0), (head + norm, 0.0)]


def _gathered(
    m: ModelConfig,
    lay: Layout,
    units: list[tuple[float, float]],
    layers: list[int],
    first: bool,
    last: bool,
    optimizer: str,
    precision: str,
    lora: tuple[int, str] | None,
) -> int:
    """ZeRO-3's gathered working set on one GPU of a stage, beyond its shards: the largest
    unit it gathers (:func:`_units`: a layer, the embedding on the first stage, the head on
    the last) held whole twice in the compute dtype, the one running and the next one
    prefetched (PyTorch FSDP's defaults, from recall: ``backward_prefetch=BACKWARD_PRE``, and
    at most two all-gathers in flight under ``limit_all_gathers``; DeepSpeed bounds its
    prefetch by parameters instead, ``stage3_prefetch_bucket_size`` and
    ``stage3_max_live_parameters``), and that unit's unsharded gradient at the gradient's
    bytes before its reduce-scatter (under LoRA the layer's adapters': the frozen weights take
    none). Only what is sharded is gathered: the non-expert parameters over ``dp x cp`` ranks,
    the routed experts over :func:`expert_dp`; 0 where neither shards."""
    w, g = optimizer_bytes_per_param(optimizer, precision)[:2]
    dense_sharded = lay.dp * lay.cp > 1
    experts_sharded = expert_dp(lay) > 1
    picked = [(units[i], i) for i in layers]
    picked += [(units[-2], None)] if first else []
    picked += [(units[-1], None)] if last else []
    worst = 0.0
    for (dense, experts), i in picked:
        params = dense * dense_sharded + experts * experts_sharded
        grad = params
        if lora is not None:  # the adapters alone take gradients
            grad = 0 if i is None or not dense_sharded else stage_lora_params(m, *lora, [i], lay.tp)
        worst = max(worst, params * 2 * w + grad * g)
    return math.ceil(worst)


def training_cost(
    model: ModelConfig | str,
    seq_len: int = 4096,
    micro_batch: int = 1,
    impl: str = "expanded",
    recompute: str = "none",
    hardware: Any = None,
    tp: int = 1,
    pp: int = 1,
    dp: int = 1,
    ep: int = 1,
    global_batch: int | None = None,
    optimizer: str = "adamw",
    precision: str = "bf16-mixed",
    zero: int | None = None,
    attention: str | None = None,
    profile: Any = None,
    overlap: bool = False,
    comm_sms: int = 0,
    memory_reserve: float = D.MEMORY_RESERVE,
    swiglu: str = "fused",
    cp: int = 1,
    lora_rank: int | None = None,
    lora_targets: str | None = None,
    base_dtype: str = "compute",
    virtual_stages: int = 1,
    stage_layers: Any = None,
    mtp: bool | None = None,
    schedule: str = "1f1b",
) -> TrainingCost:
    """FLOPs, memory and (with ``hardware``) the time of one training step.

    Parameters
    ----------
    impl
        ``"expanded"`` (K and V made from the latent, flash attention) or ``"absorbed"``
        (attention in latent space, probabilities kept); only MLA has both.
    recompute
        ``"none"``, ``"kv_up"`` (MLA's up-projection again in the backward) or ``"full"``.
    tp, pp, dp, ep, micro_batch, global_batch
        the parallel layout (see :mod:`mlacalc.training.step`); batches in sequences.
    optimizer, precision, zero
        ``adamw``, ``adam``, ``lion``, ``sgd-momentum``, ``sgd``; ``bf16-mixed``, ``fp8-mixed``,
        ``bf16``, ``fp32``; ZeRO stage 0 to 3 (None: 1, not said to shard nothing at dp 1).
    overlap
        hide the tensor-, expert- and pipeline-parallel communication behind the compute (a
        schedule such as DualPipe); otherwise it adds to it.
    comm_sms
        SMs of each GPU given to communication kernels (their compute is lost to the GEMMs and
        attention: DeepSeek-V3 gives 20 of 132).
    memory_reserve
        the share of each GPU's memory kept apart (CUDA context, workspaces, fragmentation),
        in [0, 1): a layout fits where its share is within the rest (the serving planner's
        rule and default, :data:`mlacalc.words.defaults.MEMORY_RESERVE`).
    cp
        context-parallel ranks: each sequence split into ``2 cp`` chunks, two a rank (the
        load-balanced split of causal attention), its K and V passed around a ring; GPUs are
        ``tp x cp x pp x dp`` (docs/training.md, "Context parallelism").
    lora_rank, lora_targets
        LoRA fine-tuning (:mod:`mlacalc.training.lora`): adapters of this rank on
        ``"attention-mlp"`` (None: it) or ``"attention"``; the base weights frozen, kept in
        the compute dtype, with no gradient, master copy or optimizer state, and no
        weight-gradient GEMMs. A rank of None: every weight trains (targets given without one
        are said in ``warnings``).
    base_dtype
        how LoRA keeps its frozen base (:data:`mlacalc.training.lora.BASE_DTYPES`):
        ``"compute"`` (the compute dtype) or ``"nf4"`` (QLoRA: the linear layers' weights at
        :data:`~mlacalc.training.lora.NF4_BYTES_PER_PARAM` bytes, dequantized to the compute
        dtype before each GEMM that reads them, forward and backward); ``"nf4"`` needs
        ``lora_rank``.
    virtual_stages
        Megatron-LM's interleaved 1F1B schedule: each pipeline stage holds this many chunks of
        ``L / (pp v)`` layers; the bubble ``(pp - 1) / v`` micro-batch times, ``v`` times the
        pipeline's sends, the first stage's activations ``1 + (pp - 1) / (pp v)`` times
        1F1B's (:func:`_in_flight`).
    stage_layers
        each pipeline stage's layers: ``pp`` counts or ``"FIRST,..,LAST"`` (None: an even
        split; :func:`mlacalc.training.step.check_stage_layers`, :func:`stage_layer_ids`).
    mtp, schedule
        train the config's MTP modules with the model, on the last stage (:func:`_mtp_count`,
        :func:`~mlacalc.training.step.mtp_layers`; MFU counts their FLOPs as the model's); the
        pipeline schedule, ``"1f1b"`` or ``"zb-h1"`` (:func:`mlacalc.training.step.step_time`).
    swiglu
        ``"fused"`` (Megatron-LM's, TransformerEngine's: ``[gate, up]`` and the product saved)
        or ``"unfused"`` (eager PyTorch: gate, up, SiLU(gate), the product); gated FFNs only.

    Examples
    --------
    >>> c = training_cost("deepseek-v3", seq_len=4096)
    >>> round(c.flops.per_token / 1e9, 1)  # its MTP module trained with it (mtp=False: 250.5)
    260.6
    """
    given = dict(locals())  # the inputs as given, for the ZeRO and NF4 levers' re-runs
    m = model_argument(model)
    seq_len = args.count("seq_len", seq_len, _MAX_SEQ)
    engine_impl(m, impl)
    recompute = check_recompute(m, impl, recompute)
    swiglu = check_swiglu(swiglu)
    attention = attention or default_attention(impl)
    zero_given, zero = zero is not None, 1 if zero is None else zero
    reserve = _checked(zero, memory_reserve, optimizer, precision)
    lay = make_layout(m, tp, pp, dp, ep, micro_batch, global_batch, cp, seq_len, virtual_stages,
                      stage_layers)  # fmt: skip
    schedule = _check_cp(lay, attention, impl, schedule)
    rank, targets = check_lora(m, lora_rank, lora_targets or "attention-mlp")
    base = check_base_dtype(base_dtype, rank, precision, zero)
    lora = None if rank is None else (rank, targets)
    n_mtp = _mtp_count(m, mtp, lora)
    act_dtype = "fp32" if precision == "fp32" else "bf16"
    mb = lay.micro_batch
    flops, model_flops = _step_flops(m, seq_len, mb, impl, recompute, attention, lora, n_mtp)
    acts, rerun = _saved(m, seq_len, mb, impl, recompute, act_dtype, swiglu, lora)
    stages = _stages(m, lay, acts, optimizer, precision, zero, rerun, lora, base == "nf4", n_mtp)
    busiest = max(stages, key=lambda st: st.total)
    heaviest = max(stages, key=lambda st: st.lora if lora else st.dense + st.experts)  # (_timed)
    time = peak = memory = None
    if hardware is not None:
        time = _timed(m, lay, hardware, stages, heaviest, seq_len, impl, recompute, attention,
                      act_dtype, precision, optimizer, zero, profile, overlap, comm_sms,
                      lora, n_mtp, schedule)  # fmt: skip
        peak, memory = _device(hardware)
    cost = TrainingCost(
        model=m.name, seq_len=seq_len, impl=impl, recompute=recompute, attention=attention,
        optimizer=optimizer, precision=precision, zero=zero, layout=lay, flops=flops,
        activations=acts,
        activation_bytes_per_gpu=busiest.activations,
        states_per_gpu=busiest.states,
        params_per_gpu=busiest.dense + busiest.experts + busiest.lora,
        time=time,
        stage=busiest.index,
        stage_layers=busiest.layers,
        recomputed_layer_bytes=busiest.again,
        peak_flops_per_s=peak,
        device_memory_bytes=memory,
        memory_reserve=reserve,
        levers=_levers(m, lay, recompute, zero, seq_len, attention, *_nf4(base, lora, precision)),
        model_flops_per_micro_batch=model_flops,
        global_batch_defaulted=global_batch is None,
        step_layers_note=_stage_note(m, lay, time, n_mtp),
        mtp_layers=n_mtp,
        swiglu=swiglu, lora_rank=rank, lora_targets=targets if lora else None,
        trainable_params=lora_params(m, *lora) if lora else None,
        trainable_params_per_gpu=busiest.lora if lora else None,
        base_dtype=base,
        nf4_params_per_gpu=busiest.nf4,
        warnings=_said(m, lay, swiglu, zero if zero_given else None, rank, lora_targets)
        + _tp_crossing(hardware, lay, time),
    )  # fmt: skip
    return _with_lever_figures(cost, _alternatives(cost, given, m))


def _alternatives(cost: TrainingCost, given: dict, m: ModelConfig) -> dict[str, TrainingCost]:
    """Where ``cost`` does not fit, the same inputs (``given``) at each ZeRO lever's stage and
    under QLoRA's NF4 base (the levers "ZeRO-z" and "nf4"); those runs' own levers are left
    bare (:data:`_BARE`). Nothing where it fits."""
    others: dict[str, TrainingCost] = {}
    if cost.fits is not False or _BARE.get():
        return others
    token = _BARE.set(True)
    try:
        for lever in cost.levers:
            if lever.startswith("ZeRO-"):
                others[lever] = training_cost(**{**given, "model": m, "zero": int(lever[5:])})
            elif lever == "nf4":
                others[lever] = training_cost(**{**given, "model": m, "base_dtype": "nf4"})
    finally:
        _BARE.reset(token)
    return others


#: set while training_cost figures a lever's alternative: that one's levers are left bare
_BARE: ContextVar[bool] = ContextVar("mlacalc_training_bare_levers", default=False)


def _nf4(base: str, lora: tuple[int, str] | None, precision: str) -> tuple[bool, bool]:
    """Whether QLoRA's NF4 base is in use, and whether it is a lever (``_levers``' ``nf4``
    and ``nf4_lever``): LoRA with the base in the compute dtype, not under fp8-mixed (ZeRO-3,
    which refuses nf4 too, leaves it out in :func:`_levers`)."""
    return base == "nf4", lora is not None and base == "compute" and precision != "fp8-mixed"


def _check_cp(lay: Layout, attention: str, impl: str, schedule: str = "1f1b") -> str:
    """Context parallelism refused under materialized attention (one line); the pipeline
    schedule checked (:func:`~mlacalc.training.step.check_schedule`) and returned."""
    if lay.cp > 1 and attention == "materialized":
        raise InvalidArgumentError(
            "cp",
            f"context parallelism runs a flash kernel around the ring; the {impl} path's "
            "materialized probabilities are not split by it: use cp 1, or impl expanded",
        )
    return check_schedule(lay, schedule)


def _step_flops(
    m: ModelConfig,
    seq_len: int,
    micro_batch: int,
    impl: str,
    recompute: str,
    attention: str,
    lora: tuple[int, str] | None,
    mtp: int = 0,
) -> tuple[TrainingFlops, int | None]:
    """A micro-batch's FLOPs (LoRA's adapters added, :func:`_adapted`; the MTP modules' with
    ``mtp``, :func:`mlacalc.training.step.mtp_kernels`) and, off the expanded path, the
    model's count (the expanded path's, whichever path runs; else None)."""
    frozen = lora is not None
    extra = mtp_kernels(m, seq_len, micro_batch, impl) if mtp else None
    flops = training_flops(
        m, seq_len, micro_batch, impl, recompute, attention, frozen=frozen, mtp=extra
    )
    model_flops = None
    if impl != "expanded":
        extra = mtp_kernels(m, seq_len, micro_batch, "expanded") if mtp else None
        expanded = training_flops(m, seq_len, micro_batch, "expanded", frozen=frozen, mtp=extra)
        model_flops = _adapted(expanded, m, lora, "none").model_flops
    return _adapted(flops, m, lora, recompute), model_flops


def _saved(
    m: ModelConfig,
    seq_len: int,
    micro_batch: int,
    impl: str,
    recompute: str,
    act_dtype: str,
    swiglu: str,
    lora: tuple[int, str] | None,
) -> tuple[tuple[ActivationTensor, ...], dict[str, int]]:
    """A layer's saved activations (the adapters' with LoRA, unless recompute is full) and,
    under full recompute, the bytes of the layer whose forward runs again (else empty)."""
    acts = tuple(layer_activations(m, seq_len, micro_batch, impl, recompute, act_dtype, swiglu))
    if lora is not None and recompute != "full":
        acts += tuple(_adapter_activations(m, lora, micro_batch * seq_len, act_dtype))
    rerun = {}
    if recompute == "full":
        rerun = recomputed_layer_bytes(m, seq_len, micro_batch, impl, act_dtype, swiglu)
    return acts, rerun


def _said(
    m: ModelConfig,
    lay: Layout,
    swiglu: str,
    zero: int | None,
    rank: int | None,
    targets: str | None,
) -> tuple[str, ...]:
    """The inputs taken as given though they mean less than they say, one sentence each
    (:attr:`TrainingCost.warnings`); ``zero`` None where it was left to its default."""
    out = []
    if swiglu != "fused" and not m.gated_mlp:
        out.append(f"swiglu {swiglu}: {m.label} has no gated FFN (no SwiGLU): it changes nothing")
    alone = not m.is_moe or expert_dp(lay) == 1  # the experts shard over none either
    if zero and alone and lay.dp == 1 and lay.cp == 1:
        out.append(
            f"zero {zero}: ZeRO shards over the data-parallel ranks; with dp 1 it shards nothing"
        )
    if targets is not None and rank is None:
        out.append(
            f"lora_targets {targets}: no LoRA rank given, so every weight trains and the "
            "targets change nothing; give lora_rank for adapters"
        )
    return tuple(out)


def _tp_crossing(hardware: Any, lay: Any, time: Any) -> tuple[str, ...]:
    """A tensor-parallel group wider than the device's scale-up fabric (a node, an NVL72
    rack) is timed over the network, said in one sentence with its traffic and the fix (a
    layout given so had been priced so without a word; the search never builds one)."""
    if hardware is None or time is None:
        return ()
    hw = hardware if isinstance(hardware, HardwareSpec) else load_hardware(hardware)
    domain = hw.scale_up_gpus
    if not domain or lay.tp <= domain:
        return ()
    return (
        f"tp {lay.tp}: a tensor-parallel group of {lay.tp} GPUs spans more than "
        f"{hw.name}'s {domain}-GPU scale-up fabric, so its all-gathers and reduce-scatters "
        f"are timed over the network ({human_seconds(time.tp_comm_s)} a micro-batch); keep "
        f"tp within {domain} and split the rest over pipeline or context-parallel ranks",
    )


def _checked(zero: Any, memory_reserve: Any, optimizer: Any, precision: Any) -> float:
    """The ZeRO stage, optimizer and precision checked before any work (one line naming
    each), and the memory reserve as the serving planner checks it, returned."""
    if isinstance(zero, bool) or zero not in (0, 1, 2, 3):
        raise InvalidArgumentError(
            "zero", f"ZeRO stage must be 0, 1, 2 or 3, got {args.show_value(zero)}"
        )
    optimizer_bytes_per_param(optimizer, precision)
    return check_number("memory_reserve", memory_reserve, 0.0, 1.0, allow_none=False)


def _with_lever_figures(cost: TrainingCost, others: dict[str, TrainingCost]) -> TrainingCost:
    """``cost`` with its ZeRO and NF4 levers said with figures (``others``: the same layout
    at each lever's setting, run where it does not fit; a lower ZeRO stage or NF4 that saves
    nothing is left out) and its context-parallel one where the activations are what does not
    fit (left out elsewhere). Without ``others`` (it fits, or an alternative being figured)
    the bare ZeRO-1 and ZeRO-2 and NF4 levers are left out: ZeRO-3's stands for them."""
    said = {}
    for lever, other in others.items():
        if lever == "ZeRO-3":
            said[lever] = _zero3_lever(cost, other)
        elif cost.memory_per_gpu - other.memory_per_gpu >= 1:
            said[lever] = _nf4_lever(cost, other) if lever == "nf4" else _zero_lever(cost, other)
    levers = (
        said.get(x) if x == "nf4" or x in ("ZeRO-1", "ZeRO-2") else said.get(x, x)
        for x in cost.levers
    )
    cost = replace(cost, levers=tuple(x for x in levers if x))
    if any(x.startswith("more context") for x in cost.levers):
        said = _cp_lever(cost) if cost.fits is False else None
        levers = (said if x.startswith("more context") else x for x in cost.levers)
        cost = replace(cost, levers=tuple(x for x in levers if x))
    return cost


def _timed(
    m: ModelConfig,
    lay: Layout,
    hardware: Any,
    stages: list[_Stage],
    busiest: _Stage,
    seq_len: int,
    impl: str,
    recompute: str,
    attention: str,
    act_dtype: str,
    precision: str,
    optimizer: str,
    zero: int,
    profile: Any,
    overlap: Any,
    comm_sms: Any,
    lora: tuple[int, str] | None,
    mtp: int = 0,
    schedule: str = "1f1b",
) -> StepTime:
    """The step time, each stage timed with its own layers (``stages``) and its data-parallel
    traffic and optimizer step priced with its own parameters (``stage_dp``, the step's
    exposed part and optimizer step over the stages as 1F1B ends them:
    :func:`~mlacalc.training.step.step_time`): the parameters it trains (LoRA: the adapters;
    the frozen base weights gathered under ZeRO-3 all the same), and the bytes its optimizer
    step reads and writes: each rank's shard under ZeRO 1-3 (it had counted ZeRO-1's unsharded
    weights and gradients, so ZeRO-3 read as a faster step), read and written once. Before,
    every stage was priced as ``busiest``, the stage that trains the most parameters (the
    figures ``step_time`` keeps as its defaults)."""
    gemm_dtype = "fp8" if precision == "fp8-mixed" else "bf16"
    g = optimizer_bytes_per_param(optimizer, precision)[1]
    shard = 3 if zero >= 1 else 0  # the states the optimizer updates: its shard of each
    ranks = lay.dp * lay.cp

    def own(st: _Stage) -> StageParams:
        """A stage's trained parameters, their routed experts', its optimizer's bytes, frozen."""
        if lora is None:
            updated = state_bytes(st.dense, optimizer, precision, ranks, shard,
                                  st.experts, expert_dp(lay))  # fmt: skip
            return st.dense + st.experts, st.experts, sum(updated.values()) * 2, (0.0, 0.0)
        # only the adapters' gradients and states move and update
        updated = state_bytes(st.lora, optimizer, precision, ranks, shard)
        return st.lora, 0, sum(updated.values()) * 2, (st.dense, st.experts)

    trained, experts, opt_bytes, frozen = own(busiest)
    return step_time(
        m,
        lay,
        hardware,
        seq_len,
        impl,
        recompute,
        attention,
        act_dtype,
        gemm_dtype,
        trained,
        opt_bytes,
        g,
        profile,
        args.flag("overlap", overlap),
        _comm_sms(comm_sms),
        expert_params_per_gpu=experts,
        zero=zero,
        lora=lora,
        frozen=frozen,
        nf4_params_per_gpu=[st.nf4 for st in stages],
        stages=[list(st.ids) for st in stages],
        mtp=mtp,
        stage_dp=[own(st) for st in stages],
        schedule=schedule,
    )


def _cp_lever(c: TrainingCost) -> str | None:
    """The context-parallel lever with its figures, offered where the activations are what
    does not fit (the weights, gradients and states alone do; None otherwise): the smallest
    power-of-two multiple of ``cp`` that splits the sequence (``2 cp`` chunks) and brings the
    activations a GPU down enough to fit, or the largest that splits it; the activations a GPU
    before and after (they scale as ``1 / cp``) and the GPUs it takes."""
    lay, usable = c.layout, c.usable_memory_bytes or 0
    act = c.activation_bytes_per_gpu
    rest = c.memory_per_gpu - act
    if rest > usable:
        return None
    cp = lay.cp
    while c.seq_len % (4 * cp) == 0:
        cp *= 2
        if rest + act * lay.cp / cp <= usable:
            break
    after = math.ceil(act * lay.cp / cp)
    enough = "enough to fit" if rest + after <= usable else "not enough alone"
    return (
        f"more context-parallel ranks (cp {cp}: activations {human_bytes(act)} -> "
        f"{human_bytes(after)} a GPU, {lay.gpus * cp // lay.cp:,} GPUs: {enough})"
    )


def _zero3_lever(now: TrainingCost, zero3: TrainingCost) -> str:
    """The ZeRO-3 lever with what it saves and what it costs: the bytes a GPU's share loses,
    the weight all-gathers a step (two a micro-batch, before its forward and its backward,
    where ZeRO 0-2 gather once a step) and the gradient reduce-scatters (one a micro-batch,
    where ZeRO 0-1 reduce once), and the step time the model predicts with them. What its
    shards save is said with the gathered working set it takes back (the memory table's
    ``zero3_gathered`` row under ZeRO-3, :func:`_gathered`: the largest unit's weights
    gathered whole, the next one's prefetched, its unsharded gradient, none for frozen LoRA
    weights); whether the rest makes up what is over is said, as the context-parallel lever
    says it."""
    n = now.layout.micro_batches
    working = zero3.states_per_gpu.get("zero3_gathered", 0)
    saved = now.memory_per_gpu - zero3.memory_per_gpu + working
    over = now.memory_per_gpu - (now.usable_memory_bytes or 0)
    enough = "enough to fit" if saved - working >= over else "not enough alone"
    text = (
        f"ZeRO-3 ({human_bytes(saved)} less a GPU, {human_bytes(working)} of it taken back by "
        "the gathered layers (the largest layer, embedding or head whole, the next one "
        "prefetched"
        + ("" if now.lora_rank else ", its unsharded gradient")
        + f"): {human_bytes(saved - working)} against {human_bytes(over)} over, {enough}; "
        f"for {2 * n:,} weight all-gathers a step"
    )
    text += f" where ZeRO-{now.zero} runs 1"
    if now.zero < 2 and n > 1:
        text += f" and {n:,} gradient reduce-scatters where it runs 1"
    a, b = now.time, zero3.time
    if a is None or b is None:
        return text + ")"
    return text + (
        f": data-parallel traffic {human_seconds(a.dp_comm_s)} -> {human_seconds(b.dp_comm_s)} "
        f"a step, {human_seconds(a.dp_exposed_s)} -> {human_seconds(b.dp_exposed_s)} exposed, "
        f"step {human_seconds(a.step_s)} -> {human_seconds(b.step_s)})"
    )


def _lever_cost(now: TrainingCost, other: TrainingCost) -> str:
    """What a lever's setting does to the step (``now`` -> ``other``): the data-parallel
    traffic a step and its exposed part where they change, and the step time; "" without a
    device."""
    a, b = now.time, other.time
    if a is None or b is None:
        return ""
    text = ""
    if (a.dp_comm_s, a.dp_exposed_s) != (b.dp_comm_s, b.dp_exposed_s):
        text = (
            f"data-parallel traffic {human_seconds(a.dp_comm_s)} -> "
            f"{human_seconds(b.dp_comm_s)} a step, {human_seconds(a.dp_exposed_s)} -> "
            f"{human_seconds(b.dp_exposed_s)} exposed, "
        )
    return f": {text}step {human_seconds(a.step_s)} -> {human_seconds(b.step_s)}"


def _saving(now: TrainingCost, other: TrainingCost) -> str:
    """What a lever takes off a GPU's share against what is over, and whether it is enough."""
    saved = now.memory_per_gpu - other.memory_per_gpu
    over = now.memory_per_gpu - (now.usable_memory_bytes or 0)
    enough = "enough to fit" if saved >= over else "not enough alone"
    return f"{human_bytes(saved)} less a GPU against {human_bytes(over)} over, {enough}"


def _zero_lever(now: TrainingCost, other: TrainingCost) -> str:
    """A ZeRO-1 or ZeRO-2 lever with what it saves and costs: ZeRO-1 shards the master
    weights and optimizer states over the data-parallel ranks for the same traffic (a
    reduce-scatter and an all-gather a step in place of the all-reduce) and a shard's
    optimizer step; ZeRO-2 the gradients too, for a gradient reduce-scatter every micro-batch
    (a sharded gradient buffer cannot accumulate) where ZeRO 0-1 reduce once a step."""
    z, n = other.zero, now.layout.micro_batches
    shards = (
        "the master weights and optimizer states"
        if z == 1
        else "the gradients" + (", master weights and optimizer states" if now.zero == 0 else "")
    )
    text = f"ZeRO-{z} ({shards} sharded: {_saving(now, other)}; "
    if z == 1:
        text += "the same data-parallel traffic"
    elif n > 1:
        text += (
            f"for {n:,} gradient reduce-scatters a step, one a micro-batch, in place of "
            f"ZeRO-{now.zero}'s one all-reduce"
        )
    else:
        text += "the same traffic at one micro-batch a step"
    return text + _lever_cost(now, other) + ")"


def _nf4_lever(now: TrainingCost, other: TrainingCost) -> str:
    """QLoRA's lever (base_dtype nf4): the frozen base's weights a GPU before and after, what
    that saves against what is over, and the step it costs (each pass dequantizes them)."""
    w, w4 = now.states_per_gpu["weights"], other.states_per_gpu["weights"]
    return (
        f"base_dtype nf4 (QLoRA: weights {human_bytes(w)} -> {human_bytes(w4)} a GPU, "
        f"{_saving(now, other)}; its weights dequantized before each GEMM"
        + _lever_cost(now, other)
        + ")"
    )


def _adapted(
    flops: TrainingFlops, m: ModelConfig, lora: tuple[int, str] | None, recompute: str
) -> TrainingFlops:
    """The FLOPs with LoRA's adapters added (forward; backward twice it; again under full
    recompute); unchanged without LoRA."""
    if lora is None:
        return flops
    fwd, bwd, again = dict(flops.forward), dict(flops.backward), dict(flops.recompute)
    for stage, f in adapter_flops(m, *lora, flops.tokens).items():
        fwd[stage] += f
        bwd[stage] += 2 * f
        if recompute == "full":
            again[stage] += f
    return replace(flops, forward=fwd, backward=bwd, recompute=again)


def _adapter_activations(
    m: ModelConfig, lora: tuple[int, str], tokens: int, dtype: str
) -> list[ActivationTensor]:
    """What the adapters save beyond the base layer: ``x A`` (``r`` a token), ``B``'s input,
    for each adapted matrix (``x`` is the base projection's input, already saved)."""
    rank, targets = lora
    width = 4 if dtype == "fp32" else 2
    out = []
    for a in adapted_matrices(m, targets):
        layers = block_layers(m, a.block)
        el = tokens * rank
        out.append(ActivationTensor(a.block, f"lora_{a.name}_xa", el, el * width, layers))
    return out


def _comm_sms(value: Any) -> int:
    """SMs kept for communication: 0 or a count (-1 had read "must be a positive integer",
    though 0 is the default)."""
    if value == 0 and not isinstance(value, bool):
        return 0
    if args.whole(value) is not None and value < 0:
        raise InvalidArgumentError(
            "comm_sms", f"must be 0 or a positive integer (SMs kept for communication), got {value}"
        )
    return args.count("comm_sms", value, 1 << 16)


def _device(hardware: Any) -> tuple[float, float]:
    """The dense bf16 peak that MFU divides by (also for fp8 training, as reported) and the
    device's memory."""
    hw = hardware if isinstance(hardware, HardwareSpec) else load_hardware(hardware)
    return hw.peak("bf16"), float(hw.memory_bytes)


def absorption_table(
    model: ModelConfig | str,
    seq_lens: Any = (1024, 4096, 16384, 65536),
    micro_batch: int = 1,
    kv_lora_ranks: Any = None,
) -> list[dict[str, Any]]:
    """Absorbed against expanded training per sequence length (and per latent width
    ``kv_lora_ranks``, the model's own by default): attention-core and total FLOPs and the
    activations of one micro-batch (expanded with ``kv_up`` recompute, as the seed's training
    default; absorbed with nothing to recompute), and their ratios. Absorbed costs fewer core
    FLOPs only where ``2 d_c + d_rope < d_nope + d_rope + d_v``."""
    m = model_argument(model)
    if not m.is_mla:
        raise InvalidArgumentError("model", f"{m.label} is not MLA: it has no absorbed path")
    ranks = (
        (m.kv_lora_rank,)
        if kv_lora_ranks is None
        else args.one_or_many("kv_lora_ranks", kv_lora_ranks, what="latent ranks")
    )
    rows = []
    for r in ranks:
        r = args.count("kv_lora_ranks", r, 1 << 20)
        mr = m if r == m.kv_lora_rank else m.replaced(kv_lora_rank=r)
        for t in args.one_or_many("seq_lens", seq_lens, what="sequence lengths"):
            e = training_cost(mr, t, micro_batch, "expanded", "kv_up")
            a = training_cost(mr, t, micro_batch, "absorbed", "none")
            ec, ac = e.flops.forward["attention_core"], a.flops.forward["attention_core"]
            rows.append(
                {
                    "kv_lora_rank": r,
                    "seq_len": e.seq_len,
                    "core_flops_expanded": ec,
                    "core_flops_absorbed": ac,
                    "core_ratio": ac / ec,
                    "flops_expanded": e.flops.hardware_flops,
                    "flops_absorbed": a.flops.hardware_flops,
                    "flops_ratio": a.flops.hardware_flops / e.flops.hardware_flops,
                    "activations_expanded": e.activation_bytes,
                    "activations_absorbed": a.activation_bytes,
                    "activations_ratio": a.activation_bytes / e.activation_bytes,
                }
            )
    return rows
