"""`mlacalc convert`, the rank sweep, and the conversion's bad inputs: one line naming the field."""

from __future__ import annotations

import json

import pytest

import mlacalc
from mlacalc.cost.convert_cost import conversion_cost
from mlacalc.models.convert import convert
from mlacalc.serving.convert_sweep import rank_sweep
from mlacalc.words.errors import MlacalcError


def test_cli_side_by_side(run):
    out, _ = run("convert", "llama-3-70b", "--method", "transmla", "--kv-lora-rank", "512")
    assert "Llama-3-70B -> MLA" in out
    line = next(x for x in out.splitlines() if "cache elements / token / layer" in x)
    assert "2048" in line and "576" in line and "0.281x" in line
    assert "│ kv_lora_rank" in out and "0.281x" in out


def test_cli_json_is_exact(run):
    out, _ = run("convert", "qwen2.5-72b", "--kv-lora-rank", "512", "--format", "json")
    doc = json.loads(out)
    cc = conversion_cost(convert("qwen2.5-72b", kv_lora_rank=512), seq_len=32768)
    assert doc["params"] == cc.params and doc["flops"] == cc.flops
    assert doc["conversion"]["equivalence_rank"] == 1984
    assert {"field": "qkv_bias", "before": True, "after": False} in doc["conversion"]["changes"]
    by = {r["phase"]: r for r in doc["attention_flops_by_phase"]}
    c = convert("qwen2.5-72b", kv_lora_rank=512)
    assert by["decode"]["source"] == mlacalc.attention_flops("qwen2.5-72b", "decode", 32768)
    assert by["decode"]["absorbed"] == mlacalc.attention_flops(
        c.model, "decode", 32768, impl="absorbed"
    )
    assert by["prefill"]["naive"] == mlacalc.attention_flops(
        c.model, "prefill", 32768, impl="naive", causal=True
    )


def test_cli_saved_model_loads_in_every_command(run, tmp_path):
    path = tmp_path / "m.yaml"
    run(
        "convert",
        "llama-2-7b",
        "--method",
        "mha2mla",
        "--svd",
        "split",
        "--kv-lora-rank",
        "256",
        "--save",
        path,
    )
    m = mlacalc.load_model(path)
    want = convert("llama-2-7b", method="mha2mla", svd="split", kv_lora_rank=256).model
    assert m.to_dict() == want.to_dict()
    out, _ = run("report", path, "--seq-len", "4k", "--format", "json")
    latent = [r for r in json.loads(out)["kv_cache"] if r["impl"] == "absorbed"]
    assert latent[0]["bytes_per_token"] == 320 * 2 * 32
    run("roofline", path, "--hardware", "H100", "--seq-len", "4k", "--format", "json")


def test_rank_sweep_and_cli_ranks(run):
    # 8K keys x 4: at 2K the cache (1 GiB) is too small beside the weights for TransMLA's wider
    # query (128 + 64 a head) and up-projection to pay back (7.04 ms converted, 7.00 source)
    rows = rank_sweep("llama-3-8b", [256, 1984], "H100", seq_len=8192, batch=4)
    assert [r.rank for r in rows] == [0, 256, 1984]
    assert rows[2].cache_bytes_per_token == rows[0].cache_bytes_per_token  # equivalence rank
    assert rows[1].decode_s < rows[0].decode_s  # a 5x smaller cache reads faster
    assert all(r.prefill_s > 0 for r in rows)
    out, _ = run("convert", "llama-3-8b", "--hw", "H100", "--ranks", "256,1984", "-s", "2k")
    assert "Ranks on H100" in out and "decode step time (H100; converted: MLA absorbed)" in out
    # the title names the source's row as the row reads (it said "rank 0", the row "source")
    assert "Ranks on H100, TensorRT-LLM (first row: the source model)" in out
    assert "│ source " in out


