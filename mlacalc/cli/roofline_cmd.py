"""`mlacalc roofline`: roofline time of an attention layer or a model step."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

import click

from mlacalc.cli.common import (
    IMPL_CHOICE,
    KV_DTYPE,
    MODE_CHOICE,
    PHASE_CHOICE,
    SCOPE_CHOICE,
    SIZE,
    W_DTYPE,
    Section,
    check_causal,
    check_context,
    check_impl,
    check_q_len,
    emit,
    format_option,
    given,
    load,
    load_profile_option,
    note,
    phases,
    profile_option,
    recurrent_state_check,
    serving_engine_option,
    set_option,
    size_text,
    state_dtype_option,
    warn,
)
from mlacalc.cost.engine import attention_cost
from mlacalc.cost.families import recurrent_state_dtype
from mlacalc.cost.model_step import step_kernels
from mlacalc.cost.quant import checkpoint_kv_note
from mlacalc.hardware.catalogue import load_hardware
from mlacalc.models.loading import beyond_positions
from mlacalc.render import human_bytes, human_si
from mlacalc.report import attention_kind_labels
from mlacalc.timemodel.device import device_figures
from mlacalc.timemodel.mla_geometry import MLA_GEOMETRY_SAID, mla_geometry_note
from mlacalc.timemodel.mla_time import WALK_VARIANT
from mlacalc.timemodel.predict import MMHA_RUNS_AS, MMHA_WORDS
from mlacalc.words import defaults as D
from mlacalc.words.dtypes import resolve_kv_layout, with_state_dtype
from mlacalc.words.kernels import UNDERFILLED_RATIO
from mlacalc.words.vocab import MLA_IMPLEMENTATIONS
from mlacalc.words.vocab import ROOFLINE_SCHEMA as SCHEMA


class ImplList(click.ParamType):
    """``--impl``: one implementation, several (``absorbed,compressed``) or ``all`` (every MLA
    implementation, side by side in one call)."""

    name = "IMPL[,IMPL...]|all"

    def convert(self, value, param, ctx):
        if isinstance(value, list):
            return value
        text = str(value).strip()
        if text.lower() == "all":
            return ["all"]
        names = [IMPL_CHOICE.convert(v.strip(), param, ctx) for v in text.split(",")]
        if len(set(names)) != len(names):
            self.fail(f"{text!r} names an implementation twice", param, ctx)
        return names


@click.command("roofline")
@click.argument("model")
@click.option(
    "--hardware",
    "-H",
    "hardware",
    required=True,
    help="Device: a catalogue name (mlacalc list --hardware), a YAML file or measured:<set>.",
)
@click.option("--phase", type=PHASE_CHOICE, default=D.ROOFLINE_PHASE, show_default=True)
@click.option(
    "--seq-len",
    "-s",
    type=SIZE,
    default=size_text(D.ROOFLINE_SEQ_LEN),
    show_default=True,
)
@click.option("--batch", "-b", type=SIZE, default=D.BATCH, show_default=True)
@click.option("--q-len", type=SIZE, default=None, help="New tokens per sequence for --phase chunk.")
@click.option(
    "--impl",
    type=ImplList(),
    default=None,
    help="MLA implementation (default: serving default); several, comma-separated, or 'all': "
    "their tables and a side-by-side comparison in one call. Choices: "
    + ", ".join(IMPL_CHOICE.choices)
    + ".",
)
@click.option(
    "--mode",
    type=MODE_CHOICE,
    default=D.MODE,
    show_default=True,
    help="fused: ideal kernels; unfused: the op-by-op PyTorch sequence.",
)
@click.option(
    "--scope",
    type=SCOPE_CHOICE,
    default=D.SCOPE,
    show_default=True,
    help="One attention layer, or a whole forward step.",
)
@click.option(
    "--layer-kind",
    default=None,
    help="With --scope attention_layer, a model whose layers differ: the kind of layer to "
    "time (DeepSeek-V4: hca or csa; default: its first layer's kind).",
)
@click.option("--dtype", type=W_DTYPE, default=D.DTYPE, show_default=True, help="Compute dtype.")
@click.option(
    "--weight-dtype",
    type=W_DTYPE,
    default=None,
    help="Weight dtype (default: as a quantized checkpoint stores them, else --dtype).",
)
@click.option(
    "--kv-dtype", type=KV_DTYPE, default=None, help="KV dtype or layout (default: --dtype)."
)
@click.option(
    "--calibrate",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    metavar="JSON",
    help="A measurement sidecar whose ceilings replace the datasheet peaks.",
)
@profile_option(plain=True)
@click.option(
    "--causal",
    is_flag=True,
    help="Prefill and chunk: time the causal kernels (each query attends the keys before it), "
    "as plan does; default: every (query, key) pair, as report counts without --causal.",
)
@click.option(
    "--insight",
    is_flag=True,
    help="Also solve, symbolically, for the ridge point, the KV length where absorbed MLA decode "
    "turns compute-bound and the absorption crossover (loads sympy: about a second).",
)
@serving_engine_option
@state_dtype_option
@set_option
@format_option
def command(
    model,
    hardware,
    phase,
    seq_len,
    batch,
    q_len,
    impl,
    mode,
    scope,
    layer_kind,
    dtype,
    weight_dtype,
    kv_dtype,
    calibrate,
    profile,
    causal,
    insight,
    engine,
    state_dtype,
    sets,
    fmt,
):
    """Roofline time of an attention layer or a model step, kernel by kernel, with its bound.

    \b
    Examples:
      mlacalc roofline deepseek-v3 --hardware H200 --seq-len 32k --batch 64
      mlacalc roofline deepseek-v3 --hardware H100-SXM --phase prefill --seq-len 4k --mode unfused
      mlacalc roofline llama-3-70b --hardware H100-SXM --scope model --weight-dtype fp8 --batch 32
      mlacalc roofline deepseek-v3 --hardware H200 --insight
      mlacalc roofline deepseek-v3 --hardware H200 --profile fit-h100-sxm
      mlacalc roofline deepseek-v3 --hardware H200 --impl all --batch 64
      mlacalc roofline deepseek-v3 --hardware B200 --engine sglang --batch 64
      mlacalc roofline deepseek-v4-pro --hardware GB200 --batch 64 --layer-kind csa
    """
    whole = load(model, changes=sets, weight_dtype=weight_dtype)
    m, kind_said = _of_kind(whole, layer_kind, scope)
    wanted = phases(phase)
    _check_flags(wanted, q_len, causal, mode, profile, calibrate)
    impls = _impls(m, impl)
    profile = load_profile_option(profile, plain=True)
    device = _device(hardware, profile)
    dtype = _measured_dtype(device, dtype)
    recurrent_state_check(whole, state_dtype)
    if state_dtype is not None:  # the layout carries the recurrent state's dtype to the cost
        kv_dtype = with_state_dtype(kv_dtype or dtype, state_dtype)
    request = _Request(
        m,
        device,
        seq_len,
        batch,
        impls[0],
        mode,
        dtype,
        scope,
        q_len,
        weight_dtype,
        kv_dtype,
        causal,
        engine,
    )
    calls = [(replace(request, impl=i), ph) for i in impls for ph in wanted]
    predictions = [_predict(r, ph, profile, calibrate) for r, ph in calls]
    if kind_said:  # the kind's model has its layers alike: say which layer it stands for
        predictions = [replace(p, layer=kind_said) for p in predictions]
    _working_set_warnings(m, seq_len, predictions)
    check_context(m, seq_len)
    no_fp8 = _no_fp8(device, dtype, weight_dtype, predictions[0])
    if no_fp8:
        warn(no_fp8)
    layout = resolve_kv_layout(kv_dtype or dtype)
    kv_note = checkpoint_kv_note(m, layout.name, layout.bits)
    if kv_note:
        note(kv_note)
    # what --profile roofline would print for the same call, so that the footer of a kernel
    # model prediction can state both plain figures exactly (they differ: see _times_note)
    # (each implementation's own call: ``request`` holds the first implementation only)
    plain = [
        _predict(r, ph, "roofline") if p.profile != "roofline" else None
        for p, (r, ph) in zip(predictions, calls)
    ]
    # the kernel model's insight by the profile that timed the tables (the engine's own where
    # --profile is not given: model_compute_bound_seq_len takes no engine, and its bound labels,
    # FLOPs per byte against the ridge, are the same under each engine)
    timed_by = profile if profile is not None else predictions[0].profile
    insights = _insights(request, timed_by, calibrate) if insight else []
    kinds = [
        _layer_kinds(
            m,
            p,
            q_len if p.phase == "chunk" else None,
            kv_dtype or dtype,
            causal and p.phase != "decode",
        )
        for p in predictions
    ]
    # the first prediction's (every one has the same device, engine and profile)
    expected = predictions[0].expected_error
    doc = {
        "schema": SCHEMA,
        "predictions": [p.to_dict() for p in predictions],
        "insights": [i.to_dict() for i in insights],
    }
    if expected:
        doc["expected_error"] = expected
    # a linear or Mamba layer's recurrent state: its dtype (None: the model keeps none)
    state = doc["state_dtype"] = recurrent_state_dtype(whole, kv_dtype or dtype)
    if len(impls) > 1:
        doc["side_by_side"] = side_by_side(predictions)
    for d, p in zip(doc["predictions"], predictions):
        d["causal"] = causal and p.phase != "decode" and mode != "unfused"
        d["pairs"] = pairs_words(p.phase, causal, mode)
    for d, k in zip(doc["predictions"], kinds):
        if k:
            d["layer_kinds"] = k  # per op, "" outside the attention block
    emit(
        fmt,
        doc,
        lambda: _sections(m, whole, predictions, kinds, plain, insights, causal),
        header=f"{m.label}: roofline ({mode}) on {predictions[0].hardware}"
        + (f", recurrent state {state}" if state else "")
        + "\n"
        + (f"{expected['note']}\n" if expected else ""),
    )


def _working_set_warnings(m, seq_len: int, predictions: list) -> None:
    """The predictions' warnings (Prediction.warnings: a working set beyond one device's
    memory) on stderr, once each; the context beyond the model's positions is check_context's,
    an MLA geometry no row has the section's note (:func:`_rank_note`)."""
    beyond = beyond_positions(m, seq_len)
    for w in dict.fromkeys(w for p in predictions for w in p.warnings):
        if not (beyond and w.startswith(beyond)) and MLA_GEOMETRY_SAID not in w:
            warn(w)


