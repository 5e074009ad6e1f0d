"""Hugging Face ``config.json`` import, one model family per module.

Each family is a small module here (``llama.py``, ``deepseek.py``, ...) that registers a
:class:`Family`: the ``model_type`` values it covers, the parameter layout they follow,
the keys its ``config.json`` spells differently, the Hugging Face class defaults for
absent fields, and the settings mlacalc refuses. Adding a family is adding a module;
:func:`import_hf_config` and the schema find it through the registry.
"""

from __future__ import annotations

from ._registry import (
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
from ._translate import import_hf_config

__all__ = [
    "LAYOUTS",
    "Default",
    "Family",
    "HFInput",
    "families",
    "family_of",
    "import_hf_config",
    "model_types",
    "nearest_model_type",
    "register",
    "resolve_model_type",
]
