"""The ``mlacalc`` command line: capacity questions answered in one command.

Every report takes ``--format table|markdown|json|csv``. JSON and CSV keep exact
integers and carry units in their field names; table and markdown print bytes in
binary units (KiB, MiB, GiB) and FLOPs and parameters in SI units (K, M, G, T), and
say so. Errors print one line on stderr and exit with status 2.

Layout: this module holds the command group, the one-line error handling and
:func:`main` (the ``mlacalc`` entry point); :mod:`mlacalc.cli.common` the shared
argument types, options and output; every command lives in its own module of this
package and defines a :class:`click.Command` named ``command``.

Adding a command is one line: write ``mlacalc/cli/<module>.py`` with
``@click.command("<name>") ... def command(...)``, then add ``"<name>": "<module>"`` to
:data:`COMMANDS` below. Command modules are imported only when their command runs (or
when help lists them), so a command's imports never slow another one down.
"""

from __future__ import annotations

import difflib
import importlib
import itertools
import os
import re
import sys
import warnings

import click

from mlacalc.models.schema import SPECS
from mlacalc.words.errors import MlacalcError, MlacalcWarning

__all__ = ["COMMANDS", "TRAINING", "cli", "main"]

#: Command name -> module of this package that defines it as ``command``.
COMMANDS: dict[str, str] = {
    "list": "list_cmd",
    "report": "report_cmd",
    "compare": "compare_cmd",
    "convert": "convert_cmd",
    "train": "train_cmd",
    "train-search": "train_search_cmd",
    "formula": "formula_cmd",
    "import-hf": "import_hf_cmd",
    "roofline": "roofline_cmd",
    "plan": "plan_cmd",
    "search": "search_cmd",
    "validate": "validate_cmd",
    "calibrate": "calibrate_cmd",
    "bench": "bench_cmd",
}


#: the commands whose errors name the training API's fields as their options
TRAINING = ("train", "train-search")

#: Words a user may try for a command, and the commands that do it (the API's names among them).
_MEANT = {
    **dict.fromkeys(
        ("predict", "predict-time", "predict_time", "time", "estimate"),
        "'roofline' (one step's kernel times) or 'plan' (a deployment's TTFT, TPOT and throughput)",
    ),
    **dict.fromkeys(("serve", "simulate", "deploy"), "'plan' (or 'search' for the layouts)"),
    **dict.fromkeys(("fit", "calibration"), "'calibrate'"),
    **dict.fromkeys(("benchmark", "measure"), "'bench'"),
    # the catalogue's nouns (a new user's trial typed `mlacalc models`)
    **dict.fromkeys(("models", "model", "ls", "catalogue", "catalog"), "'list' (the models)"),
    **dict.fromkeys(("hardware", "gpus", "devices"), "'list --hardware' (the devices)"),
}


#: per command, the sibling whose options a user reaches for on it, and what to say: plan
#: times one layout, search finds those that meet a target (a trial typed plan --tpot 50ms)
_SIBLING_OPTIONS = {
    "plan": (
        "search",
        "it is an option of 'mlacalc search', which finds the layouts that meet a target "
        "(mlacalc search MODEL -H DEVICE --tpot 50ms ...); plan times the one layout given",
    ),
    "search": (
        "plan",
        "it is an option of 'mlacalc plan', which times one layout (mlacalc plan MODEL -H "
        "DEVICE --gpus N --tp T ...); search tries the layouts itself",
    ),
}


