"""The shipped profiles' records: ``fitted_on`` accounts for every row a class was fitted on,
and the device figure notes are the catalogue's current ones (benchmarks/refit_classes.py keeps
both when it refits some classes)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from reference_data import benchmark

from mlacalc.timemodel.device import DeviceFigures
from mlacalc.timemodel.fit import fallback_notes
from mlacalc.timemodel.profile import shipped_profiles

ROOT = Path(__file__).resolve().parent.parent
PROFILES = ROOT / "mlacalc" / "data" / "profiles"
FIGURES = tuple(f.name for f in dataclasses.fields(DeviceFigures))
FIX = "python benchmarks/refit_classes.py --classes '*' --record-only --profiles {}"


def _refit_tool():
    return benchmark("refit_classes")


def _profile(name: str) -> dict:
    return json.loads((PROFILES / f"{name}.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("name", shipped_profiles())
def test_device_figure_notes_are_current(name):
    data = _profile(name)
    for entry in data["fitted_on"]:
        device = entry["device"]
        prefixes = tuple(f"{device}: {f} = " for f in FIGURES)
        noted = [n for n in data["notes"] if n.startswith(prefixes)]
        fix = FIX.format(name)
        assert noted == fallback_notes(device), f"{name}: stale notes of {device}; run {fix}"


@pytest.mark.parametrize("name", shipped_profiles())
def test_fitted_on_counts_every_fitted_row(name):
    # fit_profile counts each row once, under its table and under its class: so per device the
    # tables' rows add up to the classes' rows; a class fitted on a table the record lacks (or
    # on more rows than it holds) breaks the sum
    data = _profile(name)
    assert {e["device"] for e in data["fitted_on"]} >= set(data["residuals"]), name
    for entry in data["fitted_on"]:
        device = entry["device"]
        tables = sum(entry["tables"].values())
        classes = sum(r["rows"] for r in data["residuals"].get(device, {}).values())
        assert tables == classes, f"{name} {device}: {tables} table rows, {classes} class rows"
        assert len(entry["sources"]) >= len(entry["tables"]), (name, device)


def test_merged_record_adds_new_tables_and_sources():
    tool = _refit_tool()
    old = [{"device": "B200", "tables": {"gemm_perf": 100, "moe_perf": 50}, "sources": ["a/g"]}]
    new = [{"device": "B200", "tables": {"gemm_perf": 30, "topk_perf": 7}, "sources": ["a/t"]}]
    out = tool.merged_record(old, new)
    assert out == [
        {
            "device": "B200",
            "tables": {"gemm_perf": 100, "moe_perf": 50, "topk_perf": 7},
            "sources": ["a/g", "a/t"],
        }
    ]
    assert old[0]["tables"] == {"gemm_perf": 100, "moe_perf": 50}  # not changed in place
    # a refit of every class recounts: its counts replace the record's
    full = tool.merged_record(old, new, every_class=True)
    assert full[0]["tables"] == {"gemm_perf": 30, "moe_perf": 50, "topk_perf": 7}
    # a refit whose classes alone now take more rows than the record held
    more = [{"device": "B200", "tables": {"moe_perf": 80}, "sources": []}]
    assert tool.merged_record(old, more)[0]["tables"]["moe_perf"] == 80
    # a device the record lacks is added
    h100 = [{"device": "H100-SXM", "tables": {"gemm_perf": 3}, "sources": ["h/g"]}]
    assert [e["device"] for e in tool.merged_record(old, h100)] == ["B200", "H100-SXM"]


def test_a_refit_of_some_classes_of_a_shared_table_recounts_only_theirs():
    """vLLM's B200 MLA decode classes are fitted on the residuals of both module tables, the
    prompt one shared with the MLA prompt classes. Their residual rows fell (6,349 -> 5,730:
    the GEMM refits since leave fewer rows where the decode is 25% of the row) while the record
    kept each table's larger count, so its tables outgrew its classes by 619 rows. The refit's
    tables now hold the other classes' rows plus the refit's own."""
    tool = _refit_tool()
    dec, pre = {"mla_decode:bf16": 3112, "mla_decode:fp8": 3237}, {"mla_prefill:bf16": 6122}
    data = {
        "fitted_on": [
            {"device": "B200", "tables": {"ctx": 6367, "gen": 6104, "gemm": 9}, "sources": []}
        ],
        "residuals": {"B200": {k: {"rows": n} for k, n in {**dec, **pre, "gemm:bf16": 9}.items()}},
    }
    new = {
        "fitted_on": [{"device": "B200", "tables": {"ctx": 187, "gen": 5543}, "sources": []}],
        "shared": {"B200": ["ctx"]},
    }
    patterns = list(dec)
    shares = tool.old_shares(data, new, patterns)
    assert shares == {"B200": {"gen": 6104, "ctx": 245}}
    out = tool.merged_record(data["fitted_on"], new["fitted_on"], shares=shares)[0]["tables"]
    assert out == {"ctx": 6122 + 187, "gen": 5543, "gemm": 9}
    assert sum(out.values()) == 187 + 5543 + 6122 + 9  # the classes' rows after the refit
    # two shared tables do not pin the split: left to the record's larger count
    two = dict(new, shared={"B200": ["ctx", "gen"]})
    assert tool.old_shares(data, two, patterns) == {}
    assert tool.merged_record(data["fitted_on"], new["fitted_on"])[0]["tables"]["ctx"] == 6367


def test_refreshed_notes_replace_stale_device_figures():
    tool = _refit_tool()
    notes = [
        "B200: quantize:fp8:amax not fitted (underdetermined)",
        "B200: link_latency_s = 3.33e-06 (assumed: an old figure)",
        "H100-SXM: link_multicast = 1 (a figure the catalogue now gives)",
        "gemm:*: refitted",
    ]
    out = tool.refreshed_notes(notes, ["B200", "H100-SXM"])
    assert out == [notes[0], *fallback_notes("B200"), *fallback_notes("H100-SXM"), notes[3]]
    assert all("3.33e-06" not in n for n in out)
    assert tool.refreshed_notes(out, ["B200", "H100-SXM"]) == out  # idempotent


def test_a_refit_keeps_the_stand_ins_its_notes_name():
    """vLLM's B200 profile lends SGLang's FlashMLA sparse class (its note says so): a refit of
    ``mla_decode:*`` had replaced it with a fit of the module rows' residuals."""
    tool = _refit_tool()
    notes = _profile("fit-b200-sxm-vllm")["notes"]
    assert "mla_decode:bf16:sparse" in tool.stand_in_classes(notes)
    assert "gemm:nvfp4" in tool.stand_in_classes(notes)  # SGLang's fit of the kernel
    new = {
        "classes": {"mla_decode:bf16:sparse": {"a": 1}, "mla_decode:bf16": {"a": 2}},
        "devices": {"B200": {"mla_decode:bf16:sparse": {"a": 3}}},
        "residuals": {"B200": {"mla_decode:bf16:sparse": {"rows": 1}, "mla_decode:bf16": {}}},
    }
    out = tool.without_classes(new, {"mla_decode:bf16:sparse"})
    assert list(out["classes"]) == ["mla_decode:bf16"]
    assert out["devices"] == {"B200": {}}
    assert list(out["residuals"]["B200"]) == ["mla_decode:bf16"]


