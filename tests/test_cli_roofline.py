"""`mlacalc roofline`: which profile times the kernels, causal prefill, what each bound means."""

import json
import re
from pathlib import Path

import pytest
from reference_data import MEASURED

from mlacalc.serving.provenance import ROUTE_ERRORS
from mlacalc.timemodel.predict import predict_time


def _json(run, *args):
    out, _ = run(*args, "--format", "json")
    return json.loads(out)["predictions"]


def test_profile_option_predicts_with_that_profile(run):
    base = ("roofline", "deepseek-v3", "-H", "H200", "--seq-len", "8k", "--batch", "16")
    shipped = _json(run, *base)[0]
    a100 = _json(run, *base, "--profile", "fit-a100-sxm-80gb")[0]
    plain = _json(run, *base, "--profile", "roofline")[0]
    assert shipped["profile"] == "default" and a100["profile"] == "fit-a100-sxm-80gb"
    api = predict_time("deepseek-v3", "H200", "decode", 8192, 16, profile="fit-a100-sxm-80gb")
    assert a100["seconds"] == pytest.approx(api.seconds, rel=1e-12)
    assert a100["seconds"] != pytest.approx(shipped["seconds"], rel=1e-6)
    assert plain["profile"] == "roofline" and plain["seconds"] < shipped["seconds"]


def test_profile_errors_name_the_option(run, tmp_path):
    _, err = run("roofline", "deepseek-v3", "-H", "H200", "--profile", "nope", code=2)
    assert "--profile" in err and "nope" in err and "Traceback" not in err
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    _, err = run("roofline", "deepseek-v3", "-H", "H200", "--profile", str(bad), code=2)
    assert "not valid JSON" in err and "Traceback" not in err


def _partial_profile(tmp_path, keep):
    """fit-a100-sxm-80gb's JSON with only the classes ``keep`` accepts; none kept: no
    ``classes`` key."""
    from mlacalc.data import PROFILES

    doc = json.loads((PROFILES / "fit-a100-sxm-80gb.json").read_text())
    doc["name"] = "partial"
    doc["classes"] = {k: v for k, v in doc["classes"].items() if keep(k)}
    if doc["classes"]:
        for fit in doc["devices"].values():  # the device's own fit, as calibrate writes it
            for k in [k for k in fit if not keep(k)]:
                del fit[k]
    else:  # the key deleted (the device's own fit left as it was)
        del doc["classes"]
    path = tmp_path / "partial.json"
    path.write_text(json.dumps(doc))
    return str(path)


def test_partial_profile_lists_its_uncalibrated_classes(run, tmp_path):
    # before: a GEMM-only profile printed "A100-SXM-80GB by its own fit" and nothing about
    # rope and attention falling back to the datasheet defaults (plan listed them)
    path = _partial_profile(tmp_path, lambda k: k.startswith("gemm:"))
    args = ("roofline", "llama-3-8b", "-H", "A100-SXM-80GB", "--batch", "8", "--seq-len", "4k")
    out, _ = run(*args, "--profile", path)
    text = " ".join(out.split())
    assert (
        "2 of 5 kernels uncalibrated: elementwise:bf16 (rope), attention_decode:bf16 "
        "(attention) (no profile class; datasheet defaults)" in text
    )
    out, _ = run(*args)
    assert "uncalibrated" not in out


def test_profile_without_classes_is_refused(run, tmp_path):
    # before: accepted and printed "calibrated on <file>" with every kernel on datasheet defaults
    path = _partial_profile(tmp_path, lambda k: False)
    _, err = run("roofline", "llama-3-8b", "-H", "A100-SXM-80GB", "--profile", path, code=2)
    err = " ".join(err.split())
    # the key missing is named as missing (the profile reader refuses it, as validate's does)
    assert "field 'classes': is missing" in err and "Traceback" not in err


def test_table_says_how_the_device_is_predicted(run):
    out, _ = run("roofline", "deepseek-v3", "-H", "H200", "--seq-len", "8k")
    flat = " ".join(out.split())
    assert "profile 'default'" in flat
    assert "H200 by datasheet ratios from H100-SXM (same tensor-core generation)" in flat
    out, _ = run("roofline", "deepseek-v3", "-H", "MI300X", "--seq-len", "8k")
    assert "pooled fit" in " ".join(out.split()) and "unvalidated" in out
    # the tile efficiency is the plain roofline's: no column under the kernel model
    assert "tile eff." not in out


