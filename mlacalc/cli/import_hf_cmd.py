"""`mlacalc import-hf`: a Hugging Face config.json as an mlacalc YAML model file."""

from __future__ import annotations

import os

import click

from mlacalc.cli.common import warn
from mlacalc.cost.engine import attention_flops, kv_cache_bytes
from mlacalc.cost.params import param_counts
from mlacalc.models.loading import load_model
from mlacalc.models.registry import ClassDefault, IgnoredField, NamedAfter, NotImported
from mlacalc.render import model_yaml
from mlacalc.words.errors import MlacalcError


@click.command("import-hf")
@click.argument("config", type=click.Path(dir_okay=True, path_type=str))
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, writable=True, path_type=str),
    default=None,
    help="Write the YAML model file here (default: standard output).",
)
@click.option("--force", is_flag=True, help="Replace an existing --output file.")
def command(config, output, force):
    """Convert and validate a Hugging Face config.json into an mlacalc YAML model file.

    \b
    Example:
      mlacalc import-hf ./DeepSeek-V3/config.json -o deepseek-v3-local.yaml
    """
    m = load_model(config)  # named as every route names it (models.hf._translate._name)
    text = model_yaml(m, config)
    if output == "-":
        output = None  # standard output, as the help says of no -o
    if output:
        folder = os.path.dirname(os.path.abspath(output))
        if not os.path.isdir(folder):
            raise click.BadParameter(
                f"no folder {folder}: create it, or write the file elsewhere",
                param_hint="--output",
            )
        if os.path.exists(output) and not force:
            raise click.BadParameter(
                f"{output} exists: add --force to replace it, or choose another name",
                param_hint="--output",
            )
        try:
            with open(output, "w", encoding="utf-8") as fh:
                fh.write(text)
        except OSError as exc:
            raise click.BadParameter(
                f"cannot write {output} ({exc.strerror or exc})", param_hint="--output"
            ) from None
        back = load_model(output)  # the file we wrote must load back, to the same model
        # compare past any window (a lost ``sliding_window: null`` only shows beyond 4096)
        same = param_counts(back) == param_counts(m) and all(
            kv_cache_bytes(back, s) == kv_cache_bytes(m, s)
            and attention_flops(back, "decode", s) == attention_flops(m, "decode", s)
            for s in (1, 131_072)
        )
        if not same:
            raise MlacalcError(
                f"{output}: the written file loads back to a different model than {config}; "
                "please report this"
            )
        click.echo(f"wrote {output} ({m.label}, {m.variant.upper()})", err=True)
    else:
        click.echo(text, nl=False)
    _say_defaults(m, config)


def _say_defaults(m, config: str) -> None:
    """One line on stderr for each field config.json left out and a constant of the Hugging
    Face class filled (DeepSeek-V2-Lite's q_lora_rank 1536): a YAML comment alone goes unseen.
    Which notes those are is the translation's to say (ClassDefault), not their words'."""
    name = os.path.basename(os.path.normpath(config))
    for note in m.derived:
        if isinstance(note, ClassDefault):
            warn(f"not in {name}, filled with Hugging Face's default: {note}")
        elif isinstance(note, NotImported):
            warn(f"in {name}, not imported: {note}")
        elif isinstance(note, IgnoredField):
            warn(f"in {name}, {note}")
        elif isinstance(note, NamedAfter):  # where the model's name came from
            click.echo(f"mlacalc: {name}: {note}", err=True)
