"""README.md's measured errors belong to the shipped profiles, matched by content digest: a copy
of a shipped profile with its figures edited (a trial halved every H100 GEMM efficiency of
fit-h100-sxm-sglang: TPOT 24 -> 36 ms) is not given the shipped figure; a profile recording
residuals of its own is scored by them (``of``: ``own_residuals``)."""

from __future__ import annotations

import dataclasses
import json

from mlacalc.data import PROFILES
from mlacalc.hardware.catalogue import load_hardware
from mlacalc.serving.provenance import prediction_route
from mlacalc.timemodel.profile import load_profile

SHIPPED = PROFILES / "fit-h100-sxm-sglang.json"
H100 = load_hardware("H100-SXM")


def _halved(tmp_path, name="myprof.json"):
    data = json.loads(SHIPPED.read_text())
    for key, params in data["devices"]["H100-SXM"].items():
        if key.startswith("gemm"):
            for f in ("eff_compute", "eff_memory"):
                if f in params:
                    params[f] /= 2
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path, data


def test_the_shipped_profile_keeps_readme_figures_under_any_path(tmp_path):
    copy = tmp_path / "renamed.json"
    copy.write_text(json.dumps(json.loads(SHIPPED.read_text()), indent=3))  # re-indented
    for prof in ("fit-h100-sxm-sglang", str(copy)):
        route = prediction_route(prof, H100, "sglang")
        assert route["expected_error"]["of"] == "fitted"
        assert route["profile"]["shipped"] is True
    assert load_profile(str(copy)).digest == load_profile("fit-h100-sxm-sglang").digest


def test_an_edited_copy_gets_no_readme_figure(tmp_path):
    path, _ = _halved(tmp_path)
    route = prediction_route(str(path), H100, "sglang")
    assert route["expected_error"] is None
    assert route["profile"] == load_profile(str(path)).identity()
    assert route["profile"]["shipped"] is False
    assert route["profile"]["digest"] != load_profile("fit-h100-sxm-sglang").digest
    src = route["expected_error_source"]
    assert src.startswith("not measured") and "not a shipped profile" in src
    assert "fit-h100-sxm-sglang's" in src  # the residuals it carries are the shipped fit's


def test_a_copy_of_an_earlier_shipped_fit_is_caught_by_its_classes(tmp_path):
    """A copy made before a class of the shipped profile was refitted holds the other classes'
    residuals unchanged: not its own."""
    prof = load_profile(str(_halved(tmp_path)[0]))
    mine = dict(prof.residuals["H100-SXM"])
    first = sorted(mine)[0]
    mine[first] = {**mine[first], "median_abs_error": 0.5}  # one class refitted since
    route = prediction_route(
        dataclasses.replace(prof, residuals={"H100-SXM": mine}), H100, "sglang"
    )
    assert route["expected_error"] is None
    assert "fit-h100-sxm-sglang's" in route["expected_error_source"]


def test_a_profile_with_residuals_of_its_own_is_scored_by_them(tmp_path):
    prof = load_profile(str(_halved(tmp_path)[0]))
    own = {"gemm:bf16": {"rows": 40, "median_abs_error": 0.081, "p90_abs_error": 0.25}}
    mine = dataclasses.replace(prof, residuals={"H100-SXM": own})
    route = prediction_route(mine, H100, "sglang")
    assert route["expected_error"] == {"median": 0.081, "p90": 0.25, "of": "own_residuals"}
    assert "own residuals" in route["note"]


def test_an_edited_profile_without_residuals_says_why(tmp_path):
    prof = load_profile(str(_halved(tmp_path)[0]))
    route = prediction_route(dataclasses.replace(prof, residuals={}), H100, "sglang")
    assert route["expected_error"] is None
    assert "records no residuals for H100-SXM" in route["expected_error_source"]


def test_a_renamed_shipped_profile_is_still_shipped(tmp_path):
    # the digest held the name and notes: a shipped file given another name lost its figures
    data = json.loads(SHIPPED.read_text())
    data["name"], data["notes"] = "my-h100", [*data["notes"], "pinned by our team"]
    path = tmp_path / "renamed.json"
    path.write_text(json.dumps(data))
    route = prediction_route(str(path), H100, "sglang")
    assert route["profile"]["shipped"] is True and route["expected_error"]["of"] == "fitted"
    data["classes"]["gemm:bf16"]["eff_compute"] = 0.5  # a figure changed: not shipped
    path.write_text(json.dumps(data))
    assert prediction_route(str(path), H100, "sglang")["profile"]["shipped"] is False


def test_own_residuals_pool_the_classes_by_rows_not_the_worst_class(tmp_path):
    # a profile of an earlier release (residuals of its own, one of a Blackwell class an H100
    # plan never runs at 50%) was given the worst class's 50% / 145%
    prof = load_profile(str(_halved(tmp_path)[0]))
    own = {
        "gemm:bf16": {"rows": 900, "median_abs_error": 0.05, "p90_abs_error": 0.15},
        "attention_decode:bf16": {"rows": 100, "median_abs_error": 0.06, "p90_abs_error": 0.2},
        "attention_decode:bf16:vllm_flash_attn_fa4": {
            "rows": 10,
            "median_abs_error": 0.5,
            "p90_abs_error": 1.45,
        },
    }
    route = prediction_route(dataclasses.replace(prof, residuals={"H100-SXM": own}), H100, "sglang")
    assert route["expected_error"] == {"median": 0.05, "p90": 0.15, "of": "own_residuals"}
    src = route["expected_error_source"]
    assert "the worst class attention_decode:bf16:vllm_flash_attn_fa4" in src
    assert "an earlier or edited copy of the shipped profile of its name" in src
