"""``mlacalc plan`` and ``mlacalc search`` together (and plan()/search() beneath them): nothing
fits, a batch beyond capacity, flags a request mix overrides, search -> plan reproducing a point,
--profile and provenance, wording, the groups holding requests, the prefill pool's pass, memory
and errors, CSV with nothing timed. Each test failed before its fix."""

from __future__ import annotations

import json
from operator import itemgetter

import pytest
from _helpers import plan_point

from mlacalc.serving.plan import plan
from mlacalc.serving.search import search


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
    # 5 sequences fit in an H200's 141 GiB (4 when the catalogue held 141e9 B)
    assert p.max_batch == 5 and p.batch == 1000
    assert not p.fits
    assert p.overflow.startswith("kv cache: a batch of 1,000 at 131,072 tokens does not fit: 5 do")
    assert p.overflow.endswith("the times are for a batch of 5")
    assert p.decode_batch == 5 and p.decode_running == 5.0 and p.decode_step_s > 0
    assert p.binding == "kv capacity"
    # the same figures as a plan at the batch that fits, which does fit
    at4 = plan("deepseek-v3", "H200", 8, seq_len=131072, batch=5)
    assert at4.fits and at4.overflow is None
    assert at4.decode_step_s == p.decode_step_s
    doc = json.loads(run("plan", "deepseek-v3", "-H", "H200", "--gpus", 8, "--batch", 1000,
                         "--format", "json")[0])  # fmt: skip
    assert doc["fits"] is False and doc["batch"] == 1000 and doc["decode_batch"] == 5
    assert "does not fit: 5 do" in doc["overflow"]
    text = " ".join(
        run("plan", "deepseek-v3", "-H", "H200", "--gpus", 8, "--batch", 1000)[0].split()
    )
    assert "fits │ no: kv cache: a batch of 1,000" in text
    assert "decode step at batch 5 (the largest that fits; 1,000 asked)" in text


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
        p = _plan_of("deepseek-v3", "H200", b, 2000, 500)
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
    # the device as roofline says it (Profile.describe), then the classes predicted otherwise
    assert base.calibration.startswith("calibrated on A100-SXM-80GB, H100-SXM; H100-SXM by its")
    assert own.decode_step_s != base.decode_step_s  # the profile reached the predictions
    out, _ = run("plan", "llama-3-8b", "-H", "H100", "--gpus", 1, "--seq-len", "4k",
                 "--batch", 8, "--profile", "fit-a100-sxm-80gb", "--format", "json")  # fmt: skip
    doc = json.loads(out)
    assert doc["profile"] == "fit-a100-sxm-80gb"
    assert doc["decode_step_s"] == pytest.approx(own.decode_step_s, rel=1e-12)
    text = " ".join(run("plan", "deepseek-v3", "-H", "H200", "--gpus", 8)[0].split())
    assert (
        "profile default: calibrated on A100-SXM-80GB, H100-SXM; H200 by datasheet ratios from "
        "H100-SXM" in text
    )
    csv = run("plan", "deepseek-v3", "-H", "H200", "--gpus", 8, "--format", "csv")[0]
    assert (
        "calibration,calibrated on A100-SXM-80GB, H100-SXM; H200 by datasheet ratios from "
        "H100-SXM" in csv.replace('"', "")
    )
    r = search("llama-3-8b", "H100-SXM", [1], isl=1000, osl=200, profile="fit-a100-sxm-80gb")
    assert r.profile == "fit-a100-sxm-80gb" and "H100-SXM by datasheet ratios" in r.calibration
    plain = search("llama-3-8b", "H100-SXM", [1], isl=1000, osl=200)
    assert r.best["tpot_s"] != plain.best["tpot_s"]
    rows = run("search", "llama-3-8b", "-H", "H100", "--gpus", 1, "--isl", 1000, "--osl", 200,
               "--profile", "fit-a100-sxm-80gb", "--format", "csv")[0]  # fmt: skip
    assert rows.splitlines()[0].endswith("profile,calibration,constraints")
    assert "fit-a100-sxm-80gb" in rows.splitlines()[1]


@pytest.mark.parametrize("command", ["plan", "search"])
def test_bad_profile_is_one_line_naming_the_option(run, tmp_path, command):
    bad = tmp_path / "bad.json"
    bad.write_text("{", encoding="utf-8")
    for value, why in ((tmp_path / "missing.json", "no file"), (bad, "is not valid JSON")):
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


