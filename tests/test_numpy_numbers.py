"""numpy number scalars are numbers wherever plan() and search() take one.

A mutation over every numeric argument: each given as a numpy scalar (np.int64 for a count or
a whole-valued real, np.float32 / np.float16 for a real) must plan or search exactly as the
Python number does. Before: concurrency=np.int64(4) was refused with "must be a number in >=
1.0, got np.int64(4)" (which reads as false), request_rate=np.int64(2) "(a int64)", and
memory_reserve / prefix_cache_hit / mtp_acceptance / host times as np.float32, and search's
gpus / isl / osl / ttft / tpot / output_lag_steps as numpy numbers, likewise."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import mlacalc
from mlacalc.serving.plan_checks import check_number
from mlacalc.words.arguments import real
from mlacalc.words.errors import InvalidArgumentError

LLAMA = dict(model="llama-3-8b", hardware="H200", gpus=1, isl=2000, osl=100, concurrency=4)
MOE = dict(LLAMA, model="qwen3-30b-a3b", gpus=2, ep=2)
V3 = dict(LLAMA, model="deepseek-v3", gpus=8, tp=8, mtp_tokens=1)
SIZED = dict(model="llama-3-8b", hardware="H200", gpus=1, batch=8)  # no request mix

#: plan()'s numeric arguments: (base call, name, Python value); reals get np.float32 too
PLAN_REALS = [
    (LLAMA, "concurrency", 4),
    (LLAMA, "memory_reserve", 0.25),
    (LLAMA, "prefix_cache_hit", 0.5),
    (LLAMA, "host_step_s", 0.001),
    (LLAMA, "host_per_sequence_s", 0.0001),
    (LLAMA, "launch_s", 0.00001),
    (MOE, "routing_imbalance", 1),
    (MOE, "expert_skew", 1),
    (V3, "mtp_acceptance", 0.5),
    (V3, "mtp_acceptance_length", 1.5),
]
PLAN_COUNTS = [
    (LLAMA, "gpus", 1),
    (LLAMA, "isl", 2000),
    (LLAMA, "osl", 100),
    (LLAMA, "page_size", 32),
    (SIZED, "seq_len", 4096),
    (SIZED, "batch", 8),
    (LLAMA, "chunked_prefill", 512),
    (LLAMA, "max_running", 64),
    (LLAMA, "max_tokens", 8192),
    (LLAMA, "cuda_graph_max_batch", 64),
    (LLAMA, "output_lag_steps", 1),
    (LLAMA, "tp", 1),
    (LLAMA, "pp", 1),
    (MOE, "ep", 2),
    (MOE, "redundant_experts", 2),
    (V3, "mtp_tokens", 1),
]


def _numpy_forms(value: float) -> list:
    forms = [np.float32(value), np.float16(value)] if value <= 1e4 else [np.float32(value)]
    if value == int(value):
        forms.append(np.int64(int(value)))
    return forms


def _plan(base: dict, **change):
    args = dict(base, **change)
    if change.get("request_rate") is not None:
        args.pop("concurrency")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return mlacalc.plan(args.pop("model"), args.pop("hardware"), args.pop("gpus"), **args)


@pytest.mark.parametrize("base, name, value", PLAN_REALS, ids=[c[1] for c in PLAN_REALS])
def test_plan_takes_numpy_reals(base, name, value):
    want = _plan(base, **{name: value}).to_dict()
    for number in _numpy_forms(value):
        if name == "mtp_acceptance_length" and isinstance(number, np.float16):
            continue  # 1.5 prints 1.5 at every width; one form is enough
        assert _plan(base, **{name: number}).to_dict() == want, (name, repr(number))


def test_plan_takes_a_numpy_request_rate():
    want = _plan(LLAMA, request_rate=2.0).to_dict()
    for number in (np.int64(2), np.float32(2.0), np.float16(2.0)):
        assert _plan(LLAMA, request_rate=number).to_dict() == want, repr(number)


@pytest.mark.parametrize("base, name, value", PLAN_COUNTS, ids=[c[1] for c in PLAN_COUNTS])
def test_plan_takes_numpy_counts(base, name, value):
    want = _plan(base, **{name: value}).to_dict()
    for number in (np.int64(value), np.int32(value), np.uint16(value)):
        assert _plan(base, **{name: number}).to_dict() == want, (name, repr(number))


SEARCH = dict(
    model="llama-3-8b",
    hardware="H200",
    gpus=(1,),
    isl=2000,
    osl=100,
    batches=(16,),
    kv_dtypes=("bf16",),
    modes=("aggregated",),
    overlaps=("none",),
    chunked_prefills=(),
)
SEARCH_REALS = [
    (SEARCH, "ttft", 2),
    (SEARCH, "tpot", 0.05),
    (SEARCH, "memory_reserve", 0.25),
    (SEARCH, "prefix_cache_hit", 0.5),
    (dict(SEARCH, model="qwen3-30b-a3b", gpus=(2,)), "routing_imbalance", 1),
    (dict(SEARCH, model="qwen3-30b-a3b", gpus=(2,)), "expert_skew", 1),
]
SEARCH_COUNTS = [
    (SEARCH, "gpus", (1,)),
    (SEARCH, "gpus", 1),
    (SEARCH, "isl", 2000),
    (SEARCH, "osl", 100),
    (SEARCH, "batches", (16,)),
    (SEARCH, "page_size", 32),
    (SEARCH, "output_lag_steps", 1),
    (SEARCH, "max_running", 64),
    (SEARCH, "max_tokens", 8192),
    (SEARCH, "chunked_prefills", (512,)),
    (SEARCH, "tp", 1),
    (SEARCH, "pp", 1),
    (dict(SEARCH, model="qwen3-30b-a3b", gpus=(2,)), "ep", 2),
    (dict(SEARCH, model="qwen3-30b-a3b", gpus=(2,)), "redundant_experts", 2),
]


def _search(base: dict, **change):
    args = dict(base, **change)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = mlacalc.search(args.pop("model"), args.pop("hardware"), **args).to_dict()
    out.pop("seconds", None)  # wall clock
    return out


@pytest.mark.parametrize("base, name, value", SEARCH_REALS, ids=[c[1] for c in SEARCH_REALS])
def test_search_takes_numpy_reals(base, name, value):
    want = _search(base, **{name: value})
    for number in _numpy_forms(value)[::2]:  # np.float32, and np.int64 where whole
        assert _search(base, **{name: number}) == want, (name, repr(number))


@pytest.mark.parametrize("base, name, value", SEARCH_COUNTS, ids=[c[1] for c in SEARCH_COUNTS])
def test_search_takes_numpy_counts(base, name, value):
    want = _search(base, **{name: value})
    number = tuple(np.int64(v) for v in value) if isinstance(value, tuple) else np.int64(value)
    assert _search(base, **{name: number}) == want, (name, repr(number))


def test_real_reads_a_narrow_float_as_printed_and_refuses_what_is_not_a_number():
    assert real(np.float32(0.29)) == 0.29 and real(np.int64(4)) == 4.0
    for bad in (True, np.bool_(True), "0.5", None, 1j, 10**400):
        assert real(bad) is None, repr(bad)


def test_a_one_sided_span_reads_as_a_bound():
    # before: "concurrency: must be a number in >= 1.0, got 0.5"
    with pytest.raises(InvalidArgumentError) as err:
        check_number("concurrency", 0.5, 1.0)
    assert str(err.value) == "concurrency: must be a number >= 1.0, got 0.5"
    with pytest.raises(InvalidArgumentError, match=r"must be a number in \[0.0, 1.0\)"):
        check_number("memory_reserve", np.float32(1.0), 0.0, 1.0)
