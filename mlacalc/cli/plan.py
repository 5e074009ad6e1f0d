"""`mlacalc plan`: what fits on the GPUs, the largest batch and context, tokens/s."""

from __future__ import annotations

import click

from .. import defaults as D
from ..render import human_bytes, human_si
from .common import (
    COUNT,
    FRACTION,
    KV_DTYPE,
    SIZE,
    W_DTYPE,
    Section,
    emit,
    format_option,
    load,
    size_text,
)


@click.command("plan")
@click.argument("model")
@click.option(
    "--hardware", "-H", "hardware", required=True, help="Device (mlacalc list --hardware)."
)
@click.option("--gpus", "-g", type=COUNT, default=D.GPUS, show_default=True, help="GPUs in all.")
@click.option("--tp", type=COUNT, default=None, help="Tensor-parallel degree (default: all GPUs).")
@click.option("--dp", type=COUNT, default=None, help="Data-parallel degree (default: gpus / tp).")
@click.option("--ep", type=COUNT, default=D.EP, show_default=True, help="Expert-parallel degree.")
@click.option(
    "--weight-dtype", type=W_DTYPE, default=None, help="Weight dtype (default: the model's)."
)
@click.option(
    "--kv-dtype", type=KV_DTYPE, default=D.KV_DTYPE, show_default=True, help="KV dtype or layout."
)
@click.option(
    "--page-size",
    type=COUNT,
    default=D.PAGE_SIZE,
    show_default=True,
    help="Tokens per KV page (block).",
)
@click.option(
    "--memory-reserve",
    type=FRACTION,
    default=D.MEMORY_RESERVE,
    show_default=True,
    help="Fraction of each GPU's memory kept for activations and workspace.",
)
@click.option(
    "--seq-len",
    "-s",
    type=SIZE,
    default=size_text(D.SEQ_LEN),
    show_default=True,
    help="Context per sequence.",
)
@click.option(
    "--batch", "-b", type=SIZE, default=None, help="Sequences to serve (default: as many as fit)."
)
@click.option(
    "--include-mtp", is_flag=True, help="Also hold the MTP modules (speculative decoding)."
)
@format_option
def command(
    model,
    hardware,
    gpus,
    tp,
    dp,
    ep,
    weight_dtype,
    kv_dtype,
    page_size,
    memory_reserve,
    seq_len,
    batch,
    include_mtp,
    fmt,
):
    """Capacity plan: what fits on the GPUs, the largest batch and context, tokens/s upper bound.

    \b
    Examples:
      mlacalc plan deepseek-v3 --hardware H200 --gpus 8 --seq-len 128k
      mlacalc plan deepseek-v3 --hardware H200 --gpus 8 --kv-dtype fp8 --batch 4
      mlacalc plan llama-3-70b --hardware H100-SXM --gpus 4 --weight-dtype fp8 --page-size 16
    """
    from ..planner import plan as make_plan

    for flag, degree in (("--tp", tp), ("--dp", dp)):
        if degree is not None and gpus % degree:
            raise click.BadParameter(
                f"{flag.lstrip('-')} {degree} does not divide the {gpus} GPUs (--gpus)",
                param_hint=flag,
            )
    p = make_plan(
        load(model),
        hardware,
        gpus,
        tp=tp,
        dp=dp,
        ep=ep,
        weight_dtype=weight_dtype,
        kv_dtype=kv_dtype,
        page_size=page_size,
        memory_reserve=memory_reserve,
        seq_len=seq_len,
        batch=batch,
        include_mtp=include_mtp,
    )
    doc = p.to_dict()

    def sections():
        rows = [
            ["GPUs", f"{p.gpus} x {p.hardware} (tp {p.tp}, dp {p.dp}, ep {p.ep})"],
            [
                "memory per GPU",
                f"{human_bytes(p.memory_per_gpu_bytes)} ({human_si(p.memory_per_gpu_bytes, 'B')})",
            ],
            ["usable after reserve", human_bytes(p.usable_per_gpu_bytes)],
            [f"weights per GPU ({p.weight_dtype})", human_bytes(p.weights_per_gpu_bytes)],
            ["KV budget per GPU", human_bytes(p.kv_budget_per_gpu_bytes)],
            [f"KV per token per GPU ({p.kv_layout})", f"{p.kv_bytes_per_token_per_gpu:,} B"],
            ["KV tokens per GPU", f"{p.kv_tokens_per_gpu:,}"],
            [f"largest batch at {p.seq_len:,} tokens", f"{p.max_batch:,}"],
        ]
        if p.max_context is not None:
            rows.append([f"longest context at batch {p.batch:,}", f"{p.max_context:,} tokens"])
        if p.decode_tokens_per_s is not None:
            rows.append(
                [
                    f"decode step at batch {p.decode_batch:,} (roofline)",
                    f"{p.decode_step_s * 1e3:,.2f} ms ({p.decode_bound}-bound)",
                ]
            )
            rows.append(
                [
                    f"decode tokens/s at batch {p.decode_batch:,} (upper bound)",
                    f"{p.decode_tokens_per_s:,.0f}",
                ]
            )
        if p.prefill_s is not None:
            rows.append([f"prefill of {p.seq_len:,} tokens (roofline)", f"{p.prefill_s:,.2f} s"])
        rows.append(["binding resource", p.binding])
        return [
            Section(
                f"Plan: {p.model}",
                ["quantity", "value"],
                rows,
                note="Throughput is a roofline upper bound (no communication, perfect overlap).",
            )
        ]

    emit(fmt, doc, sections)
