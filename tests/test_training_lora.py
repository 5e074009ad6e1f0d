"""LoRA fine-tuning in training (``lora_rank``, ``lora_targets``): the adapter parameters by
hand and against the Hugging Face modules they adapt, gradients and optimizer states for the
adapters only, frozen weights in the compute dtype, the backward without the frozen weights'
weight-gradient GEMMs, and one-line refusals naming the field (mutation suite)."""

from __future__ import annotations

import math

import pytest

import mlacalc
from mlacalc.training.cost import training_cost
from mlacalc.training.flops import training_flops
from mlacalc.training.lora import lora_params, max_rank
from mlacalc.words.errors import MlacalcError


def test_adapter_parameters_by_hand():
    """Llama-3-8B, rank 16: a layer's q (4,096 -> 4,096), k and v (4,096 -> 1,024), o, gate and
    up (4,096 -> 14,336) and down; 16 (d_in + d_out) each, 32 layers: 41,943,040 (PEFT's
    figure for all-linear at r 16, from recall). Attention only: 13,631,488."""
    m = mlacalc.load_model("llama-3-8b")
    attn = 16 * ((4096 + 4096) * 2 + (4096 + 1024) * 2)
    mlp = 16 * (4096 + 14336) * 3
    assert lora_params(m, 16) == 32 * (attn + mlp) == 41_943_040
    assert lora_params(m, 16, "attention") == 32 * attn == 13_631_488
    c = training_cost(m, 1024, lora_rank=16)
    assert c.trainable_params == 41_943_040 == c.trainable_params_per_gpu


def test_mla_adapters_by_hand():
    """DeepSeek-V3, rank 8: q_a (7,168 -> 1,536), q_b (1,536 -> 128 x 192), kv_a (7,168 ->
    576), kv_b (512 -> 128 x 256), o (16,384 -> 7,168); 3 dense layers' MLP (18,432 wide), 58
    MoE layers' shared expert (2,048 wide); the routed experts and the router not adapted."""
    m = mlacalc.load_model("deepseek-v3")
    attn = 8 * ((7168 + 1536) + (1536 + 24576) + (7168 + 576) + (512 + 32768) + (16384 + 7168))
    dense = 8 * 3 * (7168 + 18432)
    shared = 8 * 3 * (7168 + 2048)
    assert lora_params(m, 8) == 61 * attn + 3 * dense + 58 * shared


@pytest.mark.parametrize(
    ("name", "layers"),
    [("llama-3.1-8b", 2), ("deepseek-v3", 4), ("qwen3-30b-a3b", 2)],
)
def test_adapters_match_the_hugging_face_modules(name, layers):
    """The model built by transformers on the meta device: an adapter of r (in + out) on each
    linear module PEFT's all-linear would adapt (the routed experts, the router and the head
    excepted) sums to lora_params. (DeepSeek-V2-Lite is left out: transformers 5 builds it a
    q_a_proj, its config's q_lora_rank null read as the class default.)"""
    pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    from hf_reference import build

    model = build(name, layers)
    want = (
        "q_proj", "k_proj", "v_proj", "o_proj", "q_a_proj", "q_b_proj", "kv_a_proj_with_mqa",
        "kv_b_proj", "gate_proj", "up_proj", "down_proj",
    )  # fmt: skip
    got = sum(
        8 * (mod.in_features + mod.out_features)
        for path, mod in model.named_modules()
        if isinstance(mod, torch.nn.Linear)
        and path.rsplit(".", 1)[-1] in want
        and ".experts." not in path
    )
    m = mlacalc.load_model(name).with_changes(num_hidden_layers=layers)
    assert lora_params(m, 8) == got > 0


def test_states_train_only_the_adapters():
    """bf16-mixed AdamW: the frozen weights at 2 bytes; gradients 4, master 4 and moments 8
    bytes an adapter parameter; nothing for the frozen ones."""
    c = training_cost("llama-3-8b", 1024, lora_rank=16)
    full = training_cost("llama-3-8b", 1024)
    n = 41_943_040
    assert c.states_per_gpu["weights"] == full.states_per_gpu["weights"] + 2 * n
    assert c.states_per_gpu["gradients"] == 4 * n
    assert c.states_per_gpu["master_weights"] == 4 * n
    assert c.states_per_gpu["optimizer_states"] == 8 * n


