"""The ``mlacalc`` command line: capacity questions answered in one command.

Every report takes ``--format table|markdown|json|csv``. JSON and CSV keep exact
integers and carry units in their field names; table and markdown print bytes in
binary units (KiB, MiB, GiB) and FLOPs and parameters in SI units (K, M, G, T), and
say so. Errors print one line on stderr and exit with status 2.
"""

from __future__ import annotations

import csv
import io
import json
import re
from typing import Any, Callable

import click

from .errors import MlacalcError
from .units import human_bytes, human_si

FORMATS = ("table", "markdown", "json", "csv")
UNITS_NOTE = "Bytes in binary units (KiB = 2^10 B, GiB = 2^30 B); FLOPs and parameters in SI units (G = 10^9)."

# ----------------------------------------------------------------------------------
# argument types


class SizeType(click.ParamType):
    """A token count or batch: ``131072``, ``128k`` (= 128 x 1024), ``1M`` (= 1024^2), ``1.5k``."""

    name = "size"
    _pattern = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kKmMgG]?)\s*$")
    _scale = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}

    def convert(self, value, param, ctx):
        if isinstance(value, int):
            result = value
        else:
            match = self._pattern.match(str(value))
            if not match:
                self.fail(f"'{value}' is not a size; write 131072, 128k or 1M", param, ctx)
            number, suffix = match.groups()
            scaled = float(number) * self._scale[suffix.lower()]
            if scaled != int(scaled) or ("." in number and not suffix):
                self.fail(f"'{value}' is not a whole number", param, ctx)
            result = int(scaled) if "." in number else int(number) * self._scale[suffix.lower()]
        if result <= 0:
            self.fail(f"'{value}' must be positive", param, ctx)
        return result


SIZE = SizeType()


class DtypeType(click.ParamType):
    name = "dtype"

    def __init__(self, layouts: bool):
        self.layouts = layouts

    def convert(self, value, param, ctx):
        from .dtypes import DTYPE_BITS, KV_LAYOUTS, canonical_dtype

        key = str(value).strip().lower()
        if self.layouts and key in KV_LAYOUTS:
            return key
        try:
            return canonical_dtype(key)
        except MlacalcError:
            known = list(DTYPE_BITS) + (list(KV_LAYOUTS) if self.layouts else [])
            self.fail(f"unknown dtype '{value}'; use one of: {', '.join(known)}", param, ctx)


KV_DTYPE = DtypeType(layouts=True)
W_DTYPE = DtypeType(layouts=False)

IMPL_CHOICE = click.Choice(["naive", "compressed", "absorbed", "absorbed_merged", "standard"])
PHASE_CHOICE = click.Choice(["prefill", "decode", "chunk", "both"])


def format_option(f):
    return click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True,
                        help="Output format. json/csv keep exact integers.")(f)


# ----------------------------------------------------------------------------------
# human units

def human_ratio(x: float) -> str:
    return f"{x:,.2f}x"


# ----------------------------------------------------------------------------------
# output: a list of titled tables, or a document for json


class Section:
    def __init__(self, title: str, columns: list[str], rows: list[list[Any]], note: str = ""):
        self.title, self.columns, self.rows, self.note = title, columns, rows, note


def _render_table(sections: list[Section], header: str) -> str:
    from rich.console import Console
    from rich.table import Table

    buffer = io.StringIO()
    console = Console(file=buffer, width=160, force_terminal=False, color_system=None, highlight=False)
    if header:
        console.print(header)
    for section in sections:
        table = Table(title=section.title, title_justify="left", show_lines=False)
        for i, col in enumerate(section.columns):
            table.add_column(col, justify="left" if i == 0 else "right", overflow="fold")
        for row in section.rows:
            table.add_row(*[str(c) for c in row])
        console.print(table)
        if section.note:
            console.print(section.note)
    console.print(UNITS_NOTE)
    return buffer.getvalue()


def _render_markdown(sections: list[Section], header: str) -> str:
    lines = [header, ""] if header else []
    for section in sections:
        lines.append(f"### {section.title}")
        lines.append("")
        lines.append("| " + " | ".join(section.columns) + " |")
        lines.append("|" + "|".join("---" if i == 0 else "---:" for i in range(len(section.columns))) + "|")
        for row in section.rows:
            lines.append("| " + " | ".join(str(c).replace("|", "\\|") for c in row) + " |")
        if section.note:
            lines += ["", section.note]
        lines.append("")
    lines.append(UNITS_NOTE)
    return "\n".join(lines) + "\n"


def _flatten(prefix: str, value: Any, out: list[tuple[str, Any]]):
    if isinstance(value, dict):
        for k, v in value.items():
            _flatten(f"{prefix}.{k}" if prefix else k, v, out)
    elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        for i, v in enumerate(value):
            _flatten(f"{prefix}[{i}]", v, out)
    elif isinstance(value, list):
        out.append((prefix, ";".join(str(v) for v in value)))
    else:
        out.append((prefix, value))


