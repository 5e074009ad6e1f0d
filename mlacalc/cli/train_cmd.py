"""`mlacalc train`: what a training step costs (FLOPs by stage, activations, optimizer memory,
step time on a parallel layout), and absorbed against expanded MLA training."""

from __future__ import annotations

import click

from mlacalc.cli.common import (
    FRACTION,
    SIZE,
    Section,
    check_context,
    emit,
    format_option,
    load,
    set_option,
    size_list,
    warn,
)
from mlacalc.render import human_bytes, human_seconds, human_si
from mlacalc.training.flops import (
    RECOMPUTE_POLICIES,
    SCHEDULES,
    TRAINING_IMPLS,
    TRAINING_STAGES,
)
from mlacalc.training.lora import BASE_DTYPES, NF4_BYTES_PER_PARAM, TARGETS
from mlacalc.training.memory import OPTIMIZERS, PRECISIONS, SWIGLU
from mlacalc.words import defaults as D

_PARTS = (
    ("forward", "forward_s"),
    ("backward", "backward_s"),
    ("recompute", "recompute_s"),
    ("tensor-parallel comm", "tp_comm_s"),
    ("expert-parallel comm", "ep_comm_s"),
    ("pipeline comm", "pp_comm_s"),
    ("context-parallel ring (exposed)", "cp_exposed_s"),
    ("micro-batch (slowest stage)", "micro_batch_s"),
    ("pipeline bubble", "bubble_s"),
    ("data-parallel comm (exposed)", "dp_exposed_s"),
    ("optimizer step", "optimizer_s"),
    ("step", "step_s"),
)


def _sections(c, table, overlap: bool = False, gated: bool = True) -> list[Section]:
    """The command's tables; ``gated``: the model's FFN is gated (its SwiGLU named)."""
    f = c.flops
    tok = f.tokens
    stages = [
        [
            s,
            human_si(f.forward[s]),
            human_si(f.backward[s]),
            human_si(f.recompute[s]),
            f"{(f.forward[s] + f.backward[s]) / tok / 1e9:,.2f}",
        ]
        for s in TRAINING_STAGES
    ]
    stages.append(
        [
            "total",
            human_si(sum(f.forward.values())),
            human_si(sum(f.backward.values())),
            human_si(sum(f.recompute.values())),
            f"{f.per_token / 1e9:,.2f}",
        ]
    )
    lay = c.layout
    out = [
        Section(
            f"{c.model}: FLOPs of one micro-batch ({lay.micro_batch} x {c.seq_len:,} tokens, "
            f"{c.impl}, {c.attention} attention, recompute {c.recompute})",
            ["stage", "forward", "backward", "recomputed", "GFLOPs / token (fwd + bwd)"],
            stages,
            note="causal pairs; "
            + (
                "LoRA: backward = the frozen weights' input-gradient GEMMs alone (no weight "
                "gradients: as many FLOPs as their forward), the adapters' input and weight "
                "gradients (twice theirs) and the attention core's dQ, dK, dV, dP (twice its); "
                if c.lora_rank
                else "backward = 2 x forward; "
            )
            + "recomputed: the flash backward's scores "
            "and the recompute policy (hardware FLOPs, in HFU, not in MFU)"
            + (
                ""
                if c.model_flops == f.model_flops
                else f"; the model's FLOPs, what MFU counts, are {c.flops_per_token / 1e9:,.2f} "
                f"G a token (the expanded path's count): the {c.impl} path runs "
                f"{f.per_token / 1e9:,.2f} G for the same model"
            ),
        ),
        Section(
            "Activations saved for backward (fused kernels: FlashAttention, fused norms and "
            f"RoPE{f', {c.swiglu} SwiGLU' if gated else ''}; Hugging Face's unfused layers "
            "save more)",
            ["block", "bytes per layer", "layers", "bytes"],
            [[b, human_bytes(v), n, human_bytes(v * n)] for b, v, n in _blocks(c)]
            + [["one micro-batch, whole model", "", "", human_bytes(c.activation_bytes)]]
            + (
                [
                    [
                        "+ the layer rerun in backward",
                        human_bytes(c.recomputed_layer_bytes),
                        1,
                        human_bytes(c.recomputed_layer_bytes),
                    ]
                ]
                if c.recomputed_layer_bytes
                else []
            ),
        ),
        Section(
            f"Memory per GPU (tp {lay.tp}, "
            + (f"cp {lay.cp}, " if lay.cp > 1 else "")
            + f"pp {lay.pp}, dp {lay.dp}, ep {lay.ep}; "
            f"{c.optimizer}, {c.precision}, ZeRO-{c.zero})",
            ["part", "bytes"],
            [[_label(k, c), human_bytes(v)] for k, v in c.states_per_gpu.items()]
            + [
                ["activations (micro-batches in flight)", human_bytes(c.activation_bytes_per_gpu)],
                ["total", human_bytes(c.memory_per_gpu)],
            ],
            note=f"{human_si(c.params_per_gpu)} parameters per GPU"
            + (
                f" (LoRA rank {c.lora_rank} on {c.lora_targets}: "
                f"{human_si(c.base_params_per_gpu)} of the model's, frozen in "
                + (
                    "NF4 where a linear layer's (QLoRA)"
                    if c.base_dtype == "nf4"
                    else "the compute dtype"
                )
                + f", and {human_si(c.trainable_params_per_gpu)} of adapters, trainable; "
                f"{c.trainable_params:,} adapter parameters in the model)"
                if c.lora_rank
                else ""
            )
            + (
                f" of stage {c.stage} ({c.stage_layers} layers), the one holding the most"
                + (f" ({_flags(c.step_layers_note)})" if c.step_layers_note and not c.time else "")
                if lay.pp > 1
                else ""
            )
            + (
                ""
                if c.fits is None
                else f"; {'fits in' if c.fits else 'DOES NOT FIT in'} the "
                f"{human_bytes(c.usable_memory_bytes)} usable of a {c.time.hardware}'s "
                f"{human_bytes(c.device_memory_bytes)} (memory reserve {c.memory_reserve:.4g} "
                "kept for the CUDA context, workspaces and fragmentation; --memory-reserve)"
                + (f": {c.fit_advice}" if c.fit_advice else "")
            ),
        ),
    ]
    if c.time is not None:
        out.append(_step_section(c, overlap))
        if lay.pp > 1:
            out.append(_stages_section(c))
    if table:
        out.append(
            Section(
                "Absorbed against expanded training (expanded: kv_up recompute; absorbed: "
                "probabilities kept)",
                ["d_c", "seq_len", "core FLOPs", "total FLOPs", "activations"],
                [
                    [
                        f"{r['kv_lora_rank']:,}",
                        f"{r['seq_len']:,}",
                        f"{r['core_ratio']:.2f}x",
                        f"{r['flops_ratio']:.2f}x",
                        f"{r['activations_ratio']:.2f}x",
                    ]
                    for r in table
                ],
                note="absorbed / expanded, one micro-batch through the whole model; absorbed "
                "costs fewer core FLOPs only where 2 d_c + d_rope < d_nope + d_rope + d_v",
            )
        )
    return out


