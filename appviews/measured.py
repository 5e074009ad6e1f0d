"""Measured sets view: predicted against measured for any measured set.

Two parts: GPU kernel tables (aiconfigurator's layout, predicted by the kernel time model with
a calibration profile, or by the plain roofline bound) and the committed microbenchmark sets
(the unfused roofline with each set's own measured ceilings).
"""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go
import streamlit as st

import mlacalc
from mlacalc.data import MEASURED
from mlacalc.measured.tables import measured_fingerprint
from mlacalc.render import human_seconds
from mlacalc.words.errors import MlacalcError

from .common import Scenario, download, show_table, validation

TITLE = "Measured sets"

#: Points drawn per table in a scatter (evenly sampled; the statistics use every row).
_MAX_POINTS = 2500

_NONE = "(choose a measured set)"
#: The profile entry that lets the library choose (the shipped default unless it was fitted on
#: the set: then a shipped profile fitted on none of the set's devices).
_AUTO = "default"
_OTHER = "other path ..."


def _default_sets() -> list[str]:
    """The system folders of the GPU tables shipped with the package (``mlacalc/data/measured``)."""
    return sorted(str(p) for p in MEASURED.iterdir() if p.is_dir())


@st.cache_data(show_spinner="predicting every row ...", max_entries=8)
def _gpu_validation(path: str, profile: str, content: str, engine: str) -> dict[str, Any]:
    # ``content``: the set's fingerprint (measured_fingerprint), part of the cache key so that a
    # set rewritten in place is validated again, not answered from the cache
    import numpy as np

    # "default" is the library's own choice (profile=None): the shipped default, or, for a set
    # that profile was fitted on, a shipped profile fitted on none of its devices, as
    # ``mlacalc validate --measured`` and ``mlacalc.validate(measured=...)`` choose it
    # ``engine``: the sidebar's serving engine, whose tables a folder gives and whose profiles
    # predict them (as ``mlacalc validate --measured PATH --engine E``)
    v = mlacalc.validate(
        measured=path, profile=None if profile == _AUTO else profile, engine=engine
    )
    doc = v.to_dict()
    points = []
    for t in v.tables:
        ok = np.nonzero(t.predicted_mask)[0]
        if ok.size > _MAX_POINTS:
            ok = ok[np.linspace(0, ok.size - 1, _MAX_POINTS).astype(int)]
        points.append(
            {
                "table": t.table,
                "system": t.system,
                "measured_s": t.measured_s[ok].tolist(),
                "predicted_s": t.predicted_s[ok].tolist(),
            }
        )
    doc["points"] = points
    return doc


def _scatter(points: list[dict[str, Any]], key: str) -> None:
    fig = go.Figure()
    lo, hi = float("inf"), 0.0
    for p in points:
        if not p["measured_s"]:
            continue
        lo = min(lo, min(p["measured_s"]), min(p["predicted_s"]))
        hi = max(hi, max(p["measured_s"]), max(p["predicted_s"]))
        fig.add_trace(
            go.Scattergl(
                x=p["measured_s"],
                y=p["predicted_s"],
                mode="markers",
                marker={"size": 4, "opacity": 0.6},
                name=f"{p['system']} {p['table']}",
            )
        )
    if hi <= 0:
        st.info("No row of this set could be predicted.")
        return
    for factor, dash, name in (
        (1.0, "dash", "predicted = measured"),
        (1.25, "dot", "+25%"),
        (0.8, "dot", "-20%"),
    ):
        fig.add_trace(
            go.Scatter(
                x=[lo, hi],
                y=[lo * factor, hi * factor],
                mode="lines",
                name=name,
                line={"dash": dash, "color": "gray"},
            )
        )
    fig.update_xaxes(type="log", title="measured (s)", dtick="D2")  # 1, 2, 5: not every digit
    fig.update_yaxes(type="log", title="predicted (s)", dtick="D2")
    fig.update_layout(height=460, margin={"t": 20})
    st.plotly_chart(fig, width="stretch", key=key)


def _uncalibrated(doc: dict[str, Any]) -> str:
    """The CLI's line naming the tables whose kernel classes the profile lacks (predicted with
    the datasheet defaults, so their figures test no calibration); empty when none."""
    lacking = [
        t
        for t in doc["tables"]
        if "uncalibrated" in t["calibration"] and "plain roofline" not in t["calibration"]
    ]
    if not lacking:
        return ""
    names = ", ".join(sorted({t["profile"] for t in lacking if t["profile"]})) or doc["profile"]
    where = ", ".join(f"{t['system']} {t['table']}" for t in lacking)
    return (
        f"uncalibrated kernel classes (no class in profile {names}; datasheet defaults) in: {where}"
    )


