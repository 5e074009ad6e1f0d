"""The Streamlit app through AppTest: every view renders, and its numbers follow the widgets."""

from pathlib import Path

import pytest

pytest.importorskip("streamlit")
pytest.importorskip("plotly")
from _helpers import metrics
from _helpers import run_app as run
from streamlit.testing.v1 import AppTest

import mlacalc
from mlacalc.models.loading import parse_upload
from mlacalc.words.units import human_seconds, human_si

#: The planner's tab; only the open tab runs (``?view=<title>``, the first by default).
PLANNER = "Capacity planner"


def every_view(**query) -> list[AppTest]:
    """The app at a URL once per tab, that tab open (the tabs as the app lists them)."""
    first = run(**query)
    return [first] + [run(tab.label, **query) for tab in list(first.tabs)[1:]]


@pytest.fixture(scope="module")
def default_views() -> list[AppTest]:
    """:func:`every_view` of the default URL, run once for the module's tests that only read
    it (each tab is a run of the whole script: 8 runs, seconds each)."""
    return every_view()


def markdown(at) -> str:
    return "\n".join(m.value for m in at.markdown)


def test_default_scenario_every_view(default_views):
    runs = default_views
    text = "\n".join(markdown(at) for at in runs)
    assert f"({mlacalc.kv_cache_bytes('deepseek-v3', 131072, 8):,} bytes)" in text
    assert f"**{mlacalc.param_counts('deepseek-v3').total:,}**" in text
    p = mlacalc.plan(
        "deepseek-v3", "H200", 8, tp=8, kv_dtype="bf16", page_size=16, seq_len=131072, batch=8
    )
    m = {k: v for at in runs for k, v in metrics(at).items()}
    assert m["largest batch at 131,072 tokens"] == f"{p.max_batch:,}"
    assert f"weights per GPU: **{p.weights_per_gpu_bytes / 2**30:,.2f} GiB**" in text
    assert m["absorbed / naive attention-core FLOPs"] == "3.40x"
    assert m["total (main model)"] == "671.03 G"
    assert "Ridge point of H200 (bf16): **206.2 FLOP/byte**" in text
    assert "median |error|" in text
    assert len(runs) >= 6 and all(len(at.tabs) == len(runs) and not at.error for at in runs)
    assert sum(len(at.latex) for at in runs) >= 3


def test_a_dsa_model_gets_dsa_formulas():
    """DeepSeek-V3.2's FLOPs view shows DSA's formulas (the indexer's scores over every key,
    MLA's core over min(S, k)), not the plain MLA layer's with a caveat that they do not apply."""
    at = run("FLOPs", model="deepseek-v3.2")
    assert not at.exception
    captions = "\n".join(c.value for c in at.caption)
    assert "DeepSeek-V3.2 is DSA: k = index_topk" in captions
    assert "plain MLA layer's formulas" not in captions
    tex = "\n".join(x.value for x in at.latex)
    assert "\\min" in tex and "d_{i}" in tex and "n_{i}" in tex


def test_widgets_drive_the_numbers():
    at = run()
    at.number_input(key="seq_len").set_value(4096)
    at.number_input(key="batch").set_value(3)
    at.selectbox(key="kv_dtype").set_value("fp8_ds_mla")
    at.run()
    assert not at.exception
    expected = mlacalc.kv_cache_bytes("deepseek-v3", 4096, 3, kv_dtype="fp8_ds_mla")
    assert f"({expected:,} bytes)" in markdown(at)
    assert at.query_params["seq_len"] == "4096" and at.query_params["kv"] == "fp8_ds_mla"


def test_other_model_and_equivalents():
    at = run()
    at.selectbox(key="model").set_value("llama-3-70b")
    at.run()
    assert not at.exception
    assert f"({mlacalc.kv_cache_bytes('llama-3-70b', 131072, 8):,} bytes)" in markdown(at)
    assert "GQA" in at.subheader[0].value
    equivalents = at.dataframe[1].value
    assert len(equivalents) == 4


def test_scenario_from_the_url():
    at = run(model="mistral-7b", seq_len="10000", batch="2", kv="fp8", hw="RTX-4090")
    expected = mlacalc.kv_cache_bytes(
        "mistral-7b", 10000, 2, kv_dtype="fp8"
    )  # sliding window: 4096 kept
    assert f"({expected:,} bytes)" in markdown(at)
    assert at.selectbox(key="hardware").value == "RTX-4090"


