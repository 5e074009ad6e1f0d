"""training_cost: the published per-token training compute, the seed's absorbed-vs-expanded
verdict as a computed table, memory per GPU, the step time's behaviour, the CLI, and one-line
errors for every bad input (mutation suite)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from reference_data import HF_CONFIGS_2

import mlacalc
from mlacalc.models.loading import model_argument
from mlacalc.training.cost import absorption_table, training_cost
from mlacalc.training.flops import training_flops
from mlacalc.training.memory import optimizer_bytes_per_param, state_bytes
from mlacalc.training.step import mtp_kernels
from mlacalc.words.errors import InvalidArgumentError, MlacalcError
from mlacalc.words.units import human_bytes

# ---------------------------------------------------------------------------------------------
# DeepSeek-V3 ISCA 2025 paper (arXiv 2505.09343), Table 2 "Training Cost": GFLOPs per token.
# The paper states neither the sequence length nor the convention. mlacalc's: forward and
# backward (3 x forward) matmul FLOPs per token, causal attention over 4,096 tokens, the output
# head on every token, embeddings free, MTP modules not counted.


@pytest.mark.parametrize(
    ("model", "published"), [("deepseek-v3", 250), ("deepseek-v2", 155)], ids=["v3-250", "v2-155"]
)
def test_isca_per_token_training_flops_mla(model, published):
    per_token = training_flops(model, 4096).per_token / 1e9
    assert round(per_token) == published  # 250.46 and 155.31


def test_isca_per_token_training_flops_llama_405b():
    """2,448 is 1.0% below mlacalc's 2,473.2 at 4,096 tokens; it is exactly what 2,048 causal
    tokens give (2,447.9): the paper's dense rows count the attention over half the context."""
    at_4k = training_flops("llama-3.1-405b", 4096).per_token / 1e9
    at_2k = training_flops("llama-3.1-405b", 2048).per_token / 1e9
    assert round(at_4k, 1) == 2473.2
    assert round(at_2k) == 2448
    assert at_4k / 2448 - 1 == pytest.approx(0.0103, abs=5e-4)


def test_isca_per_token_training_flops_qwen_72b_not_reproduced():
    """No Qwen 72B mlacalc knows gives 394: Qwen2.5-72B (the model of the paper's KV table)
    needs 444.9 GFLOPs per token at 4K (436.8 at 2K), 12.9% more; 394 = 6 x 65.7e9."""
    per_token = training_flops("qwen2.5-72b", 4096).per_token / 1e9
    assert round(per_token, 1) == 444.9
    assert per_token / 394 - 1 == pytest.approx(0.129, abs=1e-3)


def test_model_flops_are_six_n_plus_attention():
    """Dense check: 6 x (non-embedding parameters) + 6 x head + the attention core's 3x."""
    m = mlacalc.load_model("llama-3-8b")
    f = training_flops(m, 2048, causal=False)
    pc = mlacalc.param_counts(m)
    dense = pc.total - pc.embedding - pc.breakdown["lm_head"] - pc.breakdown["norms"]
    core = 3 * 2 * 2 * 32 * 128 * 2048 * 2048 * 32  # 3 x (QK + PV) x heads x d_h x pairs x L
    head = 6 * 4096 * m.vocab_size * 2048
    assert f.model_flops == 6 * dense * 2048 + core + head


# ---------------------------------------------------------------------------------------------
# Seed 003: absorbed training is the wrong choice (3.4x the core FLOPs; more memory)


def test_seed003_absorbed_training_table():
    """The activations' ratios with the fused SwiGLU's count (1.86, 3.11, 8.12, 28.13 with the
    unfused one, which the expanded path's MoE held one N f more of)."""
    rows = absorption_table("deepseek-v3", [1024, 4096, 16384, 65536])
    assert [r["core_ratio"] for r in rows] == [pytest.approx(3.4)] * 4
    assert all(r["flops_ratio"] > 1 and r["activations_ratio"] > 1 for r in rows)
    # 1.73, 2.33 at 16K / 64K before the MTP module was trained with the model (its MLA layer
    # and its head dilute the attention's share)
    assert [round(r["flops_ratio"], 2) for r in rows] == [1.06, 1.25, 1.71, 2.32]
    # 3.24, 8.56, 29.82 before the loss's log-probabilities were counted in fp32 (both paths);
    # 1.91, 3.23, 8.51, 29.62 before the MoE combine's weighted copy left both paths' count
    assert [round(r["activations_ratio"], 2) for r in rows] == [2.11, 3.73, 10.19, 36.03]


def test_seed003_recompute_saves_only_latent_and_rope_key():
    """With kv_up recompute the expanded layer keeps c_kv and K_rope, not K and V."""
    none = {
        a.name: a.bytes
        for a in training_cost("deepseek-v3", 4096).activations
        if a.block == "attention"
    }
    kv_up = {
        a.name: a.bytes
        for a in training_cost("deepseek-v3", 4096, recompute="kv_up").activations
        if a.block == "attention"
    }
    assert "k" in none and "v" in none and "k_rope" not in none
    assert "k" not in kv_up and "v" not in kv_up and kv_up["k_rope"] == 4096 * 64 * 2
    assert kv_up["kv_latent_normed"] == 4096 * 512 * 2


def test_seed003_attention_weights_at_b8_h24_t8192():
    """The seed's 'B=8, H=24, T=8192 bf16' probability tensor: 24 GiB a layer."""
    m = mlacalc.load_model("deepseek-v3").with_changes(
        num_attention_heads=24, num_key_value_heads=24
    )
    acts = training_cost(m, 8192, 8, impl="absorbed").activations
    probs = next(a for a in acts if a.name == "probabilities")
    assert probs.bytes == 8 * 24 * 8192 * 8192 * 2 == 24 * 2**30


# ---------------------------------------------------------------------------------------------
# memory per GPU


def test_optimizer_bytes_per_param():
    assert optimizer_bytes_per_param("adamw", "bf16-mixed") == (2, 4, 4, 8)
    assert optimizer_bytes_per_param("adamw", "fp8-mixed") == (2, 4, 4, 4)
    assert optimizer_bytes_per_param("sgd", "fp32") == (4, 4, 0, 0)
    assert optimizer_bytes_per_param("lion", "bf16") == (2, 2, 0, 2)
    s = state_bytes(1000, "adamw", "bf16-mixed", dp=8, zero=1)
    assert s == {
        "weights": 2000,
        "gradients": 4000,
        "master_weights": 500,
        "optimizer_states": 1000,
    }
    s3 = state_bytes(1000, "adamw", "bf16-mixed", dp=8, zero=3)
    assert s3["weights"] == 250 and s3["gradients"] == 500


def _deepseek_v3_stage(tp: int = 1, first: bool = True, last: bool = False) -> tuple[float, float]:
    """A stage of 4 of DeepSeek-V3's 61 layers over 16 stages on one GPU, by hand from
    param_counts: the first (three dense layers, one MoE and the embedding), a middle one
    (four MoE layers) or the last (three MoE layers, the final norm and the head): (non-expert
    parameters at ``tp``, routed experts at EP64)."""
    from mlacalc.cost.params import param_counts

    b = param_counts("deepseek-v3").breakdown
    attn = b["attention"] / 61
    whole = 7168 * (1536 + 512 + 64) + 1536 + 512  # q_a, kv_a and their norms: whole per rank
    moe = (b["moe_shared_experts"] / 58) / tp + b["moe_router"] / 58
    if last:
        dense = 3 * (whole + (attn - whole) / tp + 2 * 7168) + 3 * moe
        return dense + 7168 + b["lm_head"] / tp, 3 * b["moe_routed_experts"] / 58 / 64
    moe_layers = 1 if first else 4
    dense = 4 * (whole + (attn - whole) / tp + 2 * 7168) + moe_layers * moe
    if first:
        dense += b["dense_ffn"] / tp + b["embedding"] / tp
    return dense, moe_layers * b["moe_routed_experts"] / 58 / 64


def test_zero_shards_the_routed_experts_over_the_ranks_that_hold_them():
    """DeepSeek-V3 at PP16, EP64, DP128, ZeRO-1 (its pre-training layout): a GPU's routed
    experts (1/64 of a stage's) are held by 128 / 64 = 2 ranks, so ZeRO splits their master
    weights and moments two ways, the rest of the stage's parameters 128 ways (sharding the
    experts' over all 128 ranks had given 96 MB of master weights a GPU on the first stage,
    443 MB on the first stage). Exact against param_counts, by hand, on the busiest stage (the
    first, three dense layers, one MoE and the embedding, since the MoE combine's weighted
    copy left the activations; the last, three MoE layers and the head, from when the loss's
    logits were held in fp32 until then; the first before: an even 1/16 of the model had
    given 1.71 G parameters, 3.09 G there); with TP2 the experts repeat on both TP ranks too
    (and a stage of four MoE layers, 1.44 GB of master weights, holds the most). Without the
    MTP module, whose parameters on the last stage tests/test_training_mtp.py checks."""
    c = training_cost("deepseek-v3", 4096, pp=16, dp=128, ep=64, zero=1, mtp=False)
    dense, mine = _deepseek_v3_stage(first=True)
    assert c.stage == 0 and c.stage_layers == 4
    assert c.params_per_gpu == pytest.approx(dense + mine, abs=2)
    master = c.states_per_gpu["master_weights"]
    assert master == pytest.approx(4 * dense / 128 + 4 * mine / 2, abs=8)
    assert c.states_per_gpu["optimizer_states"] == pytest.approx(
        8 * dense / 128 + 8 * mine / 2, abs=8
    )
    assert master > 4.4e8 > 4 * (dense + mine) / 128 * 4  # not 96 MB
    assert state_bytes(1000, "adamw", "bf16-mixed", 8, 1, 600, 2)["master_weights"] == 500 + 1200
    tp2 = training_cost("deepseek-v3", 4096, tp=2, pp=16, dp=64, ep=64, zero=1, mtp=False)
    dense_tp2, experts_tp2 = _deepseek_v3_stage(2, first=False)
    assert 1 <= tp2.stage <= 12  # at TP2 a stage of four MoE layers holds the most
    assert tp2.states_per_gpu["master_weights"] == pytest.approx(
        4 * dense_tp2 / 64 + 4 * experts_tp2 / 2, abs=8
    )


