"""A served step times a linear-attention layer's kernels by their measured classes, as
roofline does: Gated DeltaNet's delta rule (``gdn_chunk`` / ``gdn_recurrent``) and its conv1d,
Mamba-2's conv1d. Was: the step's kernel variants left out the ``linear`` shape field, so
``linear_core``, ``linear_conv`` and ``mamba_conv`` ran as plain ``elementwise:bf16`` (a
2,000-token prompt's delta rule 6.8 us under SGLang on H100 where its ``gdn_perf`` row at 2,048
tokens measures 99.3 us) and plan disagreed with roofline."""

from __future__ import annotations

import numpy as np
import pytest

import mlacalc
from mlacalc.hardware.catalogue import load_hardware
from mlacalc.serving import StepModel, make_layout
from mlacalc.timemodel.engine_profiles import profile_for
from mlacalc.timemodel.predict import predict_time
from mlacalc.words.dtypes import resolve_kv_layout

#: each model's linear kernels and their classes, prompt then decode
CLASSES = {
    "qwen3-next-80b-a3b": {
        "prefill": {"linear_core": "gdn_chunk", "linear_conv": "conv1d"},
        "decode": {"linear_core": "gdn_recurrent", "linear_conv": "conv1d_update"},
    },
    "falcon-h1-34b": {
        "prefill": {"mamba_conv": "mamba2_conv1d"},
        "decode": {"mamba_conv": "mamba2_conv1d_update"},
    },
}
S, B = 2048, 64


@pytest.mark.parametrize("engine", ["trtllm", "sglang", "vllm"])
@pytest.mark.parametrize("model", sorted(CLASSES))
def test_served_linear_kernels_carry_their_classes_and_roofline_time(model, engine):
    m, hw = mlacalc.load_model(model), load_hardware("H100-SXM")
    prof = profile_for(engine, hw.name, hw)[0]
    sm = StepModel(m, make_layout(m, 1), None, resolve_kv_layout("bf16"), hw, prof, engine=engine)
    steps = {
        "prefill": (sm.step(pf_N=np.array([1.0]), pf_q=float(S), pf_pre=0.0), 1),
        "decode": (sm.step(dec_B=np.array([float(B)]), dec_q=1, dec_S=float(S)), B),
    }
    for phase, (st, batch) in steps.items():
        pred = predict_time(
            m,
            hw,
            phase,
            S,
            batch,
            scope="model",
            causal=phase == "prefill",
            engine=engine,
            profile=prof,
        )
        ops = {o.name: o for o in pred.ops}
        served = {k["name"]: k for k in st.kernels if float(k["seconds"][0]) > 0}
        for name, variant in CLASSES[model][phase].items():
            k = served[name]
            assert k["variant"] == variant, (phase, name)
            assert float(k["seconds"][0]) == pytest.approx(ops[name].seconds, rel=1e-6), (
                phase,
                name,
            )
