"""What fits on a GPU in plan(): weights per GPU, the longest context a model's window allows,
KV lines by kind of layer, overload, and search's accounting of the points that lose."""

from __future__ import annotations

import pytest

from mlacalc.cost.params import param_counts, weight_bytes
from mlacalc.models.loading import load_model, shipped_models
from mlacalc.serving import make_layout
from mlacalc.serving.layout import weight_breakdown, weight_bytes_by_part, weights_per_gpu
from mlacalc.words.errors import InvalidArgumentError


@pytest.mark.parametrize("name", shipped_models())
def test_weight_parts_at_one_gpu_are_the_model(name):
    """At one GPU the planner's parts are the whole checkpoint, to the byte (an independent
    route: mlacalc.weight_bytes counts the checkpoint by tensor). Excluded: the MTP layers,
    which the plan holds only when asked (checked separately below)."""
    m = load_model(name)
    lay = make_layout(m, 1)
    assert weights_per_gpu(m, lay, None) == weight_bytes(m)
    assert sum(weight_breakdown(m, lay).values()) == pytest.approx(
        param_counts(m).total, rel=0, abs=1e-3
    )
    if m.num_nextn_predict_layers:
        assert weights_per_gpu(m, lay, "bf16", include_mtp=True) == weight_bytes(
            m, "bf16", include_mtp=True
        )


def _layouts(m, g):
    """The layouts of ``g`` GPUs the model allows: TP, EP, DP-attention + EP, PP2."""
    kwargs = [{}, {"pp": 2}, {"tp": 1, "dp": g}]
    if m.is_moe:
        kwargs += [{"ep": g}, {"dp_attention": True, "ep": g}]
    for kw in kwargs:
        try:
            yield make_layout(m, g, **kw)
        except InvalidArgumentError:
            continue


@pytest.mark.parametrize("name", shipped_models())
def test_weights_per_gpu_never_below_an_even_share(name):
    """Under any split a GPU holds at least total / GPUs (replicas only add)."""
    m = load_model(name)
    total = weight_bytes(m)
    for g in (2, 8):
        for lay in _layouts(m, g):
            assert weights_per_gpu(m, lay, None) * g >= total, (g, lay.describe())


def test_gemma4_full_layers_and_dense_mlp_are_sized():
    """Gemma 4: the 5 full layers have their own heads (global_head_dim 512, 2 K=V heads)
    and every layer a dense MLP beside its experts; both are in the memory lines."""
    m = load_model("gemma-4-26b-a4b")
    parts = weight_bytes_by_part(m, make_layout(m, 1), None)
    # 25 sliding layers x (q 11,534,336 + k, v 5,767,168 each + o 11,534,336 + q/k norms 512)
    # + 5 full layers x (q, o 23,068,672 each + k 2,883,584 + norms 1,024), in bf16
    sliding = 11_534_336 * 2 + 5_767_168 * 2 + 512
    full = 23_068_672 * 2 + 2_883_584 + 1_024
    assert parts["attention"] == 2 * (25 * sliding + 5 * full)
    assert parts["dense_ffn"] == 2 * 30 * 3 * 5_947_392


def test_longest_context_stops_at_the_models_window():
    """gpt-oss-120b on 8 H100 at batch 8: memory allows far more than its 131,072-token
    window; the plan caps the figure, says so, and keeps memory's figure in the JSON."""
    from mlacalc.serving.plan import plan

    p = plan("gpt-oss-120b", "H100-SXM", 8, batch=8)
    assert p.max_position_embeddings == 131_072
    assert p.max_context == 131_072 < p.max_context_memory
    assert p.to_dict()["max_context_memory"] == p.max_context_memory
    text = p.longest_context_text()
    assert text.startswith("131,072 tokens (the model's max_position_embeddings; memory allows ")
    assert f"{p.max_context_memory:,}" in text
    small = plan("gpt-oss-120b", "H100-SXM", 8, batch=4096)  # memory is the limit
    assert small.max_context == small.max_context_memory < 131_072
    assert "window" not in small.longest_context_text()


