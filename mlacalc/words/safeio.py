"""One bounded, safe reader for the YAML and JSON files mlacalc reads.

Model files, Hugging Face ``config.json`` files, hardware files and the metadata of
measured sets all go through :func:`read_data` (a path) or :func:`parse_data` (text
already in memory, such as an upload). Every bound is checked before the parsing
work can grow with it:

- the file is at most :data:`MAX_BYTES` (1 MiB) and UTF-8 text;
- YAML is read with the safe loader only: a tag that would build a Python object is
  refused, never run;
- YAML aliases are counted while the event stream is read: the document, with every
  alias expanded, may hold at most :data:`MAX_NODES` values (the "billion laughs"
  file fails after a few hundred events, not after expanding);
- collections nest at most :data:`MAX_DEPTH` levels (JSON is scanned before
  ``json.loads`` sees it, so deep brackets never reach Python's recursion limit);
- an integer has at most :data:`MAX_INT_DIGITS` digits;
- a key appears at most once in a mapping;
- JSON's non-standard ``NaN`` and ``Infinity`` are refused.

A violation is a :class:`~mlacalc.words.errors.ConfigError` naming the file, and the
line where the parser knows it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

from mlacalc.words.errors import ConfigError

__all__ = [
    "MAX_BYTES",
    "MAX_DEPTH",
    "MAX_INT_DIGITS",
    "MAX_NODES",
    "parse_data",
    "parse_json",
    "parse_yaml",
    "read_data",
    "read_text",
]

#: Largest file read, in bytes (1 MiB).
MAX_BYTES = 1 << 20
#: Deepest nesting of mappings and lists.
MAX_DEPTH = 64
#: Most values (scalars and collections) in one document with every alias expanded.
MAX_NODES = 200_000
#: Most digits in one integer.
MAX_INT_DIGITS = 40

_YAML_INT = re.compile(r"[-+]?(0|[1-9][0-9_]*|0o?[0-7_]+|0x[0-9a-fA-F_]+|0b[01_]+)")
_PLAIN_TAGS = frozenset(
    "tag:yaml.org,2002:" + t for t in ("str", "int", "float", "bool", "null", "seq", "map", "merge")
)


def read_text(path: str | Path, *, limit: int = MAX_BYTES, what: str = "files") -> str:
    """The UTF-8 text of ``path``, refused when it is over ``limit`` bytes or unreadable."""
    path = Path(path)
    try:
        size = path.stat().st_size
        if size > limit:
            raise ConfigError(
                f"is {size:,} bytes; {what} are at most {_size(limit)}",
                source=str(path),
                fix="point at the right file",
            )
        with path.open("rb") as fh:
            raw = fh.read(limit + 1)
    except ConfigError:
        raise
    except OSError as exc:
        raise ConfigError(f"cannot be read ({exc.strerror or exc})", source=str(path)) from None
    if len(raw) > limit:  # grew while we looked
        raise ConfigError(
            f"is over {_size(limit)}; {what} are at most {_size(limit)}", source=str(path)
        )
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError("is not UTF-8 text", source=str(path)) from None


def read_data(path: str | Path, *, limit: int = MAX_BYTES, what: str = "files") -> Any:
    """Read and parse a YAML or JSON file within every bound (JSON when it ends in ``.json``)."""
    text = read_text(path, limit=limit, what=what)
    return parse_data(text, str(path), json_text=str(path).endswith(".json"))


def parse_data(
    text: str, origin: str, *, json_text: bool | None = None, nonfinite: bool = False
) -> Any:
    """Parse YAML or JSON text within every bound.

    ``json_text`` None decides by the text: an object that starts with ``{`` is JSON
    (JSON is a subset of YAML, but the JSON parser gives better messages for it).
    """
    if len(text) > MAX_BYTES:
        raise ConfigError(
            f"is {len(text):,} characters; files are at most {_size(MAX_BYTES)}", source=origin
        )
    if json_text is None:
        json_text = text.lstrip().startswith("{")
    return parse_json(text, origin, nonfinite=nonfinite) if json_text else parse_yaml(text, origin)


# -----------------------------------------------------------------------------------
# JSON


def parse_json(text: str, origin: str, *, nonfinite: bool = False) -> Any:
    """Parse JSON with bounded depth and integer length; duplicate keys are errors, and so are
    ``NaN`` and ``Infinity`` unless ``nonfinite`` keeps them as floats (a Hugging Face config
    may hold one in a field that changes no count: the importer decides by the field)."""
    if not text.strip():
        raise ConfigError(
            "is empty", source=origin, fix="give the file with its JSON object ({...}) in it"
        )

    refused: list[bool] = []  # set once a value is refused: only then is the tree walked

    def parse_int(digits: str) -> Any:
        count = len(digits.lstrip("-"))
        if count > MAX_INT_DIGITS:
            refused.append(True)
            return _Refused(
                f"holds an integer of {count:,} digits; at most {MAX_INT_DIGITS} are read", None
            )
        return int(digits)

    def parse_constant(name: str) -> Any:
        if nonfinite:
            return float(name)
        refused.append(True)
        return _Refused(f"holds {name}, which is not a JSON number", "write a finite number")

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in items:
            if key in out:
                raise ConfigError(
                    f"states key '{_short(key)}' twice",
                    source=origin,
                    field=_short(key),
                    fix="keep one of them",
                )
            out[key] = value
        return out

    try:
        data = json.loads(
            text, parse_int=parse_int, parse_constant=parse_constant, object_pairs_hook=pairs
        )
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"is not valid JSON at {json_error_words(exc)}",
            source=origin,
            fix="make it whole JSON: python -m json.tool on the file shows the spot",
        ) from None
    except RecursionError:  # pragma: no cover - the depth scan keeps this away
        raise ConfigError(f"nests deeper than {MAX_DEPTH} levels", source=origin) from None
    if text.count("[") + text.count("{") > MAX_DEPTH and _tree_depth(data) > MAX_DEPTH:
        _check_json_depth(text, origin)  # the scan over the text names the keys leading there
    if refused:
        _raise_refused(data, [], origin)
    return data


#: json's messages (each ends where the position would follow) in words that end as sentences
_JSON_WORDS = {
    "Unterminated string starting at": "a string opened here is never closed",
    "Expecting value": "no JSON value starts here",
    "Expecting property name enclosed in double quotes": "a key in double quotes is missing here",
    "Expecting ',' delimiter": "a ',' is missing here",
    "Expecting ':' delimiter": "a ':' is missing here",
    "Extra data": "more text follows the end of the JSON value here",
    "Invalid control character at": "a string holds a raw newline or tab here",
    "Invalid \\escape": "a backslash escape is invalid here",
}


def json_error_words(exc: json.JSONDecodeError) -> str:
    """Where and what a :class:`json.JSONDecodeError` found, as a whole sentence: json's own
    message ends mid-sentence ("Unterminated string starting at") where its position was cut
    off. A file that stops inside a value says it may be cut short."""
    what = _JSON_WORDS.get(exc.msg, exc.msg.removesuffix(" at"))
    doc = exc.doc if isinstance(exc.doc, str) else ""
    tail = doc[exc.pos :]
    if tail[:1] in ("}", "]") and doc[: exc.pos].rstrip().endswith(","):
        what = "a trailing ',' before the closing bracket here (JSON allows none)"
    ended = not tail.strip() or exc.msg.startswith("Unterminated")
    cut = " (the file may be cut short)" if ended and exc.pos > 0 else ""
    return f"line {exc.lineno}, column {exc.colno}: {what}{cut}"


class _Refused:
    """A JSON value the reader refuses, kept until its key path is known."""

    __slots__ = ("fix", "message")

    def __init__(self, message: str, fix: str | None):
        self.message, self.fix = message, fix


def _raise_refused(value: Any, path: list[str], origin: str) -> None:
    if isinstance(value, _Refused):
        raise ConfigError(value.message, source=origin, field=".".join(path) or None, fix=value.fix)
    if isinstance(value, dict):
        for key, item in value.items():
            _raise_refused(item, [*path, _short(key)], origin)
    elif isinstance(value, list):
        for item in value:
            _raise_refused(item, path, origin)


def _short(key: Any) -> str:
    text = str(key)
    return text if len(text) <= 60 else text[:57] + "..."


def _tree_depth(value: Any) -> int:
    """The nesting depth of parsed JSON (objects and arrays), walked without recursion."""
    most = 0
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        most = max(most, depth)
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return most


def _check_json_depth(text: str, origin: str) -> None:
    """Scan the brackets outside strings; past MAX_DEPTH, name the keys leading there."""
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return  # cannot nest deeper than the brackets it holds
    keys: list[str | None] = []
    in_string = escaped = False
    start = 0
    last = ""
    line = 1
    for index, char in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
                last = text[start + 1 : index]
        elif char == '"':
            in_string = True
            start = index
        elif char == ":":
            if keys:
                keys[-1] = last
        elif char in "[{":
            keys.append(None)
            if len(keys) > MAX_DEPTH:
                path = ".".join(_short(k) for k in keys[:3] if k)
                raise ConfigError(
                    f"nests deeper than {MAX_DEPTH} levels (line {line})",
                    source=origin,
                    field=path or None,
                    fix="a configuration is a flat mapping",
                )
        elif char in "]}":
            if keys:
                keys.pop()
        elif char == "\n":
            line += 1


# -----------------------------------------------------------------------------------
# YAML


def parse_yaml(text: str, origin: str) -> Any:
    """Parse YAML with the safe loader after the bounds are checked on its event stream."""
    if not text.strip():
        raise ConfigError(
            "is empty", source=origin, fix="a model file needs at least the required fields"
        )
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        _check_yaml_events(yaml.parse(text, Loader=loader), origin)
        return yaml.load(text, Loader=loader)
    except ConfigError:
        raise
    except yaml.constructor.ConstructorError as exc:
        problem = (getattr(exc, "problem", "") or "").strip()
        if "unhashable" in problem:
            raise ConfigError(
                f"has a mapping key that is not a plain value{_where(exc)}",
                source=origin,
                fix="keys are names such as hidden_size",
            ) from None
        raise ConfigError(
            f"holds a YAML tag mlacalc will not construct ({problem})",
            source=origin,
            fix="use plain values; python/object tags are never executed",
        ) from None
    except yaml.YAMLError as exc:
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        if "nesting depth" in problem:
            # PyYAML 6.0.4 and later stop a deep flow collection in the scanner, which reads
            # ahead of the events the depth check above sees: the same error, said the same way
            raise ConfigError(
                f"nests deeper than {MAX_DEPTH} levels{_where(exc)}",
                source=origin,
                fix="a configuration is a flat mapping",
            ) from None
        raise ConfigError(f"is not valid YAML{_where(exc)}: {problem}", source=origin) from None
    except (RecursionError, MemoryError):  # pragma: no cover - the event checks keep these away
        raise ConfigError("is too complex to read", source=origin) from None


class _Frame:
    """One open collection while the event stream is read."""

    __slots__ = ("anchor", "expect_key", "is_map", "key", "keys", "size")

    def __init__(self, anchor: str | None, is_map: bool):
        self.anchor = anchor
        self.size = 1
        self.is_map = is_map
        self.keys: set[Any] = set()
        self.expect_key = True
        self.key: str | None = None


def _yaml_path(stack: list[_Frame]) -> str | None:
    """The keys leading to the value being read (``text_config.hidden_size``)."""
    return ".".join(_short(f.key) for f in stack if f.is_map and f.key is not None) or None


def _check_yaml_events(events: Any, origin: str) -> None:

    anchors: dict[str, int] = {}
    stack: list[_Frame] = []
    total = 0

    def add(size: int, event: Any, key: Any = None, is_scalar_key: bool = False) -> None:
        nonlocal total
        total += size
        if total > MAX_NODES:
            raise ConfigError(
                f"expands to more than {MAX_NODES:,} values{_where(event)}",
                source=origin,
                field=_yaml_path(stack),
                fix="YAML aliases may not multiply the document",
            )
        if stack:
            frame = stack[-1]
            frame.size += size
            if frame.is_map:
                if frame.expect_key and is_scalar_key:
                    if key in frame.keys and key != "<<":
                        frame.key = key
                        raise ConfigError(
                            f"states key '{_short(key)}' twice{_where(event)}",
                            source=origin,
                            field=_yaml_path(stack),
                            fix="keep one of them",
                        )
                    frame.keys.add(key)
                    frame.key = key
                frame.expect_key = not frame.expect_key

    for event in events:
        tag = getattr(event, "tag", None)
        if tag and tag != "!" and tag not in _PLAIN_TAGS:
            raise ConfigError(
                f"holds a YAML tag mlacalc will not construct ({tag}){_where(event)}",
                source=origin,
                fix="use plain values; python/object tags are never executed",
            )
        if isinstance(event, yaml.ScalarEvent):
            value = event.value
            as_int = (not event.style and event.implicit[0]) or tag == "tag:yaml.org,2002:int"
            if as_int and len(value) > MAX_INT_DIGITS and _YAML_INT.fullmatch(value):
                raise ConfigError(
                    f"holds an integer of {len(value):,} digits; at most "
                    f"{MAX_INT_DIGITS} are read{_where(event)}",
                    source=origin,
                    field=_yaml_path(stack),
                )
            add(1, event, value, True)
            if event.anchor:
                anchors[event.anchor] = 1
        elif isinstance(event, yaml.AliasEvent):
            add(anchors.get(event.anchor, 1), event)
        elif isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            if stack and stack[-1].is_map:
                # a collection as a mapping key cannot be checked for duplicates (it is refused
                # later as unhashable); a collection as a value just flips the key/value state
                stack[-1].expect_key = not stack[-1].expect_key
            stack.append(_Frame(event.anchor, isinstance(event, yaml.MappingStartEvent)))
            if len(stack) > MAX_DEPTH:
                raise ConfigError(
                    f"nests deeper than {MAX_DEPTH} levels{_where(event)}",
                    source=origin,
                    field=_yaml_path(stack[:4]),
                    fix="a configuration is a flat mapping",
                )
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            frame = stack.pop()
            if frame.anchor:
                anchors[frame.anchor] = frame.size
            total += 1
            if total > MAX_NODES:
                raise ConfigError(
                    f"expands to more than {MAX_NODES:,} values{_where(event)}",
                    source=origin,
                    field=_yaml_path(stack),
                    fix="YAML aliases may not multiply the document",
                )
            if stack:
                stack[-1].size += frame.size


def _where(thing: Any) -> str:
    mark = getattr(thing, "problem_mark", None) or getattr(thing, "start_mark", None)
    return f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""


def _size(limit: int) -> str:
    if limit % (1 << 20) == 0:
        return f"{limit >> 20} MiB"
    return f"{limit:,} bytes"
