"""Mutation suite: every field of every shipped config and every real config.json, mutated.

Each field is replaced by a wrong type, null, an extreme value, a string for a boolean or
nested junk, or removed; each case must give a valid model whose counts evaluate, or an
MlacalcError naming the field; never another exception, never more than a second.
Hypothesis draws the values (derandomized, so CI sees the same cases every run).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from reference_data import HF_CONFIGS, HF_CONFIGS_2, HF_WRITTEN, ROOT  # noqa: E402

import mlacalc  # noqa: E402
from mlacalc import MlacalcError, ModelConfig  # noqa: E402
from mlacalc.models import hf  # noqa: E402
from mlacalc.models.loading import parse_upload  # noqa: E402

SHIPPED = sorted((ROOT / "model_configs").glob("*.yaml"))


def _loads(path: Path) -> bool:
    try:
        mlacalc.load_model(path)
    except MlacalcError:
        return False
    return True


# config.json files: those written for the import tests, and the published ones that load
REAL = sorted(HF_WRITTEN.glob("*.config.json"))
REAL += sorted(p for p in HF_CONFIGS.glob("*.config.json") if _loads(p))

# derandomized: CI sees the same cases every run; no shrinking: a failure reports its draws
SETTINGS = settings(
    max_examples=6,
    derandomize=True,
    deadline=None,
    database=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
)

_VALID_TYPES = set(hf.model_types())
junk = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=12,
)
MUTATIONS = st.one_of(
    st.sampled_from(
        [
            None,
            True,
            False,
            0,
            -1,
            1,
            3,
            2**31,
            2**63,
            10**30,
            10**40,
            "",
            "abc",
            "4096",
            "true",
            "false",
            "yes",
            "no",
            "0",
            "1",
            "null",
            [],
            {},
            [1],
            0.5,
            4096.0,
            float("nan"),
            float("inf"),
            -float("inf"),
        ]
    ),
    st.integers(min_value=-(10**45), max_value=10**45),
    st.integers(min_value=0, max_value=70_000),
    st.text(max_size=12).filter(lambda t: t not in _VALID_TYPES),
    st.floats(),
    junk,
)
DELETE = object()


def _check(build, data: dict, field: str, names: set[str], container: bool = False) -> None:
    """Build a model from ``data``: a valid result whose counts evaluate, or an error naming
    the mutated field (any of its spellings). Removing
    or replacing a mapping (``container``, such as ``text_config``) may instead report the
    fields it held as missing."""
    try:
        model = build(data)
    except MlacalcError as exc:
        message = str(exc)
        assert "\n" not in message and len(message) < 3000, message[:300]
        problems = getattr(exc, "problems", [("", "")])
        missing = container and any("is missing" in p[1] for p in problems)
        assert missing or any(n in message for n in names), (field, message[:300])
    else:
        assert isinstance(model, ModelConfig)
        counts = mlacalc.param_counts(model)
        assert counts.total > 0
        assert mlacalc.kv_cache_bytes(model, 4096, 2) > 0
        try:
            flops = mlacalc.attention_flops(model, "decode", 4096)
        except MlacalcError as exc:  # a kind of layer whose FLOPs are refused by name
            assert "not modelled" in str(exc), str(exc)[:300]
        else:
            assert flops > 0


def _spellings(field: str, model_type: object) -> set[str]:
    """The names an error may use for ``field``: itself and its schema name."""
    names = {field}
    unit = hf.family_of(model_type) if isinstance(model_type, str) else None
    if unit is not None and field in unit.renames:
        names.add(unit.renames[field])
    if field == "model_type" or field in ("multi_query", "new_decoder_architecture"):
        names.add("model_type")
    if field == "multi_query":
        names.add("num_key_value_heads")
    return names


def _mutated(data: dict, field: str, value: object) -> dict:
    out = dict(data)
    if value is DELETE:
        out.pop(field, None)
    else:
        out[field] = value
    return out


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
@SETTINGS
@given(draw=st.data())
def test_every_field_of_a_shipped_config(path, draw):
    base = yaml.safe_load(path.read_text())
    origin = str(path.with_name("mutated.yaml"))
    for field in [*base, "unknown_field"]:
        value = draw.draw(MUTATIONS | st.just(DELETE), label=field)
        data = _mutated(base, field, value)
        _check(
            lambda d: mlacalc.model_from_dict(d, origin),
            data,
            field,
            _spellings(field, base["model_type"]),
        )


@pytest.mark.parametrize("path", REAL, ids=lambda p: p.name.split(".config")[0])
@SETTINGS
@given(draw=st.data())
def test_every_field_of_a_real_config_json(path, draw):
    base = json.loads(path.read_text())
    for field in list(base):
        value = draw.draw(MUTATIONS | st.just(DELETE), label=field)
        data = _mutated(base, field, value)
        _check(
            lambda d: mlacalc.import_hf_config(d, "config.json"),
            data,
            field,
            _spellings(field, base.get("model_type")),
            container=isinstance(base[field], dict),
        )


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**50), max_value=10**50)
    | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=12,
)


@pytest.mark.parametrize("path", [SHIPPED[0], REAL[0]], ids=["yaml", "json"])
@SETTINGS
@given(draw=st.data())
def test_mutated_files_through_the_upload_path(path, draw):
    """The same mutations as text: the reader and the loader together."""
    is_json = path.suffix == ".json"
    base = json.loads(path.read_text()) if is_json else yaml.safe_load(path.read_text())
    for field in list(base):
        data = _mutated(base, field, draw.draw(json_values | st.just(DELETE), label=field))
        text = json.dumps(data) if is_json else yaml.safe_dump(data)
        name = "config.json" if is_json else "mutated.yaml"
        _check(
            lambda _, t=text, n=name: parse_upload(t.encode(), n),
            data,
            field,
            _spellings(field, base.get("model_type")),
        )


def _loads_json(path: Path) -> bool:
    try:
        mlacalc.import_hf_config(json.loads(path.read_text()), path.name)
    except MlacalcError:
        return False
    return True


# every family's loader: the files that import, of all three sets
EVERY = REAL + sorted(p for p in HF_CONFIGS_2.glob("*.config.json") if _loads_json(p))
# fields transformers refuses (or that no model holds) but that change no count: a family
# loader accepted them silently (a qwen3 file with 'weird_attention' among its layer_types,
# hidden_act "swishy", rope_theta NaN all imported)
BAD_SHARED = {
    "layer_types: too short": ("layer_types", lambda n: ["full_attention"] * (n - 1)),
    "layer_types: unknown type": ("layer_types", lambda n: ["weird_attention"] * n),
    "hidden_act: unknown": ("hidden_act", lambda n: "swishy"),
    "rope_theta: NaN": ("rope_theta", lambda n: float("nan")),
    "rope_theta: negative": ("rope_theta", lambda n: -10_000.0),
}
# families that read layer_types as a property of another field (it changes nothing there), or
# as the list of blocks whose length is the layer count (Nemotron-H, beside layers_block_type)
_LAYER_TYPES_IGNORED = ("jamba", "falcon_h1", "nemotron_h")


def _scope(base: dict) -> dict:
    """The part of a config.json that holds the text model's fields."""
    text = base.get("text_config") if isinstance(base.get("text_config"), dict) else None
    return text if text is not None and "num_hidden_layers" in text else base


