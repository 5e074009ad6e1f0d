"""`mlacalc plan`: what fits on the GPUs, the per-GPU step, and the serving figures of a mix."""

from __future__ import annotations

import math
from typing import Any

import click

from mlacalc.cli import plan_engines
from mlacalc.cli.common import (
    COUNT,
    KV_DTYPE,
    PREFIX_HIT,
    RATE,
    SIZE,
    W_DTYPE,
    Section,
    emit,
    engine_options,
    format_option,
    given,
    gpu_hour_price_option,
    load,
    load_profile_option,
    profile_option,
    recurrent_state_check,
    serving_engine_option,
    set_option,
    shared_prefix_option,
    size_text,
    state_dtype_option,
    stored_weight_dtype,
    with_stored_dtype,
)
from mlacalc.cli.plan_engines import refuse_with_one_engine
from mlacalc.cli.serving_flags import (
    defaults_note,
    engine_option_values,
    launch_options,
    launch_text,
    launch_values,
    memory_options,
    no_launch_of_a_design,
    plan_engine_options,
    with_kernel_versions,
)
from mlacalc.cost.engine import attention_cost
from mlacalc.render import human_bytes, human_si
from mlacalc.report import attention_kind_labels
from mlacalc.words import defaults as D
from mlacalc.words.arguments import divisors
from mlacalc.words.units import request_count


def layout_options(f):
    """Options of a parallel layout beyond the degrees (``search`` explores these itself)."""
    for decorator in reversed(
        [
            click.option("--pp", type=COUNT, default=1, show_default=True, help="Pipeline stages."),
            click.option(
                "--dp-attention",
                is_flag=True,
                help="Attention data-parallel, experts shared by the stage (as SGLang runs MLA).",
            ),
            click.option(
                "--overlap",
                type=click.Choice(["none", "tbo"]),
                default="none",
                show_default=True,
                help="tbo: two-batch overlap hides communication behind computation.",
            ),
        ]
    ):
        f = decorator(f)
    return f


