"""A search limited to the layouts and MoE serving options a fleet runs (``search(tp=, pp=,
ep=, dp_attention=, redundant_experts=, routing=, expert_skew=, rebalance=,
routing_imbalance=)``, ``mlacalc search --tp --pp --ep --dp-attention --redundant-experts
--routing ...``): the search's own layouts unchanged without them, one layout's best equal
to plan of it, plan's routing rules, every bad limit one line naming its option."""

from __future__ import annotations

import csv
import io
import json

import pytest
from _helpers import plan_point

from mlacalc.cost.engine import as_model
from mlacalc.hardware.catalogue import load_hardware
from mlacalc.serving.gpu_step import StepModel
from mlacalc.serving.layout import make_layout
from mlacalc.serving.plan import plan
from mlacalc.serving.search import BATCHES, search
from mlacalc.words.dtypes import resolve_kv_layout
from mlacalc.words.errors import InvalidArgumentError

MOE = "qwen3-30b-a3b"  # 128 routed experts, 32 attention heads, 48 layers
ASK = dict(isl=2000, osl=500, ttft=2.0, tpot=0.05)
#: SGLang's --tp 8 --dp 8 --enable-dp-attention --ep 8 on 8 GPUs, in plan's words
ONE = dict(tp=1, ep=8, dp_attention="on", kv_dtypes="fp8", weight_dtypes="fp8")
FIGURES = ("ttft_s", "tpot_s", "output_tokens_per_s_per_gpu", "output_tokens_per_s_per_user")


