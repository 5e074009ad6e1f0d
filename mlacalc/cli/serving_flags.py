"""Options ``plan`` and ``search`` share for the engine around the GPU's step and for a
deployment's launch: the routing's load on the experts, the engine's admission limits and host
work (with an engine's published defaults), MTP's acceptance length, and the engine command
lines that start what was planned."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from mlacalc.cli.common import COUNT, FRACTION, SIZE, EngineType, given
from mlacalc.hardware.catalogue import load_hardware
from mlacalc.words import defaults as D
from mlacalc.words.engines import ENGINE_LABELS, default_engine, engine_of_framework
from mlacalc.words.errors import MlacalcError

__all__ = [
    "ENGINE_NAMES",
    "component_choices",
    "defaults_line",
    "defaults_note",
    "engine_option_values",
    "kernel_versions",
    "launch_options",
    "launch_text",
    "launch_values",
    "memory_options",
    "no_launch_of_a_design",
    "plan_engine_options",
    "search_engine_options",
    "with_kernel_versions",
]

#: The engines whose defaults and command lines mlacalc knows (mlacalc.serving.scheduler and
#: mlacalc.serving.launch; kept here so that --help needs neither).
ENGINE_NAMES = ("sglang", "vllm", "trtllm")
#: --X-dtype flags of the components of mlacalc.models.quantization.COMPONENTS
_COMPONENT_FLAGS = (
    ("attention", "attention", "attention"),
    ("dense-ffn", "dense_ffn", "dense FFN"),
    ("expert", "experts", "routed experts'"),
    ("shared-expert", "shared_experts", "shared experts'"),
    ("embedding", "embeddings", "embedding"),
    ("head", "head", "output head"),
)
_MS = click.FloatRange(0, 1000)


def _options(f: Callable, options: list[Callable]) -> Callable:
    for decorator in reversed(options):
        f = decorator(f)
    return f


def memory_options(f: Callable) -> Callable:
    """``--memory-reserve`` and ``--engine-memory``, plan's and search's alike."""
    return _options(
        f,
        [
            click.option(
                "--memory-reserve",
                type=FRACTION,
                default=None,
                help=f"Fraction of each GPU's memory kept for activations and workspace "
                f"(default {D.MEMORY_RESERVE}). Or --engine-memory.",
            ),
            click.option(
                "--engine-memory",
                type=float,
                default=None,
                help="The engine's own memory setting, read by --engine's meaning (from "
                "recall): TensorRT-LLM's kv_cache_free_gpu_mem_fraction (the KV cache's share "
                "of what the weights leave), vLLM's gpu_memory_utilization, SGLang's "
                "mem_fraction_static (a share of the GPU for weights and KV); in (0, 1], not "
                "with --memory-reserve. --launch sets it.",
            ),
        ],
    )


def _scheduler_options() -> list[Callable]:
    return [
        click.option(
            "--engine-defaults",
            type=EngineType(("none",), ENGINE_NAMES),
            default=None,
            help="Whose published scheduler defaults (max running, token budget, chunked "
            "prefill, CUDA graphs, overlap scheduling) fill what is not given: by default "
            "--engine's when it is given; 'none' for none.",
        ),
        click.option(
            "--max-running",
            type=COUNT,
            default=None,
            help="Requests the engine runs at once per attention group (default: what fits).",
        ),
        click.option(
            "--max-tokens", type=SIZE, default=None, help="Tokens the engine carries per step."
        ),
        click.option(
            "--host-step-ms",
            type=_MS,
            default=0.0,
            help="Host (CPU) milliseconds per step: scheduling, inputs, reading tokens back.",
        ),
        click.option(
            "--overlap-schedule/--no-overlap-schedule",
            default=None,
            help="Host work beside the GPU's step (overlap scheduling; default) or after it.",
        ),
    ]


def _routing_options() -> list[Callable]:
    """How a step's tokens load the routed experts: ``plan``'s and ``search``'s (each search
    point with routed experts is timed so, as plan times its layout)."""
    return [
        click.option(
            "--routing",
            type=click.Choice(["random", "balanced"]),
            default="random",
            show_default=True,
            help="How a step's tokens spread over the expert ranks: a random sample "
            "(the hottest rank sets the exchange) or exactly balanced.",
        ),
        click.option(
            "--expert-skew",
            type=click.FloatRange(0, 4),
            default=0.0,
            show_default=True,
            help="Zipf exponent of the experts' popularity (0: all equally popular).",
        ),
        click.option(
            "--rebalance/--no-rebalance",
            default=None,
            help="Place the experts by their load (EPLB; default: with redundant experts).",
        ),
        click.option(
            "--moe-backend",
            type=click.Choice(["cutlass", "trtllm-gen"]),
            default=None,
            help="TensorRT-LLM's MoE backend (moe_config.backend; default CUTLASS): "
            "trtllm-gen times nvfp4 experts on B200/B300/GB200/GB300 with TensorRT-LLM-gen's "
            "MoE (the B200 table's min-latency rows). One value for every search point.",
        ),
    ]


def plan_engine_options(f: Callable) -> Callable:
    """``plan``'s options for the routing, the engine's scheduler and MTP's acceptance."""
    return _options(
        f,
        [
            *_routing_options(),
            *_scheduler_options(),
            click.option(
                "--host-per-sequence-ms",
                type=_MS,
                default=0.0,
                help="Host milliseconds per sequence in a step.",
            ),
            click.option(
                "--cuda-graph-max-batch",
                type=COUNT,
                default=None,
                help="Decode steps of at most this many tokens per group replay a CUDA graph.",
            ),
            click.option(
                "--launch-us",
                type=click.FloatRange(0, 1e6),
                default=0.0,
                help="Host microseconds per kernel launched outside a CUDA graph.",
            ),
            *[
                click.option(
                    f"--{flag}-dtype",
                    f"{component}_dtype",
                    default=None,
                    help=f"Format of the {what} weights (bf16, fp8, fp4, nvfp4, mxfp4, "
                    + ("mxfp4_mxfp8, " if component == "experts" else "")
                    + ("fp8_block, " if component not in ("embeddings", "head") else "")
                    + (
                        "int4; default: as the checkpoint stores them, under --weight-dtype too)."
                        if component in ("embeddings", "head")
                        else "int4; default: the checkpoint's or --weight-dtype)."
                    )
                    + (
                        " A head tied to the embedding is its table: --embedding-dtype."
                        if component == "head"
                        else ""
                    ),
                )
                for flag, component, what in _COMPONENT_FLAGS
            ],
            click.option(
                "--mtp-acceptance-length",
                type=click.FloatRange(1, 17),
                default=None,
                help="Tokens a step yields per sequence with MTP drafts (instead of "
                "--mtp-acceptance; default for DeepSeek: its published figure).",
            ),
        ],
    )


