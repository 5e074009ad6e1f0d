"""`mlacalc convert`: a GQA/MHA model converted to MLA (TransMLA, MHA2MLA), source beside result."""

from __future__ import annotations

from pathlib import Path

import click

from mlacalc.cli.common import (
    KV_DTYPE,
    SIZE,
    Section,
    check_context,
    emit,
    format_option,
    load,
    serving_engine_option,
    set_option,
    size_list,
    size_text,
    warn,
)
from mlacalc.cost.convert_cost import (
    CONVERTED_IMPLS,
    conversion_cost,
    flops_by_phase,
    reading_notes,
)
from mlacalc.cost.params import param_counts
from mlacalc.models.convert import (
    BEFORE_FINE_TUNING,
    CONVERSION_METHODS,
    ROPE_STRATEGIES,
    SVD_MODES,
    convert,
)
from mlacalc.render import human_bytes, human_seconds, human_si, model_yaml
from mlacalc.timemodel.mla_geometry import mla_geometry_note
from mlacalc.words import defaults as D
from mlacalc.words.engines import ENGINE_LABELS


def _side_by_side(cc, t: dict) -> list[list]:
    """Rows of (quantity, source, converted, converted / source)."""
    c = cc.conversion
    s, m = c.source, c.model
    published = c.published_cache_elements
    form = ", shared-RoPE form" if published is not None else ""
    text = [
        ["attention", s.variant.upper(), f"MLA ({c.method}{form}, {c.svd} SVD)"],
        ["KV heads / latent", str(s.num_key_value_heads), f"d_c {c.kv_lora_rank:,}"],
        [
            "head widths (q·k nope + rope, v)",
            f"{s.head_dim} + 0, {s.head_dim}",
            f"{m.qk_nope_head_dim} + {m.qk_rope_head_dim}, {m.v_head_dim}",
        ],
    ]
    split = " (split layer's own)" if c.svd == "split" else ""
    elements, per_token = "cache elements / token / layer", "cache / token (all layers)"
    a, b = cc.source_cache_elements, cc.source_cache_bytes_per_token
    if published is None:
        numbers = [
            (elements, a, cc.cache_elements, str),
            (per_token, b, cc.cache_bytes_per_token, human_bytes),
        ]
    else:  # MHA2MLA's own cache first; the rest of the table counts the shared-RoPE form
        numbers = [
            (f"{elements} (MHA2MLA as published)", a, published, str),
            (f"{per_token} (as published)", b, cc.published_cache_bytes_per_token, human_bytes),
            (f"{elements} (shared-RoPE form)", a, cc.cache_elements, str),
            (f"{per_token} (shared-RoPE form)", b, cc.cache_bytes_per_token, human_bytes),
        ]
    numbers += [
        (
            "attention parameters / layer",
            param_counts(s).attention_per_layer,
            param_counts(m).attention_per_layer,
            human_si,
        ),
        ("parameters (model)", cc.source_params, cc.served_params, human_si),
        (f"attention FLOPs, decode ({cc.impl}){split}", cc.source_flops, cc.flops, human_si),
    ]
    for phase in ("decode", "prefill"):
        if phase in t:
            a, b = t[phase]
            numbers.append((_step_label(phase, t, published is not None), a, b, human_seconds))
    rows = [[*r, ""] for r in text]
    for label, a, b, fmt in numbers:
        rows.append([label, fmt(a), fmt(b), f"{b / a:.3g}x" if a else ""])
    return rows


def _step_label(phase: str, t: dict, shared: bool) -> str:
    """A step time's row: the phase, the MLA implementation the converted model's step was
    timed in (a prompt expanded, decode absorbed as asked) and, for MHA2MLA, that the
    shared-RoPE form is timed; the device."""
    # deferred: convert_sweep loads the time model; only a timed run, which loaded it, asks
    from mlacalc.serving.convert_sweep import IMPL_WORDS

    how = IMPL_WORDS.get(t["impl"][phase], t["impl"][phase])
    form = ", shared-RoPE form" if shared else ""
    # the source's column is its own attention: the MLA words are the converted column's
    return f"{phase} step time ({t['hardware']}; converted: MLA {how}{form})"


def _choice(values) -> click.Choice:
    """A choice of the paper's spellings in any case (``TransMLA``, ``Joint``), given to the
    command in its canonical lower case."""
    return click.Choice(list(values), case_sensitive=False)


#: What an option that needs --hardware does (said when it is given without one)
_NEEDS_DEVICE = {"--ranks": "times each rank", "--engine": "names whose kernels time the steps"}