def test_no_limits_keep_the_search_as_it_was():
    """Unlimited, the search's best is what it was before the limits existed, and it says it
    ran unlimited: TP1 DP-attention8 EP8 aggregated, batch 506, TPOT 48.271 ms, TTFT 72.29 ms,
    10,472.1 tok/s/GPU, 5,594 points, 1,722 ruled out; with the limits of ``ONE``
    (DP-attention on, EP8) the same point (before refinement went on next to a setup's best
    while a gap beside it could pass the best found, search.refine_gaps: TP1 DP8 at batch 512,
    TPOT 49.674 ms, TTFT 97.13 ms, 10,287.5, 5,586 points, where TPOT 49.5 ms found b506, a
    looser target's best the worse; limited, TP1 DP-attention8 EP8's b512, 10,277.1; before
    Hopper's fp8 XQA waited
    once its cache outgrows the L2, attention_time._spill_share, its fp8 decode class refitted
    with a fuller overlap of its walk and stream: batch 512's decode steps shorter, both
    layouts now meet the 50 ms TPOT there, which none did, so fewer setups are refined below
    it; TP1 DP-attention8 EP8 at batch 485, TPOT 48.338 ms, TTFT 72.51 ms, 10,023.4 tok/s/GPU,
    6,984 points, the limited search's best the same; 6,936 points before TensorRT-LLM's
    mma.sync XQA took its own key splits, attention_time.xqa_splits, the best unchanged;
    TPOT 48.153 ms, TTFT 72.24 ms, 10,061.9, 6,888 points at a22e1de, after the fp8 decode's
    merge refit, 72004ed, before TensorRT-LLM's
    own MoE took the sort's cost past one block's 256 tokens and its one block's per pair,
    moe_time ``sort_s`` / ``sort_pair_s``, its bf16 and fp8 classes refitted, the best's layout
    and batch unchanged; TPOT 48.491 ms, TTFT 72.74 ms, 9,991.9, 6,936 points before that
    merge refit; 6,888 points before TensorRT-LLM's
    MMHA and mma.sync XQA overlapped more with the units an SM runs in turn,
    attention_time.turn_overlap, the best unchanged; batch 512, TPOT 49.820 ms, TTFT 74.33 ms,
    10,267.0, 5,592 points before TensorRT-LLM's own fp8 MoE took a cost per row of the rank,
    moe_time ``row_s``, its fp8 class refitted: batch 512's decode step now misses the 50 ms
    TPOT; batch 485, 48.583 ms, 72.88 ms, 9,973.0,
    7,032 points before DeepEP's normal combine ended with a token's reduction, comm_time's
    ``reduce_s``, refitting the combine class: Qwen3-30B's width, 2,048, the table's, was
    25% slow at a few tokens; 9,800 and 2,338 before DP-attention over
    one attention group a stage was timed once, as the same layout without it, the best
    unchanged; 8,792 points before refinement's bound
    took a dip's margin and refined setups missing the targets below their first batch,
    search.DIP_MARGIN, the best unchanged; 5,240 and 1,546 before pipeline stages
    met expert parallelism in the search's own layouts, the best unchanged; 47.933 ms,
    72.70 ms, 10,108.0, 5,288 points before ranks.synced_prompts' share rose with the load:
    485 / 500 prompts a group a step, the share of prompt steps 0.97 -> 1 - 0.03^8), the best of
    ``test_one_layout_is_plan_of_it`` (before every setup that could pass the best was
    refined, search.refine_bound: TP1 DP8 at batch 485, TPOT 48.657 ms, TTFT 73.71 ms,
    9,957.4 tok/s/GPU, 3,068 points; 48.930 ms, 74.14 ms, 9,901.9 before cuBLAS's persistent
    GEMMs balanced their last wave, gemm_time.BALANCED_WAVES, the limits' main 85bf776
    unchanged by them; TPOT 49.741 ms, TTFT 74.21 ms, 10,283.3 before the MMHA split refit of
    attention_decode, attention_time.MMHA_SPLIT_UNITS_PER_SM; TPOT 48.338 ms, TTFT 72.51 ms,
    10,023.4 before the fp8 decode class's refit with MMHA's block size, mmha_block_s and
    mmha_hidden_s: its Hopper fp8 XQA terms moved, the best's layout, batch and points
    unchanged; TPOT 48.207 ms, TTFT 72.32 ms, 10,050.8 before the decode classes' refit with
    the MMHA fallback's wave of SMs, attention_time._mmha_fallback_s: the Hopper fp8 XQA terms
    moved again, the best's layout, batch and points unchanged; 5,738 points before an
    unchunked prompt rode whole in one pipeline micro-batch, figures.micro_batch_prompts: the
    PP layouts' prompt steps are a whole pass, fewer of their setups refined, the best
    unchanged)."""
    r = search(MOE, "H200", [8], **ASK)
    b = r.best
    assert (b["layout"], b["mode"], b["batch_per_group"]) == (
        "TP1 DP-attention8 EP8", "aggregated", 506)  # fmt: skip
    assert b["tpot_s"] == pytest.approx(0.048270671542604476, rel=1e-12)
    assert b["ttft_s"] == pytest.approx(0.07228849903097434, rel=1e-12)
    assert b["output_tokens_per_s_per_gpu"] == pytest.approx(10472.134486771405, rel=1e-12)
    limited = search(MOE, "H200", [8], modes="aggregated", **ONE, **ASK).best
    assert (limited["layout"], limited["batch_per_group"]) == ("TP1 DP-attention8 EP8", 506)
    assert limited["output_tokens_per_s_per_gpu"] == pytest.approx(10472.134486771405, rel=1e-12)
    assert limited["output_tokens_per_s_per_gpu"] <= b["output_tokens_per_s_per_gpu"]
    assert (len(r.points), sum(r.ruled_out.values())) == (5594, 1722)
    assert r.constraints() == {
        "tp": None,
        "pp": None,
        "ep": "any",
        "dp_attention": "both",
        "redundant_experts": None,
        "prefill_tp": None,
        "prefill_ep": "any",
        "prefill_dp_attention": "both",
        "prefill_redundant_experts": None,
        "routing": "random",
        "expert_skew": 0.0,
        "rebalance": None,
        "routing_imbalance": 1.0,
        "moe_backend": None,
        "prefix_cache_hit": 0.0,
    }
    assert r.constraints_text() == "" and r.row(b)["constraints"] == ""


def _plan_of(r, p, **routing):
    """plan of a search point with the search's options (its plan command's)."""
    return plan_point(
        MOE,
        r.hardware,
        p,
        r.isl,
        r.osl,
        weight_dtype=p["weight_dtype"],
        chunked_prefill=p["chunked_prefill"],
        memory_reserve=r.memory_reserve,
        engine=r.engine,
        engine_defaults="none",
        **r.scheduler_defaults_applied,
        **routing,
    )