@dataclass(frozen=True)
class _Request:
    """What every phase's prediction of one command shares."""

    model: Any
    device: Any
    seq_len: int
    batch: int
    impl: str
    mode: str
    dtype: str
    scope: str
    q_len: int | None
    weight_dtype: str | None
    kv_dtype: str | None
    causal: bool
    #: the serving engine (--engine; None: the device's default for the fused kernels,
    #: TensorRT-LLM, SGLang on AMD: ``default_engine``)
    engine: str | None = None


def _impls(m, impl: list[str] | None) -> list[str | None]:
    """The implementations to predict: the one asked, each of several, or every one of the
    model's (``all``); ``[None]`` for the serving default."""
    if impl is None:
        return [None]
    if impl == ["all"]:
        return list(MLA_IMPLEMENTATIONS) if m.is_mla else [None]
    return [check_impl(m, i) for i in impl]


def side_by_side(predictions: list) -> list[dict[str, Any]]:
    """One row per (phase, implementation): FLOPs, bytes, FLOPs per byte, the bound, the time
    and how many times the fastest of its phase it takes."""
    order = list(dict.fromkeys(p.phase for p in predictions))
    predictions = sorted(predictions, key=lambda p: order.index(p.phase))  # by phase, stable
    fastest = {}
    for p in predictions:
        fastest[p.phase] = min(fastest.get(p.phase, p.seconds), p.seconds)
    return [
        {
            "phase": p.phase,
            "impl": p.impl,
            "flops": p.flops,
            "bytes": p.bytes,
            "arithmetic_intensity_flops_per_byte": p.arithmetic_intensity,
            "ridge_flops_per_byte": p.ridge,
            "bound": p.bound,
            "seconds": p.seconds,
            "x_fastest": p.seconds / fastest[p.phase],
        }
        for p in predictions
    ]


