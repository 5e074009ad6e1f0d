"""The plan and search defects of the user trial (2026-11-27): each fails before its fix."""

from __future__ import annotations

import json

import pytest

from mlacalc.cli import main
from mlacalc.planner import plan
from mlacalc.serving.search import search


@pytest.fixture
def run(capsys):
    def _run(*args, code=0):
        rc = main([str(a) for a in args])
        out, err = capsys.readouterr()
        assert rc == code, (out, err)
        return out, err

    return _run


# ---------------------------------------------------------------- 1: nothing fits, no crash
def test_search_where_no_batch_fits_is_an_answer_not_an_internal_error(run):
    """Pipeline layouts where no batch fits used to reach np.max of an empty array."""
    r = search(
        "llama-3-70b",
        "H100-SXM",
        [2],
        isl=1 << 20,
        osl=500,
        weight_dtypes=("fp8",),
        kv_dtypes=("fp8",),
    )
    assert r.best is None and not r.points
    assert set(r.ruled_out) == {"does not fit: kv cache"}
    out, err = run(
        "search", "llama-3-70b", "-H", "H100", "--isl", "1M", "--osl", "500", "--gpus", "2",
        "--weight-dtypes", "fp8", "--kv-dtypes", "fp8",
    )  # fmt: skip
    assert "internal error" not in err
    assert "does not fit: kv cache" in out
    assert "No deployment of llama-3-70b on H100-SXM can serve requests of 1,048,576" in " ".join(
        out.split()
    )
    assert "meets no latency targets" not in out


def test_search_deepseek_at_4m_tokens_runs():
    r = search("deepseek-v3", "H200", [8], isl=4 << 20, osl=500, kv_dtypes=("fp8",))
    # one 4M-token sequence fits only in pipeline layouts (the cache split by stage)
    assert all(p["pp"] > 1 for p in r.points)
    assert r.ruled_out.get("does not fit: kv cache", 0) > 0


# ---------------------------------------------------------------- 2: a batch beyond capacity
def test_plan_batch_beyond_capacity_does_not_fit_and_says_what_was_timed(run):
    p = plan("deepseek-v3", "H200", 8, seq_len=131072, batch=1000)
    assert p.max_batch == 4 and p.batch == 1000
    assert not p.fits
    assert p.overflow.startswith("kv cache: a batch of 1,000 at 131,072 tokens does not fit: 4 do")
    assert p.overflow.endswith("the times are for a batch of 4")
    assert p.decode_batch == 4 and p.decode_running == 4.0 and p.decode_step_s > 0
    assert p.binding == "kv capacity"
    # the same figures as a plan at the batch that fits, which does fit
    at4 = plan("deepseek-v3", "H200", 8, seq_len=131072, batch=4)
    assert at4.fits and at4.overflow is None
    assert at4.decode_step_s == p.decode_step_s
    doc = json.loads(run("plan", "deepseek-v3", "-H", "H200", "--gpus", 8, "--batch", 1000,
                         "--format", "json")[0])  # fmt: skip
    assert doc["fits"] is False and doc["batch"] == 1000 and doc["decode_batch"] == 4
    assert "does not fit: 4 do" in doc["overflow"]
    text = " ".join(
        run("plan", "deepseek-v3", "-H", "H200", "--gpus", 8, "--batch", 1000)[0].split()
    )
    assert "fits │ no: kv cache: a batch of 1,000" in text
    assert "decode step at batch 4 (the largest that fits; 1,000 asked)" in text


# ---------------------------------------------------------------- 3: flags the mix overrides
@pytest.mark.parametrize(
    ("extra", "flag"), [(["--batch", "8"], "--batch"), (["--seq-len", "4k"], "--seq-len")]
)
def test_plan_refuses_capacity_flags_with_a_request_mix(run, extra, flag):
    _, err = run(
        "plan", "deepseek-v3", "-H", "H200", "--isl", 2000, "--osl", 500, *extra, code=2
    )  # fmt: skip
    assert err.count("\n") == 1 and flag in err and "--isl/--osl" in err
    if flag == "--batch":
        assert "--concurrency" in err


