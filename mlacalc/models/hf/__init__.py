"""Hugging Face ``config.json`` import, one model family per module.

Each family is a small module here (``llama.py``, ``deepseek.py``, ...) that registers a
:class:`Family`: the ``model_type`` values it covers, the parameter layout they follow,
the keys its ``config.json`` spells differently, the Hugging Face class defaults for
absent fields, and the settings mlacalc refuses. Adding a family is adding a module;
:func:`import_hf_config` and the schema find it through the registry.
"""

from __future__ import annotations

import importlib
import pkgutil

from mlacalc.models.hf._translate import import_hf_config, known_fields
from mlacalc.models.registry import (
    COUNT_FREE,
    LAYOUTS,
    Default,
    Family,
    HFInput,
    families,
    family_of,
    model_types,
    nearest_model_type,
    register,
    resolve_model_type,
)

__all__ = [
    "COUNT_FREE",
    "LAYOUTS",
    "Default",
    "Family",
    "HFInput",
    "families",
    "family_of",
    "import_hf_config",
    "known_fields",
    "markdown_defaults",
    "markdown_spellings",
    "model_types",
    "nearest_model_type",
    "register",
    "resolve_model_type",
]


def markdown_defaults() -> str:
    """The table of every family's rules for absent fields, as ``docs/config-schema.md``
    shows it; a test keeps the page equal to it."""
    rows = ["| model_type | layout | field | when absent | why |", "|---|---|---|---|---|"]
    for unit in families().values():
        for model_type in unit.model_types:
            for name, rule in unit.defaults_for(model_type).items():
                value = "rule" if rule.rule is not None else f"`{rule.value!r}`"
                rows.append(f"| {model_type} | {unit.layout} | `{name}` | {value} | {rule.why} |")
    return "\n".join(rows)


def markdown_spellings() -> str:
    """The table of each family's ``config.json`` spellings, read inputs and refusals."""
    rows = ["| model_type | config.json key | read as |", "|---|---|---|"]
    for unit in families().values():
        types = ", ".join(unit.model_types)
        for key, target in unit.renames.items():
            rows.append(f"| {types} | `{key}` | `{target}` |")
        for key, spec in unit.inputs.items():
            refuse = (
                f"; `{key}: {str(spec.refuse_when).lower()}` is refused ({spec.refuse_why})"
                if spec.refuse_when is not None
                else ""
            )
            rows.append(f"| {types} | `{key}` | {spec.kind}: {spec.meaning}{refuse} |")
        for key in unit.reads:
            if key not in unit.inputs:
                rows.append(f"| {types} | `{key}` | read by the family's rules (see its unit) |")
        for key, why in unit.ignored.items():
            rows.append(f"| {types} | `{key}` | ignored: {why} |")
        for key, why in unit.irrelevant.items():
            rows.append(f"| {types} | `{key}` | changes no count: {why} |")
        for alias, target in unit.aliases.items():
            rows.append(f"| {alias} | `model_type` | means `{target}` |")
    return "\n".join(rows)


def _register_all() -> None:
    """Import every family module of this package once: each registers its family."""
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if not info.name.startswith("_"):
            importlib.import_module(f"{__name__}.{info.name}")


_register_all()
