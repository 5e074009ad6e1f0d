"""How a deployment spreads a model over its GPUs, and what each GPU then holds.

A layout is ``gpus = tp x dp x pp``:

- ``pp`` pipeline stages, each holding a contiguous run of layers (the embedding on the
  first, the output head on the last); a token passes every stage in turn;
- in each stage, ``dp`` attention groups of ``tp`` GPUs. Tensor parallelism splits the
  attention heads, the dense and shared-expert FFN widths and the vocabulary over the ``tp``
  ranks; MLA's latent projection (``kv_a_proj_with_mqa``), the query down-projection and the
  norms are replicated, and so is the latent cache (every rank reads all of it); GQA splits
  its K/V heads up to ``n_kv`` ranks and replicates them beyond;
- the routed experts of a MoE layer are shared by a *MoE group*: the ``tp`` ranks of one
  attention group, or the whole stage (``tp x dp`` GPUs) under ``dp_attention``, which
  ``ep > tp`` over several groups implies (:func:`make_layout` makes it so). In the MoE
  group, ``ep`` GPUs hold different experts and the remaining ``group / ep`` split each
  expert's width (MoE tensor parallelism). ``redundant_experts`` extra replicas of busy
  experts (DeepSeek's EPLB) take expert slots like the others, so ``ep`` divides
  ``n_routed_experts + redundant_experts`` (256 + 32 = 288 slots over EP72).

``dp_attention`` is how SGLang and DeepSeek serve MLA models: attention data-parallel (each
group keeps its own sequences' latent, so it is not replicated), experts shared by the stage.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Any

from mlacalc.cost.attention import indexer_row_bytes
from mlacalc.cost.block_sparse import block_indexer_row_bytes
from mlacalc.cost.compressed import (
    compressed_attention_split,
    compressed_layer_bytes,
    compressed_splits_by_heads,
)
from mlacalc.cost.engine import attention_params, kv_cache, kv_projection_params
from mlacalc.cost.families import linear_state_bytes
from mlacalc.cost.params import KEPT_BITS, keeps_16_bits, param_counts
from mlacalc.cost.quant import checkpoint_part_bytes, checkpoint_tensors, tensor_bytes
from mlacalc.models.architecture import arch_of, kind_model, kv_head_share, layer_pattern
from mlacalc.models.loading import ModelConfig
from mlacalc.models.patterns import COMPRESSED_KINDS, STATE_KINDS
from mlacalc.models.tensors import first_attention_tensors, part_of, tensors
from mlacalc.words.arguments import whole
from mlacalc.words.dtypes import KVLayout, dtype_bits, state_layout
from mlacalc.words.errors import InvalidArgumentError

__all__ = [
    "KV_HEAD_FIELDS",
    "Layout",
    "kv_bytes_per_sequence_per_gpu",
    "kv_bytes_per_token_per_gpu",
    "make_layout",
    "stage_breakdowns",
    "stage_layers",
    "tp_splits_heads",
    "weight_breakdown",
    "weight_bytes_by_part",
    "weight_format",
    "weights_per_gpu",
]


@dataclass(frozen=True)
class Layout:
    """A parallel layout of one serving instance (see the module docstring)."""

    gpus: int
    tp: int
    dp: int
    pp: int
    ep: int
    dp_attention: bool
    moe_group: int  # GPUs sharing the routed experts of one MoE layer
    moe_tp: int  # ways each routed expert is split (moe_group / ep)
    redundant_experts: int = 0  # extra replicas of busy experts (EPLB), placed like the others

    @property
    def stage_gpus(self) -> int:
        return self.tp * self.dp

    def describe(self) -> str:
        parts = [f"TP{self.tp}"]
        if self.dp > 1:
            parts.append(f"{'DP-attention' if self.dp_attention else 'DP'}{self.dp}")
        if self.pp > 1:
            parts.append(f"PP{self.pp}")
        if self.ep > 1:
            parts.append(f"EP{self.ep}")
        if self.moe_tp not in (1, self.tp):
            # the experts split otherwise than the attention: "TP1 DP-attention8" alone read as
            # each GPU holding whole experts where each is split 8 ways (trial 6)
            parts.append(f"MoE-TP{self.moe_tp}")
        if self.redundant_experts:
            # the replicas the plan was sized and timed with (a trial: "TP1 DP-attention16
            # EP16" of a plan at --redundant-experts 32 said none), as search's lines say them
            n = self.redundant_experts
            parts.append(f"({n} redundant expert{'s' if n > 1 else ''})")
        return " ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__, describe=self.describe())


def tp_splits_heads(m: ModelConfig, tp: int) -> bool:
    """Whether ``tp`` ranks split ``m``'s attention heads and its linear attention's key and
    value heads whole (the layouts :func:`make_layout` accepts)."""
    linear = (getattr(m, f"linear_num_{k}_heads", None) for k in ("key", "value"))
    return (
        m.num_attention_heads % tp == 0
        and not any(h and h % tp for h in linear)
        and not kv_heads_unsplit(m, tp)
    )


#: The config fields of K/V head counts a tensor-parallel degree must split or copy whole:
#: every attention layer's, Gemma-4's global layers', MiMo's sliding layers'
KV_HEAD_FIELDS = ("num_key_value_heads", "num_global_key_value_heads", "sliding_key_value_heads")


def _kv_head_counts(m: ModelConfig) -> tuple[int, ...]:
    """The K/V head counts of ``m``'s attention layers a tensor-parallel degree must split or
    copy whole (:data:`KV_HEAD_FIELDS`; none for MLA and DeepSeek-V4's one latent: every rank
    reads all of it)."""
    if m.is_mla or m.compress_ratios:
        return ()
    return tuple(sorted({c for c in (getattr(m, f, None) for f in KV_HEAD_FIELDS) if c}))


def kv_heads_unsplit(m: ModelConfig, tp: int) -> int | None:
    """The K/V head count of ``m`` that ``tp`` ranks can neither split whole nor copy whole
    (``n_kv % tp`` and ``tp % n_kv`` both non-zero), or None. From recall, not a stored
    copy: vLLM's and SGLang's QKV parallel linear assert one of the two (each rank holds
    ``n_kv / tp`` heads, or one head copied onto ``tp / n_kv`` ranks), and TensorRT-LLM's
    attention splits the heads the same way; 6 KV heads at TP4 or 7 at TP8 do not run."""
    for n_kv in _kv_head_counts(m):
        if n_kv % tp and tp % n_kv:
            return n_kv
    return None


def kv_heads_degrees(
    m: ModelConfig, tp: int, n_kv: int, gpus: int | None = None, most: int | None = None
) -> str:
    """The nearest tensor degrees to ``tp`` that split ``m``'s query heads whole and its
    ``n_kv`` K/V heads whole or copy them whole, among the divisors of ``gpus`` where given
    and up to ``most`` where given: ``"tp 3 or 6"``, ``"tp 1"``, or a clause saying none of
    the ``gpus`` GPUs' degrees does."""
    heads = m.num_attention_heads
    ok = [
        t
        for t in range(1, heads + 1)
        if heads % t == 0
        and (n_kv % t == 0 or t % n_kv == 0)
        and (gpus is None or gpus % t == 0)
        and (most is None or t <= most)
        and t != tp
    ]
    below = [t for t in ok if t < tp][-1:]
    above = [t for t in ok if t > tp][:1]
    if not below + above:
        return f"no tensor degree of {gpus} GPUs does"
    return "tp " + " or ".join(map(str, below + above))


