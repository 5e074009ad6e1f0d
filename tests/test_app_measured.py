"""The app's measured-sets view: any measured set predicted against measured, in the browser."""

from __future__ import annotations

import pytest
from _helpers import app_test
from reference_data import MEASURED as REF


def test_measured_view_validates_a_chosen_set():
    pytest.importorskip("pyarrow.parquet")
    pytest.importorskip("streamlit.testing.v1")
    at = app_test()
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


def test_measured_view_uses_the_sidebar_engine_and_names_it():
    # before: the view called mlacalc.validate() with no engine, so with the sidebar on sglang
    # it showed TensorRT-LLM's 2,454 rows of h100_sxm/linear_attention (gdn_perf + mamba2_perf),
    # never named the engine, and left out the CLI's "uncalibrated kernel classes" line
    pytest.importorskip("pyarrow.parquet")
    pytest.importorskip("streamlit.testing.v1")
    path = str(REF / "h100_sxm" / "linear_attention")
    seen = {}
    for engine in ("sglang", "trtllm"):
        at = app_test()
        at.query_params["view"] = "Measured sets"
        at.query_params["engine"] = engine
        at.run()
        (pick,) = [s for s in at.selectbox if s.key == "meas_set"]
        pick.set_value("other path ...").run()
        (box,) = [t for t in at.text_input if t.key == "meas_path"]
        box.set_value(path).run()
        assert not at.exception and not at.error
        seen[engine] = " ".join(m.value for m in at.markdown)
    # as `validate --measured h100_sxm/linear_attention --engine sglang`: 8,820 gdn_perf rows
    assert "Engine **sglang**" in seen["sglang"] and "of 8,820 rows" in seen["sglang"]
    assert "uncalibrated kernel classes" not in seen["sglang"]
    # as the CLI with trtllm: 2,454 rows, two tables on datasheet defaults
    assert "Engine **trtllm**" in seen["trtllm"] and "of 2,454 rows" in seen["trtllm"]
    assert (
        "uncalibrated kernel classes (no class in profile fit-a100-sxm-80gb; datasheet "
        "defaults) in: h100_sxm gdn_perf, h100_sxm mamba2_perf" in seen["trtllm"]
    )