@click.command("convert")
@click.argument("model")
@click.option(
    "--method",
    type=_choice(CONVERSION_METHODS),
    default="transmla",
    show_default=True,
    help="TransMLA (GQA: replicate the keys, factor) or MHA2MLA (partial RoPE, SVD).",
)
@click.option(
    "--kv-lora-rank",
    type=SIZE,
    default=None,
    help="Latent rank d_c (default: the rank whose cache equals the source's).",
)
@click.option(
    "--rope-dim",
    type=int,
    default=None,
    help="Dimensions of each head that keep RoPE (default 64).",
)
@click.option(
    "--svd",
    type=_choice(SVD_MODES),
    default="joint",
    show_default=True,
    help="One latent for keys and values, or half each.",
)
@click.option(
    "--rope-strategy",
    type=_choice(ROPE_STRATEGIES),
    default=None,
    help="MHA2MLA's partial-RoPE choice (changes no count; default 2-norm).",
)
@click.option("--q-lora-rank", type=SIZE, default=None, help="Compress the query to this rank too.")
@click.option(
    "--seq-len",
    "-s",
    type=SIZE,
    default=size_text(D.COMPARE_SEQ_LEN),
    show_default=True,
    help="Keys a decode step attends; tokens of a prefill.",
)
@click.option("--batch", "-b", type=SIZE, default=D.BATCH, show_default=True, help="Sequences.")
@click.option(
    "--kv-dtype", type=KV_DTYPE, default=D.KV_DTYPE, show_default=True, help="KV-cache dtype."
)
@click.option(
    "--impl",
    type=_choice(CONVERTED_IMPLS),
    default="absorbed",
    show_default=True,
    help="MLA implementation of the converted model's decode.",
)
@click.option(
    "--hardware",
    "-H",
    "--hw",
    "hardware",
    default=None,
    help="Time a decode and a prefill step of each model on this device (one GPU).",
)
@click.option(
    "--ranks",
    default=None,
    help="Sweep these latent ranks (e.g. 256,512,1k) on --hardware (a rank given twice is "
    "timed once).",
)
@serving_engine_option
@click.option(
    "--save",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write the converted model as a YAML file every other command loads.",
)
@set_option
@format_option
def command(
    model,
    method,
    kv_lora_rank,
    rope_dim,
    svd,
    rope_strategy,
    q_lora_rank,
    seq_len,
    batch,
    kv_dtype,
    impl,
    hardware,
    ranks,
    engine,
    save,
    sets,
    fmt,
):
    """Convert a GQA/MQA/MHA model to MLA and show the source beside the result.

    \b
    Examples:
      mlacalc convert llama-3-70b --method transmla --kv-lora-rank 512
      mlacalc convert qwen2.5-72b --kv-lora-rank 512 --hardware H100 --ranks 256,512,1k,1984
      mlacalc convert llama-2-7b --method mha2mla --svd split --kv-lora-rank 256 --save m.yaml
      mlacalc convert llama-3-70b --kv-lora-rank 512 --hardware H100 --engine vllm --kv-dtype fp8
    """
    src = load(model, changes=sets)
    c = convert(
        src,
        method=method,
        kv_lora_rank=kv_lora_rank,
        rope_dim=rope_dim,
        svd=svd,
        keep_q_full=q_lora_rank is None,
        q_lora_rank=q_lora_rank,
        rope_strategy=rope_strategy,
    )
    cc = conversion_cost(c, "decode", seq_len, batch, impl=impl, kv_dtype=kv_dtype)
    for option, given in (("--ranks", ranks), ("--engine", engine)):
        if given is not None and hardware is None:
            raise click.BadParameter(
                f"{option} {_NEEDS_DEVICE[option]}: name a device with --hardware",
                param_hint=option,
            )
    swept = _swept_ranks(size_list(ranks, "--ranks"))
    _refuse_ranks(c, swept)
    times: dict = {}
    sweep = []
    fit, as_plan = "", []
    if hardware is not None:
        times, sweep, fit, as_plan = _timed(
            src, c, hardware, engine, swept, impl, seq_len, batch, kv_dtype
        )
    if save is not None:
        head = f"# Converted to MLA by mlacalc convert {model} ({method}, {svd} SVD)\n"
        if c.published_cache_elements is not None:
            head += (
                f"# MHA2MLA in DeepSeek's shared-RoPE form: one {c.rope_dim}-wide RoPE key for "
                f"all heads, {c.cache_elements:,} cached elements a token and layer; MHA2MLA as "
                f"published caches each of the {src.num_key_value_heads} KV heads' RoPE part "
                f"({c.published_cache_elements:,})\n"
            )
        save.write_text(head + model_yaml(c.model))
    by_phase = flops_by_phase(c, seq_len, batch, kv_dtype)
    document = cc.to_dict() | {
        "attention_flops_by_phase": by_phase,
        "reading_notes": reading_notes(cc),
    }
    # the caveat said once, first of reading_notes, as the text does (not in conversion.notes)
    said = document["conversion"]["notes"]
    document["conversion"]["notes"] = [n for n in said if n != BEFORE_FINE_TUNING]
    if times:
        document["times_s"] = times
    if sweep:
        document["rank_sweep"] = [r.to_dict() for r in sweep]
    geometry = ""
    if hardware is not None:
        # the converted model's and each swept rank's MLA geometry no measured row has
        swept = [c.model.with_changes(kv_lora_rank=r.rank) for r in sweep if r.rank]
        geometry = mla_geometry_note(c.model, *swept)
        # one GPU holding neither model, the geometry no row has, and what plan says of the
        # device, the engine and the cache (step_warnings), on stderr and here alike
        document["warnings"] = [w for w in (fit, geometry, *as_plan) if w]

    def sections():
        out = [
            Section(
                f"{src.label} -> MLA at seq_len {seq_len:,} x batch {batch:,} (KV {kv_dtype})"
                # a device of measured ceilings is timed by no engine's kernels: none named
                + (f", {ENGINE_LABELS[times['engine']]}" if times.get("engine") else ""),
                ["", "source", "converted", "ratio"],
                _side_by_side(cc, times),
                note=(
                    f"equivalence rank (same cache) {c.equivalence_rank:,}"
                    if c.published_equivalence_rank is None
                    else f"equivalence rank (same cache) {c.published_equivalence_rank:,} as "
                    f"published, {c.equivalence_rank:,} in the shared-RoPE form"
                )
                + f"; full rank of the position-free K and V projections {c.full_rank:,}\n"
                + "\n".join(f"- {n}" for n in reading_notes(cc))
                + _times_words(times, seq_len, batch, kv_dtype, save),
            ),
            Section(
                f"Attention FLOPs, all layers (prefill of {seq_len:,} tokens, causal; decode at "
                f"{seq_len:,} keys; batch {batch:,})",
                ["phase", "source", *(f"converted, {i}" for i in CONVERTED_IMPLS)],
                [
                    [r["phase"], human_si(r["source"])] + [human_si(r[i]) for i in CONVERTED_IMPLS]
                    for r in by_phase
                ],
                note="split SVD: the split layer's own FLOPs (the served dense form multiplies "
                "the zero blocks too)"
                if c.svd == "split"
                else "",
            ),
            Section(
                "What changed",
                ["field", "before", "after"],
                [
                    [f, "null" if b is None else b, "null" if a is None else a]
                    for f, b, a in c.changes
                ],
                # the caveat said once, under the first table (reading_notes)
                note="\n".join(f"- {n}" for n in c.notes if n != BEFORE_FINE_TUNING),
            ),
        ]
        if sweep:
            out.append(_rank_section(sweep, times))
        if save is not None:
            out[-1].note += f"; converted model written to {save}"
        return out

    emit(fmt, _warn_rank(c, cc, document), sections)
    for line in (fit, geometry, *as_plan):
        if line:
            warn(line)
    check_context(src, seq_len)


