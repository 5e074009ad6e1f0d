"""`mlacalc report`: parameters, weights, KV cache and attention FLOPs of one model."""

from __future__ import annotations

from typing import Any

import click

from mlacalc.cli.common import (
    IMPL_CHOICE,
    KV_DTYPE,
    PHASE_CHOICE,
    SIZE,
    W_DTYPE,
    Section,
    check_causal,
    check_context,
    check_impl,
    check_q_len,
    emit,
    format_option,
    load,
    phases,
    recurrent_state_check,
    set_option,
    size_text,
    state_dtype_option,
)
from mlacalc.models.patterns import STATE_KINDS
from mlacalc.models.registry import IgnoredField
from mlacalc.render import human_bytes, human_si, ratio
from mlacalc.report import indexer_key_words, kind_cells, model_report
from mlacalc.words import defaults as D
from mlacalc.words.vocab import MATMUL_STAGES


@click.command("report")
@click.argument("model")
@click.option(
    "--seq-len",
    "-s",
    type=SIZE,
    default=size_text(D.SEQ_LEN),
    show_default=True,
    help="Tokens in the cache / keys the last query attends (128k = 131072).",
)
@click.option(
    "--batch", "-b", type=SIZE, default=D.BATCH, show_default=True, help="Sequences in the batch."
)
@click.option(
    "--kv-dtype",
    type=KV_DTYPE,
    default=D.KV_DTYPE,
    show_default=True,
    help="KV-cache dtype or layout: bf16, fp16, fp8, fp32, int8, int4, fp8_ds_mla.",
)
@click.option(
    "--weight-dtype", type=W_DTYPE, default=None, help="Weight dtype (default: the model's)."
)
@click.option(
    "--impl",
    type=IMPL_CHOICE,
    default=None,
    help="MLA implementation (default: every one side by side).",
)
@click.option(
    "--phase", type=PHASE_CHOICE, default="both", show_default=True, help="Phase(s) to cost."
)
@click.option("--q-len", type=SIZE, default=None, help="New tokens per sequence for --phase chunk.")
@click.option(
    "--causal", is_flag=True, help="Count only the (query, key) pairs a causal kernel needs."
)
@state_dtype_option
@set_option
@format_option
def command(
    model,
    seq_len,
    batch,
    kv_dtype,
    weight_dtype,
    impl,
    phase,
    q_len,
    causal,
    state_dtype,
    sets,
    fmt,
):
    """Parameters, weights, KV cache and attention FLOPs of one model, and its whole forward
    FLOPs per token at --seq-len (weights' products and attention's over the context).

    MODEL is a shipped name (see `mlacalc list`), a YAML model file or a Hugging Face config.json.

    \b
    Examples:
      mlacalc report deepseek-v3
      mlacalc report deepseek-v3 --seq-len 128k --batch 8 --kv-dtype fp8
      mlacalc report llama-3-70b --phase decode --format json
      mlacalc report ./config.json --phase chunk --q-len 512
      mlacalc report deepseek-v3 --set kv_lora_rank=256 --set qk_rope_head_dim=32
      mlacalc report qwen3-next-80b-a3b --state-dtype bf16
    """
    check_q_len(phases(phase), q_len)
    check_causal(phases(phase), causal)
    m = load(model, changes=sets, weight_dtype=weight_dtype)
    impl = check_impl(m, impl)
    recurrent_state_check(m, state_dtype)
    doc = model_report(
        m,
        seq_len=seq_len,
        batch=batch,
        kv_dtype=kv_dtype,
        weight_dtype=weight_dtype,
        impl=impl,
        phases=phases(phase),
        causal=causal,
        q_len=q_len,
        state_dtype=state_dtype,
    )
    check_context(m, seq_len)
    header = _report_header(doc, _compressed_dims(m))
    keys = indexer_key_words(m, doc["settings"]["kv_dtype"])
    emit(fmt, doc, lambda: _report_sections(doc, keys), header)


def _compressed_dims(m) -> list[str]:
    """DeepSeek-V4's compressed attention in the header's words: what its pooled keys are."""
    if not m.compress_ratios:
        return []
    return [
        f"csa: one pooled key per {m.compress_rate_csa} tokens, {m.index_topk:,} picked "
        f"by its indexer; hca: one per {m.compress_rate_hca} tokens, all attended"
    ]