def test_plan_says_the_mean_context_its_mix_step_was_timed_at(run):
    # a trial read "decode step at batch 64 | 69.91 ms" as the step at the whole request's
    # 5,500 tokens, which a warning beside it gave as 71.91 ms: the mix's step is timed at the
    # mean context, the prompt and half the output (5,000 + 500 / 2), and now says so
    mix = plan("deepseek-v3", "H200", 8, isl=5000, osl=500, concurrency=64, engine="sglang")
    alone = plan("deepseek-v3", "H200", 8, seq_len=5250, batch=64, engine="sglang")
    assert mix.decode_step_s == pytest.approx(alone.decode_step_s, rel=1e-12)
    out, _ = run(
        "plan", "deepseek-v3", "-H", "H200", "--gpus", 8, "--isl", 5000, "--osl", 500,
        "--concurrency", 64, "--engine", "sglang",
    )  # fmt: skip
    text = " ".join(out.split())
    assert "decode step at batch 64, at the mean context of 5,250 tokens" in text
    out, _ = run("plan", "deepseek-v3", "-H", "H200", "--gpus", 8, "--seq-len", "5250")
    assert "mean context" not in out  # a batch at one context: no mix, no mean


# ================================================================ review of 2026-11-27 (second)
_plan_of = plan_point  # plan of a search point's deployment at its concurrency


# ---------------------------------------------------------------- R1: fewer requests than groups
@pytest.mark.parametrize(
    "kw",
    [
        dict(model="llama-3-8b", hardware="H100", gpus=8, tp=1),
        dict(model="deepseek-v3", hardware="H200", gpus=8, tp=1, dp_attention=True, ep=8),
    ],
)
def test_throughput_counts_only_the_groups_holding_a_request(kw):
    """2 requests on 8 attention groups: 2 users' tokens, not 8 groups' (was 1164 / 424)."""
    p = plan(isl=2000, osl=500, concurrency=2, **kw)
    assert p.output_tokens_per_s <= 2 / p.tpot_s * (1 + 1e-9)
    assert p.decode_running == 2.0 and p.decode_batch == 2
    assert p.running_batch_per_group == pytest.approx(0.25)
    assert p.decode_tokens_per_s == pytest.approx(2 * p.tokens_per_step / p.decode_step_s)


def test_open_loop_running_count_is_the_mean_in_flight(run):
    p = plan("llama-3-8b", "H100", 8, tp=1, isl=2000, osl=500, request_rate=0.1)
    assert p.decode_running < 1  # was 8.0: a batch of one on every group
    assert p.decode_running == pytest.approx(p.running_batch_per_group * p.dp)
    # Little's law: the running requests are the rate times the time one stays, its TTFT and
    # the 499 gaps after its first token (to 1e-4: the fixed point's 1e-5; was 500 gaps to 1e-2)
    assert p.decode_running == pytest.approx(0.1 * (p.ttft_s + 499 * p.tpot_s), rel=1e-4)
    doc = json.loads(run("plan", "llama-3-8b", "-H", "H100", "--gpus", 8, "--tp", 1,
                         "--isl", 2000, "--osl", 500, "--concurrency", 2,
                         "--format", "json")[0])  # fmt: skip
    assert doc["decode_running"] == 2.0
    assert doc["output_tokens_per_s"] <= 2 / doc["tpot_s"] * (1 + 1e-9)