def _render_csv(document: dict | list) -> str:
    """Long format: one ``field,value`` row per leaf; exact integers, units in the names."""
    rows: list[tuple[str, Any]] = []
    _flatten("", document, rows)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["field", "value"])
    for key, value in rows:
        writer.writerow([key, "" if value is None else value])
    return buffer.getvalue()


def _render_rows_csv(rows: list[dict]) -> str:
    """Wide format for row lists (list, compare): one row per item."""
    buffer = io.StringIO()
    columns: list[str] = []
    for row in rows:
        for key in row:
            if key not in columns:
                columns.append(key)
    writer = csv.DictWriter(buffer, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: ("" if v is None else v) for k, v in row.items()})
    return buffer.getvalue()


def emit(fmt: str, document: Any, sections: Callable[[], list[Section]], header: str = "",
         rows_csv: bool = False) -> None:
    if fmt == "json":
        text = json.dumps(document, indent=2) + "\n"
    elif fmt == "csv":
        text = _render_rows_csv(document) if rows_csv else _render_csv(document)
    elif fmt == "markdown":
        text = _render_markdown(sections(), header)
    else:
        text = _render_table(sections(), header)
    click.echo(text, nl=False)


# ----------------------------------------------------------------------------------
# the commands


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="mlacalc", prog_name="mlacalc")
def cli():
    """mlacalc: what an attention design costs (KV cache, parameters, FLOPs, bytes).

    \b
    Examples:
      mlacalc list
      mlacalc report deepseek-v3 --seq-len 128k --batch 8 --kv-dtype fp8
      mlacalc compare llama-3-70b deepseek-v2 --seq-len 32k
      mlacalc compare deepseek-v3 --as-variants
      mlacalc formula attention_flops --variant mla --impl absorbed --phase decode
    """


def _load(name: str):
    from .config import load_model

    return load_model(name)


@cli.command("list")
@click.option("--hardware", "show_hardware", is_flag=True,
              help="List the hardware catalogue (and measured devices) instead of the models.")
@format_option
def list_models(show_hardware, fmt):
    """List the shipped models with their attention variant and size (or, with --hardware, the devices).

    \b
    Examples:
      mlacalc list --format markdown
      mlacalc list --hardware
    """
    if show_hardware:
        return _list_hardware(fmt)
    from .config import load_model, shipped_models
    from .engine import kv_cache
    from .params import param_counts

    rows = []
    for name in shipped_models():
        m = load_model(name)
        counts = param_counts(m)
        rows.append({"name": m.name, "display_name": m.label, "variant": m.variant, "layers": m.num_hidden_layers,
                     "num_attention_heads": m.num_attention_heads,
                     "num_key_value_heads": None if m.is_mla else m.num_key_value_heads,
                     "kv_lora_rank": m.kv_lora_rank, "total_params": counts.total, "active_params": counts.active,
                     "kv_bytes_per_token_bf16": kv_cache(m, 1).bytes_per_token, "aliases": list(m.aliases)})

    def sections():
        return [Section("Shipped models", ["name", "variant", "layers", "heads", "KV heads / d_c", "total params",
                                           "active params", "KV per token (bf16)"],
                        [[r["name"], r["variant"].upper(), r["layers"], r["num_attention_heads"],
                          f"d_c={r['kv_lora_rank']}" if r["kv_lora_rank"] else r["num_key_value_heads"],
                          human_si(r["total_params"]), human_si(r["active_params"]),
                          human_bytes(r["kv_bytes_per_token_bf16"])] for r in rows])]

    emit(fmt, rows, sections, rows_csv=True)


def _phases(phase: str) -> list[str]:
    return ["prefill", "decode"] if phase == "both" else [phase]


@cli.command()
@click.argument("model")
@click.option("--seq-len", "-s", type=SIZE, default="128k", show_default=True,
              help="Tokens in the cache / keys the last query attends (128k = 131072).")
@click.option("--batch", "-b", type=SIZE, default=1, show_default=True, help="Sequences in the batch.")
@click.option("--kv-dtype", type=KV_DTYPE, default="bf16", show_default=True,
              help="KV-cache dtype or layout: bf16, fp16, fp8, fp32, int8, int4, fp8_ds_mla.")
@click.option("--weight-dtype", type=W_DTYPE, default=None, help="Weight dtype (default: the model's).")
@click.option("--impl", type=IMPL_CHOICE, default=None,
              help="MLA implementation (default: every one side by side).")
