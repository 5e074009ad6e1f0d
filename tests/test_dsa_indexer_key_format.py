"""DeepSeek-V3.2's indexer keys are one format everywhere: fp8 with a float32 scale a 128 values
(132 B a token and layer), as DeepSeek's released inference code keeps them beside its bf16
latent cache and as the DSA module tables' engines score them (DeepGEMM's fp8 MQA logits). A
trial: ``plan`` sized them in bf16 (256 B, with a warning), ``roofline`` moved bf16 bytes, and
the ``indexer_scores`` kernel was labelled (and timed as) fp8."""

from __future__ import annotations

import pytest

import mlacalc
from mlacalc.cost.attention import indexer_row_bytes
from mlacalc.cost.model_step import indexer_kernels
from mlacalc.serving.plan import plan

ROW = 128 + 4  # 128 fp8 values and one float32 scale
B, S = 8, 4096


def test_the_row_is_fp8_with_its_scale():
    assert indexer_row_bytes(mlacalc.load_model("deepseek-v3.2")) == ROW


@pytest.mark.parametrize("kv", ["bf16", "fp8", "fp4"])
def test_kv_sizing_model_step_and_kernel_label_agree(kv):
    m = mlacalc.load_model("deepseek-v3.2")
    layers = m.num_hidden_layers
    # the KV sizing: the same latent cache as DeepSeek-V3's, plus one indexer key a layer
    v3 = mlacalc.load_model("deepseek-v3")
    extra = mlacalc.kv_cache_bytes(m, 1, kv_dtype=kv) - mlacalc.kv_cache_bytes(v3, 1, kv_dtype=kv)
    assert extra == layers * ROW
    p = plan("deepseek-v3.2", "H200", 8, tp=8, seq_len=S, kv_dtype=kv, engine="trtllm")
    assert not [w for w in p.warnings if "indexer keys" in w]  # nothing assumed to say
    latent = mlacalc.kv_cache_bytes(v3, 1, kv_dtype=kv) // v3.num_hidden_layers
    assert p.kv_bytes_per_token_per_gpu == layers * (latent + ROW)
    # the model step (roofline's and the plan's): the keys read and written at the same row,
    # by a kernel of the fp8 class reading 1-byte keys
    pred = mlacalc.predict_time("deepseek-v3.2", "H200", "decode", S, B, kv_dtype=kv)
    ops = {o.name: o for o in pred.ops}
    heads, width = m.index_n_heads, m.index_head_dim
    query = B * heads * (width + 1) * 2  # the bf16 query and a weight a head
    assert ops["indexer_scores"].bytes == query + B * S * ROW + B * S * 4
    cost = mlacalc.attention_cost(m, "decode", S, batch=B, kv_dtype=kv)
    step = {k.name: k for k in indexer_kernels(cost, m, "bf16", "fp8", kv_dtype=kv)}
    assert step["indexer_scores"].bytes == ops["indexer_scores"].bytes
    assert step["indexer_scores"].dtype == "fp8" and step["indexer_scores"].shape["kv_bytes"] == 1
    d = m.hidden_size  # fp8 weights, the LayerNorm's bf16 weight and bias, bf16 hidden states
    assert step["indexer_k_proj"].bytes == d * width + 2 * width * 2 + B * d * 2 + B * ROW
    scores = [k for k in p.kernels if k["name"] == "indexer_scores"]
    assert scores and {k["dtype"] for k in scores} == {"fp8"}


@pytest.mark.parametrize("name", ["deepseek-v3.2", "glm-5.1"])
@pytest.mark.parametrize("kv", ["bf16", "fp8"])
def test_report_counts_the_indexer_keys_elements(name, kv):
    """The report's elements/token/layer counts the indexer key's ``index_head_dim`` values,
    not half of its fixed 132 B (which read 642 for the latent's 576 + the key's 128 = 704),
    while bytes/token stays the plan's (DeepSeek-V3.2 at bf16: 61 x 1,284 = 78,324 B)."""
    from mlacalc.report import kv_rows

    m = mlacalc.load_model(name)
    rows = {r["impl"]: r for r in kv_rows(m, 8192, 1, kv)}
    width = m.index_head_dim
    assert rows["compressed"]["elements_per_token_per_layer"] == 576 + width
    naive = m.num_attention_heads * (m.qk_nope_head_dim + m.qk_rope_head_dim + m.v_head_dim)
    assert rows["naive"]["elements_per_token_per_layer"] == naive + width
    latent = mlacalc.kv_cache_bytes("deepseek-v3", 1, kv_dtype=kv) // 61
    assert rows["compressed"]["bytes_per_token"] == m.num_hidden_layers * (latent + ROW)
    if name == "deepseek-v3.2" and kv == "bf16":
        assert rows["compressed"]["bytes_per_token"] == 78_324