def _step_section(c, overlap: bool) -> Section:
    """The step's table: a micro-batch's parts and the step's, its note how they add."""
    t, lay = c.time, c.layout
    return Section(
        f"Step on {lay.gpus:,} x {t.hardware} ("
        f"{_count(lay.micro_batches, 'micro-batch', 'micro-batches')}, global batch "
        f"{_count(lay.global_batch, 'sequence', 'sequences')})",
        ["part", "time"],
        [
            [name, human_seconds(getattr(t, key))]
            for name, key in _PARTS
            if key != "cp_exposed_s" or lay.cp > 1
        ],
        note=f"step = {lay.micro_batches:,} x micro-batch + bubble"
        + (
            " (the other stages' micro-batches"
            + (f" / {lay.vp}: interleaved, {lay.vp} virtual stages)" if lay.vp > 1 else "")
            + (
                ", each less twice its weight-gradient GEMMs: zb-h1)"
                if t.schedule == "zb-h1"
                else ")"
                if lay.vp == 1
                else ""
            )
            if lay.pp > 1
            else ""
        )
        + " + exposed "
        "data-parallel comm + optimizer step; the rows above the micro-batch are inside "
        + (
            "it (--overlap: the longer of the communication and the compute); "
            if overlap
            else "it; "
        )
        + (
            f"the context-parallel ring passes {human_seconds(t.cp_comm_s)} of K/V "
            "a micro-batch behind the attention blocks, the row its exposed part; "
            if lay.cp > 1
            else ""
        )
        + f"MFU {c.mfu:.1%} ("
        + (
            "the LoRA step's model FLOPs: forward, input gradients, the adapters' forward "
            "and both gradients, no weight gradients for the frozen weights; "
            if c.lora_rank
            else "model FLOPs, "
        )
        + f"{c.flops_per_token / 1e9:,.2f} G a token), "
        f"HFU {c.hfu:.1%} (executed FLOPs, {c.executed_flops_per_token / 1e9:,.2f} G a "
        "token with the recomputation), both of the dense bf16 peak; "
        + (
            "the layout DOES NOT FIT (memory table): the step, MFU and HFU are its kernels "
            "timed as if it did; "
            if c.fits is False
            else ""
        )
        + (f"{_flags(c.step_layers_note)}; " if c.step_layers_note else "")
        + f"{c.tokens_per_s_per_gpu:,.0f} tokens/s per GPU "
        f"({c.gpu_hours_per_trillion_tokens / 1e3:,.1f}K GPU-hours a trillion tokens); "
        "a prediction of the kernel "
        "time model and the link model (profile "
        f"{t.profile}: {t.calibration})"
        + (
            "; global batch not given: one micro-batch a data-parallel rank (no "
            "gradient accumulation"
            + (", the whole data-parallel reduction after its one backward" if lay.dp > 1 else "")
            + f"); --global-batch sets it (e.g. {lay.micro_batch * lay.dp * 8:,}: 8 "
            "micro-batches a rank)"
            if c.global_batch_defaulted
            else ""
        ),
    )