class _LazyGroup(click.Group):
    """A group whose commands are imported from :data:`COMMANDS` on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        module = COMMANDS.get(cmd_name)
        if module is None:
            return None
        return importlib.import_module(f"{__name__}.{module}").command

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        name = str(args[0]) if args else ""
        if name and not name.startswith("-") and name not in COMMANDS:
            close = difflib.get_close_matches(name, list(COMMANDS))
            hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
            if name.lower() in _MEANT:
                hint = f" Did you mean {_MEANT[name.lower()]}?"
            if not hint:  # nothing close: the commands there are, as click's help lists them
                hint = f" The commands: {', '.join(COMMANDS)}."
            ctx.fail(f"No such command {name!r}.{hint}")
        return super().resolve_command(ctx, args)


@click.group(
    cls=_LazyGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(package_name="mlacalc", prog_name="mlacalc")
def cli() -> None:
    """mlacalc: what an attention design costs (KV cache, parameters, FLOPs, bytes).

    \b
    Examples:
      mlacalc list
      mlacalc report deepseek-v3 --seq-len 128k --batch 8 --kv-dtype fp8
      mlacalc compare llama-3-70b deepseek-v2 --seq-len 32k
      mlacalc compare deepseek-v3 --as-variants
      mlacalc formula attention_flops --variant mla --impl absorbed --phase decode
    """


_NO_ARGS_IS_HELP = getattr(click.exceptions, "NoArgsIsHelpError", ())  # click >= 8.2


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _option_for(argv: list[str] | None, argument: str) -> str | None:
    """The option of the command in ``argv`` that an API argument name comes from, if any."""
    words = list(sys.argv[1:] if argv is None else argv)
    name = next((w for w in words if not str(w).startswith("-")), None)
    if name not in COMMANDS:
        return None
    command = cli.get_command(click.Context(cli), str(name))
    flag = "--" + str(argument).replace("_", "-")
    # search takes lists: --kv-dtypes; one flag repeated gives a list: --component-choice
    for candidate in (flag, flag + "s", flag.removesuffix("s")):
        for param in command.params if command else ():
            if candidate in getattr(param, "opts", ()):
                return candidate
    return None


def _flags_named(argv: list[str] | None, message: str) -> str:
    """``train``'s and ``train-search``'s error with the API fields it names (``lora_rank``,
    ``global_batch``) as the command's options (``--lora-rank``, ``--global-batch``); other
    commands' as they are."""
    words = list(sys.argv[1:] if argv is None else argv)
    if next((w for w in words if not str(w).startswith("-")), None) not in TRAINING:
        return message

    def flag(found: re.Match[str]) -> str:
        return _option_for(argv, found.group(0)) or found.group(0)

    message = re.sub(r"(?<![\w.'-])[a-z]+(?:_[a-z]+)+(?![\w'(-])", flag, message)
    # a one-word field the advice sets to a value ("use cp 1, or impl expanded", "search
    # schedule 1f1b"): the option, only after the advice's own words
    return re.sub(r"(?:(?<=use )|(?<=, or )|(?<=search ))[a-z]+(?= [\w.-])", flag, message)


def _flag_given_a_value(
    message: str, command: click.Command | None, argv: list[str] | None
) -> str | None:
    """For click's "unexpected extra argument (72)" where the word before ``72`` is an on/off
    flag of the command (``--dp-attention 72``): the flag's own words, or None."""
    extra = re.match(r"Got unexpected extra arguments? \((.+)\)$", message)
    if not extra or command is None:
        return None
    words = [str(w) for w in (sys.argv[1:] if argv is None else argv)]
    flags = {
        opt
        for p in command.params
        if isinstance(p, click.Option) and p.is_flag
        for opt in (*p.opts, *p.secondary_opts)
    }
    first = extra.group(1).split()[0]
    for before, word in itertools.pairwise(words):
        if word == first and before in flags:
            return (
                f"{before} is an on/off flag and takes no value: drop {word!r} "
                f"(write {before} alone)"
            )
    return None