def search_engine_options(f: Callable) -> Callable:
    """``search``'s options for the routing, the engine's scheduler and the component formats
    it tries."""
    return _options(
        f,
        [
            *_routing_options(),
            *_scheduler_options(),
            click.option(
                "--component-choice",
                "component_choices",
                multiple=True,
                help="Weight formats per component to try beside the weights as they are, "
                "e.g. 'experts=nvfp4,attention=fp8' (repeat for more).",
            ),
        ],
    )


def component_choices(texts: tuple[str, ...]) -> list[dict[str, str]] | None:
    """``--component-choice`` values as mappings (``experts=nvfp4,attention=fp8``)."""
    out = []
    for text in texts:
        choice = {}
        for item in text.split(","):
            name, sep, fmt = item.partition("=")
            if not sep or not name.strip() or not fmt.strip():
                raise click.BadParameter(
                    f"{item!r} is not COMPONENT=FORMAT (e.g. experts=nvfp4)",
                    param_hint="--component-choice",
                )
            choice[name.strip().replace("-", "_")] = fmt.strip()
        out.append(choice)
    return out or None


def launch_options(f: Callable) -> Callable:
    """``--launch ENGINE`` and ``--model-path``: print the commands that start the deployment."""
    return _options(
        f,
        [
            click.option(
                "--launch",
                type=EngineType((), ENGINE_NAMES),
                default=None,
                help="Print the command lines that start the deployment on this engine.",
            ),
            click.option(
                "--model-path",
                default=None,
                help="The checkpoint the launch commands load (default: the model's Hugging Face "
                "repository where its sources or config name it, else a placeholder to fill).",
            ),
        ],
    )


