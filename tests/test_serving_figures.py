"""Serving figures a new-user trial found wrong (docs/serving.md, "Serving figures"): chunked
prefill's TPOT against the whole-prompt plan's, TTFT against the prefill of one prompt, and
what an overloaded deployment serves. Each test failed before its fix."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from mlacalc.serving.figures import chunked_figures
from mlacalc.serving.plan import duration_text, plan
from mlacalc.words.units import request_count

LONG = dict(isl=32000, osl=2000, concurrency=4)  # Llama-3-8B on one H100: 4 long prompts


def _llama(**kw):
    return plan("llama-3-8b", "H100-SXM", 1, **kw)


@pytest.fixture(scope="module")
def whole():
    return _llama(**LONG)


# ------------------------------------------------- 1: chunked TPOT counts the prompt's work
def test_a_chunk_beyond_the_prompt_is_the_whole_prompt_plan(whole):
    """A budget of the prompt or more runs it in one step: the figures are the whole-prompt
    plan's (they spread P tokens over every step before, 17.6 ms against 14.9)."""
    p = _llama(**LONG, chunked_prefill=65536)
    assert p.tpot_s == pytest.approx(whole.tpot_s, rel=1e-9)
    assert p.ttft_s == pytest.approx(whole.ttft_s, rel=1e-9)
    assert p.prefill_chunks == 1 and p.prefill_chunk_tokens == 32000  # the prompt's


@pytest.mark.parametrize("chunk", [512, 2048, 8192])
def test_chunked_tpot_adds_the_prompts_chunk_steps_as_the_whole_prompt_adds_its_step(whole, chunk):
    """One group, fewer than one chunk a step: the mean step is the decode step plus, per
    prompt started, what its chunk steps add over decode steps; the same work the whole
    prompt's step adds, so TPOT stays within a few percent of the whole-prompt plan's and
    the chunk size moves it (it did not move at all before). TPOT counts the other
    requests' prompts only (3 of the 4 in flight): a request's own chunks come before its
    first token (it counted all 4 before). A request spends its chunk steps and osl - 1
    decode steps on the group, so the prompts started per step are B over those (B / osl
    before: a request counted as osl steps), and the throughput is the closed loop's, B osl
    tokens each request latency (Little's law; it was B over the mean step)."""
    p = _llama(**LONG, chunked_prefill=chunk)
    B, osl = p.running_batch_per_group, LONG["osl"]
    steps = math.ceil(LONG["isl"] / chunk)
    n = B / (steps + osl - 1)  # prompts started per step
    assert p.prefill_chunks == steps
    added = p.prefill_chunks_s - steps * p.decode_step_s
    assert p.tpot_s == pytest.approx(p.decode_step_s + n * (B - 1) / B * added, rel=1e-9)
    latency = p.ttft_s + (osl - 1) * p.tpot_s
    assert p.output_tokens_per_s == pytest.approx(B * osl / latency, rel=1e-9)
    assert p.tpot_s == pytest.approx(whole.tpot_s, rel=0.03)
    # TTFT: the wait for the step in progress (or the run of another prompt's chunks), then
    # the prompt's own steps
    assert p.prefill_chunks_s < p.ttft_s < 1.2 * p.prefill_chunks_s


def test_chunk_size_moves_the_figures(whole):
    small, large = _llama(**LONG, chunked_prefill=512), _llama(**LONG, chunked_prefill=8192)
    assert small.prefill_chunks_s > large.prefill_chunks_s  # 63 steps read the weights again
    assert small.ttft_s > large.ttft_s and small.tpot_s != large.tpot_s