def test_the_backward_skips_the_frozen_weight_gradients():
    """Each frozen GEMM's backward is its input gradient alone (its forward's FLOPs once, not
    twice); the attention core's is unchanged; the adapters add 2 T r (d_in + d_out) forward
    and twice that backward."""
    t = 1024
    full = training_flops("llama-3-8b", t)
    frozen = training_flops("llama-3-8b", t, frozen=True)
    for stage in ("attention_projections", "ffn", "head"):
        assert frozen.backward[stage] == full.forward[stage] == full.backward[stage] // 2
    assert frozen.backward["attention_core"] == full.backward["attention_core"]
    c = training_cost("llama-3-8b", t, lora_rank=16)
    adapters = 2 * t * 41_943_040
    assert sum(c.flops.forward.values()) == sum(full.forward.values()) + adapters
    assert sum(c.flops.backward.values()) == sum(frozen.backward.values()) + 2 * adapters


def test_adapter_activations_and_the_step():
    """Each adapted matrix saves x A (r a token) beyond its input; the step's backward and
    optimizer pass shrink."""
    c = training_cost("llama-3-8b", 1024, lora_rank=16, hardware="H100")
    full = training_cost("llama-3-8b", 1024, hardware="H100")
    assert c.activation_bytes - full.activation_bytes == 32 * 7 * 1024 * 16 * 2
    assert c.time.backward_s < full.time.backward_s
    assert c.time.optimizer_s < full.time.optimizer_s / 10


BAD = [
    ({"lora_rank": 0}, "lora_rank"),
    ({"lora_rank": -4}, "lora_rank"),
    ({"lora_rank": 2.5}, "lora_rank"),
    ({"lora_rank": "8"}, "lora_rank"),
    ({"lora_rank": True}, "lora_rank"),
    ({"lora_rank": 8, "lora_targets": "mlp"}, "lora_targets"),
    ({"lora_rank": 8, "lora_targets": 3}, "lora_targets"),
]  # lora_targets None is the default now (attention-mlp; given without a rank, a warning)


@pytest.mark.parametrize(("kwargs", "field"), BAD)
def test_lora_mutations_name_the_field(kwargs, field):
    with pytest.raises(MlacalcError) as err:
        training_cost("llama-3-8b", **{"seq_len": 1024, **kwargs})
    text = str(err.value)
    assert text.startswith(f"{field}: ") and "\n" not in text


def test_lora_rank_is_bounded_by_the_narrowest_adapted_matrix():
    """A trial found rank 5,000 on Llama-3.1-8B taken with 13.11 G trainable against an
    8.03 G model: a rank past a matrix's narrower side adds parameters and no capacity. The
    bound is the narrowest targeted matrix's narrower side (k_proj's 1,024 on Llama-3.1-8B and
    -70B; DeepSeek-V3's 512-wide latent kv_b_proj input), the rank at it taken, one past it
    refused in one line naming lora_rank and the largest that works; a huge rank says its
    figure as an integer (it said 1e+05 against a generic 2^16 bound)."""
    for model, top in (("llama-3.1-8b", 1024), ("llama-3.1-70b", 1024), ("deepseek-v3", 512)):
        m = mlacalc.load_model(model)
        assert max_rank(m) == top == max_rank(m, "attention")
        assert training_cost(m, 128, lora_rank=top).lora_rank == top
        for rank in (top + 1, 100_000):
            with pytest.raises(MlacalcError) as err:
                training_cost(m, 128, lora_rank=rank)
            text = str(err.value)
            assert text.startswith("lora_rank: ") and "\n" not in text
            assert f"{rank:,} is above {top:,}, the largest rank" in text and "e+" not in text
    # a rank at the bound counts fewer trainable parameters than the model holds
    c = training_cost("llama-3.1-8b", 128, lora_rank=1024)
    assert c.trainable_params == 1024 * 32 * 81_920 < 8.03e9


