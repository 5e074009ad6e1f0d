"""MiniMax-M3 (``minimax_m3``) against transformers' ``MiniMaxM3VLTextConfig`` /
``MiniMaxM3VLForCausalLM`` (the text model of ``minimax_m3_vl``; transformers maps no class to
``minimax_m3`` itself, so the reference is the text config built from the published file's
fields, as :mod:`mlacalc.models.hf.minimax_m3` reads them).

Parameters equal the meta-device model to the parameter; each layer's cache bytes equal the
reference cache after meta forwards of 1, 4096 and 32768 tokens; the keys each query attends
equal what the reference indexer selects on random weights; the indexer's and the core's
FLOPs equal ``FlopCounterMode``. Malformed ``sparse_attention_config`` fields are refused
naming the field.
"""

from __future__ import annotations

import json
from functools import cache

import pytest
from reference_data import HF_CONFIGS_2

import mlacalc
from mlacalc.cost.block_sparse import (
    block_indexer_cost,
    block_keys_attended,
    block_sparse_keys_and_pairs,
)
from mlacalc.models.hf import import_hf_config
from mlacalc.models.patterns import cache_spec
from mlacalc.models.patterns import layer_pattern as config_pattern
from mlacalc.words.errors import ConfigError

NAME = "MiniMaxAI--MiniMax-M3"
PATH = HF_CONFIGS_2 / f"{NAME}.config.json"
#: the reference's parameters and persistent buffers (the routers' correction biases, 57 x
#: 128): MiniMaxM3VLForCausalLM on the meta device; no MTP module, no vision tower
TOTAL = 426_174_572_928


def _raw() -> dict:
    return json.loads(PATH.read_text(encoding="utf-8"))


def _reference():
    """The shared reference helpers (skipped naming the missing extra)."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    return pytest.importorskip("hf_reference_2")


def _as_text(data: dict) -> dict:
    """The published file as MiniMaxM3VLTextConfig's fields (its model_type)."""
    return {**data, "model_type": "minimax_m3_vl_text"}


def _first(data: dict, layers: int) -> dict:
    out = {**data, "num_hidden_layers": layers, "moe_layer_freq": data["moe_layer_freq"][:layers]}
    sparse = dict(data["sparse_attention_config"])
    for key in ("sparse_attention_freq", "sparse_disable_index_value"):
        sparse[key] = sparse[key][:layers]
    out["sparse_attention_config"] = sparse
    return out


def test_loads_with_its_layers_and_widths():
    m = mlacalc.load_model(PATH)
    assert config_pattern(m).describe() == "60 layers: 3 full + 57 msa; FFN: 3 dense + 57 MoE"
    assert (m.intermediate_size, m.moe_intermediate_size, m.shared_intermediate_size) == (
        12288,
        3072,
        3072,
    )
    assert (m.sparse_block_size, m.sparse_topk_blocks, m.sparse_local_blocks) == (128, 16, 1)
    assert (m.sparse_index_heads, m.sparse_index_dim) == (4, 128)
    assert m.sparse_attention_layers == tuple(range(4, 61))
    assert mlacalc.param_counts(m).total == TOTAL


def test_the_shipped_model_is_the_published_config():
    shipped = mlacalc.load_model("minimax-m3")
    m = mlacalc.load_model(PATH)
    skip = {"name", "source", "aliases", "display_name", "notes"}
    assert {k: v for k, v in shipped.to_dict().items() if k not in skip} == {
        k: v for k, v in m.to_dict().items() if k not in skip
    }


@pytest.mark.slow
def test_parameters_equal_the_reference():
    """The whole model (3.5 s to build on meta; five layers of each kind run by default)."""
    ref = _reference()
    model = ref.build(_as_text(_raw()))
    assert ref.param_count(model) == TOTAL
    assert mlacalc.param_counts(mlacalc.load_model(PATH)).total == TOTAL


@cache
def _five_layers():
    """The reference's first five layers (three full and dense, two block-sparse and MoE)."""
    ref = _reference()
    model = ref.build(_as_text(_first(_raw(), 5)))
    model.config._attn_implementation = "eager"
    return model


def test_five_layers_parameters_equal_the_reference():
    ref = _reference()
    m = import_hf_config(_first(_raw(), 5), origin="minimax-m3 (5 layers)")
    assert mlacalc.param_counts(m).total == ref.param_count(_five_layers())


