"""Argument types, shared options and output of the ``mlacalc`` commands."""

from __future__ import annotations

import math
import os
import re
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import click
from click.core import ParameterSource

from mlacalc.models.architecture import count_warnings, layer_pattern
from mlacalc.models.convert import convert
from mlacalc.models.loading import beyond_positions, load_model, shipped_aliases
from mlacalc.models.quantization import unread_quantization_warning
from mlacalc.models.schema import LIST_KINDS, SPECS
from mlacalc.render import (
    Section,
    render_csv,
    render_json,
    render_markdown,
    render_rows_csv,
    render_table,
)
from mlacalc.serving.price import check_price
from mlacalc.serving.search_command import set_text
from mlacalc.words import arguments
from mlacalc.words.dtypes import DTYPE_BITS, KV_LAYOUTS, STATE_DTYPES, canonical_dtype
from mlacalc.words.engines import ENGINES, check_engine
from mlacalc.words.errors import (
    InvalidArgumentError,
    MlacalcError,
    MlacalcWarning,
    UnknownDtypeError,
)
from mlacalc.words.vocab import (
    IMPLEMENTATIONS,
    MLA_IMPLEMENTATIONS,
    MODES,
    PHASES,
    SCOPES,
    STANDARD_IMPL,
    VARIANTS,
    stamped,
)

__all__ = [
    "COUNT",
    "ENGINE",
    "FORMATS",
    "FRACTION",
    "IMPL_CHOICE",
    "KV_DTYPE",
    "MODE_CHOICE",
    "PHASE_CHOICE",
    "PREFIX_HIT",
    "RATE",
    "SCOPE_CHOICE",
    "SHARED_PREFIX",
    "SIZE",
    "VARIANT_CHOICE",
    "W_DTYPE",
    "DtypeType",
    "EngineType",
    "PrefixSizeType",
    "Section",
    "SizeType",
    "check_impl",
    "check_q_len",
    "emit",
    "format_option",
    "load",
    "note",
    "phases",
    "shared_prefix_option",
    "size_list",
    "size_text",
    "terminal_width",
    "warn",
]

FORMATS = ("table", "markdown", "json", "csv")


class SizeType(click.ParamType):
    """A token count or batch: ``131072``, ``128k`` (= 128 x 1024), ``1M`` (= 1024^2), ``1.5k``."""

    name = "size"
    _pattern = re.compile(r"^\s*(\d{1,30}(?:\.\d{1,30})?)\s*([kKmMgG]?)\s*$")
    _scale: ClassVar[dict[str, int]] = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            result = value
        else:
            match = self._pattern.match(str(value))
            if not match and self._pattern.match(str(value).strip().removeprefix("-")):
                self.fail(f"'{value}' {_POSITIVE}", param, ctx)  # was "'-3' is not a size"
            if not match:
                shown = f"{str(value)[:20]}..." if len(str(value)) > 24 else value
                self.fail(f"'{shown}' is not a size; write 131072, 128k or 1M", param, ctx)
            number, suffix = match.groups()
            scaled = float(number) * self._scale[suffix.lower()]
            if scaled != int(scaled) or ("." in number and not suffix):
                self.fail(f"'{value}' is not a whole number", param, ctx)
            result = int(scaled) if "." in number else int(number) * self._scale[suffix.lower()]
        if result <= 0:
            self.fail(f"'{value}' {_POSITIVE}", param, ctx)
        return result


_POSITIVE = "must be a positive integer"
SIZE = SizeType()


class PrefixSizeType(SizeType):
    """``--shared-prefix``: a token count as :class:`SizeType` reads it (``100k``), or 0 for
    none; every refusal names the option and the fix."""

    name = "tokens"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
        text = str(value).strip()
        if text in ("0", "0k", "0K"):
            return 0
        if self._pattern.match(text):
            try:
                return super().convert(value, param, ctx)
            except click.BadParameter:  # 1.5: no whole number of tokens
                self.fail(
                    f"'{value}' is not a whole number of tokens: write the shared prefix's "
                    "tokens as 100000 or 100k (0: none)",
                    param,
                    ctx,
                )
        self.fail(
            f"'{value}' is not a token count >= 0: write the shared prefix's tokens as 100000 "
            "or 100k (0: none)",
            param,
            ctx,
        )


