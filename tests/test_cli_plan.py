"""``mlacalc plan`` (and plan()): the two-batch-overlap table and bound, MTP, the disaggregated
GPU rows, the context with a request mix, pipeline tables, error wording, the kernel class a
device runs, mixed models, ModelOpt exports, the disaggregated pool's settling batch. Each test
failed before its fix."""

from __future__ import annotations

import csv
import io
import json

import pytest
from reference_data import HF_CONFIGS, HF_CONFIGS_2

import mlacalc
from mlacalc.hardware.catalogue import load_hardware
from mlacalc.serving.plan import plan
from mlacalc.serving.scheduler import engine_settings
from mlacalc.serving.search import search
from mlacalc.words.errors import InvalidArgumentError, UnknownDtypeError

TBO = dict(tp=1, dp_attention=True, ep=72, redundant_experts=32, isl=2000, osl=500)


# ---------------------------------------------------------------- 1: TBO table and bound
@pytest.fixture(scope="module")
def tbo():
    return plan("deepseek-v3", "H100-SXM", 72, overlap="tbo", **TBO)


def test_tbo_bound_names_the_largest_share_not_any_exposed_link(tbo):
    """Under two-batch overlap the step was labelled communication-bound whenever any link
    time was left exposed (30 ms of 111): it is bound by the links only when they take
    longer than the kernels."""
    assert 0 < tbo.step_comm_s < tbo.step_compute_s
    links = sum(k["seconds"] for k in tbo.kernels if k["communication"]) * 2
    assert links < tbo.step_compute_s
    assert tbo.decode_bound != "communication"
    assert tbo.binding != "communication"
    assert tbo.step_links_s == pytest.approx(links)


def test_tbo_kernel_table_says_it_covers_one_micro_batch(tbo, run):
    rows = sum(k["seconds"] for k in tbo.kernels)
    assert rows < 0.75 * tbo.decode_step_s  # one of the two micro-batches
    assert "two micro-batches" in tbo.kernels_scope
    out, _ = run(
        "plan", "deepseek-v3", "-H", "H100-SXM", "--gpus", 72, "--tp", 1, "--dp-attention",
        "--ep", 72, "--redundant-experts", 32, "--overlap", "tbo", "--isl", 2000, "--osl", 500,
    )  # fmt: skip
    assert "one of the two micro-batches" in out
    assert "exposed" in out  # the link time shown is what the overlap leaves exposed


def test_tbo_links_longer_than_the_kernels_are_communication_bound(tbo):
    from mlacalc.serving.plan import _bound

    k = [dict(x, flops=[x["flops_per_call"]], bytes=[x["bytes_per_call"]]) for x in tbo.kernels]
    from mlacalc.hardware.catalogue import load_hardware

    hw = load_hardware("H100-SXM")
    assert _bound(hw, k, 0.08, 0.03, "tbo", links_s=0.06) != "communication"
    assert _bound(hw, k, 0.08, 0.03, "tbo", links_s=0.09) == "communication"


# ---------------------------------------------------------------- 2: MTP without a module
def test_mtp_tokens_refused_for_a_model_without_mtp(run):
    with pytest.raises(InvalidArgumentError) as exc:
        plan(
            "llama-3-70b", "H100-SXM", 4, isl=2048, osl=500, concurrency=64,
            mtp_tokens=2, mtp_acceptance=0.8,
        )  # fmt: skip
    assert exc.value.argument == "mtp_tokens" and "MTP" in exc.value.message
    _, err = run(
        "plan", "llama-3-70b", "-H", "H100-SXM", "--gpus", 4, "--isl", "2k", "--osl", 500,
        "--concurrency", 64, "--mtp-tokens", 2, "--mtp-acceptance", 0.8, code=2,
    )  # fmt: skip
    assert "--mtp-tokens" in err and "MTP" in err
    # a model with an MTP module still drafts
    p = plan("deepseek-v3", "H200", 8, isl=2000, osl=500, mtp_tokens=1, mtp_acceptance=0.8)
    assert p.tokens_per_step == pytest.approx(1.8)


# ---------------------------------------------------------------- 3: disaggregated GPUs
def test_disaggregated_gpu_row_and_help_say_decode_plus_prefill(run):
    out, _ = run(
        "plan", "deepseek-v3", "-H", "H200", "--gpus", 16, "--mode", "disaggregated",
        "--isl", "2k", "--osl", 500,
    )  # fmt: skip
    row = next(line for line in out.splitlines() if "GPUs" in line and "x H200" in line)
    assert "decode" in row and "prefill" in row and "32" in row
    # each pool's rate is a row of its own (was only in a prefill-bound warning's words)
    assert "prefill pool's rate" in out and "prompts/s" in out
    assert "decode pool's rate at its largest batch" in out
    out, _ = run(
        "plan", "deepseek-v3", "-H", "H200", "--gpus", 16, "--mode", "disaggregated",
        "--isl", "2k", "--osl", 500, "--format", "json",
    )  # fmt: skip
    doc = json.loads(out)
    assert (doc["gpus"], doc["prefill_gpus"], doc["total_gpus"]) == (16, 16, 32)
    assert doc["prefill_pool_requests_per_s"] > 0 and doc["decode_pool_requests_per_s"] > 0
    help_text, _ = run("plan", "--help")
    assert "GPUs in all." not in help_text
    assert "decode pool" in help_text


