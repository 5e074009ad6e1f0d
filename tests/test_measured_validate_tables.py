"""validate(measured=...): per-table and overall errors, the JSON of DESIGN.md, and the rule
that a profile never validates the data it was fitted on."""

from __future__ import annotations

import json

import numpy as np
import pytest
from reference_data import MEASURED

from mlacalc import validate
from mlacalc.words.errors import InvalidArgumentError

_STATS = ("median_abs_error", "signed_median_error", "p90_abs_error")
_TABLE_KEYS = {
    "table",
    "system",
    "framework",
    "version",
    "rows",
    "predicted",
    "not_predicted",
    *_STATS,
}


@pytest.fixture(scope="module")
def ref():
    pytest.importorskip("pyarrow.parquet")
    return MEASURED


@pytest.fixture(scope="module")
def a100_roofline(ref):
    return validate(measured=ref / "a100_sxm", profile="roofline")


def test_json_has_the_fields_design_md_specifies(a100_roofline):
    doc = json.loads(json.dumps(a100_roofline.to_dict()))
    assert set(doc["overall"]) == {"rows", "predicted", "not_predicted", *_STATS}
    for t in doc["tables"]:
        assert set(t) >= _TABLE_KEYS
        assert t["rows"] == t["predicted"] + t["not_predicted"]
        assert sum(t["not_predicted_by_reason"].values()) == t["not_predicted"]
    assert doc["overall"]["rows"] == sum(t["rows"] for t in doc["tables"])
    assert doc["overall"]["predicted"] == sum(t["predicted"] for t in doc["tables"])
    assert "roofline" in doc["profile"]


def test_errors_are_fractions_recomputed_from_the_rows(a100_roofline):
    t = next(t for t in a100_roofline.tables if t.table == "gemm_perf")
    recs = [r for r in t.row_records() if r["error"] is not None]
    err = np.array([r["predicted_s"] / r["measured_s"] - 1 for r in recs])
    s = t.summary()
    assert s["median_abs_error"] == pytest.approx(np.median(np.abs(err)))
    assert s["signed_median_error"] == pytest.approx(np.median(err))
    assert s["p90_abs_error"] == pytest.approx(np.percentile(np.abs(err), 90))
    # the plain roofline is an ideal: almost every GEMM row is predicted too fast
    assert s["signed_median_error"] < 0
    assert set(s["not_predicted_by_reason"]) == {"spike"}


def test_roofline_has_no_link_term_so_collectives_are_not_predicted(a100_roofline):
    nccl = next(t for t in a100_roofline.tables if t.table == "nccl_perf")
    assert nccl.summary()["predicted"] == 0
    assert nccl.not_predicted_by_reason() == {"no_time_model": 504}


def test_a_profile_fitted_on_the_set_is_refused(ref):
    from mlacalc.timemodel.profile import Profile

    fitted = Profile(
        name="h100-only",
        fitted_on=({"device": "H100-SXM", "tables": {"gemm_perf": 10}, "sources": []},),
    )
    with pytest.raises(InvalidArgumentError, match="fitted on H100-SXM/gemm_perf"):
        validate(measured=ref / "h100_sxm" / "gemm", profile=fitted)
    # the same profile may validate the other device
    v = validate(measured=ref / "a100_sxm" / "mla_bmm", profile=fitted)
    assert v.overall["predicted"] == 424


def test_default_profile_never_predicts_its_own_fitting_data(ref):
    from mlacalc.measured.validate_tables import _fitted_tables
    from mlacalc.timemodel.profile import load_profile

    fitted = _fitted_tables(load_profile(None))
    if ("H100-SXM", "mla_bmm_perf") not in fitted:
        pytest.skip("the shipped default profile is not fitted on H100-SXM")
    v = validate(measured=ref / "h100_sxm" / "mla_bmm")
    # the default's devices (all of them), not only the validated set's
    on = " and ".join(sorted({d for d, _ in fitted}))
    assert f"default profile was fitted on {on}, these H100-SXM tables included" in v.profile
    assert ("H100-SXM", "mla_bmm_perf") not in _fitted_tables(load_profile(v.profile.split()[0]))
    # it says which profile plan uses on the device (the one refused here), and how to validate
    # that one held out: the same tables of a device it was not fitted on
    assert v.plan_profiles == {"H100-SXM": "default"}
    assert "mlacalc plan on H100-SXM uses default" in v.profile_note
    command = v.profile_note.split("held out: ")[-1]
    assert command.startswith("mlacalc validate --measured ") and "--profile default" in command
    other = command.split()[3]
    assert "b200_sxm" in other and "mla_bmm" in other
    held_out = validate(measured=other, profile="default")  # not refused: not fitted on B200
    assert held_out.overall["predicted"] > 0
    with pytest.raises(InvalidArgumentError, match="proves nothing"):
        validate(measured=ref / "h100_sxm" / "mla_bmm", profile="default")
    # both devices at once: each predicted by a profile not fitted on it
    both = validate(measured=[ref / "h100_sxm" / "mla_bmm", ref / "a100_sxm" / "mla_bmm"])
    assert "H100-SXM:" in both.profile and "A100-SXM-80GB:" in both.profile
    for t in both.tables:
        assert t.profile and t.device not in {d for d, _ in _fitted_tables(load_profile(t.profile))}