@pytest.mark.parametrize(
    "routing",
    [
        {},
        dict(redundant_experts=8, expert_skew=1.0, rebalance=False),
        dict(redundant_experts=8, routing_imbalance=1.2),
        dict(routing="balanced"),
    ],
    ids=["plain", "redundant-skew", "redundant-imbalance", "balanced"],
)
def test_one_layout_is_plan_of_it(routing):
    """A search limited to one layout (TP1 DP-attention8 EP8, fp8 weights and KV,
    aggregated) gives, for its best, plan's TPOT, TTFT and tokens/s per GPU of that layout,
    batch and dtypes, with the same routing options (before: search took no limits)."""
    r = search(MOE, "H200", [8], modes="aggregated", **ONE, **ASK, **routing)
    b = r.best
    extra = routing.get("redundant_experts", 0)
    assert b["layout"] == "TP1 DP-attention8 EP8" + (
        f" ({extra} redundant experts)" if extra else ""
    )
    assert b["redundant_experts"] == extra
    moe = {k: v for k, v in routing.items() if k != "redundant_experts"}
    got = _plan_of(r, b, **moe)
    assert got.layout == b["layout"] and got.fits
    assert got.weights_per_gpu_bytes == b["weights_per_gpu_bytes"]
    for key in FIGURES:
        assert getattr(got, key) == pytest.approx(b[key], rel=1e-12), key
    assert set(r.ruled_out) >= {"ruled out by --tp 1", "ruled out by --ep 8"}


def test_the_routing_options_change_the_points_with_experts_ranks():
    """The experts' skew without EPLB loads the hottest rank: every EP8 point slower at the same
    batch, as plan's (batch 64, no overlap: TPOT 23.62 -> 31.03 ms with --expert-skew 1; 23.56 ->
    30.97 ms before Hopper's fp8 XQA waited once its cache outgrows the L2,
    attention_time._spill_share, its fp8 decode class refitted; 23.54 ->
    30.95 ms before the decode classes' refit with the MMHA fallback's wave of SMs,
    attention_time._mmha_fallback_s; 23.56 ->
    30.97 ms before the fp8 decode class's refit with MMHA's block size, mmha_block_s and
    mmha_hidden_s, which moved its Hopper fp8 XQA terms; 23.49 ->
    30.92 ms at a22e1de before TensorRT-LLM's own MoE took its sort's costs, moe_time ``sort_s``
    and ``sort_pair_s``, its bf16 and fp8 classes refitted; 23.53 -> 30.96 ms before the fp8
    decode's merge refit, 72004ed; 23.42 ->
    30.71 ms before TensorRT-LLM's own fp8 MoE took a cost per row of the rank, moe_time
    ``row_s``, its fp8 class refitted: the hottest rank's rows cost more; 23.61
    -> 30.82 ms before DeepEP's normal combine ended with a token's reduction, comm_time's
    ``reduce_s``; 20.63 -> 26.40 ms before the synced groups' prompt share rose with the load,
    ranks.synced_prompts; 20.79 -> 26.56 ms before cuBLAS's persistent GEMMs balanced their last
    wave, 979409f; the routing was not search's to take before; 23.41 -> 30.70 ms before the MMHA
    split refit of attention_decode, attention_time.MMHA_SPLIT_UNITS_PER_SM; the figures at
    1e-5 moved when TensorRT-LLM's MMHA and mma.sync XQA overlapped more with the units an SM
    runs in turn, attention_time.turn_overlap). The points compared are the batches both
    searches timed (the same batches before refinement's later passes, search.refine_gaps)."""

    def tpots(**kw):
        r = search(MOE, "H200", [8], modes="aggregated", batches=(64,), **ONE, **ASK, **kw)
        return {(p["overlap"], p["chunked_prefill"], p["batch_per_group"]): p["tpot_s"]
                for p in r.points}  # fmt: skip

    base, skew = tpots(), tpots(expert_skew=1.0)
    # the batches both timed (refinement's later passes, search.refine_gaps, go where each
    # search's own best and gaps lead: the two need not refine the same batches)
    both = base.keys() & skew.keys()
    assert {("none", None, 64), ("tbo", None, 64)} <= both and len(both) > 10
    assert all(skew[k] > base[k] for k in both)
    assert base[("none", None, 64)] == pytest.approx(0.0236167, rel=1e-5)
    assert skew[("none", None, 64)] == pytest.approx(0.0310328, rel=1e-5)


