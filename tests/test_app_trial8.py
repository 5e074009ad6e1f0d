"""The app trial 8's findings (/tmp/helpers/trial8_report.md), through AppTest."""

import pytest

pytest.importorskip("streamlit")
pytest.importorskip("plotly")
from _helpers import metrics
from _helpers import run_app as run


def test_flops_small_latent_has_no_negative_crossover():
    # before: "absorption stops paying above -18.3 query tokens" (16 * 256 / (32 - 256))
    at = run("FLOPs", model="deepseek-v3", whatif="1", d_c="16")
    shown = metrics(at)["absorption stops paying above"]
    assert shown == "never", shown
    assert any("every query count" in c.value for c in at.caption)


def test_longest_context_at_batch_1_does_not_hang_on_the_sidebar_context():
    # before: "longest context at batch 1 = -" at context 16,777,216 (727,424 at 200,000), and
    # the CLI's plan --seq-len 16m --batch 1 left the row out
    import mlacalc

    near = mlacalc.plan("deepseek-v3", "H200", 8, tp=8, seq_len=200_000, batch=1)
    far = mlacalc.plan("deepseek-v3", "H200", 8, tp=8, seq_len=16 * 2**20, batch=1)
    assert far.max_batch == 0 and near.max_context_memory == far.max_context_memory == 727_424
    at = run("Capacity planner", seq_len=str(16 * 2**20), batch="1")
    assert metrics(at)["longest context at batch 1"] == "727,424"


def test_cli_plan_says_the_longest_context_past_a_context_that_does_not_fit(capsys):
    from mlacalc.cli import main

    args = [
        "plan",
        "deepseek-v3",
        "-H",
        "H200",
        "--gpus",
        "8",
        "--tp",
        "8",
        "--seq-len",
        "16m",
        "--batch",
        "1",
    ]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "longest context at batch 1" in out and "727,424 tokens" in out, out


def test_planner_ttft_has_its_parts_as_the_cli_words_them(capsys):
    # before: TTFT with no parts; the CLI prints under it "of which the prompt's 1 chunk step(s)
    # of 4,096 tokens (beside the decode batch) | 173.7 ms" (trial 8: of 208.2 ms TTFT,
    # DeepSeek-V3, 8 x H200 TP8, sglang, 4096/1024, 64 in flight)
    import re

    from mlacalc.cli import main

    at = run("Capacity planner", engine="sglang")
    at.number_input(key="plan_isl").set_value(4096)
    at.number_input(key="plan_osl").set_value(1024)
    at.number_input(key="plan_conc").set_value(64).run()
    args = ["plan", "deepseek-v3", "-H", "H200", "--gpus", "8", "--tp", "8", "--engine", "sglang"]
    assert (
        main(
            [*args, "--isl", "4096", "--osl", "1024", "--concurrency", "64", "--format", "markdown"]
        )
        == 0
    )
    out = capsys.readouterr().out
    ttft = re.search(r"\| TTFT \| (.+?) \|", out).group(1)
    words = "of which the prompt's 1 chunk step of 4,096 tokens (beside the decode batch)"
    part = re.search(re.escape(words) + r" \| (.+?) \|", out).group(1)
    assert metrics(at)["TTFT"] == ttft
    assert any(c.value == f"{words}: {part}" for c in at.caption), [c.value for c in at.caption]


def test_search_says_its_stand_ins_and_the_prefill_pool_as_the_cli(capsys):
    # before: "Chosen: 8+8 GPUs, disaggregated, TP1 DP-attention8 EP8, ..." (no prefill pool) and
    # no word of the stand-in the CLI's search names (moe:fp8_block:deepgemm from trtllm ...)
    import json

    from mlacalc.cli import main

    at = run("Capacity planner", engine="sglang")
    at.number_input(key="plan_isl").set_value(4096)
    at.number_input(key="plan_osl").set_value(1024)
    at.checkbox(key="plan_search").check().run()
    assert not at.exception
    args = "search deepseek-v3 -H H200 --gpus 4,8,16 --isl 4096 --osl 1024 --ttft 2s --tpot 50ms"
    assert main([*args.split(), "--engine", "sglang", "--format", "json"]) == 0
    best = json.loads(capsys.readouterr().out)["best"]
    assert best["mode"] == "disaggregated" and best["prefill_layout"]
    text = "\n".join(m.value for m in at.markdown)
    assert f"{best['layout']} + prefill {best['prefill_layout']}, " in text, text
    captions = "\n".join(c.value for c in at.caption)
    assert (
        "stand-in: moe:fp8_block:deepgemm from trtllm profile default's moe:fp8_block" in captions
    )
    # the planner sets a prefill pool now (its disaggregated inputs): the caption says where
    assert "is the planner's to time: set its prefill GPUs" in captions


def test_disaggregated_per_gpu_caption_names_the_prefill_pool():
    # before: "Per GPU: 8 x H200 (TP8); ..." in disaggregated mode (CLI: "+ 8 prefill (TP8)")
    at = run("Capacity planner")
    at.selectbox(key="plan_mode").set_value("disaggregated").run()
    assert not at.exception
    assert any(
        c.value.startswith("Per GPU: 8 x H200 decode (TP8) + 8 prefill (") for c in at.caption
    )


