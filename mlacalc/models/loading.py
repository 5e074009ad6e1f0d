"""Loading model files: the shipped index, :func:`load_model` and in-memory uploads.

The schema and its validation live in :mod:`mlacalc.models.schema`, Hugging Face import in
:mod:`mlacalc.models.hf` (one module per model family), and the bounded YAML/JSON reader in
:mod:`mlacalc.words.safeio`; this module finds and reads the files. The names it has always
offered (``ModelConfig``, ``model_from_dict``, ``import_hf_config``, ``FIELDS``,
``MODEL_TYPES``) are re-exported here.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

from mlacalc.data import MODELS
from mlacalc.models.hf import family_of, import_hf_config, model_types
from mlacalc.models.quantization import quant_config_name
from mlacalc.models.schema import FIELDS, ModelConfig, model_from_dict
from mlacalc.words import safeio
from mlacalc.words.arguments import show_value
from mlacalc.words.errors import ConfigError, InvalidArgumentError, UnknownModelError

__all__ = [
    "FIELDS",
    "MODEL_TYPES",
    "ModelConfig",
    "beyond_positions",
    "import_hf_config",
    "load_model",
    "model_argument",
    "model_from_dict",
    "parse_config_text",
    "parse_upload",
    "quant_config_beside",
    "shipped_models",
]


#: model_type -> parameter layout it follows, from the family units in mlacalc.models.hf.
MODEL_TYPES: dict[str, str] = {t: family_of(t).layout for t in model_types()}  # type: ignore[union-attr]


# -----------------------------------------------------------------------------------
# loading files


def beyond_positions(model: ModelConfig, context: int) -> str | None:
    """The notice for a context longer than the model's ``max_position_embeddings`` ("context
    32,768 exceeds the model's max_position_embeddings (8,192)"), or None within it: a
    warning, not an error (the counts still hold), in plan, the CLI and the app alike."""
    most = getattr(model, "max_position_embeddings", None)
    if not most or context <= most:
        return None
    return f"context {context:,} exceeds the model's max_position_embeddings ({most:,})"


def _shipped_dir() -> Path:
    return MODELS


_INDEX: dict[str, Path] | None = None


def _index() -> dict[str, Path]:
    """Map every shipped name and alias to its file (read once, on first use)."""
    global _INDEX
    if _INDEX is None:
        index: dict[str, Path] = {}
        for path in sorted(_shipped_dir().glob("*.yaml")):
            index[path.stem] = path
            for alias in _read_aliases(path):
                index[alias] = path
        _INDEX = index
    return _INDEX


def _read_aliases(path: Path) -> list[str]:
    # A cheap scan for the "aliases:" line, so listing names does not parse every file.
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("aliases:"):
            body = line.split(":", 1)[1].strip().strip("[]")
            return [a.strip().strip("'\"").lower() for a in body.split(",") if a.strip()]
    return []


def _is_shipped_file(key: str) -> bool:
    if not key or len(key) > 200 or "/" in key or os.sep in key or "\0" in key:
        return False
    try:
        return (_shipped_dir() / f"{key}.yaml").is_file()
    except (OSError, ValueError):
        return False


def shipped_models() -> list[str]:
    """Names of the models shipped in ``model_configs/`` (aliases excluded)."""
    return sorted(p.stem for p in _shipped_dir().glob("*.yaml"))


_YAML_LIMIT = safeio.MAX_BYTES


def shipped_aliases() -> dict[str, str]:
    """Other names of shipped models, each to its model's name (``deepseek-r1`` ->
    ``deepseek-v3``), as :func:`load_model` reads them."""
    return {key: path.stem for key, path in _index().items() if key != path.stem}


def read_text(path: str | os.PathLike) -> str:
    """The text of a model or hardware file, within the reader's size bound."""
    return safeio.read_text(path, what="model files")


def parse_yaml_text(text: str, origin: str) -> Any:
    """Parse YAML with the bounded safe reader (:func:`mlacalc.words.safeio.parse_yaml`)."""
    return safeio.parse_yaml(text, origin)


#: keys every Hugging Face config.json has and an mlacalc model file never does
_HF_MARKERS = ("architectures", "transformers_version", "_name_or_path", "torch_dtype")


