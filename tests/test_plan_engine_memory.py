"""The engine's own memory setting (trial12 item 7): capacity-bound rows swing with the memory
rule, and TensorRT-LLM's kv_cache_free_gpu_mem_fraction, vLLM's gpu_memory_utilization and
SGLang's mem_fraction_static had no spelling. ``engine_memory`` (``--engine-memory``) takes the
engine's figure and reads it by the engine's meaning."""

from __future__ import annotations

import json

import pytest

import mlacalc
from mlacalc.words.errors import InvalidArgumentError

ROW = dict(isl=128, osl=2048, weight_dtype="fp8", kv_dtype="fp8", page_size=16)
M = "llama-3.1-70b"


def test_trtllms_share_is_of_what_the_weights_leave():
    """The trial's Llama-3.1-70B TP1 H100 128/2048 row at TensorRT-LLM's 0.95: the figure the
    bench's "5% of what the weights leave" gives (1,059 tok/s; --memory-reserve 0.05, 5% of
    the GPU, gave 776)."""
    first = mlacalc.plan(M, "H100-SXM", 1, memory_reserve=0.0, **ROW)
    free = first.memory_per_gpu_bytes - first.weights_per_gpu_bytes
    reserve = 0.05 * free / first.memory_per_gpu_bytes  # scenarios.compare_offline's
    bench = mlacalc.plan(M, "H100-SXM", 1, memory_reserve=reserve, **ROW)
    got = mlacalc.plan(M, "H100-SXM", 1, engine="trtllm", engine_memory=0.95, **ROW)
    assert got.max_batch == bench.max_batch
    assert got.output_tokens_per_s == pytest.approx(bench.output_tokens_per_s, rel=1e-9)
    # 1,068 before the MMHA split refit, 1,069 before Hopper's fp8 XQA waited past the L2
    assert round(got.output_tokens_per_s) == 1059
    # by hand: the weights and 0.95 of what they leave
    w, mem = got.weights_per_gpu_bytes, got.memory_per_gpu_bytes
    assert got.usable_per_gpu_bytes == w + int(0.95 * (mem - w))
    assert "kv_cache_free_gpu_mem_fraction 0.95" in got.memory_setting
    assert got.engine_memory == 0.95


@pytest.mark.parametrize(("engine", "option"), [("vllm", "gpu_memory_utilization"),
                                                ("sglang", "mem_fraction_static")])  # fmt: skip
def test_vllm_and_sglang_shares_are_of_the_whole_gpu(engine, option):
    got = mlacalc.plan(M, "H100-SXM", 1, engine=engine, engine_memory=0.85, **ROW)
    assert got.usable_per_gpu_bytes == int(0.85 * got.memory_per_gpu_bytes)
    same = mlacalc.plan(M, "H100-SXM", 1, engine=engine, memory_reserve=0.15, **ROW)
    assert got.max_batch == same.max_batch
    assert f"{option} 0.85" in got.memory_setting
    assert "memory_reserve 0.1 " in mlacalc.plan(M, "H100-SXM", 1, **ROW).memory_setting


@pytest.mark.parametrize("bad", [0, 1.5, -0.1, float("nan"), "x"])
def test_bad_shares_and_both_rules_are_refused(bad):
    with pytest.raises(InvalidArgumentError, match=r"engine_memory.*in \(0, 1\]"):
        mlacalc.plan(M, "H100-SXM", 1, engine="vllm", engine_memory=bad, **ROW)


def test_both_rules_are_refused_in_one_line(run):
    with pytest.raises(InvalidArgumentError, match="not both"):
        mlacalc.plan(M, "H100-SXM", 1, engine_memory=0.9, memory_reserve=0.1, **ROW)
    args = ["plan", M, "-H", "H100-SXM", "--gpus", 1, "--isl", 128, "--osl", 2048]
    _, err = run(*args, "--engine-memory", 0.9, "--memory-reserve", 0.05, code=2)
    assert "not both" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("launch", "said"),
    [("trtllm", "free_gpu_memory_fraction: 0.95"), ("sglang", "--mem-fraction-static 0.992292 ")],
)
def test_the_launch_lines_set_it(run, launch, said):
    """Under the engine whose setting it is, the figure itself; another engine's lines the
    same bytes in its own meaning (the weights and 0.95 of what they leave: 0.992292 of the
    GPU, to the decimals that keep the plan's KV tokens and sequences)."""
    args = ["plan", M, "-H", "H100-SXM", "--gpus", 1, "--weight-dtype", "fp8", "--kv-dtype",
            "fp8", "--isl", 128, "--osl", 2048, "--engine", "trtllm", "--engine-memory", 0.95,
            "--launch", launch, "--format", "json"]  # fmt: skip
    doc = json.loads(run(*args)[0])
    assert said in doc["launch"] and doc["engine_memory"] == 0.95


