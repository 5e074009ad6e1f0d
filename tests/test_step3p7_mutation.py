"""Mutation suite of Step-3.7-Flash's config.json keys (``step3p7``).

Each mutation of the vendored Step-3.7-Flash file (a key the family reads given a wrong type,
a value the product does not model, a per-layer list of the wrong length or content) is one
``MlacalcError`` line naming the key, never a traceback or a silent look-alike; a mutation the
class reads as the same model loads with the same figures. The raw-dict route
(:func:`mlacalc.models.patterns.layer_pattern`) names the key too.
"""

from __future__ import annotations

import json

import pytest
from reference_data import HF_CONFIGS_2

import mlacalc
from mlacalc import MlacalcError
from mlacalc.models.architecture import layer_pattern
from mlacalc.models.hf.step3p7 import FAMILY
from mlacalc.models.patterns import layer_pattern as raw_pattern

PATH = HF_CONFIGS_2 / "stepfun-ai--Step-3.7-Flash.config.json"
BASE = json.loads(PATH.read_text(encoding="utf-8"))
N = BASE["num_hidden_layers"]
_RENAMES = FAMILY.renames

BAD = [
    ("gating", "elementwise"),
    ("gating", None),
    ("gating", 3),
    ("num_sliding_attention_heads", 32),
    ("num_sliding_attention_heads", "many"),
    ("attention_other_setting", "sliding"),
    ("attention_other_setting", {"num_attention_heads": 16}),
    ("sparse_attention_config", [1, 2]),
    ("sparse_attention_config", {"sparse_num_index_heads": 4}),
    ("use_bidirectional_attention", "yes"),
    ("use_bidirectional_attention", True),
    ("moe_layers_enum", 5),
    ("moe_layers_enum", "three"),
    ("moe_layers_enum", "0,5,6"),
    ("moe_layers_enum", [[1]]),
    ("mlp_bias", True),
    ("mlp_layer_types", "sparse"),
    ("mlp_layer_types", ["moe"] * N),
    ("mlp_layer_types", ["sparse", "dense"] + ["sparse"] * (N - 2)),
    ("layer_types", "full_attention"),
    ("layer_types", ["full_attention"] * (N - 1)),
    ("layer_types", ["linear_attention"] * N),
    ("layer_types", [None] * N),
    ("layer_types", [["full_attention"]] * N),
    ("sliding_window", None),
    ("sliding_window", "wide"),
    ("sliding_window", -4),
    ("share_expert_dim", -1),
    ("share_expert_dim", "big"),
    ("num_experts", 0.5),
    ("head_dim", "128"),
]


@pytest.mark.parametrize(("key", "value"), BAD, ids=[f"{k}={v!r}"[:60] for k, v in BAD])
def test_a_bad_value_is_one_line_naming_the_key(key, value):
    data = {**BASE, key: value}
    with pytest.raises(MlacalcError) as err:
        mlacalc.import_hf_config(data)
    text = str(err.value)
    assert key in text or _RENAMES.get(key, key) in text, text  # the file's key or its field
    assert "\n" not in text and "Traceback" not in text


SAME = [
    ("gating", "per-head"),
    ("num_sliding_attention_heads", 64),
    ("attention_other_setting", {"num_attention_heads": 64}),
    ("use_bidirectional_attention", False),
    ("moe_layers_enum", ",".join(str(i) for i in range(3, N))),
    ("moe_layers_enum", list(range(3, N + 3))),  # indices of the MTP layers: ignored
    ("mlp_layer_types", ["dense"] * 3 + ["sparse"] * (N - 3)),
    ("layer_types", BASE["layer_types"] + ["full_attention"] * 3),  # the MTP pad: dropped
    ("first_k_dense_replace", 7),  # not read by Step3p7TextConfig
    ("use_moe_router_bias", False),  # not read: the class always holds the bias
    ("swiglu_limits", [0.0] * N),
]


@pytest.mark.parametrize(("key", "value"), SAME, ids=[f"{k}={v!r}"[:60] for k, v in SAME])
def test_a_mutation_the_class_reads_alike_changes_nothing(key, value):
    base = mlacalc.load_model(PATH)
    model = mlacalc.import_hf_config({**BASE, key: value})
    assert mlacalc.param_counts(model).total == mlacalc.param_counts(base).total
    assert layer_pattern(model) == layer_pattern(base)
    assert mlacalc.kv_cache_bytes(model, 8192) == mlacalc.kv_cache_bytes(base, 8192)
    assert raw_pattern({**BASE, key: value}) == layer_pattern(base)


@pytest.mark.parametrize("value", [5, "three", [[1]]])
def test_the_raw_route_names_moe_layers_enum(value):
    with pytest.raises(MlacalcError) as err:
        raw_pattern({**BASE, "moe_layers_enum": value})
    assert "moe_layers_enum" in str(err.value)