def _kinds(m) -> dict[str, Any]:
    """The model's kinds of layer (its mixers: attention, linear, Mamba), by label."""
    # deferred: the layer pattern is read only where a model's layers differ
    from mlacalc.models.architecture import layer_pattern

    return {k.label: k for k in layer_pattern(m).layers}


def _alone(label: str) -> bool:
    """Whether --layer-kind can cut a model to this kind: an attention kind (a linear or
    Mamba mixer, or a block without one, is timed only as the model's first layer)."""
    return label not in ("linear", "none") and not label.startswith("mamba")


def _of_kind(m, layer_kind: str | None, scope: str) -> tuple[Any, str]:
    """The model cut to one kind of attention layer for --layer-kind (and the words for the
    header), or the model itself; a kind it lacks, or the flag at model scope, refused."""
    if layer_kind is None:
        return m, ""
    if scope == "model":
        raise click.BadParameter(
            "times one kind of attention layer: it needs --scope attention_layer (--scope model "
            "times every layer)",
            param_hint="--layer-kind",
        )
    # deferred: as in _kinds
    from mlacalc.models.architecture import kind_model, layer_pattern

    layers = layer_pattern(m)
    kinds = {k.label: k for k in layers.layers}
    if len(kinds) < 2:
        raise click.BadParameter(
            f"{m.label} has one kind of layer, every layer alike: leave it out",
            param_hint="--layer-kind",
        )
    if layer_kind == layers.layers[0].label:
        return m, ""  # the first layer's kind: what attention_layer times without the flag
    if layer_kind not in kinds or not _alone(layer_kind):
        raise click.BadParameter(
            f"{m.label} has no {layer_kind!r} layers to time alone; its kinds that can be: "
            + ", ".join(k for k in kinds if _alone(k)),
            param_hint="--layer-kind",
        )
    summary = str(layers.to_dict().get("summary", "")).split(";")[0]
    first = next(i for i, k in enumerate(layers.layers) if k.label == layer_kind)
    one = kind_model(m, kinds[layer_kind])
    return one, f"{layer_kind}: layer {first + 1} of {summary}"


