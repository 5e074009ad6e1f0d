"""The registry of model families: what each Hugging Face ``model_type`` means to mlacalc.

A family unit is one small module in :mod:`mlacalc.models.hf` that calls :func:`register` with a
:class:`Family`. The unit says which ``model_type`` values it covers, which parameter
layout they follow, how its ``config.json`` spells the schema's fields, which values
an absent field takes (the Hugging Face class defaults of that model type, each
listed in ``ModelConfig.derived`` when used), and which settings it refuses because
mlacalc does not model them. The schema and the loaders consult the registry; they
never test a model_type by name.

This module imports nothing from the rest of mlacalc, so the schema can import it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from difflib import get_close_matches
from typing import Any

__all__ = [
    "Default",
    "Family",
    "HFInput",
    "families",
    "family_of",
    "model_types",
    "nearest_model_type",
    "register",
    "resolve_model_type",
]

#: Parameter layouts the counting code knows (see mlacalc.cost.params and mlacalc.cost.engine).
LAYOUTS = ("llama", "gpt2", "falcon", "deepseek", "minicpm3")

#: Problems found while translating: (field, message, fix or None).
Problem = tuple[str, str, "str | None"]


@dataclass(frozen=True)
class Default:
    """The value an absent field takes, and why (the text goes into ``derived``).

    Either ``value`` is the constant, or ``rule`` computes it from the other fields;
    ``needs`` names the fields the rule reads (the rule is skipped, and the field
    reported missing, when one of them is absent or invalid).
    """

    why: str
    value: Any = None
    rule: Callable[[Mapping[str, Any]], Any] | None = None
    needs: tuple[str, ...] = ()

    def resolve(self, values: Mapping[str, Any]) -> Any:
        """The default for these (already validated) values."""
        return self.rule(values) if self.rule is not None else self.value


@dataclass(frozen=True)
class HFInput:
    """A ``config.json`` key that is not a schema field but that the translation reads.

    ``kind`` is ``"boolean"``, ``"string"`` or ``"mapping"``; a value of another type is
    an error naming the key (``null`` reads as absent). ``refuse_when`` is a value
    whose presence the family refuses, with ``refuse_why`` as the message.
    """

    kind: str
    meaning: str
    refuse_when: Any = None
    refuse_why: str = ""


@dataclass(frozen=True)
class Family:
    """One model family: its ``model_type`` values and how to read their configurations.

    Attributes
    ----------
    name
        Short name of the unit (``"llama"``).
    model_types
        The Hugging Face ``model_type`` values it covers (the names YAML files use).
    layout
        Parameter layout the counting code follows: one of :data:`LAYOUTS`.
    hf_class
        The Hugging Face configuration class whose defaults ``defaults`` follows
        (per model_type when they differ: see ``defaults_by_type``).
    aliases
        Other ``model_type`` spellings that mean a covered one
        (``{"RefinedWebModel": "falcon"}``).
    renames
        ``config.json`` key -> schema field, for keys this family spells differently.
    defaults
        Schema field -> :class:`Default`, applied to YAML files and ``config.json``
        alike when the field is absent.
    defaults_by_type
        model_type -> further defaults that override ``defaults`` for that type.
    required
        Schema fields a file of this family must state beyond the common ones.
    inputs
        ``config.json`` keys the translation reads that are not schema fields.
    ignored
        Schema fields this family's ``config.json`` holds but the architecture does
        not use (dropped on import, with the reason in ``derived``).
    reads
        Further ``config.json`` keys the ``translate`` hook reads (neither schema fields nor
        ``inputs``): known keys, never taken for a misspelling of a field.
    translate
        Optional hook ``translate(data, raw, derived, problems)`` for rules a table
        cannot say (Falcon's ``multi_query``): ``data`` is the config.json mapping,
        ``raw`` the schema fields read so far (edit it in place), ``derived`` the
        notes list, ``problems`` the list of (field, message, fix) to report.
    moe
        Whether the layout may carry routed experts.
    requires_experts
        Whether every model of the family has routed experts (Mixtral).
    mtp
        Whether multi-token-prediction modules are modelled for it.
    rope
        Whether attention uses rotary embeddings (their widths must be even).
    mla
        Whether the architecture's attention is MLA (its files must state the MLA widths).
    linear
        Whether the architecture has linear-attention layers (its files must state the
        ``linear_*`` widths; no other family may).
    archs
        model_type -> what it adds to its base layout, layer by layer (an
        :class:`~mlacalc.models.architecture.Arch`: the cost rules of its reference
        implementation); a type without one follows its layout's base rules.
    """

    name: str
    model_types: tuple[str, ...]
    layout: str
    hf_class: str
    aliases: Mapping[str, str] = field(default_factory=dict)
    renames: Mapping[str, str] = field(default_factory=dict)
    defaults: Mapping[str, Default] = field(default_factory=dict)
    defaults_by_type: Mapping[str, Mapping[str, Default]] = field(default_factory=dict)
    required: tuple[str, ...] = ()
    inputs: Mapping[str, HFInput] = field(default_factory=dict)
    ignored: Mapping[str, str] = field(default_factory=dict)
    reads: tuple[str, ...] = ()
    translate: Callable[..., None] | None = None
    moe: bool = False
    requires_experts: bool = False
    mtp: bool = False
    rope: bool = True
    mla: bool = False
    linear: bool = False
    archs: Mapping[str, Any] = field(default_factory=dict)

    def defaults_for(self, model_type: str) -> dict[str, Default]:
        """Every default rule that applies to ``model_type``."""
        out = dict(self.defaults)
        out.update(self.defaults_by_type.get(model_type, {}))
        return out


_FAMILIES: dict[str, Family] = {}
_BY_TYPE: dict[str, Family] = {}
_ALIASES: dict[str, str] = {}


def register(family: Family) -> Family:
    """Add a family unit to the registry (each family module calls this once)."""
    if family.layout not in LAYOUTS:
        raise ValueError(f"family {family.name}: layout {family.layout!r} is not one of {LAYOUTS}")
    for model_type in family.model_types:
        other = _BY_TYPE.get(model_type)
        if other is not None and other.name != family.name:
            raise ValueError(
                f"model_type {model_type!r} is registered by {other.name} and {family.name}"
            )
        _BY_TYPE[model_type] = family
    for alias, target in family.aliases.items():
        if target not in family.model_types:
            raise ValueError(
                f"family {family.name}: alias {alias!r} names {target!r}, which it does not cover"
            )
        _ALIASES[alias] = target
    _FAMILIES[family.name] = family
    return family


def families() -> dict[str, Family]:
    """Every registered family unit, by unit name."""
    return dict(_FAMILIES)


def model_types() -> list[str]:
    """Every ``model_type`` a YAML file may name, in registration order of the units."""
    return list(_BY_TYPE)


def resolve_model_type(model_type: str) -> str:
    """The covered model_type that ``model_type`` (possibly an alias) means; itself if unknown."""
    return _ALIASES.get(model_type, model_type)


def family_of(model_type: str) -> Family | None:
    """The family unit covering ``model_type``, or None when no unit does."""
    return _BY_TYPE.get(_ALIASES.get(model_type, model_type))


def nearest_model_type(model_type: str) -> str | None:
    """The supported model_type closest in spelling to an unknown one."""
    known = list(_BY_TYPE) + list(_ALIASES)
    close = get_close_matches(model_type.lower().replace("-", "_"), known, n=1, cutoff=0.5)
    return resolve_model_type(close[0]) if close else None