#: the tokens every prompt begins with alike (``--shared-prefix``)
SHARED_PREFIX = PrefixSizeType()


def shared_prefix_option(f: Callable) -> Callable:
    """``--shared-prefix TOKENS``: the first tokens of every prompt alike, held once."""
    return click.option(
        "--shared-prefix",
        type=SHARED_PREFIX,
        default=0,
        show_default=True,
        help="Tokens every prompt begins with alike (a shared system prompt or document set), "
        "fewer than --isl: their KV is held once per attention group and found cached by "
        "every request after the first (with --isl/--osl).",
    )(f)


class FractionType(click.ParamType):
    """A finite fraction in [0, 1): ``0.1`` keeps a tenth of something aside."""

    name = "fraction"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        try:
            result = float(value)
        except (TypeError, ValueError):
            self.fail(f"'{value}' is not a number; write e.g. 0.1", param, ctx)
        if not math.isfinite(result) or not 0.0 <= result < 1.0:
            self.fail(f"'{value}' must be a fraction in [0, 1), e.g. 0.1", param, ctx)
        return result


FRACTION = FractionType()


class ArgumentType(click.ParamType):
    """A number the Python API checks with one of :mod:`mlacalc.words.arguments`' checkers
    (``check(field, value)``), refused on the command line in the same words (-1, 0, inf,
    nan and text alike: a value that is no number is said as the text it is)."""

    def __init__(self, name: str, field: str, check: Callable[[str, Any], float]):
        self.name = name
        self.field = field
        self.check = check

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        try:
            number = float(value)
        except (TypeError, ValueError):
            number = value  # said as the text it is
        try:
            return self.check(self.field, number)
        except InvalidArgumentError as exc:
            self.fail(exc.message, param, ctx)


#: requests per second (:func:`mlacalc.words.arguments.rate`)
RATE = ArgumentType("rate", "request_rate", arguments.rate)
#: the share of each prompt's tokens found cached (:func:`mlacalc.words.arguments.prefix_hit`)
PREFIX_HIT = ArgumentType("fraction", "prefix_cache_hit", arguments.prefix_hit)
#: US dollars a GPU-hour (:func:`mlacalc.serving.price.check_price`: the same words)
GPU_HOUR_PRICE = ArgumentType("usd", "--gpu-hour-price", check_price)


def gpu_hour_price_option(f: Callable) -> Callable:
    """``--gpu-hour-price USD``: what the tokens cost at the user's price (none is shipped)."""
    return click.option(
        "--gpu-hour-price",
        type=GPU_HOUR_PRICE,
        default=None,
        metavar="USD",
        help="Price of one GPU for an hour, in US dollars: adds what a million output tokens "
        "(and, with a request mix, a million tokens and a request) cost at it (none assumed).",
    )(f)


class EngineType(click.ParamType):
    """A serving engine's name in any case (``--engine SGLang``), read by
    :func:`~mlacalc.words.engines.check_engine` as the Python API reads it; ``extra``: words
    the option takes besides the engines (``none``), ``order``: the engines as the help lists
    them."""

    name = "engine"

    def __init__(self, extra: tuple[str, ...] = (), order: tuple[str, ...] = ENGINES):
        self.extra, self.order = tuple(extra), tuple(order)

    def get_metavar(self, param: click.Parameter, ctx: click.Context | None = None) -> str:
        return "[" + "|".join((*self.order, *self.extra)) + "]"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        key = str(value).strip().lower()
        if key in self.extra:
            return key
        try:
            return check_engine(str(value))
        except InvalidArgumentError:
            words = ", ".join(repr(w) for w in (*self.order, *self.extra))
            self.fail(f"{str(value)[:40]!r} is not one of {words} (any case)", param, ctx)


#: ``--engine``: one of the engines, any case.
ENGINE = EngineType()
#: A count of at least 1 (GPUs, parallel degrees, page size), bounded to keep work finite.
COUNT = click.IntRange(1, 1 << 20)