# ---------------------------------------------------------------- R2: near prefill saturation
def test_disaggregated_pass_keeps_up_and_ttft_waits_for_the_pass_in_progress():
    """The pass is the smallest that keeps up with the prompts (not those arriving during a
    one-prompt pass), and TTFT = rho t_pf[k] / 2 + t_pf[k] + KV transfer; search == plan
    at the point nearest prefill saturation."""
    import numpy as np

    from mlacalc.cost.engine import as_model
    from mlacalc.hardware.catalogue import load_hardware
    from mlacalc.serving.gpu_step import StepModel
    from mlacalc.serving.layout import make_layout
    from mlacalc.serving.plan import PREFILL_TOKENS
    from mlacalc.timemodel.profile import load_profile
    from mlacalc.words.dtypes import resolve_kv_layout

    isl, osl = 2000, 500
    r = search("deepseek-v3", "H200", [8, 16], isl=isl, osl=osl)
    dis = [p for p in r.points if p["mode"] == "disaggregated"]
    m, hw = as_model("deepseek-v3"), load_hardware("H200")
    k_max = PREFILL_TOKENS // isl
    ks = np.arange(1.0, k_max + 1)

    cache = {}

    def t_pf(b):
        key = tuple(b[k] for k in ("prefill_gpus", "prefill_tp", "prefill_ep", "kv_dtype",
                                   "prefill_dp_attention", "prefill_redundant_experts",
                                   "overlap"))  # fmt: skip
        if key not in cache:
            cache[key] = _t_pf(b)
        return cache[key]

    def _t_pf(b):
        lay = make_layout(
            m, b["prefill_gpus"], b["prefill_tp"], None, 1, b["prefill_ep"],
            b["prefill_dp_attention"], b["prefill_redundant_experts"],
        )  # fmt: skip
        sm = StepModel(m, lay, None, resolve_kv_layout(b["kv_dtype"]), hw, load_profile(None))
        return lay, np.concatenate(
            [[0.0], sm.step(overlap=b["overlap"], pf_N=ks, pf_q=isl).seconds]
        )

    def load(b):  # prompts/s over what the pool's largest pass finishes
        lay, t = t_pf(b)
        return b["output_tokens_per_s"] / osl / (lay.dp * k_max / t[k_max])

    near = max(dis, key=load)
    lay, t = t_pf(near)
    demand = near["output_tokens_per_s"] / osl / lay.dp  # prompts/s on a prefill group
    k = int(np.nonzero(ks / t[1:] >= demand)[0][0]) + 1
    rho = demand * t[k] / k
    p = _plan_of("deepseek-v3", "H200", near, isl, osl)
    assert p.ttft_s == pytest.approx(t[k] + rho * t[k] / 2 + p.kv_transfer_s, rel=1e-9)
    assert p.ttft_s == pytest.approx(near["ttft_s"], rel=1e-6)
    assert p.output_tokens_per_s == pytest.approx(near["output_tokens_per_s"], rel=1e-6)
    assert p.tpot_s == pytest.approx(near["tpot_s"], rel=1e-6)
    # a pass of k keeps up; near saturation the smaller one does not
    assert k / t[k] >= demand and (k == 1 or (k - 1) / t[k - 1] < demand)
    assert load(near) > 0.9 and k > 1  # the point is near saturation


# ---------------------------------------------------------------- R3: search -> plan command
def test_plan_and_search_name_the_weights_with_the_same_two_fields(run):
    """weight_dtype is the dtype, weight_format how the weights are sized, in plan and in
    each search point (search had put "checkpoint fp8 block 128x128" in weight_dtype)."""
    args = ("-H", "H200", "--isl", 2000, "--osl", 500, "--format", "json")
    doc = json.loads(run("search", "deepseek-v3", "--gpus", 8, *args, "--modes", "aggregated",
                         "--kv-dtypes", "fp8", "--chunked-prefills", "none")[0])  # fmt: skip
    b = doc["best"]
    assert (b["weight_dtype"], b["weight_format"]) == ("fp8", "checkpoint fp8 block 128x128")
    planned = json.loads(run(*doc["plan_command"].split()[1:], "--format", "json")[0])
    assert (planned["weight_dtype"], planned["weight_format"]) == (b["weight_dtype"],
                                                                   b["weight_format"])  # fmt: skip
    # a dtype chosen: both fields say it, and the plan command passes it
    chosen = search("llama-3-8b", "H100-SXM", [1], isl=1000, osl=200, weight_dtypes=["fp8"],
                    chunked_prefills=None).best  # fmt: skip
    # the embedding and head kept as stored
    assert (chosen["weight_dtype"], chosen["weight_format"]) == (
        "fp8",
        "fp8, embeddings bf16, head bf16",
    )
    assert "weight_format" in __import__("mlacalc.serving.search", fromlist=["x"]).FIELDS


