"""Every vendored config.json against the Hugging Face implementation built on the meta device.

For each config in ``tests/data/hf-configs/`` whose ``model_type`` transformers
implements, the model is built from the config alone (no weights, every tensor on
``meta``), and a forward of ``S`` tokens (``S`` in 1, 4096, 32768) on meta tensors
fills its cache. Checked, to the parameter and to the byte:

- the per-layer pattern (``mlacalc.models.patterns.layer_pattern``) against the reference's
  cache layer classes, and each layer's cache bytes against ``CacheSpec`` in the
  reference's convention (a sliding window keeps ``W - 1`` tokens there);
- ``param_counts(...).total`` and ``kv_cache_bytes`` of every config mlacalc loads;
  a config it does not load is refused with an error naming its ``model_type``.

Linear-attention models run the 32768-token forward on their first layers only (the
reference's chunked recurrence on meta tensors costs about a second per layer there):
a layer's cache does not depend on the layers after it, and the whole-model check at
1 and 4096 tokens covers every layer.

The default run checks every config at 1 token and, except linear-attention models, at 4096;
``--runslow`` (CI's slow step) adds 32768 tokens everywhere and 4096 for linear attention,
whose forwards there take seconds each.
"""

from __future__ import annotations

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

import hf_reference as ref

import mlacalc
from mlacalc.models.patterns import cache_spec, layer_pattern
from mlacalc.words.errors import ConfigError

NAMES = [p.name.removesuffix(".config.json") for p in ref.config_files()]
IMPLEMENTED = [n for n in NAMES if ref.implemented(n)]
SEQ_LENS = (1, 4096, 32768)


def _is_linear(name: str) -> bool:
    return any(k.attention == "linear" for k in layer_pattern(ref.raw_config(name)).layers)


def _cases() -> list:
    """(name, seq_len) pairs; the long forwards marked slow (see the module's docstring)."""
    out = []
    for name in IMPLEMENTED:
        for seq_len in SEQ_LENS:
            slow = seq_len > 4096 or (seq_len == 4096 and _is_linear(name))
            out.append(pytest.param(name, seq_len, marks=pytest.mark.slow if slow else ()))
    return out


CASES = _cases()

# cache layer class of the reference -> attention kinds it holds
_CLASSES = {
    "DynamicLayer": {"full", "mla"},
    "DynamicSlidingWindowLayer": {"sliding", "chunked"},
    "DynamicIndexedLayer": {"dsa"},
    "LinearAttentionLayer": {"linear"},
}


def _prefix(name: str, seq_len: int) -> int | None:
    """Layers to run at ``seq_len``: all, or up to the first full layer of a linear model."""
    pattern = layer_pattern(ref.raw_config(name))
    kinds = [k.attention for k in pattern.layers]
    if seq_len > 4096 and "linear" in kinds:
        return next(i for i, k in enumerate(kinds) if k != "linear") + 1
    return None


def _text(name: str) -> dict:
    from mlacalc.models.patterns import text_config

    return text_config(ref.raw_config(name))


@pytest.mark.parametrize("name", IMPLEMENTED)
def test_pattern_matches_reference_cache_layers(name):
    """Each layer's kind agrees with the cache layer the reference allocates for it."""
    pattern = layer_pattern(ref.raw_config(name))
    _, per_layer = ref.cache_bytes(name, 1)
    assert len(per_layer) == pattern.num_layers
    for i, ((cls, _), kind) in enumerate(zip(per_layer, pattern.layers)):
        assert kind.attention in _CLASSES[cls], (name, i, cls, kind)


@pytest.mark.parametrize(("name", "seq_len"), CASES)
def test_layer_cache_bytes_match_reference(name, seq_len):
    """Per-layer cache bytes, reference convention, equal the reference's tensors' nbytes."""
    raw = _text(name)
    pattern = layer_pattern(raw)
    spec = cache_spec(raw)
    layers = _prefix(name, seq_len)
    _, per_layer = ref.cache_bytes(name, seq_len, layers)
    for i, (_, nbytes) in enumerate(per_layer):
        assert nbytes == spec.layer_bytes(pattern.layers[i], seq_len, convention="hf"), (name, i)


def _loaded(name: str):
    """The model as mlacalc loads the config, or None where it refuses the model type by name."""
    path = ref.CONFIG_DIR / f"{name}.config.json"
    try:
        return mlacalc.load_model(path)
    except ConfigError as exc:
        model_type = ref.raw_config(name).get("model_type")
        assert model_type in str(exc), f"refusal of {name} does not name {model_type}: {exc}"
        return None


@pytest.mark.parametrize("name", IMPLEMENTED)
def test_param_counts_match_reference(name):
    """mlacalc's total equals the reference's parameters (or the type is refused by name)."""
    model = _loaded(name)
    if model is None:
        pytest.skip(f"{name}: model_type not supported yet (refused by name)")
    assert mlacalc.param_counts(model).total == ref.param_count(name)