@pytest.mark.parametrize("seq_len", [1, 4096, 32768])
def test_cache_bytes_equal_the_reference(seq_len):
    """Three full layers and two block-sparse ones (K, V and the indexer key per token)."""
    ref = _reference()
    data = _first(_raw(), 5)
    theirs = ref.cache_bytes(_five_layers(), seq_len)
    m = import_hf_config(data, origin="minimax-m3 (5 layers)")
    spec, pattern = cache_spec(m), config_pattern(m)
    ours = [spec.layer_bytes(k, seq_len, convention="hf") for k in pattern.layers]
    assert ours == [b for _, b in theirs]
    assert [k.attention for k in pattern.layers] == ["full"] * 3 + ["msa"] * 2
    assert mlacalc.kv_cache_bytes(m, seq_len) == sum(ours)


def test_the_whole_models_cache():
    m = mlacalc.load_model(PATH)
    kv = mlacalc.kv_cache(m, 32768)
    assert dict((label, b) for label, _, _, b in kv.by_kind) == {
        "full": 3 * 32768 * 2048,
        "msa": 57 * 32768 * (2048 + 256),
    }
    assert kv.bytes_per_token == 3 * 2048 + 57 * 2304


def _small_text_config(local: int = 1, topk: int = 3, block: int = 4):
    from transformers.models.minimax_m3_vl.configuration_minimax_m3_vl import (
        MiniMaxM3VLTextConfig,
    )

    return MiniMaxM3VLTextConfig(
        vocab_size=64,
        hidden_size=64,
        num_hidden_layers=1,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        intermediate_size=32,
        dense_intermediate_size=32,
        shared_intermediate_size=32,
        num_local_experts=2,
        num_experts_per_tok=1,
        sparse_attention_config={
            "sparse_attention_freq": [1],
            "sparse_block_size": block,
            "sparse_topk_blocks": topk,
            "sparse_local_block": local,
            "sparse_num_index_heads": 2,
            "sparse_index_dim": 16,
        },
        moe_layer_freq=[1],
    )


def _indexer(config):
    import torch
    from transformers.models.minimax_m3_vl.modeling_minimax_m3_vl import (
        MiniMaxM3VLIndexer,
        MiniMaxM3VLRotaryEmbedding,
    )

    torch.manual_seed(0)
    indexer = MiniMaxM3VLIndexer(config, 0)
    for p in indexer.parameters():
        torch.nn.init.normal_(p, std=0.5)
    return indexer, MiniMaxM3VLRotaryEmbedding(config)


@pytest.mark.parametrize(("local", "topk", "block"), [(1, 3, 4), (2, 3, 4), (3, 3, 4), (1, 2, 5)])
def test_keys_attended_equal_the_reference_selection(local, topk, block):
    """Each query's keys: the blocks the reference indexer keeps, up to the query itself."""
    _reference()
    import torch

    config = _small_text_config(local, topk, block)
    indexer, rope = _indexer(config)
    seq = 41
    x = torch.randn(1, seq, 64)
    pos = torch.arange(seq)[None]
    with torch.no_grad():
        chosen = indexer(x, rope(x, pos), None, pos)  # [1, heads, S, topk]
    for head in range(chosen.shape[1]):
        for j in range(seq):
            blocks = [b for b in chosen[0, head, j].tolist() if b >= 0]
            assert len(set(blocks)) == len(blocks)
            keys = sum(min(block, j + 1 - b * block) for b in blocks)
            assert keys == block_keys_attended(j + 1, block, topk), (head, j, blocks)
    pairs = sum(block_keys_attended(j, block, topk) for j in range(1, seq + 1))
    assert block_sparse_keys_and_pairs(seq, seq, block, topk, True) == (
        min(seq, topk * block),
        pairs,
    )
    last = sum(block_keys_attended(j, block, topk) for j in range(seq - 6, seq + 1))
    assert block_sparse_keys_and_pairs(7, seq, block, topk, True)[1] == last