def test_chunked_figures_at_full_load_and_the_wait():
    """Beyond one chunk step a step every step is the full-load step and a request waits the
    runs' term n S^2 / (2 cycle), at least half a step (it was half a step alone, 0.025 + 0.3
    here, and TTFT fell at x = 1); below, the wait is E[T^2] / 2 E[T] over decode steps and
    prompt runs, which at x = 1 is that term."""
    cycle, ttft = chunked_figures(2.0, 2, 1.0, 0.01, 0.05, 0.3)
    assert cycle == pytest.approx(0.05) and ttft == pytest.approx(2 * 0.3**2 / 0.1 + 0.3)
    cycle, ttft = chunked_figures(0.6, 2, 1.0, 0.01, 0.5, 0.3)  # a long full-load step
    assert ttft == pytest.approx(0.25 + 0.3)
    # continuous at one chunk step a step (x = n steps = 1, one group: share 1)
    below = chunked_figures(0.5 - 1e-9, 2, 1.0 - 2e-9, 0.01, 0.15, 0.3)[1]
    above = chunked_figures(0.5 + 1e-9, 2, 1.0, 0.01, 0.15, 0.3)[1]
    assert above == pytest.approx(below, rel=1e-6)
    n, steps, t, S = 0.01, 4, 0.01, 0.2
    cycle, ttft = chunked_figures(n, steps, n * steps, t, 0.05, S)
    assert cycle == pytest.approx((1 - n * steps) * t + n * S)
    wait = ((1 - n * steps) * t**2 + n * S**2) / (2 * cycle)
    assert ttft == pytest.approx(wait + S)


# ---------------------------------------------- 2: TTFT and the prefill of one prompt alone
def test_dp_attention_prefill_of_one_prompt_is_the_prompt_alone():
    """Under DP-attention the prefill row timed every group's experts with a prompt each
    (7.95 s where the prompt alone takes 6.3 s and TTFT was 5.97 s); the plan now shows the
    prompt alone and the chunk steps TTFT is made of."""
    p = plan("deepseek-v3", "H200", 8, dp_attention=True, ep=8, isl=32000, osl=1000,
             concurrency=8, chunked_prefill=8192)  # fmt: skip
    assert p.prefill_chunks == 4
    assert p.ttft_s > p.prefill_chunks_s
    # the kernel model prices the four chunk steps (each with the decode batch) within a few
    # percent of one pass of the whole prompt alone
    assert p.prefill_chunks_s == pytest.approx(p.prefill_s, rel=0.1)


def test_the_plan_prints_the_prompts_chunk_steps_under_ttft(run):
    """The table says what TTFT is made of (the prompt's chunk steps beside the decode batch)
    and that the prefill row is one pass of the prompt alone."""
    args = ["plan", "llama-3-8b", "-H", "H100-SXM", "--gpus", 1, "--isl", 32000, "--osl", 2000,
            "--concurrency", 4, "--chunked-prefill", 8192]  # fmt: skip
    text = " ".join(run(*args)[0].split())
    assert "prefill of one 32,000-token prompt (causal, one pass alone)" in text
    assert "of which the prompt's 4 chunk steps of 8,192 tokens (beside the decode batch)" in text
    assert "chunk step" not in " ".join(run(*args[:-2])[0].split())


def test_ttfts_chunk_steps_and_the_prefill_row_are_in_ttfts_unit(run):
    """TTFT's part was in seconds under TTFT in ms ('TTFT 472.3 ms / of which the prompt's
    1 chunk step(s) ... 0.294 s', and the prefill row '0.257 s'; DeepSeek-V4-Pro on 8 x H200
    under SGLang): both are now in TTFT's unit (serving.plan.duration_text)."""
    args = ["plan", "deepseek-v4-pro", "-H", "H200", "--gpus", 8, "--isl", 2000, "--osl", 500,
            "--engine", "sglang"]  # fmt: skip
    rows = {}
    for line in run(*args)[0].splitlines():
        cells = [c.strip() for c in line.split("│") if c.strip()]
        if len(cells) == 2:
            rows[cells[0]] = cells[1]
    chunk = next(v for k, v in rows.items() if "chunk step" in k)
    prefill = next(v for k, v in rows.items() if k.startswith("prefill of one"))
    assert rows["TTFT"].endswith(" ms") and chunk.endswith(" ms") and prefill.endswith(" ms")
    assert float(chunk.split()[0]) < float(rows["TTFT"].split()[0])


