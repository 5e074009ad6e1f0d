"""Training FLOPs: forward, backward and recomputation of one micro-batch, by stage.

The forward pass is the model step of a prefill over ``seq_len`` tokens of ``micro_batch``
sequences (:func:`mlacalc.cost.model_step.step_kernels`, causal by default), with the output
head on every token (training predicts each next token). Backward, per matmul:

- a product with a weight (projections, FFN, experts, router, head, the absorbed ``W_UK`` and
  ``W_UV``): two products of the same FLOPs, the input's gradient and the weight's;
- the attention core (no weight): the gradients of the query, key and value (``dQ``, ``dK``,
  ``dV``) and of the probabilities (``dP``), four products as large as the forward's two.

So the backward is twice the forward, the convention of MFU ("model FLOPs"). Recomputation
adds "hardware FLOPs": a flash kernel (``attention="flash"``, what the expanded path runs)
recomputes the scores from the saved log-sum-exp in its backward (one score product; a kernel
that keeps the probabilities, ``"materialized"``, what the absorbed path needs since no public
flash kernel takes its split score, does not); ``recompute="kv_up"`` runs MLA's key/value
up-projection again before the attention's backward (only the latent and the RoPE key were kept:
Megatron-LM's ``mla_up_proj`` recompute); ``"full"`` runs each decoder layer's forward again
(only its input was kept).

FLOPs are matmul FLOPs (``2 m n k``), what ``torch.utils.flop_counter.FlopCounterMode``
counts; ``causal=True`` counts the (query, key) pairs a causal kernel computes
(``T (T + 1) / 2`` per head and sequence), ``causal=False`` every pair. The element-wise work
(norms, RoPE, activations) is reported apart.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from mlacalc.cost.model_step import kernel_stage, step_kernels
from mlacalc.models.architecture import layer_pattern
from mlacalc.models.loading import ModelConfig, model_argument
from mlacalc.words import arguments as args
from mlacalc.words.errors import InvalidArgumentError
from mlacalc.words.kernels import Kernel

__all__ = [
    "ATTENTION_KERNELS",
    "RECOMPUTE_POLICIES",
    "SCHEDULES",
    "TRAINING_IMPLS",
    "TRAINING_STAGES",
    "TrainingFlops",
    "core_kinds",
    "engine_impl",
    "forward_kernels",
    "training_flops",
]

TRAINING_IMPLS = ("expanded", "absorbed")
RECOMPUTE_POLICIES = ("none", "kv_up", "full")
#: the pipeline schedules :func:`mlacalc.training.step.step_time` prices: Megatron-LM's 1F1B
#: (interleaved where ``vp > 1``) and ZB-H1, the zero-bubble schedule with 1F1B's memory (Qi
#: et al. 2023); here beside the other training words the command line's options list
SCHEDULES = ("1f1b", "zb-h1")
ATTENTION_KERNELS = ("flash", "materialized")
#: the stages of the breakdown, in order
TRAINING_STAGES = ("attention_projections", "attention_core", "ffn", "moe", "head")

_STAGE = {
    "q_proj": "attention_projections",
    "kv_proj": "attention_projections",
    "kv_up": "attention_projections",
    "absorb": "attention_projections",
    "o_proj": "attention_projections",
    "core": "attention_core",
    "head": "head",
}
_MOE = ("router", "routed_experts", "moe_latent_in", "moe_latent_out")
_CORE_KINDS = ("attention_prefill", "attention_decode", "mla_prefill", "mla_decode")


def core_kinds() -> tuple[str, ...]:
    """Kernel kinds of an attention core."""
    return _CORE_KINDS


def engine_impl(m: ModelConfig, impl: str) -> str | None:
    """The engine implementation a training path runs (``expanded``: MLA's naive heads)."""
    args.choice("impl", impl, TRAINING_IMPLS)
    if impl == "absorbed" and not m.is_mla:
        raise InvalidArgumentError(
            "impl",
            f"'absorbed' is an MLA path and {m.label} is {m.variant.upper()}; use 'expanded'",
        )
    if not m.is_mla:
        return None
    return "naive" if impl == "expanded" else "absorbed"


def training_stage(k: Kernel) -> str:
    """The stage of the training breakdown a forward kernel belongs to ("" for element-wise)."""
    if k.kind in ("elementwise", "quantize"):
        return ""
    if k.name in _MOE:
        return "moe"
    if k.name == "eh_proj":  # an MTP module's projection (mlacalc.training.step.mtp_layers)
        return "head"
    stage = kernel_stage(k.name)
    return _STAGE.get(stage, "ffn" if stage == "ffn" else stage)


_TRAINABLE = ("full", "sliding", "chunked", "mla")


#: how the refusal names a layer kind training does not build (others: "X attention")
_KIND_WORDS = {"none": "no attention", "mamba": "Mamba-2 mixers", "mamba1": "Mamba-1 mixers"}


def _refuse(m: ModelConfig) -> None:
    pattern = layer_pattern(m).layers
    odd = [
        _KIND_WORDS.get(k, f"{k} attention")
        for k in sorted({k.attention for k in pattern if k.attention not in _TRAINABLE})
    ]
    # Falcon-H1: Mamba-2 beside attention
    odd += sorted({f"{k.label} (Mamba-2 beside attention)" for k in pattern if k.mamba})
    odd += sorted(
        {"no FFN" if k.ffn == "none" else f"a {k.ffn} FFN" for k in pattern}
        - {"a dense FFN", "a moe FFN"}
    )
    if m.linear_num_key_heads is not None or m.index_topk is not None or odd:
        kinds = " / ".join(odd) or "linear or sparse (DSA) attention"
        noop = (
            " (the block a no-op)"
            if any(k.attention == "none" or k.ffn == "none" for k in pattern)
            else ""
        )
        raise InvalidArgumentError(
            "model",
            f"training costs of {m.label}'s layers with {kinds}{noop} are not built (only "
            "decoder layers of full, sliding or chunked MHA/GQA/MQA/MLA attention with a dense "
            "or MoE FFN are); use serving's commands (report, roofline, plan) for this model",
        )


def forward_kernels(
    model: ModelConfig | str,
    seq_len: int,
    micro_batch: int = 1,
    impl: str = "expanded",
    causal: bool = True,
    dtype: str = "bf16",
) -> list[Kernel]:
    """The forward kernels of one micro-batch (whole model, one GPU), the head on every token
    (a new list each call; during a layout search built once per model and settings,
    :data:`_FORWARD`)."""
    m = model_argument(model)
    store = _FORWARD.get()
    key = None if store is None else (id(m), seq_len, micro_batch, impl, causal, dtype)
    hit = None if key is None else store.get(key)
    if hit is not None and hit[0] is m:
        return list(hit[1])
    _refuse(m)
    eng, causal = engine_impl(m, impl), args.flag("causal", causal)
    out = _forward(m, seq_len, micro_batch, eng, causal, dtype)
    if store is not None:
        store[key] = (m, tuple(out))
    return out


#: forward_kernels' kernels by model object (kept in the value and checked by identity) and
#: settings while a layout search runs (:func:`mlacalc.training.layout_search.memo`; None
#: otherwise): each of its pricings asks for the same micro-batch's kernels, timed or not; a
#: context variable, as ``step._SECONDS`` is (one thread's search never ends another's store)
_FORWARD: ContextVar[dict[tuple, tuple[ModelConfig, tuple[Kernel, ...]]] | None] = ContextVar(
    "training_forward", default=None
)


def _forward(
    m: ModelConfig, seq_len: int, micro_batch: int, eng: str, causal: bool, dtype: str
) -> list[Kernel]:
    ks = step_kernels(
        m,
        "prefill",
        seq_len,
        micro_batch,
        impl=eng,
        causal=causal,
        weight_dtype=dtype,
        act_dtype=dtype,
        kv_dtype=dtype,
    )
    out = []
    for k in ks:
        if k.name == "lm_head":  # training predicts every token, not one per sequence
            tokens = micro_batch * seq_len
            d, V = k.shape["k"], k.shape["n"]
            nbytes = 2 * (V * d + tokens * (d + V))
            k = Kernel(
                "lm_head",
                "gemm",
                k.dtype,
                2 * tokens * d * V,
                nbytes,
                1,
                {"m": tokens, "n": V, "k": d, "groups": 1},
            )
        out.append(k)
    return out


def score_flops(k: Kernel) -> int:
    """The score product's share of an attention-core kernel's FLOPs (``d_qk / (d_qk + d_v)``)."""
    d_qk, d_v = k.shape["head_dim_qk"], k.shape["head_dim_v"]
    return k.flops * d_qk // (d_qk + d_v)


@dataclass(frozen=True)
class TrainingFlops:
    """Matmul FLOPs of one micro-batch through the whole model, by stage.

    ``model_flops`` is this path's forward and backward (MFU counts the model's, the expanded
    path's: :attr:`mlacalc.training.cost.TrainingCost.model_flops`; the absorbed path runs more
    for the same model); ``hardware_flops`` adds the recomputation (the flash backward's score
    product included): HFU's count. ``elementwise`` is the
    forward's element-wise FLOPs (not in the totals).
    """

    forward: dict[str, int]
    backward: dict[str, int]
    recompute: dict[str, int]
    elementwise: int
    tokens: int

    @property
    def model_flops(self) -> int:
        return sum(self.forward.values()) + sum(self.backward.values())

    @property
    def hardware_flops(self) -> int:
        return self.model_flops + sum(self.recompute.values())

    @property
    def per_token(self) -> float:
        """Model FLOPs per token (forward and backward)."""
        return self.model_flops / self.tokens

    def to_dict(self) -> dict[str, Any]:
        return {
            "forward": dict(self.forward),
            "backward": dict(self.backward),
            "recompute": dict(self.recompute),
            "elementwise_forward": self.elementwise,
            "tokens": self.tokens,
            "model_flops": self.model_flops,
            "hardware_flops": self.hardware_flops,
        }


def check_recompute(m: ModelConfig, impl: str, recompute: Any) -> str:
    """The recompute policy, refused where it means nothing (``kv_up`` without an up-projection)."""
    args.choice("recompute", recompute, RECOMPUTE_POLICIES)
    if recompute == "kv_up" and (not m.is_mla or impl == "absorbed"):
        why = "the absorbed path" if m.is_mla else f"{m.label} ({m.variant.upper()})"
        raise InvalidArgumentError(
            "recompute",
            f"'kv_up' recomputes MLA's key/value up-projection, which {why} does not run; use "
            "'none' or 'full'",
        )
    return recompute


def default_attention(impl: str) -> str:
    """The attention kernel a path runs: flash when expanded, materialized when absorbed."""
    return "materialized" if impl == "absorbed" else "flash"


def training_flops(
    model: ModelConfig | str,
    seq_len: int,
    micro_batch: int = 1,
    impl: str = "expanded",
    recompute: str = "none",
    attention: str | None = None,
    causal: bool = True,
    frozen: bool = False,
    mtp: list[Kernel] | None = None,
) -> TrainingFlops:
    """Forward, backward and recomputed matmul FLOPs of one micro-batch, by stage;
    ``frozen``: the weights take no gradient (LoRA, :mod:`mlacalc.training.lora`), so a GEMM's
    backward is its input-gradient product alone (the weight-gradient one is skipped); the
    adapters' own FLOPs are added by :func:`mlacalc.training.cost.training_cost`; ``mtp``
    the forward kernels of the MTP modules trained with the model
    (:func:`mlacalc.training.step.mtp_kernels`), counted as the model's (None: none, the
    decoder and its head alone, as the ISCA per-token figure counts them).

    Examples
    --------
    >>> f = training_flops("deepseek-v3", 4096)
    >>> round(f.per_token / 1e9, 1)      # GFLOPs per token, forward and backward
    250.5
    """
    m = model_argument(model)
    ks = forward_kernels(m, seq_len, micro_batch, impl, causal) + (mtp or [])
    recompute = check_recompute(m, impl, recompute)
    attention = args.choice("attention", attention or default_attention(impl), ATTENTION_KERNELS)
    fwd = dict.fromkeys(TRAINING_STAGES, 0)
    bwd = dict.fromkeys(TRAINING_STAGES, 0)
    again = dict.fromkeys(TRAINING_STAGES, 0)
    elementwise = 0
    for k in ks:
        stage = training_stage(k)
        if not stage:
            elementwise += k.flops * k.calls
            continue
        f = k.flops * k.calls
        fwd[stage] += f
        bwd[stage] += f if frozen and k.kind in ("gemm", "moe") else 2 * f
        if k.kind in _CORE_KINDS and attention == "flash":
            again[stage] += score_flops(k) * k.calls
        full = recompute == "full" and stage != "head"
        if full or (recompute == "kv_up" and k.name == "kv_b_proj"):
            again[stage] += f
    return TrainingFlops(fwd, bwd, again, elementwise, micro_batch * seq_len)
