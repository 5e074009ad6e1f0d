"""Symbolic insight: ridge point, compute-bound KV length, absorption crossover."""

import math
from fractions import Fraction

import pytest

import mlacalc
from mlacalc import InvalidArgumentError
from mlacalc.timemodel.insight import absorption_crossover, compute_bound_seq_len, ridge_point


def test_ridge_point():
    assert ridge_point("H200").value == 990e12 / 4.8e12 == 206.25


def test_compute_bound_seq_len_deepseek_v3_h200():
    core, layer = compute_bound_seq_len("deepseek-v3", "H200", batch=1)
    # core kernel: 2 n_h S (2 d_c + d_rope) FLOPs over
    # 2 (S (d_c + d_rope) + n_h (2 d_c + d_rope)) bytes = R
    R = Fraction(99000, 480)  # 990 TFLOP/s over 4.8 TB/s
    by_hand = R * 2 * 128 * 1088 / (4 * 512 * 128 + 2 * 64 * 128 - R * 2 * 576)
    assert core.value == pytest.approx(float(by_hand), rel=1e-12) and round(core.value, 1) == 1403.6
    assert layer.value > core.value  # weights lower the intensity at batch 1
    never = compute_bound_seq_len("deepseek-v3", "H100-SXM", batch=1)
    assert never[0].value is None and "never" in never[0].note  # 241.8 < ridge 295.4


def test_absorption_crossover():
    limit = absorption_crossover("deepseek-v3")
    assert limit.value == pytest.approx(512 * 256 / 768)
    at = absorption_crossover("deepseek-v3", 4096)
    assert at.value == pytest.approx(4096 * 512 * 256 / (4096 * 768 + 512 * 256))
    v3 = mlacalc.load_model("deepseek-v3")
    q = math.floor(at.value)
    # just below the crossover absorbed is cheaper, just above it is not
    assert mlacalc.attention_flops(
        v3, "chunk", 4096, q_len=q, impl="absorbed"
    ) < mlacalc.attention_flops(v3, "chunk", 4096, q_len=q, impl="compressed")
    assert mlacalc.attention_flops(
        v3, "chunk", 4096, q_len=q + 1, impl="absorbed"
    ) > mlacalc.attention_flops(v3, "chunk", 4096, q_len=q + 1, impl="compressed")
    with pytest.raises(InvalidArgumentError):
        absorption_crossover("llama-3-8b")


def test_absorption_crossover_never_when_the_latent_is_small():
    # trial 8: d_c 16 on DeepSeek-V3's d_nope + d_v = 256 gave q* = 16 * 256 / (32 - 256) = -18.3
    # (a negative query count); with 2 d_c < d_nope + d_v absorbed is cheaper at every q
    small = mlacalc.load_model("deepseek-v3").with_changes(kv_lora_rank=16)
    for insight in (absorption_crossover(small), absorption_crossover(small, 131072)):
        assert insight.value is None and "never" in insight.note, insight
        assert "2 d_c = 32 is not above d_nope + d_v = 256" in insight.note
    for q in (1, 131072):
        assert mlacalc.attention_flops(
            small, "chunk", 131072, q_len=q, impl="absorbed"
        ) < mlacalc.attention_flops(small, "chunk", 131072, q_len=q, impl="compressed")
    # a short context still has a crossover: S (2 d_c - 256) + 256 d_c > 0 below S = 18.3
    assert absorption_crossover(small, 16).value == pytest.approx(
        16 * 16 * 256 / (16 * -224 + 4096)
    )
