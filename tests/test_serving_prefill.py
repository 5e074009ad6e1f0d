"""Prefill in plan(): chunked-prefill TTFT, the decode batch's label, the app's caption when
nothing fits, the prefill pool's memory check and DP-attention with one attention group. Each
test failed before its fix."""

from __future__ import annotations

import json
import math

import pytest

from mlacalc.serving.plan import plan
from mlacalc.words.errors import InvalidArgumentError


# ---------------------------------------------------------------- 1: chunked-prefill TTFT
@pytest.mark.parametrize(
    ("isl", "chunk", "load"),
    [
        (8000, 8192, dict(concurrency=1)),
        (2000, 512, dict(concurrency=1)),
        (2000, 512, dict(request_rate=2.0)),
        (2000, 512, dict(concurrency=64)),
    ],
)
def test_chunked_ttft_is_never_below_one_prefill_pass(isl, chunk, load):
    p = plan("llama-3-8b", "H100-SXM", 1, isl=isl, osl=500, chunked_prefill=chunk, **load)
    # the prompt's own chunks run in full beside the decode batch: at least one pass of it
    assert p.ttft_s >= p.prefill_s, (p.ttft_s, p.prefill_s)


def test_chunked_ttft_is_the_sum_of_the_prompts_own_steps():
    """One chunk holding the whole prompt: half a cycle, then a step of the prompt and the
    decode batch of one (about a prefill pass and a decode step)."""
    p = plan("llama-3-8b", "H100-SXM", 1, isl=8000, osl=500, chunked_prefill=8192,
             concurrency=1)  # fmt: skip
    assert p.prefill_s < p.ttft_s < p.prefill_s + 2 * p.decode_step_s + p.tpot_s
    # smaller chunks: more steps, each reading the weights again, so a longer TTFT
    small = plan("llama-3-8b", "H100-SXM", 1, isl=8000, osl=500, chunked_prefill=1024,
                 concurrency=1)  # fmt: skip
    assert small.ttft_s > p.ttft_s and small.tpot_s == pytest.approx(p.tpot_s, rel=0.05)


def test_chunked_cli_json_ttft(run):
    args = ["plan", "llama-3-8b", "-H", "H100-SXM", "--gpus", 1, "--isl", 8000, "--osl", 500]
    out, _ = run(*args, "--concurrency", 1, "--chunked-prefill", 8192, "--format", "json")
    doc = json.loads(out)
    assert doc["ttft_s"] >= doc["prefill_s"]


# ---------------------------------------------------------------- 2: the decode batch's label
def test_decode_batch_below_one_per_group_is_labelled_as_timed(run):
    args = ["plan", "llama-3-8b", "-H", "H100", "--gpus", 8, "--tp", 1, "--isl", 2000,
            "--osl", 500, "--request-rate", 0.05]  # fmt: skip
    doc = json.loads(run(*args, "--format", "json")[0])
    assert 0 < doc["decode_running"] < 1 and doc["decode_batch"] == 1
    text = " ".join(run(*args)[0].split())
    running = f"{doc['decode_running']:,.2f}"
    assert f"decode step at batch 1 per group ({running} running on average)" in text
    assert f"decode step at batch {running} " not in text


def test_decode_batch_is_never_zero_for_a_timed_step():
    p = plan("llama-3-8b", "H100", 1, isl=2000, osl=500, request_rate=0.05)
    assert p.decode_running < 1 and p.decode_batch == 1 and p.decode_step_s > 0


# ---------------------------------------------------------------- 3: the app's caption
def test_app_caption_without_a_timed_step_has_no_empty_provenance():
    pytest.importorskip("streamlit")
    from _helpers import app_test

    at = app_test()
    at.query_params["view"] = "Capacity planner"  # only the open tab runs
    at.run()
    at.number_input(key="plan_gpus").set_value(1)
    at.number_input(key="plan_tp").set_value(1)
    at.run()
    assert not at.exception
    # the answer says it does not fit (once: the capacity section's info box repeated it);
    # no step is timed, so no caption names a provenance
    assert at.warning[0].value.startswith("**Does not fit**") and "weights" in at.warning[0].value
    assert not any(i.value.startswith("Does not fit: weights") for i in at.info)
    captions = [c.value for c in at.caption if c.value.startswith("Per GPU:")]
    assert all("profile ''" not in c and "()" not in c for c in captions)


