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
    import yaml

    from ..config import load_model

    m = load_model(config)
    data = {
        k: v
        for k, v in m.to_dict().items()
        if (v not in (None, "", []) or (k == "q_lora_rank" and m.is_mla)) and k != "aliases"
    }
    keep = {"falcon": ("parallel_attn", "bias")}.get(m.family, ())
    for key in (
        "attention_bias",
        "qkv_bias",
        "mlp_bias",
        "parallel_attn",
        "new_decoder_architecture",
        "bias",
    ):
        if data.get(key) is False and key not in keep:
            data.pop(key)
    for key in (
        "n_routed_experts",
        "n_shared_experts",
        "num_experts_per_tok",
        "first_k_dense_replace",
        "num_nextn_predict_layers",
    ):
        if data.get(key) == 0:
            data.pop(key)
    if not m.is_moe:
        data.pop("moe_layer_freq", None)
    header = [
        f"# Converted by mlacalc import-hf from {config}",
        f"# attention variant: {m.variant.upper()}",
    ]
    header += [f"# derived: {note}" for note in m.derived]
    text = "\n".join(header) + "\n" + yaml.safe_dump(data, sort_keys=False, width=120)
    if output:
        with open(output, "w", encoding="utf-8") as fh:
            fh.write(text)
        load_model(output)  # the file we wrote must load back
        click.echo(f"wrote {output} ({m.label}, {m.variant.upper()})", err=True)
    else:
        click.echo(text, nl=False)
