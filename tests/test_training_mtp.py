"""DeepSeek-V3's multi-token-prediction module trained with the model (``mtp``): its
parameters, FLOPs and time on the last pipeline stage (mlacalc.training.step.mtp_layers)."""

from __future__ import annotations

import json

import pytest

from mlacalc.models.loading import model_argument
from mlacalc.serving.layout import Layout as ServingLayout
from mlacalc.serving.layout import stage_breakdowns
from mlacalc.training.cost import training_cost
from mlacalc.training.flops import forward_kernels, training_flops
from mlacalc.words.errors import InvalidArgumentError

V3 = dict(pp=16, dp=128, ep=64, zero=1)


@pytest.mark.parametrize("stage_layers", ["2,..,3", "1,..,4"])
def test_mtp_parameters_are_the_serving_layouts_on_the_last_stage(stage_layers):
    """The last stage's GPU holds the MTP module as the serving layout splits it
    (``include_mtp``, less the plain breakdown), on given counts that leave the last stage the
    busiest with and without it (the even split did until the MoE combine's weighted copy was
    dropped from the activations; its busiest stage without the module is now the first)."""
    m = model_argument("deepseek-v3")
    on, off = (
        training_cost(m, 4096, **V3, stage_layers=stage_layers, mtp=x) for x in (True, False)
    )
    assert on.stage == off.stage == 15 and on.mtp_layers == 1 and off.mtp_layers == 0
    lay = ServingLayout(16 * 128, 1, 128, 16, 64, False, 64, 1)
    diff = sum(stage_breakdowns(m, lay, include_mtp=True)[-1][0].values()) - sum(
        stage_breakdowns(m, lay)[-1][0].values()
    )
    assert diff > 1e8  # a MoE layer's 1/64 of the routed experts and the rest whole
    assert on.params_per_gpu - off.params_per_gpu == pytest.approx(diff, abs=2)


def test_mtp_flops_are_a_moe_layer_the_head_and_eh_proj_forward_and_backward():
    """MFU counts the MTP module as the model's: 3 x (one MoE layer's matmuls, the head's and
    eh_proj's, tokens x 2h -> h); training_flops alone keeps the ISCA per-token figure."""
    t, h, V = 4096, 7168, 129280
    ks = forward_kernels("deepseek-v3", t)
    layer = sum(k.flops for k in ks if k.calls in (58, 61) and k.kind != "elementwise")
    fwd = layer + 2 * t * h * V + 2 * t * 2 * h * h
    on, off = (training_cost("deepseek-v3", t, mtp=x) for x in (True, False))
    assert on.model_flops - off.model_flops == 3 * fwd
    assert off.model_flops == training_flops("deepseek-v3", t).model_flops
    assert round(training_flops("deepseek-v3", t).per_token / 1e9, 1) == 250.5


def test_mtp_time_on_the_last_stage_is_at_least_a_moe_layer_and_a_head_pass():
    """DeepSeek-V3 at PP16 on H800: the MTP module adds to the last stage's micro-batch at
    least one MoE layer (a quarter of a 4-MoE-layer stage) and a pass of the head and its
    loss (the last stage's time beyond its 3 MoE layers), and nothing to the other stages."""
    kw = dict(V3, hardware="H800", global_batch=15360, precision="fp8-mixed")
    on, off = (training_cost("deepseek-v3", 4096, **kw, mtp=x) for x in (True, False))
    last_on, last_off = on.time.stages[-1], off.time.stages[-1]
    moe = off.time.stages[1].micro_batch_s / 4
    head = last_off.micro_batch_s - 3 * moe
    assert off.time.stages[1].moe_layers == 4 and head > 0
    assert last_on.micro_batch_s - last_off.micro_batch_s >= moe + head
    assert last_on.layers == last_off.layers == 3 and last_on.mtp_layers == 1
    assert [s.micro_batch_s for s in on.time.stages[:-1]] == [
        s.micro_batch_s for s in off.time.stages[:-1]
    ]
    assert "MTP module trained on the last stage" in on.step_layers_note


def test_mtp_default_and_refusal():
    """On where the config has MTP modules, off under LoRA and for a model without; asked
    for on a model without, refused in a line naming mtp."""
    assert training_cost("deepseek-v3", 4096).mtp_layers == 1
    assert training_cost("deepseek-v3", 4096, lora_rank=16).mtp_layers == 0
    assert training_cost("llama-3.1-8b", 4096).mtp_layers == 0
    with pytest.raises(InvalidArgumentError, match="mtp"):
        training_cost("llama-3.1-8b", 4096, mtp=True)


def test_cli_no_mtp(run):
    out, _ = run("train", "deepseek-v3", "-s", "4k", "--no-mtp", "--format", "json")
    doc = json.loads(out)
    assert doc["mtp_layers"] == 0
    assert doc["model_flops_per_token"] == training_flops("deepseek-v3", 4096).model_flops // 4096