def test_memory_per_gpu_splits_over_the_layout():
    one = training_cost("llama-3-8b", 4096)
    lay = training_cost("llama-3-8b", 4096, tp=2, pp=4, dp=2, global_batch=16)
    m = mlacalc.load_model("llama-3-8b")
    emb = m.vocab_size * m.hidden_size
    layer = (one.params_per_gpu - 2 * emb - m.hidden_size) // 32
    norms = 2 * m.hidden_size  # whole on each tensor-parallel rank
    assert lay.stage == 0
    assert lay.params_per_gpu == pytest.approx(8 * ((layer - norms) / 2 + norms) + emb / 2, abs=1)
    layers = one.activation_bytes - sum(a.bytes for a in one.activations if a.block == "head")
    # 1F1B: the first stage holds pp micro-batches (8 on each rank here, so 4 in flight); the
    # head's activations are the last stage's (1 in flight)
    assert lay.activation_bytes_per_gpu == pytest.approx(layers / 4 / 2 * 4, abs=1)


def test_a_stage_that_does_not_divide_the_layers_is_counted_whole():
    """Llama-3-8B on 3 stages: the first holds 11 layers and the embedding, 2,924,568,576
    parameters (the final norm is the last stage's), integers in
    the document (before: 2,676,753,749.33, a fractional 1/3 of the model). Llama 3 405B's 126
    layers on 16 stages and DeepSeek-V3's 61 do not divide either: refusing would refuse both
    published runs."""
    c = training_cost("llama-3-8b", 4096, pp=3)
    d = c.to_dict()
    assert (c.stage, c.stage_layers) == (0, 11)
    assert c.params_per_gpu == 2_924_568_576
    assert all(isinstance(v, int) for v in d["states_per_gpu"].values())
    assert isinstance(d["params_per_gpu"], int) and isinstance(d["memory_per_gpu"], int)
    assert d["states_per_gpu"]["weights"] == 2 * c.params_per_gpu


def test_kv_heads_are_whole_on_each_tensor_parallel_rank():
    """Llama-3-8B at TP32 (8 KV heads): each rank holds one whole K and V head, replicated 4
    ways (250.95 M parameters a GPU before, K and V split 32 ways), as the serving layout
    holds them; its K/V projection computes that head."""
    m = mlacalc.load_model("llama-3-8b")
    even = training_cost(m, 4096, tp=8)
    past = training_cost(m, 4096, tp=32)
    kv = 2 * 4096 * 128  # one K and one V head's projection, per layer
    q_o_ffn = (even.params_per_gpu - 2 * m.vocab_size * 4096 // 8) - 32 * (kv + 2 * 4096)
    q_o_ffn -= 4096  # the final norm, whole
    assert past.params_per_gpu == pytest.approx(
        q_o_ffn / 4 + 2 * m.vocab_size * 4096 / 32 + 32 * (kv + 2 * 4096) + 4096, abs=2
    )
    k = {a.name: a.bytes for a in past.activations}["k"]
    assert past.activation_bytes_per_gpu - even.activation_bytes_per_gpu / 4 == pytest.approx(
        32 * 2 * (k / 8 - k / 32), rel=1e-3
    )


# ---------------------------------------------------------------------------------------------
# step time: behaviour (the accuracy is benchmarks/bench_training.py's)


def test_step_time_behaviour():
    base = dict(hardware="H100", tp=8, pp=2, dp=2, global_batch=16)
    none = training_cost("llama-3-70b", 4096, **base)
    full = training_cost("llama-3-70b", 4096, recompute="full", **base)
    assert full.time.step_s > none.time.step_s
    assert full.flops.model_flops == none.flops.model_flops
    assert 0.1 < none.mfu < 0.8
    more = training_cost("llama-3-70b", 4096, **{**base, "global_batch": 64})
    assert more.time.bubble_s == none.time.bubble_s and more.mfu > none.mfu
    over = training_cost("llama-3-70b", 4096, overlap=True, **base)
    assert over.time.step_s < none.time.step_s
    d = none.to_dict()
    assert d["time"]["layout"]["gpus"] == 32 and d["mfu"] == none.mfu


def test_mfu_counts_the_models_flops_under_every_path_hfu_the_executed(run):
    """MFU is the model's FLOPs (one count a token, the expanded path's) over the peak; the
    absorbed path's extra products and the recomputation are executed FLOPs: HFU. Before:
    `train deepseek-v2-lite -s 16k --impl absorbed --recompute full --hw H100` gave MFU 23.3%
    at 37.81 GFLOPs a token (the absorbed path's own), expanded 40.4% at 21.50, and no HFU."""
    base = dict(hardware="H100", recompute="full")
    ab = training_cost("deepseek-v2-lite", 16384, impl="absorbed", **base)
    ex = training_cost("deepseek-v2-lite", 16384, impl="expanded", **base)
    assert ab.model_flops == ex.model_flops == ex.flops.model_flops < ab.flops.model_flops
    assert ab.flops_per_token == ex.flops_per_token  # 21.50 G either way
    for c in (ab, ex):  # by hand: tokens/s/GPU x FLOPs a token / peak
        assert c.mfu == pytest.approx(c.tokens_per_s_per_gpu * c.flops_per_token / 989.5e12)
        hw = c.tokens_per_s_per_gpu * c.flops.hardware_flops / c.flops.tokens / 989.5e12
        assert c.hfu == pytest.approx(hw) and c.hfu > c.mfu
    assert ab.mfu == pytest.approx(ex.mfu * ex.time.step_s / ab.time.step_s)
    # 0.131 and 0.392 before the routed experts' activation was timed (a pass of its own
    # between the grouped GEMMs); 0.133 and 0.404 before the loss was timed on the last stage
    assert round(ab.mfu, 3) == 0.130 and round(ex.mfu, 3) == 0.380
    argv = ["train", "deepseek-v2-lite", "-s", "16k", "--impl", "absorbed", "--recompute", "full"]
    doc = json.loads(run(*argv, "--hw", "H100", "--format", "json")[0])
    assert (doc["mfu"], doc["hfu"]) == (ab.mfu, ab.hfu)
    assert doc["model_flops_per_token"] == ex.flops.model_flops // 16384
    assert doc["executed_flops_per_token"] == ab.flops.hardware_flops // 16384
    text = " ".join(run(*argv, "--hw", "H100")[0].split())
    assert "MFU 13.0% (model FLOPs, 21.50 G a token), HFU 30.2% (executed FLOPs" in text
    assert "the absorbed path runs 37.81 G for the same model" in text


def test_deepseek_v3_layout_runs():
    c = training_cost(
        "deepseek-v3",
        4096,
        hardware="H800",
        pp=16,
        dp=128,
        ep=64,
        global_batch=15360,
        precision="fp8-mixed",
        recompute="kv_up",
    )
    assert c.time.ep_comm_s > 0 and c.time.tp_comm_s == 0
    assert c.layout.micro_batches == 120 and c.tokens_per_s_per_gpu > 0


# ---------------------------------------------------------------------------------------------
# CLI


def test_cli_train_json(run):
    out, _ = run("train", "deepseek-v3", "-s", "4k", "--recompute", "kv_up", "--format", "json")
    doc = json.loads(out)
    mtp = mtp_kernels(model_argument("deepseek-v3"), 4096, 1, "expanded")  # trained with its MTP
    flops = training_flops("deepseek-v3", 4096, mtp=mtp)
    assert doc["model_flops_per_token"] == flops.model_flops // 4096
    assert doc["time"] is None


def test_cli_train_table(run):
    out, _ = run(
        "train", "llama-3-8b", "-s", "2k", "--hw", "H100", "--dp", "8", "--global-batch", "64"
    )
    assert "Step on 8 x H100-SXM" in out and "MFU" in out
    out, _ = run("train", "deepseek-v2-lite", "--absorption", "1k,4k")
    assert "Absorbed against expanded" in out and "3.40x" in out


# ---------------------------------------------------------------------------------------------
# mutation suite: every bad input is one line naming the field


BAD = [
    ({"seq_len": 0}, "seq_len"),
    ({"seq_len": 2.5}, "seq_len"),
    ({"micro_batch": 0}, "micro_batch"),
    ({"micro_batch": -2}, "micro_batch"),
    ({"micro_batch": "4"}, "micro_batch"),
    ({"impl": "naive"}, "impl"),
    ({"recompute": "some"}, "recompute"),
    ({"recompute": None}, "recompute"),
    ({"attention": "fast"}, "attention"),
    ({"optimizer": "adagrad"}, "optimizer"),
    ({"precision": "fp4"}, "precision"),
    ({"zero": 4}, "zero"),
    ({"zero": True}, "zero"),
    ({"tp": 0}, "tp"),
    ({"tp": 3}, "tp"),
    ({"pp": 1000}, "pp"),
    ({"dp": -1}, "dp"),
    ({"ep": 2}, "ep"),
    ({"dp": 4, "global_batch": 6}, "global_batch"),
    ({"global_batch": 0}, "global_batch"),
    ({"hardware": "H1000"}, "hardware"),
    ({"overlap": "yes", "hardware": "H100"}, "overlap"),
    ({"comm_sms": -1, "hardware": "H100"}, "comm_sms"),
    ({"comm_sms": 500, "hardware": "H100"}, "comm_sms"),
    ({"comm_sms": True, "hardware": "H100"}, "comm_sms"),
]


@pytest.mark.parametrize(("kwargs", "field"), BAD)
def test_training_cost_mutations_name_the_field(kwargs, field):
    with pytest.raises(MlacalcError) as err:
        training_cost("llama-3-8b", **{"seq_len": 1024, **kwargs})
    text = str(err.value)
    assert text.startswith(f"{field}: ") or (field == "hardware" and "unknown hardware" in text)
    assert "\n" not in text


@pytest.mark.parametrize(
    ("model", "kwargs", "fragment"),
    [
        ("llama-3-8b", {"impl": "absorbed"}, "impl: 'absorbed' is an MLA path"),
        ("llama-3-8b", {"recompute": "kv_up"}, "recompute: 'kv_up'"),
        ("deepseek-v3", {"impl": "absorbed", "recompute": "kv_up"}, "the absorbed path"),
        ("deepseek-v3", {"ep": 3, "dp": 3, "global_batch": 3}, "ep:"),
        ("qwen3-next-80b-a3b", {}, "linear"),
        ("nemotron-3-super-120b-a12b", {}, "Mamba-2 mixers"),
        ("deepseek-v3.2", {}, "dsa"),
        ("mimo-v2-flash", {}, r"MiMo-V2-Flash \(mimo_v2_flash\) is not built \(attention sinks in"),
        ("step-3.7-flash", {}, r"not built \(a gate on the attention's output\)"),
        ("gemma-4-26b-a4b", {}, r"not built \(its global layers' shared K = V heads\)"),
    ],
)
def test_training_refusals(model, kwargs, fragment):
    with pytest.raises(MlacalcError, match=fragment):
        training_cost(model, 1024, **kwargs)


def test_gpt_oss_activations_are_built():
    """gpt-oss had been refused for its attention sinks: a flash kernel with a sink logit a
    head keeps what one without keeps. Its router takes the top 4 of the biased logits and a
    softmax over those in bf16 (the routing weight): by hand at 1,024 tokens, 36 layers of
    1,024 x 4 int64 indices and 1,024 x 4 bf16 weights twice (the softmax's output and the
    weight the combine multiplies by), no fp32 softmax over the 128 experts."""
    c = training_cost("gpt-oss-120b", 1024)
    router = {"router_topk_index", "router_topk_probabilities", "routing_weight"}
    got = sum(a.bytes * a.layers for a in c.activations if a.name in router)
    assert got == 36 * (1024 * 4 * 8 + 2 * 1024 * 4 * 2)
    assert "router_probabilities" not in {a.name for a in c.activations}


def test_gemma3_and_minicpm3_activations_are_built():
    """Gemma 3 (a norm after attention and after the FFN, before each residual add) and
    MiniCPM3 (DeepSeek's MLA with a dense SwiGLU; its scalings by constants save nothing) had
    been refused whole. By hand, Gemma 3 1B at 1,024 tokens: each of its 26 layers' two
    post-norms keeps its input (1,024 x 1,152 bf16) and its fp32 RMS (1,024 x 4 B); the
    reference layers of tests/test_training_reference.py save exactly the count."""
    c = training_cost("gemma-3-1b", 1024)
    post = sum(a.bytes * a.layers for a in c.activations if a.name.startswith("post_norm"))
    assert post == 26 * 2 * (1024 * 1152 * 2 + 1024 * 4)
    m = training_cost("minicpm3-4b", 1024)
    names = {a.name for a in m.activations}
    assert {"q_latent", "kv_latent_normed", "gate_up", "product"} <= names
    assert not any(a.name.startswith("post_norm") for a in m.activations)


def test_absorption_table_mutations():
    with pytest.raises(MlacalcError, match="is not MLA"):
        absorption_table("llama-3-8b")
    with pytest.raises(MlacalcError, match="seq_lens: is empty"):
        absorption_table("deepseek-v3", [])


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["--impl", "absorbed"], "--impl"),
        (["--tp", "3"], "--tp"),
        (["--zero", "5"], "--zero"),
        (["--optimizer", "adagrad"], "--optimizer"),
        (["--micro-batch", "0"], "--micro-batch"),
        (["--absorption", "1k"], "is not MLA"),
        (["--absorption-ranks", "64"], "--absorption-ranks"),
    ],
)
def test_cli_train_errors_are_one_line(run, argv, fragment):
    out, err = run("train", "llama-3-8b", "-s", "1k", *argv, code=2)
    assert fragment in err and err.count("\n") == 1 and not out


