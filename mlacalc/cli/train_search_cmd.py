"""`mlacalc train-search`: which training layouts of N GPUs fit a model, and which is fastest
(:func:`mlacalc.training.layout_search.training_search`, each layout priced as `mlacalc train`
prices it)."""

from __future__ import annotations

import shlex

import click

from mlacalc.cli.common import (
    FRACTION,
    SIZE,
    Section,
    count_list,
    emit,
    format_option,
    load,
    set_option,
    warn,
)
from mlacalc.render import human_bytes, human_seconds
from mlacalc.training.flops import RECOMPUTE_POLICIES, SCHEDULES, TRAINING_IMPLS
from mlacalc.training.lora import BASE_DTYPES, TARGETS
from mlacalc.training.memory import OPTIMIZERS, PRECISIONS, SWIGLU
from mlacalc.words import defaults as D

_MAX = 1 << 20
_COLUMNS = ("#", "layout", "ZeRO", "recompute", "micro-batch", "step", "tokens/s/GPU", "MFU",
            "memory/GPU", "bound")  # fmt: skip


def _counts(text: str | None, option: str, example: str, what: str = "ranks") -> list[int] | None:
    return None if text is None else count_list(text, option, what, _MAX, example)


def _layout(c) -> str:
    lay = c.layout
    words = [f"TP{lay.tp}"]
    words += [f"CP{lay.cp}"] if lay.cp > 1 else []
    words += [f"PP{lay.pp}"] + ([f"v{lay.vp}"] if lay.vp > 1 else [])
    words += [f"DP{lay.dp}"] + ([f"EP{lay.ep}"] if lay.ep > 1 else [])
    return " ".join(words)


def train_command(model: str, hardware: str, c, fixed: dict) -> str:
    """The ``mlacalc train`` line that prints a ranked layout's whole breakdown."""
    lay = c.layout
    words = ["mlacalc train", shlex.quote(model), f"--hw {shlex.quote(hardware)}",
             f"-s {c.seq_len}", f"--tp {lay.tp}", f"--pp {lay.pp}", f"--dp {lay.dp}"]  # fmt: skip
    words += [f"--{k} {v}" for k, v in (("cp", lay.cp), ("ep", lay.ep)) if v > 1]
    words += [f"--virtual-stages {lay.vp}"] if lay.vp > 1 else []
    words += [f"--micro-batch {lay.micro_batch}", f"--global-batch {lay.global_batch}"]
    words += [f"--zero {c.zero}", f"--recompute {c.recompute}"]
    for key, value in fixed.items():
        if value is True:
            words.append(f"--{key.replace('_', '-')}")
        elif value not in (None, False):
            words.append(f"--{key.replace('_', '-')} {shlex.quote(str(value))}")
    return " ".join(words)


def _reason(reason: str, n: int) -> str:
    """A count of layouts that do not fit, by reason ('refused (FIELD)': the cost function's)."""
    if reason.startswith("refused"):
        return f"{n:,} {reason.replace('refused', 'refused by the cost function', 1)}"
    return f"{n:,} on the {reason}"


def _sections(s, model: str, fixed: dict) -> list[Section]:
    from mlacalc.training.layout_search import bound_of  # deferred: loads the time model

    rows = []
    for i, c in enumerate(s.ranked, 1):
        name, share = bound_of(c)
        ties = s.ties(i - 1)
        zero = f"{c.zero} (or {', '.join(map(str, ties))})" if ties else c.zero
        rows.append([
            i, _layout(c), zero, c.recompute, c.layout.micro_batch,
            human_seconds(c.time.step_s), f"{c.tokens_per_s_per_gpu:,.0f}", f"{c.mfu:.1%}",
            human_bytes(c.memory_per_gpu), f"{name} ({share:.0%})",
        ])  # fmt: skip
    why = ", ".join(_reason(r, n) for r, n in s.not_fit.items()) or "none"
    note = (
        f"{s.tried:,} layouts tried, {s.fitted:,} fit the {human_bytes(s.usable_memory_bytes)} "
        f"usable of a {s.hardware} (memory reserve kept), {s.tried - s.fitted:,} do not ({why}); "
        f"{s.priced:,} pricings of the cost function (`mlacalc train`'s), the rest pruned "
        'before pricing (docs/training.md, "Layout search"); ranked by step time at the '
        "global batch (the order of tokens a second); a layout that differs from a row only "
        "by its ZeRO stage and takes the same step is folded into it (ZeRO '3 (or 1, 2)': "
        "the row's stage needs the least memory); bound: the part of the step that takes "
        "the most of it"
    )
    note += "".join(f"; {n}" for n in s.notes)
    if s.best is not None:
        note += f"; the best's whole breakdown: {train_command(model, s.hardware, s.best, fixed)}"
    gpus = ", ".join(f"{g:,}" for g in s.gpus)
    return [
        Section(
            f"{s.model}: fastest training layouts on {gpus} x {s.hardware} ({s.seq_len:,} "
            f"tokens, global batch {s.global_batch:,} sequences)",
            list(_COLUMNS),
            rows,
            note=note,
            text_columns=(1, 2, 3, 9),
        )
    ]


