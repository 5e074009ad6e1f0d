"""A plan says how its device and engine were predicted as fields (``Plan.prediction``) and,
where either was not fitted, in one line of its warnings, with the benchmark's error for that
route where README.md gives one (a trial found B300's "by datasheet ratios from B200" and the
RTX PRO 6000's engine stand-in only inside a ~900-character calibration string, and B300 slower
than B200 by its assumed clock with nothing saying so)."""

import re

import pytest
from reference_data import ROOT

import mlacalc
from mlacalc.serving.provenance import ROUTE_ERRORS, ROUTE_LOO_P90, SERVING_ERRORS

README = (ROOT / "README.md").read_text()
LABELS = {"trtllm": "TensorRT-LLM 1.3.0rc20", "sglang": "SGLang 0.5.14", "vllm": "vLLM 0.24.0"}
OTHER = {"H100-SXM": "B200", "B200": "H100-SXM"}
ARGS = dict(dp_attention=True, ep=8, isl=8000, osl=1000, concurrency=128)


def _engine_row(engine: str, device: str) -> tuple[float, float, float]:
    """(fitted median, fitted p90, leave-one-device-out median) of README's per-engine row."""
    row = re.search(
        rf"^\| {re.escape(LABELS[engine])} \| {re.escape(device)} \| ([\d.]+)% / ([\d.]+)%"
        r"[^\n]*?\| \*\*([\d.]+)%\*\*",
        README,
        re.M,
    )
    assert row, (engine, device)
    return float(row[1]), float(row[2]), float(row[3])


@pytest.mark.parametrize(("engine", "device"), [k for k in ROUTE_ERRORS if k[1] in OTHER])
def test_route_errors_are_the_readme_figures(engine, device):
    """The fitted figures are the device's row; the fit on another device is that device's
    leave-one-device-out figure (its tables predicted by the other device's profile)."""
    fitted = _engine_row(engine, device)
    other = _engine_row(engine, OTHER[device])
    assert ROUTE_ERRORS[(engine, device)] == (fitted[0], fitted[1], other[2])


def test_a100_route_errors_are_the_readme_pooled_row():
    cells = r"\|([^|]*)" * 4
    row = re.search(r"^\| pooled \(every H100 table[^|]*" + cells + r"\|", README, re.M)
    assert row
    fitted = [float(x) for x in re.findall(r"[\d.]+", row[2])]
    from_a100 = float(re.findall(r"[\d.]+", row[4])[0])
    assert ROUTE_ERRORS[("trtllm", "A100-SXM-80GB")] == (*fitted, from_a100)


def _route_lines(p) -> list[str]:
    return [w for w in p.warnings if "is not a fitted device" in w or "is not fitted on" in w]


def test_b300_says_its_route_its_expected_error_and_its_clock():
    p = mlacalc.plan("deepseek-v3.2", "B300", 8, engine="sglang", **ARGS)
    r = p.prediction
    # SGLang's own profile, but its routed experts (DeepGEMM's grouped GEMM behind DeepEP, no
    # table of SGLang's times it) and EP's dispatch / combine take TensorRT-LLM's fits: the
    # route says the share, and that the expected error is SGLang's own kernels'
    assert (r["device_route"], r["device_fit"], r["engine_route"]) == (
        "same_generation",
        "B200",
        "partly_stand_in",
    )
    shares = {s["class"]: s["share"] for s in r["stand_ins"]}
    assert shares["moe:fp8_block:deepgemm"] > 0.5
    assert r["stand_in_share"] == pytest.approx(sum(shares.values()), abs=1e-3)
    assert f"{r['stand_in_share']:.0%} of the decode step's kernel time" in r["note"]
    assert "SGLang's own kernel classes' error" in r["expected_error_source"]
    # the B200 profile's leave-one-device-out median (on H100's tables) and its p90 (None
    # before: a trial found README's p90s for this route but not plan's)
    assert r["expected_error"]["p90"] == pytest.approx(ROUTE_LOO_P90[("sglang", "B200")] / 100)
    assert r["expected_error"]["of"] == "held_out"
    assert "the B200 fit scored on another device's tables, that device left out" in r["note"]
    assert r["expected_error"]["median"] == pytest.approx(ROUTE_ERRORS[("sglang", "B200")][2] / 100)
    assert "README.md" in r["expected_error_source"] and "clock_hz" in r["assumed"]
    # its fixed costs are clocks at an assumed 1,717 MHz against B200's 1,856
    assert "1,717 MHz" in r["clock_note"] and "1.08x B200's" in r["clock_note"]
    (line,) = _route_lines(p)
    assert line.startswith("B300 is not a fitted device: timed by datasheet ratios from the B200")
    assert "expect about 10% median |error|, the B200 profile's" in line
    assert r["clock_note"] in line
    # the p90 in the Expected-error line (the device's warning is every engine's, said once
    # by --compare-engines)
    assert f"p90 {r['expected_error']['p90']:.1%}" in r["note"]
    assert p.to_dict()["prediction"] == r


