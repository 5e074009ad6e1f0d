"""The dtype a plan names its weights by is one answer from the API and the CLI: a quantized
checkpoint sized and timed as stored is named by its stored dtype (gpt-oss-120b's MXFP4
experts: ``fp4``), where ``Plan.weight_dtype`` had said the config's ``bf16`` and the CLI's
JSON ``fp4``."""

from __future__ import annotations

import json

from reference_data import HF_CONFIGS

import mlacalc

GPT_OSS = str(HF_CONFIGS / "gpt-oss-120b.config.json")
MIX = dict(isl=2000, osl=500, concurrency=8)


def test_gpt_oss_is_named_fp4_in_the_api_and_the_cli(run):
    p = mlacalc.plan(GPT_OSS, "H200", 1, **MIX)
    assert p.weight_dtype == "fp4" and p.weight_format.startswith("checkpoint ")
    doc = json.loads(run("plan", GPT_OSS, "-H", "H200", "--gpus", 1, "--isl", 2000, "--osl", 500,
                         "--concurrency", 8, "--format", "json")[0])  # fmt: skip
    assert doc["weight_dtype"] == p.to_dict()["weight_dtype"] == "fp4"


def test_a_dtype_asked_or_an_unquantized_model_is_named_as_before():
    assert mlacalc.plan(GPT_OSS, "H200", 1, weight_dtype="bf16", **MIX).weight_dtype == "bf16"
    assert mlacalc.plan("llama-3-8b", "H200", 1, **MIX).weight_dtype == "bf16"
    assert mlacalc.plan("deepseek-v3", "H200", 8, **MIX).weight_dtype == "fp8"