def parse_config_text(
    text: str,
    origin: str,
    *,
    shipped: bool = False,
    quant_text: str | None = None,
    quant_origin: str = "hf_quant_config.json",
) -> ModelConfig:
    """Build a config from the text of a YAML model file or a Hugging Face config.json
    (with ``quant_text``, the ModelOpt ``hf_quant_config.json`` published beside it)."""
    stripped = text.lstrip()
    is_json = origin.endswith(".json") or stripped.startswith("{")
    if is_json and origin.lower().endswith((".yaml", ".yml")):
        # a YAML file in flow style ({a: 1, ...}) starts like JSON: JSON when it is JSON (its
        # messages are clearer), else YAML, which the extension says the file is
        try:
            data = safeio.parse_json(text, origin)
        except ConfigError:
            data = safeio.parse_yaml(text, origin)
    else:
        data = safeio.parse_data(text, origin, json_text=is_json, nonfinite=is_json)
    if data is None:
        raise ConfigError(
            "is empty", source=origin, fix="a model file needs at least the required fields"
        )
    if is_json and isinstance(data, dict) and "model_type" in data and "name" not in data:
        quant = None if quant_text is None else safeio.parse_json(quant_text, quant_origin)
        return import_hf_config(data, origin, hf_quant=quant, hf_quant_origin=quant_origin)
    if (
        is_json
        and isinstance(data, dict)
        and "name" not in data
        and any(k in data for k in _HF_MARKERS)
    ):
        # a Hugging Face config.json without its model_type: say that, not every field
        arch = data.get("architectures")
        hint = (
            f" (its architectures: {', '.join(map(str, arch))})" if isinstance(arch, list) else ""
        )
        raise ConfigError(
            f"looks like a Hugging Face config.json but has no model_type{hint}",
            source=origin,
            field="model_type",
            fix='add the family\'s model_type, e.g. "model_type": "llama"; known: '
            + ", ".join(sorted(MODEL_TYPES)),
        )
    return model_from_dict(data, origin, require_source=shipped)


def parse_upload(
    raw: bytes,
    filename: str,
    limit: int = _YAML_LIMIT,
    quant: bytes | None = None,
    quant_filename: str = "hf_quant_config.json",
) -> ModelConfig:
    """A model from the bytes of an uploaded YAML file or config.json (and, with ``quant``, the
    ModelOpt ``hf_quant_config.json`` uploaded beside it): parsed in memory with the safe
    loader, never written to disk or executed; over ``limit`` bytes is refused. Text (``str``)
    is taken too, as its UTF-8 bytes; anything else is refused naming the argument.
    ``filename`` (and ``quant_filename``) is the uploaded file's name, text (a path too): its
    ending says YAML or JSON; anything else is refused naming it."""
    filename = _upload_name(filename, "filename")
    quant_filename = _upload_name(quant_filename, "quant_filename")
    text = _upload_text(raw, filename, limit, "raw")
    quant_text = None if quant is None else _upload_text(quant, quant_filename, limit, "quant")
    return parse_config_text(text, filename, quant_text=quant_text, quant_origin=quant_filename)


def _upload_name(value: Any, name: str) -> str:
    """An upload's file name as text (a path taken as its text); else one error naming it."""
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str):
        raise InvalidArgumentError(
            name,
            f"must be the uploaded file's name as text, got {show_value(value)}; give e.g. "
            '"config.json" or "my-model.yaml" (its ending says JSON or YAML)',
        )
    return value


def _upload_text(raw: Any, filename: str, limit: int, name: str) -> str:
    if isinstance(raw, str):  # the text already decoded (json.dumps of a config)
        raw = raw.encode("utf-8")
    if not isinstance(raw, (bytes, bytearray, memoryview)):
        raise InvalidArgumentError(
            name,
            f"must be the uploaded file's bytes (or its text), got {show_value(raw)}; give "
            + (
                "the dict to mlacalc.import_hf_config (a config.json) or model_from_dict"
                if isinstance(raw, dict)
                else "file.read() of the file opened in binary mode"
            ),
        )
    raw = bytes(raw)
    if len(raw) > limit:
        raise ConfigError(
            f"is {len(raw):,} bytes; model files are at most {limit:,} bytes", source=filename
        )
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError("is not UTF-8 text", source=filename) from None