@pytest.mark.parametrize("engine", ["trtllm", "vllm"])
def test_search_takes_it_as_plan_does(run, engine):
    """search(engine_memory=) sizes every point as plan does: its plan command carries
    --engine-memory and gives the best point's figures; the launch lines set it."""
    args = ["search", "llama-3.1-8b", "-H", "H100-SXM", "--gpus", 1, "--isl", 2000, "--osl",
            500, "--modes", "aggregated", "--kv-dtypes", "bf16", "--weight-dtypes", "bf16",
            "--chunked-prefills", "none", "--engine", engine,
            "--engine-memory", 0.8, "--launch", engine, "--format", "json"]  # fmt: skip
    doc = json.loads(run(*args)[0])
    assert doc["engine_memory"] == 0.8 and "--engine-memory 0.8" in doc["plan_command"]
    assert "--memory-reserve" not in doc["plan_command"]
    said = {"trtllm": "free_gpu_memory_fraction: 0.8", "vllm": "--gpu-memory-utilization 0.80"}
    assert said[engine] in doc["launch"]
    planned = json.loads(run(*doc["plan_command"].split()[1:], "--format", "json")[0])
    assert planned["engine_memory"] == 0.8
    for key in ("ttft_s", "tpot_s", "output_tokens_per_s"):
        assert planned[key] == pytest.approx(doc["best"][key], rel=1e-6), key
    _, err = run(*args, "--memory-reserve", 0.1, code=2)
    assert "not both" in err


@pytest.mark.parametrize(
    ("own", "share", "launch"),
    [("trtllm", 0.95, "sglang"), ("trtllm", 0.8734, "vllm"), ("vllm", 0.8734, "trtllm"),
     ("sglang", 0.9, "trtllm"), ("vllm", 0.8734, "vllm")],
)  # fmt: skip
def test_the_launch_share_reads_back_to_the_plans_capacity(run, own, share, launch):
    """The share the launch lines print, given back with --engine-memory under the launched
    engine, sizes the plan's KV cache: its tokens and sequences per GPU (two decimals did
    not: TensorRT-LLM's 0.95 printed as SGLang's 0.99, 0.23% of the GPU less than 0.992292)."""
    common = ["plan", M, "-H", "H100-SXM", "--gpus", 1, "--weight-dtype", "fp8", "--kv-dtype",
              "fp8", "--isl", 128, "--osl", 2048, "--page-size", 16, "--engine-defaults",
              "none", "--format", "json"]  # fmt: skip
    doc = json.loads(run(*common, "--engine", own, "--engine-memory", share, "--launch", launch)[0])
    option = {"trtllm": "free_gpu_memory_fraction:", "vllm": "--gpu-memory-utilization",
              "sglang": "--mem-fraction-static"}[launch]  # fmt: skip
    printed = doc["launch"].split(option)[1].split()[0]
    assert len(printed.split(".")[1]) <= 12  # never more than the conversion holds
    back = json.loads(run(*common, "--engine", launch, "--engine-memory", printed)[0])
    for key in ("kv_tokens_per_gpu", "max_batch"):
        assert back[key] == doc[key], (key, printed)
    if own == launch:  # the figure itself, every decimal of it
        assert float(printed) == share