def test_seed003_latent_and_rope_key_are_tens_of_megabytes():
    """'c_kv and K_rope, a few tens of megabytes': at B=8, T=8192 (bf16), 72 MiB a layer."""
    m = mlacalc.load_model("deepseek-v3").with_changes(
        num_attention_heads=24, num_key_value_heads=24
    )
    acts = {
        a.name: a.bytes
        for a in training_cost(m, 8192, 8, recompute="kv_up").activations
        if a.block == "attention"
    }
    assert acts["kv_latent_normed"] + acts["k_rope"] == 8 * 8192 * (512 + 64) * 2 == 72 * 2**20


def test_seed003_absorbed_query_is_wider_than_q():
    """Q' = [q W_UK, q_rope] is d_c + d_rope = 576 wide per head against 192 for Q: 3x."""
    acts = {
        a.name: a.bytes
        for a in training_cost("deepseek-v3", 4096, impl="absorbed").activations
        if a.block == "attention"
    }
    assert acts["q_absorbed"] == 3 * acts["q"]


def test_seed003_ratio_improves_as_the_rank_drops():
    m = mlacalc.load_model("deepseek-v3").with_changes(kv_lora_rank=256)
    core = [
        training_flops(m, 4096, impl=i).forward["attention_core"] for i in ("expanded", "absorbed")
    ]
    assert core[1] / core[0] == pytest.approx((2 * 256 + 64) / 320)  # 1.8x, was 3.4x


def test_absorbed_training_over_widths():
    """Over latent widths: absorbed costs fewer FLOPs where 2 d_c + d_rope < 320 (d_c < 128 at
    DeepSeek-V3's heads) and more memory at every width and length."""
    rows = absorption_table("deepseek-v3", [4096, 65536], kv_lora_ranks=[64, 128, 256, 512])
    by = {(r["kv_lora_rank"], r["seq_len"]): r for r in rows}
    assert by[64, 4096]["core_ratio"] == pytest.approx(0.6)
    assert by[128, 4096]["core_ratio"] == pytest.approx(1.0)
    assert by[64, 65536]["flops_ratio"] < 1 < by[256, 4096]["flops_ratio"]
    assert all(r["activations_ratio"] > 1 for r in rows)
    with pytest.raises(MlacalcError, match="kv_lora_ranks"):
        absorption_table("deepseek-v3", [4096], kv_lora_ranks=[0])


def test_training_cost_contract_names():
    c = training_cost("deepseek-v3", 4096)
    assert c.flops_per_token == c.flops.per_token and c.fits is None


def test_cli_train_warns_of_flags_without_a_device(run):
    _, err = run("train", "llama-3-8b", "-s", "1k", "--overlap", "--comm-sms", "20")
    assert "--overlap times the step" in err and "--comm-sms times the step" in err


def test_tensor_parallel_shards_sum_to_the_model():
    """Per GPU at TP4, every matmul kernel holds a quarter of the model's FLOPs (Llama: nothing
    replicated); DeepSeek-V3's latent and query down-projections and router stay whole."""
    from mlacalc.training.flops import forward_kernels
    from mlacalc.training.step import make_layout, shard

    for name, whole in (
        ("llama-3-8b", set()),
        ("deepseek-v3", {"qkv_a_proj", "router"}),  # q_a and kv_a: one GEMM
    ):
        m = mlacalc.load_model(name)
        lay = make_layout(m, tp=4, ep=1)
        for k in forward_kernels(m, 1024, 1):
            if k.kind in ("elementwise", "quantize", "moe"):
                continue
            (part,) = shard(k, m, lay)
            assert part.flops * (1 if k.name in whole else 4) == k.flops, k.name


def test_a_training_step_says_which_profile_timed_it_and_how():
    """The step's kernels are timed with the profile a serving step takes for the device
    (TensorRT-LLM's: B200's own fit for a GB200, by datasheet ratios; the default on H100),
    named with how it predicts the device, in the result, the CLI's note and the app."""
    gb = training_cost("llama-3-8b", 4096, hardware="GB200", dp=8, global_batch=64).time
    h100 = training_cost("llama-3-8b", 4096, hardware="H100-SXM", dp=8, global_batch=64).time
    assert gb.profile == "fit-b200-sxm" and "GB200 by datasheet ratios from B200" in gb.calibration
    assert h100.profile == "default" and h100.calibration.startswith("calibrated on")
    assert gb.to_dict()["calibration"] == gb.calibration


def test_tensor_parallelism_past_the_scale_up_fabric_is_said(run):
    """A TP group wider than the node (H100's 8 GPUs) is timed over the network: train says
    so with its traffic and the fix (it had been priced so without a word); within an NVL72
    rack (GB200 TP16) or a node nothing is said."""
    lay = {"tp": 16, "pp": 2, "dp": 2, "global_batch": 8}
    h100 = training_cost("llama-3-70b", 4096, hardware="H100", **lay)
    (said,) = [w for w in h100.warnings if w.startswith("tp 16")]
    assert "H100-SXM's 8-GPU scale-up fabric" in said and "over the network" in said
    assert "keep tp within 8" in said
    assert not training_cost("llama-3-70b", 4096, hardware="GB200", **lay).warnings
    assert not training_cost("llama-3-70b", 4096, hardware="H100", tp=8, pp=4, dp=2).warnings
    assert not training_cost("llama-3-70b", 4096, tp=16).warnings  # no device, no timing
    _, err = run("train", "llama-3-70b", "--hw", "H100", "--tp", "16", "--pp", "2")
    assert "warning: tp 16: a tensor-parallel group of 16 GPUs" in err


def test_a_negative_comm_sms_says_zero_is_allowed():
    """comm_sms defaults to 0: a negative count's error says 0 or a positive integer (it had
    read "must be a positive integer", refusing the default it names)."""
    with pytest.raises(InvalidArgumentError, match="comm_sms: must be 0 or a positive integer"):
        training_cost("llama-3-8b", 4096, hardware="H100", comm_sms=-1)


def test_gpu_hours_per_trillion_tokens_is_the_rate_a_published_run_quotes(run):
    """train gives GPU-hours a trillion tokens (the figure DeepSeek's reports quote: 180K H800
    GPU-hours for V3, 1,543 tokens/s/GPU) beside tokens/s/GPU, in the note and the JSON."""
    c = training_cost("llama-3-8b", 4096, hardware="H100", dp=8, global_batch=64)
    assert c.gpu_hours_per_trillion_tokens == pytest.approx(1e12 / c.tokens_per_s_per_gpu / 3600)
    assert c.to_dict()["gpu_hours_per_trillion_tokens"] == c.gpu_hours_per_trillion_tokens
    assert training_cost("llama-3-8b", 4096).gpu_hours_per_trillion_tokens is None
    out, _ = run("train", "llama-3-8b", "--hw", "H100", "--dp", "8", "--global-batch", "64")
    rate = c.tokens_per_s_per_gpu
    words = " ".join(out.split())
    hours = c.gpu_hours_per_trillion_tokens / 1e3
    assert f"{rate:,.0f} tokens/s per GPU ({hours:,.1f}K GPU-hours a trillion tokens)" in words


