"""search's best point says what plan of it says of a prefill pool busy 90% of its time or more
(a trial's searches recommended pools 94% and 99% busy: plan of each warned, the search did
not)."""

import json
import shlex

from mlacalc.serving.search import search

ARGS = dict(isl=8192, osl=1024, tpot=0.05, modes=("disaggregated",), engine="trtllm")


def test_the_best_points_busy_prefill_pool_is_said_as_plan_says_it(run):
    r = search("qwen3-8b", "H200", [2, 4], **ARGS)
    (w,) = [w for w in r.warnings if "prefill pool is busy" in w]
    assert w.startswith("the best point: the prefill pool is busy 9")
    out, _ = run(*shlex.split(r.plan_command)[1:], "--format", "json")
    said = [x for x in json.loads(out)["warnings"] if "prefill pool is busy" in x]
    assert said == [w.removeprefix("the best point: ")]


def test_a_pool_with_headroom_is_not_said():
    r = search("qwen3-8b", "H200", [2, 4], **{**ARGS, "engine": "vllm"})  # 89% busy
    assert r.best["mode"] == "disaggregated"
    assert not [w for w in r.warnings if "prefill pool is busy" in w]
