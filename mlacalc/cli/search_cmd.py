"""`mlacalc search`: the best deployment for a request mix and latency targets."""

from __future__ import annotations

import re
from typing import Any, ClassVar

import click

from mlacalc.cli.common import (
    PREFIX_HIT,
    SIZE,
    Section,
    count_list,
    emit,
    engine_options,
    format_option,
    gpu_hour_price_option,
    load,
    load_profile_option,
    profile_option,
    recurrent_state_check,
    serving_engine_option,
    set_option,
    shared_prefix_option,
    size_list,
    state_dtype_option,
    stored_weight_dtype,
    warn,
    with_stored_dtype,
)
from mlacalc.cli.plan_cmd import p_hardware_node, times_note
from mlacalc.cli.serving_flags import component_choices as parse_component_choices
from mlacalc.cli.serving_flags import (
    defaults_note,
    engine_option_values,
    launch_options,
    launch_text,
    launch_values,
    memory_options,
    no_launch_of_a_design,
    search_engine_options,
    with_kernel_versions,
)
from mlacalc.serving.plan import duration_text as plan_duration
from mlacalc.serving.price import money, per_million
from mlacalc.serving.search_command import plan_command, scheduler_words, set_words
from mlacalc.timemodel.mla_geometry import MLA_GEOMETRY_SAID
from mlacalc.words import defaults as D


class DurationType(click.ParamType):
    """A time with its unit: ``2s``, ``50ms``, ``800us`` (a number from Python is seconds). A
    bare number on the command line is refused: ``--tpot 50`` would read as 50 seconds."""

    name = "duration"
    _pattern = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|ms|us)?\s*$")
    _scale: ClassVar[dict[str, float]] = {"s": 1.0, "ms": 1e-3, "us": 1e-6}

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        if isinstance(value, (int, float)):
            result = float(value)
        else:
            match = self._pattern.match(str(value))
            if not match:
                self.fail(f"'{value}' is not a time; write 2s, 50ms or 800us", param, ctx)
            if not match.group(2):
                n = match.group(1)
                # a fraction is likelier seconds (a TTFT or TPOT under a millisecond is no
                # target): a trial's --tpot 0.04 was offered 0.04ms first
                units = ("s", "ms") if float(n) < 1 else ("ms", "s")
                self.fail(
                    f"'{value}' has no unit; write {n}{units[0]} or {n}{units[1]}", param, ctx
                )
            result = float(match.group(1)) * self._scale[match.group(2)]
        if result <= 0:
            self.fail(f"'{value}' must be positive", param, ctx)
        return result


DURATION = DurationType()
_POINT_COLUMNS = (
    ("gpus", "GPUs (decode+prefill)"),
    ("mode", "mode"),
    ("layout", "layout"),
    ("overlap", "overlap"),
    ("weight_format", "weights"),
    ("kv_dtype", "KV"),
    ("batch_per_group", "batch/group"),
    ("ttft_s", "TTFT ms"),
    ("tpot_s", "TPOT ms"),
    ("output_tokens_per_s_per_gpu", "tok/s/GPU"),
    ("output_tokens_per_s_per_user", "tok/s/user"),
)


def duration_text(seconds: float) -> str:
    """A time target as it was given, with enough digits: ``2 s``, ``50 ms``, ``50 us``,
    ``1.5 ms``."""
    for scale, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "us")):
        value = seconds / scale
        if value >= 1 or unit == "us":
            return f"{value:,.6g} {unit}"
    return f"{seconds:g} s"  # pragma: no cover - the loop ends at us


def _with_replicas(layout: str, redundant: Any) -> str:
    """A layout with its redundant experts, which its plan line gives as
    ``--redundant-experts`` (``TP1 DP-attention13 EP13 (4 redundant experts)``)."""
    if not redundant or layout.endswith(("redundant experts)", "redundant expert)")):
        return layout  # Layout.describe() says them
    return f"{layout} ({redundant} redundant expert{'s' if redundant > 1 else ''})"


def _layout_cell(p: dict[str, Any]) -> str:
    """A point's layout with its redundant experts; a disaggregated one's with its prefill
    pool's ("+ prefill ...")."""
    decode = _with_replicas(str(p["layout"]), p.get("redundant_experts"))
    if p.get("mode") == "disaggregated" and p.get("prefill_layout"):
        prefill = _with_replicas(p["prefill_layout"], p.get("prefill_redundant_experts"))
        return f"{decode} + prefill {prefill}"
    return decode