def kv_heads_words(m: ModelConfig, tp: int, n_kv: int, gpus: int | None = None) -> str:
    """Why ``tp`` cannot serve ``n_kv`` K/V heads, and the nearest degrees that can (those
    dividing ``gpus`` where given: :func:`kv_heads_degrees`)."""
    degrees = kv_heads_degrees(m, tp, n_kv, gpus)
    on = f"on {gpus} GPUs " if gpus is not None else ""
    use = f"{on}use {degrees}" if degrees.startswith("tp ") else f"{degrees}"
    return (
        f"tensor parallel degree {tp} neither divides nor is a multiple of the {n_kv} KV "
        f"heads (num_key_value_heads) of {m.label}: the engines give each rank whole KV heads "
        f"or one head copied whole (vLLM's and SGLang's QKV layers, TensorRT-LLM's attention, "
        f"from recall); {use}, or a "
        f"num_key_value_heads that {tp} divides or is a multiple of"
    )


def _check_linear_heads(m: ModelConfig, tp: int) -> None:
    """Linear attention's heads split whole over the TP ranks: vLLM's and SGLang's gated
    delta-net layers give each rank ``heads / tp`` key and value heads and load their
    weights in those shards (from recall of both engines' Qwen3-Next layers), so ``tp``
    divides both counts (Qwen3.5-122B-A10B's 16 key heads: TP16 at most)."""
    for kind in ("key", "value"):
        heads = getattr(m, f"linear_num_{kind}_heads", None)
        if heads and heads % tp:
            most = max(d for d in range(1, heads + 1) if heads % d == 0 and d <= tp)
            raise InvalidArgumentError(
                "tp",
                f"tensor parallel degree {tp} does not divide the {heads} linear-attention "
                f"{kind} heads of {m.label} (the engines split them whole): use tp {most} or "
                "a divisor of it",
            )


def _int_arg(name: str, value: Any, allow_none: bool = False) -> int | None:
    if value is None and allow_none:
        return None
    number = whole(value)
    if number is None or number <= 0:
        raise InvalidArgumentError(name, f"must be a positive integer, got {value!r}")
    return number