def test_prompts_beyond_the_chunk_queue_for_prefill(run):
    """Qwen3-Next on 8 x H200 under SGLang (its defaults: chunk 8,192, max running what fits),
    2,868 in flight (what fits): the plan said 'the prompts need 11,472 tokens a step ... an
    engine would queue requests for prefill, a wait these figures leave out' and timed every
    step with those 11,472 prompt tokens (TTFT 0.154 s, queued 0, sustainable). The 2,048
    whose prompts a chunk a step keeps up with run; the other 820 wait in the queue, TTFT
    including their wait (Little's law), binding 'chunked prefill'. A plan not given the
    requests in flight runs those 2,048 (it ran the 2,868 that fit)."""
    args = ["plan", "qwen3-next-80b-a3b", "-H", "H200", "--gpus", 8, "--isl", 2000,
            "--osl", 500, "--engine", "sglang", "--format", "json"]  # fmt: skip
    import json

    doc = json.loads(run(*args, "--concurrency", 2868)[0])
    (said,) = [w for w in doc["warnings"] if "wait for prefill" in w]
    assert "2,868 requests in flight exceed the 2,048 whose prompts chunked prefill" in said
    assert "need 11,472 tokens a step" in said and "8,192-token chunk" in said
    assert doc["queued"] == pytest.approx(820) and doc["decode_batch"] == 2048
    assert doc["binding"] == "chunked prefill" and not doc["sustainable"]
    latency = doc["ttft_s"] + (500 - 1) * doc["tpot_s"]
    assert doc["output_tokens_per_s"] == pytest.approx(2868 * 500 / latency, rel=1e-9)
    default = json.loads(run(*args)[0])
    assert default["concurrency"] == 2048 and default["queued"] == 0 and default["sustainable"]


def test_a_prefill_bound_queue_is_said_as_the_prefill_pools_not_the_memorys(run):
    """Qwen3-Next disaggregated on 8 + 8 H200 under SGLang, 2,868 in flight: the decode pool
    holds 2,868 ('largest batch at 2,500 tokens'), the prefill pool's rate keeps 1,015
    served. The warning said '2,868 requests in flight exceed the 1,015 the deployment holds
    at once' beside that largest batch; it now names the prefill pool."""
    import json

    args = ["plan", "qwen3-next-80b-a3b", "-H", "H200", "--gpus", 8, "--isl", 2000, "--osl",
            500, "--mode", "disaggregated", "--engine", "sglang", "--format", "json"]  # fmt: skip
    doc = json.loads(run(*args)[0])
    (said,) = [w for w in doc["warnings"] if "requests in flight exceed" in w]
    held = doc["concurrency"] - doc["queued"]
    assert doc["binding"] == "prefill pool" and doc["max_batch"] > held
    assert f"exceed the {request_count(held)} the prefill pool's rate keeps served" in said
    assert "wait for the prefill pool" in said and "holds at once" not in said


def test_a_fractional_prefill_queue_is_said_as_it_is():
    """DeepSeek-V3 TP8, 8 + 8 B200, 31,500-token prompts, 16 in flight: 0.14 requests wait
    for the prefill pool on average, which the plan said as '0 of the requests in flight
    wait' beside 'sustainable: no'. GB200's faster decode pool returns requests sooner: more
    wait at the prefill pool (0.64), its TTFT higher, which the warning now says. (32,000
    tokens until the MLA decode chain's saving on Blackwell, mla_time.CHAIN_SAVING_S, made
    GB200's decode pool fast enough to queue 1.30 there.)"""
    from mlacalc.cli.plan_cmd import unsustained_words

    kw = dict(tp=8, isl=31500, osl=500, concurrency=16, mode="disaggregated", prefill_gpus=8)
    b, gb = (plan("deepseek-v3", hw, 8, **kw) for hw in ("B200", "GB200"))
    for p in (b, gb):
        assert 0 < p.queued < 1 and not p.sustainable
        said = unsustained_words(p)
        assert (
            said
            == f"{p.queued:.2f} of the 16 requests in flight wait for the prefill pool on average"
        )
        (w,) = [w for w in p.warnings if "requests in flight exceed" in w]
        assert f"the {16 - p.queued:.2f} the prefill pool's rate keeps served" in w
    assert gb.queued > b.queued and gb.ttft_s > b.ttft_s
    assert any("TTFT rises" in w for w in gb.warnings)


