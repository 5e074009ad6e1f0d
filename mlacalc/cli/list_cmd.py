"""`mlacalc list`: the shipped models, or the hardware catalogue."""

from __future__ import annotations

import json

import click

from mlacalc.cli.common import Section, emit, format_option, serving_engine_option
from mlacalc.cost.compressed import compressed_growth
from mlacalc.cost.engine import kv_cache
from mlacalc.cost.params import param_counts
from mlacalc.hardware.catalogue import load_hardware, measured_sets, shipped_hardware
from mlacalc.models.loading import load_model, shipped_models
from mlacalc.render import human_bytes, human_si
from mlacalc.serving.provenance import engine_profile_of
from mlacalc.timemodel.profile import load_profile
from mlacalc.words import defaults as D
from mlacalc.words.engines import (
    DEFAULT_ENGINE,
    ENGINE_LABELS,
    OTHER_VENDOR_DEFAULT,
    default_engine,
)


@click.command("list")
@click.option(
    "--hardware",
    "show_hardware",
    is_flag=True,
    help="List the hardware catalogue (and measured devices) instead of the models.",
)
@serving_engine_option
@format_option
def command(show_hardware, engine, fmt):
    """List the shipped models with their attention variant and size (--hardware: the devices,
    with how --engine's kernel model times each).

    \b
    Examples:
      mlacalc list --format markdown
      mlacalc list --hardware
      mlacalc list --hardware --engine vllm
    """
    if show_hardware:
        return _list_hardware(fmt, engine)
    if engine is not None:
        raise click.UsageError(
            "--engine names whose kernel model times each device: give it with --hardware "
            "(the model list times nothing)"
        )

    rows, compressed = [], []
    for name in shipped_models():
        m = load_model(name)
        if m.compress_ratios:
            compressed.append(m.label)
        counts = param_counts(m)
        cache = kv_cache(m, D.SEQ_LEN)
        # what one token adds while every layer still keeps every token (seq_len 1 -> 2): the
        # model's cache row, which a full window would otherwise hide (Mistral: 0 B at 128k)
        first = kv_cache(m, 2).total_bytes - kv_cache(m, 1).total_bytes
        rows.append(
            {
                "name": m.name,
                "display_name": m.label,
                "variant": m.variant,
                "layers": m.num_hidden_layers,
                "num_attention_heads": m.num_attention_heads,
                "num_key_value_heads": None if m.is_mla else m.num_key_value_heads,
                "kv_lora_rank": m.kv_lora_rank,
                "total_params": counts.total,
                "active_params": counts.active,
                # what one more token adds at the report's default seq_len, as report says,
                # and the whole cache of one sequence of that length (a windowed model's
                # figure: its window's tokens in every layer)
                # (DeepSeek-V4: averaged over its compress ratios' period)
                "kv_bytes_per_token_bf16": compressed_growth(m, D.SEQ_LEN)
                if m.compress_ratios
                else cache.bytes_per_token,
                "kv_bytes_one_sequence_bf16": cache.total_bytes,
                "kv_bytes_per_token_bf16_short": first,
                "window_full": cache.bytes_per_token < first,
                "aliases": list(m.aliases),
            }
        )

    def sections():
        return [
            Section(
                "Shipped models",
                [
                    "name",
                    "variant",
                    "layers",
                    "heads",
                    "KV heads / d_c",
                    "total params",
                    "active params (no input embedding)",
                    f"KV added per token at {D.SEQ_LEN // 1024}k (bf16)",
                    f"KV of one {D.SEQ_LEN // 1024}k sequence (bf16)",
                ],
                [
                    [
                        r["name"],
                        r["variant"].upper(),
                        r["layers"],
                        r["num_attention_heads"],
                        f"d_c={r['kv_lora_rank']}"
                        if r["kv_lora_rank"]
                        else r["num_key_value_heads"],
                        human_si(r["total_params"]),
                        human_si(r["active_params"]),
                        human_bytes(r["kv_bytes_per_token_bf16"])
                        + (" (window full)" if r["window_full"] else ""),
                        human_bytes(r["kv_bytes_one_sequence_bf16"]),
                    ]
                    for r in rows
                ],
                note="Active params: the weights one token's matmuls use (the routed experts it "
                "does not pick left out), without the input embedding and position tables, "
                "which are lookups (a tied table counts: it does the output matmul); total "
                "params hold them (docs/conventions.md). "
                f"Both KV columns are at seq_len {D.SEQ_LEN:,} in bf16, so models compare like "
                "with like (a windowed or compressed model's figures beside a full one's). "
                f"Added per token at {D.SEQ_LEN // 1024}k: what one more token adds, as "
                "`mlacalc report` counts it (sliding or chunked layers whose window is full and "
                "linear layers add none: 'window full' where that makes it smaller than a "
                "short sequence's row); one sequence: its whole cache (a window in every "
                "sliding layer, a linear layer's state). A short sequence's row (one token in "
                "every layer that keeps tokens) is kv_bytes_per_token_bf16_short in JSON and "
                "CSV, with the exact bytes of both columns."
                + (
                    f" {', '.join(compressed)}: added per token, the pooled keys averaged over "
                    "the compress ratios; its short-sequence row is a token's window row and "
                    "its compressors' pending rows (kept until pooled)."
                    if compressed
                    else ""
                ),
            )
        ]

    emit(fmt, rows, sections, rows_csv=True)


