"""The capacity planner: weights and cache per GPU by hand, parallelism, pages, bad input."""

import math

import pytest

import mlacalc
from mlacalc import DoesNotFitError, InvalidArgumentError
from mlacalc.serving.plan import plan


def test_plan_deepseek_v3_fp8_on_8_h200_by_hand():
    """Weights per GPU at tp=8: replicated latent/query down-projections and norms, the rest / 8."""
    replicated_attn = 11_010_048 + 1_536 + 4_128_768 + 512
    split_attn = 187_107_328 - replicated_attn
    per_gpu = (
        61 * (replicated_attn + split_attn // 8)
        + 2 * (2 * 926_679_040) // 8  # embedding and head kept bf16 (were fp8)
        + 1_189_085_184 // 8
        + 2_554_331_136 // 8
        + 106_445_312 * 2  # routers kept bf16 (were fp8)
        + 881_664 * 2  # norms kept bf16 (were fp8: 85_012_026_880 in all, 85_012_908_544 with
        # the norms alone kept)
        + 653_908_770_816 // 8
        + 61 * (1_536 + 512)  # q_a / kv_a layernorms' second byte (kept bf16, were fp8)
    )
    # fp8 layers (84_780_357_120 with fp8 head, norms, routers; 85_119_353_856 with the
    # attention's latent norms fp8)
    assert per_gpu == 85_119_478_784
    # an H200 holds 141 GiB (gpu-datasheets/h200_sxm.yaml); at 141e9 B the batches were 4, 9, 7
    usable = 141 * 2**30 * 9 // 10
    for kv, per_token, sequences in (
        ("bf16", 70_272, 5),
        ("fp8", 35_136, 11),
        ("fp8_ds_mla", 40_016, 9),
    ):
        p = plan("deepseek-v3", "H200", 8, weight_dtype="fp8", kv_dtype=kv, seq_len=131072)
        assert p.weights_per_gpu_bytes == per_gpu
        assert (
            p.kv_bytes_per_token_per_gpu == per_token
        )  # the latent is replicated on every TP rank
        assert p.kv_tokens_per_gpu == (usable - per_gpu) // per_token
        assert p.max_batch == sequences == (usable - per_gpu) // per_token // 131072
        assert p.binding == "kv capacity"


def test_plan_gqa_kv_split_and_replication():
    p8 = plan("llama-3-70b", "H100-SXM", 8, weight_dtype="fp8", seq_len=8192)
    assert p8.kv_bytes_per_token_per_gpu == 327_680 // 8  # one of 8 KV heads per rank
    p16 = plan("llama-3-70b", "H100-SXM", 16, weight_dtype="fp8", seq_len=8192)
    assert p16.kv_bytes_per_token_per_gpu == 327_680 // 8  # 16 ranks, 8 heads: replicated
    dp = plan("llama-3-70b", "H100-SXM", 8, tp=4, dp=2, weight_dtype="fp8", seq_len=8192)
    assert dp.kv_bytes_per_token_per_gpu == 327_680 // 4 and dp.max_batch % 2 == 0


def test_plan_pages_batch_and_throughput():
    p = plan("llama-3-8b", "H100-SXM", 1, seq_len=1000, page_size=16, batch=8)
    assert p.kv_tokens_per_gpu // 1008 == p.max_batch  # 1000 tokens occupy 63 pages of 16
    assert p.max_context_memory == (p.kv_tokens_per_gpu // 8) // 16 * 16
    assert p.max_context == min(p.max_context_memory, 8192)  # llama-3-8b's window
    assert p.decode_tokens_per_s > 0 and p.binding in ("memory bandwidth", "compute")
    too_many = plan("llama-3-8b", "H100-SXM", 1, seq_len=131072, batch=10_000)
    assert too_many.binding == "kv capacity" and too_many.decode_batch == too_many.max_batch
    at_max = plan("llama-3-8b", "H100-SXM", 1, seq_len=131072, batch=too_many.max_batch)
    assert at_max.decode_tokens_per_s == too_many.decode_tokens_per_s


def test_plan_bad_input():
    with pytest.raises(InvalidArgumentError, match="does not divide the 128 attention heads"):
        plan("deepseek-v3", "H200", 3)
    with pytest.raises(InvalidArgumentError, match="does not divide the 256 routed experts"):
        plan("deepseek-v3", "H200", 6, ep=3, dp_attention=True)
    with pytest.raises(InvalidArgumentError, match="does not divide the 8 GPUs; use an ep"):
        plan("deepseek-v3", "H200", 8, ep=3)  # the GPUs first: replicas cannot mend that
    with pytest.raises(InvalidArgumentError, match="tp x dp"):
        plan("deepseek-v3", "H200", 8, tp=4, dp=4)
    too_big = plan("deepseek-v3", "H100-SXM", 1, weight_dtype="fp8")  # an answer, not an error
    assert not too_big.fits and too_big.overflow.startswith(
        "weights: 626.77 GiB per GPU in fp8, embeddings bf16, head bf16"  # 626.67 fp8 routers
    )
    assert too_big.max_batch == 0 and too_big.decode_step_s is None
    with pytest.raises(InvalidArgumentError, match="no experts"):
        plan("llama-3-8b", "H100-SXM", 1, ep=2)
    with pytest.raises(InvalidArgumentError, match="memory_reserve"):
        plan("llama-3-8b", "H100-SXM", 1, memory_reserve=1.5)
    for kwargs, argument in (
        ({"tp": 0}, "tp"),
        ({"tp": "8"}, "tp"),
        # memory_reserve None is now its default (0.1), as engine_memory's alternative
        ({"memory_reserve": "x"}, "memory_reserve"),
        ({"tp": 3}, "tp"),
        ({"pp": 3}, "pp"),
        ({"isl": 100}, "osl"),
        # 4 drafts: no published acceptance length to default to (1 to 3 have one)
        ({"isl": 10, "osl": 10, "mtp_tokens": 4}, "mtp_acceptance"),
        ({"overlap": "full"}, "overlap"),
        ({"mode": "split"}, "mode"),
        ({"concurrency": float("nan")}, "concurrency"),
        ({"prefill_gpus": 8}, "prefill_gpus"),
        ({"concurrency": 8}, "isl"),
        (
            {"isl": 10, "osl": 10, "mode": "disaggregated", "chunked_prefill": 512},
            "chunked_prefill",
        ),
    ):
        with pytest.raises(InvalidArgumentError) as info:
            plan("deepseek-v3", "H200", 8, **kwargs)
        assert info.value.argument == argument, kwargs
    assert issubclass(DoesNotFitError, mlacalc.MlacalcError)


@pytest.mark.parametrize("name", ["gpt-oss-120b", "llama-4-scout", "deepseek-v3.2", "llama-3-70b"])
def test_plan_capacity_sums_the_cache_over_layer_kinds(name):
    """The largest batch is the KV budget over one sequence's exact cache (kv_cache_bytes sums
    sliding, chunked, full and DSA layers by kind), shared by the TP ranks as the layout says."""
    m = mlacalc.load_model(name)
    p = mlacalc.plan(m, "H200", 8, tp=8, seq_len=32768, page_size=16)
    seq = mlacalc.kv_cache_bytes(m, 32768, 1)
    if not m.is_mla:
        seq = seq * math.ceil(m.num_key_value_heads / 8) // m.num_key_value_heads
    assert p.max_batch == p.kv_budget_per_gpu_bytes // seq
    # and the longest context at that batch is the largest one that still fits
    q = mlacalc.plan(m, "H200", 8, tp=8, seq_len=32768, page_size=16, batch=p.max_batch)
    assert q.max_context_memory >= 32768