# ------------------------------------------------ 3: an overloaded deployment saturates
def test_an_overloaded_deployment_serves_its_capacity_at_the_largest_batch():
    """Requests arriving faster than served: the batch fills and the queue grows, and the
    deployment serves what its full batch does (a closed loop at the largest batch), never
    less as the rate grows (it fell from 1,000 to 100 output tokens/s before)."""
    mix = dict(isl=2000, osl=500, max_running=32)
    full = _llama(**mix, concurrency=32)
    rates = [_llama(**mix, request_rate=r) for r in (2.0, 5.0, 50.0, 1e6)]
    served = [p.output_tokens_per_s for p in rates]
    assert served == sorted(served)
    for p in rates[2:]:
        assert not p.sustainable and math.isinf(p.ttft_s)
        assert p.output_tokens_per_s == pytest.approx(full.output_tokens_per_s, rel=1e-9)
        assert p.tpot_s == pytest.approx(full.tpot_s, rel=1e-9)
        assert "at its largest batch (32 running)" in p.warnings[-1]


def test_requests_beyond_the_batch_warn_and_a_long_ttft_reads_in_minutes():
    p = _llama(isl=2000, osl=500, max_running=32, concurrency=5000)
    assert p.queued == 5000 - 32
    assert any("5,000 requests in flight exceed the 32" in w for w in p.warnings)
    assert p.ttft_s > 600 and p.ttft_text().endswith(" min")
    assert duration_text(7.4791) == "7,479.1 ms"
    assert duration_text(52.34) == "52.3 s"
    assert duration_text(3003.5345) == "50.1 min"


@pytest.mark.parametrize("rate", [0.02, 0.15])
def test_chunked_under_random_arrivals_stays_near_the_whole_prompt_plan(rate):
    """Under a request rate the chunked plan keeps the closed loop's steps and adds the M/D/1
    excess of its prefill runs (the closed loop's wait holds the rest of a run in progress):
    TPOT and TTFT within a few percent of the whole-prompt plan's arrivals chain (TPOT was
    1.3-1.4x it)."""
    mix = dict(isl=32000, osl=2000, request_rate=rate)
    whole, chunked = _llama(**mix), _llama(**mix, chunked_prefill=8192)
    assert chunked.sustainable and chunked.prefill_chunks == 4
    assert chunked.tpot_s == pytest.approx(whole.tpot_s, rel=0.05)
    assert chunked.ttft_s == pytest.approx(whole.ttft_s, rel=0.05)
    assert chunked.ttft_s > chunked.prefill_chunks_s


# ------------------------- 4: one request in flight: TPOT a decode step, TTFT its prompt
@pytest.mark.parametrize("chunk", [None, 512])
@pytest.mark.parametrize("osl", [2, 10, 100])
def test_one_request_in_flight_decodes_at_the_step_and_its_prompt_is_its_ttft(osl, chunk):
    """With one request in flight every gap between its tokens is a decode step and its
    TTFT its prompt's prefill, whatever osl (a trial found DeepSeek-V3.1 on 8 B200 at
    TPOT 40.78 / 15.95 / 10.37 ms for osl 2 / 10 / 100 against a 9.75 ms step, and TTFT
    104.0 / 90.7 / 78.8 ms against a 70.8 ms prefill: its own prompt's step averaged into
    TPOT and waited for as if another request's). Random arrivals at a low rate agree."""
    kw = dict(isl=2000, osl=osl, chunked_prefill=chunk)
    p = _llama(**kw, concurrency=1)
    assert p.tpot_s == pytest.approx(p.decode_step_s, rel=1e-12)
    if chunk is None:
        assert p.ttft_s == pytest.approx(p.prefill_s, rel=1e-12)
    else:  # its own chunk steps, nothing to wait for
        assert p.ttft_s == pytest.approx(p.prefill_chunks_s, rel=1e-12)
    # throughput still pays for the prompt: one request's osl tokens take its prefill step
    # and osl - 1 decode steps (the hand count, within the decode of one sequence the mixed
    # step carries: 1.1% at osl 2). Chunked, not yet: the closed loop counts a request as
    # osl steps, not its chunk steps and osl - 1 (+20% at osl 10 and a chunk of 512)
    if chunk is None:
        hand = osl / (p.ttft_s + (osl - 1) * p.decode_step_s)
        assert p.output_tokens_per_s == pytest.approx(hand, rel=0.015)
    r = _llama(**kw, request_rate=0.01)
    assert r.ttft_s == pytest.approx(p.ttft_s, rel=0.002)
    # (chunked: the others' chunks counted as if a request lasted osl steps, 0.4% at osl 2)
    assert r.tpot_s == pytest.approx(p.tpot_s, rel=0.002 if chunk is None else 0.005)


