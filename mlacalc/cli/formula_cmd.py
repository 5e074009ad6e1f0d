"""`mlacalc formula`: the symbolic formula of a quantity."""

from __future__ import annotations

import re
from difflib import get_close_matches
from fractions import Fraction

import click

from mlacalc.cli.common import IMPL_CHOICE, SIZE, load, note, set_option, warn
from mlacalc.cost.attention import indexer_row_bytes, model_dims, op_weight_bits
from mlacalc.cost.compressed import kind_counts
from mlacalc.cost.engine import attention_cost
from mlacalc.cost.model_step import checkpoint_stored, stored_attention_cost
from mlacalc.cost.params import param_counts
from mlacalc.cost.quant import checkpoint_tensors, tensor_bytes
from mlacalc.cost.symbolic import FORMULA_VARIANTS, V4_VARIANTS
from mlacalc.cost.symbolic import formula as build
from mlacalc.models.architecture import layer_pattern
from mlacalc.words.dtypes import DTYPE_BITS, dtype_bits
from mlacalc.words.errors import InvalidArgumentError
from mlacalc.words.vocab import (
    MATMUL_STAGES,
    MLA_IMPLEMENTATIONS,
    PHASES,
    QUANTITIES,
    STANDARD_IMPL,
)

#: kinds of layer with rules of their own: a plain layer's formula does not describe them
#: (DeepSeek-V4's compressed layers, MiniMax-M3's block-sparse ones, DSA's indexed ones)
_OWN_RULES = ("csa", "hca", "swa", "msa", "dsa")


class _NearChoice(click.Choice):
    """A choice whose refusal names the closest spelling (as a model name's does)."""

    def __init__(self, choices, what: str):
        super().__init__(choices)
        self.what = what

    def convert(self, value, param, ctx):
        if value in self.choices:
            return value
        near = get_close_matches(str(value), list(self.choices), n=1)
        hint = f"did you mean '{near[0]}'? " if near else ""
        self.fail(
            f"'{value}' is not a {self.what}: {hint}one of {', '.join(self.choices)}", param, ctx
        )


