"""A conversion to MLA at several latent ranks: cache, parameters, FLOPs and step times per rank.

What an engineer deciding on a conversion looks at before any training: for each rank
``d_c``, the converted model's cache per token, its parameters, its attention FLOPs and the
predicted time of a decode step and of a prefill on a device (the whole model's forward step,
timed by the calibrated kernel model, :func:`mlacalc.timemodel.predict.predict_time` with
``scope="model"``), beside the source model's at the same step. Step times are for one GPU
holding the whole model (what ``predict_time`` times); a deployment over several GPUs is the
planner's (``mlacalc plan`` with the converted model). Each time is the named serving engine's
kernels (``engine``; None: the device's default, :func:`~mlacalc.words.engines.default_engine`)
with the cache in ``kv_dtype``; :func:`step_route` says how they were predicted and the error
to expect, in the words ``mlacalc plan`` uses.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mlacalc.cost.convert_cost import conversion_cost
from mlacalc.cost.engine import attention_flops, kv_cache
from mlacalc.cost.params import weight_bytes
from mlacalc.hardware.catalogue import load_hardware
from mlacalc.models.convert import convert
from mlacalc.models.loading import ModelConfig, model_argument
from mlacalc.timemodel.predict import Prediction, predict_time
from mlacalc.words import arguments as args
from mlacalc.words.errors import InvalidArgumentError
from mlacalc.words.units import counted, human_bytes

__all__ = [
    "IMPL_WORDS",
    "RankRow",
    "fit_warning",
    "measured_bound_note",
    "rank_sweep",
    "step_kernels_timed",
    "step_prediction",
    "step_route",
    "step_seconds",
    "step_warnings",
]

#: How an output names the MLA implementation a converted model's step was timed in (the
#: prediction's ``impl``): ``naive`` is the expanded per-head keys and values, what a prompt
#: runs over the latent cache
IMPL_WORDS = {"naive": "expanded", "compressed": "compressed", "absorbed": "absorbed"}


@dataclass(frozen=True)
class RankRow:
    """One rank of a sweep (``rank`` 0: the source model)."""

    rank: int
    model: str
    cache_bytes_per_token: int
    params: int
    decode_attention_flops: int
    decode_s: float
    prefill_s: float
    #: MHA2MLA as published (every KV head's RoPE part cached); ``cache_bytes_per_token`` is
    #: then the shared-RoPE form's (None: no other form; the source row)
    published_cache_bytes_per_token: int | None = None
    #: the implementation each step was timed in (the prediction's ``impl``: ``absorbed``,
    #: ``naive`` for expanded heads; ``standard`` for the source's attention)
    decode_impl: str = ""
    prefill_impl: str = ""

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def step_prediction(
    model: ModelConfig,
    hardware: Any,
    phase: str,
    seq_len: int,
    batch: int,
    impl: str | None,
    kv_dtype: str | None = None,
    engine: str | None = None,
) -> Prediction:
    """The prediction of one forward step of the whole model (decode: one token per sequence
    at ``seq_len`` keys; prefill: ``seq_len`` causal tokens per sequence), its cache in
    ``kv_dtype`` (None: bf16), timed as ``engine``'s kernels (None: the device's default)."""
    causal = phase == "prefill"
    return predict_time(
        model,
        hardware,
        phase,
        seq_len,
        batch,
        impl=impl,
        scope="model",
        causal=causal,
        kv_dtype=kv_dtype,
        engine=engine,
    )


def step_seconds(
    model: ModelConfig,
    hardware: Any,
    phase: str,
    seq_len: int,
    batch: int,
    impl: str | None,
    kv_dtype: str | None = None,
    engine: str | None = None,
) -> float:
    """:func:`step_prediction`'s time in seconds.

    Examples
    --------
    >>> from mlacalc.models.convert import convert
    >>> m = convert("llama-3-8b", kv_lora_rank=512).model
    >>> bf16 = step_seconds(m, "H100", "decode", 32768, 8, "absorbed")
    >>> step_seconds(m, "H100", "decode", 32768, 8, "absorbed", kv_dtype="fp8") < bf16
    True
    """
    return step_prediction(model, hardware, phase, seq_len, batch, impl, kv_dtype, engine).seconds


def measured_bound_note(device: str) -> str:
    """What a step time on ``device``, a device of measured ceilings, is: the plain roofline
    bound on them (no engine's kernels, whatever engine is named), a lower bound, with that
    bound's error on the published kernel tables (docs/time-model.md: median |error| 70% on
    H100-SXM, 65% on A100-SXM-80GB, 54-91% by table, optimistic on all but a few hundred rows)."""
    return (
        f"Times are the plain roofline bound on {device}'s measured ceilings (each kernel's "
        "FLOPs at the measured peak or its bytes at the measured bandwidth, whichever is "
        "longer, plus a launch latency): nearly always a lower bound, no serving engine's "
        "kernels, so "
        "--engine changes none of them. On the published kernel tables this bound is "
        "optimistic on all but a few hundred rows: median |error| 70% on H100-SXM, 65% on "
        "A100-SXM-80GB, 54-91% by table (docs/time-model.md; mlacalc validate --profile "
        "roofline)."
    )


def step_route(
    model: ModelConfig,
    hardware: Any,
    seq_len: int,
    batch: int,
    impl: str | None = None,
    kv_dtype: str | None = None,
    engine: str | None = None,
) -> tuple[dict[str, Any], str, str]:
    """How ``model``'s decode step on one ``hardware`` under ``engine`` (None: the device's
    default) is predicted, as ``mlacalc plan`` says it: the route
    (:func:`~mlacalc.serving.provenance.prediction_route`, with the share of the step another
    engine's fits time: :func:`~mlacalc.serving.provenance.with_stand_ins`; its ``note`` is
    plan's expected-error line), the profile's name and the calibration in words (plan's
    ``calibration``: :func:`~mlacalc.serving.provenance.calibration_of` of the step's kernels,
    and what stood in for the engine)."""
    # deferred: provenance loads the serving words and the README's error tables
    from mlacalc.serving.provenance import (
        calibration_of,
        engine_profile_of,
        prediction_route,
        stand_in_parts,
        with_stand_ins,
    )

    hw = load_hardware(hardware)
    prof, name, note = engine_profile_of(None, engine, hw)
    p = step_prediction(model, hw, "decode", seq_len, batch, impl, kv_dtype, name)
    if p.profile != prof.name:
        # predict_time times a device of measured ceilings by the plain roofline on them, no
        # profile's class (plan, by the kernel model scaled to them): nothing stands in, and
        # the words are the prediction's own
        route = with_stand_ins(prediction_route(prof, hw, name, note, model), [])
        # its note: what these times are, not the kernel model's served-TPOT error
        return route | {"note": measured_bound_note(hw.name)}, p.profile, p.calibration
    timed = step_kernels_timed(model, p, seq_len, batch, impl, kv_dtype, prof.engine)
    if timed is None:
        # the step's kernels and the prediction's differ (a model the matching does not
        # cover): the route without stand-ins and the prediction's own calibration words,
        # rather than a user's command failing on it
        route = prediction_route(prof, hw, name, note, model)
        return with_stand_ins(route, []), p.profile, p.calibration + note
    route = with_stand_ins(
        prediction_route(prof, hw, name, note, model), stand_in_parts(prof, hw, timed)
    )
    _, how = calibration_of(prof, hw, timed)
    return route, prof.name, how + note


def step_kernels_timed(
    model: ModelConfig,
    p: Prediction,
    seq_len: int,
    batch: int,
    impl: str | None,
    kv_dtype: str | None,
    engine: str,
) -> list[dict[str, Any]] | None:
    """The decode step's kernels as ``p`` (its :func:`step_prediction`) timed them, each a dict
    with its ``seconds``, as plan's step breakdown gives them (an element-wise kernel that
    moves nothing runs none); None where the kernels and ``p``'s ops are not the same list."""
    # deferred: model_step loads the step's kernel builders, as step_route's imports
    from mlacalc.cost.model_step import step_kernels

    kernels = [
        k
        for k in step_kernels(
            model,
            "decode",
            seq_len,
            batch,
            None,
            impl,
            False,
            None,
            kv_dtype or "bf16",
            scope="model",
            engine=engine,
        )
        if k.kind != "elementwise" or k.bytes
    ]
    if [k.name for k in kernels] != [o.name for o in p.ops]:
        return None
    return [k.to_dict() | {"seconds": o.seconds} for k, o in zip(kernels, p.ops)]