def launch_values(opts: dict[str, Any]) -> tuple[str | None, str | None]:
    """``--launch`` and ``--model-path`` (``opts`` pops them); a model path without
    ``--launch`` is refused: no command would load it."""
    launch, model_path = opts.pop("launch"), opts.pop("model_path")
    if model_path is not None and launch is None:
        raise click.BadParameter(
            "names the checkpoint the --launch command lines load: give --launch ENGINE with it",
            param_hint="--model-path",
        )
    return launch, model_path


def engine_option_values(opts: dict[str, Any], serving_engine: str | None = None) -> dict[str, Any]:
    """The library's arguments of the options (``opts`` pops them), those left out None, for
    :func:`mlacalc.plan` and :func:`mlacalc.search` to fill with the scheduler defaults of
    the engine ``"defaults"`` holds (``--engine-defaults``, else the serving engine
    ``--engine``; None: none, ``--engine-defaults none``): their ``engine_defaults``, one rule
    for the API and the CLI (:func:`mlacalc.serving.scheduler.with_engine_defaults`)."""
    out: dict[str, Any] = {
        "max_running": opts.pop("max_running"),
        "max_tokens": opts.pop("max_tokens"),
        "host_step_s": opts.pop("host_step_ms") / 1e3,
        "overlap_schedule": opts.pop("overlap_schedule"),
    }
    engine = opts.pop("engine_defaults")
    engine = serving_engine if engine is None else engine
    out["defaults"] = None if engine == "none" else engine
    for name in ("routing", "expert_skew", "rebalance", "moe_backend"):  # plan's and search's
        if name in opts:
            out[name] = opts.pop(name)
    if "host_per_sequence_ms" in opts:  # plan's
        out["host_per_sequence_s"] = opts.pop("host_per_sequence_ms") / 1e3
        out["launch_s"] = opts.pop("launch_us") / 1e6
        out["cuda_graph_max_batch"] = opts.pop("cuda_graph_max_batch")
        out["mtp_acceptance_length"] = opts.pop("mtp_acceptance_length")
        formats = {c: opts.pop(f"{c}_dtype") for _, c, _ in _COMPONENT_FLAGS}
        out["component_dtypes"] = {c: f for c, f in formats.items() if f is not None} or None
    return out


def defaults_note(values: dict[str, Any], chunked: bool | str = True) -> tuple[str | None, str]:
    """The engine whose scheduler defaults :func:`engine_option_values` took (``values``
    pops it; None: none) and the line the output says it in ("" for none); ``chunked``:
    whether the command runs the engine's chunked prefill (search runs its own budgets)."""
    engine = values.pop("defaults")
    return engine, defaults_line(engine, given("engine_defaults"), chunked)