def test_parameters_per_gpu_count_the_adapters(run):
    """A trial found "parameters per GPU" without the adapters while the weights held them
    (rank 5,000 on Llama-3.1-8B: 8.03 G a GPU, 42.27 GB of weights = (8.03 + 13.11) G x 2 B).
    params_per_gpu is every parameter the weights count, base_params_per_gpu the model's own,
    in the CLI's note, the JSON and the app (tests/test_app_convert_training.py)."""
    base = training_cost("llama-3.1-8b", 1024)
    c = training_cost("llama-3.1-8b", 1024, lora_rank=1024)
    assert c.base_params_per_gpu == base.params_per_gpu == base.base_params_per_gpu
    assert c.params_per_gpu == c.base_params_per_gpu + c.trainable_params_per_gpu
    assert (
        c.states_per_gpu["weights"] == 2 * c.params_per_gpu == 2 * (8_030_261_248 + 2_684_354_560)
    )
    d = c.to_dict()
    assert (d["params_per_gpu"], d["base_params_per_gpu"]) == (10_714_615_808, 8_030_261_248)
    out, _ = run("train", "llama-3.1-8b", "-s", "1k", "--lora-rank", "1024")
    flat = " ".join(out.split())
    assert (
        "10.71 G parameters per GPU (LoRA rank 1024 on attention-mlp: 8.03 G of the model's" in flat
    )
    assert "and 2.68 G of adapters, trainable" in flat


def test_cli_lora_rank_error_names_the_flag(run):
    """The library's "use lora_rank 1 .. 1,024" reads "use --lora-rank 1 .. 1,024" in the CLI
    (review5); fields with no option (k_proj) stay as they are."""
    with pytest.raises(MlacalcError, match=r"use lora_rank 1 \.\. 1,024$"):
        training_cost("llama-3.1-8b", 1024, lora_rank=99999)
    out, err = run("train", "llama-3.1-8b", "-s", "1k", "--lora-rank", "99999", code=2)
    assert err.rstrip().endswith("use --lora-rank 1 .. 1,024") and "lora_rank" not in err
    assert "k_proj is 4,096 x 1,024" in err and not out


def test_lora_refuses_layouts_it_does_not_count():
    with pytest.raises(MlacalcError, match=r"^lora_rank: .*gpt2 layout is not built"):
        training_cost("gpt2", 512, lora_rank=8)


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [(["--lora-rank", "0"], "--lora-rank"), (["--lora-targets", "mlp"], "--lora-targets")],
)
def test_cli_lora_errors_are_one_line(run, argv, fragment):
    out, err = run("train", "llama-3-8b", "-s", "1k", *argv, code=2)
    assert fragment in err and err.count("\n") == 1 and not out


def test_cli_lora_says_what_trains(run):
    out, _ = run("train", "llama-3-8b", "-s", "1k", "--lora-rank", "16")
    flat = " ".join(out.split())
    assert "LoRA rank 16 on attention-mlp" in flat
    assert "41,943,040 adapter parameters in the model" in flat


def test_lora_mfu_by_hand():
    """MFU under LoRA counts the LoRA step's model FLOPs, by hand for Llama-3-8B at 4K, rank
    16: the GEMMs' forward 2 T N (N: 32 layers of q, k, v, o, gate, up, down and the head),
    their input gradients 2 T N again and no weight gradients; the causal attention core's
    forward 4 d_h n_h T (T + 1) / 2 a layer and its backward twice that; the adapters' 2 T P
    forward and 4 T P backward (P = 41,943,040). Full training's 6 T N would read 1.43x as
    high for the same step."""
    t, d, f, v = 4096, 4096, 14336, 128256
    n = 32 * (d * (d + 1024 + 1024) + d * d + 3 * d * f) + d * v
    core = 32 * 4 * 128 * 32 * t * (t + 1) // 2
    adapters = 41_943_040
    flops = 2 * t * n + 2 * t * n + 3 * core + 6 * t * adapters
    c = training_cost("llama-3-8b", t, lora_rank=16, hardware="H100")
    assert c.model_flops == flops
    assert round(c.flops_per_token / 1e9, 2) == 33.49
    peak = 989.4e12  # H100 SXM's dense bf16 peak
    assert c.peak_flops_per_s == pytest.approx(peak, rel=1e-3)
    assert c.mfu == pytest.approx(flops / (c.time.step_s * peak), rel=1e-3)
    full = training_cost("llama-3-8b", t, hardware="H100")
    assert full.model_flops == 6 * t * n + 3 * core
    assert full.model_flops / c.model_flops == pytest.approx(1.44, abs=0.01)


