"""``--engine`` brings its scheduler defaults: ``plan`` and ``search`` take the engine's
published admission defaults (max running, max tokens, chunked prefill, CUDA graphs, overlap
scheduling) for what is not given, say whose they took, and ``--engine-defaults`` still
names another engine's or ``none``. The Python API does the same: ``plan(engine=...)`` takes
that engine's defaults for the arguments left out (``engine_defaults``: another engine's, or
``"none"``), so one question has one answer from both (a new-user trial: Llama-3.3-70B on 4
H100 under SGLang, TTFT 1.11766 s from the CLI, 1.09870 s from the API)."""

from __future__ import annotations

import json

import pytest

from mlacalc.serving.plan import plan
from mlacalc.serving.scheduler import engine_settings

PLAN = ("plan", "llama-3-8b", "-H", "H100-SXM", "--gpus", 1, "--isl", 3000, "--osl", 200,
        "--concurrency", 64, "--format", "json")  # fmt: skip
KW = dict(isl=3000, osl=200, concurrency=64)


def _figures(doc_or_plan):
    d = doc_or_plan if isinstance(doc_or_plan, dict) else doc_or_plan.to_dict()
    return d["ttft_s"], d["tpot_s"], d["output_tokens_per_s"]


def test_plan_engine_takes_its_defaults(run):
    # prompts longer than vLLM's 8,192-token budget: it chunks them (a budget of the whole
    # prompt runs it in one step, as without chunks, so 3,000-token prompts would not tell)
    args = [*PLAN[:7], 12000, *PLAN[8:11], 16, *PLAN[12:]]
    kw = {**KW, "isl": 12000, "concurrency": 16}
    out, _ = run(*args, "--engine", "vllm")
    doc = json.loads(out)
    assert doc["scheduler_defaults"] == "vllm"
    expected = plan("llama-3-8b", "H100-SXM", 1, engine="vllm", **kw, **engine_settings("vllm"))
    assert _figures(doc) == pytest.approx(_figures(expected), rel=1e-9)
    bare = plan("llama-3-8b", "H100-SXM", 1, engine="vllm", engine_defaults="none", **kw)
    # vLLM's 8,192-token budget and no overlap scheduling change the figures
    assert _figures(doc) != pytest.approx(_figures(bare), rel=1e-6)


def test_engine_defaults_override_and_none(run):
    out, _ = run(*PLAN, "--engine", "vllm", "--engine-defaults", "none")
    doc = json.loads(out)
    assert doc["scheduler_defaults"] is None
    bare = plan("llama-3-8b", "H100-SXM", 1, engine="vllm", engine_defaults="none", **KW)
    assert _figures(doc) == pytest.approx(_figures(bare), rel=1e-9)
    out, _ = run(*PLAN, "--engine", "vllm", "--engine-defaults", "sglang")
    doc = json.loads(out)
    assert doc["scheduler_defaults"] == "sglang"
    other = plan("llama-3-8b", "H100-SXM", 1, engine="vllm", **KW, **engine_settings("sglang"))
    assert _figures(doc) == pytest.approx(_figures(other), rel=1e-9)


def test_a_given_option_beats_the_engine_default(run):
    out, _ = run(*PLAN, "--engine", "vllm", "--max-tokens", 2048, "--overlap-schedule")
    doc = json.loads(out)
    settings = {**engine_settings("vllm"), "max_tokens": 2048, "overlap_schedule": True}
    expected = plan("llama-3-8b", "H100-SXM", 1, engine="vllm", **KW, **settings)
    assert _figures(doc) == pytest.approx(_figures(expected), rel=1e-9)