@click.option("--phase", type=PHASE_CHOICE, default="both", show_default=True, help="Phase(s) to cost.")
@click.option("--q-len", type=SIZE, default=None, help="New tokens per sequence for --phase chunk.")
@click.option("--causal", is_flag=True, help="Count only the (query, key) pairs a causal kernel needs.")
@format_option
def report(model, seq_len, batch, kv_dtype, weight_dtype, impl, phase, q_len, causal, fmt):
    """Parameters, weights, KV cache and attention FLOPs of one model.

    MODEL is a shipped name (see `mlacalc list`), a YAML model file or a Hugging Face config.json.

    \b
    Examples:
      mlacalc report deepseek-v3
      mlacalc report deepseek-v3 --seq-len 128k --batch 8 --kv-dtype fp8
      mlacalc report llama-3-70b --phase decode --format json
      mlacalc report ./config.json --phase chunk --q-len 512
    """
    from .report import model_report

    if phase == "chunk" and q_len is None:
        raise click.BadParameter("--phase chunk needs --q-len", param_hint="--q-len")
    m = _load(model)
    impl = None if impl == "standard" else impl
    doc = model_report(m, seq_len=seq_len, batch=batch, kv_dtype=kv_dtype, weight_dtype=weight_dtype,
                       impl=impl, phases=_phases(phase), causal=causal, q_len=q_len)
    header = _report_header(doc)
    emit(fmt, doc, lambda: _report_sections(doc), header)


def _report_header(doc: dict) -> str:
    m, s = doc["model"], doc["settings"]
    dims = [f"d={m['hidden_size']}", f"L={m['num_hidden_layers']}", f"n_h={m['num_attention_heads']}"]
    if m["variant"] == "mla":
        dims += [f"d_c={m['kv_lora_rank']}", f"d_cq={m.get('q_lora_rank')}", f"d_nope={m['qk_nope_head_dim']}",
                 f"d_rope={m['qk_rope_head_dim']}", f"d_v={m['v_head_dim']}"]
    else:
        dims += [f"n_kv={m['num_key_value_heads']}", f"d_h={m['head_dim']}"]
    if m.get("sliding_window"):
        dims.append(f"window={m['sliding_window']}")
    lines = [f"{m['display_name']} ({m['name']}): {m['variant'].upper()}, " + ", ".join(dims),
             f"seq_len {s['seq_len']:,} x batch {s['batch']:,}, KV {s['kv_dtype']}, weights {s['weight_dtype']}"
             + (", causal" if s["causal"] else "")]
    for note in m["derived"]:
        lines.append(f"derived: {note}")
    return "\n".join(lines) + "\n"


def _report_sections(doc: dict) -> list[Section]:
    p, w, s = doc["parameters"], doc["weights"], doc["settings"]
    params_rows = [["total (main model)", f"{p['total']:,}", human_si(p["total"])],
                   ["active per token", f"{p['active']:,}", human_si(p["active"])],
                   ["input embedding", f"{p['embedding']:,}", human_si(p["embedding"])],
                   ["non-embedding", f"{p['non_embedding']:,}", human_si(p["non_embedding"])],
                   ["attention per layer", f"{p['attention_per_layer']:,}", human_si(p["attention_per_layer"])]]
    if p["mtp"]:
        params_rows.insert(2, ["MTP modules (apart)", f"{p['mtp']:,}", human_si(p["mtp"])])
    params_rows.append([f"weights in {w['dtype']}", f"{w['total_bytes']:,} B", human_bytes(w["total_bytes"])])
    sections = [
        Section("Parameters", ["quantity", "exact", "approx."], params_rows),
        Section("Parameter breakdown (main model)", ["part", "parameters", "share"],
                [[k, f"{v:,}", f"{100 * v / p['total']:.2f}%"] for k, v in p["breakdown"].items() if v]),
        Section("Attention projections (one layer)", ["projection", "parameters"],
                [[k, f"{v:,}"] for k, v in p["attention_breakdown"].items()]),
    ]
    kv_title = f"KV cache at seq_len {s['seq_len']:,} x batch {s['batch']:,} ({s['kv_dtype']})"
    sections.append(Section(kv_title, ["implementation", "elements/token/layer", "bytes/token (all layers)",
                                       "tokens kept per layer", "total", "vs smallest"],
                            [[r["impl"], f"{r['elements_per_token_per_layer']:,}", human_bytes(r["bytes_per_token"]),
                              f"{r['tokens_per_layer']:,}", human_bytes(r["total_bytes"]),
                              human_ratio(r["ratio_to_smallest"])] for r in doc["kv_cache"]]))
    stage_names = ["q_proj", "kv_proj", "kv_up", "absorb", "core", "o_proj"]
    rows = []
    for r in doc["attention"]:
        label = r["impl"] + (" (default)" if r["default"] and doc["model"]["variant"] == "mla" else "")
        rows.append([r["phase"], label] + [human_si(r["stage_flops"][k]) for k in stage_names]
                    + [human_si(r["flops"]), human_si(r["elementwise_flops"]), human_bytes(r["fused_bytes"]),
                       f"{r['arithmetic_intensity_flops_per_byte']:,.1f}"])
    sections.append(Section("Attention FLOPs per step, all layers (matmul; element-wise apart)",
                            ["phase", "impl"] + stage_names + ["total FLOPs", "elementwise", "fused bytes",
                                                               "FLOP/byte"], rows,
                            note="fused bytes: ideal lower bound (weights, input/output and cache once); "
                                 "MLA default = expanded K/V in prefill and chunk, absorbed in decode."))
    return sections