@click.command("plan")
@click.argument("model")
@click.option(
    "--hardware", "-H", "hardware", required=True, help="Device (mlacalc list --hardware)."
)
@click.option(
    "--gpus",
    "-g",
    type=COUNT,
    default=D.GPUS,
    show_default=True,
    help="GPUs in all; with --mode disaggregated, the decode pool's (the prefill pool's are "
    "--prefill-gpus, by default as many).",
)
@click.option(
    "--tp",
    type=COUNT,
    default=None,
    help="Tensor-parallel degree (default: the GPUs of a stage over --dp; 1 with --dp-attention).",
)
@click.option("--dp", type=COUNT, default=None, help="Data-parallel degree (default: gpus / tp).")
@click.option("--ep", type=COUNT, default=D.EP, show_default=True, help="Expert-parallel degree.")
@layout_options
@click.option(
    "--weight-dtype",
    type=W_DTYPE,
    default=None,
    help="Weight dtype of the layers' linear weights (default: the model's); the embedding "
    "and the head stay as the checkpoint stores them (--head-dtype fp8 quantizes the head; a "
    "head tied to the embedding, --embedding-dtype).",
)
@click.option(
    "--kv-dtype", type=KV_DTYPE, default=D.KV_DTYPE, show_default=True, help="KV dtype or layout."
)
@click.option(
    "--page-size",
    type=COUNT,
    default=None,
    help="Tokens per KV page (block), the unit the prefix cache matches whole (default: the "
    "engine's whose defaults are taken: SGLang 1 (64 for DSA, and for MLA on datacenter "
    "Blackwell), vLLM 16 (64 for MLA where FlashMLA runs and for DSA, 128 for MLA on "
    "datacenter Blackwell), TensorRT-LLM 32; 16 with none). --launch sets it.",
)
@memory_options
@click.option(
    "--seq-len",
    "-s",
    type=SIZE,
    default=size_text(D.SEQ_LEN),
    show_default=True,
    help="Context per sequence (without --isl/--osl).",
)
@click.option(
    "--batch", "-b", type=SIZE, default=None, help="Sequences to serve (default: as many as fit)."
)
@click.option(
    "--include-mtp", is_flag=True, help="Also hold the MTP modules (speculative decoding)."
)
@click.option("--isl", type=SIZE, default=None, help="Input (prompt) tokens per request.")
@click.option("--osl", type=SIZE, default=None, help="Output tokens per request.")
@click.option(
    "--concurrency",
    type=click.FloatRange(1, 1e9),
    default=None,
    help="Requests in flight (default: as many as fit and, under chunked prefill, whose "
    "prompts a chunk a step keeps up with).",
)
@click.option(
    "--request-rate",
    type=RATE,
    default=None,
    help="Requests per second arriving (instead of --concurrency).",
)
@click.option(
    "--mode",
    type=click.Choice(["aggregated", "disaggregated"]),
    default="aggregated",
    show_default=True,
    help="Prefill and decode on the same GPUs, or on separate pools.",
)
@click.option(
    "--prefill-gpus",
    type=COUNT,
    default=None,
    help="GPUs of the prefill pool, beside the --gpus of the decode pool (default: as many).",
)
@click.option(
    "--prefill-tp",
    type=COUNT,
    default=None,
    help="Tensor-parallel degree of the prefill pool (default: the decode pool's, if it "
    "divides the pool).",
)
@click.option(
    "--prefill-ep",
    type=COUNT,
    default=None,
    help="Expert-parallel degree of the prefill pool (default: the decode pool's, or the "
    "largest below it that divides the pool and the experts).",
)
@click.option(
    "--prefill-dp-attention/--no-prefill-dp-attention",
    default=None,
    help="DP-attention in the prefill pool (default: as the decode pool).",
)
@click.option(
    "--prefill-redundant-experts",
    type=click.IntRange(0, 4096),
    default=None,
    help="Extra expert replicas of the prefill pool (default: --redundant-experts).",
)
@click.option(
    "--chunked-prefill", type=SIZE, default=None, help="Prompt tokens mixed into every step."
)
@click.option(
    "--prefix-cache-hit",
    type=PREFIX_HIT,
    default=0.0,
    show_default=True,
    help="Share of each prompt's tokens whose KV is found cached (SGLang's radix cache, "
    "vLLM's prefix caching), in [0, 1): the prefill computes the rest, attending the cached "
    "tokens; the cache is still sized for whole prompts (with --isl/--osl).",
)
@shared_prefix_option
@engine_options
@click.option("--mtp-tokens", type=click.IntRange(0, 16), default=0, help="Draft tokens per step.")
@click.option(
    "--mtp-acceptance",
    type=click.FloatRange(0, 1),
    default=None,
    help="Acceptance rate of each draft token.",
)
@click.option(
    "--redundant-experts",
    type=click.IntRange(0, 4096),
    default=0,
    show_default=True,
    help="Extra expert replicas (EPLB), so that --ep divides the expert slots.",
)
@click.option(
    "--routing-imbalance",
    type=click.FloatRange(1, 100),
    default=1.0,
    show_default=True,
    help=(
        "Tokens of the busiest expert GPU over the mean, as measured (replaces the modelled "
        "sample spread, popularity and placement)."
    ),
)
@plan_engine_options
@launch_options
@profile_option()
@serving_engine_option
@click.option(
    "--compare-engines",
    is_flag=True,
    default=False,
    help="Plan the same deployment under TensorRT-LLM, SGLang and vLLM (each with its kernels "
    "and scheduler defaults, as --engine gives them) and print them side by side, with how "
    "much of each step another engine's fits time.",
)
@state_dtype_option
@gpu_hour_price_option
@set_option
@format_option
def command(
    model,
    hardware,
    gpus,
    tp,
    dp,
    ep,
    pp,
    dp_attention,
    overlap,
    weight_dtype,
    kv_dtype,
    page_size,
    memory_reserve,
    engine_memory,
    seq_len,
    batch,
    include_mtp,
    isl,
    osl,
    concurrency,
    request_rate,
    mode,
    prefill_gpus,
    prefill_tp,
    prefill_ep,
    prefill_dp_attention,
    prefill_redundant_experts,
    chunked_prefill,
    prefix_cache_hit,
    shared_prefix,
    prefill_pass,
    output_lag_steps,
    mtp_tokens,
    mtp_acceptance,
    redundant_experts,
    routing_imbalance,
    profile,
    engine,
    compare_engines,
    state_dtype,
    gpu_hour_price,
    fmt,
    sets,
    **engine_opts,
):
    """Capacity plan: what fits on the GPUs, the per-GPU step with its communication, and the
    serving figures (TTFT, TPOT, tokens/s) of a request mix. A deployment that does not fit is
    an answer (fits: false, with what overflows), not an error.

    \b
    Examples:
      mlacalc plan deepseek-v3 --hardware H200 --gpus 8 --seq-len 128k
      mlacalc plan deepseek-v3 --hardware H200 --gpus 8 --kv-dtype fp8 --batch 4
      mlacalc plan llama-3-70b --hardware H100-SXM --gpus 4 --isl 467 --osl 256 --request-rate 4
      mlacalc plan deepseek-v3 -H H100 --gpus 72 --tp 1 --dp-attention --ep 72 \\
          --redundant-experts 32 --overlap tbo --isl 2000 --osl 500 --concurrency 18432 \\
          --mode disaggregated --prefill-gpus 32
      mlacalc plan llama-3-70b -H H200 --gpus 4 --weight-dtype bf16 --isl 467 --osl 256 \\
          --request-rate 2 --prefill-pass separate
      mlacalc plan llama-3-8b -H H200 --gpus 1 --isl 8000 --osl 300 --concurrency 64 \\
          --prefix-cache-hit 0.6   # 4,800 of each prompt's tokens found cached
      mlacalc plan deepseek-v3 -H H200 --gpus 8 --tp 2 --dp-attention --ep 8 --kv-dtype fp8 \\
          --isl 2000 --osl 500 --concurrency 512 --mode disaggregated --prefill-gpus 8 \\
          --prefill-tp 8 --prefill-ep 8 --no-prefill-dp-attention   # a search's answer
      mlacalc plan deepseek-v3 -H H200 --gpus 16 --tp 1 --dp-attention --ep 16 \\
          --isl 2000 --osl 500 --concurrency 1024 --compare-engines
      mlacalc plan qwen3-8b -H B200 --gpus 1 --isl 8k --osl 1k --gpu-hour-price 3.5
    """

    _check_request_mix_flags(isl, osl, batch, chunked_prefill)
    _check_layout_flags(gpus, tp, dp, pp, dp_attention)
    # deferred: the planner loads numpy and the time model; `mlacalc --help` stays light
    from mlacalc.serving.plan import plan as make_plan

    launch, model_path = launch_values(engine_opts)
    no_launch_of_a_design(launch, sets)
    if compare_engines:
        refuse_with_one_engine(engine, launch)
    serving_engine, chunks = engine, _chunked(mode, isl)  # --engine: whose kernels are timed
    loaded = load(model, changes=sets, weight_dtype=weight_dtype)
    recurrent_state_check(loaded, state_dtype)
    kwargs = dict(
        tp=tp,
        dp=dp,
        ep=ep,
        pp=pp,
        dp_attention=dp_attention,
        weight_dtype=weight_dtype,
        kv_dtype=kv_dtype,
        state_dtype=state_dtype,
        page_size=page_size,
        memory_reserve=memory_reserve,
        engine_memory=engine_memory,
        # a request mix's context is isl + osl: plan refuses a --seq-len given beside it
        seq_len=seq_len if isl is None or given("seq_len") else None,
        batch=batch,
        include_mtp=include_mtp,
        isl=isl,
        osl=osl,
        concurrency=concurrency,
        request_rate=request_rate,
        mode=mode,
        prefill_gpus=prefill_gpus,
        chunked_prefill=chunked_prefill,
        prefill_pass=prefill_pass,
        output_lag_steps=output_lag_steps,
        prefix_cache_hit=prefix_cache_hit,
        shared_prefix=shared_prefix,
        overlap=overlap,
        mtp_tokens=mtp_tokens,
        mtp_acceptance=mtp_acceptance,
        routing_imbalance=routing_imbalance,
        redundant_experts=redundant_experts,
        prefill_tp=prefill_tp,
        prefill_ep=prefill_ep,
        prefill_dp_attention=prefill_dp_attention,
        prefill_redundant_experts=prefill_redundant_experts,
        profile=load_profile_option(profile),
    )
    if compare_engines:
        return plan_engines.compare(
            make_plan, (loaded, hardware, gpus), kwargs, engine_opts, chunks, fmt,
            gpu_hour_price=gpu_hour_price,
        )  # fmt: skip
    # the engine's defaults are plan's to fill (engine_defaults): one rule for the API and CLI
    engine = engine_option_values(engine_opts, serving_engine)
    defaults, note = defaults_note(engine, chunks)
    p = make_plan(
        loaded,
        hardware,
        gpus,
        **kwargs,
        engine=serving_engine,
        engine_defaults=defaults or "none",
        **engine,
    )
    engine.update(p.scheduler_defaults_applied)  # what the launch commands are given
    chunked_prefill = engine.pop("chunked_prefill", chunked_prefill)
    doc = {**with_stored_dtype(p.to_dict(), stored_weight_dtype(loaded)), **_kv_fields(p)}
    price = _price(p, gpu_hour_price, doc)
    text = _launch_part(
        launch, model_path, p, doc, engine, loaded, redundant_experts=redundant_experts,
        overlap=overlap, kv_dtype=kv_dtype, weight_dtype=weight_dtype, hardware=hardware,
        memory_reserve=memory_reserve, isl=isl, chunked_prefill=chunked_prefill,
        mtp_tokens=mtp_tokens,
    )  # fmt: skip
    emit(fmt, doc, lambda: sections(p, loaded, hardware, price))
    if fmt in ("table", "markdown"):
        click.echo(with_kernel_versions(note, p.profile) + text, nl=False)