def test_causal_prefill_matches_plan_and_the_api(run):
    args = ("roofline", "llama-3-8b", "-H", "H100-SXM", "--scope", "model", "--phase", "prefill")
    full = _json(run, *args, "--seq-len", "4k")[0]
    causal = _json(run, *args, "--seq-len", "4k", "--causal")[0]
    api = predict_time("llama-3-8b", "H100-SXM", "prefill", 4096, 1, scope="model", causal=True)
    assert causal["seconds"] == pytest.approx(api.seconds, rel=1e-12)
    assert causal["seconds"] < full["seconds"]
    _, err = run("roofline", "llama-3-8b", "-H", "H100-SXM", "--causal")  # decode
    assert "--causal changes nothing in decode" in err


def test_profile_and_calibrate_exclude_each_other(run, tmp_path):
    side = tmp_path / "side.json"
    side.write_text("{}")
    _, err = run(
        "roofline",
        "gpt2",
        "-H",
        "H100-SXM",
        "--profile",
        "default",
        "--calibrate",
        str(side),
        code=2,
    )
    assert "--profile and --calibrate" in err


def test_bound_is_intensity_against_the_ridge_and_latency_is_the_models_term():
    """``bound`` is one rule (FLOPs per byte against the ridge of the kernel's dtype); the time
    model's largest term, where a small kernel's fixed cost per call outweighs the rest, is
    ``limited_by`` (a norm at batch 1 is latency-limited, and memory-bound)."""
    p = predict_time("llama-3-8b", "H100-SXM", "decode", 1024, 1, scope="model")
    norm = next(o for o in p.ops if o.name == "input_norm")
    assert norm.limited_by == "latency" and norm.bound == "memory"
    for o in p.ops:
        assert o.bound == ("compute" if o.arithmetic_intensity >= o.ridge else "memory")
        if o.limited_by == "latency":
            assert o.fixed_s > max(o.compute_s, o.memory_s, o.launch_s - o.fixed_s)
    assert p.bound == ("compute" if p.arithmetic_intensity >= p.ridge else "memory") == "memory"
    # the step's time still splits into its kernels' larger terms
    assert p.compute_s + p.memory_s == pytest.approx(p.seconds, rel=1e-12)
    big = predict_time("llama-3-8b", "H100-SXM", "prefill", 8192, 8, scope="model")
    assert {o.name: o.bound for o in big.ops}["dense_ffn_up"] == "compute"


def test_q_a_proj_at_2_flop_per_byte_is_memory_bound(run):
    """Was: ``roofline deepseek-v3 -H H100`` labelled q_a_proj, 2.0 FLOP/byte, compute-bound
    (the time model's compute term of a GEMV spread over few SMs). Every row's label now follows
    its FLOP/byte against the ridges the note names."""
    doc = json.loads(run("roofline", "deepseek-v3", "-H", "H100", "--format", "json")[0])
    ops = {o["name"]: o for o in doc["predictions"][0]["ops"]}
    qkv_a = ops["qkv_a_proj"]  # q_a_proj and kv_a_proj, one GEMM
    assert qkv_a["arithmetic_intensity_flops_per_byte"] == pytest.approx(2.0, abs=0.1)
    assert qkv_a["bound"] == "memory"
    for o in ops.values():
        intensity, ridge = o["arithmetic_intensity_flops_per_byte"], o["ridge"]
        assert o["bound"] == ("compute" if intensity >= ridge else "memory"), o["name"]
    text = run("roofline", "deepseek-v3", "-H", "H100")[0]
    row = next(line for line in text.splitlines() if "qkv_a_proj" in line)
    cells = [c.strip() for c in row.strip().strip("│").split("│")]
    # the bound column says memory; the model's own compute term is its limited-by column's
    assert cells[5] == "memory" and cells[6] == "compute", cells
    assert "295.4 or 590.7 FLOP/byte" in " ".join(text.split())