def test_url_sizes_read_as_the_command_line_reads_them():
    at = run(seq_len="128k", batch="2")
    assert at.number_input(key="seq_len").value == 131072
    assert not [w.value for w in at.warning]


def test_bad_url_values_fall_back():
    at = run(model="no-such-model", seq_len="-5", batch="x", kv="fp6", hw="H300")
    # below the range is clamped (seq_len 1), a non-number falls back (batch 8)
    assert f"({mlacalc.kv_cache_bytes('deepseek-v3', 1, 8):,} bytes)" in markdown(at)
    notices = " ".join(w.value for w in at.warning)
    for name in ("model=no-such-model", "seq_len=-5", "batch=x", "kv=fp6", "hw=H300"):
        assert f"'{name}'" in notices, (name, notices)


def test_url_device_alias_reads_as_the_command_line():
    """hw=H200-SXM is H200, as `mlacalc plan -H H200-SXM` reads it, with a notice (was 'not a
    known device; using H200' on the default, and any other aliased device lost)."""
    at = run(model="deepseek-v3", hw="B200-HGX")
    assert at.selectbox(key="hardware").value == "B200"
    assert [w.value for w in at.warning] == ["URL parameter 'hw=B200-HGX' means B200."]


def test_issue_examples_from_the_url():
    at = run(model="nonexistent", kv="fp99", hw="TPU")
    notices = [w.value for w in at.warning]
    assert len(notices) == 3 and all("URL parameter" in n for n in notices)
    at = run(seq_len="99999999999")
    assert at.number_input(key="seq_len").value == 16 * 2**20
    assert any("'seq_len=99999999999'" in w.value and "clamped" in w.value for w in at.warning)
    at = run(batch=str(10**30))
    assert at.number_input(key="batch").value == 1 << 20
    assert any("'batch=" in w.value and "clamped" in w.value for w in at.warning)
    at = run(seq_len="16777216", batch="1048576")  # the widgets' largest values
    expected = mlacalc.kv_cache_bytes("deepseek-v3", 16777216, 1048576)
    assert expected > 2**53 and f"({expected:,} bytes)" in markdown(at) and not at.warning


def test_weight_dtype_follows_the_model_until_the_user_picks_one():
    at = run(PLANNER)
    box = at.selectbox(key="weight_dtype")
    assert box.value == "checkpoint"  # DeepSeek-V3 ships an fp8 block-quantized checkpoint
    assert "checkpoint (fp8 block 128x128)" in box.options
    at.selectbox(key="model").set_value("llama-3-70b").run()
    assert at.selectbox(key="weight_dtype").value == "bf16"
    p = mlacalc.plan(
        "llama-3-70b",
        "H200",
        8,
        tp=8,
        weight_dtype="bf16",
        kv_dtype="bf16",
        page_size=16,
        seq_len=131072,
        batch=8,
    )
    assert f"weights per GPU: **{p.weights_per_gpu_bytes / 2**30:,.2f} GiB**" in markdown(at)
    assert "w" not in at.query_params
    at.selectbox(key="weight_dtype").set_value("int4").run()
    at.selectbox(key="model").set_value("qwen2.5-72b").run()
    assert at.selectbox(key="weight_dtype").value == "int4"  # the user's choice stays
    assert at.query_params["w"] == "int4"
    assert run(w="fp16", model="llama-3-70b").selectbox(key="weight_dtype").value == "fp16"


def test_roofline_tab_uses_the_sidebar_dtypes():
    at = run("Roofline", w="fp16", kv="fp8", seq_len="8192", batch="4")
    table = next(d.value for d in at.dataframe if "attained FLOP/s" in d.value.columns)
    decode = table[(table["phase"] == "decode") & (table["impl"] == "absorbed")].iloc[0]
    expected = mlacalc.predict_time(
        "deepseek-v3",
        "H200",
        "decode",
        8192,
        4,
        impl="absorbed",
        mode="fused",
        dtype="bf16",
        weight_dtype="fp16",
        kv_dtype="fp8",
    )
    assert decode["time"] == human_seconds(expected.seconds)
    other = mlacalc.predict_time(
        "deepseek-v3", "H200", "decode", 8192, 4, impl="absorbed", mode="fused", dtype="bf16"
    )
    assert other.seconds != expected.seconds