def _flags(note: str) -> str:
    """A library note in the command's words: the stage split's field as its option."""
    return note.replace("stage_layers", "--stage-layers")


def _stages_section(c) -> Section:
    """Each pipeline stage's micro-batch, timed with its own layers: the slowest sets the
    pace (the step table's parts are its), the others make the bubble."""
    t = c.time
    return Section(
        "Pipeline stages (a micro-batch on one GPU of each)",
        ["stage", "layers", "MoE layers", "forward", "backward", "micro-batch"],
        [
            [
                f"{st.index}" + (" (slowest)" if st.index == t.slowest_stage else ""),
                f"{st.layers:,}",
                f"{st.moe_layers:,}",
                human_seconds(st.forward_s),
                human_seconds(st.backward_s),
                human_seconds(st.micro_batch_s),
            ]
            for st in t.stages
        ],
        note="the embedding on the first stage, the final norm and the output head on the "
        "last; the micro-batch adds the stage's communication to its forward, backward and "
        "recompute",
    )


def _label(key: str, c) -> str:
    """A memory row's name, the app's too (:func:`mlacalc.training.cost.state_label`)."""
    # deferred: the training model loads numpy and the time model; --help stays light
    from mlacalc.training.cost import state_label

    return state_label(key, c.optimizer, c.precision, c.lora_rank, c.base_dtype,
                       c.nf4_params_per_gpu)  # fmt: skip


def _blocks(c) -> list[tuple[str, int, int]]:
    per: dict[str, list[int]] = {}
    for a in c.activations:
        per.setdefault(a.block, [0, a.layers])[0] += a.bytes
    return [(b, v, n) for b, (v, n) in per.items()]