def test_redundant_experts_add_plans_bytes():
    """Eight redundant experts over EP8 add one expert's weights per MoE layer per GPU, the
    bytes plan adds for them: 48 layers x 3 x 2048 x 768 fp8 weights, 226,492,416 bytes."""

    def weights(n):
        r = search(MOE, "H200", [8], modes="aggregated", redundant_experts=n, **ONE, **ASK)
        return r.best["weights_per_gpu_bytes"]

    def planned(n):
        kw = dict(tp=1, ep=8, dp_attention=True, redundant_experts=n, weight_dtype="fp8")
        return plan(MOE, "H200", 8, isl=2000, osl=500, kv_dtype="fp8", **kw).weights_per_gpu_bytes

    added = weights(8) - weights(0)
    assert added == planned(8) - planned(0) > 0
    assert added == ADDED_BYTES


#: one expert's fp8 weights (gate, up, down: 3 x 2048 x 768) in each of the 48 MoE layers
ADDED_BYTES = 48 * 3 * 2048 * 768


def test_limits_apply_to_both_pools():
    """A disaggregated point's prefill pool is drawn from the same limited layouts."""
    r = search(MOE, "H200", [8, 16], modes="disaggregated", tp=(1, 2), ep="none", **ASK)
    assert r.points
    for p in r.points:
        assert p["tp"] in (1, 2) and p["prefill_tp"] in (1, 2)
        assert p["ep"] == 1 and p["prefill_ep"] == 1


def test_the_prefill_pool_has_limits_of_its_own():
    """``prefill_tp``, ``prefill_ep``, ``prefill_dp_attention`` limit the prefill pool apart
    (the decode pool TP1 DP-attention8 EP8; prefill TP2 or TP4, no EP, no DP-attention), and
    the best is plan of both pools (before: search took no limits)."""
    kw = dict(prefill_tp=(2, 4), prefill_ep="none", prefill_dp_attention="off")
    r = search(MOE, "H200", [8, 16], modes="disaggregated", **ONE, **ASK, **kw)
    assert {(p["layout"], p["prefill_layout"]) for p in r.points} == {
        ("TP1 DP-attention8 EP8", "TP2 DP4"),
        ("TP1 DP-attention8 EP8", "TP4 DP2"),
    }
    c = r.constraints()
    assert (c["prefill_tp"], c["prefill_ep"], c["prefill_dp_attention"]) == ([2, 4], "none", "off")
    assert r.constraints_text().endswith(
        "--prefill-tp 2,4 --prefill-ep none --prefill-dp-attention off"
    )
    b = r.best
    got = plan_point(
        MOE, r.hardware, b, r.isl, r.osl, weight_dtype="fp8", engine=r.engine,
        engine_defaults="none", **r.scheduler_defaults_applied,
    )  # fmt: skip
    assert got.prefill_layout == b["prefill_layout"]
    for key in FIGURES:
        assert getattr(got, key) == pytest.approx(b[key], rel=1e-9), key


def test_a_pipeline_limit_leaves_the_prefill_pool_its_one_stage():
    """``pp`` limits the decode pool: a prefill pool runs one stage whatever it says (with
    --pp 2 alone, no disaggregated point could have had a pool)."""
    r = search(MOE, "H200", [8, 16], modes="disaggregated", pp=2, **ASK)
    assert r.points and {p["pp"] for p in r.points} == {2}
    assert r.constraints()["pp"] == [2] and "prefill_pp" not in r.constraints()


def test_limits_that_leave_nothing_say_which():
    with pytest.raises(InvalidArgumentError) as err:
        search(MOE, "H200", [1], dp_attention="on", **ASK)
    assert err.value.argument == "dp_attention"
    assert "ruled out by --dp-attention on" in str(err.value)