def test_mla_implementations_side_by_side_in_one_call(run):
    """``--impl all`` (or a comma list): each implementation's table and one side-by-side."""
    doc = json.loads(
        run(
            "roofline", "deepseek-v3", "-H", "H200", "-b", "64", "--impl", "all", "--format", "json"
        )[0]
    )
    rows = doc["side_by_side"]
    assert [r["impl"] for r in rows] == ["naive", "compressed", "absorbed", "absorbed_merged"]
    for r, p in zip(rows, doc["predictions"]):
        assert r["seconds"] == p["seconds"] and r["bound"] == p["bound"]
    assert min(r["x_fastest"] for r in rows) == 1.0
    text = run("roofline", "deepseek-v3", "-H", "H200", "--impl", "absorbed,compressed")[0]
    assert "MLA implementations side by side" in text
    _, err = run("roofline", "deepseek-v3", "-H", "H200", "--impl", "absorbed,absorbed", code=2)
    assert "names an implementation twice" in err
    _, err = run("roofline", "deepseek-v3", "-H", "H200", "--impl", "standard", code=2)
    assert "'standard' is the implementation of MHA" in err


def test_each_implementations_table_states_its_own_plain_roofline(run):
    """The footer's "--profile roofline prints" figure is each implementation's own, not the
    first one's (before: every table of ``--impl all`` said naive's 5,448.4 us)."""
    base = ("roofline", "deepseek-v3", "-H", "H20", "--seq-len", "8k", "--batch", "32")
    base += ("--engine", "vllm")

    def printed(text):
        return re.findall(r"--profile roofline prints ([0-9,.]+) us", " ".join(text.split()))

    alone = [printed(run(*base, "--impl", i)[0])[0] for i in ("naive", "compressed", "absorbed")]
    assert len(set(alone)) == 3
    assert printed(run(*base, "--impl", "naive,compressed,absorbed")[0]) == alone
    assert printed(run(*base, "--impl", "absorbed,naive")[0]) == [alone[2], alone[0]]


def test_a_context_beyond_the_models_positions_is_warned(run):
    for cmd in ("report", "roofline"):
        extra = ("-H", "H100-SXM") if cmd == "roofline" else ()
        _, err = run(cmd, "deepseek-v3", *extra, "--seq-len", "1M")
        assert "max_position_embeddings (163,840)" in err, cmd
        _, err = run(cmd, "deepseek-v3", *extra, "--seq-len", "128k")
        assert "max_position_embeddings" not in err, cmd


def test_a_step_no_device_holds_is_warned_once(run):
    # before: Prediction.warnings reached only the JSON; the text said nothing of a model
    # step whose weights and KV (626.9 + 2,196.0 GiB) no H100 holds
    base = ("roofline", "deepseek-v3", "-H", "H100-SXM", "--scope", "model", "--batch", "256")
    _, err = run(*base, "--seq-len", "128k", "--phase", "both")
    lines = [line for line in err.splitlines() if "working set" in line]
    assert len(lines) == 1 and "exceeds one H100-SXM's 80 GiB" in lines[0], err
    assert "2,822.9 GiB" in lines[0]
    _, err = run(*base[:-2], "--batch", "1", "--seq-len", "4k")  # its weights alone: 626.9 GiB
    assert "working set" in err
    _, err = run("roofline", "deepseek-v3", "-H", "H100-SXM", "--seq-len", "4k", "--batch", "8")
    assert "working set" not in err  # one attention layer fits
    _, err = run(*base, "--seq-len", "1M")
    assert err.count("max_position_embeddings") == 1  # check_context's line alone


def test_q_len_outside_chunk_says_what_to_do(run):
    _, err = run("roofline", "deepseek-v3", "-H", "H100-SXM", "--q-len", "64", code=2)
    assert "decode has q = 1" in err and "add --phase chunk, or drop --q-len" in err


def test_validate_mode_with_measured_sets_is_named(run):
    pytest.importorskip("pyarrow")  # the parquet reader, an optional extra
    table = MEASURED / "a100_sxm" / "mla_bmm" / "trtllm" / "1.0.0" / "mla_bmm_perf.parquet"
    _, err = run("validate", "--measured", str(table), "--mode", "fused")
    assert "--mode applies to microbenchmark FILES" in err
    _, err = run("validate", "--measured", str(table))
    assert "--mode" not in err


def test_validate_names_tables_predicted_without_a_class(run, tmp_path):
    pytest.importorskip("pyarrow")  # the parquet reader, an optional extra
    from mlacalc.timemodel.profile import load_profile

    table = MEASURED / "a100_sxm" / "mla_bmm" / "trtllm" / "1.0.0" / "mla_bmm_perf.parquet"
    data = load_profile("fit-h100-sxm").to_dict()
    keep = {k: v for k, v in data["classes"].items() if k.startswith("moe:")}
    data["classes"] = keep
    data["devices"] = {"H100-SXM": keep}
    path = tmp_path / "moe-only.json"
    path.write_text(json.dumps(data))
    out, _ = run("validate", "--measured", str(table), "--profile", str(path))
    assert "uncalibrated kernel classes" in out and "mla_bmm_perf" in " ".join(out.split())
    out, _ = run("validate", "--measured", str(table), "--profile", "fit-h100-sxm")
    assert "uncalibrated kernel classes" not in out