def test_no_engine_no_defaults_and_the_output_says_which(run):
    out, _ = run(*PLAN)
    assert json.loads(out)["scheduler_defaults"] is None
    out, _ = run(*PLAN[:-2], "--engine", "sglang")
    assert "# scheduler defaults: sglang's as documented at SGLang 0.4.9 (max running what" in out
    assert "what fits, max tokens 16,384" in out
    assert "(from --engine; --engine-defaults none for none)" in out
    out, _ = run(*PLAN[:-2], "--engine-defaults", "trtllm")
    assert (
        "# scheduler defaults: trtllm's as documented at TensorRT-LLM 1.0 (max running 2,048" in out
    )
    assert "(from --engine-defaults)" in out
    out, _ = run(*PLAN[:-2])
    # no defaults line; the engine line says the default engine's defaults were not applied
    assert "# scheduler defaults" not in out
    assert "the default engine, its kernels timed but not its scheduler defaults" in out


def test_search_engine_takes_its_admission_defaults(run):
    """search --engine vllm is search(engine="vllm") with vLLM's running cap, token budget
    and no overlap scheduling; --engine-defaults none is the bare search."""
    from mlacalc.serving.scheduler import Scheduler
    from mlacalc.serving.search import search

    args = ("search", "llama-3-8b", "-H", "H100-SXM", "--gpus", 1, "--isl", 3000,
            "--osl", 200, "--modes", "aggregated", "--format", "json")  # fmt: skip
    kw = dict(isl=3000, osl=200, modes=("aggregated",), engine="vllm")
    doc = json.loads(run(*args, "--engine", "vllm")[0])
    assert doc["scheduler_defaults"] == "vllm" and doc["engine"] == "vllm"  # whose kernels
    assert json.loads(run(*args)[0])["engine"] == "trtllm"
    s = engine_settings("vllm")
    expected = search(
        "llama-3-8b",
        "H100-SXM",
        [1],
        **kw,
        max_running=s["max_running"],
        max_tokens=s["max_tokens"],
        scheduler=Scheduler(overlap=s["overlap_schedule"]),
    ).best
    assert _figures(doc["best"]) == pytest.approx(_figures(expected), rel=1e-9)
    out, _ = run(*args[:-2], "--engine", "vllm")
    assert "# scheduler defaults: vllm's as documented at vLLM 0.10 (max running 1,024, " in out
    assert "(max running 1,024, max tokens 8,192, " in out
    assert "chunked prefill searched (--chunked-prefills)" in out
    none = json.loads(run(*args, "--engine", "vllm", "--engine-defaults", "none")[0])
    assert none["scheduler_defaults"] is None
    bare = search("llama-3-8b", "H100-SXM", [1], **kw, engine_defaults="none").best
    assert _figures(none["best"]) == pytest.approx(_figures(bare), rel=1e-9)


def test_search_plan_command_carries_the_engine(run):
    """The plan command a search prints runs its engine as the search did (its kernels, its
    admission values, no chunked prefill): the same figures."""
    import shlex

    args = ("search", "llama-3-8b", "-H", "H100-SXM", "--gpus", 2, "--isl", 3000, "--osl", 200,
            "--tpot", "30ms", "--engine", "vllm", "--format", "json")  # fmt: skip
    doc = json.loads(run(*args)[0])
    cmd = doc["plan_command"]
    assert "--engine vllm --engine-defaults none --max-running 1024 --max-tokens 8192" in cmd
    # vLLM's overlap scheduling is off, but with no host time it changes nothing: the command
    # leaves the flag out, so plan has nothing to warn of (it printed "changes nothing here")
    assert "overlap" not in cmd
    words = shlex.split(cmd)[1:]  # without "mlacalc"
    p = json.loads(run(*words, "--format", "json")[0])
    assert p["scheduler_defaults"] is None
    assert not [w for w in p["warnings"] if "overlap scheduling" in w]
    b = doc["best"]
    assert p["tpot_s"] == pytest.approx(b["tpot_s"], rel=1e-6)
    assert p["ttft_s"] == pytest.approx(b["ttft_s"], rel=1e-6)
    # with host time to hide, the off switch times the step and the command carries it
    hosted = json.loads(run(*args, "--host-step-ms", 2)[0])
    cmd = hosted["plan_command"]
    assert cmd.endswith("--host-step-ms 2.0 --no-overlap-schedule")
    p = json.loads(run(*shlex.split(cmd)[1:], "--format", "json")[0])
    assert p["tpot_s"] == pytest.approx(hosted["best"]["tpot_s"], rel=1e-6)


