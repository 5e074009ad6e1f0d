"""FLOPs view: attention FLOPs by stage and implementation, the absorption trade, formulas."""

from __future__ import annotations

import plotly.graph_objects as go
import streamlit as st

import mlacalc
from mlacalc.cost.compressed import kind_counts
from mlacalc.cost.symbolic import V4_VARIANTS
from mlacalc.models.architecture import layer_pattern
from mlacalc.timemodel.insight import absorption_crossover
from mlacalc.words.units import counted, human_si
from mlacalc.words.vocab import MATMUL_STAGES

from .common import Scenario, decade_ticks, download, show_context_warning, show_table

TITLE = "FLOPs"
#: kinds of layer the variant's formulas describe as they are
_PLAIN = ("full", "mla", "dsa")


def formula_variant(model) -> str:
    """The formula variant of ``model``'s layers: ``dsa`` where they are DeepSeek's sparse
    attention (MLA with an indexer: DeepSeek-V3.2, GLM-5.1), ``v4`` where they are
    DeepSeek-V4's (csa, hca, swa: a variant each), else the model's variant."""
    kinds = {k.attention for k in layer_pattern(model).layers}
    if kinds and kinds <= set(V4_VARIANTS):
        return "v4"
    return "dsa" if kinds == {"dsa"} else model.variant


def v4_kinds(model) -> tuple[str, ...]:
    """DeepSeek-V4's kinds of layer in ``model``, in the order of its layers."""
    return tuple(kind_counts(model))


def plain_form_caveat(model) -> str:
    """A line saying the formulas are the plain layer's where the model's layers are not
    (DeepSeek-V4's csa / hca, MiniMax-M3's msa, sliding windows, MiMo's own value width);
    "" where they describe every layer."""
    if formula_variant(model) == "v4":  # each kind's formulas are its own (below)
        return ""
    plain = _PLAIN if formula_variant(model) == "dsa" else ("full", "mla")
    kinds = sorted({k.label for k in layer_pattern(model).layers if k.attention not in plain})
    if not kinds and not (model.v_head_dim and not model.is_mla):
        return ""
    parts = [f"{', '.join(kinds)} layers"] if kinds else []
    if model.v_head_dim and not model.is_mla:
        parts.append(f"value heads of their own width (d_v = {model.v_head_dim})")
    return (
        f"These are a plain {model.variant.upper()} layer's formulas, every key attended: "
        f"{model.label}'s {' and '.join(parts)} are counted by their own rules (the numbers "
        "above), not by these."
    )


@st.cache_data(show_spinner=False)
def formulas_latex(q_lora: bool, variant: str, kinds: tuple[str, ...] = ()) -> dict:
    import sympy as sp

    if variant == "v4":  # DeepSeek-V4: a cache and a decode step's FLOPs of each kind
        out = {}
        for kind in kinds:
            out[f"{kind} layers: KV cache bytes (B sequences of S tokens)"] = mlacalc.formula(
                "kv_cache_bytes", kind
            )
            scores = " and the indexer's scores" if kind == "csa" else ""
            out[f"{kind} layers: decode core FLOPs (the attention{scores})"] = mlacalc.formula(
                "attention_flops", kind, phase="decode", stage="core"
            )
        return {k: sp.latex(v) for k, v in out.items()}
    out = {"KV cache elements per token per layer": mlacalc.formula("kv_cache_elements", variant)}
    if variant == "dsa":  # MLA with an indexer: the core over min(S, k) keys
        out["decode core FLOPs, absorbed (the indexer's scores over every key, MLA over k)"] = (
            mlacalc.formula(
                "attention_flops", "dsa", "absorbed", phase="decode", stage="core", q_lora=q_lora
            )
        )
        out["decode FLOPs, absorbed (all stages, the indexer's projections too)"] = mlacalc.formula(
            "attention_flops", "dsa", "absorbed", phase="decode", q_lora=q_lora
        )
    elif variant == "mla":
        out["decode core FLOPs, absorbed"] = mlacalc.formula(
            "attention_flops", "mla", "absorbed", phase="decode", stage="core", q_lora=q_lora
        )
        out["decode core FLOPs, over expanded K/V (naive, compressed)"] = mlacalc.formula(
            "attention_flops", "mla", "naive", phase="decode", stage="core", q_lora=q_lora
        )
        out["decode FLOPs, absorbed (all stages)"] = mlacalc.formula(
            "attention_flops", "mla", "absorbed", phase="decode", q_lora=q_lora
        )
    else:
        out["decode FLOPs"] = mlacalc.formula("attention_flops", variant, phase="decode")
        out["prefill FLOPs, causal"] = mlacalc.formula(
            "attention_flops", variant, phase="prefill", causal=True
        )
    return {k: sp.latex(v) for k, v in out.items()}


