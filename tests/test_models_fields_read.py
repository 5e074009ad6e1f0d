"""No field ignored: every field a family's Hugging Face class reads is accounted for.

For every registered family and each of its model types (and aliases), the fields the
``transformers`` configuration class reads are enumerated from the class itself: its annotated
fields up to ``PretrainedConfig`` and its ``attribute_map``, and, for a multimodal wrapper,
those of its ``text_config`` class too. A type transformers does not implement (remote code)
is checked against the keys of every vendored ``config.json`` of that type instead. Each field
must be known to the family (:func:`mlacalc.models.hf.known_fields`: a schema field, a rename,
an input, a hook read, an ``ignored`` or ``irrelevant`` field, or one of ``COUNT_FREE``); the
test fails naming the family and the fields it neither uses nor lists as changing no count.
"""

from __future__ import annotations

import json

import pytest
from reference_data import HF_CONFIGS, HF_CONFIGS_2

from mlacalc.models.hf import families, known_fields

transformers = pytest.importorskip("transformers")


def _class_fields(cls) -> set[str]:
    """The fields a configuration class reads: annotations up its bases, and attribute_map."""
    base = transformers.PretrainedConfig
    out: set[str] = set()
    for klass in cls.__mro__:
        if klass is base or not isinstance(klass, type) or not issubclass(klass, base):
            break
        out |= set(getattr(klass, "__annotations__", {}))
        out |= set(getattr(klass, "attribute_map", {}) or {})
    return {f for f in out if not f.startswith("_")}


def _vendored_keys(model_type: str) -> set[str] | None:
    """Keys of every vendored config.json of ``model_type`` (and of its text_config)."""
    keys: set[str] = set()
    found = False
    for folder in (HF_CONFIGS, HF_CONFIGS_2):
        for path in sorted(folder.glob("*.config.json")):
            data = json.loads(path.read_text(encoding="utf-8"))
            if data.get("model_type") != model_type:
                continue
            found = True
            keys |= set(data)
            if isinstance(data.get("text_config"), dict):
                keys |= set(data["text_config"])
    return keys if found else None


#: keys of a published file that no configuration class reads (bookkeeping of the export)
_EXPORT_KEYS = {
    "architectures",
    "auto_map",
    "transformers_version",
    "_name_or_path",
    "torch_dtype",
    "dtype",
    "model_type",
    "quantization_config",
    "tie_word_embeddings",
}


def _fields_read(model_type: str) -> tuple[str, set[str]] | None:
    """(where the fields come from, the fields) for ``model_type``, or None when there is
    neither a transformers class nor a vendored config of it."""
    try:
        cls = transformers.CONFIG_MAPPING[model_type]
    except KeyError:
        keys = _vendored_keys(model_type)
        return None if keys is None else ("vendored config.json keys", keys - _EXPORT_KEYS)
    fields = _class_fields(cls)
    text = (getattr(cls, "sub_configs", None) or {}).get("text_config")
    if isinstance(text, type):
        fields |= _class_fields(text)
    return f"transformers {cls.__name__}", fields


CASES = [
    (name, model_type)
    for name, unit in families().items()
    for model_type in (*unit.model_types, *unit.aliases)
]


@pytest.mark.parametrize(("family", "model_type"), CASES, ids=[f"{f}-{t}" for f, t in CASES])
def test_every_field_the_class_reads_is_used_or_listed(family, model_type):
    read = _fields_read(model_type)
    if read is None:
        pytest.skip(f"{model_type}: no transformers class and no vendored config.json")
    where, fields = read
    unit = families()[family]
    missing = sorted(fields - known_fields(unit))
    assert not missing, (
        f"family {family} ({model_type}, fields from {where}) neither uses nor lists as "
        f"irrelevant: {missing}; add each to the module's reads/inputs (and honour or refuse "
        f"it) or to Family.irrelevant with the reason it changes no count"
    )


def test_every_family_is_checked():
    """A family whose every type is skipped is not checked at all: none may be."""
    checked = {f for f, t in CASES if _fields_read(t) is not None}
    assert checked == set(families()), sorted(set(families()) - checked)