def make_layout(
    m: ModelConfig,
    gpus: int,
    tp: int | None = None,
    dp: int | None = None,
    pp: int = 1,
    ep: int = 1,
    dp_attention: bool = False,
    redundant_experts: int = 0,
) -> Layout:
    """Check a layout against the model and the GPU count; each error names the argument."""
    gpus = _int_arg("gpus", gpus)
    pp = _int_arg("pp", pp)
    ep = _int_arg("ep", ep)
    tp = _int_arg("tp", tp, allow_none=True)
    dp = _int_arg("dp", dp, allow_none=True)
    if not isinstance(dp_attention, bool):
        raise InvalidArgumentError("dp_attention", f"must be true or false, got {dp_attention!r}")
    if gpus % pp:
        raise InvalidArgumentError("pp", f"{pp} pipeline stages do not divide the {gpus} GPUs")
    stage = gpus // pp
    if tp is None and dp is None:
        tp, dp = (1, stage) if dp_attention else (stage, 1)
    elif tp is None:
        if stage % dp:
            raise InvalidArgumentError(
                "dp", f"tp x dp x pp must equal gpus: dp={dp} does not divide {stage}"
            )
        tp = stage // dp
    elif dp is None:
        if stage % tp:
            raise InvalidArgumentError(
                "tp",
                f"tp x dp x pp must equal gpus: tp={tp} does not divide "
                f"the {stage} GPUs of a stage (gpus={gpus}, pp={pp})",
            )
        dp = stage // tp
    if tp * dp * pp != gpus:
        raise InvalidArgumentError(
            "tp", f"tp x dp x pp must equal gpus: {tp} x {dp} x {pp} != {gpus}"
        )
    if m.num_attention_heads % tp:
        raise InvalidArgumentError(
            "tp",
            f"tensor parallel degree {tp} does not divide the "
            f"{m.num_attention_heads} attention heads of {m.label}" + _tp_choices(m, stage),
        )
    _check_linear_heads(m, tp)
    n_kv = kv_heads_unsplit(m, tp)
    if n_kv:
        raise InvalidArgumentError("tp", kv_heads_words(m, tp, n_kv, stage))
    if pp > m.num_hidden_layers:
        raise InvalidArgumentError(
            "pp", f"{pp} stages exceed the {m.num_hidden_layers} layers of {m.label}"
        )
    if ep > 1 and not m.is_moe:
        raise InvalidArgumentError("ep", f"{m.label} has no experts to spread; use ep=1")
    number = whole(redundant_experts)
    if number is None or number < 0:
        raise InvalidArgumentError(
            "redundant_experts", f"must be an integer >= 0, got {redundant_experts!r}"
        )
    redundant_experts = number
    if redundant_experts and not m.is_moe:
        raise InvalidArgumentError("redundant_experts", f"{m.label} has no experts to replicate")
    slots = m.n_routed_experts + redundant_experts
    # ep > tp over several attention groups shares each MoE layer's experts across the groups,
    # which meet at the experts' exchange every layer: that is DP-attention (SGLang's
    # --enable-dp-attention, TensorRT-LLM's enable_attention_dp, vLLM's DP with EP), so the
    # layout is one, as timed, reported and launched (a new-user trial: --tp 1 --dp 8 --ep 8
    # timed as DP-attention, said dp_attention false, launched as 8 replicas of all the weights)
    dp_attention = dp_attention or (dp > 1 and ep > tp)
    group = stage if dp_attention else tp
    # the GPUs first: replicas cannot mend an ep that does not divide them, so a hint to add
    # some (plan's, on the slots' error) would only lead to this error next
    if ep > 1 and gpus % ep:
        raise InvalidArgumentError(
            "ep",
            f"expert parallel degree {ep} does not divide the {gpus} GPUs"
            + _ep_choices(m.n_routed_experts, redundant_experts, gpus),
        )
    if group % ep:
        raise InvalidArgumentError(
            "ep",
            f"expert parallel degree {ep} does not divide the MoE group of "
            f"{group} GPUs (tp={tp}{', whole stage' if group == stage else ''})"
            + _ep_choices(m.n_routed_experts, redundant_experts, group),
        )
    if redundant_experts and ep == 1:
        # a new-user trial: 32 replicas under pure TP8 added 9.5 GiB a GPU and 43.64 -> 46.50 ms
        raise InvalidArgumentError(
            "redundant_experts",
            f"{redundant_experts} replicas of busy experts (EPLB) spread the load over "
            "expert-parallel ranks, but ep is 1: every GPU holds every expert (or a slice of "
            "each), so replicas would only add bytes and time; give an ep above 1 (--ep) or "
            "leave redundant_experts (--redundant-experts) out",
        )
    if ep > 1 and slots % ep:
        extra = f" + {redundant_experts} redundant" if redundant_experts else ""
        raise InvalidArgumentError(
            "ep",
            f"expert parallel degree {ep} does not divide the "
            f"{m.n_routed_experts} routed experts{extra}; redundant experts (EPLB replicas) can "
            "round the slots up to a multiple of ep",
        )
    if m.is_moe and group // ep > m.moe_intermediate_size:
        # each routed expert's FFN split group/ep ways: past its intermediate size some GPUs
        # would hold no column of it (the step's times were NaN)
        raise InvalidArgumentError(
            "ep",
            f"each routed expert of {m.label} would be split {group // ep} ways (the MoE group "
            f"of {group} GPUs over ep={ep}), more than its {m.moe_intermediate_size} "
            "intermediate columns; raise ep (--ep) or use fewer GPUs per MoE group",
        )
    if m.is_moe and not _moe_tp_splits(m, group // ep):
        raise InvalidArgumentError("ep", _moe_tp_words(m, group, ep, redundant_experts))
    return Layout(
        gpus=gpus,
        tp=tp,
        dp=dp,
        pp=pp,
        ep=ep,
        dp_attention=dp_attention,
        moe_group=group,
        moe_tp=group // ep,
        redundant_experts=redundant_experts,
    )


def _tp_split(m: ModelConfig, t: int) -> bool:
    """Whether ``t`` tensor-parallel ranks split ``m``'s attention heads, its linear attention's
    key and value heads and its K/V heads as :func:`make_layout` checks them."""
    linear = (getattr(m, f"linear_num_{k}_heads", None) for k in ("key", "value"))
    return (
        m.num_attention_heads % t == 0
        and not any(h and h % t for h in linear)
        and not kv_heads_unsplit(m, t)
    )


def _tp_choices(m: ModelConfig, stage: int) -> str:
    """The tensor-parallel degrees that split ``m``'s heads and divide the ``stage`` GPUs of a
    pipeline stage (data parallelism taking the rest), and the larger ones that split the
    heads on another GPU count: advice that fixes the layout (a trial's 3 GPUs at TP 3 on
    Qwen3-Next's 16 heads were told no fix)."""
    here = [t for t in range(1, stage + 1) if stage % t == 0 and _tp_split(m, t)]
    elsewhere = [t for t in range(2, m.num_attention_heads + 1) if stage % t and _tp_split(m, t)]
    words = f"; use tp {', '.join(map(str, here[:-1]))}{' or ' if len(here) > 1 else ''}"
    words += f"{here[-1]} on these {stage} GPUs (dp takes the rest)"
    if elsewhere:
        listed = ", ".join(map(str, elsewhere[:-1]))
        words += f", or tp {listed + ' or ' if listed else ''}{elsewhere[-1]} on a GPU count "
        words += "it divides"
    return words


def _expert_block(m: ModelConfig) -> tuple[int, int] | None:
    """The checkpoint's weight block (rows, columns) its routed experts' scales are kept by
    (``quantization_config.weight_block_size``: DeepSeek-V3's and Kimi-K2's fp8 128x128), or
    None where the checkpoint keeps none (unquantized, per-tensor or group scales)."""
    q = m.quantization
    if q is None or getattr(q, "expert_format", None) not in (None, "fp8"):
        return None  # experts in another format (DeepSeek-V4's mxfp4: a scale per 32 values)
    return getattr(q, "block", None)


def _moe_tp_splits(m: ModelConfig, moe_tp: int) -> bool:
    """Whether ``moe_tp`` ranks split each routed expert's intermediate width into whole
    shards the engines load: the width a whole multiple of ``moe_tp``, and where the
    checkpoint keeps block scales, each shard a whole number of blocks (vLLM's and SGLang's
    fp8 block MoE refuse a gate/up shard not a multiple of the block's rows or a down shard
    not a multiple of its columns, from recall of their weight loaders' checks)."""
    width = m.moe_intermediate_size
    if moe_tp <= 1 or not width:
        return True
    if width % moe_tp:
        return False
    block = _expert_block(m)
    return block is None or not ((width // moe_tp) % block[0] or (width // moe_tp) % block[1])


def _moe_tp_words(m: ModelConfig, group: int, ep: int, redundant: int) -> str:
    """Why ``ep`` over a MoE group of ``group`` GPUs splits ``m``'s routed experts into shards
    the engines cannot load (:func:`_moe_tp_splits`), and the expert-parallel degrees that
    work, each with the replicas that round the expert slots up to it (a trial: DeepSeek-V3 on
    24 H200 at ep 8 was planned as MoE-TP3, 2,048 columns over 3)."""
    width, moe_tp = m.moe_intermediate_size, group // ep
    block = _expert_block(m)
    why = (
        f"its {width:,} intermediate columns do not split {moe_tp} ways"
        if width % moe_tp
        else f"{width // moe_tp}-column shards are narrower than (or not whole) "
        f"{block[0]}x{block[1]} weight blocks (the checkpoint's quantization_config."
        "weight_block_size)"
    )
    ok = []
    for e in (e for e in range(2, group + 1) if group % e == 0 and _moe_tp_splits(m, group // e)):
        more = redundant + (-(m.n_routed_experts + redundant)) % e
        ok.append(f"{e}" + (f" (with --redundant-experts {more})" if more != redundant else ""))
    use = (
        f"use --ep {' or '.join(ok[:6])}"
        if ok
        else f"no expert-parallel degree of the {group}-GPU MoE group does"
    )
    return (
        f"expert parallel degree {ep} over the MoE group of {group} GPUs splits each routed "
        f"expert of {m.label} {moe_tp} ways (MoE-TP{moe_tp}), and {why}: the engines load "
        f"whole shards; {use}"
    )


def _ep_choices(experts: int, redundant: int, gpus: int) -> str:
    """The expert-parallel degrees above 1 that divide ``gpus``, each with the replicas (if
    any) that round the expert slots up to a multiple of it: advice that fixes the layout."""
    if not experts:
        return ""
    out = []
    for e in (e for e in range(2, gpus + 1) if gpus % e == 0):
        more = redundant + (-(experts + redundant)) % e
        out.append(f"{e}" + (f" with {more} replicated experts" if more else ""))
    return f"; use an ep that divides them: {', '.join(out)}" if out else ""


#: MLA's projections (and their norms) that every tensor-parallel rank holds whole
_MLA_WHOLE = ("q_a_proj", "q_a_layernorm", "kv_a_proj_with_mqa", "kv_a_layernorm")


def _attention_per_rank(m: ModelConfig, tp: int) -> Fraction:
    """Attention parameters one tensor-parallel rank holds, per layer: MLA's latent
    down-projections whole, else the K/V projections by whole K/V heads (replicated beyond
    ``n_kv`` ranks), a fused QKV's K/V rows too: vLLM's and SGLang's ``QKVParallelLinear``
    (from recall of their linear layers) gives each rank ``ceil(n_kv / tp)`` K/V heads of the
    one weight (Falcon-7B's one K/V head on every rank), not ``1 / tp`` of its rows."""
    attn = attention_params(m)
    if m.is_mla:
        replicated = sum(v for k, v in attn.items() if k in _MLA_WHOLE)
        return replicated + Fraction(sum(attn.values()) - replicated, tp)
    kv = kv_projection_params(m)
    return Fraction(sum(attn.values()) - kv, tp) + kv * kv_head_share(m.num_key_value_heads, tp)


_MOE_FLAGS: dict[int, tuple[ModelConfig, tuple[bool, ...]]] = {}


def _moe_flags(m: ModelConfig) -> tuple[bool, ...]:
    """Whether each layer is a MoE layer (computed once per model)."""
    hit = _MOE_FLAGS.get(id(m))
    if hit is None or hit[0] is not m:
        hit = (m, tuple(m.is_moe_layer(i) for i in range(m.num_hidden_layers)))
        _MOE_FLAGS[id(m)] = hit
    return hit[1]


def stage_layers(m: ModelConfig, pp: int) -> list[range]:
    """Contiguous layer ranges of the ``pp`` stages (the first stages take the remainder)."""
    base, extra = divmod(m.num_hidden_layers, pp)
    out, start = [], 0
    for s in range(pp):
        n = base + (1 if s < extra else 0)
        out.append(range(start, start + n))
        start += n
    return out


_LAYER_PARTS = ("attention", "dense_ffn", "moe_shared_experts", "moe_router", "moe_routed_experts")


@lru_cache(maxsize=64)
def _layer_params(m: ModelConfig) -> tuple[dict[str, int], ...]:
    """Parameters of each decoder layer by part (attention, dense FFN, shared experts,
    router, routed experts; norms are spread evenly elsewhere). A model of a family with
    its own layers (Gemma 4, Qwen3-Next, gpt-oss, ...) is counted tensor by tensor, so a
    Gemma 4 full layer has its own heads and the dense MLP beside its experts is there;
    a base-layout model by the uniform formulas of :func:`mlacalc.cost.params.param_counts`."""
    L = m.num_hidden_layers
    out = [dict.fromkeys(_LAYER_PARTS, 0) for _ in range(L)]
    if arch_of(m) is not None:
        for t in tensors(m):
            part = part_of(t.name)
            if part in _LAYER_PARTS and ".layers." in t.name:
                out[int(t.name.split(".layers.", 1)[1].split(".", 1)[0])][part] += t.numel
        return tuple(out)
    b = param_counts(m).breakdown
    n_moe = m.num_moe_layers
    n_dense = L - n_moe
    flags = _moe_flags(m)
    for i, layer in enumerate(out):
        layer["attention"] = b["attention"] // L
        if flags[i]:
            for part in ("moe_shared_experts", "moe_router", "moe_routed_experts"):
                layer[part] = b[part] // n_moe
        else:
            layer["dense_ffn"] = b["dense_ffn"] // n_dense
    return tuple(out)


def _attention_share(m: ModelConfig, kind: Any, tp: int) -> Fraction:
    """The fraction of one layer's attention parameters a tensor-parallel rank holds: its
    kind's own heads (a Gemma 4 full layer's ``num_global_key_value_heads``), K/V heads
    replicated beyond ``n_kv`` ranks, MLA's latent projections whole; a linear-attention
    layer splits by its heads. Exact (a fraction), so a part's bytes on a rank are whole."""
    if tp == 1:
        return Fraction(1)
    if kind.attention in STATE_KINDS:
        return Fraction(1, tp)
    if kind.attention in COMPRESSED_KINDS:  # DeepSeek-V4: the query heads' tensors split
        split, total = compressed_attention_split(m, kind)
        return (Fraction(split, tp) + total - split) / total
    own = m.global_head_dim is not None or m.attention_k_eq_v or m.sliding_key_value_heads
    sub = kind_model(m, kind) if own else m
    if arch_of(m) is not None and not m.is_mla:  # the kind's own tensors (gates, k = v, ...)
        per_rank, total = _tensor_split(m, kind, sub.num_key_value_heads, tp)
        return per_rank / total if total else Fraction(1)  # a layer without attention: nothing
    whole = _indexer_params(m)  # a DSA layer's indexer, whole on every rank
    return (_attention_per_rank(sub, tp) + whole) / (sum(attention_params(sub).values()) + whole)


#: a non-MLA attention tensor whose rows are the layer's K/V heads (replicated beyond them)
_KV_TENSORS = (".k_proj.", ".v_proj.", ".k_norm.")


@lru_cache(maxsize=64)
def _tensor_split(m: ModelConfig, kind: Any, n_kv: int, tp: int) -> tuple[Fraction, int]:
    """One ``kind`` layer's attention parameters a tensor-parallel rank holds, and the
    layer's, tensor by tensor (a model counted tensor by tensor: its q_proj with Qwen3-Next's
    output gate, Step-3.7's per-head gate, Gemma 4's full layer without a v_proj): a tensor
    whose rows are the ``n_kv`` K/V heads held ``ceil(n_kv / tp)`` heads a rank, a norm of one
    head's width whole on every rank, every other tensor (query, output, gates, sinks, an
    msa indexer) split over the ranks."""
    i = layer_pattern_of(m).index(kind)
    mine = f".layers.{i}."
    widths = {m.head_dim, m.global_head_dim, m.v_head_dim} - {None}
    per_rank, total = Fraction(0), 0
    for t in tensors(m):
        if mine not in t.name or part_of(t.name) != "attention":
            continue
        total += t.numel
        if t.name.endswith("norm.weight") and t.shape[0] in widths:
            per_rank += t.numel
        elif any(k in t.name for k in _KV_TENSORS) and ".indexer." not in t.name:
            per_rank += t.numel * kv_head_share(n_kv, tp)
        else:
            per_rank += Fraction(t.numel, tp)
    return per_rank, total


@lru_cache(maxsize=16)
def _indexer_params(m: ModelConfig) -> int:
    """Parameters of one DSA layer's indexer (its query and key projections, key norm and
    head weights; 0 without one), which every tensor-parallel rank holds whole: vLLM's and
    SGLang's DeepSeek-V3.2 indexers build them replicated (from recall of their modules), and
    a served step runs its kernels unsplit (mlacalc.serving.gpu_step)."""
    return sum(t.numel for t in first_attention_tensors(m) if ".indexer." in t.name)


def weight_breakdown(m: ModelConfig, lay: Layout, include_mtp: bool = False) -> dict[str, float]:
    """Parameters one GPU of the fullest stage holds, by part (not yet in bytes).

    At one GPU the parts add up to the model's parameters exactly (plus the MTP layers
    with ``include_mtp``); every layer counts its own kind of attention, and a dense MLP
    beside the experts (Gemma 4) or a shared-expert gate is ``dense_ffn``. The MTP layers
    (``mtp``, on the last stage) split as a decoder layer does (:func:`_mtp_shares`)."""
    return {k: float(v) for k, v in _fullest_stage(m, lay, include_mtp)[0].items()}


def _fullest_stage(
    m: ModelConfig, lay: Layout, include_mtp: bool
) -> tuple[dict[str, Fraction], range, bool]:
    """:func:`weight_breakdown`'s parts (exact), the layers of that stage, and whether it is
    the last (the one that holds the MTP layers). Remembered as :func:`stage_breakdowns`
    is (a plan asks it for each weight dtype it sizes; the parts are read, never changed)."""

    def fullest() -> tuple[dict[str, Fraction], range, bool]:
        best: tuple[dict[str, Fraction], range, bool] | None = None
        for stage in _stages(m, lay, include_mtp):
            if best is None or sum(stage[0].values()) > sum(best[0].values()):
                best = stage
        assert best is not None
        return best

    return _remembered(_FULLEST, _BREAKDOWNS_KEPT, m, (lay, include_mtp), fullest)


def stage_breakdowns(
    m: ModelConfig, lay: Layout, include_mtp: bool = False
) -> list[tuple[dict[str, float], range, bool]]:
    """Every pipeline stage's :func:`weight_breakdown` parts (parameters one of its GPUs
    holds), its layers, and whether it is the last; training takes the busiest of them.

    Remembered for the last :data:`_BREAKDOWNS_KEPT` (model, layout) pairs, the model by
    identity (a training layout search prices the same stages hundreds of times, each
    :func:`mlacalc.training.cost.training_cost` call asking two or three times); each call
    gets its own dicts."""

    def floats() -> list[tuple[dict[str, float], range, bool]]:
        exact = _stages(m, lay, include_mtp)
        return [({k: float(v) for k, v in p.items()}, ls, last) for p, ls, last in exact]

    kept = _remembered(_BREAKDOWNS, _BREAKDOWNS_KEPT, m, (lay, include_mtp), floats)
    return [(dict(part), layers, last) for part, layers, last in kept]


def _remembered(memory: dict, most: int, m: ModelConfig, args: tuple, compute: Any) -> Any:
    """``compute()``'s answer for model ``m`` and ``args``, kept in ``memory`` for its last
    ``most`` questions, the model by identity and kept beside the answer so that its id is
    not reused while the entry lives (the oldest entry evicted first; two threads may evict
    at once)."""
    key = (id(m), *args)
    kept = memory.get(key)
    if kept is None or kept[0] is not m:
        kept = (m, compute())
        # the eviction and the insertion under one lock: a thread iterating the memory for its
        # oldest entry while another inserts raised "dictionary changed size during iteration"
        # (test_serving_layout_cache_threads, in CI)
        with _MEMORY_LOCK:
            if len(memory) >= most:
                memory.pop(next(iter(memory), None), None)
            memory[key] = kept
    return kept[1]


#: guards :func:`_remembered`'s eviction and insertion across threads
_MEMORY_LOCK = threading.Lock()


#: :func:`stage_breakdowns`' memory: (id(model), layout, include_mtp) -> (model, stages); the
#: model kept so that its id is not reused while the entry lives
_BREAKDOWNS: dict[tuple, tuple] = {}
#: :func:`_fullest_stage`'s memory, alike
_FULLEST: dict[tuple, tuple] = {}
_BREAKDOWNS_KEPT = 512


def _stages(
    m: ModelConfig, lay: Layout, include_mtp: bool
) -> list[tuple[dict[str, Fraction], range, bool]]:
    """:func:`stage_breakdowns` in exact fractions: a rank's bytes are rounded once, per
    part, to whole weights (a float share had put qwen3-32b's TP8 bf16 attention at an odd
    1,509,982,209 bytes)."""
    b = param_counts(m).breakdown
    per_layer = _layer_params(m)
    kinds = layer_pattern_of(m)
    slots = (
        Fraction(m.n_routed_experts + lay.redundant_experts, m.n_routed_experts)
        if m.is_moe
        else Fraction(1)
    )
    shares: dict[Any, Fraction] = {}
    out: list[tuple[dict[str, Fraction], range, bool]] = []
    stages = stage_layers(m, lay.pp)
    L, tp = m.num_hidden_layers, lay.tp
    for s, layers in enumerate(stages):
        part = dict.fromkeys(
            ("attention", "norms", "dense_ffn", "shared_experts", "router", "routed_experts"),
            Fraction(0),
        )
        for i in layers:
            kind = kinds[i]
            if kind not in shares:
                shares[kind] = _attention_share(m, kind, tp)
            p = per_layer[i]
            part["attention"] += p["attention"] * shares[kind]
            part["dense_ffn"] += Fraction(p["dense_ffn"], tp)
            part["shared_experts"] += Fraction(p["moe_shared_experts"], tp)
            part["router"] += p["moe_router"]  # replicated on every rank
            part["routed_experts"] += p["moe_routed_experts"] * slots / lay.moe_group
        part["norms"] = Fraction(b["norms"] * len(layers), L)  # final norm spread
        if b.get("hyper_connections"):  # DeepSeek-V4's stream mixers: whole on every rank
            part["hyper_connections"] = Fraction(b["hyper_connections"] * len(layers), L)
        part["embedding_head"] = Fraction(
            (b["embedding"] + b["position_embedding"]) if s == 0 else 0, tp
        ) + (Fraction(b["lm_head"], tp) if s == len(stages) - 1 else 0)
        last = s == len(stages) - 1
        part["mtp"] = (
            sum((n * f for n, _, f in _mtp_shares(m, lay)), Fraction(0))
            if include_mtp and last
            else Fraction(0)
        )
        out.append((part, layers, last))
    return out


#: the MTP layer's projection of the embedding and hidden state, whole on every rank (SGLang's
#: and vLLM's DeepSeek MTP modules build it as a plain ``nn.Linear``: from recall)
_MTP_WHOLE = "eh_proj"


@lru_cache(maxsize=16)
def _mtp_tensors(m: ModelConfig) -> tuple[tuple[str, int, int, Any], ...]:
    """The MTP layers' tensors as ``(part, parameters, checkpoint bytes, tensor)`` (bytes 0 for a
    model that declares no quantization): :func:`mlacalc.models.tensors.part_of`'s parts,
    the projection of the embedding and hidden state its own (:data:`_MTP_WHOLE`)."""
    if not m.num_nextn_predict_layers:
        return ()
    main = len(tensors(m))
    scheme = m.quantization
    out = []
    for t in tensors(m, include_mtp=True)[main:]:
        nbytes = sum(tensor_bytes(t, scheme)) if scheme is not None else 0
        part = _MTP_WHOLE if f".{_MTP_WHOLE}." in t.name else part_of(t.name)
        out.append((part, t.numel, nbytes, t))
    return tuple(out)


def attention_norm_params(m: ModelConfig, lay: Layout, include_mtp: bool = False) -> Fraction:
    """Parameters of the norms inside attention one GPU of the fullest stage holds (kept at
    16 bits under a narrower format: :func:`_attention_norms`)."""
    return _attention_norms(m, lay.tp, _fullest_stage(m, lay, include_mtp)[1])


@lru_cache(maxsize=16)
def _mtp_kept(m: ModelConfig) -> tuple[bool, ...]:
    """Whether each of :func:`_mtp_tensors` keeps 16 bits under a narrower weight dtype: a
    norm (the MTP layer's ``enorm`` / ``hnorm``, its decoder layer's, attention's) or its
    router (:data:`KEPT_PARTS`)."""
    if not m.num_nextn_predict_layers:
        return ()
    main = len(tensors(m))
    return tuple(keeps_16_bits(t.name) for t in tensors(m, include_mtp=True)[main:])


def _mtp_shares(m: ModelConfig, lay: Layout) -> list[tuple[int, int, Fraction]]:
    """Each MTP tensor's ``(parameters, checkpoint bytes, share one GPU holds)``: the MTP
    layer is a decoder layer and splits as one (its attention by its kind's share, its routed
    experts over the MoE group with the redundant slots, its router, norms and ``eh_proj``
    whole, the rest over TP). It had been split over TP alone: DeepSeek-V3 with EP8 held every
    one of its 256 experts on each GPU (10.8 GiB where 1.6 GiB is its share)."""
    kind = layer_pattern_of(m)[-1]
    slots = Fraction(m.n_routed_experts + lay.redundant_experts, m.n_routed_experts or 1)
    one = Fraction(1)
    share = {
        "moe_routed_experts": slots / lay.moe_group if m.is_moe else one,
        "moe_router": one,
        "norms": one,
        _MTP_WHOLE: one,
    }
    return [
        (
            n,
            nb,
            _attention_tensor_share(m, kind, lay.tp, t)
            if part == "attention"
            else share.get(part, Fraction(1, lay.tp)),
        )
        for part, n, nb, t in _mtp_tensors(m)
    ]


def _attention_tensor_share(m: ModelConfig, kind: Any, tp: int, t: Any) -> Fraction:
    """The share of one attention tensor ``t`` of a ``kind`` layer a tensor-parallel rank
    holds, the one rule of :func:`_attention_norms` and the MTP layers (:func:`_mtp_shares`),
    each tensor as its layer's parameters split (:func:`_attention_share`): a compressed
    layer's query-head tensors over ``tp`` and the rest whole (its norms and indexer:
    :func:`compressed_attention_split`), a linear-attention layer over ``tp``; MLA's latent
    down-projections, their norms and a DSA indexer whole; a norm of one head's width whole,
    K/V tensors by whole K/V heads, the rest over ``tp`` (:func:`_tensor_split`); a model
    counted by formulas at its layer's share. The norms had had a rule of their own, which
    put DeepSeek-V4's latent norms at the layer's blended share (its indexer's whole) and
    Kimi-Linear's delta-net output norm whole where its layer splits over ``tp``."""
    if tp == 1:
        return Fraction(1)
    if kind.attention in COMPRESSED_KINDS:
        return Fraction(1, tp) if compressed_splits_by_heads(t.name) else Fraction(1)
    if kind.attention in STATE_KINDS:
        return _attention_share(m, kind, tp)
    if m.is_mla:
        whole = ".indexer." in t.name or any(f"self_attn.{w}." in t.name for w in _MLA_WHOLE)
        return Fraction(1) if whole else Fraction(1, tp)
    if arch_of(m) is None:
        return _attention_share(m, kind, tp)
    sub = kind_model(m, kind)
    widths = {sub.head_dim, sub.global_head_dim, sub.v_head_dim} - {None}
    if t.name.endswith("norm.weight") and t.shape[0] in widths:
        return Fraction(1)
    if any(k in t.name for k in _KV_TENSORS) and ".indexer." not in t.name:
        return Fraction(kv_head_share(sub.num_key_value_heads, tp))
    return Fraction(1, tp)


#: weight_breakdown part -> the param_counts parts (and "mtp") whose checkpoint bytes it holds
_CHECKPOINT_PARTS = {
    "attention": ("attention",),
    "norms": ("norms",),
    "dense_ffn": ("dense_ffn",),
    "shared_experts": ("moe_shared_experts",),
    "router": ("moe_router",),
    "routed_experts": ("moe_routed_experts",),
    "embedding_head": ("embedding", "position_embedding", "lm_head"),
    "mtp": ("mtp",),
    "hyper_connections": ("hyper_connections",),
}


@lru_cache(maxsize=16)
def _checkpoint_ratios(m: ModelConfig) -> dict[str, Fraction] | None:
    """Checkpoint bytes per parameter of each weight_breakdown part (scales included), or
    None for a model that declares no quantization."""
    by_part = checkpoint_part_bytes(m)
    if by_part is None:
        return None
    out = {}
    for part, sources in _CHECKPOINT_PARTS.items():
        params = sum(by_part.get(s, (0, 0))[0] for s in sources)
        nbytes = sum(by_part.get(s, (0, 0))[1] for s in sources)
        out[part] = Fraction(nbytes, params) if params else Fraction(2)
    return out


def _bytes_by_part(
    m: ModelConfig, lay: Layout, weight_dtype: str | None, include_mtp: bool
) -> dict[str, Fraction]:
    """Exact bytes of weights on the fullest GPU by part (see :func:`weight_bytes_by_part`),
    each part's parameters first rounded up to whole weights."""
    exact, layers, last = _fullest_stage(m, lay, include_mtp)
    parts = {k: math.ceil(v) for k, v in exact.items()}
    ratios = _checkpoint_ratios(m) if weight_dtype is None else None
    if ratios is None:
        bits = dtype_bits(weight_dtype or m.weights_dtype)
        out = {k: Fraction(v * bits, 8) for k, v in parts.items()}
        for part in KEPT_PARTS:  # norms and routers keep 16 bits under a narrower dtype
            out[part] = Fraction(parts[part] * max(bits, NORM_BITS), 8)
        if bits < NORM_BITS:  # and so do the norms inside attention (counted in its part)
            out["attention"] += _attention_norms(m, lay.tp, layers) * (NORM_BITS - bits) / 8
            if include_mtp and last:  # and the MTP layers' norms and router
                kept = zip(_mtp_shares(m, lay), _mtp_kept(m))
                held = sum((n * f for (n, _, f), k in kept if k), Fraction(0))
                out["mtp"] += held * (NORM_BITS - bits) / 8
        return out
    out = {k: v * ratios[k] for k, v in parts.items()}
    # tensor by tensor where one part holds tensors in different formats that split apart:
    # an NVFP4 export keeping DeepSeek's q_a / kv_a projections (whole on every TP rank) in
    # bf16 while its o_proj (split) is 4.5 bits a weight; the MTP layers, split as a layer
    if lay.tp > 1:
        out["attention"] = _attention_bytes(m, lay.tp, layers)
    if include_mtp and last:
        out["mtp"] = sum((nb * Fraction(f) for _, nb, f in _mtp_shares(m, lay)), Fraction(0))
    return out


@lru_cache(maxsize=64)
def _attention_norms(m: ModelConfig, tp: int, layers: range) -> Fraction:
    """Parameters of the norms inside attention (MLA's ``q_a_layernorm`` / ``kv_a_layernorm``,
    a DSA indexer's key norm, Qwen3's and Gemma's query/key norms) a tensor-parallel rank
    holds over ``layers``, each at :func:`_attention_tensor_share`."""
    kinds = layer_pattern_of(m)
    total = Fraction(0)
    for t in tensors(m):
        if part_of(t.name) != "attention" or ".layers." not in t.name:
            continue
        if not keeps_16_bits(t.name):
            continue
        i = int(t.name.split(".layers.", 1)[1].split(".", 1)[0])
        if i in layers:
            total += t.numel * _attention_tensor_share(m, kinds[i], tp, t)
    return total


@lru_cache(maxsize=16)
def _attention_tensors(m: ModelConfig) -> tuple[tuple[tuple[Any, int], ...], ...]:
    """Each decoder layer's attention tensors as ``(tensor, checkpoint bytes)``, for a model
    that declares its quantization."""
    out: list[list[tuple[Any, int]]] = [[] for _ in range(m.num_hidden_layers)]
    for t in checkpoint_tensors(m):
        if part_of(t.name) != "attention" or ".layers." not in t.name:
            continue
        i = int(t.name.split(".layers.", 1)[1].split(".", 1)[0])
        out[i].append((t, sum(tensor_bytes(t, m.quantization))))
    return tuple(tuple(layer) for layer in out)


@lru_cache(maxsize=256)
def _attention_bytes(m: ModelConfig, tp: int, layers: range) -> Fraction:
    """Checkpoint bytes of the attention one tensor-parallel rank holds over ``layers``, each
    tensor at its own format and its share (:func:`_attention_tensor_share`: MLA's latent
    down-projections whole, a compressed layer's query-head tensors split and the rest whole,
    ...); a base-layout model's plain layer by its tensors' names, as
    :func:`_attention_per_rank` splits it: the K/V projections by whole K/V heads (replicated
    beyond ``n_kv`` ranks), the rest over ``tp`` (the fused-QKV layouts are refused a
    checkpoint format). DeepSeek-V4's compressed layers had taken their layer's share of
    parameters in bytes, their whole fp8 and bf16 tensors alike with the split ones:
    TP8 4,246,756,104 B where they hold 4,259,010,464."""
    kinds = layer_pattern_of(m)
    per_layer = _attention_tensors(m)
    base = arch_of(m) is None and not m.is_mla
    total = Fraction(0)
    for i in layers:
        kind = kinds[i]
        if base and kind.attention not in STATE_KINDS and kind.attention not in COMPRESSED_KINDS:
            kv_share = kv_head_share(kind_model(m, kind).num_key_value_heads, tp)
            for t, nb in per_layer[i]:
                kv = ".k_proj." in t.name or ".v_proj." in t.name
                total += nb * kv_share if kv else Fraction(nb, tp)
            continue
        total += sum((nb * _attention_tensor_share(m, kind, tp, t) for t, nb in per_layer[i]), 0)
    return total


#: Bits of a norm's weights under a narrower weight dtype: the engines quantize the linear
#: layers' weights only and build the norms in the model's dtype, bf16 (from recall of their
#: sources: vLLM's and SGLang's ``RMSNorm`` is a plain parameter in the model's dtype, their
#: fp8/int8/fp4 methods take linear and MoE layers only; TensorRT-LLM's ``RMSNorm`` module
#: takes the model's ``torch_dtype``); quantized checkpoints keep them bf16 too
#: (:data:`mlacalc.cost.quant._NEVER`, DeepSeek-V3's fp8 and ModelOpt's NVFP4 exports).
#: A MoE router likewise: vLLM builds DeepSeek's, Qwen-MoE's, Mixtral's and Llama 4's gate as
#: a ``ReplicatedLinear`` with ``quant_config=None``, SGLang's ``MoEGate`` is a plain
#: parameter (both from recall), and quantized checkpoints keep it bf16 (``_NEVER``).
#: One rule with ``mlacalc report``'s weights: :func:`mlacalc.cost.params.keeps_16_bits`.
NORM_BITS = KEPT_BITS

#: weight_breakdown's parts kept at :data:`NORM_BITS` under a narrower weight dtype
KEPT_PARTS = ("norms", "router")


def weight_bytes_by_part(
    m: ModelConfig, lay: Layout, weight_dtype: str | None, include_mtp: bool = False
) -> dict[str, int]:
    """Bytes of weights on the fullest GPU, by part of :func:`weight_breakdown`.

    ``weight_dtype`` None means the checkpoint's own format: a model that declares its
    ``quantization_config`` holds each part's exact checkpoint bytes (scales and bf16-kept
    tensors included) in proportion to the parameters the GPU holds of that part, which is
    how its tensors split (whole experts under EP, rows or columns under TP), and its
    attention and MTP layers tensor by tensor, each at its own format; a model without one,
    its ``weights_dtype``. A dtype sizes every parameter in it but the norms and the MoE
    routers (:data:`KEPT_PARTS`), which keep 16 bits (:data:`NORM_BITS`) under a narrower
    one. Each part is whole weights on the GPU
    (its parameters rounded up once), in whole bytes."""
    return {k: math.ceil(v) for k, v in _bytes_by_part(m, lay, weight_dtype, include_mtp).items()}


def weights_per_gpu(
    m: ModelConfig, lay: Layout, weight_dtype: str | None, include_mtp: bool = False
) -> int:
    """Bytes of weights on the fullest GPU (``weight_dtype`` None: the checkpoint's own
    format, see :func:`weight_bytes_by_part`): the sum of its parts."""
    return sum(weight_bytes_by_part(m, lay, weight_dtype, include_mtp).values())


def weight_format(m: ModelConfig, weight_dtype: str | None) -> str:
    """How weights are sized, for reports: the checkpoint's scheme (``checkpoint fp8 block
    128x128``) when ``weight_dtype`` is None and the model declares one, else the dtype."""
    if weight_dtype is None and m.quantization is not None:
        return f"checkpoint {m.quantization.describe()}"
    return weight_dtype or m.weights_dtype


def kv_bytes_per_token_per_gpu(
    m: ModelConfig, layout: KVLayout, lay: Layout, include_mtp: bool = False
) -> int:
    """Cache bytes one token adds on a GPU of the fullest stage (the stage whose layers keep
    the most per token): MLA's latent whole on every tensor-parallel rank, ``ceil(n_kv / tp)``
    K/V heads of GQA/MQA/MHA per rank."""
    if m.compress_ratios:  # DeepSeek-V4: a pooled key per ratio tokens, averaged over the
        # ratios' period far past the window (the window and the compressors' state bounded)
        period = math.lcm(*(r for r in m.compress_ratios if r)) or 1
        far = period << 32
        grown = (
            kv_bytes_per_sequence_per_gpu(m, layout, lay, s, 1, include_mtp)
            for s in (far, far + period)
        )
        return -(next(grown) - next(grown)) // period
    if m.index_head_dim is not None or m.sparse_index_dim is not None:
        # DSA and MiniMax-M3's block-sparse layers keep an indexer key a token beside their
        # K/V or latent row (none in a layer sharing another's indexer): the growth of one
        # token, every layer's own, as the sequence's bytes count it
        grown = (kv_bytes_per_sequence_per_gpu(m, layout, lay, s, 1, include_mtp) for s in (1, 2))
        return -(next(grown) - next(grown))
    row = kv_cache(m, 1, 1, layout, None, include_mtp).row_bytes
    stages = stage_layers(m, lay.pp)
    mtp = m.num_nextn_predict_layers if include_mtp else 0
    layers = len(stages[0]) + mtp
    if m.global_head_dim is not None or m.sliding_key_value_heads is not None:  # own heads
        kinds = layer_pattern_of(m)
        return max(
            sum(_gemma4_row_per_gpu(m, layout, lay, kinds[i]) for i in stage) for stage in stages
        )
    if m.linear_num_value_heads is not None or m.mamba_num_heads is not None:  # a fixed state
        # the fullest stage counts: with a deep pipeline the first may hold linear layers only
        kinds = layer_pattern_of(m)
        layers = max(
            sum(kinds[i].attention not in _NO_ROWS for i in stage) + (mtp if j == 0 else 0)
            for j, stage in enumerate(stages)
        )
    if m.is_mla:
        return row * layers
    return row * layers * math.ceil(m.num_key_value_heads / lay.tp) // m.num_key_value_heads


#: Columns fewer than the convolution's kernel that a served linear-attention or Mamba layer
#: keeps per sequence: the engines' causal-conv1d state holds the last ``kernel - 1`` inputs
#: (the new one arrives with the step), where the Hugging Face cache (mlacalc.cost's sizes,
#: kept to it) holds ``kernel`` columns. From recall, not a shared reference: vLLM's
#: ``mamba_utils`` state shapes (``conv_kernel - 1``), SGLang's mamba/GDN cache parameters and
#: TensorRT-LLM's mamba cache manager alike. Qwen3.5-122B-A10B: 3 columns of its 4-tap window.
SERVED_CONV_SHORTER = 1

#: kinds of layer that keep no per-token rows (a fixed state, or no sequence mixer)
_NO_ROWS = (*STATE_KINDS, "none")


def layer_pattern_of(m: ModelConfig) -> tuple:
    """The model's layer kinds, in order."""
    return layer_pattern(m).layers


def _gemma4_row_per_gpu(m: ModelConfig, layout: KVLayout, lay: Layout, kind) -> int:
    """One token's cache row of a Gemma 4 layer on one rank: ``ceil(n_kv / tp)`` of its K/V
    heads, a full layer's heads and width its own (``global_head_dim``,
    ``num_global_key_value_heads``); a MiMo-V2-Flash layer's K of ``head_dim`` and V of
    ``v_head_dim``, a sliding layer's ``sliding_key_value_heads``."""
    sub = kind_model(m, kind)
    heads = sub.num_key_value_heads
    width = sub.head_dim + (sub.v_head_dim or sub.head_dim)  # K and V
    return layout.row_bytes(int(heads * kv_head_share(heads, lay.tp)) * width)


def kv_bytes_per_sequence_per_gpu(
    m: ModelConfig,
    layout: KVLayout,
    lay: Layout,
    context: int,
    page_size: int = 1,
    include_mtp: bool = False,
) -> int:
    """Cache bytes one sequence of ``context`` tokens holds on a GPU of the fullest stage.

    Every layer keeps what its kind keeps, in whole pages of ``page_size`` tokens: a full
    layer the context, a sliding or chunked layer at most its window, a DSA layer the latent
    plus its indexer key per token, a linear-attention layer its fixed state (no pages).
    MTP layers are full layers of the first stage. MLA's latent is whole on every
    tensor-parallel rank; GQA/MQA/MHA keep ``ceil(n_kv / tp)`` of their ``n_kv`` K/V heads
    (a linear layer's state splits by its heads: ``ceil(h / tp)`` of its key and value
    heads, their convolution channels (``kernel - 1`` columns, as the engines keep them:
    :data:`SERVED_CONV_SHORTER`) and recurrent states, on every rank; a Mamba-2 layer's
    ``ceil(H / tp)`` heads and ``ceil(G / tp)`` groups of B and C, a group replicated where
    the ranks outnumber the groups).

    Remembered for the last :data:`_KV_BYTES_KEPT` arguments, the model by identity (a
    search's disaggregated pairings ask for the same few hundred layouts thousands of times:
    DeepSeek-V3 on 8-64 H200, 4,934 calls, 258 distinct, 0.32 of a 7.1 s search)."""
    args = (layout, lay, context, page_size, include_mtp)
    try:
        hash(args)
    except TypeError:  # an argument that is no key (an array of contexts): computed
        return _kv_bytes_per_sequence_per_gpu(m, *args)
    return _remembered(
        _KV_BYTES, _KV_BYTES_KEPT, m, args, lambda: _kv_bytes_per_sequence_per_gpu(m, *args)
    )


#: :func:`kv_bytes_per_sequence_per_gpu`'s memory: its arguments, the model by identity ->
#: (model, bytes); the model kept so that its id is not reused while the entry lives
_KV_BYTES: dict[tuple, tuple] = {}
_KV_BYTES_KEPT = 4096


def _kv_bytes_per_sequence_per_gpu(
    m: ModelConfig,
    layout: KVLayout,
    lay: Layout,
    context: int,
    page_size: int,
    include_mtp: bool,
) -> int:
    """:func:`kv_bytes_per_sequence_per_gpu`, computed."""
    row = kv_cache(m, 1, 1, layout, None, include_mtp).row_bytes
    dsa_row = row + (indexer_row_bytes(m) if m.index_topk else 0)
    kinds = layer_pattern(m).layers
    state = None

    def paged(tokens: int) -> int:
        return -(-tokens // page_size) * page_size

    def layer_bytes(kind) -> int:
        nonlocal state
        if kind.label == "linear":
            if state is None:
                held = state_layout(layout)
                state = linear_state_bytes(m, held.row_bytes(1), held.state_bytes)
            return state
        return paged(kind.tokens_kept(context)) * (dsa_row if kind.label == "dsa" else row)

    stages = stage_layers(m, lay.pp)
    if m.compress_ratios:  # DeepSeek-V4: one K = V head, whole on every rank (its window, the
        # pooled keys and indexer keys, the compressors' state: mlacalc.cost.compressed)
        held = {k: compressed_layer_bytes(m, k, paged(context), layout) for k in set(kinds)}
        return max(sum(held[kinds[i]] for i in stage) for stage in stages)
    if m.global_head_dim is not None or m.sliding_key_value_heads is not None:  # own heads
        return max(
            sum(
                paged(kinds[i].tokens_kept(context)) * _gemma4_row_per_gpu(m, layout, lay, kinds[i])
                for i in stage
            )
            for stage in stages
        )
    per_stage = [
        sum(layer_bytes(kinds[i]) for i in stage if kinds[i].attention not in _NO_ROWS)
        for stage in stages
    ]
    if include_mtp and m.num_nextn_predict_layers:
        per_stage[0] += m.num_nextn_predict_layers * paged(context) * dsa_row
    if not m.is_mla:
        share = kv_head_share(m.num_key_value_heads, lay.tp)
        per_stage = [math.floor(b * share) for b in per_stage]
    if m.sparse_block_size is not None:  # MiniMax-M3: each block-sparse layer's indexer key,
        # whole on every rank (one key for all the indexer's heads)
        key = paged(context) * block_indexer_row_bytes(m, layout)
        for j, stage in enumerate(stages):
            per_stage[j] += key * sum(kinds[i].attention == "msa" for i in stage)
    word = state_layout(layout).state_bytes  # a recurrent state element's bytes
    if m.linear_num_value_heads is not None:  # the state of the rank's linear heads
        hk = math.ceil(m.linear_num_key_heads / lay.tp)
        hv = math.ceil(m.linear_num_value_heads / lay.tp)
        dk, dv = m.linear_key_head_dim, m.linear_value_head_dim
        conv = (2 * hk * dk + hv * dv) * (m.linear_conv_kernel_dim - SERVED_CONV_SHORTER)
        state = state_layout(layout).row_bytes(conv) + hv * dk * dv * word
        for j, stage in enumerate(stages):
            per_stage[j] += state * sum(kinds[i].label == "linear" for i in stage)
    if m.mamba_num_heads is not None:  # the state of the rank's Mamba-2 heads and groups
        heads = math.ceil(m.mamba_num_heads / lay.tp)
        groups = math.ceil(m.mamba_n_groups / lay.tp)
        conv = (heads * m.mamba_head_dim + 2 * groups * m.ssm_state_size) * (
            m.mamba_d_conv - SERVED_CONV_SHORTER
        )
        state = (
            state_layout(layout).row_bytes(conv)
            + heads * m.mamba_head_dim * m.ssm_state_size * word
        )
        for j, stage in enumerate(stages):
            per_stage[j] += state * sum(
                kinds[i].attention == "mamba" or kinds[i].mamba for i in stage
            )  # a Mamba-2 layer, or one beside the attention (Falcon-H1)
    if m.mamba_dt_rank is not None:  # the state of the rank's Mamba-1 channels (Jamba)
        inner = math.ceil(m.mamba_inner_size / lay.tp)
        window = inner * (m.mamba_d_conv - SERVED_CONV_SHORTER)
        state = state_layout(layout).row_bytes(window) + inner * m.ssm_state_size * word
        for j, stage in enumerate(stages):
            per_stage[j] += state * sum(kinds[i].attention == "mamba1" for i in stage)
    return max(per_stage)