def test_a_refit_keeps_the_residual_notes_of_classes_it_did_not_refit():
    """The default profile's residual fit note lists the TensorRT-LLM decode top-k and the
    sparse walk: a refit of ``mla_decode:*`` alone wrote a note of the walk only, and the
    top-k class (still in the profile, fitted on composite rows' residuals, 'where at least
    25% of the row') lost its note. Now one note lists both; a class dropped is not listed."""
    tool = _refit_tool()
    text = (PROFILES / "default.json").read_text(encoding="utf-8")
    walk, topk = "mla_decode:bf16:sparse_walk", "elementwise:bf16:topk_trtllm_decode"
    before = [n for n in json.loads(text)["notes"] if n.endswith(tool.RESIDUAL_NOTE)]
    assert len(before) == 1 and walk in before[0] and topk in before[0]
    data = json.loads(text)
    new = {
        "classes": {walk: data["classes"][walk]},
        "devices": {},
        "residuals": {},
        "fitted_on": [],
        "note": f"{walk}: {tool.RESIDUAL_NOTE}",
        "own": frozenset(),
    }
    out = json.loads(tool.merged(text, new, ["mla_decode:*"]))
    after = [n for n in out["notes"] if n.endswith(tool.RESIDUAL_NOTE)]
    assert after == [f"{topk}, {walk}: {tool.RESIDUAL_NOTE}"]
    assert [n for n in out["notes"] if n not in after] == [
        n for n in data["notes"] if n not in before
    ]
    # a class the refit drops (--drop-unfitted) leaves the note with it
    gone = dict(new, classes={}, drop=True, note=f"{walk}: {tool.RESIDUAL_NOTE}")
    data["classes"].pop(topk)
    out = json.loads(tool.merged(json.dumps(data), gone, ["elementwise:*", "mla_decode:*"]))
    assert [n for n in out["notes"] if n.endswith(tool.RESIDUAL_NOTE)] == [
        f"{walk}: {tool.RESIDUAL_NOTE}"
    ]


def test_vllm_h100_notes_its_msa_classes_fitted_on_residuals():
    """949d0da's refit of mla_decode:* (the walk) replaced fit-h100-sxm-vllm's note of its
    MiniMax-M3 block-sparse cores (fitted on the module rows' residuals, 1fd3313) with the
    walk's: the note is put back, one note for every such class, as the fixed tool writes."""
    tool = _refit_tool()
    notes = [n for n in _profile("fit-h100-sxm-vllm")["notes"] if n.endswith(tool.RESIDUAL_NOTE)]
    listed = {k for n in notes if tool._variant_note(n) for k in tool._noted(n)}
    for kind in ("bf16:msa", "bf16:msa_prefill", "fp8:msa", "fp8:msa_prefill"):
        assert f"attention_decode:{kind}" in listed


def test_vllm_b200_nvfp4_gemm_is_sglangs_fit_and_its_table_rows_a_variant():
    """vLLM's B200 nvfp4 projections (a module's, a served step's) take SGLang's B200 fit of
    FlashInfer's CuTe DSL linear; vLLM's eager gemm_perf rows keep their fit as a variant, which
    a profile without it times as the plain class and its stand-ins (profile.TIMING_VARIANTS)."""
    from mlacalc.hardware.catalogue import load_hardware
    from mlacalc.measured.mapping import VLLM_NVFP4_TABLE_VARIANT as var
    from mlacalc.timemodel.profile import TIMING_VARIANTS, load_profile

    assert var in TIMING_VARIANTS
    vllm, sglang = load_profile("fit-b200-sxm-vllm"), load_profile("fit-b200-sxm-sglang")
    assert vllm.params("B200", "gemm", "nvfp4")[0] == sglang.params("B200", "gemm", "nvfp4")[0]
    table = vllm.params("B200", "gemm", "nvfp4", variant=var)[0]
    assert table["fixed_s"] > vllm.params("B200", "gemm", "nvfp4")[0]["fixed_s"]
    hw, h100 = load_hardware("B200"), load_profile("fit-h100-sxm-vllm")
    assert h100.params("B200", "gemm", "nvfp4", hw, var) == h100.params("B200", "gemm", "nvfp4", hw)