def test_invalid_what_if_says_the_figures_are_the_unedited_model():
    # before: the sidebar named the problems but every tab showed Llama-3.1-70B's figures
    # without saying so
    at = run(model="llama-3.1-70b", whatif="1", n_h="1", n_kv="1024", d_h="1")
    assert at.error and at.error[0].value.endswith("Showing the unedited Llama-3.1-70B.")
    assert any("every figure below is the unedited Llama-3.1-70B's" in w.value for w in at.warning)


def test_training_that_does_not_fit_says_its_times_are_if_it_fit():
    # before: 11.15 TiB per GPU warned, yet "step on 1 x H200 7.56 s" and "MFU 13.7%" with a
    # "542 tokens/s/GPU" delta arrow read as results; recompute none showed a "recompute" bar
    # (the flash backward's scores) beside a seconds table whose recompute is 0
    at = run("Training", model="deepseek-v3", hw="H200")
    m = metrics(at)
    assert "step on 1 x H200, if it fit" in m and "MFU, if it fit" in m, m
    assert not any(x.delta for x in at.metric)
    assert any("tokens/s/GPU, if it fit" in c.value for c in at.caption)
    import json

    names = [t["name"] for el in at.get("plotly_chart") for t in json.loads(el.proto.spec)["data"]]
    assert "recomputed (flash scores + policy)" in names
    # the step table's recompute row says the flash backward's scores are timed in backward
    (step,) = [df.value for df in at.dataframe if "in the step" in df.value.columns]
    said = step.set_index("part")["in the step"]
    assert said["recompute (policy)"].endswith("; flash scores: in backward")


def test_a_stand_in_engine_is_said_first():
    # before: "engine sglang; profile 'default': calibrated on ... unvalidated; ...; trtllm kernels
    # stand in for sglang: ..." at the end of a long caption (MI300X + sglang)
    for view in ("Capacity planner", "Roofline"):
        at = run(view, hw="MI300X", engine="sglang")
        said = [c.value for c in at.caption if "engine sglang" in c.value]
        assert said, view
        assert (
            "engine sglang (trtllm kernels stand in: no sglang profile fits this device" in said[0]
        )
        assert said[0].count("stand in") == 1
    at = run("Capacity planner", hw="H200", engine="sglang")  # its own profile: nothing stands in
    assert any("engine sglang; profile 'fit-h100-sxm-sglang'" in c.value for c in at.caption)


def test_planner_kernel_table_has_the_cli_digits():
    # before: qkv_a_proj "0.7" in the app where the CLI printed 0.699 (a number column the
    # browser rounds in its locale); now the CLI's own f"{ms:,.3f}" text
    at = run("Capacity planner", engine="sglang")
    table = next(d.value for d in at.dataframe if "ms" in d.value.columns)
    ms = dict(zip(table["kernel"], table["ms"]))
    assert all(isinstance(v, str) and len(v.split(".")[1]) == 3 for v in ms.values()), ms
    assert float(ms["qkv_a_proj"]) > 0


def _charts(at) -> list[dict]:
    import json

    return [json.loads(c.proto.spec) for c in at.get("plotly_chart")]


def test_rough_edges_of_the_charts():
    # FLOPs: a linear axis showed only "compressed" (the others slivers): log when they spread
    at = run("FLOPs")
    assert at.checkbox(key="flops_log").value is True
    # Roofline: ticks "10^15" beside "100T": one unit on every tick
    (roof,) = [s for s in _charts(run("Roofline")) if "Roofline" in s["layout"]["title"]["text"]]
    assert (
        "1 P" in roof["layout"]["yaxis"]["ticktext"]
        and "100 T" in roof["layout"]["yaxis"]["ticktext"]
    )
    # Parameters: the thin norms bar had no label (inside, with no room)
    (shares,) = [s for s in _charts(run("Parameters")) if "by part" in s["layout"]["title"]["text"]]
    bar = shares["data"][0]
    labels = dict(zip(bar["y"], bar["textposition"]))
    assert labels["norms"] == "outside", labels
    # Convert to MLA: no toolbar over the three small charts' titles
    at = run("Convert to MLA", model="llama-3.1-70b")
    configs = [json_config(c) for c in at.get("plotly_chart")]
    assert len(configs) >= 3 and all('"displayModeBar": false' in c for c in configs[-3:]), configs


def json_config(chart) -> str:
    return chart.proto.config


def test_flops_log_axis_has_one_unit_on_every_tick():
    # before: "10^15" beside "100T" (plotly's SI stops at T)
    (chart,) = [
        s for s in _charts(run("FLOPs")) if "Attention FLOPs" in s["layout"]["title"]["text"]
    ]
    assert (
        chart["layout"]["yaxis"]["type"] == "log" and "1 P" in chart["layout"]["yaxis"]["ticktext"]
    )


def test_measured_sets_axes_label_one_two_five_not_every_digit():
    # before: the H200 chart's x axis printed every minor tick (6 7 8 9 0.001 2 3 4 5 ...)
    specs = _charts(run("Measured sets"))
    assert specs and all(s["layout"]["xaxis"].get("dtick") == "D2" for s in specs), specs[:1]