def test_one_request_alone_on_synced_groups_and_two_in_flight():
    """DP-attention over 8 synced groups, one request: its prompt alone, its gaps decode
    steps; a second request in flight brings its prompt into the first one's gaps."""
    kw = dict(dp_attention=True, ep=8, isl=2000, osl=100)
    one = plan("deepseek-v3", "H200", 8, **kw, concurrency=1)
    assert one.ttft_s == pytest.approx(one.prefill_s, rel=1e-12)
    assert one.tpot_s == pytest.approx(one.decode_step_s, rel=1e-12)
    two = plan("deepseek-v3", "H200", 8, **kw, concurrency=2)
    assert two.tpot_s > two.decode_step_s and two.ttft_s > two.prefill_s


def test_one_output_token_has_no_tpot():
    """osl 1: no gap after the only token, so no TPOT (it said 71.81 ms, the prompt's step)."""
    p = _llama(isl=2000, osl=1, concurrency=1)
    assert p.tpot_s is None and p.output_tokens_per_s_per_user is None
    assert p.ttft_s == pytest.approx(p.prefill_s, rel=1e-12)


# ----------------------- 5: Little's law: throughput, TTFT, TPOT and the requests in flight
DPA8 = dict(hardware="H200", gpus=8, tp=1, dp_attention=True, ep=8, kv_dtype="fp8")


def _dpa(**kw):
    return plan("deepseek-v3", **DPA8, **kw)


def _in_system(p, osl):
    """Requests in the system by Little's law: the request rate times a request's latency,
    its TTFT and the osl - 1 gaps after its first token (TPOT, the gap between tokens)."""
    return p.output_tokens_per_s / osl * (p.ttft_s + (osl - 1) * (p.tpot_s or 0.0))


CLOSED = [(_dpa, 1), (_dpa, 2), (_dpa, 8), (_dpa, 256), (_llama, 1), (_llama, 2), (_llama, 64)]
ARRIVALS = [(_dpa, 0.05), (_dpa, 0.5), (_dpa, 8.0), (_llama, 0.5), (_llama, 5.0)]


@pytest.mark.parametrize("chunk", [None, 512])
@pytest.mark.parametrize("osl", [2, 10, 500])
@pytest.mark.parametrize(("make", "n"), CLOSED)
def test_a_closed_loop_keeps_littles_law(make, n, osl, chunk):
    """N requests in flight = X (TTFT + (osl - 1) TPOT), X the requests per second, whole
    prompts and chunked, one group and 8 synced ones: each request makes its osl tokens in
    its latency (1e-9). Before, the throughput was B over the mean step, a request counted
    as osl steps: with its wait for the step in progress and a chunked prompt's chunk steps
    beyond them, X (TTFT + (osl - 1) TPOT) / N was 0.87-1.19 whole (DP-attention, osl 2 at
    256 / 8 in flight), 0.68 (Llama, 64 at osl 2), chunked 0.80-2.94 (DP-attention, 2 in
    flight at osl 2: 2.94; 8 at osl 10: 1.61), Llama 1.20 at one request and osl 10."""
    p = make(isl=2000, osl=osl, concurrency=n, chunked_prefill=chunk)
    assert _in_system(p, osl) == pytest.approx(n, rel=1e-9)


