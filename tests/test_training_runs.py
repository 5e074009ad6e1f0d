"""The training step time against published runs (benchmarks/bench_training.py prints them).

Errors measured when the model was written (nothing fitted to these runs): DeepSeek-V3 +36.5%
(+36.9% since the routed experts' gradients reduce over their expert data-parallel group)
(DualPipe's full overlap taken at its word, FP8 GEMMs at the fitted FP8 rate; the 20 SMs it
keeps for communication are modelled, +60.3% without then, +72.7% since each stage is timed with
its own layers), DeepSeek-V2 +30.1% (its GPU count
assumed), Llama 3 405B on 8,192 GPUs -8.4%, on 16,384 GPUs -28.1% (16 micro-batches on 16
stages: a 1F1B bubble of 15/31 of the step, where Meta ran an interleaved schedule); since GQA's
K/V projection is timed at its tensor-parallel share of the shape (it had been timed whole on
each rank), -4.1% and -24.9%, DeepSeek-V3 +37.6%, V2 +30.2% (its busiest stage's states);
since fp8-mixed times the output head in bf16 (e61f853; the DeepSeek-V3 report keeps the
embedding and the output head in their original precision), DeepSeek-V3 +22.7% (the head on
the last pipeline stage); since cuBLAS's balanced last wave (979409f), DeepSeek-V3 +18.6%,
V2 +27.8%, Llama 3 405B -8.1% and -28.0%; since each pipeline stage is timed with its own
layers (the output head on the last stage alone, DeepSeek's dense FFNs on the first),
DeepSeek-V3 +57.1%, V2 +60.1%, Llama 3 405B -2.1% and -23.2%; with Meta's uneven stages (7, 8 x
14, 7 layers, ``stage_layers="7,..,7"``) -1.8% and -22.9%; since the loss is timed on the
last stage, DeepSeek-V3 +42.8%, V2 +57.3%; since V3's MTP module trains with it, V3 -9.4%;
since each stage's data-parallel traffic hides behind its own last backward, V3 -10.6%;
since V2 runs the zero-bubble schedule its report names (ZB-H1), V2 +61.4%.
The bounds below hold each error a few points beyond that, so a change that makes a prediction
worse fails here.
"""

from __future__ import annotations

import pytest
from reference_data import benchmark

from mlacalc.training.cost import training_cost
from mlacalc.training.runs import PUBLISHED_RUNS, compare_runs

BOUNDS = {
    # DeepSeek-V3 +22.7% -> +18.6% (V2 +30.3% -> +27.8%, Llama 405B -4.0% / -24.9% -> -8.1% /
    # -28.0%) with cuBLAS's balanced last wave (979409f: the default's gemm:bf16 eff_compute
    # 0.91 -> 0.87); 0.19, 0.27 before it, 0.31, 0.42 before the bf16 head
    # each stage timed with its own layers: V3 +18.6% -> +57.1%, V2 +27.8% -> +60.1% (the
    # head had been timed on every stage), Llama -8.0% -> -2.1%, -27.9% -> -23.2%; the bounds
    # before it: (0.16, 0.24), (0.25, 0.35), (-0.11, -0.05), (-0.31, -0.25)
    # the loss timed on the last stage: V3 +57.1% -> +42.8%, V2 +60.1% -> +57.3% (the last
    # stage now their slowest); the bounds before it: (0.54, 0.60), (0.57, 0.63)
    # the MTP module trained with V3 (on its last stage, now 172 ms a micro-batch where it was
    # 105): +42.8% -> -9.4%; the bound before it (0.40, 0.46)
    # the routed experts' activation timed between their grouped GEMMs: -10.6% -> -11.5%; the
    # bound before it (-0.12, -0.06)
    "DeepSeek-V3 pre-training": (-0.14, -0.08),
    # V2 run under the zero-bubble schedule its report names (ZB-H1): +56.9% -> +61.4% (the
    # bubble 1.257 -> 0.842 s); the bound before it (0.54, 0.60)
    "DeepSeek-V2 pre-training": (0.58, 0.64),
    "Llama 3 405B, 8,192 GPUs": (
        -0.05,
        0.01,
    ),  # -0.09, 0.0 before 979409f; -0.13, -0.04 before the K/V share
    "Llama 3 405B, 16,384 GPUs": (-0.26, -0.20),  # -0.30, -0.20 before 979409f; -0.33, -0.23 before
}


@pytest.fixture(scope="module")
def rows():
    return {r["run"]: r for r in compare_runs()}


@pytest.mark.parametrize("run", [r.name for r in PUBLISHED_RUNS])
def test_error_within_the_stated_bound(rows, run):
    lo, hi = BOUNDS[run]
    assert lo <= rows[run]["error"] <= hi


def test_every_run_cites_its_source():
    assert all("arXiv" in r.source for r in PUBLISHED_RUNS)
    assert {r.name for r in PUBLISHED_RUNS} == set(BOUNDS)


def test_llama_runs_differ_only_by_data_parallel_ranks(rows):
    """Twice the ranks at the same global batch halves the micro-batches: the bubble grows."""
    a, b = rows["Llama 3 405B, 8,192 GPUs"], rows["Llama 3 405B, 16,384 GPUs"]
    assert b["mfu"] < a["mfu"] and b["step_s"] < a["step_s"]