def _report_header(doc: dict, extra: list[str] | tuple = ()) -> str:
    m, s = doc["model"], doc["settings"]
    dims = [
        f"d={m['hidden_size']}",
        f"L={m['num_hidden_layers']}",
        f"n_h={m['num_attention_heads']}",
    ]
    if m["variant"] == "mla":
        dims += [
            f"d_c={m['kv_lora_rank']}",
            f"d_cq={m['q_lora_rank']}" if m.get("q_lora_rank") else "no query latent",
            f"d_nope={m['qk_nope_head_dim']}",
            f"d_rope={m['qk_rope_head_dim']}",
            f"d_v={m['v_head_dim']}",
        ]
    else:
        dims += [f"n_kv={m['num_key_value_heads']}", f"d_h={m['head_dim']}"]
        if extra:  # DeepSeek-V4: its one KV head is both the key and the value
            dims[-1] += " (one K = V head)"
        if m.get("v_head_dim"):  # MiMo-V2-Flash: value heads of their own width
            dims.append(f"d_v={m['v_head_dim']}")
    if m.get("sliding_window"):
        dims.append(f"window={m['sliding_window']}")
    if m.get("sliding_key_value_heads"):  # MiMo-V2-Flash: the sliding layers' own KV heads
        dims.append(f"sliding layers: n_kv={m['sliding_key_value_heads']}")
    if m.get("global_head_dim"):  # Gemma 4: the full layers' own heads
        full_kv = (m.get("attention_k_eq_v") and m.get("num_global_key_value_heads")) or m[
            "num_key_value_heads"
        ]
        k_eq_v = ", K=V" if m.get("attention_k_eq_v") else ""
        dims.append(f"full layers: n_kv={full_kv}, d_h={m['global_head_dim']}{k_eq_v}")
    dims += extra
    lines = [
        f"{m['display_name']} ({m['name']}): {m['variant'].upper()}, " + ", ".join(dims),
        f"seq_len {s['seq_len']:,} x batch {s['batch']:,}, KV {s['kv_dtype']}"
        + (f", recurrent state {s['state_dtype']}" if s["state_dtype"] else "")
        + f", weights {doc['weights']['format']}"
        + (", causal" if s["causal"] else ""),
        f"layer pattern: {doc['layers']['summary']}",
    ]
    if doc["weights"].get("checkpoint") or doc["weights"].get("kept"):
        lines.append(f"weights: {doc['weights']['summary']}")
    for note in m["derived"]:
        if not isinstance(note, IgnoredField):  # a warning line already
            lines.append(f"derived: {note}")
    lines += [f"note: {n}" for n in doc.get("notes", ())]
    return "\n".join(lines) + "\n"


def _weights_rows(w: dict) -> list[list[str]]:
    """The weights' rows of the parameters table: the total, then what a chosen dtype leaves
    as it is (as plan does) or a checkpoint's scales and bf16-kept tensors."""
    rows = [[f"weights ({w['format']})", f"{w['total_bytes']:,} B", human_bytes(w["total_bytes"])]]
    rows += [
        [f"  {k['part']} in {k['bits']:g} bits", f"{k['bytes']:,} B", human_bytes(k["bytes"])]
        for k in w.get("kept") or ()
    ]
    if w.get("checkpoint"):
        c = w["checkpoint"]
        rows += [
            ["  scales", f"{c['scale_bytes']:,} B", human_bytes(c["scale_bytes"])],
            ["  kept in bf16", f"{c['kept_bytes']:,} B", human_bytes(c["kept_bytes"])],
        ]
    return rows


def _parameter_rows(p: dict, w: dict) -> list[list[str]]:
    """The report's Parameters table: the counts (a hybrid's attention by kind, MTP apart)
    and the weights' bytes."""
    params_rows = [
        ["total (main model)", f"{p['total']:,}", human_si(p["total"])],
        ["active per token", f"{p['active']:,}", human_si(p["active"])],
        ["input embedding", f"{p['embedding']:,}", human_si(p["embedding"])],
        ["non-embedding", f"{p['non_embedding']:,}", human_si(p["non_embedding"])],
    ]
    by_kind = p.get("attention_by_kind") or []
    params_rows += [  # a hybrid's kinds hold different attention: one row each
        [
            f"attention per {r['kind']} layer ({r['layers']})",
            f"{r['parameters']:,}",
            human_si(r["parameters"]),
        ]
        for r in by_kind
    ] or [
        ["attention per layer", f"{p['attention_per_layer']:,}", human_si(p["attention_per_layer"])]
    ]
    if p["mtp"]:
        params_rows.insert(2, ["MTP modules (apart)", f"{p['mtp']:,}", human_si(p["mtp"])])
    return params_rows + _weights_rows(w)