def _small_model(block: int = 4, topk: int = 3):
    return import_hf_config(
        {
            "model_type": "minimax_m3",
            "vocab_size": 64,
            "hidden_size": 64,
            "num_hidden_layers": 1,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "head_dim": 16,
            "intermediate_size": 32,
            "dense_intermediate_size": 32,
            "shared_intermediate_size": 32,
            "num_local_experts": 2,
            "num_experts_per_tok": 1,
            "moe_layer_freq": [1],
            "sparse_attention_config": {
                "sparse_attention_freq": [1],
                "sparse_block_size": block,
                "sparse_topk_blocks": topk,
                "sparse_local_block": 1,
                "sparse_num_index_heads": 2,
                "sparse_index_dim": 16,
            },
        },
        origin="small minimax_m3",
    )


@pytest.mark.parametrize(("seq", "q"), [(41, 41), (41, 1)])
def test_indexer_flops_equal_flop_counter(seq, q):
    """q_proj, k_proj and the score matrix over every cached key (prefill, and a decode step
    after ``seq - 1`` cached keys)."""
    _reference()
    import torch
    from torch.utils.flop_counter import FlopCounterMode
    from transformers.cache_utils import DynamicCache

    config = _small_text_config()
    indexer, rope = _indexer(config)
    cache = DynamicCache(config=config)
    x = torch.randn(1, seq, 64)
    pos = torch.arange(seq)[None]
    with torch.no_grad():
        if q < seq:
            cache.layers[0].update_index(torch.zeros(1, 1, seq - q, 16))
        counter = FlopCounterMode(display=False)
        with counter:
            indexer(x[:, -q:], rope(x[:, -q:], pos[:, -q:]), cache, pos[:, -q:])
    m = _small_model()
    flops, _ = block_indexer_cost(m, q, seq, 1, False, None, 16)
    assert sum(flops.values()) == counter.get_total_flops()


def test_core_flops_equal_flop_counter_on_the_chosen_blocks():
    """The attention over each query's chosen keys (gathered, GQA), against the engine's
    causal core less the indexer's scores."""
    _reference()
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    config = _small_text_config()
    indexer, rope = _indexer(config)
    seq, n_h, n_kv, d_h, block = 41, 4, 2, 16, 4
    x = torch.randn(1, seq, 64)
    pos = torch.arange(seq)[None]
    with torch.no_grad():
        chosen = indexer(x, rope(x, pos), None, pos)
    q = torch.randn(n_h, seq, d_h)
    k = torch.randn(n_kv, seq, d_h)
    v = torch.randn(n_kv, seq, d_h)
    counter = FlopCounterMode(display=False)
    with counter, torch.no_grad():
        for h in range(n_h):
            g = h // (n_h // n_kv)
            for j in range(seq):
                keys = sorted(
                    t
                    for b in chosen[0, g, j].tolist()
                    if b >= 0
                    for t in range(b * block, min((b + 1) * block, j + 1))
                )
                idx = torch.tensor(keys)
                scores = q[h, j : j + 1] @ k[g, idx].T
                torch.softmax(scores, -1) @ v[g, idx]
    m = _small_model()
    cost = mlacalc.attention_cost(m, "prefill", seq, causal=True)
    indexer_core = block_indexer_cost(m, seq, seq, 1, True, None, 16)[0]["core"]
    assert cost.stage_flops["core"] - indexer_core == counter.get_total_flops()


def test_decode_and_prefill_flops_by_the_rule():
    m = mlacalc.load_model(PATH)
    d, n_h, d_h = 6144, 64, 128
    cost = mlacalc.attention_cost(m, "decode", 32768)
    full = 3 * 4 * n_h * d_h * 32768
    sparse = 57 * (4 * n_h * d_h * 2048 + 2 * 4 * 128 * 32768)
    assert cost.stage_flops["core"] == full + sparse
    assert cost.stage_flops["q_proj"] == 60 * 2 * d * n_h * d_h + 57 * 2 * d * 4 * 128
    assert cost.stage_flops["kv_proj"] == 60 * 2 * d * 2 * 4 * d_h + 57 * 2 * d * 128


