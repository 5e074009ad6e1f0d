"""LoRA: low-rank adapters on frozen weights, the matrices they adapt and their parameters.

A LoRA adapter of rank ``r`` on a weight ``W`` of ``d_in x d_out`` adds ``A`` (``d_in x r``)
and ``B`` (``r x d_out``): ``r (d_in + d_out)`` trainable parameters, ``y = x W + (x A) B``
(the scaling ``alpha / r`` is a constant and saves nothing). The matrices are the Hugging Face
layer's modules, one adapter each (PEFT's ``target_modules``): separate ``q_proj``,
``k_proj``, ``v_proj``, ``gate_proj``, ``up_proj``, whatever kernel fuses them.

Targets (:data:`TARGETS`): ``"attention-mlp"`` (the default: every attention projection and
the dense MLP's and shared experts' projections, as PEFT's ``all-linear`` adapts them, the
output head excepted) or ``"attention"`` (the attention projections only). The router and the
routed experts are not adapted under either (PEFT's ``all-linear`` does not reach experts held
as one fused parameter, as recent Hugging Face MoE layers hold them; from recall).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from mlacalc.models.loading import ModelConfig
from mlacalc.words import arguments as args
from mlacalc.words.errors import InvalidArgumentError

__all__ = [
    "BASE_DTYPES",
    "NF4_BYTES_PER_PARAM",
    "TARGETS",
    "Adapted",
    "adapted_matrices",
    "adapter_flops",
    "block_layers",
    "check_base_dtype",
    "check_lora",
    "layer_blocks",
    "lora_params",
    "max_rank",
    "stage_lora_params",
]

#: what each ``lora_targets`` choice adapts
TARGETS = {
    "attention-mlp": "the attention projections and the dense MLP's and shared experts' ones",
    "attention": "the attention projections only",
}


#: how LoRA keeps its frozen base weights (``base_dtype``)
BASE_DTYPES = {
    "compute": "in the compute dtype (bf16 under the mixed precisions)",
    "nf4": "QLoRA: the linear layers' weights in 4-bit NormalFloat, dequantized per GEMM",
}
#: QLoRA's NF4 weights, from recall of its paper (Dettmers et al. 2023): 4 bits a weight, one
#: absmax scale a block of 64 weights, the scales double-quantized to 8 bits with one fp32
#: constant a block of 256 scales: 4 + 8 / 64 + 32 / (64 x 256) = 4.127 bits, 0.5159 bytes
NF4_BLOCK = 64
NF4_SCALE_BLOCK = 256
NF4_BYTES_PER_PARAM = (4 + 8 / NF4_BLOCK + 32 / (NF4_BLOCK * NF4_SCALE_BLOCK)) / 8


def check_base_dtype(base_dtype: Any, rank: int | None, precision: str, zero: int) -> str:
    """The frozen base's dtype (:data:`BASE_DTYPES`), refused where it means nothing: ``nf4``
    quantizes a LoRA run's frozen base, so not without ``lora_rank``; its GEMMs run at the
    compute dtype it is dequantized to, so not under ``fp8-mixed``; and its gathered 4-bit
    shards under ZeRO-3 (FSDP-QLoRA) are not built."""
    base = args.choice("base_dtype", base_dtype, BASE_DTYPES)
    if base == "nf4":
        if rank is None:
            raise InvalidArgumentError(
                "base_dtype",
                "'nf4' quantizes the frozen base of a LoRA run (QLoRA), and no weights are "
                "frozen without lora_rank: give lora_rank, or base_dtype 'compute'",
            )
        if precision == "fp8-mixed":
            raise InvalidArgumentError(
                "base_dtype",
                "'nf4' is dequantized to the compute dtype for each GEMM, so fp8-mixed's FP8 "
                "GEMMs would quantize it again: use precision bf16-mixed, bf16 or fp32",
            )
        if zero == 3:
            raise InvalidArgumentError(
                "base_dtype",
                "'nf4' under ZeRO-3 (FSDP-QLoRA: its 4-bit shards gathered) is not built: use "
                "zero 0, 1 or 2, or base_dtype 'compute'",
            )
    return base


@dataclass(frozen=True)
class Adapted:
    """One adapted matrix of a layer: its module, block (``attention``, ``ffn`` for a dense
    layer's MLP, ``moe`` for a MoE layer's shared experts), shape and how tensor parallelism
    splits it (``column``: its output; ``row``: its input; ``replicated``)."""

    name: str
    block: str
    d_in: int
    d_out: int
    split: str

    def params(self, rank: int) -> int:
        return rank * (self.d_in + self.d_out)

    def params_per_gpu(self, rank: int, tp: int) -> int:
        """One tensor-parallel rank's share: ``B``'s output split (column) or ``A``'s input
        (row), the other factor whole; both whole where the weight is replicated."""
        if self.split == "column":
            return rank * self.d_in + math.ceil(rank * self.d_out / tp)
        if self.split == "row":
            return math.ceil(rank * self.d_in / tp) + rank * self.d_out
        return self.params(rank)


def check_lora(m: ModelConfig, rank: Any, targets: Any) -> tuple[int | None, str]:
    """The LoRA rank (None: full fine-tuning or pre-training) and targets, refused where the
    adapters are not counted."""
    targets = args.choice("lora_targets", targets, TARGETS)
    if rank is None:
        return None, targets
    # the model's own bound is checked below; this one only refuses what is not a count
    rank = args.count("lora_rank", rank, 1 << 62)
    if m.family not in ("llama", "deepseek", "minicpm3"):
        raise InvalidArgumentError(
            "lora_rank",
            f"adapters are counted for the Llama and DeepSeek layouts (separate Q, K, V and a "
            f"gated MLP); {m.label}'s {m.family} layout is not built: train every weight "
            "(no LoRA rank)",
        )
    narrowest = narrowest_matrix(m, targets)
    top = min(narrowest.d_in, narrowest.d_out)
    if rank > top:
        raise InvalidArgumentError(
            "lora_rank",
            f"{rank:,} is above {top:,}, the largest rank for {m.label} on {targets}: an "
            f"adapter's rank is at most the narrower side of the matrix it adapts, and "
            f"{narrowest.name} is {narrowest.d_in:,} x {narrowest.d_out:,} (a larger rank "
            "adds parameters and no capacity); use lora_rank 1 .. " + f"{top:,}",
        )
    return rank, targets


def max_rank(m: ModelConfig, targets: str = "attention-mlp") -> int:
    """The largest LoRA rank on ``targets``: the narrower side of the narrowest adapted
    matrix (``A B`` has rank at most ``min(d_in, d_out)``, so past it the adapters only add
    parameters; at it they hold as many as a full update of that matrix or more)."""
    a = narrowest_matrix(m, targets)
    return min(a.d_in, a.d_out)


def narrowest_matrix(m: ModelConfig, targets: str = "attention-mlp") -> Adapted:
    """The adapted matrix with the narrowest side, which bounds the rank (:func:`max_rank`)."""
    return min(adapted_matrices(m, targets), key=lambda a: min(a.d_in, a.d_out))


def adapted_matrices(m: ModelConfig, targets: str = "attention-mlp") -> list[Adapted]:
    """The matrices one layer of each block kind adapts (a dense layer's ``ffn``, a MoE
    layer's ``moe``: its shared experts), at the model's widths."""
    d, n_h = m.hidden_size, m.num_attention_heads
    out: list[Adapted] = []
    if m.is_mla:
        qk = m.qk_nope_head_dim + m.qk_rope_head_dim
        if m.q_lora_rank:
            out.append(Adapted("q_a_proj", "attention", d, m.q_lora_rank, "replicated"))
            out.append(Adapted("q_b_proj", "attention", m.q_lora_rank, n_h * qk, "column"))
        else:
            out.append(Adapted("q_proj", "attention", d, n_h * qk, "column"))
        latent = m.kv_lora_rank + m.qk_rope_head_dim
        out.append(Adapted("kv_a_proj_with_mqa", "attention", d, latent, "replicated"))
        width = n_h * (m.qk_nope_head_dim + m.v_head_dim)
        out.append(Adapted("kv_b_proj", "attention", m.kv_lora_rank, width, "column"))
        out.append(Adapted("o_proj", "attention", n_h * m.v_head_dim, d, "row"))
    else:
        hd, n_kv = m.head_dim, m.num_key_value_heads
        dv = m.v_head_dim or hd
        out += [
            Adapted("q_proj", "attention", d, n_h * hd, "column"),
            Adapted("k_proj", "attention", d, n_kv * hd, "column"),
            Adapted("v_proj", "attention", d, n_kv * dv, "column"),
            Adapted("o_proj", "attention", n_h * dv, d, "row"),
        ]
    if targets == "attention":
        return out
    shared = m.shared_intermediate_size or (m.n_shared_experts or 0) * (
        m.moe_intermediate_size or 0
    )
    for block, f in (("ffn", m.intermediate_size), ("moe", shared if m.is_moe else 0)):
        if f:
            out += [
                Adapted("gate_proj", block, d, f, "column"),
                Adapted("up_proj", block, d, f, "column"),
                Adapted("down_proj", block, f, d, "row"),
            ]
    return out


def layer_blocks(m: ModelConfig, i: int) -> tuple[str, str]:
    """The blocks of layer ``i``: attention and its FFN kind."""
    return "attention", "moe" if m.is_moe_layer(i) else "ffn"


def block_layers(m: ModelConfig, block: str) -> int:
    """How many of the model's layers hold ``block`` (:func:`layer_blocks`): an adapted
    matrix runs once in each."""
    return sum(block in layer_blocks(m, i) for i in range(m.num_hidden_layers))


def lora_params(m: ModelConfig, rank: int, targets: str = "attention-mlp") -> int:
    """Every adapter's parameters over the model's layers (the trainable parameters)."""
    per = adapted_matrices(m, targets)
    total = 0
    for i in range(m.num_hidden_layers):
        blocks = layer_blocks(m, i)
        total += sum(a.params(rank) for a in per if a.block in blocks)
    return total


def stage_lora_params(m: ModelConfig, rank: int, targets: str, layers: Any, tp: int) -> int:
    """One tensor-parallel rank's adapter parameters over a stage's ``layers``."""
    per = adapted_matrices(m, targets)
    return sum(
        a.params_per_gpu(rank, tp) for i in layers for a in per if a.block in layer_blocks(m, i)
    )


#: the training stage (:data:`mlacalc.training.flops.TRAINING_STAGES`) of each block's adapters
_STAGE = {"attention": "attention_projections", "ffn": "ffn", "moe": "ffn"}


def adapter_flops(m: ModelConfig, rank: int, targets: str, tokens: int) -> dict[str, int]:
    """The adapters' forward FLOPs over ``tokens``, by training stage: ``2 tokens r (d_in +
    d_out)`` an adapted matrix a layer (``x A``, then ``(x A) B``); their backward is twice
    that (both factors take input and weight gradients)."""
    out: dict[str, int] = {}
    per = adapted_matrices(m, targets)
    for i in range(m.num_hidden_layers):
        for a in per:
            if a.block in layer_blocks(m, i):
                stage = _STAGE[a.block]
                out[stage] = out.get(stage, 0) + 2 * tokens * a.params(rank)
    return out