def test_what_does_not_apply_is_null_in_the_json(run):
    """An aggregated plan's prefill pool and a whole step's kernel scope are null, as
    prefill_tp was: prefill_layout and kernels_scope were "" (a trial)."""
    out, _ = run(
        "plan", "deepseek-v3", "-H", "H200", "--gpus", 8, "--isl", "2k", "--osl", 500,
        "--format", "json",
    )  # fmt: skip
    doc = json.loads(out)
    for key in ("prefill_layout", "prefill_tp", "kernels_scope", "prefill_pool_requests_per_s"):
        assert doc[key] is None, key
    assert "" not in [v for k, v in doc.items() if k not in ("profile", "calibration")]


# ---------------------------------------------------------------- 4: seq_len with isl/osl
def test_seq_len_is_the_context_used_with_a_request_mix(run):
    p = plan("llama-3-8b", "H100-SXM", 1, isl=2048, osl=500)
    assert p.seq_len == 2548 == p.context
    out, _ = run(
        "plan", "llama-3-8b", "-H", "H100", "--gpus", 1, "--isl", "2k", "--osl", 500,
        "--format", "json",
    )  # fmt: skip
    doc = json.loads(out)
    assert doc["seq_len"] == 2548 and doc["isl"] == 2048 and doc["osl"] == 500


# ---------------------------------------------------------------- 5: positions, not window
def test_longest_context_cap_is_called_max_positions_not_window(run):
    p = plan("gemma-3-1b", "RTX-4090", 1, batch=64)
    assert p.max_context == p.max_position_embeddings
    text = p.longest_context_text()
    assert "window" not in text and "max_position_embeddings" in text


# ---------------------------------------------------------------- 6: pipeline table
def test_pipeline_kernel_table_says_it_is_the_model_across_stages(run):
    p = plan("deepseek-v3", "H200", 16, tp=8, pp=2)
    attention = next(k for k in p.kernels if k["name"] == "attention")
    assert attention["calls"] == 61  # the whole model: both stages
    assert "2 pipeline stages" in p.kernels_scope and "61 layers" in p.kernels_scope
    out, _ = run("plan", "deepseek-v3", "-H", "H200", "--gpus", 16, "--tp", 8, "--pp", 2)
    assert "2 pipeline stages" in out


# ---------------------------------------------------------------- 7: error wording
def test_gpus_too_many_blames_gpus_not_an_implicit_tp(run):
    with pytest.raises(InvalidArgumentError) as exc:
        plan("deepseek-v3", "H200", 1048576)
    assert exc.value.argument == "gpus"
    _, err = run("plan", "deepseek-v3", "-H", "H200", "--gpus", 1048576, code=2)
    assert "--gpus" in err and "Invalid value for --tp" not in err
    assert "does not divide the 128 attention heads" in err
    # a tp given is still blamed as such
    _, err = run("plan", "deepseek-v3", "-H", "H200", "--gpus", 6, "--tp", 6, code=2)
    assert "--tp" in err


def test_search_unknown_dtype_names_its_option(run):
    with pytest.raises(UnknownDtypeError) as exc:
        search("deepseek-v3", "H200", [8], isl=2000, osl=500, weight_dtypes=("fp7",))
    assert exc.value.argument == "weight_dtypes"
    for flag in ("--weight-dtypes", "--kv-dtypes"):
        _, err = run(
            "search", "deepseek-v3", "-H", "H200", "--gpus", 8, "--isl", "2k", "--osl", 500,
            flag, "fp7", code=2,
        )  # fmt: skip
        assert flag in err and "fp7" in err


def test_fp8_block_as_a_dtype_points_to_the_component_formats(run):
    """A trial asked --weight-dtype fp8_block to time vLLM's block-scaled kernels: block
    scales are a format per component (--attention-dtype fp8_block ...) or the checkpoint's
    quantization_config, which the error says, in one line."""
    for args in (
        ["plan", "qwen3-30b-a3b", "-H", "H100", "--gpus", 8, "--weight-dtype", "fp8_block"],
        ["search", "qwen3-30b-a3b", "-H", "H100", "--gpus", 8, "--weight-dtypes", "fp8_block"],
    ):
        _, err = run(*args, "--isl", 2000, "--osl", 500, code=2)
        assert len(err.strip().splitlines()) == 1, err
        assert "weight_block_size [128, 128]" in err and "fp8 here is per-tensor fp8" in err
        assert "--attention-dtype fp8_block" in err
        assert "search --component-choice attention=fp8_block," in err  # search's own flag
    _, err = run("plan", "qwen3-30b-a3b", "-H", "H100", "--gpus", 8, "--weight-dtype", "fp7",
                 "--isl", 2000, "--osl", 500, code=2)  # fmt: skip
    assert "quantization_config" not in err


