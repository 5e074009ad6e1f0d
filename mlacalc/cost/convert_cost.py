"""What a conversion to MLA changes: parameters, cache and FLOPs of the source and the result.

A :class:`~mlacalc.models.convert.Conversion` holds the converted model in DeepSeek's MLA form,
which the engine counts like any MLA model. A joint SVD is exactly that form. A split SVD is a
key latent and a value latent of ``d_c / 2`` each, whose up-projection is block-diagonal: the
layer as converted multiplies only the non-zero blocks, so its own counts are smaller:

- projection parameters: ``r_k n_h d_v + r_v n_h d_nope`` fewer (the zero blocks);
- expanded implementations (``naive``, ``compressed``): the up-projection ``kv_b_proj`` costs
  ``2 rows n_h (r_k d_nope + r_v d_v)`` instead of ``2 rows n_h d_c (d_nope + d_v)``;
- ``absorbed``: the query absorbs ``W_UK`` into the key latent only (``r_k`` wide), the scores
  run over ``r_k + d_rope`` dimensions, the values over ``r_v`` and ``W_UV`` maps ``r_v`` back.

``conversion_cost`` gives both: the split layer's own figures and the served (dense) figures
every other view reports. The projection parameters here are the matmul weights (no norm): the
served layer also has the latent norm's ``d_c`` weights, counted by
:func:`mlacalc.attention_params`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mlacalc.cost.engine import attention_cost, attention_params, kv_cache
from mlacalc.cost.params import param_counts
from mlacalc.models.convert import BEFORE_FINE_TUNING, Conversion, split_ranks
from mlacalc.words import arguments as args
from mlacalc.words.errors import InvalidArgumentError

__all__ = [
    "CONVERTED_IMPLS",
    "ConversionCost",
    "conversion_cost",
    "flops_by_phase",
    "reading_notes",
]

#: MLA implementations whose split-SVD counts are built (the merged absorption needs a
#: compressed query, which neither conversion has by default)
CONVERTED_IMPLS = ("naive", "compressed", "absorbed")

_NORMS = ("kv_a_layernorm", "q_a_layernorm")


@dataclass(frozen=True)
class ConversionCost:
    """Source and converted counts of one conversion for one step.

    Per layer: ``*_projection_params`` (attention matmul weights), ``*_cache_elements`` (per
    token). Whole model: ``*_params`` and ``*_cache_bytes_per_token`` (at ``kv_dtype``);
    ``published_cache_bytes_per_token``: MHA2MLA as published, every KV head's RoPE part cached
    (``None`` where that is the counted form: TransMLA, an MQA source).
    ``stage_flops`` are the converted attention blocks of all layers by stage for the step
    (split SVD: the split layer's own; ``served_stage_flops`` the dense form's);
    ``source_stage_flops`` the source model's for the same step.
    """

    conversion: Conversion
    phase: str
    seq_len: int
    batch: int
    impl: str
    source_projection_params: int
    projection_params: int
    served_projection_params: int
    source_cache_elements: int
    cache_elements: int
    source_params: int
    params: int
    served_params: int
    source_cache_bytes_per_token: int
    cache_bytes_per_token: int
    published_cache_bytes_per_token: int | None
    source_stage_flops: dict[str, int]
    stage_flops: dict[str, int]
    served_stage_flops: dict[str, int]

    @property
    def flops(self) -> int:
        return sum(self.stage_flops.values())

    @property
    def source_flops(self) -> int:
        return sum(self.source_stage_flops.values())

    def to_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items() if k != "conversion"}
        return {"conversion": self.conversion.to_dict(), **out, "flops": self.flops}


def _zero_blocks(c: Conversion) -> int:
    """Weights of a split SVD's block-diagonal up-projection that are zero in the dense form."""
    if c.key_rank is None:
        return 0
    m = c.model
    return m.num_attention_heads * (c.key_rank * m.v_head_dim + c.value_rank * m.qk_nope_head_dim)


def _projections(model: Any) -> int:
    return sum(v for k, v in attention_params(model).items() if k not in _NORMS)


def _split_flops(c: Conversion, cost: Any) -> dict[str, int]:
    """The split layer's stage FLOPs from the dense form's ops (exact integer rescaling)."""
    m = c.model
    d_c, r_k, r_v = c.kv_lora_rank, c.key_rank, c.value_rank
    d_nope, d_v, d_r = m.qk_nope_head_dim, m.v_head_dim, m.qk_rope_head_dim
    out: dict[str, int] = dict.fromkeys(cost.stage_flops, 0)
    absorbed = cost.impl == "absorbed"
    for op in cost.ops:
        if op.kind != "matmul":
            continue
        f = op.flops
        if op.name == "kv_b_proj":
            f = f * (r_k * d_nope + r_v * d_v) // (d_c * (d_nope + d_v))
        elif op.name == "q_absorb":
            f = f * r_k // d_c
        elif op.name == "o_absorb" or (absorbed and op.name == "pv"):
            f = f * r_v // d_c
        elif absorbed and op.name == "scores":
            f = f * (r_k + d_r) // (d_c + d_r)
        out[op.stage] = out.get(op.stage, 0) + f * cost.layers
    return out