def test_a_gb200_rack_is_one_nvlink_fabric_for_the_training_step():
    """A GB200 NVL72 rack joins its 72 GPUs over NVLink (``scale_up_domain_gpus``), though a
    tray holds 4: a TP8 group and a 64-rank expert-parallel group talk over NVLink 5, as on
    one HGX B200 node (the same 900 GB/s and latency), and only a group past the rack over
    the network. The step had held groups to the tray: TP8 ran over the network (Llama-3-70B
    TP8 PP4 DP8 at 8K: tensor-parallel traffic 7.4 times a B200 node's 32.07 ms),
    EP64 sent one copy a remote tray (80.82 ms against EP8 on B200's 11.99)."""

    def t(model, hw, **kw):
        return training_cost(model, 4096, hardware=hw, **kw).time

    dense = {"tp": 8, "pp": 4, "dp": 2, "global_batch": 8}
    assert t("llama-3-70b", "GB200", **dense).tp_comm_s == pytest.approx(
        t("llama-3-70b", "B200", **dense).tp_comm_s, rel=1e-9
    )
    moe = {"pp": 16, "global_batch": 64, "precision": "fp8-mixed"}
    gb_ep64 = t("deepseek-v3", "GB200", dp=64, ep=64, **moe).ep_comm_s
    b200_ep8 = t("deepseek-v3", "B200", dp=64, ep=8, **moe).ep_comm_s
    assert gb_ep64 == pytest.approx(b200_ep8, rel=1e-9)
    # data parallelism over two racks crosses the network (100 GB/s against 900)
    rack = t("llama-3-8b", "GB200", dp=72, global_batch=72).dp_comm_s
    two = t("llama-3-8b", "GB200", dp=144, global_batch=144).dp_comm_s
    assert two > 5 * rack


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["llama-3-8b", "-s", "1M"], "exceeds the model's max_position_embeddings (8,192)"),
        (
            ["deepseek-v3", "--absorption", "4k", "--absorption-ranks", "512,100000"],
            "100,000 above the full rank 7,168",
        ),
        (["llama-3-8b", "--precision", "fp8-mixed", "--hw", "A100-SXM-80GB"], "no FP8 tensor"),
        (["llama-3-8b", "--overlap"], "--overlap times the step"),
        (["llama-3-8b", "--comm-sms", "20"], "--comm-sms times the step"),
    ],
)
def test_cli_train_warns_what_it_takes_as_given(run, argv, fragment):
    """An input taken as given though it means less than it says is one warning line (each
    was accepted without a word before: the trial's D1/D2)."""
    out, err = run("train", *argv, "--format", "json")
    assert fragment in err and err.count("\n") == 1 and out


def test_cli_train_warns_nothing_for_plain_inputs(run):
    _, err = run("train", "deepseek-v3", "--absorption", "4k", "--absorption-ranks", "512")
    assert not err
    _, err = run("train", "llama-3-8b", "--precision", "fp8-mixed", "--hw", "H100", "-s", "8k")
    assert not err


def test_fp8_mixed_without_fp8_units_says_what_it_still_saves(run):
    """On an A100 fp8-mixed's GEMMs gain nothing, but its bf16 Adam moments still save memory
    and optimizer time: its step is shorter than bf16-mixed's (Llama-3-8B at 4K: 0.9566 s
    against 0.9748 s). The warning said 'gains nothing there (use bf16-mixed)' before."""
    base = dict(hardware="A100-SXM-80GB")
    fp8 = training_cost("llama-3-8b", 4096, precision="fp8-mixed", **base)
    bf16 = training_cost("llama-3-8b", 4096, precision="bf16-mixed", **base)
    assert fp8.time.micro_batch_s >= bf16.time.micro_batch_s
    assert fp8.time.optimizer_s < bf16.time.optimizer_s and fp8.time.step_s < bf16.time.step_s
    assert fp8.memory_per_gpu < bf16.memory_per_gpu
    _, err = run(
        "train", "llama-3-8b", "-s", "4k", "--precision", "fp8-mixed", "--hw", "A100-SXM-80GB"
    )
    assert "GEMMs gain nothing" in err and "bf16 adamw states" in err
    assert "still save memory and optimizer-step time" in err and "use bf16-mixed" not in err
    sgd = [
        training_cost("llama-3-8b", 4096, precision=p, optimizer="sgd", **base)
        for p in ("fp8-mixed", "bf16-mixed")
    ]
    assert sgd[0].memory_per_gpu == sgd[1].memory_per_gpu
    assert sgd[0].time.step_s >= sgd[1].time.step_s
    _, err = run(
        "train", "llama-3-8b", "--precision", "fp8-mixed", "--optimizer", "sgd",
        "--hw", "A100-SXM-80GB",
    )  # fmt: skip
    assert "sgd keeps no optimizer states: it saves nothing over bf16-mixed" in err


def test_fit_advice_lists_only_settings_not_in_use_that_lower_the_share():
    """Llama-3-8B at 8K on an H100 with full recompute, micro-batch 1, dp 1, dense: before, the
    advice listed 'full recompute, more pipeline/tensor/expert-parallel ranks, ZeRO-3, a
    smaller micro-batch' (four of them in use already or doing nothing there)."""
    base = dict(hardware="H100-SXM", recompute="full")
    c = training_cost("llama-3-8b", 8192, **base)
    assert c.fit_advice.endswith(  # its 134.62 GiB of weights and states alone are over too
        "shard them; modelled: more pipeline/tensor-parallel ranks, more data-parallel ranks "
        "under ZeRO-3"
    )
    for text in ("full recompute", "expert", "micro-batch", "modelled: ZeRO-3"):
        assert text not in c.fit_advice
    # each one named lowers a GPU's share
    for more in (dict(pp=2), dict(tp=2), dict(dp=2, zero=3)):
        assert training_cost("llama-3-8b", 8192, **base, **more).memory_per_gpu < c.memory_per_gpu
    # a MoE with recompute off, data-parallel ranks and micro-batches of 2: every setting
    moe = training_cost(
        "deepseek-v3", 4096, hardware="H800", pp=8, dp=16, ep=16, micro_batch=2, global_batch=64
    )
    said = ", ".join(moe.levers)  # its states alone are over: the advice lists fewer
    assert said.startswith(
        "full recompute, more pipeline/tensor/expert-parallel ranks, ZeRO-2 (the "
        "gradients sharded: "
    )  # the ZeRO stages cheapest first: ZeRO-2, then ZeRO-3
    assert "), ZeRO-3 (" in said and said.endswith("), a smaller micro-batch")


def test_the_zero3_lever_says_what_it_saves_and_what_it_costs():
    """Where a layout does not fit, the ZeRO-3 lever says the bytes a GPU's share loses and the
    traffic it adds: two weight all-gathers a micro-batch (forward and backward) and a gradient
    reduce-scatter a micro-batch, against one of each a step under ZeRO-1, and the step the
    model predicts with them (before: 'ZeRO-3' alone, though it doubles this step). Llama 3
    405B's published layout: 32 micro-batches a rank."""
    from mlacalc.render import human_seconds

    kw = dict(hardware="H100", tp=8, pp=16, dp=64, global_batch=2048)
    c = training_cost("llama-3.1-405b", 8192, **kw)
    three = training_cost("llama-3.1-405b", 8192, zero=3, **kw)
    assert c.fits is False and c.layout.micro_batches == 32
    working = three.states_per_gpu["zero3_gathered"]  # the shards' savings less it
    saved = human_bytes(c.memory_per_gpu - three.memory_per_gpu)
    lever = next(x for x in c.levers if x.startswith("ZeRO-3"))
    gross = human_bytes(c.memory_per_gpu - three.memory_per_gpu + working)
    assert lever.startswith(f"ZeRO-3 ({gross} less a GPU, {human_bytes(working)} of it taken")
    assert f": {saved} against 11.45 GiB over, enough to fit; " in lever
    assert lever.split("enough to fit; ")[1] == (
        "for 64 weight all-gathers a step where ZeRO-1 runs 1 and "
        "32 gradient reduce-scatters where it runs 1: data-parallel traffic "
        f"{human_seconds(c.time.dp_comm_s)} -> {human_seconds(three.time.dp_comm_s)} a step, "
        f"{human_seconds(c.time.dp_exposed_s)} -> {human_seconds(three.time.dp_exposed_s)} "
        f"exposed, step {human_seconds(c.time.step_s)} -> {human_seconds(three.time.step_s)})"
    )
    assert lever in c.fit_advice
    assert three.time.step_s > 1.5 * c.time.step_s  # it costs, and the lever says so
    docs = " ".join((Path(__file__).parents[1] / "docs" / "training.md").read_text().split())
    assert (
        f"ZeRO-3 takes {saved} off ({gross} of shards less {human_bytes(working)} gathered; "
        "enough to fit) for 64 all-gathers and 32 reduce-scatters a "
        f"step, data-parallel traffic {human_seconds(c.time.dp_comm_s)} -> "
        f"{human_seconds(three.time.dp_comm_s)}, step {human_seconds(c.time.step_s)} -> "
        f"{human_seconds(three.time.step_s)}"
    ) in docs
    assert three.fits
    # ZeRO-2 already reduce-scatters every micro-batch: only the gathers are new
    two = training_cost("llama-3.1-405b", 8192, zero=2, memory_reserve=0.3, **kw)
    assert two.fits is False
    lever = next(x for x in two.levers if x.startswith("ZeRO-3"))
    assert "64 weight all-gathers a step where ZeRO-2 runs 1:" in lever
    assert "reduce-scatters" not in lever


def test_refusal_of_a_hybrid_reads_whole_and_says_what_to_do():
    with pytest.raises(MlacalcError) as e:
        training_cost("qwen3-next-80b-a3b", 1024)
    text = str(e.value)
    assert "are not built (only decoder layers" in text and text.endswith("for this model")
    assert "layers with linear attention are not built" in text


def test_refusal_names_no_op_blocks_in_words():
    """Nemotron-Super-49B's NAS layers skip their attention or their FFN: the refusal said
    "none, FFN none layers"; it says "no attention / no FFN (the block a no-op)", one line."""
    ref = HF_CONFIGS_2 / "nvidia--Llama-3_3-Nemotron-Super-49B-v1.config.json"
    with pytest.raises(MlacalcError) as e:
        training_cost(mlacalc.load_model(str(ref)), 1024)
    text = str(e.value)
    assert text.startswith("model: ") and "\n" not in text
    assert "layers with no attention / no FFN (the block a no-op) are not built" in text
    assert "none" not in text


def test_fp32_training_is_single_precision_throughout():
    """precision="fp32": 4-byte activations and matmuls on TF32 tensor cores at half the dense
    bf16 rate (H100: no TF32 peak in the catalogue). Before, only the optimizer's bytes changed:
    fp32 came out faster than bf16-mixed (fwd 90.37 ms both, step 354.92 against 365.47 ms,
    activations 23,147,397,122 B both)."""
    base = dict(hardware="H100")
    mixed = training_cost("llama-3-8b", 4096, precision="bf16-mixed", **base)
    single = training_cost("llama-3-8b", 4096, precision="fp32", **base)
    two_byte = sum(a.bytes * a.layers for a in mixed.activations if a.bytes == 2 * a.elements)
    assert single.activation_bytes == mixed.activation_bytes + two_byte
    # not quite twice: the loss's log-probabilities are fp32 under both (1.896)
    assert single.activation_bytes > 1.89 * mixed.activation_bytes
    # 1.88: the loss's passes are fp32 under both (fewer under fp32: no casts)
    assert 1.85 < single.time.forward_s / mixed.time.forward_s < 2.0
    assert 1.9 < single.time.backward_s / mixed.time.backward_s < 2.0
    assert single.time.step_s > 1.6 * mixed.time.step_s and single.mfu < 0.65 * mixed.mfu
    from mlacalc.hardware.catalogue import load_hardware
    from mlacalc.training.step import tf32_slowdown

    assert tf32_slowdown(load_hardware("H100")) == 2.0