def _other_kinds(whole, layer: str) -> str:
    """'--layer-kind csa: another kind; ' for the header of a model whose layers differ
    (``whole``: the model as loaded, before --layer-kind cut it to one kind)."""
    others = [k for k in _kinds(whole) if k != layer.split(":")[0] and _alone(k)]
    return f"--layer-kind {' or '.join(others)}: another kind; " if others else ""


def _check_flags(wanted: list[str], q_len, causal: bool, mode: str, profile, calibrate) -> None:
    """Refuse flags that do not go together; warn of one that changes nothing."""
    check_q_len(wanted, q_len)
    check_causal(wanted, causal)
    if causal and wanted != ["decode"] and mode == "unfused":
        warn(
            "--causal changes nothing in --mode unfused (the eager op sequence computes every "
            "score and masks the upper triangle); ignored"
        )
    if profile is not None and calibrate is not None:
        raise click.UsageError(
            "--profile and --calibrate exclude each other: --calibrate predicts with the roofline "
            "on a sidecar's measured ceilings; --profile with the kernel model"
        )


def _device(hardware: str, profile) -> Any:
    """The device, with its alias note, and a warning where a profile does not apply to it."""
    device = load_hardware(hardware)
    if getattr(device, "alias_note", ""):
        note(device.alias_note)
    if profile is not None and (device.measured or device.kind != "gpu"):
        warn(
            f"--profile: {device.name} is timed by the roofline on its "
            + ("measured ceilings" if device.measured else "datasheet figures")
            + " (the kernel model times a catalogue GPU's model step; a profile fitted on "
            "this device's calibrate-preset runs is read by mlacalc validate --measured "
            "OTHER_RUN.json --profile P, which times those kernels); ignored"
        )
    return device


def _predict(r: _Request, phase: str, how: Any, calibration: Any = None) -> Any:
    """One phase's prediction with profile ``how`` (the command's, or the plain bound)."""
    # deferred: the time model loads numpy; `mlacalc roofline --help` stays light
    from mlacalc.timemodel.predict import predict_time

    return predict_time(
        r.model,
        r.device,
        phase,
        r.seq_len,
        r.batch,
        r.impl,
        r.mode,
        r.dtype,
        r.scope,
        q_len=r.q_len if phase == "chunk" else None,
        weight_dtype=r.weight_dtype,
        kv_dtype=r.kv_dtype,
        calibration=calibration,
        causal=r.causal and phase != "decode",
        profile=how,
        engine=r.engine,
    )


