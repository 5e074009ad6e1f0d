"""The engine command lines of a planned deployment (mlacalc.serving.launch) and the engine
options of ``mlacalc plan`` and ``mlacalc search``."""

from __future__ import annotations

import json

import pytest

from mlacalc.cost.engine import as_model
from mlacalc.hardware.catalogue import load_hardware
from mlacalc.serving.gpu_step import StepModel
from mlacalc.serving.launch import Deployment, deployments, launch_commands
from mlacalc.serving.layout import make_layout
from mlacalc.words.dtypes import resolve_kv_layout
from mlacalc.words.errors import InvalidArgumentError

SPLIT = {  # a search point: 8 decode GPUs (TP2 DP-attention4 EP8) + 8 prefill (TP1 DPA8 EP8)
    "mode": "disaggregated",
    "gpus": 16,
    "decode_gpus": 8,
    "tp": 2,
    "dp": 4,
    "pp": 1,
    "ep": 8,
    "dp_attention": True,
    "redundant_experts": 0,
    "overlap": "tbo",
    "kv_dtype": "fp8",
    "batch_per_group": 167,
    "prefill_gpus": 8,
    "prefill_tp": 1,
    "prefill_ep": 8,
    "prefill_dp_attention": True,
    "prefill_redundant_experts": 0,
}


def _commands(engine, point=SPLIT, **settings):
    pools = deployments(point, 8, 0.1, 8, **settings)
    return dict(launch_commands(engine, "deepseek-ai/DeepSeek-V3", pools))


def test_sglang_counts_the_instance_under_dp_attention():
    c = _commands("sglang", mtp_tokens=1)
    decode, prefill = c["decode pool"], c["prefill pool"]
    for flag in ("--tp 8", "--dp 4", "--enable-dp-attention", "--ep-size 8",
                 "--kv-cache-dtype fp8_e4m3", "--enable-two-batch-overlap",
                 "--max-running-requests 668", "--disaggregation-mode decode",
                 "--speculative-num-steps 1", "--speculative-num-draft-tokens 2"):  # fmt: skip
        assert flag in decode, flag
    assert "--dp 8" in prefill and "--disaggregation-mode prefill" in prefill
    assert "speculative" not in prefill  # the prefill pool drafts nothing
    assert "sglang_router" in c["router"]


def test_vllm_and_trtllm_options():
    v = _commands("vllm", max_tokens=8192)["decode pool"]
    for flag in ("--tensor-parallel-size 2", "--data-parallel-size 4",
                 "--enable-expert-parallel", "--kv-cache-dtype fp8", "--max-num-seqs 167",
                 "--max-num-batched-tokens 8192", "--enable-dbo", "NixlConnector"):  # fmt: skip
        assert flag in v, flag
    # vLLM's key for the largest CUDA-graph batch (from recall; was "max_capture_size")
    graphs = _commands("vllm", cuda_graph_max_batch=128)["decode pool"]
    assert """--compilation-config '{"max_cudagraph_capture_size": 128}'""" in graphs
    t = _commands("trtllm", cuda_graph_max_batch=128)["decode pool"]
    assert "enable_attention_dp: true" in t and "max_batch_size: 128" in t
    for flag in ("--tp_size 8", "--ep_size 8", "--max_batch_size 167",
                 "--extra_llm_api_options extra-decode.yml"):  # fmt: skip
        assert flag in t, flag


def test_a_pool_over_several_nodes_and_an_aggregated_one():
    wide = dict(SPLIT, mode="aggregated", decode_gpus=16, tp=1, dp=16, ep=16)
    c = launch_commands("sglang", "m", deployments(wide, 8, 0.1, 8))
    ((what, cmd),) = c
    assert what == "server (run on each of its 2 nodes)"
    assert "--nnodes 2" in cmd and "--node-rank $NODE_RANK" in cmd
    assert "disaggregation" not in cmd
    with pytest.raises(InvalidArgumentError):
        launch_commands("tgi", "m", [Deployment(1, 1, 1, 1, 1, False, 0, "none", "bf16", 8)])