@pytest.mark.parametrize("osl", [2, 10])
def test_one_request_in_flight_is_its_prompt_then_its_decode_steps(osl):
    """The hand count: one request alone makes osl tokens in its prompt's pass (whole) or its
    chunk steps (chunked), then osl - 1 decode steps. 8 synced groups, whole prompt: within
    the decode the mixed step carries besides (2.0% at osl 10; 6.8 output tokens/s before
    6fffbf7 for a hand count of 30.4). Llama-3-8B on one H100 at chunks of 512 (4 chunk
    steps): exact; it counted the request as osl steps, 98.65 tok/s at osl 10 against the
    hand count's 82.2 (45.5 against 29.6 at osl 2)."""
    p = _dpa(isl=2000, osl=osl, concurrency=1)
    hand = osl / (p.ttft_s + (osl - 1) * p.decode_step_s)
    assert p.output_tokens_per_s == pytest.approx(hand, rel=0.025)
    c = _llama(isl=2000, osl=osl, concurrency=1, chunked_prefill=512)
    assert c.prefill_chunks == 4 and c.ttft_s == pytest.approx(c.prefill_chunks_s, rel=1e-12)
    hand = osl / (c.prefill_chunks_s + (osl - 1) * c.decode_step_s)
    assert c.output_tokens_per_s == pytest.approx(hand, rel=1e-9)


@pytest.mark.parametrize("chunk", [None, 512])
@pytest.mark.parametrize("osl", [2, 10, 500])
@pytest.mark.parametrize(("make", "rate"), ARRIVALS)
def test_random_arrivals_keep_littles_law(make, rate, osl, chunk):
    """--request-rate: the requests in flight are the rate times the latency, TTFT (with a
    chunked prompt's queue) and osl - 1 gaps (the open loop's fixed point, to 1e-5), below
    one request on the synced set (0.05/s) and far above. Before, the fixed point took
    TTFT + osl TPOT and stopped at 1e-3 of a request (0.84-0.998 at 0.05/s and osl 2-500),
    and left a chunked prompt's queue out of it (1.07 at 8/s, osl 2)."""
    p = make(isl=2000, osl=osl, request_rate=rate, chunked_prefill=chunk)
    assert p.sustainable
    assert p.output_tokens_per_s == pytest.approx(rate * osl, rel=1e-12)
    # DeepSeek-V3 DPA8 at 8/s, osl 2, chunk 512 sat on a jump down of the step figures (TPOT
    # 93.9 -> 78.6 ms across it, ranks.synced_prompts' share falling as the load rose) and
    # kept Little's law to 5.0265 for 5.0000 only; with the share monotone it is 1e-4 again
    assert _in_system(p, osl) == pytest.approx(p.concurrency, rel=1e-4)


TP8 = dict(hardware="H200", gpus=8, tp=8, kv_dtype="fp8")


#: The grids of a review's (review9 F2): requests/s and requests in flight per osl
LOAD_GRIDS = {
    2: (np.arange(0.5, 10, 0.5), range(1, 40)),
    500: (np.arange(0.2, 8, 0.4), range(8, 401, 24)),
}


@pytest.mark.parametrize("osl", [2, pytest.param(500, marks=pytest.mark.slow)])
@pytest.mark.parametrize("chunk", [None, 512])
@pytest.mark.parametrize("layout", ["dpa8", pytest.param("tp8", marks=pytest.mark.slow)])
def test_tpot_and_ttft_never_fall_as_the_load_rises(layout, chunk, osl):
    """TPOT and TTFT over grids of request rates (open loop; the sustained ones) and requests
    in flight (closed loop; queued or not), DeepSeek-V3 on 8 H200 under DP-attention (8 synced
    groups) and plain TP8, whole prompts and chunks of 512, osl 2 and 500. Before, the synced
    groups' share of prompt steps fell from 1 to a half as the set's prompts a step passed 1:
    DPA8 chunked 2.5 -> 3.0/s TPOT 93.9 -> 62.5 ms, 8.0 -> 8.1/s 93.9 -> 79.1; whole prompts,
    4 -> 5 in flight 148.2 -> 143.4 ms. A closed loop's steps carried the prompt tokens its
    requests brought past the chunk a step carries, and TTFT's wait for the others' runs
    (their prompts a second times a run's time) fell where such a step grew faster than the
    prompts did (DPA8 chunked, osl 2: 11 -> 12 in flight 604.1 -> 594.1 ms, 20 -> 21 653.0 ->
    648.2, and five more); past that many requests the others now wait in the queue, as in an
    engine whose step carries a chunk at most (figures.chunk_capacity), and TTFT rises by
    their wait. TPOT at most flat past it (the running batch the chunk keeps up with).
    The default run checks DPA8 at osl 2, where every fall above was; plain TP8 and osl 500
    run in CI's slow step (each case 58 plans, 7-12 s of CPU: the four at osl 2 were 50 of
    the file's 80 s)."""
    lay = DPA8 if layout == "dpa8" else TP8
    kw = dict(isl=2000, osl=osl, chunked_prefill=chunk)
    rates, in_flight = LOAD_GRIDS[osl]
    open_ = [plan("deepseek-v3", **lay, **kw, request_rate=r) for r in rates]
    closed = [plan("deepseek-v3", **lay, **kw, concurrency=c) for c in in_flight]
    for figures in ([p for p in open_ if p.sustainable], closed):
        assert len(figures) >= 2
        for name in ("tpot_s", "ttft_s"):
            seen = [getattr(p, name) for p in figures if getattr(p, name)]
            assert all(b >= a * (1 - 1e-9) for a, b in itertools.pairwise(seen)), (name, seen)