def _price(p, gpu_hour_price: float | None, doc: dict) -> Any:
    """The plan's :meth:`~mlacalc.serving.plan.Plan.price` at ``--gpu-hour-price``, put in
    ``doc`` as ``price`` (null where nothing was timed); None, and no key, without a price:
    none is assumed."""
    if gpu_hour_price is None:
        return None
    price = p.price(gpu_hour_price)
    doc["price"] = price and price.to_dict()
    return price


def _launch_part(
    launch, model_path, p, doc: dict, engine: dict, loaded, *, redundant_experts, overlap,
    kv_dtype, weight_dtype, hardware, memory_reserve, isl, chunked_prefill, mtp_tokens,
) -> str:  # fmt: skip
    """--launch's commands for a plan that fits (put in ``doc`` as ``launch``), or the line
    saying there is nothing to launch; "" without --launch."""
    from mlacalc.serving.capacity import launch_share  # deferred: --help stays light

    text = ""
    if launch and p.fits:
        point = _point(p, redundant_experts, overlap, kv_dtype)
        point.update(weight_dtype=weight_dtype, component_dtypes=engine.get("component_dtypes"))
        text = doc["launch"] = launch_text(
            launch,
            model_path,
            point,
            timed_engine=p.engine,
            hardware=hardware,
            gpus_per_node=p_hardware_node(hardware),
            memory_reserve=D.MEMORY_RESERVE if memory_reserve is None else memory_reserve,
            memory_fraction=launch_share(p, launch),
            # each pool's own: TensorRT-LLM's share is of what its weights leave
            prefill_memory_fraction=launch_share(p, launch, "prefill") if p.prefill_gpus else None,
            prompts_per_pass=max(1, (engine["max_tokens"] or 16384) // (isl or p.seq_len)),
            chunked_prefill=chunked_prefill,
            mtp_tokens=mtp_tokens,
            page_size=p.page_size,
            model_config=loaded,  # its routed experts, and the launched engine's own page
            moe_backend=p.moe_backend,  # TensorRT-LLM's moe_config.backend where asked
            **{k: engine[k] for k in ("max_tokens", "overlap_schedule", "cuda_graph_max_batch")},
        )
    elif launch:  # said, not left blank: a plan that does not fit has nothing to launch
        text = f"# no {launch} launch commands: the deployment does not fit ({p.overflow})\n"
    return text


def _kv_fields(p) -> dict:
    """The cache's per-token fields of the JSON and CSV as the table gives them: where some
    layers keep a window or a fixed state, what a token adds is the full layers' bytes (the
    fixed part a sequence holds is ``kv_bytes_fixed_per_sequence_per_gpu``) and no one count
    of tokens fills the budget (it depends on how many sequences hold the fixed part): null.
    Before, these were the rate while every layer still grows (Gemma-4-31B: 450,560 B a token,
    sliding layers included, and 289,680 tokens)."""
    if p.kv_every_token:
        return {}
    return {
        "kv_bytes_per_token_per_gpu": p.kv_bytes_per_token_full_layers_per_gpu,
        "kv_tokens_per_gpu": None,
    }


def p_hardware_node(hardware: str) -> int | None:
    """GPUs per node of a device (None: not stated)."""
    from mlacalc.hardware.catalogue import load_hardware  # deferred: --help stays light

    return load_hardware(hardware).gpus_per_node


def _check_layout_flags(gpus, tp, dp, pp, dp_attention) -> None:
    """The GPUs' split in the flags' own words. (plan checks every argument, DP-attention
    over one attention group included, its error naming the argument, which
    mlacalc.cli.main reports as its flag.)"""
    for flag, degree in (("--tp", tp), ("--dp", dp)):
        if degree is not None and gpus % degree:
            fits = ", ".join(f"{d:,}" for d in divisors(gpus))
            raise click.BadParameter(
                f"{flag.lstrip('-')} {degree} does not divide the {gpus} GPUs (--gpus); use "
                f"one that divides them: {fits}",
                param_hint=flag,
            )


def _check_request_mix_flags(isl, osl, batch, chunked_prefill) -> None:
    """Refuse what a request mix (--isl/--osl) drops or what only it uses, without a word
    otherwise: --batch beside it (it sets the requests in flight), --chunked-prefill without it
    (a capacity plan runs no prompt)."""
    if (isl is not None or osl is not None) and batch is not None:
        raise click.BadParameter(
            "does not apply with --isl/--osl: give the requests in flight with "
            "--concurrency (or an arrival rate with --request-rate)",
            param_hint="--batch",
        )
    if isl is None and chunked_prefill is not None:
        raise click.BadParameter(
            "mixes a request mix's prompts into decode steps: give --isl and --osl with it",
            param_hint="--chunked-prefill",
        )


def _chunked(mode: str, isl: int | None) -> bool | str:
    """Whether an engine's chunked prefill applies (True), or what is said instead: it mixes a
    request mix's prompts into aggregated steps, so none without isl or when disaggregated."""
    if isl is None:
        return "none (no request mix)"
    return mode != "disaggregated" or "none (disaggregated)"


def _launch_batch(p) -> int:
    """The running requests a launch line admits on an attention group: the batch the plan ran
    (``--batch``), or every request in flight of a group (``--concurrency`` over the groups:
    the plan's closed loop admits them all), at most what the KV cache holds; under an arrival
    rate the cache's largest batch (the batch varies with the arrivals). TensorRT-LLM's
    ``max_batch_size`` and vLLM's ``--max-num-seqs`` take it per group, SGLang's
    ``--max-running-requests`` over the groups. The cache's largest batch alone (1,500 a rank
    where a plan ran 128) let the engine batch more than the plan timed."""
    cap = max(1, -(-p.max_batch // p.dp))
    if p.concurrency is not None:
        return max(1, min(cap, math.ceil(p.concurrency / p.dp - 1e-9)))
    if p.request_rate is None and p.running_batch_per_group:
        return max(1, min(cap, math.ceil(p.running_batch_per_group - 1e-9)))
    return cap


def _point(p, redundant_experts: int, overlap: str, kv_dtype: str) -> dict:
    """A plan's deployment in a search point's fields (the launch commands read them)."""
    return {
        "mode": p.mode,
        "decode_gpus": p.gpus,
        "tp": p.tp,
        "dp": p.dp,
        "pp": p.pp,
        "ep": p.ep,
        "dp_attention": p.dp_attention,
        "redundant_experts": redundant_experts,
        "overlap": overlap,
        "kv_dtype": p.kv_layout,
        "batch_per_group": _launch_batch(p),
        "prefill_gpus": p.prefill_gpus,
        "prefill_tp": p.prefill_tp,
        "prefill_ep": p.prefill_ep,
        "prefill_dp_attention": p.prefill_dp_attention,
        "prefill_redundant_experts": p.prefill_redundant_experts,
    }


def latent_copied(p, model) -> bool:
    """Whether ``model``'s cache is an MLA latent that the plan's tensor-parallel ranks each
    copy whole (the row says so, as docs/serving.md's table does, beside the plan's warning)."""
    return bool(model is not None and model.is_mla and p.tp > 1)


def kv_rows(p, compressed: bool = False, copied: bool = False) -> list[list[str]]:
    """The cache lines of the plan. A model whose layers do not all keep every token
    (sliding or chunked windows, linear states, indexer keys) shows what a token adds in the
    layers that keep every token and the fixed part a sequence holds beside it; their sum at
    the context is one sequence, and the budget over that is the largest batch per group.
    ``compressed`` (DeepSeek-V4): no layer keeps every token; a token adds its share of the
    pooled keys, averaged over the compress ratios. ``copied``: an MLA latent every
    tensor-parallel rank keeps whole (:func:`latent_copied`), said in the label."""
    label = f"KV per token per GPU ({p.kv_layout})" + (
        " (latent copied on every TP rank)" if copied else ""
    )
    seq = [
        f"KV per sequence of {p.context:,} tokens per GPU",
        f"{human_bytes(p.kv_bytes_per_sequence_per_gpu)} ({p.kv_bytes_per_sequence_per_gpu:,} B)",
    ]
    if p.kv_every_token:
        return [
            [label, f"{p.kv_bytes_per_token_per_gpu:,} B"],
            ["KV tokens per GPU", f"{p.kv_tokens_per_gpu:,}"],
            seq,
        ]
    return [
        [
            f"{label}, "
            + (
                "pooled keys averaged over the compress ratios"
                if compressed
                else "layers keeping every token"
            ),
            f"{p.kv_bytes_per_token_full_layers_per_gpu:,} B",
        ],
        [
            "  + fixed per sequence (windows, linear states: a conv K - 1 positions"
            + (f", the recurrent state {p.state_dtype})" if p.state_dtype else ")"),
            f"{human_bytes(p.kv_bytes_fixed_per_sequence_per_gpu)} "
            f"({p.kv_bytes_fixed_per_sequence_per_gpu:,} B)",
        ],
        seq,
    ]


def count_text(x: float) -> str:
    """A count as computed: whole when it is, else with two decimals (a mean)."""
    return f"{x:,.0f}" if abs(x - round(x)) < 1e-9 else f"{x:,.2f}"


def decode_at(p) -> str:
    """What the decode step was timed at, in words: the batch (the largest that fits when the
    batch asked does not), or under a request mix the mean running sequences at the mean
    context (prompt and half the output); below one per
    attention group, the step is timed at one per group (a group holding a request runs it
    alone), and the mean says how many run."""
    if p.isl is not None and p.decode_running is not None:
        # a request mix's step is timed at the mean context of its sequences (figures.S_avg)
        context = f", at the mean context of {p.isl + p.osl / 2:,.0f} tokens"
        if p.decode_running / max(p.dp, 1) < 1 - 1e-9:
            per = " per group" if p.dp > 1 else ""
            return f"batch 1{per} ({count_text(p.decode_running)} running on average){context}"
        mean = abs(p.decode_running - round(p.decode_running)) >= 1e-9
        return (
            f"batch {count_text(p.decode_running)}"
            + (" (the mean running sequences)" if mean else "")
            + context
        )
    text = f"batch {p.decode_batch:,}"
    if p.batch is not None and p.decode_batch is not None and p.batch > p.decode_batch:
        text += f" (the largest that fits; {p.batch:,} asked)"
    return text


def times_note(
    profile: str,
    calibration: str,
    engine: str = "trtllm",
    default_note: str = "",
    hardware: Any = None,
    gpus: int | None = None,
) -> str:
    """The provenance of the times: the serving engine whose kernels are timed (with
    ``default_note``, Plan.default_engine_note: the default engine, its scheduler defaults not
    applied), the profile and how the device was predicted with it."""
    calibrated = f"profile {profile}: {calibration}" if profile else calibration
    named = f"engine {engine}" + (f", {default_note}" if default_note else "")
    how = "; ".join(part for part in (named, calibrated) if part)
    return (
        "Times are the kernel time model's predictions"
        + f" ({how})"
        + f", {_network_words(hardware, gpus)}."
    )


def _network_words(hardware: Any, gpus: int | None) -> str:
    """:func:`~mlacalc.serving.comm.network_words` of ``hardware`` (a name, a file, a spec;
    None or one that does not load again: a node's words) and the deployment's ``gpus``."""
    from mlacalc.hardware.catalogue import load_hardware  # deferred: --help stays light
    from mlacalc.serving.comm import network_words
    from mlacalc.words.errors import MlacalcError

    try:
        hw = None if hardware is None else load_hardware(hardware)
    except (MlacalcError, OSError):
        hw = None
    return network_words(hw, gpus)


def gpus_text(p) -> str:
    """The GPUs of the plan: ``16 x H200 (TP16)``; disaggregated, both pools and their sum
    (``16 x H200 decode (TP16) + 16 prefill (TP16) = 32 GPUs``)."""
    if not p.prefill_gpus:
        return f"{p.gpus} x {p.hardware} ({p.layout})"
    return (
        f"{p.gpus} x {p.hardware} decode ({p.layout}) + {p.prefill_gpus} prefill "
        f"({p.prefill_layout}) = {p.gpus + p.prefill_gpus} GPUs"
    )


def links_text(p) -> str:
    """The step's link time: under two-batch overlap, what the overlap leaves exposed (the
    part in the step time) of all of it."""
    exposed = f"links {p.step_comm_s * 1e3:,.2f} ms"
    if p.overlap != "tbo" or p.step_links_s is None:
        return exposed
    return f"{exposed} exposed of {p.step_links_s * 1e3:,.2f} ms"


def kernels_note(p) -> str:
    """What the kernel table covers, where it is not the whole step of one GPU, and how its
    rows compare with the step."""
    moe = " ".join(w for w in (moe_kernel_note(p), static_fp8_note(p)) if w)
    if not p.kernels_scope:
        return moe
    rows = sum(k["seconds"] for k in p.kernels)
    return (
        f"The rows are {p.kernels_scope}. They sum to {rows * 1e3:,.2f} ms; the decode step "
        f"is {p.decode_step_s * 1e3:,.2f} ms." + (f" {moe}" if moe else "")
    )


def static_fp8_note(p) -> str:
    """Where the step holds per-tensor fp8 GEMMs: that each is timed with its input's static
    quantize (one scaling pass, the checkpoint's calibrated input scale), not the dynamic
    per-tensor quantize the measured ``gemm_perf`` fp8 rows time with the GEMM (an amax
    memset and reduction, then the scaling pass: two kernels more). A trial read TensorRT-LLM's
    B200 q_proj of Llama-3.1-70B TP4 at 64 tokens (k 8,192, n 2,048) as 12.68 us against the
    table's 21.1 us (docs/time-model.md, "Per-tensor fp8 GEMMs in a served step")."""
    if not any(k.get("kind") == "gemm" and k.get("dtype") == "fp8" for k in p.kernels):
        return ""
    return (
        "Per-tensor fp8 GEMMs are timed with a static input scale's one quantize pass (a "
        "calibrated fp8 checkpoint's input_scale), not the measured fp8 GEMM tables' dynamic "
        "amax and scaling, which take two kernels more (B200, 64 x 8,192 x 2,048: 12.7 against "
        "21.1 us)."
    )


def moe_kernel_note(p) -> str:
    """The MoE kernel the routed experts were timed as, under TensorRT-LLM (whose MoE backend
    is a choice: ``--moe-backend``), and the backend asked."""
    if p.engine != "trtllm" or not getattr(p, "moe_kernel", None):
        return ""
    asked = f" (--moe-backend {p.moe_backend})" if p.moe_backend else ""
    return f"The routed experts are timed as {p.moe_kernel}{asked}."


def plan_note(p, hardware: Any = None) -> str:
    """The plan table's note: where its times come from and the error to expect; where the
    plan shows no time (nothing fits), that, not a provenance of times not given (trial12:
    "Times are the kernel time model's predictions" under a plan with none)."""
    if p.decode_step_s is None and p.ttft_s is None:
        return "No times: the plan does not fit (the 'fits' row says why and what to change)."
    gpus = p.gpus + (p.prefill_gpus or 0)
    note = times_note(
        p.profile, p.calibration, p.engine, p.default_engine_note, hardware or p.hardware, gpus
    )
    return note + (f"\n{p.prediction['note']}" if p.prediction.get("note") else "")


def sections(p, model=None, hardware: Any = None, price: Any = None) -> list[Section]:
    """The plan as tables: memory and capacity, serving figures, the step's kernels (each
    attention kernel with its kind of layer, where ``model``'s layers differ); ``hardware``
    (the device as given, a file's path too; None: the plan's name) for the links' words;
    ``price`` (:class:`mlacalc.serving.price.Price`, from ``--gpu-hour-price``): what the
    tokens cost, after the serving figures."""
    out = [
        Section(
            f"Plan: {p.model}",
            ["quantity", "value"],
            plan_rows(
                p, bool(model is not None and model.compress_ratios), latent_copied(p, model)
            ),
            note=plan_note(p, hardware),
        )
    ]
    if p.ttft_s is not None:
        out.append(Section("Serving", ["figure", "value"], serving_rows(p)))
    if price is not None:
        out.append(Section("Cost at your GPU-hour price", ["figure", "value"], price.rows()))
    if p.step_parts():
        out.append(step_parts_section(p))
    if p.kernels:
        out.append(kernels_section(p, model))
    return out


def step_parts_section(p) -> Section:
    """The decode step by component (:meth:`mlacalc.serving.plan.Plan.step_parts`), each with
    its share of what they add to (the step, and the prompts a step carries where said), and
    how they make the step (under two-batch overlap: of the two micro-batches)."""
    parts, caption = p.step_parts_shares()
    rows = [[name, f"{s * 1e3:,.2f}", f"{share:.1%}"] for name, s, share in parts]
    return Section(
        "Decode step by component", ["component", "ms a step", "share"], rows, note=caption
    )


def plan_rows(p, compressed: bool = False, copied: bool = False) -> list[list[str]]:
    """What fits (memory, weights, cache, batch and context) and the step's times
    (``compressed``, ``copied``: :func:`kv_rows`')."""
    rows = [
        ["fits", "yes" if p.fits else f"no: {p.overflow}"],
        ["GPUs", gpus_text(p)],
        [
            "memory per GPU",
            f"{human_bytes(p.memory_per_gpu_bytes)} ({human_si(p.memory_per_gpu_bytes, 'B')})",
        ],
        ["usable after reserve", human_bytes(p.usable_per_gpu_bytes)],
        ["  memory setting", p.memory_setting],
        [
            f"weights per GPU ({p.weight_format or p.weight_dtype})",
            human_bytes(p.weights_per_gpu_bytes),
        ],
    ]
    for key, value in p.memory.items():
        if key.startswith("weights_"):
            rows.append([f"  {key[8:].replace('_', ' ')}", human_bytes(value)])
    rows += [
        ["KV budget per GPU", human_bytes(max(p.kv_budget_per_gpu_bytes, 0))],
        *shared_prefix_rows(p),
        *kv_rows(p, compressed, copied),
        [
            f"largest batch at {p.isl + p.osl if p.isl else p.seq_len:,} tokens"
            + (f" ({p.shared_prefix_tokens:,} shared)" if p.shared_prefix_tokens else "")
            + (" (the engine's max running)" if p.admission != "kv capacity" else ""),
            f"{p.max_batch:,}",
        ],
    ]
    if p.max_context is not None:
        rows.append([f"longest context at batch {p.batch:,}", p.longest_context_text()])
    if p.expert_rank_load is not None:
        per = " (a micro-batch's, as timed)" if p.overlap == "tbo" else ""
        rows.append(
            [f"hottest expert rank's copies over the even share{per}", f"{p.expert_rank_load:.3f}x"]
        )
        if p.expert_rank_load_from:
            rows.append(["  from", p.expert_rank_load_from])
    if p.ep_exchange:
        rows.append(["expert exchange (dispatch / combine)", p.ep_exchange])
    if p.decode_step_s is not None:
        at = decode_at(p)
        rows.append(
            [
                f"decode step at {at}",
                f"{p.decode_step_s * 1e3:,.2f} ms ({p.decode_bound}-bound; {links_text(p)})",
            ]
        )
        rows.append(
            [
                f"decode tokens/s at {at} (decode-only steps, all GPUs)",
                f"{p.decode_tokens_per_s:,.0f}",
            ]
        )
    if p.prefill_s is not None:
        cached = f", {p.prefix_cached_tokens:,} found cached" if p.prefix_cached_tokens else ""
        rows.append(
            [
                f"prefill of one {p.isl or p.seq_len:,}-token prompt{cached} "
                f"(causal, {p.prefill_what})",
                _duration(p.prefill_s),  # in TTFT's unit
            ]
        )
    rows.append(["binding resource", p.binding])
    for w in p.warnings:
        rows.append(["warning", w])
    return rows


def shared_prefix_rows(p) -> list[list[str]]:
    """A shared prefix's pages in the KV budget: held once per attention group on a GPU."""
    if not p.kv_bytes_shared_prefix_per_gpu:
        return []
    return [
        [
            "  shared prefix (once per attention group)",
            f"{human_bytes(p.kv_bytes_shared_prefix_per_gpu)} for {p.shared_prefix_tokens:,} "
            "tokens; each request holds the rest of its context",
        ]
    ]


def _duration(seconds: float) -> str:
    """A time in TTFT's unit (ms below 10 s, then s, then minutes)."""
    # deferred: the planner (loaded by then) loads numpy; `mlacalc --help` stays light
    from mlacalc.serving.plan import duration_text

    return duration_text(seconds)


def _per_token(value: float | None, fmt) -> str:
    """A figure between output tokens, or why there is none (one output token a request)."""
    return "n/a (one output token: no gap)" if value is None else fmt(value)


def serving_rows(p) -> list[list[str]]:
    """The serving figures of a request mix."""
    srows = [
        [
            "mode",
            f"{p.mode}"
            + (f" (+{p.prefill_gpus} prefill GPUs: {p.prefill_layout})" if p.prefill_gpus else ""),
        ],
        ["requests in flight", p.queue_text()],
        ["TTFT", p.ttft_text()],
        *chunk_rows(p),
        ["TPOT (inter-token latency)", _per_token(p.tpot_s, lambda t: f"{t * 1e3:,.2f} ms")],
        *others_prompts_rows(p),
        ["output tokens/s (prompts' passes included)", f"{p.output_tokens_per_s:,.0f}"],
        ["output tokens/s per GPU", f"{p.output_tokens_per_s_per_gpu:,.1f}"],
        ["output tokens/s per user", _per_token(p.output_tokens_per_s_per_user, "{:,.1f}".format)],
        ["tokens per step (MTP)", f"{p.tokens_per_step:.2f}"],
    ]
    if p.prefix_cache_hit or p.shared_prefix:
        srows.insert(1, ["prefix cache hit", p.prefix_cache_text()])
        srows.insert(2, ["  KV memory", p.prefix_cache_memory])
    if p.mode == "aggregated":
        srows.insert(1, ["prompts' forward pass", p.prefill_pass])
        if p.output_lag_steps:
            srows.insert(2, ["output lag", f"{p.output_lag_steps} step(s)"])
    # the disaggregated plan's KV transfer (its link indented under it) and the pools' rates
    srows += [[f"  {k}" if k == "link" else k, v] for k, v in p.disaggregated_parts()]
    if not p.sustainable:
        srows.append(["sustainable", "no: " + unsustained_words(p)])
    return srows


def unsustained_words(p) -> str:
    """Why the offered load is not kept up with: requests waiting, and for what."""
    if p.queued is None or not math.isfinite(p.queued):
        return "requests arrive faster than the deployment serves them"
    pool = {"prefill pool": "the prefill pool", "chunked prefill": "prefill (the chunk a step)"}
    pool = pool.get(p.binding, "a place in the batch")
    return (
        f"{request_count(p.queued)} of the {request_count(p.concurrency)} requests in flight "
        f"wait for {pool} on average"
    )


def others_prompts_rows(p) -> list[list[str]]:
    """TPOT's parts where other requests' prompts make a visible share of it
    (:meth:`mlacalc.serving.plan.Plan.tpot_parts`, the app's words too)."""
    return [[f"  {label}", f"{s * 1e3:,.2f} ms"] for label, s in p.tpot_parts()]


def chunk_rows(p) -> list[list[str]]:
    """Chunked prefill: the prompt's own chunk steps, which TTFT adds to the wait for the step
    in progress (one pass of the whole prompt alone is the plan's prefill row)."""
    # in TTFT's unit, which it is part of (Plan.ttft_parts: the app's words too)
    return [[f"  {label}", _duration(s)] for label, s in p.ttft_parts()]


def kernels_section(p, model=None) -> Section:
    """The step's kernels, the longest first; on a model whose layers differ, each attention
    kernel with its kind of layer (``full``, ``sliding(128)``, ``csa``), as the app shows it."""
    kinds = []
    if model is not None:
        kinds = attention_kind_labels(
            [k["name"] for k in p.kernels],
            [k["calls"] for k in p.kernels],
            attention_cost(model, "decode", p.context, 1).group_labels,
        )
    order = sorted(range(len(p.kernels)), key=lambda i: -p.kernels[i]["seconds"])
    krows = [
        [
            p.kernels[i]["name"],
            *([kinds[i]] if kinds else []),
            p.kernels[i]["kind"],
            str(p.kernels[i]["calls"]),
            f"{p.kernels[i]['seconds'] * 1e3:,.3f}",
            "link" if p.kernels[i]["communication"] else p.kernels[i]["dtype"],
        ]
        for i in order
    ]
    title = "Decode step of one GPU, by kernel"
    if p.kernels_scope:
        title = (
            "Decode step by kernel: "
            + ("one of the two micro-batches" if p.overlap == "tbo" else "one micro-batch")
            + (f", the {p.pp} pipeline stages together" if p.pp > 1 else "")
        )
    return Section(
        title,
        ["kernel", *(["layer kind"] if kinds else []), "kind", "calls", "ms (all calls)", "dtype"],
        krows,
        note=kernels_note(p),
        text_columns=(1,) if kinds else (),
    )