def test_plan_engine_defaults_and_launch(run):
    out, _ = run("plan", "llama-3-8b", "-H", "H100-SXM", "--gpus", 1, "--isl", 1000,
                 "--osl", 200, "--max-running", 64, "--launch", "vllm")  # fmt: skip
    assert "(the engine's max running)" in out
    assert (
        "vllm serve '<checkpoint of llama-3-8b>' --tensor-parallel-size 1" in out
        and "--max-num-seqs 64" in out
    )
    out, _ = run("plan", "llama-3-8b", "-H", "H100-SXM", "--gpus", 1, "--isl", 1000,
                 "--osl", 200, "--engine-defaults", "vllm", "--format", "json")  # fmt: skip
    doc = json.loads(out)
    assert doc["admission"] == "kv capacity" and doc["max_batch"] < 1024  # memory binds
    out, _ = run("plan", "deepseek-v3", "-H", "H200", "--gpus", 8, "--tp", 1, "--ep", 8,
                 "--dp-attention", "--isl", 2000, "--osl", 500, "--concurrency", 256,
                 "--routing", "balanced", "--mtp-tokens", 1,
                 "--format", "json")  # fmt: skip
    doc = json.loads(out)
    assert doc["tokens_per_step"] == pytest.approx(1.85)


def test_launch_commands_say_whose_figures_and_which_weights(run):
    """Launch commands of another engine than the one timed say so, and a chosen weight or
    component format says the checkpoint must be stored so (the commands quantize nothing); a
    checkpoint timed as stored and the engine timed say nothing."""
    args = ("plan", "deepseek-v3", "-H", "B200", "--gpus", 8, "--isl", 2000, "--osl", 500,
            "--concurrency", 64)  # fmt: skip
    out, _ = run(*args, "--engine", "sglang", "--weight-dtype", "fp4", "--expert-dtype",
                 "nvfp4", "--launch", "vllm")  # fmt: skip
    assert "# note: the figures are timed with sglang's kernels" in out
    assert "--engine vllm times vllm's" in out
    assert "# note: timed with weights fp4, experts nvfp4: --model-path must name" in out
    out, _ = run(*args, "--engine", "sglang", "--launch", "sglang")
    assert "# sglang: the commands" in out and "# note:" not in out
    out, _ = run("search", "deepseek-v3", "-H", "B200", "--gpus", 8, "--isl", 2000, "--osl",
                 500, "--launch", "sglang")  # fmt: skip
    assert "the figures are timed with trtllm's kernels (--engine, trtllm when not given)" in out
    assert "checkpoint stored so" not in out  # the checkpoint as stored


def test_search_budget_and_launch(run):
    out, _ = run("search", "llama-3-8b", "-H", "H100-SXM", "--gpus", 2, "--isl", 1000,
                 "--osl", 200, "--tpot", "30ms", "--launch", "sglang", "--max-running", 100,
                 "--model-path", "meta-llama/Llama-3.1-8B-Instruct")  # fmt: skip
    assert "Budget 2 GPUs:" in out and "replica(s)" in out
    assert "python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B-Instruct" in out
    out, _ = run("search", "llama-3-8b", "-H", "H100-SXM", "--gpus", 2, "--isl", 1000,
                 "--osl", 200, "--format", "json")  # fmt: skip
    assert json.loads(out)["budget"] == 2
    out, _ = run("search", "llama-3-8b", "-H", "H100-SXM", "--gpus", "1,2", "--isl", 1000,
                 "--osl", 200, "--format", "json")  # fmt: skip
    assert json.loads(out)["budget"] is None


def test_a_search_result_gives_its_launch_commands():
    from mlacalc.serving.search import search

    r = search("llama-3-8b", "H100-SXM", 2, isl=1000, osl=200, tpot=0.03)
    ((what, cmd),) = r.launch_commands("vllm", "meta-llama/Llama-3.1-8B-Instruct")
    assert what == "server" and cmd.startswith("vllm serve meta-llama/Llama-3.1-8B-Instruct")
    assert f"--max-num-seqs {r.best['batch_per_group']}" in cmd
    with pytest.raises(InvalidArgumentError):
        r.launch_commands("tgi")


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (("--component-choice", "experts"), "--component-choice"),
        (("--component-choice", "gate=fp4"), "component"),
        (("--engine-defaults", "tgi"), "--engine-defaults"),
        (("--launch", "tgi"), "--launch"),
        (("--max-running", 0), "--max-running"),
        (("--host-step-ms", -1), "--host-step-ms"),
    ],
)
def test_search_engine_flags_are_checked(run, args, flag):
    _, err = run("search", "llama-3-8b", "-H", "H100-SXM", "--gpus", 1, "--isl", 100, "--osl",
                 100, *args, code=2)  # fmt: skip
    assert flag in err and len(err.strip().splitlines()) <= 3, err