def _gpus(p: dict[str, Any]) -> str:
    """A point's GPUs: ``2+1`` (decode + prefill) for a disaggregated one."""
    if p.get("mode") == "disaggregated" and p.get("prefill_gpus"):
        return f"{p['decode_gpus']}+{p['prefill_gpus']}"
    return str(p["gpus"])


def _mode(p: dict[str, Any]) -> str:
    """A point's mode, with its chunked-prefill token budget (``aggregated, chunks 8192``)."""
    n = p.get("chunked_prefill")
    return f"{p['mode']}, chunks {n}" if n else str(p["mode"])


def _point_row(p: dict[str, Any]) -> list[str]:
    special = {"gpus": _gpus, "layout": _layout_cell, "mode": _mode}
    return [special[k](p) if k in special else _cell(k, p[k]) for k, _ in _POINT_COLUMNS]


def _cell(key: str, value: Any) -> str:
    if key in ("ttft_s", "tpot_s"):
        return f"{value * 1e3:,.1f}"
    if key.startswith("output_tokens"):
        return f"{value:,.1f}"
    return str(value)


def _degrees(text: str | None, option: str) -> list[int] | None:
    """A list of parallel degrees (None: not limited); an empty one is refused."""
    if text is None:
        return None
    out = count_list(text, option, "GPUs", MAX_DEGREE, "8,16")
    if not out:
        raise click.BadParameter("is empty; give a degree or a list, e.g. 8,16", param_hint=option)
    return out


#: The largest parallel degree the layout options take (search's largest GPU budget)
MAX_DEGREE = 4096


def layout_limits(
    tp: str | None,
    pp: str | None,
    ep: str | None,
    dp_attention: str | None,
    redundant: str | None,
    prefix: str = "",
) -> dict[str, Any]:
    """The layout options as :func:`mlacalc.search` takes them (``--ep`` a word or degrees,
    ``--redundant-experts`` ``auto`` or a count; None: not given); ``prefix`` ``"prefill_"``:
    the prefill pool's."""
    flag = "--" + prefix.replace("_", "-")
    return {
        f"{prefix}tp": _degrees(tp, f"{flag}tp"),
        f"{prefix}pp": _degrees(pp, f"{flag}pp"),
        f"{prefix}ep": _ep_words(ep, f"{flag}ep"),
        f"{prefix}dp_attention": dp_attention,
        f"{prefix}redundant_experts": _redundant_words(redundant, f"{flag}redundant-experts"),
    }


def prefill_layout_limits(opts: dict[str, Any]) -> dict[str, Any]:
    """The prefill pool's layout options (``opts`` pops them; None: as the decode pool's)."""
    tp, ep = opts.pop("prefill_tp_text"), opts.pop("prefill_ep_text")
    dp_attention, redundant = opts.pop("prefill_dp_attention"), opts.pop("prefill_redundant_text")
    out = layout_limits(tp, None, ep, dp_attention, redundant, "prefill_")
    out.pop("prefill_pp")
    return out


def _ep_words(text: str | None, option: str) -> Any:
    """``--ep``: ``any``, ``none`` or degrees (None: not given)."""
    if text is None:
        return None
    word = text.strip().lower()
    if word in ("any", "none"):
        return word
    if not all(p.strip().isascii() and p.strip().isdigit() for p in text.split(",") if p.strip()):
        raise click.BadParameter(
            f"'{text}' is not 'any', 'none' or a list of degrees, e.g. 8 or 8,16",
            param_hint=option,
        )
    return _degrees(text, option)


def _redundant_words(text: str | None, option: str) -> Any:
    """``--redundant-experts``: ``auto`` (None) or a count (None: not given)."""
    if text is None:
        return None
    word = text.strip().lower()
    if word == "auto":
        return "auto"
    if not (word.isascii() and word.isdigit()):
        raise click.BadParameter(
            f"'{text}' is neither 'auto' nor a count of replicas, e.g. 8", param_hint=option
        )
    return int(word)


def notes_text(notes: tuple[str, ...] | list[str]) -> str:
    """The search's notes (lower-case clauses) as sentences after the ones before them: each
    capitalised and ended with a full stop (before: "... decode+prefill. the best is the
    largest batch searched ..." and "...; the best is ...": one note run into the next)."""
    return " ".join(n[0].upper() + n[1:] + ("" if n.endswith(".") else ".") for n in notes if n)


def _split(text: str | None) -> tuple[str, ...] | None:
    """A comma-separated option as its items (None as is)."""
    return None if text is None else tuple(p.strip() for p in text.split(",") if p.strip())


