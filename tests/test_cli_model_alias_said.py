"""A shipped model's other name is said, as a device's alias is ('H100' means H100-SXM): a
trial planned ``glm-5`` under the title "Plan: glm-5.1" with no word (round 29, finding 11)."""

from __future__ import annotations

import json

import pytest


@pytest.mark.parametrize("name", ["glm-5", "GLM-5"])
def test_an_alias_is_said_once(run, name):
    out, err = run("report", name, "--seq-len", "4096", "--format", "json")
    assert err.count("mlacalc: note: ") == 1
    assert f"mlacalc: note: '{name}' means glm-5.1\n" in err
    assert json.loads(out)


@pytest.mark.parametrize("name", ["glm-5.1", "llama-3.1-70b"])
def test_a_models_own_name_is_not(run, name):
    _, err = run("report", name, "--seq-len", "4096", "--format", "json")
    assert "means" not in err
