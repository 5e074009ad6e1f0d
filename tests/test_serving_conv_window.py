"""A served linear-attention or Mamba layer keeps ``kernel - 1`` convolution columns a
sequence, as the engines' causal-conv1d state does (mlacalc.serving.layout
SERVED_CONV_SHORTER, from recall), where the Hugging Face cache (mlacalc.cost) keeps
``kernel``. trial4: Qwen3.5-122B-A10B's served state counted its 4-tap window as 4 columns."""

from __future__ import annotations

from mlacalc.cost.engine import as_model
from mlacalc.cost.families import linear_state_bytes
from mlacalc.models.architecture import layer_pattern
from mlacalc.serving.plan import plan

NEMOTRON = "nemotron-3-super-120b-a12b"
FIXED_BEFORE = 21_381_120  # TP8 bf16, kernel columns (main at 3609f0a)


def test_qwen35_served_state_keeps_three_conv_columns_by_hand():
    # TP4: 4 of 16 key heads, 16 of 64 value heads, 128 wide: conv channels 2 x 4 x 128 +
    # 16 x 128 = 3,072, 3 columns in the fp8 cache; the recurrent state 16 x 128 x 128 float32;
    # 36 linear layers (of 48)
    p = plan("qwen3.5-122b-a10b", "B200", 4, tp=4, kv_dtype="fp8", batch=1, seq_len=4096)
    layer = 3_072 * 3 * 1 + 16 * 128 * 128 * 4
    assert p.kv_bytes_fixed_per_sequence_per_gpu == 36 * layer == 38_080_512  # 38,191,104 (4)


def test_the_hf_cache_keeps_the_whole_window():
    """mlacalc.cost stays with the Hugging Face cache: 4 columns (TP1: 12,288 channels)."""
    m = as_model("qwen3.5-122b-a10b")
    assert linear_state_bytes(m, 1) == 12_288 * 4 + 64 * 128 * 128 * 4


def test_mamba_served_state_keeps_kernel_minus_one_columns():
    """Nemotron-3-Super's Mamba-2 layers alike (3 columns of x, B and C of a 4-tap window),
    the state's other parts unchanged: one column of each layer's channels less."""
    m = as_model(NEMOTRON)
    conv = m.mamba_num_heads * m.mamba_head_dim + 2 * m.mamba_n_groups * m.ssm_state_size
    mamba = sum(k.attention == "mamba" for k in layer_pattern(m).layers)
    p = plan(NEMOTRON, "B200", 8, tp=8, kv_dtype="bf16", batch=1, seq_len=4096)
    full = m.mamba_d_conv * conv * 2 // 8  # bf16, the channels over 8 ranks
    assert m.mamba_d_conv == 4 and mamba > 0
    assert p.kv_bytes_fixed_per_sequence_per_gpu == FIXED_BEFORE - mamba * full // 4
