"""Wide expert-parallel plans as a new user sizing DeepSeek-V3 serving reads them (a trial,
round 28): what binds a DP-attention plan whose TPOT is mostly prompts, the expert layout's
assumptions said, MoE tensor-parallel degrees refused, groups across NVLink domains."""

from __future__ import annotations

import functools

import pytest

from mlacalc.serving.plan import PROMPT_INTERFERENCE, plan


@functools.cache
def _dpa(gpus: int = 16, isl: int = 2000, osl: int = 500, **kw):
    """DeepSeek-V3 on H200 at TP1 DP-attention, EP over every GPU, SGLang with TBO, 128
    requests in flight a GPU (the trial's)."""
    return plan("deepseek-v3", "H200", gpus, tp=1, dp_attention=True, ep=gpus,
                engine="sglang", overlap="tbo", isl=isl, osl=osl, concurrency=128 * gpus,
                **kw)  # fmt: skip


def test_prompts_in_the_steps_bind_and_point_to_disaggregated_serving():
    """The trial: 104 of 172 ms TPOT other requests' prompts (EP16), read "binding resource:
    memory bandwidth" with no hint."""
    p = _dpa()
    assert p.tpot_others_prompts_s > p.decode_step_s
    assert p.binding.startswith(PROMPT_INTERFERENCE)
    assert "16 synchronised attention groups" in p.binding
    (said,) = [w for w in p.warnings if "prompts make" in w]
    assert "--mode disaggregated" in said
    assert "mlacalc search deepseek-v3 -H H200 --gpus 16 --isl 2000 --osl 500" in said


def test_the_prompts_warning_gives_a_prefill_pool_that_keeps_up():
    """The trial's warning said `--prefill-gpus N`: it now gives a number, from the plan's own
    figures (the requests/s its decode steps serve without prompts, a prompt's pass on an
    attention group), in whole nodes; the disaggregated plan it names keeps up."""
    import re

    (said,) = [w for w in _dpa().warnings if "prompts make" in w]
    assert "--prefill-gpus N" not in said
    n = int(re.search(r"--prefill-gpus (\d+) \(about: ", said).group(1))
    assert n % 8 == 0 and n >= 8
    d = _dpa(mode="disaggregated", prefill_gpus=n)
    assert d.sustainable and d.prefill_pool_requests_per_s >= d.output_tokens_per_s / 500


def test_the_prefill_pool_it_names_is_a_layout_the_planner_takes():
    """DeepSeek-V3 at EP16 on 16 H200 with 8k prompts: the warning said `--prefill-gpus 24`,
    whose default prefill EP8 splits each expert 3 ways and is refused; the count is now a
    multiple of the decode pool's expert group, and the plan it names is timed."""
    import re

    kw = dict(tp=1, dp_attention=True, ep=16, isl=8192, osl=1024)
    (said,) = [w for w in plan("deepseek-v3", "H200", 16, **kw).warnings
               if "prompts make" in w]  # fmt: skip
    n = int(re.search(r"--prefill-gpus (\d+) \(about: ", said).group(1))
    assert n % 16 == 0 and "multiples of the 16-GPU expert group" in said
    d = plan("deepseek-v3", "H200", 16, **kw, mode="disaggregated", prefill_gpus=n)
    assert d.ttft_s is not None


def test_a_decode_bound_mix_keeps_the_roof_as_its_binding():
    """Short prompts, long outputs: the decode step is most of TPOT, the roof binds."""
    p = _dpa(isl=200, osl=4000)
    assert p.tpot_others_prompts_s < p.decode_step_s
    assert p.binding == "memory bandwidth"
    assert not [w for w in p.warnings if "prompts make" in w]


