"""The app's scenario in the URL: every query value checked, a rejected or clamped one noted.

Widgets take their first value from the URL (``?model=llama-3-70b&seq_len=32768``) and the
app writes the current choices back, so a link reproduces the scenario. A value that does
not parse, is not among the choices, or lies outside the widget's range never reaches a
widget: it is replaced (by the default, or clamped to the range) and a notice naming the
parameter says so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

T = TypeVar("T")

#: Longest URL value read; anything longer is refused before parsing.
MAX_VALUE_CHARS = 64


class UrlState:
    """Typed, bounded reads of URL query parameters, collecting a notice per rejected value."""

    def __init__(self, params: Mapping[str, Any]):
        self.params = params
        self.notices: list[str] = []
        #: the keys whose repetition was noted already
        self.repeated: set[str] = set()

    def describe(self, name: str) -> str:
        """``'name=value'`` for a notice, or ``'name'`` alone when the value is too long."""
        text = str(self._last(name) or "").strip()
        return f"'{name}'" if len(text) > MAX_VALUE_CHARS else f"'{name}={text}'"

    def _raw(self, name: str) -> str | None:
        value = self._last(name)
        if value is None:
            return None
        text = str(value).strip()
        if len(text) > MAX_VALUE_CHARS:
            self.notices.append(
                f"URL parameter '{name}' is longer than {MAX_VALUE_CHARS} characters; ignored."
            )
            return None
        return text

    def _last(self, name: str) -> Any:
        """The value of ``name``; a key given more than once is read as its last value, with a
        notice naming every value (once per key)."""
        get_all = getattr(self.params, "get_all", None)
        values = list(get_all(name)) if get_all else []
        if not values:
            value = self.params.get(name)
            values = list(value) if isinstance(value, (list, tuple)) else [value]
        values = [v for v in values if v is not None]
        if not values:
            return None
        if len(values) > 1 and name not in self.repeated:
            self.repeated.add(name)
            shown = ", ".join(str(v)[:MAX_VALUE_CHARS] for v in values[:8])
            self.notices.append(
                f"URL parameter '{name}' is given {len(values)} times ({shown}); "
                f"using the last, {str(values[-1])[:MAX_VALUE_CHARS]}."
            )
        return values[-1]

    def integer(self, name: str, default: int | None, lo: int, hi: int) -> int | None:
        """A whole number in [lo, hi]; outside it is clamped (either side, with a notice), a
        non-number falls back to ``default`` (None: an empty box, said so)."""
        text = self._raw(name)
        if text is None:
            return default
        try:
            value = int(text.replace("_", "").replace(",", ""), 10)
        except ValueError:
            value = _size(text)  # 128k, 1M: as the command line reads sizes
            if value is None:
                self.notices.append(
                    f"URL parameter '{name}={text}' is not a whole number (or a size such as "
                    f"128k); {_fallback(default, '{:,}')}."
                )
                return default
        if value < lo:
            self.notices.append(
                f"URL parameter '{name}={text}' is below the smallest value {lo:,}; "
                f"clamped to {lo:,}."
            )
            return lo
        if value > hi:
            self.notices.append(
                f"URL parameter '{name}={text}' is above the largest value {hi:,}; "
                f"clamped to {hi:,}."
            )
            return hi
        return value

    def number(self, name: str, default: float | None, lo: float, hi: float) -> float | None:
        """A finite number in [lo, hi]; outside it is clamped, a non-number falls back to
        ``default`` (None: an empty box, said so)."""
        text = self._raw(name)
        if text is None:
            return default
        try:
            value = float(text)
        except ValueError:
            value = float("nan")
        if value != value or value in (float("inf"), float("-inf")):
            self.notices.append(
                f"URL parameter '{name}={text}' is not a number; {_fallback(default, '{}')}."
            )
            return default
        if not lo <= value <= hi:
            clamped = min(hi, max(lo, value))
            self.notices.append(
                f"URL parameter '{name}={text}' is outside {lo}..{hi}; clamped to {clamped}."
            )
            return clamped
        return value

    def choice(
        self,
        name: str,
        choices: Sequence[T],
        default: T,
        what: str = "value",
        aliases: Mapping[str, T] | None = None,
    ) -> T:
        """One of ``choices`` (compared as text, case-insensitively), or the one an alias
        names (``H200-SXM`` for ``H200``, as the command line reads it, with a notice);
        otherwise the default."""
        text = self._raw(name)
        if text is None:
            return default
        for c in choices:
            if str(c).lower() == text.lower():
                return c
        target = (aliases or {}).get(text.lower())
        if target is not None and target in choices:
            self.notices.append(f"URL parameter '{name}={text}' means {target}.")
            return target
        shown = ", ".join(str(c) for c in list(choices)[:12])
        more = ", ..." if len(choices) > 12 else ""
        self.notices.append(
            f"URL parameter '{name}={text}' is not a known {what} ({shown}{more}); using {default}."
        )
        return default

    def flag(self, name: str, default: bool = False) -> bool:
        """``1``/``true``/``yes`` or ``0``/``false``/``no``."""
        text = self._raw(name)
        if text is None:
            return default
        if text.lower() in ("1", "true", "yes", "on"):
            return True
        if text.lower() in ("0", "false", "no", "off"):
            return False
        self.notices.append(f"URL parameter '{name}={text}' is not true or false; using {default}.")
        return default


def _size(text: str) -> int | None:
    """``128k`` -> 131072 (k = 1024, as ``mlacalc`` sizes are read), or None."""
    import click

    from mlacalc.cli.common import SIZE

    try:
        return SIZE.convert(text, None, None)
    except click.BadParameter:
        return None


def _fallback(default: Any, fmt: str) -> str:
    """What a URL value that does not parse falls back to, in a notice's words: ``using 2,000``,
    or ``leaving the box empty`` for a box with no default (a price, the requests in flight)."""
    return "leaving the box empty" if default is None else "using " + fmt.format(default)