@cli.command()
@click.argument("models", nargs=-1, required=True)
@click.option("--seq-len", "-s", type=SIZE, default="32k", show_default=True, help="Context length.")
@click.option("--batch", "-b", type=SIZE, default=1, show_default=True, help="Sequences in the batch.")
@click.option("--kv-dtype", type=KV_DTYPE, default="bf16", show_default=True, help="KV-cache dtype or layout.")
@click.option("--weight-dtype", type=W_DTYPE, default=None, help="Weight dtype (default: each model's).")
@click.option("--as-variants", is_flag=True,
              help="Re-express one model as its MHA, GQA, MQA and MLA equivalents.")
@click.option("--kv-heads", type=int, default=None, help="KV heads of the GQA equivalent (with --as-variants).")
@format_option
def compare(models, seq_len, batch, kv_dtype, weight_dtype, as_variants, kv_heads, fmt):
    """Compare models side by side (or one model's attention designs with --as-variants).

    \b
    Examples:
      mlacalc compare llama-3-70b qwen2.5-72b deepseek-v2 --seq-len 32k
      mlacalc compare deepseek-v3 --as-variants --kv-heads 8 --seq-len 128k --batch 8
    """
    from .report import compare_rows
    from .variants import as_variant

    loaded = [_load(name) for name in models]
    note = ""
    if as_variants:
        if len(loaded) != 1:
            raise click.BadParameter("--as-variants takes exactly one model", param_hint="MODELS")
        base = loaded[0]
        loaded = [base] + [as_variant(base, v, num_key_value_heads=kv_heads) for v in ("mha", "gqa", "mqa", "mla")
                           if not (v == base.variant and v != "gqa")]
        note = ("Equivalents keep everything but the attention; MLA -> MHA family uses head_dim = "
                "qk_nope_head_dim, MHA family -> MLA uses d_c = 4 d_h, d_rope = d_h / 2.")
    elif kv_heads is not None:
        raise click.BadParameter("--kv-heads only applies with --as-variants", param_hint="--kv-heads")
    rows = compare_rows(loaded, seq_len=seq_len, batch=batch, kv_dtype=kv_dtype, weight_dtype=weight_dtype)

    def sections():
        return [Section(f"Comparison at seq_len {seq_len:,} x batch {batch:,} (KV {kv_dtype})",
                        ["model", "variant", "heads", "KV heads / d_c", "total params", "active params",
                         "KV / token", "KV total", "decode FLOPs", "decode bytes (fused)", "decode FLOP/byte",
                         "prefill FLOPs (batch 1)"],
                        [[r["display_name"], r["variant"].upper(), r["num_attention_heads"],
                          f"d_c={r['kv_lora_rank']}" if r["kv_lora_rank"] else r["num_key_value_heads"],
                          human_si(r["total_params"]), human_si(r["active_params"]),
                          human_bytes(r["kv_bytes_per_token"]), human_bytes(r["kv_total_bytes"]),
                          human_si(r["decode_flops"]), human_bytes(r["decode_fused_bytes"]),
                          f"{r['decode_arithmetic_intensity_flops_per_byte']:,.1f}", human_si(r["prefill_flops"])]
                         for r in rows], note=note)]

    emit(fmt, rows, sections, rows_csv=True)


@cli.command()
@click.argument("quantity", type=click.Choice(["kv_cache_elements", "kv_cache_bytes", "attention_params",
                                               "attention_flops", "elementwise_flops", "unfused_bytes",
                                               "fused_bytes"]))
@click.option("--variant", type=click.Choice(["mha", "gqa", "mqa", "mla"]), required=True,
              help="Attention variant.")
@click.option("--impl", type=IMPL_CHOICE, default=None, help="MLA implementation (default: serving default).")
@click.option("--phase", type=click.Choice(["prefill", "decode", "chunk"]), default=None,
              help="Substitute q = S (prefill) or q = 1 (decode); chunk keeps q.")
@click.option("--stage", type=click.Choice(["q_proj", "kv_proj", "kv_up", "absorb", "core", "o_proj"]),
              default=None, help="One stage of attention_flops.")
@click.option("--causal", is_flag=True, help="Count only causal pairs: P = q (2S - q + 1) / 2.")
@click.option("--no-q-lora", is_flag=True, help="MLA without query compression (a plain W_Q).")
@click.option("--subs", "subs_model", default=None, metavar="MODEL",
              help="Substitute this model's dimensions (leaves B, S, q symbolic).")
