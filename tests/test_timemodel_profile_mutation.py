"""Mutation suite of calibration profile files (``mlacalc.profile/1`` JSON): every parameter of
a class and of a device's fit, every top-level field, and the file itself, mutated. Each case
loads as a profile whose predictions are finite and positive, or is refused by a one-line
ConfigError naming the file and the field; never another exception. A profile rewritten in
place within the same second is read again (the cache is keyed by content)."""

from __future__ import annotations

import copy
import json
import math
import os

import pytest

import mlacalc
from mlacalc.timemodel.profile import PROFILES, load_profile
from mlacalc.timemodel.terms import PARAMS
from mlacalc.words.errors import ConfigError, InvalidArgumentError, MlacalcError

BASE = json.loads((PROFILES / "default.json").read_text(encoding="utf-8"))
# one class of the pooled fit and one of a device's own fit, of a kind decode steps use
CLASS = next(k for k in BASE["classes"] if k.startswith("gemm:bf16"))
DEVICE = sorted(BASE["devices"])[0]
DEVICE_CLASS = next(k for k in BASE["devices"][DEVICE] if k.startswith("gemm:bf16"))

BAD_VALUES = [
    float("nan"),
    float("inf"),
    float("-inf"),
    1e300,
    -1.0,
    -1e-12,
    "0.5",
    None,
    True,
    [],
    {},
]


def _write(tmp_path, data, name="p.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(data), encoding="utf-8")
    return str(path)


def _refused(path: str, field: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_profile(path)
    text = str(err.value)
    assert "\n" not in text and path in text and field in text, text


def _predicts(profile) -> None:
    """A loaded profile answers with a finite, positive time."""
    p = mlacalc.predict_time("llama-3-8b", "H100-SXM", "decode", 4096, batch=8, profile=profile)
    assert math.isfinite(p.seconds) and p.seconds > 0


@pytest.mark.parametrize("value", BAD_VALUES, ids=repr)
@pytest.mark.parametrize("param", ["eff_compute", "eff_memory", "overlap", "fixed_s"])
def test_profile_parameter_nan_huge_negative_or_wrong_type_is_refused(tmp_path, param, value):
    data = copy.deepcopy(BASE)
    data["classes"][CLASS][param] = value
    _refused(_write(tmp_path, data), f"classes.{CLASS}.{param}")


@pytest.mark.parametrize("param", sorted(PARAMS))
def test_profile_every_parameter_past_its_range_is_refused(tmp_path, param):
    hi = PARAMS[param][1]
    for value in (hi * 1e6 + 1.0, -1.0):
        data = copy.deepcopy(BASE)
        data["devices"][DEVICE][DEVICE_CLASS][param] = value
        _refused(_write(tmp_path, data), f"devices.{DEVICE}.{DEVICE_CLASS}.{param}")


def test_profile_overlap_zero_is_refused_naming_file_and_field(tmp_path):
    # a p-norm of 0: a ZeroDivisionError (or NaN) in every prediction
    data = copy.deepcopy(BASE)
    data["classes"][CLASS]["overlap"] = 0
    _refused(_write(tmp_path, data), f"classes.{CLASS}.overlap")


@pytest.mark.parametrize("param", sorted(PARAMS))
def test_profile_parameter_at_either_end_of_its_range_loads_and_predicts(tmp_path, param):
    lo, hi, _ = PARAMS[param]
    for value in (lo, hi):
        data = copy.deepcopy(BASE)
        data["classes"][CLASS][param] = value
        _predicts(load_profile(_write(tmp_path, data, f"{param}-{value}.json")))


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("schema", "mlacalc.profile/0"),
        ("classes", []),
        ("classes", {"gemm:bf16": 3}),
        ("classes", {"gemm:bf16": {"warp_factor": 1.0}}),
        ("devices", "H100-SXM"),
        ("devices", {"H100-SXM": []}),
        ("fitted_on", 5),
        ("fitted_on", "a100"),
        ("residuals", [1, 2]),
        ("notes", "one note"),
        ("notes", [1, None]),
    ],
)
def test_profile_top_level_field_of_the_wrong_shape_is_refused(tmp_path, field, value):
    data = copy.deepcopy(BASE)
    data[field] = value
    _refused(_write(tmp_path, data), field)