def load_model(name_or_path: str | os.PathLike | ModelConfig) -> ModelConfig:
    """Load a validated model configuration.

    Parameters
    ----------
    name_or_path
        A shipped name (``"deepseek-v3"``, case-insensitive, aliases such as
        ``"deepseek-r1"`` too), the path of a YAML model file, or the path of a
        Hugging Face ``config.json``.

    Examples
    --------
    >>> m = load_model("deepseek-v3")
    >>> m.variant, m.kv_lora_rank, m.num_hidden_layers
    ('mla', 512, 61)
    """
    if isinstance(name_or_path, ModelConfig):
        return name_or_path
    if not isinstance(name_or_path, (str, os.PathLike)):
        raise ConfigError(
            f"expected a model name or a path, got {type(name_or_path).__name__}",
            source=repr(name_or_path)[:60],
        )
    text = os.fspath(name_or_path)
    key = text.strip().lower()
    index = _index()
    if key not in index and _is_shipped_file(key):
        global _INDEX
        _INDEX = None  # a file added since the index was read
        index = _index()
    if key in index:
        return _load_file(index[key], shipped=True)
    try:
        path = Path(text).expanduser()
        if path.is_dir() and (path / "config.json").is_file():
            path = path / "config.json"
        is_file = path.is_file()
    except (OSError, ValueError, RuntimeError):  # a name no file system can hold
        is_file = False
    if is_file:
        return _load_file(path)
    looks_like_path = os.sep in text or text.endswith((".yaml", ".yml", ".json"))
    try:
        folder = Path(text).expanduser().is_dir()
    except (OSError, ValueError, RuntimeError):
        folder = False
    if folder:
        raise ConfigError(
            "a folder without a config.json",
            source=text[:200],
            fix="give the checkpoint's folder (config.json in it), a config.json or a YAML file",
        )
    if looks_like_path:
        raise ConfigError(
            "no such file", source=text[:200], fix="check the path, or give a shipped model name"
        )
    raise UnknownModelError(text, shipped_models())


#: loaded files by path and content digest (a file rewritten within the same second as its
#: last read still loads anew: the key is what it holds, not its mtime)
_CACHE: dict[tuple[str, str], ModelConfig] = {}
_CACHE_LIMIT = 256


def quant_config_beside(path: Path) -> Path | None:
    """The ModelOpt ``hf_quant_config.json`` published beside a config file, where
    :func:`~mlacalc.models.quantization.quant_config_name` says it goes, if it is there."""
    candidate = quant_config_name(path)
    if candidate is None:
        return None
    try:
        return candidate if candidate.is_file() else None
    except OSError:
        return None


def _load_file(path: Path, shipped: bool = False) -> ModelConfig:
    text = read_text(path)
    quant_path = None if shipped else quant_config_beside(path)
    quant_text = None if quant_path is None else read_text(quant_path)
    digest = hashlib.sha256(text.encode("utf-8"))
    if quant_text is not None:
        digest.update(b"\0" + quant_text.encode("utf-8"))
    key = (str(path), digest.hexdigest())
    cached = _CACHE.get(key)
    if cached is None:
        cached = parse_config_text(
            text,
            str(path),
            shipped=shipped,
            quant_text=quant_text,
            quant_origin=str(quant_path) if quant_path is not None else "hf_quant_config.json",
        )
        if len(_CACHE) >= _CACHE_LIMIT:
            _CACHE.pop(next(iter(_CACHE)))
        _CACHE[key] = cached
    return cached


# the name other modules used before the reader moved to mlacalc.words.safeio
_read_text = read_text


def model_argument(value: Any, name: str = "model") -> ModelConfig:
    """The model an argument means: a :class:`ModelConfig` as is, a shipped name or a file
    path loaded; anything else an error naming ``name``."""
    if isinstance(value, ModelConfig):
        return value
    if not isinstance(value, (str, os.PathLike)) or (isinstance(value, str) and not value.strip()):
        raise InvalidArgumentError(
            name, f"must be a ModelConfig, a shipped model name or a path, got {show_value(value)}"
        )
    return load_model(value)