def test_errors_by_table_kind_split_a_table_by_dtype(a100_roofline):
    """A pooled median hid a dtype far off (TensorRT-LLM's B200 nvfp4 GEMMs at -46% at
    m <= 64 under a pooled 14.8%): the errors also come by table kind, gemm_perf by dtype."""
    kinds = a100_roofline.by_kind
    gemm = [k for k in kinds if k["kind"].startswith("gemm_perf:")]
    assert len(gemm) > 1
    assert sum(k["rows"] for k in kinds) == a100_roofline.overall["rows"]
    t = next(t for t in a100_roofline.tables if t.table == "gemm_perf")
    for k in gemm:
        dtype = k["kind"].split(":")[1]
        sel = (t.kinds() == k["kind"]) & t.predicted_mask
        err = t.predicted_s[sel] / t.measured_s[sel] - 1
        assert k["median_abs_error"] == pytest.approx(np.median(np.abs(err))), dtype
    assert json.loads(json.dumps(a100_roofline.to_dict()))["by_kind"] == kinds
    # a profile given: no note of another one
    assert a100_roofline.plan_profiles == {} and a100_roofline.profile_note == ""


def test_time_model_predicts_every_modelled_row(ref):
    from mlacalc.timemodel.profile import Profile

    v = validate(measured=ref / "a100_sxm" / "comm", profile=Profile(name="datasheet-defaults"))
    for t in v.tables:
        assert t.summary()["predicted"] == t.rows - sum(
            n for k, n in t.not_predicted_by_reason().items() if k != "no_time_model"
        )
        assert "no_time_model" not in t.not_predicted_by_reason()


def test_microbenchmark_files_keep_working_both_ways():
    from mlacalc.measured.validate import ValidationSet, default_measurement_files

    sets = validate()
    assert sets and all(isinstance(s, ValidationSet) for s in sets)
    path = default_measurement_files()[0]
    v = validate(measured=path)
    (t,) = v.tables
    old = sets[0]
    assert t.summary()["predicted"] == len(old.rows)
    assert t.summary()["median_abs_error"] == pytest.approx(old.median_abs_error)


def test_bad_arguments_name_themselves():
    with pytest.raises(InvalidArgumentError, match="profile"):
        validate(profile="roofline")
    with pytest.raises(InvalidArgumentError, match="files"):
        validate(["x.json"], measured="y")


def test_a_device_folder_without_the_engines_tables_is_refused_as_one_folder_is(
    ref, tmp_path, capsys
):
    # a100_sxm --engine sglang validated A100's engine-neutral NCCL alone and printed it as
    # SGLang's figure (exit 0); one folder of another engine was refused already
    import shutil

    from mlacalc.cli import main
    from mlacalc.measured import validate_tables as vt
    from mlacalc.words.errors import ConfigError

    rc = main(["validate", "--measured", str(ref / "a100_sxm"), "--engine", "sglang"])
    err = capsys.readouterr().err
    assert rc == 2 and len(err.strip().splitlines()) == 1
    # a review: "holds no tables ..., only tables every engine shares (it holds: trtllm)"
    assert "field 'engine': holds no tables of engine 'sglang': its tables are trtllm's and " in err
    assert "ones every engine shares (NCCL) (pass --engine trtllm (engine='trtllm' in" in err
    comm = tmp_path / "a100_sxm" / "comm"
    shutil.copytree(ref / "a100_sxm" / "comm", comm)
    with pytest.raises(
        ConfigError, match=r"no tables of engine 'sglang': its tables are trtllm's and ones every"
    ):
        validate(measured=comm, engine="sglang")
    assert validate(measured=comm, engine="trtllm").overall["predicted"] > 0

    # the mutations: a table of the engine beside them is validated; NCCL's folder named
    # alone (no other engine's table in it) is the user's own choice
    def as_sglang(folder):  # SGLang's B200 all-reduce table, its rows said to be A100's
        import pyarrow as pa
        import pyarrow.parquet as pq

        shutil.copytree(ref / "b200_sxm" / "comm" / "sglang", folder)
        (path,) = folder.rglob("*.parquet")
        t = pq.read_table(path)
        a100 = pa.array(["NVIDIA A100-SXM4-80GB"] * len(t))
        pq.write_table(t.set_column(t.schema.get_field_index("device"), "device", a100), path)

    as_sglang(comm / "sglang")
    assert {t.table for t in validate(measured=comm, engine="sglang").tables} == {
        "nccl_perf",
        "custom_allreduce_perf",
    }
    assert validate(measured=comm / "nccl", engine="sglang").overall["predicted"] > 0
    # the "profiles" line's held-out command names no sibling that holds none of the
    # engine's tables (A100's NCCL and TensorRT-LLM tables are no SGLang set)
    b200 = tmp_path / "b200_sxm" / "comm"
    shutil.copytree(ref / "b200_sxm" / "comm" / "sglang", b200 / "sglang")
    shutil.rmtree(comm / "sglang")
    tables = [type("T", (), {"system": "b200_sxm", "device": "B200"})()]
    prof = vt.load_profile("fit-b200-sxm-sglang")
    assert vt._held_out_command((str(b200),), tables, prof, "sglang") == ""
    as_sglang(comm / "sglang")
    assert vt._held_out_command((str(b200),), tables, prof, "sglang") == (
        f"mlacalc validate --measured {comm} --profile fit-b200-sxm-sglang --engine sglang"
    )