def _published_bytes(c: Conversion, kv_dtype: str, impl: str) -> int | None:
    """A token's cache, all layers, of MHA2MLA as published: the latent and each KV head's
    RoPE part, ``d_c + n_kv rope`` elements a layer, laid out as the latent is."""
    published = c.published_cache_elements
    if published is None:
        return None
    wider = c.model.with_changes(kv_lora_rank=published - c.rope_dim)
    return kv_cache(wider, 1, kv_dtype=kv_dtype, impl=impl).bytes_per_token


def conversion_cost(
    conversion: Conversion,
    phase: str = "decode",
    seq_len: int = 4096,
    batch: int = 1,
    impl: str = "absorbed",
    kv_dtype: str = "bf16",
    causal: bool = False,
) -> ConversionCost:
    """Parameters, cache and attention FLOPs of a conversion's source and result for one step.

    Examples
    --------
    >>> from mlacalc.models.convert import convert
    >>> cc = conversion_cost(convert("llama-2-7b", kv_lora_rank=512, svd="split"))
    >>> cc.served_projection_params - cc.projection_params   # zero blocks: 32 x 256 x (128 + 128)
    2097152
    """
    if not isinstance(conversion, Conversion):
        raise InvalidArgumentError(
            "conversion",
            f"expected a Conversion (from convert()), got {args.show_value(conversion)}",
        )
    args.choice("impl", impl, CONVERTED_IMPLS)
    c, m, src = conversion, conversion.model, conversion.source
    cost = attention_cost(m, phase, seq_len, batch, impl=impl, causal=causal, kv_dtype=kv_dtype)
    source = attention_cost(src, phase, seq_len, batch, causal=causal, kv_dtype=kv_dtype)
    zeros = _zero_blocks(c)
    served_total = param_counts(m).total
    served_stage = {k: v for k, v in cost.stage_flops.items()}
    split = _split_flops(c, cost) if c.key_rank is not None else served_stage
    return ConversionCost(
        conversion=c,
        phase=cost.phase,
        seq_len=cost.seq_len,
        batch=cost.batch,
        impl=impl,
        source_projection_params=_projections(src),
        projection_params=_projections(m) - zeros,
        served_projection_params=_projections(m),
        source_cache_elements=c.source_cache_elements,
        cache_elements=c.cache_elements,
        source_params=param_counts(src).total,
        params=served_total - zeros * m.num_hidden_layers,
        served_params=served_total,
        source_cache_bytes_per_token=kv_cache(src, 1, kv_dtype=kv_dtype).bytes_per_token,
        cache_bytes_per_token=kv_cache(m, 1, kv_dtype=kv_dtype, impl=impl).bytes_per_token,
        published_cache_bytes_per_token=_published_bytes(c, kv_dtype, impl),
        source_stage_flops=dict(source.stage_flops),
        stage_flops=split,
        served_stage_flops=served_stage,
    )


def flops_by_phase(
    c: Conversion, seq_len: int, batch: int = 1, kv_dtype: str = "bf16"
) -> list[dict[str, Any]]:
    """Attention FLOPs of all layers for a prefill of ``seq_len`` tokens (causal) and a decode
    step at ``seq_len`` keys: the source's, and the converted model's in each implementation."""
    rows = []
    for phase in ("prefill", "decode"):
        causal = phase == "prefill"
        row = {"phase": phase}
        for impl in CONVERTED_IMPLS:
            cc = conversion_cost(
                c, phase, seq_len, batch, impl=impl, kv_dtype=kv_dtype, causal=causal
            )
            row["source"] = cc.source_flops
            row[impl] = cc.flops
        rows.append(row)
    return rows


def _below(a: int, b: int, n_kv: int) -> str:
    """The TP degrees at which a cache of ``b`` B a token kept whole on every GPU is smaller
    than the source's ``a`` B split over its ``n_kv`` heads."""
    if b * n_kv < a:
        return "at any TP degree"
    if b < a:
        return f"only below TP {a / b:.3g}"
    return "at no TP degree (" + ("equal" if a == b else "larger") + " at TP 1)"


