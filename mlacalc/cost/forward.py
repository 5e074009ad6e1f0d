"""A whole model's forward FLOPs per token at a context, split into weights' and attention's.

An architecture's first figure is the forward work of one token: about 2 x its active
parameters (every weight multiplied once) plus what attention does over the context, which
the active parameters do not show (the score and value products over every key the token
attends). :func:`forward_flops_per_token` takes both from the kernels of one decode step of
the whole model (:func:`mlacalc.cost.model_step.step_kernels`: one new token, ``seq_len`` keys
in the cache, batch 1, the implementation the serving engines run at decode, absorbed for MLA)
and sorts its FLOPs, so the figure is the same count ``roofline --scope model`` and the time
model use, not a second formula:

- weights' products (every ``gemm`` and ``moe`` kernel outside the attention core, and the
  weights' share of DeepSeek-V4's ``mhc_pre``):
  ``attention_projections`` (query, key/value, MLA's absorbed ``W_UK`` / ``W_UV``, output; a
  linear or Mamba layer's projections; a DSA indexer's projections), ``dense`` (dense FFNs,
  shared experts and the router), ``experts`` (the routed experts one token activates),
  ``head`` (the output head) and ``other`` (DeepSeek-V4's hyper-connections: each
  ``mhc_pre``'s product with its mixer's weights ``hc_fn`` and the head's mixer ``hc_head``;
  the mixes by weights computed from the streams are element-wise, and a compressor's
  projections count with the attention projections);
- ``attention``: the attention core's products over the context (scores and values over the
  keys a layer keeps, a window's in a sliding layer, the top-k's in a DSA layer, and its
  indexer's scores over every key; a linear or Mamba layer's state update, which does not grow
  with the context, counts here too);
- ``elementwise``: norms, RoPE, activations, the hyper-connections' mixes by computed weights
  (a few FLOPs an element; nominal).

For a plain model (no tied head) the weights' products are 2 x (active parameters less the
norms' weights), which :mod:`tests.test_forward_flops` checks, and the whole sum is
``FlopCounterMode``'s count of a PyTorch decode step plus the element-wise FLOPs it does not
count.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mlacalc.cost.engine import as_model
from mlacalc.cost.model_step import hyper_weight_flops, kernel_stage, step_kernels
from mlacalc.words import arguments as args
from mlacalc.words.vocab import serving_impl

__all__ = ["WEIGHT_PARTS", "ForwardFlops", "forward_flops_per_token"]

#: The weights' parts, in the order outputs list them.
WEIGHT_PARTS = ("attention_projections", "dense", "experts", "head", "other")
#: A weight kernel's stage -> its part (attention stages not named here: projections).
_STAGE_PARTS = {"ffn": "dense", "head": "head", "hyper": "other"}


@dataclass(frozen=True)
class ForwardFlops:
    """One token's forward FLOPs at ``seq_len`` keys: ``weights`` by part
    (:data:`WEIGHT_PARTS`), ``attention`` (the core's products over the context) and
    ``elementwise``; ``impl`` the MLA implementation counted (None for other models)."""

    seq_len: int
    impl: str | None
    weights: dict[str, int]
    attention: int
    elementwise: int

    @property
    def weight_flops(self) -> int:
        """The weights' products: about 2 x the active parameters."""
        return sum(self.weights.values())

    @property
    def total(self) -> int:
        return self.weight_flops + self.attention + self.elementwise

    def to_dict(self) -> dict[str, Any]:
        return {
            "seq_len": self.seq_len,
            "impl": self.impl,
            "total_flops": self.total,
            "weight_flops": self.weight_flops,
            "weight_flops_by_part": dict(self.weights),
            "attention_flops": self.attention,
            "elementwise_flops": self.elementwise,
        }


def _part(name: str, kind: str) -> str:
    """Where a step kernel's FLOPs go: a part of :data:`WEIGHT_PARTS`, ``"attention"`` or
    ``"elementwise"``."""
    stage = kernel_stage(name)
    if stage == "core":
        return "attention"
    if kind == "moe":
        return "experts"
    if kind != "gemm":
        return "elementwise"
    if stage in _STAGE_PARTS:
        return _STAGE_PARTS[stage]
    return "attention_projections" if stage in _ATTENTION_STAGES else "other"


#: The stages of an attention block's weight products (:data:`model_step.KERNEL_STAGES`).
_ATTENTION_STAGES = ("q_proj", "kv_proj", "kv_up", "absorb", "o_proj")


def forward_flops_per_token(model: Any, seq_len: int) -> ForwardFlops:
    """The forward FLOPs of one token of ``model`` attending ``seq_len`` keys (its cache holds
    ``seq_len`` tokens, its own included), from one decode step's kernels of batch 1
    (:func:`~mlacalc.cost.model_step.step_kernels`), split as this module says.

    >>> f = forward_flops_per_token("llama-3-8b", 4096)
    >>> f.weights["attention_projections"] + f.weights["dense"] + f.weights["head"] == (
    ...     f.weight_flops)
    True
    >>> f.attention == 32 * 2 * 2 * 32 * 128 * 4096  # layers x (QK^T + PV) x heads x d_h x keys
    True
    """
    m = as_model(model)
    seq_len = args.plain_int(seq_len)  # step_kernels checks it, naming the field
    parts = dict.fromkeys(WEIGHT_PARTS, 0)
    rest = {"attention": 0, "elementwise": 0}
    for k in step_kernels(m, "decode", seq_len, 1):
        part = _part(k.name, k.kind)
        flops = int(k.flops) * int(k.calls)
        if k.name == "mhc_pre":  # its product with the mixer's weights; the rest mixes
            product = hyper_weight_flops(m.hc_mult, int(k.shape["elements"])) * int(k.calls)
            parts["other"] += product
            flops -= product
        if part in parts:
            parts[part] += flops
        else:
            rest[part] += flops
    impl = serving_impl("decode") if m.is_mla else None
    return ForwardFlops(seq_len, impl, parts, rest["attention"], rest["elementwise"])
