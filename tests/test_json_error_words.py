"""A file that is not valid JSON is refused in one whole sentence: where, what, and the fix.
json's own message ends where its position was cut off ("Unterminated string starting at"),
and a new user's trial read `report trunc.json` end mid-sentence with no fix."""

from __future__ import annotations

import json

import pytest

from mlacalc.words.errors import ConfigError
from mlacalc.words.safeio import json_error_words, parse_json

CASES = [
    ('{"hidden_size": 2048, "model_type": "deepse', "1, column 37: a string opened here is "
     "never closed (the file may be cut short)"),
    ("hidden_size: 2048", "1, column 1: no JSON value starts here"),
    ('{"a": 1,}', "1, column 9: a trailing ',' before the closing bracket here (JSON allows none)"),
    ('{"a": [1, 2, ]}', "1, column 14: a trailing ',' before the closing bracket here (JSON allows "
     "none)"),
    ('{"a": 1, 2}', "1, column 10: a key in double quotes is missing here"),
    ('{"a": 1 "b": 2}', "1, column 9: a ',' is missing here"),
    ('{"a" 1}', "1, column 6: a ':' is missing here"),
    ('{"a": 1} x', "1, column 10: more text follows the end of the JSON value here"),
    ('{"a": 1, "b": [1, 2', "1, column 20: a ',' is missing here (the file may be cut short)"),
    ('{"a": "x\ny"}', "1, column 9: a string holds a raw newline or tab here"),
    ('{"a": "\\q"}', "1, column 8: a backslash escape is invalid here"),
]  # fmt: skip


@pytest.mark.parametrize(("text", "said"), CASES)
def test_every_json_fault_is_a_whole_sentence_with_its_place_and_fix(text, said):
    with pytest.raises(ConfigError) as err:
        parse_json(text, "config.json")
    line = str(err.value)
    assert line == (
        f"config.json: is not valid JSON at line {said} "
        "(make it whole JSON: python -m json.tool on the file shows the spot)"
    )
    assert "\n" not in line and not line.rstrip(")").endswith(" at")


def test_a_message_json_may_add_later_loses_only_a_dangling_at():
    exc = json.JSONDecodeError("Something new at", "{}", 1)
    assert json_error_words(exc) == "line 1, column 2: Something new"


def test_a_profile_file_says_it_the_same_way(tmp_path):
    from mlacalc.timemodel.profile import load_profile

    bad = tmp_path / "p.json"
    bad.write_text('{"name": "x')
    with pytest.raises(ConfigError, match="a string opened here is never closed"):
        load_profile(str(bad))