def _insights(r: _Request, profile, calibrate) -> list:
    """The symbolic answers of --insight: the ridge point and, for MLA, where absorbed decode
    turns compute-bound (by the roofline, and by the kernel model without --calibrate) and
    the absorption crossover. Sympy loads only here, so the plain command starts fast."""
    # deferred: sympy loads only for --insight
    from mlacalc.timemodel.insight import (
        absorption_crossover,
        compute_bound_seq_len,
        model_compute_bound_seq_len,
        ridge_point,
    )

    m, device, dtype, kv_dtype = r.model, r.device, r.dtype, r.kv_dtype
    insights = [ridge_point(device, dtype)]  # the plain roofline's (datasheet) ridge
    if m.is_mla:
        insights += compute_bound_seq_len(m, device, r.batch, dtype, kv_dtype)
        # the same question for the kernel model, whose labels the table shows
        if calibrate is None:
            by_model = model_compute_bound_seq_len(
                m, device, r.batch, dtype, kv_dtype, profile, r.seq_len
            )
            insights += [by_model] if by_model is not None else []
        insights += [absorption_crossover(m), absorption_crossover(m, r.seq_len)]
    return insights


def _sections(m, whole, predictions: list, kinds: list, plain: list, insights: list, causal: bool):
    """The table/markdown sections: one per phase, then the insights (or a line on what
    --insight would add); ``whole``: the model before --layer-kind cut it."""
    # the MLA latent's note once, on the first section whose core reads the latent (the naive
    # implementation's expanded MHA core reads none)
    latent = next((i for i, p in enumerate(predictions) if p.impl != "naive"), None)
    out = [
        _prediction_section(m, whole, p, kind, flat, causal, rank_note=i == latent)
        for i, (p, kind, flat) in enumerate(zip(predictions, kinds, plain))
    ]
    if len({p.impl for p in predictions}) > 1:
        out.append(_side_by_side_section(m, predictions))
    if not insights:
        if m.is_mla:
            out[-1].note += (
                "\n--insight adds the ridge point, the KV length where absorbed MLA decode "
                "turns compute-bound, and the absorption crossover."
            )
        else:
            out[-1].note += "\n--insight adds the ridge point."
        return out
    out.append(
        Section(
            "Insight",
            ["quantity", "value", "formula / note"],
            [
                [
                    i.name,
                    _insight_value(i.value),
                    f"{i.expression}  ({i.note})" if len(str(i.expression)) < 80 else i.note,
                ]
                for i in insights
            ],
            text_columns=(2,),
        )
    )
    if not m.is_mla:
        out[-1].note = _not_mla_insight_note(m)
    return out


def _not_mla_insight_note(m) -> str:
    """Why --insight gives a model without MLA only the ridge point."""
    kind = (
        "DeepSeek-V4's compressed attention (CSA / HCA)"
        if m.compress_ratios or m.compress_rate_csa or m.compress_rate_hca
        else m.variant.upper()
    )
    return (
        f"Only the ridge point: {m.label}'s attention is {kind}, not MLA (kv_lora_rank is "
        "null); the other insights (where absorbed decode turns compute-bound, the absorption "
        "crossover) are MLA's closed forms. The bound column above compares each kernel with "
        "the ridge."
    )


def _insight_value(value) -> str:
    """An insight's value: a whole number (a KV length) as one, else to one decimal."""
    if value is None:
        return "never"
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.1f}"


def _side_by_side_section(m, predictions: list) -> Section:
    """The implementations side by side: one row per phase and implementation."""
    rows = [
        [
            r["phase"],
            r["impl"],
            human_si(r["flops"]),
            human_bytes(r["bytes"]),
            f"{r['arithmetic_intensity_flops_per_byte']:,.1f}",
            f"{r['ridge_flops_per_byte']:,.1f}",
            r["bound"],
            f"{r['seconds'] * 1e6:,.1f}",
            f"{r['x_fastest']:,.2f}",
        ]
        for r in side_by_side(predictions)
    ]
    p = predictions[0]
    return Section(
        f"{m.label} on {p.hardware}: MLA implementations side by side ({p.scope}, {p.mode}, "
        f"seq_len {p.seq_len:,} x batch {p.batch:,})",
        [
            "phase",
            "impl",
            "FLOPs",
            "bytes",
            "FLOP/byte",
            "ridge",
            "bound",
            "time (us)",
            "x fastest",
        ],
        rows,
        note="bound: the step's FLOPs per byte against the ridge (FLOP/byte) of the dtype doing "
        "most of its FLOPs; x fastest: the time over the fastest implementation's in the same "
        "phase.",
        text_columns=(1, 6),
    )


