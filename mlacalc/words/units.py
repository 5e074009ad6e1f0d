"""Human-readable units for reports: bytes in binary units, counts and FLOPs in SI units,
seconds scaled to s, ms, us or ns."""

from __future__ import annotations

__all__ = ["counted", "human_bytes", "human_seconds", "human_si", "lines_words"]


def counted(n: int, noun: str) -> str:
    """``n`` with thousands separators and ``noun``, plural unless ``n`` is one.

    >>> counted(1, "sequence"), counted(2048, "sequence")
    ('1 sequence', '2,048 sequences')
    """
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def lines_words(lines: tuple[int, ...] | list[int], file: str = "") -> str:
    """A file's rows by their lines, the first five: ``" (line 4)"``, ``" (k.csv lines 4, 9,
    12 ...)"``, or ``""`` for none.

    >>> lines_words((4,)), lines_words((2, 3, 5, 7, 11, 13), "k.csv"), lines_words(())
    (' (line 4)', ' (k.csv lines 2, 3, 5, 7, 11 ...)', '')
    """
    if not lines:
        return ""
    shown = ", ".join(str(i) for i in lines[:5]) + (" ..." if len(lines) > 5 else "")
    return f" ({file + ' ' if file else ''}{'line' if len(lines) == 1 else 'lines'} {shown})"


def human_bytes(n: float) -> str:
    """``73685532672`` -> ``'68.62 GiB'`` (KiB = 2^10 B, GiB = 2^30 B)."""
    units = ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB")
    value, i = float(n), 0
    while abs(value) >= 1024 and i < len(units) - 1:
        value /= 1024
        i += 1
    return f"{int(value)} B" if i == 0 else f"{value:,.2f} {units[i]}"


def human_seconds(t: float) -> str:
    """``0.0123`` -> ``'12.30 ms'``: seconds in s, ms, us or ns, three significant figures.

    >>> human_seconds(0.1146), human_seconds(9321.6552), human_seconds(3.2e-6)
    ('114.60 ms', '9,321.66 s', '3.20 us')
    >>> human_seconds(0.0)
    '0 s'
    """
    if t == 0:  # nothing (no recompute, no communication): no unit to scale to
        return "0 s"
    for scale, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "us")):
        if abs(t) >= scale:
            return f"{t / scale:,.2f} {unit}"
    return f"{t / 1e-9:,.2f} ns"


def human_si(n: float, unit: str = "") -> str:
    """``671026419200`` -> ``'671.03 G'`` (G = 10^9), with an optional unit (``'FLOP/s'``)."""
    prefixes = ("", "K", "M", "G", "T", "P", "E", "Z")
    value, i = float(n), 0
    while abs(value) >= 1000 and i < len(prefixes) - 1:
        value /= 1000
        i += 1
    text = f"{int(value)}" if i == 0 else f"{value:,.2f}"
    return f"{text} {prefixes[i]}{unit}".rstrip()


def request_count(n: float) -> str:
    """A mean count of requests as it is, to two decimals where it is not whole: a queue of
    0.26 requests is not "0" (1,024; 15.74; 0.26)."""
    whole = round(n)
    if abs(n - whole) < 5e-3:
        return f"{whole:,.0f}"
    return f"{n:,.2f}"
