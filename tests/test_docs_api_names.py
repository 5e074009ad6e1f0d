"""docs/api.md says every public name: mlacalc's own, every field and method of the serving
results (Plan, SearchResult) and the names of the submodules it documents (the launch
memory share, TensorRT-LLM's MoE backend); docs/serving.md every key of a search point. A
round added Plan.moe_backend, Plan.moe_kernel and the prefill pool's launch fields without an
entry; a new public name without one fails here, and so does an entry naming a field that
is gone."""

from __future__ import annotations

import dataclasses
import re

import pytest
from reference_data import ROOT

import mlacalc
from mlacalc.serving import capacity
from mlacalc.serving.plan import Plan
from mlacalc.serving.search import FIELDS, SearchResult
from mlacalc.timemodel import moe_backend

API = (ROOT / "docs" / "api.md").read_text()
SERVING = (ROOT / "docs" / "serving.md").read_text()


def _said(name: str, text: str) -> bool:
    """``name`` in a code span of ``text`` as a whole word (`Plan.moe_kernel`,
    `launch_share(plan, engine)`)."""
    return re.search(r"`[^`\n]*(?<!\w)" + re.escape(name) + r"(?!\w)[^`\n]*`", text) is not None


def _public(cls: type) -> list[str]:
    """A result class's fields, and its public methods and properties."""
    own = [n for n, v in vars(cls).items() if callable(v) or isinstance(v, property)]
    return [f.name for f in dataclasses.fields(cls)] + [n for n in own if not n.startswith("_")]


def _table(cls: type) -> str:
    """The rows of api.md's table of ``cls`` (its header is ``| `Plan` | ...``)."""
    rows = API.split(f"| `{cls.__name__}` | what it is |")[1].split("\n\n")[0]
    return "\n".join(line.split(" | ")[0] for line in rows.splitlines()[2:])


@pytest.mark.parametrize(
    ("where", "names"),
    [
        ("mlacalc.__all__", mlacalc.__all__),
        ("the launch memory share", [n for n in capacity.__all__ if n.endswith("_share")]),
        ("mlacalc.timemodel.moe_backend", moe_backend.__all__),
    ],
)
def test_every_public_name_has_an_entry(where, names):
    assert [n for n in names if not _said(n, API)] == [], where


@pytest.mark.parametrize("cls", [Plan, SearchResult])
def test_every_result_field_and_method_has_a_row(cls):
    """Each in its class's table, and each name the table gives is the class's."""
    table = _table(cls)
    assert [n for n in _public(cls) if not _said(n, table)] == []
    named = {m.split("(")[0] for m in re.findall(r"`([\w.]+(?:\([^`]*\))?)`", table)}
    assert sorted(named - set(_public(cls))) == []


def test_every_search_point_key_has_a_row():
    table = SERVING.split("### Search output")[1].split("\n\n|")[1].split("\n\n")[0]
    assert [k for k in FIELDS if not _said(k, table)] == []