@click.command("formula")
@click.argument("quantity", type=_NearChoice(list(QUANTITIES), "quantity"), metavar="QUANTITY")
@click.option(
    "--variant",
    type=_NearChoice(list(FORMULA_VARIANTS), "variant"),
    required=True,
    help="Attention variant: mha, gqa, mqa, mla, dsa (DeepSeek-V3.2's sparse attention: "
    "MLA whose core attends the k keys a lightning indexer picks), or a DeepSeek-V4 layer: csa "
    "(compressed sparse), hca (heavily compressed), swa (the window alone).",
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
    help="Substitute this model's dimensions (leaves B, S, q symbolic) and its query latent, "
    "biases and RoPE; L counts its layers with attention. Refused for sliding, chunked, "
    "linear or Mamba layers (report counts those); fp8 scales and q/k norms are stated.",
)
@set_option
@click.option(
    "--at",
    "at",
    multiple=True,
    metavar="SYMBOL=VALUE",
    callback=lambda ctx, param, values: _parse_at(values),
    help="Give a symbol a value (repeat for several: --at B=8 --at S=4096 --at b=fp8): a "
    "count as a whole number, a bytes-per-element symbol (b, b_w, b_a, b_i) as a number, a "
    "fraction (33/32) or a dtype (bf16, fp8, fp4, ...). With every symbol given, the number.",
)
@click.option("--latex", "style", flag_value="latex", help="Print LaTeX.")
@click.option("--pretty", "style", flag_value="pretty", help="Print a 2-D pretty form.")
@click.option("--python", "style", flag_value="python", help="Print a Python expression.")
def command(quantity, variant, impl, phase, stage, causal, no_q_lora, subs_model, sets, at, style):
    """Print the symbolic formula of a QUANTITY: kv_cache_elements, kv_cache_bytes,
    attention_params, attention_flops, elementwise_flops, unfused_bytes or fused_bytes.

    \b
    Symbols: d hidden, L layers, n_h heads, n_kv KV heads, d_h head width, d_c latent,
    d_cq query latent, d_nope, d_rope, d_v; B batch, S keys attended, q new tokens,
    P (query, key) pairs per head, b / b_w / b_a bytes per KV / weight / activation element.
    DSA (--variant dsa): k keys the indexer picks a query (index_topk), n_i indexer heads
    (index_n_heads), d_i indexer head width (index_head_dim), b_i bytes per indexer key
    element (fp8 and a float32 scale a 128: 33/32); its core attends min(S, k) keys (P_k
    pairs a head: query j attends min(j, k)), its indexer scores all S.
    DeepSeek-V4 (--variant csa, hca, swa: kv_cache_bytes, and attention_flops with --phase
    prefill or decode): d_h its head width (one K = V head), W the window, m the layer's
    compression rate (one pooled key per m tokens), d_o and g its output's low rank and groups,
    k, n_i, d_i a csa layer's top-k and indexer; docs/deepseek-v4.md.
    FLOPs count 2 per multiply-add. attention_params is one layer's weights and
    kv_cache_elements one token's elements in one layer; the other quantities count all L
    layers.

    \b
    Examples:
      mlacalc formula kv_cache_bytes --variant gqa
      mlacalc formula attention_flops --variant mla --impl absorbed --phase decode --stage core
      mlacalc formula attention_flops --variant mla --impl naive --phase prefill --causal --latex
      mlacalc formula kv_cache_elements --variant mla --subs deepseek-v3
      mlacalc formula kv_cache_bytes --variant mla --subs deepseek-v3 --set kv_lora_rank=256
      mlacalc formula attention_flops --variant dsa --phase decode --subs deepseek-v3.2
      mlacalc formula attention_flops --variant hca --phase decode --subs deepseek-v4-pro
      mlacalc formula kv_cache_bytes --variant mla --subs deepseek-v3 --at B=8 --at S=4096
        --at b=fp8
    """
    # deferred: sympy loads for the formula itself, not for `--help`
    import sympy as sp

    latent = variant in ("mla", "dsa")
    if not latent and impl not in (None, STANDARD_IMPL):
        raise click.BadParameter(f"{variant.upper()} has one implementation", param_hint="--impl")
    if latent and impl == STANDARD_IMPL:
        raise click.BadParameter(
            f"'{STANDARD_IMPL}' is the implementation of MHA, GQA and MQA; {variant.upper()} has "
            f"{', '.join(MLA_IMPLEMENTATIONS)}",
            param_hint="--impl",
        )
    if stage is not None and quantity != "attention_flops":
        raise click.BadParameter(
            f"stages split attention_flops only, not {quantity}", param_hint="--stage"
        )
    m = None
    if sets and not subs_model:  # a design point is a model's fields changed
        raise click.BadParameter(
            "--set changes a model's fields: give the model to change with --subs (e.g. "
            "--subs deepseek-v3 --set kv_lora_rank=256)",
            param_hint="--set",
        )
    # a workload's setting is a symbol of the formula, not a field of the model
    workload = {"seq_len": "S=4096", "batch": "B=8", "kv_dtype": "b=fp8", "q_len": "q=1"}
    for field in sets or ():
        if field in workload:
            raise click.BadParameter(
                f"{field} is the workload's, not a field of the model: give the formula's "
                f"symbol a value with --at {workload[field]}",
                param_hint="--set",
            )
    if subs_model:  # the model first: it fixes the query latent, the biases and RoPE
        m = load(subs_model, "--subs", changes=sets)
        if variant in V4_VARIANTS:
            _check_v4(m, variant)
        else:
            _check_plain(m, variant)
    settings = {
        "impl": None if impl == STANDARD_IMPL else impl,
        "phase": phase,
        "stage": stage,
        "causal": causal,
        "q_lora": not no_q_lora,
    }
    expr = build(quantity, variant, **settings)
    if stage is not None and expr == 0:  # no op of the layer is of that stage
        has = [s for s in MATMUL_STAGES if build(quantity, variant, **{**settings, "stage": s})]
        impl_words = ""
        if latent:
            impl_words = f" ({impl or 'serving default'}{_where_phase(phase)})"
        raise click.BadParameter(
            f"{variant.upper()}{impl_words} has no {stage} stage: its stages are {', '.join(has)}",
            param_hint="--stage",
        )
    # a flag that leaves the formula as it is was ignored: say so
    given = {
        "--phase": ("phase", None),
        "--causal": ("causal", False),
        "--no-q-lora": ("q_lora", True),
    }
    where = f" in {phase}" if phase else ""
    # a stage's formula may not depend on a flag the whole quantity does (MLA's kv_up: no q)
    what = f"stage {stage} of {quantity}" if stage else quantity
    for flag, (key, neutral) in given.items():
        if settings[key] == neutral:
            continue
        if _built(quantity, variant, {**settings, key: neutral}) == expr:
            if stage and build(quantity, variant, **{**settings, key: neutral, "stage": None}) != (
                build(quantity, variant, **{**settings, "stage": None})
            ):
                impl_words = f" ({impl})" if impl else ""
                warn(
                    f"{flag} does not change {what} of {variant.upper()}{impl_words}: the "
                    f"formula is the same without it (it changes the whole {quantity})"
                )
            else:
                warn(f"{flag} does not change {what} of {variant.upper()}{where}; ignored")
    if m is not None and variant in V4_VARIANTS:
        expr = _v4_substituted(m, variant, expr)
    elif m is not None:
        expr = _substituted(m, quantity, variant, settings, no_q_lora)
    if at:
        expr = _evaluated(expr, at, quantity, subs_model)
    if style == "latex":
        text = sp.latex(expr)
    elif style == "pretty":
        text = sp.pretty(expr, use_unicode=True)
    elif style == "python":
        text = sp.pycode(expr)
    else:
        text = str(expr)
    click.echo(text)