def test_a_fitted_device_and_engine_is_not_warned():
    p = mlacalc.plan("llama-3-8b", "B200", 1, engine="sglang", isl=1000, osl=100, concurrency=32)
    r = p.prediction
    assert (r["device_route"], r["engine_route"], r["clock_note"]) == ("fitted", "own", "")
    assert (r["stand_ins"], r["stand_in_share"]) == ([], 0)
    held = ROUTE_ERRORS[("sglang", "H100-SXM")][2], ROUTE_LOO_P90[("sglang", "H100-SXM")]
    assert r["expected_error"] == {
        "median": 0.057,
        "p90": 0.19,
        "of": "fitted",
        "held_out": {
            "median": round(held[0] / 100, 4),
            "p90": round(held[1] / 100, 4),
            "from": "H100-SXM",
        },
    }
    assert _route_lines(p) == []
    # a step a share of which another engine's fits time: its own error still stands for the
    # rest, the route names the share and plan's warnings each stand-in, not the engine
    p = mlacalc.plan("deepseek-v3.2", "B200", 8, engine="sglang", **ARGS)
    r = p.prediction
    assert (r["device_route"], r["engine_route"]) == ("fitted", "partly_stand_in")
    assert (r["expected_error"]["median"], r["expected_error"]["p90"]) == (0.057, 0.19)
    assert _route_lines(p) == []
    said = [w for w in p.warnings if "of the decode step's kernel time) is timed by" in w]
    assert any("routed_experts" in w and "moe:fp8_block:deepgemm" in w for w in said)


def test_an_engine_stand_in_on_an_unfitted_architecture_has_no_error_figure():
    p = mlacalc.plan("llama-3-8b", "RTX-PRO-6000-Server", 1, engine="vllm", isl=1000, osl=100)
    r = p.prediction
    # the pooled fit times it (device_fit None), the architecture it runs named beside
    assert (r["device_route"], r["device_fit"]) == ("nearest_architecture", None)
    assert r["nearest_architecture"] == "A100-SXM-80GB"
    assert (r["engine_route"], r["engine_profile"]) == ("stand_in", "trtllm")
    assert r["expected_error"] is None and r["expected_error_source"].startswith("not measured")
    (line,) = _route_lines(p)
    assert "trtllm's kernels stand in for vllm's" in line and "unvalidated" in line


SERVING_DOC = (ROOT / "docs" / "serving.md").read_text()


def _doc_row(start: str) -> str:
    """The row of docs/serving.md's published-figures table whose first cell starts so."""
    rows = [r for r in SERVING_DOC.splitlines() if r.startswith(f"| {start}")]
    assert len(rows) == 1, start
    return rows[0]


def _pct(text: str) -> list[float]:
    return [round(float(x) / 100, 6) for x in re.findall(r"[+-]?\d+(?:\.\d+)?(?=%| /)", text)]


@pytest.mark.parametrize("key", [k for k in SERVING_ERRORS if "row" in SERVING_ERRORS[k]])
def test_serving_errors_are_docs_serving_figures(key):
    """Each serving-level figure a plan's prediction carries is its row's in docs/serving.md
    (one place of truth): the words in the row, and the numbers those words say."""
    e = SERVING_ERRORS[key]
    assert e["said"] in _doc_row(e["row"]).split(" | ")[1], key
    said = _pct(e["said"])
    figures = [e[f] for f in ("median_abs", "median", "max_abs") if f in e]
    if "median_abs" in e:  # "median absolute error 5.4% (signed -3.5%), max 18.2%"
        assert said == figures
    else:
        assert said == [e["median"], e["max_abs"]]


def test_the_expert_parallel_range_is_its_rows():
    e = SERVING_ERRORS["expert_parallel"]
    signed = []
    for start, said in e["rows"].items():
        published = _doc_row(start).split(" | ")[2]
        assert published.split(" (", 1)[1].startswith(said), start
        signed += _pct(said)
    assert (min(signed), max(signed)) == (e["low"], e["high"])


