"""FlashAttention-3's key splits of a Hopper prompt of few tiles
(``attention_time.fa3_prompt_splits``): the heuristic's counts, and the measured rows of
SGLang's and vLLM's H100 tables it is read on."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mlacalc.hardware.catalogue import load_hardware
from mlacalc.timemodel.attention_time import fa3_prompt_splits
from mlacalc.timemodel.device import device_figures
from mlacalc.words.kernels import KernelBatch

MEASURED = Path(__file__).resolve().parents[1] / "mlacalc" / "data" / "measured"


def _prompt(batch: float, isl: float, heads: float, kv_heads: float) -> KernelBatch:
    shape = {
        "batch": batch,
        "q_len": isl,
        "kv_len": isl,
        "n_heads": heads,
        "n_kv": kv_heads,
        "head_dim_qk": 128.0,
        "head_dim_v": 128.0,
        "window": 0.0,
        "causal": 1.0,
        "head_pack": 0.0,
    }
    return KernelBatch(
        kind="attention_prefill",
        dtype="bf16",
        flops=np.array([1e9]),
        bytes=np.array([1e6]),
        calls=np.array([1.0]),
        shape={k: np.array([v]) for k, v in shape.items()},
    )


@pytest.mark.parametrize(
    ("batch", "isl", "heads", "kv_heads", "splits"),
    [
        (1, 4096, 1, 1, 4),  # 32 tiles: 4 splits fill 0.97 of the 132 SMs
        (1, 8192, 1, 1, 2),  # 64 tiles: 2 splits
        (1, 12288, 1, 1, 2),  # 96 tiles: 4 by the static bound, 2 by the varlen call's blocks
        (1, 16384, 1, 1, 1),  # 128 tiles fill over 0.8 of the SMs
        (8, 4096, 1, 1, 1),  # eight sequences' blocks fill the SMs: no split
        (1, 512, 8, 1, 1),  # 4 key blocks a tile: never split
        (1, 4096, 8, 1, 1),  # 8 query heads packed on a KV head: 256 tiles
    ],
)
def test_fa3_split_counts(batch, isl, heads, kv_heads, splits):
    h100 = device_figures(load_hardware("H100-SXM"))
    assert fa3_prompt_splits(_prompt(batch, isl, heads, kv_heads), h100)[0] == splits


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_h100_fa3_prompts_of_one_sequence_and_few_heads(engine):
    # one sequence, one or two heads, 4,096-12,288 tokens: 32-192 tiles, split 2-4 times;
    # timed unsplit (the longest tile's walk) SGLang's bf16 rows read +38%, vLLM's +32%
    from mlacalc.measured.mapping import map_table  # deferred: the measured extra (pyarrow)
    from mlacalc.measured.observations import predict_mapped
    from mlacalc.measured.tables import load_measured

    pytest.importorskip("pyarrow")
    tables = load_measured(MEASURED / "h100_sxm", engine=engine).tables
    t = next(x for x in tables if x.table == "context_attention_perf")
    pred = predict_mapped(map_table(t), "H100-SXM", f"fit-h100-sxm-{engine}")
    c = t.columns
    sel = (np.char.find(c["kernel_source"].astype(str), "fa3") >= 0) & (c["batch_size"] == 1)
    sel &= (c["num_heads"] <= 2) & (c["isl"] >= 4096) & (c["isl"] <= 12288)
    sel &= c["window_size"] <= 0
    assert sel.sum() >= 50
    err = pred[sel] / t.seconds[sel] - 1.0
    assert abs(np.median(err)) < 0.10
    assert np.median(np.abs(err)) < 0.12
