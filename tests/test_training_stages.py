"""Each pipeline stage timed with its own layers (mlacalc.training.step.step_time): the
kernels a stage runs, the slowest stage's pace and the bubble from the stages' times."""

from __future__ import annotations

from dataclasses import replace

import pytest

from mlacalc.models.architecture import layer_pattern
from mlacalc.models.loading import load_model
from mlacalc.training.cost import training_cost
from mlacalc.training.flops import forward_kernels
from mlacalc.training.step import Layout, layer_calls, stage_layer_ids, step_time


def test_each_kernel_runs_on_its_own_layers_by_hand():
    """Gemma 3 1B: 26 layers, every 6th full, the rest sliding(512): an attention kind's
    kernels run on that kind's layers alone; the norms on every layer; the embedding on
    layer 0, the head on layer 25. DeepSeek-V3: the dense FFN on layers 0-2, the experts on
    3-60."""
    m = load_model("gemma-3-1b")
    ks = forward_kernels(m, 4096)
    kinds = ("full", "sliding(512)")
    calls, told = layer_calls(ks, m, kinds)
    assert told and [sum(on) for on in calls] == [k.calls for k in ks]
    labels = [k.label for k in layer_pattern(m).layers]
    cores = [on for k, on in zip(ks, calls) if k.kind == "attention_prefill"]
    assert len(cores) == 2
    assert {tuple(labels[i] for i, n in enumerate(on) if n) for on in cores} == {
        ("full",) * 4,
        ("sliding(512)",) * 22,
    }
    by = {k.name: on for k, on in zip(ks, calls)}
    assert by["embedding"] == [1] + [0] * 25 and by["lm_head"] == [0] * 25 + [1]
    assert by["input_norm"] == [1] * 26
    v3 = load_model("deepseek-v3")
    ks = forward_kernels(v3, 4096)
    by = {k.name: on for k, on in zip(ks, layer_calls(ks, v3, ())[0])}
    assert by["dense_ffn_up"] == [1, 1, 1] + [0] * 58
    assert by["routed_experts"] == [0, 0, 0] + [1] * 58


def test_stage_layers_even_split_and_chunks():
    """The first L mod pp stages one layer more; interleaved, chunk c of every stage before
    chunk c + 1 of any."""
    lay = Layout(1, 4, 1, 1, 1, 4)
    assert [len(s) for s in stage_layer_ids(30, lay)] == [8, 8, 7, 7]
    inter = Layout(1, 2, 1, 1, 1, 4, 1, 2)
    assert stage_layer_ids(8, inter) == [[0, 1, 4, 5], [2, 3, 6, 7]]


def test_a_uniform_model_s_pace_is_unchanged_and_its_bubble_holds_no_head():
    """Llama 3.1 8B at PP4: the slowest stage is the last (its 8 layers and the head), as
    the stage every stage was timed as before (8 layers and the head); the other three hold
    8 layers without the head, so the bubble is their three micro-batches, less than 3 x the
    slowest's. One stage: the step is the one stage's micro-batches."""
    c = training_cost("llama-3.1-8b", 4096, hardware="H100", pp=4, global_batch=16)
    t = c.time
    assert t.slowest_stage == 3 and [st.layers for st in t.stages] == [8, 8, 8, 8]
    # main (ab1ab80) gave this stage 0.08275 s, on L / pp = 8 average layers with the head;
    # the loss on its logits (fp32 cross-entropy, test_training_loss.py) adds to it since
    assert t.micro_batch_s == pytest.approx(0.09172267504656875, rel=1e-9)
    rest = [st.micro_batch_s for st in t.stages[:3]]
    assert t.bubble_s == pytest.approx(sum(rest)) and max(rest) < 0.85 * t.micro_batch_s
    assert t.step_s == pytest.approx(
        16 * t.micro_batch_s + t.bubble_s + t.dp_exposed_s + t.optimizer_s
    )
    one = training_cost("llama-3.1-8b", 4096, hardware="H100", global_batch=4).time
    assert len(one.stages) == 1 and one.bubble_s == 0