def test_cli_says_when_one_gpu_does_not_hold_the_model(run):
    # before: 'decode step time (H100) 83.55 ms -> 62.98 ms' with 141 GB of weights and 80 GiB
    # of cache on one 80 GB card, without a word
    out, err = run("convert", "llama-3-70b", "--kv-lora-rank", "512", "--hw", "H100", "-b", 8)
    assert "decode step time (H100; converted: MLA absorbed)" in out
    assert err.startswith(
        "mlacalc: warning: neither the source (131.42 GiB of weights + 80.00 GiB of cache = "
        "211.42 GiB) nor the converted (135.87 GiB of weights + 22.50 GiB of cache"
    ), err
    # 80 GiB: the device's memory in bytes as it reports it (74.51 GiB, 80e9 B, before 9f2da14)
    assert "fits in the 80.00 GiB of one H100-SXM" in err and "`mlacalc plan`" in err
    _, err = run("convert", "llama-3-8b", "--kv-lora-rank", "512", "--hw", "H100", "-s", "4k")
    assert err == ""  # 15 GiB of weights and a 0.5 GiB cache fit
    # batch 9 (batch 8's 78.96 GiB fits the H100's 80 GiB since 9f2da14, not 74.51)
    _, err = run(
        "convert", "llama-3-8b", "--kv-lora-rank", "512", "--hw", "H100", "-b", 9, "-s", "64k"
    )
    assert "the source (14.96 GiB of weights + 72.00 GiB of cache = 86.96 GiB) does not fit" in err


def test_query_rank_past_d_model_gets_a_note(run):
    # before: `--q-lora-rank 100000` on an 8,192-wide model passed without a word (the
    # parameters went 70.55 G -> 198.22 G); then a note under the last table; now the CLI
    # refuses a rank past the hidden size (tests/test_convert_trial_fixes.py) and notes one at it
    out, _ = run("convert", "llama-3-70b", "--q-lora-rank", "8192")
    assert "query rank 8,192 is not below min(d_model 8,192, query width 12,288 = 64 heads" in out
    c = convert("llama-3-70b", keep_q_full=False, q_lora_rank=8192)
    plain = mlacalc.param_counts(convert("llama-3-70b").model).attention_per_layer
    added = mlacalc.param_counts(c.model).attention_per_layer - plain
    assert any(f"adds {added:,} weights a layer" in n for n in c.notes)
    c = convert("llama-3-70b", keep_q_full=False, q_lora_rank=8191)  # compresses by one
    assert not any("query rank" in n for n in c.notes)


def test_query_rank_note_counts_transmlas_wider_query():
    """TransMLA's query heads are d_h + rope wide (Llama-3.1-8B: 32 x 192 = 6,144): the note
    used the source's 4,096 (at a query rank of 99,999 it said 802,514,591 weights where the
    shapes add 998,923,935; a rank past the hidden size is refused now). At 4,096 (the hidden
    size, so W_Q's full rank): W_DQ 4,096 x 4,096, W_UQ 4,096 x 6,144, the latent's norm, less
    W_Q 4,096 x 6,144. MHA2MLA's heads keep d_h."""
    c = convert("llama-3.1-8b", kv_lora_rank=1000, keep_q_full=False, q_lora_rank=4096)
    plain = convert("llama-3.1-8b", kv_lora_rank=1000).model
    added = mlacalc.param_counts(c.model).attention_per_layer
    added -= mlacalc.param_counts(plain).attention_per_layer
    assert added == 4096 * (4096 + 6144) + 4096 - 4096 * 6144 == 16_781_312
    (note,) = [n for n in c.notes if n.startswith("query rank")]
    assert "query width 6,144 = 32 heads x 192" in note and f"adds {added:,} weights" in note
    m = convert("llama-2-7b", method="mha2mla", keep_q_full=False, q_lora_rank=4096)
    assert any("query width 4,096 = 32 heads x 128" in n for n in m.notes)


def _row(out, label):
    return next(x for x in out.splitlines() if x.startswith(f"│ {label}"))


def test_cli_says_what_the_figures_are(run):
    # before: no word of fine-tuning, of what is dropped, or of the ratio under TP
    out, _ = run("convert", "llama-3-70b", "--kv-lora-rank", "512")
    assert "- counts before any fine-tuning" in out
    # TransMLA's full rank is 8 x 2 x 128 - 64 = 1,984 (it said 1,536, the rank of a 64-wide
    # position-free key part that dropped 448 of the 960 unrotated key dimensions unsaid)
    assert "the latent keeps 512 of the 1,984 dimensions" in out
    text = " ".join(out.split())
    assert "the other 960 of the source's 1,024 rotated key dimensions (8 heads x 128)" in text
    assert "enter the latent with the 1,024 value dimensions" in text
    # plan on 8 H100s at TP 8: 40,960 B a token per GPU for the source, 92,160 converted
    assert "smaller per GPU only below TP 3.56" in " ".join(out.split())
    doc = json.loads(run("convert", "llama-3-70b", "--kv-lora-rank", "512", "--format", "json")[0])
    assert doc["reading_notes"][0].startswith("counts before any fine-tuning")
    # said once in the JSON too (it had been in conversion.notes as well)
    assert json.dumps(doc).count("counts before any fine-tuning") == 1