def _prediction_section(
    m, whole, p, kind: list[str], flat, causal: bool, rank_note: bool
) -> Section:
    """One phase's kernels with their figures and bound, a total row, and the times' note
    (``flat``: the plain roofline's prediction of the same call, or None)."""
    # the tile efficiency is the plain roofline's (the kernel model quantizes tiles
    # inside its own times): a column only where it says something
    tiles = p.profile == "roofline" and any(o.efficiency != 1.0 for o in p.ops)
    # the kernel model's own largest term (OpTime.limited_by), beside the datasheet-ridge
    # label: a "memory" kernel the model times as compute- or latency-limited shows here
    limits = p.profile != "roofline"
    rows = [
        [o.name]
        + ([kind[i]] if kind else [])
        + [
            o.stage,
            human_si(o.flops),
            human_bytes(o.bytes),
            f"{o.arithmetic_intensity:,.1f}",
            o.bound,
        ]
        + ([o.limited_by] if limits else [])
        + ([f"{o.efficiency:.2f}"] if tiles else [])
        + [f"{o.seconds * 1e6:,.1f}"]
        for i, o in enumerate(p.ops)
    ]
    rows.append(
        ["total"]
        + ([""] if kind else [])
        + [
            "",
            human_si(p.flops),
            human_bytes(p.bytes),
            f"{p.arithmetic_intensity:,.1f}",
            p.bound,
        ]
        + ([""] if limits else [])
        + ([""] if tiles else [])
        + [f"{p.seconds * 1e6:,.1f}"]
    )
    columns = (
        ["kernel"]
        + (["layer kind"] if kind else [])
        + ["stage", "FLOPs", "bytes", "FLOP/byte", "bound"]
        + (["limited by"] if limits else [])
        + (["tile eff."] if tiles else [])
        + ["time (us)"]
    )
    return Section(
        f"{p.phase}: {m.label} on {p.hardware}, {p.scope}, {p.mode}, impl {p.impl}, "
        f"seq_len {p.seq_len:,} x batch {p.batch:,} ({p.dtype}"
        f"{_weights(p)})"
        + _pairs_heading(p.phase, causal, p.mode)
        # a model whose layers differ: which one stands for it
        + (
            f"; one {p.layer} ({_other_kinds(whole, p.layer)}--scope model: every layer)"
            if p.layer
            else ""
        ),
        columns,
        rows,
        note=_times_note(p, flat) + _runs_as_note(p, m) + (_rank_note(m, p) if rank_note else ""),
        text_columns=tuple(
            i for i, c in enumerate(columns) if c in ("layer kind", "stage", "bound", "limited by")
        ),
    )


#: What a kernel the engine runs in place of the counted one is, in words (by its class).
_RUNS_AS = {
    "mla_decode sparse": "the absorbed sparse MLA kernel (each query over its top-k latent rows)",
    "mla_decode": "its absorbed MLA decode kernel (each query over its top-k latent rows)",
    MMHA_RUNS_AS: MMHA_WORDS,
}


def _rank_note(m, p) -> str:
    """An MLA latent rank or head widths no measured kernel has, where the kernel model times
    it."""
    note = mla_geometry_note(m) if p.profile != "roofline" else ""
    return f"\n{note}." if note else ""


