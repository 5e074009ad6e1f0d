"""The command line through its real entry point: numbers, formats, errors."""

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reference_data import HF_CONFIGS

import mlacalc
from mlacalc.cli import main


def run_plain(*args):
    done = subprocess.run(["mlacalc", *args], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout, done.stderr


def test_console_script_and_module():
    for cmd in (["mlacalc"], [sys.executable, "-m", "mlacalc"]):
        done = subprocess.run(
            [*cmd, "report", "deepseek-v3", "--format", "json"], capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["parameters"]["total"] == 671_026_419_200
    bad = subprocess.run(["mlacalc", "report", "nope"], capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "Traceback" not in bad.stderr


# -- report ---------------------------------------------------------------------------


def test_report_json_numbers(run):
    out, _ = run("report", "deepseek-v3", "--seq-len", "128k", "--batch", "8", "--format", "json")
    doc = json.loads(out)
    assert doc["schema"] == "mlacalc.report/1"
    assert doc["settings"]["seq_len"] == 131072 and doc["settings"]["batch"] == 8
    kv = {r["impl"]: r for r in doc["kv_cache"]}
    assert (
        kv["absorbed"]["total_bytes"]
        == mlacalc.kv_cache_bytes("deepseek-v3", 131072, 8)
        == 73_685_532_672
    )
    assert kv["naive"]["total_bytes"] == mlacalc.kv_cache_bytes(
        "deepseek-v3", 131072, 8, impl="naive"
    )
    assert kv["absorbed"]["bytes_per_token"] == 70_272
    rows = {(r["phase"], r["impl"], r["default"]): r for r in doc["attention"]}
    decode = rows[("decode", "absorbed", True)]
    assert decode["flops"] == mlacalc.attention_flops("deepseek-v3", "decode", 131072, 8)
    assert decode["stage_flops"]["core"] == 61 * 2 * 8 * 128 * 131072 * 1088
    assert rows[("prefill", "naive", True)]["flops"] == mlacalc.attention_flops(
        "deepseek-v3", "prefill", 131072, 8
    )
    assert doc["parameters"]["mtp"] == 11_610_068_224
    # the checkpoint's bytes: fp8 with 128x128 block scales, bf16 embedding, head, norms, router
    assert doc["weights"]["total_bytes"] == 673_150_582_112
    assert doc["weights"]["format"] == "checkpoint fp8 block 128x128"


REPORT_KEYS = {
    "top": [
        "schema",
        "mlacalc_version",
        "model",
        "layers",
        "settings",
        "parameters",
        "weights",
        "kv_cache",
        "attention",
        "forward_flops_per_token",
        "notes",
        "warnings",
    ],
    "settings": [
        "seq_len",
        "batch",
        "kv_dtype",
        "state_dtype",
        "weight_dtype",
        "act_dtype",
        "impl",
        "causal",
        "phases",
        "q_len",
    ],
    "parameters": [
        "model",
        "total",
        "active",
        "attention_per_layer",
        "embedding",
        "mtp",
        "mtp_active",
        "non_embedding",
        "breakdown",
        "attention_breakdown",
        "attention_by_kind",  # added: each kind of layer's attention ([] for one kind)
    ],
    "weights": ["dtype", "format", "total_bytes", "mtp_bytes", "kept", "checkpoint", "summary"],
    "kv_cache": [
        "impl",
        "default",
        "kv_dtype",
        "elements_per_token_per_layer",
        "bytes_per_token_per_layer",
        "layers_per_token",
        "layer_kinds_per_token",
        "bytes_per_token",
        "tokens_per_layer",
        "total_bytes",
        "by_kind",
        "ratio_to_smallest",
    ],
    "attention": [
        "phase",
        "impl",
        "default",
        "seq_len",
        "q_len",
        "batch",
        "causal",
        "flops",
        "stage_flops",
        "elementwise_flops",
        "fused_bytes",
        "unfused_bytes",
        "weight_bytes",
        "arithmetic_intensity_flops_per_byte",
        "cache_impl",
        "label",
    ],
    "stage_flops": ["q_proj", "kv_proj", "kv_up", "absorb", "core", "o_proj"],
}


def test_report_json_schema_is_stable(run):
    """The README documents these fields; renaming one is a breaking change."""
    doc = json.loads(run("report", "llama-3-8b", "--format", "json")[0])
    assert list(doc) == REPORT_KEYS["top"]
    assert list(doc["settings"]) == REPORT_KEYS["settings"]
    assert list(doc["parameters"]) == REPORT_KEYS["parameters"]
    assert list(doc["weights"]) == REPORT_KEYS["weights"]
    assert list(doc["kv_cache"][0]) == REPORT_KEYS["kv_cache"]
    assert list(doc["attention"][0]) == REPORT_KEYS["attention"]
    assert list(doc["attention"][0]["stage_flops"]) == REPORT_KEYS["stage_flops"]
    assert {"name", "display_name", "model_type", "variant", "source", "derived"} <= set(
        doc["model"]
    )


def test_report_csv_exact(run):
    out, _ = run("report", "llama-3-70b", "--seq-len", "8192", "--batch", "4", "--format", "csv")
    rows = dict(csv.reader(io.StringIO(out)))
    assert rows["kv_cache[0].total_bytes"] == str(mlacalc.kv_cache_bytes("llama-3-70b", 8192, 4))
    assert rows["parameters.total"] == "70553706496"
    assert rows["attention[1].phase"] == "decode"
    assert rows["attention[1].flops"] == str(
        mlacalc.attention_flops("llama-3-70b", "decode", 8192, 4)
    )


def test_report_table_and_markdown(run):
    out, _ = run("report", "deepseek-v3", "--seq-len", "128k", "--batch", "8")
    assert "68.62 GiB" in out and "671,026,419,200" in out and "binary units" in out
    md, _ = run("report", "deepseek-v3", "--format", "markdown", "--phase", "decode")
    assert md.count("### ") == 6 and "| absorbed (default) |" in md and "binary units" in md


def test_report_options(run):
    doc = json.loads(
        run(
            "report",
            "deepseek-v3",
            "--kv-dtype",
            "fp8_ds_mla",
            "--impl",
            "absorbed",
            "--phase",
            "chunk",
            "--q-len",
            "512",
            "--causal",
            "--seq-len",
            "4096",
            "--format",
            "json",
        )[0]
    )
    assert [r["impl"] for r in doc["kv_cache"]] == ["absorbed"]
    assert doc["kv_cache"][0]["bytes_per_token"] == 40_016
    assert doc["attention"][0]["flops"] == mlacalc.attention_flops(
        "deepseek-v3", "chunk", 4096, q_len=512, impl="absorbed", causal=True
    )
    doc = json.loads(run("report", "llama-3-8b", "--weight-dtype", "int4", "--format", "json")[0])
    # int4 but the norms (266,240) and the embedding and head (525,336,576 each) at 16 bits,
    # as plan sizes them; every parameter at 4 bits (8,030,261,248 // 2) before
    kept = 266_240 + 2 * 525_336_576
    assert doc["weights"]["total_bytes"] == (8_030_261_248 - kept) // 2 + 2 * kept == 5_591_539_712


def test_report_from_files(run, tmp_path):
    run("import-hf", "tests/data/hf/deepseek-v2-lite.config.json", "-o", str(tmp_path / "m.yaml"))
    doc = json.loads(run("report", str(tmp_path / "m.yaml"), "--format", "json")[0])
    assert doc["parameters"]["total"] == 15_706_484_224
    doc = json.loads(run("report", "tests/data/hf/gpt2.config.json", "--format", "json")[0])
    assert doc["parameters"]["total"] == 124_439_808


# -- list, compare, formula, import-hf ---------------------------------------------------


def test_list(run):
    rows = json.loads(run("list", "--format", "json")[0])
    by_name = {r["name"]: r for r in rows}
    assert set(by_name) == set(mlacalc.shipped_models())
    assert (
        by_name["deepseek-v3"]["variant"] == "mla"
        and by_name["deepseek-v3"]["kv_bytes_per_token_bf16"] == 70_272
    )
    assert by_name["falcon-7b"]["variant"] == "mqa"
    table, _ = run("list")
    assert "deepseek-v3" in table and "MLA" in table
    out, _ = run("list", "--format", "csv")
    assert next(csv.DictReader(io.StringIO(out)))["name"] == "deepseek-v2"
    assert "| deepseek-v3 | MLA |" in run("list", "--format", "markdown")[0]


def test_compare(run):
    rows = json.loads(
        run("compare", "llama-3-70b", "deepseek-v2", "--seq-len", "32k", "--format", "json")[0]
    )
    assert [r["model"] for r in rows] == ["llama-3-70b", "deepseek-v2"]
    assert rows[0]["kv_total_bytes"] == mlacalc.kv_cache_bytes("llama-3-70b", 32768)
    assert rows[1]["decode_flops"] == mlacalc.attention_flops("deepseek-v2", "decode", 32768)
    out, _ = run("compare", "llama-3-70b", "deepseek-v2", "--format", "csv")
    assert list(csv.DictReader(io.StringIO(out)))[1]["kv_bytes_per_token"] == "69120"
    assert "Llama-3-70B" in run("compare", "llama-3-70b", "deepseek-v2")[0]


def test_compare_as_variants(run):
    rows = json.loads(
        run(
            "compare",
            "deepseek-v3",
            "--as-variants",
            "--kv-heads",
            "8",
            "--seq-len",
            "8192",
            "--format",
            "json",
        )[0]
    )
    variants = [r["variant"] for r in rows]
    assert variants == ["mla", "mha", "gqa", "mqa"]
    kv = {r["variant"]: r["kv_bytes_per_token"] for r in rows}
    assert kv == {
        "mla": 70_272,
        "mha": 2 * 128 * 128 * 2 * 61,
        "gqa": 2 * 8 * 128 * 2 * 61,
        "mqa": 2 * 128 * 2 * 61,
    }
    md, _ = run("compare", "llama-3-8b", "--as-variants", "--format", "markdown")
    assert "as MLA" in md and "d_c = 4 d_h" in md


def test_compare_as_variants_says_what_a_sparse_model_s_dense_rows_keep(run):
    """GLM-5.1 "as MHA" kept DSA's indexer cache and top-2,048 sparse attention while the
    footnote said only "everything but the attention" (a reader took it for plain MHA)."""
    md, _ = run("compare", "glm-5.1", "--as-variants", "--seq-len", "32k", "--format", "markdown")
    md = " ".join(md.split())
    assert "MHA/GQA/MQA rows keep its DeepSeek sparse attention" in md
    assert "top 2,048 keys only" in md
    md, _ = run("compare", "minimax-m3", "--as-variants", "--format", "markdown")
    assert "rows keep its block-sparse layers" in " ".join(md.split())
    md, _ = run("compare", "deepseek-v3", "--as-variants", "--format", "markdown")
    assert "rows keep" not in md


def test_compare_as_variants_names_a_variant_without_an_equivalent(run):
    """MiniMax-M3 has no MLA equivalent: the other three are compared and a note names the
    missing one (was an error for all four); DeepSeek-V4, with none at all, is refused."""
    rows = json.loads(run("compare", "minimax-m3", "--as-variants", "--format", "json")[0])
    assert [r["variant"] for r in rows] == ["gqa", "mha", "gqa", "mqa"]
    md, _ = run("compare", "minimax-m3", "--as-variants", "--format", "markdown")
    assert "Not shown: MiniMax-M3's block-sparse attention" in md and "no MLA equivalent" in md
    _, err = run("compare", "deepseek-v4-pro", "--as-variants", code=2)
    assert "compress_ratios" in err and err.count("\n") == 1
    # the flag that asked for them is named with the fix (it named 'model:')
    assert err.startswith("mlacalc: error: Invalid value for --as-variants: DeepSeek-V4-Pro")
    assert "(without --as-variants)" in err


def test_compare_as_variants_says_the_mla_equivalent_drops_the_windows(run):
    """The MLA equivalent of a model with sliding layers attends every key in every layer
    (its MHA/GQA/MQA equivalents keep the windows): the note says so (it said 'Equivalents
    keep everything but the attention' alone)."""
    md, _ = run("compare", "gemma-3-1b", "--as-variants", "--format", "markdown")
    assert "The MLA equivalent has no sliding window: all 26 layers attend" in md
    md, _ = run("compare", "llama-3-8b", "--as-variants", "--format", "markdown")
    assert "sliding window" not in md


def test_compare_kv_per_token_is_the_reports(run):
    """compare's KV / token is report's (DeepSeek-V4: the growth over the compress ratios'
    period, 9,848 B at 32k; was the next token's pending compressor rows, 212 KiB)."""
    rows = json.loads(run("compare", "deepseek-v4-pro", "mimo-v2-flash", "--format", "json")[0])
    for r in rows:
        doc = json.loads(run("report", r["model"], "--seq-len", "32k", "--format", "json")[0])
        assert r["kv_bytes_per_token"] == doc["kv_cache"][0]["bytes_per_token"]
    assert rows[0]["kv_bytes_per_token"] == 9_848


def test_compare_warns_past_the_positions_and_says_window_full(run):
    """compare warns of a --seq-len past a model's max_position_embeddings as report and plan
    do (Step-3.7-Flash: 65,536; it said nothing), and a full window's 0 B added a token reads
    'window full' as list says it (it read a bare '0 B' for Mistral-7B at 128k)."""
    out, err = run("compare", "step-3.7-flash", "mistral-7b", "--seq-len", "128k")
    assert "Step-3.7-Flash was not trained for it" in err and "65,536" in err
    assert "Mistral" not in err and err.count("\n") == 1
    assert "KV added / token" in out
    # the cell's words in one piece (the terminal table wraps them at 160 columns since compare
    # gained its whole-model FLOPs column)
    md, _ = run(
        "compare", "step-3.7-flash", "mistral-7b", "--seq-len", "128k", "--format", "markdown"
    )
    assert "| 0 B (window full) |" in md
    rows = json.loads(run("compare", "mistral-7b", "llama-3-8b", "--format", "json")[0])
    assert [r["kv_window_full"] for r in rows] == [True, False]
    _, err = run("compare", "deepseek-v3", "--as-variants", "--seq-len", "1M")
    assert err.count("\n") == 1  # the model's own warning, not one for each equivalent


#: ``formula`` of MLA's absorbed decode FLOPs (a ``--stage`` picks one part)
ABSORBED_DECODE = ("formula", "attention_flops", "--variant", "mla", "--impl", "absorbed")
ABSORBED_DECODE += ("--phase", "decode")
COMPRESSED_DECODE = (*ABSORBED_DECODE[:-3], "compressed", "--phase", "decode")


def test_formula(run):
    assert run("formula", "kv_cache_elements", "--variant", "mla")[0].strip() == "d_c + d_rope"
    out, _ = run(*ABSORBED_DECODE, "--stage", "core")
    assert out.strip() == "2*B*L*S*n_h*(2*d_c + d_rope)"
    assert (
        run("formula", "kv_cache_elements", "--variant", "mla", "--subs", "deepseek-v3")[0].strip()
        == "576"
    )
    assert (
        run("formula", "kv_cache_bytes", "--variant", "gqa", "--subs", "llama-3-8b")[0].strip()
        == "65536*B*S*b"
    )
    assert (
        "\\left(S + 4 d + 1\\right)"
        in run(
            "formula",
            "attention_flops",
            "--variant",
            "mha",
            "--phase",
            "prefill",
            "--causal",
            "--latex",
        )[0]
    )
    assert "d_{c}" in run("formula", "kv_cache_elements", "--variant", "mla", "--latex")[0]
    assert run("formula", "kv_cache_elements", "--variant", "mqa", "--python")[0].strip() == "2*d_h"
    assert (
        "2⋅B⋅L⋅dₕ⋅nₕ⋅q"
        in run("formula", "attention_flops", "--variant", "mha", "--causal", "--pretty")[0]
    )


def test_import_hf_says_the_defaults_it_filled(run, tmp_path):
    # before: q_lora_rank 1536 (HF's default) only in a YAML comment: 15,748,993,024 params
    # against the shipped DeepSeek-V2-Lite's 15.71 G, nothing on the terminal
    config = "tests/data/hf-configs/deepseek-v2-lite.config.json"
    out, err = run("import-hf", config)
    lines = err.splitlines()
    assert (
        "mlacalc: warning: not in deepseek-v2-lite.config.json, filled with Hugging Face's "
        "default: q_lora_rank = 1536 (DeepseekV2/V3Config default)"
    ) in lines
    assert len(lines) == 3 and out  # and tie_word_embeddings = False, and where the name is from
    _, err = run("import-hf", config, "-o", str(tmp_path / "m.yaml"))
    assert err.count("\n") == 4 and "q_lora_rank = 1536" in err  # after 'wrote ...'
    _, err = run("import-hf", "tests/data/hf/llama-2-7b.config.json")
    assert err == (
        "mlacalc: llama-2-7b.config.json: named 'llama-2-7b-hf' after the last part of "
        "_name_or_path 'meta-llama/Llama-2-7b-hf'\n"
    )


def test_import_hf_names_a_folders_config_by_model_type(run, tmp_path):
    """A config.json with no repository id, in a folder q/, was named "q" (a trial's find):
    named model_type instead, and the output says where the name came from; name_or_path
    names it as _name_or_path does. As load_model and plan name it
    (tests/test_models_hf_naming.py): import-hf had named it model_type and its size,
    deepseek-v2-16b, which load_model (below the parameter counts, which import it) cannot."""
    folder = tmp_path / "0" / "0" / "q"  # nor do the folders above it, up to two
    folder.mkdir(parents=True)
    config = json.loads(Path("tests/data/hf-configs/deepseek-v2-lite.config.json").read_text())
    (folder / "config.json").write_text(json.dumps(config))
    out, err = run("import-hf", str(folder / "config.json"))
    assert "\nname: deepseek-v2\n" in out
    assert (
        "mlacalc: config.json: named 'deepseek-v2' after model_type 'deepseek_v2' (no "
        "repository id in _name_or_path/name_or_path; its folder 'q' says nothing of the model, "
        "nor the folders above it)"
    ) in err.splitlines()
    (folder / "config.json").write_text(
        json.dumps({**config, "name_or_path": "deepseek-ai/DeepSeek-V2-Lite"})
    )
    out, err = run("import-hf", str(folder / "config.json"))
    assert "\nname: deepseek-v2-lite\n" in out and "after the last part of name_or_path" in err
    # a folder whose name names the model keeps it, as load_model names it (a review found
    # Llama-3.3-70B-Instruct/config.json renamed 'llama-71b', and any llama of that size too)
    named = tmp_path / "Llama-3.3-70B-Instruct"
    named.mkdir()
    llama = Path("tests/data/hf-configs/llama-3.3-70b-instruct.config.json").read_text()
    (named / "config.json").write_text(llama)
    out, err = run("import-hf", str(named / "config.json"))
    assert "\nname: llama-3.3-70b-instruct\n" in out and "llama-71b" not in out + err
    for hashed in ("0123456789abcdef0123456789abcdef01234567", "main", "12"):
        (folder.parent / hashed).mkdir()
        (folder.parent / hashed / "config.json").write_text(llama)
        out, _ = run("import-hf", str(folder.parent / hashed / "config.json"))
        assert "\nname: llama\n" in out, hashed


def test_import_hf_says_the_class_defaults_by_rule_not_by_word(run, tmp_path):
    # before: a note was said when its text held "default" (import_hf_cmd `"default" in
    # note`): Kimi Linear's linear heads (32, the class's linear_num_heads) went unsaid;
    # a value the architecture fixes (Qwen2's q/k/v biases) is no class default, still unsaid
    src = Path("tests/data/hf-configs/kimi-linear-48b-a3b.config.json")
    config = json.loads(src.read_text())
    for key in ("linear_num_heads", "linear_head_dim"):
        del config[key]
    path = tmp_path / "kimi-linear.config.json"
    path.write_text(json.dumps(config))
    _, err = run("import-hf", str(path))
    for line in (
        "linear_num_key_heads = 32 (KimiLinearConfig linear_num_heads)",
        "linear_value_head_dim = 128 (KimiLinearConfig linear_head_dim)",
    ):
        assert f"filled with Hugging Face's default: {line}" in err, err
    assert "topk_method" not in err and "moe_layer_freq" not in err
    _, err = run("import-hf", "tests/data/hf-configs/qwen2-7b-instruct.config.json")
    assert "qkv_bias" not in err


def test_import_hf(run, tmp_path):
    out, _ = run("import-hf", "tests/data/hf/deepseek-v3.config.json")
    data = yaml.safe_load(out)
    assert data["kv_lora_rank"] == 512 and data["weights_dtype"] == "fp8" and "source" in data
    target = tmp_path / "v3.yaml"
    _, err = run("import-hf", "tests/data/hf/falcon-7b.config.json", "-o", str(target))
    assert "MQA" in err and mlacalc.param_counts(mlacalc.load_model(target)).total == 6_921_720_704
    assert "derived: num_key_value_heads = 1" in target.read_text()
    # an existing file is kept unless --force; a missing folder is named
    _, err = run("import-hf", "tests/data/hf/deepseek-v3.config.json", "-o", str(target), code=2)
    assert "--output" in err and "--force" in err and "MQA" not in err
    assert "derived: num_key_value_heads = 1" in target.read_text()
    run("import-hf", "tests/data/hf/deepseek-v3.config.json", "-o", str(target), "--force")
    assert mlacalc.load_model(target).kv_lora_rank == 512
    _, err = run(
        "import-hf",
        "tests/data/hf/falcon-7b.config.json",
        "-o",
        str(tmp_path / "no" / "x.yaml"),
        code=2,
    )
    assert "--output" in err and "no folder" in err


# -- bad input: one line on stderr, exit 2 -------------------------------------------------


@pytest.mark.parametrize(
    "args,needle",
    [
        (["report", "deepseek-v4"], "Did you mean deepseek-v3"),
        (["report", "deepseek-v3", "--seq-len", "12x"], "not a size"),
        (["report", "deepseek-v3", "--seq-len", "0"], "must be a positive integer"),
        (["report", "deepseek-v3", "--batch", "-3"], "must be a positive integer"),
        (["report", "deepseek-v3", "--kv-dtype", "fp6"], "fp8_ds_mla"),
        (["report", "deepseek-v3", "--weight-dtype", "fp8_ds_mla"], "unknown dtype"),
        (
            ["report", "gemma-4-26b-a4b", "--kv-dtype", "fp8_ds_mla"],
            "Invalid value for --kv-dtype: layout 'fp8_ds_mla' is for an MLA latent cache",
        ),
        (["compare", "llama-3-8b", "deepseek-v3", "--kv-dtype", "fp8_ds_mla"], "--kv-dtype"),
        (["roofline", "gpt-oss-120b", "-H", "H100-SXM", "--kv-dtype", "fp8_ds_mla"], "--kv-dtype"),
        (["plan", "gemma-4-26b-a4b", "-H", "H100-SXM", "--kv-dtype", "fp8_ds_mla"], "--kv-dtype"),
        (["report", "missing/model.yaml"], "no such file"),
        (["plan", "tests/data", "-H", "B200"], "tests/data: a folder without a config.json"),
        (
            ["plan", "deepseek-v3", "-H", "B200", "--weight-dtype", "nvfp4"],
            "give a plain dtype here (fp4: 4 bits every weight",
        ),
        (["report", "deepseek-v3", "--kv-dtype", "mxfp4"], "unknown KV dtype or layout 'mxfp4'"),
        (["report", "llama-3-8b", "--impl", "absorbed"], "one implementation"),
        (["report", "deepseek-v3", "--phase", "chunk"], "--q-len"),
        (
            ["report", "deepseek-v3", "--phase", "chunk", "--q-len", "300k", "--seq-len", "4k"],
            "cannot exceed",
        ),
        (["compare", "llama-3-8b", "gpt2", "--as-variants"], "exactly one model"),
        (["compare", "falcon-7b", "--as-variants"], "no GQA grouping"),
        (["compare", "llama-3-8b", "--as-variants", "--kv-heads", "5"], "must divide"),
        (["formula", "flops", "--variant", "mla"], "Invalid value"),
        (["formula", "kv_cache_bytes", "--variant", "mla", "--subs", "llama-3-8b"], "is GQA"),
        (["import-hf", "tests/data/hf/nope.json"], "no such file"),
        (["repot", "deepseek-v3"], "Did you mean 'report'"),
        # a noun for the catalogue points at list (was "No such command 'models'." alone)
        (["models"], "Did you mean 'list' (the models)"),
        (["gpus"], "Did you mean 'list --hardware'"),
        (["zzz"], "The commands: list, report,"),
        # a format's name as a flag points at --format (was click's bare "No such option")
        (["report", "deepseek-v3", "--json"], "Did you mean '--format json'"),
        (["compare", "gpt2", "llama-3-8b", "--csv"], "Did you mean '--format csv'"),
        (["plan", "deepseek-v3", "--markdown"], "Did you mean '--format markdown'"),
        # a value after an on/off flag is named as that (was "Got unexpected extra argument (72)")
        (
            ["plan", "deepseek-v3", "-H", "H200", "--tp", "1", "--dp-attention", "8"],
            "--dp-attention is an on/off flag and takes no value: drop '8'",
        ),
        (["plan", "deepseek-v3", "-H", "H200", "extra"], "unexpected extra argument (extra)"),
        # a model field written as an option points at --set (was click's bare "No such option")
        (
            ["plan", "llama-3-70b", "-H", "H100", "--kv-lora-rank", "512"],
            "kv_lora_rank is a field of the model's config; change it with '--set kv_lora_rank=",
        ),
        (["report", "deepseek-v3", "--hidden-size", "8"], "'--set hidden_size=VALUE'"),
        # a latent rank on a GQA model points at convert (was 1,300 characters of five fields)
        (
            ["report", "llama-3-70b", "--set", "kv_lora_rank=512"],
            "llama-3-70b is GQA, and a latent rank alone does not make it MLA",
        ),
        (
            ["plan", "llama-3-70b", "-H", "H100", "--set", "kv_lora_rank=512"],
            "'mlacalc convert llama-3-70b --kv-lora-rank 512 --save llama-3-70b-mla.yaml'",
        ),
        # a model convert refuses gets convert's reason, not two commands that fail
        (
            ["report", "deepseek-v4-pro", "--set", "kv_lora_rank=512"],
            "cannot be converted to one: cannot convert to MLA: DeepSeek-V4-Pro's compressed",
        ),
        # another field's own error is said, not hidden behind the latent rank's sentence
        (
            [
                "report",
                "llama-3-70b",
                "--set",
                "kv_lora_rank=512",
                "--set",
                "num_attention_heads=0",
            ],
            "--set num_attention_heads=0: must be a positive integer, got 0",
        ),
        # a GB200 system's name with a space is the GB200 entry; one that names nothing lists
        (["plan", "deepseek-v3", "-H", "GB200 NVL36"], "Did you mean GB200"),
    ],
)
def test_bad_input(run, args, needle):
    out, err = run(*args, code=2)
    assert needle in err and err.count("\n") == 1 and not out
    assert err.startswith("mlacalc: error: ")


def test_bad_config_file(run, tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("name: x\nhidden_size: [\n")
    _, err = run("report", str(path), code=2)
    assert str(path) in err and "not valid YAML" in err


def test_sizes(run):
    doc = json.loads(
        run("report", "gpt2", "--seq-len", "1M", "--batch", "1.5k", "--format", "json")[0]
    )
    assert doc["settings"]["seq_len"] == 1024**2 and doc["settings"]["batch"] == 1536


def test_help_everywhere(run):
    from mlacalc.cli import COMMANDS

    assert "Example" in run("--help")[0]
    for command in COMMANDS:
        out, _ = run(command, "--help")
        assert "Example" in out, command


# -- roofline, plan, validate, hardware -------------------------------------------------


def test_list_hardware(run):
    rows = json.loads(run("list", "--hardware", "--format", "json")[0])
    by_name = {r["name"]: r for r in rows}
    assert by_name["H100-SXM"]["peak_flops_per_s"]["bf16"] == 989.5e12
    assert any(r["measured"] for r in rows)
    table = run("list", "--hardware")[0]
    assert "H200" in table
    # the fp4 peak beside bf16 and fp8 (B300's 14 PFLOP/s; "-" where there is none)
    b300 = next(line for line in table.splitlines() if "B300" in line)
    assert "14.00 PFLOP/s" in b300 and "fp4" in table


def test_roofline_cli(run):
    doc = json.loads(
        run(
            "roofline",
            "deepseek-v3",
            "--hardware",
            "H200",
            "--seq-len",
            "32k",
            "--batch",
            "64",
            "--insight",
            "--format",
            "json",
        )[0]
    )
    p = doc["predictions"][0]
    from mlacalc.timemodel.predict import predict_time

    expected = predict_time("deepseek-v3", "H200", "decode", 32768, 64)
    assert (
        p["seconds"] == expected.seconds
        and p["bound"] == expected.bound
        and p["impl"] == "absorbed"
    )
    names = [i["name"] for i in doc["insights"]]
    assert any("compute-bound" in n for n in names) and any("absorption" in n for n in names)
    table, _ = run(
        "roofline",
        "llama-3-70b",
        "--hardware",
        "H100-SXM",
        "--phase",
        "both",
        "--scope",
        "model",
        "--weight-dtype",
        "fp8",
    )
    assert (
        "prefill" in table and "decode" in table and "routed" not in table and "dense_ffn" in table
    )
    _, err = run("roofline", "gpt2", "--hardware", "H300", code=2)
    assert "Did you mean" in err


def test_plan_cli(run):
    doc = json.loads(
        run("plan", "deepseek-v3", "--hardware", "H200", "--gpus", "8", "--format", "json")[0]
    )
    # weights as the fp8 checkpoint stores them (block scales, bf16-kept tensors)
    # 85,139,995,216 before the attention was sized tensor by tensor (q_a and kv_a whole on
    # each rank with their block scales and bf16 norms: tests/test_serving_layout_checkpoint.py)
    # a batch of 5 at 128K in an H200's 141 GiB (4 when the catalogue held 141e9 B)
    assert doc["max_batch"] == 5 and doc["weights_per_gpu_bytes"] == 85_140_101_152
    assert doc["weight_format"] == "checkpoint fp8 block 128x128"
    doc = json.loads(
        run(
            "plan",
            "deepseek-v3",
            "--hardware",
            "H200",
            "--kv-dtype",
            "fp8",
            "--batch",
            "4",
            "--format",
            "json",
        )[0]
    )
    # 11 (9 at 141e9 B)
    assert doc["max_batch"] == 11 and doc["decode_tokens_per_s"] > 0 and doc["max_context"] > 131072
    assert (
        "binding resource" in run("plan", "llama-3-8b", "--hardware", "RTX-4090", "--gpus", "1")[0]
    )
    out, _ = run("plan", "deepseek-v3", "--hardware", "H100-SXM", "--gpus", "1", "--format", "json")
    assert (
        json.loads(out)["fits"] is False
    )  # not fitting is an answer (exit 0), saying what overflows
    _, err = run("plan", "deepseek-v3", "--hardware", "H200", "--gpus", "6", code=2)
    assert "does not divide the 128 attention heads" in err


def test_validate_cli(run):
    doc = json.loads(run("validate", "--format", "json")[0])
    assert doc and doc[0]["rows_validated"] >= 20 and "by_impl" in doc[0]
    out, _ = run("validate", "--rows")
    assert "median |error|" in out and "deepseek-v2-lite" in out
    # the title says the roofline is on the run's own ceilings and latency (before: "unfused
    # roofline vs measured", read as the plain datasheet bound, which is far further off)
    # and that the eager model times it, not a roofline of the unfused ops (a trial)
    assert (
        "the eager model (the op sequence the layer runs) on the run's measured ceilings and "
        "launch latency" in " ".join(out.split())
    )
    rows = list(csv.DictReader(io.StringIO(run("validate", "--format", "csv")[0])))
    assert {"measured_s", "predicted_s", "error"} <= set(rows[0])
    _, err = run("validate", "nope.json", code=2)
    assert "nope.json" in err


# -- every failure one line, nothing a flag says ignored, width, defaults -----------------


@pytest.mark.parametrize(
    "args,needle",
    [
        (["plan", "deepseek-v3", "-H", "H200", "--tp", "0"], "--tp"),
        (
            ["plan", "deepseek-v3", "-H", "H200", "--tp", "3"],
            "--tp: tp 3 does not divide the 8 GPUs (--gpus); use one that divides them: 1, 2, 4, 8",
        ),
        (["plan", "deepseek-v3", "-H", "H200", "--dp", "3"], "divides them: 1, 2, 4, 8"),
        (["plan", "deepseek-v3", "-H", "H200", "--gpus", "0"], "--gpus"),
        (["plan", "deepseek-v3", "-H", "H200", "--page-size", "0"], "--page-size"),
        (["plan", "deepseek-v3", "-H", "H200", "--memory-reserve", "1"], "--memory-reserve"),
        (["plan", "deepseek-v3", "-H", "H200", "--memory-reserve", "nan"], "--memory-reserve"),
        (
            ["report", "deepseek-v3", "--phase", "decode", "--q-len", "5"],
            "--q-len applies to --phase chunk",
        ),
        (
            ["roofline", "deepseek-v3", "-H", "H200", "--q-len", "5"],
            "--q-len applies to --phase chunk",
        ),
        (["roofline", "deepseek-v3", "-H", "H200", "--impl", "standard"], "--impl: 'standard'"),
        (["report", "deepseek-v3", "--impl", "standard"], "DeepSeek-V3 is MLA"),
        (["roofline", "llama-3-8b", "-H", "H200", "--impl", "naive"], "is GQA"),
        (["compare", "gpt2", "--seq-len", "9" * 5000], "--seq-len"),
        (["roofline", "gpt2", "-H", "H200", "--calibrate", ""], "--calibrate"),
        (["formula", "kv_cache_elements", "--variant", "mla", "--subs", "0"], "--subs"),
        # a comma list names its option (was "Invalid value: '0' must be positive")
        (
            [
                "search",
                "gpt2",
                "-H",
                "H200",
                "--gpus",
                "1",
                "--isl",
                "9",
                "--osl",
                "9",
                "--chunked-prefills",
                "0",
            ],
            "--chunked-prefills: '0' must be a positive integer",
        ),
        (["search", "gpt2", "-H", "H200", "--gpus", "1,x", "--isl", "9", "--osl", "9"], "--gpus"),
        (["train", "gpt2", "--absorption", "4k,z"], "--absorption: 'z' is not a size"),
        # a plain layer's formula does not describe these layers (printed 1024 for V4's rows)
        (
            ["formula", "kv_cache_elements", "--variant", "mqa", "--subs", "deepseek-v4-pro"],
            "--subs: DeepSeek-V4-Pro's csa, hca layers are DeepSeek-V4's compressed attention",
        ),
        (
            ["formula", "kv_cache_elements", "--variant", "gqa", "--subs", "minimax-m3"],
            "MiniMax-M3's msa layers",
        ),
    ],
)
def test_flags_are_checked(run, args, needle):
    out, err = run(*args, code=2)
    assert needle in err, err
    assert err.count("\n") == 1 and not out and "Traceback" not in err


def test_internal_error_is_one_line(run, monkeypatch):
    import mlacalc.cli.report_cmd

    def broken(*args, **kwargs):
        raise ZeroDivisionError("integer division or modulo by zero")

    monkeypatch.setattr(mlacalc.cli.report_cmd, "model_report", broken)
    _, err = run("report", "gpt2", code=2)
    assert err.startswith("mlacalc: internal error: ZeroDivisionError") and err.count("\n") == 1
    monkeypatch.setenv("MLACALC_DEBUG", "1")
    with pytest.raises(ZeroDivisionError):
        main(["report", "gpt2"])


@pytest.mark.parametrize("columns", [60, 100, 200])
def test_table_width_follows_the_terminal(columns, monkeypatch):
    env = {**__import__("os").environ, "COLUMNS": str(columns)}
    done = subprocess.run(
        ["mlacalc", "report", "deepseek-v3"], capture_output=True, text=True, env=env
    )
    assert done.returncode == 0, done.stderr
    widths = [len(line) for line in done.stdout.splitlines()]
    # the tables fit, figures folding; at 60 columns the FLOPs table's implementation names
    # (never cut, 29 characters) and its eleven figures need 88
    assert max(widths) <= max(columns, 88)
    if columns >= 160:  # the widest table fills 160 columns at most when the terminal allows
        assert max(widths) > 100


def test_one_set_of_defaults(run):
    from mlacalc.words import defaults as D

    doc = json.loads(run("plan", "deepseek-v3", "-H", "H200", "--format", "json")[0])
    assert doc["page_size"] == D.PAGE_SIZE == 16
    assert doc["gpus"] == D.GPUS and doc["seq_len"] == D.SEQ_LEN
    report = json.loads(run("report", "gpt2", "--format", "json")[0])["settings"]
    assert (report["seq_len"], report["batch"], report["kv_dtype"]) == (
        D.SEQ_LEN,
        D.BATCH,
        D.KV_DTYPE,
    )
    app = (Path(__file__).resolve().parent.parent / "appviews" / "planner.py").read_text()
    # the page box opens at the engine's own page for the model and device, as plan --engine's
    # (scheduler.model_page_size; D.PAGE_SIZE when no engine's defaults are taken)
    assert "model_page_size" in app and "D.MEMORY_RESERVE" in app


def test_custom_bench_grid():
    pytest.importorskip("torch")
    from mlacalc.bench.runner import custom_points

    models = [mlacalc.load_model("deepseek-v2-lite"), mlacalc.load_model("gpt2")]
    points = custom_points(models, ["absorbed", "standard", "naive"], ["decode"], [1, 8], [64])
    assert [(p.model, p.impl, p.batch) for p in points] == [
        ("deepseek-v2-lite", "absorbed", 1),
        ("deepseek-v2-lite", "absorbed", 8),
        ("deepseek-v2-lite", "naive", 1),
        ("deepseek-v2-lite", "naive", 8),
        ("gpt2", "standard", 1),
        ("gpt2", "standard", 8),
    ]
    everything = custom_points(models[:1], [], ["prefill", "decode"], [1], [64, 128])
    assert len(everything) == 4 * 2 * 2 and everything[0].phase == "prefill"


def test_roofline_starts_without_sympy():
    """The plain roofline command never loads sympy (its cold start stays like the others)."""
    code = (
        "import sys, io, contextlib\n"
        "from mlacalc.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    rc = main(['roofline', 'deepseek-v3', '-H', 'H200', '--phase', 'both'])\n"
        "print(rc, 'sympy' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout.split() == ["0", "False"], done.stderr
    out, _ = run_plain("roofline", "deepseek-v3", "-H", "H200")
    assert "--insight adds" in out and "Insight" not in out.split("--insight adds")[0][-200:]


@pytest.mark.parametrize(
    "args,warning",
    [
        (
            ["formula", "kv_cache_bytes", "--variant", "gqa", "--phase", "decode"],
            "--phase does not change",
        ),
        (["formula", "kv_cache_bytes", "--variant", "mla", "--causal"], "--causal does not change"),
        (
            ["formula", "attention_params", "--variant", "gqa", "--no-q-lora"],
            "--no-q-lora does not change",
        ),
        (
            ["formula", "attention_flops", "--variant", "mla", "--phase", "decode", "--causal"],
            "in decode",
        ),
        (["report", "gpt2", "--phase", "decode", "--causal"], "--causal changes nothing in decode"),
        # a learner's trial: "--phase does not change attention_flops of MLA in decode;
        # ignored" for one stage that has no q, where the whole quantity's does change
        # (absorbed has no kv_up stage: refused since, tests/test_formula_cli.py)
        (
            [*COMPRESSED_DECODE, "--stage", "kv_up"],
            "--phase does not change stage kv_up of attention_flops of MLA (compressed): the "
            "formula is the same without it (it changes the whole attention_flops)",
        ),
    ],
)
def test_flags_without_effect_are_named(run, args, warning):
    out, err = run(*args)
    assert out and err.startswith("mlacalc: warning: ") and warning in err and err.count("\n") == 1


def test_flags_with_effect_are_quiet(run):
    for args in (
        ["formula", "attention_flops", "--variant", "mla", "--phase", "prefill", "--causal"],
        ["formula", "attention_params", "--variant", "mla", "--no-q-lora"],
        [
            "formula",
            "attention_flops",
            "--variant",
            "mla",
            "--impl",
            "absorbed",
            "--phase",
            "decode",
        ],
    ):
        assert run(*args)[1] == ""
    _, err = run("formula", "kv_cache_bytes", "--variant", "gqa", "--stage", "core", code=2)
    assert "--stage" in err


# -- mutation: every option of every command with wrong types and extreme values -------------

_BASE = {
    "report": ["report", "deepseek-v3"],
    "compare": ["compare", "llama-3-8b", "deepseek-v2-lite"],
    "roofline": ["roofline", "deepseek-v3", "-H", "H200"],
    "plan": ["plan", "deepseek-v3", "-H", "H200"],
    "formula": ["formula", "attention_flops", "--variant", "mla"],
}
_OPTIONS = {
    "report": [
        "--seq-len",
        "--batch",
        "--kv-dtype",
        "--weight-dtype",
        "--impl",
        "--phase",
        "--q-len",
    ],
    "compare": ["--seq-len", "--batch", "--kv-dtype", "--weight-dtype", "--kv-heads"],
    "roofline": [
        "--hardware",
        "--phase",
        "--seq-len",
        "--batch",
        "--q-len",
        "--impl",
        "--mode",
        "--scope",
        "--dtype",
        "--weight-dtype",
        "--kv-dtype",
        "--calibrate",
    ],
    "plan": [
        "--gpus",
        "--tp",
        "--dp",
        "--ep",
        "--page-size",
        "--memory-reserve",
        "--seq-len",
        "--batch",
        "--kv-dtype",
        "--weight-dtype",
        "--hardware",
    ],
    "formula": ["--impl", "--phase", "--stage", "--subs"],
}
_JUNK = [
    "",
    "0",
    "-1",
    "1.5",
    "nan",
    "inf",
    "1e309",
    "abc",
    "💥",
    "128k",
    "1M",
    str(2**63),
    str(10**30),
    "9" * 5000,
    "99999999999999",
    "fp8",
    "absorbed",
    "decode",
    "H100",
    "A100",
]


@settings(
    max_examples=150, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck)
)
@given(data=st.data())
def test_cli_flag_mutations(data, capsys):
    """Any value for any option: a result, or one line on stderr naming the option or field."""
    command = data.draw(st.sampled_from(sorted(_BASE)))
    option = data.draw(st.sampled_from(_OPTIONS[command]))
    value = data.draw(st.one_of(st.sampled_from(_JUNK), st.text(max_size=12)))
    args = [*_BASE[command], option, value, "--format", "json"]
    if command == "formula":
        args = args[:-2]
    rc = main(args)
    out, err = capsys.readouterr()
    assert rc in (0, 2), (args, rc, err)
    assert "internal error" not in err and "Traceback" not in err, (args, err)
    if rc == 2:
        assert err.count("\n") == 1 and not out, (args, err)
        field = option.lstrip("-").replace("-", "_")
        named = (
            option in err
            or field in err
            or "MODEL" in err
            or "--hardware" in err
            or (option == "--hardware" and "hardware" in err.lower())
        )
        assert named, (args, err)
    else:
        assert out


def test_hardware_alias_is_said(run):
    out, err = run("roofline", "deepseek-v3", "-H", "H100", "--format", "json")
    assert json.loads(out)["predictions"][0]["hardware"] == "H100-SXM"
    assert err == "mlacalc: note: 'H100' means H100-SXM\n"
    _, err = run("roofline", "deepseek-v3", "-H", "A100", code=2)
    assert "A100-SXM-80GB" in err and "A100-PCIe-40GB" in err


# -- layers of different kinds ----------------------------------------------------------


@pytest.mark.parametrize(
    "name, window, interval, n_kv, d_h",
    [("gpt-oss-120b", 128, 2, 8, 64), ("gemma-3-1b", 512, 6, 1, 256)],
)
def test_report_json_shows_the_pattern_and_the_cache_by_kind(
    run, name, window, interval, n_kv, d_h
):
    """Layer counts from the interval rule (every interval-th layer full), bytes from
    K and V rows of 2 n_kv d_h bf16 values: summed by kind they are the whole cache."""
    seq, batch = 4096, 3
    doc = json.loads(run("report", name, "-s", str(seq), "-b", str(batch), "--format", "json")[0])
    n = doc["model"]["num_hidden_layers"]
    full = sum(1 for i in range(1, n + 1) if i % interval == 0)
    assert doc["layers"]["layers"] == n
    assert doc["layers"]["attention"] == {f"sliding({window})": n - full, "full": full}
    assert doc["layers"]["summary"].startswith(
        f"{n} layers: {n - full} sliding({window}) + {full} full; FFN: "
    )
    (row,) = doc["kv_cache"]
    row_bytes = 2 * n_kv * d_h * 2
    assert row["by_kind"] == [
        {
            "kind": f"sliding({window})",
            "layers": n - full,
            "tokens_per_layer": window,
            "bytes": (n - full) * batch * window * row_bytes,
            "bytes_per_token_per_layer": row_bytes,
        },
        {
            "kind": "full",
            "layers": full,
            "tokens_per_layer": seq,
            "bytes": full * batch * seq * row_bytes,
            "bytes_per_token_per_layer": row_bytes,
        },
    ]
    assert sum(k["bytes"] for k in row["by_kind"]) == row["total_bytes"]
    text = run("report", name, "-s", str(seq), "-b", str(batch))[0]
    assert f"layer pattern: {doc['layers']['summary']}" in text
    assert "KV cache by kind of layer" in text
    assert "by kind" not in run("report", "llama-3-8b")[0]


def test_report_pattern_of_a_uniform_model_reads_as_one_kind(run):
    """DeepSeek-V3: every layer MLA, the first three dense; one cache row per implementation."""
    doc = json.loads(run("report", "deepseek-v3", "--format", "json")[0])
    assert doc["layers"]["summary"] == "61 layers: 61 mla; FFN: 3 dense + 58 MoE"
    assert doc["layers"]["moe_layers"] == 58
    # naive: K (128 + 64) and V 128 per head, 128 heads; latent: 512 + 64; 2 B each
    rows = {"naive": (128 * 192 + 128 * 128) * 2, "compressed": 1152, "absorbed": 1152}
    for row in doc["kv_cache"]:
        assert row["by_kind"] == [
            {
                "kind": "mla",
                "layers": 61,
                "tokens_per_layer": 131072,
                "bytes": row["total_bytes"],
                "bytes_per_token_per_layer": rows[row["impl"]],
            }
        ]
    latent = next(r for r in doc["kv_cache"] if r["impl"] == "absorbed")
    assert latent["total_bytes"] == 61 * 131072 * (512 + 64) * 2


def test_report_cache_by_kind_of_a_dsa_model_adds_the_indexer_keys(run):
    """DeepSeek-V3.2 from its config.json: each layer keeps the latent (bf16 cache) plus a
    128-value indexer key per token, in fp8 with one float32 scale (132 B) whatever the
    cache's dtype (a318589: 256 B, the cache's bf16, before)."""
    path = HF_CONFIGS / "deepseek-v3.2.config.json"
    doc = json.loads(
        run("report", str(path), "-s", "4096", "--impl", "absorbed", "--format", "json")[0]
    )
    assert doc["layers"]["summary"] == "61 layers: 61 dsa; FFN: 3 dense + 58 MoE"
    (row,) = doc["kv_cache"]
    assert row["by_kind"] == [
        {
            "kind": "dsa",
            "layers": 61,
            "tokens_per_layer": 4096,
            "bytes": 61 * 4096 * (576 * 2 + 128 + 4),
            "bytes_per_token_per_layer": 576 * 2 + 128 + 4,
        }
    ]
    assert row["total_bytes"] == row["by_kind"][0]["bytes"]


def test_report_of_a_model_with_linear_layers_shows_pattern_and_cache(run):
    """Qwen3-Next: 36 linear-attention layers keep a fixed state per sequence (a 4-column
    convolution window over q, k, v in bf16 and a 128 x 128 float32 state per value head),
    12 full layers keep K and V of every token; attention FLOPs sum both kinds."""
    path = HF_CONFIGS / "qwen3-next-80b-a3b-thinking.config.json"
    doc = json.loads(run("report", str(path), "-s", "4096", "-b", "2", "--format", "json")[0])
    assert doc["layers"]["summary"] == "48 layers: 36 linear + 12 full; FFN: 48 MoE"
    state = (2 * 16 * 128 + 32 * 128) * 4 * 2 + 32 * 128 * 128 * 4
    (row,) = doc["kv_cache"]
    assert row["by_kind"] == [
        {
            "kind": "linear",
            "layers": 36,
            "tokens_per_layer": 0,
            "bytes": 36 * 2 * state,
            "bytes_per_token_per_layer": None,
        },
        {
            "kind": "full",
            "layers": 12,
            "tokens_per_layer": 4096,
            "bytes": 12 * 2 * 4096 * 2048,
            "bytes_per_token_per_layer": 2048,
        },
    ]
    assert row["total_bytes"] == 36 * 2 * state + 12 * 2 * 4096 * 2048
    model = mlacalc.load_model(path)
    flops = {r["phase"]: r["flops"] for r in doc["attention"]}
    assert flops == {p: mlacalc.attention_flops(model, p, 4096, 2) for p in ("prefill", "decode")}
    text = run("report", str(path), "-s", "4096")[0]
    assert "layer pattern: 48 layers: 36 linear + 12 full" in text


def test_latent_layout_refused_on_per_head_caches():
    """fp8_ds_mla sizes MLA's latent row; a GQA cache under it would be a made-up size."""
    from mlacalc.words.errors import InvalidArgumentError

    for call in (
        lambda: mlacalc.kv_cache("gemma-4-26b-a4b", 1024, kv_dtype="fp8_ds_mla"),
        lambda: mlacalc.kv_cache("llama-3-8b", 1024, kv_dtype="fp8_ds_mla"),
        lambda: mlacalc.attention_cost("gpt-oss-120b", "decode", 1024, kv_dtype="fp8_ds_mla"),
    ):
        with pytest.raises(InvalidArgumentError) as err:
            call()
        assert err.value.argument == "kv_dtype" and "bf16" in str(err.value)
    # the MLA latent row: 512 fp8 + 4 scales x 4 B + 64 bf16 RoPE = 656 B per layer
    assert mlacalc.kv_cache("deepseek-v3", 1, kv_dtype="fp8_ds_mla").row_bytes == 656


@pytest.mark.parametrize("name", ["gemma-4-26b-a4b", "gpt-oss-120b", "qwen3-next-80b-a3b"])
def test_kv_per_token_one_definition(run, name):
    """report's per-token row counts the same layers in elements, bytes and layers, as list."""
    doc = json.loads(run("report", name, "--format", "json")[0])
    listed = {r["name"]: r for r in json.loads(run("list", "--format", "json")[0])}
    for r in doc["kv_cache"]:
        assert r["bytes_per_token_per_layer"] * r["layers_per_token"] == r["bytes_per_token"]
        assert r["bytes_per_token"] == listed[name]["kv_bytes_per_token_bf16"]
        kinds = {k["kind"]: k for k in r["by_kind"]}
        counted = [kinds[k] for k in r["layer_kinds_per_token"]]
        assert sum(k["layers"] for k in counted) == r["layers_per_token"]
        per_layer = r["bytes_per_token_per_layer"]
        assert all(k["bytes_per_token_per_layer"] == per_layer for k in counted)
        assert r["elements_per_token_per_layer"] * 2 == r["bytes_per_token_per_layer"]  # bf16
    if name == "gemma-4-26b-a4b":  # 5 full layers x (2 KV heads x 512, K = V) x 2 B
        assert (r["layers_per_token"], r["bytes_per_token"]) == (5, 20480)
        assert "5 (full)" in run("report", name)[0]


def test_roofline_model_scope_names_the_layer_kind_and_the_weights(run):
    """gpt-oss-120b: full and sliding layers run the same kernels; each row says which kind,
    and the header says the experts are read as the mxfp4 checkpoint stores them."""
    args = ("roofline", "gpt-oss-120b", "-H", "H100-SXM", "--scope", "model", "--batch", "32")
    (p,) = json.loads(run(*args, "--format", "json")[0])["predictions"]
    names = [o["name"] for o in p["ops"]]
    kinds = [k for n, k in zip(names, p["layer_kinds"]) if n == "attention"]
    assert kinds == ["full", "sliding(128)"]
    assert p["layer_kinds"][names.index("routed_experts")] == ""
    text = run(*args, "--format", "markdown")[0]
    assert "| layer kind |" in text and "checkpoint mxfp4 experts" in text
    # one kind of layer: no column
    uniform = run("roofline", "llama-3-8b", *args[2:5], "model", "--format", "markdown")[0]
    assert "layer kind" not in uniform


def test_own_design_equivalent_is_the_model(run):
    """as_variant to the model's own design returns the model (Gemma-4's full layers keep
    their d_h 512 and 2 KV heads); the other designs say they use one head shape."""
    from mlacalc.models.variants import as_variant

    gemma = mlacalc.load_model("gemma-4-26b-a4b")
    assert as_variant(gemma, "gqa") is gemma
    assert as_variant(gemma, "gqa", num_key_value_heads=4) is not gemma
    llama = mlacalc.load_model("llama-3-8b")
    assert as_variant(llama, "gqa") is llama and as_variant(llama, "mqa") is not llama
    rows = json.loads(run("compare", "gemma-4-26b-a4b", "--as-variants", "--format", "json")[0])
    assert [r["variant"] for r in rows] == ["gqa", "mha", "mqa", "mla"]
    text = run("compare", "gemma-4-26b-a4b", "--as-variants", "--format", "markdown")[0]
    assert "(d_h 512, 2 KV heads, K = V)" in text and "as GQA" not in text


def test_report_header_and_breakdown_words(run):
    """Kimi-Linear has no query latent (not 'd_cq=None'); Qwen3-Next's shared-expert gate
    (one 2048-wide row per layer) is a router, not a dense FFN it does not have."""
    assert "no query latent" in run("report", "kimi-linear-48b-a3b")[0].splitlines()[0]
    assert "d_cq=None" not in run("report", "kimi-linear-48b-a3b")[0]
    doc = json.loads(run("report", "qwen3-next-80b-a3b", "--format", "json")[0])
    parts = doc["parameters"]["breakdown"]
    assert parts["dense_ffn"] == 0
    m = mlacalc.load_model("qwen3-next-80b-a3b")
    gate = m.num_hidden_layers * m.hidden_size  # shared_expert_gate: (1, d) per layer
    router = m.num_hidden_layers * m.n_routed_experts * m.hidden_size
    assert parts["moe_router"] == router + gate


def test_report_header_weights_in_the_tables_units(run):
    """gpt-oss-120b: the header's checkpoint size reads as the weights row below (GiB)."""
    text = run("report", "gpt-oss-120b", "--format", "markdown")[0]
    w = mlacalc.weight_bytes("gpt-oss-120b")
    size = f"{w / 2**30:.2f} GiB"
    assert f"mxfp4 experts, {size} incl. 3.34 GiB scales" in text
    assert size in text.split("weights: checkpoint", 1)[1].split("\n", 1)[1]
    assert " GB " not in text.split("\n\n", 1)[0]


def test_report_of_a_layer_without_a_mixer_says_it_keeps_nothing(run):
    """Nemotron-3-Super's MoE blocks (kind none) keep no cache: "-" in both of the table's
    per-token columns, not "fixed state"; the notes say a Mamba layer's convolution window is
    in the KV dtype (its recurrent state in the model's) and under which FLOP columns its
    projections and scan count."""
    out, _ = run("report", "nemotron-3-super-120b-a12b", "-s", "8k")
    (none,) = [line for line in out.splitlines() if "│ none " in line]
    cells = [c.strip() for c in none.split("│")]
    assert cells[4:6] == ["-", "-"] and "fixed state" not in none
    said = " ".join(out.split())
    assert "its convolution window in the KV dtype" in said
    # the report's K positions (the reference cache) against plan's K - 1 (the engines'), said
    assert "K positions, as the reference implementation's cache keeps them" in said
    assert "the engines keep K - 1, which plan counts" in said
    assert "a linear or Mamba layer's input projections count under kv_proj" in said


def test_list_hardware_says_how_each_device_is_timed(run):
    """trial12: `list --hardware` showed MI300X beside the fitted parts with no word that no
    measured table vouches for its times."""
    out, _ = run("list", "--hardware", "--format", "json")
    times = {r["name"]: r["times"] for r in json.loads(out)}
    assert times["H100-SXM"] == times["B200"] == "own fit"
    assert times["H200"] == "from H100-SXM" and times["GB200"] == "from B200"
    assert times["MI300X"] == times["MI355X"] == "pooled, unvalidated"
    assert times["L40S"] == "pooled via A100-SXM-80GB, unvalidated"
    # a measured set: its ceilings for the datasheet, the fit by plan's route (review12: it
    # read "its measured ceilings" where plan says the pooled fit)
    assert times["measured:cuda-nvidia-h200-full-bf16"] == "measured ceilings; pooled, unvalidated"
    text, _ = run("list", "--hardware")
    assert "unvalidated" in text and "own fit" in " ".join(text.split())


def test_list_hardware_engine_route(run):
    """trial21: `list --hardware --engine vllm` was "No such option": the times column was
    TensorRT-LLM's only. Each engine's route, as plan picks its profile, and the engine named."""
    rows = {
        e: {
            r["name"]: r
            for r in json.loads(run("list", "--hardware", "--engine", e, "--format", "json")[0])
        }
        for e in ("trtllm", "sglang", "vllm")
    }
    for e, by in rows.items():
        assert {r["engine"] for r in by.values()} == {e}
    # vLLM's own H100 fit; H200 from it; its B200 fit for GB200 (no vLLM Ampere profile:
    # TensorRT-LLM's kernels stand in on A100, said in the row and the table)
    assert rows["vllm"]["H100-SXM"]["profile"] == "fit-h100-sxm-vllm"
    assert rows["vllm"]["H200"]["times"] == "from H100-SXM"
    assert rows["vllm"]["GB200"]["profile"] == "fit-b200-sxm-vllm"
    assert rows["vllm"]["A100-SXM-80GB"]["kernels"] == "trtllm"
    assert rows["sglang"]["H20"]["profile"] == "fit-h100-sxm-sglang"
    assert rows["trtllm"]["H100-SXM"]["profile"] == "default"
    text = run("list", "--hardware", "--engine", "VLLM", "--format", "markdown")[0]
    assert "times: vLLM's kernels (--engine vllm)" in text
    assert "| own fit (trtllm kernels) |" in text
    # no --engine: each device's default engine (SGLang on AMD's, TensorRT-LLM's kernels)
    default = {r["name"]: r for r in json.loads(run("list", "--hardware", "--format", "json")[0])}
    assert default["H100-SXM"]["engine"] == "trtllm" and default["MI300X"]["engine"] == "sglang"
    assert default["MI300X"]["kernels"] == "trtllm"
    text = run("list", "--hardware", "--format", "markdown")[0]
    assert "SGLang on AMD's GPUs, the default engines" in text
    assert "| pooled, unvalidated (trtllm kernels) |" in text  # MI300X under SGLang
    # TensorRT-LLM named on AMD's GPU: a stand-in, said
    text = run("list", "--hardware", "--engine", "trtllm", "--format", "markdown")[0]
    assert "| pooled, unvalidated (stand-in) |" in text
    # a bad engine, or --engine without --hardware: one line each
    _, err = run("list", "--hardware", "--engine", "tgi", code=2)
    assert "--engine" in err and "vllm" in err and len(err.strip().splitlines()) == 1
    _, err = run("list", "--engine", "vllm", code=2)
    assert "give it with --hardware" in err and len(err.strip().splitlines()) == 1
