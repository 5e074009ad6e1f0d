"""The app's measured-sets view: any measured set predicted against measured, in the browser."""

from __future__ import annotations

import pytest
from reference_data import MEASURED as REF
from reference_data import ROOT

APP = ROOT / "app.py"


def test_measured_view_validates_a_chosen_set():
    pytest.importorskip("pyarrow.parquet")
    testing = pytest.importorskip("streamlit.testing.v1")
    at = testing.AppTest.from_file(str(APP), default_timeout=120)
    at.query_params["view"] = "Measured sets"
    at.run()
    assert not at.exception
    (pick,) = [s for s in at.selectbox if s.key == "meas_set"]
    assert str(REF / "a100_sxm") in pick.options
    pick.set_value(str(REF / "a100_sxm")).run()
    (profile,) = [s for s in at.selectbox if s.key == "meas_profile"]
    profile.set_value("roofline").run()
    assert not at.exception and not at.error
    text = " ".join(m.value for m in at.markdown)
    assert "plain roofline bound" in text and "of 54,715 rows predicted" in text
    (pick,) = [s for s in at.selectbox if s.key == "meas_set"]
    pick.set_value("other path ...").run()
    (path,) = [t for t in at.text_input if t.key == "meas_path"]
    path.set_value(str(REF / "nope")).run()
    assert any("no such file" in e.value for e in at.error)