def doc_rank(run, argv):
    """The JSON's published same-cache rank at d_c 256, RoPE 32."""
    out = run(*argv, "--kv-lora-rank", "256", "--rope-dim", "32", "--format", "json")[0]
    return json.loads(out)["conversion"]["published_equivalence_rank"]


def test_cli_mha2mla_headline_is_the_published_cache(run, tmp_path):
    # before: the headline row 'cache elements / token / layer' 288 (0.0352x), DeepSeek's
    # shared-RoPE form, with MHA2MLA's own 1,280 (0.156x) on the next row; the TP note and the
    # --save'd model (llama-2-7b-mha2mla-split-r256) the shared form without a word
    path = tmp_path / "m.yaml"
    argv = ["convert", "llama-2-7b", "--method", "mha2mla", "--svd", "split"]
    out, _ = run(*argv, "--kv-lora-rank", "256", "--rope-dim", "32", "--save", path)
    first = _row(out, "cache elements")  # 256 + 32 heads x 32 rotated dims
    assert "MHA2MLA as published" in first and "1280" in first and "0.156x" in first
    shared = _row(out, "cache elements / token / layer (shared-RoPE form)")
    assert "288" in shared and "0.0352x" in shared
    assert "80.00 KiB" in _row(out, "cache / token (all layers) (as published)")  # 1,280 x 2 x 32
    assert "MLA (mha2mla, shared-RoPE form, split SVD)" in _row(out, "attention")
    text = " ".join(out.split())
    assert "the cache ratio of the shared-RoPE form is per token" in text
    # the published form's per-head RoPE parts split with their heads under TP: (512 KiB -
    # 64 KiB) / 16 KiB = 28 (it said 6.4, the parts whole on every rank); both same-cache ranks
    assert "MHA2MLA as published (81,920 B a token: the latent's 16,384 B kept whole" in text
    assert "65,536 B in all, split with its head) is smaller per GPU only below TP 28;" in text
    assert "equivalence rank (same cache) 7,168 as published, 8,160 in the shared-RoPE form" in text
    assert doc_rank(run, argv) == 7168
    saved = path.read_text()
    assert "# MHA2MLA in DeepSeek's shared-RoPE form" in saved and "(1,280)" in saved
    m = mlacalc.load_model(path)
    assert m.name == "llama-2-7b-mha2mla-shared-rope-split-r256"
    assert "shared-RoPE form" in m.label
    doc = json.loads(run(*argv, "--kv-lora-rank", "256", "--rope-dim", "32", "--format", "json")[0])
    assert doc["published_cache_bytes_per_token"] == 1280 * 2 * 32
    assert doc["conversion"]["published_cache_elements_per_token_per_layer"] == 1280
    # TransMLA and an MQA source: one form, named as before
    assert convert("llama-3-8b", kv_lora_rank=512).model.name == "llama-3-8b-transmla-joint-r512"


def test_cli_split_parameters_are_what_report_counts_on_the_saved_file(run, tmp_path):
    # before: 'parameters (model)' 5.73 G, the split layer's own, while the note said the zero
    # blocks are counted and report on the --save'd file gave 5,756,956,672 (36,438,272 a layer)
    path = tmp_path / "m.yaml"
    argv = ["convert", "llama-2-7b", "--method", "mha2mla", "--svd", "split"]
    out, _ = run(*argv, "--kv-lora-rank", "256", "--save", path)
    params = json.loads(run("report", path, "--format", "json")[0])["parameters"]
    assert (params["total"], params["attention_per_layer"]) == (5756956672, 36438272)
    assert "5.76 G" in _row(out, "parameters (model)")
    assert "36.44 M" in _row(out, "attention parameters / layer")
    cc = conversion_cost(convert("llama-2-7b", method="mha2mla", svd="split", kv_lora_rank=256))
    assert f"the split layer's own: {cc.params:,} parameters" in " ".join(out.split())
    rows = rank_sweep("llama-2-7b", [256], "H100", "mha2mla", "split", seq_len=1024)
    assert rows[1].params == 5756956672  # the sweep (and the app's chart) likewise


