"""Context parallelism in training (``cp``): the sequence split over ``cp`` ranks, activations a
GPU over ``cp``, the ring's K/V bytes by hand (GQA, MLA expanded and absorbed), GPUs
``tp x cp x pp x dp``, the data-parallel reduction and ZeRO over ``dp x cp`` ranks, the lever,
and one-line refusals naming the field (mutation suite)."""

from __future__ import annotations

import math

import pytest

import mlacalc
from mlacalc.hardware.catalogue import load_hardware
from mlacalc.training.cost import training_cost
from mlacalc.training.step import _comm, expert_dp, make_layout, ring_bytes
from mlacalc.words.errors import MlacalcError


def test_activations_a_gpu_are_the_sequence_over_cp():
    """Every tensor a flash layer saves is linear in its tokens: a context-parallel rank keeps
    1 / cp of them, the whole model's count (one micro-batch) unchanged."""
    one = training_cost("llama-3-8b", 8192)
    four = training_cost("llama-3-8b", 8192, cp=4)
    assert four.activation_bytes == one.activation_bytes  # the micro-batch's, one GPU holding it
    assert one.activation_bytes_per_gpu == one.activation_bytes  # tp = pp = cp = 1
    assert four.activation_bytes_per_gpu == math.ceil(one.activation_bytes / 4)
    tp2 = training_cost("llama-3-8b", 8192, tp=2, pp=2, cp=2, recompute="full")
    ref = training_cost("llama-3-8b", 8192, tp=2, pp=2, recompute="full")
    assert abs(tp2.activation_bytes_per_gpu - ref.activation_bytes_per_gpu / 2) <= 1


def test_ring_bytes_by_hand():
    """One ring step, one layer: the rank's T / cp tokens of K and V as its tensor-parallel
    rank holds them. Llama-3-8B (8 K/V heads of 128), 8K, cp 4, tp 2: 2,048 tokens x 4 heads
    x (128 + 128) x 2 B. DeepSeek-V3 at 4K, cp 2: expanded, 2,048 x 128 heads x (128 + 64 +
    128) x 2 B; absorbed, the latent and RoPE key, 2,048 x (512 + 64) x 2 B."""
    llama = mlacalc.load_model("llama-3-8b")
    lay = make_layout(llama, tp=2, cp=4, seq_len=8192)
    assert ring_bytes(llama, lay, 8192, "expanded") == 2048 * 4 * 256 * 2
    v3 = mlacalc.load_model("deepseek-v3")
    lay = make_layout(v3, cp=2, seq_len=4096)
    assert ring_bytes(v3, lay, 4096, "expanded") == 2048 * 128 * 320 * 2
    assert ring_bytes(v3, lay, 4096, "absorbed") == 2048 * 576 * 2
    # tp beyond the K/V heads: one whole head a rank
    assert ring_bytes(llama, make_layout(llama, tp=32, cp=2, seq_len=8192), 8192, "e") == (
        4096 * 1 * 256 * 2
    )


def test_the_ring_in_the_step():
    """The ring passes each layer's K and V cp - 1 times forward and K, V and their gradients
    cp - 1 times backward: 3 (cp - 1) p2p steps a layer of the stage; its exposed part is what
    outlasts the attention cores, inside the micro-batch as the other comm terms."""
    c = training_cost("llama-3-8b", 32768, hardware="H100", tp=8, cp=4)
    hw = load_hardware("H100")
    step = ring_bytes(mlacalc.load_model("llama-3-8b"), c.layout, 32768, "e")
    one = _comm("p2p", step, 2, hw, 32)
    assert c.time.cp_comm_s == pytest.approx(32 * 3 * 3 * one)
    t = c.time
    parts = t.forward_s + t.backward_s + t.recompute_s + t.tp_comm_s + t.pp_comm_s
    assert t.micro_batch_s == pytest.approx(parts + t.cp_exposed_s)
    assert t.cp_exposed_s == 0  # 8K tokens a rank: the attention blocks hide the ring
    assert training_cost("llama-3-8b", 32768, hardware="H100", tp=8).time.cp_comm_s == 0
    # 256 tokens a rank across nodes: the blocks are too short to hide it
    short = training_cost("llama-3-8b", 1024, hardware="H100", tp=8, cp=4).time
    assert 0 < short.cp_exposed_s < short.cp_comm_s


def test_gpus_and_the_data_parallel_group_fold_cp_in():
    """GPUs = tp x cp x pp x dp; ZeRO shards over dp x cp ranks (the context-parallel ranks
    hold the same weights) and the gradients are reduced over them, even at dp 1."""
    c = training_cost("llama-3-8b", 8192, hardware="H100", tp=2, cp=4, pp=2, dp=2)
    assert c.layout.gpus == 32 and c.layout.to_dict()["cp"] == 4
    one = training_cost("llama-3-8b", 8192, hardware="H100", cp=2)
    ref = training_cost("llama-3-8b", 8192, hardware="H100")
    assert one.states_per_gpu["master_weights"] == math.ceil(
        ref.states_per_gpu["master_weights"] / 2
    )
    assert one.time.dp_comm_s > 0 == ref.time.dp_comm_s
    moe = make_layout(mlacalc.load_model("qwen3-30b-a3b"), tp=2, dp=4, ep=8, cp=2, seq_len=4096)
    assert expert_dp(moe) == 2