@pytest.mark.parametrize("reserve", [None, 0.05])
@pytest.mark.parametrize("launch", ["trtllm", "vllm", "sglang"])
def test_a_reserves_launch_share_reads_back_to_the_plans_capacity(run, reserve, launch):
    """A plan sized by the planner's reserve (1 - reserve of the GPU for the weights and the
    KV cache) launches each engine with the setting that, given back with --engine-memory
    under that engine, sizes the plan's KV cache. TensorRT-LLM's free_gpu_memory_fraction is a
    share of what the weights leave: its lines printed 1 - reserve (0.9), about 2.6x the
    planned KV cache of Llama-3.1-70B fp8 TP1 on H100; vLLM's and SGLang's read 1 - reserve."""
    common = ["plan", M, "-H", "H100-SXM", "--gpus", 1, "--weight-dtype", "fp8", "--isl", 128,
              "--osl", 2048, "--page-size", 16, "--engine-defaults", "none", "--format",
              "json"]  # fmt: skip
    given = [] if reserve is None else ["--memory-reserve", reserve]
    doc = json.loads(run(*common, *given, "--engine", "trtllm", "--launch", launch)[0])
    option = {"trtllm": "free_gpu_memory_fraction:", "vllm": "--gpu-memory-utilization",
              "sglang": "--mem-fraction-static"}[launch]  # fmt: skip
    printed = doc["launch"].split(option)[1].split()[0]
    back = json.loads(run(*common, "--engine", launch, "--engine-memory", printed)[0])
    for key in ("kv_tokens_per_gpu", "max_batch"):
        assert back[key] == doc[key], (key, printed)
    if launch != "trtllm":  # the reserve's own meaning: 1 - reserve of the GPU
        assert float(printed) == pytest.approx(1 - (reserve or 0.1))


def test_a_searchs_reserve_launch_share_holds_its_sequences():
    """search's launch lines convert the reserve as plan's do: TensorRT-LLM's share, read back
    by its meaning, holds the best point's sequences per GPU (not 1 - reserve)."""
    from mlacalc.serving.plan_checks import usable_of

    r = mlacalc.search("llama-3.1-70b", "H100-SXM", 1, isl=128, osl=2048, modes=["aggregated"],
                       kv_dtypes=["fp8"], weight_dtypes=["fp8"],
                       engine="trtllm")  # fmt: skip
    p = r.best
    share = r.launch_share("trtllm", p)
    assert share is not None and share < 0.5  # 0.9 would be of what the weights leave
    assert r.launch_share("vllm", p) is None and r.launch_share("sglang", p) is None
    memory = mlacalc.load_hardware("H100-SXM").memory_bytes
    weights, per_seq = p["weights_per_gpu_bytes"], p["kv_per_gpu_bytes"] // p["batch_per_group"]
    want = (usable_of(memory, weights, r.memory_reserve) - weights) // per_seq
    assert (usable_of(memory, weights, 0.0, ("trtllm", share)) - weights) // per_seq == want
    assert "free_gpu_memory_fraction: " + str(share) in r.launch_commands("trtllm")[0][1]


@pytest.mark.parametrize(("own", "launch"), [("trtllm", "vllm"), ("vllm", "trtllm")])
def test_a_searchs_launch_share_reads_back_to_its_points_batch(run, own, launch):
    """A search's launch lines convert its engine's setting to the launched engine's (its
    best point's bytes): its plan command given that share under the launched engine holds as
    many sequences as under the search's own."""
    args = ["search", "llama-3.1-8b", "-H", "H100-SXM", "--gpus", 1, "--isl", 2000, "--osl",
            500, "--modes", "aggregated", "--kv-dtypes", "bf16", "--weight-dtypes", "bf16",
            "--chunked-prefills", "none", "--engine", own, "--engine-memory", 0.8734,
            "--launch", launch, "--format", "json"]  # fmt: skip
    doc = json.loads(run(*args)[0])
    option = {"trtllm": "free_gpu_memory_fraction:", "vllm": "--gpu-memory-utilization"}[launch]
    printed = doc["launch"].split(option)[1].split()[0]
    words = [*doc["plan_command"].split()[1:], "--format", "json"]
    planned = json.loads(run(*words)[0])
    at = words.index("--engine-memory") + 1
    words[at], words[words.index("--engine") + 1] = printed, launch
    back = json.loads(run(*words)[0])
    assert back["max_batch"] == planned["max_batch"] < 2048, printed  # the KV cache binds