@click.option("--latex", "style", flag_value="latex", help="Print LaTeX.")
@click.option("--pretty", "style", flag_value="pretty", help="Print a 2-D pretty form.")
@click.option("--python", "style", flag_value="python", help="Print a Python expression.")
def formula(quantity, variant, impl, phase, stage, causal, no_q_lora, subs_model, style):
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

    from . import symbols as s
    from .symbolic import formula as build

    if variant != "mla" and impl not in (None, "standard"):
        raise click.BadParameter(f"{variant.upper()} has one implementation", param_hint="--impl")
    expr = build(quantity, variant, None if impl == "standard" else impl, phase=phase, stage=stage,
                 causal=causal, q_lora=not no_q_lora)
    if subs_model:
        m = _load(subs_model)
        if (variant == "mla") != m.is_mla:
            raise click.BadParameter(f"{m.label} is {m.variant.upper()}, not {variant.upper()}", param_hint="--subs")
        values = {s.L: m.num_hidden_layers, s.d: m.hidden_size, s.n_h: m.num_attention_heads}
        if m.is_mla:
            values.update({s.d_c: m.kv_lora_rank, s.d_cq: m.q_lora_rank or 0, s.d_nope: m.qk_nope_head_dim,
                           s.d_rope: m.qk_rope_head_dim, s.d_v: m.v_head_dim})
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


@cli.command("import-hf")
@click.argument("config", type=click.Path(dir_okay=True, path_type=str))
@click.option("-o", "--output", type=click.Path(dir_okay=False, writable=True, path_type=str), default=None,
              help="Write the YAML model file here (default: standard output).")
def import_hf(config, output):
    """Convert and validate a Hugging Face config.json into an mlacalc YAML model file.

    \b
    Example:
      mlacalc import-hf ./DeepSeek-V3/config.json -o deepseek-v3-local.yaml
    """
    import yaml

    from .config import load_model

    m = load_model(config)
    data = {k: v for k, v in m.to_dict().items()
            if (v not in (None, "", []) or (k == "q_lora_rank" and m.is_mla)) and k != "aliases"}
    keep = {"falcon": ("parallel_attn", "bias")}.get(m.family, ())
    for key in ("attention_bias", "qkv_bias", "mlp_bias", "parallel_attn", "new_decoder_architecture", "bias"):
        if data.get(key) is False and key not in keep:
            data.pop(key)
    for key in ("n_routed_experts", "n_shared_experts", "num_experts_per_tok", "first_k_dense_replace",
                "num_nextn_predict_layers"):
        if data.get(key) == 0:
            data.pop(key)
    if not m.is_moe:
        data.pop("moe_layer_freq", None)
    header = [f"# Converted by mlacalc import-hf from {config}", f"# attention variant: {m.variant.upper()}"]
    header += [f"# derived: {note}" for note in m.derived]
    text = "\n".join(header) + "\n" + yaml.safe_dump(data, sort_keys=False, width=120)
    if output:
        with open(output, "w", encoding="utf-8") as fh:
            fh.write(text)
        load_model(output)      # the file we wrote must load back
        click.echo(f"wrote {output} ({m.label}, {m.variant.upper()})", err=True)
    else:
        click.echo(text, nl=False)


def _list_hardware(fmt):
    from .hardware import load_hardware, measured_sets, shipped_hardware

    specs = [load_hardware(n) for n in shipped_hardware()] + [load_hardware(f"measured:{n}") for n in measured_sets()]
    rows = [{"name": h.name, "display_name": h.display_name, "kind": h.kind, "measured": h.measured,
             "peak_flops_per_s": h.peak_flops_per_s, "memory_bandwidth_bytes_per_s": h.memory_bandwidth_bytes_per_s,
             "memory_bytes": h.memory_bytes, "sm_count": h.sm_count, "ridge_point_flops_per_byte": h.ridge_point}
            for h in specs]

    def sections():
        return [Section("Hardware (dense peaks, FP32 accumulate; measured devices: their ceilings)",
                        ["name", "bf16", "fp8", "bandwidth", "memory", "SMs", "ridge (FLOP/B)"],
                        [[r["name"], human_si(r["peak_flops_per_s"].get("bf16", 0), "FLOP/s"),
                          human_si(r["peak_flops_per_s"]["fp8"], "FLOP/s") if "fp8" in r["peak_flops_per_s"] else "-",
                          human_si(r["memory_bandwidth_bytes_per_s"], "B/s"), human_si(r["memory_bytes"], "B"),
                          r["sm_count"] or "-", f"{r['ridge_point_flops_per_byte']:,.1f}"] for r in rows],
                        note="Hardware figures use SI units (TB/s = 10^12 B/s, GB = 10^9 B), as datasheets do.")]

    flat = [{**{k: v for k, v in r.items() if k != "peak_flops_per_s"},
             **{f"peak_{k}_flops_per_s": v for k, v in r["peak_flops_per_s"].items()}} for r in rows]
    emit(fmt, rows if fmt == "json" else flat, sections, rows_csv=True)


@cli.command()
@click.argument("model")
@click.option("--hardware", "-H", "hardware", required=True,
              help="Device: a catalogue name (mlacalc list --hardware), a YAML file or measured:<set>.")
@click.option("--phase", type=PHASE_CHOICE, default="decode", show_default=True)
@click.option("--seq-len", "-s", type=SIZE, default="32k", show_default=True)
@click.option("--batch", "-b", type=SIZE, default=1, show_default=True)
@click.option("--q-len", type=SIZE, default=None, help="New tokens per sequence for --phase chunk.")
@click.option("--impl", type=IMPL_CHOICE, default=None, help="MLA implementation (default: serving default).")
@click.option("--mode", type=click.Choice(["fused", "unfused"]), default="fused", show_default=True,
              help="fused: ideal kernels; unfused: the op-by-op PyTorch sequence.")
