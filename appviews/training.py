"""Training view: one training step of the sidebar's model (FLOPs by stage, activations per
recompute policy, memory per GPU, step time on a layout) and absorbed against expanded MLA."""

from __future__ import annotations

import plotly.graph_objects as go
import streamlit as st

from mlacalc.models.loading import ModelConfig
from mlacalc.render import human_seconds
from mlacalc.training.cost import (
    absorption_table,
    fp8_without_fp8_units,
    state_label,
    training_cost,
)
from mlacalc.training.flops import RECOMPUTE_POLICIES, TRAINING_STAGES
from mlacalc.training.layout_search import bound_of, training_search
from mlacalc.training.lora import BASE_DTYPES, NF4_BYTES_PER_PARAM, TARGETS
from mlacalc.training.memory import OPTIMIZERS, PRECISIONS, SWIGLU
from mlacalc.words.errors import MlacalcError
from mlacalc.words.units import human_bytes, human_si

from .common import Scenario, context_text, download, show_table

TITLE = "Training"


@st.cache_data(show_spinner=False)
def _cost(model: ModelConfig, hardware: str, **kw) -> dict:
    return training_cost(model, hardware=hardware, **kw).to_dict()


#: the inputs above that a layout search holds fixed (the rest it searches)
_FIXED = ("impl", "swiglu", "optimizer", "precision", "comm_sms", "overlap", "lora_rank",
          "lora_targets", "base_dtype")  # fmt: skip


@st.cache_data(show_spinner="Searching the layouts ...")
def _search(model: ModelConfig, hardware: str, gpus: int, top: int, **kw) -> dict:
    """A layout search's rows, counts and advice (the CLI's ``train-search``)."""
    s = training_search(model, hardware, gpus, top=top, **kw)
    rows = []
    for i, c in enumerate(s.ranked):
        lay, (bound, share), ties = c.layout, bound_of(c), s.ties(i)
        zero = f"{c.zero}" + (f" (or {', '.join(map(str, ties))})" if ties else "")
        rows.append({
            "tp": lay.tp, "cp": lay.cp, "pp": lay.pp, "dp": lay.dp, "ep": lay.ep,
            "ZeRO": zero, "recompute": c.recompute, "micro-batch": lay.micro_batch,
            "step (s)": round(c.time.step_s, 3), "tokens/s/GPU": round(c.tokens_per_s_per_gpu),
            "MFU": f"{c.mfu:.1%}", "memory/GPU": human_bytes(c.memory_per_gpu),
            "bound": f"{bound} ({share:.0%})",
        })  # fmt: skip
    return {"rows": rows, **{k: v for k, v in s.to_dict().items() if k != "ranked"}}


def _search_section(sc: Scenario, kw: dict) -> None:
    """Find a layout: the fastest layouts of N GPUs that fit, at the sequence length, global
    batch and fixed settings above (``mlacalc train-search``)."""
    with st.expander("Find a layout: which layouts of N GPUs fit, fastest first"):
        c = st.columns(4)
        gpus = int(c[0].number_input("GPUs", 1, 1 << 16, 8, key="tr_search_gpus"))
        batch = int(c[1].number_input("global batch", 1, 1 << 24, 64, key="tr_search_gb"))
        top = int(c[2].number_input("layouts shown", 1, 100, 5, key="tr_search_top"))
        if not c[3].button("Search", key="tr_search_go"):
            st.caption(
                "Every tp (within a node, or an NVLink domain of several: GB200's 72) x cp x pp "
                "x dp x ep, ZeRO 0-3, recompute policy and "
                "micro-batch splitting the global batch, each priced as this tab prices one, "
                "at the sequence length above; the precision, optimizer, MLA path, SwiGLU, "
                "overlap, SMs and LoRA inputs above held fixed."
            )
            return
        fixed = {k: kw[k] for k in _FIXED if kw.get(k) is not None}
        try:
            r = _search(sc.model, sc.hardware, gpus, top, global_batch=batch,
                        seq_len=kw["seq_len"], **fixed)  # fmt: skip
        except MlacalcError as exc:
            st.error(str(exc))
            return
        why = (
            ", ".join(
                f"{n:,} {k}" if k.startswith("refused") else f"{n:,} on the {k}"
                for k, n in r["not_fit"].items()
            )
            or "none"
        )
        if r["advice"]:
            st.warning(f"No layout fits: {r['advice']}.", icon=":material/memory:")
        else:
            show_table(r["rows"], right=("memory/GPU",))
        st.caption(
            f"{r['tried']:,} layouts tried, {r['fitted']:,} fit the "
            f"{human_bytes(r['usable_memory_bytes'])} usable of a {r['hardware']}, "
            f"{r['tried'] - r['fitted']:,} do not ({why}); ranked by step time at the global "
            "batch; a layout that differs from a row only by its ZeRO stage and takes the same "
            "step is folded into it (ZeRO '3 (or 1, 2)': the row's stage needs the least "
            "memory); bound: the part of the step that takes the most of it (docs/training.md, "
            "Layout search)."
        )