def test_cli_ranks_names_mha2mlas_two_caches(run):
    # before: the --ranks table's one 'cache / token' column held the shared-RoPE form's
    # 18.00 KiB at 256, unnamed, beside a table that leads with the published 80 KiB
    argv = ["convert", "llama-2-7b", "--method", "mha2mla", "--rope-dim", "32", "-H", "H100"]
    out, _ = run(*argv, "--kv-lora-rank", "256", "--ranks", "256")
    text = " ".join(out.split())
    assert "cache / token (as published)" in text and "cache / token (shared-RoPE form)" in text
    row = [r for r in out.splitlines() if r.strip("│ ").startswith("256 ")][-1]
    assert row.index("80.00 KiB") < row.index("18.00 KiB")
    rows = rank_sweep("llama-2-7b", [256], "H100", "mha2mla", rope_dim=32, seq_len=1024)
    assert rows[1].published_cache_bytes_per_token == 1280 * 2 * 32
    out, _ = run("convert", "llama-3-8b", "--kv-lora-rank", "256", "-H", "H100", "--ranks", "256")
    assert "(as published)" not in out  # one form, one column


def test_cli_warns_past_the_context(run):
    # before: `convert llama-3-70b -s 1M` said nothing (report warns past 8,192 positions)
    out, err = run("convert", "llama-3-70b", "--kv-lora-rank", "512", "-s", "1M")
    assert "--seq-len:" in err and "Llama-3-70B was not trained for it" in err and out
    _, err = run("convert", "llama-3-70b", "--kv-lora-rank", "512", "-s", "8k")
    assert err == ""


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["gpt2"], "no RoPE"),
        (["llama-3-8b", "--rope-dim", "7"], "--rope-dim: RoPE rotates pairs"),
        (["llama-3-8b", "--rope-dim", "128"], "--rope-dim: is 128"),
        (["llama-3-8b", "--svd", "split", "--kv-lora-rank", "511"], "--kv-lora-rank: svd='split'"),
        (["llama-3-8b", "--kv-lora-rank", "0"], "--kv-lora-rank"),
        (["llama-3-8b", "--method", "transmla", "--rope-strategy", "high"], "--rope-strategy"),
        (["llama-3-8b", "--method", "nope"], "--method"),
        (["llama-3-8b", "--ranks", "256"], "--ranks"),
    ],
)
def test_cli_errors_are_one_line(run, argv, fragment):
    out, err = run("convert", *argv, code=2)
    assert fragment in err and err.count("\n") == 1 and not out


BAD = [
    ({"to": "gqa"}, "to"),
    ({"method": "svd"}, "method"),
    ({"method": 3}, "method"),
    ({"kv_lora_rank": 0}, "kv_lora_rank"),
    ({"kv_lora_rank": -5}, "kv_lora_rank"),
    ({"kv_lora_rank": 2.5}, "kv_lora_rank"),
    ({"kv_lora_rank": True}, "kv_lora_rank"),
    ({"kv_lora_rank": 1 << 40}, "kv_lora_rank"),
    ({"kv_lora_rank": 301, "svd": "split"}, "kv_lora_rank"),
    ({"rope_dim": 0}, "rope_dim"),
    ({"rope_dim": 3}, "rope_dim"),
    ({"rope_dim": 128}, "rope_dim"),
    ({"rope_dim": "64"}, "rope_dim"),
    ({"svd": "both"}, "svd"),
    ({"svd": None}, "svd"),
    ({"keep_q_full": "yes"}, "keep_q_full"),
    ({"keep_q_full": False}, "q_lora_rank"),
    ({"q_lora_rank": 512}, "q_lora_rank"),
    ({"keep_q_full": False, "q_lora_rank": 0}, "q_lora_rank"),
    ({"method": "mha2mla", "rope_strategy": "fastest"}, "rope_strategy"),
    ({"method": "transmla", "rope_strategy": "low"}, "rope_strategy"),
]


@pytest.mark.parametrize(("kwargs", "field"), BAD)
def test_convert_mutations_name_the_field(kwargs, field):
    with pytest.raises(MlacalcError) as err:
        convert("llama-3-8b", **kwargs)
    text = str(err.value)
    assert text.startswith(f"{field}: ") and "\n" not in text


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [({"impl": "absorbed_merged"}, "impl"), ({"seq_len": 0}, "seq_len"), ({"batch": -1}, "batch")],
)
def test_conversion_cost_mutations(kwargs, field):
    with pytest.raises(MlacalcError, match=f"^{field}: "):
        conversion_cost(convert("llama-3-8b"), **kwargs)
    with pytest.raises(MlacalcError, match=r"^conversion: "):
        conversion_cost(mlacalc.load_model("llama-3-8b"))