def _set_dtype(h) -> str:
    """The dtype a measured set was benchmarked in (its sidecar's ``dtype``; bf16 for a
    catalogue device or a sidecar that names none)."""
    if not (h.measured and h.origin and h.origin.endswith(".json")):
        return "bf16"
    try:
        with open(h.origin, encoding="utf-8") as f:
            dtype = json.load(f).get("dtype")
    except (OSError, ValueError, AttributeError):
        return "bf16"
    return dtype if isinstance(dtype, str) and dtype in h.peak_flops_per_s else "bf16"


def _times_route(h, engine: str | None) -> dict[str, str]:
    """How ``engine``'s profile (None: the device's default engine) predicts ``h``
    (:meth:`Profile.route`), as plan routes it (:func:`engine_profile_of`): ``times``, the route;
    ``engine``; ``kernels``, the engine whose kernels the profile holds (TensorRT-LLM's where no
    profile of ``engine`` fits the device's generation); ``profile``. A measured set's ceilings
    stand in for its datasheet, the fitted efficiencies still come by that route (a measured
    H200 set names no vendor or architecture, so the pooled fit's, as plan says: review12)."""
    prof, name, _ = engine_profile_of(None, engine, h)
    p = load_profile(prof)
    route = p.route(h.name, h)
    return {
        "times": f"measured ceilings; {route}" if h.measured else route,
        "engine": name,
        "kernels": p.engine or DEFAULT_ENGINE,
        "profile": p.name,
    }


def _times_cell(r: dict) -> str:
    """The times column: the route, and ``(trtllm kernels)`` where TensorRT-LLM's stand in for
    the engine's, ``(stand-in)`` for TensorRT-LLM on a GPU it does not run on."""
    if r["kernels"] != r["engine"]:
        return f"{r['times']} ({r['kernels']} kernels)"
    if r["engine"] == DEFAULT_ENGINE and r["kind"] == "gpu" and r["vendor"] not in ("", "nvidia"):
        return f"{r['times']} (stand-in)"
    return r["times"]


def _list_hardware(fmt, engine: str | None = None):

    specs = [load_hardware(n) for n in shipped_hardware()] + [
        load_hardware(f"measured:{n}") for n in measured_sets()
    ]
    rows = [
        {
            "name": h.name,
            "display_name": h.display_name,
            "kind": h.kind,
            "measured": h.measured,
            "peak_flops_per_s": h.peak_flops_per_s,
            "memory_bandwidth_bytes_per_s": h.memory_bandwidth_bytes_per_s,
            "memory_bytes": h.memory_bytes,
            "sm_count": h.sm_count,
            # a measured set's own dtype: its ceiling and ridge are the ones that set is for
            "dtype": _set_dtype(h),
            "ridge_point_flops_per_byte": h.peak(_set_dtype(h)) / h.memory_bandwidth_bytes_per_s,
            "vendor": str(h.vendor or "").lower(),
            # how the engine's times are predicted (--engine; else the device's default
            # engine), whose kernels and the shipped profile, as plan picks them
            **_times_route(h, engine),
        }
        for h in specs
    ]

    if engine is None:
        times_for = (
            f"times: {ENGINE_LABELS[default_engine()]}'s kernels "
            f"({ENGINE_LABELS[OTHER_VENDOR_DEFAULT[0]]} on AMD's GPUs, the default engines)"
        )
    else:
        times_for = f"times: {ENGINE_LABELS[engine]}'s kernels (--engine {engine})"

    def sections():
        return [
            Section(
                "Hardware (dense peaks, FP32 accumulate; measured devices: their ceilings); "
                + times_for,
                [
                    "name",
                    "bf16",
                    "fp8",
                    "fp4",
                    "bandwidth",
                    "memory",
                    "SMs",
                    "ridge (FLOP/B)",
                    "times",
                ],
                [
                    [
                        r["name"],
                        human_si(r["peak_flops_per_s"].get(r["dtype"], 0), "FLOP/s")
                        + ("" if r["dtype"] == "bf16" else f" ({r['dtype']})"),
                        *(
                            human_si(r["peak_flops_per_s"][d], "FLOP/s")
                            if d in r["peak_flops_per_s"]
                            else "-"
                            for d in ("fp8", "fp4")
                        ),
                        human_si(r["memory_bandwidth_bytes_per_s"], "B/s"),
                        human_si(r["memory_bytes"], "B"),
                        r["sm_count"] or "-",
                        f"{r['ridge_point_flops_per_byte']:,.1f}",
                        _times_cell(r),
                    ]
                    for r in rows
                ],
                note="Hardware figures use SI units (TB/s = 10^12 B/s, GB = 10^9 B), "
                "as datasheets do. A measured set benchmarked in another dtype shows that "
                "dtype's ceiling in the bf16 column, labelled, and its ridge at that rate "
                "(the copy rate as bandwidth). Times: how the engine's kernel model "
                "predicts the device: its own fit of measured kernel tables, from a fitted "
                "device of its tensor-core generation by datasheet ratios, or from the pooled "
                "fit, which no measurement of that kind of device checks (unvalidated: AMD's "
                "parts, whose kernels no shared table measured). '(trtllm kernels)': no profile of "
                "the engine fits that generation, so TensorRT-LLM's kernels stand in, as plan "
                "says; '(stand-in)': TensorRT-LLM on a GPU it does not run on. --engine "
                "trtllm, sglang or vllm shows that engine's route.",
            )
        ]

    flat = [
        {
            **{k: v for k, v in r.items() if k != "peak_flops_per_s"},
            **{f"peak_{k}_flops_per_s": v for k, v in r["peak_flops_per_s"].items()},
        }
        for r in rows
    ]
    emit(fmt, rows if fmt == "json" else flat, sections, rows_csv=True)
