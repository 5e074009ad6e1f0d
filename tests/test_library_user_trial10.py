"""A researcher using mlacalc as a Python library (trial 10): numpy counts, a changed
config's identity, the errors and warnings a library user meets where the CLI says more."""

import numpy as np
import pytest

import mlacalc
from mlacalc import ConfigError, InvalidArgumentError
from mlacalc.models.variants import as_variant

V3 = mlacalc.load_model("deepseek-v3")


def test_numpy_integers_are_whole_numbers_everywhere():
    """The notebook loop ``for r in np.arange(128, 1025, 128): base.with_changes(
    kv_lora_rank=r)``. Before: with_changes refused np.int64(256) ("write a whole number such as
    kv_lora_rank: 128", wrong fix) and plan refused gpus=np.int64(8), while predict_time took
    them: one rule now (mlacalc.words.arguments.whole), stored as Python ints."""
    for rank in np.arange(128, 1025, 128):
        m = V3.with_changes(kv_lora_rank=rank)
        assert type(m.kv_lora_rank) is int and m.kv_lora_rank == int(rank)
    assert V3.with_changes(kv_lora_rank=np.int64(256)) == V3.with_changes(kv_lora_rank=256)
    data = dict(V3.to_dict(), name="np-v3", kv_lora_rank=np.int32(256))
    assert type(mlacalc.model_from_dict(data).kv_lora_rank) is int
    p = mlacalc.plan(V3, "B200", np.int64(8), tp=np.int64(8))
    assert p == mlacalc.plan(V3, "B200", 8, tp=8)
    assert as_variant(V3, "gqa", num_key_value_heads=np.int64(8)).num_key_value_heads == 8


@pytest.mark.parametrize("value", [np.float64(256), 256.0, True, np.True_])
def test_floats_and_booleans_are_still_no_whole_numbers(value):
    with pytest.raises(ConfigError, match="kv_lora_rank"):
        V3.with_changes(kv_lora_rank=value)
    with pytest.raises(InvalidArgumentError, match="gpus"):
        mlacalc.plan(V3, "B200", value)