def test_plan_default_seq_len_with_a_mix_is_still_fine(run):
    out, _ = run("plan", "llama-3-8b", "-H", "H100", "--gpus", 1, "--isl", 100, "--osl", 100)
    assert "TTFT" in out


# ---------------------------------------------------------------- 4: search -> plan
def test_search_prints_the_prefill_pool_and_plan_reproduces_the_point(run):
    kw = dict(isl=2000, osl=500, ttft=2.0, tpot=0.05)
    r = search("deepseek-v3", "H200", [8, 16], **kw)
    dis = [p for p in r.points if p["mode"] == "disaggregated"]
    assert dis and all(p["prefill_layout"] for p in dis)
    # the best and a few other disaggregated points: plan of the same deployment, prefill pool
    # layout included, gives the same figures
    picks = [r.best, *dis[:: max(len(dis) // 4, 1)]]
    for b in picks:
        if b["mode"] != "disaggregated":
            continue
        p = plan(
            "deepseek-v3",
            "H200",
            b["decode_gpus"],
            tp=b["tp"],
            ep=b["ep"],
            pp=b["pp"],
            dp_attention=b["dp_attention"],
            redundant_experts=b["redundant_experts"],
            overlap=b["overlap"],
            kv_dtype=b["kv_dtype"],
            isl=2000,
            osl=500,
            concurrency=b["concurrency"],
            mode="disaggregated",
            prefill_gpus=b["prefill_gpus"],
            prefill_tp=b["prefill_tp"],
            prefill_ep=b["prefill_ep"],
            prefill_dp_attention=b["prefill_dp_attention"],
            prefill_redundant_experts=b["prefill_redundant_experts"],
        )
        assert p.prefill_layout == b["prefill_layout"]
        assert p.ttft_s == pytest.approx(b["ttft_s"], rel=1e-9)
        assert p.tpot_s == pytest.approx(b["tpot_s"], rel=1e-9)
        assert p.output_tokens_per_s_per_gpu == pytest.approx(
            b["output_tokens_per_s_per_gpu"], rel=1e-9
        )
    # the CLI prints the pool and the plan command line that gives the same figures
    out, _ = run(
        "search", "deepseek-v3", "-H", "H200", "--gpus", "8,16", "--isl", 2000, "--osl", 500,
        "--ttft", "2s", "--tpot", "50ms", "--format", "json",
    )  # fmt: skip
    doc = json.loads(out)
    assert doc["best"]["prefill_layout"] == r.best["prefill_layout"]
    cmd = doc["plan_command"].split()
    assert cmd[:2] == ["mlacalc", "plan"]
    again = json.loads(run(*cmd[1:], "--format", "json")[0])
    assert again["ttft_s"] == pytest.approx(r.best["ttft_s"], rel=1e-9)
    assert again["tpot_s"] == pytest.approx(r.best["tpot_s"], rel=1e-9)
    table = " ".join(run("search", "deepseek-v3", "-H", "H200", "--gpus", "8,16", "--isl", 2000,
                         "--osl", 500, "--ttft", "2s", "--tpot", "50ms")[0].split())  # fmt: skip
    if r.best["mode"] == "disaggregated":
        assert "+ prefill" in table
    assert "The same figures: mlacalc plan deepseek-v3" in table


def test_plan_prefill_flags_need_disaggregated(run):
    _, err = run(
        "plan", "llama-3-8b", "-H", "H100", "--gpus", 2, "--isl", 100, "--osl", 100,
        "--prefill-tp", 1, code=2,
    )  # fmt: skip
    assert "--prefill-tp" in err and "--mode disaggregated" in err


# ---------------------------------------------------------------- 5, 6: --profile, provenance
def test_plan_and_search_take_profile_and_say_how_the_device_was_predicted(run):
    h200 = plan("deepseek-v3", "H200", 8, seq_len=32768, batch=8)
    assert h200.profile == "default"
    assert "H200 by datasheet ratios from H100-SXM" in h200.calibration
    own = plan("llama-3-8b", "H100-SXM", 1, seq_len=4096, batch=8, profile="fit-a100-sxm-80gb")
    assert own.profile == "fit-a100-sxm-80gb"
    assert "H100-SXM by datasheet ratios" in own.calibration
    base = plan("llama-3-8b", "H100-SXM", 1, seq_len=4096, batch=8)
    assert base.calibration.startswith("calibrated on H100-SXM")
    assert own.decode_step_s != base.decode_step_s  # the profile reached the predictions
    out, _ = run("plan", "llama-3-8b", "-H", "H100", "--gpus", 1, "--seq-len", "4k",
                 "--batch", 8, "--profile", "fit-a100-sxm-80gb", "--format", "json")  # fmt: skip
    doc = json.loads(out)
    assert doc["profile"] == "fit-a100-sxm-80gb"
    assert doc["decode_step_s"] == pytest.approx(own.decode_step_s, rel=1e-12)
    text = " ".join(run("plan", "deepseek-v3", "-H", "H200", "--gpus", 8)[0].split())
    assert "profile default: H200 by datasheet ratios from H100-SXM" in text
    csv = run("plan", "deepseek-v3", "-H", "H200", "--gpus", 8, "--format", "csv")[0]
    assert "calibration,H200 by datasheet ratios from H100-SXM" in csv
    r = search("llama-3-8b", "H100-SXM", [1], isl=1000, osl=200, profile="fit-a100-sxm-80gb")
    assert r.profile == "fit-a100-sxm-80gb" and "H100-SXM by datasheet ratios" in r.calibration
    plain = search("llama-3-8b", "H100-SXM", [1], isl=1000, osl=200)
    assert r.best["tpot_s"] != plain.best["tpot_s"]
    rows = run("search", "llama-3-8b", "-H", "H100", "--gpus", 1, "--isl", 1000, "--osl", 200,
               "--profile", "fit-a100-sxm-80gb", "--format", "csv")[0]  # fmt: skip
    assert rows.splitlines()[0].endswith("profile,calibration")
    assert "fit-a100-sxm-80gb" in rows.splitlines()[1]


@pytest.mark.parametrize("command", ["plan", "search"])
def test_bad_profile_is_one_line_naming_the_option(run, tmp_path, command):
    bad = tmp_path / "bad.json"
    bad.write_text("{", encoding="utf-8")
    for value, why in ((tmp_path / "missing.json", "no profile"), (bad, "is not valid JSON")):
        args = [command, "llama-3-8b", "-H", "H100", "--gpus", 1, "--profile", value]
        if command == "search":
            args += ["--isl", 100, "--osl", 100]
        _, err = run(*args, code=2)
        assert err.count("\n") == 1 and err.startswith(
            "mlacalc: error: Invalid value for --profile"
        )
        assert why in err and "No such option" not in err


# ---------------------------------------------------------------- 7: wording
def test_search_titles_say_the_targets_with_their_units(run):
    out, _ = run(
        "search", "llama-3-8b", "-H", "H100", "--gpus", 1, "--isl", 1000, "--osl", 200,
        "--tpot", "50us",
    )  # fmt: skip
    text = " ".join(out.split())
    assert "meets TPOT <= 50 us" in text and "0.0 ms" not in text.split("┃")[0]
    out, _ = run(
        "search", "llama-3-8b", "-H", "H100", "--gpus", 1, "--isl", 1000, "--osl", 200,
        "--ttft", "2s", "--tpot", "1.5ms",
    )  # fmt: skip
    text = " ".join(out.split())
    assert "TTFT <= 2 s" in text and "TPOT <= 1.5 ms" in text


def test_plan_labels_the_mean_running_batch_it_timed(run):
    p = plan("llama-3-70b", "H100-SXM", 4, weight_dtype="bf16", isl=467, osl=256, request_rate=4)
    assert p.decode_running == pytest.approx(p.running_batch_per_group * p.dp)
    assert p.decode_running != round(p.decode_running)
    out, _ = run(
        "plan", "llama-3-70b", "-H", "H100-SXM", "--gpus", 4, "--weight-dtype", "bf16",
        "--isl", 467, "--osl", 256, "--request-rate", 4,
    )  # fmt: skip
    text = " ".join(out.split())
    assert f"decode step at batch {p.decode_running:,.2f} (the mean running sequences)" in text
    assert f"decode step at batch {p.decode_batch} " not in text