class DtypeType(click.ParamType):
    """A dtype name (``bf16``, ``fp8``, ...) or, for KV caches, a cache layout."""

    name = "dtype"

    def __init__(self, layouts: bool):
        self.layouts = layouts

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:

        key = str(value).strip().lower()
        if self.layouts and key in KV_LAYOUTS:
            return key
        try:
            return canonical_dtype(key)
        except MlacalcError:
            known = list(DTYPE_BITS) + (list(KV_LAYOUTS) if self.layouts else [])
            what = "KV dtype or layout" if self.layouts else "dtype"
            self.fail(str(UnknownDtypeError(str(value), known, what=what)), param, ctx)


KV_DTYPE = DtypeType(layouts=True)
W_DTYPE = DtypeType(layouts=False)

IMPL_CHOICE = click.Choice(list(IMPLEMENTATIONS))
PHASE_CHOICE = click.Choice([*PHASES, "both"])
MODE_CHOICE = click.Choice(list(MODES))
SCOPE_CHOICE = click.Choice(list(SCOPES))
VARIANT_CHOICE = click.Choice(list(VARIANTS))


def size_text(n: int) -> str:
    """``131072`` -> ``'128k'``, ``1048576`` -> ``'1M'`` (the form ``--seq-len`` reads)."""
    if n % 1024**2 == 0:
        return f"{n // 1024**2}M"
    if n % 1024 == 0:
        return f"{n // 1024}k"
    return str(n)


def check_impl(m: Any, impl: str | None, flag: str = "--impl") -> str | None:
    """The implementation to pass on (None = the default), refusing one the model cannot run."""
    if impl is None:
        return None
    if m.is_mla and impl == STANDARD_IMPL:
        raise click.BadParameter(
            f"'{impl}' is the implementation of MHA, GQA and MQA; {m.label} is MLA: "
            f"use one of {', '.join(MLA_IMPLEMENTATIONS)}",
            param_hint=flag,
        )
    if not m.is_mla and impl != STANDARD_IMPL:
        raise click.BadParameter(
            f"'{impl}' is an MLA implementation; {m.label} is {m.variant.upper()} "
            f"(its one implementation is '{STANDARD_IMPL}')",
            param_hint=flag,
        )
    return None if impl == STANDARD_IMPL else impl


def check_q_len(wanted: list[str], q_len: int | None) -> None:
    """``--q-len`` is needed by, and only by, ``--phase chunk``."""
    if "chunk" in wanted and q_len is None:
        raise click.BadParameter("--phase chunk needs --q-len", param_hint="--q-len")
    if "chunk" not in wanted and q_len is not None:
        has = {"prefill": "prefill has q = seq_len", "decode": "decode has q = 1"}
        raise click.BadParameter(
            "--q-len applies to --phase chunk only ("
            + "; ".join(has[w] for w in wanted if w in has)
            + "): add --phase chunk, or drop --q-len",
            param_hint="--q-len",
        )


def check_causal(wanted: list[str], causal: bool) -> None:
    """A warning when ``--causal`` is given for decode alone, where it changes nothing."""
    if causal and wanted == ["decode"]:
        warn("--causal changes nothing in decode (the one new token attends every key); ignored")


def check_context(m: Any, seq_len: int) -> None:
    """A warning (not an error: the counts still hold) when a ``--seq-len`` the user gave is
    longer than the model's ``max_position_embeddings``, as ``plan`` and ``search`` say. Call it
    once the command has done its work, so that an error is the only line it prints."""
    beyond = beyond_positions(m, seq_len)
    if beyond and given("seq_len"):
        warn(
            f"--seq-len: {beyond}: {m.label} was not trained for it; the figures are counted "
            "as if it were"
        )


def profile_option(plain: bool = False) -> Callable:
    """``--profile``: the calibration profile of every time prediction (roofline, plan,
    search); ``plain``: the command also takes ``roofline``, the plain roofline bound."""
    return click.option(
        "--profile",
        default=None,
        metavar="NAME|PATH",
        help="Calibration profile the kernel times are predicted with: a shipped profile's "
        "name (default: 'default'; a name that is none lists them), a JSON file written by "
        "mlacalc calibrate" + (", or 'roofline' for the plain roofline bound." if plain else "."),
    )