# ---------------------------------------------------------------- 4: the prefill pool's memory
def test_prefill_pool_needs_one_prompt_not_a_whole_pass(run):
    # a 16% reserve: 67.2 GiB of an H100's 80 GiB (the 10% default left 67.06 GiB of the 80e9 B
    # the catalogue held before it held the capacity in bytes)
    kw = dict(tp=4, mode="disaggregated", prefill_gpus=2, isl=2000, osl=500, memory_reserve=0.16)
    p = plan("llama-3.1-70b", "H100-SXM", 4, **kw)
    # 65.71 GiB of weights and 2.44 GiB for a pass of 8 prompts exceed 67.2 GiB; one fits
    assert p.fits and p.ttft_s is not None and math.isfinite(p.ttft_s)
    out, _ = run("plan", "llama-3.1-70b", "-H", "H100-SXM", "--gpus", 4, "--tp", 4, "--mode",
                 "disaggregated", "--prefill-gpus", 2, "--isl", 2000, "--osl", 500,
                 "--memory-reserve", 0.16)  # fmt: skip
    assert "fits │ yes" in " ".join(out.split())


def test_prefill_pool_pass_is_capped_at_the_prompts_whose_cache_fits():
    """The pool's TTFT and prompt rate use passes of at most the prompts that fit: a pool
    that holds 8 prompts' cache is faster per prompt than one holding 4 at most, never
    slower."""
    kw = dict(tp=4, mode="disaggregated", prefill_gpus=2, isl=2000, osl=500,
              concurrency=178)  # fmt: skip
    # 16% reserve (67.2 GiB of 80 GiB): the default 10% held a whole pass once the catalogue
    # held an H100's 80 GiB, not 80e9 B
    tight = plan("llama-3.1-70b", "H100-SXM", 4, memory_reserve=0.16, **kw)
    roomy = plan("llama-3.1-70b", "H100-SXM", 4, memory_reserve=0.05, **kw)
    assert tight.fits and roomy.fits
    assert tight.output_tokens_per_s < roomy.output_tokens_per_s


def test_prefill_pool_that_does_not_fit_is_the_binding_resource(run):
    p = plan("deepseek-v3", "H200", 8, tp=8, isl=2000, osl=500, concurrency=64,
             mode="disaggregated", prefill_gpus=1)  # fmt: skip
    assert not p.fits and p.binding.startswith("prefill pool")
    assert "one prompt" in p.overflow
    out, _ = run("plan", "deepseek-v3", "-H", "H200", "--gpus", 8, "--tp", 8, "--isl", 2000,
                 "--osl", 500, "--mode", "disaggregated", "--prefill-gpus", 1)  # fmt: skip
    assert "binding resource │ prefill pool" in " ".join(out.split())


# ---------------------------------------------------------------- 5: one attention group
def test_prefill_dp_attention_with_a_whole_pool_tp_is_an_error(run):
    with pytest.raises(InvalidArgumentError) as exc:
        plan("deepseek-v3", "H200", 8, ep=8, isl=2000, osl=500, mode="disaggregated",
             prefill_gpus=8, prefill_dp_attention=True, prefill_tp=8)  # fmt: skip
    assert exc.value.argument == "prefill_dp_attention" and "prefill_tp" in exc.value.message
    _, err = run("plan", "deepseek-v3", "-H", "H200", "--gpus", 8, "--ep", 8, "--isl", 2000,
                 "--osl", 500, "--mode", "disaggregated", "--prefill-gpus", 8,
                 "--prefill-dp-attention", "--prefill-tp", 8, code=2)  # fmt: skip
    assert "Invalid value for --prefill-dp-attention:" in err and "--prefill-tp" in err


def test_inherited_dp_attention_with_a_whole_pool_tp_is_an_error():
    """The decode pool's DP-attention reaches the pool; a prefill_tp of the whole pool leaves
    it one group: refused, naming prefill_tp and how to leave DP-attention off."""
    kw = dict(tp=2, dp_attention=True, ep=8, kv_dtype="fp8", isl=2000, osl=500,
              mode="disaggregated", prefill_gpus=8, prefill_tp=8, prefill_ep=8)  # fmt: skip
    with pytest.raises(InvalidArgumentError) as exc:
        plan("deepseek-v3", "H200", 8, **kw)
    assert exc.value.argument == "prefill_tp" and "prefill_dp_attention" in exc.value.message
    p = plan("deepseek-v3", "H200", 8, prefill_dp_attention=False, **kw)
    assert p.prefill_layout == "TP8 EP8" and p.prefill_dp_attention is False


def test_cli_dp_attention_with_tp_of_all_gpus_is_an_error(run):
    _, err = run("plan", "llama-3-8b", "-H", "H100", "--gpus", 8, "--tp", 8, "--dp-attention",
                 "--isl", 1000, "--osl", 200, code=2)  # fmt: skip
    assert "Invalid value for --dp-attention:" in err and "--tp" in err