@click.command("train")
@click.argument("model")
@click.option(
    "--seq-len", "-s", type=SIZE, default="4k", show_default=True, help="Tokens per sequence."
)
@click.option(
    "--micro-batch", type=SIZE, default=1, show_default=True, help="Sequences per micro-batch."
)
@click.option(
    "--global-batch",
    type=SIZE,
    default=None,
    help="Sequences per step (default: one micro-batch per data-parallel rank).",
)
@click.option(
    "--impl",
    type=click.Choice(list(TRAINING_IMPLS)),
    default="expanded",
    show_default=True,
    help="MLA path: expanded (flash) or absorbed.",
)
@click.option(
    "--recompute",
    type=click.Choice(list(RECOMPUTE_POLICIES)),
    default="none",
    show_default=True,
    help="Activation recomputation.",
)
@click.option(
    "--swiglu",
    type=click.Choice(list(SWIGLU)),
    default="fused",
    show_default=True,
    help="How a gated FFN runs: fused (Megatron-LM, TransformerEngine) saves the [gate, up] "
    "output and the product; unfused (eager PyTorch) also SiLU(gate).",
)
@click.option(
    "--hardware", "-H", "--hw", "hardware", default=None, help="Predict the step time on this GPU."
)
@click.option("--tp", type=SIZE, default=1, show_default=True, help="Tensor-parallel ranks.")
@click.option("--pp", type=SIZE, default=1, show_default=True, help="Pipeline stages.")
@click.option("--dp", type=SIZE, default=1, show_default=True, help="Data-parallel ranks.")
@click.option(
    "--ep",
    type=SIZE,
    default=1,
    show_default=True,
    help="Expert-parallel ranks: they divide the experts and the --dp x --cp x --tp ranks "
    "the experts are laid over.",
)
@click.option(
    "--cp",
    type=SIZE,
    default=1,
    show_default=True,
    help="Context-parallel ranks: each sequence split into 2 x --cp chunks, two a rank, its K "
    "and V passed around a ring (GPUs = tp x cp x pp x dp).",
)
@click.option(
    "--virtual-stages",
    type=SIZE,
    default=1,
    show_default=True,
    help="Interleaved pipeline (Megatron-LM's interleaved 1F1B): layer chunks a stage holds; "
    "the bubble / v, v x the pipeline's sends, more activations in flight on the first "
    "stages (each stage's layers split into v chunks of at least one layer: pp x v must "
    "divide the layers unless --stage-layers gives the counts; pp must divide the "
    "micro-batches a rank).",
)
@click.option(
    "--schedule",
    type=click.Choice(list(SCHEDULES)),
    default="1f1b",
    show_default=True,
    help="Pipeline schedule: 1f1b, or zb-h1 (zero bubble with 1F1B's memory, Qi et al. 2023: "
    "each stage's weight-gradient GEMMs fill the bubble, leaving F + B - W a stage).",
)
@click.option(
    "--stage-layers",
    default=None,
    metavar="COUNTS",
    help="Layers of each pipeline stage: --pp counts (e.g. 7,8,8,7) or FIRST,..,LAST (e.g. "
    "7,..,7: the stages between split the rest evenly, as Megatron-LM's first / last stage "
    "counts). Default: an even split, the first L mod pp stages one layer more.",
)
@click.option(
    "--mtp/--no-mtp",
    default=None,
    help="Train the model's multi-token-prediction modules with it (DeepSeek-V3's MTP, the "
    "config's num_nextn_predict_layers) and count their time, FLOPs and memory on the last "
    "stage. Default: on where the config has them, off under --lora-rank.",
)
@click.option(
    "--lora-rank",
    type=SIZE,
    default=None,
    help="LoRA fine-tuning: adapters of this rank, the base weights frozen (kept in the compute "
    "dtype, or NF4 with --base-dtype nf4; no gradients, master copy, optimizer states or "
    "weight-gradient GEMMs).",
)
@click.option(
    "--lora-targets",
    type=click.Choice(list(TARGETS)),
    default=None,
    help="What the adapters adapt, with --lora-rank (default attention-mlp): the attention "
    "projections and the dense MLP's and shared experts' (PEFT's all-linear, the head "
    "excepted), or the attention projections only.",
)
@click.option(
    "--base-dtype",
    type=click.Choice(list(BASE_DTYPES)),
    default="compute",
    show_default=True,
    help="LoRA's frozen base, with --lora-rank: in the compute dtype, or nf4 (QLoRA: the "
    "linear layers' weights in 4-bit NormalFloat with block scales, "
    f"{NF4_BYTES_PER_PARAM * 8:.3f} bits a weight, "
    "dequantized to the compute dtype for each pass that reads them).",
)
@click.option(
    "--optimizer", type=click.Choice(list(OPTIMIZERS)), default="adamw", show_default=True
)
@click.option(
    "--precision",
    type=click.Choice(list(PRECISIONS)),
    default="bf16-mixed",
    show_default=True,
    help="Weights, gradients and optimizer states; fp32 also 4-byte activations and TF32 "
    "matmuls (half the bf16 rate); fp8-mixed FP8 GEMMs and the optimizer states in bf16 (Adam: "
    "4 bytes a parameter, not bf16-mixed's 8, as DeepSeek-V3 trained).",
)
@click.option(
    "--zero",
    type=click.IntRange(0, 3),
    default=None,
    help="ZeRO stage over the data-parallel ranks (default 1).",
)
@click.option(
    "--overlap", is_flag=True, help="Hide TP/EP/PP communication behind compute (DualPipe-like)."
)
@click.option(
    "--comm-sms",
    type=click.IntRange(0, 1 << 16),
    default=0,
    show_default=True,
    help="SMs per GPU kept for communication (their compute is lost; DeepSeek-V3: 20).",
)
@click.option(
    "--memory-reserve",
    type=FRACTION,
    default=D.MEMORY_RESERVE,
    show_default=True,
    help="Fraction of each GPU's memory kept apart (CUDA context, workspaces, fragmentation): "
    "a layout fits where its share is within the rest (plan's reserve).",
)
@click.option(
    "--absorption",
    default=None,
    help="Absorbed vs expanded table at these lengths (e.g. 1k,4k,16k,64k).",
)
@click.option(
    "--absorption-ranks",
    default=None,
    help="... and at these latent widths d_c (e.g. 64,128,256,512; default the model's).",
)
@set_option
@format_option
def command(
    model,
    seq_len,
    micro_batch,
    global_batch,
    impl,
    recompute,
    swiglu,
    hardware,
    tp,
    pp,
    dp,
    ep,
    cp,
    virtual_stages,
    schedule,
    stage_layers,
    mtp,
    lora_rank,
    lora_targets,
    base_dtype,
    optimizer,
    precision,
    zero,
    overlap,
    comm_sms,
    memory_reserve,
    absorption,
    absorption_ranks,
    sets,
    fmt,
):
    """FLOPs, activation memory, optimizer memory and step time of one training step.

    \b
    Examples:
      mlacalc train deepseek-v3 --seq-len 4k --recompute kv_up --absorption 1k,4k,16k,64k
      mlacalc train llama-3.1-405b -s 8k --hw H100 --tp 8 --pp 16 --dp 64 --global-batch 2048
      mlacalc train llama-3.1-405b -s 128k --hw H100 --tp 8 --cp 16 --pp 16 --dp 4 \\
          --global-batch 64
      mlacalc train deepseek-v3 --hw H800 --pp 16 --dp 128 --ep 64 --global-batch 15360 \\
          --precision fp8-mixed --overlap
      mlacalc train llama-3.1-8b --set num_key_value_heads=4   # a new design's fields
    """
    # deferred: the training model loads numpy and the time model; --help stays light
    from mlacalc.training.cost import absorption_table, training_cost

    m = load(model, changes=sets)
    if hardware is None:
        for flag, given_value in (("--overlap", overlap), ("--comm-sms", comm_sms)):
            if given_value:
                warn(f"{flag} times the step: it has no effect without --hardware")
    c = training_cost(
        m,
        seq_len,
        micro_batch,
        impl,
        recompute,
        hardware,
        tp,
        pp,
        dp,
        ep,
        global_batch,
        optimizer,
        precision,
        zero,
        overlap=overlap,
        comm_sms=comm_sms,
        memory_reserve=memory_reserve,
        swiglu=swiglu,
        cp=cp,
        lora_rank=lora_rank,
        lora_targets=lora_targets,
        base_dtype=base_dtype,
        virtual_stages=virtual_stages,
        stage_layers=stage_layers,
        mtp=mtp,
        schedule=schedule,
    )
    if absorption_ranks and not absorption:
        raise click.BadParameter(
            "needs --absorption (the lengths)", param_hint="--absorption-ranks"
        )
    ranks = size_list(absorption_ranks, "--absorption-ranks")
    table = (
        absorption_table(m, size_list(absorption, "--absorption"), micro_batch, ranks)
        if absorption
        else []
    )
    document = c.to_dict() | ({"absorption": table} if table else {})
    emit(fmt, document, lambda: _sections(c, table, overlap, m.gated_mlp))
    _warnings(m, seq_len, hardware, optimizer, precision, ranks or [])
    for sentence in c.warnings:  # the library's, as the app shows them
        warn(sentence)


