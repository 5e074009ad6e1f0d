"""``mlacalc calibrate --base``: a profile fitted on a few tables of a new device (a user's L40S
GEMM table) times every class those tables do not fit by a shipped profile's fit, not by the
datasheet defaults; a base of another engine, a name that is no profile, a file that is no
profile and an empty profile are one line naming the base, said before any fitting."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

pa = pytest.importorskip("pyarrow")  # reading parquet tables needs the measured extra
import pyarrow.parquet as pq  # noqa: E402
from reference_data import MEASURED  # noqa: E402

import mlacalc  # noqa: E402
import mlacalc.measured.calibrate as calibrate_module  # noqa: E402
from mlacalc.hardware.catalogue import load_hardware  # noqa: E402
from mlacalc.measured.calibrate import with_base  # noqa: E402
from mlacalc.timemodel.engine_profiles import STAND_IN_NOTE  # noqa: E402
from mlacalc.timemodel.profile import BASE_NOTE, Profile, load_profile  # noqa: E402
from mlacalc.words.errors import ConfigError, InvalidArgumentError  # noqa: E402

SOURCE = MEASURED / "a100_sxm/gemm/trtllm/1.0.0"


@pytest.fixture(scope="module")
def l40s(tmp_path_factory) -> Path:
    """Every 400th row of A100's GEMM table, as an L40S table a user measured."""
    table = pq.read_table(SOURCE / "gemm_perf.parquet").take(list(range(0, 27384, 400)))
    i = table.column_names.index("device")
    table = table.set_column(i, "device", pa.array(["NVIDIA L40S"] * table.num_rows))
    root = tmp_path_factory.mktemp("user")
    folder = root / "l40s/gemm/trtllm/1.0.0"
    folder.mkdir(parents=True)
    shutil.copy(SOURCE / "collection_meta.yaml", folder)
    pq.write_table(table, folder / "gemm_perf.parquet")
    return root / "l40s"


@pytest.fixture(scope="module")
def fits(l40s):
    plain = mlacalc.calibrate(l40s, use_scipy=False, name="l40s")
    based = mlacalc.calibrate(l40s, use_scipy=False, name="l40s", base="default")
    return plain, based


HW = load_hardware("L40S")


def test_the_classes_the_tables_do_not_fit_are_the_bases(fits):
    plain, based = fits
    default = load_profile("default")
    for kind, dtype in [("attention_decode", "bf16"), ("attention_prefill", "bf16")]:
        alone, how_alone = plain.params("L40S", kind, dtype, HW)
        mine, how = based.params("L40S", kind, dtype, HW)
        theirs, _ = default.params("L40S", kind, dtype, HW)
        assert how_alone.startswith("uncalibrated")  # without a base: datasheet defaults
        assert not how.startswith("uncalibrated") and mine == theirs
        assert alone != mine
    # the class the tables fit stays the user's own fit of L40S, not the base's
    assert based.params("L40S", "gemm", "bf16", HW) == plain.params("L40S", "gemm", "bf16", HW)
    assert based.devices["L40S"] == plain.devices["L40S"]
    assert based.residuals["L40S"] == plain.residuals["L40S"]


def test_the_merged_profile_says_what_it_took_and_keeps_both_provenances(fits):
    plain, based = fits
    default = load_profile("default")
    assert based.fitted_on == (*default.fitted_on, *plain.fitted_on)
    notes = [n for n in based.notes if n.startswith(BASE_NOTE)]
    assert len(notes) == 1 and "profile default's (trtllm)" in notes[0]
    assert f"{len(set(default.classes) - set(plain.classes))} pooled class(es)" in notes[0]
    line = based.describe("L40S", HW, assumed=False)
    own = len(plain.devices["L40S"])
    assert f"L40S by its own fit of {own} class(es)" in line and "profile default's fits" in line


def test_a_roofline_with_the_merged_profile_leaves_no_kernel_uncalibrated(fits, tmp_path):
    _, based = fits
    path = based.save(tmp_path / "l40s.json")
    args = ("llama-3.1-8b", "L40S", "decode")
    step = mlacalc.predict_time(*args, scope="model", seq_len=4096, batch=8, profile=str(path))
    assert not [o.name for o in step.ops if o.calibration.startswith("uncalibrated")]
    default = mlacalc.predict_time(*args, scope="model", seq_len=4096, batch=8)
    attn = {o.name: o.seconds for o in step.ops if o.kind != "matmul" or o.name == "attention"}
    theirs = {o.name: o.seconds for o in default.ops if o.name in attn}
    assert attn == pytest.approx(theirs, rel=1e-12)  # not the GEMMs: those are the user's


def test_a_base_of_another_engine_is_refused_before_fitting(l40s, monkeypatch):
    def no_fit(*a, **k):  # pragma: no cover - reached only if the base is checked too late
        raise AssertionError("fitted before the base was checked")

    monkeypatch.setattr(calibrate_module, "fit_profile", no_fit)
    with pytest.raises(InvalidArgumentError, match=r"^base: profile fit-h100-sxm-sglang was "
                       r"fitted on sglang's tables and this one on trtllm's"):  # fmt: skip
        mlacalc.calibrate(l40s, use_scipy=False, base="fit-h100-sxm-sglang")


@pytest.mark.parametrize(
    ("base", "said"),
    [
        ("no-such-profile", r"^base: no profile 'no-such-profile': give a shipped name"),
        (Profile(name="empty"), r"^base: profile empty holds no fitted class"),
    ],
)
def test_a_base_that_is_no_fitted_profile_is_one_line(fits, base, said):
    plain, _ = fits
    with pytest.raises(InvalidArgumentError, match=said) as err:
        with_base(plain, base)
    assert "\n" not in str(err.value)


def test_a_base_file_that_is_no_profile_names_the_file(fits, tmp_path):
    plain, _ = fits
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"name": "x"}), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"bad\.json.*field 'schema'"):
        with_base(plain, bad)


def test_another_engines_base_takes_the_classes_its_predictions_take(fits):
    plain, _ = fits
    sglang = Profile(
        name="mine", engine="sglang", devices={"L40S": plain.devices["L40S"]},
        classes=plain.classes, residuals=plain.residuals,
    )  # fmt: skip
    merged = with_base(sglang, "fit-h100-sxm-sglang")
    stood_in = [n for n in merged.notes if n.startswith(STAND_IN_NOTE)]
    assert stood_in  # the TensorRT-LLM classes no SGLang table times, said as stand-ins
    assert set(load_profile("fit-h100-sxm-sglang").classes) < set(merged.classes)


def test_the_cli_says_the_base_and_shows_its_own_residuals(l40s, tmp_path, run):
    out = tmp_path / "l40s.json"
    text, _ = run("calibrate", l40s, "--base", "default", "-o", out, "--format", "markdown")
    written = json.loads(out.read_text(encoding="utf-8"))
    assert any(n.startswith(BASE_NOTE) for n in written["notes"])
    assert "are profile default's (trtllm)" in text
    table = [line for line in text.splitlines() if line.startswith("| ") and "%" in line]
    assert table and all(line.startswith("| L40S | gemm:") for line in table)  # its own fit
    _, err = run("calibrate", l40s, "--base", "fit-b200-sxm-vllm", "-o", out, code=2)
    assert "--base" in err and "vllm's tables" in err and "Traceback" not in err