def test_mtp_acceptance_without_draft_tokens_is_refused_and_include_mtp_says_it_is_empty(run):
    with pytest.raises(InvalidArgumentError) as exc:
        plan("deepseek-v3", "H200", 8, isl=2000, osl=500, mtp_acceptance=0.8)
    assert exc.value.argument == "mtp_acceptance"
    _, err = run(
        "plan", "llama-3-70b", "-H", "H100-SXM", "--gpus", 4, "--isl", "2k", "--osl", 500,
        "--mtp-acceptance", 0.8, code=2,
    )  # fmt: skip
    assert "--mtp-acceptance" in err and "--mtp-tokens" in err
    p = plan("llama-3-70b", "H100-SXM", 4, include_mtp=True)
    assert any("no MTP module" in w for w in p.warnings)
    assert not any("MTP" in w for w in plan("deepseek-v3", "H200", 8, include_mtp=True).warnings)


def test_kernel_table_shows_the_class_the_device_runs():
    """fp8 weights on a GPU without fp8 tensor cores run weight-only (w8a16), MoE experts too:
    the kernel rows say so, and the MoE is timed without fp8 block-scale promotion."""
    from mlacalc.timemodel.kernel_time import run_dtype

    a100 = plan("deepseek-v3", "A100-SXM-80GB", 16, seq_len=4096)
    rows = {k["name"]: k["dtype"] for k in a100.kernels}
    assert rows["routed_experts"] == "w8a16" and rows["qkv_a_proj"] == "w8a16"
    h200 = plan("deepseek-v3", "H200", 8, seq_len=4096)
    rows = {k["name"]: k["dtype"] for k in h200.kernels}
    assert rows["routed_experts"] == "fp8_block" and rows["qkv_a_proj"] == "fp8_block"
    assert run_dtype("moe", "fp4", load_hardware("H100-SXM")) == "w4a16_mxfp4"
    assert run_dtype("attention_decode", "fp8", load_hardware("A100-SXM-80GB")) == "fp8"


def test_pipeline_stages_run_the_embedding_first_and_the_head_last():
    """With two stages the embedding runs on the first and the output head (final norm,
    lm_head, sampling) on the last: the stages' compute sums to one step's kernels, each
    counted once (the head was added to both stages)."""
    from mlacalc.cost.engine import as_model
    from mlacalc.serving.gpu_step import StepModel
    from mlacalc.serving.layout import make_layout

    m = as_model("deepseek-v3")
    lay = make_layout(m, 16, 8, None, 2, 1, False, 0)
    from mlacalc.words.dtypes import resolve_kv_layout

    sm = StepModel(m, lay, None, resolve_kv_layout("bf16"), load_hardware("H200"), None)
    st = sm.step(dec_B=8.0, dec_S=4096.0)
    kernels = sum(float(k["seconds"][0]) for k in st.kernels)
    assert float(st.compute_s[0] + st.comm_s[0]) == pytest.approx(kernels, rel=1e-9)


def test_one_attention_layer_of_a_mixed_model_names_its_kind():
    """scope="attention_layer" times the first layer: where a model's layers differ, the
    prediction names its kind and the model's pattern (it stood silently for every kind)."""
    from mlacalc import predict_time

    p = predict_time("gpt-oss-120b", "H100-SXM", "decode", 131072, 8)
    assert p.layer == "sliding(128): layer 1 of 36 layers: 18 sliding(128) + 18 full"
    assert p.to_dict()["layer"] == p.layer
    assert predict_time("qwen3-next-80b-a3b", "H100-SXM", "decode", 4096).layer.startswith(
        "linear: layer 1 of 48 layers"
    )
    assert predict_time("deepseek-v3", "H100-SXM", "decode", 4096).layer == ""
    assert predict_time("gpt-oss-120b", "H100-SXM", "decode", 4096, scope="model").layer == ""


def test_a_modelopt_export_sized_by_dtype_is_said_in_the_plan():
    """A ModelOpt export keeps its quantization outside config.json: plan sizes its weights
    by dtype and warns, naming the option (it answered in bf16 without a word)."""
    cfg = HF_CONFIGS / "deepseek-v3.1-nvfp4.config.json"
    p = plan(str(cfg), "B200", 8)
    assert any("hf_quant_config.json" in w and "--weight-dtype" in w for w in p.warnings)
    q = plan(str(cfg), "B200", 8, weight_dtype="fp4")
    assert not any("hf_quant_config.json" in w for w in q.warnings)
    assert not any("hf_quant_config" in w for w in plan("deepseek-v3", "H200", 8).warnings)


def test_disaggregated_pool_settles_at_the_first_whole_batch_that_reaches_its_target():
    """The decode rate and the requests in flight rise only on the whole (a step's time jumps
    with its tiles): the open loop settles at the first batch that serves the rate (batch 256
    of gpt-oss-120b on 2 H100s serves 25.13 requests/s; the bisection landed at 309.7), and a
    closed loop of 100,000 requests is solved without timing every batch (it took 27 s and
    8 GB timing them all at once)."""
    kw = dict(tp=2, ep=2, kv_dtype="fp8", isl=2000, osl=500, mode="disaggregated",
              prefill_gpus=2, prefill_tp=2, prefill_ep=2)  # fmt: skip
    q = plan("gpt-oss-120b", "H100-SXM", 2, request_rate=25.0, **kw)
    assert q.decode_running <= 256
    p = plan("gemma-3-1b", "H200", 1, isl=16, osl=16, concurrency=100000,
             mode="disaggregated", prefill_gpus=1)  # fmt: skip
    assert 99_000 < p.decode_running < 100_000