def _label(key: str, d: dict) -> str:
    """A memory row's name, the CLI's (:func:`~mlacalc.training.cost.state_label`)."""
    return state_label(key, d["optimizer"], d["precision"], d["lora_rank"], d["base_dtype"],
                       d["nf4_params_per_gpu"])  # fmt: skip


@st.cache_data(show_spinner=False)
def _absorption(model: ModelConfig, micro_batch: int) -> list[dict]:
    ranks = sorted({64, 128, 256, model.kv_lora_rank})
    return absorption_table(model, (1024, 4096, 16384, 65536), micro_batch, ranks)


def step_rows(t: dict, overlap: bool) -> list[dict]:
    """The step's parts as the step table shows them: each part's seconds, what it adds to the
    step (the rows that add sum to the step: the micro-batches, the bubble, the exposed
    data-parallel traffic, the optimizer) and, in words, how the others enter it (inside each
    micro-batch, or overlapped and so added only where longer). The data-parallel traffic is
    shown whole and apart from its exposed part, the one that adds."""
    n = t["layout"]["micro_batches"]
    each = f"inside each micro-batch (x {n:,})"
    comm = "overlaps the compute: adds where longer" if overlap else each
    rows = [
        ("forward", "forward_s", False, each),
        ("backward", "backward_s", False, each),
        ("recompute (policy)", "recompute_s", False, each + "; flash scores: in backward"),
        ("tensor-parallel comm", "tp_comm_s", False, comm),
        ("expert-parallel comm", "ep_comm_s", False, comm),
        ("pipeline comm", "pp_comm_s", False, comm),
        ("context-parallel ring", "cp_comm_s", False, "behind the attention blocks"),
        ("context-parallel, exposed", "cp_exposed_s", False, comm + ": what they cannot hide"),
        ("micro-batch (slowest stage)", "micro_batch_s", True, f"adds, x {n:,}"),
        ("pipeline bubble", "bubble_s", True, "adds: the other stages' micro-batches"),
        ("data-parallel traffic", "dp_comm_s", False, "overlaps backward; next row adds"),
        ("data-parallel, exposed", "dp_exposed_s", True, "adds: what backward cannot hide"),
        ("optimizer step", "optimizer_s", True, "adds"),
        ("step", "step_s", False, "the sum of the rows that add"),
    ]
    out = []
    for name, key, adds, how in rows:
        if key.startswith("cp_") and t["layout"].get("cp", 1) == 1:
            continue
        added = n * t[key] if key == "micro_batch_s" else t[key]
        out.append(
            {
                "part": name,
                "seconds": t[key],
                "adds to the step": human_seconds(added) if adds else "",
                "in the step": how,
            }
        )
    return out


def _box_words(note: str) -> str:
    """A library note in the tab's words: the stage split's field as the box that sets it."""
    return note.replace("stage_layers", "the pipeline stage layers box")


def stage_rows(t: dict) -> list[dict]:
    """Each pipeline stage's micro-batch as the stages table shows it."""
    return [
        {
            "stage": f"{st['index']}" + (" (slowest)" if st["index"] == t["slowest_stage"] else ""),
            "layers": st["layers"],
            "MoE layers": st["moe_layers"],
            "forward (s)": st["forward_s"],
            "backward (s)": st["backward_s"],
            "micro-batch (s)": st["micro_batch_s"],
        }
        for st in t["stages"]
    ]