def test_fp32_figures_in_the_docs_are_the_model_s():
    """docs/training.md's fp32 paragraph: its figures are what the model gives (before: forward
    90.37 / 176.06 ms, step 365.5 / 612.3 ms, MFU 32.6%, stale), TF32 is stated as an
    assumption (PyTorch's matmul default is off), and the MoE dispatch and combine move 4-byte
    activations as it says (before: 2 bytes, DeepSeek-V3 on H800 PP16 EP64: 107.97 ms of
    expert-parallel communication a micro-batch under fp32 as under bf16-mixed)."""
    doc = " ".join((Path(__file__).parents[1] / "docs" / "training.md").read_text().split())
    mixed = training_cost("llama-3-8b", 4096, hardware="H100")
    single = training_cost("llama-3-8b", 4096, hardware="H100", precision="fp32")
    assert (
        f"forward {mixed.time.forward_s * 1e3:.2f} ms (`bf16-mixed`) against "
        f"{single.time.forward_s * 1e3:.2f} ms (`fp32`), step {mixed.time.step_s * 1e3:.1f} "
        f"against {single.time.step_s * 1e3:.1f} ms, MFU (against the bf16 peak) "
        f"{mixed.mfu:.1%} against {single.mfu:.1%}"
    ) in doc
    assert "are assumed to run on TF32 tensor cores. That is an assumption" in doc
    assert "off by default since PyTorch 1.12" in doc
    assert "expert-parallel communication (the MoE dispatch and combine too) move 4-byte" in doc
    layout = dict(hardware="H800", pp=16, dp=128, ep=64, global_batch=15360, recompute="kv_up")
    ep = [
        training_cost("deepseek-v3", 4096, precision=p, **layout).time.ep_comm_s
        for p in ("bf16-mixed", "fp32")
    ]
    assert 1.99 < ep[1] / ep[0] < 2  # twice the bytes, the same latency


def test_fp8_linear_inputs_save_three_bytes_of_four_under_fp32():
    """Under fp32 the linear layers' inputs are 4 bytes an element, and FP8 would keep them at
    1: three times the 1 byte of 2 it saves under bf16-mixed (Llama-3-8B at 4K: 3.25 GiB ->
    9.75 GiB). Before, it counted only 2-byte tensors and reported 0 under fp32."""
    mixed = training_cost("llama-3-8b", 4096).unmodelled_savings
    single = training_cost("llama-3-8b", 4096, precision="fp32").unmodelled_savings
    assert mixed["fp8_linear_inputs"] == 3_489_660_928
    assert single["fp8_linear_inputs"] == 3 * mixed["fp8_linear_inputs"]
    assert single["recompute_swiglu_norms"] == 2 * mixed["recompute_swiglu_norms"]
    assert single["both"] < single["recompute_swiglu_norms"] + single["fp8_linear_inputs"]


def test_full_recompute_memory_holds_the_layer_being_rerun():
    """recompute="full": the kept inputs and the head, plus the one layer whose forward runs
    again in its backward (Llama-3-8B at 4K: 2.04 GiB before, 512.5 MiB more now; 624.5 MiB
    when the SwiGLU was counted unfused)."""
    from mlacalc.training.memory import recomputed_layer_bytes

    c = training_cost("llama-3-8b", 4096, recompute="full")
    again = recomputed_layer_bytes(mlacalc.load_model("llama-3-8b"), 4096, 1, "expanded")["ffn"]
    assert c.recomputed_layer_bytes == again and round(again / 2**20, 1) == 512.5
    assert c.activation_bytes_per_gpu == c.activation_bytes + again
    none = training_cost("llama-3-8b", 4096)
    per_layer = none.activation_bytes_per_layer
    assert again == per_layer["attention"] + per_layer["ffn"] - 4096 * 4096 * 2


def test_a_published_run_that_does_not_fit_says_what_would_close_the_gap(run):
    """Llama 3 405B's published layout is 11.45 GiB over an H100's 72 GiB usable as counted
    (3.45 over the whole 80 GiB); recomputing SwiGLU and the norms (done in practice, not
    modelled) would take 20.82 GiB off: the note says so (before: 'DOES NOT FIT' alone).
    DeepSeek-V3's remains over even with both savings. The figures are docs/training.md's
    (24.45, 16.45 and 33.86 GiB, DeepSeek-V3 86.51 over and 48.67 saved, with the SwiGLU
    counted unfused: ``swiglu="unfused"`` gives them still)."""
    c = training_cost(
        "llama-3.1-405b", 8192, hardware="H100", tp=8, pp=16, dp=64, global_batch=2048
    )
    over = c.memory_per_gpu - c.usable_memory_bytes
    save = c.unmodelled_savings
    gib = 2**30
    assert round(over / gib, 2) == 11.45
    assert round((c.memory_per_gpu - c.device_memory_bytes) / gib, 2) == 3.45
    assert round(save["recompute_swiglu_norms"] / gib, 2) == 20.82  # 20.90 before fp32 logits
    eager = training_cost(
        "llama-3.1-405b", 8192, hardware="H100", tp=8, pp=16, dp=64, global_batch=2048,
        swiglu="unfused",
    )  # fmt: skip
    assert round((eager.memory_per_gpu - eager.usable_memory_bytes) / gib, 2) == 24.45
    docs = " ".join((Path(__file__).parents[1] / "docs" / "training.md").read_text().split())
    assert "is 11.45 GiB over an H100's 72 GiB usable as counted (3.45 GiB over" in docs
    assert "alone takes 20.82 GiB off: enough" in docs
    assert 0 < over < save["recompute_swiglu_norms"] <= save["both"]
    assert (
        save["fp8_linear_inputs"]
        < save["both"]
        < (save["recompute_swiglu_norms"] + save["fp8_linear_inputs"])
    )
    assert "enough to fit" in c.fit_advice and "not enough" not in c.fit_advice
    out, _ = run(
        "train", "deepseek-v3", "--hw", "H800", "--pp", "16", "--dp", "128", "--ep", "64",
        "--global-batch", "15360", "--precision", "fp8-mixed", "--recompute", "kv_up",
    )  # fmt: skip
    flat = " ".join(out.split())
    assert "DOES NOT FIT" in flat and "recomputing SwiGLU and the norms would save" in flat
    assert "not enough alone" in flat
    # 78.07 and 39.83 GiB before the MoE combine's weighted copy left the count
    assert "51.82 GiB over" in flat and "both about 39.49 GiB: not enough alone" in flat
    assert "is 51.8 GiB over an H800's 72 GiB usable" in docs
    assert training_cost("llama-3-8b", 4096, recompute="full").unmodelled_savings["both"] == 0
    assert training_cost("llama-3-8b", 4096, hardware="H100", tp=8).fit_advice is None