def _timed(src, c, hardware, engine, swept, impl, seq_len, batch, kv_dtype) -> tuple:
    """The step times of the source and the converted model on one ``hardware`` under
    ``engine`` (None: the device's default), each step's implementation, how they were
    predicted (plan's route and words), the rank sweep's rows (``swept``: None, no sweep), the
    warning where one GPU holds neither and what plan of them says of the device, the engine
    and the cache (:func:`~mlacalc.serving.convert_sweep.step_warnings`)."""
    # deferred: the time model loads numpy and the profiles; the counts alone stay light
    from mlacalc.hardware.catalogue import load_hardware
    from mlacalc.serving.convert_sweep import (
        fit_warning,
        rank_sweep,
        step_prediction,
        step_route,
        step_warnings,
    )
    from mlacalc.words.engines import check_engine

    hw = load_hardware(hardware)
    name = check_engine(engine, hw=hw)
    route, profile, calibration = step_route(c.model, hw, seq_len, batch, impl, kv_dtype, name)
    times: dict = {"hardware": hardware, "engine": name, "impl": {}}
    for phase in ("decode", "prefill"):
        asked = impl if phase == "decode" else None
        pair = [
            step_prediction(m, hw, phase, seq_len, batch, i, kv_dtype, name)
            for m, i in ((src, None), (c.model, asked))
        ]
        times[phase] = (pair[0].seconds, pair[1].seconds)
        times["impl"][phase] = pair[1].impl
    if profile == "roofline":  # a device of measured ceilings: no engine's kernels timed
        times["engine"] = None
    times |= {
        "profile": profile,
        "calibration": calibration,
        # plan's words for an engine not named: the device's default
        "engine_named": engine is not None,
        "route": route,
    }
    sweep = []
    if swept is not None:
        sweep = rank_sweep(
            src, swept, hw, c.method, c.svd, c.rope_dim, seq_len, batch, impl, kv_dtype, name
        )
    both = {"source": src, "converted": c.model}
    fit = fit_warning(both, hardware, seq_len, batch, kv_dtype)
    said = step_warnings(both, hw, seq_len, batch, impl, kv_dtype, name)
    return times, sweep, fit, said