def defaults_line(engine: str | None, given_by_flag: bool, chunked: bool | str = True) -> str:
    """What the output says of the scheduler defaults it took (engine None: ""); ``chunked``
    False: a search, which runs chunked prefills of its own; a string: what is said of it
    instead (a disaggregated plan's "none (disaggregated)")."""
    if engine is None:
        return ""
    # deferred: the scheduler's table needs numpy beneath it; --help stays light
    from mlacalc.serving.scheduler import defaults_words

    said = (
        chunked
        if isinstance(chunked, str)
        else (None if chunked else "searched (--chunked-prefills)")
    )
    why = "--engine-defaults" if given_by_flag else "--engine; --engine-defaults none for none"
    return (
        f"# scheduler defaults: {engine}'s {defaults_words(engine, said)} where not given "
        f"(from {why})\n"
    )


def with_kernel_versions(note: str, profile: Any) -> str:
    """A defaults line (``""`` stays ``""``) with the engine version whose measured tables the
    profile that timed the kernels was fitted on (``; kernels measured on SGLang 0.5.14
    profile fit-h100-sxm-sglang``), so that the scheduler's version and the kernels' are not
    read as one; the line as it was where the profile records no engine's tables."""
    versions = kernel_versions(profile) if note else ""
    if not versions:
        return note
    name = getattr(profile, "name", profile)
    return note.rstrip("\n") + f"; kernels measured on {versions}, profile {name}\n"


def kernel_versions(profile: Any) -> str:
    """The engine and version of the measured tables a profile (a name, path or Profile) was
    fitted on, from the paths it records (``<system>/<family>/<framework>/<version>/<table>``):
    ``SGLang 0.5.14``, with the other versions of a few of its tables after it (DeepEP's, collected
    under SGLang 0.5.12); ``""`` where it records none (a fit on a microbenchmark set) or cannot
    be read."""
    # deferred: profiles load numpy beneath them; --help stays light
    from mlacalc.timemodel.profile import load_profile

    try:
        prof = load_profile(profile)
    except MlacalcError:
        return ""
    counts: dict[str, int] = {}
    for entry in prof.fitted_on:
        for source in (entry.get("sources") or []) if isinstance(entry, dict) else []:
            parts = Path(str(source)).parts
            if len(parts) >= 5 and engine_of_framework(parts[-3]) == prof.engine:
                counts[parts[-2]] = counts.get(parts[-2], 0) + 1
    if not counts:
        return ""
    order = sorted(counts, key=lambda v: (-counts[v], v))
    label = f"{ENGINE_LABELS.get(prof.engine, prof.engine)} {order[0]}"
    rest = [f"{counts[v]} of its tables at {v}" for v in order[1:]]
    return label + (f" ({', '.join(rest)})" if rest else "")


def _device_of(hardware: Any) -> Any:
    """The point's device (None where it names none or is not in the catalogue)."""
    if not hardware:
        return None
    try:
        return load_hardware(hardware)
    except MlacalcError:
        return None


def _own_page_flags(engine: str, own_page: int) -> str:
    """The flags that give the figures at the launched ``engine``'s own page: ``--page-size``
    always; where the page was not given, the flag that chose the engine whose defaults set it
    (``--engine-defaults`` where given, else ``--engine``), now naming ``engine``."""
    flags = [f"--page-size {own_page}"]
    if click.get_current_context(silent=True) is not None and not given("page_size"):
        flag = "--engine-defaults" if given("engine_defaults") else "--engine"
        flags.insert(0, f"{flag} {engine}")
    return " or ".join(flags)