def load_profile_option(profile: str | None, plain: bool = False):
    """The profile ``--profile`` names, loaded (``"roofline"`` as is, where ``plain``); a bad
    name or file is one error naming it."""
    if profile is None:
        return None
    profile = profile.strip()
    if plain and profile == "roofline":
        return profile
    # deferred: profiles load numpy; only the commands given --profile need them
    from mlacalc.timemodel.profile import load_profile

    try:
        prof = load_profile(profile)
    except MlacalcError as exc:
        message = str(exc)
        if message.startswith("profile: "):
            message = message[len("profile: ") :]
        if profile == "roofline":
            message = "the plain roofline bound ('roofline') is a roofline command's profile only"
        elif plain and message.startswith(
            ("no profile ", "no file ")
        ):  # a name: the other name it takes
            message += ", or 'roofline' for the plain roofline bound"
        raise click.BadParameter(message, param_hint="--profile") from None
    if not prof.classes:
        # a profile with no kernel class calibrates nothing: every kernel would take the
        # datasheet defaults while the output says "calibrated on <file>"
        raise click.BadParameter(
            f"field 'classes': {profile} holds no kernel class, so it calibrates nothing; "
            "refit it with mlacalc calibrate",
            param_hint="--profile",
        )
    return prof


def given(name: str) -> bool:
    """Whether the option of parameter ``name`` was given (not left at its default)."""
    source = click.get_current_context().get_parameter_source(name)
    return source not in (None, ParameterSource.DEFAULT, ParameterSource.DEFAULT_MAP)


def serving_engine_option(f: Callable) -> Callable:
    """``--engine``: the serving engine whose kernels are predicted, fitted or validated
    (TensorRT-LLM by default, SGLang on AMD's GPUs: ``default_engine``; every output names the
    engine it is for)."""
    return click.option(
        "--engine",
        "engine",
        type=ENGINE,
        default=None,
        help=(
            "Serving engine whose kernels are timed: trtllm (default; sglang on AMD GPUs), "
            "sglang or vllm (any case)."
        ),
    )(f)


def format_option(f: Callable) -> Callable:
    """The ``--format`` option every report takes."""
    return click.option(
        "--format",
        "fmt",
        type=click.Choice(FORMATS),
        default="table",
        show_default=True,
        help="Output format. json/csv keep exact integers.",
    )(f)


def state_dtype_option(f: Callable) -> Callable:
    """``--state-dtype``: the dtype a linear or Mamba layer's recurrent state is kept in
    (float32 by default, as the Hugging Face reference keeps it; an engine may keep bf16)."""
    return click.option(
        "--state-dtype",
        type=click.Choice(list(STATE_DTYPES)),
        default=None,
        help="Dtype of a linear-attention or Mamba layer's recurrent state (default fp32, as the "
        "reference keeps it; an engine may keep bf16). Its convolution window is in the KV dtype.",
    )(f)


def recurrent_state_check(m: Any, state_dtype: str | None) -> Any:
    """``m``, having said aloud a ``--state-dtype`` that changes nothing: a model with no
    linear-attention or Mamba layer keeps no recurrent state."""
    if state_dtype is not None and not layer_pattern(m).keeps_state:
        warn(
            f"--state-dtype does not change {m.label}: it has no linear-attention or Mamba layer "
            "(no recurrent state); ignored"
        )
    return m


def engine_options(f: Callable) -> Callable:
    """``--prefill-pass`` and ``--output-lag-steps``: how an aggregated engine runs a step,
    shared by ``plan`` and ``search``."""
    f = click.option(
        "--output-lag-steps",
        type=click.IntRange(0, 1024),
        default=0,
        show_default=True,
        help="Steps between computing a token and the client getting it (an engine that "
        "launches the next step before reading tokens back): TTFT grows by that many steps "
        "(aggregated).",
    )(f)
    return click.option(
        "--prefill-pass",
        type=click.Choice(["fused", "separate"]),
        default="fused",
        show_default=True,
        help="How a step runs its new prompts (aggregated, without --chunked-prefill): fused, "
        "in the decode batch's forward pass; separate, in a pass of their own before the decode "
        "pass (the first token leaves with the step).",
    )(f)


