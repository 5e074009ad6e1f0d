"""A lone prompt tile's serial walk on Blackwell's TensorRT-LLM-gen prompt kernel
(``attention_time.lone_tile_chain_s``): its arithmetic, and the measured rows it is read from."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from _helpers import causal_prompt_batch

from mlacalc.hardware.catalogue import load_hardware
from mlacalc.timemodel.attention_time import LONE_TILE_BLOCK_S, LONE_TILE_MAX_BLOCKS
from mlacalc.timemodel.device import device_figures
from mlacalc.timemodel.profile import load_profile
from mlacalc.timemodel.terms import default_params, kernel_terms
from mlacalc.words.kernels import KernelBatch

MEASURED = Path(__file__).resolve().parents[1] / "mlacalc" / "data" / "measured"


def _prompt(kind: str, dtype: str, isl: float, heads: float, variant: str = "") -> KernelBatch:
    d_qk, d_v = (192.0, 128.0) if kind == "mla_prefill" else (128.0, 128.0)
    return causal_prompt_batch(kind, dtype, isl, heads, d_qk, d_v, variant)


@pytest.mark.parametrize("kind", ["attention_prefill", "mla_prefill"])
@pytest.mark.parametrize("dtype", ["bf16", "fp8"])
def test_one_heads_long_prompt_takes_its_longest_tiles_blocks_one_by_one(kind, dtype):
    # one head, 16,384 tokens: 128 tiles, fewer than B200's SMs; the last walks 128 blocks
    b200 = device_figures(load_hardware("B200"))
    prm = {**default_params(kind), **load_profile("fit-b200-sxm").classes[f"{kind}:{dtype}"]}
    batch = _prompt(kind, dtype, 16384.0, 1.0)
    compute = kernel_terms(batch, b200, prm)["compute_s"][0]
    assert compute >= 128 * LONE_TILE_BLOCK_S[(kind, dtype)] * (1 - 1e-9)
    # many heads: the tiles' products over the SMs take longer than any one tile's walk
    many = kernel_terms(_prompt(kind, dtype, 16384.0, 128.0), b200, prm)["compute_s"][0]
    assert many > 10 * compute


def test_only_blackwells_trtllm_gen_prompt_walks_its_tiles_alone(monkeypatch):
    from mlacalc.timemodel import attention_time

    fitted = load_profile("fit-b200-sxm").classes["attention_prefill:bf16"]
    prm = {**default_params("attention_prefill"), **fitted}
    h100 = device_figures(load_hardware("H100-SXM"))
    b200 = device_figures(load_hardware("B200"))
    cases = [
        (h100, _prompt("attention_prefill", "bf16", 16384.0, 1.0)),
        (b200, _prompt("attention_prefill", "bf16", 16384.0, 1.0, variant="flashinfer")),
        (b200, _prompt("attention_prefill", "bf16", 16384.0, 1.0)),
    ]
    with_rule = [kernel_terms(b, f, prm)["seconds"][0] for f, b in cases]
    monkeypatch.setattr(attention_time, "LONE_TILE_BLOCK_S", {})
    without = [kernel_terms(b, f, prm)["seconds"][0] for f, b in cases]
    # Hopper's kernels and Blackwell's variants (FlashInfer's own, Triton) keep their products;
    # Blackwell's TensorRT-LLM-gen kernel's lone tiles take longer
    assert with_rule[:2] == without[:2]
    assert with_rule[2] > without[2]


def _rows(table: str, engine: str):
    from mlacalc.measured.mapping import map_table  # deferred: the measured extra (pyarrow)
    from mlacalc.measured.observations import predict_mapped
    from mlacalc.measured.tables import load_measured

    pytest.importorskip("pyarrow")
    tables = load_measured(MEASURED / "b200_sxm", engine=engine).tables
    t = next(x for x in tables if x.table == table)
    profile = {"trtllm": "fit-b200-sxm", "sglang": "fit-b200-sxm-sglang"}[engine]
    return t, predict_mapped(map_table(t), "B200", profile)


@pytest.mark.parametrize("engine", ["trtllm", "sglang"])
def test_b200_mla_prompts_of_one_sequence_and_few_heads(engine):
    # one sequence, 1-4 heads, 2,048 tokens and more: the tiles fewer than the SMs, each
    # walking its blocks alone; the tiles' products at the SM's rate read them 35-58% short
    t, pred = _rows("context_mla_perf", engine)
    c = t.columns
    sel = (c["batch_size"] == 1) & (c["num_heads"] <= 4) & (c["isl"] >= 2048)
    assert sel.sum() >= 50
    err = pred[sel] / t.seconds[sel] - 1.0
    assert np.median(np.abs(err)) < 0.12


def _chain(batch: KernelBatch) -> float:
    from mlacalc.timemodel import attention_time  # deferred: its private arguments, built here

    b200 = device_figures(load_hardware("B200"))
    kv = batch.shape["kv_len"]
    tile = np.full(len(batch), 128.0)
    no_band = np.zeros(len(batch), dtype=bool)
    return float(attention_time.lone_tile_chain_s(batch, b200, kv, tile, no_band, tile)[0])


@pytest.mark.parametrize("kind", ["attention_prefill", "mla_prefill"])
def test_a_chunk_after_a_long_cached_prefix_takes_no_lone_walk(kind):
    # 64 queries over 131,072 keys: the kernel's split-keys case (no table has a prefix
    # column), not one tile walking 1,024 blocks; was 1,024 x 1.5 us a layer
    chunk = _prompt(kind, "bf16", 64.0, 1.0)
    chunk.shape["kv_len"] = np.array([131072.0])
    assert _chain(chunk) == 0.0
    # a prompt of its own keys past the tables' longest (16,384 tokens; the MLA tables' 32,768)
    # walks no more than their blocks
    step = LONE_TILE_BLOCK_S[(kind, "bf16")]
    most = LONE_TILE_MAX_BLOCKS[kind]
    assert most == (256.0 if kind == "mla_prefill" else 128.0)
    assert _chain(_prompt(kind, "bf16", 131072.0, 1.0)) == pytest.approx(most * step)
    assert _chain(_prompt(kind, "bf16", 8192.0, 1.0)) == pytest.approx(64 * step)


def test_a_served_chunk_over_a_long_prefix_on_b200_is_not_a_lone_walk(monkeypatch):
    # roofline of Llama-3-8B's 64-token chunk after 128K cached tokens on B200, whole model:
    # the same with the rule as without it
    from mlacalc.timemodel import attention_time
    from mlacalc.timemodel.predict import predict_time

    def chunk() -> float:
        return predict_time(
            "llama-3-8b", "B200", "chunk", 131072, 1, scope="model", q_len=64, causal=True
        ).seconds

    with_rule = chunk()
    monkeypatch.setattr(attention_time, "LONE_TILE_BLOCK_S", {})
    assert with_rule == pytest.approx(chunk(), rel=1e-9)
