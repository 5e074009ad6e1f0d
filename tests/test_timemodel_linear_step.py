"""A hybrid model's linear-attention kernels are timed by the classes fitted on the engines'
``gdn_perf`` and ``mamba2_perf`` rows: a model step's Gated DeltaNet kernel and the measured row
of the same shape are one kernel to the time model (same class, work and shape fields, so the
same seconds), under each engine as it runs it."""

from __future__ import annotations

import numpy as np
import pytest
from reference_data import MEASURED

import mlacalc
from mlacalc.cost.model_step import step_kernels
from mlacalc.words.kernels import batches_of, variant_of

SYSTEMS = {"H100-SXM": "h100_sxm", "B200": "b200_sxm"}
VERSIONS = {"trtllm": "1.3.0rc20", "sglang": "0.5.14", "vllm": "0.24.0"}
# Qwen3-Next-80B's linear layers: 16 key heads, 32 value heads of 128
MODEL = "qwen3-next-80b-a3b"
MAMBA = "nemotron-3-super-120b-a12b"  # Mamba-2 mixers


def _mapped(device: str, engine: str, table: str):
    from mlacalc.measured.mapping import map_table
    from mlacalc.measured.tables import load_measured

    folder = MEASURED / SYSTEMS[device] / "linear_attention" / engine / VERSIONS[engine]
    (t,) = load_measured(folder / f"{table}.parquet").tables
    return t, map_table(t)


def _row_seconds(mapped, row: int, device: str, prof) -> float:
    from mlacalc.timemodel.kernel_time import predict_batch

    total = 0.0
    for p in mapped.parts:
        i = np.nonzero(p.rows == row)[0]
        if len(i):
            total += float(predict_batch(p.batch.take(i), device, prof).sum())
    return total


def _step_seconds(kernel, device: str, prof) -> float:
    from mlacalc.timemodel.kernel_time import predict_batch

    ((_, batch),) = batches_of([kernel])
    return float(predict_batch(batch, device, prof)[0]) / kernel.calls


# (TensorRT-LLM's conv rows convolve the key channels alone, a mapping rule: not the width a
# served step's conv covers, so its conv rows are not a step's)
CASES = [
    (engine, phase, seqs, tokens, source)
    for engine in VERSIONS
    for phase, seqs, tokens, source in (
        ("prefill", 4, 32768, "chunk_gated_delta_rule"),
        ("decode", 64, 64, "fused_recurrent_gated_delta_rule"),
        ("prefill", 4, 32768, "causal_conv1d_fn"),
        ("decode", 64, 64, "causal_conv1d_update"),
    )
    if not (engine == "trtllm" and source.startswith("causal_conv1d"))
]