def test_the_slowest_stage_sets_the_pace_where_the_mixes_differ():
    """Qwen3-30B-A3B with its first 6 layers dense, PP4: stage 0 (6 dense, 6 MoE) is faster
    than stage 1 (12 MoE); timed on the average mix it had been one figure for all. The step
    is the slowest stage's micro-batches plus the others' once (1F1B)."""
    m = replace(load_model("qwen3-30b-a3b"), first_k_dense_replace=6)
    t = training_cost(m, 4096, hardware="H100", pp=4, global_batch=8).time
    micro = [st.micro_batch_s for st in t.stages]
    assert [st.moe_layers for st in t.stages] == [6, 12, 12, 12]
    assert micro[0] < micro[1] == pytest.approx(micro[2])
    assert t.micro_batch_s == max(micro) and t.bubble_s == pytest.approx(sum(micro) - max(micro))
    assert t.step_s == pytest.approx(
        8 * max(micro) + sum(micro) - max(micro) + t.dp_exposed_s + t.optimizer_s
    )


def test_stages_given_to_step_time_are_the_ones_timed():
    """step_time times the stages it is given: one layer moved from stage 0 to stage 1 makes
    stage 1 the longer."""
    m = load_model("llama-3.1-8b")
    lay = Layout(1, 2, 1, 1, 1, 2)
    kw = dict(params_per_gpu=4e9, state_bytes_per_gpu=0, grad_bytes=4)
    args = (m, lay, "H100", 4096, "expanded", "none", "flash", "bf16", "bf16")
    even = step_time(*args, **kw)
    moved = step_time(*args, **kw, stages=[list(range(15)), list(range(15, 32))])
    assert [st.layers for st in moved.stages] == [15, 17]
    assert moved.stages[1].micro_batch_s > even.stages[1].micro_batch_s


@pytest.mark.parametrize(
    ("model", "kw"),
    [
        ("llama-3.1-8b", dict(lora_rank=16, base_dtype="nf4", recompute="full")),
        ("llama-3.1-8b", dict(precision="fp32", cp=2)),
        ("deepseek-v2-lite", dict(impl="absorbed")),
        ("gemma-3-1b", {}),
    ],
)
def test_the_stages_share_the_one_stage_s_kernels(model, kw):
    """Split over two stages, the stages' forward, backward and recompute sum to one stage's:
    every kernel runs on the stage holding its layer, once (LoRA's adapters and QLoRA's
    dequantization too, within the NF4 weights' rounding a stage). Before, each stage was timed
    on ceil(calls / pp) of every kernel with the head on each."""
    one = training_cost(model, 4096, hardware="H100", global_batch=4, **kw).time
    two = training_cost(model, 4096, hardware="H100", pp=2, global_batch=4, **kw).time
    for part in ("forward_s", "backward_s", "recompute_s"):
        got = sum(getattr(st, part) for st in two.stages)
        assert got == pytest.approx(getattr(one, part), rel=1e-4, abs=1e-12)


def test_each_stage_s_data_parallel_traffic_hides_behind_its_own_last_backward():
    """ZeRO-1's gradient reduce-scatter and weight all-gather run on each stage after its own
    last backward, and under 1F1B the first stage ends that backward last, stage ``s`` the
    backward of stages ``0 .. s - 1`` earlier: the step's exposed traffic is the largest over
    the stages of its traffic less its own backward less that lead. Before, the traffic of
    the stage that trains the most parameters was hidden behind the slowest stage's backward.
    DeepSeek-V3 (the published run's flags): stage 0 (the embedding and the 3 dense FFNs)
    trains the most, 52.0 ms of backward where the last stage (the head and the MTP module)
    takes 106.0: 341.1 ms exposed before, 395.1 since. Llama-3.1-8B with 26 of its 32 layers
    on the last stage: that stage's 871 ms of traffic less its 331 ms backward and the 71 ms
    the three stages before it still run: 540.1 ms exposed before, 469.6 since."""
    v3 = training_cost("deepseek-v3", 4096, hardware="H800", pp=16, dp=128, ep=64,
                       global_batch=15360, precision="fp8-mixed", recompute="kv_up",
                       overlap=True, comm_sms=20).time  # fmt: skip
    first = v3.stages[0]
    assert first.backward_s < v3.backward_s  # the slowest stage's, which hid it before
    assert v3.dp_exposed_s == pytest.approx(v3.dp_comm_s - first.backward_s, rel=1e-9)
    t = training_cost("llama-3.1-8b", 8192, hardware="H100", pp=4, dp=16, global_batch=64,
                      stage_layers="2,2,2,26").time  # fmt: skip
    last, lead = t.stages[-1], sum(st.backward_s for st in t.stages[:-1])
    assert t.slowest_stage == 3 and lead > 0
    assert t.dp_exposed_s == pytest.approx(t.dp_comm_s - last.backward_s - lead, rel=1e-9)