def _checked(path: Path, case: str) -> bool:
    """Whether ``path``'s family reads the field ``case`` mutates (layer_types is not read
    where another field is the layer pattern: _LAYER_TYPES_IGNORED)."""
    if BAD_SHARED[case][0] != "layer_types":
        return True
    base = json.loads(path.read_text())
    return _scope(base).get("model_type", base.get("model_type")) not in _LAYER_TYPES_IGNORED


# (file, case): every case of every file whose family reads the field (collected, not skipped)
CHECKED = [(p, c) for p in EVERY for c in sorted(BAD_SHARED) if _checked(p, c)]


@pytest.mark.parametrize(
    ("path", "case"), CHECKED, ids=[f"{c}-{p.name.split('.config')[0]}" for p, c in CHECKED]
)
def test_fields_every_loader_checks(path, case):
    base = json.loads(path.read_text())
    scope = _scope(base)
    text = base.get("text_config") if isinstance(base.get("text_config"), dict) else None
    field, value = BAD_SHARED[case]
    n = mlacalc.import_hf_config(base, path.name).num_hidden_layers
    data = json.loads(json.dumps(base))
    target = data["text_config"] if scope is text else data
    target[field] = value(n)
    with pytest.raises(MlacalcError) as err:
        mlacalc.import_hf_config(data, path.name)
    message = str(err.value)
    assert field in message and path.name in message and "\n" not in message, message