def test_the_docs_deepseek_v3_figures_are_the_cli_s():
    """docs/training.md's DeepSeek-V3 stage and comm-SM figures are what the model gives (they
    said 238 -> 197 ms, a slowest stage of 4 MoE layers and no head, +60.3% without the SMs)."""
    from dataclasses import replace
    from pathlib import Path

    from mlacalc.training.cost import training_cost

    docs = " ".join(Path("docs/training.md").read_text().split())
    run = PUBLISHED_RUNS[0]
    assert run.model == "deepseek-v3" and run.comm_sms == 20
    c = training_cost(
        run.model, run.seq_len, hardware=run.hardware, tp=run.tp, pp=run.pp, dp=run.dp,
        ep=run.ep, global_batch=run.global_batch, precision=run.precision,
        recompute=run.recompute, overlap=run.overlap, comm_sms=run.comm_sms,
    )  # fmt: skip
    slow = c.time.stages[c.time.slowest_stage]
    assert c.time.slowest_stage == run.pp - 1 and slow.layers == slow.moe_layers == 3
    assert slow.mtp_layers == 1
    assert f"3 MoE layers, the head and the MTP module ({slow.micro_batch_s * 1e3:.2f} ms" in docs
    four = c.time.stages[1]
    assert (
        four.moe_layers == 4 and f"the 4-MoE-layer stages {four.micro_batch_s * 1e3:.2f} ms" in docs
    )
    without = compare_runs((replace(run, comm_sms=0),))[0]
    assert f"{without['error']:+.1%} without them, {without['predicted']:,.0f} tokens" in docs
    assert "238" not in docs and "holds 4 MoE layers and no head" not in docs


def test_the_docs_deepseek_v2_breakdown_is_the_model_s():
    """docs/training.md's DeepSeek-V2 breakdown (its step's parts, and the figure with the
    full recompute its assumed layout needs to fit) is what the model gives."""
    from dataclasses import replace
    from pathlib import Path

    docs = " ".join(Path("docs/training.md").read_text().split())
    run = next(r for r in PUBLISHED_RUNS if r.model == "deepseek-v2")
    (row,) = compare_runs((run,))
    t = _cost(run).time
    assert f"144 micro-batches x {t.micro_batch_s * 1e3:.2f} ms" in docs
    assert run.schedule == "zb-h1"
    w, b = t.stages[1].weight_grad_s * 1e3, t.stages[1].backward_s * 1e3
    assert (
        f"each less twice its weight-gradient GEMMs: {w:.2f} of a 4-MoE-layer stage's {b:.2f} "
        f"ms backward) | {t.bubble_s:.3f} s |"
    ) in docs
    assert f"not overlapped) | {t.ep_comm_s * 1e3:.2f} ms |" in docs
    assert f"predicts {t.step_s:.2f} s ({row['mfu']:.1%} MFU)" in docs
    (full,) = compare_runs((replace(run, recompute="full"),))
    assert f"{full['predicted']:,.0f} tokens/s/GPU, {full['error']:+.1%}" in docs


def _cost(run):
    from mlacalc.training.cost import training_cost

    return training_cost(
        run.model, run.seq_len, hardware=run.hardware, tp=run.tp, pp=run.pp, dp=run.dp,
        ep=run.ep, global_batch=run.global_batch, precision=run.precision,
        recompute=run.recompute, overlap=run.overlap, comm_sms=run.comm_sms,
        schedule=run.schedule,
    )  # fmt: skip


def test_each_row_says_whether_its_assumed_layout_fits(rows):
    """compare_runs carries the memory check (bench_training prints it): as assumed, none of the
    four runs fits the model's memory (docs/training.md, DeepSeek-V2's breakdown)."""
    assert all(r["fits"] is False for r in rows.values())


def test_a_run_that_does_not_fit_says_what_the_published_run_did(rows):
    """A published run ran, so "does not fit" beside it says its memory a GPU against the
    device's and what the run did to fit that the assumed layout leaves out."""
    line = benchmark("bench_training").fit_line
    for r in rows.values():
        if r["fits"] is False:
            assert r["memory_note"], r["run"]
            said = line(r)
            assert f"{r['memory_per_gpu'] / 2**30:.1f} GiB a GPU" in said
            assert said.endswith(r["memory_note"])


def test_the_moe_combine_keeps_no_weighted_copy():
    """DeepSeek-V3 at 4K: a MoE layer saves its routed copies' input, SwiGLU tensors and
    output (``N k d`` each), not the weighted output the scatter-add sums (it keeps its
    index alone), so the published run's busiest stage holds 123.8 GiB, not 150.1."""
    r = PUBLISHED_RUNS[0]
    c = training_cost(
        r.model, r.seq_len, recompute=r.recompute, hardware=r.hardware, pp=r.pp, dp=r.dp,
        ep=r.ep, global_batch=r.global_batch, precision=r.precision, zero=1,
    )  # fmt: skip
    moe = {a.name: a.elements for a in c.activations if a.block == "moe"}
    n_k_d = 4096 * 8 * 7168
    assert "weighted_output" not in moe
    assert moe["expert_input"] == moe["expert_output"] == n_k_d
    assert round(c.memory_per_gpu / 2**30, 1) == 123.8
