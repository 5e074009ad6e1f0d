"""Report data: what the CLI (and the app) show, as plain dicts of exact numbers.

Formatting lives in :mod:`mlacalc.render`; here every value is an int (bytes, FLOPs,
parameters), a float only for ratios and intensities, and every key carries its
unit (``*_bytes``, ``*_flops``, ``*_flops_per_byte``). The JSON schema is
documented in the README and held stable by ``tests/test_cli.py``.
"""

from __future__ import annotations

import math
from typing import Any

from mlacalc.cost.attention import indexer_cost, indexer_row_bytes
from mlacalc.cost.compressed import compressed_growth
from mlacalc.cost.engine import KVCache, as_model, attention_cost, kv_cache
from mlacalc.cost.families import recurrent_state_dtype
from mlacalc.cost.forward import forward_flops_per_token
from mlacalc.cost.model_step import stored_attention_cost
from mlacalc.cost.params import kept_parts, param_counts, weight_bytes
from mlacalc.cost.quant import checkpoint_kv_note, checkpoint_weights
from mlacalc.models.architecture import count_warnings, layer_pattern
from mlacalc.models.loading import ModelConfig, load_model
from mlacalc.models.patterns import COMPRESSED_KINDS, STATE_KINDS
from mlacalc.models.quantization import unread_quantization_warning
from mlacalc.models.tensors import part_of, tensors
from mlacalc.models.variants import as_variant
from mlacalc.serving.precision import engine_fp8_cache_note
from mlacalc.words import defaults as D
from mlacalc.words.arguments import kv_layout, one_or_many, plain_int
from mlacalc.words.dtypes import with_state_dtype
from mlacalc.words.errors import InvalidArgumentError
from mlacalc.words.units import human_bytes
from mlacalc.words.vocab import (
    MLA_IMPLEMENTATIONS,
    REPORT_SCHEMA,
    STANDARD_IMPL,
    VARIANTS,
    caches_latent,
    stamped,
)

__all__ = [
    "SCHEMA",
    "attention_kind_labels",
    "cache_by_kind",
    "compare_rows",
    "kind_cells",
    "model_report",
    "model_summary",
    "variant_equivalents",
]

SCHEMA = REPORT_SCHEMA
#: MLA implementations whose caches the report compares (absorbed_merged keeps absorbed's).
_CACHE_IMPLS = ("naive", "compressed", "absorbed")

_MODEL_FIELDS = (
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "q_lora_rank",
    "kv_lora_rank",
    "qk_nope_head_dim",
    "qk_rope_head_dim",
    "v_head_dim",
    "vocab_size",
    "intermediate_size",
    "n_routed_experts",
    "n_shared_experts",
    "num_experts_per_tok",
    "moe_intermediate_size",
    "first_k_dense_replace",
    "num_nextn_predict_layers",
    "sliding_window",
    "global_head_dim",
    "num_global_key_value_heads",
    "attention_k_eq_v",
    "sliding_key_value_heads",
    "tie_word_embeddings",
    "weights_dtype",
)


def model_summary(m: ModelConfig) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": m.name,
        "display_name": m.label,
        "model_type": m.model_type,
        "variant": m.variant,
    }
    for key in _MODEL_FIELDS:
        value = getattr(m, key)
        absent = key in ("n_routed_experts", "attention_k_eq_v") and not value
        if value is not None and not absent:
            out[key] = value
    out["source"] = list(m.source)
    out["derived"] = list(m.derived)
    return out


def _impls(m: ModelConfig, impl: str | None) -> list[str | None]:
    if not m.is_mla:
        return [None]
    if impl is not None:
        return [impl]
    return list(_CACHE_IMPLS)


def cache_by_kind(m: ModelConfig, cache: KVCache) -> list[dict[str, Any]]:
    """The cache split by kind of layer: ``kind``, ``layers``, ``tokens_per_layer``, ``bytes``.

    A model whose layers are alike has one row (its kind, all layers, the whole cache);
    the rows' ``bytes`` always sum to ``cache.total_bytes``.
    """
    if cache.by_kind:
        rows = cache.by_kind
    else:
        kind = layer_pattern(m).layers[0].label
        rows = ((kind, cache.layers, cache.tokens_per_layer, cache.total_bytes),)
    return [{"kind": k, "layers": n, "tokens_per_layer": t, "bytes": b} for k, n, t, b in rows]