def test_cli_validate_measured_json_and_rows(ref, capsys):
    from mlacalc.cli import main

    def run(*args):
        rc = main(list(args))
        out, err = capsys.readouterr()
        return rc, out, err

    path = str(ref / "a100_sxm" / "mla_bmm")
    rc, out, _ = run("validate", "--measured", path, "--profile", "roofline", "--format", "json")
    assert rc == 0
    doc = json.loads(out)
    assert doc["overall"]["rows"] == 424 and doc["tables"][0]["table"] == "mla_bmm_perf"
    rc, out, _ = run("validate", "--measured", path, "--rows", "--format", "csv")
    lines = out.strip().splitlines()
    assert (
        rc == 0 and len(lines) == 1 + 424 and "measured_s" in lines[0] and "num_heads" in lines[0]
    )
    rc, out, _ = run("validate", "--measured", path)
    assert rc == 0 and "mla_bmm_perf" in out and "median |error|" in out
    rc, _, err = run("validate", "--measured", str(ref / "nope"))
    assert rc == 2 and "no such file" in err and len(err.strip().splitlines()) == 1
    rc, _, err = run("validate", "--profile", "roofline")
    assert rc == 2 and "--measured" in err


def test_an_engine_without_a_default_is_predicted_by_its_own_fit_of_another_device(ref):
    # --engine sglang on B200 said "trtllm kernels stand in for sglang: no sglang profile fits
    # these devices" while SGLang's B200 fit was left out because it was fitted on these rows
    v = validate(measured=ref / "b200_sxm" / "mla_bmm", engine="SGLang")
    assert v.engine == "sglang" and "stand in for sglang" not in v.profile
    assert v.profile.startswith("fit-h100-sxm-sglang (sglang's fit-b200-sxm-sglang was fitted on ")
    assert all(t.profile == "fit-h100-sxm-sglang" for t in v.tables)


def test_a_stand_in_says_truthfully_why(ref, monkeypatch):
    # with SGLang's one profile fitted on these tables, TensorRT-LLM's stands in and says why
    import mlacalc.measured.validate_tables as vt

    names = [n for n in vt.shipped_profiles() if n != "fit-h100-sxm-sglang"]
    monkeypatch.setattr(vt, "shipped_profiles", lambda: names)
    v = validate(measured=ref / "b200_sxm" / "mla_bmm", engine="sglang")
    assert v.profile == (
        "default [trtllm kernels stand in for sglang: sglang's fit-b200-sxm-sglang was fitted "
        "on these tables and no other sglang profile ships]"
    )
    monkeypatch.setattr(vt, "shipped_profiles", lambda: ["default"])
    v = validate(measured=ref / "b200_sxm" / "mla_bmm", engine="sglang")
    assert v.profile == "default [trtllm kernels stand in for sglang: no sglang profile ships]"


def test_a_microbenchmark_set_is_headed_as_eager_pytorch_not_an_engine(capsys):
    # validate --measured <the H200 microbenchmark run> was headed "engine trtllm" (a trial):
    # its rows are eager PyTorch, which no serving engine runs
    from mlacalc.cli import main

    run = MEASURED.parent / "measurements" / "cpu-2core-epyc-fp32.json"
    assert main(["validate", "--measured", str(run)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert out.startswith("eager PyTorch (the microbenchmark): predicted (")
    assert "engine trtllm" not in out