def test_sweep_mutations():
    with pytest.raises(MlacalcError, match=r"^ranks: is empty"):
        rank_sweep("llama-3-8b", [])
    with pytest.raises(MlacalcError, match=r"^ranks: "):  # the sweep's own field (round 24)
        rank_sweep("llama-3-8b", [0])
    with pytest.raises(MlacalcError, match=r"hardware|H1000"):
        rank_sweep("llama-3-8b", [64], "H1000")


def test_q_compression_and_mixtral():
    c = convert("mixtral-8x7b", keep_q_full=False, q_lora_rank=1536, kv_lora_rank=512)
    assert c.model.q_lora_rank == 1536 and c.model.n_routed_experts == 8
    assert mlacalc.param_counts(c.model).total < mlacalc.param_counts("mixtral-8x7b").total


def test_plan_and_search_take_the_converted_model():
    """At TP8 every rank keeps the whole latent while GQA's 8 KV heads split over the 8 ranks:
    Llama-3-70B holds 44 sequences of 32K on 8 H100s, converted to d_c = 512 only 19 (40 and 17
    while the catalogue held an H100's memory as 80e9 B, before 9f2da14)."""
    c = convert("llama-3-70b", kv_lora_rank=512)
    assert mlacalc.plan("llama-3-70b", "H100", gpus=8, seq_len=32768).max_batch == 44
    assert mlacalc.plan(c.model, "H100", gpus=8, seq_len=32768).max_batch == 19
    result = mlacalc.search(c.model, "H100", gpus=[8], isl=2000, osl=500)
    assert result.points and result.model == c.model.name


@pytest.mark.parametrize(
    ("rank", "where"),
    [
        (None, "at no TP degree (equal at TP 1)"),  # the equivalence rank, 1,984
        ("2048", "at no TP degree (larger at TP 1)"),
        ("512", "only below TP 3.56"),
    ],
)
def test_cli_tp_note_never_says_below_tp_1(run, rank, where):
    # before: at the equivalence rank "smaller per GPU only below TP 1" (never)
    argv = ["convert", "llama-3-8b"] + (["--kv-lora-rank", rank] if rank else [])
    out, _ = run(*argv)
    assert f"smaller per GPU {where}" in " ".join(out.split()), out


def test_cli_mha2mla_states_the_published_cache_once(run):
    # before: the published 1,024 in the table row, a reading note and the conversion's note,
    # and the split layer's zero blocks in two notes beside the FLOPs table's caption
    argv = ["convert", "llama-3-8b", "--method", "mha2mla", "--svd", "split"]
    out, _ = run(*argv, "--kv-lora-rank", "512")
    text = " ".join(out.split())
    assert "1024" in _row(out, "cache elements / token / layer (MHA2MLA as published)")
    assert "1,024 elements a token and layer" in text  # the number once, in the notes
    assert text.count("1,024 elements") == 1
    assert text.count("zero blocks") == 2  # the parameters' note, the FLOPs' caption
    c = convert("llama-3-8b", method="mha2mla", kv_lora_rank=512)
    assert c.published_cache_elements == 512 + 8 * 64
    assert convert("llama-3-8b", kv_lora_rank=512).published_cache_elements is None


@pytest.mark.parametrize(
    "argv",
    [
        ["convert", "llama-3-8b", "--kv-lora-rank", "-3"],
        ["convert", "llama-3-8b", "--q-lora-rank", "-1k"],
        ["convert", "llama-3-8b", "--batch", "-2"],
        ["convert", "llama-3-8b", "--hw", "H100", "--ranks", "256,-3"],
        ["convert", "llama-3-8b", "--seq-len", "0"],
        ["train", "llama-3-8b", "--tp", "-2"],
        ["train", "llama-3-8b", "--micro-batch", "-1"],
        ["train", "llama-3-8b", "--absorption", "1k,-4k"],
    ],
)
def test_a_negative_or_zero_size_must_be_a_positive_integer(run, argv):
    # before: "'-3' is not a size; write 131072, 128k or 1M" (it is a size, only negative)
    out, err = run(*argv, code=2)
    assert "must be a positive integer" in err and "is not a size" not in err, err
    assert err.count("\n") == 1 and not out
