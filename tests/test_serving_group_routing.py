"""DeepSeek's group-limited routing (``n_group``, ``topk_group``) in the exchange across nodes.

A trial sized DeepSeek-V3 at EP64 (8 nodes of 8 GPUs) with 4.59 remote nodes a token, the count
of uniform routing, where the model picks a token's 8 experts from at most 4 of its 8 groups of
32 and the engines lay one group on each node: 3.5. The schema now reads the two fields (with
the config's names), the shipped DeepSeek files carry them, and the normal-mode exchange across
nodes counts them. The closed form is checked here against two independent routes: a seeded
sampling of the routing it states, and DeepSeek-V3's own router on random scores.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from reference_data import HF_CONFIGS

import mlacalc
from mlacalc import import_hf_config
from mlacalc.models.registry import ClassDefault
from mlacalc.serving.comm import (
    group_routing_words,
    node_expert_ranges,
    placed_groups,
    remote_nodes_per_token,
)
from mlacalc.words.errors import ConfigError

E, K, GROUPS = 256, 8, (8, 4)


def _remote(top: np.ndarray, experts: int, ep: int, per_node: int) -> float:
    """Mean remote nodes of routed tokens ``top`` (tokens x k expert ids), the tokens dealt to
    the ranks in turn, experts laid in order on the ranks."""
    ranges = node_expert_ranges(experts, ep, per_node)
    node_of = np.zeros(experts, dtype=int)
    for j, (lo, hi) in enumerate(ranges):
        node_of[lo:hi] = j
    n = len(top)
    src = (np.arange(n) % ep) // per_node
    hit = np.zeros((n, len(ranges)), dtype=bool)
    np.put_along_axis(hit, node_of[top], True, axis=1)
    return float((hit.sum(1) - hit[np.arange(n), src]).mean())


def _sample_stated(rng, n, experts, k, n_group, topk_group) -> np.ndarray:
    """The routing the closed form states: topk_group groups uniformly, k experts uniformly
    from theirs, redrawn until each picked group holds one (k >= topk_group)."""
    size = experts // n_group
    out = np.empty((n, k), dtype=int)
    filled = 0
    while filled < n:
        groups = np.argsort(rng.random((n, n_group)), axis=1)[:, :topk_group]
        pool = (groups[:, :, None] * size + np.arange(size)).reshape(n, -1)
        pick = np.argsort(rng.random(pool.shape), axis=1)[:, :k]
        top = np.take_along_axis(pool, pick, axis=1)
        ok = np.array([len(set(r)) for r in top // size]) == min(topk_group, k)
        if k < topk_group:
            ok[:] = True
        take = top[ok][: n - filled]
        out[filled : filled + len(take)] = take
        filled += len(take)
    return out


def _deepseek_router(rng, n, experts, k, n_group, topk_group) -> np.ndarray:
    """DeepSeek-V3's router (transformers' DeepseekV3TopkRouter) on independent random scores:
    sigmoid scores, a group's score the sum of its best two, the best topk_group groups, the
    best k experts among theirs."""
    s = 1 / (1 + np.exp(-rng.normal(size=(n, experts))))
    g = s.reshape(n, n_group, -1)
    gs = np.sort(g, axis=2)[:, :, -2:].sum(2)
    keep = np.argsort(-gs, axis=1)[:, :topk_group]
    mask = np.full((n, n_group), -np.inf)
    np.put_along_axis(mask, keep, 0.0, axis=1)
    return np.argsort(-(g + mask[:, :, None]).reshape(n, experts), axis=1)[:, :k]


@pytest.mark.parametrize("ep", [16, 32, 48, 64, 128])
def test_the_closed_form_is_the_stated_routing_sampled(ep):
    rng = np.random.default_rng(ep)
    top = _sample_stated(rng, 40_000, E, K, *GROUPS)
    sampled = _remote(top, E, ep, 8)
    assert remote_nodes_per_token(ep, 8, K, E, GROUPS) == pytest.approx(sampled, rel=0.015)


def test_the_closed_form_with_fewer_experts_than_groups_a_token():
    """top-2 of 4 groups: the two experts may share a group (no group is sure to be hit)."""
    rng = np.random.default_rng(2)
    top = _sample_stated(rng, 40_000, E, 2, *GROUPS)
    assert remote_nodes_per_token(64, 8, 2, E, GROUPS) == pytest.approx(
        _remote(top, E, 64, 8), rel=0.02
    )


@pytest.mark.parametrize("ep", [32, 64, 128])
def test_deepseeks_router_on_random_scores_agrees(ep):
    """The router picks a group by its two best experts, so it nearly always uses every group
    it picks: within 2% of the closed form (EP64: 3.46 against 3.5)."""
    rng = np.random.default_rng(7)
    top = _deepseek_router(rng, 20_000, E, K, *GROUPS)
    assert remote_nodes_per_token(ep, 8, K, E, GROUPS) == pytest.approx(
        _remote(top, E, ep, 8), rel=0.02
    )


def test_groups_on_nodes_bound_the_count():
    assert remote_nodes_per_token(64, 8, K, E, GROUPS) == pytest.approx(3.5)
    assert remote_nodes_per_token(64, 8, K) == pytest.approx(4.5947, abs=1e-4)  # uniform
    assert remote_nodes_per_token(8, 8, K, E, GROUPS) == 0.0
    words = group_routing_words(E, 64, 8, K, GROUPS)
    assert "1 whole group a node" in words and "3.50 remote nodes" in words and "4.59" in words
    assert "each group of 32 experts over 2 nodes" in group_routing_words(E, 128, 8, K, GROUPS)
    assert "not lined up" in group_routing_words(E, 48, 8, K, GROUPS)


def test_a_rebalanced_placement_keeps_groups_only_where_nodes_divide_them():
    assert placed_groups(GROUPS, 64, 8, rebalance=True) == GROUPS  # 8 nodes: hierarchical
    assert placed_groups(GROUPS, 48, 8, rebalance=True) is None  # 6 nodes: global policy
    assert placed_groups(GROUPS, 48, 8, rebalance=False) == GROUPS  # experts in order


def test_the_shipped_and_imported_models_carry_their_groups():
    v3 = mlacalc.load_model("deepseek-v3")
    assert (v3.n_group, v3.topk_group, v3.routing_groups) == (8, 4, (8, 4))
    assert mlacalc.load_model("deepseek-v3.2").routing_groups == (8, 4)
    assert mlacalc.load_model("deepseek-v2").routing_groups == (8, 3)
    assert mlacalc.load_model("kimi-k2").routing_groups is None
    for path in (
        HF_CONFIGS / "deepseek-v3.config.json",
        HF_CONFIGS / "deepseek-r1.config.json",
    ):
        m = import_hf_config(json.loads(path.read_text(encoding="utf-8")), str(path))
        assert m.routing_groups == (8, 4)
    lite = import_hf_config(json.loads((HF_CONFIGS / "deepseek-v2-lite.config.json").read_text()))
    assert lite.routing_groups is None  # greedy, one group
    greedy = v3.with_changes(topk_method="greedy")  # DeepSeek-V2's greedy reads no group
    assert greedy.routing_groups is None
    data = json.loads((HF_CONFIGS / "kimi-linear-48b-a3b.config.json").read_text())
    data["num_expert_group"], data["topk_group"] = 8, 2  # KimiLinearConfig's spelling
    assert import_hf_config(data).routing_groups == (8, 2)


@pytest.mark.parametrize(
    ("changes", "field", "says"),
    [
        (dict(n_group=7), "n_group", "use a divisor of 256"),
        (dict(n_group=0), "n_group", "positive integer"),
        (dict(n_group="8"), "n_group", "positive integer"),
        (dict(n_group=True), "n_group", "positive integer"),
        (dict(topk_group=9), "topk_group", "use at most n_group (8)"),
        (dict(topk_group=-1), "topk_group", "positive integer"),
        (dict(n_group=4, topk_group=5), "topk_group", "use at most n_group (4)"),
        (dict(n_routed_experts=100), "n_group", "such as 5"),
        (dict(n_group=64, topk_group=1), "topk_group", "use at least 2"),
    ],
)
def test_bad_group_values_are_one_line_naming_the_field_and_the_fix(changes, field, says):
    with pytest.raises(ConfigError) as err:
        mlacalc.load_model("deepseek-v3").with_changes(**changes)
    text = str(err.value)
    assert "\n" not in text and f"'{field}'" in text and says in text, text


def test_groups_stated_without_topk_group_take_the_class_default_or_are_refused(tmp_path):
    """A config stating n_group 8 and leaving topk_group out read it as 1 (the schema's
    default): a token's experts from one group, the tightest limit, with no word (DeepSeek-V3
    at EP32 over 4 H100 nodes: 0.75 remote nodes a token). A DeepSeek-V3 config now takes
    DeepseekV3Config's defaults (8 and 4, as import-hf fills every absent field); a model file
    of a family with no such default is refused in one line naming topk_group."""
    data = json.loads((HF_CONFIGS / "deepseek-v3.config.json").read_text(encoding="utf-8"))
    del data["topk_group"]
    filled = import_hf_config(data)
    assert filled.routing_groups == (8, 4)
    said = [n for n in filled.derived if isinstance(n, ClassDefault)]  # import-hf's stderr
    assert "topk_group = 4 (DeepseekV3Config default)" in said
    del data["n_group"]
    assert import_hf_config(data).routing_groups == (8, 4)
    # a small model whose 4 groups of 1 expert cannot hold its top-6: no limit, as before
    small = dict(data, n_routed_experts=8, num_experts_per_tok=6)
    assert import_hf_config(small).routing_groups is None
    text = (Path(mlacalc.__file__).parent / "data" / "models" / "qwen3-30b-a3b.yaml").read_text(
        encoding="utf-8"
    )
    path = tmp_path / "grouped.yaml"
    path.write_text(text + "\nn_group: 8\n", encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        mlacalc.load_model(str(path))
    text = str(err.value)
    assert "\n" not in text and "'topk_group'" in text and "required when n_group > 1" in text
    # --set n_group=8 on a model without groups carried its topk_group 1 (plan qwen3-30b-a3b
    # --set n_group=8 at EP32 said "n_group 8, topk_group 1"): refused the same way
    qwen = mlacalc.load_model("qwen3-30b-a3b")
    with pytest.raises(ConfigError) as err:
        qwen.with_changes(n_group=8)
    assert "'topk_group'" in str(err.value) and "required when n_group > 1" in str(err.value)
    assert qwen.with_changes(n_group=8, topk_group=4).routing_groups == (8, 4)
    assert mlacalc.load_model("deepseek-v3").with_changes(n_group=4).routing_groups is None


def test_a_plan_says_the_groups_and_counts_them():
    kw = dict(tp=1, dp_attention=True, ep=64, isl=2000, osl=500, concurrency=2048)
    p = mlacalc.plan("deepseek-v3", "H200", 64, **kw)
    assert "group-limited routing (n_group 8, topk_group 4; 1 whole group a node)" in p.ep_exchange
    assert "3.50 remote nodes a token (4.59 if routed over every expert)" in p.ep_exchange
    assert "group-limited" in json.dumps(p.to_dict())


def test_the_training_step_counts_the_groups_too():
    """Training's expert exchange across nodes sends the same once-per-remote-node copies:
    DeepSeek-V3 at EP64 over 8 B200 nodes, 81.83 -> 62.34 ms of expert traffic a micro-batch
    (3.50 remote nodes a token where uniform routing gives 4.59)."""
    from mlacalc.training.cost import training_cost

    v3 = mlacalc.load_model("deepseek-v3")
    kw = dict(hardware="B200", dp=64, ep=64, pp=16, global_batch=64, precision="fp8-mixed")
    grouped = training_cost(v3, 4096, **kw).time.ep_comm_s
    uniform = training_cost(v3.with_changes(n_group=1, topk_group=1), 4096, **kw).time.ep_comm_s
    assert grouped / uniform == pytest.approx(3.5 / remote_nodes_per_token(64, 8, K), rel=1e-3)
    assert grouped * 1e3 == pytest.approx(62.34, abs=0.01)