def test_chunked_prefill_at_a_low_request_rate_is_not_overloaded():
    """Chunked prefill under 0.05 requests/s on 8 synced groups: the deployment keeps up. The
    open loop took the rate the steps make at the requests in flight (a small share of a
    request, so a small rate) for its capacity, and called it overloaded: TTFT infinite and
    2,936 requests queued at osl 10. Capacity is the full batch's rate now."""
    p = _dpa(isl=2000, osl=10, request_rate=0.05, chunked_prefill=512)
    assert p.sustainable and math.isfinite(p.ttft_s) and p.ttft_s < 0.4


def test_a_throughput_dip_as_load_rises_is_a_micro_batch_crossing_tile_edges():
    """Kimi-K2.6 NVFP4 on GB200, 24 + 48 disaggregated under SGLang with two-batch overlap:
    3,655.8 -> 3,626.6 tok/s/GPU from 12,300 to 12,500 in flight (-0.8%), where a micro-batch
    (half a rank's rows) passes the dense GEMMs' M = 256. Round 26: FlashInfer's
    TensorRT-LLM-gen nvfp4 MoE runs no 128-row tile (moe_time.FLASHINFER_TILE_UP), so the
    routed experts no longer step there (12,000 -> 12,500 was 3,615.2 -> 3,561.7, -1.5%, with
    the experts' second 128-row tile; -1.7% before TensorRT-LLM-gen's padded intermediate,
    -2.6% before the pair cost, -3.2% before MLA decode's whole 64-row query tiles; a new-user
    trial saw 3,858 -> 3,705 at 13,000). docs/serving.md ("Serving figures") says why; these
    are its figures: if the rules change, the paragraph must change with them."""
    from reference_data import HF_CONFIGS_2

    import mlacalc

    model = mlacalc.load_model(HF_CONFIGS_2 / "nvidia--Kimi-K2.6-NVFP4.config.json")
    kw = dict(tp=1, ep=24, dp_attention=True, overlap="tbo", kv_dtype="fp8", isl=4000,
              osl=1000, mode="disaggregated", prefill_gpus=48, prefill_tp=1, prefill_ep=48,
              prefill_dp_attention=True, engine="sglang",
              max_tokens=16384)  # fmt: skip
    runs = {c: plan(model, "GB200", 24, concurrency=c, **kw) for c in (12300, 12500)}
    low, high = runs[12300], runs[12500]
    assert low.running_batch_per_group / 2 < 256 < high.running_batch_per_group / 2
    # -0.8% (-1.5% from 12,000 with the experts' 128-row tile, bound 0.99)
    assert high.output_tokens_per_s_per_gpu < 0.995 * low.output_tokens_per_s_per_gpu

    def ms(p, name):
        return next(k["seconds"] for k in p.kernels if k["name"] == name) * 1e3

    # M past 256: 0.666 -> 0.715 ms (0.63 -> 0.91 before cuBLAS's persistent bf16 GEMM
    # balanced its last wave, gemm_time.BALANCED_WAVES; the bound was 1.4)
    assert ms(high, "qkv_a_proj") > 1.05 * ms(low, "qkv_a_proj")
    # no routed-expert step: 6.872 -> 6.894 ms (a second 128-row tile took 6.70 -> 7.33
    # before FlashInfer's gen MoE ran its 256-row tile where a load asks for 128)
    assert ms(high, "routed_experts") < 1.01 * ms(low, "routed_experts")
