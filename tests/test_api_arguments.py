"""Every public function of the calculator core checks its arguments before any arithmetic.

A property-based test replaces one argument of a valid call with a wrong type or an extreme
value and asserts: the call returns a result, or raises an ``MlacalcError`` that names an
argument of the call; no other exception, no case slower than a second.
"""

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mlacalc
from mlacalc import (
    ConfigError,
    InvalidArgumentError,
    MlacalcError,
    UnknownDtypeError,
    UnknownHardwareError,
    UnknownModelError,
)
from mlacalc.cost.model_step import step_kernels
from mlacalc.models.variants import as_variant
from mlacalc.timemodel.insight import absorption_crossover, compute_bound_seq_len, ridge_point
from mlacalc.words.arguments import count

V3 = mlacalc.load_model("deepseek-v3")

#: function -> a valid call, every argument by name
CALLS = {
    "param_counts": (mlacalc.param_counts, {"model": V3}),
    "weight_bytes": (mlacalc.weight_bytes, {"model": V3, "dtype": "fp8", "include_mtp": False}),
    "attention_params": (mlacalc.attention_params, {"model": "llama-3-8b"}),
    "kv_cache": (
        mlacalc.kv_cache,
        {
            "model": V3,
            "seq_len": 4096,
            "batch": 8,
            "kv_dtype": "bf16",
            "impl": None,
            "include_mtp": False,
        },
    ),
    "kv_cache_bytes": (
        mlacalc.kv_cache_bytes,
        {
            "model": V3,
            "seq_len": 4096,
            "batch": 8,
            "kv_dtype": "fp8_ds_mla",
            "impl": "absorbed",
            "include_mtp": True,
        },
    ),
    "attention_flops": (
        mlacalc.attention_flops,
        {
            "model": V3,
            "phase": "chunk",
            "seq_len": 4096,
            "batch": 2,
            "q_len": 128,
            "impl": None,
            "causal": True,
        },
    ),
    "attention_cost": (
        mlacalc.attention_cost,
        {
            "model": "llama-3-8b",
            "phase": "decode",
            "seq_len": 4096,
            "batch": 8,
            "q_len": None,
            "impl": None,
            "causal": False,
            "kv_dtype": "fp8",
            "weight_dtype": None,
            "act_dtype": "bf16",
        },
    ),
    "attended_pairs": (
        mlacalc.attended_pairs,
        {"q": 16, "seq_len": 4096, "window": 1024, "causal": True},
    ),
    "formula": (
        mlacalc.formula,
        {
            "quantity": "kv_cache_bytes",
            "variant": "gqa",
            "impl": None,
            "phase": None,
            "stage": None,
            "causal": False,
            "q_lora": True,
            "bias": False,
            "rope": True,
        },
    ),
    "sweep": (
        mlacalc.sweep,
        {
            "model": V3,
            "quantity": "attention_flops",
            "seq_len": np.array([1, 4096]),
            "batch": 4,
            "phase": "decode",
            "q_len": None,
            "impl": None,
            "causal": False,
            "kv_dtype": "bf16",
            "weight_dtype": None,
            "act_dtype": "bf16",
            "kv_lora_rank": np.array([256, 512]),
        },
    ),
    "as_variant": (
        as_variant,
        {
            "model": V3,
            "variant": "gqa",
            "num_key_value_heads": 8,
            "kv_lora_rank": None,
            "qk_rope_head_dim": None,
            "q_lora_rank": None,
        },
    ),
    "ridge_point": (ridge_point, {"hardware": "H200", "dtype": "bf16"}),
    "compute_bound_seq_len": (
        compute_bound_seq_len,
        {"model": V3, "hardware": "H200", "batch": 1, "dtype": "bf16", "kv_dtype": None},
    ),
    "absorption_crossover": (absorption_crossover, {"model": V3, "seq_len": None}),
    "step_kernels": (
        step_kernels,
        {
            "model": V3,
            "phase": "decode",
            "seq_len": 4096,
            "batch": 8,
            "q_len": None,
            "impl": None,
            "causal": False,
            "weight_dtype": None,
            "kv_dtype": "bf16",
            "act_dtype": "bf16",
            "scope": "model",
        },
    ),
}

WRONG = st.sampled_from(
    [
        None,
        True,
        False,
        0,
        -1,
        1.5,
        math.nan,
        math.inf,
        10**30,
        2**41,
        "",
        "8",
        "abc",
        "decode",
        "naive",
        "standard",
        "fp6",
        [],
        {},
        (1,),
        b"x",
        np.int64(3),
        np.float64(2.0),
        np.array([0, 1]),
        object(),
    ]
)
EXTREME = st.one_of(st.integers(min_value=-(2**70), max_value=2**70), st.text(max_size=12))