#: How much slower than a bf16 cache's a narrower cache's decode step must be to be called
#: slower in :func:`step_warnings` (below it, and at least as slow: "no faster"): a 0.2%
#: difference was called slower (a review), far inside the kernel tables' ~5% median error
NARROW_SLOWER = 1.02


def step_warnings(
    models: dict[str, ModelConfig],
    hardware: Any,
    seq_len: int,
    batch: int,
    impl: str | None,
    kv_dtype: str = "bf16",
    engine: str | None = None,
) -> list[str]:
    """What ``mlacalc plan`` of each of ``models`` (label -> model: the source, the converted
    one) says of the device, the engine and the cache's format, in its words, said once each:
    :func:`~mlacalc.serving.provenance.device_warnings` (TensorRT-LLM on another vendor's GPU,
    a device timed without a fit of its own: not for a device of measured ceilings, which
    :func:`step_seconds` times by the plain roofline, no engine's kernels) and the engine that
    stood in, then :func:`~mlacalc.serving.plan_checks.format_warnings` (a cache the engine does
    not offer, a narrow one's stand-in kernel), as ``search`` assembles them; last, a cache
    narrower than bf16 whose decode step of one GPU here (``impl`` for an MLA model) is no
    faster than a bf16 cache's (slower past :data:`NARROW_SLOWER`), with both times (plan says
    it of its own batch and GPUs past :data:`~mlacalc.serving.plan.FP8_CACHE_SLOWER`; here of
    the step the table prints, at no gain at all: the cache's halved bytes do not make it
    faster).

    Examples
    --------
    >>> from mlacalc.models.convert import convert
    >>> m = convert("llama-3-8b", kv_lora_rank=512).model
    >>> step_warnings({"converted": m}, "MI300X", 4096, 1, "absorbed", engine="trtllm")[0][:37]
    'TensorRT-LLM runs on NVIDIA GPUs only'
    """
    # deferred: provenance and plan_checks load the serving words and the README's error tables
    from mlacalc.serving.plan_checks import format_warnings
    from mlacalc.serving.provenance import device_warnings, engine_profile_of
    from mlacalc.words.dtypes import resolve_kv_layout
    from mlacalc.words.engines import ENGINE_LABELS

    hw = load_hardware(hardware)
    prof, name, note = engine_profile_of(None, engine, hw)
    said: list[str] = []
    if not getattr(hw, "measured", False):
        device = list(device_warnings(prof, hw, name, note))
        stood = note.removeprefix("; ")
        # the stand-in said once: a device warning that names it already carries it (plan says
        # it in its times note alone)
        named = any("stand in for" in w for w in device)
        said += device if not stood or named else [*device, stood]
    for m in models.values():
        said += format_warnings(m, hw, name, kv_dtype)
    bits = resolve_kv_layout(kv_dtype).bits
    share = {8: "half the", 4: "a quarter of the"}.get(bits, f"{bits:g}/16 of the")
    if bits < 16 and not getattr(hw, "measured", False):
        for label, m in models.items():
            mi = impl if m.is_mla else None
            narrow, wide = (
                step_seconds(m, hw, "decode", seq_len, batch, mi, d, name) for d in (kv_dtype, None)
            )
            if narrow >= wide:
                # within 2% (far inside the kernel tables' error): no faster, not slower
                how = "slower than" if narrow > NARROW_SLOWER * wide else "no faster than"
                said.append(
                    f"the {kv_dtype} cache's decode kernels under {ENGINE_LABELS[name]} on "
                    f"{hw.name} are {how} a bf16 cache's: the {label} model's decode step of "
                    f"{counted(batch, 'sequence')} of {seq_len:,} tokens takes "
                    f"{narrow * 1e3:,.2f} ms, {wide * 1e3:,.2f} ms with --kv-dtype bf16, which "
                    f"holds {share} tokens in the same memory"
                )
    return list(dict.fromkeys(w for w in said if w))