def _runs_as_note(p, m=None) -> str:
    """Kernels the engine runs as another kernel (a DSA core as the sparse MLA kernel the
    module tables show it running): the work its time is of, where the row counts ``impl``;
    a walk over more top-k slots than there are keys (``index_topk`` at or above the keys)
    said, with why its time exceeds the picked keys' (trial10: 65,536 slots at 32,768 keys,
    twice 32,768's time at the same counted FLOPs and bytes)."""
    out = "".join(
        f"\n{o.name}: {p.engine} runs it as {_RUNS_AS.get(o.runs_as, o.runs_as)} "
        f"({human_si(o.run_flops)} FLOPs, {human_bytes(o.run_bytes)}), the work its time is of; "
        f"the row counts impl {p.impl}."
        for o in p.ops
        if o.runs_as
    )
    topk = getattr(m, "index_topk", None) or 0
    walks = any(o.runs_as in _WALK_RUNS_AS for o in p.ops)
    if walks and topk > p.seq_len:
        out += (
            f" The walk covers every one of the {topk:,} index_topk slots a query, past the "
            f"{p.seq_len:,} keys there are, as the tables' walking kernels take one time at any "
            "keys up to their top-k (docs/time-model.md, DSA); a top-k at or above the keys "
            "picks every key, so its time grows with index_topk while the counted FLOPs and "
            "bytes do not."
        )
    return out


#: the classes of the DSA kernels that walk every top-k slot of a query
#: (:func:`mlacalc.timemodel.dsa_time.walked_core`), as a prediction's ``runs_as`` names them
_WALK_RUNS_AS = tuple(f"mla_decode {v}" for v in (WALK_VARIANT, "sparse"))


def _times_note(p, plain=None) -> str:
    """How the times were predicted: the profile and how it reaches this device (or the plain
    bound), the plain roofline bound of the same kernels, and what ``bound`` means.

    The plain bound of the kernel model's kernels (``p.roofline_s``: max(FLOPs / peak,
    bytes / bandwidth) each, nothing per call) is not what ``--profile roofline`` prints
    (``plain``: the attention ops without the norm and RoPE kernels, plus a launch latency
    per kernel): the note gives both, and says how they differ.
    """
    if p.profile == "roofline":
        how = f"Times: {p.calibration}" + (" (measured ceilings)" if p.calibrated else "")
        launch = sum(o.launch_s for o in p.ops)
        how += (
            f": max(FLOPs / peak, bytes / bandwidth) per kernel, {(p.seconds - launch) * 1e6:,.1f}"
            f" us, plus {launch * 1e6:,.1f} us of launch latency."
            if launch > 0
            else "."
        )
    else:
        how = (
            f"Times: kernel time model, engine {p.engine}, profile {p.profile!r}: "
            f"{p.calibration}{_uncalibrated(p)}. Plain roofline "
            f"bound (max(FLOPs / peak, bytes / bandwidth) per kernel, datasheet figures, no "
            f"cost per call) of these {len(p.ops)} kernels"
            + (" as the engine runs them" if any(o.runs_as for o in p.ops) else "")
            + f": {p.roofline_s * 1e6:,.1f} us."
        )
        if plain is not None:
            launch = sum(o.launch_s for o in plain.ops)
            tiles = any(o.efficiency != 1.0 for o in plain.ops)
            how += (
                f" --profile roofline prints {plain.seconds * 1e6:,.1f} us: that bound over "
                f"its {len(plain.ops)} kernels"
                + (" (tile-quantized)" if tiles else "")
                + f", {(plain.seconds - launch) * 1e6:,.1f} us, plus "
                f"{launch * 1e6:,.1f} us of launch latency."
            )
    ridges = sorted({round(o.ridge, 1) for o in p.ops if o.ridge})
    words = [
        "a kernel's FLOPs per byte against the device's ridge for the dtype it runs ("
        + " or ".join(f"{r:,.1f}" for r in ridges)
        + " FLOP/byte): compute at or above it, else memory"
    ]
    if any(o.bound == "link" for o in p.ops):
        words.append("link: a collective's transfer")
    words.append(f"the total: the step's FLOPs per byte against {p.ridge:,.1f}")
    term = (
        " limited by: the kernel time model's largest term of the kernel (compute, memory, "
        "latency where its fixed cost per call outweighs the rest or where its compute term "
        f"binds at over {UNDERFILLED_RATIO:.0f}x its plain roofline bound, too little work to "
        "fill the device, or link), which can differ from bound."
        if p.profile != "roofline"
        else ""
    )
    return how + " bound: " + "; ".join(words) + "." + term


