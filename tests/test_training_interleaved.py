"""Megatron-LM's interleaved 1F1B pipeline schedule (``virtual_stages``, ``train
--virtual-stages``): the bubble over ``v``, ``v`` times the pipeline's sends, the warm-up's
activations in flight by hand, and one-line refusals naming the field (mutation suite)."""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

import pytest

from mlacalc.models.loading import load_model
from mlacalc.training.cost import _held, _in_flight, training_cost
from mlacalc.training.step import Layout
from mlacalc.words.errors import MlacalcError

# Llama-3.1-70B (80 layers) at 8K on 256 H100s: TP8 PP4 DP8, 8 micro-batches a rank
KW = dict(hardware="H100", tp=8, pp=4, dp=8, global_batch=64)


@pytest.mark.parametrize("v", [2, 4, 10])
def test_the_bubble_and_the_sends(v):
    """The other stages' micro-batches in chunks of 1 / v (each stage timed with its own layers,
    the head on the last); v times the sends between stages;
    the step still the micro-batches, the bubble, the exposed data-parallel traffic and the
    optimizer step. Before: interleaving was not modelled (the 1F1B bubble, (pp - 1) whole
    micro-batches)."""
    one = training_cost("llama-3.1-70b", 8192, **KW)
    c = training_cost("llama-3.1-70b", 8192, virtual_stages=v, **KW)
    t, t1 = c.time, one.time
    assert c.layout.vp == v and c.to_dict()["layout"]["vp"] == v
    assert t.pp_comm_s == pytest.approx(v * t1.pp_comm_s)
    # the other stages' micro-batches / v; the first three hold no head: shorter than the last
    others = sum(st.micro_batch_s for st in t.stages) - t.micro_batch_s
    assert t.slowest_stage == 3 and t.bubble_s == pytest.approx(others / v)
    assert 0.5 * 3 * t.micro_batch_s / v < t.bubble_s < 3 * t.micro_batch_s / v
    assert t.micro_batch_s == pytest.approx(t1.micro_batch_s + t.pp_comm_s - t1.pp_comm_s)
    assert t.step_s == pytest.approx(8 * t.micro_batch_s + t.bubble_s + t.dp_exposed_s
                                     + t.optimizer_s)  # fmt: skip
    assert t.step_s < t1.step_s and c.mfu > one.mfu


def test_the_activations_in_flight_by_hand():
    """Megatron-LM's interleaved warm-up on stage s: 2 (pp - s - 1) + (v - 1) pp + 1 chunks
    of 1 / v of the stage's layers (at most v x the micro-batches); stage 0 holds 1 + (pp - 1)
    / (pp v) times 1F1B's pp micro-batches (Korthikanti et al. 2022): at pp 4, v 2, 11 chunks,
    5.5 micro-batches' worth, 1.375 x."""
    lay = Layout(8, 4, 8, 1, 1, 64, 1, 2)
    assert [_in_flight(lay, s) for s in range(4)] == [Fraction(11, 2), Fraction(9, 2),
                                                     Fraction(7, 2), Fraction(5, 2)]  # fmt: skip
    for v in (2, 4):
        lay = Layout(8, 4, 8, 1, 1, 64, 1, v)
        assert _in_flight(lay, 0) / 4 == 1 + Fraction(3, 4 * v)
    few = Layout(8, 4, 8, 1, 1, 32, 1, 2)  # 4 micro-batches: at most 8 chunks, 4 whole
    assert _in_flight(few, 0) == 4
    one = training_cost("llama-3.1-70b", 8192, **KW)
    c = training_cost("llama-3.1-70b", 8192, virtual_stages=2, **KW)
    assert c.stage == one.stage == 0
    assert c.activation_bytes_per_gpu == pytest.approx(1.375 * one.activation_bytes_per_gpu,
                                                       abs=1)  # fmt: skip
    assert c.params_per_gpu == one.params_per_gpu


BAD = [
    ({"virtual_stages": 0}, "virtual_stages", "virtual_stages"),
    ({"virtual_stages": -2}, "virtual_stages", "virtual_stages"),
    ({"virtual_stages": 2.5}, "virtual_stages", "virtual_stages"),
    ({"virtual_stages": "2"}, "virtual_stages", "virtual_stages"),
    ({"virtual_stages": True}, "virtual_stages", "virtual_stages"),
    ({"virtual_stages": 2, "pp": 1}, "virtual_stages", "give pp > 1"),
    ({"virtual_stages": 3}, "virtual_stages", "use one of 2, 4, 5, 10, 20"),
    # the batch is what to change, so the error names it (review5)
    ({"virtual_stages": 2, "global_batch": 48}, "global_batch", "global_batch a multiple of 32"),
]


@pytest.mark.parametrize(("kwargs", "field", "fix"), BAD)
def test_virtual_stage_mutations_name_the_field(kwargs, field, fix):
    with pytest.raises(MlacalcError) as err:
        training_cost("llama-3.1-70b", 8192, **{**KW, **kwargs})
    text = str(err.value)
    assert text.startswith(f"{field}: ") and "\n" not in text and fix in text