def _names_an_argument(err: Exception, arguments: dict) -> bool:
    named = getattr(err, "argument", None) or getattr(err, "field", None)
    if named in arguments:
        return True
    if isinstance(err, (UnknownModelError, ConfigError)):
        return "model" in arguments
    if isinstance(err, UnknownHardwareError):
        return "hardware" in arguments
    return False


@pytest.fixture(scope="module", autouse=True)
def _warm():
    """Every function runs once on its base arguments (solving the symbolic closed forms, once
    per process) before its arguments are mutated."""
    for function, arguments in CALLS.values():
        function(**arguments)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), value=st.one_of(WRONG, EXTREME))
def test_a_mutated_argument_gives_a_result_or_an_error_naming_it(data, value):
    name = data.draw(st.sampled_from(sorted(CALLS)), label="function")
    function, base = CALLS[name]
    argument = data.draw(st.sampled_from(sorted(base)), label="argument")
    arguments = dict(base, **{argument: value})
    try:
        function(**arguments)
    except MlacalcError as err:
        assert _names_an_argument(err, arguments), (name, argument, value, err)


@pytest.mark.parametrize(
    "call, argument",
    [
        (lambda: mlacalc.kv_cache_bytes(V3, seq_len=0), "seq_len"),
        (lambda: mlacalc.kv_cache_bytes(V3, 4096, batch="8"), "batch"),
        (lambda: mlacalc.kv_cache_bytes(V3, 4096, batch=True), "batch"),
        (lambda: mlacalc.kv_cache_bytes(V3, 10**30), "seq_len"),
        (lambda: mlacalc.kv_cache_bytes(V3, 4096, include_mtp="no"), "include_mtp"),
        (lambda: mlacalc.attention_flops(V3, "decode", None), "seq_len"),
        (lambda: mlacalc.attention_flops(V3, ["decode"], 16), "phase"),
        (lambda: mlacalc.attention_flops(V3, "decode", 16, impl=3), "impl"),
        (lambda: mlacalc.attention_cost(V3, "decode", 16, act_dtype="fp99"), "act_dtype"),
        (lambda: mlacalc.attention_cost(V3, "decode", 16, kv_dtype=0), "kv_dtype"),
        (lambda: mlacalc.param_counts(None), "model"),
        (lambda: mlacalc.weight_bytes(V3, include_mtp=1), "include_mtp"),
        (lambda: mlacalc.formula("kv_cache_bytes", "gqa", causal="yes"), "causal"),
        (lambda: mlacalc.formula("kv_cache_bytes", "gqa", stage="core"), "stage"),
        (lambda: mlacalc.sweep(V3, "kv_cache_bytes", seq_len=[1.5]), "seq_len"),
        (lambda: mlacalc.sweep(V3, "kv_cache_bytes", seq_len=np.array([np.nan])), "seq_len"),
        (lambda: as_variant(V3, "gqa", num_key_value_heads=True), "num_key_value_heads"),
        (lambda: compute_bound_seq_len(V3, None), "hardware"),
        (lambda: absorption_crossover(V3, seq_len=-1), "seq_len"),
        (lambda: step_kernels(V3, "decode", 16, scope="gpu"), "scope"),
    ],
)
def test_examples_name_the_argument(call, argument):
    with pytest.raises((InvalidArgumentError, UnknownDtypeError)) as info:
        call()
    assert info.value.argument == argument
    assert str(info.value).startswith(f"{argument}: ")


def test_a_wrong_type_is_said_with_its_article():
    """Was "got 5 (a int)" and "None (a NoneType)": the article follows the type's name."""
    import pytest

    from mlacalc.words.arguments import show_value
    from mlacalc.words.engines import check_engine
    from mlacalc.words.errors import InvalidArgumentError

    assert show_value(5) == "5 (an int)" and show_value(2.5) == "2.5 (a float)"
    assert show_value(None) == "None"
    with pytest.raises(InvalidArgumentError, match=r"got 5 \(an int\)$"):
        check_engine(5)


@pytest.mark.parametrize(
    ("value", "shown"),
    [(1_000_000_000, "is 1,000,000,000, above"), (2**21, "is 2,097,152, above"),
     (10**30, "is a number of 31 digits, above")],
)  # fmt: skip
def test_a_count_over_its_bound_is_said_as_the_whole_number_given(value, shown):
    """A count past its bound was printed as ``1e+09`` (a float's form for a whole number)."""
    with pytest.raises(mlacalc.InvalidArgumentError) as err:
        count("kv_lora_rank", value, 1 << 20)
    assert shown in str(err.value) and "e+" not in str(err.value)
    assert "above the bound of 1,048,576 (2^20)" in str(err.value)