@pytest.mark.parametrize(
    ("key", "value", "field"),
    [
        ("sparse_block_size", 0, "sparse_attention_config.sparse_block_size"),
        ("sparse_block_size", "128", "sparse_attention_config.sparse_block_size"),
        ("sparse_topk_blocks", -1, "sparse_attention_config.sparse_topk_blocks"),
        ("sparse_topk_blocks", True, "sparse_attention_config.sparse_topk_blocks"),
        ("sparse_local_block", 0, "sparse_attention_config.sparse_local_block"),
        ("sparse_local_block", 17, "sparse_local_blocks"),
        ("sparse_num_index_heads", 2.5, "sparse_attention_config.sparse_num_index_heads"),
        ("sparse_index_dim", None, None),
        ("sparse_init_block", 1, "sparse_attention_config.sparse_init_block"),
        ("sparse_score_type", "mean", "sparse_attention_config.sparse_score_type"),
        ("use_sparse_attention", False, "sparse_attention_config.use_sparse_attention"),
        ("sparse_attention_freq", [1] * 59, "sparse_attention_config.sparse_attention_freq"),
        ("sparse_attention_freq", "all", "sparse_attention_config.sparse_attention_freq"),
        (
            "sparse_disable_index_value",
            [0] * 60,
            "sparse_attention_config.sparse_disable_index_value",
        ),
    ],
)
def test_malformed_sparse_fields_are_refused_by_name(key, value, field):
    data = _raw()
    data["sparse_attention_config"] = {**data["sparse_attention_config"], key: value}
    if field is None:  # null: the class default (128), as MiniMaxM3VLTextConfig reads it
        assert (import_hf_config(data)).sparse_index_dim == 128
        return
    with pytest.raises(ConfigError) as err:
        (import_hf_config(data, origin="m3.json"))
    assert err.value.field == field
    assert "\n" not in str(err.value).strip()


@pytest.mark.parametrize(
    ("key", "value", "field"),
    [
        ("sparse_attention_config", [1, 2], "sparse_attention_config"),
        ("moe_layer_freq", [1] * 59, "moe_layer_freq"),
        ("moe_layer_freq", [1, 0] * 30, "mlp_layer_types"),
        ("first_k_dense_replace", 2, "first_k_dense_replace"),
        ("moe_intermediate_size", 1536, "moe_intermediate_size"),
        ("n_shared_experts", 2, "n_shared_experts"),
        ("attention_output_gate", True, "attention_output_gate"),
        ("qk_norm_type", "per_layer", "qk_norm_type"),
        ("use_qk_norm", False, "use_qk_norm"),
    ],
)
def test_other_unmodelled_settings_are_refused_by_name(key, value, field):
    data = {**_raw(), key: value}
    with pytest.raises(ConfigError) as err:
        (import_hf_config(data, origin="m3.json"))
    assert err.value.field == field


def test_every_layer_full_without_sparse_layers():
    data = _raw()
    data["sparse_attention_config"] = {
        **data["sparse_attention_config"],
        "sparse_attention_freq": [0] * 60,
    }
    m = import_hf_config(data)
    assert m.sparse_block_size is None
    assert config_pattern(m).describe() == "60 layers: 60 full; FFN: 3 dense + 57 MoE"
    assert mlacalc.param_counts(m).total == TOTAL - 57 * (512 * 6144 + 128 * 6144 + 256)


def test_the_report_is_the_same_warm():
    # its speed warm is benchmarks/bench_report_warm.py's (a timing assert failed under load)
    from mlacalc.report import model_report

    cold = model_report("minimax-m3")
    warm = model_report("minimax-m3")
    assert warm == cold and warm["parameters"]["total"] == TOTAL


def test_defaults_follow_the_text_config_class():
    """Every class default the family fills in is MiniMaxM3VLTextConfig's."""
    _reference()
    from transformers.models.minimax_m3_vl.configuration_minimax_m3_vl import (
        MiniMaxM3VLTextConfig,
    )

    from mlacalc.models.hf import family_of
    from mlacalc.models.hf.minimax_m3 import INDEX_DEFAULTS

    cls = MiniMaxM3VLTextConfig()
    hf_names = {
        "n_routed_experts": "num_local_experts",
        "moe_intermediate_size": "intermediate_size",  # the class's expert width
    }
    for field, rule in family_of("minimax_m3").defaults.items():
        if field == "topk_method":
            continue  # not a class field: the router's correction bias, which it always holds
        assert rule.value == getattr(cls, hf_names.get(field, field)), field
    index = {
        "sparse_block_size": cls.index_block_size,
        "sparse_topk_blocks": cls.index_topk_blocks,
        "sparse_local_blocks": cls.index_local_blocks,
        "sparse_index_heads": cls.index_n_heads,
        "sparse_index_dim": cls.index_head_dim,
    }
    assert index == INDEX_DEFAULTS
    assert cls.dense_intermediate_size == 12288


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"sparse_index_dim": None}, "sparse_index_dim"),
        ({"sparse_local_blocks": 17}, "sparse_local_blocks"),
        ({"sparse_topk_blocks": 0}, "sparse_topk_blocks"),
        ({"sparse_attention_layers": [4, 61]}, "sparse_attention_layers"),
        ({"sliding_window": 4096}, "sliding_window"),
        (
            dict.fromkeys(
                (
                    "sparse_block_size",
                    "sparse_topk_blocks",
                    "sparse_local_blocks",
                    "sparse_index_heads",
                    "sparse_index_dim",
                )
            ),
            "sparse_attention_layers",
        ),
    ],
)
def test_bad_block_sparse_fields_of_a_model_file_are_refused(changes, field):
    shipped = mlacalc.load_model("minimax-m3")
    data = {**shipped.to_dict(), **changes}
    with pytest.raises(ConfigError) as err:
        mlacalc.model_from_dict(data, "minimax-m3.yaml")
    assert err.value.field == field
    assert "\n" not in str(err.value).strip()


