"""The KV layout an engine stores (mlacalc.serving.precision.engine_kv_layout): a DSA model's
fp8 cache under vLLM and SGLang is FlashMLA's sparse fp8 layout (fp8_ds_mla, 656 B a latent
row), and that layout named for a model without DSA is said. Each test failed before."""

from __future__ import annotations

import pytest

from mlacalc.serving.plan import plan
from mlacalc.serving.search import search

GLM = dict(dp_attention=True, ep=8, weight_dtype="fp8", seq_len=32768)
# GLM-5.1: 78 layers, each a 512 + 64 latent row and a 128-wide fp8 indexer key with its
# float32 scale (132 B)
LAYERS, INDEXER = 78, 128 + 4


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_dsa_fp8_under_vllm_and_sglang_is_sized_as_flashmla_sparse_layout(engine):
    """trial4: 55,224 B a token (576 B rows) and a batch of 272, where the engine stores
    656 B rows: 61,464 B and 240, as --kv-dtype fp8_ds_mla gives (224 and 200 when the
    catalogue held a B200 at 180e9 B instead of its 180 GiB)."""
    p = plan("glm-5.1", "B200", 8, **GLM, kv_dtype="fp8", engine=engine)
    ds = plan("glm-5.1", "B200", 8, **GLM, kv_dtype="fp8_ds_mla", engine=engine)
    hand = LAYERS * ((512 + 4 * 4 + 64 * 2) + INDEXER)  # 512 fp8 + 4 scales + bf16 RoPE
    assert p.kv_bytes_per_token_per_gpu == hand == 61_464
    assert p.max_batch == ds.max_batch == 240
    assert any("--kv-dtype fp8" in w and "fp8_ds_mla" in w for w in p.warnings)


def test_dsa_fp8_under_trtllm_stays_plain_fp8():
    """TensorRT-LLM keeps the 576 values in fp8 (from recall): 576 B rows, no note."""
    p = plan("glm-5.1", "B200", 8, **GLM, kv_dtype="fp8", engine="trtllm")
    assert p.kv_bytes_per_token_per_gpu == LAYERS * (576 + INDEXER) == 55_224
    assert not any("fp8_ds_mla" in w for w in p.warnings)


def test_sparse_layout_on_a_model_without_dsa_is_said():
    """DeepSeek-V3 (no DSA) with fp8_ds_mla: sized as asked (61 x 656 = 40,016 B), said
    in one line naming the flag (accepted silently before)."""
    p = plan("deepseek-v3", "B200", 8, kv_dtype="fp8_ds_mla", seq_len=4096)
    assert p.kv_bytes_per_token_per_gpu == 61 * 656 == 40_016  # every TP rank holds the row
    notes = [w for w in p.warnings if "--kv-dtype fp8_ds_mla" in w]
    assert len(notes) == 1 and "no DSA" in notes[0] and "\n" not in notes[0]
    # DeepSeek-V3.2 (DSA) under vLLM takes the layout without a word on it; at TP8 its
    # latent-copy warning (plan_checks.latent_copies, round 21) and its indexer's
    # (plan.indexer_tp_warnings, round 24) are said, not about the layout (and vLLM's
    # stand-in kernels)
    kw = dict(kv_dtype="fp8_ds_mla", seq_len=4096)
    said = plan("deepseek-v3.2", "B200", 8, engine="vllm", **kw).warnings
    latent = [w for w in said if "copied on every tensor-parallel rank" in w]
    indexer = [w for w in said if "DSA indexer" in w and "whole on every tensor-parallel" in w]
    assert len(latent) == len(indexer) == 1
    assert not any("fp8_ds_mla" in w for w in said)
    # the default engine's (TensorRT-LLM: plain fp8) says it stores another (trial r29, 3)
    said = plan("deepseek-v3.2", "B200", 8, **kw).warnings
    (layout,) = [w for w in said if "fp8_ds_mla" in w]
    assert len(said) == 3 and "TensorRT-LLM stores DeepSeek-V3.2's (DSA)" in layout


def test_sparse_layout_note_gives_the_models_own_row():
    """trial10: a kv_lora_rank-256 DeepSeek-V3 in fp8_ds_mla was sized 392 B a latent row
    (256 fp8 + 2 scales + bf16 RoPE; plain fp8 320) while the note said DeepSeek-V3's 656 and
    576."""
    from mlacalc import load_model

    m = load_model("deepseek-v3").with_changes(kv_lora_rank=256)
    p = plan(m, "B200", 8, kv_dtype="fp8_ds_mla", seq_len=4096, engine="vllm")
    assert p.kv_bytes_per_token_per_gpu == 61 * (256 + 2 * 4 + 64 * 2) == 61 * 392
    (note,) = [w for w in p.warnings if "--kv-dtype fp8_ds_mla" in w]
    assert "(392 B a latent row, plain fp8 320)" in note and "656" not in note
    full = plan("deepseek-v3", "B200", 8, kv_dtype="fp8_ds_mla", seq_len=4096)
    assert any("(656 B a latent row, plain fp8 576)" in w for w in full.warnings)


def test_search_sizes_the_engines_layout_as_plan():
    """search under vLLM keeps a DSA model's fp8 cache as the engine stores it, so its
    point's plan (--kv-dtype fp8_ds_mla) reproduces it."""
    r = search(
        "deepseek-v3.2", "B200", [8], isl=2000, osl=500, kv_dtypes=("fp8",),
        weight_dtypes=("fp8",), engine="vllm", modes=("aggregated",),
    )  # fmt: skip
    assert {p["kv_dtype"] for p in r.points} == {"fp8_ds_mla"}


@pytest.mark.parametrize("engine", ["trtllm", "sglang", "vllm"])
def test_dsa_indexer_keys_beside_a_bf16_cache_are_fp8(engine):
    """GLM-5.1 with a bf16 cache: 78 x (1,152 + 132) = 100,152 B a token, the indexer keys in fp8
    with a float32 scale a 128 values, as DeepSeek's released inference code for V3.2 keeps
    them beside its bf16 latent and as the DSA module tables' engines score them (DeepGEMM's
    fp8 logits). They were sized in bf16 (109,824 B) with a warning that the width was
    assumed, while the indexer_scores kernel was timed as fp8."""
    from mlacalc.report import model_report

    p = plan("glm-5.1", "B200", 8, dp_attention=True, ep=8, seq_len=9000, engine=engine)
    assert p.kv_bytes_per_token_per_gpu == LAYERS * (1152 + INDEXER) == 100_152
    assert not [w for w in p.warnings if "indexer keys" in w]
    assert not model_report("glm-5.1", seq_len=4096)["notes"]
    assert not model_report("deepseek-v3", seq_len=4096)["notes"]
