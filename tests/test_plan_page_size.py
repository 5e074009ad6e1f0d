"""Each engine's own KV page (review9 F3): the prefix cache's whole pages and the KV memory's
pages in the engine's default page size where ``--page-size`` is not given, and ``--launch``
lines that set the page the plan assumed."""

from __future__ import annotations

import json

import pytest

import mlacalc
from mlacalc.serving.scheduler import engine_page_size

MIX = dict(gpus=8, tp=8, ep=8, isl=2000, osl=100, prefix_cache_hit=0.5, concurrency=8)


@pytest.mark.parametrize(
    ("engine", "model", "page", "cached"),
    [
        ("sglang", "qwen3-30b-a3b", 1, 1000),
        ("vllm", "qwen3-30b-a3b", 16, 992),
        ("vllm", "deepseek-v3", 64, 960),  # MLA: FlashMLA's 64-token blocks
        ("trtllm", "qwen3-30b-a3b", 32, 992),
        (None, "qwen3-30b-a3b", 16, 992),
    ],
)
def test_the_prefix_cache_matches_the_engines_own_pages(engine, model, page, cached):
    """Qwen3-30B-A3B on 8 H200, 2,000-token prompts half cached: 992 tokens found under
    every engine before (16-token pages for all); SGLang's radix cache matches token by
    token (page 1: 1,000), TensorRT-LLM's 32-token blocks 992, vLLM's MLA blocks 64 (960)."""
    p = mlacalc.plan(model, hardware="H200", engine=engine, **MIX)
    assert p.page_size == page == engine_page_size(engine, model == "deepseek-v3")
    assert p.prefix_cached_tokens == cached
    given = mlacalc.plan(model, hardware="H200", engine=engine, page_size=16, **MIX)
    assert given.page_size == 16 and given.prefix_cached_tokens == 992


@pytest.mark.parametrize(
    ("engine", "said"),
    [("sglang", "--page-size 1"), ("vllm", "--block-size 16"), ("trtllm", "tokens_per_block: 32")],
)
def test_the_launch_lines_set_the_page_the_plan_assumed(run, engine, said):
    """The launch commands said no page size: SGLang would run its own (1) whatever the plan
    assumed. They now say the plan's, its engine's default or --page-size."""
    args = ["plan", "qwen3-30b-a3b", "-H", "H200", "--gpus", 8, "--tp", 8, "--ep", 8,
            "--isl", 2000, "--osl", 100, "--concurrency", 8, "--engine", engine,
            "--launch", engine, "--format", "json"]  # fmt: skip
    doc = json.loads(run(*args)[0])
    assert said in doc["launch"]
    other = "--page-size 64" if engine == "sglang" else "--block-size 64"
    if engine == "trtllm":
        other = "tokens_per_block: 64"
    assert other in json.loads(run(*args, "--page-size", 64)[0])["launch"]


@pytest.mark.parametrize(
    ("model", "hardware", "page"),
    [
        ("deepseek-v3", "H200", 1),  # FlashAttention-3's MLA on Hopper: the radix cache's 1
        ("deepseek-v3", "B200", 64),  # trtllm_mla on datacenter Blackwell takes 32 or 64
        ("deepseek-v3.2", "H200", 64),  # the NSA (DSA) backend's pages
        ("qwen3-30b-a3b", "B200", 1),  # not MLA: the radix cache's 1 on every device
    ],
)
def test_sglang_pages_follow_the_backend_its_model_and_device_run(model, hardware, page):
    """SGLang's default page is 1 (its radix cache) but its DSA backend and its MLA backend on
    datacenter Blackwell set 64 (from recall of server_args.py): the plan's page, its cached
    tokens and the launch line say the same page (a review: DeepSeek-V3.2 under SGLang read
    1,000 of 2,000 tokens cached and `--page-size 1` beside the FlashMLA sparse cache)."""
    p = mlacalc.plan(model, hardware=hardware, engine="sglang", **MIX)
    assert p.page_size == page
    assert p.prefix_cached_tokens == 1000 // page * page


@pytest.mark.parametrize(
    ("model", "hardware", "page"),
    [
        ("deepseek-v3", "H200", 64),  # FlashMLA on Hopper forces 64-token blocks
        ("deepseek-v3", "B200", 128),  # CUTLASS MLA, its default on datacenter Blackwell: 128
        ("deepseek-v3", "GB200", 128),
        ("deepseek-v3.2", "B200", 64),  # DSA: sparse FlashMLA's 64 on either
        ("qwen3-30b-a3b", "B200", 16),  # not MLA: the default 16 on every device
        # not NVIDIA's: no CUTLASS MLA, and no FlashMLA (compute capability 9.x, 10.x only):
        # vLLM's other MLA backends keep 16 (from recall)
        ("deepseek-v3", "MI355X", 16),
    ],
)
def test_vllm_pages_follow_the_backend_its_model_and_device_run(run, model, hardware, page):
    """vLLM pages an MLA model by 64 (FlashMLA's) but on datacenter Blackwell its default MLA
    backend, CUTLASS MLA, forces 128-token blocks (from recall of vllm/platforms/cuda.py):
    the plan's page, its cached tokens and the launch line's --block-size say the same page
    (the plan assumed 64 on B200 before, a page vLLM does not run there)."""
    p = mlacalc.plan(model, hardware=hardware, engine="vllm", **MIX)
    assert p.page_size == page
    assert p.prefix_cached_tokens == 1000 // page * page
    args = ["plan", model, "-H", hardware, "--gpus", 8, "--tp", 8, "--ep", 8, "--isl", 2000,
            "--osl", 100, "--concurrency", 8, "--engine", "vllm", "--launch", "vllm"]  # fmt: skip
    text = run(*args)[0]
    assert f"--block-size {page} " in text and "the figures assume KV pages" not in text