RUN = ["search", MOE, "-H", "H200", "--gpus", "8", "--isl", "2000", "--osl", "500"]


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["--tp", "8,x"], "--tp"),
        (["--tp", "0"], "--tp"),
        (["--tp", "-2"], "--tp"),
        (["--tp", ","], "--tp"),
        (["--tp", "3"], "--tp"),  # does not divide the 32 heads
        (["--tp", "16"], "--tp"),  # divides none of the budget's pools
        (["--pp", "0"], "--pp"),
        (["--pp", "64"], "--pp"),  # beyond the 48 layers
        (["--ep", "3"], "--ep"),  # divides none of the GPU counts
        (["--ep", "0"], "--ep"),
        (["--ep", "all"], "--ep"),
        (["--ep", "8", "--redundant-experts", "3"], "--ep"),  # 131 slots over 8
        (["--dp-attention", "yes"], "--dp-attention"),
        (["--redundant-experts", "many"], "--redundant-experts"),
        (["--redundant-experts", "-1"], "--redundant-experts"),
        (["--redundant-experts", "8", "--ep", "none"], "--redundant-experts"),
        (["--expert-skew", "1", "--ep", "none"], "--expert-skew"),
        (["--no-rebalance", "--ep", "none"], "--rebalance"),
        (["--routing-imbalance", "2", "--ep", "1"], "--routing-imbalance"),
        (["--routing", "balanced", "--routing-imbalance", "2"], "--routing-imbalance"),
        (["--gpus", "1", "--dp-attention", "on"], "--dp-attention"),  # leaves nothing
        (["--prefill-tp", "3"], "--prefill-tp"),
        (["--prefill-tp", "0"], "--prefill-tp"),
        (["--prefill-ep", "all"], "--prefill-ep"),
        (["--prefill-ep", "16"], "--prefill-ep"),  # divides none of the budget's pools
        (["--prefill-dp-attention", "yes"], "--prefill-dp-attention"),
        (["--prefill-redundant-experts", "x"], "--prefill-redundant-experts"),
        (["--prefill-ep", "8", "--prefill-redundant-experts", "3"], "--prefill-ep"),
        (["--prefill-tp", "8", "--modes", "aggregated"], "--prefill-tp"),
    ],
)
def test_bad_limits_are_one_line_naming_the_option(run, args, option):
    out, err = run(*RUN, *args, code=2)
    lines = (out + err).strip().splitlines()
    assert len(lines) == 1, out + err
    assert option in lines[0] and "Traceback" not in out + err


def test_a_degree_dividing_no_pool_names_one_split_of_the_budget(run):
    """Before: the same 8-GPU budget's pool sizes read "8" for --tp 16 (nothing fits within
    tp 16, so the split fell back to the budget) and "4, 8" for --ep 3 (the split under the
    limit). Now both name what the budget is split into, 1 to 8 GPUs; --ep 3 adds the pools
    a layout within the limits fits on (3 GPUs, rounded up to 4 to tile 8-GPU nodes)."""
    split = "pool sizes 1, 2, 3, 4, 5, 6, 7, 8"
    _, tp = run(*RUN, "--tp", "16", code=2)
    assert (
        "16 divides none" in tp
        and "the pool sizes of the 8-GPU budget: 1, 2, 3, 4, 5, 6, 7, 8" in tp
    )
    _, ep = run(*RUN, "--ep", "3", code=2)
    assert "3 divides none" in ep and "fits on: 4, 8, of its " + split in ep


def test_the_notes_are_sentences_after_the_one_before():
    """Before: "Disaggregated GPUs read decode+prefill. the best is the largest batch
    searched ..." (and notes run together by "; ")."""
    from mlacalc.cli.search_cmd import notes_text

    notes = ("the best is the largest batch searched (30; 459 fit)", "context 9 exceeds it.")
    assert (
        notes_text(notes)
        == "The best is the largest batch searched (30; 459 fit). Context 9 exceeds it."
    )
    assert notes_text(()) == ""


def test_the_why_others_lose_note_capitalises_each_note(run):
    out, _ = run(
        "search", "llama-3-8b", "-H", "H200", "--gpus", "1,2", "--isl", "2000", "--osl", "100",
        "--batches", "16", "--chunked-prefills", "none", "--kv-dtypes", "bf16",
    )  # fmt: skip
    text = " ".join(out.split())
    assert "read decode+prefill. Disaggregated: a list of GPU counts (1, 2)" in text
    assert "of any size. The best is the largest batch searched" in text


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["--ep", "8"], "--ep"),
        (["--routing", "balanced"], "--routing"),
        (["--dp-attention", "on"], "--dp-attention"),
        (["--redundant-experts", "4"], "--redundant-experts"),
    ],
)
def test_a_dense_model_refuses_the_expert_options(run, args, option):
    dense = ["search", "llama-3-8b", "-H", "H200", "--gpus", "8", "--isl", "2000", "--osl", "500"]
    out, err = run(*dense, *args, code=2)
    lines = (out + err).strip().splitlines()
    assert len(lines) == 1, out + err
    assert option in lines[0] and ("no routed experts" in lines[0] or "no experts" in lines[0])


