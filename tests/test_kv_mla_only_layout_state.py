"""An MLA-only cache layout (``fp8_ds_mla``: FlashMLA's latent row, fp8 values with a float32
scale per 128 and the RoPE key in bf16) applies to the MLA layers only: a hybrid's other
layers (Kimi-Linear's KDA linear attention) keep their state as plain fp8 would. Its scale
per element had made Kimi-Linear's cache under fp8_ds_mla larger than under bf16."""

from __future__ import annotations

from reference_data import HF_CONFIGS

import mlacalc
from mlacalc.models.architecture import layer_pattern
from mlacalc.words.dtypes import KV_LAYOUTS, resolve_kv_layout, state_layout

KIMI = str(HF_CONFIGS / "kimi-linear-48b-a3b.config.json")


def test_state_layout_is_the_plain_dtype_outside_mla():
    assert state_layout("fp8_ds_mla").row_bytes(1) == 1
    assert state_layout("fp8_ds_mla").row_bytes(3072) == 3072
    assert state_layout("bf16") == resolve_kv_layout("bf16")
    assert state_layout("nvfp4") is KV_LAYOUTS["nvfp4"]  # a layout of every layer: as is


def test_kimi_linear_cache_under_fp8_ds_mla_is_fp8_plus_the_mla_rows_extra():
    """46,111,488 B bf16, 45,075,840 fp8; fp8_ds_mla had been 49,205,088 (the linear layers'
    state 46,104,576 -> 49,201,152 B), now fp8's plus 80 B a row (656 - 576) on each MLA
    layer at one token: 45,076,320."""
    m = mlacalc.load_model(KIMI)
    bf16 = mlacalc.kv_cache_bytes(m, 1, kv_dtype="bf16")
    fp8 = mlacalc.kv_cache_bytes(m, 1, kv_dtype="fp8")
    ds = mlacalc.kv_cache_bytes(m, 1, kv_dtype="fp8_ds_mla")
    mla_layers = sum(k.attention != "linear" for k in layer_pattern(m).layers)
    assert ds == fp8 + mla_layers * (656 - 576) == 45_076_320
    assert fp8 < ds < bf16


def test_kimi_linear_plan_per_sequence_under_fp8_ds_mla():
    """The served cache per sequence: fp8's, the MLA rows 656 B where fp8's are 576."""
    kw = dict(isl=2000, osl=500, concurrency=8)
    fp8 = mlacalc.plan(KIMI, "H200", 1, kv_dtype="fp8", **kw)
    ds = mlacalc.plan(KIMI, "H200", 1, kv_dtype="fp8_ds_mla", **kw)
    bf16 = mlacalc.plan(KIMI, "H200", 1, kv_dtype="bf16", **kw)
    mla_layers = sum(
        k.attention != "linear" for k in layer_pattern(mlacalc.load_model(KIMI)).layers
    )
    rows = -(-ds.seq_len // ds.page_size) * ds.page_size
    extra = (656 - 576) * mla_layers * rows
    assert ds.kv_bytes_per_sequence_per_gpu == fp8.kv_bytes_per_sequence_per_gpu + extra
    assert ds.kv_bytes_per_sequence_per_gpu < bf16.kv_bytes_per_sequence_per_gpu
