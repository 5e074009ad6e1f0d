"""A search times many step models' kernels together; a DSA core's batch is read as one model's
(its cache's bytes, its heads: mlacalc.timemodel.dsa_time.engine_dsa_kernel), so a search's
DSA cores are batched per model (gpu_step._one_model) and its points give plan's figures."""

from __future__ import annotations

import pytest

from mlacalc import plan, search


def test_a_search_of_two_caches_times_each_prompt_as_plan_does():
    """A new user's trial: DeepSeek-V3.2 on 8 B300 under TensorRT-LLM, 4,000 + 1,000 tokens,
    TP8 EP8 at one request: the fp8 cache's TTFT was 158.3 ms in a search of bf16 and fp8
    caches (its prompt core timed as the bf16 cache's, the batch's first row) and 130.0 ms in
    plan and in a search of the fp8 cache alone."""
    r = search(
        "deepseek-v3.2", "B300", [8], isl=4000, osl=1000, engine="trtllm",
        kv_dtypes=["bf16", "fp8"], chunked_prefills=None, modes=["aggregated"],
        overlaps=["none"], batches=[1],
    )  # fmt: skip
    ttft = {p["kv_dtype"]: p["ttft_s"] for p in r.points if p["layout"] == "TP8 EP8"}
    for kv in ("bf16", "fp8"):
        p = plan(
            "deepseek-v3.2", "B300", 8, tp=8, ep=8, kv_dtype=kv, isl=4000, osl=1000,
            concurrency=1, engine="trtllm",
        )  # fmt: skip
        assert ttft[kv] == pytest.approx(p.ttft_s, rel=1e-9)
    # 0.13115 before the top-k rules (a768882, e7818e0: a long row re-reads its logits, a warm
    # call finds them in the L2; topk_flat refitted in every profile holding it, TensorRT-LLM's
    # decode top-k among them); 0.13002 before the MoE classes were refitted (c1c8015: a
    # power-law row's experts padded one by one); 0.12950 before a causal prompt's longest
    # tile (attention_time._causal_tail_s) and the prompt classes refitted with it; 0.12926
    # before TensorRT-LLM-gen's sparse class took residual rows down to a tenth
    # (observations.RESIDUAL_SHARES: its fp8 fit slower at its blocks, 12.8 us a call); 0.13081
    # before TensorRT-LLM-gen's sparse classes were refitted with 128 heads one unit on
    # Blackwell (mla_time.mla_tile_rows; this step's 16 heads a rank are one unit either way);
    # 0.13451 before the prompt logits walked whole blocks of 256 keys
    # (cost.compressed.walked_logit_keys: the indexer's 4,000 queries each over 256-4,096 keys)
    assert ttft["fp8"] == pytest.approx(0.13473, rel=1e-3)
