"""Checks of the public API's arguments, run once at the boundary before any arithmetic.

Every public function of the calculator core passes its arguments through these checks, so a
wrong type or an out-of-range value is an :class:`~mlacalc.words.errors.InvalidArgumentError` (or an
:class:`~mlacalc.words.errors.UnknownDtypeError`) naming the argument and what it accepts, never a
``TypeError`` from deep inside a formula. Names are resolved here once (a dtype to its canonical
name, a KV dtype to its :class:`~mlacalc.words.dtypes.KVLayout`, a model name to its configuration).

Upper bounds (far above any real workload, low enough that every count stays a quick exact
integer): ``seq_len`` and ``q_len`` at most :data:`MAX_TOKENS` (2^40, as context lengths in
model files), ``batch`` at most :data:`MAX_BATCH` (2^32 sequences).

>>> count("batch", 8, MAX_BATCH)
8
>>> count("batch", "8", MAX_BATCH)
Traceback (most recent call last):
...
mlacalc.words.errors.InvalidArgumentError: batch: must be a positive integer, got '8' (a str)
"""

from __future__ import annotations

import math
import numbers
import os
from collections.abc import Iterable
from typing import Any

from mlacalc.words.dtypes import KVLayout, canonical_dtype, resolve_kv_layout
from mlacalc.words.errors import InvalidArgumentError, UnknownDtypeError

__all__ = [
    "MAX_BATCH",
    "MAX_TOKENS",
    "choice",
    "count",
    "divisors",
    "dtype",
    "flag",
    "kv_layout",
    "one_or_many",
    "optional_count",
    "plain_int",
    "prefix_hit",
    "rate",
    "real",
    "show_value",
    "whole",
]

#: Tokens: ``seq_len``, ``q_len`` and windows (the bound of context lengths in model files).
MAX_TOKENS = 1 << 40
#: Sequences in a batch.
MAX_BATCH = 1 << 32