def _uncalibrated(p) -> str:
    """The kernel classes the profile holds no class of (datasheet defaults), as ``plan``
    lists them: "; 2 of 5 kernels uncalibrated: elementwise:bf16 (rope), ... (no profile
    class; datasheet defaults)"; empty when the profile calibrates every kernel."""
    reasons: dict[str, list[str]] = {}
    count = 0
    for o in p.ops:
        match = re.fullmatch(r"uncalibrated (\S+) \((.+)\)", o.calibration)
        if match:
            count += 1
            reasons.setdefault(match[2], []).append(f"{match[1]} ({o.name})")
    if not reasons:
        return ""
    return f"; {count} of {len(p.ops)} kernels uncalibrated: " + "; ".join(
        f"{', '.join(names)} ({why})" for why, names in reasons.items()
    )


def _measured_dtype(device, dtype: str) -> str:
    """The compute dtype: as given, or, left at its default (bf16) on a measured set
    benchmarked without bf16, the set's own (its first measured dtype), said."""
    own = list(device.peak_flops_per_s)
    if given("dtype") or not device.measured or "bf16" in own or not own:
        return dtype
    note(
        f"--dtype: {device.name} was measured in {', '.join(own)}, not bf16: timed in "
        f"{own[0]} (give --dtype to choose)"
    )
    return own[0]


def _no_fp8(device, dtype: str, weight_dtype: str | None, p) -> str:
    """The warning for fp8 asked of (or stored in the checkpoint of) a GPU without fp8 tensor
    cores, naming the class that runs instead (as :func:`mlacalc.timemodel.kernel_time.device_batch`
    times it); "" when none applies."""
    if device.kind != "gpu" or device.measured:
        return ""

    if "fp8" in device_figures(device).peaks:
        return ""
    asked = [
        what
        for what, value in (("--dtype", dtype), ("--weight-dtype", weight_dtype))
        if value and str(value).startswith("fp8")
    ]
    stored = weight_dtype is None and p.weights.startswith("checkpoint") and "fp8" in p.weights
    if not (asked or stored):
        return ""
    whose = " and ".join(f"{a} fp8" for a in asked) or f"the {p.weights}"
    return (
        f"{device.name} has no fp8 tensor cores: with {whose} its fp8-weight GEMMs and MoE "
        "experts run as the weight-only w8a16 class (each weight dequantized to bf16 in the "
        "kernel); other fp8 compute runs at the bf16 rate"
    )


def pairs_words(phase: str, causal: bool, mode: str = "fused") -> str:
    """Which (query, key) pairs a prefill or chunk counts and times: "causal", or every pair
    (the default of the FLOP counts, as DESIGN.md fixes it) said as such, with the flag that
    changes it; "" for decode (one new token attends every key: no choice to say)."""
    if phase == "decode":
        return ""
    if mode == "unfused":
        return "all (query, key) pairs (the eager sequence computes every score and masks it)"
    if causal:
        return "causal"
    return "all (query, key) pairs (not causal; --causal for a causal kernel)"


def _pairs_heading(phase: str, causal: bool, mode: str) -> str:
    """The heading's words on the pairs counted (:func:`pairs_words`), after a semicolon."""
    words = pairs_words(phase, causal, mode)
    return f"; {words}" if words else ""


def _weights(p) -> str:
    """The header's word on the weights: a quantized checkpoint read as stored, or a weight
    dtype other than the compute dtype."""
    if p.weights.startswith("checkpoint"):
        return f", {p.weights}"
    return f", weights {p.weights}" if p.weights and p.weights != p.dtype else ""


def _layer_kinds(m, p, q_len, kv_dtype, causal) -> list[str]:
    """The kind of layer of each kernel of a model-scope step whose layers differ (the
    attention kernels run once per kind, full layers first; :func:`mlacalc.report.
    attention_kind_labels`); [] when one kind."""
    if p.scope != "model":
        return []

    labels = attention_cost(
        m, p.phase, p.seq_len, p.batch, q_len, p.impl, causal, kv_dtype
    ).group_labels
    if len(labels) < 2:
        return []
    kernels = step_kernels(
        m, p.phase, p.seq_len, p.batch, q_len, p.impl, causal, None, kv_dtype, scope="model"
    )
    names = [k.name for k in kernels]
    if names != [o.name for o in p.ops]:
        return []
    return attention_kind_labels(names, [k.calls for k in kernels], labels)