@click.option("--scope", type=click.Choice(["attention_layer", "model"]), default="attention_layer",
              show_default=True, help="One attention layer, or a whole forward step.")
@click.option("--dtype", type=W_DTYPE, default="bf16", show_default=True, help="Compute dtype.")
@click.option("--weight-dtype", type=W_DTYPE, default=None, help="Weight dtype (default: --dtype).")
@click.option("--kv-dtype", type=KV_DTYPE, default=None, help="KV dtype or layout (default: --dtype).")
@click.option("--calibrate", default=None, metavar="JSON",
              help="A measurement sidecar whose ceilings replace the datasheet peaks.")
@format_option
def roofline(model, hardware, phase, seq_len, batch, q_len, impl, mode, scope, dtype, weight_dtype, kv_dtype,
             calibrate, fmt):
    """Roofline time of an attention layer or a model step, kernel by kernel, with its bound.

    \b
    Examples:
      mlacalc roofline deepseek-v3 --hardware H200 --seq-len 32k --batch 64
      mlacalc roofline deepseek-v3 --hardware H100-SXM --phase prefill --seq-len 4k --mode unfused
      mlacalc roofline llama-3-70b --hardware H100-SXM --scope model --weight-dtype fp8 --batch 32
    """
    from .insight import absorption_crossover, compute_bound_seq_len, ridge_point
    from .roofline import predict_time

    m = _load(model)
    phases = _phases(phase)
    if "chunk" in phases and q_len is None:
        raise click.BadParameter("--phase chunk needs --q-len", param_hint="--q-len")
    impl = None if impl == "standard" else impl
    predictions = [predict_time(m, hardware, ph, seq_len, batch, impl, mode, dtype, scope,
                                q_len=q_len if ph == "chunk" else None, weight_dtype=weight_dtype,
                                kv_dtype=kv_dtype, calibration=calibrate) for ph in phases]
    insights = [ridge_point(hardware, dtype)]
    if m.is_mla:
        insights += compute_bound_seq_len(m, hardware, batch, dtype, kv_dtype)
        insights += [absorption_crossover(m), absorption_crossover(m, seq_len)]
    doc = {"predictions": [p.to_dict() for p in predictions], "insights": [i.to_dict() for i in insights]}

    def sections():
        out = []
        for p in predictions:
            rows = [[o.name, o.stage, human_si(o.flops), human_bytes(o.bytes), f"{o.arithmetic_intensity:,.1f}",
                     o.bound, f"{o.efficiency:.2f}", f"{o.seconds * 1e6:,.1f}"] for o in p.ops]
            rows.append(["total", "", human_si(p.flops), human_bytes(p.bytes), f"{p.arithmetic_intensity:,.1f}",
                         p.bound, "", f"{p.seconds * 1e6:,.1f}"])
            out.append(Section(f"{p.phase}: {m.label} on {p.hardware}, {p.scope}, {p.mode}, impl {p.impl}, "
                               f"seq_len {p.seq_len:,} x batch {p.batch:,} ({p.dtype}"
                               f"{', calibrated' if p.calibrated else ''})",
                               ["kernel", "stage", "FLOPs", "bytes", "FLOP/byte", "bound", "tile eff.", "time (us)"],
                               rows))
        out.append(Section("Insight", ["quantity", "value", "formula / note"],
                           [[i.name, "never" if i.value is None else f"{i.value:,.1f}",
                             f"{i.expression}  ({i.note})" if len(str(i.expression)) < 80 else i.note]
                            for i in insights]))
        return out

    emit(fmt, doc, sections, header=f"{m.label}: roofline ({mode}) on {predictions[0].hardware}\n")


@cli.command()
@click.argument("model")
@click.option("--hardware", "-H", "hardware", required=True, help="Device (mlacalc list --hardware).")
@click.option("--gpus", "-g", type=int, default=8, show_default=True, help="GPUs in all.")
@click.option("--tp", type=int, default=None, help="Tensor-parallel degree (default: all GPUs).")
@click.option("--dp", type=int, default=None, help="Data-parallel degree (default: gpus / tp).")
@click.option("--ep", type=int, default=1, show_default=True, help="Expert-parallel degree.")
@click.option("--weight-dtype", type=W_DTYPE, default=None, help="Weight dtype (default: the model's).")
@click.option("--kv-dtype", type=KV_DTYPE, default="bf16", show_default=True, help="KV dtype or layout.")
@click.option("--page-size", type=int, default=1, show_default=True, help="Tokens per KV page (block).")
@click.option("--memory-reserve", type=float, default=0.1, show_default=True,
              help="Fraction of each GPU's memory kept for activations and workspace.")