def test_plan_command_carries_every_search_option_and_quotes(run):
    from mlacalc.cli.search_cmd import plan_command

    r = search("deepseek-v3", "H200", [8], isl=6000, osl=2000, memory_reserve=0.0)
    cmd = plan_command("deepseek-v3", "H200", r, r.best)
    assert "--memory-reserve 0.0" in cmd  # was missing: TTFT 79.6 s against the point's 0.93
    again = json.loads(run(*cmd.split()[1:], "--format", "json")[0])
    assert again["ttft_s"] == pytest.approx(r.best["ttft_s"], rel=1e-6)
    assert again["tpot_s"] == pytest.approx(r.best["tpot_s"], rel=1e-6)
    r16 = search("llama-3-8b", "H100", [1], isl=1000, osl=200, page_size=64,
                 prefill_pass="separate", output_lag_steps=1)  # fmt: skip
    cmd = plan_command("my model.yaml", "H100", r16, r16.best, "/tmp/a b/prof.json")
    import shlex

    words = shlex.split(cmd)
    assert words[2] == "my model.yaml" and words[words.index("--profile") + 1] == (
        "/tmp/a b/prof.json"
    )
    assert "--page-size 64" in cmd and "--memory-reserve" not in cmd
    assert "--prefill-pass separate" in cmd and "--output-lag-steps 1" in cmd


# ---------------------------------------------------------------- R4: provenance wording
def test_calibration_leads_with_what_roofline_says_and_lists_the_rest():
    from mlacalc.hardware.catalogue import load_hardware
    from mlacalc.timemodel.profile import assumed_figures, load_profile

    prof = load_profile(None)
    hw = load_hardware("MI300X")
    p = plan("llama-3-8b", "MI300X", 1, isl=1000, osl=200, concurrency=8, engine="trtllm")
    assert p.calibration.startswith(prof.describe(hw.name, hw, assumed=False))
    assert p.calibration.endswith(assumed_figures(hw))  # its assumed figures said last
    assert "unvalidated" in p.calibration and p.engine == "trtllm"
    # B200 has a TensorRT-LLM fit of its own: the engine's profile of the device times it
    p = plan("llama-3-8b", "B200", 1, isl=1000, osl=200, concurrency=8)
    assert p.profile == "fit-b200-sxm" and p.calibration.startswith("calibrated on B200")
    # an engine with no profile for the device: TensorRT-LLM's stands in, and the plan says so
    p = plan("llama-3-8b", "MI300X", 1, isl=1000, osl=200, concurrency=8, engine="vllm")
    assert p.engine == "vllm" and "trtllm kernels stand in for vllm" in p.calibration
    assert "no vllm profile fits this device" in p.calibration
    # another engine's profile given: its kernels stand in by the user's choice, said so (it
    # had said no vLLM profile fits B200, where fit-b200-sxm-vllm does)
    p = plan(
        "llama-3-8b", "B200", 1, isl=1000, osl=200, engine="vllm", profile="fit-b200-sxm-sglang"
    )
    assert "sglang kernels stand in for vllm: the profile given (fit-b200-sxm-sglang)" in (
        p.calibration
    )
    assert "no vllm profile fits" not in p.calibration
    cpu = plan("gpt2", "measured:cpu-2core-epyc-fp32", 1, profile="fit-h100-sxm")
    assert "measured ceilings" in cpu.calibration and "datasheet ratios" not in cpu.calibration


def test_calibration_says_when_the_profile_calibrates_none_of_the_step(run, tmp_path):
    """A profile fitted on one table the step does not run: the note says none of the
    step's classes is calibrated and names them all (it led with 'calibrated on
    A100-SXM-80GB' and hid a class behind 'and 1 more')."""
    from reference_data import MEASURED

    pytest.importorskip("pyarrow")
    # A100's TensorRT-LLM custom all-reduce table: a class a one-GPU step does not run, quick
    # to fit (its mla_bmm table's GEMM fit took 11-16 s of a CI worker)
    table = MEASURED / "a100_sxm" / "comm" / "trtllm" / "1.0.0" / "custom_allreduce_perf.parquet"
    profile = tmp_path / "one.json"
    run("calibrate", table, "-o", profile, "--format", "json")
    args = ["deepseek-v2-lite", "-H", "A100-SXM-80GB", "--gpus", "1", "--seq-len", "8k"]
    doc = json.loads(run("plan", *args, "--profile", profile, "--format", "json")[0])
    text = json.dumps(doc)
    assert "none of the step's 4 kernel classes is calibrated" in text
    for name in ("elementwise:bf16", "gemm:bf16", "mla_decode:bf16", "moe:bf16"):
        assert name in text
    assert "more" not in text.split("none of the step's")[1].split('"')[0]