def fit_warning(
    models: dict[str, ModelConfig],
    hardware: Any,
    seq_len: int,
    batch: int,
    kv_dtype: str = "bf16",
    deploy: str = "`mlacalc plan` sizes a deployment over several (convert --save, then plan "
    "the file)",
) -> str:
    """'' when one GPU of ``hardware`` holds each of ``models`` (label -> model: the source and
    the converted one) with its cache of ``batch`` sequences of ``seq_len`` tokens; otherwise
    one sentence saying which do not fit, by how much, that the step times assume it, and
    ``deploy``: where a deployment over several GPUs is sized.

    Examples
    --------
    >>> from mlacalc.models.convert import convert
    >>> c = convert("llama-3-70b", kv_lora_rank=512)
    >>> fit_warning({"source": c.source, "converted": c.model}, "H100", 32768, 8)[:46]
    'neither the source (131.42 GiB of weights + 80'
    >>> fit_warning({"source": convert("llama-3-8b").source}, "H200", 1024, 1)
    ''
    """
    device = load_hardware(hardware)
    over = []
    for label, m in models.items():
        weights = weight_bytes(m)
        cache = kv_cache(m, seq_len, batch, kv_dtype=kv_dtype).total_bytes
        if weights + cache > device.memory_bytes:
            over.append(
                f"the {label} ({human_bytes(weights)} of weights + {human_bytes(cache)} of "
                f"cache = {human_bytes(weights + cache)})"
            )
    if not over:
        return ""
    room = f"the {human_bytes(device.memory_bytes)} of one"
    if len(over) > 1:
        said = f"neither {' nor '.join(over)} fits in {room}"
    else:
        said = f"{over[0]} does not fit in {room}"
    return (
        f"{said} "
        f"{device.name} at seq_len {seq_len:,} x batch {batch:,}: the step times are those of "
        f"one GPU holding the model as if it did; {deploy}"
    )