def stored_weight_dtype(m: Any) -> str | None:
    """:func:`mlacalc.cost.quant.stored_weight_dtype` (deferred: --help stays light)."""
    from mlacalc.cost.quant import stored_weight_dtype as stored

    return stored(m)


def with_stored_dtype(point: dict[str, Any], stored: str | None) -> dict[str, Any]:
    """A plan's or search point's fields with ``weight_dtype`` the checkpoint's stored dtype
    where its weights are sized as the checkpoint stores them (``weight_format``
    ``"checkpoint ..."``); otherwise as given (the dtype asked, or the model's own)."""
    if stored and str(point.get("weight_format", "")).startswith("checkpoint "):
        return {**point, "weight_dtype": stored}
    return point


def load(
    name: str,
    flag: str | None = None,
    changes: dict[str, Any] | None = None,
    weight_dtype: str | None = None,
):
    """A model by shipped name, YAML file or Hugging Face config.json.

    With ``flag``, an error names that option (``--subs``), not only the model. ``changes``
    (``--set``: :func:`set_option`) are applied by :meth:`ModelConfig.with_changes`, checked
    as a file's fields are; a value it refuses is an error naming ``--set`` and the field.
    ``weight_dtype`` (the command's ``--weight-dtype``, given) sizes the weights: no warning
    that a quantized checkpoint's name was sized 16-bit.
    """
    try:
        with warnings.catch_warnings():  # said below, once, as the command line says warnings
            warnings.simplefilter("ignore", MlacalcWarning)
            m = load_model(name)
    except MlacalcError as exc:
        if flag is None:
            raise
        raise click.BadParameter(str(exc), param_hint=flag) from None
    # another shipped name read as its model, said as a device's alias is ('H100' means
    # H100-SXM): a trial planned glm-5 under the title glm-5.1 with no word (round 29)
    meant = shipped_aliases().get(name.strip().lower()) if isinstance(name, str) else None
    if meant:
        note(f"'{name}' means {meant}")
    if changes:
        try:
            with warnings.catch_warnings():  # said below, as loading's
                warnings.simplefilter("ignore", MlacalcWarning)
                m = m.with_changes(**changes)
        except MlacalcError as exc:
            latent = _latent_on_a_non_mla_model(name, m, changes)
            if latent:
                raise click.BadParameter(latent[1], param_hint=latent[0]) from None
            hint, message = set_error(exc, changes)
            raise click.BadParameter(message, param_hint=hint) from None
    # valid (transformers builds them), but a typo in a count leaves a declared part without
    # a layer (a MoE model every layer dense): said, not refused (a config cut to fewer layers
    # than its dense ones is one)
    for sentence in count_warnings(m):
        warn(sentence)
    unread = unread_quantization_warning(m, weight_dtype)  # a quantized name, sized 16-bit
    if unread:
        warn(unread)
    return m


def _latent_on_a_non_mla_model(
    name: str, m: Any, changes: dict[str, Any]
) -> tuple[str, str] | None:
    """``--set kv_lora_rank=N`` on a model without MLA, which the model refuses for the five
    fields MLA needs besides: one sentence pointing at ``convert`` (a trial got a line of 1,300
    characters listing each field, and no word of the command that does the conversion)."""
    rank = changes.get("kv_lora_rank")
    if type(rank) is not int or rank <= 0 or getattr(m, "kv_lora_rank", None) is not None:
        return None  # a bad rank is said as the model says it
    if set(changes) - {"kv_lora_rank", "q_lora_rank"}:
        return None  # other fields given too: each problem as the model says it
    typed = getattr(changes, "typed", {}).get("kv_lora_rank", rank)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MlacalcWarning)
            convert(m, kv_lora_rank=rank)
    except MlacalcError as exc:  # no MLA form: convert's own reason, no command that fails
        reason = " ".join(str(getattr(exc, "message", None) or exc).split())
        return (
            f"--set kv_lora_rank={typed}",
            f"{name} has no MLA layer for a latent rank to set, and it cannot be converted to "
            f"one: {reason}",
        )
    return (
        f"--set kv_lora_rank={typed}",
        f"{name} is {str(m.variant).upper()}, and a latent rank alone does not make it MLA "
        "(MLA also takes qk_nope_head_dim, qk_rope_head_dim, v_head_dim, no head_dim and as "
        "many KV heads as query heads); convert it with 'mlacalc convert "
        f"{name} --kv-lora-rank {typed} --save {Path(name).stem}-mla.yaml' and pass that file, "
        f"or compare the designs with 'mlacalc compare {name} --as-variants --kv-lora-rank "
        f"{typed}'",
    )