def test_the_prediction_says_the_kernel_error_is_not_ttft_or_tpot():
    """A trial read the plan's expected error (a kernel median) as TTFT's / TPOT's: the
    prediction carries the served figures beside it and says both in its note, which the CLI
    prints under the plan's first table."""
    p = mlacalc.plan("deepseek-v3", "H200", 8, **ARGS)  # one that fits: its times are shown
    assert p.fits
    r = p.prediction
    assert r["expected_error_of"] == "kernels"
    assert r["serving_error"]["online_tpot"]["median"] == SERVING_ERRORS["online_tpot"]["median"]
    assert "row" not in r["serving_error"]["online_tpot"]
    note = r["note"]
    assert f"median {r['expected_error']['median']:.1%}" in note and "not TTFT or TPOT" in note
    assert "TPOT (ITL) -13.0%" in note and "TTFT 6.2%" in note and "-11.4% .. +24%" in note
    from mlacalc.cli.plan_cmd import sections

    assert note in sections(p)[0].note
    # where nothing fits no time is shown, so no error of one is said (trial12)
    unfit = mlacalc.plan("deepseek-v3", "H100", 8, **ARGS)
    assert not unfit.fits and "Expected error" not in sections(unfit)[0].note


def test_a_fitted_device_says_its_figure_is_in_sample_and_gives_the_held_out_one():
    # plan quoted SGLang's H100 fitted 5.2% / 18.5% as its expected error without saying it was
    # the in-sample figure of the rows the profile was fitted on
    r = mlacalc.plan("deepseek-v3", "H100-SXM", 8, engine="sglang", **ARGS).prediction
    e = r["expected_error"]
    assert (e["median"], e["p90"], e["of"]) == (0.051, 0.175, "fitted")
    held = ROUTE_ERRORS[("sglang", "B200")][2], ROUTE_LOO_P90[("sglang", "B200")]
    assert e["held_out"] == {
        "median": round(held[0] / 100, 4),
        "p90": round(held[1] / 100, 4),
        "from": "B200",
    }
    assert (
        "median 5.1%, p90 17.5% |error| (in-sample, on the rows it was fitted on; held out, "
        f"from the B200 fit: median {held[0]:.1f}%, p90 {held[1]:.1f}%;"
    ) in r["note"]


def test_route_loo_p90_covers_every_route_error():
    # each leave-one-device-out median has its p90 (a route quoting a median alone is what a
    # trial found); A100's is README's "H100 from A100" pooled p90
    from mlacalc.serving.provenance import CROSS_GENERATION_ERRORS

    assert set(ROUTE_LOO_P90) == set(ROUTE_ERRORS)
    assert all(ROUTE_LOO_P90[k] > ROUTE_ERRORS[k][2] for k in ROUTE_ERRORS)
    assert (
        ROUTE_LOO_P90[("trtllm", "A100-SXM-80GB")] == CROSS_GENERATION_ERRORS["H100 from A100"][1]
    )


def test_a_device_of_an_unmeasured_generation_gets_the_engines_floor_said_as_such():
    # L40S and the RTX PRO 6000 said "its error is not measured" with expected_error None, where
    # README.md gives the leave-one-device-out figures as the least error to expect
    from mlacalc.serving.provenance import ROUTE_ERRORS, ROUTE_LOO_P90

    for hw in ("L40S", "RTX-PRO-6000-Server"):
        p = mlacalc.plan("llama-3-8b", hw, 1, isl=1000, osl=100)
        r = p.prediction
        assert r["device_route"] == "nearest_architecture" and r["device_fit"] is None
        e = r["expected_error"]
        worst = max(v[2] for (eng, _), v in ROUTE_ERRORS.items() if eng == "trtllm")
        worst90 = max(v for (eng, _), v in ROUTE_LOO_P90.items() if eng == "trtllm")
        assert e == {"median": round(worst / 100, 4), "p90": round(worst90 / 100, 4), "of": "floor"}
        assert "a floor, not a measurement" in r["expected_error_source"]
        assert "expect at least" in r["note"] and "a floor" in r["note"]
        (line,) = _route_lines(p)
        assert "from the pooled fit, nearest fitted architecture A100-SXM-80GB" in line
        assert f"expect at least {worst / 100:.0%} median |error| (a floor" in line