@click.option("--seq-len", "-s", type=SIZE, default="128k", show_default=True, help="Context per sequence.")
@click.option("--batch", "-b", type=SIZE, default=None, help="Sequences to serve (default: as many as fit).")
@click.option("--include-mtp", is_flag=True, help="Also hold the MTP modules (speculative decoding).")
@format_option
def plan(model, hardware, gpus, tp, dp, ep, weight_dtype, kv_dtype, page_size, memory_reserve, seq_len, batch,
         include_mtp, fmt):
    """Capacity plan: what fits on the GPUs, the largest batch and context, tokens/s upper bound.

    \b
    Examples:
      mlacalc plan deepseek-v3 --hardware H200 --gpus 8 --seq-len 128k
      mlacalc plan deepseek-v3 --hardware H200 --gpus 8 --kv-dtype fp8 --batch 4
      mlacalc plan llama-3-70b --hardware H100-SXM --gpus 4 --weight-dtype fp8 --page-size 16
    """
    from .planner import plan as make_plan

    p = make_plan(_load(model), hardware, gpus, tp=tp, dp=dp, ep=ep, weight_dtype=weight_dtype, kv_dtype=kv_dtype,
                  page_size=page_size, memory_reserve=memory_reserve, seq_len=seq_len, batch=batch,
                  include_mtp=include_mtp)
    doc = p.to_dict()

    def sections():
        rows = [["GPUs", f"{p.gpus} x {p.hardware} (tp {p.tp}, dp {p.dp}, ep {p.ep})"],
                ["memory per GPU", f"{human_bytes(p.memory_per_gpu_bytes)} ({human_si(p.memory_per_gpu_bytes, 'B')})"],
                ["usable after reserve", human_bytes(p.usable_per_gpu_bytes)],
                [f"weights per GPU ({p.weight_dtype})", human_bytes(p.weights_per_gpu_bytes)],
                ["KV budget per GPU", human_bytes(p.kv_budget_per_gpu_bytes)],
                [f"KV per token per GPU ({p.kv_layout})", f"{p.kv_bytes_per_token_per_gpu:,} B"],
                ["KV tokens per GPU", f"{p.kv_tokens_per_gpu:,}"],
                [f"largest batch at {p.seq_len:,} tokens", f"{p.max_batch:,}"]]
        if p.max_context is not None:
            rows.append([f"longest context at batch {p.batch:,}", f"{p.max_context:,} tokens"])
        if p.decode_tokens_per_s is not None:
            rows.append([f"decode step at batch {p.decode_batch:,} (roofline)",
                         f"{p.decode_step_s * 1e3:,.2f} ms ({p.decode_bound}-bound)"])
            rows.append([f"decode tokens/s at batch {p.decode_batch:,} (upper bound)", f"{p.decode_tokens_per_s:,.0f}"])
        if p.prefill_s is not None:
            rows.append([f"prefill of {p.seq_len:,} tokens (roofline)", f"{p.prefill_s:,.2f} s"])
        rows.append(["binding resource", p.binding])
        return [Section(f"Plan: {p.model}", ["quantity", "value"], rows,
                        note="Throughput is a roofline upper bound (no communication, perfect overlap).")]

    emit(fmt, doc, sections)


@cli.command()
@click.argument("files", nargs=-1)
@click.option("--mode", type=click.Choice(["fused", "unfused"]), default="unfused", show_default=True,
              help="unfused models the op sequence the microbenchmark runs.")
@click.option("--rows", "show_rows", is_flag=True, help="Also print every row.")
@format_option
def validate(files, mode, show_rows, fmt):
    """Predicted vs measured: the roofline against the microbenchmark's files (default: the committed sets).

    \b
    Examples:
      mlacalc validate
      mlacalc validate bench-results/cuda-h100-full-bf16.json --rows
    """
    from .validation import validate as run_validation

    sets = run_validation(list(files) or None, mode)
    doc = [s.to_dict() for s in sets]

    def sections():
        out = []
        for v in sets:
            rows = [[k, g["rows"], f"{100 * g['median_abs_error']:.1f}%", f"{100 * g['worst_abs_error']:.1f}%"]
                    for k, g in v.groups.items()]
            rows.append(["all", len(v.rows), f"{100 * v.median_abs_error:.1f}%", f"{100 * v.worst_abs_error:.1f}%"])
            out.append(Section(f"{v.name} ({v.device}), {mode} roofline vs measured", ["implementation / variant",
                                                                                      "rows", "median |error|",
                                                                                      "worst |error|"], rows))
            if show_rows:
                out.append(Section("rows", ["model", "impl", "phase", "batch", "seq_len", "measured (ms)",
                                            "predicted (ms)", "error", "bound"],
                                   [[r.model, r.impl, r.phase, r.batch, r.seq_len, f"{r.measured_s * 1e3:,.3f}",
                                     f"{r.predicted_s * 1e3:,.3f}", f"{100 * r.error:+.1f}%", r.bound]
                                    for r in v.rows]))
        return out

    if fmt == "csv":
        rows = [{"set": v.name, "device": v.device, **r.to_dict()} for v in sets for r in v.rows]
        emit(fmt, rows, sections, rows_csv=True)
    else:
        emit(fmt, doc, sections)


