"""`mlacalc compare`: models side by side, or one model's attention designs."""

from __future__ import annotations

import click

from mlacalc.cli.common import (
    KV_DTYPE,
    SIZE,
    W_DTYPE,
    Section,
    check_context,
    emit,
    format_option,
    load,
    set_option,
    sets_by_model,
    size_text,
)
from mlacalc.models.variants import kept_sparse_note, one_head_shape_note
from mlacalc.render import human_bytes, human_si
from mlacalc.report import compare_rows, variant_equivalents
from mlacalc.words import defaults as D
from mlacalc.words.errors import InvalidArgumentError


@click.command("compare")
@click.argument("models", nargs=-1, required=True)
@click.option(
    "--seq-len",
    "-s",
    type=SIZE,
    default=size_text(D.COMPARE_SEQ_LEN),
    show_default=True,
    help="Context length.",
)
@click.option(
    "--batch", "-b", type=SIZE, default=D.BATCH, show_default=True, help="Sequences in the batch."
)
@click.option(
    "--kv-dtype",
    type=KV_DTYPE,
    default=D.KV_DTYPE,
    show_default=True,
    help="KV-cache dtype or layout.",
)
@click.option(
    "--weight-dtype", type=W_DTYPE, default=None, help="Weight dtype (default: each model's)."
)
@click.option(
    "--as-variants",
    is_flag=True,
    help="Re-express one model as its MHA, GQA, MQA and MLA equivalents.",
)
@click.option(
    "--kv-heads",
    type=int,
    default=None,
    help="KV heads of the GQA equivalent (with --as-variants).",
)
@click.option(
    "--kv-lora-rank",
    type=int,
    default=None,
    help="Latent width d_c of the MLA equivalent (with --as-variants; default 4 d_h, an MLA "
    "model's own: then both it and its design at this rank).",
)
@set_option
@format_option
def command(
    models, seq_len, batch, kv_dtype, weight_dtype, as_variants, kv_heads, kv_lora_rank, sets, fmt
):
    """Compare models side by side (or one model's attention designs with --as-variants).

    --set FIELD=VALUE changes every model given; --set N:FIELD=VALUE only the N-th (from 1).

    \b
    Examples:
      mlacalc compare llama-3-70b qwen2.5-72b deepseek-v2 --seq-len 32k
      mlacalc compare deepseek-v3 --as-variants --kv-heads 8 --seq-len 128k --batch 8
      mlacalc compare llama-3-70b --as-variants --kv-lora-rank 1024
      mlacalc compare llama-3-70b --as-variants --set num_key_value_heads=4   # --set: each model
      mlacalc compare deepseek-v3 deepseek-v3 --set 2:kv_lora_rank=256    # N:FIELD: the N-th
    """
    loaded = []
    for i, (name, one) in enumerate(zip(models, sets_by_model(sets, len(models)), strict=True)):
        try:
            loaded.append(load(name, changes=one, weight_dtype=weight_dtype))
        except click.BadParameter as exc:  # which model a --set refused, where there are two
            if len(models) > 1 and str(exc.param_hint or "").startswith("--set"):
                exc.param_hint = f"{exc.param_hint} (model {i + 1}, {name})"
            raise
    note = ""
    if as_variants:
        if len(loaded) != 1:
            raise click.BadParameter("--as-variants takes exactly one model", param_hint="MODELS")
        base = loaded[0]
        try:
            equivalents, notes = variant_equivalents(base, kv_heads, kv_lora_rank)
        except InvalidArgumentError as exc:
            if exc.argument == "model":  # no equivalent at all (DeepSeek-V4): the flag asked
                raise click.BadParameter(
                    f"{exc.message} (without --as-variants)", param_hint="--as-variants"
                ) from None
            if exc.argument not in ("kv_heads", "kv_lora_rank"):
                raise
            flag = "--" + exc.argument.replace("_", "-")
            raise click.BadParameter(exc.message, param_hint=flag) from None
        loaded = [base] + [e for e in equivalents if e is not base]  # its own design: itself
        note = (
            "Equivalents keep everything but the attention heads; MLA -> MHA family uses "
            "head_dim = "
            "qk_nope_head_dim, MHA family -> MLA uses d_c = 4 d_h, d_rope = d_h / 2."
            + (
                f" The MLA design here: d_c = {kv_lora_rank:,} (--kv-lora-rank)."
                if kv_lora_rank
                else ""
            )
        )
        note += "".join(f" {n}" for n in notes)
        for said in (one_head_shape_note(base), kept_sparse_note(base)):
            note += f" {said}." if said else ""
    elif kv_heads is not None or kv_lora_rank is not None:
        flag = "--kv-heads" if kv_heads is not None else "--kv-lora-rank"
        raise click.BadParameter(f"{flag} only applies with --as-variants", param_hint=flag)
    rows = compare_rows(
        loaded, seq_len=seq_len, batch=batch, kv_dtype=kv_dtype, weight_dtype=weight_dtype
    )

    # a DSA model's fp8 cache as vLLM and SGLang store it, as plan sizes it (each row's too)
    note = (note + "".join(f" {r['kv_note']}." for r in rows if r["kv_note"])).strip()

    if any(r["kv_window_full"] for r in rows):
        full = (
            f"KV added / token: what one more token adds at seq_len {seq_len:,} (sliding or "
            "chunked layers whose window is full and linear layers add none: 'window full' "
            "where that makes it smaller than a short sequence's token row)."
        )
        note = f"{full} {note}".strip()

    if any(r["decode_indexer_flops"] for r in rows):
        note += (
            " Of the decode and prefill FLOPs, '(indexer X)' is a DSA or CSA indexer's (its "
            "projections and its scores over every key; JSON decode_indexer_flops, "
            "prefill_indexer_flops; report's indexer_stage_flops by stage)."
        )
    scope = (
        "Decode and prefill FLOPs and bytes: the attention layers' (projections and core, "
        "every layer), not the FFN, experts or head (mlacalc roofline --scope model times the "
        "whole step); prefill counts every (query, key) pair, not the causal half (as report "
        f"without --causal). FLOPs / token (model): the whole model's for one token attending "
        f"{seq_len:,} keys (a decode step of batch 1, as report's table of it): the weights' "
        "products (about 2 x active params), attention's over the context and the element-wise "
        "rest; JSON and CSV give the first two apart (forward_weight_flops_per_token, "
        "forward_attention_flops_per_token), report each part."
    )
    note = f"{note} {scope}".strip()

    def sections():
        return [
            Section(
                f"Comparison at seq_len {seq_len:,} x batch {batch:,} (KV {kv_dtype})",
                [
                    "model",
                    "variant",
                    "heads",
                    "KV heads / d_c",
                    "total params",
                    "active params",
                    "KV added / token",
                    "KV total",
                    "decode FLOPs (attention)",
                    "decode bytes (attention, fused)",
                    "decode FLOP/byte (attention)",
                    "prefill FLOPs (attention, batch 1, all pairs)",
                    "FLOPs / token (model)",
                ],
                [
                    [
                        r["display_name"],
                        r["variant"].upper(),
                        r["num_attention_heads"],
                        f"d_c={r['kv_lora_rank']}"
                        if r["kv_lora_rank"]
                        else r["num_key_value_heads"],
                        human_si(r["total_params"]),
                        human_si(r["active_params"]),
                        human_bytes(r["kv_bytes_per_token"])
                        + (" (window full)" if r["kv_window_full"] else ""),
                        human_bytes(r["kv_total_bytes"]),
                        human_si(r["decode_flops"]) + _indexer_cell(r["decode_indexer_flops"]),
                        human_bytes(r["decode_fused_bytes"]),
                        f"{r['decode_arithmetic_intensity_flops_per_byte']:,.1f}",
                        human_si(r["prefill_flops"]) + _indexer_cell(r["prefill_indexer_flops"]),
                        human_si(r["forward_flops_per_token"]),
                    ]
                    for r in rows
                ],
                note=note,
            )
        ]

    emit(fmt, rows, sections, rows_csv=True)
    for m in loaded[:1] if as_variants else loaded:  # past a model's positions: a warning
        check_context(m, seq_len)


def _indexer_cell(flops: int) -> str:
    """What a FLOPs cell adds for a model with an indexer: its share, ``""`` without one."""
    return f" (indexer {human_si(flops)})" if flops else ""
