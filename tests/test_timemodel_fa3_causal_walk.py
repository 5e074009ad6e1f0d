"""FlashAttention-3's causal prompt tiles on Hopper compute the key blocks they walk whole
(``attention_time.fa3_causal_walk``, ``FA3_CAUSAL_TILES``): the walk's closed form against a
tile-by-tile count, the kernels that take it, and SGLang's H100 bf16 rows of head dim 64 and
one or two query heads a KV head (192-query tiles over 128-key blocks) it is read on."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mlacalc.hardware.catalogue import load_hardware
from mlacalc.timemodel.attention_time import _causal_walk_sum, fa3_causal_walk
from mlacalc.timemodel.device import device_figures
from mlacalc.words.kernels import KernelBatch

MEASURED = Path(__file__).resolve().parents[1] / "mlacalc" / "data" / "measured"


def _walked(q: int, group: int, rows: int, keys: int) -> float:
    # tile by tile: a tile of ``rows`` packed rows walks the blocks up to its last position
    tiles = int(np.ceil(q * group / rows))
    last = np.minimum(np.ceil(np.arange(1, tiles + 1) * rows / group), q)
    return float(np.ceil(last / keys).sum() * rows * keys / group)


@pytest.mark.parametrize(
    "q,group,rows,keys",
    [
        (4096, 1, 128, 128),
        (1024, 8, 192, 128),
        (16, 8, 128, 128),
        (16384, 96, 128, 80),
        (1024, 1, 192, 128),
        (4096, 1, 192, 128),
        (300, 5, 128, 112),
    ],
)
def test_the_closed_form_walk_counts_the_tiles_blocks(q, group, rows, keys):
    got = _causal_walk_sum(*(np.array([float(x)]) for x in (q, group, rows, keys)))[0]
    # exact at a whole period of the rounding; within 3% where a short prompt ends mid-period
    # (300 tokens, 5 query heads a KV head: 2.4% short)
    assert got == pytest.approx(_walked(q, group, rows, keys), rel=0.03)


def _prompt(hd: float, q: float, heads: float, n_kv: float, cols: dict, dtype="bf16"):
    shape = {"batch": 1.0, "q_len": q, "kv_len": q, "n_heads": heads, "n_kv": n_kv,
             "head_dim_qk": hd, "head_dim_v": hd, "window": 0.0, "causal": 1.0, **cols}  # fmt: skip
    return KernelBatch(
        "attention_prefill",
        dtype,
        np.ones(1),
        np.ones(1),
        np.ones(1),
        {k: np.array([float(v)]) for k, v in shape.items()},
    )


def _walk(device, hd, q, heads, n_kv, cols, dtype="bf16"):
    fig = device_figures(load_hardware(device))
    b = _prompt(hd, q, heads, n_kv, cols, dtype)
    return float(
        fa3_causal_walk(b, fig, np.array([cols.get("head_pack", 1.0)]), np.zeros(1, bool))[0]
    )


def test_which_prompts_take_it():
    packed = {"head_pack": 0.0}
    # head dim 64, one query head a KV head, 1,024 tokens: six 192-query tiles walk 2 + 3 + 5
    # + 6 + 8 + 8 = 32 blocks of 128 keys, eight 128-query ones 36: 32 x 192 / (36 x 128) =
    # 1.33 (the closed form 0.8% under it)
    assert _walk("H100-SXM", 64.0, 1024.0, 8.0, 8.0, packed) == pytest.approx(4 / 3, rel=0.01)
    # 128 x 128 at head dim 128, one head a KV head: the walk the classes were fitted on
    assert _walk("H100-SXM", 128.0, 4096.0, 8.0, 8.0, packed) == pytest.approx(1.0)
    # head dim 256's 128 x 80 tiles, 8 query heads a KV head (16 positions a tile): the
    # tile-by-tile count over 128 x 128 tiles of one head
    want = _walked(4096, 8, 128, 80) / _walked(4096, 1, 128, 128)
    assert _walk("H100-SXM", 256.0, 4096.0, 64.0, 8.0, packed) == pytest.approx(want, rel=0.01)
    # not the tile-a-head kernels, not Blackwell's, not an fp8 prompt, not a window or a prefix
    assert _walk("H100-SXM", 64.0, 1024.0, 8.0, 8.0, {}) == 1.0
    assert _walk("B200", 64.0, 1024.0, 8.0, 8.0, packed) == 1.0
    assert _walk("H100-SXM", 64.0, 1024.0, 8.0, 8.0, packed, "fp8") == 1.0
    assert _walk("H100-SXM", 64.0, 1024.0, 8.0, 8.0, {**packed, "causal": 0.0}) == 1.0


def test_sglang_h100_head_dim_64_prompts_of_few_heads_a_kv_head():
    # SGLang's H100 bf16 rows (FlashAttention-3), no window, 256 tokens and more, head dim 64,
    # one or two query heads a KV head (136 rows): -14.6% signed under 128 x 128 tiles, -10.6%
    # with the 192-query tiles' walk (refitted)
    from mlacalc.measured.mapping import map_table  # deferred: the measured extra (pyarrow)
    from mlacalc.measured.observations import predict_mapped
    from mlacalc.measured.tables import load_measured
    from mlacalc.measured.validate_tables import row_kinds

    pytest.importorskip("pyarrow")
    tables = load_measured(MEASURED / "h100_sxm", engine="sglang").tables
    t = next(x for x in tables if x.table == "context_attention_perf")
    mapped = map_table(t)
    pred = predict_mapped(mapped, "H100-SXM", "fit-h100-sxm-sglang")
    c = t.columns
    sel = (c["kernel_source"].astype(str) == "fa3") & (c["window_size"] <= 0)
    sel &= (c["isl"] >= 256) & (c["head_dim"] == 64)
    sel &= c["num_heads"] <= 2 * c["num_key_value_heads"]
    sel &= row_kinds(mapped) == "context_attention_perf:bf16"
    assert sel.sum() >= 100
    err = pred[sel] / t.seconds[sel] - 1.0
    assert np.median(err) > -0.125, np.median(err)