def _count(n: int, one: str, many: str) -> str:
    """``n`` and its noun, singular at 1."""
    return f"{n:,} {one if n == 1 else many}"


def _warnings(m, seq_len, hardware, optimizer, precision, ranks) -> None:
    """One line each for an input that was taken as given though it means less than it says
    (once the command has printed its result, so that an error is the only line it prints)."""
    check_context(m, seq_len)
    if ranks and m.is_mla:
        full = min(m.hidden_size, m.num_attention_heads * (m.qk_nope_head_dim + m.v_head_dim))
        wide = [r for r in ranks if r > full]
        if wide:
            warn(
                f"--absorption-ranks: {', '.join(f'{r:,}' for r in wide)} above the full rank "
                f"{full:,} of {m.label}'s key/value path (min(d_model, n_h (d_nope + d_v))): a "
                "wider latent holds nothing more; its ratios are counted as given"
            )
    if precision == "fp8-mixed" and hardware is not None:
        # deferred: the hardware catalogue loads only when a device is named
        from mlacalc.hardware.catalogue import load_hardware
        from mlacalc.training.cost import fp8_without_fp8_units

        hw = load_hardware(hardware)
        if "fp8" not in hw.peak_flops_per_s:
            warn(f"--precision fp8-mixed: {fp8_without_fp8_units(hw.name, optimizer)}")
