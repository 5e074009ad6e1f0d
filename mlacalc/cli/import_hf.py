"""`mlacalc import-hf`: a Hugging Face config.json as an mlacalc YAML model file."""

from __future__ import annotations

import click


@click.command("import-hf")
@click.argument("config", type=click.Path(dir_okay=True, path_type=str))
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, writable=True, path_type=str),
    default=None,
    help="Write the YAML model file here (default: standard output).",
)
def command(config, output):
    """Convert and validate a Hugging Face config.json into an mlacalc YAML model file.

    \b
    Example:
      mlacalc import-hf ./DeepSeek-V3/config.json -o deepseek-v3-local.yaml
    """
    from ..config import load_model
    from ..render import model_yaml

    m = load_model(config)
    text = model_yaml(m, config)
    if output:
        with open(output, "w", encoding="utf-8") as fh:
            fh.write(text)
        load_model(output)  # the file we wrote must load back
        click.echo(f"wrote {output} ({m.label}, {m.variant.upper()})", err=True)
    else:
        click.echo(text, nl=False)