def test_the_lever_names_a_cp_that_fits():
    """Llama-3.1-405B at 128K, TP8 PP16 DP4: the activations do not fit; the lever names the
    smallest power-of-two cp that does, and that layout fits."""
    kw = dict(hardware="H100", tp=8, pp=16, dp=4, global_batch=16)
    c = training_cost("llama-3.1-405b", 131072, **kw)
    assert c.fits is False
    (lever,) = [x for x in c.levers if x.startswith("more context-parallel ranks")]
    cp = int(lever.split("(cp ")[1].split(":")[0])
    assert "enough to fit" in lever and cp > 1
    assert training_cost("llama-3.1-405b", 131072, cp=cp, **kw).fits is True
    assert training_cost("llama-3.1-405b", 131072, cp=cp // 2, **kw).fits is False
    # where the weights and states alone do not fit, splitting the sequence is no lever
    small = training_cost("llama-3-8b", 8192, hardware="H100", recompute="full")
    assert small.fits is False and not any("context" in x for x in small.levers)


BAD = [
    ({"cp": 0}, "cp"),
    ({"cp": -2}, "cp"),
    ({"cp": 2.5}, "cp"),
    ({"cp": "4"}, "cp"),
    ({"cp": True}, "cp"),
    ({"cp": 3}, "cp"),  # 6 chunks do not divide 1,024 tokens
    ({"cp": 1024}, "cp"),  # 2,048 chunks of 1,024 tokens
]


@pytest.mark.parametrize(("kwargs", "field"), BAD)
def test_cp_mutations_name_the_field(kwargs, field):
    with pytest.raises(MlacalcError) as err:
        training_cost("llama-3-8b", **{"seq_len": 1024, **kwargs})
    text = str(err.value)
    assert text.startswith(f"{field}: ") and "\n" not in text


def test_cp_refuses_the_materialized_absorbed_path():
    with pytest.raises(MlacalcError, match=r"^cp: .*materialized"):
        training_cost("deepseek-v2-lite", 4096, impl="absorbed", cp=2)


@pytest.mark.parametrize(("argv", "fragment"), [(["--cp", "3"], "--cp"), (["--cp", "0"], "--cp")])
def test_cli_cp_errors_are_one_line(run, argv, fragment):
    out, err = run("train", "llama-3-8b", "-s", "1k", *argv, code=2)
    assert fragment in err and err.count("\n") == 1 and not out


def test_cli_cp_shows_the_ring(run):
    out, _ = run("train", "llama-3-8b", "-s", "32k", "--hw", "H100", "--tp", "8", "--cp", "4")
    assert "cp 4" in out and "context-parallel ring (exposed)" in out
    assert "Step on 32 x H100" in out
    plain, _ = run("train", "llama-3-8b", "-s", "32k", "--hw", "H100", "--tp", "8")
    assert "context-parallel" not in plain


def test_the_help_example_is_the_documented_layout(run):
    """train --help's 128K example gave --global-batch 16 (MFU 12.4%) where docs/training.md
    runs Meta's long-context layout at 64 (16 sequences a data-parallel rank, from recall;
    MFU 30.8%), and a lone backslash in the docstring ran its two lines together. Every
    example in the help is one command a line (continuations marked), and the 128K one is the
    documented one."""
    from pathlib import Path

    out, _ = run("train", "--help")
    lines = out.split("Examples:")[1].split("Options:")[0].strip().splitlines()
    examples, now = [], ""
    for line in lines:
        now += " " + line.strip()
        if not now.endswith("\\"):
            examples.append(" ".join(now.replace("\\", " ").split()))
            now = ""
    assert all(e.startswith("mlacalc train ") and e.count("mlacalc") == 1 for e in examples)
    (long,) = [e for e in examples if "-s 128k" in e]
    docs = (Path(__file__).resolve().parent.parent / "docs" / "training.md").read_text()
    assert f"$ {long}\n" in docs and long.endswith("--global-batch 64")


def test_the_ep_help_says_the_ranks_the_check_counts(run):
    """--ep's help said "divide --dp x --tp" while the check lays the experts over dp x cp x
    tp (--ep 8 --cp 8 --dp 1 is taken): the help names the three, and the check agrees."""
    out, _ = run("train", "--help")
    assert "the --dp x --cp x --tp ranks" in " ".join(out.split())
    c = training_cost("deepseek-v3", 4096, ep=8, cp=8)
    assert (c.layout.ep, c.layout.cp, c.layout.dp) == (8, 8, 1)
    with pytest.raises(
        MlacalcError, match=r"^ep: 16 expert-parallel ranks must divide .* \(1 x 8 x 1\)"
    ):
        training_cost("deepseek-v3", 4096, ep=16, cp=8)