def test_a_context_beside_a_request_mix_is_refused_by_name():
    """plan(seq_len=..., isl=..., osl=...) sized each request at isl + osl and dropped the
    seq_len without a word (its default could not be told from a given value)."""
    with pytest.raises(InvalidArgumentError, match="seq_len"):
        plan("llama-3-8b", "H100-SXM", 1, seq_len=8192, isl=1000, osl=100, concurrency=4)
    assert plan("llama-3-8b", "H100-SXM", 1, isl=1000, osl=100, concurrency=4).seq_len == 1100
    assert plan("llama-3-8b", "H100-SXM", 1).seq_len == 131072


def test_kernel_table_names_each_attention_kernels_layer_kind(run):
    """A model of several kinds of layer: each attention kernel's row says its kind (the app's
    'layer kind' column; two bare 'attention' rows of 9 and 39 calls before). One kind: no
    column."""
    md, _ = run("plan", "mimo-v2-flash", "-H", "H200", "--gpus", "8", "--format", "markdown")
    table = md.split("by kernel", 1)[1]
    assert "| kernel | layer kind | kind |" in table
    assert "| attention | full | attention_decode | 9 |" in table
    assert "| attention | sliding(129) | attention_decode | 39 |" in table
    assert "| routed_experts |  | moe |" in table
    md, _ = run("plan", "deepseek-v4-pro", "-H", "B200", "--gpus", "8", "--format", "markdown")
    assert "| indexer_scores | csa |" in md and "| compressor | hca |" in md
    md, _ = run("plan", "llama-3-8b", "-H", "H200", "--gpus", "1", "--format", "markdown")
    assert "layer kind" not in md


def test_kv_per_token_line_of_deepseek_v4_names_the_pooled_keys(run):
    """DeepSeek-V4 has no layer keeping every token: its per-token line says the figure is the
    pooled keys averaged over the compress ratios (it said 'layers keeping every token')."""
    md, _ = run("plan", "deepseek-v4-pro", "-H", "B200", "--gpus", "8", "--format", "markdown")
    assert (
        "| KV per token per GPU (bf16), pooled keys averaged over the compress ratios | 9,848 B |"
        in md
    )
    assert "keeping every token" not in md
    md, _ = run("plan", "mimo-v2-flash", "-H", "B200", "--gpus", "8", "--format", "markdown")
    assert "layers keeping every token | 5,760 B |" in md


def test_times_note_has_no_empty_part():
    """A device with no profile note (a measured CPU set) says only the engine, not 'engine
    trtllm; )'; a profile and how it was calibrated follow the engine."""
    from mlacalc.cli.plan_cmd import times_note

    assert "(engine trtllm)," in times_note("", "")
    assert "(engine sglang; profile p: from H100)," in times_note("p", "from H100", "sglang")
    assert "(engine vllm; fallback)," in times_note("", "fallback", "vllm")


@pytest.mark.parametrize(
    "argument, value, flag",
    [
        ("expert_skew", 2.0, ("--expert-skew", "2")),
        ("routing_imbalance", 3.0, ("--routing-imbalance", "3")),
        ("routing", "balanced", ("--routing", "balanced")),
        ("rebalance", False, ("--no-rebalance",)),
    ],
)
def test_moe_only_arguments_on_a_dense_model_are_refused_by_name(run, argument, value, flag):
    # they ran silently with the numbers unchanged, where --redundant-experts was refused
    with pytest.raises(InvalidArgumentError, match="no routed experts") as exc:
        plan("llama-3-8b", "H100-SXM", 1, **{argument: value})
    assert exc.value.argument == argument
    _, err = run("plan", "llama-3-8b", "-H", "H100-SXM", "--gpus", 1, *flag, code=2)
    assert f"Invalid value for {flag[0].replace('--no-', '--')}" in err and "routed experts" in err
    # the same value on a model with experts is taken (with expert ranks: without them the
    # rank options are refused, tests/test_serving_ep_only.py)
    assert plan("mixtral-8x7b", "H200", 2, ep=2, **{argument: value}).fits


@pytest.mark.parametrize(
    "argument, value, flag, kw",
    [
        ("overlap", "tbo", ("--overlap", "tbo"), {}),
        ("dp_attention", True, ("--dp-attention",), {}),
        (
            "prefill_dp_attention",
            True,
            ("--prefill-dp-attention", "--mode", "disaggregated", "--prefill-gpus", "2"),
            dict(mode="disaggregated", prefill_gpus=2),
        ),
    ],
)
def test_moe_layout_options_on_a_dense_model_are_refused_by_name(run, argument, value, flag, kw):
    """Two-batch overlap and DP-attention are the engines' for MoE models: on a dense one they
    ran silently (Llama-3-70B TP8's decode 8.76 -> 15.34 ms with tbo; DP-attention plain data
    parallelism under another name)."""
    serving = dict(isl=1000, osl=200)
    with pytest.raises(InvalidArgumentError, match="no routed experts") as exc:
        plan("llama-3-8b", "H100-SXM", 2, **{argument: value}, **kw, **serving)
    assert exc.value.argument == argument
    _, err = run("plan", "llama-3-8b", "-H", "H100-SXM", "--gpus", 2, "--isl", 1000, "--osl",
                 200, *flag, code=2)  # fmt: skip
    assert f"Invalid value for {flag[0]}" in err and "routed experts" in err
    assert plan("mixtral-8x7b", "H200", 2, **{argument: value}, **kw, **serving).fits
    # search leaves two-batch overlap out for a dense model, and refuses it alone
    points = search("llama-3-8b", "H100-SXM", [1], isl=1000, osl=200, chunked_prefills=None)
    assert {p["overlap"] for p in points.points} == {"none"}
    with pytest.raises(InvalidArgumentError, match="no routed experts") as exc:
        search("llama-3-8b", "H100-SXM", [1], isl=1000, osl=200, overlaps=["tbo"])
    assert exc.value.argument == "overlaps"