def set_error(exc: MlacalcError, changes: dict[str, Any]) -> tuple[str, str]:
    """A ``--set`` value the model refuses in the user's words: the option as given
    (``--set num_key_value_heads=0``) and what is wrong with its fix, each further problem
    after it the same way (a field no ``--set`` named: the one the change made wrong), not
    the library's ``with_changes(...)`` call."""
    typed = getattr(changes, "typed", {})  # the values as the user wrote them (1e3)

    def option(field: str) -> str:
        return f"--set {field}={typed.get(field) or set_text(changes[field])}"

    given = " ".join(option(k) for k in changes)
    problems = getattr(exc, "problems", None) or (
        [(exc.field, exc.message, exc.fix)] if getattr(exc, "field", None) else []
    )
    if not problems:
        return given, getattr(exc, "message", str(exc))

    def said(field: str, text: str, fix: str | None) -> tuple[str, str]:
        if field in changes and fix:  # a file's example (``field: 128``) as --set writes it
            text = text.replace(f" ({fix})", "")
            fix = fix.replace(f"{field}: ", f"--set {field}=")
        text += f" ({fix})" if fix and f"({fix})" not in text else ""
        if field in changes:
            return option(field), text
        return given, f"field '{field}' as the change leaves it: {text}"  # one not given

    first, *others = (said(*p) for p in problems)
    return first[0], first[1] + "".join(f"; {who}: {text}" for who, text in others)


def set_option(f: Callable) -> Callable:
    """``--set FIELD=VALUE``, repeatable: a new design's fields on the loaded model (``--set
    kv_lora_rank=256 --set qk_rope_head_dim=32``), through :meth:`ModelConfig.with_changes`
    (:func:`load`'s ``changes``), as ``sets``: a dict of field to value."""
    return click.option(
        "--set",
        "sets",
        multiple=True,
        metavar="FIELD=VALUE",
        callback=_parse_sets,
        help="Change a field of the model's config for a new design (repeat for several: "
        "--set kv_lora_rank=256 --set num_key_value_heads=4; a list as 4,8,12 or '[4, 8, 12]'; "
        "any schema field, docs/config-schema.md), checked as a config file's are.",
    )(f)


class SetChanges(dict):
    """``--set``'s fields and values, with ``typed``: each value as the user wrote it (an
    error echoes ``--set hidden_size=1e3``, not the parsed ``1000.0``)."""

    typed: dict[str, str]


def _parse_sets(ctx, param, values) -> dict[str, Any]:
    """``("kv_lora_rank=256", ...)`` -> ``{"kv_lora_rank": 256}``; null, true and false as
    YAML writes them, a whole number as an integer, else a number or the text."""
    out = SetChanges()
    out.typed = {}
    for text in values:
        field, eq, value = (part.strip() for part in text.partition("="))
        if not eq or not field or not value:
            raise click.BadParameter(
                f"{text!r} is not FIELD=VALUE; write e.g. --set kv_lora_rank=256",
                param_hint="--set",
            )
        _no_model_position(ctx, field, value)
        if field in out:
            raise click.BadParameter(f"{field} is set twice; give it once", param_hint="--set")
        out[field] = _set_list(field, value) if _is_list_field(field) else _set_value(value)
        out.typed[field] = value
    return out


def _model_position(key: str) -> tuple[str | None, str]:
    """A ``--set`` key split at compare's ``N:``: (the text before the colon, or None where
    there is no colon; the field after it, or the whole key). Whether the text is a position
    is :func:`_is_position`'s."""
    where, colon, field = key.partition(":")
    return (where, field) if colon else (None, key)