def _flops_figure(d: dict) -> go.Figure:
    f = d["flops_per_micro_batch"]
    fig = go.Figure(
        [
            go.Bar(
                name=name, x=list(TRAINING_STAGES), y=[f[part][s] / 1e12 for s in TRAINING_STAGES]
            )
            for part, name in (
                ("forward", "forward"),
                ("backward", "backward"),
                # the flash backward recomputes the scores under any policy (timed in backward)
                ("recompute", "recomputed (flash scores + policy)"),
            )
        ]
    )
    fig.update_layout(
        barmode="stack",
        title="FLOPs of one micro-batch by stage",
        yaxis_title="TFLOPs",
        height=320,
        margin=dict(t=50, b=40),
    )
    return fig


def _inputs(m: ModelConfig) -> dict:
    c = st.columns(5)
    kw = {
        "seq_len": c[0].number_input("sequence length", 128, 1 << 20, 4096, 1024, key="tr_seq"),
        "micro_batch": c[1].number_input("micro-batch", 1, 4096, 1, key="tr_mb"),
        "impl": c[2].radio(
            "MLA path",
            ("expanded", "absorbed") if m.is_mla else ("expanded",),
            key="tr_impl",
            horizontal=True,
        ),
        "recompute": c[3].selectbox("recompute", RECOMPUTE_POLICIES, key="tr_recompute"),
        "swiglu": c[4].selectbox(
            "SwiGLU",
            list(SWIGLU),
            key="tr_swiglu",
            help="fused (Megatron-LM, TransformerEngine): saves the [gate, up] output and the "
            "product; unfused (eager PyTorch): also SiLU(gate)",
        ),
    }
    c = st.columns(7)  # the virtual stages beside pp
    for col, name in zip((*c[:3], *c[4:]), ("tp", "cp", "pp", "dp", "ep")):
        kw[name] = col.number_input(
            name,
            1,
            1 << 16,
            1,
            key=f"tr_{name}",
            help="context-parallel ranks: the sequence split into 2 cp chunks, two a rank, "
            "K and V passed around a ring"
            if name == "cp"
            else None,
        )
    # the box follows micro-batch x dp (one micro-batch a rank) until a value is typed in it
    follow, state = int(kw["micro_batch"] * kw["dp"]), st.session_state
    if state.get("tr_gb") in (None, state.get("tr_gb_follows")):
        state["tr_gb"] = follow
    state["tr_gb_follows"] = follow
    kw["virtual_stages"] = c[3].number_input(
        "virtual stages",
        1,
        1 << 10,
        1,
        key="tr_vp",
        help="Megatron-LM's interleaved 1F1B: layer chunks a pipeline stage holds, placed "
        "round-robin (pp x v dividing the layers); the bubble / v, v x the pipeline's sends",
    )
    kw["global_batch"] = c[6].number_input(
        "global batch (sequences)",
        1,
        1 << 24,
        key="tr_gb",
        help="sequences a step, a multiple of micro-batch x dp; it follows micro-batch x dp "
        "(one micro-batch a rank) until set",
    )
    c = st.columns(5)
    kw["optimizer"] = c[0].selectbox("optimizer", list(OPTIMIZERS), key="tr_opt")
    kw["precision"] = c[1].selectbox("precision", list(PRECISIONS), key="tr_prec")
    zero = c[2].selectbox("ZeRO stage", (0, 1, 2, 3), index=1, key="tr_zero")
    kw["zero"] = None if zero == 1 else zero  # the default, not said to shard nothing at dp 1
    kw["comm_sms"] = c[3].number_input(
        "SMs for communication",
        0,
        1024,
        0,
        key="tr_comm_sms",
        help="SMs per GPU kept for communication kernels (DeepSeek-V3: 20 of 132)",
    )
    kw["overlap"] = c[4].checkbox("overlap communication", key="tr_overlap")
    c = st.columns(5)
    rank = c[0].number_input(
        "LoRA rank (0: every weight trains)",
        0,
        1 << 16,
        0,
        key="tr_lora",
        help="adapters of this rank on frozen weights (docs/training.md, LoRA fine-tuning)",
    )
    kw["lora_rank"] = int(rank) or None
    targets = c[1].selectbox("LoRA targets", list(TARGETS), key="tr_lora_targets")
    kw["lora_targets"] = targets if rank or targets != "attention-mlp" else None  # as left
    kw["base_dtype"] = c[2].selectbox(
        "LoRA base weights",
        list(BASE_DTYPES),
        key="tr_base_dtype",
        help="compute: the frozen base in the compute dtype; nf4: QLoRA, the linear layers' "
        f"weights in 4-bit NormalFloat ({NF4_BYTES_PER_PARAM * 8:.3f} bits with the block "
        "scales), dequantized for "
        "each pass",
    )
    kw["stage_layers"] = (
        c[3]
        .text_input(
            "pipeline stage layers",
            "",
            key="tr_stage_layers",
            placeholder="even split",
            help="layers of each pipeline stage: pp counts (7,8,8,7) or FIRST,..,LAST (7,..,7: "
            "the stages between split the rest evenly); empty: an even split, the first "
            "L mod pp stages one layer more",
        )
        .strip()
        or None
    )
    return {k: (int(v) if isinstance(v, float) else v) for k, v in kw.items()}