#: the symbols a value in bytes per element (the others count: whole and positive)
_BYTE_SYMBOLS = ("b", "b_w", "b_a", "b_i")


def _symbols() -> dict:
    """The symbols a printed formula can hold, by name (the bias and RoPE switches are put in
    by the formula itself, never printed)."""
    # deferred: the symbols load sympy, which the formula needs and `--help` does not
    from mlacalc.cost import symbols as s

    return {n: v for n, v in s.ALL.items() if n not in ("beta_qkv", "beta_o", "rho")}


def _parse_at(values) -> dict[str, Fraction]:
    """``("B=8", "S=4k", "b=fp8", "b_i=33/32")`` -> ``{"B": 8, "S": 4096, "b": 1, ...}``, each
    refused in one line naming the value and the fix."""
    known = _symbols()
    out: dict[str, Fraction] = {}
    for text in values:
        name, eq, value = (part.strip() for part in text.partition("="))
        if not eq or not name or not value:
            raise click.BadParameter(
                f"{text!r} is not SYMBOL=VALUE; write e.g. --at S=4096", param_hint="--at"
            )
        if name not in known:
            near = [x for x in known if x.lower() == name.lower()]
            near = near or get_close_matches(name, list(known), n=1)
            hint = f"did you mean {near[0]}? " if near else ""
            raise click.BadParameter(
                f"{name} is not a symbol of the formulas: {hint}they are {', '.join(known)} "
                "(mlacalc formula --help defines them)",
                param_hint="--at",
            )
        if name in out:
            raise click.BadParameter(f"{name} is given twice; give it once", param_hint="--at")
        out[name] = _at_value(name, value)
    return out


def _at_value(name: str, value: str) -> Fraction:
    """One ``--at`` value: bytes per element (a number, a fraction or a dtype) for b, b_w,
    b_a, b_i; a whole positive count for the others, written as sizes are (4096, 4k, 1M)."""
    if name in _BYTE_SYMBOLS:
        if value.lower() in DTYPE_BITS:  # the values alone: a block format's scales are not in b
            return Fraction(DTYPE_BITS[value.lower()], 8)
        try:
            number = Fraction(value)
        except (ValueError, ZeroDivisionError):
            number = None
        if number is None or number <= 0:
            raise click.BadParameter(
                f"{name}={value}: {name} is bytes per element: a positive number, a fraction "
                f"(33/32) or a dtype ({', '.join(DTYPE_BITS)})",
                param_hint="--at",
            )
        return number
    try:
        if not value.isascii():
            raise click.BadParameter(value)
        return Fraction(SIZE.convert(value, None, None))
    except click.BadParameter:
        raise click.BadParameter(
            f"{name}={value}: {name} is a whole number of at least 1 (4096, 4k, 1M)",
            param_hint="--at",
        ) from None