def launch_text(
    engine: str,
    model_path: str | None,
    point: dict[str, Any],
    timed_engine: str | None = None,
    hardware: Any = None,
    **context: Any,
) -> str:
    """The launch commands of a deployment (a search point, or a plan's fields in its keys),
    each under a comment line saying which server it starts, with a note where the figures
    were timed with another engine's kernels (``timed_engine``) or need a checkpoint stored in
    a chosen format."""
    # deferred: the launch builder is needed only when --launch is given
    from mlacalc.serving.launch import checkpoint_path, deployments, launch_commands
    from mlacalc.serving.scheduler import model_page_size

    hardware = hardware or point.get("hardware")
    device = _device_of(hardware)
    vendor = device.vendor if device is not None else ""
    m = context.pop("model_config", None)  # the model: its routed experts and MLA / DSA pages
    own_page = None
    if m is not None:
        context.setdefault("routed_experts", m.n_routed_experts or 0)
        if device is not None:
            own_page = model_page_size(engine, m, device)
    pools = deployments(point, **context)
    if vendor not in ("", "nvidia") and engine == "trtllm":
        raise click.BadParameter(
            f"TensorRT-LLM runs on NVIDIA GPUs only ({hardware} is {vendor.upper()}'s): give "
            "--launch sglang or vllm",
            param_hint="--launch",
        )
    lines = [f"# {engine}: the commands that start this deployment"]
    if model_path is None:  # the model's own checkpoint, or a slot to fill, said
        model_path, said = checkpoint_path(m) if m is not None else ("<checkpoint>", "")
        lines += [f"# note: {said}"] if said else []
    if vendor not in ("", "nvidia") and any(d.ep > 1 for d in pools) and engine != "trtllm":
        pools = [dataclasses.replace(d, deepep=False) for d in pools]
        option = "--moe-a2a-backend deepep" if engine == "sglang" else "VLLM_ALL2ALL_BACKEND"
        lines.append(
            f"# note: DeepEP ({option}) is NVIDIA's; on {hardware} the experts' all-to-all is "
            f"left to {ENGINE_LABELS.get(engine, engine)}'s default"
        )
    split = [d for d in pools if d.dp_attention and d.dp > 1 and d.tp > 1]
    if engine == "sglang" and split:
        # SGLang's dense MLP of a MoE model runs over all --tp GPUs (default) or whole on each
        # (--moe-dense-tp-size 1; no other size, from recall of its server_args.py)
        lines.append(
            f"# note: the plan splits the dense FFN over each attention group's {split[0].tp} "
            "GPUs; SGLang splits it over every --tp GPU of the server, or holds it whole on "
            "each with --moe-dense-tp-size 1 (from recall): the dense FFN's bytes and time differ"
        )
    page = context.get("page_size")
    if own_page is not None and page is not None and page != own_page:
        lines.append(
            f"# note: the figures assume KV pages of {page} token{'s' * (page != 1)}, which "
            "the lines below set; "
            f"{ENGINE_LABELS.get(engine, engine)} pages this model by {own_page} by default, and "
            f"its attention backend may refuse or override {page} (from recall): "
            f"{_own_page_flags(engine, own_page)} gives the figures at its own page"
        )
    if timed_engine and timed_engine != engine:
        lines.append(
            f"# note: the figures are timed with {timed_engine}'s kernels (--engine, "
            f"{default_engine(device)} when not given); --engine {engine} times {engine}'s"
        )
    formats = dict(point.get("component_dtypes") or {})
    # a dtype chosen (plan's --weight-dtype; a search point's not sized as its checkpoint)
    chosen = not str(point.get("weight_format", "")).startswith("checkpoint")
    if point.get("weight_dtype") and chosen:
        formats = {"weights": point["weight_dtype"], **formats}
    if formats:
        said = ", ".join(f"{k} {v}" for k, v in formats.items())
        lines.append(
            f"# note: timed with {said}: --model-path must name a checkpoint stored so (these "
            "commands quantize nothing)"
        )
    for what, command in launch_commands(engine, model_path, pools):
        lines += [f"# {what}", command]
    return "\n".join(lines) + "\n"


def no_launch_of_a_design(launch: str | None, sets: dict[str, Any] | None) -> None:
    """``--launch`` beside ``--set`` refused (plan, search): an engine serves a checkpoint, and
    the changed design has none; its lines served the unchanged model."""
    if launch and sets:
        raise click.BadParameter(
            "launches a checkpoint, and a --set design has none (its lines would serve the "
            "model unchanged); drop --launch or --set",
            param_hint="--launch",
        )