def _times_words(times: dict, seq_len: int, batch: int, kv_dtype: str, save) -> str:
    """Under the first table, where its times come from and the error to expect: plan's
    provenance line (:func:`~mlacalc.cli.plan_cmd.times_note`, one GPU) and its expected-error
    line (the route's note); on a device of measured ceilings what the times are (the plain
    roofline bound, :func:`~mlacalc.serving.convert_sweep.measured_bound_note`) and the plan
    command that times the saved model by the kernel model scaled to them; nothing where no
    device was named."""
    if not times:
        return ""
    # deferred: plan's command module loads the serving words the counts alone do not need
    from mlacalc.cli.plan_cmd import times_note
    from mlacalc.hardware.catalogue import load_hardware
    from mlacalc.words.engines import default_engine_words

    hw = load_hardware(times["hardware"])
    if times["profile"] == "roofline":  # a device of measured ceilings: step_route
        file = str(save) if save is not None else "FILE"
        engine = f" --engine {times['route']['engine']}" if times["engine_named"] else ""
        how = "" if save is not None else " (FILE: the converted model, written by --save FILE)"
        return (
            f"\n{times['route']['note']}\n`mlacalc plan {file} -H {times['hardware']} --gpus 1 "
            f"--tp 1 --memory-reserve 0 -s {seq_len} -b {batch} --kv-dtype {kv_dtype}{engine}` "
            "(one GPU holding the model, as here, no reserve) times it by the "
            f"kernel time model scaled to these ceilings instead{how}."
        )
    default = "" if times["engine_named"] else default_engine_words(hw)
    line = times_note(times["profile"], times["calibration"], times["engine"], default, hw, 1)
    return f"\n{line}\n{times['route']['note']}"


def _swept_ranks(ranks: list[int] | None) -> list[int] | None:
    """``--ranks`` with a rank given twice kept once, where it was first given, said on
    stderr (trial: ``--ranks 512,512`` printed the row twice)."""
    if ranks is None:
        return None
    kept = list(dict.fromkeys(ranks))
    twice = sorted({r for r in ranks if ranks.count(r) > 1})
    if twice:
        warn(
            f"--ranks gives {', '.join(f'{r:,}' for r in twice)} more than once: each rank "
            "is timed once"
        )
    return kept


def _refuse_ranks(c, swept: list[int] | None) -> None:
    """A ``--ranks`` rank above the hidden size refused, naming the option and the largest
    rank that holds anything (:func:`mlacalc.models.convert.convert` refuses its own
    ``kv_lora_rank`` and ``q_lora_rank`` in the same words)."""
    d = c.source.hidden_size
    for rank in swept or ():
        if rank > d:
            raise click.BadParameter(
                f"{rank:,} is above the hidden size {d:,} the latent is projected from: give "
                f"{c.full_rank:,} or less (the full rank of the position-free key and value "
                "projections; past it a rank adds cache and nothing else)",
                param_hint="--ranks",
            )


def q_full_rank(c) -> int:
    """The full rank of the converted model's W_Q: min(d_model, the query width, its heads
    times each head's width, TransMLA's carrying the RoPE part beside d_h)."""
    m = c.model
    return min(
        c.source.hidden_size, m.num_attention_heads * (m.qk_nope_head_dim + m.qk_rope_head_dim)
    )


def _warn_rank(c, cc, document: dict) -> dict:
    """``document``, after :func:`rank_warning` and :func:`q_rank_warning` are said on stderr
    and first in its warnings."""
    said = [w for w in (rank_warning(c, cc), q_rank_warning(c)) if w]
    for above in reversed(said):
        document.setdefault("warnings", []).insert(0, above)
    for above in said:
        warn(above)
    return document