def test_aggregated_plan_describes_its_prefill_kernels_too():
    from mlacalc.cost.engine import as_model
    from mlacalc.hardware.catalogue import load_hardware
    from mlacalc.serving.gpu_step import StepModel
    from mlacalc.serving.layout import make_layout
    from mlacalc.serving.plan import calibration_of
    from mlacalc.timemodel.profile import load_profile
    from mlacalc.words.dtypes import resolve_kv_layout

    p = plan("llama-3-8b", "H100-SXM", 1, isl=1000, osl=200, concurrency=8)
    m, hw, prof = as_model("llama-3-8b"), load_hardware("H100-SXM"), load_profile(None)
    sm = StepModel(m, make_layout(m, 1), None, resolve_kv_layout("bf16"), hw, prof)
    dec = sm.step(dec_B=8.0, dec_q=1, dec_S=1100).kernels
    pf = sm.step(pf_N=1, pf_q=1000).kernels
    assert p.calibration == calibration_of(prof, hw, [*dec, *pf])[1]
    # prefill runs kernel classes decode does not (its attention): they are now described
    assert p.calibration != calibration_of(prof, hw, dec)[1]


def test_search_best_note_describes_the_best_points_own_classes(run):
    r = search("deepseek-v3", "H200", [8], isl=2000, osl=500)
    p = _plan_of("deepseek-v3", "H200", r.best, 2000, 500)
    assert r.best_calibration == p.calibration
    text = " ".join(run("search", "deepseek-v3", "-H", "H200", "--gpus", 8, "--isl", 2000,
                        "--osl", 500)[0].split())  # fmt: skip
    assert " ".join(p.calibration.split()) in text


# ---------------------------------------------------------------- R5: the prefill pool's memory
def test_plan_checks_the_prefill_pool_fits(run):
    p = plan("deepseek-v3", "H200", 8, tp=8, isl=2000, osl=500, concurrency=64,
             mode="disaggregated", prefill_gpus=1)  # fmt: skip
    assert not p.fits and p.overflow.startswith("prefill pool: ")
    assert "on 1 GPU)" in p.overflow and p.ttft_s is None
    out, _ = run("plan", "deepseek-v3", "-H", "H200", "--gpus", 8, "--tp", 8, "--isl", 2000,
                 "--osl", 500, "--concurrency", 64, "--mode", "disaggregated",
                 "--prefill-gpus", 1)  # fmt: skip
    assert "fits │ no: prefill pool:" in " ".join(out.split())


def test_search_offers_no_prefill_pool_that_does_not_fit():
    from mlacalc.cost.engine import as_model
    from mlacalc.serving.layout import make_layout
    from mlacalc.serving.precision import component_weight_bytes, kept_components

    m = as_model("llama-3-70b")
    # fp8 layers, the embedding and head kept bf16
    w = sum(
        component_weight_bytes(m, make_layout(m, 1), "fp8", kept_components(m, "fp8", {})).values()
    )
    # one GPU holds the fp8 weights and a few 2,100-token sequences, not a pass of 8 prompts:
    # as plan has it, the pool needs the weights and one prompt's cache (its passes then
    # batch the prompts that fit), so search offers it and each point equals plan
    reserve = 1 - (w + 4 * 655_360_000) / 2**30 / 80  # an H100 holds 80 GiB
    kw = dict(isl=2000, osl=100, weight_dtypes=("fp8",), kv_dtypes=("bf16",),
              overlaps=("none",))  # fmt: skip
    r = search("llama-3-70b", "H100-SXM", [1, 2], memory_reserve=reserve, **kw)
    assert any(p["mode"] == "aggregated" and p["gpus"] == 1 for p in r.points)
    dis = [p for p in r.points if p["mode"] == "disaggregated"]
    assert dis and {(p["decode_gpus"], p["prefill_gpus"]) for p in dis} == {(1, 1)}
    for q in dis[:2]:
        p = plan("llama-3-70b", "H100-SXM", 1, weight_dtype="fp8", isl=2000, osl=100,
                 concurrency=q["concurrency"], memory_reserve=reserve, mode="disaggregated",
                 prefill_gpus=1)  # fmt: skip
        assert p.fits
        assert p.ttft_s == pytest.approx(q["ttft_s"], rel=1e-6)
        assert p.output_tokens_per_s_per_gpu == pytest.approx(
            q["output_tokens_per_s_per_gpu"], rel=1e-6
        )
    # a pool without room for one prompt: plan refuses it, and search offers none
    tight = 1 - (w + 100_000_000) / 2**30 / 80
    p = plan("llama-3-70b", "H100-SXM", 2, tp=2, weight_dtype="fp8", isl=2000, osl=100,
             concurrency=1, memory_reserve=tight, mode="disaggregated",
             prefill_gpus=1)  # fmt: skip
    assert not p.fits and p.overflow.startswith("prefill pool: ")
    r = search("llama-3-70b", "H100-SXM", [1, 2, 3], memory_reserve=tight, **kw)
    assert any(p["mode"] == "aggregated" and p["gpus"] == 2 for p in r.points)
    assert not [p for p in r.points if p["mode"] == "disaggregated" and p["prefill_gpus"] == 1]
    assert r.ruled_out["disaggregated: no prefill pool keeps up within the GPUs"]


