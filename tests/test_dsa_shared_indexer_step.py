"""A GLM-DSA model whose layers share indexers (some reuse another layer's top-k) is served
as a DSA model: every layer's core attends its ``index_topk`` selected keys, shared or not.

A model-architect trial found plan of such a model failing past ``index_topk`` tokens ("the
serving step's template of kernel 'attention' gives -5,390,745,600,000 FLOPs"): the step's
kernels of a model with several layer kinds gave the DSA core no window, so the kernel model
would have timed it over every key and the serving templates, read at prompts of up to
``index_topk`` + 128 keys, extrapolated its selected keys' FLOPs below zero."""

from __future__ import annotations

import json

import numpy as np
import pytest
from reference_data import HF_CONFIGS_2

import mlacalc
from mlacalc.cost.model_step import step_kernels
from mlacalc.hardware.catalogue import load_hardware
from mlacalc.serving import StepModel, make_layout
from mlacalc.timemodel.engine_profiles import profile_for
from mlacalc.words.dtypes import resolve_kv_layout


def _glm_dsa(**schedule) -> mlacalc.ModelConfig:
    raw = HF_CONFIGS_2 / "zai-org--GLM-5.1.config.json"
    data = json.loads(raw.read_text(encoding="utf-8"))
    data = {k: v for k, v in data.items() if k != "quantization_config"}
    return mlacalc.import_hf_config({**data, "num_hidden_layers": 8, **schedule})


SHARED = dict(index_topk_freq=2)  # layers 2, 4, 6, 8 reuse the layer before's top-k


@pytest.mark.parametrize("phase", ["decode", "prefill"])
def test_every_dsa_core_attends_its_selected_keys(phase):
    m = _glm_dsa(**SHARED)
    assert m.shared_indexer_layers
    cores = [k for k in step_kernels(m, phase, 32768, 1, causal=True) if k.name == "attention"]
    assert len(cores) == 2  # the layers with their own indexer, those that share one
    assert {k.shape["window"] for k in cores} == {m.index_topk}
    assert sum(k.calls for k in cores) == m.num_hidden_layers


@pytest.mark.parametrize("engine", ["trtllm", "sglang", "vllm"])
def test_the_served_step_equals_the_counted_kernels_past_the_top_k(engine):
    """The serving step's attention cores (its affine templates) at a 32K context give the
    FLOPs the model step's kernels count there, decode and prompt, shared or not."""
    m, hw = _glm_dsa(**SHARED), load_hardware("B200")
    prof = profile_for(engine, hw.name, hw)[0]
    sm = StepModel(m, make_layout(m, 1), "fp8", resolve_kv_layout("bf16"), hw, prof, engine=engine)
    S = 32768

    def served(**kw):
        return sum(
            float(sp.flops[0]) * sp.calls
            for sp in sm.specs(**kw)
            if sp.name == "attention" and sp.flops[0] > 0
        )

    def counted(phase, q=None):
        ks = step_kernels(m, phase, S, 1, q, causal=True, weight_dtype="fp8", engine=engine)
        return sum(k.flops * k.calls for k in ks if k.name == "attention")

    assert served(dec_B=np.array([1.0]), dec_q=1, dec_S=float(S)) == pytest.approx(
        counted("decode"), rel=1e-9
    )
    assert served(pf_N=np.array([1.0]), pf_q=float(S), pf_pre=0.0) == pytest.approx(
        counted("prefill"), rel=1e-9
    )


def test_plan_runs_past_the_top_k_on_every_engine():
    m = _glm_dsa(**SHARED)
    for engine in ("trtllm", "sglang", "vllm"):
        p = mlacalc.plan(
            m, "B200", 8, dp_attention=True, ep=8, weight_dtype="fp8", isl=32000, osl=1000,
            concurrency=64, engine=engine,
        )  # fmt: skip
        assert p.fits and p.tpot_s > 0 and p.ttft_s > 0
