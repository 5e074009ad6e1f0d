"""Kimi-K3 (``kimi_k3``) is refused with its reason, and so is its text model read as Kimi Linear.

Kimi-K3's config wraps a ``kimi_linear`` text config that adds a latent MoE
(``routed_expert_hidden_size``), attention residuals (``attn_res_block_size``) and an output
gate on its MLA layers (``mla_use_output_gate``). transformers' Kimi Linear reads none of them,
so counting the text config as Kimi Linear would give another model's figures without a word.
Both routes are refused in one line naming the field; the check against transformers' source
keeps the reason from going stale: once its Kimi Linear reads one of the fields, this fails.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from reference_data import HF_CONFIGS_2

import mlacalc
from mlacalc import MlacalcError

_K3 = "moonshotai--Kimi-K3.config.json"
_K3_FIELDS = ("routed_expert_hidden_size", "attn_res_block_size", "mla_use_output_gate")


def _text_config() -> dict:
    text = json.loads((HF_CONFIGS_2 / _K3).read_text(encoding="utf-8"))["text_config"]
    text.pop("quantization_config")  # its mxfp4 groups are refused on their own
    return text


def test_a_kimi_k3_file_is_refused_with_its_reason():
    with pytest.raises(MlacalcError) as err:
        mlacalc.import_hf_config(json.loads((HF_CONFIGS_2 / _K3).read_text(encoding="utf-8")))
    text = str(err.value)
    assert "'kimi_k3' is not modelled" in text and "latent MoE" in text
    assert "did you mean" not in text and "\n" not in text


@pytest.mark.parametrize("field", _K3_FIELDS)
def test_each_k3_field_in_a_kimi_linear_config_is_refused_by_name(field):
    config = _text_config()
    for other in _K3_FIELDS:
        if other != field:
            config.pop(other)
    with pytest.raises(MlacalcError) as err:
        mlacalc.import_hf_config(config)
    text = str(err.value)
    assert f"field '{field}'" in text and "not modelled" in text and "\n" not in text


def test_without_the_k3_fields_the_text_config_is_plain_kimi_linear():
    config = _text_config()
    for field in _K3_FIELDS:
        config.pop(field)
    model = mlacalc.import_hf_config(config)
    assert model.num_hidden_layers == 93 and model.n_routed_experts == 896
    # harmless values of the fields load too: no gate, experts as wide as the model
    config.update(mla_use_output_gate=False, routed_expert_hidden_size=config["hidden_size"])
    assert mlacalc.import_hf_config(config).n_routed_experts == 896


def test_transformers_kimi_linear_reads_none_of_the_k3_fields():
    spec = importlib.util.find_spec("transformers")  # located, not imported (no torch start-up)
    if spec is None or spec.origin is None:
        pytest.skip("could not import 'transformers': the installed reference package is read")
    folder = Path(spec.origin).parent / "models" / "kimi_linear"
    source = "".join(p.read_text(encoding="utf-8") for p in sorted(folder.glob("*.py")))
    assert "class KimiLinearConfig" in source
    assert [f for f in _K3_FIELDS if f in source] == []


def test_only_each_fields_own_harmless_value_loads():
    """Experts as wide as the model are no latent MoE; an attention-residual block or an
    output gate of any stated value is refused, even one that equals hidden_size."""
    config = _text_config()
    for field in _K3_FIELDS:
        config.pop(field)
    for field, value in (
        ("attn_res_block_size", config["hidden_size"]),
        ("mla_use_output_gate", True),
    ):
        with pytest.raises(MlacalcError, match=f"field '{field}'"):
            mlacalc.import_hf_config({**config, field: value})