def test_causal_changes_nothing_unfused(run):
    args = ("roofline", "llama-3-8b", "-H", "H100-SXM", "--phase", "prefill", "--mode", "unfused")
    args = (*args, "--seq-len", "4k")
    plain = _json(run, *args)[0]
    out, err = run(*args, "--causal", "--format", "json")
    causal = json.loads(out)["predictions"][0]
    assert "--causal changes nothing in --mode unfused" in err
    assert causal["flops"] == plain["flops"] and causal["seconds"] == plain["seconds"]
    api = predict_time("llama-3-8b", "H100-SXM", "prefill", 4096, 1, mode="unfused", causal=True)
    assert api.flops == plain["flops"] and api.seconds == pytest.approx(plain["seconds"])


def test_profile_on_a_measured_device_is_named_as_ignored(run):
    _, err = run(
        "roofline", "gpt2", "-H", "measured:cpu-2core-epyc-fp32", "--profile", "fit-h100-sxm"
    )
    assert "--profile" in err and "ignored" in err


def test_import_hf_dash_writes_standard_output(run, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out, _ = run(
        "import-hf", str(Path(__file__).parent / "data/hf/falcon-7b.config.json"), "-o", "-"
    )
    assert "num_key_value_heads" in out and not (tmp_path / "-").exists()


def test_minimax_m3_layer_is_the_kind_it_names(run):
    """MiniMax-M3's one layer is its first, a full one: no block indexer among its kernels (it
    timed a full layer's attention with an msa layer's indexer beside it, 136.7 us for 107.4)."""
    doc = json.loads(run("roofline", "minimax-m3", "-H", "H200", "--format", "json")[0])
    doc = doc["predictions"][0]
    names = [o["name"] for o in doc["ops"]]
    assert "full: layer 1 of 60 layers" in doc["layer"]
    assert not [n for n in names if n.startswith("block_indexer")], names
    assert names == ["q_proj", "kv_proj", "rope", "attention", "o_proj"]


def test_a_kernel_the_engine_runs_as_another_says_what_its_time_is_of(run):
    """DeepSeek-V3.2's prompt core counts the expanded attention (impl naive); SGLang on B200
    runs the absorbed sparse kernel over 2,048 latent rows a token, 3.4x the FLOPs: the row
    keeps the count, the op and the note say which kernel the time is of."""
    args = ("roofline", "deepseek-v3.2", "-H", "B200", "--engine", "sglang", "--phase",
            "prefill", "--seq-len", "8k", "--causal")  # fmt: skip
    (pred,) = _json(run, *args)
    (core,) = [o for o in pred["ops"] if o["name"] == "attention"]
    assert core["runs_as"] == "mla_decode sparse"
    assert core["run_flops"] == 2 * 128 * 8192 * 2048 * (576 + 512)
    assert core["run_flops"] > 3 * core["flops"]
    assert all(o["runs_as"] == "" for o in pred["ops"] if o["name"] != "attention")
    # fixr11: the others ran as counted, so their run figures are the counted ones (were 0)
    others = [o for o in pred["ops"] if not o["runs_as"]]
    assert others and all(o["run_flops"] == o["flops"] for o in others)
    assert all(o["run_bytes"] == o["bytes"] for o in others)
    out, _ = run(*args)
    flat = " ".join(out.split())
    assert "attention: sglang runs it as the absorbed sparse MLA kernel" in flat
    assert "the row counts impl naive" in flat
    out, _ = run("roofline", "deepseek-v3", "-H", "B200", "--engine", "sglang", "--phase",
                 "prefill", "--seq-len", "8k", "--causal")  # fmt: skip
    assert "runs it as" not in out


def test_a_model_of_two_layer_kinds_times_either_at_attention_layer_scope(run):
    """DeepSeek-V4-Pro at attention_layer scope showed only an hca layer; the csa layer (1.4x
    the time) was in the app's Roofline view alone (a new-user trial). --layer-kind names
    the other, and the header says how to get it."""
    base = ("roofline", "deepseek-v4-pro", "-H", "GB200", "--batch", "64", "--seq-len", "32k")
    out, _ = run(*base)
    assert "--layer-kind csa: another kind" in " ".join(out.split())
    times = {}
    for kind in ("hca", "csa"):
        doc = json.loads(run(*base, "--layer-kind", kind, "--format", "json")[0])
        (p,) = doc["predictions"]
        assert p["layer"].startswith(f"{kind}: layer ")
        out, _ = run(*base, "--layer-kind", kind)
        other = "csa" if kind == "hca" else "hca"
        assert f"--layer-kind {other}: another kind" in " ".join(out.split())
        times[kind] = sum(o["seconds"] for o in p["ops"])
    assert times["csa"] > 1.2 * times["hca"]
    plain = json.loads(run(*base, "--format", "json")[0])["predictions"][0]
    assert sum(o["seconds"] for o in plain["ops"]) == pytest.approx(times["hca"])
    _, err = run(*base, "--layer-kind", "full", code=2)
    assert "its kinds that can be: hca, csa" in err
    _, err = run(*base, "--layer-kind", "csa", "--scope", "model", code=2)
    assert "needs --scope attention_layer" in " ".join(err.split())
    _, err = run("roofline", "deepseek-v3", "-H", "H200", "--layer-kind", "mla", code=2)
    assert "every layer alike" in " ".join(err.split())
    # a hybrid: its first (linear) layer is the default; its full layers alone, timed apart
    _, err = run("roofline", "qwen3-next-80b-a3b", "-H", "H200", "--layer-kind", "mamba", code=2)
    assert "its kinds that can be: full" in err
    linear = json.loads(run("roofline", "qwen3-next-80b-a3b", "-H", "H200", "--layer-kind",
                            "linear", "--format", "json")[0])["predictions"][0]  # fmt: skip
    full = json.loads(run("roofline", "qwen3-next-80b-a3b", "-H", "H200", "--layer-kind",
                          "full", "--format", "json")[0])["predictions"][0]  # fmt: skip
    assert linear["layer"].startswith("linear: layer 1") and full["layer"].startswith("full: ")
    assert {o["name"] for o in linear["ops"]} != {o["name"] for o in full["ops"]}


def test_insight_crossover_never_for_a_small_latent(run, tmp_path):
    # trial 8: d_c 16 on DeepSeek-V3's dims gave "absorption stops paying above q = -18.3"
    v3 = (Path(__file__).resolve().parent.parent / "model_configs" / "deepseek-v3.yaml").read_text()
    small = tmp_path / "v3-dc16.yaml"
    small.write_text(re.sub(r"(?m)^(\s*kv_lora_rank:).*$", r"\1 16", v3))
    out, _ = run("roofline", small, "-H", "H200", "--insight", "--format", "json")
    crossover = [i for i in json.loads(out)["insights"] if i["name"].startswith("absorption")]
    assert len(crossover) == 2 and all(i["value"] is None for i in crossover), crossover
    assert all("absorption pays at every query count" in i["note"] for i in crossover)


def test_prefill_heading_and_json_say_which_pairs(run):
    """A prefill timed every (query, key) pair by default (DeepSeek-V3 naive at 32k on H200:
    87.96 T in the core, twice the causal 43.98 T) with nothing saying so; the heading, the
    markdown and the JSON now name the pairs, and decode names none."""
    base = ("roofline", "deepseek-v3", "-H", "H200", "--impl", "naive", "--seq-len", "4k")
    out, _ = run(*base, "--phase", "prefill", "--format", "markdown")
    assert "all (query, key) pairs (not causal; --causal for a causal kernel)" in out
    out, _ = run(*base, "--phase", "prefill", "--causal", "--format", "markdown")
    assert "; causal" in out and "not causal" not in out
    every, decode = _json(run, *base, "--phase", "both")
    causal = _json(run, *base, "--phase", "prefill", "--causal")[0]
    assert (every["causal"], causal["causal"], decode["causal"]) == (False, True, False)
    assert every["pairs"].startswith("all (query, key) pairs") and causal["pairs"] == "causal"
    assert decode["pairs"] == "" and causal["flops"] < every["flops"]


def test_the_table_shows_the_models_limiting_term_beside_the_bound(run):
    """The kernel model's own largest term (OpTime.limited_by) is a column beside the datasheet
    ridge's bound: Llama-3.1-8B's kv_proj at batch 1 on an H100 is memory-bound by its 1 FLOP
    per byte and compute-limited in the model (a narrow GEMM spread over few SMs), its norms
    latency-limited; the plain roofline's table has no such column."""
    args = ("roofline", "llama-3.1-8b", "-H", "H100-SXM", "--scope", "model", "--seq-len", "1k")
    out, _ = run(*args, "--format", "markdown")
    head = next(line for line in out.splitlines() if line.startswith("| kernel"))
    cells = [c.strip() for c in head.strip("|").split("|")]
    assert cells[cells.index("bound") + 1] == "limited by"
    kv = next(line for line in out.splitlines() if line.startswith("| kv_proj"))
    kv_cells = [c.strip() for c in kv.strip("|").split("|")]
    assert kv_cells[cells.index("bound")] == "memory"
    assert kv_cells[cells.index("limited by")] == "compute"
    assert "limited by: the kernel time model's largest term" in out
    plain, _ = run(*args, "--profile", "roofline", "--format", "markdown")
    assert "limited by" not in plain


def test_an_underfilled_kernel_is_latency_limited_not_compute():
    """DeepSeek-V3.2's sparse decode core under TensorRT-LLM on H200 read "limited by compute"
    at 570 MFLOP in 174 us (0.3% of peak, the same time from 2k to 128k keys and batch 1 to
    64): a time over UNDERFILLED_RATIO x its plain roofline bound is latency; at batch 64 the
    same kernel (4.7x) is compute-limited (round 24)."""
    from mlacalc.words.kernels import UNDERFILLED_RATIO

    def core(S, B):
        p = predict_time("deepseek-v3.2", "H200", "decode", S, B, engine="trtllm")
        return next(o for o in p.ops if o.name == "attention")

    for S in (2048, 131072):
        o = core(S, 1)
        assert o.model_s > UNDERFILLED_RATIO * o.roofline_s and o.compute_s > o.memory_s
        assert o.limited_by == "latency" and o.bound == "compute"
    wide = core(8192, 64)
    assert wide.model_s < UNDERFILLED_RATIO * wide.roofline_s and wide.limited_by == "compute"
    # the one rule both labels use (kernel_time.predict_kernels takes a tie as compute)
    from mlacalc.words.kernels import limiter

    assert limiter("gemm", 1e-6, 1e-6, 0.0, 0.0, 2e-6, 1e-6, tie="compute") == "compute"
    assert limiter("gemm", 1e-6, 1e-6, 0.0, 0.0, 2e-6, 1e-6) == "memory"
    assert limiter("gemm", 1e-6, 0.0, 0.0, 0.0, 11e-6, 1e-6) == "latency"
    assert limiter("all_reduce", 0.0, 2e-6, 1e-6, 0.0, 3e-6, 1e-6) == "link"


def test_roofline_says_the_error_to_expect_as_plan_does(run):
    """roofline on a fitted device said nothing of its expected error (text or JSON) while plan
    printed it; on H200 a warning gave the median alone (a trial). One line, plan's words."""
    import mlacalc

    def doc_of(*a):
        out, _ = run(*a, "--format", "json")
        return json.loads(out)

    args = ("roofline", "deepseek-v3", "-H", "H100-SXM", "--seq-len", "32k", "--batch", "64")
    args += ("--engine", "sglang")
    doc = doc_of(*args)
    e = doc["expected_error"]
    route = mlacalc.plan("deepseek-v3", "H100-SXM", 8, engine="sglang").prediction
    fitted = ROUTE_ERRORS[("sglang", "H100-SXM")]  # README's figures, the route's
    assert (e["median"], e["p90"], e["of"]) == (
        pytest.approx(fitted[0] / 100),
        pytest.approx(fitted[1] / 100),
        "fitted",
    )
    kernel = route["note"].split("; served ")[0]
    assert e["note"] == kernel + "." and "in-sample" in kernel and "held out" in kernel
    out, _ = run(*args)
    assert out.splitlines()[1].startswith("Expected error: ")  # under the heading
    assert " ".join(e["note"].split()) in " ".join(out.split())
    # a device timed by ratios: the held-out median and p90 of the fit it is timed from
    e = doc_of("roofline", "deepseek-v3", "-H", "H200", "--batch", "64")["expected_error"]
    assert (e["of"], e["median"], e["p90"]) == ("held_out", 0.113, 0.338)
    e = doc_of("roofline", "deepseek-v3", "-H", "H200", "--profile", "roofline")
    assert e["expected_error"]["median"] is None
    assert "not measured for the plain roofline bound" in e["expected_error"]["note"]