def test_trtllm_load_balancer_counts_every_experts_slot():
    """TensorRT-LLM's ``num_slots`` are every expert's slots, the replicas included (as
    recalled from its wide-EP examples: 288 for DeepSeek-V3's 256 and 32 redundant); it had
    been written as the 32 replicas alone (a new user's trial)."""
    point = {**SPLIT, "redundant_experts": 32, "prefill_redundant_experts": 32}
    c = _commands("trtllm", routed_experts=256)
    assert "num_slots" not in c["decode pool"]  # no replicas: no load balancer
    c = dict(launch_commands("trtllm", "x", deployments(point, 8, 0.1, 8, routed_experts=256)))
    assert "num_slots: 288" in c["decode pool"] and "num_slots: 288" in c["prefill pool"]
    with pytest.raises(InvalidArgumentError, match="routed_experts"):
        launch_commands("trtllm", "x", deployments(point, 8, 0.1, 8))


def test_plan_launch_writes_the_slots_of_the_models_experts(run):
    out, _ = run(
        "plan", "deepseek-v3", "-H", "H200", "--gpus", "16", "--dp-attention", "--ep", "16",
        "--redundant-experts", "32", "--isl", "1000", "--osl", "200", "--concurrency", "64",
        "--launch", "trtllm",
    )  # fmt: skip
    assert "num_slots: 288" in out


def test_ep_above_tp_is_dp_attention_as_timed_reported_and_launched(run):
    """``--tp 1 --dp 8 --ep 8`` without ``--dp-attention`` shares the experts over the 8
    attention groups, as DP-attention does: one layout, timed, reported and launched so, and
    said. Before (a new-user trial): the DP-attention run's figures, JSON dp_attention false,
    and SGLang's launch without --enable-dp-attention (8 one-GPU replicas of all the weights)."""
    import mlacalc

    kw = dict(seq_len=4096, batch=64, engine="sglang")
    implied = mlacalc.plan("deepseek-v3", "H200", 8, tp=1, dp=8, ep=8, **kw)
    asked = mlacalc.plan("deepseek-v3", "H200", 8, tp=1, ep=8, dp_attention=True, **kw)
    assert implied.dp_attention and implied.layout == asked.layout == "TP1 DP-attention8 EP8"
    assert implied.decode_step_s == asked.decode_step_s
    said = [w for w in implied.warnings if "which is DP-attention (--dp-attention)" in w]
    assert said and not any("which is DP-attention" in w for w in asked.warnings)
    args = ("plan", "deepseek-v3", "-H", "H200", "--gpus", 8, "--tp", 1, "--dp", 8, "--ep", 8,
            "--seq-len", 4096, "--batch", 64)  # fmt: skip
    out, _ = run(*args, "--launch", "sglang")
    assert "--tp 8 --dp 8 --enable-dp-attention" in out and "--ep-size 8" in out
    out, _ = run(*args, "--launch", "trtllm")
    assert "enable_attention_dp: true" in out and "--tp_size 8 --ep_size 8" in out
    # ep at most tp: independent replicas, as asked
    rep = mlacalc.plan("deepseek-v3", "H200", 16, tp=8, dp=2, ep=8, **kw)
    assert not rep.dp_attention and rep.layout == "TP8 DP2 EP8"


def test_sglang_dp_attention_runs_the_dense_ffn_and_lm_head_as_planned(run):
    """Under DP-attention of one GPU a group the plan holds the dense FFN whole on every GPU and
    the LM head split over the group's tp: SGLang's --moe-dense-tp-size 1 (the #6017 decode
    command, shared reference serving-figures.md section 3.1) and --enable-dp-lm-head (before:
    neither, so SGLang would split both over all --tp GPUs). Attention groups of 2 GPUs: no
    SGLang size matches the plan's split of the dense FFN, and a note says so."""
    c = _commands("sglang")
    decode, prefill = c["decode pool"], c["prefill pool"]
    assert "--enable-dp-attention --moe-dense-tp-size 1 --enable-dp-lm-head" in prefill  # TP1
    assert "--moe-dense-tp-size" not in decode and "--enable-dp-lm-head" in decode  # TP2
    plain = dict(SPLIT, mode="aggregated", tp=8, dp=1, dp_attention=False)
    ((_, cmd),) = launch_commands("sglang", "m", deployments(plain, 8, 0.1, 8))
    assert "--moe-dense-tp-size" not in cmd and "--enable-dp-lm-head" not in cmd
    args = ("plan", "deepseek-v3", "-H", "H200", "--gpus", 8, "--dp-attention", "--ep", 8,
            "--seq-len", 4096, "--batch", 64, "--launch", "sglang")  # fmt: skip
    out, _ = run(*args, "--tp", 1)
    assert "--moe-dense-tp-size 1" in out and "the dense FFN's bytes" not in out
    out, _ = run(*args, "--tp", 2)
    assert "--moe-dense-tp-size" not in out.split("# server")[-1]
    assert "splits the dense FFN over each attention group's 2 GPUs" in out