def _evaluated(expr, at: dict[str, Fraction], quantity: str, subs_model: str | None):
    """The formula with ``--at``'s values put in; each symbol given must be one the printed
    formula has (a model's dimensions are no longer symbols after ``--subs``)."""
    # deferred: sympy loads for the formula itself, not for `--help`
    import sympy as sp

    from mlacalc.cost import symbols as s

    free = {str(x) for x in expr.free_symbols}
    absent = [name for name in at if name not in free]
    if absent:
        where = f" (--subs {subs_model} gave the model's dimensions; --set changes them)"
        raise click.BadParameter(
            f"the formula of {quantity} has no {', '.join(absent)}: its symbols are "
            f"{', '.join(sorted(free)) or 'none'}{where if subs_model else ''}",
            param_hint="--at",
        )
    if "q" in at and "S" in at and at["q"] > at["S"]:
        raise click.BadParameter(
            f"q={at['q']} new tokens attend S={at['S']} keys, which hold them: give q <= S",
            param_hint="--at",
        )
    value = sp.factor(
        expr.subs({s.ALL[n]: sp.Rational(v.numerator, v.denominator) for n, v in at.items()})
    )
    if not value.free_symbols:
        unit = " bytes" if quantity.endswith("_bytes") else ""
        if value.is_Integer and unit:
            note(f"{quantity} = {int(value):,} bytes = {int(value) / 2**30:,.3f} GiB")
        elif not value.is_Integer:
            note(f"{quantity} = {float(value):,.6g}{unit}")
    return value


def _built(quantity: str, variant: str, settings: dict):
    """The formula under ``settings``, or None where they are refused (DeepSeek-V4's FLOPs
    without a phase): a flag whose neutral value is refused changes the formula."""
    try:
        return build(quantity, variant, **settings)
    except InvalidArgumentError:
        return None


def _where_phase(phase) -> str:
    """', in PHASE' for a phase given, '' for none."""
    return f", in {phase}" if phase else ""


