"""A trial's smaller findings: ``SearchResult.to_dict()["points"]`` an int where the attribute
is a list and ``--all`` a list under the same key (now ``to_dict(all_points=True)`` gives the
list); ``--gpus 8,`` (one count, not a budget) undocumented in ``--help``; the report API
``model_report`` not exported at the top level."""

from __future__ import annotations

import mlacalc
from mlacalc.report import model_report


def test_to_dict_gives_the_points_list_when_asked():
    s = mlacalc.search("llama-3.1-8b", "H100-SXM", [1], isl=1000, osl=100)
    assert s.to_dict()["points"] == len(s.points)
    listed = s.to_dict(all_points=True)["points"]
    assert listed == s.rows() and len(listed) == len(s.points)


def test_gpus_help_names_the_trailing_comma(run):
    text = " ".join(run("search", "--help")[0].split())
    assert "trailing comma: 8," in text and "gpus=[8]" in text
    assert "gpus=[8]" in mlacalc.search.__doc__ and "--gpus 8," in mlacalc.search.__doc__


def test_model_report_is_exported():
    assert mlacalc.model_report is model_report and "model_report" in mlacalc.__all__