def test_an_ep_that_does_not_divide_the_experts_names_the_redundant_experts_flag(run):
    """The error said "redundant experts (EPLB replicas) can round the slots up" without the
    argument that sets them, nor how many."""
    base = ("plan", "kimi-k2.5", "-H", "GB200", "--isl", 2000, "--osl", 500, "--dp-attention")
    _, err = run(*base, "--gpus", 72, "--ep", 72, "--redundant-experts", 8, code=2)
    assert "Invalid value for --ep" in err and "--redundant-experts 48" in err
    assert "432 slots, 6 per rank" in err
    _, err = run(*base, "--gpus", 64, "--ep", 64, "--mode", "disaggregated", "--prefill-gpus",
                 72, "--prefill-ep", 72, "--prefill-dp-attention", code=2)  # fmt: skip
    assert "Invalid value for --prefill-ep" in err and "--prefill-redundant-experts 48" in err
    with pytest.raises(InvalidArgumentError, match="redundant_experts=48") as exc:
        plan("kimi-k2.5", "GB200", 72, ep=72, dp_attention=True, redundant_experts=8)
    assert exc.value.argument == "ep"
    assert plan("kimi-k2.5", "GB200", 72, ep=72, dp_attention=True, redundant_experts=48).fits


def test_an_ep_that_does_not_divide_the_gpus_is_said_before_any_replicas(run):
    """ep 3 on 8 GPUs advised --redundant-experts 2, and following it gave "expert parallel
    degree 3 does not divide the 8 GPUs" (--prefill-ep 5: --prefill-redundant-experts 4, then
    the same); a new-user trial. Now the GPUs' error comes first, with the eps that fix it."""
    base = ("plan", "glm-5.1", "-H", "H200", "--gpus", 8, "--dp-attention", "--isl", 4000,
            "--osl", 1000, "--weight-dtype", "fp8", "--kv-dtype", "fp8")  # fmt: skip
    _, err = run(*base, "--ep", 3, code=2)
    err = " ".join(err.split())
    assert "Invalid value for --ep" in err and "does not divide the 8 GPUs" in err, err
    assert "redundant" not in err and "divides them: 2, 4, 8" in err
    _, err = run(*base, "--ep", 8, "--mode", "disaggregated", "--prefill-gpus", 8,
                 "--prefill-ep", 5, code=2)  # fmt: skip
    err = " ".join(err.split())
    assert "Invalid value for --prefill-ep" in err and "does not divide the 8 GPUs" in err, err
    assert "redundant" not in err and "divides them: 2, 4, 8" in err
    # where the experts need replicas for an ep that divides the GPUs, it says how many
    with pytest.raises(InvalidArgumentError, match="2, 3 with 2 replicated experts, 4, 6 with 2"):
        plan("glm-5.1", "H200", 12, ep=5, dp_attention=True, redundant_experts=0)


def test_formats_of_components_the_model_lacks_are_refused_in_plan_and_search(run):
    for model, comp in (("llama-3-8b", "experts"), ("mixtral-8x7b", "shared_experts")):
        with pytest.raises(InvalidArgumentError, match=f"{comp}: .* has no") as exc:
            plan(model, "H200", 2, component_dtypes={comp: "fp8"})
        assert exc.value.argument == "component_dtypes"
    with pytest.raises(InvalidArgumentError, match="has no routed experts") as exc:
        search("llama-3-8b", "H100-SXM", [1], isl=1000, osl=200, component_choices=[
            {"experts": "nvfp4"}])  # fmt: skip
    assert exc.value.argument == "component_choices"
    # the command line names the flag given (it named component_dtypes)
    for flag, model in (
        ("--expert-dtype", "llama-3-8b"),
        ("--shared-expert-dtype", "mixtral-8x7b"),
    ):
        _, err = run("plan", model, "-H", "H200", "--gpus", 2, flag, "fp8", code=2)
        assert err.startswith(f"mlacalc: error: Invalid value for {flag}: ") and "has no" in err
    _, err = run("search", "llama-3-8b", "-H", "H100-SXM", "--gpus", 1, "--isl", 1000, "--osl",
                 200, "--component-choice", "experts=nvfp4", code=2)  # fmt: skip
    assert "Invalid value for --component-choice: experts: " in err


