"""DeepSeek-V4's rules (:mod:`mlacalc.models.deepseek_v4`) against transformers' implementation.

Tensors (names and shapes) and parameters equal the checkpoint of ``DeepseekV4ForCausalLM``
built on the meta device from the published DeepSeek-V4-Pro config and from variations of it;
each layer's cache bytes equal the reference cache's tensors after meta forwards of ``S``
tokens (``S`` in 1, 4096, 32768); an attention layer of each kind, and a whole small model,
compute the FLOPs ``FlopCounterMode`` counts. Bad fields are refused naming the field.
"""

from __future__ import annotations

import pytest

from mlacalc.cost import compressed as cc
from mlacalc.models import deepseek_v4 as v4
from mlacalc.words.errors import ConfigError

PRO = "deepseek-ai--DeepSeek-V4-Pro"


def _reference():
    """The shared reference helpers; they need the optional extras torch and transformers
    (skipped with the extra's name when one is missing, as the core suite requires)."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    return pytest.importorskip("hf_reference_2")


def _pro() -> dict:
    ref = _reference()
    return ref.raw_config(PRO)


def _first(raw: dict, layers: int) -> dict:
    """The config with only its first ``layers`` layers (as the reference route builds)."""
    out = {**raw, "num_hidden_layers": layers}
    for key in ("compress_ratios", "layer_types", "mlp_layer_types"):
        if isinstance(out.get(key), list):
            out[key] = out[key][:layers]
    return out


def test_pro_parameters_published():
    """DeepSeek-V4-Pro: 1,572,999,528,803 parameters and buffers in the reference's checkpoint
    (MTP layer not built), the model card's "1.6T" to its rounding."""
    c = v4.read_config(_pro())
    assert v4.param_count(c) == 1_572_999_528_803
    assert round(v4.param_count(c) / 1e12, 1) == 1.6
    assert c.layer_types[:3] == (v4.HCA, v4.HCA, v4.CSA) and len(c.layer_types) == 61
    assert c.mlp_layer_types.count("hash_moe") == 3
    # a token: 6 of 384 experts in each of 61 layers; 48.85 B without the input embedding
    assert v4.active_param_count(c) == 49_781_408_099
    assert v4.active_param_count(c, embedding=False) == 49_781_408_099 - 129280 * 7168


def test_class_defaults_are_flash():
    """DeepseekV4Config's defaults (DeepSeek-V4-Flash-Base): 284 B, 13 B a token without the
    input embedding (docs/deepseek-v4.md)."""
    c = v4.read_config({"model_type": "deepseek_v4"})
    assert v4.param_count(c) == 284_328_206_295
    assert v4.active_param_count(c) == 13_795_598_295
    assert v4.active_param_count(c, embedding=False) == 13_266_067_415


VARIATIONS = {
    "pro": {},
    "tied, mlp bias": {"tie_word_embeddings": True, "mlp_bias": True},
    "listed types": {
        "layer_types": [v4.SLIDING, v4.CSA, v4.HCA, v4.SLIDING],
        "mlp_layer_types": ["moe", "hash_moe", "moe", "moe"],
        "compress_rates": {v4.CSA: 8, v4.HCA: 64, v4.SLIDING: 0},
    },
    "legacy rates": {"compress_rate_csa": 2, "compress_rate_hca": 32, "num_hash_layers": 1},
    "narrower": {
        "hc_mult": 3,
        "o_groups": 4,
        "num_hash_layers": 0,
        "sliding_window": 64,
        "index_n_heads": 32,
        "layer_types": [v4.HCA, v4.CSA, v4.CSA, v4.HCA, v4.CSA],
    },
    "class defaults": "defaults",
}


def _variation(name: str, layers: int = 4) -> dict:
    change = VARIATIONS[name]
    if change == "defaults":
        return {"model_type": "deepseek_v4", "num_hidden_layers": layers}
    return {**_first(_pro(), layers), **change}