def test_vllm_runs_the_deepep_exchange_the_plan_times(run):
    """The plan times the experts' exchange as DeepEP's kernels (low-latency for decode, normal
    for prompts): vLLM's lines set its DeepEP backend (before: none, vLLM's default all-to-all,
    a new-user trial), the prefill pool's the high-throughput kernels; no EP, no backend; on an
    AMD part none, said."""
    c = _commands("vllm")
    assert c["decode pool"].startswith("VLLM_ALL2ALL_BACKEND=deepep_low_latency vllm serve ")
    assert c["prefill pool"].startswith("VLLM_ALL2ALL_BACKEND=deepep_high_throughput vllm serve")
    plain = dict(SPLIT, mode="aggregated", tp=8, dp=1, ep=1, dp_attention=False)
    ((_, cmd),) = launch_commands("vllm", "m", deployments(plain, 8, 0.1, 8))
    assert "ALL2ALL" not in cmd
    args = ("plan", "kimi-k2", "--gpus", 8, "--tp", 8, "--ep", 8, "--isl", 2000, "--osl", 500,
            "--concurrency", 16, "--launch", "vllm")  # fmt: skip
    out, _ = run(*args, "-H", "B200")
    assert "VLLM_ALL2ALL_BACKEND=deepep_low_latency vllm serve" in out
    out, _ = run(*args, "-H", "MI355X")
    assert "ALL2ALL" not in out.split("# server", 1)[1] and "left to vLLM's default" in out


def test_independent_replicas_are_separate_servers_where_the_engine_cannot_run_them(run):
    """TP8 DP2 EP8 (two replicas, each with its own experts) is timed as two replicas: vLLM's
    data-parallel ranks of a MoE model would share the experts over both (DP-attention), and
    TensorRT-LLM's server has no replicas, so each is launched as one server per replica
    (before: vLLM --data-parallel-size 2, TensorRT-LLM one TP8 server for 16 GPUs); SGLang's
    --dp runs replicas apart, and vLLM's data parallelism of a dense model too."""
    moe = dict(SPLIT, mode="aggregated", decode_gpus=16, tp=8, dp=2, dp_attention=False)
    for engine in ("vllm", "trtllm"):
        pools = deployments(moe, 8, 0.1, 8, routed_experts=256)
        ((what, cmd),) = launch_commands(engine, "m", pools)
        assert what.startswith("server (one per replica: run 2, each on its own 8 GPUs")
        assert "--data-parallel-size" not in cmd and "mpirun" not in cmd
        assert ("--tensor-parallel-size 8" if engine == "vllm" else "--tp_size 8") in cmd
    ((what, cmd),) = launch_commands("sglang", "m", deployments(moe, 8, 0.1, 8, routed_experts=256))
    assert "--tp 8 --dp 2" in cmd and "one per replica" not in what
    dense = launch_commands("vllm", "m", deployments(moe, 8, 0.1, 8))
    assert "--data-parallel-size 2" in dense[0][1]


def test_plan_launches_overlap_scheduling_as_it_timed_it(run):
    """Without --engine and --overlap-schedule the plan runs overlap scheduling on (its
    default); its launch lines did turn it off (SGLang --disable-overlap-schedule, TensorRT-LLM
    disable_overlap_scheduler: true); now they leave it on, and --no-overlap-schedule still
    turns it off."""
    args = ("plan", "deepseek-v3", "-H", "H200", "--gpus", 8, "--seq-len", 4096, "--batch", 64)
    out, _ = run(*args, "--launch", "sglang")
    assert "--disable-overlap-schedule" not in out
    out, _ = run(*args, "--launch", "trtllm")
    assert "disable_overlap_scheduler" not in out
    out, _ = run(*args, "--launch", "sglang", "--no-overlap-schedule")
    assert "--disable-overlap-schedule" in out


def test_a_plans_launch_admits_the_batch_it_ran(run):
    """A launch line sets the batch the plan ran, not the KV cache's largest: 100 in flight
    over two DP groups (of a cache holding far more) is 50 a group, TensorRT-LLM's
    max_batch_size and vLLM's --max-num-seqs per group, SGLang's --max-running-requests over
    both; --batch 24 is 12 a group. Before, TensorRT-LLM's line read max_batch_size 1500 a
    rank where a plan ran 128 (DeepSeek-V3.1 16 GPUs, 2,048 in flight)."""
    base = ("plan", "llama-3.1-8b", "-H", "H100-SXM", "--gpus", 2, "--tp", 1)
    mix = (*base, "--isl", 2000, "--osl", 500, "--concurrency", 100, "--launch")
    out = run(*mix, "trtllm")[0]
    assert "--max_batch_size 50 " in out and "max_batch_size: 50" in out
    assert "--max-num-seqs 50" in run(*mix, "vllm")[0]
    assert "--max-running-requests 100" in run(*mix, "sglang")[0]
    out = run(*base, "--batch", 24, "--seq-len", 2000, "--launch", "trtllm")[0]
    assert "--max_batch_size 12 " in out