def test_serving_only_arguments_without_a_request_mix_are_refused(run):
    # a capacity plan runs no prompt: these changed nothing, silently
    for argument, value in (("output_lag_steps", 2), ("prefill_pass", "separate")):
        with pytest.raises(InvalidArgumentError, match="give isl and osl") as exc:
            plan("llama-3-8b", "H100-SXM", 1, **{argument: value})
        assert exc.value.argument == argument
        flag = "--" + argument.replace("_", "-")
        _, err = run("plan", "llama-3-8b", "-H", "H100-SXM", "--gpus", 1, flag, value, code=2)
        assert f"Invalid value for {flag}" in err and "--isl" in err
    _, err = run(
        "plan", "llama-3-8b", "-H", "H100-SXM", "--gpus", 1, "--chunked-prefill", 512, code=2
    )
    assert "--chunked-prefill" in err and "--isl" in err
    # the library takes an engine's settings, chunked prefill among them, for a capacity plan
    assert plan("llama-3-8b", "H100-SXM", 1, **engine_settings("vllm")).fits
    # an engine's chunked-prefill default is not one given: a capacity plan under it runs
    out, _ = run("plan", "llama-3-8b", "-H", "H100-SXM", "--gpus", 1, "--engine", "sglang")
    assert "chunked prefill none (no request mix)" in out


def test_options_with_nothing_to_act_on_are_refused_in_plan_and_search(run):
    """--model-path without --launch, --all with a table, and search's aggregated-engine
    options with no aggregated mode ran silently, changing nothing."""
    base = ["search", "llama-3-8b", "-H", "H100-SXM", "--gpus", 1, "--isl", 1000, "--osl", 200]
    for extra, flag in (
        (["--model-path", "x"], "--model-path"),
        (["--all"], "--all"),
        (["--modes", "disaggregated", "--output-lag-steps", 2], "--output-lag-steps"),
        (["--modes", "disaggregated", "--prefill-pass", "separate"], "--prefill-pass"),
    ):
        _, err = run(*base, *extra, code=2)
        assert f"Invalid value for {flag}: " in err, (extra, err)
    _, err = run("plan", "llama-3-8b", "-H", "H100-SXM", "--gpus", 1, "--model-path", "x", code=2)
    assert "Invalid value for --model-path: " in err and "--launch" in err
    with pytest.raises(InvalidArgumentError, match="aggregated") as exc:
        search("llama-3-8b", "H100-SXM", [1], isl=1000, osl=200, modes=("disaggregated",),
               output_lag_steps=1)  # fmt: skip
    assert exc.value.argument == "output_lag_steps"


def test_plan_json_cache_fields_say_what_the_table_says_for_sliding_layers(run, tmp_path):
    """Gemma-4-31B (NVFP4) on a B200 at fp8: 10 full layers keep every token (K and V of 4
    heads of 512 in fp8: 40,960 B a token, as the table says) and 50 sliding layers a window
    (400 MiB a sequence). The JSON said 450,560 B a token (the sliding
    layers counted per token) and 289,680 tokens a GPU from it."""
    cfg = tmp_path / "gemma4.yaml"
    run("import-hf", HF_CONFIGS_2 / "nvidia--Gemma-4-31B-IT-NVFP4.config.json", "-o", cfg)
    args = ["plan", cfg, "-H", "B200", "--gpus", 1, "--kv-dtype", "fp8", "--engine", "vllm"]
    args += ["--isl", "32k", "--osl", "2k", "--concurrency", 32]
    doc = json.loads(run(*args, "--format", "json")[0])
    assert doc["kv_bytes_per_token_per_gpu"] == 40_960
    assert doc["kv_bytes_per_token_full_layers_per_gpu"] == 40_960
    assert doc["kv_bytes_fixed_per_sequence_per_gpu"] == 400 * 2**20
    assert doc["kv_tokens_per_gpu"] is None
    seq = 40_960 * (32_768 + 2_048) + 400 * 2**20
    assert doc["kv_bytes_per_sequence_per_gpu"] == seq
    # 77 of a B200's 180 GiB (70 when the catalogue held 180e9 B)
    assert doc["max_batch"] == doc["kv_budget_per_gpu_bytes"] // seq == 77
    table = run(*args)[0]
    assert "40,960 B" in table and "450,560" not in table
    rows = run(*args, "--format", "csv")[0]
    assert "kv_bytes_per_token_per_gpu,40960" in rows and "450560" not in rows