def test_the_attention_core_holds_the_k_v_heads_its_projection_computes():
    """At K/V heads that ``tp`` does not divide, a rank's core attends the ``ceil(n_kv / tp)``
    whole K/V heads its K/V projection computes (kv_head_share) and reads their bytes. Before:
    ``max(1, n_kv // tp)`` heads and every byte over ``tp`` (24 heads, 6 KV heads at TP4: one
    head and 3,932,160 B against the projection's two heads)."""
    from mlacalc.training.flops import forward_kernels
    from mlacalc.training.step import make_layout, shard

    m = mlacalc.load_model("llama-3-8b").with_changes(
        num_attention_heads=24, num_key_value_heads=6, head_dim=128
    )
    t, width = 1024, 2 * 128  # tokens; a K and a V head, or a query and an output head
    # fixr11: 6 K/V heads at TP4 are refused now (neither split nor copied whole, the serving
    # rule); at TP3 each rank's projection and core hold 2 whole heads
    with pytest.raises(InvalidArgumentError, match="num_key_value_heads"):
        make_layout(m, tp=4)
    ks = {k.name: k for k in forward_kernels(m, t, 1)}
    lay = make_layout(m, tp=3)
    (proj,) = shard(ks["kv_proj"], m, lay)
    (core,) = shard(ks["attention"], m, lay)
    assert proj.shape["n"] == 2 * width and core.shape["n_kv"] == 2 and core.shape["n_heads"] == 8
    # by hand: 8 query heads' Q read and O written, 2 K/V heads read, bf16
    assert core.bytes == t * 8 * width * 2 + t * 2 * width * 2 == 5_242_880
    assert core.flops == 2 * (t * (t + 1) // 2) * 8 * width  # causal pairs, the rank's heads
    # Llama-3-8B at TP16: one of its 8 K/V heads a rank, 1/8 of the K/V bytes (not 1/16)
    m = mlacalc.load_model("llama-3-8b")
    core = next(k for k in forward_kernels(m, t, 1) if k.name == "attention")
    (core,) = shard(core, m, make_layout(m, tp=16))
    assert core.shape["n_kv"] == 1 and core.shape["n_heads"] == 2
    assert core.bytes == t * 2 * width * 2 + t * 1 * width * 2


@pytest.mark.parametrize("name", ["gemma-4-26b-a4b", "mimo-v2-flash", "llama-3-8b"])
@pytest.mark.parametrize("tp", [1, 2, 4, 8, 16])
def test_each_layer_s_k_v_projection_holds_its_core_s_heads(name, tp):
    """Every layer's K/V projection computes on a rank the K/V heads its core attends there,
    the layer kind's own heads (Gemma 4's full layers 2 of 512 wide, K = V, its sliding layers
    8 of 256; MiMo-V2-Flash's full 4, sliding 8). Before, the model's 8 (Gemma 4) or 4 (MiMo)
    for every layer: Gemma 4's full layers at TP4 half a head (n 256), MiMo's sliding layers
    at TP8 two heads against their core's one."""
    from mlacalc.training.flops import forward_kernels
    from mlacalc.training.step import layer_kv_heads, make_layout, shard

    m = mlacalc.load_model(name)
    if m.num_attention_heads % tp:
        pytest.skip("heads do not split")
    ks = forward_kernels(m, 512, 1)
    lay, proj = make_layout(m, tp=tp), None
    for k, n_kv in zip(ks, layer_kv_heads(ks, m), strict=True):
        if k.name == "kv_proj":
            (proj,) = shard(k, m, lay, n_kv)
            whole = k
        elif k.name == "attention":
            (core,) = shard(k, m, lay, n_kv)
            per_head = whole.shape["n"] // k.shape["n_kv"]  # a K/V head's width in kv_proj
            assert proj.shape["n"] == core.shape["n_kv"] * per_head, (k.shape, tp)
            assert core.shape["n_kv"] == -(-k.shape["n_kv"] // tp)


@pytest.mark.parametrize("tp", [2, 4])
def test_a_fused_qkv_rank_holds_whole_kv_heads(tp):
    """Falcon's fused query_key_value (one K/V head; 64 query heads in 4096 so TP divides
    them): a rank holds the K/V head whole, in its weights and its projection's output, so the
    model holds what its twin with tp K/V heads holds (one a rank, the fused weight split
    evenly). By hand, TP2 at 2,048 tokens over 32 layers: the fused weight's K/V rows
    2 x 64 x 4096 / 2 and its output's 2,048 x 2 x 64 / 2 bf16 more than an even split,
    8,388,608 parameters and 8,388,608 bytes (were missing)."""
    m = mlacalc.load_model("falcon-7b").with_changes(
        hidden_size=4096, num_attention_heads=64, intermediate_size=16384
    )
    twin = m.with_changes(num_key_value_heads=tp)
    a = training_cost(m, seq_len=2048, tp=tp)
    b = training_cost(twin, seq_len=2048, tp=tp)
    assert a.params_per_gpu == b.params_per_gpu
    assert a.activation_bytes_per_gpu == b.activation_bytes_per_gpu
    # the even split's (the log-probabilities in fp32: 3,388,235,777 and 1,694,117,889 B at 2)
    even = {2: (2826182656, 3521404930), 4: (1413226496, 1760702465)}[tp]
    more = 32 * 2 * 64 * (tp - 1) // tp
    assert (a.params_per_gpu - even[0], a.activation_bytes_per_gpu - even[1]) == (
        more * 4096,
        more * 2048 * 2,
    )


def test_fp8_mixed_keeps_the_output_head_in_bf16(monkeypatch):
    """fp8-mixed runs the layers' linear GEMMs in fp8 and the output head in bf16 (it had run
    the head in fp8 too): timing the head in fp8 makes the step's forward faster."""
    from mlacalc.training import step

    kw = dict(hardware="H100", precision="fp8-mixed", global_batch=512)
    kept = training_cost("llama-3-8b", 4096, **kw).time
    monkeypatch.setattr(step, "_KEPT_BF16", frozenset({"scores", "pv"}))
    fp8_head = training_cost("llama-3-8b", 4096, **kw).time
    assert fp8_head.forward_s < kept.forward_s


def test_fp8_mixed_says_it_halves_the_optimizer_states(run):
    """fp8-mixed keeps Adam's moments in bf16 (8 -> 4 bytes a parameter); before, `train --help`
    said only "fp8-mixed FP8 GEMMs" and the memory row only "optimizer states"."""
    help_text = " ".join(run("train", "--help")[0].split())
    assert "fp8-mixed FP8 GEMMs and the optimizer states in bf16" in help_text
    assert "4 bytes a parameter, not bf16-mixed's 8" in help_text
    fp8 = run("train", "deepseek-v2-lite", "--precision", "fp8-mixed")[0]
    assert "optimizer states (2 x bf16 = 4 B a parameter; 8 under bf16-mixed)" in fp8
    assert "optimizer states (2 x fp32 = 8 B a parameter)" in run("train", "deepseek-v2-lite")[0]
    mixed = training_cost("deepseek-v2-lite", 4096).states_per_gpu["optimizer_states"]
    half = training_cost("deepseek-v2-lite", 4096, precision="fp8-mixed")
    assert half.states_per_gpu["optimizer_states"] * 2 == mixed


def test_zero3_gathers_weights_and_zero2_reduces_gradients_every_micro_batch():
    """ZeRO-2 reduce-scatters the gradients every micro-batch, ZeRO-3 also all-gathers the
    weights before each micro-batch's forward and backward; ZeRO-1 does each once a step."""
    from mlacalc.hardware.catalogue import load_hardware
    from mlacalc.serving.comm import comm_seconds

    kw = dict(seq_len=8192, hardware="H100", tp=8, pp=4, dp=8, global_batch=256)
    one, two, three = (training_cost("llama-3.1-70b", zero=z, **kw) for z in (1, 2, 3))
    n = one.layout.micro_batches
    assert n == 32
    hw = load_hardware("H100")
    _, g, _, _ = optimizer_bytes_per_param("adamw", "bf16-mixed")
    share = one.params_per_gpu / 8  # every rank's parameters alike under every stage
    assert three.params_per_gpu == one.params_per_gpu
    rs = float(comm_seconds("reduce_scatter", share * g, 8, hw, network=True))
    ag = float(comm_seconds("all_gather", share * 2, 8, hw, network=True))
    t1, t2, t3 = one.time, two.time, three.time
    # the traffic is the stage that trains the most parameters' (its head's share more than
    # the memory-busiest stage's params_per_gpu this hand count takes)
    assert t1.dp_comm_s == pytest.approx(rs + ag, rel=1e-5)
    assert t2.dp_comm_s == pytest.approx(n * rs + ag, rel=1e-5)
    assert t3.dp_comm_s == pytest.approx(n * (rs + 2 * ag), rel=1e-5)
    # each micro-batch's traffic hidden behind its forward (the first gather) or backward, on
    # the first stage: it ends its last backward last (the last stage, slowest with the head
    # and the loss, ends three stages' backward earlier), so its traffic is the one left bare
    f, b = t3.stages[0].forward_s, t3.stages[0].backward_s
    assert b < t3.backward_s
    exposed3 = n * (max(0.0, ag - f) + max(0.0, rs + ag - b))
    assert t3.dp_exposed_s == pytest.approx(exposed3, rel=1e-5)
    assert t2.dp_exposed_s == pytest.approx(
        (n - 1) * max(0.0, rs - b) + max(0.0, rs + ag - b), rel=1e-5
    )
    assert t1.dp_exposed_s == pytest.approx(max(0.0, rs + ag - b), rel=1e-5)
    # the step grows by the exposed traffic (the optimizer step shrinks with its shard)
    for c in (two, three):
        extra = c.time.dp_exposed_s - t1.dp_exposed_s + c.time.optimizer_s - t1.optimizer_s
        assert c.time.step_s - t1.step_s == pytest.approx(extra, rel=1e-5)
    assert t1.step_s < t2.step_s < t3.step_s


def test_fits_keeps_the_serving_planners_memory_reserve(run):
    """A share fits within the GPU's memory less ``memory_reserve`` of it (the planner's rule
    and default, 0.1), not the whole nominal memory: 76.5 GiB of an 80 GiB H100 does not fit
    (9K, micro-batch 4; at 8K micro-batch 5 took 78.8 GiB until the loss's logits were held in
    fp32, 81.2 GiB since)."""
    from mlacalc.words import defaults as D

    c = training_cost("llama-3.1-8b", 9216, hardware="H100", tp=4, micro_batch=4)
    gib = 2**30
    assert c.device_memory_bytes == 80 * gib and c.memory_reserve == D.MEMORY_RESERVE == 0.1
    assert c.usable_memory_bytes == 72 * gib
    assert 72 * gib < c.memory_per_gpu < 80 * gib  # fit the whole memory, not the usable
    assert c.fits is False and c.fit_advice.startswith(
        f"{(c.memory_per_gpu - 72 * gib) / gib:.2f} GiB over"
    )
    loose = training_cost(
        "llama-3.1-8b", 9216, hardware="H100", tp=4, micro_batch=4, memory_reserve=0
    )
    assert loose.fits is True and loose.usable_memory_bytes == 80 * gib
    given = ("train", "llama-3.1-8b", "-s", "9k", "--hw", "H100", "--tp", "4", "--micro-batch", "4")
    out, _ = run(*given)
    flat = " ".join(out.split())
    assert (
        "DOES NOT FIT in the 72.00 GiB usable of a H100-SXM's 80.00 GiB (memory reserve 0.1" in flat
    )
    out, _ = run(*given, "--memory-reserve", "0")
    assert "fits in the 80.00 GiB usable" in " ".join(out.split())
    with pytest.raises(MlacalcError, match="memory_reserve"):
        training_cost("llama-3.1-8b", hardware="H100", memory_reserve=1.0)


def test_train_says_when_the_global_batch_was_defaulted_and_counts_in_the_singular(run):
    """A global batch not given is one micro-batch a data-parallel rank: the output says so and
    how to set it; one micro-batch or sequence is written in the singular."""
    out, _ = run("train", "llama-3.1-8b", "--hw", "H100", "--dp", "8")
    flat = " ".join(out.split())
    assert "(1 micro-batch, global batch 8 sequences)" in flat
    assert "global batch not given: one micro-batch a data-parallel rank" in flat
    assert "--global-batch sets it (e.g. 64: 8 micro-batches a rank)" in flat
    out, _ = run("train", "llama-3.1-8b", "--hw", "H100")
    assert "(1 micro-batch, global batch 1 sequence)" in " ".join(out.split())
    out, _ = run("train", "llama-3.1-8b", "--hw", "H100", "--dp", "8", "--global-batch", "64")
    flat = " ".join(out.split())
    assert "(8 micro-batches, global batch 64 sequences)" in flat
    assert "global batch not given" not in flat
    assert training_cost("llama-3.1-8b").global_batch_defaulted
    assert not training_cost("llama-3.1-8b", global_batch=1).global_batch_defaulted


def test_expert_parallelism_across_tensor_parallel_ranks():
    """``ep`` dividing ``dp x tp`` but not ``dp`` (Megatron-Core's expert layout folded over the
    tensor- and data-parallel ranks, NeMo's DeepSeek-V3 recipe's TP2 PP16 EP64 on 1,024 GPUs,
    from recall) was refused ('must divide the 32 data-parallel ranks'). Qwen3-30B-A3B at TP4
    DP2 EP8 on one H100 node, by hand: a rank holds 16 of the 128 experts whole, the group is
    the node's 8 GPUs, each dispatching its 1,024 tokens (4,096 over TP4, sequence parallel)
    with their 8 routed copies over the scale-up link, forward and backward in 48 layers."""
    from mlacalc.hardware.catalogue import load_hardware
    from mlacalc.serving.comm import combine_bytes, comm_seconds, dispatch_bytes
    from mlacalc.training.step import ep_group, expert_dp

    kw = dict(hardware="H100", tp=4, dp=2)
    c = training_cost("qwen3-30b-a3b", 4096, ep=8, **kw)
    one = training_cost("qwen3-30b-a3b", 4096, ep=1, **kw)
    experts = 48 * 128 * 3 * 2048 * 768  # layers x experts x (gate, up, down) x d x f
    assert one.params_per_gpu - c.params_per_gpu == experts * 7 // 8
    assert expert_dp(c.layout) == 1 and ep_group(c.layout, 8) == (8, 8)
    hw = load_hardware("H100")
    sent = [dispatch_bytes(1024, 8, 2048, False), combine_bytes(1024, 8, 2048)]
    hop = sum(float(comm_seconds(k, b, 8, hw)) for k, b in zip(("dispatch", "combine"), sent))
    assert c.time.ep_comm_s == pytest.approx(2 * 48 * hop)
    # ep dividing dp: the same ep consecutive GPUs (it had spanned ep x tp, tp apart)
    v3 = training_cost("deepseek-v3", 4096, pp=16, dp=128, ep=64, global_batch=15360)
    assert ep_group(v3.layout, 8) == (64, 8)
    assert ep_group(training_cost("deepseek-v3", 4096, tp=2, dp=64, ep=64).layout, 8) == (64, 8)
    # DeepSeek-V3 at TP2 PP16 EP64 DP32: accepted, each rank's experts reduced over none
    folded = training_cost("deepseek-v3", 4096, tp=2, pp=16, dp=32, ep=64, global_batch=4096)
    assert expert_dp(folded.layout) == 1 and ep_group(folded.layout, 8) == (64, 8)
    with pytest.raises(MlacalcError) as e:
        training_cost("deepseek-v3", 4096, tp=2, dp=32, ep=128)
    assert str(e.value).endswith(
        "128 expert-parallel ranks must divide the 256 experts and the 64 data-parallel x "
        "tensor-parallel ranks (32 x 2) they are laid over"
    )


def test_swiglu_on_a_model_without_one_is_said_to_change_nothing(run):
    """--swiglu unfused on GPT-2 (a GELU MLP) was taken in silence."""
    _, err = run("train", "gpt2", "--swiglu", "unfused")
    # the library's sentence (TrainingCost.warnings, shared with the app), printed as a warning
    assert "swiglu unfused: GPT-2 small has no gated FFN (no SwiGLU): it changes nothing" in err
    _, err = run("train", "llama-3-8b", "--swiglu", "unfused")
    assert "--swiglu" not in err


def test_the_step_note_says_how_the_parts_make_the_step(run):
    """The CLI's step table lists a micro-batch's parts beside the step's: its note says which
    add (before: Gemma 3 1B at DP8, 32 micro-batches of 86 ms beside a 2.76 s step, no word)."""
    base = ("train", "llama-3-8b", "--hw", "H100", "--dp", "8", "--global-batch", "64")
    flat = " ".join(run(*base)[0].split())
    assert (
        "step = 8 x micro-batch + bubble + exposed data-parallel comm + optimizer step; the "
        "rows above the micro-batch are inside it; MFU"
    ) in flat
    flat = " ".join(run(*base, "--overlap")[0].split())
    assert "inside it (--overlap: the longer of the communication and the compute); MFU" in flat


def test_zero_without_data_parallel_ranks_is_said_to_shard_nothing(run):
    """--zero 3 at --dp 1 was taken in silence: nothing to shard over (memory as ZeRO-0)."""
    _, err = run("train", "llama-3-8b", "--zero", "3")
    assert "zero 3: ZeRO shards over the data-parallel ranks; with dp 1 it shards nothing" in err
    assert training_cost("llama-3-8b", zero=3).memory_per_gpu == (
        training_cost("llama-3-8b", zero=0).memory_per_gpu
    )
    for argv in (("--zero", "0"), ("--zero", "1", "--dp", "2")):
        assert "--zero" not in run("train", "llama-3-8b", *argv)[1]


def test_the_expert_group_stays_put_as_dp_grows():
    """Qwen3-30B-A3B at TP4 EP8 on H100: DP4 timed 18.54 ms of expert comm a micro-batch and
    DP8 54.89 ms, the group moved onto ranks tp apart (32 GPUs, 4 nodes) only because ep
    divides dp. Megatron-Core keeps ep consecutive GPUs (one node here) whatever dp is, and a
    rank's tokens are the same: the same all-to-all."""
    from mlacalc.training.step import ep_group

    kw = dict(hardware="H100", tp=4, ep=8, global_batch=64)
    four, eight = (training_cost("qwen3-30b-a3b", 4096, dp=dp, **kw) for dp in (4, 8))
    assert ep_group(eight.layout, 8) == ep_group(four.layout, 8) == (8, 8)
    assert eight.time.ep_comm_s == pytest.approx(four.time.ep_comm_s)
    assert eight.time.micro_batch_s == pytest.approx(four.time.micro_batch_s)


def test_expert_parallelism_folds_context_parallel_ranks_in():
    """DeepSeek-V3 at PP16 CP2 DP32 EP64 was refused as 'the 32 data-parallel x
    tensor-parallel ranks (32 x 1)': Megatron-Core lays EP over tp x cp x dp (from recall).
    Accepted; the experts' copies are reduced over none (64 / 64); a layout still refused
    names --cp."""
    from mlacalc.training.step import expert_dp

    c = training_cost("deepseek-v3", 8192, pp=16, cp=2, dp=32, ep=64, global_batch=256)
    assert c.layout.gpus == 1024 and expert_dp(c.layout) == 1
    with pytest.raises(MlacalcError) as e:
        training_cost("deepseek-v3", 8192, pp=16, cp=2, dp=16, ep=64, global_batch=256)
    assert "32 data-parallel x context-parallel (--cp) x tensor-parallel ranks (16 x 2 x 1)" in str(
        e.value
    )


def test_the_cp_lever_is_not_offered_where_cp_is_refused():
    """MiniCPM3-4B at 16K on the absorbed path (materialized probabilities) was offered 'cp
    512 ... enough to fit', and --cp 512 is refused there. Left out; offered on the expanded
    path."""
    c = training_cost("minicpm3-4b", 16384, impl="absorbed", hardware="H100")
    assert c.attention == "materialized" and c.fits is False
    assert not any("context-parallel" in x for x in c.levers)
    with pytest.raises(MlacalcError, match="materialized probabilities are not split"):
        training_cost("minicpm3-4b", 16384, impl="absorbed", hardware="H100", cp=2)
    expanded = training_cost("minicpm3-4b", 16384, hardware="H100", micro_batch=8)
    assert any("context-parallel" in x for x in expanded.levers), expanded.levers


def test_the_zero3_lever_counts_the_gathered_layers_against_its_savings():
    """The lever offered ZeRO-3's savings whole: Qwen3-30B-A3B at TP4 DP2 EP8 on H100, 4.5K
    tokens, 1.10 GiB against 1.42 GiB over, no 'not enough alone' (at 4K, 1.71 GiB over until
    the MoE combine's weighted copy left the activations; 0.50 since, which the net 0.52 GiB
    closes). The gathered working set (the memory
    table's row under ZeRO-3, :func:`test_zero3_memory_counts_the_gathered_working_set`) is
    taken back: here the embedding or the head (151,936 x 2,048 over tp 4, larger than a
    layer's attention, with the final norm; the routed experts are not sharded, dp x tp / ep
    = 1) whole twice in
    bf16 and its fp32 gradient."""
    c = training_cost("qwen3-30b-a3b", 4608, hardware="H100", tp=4, dp=2, ep=8)
    three = training_cost("qwen3-30b-a3b", 4608, hardware="H100", tp=4, dp=2, ep=8, zero=3)
    working = (151936 * 2048 // 4 + 2048) * (2 * 2 + 4)  # the head and the final norm
    assert three.states_per_gpu["zero3_gathered"] == working
    saved = c.memory_per_gpu - three.memory_per_gpu + working
    over = c.memory_per_gpu - c.usable_memory_bytes
    assert saved < over and saved - working < over
    lever = next(x for x in c.levers if x.startswith("ZeRO-3"))
    assert f"{human_bytes(working)} of it taken back by the gathered layers" in lever
    assert (
        f"{human_bytes(saved - working)} against {human_bytes(over)} over, not enough alone"
        in lever
    )


def test_the_optimizer_step_updates_a_shard_under_zero():
    """The optimizer step's bytes counted ZeRO-1's unsharded weights and gradients, so ZeRO-3
    read as a faster step (Qwen3-30B-A3B TP4 DP2 EP8 on H100: 121.30 -> 120.53 ms). Each rank
    updates its shard: the same optimizer step under ZeRO 1, 2 and 3, ZeRO-0's dp times it."""
    kw = dict(hardware="H100", tp=4, dp=2, ep=8)
    steps = {z: training_cost("qwen3-30b-a3b", 4096, zero=z, **kw).time for z in (0, 1, 2, 3)}
    assert steps[1].optimizer_s == steps[2].optimizer_s == steps[3].optimizer_s
    assert steps[3].step_s >= steps[1].step_s
    # a dense model at DP8: ZeRO-0's optimizer step reads and writes 8 ranks' shards
    dense = {
        z: training_cost("llama-3-8b", 4096, hardware="H100", dp=8, zero=z).time for z in (0, 1)
    }
    assert dense[0].optimizer_s > 4 * dense[1].optimizer_s


def test_zero3_under_lora_gathers_the_frozen_weights():
    """Under LoRA the ZeRO-3 lever read '0 s -> 0 s exposed, step 16.30 s -> 16.30 s' (Llama
    3.1 405B, 8K, TP8 PP4 DP4): the frozen weights ZeRO-3 shards were never gathered. Now
    gathered twice a micro-batch like the trained ones; ZeRO-1 gathers only the adapters."""
    kw = dict(hardware="H100", tp=8, pp=4, dp=4, global_batch=64, lora_rank=16)
    one = training_cost("llama-3.1-405b", 8192, **kw)
    three = training_cost("llama-3.1-405b", 8192, zero=3, **kw)
    assert three.time.dp_comm_s > 100 * one.time.dp_comm_s
    assert three.time.step_s > one.time.step_s + 1.0
    lever = next(x for x in one.levers if x.startswith("ZeRO-3"))
    assert "its unsharded gradient" not in lever and "the next one prefetched" in lever


def test_train_warnings_are_the_librarys(run):
    """--swiglu on a model without a gated FFN and --zero at dp 1 were warned by the CLI
    alone (the app said nothing); --lora-targets without --lora-rank was taken silently. Now
    TrainingCost.warnings, which the CLI prints and the app shows; ZeRO left to its default
    is not said."""
    said = training_cost("gpt2", swiglu="unfused", zero=2, lora_targets="attention").warnings
    assert [x.split(":")[0] for x in said] == ["swiglu unfused", "zero 2", "lora_targets attention"]
    assert training_cost("llama-3-8b").warnings == ()
    assert training_cost("llama-3-8b", lora_rank=8, lora_targets="attention").warnings == ()
    _, err = run("train", "llama-3-8b", "--lora-targets", "attention")
    assert "lora_targets attention: no LoRA rank given, so every weight trains" in err
    out, _ = run("train", "gpt2", "--format", "json")
    assert json.loads(out)["warnings"] == []


def test_the_activation_title_names_swiglu_only_for_a_gated_ffn(run):
    """The activation table's title said 'fused SwiGLU' for GPT-2 and Falcon (GELU MLPs)."""
    for name, gated in (("gpt2", False), ("llama-3-8b", True)):
        flat = " ".join(run("train", name)[0].split())
        assert ("fused SwiGLU" in flat) is gated, name


def test_values_narrower_than_keys_is_said_only_where_they_are():
    """memory._unbuilt said 'values narrower than keys' wherever sliding layers had sinks,
    without looking at the widths."""
    from mlacalc.training.memory import _unbuilt

    mimo = mlacalc.load_model("mimo-v2-flash")
    assert "values narrower than keys" in _unbuilt(mimo)
    wide = mimo.with_changes(v_head_dim=mimo.head_dim)
    assert "attention sinks" in _unbuilt(wide) and "values narrower" not in _unbuilt(wide)


def test_zero3_memory_counts_the_gathered_working_set(run):
    """ZeRO-3's memory had each GPU's shards alone. It also holds the largest unit it gathers
    whole twice in bf16 (the one running and the next one, prefetched: FSDP's defaults) and
    that unit's unsharded fp32 gradient before its reduce-scatter, a row of the memory table.
    By hand: Llama-3-8B at DP8, the head (128,256 x 4,096) and the final norm, larger than a
    layer (218,112,000 and its two norms) or the embedding: 4,202,725,376 B, more than its
    2.0 GB weight shard. Under LoRA (Llama-3.1-405B, TP8 PP4 DP4, rank 16) a layer on a TP8
    rank, 398,491,648 parameters, twice at 2 B, and its adapters' gradients alone (2,224,128 at
    4 B); none at dp 1, where nothing is sharded."""
    c = training_cost("llama-3-8b", 4096, hardware="H100", dp=8, zero=3)
    layer = 4096 * (4096 + 1024 + 1024) + 4096 * 4096 + 3 * 4096 * 14336
    assert layer + 2 * 4096 < 128256 * 4096 + 4096
    assert c.states_per_gpu["zero3_gathered"] == (128256 * 4096 + 4096) * (2 * 2 + 4)
    assert c.states_per_gpu["zero3_gathered"] > c.states_per_gpu["weights"]
    one = training_cost("llama-3-8b", 4096, hardware="H100", dp=8, zero=1)
    assert "zero3_gathered" not in one.states_per_gpu
    assert c.memory_per_gpu == sum(c.states_per_gpu.values()) + c.activation_bytes_per_gpu
    assert training_cost("llama-3-8b", 4096, zero=3).states_per_gpu["zero3_gathered"] == 0
    d, f = 16384, 53248
    layer = (d * d + 2 * d * 1024 + d * d + 3 * d * f) // 8 + 2 * d
    adapters = 16 * (
        (d + d // 8) * 2 + (d + 1024 // 8) * 2 + (d + f // 8) * 3
    )  # q, o; k, v; gate, up, down: the whole factor and the split one
    assert (layer, adapters) == (398_491_648, 2_224_128)
    kw = dict(hardware="H100", tp=8, pp=4, dp=4, global_batch=64, lora_rank=16, zero=3)
    lora = training_cost("llama-3.1-405b", 8192, **kw)
    assert lora.states_per_gpu["zero3_gathered"] == layer * 2 * 2 + adapters * 4
    out, _ = run("train", "llama-3-8b", "--hw", "H100", "--dp", "8", "--zero", "3")
    flat = " ".join(out.split())
    assert "ZeRO-3 gathered (the largest layer, embedding or head whole, the next one " in flat
    assert "prefetched, its unsharded gradient) │ 3.91 GiB" in flat


def test_the_lower_zero_stages_are_levers_with_their_cost():
    """A trial found the advice never offered ZeRO-2 (nor ZeRO-1 from 0) where it fits the
    layout: Meta's 405B layout at ZeRO-1 is 11.45 GiB over and ZeRO-2 fits it (step 19.02 s)
    where the offered ZeRO-3 costs 27.29 s. Each stage above the one in use is a lever,
    cheapest first, saying what it shards, what it saves against what is over and what it
    costs: ZeRO-2's reduce-scatter a micro-batch in place of the one all-reduce."""
    from mlacalc.render import human_seconds

    kw = dict(hardware="H100", tp=8, pp=16, dp=64, global_batch=2048)
    c = training_cost("llama-3.1-405b", 8192, **kw)
    two = training_cost("llama-3.1-405b", 8192, zero=2, **kw)
    assert c.fits is False and two.fits and two.time.step_s < c.time.step_s * 1.5
    names = [x.split(" (")[0] for x in c.levers]
    assert names.index("ZeRO-2") + 1 == names.index("ZeRO-3") and "ZeRO-1" not in names
    lever = next(x for x in c.levers if x.startswith("ZeRO-2"))
    saved = human_bytes(c.memory_per_gpu - two.memory_per_gpu)
    over = human_bytes(c.memory_per_gpu - c.usable_memory_bytes)
    assert lever == (
        f"ZeRO-2 (the gradients sharded: {saved} less a GPU against {over} over, enough to "
        "fit; for 32 gradient reduce-scatters a step, one a micro-batch, in place of ZeRO-1's "
        f"one all-reduce: data-parallel traffic {human_seconds(c.time.dp_comm_s)} -> "
        f"{human_seconds(two.time.dp_comm_s)} a step, {human_seconds(c.time.dp_exposed_s)} -> "
        f"{human_seconds(two.time.dp_exposed_s)} exposed, step {human_seconds(c.time.step_s)} "
        f"-> {human_seconds(two.time.step_s)})"
    )
    # 13.20 s -> 19.02 s before each pipeline stage was timed with its own layers
    assert "step 12.41 s -> 18.56 s" in lever
    # from ZeRO-0 both lower stages; ZeRO-1 shards the states for the same traffic
    zero = training_cost("llama-3.1-405b", 8192, zero=0, **kw)
    names = [x.split(" (")[0] for x in zero.levers]
    assert names[names.index("ZeRO-1") :][:3] == ["ZeRO-1", "ZeRO-2", "ZeRO-3"]
    one = next(x for x in zero.levers if x.startswith("ZeRO-1"))
    assert one.startswith("ZeRO-1 (the master weights and optimizer states sharded: ")
    assert "; the same data-parallel traffic: step " in one
    # at ZeRO-2 only ZeRO-3 is left; a layout that fits is given no figured lower stage
    assert not any(x.startswith(("ZeRO-1", "ZeRO-2")) for x in two.levers)
    fits = training_cost("llama-3.1-8b", 1024, hardware="H100", tp=8, dp=2, zero=0)
    assert fits.fits and not any(x.startswith(("ZeRO-1", "ZeRO-2", "nf4")) for x in fits.levers)
    # Llama-3.1-70B 4K TP8 DP8: 357.01 MiB over (231.76 MiB before the loss's logits were held
    # in fp32), ZeRO-2 saves about 28.8 GiB
    c = training_cost("llama-3.1-70b", 4096, hardware="H100", tp=8, dp=8, global_batch=512)
    assert "ZeRO-2 (the gradients sharded: 28.75 GiB less a GPU against 357.01 MiB over" in (
        c.fit_advice
    )


def test_a_lora_run_over_on_frozen_weights_is_pointed_to_qlora():
    """A trial found Llama-3.1-70B LoRA at 2K on one H100 told that only sharding settings fit
    it, while base_dtype nf4 fits (43.82 GiB, 1.44 s). Under LoRA with its base in the compute
    dtype the advice offers the NF4 base, with the weights before and after and its step; not
    under ZeRO-3 or fp8-mixed (which refuse nf4), nor without LoRA."""
    kw = dict(hardware="H100", recompute="full", lora_rank=16)
    c = training_cost("llama-3.1-70b", 2048, **kw)
    q = training_cost("llama-3.1-70b", 2048, base_dtype="nf4", **kw)
    assert c.fits is False and c.states_fit is False and q.fits
    assert round(q.memory_per_gpu / 2**30, 2) == 44.31 and round(q.time.step_s, 2) == 1.44
    lever = next(x for x in c.levers if x.startswith("base_dtype nf4"))
    assert lever.startswith("base_dtype nf4 (QLoRA: weights 131.80 GiB -> 37.19 GiB a GPU, ")
    assert "enough to fit; its weights dequantized before each GEMM: step 1.27 s -> 1.44 s)" in (
        lever
    )
    assert "only the settings that shard them or shrink them (QLoRA's NF4 base)" in c.fit_advice
    for other in (dict(zero=3, dp=2), dict(precision="fp8-mixed"), dict(base_dtype="nf4")):
        said = training_cost("llama-3.1-70b", 2048, **{**kw, **other}).levers
        assert not any("nf4" in x for x in said)
    full = training_cost("llama-3.1-70b", 2048, hardware="H100", recompute="full")
    assert not any("nf4" in x for x in full.levers)


@pytest.mark.parametrize(
    ("batch", "offered"), [(12, "(8 or 16)"), (3, "(8)"), (1001, "(1,000 or 1,008)")]
)
def test_a_global_batch_that_does_not_split_is_offered_the_multiples(batch, offered):
    with pytest.raises(MlacalcError) as e:
        training_cost("llama-3-8b", 1024, dp=8, global_batch=batch)
    text = str(e.value)
    assert text.startswith("global_batch: ") and "\n" not in text
    assert text.endswith(f"use a multiple of 8 {offered}")


def test_advice_over_on_states_alone_lists_no_activation_saving():
    """DeepSeek-V3 LoRA rank 16 at 4K on one H200: the weights and states alone are over, and
    the advice said 'no activation saving fits it', then listed recomputing SwiGLU and the
    norms, FP8 inputs and full recompute. Now it lists only what lowers the weights or states;
    the levers themselves (JSON) keep every setting."""
    c = training_cost("deepseek-v3", 4096, lora_rank=16, hardware="H200")
    assert c.states_fit is False and "no activation saving fits it" in c.fit_advice
    for text in ("full recompute", "recomputing SwiGLU", "FP8", "micro-batch", "context"):
        assert text not in c.fit_advice
    assert "modelled: more pipeline/tensor/expert-parallel ranks, base_dtype nf4" in c.fit_advice
    assert "full recompute" in c.levers and c.unmodelled_savings["both"] > 0


def test_data_parallel_traffic_is_priced_on_the_stage_training_the_most_parameters():
    """The data-parallel traffic and the optimizer step are the stage's that trains the most
    parameters, not the memory-busiest stage's, which ZeRO moves: DeepSeek-V2-Lite at PP 4
    read ZeRO-2 (10x ZeRO-1's traffic) 0.6926 s against ZeRO-1's 0.6989 s, the two stages
    pricing different parameters (a review)."""
    kw = dict(seq_len=4096, hardware="H100-SXM", tp=2, pp=4, dp=1, ep=1, micro_batch=2,
              global_batch=32, recompute="none", overlap=True)  # fmt: skip
    one, two = (training_cost("deepseek-v2-lite", zero=z, **kw) for z in (1, 2))
    assert two.time.step_s >= one.time.step_s