@pytest.mark.parametrize(
    "raw",
    [b"", b"{", b"\xff\xfe{}", b"[]", b"null", b"[" * 100_000, b'{"schema": NaN}'],
    ids=["empty", "truncated", "not-utf8", "list", "null", "deep", "nan-schema"],
)
def test_profile_file_that_is_not_a_profile_is_refused_in_one_line(tmp_path, raw):
    path = tmp_path / "p.json"
    path.write_bytes(raw)
    with pytest.raises(ConfigError) as err:
        load_profile(str(path))
    assert "\n" not in str(err.value) and str(path) in str(err.value)


@pytest.mark.parametrize("value", [True, 3, 1.5, ["default"], {"name": "x"}], ids=repr)
def test_profile_argument_of_the_wrong_type_is_refused_by_name(value):
    with pytest.raises(InvalidArgumentError, match=r"^profile: "):
        load_profile(value)
    with pytest.raises(InvalidArgumentError, match=r"^profile: "):
        mlacalc.plan("llama-3-8b", "H100-SXM", 1, profile=value)


def test_profile_rewritten_within_the_same_second_is_read_again(tmp_path):
    data = copy.deepcopy(BASE)
    path = _write(tmp_path, data)
    first = load_profile(path)
    stamp = os.stat(path).st_mtime_ns
    data["name"] = "rewritten"
    data["classes"][CLASS]["eff_compute"] = 0.5
    _write(tmp_path, data)
    os.utime(path, ns=(stamp, stamp))  # the same modification time as the first file
    second = load_profile(path)
    assert second.name == "rewritten" and first.name != "rewritten"
    assert second.classes[CLASS]["eff_compute"] == 0.5


def test_profile_mutated_at_random_loads_and_predicts_or_is_refused(tmp_path):
    """Hypothesis replaces a parameter, a class or a top-level field with junk."""
    hypothesis = pytest.importorskip("hypothesis")
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    junk = st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=6),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
        max_leaves=8,
    )
    params = sorted(BASE["classes"][CLASS])
    counter = iter(range(10**6))

    @settings(
        max_examples=40,
        derandomize=True,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(
        where=st.sampled_from(["param", "class", "top"]),
        name=st.sampled_from(params),
        top=st.sampled_from(["schema", "classes", "devices", "fitted_on", "notes", "name"]),
        value=junk,
    )
    def check(where, name, top, value):
        data = copy.deepcopy(BASE)
        if where == "param":
            data["classes"][CLASS][name] = value
        elif where == "class":
            data["classes"][CLASS] = value
        else:
            data[top] = value
        path = _write(tmp_path, data, f"p{next(counter)}.json")
        try:
            profile = load_profile(path)
        except MlacalcError as exc:
            assert "\n" not in str(exc) and path in str(exc)
            return
        _predicts(profile)

    assert hypothesis
    check()


@pytest.mark.parametrize("value", [0, math.nan, 1e300, -1.0])
def test_profile_made_in_code_is_checked_as_a_file_is(value):
    # a Profile object went straight to the time model: overlap 0 divided by zero
    from mlacalc.timemodel.profile import Profile

    bad = Profile(name="mine", classes={"gemm:bf16": {"overlap": value}})
    with pytest.raises(ConfigError, match=r"^profile 'mine': field 'classes.gemm:bf16.overlap'"):
        mlacalc.plan("llama-3-8b", "H100-SXM", 1, profile=bad)
    good = Profile(name="mine", classes={"gemm:bf16": {"overlap": 2.0}})
    assert load_profile(good) is good
    _predicts(good)
