"""`mlacalc plan --compare-engines`: the same deployment planned under each serving engine, side
by side (a trial moving a fleet from SGLang to vLLM looped over three plans and put their
figures together by hand, where a stand-in timing most of two engines' steps alike was easy to
miss)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from mlacalc.cli.common import Section, emit, warn
from mlacalc.cli.serving_flags import defaults_note, engine_option_values
from mlacalc.serving.price import money
from mlacalc.words.engines import ENGINE_LABELS
from mlacalc.words.errors import MlacalcError

#: the engines compared, in the order their rows are printed
ENGINES = ("trtllm", "sglang", "vllm")

SCHEMA = "mlacalc.plan-engines/1"


def refuse_with_one_engine(engine: str | None, launch: str | None) -> None:
    """--compare-engines times every engine: one named beside it (--engine, --launch) is
    refused in one line naming the fix."""
    if engine is not None:
        raise click.UsageError(
            f"--compare-engines plans every engine; --engine {engine} names one: give one of them"
        )
    if launch is not None:
        raise click.UsageError(
            f"--compare-engines gives no launch commands; for --launch {launch}, plan one "
            f"engine (--engine {launch})"
        )


def compare(
    make_plan: Callable[..., Any],
    args: tuple[Any, Any, int],
    kwargs: dict[str, Any],
    engine_opts: dict[str, Any],
    chunked: bool | str,
    fmt: str,
    gpu_hour_price: float | None = None,
) -> None:
    """Plan ``args`` (model, hardware, GPUs) with ``kwargs`` under each of :data:`ENGINES`,
    each with its own kernels and scheduler defaults as ``plan --engine E`` takes them
    (``engine_opts``: the engine options given, the same for each), and print one row each:
    its figures, how its kernels were predicted and the error to expect; an engine that
    refuses the deployment gets its one-line reason; with ``gpu_hour_price`` (US dollars a
    GPU-hour) each row adds what a million output tokens cost at it (its plan's
    :meth:`~mlacalc.serving.plan.Plan.price`). Warnings go to stderr, those of one
    engine only prefixed with its name."""
    plans: dict[str, Any] = {}
    refused: dict[str, str] = {}
    for engine in ENGINES:
        values = engine_option_values(dict(engine_opts), engine)
        defaults, _ = defaults_note(values, chunked)
        try:
            plans[engine] = make_plan(
                *args, **kwargs, engine=engine, engine_defaults=defaults or "none", **values
            )
        except MlacalcError as exc:
            refused[engine] = str(exc)
    rows = [_row(e, plans.get(e), refused.get(e), gpu_hour_price) for e in ENGINES]
    doc = {
        "schema": SCHEMA,
        "engines": rows,
        "plans": {e: p.to_dict() for e, p in plans.items()},
    }
    emit(fmt, doc, lambda: [_section(rows, gpu_hour_price is not None)])
    _warnings(plans)


def _row(engine: str, p: Any, refused: str | None, price: float | None) -> dict[str, Any]:
    """One engine's figures as the comparison gives them (None where the plan has none); the
    dollars a million output tokens only where a ``price`` a GPU-hour is given."""
    out: dict[str, Any] = {"engine": engine, "refused": refused}
    if price is not None:
        cost = p and p.price(price)
        out["usd_per_million_output_tokens"] = cost and cost.usd_per_million_output_tokens
    if p is None:
        return out
    route = p.prediction or {}
    err = route.get("expected_error") or {}
    out.update(
        fits=p.fits,
        layout=p.layout,
        max_batch=p.max_batch,
        decode_step_s=p.decode_step_s,
        ttft_s=p.ttft_s,
        tpot_s=p.tpot_s,
        output_tokens_per_s_per_gpu=_per_gpu(p),
        engine_route=route.get("engine_route"),
        engine_profile=route.get("engine_profile"),
        stand_in_share=route.get("stand_in_share"),
        unmeasured_share=route.get("unmeasured_share"),
        expected_error_median=err.get("median"),
        scheduler_defaults=p.scheduler_defaults,
    )
    return out


def _per_gpu(p: Any) -> float | None:
    """Output tokens/s per GPU of a served plan (both pools', disaggregated)."""
    rate = getattr(p, "output_tokens_per_s", None)
    if rate is None:
        return None
    return rate / (p.gpus + (p.prefill_gpus or 0))


def _ms(x: float | None) -> str:
    return "-" if x is None else f"{x * 1e3:,.2f}"


def _route_words(r: dict[str, Any]) -> str:
    """How much of the engine's step another engine's fits time."""
    route = r.get("engine_route")
    if route == "stand_in":
        return f"all ({ENGINE_LABELS.get(r['engine_profile'], r['engine_profile'])}'s kernels)"
    if route == "partly_stand_in":
        return f"{r['stand_in_share']:.0%} of the decode step"
    return "none" if route else "-"


def _unmeasured_words(r: dict[str, Any]) -> str:
    """How much of the engine's decode step is kernels no shared table measures (a Mamba-2
    state update timed as a GEMM: provenance.UNMEASURED_KERNELS), each engine alike."""
    share = r.get("unmeasured_share")
    return "-" if share is None else "none" if share == 0 else f"{share:.0%} of the decode step"


def _section(rows: list[dict[str, Any]], priced: bool = False) -> Section:
    heads = ["engine", "fits", "largest batch", "decode step ms", "TTFT ms", "TPOT ms",
             "output tok/s/GPU", *(["$ / M output tokens"] if priced else []),
             "timed by another engine's fits", "measured by no table",
             "expected error"]  # fmt: skip
    table = []
    for r in rows:
        label = ENGINE_LABELS[r["engine"]]
        if r["refused"]:
            table.append([label, "refused: " + r["refused"], *[""] * (len(heads) - 2)])
            continue
        e = r["expected_error_median"]
        table.append([
            label,
            "yes" if r["fits"] else "no",
            "-" if r["max_batch"] is None else f"{r['max_batch']:,}",
            _ms(r["decode_step_s"]),
            _ms(r["ttft_s"]),
            _ms(r["tpot_s"]),
            "-" if r["output_tokens_per_s_per_gpu"] is None
            else f"{r['output_tokens_per_s_per_gpu']:,.1f}",
            *([money(r["usd_per_million_output_tokens"])] if priced else []),
            _route_words(r),
            _unmeasured_words(r),
            "not measured" if e is None else f"{e:.1%} median (kernels)",
        ])  # fmt: skip
    return Section(
        "The same deployment under each engine",
        heads,
        table,
        note=(
            "Each engine's kernels and scheduler defaults, as plan --engine E gives them (its "
            "full table: that command). Where another engine's fits time part of a step (a "
            "stand-in, where the engine's own tables time no such kernel), engines compared on "
            "it are compared on one table: the column says how much. Measured by no table: the "
            "step's kernels no shared table measures (a Mamba-2 or Kimi Delta Attention state "
            "update timed as a GEMM), every engine's timed by another kind of kernel's fit. "
            "Expected error: the "
            "kernel tables' median |error| for that engine's route (README.md), not TTFT's or "
            "TPOT's."
            + (
                " $ / M output tokens: the GPUs' hour at --gpu-hour-price over the output "
                "tokens served an hour (plan --gpu-hour-price gives the rest)."
                if priced
                else ""
            )
        ),
    )


def _warnings(plans: dict[str, Any]) -> None:
    """Each plan's warnings on stderr: those every engine's plan gives once, the others
    prefixed with the engine's name."""
    said = {e: list(p.warnings) for e, p in plans.items()}
    common = set.intersection(*(set(w) for w in said.values())) if said else set()
    for w in next(iter(said.values()), []):
        if w in common:
            warn(w)
    for e, ws in said.items():
        for w in ws:
            if w not in common:
                warn(f"{ENGINE_LABELS[e]}: {w}")