def test_what_if_edits_live_in_the_url():
    at = run(whatif="1", d_c="256", L="30")
    model = mlacalc.load_model("deepseek-v3").with_changes(kv_lora_rank=256, num_hidden_layers=30)
    assert f"({mlacalc.kv_cache_bytes(model, 131072, 8):,} bytes)" in markdown(at)
    assert at.query_params["d_c"] == "256" and at.query_params["whatif"] == "1"
    at.slider(key="w_dc").set_value(512).run()
    assert at.query_params["d_c"] == "512"
    at.checkbox(key="whatif").uncheck().run()
    assert "d_c" not in at.query_params and "whatif" not in at.query_params
    at = run(whatif="1", d_c="100", d_rope="33")  # an invalid edit stays in the link, named
    assert any("qk_rope_head_dim" in e.value for e in at.error)
    assert at.query_params["d_rope"] == "33" and at.query_params["d_c"] == "100"
    at = run(whatif="1", d_c="999999")
    assert at.slider(key="w_dc").value == 4096 and any(
        "'d_c=999999'" in w.value for w in at.warning
    )


def test_scopes_are_stated(default_views):
    captions = " ".join(c.value for at in default_views for c in at.caption)
    for scope in ("Whole model", "Per attention layer", "One attention layer", "Per GPU"):
        assert scope in captions, scope
    # the roofline and planner views say which profile timed the kernels, and how
    how = "H200 by datasheet ratios from H100-SXM (same tensor-core generation)"
    assert captions.count("profile 'default'") >= 2 and captions.count(how) >= 2


def test_what_if_dimensions():
    at = run()
    at.checkbox(key="whatif").check().run()
    at.slider(key="w_dc").set_value(256).run()
    assert not at.exception
    model = mlacalc.load_model("deepseek-v3").with_changes(kv_lora_rank=256)
    assert f"({mlacalc.kv_cache_bytes(model, 131072, 8):,} bytes)" in markdown(at)


def test_what_if_edits_the_head_widths_and_the_hidden_width():
    """The what-if had no d_nope, d_v or hidden width: a new MLA design's query/key and value
    widths and its model width could be tried only through --set on the CLI."""
    at = run(whatif="1", d_nope="64", d_v="96", d="4096")
    assert not at.exception and not at.error
    model = mlacalc.load_model("deepseek-v3").with_changes(
        qk_nope_head_dim=64, v_head_dim=96, hidden_size=4096
    )
    naive = at.dataframe[0].value.set_index("implementation").loc["naive"]
    assert naive["elements/token/layer"] == 128 * (64 + 64 + 96)  # n_h (d_nope + d_rope + d_v)
    designs = at.dataframe[1].value.set_index("design")
    params = mlacalc.param_counts(model).total
    assert params != mlacalc.param_counts("deepseek-v3").total
    assert designs.loc["DeepSeek-V3 (what-if)", "total params"] == human_si(params)
    at.number_input(key="w_dv").set_value(128).run()
    assert at.query_params["d_v"] == "128" and at.query_params["d"] == "4096"
    at = run(whatif="1", model="llama-3-8b", d="2048")
    assert not at.exception and at.number_input(key="w_hidden").value == 2048


def test_invalid_what_if_shows_an_error_and_keeps_working():
    at = run()
    at.selectbox(key="model").set_value("llama-3-8b").run()
    at.checkbox(key="whatif").check().run()
    at.number_input(key="w_kv").set_value(5).run()
    assert not at.exception
    assert any("num_key_value_heads" in e.value for e in at.error)
    assert f"({mlacalc.kv_cache_bytes('llama-3-8b', 131072, 8):,} bytes)" in markdown(at)


def test_planner_widgets_and_errors():
    at = run(PLANNER)
    at.number_input(key="plan_gpus").set_value(16)
    at.number_input(key="plan_tp").set_value(8)
    at.number_input(key="plan_ep").set_value(16)
    at.run()
    assert not at.exception
    p = mlacalc.plan(
        "deepseek-v3",
        "H200",
        16,
        tp=8,
        ep=16,
        kv_dtype="bf16",
        page_size=16,
        seq_len=131072,
        batch=8,
    )
    assert metrics(at)["largest batch at 131,072 tokens"] == f"{p.max_batch:,}"
    at.number_input(key="plan_ep").set_value(3).run()
    assert any("expert parallel degree 3" in e.value for e in at.error) and not at.exception