@pytest.mark.parametrize("name", list(VARIATIONS))
def test_tensors_equal_reference(name):
    """Every tensor of the checkpoint, by name and shape, and the parameter total."""
    ref = _reference()
    data = _variation(name)
    model = ref.build(data)
    state = {k: tuple(v.shape) for k, v in model.state_dict(keep_vars=True).items()}
    c = v4.read_config(data)
    mine = dict(v4.tensors(c))
    if c.tie_word_embeddings:  # one tensor under two names in the reference
        assert state.pop("lm_head.weight") == state["model.embed_tokens.weight"]
    assert mine == state
    assert v4.param_count(c) == ref.param_count(model)


def test_pro_attention_flops_on_meta():
    """DeepSeek-V4-Pro's own widths: its first HCA and CSA layers' prefill of 4096 tokens
    counted by FlopCounterMode on the meta device (shapes only, 4 s)."""
    torch = pytest.importorskip("torch")
    ref = _reference()
    from torch.utils.flop_counter import FlopCounterMode  # deferred: torch is optional

    data = _first(_pro(), 3)
    model = ref.build(data)
    ids = torch.zeros(1, 4096, dtype=torch.long, device="meta")
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(input_ids=ids, use_cache=True)
    counts = {k: sum(v.values()) for k, v in counter.get_flop_counts().items()}
    c = v4.read_config(data)
    for i, kind in enumerate(c.layer_types):
        stages = cc.attention_flops(c, kind, 4096)
        got = counts[f"DeepseekV4ForCausalLM.model.layers.{i}.self_attn"]
        assert sum(v for k, v in stages.items() if k != "core_causal") == got


def test_whole_pro_equals_reference():
    """The whole 61-layer model (0.5 s on meta)."""
    ref = _reference()
    assert v4.param_count(v4.read_config(_pro())) == ref.param_count(ref.build(_pro()))


# the 32768-token forwards: slow (run with --runslow -m slow), as the other families' tests
@pytest.mark.parametrize("seq_len", [1, 5, 131, 4096, pytest.param(32768, marks=pytest.mark.slow)])
@pytest.mark.parametrize("name", ["pro", "listed types"])
def test_cache_equals_reference(name, seq_len):
    """Each layer's cache bytes after one forward (HCA, CSA and sliding layers, windows full
    and not, compressors with and without pending tokens)."""
    ref = _reference()
    data = _variation(name, 3 if name == "pro" else 4)
    got = [b for _, b in ref.cache_bytes(ref.build(data), seq_len)]
    mine = [sum(parts.values()) for parts in cc.cache_bytes(v4.read_config(data), seq_len)]
    assert mine == got


def test_cache_parts_and_engine_convention():
    """Pro at 32768 tokens: an HCA layer keeps 127 window rows, 256 pooled keys and nothing
    pending; a CSA layer adds 8192 indexer keys and the overlap; the engine's window is W."""
    c = v4.read_config(_pro())
    hca, _, csa = cc.cache_bytes(c, 32768)[:3]
    assert hca == {"window": 127 * 512 * 2, "compressed": 256 * 512 * 2, "pending": 0}
    assert csa == {
        "window": 127 * 1024,
        "compressed": 8192 * 1024,
        "indexer": 8192 * 128 * 2,
        "pending": 0,
        "overlap": 2 * 4 * (512 + 128) * 2,
    }
    totals = {s: sum(sum(p.values()) for p in cc.cache_bytes(c, s)) for s in (1, 4096, 32768)}
    assert totals == {1: 279_552, 4096: 48_577_536, 32768: 330_939_392}  # docs/deepseek-v4.md
    million = cc.cache_bytes(c, 1_048_576, convention="engine")
    assert sum(sum(p.values()) for p in million) == 10_334_679_040
    engine = cc.cache_bytes(c, 32768, convention="engine")
    assert engine[0]["window"] == 128 * 512 * 2
    assert cc.cache_bytes(c, 100, convention="engine")[0]["window"] == 100 * 512 * 2
    with pytest.raises(ValueError, match="convention"):
        cc.cache_bytes(c, 1, convention="vllm")


TINY = dict(
    model_type="deepseek_v4",
    vocab_size=100,
    hidden_size=64,
    moe_intermediate_size=16,
    num_hidden_layers=3,
    num_attention_heads=4,
    head_dim=32,
    q_lora_rank=16,
    num_experts_per_tok=2,
    n_routed_experts=4,
    hc_mult=2,
    sliding_window=8,
    o_groups=2,
    o_lora_rank=8,
    index_n_heads=2,
    index_head_dim=8,
    index_topk=3,
    layer_types=[v4.SLIDING, v4.CSA, v4.HCA],
    compress_rates={v4.CSA: 4, v4.HCA: 16},
    num_hash_layers=1,
)