def _check_plain(m, variant: str) -> None:
    """Refuse, by name, a model whose layers the plain layer's formula does not describe."""
    # GQA keeps n_kv a symbol, so it takes any MHA/GQA/MQA model's n_kv; MHA sets n_kv = n_h
    # and MQA n_kv = 1, so they describe only a model whose n_kv is that
    mine = _formula_variant(m)
    compressed = {"csa", "hca"} & {k.attention for k in layer_pattern(m).layers}
    if compressed:  # DeepSeek-V4: each kind of layer is a variant of its own
        kinds = list(kind_counts(m))
        raise click.BadParameter(
            f"{m.label}'s {', '.join(sorted(compressed))} layers are DeepSeek-V4's compressed "
            f"attention, a formula variant each: use "
            + " or ".join(f"--variant {k}" for k in kinds)
            + f" (docs/deepseek-v4.md; `mlacalc report {m.name}` counts them all)",
            param_hint="--subs",
        )
    if variant != mine and not (variant == "gqa" and not m.is_mla):
        fits = [mine] if m.is_mla or mine == "gqa" else [mine, "gqa"]
        heads = "" if m.is_mla else f" (n_kv = {m.num_key_value_heads})"
        what = mine.upper()
        if mine == "dsa":
            what = f"DSA (MLA with an indexer picking {m.index_topk:,} keys a query)"
        raise click.BadParameter(
            f"{m.label} is {what}{heads}, not {variant.upper()}: use "
            + " or ".join(f"--variant {v}" for v in fits),
            param_hint="--subs",
        )
    if variant == "dsa" and m.shared_indexer_layers:
        raise click.BadParameter(
            f"{m.label}'s layers {', '.join(map(str, m.shared_indexer_layers))} reuse the "
            "previous layer's top-k (no indexer of their own), and the formula gives every "
            f"layer its indexer; `mlacalc report {m.name}` counts them",
            param_hint="--subs",
        )
    if not m.is_mla and m.v_head_dim is not None and m.v_head_dim != m.head_dim:
        raise click.BadParameter(
            f"{m.label}'s value heads ({m.v_head_dim}) are narrower than its query/key heads "
            f"({m.head_dim}), and the printed formula has one d_h; `mlacalc report` counts it",
            param_hint="--subs",
        )
    layers = layer_pattern(m).layers
    own = sorted({k.label for k in layers if k.attention in _OWN_RULES and k.attention != variant})
    if own:  # their cache rows, keys attended and projections are not the formula's
        where = ""
        if {"csa", "hca"} & set(own):  # DeepSeek-V4: no formula variant of its own yet
            where = (
                " (DeepSeek-V4's compressed layers have no formula variant; their counts: "
                "docs/deepseek-v4.md)"
            )
        raise click.BadParameter(
            f"{m.label}'s {', '.join(own)} layers are not the plain {m.variant.upper()} "
            "layer the formula describes (cache rows, keys attended, projections of their "
            f"own); `mlacalc report {m.name}` counts them{where}",
            param_hint="--subs",
        )
    # layers the formula's L x (one plain layer) leaves out or miscounts, with what it misses
    left_out: dict[str, list[int | str]] = {}
    for k in layers:
        why = _not_plain(m, k)
        if why:
            left_out.setdefault(k.label, [0, why])[0] += 1
    if left_out:
        parts = "; ".join(f"{n} {label} layers: {why}" for label, (n, why) in left_out.items())
        raise click.BadParameter(
            f"the formula is L plain {m.variant.upper()} layers attending all S keys, and "
            f"{m.label} has {parts}; `mlacalc report {m.name}` counts them",
            param_hint="--subs",
        )


def _check_v4(m, variant: str) -> None:
    """Refuse, by name, a model with no layer of the DeepSeek-V4 kind asked."""
    kinds = kind_counts(m)
    if not kinds:
        raise click.BadParameter(
            f"{m.label} has no DeepSeek-V4 layers (csa, hca, swa): use --variant "
            f"{_formula_variant(m)}",
            param_hint="--subs",
        )
    if variant not in kinds:
        has = " or ".join(f"--variant {k}" for k in kinds)
        raise click.BadParameter(
            f"{m.label} has no {variant} layer: use {has}", param_hint="--subs"
        )


def _v4_substituted(m, variant: str, expr):
    """A DeepSeek-V4 layer's formula with the model's dimensions; ``L`` its layers of that
    kind, the others said (each kind has its own variant)."""
    # deferred: the symbols load sympy, for the formula itself, not for `--help`
    from mlacalc.cost import symbols as s

    kinds = kind_counts(m)
    rate = {"csa": m.compress_rate_csa, "hca": m.compress_rate_hca, "swa": 1}[variant]
    values = {
        s.d: m.hidden_size,
        s.n_h: m.num_attention_heads,
        s.d_h: m.head_dim,
        s.d_cq: m.q_lora_rank,
        s.d_o: m.o_lora_rank,
        s.g: m.o_groups,
        s.W: m.sliding_window,
        s.m_r: rate,
        s.L: kinds[variant],
    }
    if variant == "csa":
        values.update({s.k: m.index_topk, s.n_i: m.index_n_heads, s.d_i: m.index_head_dim})
    others = ", ".join(f"{n} {k} (--variant {k})" for k, n in kinds.items() if k != variant)
    note(
        f"L = {kinds[variant]}: {m.label}'s {variant} layers"
        + (f"; its others: {others}" if others else "")
    )
    return expr.subs(values)


def _formula_variant(m) -> str:
    """The formula variant that describes a model's attention layers: ``dsa`` for an MLA
    model with an indexer (DeepSeek-V3.2, GLM-5.1), else its attention variant."""
    if m.is_mla and m.index_topk is not None and not m.compress_ratios:
        return "dsa"
    return m.variant