def test_llama_405b_at_pp16_is_refused_by_its_layers():
    """126 layers cut into no 16 x v equal chunks (Meta's run ran an interleaved schedule
    with its own uneven stages, from recall): the refusal says no v divides them."""
    with pytest.raises(MlacalcError, match="use 1 \\(none divides them\\)"):
        training_cost("llama-3.1-405b", 8192, tp=8, pp=16, dp=64, global_batch=2048,
                      virtual_stages=2)  # fmt: skip


def test_cli_virtual_stages(run):
    argv = ("train", "llama-3.1-70b", "-s", "8k", "--hw", "H100", "--tp", "8", "--pp", "4",
            "--dp", "8", "--global-batch", "64")  # fmt: skip
    out, _ = run(*argv, "--virtual-stages", "4")
    flat = " ".join(out.split())
    assert (
        "step = 8 x micro-batch + bubble (the other stages' micro-batches / 4: interleaved, 4 "
        "virtual stages)" in (flat)
    )
    out, err = run(*argv, "--virtual-stages", "3", code=2)
    assert "--virtual-stages" in err and err.count("\n") == 1 and not out


def test_cli_the_batch_error_names_the_batch_s_flag(run):
    """A global batch that leaves micro-batches not in groups of pp names --global-batch, the
    option to change, and the flags in its words (not global_batch / virtual_stages)."""
    argv = ("train", "llama-3.1-8b", "--dp", "4", "--pp", "2", "--virtual-stages", "2")
    out, err = run(*argv, "--global-batch", "12", code=2)
    assert err.startswith("mlacalc: error: Invalid value for --global-batch: ")
    assert "use a --global-batch a multiple of 8" in err and "or --virtual-stages 1" in err
    assert "global_batch" not in err and "virtual_stages" not in err and not out


def test_round_robin_chunks_place_a_mixed_model_s_layers_by_hand():
    """Interleaved, stage s holds chunks s, s + pp, ...: Qwen3-30B-A3B with an MoE layer every
    4th (layers 0, 4, 8, ...), pp 4, v 2, chunks of 6 layers: stage 0 holds layers 0-5 and
    24-29, 4 MoE layers, where 1F1B's block 0-11 holds 3. One MoE layer for a dense one: 128
    experts x 3 x 2048 x 768 + the router's 2048 x 128, less the dense FFN's 3 x 2048 x 6144,
    566,493,184 parameters more on stage 0. Before, the interleaved stages took 1F1B's blocks
    (the same params_per_gpu as v 1)."""
    m = replace(load_model("qwen3-30b-a3b"), moe_layer_freq=4)
    kw = dict(hardware="H100", pp=4, global_batch=8)
    one = training_cost(m, 4096, **kw)
    two = training_cost(m, 4096, virtual_stages=2, **kw)
    assert one.stage == two.stage == 0 and two.stage_layers == 12
    moe = 128 * 3 * 2048 * 768 + 2048 * 128
    dense = 3 * 2048 * 6144
    assert two.params_per_gpu - one.params_per_gpu == moe - dense == 566_493_184
    assert sum(m.is_moe_layer(i) for i in [*range(6), *range(24, 30)]) == 4


def test_the_warm_up_holds_each_chunk_s_own_layers():
    """Interleaved warm-up on stage 0, pp 4, v 2, 8 micro-batches: 11 chunk forwards, the k-th
    running chunk (k // 4) mod 2: 4 of chunk 0, 4 of chunk 1, 3 of chunk 0, so 7 x chunk 0's
    bytes + 4 x chunk 1's. A stage whose chunks differ (1 and 100 a layer, 6 layers each):
    7 x 6 + 4 x 600 = 2,442, where the stage's average (606 x 11 / 2) says 3,333."""
    lay = Layout(8, 4, 8, 1, 1, 64, 1, 2)
    each = [Fraction(1)] * 6 + [Fraction(100)] * 6
    assert _held(lay, 0, each) == 7 * 6 + 4 * 600 == 2442
    assert _held(lay, 0, [Fraction(5)] * 12) == 60 * _in_flight(lay, 0)  # alike: the average
    one = Layout(8, 4, 8, 1, 1, 64, 1, 1)
    assert _held(one, 1, each) == 606 * 3  # 1F1B: min(pp - s, micro) whole stages


def test_the_steady_state_peak_when_the_first_chunk_is_the_heavier():
    """pp 4, v 2, 8 micro-batches, chunk weights 600 then 6 (100 and 1 a layer). Stage 0's
    warm-up: 10 forwards (chunk 0 x 4, chunk 1 x 4, chunk 0 x 2) = 3,624; steady state: the
    forward of chunk 0 (+600) then the backward of chunk 1 (-6), twice: 4,224 -> 4,218 ->
    4,818, then forwards of chunk 1 (+6) and backwards of chunk 1 (-6): the peak 4,818.
    Stage 3: warm-up 4 forwards of chunk 0 (2,400); the steady state's forwards 8-11 of chunk
    0 while the backwards free chunk 0: 3,000. Before, the warm-up's end alone: 4,224 /
    3,024 / 2,418 / 2,406 (review5's check)."""
    lay = Layout(8, 4, 8, 1, 1, 64, 1, 2)
    heavy = [Fraction(100)] * 6 + [Fraction(1)] * 6
    assert [_held(lay, s, heavy) for s in range(4)] == [4818, 4806, 4200, 3000]
    # the lighter first: the warm-up's end plus one forward is the peak (stage 0: 2,442)
    light = heavy[6:] + heavy[:6]
    assert [_held(lay, s, light) for s in range(4)] == [2442, 2430, 1824, 624]
    few = Layout(8, 4, 8, 1, 1, 32, 1, 2)  # 4 micro-batches: 8 forwards, all warm-up
    assert _held(few, 0, heavy) == 4 * 606


