"""Symbolic insight: ridge point, compute-bound KV length, absorption crossover."""

import math
from fractions import Fraction

import pytest

import mlacalc
from mlacalc import InvalidArgumentError
from mlacalc.timemodel.insight import (
    absorption_crossover,
    compute_bound_seq_len,
    model_compute_bound_seq_len,
    ridge_point,
)


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
    # a short context: S (2 d_c - 256) + 256 d_c > 0 below S = 18.3 gives q* = 128 at S = 16,
    # past the 16 tokens a step can hold (q <= S): no crossover either (trial10's grid; this
    # returned 128.0 before)
    short = absorption_crossover(small, 16)
    assert short.value is None and "never" in short.note


def test_absorption_crossover_where_2_d_c_equals_d_nope_plus_d_v():
    """trial10: kv_lora_rank 128 on DeepSeek-V3 (2 x 128 = 128 + 128) raised sympy's
    "Invalid comparison of non-real zoo" (the limit's bottom 0) and returned q* = S = 4,096 at
    S = 4,096; absorbed costs no more FLOPs than compressed at any q <= S there (equal at S)."""
    c128 = mlacalc.load_model("deepseek-v3").with_changes(kv_lora_rank=128)
    for insight in (absorption_crossover(c128), absorption_crossover(c128, 4096)):
        assert insight.value is None and "never" in insight.note, insight
        assert "2 d_c = 256 is not above d_nope + d_v = 256" in insight.note
    for q in (1, 4095, 4096):
        assert mlacalc.attention_flops(
            c128, "chunk", 4096, q_len=q, impl="absorbed"
        ) <= mlacalc.attention_flops(c128, "chunk", 4096, q_len=q, impl="compressed")


@pytest.mark.parametrize("rank", [16, 64, 127, 128, 129, 256, 512])
@pytest.mark.parametrize(("nope", "v"), [(64, 64), (64, 128), (128, 128), (128, 256)])
def test_every_insight_over_a_grid_of_mla_widths(rank, nope, v):
    """Every insight function answers (a value or None and a note, never an exception) over
    kv_lora_rank x qk_nope_head_dim x v_head_dim, the degenerate 2 d_c = d_nope + d_v among
    them; a crossover, where there is one, is where the FLOPs cross."""
    m = mlacalc.load_model("deepseek-v3").with_changes(
        kv_lora_rank=rank, qk_nope_head_dim=nope, v_head_dim=v
    )
    got = [absorption_crossover(m), absorption_crossover(m, 16), absorption_crossover(m, 4096)]
    got += compute_bound_seq_len(m, "H100-SXM") + compute_bound_seq_len(m, "H200", batch=64)
    for i in got:
        assert i.value is None or (math.isfinite(i.value) and i.value > 0), i
        assert i.note and (i.value is not None or "never" in i.note), i
    by_model = model_compute_bound_seq_len(m, "H200", batch=64, seq_len=4096)
    assert by_model.value is None or (math.isfinite(by_model.value) and by_model.value > 0)
    assert by_model.value is not None or "bound at every S" in by_model.note, by_model
    at = got[2]
    if 2 * rank <= nope + v:
        assert at.value is None
    if at.value is not None:
        q = math.floor(at.value)
        assert 0 < q < 4096
        a, c = (mlacalc.attention_flops(m, "chunk", 4096, q_len=x, impl=i)
                for x, i in ((q + 1, "absorbed"), (q + 1, "compressed")))  # fmt: skip
        assert a > c


def test_roofline_insight_cli_on_a_crossover_free_model(run, tmp_path):
    """``mlacalc roofline c128.yaml -H H100 --insight`` exited "internal error" (trial10)."""
    import json
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    text = (root / "model_configs" / "deepseek-v3.yaml").read_text()
    assert "kv_lora_rank: 512\n" in text
    path = tmp_path / "c128.yaml"
    path.write_text(text.replace("kv_lora_rank: 512\n", "kv_lora_rank: 128\n"))
    out, _ = run("roofline", path, "-H", "H100-SXM", "--seq-len", "4k", "--insight",
                 "--format", "json")  # fmt: skip
    crossings = [i for i in json.loads(out)["insights"] if "absorption" in i["name"]]
    assert len(crossings) == 2 and all(i["value"] is None for i in crossings)


def test_dsa_insight_reads_the_attention_kernel_and_its_top_k_cap():
    # trial (round 24): DeepSeek-V3.2's insight read the indexer_scores row (120.4 FLOP/byte,
    # memory) as "the attention kernel" and gave dense MLA's limit 241.8; the attention row
    # reads min(S, 2,048) keys: 216.2 FLOP/byte at S = 131,072, compute-bound on H200's bf16 ridge
    model = model_compute_bound_seq_len("deepseek-v3.2", "H200", batch=1, seq_len=131072)
    assert "at S = 131,072: compute (216.2 FLOP/byte" in model.note, model.note
    assert model.value == 1404
    core, layer = compute_bound_seq_len("deepseek-v3.2", "H200", batch=1)
    assert round(core.value, 1) == 1403.6  # below index_topk: the crossing stands
    assert "stops at 216.2 FLOP/byte from S = index_topk = 2,048" in core.note
    assert layer.value is None and "never" in layer.note  # 933,904 > 2,048: never reached
    # on H100 (ridge 295.4) the capped 216.2 never crosses
    h100 = compute_bound_seq_len("deepseek-v3.2", "H100-SXM", batch=1)[0]
    assert h100.value is None and "216.2" in h100.note