def _not_plain(m, kind) -> str:
    """What the plain layer's formula leaves out of one of a model's layers ('' if nothing)."""
    if kind.attention == "none":  # no attention at all: L counts the others
        return ""
    if kind.attention in ("linear", "mamba", "mamba1"):
        return "a fixed-size recurrent state in place of a cache, and its own projections"
    if kind.mamba:
        return "a Mamba-2 mixer beside the attention (its state and work)"
    if kind.window is not None and kind.window < (m.max_position_embeddings or kind.window + 1):
        keys = "its chunk's" if kind.attention == "chunked" else "the last"
        return f"{keys} {kind.window:,} keys only, cached and attended"
    if not kind.rope:
        return "no RoPE (the formula applies it in every layer)"
    return ""


def _substituted(m, quantity: str, variant: str, settings: dict, no_q_lora: bool):
    """The formula with the model's dimensions and switches (query latent, biases, RoPE)."""
    # deferred: sympy loads for the formula itself, not for `--help`
    import sympy as sp

    from mlacalc.cost import symbols as s

    settings = dict(settings)
    if m.is_mla:
        if m.q_lora_rank and no_q_lora:
            raise click.BadParameter(
                f"{m.label} has a query latent (q_lora_rank {m.q_lora_rank}); drop --no-q-lora",
                param_hint="--no-q-lora",
            )
        if not m.q_lora_rank and not no_q_lora:
            warn(f"{m.label} has no query latent: the formula of a plain W_Q (--no-q-lora)")
        settings["q_lora"] = bool(m.q_lora_rank)
    dims = model_dims(m)
    settings["bias"] = bool(dims["beta_qkv"])
    settings["out_bias"] = bool(dims["beta_o"])
    settings["rope"] = bool(dims.get("rho", 1))
    expr = build(quantity, variant, **settings)
    kinds = layer_pattern(m).layers
    with_attention = sum(k.attention != "none" for k in kinds)
    if with_attention != len(kinds):
        warn(
            f"L = {with_attention}: {m.label}'s layers with attention "
            f"({len(kinds) - with_attention} of {len(kinds)} have none)"
        )
    values = {s.ALL[sym]: v for sym, v in dims.items() if sym in s.ALL}
    values[s.L] = with_attention
    if variant == "dsa":  # the indexer, and its keys' bytes (fp8 and a float32 scale a 128)
        values.update({s.k: m.index_topk, s.n_i: m.index_n_heads, s.d_i: m.index_head_dim})
        values[s.b_i] = sp.Rational(indexer_row_bytes(m), m.index_head_dim)
    expr = sp.factor(expr.subs(values))
    if quantity == "attention_params":
        _say_params_left_out(m, expr)
        held = int(expr) * with_attention
        reported = param_counts(m).breakdown["attention"]
        same = (
            "equal to report's attention"
            if reported == held
            else f"report's attention is {reported:,}: its q/k norms too"
        )
        note(
            f"attention_params is one layer's weights; the {with_attention} layers with "
            f"attention of {m.label} hold {held:,} ({same})"
        )
    elif quantity == "kv_cache_elements":
        note(
            f"kv_cache_elements is one token's elements in one layer; the {with_attention} "
            f"layers with attention of {m.label} cache {int(expr) * with_attention:,} a token"
        )
    elif quantity in ("fused_bytes", "unfused_bytes"):
        _say_scales_left_out(m, quantity, settings)
    return expr


def _say_params_left_out(m, expr) -> None:
    """Name the weights of a layer that report counts and the formula has no term for (q/k
    norms: Qwen3, MiniMax-M2.5); refuse a gap those norms do not account for."""
    counts = param_counts(m)
    norms = {k: n for k, n in counts.attention_breakdown.items() if k in ("q_norm", "k_norm")}
    left_out = sum(norms.values())
    formula = int(expr)
    if counts.attention_per_layer - formula != left_out:
        beyond = f" beyond its {' and '.join(norms)}" if norms else ""
        raise click.BadParameter(
            f"the formula gives {formula:,} attention weights a layer and {m.label} holds "
            f"{counts.attention_per_layer:,}: {counts.attention_per_layer - formula - left_out:,} "
            f"the formula has no term for{beyond}; `mlacalc report {m.name}` counts them",
            param_hint="--subs",
        )
    if left_out:
        warn(
            f"the formula leaves out {m.label}'s {' and '.join(norms)} ({left_out:,} weights a "
            f"layer): report's attention_per_layer is {counts.attention_per_layer:,}"
        )


