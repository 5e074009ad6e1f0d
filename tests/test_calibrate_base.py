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
from mlacalc.timemodel.profile import BASE_NOTE, Profile, based_on, load_profile  # noqa: E402
from mlacalc.words.errors import InvalidArgumentError  # noqa: E402

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
    assert len(notes) == 1 and "profile default (trtllm) gives every class" in notes[0]
    assert f"its {len(default.classes)} pooled class(es), which stay its own" in notes[0]
    assert based_on(based) == ("default", ["L40S"]) and based_on(plain) is None
    line = based.describe("L40S", HW, assumed=False)
    own = len(plain.devices["L40S"])
    assert f"L40S by its own fit of {own} class(es)" in line and "profile default's fits" in line
    # a device of the base is its own fit, not the user's (a review read "H100-SXM by its own
    # fit of 39 class(es), every other class by profile default's fits")
    h100 = based.describe("H100-SXM", load_hardware("H100-SXM"), assumed=False)
    assert h100.endswith("H100-SXM by its own fit") or "H100-SXM by its own fit;" in h100
    assert "calibrate --base" not in h100


def test_the_pooled_classes_stay_the_bases(fits):
    """A device neither profile fits is predicted as the base predicts it: the user's one-device
    fit does not become the pooled GEMM (a review's H200 sample over default moved L40S's
    Llama-3.1-8B step 28.04 -> 37.13 ms)."""
    _, based = fits
    default = load_profile("default")
    a30 = load_hardware("A30")
    for kind, dtype in [("gemm", "bf16"), ("attention_decode", "bf16"), ("gemm", "fp8")]:
        assert (
            based.params("A30", kind, dtype, a30)[0] == default.params("A30", kind, dtype, a30)[0]
        )
    assert based.classes["gemm:bf16"] == default.classes["gemm:bf16"]


def test_a_sibling_of_a_base_device_takes_that_devices_fit(tmp_path):
    """A user's H200 GEMM table over default (which holds H100's fit): the classes the table
    does not fit are H100's by datasheet ratios, as the default profile gives H200 them, not
    the pooled fit (a review: H200's Llama-3.1-8B attention 2,041.5 -> 1,922.6 us)."""
    table = pq.read_table(MEASURED / "h100_sxm/gemm/trtllm/1.3.0rc20/gemm_perf.parquet")
    table = table.take(list(range(0, table.num_rows, 1000)))
    i = table.column_names.index("device")
    table = table.set_column(i, "device", pa.array(["NVIDIA H200"] * table.num_rows))
    folder = tmp_path / "h200/gemm/trtllm/1.3.0rc20"
    folder.mkdir(parents=True)
    meta = MEASURED / "h100_sxm/gemm/trtllm/1.3.0rc20/collection_meta.yaml"
    shutil.copy(meta, folder)
    pq.write_table(table, folder / "gemm_perf.parquet")
    based = mlacalc.calibrate(tmp_path / "h200", use_scipy=False, base="default")
    default = load_profile("default")
    h200 = load_hardware("H200-SXM")
    assert based.fitted_devices == ["A100-SXM-80GB", "H100-SXM", "H200"]
    for kind in ("attention_decode", "attention_prefill", "elementwise", "moe"):
        mine, how = based.params("H200", kind, "bf16", h200)
        assert mine == default.params("H200", kind, "bf16", h200)[0], kind
        assert "H200 by datasheet ratios from H100-SXM (same tensor-core generation)" in how


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
    with pytest.raises(InvalidArgumentError, match=r"^base: .*bad\.json: field 'schema'"):
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
    assert "profile default (trtllm) gives every class the tables of L40S do not fit" in text
    table = [line for line in text.splitlines() if line.startswith("| ") and "%" in line]
    assert table and all(line.startswith("| L40S | gemm:") for line in table)  # its own fit
    _, err = run("calibrate", l40s, "--base", "fit-b200-sxm-vllm", "-o", out, code=2)
    assert "--base" in err and "vllm's tables" in err and "Traceback" not in err