LIMITED = ["--tp", "1", "--ep", "8", "--dp-attention", "on", "--expert-skew", "1"]
SAID = "--tp 1 --ep 8 --dp-attention on --expert-skew 1"


def test_every_output_says_the_limits(run):
    """The table says what it searched under, the JSON the limits (every key, always), each
    CSV row and JSON point its ``constraints``; the plan command carries the routing."""
    table, _ = run(*RUN, "--tpot", "50ms", *LIMITED)
    assert f"# searched under: {SAID}" in table
    assert "--expert-skew 1.0" in " ".join(table.split())  # the same figures' plan command
    doc = json.loads(run(*RUN, "--format", "json", *LIMITED)[0])
    assert doc["constraints"]["tp"] == [1] and doc["constraints"]["ep"] == [8]
    assert doc["constraints"]["dp_attention"] == "on"
    assert doc["constraints"]["expert_skew"] == 1.0
    assert doc["best"]["constraints"] == SAID
    text = run(*RUN, "--format", "csv", *LIMITED)[0]
    rows = list(csv.DictReader(io.StringIO(text)))
    assert rows and {r["constraints"] for r in rows} == {SAID}


def test_a_limited_disaggregated_best_is_plan_of_it():
    """Disaggregated, both pools limited to TP1 DP-attention EP8, a measured imbalance: the
    best's figures are plan's of its two pools (the point's plan command's)."""
    r = search(MOE, "H200", [8, 16], modes="disaggregated", routing_imbalance=1.3, **ONE, **ASK)
    b = r.best
    assert b["layout"] == "TP1 DP-attention8 EP8" and b["prefill_ep"] == 8
    got = plan_point(
        MOE, r.hardware, b, r.isl, r.osl, weight_dtype="fp8", engine=r.engine,
        engine_defaults="none", routing_imbalance=1.3, **r.scheduler_defaults_applied,
    )  # fmt: skip
    for key in FIGURES:
        assert getattr(got, key) == pytest.approx(b[key], rel=1e-9), key


def test_a_pool_without_expert_ranks_is_not_loaded_by_the_imbalance():
    """plan's measured imbalance is the busiest expert GPU's load: an ep-1 pool (a
    disaggregated plan's TP8 decode pool beside an EP8 prefill pool, which plan then accepts
    the imbalance for) has no such GPU. Before: its decode step at batch 64 rose with it,
    6.508 -> 6.636 ms for imbalance 1 -> 2 (TP8 holding every expert)."""
    m, hw = as_model(MOE), load_hardware("H200")
    lay = make_layout(m, 8, tp=8)

    def step(imbalance):
        sm = StepModel(m, lay, "fp8", resolve_kv_layout("fp8"), hw, routing_imbalance=imbalance)
        return float(sm.step(dec_B=64.0, dec_q=1, dec_S=2250).seconds[0])

    assert step(2.0) == step(1.0)


def test_redundant_experts_that_fit_no_ep_degree_are_counted():
    """``--redundant-experts 3`` with ``--ep any``: Qwen3-30B-A3B's 128 + 3 = 131 slots split
    over no EP degree above 1, so each of the 10 expert-parallel layouts of 8 GPUs (those of
    ``--redundant-experts 0``) is ruled out, counted under its reason for both weight dtypes,
    KV dtypes, 11 batches and 2 modes: 10 x 2 x 2 x 11 x 2 = 880 (13, 1,144, before
    DP-attention over one attention group a stage was timed once, as the same layout without
    it; before: dropped uncounted; 9 layouts, 792, before pipeline stages met expert
    parallelism in the search's own)."""
    from collections import Counter

    from mlacalc.serving.search import check_search
    from mlacalc.serving.search_space import candidate_layouts

    r = search(MOE, "H200", [8], redundant_experts=3, **ASK)
    req = check_search(
        MOE, "H200", [8], **ASK, weight_dtypes=None, kv_dtypes=("bf16", "fp8"),
        modes=("aggregated", "disaggregated"), overlaps=("none", "tbo"), batches=BATCHES,
        memory_reserve=0.1, page_size=16, prefill_pass="fused", output_lag_steps=0,
        profile=None, redundant_experts=0,
    )  # fmt: skip
    lays = candidate_layouts(req.m, req.hw, 8, None, 1 << 50, (), {}, req.limits, Counter())
    ep_layouts = sum(lay.ep > 1 for lay in lays)
    assert ep_layouts == 10
    assert r.ruled_out["ruled out by --redundant-experts 3"] == ep_layouts * 2 * 2 * 11 * 2
    assert all(p["ep"] == 1 for p in r.points)