def test_json_and_csv_weight_dtype_is_what_a_checkpoint_stores(run, tmp_path):
    """An NVFP4 export (config.json says bfloat16: its kept tensors) sized as stored: plan's
    and search's JSON and CSV said "weight_dtype": "bf16" beside "weight_format": "checkpoint
    nvfp4 group 16"; they say fp4, what the checkpoint stores its quantized weights in.
    DeepSeek-V3's block-fp8 checkpoint stays fp8, a dtype asked stays as asked."""
    cfg = tmp_path / "gemma4.yaml"
    run("import-hf", HF_CONFIGS_2 / "nvidia--Gemma-4-31B-IT-NVFP4.config.json", "-o", cfg)
    mix = ["--isl", 2000, "--osl", 500]
    doc = json.loads(run("plan", cfg, "-H", "B200", "--gpus", 1, *mix, "--format", "json")[0])
    assert (doc["weight_dtype"], doc["weight_format"]) == ("fp4", "checkpoint nvfp4 group 16")
    asked = run("plan", cfg, "-H", "B200", "--gpus", 1, "--weight-dtype", "fp8", *mix,
                "--format", "json")[0]  # fmt: skip
    # the embedding (tied: no head) kept as the checkpoint stores it, bf16
    asked = json.loads(asked)
    assert (asked["weight_dtype"], asked["weight_format"]) == ("fp8", "fp8, embeddings bf16")
    v3 = run("plan", "deepseek-v3", "-H", "B200", "--gpus", 8, *mix, "--format", "json")[0]
    assert json.loads(v3)["weight_dtype"] == "fp8"
    # the JSON and the CSV of the search on one GPU (both formats are among its points: 268
    # rows, 0.6 s; on 1 and 2 GPUs, as the JSON's was, 1,108 rows, 2.4 s: the GPUs are not
    # the point)
    one = ["search", cfg, "-H", "B200", "--gpus", 1, *mix]
    doc = json.loads(run(*one, "--all", "--format", "json")[0])
    points = doc["frontier"] + doc["points"] + [doc["best"]]
    stored = [p for p in points if p["weight_format"].startswith("checkpoint ")]
    assert stored and all(p["weight_dtype"] == "fp4" for p in stored)
    assert all(
        (p["weight_dtype"], p["weight_format"]) == ("fp8", "fp8, embeddings bf16")
        for p in points
        if p not in stored
    )
    rows = list(csv.DictReader(io.StringIO(run(*one, "--all", "--format", "csv")[0])))
    assert {(r["weight_dtype"], r["weight_format"]) for r in rows} == {
        ("fp4", "checkpoint nvfp4 group 16"),
        ("fp8", "fp8, embeddings bf16"),
    }


def test_import_hf_says_qwen35s_mtp_layer_is_not_imported_and_plan_cites_why(run, tmp_path):
    """Qwen3.5-122B's config.json has mtp_num_hidden_layers: 1. The import wrote
    num_nextn_predict_layers: 0 without a word, and plan refused --mtp-tokens with
    "num_nextn_predict_layers is 0: none is counted"; now import-hf says the MTP layer was
    not imported and why, and the file's notes carry it to plan's refusal."""
    cfg = tmp_path / "q35.yaml"
    _, err = run("import-hf", HF_CONFIGS_2 / "Qwen--Qwen3.5-122B-A10B.config.json", "-o", cfg)
    assert "not imported: the MTP layer (mtp_num_hidden_layers: 1) not counted" in err
    assert "Hugging Face class builds none" in err and "--mtp-tokens" in err
    assert mlacalc.load_model(str(cfg)).num_nextn_predict_layers == 0
    args = ["plan", cfg, "-H", "B200", "--gpus", 4, "--isl", "2k", "--osl", 500]
    _, err = run(*args, "--mtp-tokens", 2, code=2)
    assert "its MTP layers are not counted" in err and "none is counted" not in err


@pytest.mark.parametrize(
    ("config", "why"),
    [
        ("deepseek-ai--DeepSeek-V4-Pro", "MTP module is not modelled"),
        ("Qwen--Qwen3.5-122B-A10B", "its MTP layers are not counted"),
    ],
)
def test_import_hf_says_the_mtp_drop_once_where_it_is_read(run, tmp_path, config, why):
    """import-hf of DeepSeek-V4-Pro said its MTP drop three times: the YAML's '# derived'
    line, its notes (the same words) and the terminal. The file keeps it once, in notes (the
    model's record, which plan's refusal of --mtp-tokens reads for Qwen3.5), and the terminal
    says it once; plan still refuses --mtp-tokens, saying why."""
    out = tmp_path / "m.yaml"
    _, err = run("import-hf", HF_CONFIGS_2 / f"{config}.config.json", "-o", out)
    text = out.read_text()
    assert text.count("MTP layer") == 1 and "\nnotes: 'the MTP layer" in text, text[:800]
    assert err.count("not counted") == 1 and "not imported: the MTP layer" in err
    assert mlacalc.load_model(str(out)).num_nextn_predict_layers == 0
    args = ["plan", out, "-H", "B200", "--gpus", 8, "--isl", "2k", "--osl", 500]
    _, err = run(*args, "--mtp-tokens", 1, code=2)
    assert why in err and "Traceback" not in err


def test_fewer_kv_heads_than_tp_is_said():
    """2 KV heads at TP8 gave the same per-GPU cache as 8 heads with no sentence in plan (each
    head is copied onto 4 GPUs; convert's view said it): a new-user trial."""
    kw = dict(kv_dtype="fp8", isl=4000, osl=1000, concurrency=64, engine="vllm")
    few = plan("qwen3-30b-a3b", "H200", 8, **kw)  # 4 KV heads
    (said,) = [w for w in few.warnings if "KV heads, fewer than" in w]
    assert "(TP8)" in said and "copied onto 2 GPUs" in said and "save no cache memory" in said
    assert "DP-attention" in said  # a MoE model: the attention can split by sequences
    # DeepSeek-V4's one latent (as MLA's) is the design, not a head split short (a review)
    v4 = plan("deepseek-v4-pro", "B200", 8, isl=1000, osl=200, concurrency=8, engine="sglang")
    assert not [w for w in v4.warnings if "fewer than" in w]
    assert not [w for w in plan("qwen3-30b-a3b", "H200", 4, **kw).warnings if "fewer than" in w]
    assert not [w for w in plan("llama-3-70b", "H200", 8, **kw).warnings if "fewer than" in w]