def render(sc: Scenario) -> None:
    m = sc.model
    kw = _inputs(m)
    try:
        d = _cost(m, sc.hardware, **kw)
    except MlacalcError as exc:
        st.error(str(exc))
        return
    f = d["flops_per_micro_batch"]
    for said in d["warnings"]:  # inputs that mean less than they say, as the CLI warns
        st.warning(said, icon=":material/warning:")
    beyond = context_text(m, kw["seq_len"])
    if beyond:
        st.warning(beyond, icon=":material/warning:")
    if kw["precision"] == "fp8-mixed" and "fp8" not in sc.device.peak_flops_per_s:
        st.warning(
            fp8_without_fp8_units(sc.device.name, kw["optimizer"]) + ".", icon=":material/memory:"
        )
    if d["fits"] is False:
        st.warning(
            f"A GPU's share, {human_bytes(d['memory_per_gpu'])}, does not fit in the "
            f"{human_bytes(d['usable_memory_bytes'])} usable of a {sc.device.name}'s "
            f"{human_bytes(d['device_memory_bytes'])} (memory reserve {d['memory_reserve']:.4g}): "
            f"{d['fit_advice']}.",
            icon=":material/memory:",
        )
    k = st.columns(4)
    k[0].metric("model FLOPs per token", human_si(d["model_flops_per_token"]))
    k[1].metric("memory per GPU", human_bytes(d["memory_per_gpu"]))
    if d["time"] is not None:
        # a deployment that does not fit has no step: its time is what it would take, said so
        # and without a delta arrow that reads as a result
        if_fit = "" if d["fits"] is not False else ", if it fit"
        k[2].metric(
            f"step on {d['layout']['gpus']:,} x {sc.device.name}{if_fit}",
            f"{d['time']['step_s']:,.2f} s",
        )
        per_gpu = f"{d['tokens_per_s_per_gpu']:,.0f} tokens/s/GPU"
        if d.get("gpu_hours_per_trillion_tokens"):  # the figure published runs quote
            hours = (
                f"; {d['gpu_hours_per_trillion_tokens'] / 1e3:,.1f}K GPU-hours a trillion "
                f"tokens{if_fit}"
            )
        else:
            hours = ""
        # MFU counts the model's FLOPs (the same under every path), HFU the executed ones
        hfu = f"HFU {d['hfu']:.1%} (executed FLOPs, recomputation included)"
        if d["lora_rank"]:  # the LoRA step's own FLOPs: its frozen weights take no gradient
            hfu += (
                "; MFU of the LoRA step's model FLOPs (forward, input gradients, the adapters'"
                " gradients; no weight gradients for the frozen weights)"
            )
        if if_fit:
            k[3].metric(f"MFU{if_fit}", f"{d['mfu']:.1%}")
            k[3].caption(f"{hfu}; {per_gpu}{if_fit}{hours}")
        else:
            k[3].metric("MFU", f"{d['mfu']:.1%}", per_gpu, delta_color="off")
            k[3].caption(hfu + hours)
    st.plotly_chart(_flops_figure(d), key="tr_flops_chart", width="stretch")
    show_table(
        [
            {
                "stage": s,
                "forward": f["forward"][s],
                "backward": f["backward"][s],
                "recomputed": f["recompute"][s],
            }
            for s in TRAINING_STAGES
        ],
        scope="Matmul FLOPs of one micro-batch, whole model; causal pairs; "
        + (
            "LoRA: backward = the frozen weights' input gradients alone (as many FLOPs as their "
            "forward), the adapters' input and weight gradients and the attention core's (twice "
            "theirs); "
            if d["lora_rank"]
            else "backward = 2 x forward; "
        )
        + "recomputed: the flash backward's scores and the recompute policy.",
    )
    show_table(
        [{"block": b, "bytes per layer": v} for b, v in d["activation_bytes_per_layer"].items()]
        + [
            {
                "block": "one micro-batch, whole model",
                "bytes per layer": d["activation_bytes_per_micro_batch"],
            }
        ],
        scope="Activations saved for backward (exact for one GPU holding the layer, run with "
        "fused kernels: FlashAttention, fused norms and RoPE, the SwiGLU as chosen above; Hugging "
        "Face's unfused layers save more, docs/training.md).",
    )
    show_table(
        [{"part": _label(p, d), "bytes": round(v)} for p, v in d["states_per_gpu"].items()]
        + [{"part": "activations in flight", "bytes": round(d["activation_bytes_per_gpu"])}],
        scope=f"Memory per GPU: {human_si(d['params_per_gpu'])} parameters per GPU"
        + (
            f"; LoRA rank {d['lora_rank']} on {d['lora_targets']}: "
            f"{human_si(d['trainable_params_per_gpu'])} of adapters, trainable, and "
            f"{human_si(d['base_params_per_gpu'])} of the model's, frozen in "
            + (
                f"the compute dtype, {human_si(d['nf4_params_per_gpu'])} linear-layer weights "
                "in NF4 (QLoRA)"
                if d["base_dtype"] == "nf4"
                else "the compute dtype"
            )
            + " (no gradients, master copy or optimizer states)."
            if d["lora_rank"]
            else "."
        ),
    )
    if d["time"] is not None:
        t = d["time"]
        show_table(
            step_rows(t, kw["overlap"]),
            right=("adds to the step",),
            whole=True,
            scope="One step: the rows with a figure under 'adds to the step' sum to it; the "
            "others are inside a micro-batch or overlapped. A prediction of the kernel time "
            "model and the link model "
            f"(profile {t['profile']}: {t['calibration']}; benchmarks/bench_training.py gives "
            "its error on published runs)"
            + (f"; {_box_words(d['step_layers_note'])}." if d.get("step_layers_note") else "."),
        )
        if len(t["stages"]) > 1:
            show_table(
                stage_rows(t),
                whole=True,
                scope="Pipeline stages: a micro-batch on one GPU of each, timed with its own "
                "layers (the embedding on the first, the output head on the last); the slowest "
                "sets the pace, the others make the bubble.",
            )
    if m.is_mla:
        st.markdown(
            "**Absorbed against expanded training** (absorbed / expanded with kv_up recompute, "
            "at the model's latent width and narrower ones)"
        )
        show_table(
            [
                {
                    "d_c": r["kv_lora_rank"],
                    "seq_len": r["seq_len"],
                    "core FLOPs": round(r["core_ratio"], 2),
                    "total FLOPs": round(r["flops_ratio"], 2),
                    "activations": round(r["activations_ratio"], 2),
                }
                for r in _absorption(m, kw["micro_batch"])
            ]
        )
    download(d, f"{m.name}-training", "dl_training")
    _search_section(sc, kw)