def test_flops_view_phase_switch():
    at = run("FLOPs")
    at.radio(key="flops_phase").set_value("prefill").run()
    assert not at.exception
    table = next(d.value for d in at.dataframe if "total FLOPs" in d.value.columns)
    default = table[table["impl"].str.contains("default")].iloc[0]
    expected = mlacalc.attention_flops("deepseek-v3", "prefill", 131072, 8)
    assert expected > 2**53  # beyond a float's exact range: shown as exact text
    assert default["total FLOPs"] == f"{expected:,}"


def test_upload_parsing_is_safe(tmp_path):
    """The app hands uploads to parse_upload: in memory, safe loader, size limit."""
    text = (Path(mlacalc.__file__).parent / "data" / "models" / "gpt2.yaml").read_bytes()
    assert parse_upload(text, "gpt2.yaml").name == "gpt2"
    with pytest.raises(mlacalc.ConfigError, match="at most"):
        parse_upload(b"#" * (1 << 20 + 1), "big.yaml", 1 << 20)
    marker = tmp_path / "pwned"
    with pytest.raises(mlacalc.ConfigError, match="tag"):
        parse_upload(f"!!python/object/apply:os.system ['touch {marker}']".encode(), "evil.yaml")
    assert not marker.exists()
    with pytest.raises(mlacalc.ConfigError, match="not valid JSON"):
        parse_upload(b'{"model_type": ', "config.json")
    with pytest.raises(mlacalc.ConfigError, match="UTF-8"):
        parse_upload(b"\xff\xfe\x00", "x.yaml")


def test_layer_pattern_and_cache_by_kind():
    """GPT-OSS-120B: 18 sliding(128) + 18 full layers; the KV tab splits the cache by kind
    (K and V rows of 2 x 8 x 64 bf16 values) and both tabs state the pattern."""
    at = run(model="gpt-oss-120b", seq_len="4096", batch="3")
    text = markdown(at) + markdown(run("Parameters", model="gpt-oss-120b", seq_len="4096"))
    line = "Layer pattern: **36 layers: 18 sliding(128) + 18 full; FFN: 36 MoE**"
    assert text.count(line) == 2  # KV cache and Parameters tabs
    (table,) = [d.value for d in at.dataframe if "kind of layer" in d.value.columns]
    row = 2 * 8 * 64 * 2
    assert list(table["kind of layer"]) == ["sliding(128)", "full"]
    assert [int(b) for b in table["bytes"]] == [18 * 3 * 128 * row, 18 * 3 * 4096 * row]
    assert f"({sum(int(b) for b in table['bytes']):,} bytes)" in text
    plain = markdown(run(model="llama-3-8b"))
    assert "Layer pattern: **32 layers: 32 full; FFN: 32 dense**" in plain


def test_checkpoint_weights_named_in_the_sidebar():
    """A quantized checkpoint sized as stored reads 'checkpoint (...)', not a dtype it is not."""
    at = run(model="gpt-oss-120b", hw="H100-SXM")
    box = at.selectbox(key="weight_dtype")
    assert box.value == "checkpoint" and box.options[0] == "checkpoint (mxfp4 experts)"
    assert "w" not in at.query_params
    at.selectbox(key="weight_dtype").set_value("bf16").run()
    assert at.query_params["w"] == "bf16"
    at.selectbox(key="weight_dtype").set_value("checkpoint").run()
    assert "w" not in at.query_params and not at.exception
    assert run(model="gpt-oss-120b", w="fp8").selectbox(key="weight_dtype").value == "fp8"


def test_latent_kv_layout_only_for_mla_models():
    at = run(model="gemma-4-26b-a4b", kv="fp8_ds_mla")
    box = at.selectbox(key="kv_dtype")
    assert not at.exception and box.value == "bf16" and "fp8_ds_mla" not in box.options
    assert "fp8_ds_mla" in run(kv="fp8_ds_mla").selectbox(key="kv_dtype").options


def test_kv_tab_per_token_names_the_layers_counted():
    at = run(model="gemma-4-26b-a4b", hw="H100-SXM")
    assert metrics(at)["per token (full layers)"] == "20.00 KiB"  # 5 full layers x 4 KiB
    table = next(d.value for d in at.dataframe if "layers a token adds to" in d.value.columns)
    row = table.iloc[0]
    assert (row["layers a token adds to"], row["bytes/token"]) == (5, 20480)
    assert row["elements/token/layer"] * 2 * 5 == row["bytes/token"]  # bf16 rows, same layers