def rank_sweep(
    model: ModelConfig | str,
    ranks: Any,
    hardware: Any = "H100",
    method: str = "transmla",
    svd: str = "joint",
    rope_dim: int | None = None,
    seq_len: int = 4096,
    batch: int = 1,
    impl: str = "absorbed",
    kv_dtype: str = "bf16",
    engine: str | None = None,
) -> list[RankRow]:
    """The source model and its conversion at each rank of ``ranks``, one row each (a rank
    given twice is timed once, where it was first given).

    Decode uses ``impl`` (``absorbed`` by default, what MLA serving runs); prefill the
    implementation the engine runs a prompt in (expanded heads; vLLM's short prompts absorbed:
    each row's ``prefill_impl`` says which). Every step time is ``engine``'s kernels (None:
    the device's default) reading the cache in ``kv_dtype``. A rank that cannot be converted
    is refused naming ``ranks``.

    Examples
    --------
    >>> rows = rank_sweep("llama-3-8b", [256, 512], seq_len=1024)
    >>> [r.cache_bytes_per_token for r in rows]    # source, then (d_c + 64) x 2 B x 32 layers
    [131072, 20480, 36864]
    """
    m = model_argument(model)
    ranks = list(dict.fromkeys(args.one_or_many("ranks", ranks, what="ranks")))
    convs = []
    for rank in ranks:
        try:
            convs.append(convert(m, method=method, kv_lora_rank=rank, rope_dim=rope_dim, svd=svd))
        except InvalidArgumentError as exc:
            if exc.argument != "kv_lora_rank":
                raise
            raise InvalidArgumentError("ranks", exc.message) from None

    def timed(model: ModelConfig, phase: str, decode_impl: str | None) -> Prediction:
        impl_of = decode_impl if phase == "decode" else None
        return step_prediction(model, hardware, phase, seq_len, batch, impl_of, kv_dtype, engine)

    src_decode, src_prefill = timed(m, "decode", None), timed(m, "prefill", None)
    rows = [
        RankRow(
            rank=0,
            model=m.name,
            cache_bytes_per_token=conversion_cost(
                convert(m, method=method, svd=svd, rope_dim=rope_dim), kv_dtype=kv_dtype
            ).source_cache_bytes_per_token,
            params=conversion_cost(convert(m, method=method, rope_dim=rope_dim)).source_params,
            decode_attention_flops=attention_flops(m, "decode", seq_len, batch),
            decode_s=src_decode.seconds,
            prefill_s=src_prefill.seconds,
            decode_impl=src_decode.impl,
            prefill_impl=src_prefill.impl,
        )
    ]
    for c in convs:
        cc = conversion_cost(c, "decode", seq_len, batch, impl=impl, kv_dtype=kv_dtype)
        decode, prefill = timed(c.model, "decode", impl), timed(c.model, "prefill", impl)
        rows.append(
            RankRow(
                rank=c.kv_lora_rank,
                model=c.model.name,
                cache_bytes_per_token=cc.cache_bytes_per_token,
                params=cc.served_params,  # as report counts the saved model
                decode_attention_flops=cc.flops,
                decode_s=decode.seconds,
                prefill_s=prefill.seconds,
                published_cache_bytes_per_token=cc.published_cache_bytes_per_token,
                decode_impl=decode.impl,
                prefill_impl=prefill.impl,
            )
        )
    return rows