@pytest.mark.parametrize(("name", "seq_len"), CASES)
def test_kv_cache_bytes_match_reference(name, seq_len):
    """mlacalc's KV bytes equal the reference cache's bytes after a forward of seq_len tokens."""
    model = _loaded(name)
    if model is None:
        pytest.skip(f"{name}: model_type not supported yet (refused by name)")
    raw = _text(name)
    if _prefix(name, seq_len) is not None:
        pytest.skip("linear-attention model: whole-model check at 1 and 4096 tokens")
    total, _ = ref.cache_bytes(name, seq_len)
    ours = mlacalc.kv_cache_bytes(model, seq_len)
    pattern = layer_pattern(raw)
    if any(k.attention == "dsa" and k.indexer for k in pattern.layers):
        # the reference holds a DSA layer's indexer key in the cache's dtype, the engines (and
        # mlacalc) in fp8 with a float32 scale a 128 values
        ours = sum(cache_spec(raw).model_bytes(pattern, seq_len, convention="hf").values())
        assert mlacalc.kv_cache_bytes(model, seq_len) == sum(
            cache_spec(raw).model_bytes(pattern, seq_len).values()
        )
    elif not pattern.is_uniform or any(k.window for k in pattern.layers):
        # product convention keeps W tokens of a sliding layer, the reference W - 1
        ours = sum(cache_spec(raw).model_bytes(pattern, seq_len, convention="hf").values())
        assert mlacalc.kv_cache_bytes(model, seq_len) == sum(
            cache_spec(raw).model_bytes(pattern, seq_len).values()
        )
    assert ours == total


@pytest.mark.parametrize("name", ["gpt-oss-120b", "minimax-m2.5", "deepseek-v3", "kimi-k2.5"])
def test_quantized_bytes_match_reference_tensors(name):
    """The checkpoint bytes of the product's tensor list equal those of the reference
    model's own tensors (roles from its module types) under the config's scheme."""
    from mlacalc.cost.quant import quantization_scheme, quantized_weight_bytes
    from mlacalc.models.tensors import tensors

    raw = ref.raw_config(name)
    scheme = quantization_scheme(raw)
    ours = quantized_weight_bytes(tensors(_loaded(name)), scheme)
    reference = ref.weight_tensors(name)
    theirs = quantized_weight_bytes(reference, scheme)
    # the reference fuses each expert's gate and up matrices; the checkpoint stores them
    # apart, and packed-integer schemes keep one int32 shape pair (8 bytes) per matrix
    fused = sum(t.shape[0] for t in reference if t.name.endswith("experts.gate_up_proj"))
    shape_pairs = 8 * fused if scheme.method.startswith("int") else 0
    assert (ours.payload_bytes, ours.scale_bytes, ours.kept_params) == (
        theirs.payload_bytes,
        theirs.scale_bytes + shape_pairs,
        theirs.kept_params,
    )


def _layout_facts(model) -> tuple[bool, bool, bool]:
    """What a reference model's modules say: one fused Q/K/V tensor (``c_attn``,
    ``query_key_value``) in its first layer; its first layer's own norms all LayerNorms with
    a bias; a gate in some MLP or expert (``gate_proj``, ``gate_up_proj``, Mixtral's ``w1``
    and ``w3``)."""
    import re

    layer = next(m for n, m in model.named_modules() if re.search(r"(layers|\.h)\.0$", n))
    keys = [k for k, _ in layer.named_parameters()]
    fused = any(re.search(r"(c_attn|query_key_value)\.weight$", k) for k in keys)
    norms = [c for _, c in layer.named_children() if "norm" in type(c).__name__.lower()]
    biased = bool(norms) and all(getattr(c, "bias", None) is not None for c in norms)
    names = [k for k, _ in model.named_parameters()]
    gated = any(re.search(r"gate_(up_)?proj|gate_up|\.w[13]\b", k) for k in names)
    return fused, biased, gated


@pytest.mark.parametrize("name", IMPLEMENTED)
def test_layout_facts_match_the_reference(name):
    """fused_qkv, layer_norm and gated_mlp of every vendored config against its modules."""
    try:
        m = mlacalc.import_hf_config(ref.raw_config(name))
    except ConfigError:
        pytest.skip("not loaded (test_param_counts_match_reference checks the refusal)")
    assert (m.fused_qkv, m.layer_norm, m.gated_mlp) == _layout_facts(ref.build(name, 2))


@pytest.mark.parametrize("model_type", ["starcoder2", "nemotron_h"])
def test_layout_facts_match_the_reference_class_defaults(model_type):
    """The same for two families no vendored config covers: StarCoder2 (Falcon's layout, its
    own q/k/v), Nemotron-H (RMSNorms, MLPs of up and down only)."""
    import torch
    from transformers import CONFIG_MAPPING, AutoModelForCausalLM

    config = CONFIG_MAPPING[model_type]()
    m = mlacalc.import_hf_config(config.to_dict())
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    assert (m.fused_qkv, m.layer_norm, m.gated_mlp) == _layout_facts(model)
