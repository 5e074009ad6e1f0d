"""`mlacalc formula`: the symbolic formula of a quantity."""

from __future__ import annotations

import click

from .common import IMPL_CHOICE, load


@click.command("formula")
@click.argument(
    "quantity",
    type=click.Choice(
        [
            "kv_cache_elements",
            "kv_cache_bytes",
            "attention_params",
            "attention_flops",
            "elementwise_flops",
            "unfused_bytes",
            "fused_bytes",
        ]
    ),
)
@click.option(
    "--variant",
    type=click.Choice(["mha", "gqa", "mqa", "mla"]),
    required=True,
    help="Attention variant.",
)
@click.option(
    "--impl", type=IMPL_CHOICE, default=None, help="MLA implementation (default: serving default)."
)
@click.option(
    "--phase",
    type=click.Choice(["prefill", "decode", "chunk"]),
    default=None,
    help="Substitute q = S (prefill) or q = 1 (decode); chunk keeps q.",
)
@click.option(
    "--stage",
    type=click.Choice(["q_proj", "kv_proj", "kv_up", "absorb", "core", "o_proj"]),
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
    import sympy as sp

    from .. import symbols as s
    from ..symbolic import formula as build

    if variant != "mla" and impl not in (None, "standard"):
        raise click.BadParameter(f"{variant.upper()} has one implementation", param_hint="--impl")
    expr = build(
        quantity,
        variant,
        None if impl == "standard" else impl,
        phase=phase,
        stage=stage,
        causal=causal,
        q_lora=not no_q_lora,
    )
    if subs_model:
        m = load(subs_model)
        if (variant == "mla") != m.is_mla:
            raise click.BadParameter(
                f"{m.label} is {m.variant.upper()}, not {variant.upper()}", param_hint="--subs"
            )
        values = {s.L: m.num_hidden_layers, s.d: m.hidden_size, s.n_h: m.num_attention_heads}
        if m.is_mla:
            values.update(
                {
                    s.d_c: m.kv_lora_rank,
                    s.d_cq: m.q_lora_rank or 0,
                    s.d_nope: m.qk_nope_head_dim,
                    s.d_rope: m.qk_rope_head_dim,
                    s.d_v: m.v_head_dim,
                }
            )
        else:
            values.update({s.n_kv: m.num_key_value_heads, s.d_h: m.head_dim})
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