def _is_position(where: str | None) -> bool:
    """Whether ``where`` (before a ``--set`` key's colon) is written as a model's position:
    ASCII digits only (not '²' nor '-1')."""
    return where is not None and where.isascii() and where.isdecimal()


def _no_model_position(ctx, field: str, value: str) -> None:
    """``N:FIELD`` outside ``compare`` refused, saying whose form it is (review12: plan's
    ``--set 1:kv_lora_rank=256`` answered "not a field (did you mean 'kv_lora_rank'?)")."""
    where, name = _model_position(field)
    command = getattr(getattr(ctx, "command", None), "name", None)
    if _is_position(where) and command != "compare":
        fix = f"--set {name.strip()}={value}" if name.strip() else "--set FIELD=VALUE"
        raise click.BadParameter(
            f"{field}={value}: N:FIELD is compare's form (one model of several); here write {fix}",
            param_hint="--set",
        )


def sets_by_model(sets: dict[str, Any], count: int) -> list[SetChanges]:
    """``compare``'s ``--set``, one :class:`SetChanges` for each of its ``count`` models: a
    plain ``FIELD=VALUE`` changes every model, ``N:FIELD=VALUE`` only the N-th (from 1), so
    one model can be set against itself (``compare deepseek-v3 deepseek-v3 --set
    2:kv_lora_rank=256``). A position past the models, or a field set both ways for one
    model, is refused naming ``--set``."""
    typed = getattr(sets, "typed", {})
    out = []
    for _ in range(count):
        one = SetChanges()
        one.typed = {}
        out.append(one)
    for key, value in sets.items():
        where, field = _model_position(key)
        targets = range(count)
        if where is not None:
            if not field:
                raise click.BadParameter(
                    f"{key}={typed.get(key, value)} names no field after '{where}:'; write "
                    "N:FIELD=VALUE, e.g. --set 2:kv_lora_rank=256",
                    param_hint="--set",
                )
            if not _is_position(where) or not 1 <= int(where) <= count:
                raise click.BadParameter(
                    f"{key}={typed.get(key, value)} names model {where!r}; write N:FIELD=VALUE "
                    f"with N from 1 to {count} (the position of a model given), or FIELD=VALUE "
                    "for every model",
                    param_hint="--set",
                )
            targets = [int(where) - 1]
            text = typed.get(key, str(value))
            value = _set_list(field, text) if _is_list_field(field) else _set_value(text)
        for i in targets:
            if field in out[i]:
                raise click.BadParameter(
                    f"{field} is set twice for model {i + 1}; give it once", param_hint="--set"
                )
            out[i][field] = value
            out[i].typed[field] = typed.get(key, str(value))
    return out


def _is_list_field(field: str) -> bool:
    """Whether the schema's ``field`` holds a list (``shared_indexer_layers``, ``block_types``)."""
    return field in SPECS and SPECS[field].kind in LIST_KINDS


def _set_list(field: str, text: str) -> Any:
    """A list field's ``--set`` value: ``[4, 8, 12]`` (as a file writes it), ``4,8,12`` or
    one entry ``4``, each entry read as :func:`_set_value` reads a value (quotes around a
    word dropped: ``["mamba", "moe"]``); ``[]`` is the empty list and ``null`` stays null.
    A bracket left open or an empty entry is refused naming ``--set`` and the field."""
    body = text.strip()
    if body.lower() in ("null", "none"):
        return None
    if body.startswith("[") != body.endswith("]"):
        raise click.BadParameter(
            f"{text[:40]!r} opens or closes a bracket it does not close or open; "
            f"write e.g. --set {field}=[4,8,12] or --set {field}=4,8,12",
            param_hint=f"--set {field}",
        )
    body = body.removeprefix("[").removesuffix("]").strip()
    if not body:
        return []
    parts = [p.strip() for p in body.split(",")]
    if not all(parts):
        raise click.BadParameter(
            f"{text[:40]!r} has an empty entry; give entries separated by single commas, "
            f"e.g. --set {field}=4,8,12",
            param_hint=f"--set {field}",
        )
    return [_set_value(p[1:-1] if p[:1] == p[-1:] and p[:1] in "\"'" else p) for p in parts]


