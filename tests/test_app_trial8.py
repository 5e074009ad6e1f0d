"""The app trial 8's findings (/tmp/helpers/trial8_report.md), through AppTest."""

from pathlib import Path

import pytest

pytest.importorskip("streamlit")
pytest.importorskip("plotly")
from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parent.parent / "app.py")


def run(view: str | None = None, **query) -> AppTest:
    if view is not None:
        query["view"] = view
    at = AppTest.from_file(APP, default_timeout=120)
    for key, value in query.items():
        at.query_params[key] = value
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def metrics(at) -> dict:
    return {m.label: m.value for m in at.metric}


def test_flops_small_latent_has_no_negative_crossover():
    # before: "absorption stops paying above -18.3 query tokens" (16 * 256 / (32 - 256))
    at = run("FLOPs", model="deepseek-v3", whatif="1", d_c="16")
    shown = metrics(at)["absorption stops paying above"]
    assert shown == "never", shown
    assert any("every query count" in c.value for c in at.caption)
