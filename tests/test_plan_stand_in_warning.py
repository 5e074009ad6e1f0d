"""A plan whose decode step is partly timed by another engine's kernel class (a stand-in where
the engine's own tables time no such kernel) says so as a warning with that part's share of the
step, not only inside the calibration line (a trial compared SGLang and vLLM on Qwen3 fp8
experts, SGLang's timed by TensorRT-LLM's table, 2.4x apart, without seeing it)."""

import json
import re

import mlacalc
from mlacalc.serving.provenance import STAND_IN_WARN_SHARE

ARGS = dict(tp=8, ep=8, weight_dtype="fp8", isl=2000, osl=500)


def _stand_ins(p) -> list[str]:
    return [w for w in p.warnings if re.search(r"\b(is|are) timed by the", w)]


def test_sglang_fp8_experts_timed_by_trtllm_are_warned_with_their_share():
    p = mlacalc.plan("qwen3-30b-a3b", "H200", 8, engine="sglang", **ARGS)
    assert "stand-in: moe:fp8 from trtllm" in p.calibration
    (w,) = _stand_ins(p)
    assert w.startswith("routed_experts (") and "moe:fp8 fit from trtllm" in w
    assert "not timed by SGLang's own kernel tables" in w
    # the share, from the plan's own kernel list (all calls of each kernel)
    total = sum(k["seconds"] for k in p.kernels)
    experts = sum(k["seconds"] for k in p.kernels if k["name"] == "routed_experts")
    share = int(re.search(r"\((\d+)% of the decode step", w)[1])
    assert share == round(100 * experts / total) and experts / total >= STAND_IN_WARN_SHARE


def test_an_engine_timed_by_its_own_tables_is_not_warned():
    for engine in ("vllm", "trtllm"):  # both time per-tensor fp8 experts by their own tables
        p = mlacalc.plan("qwen3-30b-a3b", "H200", 8, engine=engine, **ARGS)
        assert "stand-in" not in p.calibration and not _stand_ins(p), engine
    p = mlacalc.plan("deepseek-v3", "H200", 8, tp=8, seq_len=32768)  # the capacity route
    assert not _stand_ins(p)


def test_the_cli_prints_it_and_json_carries_it(run):
    cli = "plan qwen3-30b-a3b -H H200 --gpus 8 --tp 8 --ep 8 --weight-dtype fp8 --engine sglang"
    out, _ = run(*cli.split(), "--isl", "2000", "--osl", "500", "--format", "json")
    assert any("is timed by the moe:fp8 fit" in w for w in json.loads(out)["warnings"])
    out, _ = run(*cli.split(), "--isl", "2000", "--osl", "500")
    # the table's cell borders out (where the warning's lines wrap moved with the batch)
    assert "routed_experts (" in out and "is timed by the moe:fp8" in " ".join(
        out.replace("│", " ").split()
    )


def test_a_kernel_of_several_layer_kinds_is_named_once():
    """GLM-5.1 with shared indexer layers runs 'attention' in its dsa and dsa-shared layers:
    the stand-in line named it once per layer kind ('attention, attention ... is timed by')."""
    glm = mlacalc.load_model("glm-5.1").with_changes(shared_indexer_layers=[2, 4, 6, 8])
    p = mlacalc.plan(glm, "B200", 8, engine="vllm", **ARGS)
    (w,) = [w for w in _stand_ins(p) if "mla_decode" in w]
    names = w.split(" (")[0].split(", ")
    assert names == ["attention"] and "attention is timed by" not in w, w
    assert w.startswith("attention (") and ") is timed by the mla_decode" in w, w


def test_search_says_its_best_points_stand_ins_as_plan_of_it_does():
    """A trial's SGLang and vLLM searches for DeepSeek-V3 agreed within 0.1%, most of both
    steps timed by one engine's fits, said only inside the calibration line: the search's
    warnings and ``prediction`` carry the best point's stand-ins as plan of that point does."""
    r = mlacalc.search(
        "qwen3-30b-a3b", "H200", gpus=[8], engine="sglang", weight_dtypes=("fp8",),
        isl=2000, osl=500, ttft=2.0, tpot=0.05,
    )  # fmt: skip
    said = _stand_ins(r)
    assert any(w.startswith("routed_experts (") and "moe:fp8 fit" in w for w in said), said
    route = r.prediction
    assert route["engine_route"] == "partly_stand_in" and route["stand_in_share"] > 0.05
    assert {s["class"] for s in route["stand_ins"]} >= {"moe:fp8"}
    b = r.best
    p = mlacalc.plan(
        "qwen3-30b-a3b", "H200", b["decode_gpus"], engine="sglang", tp=b["tp"], ep=b["ep"],
        dp_attention=b["dp_attention"], weight_dtype="fp8", isl=2000, osl=500,
        concurrency=b["concurrency"], kv_dtype=b["kv_dtype"],
    )  # fmt: skip
    assert p.prediction["engine_route"] == "partly_stand_in"