def _launch_lines(launch, model_path, hardware, result, engine, isl, loaded) -> str:
    """The ``launch`` engine's commands for the search's best point, sized as the search
    sized it (its memory share, page, chunk and the engine values it ran)."""
    # deferred: the catalogue loads the hardware files; `mlacalc --help` stays light
    from mlacalc.hardware.catalogue import load_hardware

    return launch_text(
        launch,
        model_path,
        result.best,
        gpus_per_node=load_hardware(hardware).gpus_per_node,
        memory_reserve=result.memory_reserve,
        memory_fraction=result.launch_share(launch, result.best),
        # the prefill pool's own: TensorRT-LLM's share is of what each pool's weights leave
        prefill_memory_fraction=(
            result.launch_share(launch, result.best, "prefill")
            if result.best["prefill_gpus"]
            else None
        ),
        prompts_per_pass=max(1, (engine["max_tokens"] or 16384) // isl),
        max_tokens=engine["max_tokens"],
        overlap_schedule=engine["overlap_schedule"],
        chunked_prefill=result.best.get("chunked_prefill"),
        model_config=loaded,  # its routed experts, and the launched engine's own page
        page_size=result.page_size,  # the page the search assumed, said to the engine
        moe_backend=result.best.get("moe_backend"),  # TensorRT-LLM's, where its experts take it
        timed_engine=result.engine,
        hardware=hardware,
    )


def _chunked_prefills(text: str) -> list[int] | None:
    """``--chunked-prefills``: the token budgets listed, or None for ``none`` (whole prompts)."""
    return None if text.strip() == "none" else size_list(text, "--chunked-prefills")


@click.command("search")
@click.argument("model")
@click.option(
    "--hardware", "-H", "hardware", required=True, help="Device (mlacalc list --hardware)."
)
@click.option(
    "--gpus",
    "-g",
    "gpus_text",
    default=str(D.GPUS),
    show_default=True,
    help="A GPU budget (one number: split between prefill and decode pools and replicas) or "
    "GPU counts to consider one by one, e.g. 8,16,32 (a disaggregated point's two pools are "
    "then each one of them, both within the largest); one count alone, not a budget, takes a "
    "trailing comma: 8, (the API's gpus=[8]; gpus=8 is the budget).",
)
@click.option("--isl", type=SIZE, required=True, help="Input (prompt) tokens per request.")
@click.option("--osl", type=SIZE, required=True, help="Output tokens per request.")
@click.option("--ttft", type=DURATION, default=None, help="Time-to-first-token target, e.g. 2s.")
@click.option(
    "--tpot", type=DURATION, default=None, help="Time-per-output-token target, e.g. 50ms."
)
@click.option(
    "--served-bias",
    is_flag=True,
    default=False,
    help="Meet --ttft and --tpot as served: hold the predictions to them less the served "
    "figures' measured median bias (TPOT predicted 13.0% short, TTFT 3.9%, of TensorRT-LLM "
    "v0.14's online Llama-3.1 runs on H100 / H200; docs/serving.md), a margin of that size "
    "for any engine, model and device.",
)
@click.option(
    "--weight-dtypes",
    default=None,
    help="Weight dtypes of the layers' linear weights to try (default: the model's, "
    "and fp8); the embedding and head stay as the checkpoint stores them.",
)
@click.option("--kv-dtypes", default="bf16,fp8", show_default=True, help="KV dtypes to try.")
@click.option(
    "--modes",
    default="aggregated,disaggregated",
    show_default=True,
    help="aggregated and/or disaggregated prefill/decode.",
)
@click.option(
    "--chunked-prefills",
    "chunks_text",
    default=",".join(str(n) for n in D.SEARCH_CHUNKS),
    show_default=True,
    help="Chunked-prefill token budgets the aggregated points are also run at ('none': "
    "whole prompts only).",
)
@click.option(
    "--batches",
    "batches_text",
    default=",".join(str(n) for n in D.SEARCH_BATCHES),
    show_default=True,
    help="Running sequences per attention group searched (refined between them near the "
    "best, and up to twice the largest where the best is there).",
)
@memory_options
@click.option(
    "--tp",
    "tp_text",
    default=None,
    help="Tensor-parallel degrees to try, e.g. 8 or 4,8 (an attention group's GPUs, as plan's "
    "--tp: SGLang's --tp 8 --dp 8 --enable-dp-attention is --tp 1 --dp-attention on; "
    "default: every one within a node, or GB200's 72-GPU NVLink domain).",
)
@click.option(
    "--pp",
    "pp_text",
    default=None,
    help="Pipeline stages to try, e.g. 1 or 1,2 (default: 1, and 2, 4, 8 at the largest TP).",
)
@click.option(
    "--ep",
    "ep_text",
    default="any",
    show_default=True,
    help="Expert-parallel degrees to try: 'none', a list (e.g. 8 or 8,16), or 'any' (none, "
    "the TP group's, every GPU).",
)
@click.option(
    "--dp-attention",
    "dp_attention",
    type=click.Choice(["both", "on", "off"]),
    default="both",
    show_default=True,
    help="DP-attention (attention groups sharing the experts) on, off, or both tried.",
)
@click.option(
    "--redundant-experts",
    "redundant_text",
    default="auto",
    show_default=True,
    help="Extra expert replicas (EPLB) every expert-parallel layout places ('auto': the "
    "fewest that make --ep divide the expert slots).",
)
@click.option(
    "--prefill-tp",
    "prefill_tp_text",
    default=None,
    help="Tensor-parallel degrees of a disaggregated prefill pool (default: as --tp).",
)
@click.option(
    "--prefill-ep",
    "prefill_ep_text",
    default=None,
    help="Expert-parallel degrees of a disaggregated prefill pool: any, none or a list "
    "(default: as --ep).",
)
@click.option(
    "--prefill-dp-attention",
    type=click.Choice(["both", "on", "off"]),
    default=None,
    help="DP-attention of a disaggregated prefill pool (default: as --dp-attention).",
)
@click.option(
    "--prefill-redundant-experts",
    "prefill_redundant_text",
    default=None,
    help="Extra expert replicas of a disaggregated prefill pool: auto or a count (default: "
    "as --redundant-experts).",
)
@click.option(
    "--routing-imbalance",
    type=click.FloatRange(1, 100),
    default=1.0,
    show_default=True,
    help=(
        "Tokens of the busiest expert GPU over the mean, as measured (points with expert "
        "parallelism; replaces the modelled sample spread, popularity and placement)."
    ),
)
@click.option(
    "--prefix-cache-hit",
    type=PREFIX_HIT,
    default=0.0,
    show_default=True,
    help="Share of each prompt's tokens whose KV is found cached, in [0, 1): every point's "
    "prompts compute the rest, as plan --prefix-cache-hit times them.",
)
@shared_prefix_option
@click.option(
    "--throughput",
    type=None,
    default=None,
    metavar="TOKENS/S",
    callback=lambda ctx, param, value: _throughput(value),
    help="A throughput target in tokens/s (50000, 50k, 1.2M: SI): the GPUs it needs, in "
    "whole replicas of the point meeting the targets that needs the fewest (the best unless "
    "rounding favours another).",
)
@click.option(
    "--throughput-of",
    type=click.Choice(["output", "total"]),
    default="output",
    show_default=True,
    help="What --throughput counts: output tokens, or prompt and output tokens (total).",
)
@engine_options
@search_engine_options
@launch_options
@profile_option()
@serving_engine_option
@click.option(
    "--all", "all_points", is_flag=True, help="Every point, not only the frontier (csv/json)."
)
@click.option(
    "--no-wall-time",
    "no_wall_time",
    is_flag=True,
    help="Leave out the JSON's seconds (the search's wall time), its one key that differs run to "
    "run: the rest is byte-identical for the same command.",
)
@state_dtype_option
@gpu_hour_price_option
@set_option
@format_option
def command(
    model,
    hardware,
    gpus_text,
    isl,
    osl,
    ttft,
    tpot,
    weight_dtypes,
    kv_dtypes,
    modes,
    chunks_text,
    batches_text,
    memory_reserve,
    engine_memory,
    tp_text,
    pp_text,
    ep_text,
    dp_attention,
    redundant_text,
    routing_imbalance,
    prefill_pass,
    output_lag_steps,
    profile,
    engine,
    all_points,
    no_wall_time,
    state_dtype,
    sets,
    fmt,
    throughput,
    throughput_of,
    gpu_hour_price,
    **engine_opts,
):
    """Search layouts, batch sizes, dtypes and aggregated vs disaggregated serving for the
    deployment with the most output tokens/s per GPU that meets the latency targets; print the
    Pareto frontier of tokens/s per GPU against tokens/s per user, and why the others lose.
    --tp, --pp, --ep, --dp-attention and --redundant-experts limit the layouts tried (of
    both pools of a disaggregated point); the routing options load the experts as plan's do.

    \b
    Examples:
      mlacalc search deepseek-v3 --hardware H200 --gpus 8,16,32 --isl 2000 --osl 500 \\
          --ttft 2s --tpot 50ms
      mlacalc search deepseek-v3 -H H200 --gpus 8 --isl 2000 --osl 500 --tpot 50ms \\
          --tp 1 --dp-attention on --ep 8 --redundant-experts 8 --expert-skew 1
      mlacalc search llama-3-70b -H H100 --gpus 4,8 --isl 1000 --osl 1000 --format csv --all
      mlacalc search qwen3-8b -H H100 --gpus 1,2 --isl 1000 --osl 200 --tpot 100ms \\
          --throughput 50k
      mlacalc search qwen3-8b -H H100 --gpus 1 --isl 1k --osl 200 --gpu-hour-price 2.5
    """
    # deferred: the search loads numpy; `mlacalc --help` stays light
    from mlacalc.serving.scheduler import Scheduler
    from mlacalc.serving.search import search
    from mlacalc.words.arguments import MAX_BATCH

    launch, model_path = launch_values(engine_opts)
    no_launch_of_a_design(launch, sets)
    choices = parse_component_choices(engine_opts.pop("component_choices"))
    _check_output_flags(throughput, throughput_of, all_points, fmt)
    serving_engine = engine  # --engine: whose kernels are timed (the scheduler's options follow)
    # the engine's defaults are search's to fill (engine_defaults): one rule for the API and CLI
    engine = engine_option_values(engine_opts, serving_engine)
    defaults, note = defaults_note(engine, chunked=False)  # whose defaults filled the rest

    # search checks every list (an empty one refused, naming it), mlacalc.cli.main its flag
    result = search(
        loaded := recurrent_state_check(
            load(model, changes=sets, weight_dtype=weight_dtypes), state_dtype
        ),
        hardware,
        _gpus_arg(gpus_text),
        isl=isl,
        osl=osl,
        ttft=ttft,
        tpot=tpot,
        weight_dtypes=_split(weight_dtypes),
        kv_dtypes=_split(kv_dtypes),
        modes=_split(modes),
        memory_reserve=memory_reserve,
        engine_memory=engine_memory,
        state_dtype=state_dtype,
        prefill_pass=prefill_pass,
        output_lag_steps=output_lag_steps,
        profile=load_profile_option(profile),
        engine=serving_engine,
        max_running=engine["max_running"],
        max_tokens=engine["max_tokens"],
        scheduler=Scheduler(host_step_s=engine["host_step_s"]),
        overlap_schedule=engine["overlap_schedule"],
        engine_defaults=defaults or "none",
        component_choices=choices,
        batches=count_list(batches_text, "--batches", "sequences", MAX_BATCH, "64,128,256"),
        chunked_prefills=_chunked_prefills(chunks_text),
        **layout_limits(tp_text, pp_text, ep_text, dp_attention, redundant_text),
        **prefill_layout_limits(engine_opts),
        routing=engine["routing"],
        expert_skew=engine["expert_skew"],
        rebalance=engine["rebalance"],
        routing_imbalance=routing_imbalance,
        prefix_cache_hit=engine_opts.pop("prefix_cache_hit"),
        shared_prefix=engine_opts.pop("shared_prefix"),
        moe_backend=engine["moe_backend"],
        served_bias=engine_opts.pop("served_bias"),
    )
    engine.update(result.scheduler_defaults_applied)  # what plan and launch are given
    if engine["overlap_schedule"] is None:  # no engine's defaults: on, as search ran it
        engine["overlap_schedule"] = True
    stored = stored_weight_dtype(loaded) if fmt in ("json", "csv") else None
    if fmt == "csv":
        _emit_csv(result, all_points, stored, gpu_hour_price)
        _warn_of(result)  # on stderr, as the other formats say them (a trial's CSV had none)
        return
    doc = _priced(result.to_dict(wall_time=not no_wall_time, all_points=all_points), gpu_hour_price)
    target = _throughput_target(result, doc, throughput, throughput_of, gpu_hour_price)
    if stored:  # a checkpoint's points name the dtype it stores, as plan's JSON
        doc["best"] = doc["best"] and with_stored_dtype(doc["best"], stored)
        doc["frontier"] = [with_stored_dtype(p, stored) for p in doc["frontier"]]
    note = with_kernel_versions(note, result.profile)  # the kernels' engine version too
    extra = set_words(sets) + scheduler_words(serving_engine, engine)
    if result.best:
        doc["plan_command"] = plan_command(model, hardware, result, result.best, profile) + extra
    if target:  # the replica's own plan line: plan of it gives its tokens/s
        target["plan_command"] = plan_command(model, hardware, result, target["point"], profile)
        target["plan_command"] += extra
        doc["throughput_target"]["plan_command"] = target["plan_command"]
    text = ""
    if launch and result.best:
        text = doc["launch"] = _launch_lines(
            launch, model_path, hardware, result, engine, isl, loaded
        )
    elif launch:  # said, not left blank: no point to launch
        text = f"# no {launch} launch commands: no deployment meets the targets\n"
    if all_points:
        doc["points"] = [with_stored_dtype(r, stored) for r in doc["points"]]
    emit(
        fmt,
        doc,
        lambda: (
            sections(result, model, hardware, profile, extra, gpu_hour_price)
            + _throughput_sections(throughput, throughput_of, target, hardware, gpu_hour_price)
        ),
    )
    _warn_of(result)
    if fmt in ("table", "markdown"):
        limited = result.constraints_text()
        if limited:
            note = f"# searched under: {limited}\n" + note
        click.echo(note + text, nl=False)


def _gpus_arg(gpus_text: str) -> int | list[int]:
    """``--gpus`` as search takes it: one number is a budget to spend (``gpus=8``); a list, the
    GPU counts one by one (``8,16``, or ``8,`` for the one count 8: ``gpus=[8]``)."""
    # deferred: the search loads numpy; `mlacalc --help` stays light
    from mlacalc.serving.search import MAX_BUDGET

    counts = count_list(gpus_text, "--gpus", "GPUs", MAX_BUDGET, "8,16,32")
    return counts[0] if len(counts) == 1 and "," not in gpus_text else counts


def _warn_of(result) -> None:
    """The search's warnings on stderr (an engine standing in is in the times' note already)."""
    for w in result.warnings:
        if MLA_GEOMETRY_SAID in w or w not in result.calibration:
            warn(w)


def _emit_csv(result, all_points: bool, stored: str | None, price: float | None = None) -> None:
    """The frontier's rows (every point's with --all) as CSV, with a
    ``usd_per_million_output_tokens`` column at a ``price`` a GPU-hour; nothing timed: the
    header alone says what the columns would be."""
    # deferred: the search loads numpy; `mlacalc --help` stays light
    from mlacalc.serving.search import ROW_FIELDS

    rows = result.rows() if all_points else [result.row(p) for p in result.frontier]
    rows = [with_stored_dtype(r, stored) for r in rows]
    if price is not None:
        rows = [{**r, PRICE_KEY: _usd(r, price)} for r in rows]
    if not rows:
        click.echo(",".join([*ROW_FIELDS, *([PRICE_KEY] if price is not None else [])]))
        return
    emit("csv", rows, list, rows_csv=True)


def _check_output_flags(throughput, throughput_of: str, all_points: bool, fmt: str) -> None:
    """--throughput, --throughput-of and --all against each other and --format, each refusal
    naming the flag and its fix."""
    if throughput_of != "output" and throughput is None:
        raise click.BadParameter(
            "says what --throughput counts: give --throughput TOKENS/S with it",
            param_hint="--throughput-of",
        )
    if throughput is not None and fmt == "csv":
        raise click.BadParameter(
            "answers in a table, markdown or json (csv lists points): give --format json",
            param_hint="--throughput",
        )
    if all_points and fmt not in ("csv", "json"):  # a table prints the frontier only
        raise click.BadParameter(
            "lists every point in --format csv or json: give one of them", param_hint="--all"
        )


#: a point's dollars a million output tokens at --gpu-hour-price (its JSON and CSV key)
PRICE_KEY = "usd_per_million_output_tokens"


def _usd(p: dict[str, Any], price: float) -> float | None:
    """A point's dollars a million output tokens at ``price`` a GPU-hour: each GPU's hour over
    the output tokens it serves an hour (:func:`mlacalc.serving.price.per_million`, one GPU);
    None where the point serves none."""
    rate = p.get("output_tokens_per_s_per_gpu")
    return per_million(price, 1, rate) if rate else None


def _priced(doc: dict, price: float | None) -> dict:
    """``doc`` with, at a ``price`` a GPU-hour, the JSON's ``gpu_hour_price`` and each point's
    :data:`PRICE_KEY` (best, frontier, every point with --all); as it is without one."""
    if price is None:
        return doc
    doc["gpu_hour_price"] = price
    points = doc.get("points")  # a count, or every point's record with --all
    listed = points if isinstance(points, list) else []
    for p in [doc.get("best"), *doc.get("frontier", []), *listed]:
        if p:
            p[PRICE_KEY] = _usd(p, price)
    return doc


def _throughput_target(
    result, doc: dict, throughput, throughput_of: str, price: float | None = None
) -> dict | None:
    """--throughput's answer (``SearchResult.gpus_for``; None without a deployment meeting
    the targets), put in ``doc`` as ``throughput_target`` without its point, with its GPUs'
    dollars an hour (``usd_per_hour``) at a ``price`` a GPU-hour; None unasked."""
    if throughput is None:
        return None
    target = result.gpus_for(throughput, of=throughput_of) if result.best is not None else None
    doc["throughput_target"] = target and {k: v for k, v in target.items() if k != "point"}
    if target and price is not None:
        doc["throughput_target"]["usd_per_hour"] = target["gpus"] * price
    return target


def sections(
    result,
    model: str | None = None,
    hardware: str | None = None,
    profile=None,
    extra: str = "",
    price: float | None = None,
):
    """The best deployment, the frontier and the count of losers by reason; at a ``price`` a
    GPU-hour, each point's dollars a million output tokens (a column: the ranking is tokens/s
    per GPU's, which at one price a GPU is the same order)."""
    heads = [title for _, title in _POINT_COLUMNS] + (["$/M out"] if price is not None else [])

    def _row(p: dict[str, Any]) -> list[str]:
        return _point_row(p) + ([money(_usd(p, price))] if price is not None else [])

    out = []
    served = result.served_targets or {}
    targets = [
        f"{name} <= {duration_text(value)}"
        + (f" predicted for {duration_text(served[key])} served" if served.get(key) else "")
        for name, key, value in (
            ("TTFT", "ttft_s", result.ttft_target_s),
            ("TPOT", "tpot_s", result.tpot_target_s),
        )
        if value
    ]
    if result.best:
        b = result.best
        best_note = times_note(
            result.profile,
            result.best_calibration or result.calibration,
            result.engine,
            result.default_engine_note,
            hardware or result.hardware,
            b["gpus"],  # one deployment's (a replica's under a budget), both pools'
        )
        if result.budget:
            best_note += (
                f" Budget {result.budget} GPUs: {b['replicas']} replica(s) of {b['gpus']} GPUs, "
                f"{b['budget_output_tokens_per_s']:,.0f} output tokens/s,"
            )
        else:
            best_note += " One deployment:"
        best_note += (
            f" {b['requests_per_s'] * b['replicas']:,.2f} requests/s, a request's latency "
            f"{plan_duration(b['request_latency_s'])} "
            f"(TTFT + {'osl' if b['mode'] == 'disaggregated' else '(osl - 1)'} x TPOT)."
        )
        if model is not None:
            best_note += " The same figures: " + plan_command(
                model, hardware or result.hardware, result, result.best, profile
            )
            best_note += extra  # the engine's options (scheduler_words)
        if result.prediction.get("note"):  # the error to expect, as plan of the best says it
            best_note += f"\n{result.prediction['note']}"
        out.append(
            Section(
                f"Best deployment of {result.model} on {result.hardware} "
                f"({', '.join(targets) or 'no latency targets'})",
                heads,
                [_row(result.best)],
                note=best_note,
            )
        )
    else:
        title = f"No deployment of {result.model} on {result.hardware} "
        if result.points:
            title += f"meets {' and '.join(targets)}"
        else:
            title += f"can serve requests of {result.isl:,} + {result.osl:,} tokens"
        out.append(
            Section(
                title,
                ["reason", "points"],
                [[k, str(v)] for k, v in sorted(result.reasons.items())],
                note=times_note(
                    result.profile,
                    result.calibration,
                    result.engine,
                    result.default_engine_note,
                    hardware or result.hardware,
                )
                if result.points
                else notes_text(result.notes),
            )
        )
    if not result.points:  # nothing was timed: the reasons above are the whole answer
        return out
    out.append(
        Section(
            "Pareto frontier: tokens/s per GPU against tokens/s per user",
            [*heads, "meets targets"],
            [[*_row(p), "yes" if p["meets_targets"] else "no"] for p in result.frontier],
            # a capacity analyst read the layouts' words undefined
            note="Layouts as printed (TP, DP-attention, EP, MoE-TP, + prefill, chunks, tbo): "
            "docs/glossary.md.",
        )
    )
    out.append(
        Section(
            f"Why the others lose: the {len(result.points):,} points timed ({result.layouts} "
            f"layouts, {result.seconds:.2f} s)",
            ["reason", "points"],
            [[k, f"{v:,}"] for k, v in sorted(result.point_reasons.items(), key=lambda kv: -kv[1])],
            note=(
                (
                    "Each point is counted once, under its first reason: misses TTFT, misses TPOT, "
                    "then on the frontier or beaten; a point can fail several ways "
                    + (f"({result.missing_both:,} miss both)" if result.missing_both else "")
                    + ". "
                    "Disaggregated GPUs read decode+prefill. "
                )
                + notes_text(result.notes)
            ).strip(),
        )
    )
    if result.ruled_out:
        out.append(
            Section(
                f"Candidates ruled out before timing ({sum(result.ruled_out.values()):,})",
                ["reason", "candidates"],
                [[k, f"{v:,}"] for k, v in sorted(result.ruled_out.items(), key=lambda kv: -kv[1])],
            )
        )
    return out


def _throughput(value: str | None) -> float | None:
    """``--throughput``: tokens/s as a number with an optional SI suffix (``50k`` = 50,000,
    ``1.2M`` = 1,200,000); anything else, zero or less refused naming the option."""
    if value is None:
        return None
    text = str(value).strip()
    scale = {"k": 1e3, "m": 1e6, "g": 1e9}.get(text[-1:].lower(), 1.0)
    number = text[:-1] if scale != 1.0 else text
    try:
        out = float(number) * scale
    except ValueError:
        out = None
    if out is None or not out > 0 or out == float("inf"):
        raise click.BadParameter(
            f"{text!r} is not a positive number of tokens/s; write e.g. --throughput 50000 or 50k",
            param_hint="--throughput",
        )
    return out


def _nodes_words(gpus: int, node: int | None) -> str:
    """The GPUs a target needs in whole nodes of the device (a capacity analyst priced '16
    GB200' with no word of its 4-GPU trays): " (4 nodes of 4)", "" where the node is unknown
    or one GPU."""
    if not node or node <= 1:
        return ""
    nodes = -(-gpus // node)
    spare = nodes * node - gpus
    said = f"{nodes:,} node{'s' if nodes > 1 else ''} of {node}"
    return f" ({said}" + (f", {spare} GPUs spare)" if spare else ")")


def _throughput_sections(
    throughput, of, target, hardware: Any = None, price: float | None = None
) -> list:
    """The GPUs a --throughput target needs, as one table (none without the option; a
    sentence where no point meets the targets); at a ``price`` a GPU-hour, their dollars an
    hour too."""
    if throughput is None:
        return []
    what = "output tokens/s" if of == "output" else "tokens/s (prompt + output)"
    title = f"GPUs for {throughput:,.0f} {what}"
    if target is None:
        return [
            Section(title, ["answer"], [["no deployment meets the targets: none to replicate"]])
        ]
    t = target
    p = t["point"]
    node = p_hardware_node(hardware) if hardware is not None else None
    return [
        Section(
            title,
            [
                "layout",
                "mode",
                "GPUs a replica",
                f"{what} a replica",
                "replicas",
                "GPUs",
                what,
                *(["$ an hour"] if price is not None else []),
            ],
            [
                [
                    t["layout"],
                    t["mode"],
                    t["replica_gpus"],
                    f"{t['replica_tokens_per_s']:,.0f}",
                    t["replicas"],
                    f"{t['gpus']:,}{_nodes_words(t['gpus'], node)}",
                    f"{t['tokens_per_s']:,.0f}",
                    *([money(t["gpus"] * price)] if price is not None else []),
                ]
            ],
            note=(
                f"Whole replicas of one point meeting the targets (batch {p['batch_per_group']} "
                f"a group, {p['kv_dtype']} KV, TTFT {plan_duration(p['ttft_s'])}, TPOT "
                f"{plan_duration(p['tpot_s'])}): the one needing the fewest GPUs"
                + (
                    " (the best deployment)"
                    if p.get("reason") == "best"
                    else ", not the best deployment: whole replicas of the best come to more"
                )
                + ". A load balancer in front; total tokens/s count each prompt whole "
                "(cached tokens too)."
                + (f" {t['note'][0].upper()}{t['note'][1:]}." if t.get("note") else "")
                + (
                    f" Were each replica's tokens/s over-predicted by {t['served_error']:.1%} "
                    "(the offline served table's median, docs/serving.md): "
                    f"{t['gpus_at_served_error']:,} GPUs."
                    if t.get("gpus_at_served_error") is not None
                    else ""
                )
                + (f" One replica's plan: {t['plan_command']}" if t.get("plan_command") else "")
            ),
        )
    ]