def _gpu_section(engine: str) -> None:
    st.markdown(
        "**GPU kernel tables** (aiconfigurator layout: a `<system>` folder, a folder "
        "below it, or one `.parquet`)"
    )
    c1, c2 = st.columns([3, 1])
    pick = c1.selectbox("measured set", [_NONE, *_default_sets(), _OTHER], key="meas_set")
    path = "" if pick == _NONE else pick
    if pick == _OTHER:
        path = c1.text_input("path of a measured set", key="meas_path").strip()
    profiles = ["default", "roofline"]
    try:
        from mlacalc.timemodel.profile import shipped_profiles

        profiles = [_AUTO, *sorted(set(shipped_profiles()) - {_AUTO}), "roofline"]
    except (ImportError, MlacalcError):
        pass
    profile = c2.selectbox(
        "profile",
        profiles,
        key="meas_profile",
        help="The calibration profile that predicts every row; 'roofline' is the plain "
        "roofline bound. 'default' is the shipped default profile, or, for a set it was "
        "fitted on, a shipped profile fitted on none of the set's devices (as `mlacalc "
        "validate --measured` chooses; the line below names the one used). A profile picked "
        "by name that was fitted on the set is refused.",
    )
    if not path:
        st.caption(
            "Choose a measured set (or give its path) to compare every row with its prediction."
        )
        return
    try:
        doc = _gpu_validation(path, profile, measured_fingerprint(path), engine)
    except MlacalcError as exc:
        st.error(str(exc))
        return
    o = doc["overall"]
    med = "-" if o["median_abs_error"] is None else f"{100 * o['median_abs_error']:.1f}%"
    st.markdown(
        f"Engine **{doc['engine']}** (the sidebar's serving engine: its tables and profiles). "
        f"Profile used: **{doc['profile']}**: {o['predicted']:,} of {o['rows']:,} rows "
        f"predicted, median |error| **{med}**; not predicted: {o['not_predicted']:,} "
        "(by reason per table below; quirk rules in docs/measured-sets.md)"
    )
    lacking = _uncalibrated(doc)
    if lacking:
        st.markdown(lacking)
    st.caption(
        f"Per-table statistics over every predicted row; the scatter samples at most "
        f"{_MAX_POINTS:,} rows per table. Every row's error: `mlacalc validate --measured "
        f"{path} --engine {doc['engine']} --rows`."
    )
    _scatter(doc["points"], key=f"meas_scatter_{path}_{profile}_{engine}")
    rows = []
    for t in doc["tables"]:
        rows.append(
            {
                "system": t["system"],
                "table": t["table"],
                "rows": t["rows"],
                "predicted": t["predicted"],
                "not predicted": t["not_predicted"],
                "median |error| %": None
                if t["median_abs_error"] is None
                else round(100 * t["median_abs_error"], 1),
                "signed median %": None
                if t["signed_median_error"] is None
                else round(100 * t["signed_median_error"], 1),
                "p90 |error| %": None
                if t["p90_abs_error"] is None
                else round(100 * t["p90_abs_error"], 1),
                "not predicted by reason": ", ".join(
                    f"{k} {n}" for k, n in t["not_predicted_by_reason"].items()
                ),
            }
        )
    show_table(rows, scope="One row per measured table; error = predicted / measured - 1.")
    download(
        [{k: v for k, v in t.items() if k != "rules"} for t in doc["tables"]],
        "validation-measured",
        "dl_val_measured",
    )


def _timed_row(r: dict[str, Any]) -> dict[str, Any]:
    """A microbenchmark row for the grid: times in s, ms or us as the command line prints them
    (a grid would round seconds to 0.003), the error in percent."""
    out: dict[str, Any] = {}
    for key, value in r.items():
        if key in ("measured_s", "predicted_s") and isinstance(value, (int, float)):
            out[key.removesuffix("_s")] = human_seconds(value)
        elif key == "error" and isinstance(value, (int, float)):
            out["error %"] = round(100 * value, 1)
        else:
            out[key] = value
    return out


#: What a microbenchmark set's error checks, said under each (a trial read the H200 sets'
#: 7.2% / 6.6% as the engines' accuracy)
BENCH_SCOPE = (
    "This set checks the unfused roofline against an eager PyTorch microbenchmark of one "
    "attention layer (each op its own kernel), not the engines' kernel model that times the "
    "Capacity planner (its tables are the sets above)."
)


def _bench_section() -> None:
    st.markdown(
        "**Microbenchmark sets** (the unfused roofline on the committed microbenchmark sets)"
    )
    for v in validation():
        st.markdown(
            f"{v['name']} on {v['device']}: median |error| **{100 * v['median_abs_error']:.1f}%**, "
            f"worst {100 * v['worst_abs_error']:.1f}% over {v['rows_validated']} rows"
        )
        st.caption(BENCH_SCOPE)
        fig = go.Figure()
        groups = sorted({r["impl"] if r["variant"] == "mla" else r["variant"] for r in v["rows"]})
        for group in groups:
            sel = [
                r
                for r in v["rows"]
                if (r["impl"] if r["variant"] == "mla" else r["variant"]) == group
            ]
            fig.add_trace(
                go.Scatter(
                    x=[r["measured_s"] for r in sel],
                    y=[r["predicted_s"] for r in sel],
                    mode="markers",
                    name=group,
                )
            )
        lo = min(r["measured_s"] for r in v["rows"])
        hi = max(r["measured_s"] for r in v["rows"])
        fig.add_trace(
            go.Scatter(
                x=[lo, hi],
                y=[lo, hi],
                mode="lines",
                name="predicted = measured",
                line={"dash": "dash"},
            )
        )
        fig.update_xaxes(type="log", title="measured (s)", dtick="D2")  # 1, 2, 5: not every digit
        fig.update_yaxes(type="log", title="predicted (s)", dtick="D2")
        fig.update_layout(height=380, margin={"t": 20})
        st.plotly_chart(fig, width="stretch", key=f"val_{v['name']}")
        show_table(
            [_timed_row(r) for r in v["rows"]],
            scope="Per attention layer, as the microbenchmark times it (one layer, one step); "
            "times in s, ms or us (exact seconds in the downloads); error = predicted / "
            "measured - 1.",
        )
        download(v["rows"], f"validation-{v['name']}", f"dl_val_{v['name']}")


def render(sc: Scenario) -> None:
    _gpu_section(sc.engine)
    _bench_section()
