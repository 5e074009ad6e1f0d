"""search(engine=) takes the engine's scheduler defaults where left out, as plan(engine=) and
``mlacalc search --engine`` do (one rule, scheduler.with_engine_defaults; the CLI had its own
loop). Before, the API's search took the engine's kernels only: llama-3-8b on one H100, isl
100, osl 100, TTFT 2 s, TPOT 0.2 s, vLLM: best batch 1745 (past vLLM's 1,024 running cap),
TPOT 71.1 ms, 24,412 tok/s, while the CLI's picked batch 1,024, TPOT 42.5 ms, 24,022 tok/s.
Without the engine's defaults the API's best is batch 1,792, TPOT 71.08 ms, 25,163.6 tok/s
(1,745, 69.61 ms, 24,941.8 before refinement went on next to a setup's best while a gap
beside it could pass the best found, search.refine_gaps; 280 -> 402 points)."""

from __future__ import annotations

import json

import pytest

from mlacalc import search
from mlacalc.serving.scheduler import Scheduler

ASK = dict(isl=100, osl=100, ttft=2.0, tpot=0.2)
CLI = ("search", "llama-3-8b", "-H", "H100-SXM", "--gpus", 1, "--isl", 100, "--osl", 100,
       "--ttft", "2s", "--tpot", "200ms", "--format", "json")  # fmt: skip
KEYS = ("layout", "batch_per_group", "weight_dtype", "kv_dtype", "chunked_prefill", "ttft_s",
        "tpot_s", "output_tokens_per_s", "output_tokens_per_s_per_gpu")  # fmt: skip


def test_api_search_takes_the_engine_s_defaults_as_the_cli_to_the_digit(run):
    r = search("llama-3-8b", "H100-SXM", [1], **ASK, engine="vllm")
    assert r.best["batch_per_group"] <= 1024  # vLLM's max_num_seqs (before: 1745)
    # TPOT 42.51 ms before vLLM's H100 decode classes were refitted with its window edge
    # (attention_time.LOCAL_WINDOW_DECODE: the fit's call floor no longer held high), 41.73 ms;
    # 41.82 ms with cuBLAS's persistent GEMMs balancing their last wave
    # (gemm_time.BALANCED_WAVES, gemm:bf16 refitted); 41.41 ms since vLLM's H100 fp8 decode
    # class was refitted with its head-dim-256 rows streaming as bf16 (49e2403:
    # KV_UPCAST_STREAM_HEAD_DIM, eff_memory 0.76 -> 0.84; the best point's cache is fp8);
    # 41.36 ms since vLLM's prompt classes were refitted with the cache write's blocks resident
    # by their threads (attention_time.cache_write_block_weight: the fitted prompt rates the
    # step's prefill takes moved; the step itself times no cache write blocks); 41.65 ms since
    # vLLM's per-tensor fp8 quantize walks each token's row in steps of 2,048 elements
    # (gemm_time.QUANT_ROW_STRIDE, gemm:fp8 refitted: the fp8 GEMMs' inputs of k = 4,096 and
    # 14,336 are two and seven steps); 41.56 ms since vLLM's FlashAttention-3 decode on Hopper
    # runs its split combine only up to 992 sequences (attention_decode.
    # FA3_DYNAMIC_SPLIT_MAX_BATCH: the best point's 1,024 run none); 41.65 ms after round 27's
    # vLLM rules (FlashAttention-3's decode unit and head-dim wait refitted on H100, the custom
    # all-reduce's wait a peer and two-shot switch)
    assert r.best["batch_per_group"] == 1024 and r.best["tpot_s"] == pytest.approx(0.04165, 1e-3)
    assert r.scheduler_defaults == "vllm"
    assert r.scheduler_defaults_applied == {
        "max_running": 1024,
        "max_tokens": 8192,
        "overlap_schedule": False,
        "cuda_graph_max_batch": 512,
    }  # no chunked prefill: the search runs its own budgets
    doc = json.loads(run(*CLI, "--engine", "vllm")[0])
    assert doc["scheduler_defaults"] == "vllm"
    assert doc["scheduler_defaults_applied"] == r.scheduler_defaults_applied
    assert {k: doc["best"][k] for k in KEYS} == {k: r.best[k] for k in KEYS}  # to the digit
    assert r.to_dict()["scheduler_defaults_applied"] == r.scheduler_defaults_applied


def test_engine_defaults_none_is_the_kernels_alone_as_the_cli():
    bare = search("llama-3-8b", "H100-SXM", [1], **ASK, engine="vllm", engine_defaults="none")
    assert bare.scheduler_defaults is None and bare.scheduler_defaults_applied == {}
    assert bare.best["batch_per_group"] == 1792  # 1,745 before search.refine_gaps
    other = search("llama-3-8b", "H100-SXM", [1], **ASK, engine_defaults="vllm")
    assert other.scheduler_defaults == "vllm" and other.engine == "trtllm"
    assert other.scheduler_defaults_applied["max_running"] == 1024


def test_given_values_stand_over_the_engine_s():
    r = search("llama-3-8b", "H100-SXM", [1], **ASK, engine="vllm", max_running=512,
               overlap_schedule=True)  # fmt: skip
    assert r.best["batch_per_group"] <= 512
    assert "max_running" not in r.scheduler_defaults_applied
    assert "overlap_schedule" not in r.scheduler_defaults_applied
    # a scheduler that turns the overlap off keeps it off under an engine whose default is on
    r = search("llama-3-8b", "H100-SXM", [1], **ASK, engine="sglang",
               scheduler=Scheduler(overlap=False))  # fmt: skip
    assert "overlap_schedule" not in r.scheduler_defaults_applied
    assert r.scheduler_defaults_applied["max_tokens"] == 16384


@pytest.mark.parametrize("bad", ["tensorrt", 3])
def test_a_bad_engine_defaults_is_refused_naming_it(bad):
    from mlacalc.words.errors import MlacalcError

    with pytest.raises(MlacalcError, match="engine_defaults"):
        search("llama-3-8b", "H100-SXM", [1], **ASK, engine_defaults=bad)
