"""Uneven pipeline stages (``stage_layers``, ``train --stage-layers``, the app's "pipeline
stage layers" box): each stage's layers as given, in memory and in time; the default split;
interleaved chunks of uneven stages; one-line refusals naming the field (mutation suite)."""

from __future__ import annotations

import pytest

from mlacalc.models.loading import load_model
from mlacalc.training.cost import training_cost
from mlacalc.training.step import Layout, check_stage_layers, stage_layer_ids
from mlacalc.words.errors import MlacalcError

# Llama-3.1-8B (32 layers) at 4K on 4 H100s, PP4, 8 micro-batches
KW = dict(hardware="H100", pp=4, global_batch=8)


def test_counts_and_first_last_by_hand():
    """'7,..,7' on Llama 3 405B (126 layers, PP16): 7, 8 x 14, 7 (Meta's run, from recall);
    a list of pp counts as given; None or '' the even split."""
    m = load_model("llama-3.1-405b")
    assert check_stage_layers(m, 16, "7,..,7") == (7,) + (8,) * 14 + (7,)
    assert check_stage_layers(m, 16, " 7 , .. , 7 ") == (7,) + (8,) * 14 + (7,)
    assert check_stage_layers(m, 2, [60, 66]) == (60, 66)
    assert check_stage_layers(m, 2, "..,66") == (60, 66)
    assert check_stage_layers(m, 4, None) == () and check_stage_layers(m, 4, "") == ()


def test_uneven_interleaved_chunks_by_hand():
    """Stages of 3 and 7 layers, v 2: each cut into chunks as evenly as whole layers go, the
    longer first (2 + 1, 4 + 3), chunk 0 of every stage before chunk 1 of any: stage 0 holds
    layers 0, 1 and 6, stage 1 holds 2-5 and 7-9."""
    lay = Layout(1, 2, 1, 1, 1, 2, 1, 2, (3, 7))
    assert stage_layer_ids(10, lay) == [[0, 1, 6], [2, 3, 4, 5, 7, 8, 9]]
    one = Layout(1, 2, 1, 1, 1, 2, 1, 1, (3, 7))
    assert stage_layer_ids(10, one) == [[0, 1, 2], [3, 4, 5, 6, 7, 8, 9]]


def test_the_even_split_given_is_the_default():
    """'8,8,8,8' is Llama-3.1-8B's default split: the same memory and the same step."""
    a = training_cost("llama-3.1-8b", 4096, **KW)
    b = training_cost("llama-3.1-8b", 4096, stage_layers="8,8,8,8", **KW)
    assert b.memory_per_gpu == a.memory_per_gpu and b.params_per_gpu == a.params_per_gpu
    assert b.time.step_s == pytest.approx(a.time.step_s, rel=1e-12)
    assert b.to_dict()["layout"]["stage_layers"] == (8, 8, 8, 8)


def test_a_stage_s_layers_set_its_time_and_memory():
    """One layer moved from stage 1 to stage 0 (9, 7, 8, 8): stage 0 holds a layer's
    parameters more, stage 1 one fewer; stage 0's micro-batch grows by about a layer's
    (a 32nd of the three stages' layers each), stage 1's shrinks as much; the note says the
    split is as given."""
    a = training_cost("llama-3.1-8b", 4096, **KW)
    b = training_cost("llama-3.1-8b", 4096, stage_layers="9,7,8,8", **KW)
    ta, tb = a.time.stages, b.time.stages
    assert [st.layers for st in tb] == [9, 7, 8, 8]
    layer = ta[1].micro_batch_s / 8
    assert tb[0].micro_batch_s - ta[0].micro_batch_s == pytest.approx(layer, rel=0.02)
    assert ta[1].micro_batch_s - tb[1].micro_batch_s == pytest.approx(layer, rel=0.02)
    assert "the stages hold 9, 7, 8, 8 layers, as stage_layers gives them" in b.step_layers_note
    plain = training_cost("llama-3.1-8b", 4096, pp=4, global_batch=8)
    heavy = training_cost("llama-3.1-8b", 4096, pp=4, global_batch=8, stage_layers="11,7,7,7")
    assert heavy.stage == 0 and heavy.stage_layers == 11
    assert heavy.params_per_gpu > plain.params_per_gpu


def test_the_default_remainder_is_said():
    """30 layers at PP4 (--set num_hidden_layers=30): 8, 8, 7, 7, the first two one more, and
    the note says so and how to set them."""
    m = load_model("llama-3.1-8b").replaced(num_hidden_layers=30)
    c = training_cost(m, 4096, pp=4, global_batch=8)
    assert c.step_layers_note.startswith(
        "30 layers do not split evenly over 4 stages: the first 2 hold one more (8, 8, 7, 7;"
    )


