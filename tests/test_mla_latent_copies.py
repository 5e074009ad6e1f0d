"""An MLA model's attention under tensor parallelism: the latent (and its rope key) is one head,
copied on every TP rank, which plan said nowhere (a model architect's trial: 46,080 B a token
on each of 8 H200 at TP8, 2.25x the GQA-8 design's, no word, where GQA with 4 KV heads at TP8
got a warning). Said, with its cost against DP-attention's, wherever the GQA one is."""

from __future__ import annotations

import json

import pytest

from mlacalc.serving.plan import plan
from mlacalc.serving.search import search

KW = dict(isl=2000, osl=500, concurrency=256, engine="sglang")


def _said(p) -> list[str]:
    return [w for w in p.warnings if "MLA cache" in w]


@pytest.fixture(scope="module")
def lite():
    """DeepSeek-V2-Lite (27 layers, a 512-wide latent and 64-wide rope key, 64 experts) on
    8 H200 at TP8 and at DP-attention."""
    return plan("deepseek-v2-lite", "H200", 8, **KW), plan(
        "deepseek-v2-lite", "H200", 8, dp_attention=True, **KW
    )


def test_mla_at_tp8_says_the_latent_copy_and_dp_attentions_figures(lite):
    tp8, dpa = lite
    (w,) = _said(tp8)
    # every GPU caches the whole latent: 27 layers x (512 + 64) x 2 B, as one GPU alone
    assert tp8.kv_bytes_per_token_per_gpu == 27 * (512 + 64) * 2 == 31104
    assert dpa.kv_bytes_per_token_per_gpu == 31104 and dpa.layout == "TP1 DP-attention8 MoE-TP8"
    assert "512-wide latent and 64-wide rope key" in w and "(TP8)" in w
    assert f"31,104 B a token, and holds {tp8.kv_tokens_per_gpu:,} KV tokens" in w
    assert f"({tp8.kv_tokens_per_gpu:,} in all, largest batch {tp8.max_batch:,})" in w
    # DP-attention's own plan's figures, each GPU its own sequences: 8x the tokens in all
    assert (
        f"{dpa.kv_tokens_per_gpu:,} KV tokens a GPU, {dpa.kv_tokens_per_gpu * 8:,} in all, "
        f"largest batch {dpa.max_batch:,}"
    ) in w
    assert dpa.max_batch > 7 * tp8.max_batch  # its attention weights on each GPU cost a little
    assert "--tp 1 --dp-attention" in w and "--enable-dp-attention" in w
    assert "enable_attention_dp" in w and "--data-parallel-size" in w
    # the layout printed splits the experts by tensor parallelism (no EP): vLLM's DP alone
    assert "--enable-expert-parallel" not in w and "over the DP x TP ranks" in w
    assert not _said(dpa)  # TP1: nothing copied


def test_no_latent_copy_warning_at_tp1_or_on_gqa_and_mha():
    assert not _said(plan("deepseek-v2-lite", "H200", 1, **KW))
    assert not _said(plan("qwen3-30b-a3b", "H200", 8, **KW))  # GQA: its own warning
    assert not _said(plan("llama-2-7b", "H200", 4, isl=2000, osl=500, concurrency=8))  # MHA
    # TP2 inside each DP-attention group still copies it on 2 ranks: said
    (w,) = _said(plan("deepseek-v2-lite", "H200", 8, tp=2, dp_attention=True, **KW))
    assert "(TP2)" in w and "the other 1 rank of its group" in w
    # with EP8 the DP-attention layout's experts go by EP: vLLM's flag for it is named
    (w,) = _said(plan("deepseek-v2-lite", "H200", 8, ep=8, **KW))
    assert "EP8: --tp 1" in w and "--data-parallel-size with --enable-expert-parallel" in w


def test_a_dense_mla_model_is_pointed_to_fewer_ranks_not_dp_attention():
    p = plan("minicpm3-4b", "H200", 4, isl=2000, osl=500, concurrency=16)
    (w,) = _said(p)
    assert p.kv_bytes_per_token_per_gpu == 62 * (256 + 32) * 2  # 62 layers' latent + rope
    assert f"{p.kv_bytes_per_token_per_gpu:,} B a token" in w
    assert "only with MoE layers" in w and "--dp-attention" not in w


def test_cli_says_it_in_text_markdown_json_and_labels_the_row(run):
    args = ["plan", "deepseek-v2-lite", "-H", "H200", "--gpus", 8, "--engine", "sglang",
            "--isl", 2000, "--osl", 500, "--concurrency", 256]  # fmt: skip
    out, _ = run(*args, "--format", "markdown")
    assert "| KV per token per GPU (bf16) (latent copied on every TP rank) | 31,104 B |" in out
    assert "copied on every tensor-parallel rank (TP8)" in out
    out, _ = run(*args)
    assert "copied on every tensor-parallel" in " ".join(out.split())
    doc = json.loads(run(*args, "--format", "json")[0])
    assert len([w for w in doc["warnings"] if "MLA cache" in w]) == 1
    out, _ = run(*args, "--dp-attention", "--format", "markdown")
    assert "latent copied" not in out and "MLA cache" not in out


def test_search_best_says_it_with_plans_figures():
    """search's best at TP8 (DP-attention off) says what plan of it says, figures and all;
    the GQA head-copy warning reaches it too."""
    kw = dict(isl=2000, osl=500, engine="sglang", tp=8, dp_attention="off", kv_dtypes=("bf16",))
    r = search("deepseek-v2-lite", "H200", [8], weight_dtypes=("bf16",), **kw)
    b = r.best
    assert b["layout"].startswith("TP8") and not b["dp_attention"]
    (w,) = [w for w in r.warnings if "MLA cache" in w]
    p = plan(
        "deepseek-v2-lite", "H200", 8, tp=8, ep=b["ep"], weight_dtype="bf16",
        page_size=r.page_size, isl=2000, osl=500, concurrency=b["concurrency"],
        engine="sglang", engine_defaults="none",
    )  # fmt: skip
    assert _said(p) == [w]
    g = search("qwen3-30b-a3b", "H200", [8], weight_dtypes=("bf16",), **kw)
    assert [w for w in g.warnings if "KV heads, fewer than the tensor-parallel degree" in w]


def test_app_planner_says_it_and_labels_the_memory_line():
    """The app's planner shows plan's warnings: this one too, and its memory line says the
    latent is copied, as the CLI's row does."""
    pytest.importorskip("streamlit")
    from _helpers import run_app

    at = run_app("Capacity planner", model="deepseek-v2-lite")
    assert [i.value for i in at.info if "copied on every tensor-parallel rank (TP8)" in i.value]
    line = next(m.value for m in at.markdown if "KV per token per GPU" in m.value)
    assert "KV per token per GPU (latent copied on every TP rank)" in line