def _usage_message(exc: click.UsageError, argv: list[str] | None = None) -> str:
    """The error's message; an unknown option that names one of the command's formats
    (``--json``) is pointed at ``--format json`` rather than at click's closest spelling, and
    a value given to an on/off flag (``--dp-attention 72``) is said as that."""
    message = _one_line(exc.format_message())
    name = getattr(exc, "option_name", None)
    command = exc.ctx.command if exc.ctx else None
    flagged = _flag_given_a_value(message, command, argv)
    if flagged:
        return flagged
    if not isinstance(exc, click.NoSuchOption) or not name or command is None:
        return message
    field = str(name).lstrip("-").replace("-", "_")
    has_set = any("--set" in getattr(p, "opts", ()) for p in command.params)
    if field in SPECS and field not in ("name", "source") and has_set:
        # a model field written as an option (plan --kv-lora-rank 512): --set changes it
        return (
            f"No such option {name!r}: {field} is a field of the model's config; change it "
            f"with '--set {field}=VALUE' (a model without MLA takes a kv_lora_rank through "
            "'mlacalc convert')"
            if field in ("kv_lora_rank", "q_lora_rank")
            else f"No such option {name!r}: {field} is a field of the model's config; change "
            f"it with '--set {field}=VALUE'"
        )
    sibling = _SIBLING_OPTIONS.get(exc.ctx.info_name or "")
    if sibling and not any(name in getattr(p, "opts", ()) for p in command.params):
        # an option of the sibling command (plan --tpot, search's target): pointed at it,
        # not at click's closest spelling of this command's ("Did you mean '--ep'")
        other = importlib.import_module(f"{__name__}.{COMMANDS[sibling[0]]}").command
        if any(name in getattr(p, "opts", ()) for p in other.params):
            return f"No such option {name!r} for {exc.ctx.info_name}: {sibling[1]}"
    wanted = str(name).lstrip("-").lower()
    for param in command.params:
        choices = getattr(param.type, "choices", ())
        if "--format" in getattr(param, "opts", ()) and wanted in choices:
            return f"No such option {name!r}. Did you mean '--format {wanted}'?"
    return message


def main(argv: list[str] | None = None) -> int:
    """Run the command line; every error is one line on stderr and exit status 2.

    Bad input (a usage error, an :class:`~mlacalc.words.errors.MlacalcError`, a file that cannot
    be read) names the option or field at fault. Anything else is a defect of mlacalc and
    is reported as an internal error, also on one line; ``MLACALC_DEBUG=1`` re-raises it.
    """
    try:
        with warnings.catch_warnings():
            # the library's MlacalcWarnings are the command's own "mlacalc: warning:" lines
            # (each command says them in its words, once): not printed twice
            warnings.simplefilter("ignore", MlacalcWarning)
            cli.main(args=argv, prog_name="mlacalc", standalone_mode=False)
    except _NO_ARGS_IS_HELP as exc:  # plain `mlacalc`: show the help
        click.echo(exc.ctx.get_help() if exc.ctx else str(exc))
        return 0
    except click.UsageError as exc:
        command = exc.ctx.command_path if exc.ctx else "mlacalc"
        message = _usage_message(exc, argv)
        click.echo(f"mlacalc: error: {message} (see '{command} --help')", err=True)
        return 2
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.Abort:
        click.echo("mlacalc: aborted", err=True)
        return 1
    except MlacalcError as exc:
        message = _one_line(str(exc))
        argument = getattr(exc, "argument", None)
        if argument == "component_dtypes":  # plan's flag of the component named: --expert-dtype
            comp, _, rest = message[len(argument) + 2 :].partition(": ")
            own = f"{comp.removesuffix('s')}_dtype"
            if rest and _option_for(argv, own):
                argument, message = own, f"{own}: {rest}"
        flag = _option_for(argv, argument) if argument else None
        if flag and message.startswith(f"{argument}: "):
            message = f"Invalid value for {flag}: {message[len(argument) + 2 :]}"
            message = _flags_named(argv, message)
        click.echo(f"mlacalc: error: {message}", err=True)
        return 2
    except OSError as exc:
        click.echo(f"mlacalc: error: {exc.filename or ''}: {exc.strerror or exc}", err=True)
        return 2
    except Exception as exc:  # a defect, not bad input: still one line, traceback on request
        if os.environ.get("MLACALC_DEBUG"):
            raise
        click.echo(
            f"mlacalc: internal error: {type(exc).__name__}: {_one_line(str(exc))} "
            "(please report it; MLACALC_DEBUG=1 shows the traceback)",
            err=True,
        )
        return 2
    return 0