@click.command("train-search")
@click.argument("model")
@click.option("--hardware", "-H", "--hw", "hardware", required=True, help="The GPU.")
@click.option("--gpus", required=True, help="GPUs (a count, or a list: 32,64).")
@click.option("--global-batch", type=SIZE, required=True, help="Sequences per step.")
@click.option("--seq-len", "-s", type=SIZE, default="4k", show_default=True)
@click.option("--top", type=click.IntRange(1, 1000), default=5, show_default=True)
@click.option("--tp", default=None, help="Tensor-parallel sizes searched (default: all).")
@click.option("--pp", default=None, help="Pipeline stages searched (default: all).")
@click.option("--cp", default=None, help="Context-parallel sizes searched (default: all).")
@click.option("--ep", default=None, help="Expert-parallel sizes searched (default: all).")
@click.option("--micro-batch", default=None, help="Micro-batch sizes searched (default: all).")
@click.option(
    "--virtual-stages",
    default=None,
    help="Interleaved schedules searched, e.g. 1,2,4 (default 1: plain 1F1B).",
)
@click.option("--zero", default=None, help="ZeRO stages searched, e.g. 1,3 (default 0-3).")
@click.option(
    "--recompute", default=None, help=f"Policies searched ({', '.join(RECOMPUTE_POLICIES)})."
)
@click.option("--impl", type=click.Choice(list(TRAINING_IMPLS)), default="expanded")
@click.option("--swiglu", type=click.Choice(list(SWIGLU)), default="fused")
@click.option("--optimizer", type=click.Choice(list(OPTIMIZERS)), default="adamw")
@click.option("--precision", type=click.Choice(list(PRECISIONS)), default="bf16-mixed")
@click.option("--overlap", is_flag=True, help="Hide TP/EP/PP communication behind compute.")
@click.option("--comm-sms", type=click.IntRange(0, 1 << 16), default=0)
@click.option("--memory-reserve", type=FRACTION, default=D.MEMORY_RESERVE, show_default=True)
@click.option("--lora-rank", type=SIZE, default=None)
@click.option("--lora-targets", type=click.Choice(list(TARGETS)), default=None)
@click.option("--base-dtype", type=click.Choice(list(BASE_DTYPES)), default="compute")
@click.option(
    "--schedule",
    type=click.Choice(list(SCHEDULES)),
    default="1f1b",
    show_default=True,
    help="Pipeline schedule, train's (zb-h1: no interleaving searched).",
)
@set_option
@format_option
def command(model, hardware, gpus, global_batch, seq_len, top, tp, pp, cp, ep, micro_batch,
            virtual_stages, zero, recompute, sets, fmt, **fixed):  # fmt: skip
    """Which layouts of N GPUs fit a model's training, and which is fastest.

    Every layout of --gpus GPUs (tensor parallel within a node, or an NVLink domain of
    several: GB200's 72 GPUs; context, pipeline, data and expert parallel, ZeRO 0-3,
    recompute none / kv_up / full, micro-batches that split the global batch), each priced
    as `mlacalc train` prices it; the fastest that fit, and why the rest do not. The other
    options are train's, held fixed.

    \b
    Examples:
      mlacalc train-search llama-3.1-70b --hw H100 --gpus 64 -s 8k --global-batch 512
      mlacalc train-search deepseek-v3 --hw H800 --gpus 256 --global-batch 1024 \\
          --precision fp8-mixed --overlap --zero 1 --recompute kv_up,full
      mlacalc train-search llama-3.1-8b --hw H100 --gpus 8,16 --global-batch 64 --top 10
    """
    # deferred: the training model loads numpy and the time model; --help stays light
    from mlacalc.training.layout_search import training_search

    m = load(model, changes=sets)
    limits = {
        "tp": _counts(tp, "--tp", "4,8"),
        "pp": _counts(pp, "--pp", "1,2,4"),
        "cp": _counts(cp, "--cp", "1,2"),
        "ep": _counts(ep, "--ep", "8,16"),
        "micro_batch": _counts(micro_batch, "--micro-batch", "1,2", "sequences"),
        "virtual_stages": _counts(virtual_stages, "--virtual-stages", "1,2,4", "stages"),
        "zero": _choices(zero, "--zero", ("0", "1", "2", "3"), int),
        "recompute": _choices(recompute, "--recompute", tuple(RECOMPUTE_POLICIES), str),
    }
    fixed = {k: v for k, v in fixed.items() if v is not None}
    s = training_search(
        m, hardware, count_list(gpus, "--gpus", "GPUs", _MAX, "64,128"), global_batch, seq_len,
        top=top, **limits, **fixed,
    )  # fmt: skip
    shown = {k: v for k, v in fixed.items() if not _default(k, v)}
    emit(fmt, s.to_dict(), lambda: _sections(s, model, shown))
    if s.advice:
        warn(f"no layout fits: {s.advice}")


def _choices(text: str | None, option: str, options: tuple[str, ...], kind) -> list | None:
    if text is None:
        return None
    parts = [p.strip() for p in text.split(",") if p.strip()]
    for p in parts:
        if p not in options:
            raise click.BadParameter(
                f"'{p}' is not one of {', '.join(options)}; give one or several, e.g. "
                f"{options[1]},{options[-1]}",
                param_hint=option,
            )
    if not parts:
        raise click.BadParameter(f"is empty; give one of {', '.join(options)}", param_hint=option)
    return [kind(p) for p in parts]


_DEFAULTS = {
    "impl": "expanded",
    "swiglu": "fused",
    "optimizer": "adamw",
    "precision": "bf16-mixed",
    "overlap": False,
    "comm_sms": 0,
    "memory_reserve": D.MEMORY_RESERVE,
    "base_dtype": "compute",
    "schedule": "1f1b",
}


def _default(key: str, value) -> bool:
    return key in _DEFAULTS and _DEFAULTS[key] == value
