"""report and compare on a DSA model with an fp8 cache say what vLLM and SGLang store
(FlashMLA's fp8_ds_mla, 656 B a latent row), as plan sizes it: they counted 576-byte rows
with no word (trial: DeepSeek-V3.2 at 128K, 5.27 GiB against plan's 5.87 GiB). Each test
failed before."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from mlacalc.cli import cli
from mlacalc.report import model_report
from mlacalc.serving.plan import plan

#: a DSA layer's indexer key: 128 fp8 values and a float32 scale
INDEXER = 128 + 4
#: fp8_ds_mla's latent row: 512 fp8 values, 4 float32 scales (one per 128), 64 bf16 RoPE
DS_ROW = 512 + 4 * 4 + 64 * 2
SEQ = 131_072


@pytest.mark.parametrize(("name", "layers"), [("deepseek-v3.2", 61), ("glm-5.1", 78)])
def test_report_says_the_engines_fp8_layout_with_its_bytes(name, layers):
    doc = model_report(name, seq_len=SEQ, batch=1, kv_dtype="fp8")
    per_token = layers * (DS_ROW + INDEXER)  # 48,068 B for DeepSeek-V3.2, 61,464 for GLM-5.1
    plain = layers * (576 + INDEXER)
    assert doc["kv_cache"][-1]["bytes_per_token"] == plain  # the table stays plain fp8
    [note] = [n for n in doc["notes"] if "fp8_ds_mla" in n]
    assert f"{per_token:,} B a token" in note
    assert f"{per_token * SEQ / 2**30:.2f} GiB" in note
    assert f"{plain:,} B a token" in note
    assert "--kv-dtype fp8_ds_mla" in note
    # the same bytes plan sizes under vLLM
    p = plan(name, "B200", 8, kv_dtype="fp8", engine="vllm", ep=8, dp_attention=True)
    assert p.kv_bytes_per_token_per_gpu == per_token


def test_report_counts_the_layout_when_named_and_says_nothing_elsewhere():
    ds = model_report("deepseek-v3.2", seq_len=SEQ, batch=1, kv_dtype="fp8_ds_mla")
    assert ds["kv_cache"][-1]["bytes_per_token"] == 61 * (DS_ROW + INDEXER) == 48_068
    assert not any("fp8_ds_mla layout (" in n for n in ds["notes"])
    for name, kv in (("deepseek-v3", "fp8"), ("deepseek-v3.2", "bf16")):
        assert not any("fp8_ds_mla" in n for n in model_report(name, kv_dtype=kv)["notes"])


def test_report_and_compare_print_it():
    runner = CliRunner()
    out = runner.invoke(cli, ["report", "deepseek-v3.2", "-s", "128k", "--kv-dtype", "fp8"])
    assert out.exit_code == 0, out.output
    assert "48,068 B a token and 5.87 GiB" in " ".join(out.output.split())
    out = runner.invoke(
        cli, ["compare", "deepseek-v3.2", "llama-3-70b", "-s", "128k", "--kv-dtype", "fp8"]
    )
    flat = " ".join(out.output.split())
    assert "48,068 B a token and 5.87 GiB" in flat and "Llama-3-70B (DSA)" not in flat
    out = runner.invoke(cli, ["report", "deepseek-v3.2", "--kv-dtype", "fp8", "--format", "json"])
    assert any("fp8_ds_mla" in n for n in json.loads(out.output)["notes"])


def test_compare_json_and_csv_carry_the_note():
    """``compare --format json|csv`` gave kv_bytes_per_token 43188 with no note: each row
    carries report's sentence (one function) as ``kv_note``."""
    runner = CliRunner()
    args = ["compare", "deepseek-v3.2", "llama-3-8b", "-s", "128k", "--kv-dtype", "fp8"]
    rows = json.loads(runner.invoke(cli, [*args, "--format", "json"]).stdout)
    said = [n for n in model_report("deepseek-v3.2", seq_len=SEQ, kv_dtype="fp8")["notes"]]
    assert rows[0]["kv_bytes_per_token"] == 43_188 and [rows[0]["kv_note"]] == said[-1:]
    assert "48,068 B a token" in rows[0]["kv_note"] and rows[1]["kv_note"] == ""
    csv = runner.invoke(cli, [*args, "--format", "csv"]).stdout
    assert "kv_note" in csv.splitlines()[0] and "48,068 B a token" in csv


def test_the_app_kv_view_shows_it():
    """The app's KV cache view for DeepSeek-V3.2 at fp8 showed 42.18 KiB a token, no note."""
    pytest.importorskip("streamlit")
    from _helpers import run_app

    at = run_app(model="deepseek-v3.2", kv="fp8", seq_len="131072", batch="1")
    assert not at.exception
    [note] = [n for n in model_report("deepseek-v3.2", seq_len=SEQ, kv_dtype="fp8")["notes"]]
    assert note in [i.value for i in at.info]
    at = run_app(model="deepseek-v3.2", kv="bf16")
    assert not any("fp8_ds_mla" in i.value for i in at.info)
