"""MiMo-V2-Flash (``mimo_v2_flash``) is refused with its reason, and the reason is true.

The product does not model it yet (docs/model-families.md): its value heads are narrower than
its query/key heads, its sliding layers hold twice the KV heads of the full ones and attention
sinks. A file of the type is refused in one line naming ``model_type`` and what is missing, not
offered ``mimo`` (MiMo-7B) as a look-alike. The structure the reason states is checked against
transformers' ``MiMoV2FlashForCausalLM`` on the ``meta`` device, so the refusal cannot go stale
silently.
"""

from __future__ import annotations

import pytest

import mlacalc
from mlacalc import MlacalcError

_FILE = {
    "model_type": "mimo_v2_flash",
    "hidden_size": 4096,
    "num_hidden_layers": 48,
    "num_attention_heads": 64,
    "num_key_value_heads": 4,
    "head_dim": 192,
    "v_head_dim": 128,
    "vocab_size": 152576,
    "intermediate_size": 16384,
}


def test_a_mimo_v2_flash_file_is_refused_with_its_reason():
    with pytest.raises(MlacalcError) as err:
        mlacalc.import_hf_config(_FILE)
    text = str(err.value)
    assert "model_type" in text and "not modelled" in text and "v_head_dim" in text
    assert "did you mean" not in text and "\n" not in text


def test_the_reason_matches_the_reference():
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    config = transformers.MiMoV2FlashConfig(num_hidden_layers=7, n_routed_experts=4)
    with torch.device("meta"):
        model = transformers.MiMoV2FlashForCausalLM(config)
    d, n_h, n_kv = config.hidden_size, config.num_attention_heads, config.num_key_value_heads
    assert (config.head_dim, config.v_head_dim) == (192, 128)
    full = [i for i, t in enumerate(config.layer_types) if t == "full_attention"]
    assert full == [0, 5]  # the first and every 6th (1-based)
    for i, layer in enumerate(model.model.layers):
        attn = layer.self_attn
        kv = n_kv if i in full else 2 * n_kv
        assert attn.k_proj.weight.shape == (kv * 192, d)
        assert attn.v_proj.weight.shape == (kv * 128, d)
        assert attn.o_proj.weight.shape == (d, n_h * 128)
        assert (attn.sinks is None) == (i in full)