def test_a_prefill_pool_that_holds_no_prompt_quotes_its_own_usable_bytes():
    """TensorRT-LLM's share follows each pool's weights: a TP2 prefill pool of Llama-3.1-70B
    (65.71 GiB of weights a GPU) has 65.71 + 0.9 x (80 - 65.71) = 78.57 GiB usable, and its
    message quoted the TP4 decode pool's 75.29 GiB."""
    from mlacalc.words.units import human_bytes

    p = mlacalc.plan(M, "H100-SXM", 4, tp=4, isl=100_000, osl=100, mode="disaggregated",
                     prefill_gpus=2, prefill_tp=2, engine="trtllm", engine_memory=0.9,
                     concurrency=4)  # fmt: skip
    assert not p.fits and p.binding == "prefill pool: kv capacity"
    mem = p.memory_per_gpu_bytes
    weights = mlacalc.plan(M, "H100-SXM", 2, tp=2, engine="trtllm").weights_per_gpu_bytes
    usable = weights + int(0.9 * (mem - weights))
    assert f"exceed the {human_bytes(usable)} usable" in p.overflow
    assert human_bytes(p.usable_per_gpu_bytes) not in p.overflow


def test_a_launch_of_a_plan_that_does_not_fit_says_why(run):
    """--launch on a plan that does not fit printed nothing (exit 0): it says in one line that
    there is nothing to launch, and why (the plan's overflow)."""
    out, _ = run("plan", "llama-3.1-8b", "-H", "H100-SXM", "--gpus", 1, "--isl", 2000, "--osl",
                 20, "--concurrency", 8, "--engine", "trtllm", "--engine-memory", 0.0001,
                 "--launch", "vllm")  # fmt: skip
    said = [line for line in out.splitlines() if "launch commands" in line]
    assert len(said) == 1 and said[0].startswith("# no vllm launch commands")
    assert "does not fit (kv cache: one sequence" in said[0]


def test_a_launch_of_a_search_without_a_best_says_why(run):
    """search --launch with no deployment meeting the targets printed nothing as well."""
    out, _ = run("search", "llama-3.1-8b", "-H", "H100-SXM", "--gpus", 1, "--isl", 2000,
                 "--osl", 500, "--modes", "aggregated", "--kv-dtypes", "bf16",
                 "--weight-dtypes", "bf16", "--chunked-prefills", "none", "--tpot", "0.001ms",
                 "--launch", "vllm")  # fmt: skip
    assert "# no vllm launch commands: no deployment meets the targets" in out.splitlines()


@pytest.mark.parametrize(
    ("given", "launch"),
    [(["--engine", "vllm", "--engine-memory", 0.9], "trtllm"),
     (["--engine", "vllm", "--memory-reserve", 0.1], "trtllm"),
     (["--engine", "trtllm", "--engine-memory", 0.9], "vllm")],
)  # fmt: skip
def test_each_disaggregated_pools_launch_share_reads_back_to_its_own_cache(run, given, launch):
    """A disaggregated plan's launch lines give each pool its own memory setting: TensorRT-LLM's
    share is of what each pool's weights leave, and both pools were given the decode pool's
    (Llama-3.1-70B, a TP2 prefill pool beside a TP4 decode pool on H100, vLLM's 0.9: 0.830307
    for both, which reads back as 77,761 KV tokens a GPU on the TP2 pool where the plan sized
    41,225; its own is 0.44019). Each pool's share, read back under the launched engine on a
    plan of that pool's layout alone, holds the tokens the plan sized for it."""
    args = ["plan", "llama-3.1-70b", "-H", "H100-SXM", "--isl", 2000, "--osl", 500,
            "--format", "json"]  # fmt: skip
    pools = {"prefill": ["--gpus", 2, "--tp", 2], "decode": ["--gpus", 4, "--tp", 4]}
    disagg = ["--concurrency", 32, "--mode", "disaggregated", "--prefill-gpus", 2,
              "--prefill-tp", 2]  # fmt: skip
    doc = json.loads(run(*args, *pools["decode"], *disagg, *given, "--launch", launch)[0])
    option = {"trtllm": "free_gpu_memory_fraction:", "vllm": "--gpu-memory-utilization"}[launch]
    text = doc["launch"]
    shares = {role: text.split(f"# {role} pool")[1].split(option)[1].split()[0] for role in pools}
    assert shares["prefill"] != shares["decode"]
    for role, layout in pools.items():
        sized = json.loads(run(*args, *layout, *given)[0])["kv_tokens_per_gpu"]
        back = json.loads(run(*args, *layout, "--engine", launch, "--engine-memory",
                              shares[role])[0])  # fmt: skip
        assert back["kv_tokens_per_gpu"] == sized, (role, shares[role])
    if given[-2:] == ["--engine-memory", 0.9] and launch == "trtllm":
        assert shares == {"prefill": "0.44019", "decode": "0.830307"}