def test_a_disaggregated_plan_says_it_chunks_no_prompt(run):
    """A disaggregated plan takes no chunked prefill from the engine's defaults, and its line
    says so (it had named SGLang's 8,192)."""
    out, _ = run("plan", "deepseek-v3", "-H", "B200", "--gpus", 8, "--engine", "sglang",
                 "--isl", 2000, "--osl", 500, "--concurrency", 64, "--mode", "disaggregated",
                 "--prefill-gpus", 8)  # fmt: skip
    assert "chunked prefill none (disaggregated)" in out and "chunked prefill 8,192" not in out


def test_engine_names_are_read_in_any_case_as_the_python_api_reads_them(run):
    # --engine SGLang was refused ("not one of 'trtllm'...") while -H h200 and
    # plan(engine="SGLang") were accepted
    out, _ = run(*PLAN, "--engine", "SGLang", "--engine-defaults", "VLLM")
    doc = json.loads(out)
    assert doc["engine"] == "sglang" and doc["scheduler_defaults"] == "vllm"
    expected = plan("llama-3-8b", "H100-SXM", 1, engine="SGLang", **KW, **engine_settings("vllm"))
    assert _figures(doc) == pytest.approx(_figures(expected), rel=1e-9)
    out, _ = run(*PLAN[:-2], "--engine-defaults", "NONE", "--launch", "TrtLlm")
    assert "trtllm-serve" in out
    _, err = run(*PLAN, "--engine", "sglang2", code=2)
    assert "'sglang2' is not one of 'trtllm', 'sglang', 'vllm'" in err


def test_the_defaults_line_names_the_scheduler_version_and_the_kernels_apart(run):
    # "sglang's as documented at 0.4.9" beside kernels measured on SGLang 0.5.14 read as one
    # version; each is now said with its engine
    args = ("search", "llama-3-8b", "-H", "H100-SXM", "--gpus", 1, "--isl", 3000,
            "--osl", 200, "--modes", "aggregated")  # fmt: skip
    out, _ = run(*args, "--engine", "sglang")
    (line,) = [x for x in out.splitlines() if x.startswith("# scheduler defaults:")]
    assert "as documented at SGLang 0.4.9 (" in line
    # (DeepEP's two tables of that fit were collected under SGLang 0.5.12)
    assert line.endswith(
        "; kernels measured on SGLang 0.5.14 (2 of its tables at 0.5.12), profile "
        "fit-h100-sxm-sglang"
    )
    out, _ = run(*args, "--engine-defaults", "vllm")
    (line,) = [x for x in out.splitlines() if x.startswith("# scheduler defaults:")]
    assert "as documented at vLLM 0.10 (" in line and "kernels measured on TensorRT-LLM " in line
    out, _ = run(*PLAN[:-2], "--engine", "sglang")  # plan's line says the same
    (line,) = [x for x in out.splitlines() if x.startswith("# scheduler defaults:")]
    assert "SGLang 0.4.9 (" in line and "kernels measured on SGLang 0.5.14 (2 of" in line


def test_kernel_versions_of_a_profile_with_no_engine_tables_say_nothing(tmp_path):
    from mlacalc.cli.serving_flags import kernel_versions, with_kernel_versions

    assert kernel_versions("fit-b200-sxm-vllm") == "vLLM 0.24.0"
    assert kernel_versions("no-such-profile") == ""
    assert with_kernel_versions("", "default") == ""
    assert with_kernel_versions("# x\n", "no-such-profile") == "# x\n"


