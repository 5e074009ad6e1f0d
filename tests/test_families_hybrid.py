"""The hybrid families of issue 24 (gated DeltaNet, Mamba-2 state-space layers, ...) against
the Hugging Face implementations built on the meta device.

Parameters of every shared config of these families equal the reference's, to the parameter;
each layer's cache (or state) bytes equal the reference cache's tensors after meta forwards
of ``S`` tokens (``S`` in 1, 4096, 32768; the long forwards on the first layers only, since a
layer's cache does not depend on the layers after it).
"""

from __future__ import annotations

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

import hf_reference_2 as ref

from mlacalc import kv_cache_bytes, param_counts
from mlacalc.models.architecture import layer_pattern
from mlacalc.models.hf import import_hf_config
from mlacalc.models.patterns import cache_spec

# the 32768-token forwards of a gated DeltaNet layer cost seconds on meta tensors: slow
SEQ_LENS = (1, 4096, pytest.param(32768, marks=pytest.mark.slow))

#: shared configs of the families, by family
SHARED = {
    "qwen3_5": ("Qwen--Qwen3.5-35B-A3B", "Qwen--Qwen3.5-122B-A10B", "nvidia--Qwen3.6-27B-NVFP4"),
    "nemotron_h": (
        "nvidia--NVIDIA-Nemotron-3-Super-120B-A12B-FP8",
        "nvidia--NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16",
        "nvidia--NVIDIA-Nemotron-3.5-Lightning-30B-A3B-NVFP4",
    ),
}
NAMES = [n for names in SHARED.values() for n in names]


def _load(data: dict):
    """The model as mlacalc imports the config (its checkpoint scheme aside: the reference is
    built without one)."""
    return import_hf_config({k: v for k, v in data.items() if k != "quantization_config"})


@pytest.mark.parametrize("name", NAMES)
def test_params_equal_reference(name):
    """The whole text model's parameters equal the reference's."""
    model = _load(ref.raw_config(name))
    assert param_counts(model).total == ref.named_param_count(name)


@pytest.mark.parametrize("seq_len", SEQ_LENS)
@pytest.mark.parametrize("name", NAMES)
def test_layer_cache_equals_reference(name, seq_len):
    """Each of the first layers (one of every kind) holds the reference cache's bytes."""
    data = ref.raw_config(name)
    model = _load(data)
    pattern = layer_pattern(model)
    kinds = [k.attention for k in pattern.layers]
    layers = max(kinds.index(k) for k in set(kinds)) + 1
    per_layer = ref.cache_bytes(ref.named_build(name, layers), seq_len)
    spec = cache_spec(model)
    for i, (_, nbytes) in enumerate(per_layer):
        assert nbytes == spec.layer_bytes(pattern.layers[i], seq_len, convention="hf"), (name, i)


#: whole-model forwards cost seconds each; one config of each family runs by default
_WHOLE_FAST = ("Qwen--Qwen3.5-122B-A10B", "nvidia--NVIDIA-Nemotron-3.5-Lightning-30B-A3B-NVFP4")


@pytest.mark.parametrize(
    "name",
    [n if n in _WHOLE_FAST else pytest.param(n, marks=pytest.mark.slow) for n in NAMES],
)
def test_whole_model_state_equals_reference(name):
    """kv_cache_bytes of the whole model after one token equals the reference cache's."""
    data = ref.raw_config(name)
    per_layer = ref.cache_bytes(ref.named_build(name), 1)
    assert kv_cache_bytes(_load(data), 1) == sum(b for _, b in per_layer)