def test_kv_lines_split_every_token_layers_from_windows_and_states():
    """A sequence is the per-token bytes of the layers keeping every token times its context
    plus a fixed part (windows, linear states); the budget over it is the largest batch."""
    from mlacalc.cli.plan_cmd import kv_rows
    from mlacalc.serving.plan import plan

    g = plan("gemma-4-26b-a4b", "H100-SXM", 8)
    # 5 full layers x 1 of 2 K=V heads per rank (kept as K and V) x 512 x 2 B
    assert g.kv_bytes_per_token_full_layers_per_gpu == 5 * 2 * 512 * 2
    # 25 sliding layers x 1,024-token window x 1 of 8 heads per rank x K, V x 256 x 2 B
    assert g.kv_bytes_fixed_per_sequence_per_gpu == 25 * 1024 * 2 * 256 * 2
    o = plan("gpt-oss-120b", "H100-SXM", 8)
    assert o.kv_bytes_per_token_full_layers_per_gpu == 18 * 2 * 64 * 2  # 18 full, 1 head
    assert o.kv_bytes_fixed_per_sequence_per_gpu == 18 * 128 * 2 * 64 * 2  # 128-token window
    for p in (g, o, plan("qwen3-next-80b-a3b", "H100-SXM", 8, page_size=16)):
        pages = -(-p.context // p.page_size) * p.page_size
        assert p.kv_bytes_per_sequence_per_gpu == (
            p.kv_bytes_per_token_full_layers_per_gpu * pages + p.kv_bytes_fixed_per_sequence_per_gpu
        )
        assert p.max_batch == p.kv_budget_per_gpu_bytes // p.kv_bytes_per_sequence_per_gpu
        assert not p.kv_every_token
        labels = [r[0] for r in kv_rows(p)]
        assert any("layers keeping every token" in x for x in labels)
        assert any("fixed per sequence" in x for x in labels)
        assert not any(x.startswith("KV tokens per GPU") for x in labels)
    u = plan("llama-3-8b", "H100-SXM", 1, seq_len=4096)
    assert u.kv_every_token and u.kv_bytes_fixed_per_sequence_per_gpu == 0
    assert u.kv_tokens_per_gpu // 4096 == u.max_batch


def test_overload_shows_an_unbounded_queue_and_ttft():
    """Requests arriving faster than served: the queue and TTFT are unbounded (inf in the
    plan, None in JSON, "unbounded" in text) beside the warning, never "queued 0"."""
    import math

    from mlacalc.cli.plan_cmd import sections
    from mlacalc.serving.plan import plan

    p = plan("gpt-oss-120b", "H100-SXM", 8, isl=100, osl=10, request_rate=1e6)
    assert not p.sustainable and any("without bound" in w for w in p.warnings)
    assert math.isinf(p.queued) and math.isinf(p.ttft_s)
    doc = p.to_dict()
    assert doc["queued"] is None and doc["ttft_s"] is None
    rows = {r[0]: r[1] for s in sections(p) for r in s.rows}
    assert rows["requests in flight"].endswith("(queued unbounded)")
    assert rows["TTFT"].startswith("unbounded")
    ok = plan("gpt-oss-120b", "H100-SXM", 8, isl=100, osl=10, request_rate=10.0)
    assert ok.sustainable and ok.queued == 0 and math.isfinite(ok.ttft_s)
    assert ok.queue_text().endswith("(queued 0)") and ok.ttft_text().endswith(" ms")


def test_search_reasons_partition_the_points_and_disaggregated_gpus_read_decode_plus_prefill():
    """Each timed point is counted once (first reason); candidates never timed are counted
    apart; together they are the whole ``reasons``. A disaggregated point's GPUs read
    ``decode+prefill`` in the tables."""
    from mlacalc.cli.search_cmd import _gpus, sections
    from mlacalc.serving.search import search

    r = search("qwen3-30b-a3b", "H100-SXM", [1, 2], isl=2000, osl=500, ttft=0.3, tpot=0.02)
    assert sum(r.point_reasons.values()) == len(r.points)
    merged = dict(r.ruled_out)
    for k, v in r.point_reasons.items():
        merged[k] = merged.get(k, 0) + v
    assert merged == {k: v for k, v in r.reasons.items() if v}
    assert r.missing_both == sum(
        "misses TTFT" in p["reason"] and "misses TPOT" in p["reason"] for p in r.points
    )
    disagg = [p for p in r.points if p["mode"] == "disaggregated"]
    assert disagg, "the search should time disaggregated points"
    p = disagg[0]
    assert _gpus(p) == f"{p['decode_gpus']}+{p['prefill_gpus']}"
    assert p["gpus"] == p["decode_gpus"] + p["prefill_gpus"]
    why = next(s for s in sections(r) if s.title.startswith("Why the others lose"))
    assert sum(int(row[1].replace(",", "")) for row in why.rows) == len(r.points)
    assert "a point can fail several ways" in why.note


def test_plan_captions_decode_only_figure_and_uses_gib_in_its_fit_message():
    """The decode figure says it is decode-only steps and the output figure that it includes
    the prompts; the no-fit message speaks GiB like the table's memory lines."""
    from mlacalc.cli.plan_cmd import sections
    from mlacalc.serving.plan import plan
    from mlacalc.words.units import human_bytes

    p = plan("gpt-oss-120b", "H100-SXM", 8, isl=1000, osl=500)
    labels = [r[0] for s in sections(p) for r in s.rows]
    assert any(x.startswith("decode tokens/s at batch") and "decode-only" in x for x in labels)
    assert "output tokens/s (prompts' passes included)" in labels
    big = plan("deepseek-v3", "H100-SXM", 8)
    assert not big.fits and "GB " not in big.overflow
    assert human_bytes(big.weights_per_gpu_bytes) in big.overflow
    assert human_bytes(big.usable_per_gpu_bytes) in big.overflow


@pytest.mark.parametrize("name", ["deepseek-v3.2", "minimax-m3", "glm-5.1"])
def test_per_token_bytes_hold_the_indexer_keys(name):
    """A DSA or block-sparse layer keeps an indexer key a token beside its row: the per-token
    figure (and the tokens a GPU holds, read from it) is the sequence's growth, every layer's
    own (it had left the indexer keys out: MiniMax-M3 30,720 B a token on TP8, not 45,312)."""
    from mlacalc.serving.layout import kv_bytes_per_sequence_per_gpu, kv_bytes_per_token_per_gpu
    from mlacalc.words.dtypes import resolve_kv_layout

    m = load_model(name)
    bf16 = resolve_kv_layout("bf16")
    for lay in (make_layout(m, 8, tp=8), make_layout(m, 16, tp=1, ep=16, dp_attention=True)):
        per_token = kv_bytes_per_token_per_gpu(m, bf16, lay)
        for s in (1, 4096, 32768):
            assert kv_bytes_per_sequence_per_gpu(m, bf16, lay, s) == s * per_token, (lay, s)