# ---------------------------------------------------------------- R6: prefill-pool errors
@pytest.mark.parametrize(
    ("model", "extra", "flag", "words"),
    [
        ("deepseek-v3", ["--prefill-tp", 3], "--prefill-tp", "tp=3"),
        ("deepseek-v3", ["--prefill-ep", 3], "--prefill-ep", "expert parallel degree 3"),
        ("llama-3-8b", ["--prefill-redundant-experts", 4], "--prefill-redundant-experts",
         "no experts"),
        ("deepseek-v3", ["--tp", 8, "--prefill-gpus", 12], "--prefill-tp",
         "the prefill pool's default tp is 12, from the pool's 12 GPUs"),
        ("deepseek-v3", ["--ep", 8, "--prefill-redundant-experts", 5],
         "--prefill-redundant-experts", "fall back to ep 1"),
    ],
)  # fmt: skip
def test_prefill_pool_errors_name_the_prefill_options(run, model, extra, flag, words):
    # a decode pool that fits (TP8 EP8 for DeepSeek), so that only the prefill pool is wrong
    gpus = [] if "--ep" in extra or model != "deepseek-v3" else ["--ep", 8]
    _, err = run("plan", model, "-H", "H200", "--gpus", 8 if model != "llama-3-8b" else 2,
                 *gpus, *extra, "--isl", 2000, "--osl", 500, "--concurrency", 64,
                 "--mode", "disaggregated", code=2)  # fmt: skip
    assert err.count("\n") == 1 and f"Invalid value for {flag}:" in err, err
    assert words in err
    if "default" in words:
        assert "--prefill-tp" in err.split(":", 2)[2]


def test_prefill_dp_attention_is_honoured():
    # a MoE model: on a dense one (Llama-3-8B, as this was) plan refuses DP-attention
    p = plan("deepseek-v2-lite", "H100", 2, isl=1000, osl=200, concurrency=8,
             mode="disaggregated", prefill_dp_attention=True)  # fmt: skip
    assert p.prefill_dp_attention and p.prefill_tp == 1 and "DP-attention2" in p.prefill_layout


# ---------------------------------------------------------------- R7: csv with nothing timed
def test_search_csv_with_nothing_timed_prints_the_header(run):
    out, _ = run("search", "deepseek-v3", "-H", "RTX-4080", "--isl", 2000, "--osl", 500,
                 "--format", "csv")  # fmt: skip
    from mlacalc.serving.search import ROW_FIELDS  # the point's keys, constraints included

    assert out.splitlines() == [",".join(ROW_FIELDS)]


def test_prefill_dp_attention_without_groups_names_the_option():
    from mlacalc.words.errors import InvalidArgumentError

    # the decode pool's tp 8 is the whole 8-GPU prefill pool: one attention group
    with pytest.raises(InvalidArgumentError) as exc:
        plan("deepseek-v3", "H200", 16, tp=8, dp_attention=True, ep=16, isl=2000, osl=500,
             concurrency=64, mode="disaggregated", prefill_gpus=8,
             prefill_dp_attention=True)  # fmt: skip
    assert exc.value.argument == "prefill_dp_attention" and "prefill_tp" in exc.value.message