def _set_value(text: str) -> Any:
    """A ``--set`` value: ``null`` -> None, ``true`` / ``false`` -> bool, ``256`` -> 256,
    ``1e4`` -> 10000.0 (a count refuses it by name), anything else the text itself."""
    words = {"null": None, "none": None, "true": True, "false": False}
    if text.lower() in words:
        return words[text.lower()]
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def phases(phase: str) -> list[str]:
    """``both`` -> prefill and decode; any other phase stands for itself."""
    return ["prefill", "decode"] if phase == "both" else [phase]


def _parts(text: str, option: str | None, example: str) -> list[str]:
    """The comma-separated parts of a list option: none for a blank text, one trailing comma
    allowed (``1,8,32,``, a shell habit); an empty entry between two commas (``256,,512``) or
    a leading one is refused naming ``option``, not dropped."""
    if not text.strip():
        return []
    parts = [p.strip() for p in text.split(",")]
    if len(parts) > 1 and not parts[-1]:
        parts = parts[:-1]
    if not all(parts):
        shown = f"{text[:40]}..." if len(text) > 44 else text
        raise click.BadParameter(
            f"'{shown}' has an empty entry; give values separated by single commas, e.g. {example}",
            param_hint=option,
        )
    return parts


def size_list(text: str | None, option: str | None = None) -> list[int] | None:
    """``'1,8,32k'`` -> ``[1, 8, 32768]`` (token sizes); a part that is no size is refused
    naming ``option``. Counts of GPUs or sequences are :func:`count_list`'s."""
    if text is None:
        return None
    out = []
    for part in _parts(text, option, "256,512"):
        try:
            out.append(SIZE.convert(part, None, None))
        except click.BadParameter as exc:
            raise click.BadParameter(exc.message, param_hint=exc.param_hint or option) from None
    return out


def count_list(text: str, option: str, what: str, hi: int, example: str) -> list[int]:
    """``'8,16,32'`` -> ``[8, 16, 32]``: whole numbers in 1..``hi``, each a count of
    ``what`` (``GPUs``, ``sequences``), never a token size's ``1k`` (``--gpus 1k`` had run
    1,024 GPUs); a bad part is refused naming ``option`` and the fix (``example``)."""
    out = []
    for part in _parts(text, option, example):
        first = example.split(",")[0]
        fix = f"write a whole number of {what}, e.g. {first}, or a list, e.g. {example}"
        if not part.isascii() or not part.isdigit():
            shown = f"{part[:20]}..." if len(part) > 24 else part
            raise click.BadParameter(
                f"'{shown}' is not a count of {what}; {fix}", param_hint=option
            )
        n = int(part)
        if not 1 <= n <= hi:
            raise click.BadParameter(
                f"'{part}' is outside 1..{hi:,} {what}; {fix}", param_hint=option
            )
        out.append(n)
    return out


def terminal_width(default: int = 160) -> int:
    """Columns for tables: ``$COLUMNS``, else the terminal's width, else ``default``."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) >= 40:
        return int(columns)
    try:
        if sys.stdout.isatty():
            return max(40, os.get_terminal_size(sys.stdout.fileno()).columns)
    except (OSError, ValueError, AttributeError):
        pass
    return default


def note(message: str) -> None:
    """One line on stderr that explains a reading of the input (``'H100' means H100-SXM``)."""
    click.echo(f"mlacalc: note: {message}", err=True)


def warn(message: str) -> None:
    """One line on stderr: a flag or value that had no effect, said aloud."""
    click.echo(f"mlacalc: warning: {message}", err=True)


def emit(
    fmt: str,
    document: Any,
    sections: Callable[[], list[Section]],
    header: str = "",
    rows_csv: bool = False,
) -> None:
    """Print ``document`` (json/csv) or its ``sections()`` (table/markdown)."""
    if fmt == "json":
        # every JSON document names the tool's version (after its schema)
        text = render_json(stamped(document) if isinstance(document, dict) else document)
    elif fmt == "csv":
        text = render_rows_csv(document) if rows_csv else render_csv(document)
    elif fmt == "markdown":
        text = render_markdown(sections(), header)
    else:
        text = render_table(sections(), header, width=terminal_width())
    click.echo(text, nl=False)