@pytest.mark.parametrize(
    ("hw", "gpus", "ep", "why", "works"),
    [
        ("H200", 24, 8, "2,048 intermediate columns do not split 3 ways", "--ep 3 "),
        ("GB200", 72, 8, "do not split 9 ways", "72 (with --redundant-experts 32)"),
        ("H200", 64, 2, "64-column shards are narrower than", "--ep 4 or 8"),
    ],
)
def test_a_moe_tp_degree_that_cannot_split_the_experts_is_refused(hw, gpus, ep, why, works):
    """The trial's EP8 MoE-TP3 (2,048 / 3), MoE-TP9 and MoE-TP32 (64-wide shards under the
    checkpoint's 128x128 fp8 blocks) were planned silently."""
    from mlacalc.words.errors import InvalidArgumentError

    with pytest.raises(InvalidArgumentError) as exc:
        plan("deepseek-v3", hw, gpus, tp=1, dp_attention=True, ep=ep, seq_len=4096)
    assert exc.value.argument == "ep"
    assert why in exc.value.message and works in exc.value.message


def test_search_offers_no_layout_whose_experts_do_not_split():
    """Search's layouts of 24 GPUs: every MoE-TP degree splits DeepSeek-V3's experts."""
    from mlacalc.cost.engine import as_model
    from mlacalc.hardware.catalogue import load_hardware
    from mlacalc.serving.search_space import candidate_layouts

    m = as_model("deepseek-v3")
    lays = candidate_layouts(m, load_hardware("H200"), 24, None, 1 << 60)
    assert lays
    assert all(m.moe_intermediate_size % lay.moe_tp == 0 for lay in lays)
    assert all((m.moe_intermediate_size // lay.moe_tp) % 128 == 0 for lay in lays)


def test_an_expert_group_over_two_nvlink_domains_is_said():
    """The trial's GB200 x144 at EP72 over two NVL72 racks (17.3 ms of links in a 34.8 ms
    step, one rack's 4.3) read no warning; one rack's layout reads none."""
    two = plan("deepseek-v3", "GB200", 144, tp=1, dp_attention=True, ep=72,
               redundant_experts=32, seq_len=2048, batch=18432)  # fmt: skip
    (said,) = [w for w in two.warnings if "NVLink domains" in w]
    assert "spans 2 NVLink domains" in said and "of 72 GB200 GPUs" in said
    assert "replicas of 72 GPUs (--gpus 72" in said
    assert f"{two.step_links_s * 1e3:,.1f} ms of links" in said
    one = plan("deepseek-v3", "GB200", 72, tp=1, dp_attention=True, ep=72,
               redundant_experts=32, seq_len=2048, batch=9216)  # fmt: skip
    assert not [w for w in one.warnings if "NVLink domains" in w]


def test_the_domain_warning_is_said_once_where_the_links_matter():
    """Round 28's trial read the domain warning on every H200 plan of EP16 or more. Under
    SGLang's two-batch overlap DeepSeek-V3 EP16 exposes 8.4 of its 35.4 ms of links in a 68.0 ms
    step: quiet (the exchange line names the domains); without the overlap 34.3 of 75.4 ms:
    said, and a prefill pool across domains too joins the same warning."""
    assert not [w for w in _dpa().warnings if "NVLink domains" in w]
    assert "the link model across the network (2 domains" in _dpa().ep_exchange
    bare = plan("deepseek-v3", "H200", 16, tp=1, dp_attention=True, ep=16, engine="sglang",
                overlap="none", isl=2000, osl=500, concurrency=2048)  # fmt: skip
    (said,) = [w for w in bare.warnings if "NVLink domains" in w]
    assert "spans 2 NVLink domains" in said and "decode step)" in said
    both = plan("deepseek-v3", "H200", 16, tp=1, dp_attention=True, ep=16, overlap="none",
                isl=2000, osl=500, concurrency=2048, mode="disaggregated", prefill_gpus=16,
                prefill_tp=1, prefill_ep=16, prefill_dp_attention=True)  # fmt: skip
    (said,) = [w for w in both.warnings if "NVLink domains" in w]
    assert "; the prefill pool's expert group of 16 GPUs" in said and "(--prefill-gpus 8" in said


def test_a_plan_records_its_expert_layout_assumptions():
    """The trial's plan at --redundant-experts 32 said "TP1 DP-attention16 EP16", its JSON had
    no redundant_experts nor routing keys, and no line named the exchange's kernels."""
    import json

    from mlacalc.serving.layout import make_layout

    p = plan("deepseek-v3", "H200", 16, tp=1, dp_attention=True, ep=16, redundant_experts=32,
             engine="trtllm", seq_len=4096, batch=1024)  # fmt: skip
    assert p.layout == "TP1 DP-attention16 EP16 (32 redundant experts)"
    d = json.loads(json.dumps(p.to_dict()))
    assert d["redundant_experts"] == 32
    assert (d["routing"], d["expert_skew"], d["routing_imbalance"], d["rebalance"]) == (
        "random", 0.0, 1.0, True)  # fmt: skip
    assert d["expert_rank_load_from"].startswith("random routing")
    assert "DeepEP's kernels" in d["ep_exchange"]
    assert "standing in for TensorRT-LLM's own" in d["ep_exchange"]
    sg = plan("deepseek-v3", "H200", 8, tp=1, dp_attention=True, ep=8, engine="sglang",
              seq_len=4096, batch=512)  # fmt: skip
    assert "SGLang's own" in sg.ep_exchange and "one-node DeepEP tables" in sg.ep_exchange
    tp8 = plan("deepseek-v3", "H200", 8, tp=8, seq_len=4096, batch=8)
    assert tp8.ep_exchange is None and tp8.routing is None and tp8.redundant_experts == 0
    from mlacalc.cost.engine import as_model

    lay = make_layout(as_model("deepseek-v3"), 16, tp=1, ep=16, dp_attention=True,
                      redundant_experts=32)  # fmt: skip
    assert lay.describe().endswith("(32 redundant experts)")


def test_a_plan_breaks_its_decode_step_down_by_component():
    """The trial found no summary of a step's shares, and under two-batch overlap a kernel
    table of one micro-batch (22.47 ms) beside a 38.85 ms step: the components add up to the
    step (and the prompts a step carries to TPOT), each compute part twice its rows there."""
    import json

    p = _dpa()
    parts = dict(p.step_parts())
    assert {"attention", "dense GEMMs", "routed experts"} <= set(parts)
    assert "dispatch / combine (exposed links)" in parts
    prompts = parts.pop("other requests' prompts in the step")
    assert sum(parts.values()) == pytest.approx(p.decode_step_s, rel=1e-9)
    assert prompts + p.decode_step_s == pytest.approx(p.tpot_s * p.tokens_per_step, rel=1e-9)
    rows = sum(k["seconds"] for k in p.kernels if k["kind"] == "moe")
    assert parts["routed experts"] == pytest.approx(2 * rows)  # both micro-batches
    assert "one of the two micro-batches" in p.step_parts_note()
    d = json.loads(json.dumps(p.to_dict()))
    assert [r["component"] for r in d["step_parts"]][:2] == ["attention", "dense GEMMs"]
    assert d["step_parts_note"] == p.step_parts_note()
    one = plan("deepseek-v3", "H200", 8, tp=8, seq_len=4096, batch=8)
    assert sum(t for _, t in one.step_parts()) == pytest.approx(one.decode_step_s, rel=1e-9)
    assert "whole step of one GPU" in one.step_parts_note()


def test_the_cli_prints_the_step_by_component(run):
    """`mlacalc plan`'s text has the section, with its note, and the exchange's row."""
    out = run("plan", "deepseek-v3", "-H", "H200", "--gpus", 8, "--tp", 1, "--dp-attention",
              "--ep", 8, "--seq-len", "4k", "--batch", 512, "--overlap", "tbo",
              "--format", "markdown")[0]  # fmt: skip
    assert "### Decode step by component" in out
    assert "| dispatch / combine (exposed links) |" in out
    assert "| expert exchange (dispatch / combine) |" in out
    assert "each compute part here is twice its rows" in out


def test_a_measured_routing_imbalance_is_said_as_the_hottest_ranks_origin():
    """A measured imbalance replaces the routing's model (the hottest rank's whole load): the
    origin says so, not the sampling spread."""
    p = plan("deepseek-v3", "H200", 8, tp=1, dp_attention=True, ep=8, routing_imbalance=1.3,
             seq_len=4096, batch=512)  # fmt: skip
    assert p.expert_rank_load == pytest.approx(1.3)
    assert p.expert_rank_load_from.startswith("routing_imbalance 1.3 as given")