def test_a_dense_first_stage_peaks_in_the_steady_state(monkeypatch):
    """Qwen3-30B-A3B with its first 6 layers dense (first_k_dense_replace 6, a 40,960-wide
    dense FFN), pp 4, v 2, global batch 8 on H100: stage 0's first chunk (layers 0-5, dense)
    is the heavier; its activations peak at 63.24 GiB by the schedule (65.49 before the MoE
    combine's weighted copy left the count, when the warm-up's end gave 62.97 GiB)."""
    import mlacalc.training.cost as cost

    m = replace(load_model("qwen3-30b-a3b"), first_k_dense_replace=6, intermediate_size=40960)
    seen = []
    stages = cost._stages
    monkeypatch.setattr(cost, "_stages", lambda *a, **k: seen.append(stages(*a, **k)) or seen[0])
    training_cost(m, 4096, hardware="H100", pp=4, virtual_stages=2, global_batch=8)
    assert seen[0][0].activations / 2**30 == pytest.approx(63.24, abs=0.005)


def test_the_step_note_says_each_stage_is_timed_with_its_own_layers(run):
    """Each stage is timed with its own layers (it had been timed on L / pp layers of the
    model's average mix, the note saying so): where the stages hold different mixes (MoE every
    4th layer, interleaved; the first 6 dense, 1F1B) the note lists each stage's MoE layers and
    the stage that sets the pace; a model whose stages are alike lists no mix; no device, no
    time, no note."""
    m = replace(load_model("qwen3-30b-a3b"), moe_layer_freq=4)
    two = training_cost(m, 4096, pp=4, virtual_stages=2, global_batch=8, hardware="H100")
    assert "(MoE layers a stage: 4/12, 2/12, 4/12, 2/12)" in two.step_layers_note
    assert [st.moe_layers for st in two.time.stages] == [4, 2, 4, 2]
    assert two.to_dict()["step_layers_note"] == two.step_layers_note
    assert two.to_dict()["time"]["stages"][1]["moe_layers"] == 2
    # 4 MoE layers take longer than 2 (stage 3's 2 with the head are the slowest)
    st = two.time.stages
    assert st[0].micro_batch_s > st[1].micro_batch_s and two.time.slowest_stage == 3
    dense6 = replace(load_model("qwen3-30b-a3b"), first_k_dense_replace=6)
    d6 = training_cost(dense6, 4096, pp=4, global_batch=8, hardware="H100")
    assert "(MoE layers a stage: 6/12, 12/12, 12/12, 12/12)" in d6.step_layers_note
    assert d6.time.stages[0].micro_batch_s < d6.time.stages[1].micro_batch_s
    plain = training_cost("qwen3-30b-a3b", 4096, pp=4, global_batch=8, hardware="H100")
    assert "MoE layers a stage" not in plain.step_layers_note
    assert f"stage {plain.time.slowest_stage}'s micro-batch" in plain.step_layers_note
    assert training_cost(m, 4096, pp=4, global_batch=8).step_layers_note == ""
    argv = ("train", "qwen3-30b-a3b", "-s", "4k", "--hw", "H100", "--pp", "4")
    out, _ = run(*argv, "--global-batch", "8", "--set", "first_k_dense_replace=6")
    flat = " ".join(out.split())
    assert "(MoE layers a stage: 6/12, 12/12, 12/12, 12/12)" in flat
    assert "Pipeline stages" in flat and "(slowest)" in flat


def test_the_memory_model_cuts_chunks_with_the_step_model_helper(monkeypatch):
    """One helper cuts a stage into chunks (cost._held had its own copy of the rule)."""
    from mlacalc.training import cost, step

    lay = Layout(tp=1, pp=2, dp=1, ep=1, micro_batch=1, global_batch=4, cp=1, vp=2)
    each = [Fraction(1), Fraction(1), Fraction(1), Fraction(10), Fraction(10)]
    assert step.chunk_sizes(5, 2) == [3, 2] and step.chunk_sizes(4, 3) == [2, 1, 1]
    ids = step.stage_layer_ids(10, replace(lay, stage_layers=(5, 5)))
    assert ids[0] == [0, 1, 2, 6, 7] and ids[1] == [3, 4, 5, 8, 9]
    even = _held(lay, 1, each)
    monkeypatch.setattr(cost, "chunk_sizes", lambda n, vp: [1] * (vp - 1) + [n - vp + 1])
    assert _held(lay, 1, each) != even
