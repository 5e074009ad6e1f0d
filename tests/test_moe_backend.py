"""TensorRT-LLM's MoE backend as a choice (``moe_backend``, ``--moe-backend``): TensorRT-LLM-gen's
MoE times nvfp4 experts on data-centre Blackwell with the B200 table's min-latency class."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import mlacalc
from mlacalc.hardware.catalogue import load_hardware
from mlacalc.timemodel.kernel_time import run_class
from mlacalc.timemodel.moe_time import TRTLLM_GEN_MAX_TILE, trtllm_gen_row_tile
from mlacalc.timemodel.profile import load_profile
from mlacalc.words.errors import InvalidArgumentError
from mlacalc.words.kernels import MIN_LATENCY_MOE, TRTLLM_GEN_MOE, KernelBatch

TABLE = (
    Path(mlacalc.__file__).parent / "data/measured/b200_sxm/moe/trtllm/1.3.0rc20/moe_perf.parquet"
)

#: DeepSeek-V3 on 8 B200 under TensorRT-LLM, fp4 weights: a decode step of 64 sequences, whose
#: routed experts see 64 tokens (TP8)
V3 = dict(seq_len=4096, batch=64, weight_dtype="fp4", engine="trtllm")


def _experts(p):
    return next(k for k in p.kernels if k["name"] == "routed_experts")


@pytest.fixture(scope="module")
def plans():
    return {
        b: mlacalc.plan("deepseek-v3", "B200", 8, moe_backend=b, **V3)
        for b in (None, "cutlass", "trtllm-gen")
    }


def test_trtllm_gen_times_the_min_latency_class(plans):
    gen, cutlass, default = plans["trtllm-gen"], plans["cutlass"], plans[None]
    assert _experts(gen)["variant"] == MIN_LATENCY_MOE
    assert _experts(cutlass)["variant"] == "" and _experts(default)["variant"] == ""
    assert "moe:nvfp4:moe_torch_flow_min_latency" in gen.moe_kernel
    assert cutlass.moe_kernel == default.moe_kernel == "CUTLASS MoE (moe:nvfp4)"
    assert gen.moe_backend == "trtllm-gen" and default.moe_backend is None
    # cutlass is the default: the same step
    assert cutlass.decode_step_s == default.decode_step_s
    assert gen.decode_step_s < cutlass.decode_step_s


def test_trtllm_gen_is_faster_by_the_tables_ratio(plans):
    """The routed experts' time with TensorRT-LLM-gen's MoE over CUTLASS's, against the
    shipped table's ratio of the two kernels over the calls both time of DeepSeek-V3's experts
    (hidden 7168, 256 experts, top-8) at the step's 64 tokens (median over TP, EP and routing:
    0.51; the model gives 0.46)."""
    pd = pytest.importorskip("pandas")
    pq = pytest.importorskip("pyarrow.parquet")
    t = pq.read_table(TABLE).to_pandas()
    t = t[(t.moe_dtype == "nvfp4") & (t.hidden_size == 7168) & (t.num_experts == 256)]
    t = t[(t.topk == 8) & (t.num_tokens == 64)]
    keys = ["inter_size", "moe_tp_size", "moe_ep_size", "distribution"]
    cut = t[t.kernel_source == "moe_torch_flow_cutlass"].set_index(keys).latency
    gen = t[t.kernel_source == "moe_torch_flow_min_latency"].set_index(keys).latency
    both = pd.concat([cut.rename("c"), gen.rename("g")], axis=1, join="inner")
    assert len(both) >= 20
    table = float(np.median(both.g / both.c))
    e_gen, e_cut = _experts(plans["trtllm-gen"]), _experts(plans["cutlass"])
    assert e_gen["calls"] == e_cut["calls"]
    ratio = e_gen["seconds"] / e_cut["seconds"]
    assert 0.3 < table < 0.7
    assert abs(ratio - table) < 0.12, (ratio, table)


def test_step_batch_takes_the_mapped_row_tile():
    """A step's experts marked for TensorRT-LLM-gen run the min-latency class with the row
    tile its rows were mapped with (the mean load's power of two, 8..256)."""
    hw = load_hardware("B200")
    tokens = np.array([1.0, 64.0, 4096.0])
    n = len(tokens)
    shape = {
        "tokens": tokens,
        "hidden": np.full(n, 7168.0),
        "inter": np.full(n, 256.0),
        "experts": np.full(n, 256.0),
        "topk": np.full(n, 8.0),
        TRTLLM_GEN_MOE: np.ones(n),
    }
    batch = KernelBatch("moe", "fp4", np.ones(n), np.ones(n), np.ones(n), shape, MIN_LATENCY_MOE)
    run, _, _, how = run_class(batch, hw, load_profile("fit-b200-sxm"))
    assert (run.dtype, run.variant) == ("nvfp4", MIN_LATENCY_MOE)
    want = trtllm_gen_row_tile(tokens, np.full(n, 8.0), np.full(n, 256.0), 256.0)
    assert np.array_equal(run.shape["row_tile"], want)
    assert list(want) == [8.0, 8.0, 128.0] and TRTLLM_GEN_MAX_TILE["nvfp4"] == 256.0
    assert how.startswith("calibrated on B200")


def test_predict_time_agrees():
    kw = dict(batch=8, weight_dtype="fp4", scope="model")
    cut = mlacalc.predict_time("deepseek-v3", "B200", "decode", 4096, moe_backend="cutlass", **kw)
    dflt = mlacalc.predict_time("deepseek-v3", "B200", "decode", 4096, **kw)
    gen = mlacalc.predict_time(
        "deepseek-v3", "B200", "decode", 4096, moe_backend="trtllm-gen", **kw
    )
    assert cut.seconds == dflt.seconds and gen.seconds < cut.seconds
    with pytest.raises(InvalidArgumentError, match=r"^moe_backend: applies to a whole step"):
        mlacalc.predict_time(
            "deepseek-v3", "B200", "decode", 4096, batch=8, weight_dtype="fp4",
            moe_backend="trtllm-gen",
        )  # fmt: skip


@pytest.mark.parametrize(
    "change, words",
    [
        (dict(engine="sglang"), "TensorRT-LLM's MoE backend"),
        (dict(engine="vllm"), "vLLM picks its own"),
        (dict(hardware="H200"), "data-centre Blackwell"),
        (dict(weight_dtype="fp8"), "not fp8"),
        (dict(moe_backend="trtllm"), "must be one of cutlass, trtllm-gen"),
        (dict(model="llama-3.1-70b"), "no routed experts"),
    ],
)
def test_refused_where_it_does_not_apply(change, words):
    args = dict(model="deepseek-v3", hardware="B200", gpus=8, moe_backend="trtllm-gen", **V3)
    args.update(change)
    with pytest.raises(InvalidArgumentError, match=r"^moe_backend: ") as err:
        mlacalc.plan(**args)
    assert words in str(err.value) and "\n" not in str(err.value)


def test_cutlass_refused_where_its_tables_time_another_kernel():
    """DeepSeek-V3's checkpoint as stored: block-scaled fp8 experts, DeepGEMM's on B200."""
    with pytest.raises(InvalidArgumentError, match="DeepGEMM"):
        mlacalc.plan("deepseek-v3", "B200", 8, seq_len=4096, batch=8, moe_backend="cutlass")
    p = mlacalc.plan("deepseek-v3", "B200", 8, seq_len=4096, batch=8)
    assert p.moe_kernel == "DeepGEMM's grouped GEMM (moe:fp8_block)"


def test_fp8_comparison_step_keeps_its_class():
    """fp4 weights' warning compares with fp8 weights' step under the same arguments: the
    choice does not apply there and the fp8 step is timed as before (no error)."""
    p = mlacalc.plan("deepseek-v3", "B200", 8, moe_backend="trtllm-gen", **V3)
    assert p.fits


PLAN = ("plan", "deepseek-v3", "-H", "B200", "--gpus", 8, "--seq-len", "4k", "--batch", 64)


def test_cli_plan_says_the_kernel_and_launches_it(run):
    out, _ = run(
        *PLAN, "--weight-dtype", "fp4", "--moe-backend", "trtllm-gen", "--launch", "trtllm"
    )
    assert "moe:nvfp4:moe_torch_flow_min_latency" in out
    assert "moe_config:\n  backend: TRTLLM\n" in out
    out, _ = run(*PLAN, "--weight-dtype", "fp4", "--launch", "trtllm")
    assert "CUTLASS MoE (moe:nvfp4)" in out and "backend:" not in out
    # beside the load balancer's slots: one moe_config
    out, _ = run(
        *PLAN, "--weight-dtype", "fp4", "--moe-backend", "trtllm-gen", "--ep", 8,
        "--redundant-experts", 32, "--launch", "trtllm", "--format", "json",
    )  # fmt: skip
    doc = json.loads(out)
    assert "moe_config:\n  load_balancer:\n    num_slots: 288\n  backend: TRTLLM\n" in doc["launch"]
    assert doc["moe_backend"] == "trtllm-gen" and "min_latency" in doc["moe_kernel"]
    _, err = run(
        *PLAN, "--weight-dtype", "fp4", "--moe-backend", "trtllm-gen", "-H", "H200", code=2
    )
    assert "--moe-backend" in err and "data-centre Blackwell" in err


def test_cli_help_lists_it(run):
    for command in ("plan", "search"):
        out, _ = run(command, "--help")
        assert "--moe-backend [cutlass|trtllm-gen]" in out


def test_search_takes_one_backend_for_every_point():
    kw = dict(
        isl=1000, osl=200, weight_dtypes=["fp4"], engine="trtllm", tp=[8], ep="none",
        modes=["aggregated"], overlaps=["none"], batches=[64],
    )  # fmt: skip
    cut = mlacalc.search("deepseek-v3", "B200", [8], **kw)
    gen = mlacalc.search("deepseek-v3", "B200", [8], moe_backend="trtllm-gen", **kw)
    assert gen.best["tpot_s"] < cut.best["tpot_s"]
    assert gen.constraints()["moe_backend"] == "trtllm-gen"
    assert "--moe-backend trtllm-gen" in gen.constraints_text()
    assert "backend: TRTLLM" in gen.launch_commands("trtllm")[0][1]
    assert "backend:" not in cut.launch_commands("trtllm")[0][1]
    with pytest.raises(InvalidArgumentError, match=r"^moe_backend: .*not fp8"):
        mlacalc.search(
            "deepseek-v3", "B200", [8], moe_backend="trtllm-gen", **{**kw, "weight_dtypes": ["fp8"]}
        )


def test_a_search_point_whose_experts_do_not_take_it_goes_without_it(run):
    """Searched over fp8 and fp4 weights with ``trtllm-gen``, each point carries the backend
    only where its experts take it (fp4; fp8's are DeepGEMM's block-scaled MoE): an fp8 best
    point's plan command and launch lines leave it out, and that plan command runs (a review's
    case gave ``--moe-backend trtllm-gen --weight-dtype fp8``, which plan refuses, and wrote
    ``backend: TRTLLM`` for experts timed as DeepGEMM's)."""
    kw = dict(
        isl=1000, osl=1000, weight_dtypes=["fp8", "fp4"], kv_dtypes=["fp8"], engine="trtllm",
        tp=[8], modes=["aggregated"], overlaps=["none"], chunked_prefills=None, batches=[1, 2, 4],
    )  # fmt: skip
    r = mlacalc.search("deepseek-v3", "B200", [8], moe_backend="trtllm-gen", **kw)
    assert {p["weight_dtype"] for p in r.points} == {"fp8", "fp4"}
    for p in r.points:
        want = "trtllm-gen" if p["weight_dtype"] == "fp4" else None
        assert p["moe_backend"] == want, p["weight_dtype"]
    fp8 = next(p for p in r.points if p["weight_dtype"] == "fp8" and p["fits"])
    assert "backend:" not in r.launch_commands("trtllm", point=fp8)[0][1]
    fp4 = next(p for p in r.points if p["weight_dtype"] == "fp4" and p["fits"])
    assert "backend: TRTLLM" in r.launch_commands("trtllm", point=fp4)[0][1]
    # a TPOT target only fp8's quickest point meets, so fp8 is the best: between the two
    # dtypes' quickest TPOTs (it had been a fixed 8.4 ms, which a shorter B200 decode chain
    # let fp4's batch-2 point meet)
    quickest = {
        d: min(p["tpot_s"] for p in r.points if p["weight_dtype"] == d and p["fits"])
        for d in ("fp8", "fp4")
    }
    assert quickest["fp8"] < quickest["fp4"]
    target = f"{(quickest['fp8'] + quickest['fp4']) / 2 * 1e3:.4f}ms"
    out, _ = run(
        "search", "deepseek-v3", "-H", "B200", "--gpus", 8, "--isl", 1000, "--osl", 1000,
        "--weight-dtypes", "fp8,fp4", "--kv-dtypes", "fp8", "--modes", "aggregated",
        "--chunked-prefills", "none", "--tp", 8, "--batches", "1,2,4", "--engine", "trtllm",
        "--moe-backend", "trtllm-gen", "--tpot", target, "--launch", "trtllm",
    )  # fmt: skip
    flat = " ".join(out.split())
    command = (
        flat.split("The same figures: mlacalc ", 1)[1].split(" # ")[0].split(" trtllm-serve")[0]
    )
    assert "--weight-dtype fp8" in command and "--moe-backend" not in command
    assert "backend: TRTLLM" not in out
    run(*command.split()[: command.split().index("--engine") + 2])  # the plan command runs


def test_cli_search_plan_command_carries_it(run):
    out, _ = run(
        "search", "deepseek-v3", "-H", "B200", "--gpus", 8, "--isl", 1000, "--osl", 200,
        "--weight-dtypes", "fp4", "--tp", 8, "--ep", "none", "--modes", "aggregated",
        "--moe-backend", "trtllm-gen", "--tpot", "100ms",
    )  # fmt: skip
    flat = " ".join(out.split())  # the plan command may wrap
    command = flat.split("The same figures: mlacalc plan deepseek-v3", 1)[1].split("--isl")[0]
    assert "--moe-backend trtllm-gen" in command
    assert "# searched under: --tp 8 --ep none --moe-backend trtllm-gen" in out


def test_experts_behind_deepep_take_it():
    """EP8 under DP-attention: the experts behind DeepEP's exchange run the chosen class over
    the copies the rank receives (moe_time.engine_moe_tiles' DeepEP branch)."""
    kw = dict(tp=1, dp_attention=True, ep=8, seq_len=4096, batch=256, weight_dtype="fp4")
    cut = _experts(mlacalc.plan("deepseek-v3", "B200", 8, **kw))
    gen = _experts(mlacalc.plan("deepseek-v3", "B200", 8, moe_backend="trtllm-gen", **kw))
    assert cut["variant"] == gen["variant"] == "deepep"
    assert gen["seconds"] < 0.8 * cut["seconds"]


def test_the_warning_names_the_option_and_goes_with_it(plans):
    """The plan's warning that NVFP4 experts are timed as the CUTLASS MoE names the option that
    times TensorRT-LLM-gen's, and says nothing once it is chosen."""
    for b in (None, "cutlass"):
        said = [w for w in plans[b].warnings if "TensorRT-LLM-gen" in w]
        assert len(said) == 1 and "--moe-backend trtllm-gen" in said[0]
        assert "moe_backend='trtllm-gen'" in said[0] and "not timed" not in said[0]
    assert "--moe-backend cutlass" in next(w for w in plans["cutlass"].warnings if "CUTLASS" in w)
    assert not [w for w in plans["trtllm-gen"].warnings if "TensorRT-LLM-gen" in w]


def test_a_profile_without_the_class_says_it_times_its_fallback():
    """``trtllm-gen`` under a profile that holds no TensorRT-LLM-gen class (H100's fit: no
    Blackwell table) says the experts were timed with the profile's fallback, not the class it
    lacks (a review: the words named moe:nvfp4:moe_torch_flow_min_latency under fit-h100-sxm)."""
    kw = dict(moe_backend="trtllm-gen", **V3)
    own = mlacalc.plan("deepseek-v3", "B200", 8, **kw)
    assert own.moe_kernel == f"TensorRT-LLM-gen's MoE (moe:nvfp4:{MIN_LATENCY_MOE})"
    other = mlacalc.plan("deepseek-v3", "B200", 8, profile="fit-h100-sxm", **kw)
    assert "which the profile has no fit of" in other.moe_kernel
    assert "fallback" in other.moe_kernel