def render(sc: Scenario) -> None:
    model = sc.model
    rows = sc.doc["attention"]
    show_context_warning(sc)
    phase = st.radio("phase", ["decode", "prefill"], horizontal=True, key="flops_phase")
    shown = [r for r in rows if r["phase"] == phase]
    show_table(
        [
            {
                # the report's name for the row: the MLA default's prefill runs the naive
                # op sequence over the latent cache ("naive, latent cache (default)")
                "impl": r["label"],
                # the summary figures first: a wide table scrolls, these stay in view
                "total FLOPs": r["flops"],
                "FLOP/byte": round(r["arithmetic_intensity_flops_per_byte"], 1),
                "fused bytes": r["fused_bytes"],
                "elementwise": r["elementwise_flops"],
            }
            for r in shown
        ],
        scope=f"Whole model: attention of all {model.num_hidden_layers} layers, one {phase} step "
        f"of {counted(sc.batch, 'sequence')} at {sc.seq_len:,} tokens; total FLOPs: the matmuls "
        "(element-wise FLOPs apart, in their own column); fused bytes: ideal lower bound.",
    )
    # the stages in a table of their own, in SI units, so every stage fits the page (exact
    # integers in the downloads); eleven columns of 22-digit integers scrolled past o_proj
    # the stages some implementation shown runs: a GQA model has no kv_up or absorb stage,
    # whose empty columns and legend entries a trial found
    stages = [k for k in MATMUL_STAGES if any(r["stage_flops"].get(k) for r in shown)]
    stage_rows = [
        {"impl": r["label"], **{k: human_si(r["stage_flops"][k]) for k in stages}} for r in shown
    ]
    st.dataframe(
        stage_rows,
        hide_index=True,
        width="stretch",
        column_config={k: st.column_config.TextColumn(alignment="right") for k in stages},
    )
    st.caption(
        "Matmul FLOPs by stage (SI units: G = 10^9, T = 10^12, P = 10^15; exact integers in "
        "the CSV / JSON below)."
    )
    download(shown, f"{model.name}-{phase}-flops", "dl_flops")
    fig = go.Figure()
    for stage in stages:
        fig.add_trace(
            go.Bar(
                name=stage,
                x=[r["label"].replace(" (default)", "*") for r in shown],
                y=[float(r["stage_flops"][stage]) for r in shown],  # charts take floats
            )
        )
    # a linear axis hides the bars far below the tallest (compressed 2.15 P beside others of
    # a few percent of it): log by default there
    totals = [sum(float(v) for v in r["stage_flops"].values()) for r in shown]
    spread = max(totals) / max(min(totals), 1.0) if totals else 1.0
    flops_log = st.checkbox("log scale (stages side by side)", value=spread > 10, key="flops_log")
    fig.update_layout(
        barmode="group" if flops_log else "stack",
        title=f"Attention FLOPs of one {phase} step, all layers, batch {sc.batch:,}",
        yaxis_title=f"{phase} FLOPs, all layers",
        height=360,
        margin=dict(t=50),
    )
    if flops_log:
        fig.update_yaxes(type="log", **decade_ticks())
    else:
        fig.update_yaxes(type="linear", exponentformat="SI")
    st.plotly_chart(fig, width="stretch", key="flops_chart")
    default = next((r["label"] for r in shown if r["default"]), None)
    if default and default.endswith(" (default)"):
        st.caption(
            f"{default.replace(' (default)', '*')}: {default}, the model's default implementation."
        )
    if model.is_mla:
        by_impl = {r["impl"]: r for r in shown if not r["default"]}
        ratio = by_impl["absorbed"]["stage_flops"]["core"] / by_impl["naive"]["stage_flops"]["core"]
        cross = absorption_crossover(model, sc.seq_len)
        c1, c2 = st.columns(2)
        c1.metric("absorbed / naive attention-core FLOPs", f"{ratio:.2f}x")
        if cross.value is None:  # 2 d_c < d_nope + d_v: a negative q* is no answer
            c2.metric("absorption stops paying above", "never", help=cross.note)
            c2.caption("absorbed costs fewer FLOPs than compressed at every query count")
        else:
            c2.metric("absorption stops paying above", f"{cross.value:,.1f} query tokens")
    st.markdown("**Formulas** (sympy; symbols as in the docs: B batch, S keys, L layers, ...)")
    if formula_variant(model) == "dsa":
        st.caption(
            f"{model.label} is DSA: k = index_topk keys the indexer picks a query, n_i and d_i "
            "its heads and their width (docs/glossary.md); `mlacalc formula ... --variant dsa`"
        )
    if formula_variant(model) == "v4":
        st.caption(
            f"{model.label} is DeepSeek-V4: each kind of layer has its own formulas, L its layers "
            "of that kind; d_h the one K = V head's width, W the window, m the layer's "
            "compression rate, d_o and g the output's low rank and groups, k, n_i, d_i a csa "
            "layer's top-k and indexer (docs/deepseek-v4.md); `mlacalc formula ... --variant "
            + " | ".join(v4_kinds(model))
            + "`"
        )
    other = plain_form_caveat(model)
    if other:
        st.caption(other)
    variant = formula_variant(model)
    for label, tex in formulas_latex(
        model.q_lora_rank is not None, variant, v4_kinds(model) if variant == "v4" else ()
    ).items():
        st.caption(label)
        st.latex(tex)
