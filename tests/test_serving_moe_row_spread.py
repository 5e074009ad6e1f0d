"""A served step's experts get the rows their routing gives them (moe_time.ROWS_SPREAD): a random
routing's each a sample about the mean, a balanced one's whole rows, not every expert the mean
padded to whole tiles (which made a step jump by a third where the mean passed a tile's rows)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from mlacalc import plan
from mlacalc.timemodel.moe_time import spread_row_tiles

TILES = np.array([8.0, 16.0, 32.0, 48.0, 128.0, 256.0])[:, None]


def _summed(tile: float, rows: float) -> float:
    """E[ceil(R / tile)] for R = 1 + Poisson(rows - 1), term by term (the independent route)."""
    lam = rows - 1.0
    if lam <= 0:
        return 1.0
    total = mass = 0.0
    for n in range(int(lam + 15.0 * math.sqrt(lam) + 30.0)):
        p = math.exp(n * math.log(lam) - lam - math.lgamma(n + 1.0))
        mass += p
        total += p * math.ceil((1.0 + n) / tile)
    return total / mass


@pytest.mark.parametrize(
    "rows", [1.0, 1.5, 4.0, 16.0, 16.25, 17.0, 100.0, 255.0, 300.0, 2023.0, 8000.0]
)
def test_expected_tiles_are_the_poisson_sum(rows):
    got = spread_row_tiles(TILES, np.array([rows]))[:, 0]
    want = [_summed(float(t), rows) for t in TILES[:, 0]]
    # the normal's window past 256 rows and the closed form of a wide spread: within 0.3%
    assert got == pytest.approx(want, rel=3e-3)


def test_expected_tiles_rise_with_the_mean():
    means = np.linspace(1.0, 3000.0, 12001)
    tiles = spread_row_tiles(TILES, means)
    assert (np.diff(tiles, axis=1) >= -1e-4).all()
    # a mean just past a tile's rows: about half the experts need a second tile, not all
    at = spread_row_tiles(np.array([[16.0]]), np.array([16.0, 16.25, 17.0]))[0]
    assert at == pytest.approx([1.43, 1.46, 1.53], abs=0.01)


def _routed_ms(batch: int, routing: str) -> float:
    p = plan(
        "glm-5.1", "B300", 8, tp=1, dp_attention=True, weight_dtype="bf16",
        component_dtypes={"experts": "nvfp4"}, kv_dtype="fp8_ds_mla", engine="vllm",
        seq_len=4500, batch=batch, routing=routing,
    )  # fmt: skip
    return next(k["seconds"] for k in p.kernels if k["name"] == "routed_experts") * 1e3


def test_a_step_does_not_jump_where_the_mean_passes_a_tile():
    """A new user's trial: GLM-5.1's nvfp4 experts on 8 B300 under vLLM, DP-attention; 513
    sequences (520 tokens into the MoE: 16.25 rows an expert, TensorRT-LLM-gen's 16-row tile)
    were 13.38 -> 17.58 ms of routed experts (+31%) from 512 with every expert the mean (two
    tiles each), and 536 cost 10% more than 544 (a 32-row tile)."""
    random = [_routed_ms(b, "random") for b in (504, 512, 513, 536)]
    assert all(b >= a for a, b in itertools.pairwise(random))
    assert random[2] / random[1] < 1.02  # 15.09 -> 15.22 ms
    # balanced: whole rows, a quarter of the experts 17 rows at 513, three quarters at 536
    balanced = [_routed_ms(b, "balanced") for b in (512, 513, 536)]
    assert balanced[0] < balanced[1] < balanced[2]
    # 13.30 -> 14.05 (13.55 -> 14.28, 1.0536, before its nvfp4 kernel's 128-row tile ran as 256,
    # moe_time.FLASHINFER_TILE_UP; 13.72 -> 14.61, 1.0647, before it streamed every routed
    # pair, moe_time.PAIR_STREAM_DTYPES, the class refitted; 13.44 -> 14.46, 1.0775, before
    # FlashInfer's TensorRT-LLM-gen MoE took its cost per routed pair up to 64 tokens with a
    # lower fixed cost, moe_time.GEN_TOKENS_MOE)
    assert balanced[1] / balanced[0] == pytest.approx(1.0561, abs=0.01)