def _below_split(a: int, latent: int, heads: int, n_kv: int) -> str:
    """The TP degrees at which a cache of a ``latent`` part kept whole on every GPU and a
    per-head part of ``heads`` B a token split with its ``n_kv`` heads (MHA2MLA as published:
    each KV head's RoPE part) is smaller than the source's ``a`` B split over its heads: on
    ``t' = min(t, n_kv)`` GPUs, ``latent + heads / t' < a / t'``, so ``t' < (a - heads) /
    latent``."""
    top = (a - heads) / latent
    if top > n_kv:
        return "at any TP degree"
    if top > 1:
        return f"only below TP {top:.3g}"
    return "at no TP degree (" + ("equal" if top == 1 else "larger") + " at TP 1)"


def reading_notes(cc: ConversionCost) -> list[str]:
    """What the side-by-side figures are and are not: before fine-tuning, what the conversion
    drops, the cache ratio under tensor parallelism, and (split SVD) whose counts they are."""
    c = cc.conversion
    n_kv, d_h = c.source.num_key_value_heads, c.source.head_dim
    rotated = n_kv * d_h
    notes = [BEFORE_FINE_TUNING]
    held, how = c.kv_lora_rank, ""
    if c.svd == "split":  # each half holds at most its own projection's rank
        keys, values = split_ranks(c.source, c.method, c.rope_dim)
        held = min(c.key_rank, keys) + min(c.value_rank, values)
        if held < min(c.kv_lora_rank, c.full_rank):
            how = (
                f"split: the key latent keeps {min(c.key_rank, keys):,} of {keys:,}, the value "
                f"latent {min(c.value_rank, values):,} of {values:,}; "
            )
    kept = (
        f"the latent keeps {held:,} of the {c.full_rank:,} dimensions of the "
        f"position-free keys and values ({how}the smallest singular directions are dropped)"
        if held < c.full_rank
        else f"the latent keeps all {c.full_rank:,} dimensions of the position-free keys and values"
    )
    rope = c.rope_dim
    if c.method == "transmla":
        rotation = (
            f"the keys' rotation is concentrated into one shared {rope}-wide RoPE key; the other "
            f"{rotated - rope:,} of the source's {rotated:,} rotated key dimensions ({n_kv} heads "
            f"x {d_h}) lose their rotation and enter the latent with the {rotated:,} value "
            "dimensions"
        )
    elif n_kv > 1:
        rotation = (
            f"partial RoPE keeps {rope} of each key head's {d_h} dimensions rotated "
            f"({n_kv} x {rope} = {n_kv * rope:,}) and the other {n_kv * (d_h - rope):,} enter "
            f"the latent; the shared-RoPE form counted here keeps one {rope}-wide rotated key "
            f"and drops the other {(n_kv - 1) * rope:,} rotated dimensions"
        )
    else:
        rotation = (
            f"partial RoPE keeps {rope} of the key head's {d_h} dimensions rotated and the "
            f"other {d_h - rope} enter the latent"
        )
    lost = held < c.full_rank or (c.method == "mha2mla" and n_kv > 1)
    head = "dropped" if lost else "nothing dropped"
    if not lost and c.method == "transmla" and rotated > rope:
        # the latent holds the position-free computation whole; the rotation it takes off the
        # keys is gone, so with RoPE the scores differ from the source's
        head = (
            "exact without positions, not with RoPE (the rotation of the key dimensions moved "
            "into the latent is lost)"
        )
    notes.append(f"{head}: {kept}; {rotation}")
    a, b = cc.source_cache_bytes_per_token, cc.cache_bytes_per_token
    form = "" if cc.published_cache_bytes_per_token is None else " of the shared-RoPE form"
    published = ""
    if cc.published_cache_bytes_per_token is not None:
        p = cc.published_cache_bytes_per_token
        rope_part = (p - b) // (n_kv - 1)  # one KV head's RoPE part, all layers
        latent, heads = b - rope_part, n_kv * rope_part
        published = (
            f"; MHA2MLA as published ({p:,} B a token: the latent's {latent:,} B kept whole on "
            f"every GPU, each KV head's RoPE part, {heads:,} B in all, split with its head) is "
            f"smaller per GPU {_below_split(a, latent, heads, n_kv)}"
        )
    notes.append(
        f"the cache ratio{form} is per token on one GPU: under tensor parallelism over t GPUs "
        f"the source's {n_kv} KV heads split (its {a:,} B a token over min(t, {n_kv}) GPUs) "
        f"while the latent ({b:,} B) is kept whole on every GPU, so the converted cache is "
        f"smaller per GPU {_below(a, b, n_kv)}{published}; `mlacalc plan` counts a deployment "
        "(convert --save, then plan the file)"
    )
    if c.svd == "split":
        notes.append(
            "split SVD: parameters counted in the served dense form, the up-projection's zero "
            "blocks included, as `report` counts the --save'd model; the split layer's own: "
            f"{cc.params:,} parameters, {cc.projection_params:,} attention matmul weights a "
            "layer, and the FLOPs shown"
        )
    return notes