def test_its_attention_as_other_designs():
    """MHA/GQA/MQA keep the block-sparse layers (other KV heads); MLA is refused by name."""
    from mlacalc.models.variants import as_variant

    m = mlacalc.load_model("minimax-m3")
    mqa = as_variant(m, "mqa")
    assert mqa.sparse_block_size == 128
    assert mlacalc.kv_cache(mqa, 4096).bytes_per_token == 3 * 512 + 57 * (512 + 256)
    with pytest.raises(mlacalc.InvalidArgumentError) as err:
        as_variant(m, "mla")
    assert err.value.argument == "variant"


def test_a_vision_language_wrapper_is_read_through_its_text_config():
    """A MiniMaxM3VLConfig file (model_type minimax_m3_vl, the language model in text_config
    as MiniMaxM3VLTextConfig writes it) gives the published file's counts; the vision tower
    is reported apart."""
    transformers = pytest.importorskip("transformers")
    direct = import_hf_config(_raw())
    text = {k: v for k, v in _as_text(_raw()).items() if k != "architectures"}
    wrapper = transformers.MiniMaxM3VLConfig(text_config=text).to_dict()
    assert wrapper["model_type"] == "minimax_m3_vl" and "vision_config" in wrapper
    model = import_hf_config(wrapper)
    assert mlacalc.param_counts(model).total == mlacalc.param_counts(direct).total
    for s in (1, 4096, 32768):
        assert mlacalc.kv_cache_bytes(model, s) == mlacalc.kv_cache_bytes(direct, s)
    assert any("vision tower is reported apart" in d for d in model.derived)


def test_block_sparse_indexer_key_follows_the_cache_dtype_in_kv_memory():
    """MiniMax-M3's indexer key is cached in the cache's own dtype (unlike a DSA model's, kept
    in fp8 with scales whatever the cache's): in an fp8 cache a block-sparse layer keeps K and V
    of 4 heads x 128 plus the 128-value key at one byte each (1,152 B a token), twice that in
    bf16, in the report and in the planner's per-GPU KV alike (a318589 had sized the key in
    bf16 beside an fp8 cache in both: 1,280 B, +32% on a TP8 sequence, while the kernels kept
    one byte)."""
    from mlacalc.report import cache_by_kind
    from mlacalc.serving.layout import kv_bytes_per_sequence_per_gpu, make_layout
    from mlacalc.serving.precision import resolve_kv_layout

    m = mlacalc.load_model("minimax-m3")
    for dtype, width in (("fp8", 1), ("bf16", 2)):
        row = (2 * 4 * 128 + 128) * width
        cache = mlacalc.kv_cache(m, 8192, 1, kv_dtype=dtype)
        kinds = {k["kind"]: k for k in cache_by_kind(m, cache)}
        assert kinds["msa"]["bytes"] == 57 * 8192 * row, dtype
    lay = make_layout(m, 8, tp=8)
    fp8 = kv_bytes_per_sequence_per_gpu(m, resolve_kv_layout("fp8"), lay, 8192, 16)
    bf16 = kv_bytes_per_sequence_per_gpu(m, resolve_kv_layout("bf16"), lay, 8192, 16)
    assert 2 * fp8 == bf16 == 371_195_904