def test_a_searchs_disaggregated_point_gives_each_pool_its_own_share():
    """search's launch lines likewise: a point whose prefill pool (TP2) and decode pool (TP4)
    hold different weights a GPU gives each its own TensorRT-LLM share, read back holding the
    sequences (prompts) the search sized on that pool; both were given the decode pool's."""
    from mlacalc.serving.plan_checks import usable_of

    r = mlacalc.search("llama-3.1-70b", "H100-SXM", [2, 4, 6], isl=2000, osl=500,
                       modes=["disaggregated"], kv_dtypes=["bf16"], weight_dtypes=["bf16"],
                       overlaps=["none"], engine="vllm", engine_memory=0.9)  # fmt: skip
    p = next(q for q in r.points if q["prefill_tp"] == 2 and q["tp"] == 4)
    memory = mlacalc.load_hardware("H100-SXM").memory_bytes
    pools = {
        "prefill": (p["prefill_weights_per_gpu_bytes"], p["prefill_kv_per_prompt_bytes"]),
        "decode": (p["weights_per_gpu_bytes"], p["kv_per_gpu_bytes"] // p["batch_per_group"]),
    }
    shares = {role: r.launch_share("trtllm", p, role) for role in pools}
    assert shares["prefill"] < shares["decode"]  # the TP2 pool's weights leave less
    for role, (weights, unit) in pools.items():
        want = (usable_of(memory, weights, 0.0, ("vllm", 0.9)) - weights) // unit
        got = (usable_of(memory, weights, 0.0, ("trtllm", shares[role])) - weights) // unit
        assert got == want, role
    lines = dict(r.launch_commands("trtllm", point=p))
    for role, share in shares.items():
        line = next(c for what, c in lines.items() if what.startswith(f"{role} pool"))
        assert f"free_gpu_memory_fraction: {share}\n" in line, role


OPTION = {"trtllm": "free_gpu_memory_fraction:", "vllm": "--gpu-memory-utilization",
          "sglang": "--mem-fraction-static"}  # fmt: skip


@pytest.mark.parametrize(
    "given",
    [("vllm", 0.9), ("sglang", 0.85), ("trtllm", 0.9), ("trtllm", None), ("vllm", None)],
)
def test_a_search_points_launch_share_is_its_plans(run, given):
    """One route to a launch line's memory share (capacity.pool_launch_share): a search
    point's launch lines and `mlacalc plan` of the same point (its plan command) print the
    same share for each pool, under each engine's memory meaning and under the reserve. The
    search's held only the point's sequences, plan's its tokens too: TensorRT-LLM's 0.9 went
    to vLLM as 0.98 from the search, 0.982137 from plan (Llama-3.1-70B's TP2 prefill pool
    beside a TP4 decode pool on H100), the reserve's 0.07 to TensorRT-LLM as 0.61, 0.60814."""
    from mlacalc.cli.search_cmd import plan_command

    own, share = given
    memory = {"engine_memory": share} if share is not None else {"memory_reserve": 0.07}
    r = mlacalc.search(M, "H100-SXM", [2, 4, 6], isl=2000, osl=500, modes=["disaggregated"],
                       kv_dtypes=["bf16"], weight_dtypes=["bf16"], overlaps=["none"],
                       engine=own, **memory)  # fmt: skip
    p = next(q for q in r.points if q["prefill_tp"] == 2 and q["tp"] == 4)
    words = plan_command(M, "H100-SXM", r, p) + f" --engine {own} --engine-defaults none"
    assert words.startswith("mlacalc plan ")
    for launch, option in OPTION.items():
        lines = dict(r.launch_commands(launch, point=p))
        planned = run(*words.split()[1:], "--launch", launch)[0]
        for role in ("prefill", "decode"):
            line = next(c for what, c in lines.items() if what.startswith(f"{role} pool"))
            searched = line.split(option)[1].split()[0]
            assert planned.split(f"# {role} pool")[1].split(option)[1].split()[0] == searched
            if share is None and launch != "trtllm":  # the reserve's own meaning
                assert float(searched) == pytest.approx(0.93)
