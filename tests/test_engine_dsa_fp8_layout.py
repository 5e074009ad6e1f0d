"""A DSA model's fp8 cache in a layout the engine does not store it in is said, naming the one
it stores, as a format the engine does not offer is (trial round 29, finding 3: DeepSeek-V3.2
under vLLM with ``fp8_e5m2`` planned 43,188 B a token in plain fp8 where vLLM stores
``fp8_ds_mla``, and under TensorRT-LLM ``fp8_ds_mla`` planned 48,068 B where it stores plain
fp8, both with no word; the app's planner showed the second with no note either)."""

from __future__ import annotations

import pytest

from mlacalc import load_model, plan
from mlacalc.serving.plan_checks import _DSA_FP8_STORED, engine_runs_kv

KW = dict(isl=8192, osl=512, concurrency=8)


def _said(model: str, kv: str, engine: str) -> list[str]:
    return [w for w in plan(model, "B200", 8, kv_dtype=kv, engine=engine, **KW).warnings
            if "under --engine" in w]  # fmt: skip


def test_vllm_names_fp8_ds_mla_for_another_fp8_on_dsa():
    (w,) = _said("deepseek-v3.2", "fp8_e5m2", "vllm")
    assert "vLLM stores DeepSeek-V3.2's (DSA) fp8 latent cache as fp8_ds_mla, 656 B" in w
    assert "not fp8_e5m2 (576 B)" in w and "--kv-dtype fp8_ds_mla counts" in w
    assert _said("deepseek-v3.2", "fp8_e4m3", "vllm")
    # the formats vLLM stores (fp8 is sized as fp8_ds_mla, and said so by its own note)
    assert not _said("deepseek-v3.2", "fp8_ds_mla", "vllm")
    assert not _said("deepseek-v3.2", "fp8", "vllm")


def test_trtllm_names_plain_fp8_for_the_sparse_layout_on_dsa():
    (w,) = _said("deepseek-v3.2", "fp8_ds_mla", "trtllm")
    assert "TensorRT-LLM stores DeepSeek-V3.2's (DSA) fp8 latent cache as plain fp8" in w
    assert "576 B" in w and "not fp8_ds_mla (656 B)" in w and "--kv-dtype fp8 counts" in w
    assert not _said("deepseek-v3.2", "fp8", "trtllm")
    assert not _said("deepseek-v3.2", "fp8_e4m3", "trtllm")


@pytest.mark.parametrize(
    ("model", "kv", "engine", "runs"),
    [
        ("deepseek-v3.2", "fp8_e5m2", "vllm", False),
        ("deepseek-v3.2", "fp8_ds_mla", "trtllm", False),
        ("deepseek-v3.2", "fp8_ds_mla", "vllm", True),
        ("deepseek-v3.2", "fp8_ds_mla", "sglang", True),
        ("deepseek-v3.2", "bf16", "trtllm", True),
        ("deepseek-v3", "fp8_e5m2", "vllm", True),  # no DSA: vLLM's MLA takes it
        ("glm-5.1", "fp8_e5m2", "vllm", False),  # GLM-5.1 has DSA too
    ],
)
def test_search_ranks_a_layout_the_engine_stores_first(model, kv, engine, runs):
    """``engine_runs_kv`` (search prefers such points) agrees with the words; each row is one
    the rule turns on or off, so a rule that said every fp8 or none fails one."""
    assert engine_runs_kv(load_model(model), kv, engine) is runs


def test_every_stored_layout_is_a_known_fp8_layout():
    from mlacalc.words.dtypes import resolve_kv_layout

    for names in _DSA_FP8_STORED.values():
        for name in names:
            assert resolve_kv_layout(name).bits == 8


def test_the_apps_planner_says_it_too():
    """The trial's app: DeepSeek-V3.2 under the default engine (TensorRT-LLM) with
    ``kv=fp8_ds_mla`` planned 48,068 B a token with no note."""
    pytest.importorskip("streamlit")
    from _helpers import run_app

    at = run_app("Capacity planner", model="deepseek-v3.2", hw="H200", kv="fp8_ds_mla",
                 gpus="8", tp="8", engine="trtllm")  # fmt: skip
    said = [i.value for i in at.info if "stores DeepSeek-V3.2's (DSA) fp8 latent" in i.value]
    assert len(said) == 1 and "as plain fp8" in said[0]