def test_one_gpu_deepseek_v3_lora_is_flagged(run):
    """DeepSeek-V3 with LoRA on one H200 at 8K read 'MFU 69.4%' as a result: its 671 G frozen
    weights (1.22 TiB in bf16) are 9.8 times the GPU's 126.90 GiB usable. The figures stay (its
    kernels timed as if they fitted) but the layout is flagged: the weights and states alone
    are over, only sharding them fits, and the step's note says the MFU is as if it fitted."""
    c = training_cost("deepseek-v3", 8192, lora_rank=16, hardware="H200")
    assert c.params_per_gpu > 671e9 and c.fits is False and c.states_fit is False
    assert c.states_per_gpu["weights"] >= 2 * 671e9 > 9.8 * c.usable_memory_bytes
    assert "alone are 1.22 TiB" in c.fit_advice and "only the settings that shard" in c.fit_advice
    assert c.to_dict()["states_fit"] is False
    out, _ = run("train", "deepseek-v3", "-s", "8k", "--hw", "H200", "--lora-rank", "16")
    flat = " ".join(out.split())
    assert "DOES NOT FIT" in flat and "of the dense bf16 peak; the layout DOES NOT FIT" in flat
    assert "the LoRA step's model FLOPs" in flat and "no weight gradients for the frozen" in flat
    assert "LoRA: backward = the frozen weights' input-gradient GEMMs alone" in flat
    fits = training_cost("llama-3-8b", 4096, lora_rank=16, hardware="H200")
    assert fits.fits and fits.states_fit and fits.fit_advice is None


def test_qlora_weights_by_hand():
    """QLoRA (base_dtype nf4), Llama-3-8B, rank 16, one GPU: the 32 layers' linear weights
    (q 4,096 x 4,096, k and v 4,096 x 1,024, o, gate, up and down 4,096 x 14,336: 218,103,808
    a layer) at 4 bits, one 8-bit scale a block of 64 and one fp32 constant a block of 256
    scales (4.127 bits, 0.5159 bytes); the embedding, head, norms and the adapters in bf16.
    Gradients and optimizer states as LoRA's; the FLOPs unchanged."""
    from mlacalc.training.lora import NF4_BYTES_PER_PARAM

    assert NF4_BYTES_PER_PARAM == (4 + 8 / 64 + 32 / (64 * 256)) / 8 == 0.515869140625
    q = 32 * (4096 * 4096 * 2 + 4096 * 1024 * 2 + 3 * 4096 * 14336)
    c = training_cost("llama-3-8b", 4096, lora_rank=16, base_dtype="nf4")
    lora = training_cost("llama-3-8b", 4096, lora_rank=16)
    assert c.nf4_params_per_gpu == q == 6_979_321_856 and lora.nf4_params_per_gpu == 0
    want = q * 0.515869140625 + (c.base_params_per_gpu - q) * 2 + 41_943_040 * 2
    assert c.states_per_gpu["weights"] == pytest.approx(want, abs=1)
    assert c.states_per_gpu["weights"] / 2**30 == pytest.approx(5.39, abs=0.01)  # 15.04 in bf16
    for k in ("gradients", "master_weights", "optimizer_states"):
        assert c.states_per_gpu[k] == lora.states_per_gpu[k]
    assert c.flops == lora.flops and c.activations == lora.activations
    assert c.to_dict()["base_dtype"] == "nf4"


