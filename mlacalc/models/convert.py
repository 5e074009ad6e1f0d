"""A GQA, MQA or MHA model converted to multi-head latent attention (TransMLA, MHA2MLA).

Two published post-training conversions turn an existing model's attention into MLA before
any fine-tuning:

- **TransMLA** (Meng et al., "TransMLA: Multi-Head Latent Attention Is All You Need",
  arXiv:2502.07864): the ``n_kv`` key heads of a GQA layer are replicated to the ``n_h`` query
  heads (on the parameter side: ``W_K' = W_K R``), so each query head has a key of its own;
  the keys' rotation is concentrated into one shared RoPE key of ``rope_dim`` dims, and the
  other ``n_kv d_h - rope_dim`` key dimensions with the ``n_kv d_h`` value dimensions factor
  into a down-projection to a latent and an up-projection back to the heads. From recall (the
  shared seeds give no head widths): the converted model has DeepSeek's layout with a
  position-free key part of the source's full head width ``d_h`` per query head
  (``qk_nope_head_dim = d_h``, ``qk_rope_head_dim = rope_dim``), so the latent's full rank is
  ``n_kv 2 d_h - rope_dim``, the same-cache rank: the same-cache conversion computes the
  source layer's output exactly without positions; with RoPE it is not exact, as the
  ``n_kv d_h - rope_dim`` key dimensions moved into the latent lose their rotation;
- **MHA2MLA** (Ji et al., "Towards Economical Inference: Enabling DeepSeek's Multi-Head Latent
  Attention in Any Transformer-based LLMs", arXiv:2502.14837): partial RoPE keeps the rotation
  on ``rope_dim`` dimensions of each head (four ways to choose them: the highest or lowest
  frequencies, a uniform sample, or the pairs with the largest 2-norm contribution) and makes
  the rest position-free; a truncated SVD of the position-free key and value projections,
  ``split`` (each apart, half the latent each) or ``joint`` (``[W_K,nope, W_V]`` together),
  gives the latent of rank ``d_c``.

What :func:`convert` returns is the converted model in the form mlacalc's MLA layer has
(DeepSeek's: a latent ``c_kv`` of ``kv_lora_rank`` dims and one RoPE key of ``qk_rope_head_dim``
dims shared by all heads, the latent RMS-normed), so every view (report, KV cache, FLOPs,
roofline, plan, search, app) takes it as it takes any MLA model. The rules:

- TransMLA: each head's query and key are ``d_h + rope_dim`` wide, ``d_h`` position-free
  (``qk_nope_head_dim``) and ``rope_dim`` rotated (``qk_rope_head_dim``, one key shared by the
  heads); MHA2MLA: each head's query and key keep their width ``d_h``, ``rope_dim`` of it
  rotated and ``d_h - rope_dim`` position-free; values keep ``d_h`` (``v_head_dim``); the query
  projection is kept whole (``keep_q_full``) or compressed to ``q_lora_rank``;
- the cache per token and layer goes from ``2 n_kv d_h`` elements to ``d_c + rope_dim``: the
  two are equal at the *equivalence rank* ``d_c = 2 n_kv d_h - rope_dim`` (TransMLA's claim of
  no larger cache); the position-free key and value projections have rank at most
  ``min(d, n_kv 2 d_h - rope_dim)`` for TransMLA and ``min(d, n_kv (2 d_h - rope_dim))`` for
  MHA2MLA (the *full rank*), so a latent wider than that holds nothing more; the default rank
  is the smaller of the two;
- ``svd="split"`` gives a key latent and a value latent of ``d_c / 2`` each: the up-projection
  is block-diagonal. Served by MLA kernels the two latents sit side by side in one ``c_kv`` and
  the up-projection's zero blocks are multiplied like any other weight, which is the served
  model's count; :mod:`mlacalc.cost.convert_cost` gives the split layer's own (smaller) counts;
- the partial-RoPE strategy decides *which* dimensions keep RoPE, not how many: it changes no
  count (it is kept in the record);
- MHA2MLA as published keeps the rotated dimensions of each key head (``n_kv rope_dim`` cached
  elements); the served form shares one RoPE key, as TransMLA's and DeepSeek's do (the record's
  notes give the published variant's larger cache).

Refused, by name: models already MLA, layers with a sliding window, chunks or linear attention
(a converted layer caches every token), models without RoPE (GPT-2's learned positions),
per-head key norms (Qwen3, MiniMax-M2: the key is not a linear map of the input, so it has no
low-rank factor), and models whose layers differ in head shape (Gemma 4). Encoder models never
load (no family of mlacalc is an encoder).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mlacalc.models.architecture import arch_of, layer_pattern
from mlacalc.models.loading import ModelConfig, model_argument
from mlacalc.models.schema import BOUNDS
from mlacalc.words import arguments as args
from mlacalc.words.errors import InvalidArgumentError

__all__ = [
    "BEFORE_FINE_TUNING",
    "CONVERSION_METHODS",
    "ROPE_STRATEGIES",
    "SVD_MODES",
    "Conversion",
    "conversion_refusal",
    "convert",
    "equivalence_rank",
    "split_ranks",
]

CONVERSION_METHODS = ("transmla", "mha2mla")
SVD_MODES = ("joint", "split")
#: MHA2MLA's four ways to choose the dimensions that keep RoPE (none changes a count)
ROPE_STRATEGIES = ("high", "low", "uniform", "2-norm")
#: the RoPE width both papers' DeepSeek-shaped targets use, capped at half a head
DEFAULT_ROPE_DIM = 64

#: fields of the source model the converted one changes
_CHANGED = (
    "num_key_value_heads",
    "head_dim",
    "kv_lora_rank",
    "qk_rope_head_dim",
    "qk_nope_head_dim",
    "v_head_dim",
    "q_lora_rank",
    "qkv_bias",
    "attention_bias",
)


@dataclass(frozen=True)
class Conversion:
    """A model converted to MLA, with what changed and why.

    ``model`` is the converted :class:`~mlacalc.models.schema.ModelConfig` (DeepSeek's MLA form:
    every view takes it); ``changes`` lists ``(field, before, after)`` for each field that
    changed; ``key_rank`` and ``value_rank`` are the two latents of a split SVD (``None`` for a
    joint one); ``notes`` say what the counts assume.
    """

    source: ModelConfig
    model: ModelConfig
    method: str
    svd: str
    rope_strategy: str | None
    kv_lora_rank: int
    rope_dim: int
    q_lora_rank: int | None
    key_rank: int | None
    value_rank: int | None
    equivalence_rank: int
    full_rank: int
    changes: tuple[tuple[str, Any, Any], ...]
    notes: tuple[str, ...]

    @property
    def source_cache_elements(self) -> int:
        """Cache elements per token and layer of the source (``2 n_kv d_h``: K and V)."""
        return 2 * self.source.num_key_value_heads * self.source.head_dim

    @property
    def cache_elements(self) -> int:
        """Cache elements per token and layer of the converted model (``d_c + rope_dim``)."""
        return self.kv_lora_rank + self.rope_dim

    @property
    def published_cache_elements(self) -> int | None:
        """Cache elements per token and layer of MHA2MLA as published (``d_c + n_kv rope_dim``:
        every KV head's rotated dimensions), where that differs from the counted form's one
        shared RoPE key; None otherwise."""
        return _published(self.method, self.kv_lora_rank, self.rope_dim, self.source)

    @property
    def published_equivalence_rank(self) -> int | None:
        """The rank at which MHA2MLA as published caches what the source does (``2 n_kv d_h -
        n_kv rope_dim``: 7,168 for Llama-2-7B at RoPE 32, where the shared-RoPE form's
        :attr:`equivalence_rank` is 8,160); None where there is one form."""
        if self.published_cache_elements is None:
            return None
        return self.source_cache_elements - self.source.num_key_value_heads * self.rope_dim

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source.name,
            "model": self.model.name,
            "method": self.method,
            "svd": self.svd,
            "rope_strategy": self.rope_strategy,
            "kv_lora_rank": self.kv_lora_rank,
            "rope_dim": self.rope_dim,
            "q_lora_rank": self.q_lora_rank,
            "key_rank": self.key_rank,
            "value_rank": self.value_rank,
            "equivalence_rank": self.equivalence_rank,
            "published_equivalence_rank": self.published_equivalence_rank,
            "full_rank": self.full_rank,
            "source_cache_elements_per_token_per_layer": self.source_cache_elements,
            "cache_elements_per_token_per_layer": self.cache_elements,
            "published_cache_elements_per_token_per_layer": self.published_cache_elements,
            "changes": [{"field": f, "before": b, "after": a} for f, b, a in self.changes],
            "notes": list(self.notes),
        }


def conversion_refusal(model: ModelConfig) -> str:
    """Why ``model`` cannot be converted to MLA ("" when it can)."""
    m = model
    if m.is_mla:
        return f"{m.label} is already MLA (kv_lora_rank {m.kv_lora_rank})"
    # full_attention_layers alone is no linear layer (MiMo-V2-Flash lists its full ones there)
    if m.linear_num_key_heads is not None:
        return (
            f"{m.label} has linear-attention layers: their fixed state has no latent to convert "
            "(only full-attention layers convert)"
        )
    if m.compress_ratios:  # DeepSeek-V4: window, pooled keys and compressors in every layer
        return (
            f"{m.label}'s compressed attention (compress_ratios: csa / hca / swa layers of one "
            "shared K = V head) has no MLA form modelled"
        )
    if not m.is_mla and (m.v_head_dim or m.sliding_key_value_heads):
        return f"{m.label}'s value heads or sliding layers have their own shape; only one converts"
    if m.sliding_window is not None:
        return (
            f"{m.label} has a sliding window of {m.sliding_window:,} tokens: a converted layer "
            "caches every token (set sliding_window: null in a copy of the file if the window is "
            "never reached)"
        )
    if m.attention_chunk_size is not None or m.full_attention_interval is not None:
        return (
            f"{m.label} has chunked or sliding layers between full ones; only uniform full "
            "layers convert"
        )
    if m.global_head_dim is not None or m.attention_k_eq_v:
        return f"{m.label}'s full layers have their own head shape; only one head shape converts"
    if m.index_topk is not None:
        return f"{m.label} has sparse (DSA) attention"
    if any(k.mamba for k in layer_pattern(m).layers):
        return (
            f"{m.label} runs a Mamba-2 mixer beside the attention in its layers: its fixed state "
            "has no latent to convert (only full-attention layers convert)"
        )
    kinds = sorted({f"{k.attention}/{k.ffn}" for k in layer_pattern(m).layers})
    if kinds not in (["full/dense"], ["full/moe"], ["full/dense", "full/moe"]):
        return (
            f"{m.label}'s layers are {', '.join(kinds)} (attention/FFN): only decoder layers of "
            "full attention with an FFN convert (no Mamba, attention-only or FFN-only blocks)"
        )
    if m.alibi:
        # ALiBi adds a bias by distance to the scores, outside the keys: no rotated part of a
        # key carries positions for MLA's decoupled RoPE key to keep (the model's own RoPE,
        # ModelConfig.rope, not its family's: a Falcon has RoPE unless it has ALiBi)
        return (
            f"{m.label} ({m.model_type}) has ALiBi, no RoPE: its positions are a bias added to "
            "the scores, none rotate the keys, so MLA's decoupled RoPE key has nothing to keep"
        )
    if not m.rope:
        return (
            f"{m.label} ({m.model_type}) has learned absolute positions, no RoPE: MLA's decoupled "
            "RoPE key has nothing to keep"
        )
    arch = arch_of(m)
    if arch is not None and arch.qk_norm:
        return (
            f"{m.label} ({m.model_type}) normalises its keys after the projection (k_norm): the "
            "key is not a linear map of the input, so it has no low-rank factor to convert"
        )
    return ""


def equivalence_rank(model: ModelConfig | str, rope_dim: int | None = None) -> int:
    """The latent rank at which the converted cache equals the source's:
    ``2 n_kv d_h - rope_dim`` (TransMLA's "no larger KV cache").

    Examples
    --------
    >>> equivalence_rank("llama-3-70b")          # 2 x 8 x 128 - 64
    1984
    """
    m = model_argument(model)
    _refuse(m)
    rope = _rope_dim(m, rope_dim)
    return 2 * m.num_key_value_heads * m.head_dim - rope


def _refuse(m: ModelConfig) -> None:
    why = conversion_refusal(m)
    if why:
        raise InvalidArgumentError("model", f"cannot convert to MLA: {why}")


def _rope_dim(m: ModelConfig, rope_dim: Any) -> int:
    d_h = m.head_dim
    if rope_dim is None:
        rope_dim = min(DEFAULT_ROPE_DIM, d_h // 2 - (d_h // 2) % 2)
    rope_dim = args.count("rope_dim", rope_dim, BOUNDS["qk_rope_head_dim"])
    if rope_dim % 2:
        raise InvalidArgumentError(
            "rope_dim", f"RoPE rotates pairs of dimensions; {rope_dim} is odd: use an even width"
        )
    if rope_dim >= d_h:
        raise InvalidArgumentError(
            "rope_dim",
            f"is {rope_dim}, but each head of {m.label} is {d_h} wide: keep it below {d_h} so "
            "some dimensions are position-free (they make the latent)",
        )
    return rope_dim


def _checked(m: ModelConfig, to: Any, method: Any, svd: Any, rope_strategy: Any) -> str | None:
    if to != "mla":
        raise InvalidArgumentError(
            "to", f"only conversion to 'mla' is built, got {args.show_value(to)}"
        )
    args.choice("method", method, CONVERSION_METHODS)
    args.choice("svd", svd, SVD_MODES)
    if method == "transmla":
        if rope_strategy is not None:
            raise InvalidArgumentError(
                "rope_strategy",
                "is MHA2MLA's partial-RoPE choice; TransMLA rotates RoPE into one key (leave it "
                "None, or use method='mha2mla')",
            )
        return None
    if rope_strategy is None:
        return "2-norm"
    return args.choice("rope_strategy", rope_strategy, ROPE_STRATEGIES)


def _full_rank(m: ModelConfig, method: str, rope: int) -> int:
    """Rank of the position-free key and value projections together: TransMLA's keys give
    ``n_kv d_h - rope`` dims once their rotation is in the shared RoPE key, MHA2MLA's
    ``n_kv (d_h - rope)`` (each head keeps ``rope`` rotated); the values ``n_kv d_h``; at most
    ``d`` (the projections' input)."""
    n_kv, d_h = m.num_key_value_heads, m.head_dim
    keys = n_kv * d_h - rope if method == "transmla" else n_kv * (d_h - rope)
    return min(m.hidden_size, keys + n_kv * d_h)


def split_ranks(m: ModelConfig, method: str, rope: int) -> tuple[int, int]:
    """Ranks of the position-free key projection and of the value projection apart (what a
    split SVD's two latents can hold): TransMLA's keys ``n_kv d_h - rope`` (the rotation is in
    the shared key), MHA2MLA's ``n_kv (d_h - rope)``; the values ``n_kv d_h``; each at most
    ``d``."""
    n_kv, d_h, d = m.num_key_value_heads, m.head_dim, m.hidden_size
    keys = n_kv * d_h - rope if method == "transmla" else n_kv * (d_h - rope)
    return min(d, keys), min(d, n_kv * d_h)


def _ranks(
    m: ModelConfig, kv_lora_rank: Any, rope: int, svd: str, full: int
) -> tuple[int, int | None, int | None]:
    if kv_lora_rank is None:  # the same cache as the source's, but no rank that holds nothing
        kv_lora_rank = min(2 * m.num_key_value_heads * m.head_dim - rope, full)
        if svd == "split":
            kv_lora_rank -= kv_lora_rank % 2
    d_c = args.count("kv_lora_rank", kv_lora_rank, BOUNDS["kv_lora_rank"])
    if svd == "split":
        if d_c % 2:
            raise InvalidArgumentError(
                "kv_lora_rank",
                f"svd='split' gives keys and values half the latent each; {d_c} is odd: use an "
                "even rank, or svd='joint'",
            )
        return d_c, d_c // 2, d_c // 2
    return d_c, None, None


def _refuse_past_hidden(
    m: ModelConfig, method: str, rope: int, full: int, d_c: int, q_lora_rank: int | None
) -> None:
    """A latent rank above the hidden size refused: a latent is projected from the hidden
    state, so past its width no dimension carries anything (a trial's kv_lora_rank 100,000
    gave a 268 G model under a warning). The fix names the largest rank that holds anything:
    the full rank of the position-free keys and values, or of W_Q for the query."""
    d = m.hidden_size
    if d_c > d:
        raise InvalidArgumentError(
            "kv_lora_rank",
            f"{d_c:,} is above the hidden size {d:,} the latent is projected from: give "
            f"{full:,} or less (the full rank of the position-free key and value "
            "projections; past it a rank adds cache and nothing else)",
        )
    if q_lora_rank is not None and q_lora_rank > d:
        nope = m.head_dim if method == "transmla" else m.head_dim - rope
        q_full = min(d, m.num_attention_heads * (nope + rope))
        raise InvalidArgumentError(
            "q_lora_rank",
            f"{q_lora_rank:,} is above the hidden size {d:,} the query latent is projected "
            f"from: give {q_full:,} or less (the full rank of W_Q; below it the latent "
            "compresses the query)",
        )


def _published(method: str, d_c: int, rope: int, source: ModelConfig) -> int | None:
    n_kv = source.num_key_value_heads
    if method != "mha2mla" or n_kv == 1:
        return None
    return d_c + n_kv * rope


#: the quality caveat of every conversion (``Conversion.notes``, last, and
#: :func:`mlacalc.cost.convert_cost.reading_notes`, first)
BEFORE_FINE_TUNING = (
    "counts before any fine-tuning: the accuracy the conversion loses, and the fine-tuning "
    "that recovers it, are not modelled"
)


def _notes(c: dict[str, Any], m: ModelConfig, q_lora_rank: int | None = None) -> list[str]:
    d_c, rope, n_kv = c["kv_lora_rank"], c["rope_dim"], m.num_key_value_heads
    notes = [
        f"cache per token and layer: {2 * n_kv * m.head_dim:,} -> {d_c + rope:,} elements "
        f"(equal at rank {c['equivalence_rank']:,})",
        "the latent is RMS-normed as in DeepSeek's layer (kv_a_layernorm: "
        f"{d_c:,} weights a plain SVD factor does not have)",
    ]
    if d_c > c["full_rank"]:
        notes.append(
            f"rank {d_c:,} is above the full rank {c['full_rank']:,} of the position-free key "
            "and value projections: the extra latent dimensions hold nothing"
        )
    if c["svd"] == "split":
        keys, values = split_ranks(m, c["method"], rope)
        for what, rank in (("key", keys), ("value", values)):
            if d_c // 2 > rank:
                notes.append(
                    f"split SVD: the {what} latent of {d_c // 2:,} is above the rank {rank:,} of "
                    f"the position-free {what}s: {d_c // 2 - rank:,} of its dimensions hold nothing"
                )
    # the converted query's width: TransMLA's heads are d_h + rope wide, MHA2MLA's keep d_h
    q_head = m.head_dim + (rope if c["method"] == "transmla" else 0)
    q_width = m.num_attention_heads * q_head
    if q_lora_rank is not None and q_lora_rank >= min(m.hidden_size, q_width):
        q, d = q_lora_rank, m.hidden_size
        added = q * (d + q_width) + q - d * q_width  # W_DQ, W_UQ and the latent's norm vs W_Q
        notes.append(
            f"query rank {q:,} is not below min(d_model {d:,}, query width {q_width:,} = "
            f"{m.num_attention_heads} heads x {q_head}), the full rank of W_Q: the query latent "
            f"compresses nothing and adds {added:,} weights a layer over the plain W_Q "
            f"({added - q:,} in W_DQ and W_UQ, {q:,} in the latent's norm)"
        )
    if m.qkv_bias or m.attention_bias:
        notes.append(
            "the attention projections' biases are dropped, as DeepSeek's layer has none: a key "
            "bias adds "
            "one constant to all of a query's scores (softmax ignores it), a value bias one "
            "constant to the output; the query bias is lost"
        )
    if c["svd"] == "split":
        notes.append(
            f"split SVD: a key latent and a value latent of {d_c // 2:,} each (a "
            "block-diagonal up-projection)"
        )
    if c["method"] == "transmla":
        replicated = (
            f"the {n_kv} key heads are replicated to the {m.num_attention_heads} query heads; "
            if n_kv < m.num_attention_heads
            else ""
        )
        notes.append(
            f"{replicated}the keys' rotation is concentrated into one shared {rope}-wide RoPE "
            f"key, and the other {n_kv * m.head_dim - rope:,} key dimensions with the "
            f"{n_kv * m.head_dim:,} value dimensions factor into the latent (rank at most "
            f"{c['full_rank']:,}); each query head's position-free key part keeps the source's "
            f"width {m.head_dim} (DeepSeek's layout, from recall of TransMLA)"
        )
    if c["method"] == "mha2mla":
        notes.append(
            f"partial RoPE '{c['rope_strategy']}' picks which {rope} dimensions of each head keep "
            "RoPE; the strategy changes no count"
        )
        published = _published(c["method"], d_c, rope, m)
        if published is not None:
            source = 2 * n_kv * m.head_dim
            notes.append(
                f"MHA2MLA as published caches the rotated dimensions of each of the {n_kv} key "
                f"heads: {published:,} elements a token and layer (d_c + {n_kv} x {rope}; "
                f"{published / source:.3g}x the source's); the model counted and saved here is "
                f"DeepSeek's shared-RoPE form ({d_c + rope:,}, {(d_c + rope) / source:.3g}x), "
                "which the MLA kernels serve"
            )
    notes.append(BEFORE_FINE_TUNING)  # the library's notes carry what the CLI says first
    return notes


def convert(
    model: ModelConfig | str,
    to: str = "mla",
    method: str = "transmla",
    kv_lora_rank: int | None = None,
    rope_dim: int | None = None,
    svd: str = "joint",
    keep_q_full: bool = True,
    q_lora_rank: int | None = None,
    rope_strategy: str | None = None,
) -> Conversion:
    """``model`` converted to MLA by ``method``, with the record of what changed.

    Parameters
    ----------
    kv_lora_rank
        ``d_c``, the latent rank; ``None``: the equivalence rank (the source's cache size), or
        the full rank where that is smaller (a wider latent holds nothing).
    rope_dim
        dimensions of each head that keep RoPE (the shared RoPE key's width); ``None``:
        ``min(64, d_h / 2)``.
    svd
        ``"joint"`` (one latent for keys and values) or ``"split"`` (half each).
    keep_q_full, q_lora_rank
        keep the query projection whole (both papers do), or compress it to ``q_lora_rank``.
    rope_strategy
        MHA2MLA's partial-RoPE choice (``"high"``, ``"low"``, ``"uniform"``, ``"2-norm"``;
        default ``"2-norm"``); changes no count.

    Examples
    --------
    >>> c = convert("llama-3-70b", kv_lora_rank=512)
    >>> c.model.kv_lora_rank, c.model.qk_nope_head_dim, c.cache_elements, c.source_cache_elements
    (512, 128, 576, 2048)
    """
    m = model_argument(model)
    _refuse(m)
    strategy = _checked(m, to, method, svd, rope_strategy)
    rope = _rope_dim(m, rope_dim)
    full = _full_rank(m, method, rope)
    d_c, r_k, r_v = _ranks(m, kv_lora_rank, rope, svd, full)
    keep_q_full = args.flag("keep_q_full", keep_q_full)
    q_lora_rank = args.optional_count("q_lora_rank", q_lora_rank, BOUNDS["q_lora_rank"])
    if keep_q_full and q_lora_rank is not None:
        raise InvalidArgumentError(
            "q_lora_rank", "is set but keep_q_full is True: pass keep_q_full=False to compress Q"
        )
    if not keep_q_full and q_lora_rank is None:
        raise InvalidArgumentError(
            "q_lora_rank", "keep_q_full=False compresses the query: name its rank q_lora_rank"
        )
    _refuse_past_hidden(m, method, rope, full, d_c, q_lora_rank)
    d_h, n_h, n_kv = m.head_dim, m.num_attention_heads, m.num_key_value_heads
    after = {
        "num_key_value_heads": n_h,
        "head_dim": None,
        "kv_lora_rank": d_c,
        "qk_rope_head_dim": rope,
        "qk_nope_head_dim": d_h if method == "transmla" else d_h - rope,
        "v_head_dim": d_h,
        "q_lora_rank": q_lora_rank,
    }
    if m.qkv_bias or m.attention_bias:  # DeepSeek's layer has no q/k/v biases (see the notes)
        after |= {"qkv_bias": False, "attention_bias": False}
    # MHA2MLA as published caches each KV head's rotated part; the model here is DeepSeek's
    # form with one shared RoPE key, and its name says so wherever it goes (--save, plan, app)
    shared = _published(method, d_c, rope, m) is not None
    form = "-shared-rope" if shared else ""
    how = f"{method} in DeepSeek's shared-RoPE form" if shared else method
    converted = m.with_changes(
        name=f"{m.name}-{method}{form}-{svd}-r{d_c}",
        display_name=f"{m.label} as MLA ({how}, {svd} SVD, d_c {d_c})",
        source=(
            *m.source,
            f"mlacalc convert: {how}, {svd} SVD, kv_lora_rank {d_c}, rope {rope}",
        ),
        **after,
    )
    record = {
        "method": method,
        "svd": svd,
        "rope_strategy": strategy,
        "kv_lora_rank": d_c,
        "rope_dim": rope,
        "equivalence_rank": 2 * n_kv * d_h - rope,
        "full_rank": full,
    }
    changes = tuple(
        (f, getattr(m, f), after[f]) for f in _CHANGED if f in after and getattr(m, f) != after[f]
    )
    return Conversion(
        source=m,
        model=converted,
        q_lora_rank=q_lora_rank,
        key_rank=r_k,
        value_rank=r_v,
        changes=changes,
        notes=tuple(_notes(record, m, q_lora_rank)),
        **record,
    )
