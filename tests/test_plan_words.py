"""Words of the command-line outputs and errors a new-user trial read two ways (trial 6)."""

from __future__ import annotations

import pytest

from mlacalc.cli import main
from mlacalc.serving.plan import plan

GLM72 = dict(
    tp=1, dp_attention=True, ep=72, redundant_experts=32, weight_dtype="fp8", kv_dtype="fp8"
)
ASK = dict(isl=4000, osl=1000, concurrency=72, engine="sglang")


def test_one_prompt_s_prefill_says_which_pass_it_is(capsys):
    """'prefill of one 4,000-token prompt (causal, one pass alone)' was aggregated serving's
    prompt with the other synced groups idle (0.298 s) and disaggregated t_pf[1], every group
    on a prompt (0.368 s): one label, two meanings."""
    agg = plan("glm-5.1", "GB200", 72, **GLM72, **ASK)
    dis = plan("glm-5.1", "GB200", 72, mode="disaggregated", prefill_gpus=72, **GLM72, **ASK)
    assert agg.prefill_what == "one pass, the other 71 synced attention groups idle"
    assert dis.prefill_what.startswith("one pass, each of the 72 synced attention groups")
    assert agg.prefill_s < dis.prefill_s
    assert plan("llama-3.1-70b", "H200", 4, isl=4000, osl=100).prefill_what == "one pass alone"
    args = ["plan", "llama-3.1-70b", "-H", "H200", "--gpus", "4", "--isl", "4000"]
    assert main([*args, "--osl", "100", "--concurrency", "8"]) == 0
    assert "prompt (causal, one pass alone)" in " ".join(capsys.readouterr().out.split())


def test_kv_heads_errors_name_the_option(capsys):
    """compare --as-variants --kv-heads 7 named the field 'num_key_value_heads' the user never
    typed; the API's variant_equivalents names its own argument, kv_heads."""
    import pytest

    import mlacalc
    from mlacalc.report import variant_equivalents
    from mlacalc.words.errors import InvalidArgumentError

    for k, why in (("7", "must divide the 32 heads"), ("0", "must be a positive integer")):
        assert main(["compare", "qwen3-8b", "--as-variants", "--kv-heads", k]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "--kv-heads" in err and why in err, err
        assert "num_key_value_heads" not in err
    with pytest.raises(InvalidArgumentError, match=r"^kv_heads: must divide"):
        variant_equivalents(mlacalc.load_model("qwen3-8b"), 7)


def test_a_search_whose_weights_fit_nowhere_says_how_many_gpus_hold_them():
    """'does not fit: weights 88 points' (GLM-5.1 on 4 H200) said nothing of what would hold
    them; now the largest count doubled until some layout holds them (8 H200 in fp8)."""
    from mlacalc.serving.search import search

    r = search("glm-5.1", "H200", [4], isl=4000, osl=1000)
    assert not r.points and set(r.ruled_out) == {"does not fit: weights"}
    (said,) = [n for n in r.notes if n.startswith("the weights fit on no layout")]
    assert "searched (4); 8 GPUs (--gpus 8)" in said and "(weights fp8)" in said
    fits = search("glm-5.1", "H200", [8], isl=4000, osl=1000)
    assert not [n for n in fits.notes if n.startswith("the weights fit")]


def test_a_layout_names_the_experts_split_where_it_is_not_the_attention_s():
    """Search's 'TP1 DP-attention8' (ep 1) read as each GPU holding whole experts, where each
    is split 8 ways over the stage: the layout names that split (MoE-TP8)."""
    import mlacalc
    from mlacalc.serving.layout import make_layout

    m = mlacalc.load_model("glm-5.1")
    describe = {
        "TP1 DP-attention8 MoE-TP8": dict(tp=1, dp_attention=True),
        "TP1 DP-attention8 EP8": dict(tp=1, dp_attention=True, ep=8),
        "TP8": dict(tp=8),
        "TP8 EP4 MoE-TP2": dict(tp=8, ep=4),
    }
    for words, kw in describe.items():
        assert make_layout(m, 8, **kw).describe() == words
    assert make_layout(mlacalc.load_model("llama-3-70b"), 8, tp=4).describe() == "TP4 DP2"


def test_tpot_says_what_other_requests_prompts_add(capsys):
    """TPOT 287 ms beside a 26.6 ms decode step (GLM-5.1 on 72 GB200, DP-attention, 8,192 in
    flight) with no word why: the steps that carry a prompt on any of the 72 synced groups last
    as the prompt's pass. The two parts are said; a plan where prompts add under 5% of TPOT
    says nothing more."""
    ask = {**ASK, "concurrency": 8192}
    p = plan("glm-5.1", "GB200", 72, **GLM72, **ask)
    assert p.tpot_others_prompts_s > 0.5 * p.tpot_s  # at 72 groups most steps hold a prompt
    # one request alone decodes at the decode step (its prompt is in its TTFT); a
    # disaggregated decode pool carries no prompts
    alone = plan("llama-3-8b", "H100-SXM", 1, isl=1000, osl=200, concurrency=1)
    assert alone.tpot_s == pytest.approx(alone.decode_step_s, rel=1e-9)
    assert alone.tpot_others_prompts_s == pytest.approx(0.0, abs=1e-12)
    dis = plan("glm-5.1", "GB200", 72, mode="disaggregated", prefill_gpus=72, **GLM72, **ask)
    assert dis.tpot_others_prompts_s is None and dis.to_dict()["tpot_others_prompts_s"] is None
    args = ["plan", "glm-5.1", "-H", "GB200", "--gpus", "72", "--tp", "1", "--dp-attention"]
    args += ["--ep", "72", "--redundant-experts", "32", "--weight-dtype", "fp8"]
    args += ["--kv-dtype", "fp8", "--isl", "4000", "--osl", "1000", "--engine", "sglang"]
    assert main([*args, "--concurrency", "8192"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "of which the decode step" in out and "of which other requests' prompts" in out
    one = ["plan", "llama-3-8b", "-H", "H100-SXM", "--gpus", "1", "--isl", "1000"]
    assert main([*one, "--osl", "200", "--concurrency", "1"]) == 0
    assert "other requests' prompts" not in capsys.readouterr().out