def _report_sections(doc: dict, indexer_keys: str = "") -> list[Section]:
    p, w, s = doc["parameters"], doc["weights"], doc["settings"]
    by_kind = p.get("attention_by_kind") or []
    sections = [
        Section("Parameters", ["quantity", "exact", "approx."], _parameter_rows(p, w)),
        Section(
            "Parameter breakdown (main model)",
            ["part", "parameters", "share"],
            [[k, f"{v:,}", f"{100 * v / p['total']:.2f}%"] for k, v in p["breakdown"].items() if v],
        ),
    ]
    layers = doc["layers"]["layers"]
    sections += [
        Section(
            f"Attention projections (one {r['kind']} layer, {r['layers']} of {layers})",
            ["projection", "parameters"],
            [[k, f"{v:,}"] for k, v in r["projections"].items()],
        )
        for r in by_kind
    ] or [
        Section(
            "Attention projections (one layer)",
            ["projection", "parameters"],
            [[k, f"{v:,}"] for k, v in p["attention_breakdown"].items()],
        )
    ]
    kv_title = f"KV cache at seq_len {s['seq_len']:,} x batch {s['batch']:,} ({s['kv_dtype']})"
    # a cache split by kind: layers of different kinds, or DSA layers (latent + indexer keys)
    kinds = set(doc["layers"]["attention"])
    split = len(kinds) > 1 or bool({"dsa", "msa"} & kinds)
    sections.append(
        Section(
            kv_title,
            [
                "implementation",
                "elements/token/layer",
                "layers a token adds to",
                "bytes/token",
                "tokens kept per layer",
                "total",
                "vs smallest",
            ],
            [
                [
                    _kv_impl_cell(r, doc),
                    _maybe(r["elements_per_token_per_layer"], "{:,}", "mixed: see by kind"),
                    _counted_layers(r, split),
                    human_bytes(r["bytes_per_token"]),
                    _kept_cell(r),
                    human_bytes(r["total_bytes"]),
                    ratio(r["ratio_to_smallest"]),
                ]
                for r in doc["kv_cache"]
            ],
            note=_per_token_note(doc) if split else "",
        )
    )
    pooled = any(k["kind"] in ("csa", "hca") for r in doc["kv_cache"] for k in r["by_kind"])
    sections += [
        Section(
            "KV cache by kind of layer",
            [
                "implementation",
                "kind",
                "layers",
                "bytes/token/layer (one more token adds, averaged)"
                if pooled
                else "bytes/token/layer",
                "tokens kept per layer",
                "bytes",
                "total",
            ],
            [
                [
                    r["impl"],
                    k["kind"],
                    f"{k['layers']:,}",
                    *kind_cells(k),
                    f"{k['bytes']:,}",
                    human_bytes(k["bytes"]),
                ]
                for r in doc["kv_cache"]
                for k in r["by_kind"]
            ],
            note="a sliding or chunked layer keeps min(seq_len, window) tokens; a linear "
            "or Mamba layer a fixed state per sequence (its recurrent state in --state-dtype, "
            "fp32 unless bf16 is given, its convolution window in the KV dtype: K positions, as "
            "the reference implementation's cache keeps them, where the engines keep K - 1, which "
            "plan counts); a DSA layer the latent plus its indexer keys; "
            "a block-sparse (msa) layer K, V and its indexer keys; a compressed layer (csa, "
            "hca) its window's rows and its pooled keys (csa: with their indexer keys), its "
            "bytes/token/layer averaged over the pooling; a layer without a sequence mixer "
            "(none) nothing."
            + (
                " A compressed layer's bytes are its pooled keys (a csa key with its indexer "
                "key) and its window rows, each at its own row's bytes, plus the compressors' "
                "bounded state (an unfinished pooling window's rows; csa's overlap rows), not "
                "tokens kept times bytes/token/layer, which is what one more token of the "
                "context adds on average (a pooled key per compress-ratio tokens)."
                if pooled
                else ""
            )
            + (f" {indexer_keys}" if indexer_keys else ""),
            text_columns=(1,),
        )
    ] * split
    stage_names = list(MATMUL_STAGES)
    indexed = any("indexer_stage_flops" in r for r in doc["attention"])
    rows = []
    for r in doc["attention"]:
        label = r["label"]
        index = r.get("indexer_stage_flops", {})
        rows.append(
            [r["phase"], label]
            + [human_si(r["stage_flops"][k]) for k in stage_names]
            + ([human_si(index.get("core", 0))] if indexed else [])
            + [
                human_si(r["flops"]),
                human_si(r["elementwise_flops"]),
                human_bytes(r["fused_bytes"]),
                f"{r['arithmetic_intensity_flops_per_byte']:,.1f}",
            ]
        )
    title = "Attention FLOPs per step, all layers (matmul; element-wise apart"
    if any(r["phase"] != "decode" for r in doc["attention"]):  # decode: every key either way
        title += (
            "; a prompt's causal (query, key) pairs only"
            if doc["settings"]["causal"]
            else "; a prompt's every (query, key) pair, not causal (--causal: a causal kernel's)"
        )
    sections.append(
        Section(
            title + ")",
            [
                "phase",
                "impl",
                *stage_names,
                *(["indexer scores (in core)"] if indexed else []),
                "total FLOPs",
                "elementwise",
                "fused bytes",
                "FLOP/byte",
            ],
            rows,
            note=_flops_note(doc) + (_INDEXER_NOTE if indexed else ""),
        )
    )
    sections.append(_forward_section(doc))
    return sections