def kind_cells(kind_row: dict[str, Any]) -> tuple[str, str]:
    """The two per-token cells of one row of the cache by kind of layer (:func:`kv_rows`'s
    ``by_kind``), as the CLI report and the app both show them: the bytes of one token's row
    in one such layer and the tokens such a layer keeps, with thousands separators;
    ``fixed state`` in both for a linear or Mamba layer (it keeps one state per sequence, no
    rows), ``-`` in both for a layer without a sequence mixer (kind ``none``: nothing).

    >>> kind_cells({"kind": "mamba", "bytes_per_token_per_layer": None, "tokens_per_layer": 0})
    ('fixed state', 'fixed state')
    >>> kind_cells({"kind": "full", "bytes_per_token_per_layer": 1024, "tokens_per_layer": 8192})
    ('1,024', '8,192')
    """
    kind = kind_row["kind"]
    if kind == "none":
        return "-", "-"
    if kind in STATE_KINDS:
        return "fixed state", "fixed state"
    row = kind_row["bytes_per_token_per_layer"]
    return ("fixed state" if row is None else f"{row:,}"), f"{kind_row['tokens_per_layer']:,}"


def _growth_by_kind(
    m: ModelConfig, seq_len: int, kv_dtype: Any, impl: str | None
) -> dict[str, tuple[int, int]]:
    """Per kind of layer: (layers, bytes per layer) one more token of one sequence adds.

    A kind is left out when the next token adds nothing to it: a sliding or chunked
    layer whose window is full, a linear layer (a fixed state).
    """
    now, after = (
        cache_by_kind(m, kv_cache(m, s, 1, kv_dtype, impl)) for s in (seq_len, seq_len + 1)
    )
    out = {}
    for a, b in zip(now, after):
        grown = b["bytes"] - a["bytes"]
        if grown > 0:
            out[a["kind"]] = (a["layers"], grown // a["layers"])
    return out


def _row_elements(m: ModelConfig, kind: str, sixteen: tuple[int, int]) -> int:
    """Elements of one token's row in one layer of ``kind``, from ``(layers, bytes)`` of the
    row sized at 16 bits: half the bytes, except a DSA layer's indexer key, kept in fp8 with a
    float32 scale a 128 values whatever the layout (``indexer_row_bytes``: 132 B for 128
    values), which counts its ``index_head_dim`` values (DeepSeek-V3.2: 576 + 128 = 704)."""
    row = sixteen[1]
    if kind == "dsa" and m.index_topk:  # the label kv_by_kind gives a layer with its own key
        return (row - indexer_row_bytes(m)) // 2 + m.index_head_dim
    return row // 2


def _kinds(m: ModelConfig, cache: KVCache) -> list[str]:
    return [k["kind"] for k in cache_by_kind(m, cache)]


def _kind_row(m: ModelConfig, kind: str, seq_len: int, kv_dtype: Any, impl: str | None) -> Any:
    """Bytes of one token's row in one layer of ``kind`` (None for a linear or Mamba layer's
    state, and for a layer without a sequence mixer)."""
    if kind in STATE_KINDS or kind == "none" or kind.startswith("swa"):
        return None
    if kind in COMPRESSED_KINDS:  # DeepSeek-V4: a pooled key per ratio tokens, averaged over
        # the ratios' period past the window (the window and the compressors' state bounded)
        period = math.lcm(*(r for r in m.compress_ratios if r))
        start = -(-max(seq_len, m.sliding_window) // period) * period
        rows = [
            {r["kind"]: r for r in cache_by_kind(m, kv_cache(m, s, 1, kv_dtype, impl))}[kind]
            for s in (start, start + period)
        ]
        return (rows[1]["bytes"] - rows[0]["bytes"]) // (period * rows[0]["layers"])
    one = {r["kind"]: r for r in cache_by_kind(m, kv_cache(m, 1, 1, kv_dtype, impl))}[kind]
    return one["bytes"] // one["layers"]


def kv_rows(
    m: ModelConfig, seq_len: int, batch: int, kv_dtype: str, impl: str | None = None
) -> list[dict]:
    """The KV cache per implementation, with one definition of "per token".

    ``bytes_per_token`` is what one more token of one sequence adds at ``seq_len``:
    a row in every layer that still keeps every new token (full layers; sliding layers
    until their window fills). ``layers_per_token`` counts those layers and
    ``bytes_per_token_per_layer`` / ``elements_per_token_per_layer`` are one such
    layer's row, so ``bytes_per_token_per_layer x layers_per_token = bytes_per_token``;
    both are None when the counted layers' rows differ (see ``by_kind``). Each
    ``by_kind`` row carries its own kind's row (``bytes_per_token_per_layer``; None for
    a linear layer's fixed state).
    """
    rows = []
    # the row kv_cache_bytes gives with no impl: the cache a server holds (MLA: the latent)
    served = kv_cache(m, seq_len, batch, kv_dtype).impl
    for choice in _impls(m, impl):
        cache = kv_cache(m, seq_len, batch, kv_dtype, choice)
        growth = _growth_by_kind(m, seq_len, kv_dtype, choice)
        # elements: the same rows sized at 16 bits, 2 bytes an element
        sixteen = _growth_by_kind(m, seq_len, 16, choice)
        per_kind = {k: _kind_row(m, k, seq_len, kv_dtype, choice) for k in _kinds(m, cache)}
        sizes = {b for _n, b in growth.values()}
        if not sizes and len(per_kind) == 1 and cache.row_bytes:  # one kind, window full
            sizes, sixteen = {cache.row_bytes}, {"": (1, 2 * cache.row_elements)}
        one = len(sizes) == 1
        by_kind = cache_by_kind(m, cache)
        for k in by_kind:
            k["bytes_per_token_per_layer"] = per_kind[k["kind"]]
        rows.append(
            {
                "impl": cache.impl,
                "default": cache.impl == served,
                "kv_dtype": cache.layout,
                "elements_per_token_per_layer": (
                    _row_elements(m, *next(iter(sixteen.items()))) if one else None
                ),
                "bytes_per_token_per_layer": sizes.pop() if one else None,
                "layers_per_token": sum(n for n, _b in growth.values()),
                "layer_kinds_per_token": list(growth),
                # DeepSeek-V4: the growth averaged over the compress ratios' period (the next
                # token alone adds the compressors' pending rows)
                "bytes_per_token": compressed_growth(m, seq_len, kv_dtype)
                if m.compress_ratios
                else cache.bytes_per_token,
                "tokens_per_layer": cache.tokens_per_layer,
                "total_bytes": cache.total_bytes,
                "by_kind": by_kind,
            }
        )
    smallest = min(r["total_bytes"] for r in rows)
    for r in rows:
        r["ratio_to_smallest"] = r["total_bytes"] / smallest
    return rows


def _cache_impl(m: ModelConfig, impl: str, choice: str | None) -> str:
    """What the cache holds for a row: ``naive`` (expanded K/V) or ``compressed`` (the latent).

    MLA's serving default (``choice=None``) keeps the compressed latent in every phase, even
    where its op sequence is the naive one (prefill).
    """
    if not m.is_mla:
        return impl
    return "compressed" if caches_latent(True, None if choice is None else impl) else "naive"


def _impl_label(m: ModelConfig, phase: str, impl: str, choice: str | None) -> str:
    """How a report names a row's implementation.

    The MLA serving default runs the naive op sequence (K/V expanded from the latent for
    the new tokens) in prefill but keeps the compressed latent cache, so its bytes are the
    compressed ones: it is labelled for both, never as plain ``naive``. In prefill every key
    is new, so it equals ``compressed`` exactly (FLOPs and bytes); a chunk after a cached
    prefix runs ``compressed`` itself (the prefix's latent expanded too).
    """
    if m.compress_ratios and impl == "compressed":  # DeepSeek-V4: its one implementation, as
        return STANDARD_IMPL  # --impl and the KV rows name it (not MLA's compressed)
    if not (m.is_mla and choice is None):
        return impl
    if impl == "naive":
        return "naive, latent cache (default)"
    return f"{impl} (default)"


def attention_rows(
    m: ModelConfig,
    seq_len: int,
    batch: int,
    kv_dtype: str,
    weight_dtype: str | None,
    phases: list[str],
    impl: str | None,
    causal: bool,
    q_len: int | None,
) -> list[dict]:
    rows = []
    for phase in phases:
        impls: list[str | None] = [impl] if (impl or not m.is_mla) else [None, *MLA_IMPLEMENTATIONS]
        for choice in impls:
            cost = attention_cost(
                m,
                phase,
                seq_len,
                batch,
                q_len if phase == "chunk" else None,
                choice,
                causal,
                kv_dtype,
                weight_dtype,
            )
            if weight_dtype is None:  # the weights as the checkpoint stores them, if it says
                cost = stored_attention_cost(cost, m)
            rows.append(
                {
                    "phase": phase,
                    "impl": cost.impl,
                    "default": choice is None,
                    "seq_len": seq_len,
                    "q_len": cost.q_len,
                    "batch": batch,
                    "causal": causal,
                    "flops": cost.flops,
                    "stage_flops": dict(cost.stage_flops),
                    **_indexer_flops(m, cost),
                    "elementwise_flops": cost.elementwise_flops,
                    "fused_bytes": cost.fused_bytes,
                    "unfused_bytes": cost.unfused_bytes,
                    "weight_bytes": cost.weight_bytes,
                    "arithmetic_intensity_flops_per_byte": cost.arithmetic_intensity,
                    # what the cache holds, and the row's name in the tables (the serving
                    # default of MLA prefill is naive FLOPs over the compressed cache)
                    "cache_impl": _cache_impl(m, cost.impl, choice),
                    "label": _impl_label(m, phase, cost.impl, choice),
                }
            )
    return rows


def model_report(
    model: ModelConfig | str,
    *,
    seq_len: int = D.SEQ_LEN,
    batch: int = D.BATCH,
    kv_dtype: str = D.KV_DTYPE,
    weight_dtype: str | None = None,
    impl: str | None = None,
    phases: list[str] | None = None,
    causal: bool = False,
    q_len: int | None = None,
    state_dtype: str | None = None,
) -> dict[str, Any]:
    """Everything ``mlacalc report`` prints, as one dict. ``state_dtype`` keeps a linear or
    Mamba layer's recurrent state in ``bf16`` instead of float32."""
    m = model if isinstance(model, ModelConfig) else load_model(model)
    # kept in the report: Python ints (np.int64 is not JSON), checked where they are used
    seq_len, batch, q_len = (plain_int(v) for v in (seq_len, batch, q_len))
    layout = kv_layout("kv_dtype", kv_dtype)  # an unknown one names its argument
    if state_dtype is not None:  # the layout carries the state's dtype to every count
        layout = with_state_dtype(layout, state_dtype)
        kv_dtype = layout
    w_dtype = weight_dtype or m.weights_dtype
    counts = param_counts(m)
    # the two phases of serving, in order; one phase name is a list of one, not its letters
    phases = list(one_or_many("phases", phases, what="phases")) if phases else ["prefill", "decode"]
    attention = _attention_section(
        m, seq_len, batch, kv_dtype, weight_dtype, phases, impl, causal, q_len
    )
    return stamped(
        {
            "schema": SCHEMA,
            "model": model_summary(m),
            "layers": layer_pattern(m).to_dict(),
            "settings": {
                "seq_len": seq_len,
                "batch": batch,
                "kv_dtype": layout.name,
                "state_dtype": recurrent_state_dtype(m, layout),
                "weight_dtype": w_dtype,
                "act_dtype": "bf16",
                "impl": impl,
                "causal": causal,
                "phases": phases,
                "q_len": q_len,
            },
            "parameters": {**counts.to_dict(), "attention_by_kind": attention_by_kind(m)},
            "weights": _weights_section(m, weight_dtype),
            "kv_cache": kv_rows(m, seq_len, batch, kv_dtype, impl),
            **attention,
            # the whole model's forward FLOPs of one token at seq_len keys, weights' products by
            # part and attention's over the context (mlacalc.cost.forward: a decode step's kernels)
            "forward_flops_per_token": forward_flops_per_token(m, seq_len).to_dict(),
            # what the figures are not, said once: a checkpoint's own fp8 cache sized otherwise
            # and a DSA model's fp8 cache as vLLM and SGLang store it (plan's fp8_ds_mla)
            "notes": [
                n
                for n in (
                    checkpoint_kv_note(m, layout.name, layout.bits),
                    engine_fp8_cache_note(m, layout, seq_len, batch),
                    topk_note(m, seq_len),
                )
                if n
            ],
            # what loading the model warns (an MLA width above hidden_size, a declared part no
            # layer holds, a quantized checkpoint sized 16-bit), as plan's and search's JSON carry
            # theirs: a trial's --set kv_lora_rank=8192 said it on stderr and not in the JSON
            "warnings": [
                *count_warnings(m),
                *filter(None, [unread_quantization_warning(m, weight_dtype)]),
            ],
        }
    )


def _indexer_flops(m: ModelConfig, cost: Any) -> dict[str, Any]:
    """``indexer_stage_flops``: of a row's ``stage_flops``, the FLOPs of its DSA or CSA
    indexer by stage (its query, weights and key projections, its scores), all layers, so
    that what the attention itself does is ``stage_flops - indexer_stage_flops`` (a student
    read DeepSeek-V3.2's decode core 165.79 G as attention; 130.99 G of it is the indexer's
    scores); no key for a model without an indexer."""
    if m.index_topk is None:
        return {}
    out = dict.fromkeys(cost.stage_flops, 0)
    grouped = [
        (g.layers, o) for g in cost.groups or () for o in g.ops if o.name.startswith("indexer")
    ]
    if grouped:  # DeepSeek-V4's CSA layers: the indexer's kernels are the group's own ops
        for layers, o in grouped:
            if o.kind == "matmul":
                out[o.stage] += layers * o.flops
    elif not m.compress_ratios:  # a DSA layer: mlacalc.cost.attention.indexer_cost, added
        shared = {i for i in m.shared_indexer_layers if 1 <= i <= m.num_hidden_layers}
        own = m.num_hidden_layers - len(shared)
        flops, _ = indexer_cost(m, cost.q_len, cost.seq_len, cost.batch, cost.causal, 8)
        for stage, f in flops.items():
            out[stage] += own * f
    return {"indexer_stage_flops": out}


def _indexer_total(m: ModelConfig, cost: Any) -> int:
    """The FLOPs of a step's indexer, every stage (0 without one)."""
    return sum(_indexer_flops(m, cost).get("indexer_stage_flops", {}).values())


def indexer_key_words(m: ModelConfig, kv_dtype: str) -> str:
    """One sentence on the precision of an indexer's cached keys, where report shows their
    bytes: a DSA layer's are fp8 with a float32 scale a 128 values whatever the cache's dtype
    (:func:`~mlacalc.cost.attention.indexer_row_bytes`: 132 B for DeepSeek-V3.2's 128-wide
    key), DeepSeek-V4's CSA pooled indexer keys follow the cache's dtype; ``""`` without an
    indexer."""
    if m.index_topk is None or not m.index_head_dim:
        return ""
    width = m.index_head_dim
    if m.compress_ratios:
        row = kv_layout("kv_dtype", kv_dtype).row_bytes(width)
        return (
            f"A csa layer's pooled indexer keys ({width} values) are in the cache's dtype "
            f"({kv_dtype}: {row:,} B a pooled key)."
        )
    return (
        f"A dsa layer's indexer keys ({width} values) are fp8 with a float32 scale a 128 "
        f"values whatever the cache's dtype: {indexer_row_bytes(m):,} B a token and layer."
    )


def topk_note(m: ModelConfig, seq_len: int) -> str:
    """What a DSA (or DeepSeek-V4 CSA) indexer's ``index_topk`` at or past the keys it ranks
    means: it then picks every key, its scores and top-k add work and save none at this
    context; past the keys the model's ``max_position_embeddings`` can hold it never binds
    (a new-user trial set ``index_topk`` 16,384 at 8k and 10,000,000 and got no word); ``""``
    where it selects (or for a model without an indexer)."""
    k = m.index_topk
    if k is None:
        return ""
    rate = m.compress_rate_csa if m.compress_ratios else None  # V4's CSA ranks pooled keys
    per = f" (the context's {seq_len:,} tokens pooled {rate} to 1)" if rate else ""
    keys = seq_len // rate if rate else seq_len
    most = m.max_position_embeddings // rate if rate else m.max_position_embeddings
    what = "compressed keys" if rate else "keys"
    if k >= most:
        return (
            f"index_topk {k:,} is at or past the {most:,} {what} the model's "
            f"max_position_embeddings ({m.max_position_embeddings:,}) can hold: it can never "
            "bind, every layer with an indexer attends every key at every context, and the "
            "indexer's scores and top-k are work that saves none"
        )
    if k >= keys:
        return (
            f"index_topk {k:,} is at or past the {keys:,} {what} at seq_len {seq_len:,}{per}: "
            "the indexer selects every key, so its scores and top-k (counted here) are pure "
            f"overhead at this context; it starts saving attention work past {k:,} {what}"
        )
    return ""


def _checkpoint_summary(ck: Any) -> str:
    """One line on a quantized checkpoint, in the binary units of the tables (GiB = 2^30 B),
    as ``report`` prints it: ``checkpoint: mxfp4 experts, 60.77 GiB incl. 3.34 GiB scales;
    bf16: ...``."""
    kept = ", ".join(ck.kept_parts) or "nothing"
    return (
        f"checkpoint: {ck.description or ck.scheme}, {human_bytes(ck.total_bytes)} incl. "
        f"{human_bytes(ck.scale_bytes)} scales; bf16: {kept}" + ck.unmatched_warning()
    )


def _weights_section(m: ModelConfig, weight_dtype: str | None) -> dict[str, Any]:
    """``weights``: the bytes of the weights and how they are sized. Without a chosen
    ``weight_dtype``, a model that declares its checkpoint's quantization is sized as the
    checkpoint stores it (``format`` "checkpoint fp8 block 128x128", ``checkpoint`` its
    payload, scales and bf16-kept tensors); otherwise every parameter in the dtype but what
    the planner too leaves as it is (``kept``: the norms and routers at 16 bits under a
    narrower dtype, the embedding and head as stored under one below 16 bits:
    :func:`mlacalc.cost.params.kept_parts`)."""
    checkpoint = checkpoint_weights(m) if weight_dtype is None else None
    total = weight_bytes(m, weight_dtype)
    with_mtp = weight_bytes(m, weight_dtype, include_mtp=True)
    dtype = weight_dtype or m.weights_dtype
    kept = [] if checkpoint is not None else kept_parts(m, weight_dtype)
    summary = f"every parameter in {dtype}" + "".join(
        f"{', but' if i == 0 else ','} the {k.what} ({k.params:,}) in {k.bits:g} bits"
        for i, k in enumerate(kept)
    )
    return {
        "dtype": dtype,
        "format": f"checkpoint {checkpoint.description}" if checkpoint is not None else dtype,
        "total_bytes": total,
        "mtp_bytes": with_mtp - total,
        "kept": [
            {"part": k.what, "parameters": k.params, "bits": k.bits, "bytes": math.ceil(k.nbytes)}
            for k in kept
        ],
        "checkpoint": checkpoint.to_dict() if checkpoint is not None else None,
        "summary": _checkpoint_summary(checkpoint) if checkpoint is not None else summary,
    }


def _attention_section(m: ModelConfig, *rest: Any) -> dict[str, Any]:
    """``attention``: the rows of :func:`attention_rows`, every kind of layer summed (linear
    layers included: :mod:`mlacalc.cost.linear`)."""
    return {"attention": attention_rows(m, *rest)}


def variant_equivalents(
    model: ModelConfig, kv_heads: int | None = None, kv_lora_rank: int | None = None
) -> tuple[list[ModelConfig], list[str]]:
    """The model as each of its MHA / GQA / MQA / MLA equivalents (its own design: itself),
    and notes, one sentence each: the variants it has none of (MiniMax-M3: no MLA
    equivalent), and an MLA equivalent that drops the sliding windows (Gemma 3, MiMo-V2-Flash:
    every layer attends every key). A model with none at all (DeepSeek-V4) is refused, as is
    a bad ``kv_heads`` or ``kv_lora_rank`` (the MLA equivalent's latent width, default
    ``4 d_h``; an MLA model's own otherwise: the model and its design at that rank both)."""
    equivalents, notes = [], []
    for v in VARIANTS:
        rank = {"kv_lora_rank": kv_lora_rank} if v == "mla" else {}
        try:
            equivalents.append(as_variant(model, v, num_key_value_heads=kv_heads, **rank))
        except InvalidArgumentError as exc:
            if exc.argument == "num_key_value_heads":  # named as the caller gave it
                raise InvalidArgumentError("kv_heads", exc.message) from None
            if exc.argument == "kv_lora_rank":
                raise
            if exc.argument != "variant":  # the whole model
                raise
            notes.append(f"Not shown: {exc.message}.")
    sliding = any(k.attention == "sliding" for k in layer_pattern(model).layers)
    mla = [e for e in equivalents if e.is_mla and e is not model]
    if sliding and mla and not any(k.attention == "sliding" for k in layer_pattern(mla[0]).layers):
        notes.append(
            f"The MLA equivalent has no sliding window: all {model.num_hidden_layers} layers "
            "attend and cache every token."
        )
    return equivalents, notes


def attention_by_kind(m: ModelConfig) -> list[dict[str, Any]]:
    """One layer's attention parameters for each kind of layer, in order of first appearance,
    where the kinds' differ (a hybrid's linear and full layers, DeepSeek-V4's compressed
    ones); [] where every layer holds the same (``attention_per_layer`` says it). Each: the
    kind's label, its layers, one layer's parameters and its tensors by name."""
    per_layer: dict[int, dict[str, int]] = {}
    for t in tensors(m):
        if not t.name.startswith("model.layers.") or part_of(t.name) != "attention":
            continue
        index, _, rest = t.name[len("model.layers.") :].partition(".")
        name = rest.partition(".")[2].removesuffix(".weight")  # past self_attn., linear_attn.
        per_layer.setdefault(int(index), {})[name] = t.numel
    kinds: dict[str, dict[str, Any]] = {}
    for i, kind in enumerate(layer_pattern(m).layers):
        row = kinds.setdefault(kind.label, {"kind": kind.label, "layers": 0})
        row["layers"] += 1
        row.setdefault("projections", per_layer.get(i, {}))
    rows = [{**r, "parameters": sum(r["projections"].values())} for r in kinds.values()]
    return rows if len({tuple(r["projections"].items()) for r in rows}) > 1 else []


def compare_rows(
    models: list[ModelConfig],
    *,
    seq_len: int,
    batch: int,
    kv_dtype: str,
    weight_dtype: str | None = None,
) -> list[dict[str, Any]]:
    """One row per model (a ModelConfig, a shipped name or a path; one of them alone is a list
    of one): size, cache and per-step attention cost side by side; ``kv_note``, report's note
    on what the cache figures are not (a DSA model's fp8 cache, stored otherwise by vLLM and
    SGLang), "" where there is none."""
    layout = kv_layout("kv_dtype", kv_dtype)  # an unknown one names its argument
    rows = []
    for m in one_or_many("models", models, what="models"):
        m = as_model(m)
        counts = param_counts(m)
        cache = kv_cache(m, seq_len, batch, kv_dtype)
        decode = attention_cost(
            m, "decode", seq_len, batch, kv_dtype=kv_dtype, weight_dtype=weight_dtype
        )
        prefill = attention_cost(
            m, "prefill", seq_len, 1, kv_dtype=kv_dtype, weight_dtype=weight_dtype
        )
        if weight_dtype is None:  # the weights as the checkpoint stores them, as report reads
            decode, prefill = (stored_attention_cost(c, m) for c in (decode, prefill))
        forward = forward_flops_per_token(m, seq_len)
        rows.append(
            {
                "model": m.name,
                "display_name": m.label,
                "variant": m.variant,
                "num_attention_heads": m.num_attention_heads,
                "num_key_value_heads": m.num_key_value_heads if not m.is_mla else None,
                "kv_lora_rank": m.kv_lora_rank,
                "total_params": counts.total,
                "active_params": counts.active,
                "attention_params_per_layer": counts.attention_per_layer,
                # as report's KV table counts it (DeepSeek-V4: averaged over the compress
                # ratios' period, not the next token's pending compressor rows)
                "kv_bytes_per_token": compressed_growth(m, seq_len, kv_dtype)
                if m.compress_ratios
                else cache.bytes_per_token,
                # one more token adds less than a short sequence's token row: sliding or
                # chunked layers whose window is full (and linear layers) add none, as list says
                "kv_window_full": cache.bytes_per_token
                < kv_cache(m, 2, 1, kv_dtype).total_bytes - kv_cache(m, 1, 1, kv_dtype).total_bytes,
                "kv_total_bytes": cache.total_bytes,
                "decode_impl": decode.impl,
                "decode_flops": decode.flops,
                # of them, its DSA or CSA indexer's (0 without one: report's
                # indexer_stage_flops summed)
                "decode_indexer_flops": _indexer_total(m, decode),
                "decode_fused_bytes": decode.fused_bytes,
                "decode_arithmetic_intensity_flops_per_byte": decode.arithmetic_intensity,
                "prefill_impl": prefill.impl,
                "prefill_flops": prefill.flops,
                "prefill_indexer_flops": _indexer_total(m, prefill),
                # the whole model's forward FLOPs of one token at seq_len keys, as report's
                "forward_flops_per_token": forward.total,
                "forward_weight_flops_per_token": forward.weight_flops,
                "forward_attention_flops_per_token": forward.attention,
                # report's note on a DSA model's fp8 cache as vLLM and SGLang store it
                "kv_note": engine_fp8_cache_note(m, layout, seq_len, batch),
            }
        )
    return rows


def attention_kind_labels(names: list[str], calls: list[int], kinds: tuple[str, ...]) -> list[str]:
    """The kind of layer (``full``, ``sliding(1024)``, ``linear``...) of each kernel of a
    model step whose layers differ, "" outside the attention block; [] when it cannot be told.

    ``names`` and ``calls`` are the step's kernels in order; ``kinds`` the attention groups in
    the order the step runs them (``attention_cost(...).group_labels``). The attention block's
    kernels lie between ``input_norm`` and ``post_attention_norm``; a kind's kernels run as
    many times as it has layers, and a new kind starts where that count changes or a kernel
    name comes again (Gemma 4: ``attention`` x 5 full, then ``attention`` x 25 sliding).

    >>> attention_kind_labels(
    ...     ["input_norm", "qkv", "attention", "qkv", "attention", "post_attention_norm"],
    ...     [30, 5, 5, 25, 25, 30], ("full", "sliding(1024)"))
    ['', 'full', 'full', 'sliding(1024)', 'sliding(1024)', '']
    """
    if len(kinds) < 2 or "input_norm" not in names or "post_attention_norm" not in names:
        return []
    out = [""] * len(names)
    start, end = names.index("input_norm") + 1, names.index("post_attention_norm")
    group, seen, count = -1, set(), None
    for i in range(start, end):
        if names[i] in seen or calls[i] != count:
            group, seen, count = group + 1, set(), calls[i]
        seen.add(names[i])
        if group >= len(kinds):
            return []
        out[i] = kinds[group]
    return out if group == len(kinds) - 1 else []