def test_uneven_stages_interleave():
    """Llama 3 405B at PP16 with 7, 8 x 14, 7 layers runs the interleaved schedule (126
    layers cut into no 16 v equal chunks, so it was refused): v 2 halves the bubble."""
    kw = dict(hardware="H100", tp=8, pp=16, dp=128, global_batch=2048, stage_layers="7,..,7")
    one = training_cost("llama-3.1-405b", 8192, **kw)
    two = training_cost("llama-3.1-405b", 8192, virtual_stages=2, **kw)
    assert two.layout.vp == 2 and two.time.bubble_s < 0.55 * one.time.bubble_s
    assert two.mfu > one.mfu


BAD = [
    ("7,8,8", "stage_layers", "got 3 counts for 4 pipeline stages (pp 4)"),
    ("8,8,8,9", "stage_layers", "make them sum to 32"),
    ("0,..,8", "stage_layers", "every pipeline stage holds at least one"),
    ("-1,..,11", "stage_layers", "every pipeline stage holds at least one"),
    ("7,x,8,9", "stage_layers", "where each count is a whole number of layers"),
    ("7.5,..,7", "stage_layers", "where each count is a whole number of layers"),
    ("7,..,..,7", "stage_layers", "'..' stands for the stages between the given ones, once"),
    ("..", "stage_layers", "'..' stands for the stages between"),
    ("5,..,6", "stage_layers", "do not split the 21 layers left"),
    ("16,..,16", "stage_layers", "the 2 stages between the given ones do not split the 0"),
    ([8, 8, 8, True], "stage_layers", "where each count is a whole number of layers"),
    ([8, 8, 8, 8.0], "stage_layers", "where each count is a whole number of layers"),
    (5, "stage_layers", "takes counts"),
]


@pytest.mark.parametrize(("value", "field", "fix"), BAD)
def test_stage_layer_mutations_name_the_field(value, field, fix):
    with pytest.raises(MlacalcError) as err:
        training_cost("llama-3.1-8b", 4096, pp=4, global_batch=8, stage_layers=value)
    text = str(err.value)
    assert text.startswith(f"{field}: ") and "\n" not in text and fix in text


def test_a_stage_too_short_for_its_chunks_names_virtual_stages():
    with pytest.raises(MlacalcError) as err:
        training_cost("llama-3.1-8b", 4096, pp=4, global_batch=8, stage_layers="2,10,10,10",
                      virtual_stages=3)  # fmt: skip
    text = str(err.value)
    assert text.startswith("virtual_stages: stage 0's 2 layers (stage_layers)") and "\n" not in text
    assert "use virtual_stages 2 or fewer" in text


@pytest.mark.parametrize("value", ["7,8,8", "8,8,8,9", "0,..,8", "7,x,8,9", "7,..,..,7"])
def test_cli_stage_layer_mutations_name_the_flag(run, value):
    argv = ("train", "llama-3.1-8b", "--pp", "4", "--global-batch", "8")
    out, err = run(*argv, "--stage-layers", value, code=2)
    assert err.startswith("mlacalc: error: Invalid value for --stage-layers: ")
    assert err.count("\n") == 1 and "stage_layers" not in err and not out


def test_cli_stage_layers(run):
    argv = ("train", "llama-3.1-8b", "--hw", "H100", "--pp", "4", "--global-batch", "8")
    out, _ = run(*argv, "--stage-layers", "7,..,7")
    flat = " ".join(out.split())
    assert "the stages hold 7, 9, 9, 7 layers, as --stage-layers gives them" in flat
    assert "Pipeline stages" in flat
    m30 = ("--set", "num_hidden_layers=30")
    out, _ = run("train", "llama-3.1-8b", "--pp", "4", "--global-batch", "8", *m30)
    flat = " ".join(out.split())
    assert "the first 2 hold one more (8, 8, 7, 7;" in flat and "--stage-layers sets" in flat


def test_cli_virtual_stages_help_allows_uneven_stages(run):
    """The help said pp x v must divide the layers, which --stage-layers lifts."""
    out, _ = run("train", "--help")
    flat = " ".join(out.split())
    at = flat.index("--virtual-stages")
    text = flat[at : flat.index("[default: 1]", at)]
    assert "unless --stage-layers gives the counts" in text


def test_a_wrong_count_says_what_was_given_and_wanted():
    with pytest.raises(MlacalcError) as err:
        training_cost("llama-3.1-8b", 4096, pp=4, global_batch=8, stage_layers="32")
    assert "got 1 count for 4 pipeline stages (pp 4)" in str(err.value)
    with pytest.raises(MlacalcError) as err:
        training_cost("llama-3.1-8b", 4096, pp=4, global_batch=8, stage_layers="abc,8,8,8")
    assert "got 'abc', where each count" in str(err.value) and "(a str)" not in str(err.value)
