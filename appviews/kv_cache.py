"""KV cache view: bytes per token and in all, by implementation, over context, per design."""

from __future__ import annotations

from typing import Any

import numpy as np
import plotly.graph_objects as go
import streamlit as st

import mlacalc
from mlacalc.models.loading import ModelConfig
from mlacalc.models.patterns import STATE_KINDS
from mlacalc.models.variants import kept_sparse_note, one_head_shape_note
from mlacalc.report import compare_rows, kind_cells, variant_equivalents
from mlacalc.words.units import counted, human_bytes, human_si
from mlacalc.words.vocab import STANDARD_IMPL, serving_impl

from .common import Scenario, download, show_context_warning, show_table

TITLE = "KV cache"


@st.cache_data(show_spinner=False)
def kv_curves(model: ModelConfig, batch: int, kv_dtype: Any, lengths: tuple) -> dict:
    """Cache bytes over ``lengths`` per implementation: vectorized where the layers are
    alike, one exact ``kv_cache_bytes`` per length where they differ (sliding, chunked,
    linear or DSA layers). A length past the model's ``max_position_embeddings`` is said once
    on the page (:func:`past_positions_caption`), not warned per length to the server's
    console: the exact route is :func:`mlacalc.kv_cache`, whose warnings ride on its result,
    so no process-wide warnings filter is touched (``warnings.catch_warnings`` is not safe
    while another session's script runs in the server's next thread)."""
    impls = ["naive", None] if model.is_mla else [None]
    xs = np.array(lengths)
    curves = {}
    for impl in impls:
        name = str(impl or "latent" if model.is_mla else model.variant)
        try:
            ys = mlacalc.sweep(
                model, "kv_cache_bytes", seq_len=xs, batch=batch, kv_dtype=kv_dtype, impl=impl
            ).tolist()
        except mlacalc.InvalidArgumentError:  # layers of different kinds
            ys = [mlacalc.kv_cache(model, n, batch, kv_dtype, impl).total_bytes for n in lengths]
        curves[name] = ys
    return curves


def past_positions_caption(model: ModelConfig, lengths: tuple) -> str:
    """One sentence for the lengths of the sweep past the model's ``max_position_embeddings``
    (DeepSeek-V3.2's 163,840 in a sweep to 1,048,576 printed 13 warnings to the server's
    console and none on the page); ``""`` where none is."""
    limit = model.max_position_embeddings
    past = [n for n in lengths if limit and n > limit]
    if not past:
        return ""
    return (
        f"{counted(len(past), 'length')} of the curve ({past[0]:,} to {past[-1]:,} tokens) "
        f"{'is' if len(past) == 1 else 'are'} past {model.label}'s max_position_embeddings "
        f"({limit:,}): the cache is counted as the formula extends, beyond the context the "
        "model was trained for."
    )


@st.cache_data(show_spinner=False)
def equivalents(
    model: ModelConfig, seq_len: int, batch: int, kv_dtype: str, kv_heads: int | None
) -> tuple[list[dict], list[str]]:
    """The equivalents' rows, and notes on them (a variant without one; windows dropped)."""
    variants, notes = variant_equivalents(model, kv_heads)
    return compare_rows(variants, seq_len=seq_len, batch=batch, kv_dtype=kv_dtype), notes


def keeps(kind_row: dict) -> str:
    """What one layer of a kind keeps, in words (the table's text column beside its numbers)."""
    kind = kind_row["kind"]
    if kind in STATE_KINDS:  # linear attention, Mamba-2, Mamba-1
        return "a fixed state per sequence"
    if kind == "none":
        return "nothing (no sequence mixer)"
    if kind.startswith(("sliding", "chunked")):
        return f"its window: {kind_row['tokens_per_layer']:,} tokens"
    if kind in ("csa", "hca"):  # DeepSeek-V4: the window and one pooled key per ratio tokens
        return f"its window and pooled keys: {kind_row['tokens_per_layer']:,} rows"
    if kind.startswith("swa"):
        return f"its window: {kind_row['tokens_per_layer']:,} tokens"
    return "every token"


def _state_words(sc: Scenario) -> str:
    """', recurrent state in DTYPE' for a model that keeps one; '' for any other."""
    return f", recurrent state in {sc.state_dtype}" if sc.state_dtype else ""


