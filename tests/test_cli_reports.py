"""The CLI's reports: import-hf round trips, report's prefill row, roofline's footer and
--insight, the weights summary's units, fp8 warnings, list's KV per token."""

from __future__ import annotations

import json

import pytest
from reference_data import HF_CONFIGS, HF_CONFIGS_2

import mlacalc

CONFIGS = sorted(HF_CONFIGS.glob("*.config.json"))


def _figures(m) -> dict:
    """Every figure a YAML round trip must keep: KV bytes, parameters and FLOPs, exactly."""
    out = {"params": mlacalc.param_counts(m).to_dict() | {"model": 0}}
    impls = (None, "naive", "compressed", "absorbed") if m.is_mla else (None,)
    for impl in impls:
        for seq in (1, 4097, 32_768, 131_072):
            out[("kv", impl, seq)] = mlacalc.kv_cache_bytes(m, seq, impl=impl)
            out[("decode", impl, seq)] = mlacalc.attention_flops(m, "decode", seq, impl=impl)
        out[("prefill", impl)] = mlacalc.attention_flops(m, "prefill", 32_768, impl=impl)
    return out


# -- 1. import-hf keeps every field a family would default (Mistral's sliding_window: null) ----


@pytest.mark.parametrize("config", CONFIGS, ids=lambda p: p.name.split(".config.json")[0])
def test_import_hf_yaml_round_trip_keeps_the_model(config, tmp_path, run):
    target = tmp_path / "m.yaml"
    run("import-hf", str(config), "-o", str(target))
    assert _figures(mlacalc.load_model(target)) == _figures(mlacalc.load_model(config))


def test_mistral_yaml_keeps_full_attention(tmp_path, run):
    config = HF_CONFIGS / "mistral-7b-v0.3.config.json"
    target = tmp_path / "m.yaml"
    run("import-hf", str(config), "-o", str(target))
    assert "sliding_window: null" in target.read_text()
    m = mlacalc.load_model(target)
    assert mlacalc.kv_cache_bytes(m, 32_768) == 4 * 2**30  # 128 KiB/token, no 4096 window
    assert not any("sliding_window" in d for d in m.derived)


# -- 2. the MLA serving default's prefill row is not labelled plain "naive" ---------------------


def test_default_prefill_row_names_its_compressed_cache(run):
    doc = json.loads(run("report", "deepseek-v3", "--format", "json")[0])
    rows = {(r["phase"], r["label"]): r for r in doc["attention"]}
    default = next(r for r in doc["attention"] if r["phase"] == "prefill" and r["default"])
    assert default["cache_impl"] == "compressed" and default["label"] != "naive"
    assert "latent cache" in default["label"] and "default" in default["label"]
    # in prefill the default equals the compressed implementation exactly, not the naive bytes
    compressed = rows[("prefill", "compressed")]
    assert (default["flops"], default["fused_bytes"]) == (
        compressed["flops"],
        compressed["fused_bytes"],
    )
    assert rows[("prefill", "naive")]["cache_impl"] == "naive"
    assert rows[("prefill", "naive")]["fused_bytes"] > default["fused_bytes"]
    table = run("report", "deepseek-v3", "--format", "markdown", "--phase", "prefill")[0]
    assert "| naive (default) |" not in table and "| naive, latent cache (default) |" in table


# -- 3. the roofline footer's plain figures are the ones --profile roofline prints --------------


def _total_us(table: str) -> float:
    row = next(line for line in table.splitlines() if line.startswith("│ total"))
    return float(row.rstrip(" │").rsplit("│", 1)[1].replace(",", ""))


@pytest.mark.parametrize("device", ["H200", "H100-SXM"])
def test_roofline_footer_matches_profile_roofline(run, device):
    import re

    args = ("roofline", "deepseek-v3", "-H", device, "--seq-len", "32k", "--batch", "64")
    table = " ".join(run(*args)[0].split())  # the footer as one line
    plain_table = run(*args, "--profile", "roofline")[0]
    said = re.search(r"--profile roofline prints ([\d,.]+) us", table)
    assert said, table
    assert float(said.group(1).replace(",", "")) == pytest.approx(_total_us(plain_table), abs=0.05)
    # the other figure is the plain bound of the kernel model's own kernels, and says so
    doc = json.loads(run(*args, "--format", "json")[0])["predictions"][0]
    own = re.search(r"of these (\d+) kernels: ([\d,.]+) us", table)
    assert own and int(own.group(1)) == len(doc["ops"])
    assert float(own.group(2).replace(",", "")) == pytest.approx(doc["roofline_s"] * 1e6, abs=0.05)


# -- 4. --insight speaks of the kernel model's labels as well as the plain roofline's -----------