def _size_list(text: str | None) -> list[int] | None:
    if text is None:
        return None
    return [SIZE.convert(part, None, None) for part in text.split(",") if part.strip()]


@cli.command()
@click.option("--preset", type=click.Choice(["quick", "cpu", "full"]), default=None,
              help="quick: under a minute on a CPU; cpu: the committed CPU set; full: DeepSeek-V2/V3, "
                   "a GQA and an MHA model, batch 1-128, seq_len to 128K (for a GPU).")
@click.option("--model", "models", multiple=True, help="Model(s) for a custom sweep (repeat the option).")
@click.option("--impl", "impls", multiple=True, type=IMPL_CHOICE, help="Implementations (default: all that apply).")
@click.option("--phase", type=click.Choice(["prefill", "decode", "both"]), default="both", show_default=True)
@click.option("--batch", "batches", default="1", show_default=True, help="Comma-separated batches: 1,8,32.")
@click.option("--seq-len", "seqs", default="1024", show_default=True, help="Comma-separated lengths: 512,4k.")
@click.option("--dtype", type=click.Choice(["fp32", "bf16", "fp16"]), default=None,
              help="Compute dtype (default: the preset's; fp32 for custom sweeps).")
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto", show_default=True)
@click.option("--threads", type=int, default=None, help="CPU threads (default: all); recorded in the results.")
@click.option("--warmup", type=int, default=2, show_default=True)
@click.option("--repeats", type=int, default=20, show_default=True, help="Timed repeats per point (at most).")
@click.option("--max-seconds", type=float, default=3.0, show_default=True, help="Time budget per point.")
@click.option("--out", "out_dir", default="bench-results", show_default=True, help="Directory for the CSV and JSON.")
@click.option("--name", default=None, help="Base name of the output files (default: device-preset-dtype).")
@click.option("--no-progress", is_flag=True, help="No progress bar.")
def bench(preset, models, impls, phase, batches, seqs, dtype, device, threads, warmup, repeats, max_seconds,
          out_dir, name, no_progress):
    """Time every attention variant with the reference PyTorch layers (needs the bench extra).

    \b
    Examples:
      mlacalc bench --preset quick
      mlacalc bench --preset full --device cuda --out results/
      mlacalc bench --model deepseek-v3 --impl absorbed --impl naive --phase decode --batch 1,8 --seq-len 4k,32k
    """
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        raise MlacalcError("the microbenchmark needs PyTorch: pip install 'mlacalc[bench]'")
    from .bench.runner import PRESETS, BenchPoint, preset_points, run_benchmark

    if preset and models:
        raise click.BadParameter("use --preset or --model, not both", param_hint="--model")
    if not preset and not models:
        raise click.BadParameter("name a --preset or at least one --model", param_hint="--preset")
    if preset:
        points = preset_points(preset)
        dtype = dtype or PRESETS[preset][1]
    else:
        points = []
        for model_name in models:
            m = _load(model_name)
            choices = [i for i in impls if (i == "standard") != m.is_mla] or (
                ["naive", "compressed", "absorbed", "absorbed_merged"] if m.is_mla else ["standard"])
            for ph in (["prefill", "decode"] if phase == "both" else [phase]):
                for impl in choices:
                    for b in _size_list(batches):
                        for s in _size_list(seqs):
                            points.append(BenchPoint(m.name, impl, ph, b, s))
        dtype = dtype or "fp32"
    csv_path, json_path = run_benchmark(points, dtype=dtype, device=device, threads=threads, warmup=warmup,
                                        repeats=repeats, max_seconds=max_seconds, out_dir=out_dir, name=name,
                                        preset=preset or "custom", progress=not no_progress,
                                        log=lambda s: click.echo(s, err=True))
    click.echo(f"wrote {csv_path} and {json_path}")


_NO_ARGS_IS_HELP = getattr(click.exceptions, "NoArgsIsHelpError", ())   # click >= 8.2


def main(argv: list[str] | None = None) -> int:
    """Run the command line; every error is one line on stderr and exit status 2."""
    try:
        cli.main(args=argv, prog_name="mlacalc", standalone_mode=False)
    except _NO_ARGS_IS_HELP as exc:          # plain `mlacalc`: show the help
        click.echo(exc.ctx.get_help() if exc.ctx else str(exc))
        return 0
    except click.UsageError as exc:
        command = exc.ctx.command_path if exc.ctx else "mlacalc"
        message = exc.format_message().replace("\n", " ")
        click.echo(f"mlacalc: error: {message} (see '{command} --help')", err=True)
        return 2
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.Abort:
        click.echo("mlacalc: aborted", err=True)
        return 1
    except MlacalcError as exc:
        click.echo(f"mlacalc: error: {exc}", err=True)
        return 2
    except OSError as exc:
        click.echo(f"mlacalc: error: {exc.filename or ''}: {exc.strerror or exc}", err=True)
        return 2
    return 0