def divisors(n: int) -> list[int]:
    """The positive divisors of ``n`` (a count of GPUs a parallel degree splits), ascending;
    found up to its square root, so a count near ``1 << 20`` stays quick.

    >>> divisors(12)
    [1, 2, 3, 4, 6, 12]
    """
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted({*small, *(n // d for d in small)})


def show_value(value: Any) -> str:
    """A value as an error message quotes it (long text cut), its type after it with its
    article (``5 (an int)``, ``'x' (a str)``); None as itself."""
    text = repr(value)
    if len(text) > 40:
        text = text[:37] + "..."
    return text if value is None else f"{text} ({_a_type(value)})"


def _a_type(value: Any) -> str:
    """``value``'s type with its article, as a sentence says it: ``an int``, ``a float``."""
    name = type(value).__name__
    return ("an " if name[:1].lower() in "aeiou" else "a ") + name


def whole(value: Any) -> int | None:
    """``value`` as a Python ``int`` when it is a whole number: an ``int`` or a numpy integer
    scalar (``np.int64(256)``, what ``np.arange`` yields); otherwise None. Booleans (``True``,
    ``np.True_``) are not whole numbers here, and neither is any float, integral or not
    (``4096.0``, ``np.float64(4096)``): a float where a count belongs is most often a
    computed value that was meant to be rounded, so it is refused, not truncated. The one
    rule for every whole number mlacalc takes: model fields, API counts, GPU counts.

    >>> import numpy as np
    >>> whole(np.int64(256)), whole(True), whole(np.float64(4096))
    (256, None, None)
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        return None
    return int(value)


def plain_int(value: Any) -> Any:
    """A whole number (:func:`whole`: a numpy integer too) as the Python ``int`` it holds, any
    other value as it is: for an argument a result keeps, checked where it is used (its check
    refuses a wrong one in its own words), so ``json.dumps`` of the result never meets a
    numpy integer.

    >>> import numpy as np
    >>> type(plain_int(np.int64(2))).__name__, plain_int(1.5)
    ('int', 1.5)
    """
    number = whole(value)
    return value if number is None else number


def real(value: Any) -> float | None:
    """``value`` as a Python ``float`` when it is a real number: an ``int``, a ``float`` or a
    numpy number scalar (``np.int64(4)``, ``np.float32(0.5)``: what numpy arithmetic yields),
    any :class:`numbers.Real`; otherwise None (booleans, text, an int too large for a float).
    A narrow numpy float is read as the decimal it prints (``np.float32(0.29)`` is 0.29, not
    0.28999999165534973), as a hit or a reserve is meant. Not-finite values come back as they
    are (NaN, inf): the caller's range check refuses them in its own words. The one rule for
    every real number mlacalc takes, beside :func:`whole`.

    >>> import numpy as np
    >>> real(np.int64(4)), real(np.float32(0.29)), real(True), real("0.5")
    (4.0, 0.29, None, None)
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return None
    try:
        if isinstance(value, (numbers.Integral, float)):
            return float(value)
        if type(value).__module__ == "numpy":  # float16/float32: the decimal it prints
            return float(str(value))
        return float(value)  # a Fraction, any other Real
    except (OverflowError, ValueError):
        return None


def count(name: str, value: Any, hi: int) -> int:
    """A positive integer at most ``hi`` (numpy integers accepted; booleans are not counts)."""
    number = whole(value)
    if number is None:
        raise InvalidArgumentError(name, f"must be a positive integer, got {show_value(value)}")
    value = number
    if value <= 0:
        raise InvalidArgumentError(name, f"must be a positive integer, got {value}")
    if value > hi:
        shown = f"{value:,}" if value < 10**15 else f"a number of {len(str(value))} digits"
        raise InvalidArgumentError(
            name, f"is {shown}, above the bound of {hi:,} (2^{hi.bit_length() - 1})"
        )
    return value


def optional_count(name: str, value: Any, hi: int) -> int | None:
    """``None``, or a positive integer at most ``hi``."""
    return None if value is None else count(name, value, hi)


def flag(name: str, value: Any) -> bool:
    """``True`` or ``False`` (not 0/1, not a string)."""
    if not isinstance(value, bool):
        type_name = type(value).__name__
        if type(value).__module__ == "numpy" and type_name == "bool":  # numpy.bool
            return bool(value)
        raise InvalidArgumentError(name, f"must be True or False, got {show_value(value)}")
    return value


def choice(name: str, value: Any, options: Iterable[str], *, allow_none: bool = False) -> Any:
    """One of ``options`` (or ``None`` where ``allow_none``)."""
    options = tuple(options)
    if value is None and allow_none:
        return None
    if not isinstance(value, str) or value not in options:
        got = repr(value) if isinstance(value, str) else show_value(value)
        raise InvalidArgumentError(name, f"unknown {name} {got}; use one of " + ", ".join(options))
    return value


def dtype(name: str, value: Any, *, allow_none: bool = False) -> str | None:
    """The canonical name of a dtype (``"bfloat16"`` -> ``"bf16"``)."""
    if value is None and allow_none:
        return None
    try:
        return canonical_dtype(value)
    except UnknownDtypeError as err:
        raise UnknownDtypeError(value, err.known, err.what, argument=name) from None


def kv_layout(name: str, value: Any) -> KVLayout:
    """A KV-cache layout from a dtype name, a bit width, a layout name or a layout."""
    if isinstance(value, bool) or not isinstance(value, (str, int, KVLayout)):
        raise InvalidArgumentError(
            name,
            f"must be a dtype or layout name, a bit width or a KVLayout, got {show_value(value)}",
        )
    if isinstance(value, int) and not 0 < value <= 64:
        raise InvalidArgumentError(name, f"a bit width must be between 1 and 64, got {value}")
    try:
        return resolve_kv_layout(value)
    except UnknownDtypeError as err:
        raise UnknownDtypeError(value, err.known, err.what, argument=name) from None


def one_or_many(name: str, value: Any, *, what: str = "values") -> tuple:
    """The items of a list-valued argument as a tuple: a single string or path (which Python
    would otherwise iterate one character at a time), or any other single non-iterable value,
    is a list of one; an empty list is refused, naming the argument.

    >>> one_or_many("kv_dtypes", "fp8")
    ('fp8',)
    >>> one_or_many("batches", ())
    Traceback (most recent call last):
    ...
    mlacalc.words.errors.InvalidArgumentError: batches: is empty; give at least one of the values
    """
    if isinstance(value, (str, bytes, os.PathLike)) or not isinstance(value, Iterable):
        items: tuple = (value,)
    elif isinstance(value, dict):
        raise InvalidArgumentError(name, f"must be a list of {what}, got {show_value(value)}")
    else:
        items = tuple(value)
    if not items:
        raise InvalidArgumentError(name, f"is empty; give at least one of the {what}")
    return items


def finite_positive(name: str, value: Any) -> float:
    """A finite positive real number."""
    number = real(value)
    if number is None:
        raise InvalidArgumentError(name, f"must be a positive number, got {show_value(value)}")
    if not math.isfinite(number) or number <= 0:
        raise InvalidArgumentError(name, f"must be a finite positive number, got {number!r}")
    return number


def rate(name: str, value: Any, unit: str = "requests per second") -> float | None:
    """None, or a positive finite number of ``unit``: one refusal, in the API and the CLI
    alike, for -1, 0, inf, NaN and text (``request_rate: must be a positive finite number of
    requests per second; got -1``; they had been three: "a number in >= 0.0", "positive")."""
    if value is None:
        return None
    number = real(value)
    if number is not None and math.isfinite(number) and number > 0:
        return number
    shown = _shown(value, number)
    raise InvalidArgumentError(name, f"must be a positive finite number of {unit}; got {shown}")


def _shown(value: Any, number: float | None) -> str:
    """A refused value as :func:`rate` and :func:`prefix_hit` quote it: a number as ``%g``
    (``-1``, ``inf``), text in quotes, anything else with its type."""
    if number is not None:
        return f"{number:g}"
    return repr(value) if isinstance(value, str) else show_value(value)


def prefix_hit(name: str, value: Any) -> float:
    """The share of each prompt's tokens whose KV is found cached (prefix caching), a finite
    number in ``[0, 1)``: one refusal, in the API and the CLI alike, for -0.1, 1, 1.5, NaN,
    '50%' and words. 1 is refused: an engine always computes a prompt's last token (its
    logits give the first output token), so ``floor(hit x isl)`` is at most ``isl - 1``.
    None is 0 (no prefix cache), as the other optional arguments take None."""
    if value is None:
        return 0.0
    number = real(value)
    if number is not None and math.isfinite(number) and 0 <= number < 1:
        return abs(number)  # -0.0 read as 0.0 (it was echoed as -0.0 in the JSON)
    shown = _shown(value, number)
    raise InvalidArgumentError(
        name,
        "must be a number in [0, 1), the share of each prompt's tokens found cached (0.5, not "
        "50%; not 1: a prompt's last token is always computed); got " + shown,
    )