# ---------------------------------------------------------------- R8: prefill pools by TTFT
@pytest.mark.parametrize(
    "every",
    [pytest.param(False, id="sample"), pytest.param(True, id="all", marks=pytest.mark.slow)],
)
def test_search_pairs_each_decode_point_with_every_pareto_prefill_layout(every):
    """The search kept, per prefill pool size, only the layout with most prompts/s, whatever
    TTFT it gives: a TP2 DP-attention4 EP8 decode pool at 256 requests with an 8-GPU prefill
    pool meets TTFT with a layout of fewer prompts/s but a shorter pass, and the search missed
    it (its best was an aggregated point with fewer tokens/s per GPU). Each decode point now
    pairs with every layout no other beats on both prompts/s and t_pf[1]; each equals plan
    (by default the pairings at 256 requests and each prefill layout and overlap's smallest
    and largest batch: every kind of pairing the decode pool makes, 8, in 20 plans where every
    sixth point took 32, each plan about 0.6 s of CPU; --runslow: all 175)."""
    isl, osl = 2000, 500
    dec = dict(tp=2, ep=8, dp_attention=True, kv_dtype="fp8", concurrency=256, isl=isl, osl=osl,
               mode="disaggregated", prefill_gpus=8)  # fmt: skip
    pools = [
        plan(
            "deepseek-v3", "H200", 8, **dec, prefill_tp=t, prefill_ep=8, prefill_dp_attention=t < 8
        )
        for t in (1, 2, 4, 8)
    ]
    assert all(p.fits for p in pools)
    fastest = min(pools, key=lambda p: p.ttft_s)
    # the reviewer's 150 ms, or just above what the shortest-TTFT pool gives where that is more
    ttft, tpot = max(0.15, 1.01 * fastest.ttft_s), 0.05
    assert fastest.tpot_s <= tpot
    r = search("deepseek-v3", "H200", [8, 16], isl=isl, osl=osl, ttft=ttft, tpot=tpot)
    best = r.best
    assert best["meets_targets"] and best["ttft_s"] <= ttft and best["tpot_s"] <= tpot
    assert best["output_tokens_per_s_per_gpu"] >= fastest.output_tokens_per_s_per_gpu * (1 - 1e-9)
    p = _plan_of("deepseek-v3", "H200", best, isl, osl)
    assert p.ttft_s == pytest.approx(best["ttft_s"], rel=1e-6)
    assert p.output_tokens_per_s_per_gpu == pytest.approx(
        best["output_tokens_per_s_per_gpu"], rel=1e-6
    )
    # the decode pool's points: several prefill layouts per decode point, the shortest-TTFT
    # pool's among them at 256 requests; every pairing (both overlaps, every batch) equals plan
    ours = [q for q in r.points if q["mode"] == "disaggregated" and q["decode_gpus"] == 8
            and q["layout"] == "TP2 DP-attention4 EP8" and q["kv_dtype"] == "fp8"]  # fmt: skip
    # (a disaggregated point's concurrency counts the requests in prefill too: 256 decoding)
    at_256 = [q for q in ours if q["batch_per_group"] * q["dp"] == 256 and q["overlap"] == "none"]
    assert len({q["prefill_layout"] for q in at_256}) >= 2
    assert fastest.prefill_layout in {q["prefill_layout"] for q in at_256}
    assert len(ours) > len({(q["overlap"], q["batch_per_group"]) for q in ours})
    kinds: dict[tuple, list] = {}  # each (overlap, prefill layout) paired: its points
    for q in ours:
        kinds.setdefault((q["overlap"], q["prefill_layout"]), []).append(q)
    size = itemgetter("batch_per_group")
    ends = [q for qs in kinds.values() for q in (min(qs, key=size), max(qs, key=size))]
    sample = at_256 + [q for i, q in enumerate(ends) if q not in at_256 and q not in ends[:i]]
    checked = ours if every else sample
    for q in checked:
        p = _plan_of("deepseek-v3", "H200", q, isl, osl)
        assert p.prefill_layout == q["prefill_layout"]
        assert p.ttft_s == pytest.approx(q["ttft_s"], rel=1e-6)
        assert p.tpot_s == pytest.approx(q["tpot_s"], rel=1e-6)
        assert p.output_tokens_per_s_per_gpu == pytest.approx(
            q["output_tokens_per_s_per_gpu"], rel=1e-6
        )


def test_calibration_counts_two_step_classes_run_as_one_once(run, tmp_path):
    """Under SGLang a step's block-scaled GEMM runs its per-tensor fp8 class: two step classes,
    one class. With a profile calibrating neither, the note still says none is calibrated and
    counts the classes it names (a review found 'calibrated on ...; 8 of 8 kernel classes
    otherwise' naming 7)."""
    from reference_data import MEASURED

    from mlacalc.hardware.catalogue import load_hardware
    from mlacalc.serving.provenance import calibration_of

    pytest.importorskip("pyarrow")
    # a table of a class the step does not run, quick to fit (A100's custom all-reduce)
    table = MEASURED / "a100_sxm" / "comm" / "trtllm" / "1.0.0" / "custom_allreduce_perf.parquet"
    profile = tmp_path / "one.json"
    run("calibrate", table, "-o", profile, "--format", "json")
    prof = json.loads(profile.read_text())
    prof["engine"] = "sglang"
    profile.write_text(json.dumps(prof))
    kernels = [("gemm", "fp8"), ("gemm", "fp8_block"), ("gemm", "bf16")]
    _, text = calibration_of(str(profile), load_hardware("H100-SXM"), kernels)
    assert text.startswith("none of the step's 2 kernel classes is calibrated"), text