@pytest.fixture(scope="module")
def tiny_flops():
    """FlopCounterMode's counts, by module, of a 40-token forward of a tiny model."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from torch.utils.flop_counter import FlopCounterMode  # deferred: torch is optional

    torch.manual_seed(0)
    config = transformers.DeepseekV4Config(
        **{k: v for k, v in TINY.items() if k != "model_type"}, experts_implementation="eager"
    )
    model = transformers.DeepseekV4ForCausalLM(config).eval()
    ids = torch.randint(0, 100, (1, 40))
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(input_ids=ids, use_cache=False)
    return {k: sum(v.values()) for k, v in counter.get_flop_counts().items()}


@pytest.mark.parametrize("layer", [0, 1, 2])
def test_attention_flops_equal_flop_counter(tiny_flops, layer):
    """A sliding, a CSA and an HCA attention layer (the eager reference's dense core)."""
    c = v4.read_config(TINY)
    stages = cc.attention_flops(c, c.layer_types[layer], 40)
    counted = tiny_flops[f"DeepseekV4ForCausalLM.model.layers.{layer}.self_attn"]
    assert sum(v for k, v in stages.items() if k != "core_causal") == counted


def test_forward_flops_equal_flop_counter(tiny_flops):
    c = v4.read_config(TINY)
    parts = cc.forward_flops(c, 40)
    assert sum(parts.values()) == tiny_flops["Global"]
    assert parts["moe"] == 3 * tiny_flops["DeepseekV4ForCausalLM.model.layers.0.mlp"]


def test_causal_core_counts_the_keys_a_query_may_see():
    """Sliding: min(j, W) keys; HCA adds j // 16 pooled keys; CSA at most index_topk (3)."""
    c = v4.read_config(TINY)
    per_key = 4 * 4 * 32
    window = sum(min(j, 8) for j in range(1, 41))
    assert cc.attention_flops(c, v4.SLIDING, 40)["core_causal"] == per_key * window
    hca = window + sum(j // 16 for j in range(1, 41))
    assert cc.attention_flops(c, v4.HCA, 40)["core_causal"] == per_key * hca
    csa = window + sum(min(j // 4, 3) for j in range(1, 41))
    assert cc.attention_flops(c, v4.CSA, 40)["core_causal"] == per_key * csa


BAD = {
    "compress_ratios": ([0, 4, 64], "compress_ratios"),
    "layer_types": (["full_attention"] * 3, "layer_types"),
    "mlp_layer_types": (["dense", "moe", "moe"], "mlp_layer_types"),
    "num_hash_layers": (-1, "num_hash_layers"),
    "num_nextn_predict_layers": (1.0, "num_nextn_predict_layers"),
    "compress_rates": ({v4.CSA: 0}, "compress_rates"),
    "sliding_window": (1, "sliding_window"),
    "compress_rate_hca": ("128", "compress_rates"),
    "n_shared_experts": (2, "n_shared_experts"),
    "num_key_value_heads": (8, "num_key_value_heads"),
    "o_groups": (3, "o_groups"),
    "hidden_size": (0, "hidden_size"),
    "head_dim": (True, "head_dim"),
    "index_topk": (None, "index_topk"),
    "hc_mult": (2.5, "hc_mult"),
    "num_experts_per_tok": (9, "num_experts_per_tok"),
    "tie_word_embeddings": ("no", "tie_word_embeddings"),
    "model_type": ("deepseek_v3", "model_type"),
}


@pytest.mark.parametrize("key", list(BAD))
def test_bad_field_refused_by_name(key):
    """Each bad value: one ConfigError, one line, naming the field."""
    value, field = BAD[key]
    data = {**TINY, key: value}
    if key == "compress_ratios":
        data.pop("layer_types")
    with pytest.raises(ConfigError) as err:
        v4.read_config(data, origin="v4.json")
    text = str(err.value)
    assert f"field '{field}'" in text and "v4.json" in text and "\n" not in text


def test_not_an_object_refused():
    with pytest.raises(ConfigError, match="JSON object"):
        v4.read_config([1, 2], origin="v4.json")


def test_short_per_layer_list_refused():
    data = {**TINY, "layer_types": [v4.CSA, v4.HCA]}
    with pytest.raises(ConfigError, match="layer_types"):
        v4.read_config(data)


@pytest.fixture(scope="module")
def tiny_model():
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.DeepseekV4Config(
        **{k: v for k, v in TINY.items() if k != "model_type"}, experts_implementation="eager"
    )
    return transformers.DeepseekV4ForCausalLM(config).eval()


def _held_bytes(obj, torch, seen: set[int]) -> int:
    """Bytes of the cache tensors reachable from one cache layer (each tensor once; scalars
    are bookkeeping), as the reference route counts them."""
    if isinstance(obj, torch.Tensor):
        if id(obj) in seen or obj.dim() < 2:
            return 0
        seen.add(id(obj))
        return obj.nbytes
    if isinstance(obj, dict):
        obj = list(obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(_held_bytes(v, torch, seen) for v in obj)
    return 0


@pytest.mark.parametrize(("context", "new"), [(3, 1), (5, 1), (37, 1), (39, 1), (30, 6)])
def test_cached_step_flops_and_cache_equal_reference(tiny_model, context, new):
    """A decode step or a chunk after ``context`` cached tokens (windows closing in the step
    and not): each attention layer's FLOPs equal FlopCounterMode's, and the cache then holds
    what one forward of ``context + new`` tokens leaves."""
    import torch  # deferred: torch is optional (the fixture skipped without it)
    from torch.utils.flop_counter import FlopCounterMode  # deferred: as above

    c = v4.read_config(TINY)
    with torch.no_grad():
        cache = tiny_model(input_ids=torch.zeros(1, context, dtype=torch.long)).past_key_values
        with FlopCounterMode(display=False) as counter:
            tiny_model(input_ids=torch.zeros(1, new, dtype=torch.long), past_key_values=cache)
    counts = {k: sum(v.values()) for k, v in counter.get_flop_counts().items()}
    for i, kind in enumerate(c.layer_types):
        stages = cc.attention_flops(c, kind, new, context=context)
        got = counts[f"DeepseekV4ForCausalLM.model.layers.{i}.self_attn"]
        assert sum(v for k, v in stages.items() if k != "core_causal") == got
    assert sum(cc.forward_flops(c, new, context).values()) == counts["Global"]
    held = [_held_bytes(vars(layer), torch, set()) for layer in cache.layers]
    mine = cc.cache_bytes(c, context + new, dtype_bytes=4)  # the tiny model runs in float32
    assert [sum(parts.values()) for parts in mine] == held


def test_no_field_ignored():
    """Every field DeepseekV4Config reads (its annotations and attribute_map, the legacy
    spellings its __post_init__ folds in) and every key of the published config is read
    here or listed, with its reason, as changing no count."""
    transformers = pytest.importorskip("transformers")
    cls = transformers.DeepseekV4Config
    fields = {f for f in cls.__annotations__ if not f.startswith("_")} | set(cls.attribute_map)
    legacy = {"compress_ratios", "compress_rate_csa", "compress_rate_hca", "num_hash_layers"}
    export = {"architectures", "transformers_version", "torch_dtype", "model_type"}
    known = set(v4.DEFAULTS) | set(v4.READ) | set(v4.IRRELEVANT) | export
    assert not (fields | legacy | {"qk_rope_head_dim"}) - known
    assert not set(_pro()) - known


@pytest.mark.parametrize(("alias", "field"), list(v4.ALIASES.items()))
def test_aliases_read_as_the_class_maps_them(alias, field):
    ref = _reference()
    data = {**_first(_pro(), 2), alias: 64}
    data.pop(field)
    c = v4.read_config(data)
    assert v4.param_count(c) == ref.param_count(ref.build(data))
    assert getattr(c, field) == 64
    with pytest.raises(ConfigError, match=alias):
        v4.read_config({**_first(_pro(), 2), alias: 64})