@pytest.mark.parametrize("batch", ["1", "64"])
def test_insight_agrees_with_the_table_labels(run, batch):
    from mlacalc.timemodel.insight import model_compute_bound_seq_len

    args = ("roofline", "deepseek-v3", "-H", "H100-SXM", "--seq-len", "32k", "--batch", batch)
    doc = json.loads(run(*args, "--insight", "--format", "json")[0])
    core = next(o for o in doc["predictions"][0]["ops"] if o["stage"] == "core")
    by_name = {i["name"]: i for i in doc["insights"]}
    plain = [n for n in by_name if "compute-bound at S" in n]
    assert plain and all(n.startswith("plain roofline:") for n in plain)
    model = next(i for n, i in by_name.items() if n.startswith("kernel model"))
    assert f"at S = 32,768: {core['bound']} " in model["note"]
    if model["value"] is not None:  # the first S of the kernel model's compute label
        S = int(model["value"])
        m = mlacalc.load_model("deepseek-v3")

        def label(s):
            p = mlacalc.predict_time(m, "H100-SXM", "decode", s, int(batch), "absorbed")
            return next(o for o in p.ops if o.stage == "core").bound

        assert label(S) == "compute" and (S == 64 or label(S - 1) != "compute")
    # the plain roofline device has no kernel-model row to add
    assert model_compute_bound_seq_len("deepseek-v3", "H100-SXM", profile="roofline") is None


@pytest.mark.parametrize(
    ("hardware", "extra"),
    [("B200", ("--engine", "sglang")), ("H200", ("--engine", "vllm")), ("H200", ())],
)
def test_insight_names_the_profile_that_timed_the_tables(run, hardware, extra):
    """The kernel model's insight row names the tables' profile (before: "(fit-b200-sxm)" under
    --engine sglang on B200, "(default)" under --engine vllm on H200)."""
    args = ("roofline", "deepseek-v3", "-H", hardware, *extra, "--insight", "--format", "json")
    doc = json.loads(run(*args)[0])
    profile = doc["predictions"][0]["profile"]
    model = next(i["name"] for i in doc["insights"] if i["name"].startswith("kernel model"))
    assert model.startswith(f"kernel model ({profile}):")


def test_insight_says_why_a_model_without_mla_gets_only_the_ridge(run):
    """DeepSeek-V4-Pro's --insight printed the ridge row alone with no word why (round 24)."""
    out = run("roofline", "deepseek-v4-pro", "-H", "H200", "--seq-len", "2k", "--insight")[0]
    assert "Only the ridge point: DeepSeek-V4-Pro's attention is DeepSeek-V4's compressed " in out
    assert "not MLA (kv_lora_rank is null)" in out


def test_insight_prints_a_whole_kv_length_as_one(run):
    """The kernel model's S is a whole KV length (before: "1,404.0")."""
    out = run("roofline", "deepseek-v3", "-H", "H200", "--insight")[0]
    row = next(line for line in out.splitlines() if "kernel model (" in line)
    assert "│     1,404 │" in row
    assert "│     170.7 │" in out  # a ratio keeps its decimal


# -- 5. the weights summary is in binary units everywhere -----------------------------------------


def test_weights_summary_binary_units(run):
    doc = json.loads(run("report", "gpt-oss-120b", "--format", "json")[0])
    summary = doc["weights"]["summary"]
    assert "GiB" in summary and " GB" not in summary
    assert mlacalc.render.human_bytes(doc["weights"]["checkpoint"]["total_bytes"]) in summary
    table = run("report", "gpt-oss-120b")[0]
    assert f"weights: {summary}" in table
    csv_text = run("report", "gpt-oss-120b", "--format", "csv")[0]
    assert " GB" not in next(line for line in csv_text.splitlines() if "weights.summary" in line)


# -- 6. fp8 on a GPU without fp8 tensor cores is said aloud ---------------------------------------


def test_roofline_warns_fp8_on_a100(run):
    _, err = run("roofline", "llama-3-8b", "-H", "A100-SXM-80GB", "--dtype", "fp8")
    assert "A100-SXM-80GB has no fp8 tensor cores" in err and "w8a16" in err
    _, err = run("roofline", "llama-3-8b", "-H", "A100-SXM-80GB", "--weight-dtype", "fp8")
    assert "no fp8 tensor cores" in err
    _, err = run("roofline", "llama-3-8b", "-H", "H100-SXM", "--dtype", "fp8")
    assert "fp8 tensor cores" not in err
    _, err = run("roofline", "llama-3-8b", "-H", "A100-SXM-80GB")
    assert "fp8 tensor cores" not in err


# -- 7. list: a full window is not read as a model without a KV cache -----------------------------


def test_list_kv_per_token_is_unambiguous(run):
    rows = {r["name"]: r for r in json.loads(run("list", "--format", "json")[0])}
    mistral = rows["mistral-7b"]
    assert mistral["kv_bytes_per_token_bf16"] == 0  # the report's definition, at 128k
    assert mistral["kv_bytes_per_token_bf16_short"] == 128 * 1024 and mistral["window_full"]
    assert rows["llama-3-8b"]["kv_bytes_per_token_bf16_short"] == 128 * 1024
    assert not rows["llama-3-8b"]["window_full"]
    table = run("list")[0]
    line = next(row for row in table.splitlines() if "mistral-7b" in row)
    # the full window's cache beside its 0 B (the short row, 128 KiB, is in JSON only now)
    assert "512.00 MiB" in line and "0 B (window" in line