def test_roofline_tab_shows_each_kind_of_layer():
    """Gemma-4: a full layer reads every token's K and V, a sliding one its window; one row
    per kind, each the time of a model made of that kind of layer."""
    from mlacalc.models.architecture import kind_model, layer_pattern

    at = run("Roofline", model="gemma-4-26b-a4b", hw="H100-SXM", seq_len="131072", batch="8")
    table = next(d.value for d in at.dataframe if "attained FLOP/s" in d.value.columns)
    decode = table[table["phase"] == "decode"].set_index("layer kind")["time"].map(_seconds)
    model = mlacalc.load_model("gemma-4-26b-a4b")
    for kind in {k.label: k for k in layer_pattern(model).layers}.values():
        expected = mlacalc.predict_time(
            kind_model(model, kind), "H100-SXM", "decode", 131072, 8, mode="fused"
        )
        assert decode[kind.label] == pytest.approx(expected.seconds, rel=5e-3)
    # 131,072 keys against 1,024: the full layer's decode far the longer (8.8x since
    # TensorRT-LLM's bf16 grouped decode runs MMHA below XQA's block threshold, 60f690f: the
    # sliding layer's 8 sequences x 1,024 keys are below it, 10.1x just before; 9.4x once a
    # served step read a small cache from the HBM, not the L2 the tables' warm replays found
    # it in, mapping.WARM_CACHE_ENGINES: the sliding layer's attention 114 -> 129 us; 10.3x
    # before)
    assert decode["full"] > 8.5 * decode["sliding(1024)"]
    assert "each kind (full, sliding(1024))" in " ".join(c.value for c in at.caption)


def test_roofline_tab_reads_a_checkpoint_as_stored():
    at = run("Roofline", model="gpt-oss-120b", hw="H100-SXM", seq_len="8192", batch="4")
    table = next(d.value for d in at.dataframe if "attained FLOP/s" in d.value.columns)
    got = table[(table["phase"] == "decode") & (table["layer kind"] == "full")].iloc[0]
    from mlacalc.models.architecture import kind_model, layer_pattern

    model = mlacalc.load_model("gpt-oss-120b")
    full = next(k for k in layer_pattern(model).layers if k.label == "full")
    expected = mlacalc.predict_time(kind_model(model, full), "H100-SXM", "decode", 8192, 4)
    assert got["time"] == human_seconds(expected.seconds)
    assert "as the checkpoint stores them (mxfp4 experts)" in " ".join(c.value for c in at.caption)


def test_roofline_tab_says_when_the_engine_runs_a_kernel_as_another():
    """DeepSeek-V3.2 under SGLang on B200: its prompt core runs the absorbed sparse kernel, so
    the prompt points' times are of that kernel while their FLOPs count the named
    implementation: a caption says so, as `mlacalc roofline`'s note does; DeepSeek-V3 has none."""
    at = run("Roofline", model="deepseek-v3.2", hw="B200", engine="sglang", seq_len="8192")
    said = " ".join(c.value for c in at.caption)
    assert "prefill: the engine runs attention as mla_decode sparse" in said
    at = run("Roofline", model="deepseek-v3", hw="B200", engine="sglang", seq_len="8192")
    assert "the engine runs" not in " ".join(c.value for c in at.caption)


def test_kv_tab_own_design_row_is_the_model():
    """Gemma-4 as GQA (its own design) is the model: same cache, same parameters."""
    at = run(model="gemma-4-26b-a4b", hw="H100-SXM", seq_len="131072", batch="8")
    table = next(d.value for d in at.dataframe if "design" in d.value.columns)
    own = table[table["design"] == "Gemma 4 26B A4B"].iloc[0]
    assert own["KV bytes / token"] == mlacalc.kv_cache("gemma-4-26b-a4b", 131072, 8).bytes_per_token
    assert "as GQA" not in " ".join(table["design"])
    assert "d_h 512, 2 KV heads, K = V" in " ".join(c.value for c in at.caption)


def test_charts_and_wide_tables_stay_readable():
    """The KV chart's log axes label decades only; the FLOPs table puts its summary columns
    (total, FLOP/byte) before the per-stage ones, so a wide table does not hide them."""
    import json as _json

    at = run(model="kimi-linear-48b-a3b")
    kv = next(
        _json.loads(c.proto.spec)
        for c in at.get("plotly_chart")
        if "KV cache of the whole model" in _json.loads(c.proto.spec)["layout"]["title"]["text"]
    )
    assert kv["layout"]["yaxis"]["dtick"] == 1 and kv["layout"]["xaxis"]["dtick"] == 1
    at = run("FLOPs", model="kimi-linear-48b-a3b")
    flops = next(d.value for d in at.dataframe if "total FLOPs" in d.value.columns)
    assert list(flops.columns[:3]) == ["impl", "total FLOPs", "FLOP/byte"]