def render(sc: Scenario) -> None:
    model, device, seq_len, batch, kv_dtype = sc.model, sc.device, sc.seq_len, sc.batch, sc.kv_dtype
    show_context_warning(sc)
    rows = sc.doc["kv_cache"]
    served = (serving_impl("decode"), STANDARD_IMPL)  # the cache a server keeps
    smallest = next(r for r in rows if r["impl"] in served)
    c1, c2, c3 = st.columns(3)
    mixed = len(sc.doc["layers"]["attention"]) > 1
    kinds = ", ".join(smallest["layer_kinds_per_token"]) or "no"
    c1.metric(
        f"per token ({kinds} layers)" if mixed else "per token, all layers",
        human_bytes(smallest["bytes_per_token"]),
        help="What one more token adds at this context: a row in each layer that still keeps "
        "every token (sliding layers keep their window, linear layers a fixed state).",
    )
    c2.metric(f"{seq_len:,} tokens x {batch:,}", human_bytes(smallest["total_bytes"]))
    c3.metric(
        f"of one {device.name}'s memory",
        f"{100 * smallest['total_bytes'] / device.memory_bytes:,.1f}%",
    )
    for note in sc.doc["notes"]:  # report's notes: what these figures are not
        st.info(note)
    label = "latent, as served" if model.is_mla else model.variant.upper()
    st.markdown(
        f"KV cache total ({label}): **{human_bytes(smallest['total_bytes'])}** "
        f"({smallest['total_bytes']:,} bytes)"
    )
    pattern = sc.doc["layers"]
    st.markdown(f"Layer pattern: **{pattern['summary']}**")
    if len(pattern["attention"]) > 1 or bool({"dsa", "msa"} & set(pattern["attention"])):
        show_table(
            [
                {
                    "kind of layer": k["kind"],
                    "layers": k["layers"],
                    "keeps": keeps(k),
                    # the CLI report's cells: "fixed state" for a linear or Mamba layer, "-"
                    # for one without a mixer (numbers here printed "None" and 0 for them)
                    **dict(zip(("bytes/token/layer", "tokens kept per layer"), kind_cells(k))),
                    "bytes": k["bytes"],
                    "total": human_bytes(k["bytes"]),
                }
                for k in smallest["by_kind"]
            ],
            right=("bytes/token/layer", "tokens kept per layer"),
            scope=f"The cache ({label}) by kind of layer, {counted(batch, 'sequence')} of "
            f"{seq_len:,} tokens: a sliding or chunked layer keeps min(seq_len, window) tokens, "
            "a linear or Mamba layer a fixed state per sequence (its recurrent state in the "
            "sidebar's recurrent state dtype, float32 unless bf16 is picked, not the KV dtype; "
            "its convolution window in the KV dtype), "
            "a DSA layer the latent plus its indexer keys, a block-sparse (msa) layer K, V and "
            "its indexer keys, a compressed layer (csa, hca) its window's rows and its pooled keys "
            "(csa: with their indexer keys), its bytes/token/layer averaged over the pooling; "
            "a layer without a sequence mixer (none) nothing.",
        )
    show_table(
        [
            {
                "implementation": r["impl"],
                "elements/token/layer": r["elements_per_token_per_layer"] or None,
                "layers a token adds to": r["layers_per_token"],
                "bytes/token": r["bytes_per_token"],
                "total bytes": r["total_bytes"],
                "total": human_bytes(r["total_bytes"]),
                "x smallest": round(r["ratio_to_smallest"], 2),
            }
            for r in rows
        ],
        scope=f"Whole model: all {model.num_hidden_layers} layers, {counted(batch, 'sequence')} of "
        f"{seq_len:,} tokens, KV in {kv_dtype}{_state_words(sc)}; per token: the layers one "
        "more token adds a "
        "row to (elements and bytes of one such layer; no elements column where the layers' rows "
        "differ: see by kind).",
    )
    download(rows, f"{model.name}-kv-cache", "dl_kv")
    log_axes = st.checkbox("log axes", value=True, key="kv_log")
    lengths = tuple(
        int(x) for x in np.unique(np.geomspace(1024, max(2**20, seq_len), 48).astype(int))
    )
    curves = kv_curves(model, batch, sc.cache_layout, lengths)
    past = past_positions_caption(model, lengths)
    fig = go.Figure()
    for label, ys in curves.items():
        fig.add_trace(
            go.Scatter(
                x=lengths,
                y=[y / 2**30 for y in ys],
                mode="lines",
                # "MLA latent", "MLA naive"; a one-curve design by its name ("GQA", not "GQA gqa")
                name=f"{model.variant.upper()} {label}" if model.is_mla else label.upper(),
            )
        )
    fig.add_trace(
        go.Scatter(
            x=[lengths[0], lengths[-1]],
            y=[device.memory_bytes / 2**30] * 2,
            mode="lines",
            name=f"{device.name} memory",
            line=dict(dash="dash", color="black"),
        )
    )
    fig.update_layout(
        xaxis_title="context length (tokens)",
        title=f"KV cache of the whole model (all layers), batch {batch:,}, {kv_dtype}"
        + _state_words(sc),
        yaxis_title="KV cache, GiB",
        height=380,
        margin=dict(t=50, b=40),
    )
    fig.update_yaxes(exponentformat="power")
    if log_axes:
        fig.update_xaxes(type="log", dtick=1)  # a label per decade, not per minor tick
        fig.update_yaxes(type="log", dtick=1)
    st.plotly_chart(fig, width="stretch", key="kv_chart")
    if past:
        st.caption(past)
    st.markdown("**The same model as MHA, GQA, MQA and MLA** (everything but the attention kept)")
    kv_heads = None if model.num_attention_heads % 8 else 8
    try:
        eq, notes = equivalents(model, seq_len, batch, kv_dtype, kv_heads)
        show_table(
            [
                {
                    "design": r["display_name"],
                    "KV bytes / token": r["kv_bytes_per_token"],
                    "KV total": human_bytes(r["kv_total_bytes"]),
                    "total params": human_si(r["total_params"]),
                    "decode FLOPs": human_si(r["decode_flops"]),
                }
                for r in eq
            ],
            scope=f"Whole model, KV in {kv_dtype}; decode FLOPs: attention of all layers, "
            f"one step of {counted(batch, 'sequence')}. The model's own design is the model itself."
            + (f" {one_head_shape_note(model)}." if one_head_shape_note(model) else "")
            + (f" {kept_sparse_note(model)}." if kept_sparse_note(model) else "")
            + "".join(f" {n}" for n in notes),
        )
        download(eq, f"{model.name}-equivalents", "dl_eq")
    except mlacalc.MlacalcError as exc:
        st.info(f"No equivalents: {exc}")