@pytest.mark.parametrize("device", list(SYSTEMS))
@pytest.mark.parametrize("engine,phase,seqs,tokens,source", CASES)
def test_a_step_times_its_gated_deltanet_kernels_as_the_measured_rows(
    device, engine, phase, seqs, tokens, source
):
    pytest.importorskip("pyarrow")
    from mlacalc.timemodel.engine_profiles import profile_for

    t, mapped = _mapped(device, engine, "gdn_perf")
    c = t.columns
    src = np.char.replace(c["kernel_source"].astype(str), "_packed_decode", "")
    src = np.char.replace(src, "_flashinfer", "")
    rows = np.nonzero(
        (src == source)
        & (c["num_k_heads"] == 16)
        & (c["num_v_heads"] == 32)
        & (c["batch_size"] == seqs)
        & (c["num_tokens"] == tokens)
        & mapped.modelled
    )[0]
    assert len(rows), "no measured row of Qwen3-Next's shape"
    prof, _ = profile_for(engine, device)
    name = "linear_conv" if source.startswith("causal_conv1d") else "linear_core"
    (kernel,) = [
        k for k in step_kernels(MODEL, phase, tokens // seqs if phase == "prefill" else 8192, seqs)
        if k.name == name
    ]  # fmt: skip
    (part,) = [p for p in mapped.parts if int(rows[0]) in p.rows]
    assert variant_of(kernel.kind, kernel.shape) == part.batch.variant
    step = _step_seconds(kernel, device, prof)
    # the same work, but for bytes the step counts as its reference does: the gate and beta in
    # bf16 (the rows: float32), the conv's window of K rows (the engines keep K - 1; at one
    # token a sequence the call is mostly its fixed cost)
    rel = 0.2 if name == "linear_conv" else 0.01
    assert step == pytest.approx(_row_seconds(mapped, int(rows[0]), device, prof), rel=rel)


def test_the_engines_run_their_own_chunked_kernels():
    """vLLM's chunked delta rule is FlashInfer's fused kernel, which moves its inputs,
    outputs and state alone; flash-linear-attention's (SGLang's, TensorRT-LLM's) passes its
    intermediates through HBM: a Qwen3-Next prompt's linear layers take far less time under
    vLLM, as its rows do (H100, 4 x 8,192 tokens: 0.41 ms a layer, SGLang's 3.7 ms)."""
    core = {}
    for engine in VERSIONS:
        r = mlacalc.predict_time(MODEL, "H100-SXM", "prefill", 8192, batch=4, engine=engine,
                                 scope="model")  # fmt: skip
        core[engine] = sum(o.model_s for o in r.ops if o.name == "linear_core")
    assert core["vllm"] < 0.3 * core["sglang"]
    assert core["vllm"] < 0.3 * core["trtllm"]


def test_a_mamba2_step_runs_the_measured_conv_classes():
    """Nemotron 3's Mamba-2 conv is the ``mamba2_conv1d`` class (prompts) and
    ``mamba2_conv1d_update`` (decode); TensorRT-LLM's prompt kernel runs in waves of 32-channel
    CTAs a sequence, so more sequences of the same tokens take longer, as its rows do."""
    for phase, want in (("prefill", "mamba2_conv1d"), ("decode", "mamba2_conv1d_update")):
        ks = step_kernels(MAMBA, phase, 4096, 8)
        (conv,) = [k for k in ks if k.name == "mamba_conv"]
        assert variant_of(conv.kind, conv.shape) == want

    def conv_s(seqs: int, engine: str) -> float:
        r = mlacalc.predict_time(MAMBA, "H100-SXM", "prefill", 8192 // seqs,
                                 batch=seqs, engine=engine, scope="model")  # fmt: skip
        return sum(o.model_s for o in r.ops if o.name == "mamba_conv")

    assert conv_s(64, "trtllm") > 1.5 * conv_s(1, "trtllm")
    assert conv_s(64, "sglang") < 1.2 * conv_s(1, "sglang")


@pytest.mark.parametrize("device", list(SYSTEMS))
@pytest.mark.parametrize(
    "phase,seqs,tokens,source",
    [("prefill", 4, 8192, "causal_conv1d_fn"), ("decode", 64, 64, "causal_conv1d_update")],
)
def test_a_step_times_its_mamba2_conv_as_the_measured_rows(device, phase, seqs, tokens, source):
    """Nemotron 3 Super's Mamba-2 conv under TensorRT-LLM (its rows time that model's
    geometry): the step's kernel and the row get the same class and about the same seconds
    (the step's window holds K rows, the kernel's K - 1)."""
    pytest.importorskip("pyarrow")
    from mlacalc.timemodel.engine_profiles import profile_for

    t, mapped = _mapped(device, "trtllm", "mamba2_perf")
    c = t.columns
    rows = np.nonzero(
        (c["kernel_source"].astype(str) == source)
        & (np.char.find(c["model_name"].astype(str), "Super-120B") >= 0)
        & (c["batch_size"] == seqs)
        & (c["num_tokens"] == tokens)
        & mapped.modelled
    )[0]
    assert len(rows), "no measured row of Nemotron 3 Super's shape"
    prof, _ = profile_for("trtllm", device)
    seq_len = tokens // seqs if phase == "prefill" else 8192
    (kernel,) = [k for k in step_kernels(MAMBA, phase, seq_len, seqs) if k.name == "mamba_conv"]
    (part,) = [p for p in mapped.parts if int(rows[0]) in p.rows]
    assert variant_of(kernel.kind, kernel.shape) == part.batch.variant
    step = _step_seconds(kernel, device, prof)
    assert step == pytest.approx(_row_seconds(mapped, int(rows[0]), device, prof), rel=0.2)