def test_roofline_tab_bound_is_intensity_against_the_ridge():
    """Was: decode absorbed_merged at 166.5 FLOP/byte labelled compute-bound on an H200 whose
    ridge is 206.2 (and compressed at 226.8 on a B200, ridge 292.2). Every row's bound now
    follows its FLOP/byte against the ridge shown beside it."""
    for hw in ("H200", "B200"):
        at = run("Roofline", hw=hw, seq_len="32768", batch="64")
        table = next(d.value for d in at.dataframe if "attained FLOP/s" in d.value.columns)
        assert len(table) == 8  # four MLA implementations, decode and prefill: one view
        for _, row in table.iterrows():
            expected = "compute" if row["FLOP/byte"] >= row["ridge"] else "memory"
            assert row["bound"] == expected, (hw, dict(row))


def test_kv_view_equivalents_name_the_variant_without_one():
    """MiniMax-M3 has MHA / GQA / MQA equivalents but no MLA one: the table shows the three,
    and a line names the missing one (was one 'No equivalents' box for all four)."""
    at = run(model="minimax-m3")
    designs = list(at.dataframe[-1].value["design"])
    assert designs == ["MiniMax-M3 as MHA", "MiniMax-M3 as GQA", "MiniMax-M3 as MQA"]
    assert any("Not shown:" in c.value and "no MLA equivalent" in c.value for c in at.caption)
    assert not any("No equivalents" in i.value for i in at.info)


def test_flops_formulas_say_where_they_do_not_describe_the_layers():
    """The FLOPs tab's formulas: DeepSeek-V4-Pro's (csa / hca) are its own kinds' (round 26:
    a caption said the plain MQA layer's did not describe them, and before that the MQA
    formulas stood alone), one cache and one decode step a kind, each equal to
    ``mlacalc.formula``'s; MiniMax-M3's msa layers still get the caption; Llama-3-8B's full
    layers need no such line."""
    import sympy as sp

    at = run("FLOPs", model="deepseek-v4-pro")
    captions = "\n".join(c.value for c in at.caption)
    assert "plain MQA layer's formulas" not in captions
    assert "is DeepSeek-V4: each kind of layer has its own formulas" in captions
    tex = [x.value.strip("$\n") for x in at.latex]
    for kind in ("hca", "csa"):
        assert sp.latex(mlacalc.formula("kv_cache_bytes", kind)) in tex
        core = mlacalc.formula("attention_flops", kind, phase="decode", stage="core")
        assert sp.latex(core) in tex
    at = run("FLOPs", model="minimax-m3")
    assert any("counted by their own rules" in c.value for c in at.caption)
    at = run("FLOPs", model="llama-3-8b")
    assert not any("plain GQA layer's formulas" in c.value for c in at.caption)


def test_kv_view_by_kind_caption_names_the_compressed_kinds():
    """DeepSeek-V4-Pro's cache by kind of layer: the caption says what a csa / hca layer keeps
    and that its bytes/token/layer is averaged (it named every kind but these), as report does."""
    at = run(model="deepseek-v4-pro")
    assert any(
        "a compressed layer (csa, hca) its window's rows and its pooled keys" in c.value
        for c in at.caption
    )


def test_a_column_empty_in_every_row_is_left_out():
    """MiniMax-M3's layers' rows differ: the cache table has no elements/token/layer value, and
    the grid printed 'None' in it; the column is left out (one kind: it stays)."""
    at = run(model="minimax-m3")
    tables = [d.value for d in at.dataframe]
    per_impl = next(t for t in tables if "layers a token adds to" in t.columns)
    assert "elements/token/layer" not in per_impl.columns
    at = run(model="llama-3-8b")
    per_impl = next(d.value for d in at.dataframe if "layers a token adds to" in d.value.columns)
    assert list(per_impl["elements/token/layer"]) == [2048]


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm"])
@pytest.mark.parametrize("model", ["glm-5.1", "deepseek-v3"])
def test_no_roofline_point_lies_above_its_roof(model, engine):
    """Each point is its own work over its own time: GLM-5.1's naive decode counted the dense
    core (9.7 FLOP/byte) over the sparse kernel's time, 243 TFLOP/s on GB200 under vllm, 3.2x
    above the memory roof (2.2-3.6x on GB200 and H200, every engine). And each point sits under
    the roof of the dtype doing most of its FLOPs, which the chart draws (DeepSeek-V3's fp8
    prefill under trtllm reaches 1.5x the bf16 peak on GB200)."""
    from appviews.roofline import roofline_points, roofs
    from mlacalc.hardware.catalogue import load_hardware

    m = mlacalc.load_model(model)
    for hw in ("GB200", "H200"):
        device = load_hardware(hw)
        bw = device.memory_bandwidth_bytes_per_s
        points = roofline_points(m, hw, 32768, 64, "bf16", None, "fp8", engine)
        drawn = [peak for _, peak in roofs(device, "bf16", points)]
        for pt in points:
            roof = min(pt["intensity"], pt["ridge"]) * bw
            assert pt["flops_per_s"] <= roof, (
                hw,
                pt["phase"],
                pt["impl"],
                pt["flops_per_s"] / roof,
            )
            assert any(peak == pytest.approx(pt["ridge"] * bw) for peak in drawn)