def q_rank_warning(c) -> str:
    """A query rank not below the full rank of W_Q (up to the hidden size; above it is
    refused), said on stderr: the query latent compresses nothing (trial: --q-lora-rank
    100000 was only a note under the last table); empty below it or with the query whole."""
    q = c.q_lora_rank
    if q is None or q < q_full_rank(c):
        return ""
    return (
        f"--q-lora-rank {q:,} is not below the full rank {q_full_rank(c):,} of the query "
        "projection W_Q: the query latent compresses nothing and only adds weights (the "
        f"'What changed' notes count them); give --q-lora-rank {q_full_rank(c) - 1:,} or less "
        "to compress the query"
    )


def rank_warning(c, cc) -> str:
    """A latent rank above the full rank of the position-free K and V (its extra dimensions
    carry nothing) or the equivalence rank (the source's cache) said on stderr, with what it
    costs (trial10: --kv-lora-rank 4096 on Llama-3.1-70B, 2.03x the cache and 1.13x the
    parameters, said only in a note under the last table); empty at or below it."""
    if c.kv_lora_rank <= min(c.equivalence_rank, c.full_rank):
        return ""
    cache = c.cache_elements / c.source_cache_elements
    params = cc.params / cc.source_params
    cost = f"the conversion: {cache:.2f}x the source's cache a token, {params:.2f}x its parameters"
    if c.kv_lora_rank > c.full_rank:
        beside = (
            f"the equivalence rank {c.equivalence_rank:,} (the source's cache) and "
            if c.kv_lora_rank > c.equivalence_rank
            else ""
        )
        return (
            f"--kv-lora-rank {c.kv_lora_rank:,} is above {beside}the full rank {c.full_rank:,} "
            f"of the position-free key and value projections: its {c.kv_lora_rank - c.full_rank:,} "
            f"dimensions past the full rank carry nothing and only add cache and parameters "
            f"({cost}); ranks above "
            f"{c.full_rank:,} add cost and no information (give --kv-lora-rank {c.full_rank:,} "
            "or less)"
        )
    return (
        f"--kv-lora-rank {c.kv_lora_rank:,} is above the equivalence rank "
        f"{c.equivalence_rank:,}: the latent caches more than the source does ({cost}), "
        f"keeping more of the position-free keys and values (full rank {c.full_rank:,})"
    )


def _rank_section(sweep, times: dict) -> Section:
    """The rank sweep's table: each rank's cache, parameters, FLOPs and step times on the
    device under the engine of ``times`` (first row: the source model); the step columns name
    the MLA implementation the converted rows were timed in (MHA2MLA: the shared-RoPE form)."""
    conv = sweep[1:]
    form = ", shared-RoPE form" if conv and conv[0].published_cache_bytes_per_token else ""
    # MHA2MLA: its published cache first, then the shared-RoPE form the rest counts
    both = any(r.published_cache_bytes_per_token is not None for r in sweep)
    caches = (
        ["cache / token (as published)", "cache / token (shared-RoPE form)"]
        if both
        else ["cache / token"]
    )
    return Section(
        f"Ranks on {times['hardware']}"
        + (f", {ENGINE_LABELS[times['engine']]}" if times.get("engine") else "")
        + " (first row: the source model)",
        [
            "d_c",
            *caches,
            "parameters",
            "decode attention FLOPs",
            "decode step",
            "prefill step",
        ],
        [
            [
                r.rank or "source",
                *(
                    [human_bytes(r.published_cache_bytes_per_token or r.cache_bytes_per_token)]
                    if both
                    else []
                ),
                human_bytes(r.cache_bytes_per_token),
                human_si(r.params),
                human_si(r.decode_attention_flops),
                human_seconds(r.decode_s),
                human_seconds(r.prefill_s),
            ]
            for r in sweep
        ],
        note=f"converted rows: decode timed in MLA {_impls(conv, 'decode_impl')}, prefill in "
        f"MLA {_impls(conv, 'prefill_impl')}{form}",
    )


def _impls(rows, field: str) -> str:
    """The implementation(s) the sweep's converted rows were timed in, in words."""
    # deferred: convert_sweep loads the time model (only a sweep, which loaded it, asks)
    from mlacalc.serving.convert_sweep import IMPL_WORDS

    said = dict.fromkeys(IMPL_WORDS.get(getattr(r, field), getattr(r, field)) for r in rows)
    return " / ".join(said)
