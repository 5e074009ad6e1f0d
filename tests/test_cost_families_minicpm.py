"""MiniCPM (``minicpm``, remote code): the Llama rule of its published modeling code.

transformers has no MiniCPM class, so the independent route is the Llama model that the
rule says MiniCPM is (same widths, heads, layers, vocabulary and head tying), built on
the ``meta`` device: its parameters and the cache a forward of ``S`` tokens leaves must
equal what mlacalc gives the MiniCPM config. The card's 2.7B is the tied layout.
"""

from __future__ import annotations

import json

import pytest
from reference_data import HF_CONFIGS

import mlacalc

CONFIG = HF_CONFIGS / "minicpm-2b.config.json"

V, D, L, FFN = 122_760, 2_304, 40, 5_760
LAYER = 4 * D * D + 3 * D * FFN + 2 * D  # q, k, v, o (36 heads x 64, MHA), gated MLP, 2 norms
TIED = V * D + L * LAYER + D  # 2,724,897,024


def _data(**changes) -> dict:
    data = json.loads(CONFIG.read_text(encoding="utf-8"))
    data.update(changes)
    return {k: v for k, v in data.items() if v is not None}


def test_counts_by_hand():
    """The published config states an untied head: the tied count plus one V x d table."""
    m = mlacalc.load_model(CONFIG)
    assert (m.model_type, m.head_dim, m.num_key_value_heads) == ("minicpm", 64, 36)
    assert not m.tie_word_embeddings
    p = mlacalc.param_counts(m)
    assert TIED == 2_724_897_024
    assert p.total == TIED + V * D == 3_007_736_064
    assert p.breakdown["lm_head"] == V * D
    assert mlacalc.kv_cache_bytes(m, 4096) == 2 * L * 36 * 64 * 2 * 4096


def test_absent_tie_defaults_to_the_shared_table():
    """Without ``tie_word_embeddings`` the MiniCPMConfig default (true) applies, and is noted."""
    m = mlacalc.import_hf_config(_data(tie_word_embeddings=None))
    assert m.tie_word_embeddings
    assert any(d.startswith("tie_word_embeddings = True") for d in m.derived)
    assert mlacalc.param_counts(m).total == TIED


def test_card_figure_is_the_tied_layout():
    """The card's 2.7B (SOURCES.md) is the tied count; the untied config is 3.0B."""
    tied = mlacalc.param_counts(mlacalc.import_hf_config(_data(tie_word_embeddings=True)))
    untied = mlacalc.param_counts(mlacalc.load_model(CONFIG))
    assert round(tied.total / 1e9, 1) == 2.7
    assert round(untied.total / 1e9, 1) == 3.0
    assert untied.total - tied.total == V * D


def test_scalings_change_no_count():
    """``scale_emb``, ``dim_model_base`` and ``scale_depth`` scale activations only."""
    base = mlacalc.param_counts(mlacalc.load_model(CONFIG)).total
    other = mlacalc.import_hf_config(_data(scale_emb=1, dim_model_base=1, scale_depth=1.0))
    assert mlacalc.param_counts(other).total == base


def _llama(tie: bool):
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from transformers import AutoModelForCausalLM, LlamaConfig

    config = LlamaConfig(
        vocab_size=V,
        hidden_size=D,
        intermediate_size=FFN,
        num_hidden_layers=L,
        num_attention_heads=36,
        num_key_value_heads=36,
        tie_word_embeddings=tie,
        max_position_embeddings=65_536,
    )
    with torch.device("meta"):
        return AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)


@pytest.mark.parametrize("tie", [False, True])
def test_parameters_equal_the_llama_reference(tie):
    """Parameters equal those of the equivalent Llama built on the meta device (a tied
    table counted once)."""
    model = _llama(tie)
    unique = {id(p): p.numel() for p in model.parameters()}
    m = mlacalc.import_hf_config(_data(tie_word_embeddings=tie))
    assert mlacalc.param_counts(m).total == sum(unique.values())


@pytest.mark.parametrize("seq_len", [1, 4096])
def test_cache_equals_the_llama_reference(seq_len):
    """KV bytes equal the nbytes of the Llama reference's cache after ``seq_len`` tokens."""
    torch = pytest.importorskip("torch")
    model = _llama(False)
    ids = torch.zeros(1, seq_len, dtype=torch.long, device="meta")
    with torch.no_grad():
        cache = model(input_ids=ids, use_cache=True).past_key_values
    nbytes = sum(layer.keys.nbytes + layer.values.nbytes for layer in cache.layers)
    assert mlacalc.kv_cache_bytes(mlacalc.load_model(CONFIG), seq_len) == nbytes