def test_url_model_alias_reads_as_the_command_line():
    """model=deepseek-r1 loads DeepSeek-V3, as `mlacalc report deepseek-r1` does (was 'not a known
    model ...; using deepseek-v3'); llama-3.1-70b is a model of its own."""
    at = run(model="deepseek-r1")
    assert at.selectbox(key="model").value == "deepseek-v3"
    assert [w.value for w in at.warning] == ["URL parameter 'model=deepseek-r1' means deepseek-v3."]
    at = run(model="llama-3.1-70b")
    assert at.selectbox(key="model").value == "llama-3.1-70b" and not at.warning


def test_roofline_tab_prefill_pairs_default_all_pairs_and_said():
    """The tab timed the prefill over every (query, key) pair, unsaid, while decoders run it
    causal: a 'prefill pairs' box whose caption says which; its default is all pairs, the
    default of `mlacalc roofline` and predict_time (it was causal: the same question had two
    default answers)."""
    at = run("Roofline", seq_len="8192", batch="4")

    def prefill_naive(at):
        table = next(d.value for d in at.dataframe if "attained FLOP/s" in d.value.columns)
        return table[(table["phase"] == "prefill") & (table["impl"] == "naive")].iloc[0]

    def expected(causal):
        p = mlacalc.predict_time(
            "deepseek-v3", "H200", "prefill", 8192, 1, impl="naive", causal=causal, kv_dtype="bf16"
        )
        return human_seconds(p.seconds)

    captions = " ".join(c.value for c in at.caption)
    assert at.selectbox(key="roof_pairs").value == "all pairs"
    assert "all (query, key) pairs (not causal;" in captions
    assert prefill_naive(at)["time"] == expected(False)
    at.selectbox(key="roof_pairs").set_value("causal").run()
    captions = " ".join(c.value for c in at.caption)
    assert "causal: each query attends the keys before it" in captions
    assert prefill_naive(at)["time"] == expected(True)


def test_a_failed_upload_is_said_in_the_main_area_and_the_limit_is_the_apps():
    """A file that did not load was said in the sidebar alone, while the main area showed
    DeepSeek-V3's title and figures; the uploader's label said 200MB where the app takes
    1 MiB. The main area now says it, naming the model shown, and the limit is the app's."""
    import tomllib

    from appviews.common import MAX_UPLOAD_BYTES

    at = run()
    at.radio(key="source").set_value("Upload a config").run()
    for key in ("upload", "upload_quant"):
        assert at.file_uploader(key=key).proto.max_upload_size_mb << 20 == MAX_UPLOAD_BYTES
    config = tomllib.loads((Path(__file__).parent.parent / ".streamlit/config.toml").read_text())
    assert config["server"]["maxUploadSize"] << 20 == MAX_UPLOAD_BYTES
    bad = b"model_type: llama\nhidden_size: 4096\n"
    at.file_uploader(key="upload").set_value(("mine.yaml", bad, "text/plain")).run()
    assert not at.exception
    main = " ".join(e.value for e in at.main.error)
    assert "mine.yaml did not load" in main and "num_hidden_layers" in main
    assert "Every figure below is the shipped DeepSeek-V3's, not the file's" in main
    assert any("Showing the shipped DeepSeek-V3" in e.value for e in at.sidebar.error)