def test_full_recompute_runs_the_forward_s_collectives_again():
    """Full recompute runs each layer's forward again, its tensor-parallel all-gathers and
    reduce-scatters, its expert-parallel dispatch and combine and its context-parallel ring
    with it: three passes of each where none and ``kv_up`` run two (forward, backward; the
    ring's backward sends twice the forward's bytes). Before, the recomputed forward was its
    kernels alone: DeepSeek-V2 at PP16 EP8 on H800 (the published run's layout, full
    recompute) 109.07 ms a micro-batch, 121.68 since (its 4-MoE-layer stages' expert traffic
    25.22 -> 37.83 ms), +30.2% -> +17.0% against the published 1,608 tokens/s/GPU."""
    kw = dict(hardware="H100", tp=2, dp=2, ep=4, global_batch=8)
    none, full = (training_cost("deepseek-v2-lite", 4096, recompute=r, **kw).time
                  for r in ("none", "full"))  # fmt: skip
    for a, b in zip(none.stages, full.stages, strict=True):
        assert a.ep_comm_s > 0 and b.ep_comm_s == pytest.approx(1.5 * a.ep_comm_s, rel=1e-12)
        assert a.tp_comm_s > 0 and b.tp_comm_s == pytest.approx(1.5 * a.tp_comm_s, rel=1e-12)
    kw = dict(hardware="H100", tp=2, cp=2, global_batch=1)
    none, up, full = (training_cost("deepseek-v2-lite", 8192, recompute=r, **kw).time
                      for r in ("none", "kv_up", "full"))  # fmt: skip
    assert up.cp_comm_s == none.cp_comm_s > 0 and up.tp_comm_s == none.tp_comm_s
    assert full.cp_comm_s == pytest.approx(4 / 3 * none.cp_comm_s, rel=1e-12)


def test_zero_bubble_h1_leaves_each_other_stage_its_micro_batch_less_twice_its_weight_grads(run):
    """ZB-H1 (``schedule="zb-h1"``; Qi et al. 2023, from recall) splits each stage's backward
    into its input gradient ``B`` and its weight-gradient GEMMs ``W`` and fills the bubble with
    the deferred ``W``: each other stage leaves ``F + B - W`` of its ``F + B + W``. The steady
    state is 1F1B's; ``W`` is the stage's ``_wgrad`` GEMMs (a part of its backward).
    Llama-3.1-8B at PP4 on H100, 8K: W 35.64 ms of a first stage's 94.00 ms backward, the
    bubble 426.5 -> 212.7 ms, the step 3.530 -> 3.316 s."""
    from mlacalc.words.errors import MlacalcError

    kw = dict(hardware="H100", pp=4, global_batch=16)
    one, zb = (training_cost("llama-3.1-8b", 8192, schedule=s, **kw).time
               for s in ("1f1b", "zb-h1"))  # fmt: skip
    assert zb.micro_batch_s == one.micro_batch_s and zb.schedule == "zb-h1"
    others = [st for st in zb.stages if st.index != zb.slowest_stage]
    assert all(0 < st.weight_grad_s < st.backward_s for st in others)
    left = sum(st.micro_batch_s - 2 * st.weight_grad_s for st in others)
    assert zb.bubble_s == pytest.approx(left, rel=1e-12) and zb.bubble_s < one.bubble_s
    assert one.step_s - zb.step_s == pytest.approx(one.bubble_s - zb.bubble_s, rel=1e-9)
    with pytest.raises(MlacalcError, match="schedule: 'zb-v' is not a pipeline schedule"):
        training_cost("llama-3.1-8b", 8192, schedule="zb-v", **kw)
    with pytest.raises(MlacalcError, match="schedule: zb-h1 splits whole stages"):
        training_cost("llama-3.1-8b", 8192, schedule="zb-h1", virtual_stages=2, **kw)
    out = run("train", "llama-3.1-8b", "-s", "8k", "--hw", "H100", "--pp", 4,
              "--global-batch", 16, "--schedule", "zb-h1")[0]  # fmt: skip
    assert "each less twice its weight-gradient GEMMs: zb-h1" in " ".join(out.split())