def test_ep_1_is_said_as_given():
    """``--ep 1`` limits to no expert parallelism, as ``--ep none``; the words say ``--ep 1``
    as typed (before: ``--ep none`` in the reasons, the constraints' words and the errors);
    the JSON constraint stays ``"none"`` (one value for both)."""
    r = search(MOE, "H200", [8], ep=1, tp=1, **ASK)
    assert "ruled out by --ep 1" in r.ruled_out and "ruled out by --ep none" not in r.ruled_out
    assert r.constraints_text() == "--tp 1 --ep 1" and r.constraints()["ep"] == "none"
    with pytest.raises(InvalidArgumentError, match=r"\(--ep 1\): no layout searched has expert"):
        search(MOE, "H200", [8], ep=[1], expert_skew=1.0, **ASK)
    with pytest.raises(InvalidArgumentError, match=r"ep is none \(--ep 1\)"):
        search(MOE, "H200", [8], ep=1, redundant_experts=8, **ASK)
    none = search(MOE, "H200", [8], ep="none", tp=1, **ASK)
    assert none.constraints_text() == "--tp 1 --ep none"
    assert "ruled out by --ep none" in none.ruled_out


#: the search of test_the_unlimited_best_is_no_worse_than_a_limited_one's cases
LIMIT_ASK = dict(isl=5000, osl=500, tpot=0.05, engine="sglang")


@pytest.fixture(scope="module")
def unlimited_best() -> float:
    """The unlimited search's best tok/s/GPU, searched once for the module's five limits
    (each case searched it again: 5 of the 8 searches, about 4 s of CPU each)."""
    return search("deepseek-v3", "H200", [8], **LIMIT_ASK).best["output_tokens_per_s_per_gpu"]


@pytest.mark.parametrize(
    "limits",
    [
        dict(tp=(4,), pp=(2,)),  # TP4 PP2 EP4 (EP inside a pipeline stage), 139.15
        dict(tp=(8,), ep=(8,)),  # TP8 EP8 refined near the TPOT edge (255f531), 138.06
        dict(tp=(1,), dp_attention="on", ep=(8,)),
        dict(pp=(2,), ep="none"),
        dict(pp=(4,)),
    ],
)
def test_the_unlimited_best_is_no_worse_than_a_limited_one(limits, unlimited_best):
    """A tp/pp/DP-attention limit only narrows the search: the unlimited best reaches at least
    each limited best (tok/s/GPU). Before pipeline stages met expert parallelism in the
    search's own layouts, DeepSeek-V3 on 8 H200 under SGLang (5,000 + 500, TPOT 50 ms) answered
    TP8 EP8 at 138.06 tok/s/GPU unlimited, TP4 PP2 EP4 at 139.15 with ``--tp 4 --pp 2`` (the
    unlimited best now)."""
    limited = search("deepseek-v3", "H200", [8], **limits, **LIMIT_ASK).best
    assert unlimited_best >= limited["output_tokens_per_s_per_gpu"]


def test_a_tp_that_splits_no_heads_names_linear_heads_only_where_the_model_has_them(run):
    """--tp 3 on DeepSeek-V3 said "(and its linear attention's key and value heads)" of a
    model with none (a capacity planner's trial): the parenthesis is a linear-attention
    model's only, with its counts."""
    _, err = run("search", "deepseek-v3", "-H", "H200", "--gpus", 8, "--tp", 3, "--isl", 1000,
                 "--osl", 1000, code=2)  # fmt: skip
    assert "does not divide the 128 attention heads of DeepSeek-V3; give a divisor" in err
    assert "linear" not in err
    _, err = run("search", "qwen3-next-80b-a3b", "-H", "H200", "--gpus", 8, "--tp", 3,
                 "--isl", 1000, "--osl", 1000, code=2)  # fmt: skip
    assert "heads of its linear attention)" in err and " key and " in err