def test_flops_view_drops_stages_no_implementation_runs():
    """A GQA model has no kv_up or absorb stage: the FLOPs view showed their empty columns and
    legend entries. Only the stages an implementation shown runs are drawn; MLA keeps them."""
    import json as _json

    for model, want in (("llama-3-8b", False), ("deepseek-v3", True)):
        at = run("FLOPs", model=model)
        stages = next(d.value for d in at.dataframe if "q_proj" in d.value.columns)
        assert ("kv_up" in stages.columns) is want and ("absorb" in stages.columns) is want
        names = {
            t.get("name")
            for c in at.get("plotly_chart")
            for t in _json.loads(c.proto.spec)["data"]
            if t.get("type") == "bar"
        }
        assert ("kv_up" in names) is want and ("absorb" in names) is want, names


def test_roofline_y_axis_names_a_dtype_only_for_one_roof():
    """DeepSeek-V3's fp8 GEMMs draw an fp8 roof beside bf16's: the y-axis said "(bf16)"."""
    import json as _json

    at = run("Roofline", model="deepseek-v3", hw="B200")
    (spec,) = [
        _json.loads(c.proto.spec)
        for c in at.get("plotly_chart")
        if "Roofline of one" in _json.loads(c.proto.spec)["layout"]["title"]["text"]
    ]
    roofs = [t["name"] for t in spec["data"] if t["name"].endswith("roofline")]
    assert len(roofs) > 1, roofs
    assert spec["layout"]["yaxis"]["title"]["text"] == "attained FLOP/s"


def _seconds(text: str) -> float:
    """A time as the roofline table shows it ("7.27 s", "114.60 us") in seconds."""
    value, unit = text.split()
    return float(value.replace(",", "")) * {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}[unit]


def test_roofline_times_in_a_human_unit():
    """The roofline table's time column was in us with seven digits ("7,266,853.97"): each
    time is in s, ms, us or ns as the CLI prints it."""
    at = run("Roofline", seq_len="131072", batch="8")
    table = next(d.value for d in at.dataframe if "attained FLOP/s" in d.value.columns)
    assert "time (us)" not in table.columns
    for text in table["time"]:
        value = float(text.split()[0].replace(",", ""))
        assert 1.0 <= value < 1000.0 and text.split()[1] in ("s", "ms", "us", "ns"), text


def test_an_uploaded_config_without_head_dim_says_a_what_if_width_keeps_it():
    """review12 12: an upload with no head_dim and a what-if hidden width kept head_dim 128
    without a word (the app stated the widget's head_dim), where the CLI's --set warns
    "head_dim stays 128"; the app now shows the same sentence, and a head width typed is
    stated (no warning)."""
    at = run()
    at.radio(key="source").set_value("Upload a config").run()
    config = (
        b"model_type: llama\nhidden_size: 4096\nnum_hidden_layers: 32\nnum_attention_heads: 32\n"
        b"num_key_value_heads: 8\nintermediate_size: 14336\nvocab_size: 128256\n"
    )
    at.file_uploader(key="upload").set_value(("mine.yaml", config, "text/plain")).run()
    at.checkbox(key="whatif").check().run()
    at.number_input(key="w_hidden").set_value(2048).run()
    assert not at.exception
    said = " ".join(w.value for w in at.warning)
    assert "head_dim stays 128" in said and "2,048 / 32 = 64" in said
    at.number_input(key="w_dh").set_value(64).run()
    assert not at.exception and "head_dim stays" not in " ".join(w.value for w in at.warning)


def test_kv_sweep_past_the_models_positions_is_one_caption_not_console_warnings():
    """DeepSeek-V3.2's KV cache curve runs to 1,048,576 tokens, past its 163,840 positions:
    13 MlacalcWarning lines went to the server's console and none to the page (round 24).
    Now caught, and said in one caption."""
    import warnings

    from appviews.kv_cache import kv_curves

    kv_curves.clear()
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        at = run(model="deepseek-v3.2", seq_len="8192")
    assert not [w for w in said if "max_position_embeddings" in str(w.message)]
    captions = [c.value for c in at.caption if "max_position_embeddings" in c.value]
    assert len(captions) == 1, captions
    assert (
        "13 lengths of the curve (" in captions[0]
        and "to 1,048,576 tokens) are past" in captions[0]
    )
    assert "DeepSeek-V3.2's max_position_embeddings (163,840)" in captions[0]
    # a sweep inside the positions says nothing
    from appviews.kv_cache import past_positions_caption

    assert past_positions_caption(mlacalc.load_model("deepseek-v3.2"), (1024, 163840)) == ""
