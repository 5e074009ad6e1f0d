"""`mlacalc formula`: the symbolic formula of a quantity."""

from __future__ import annotations

import click

from mlacalc.cli.common import IMPL_CHOICE, VARIANT_CHOICE, load, warn
from mlacalc.cost.symbolic import formula as build
from mlacalc.models.architecture import layer_pattern
from mlacalc.words.vocab import (
    MATMUL_STAGES,
    MHA_FIELD_SYMBOLS,
    MLA_FIELD_SYMBOLS,
    MLA_IMPLEMENTATIONS,
    PHASES,
    QUANTITIES,
    STANDARD_IMPL,
)

#: kinds of layer with rules of their own: a plain layer's formula does not describe them
#: (DeepSeek-V4's compressed layers, MiniMax-M3's block-sparse ones, DSA's indexed ones)
_OWN_RULES = ("csa", "hca", "swa", "msa", "dsa")


@click.command("formula")
@click.argument(
    "quantity",
    type=click.Choice(list(QUANTITIES)),
)
@click.option(
    "--variant",
    type=VARIANT_CHOICE,
    required=True,
    help="Attention variant.",
)
@click.option(
    "--impl", type=IMPL_CHOICE, default=None, help="MLA implementation (default: serving default)."
)
@click.option(
    "--phase",
    type=click.Choice(list(PHASES)),
    default=None,
    help="Substitute q = S (prefill) or q = 1 (decode); chunk keeps q.",
)
@click.option(
    "--stage",
    type=click.Choice(list(MATMUL_STAGES)),
    default=None,
    help="One stage of attention_flops.",
)
@click.option("--causal", is_flag=True, help="Count only causal pairs: P = q (2S - q + 1) / 2.")
@click.option("--no-q-lora", is_flag=True, help="MLA without query compression (a plain W_Q).")
@click.option(
    "--subs",
    "subs_model",
    default=None,
    metavar="MODEL",
    help="Substitute this model's dimensions (leaves B, S, q symbolic).",
)
@click.option("--latex", "style", flag_value="latex", help="Print LaTeX.")
@click.option("--pretty", "style", flag_value="pretty", help="Print a 2-D pretty form.")
@click.option("--python", "style", flag_value="python", help="Print a Python expression.")
def command(quantity, variant, impl, phase, stage, causal, no_q_lora, subs_model, style):
    """Print the symbolic formula of a quantity.

    \b
    Symbols: d hidden, L layers, n_h heads, n_kv KV heads, d_h head width, d_c latent,
    d_cq query latent, d_nope, d_rope, d_v; B batch, S keys attended, q new tokens,
    P (query, key) pairs per head, b / b_w / b_a bytes per KV / weight / activation element.

    \b
    Examples:
      mlacalc formula kv_cache_bytes --variant gqa
      mlacalc formula attention_flops --variant mla --impl absorbed --phase decode --stage core
      mlacalc formula attention_flops --variant mla --impl naive --phase prefill --causal --latex
      mlacalc formula kv_cache_elements --variant mla --subs deepseek-v3
    """
    # deferred: sympy loads for the formula itself, not for `--help`
    import sympy as sp

    from mlacalc.cost import symbols as s

    if variant != "mla" and impl not in (None, STANDARD_IMPL):
        raise click.BadParameter(f"{variant.upper()} has one implementation", param_hint="--impl")
    if variant == "mla" and impl == STANDARD_IMPL:
        raise click.BadParameter(
            f"'{STANDARD_IMPL}' is the implementation of MHA, GQA and MQA; MLA has "
            f"{', '.join(MLA_IMPLEMENTATIONS)}",
            param_hint="--impl",
        )
    if stage is not None and quantity != "attention_flops":
        raise click.BadParameter(
            f"stages split attention_flops only, not {quantity}", param_hint="--stage"
        )
    settings = {
        "impl": None if impl == STANDARD_IMPL else impl,
        "phase": phase,
        "stage": stage,
        "causal": causal,
        "q_lora": not no_q_lora,
    }
    expr = build(quantity, variant, **settings)
    # a flag that leaves the formula as it is was ignored: say so
    given = {
        "--phase": ("phase", None),
        "--causal": ("causal", False),
        "--no-q-lora": ("q_lora", True),
    }
    where = f" in {phase}" if phase else ""
    for flag, (key, neutral) in given.items():
        if settings[key] == neutral:
            continue
        if build(quantity, variant, **{**settings, key: neutral}) == expr:
            warn(f"{flag} does not change {quantity} of {variant.upper()}{where}; ignored")
    if subs_model:
        m = load(subs_model, "--subs")
        if (variant == "mla") != m.is_mla:
            raise click.BadParameter(
                f"{m.label} is {m.variant.upper()}, not {variant.upper()}", param_hint="--subs"
            )
        if not m.is_mla and m.v_head_dim is not None and m.v_head_dim != m.head_dim:
            raise click.BadParameter(
                f"{m.label}'s value heads ({m.v_head_dim}) are narrower than its query/key heads "
                f"({m.head_dim}), and the printed formula has one d_h; `mlacalc report` counts it",
                param_hint="--subs",
            )
        own = sorted({k.label for k in layer_pattern(m).layers if k.attention in _OWN_RULES})
        if own:  # their cache rows, keys attended and projections are not the formula's
            raise click.BadParameter(
                f"{m.label}'s {', '.join(own)} layers are not the plain {m.variant.upper()} "
                "layer the formula describes (cache rows, keys attended, projections of their "
                "own); `mlacalc report` counts them",
                param_hint="--subs",
            )
        fields = MLA_FIELD_SYMBOLS if m.is_mla else MHA_FIELD_SYMBOLS
        values = {s.ALL[symbol]: getattr(m, field) or 0 for field, symbol in fields.items()}
        expr = sp.factor(expr.subs(values))
    if style == "latex":
        text = sp.latex(expr)
    elif style == "pretty":
        text = sp.pretty(expr, use_unicode=True)
    elif style == "python":
        text = sp.pycode(expr)
    else:
        text = str(expr)
    click.echo(text)