def test_the_python_functions_take_an_engine_in_any_case_and_refuse_others_in_one_line():
    """``engine_settings`` and ``launch_commands`` read an engine's name in any case, as
    ``plan`` and the CLI do; another name is refused naming the engines (it was a bare
    KeyError, and ``launch_commands`` refused "SGLang")."""
    from mlacalc.serving.launch import launch_commands
    from mlacalc.words.errors import InvalidArgumentError

    assert engine_settings("SGLang") == engine_settings("sglang")
    assert launch_commands("VLLM", "m", []) == []
    for call in (lambda: engine_settings("tgi"), lambda: launch_commands("tgi", "m", [])):
        with pytest.raises(InvalidArgumentError, match="must be one of trtllm, sglang, vllm"):
            call()


LLAMA_70B = ("tests/data/hf-configs/llama-3.3-70b-instruct.config.json", "H100")
TRIAL = dict(gpus=4, tp=4, weight_dtype="fp8", kv_dtype="fp8", isl=16000, osl=500, concurrency=16)
TRIAL_ARGS = ("--gpus", 4, "--tp", 4, "--weight-dtype", "fp8", "--kv-dtype", "fp8",
              "--isl", 16000, "--osl", 500, "--concurrency", 16, "--format", "json")  # fmt: skip


@pytest.mark.parametrize(
    ("cli", "api"),
    [
        (("--engine", "sglang"), dict(engine="sglang")),
        (("--engine", "vllm"), dict(engine="vllm")),
        (
            ("--engine", "sglang", "--engine-defaults", "none"),
            dict(engine="sglang", engine_defaults="none"),
        ),
        (
            ("--engine", "sglang", "--engine-defaults", "vllm", "--max-tokens", 4096),
            dict(engine="sglang", engine_defaults="vllm", max_tokens=4096),
        ),
        (
            ("--engine-defaults", "trtllm", "--no-overlap-schedule"),
            dict(engine_defaults="trtllm", overlap_schedule=False),
        ),
    ],
)
def test_the_api_and_the_cli_give_one_answer(run, cli, api):
    """plan(engine="sglang") takes SGLang's scheduler defaults as --engine sglang does: the
    trial's TTFT 1.09870 s (API) against 1.11766 s (CLI), 2 prompt chunks against none, are
    one figure now; the Plan records whose defaults it took and what they filled."""
    model, hw = LLAMA_70B
    doc = json.loads(run("plan", model, "-H", hw, *TRIAL_ARGS, *cli)[0])
    p = plan(model, hw, **TRIAL, **api).to_dict()
    for key in ("ttft_s", "tpot_s", "output_tokens_per_s", "prefill_chunks", "max_batch"):
        assert doc[key] == p[key], key
    assert doc["scheduler_defaults"] == p["scheduler_defaults"]
    assert doc["scheduler_defaults_applied"] == p["scheduler_defaults_applied"]


def test_the_plan_records_the_defaults_it_applied():
    model, hw = LLAMA_70B
    p = plan(model, hw, **TRIAL, engine="sglang")
    assert p.scheduler_defaults == "sglang" and p.prefill_chunks == 2
    assert p.scheduler_defaults_applied == {
        "max_running": None,
        "max_tokens": 16384,
        "chunked_prefill": 8192,
        "overlap_schedule": True,
        "cuda_graph_max_batch": 160,
    }
    given = plan(model, hw, **TRIAL, engine="sglang", max_tokens=4096, chunked_prefill=2048)
    assert "max_tokens" not in given.scheduler_defaults_applied
    assert "chunked_prefill" not in given.scheduler_defaults_applied
    bare = plan(model, hw, **TRIAL, engine="sglang", engine_defaults="none")
    assert bare.scheduler_defaults is None and bare.scheduler_defaults_applied == {}
    assert bare.prefill_chunks is None
    dis = plan(model, hw, **{**TRIAL, "concurrency": 64}, engine="sglang", mode="disaggregated")
    assert "chunked_prefill" not in dis.scheduler_defaults_applied  # no prompt mixed in


def test_engine_defaults_is_checked_in_one_line():
    from mlacalc.words.errors import InvalidArgumentError

    model, hw = LLAMA_70B
    with pytest.raises(InvalidArgumentError, match="engine_defaults: must be one of"):
        plan(model, hw, **TRIAL, engine_defaults="tgi")