def test_vllm_over_several_nodes_says_each_nodes_ranks_or_ray():
    """vLLM's pool over two 8-GPU nodes: data-parallel ranks get each node's count and first
    rank from $NODE_RANK, as SGLang's lines do (they were $LOCAL_DP and $START_RANK, named
    nowhere); a tensor-parallel group wider than a node runs on a Ray cluster, started once on
    the head node (it was given the data-parallel options of a DP of 1). From recall of
    vLLM's multi-node docs. TensorRT-LLM's mpirun is run once, not on each node."""
    wide = dict(SPLIT, mode="aggregated", decode_gpus=16, tp=1, dp=16, ep=16)
    ((what, cmd),) = launch_commands("vllm", "m", deployments(wide, 8, 0.1, 8))
    assert "--data-parallel-size 16 " in cmd and "--data-parallel-size-local 8 " in cmd
    assert cmd.endswith("--data-parallel-start-rank $((NODE_RANK * 8))")
    assert "$LOCAL_DP" not in cmd and "ray" not in cmd
    assert what == "server (run on each of its 2 nodes with its NODE_RANK, 0 on the head node "\
        "$HEAD; the others add --headless)"  # fmt: skip
    tp16 = dict(wide, tp=16, dp=1, ep=1, dp_attention=False, redundant_experts=0)
    ((what, cmd),) = launch_commands("vllm", "m", deployments(tp16, 8, 0.1, 8))
    assert "data-parallel" not in cmd and cmd.endswith("--distributed-executor-backend ray")
    assert what.startswith("server (on the head node of a Ray cluster of its 2 nodes")
    # SGLang's lines are as they were: each node with its --node-rank
    ((what, _),) = launch_commands("sglang", "m", deployments(wide, 8, 0.1, 8))
    assert what == "server (run on each of its 2 nodes)"
    # TensorRT-LLM's: mpirun once (it said "run on each of its 2 nodes": 32 ranks for 16 GPUs)
    ((what, cmd),) = launch_commands("trtllm", "m", deployments(wide, 8, 0.1, 8))
    assert what.startswith("server (run once, on one of its 2 nodes: mpirun starts a rank a GPU")
    assert "mpirun -n 16 --hostfile $HOSTFILE" in cmd


def test_vllm_last_node_not_full_gets_its_own_rank_count():
    """12 data-parallel ranks of one GPU on 8-GPU nodes: node 0 runs 8, node 1 the last 4
    (the line said 8 local ranks on every node: node 1 would start ranks 8-15 on 4 GPUs). One
    $NODE_RANK formula in bash arithmetic gives each node its count; a pool that fills its
    nodes keeps the plain count. TensorRT-LLM's mpirun counts the pool's GPUs, not nodes."""
    twelve = dict(SPLIT, mode="aggregated", decode_gpus=12, tp=1, dp=12, ep=12)
    ((_, cmd),) = launch_commands("vllm", "m", deployments(twelve, 8, 0.1, 8))
    assert "--data-parallel-size 12 " in cmd
    assert "--data-parallel-size-local $((NODE_RANK < 1 ? 8 : 4)) " in cmd
    assert cmd.endswith("--data-parallel-start-rank $((NODE_RANK * 8))")
    ((_, cmd),) = launch_commands("trtllm", "m", deployments(twelve, 8, 0.1, 8))
    assert "mpirun -n 12 " in cmd


def test_launch_note_names_the_devices_default_engine(run):
    """review12 5: on AMD the default engine is SGLang, yet the launch note said "(--engine,
    trtllm when not given)"; a step model of no engine named times the same default."""
    out, _ = run("plan", "llama-3-8b", "-H", "MI300X", "-g", 1, "--isl", 1000, "--osl", 1000,
                 "--concurrency", 8, "--launch", "vllm")  # fmt: skip
    assert "timed with sglang's kernels (--engine, sglang when not given)" in out
    m = as_model("llama-3-8b")
    for device, engine in (("MI300X", "sglang"), ("H100-SXM", "trtllm")):
        lay = make_layout(m, 1, tp=1)
        sm = StepModel(m, lay, None, resolve_kv_layout("bf16"), load_hardware(device))
        assert sm.engine == engine