def test_report_says_what_deepseek_v4s_compressed_layers_keep(run):
    """DeepSeek-V4-Pro's header says what d_h is and what csa / hca pool; the per-token note
    says the figure is averaged over the pooling (it said 'a row in each layer still keeping
    every token'), and the by-kind note names the compressed kinds (it named none)."""
    out, _ = run("report", "deepseek-v4-pro", "--format", "markdown")
    first = out.splitlines()[0]
    assert "d_h=512 (one K = V head)" in first
    assert "csa: one pooled key per 4 tokens, 1,024 picked by its indexer" in first
    assert "hca: one per 128 tokens, all attended" in first
    assert "averaged over the pooling (hca, csa layers: 9.62 KiB/token)" in out
    assert "still keeping every token" not in out
    assert "a compressed layer (csa, hca) its window's rows and its pooled keys" in out
    mimo, _ = run("report", "mimo-v2-flash", "--format", "markdown")
    assert "K = V" not in mimo and "pooled" not in mimo.split("KV cache by kind")[0]
    assert "still keeping every token (full layers: 22.50 KiB/token)" in mimo


def test_report_flops_rows_name_the_implementation_as_impl_does(run):
    """DeepSeek-V4-Pro's FLOPs rows are 'standard', the name --impl and the KV rows use (they
    said 'compressed', an MLA implementation's name), and the MLA-default footnote is only
    under an MLA model's table."""
    out, _ = run("report", "deepseek-v4-pro", "--format", "markdown")
    assert "| decode | standard |" in out and "| decode | compressed" not in out
    assert "MLA default" not in out
    assert "MLA default" in run("report", "deepseek-v3", "--format", "markdown")[0]


def test_list_says_what_deepseek_v4s_per_token_figures_are(run):
    """list's DeepSeek-V4-Pro row: 273 KiB per token at a short sequence (a window row and the
    compressors' pending rows, 279,552 B) beside 9.62 KiB added at 128k; the note says which
    is which (it explained neither)."""
    rows = {r["name"]: r for r in json.loads(run("list", "--format", "json")[0])}
    v4 = rows["deepseek-v4-pro"]
    assert v4["kv_bytes_per_token_bf16_short"] == 279_552
    assert v4["kv_bytes_per_token_bf16"] == 9_848
    md, _ = run("list", "--format", "markdown")
    # the short-sequence row is in JSON and CSV only now; the note says what it holds
    assert "its short-sequence row is a token's window row and its compressors' pending" in md


def test_lists_kv_columns_compare_like_with_like(run):
    """trial: list's 'KV per token (bf16)' put DeepSeek-V4-Pro at 273 KiB, four times
    DeepSeek-V3's 68.62 KiB, while its 128k sequence is 1.21 GiB against 8.58 GiB: a short
    sequence's row beside full ones. Both table columns are at 128k now; the row stays in
    JSON."""
    md, _ = run("list", "--format", "markdown")
    header = next(line for line in md.splitlines() if line.startswith("| name |"))
    assert "KV per token (bf16)" not in header
    assert "KV added per token at 128k (bf16) | KV of one 128k sequence (bf16) |" in header
    rows = {line.split(" | ")[0]: line for line in md.splitlines() if line.startswith("| deep")}
    assert rows["| deepseek-v4-pro"].endswith("| 9.62 KiB (window full) | 1.21 GiB |")
    assert "273.00 KiB" not in md
    assert rows["| deepseek-v3"].endswith("| 68.62 KiB | 8.58 GiB |")
    csv_out, _ = run("list", "--format", "csv")
    assert "kv_bytes_per_token_bf16_short" in csv_out.splitlines()[0]


def test_report_gives_each_kind_of_layer_its_attention_parameters(run):
    """A hybrid's layers hold different attention: report gives each kind's (Qwen3.5-122B:
    36 linear layers of 88,523,008 and 12 full of 78,643,712), summing to the breakdown's; it
    printed the full layers' alone as 'attention per layer' and 'one layer'."""
    path = HF_CONFIGS_2 / "Qwen--Qwen3.5-122B-A10B.config.json"
    doc = json.loads(run("report", str(path), "--format", "json")[0])["parameters"]
    kinds = {r["kind"]: (r["layers"], r["parameters"]) for r in doc["attention_by_kind"]}
    assert kinds == {"linear": (36, 88_523_008), "full": (12, 78_643_712)}
    assert sum(n * p for n, p in kinds.values()) == doc["breakdown"]["attention"]
    out = run("report", str(path), "--format", "markdown")[0]
    assert "| attention per linear layer (36) | 88,523,008 |" in out
    assert "Attention projections (one full layer, 12 of 48)" in out
    assert "attention per layer" not in out and "(one layer)" not in out
    out = run("report", "llama-3-8b", "--format", "markdown")[0]  # one kind: as before
    assert "| attention per layer |" in out and "Attention projections (one layer)" in out