@pytest.mark.parametrize(("launch", "noted"), [("sglang", False), ("vllm", True), ("trtllm", True)])
def test_launching_another_engine_says_its_own_page(run, launch, noted):
    """A plan timed under SGLang (DeepSeek-V3 on H200: page 1) launched on vLLM or TensorRT-LLM
    sets `--block-size 1` / `tokens_per_block: 1`, a page those engines page an MLA model by
    differently (vLLM 64, FlashMLA's; TensorRT-LLM 32): the output says so and how to get the
    figures at their page (a review found the line passed on without a word)."""
    args = ["plan", "deepseek-v3", "-H", "H200", "--gpus", 8, "--tp", 8, "--isl", 2000,
            "--osl", 200, "--engine", "sglang", "--launch", launch]  # fmt: skip
    text = run(*args)[0]
    said = "the figures assume KV pages of 1 token, which the lines below set" in text
    assert said == noted, text[-600:]
    if noted:
        own = {"vllm": 64, "trtllm": 32}[launch]
        assert f"--page-size {own} gives the figures at its own page" in text


def test_model_page_size_takes_names_as_plan_does():
    """docs/api.md's public ``model_page_size`` took only loaded objects (a name was an
    AttributeError from deep inside); it takes a model and a device by name, as plan does."""
    from mlacalc.serving.scheduler import model_page_size

    loaded = (mlacalc.load_model("deepseek-v3"), mlacalc.load_hardware("B200"))
    assert model_page_size("vllm", "deepseek-v3", "B200") == 128
    assert model_page_size("vllm", *loaded) == 128
    with pytest.raises(mlacalc.UnknownHardwareError):
        model_page_size("vllm", "deepseek-v3", "B201")


@pytest.mark.parametrize(
    ("extra", "helps", "not_said"),
    [
        (["--engine", "vllm", "--engine-defaults", "none"], "--engine-defaults vllm or ",
         "--engine vllm or"),
        (["--engine", "vllm", "--page-size", 1], "(from recall): --page-size 64 gives",
         "--engine vllm or"),
        (["--engine", "sglang"], "--engine vllm or --page-size 64 gives",
         "--engine-defaults vllm"),
    ],
)  # fmt: skip
def test_the_page_note_names_the_flag_that_helps(run, extra, helps, not_said):
    """The note under the launch lines names the flag that gives the launched engine's own
    page: with --engine vllm given, the page came from --engine-defaults none (or --page-size),
    and advising "--engine vllm" (a review's find) changes nothing."""
    args = ["plan", "deepseek-v3", "-H", "H200", "--gpus", 8, "--isl", 2000, "--osl", 200,
            "--launch", "vllm", *extra]  # fmt: skip
    text = run(*args)[0]
    assert "the figures assume KV pages" in text
    assert helps in text and not_said not in text, text[-700:]


@pytest.mark.parametrize(
    ("hardware", "page"),
    [("A100-SXM-80GB", 16), ("L40S", 16), ("MI300X", 16), ("H200", 64), ("H20", 64)],
)
def test_vllms_flashmla_page_only_where_flashmla_runs(hardware, page):
    """vLLM pages an MLA model by FlashMLA's 64 where FlashMLA runs (compute capability 9.x,
    10.x; from recall); on A100, L40S and MI300X its other MLA backends keep 16, where the
    plan took 64 on every device."""
    from mlacalc.serving.scheduler import model_page_size, runs_flashmla
    from mlacalc.timemodel.device import device_figures

    hw = mlacalc.load_hardware(hardware)
    assert runs_flashmla(device_figures(hw)) == (page == 64)
    assert model_page_size("vllm", mlacalc.load_model("deepseek-v3"), hw) == page
    assert model_page_size("sglang", mlacalc.load_model("deepseek-v3"), hw) == 1


@pytest.mark.parametrize(
    ("hardware", "page"), [("MI355X", 16), ("MI300X", 16), ("A100-SXM-80GB", 16), ("H200", 64)]
)
def test_vllms_dsa_page_only_where_flashmla_runs(hardware, page):
    """vLLM's 64-token DSA page is sparse FlashMLA's: where FlashMLA does not run (AMD, A100)
    a DSA model is paged as an MLA model there, 16, where the plan kept 64; SGLang's NSA
    backend keeps 64 everywhere."""
    from mlacalc.serving.scheduler import model_page_size

    assert model_page_size("vllm", "deepseek-v3.2", hardware) == page
    assert model_page_size("sglang", "deepseek-v3.2", hardware) == 64