def test_qlora_dequantizes_each_pass():
    """Each pass that reads the NF4 weights dequantizes them first: an element-wise kernel
    reading 0.5159 B and writing 2 B a weight, in the forward and in the backward (the input
    gradients read the weights again), and again under full recompute; nothing else moves."""
    from mlacalc.training.step import _dequantize

    k = _dequantize(1000, "bf16")
    assert (k.kind, k.bytes) == ("elementwise", math.ceil(1000 * (0.515869140625 + 2)))
    assert _dequantize(1000, "fp32").bytes == math.ceil(1000 * (0.515869140625 + 4))
    kw = dict(lora_rank=16, hardware="H100", recompute="full")
    c = training_cost("llama-3-8b", 4096, base_dtype="nf4", **kw)
    lora = training_cost("llama-3-8b", 4096, **kw)
    one = c.time.forward_s - lora.time.forward_s
    assert one > 0
    assert c.time.backward_s - lora.time.backward_s == pytest.approx(one, rel=1e-6)
    assert c.time.recompute_s - lora.time.recompute_s == pytest.approx(one, rel=1e-6)
    # about a read of 0.5159 B and a write of 2 B a weight at the H100's bandwidth
    assert 6.98e9 * 2.516 / 3.35e12 < one < 3 * 6.98e9 * 2.516 / 3.35e12
    none = training_cost("llama-3-8b", 4096, lora_rank=16, hardware="H100", base_dtype="nf4")
    plain = training_cost("llama-3-8b", 4096, lora_rank=16, hardware="H100")
    assert none.time.recompute_s == plain.time.recompute_s


QLORA_BAD = [
    ({"base_dtype": "nf4"}, "base_dtype", "give lora_rank"),
    ({"base_dtype": "nf5", "lora_rank": 8}, "base_dtype", "nf4"),
    ({"base_dtype": "NF4", "lora_rank": 8}, "base_dtype", "nf4"),
    ({"base_dtype": 4, "lora_rank": 8}, "base_dtype", "nf4"),
    ({"base_dtype": None, "lora_rank": 8}, "base_dtype", "nf4"),
    ({"base_dtype": "nf4", "lora_rank": 8, "precision": "fp8-mixed"}, "base_dtype", "bf16-mixed"),
    ({"base_dtype": "nf4", "lora_rank": 8, "dp": 2, "zero": 3}, "base_dtype", "zero 0, 1 or 2"),
]


@pytest.mark.parametrize(("kwargs", "field", "fix"), QLORA_BAD)
def test_qlora_mutations_name_the_field(kwargs, field, fix):
    with pytest.raises(MlacalcError) as err:
        training_cost("llama-3-8b", **{"seq_len": 1024, **kwargs})
    text = str(err.value)
    assert text.startswith(f"{field}: ") and "\n" not in text and fix in text


def test_cli_qlora(run):
    out, err = run("train", "llama-3-8b", "-s", "1k", "--base-dtype", "nf4", code=2)
    # the CLI names the flag where the library names the field (review5)
    assert "--base-dtype" in err and "give --lora-rank" in err and err.count("\n") == 1
    assert "lora_rank" not in err and "or --base-dtype 'compute'" in err
    assert not out
    out, _ = run("train", "llama-3-8b", "-s", "1k", "--lora-rank", "16", "--base-dtype", "nf4")
    flat = " ".join(out.split())
    assert "weights (6.98 G in NF4 at 4.127 bits, scales in; the rest in the compute dtype)" in (
        flat
    )
    assert "of the model's, frozen in NF4 where a linear layer's (QLoRA)" in flat


def test_qlora_that_does_not_fit_offers_no_zero3():
    """QLoRA at dp 2 (ZeRO-1) that does not fit: the ZeRO-3 lever was run again with the NF4
    base and refused ('nf4' under ZeRO-3 is not built), so the plan was an error; it is left
    out of the levers and the plan said."""
    kw = {"hardware": "H100", "lora_rank": 16, "dp": 2, "global_batch": 2}
    c = training_cost("llama-3.1-70b", 16384, base_dtype="nf4", **kw)
    assert c.fits is False and c.zero == 1
    assert not any("ZeRO-3" in x for x in c.levers)
    plain = training_cost("llama-3.1-70b", 16384, **kw)  # the compute-dtype base keeps it
    assert any(x.startswith("ZeRO-3") for x in plain.levers)


def test_cli_qlora_over_memory_prints_the_plan(run):
    out, _ = run(
        "train", "llama-3.1-70b", "-s", "16k", "--hw", "H100", "--lora-rank", "16",
        "--base-dtype", "nf4", "--dp", "2", "--global-batch", "2",
    )  # fmt: skip
    assert "DOES NOT FIT" in " ".join(out.split()) and "ZeRO-3" not in out