def _stored_beyond_b_w(m) -> Fraction:
    """Bytes one attention layer's checkpoint tensors hold beyond b_w a weight (fp8 block
    scales, tensors kept in bf16), counted tensor by tensor from the checkpoint; q/k norms
    left out (the formula has no term for them, and report's ops read none)."""
    bits = dtype_bits(m.weights_dtype)
    layers: dict[str, list] = {}
    for t in checkpoint_tensors(m):
        hit = re.match(r"model\.layers\.(\d+)\.self_attn\.(.*)", t.name)
        # a DSA indexer's: report reads its weights at the weight dtype, as the formula's b_w
        if hit and not re.match(r"[qk]_norm\.|indexer\.", hit[2]):
            layers.setdefault(hit[1], []).append(t)
    first = next(iter(layers.values()), [])
    return sum(
        (sum(tensor_bytes(t, m.quantization)) - Fraction(t.numel * bits, 8) for t in first),
        Fraction(0),
    )


def _say_scales_left_out(m, quantity: str, settings: dict) -> None:
    """State the bytes a quantized checkpoint stores beside its attention weights (fp8 block
    scales, bf16 tensors it keeps) that report reads and the formula's b_w does not count, or
    those it saves (weights stored narrower than b_w);
    refuse a gap the checkpoint's own tensors do not account for (MLA's merged weights)."""
    if not checkpoint_stored(m):
        return
    phase = settings["phase"] or "decode"
    q_len = None if phase == "prefill" else 1
    cost = attention_cost(m, phase, 2, 1, q_len=q_len, impl=settings["impl"])
    stored = stored_attention_cost(cost, m)
    layers = cost.layers
    # the formula counts b_w a weight, the norms' too, where report's cost keeps them at 16
    # bits (cost.attention): the checkpoint's bytes beyond b_w are stored less the formula's
    w_bits = dtype_bits(m.weights_dtype)
    kept = sum(
        op.weight_bytes - op.weight_bytes * w_bits // op_weight_bits(op.stage, w_bits)
        for op in cost.ops
    )
    extra = getattr(stored, quantity) - getattr(cost, quantity) + kept * layers
    per_layer = _stored_beyond_b_w(m)
    if extra != per_layer * layers:
        held = per_layer * layers
        why = ""
        if settings["impl"] == "absorbed_merged":  # merged W_UK W_Q, W_O W_UV: no tensor's
            why = ": the rest are the merged weights, read at the checkpoint's rate"
        held_text = f"{int(held):,}" if held.denominator == 1 else f"{float(held):,.1f}"
        raise click.BadParameter(
            f"report reads {extra:,} bytes of {m.label}'s attention weights beyond the "
            f"formula's b_w a weight, and the checkpoint's attention tensors hold {held_text} "
            f"beyond it (scales, kept tensors){why}; `mlacalc report {m.name}` counts them",
            param_hint="--subs",
        )
    if extra > 0:
        warn(
            f"the formula counts b_w bytes a weight; {m.label}'s checkpoint "
            f"({m.weights_dtype} weights) also stores scales with its attention weights: "
            f"report reads {extra:,} bytes more ({extra // layers:,} a layer x {layers}), "
            "whatever B, S and q"
        )
    elif extra < 0:  # DeepSeek-V3.1 NVFP4: bf16 weights, its o_proj in NVFP4
        warn(
            f"the formula counts b_w bytes a weight; {m.label}'s checkpoint "
            f"({m.weights_dtype} weights) stores some of its attention weights narrower, "
            f"scales included: report reads {-extra:,} bytes fewer ({-extra // layers:,} a "
            f"layer x {layers}), whatever B, S and q"
        )