def test_a_kv_dtype_the_engine_lacks_is_said_naming_both_options():
    """int4 KV under vLLM and fp4/nvfp4 KV under TensorRT-LLM for MLA were taken with only a
    timing caveat (a new-user trial); the formats each engine offers are from recall."""
    kw = dict(weight_dtype="fp8", isl=4000, osl=1000, concurrency=64)

    def said(model, kv, engine):
        return [w for w in plan(model, "B200", 8, kv_dtype=kv, engine=engine, **kw).warnings
                if "under --engine" in w]  # fmt: skip

    (w,) = said("kimi-k2.5", "int4", "vllm")
    assert "--kv-dtype int4 under --engine vllm" in w and "vLLM offers no int4" in w
    (w,) = said("glm-5.1", "nvfp4", "trtllm")
    assert "offers no nvfp4 KV cache for MLA" in w
    assert said("glm-5.1", "fp4", "trtllm")
    assert not said("llama-3-70b", "nvfp4", "trtllm")  # its GQA kernels read NVFP4
    assert not said("glm-5.1", "fp8", "sglang") and not said("kimi-k2.5", "fp8", "vllm")


def test_engine_kv_formats_offer_the_sparse_layout_to_dsa_models_only():
    """A review: int8 KV on Qwen3-8B under vLLM listed fp8_ds_mla (FlashMLA's sparse layout, for
    DSA models) among the formats to use instead; fp8_ds_mla on DeepSeek-V3 was said twice."""
    kw = dict(isl=1000, osl=200, concurrency=8, engine="vllm")
    (w,) = [w for w in plan("qwen3-8b", "H100-SXM", 1, kv_dtype="int8", **kw).warnings
            if "offers no" in w]  # fmt: skip
    assert "fp8_ds_mla" not in w and "fp8_e5m2" in w
    said = plan("deepseek-v3", "H200", 8, kv_dtype="fp8_ds_mla", **kw).warnings
    assert len([w for w in said if "fp8_ds_mla" in w]) == 1


def test_dense_dp_attention_refusal_says_the_engines_run_it_with_moe_layers(run):
    """The refusal said a dense model's DP-attention is plain data parallelism with the same
    figures, but --tp 1 --dp 8 replicas each hold the whole model (a converted Llama-3.1-70B
    does not fit where a TP-sharded MLP would): it now says the engines run DP-attention only
    with MoE layers (from recall) and what to give instead, in plan and in search."""
    with pytest.raises(InvalidArgumentError) as exc:
        plan("llama-3.1-70b", "H200", 8, dp_attention=True)
    words = str(exc.value)
    assert "run DP-attention only for models with MoE layers" in words and "from recall" in words
    # the library's arguments and the command line's options (it said "give tp, or dp
    # replicas" on the command line too, which has --tp and --dp)
    assert "give tp (--tp), or dp replicas (dp, --dp) where the whole model fits one" in words
    assert "plain data parallelism" not in words
    _, err = run("search", "llama-3-8b", "-H", "H200", "--gpus", 8, "--isl", 2000, "--osl", 500,
                 "--dp-attention", "on", code=2)  # fmt: skip
    assert "only for models with MoE layers" in err and "plain data parallelism" not in err
    assert "use tp (--tp), or dp replicas" in " ".join(err.split())
    _, err = run("convert", "llama-3-8b", "--ranks", "256,,512", "-H", "H100", code=2)
    assert "--ranks" in err and "'256,,512' has an empty entry" in err  # it dropped it


def test_a_plan_that_does_not_fit_names_no_provenance_of_times_it_does_not_give(run):
    """trial12: "Times are the kernel time model's predictions" and an "Expected error" line
    printed under a plan that fits no weights and shows no time."""
    out, _ = run("plan", "deepseek-v3", "-H", "MI300X", "--gpus", "2", "--engine", "vllm")
    flat = " ".join(out.split())
    assert "No times: the plan does not fit (the 'fits' row says why and what to change)." in flat
    assert "Times are" not in flat and "Expected error" not in flat


def test_a_borrowed_fit_is_said_in_words(run):
    """trial12: "elementwise:bf16 has no fit: fixed_s, eff_memory of quantize:fp8" named
    parameters no output explains."""
    out, _ = run("plan", "llama-3-70b", "-H", "H200", "--gpus", "4", "--isl", "2000",
                 "--osl", "500")  # fmt: skip
    flat = " ".join(out.split())
    assert (
        "elementwise:bf16 (no fit of its own) takes its fixed cost a call and memory-bandwidth "
        "efficiency from quantize:fp8" in flat
    )
    assert "fixed_s" not in flat and "eff_memory" not in flat