#: What the attention table's indexer column is (a DSA or CSA model's)
_INDEXER_NOTE = (
    "\nindexer scores (in core): of core, the indexer's scores over every key (or pooled "
    "key); core less it is the attention's own scores and values. The indexer's projections "
    "are in q_proj and kv_proj; JSON attention[].indexer_stage_flops has each stage's share."
)


#: The weights' parts of the forward FLOPs, as the table names them.
_FORWARD_PARTS = {
    "attention_projections": "weights: attention projections",
    "dense": "weights: dense FFN, shared experts, router",
    "experts": "weights: routed experts a token activates",
    "head": "weights: output head",
    "other": "weights: other (hyper-connections)",
}


def _forward_section(doc: dict) -> Section:
    """The whole model's forward FLOPs of one token at the report's seq_len: the weights'
    products by part, attention's over the context, the element-wise rest, beside 2 x the
    active parameters."""
    f, active = doc["forward_flops_per_token"], doc["parameters"]["active"]
    total = f["total_flops"]

    def row(label: str, v: int) -> list[str]:
        return [label, f"{v:,}", human_si(v), f"{100 * v / total:.2f}%"]

    rows = [row(_FORWARD_PARTS[k], v) for k, v in f["weight_flops_by_part"].items() if v]
    rows += [
        row("weights' products", f["weight_flops"]),
        row(f"attention over {f['seq_len']:,} keys (scores and values)", f["attention_flops"]),
        row("element-wise (norms, RoPE, activations)", f["elementwise_flops"]),
        row("total", total),
        ["2 x active parameters (for comparison)", f"{2 * active:,}", human_si(2 * active), ""],
    ]
    impl = f", {f['impl']} MLA" if f["impl"] else ""
    asked, other = doc["settings"].get("impl"), ""
    if asked and f["impl"] and asked != f["impl"]:
        other = (
            f" --impl {asked} does not apply here: this table counts the decode the engines "
            f"run, {f['impl']} MLA."
        )
    keys, state = _forward_clauses(doc["layers"])
    return Section(
        f"Forward FLOPs per token, whole model, at seq_len {f['seq_len']:,}",
        ["part", "FLOPs", "approx.", "share"],
        rows,
        note=(
            f"one token's forward pass attending {f['seq_len']:,} keys (a decode step of batch 1"
            f"{impl}, as the engines run it{keys}): the kernels roofline --scope model "
            "counts. The weights' products are about 2 x the active parameters (a norm's "
            f"weights multiply nothing); attention's grow with the context{state}.{other}"
        ),
    )


#: The keys a layer kind's attention core reads, in the forward note's words.
_FORWARD_KEYS = {
    "sliding": "a sliding layer's window of keys",
    "chunked": "a chunked layer's keys of its own chunk",
    "dsa": "a DSA layer's top-k keys and its indexer's scores over every key",
    "msa": "a block-sparse layer's picked blocks of keys",
    "csa": "a CSA layer's window and the top-k of its pooled keys (its indexer scores every "
    "pooled key)",
    "hca": "an HCA layer's window and every pooled key",
    "swa": "a window-only layer's window",
}


def _forward_clauses(layers: dict[str, Any]) -> tuple[str, str]:
    """The forward note's words on this model's own layer kinds (``report``'s ``layers``):
    which keys its attention layers read, and whether a linear or Mamba layer's state update
    counts with attention."""
    names = [k["attention"] for k in layers["kinds"]] + list(layers["attention"])
    kinds = {part.split("(")[0] for name in names for part in name.split("+")}
    keys = "; ".join(words for kind, words in _FORWARD_KEYS.items() if kind in kinds)
    recurrent = kinds & {"linear", "mamba", "mamba1", "mamba2"}
    state = (
        " (a linear or Mamba layer's state update, which does not, counts there too)"
        if recurrent
        else ""
    )
    return (f"; {keys}" if keys else ""), state