def test_search_layout_shows_the_redundant_experts_its_plan_line_gives(run):
    """Qwen3.5-122B's 256 experts over EP5 take 4 redundant experts, which the point's plan
    line gives (--redundant-experts 4): the layout column said "TP1 DP-attention5 EP5"."""
    import json

    args = ["search", "qwen3.5-122b-a10b", "-H", "GB200", "--gpus", 5, "--isl", 2000]
    args += ["--osl", 500]
    doc = json.loads(run(*args, "--format", "json")[0])
    best = doc["best"]
    assert best["redundant_experts"] == 4 and "--redundant-experts 4" in doc["plan_command"]
    table = run(*args, "--format", "markdown")[0]
    # the layout says its replicas itself (Layout.describe), once
    assert best["layout"].endswith(" (4 redundant experts)")
    assert f"| {best['layout']} |" in table
    assert "redundant experts) (4 redundant experts)" not in table
    for p in doc["frontier"]:  # every frontier row with its replicas, decode and prefill
        if p["redundant_experts"]:
            assert p["layout"].endswith(f" ({p['redundant_experts']} redundant experts)")
            assert p["layout"] in table


def test_calibration_names_every_class_a_note_marks_a_stand_in_in_plan_and_search():
    """One rule for plan and search: each class the step runs that the profile's notes mark a
    stand-in is named with its note. vLLM's B200 fit holds SGLang's FlashMLA sparse class (its
    DSA cores run it), which the plan's calibration did not say (only DeepGEMM's experts were
    named); a search collected its classes without their variants, so its calibration never
    named the DeepGEMM experts behind DeepEP its best point runs (its best_calibration did).
    The class named is the one whose fit times the kernel: vLLM's B200 DSA decode core runs
    TensorRT-LLM-gen's sparse kernel timed by the profile's sparse class
    (dsa_time.DECODE_SPARSE_VARIANT); its prompt core that kernel's own class (``sparse_gen``,
    fitted on vLLM's prompt rows: no stand-in)."""
    from mlacalc.hardware.catalogue import load_hardware
    from mlacalc.timemodel.profile import load_profile

    b200 = load_hardware("B200")
    prof = load_profile("fit-b200-sxm-vllm")
    found = prof.class_found("B200", "mla_decode", "bf16", b200, "sparse")
    assert found == "mla_decode:bf16:sparse"
    found = prof.class_found("B200", "mla_decode", "bf16", b200, "sparse_gen")
    assert found == "mla_decode:bf16:sparse_gen"
    sparse = "stand-in: mla_decode:bf16:sparse from sglang profile fit-b200-sxm-sglang's"
    p = plan("deepseek-v3.2", "B200", gpus=8, tp=8, kv_dtype="fp8", isl=32000, osl=1000,
             concurrency=16, engine="vllm")  # fmt: skip
    assert sparse in p.calibration
    r = search("deepseek-v3.2", "B200", [8], isl=32000, osl=1000, kv_dtypes=["fp8"],
               modes=["aggregated"], chunked_prefills=None, engine="vllm")  # fmt: skip
    assert sparse in r.calibration and sparse in r.best_calibration
    deepgemm = "stand-in: moe:fp8_block:deepgemm from trtllm profile default's moe:fp8_block"
    r = search("deepseek-v3", "H200", [8], isl=2000, osl=500, kv_dtypes=["fp8"],
               modes=["aggregated"], chunked_prefills=None, engine="sglang")  # fmt: skip
    assert r.best["layout"] == "TP1 DP-attention8 EP8"
    assert deepgemm in r.best_calibration and deepgemm in r.calibration
    # a step that runs no stand-in class names none (TensorRT-LLM's own fit of H100)
    own = plan("llama-3-8b", "H100-SXM", isl=1000, osl=200, concurrency=8)
    assert "stand-in" not in own.calibration
