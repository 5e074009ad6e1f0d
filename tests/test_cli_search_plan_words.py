"""Words a trial tripped on between plan and search: plan --tpot (search's option) pointed at
click's closest spelling ("Did you mean '--ep'"), "1 nodes of 8", and the reasons table
listing reasons no point had ("beyond the engine's max_running 0")."""

from mlacalc.cli.search_cmd import _nodes_words
from mlacalc.serving.search import search


def test_a_search_option_given_to_plan_points_at_search(run):
    for opt, value in (("--tpot", "50ms"), ("--ttft", "1s")):
        _, err = run("plan", "qwen3-8b", "-H", "H200", opt, value, code=2)
        assert f"No such option '{opt}' for plan: it is an option of 'mlacalc search'" in err
        assert "Did you mean" not in err
    _, err = run("plan", "qwen3-8b", "-H", "H200", "--tpp", "2", code=2)
    assert "Did you mean" in err  # a misspelling of plan's own still gets click's hint


def test_one_node_is_singular():
    assert _nodes_words(8, 8) == " (1 node of 8)"
    assert _nodes_words(12, 8) == " (2 nodes of 8, 4 GPUs spare)"


def test_no_reason_is_listed_with_no_points():
    r = search("qwen3-8b", "H200", [2], isl=1024, osl=256, tpot=0.001,
               modes=("disaggregated",), engine="vllm", prefill_tp=[1])  # fmt: skip
    assert r.reasons and all(v > 0 for v in r.reasons.values()), r.reasons
    assert "beyond the engine's max_running" not in r.reasons