def _mla_default_note(doc: dict[str, Any]) -> str:
    """What an MLA model's default runs in each phase, this model's own: a DSA layer's chunk
    stays ``naive`` (:func:`mlacalc.cost.attention.resolve_impl`), and naive's prompt FLOPs
    equal compressed's only where the table's rows say so."""
    prompt = {r["impl"]: r["flops"] for r in doc["attention"] if r["phase"] == "prefill"}
    same = prompt.get("naive") is not None and prompt.get("naive") == prompt.get("compressed")
    naive = "naive FLOPs, the same as compressed" if same else "naive FLOPs"
    if any(k["kind"] == "dsa" for r in doc["kv_cache"] for k in r["by_kind"]):
        return (
            "MLA default = the compressed latent cache always (with its indexer keys), K/V "
            f"expanded from it for the new tokens in prefill ({naive}) and in a chunk after "
            "a cached prefix (naive too: a DSA layer's queries attend their own top-k keys, "
            "no one prefix to expand), absorbed in decode"
        )
    return (
        "MLA default = the compressed latent cache always, K/V expanded from it for the new "
        f"tokens in prefill ({naive}) and for the cached prefix too in a chunk "
        "(compressed), absorbed in decode"
    )


def _flops_note(doc: dict[str, Any]) -> str:
    """The note under the attention FLOPs table: what fused bytes are, how MLA's default
    runs, and where a linear or Mamba layer's products are counted."""
    parts = ["fused bytes: ideal lower bound (weights, input/output and cache once)"]
    if doc["model"]["variant"] == "mla":
        parts.append(_mla_default_note(doc))
    if any(k["kind"] in STATE_KINDS for r in doc["kv_cache"] for k in r["by_kind"]):
        parts.append(
            "a linear or Mamba layer's input projections count under kv_proj, its "
            "convolution and scan (or delta rule) under core, its output projection under "
            "o_proj"
        )
    return "; ".join(parts) + "."


def _maybe(value: Any, fmt: str, missing: str) -> str:
    return missing if value is None else fmt.format(value)


def _counted_layers(row: dict, split: bool) -> str:
    """The layers one more token adds a row to, with their kinds on a mixed model."""
    n = row["layers_per_token"]
    if not split:
        return f"{n:,}"
    return f"{n:,} ({', '.join(row['layer_kinds_per_token']) or 'none'})"


def _kv_impl_cell(row: dict, doc: dict) -> str:
    """A KV row's implementation, ``(default)`` on the row a server holds where there are
    several (MLA), as the attention table marks its own."""
    many = len(doc["kv_cache"]) > 1
    return f"{row['impl']} (default)" if row["default"] and many else row["impl"]


def _kept_cell(row: dict) -> str:
    """A KV row's tokens kept per layer: one figure, or each kind's where they differ
    (DeepSeek-V4's CSA layers keep 32,896 at 128k, its HCA layers 1,152: the row's own figure
    is one kind's)."""
    kept = {k["kind"]: k["tokens_per_layer"] for k in row["by_kind"]}
    counts = {v for k, v in kept.items() if k not in ("none",) and isinstance(v, int) and v}
    if len(counts) <= 1 or not {"csa", "hca"} & set(kept):
        return f"{row['tokens_per_layer']:,}"
    return "; ".join(f"{v:,} ({k})" for k, v in kept.items() if k in ("csa", "hca", "swa"))


def _per_token_note(doc: dict) -> str:
    r = doc["kv_cache"][0]
    default = next((x for x in doc["kv_cache"] if x["default"]), r)
    if r is not default and r["impl"] == "naive":  # MLA: the first row is the expanded one
        figure = (
            f"{human_bytes(r['bytes_per_token'])}/token naive, K/V expanded; "
            f"{human_bytes(default['bytes_per_token'])}/token the {default['impl']} default's "
            "latent cache"
        )
    else:
        figure = f"{human_bytes(r['bytes_per_token'])}/token"
    kinds = ", ".join(r["layer_kinds_per_token"]) or "no"
    if {"csa", "hca"} & set(r["layer_kinds_per_token"]):  # DeepSeek-V4
        return (
            f"per token: what one more token adds at this seq_len, averaged over the pooling "
            f"({kinds} layers: {figure}): a compressed layer "
            "adds one pooled key per compress-ratio tokens; its window is full: see by kind."
        )
    return (
        f"per token: what one more token adds at this seq_len, a row in each layer still "
        f"keeping every token ({kinds} layers: {figure}); "
        "sliding layers keep their window, linear layers a fixed state: see by kind."
    )
